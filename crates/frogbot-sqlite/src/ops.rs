//! The store's operations as plain synchronous functions over a rusqlite [`Connection`]. Writes
//! run on the writer thread inside a transaction (and a savepoint of their own), reads on a reader
//! connection; nothing here begins, commits or rolls back.
//!
//! Because every write of this database goes through one writer that holds `BEGIN IMMEDIATE`,
//! an operation may read a row and then decide in Rust: no other writer (thread or process) can
//! change the row in between.

use rusqlite::{Connection, ErrorCode, Params, Row, params};
use serde_json::Value;

use frogbot_core::model::{
    Actor, ChannelRef, ChatId, Delivery, MessageStatus, Millis, QuestionOutcome, QuestionRecord,
    Role, TurnState, UiMessage, UserId,
};
use frogbot_core::store::*;

// ---- errors --------------------------------------------------------------------------------------

/// An operation's error: SQLite's, or one of the store's rules.
#[derive(Debug)]
pub(crate) enum E {
    Sql(rusqlite::Error),
    Core(StoreError),
}

impl From<rusqlite::Error> for E {
    fn from(e: rusqlite::Error) -> Self {
        E::Sql(e)
    }
}

impl From<StoreError> for E {
    fn from(e: StoreError) -> Self {
        E::Core(e)
    }
}

impl From<serde_json::Error> for E {
    fn from(e: serde_json::Error) -> Self {
        E::Core(StoreError::corrupt("a value does not encode as JSON", e))
    }
}

impl E {
    /// The store error, naming what failed.
    pub(crate) fn into_error(self, what: &str) -> StoreError {
        match self {
            E::Sql(e) => storage(what, e),
            E::Core(e) => e,
        }
    }
}

pub(crate) type R<T> = std::result::Result<T, E>;

/// A SQLite failure as [`StoreError::Unavailable`], saying what failed, with the driver's error
/// as its source.
pub(crate) fn storage(what: &str, e: rusqlite::Error) -> StoreError {
    StoreError::unavailable(storage_message(what, &e), e)
}

/// The sentence of [`storage`]'s error.
pub(crate) fn storage_message(what: &str, e: &rusqlite::Error) -> String {
    if let rusqlite::Error::SqliteFailure(f, _) = e
        && matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    {
        return format!(
            "{what}: the database is locked by another writer (another process on the same file?) \
             past the busy timeout: {e}"
        );
    }
    format!("{what}: {e}")
}

// ---- rows ----------------------------------------------------------------------------------------

macro_rules! chat_cols {
    () => {
        "chat_id, owner, channel_platform, channel_thread, created_at, updated_at, \
         awaiting_message_id, lease_holder, lease_token, lease_until, driver, version, agent"
    };
}
macro_rules! msg_cols {
    () => {
        "seq, chat_id, id, role, author, queued, delivery, position, sub, body, version"
    };
}
macro_rules! question_cols {
    () => {
        "chat_id, tool_call_id, message_id, call_index, input, record, rendered, posting, outcome, \
         actor, outcome_at, closed, answer_deadline, created_at, updated_at, expires_at, \
         lock_holder, lock_until"
    };
}
macro_rules! job_cols {
    () => {
        "id, kind, key, payload, run_at, attempts, claimed_by, claim_until, last_error, dead, generation"
    };
}

fn chat_id(s: String) -> R<ChatId> {
    ChatId::new(s).map_err(|e| E::Core(StoreError::corrupt_msg(e.to_string())))
}

fn from_json<T: serde::de::DeserializeOwned>(what: &str, s: &str) -> R<T> {
    serde_json::from_str(s).map_err(|e| E::Core(StoreError::corrupt_msg(format!("{what}: {e}"))))
}

fn to_json<T: serde::Serialize>(v: &T) -> R<String> {
    Ok(serde_json::to_string(v)?)
}

/// The body stored for a message: the message without the column-owned `status` and `delivery`.
pub(crate) fn message_body(m: &UiMessage) -> frogbot_core::store::Result<String> {
    let mut m = m.clone();
    m.metadata.status = None;
    m.metadata.delivery = None;
    serde_json::to_string(&m)
        .map_err(|e| StoreError::corrupt("a message does not encode as JSON", e))
}

fn parse_delivery(s: &str) -> R<Delivery> {
    match s {
        "queue" => Ok(Delivery::Queue),
        "steer" => Ok(Delivery::Steer),
        other => Err(E::Core(StoreError::corrupt_msg(format!(
            "delivery {other:?}"
        )))),
    }
}

fn chat_row(r: &Row<'_>) -> R<ChatRow> {
    let platform: Option<String> = r.get(2)?;
    let thread: Option<String> = r.get(3)?;
    let holder: Option<String> = r.get(7)?;
    let lease = match holder {
        Some(holder) => Some(LeaseInfo {
            holder,
            token: r.get(8)?,
            expires_at: r.get(9)?,
            driver: r.get::<_, Option<String>>(10)?.map(UserId),
        }),
        None => None,
    };
    Ok(ChatRow {
        chat_id: chat_id(r.get(0)?)?,
        owner: r.get::<_, Option<String>>(1)?.map(UserId),
        channel: match (platform, thread) {
            (Some(platform), Some(thread)) => Some(ChannelRef { platform, thread }),
            _ => None,
        },
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
        awaiting_message_id: r.get(6)?,
        lease,
        version: r.get(11)?,
        agent: r.get(12)?,
    })
}

/// A stored message as read back, from what was written (saves parsing the body again).
#[allow(clippy::too_many_arguments)]
fn stored(
    chat: &ChatId,
    m: &UiMessage,
    seq: i64,
    position: Option<i64>,
    sub: i64,
    queued: bool,
    delivery: Delivery,
    version: i64,
) -> StoredMessage {
    let mut message = m.clone();
    message.metadata.status = queued.then_some(MessageStatus::Queued);
    message.metadata.delivery = queued.then_some(delivery);
    StoredMessage {
        chat_id: chat.clone(),
        message,
        seq,
        position,
        sub,
        queued,
        delivery,
        version,
    }
}

fn message_row(r: &Row<'_>) -> R<StoredMessage> {
    let body: String = r.get(9)?;
    let mut message: UiMessage = from_json("message body", &body)?;
    let queued: bool = r.get(5)?;
    let delivery = parse_delivery(&r.get::<_, String>(6)?)?;
    message.metadata.status = queued.then_some(MessageStatus::Queued);
    message.metadata.delivery = queued.then_some(delivery);
    Ok(StoredMessage {
        chat_id: chat_id(r.get(1)?)?,
        message,
        seq: r.get(0)?,
        position: r.get(7)?,
        sub: r.get(8)?,
        queued,
        delivery,
        version: r.get(10)?,
    })
}

fn question_row(r: &Row<'_>) -> R<QuestionRow> {
    let outcome: Option<String> = r.get(8)?;
    let actor: Option<String> = r.get(9)?;
    Ok(QuestionRow {
        chat_id: chat_id(r.get(0)?)?,
        tool_call_id: r.get(1)?,
        message_id: r.get(2)?,
        call_index: r.get(3)?,
        input: from_json("question input", &r.get::<_, String>(4)?)?,
        record: from_json("question record", &r.get::<_, String>(5)?)?,
        rendered: r.get(6)?,
        posting: r.get(7)?,
        outcome: outcome
            .map(|o| from_json::<QuestionOutcome>("question outcome", &o))
            .transpose()?,
        actor: actor
            .map(|a| from_json::<Actor>("question actor", &a))
            .transpose()?,
        outcome_at: r.get(10)?,
        closed: r.get(11)?,
        answer_deadline: r.get(12)?,
        created_at: r.get(13)?,
        updated_at: r.get(14)?,
        expires_at: r.get(15)?,
        lock_holder: r.get(16)?,
        lock_until: r.get(17)?,
    })
}

