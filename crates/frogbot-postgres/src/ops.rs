//! What the store's parts share: the error mapping ([`Db`]), the statements and careful-path
//! steps that more than one part runs (locking or creating a chat, saving a message, enqueueing a
//! job, `resume_turn`, which `record_outcome` also runs) and the announcements of what committed.
//! Each part's own statements, and the careful (lock-first) path an operation falls back to when
//! its one-statement compare-and-swap finds the chat changed, live in the part's file
//! (`chats.rs`, `turns.rs`, `questions.rs`, `jobs.rs`, `agent.rs`, `operations.rs`,
//! `roles.rs`), so no part depends on another.

use serde_json::{Value, json};
use sqlx::Row;
use sqlx::postgres::{PgArguments, PgConnection, PgRow};

use frogbot_core::model::{ChatId, Delivery, Millis, QuestionRecord, UiMessage, UserId};
use frogbot_core::store::*;
use frogbot_core::store::{Result, StoreError};

use crate::PostgresStore;
use crate::rows::{self, chat_cols, msg_cols, question_cols, to_json};

/// Maps a driver error to the store's error (see [`PostgresStore::storage`]).
pub(crate) trait Db<T> {
    fn db(self, s: &PostgresStore) -> Result<T>;
}

impl<T> Db<T> for std::result::Result<T, sqlx::Error> {
    fn db(self, s: &PostgresStore) -> Result<T> {
        self.map_err(|e| s.storage(e))
    }
}

/// The columns a message insert lists.
macro_rules! msg_insert {
    () => {
        "INSERT INTO messages AS m (chat_id, id, role, author, queued, delivery, position, sub, \
         body, created_at, updated_at, version) "
    };
}
pub(crate) use msg_insert;

/// What a turn message's upsert does when the id exists: it takes the new place and content.
macro_rules! msg_upsert_tail {
    () => {
        " ON CONFLICT (chat_id, id) DO UPDATE SET role = excluded.role, author = excluded.author, \
         queued = excluded.queued, delivery = excluded.delivery, position = excluded.position, \
         sub = excluded.sub, body = excluded.body, updated_at = excluded.updated_at, \
         version = excluded.version "
    };
}
pub(crate) use msg_upsert_tail;

/// What enqueueing a job whose key exists does: reschedule it (the earlier time; a dead one is
/// revived with its attempts reset), and count a generation so a running claim keeps it.
macro_rules! job_upsert_tail {
    () => {
        " ON CONFLICT (key) DO UPDATE SET \
            run_at = CASE WHEN jobs.dead OR excluded.run_at < jobs.run_at \
                          THEN excluded.run_at ELSE jobs.run_at END, \
            attempts = CASE WHEN jobs.dead THEN 0 ELSE jobs.attempts END, \
            dead = FALSE, kind = excluded.kind, payload = excluded.payload, \
            generation = jobs.generation + 1 "
    };
}
pub(crate) use job_upsert_tail;

// ---- statements more than one part runs ---------------------------------------------------------

const LOCK_CHAT: &str = concat!(
    "SELECT ",
    chat_cols!("c"),
    " FROM chats c WHERE c.chat_id = $1 FOR UPDATE"
);

const CREATE_CHAT: &str = concat!(
    "INSERT INTO chats AS c (chat_id, owner, channel_platform, channel_thread, created_at, \
     updated_at) VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT DO NOTHING RETURNING ",
    chat_cols!("c")
);

/// Whether the chat has a message with id $2, and its last turn position.
const MESSAGE_FACTS: &str = "SELECT \
     EXISTS (SELECT 1 FROM messages WHERE chat_id = $1 AND id = $2) AS dup, \
     (SELECT COALESCE(MAX(position), 0) FROM messages WHERE chat_id = $1) AS last_position";

const BUMP_CHAT: &str = concat!(
    "UPDATE chats c SET version = c.version + 1, updated_at = $2 WHERE c.chat_id = $1 RETURNING ",
    chat_cols!("c")
);

/// Inserts a message, or moves an existing one of that id: $1 chat, $2 id, $3 role, $4 author,
/// $5 queued, $6 delivery, $7 position, $8 sub, $9 body, $10 now, $11 version.
const PUT_MESSAGE: &str = concat!(
    msg_insert!(),
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11)",
    msg_upsert_tail!(),
    "RETURNING ",
    msg_cols!("m", "")
);

/// One message by chat ($1) and id ($2).
pub(crate) const MESSAGE_BY_ID: &str = concat!(
    "SELECT ",
    msg_cols!("m", ""),
    " FROM messages m WHERE m.chat_id = $1 AND m.id = $2"
);

