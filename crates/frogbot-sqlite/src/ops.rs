//! What the store's parts share, as plain synchronous functions over a rusqlite [`Connection`]:
//! the error type, row mapping, statement helpers, message writes and leases, and the operations
//! that more than one part runs (a chat or message read, `resume_turn`, which `record_outcome`
//! also runs, the question records `await_answers` saves, a job enqueued with a write). Each part's
//! own operations live in its file (`chats.rs`, `turns.rs`, `questions.rs`, `jobs.rs`, `agent.rs`,
//! `operations.rs`, `roles.rs`), so no part depends on another. Writes run on the writer thread
//! inside a transaction (and a savepoint of their own), reads on a reader connection; nothing here
//! or in the parts begins, commits or rolls back.
//!
//! Because every write of this database goes through one writer that holds `BEGIN IMMEDIATE`,
//! an operation may read a row and then decide in Rust: no other writer (thread or process) can
//! change the row in between.

use rusqlite::{Connection, ErrorCode, Params, Row, params};
use serde_json::Value;

use frogbot_core::model::{
    Actor, ChannelRef, ChatId, Delivery, MessageStatus, Millis, QuestionOutcome, QuestionRecord,
    UiMessage, UserId,
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
pub(crate) use chat_cols;

macro_rules! msg_cols {
    () => {
        "seq, chat_id, id, role, author, queued, delivery, position, sub, body, version"
    };
}
pub(crate) use msg_cols;

macro_rules! question_cols {
    () => {
        "chat_id, tool_call_id, message_id, call_index, input, record, rendered, posting, outcome, \
         actor, outcome_at, closed, answer_deadline, created_at, updated_at, expires_at, \
         lock_holder, lock_until"
    };
}
pub(crate) use question_cols;

macro_rules! job_cols {
    () => {
        "id, kind, key, payload, run_at, attempts, claimed_by, claim_until, last_error, dead, generation"
    };
}
pub(crate) use job_cols;

pub(crate) fn chat_id(s: String) -> R<ChatId> {
    ChatId::new(s).map_err(|e| E::Core(StoreError::corrupt_msg(e.to_string())))
}

pub(crate) fn from_json<T: serde::de::DeserializeOwned>(what: &str, s: &str) -> R<T> {
    serde_json::from_str(s).map_err(|e| E::Core(StoreError::corrupt_msg(format!("{what}: {e}"))))
}

pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> R<String> {
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

pub(crate) fn parse_delivery(s: &str) -> R<Delivery> {
    match s {
        "queue" => Ok(Delivery::Queue),
        "steer" => Ok(Delivery::Steer),
        other => Err(E::Core(StoreError::corrupt_msg(format!(
            "delivery {other:?}"
        )))),
    }
}

pub(crate) fn chat_row(r: &Row<'_>) -> R<ChatRow> {
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
pub(crate) fn stored(
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

pub(crate) fn message_row(r: &Row<'_>) -> R<StoredMessage> {
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

pub(crate) fn question_row(r: &Row<'_>) -> R<QuestionRow> {
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

pub(crate) fn job_row(r: &Row<'_>) -> R<Job> {
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

// ---- an operation moved onto a connection's thread ----------------------------------------------

/// Runs a borrowed operation on the writer or a reader, whose closure must own what it runs with:
/// `moved!(self.write("what"), op => Op { r a, v b, .. }, |c, op| body)` copies `op`'s fields,
/// each as its letter says, and builds `Op` again from the copies inside the closure. `r` a
/// reference (`to_owned`, lent back with `&`), `o` an optional reference (`cloned`, `as_ref`), `s`
/// an optional `&str`, `v` a value that is `Copy`, `l` a [`LockRequest`] and `ol` an optional one.
macro_rules! moved {
    (
        $store:ident.$run:ident($what:literal),
        $op:expr => $Op:ident { $($kind:ident $field:ident),* $(,)? },
        |$c:ident, $o:ident| $body:expr
    ) => {{
        let op = $op;
        $(let $field = $crate::ops::moved!(@own $kind op.$field);)*
        $store
            .$run($what, move |$c| {
                let $o = $Op { $($field: $crate::ops::moved!(@lend $kind $field)),* };
                $body
            })
            .await
    }};
    (@own r $e:expr) => { $e.to_owned() };
    (@lend r $x:ident) => { &$x };
    (@own o $e:expr) => { $e.cloned() };
    (@lend o $x:ident) => { $x.as_ref() };
    (@own s $e:expr) => { $e.map(str::to_owned) };
    (@lend s $x:ident) => { $x.as_deref() };
    (@own v $e:expr) => { $e };
    (@lend v $x:ident) => { $x };
    (@own l $e:expr) => { ($e.holder.to_owned(), $e.ttl_ms) };
    (@lend l $x:ident) => { frogbot_core::store::LockRequest { holder: &$x.0, ttl_ms: $x.1 } };
    (@own ol $e:expr) => { $e.map(|l| (l.holder.to_owned(), l.ttl_ms)) };
    (@lend ol $x:ident) => {
        $x.as_ref().map(|(holder, ttl)| frogbot_core::store::LockRequest { holder, ttl_ms: *ttl })
    };
}
pub(crate) use moved;

// ---- statement helpers ---------------------------------------------------------------------------

pub(crate) fn opt<T>(
    c: &Connection,
    sql: &str,
    p: impl Params,
    f: impl Fn(&Row<'_>) -> R<T>,
) -> R<Option<T>> {
    let mut stmt = c.prepare_cached(sql)?;
    let mut rows = stmt.query(p)?;
    match rows.next()? {
        Some(r) => Ok(Some(f(r)?)),
        None => Ok(None),
    }
}

pub(crate) fn all<T>(
    c: &Connection,
    sql: &str,
    p: impl Params,
    f: impl Fn(&Row<'_>) -> R<T>,
) -> R<Vec<T>> {
    let mut stmt = c.prepare_cached(sql)?;
    let mut rows = stmt.query(p)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(f(r)?);
    }
    Ok(out)
}

pub(crate) fn exec(c: &Connection, sql: &str, p: impl Params) -> R<usize> {
    Ok(c.prepare_cached(sql)?.execute(p)?)
}

pub(crate) fn int(r: &Row<'_>) -> R<i64> {
    Ok(r.get(0)?)
}

pub(crate) fn lease_lost(lease: &Lease) -> E {
    E::Core(StoreError::LeaseLost {
        chat_id: lease.chat_id.clone(),
    })
}

// ---- reads ---------------------------------------------------------------------------------------

pub(crate) fn get_chat(c: &Connection, chat: &ChatId) -> R<Option<ChatRow>> {
    opt(
        c,
        concat!("SELECT ", chat_cols!(), " FROM chats WHERE chat_id = ?1"),
        [chat.as_str()],
        chat_row,
    )
}

pub(crate) fn chat_after(c: &Connection, chat: &ChatId) -> R<ChatRow> {
    get_chat(c, chat)?
        .ok_or_else(|| E::Core(StoreError::corrupt_msg(format!("chat {chat} vanished"))))
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

// ---- message writes ------------------------------------------------------------------------------

/// Raises the chat's version for one message write and returns the new version.
pub(crate) fn bump(c: &Connection, chat: &ChatId) -> R<i64> {
    opt(
        c,
        "UPDATE chats SET version = version + 1 WHERE chat_id = ?1 RETURNING version",
        [chat.as_str()],
        int,
    )?
    .ok_or_else(|| E::Core(StoreError::not_found(Item::Chat, chat.as_str())))
}

/// Sets the chat's `updated_at` to `now`.
pub(crate) fn touch(c: &Connection, chat: &ChatId, now: Millis) -> R<()> {
    exec(
        c,
        "UPDATE chats SET updated_at = ?2 WHERE chat_id = ?1",
        params![chat.as_str(), now],
    )?;
    Ok(())
}

pub(crate) fn next_position(c: &Connection, chat: &ChatId) -> R<i64> {
    Ok(opt(
        c,
        "SELECT COALESCE(MAX(position), 0) + 1 FROM messages WHERE chat_id = ?1",
        [chat.as_str()],
        int,
    )?
    .unwrap_or(1))
}

// ---- leases --------------------------------------------------------------------------------------

/// Takes the chat's lease for `req` (the caller decided it is free or expired).
pub(crate) fn take_lease(
    c: &Connection,
    chat: &ChatId,
    req: &LeaseRequest,
    taken_over: bool,
) -> R<Lease> {
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

// ---- turns ---------------------------------------------------------------------------------------

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