fn job_row(r: &Row<'_>) -> R<Job> {
    Ok(Job {
        id: r.get(0)?,
        kind: r.get(1)?,
        key: r.get(2)?,
        payload: from_json::<Value>("job payload", &r.get::<_, String>(3)?)?,
        run_at: r.get(4)?,
        attempts: r.get(5)?,
        claimed_by: r.get(6)?,
        claim_until: r.get(7)?,
        last_error: r.get(8)?,
        dead: r.get(9)?,
        generation: r.get(10)?,
    })
}

// ---- statement helpers ---------------------------------------------------------------------------

fn opt<T>(c: &Connection, sql: &str, p: impl Params, f: impl Fn(&Row<'_>) -> R<T>) -> R<Option<T>> {
    let mut stmt = c.prepare_cached(sql)?;
    let mut rows = stmt.query(p)?;
    match rows.next()? {
        Some(r) => Ok(Some(f(r)?)),
        None => Ok(None),
    }
}

fn all<T>(c: &Connection, sql: &str, p: impl Params, f: impl Fn(&Row<'_>) -> R<T>) -> R<Vec<T>> {
    let mut stmt = c.prepare_cached(sql)?;
    let mut rows = stmt.query(p)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(f(r)?);
    }
    Ok(out)
}

fn exec(c: &Connection, sql: &str, p: impl Params) -> R<usize> {
    Ok(c.prepare_cached(sql)?.execute(p)?)
}

fn int(r: &Row<'_>) -> R<i64> {
    Ok(r.get(0)?)
}

fn lease_lost(lease: &Lease) -> E {
    E::Core(StoreError::LeaseLost {
        chat_id: lease.chat_id.clone(),
    })
}

// ---- reads ---------------------------------------------------------------------------------------

pub(crate) fn ping(c: &Connection) -> R<()> {
    opt(c, "SELECT 1", [], int)?;
    Ok(())
}

pub(crate) fn get_chat(c: &Connection, chat: &ChatId) -> R<Option<ChatRow>> {
    opt(
        c,
        concat!("SELECT ", chat_cols!(), " FROM chats WHERE chat_id = ?1"),
        [chat.as_str()],
        chat_row,
    )
}

fn chat_after(c: &Connection, chat: &ChatId) -> R<ChatRow> {
    get_chat(c, chat)?
        .ok_or_else(|| E::Core(StoreError::corrupt_msg(format!("chat {chat} vanished"))))
}

pub(crate) fn get_channel_chat(c: &Connection, platform: &str, thread: &str) -> R<Option<ChatRow>> {
    opt(
        c,
        concat!(
            "SELECT ",
            chat_cols!(),
            " FROM chats WHERE channel_platform = ?1 AND channel_thread = ?2"
        ),
        [platform, thread],
        chat_row,
    )
}

pub(crate) fn list_chats(c: &Connection, owner: Option<&UserId>, limit: u32) -> R<Vec<ChatRow>> {
    match owner {
        Some(owner) => all(
            c,
            concat!(
                "SELECT ",
                chat_cols!(),
                " FROM chats WHERE owner = ?1 ORDER BY updated_at DESC, chat_id LIMIT ?2"
            ),
            params![owner.as_str(), i64::from(limit)],
            chat_row,
        ),
        None => all(
            c,
            concat!(
                "SELECT ",
                chat_cols!(),
                " FROM chats WHERE owner IS NULL ORDER BY updated_at DESC, chat_id LIMIT ?1"
            ),
            [i64::from(limit)],
            chat_row,
        ),
    }
}

pub(crate) fn get_message(c: &Connection, chat: &ChatId, id: &str) -> R<Option<StoredMessage>> {
    opt(
        c,
        concat!(
            "SELECT ",
            msg_cols!(),
            " FROM messages WHERE chat_id = ?1 AND id = ?2"
        ),
        [chat.as_str(), id],
        message_row,
    )
}

pub(crate) fn list_messages(c: &Connection, chat: &ChatId) -> R<Vec<StoredMessage>> {
    all(
        c,
        concat!(
            "SELECT ",
            msg_cols!(),
            " FROM messages WHERE chat_id = ?1 ORDER BY (position IS NULL), position, sub, seq"
        ),
        [chat.as_str()],
        message_row,
    )
}

pub(crate) fn messages_since(c: &Connection, chat: &ChatId, version: i64) -> R<ChatChanges> {
    // One snapshot for both reads, so the version returned covers exactly the messages returned
    // (on the writer, for an in-memory database, the batch's transaction is that snapshot).
    let tx = if c.is_autocommit() {
        Some(c.unchecked_transaction()?)
    } else {
        None
    };
    let now = opt(
        c,
        "SELECT version FROM chats WHERE chat_id = ?1",
        [chat.as_str()],
        int,
    )?
    .unwrap_or(0);
    let messages = all(
        c,
        concat!(
            "SELECT ",
            msg_cols!(),
            " FROM messages WHERE chat_id = ?1 AND version > ?2 \
             ORDER BY (position IS NULL), position, sub, seq"
        ),
        params![chat.as_str(), version],
        message_row,
    )?;
    if let Some(tx) = tx {
        tx.commit()?;
    }
    Ok(ChatChanges {
        version: now,
        messages,
    })
}

pub(crate) fn queued_messages(c: &Connection, chat: &ChatId) -> R<Vec<StoredMessage>> {
    all(
        c,
        concat!(
            "SELECT ",
            msg_cols!(),
            " FROM messages WHERE chat_id = ?1 AND queued = TRUE ORDER BY seq"
        ),
        [chat.as_str()],
        message_row,
    )
}

pub(crate) fn expired_leases(c: &Connection, now: Millis, limit: u32) -> R<Vec<ChatId>> {
    all(
        c,
        "SELECT chat_id FROM chats \
         WHERE lease_holder IS NOT NULL AND lease_until <= ?1 AND awaiting_message_id IS NULL \
         ORDER BY lease_until, chat_id LIMIT ?2",
        params![now, i64::from(limit)],
        |r| chat_id(r.get(0)?),
    )
}

pub(crate) fn get_question(
    c: &Connection,
    chat: &ChatId,
    tool_call_id: &str,
    now: Millis,
) -> R<Option<QuestionRow>> {
    opt(
        c,
        concat!(
            "SELECT ",
            question_cols!(),
            " FROM questions WHERE chat_id = ?1 AND tool_call_id = ?2 AND expires_at > ?3"
        ),
        params![chat.as_str(), tool_call_id, now],
        question_row,
    )
}

pub(crate) fn questions_of_message(
    c: &Connection,
    chat: &ChatId,
    message_id: &str,
    now: Millis,
) -> R<Vec<QuestionRow>> {
    all(
        c,
        concat!(
            "SELECT ",
            question_cols!(),
            " FROM questions WHERE chat_id = ?1 AND message_id = ?2 AND expires_at > ?3 \
             ORDER BY call_index, tool_call_id"
        ),
        params![chat.as_str(), message_id, now],
        question_row,
    )
}

pub(crate) fn questions_by_platform_message(
    c: &Connection,
    platform: &str,
    message_id: &str,
    now: Millis,
) -> R<Vec<QuestionRow>> {
    all(
        c,
        "SELECT q.chat_id, q.tool_call_id, q.message_id, q.call_index, q.input, q.record, \
                q.rendered, q.posting, q.outcome, q.actor, q.outcome_at, q.closed, \
                q.answer_deadline, q.created_at, q.updated_at, q.expires_at, q.lock_holder, \
                q.lock_until \
         FROM question_links l \
         JOIN questions q ON q.chat_id = l.chat_id AND q.tool_call_id = l.tool_call_id \
         WHERE l.platform = ?1 AND l.message_id = ?2 AND q.expires_at > ?3 \
         ORDER BY q.chat_id, q.call_index, q.tool_call_id",
        params![platform, message_id, now],
        question_row,
    )
}

pub(crate) fn get_job(c: &Connection, id: i64) -> R<Option<Job>> {
    opt(
        c,
        concat!("SELECT ", job_cols!(), " FROM jobs WHERE id = ?1"),
        [id],
        job_row,
    )
}

// ---- message writes ------------------------------------------------------------------------------

/// Raises the chat's version for one message write and returns the new version.
fn bump(c: &Connection, chat: &ChatId) -> R<i64> {
    opt(
        c,
        "UPDATE chats SET version = version + 1 WHERE chat_id = ?1 RETURNING version",
        [chat.as_str()],
        int,
    )?
    .ok_or_else(|| E::Core(StoreError::not_found(Item::Chat, chat.as_str())))
}

fn next_position(c: &Connection, chat: &ChatId) -> R<i64> {
    Ok(opt(
        c,
        "SELECT COALESCE(MAX(position), 0) + 1 FROM messages WHERE chat_id = ?1",
        [chat.as_str()],
        int,
    )?
    .unwrap_or(1))
}

/// Inserts or replaces a message of a turn at (`position`, `sub`), no longer queued.
#[allow(clippy::too_many_arguments)]
fn put_turn_message(
    c: &Connection,
    chat: &ChatId,
    m: &UiMessage,
    body: &str,
    position: i64,
    sub: i64,
    delivery: Delivery,
    now: Millis,
) -> R<StoredMessage> {
    let version = bump(c, chat)?;
    // The common case — a reply rewritten at its place by the next step — sets only what changed,
    // so the indexes on the other columns are left alone; anything else takes the upsert.
    let rewritten = opt(
        c,
        "UPDATE messages SET body = ?3, updated_at = ?4, version = ?5 \
         WHERE chat_id = ?1 AND id = ?2 AND queued = FALSE AND position = ?6 AND sub = ?7 \
           AND role = ?8 AND author IS ?9 \
         RETURNING seq, delivery",
        params![
            chat.as_str(),
            m.id,
            body,
            now,
            version,
            position,
            sub,
            m.role.as_str(),
            m.metadata.author.as_ref().map(UserId::as_str),
        ],
        |r| {
            Ok((
                r.get::<_, i64>(0)?,
                parse_delivery(&r.get::<_, String>(1)?)?,
            ))
        },
    )?;
    let (seq, delivery) = match rewritten {
        Some(found) => found,
        None => opt(
        c,
        "INSERT INTO messages (chat_id, id, role, author, queued, delivery, position, sub, body, \
                               created_at, updated_at, version) \
         VALUES (?1, ?2, ?3, ?4, FALSE, ?5, ?6, ?7, ?8, ?9, ?9, ?10) \
         ON CONFLICT (chat_id, id) DO UPDATE SET role = excluded.role, author = excluded.author, \
            queued = FALSE, position = excluded.position, sub = excluded.sub, body = excluded.body, \
            updated_at = excluded.updated_at, version = excluded.version \
         RETURNING seq, delivery",
        params![
            chat.as_str(),
            m.id,
            m.role.as_str(),
            m.metadata.author.as_ref().map(UserId::as_str),
            delivery.as_str(),
            position,
            sub,
            body,
            now,
            version
        ],
        |r| Ok((r.get::<_, i64>(0)?, parse_delivery(&r.get::<_, String>(1)?)?)),
    )?
    .ok_or_else(|| E::Core(StoreError::corrupt_msg("upsert returned nothing")))?,
    };
    Ok(stored(
        chat,
        m,
        seq,
        Some(position),
        sub,
        false,
        delivery,
        version,
    ))
}

fn insert_queued(
    c: &Connection,
    chat: &ChatId,
    m: &UiMessage,
    body: &str,
    delivery: Delivery,
    now: Millis,
) -> R<StoredMessage> {
    let version = bump(c, chat)?;
    let seq = opt(
        c,
        "INSERT INTO messages (chat_id, id, role, author, queued, delivery, position, sub, body, \
                               created_at, updated_at, version) \
         VALUES (?1, ?2, ?3, ?4, TRUE, ?5, NULL, 0, ?6, ?7, ?7, ?8) RETURNING seq",
        params![
            chat.as_str(),
            m.id,
            m.role.as_str(),
            m.metadata.author.as_ref().map(UserId::as_str),
            delivery.as_str(),
            body,
            now,
            version
        ],
        int,
    )?
    .ok_or_else(|| E::Core(StoreError::corrupt_msg("insert returned nothing")))?;
    Ok(stored(chat, m, seq, None, 0, true, delivery, version))
}

/// Moves a queued message into the turn at `position` with `sub` (0: the turn's user message; its
/// `seq`: a joined steer).
fn unqueue(
    c: &Connection,
    chat: &ChatId,
    seq: i64,
    position: i64,
    steer: bool,
    now: Millis,
) -> R<StoredMessage> {
    let version = bump(c, chat)?;
    opt(
        c,
        concat!(
            "UPDATE messages SET queued = FALSE, position = ?3, \
                    sub = CASE WHEN ?4 THEN seq ELSE 0 END, version = ?5, updated_at = ?6 \
             WHERE chat_id = ?1 AND seq = ?2 RETURNING ",
            msg_cols!()
        ),
        params![chat.as_str(), seq, position, steer, version, now],
        message_row,
    )?
    .ok_or_else(|| {
        E::Core(StoreError::corrupt_msg(format!(
            "queued message {seq} vanished"
        )))
    })
}

fn oldest_queued(c: &Connection, chat: &ChatId) -> R<Option<i64>> {
    opt(
        c,
        "SELECT seq FROM messages WHERE chat_id = ?1 AND queued = TRUE ORDER BY seq LIMIT 1",
        [chat.as_str()],
        int,
    )
}

/// Promotes the oldest queued message to a new turn position. `None` when nothing is queued.
fn promote_next(c: &Connection, chat: &ChatId, now: Millis) -> R<Option<StoredMessage>> {
    let Some(seq) = oldest_queued(c, chat)? else {
        return Ok(None);
    };
    let position = next_position(c, chat)?;
    Ok(Some(unqueue(c, chat, seq, position, false, now)?))
}

/// The recorded outcomes of `message`'s question calls: (tool call id, outcome).
fn recorded_outcomes(
    c: &Connection,
    chat: &ChatId,
    message: &str,
) -> R<Vec<(String, QuestionOutcome)>> {
    all(
        c,
        "SELECT tool_call_id, outcome FROM questions \
         WHERE chat_id = ?1 AND message_id = ?2 AND outcome IS NOT NULL",
        params![chat.as_str(), message],
        |r| {
            let id: String = r.get(0)?;
            let outcome: String = r.get(1)?;
            Ok((
                id,
                from_json::<QuestionOutcome>("question outcome", &outcome)?,
            ))
        },
    )
}

/// Marks the last turn of the chat (its highest position) interrupted: see
/// [`interrupted_reply`], and writes what the reply owes its thread (`req.interrupted`). Called
/// when a lease is taken over, in its transaction.
fn mark_interrupted(c: &Connection, row: &ChatRow, req: &LeaseRequest) -> R<Option<StoredMessage>> {
    let (chat, now) = (&row.chat_id, req.now);
    let turn = all(
        c,
        concat!(
            "SELECT ",
            msg_cols!(),
            " FROM messages WHERE chat_id = ?1 AND queued = FALSE \
               AND position = (SELECT MAX(position) FROM messages WHERE chat_id = ?1) \
             ORDER BY sub, seq"
        ),
        [chat.as_str()],
        message_row,
    )?;
    let Some(position) = turn.first().and_then(|m| m.position) else {
        return Ok(None);
    };
    let new_id = uuid::Uuid::now_v7().to_string();
    let outcomes = match turn.iter().find(|m| m.message.role == Role::Assistant) {
        Some(reply) => recorded_outcomes(c, chat, &reply.message.id)?,
        None => Vec::new(),
    };
    let Some(reply) = interrupted_reply(&turn, &outcomes, &new_id, now) else {
        return Ok(None);
    };
    let body = message_body(&reply)?;
    let saved = put_turn_message(
        c,
        chat,
        &reply,
        &body,
        position,
        REPLY_SUB,
        Delivery::Queue,
        now,
    )?;
    if let Some(job) = req.interrupted.and_then(|d| d.job_for(row, &saved.message)) {
        enqueue_job(c, &job)?;
    }
    Ok(Some(saved))
}

// ---- leases --------------------------------------------------------------------------------------

/// Takes the chat's lease for `req` (the caller decided it is free or expired).
fn take_lease(c: &Connection, chat: &ChatId, req: &LeaseRequest, taken_over: bool) -> R<Lease> {
    let expires_at = req.now + req.ttl_ms;
    let token = opt(
        c,
        "UPDATE chats SET lease_holder = ?2, lease_token = lease_token + 1, lease_until = ?3, \
                driver = ?4, updated_at = ?5 \
         WHERE chat_id = ?1 RETURNING lease_token",
        params![
            chat.as_str(),
            req.holder,
            expires_at,
            req.driver.as_ref().map(UserId::as_str),
            req.now
        ],
        int,
    )?
    .ok_or_else(|| E::Core(StoreError::not_found(Item::Chat, chat.as_str())))?;
    Ok(Lease {
        chat_id: chat.clone(),
        holder: req.holder.clone(),
        token,
        expires_at,
        driver: req.driver.clone(),
        taken_over,
    })
}

/// Fences the operation with `lease`: touches the chat, or fails with `LeaseLost`.
/// Checks that `lease` still holds its chat. A read: the writer's transaction holds the database's
/// write lock, so nothing can take the chat between this check and the operation's writes (and the
/// chat's `updated_at` is left to the writes that mean something to a reader: start, end, release).
fn fence(c: &Connection, lease: &Lease, _now: Millis) -> R<()> {
    let held = opt(
        c,
        "SELECT 1 FROM chats WHERE chat_id = ?1 AND lease_holder = ?2 AND lease_token = ?3",
        params![lease.chat_id.as_str(), lease.holder, lease.token],
        int,
    )?;
    if held.is_some() {
        Ok(())
    } else {
        Err(lease_lost(lease))
    }
}

fn release(c: &Connection, chat: &ChatId, now: Millis) -> R<()> {
    exec(
        c,
        "UPDATE chats SET lease_holder = NULL, lease_until = 0, driver = NULL, updated_at = ?2 \
         WHERE chat_id = ?1",
        params![chat.as_str(), now],
    )?;
    Ok(())
}

fn set_driver(c: &Connection, chat: &ChatId, driver: Option<&UserId>) -> R<()> {
    exec(
        c,
        "UPDATE chats SET driver = ?2 WHERE chat_id = ?1",
        params![chat.as_str(), driver.map(UserId::as_str)],
    )?;
    Ok(())
}

pub(crate) fn renew_lease(c: &Connection, lease: &Lease, ttl_ms: Millis, now: Millis) -> R<Millis> {
    let expires_at = now + ttl_ms;
    let n = exec(
        c,
        "UPDATE chats SET lease_until = ?4 \
         WHERE chat_id = ?1 AND lease_holder = ?2 AND lease_token = ?3",
        params![
            lease.chat_id.as_str(),
            lease.holder,
            lease.token,
            expires_at
        ],
    )?;
    if n == 1 {
        Ok(expires_at)
    } else {
        Err(lease_lost(lease))
    }
}

pub(crate) fn expire_lease(c: &Connection, lease: &Lease, now: Millis) -> R<()> {
    let n = exec(
        c,
        "UPDATE chats SET lease_until = ?4 \
         WHERE chat_id = ?1 AND lease_holder = ?2 AND lease_token = ?3",
        params![lease.chat_id.as_str(), lease.holder, lease.token, now],
    )?;
    if n == 1 {
        Ok(())
    } else {
        Err(lease_lost(lease))
    }
}

// ---- turns ---------------------------------------------------------------------------------------

pub(crate) fn send(c: &Connection, op: &SendOp<'_>, body: &str) -> R<Sent> {
    let now = op.lease.now;
    let id = &op.chat.chat_id;
    let created = exec(
        c,
        "INSERT INTO chats (chat_id, owner, channel_platform, channel_thread, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?5) ON CONFLICT DO NOTHING",
        params![
            id.as_str(),
            op.chat.owner.as_ref().map(UserId::as_str),
            op.chat.channel.as_ref().map(|ch| ch.platform.as_str()),
            op.chat.channel.as_ref().map(|ch| ch.thread.as_str()),
            now
        ],
    )? == 1;
    let Some(chat) = get_chat(c, id)? else {
        // The insert met the channel-thread index: the thread has a chat under another id.
        return Err(E::Core(StoreError::ChannelChat {
            chat_id: id.clone(),
            reason: "is not its channel thread's chat: the thread has a chat of another id",
        }));
    };
    if !created {
        check_sender(&chat, op.chat, op.message)?;
    }
    if opt(
        c,
        "SELECT 1 FROM messages WHERE chat_id = ?1 AND id = ?2",
        [id.as_str(), op.message.id.as_str()],
        int,
    )?
    .is_some()
    {
        return Ok(Sent::Duplicate { chat });
    }
    let idle = chat.awaiting_message_id.is_none() && chat.live_lease(now).is_none();
    if idle {
        let taken_over = chat.lease.is_some();
        let lease = take_lease(c, id, op.lease, taken_over)?;
        let interrupted = if taken_over {
            mark_interrupted(c, &chat, op.lease)?
        } else {
            None
        };
        let position = next_position(c, id)?;
        let message = put_turn_message(c, id, op.message, body, position, 0, op.delivery, now)?;
        return Ok(Sent::Started {
            chat: chat_after(c, id)?,
            created,
            prior_version: chat.version,
            lease,
            message,
            interrupted,
        });
    }
    if !op.queue_if_busy {
        return Ok(Sent::Busy { chat });
    }
    let delivery = steer_or_queue(op.delivery, &chat, op.message.metadata.author.as_ref(), now);
    let message = insert_queued(c, id, op.message, body, delivery, now)?;
    exec(
        c,
        "UPDATE chats SET updated_at = ?2 WHERE chat_id = ?1",
        params![id.as_str(), now],
    )?;
    Ok(Sent::Queued {
        chat: chat_after(c, id)?,
        created,
        message,
        delivery,
    })
}

pub(crate) fn checkpoint(c: &Connection, op: &CheckpointOp<'_>, body: &str) -> R<Checkpointed> {
    let chat = &op.lease.chat_id;
    fence(c, op.lease, op.now)?;
    let mut steers = Vec::new();
    if op.join_steers {
        let seqs = all(
            c,
            "SELECT seq FROM messages WHERE chat_id = ?1 AND queued = TRUE AND delivery = 'steer' \
               AND role = 'user' AND author IS ?2 ORDER BY seq",
            params![chat.as_str(), op.lease.driver.as_ref().map(UserId::as_str)],
            int,
        )?;
        for seq in seqs {
            steers.push(unqueue(c, chat, seq, op.position, true, op.now)?);
        }
    }
    let reply = put_turn_message(
        c,
        chat,
        op.reply,
        body,
        op.position,
        REPLY_SUB,
        Delivery::Queue,
        op.now,
    )?;
    Ok(Checkpointed { reply, steers })
}

pub(crate) fn await_answers(c: &Connection, op: &AwaitOp<'_>, body: &str) -> R<StoredMessage> {
    let lease = op.lease;
    let n = exec(
        c,
        "UPDATE chats SET lease_holder = NULL, lease_until = 0, driver = NULL, \
                awaiting_message_id = ?4, updated_at = ?5 \
         WHERE chat_id = ?1 AND lease_holder = ?2 AND lease_token = ?3",
        params![
            lease.chat_id.as_str(),
            lease.holder,
            lease.token,
            op.reply.id,
            op.now
        ],
    )?;
    if n != 1 {
        return Err(lease_lost(lease));
    }
    let reply = put_turn_message(
        c,
        &lease.chat_id,
        op.reply,
        body,
        op.position,
        REPLY_SUB,
        Delivery::Queue,
        op.now,
    )?;
    insert_questions(c, op.questions, op.now)?;
    if let Some(job) = op.job {
        enqueue_job(c, job)?;
    }
    if let Some(job) = op.delivery {
        enqueue_job(c, job)?;
    }
    Ok(reply)
}

pub(crate) fn end_turn(c: &Connection, op: &EndTurnOp<'_>, body: Option<&str>) -> R<TurnEnded> {
    let chat = &op.lease.chat_id;
    fence(c, op.lease, op.now)?;
    let reply = match (op.reply, body) {
        (Some((m, position)), Some(body)) => Some(put_turn_message(
            c,
            chat,
            m,
            body,
            position,
            REPLY_SUB,
            Delivery::Queue,
            op.now,
        )?),
        _ => None,
    };
    if let Some(job) = op.delivery {
        enqueue_job(c, job)?;
    }
    match op.mode {
        EndMode::Next => match promote_next(c, chat, op.now)? {
            None => {
                release(c, chat, op.now)?;
                Ok(TurnEnded::Released { reply })
            }
            Some(next) => {
                let driver = next.author().cloned();
                set_driver(c, chat, driver.as_ref())?;
                Ok(TurnEnded::Promoted {
                    reply,
                    lease: Lease {
                        driver,
                        taken_over: false,
                        ..op.lease.clone()
                    },
                    next,
                })
            }
        },
        EndMode::Handoff(job) => {
            release(c, chat, op.now)?;
            let queued = oldest_queued(c, chat)?.is_some();
            if queued {
                enqueue_job(c, job)?;
            }
            Ok(TurnEnded::HandedOn { reply, queued })
        }
    }
}

pub(crate) fn take_chat(c: &Connection, id: &ChatId, req: &LeaseRequest) -> R<Option<Taken>> {
    let Some(chat) = get_chat(c, id)? else {
        return Ok(None);
    };
    if chat.awaiting_message_id.is_some() || chat.live_lease(req.now).is_some() {
        return Ok(None);
    }
    let taken_over = chat.lease.is_some();
    if !taken_over && oldest_queued(c, id)?.is_none() {
        // Free and nothing to run: nothing to change.
        return Ok(Some(Taken {
            interrupted: None,
            next: None,
        }));
    }
    let lease = take_lease(c, id, req, taken_over)?;
    let interrupted = if taken_over {
        mark_interrupted(c, &chat, req)?
    } else {
        None
    };
    match promote_next(c, id, req.now)? {
        Some(next) => {
            let driver = next.author().cloned();
            set_driver(c, id, driver.as_ref())?;
            Ok(Some(Taken {
                interrupted,
                next: Some((Lease { driver, ..lease }, next)),
            }))
        }
        None => {
            release(c, id, req.now)?;
            Ok(Some(Taken {
                interrupted,
                next: None,
            }))
        }
    }
}

pub(crate) fn resume_turn(
    c: &Connection,
    id: &ChatId,
    message_id: &str,
    req: &LeaseRequest,
) -> R<Resume> {
    let now = req.now;
    let questions = questions_of_message(c, id, message_id, now)?;
    if questions.iter().any(|q| q.outcome.is_none()) {
        return Ok(Resume::Open);
    }
    let Some(chat) = get_chat(c, id)? else {
        return Ok(Resume::NotWaiting);
    };
    if let Some(lease) = chat.live_lease(now) {
        return Ok(Resume::Busy {
            until: lease.expires_at,
        });
    }
    if chat.awaiting_message_id.as_deref() != Some(message_id) {
        return Ok(Resume::NotWaiting);
    }
    let Some(reply) = get_message(c, id, message_id)? else {
        return Err(E::Core(StoreError::corrupt_msg(format!(
            "chat {id} waits on message {message_id}, which is not stored"
        ))));
    };
    let lease = take_lease(c, id, req, chat.lease.is_some())?;
    exec(
        c,
        "UPDATE chats SET awaiting_message_id = NULL WHERE chat_id = ?1",
        [id.as_str()],
    )?;
    let latest = opt(
        c,
        concat!(
            "SELECT ",
            msg_cols!(),
            " FROM messages WHERE chat_id = ?1 AND role = 'user' AND queued = FALSE \
             ORDER BY position DESC, sub DESC, seq DESC LIMIT 1"
        ),
        [id.as_str()],
        message_row,
    )?;
    let (model, reasoning) = latest
        .map(|m| (m.message.metadata.model, m.message.metadata.reasoning))
        .unwrap_or_default();
    Ok(Resume::Taken {
        lease,
        reply,
        questions,
        model,
        reasoning,
    })
}

pub(crate) fn edit_queued(
    c: &Connection,
    chat: &ChatId,
    id: &str,
    by: Option<&UserId>,
    edit: &QueuedEdit,
    now: Millis,
) -> R<QueuedChange> {
    let Some(current) = get_message(c, chat, id)? else {
        return Ok(QueuedChange::NotFound);
    };
    if let Some(refused) = queued_refusal(
        current.message.role.as_str(),
        current.author().map(UserId::as_str),
        current.queued,
        by,
    ) {
        return Ok(refused);
    }
    let mut message = current.message.clone();
    if let Some(parts) = &edit.parts {
        message.parts = parts.clone();
    }
    let delivery = edit.delivery.unwrap_or(current.delivery);
    let version = bump(c, chat)?;
    exec(
        c,
        "UPDATE messages SET body = ?3, delivery = ?4, version = ?5, updated_at = ?6 \
         WHERE chat_id = ?1 AND seq = ?2",
        params![
            chat.as_str(),
            current.seq,
            message_body(&message)?,
            delivery.as_str(),
            version,
            now
        ],
    )?;
    exec(
        c,
        "UPDATE chats SET updated_at = ?2 WHERE chat_id = ?1",
        params![chat.as_str(), now],
    )?;
    Ok(QueuedChange::Done(Some(Box::new(stored(
        chat,
        &message,
        current.seq,
        None,
        current.sub,
        true,
        delivery,
        version,
    )))))
}

pub(crate) fn delete_queued(
    c: &Connection,
    chat: &ChatId,
    id: &str,
    by: Option<&UserId>,
    now: Millis,
) -> R<QueuedChange> {
    let Some(current) = get_message(c, chat, id)? else {
        return Ok(QueuedChange::NotFound);
    };
    if let Some(refused) = queued_refusal(
        current.message.role.as_str(),
        current.author().map(UserId::as_str),
        current.queued,
        by,
    ) {
        return Ok(refused);
    }
    bump(c, chat)?;
    exec(
        c,
        "DELETE FROM messages WHERE chat_id = ?1 AND seq = ?2",
        params![chat.as_str(), current.seq],
    )?;
    exec(
        c,
        "UPDATE chats SET updated_at = ?2 WHERE chat_id = ?1",
        params![chat.as_str(), now],
    )?;
    Ok(QueuedChange::Done(None))
}

// ---- questions -----------------------------------------------------------------------------------

pub(crate) fn insert_questions(c: &Connection, rows: &[NewQuestion], now: Millis) -> R<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let empty = to_json(&QuestionRecord {
        messages: vec![],
        revision: 0,
        state: None,
    })?;
    for q in rows {
        exec(
            c,
            "INSERT INTO questions (chat_id, tool_call_id, message_id, call_index, input, record, \
                                    revision, answer_deadline, created_at, updated_at, expires_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, ?8, ?8, ?9) \
             ON CONFLICT (chat_id, tool_call_id) DO NOTHING",
            params![
                q.chat_id.as_str(),
                q.tool_call_id,
                q.message_id,
                q.call_index,
                to_json(&q.input)?,
                empty,
                q.answer_deadline,
                now,
                now + QUESTION_TTL_MS
            ],
        )?;
    }
    Ok(())
}