/// `resume_turn` (which `record_outcome` runs too): takes a free or expired lease and clears the
/// wait when every question of the waiting message has an outcome; a compare-and-swap on the lease
/// the snapshot read, so the snapshot's state explains a refusal. One row per question (at least
/// one row when the chat exists).
///
/// $1 chat, $2 message id, $3 holder, $4 expiry, $5 driver, $6 now.
const RESUME: &str = concat!(
    "WITH snap AS (SELECT * FROM chats WHERE chat_id = $1::text), \
     qs AS (SELECT * FROM questions WHERE chat_id = $1::text AND message_id = $2::text), \
     chat AS ( \
        UPDATE chats c SET lease_holder = $3::text, lease_token = c.lease_token + 1, \
            lease_until = $4::bigint, driver = $5::text, awaiting_message_id = NULL, \
            updated_at = $6::bigint \
        FROM snap s \
        WHERE c.chat_id = $1::text AND s.awaiting_message_id = $2::text \
          AND (s.lease_holder IS NULL OR s.lease_until <= $6::bigint) \
          AND NOT EXISTS (SELECT 1 FROM qs WHERE qs.outcome IS NULL) \
          AND c.awaiting_message_id IS NOT DISTINCT FROM s.awaiting_message_id \
          AND c.lease_holder IS NOT DISTINCT FROM s.lease_holder \
          AND c.lease_token = s.lease_token AND c.lease_until = s.lease_until \
        RETURNING c.lease_token \
     ), reply AS (SELECT * FROM messages WHERE chat_id = $1::text AND id = $2::text), \
     latest_user AS (SELECT body FROM messages WHERE chat_id = $1::text AND role = 'user' \
        AND NOT queued ORDER BY position DESC, sub DESC, seq DESC LIMIT 1) \
     SELECT s.awaiting_message_id, s.lease_holder, s.lease_until, \
        EXISTS (SELECT 1 FROM qs WHERE qs.outcome IS NULL) AS open, \
        c.lease_token AS taken_token, (SELECT body FROM latest_user) AS user_body, ",
    msg_cols!("r", "r_"),
    ", ",
    question_cols!("q", "q_"),
    " FROM snap s LEFT JOIN chat c ON TRUE LEFT JOIN reply r ON TRUE LEFT JOIN qs q ON TRUE \
     ORDER BY q.call_index, q.tool_call_id"
);

pub(crate) const ENQUEUE_JOB: &str = concat!(
    "INSERT INTO jobs (kind, key, payload, run_at, created_at) VALUES ($1, $2, $3, $4, $4)",
    job_upsert_tail!(),
    "RETURNING id"
);

// ---- helpers -------------------------------------------------------------------------------------

/// A statement with its parameters bound.
pub(crate) type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, PgArguments>;

/// Binds, in order, the four parameters of a job an operation schedules (kind, key, payload,
/// run-at: see [`JobParams`]).
pub(crate) trait BindJob<'q> {
    fn bind_job(self, job: JobParams<'q>) -> Self;
}

impl<'q> BindJob<'q> for PgQuery<'q> {
    fn bind_job(self, job: JobParams<'q>) -> Self {
        self.bind(job.kind)
            .bind(job.key)
            .bind(job.payload)
            .bind(job.run_at)
    }
}

pub(crate) fn user_str(u: Option<&UserId>) -> Option<&str> {
    u.map(UserId::as_str)
}

pub(crate) fn empty_record() -> Result<String> {
    to_json(&QuestionRecord {
        messages: vec![],
        revision: 0,
        state: None,
    })
}

/// A job to schedule with an operation, as its statement binds it (all NULL for none).
pub(crate) struct JobParams<'a> {
    pub(crate) kind: Option<&'a str>,
    pub(crate) key: Option<&'a str>,
    pub(crate) payload: Option<String>,
    pub(crate) run_at: i64,
}

pub(crate) fn job_params(job: Option<&NewJob>) -> Result<JobParams<'_>> {
    Ok(match job {
        Some(j) => JobParams {
            kind: Some(j.kind.as_str()),
            key: j.key.as_deref(),
            payload: Some(to_json(&j.payload)?),
            run_at: j.run_at,
        },
        None => JobParams {
            kind: None,
            key: None,
            payload: None,
            run_at: 0,
        },
    })
}

/// What the careful path of a turn operation found on the locked chat.
pub(crate) struct Locked {
    pub(crate) chat: ChatRow,
    pub(crate) created: bool,
}

impl PostgresStore {
    /// Runs `q` on the pool: the row it returns, if any, decoded by `f`.
    pub(crate) async fn opt<T>(
        &self,
        q: PgQuery<'_>,
        f: impl Fn(&PgRow) -> Result<T>,
    ) -> Result<Option<T>> {
        q.fetch_optional(&self.pool)
            .await
            .db(self)?
            .as_ref()
            .map(f)
            .transpose()
    }