fn link(c: &Connection, platform: &str, message_id: &str, chat: &ChatId, call: &str) -> R<()> {
    exec(
        c,
        "INSERT INTO question_links (platform, message_id, chat_id, tool_call_id) \
         VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
        params![platform, message_id, chat.as_str(), call],
    )?;
    Ok(())
}

fn revision(record: &QuestionRecord) -> R<i64> {
    i64::try_from(record.revision)
        .map_err(|_| E::Core(StoreError::invalid("question revision out of range")))
}

pub(crate) fn mark_rendered(c: &Connection, op: &RenderedOp<'_>) -> R<()> {
    for call in op.calls {
        if call.record.messages.is_empty() {
            return Err(E::Core(StoreError::invalid(format!(
                "question {}: a rendered record's messages are never empty",
                call.tool_call_id
            ))));
        }
        let n = exec(
            c,
            "UPDATE questions SET record = ?3, revision = ?4, rendered = TRUE, updated_at = ?5, \
                    expires_at = CASE WHEN outcome IS NULL THEN ?6 ELSE expires_at END \
             WHERE chat_id = ?1 AND tool_call_id = ?2 AND expires_at > ?5",
            params![
                op.chat.as_str(),
                call.tool_call_id,
                to_json(&call.record)?,
                revision(&call.record)?,
                op.now,
                op.now + QUESTION_TTL_MS
            ],
        )?;
        if n != 1 {
            return Err(E::Core(StoreError::not_found(
                Item::ToolCall,
                call.tool_call_id.as_str(),
            )));
        }
        for m in &call.record.messages {
            link(c, op.platform, &m.id, op.chat, &call.tool_call_id)?;
        }
    }
    Ok(())
}

fn question_lock(chat: &ChatId, call: &str, holder: &str, token: i64) -> QuestionLock {
    QuestionLock {
        chat_id: chat.clone(),
        tool_call_id: call.to_string(),
        holder: holder.to_string(),
        token,
    }
}

/// Takes the question's lock (the caller decided it may) and returns its token.
fn take_question_lock(
    c: &Connection,
    chat: &ChatId,
    call: &str,
    lock: LockRequest<'_>,
    now: Millis,
) -> R<QuestionLock> {
    let token = opt(
        c,
        "UPDATE questions SET lock_holder = ?3, lock_token = lock_token + 1, lock_until = ?4 \
         WHERE chat_id = ?1 AND tool_call_id = ?2 RETURNING lock_token",
        params![chat.as_str(), call, lock.holder, now + lock.ttl_ms],
        int,
    )?
    .ok_or_else(|| E::Core(StoreError::not_found(Item::ToolCall, call)))?;
    Ok(question_lock(chat, call, lock.holder, token))
}

fn question_after(c: &Connection, chat: &ChatId, call: &str, now: Millis) -> R<QuestionRow> {
    get_question(c, chat, call, now)?
        .ok_or_else(|| E::Core(StoreError::corrupt_msg(format!("question {call} vanished"))))
}

pub(crate) fn record_outcome(c: &Connection, op: &RecordOp<'_>) -> R<Recorded> {
    let Some(q) = get_question(c, op.chat, op.tool_call_id, op.now)? else {
        return Ok(Recorded::Gone);
    };
    if q.outcome.is_some() {
        return Ok(Recorded::Settled { question: q });
    }
    if let Some(expected) = op.expected_revision
        && (q.record.revision != expected || q.posting || q.locked(op.now))
    {
        return Ok(Recorded::Changed { question: q });
    }
    exec(
        c,
        "UPDATE questions SET outcome = ?3, actor = ?4, outcome_at = ?5, updated_at = ?5, \
                expires_at = ?6 \
         WHERE chat_id = ?1 AND tool_call_id = ?2",
        params![
            op.chat.as_str(),
            op.tool_call_id,
            to_json(op.outcome)?,
            op.actor.map(to_json).transpose()?,
            op.now,
            op.now + ANSWERED_TTL_MS
        ],
    )?;
    let lock = match op.lock {
        Some(req) => Some(take_question_lock(
            c,
            op.chat,
            op.tool_call_id,
            req,
            op.now,
        )?),
        None => None,
    };
    let question = question_after(c, op.chat, op.tool_call_id, op.now)?;
    let resumed = match op.resume {
        Some(req) => Some(resume_turn(c, op.chat, &question.message_id, req)?),
        None => None,
    };
    Ok(Recorded::Won {
        question,
        lock,
        resumed,
    })
}