    /// Runs `q` on the pool: the rows it returns, decoded by `f`.
    pub(crate) async fn all<T>(
        &self,
        q: PgQuery<'_>,
        f: impl Fn(&PgRow) -> Result<T>,
    ) -> Result<Vec<T>> {
        q.fetch_all(&self.pool)
            .await
            .db(self)?
            .iter()
            .map(f)
            .collect()
    }

    /// Runs `q` on the pool: the one row it returns.
    pub(crate) async fn one(&self, q: PgQuery<'_>) -> Result<PgRow> {
        q.fetch_one(&self.pool).await.db(self)
    }

    /// The count in column `name` of `row` (a `count(*)`).
    pub(crate) fn count(&self, row: &PgRow, name: &str) -> Result<u64> {
        let n: i64 = row.try_get(name).db(self)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Runs `q` on the pool: whether it changed exactly one row.
    pub(crate) async fn changed_one(&self, q: PgQuery<'_>) -> Result<bool> {
        Ok(q.execute(&self.pool).await.db(self)?.rows_affected() == 1)
    }

    pub(crate) async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        self.pool.begin().await.db(self)
    }

    /// Locks the chat row (creating the chat when `create` is given and it is missing). Every
    /// statement after it in the transaction sees every commit made before the lock.
    pub(crate) async fn lock_chat(
        &self,
        conn: &mut PgConnection,
        chat: &ChatId,
        create: Option<(&NewChat, Millis)>,
    ) -> Result<Option<Locked>> {
        let locked = |row: PgRow, created: bool| -> Result<Option<Locked>> {
            Ok(Some(Locked {
                chat: rows::chat(&row)?,
                created,
            }))
        };
        loop {
            let row = sqlx::query(LOCK_CHAT)
                .bind(chat.as_str())
                .fetch_optional(&mut *conn)
                .await
                .db(self)?;
            if let Some(row) = row {
                return locked(row, false);
            }
            let Some((new, now)) = create else {
                return Ok(None);
            };
            let row = sqlx::query(CREATE_CHAT)
                .bind(new.chat_id.as_str())
                .bind(user_str(new.owner.as_ref()))
                .bind(new.channel.as_ref().map(|c| c.platform.as_str()))
                .bind(new.channel.as_ref().map(|c| c.thread.as_str()))
                .bind(now)
                .fetch_optional(&mut *conn)
                .await
                .db(self)?;
            if let Some(row) = row {
                // Inserted by this transaction: locked until it ends.
                return locked(row, true);
            }
            // Not inserted: the id was created since the lock attempt (lock it), or the channel
            // thread has a chat under another id.
            if let Some(channel) = &new.channel {
                let other: Option<String> = sqlx::query_scalar(
                    "SELECT chat_id FROM chats WHERE channel_platform = $1 AND channel_thread = $2",
                )
                .bind(&channel.platform)
                .bind(&channel.thread)
                .fetch_optional(&mut *conn)
                .await
                .db(self)?;
                if let Some(other) = other
                    && other != new.chat_id.as_str()
                {
                    return Err(StoreError::ChannelChat {
                        chat_id: new.chat_id.clone(),
                        reason: "is not its channel thread's chat: the thread has a chat of \
                                 another id",
                    });
                }
            }
        }
    }

    /// Raises the (locked) chat's version for a write at `now` ([`BUMP_CHAT`]): the chat as it is
    /// then.
    pub(crate) async fn bump_chat(
        &self,
        conn: &mut PgConnection,
        chat: &ChatId,
        now: Millis,
    ) -> Result<ChatRow> {
        let row = sqlx::query(BUMP_CHAT)
            .bind(chat.as_str())
            .bind(now)
            .fetch_one(&mut *conn)
            .await
            .db(self)?;
        rows::chat(&row)
    }