pub(crate) fn advance_question(c: &Connection, op: &AdvanceOp<'_>) -> R<Advanced> {
    let Some(q) = get_question(c, op.chat, op.tool_call_id, op.now)? else {
        return Ok(Advanced::Gone);
    };
    if q.outcome.is_some()
        || q.record.revision != op.expected_revision
        || q.posting
        || q.locked(op.now)
    {
        return Ok(Advanced::Changed { question: q });
    }
    let mut record = q.record.clone();
    record.revision += 1;
    if let Some(state) = op.state {
        record.state = Some(state.clone());
    }
    exec(
        c,
        "UPDATE questions SET record = ?3, revision = ?4, posting = TRUE, updated_at = ?5, \
                expires_at = ?6 \
         WHERE chat_id = ?1 AND tool_call_id = ?2",
        params![
            op.chat.as_str(),
            op.tool_call_id,
            to_json(&record)?,
            revision(&record)?,
            op.now,
            op.now + QUESTION_TTL_MS
        ],
    )?;
    let lock = take_question_lock(c, op.chat, op.tool_call_id, op.lock, op.now)?;
    Ok(Advanced::Done {
        question: question_after(c, op.chat, op.tool_call_id, op.now)?,
        lock,
    })
}

pub(crate) fn lock_question(
    c: &Connection,
    chat: &ChatId,
    call: &str,
    holder: &str,
    ttl_ms: Millis,
    now: Millis,
) -> R<Option<(QuestionLock, QuestionRow)>> {
    opt(
        c,
        concat!(
            "UPDATE questions SET lock_holder = ?3, lock_token = lock_token + 1, lock_until = ?4 \
             WHERE chat_id = ?1 AND tool_call_id = ?2 AND expires_at > ?5 \
               AND (lock_holder IS NULL OR lock_until <= ?5) \
             RETURNING ",
            question_cols!(),
            ", lock_token"
        ),
        params![chat.as_str(), call, holder, now + ttl_ms, now],
        |r| {
            let token: i64 = r.get(18)?;
            Ok((question_lock(chat, call, holder, token), question_row(r)?))
        },
    )
}