    /// Inserts or moves a message (see [`PUT_MESSAGE`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn put_message(
        &self,
        conn: &mut PgConnection,
        chat: &ChatId,
        message: &UiMessage,
        queued: bool,
        delivery: Delivery,
        position: Option<i64>,
        sub: i64,
        now: Millis,
        version: i64,
    ) -> Result<StoredMessage> {
        let row = sqlx::query(PUT_MESSAGE)
            .bind(chat.as_str())
            .bind(&message.id)
            .bind(message.role.as_str())
            .bind(user_str(message.metadata.author.as_ref()))
            .bind(queued)
            .bind(delivery.as_str())
            .bind(position)
            .bind(sub)
            .bind(rows::message_body(message)?)
            .bind(now)
            .bind(version)
            .fetch_one(&mut *conn)
            .await
            .db(self)?;
        rows::message(&row, "")
    }

    /// Writes `job` in the transaction (or on the connection) `conn`.
    pub(crate) async fn enqueue_in(&self, conn: &mut PgConnection, job: &NewJob) -> Result<()> {
        sqlx::query(ENQUEUE_JOB)
            .bind(&job.kind)
            .bind(job.key.as_deref())
            .bind(to_json(&job.payload)?)
            .bind(job.run_at)
            .fetch_one(&mut *conn)
            .await
            .db(self)?;
        Ok(())
    }

    /// The dup check and the last turn position, read under the chat's lock.
    pub(crate) async fn message_facts(
        &self,
        conn: &mut PgConnection,
        chat: &ChatId,
        id: &str,
    ) -> Result<(bool, i64)> {
        let row = sqlx::query(MESSAGE_FACTS)
            .bind(chat.as_str())
            .bind(id)
            .fetch_one(&mut *conn)
            .await
            .db(self)?;
        Ok((
            row.try_get("dup").db(self)?,
            row.try_get("last_position").db(self)?,
        ))
    }

    // ---- resume_turn (also run by record_outcome) -------------------------------------------

    pub(crate) async fn resume_once(
        &self,
        conn: &mut PgConnection,
        chat: &ChatId,
        message_id: &str,
        req: &LeaseRequest,
    ) -> Result<Option<Resume>> {
        let rows = sqlx::query(RESUME)
            .bind(chat.as_str())
            .bind(message_id)
            .bind(&req.holder)
            .bind(req.now + req.ttl_ms)
            .bind(user_str(req.driver.as_ref()))
            .bind(req.now)
            .fetch_all(&mut *conn)
            .await
            .db(self)?;
        let Some(first) = rows.first() else {
            return Ok(Some(Resume::NotWaiting));
        };
        let awaiting: Option<String> = first.try_get("awaiting_message_id").db(self)?;
        let holder: Option<String> = first.try_get("lease_holder").db(self)?;
        let until: i64 = first.try_get("lease_until").db(self)?;
        let taken: Option<i64> = first.try_get("taken_token").db(self)?;
        if let Some(token) = taken {
            let reply = rows::message_opt(first, "r_")?.ok_or_else(|| {
                StoreError::corrupt_msg(format!(
                    "chat {chat} waits on a missing message {message_id}"
                ))
            })?;
            let questions = rows
                .iter()
                .map(|r| rows::question_opt(r, "q_"))
                .filter_map(Result::transpose)
                .collect::<Result<Vec<_>>>()?;
            let user: Option<String> = first.try_get("user_body").db(self)?;
            let user: Option<UiMessage> = user
                .map(|b| rows::from_json("message body", &b))
                .transpose()?;
            let (model, reasoning) = user
                .map(|u| (u.metadata.model, u.metadata.reasoning))
                .unwrap_or_default();
            return Ok(Some(Resume::Taken {
                lease: Lease {
                    chat_id: chat.clone(),
                    holder: req.holder.clone(),
                    token,
                    expires_at: req.now + req.ttl_ms,
                    driver: req.driver.clone(),
                    taken_over: holder.is_some(),
                },
                reply,
                questions,
                model,
                reasoning,
            }));
        }
        if holder.is_some() && until > req.now {
            return Ok(Some(Resume::Busy { until }));
        }
        if awaiting.as_deref() != Some(message_id) {
            return Ok(Some(Resume::NotWaiting));
        }
        if first.try_get::<bool, _>("open").db(self)? {
            return Ok(Some(Resume::Open));
        }
        // The swap lost to a concurrent change.
        Ok(None)
    }
}

/// New question records as the statements that insert them read them (a JSON array).
pub(crate) fn questions_json(rows: &[NewQuestion]) -> Result<Vec<Value>> {
    rows.iter()
        .map(|q| {
            Ok(json!({
                "chat_id": q.chat_id.as_str(),
                "tool_call_id": q.tool_call_id,
                "message_id": q.message_id,
                "call_index": q.call_index,
                "input": to_json(&q.input)?,
                "answer_deadline": q.answer_deadline,
            }))
        })
        .collect()
}

impl PostgresStore {
    /// `r`, with the chat announced to every process listening ([`JobStore::changes`]) when the
    /// operation succeeded.
    pub(crate) fn announced<T>(&self, chat: &ChatId, r: Result<T>) -> Result<T> {
        if r.is_ok() {
            self.feed.announce(&self.relaxed, chat);
        }
        r
    }

    /// `r`, with the jobs an operation scheduled (their run-at times) announced to every process
    /// listening ([`JobStore::changes`]) when it succeeded.
    pub(crate) fn jobs_announced<T>(&self, run_at: &[Option<Millis>], r: Result<T>) -> Result<T> {
        if r.is_ok()
            && let Some(at) = run_at.iter().flatten().min()
        {
            self.feed.announce_job(&self.relaxed, *at);
        }
        r
    }
}