pub(crate) fn update_question(c: &Connection, op: &UpdateQuestionOp<'_>) -> R<QuestionRow> {
    let lock = op.lock;
    let update = op.update;
    if let Some(record) = &update.record
        && record.messages.is_empty()
        && update.rendered != Some(false)
    {
        return Err(E::Core(StoreError::invalid(
            "a question record's messages are never empty",
        )));
    }
    let record = update.record.as_ref().map(to_json).transpose()?;
    let rev = update.record.as_ref().map(revision).transpose()?;
    let row = opt(
        c,
        concat!(
            "UPDATE questions SET record = COALESCE(?5, record), revision = COALESCE(?6, revision), \
                    rendered = COALESCE(?7, rendered), posting = COALESCE(?8, posting), \
                    closed = COALESCE(?9, closed), updated_at = ?10, \
                    expires_at = CASE WHEN outcome IS NULL THEN ?11 ELSE expires_at END, \
                    lock_holder = CASE WHEN ?12 THEN lock_holder ELSE NULL END, \
                    lock_until = CASE WHEN ?12 THEN lock_until ELSE 0 END \
             WHERE chat_id = ?1 AND tool_call_id = ?2 AND lock_holder = ?3 AND lock_token = ?4 \
             RETURNING ",
            question_cols!()
        ),
        params![
            lock.chat_id.as_str(),
            lock.tool_call_id,
            lock.holder,
            lock.token,
            record,
            rev,
            update.rendered,
            update.posting,
            update.closed,
            op.now,
            op.now + QUESTION_TTL_MS,
            op.keep_lock
        ],
        question_row,
    )?;
    let Some(row) = row else {
        return Err(E::Core(StoreError::Locked {
            question: lock.tool_call_id.clone(),
        }));
    };
    if let Some(platform) = op.link_platform {
        for m in &row.record.messages {
            link(c, platform, &m.id, &lock.chat_id, &lock.tool_call_id)?;
        }
    }
    if let Some(job) = op.job {
        enqueue_job(c, job)?;
    }
    Ok(row)
}

pub(crate) fn unlock_question(c: &Connection, lock: &QuestionLock) -> R<()> {
    exec(
        c,
        "UPDATE questions SET lock_holder = NULL, lock_until = 0 \
         WHERE chat_id = ?1 AND tool_call_id = ?2 AND lock_holder = ?3 AND lock_token = ?4",
        params![
            lock.chat_id.as_str(),
            lock.tool_call_id,
            lock.holder,
            lock.token
        ],
    )?;
    Ok(())
}

pub(crate) fn purge_expired(c: &Connection, now: Millis) -> R<u64> {
    exec(
        c,
        "DELETE FROM question_links WHERE (chat_id, tool_call_id) IN \
         (SELECT chat_id, tool_call_id FROM questions WHERE expires_at <= ?1)",
        [now],
    )?;
    let n = exec(c, "DELETE FROM questions WHERE expires_at <= ?1", [now])?;
    Ok(n as u64)
}

// ---- jobs ----------------------------------------------------------------------------------------

pub(crate) fn enqueue_job(c: &Connection, job: &NewJob) -> R<i64> {
    opt(
        c,
        "INSERT INTO jobs (kind, key, payload, run_at, created_at) VALUES (?1, ?2, ?3, ?4, ?4) \
         ON CONFLICT (key) DO UPDATE SET \
            run_at = CASE WHEN jobs.dead OR excluded.run_at < jobs.run_at \
                          THEN excluded.run_at ELSE jobs.run_at END, \
            attempts = CASE WHEN jobs.dead THEN 0 ELSE jobs.attempts END, \
            dead = FALSE, kind = excluded.kind, payload = excluded.payload, \
            generation = jobs.generation + 1 \
         RETURNING id",
        params![
            job.kind,
            job.key.as_deref(),
            to_json(&job.payload)?,
            job.run_at
        ],
        int,
    )?
    .ok_or_else(|| E::Core(StoreError::corrupt_msg("job insert returned nothing")))
}

pub(crate) fn claim_job(
    c: &Connection,
    worker: &str,
    claim_ms: Millis,
    now: Millis,
) -> R<Option<Job>> {
    opt(
        c,
        concat!(
            "UPDATE jobs SET claimed_by = ?1, claim_until = ?2, attempts = attempts + 1 \
             WHERE id = (SELECT id FROM jobs WHERE NOT dead AND run_at <= ?3 \
                         AND (claim_until IS NULL OR claim_until <= ?3) ORDER BY run_at, id LIMIT 1) \
             RETURNING ",
            job_cols!()
        ),
        params![worker, now + claim_ms, now],
        job_row,
    )
}

pub(crate) fn complete_job(c: &Connection, job: &Job) -> R<bool> {
    let n = exec(
        c,
        "DELETE FROM jobs WHERE id = ?1 AND claimed_by = ?2 AND attempts = ?3 AND generation = ?4",
        params![
            job.id,
            job.claimed_by.as_deref(),
            job.attempts,
            job.generation
        ],
    )?;
    if n == 1 {
        return Ok(true);
    }
    // Re-enqueued while it ran: keep it, scheduled, and release the claim.
    let n = exec(
        c,
        "UPDATE jobs SET claimed_by = NULL, claim_until = NULL \
         WHERE id = ?1 AND claimed_by = ?2 AND attempts = ?3",
        params![job.id, job.claimed_by.as_deref(), job.attempts],
    )?;
    Ok(n == 1)
}

pub(crate) fn retry_job(c: &Connection, job: &Job, run_at: Millis, error: &str) -> R<bool> {
    let n = exec(
        c,
        "UPDATE jobs SET claimed_by = NULL, claim_until = NULL, last_error = ?5, \
                run_at = CASE WHEN generation <> ?4 AND run_at < ?6 THEN run_at ELSE ?6 END \
         WHERE id = ?1 AND claimed_by = ?2 AND attempts = ?3",
        params![
            job.id,
            job.claimed_by.as_deref(),
            job.attempts,
            job.generation,
            error,
            run_at
        ],
    )?;
    Ok(n == 1)
}

pub(crate) fn bury_job(c: &Connection, job: &Job, error: &str) -> R<bool> {
    let n = exec(
        c,
        "UPDATE jobs SET claimed_by = NULL, claim_until = NULL, last_error = ?5, \
                dead = (generation = ?4) \
         WHERE id = ?1 AND claimed_by = ?2 AND attempts = ?3",
        params![
            job.id,
            job.claimed_by.as_deref(),
            job.attempts,
            job.generation,
            error
        ],
    )?;
    Ok(n == 1)
}

pub(crate) fn delete_job(c: &Connection, key: &str) -> R<bool> {
    Ok(exec(c, "DELETE FROM jobs WHERE key = ?1", [key])? == 1)
}

/// `key_prefix` with the `LIKE` wildcards escaped (`\\`), then `%`.
fn like_prefix(key_prefix: &str) -> String {
    let mut p = String::with_capacity(key_prefix.len() + 1);
    for ch in key_prefix.chars() {
        if matches!(ch, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(ch);
    }
    p.push('%');
    p
}

pub(crate) fn earlier_job(c: &Connection, key_prefix: &str, key: &str) -> R<Option<Job>> {
    opt(
        c,
        concat!(
            "SELECT ",
            job_cols!(),
            " FROM jobs WHERE NOT dead AND key LIKE ?1 ESCAPE '\\' AND key <> ?2 \
               AND id < COALESCE((SELECT id FROM jobs WHERE key = ?2), 9223372036854775807) \
             ORDER BY id LIMIT 1"
        ),
        params![like_prefix(key_prefix), key],
        job_row,
    )
}

pub(crate) fn defer_job(c: &Connection, job: &Job, run_at: Millis) -> R<bool> {
    let n = exec(
        c,
        "UPDATE jobs SET claimed_by = NULL, claim_until = NULL, attempts = MAX(attempts - 1, 0), \
                run_at = CASE WHEN generation <> ?4 AND run_at < ?5 THEN run_at ELSE ?5 END \
         WHERE id = ?1 AND claimed_by = ?2 AND attempts = ?3",
        params![
            job.id,
            job.claimed_by.as_deref(),
            job.attempts,
            job.generation,
            run_at
        ],
    )?;
    Ok(n == 1)
}

pub(crate) fn dead_jobs(c: &Connection, limit: u32) -> R<Vec<Job>> {
    all(
        c,
        concat!(
            "SELECT ",
            job_cols!(),
            " FROM jobs WHERE dead ORDER BY created_at, id LIMIT ?1"
        ),
        [limit],
        job_row,
    )
}

pub(crate) fn purge_dead_jobs(c: &Connection, before: Millis) -> R<u64> {
    Ok(exec(
        c,
        "DELETE FROM jobs WHERE dead AND created_at < ?1",
        [before],
    )? as u64)
}

// ---- operators -----------------------------------------------------------------------------------

/// The state a chat row is in at `?2` (as `ChatRow::state` derives it), in SQL.
const CHAT_STATE_SQL: &str = "CASE WHEN lease_holder IS NOT NULL AND lease_until > ?2 THEN 'running' \
     WHEN awaiting_message_id IS NOT NULL THEN 'awaiting' ELSE 'idle' END";

pub(crate) fn find_chats(c: &Connection, filter: &ChatFilter, now: Millis) -> R<Vec<ChatRow>> {
    let sql = format!(
        "SELECT {} FROM chats \
         WHERE (?1 IS NULL OR {CHAT_STATE_SQL} = ?1) AND (?3 IS NULL OR channel_platform = ?3) \
         ORDER BY updated_at DESC, chat_id LIMIT ?4",
        chat_cols!()
    );
    all(
        c,
        &sql,
        params![
            filter.state.map(TurnState::as_str),
            now,
            filter.platform.as_deref(),
            i64::from(filter.limit)
        ],
        chat_row,
    )
}

pub(crate) fn live_jobs(c: &Connection, limit: u32) -> R<Vec<Job>> {
    all(
        c,
        concat!(
            "SELECT ",
            job_cols!(),
            " FROM jobs WHERE NOT dead ORDER BY run_at, id LIMIT ?1"
        ),
        [limit],
        job_row,
    )
}

pub(crate) fn revive_job(c: &Connection, id: i64, now: Millis) -> R<Option<Job>> {
    opt(
        c,
        concat!(
            "UPDATE jobs SET dead = FALSE, attempts = 0, run_at = ?2, claimed_by = NULL, \
             claim_until = NULL WHERE id = ?1 AND dead RETURNING ",
            job_cols!()
        ),
        params![id, now],
        job_row,
    )
}

pub(crate) fn backlog(c: &Connection, now: Millis) -> R<Backlog> {
    opt(
        c,
        "SELECT (SELECT COUNT(*) FROM messages WHERE queued = TRUE), \
                (SELECT COUNT(*) FROM jobs WHERE NOT dead AND run_at <= ?1 \
                   AND (claim_until IS NULL OR claim_until <= ?1)), \
                (SELECT COUNT(*) FROM jobs WHERE NOT dead AND claim_until > ?1), \
                (SELECT COUNT(*) FROM jobs WHERE dead)",
        params![now],
        |r| {
            let n = |i: usize| r.get::<_, i64>(i).map(|n| u64::try_from(n).unwrap_or(0));
            Ok(Backlog {
                queued: n(0)?,
                jobs_due: n(1)?,
                jobs_running: n(2)?,
                jobs_dead: n(3)?,
            })
        },
    )
    .map(Option::unwrap_or_default)
}

pub(crate) fn purgeable(c: &Connection, now: Millis, dead_before: Millis) -> R<Purgeable> {
    opt(
        c,
        "SELECT (SELECT COUNT(*) FROM questions WHERE expires_at <= ?1), \
                (SELECT COUNT(*) FROM jobs WHERE dead AND created_at < ?2)",
        params![now, dead_before],
        |r| {
            Ok(Purgeable {
                questions: u64::try_from(r.get::<_, i64>(0)?).unwrap_or(0),
                dead_jobs: u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
            })
        },
    )
    .map(Option::unwrap_or_default)
}

// ---- agent chats ---------------------------------------------------------------------------------

pub(crate) fn bind_agent(c: &Connection, op: &BindAgentOp<'_>) -> R<Bound> {
    let id = &op.chat.chat_id;
    let created = exec(
        c,
        "INSERT INTO chats (chat_id, owner, channel_platform, channel_thread, created_at, updated_at, agent) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6) ON CONFLICT DO NOTHING",
        params![
            id.as_str(),
            op.chat.owner.as_ref().map(UserId::as_str),
            op.chat.channel.as_ref().map(|ch| ch.platform.as_str()),
            op.chat.channel.as_ref().map(|ch| ch.thread.as_str()),
            op.now,
            op.agent,
        ],
    )? == 1;
    let Some(chat) = get_chat(c, id)? else {
        return Err(E::Core(StoreError::ChannelChat {
            chat_id: id.clone(),
            reason: "is not its channel thread's chat: the thread has a chat of another id",
        }));
    };
    if created {
        return Ok(Bound::Bound(chat));
    }
    match bind_decision(&chat, created, op)? {
        Some(bound) => Ok(bound),
        None => {
            exec(
                c,
                "UPDATE chats SET agent = ?2, updated_at = ?3 WHERE chat_id = ?1",
                params![id.as_str(), op.agent, op.now],
            )?;
            Ok(Bound::Bound(chat_after(c, id)?))
        }
    }
}

pub(crate) fn post_message(c: &Connection, op: &PostMessageOp<'_>, body: &str) -> R<PostedMessage> {
    if let Some(m) = get_message(c, op.chat, &op.message.id)? {
        return Ok(PostedMessage::Duplicate(m));
    }
    let position = next_position(c, op.chat)?;
    let version = bump(c, op.chat)?;
    let seq = opt(
        c,
        "INSERT INTO messages (chat_id, id, role, author, queued, delivery, position, sub, body, \
                               created_at, updated_at, version, inbox) \
         VALUES (?1, ?2, ?3, ?4, FALSE, 'queue', ?5, 0, ?6, ?7, ?7, ?8, ?9) RETURNING seq",
        params![
            op.chat.as_str(),
            op.message.id,
            op.message.role.as_str(),
            op.message.metadata.author.as_ref().map(UserId::as_str),
            position,
            body,
            op.now,
            version,
            op.inbox,
        ],
        int,
    )?
    .ok_or_else(|| E::Core(StoreError::corrupt_msg("insert returned nothing")))?;
    exec(
        c,
        "UPDATE chats SET updated_at = ?2 WHERE chat_id = ?1",
        params![op.chat.as_str(), op.now],
    )?;
    if let Some(job) = op.job {
        enqueue_job(c, job)?;
    }
    Ok(PostedMessage::New(stored(
        op.chat,
        op.message,
        seq,
        Some(position),
        0,
        false,
        Delivery::Queue,
        version,
    )))
}

pub(crate) fn update_message(
    c: &Connection,
    op: &UpdateMessageOp<'_>,
    body: &str,
) -> R<MessageUpdate> {
    let Some(current) = get_message(c, op.chat, &op.message.id)? else {
        return Ok(MessageUpdate::Moved(None));
    };
    if current.queued || current.version != op.expected_version {
        return Ok(MessageUpdate::Moved(Some(Box::new(current))));
    }
    let version = bump(c, op.chat)?;
    exec(
        c,
        "UPDATE messages SET body = ?3, updated_at = ?4, version = ?5 WHERE chat_id = ?1 AND seq = ?2",
        params![op.chat.as_str(), current.seq, body, op.now, version],
    )?;
    if let Some(job) = op.job {
        enqueue_job(c, job)?;
    }
    let mut message = op.message.clone();
    message.role = current.message.role;
    message.metadata.author = current.message.metadata.author.clone();
    Ok(MessageUpdate::Done(Box::new(stored(
        op.chat,
        &message,
        current.seq,
        current.position,
        current.sub,
        false,
        current.delivery,
        version,
    ))))
}

pub(crate) fn take_inbox(c: &Connection, op: &InboxOp<'_>) -> R<Vec<StoredMessage>> {
    let found = all(
        c,
        "SELECT m.seq, m.chat_id, m.id, m.role, m.author, m.queued, m.delivery, m.position, m.sub, \
                m.body, m.version \
         FROM messages m JOIN chats c ON c.chat_id = m.chat_id \
         WHERE m.inbox = TRUE AND c.agent = ?1 AND (?2 IS NULL OR m.chat_id = ?2) \
         ORDER BY m.seq LIMIT ?3",
        params![op.agent, op.chat.map(ChatId::as_str), i64::from(op.limit)],
        message_row,
    )?;
    let mut out = Vec::with_capacity(found.len());
    for mut m in found {
        inbox_seen(&mut m.message);
        let body = message_body(&m.message).map_err(E::Core)?;
        let version = bump(c, &m.chat_id)?;
        exec(
            c,
            "UPDATE messages SET inbox = FALSE, body = ?2, updated_at = ?3, version = ?4 WHERE seq = ?1",
            params![m.seq, body, op.now, version],
        )?;
        m.version = version;
        out.push(m);
    }
    Ok(out)
}

// ---- groups --------------------------------------------------------------------------------------

/// How long after its expiry a membership row is deleted (by the next renewal in its group).
const MEMBERS_SWEPT_AFTER_MS: Millis = 60 * 60 * 1000;

/// Renews (or, with `ttl_ms <= 0`, ends) `member`'s membership of `group` and lists the live
/// members, sorted; memberships expired long ago are deleted.
pub(crate) fn members(
    c: &Connection,
    group: &str,
    member: &str,
    ttl_ms: Millis,
    now: Millis,
) -> R<Vec<String>> {
    c.execute(
        "INSERT INTO members (grp, member, expires_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (grp, member) DO UPDATE SET expires_at = excluded.expires_at",
        params![group, member, now.saturating_add(ttl_ms.max(0))],
    )?;
    c.execute(
        "DELETE FROM members WHERE grp = ?1 AND expires_at < ?2",
        params![group, now.saturating_sub(MEMBERS_SWEPT_AFTER_MS)],
    )?;
    let mut stmt = c.prepare_cached(
        "SELECT member FROM members WHERE grp = ?1 AND expires_at > ?2 ORDER BY member",
    )?;
    let rows = stmt.query_map(params![group, now], |r| r.get::<_, String>(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}
