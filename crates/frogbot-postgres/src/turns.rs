//! The turns part: [`TurnStore`] for [`PostgresStore`] — `send`, the lease, checkpoints, the wait
//! on questions, a turn's end, taking a chat, the queue — with their statements and their careful
//! (lock-first) paths.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::{PgConnection, PgPool, PgRow};
use sqlx::{Postgres, Transaction};

use frogbot_core::model::{ChatId, Delivery, Millis, QuestionOutcome, Role, UiMessage, UserId};
use frogbot_core::store::*;
use frogbot_core::store::{Result, StoreError};

use crate::PostgresStore;
use crate::ops::*;
use crate::rows::{self, chat_cols, from_json, msg_cols, to_json};

/// `REPLY_SUB` as SQL text (checked against the constant in a test).
macro_rules! reply_sub {
    () => {
        "4503599627370496"
    };
}

/// The reply a fenced statement ([`CHECKPOINT`], [`AWAIT`]) saves at its turn's reply slot, with
/// the version of its CTE `chat` (no row when the fence failed); the parameters [`fenced_reply`]
/// binds.
macro_rules! fenced_reply_sql {
    () => {
        concat!(
            msg_insert!(),
            "SELECT $1::text, $5::text, $6::text, $7::text, FALSE, 'queue', $9::bigint, ",
            reply_sub!(),
            ", $8::text, $4::bigint, $4::bigint, c.version FROM chat c",
            msg_upsert_tail!(),
            "RETURNING m.*"
        )
    };
}

/// `sql` (a fenced statement saving the turn's reply: [`fenced_reply_sql!`]) with its first
/// parameters bound: $1 chat, $2 holder, $3 token, $4 now, $5 reply id, $6 role, $7 author,
/// $8 body, $9 position.
fn fenced_reply<'q>(
    sql: &'static str,
    lease: &'q Lease,
    now: Millis,
    reply: &'q UiMessage,
    position: i64,
) -> Result<PgQuery<'q>> {
    Ok(sqlx::query(sql)
        .bind(lease.chat_id.as_str())
        .bind(&lease.holder)
        .bind(lease.token)
        .bind(now)
        .bind(&reply.id)
        .bind(reply.role.as_str())
        .bind(user_str(reply.metadata.author.as_ref()))
        .bind(rows::message_body(reply)?)
        .bind(position))
}

/// `send` in one statement, as a compare-and-swap on the chat row: the decision (create, start,
/// queue, steer) is taken on the statement's snapshot, and the chat row is written only if, once
/// locked, it still has the version and lease the snapshot read — so the snapshot's messages (the
/// duplicate check, the next turn position) are current. Anything else (a chat bound to an agent,
/// where only asks run turns; a refusal, a duplicate,
/// an expired lease to take over, `Busy`, a lost swap) returns no row: the careful path decides.
///
/// $1 chat, $2 owner, $3 platform, $4 thread, $5 now, $6 message id, $7 role, $8 author, $9 body,
/// $10 requested delivery, $11 holder, $12 lease expiry, $13 driver, $14 queue_if_busy.
const SEND: &str = concat!(
    "WITH snap AS ( \
        SELECT c.*, \
            EXISTS (SELECT 1 FROM messages m WHERE m.chat_id = c.chat_id AND m.id = $6::text) AS dup, \
            (SELECT COALESCE(MAX(m.position), 0) + 1 FROM messages m WHERE m.chat_id = c.chat_id) \
                AS next_position \
        FROM chats c WHERE c.chat_id = $1::text \
    ), decision AS ( \
        SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM snap) THEN 'create' ELSE ( \
            SELECT CASE \
                WHEN s.agent IS NOT NULL THEN NULL \
                WHEN s.dup THEN NULL \
                WHEN s.channel_platform IS DISTINCT FROM $3::text \
                  OR s.channel_thread IS DISTINCT FROM $4::text THEN NULL \
                WHEN s.channel_platform IS NULL AND s.owner IS NOT NULL \
                  AND s.owner IS DISTINCT FROM $2::text THEN NULL \
                WHEN s.awaiting_message_id IS NULL AND s.lease_holder IS NULL THEN 'start' \
                WHEN s.awaiting_message_id IS NULL AND s.lease_until <= $5::bigint THEN NULL \
                WHEN NOT $14::boolean THEN NULL \
                WHEN $10::text = 'steer' AND s.lease_holder IS NOT NULL \
                  AND s.lease_until > $5::bigint AND s.driver IS NOT DISTINCT FROM $8::text \
                  THEN 'steer' \
                ELSE 'queue' END \
            FROM snap s) END AS d \
    ), new_chat AS ( \
        INSERT INTO chats (chat_id, owner, channel_platform, channel_thread, created_at, \
            updated_at, lease_holder, lease_token, lease_until, driver, version) \
        SELECT $1::text, $2::text, $3::text, $4::text, $5::bigint, $5::bigint, $11::text, 1, \
            $12::bigint, $13::text, 1 \
        FROM decision WHERE d = 'create' \
        ON CONFLICT DO NOTHING \
        RETURNING * \
    ), old_chat AS ( \
        UPDATE chats c SET version = c.version + 1, updated_at = $5::bigint, \
            lease_holder = CASE WHEN x.d = 'start' THEN $11::text ELSE c.lease_holder END, \
            lease_token = CASE WHEN x.d = 'start' THEN c.lease_token + 1 ELSE c.lease_token END, \
            lease_until = CASE WHEN x.d = 'start' THEN $12::bigint ELSE c.lease_until END, \
            driver = CASE WHEN x.d = 'start' THEN $13::text ELSE c.driver END \
        FROM decision x, snap s \
        WHERE c.chat_id = $1::text AND x.d IN ('start', 'queue', 'steer') \
          AND c.version = s.version AND c.lease_token = s.lease_token \
          AND c.lease_holder IS NOT DISTINCT FROM s.lease_holder \
          AND c.lease_until = s.lease_until AND c.driver IS NOT DISTINCT FROM s.driver \
          AND c.awaiting_message_id IS NOT DISTINCT FROM s.awaiting_message_id \
        RETURNING c.* \
    ), chat AS ( \
        SELECT * FROM new_chat UNION ALL SELECT * FROM old_chat \
    ), msg AS ( ",
    msg_insert!(),
    "SELECT $1::text, $6::text, $7::text, $8::text, x.d IN ('queue', 'steer'), \
            CASE WHEN x.d = 'steer' THEN 'steer' ELSE 'queue' END, \
            CASE x.d WHEN 'create' THEN 1 WHEN 'start' THEN (SELECT next_position FROM snap) END, \
            0, $9::text, $5::bigint, $5::bigint, c.version \
        FROM chat c, decision x \
        RETURNING m.* \
    ) \
    SELECT x.d AS decision, COALESCE((SELECT version FROM snap), 0) AS prior_version, ",
    chat_cols!("c"),
    ", ",
    msg_cols!("m", "m_"),
    " FROM chat c, decision x, msg m"
);

/// Takes the (locked) chat's lease: $2 holder, $3 expiry, $4 driver, $5 now, $6 version step.
const TAKE_LEASE: &str = concat!(
    "UPDATE chats c SET lease_holder = $2, lease_token = c.lease_token + 1, lease_until = $3, \
     driver = $4, updated_at = $5, version = c.version + $6 WHERE c.chat_id = $1 RETURNING ",
    chat_cols!("c")
);

/// Clears an expired lease that was taken over with nothing to run: $2 version step, $3 now.
const CLEAR_TAKEN_LEASE: &str = concat!(
    "UPDATE chats c SET lease_holder = NULL, lease_token = c.lease_token + 1, lease_until = 0, \
     driver = NULL, updated_at = $3, version = c.version + $2 WHERE c.chat_id = $1 RETURNING ",
    chat_cols!("c")
);

const TURN_MESSAGES: &str = concat!(
    "SELECT ",
    msg_cols!("m", ""),
    " FROM messages m WHERE m.chat_id = $1 AND m.position = $2 ORDER BY m.sub, m.seq"
);

const NEXT_QUEUED: &str =
    "SELECT seq, author FROM messages WHERE chat_id = $1 AND queued ORDER BY seq LIMIT 1";

/// $2 seq, $3 position, $4 now, $5 version.
const PROMOTE: &str = concat!(
    "UPDATE messages m SET queued = FALSE, position = $3, sub = 0, updated_at = $4, version = $5 \
     WHERE m.chat_id = $1 AND m.seq = $2 AND m.queued RETURNING ",
    msg_cols!("m", "")
);

/// `end_turn` in one statement: fenced, and a compare-and-swap on the chat's version so that the
/// queue the snapshot read is the queue now (every enqueue raises the version under the chat row's
/// lock). No row: the lease is lost, or the swap failed (the careful path runs it again under the
/// lock).
///
/// $1 chat, $2 holder, $3 token, $4 now, $5 mode (`next`/`handoff`), $6 reply id (or NULL),
/// $7 reply role, $8 reply author, $9 reply body, $10 reply position, $11 job kind (or NULL),
/// $12 job key, $13 job payload, $14 job run-at, $15 delivery job kind (or NULL), $16 its key,
/// $17 its payload, $18 its run-at.
const END_TURN: &str = concat!(
    "WITH snap AS (SELECT version FROM chats WHERE chat_id = $1::text), \
     next_msg AS (SELECT m.seq, m.author FROM messages m WHERE m.chat_id = $1::text AND m.queued \
                  ORDER BY m.seq LIMIT 1), \
     promote AS (SELECT n.seq, n.author FROM next_msg n WHERE $5::text = 'next'), \
     chat AS ( \
        UPDATE chats c SET updated_at = $4::bigint, \
            version = c.version + CASE WHEN $6::text IS NOT NULL \
                OR EXISTS (SELECT 1 FROM promote) THEN 1 ELSE 0 END, \
            lease_holder = CASE WHEN EXISTS (SELECT 1 FROM promote) THEN c.lease_holder END, \
            lease_until = CASE WHEN EXISTS (SELECT 1 FROM promote) THEN c.lease_until ELSE 0 END, \
            driver = CASE WHEN EXISTS (SELECT 1 FROM promote) \
                THEN (SELECT author FROM promote) END \
        WHERE c.chat_id = $1::text AND c.lease_holder = $2::text AND c.lease_token = $3::bigint \
          AND c.version = (SELECT version FROM snap) \
        RETURNING c.version \
     ), reply AS ( ",
    msg_insert!(),
    "SELECT $1::text, $6::text, $7::text, $8::text, FALSE, 'queue', $10::bigint, ",
    reply_sub!(),
    ", $9::text, $4::bigint, $4::bigint, c.version FROM chat c WHERE $6::text IS NOT NULL",
    msg_upsert_tail!(),
    "RETURNING m.* \
     ), promoted AS ( \
        UPDATE messages m SET queued = FALSE, sub = 0, updated_at = $4::bigint, \
            version = c.version, \
            position = GREATEST((SELECT COALESCE(MAX(position), 0) FROM messages \
                                 WHERE chat_id = $1::text), COALESCE($10::bigint, 0)) + 1 \
        FROM chat c, promote p WHERE m.seq = p.seq AND m.queued \
        RETURNING m.* \
     ), job AS ( \
        INSERT INTO jobs (kind, key, payload, run_at, created_at) \
        SELECT $11::text, $12::text, $13::text, $14::bigint, $4::bigint FROM chat \
        WHERE $5::text = 'handoff' AND $11::text IS NOT NULL \
          AND EXISTS (SELECT 1 FROM next_msg)",
    job_upsert_tail!(),
    "RETURNING id \
     ), delivery AS ( \
        INSERT INTO jobs (kind, key, payload, run_at, created_at) \
        SELECT $15::text, $16::text, $17::text, $18::bigint, $4::bigint FROM chat \
        WHERE $15::text IS NOT NULL",
    job_upsert_tail!(),
    "RETURNING id \
     ) \
     SELECT EXISTS (SELECT 1 FROM next_msg) AS has_queue, ",
    msg_cols!("r", "r_"),
    ", ",
    msg_cols!("p", "p_"),
    " FROM chat c LEFT JOIN reply r ON TRUE LEFT JOIN promoted p ON TRUE"
);

/// `take_chat` in one statement for a free lease: takes it and promotes the oldest queued
/// message when the chat still has the version its snapshot read (a compare-and-swap, as
/// [`END_TURN`]). The snapshot's state tells the caller why nothing was taken.
///
/// $1 chat, $2 holder, $3 expiry, $4 now.
const TAKE_CHAT: &str = concat!(
    "WITH snap AS (SELECT * FROM chats WHERE chat_id = $1::text), \
     next_msg AS (SELECT m.seq, m.author FROM messages m WHERE m.chat_id = $1::text AND m.queued \
                  ORDER BY m.seq LIMIT 1), \
     chat AS ( \
        UPDATE chats c SET lease_holder = $2::text, lease_token = c.lease_token + 1, \
            lease_until = $3::bigint, driver = n.author, version = c.version + 1, \
            updated_at = $4::bigint \
        FROM snap s, next_msg n \
        WHERE c.chat_id = $1::text AND s.lease_holder IS NULL AND s.awaiting_message_id IS NULL \
          AND c.version = s.version AND c.lease_holder IS NULL AND c.awaiting_message_id IS NULL \
        RETURNING c.lease_token, c.version \
     ), promoted AS ( \
        UPDATE messages m SET queued = FALSE, sub = 0, updated_at = $4::bigint, \
            version = c.version, \
            position = (SELECT COALESCE(MAX(position), 0) + 1 FROM messages \
                        WHERE chat_id = $1::text) \
        FROM chat c, next_msg n WHERE m.seq = n.seq AND m.queued \
        RETURNING m.* \
     ) \
     SELECT s.lease_holder, s.lease_until, s.awaiting_message_id, \
        EXISTS (SELECT 1 FROM next_msg) AS has_queue, c.lease_token AS taken_token, ",
    msg_cols!("p", "p_"),
    " FROM snap s LEFT JOIN chat c ON TRUE LEFT JOIN promoted p ON TRUE"
);

/// `checkpoint`: fenced; saves the reply and (when $10) joins the driver's queued steers — then
/// also a compare-and-swap on the version, so that every steer committed before the chat row was
/// locked joins.
///
/// $1 chat, $2 holder, $3 token, $4 now, $5 reply id, $6 role, $7 author, $8 body, $9 position,
/// $10 join steers, $11 driver.
const CHECKPOINT: &str = concat!(
    "WITH snap AS (SELECT version FROM chats WHERE chat_id = $1::text), \
     chat AS ( \
        UPDATE chats c SET version = c.version + 1, updated_at = $4::bigint \
        WHERE c.chat_id = $1::text AND c.lease_holder = $2::text AND c.lease_token = $3::bigint \
          AND (NOT $10::boolean OR c.version = (SELECT version FROM snap)) \
        RETURNING c.version \
     ), steers AS ( \
        UPDATE messages m SET queued = FALSE, position = $9::bigint, sub = m.seq, \
            updated_at = $4::bigint, version = c.version \
        FROM chat c \
        WHERE $10::boolean AND m.chat_id = $1::text AND m.queued AND m.delivery = 'steer' \
          AND m.role = 'user' AND m.author IS NOT DISTINCT FROM $11::text \
        RETURNING m.* \
     ), reply AS ( ",
    fenced_reply_sql!(),
    " ) \
     SELECT 'reply' AS kind, ",
    msg_cols!("r", ""),
    " FROM reply r UNION ALL SELECT 'steer', ",
    msg_cols!("s", ""),
    " FROM steers s"
);

/// `await_answers`: fenced; saves the reply as the waiting message, releases the lease, creates
/// the question records and schedules the job.
///
/// $1 chat, $2 holder, $3 token, $4 now, $5 reply id, $6 role, $7 author, $8 body, $9 position,
/// $10 questions (JSON), $11 empty record, $12 record expiry, $13 job kind (or NULL), $14 key,
/// $15 payload, $16 run-at, $17 delivery job kind (or NULL), $18 its key, $19 its payload,
/// $20 its run-at.
const AWAIT: &str = concat!(
    "WITH chat AS ( \
        UPDATE chats c SET version = c.version + 1, updated_at = $4::bigint, \
            awaiting_message_id = $5::text, lease_holder = NULL, lease_until = 0, driver = NULL \
        WHERE c.chat_id = $1::text AND c.lease_holder = $2::text AND c.lease_token = $3::bigint \
        RETURNING c.version \
     ), reply AS ( ",
    fenced_reply_sql!(),
    " ), questions AS ( \
        INSERT INTO questions (chat_id, tool_call_id, message_id, call_index, input, record, \
            revision, answer_deadline, created_at, updated_at, expires_at) \
        SELECT x.chat_id, x.tool_call_id, x.message_id, x.call_index, x.input, $11::text, 0, \
            x.answer_deadline, $4::bigint, $4::bigint, $12::bigint \
        FROM chat, jsonb_to_recordset($10::text::jsonb) AS x(chat_id text, tool_call_id text, \
            message_id text, call_index bigint, input text, answer_deadline bigint) \
        ON CONFLICT (chat_id, tool_call_id) DO NOTHING \
     ), job AS ( \
        INSERT INTO jobs (kind, key, payload, run_at, created_at) \
        SELECT $13::text, $14::text, $15::text, $16::bigint, $4::bigint FROM chat \
        WHERE $13::text IS NOT NULL",
    job_upsert_tail!(),
    "), delivery AS ( \
        INSERT INTO jobs (kind, key, payload, run_at, created_at) \
        SELECT $17::text, $18::text, $19::text, $20::bigint, $4::bigint FROM chat \
        WHERE $17::text IS NOT NULL",
    job_upsert_tail!(),
    ") SELECT ",
    msg_cols!("r", ""),
    " FROM reply r"
);

/// `edit_queued`: $1 chat, $2 id, $3 by, $4 now, $5 parts (JSON or NULL), $6 delivery (or NULL).
const EDIT_QUEUED: &str = concat!(
    "WITH cur AS (SELECT m.seq, m.role, m.author, m.queued FROM messages m \
                  WHERE m.chat_id = $1::text AND m.id = $2::text), \
     ok AS (SELECT seq FROM cur WHERE queued AND role = 'user' \
            AND author IS NOT DISTINCT FROM $3::text), \
     chat AS (UPDATE chats c SET version = c.version + 1, updated_at = $4::bigint FROM ok \
              WHERE c.chat_id = $1::text RETURNING c.version), \
     upd AS ( \
        UPDATE messages m SET \
            body = CASE WHEN $5::text IS NULL THEN m.body \
                   ELSE jsonb_set(m.body::jsonb, '{parts}', $5::text::jsonb)::text END, \
            delivery = COALESCE($6::text, m.delivery), updated_at = $4::bigint, \
            version = c.version \
        FROM chat c, ok WHERE m.seq = ok.seq AND m.queued \
        RETURNING m.* \
     ) \
     SELECT cur.role, cur.author, cur.queued, ",
    msg_cols!("u", "u_"),
    " FROM cur LEFT JOIN upd u ON TRUE"
);

/// `delete_queued`: $1 chat, $2 id, $3 by, $4 now.
const DELETE_QUEUED: &str = "WITH cur AS (SELECT m.seq, m.role, m.author, m.queued FROM messages m \
                  WHERE m.chat_id = $1::text AND m.id = $2::text), \
     ok AS (SELECT seq FROM cur WHERE queued AND role = 'user' \
            AND author IS NOT DISTINCT FROM $3::text), \
     chat AS (UPDATE chats c SET version = c.version + 1, updated_at = $4::bigint FROM ok \
              WHERE c.chat_id = $1::text RETURNING c.version), \
     del AS (DELETE FROM messages m USING chat c, ok WHERE m.seq = ok.seq AND m.queued \
             RETURNING m.seq) \
     SELECT cur.role, cur.author, cur.queued, (SELECT count(*) FROM del) AS deleted FROM cur";

fn lease_lost(chat: &ChatId) -> StoreError {
    StoreError::LeaseLost {
        chat_id: chat.clone(),
    }
}

fn new_message_id() -> String {
    format!("msg_{}", uuid::Uuid::new_v4().simple())
}

impl PostgresStore {
    /// The reply of the turn at `position` as [`interrupted_reply`] marks it, when it needs one
    /// (under the chat's lock, when its lease is taken over).
    async fn interrupted_turn(
        &self,
        conn: &mut PgConnection,
        chat: &ChatId,
        position: i64,
        now: Millis,
    ) -> Result<Option<UiMessage>> {
        if position == 0 {
            return Ok(None);
        }
        let turn = sqlx::query(TURN_MESSAGES)
            .bind(chat.as_str())
            .bind(position)
            .fetch_all(&mut *conn)
            .await
            .db(self)?
            .iter()
            .map(|r| rows::message(r, ""))
            .collect::<Result<Vec<_>>>()?;
        let mut outcomes = Vec::new();
        if let Some(reply) = turn.iter().find(|m| m.message.role == Role::Assistant) {
            let rows = sqlx::query(
                "SELECT tool_call_id, outcome FROM questions \
                 WHERE chat_id = $1 AND message_id = $2 AND outcome IS NOT NULL",
            )
            .bind(chat.as_str())
            .bind(&reply.message.id)
            .fetch_all(&mut *conn)
            .await
            .db(self)?;
            for r in &rows {
                let id: String = r.try_get("tool_call_id").db(self)?;
                let outcome: String = r.try_get("outcome").db(self)?;
                outcomes.push((
                    id,
                    from_json::<QuestionOutcome>("question outcome", &outcome)?,
                ));
            }
        }
        Ok(interrupted_reply(&turn, &outcomes, &new_message_id(), now))
    }

    /// Saves the interrupted turn's reply (from [`Self::interrupted_turn`]) at its turn's reply
    /// slot, with the chat's new `version`.
    /// and writes what it owes its thread (`req.interrupted`), in the same transaction.
    async fn save_interrupted(
        &self,
        conn: &mut PgConnection,
        row: &ChatRow,
        req: &LeaseRequest,
        reply: Option<UiMessage>,
        position: i64,
    ) -> Result<Option<StoredMessage>> {
        let Some(reply) = reply else {
            return Ok(None);
        };
        let saved = self
            .put_message(
                conn,
                &row.chat_id,
                &reply,
                false,
                Delivery::Queue,
                Some(position),
                REPLY_SUB,
                req.now,
                row.version,
            )
            .await?;
        if let Some(job) = req.interrupted.and_then(|d| d.job_for(row, &saved.message)) {
            self.enqueue_in(&mut *conn, &job).await?;
        }
        Ok(Some(saved))
    }

    /// Takes the (locked) chat's lease for `req`, driven by `driver`.
    async fn take_lease(
        &self,
        conn: &mut PgConnection,
        chat: &ChatId,
        req: &LeaseRequest,
        driver: Option<&UserId>,
        version_step: i64,
    ) -> Result<ChatRow> {
        let row = sqlx::query(TAKE_LEASE)
            .bind(chat.as_str())
            .bind(&req.holder)
            .bind(req.now + req.ttl_ms)
            .bind(user_str(driver))
            .bind(req.now)
            .bind(version_step)
            .fetch_one(&mut *conn)
            .await
            .db(self)?;
        rows::chat(&row)
    }

    async fn next_queued(
        &self,
        conn: &mut PgConnection,
        chat: &ChatId,
    ) -> Result<Option<(i64, Option<UserId>)>> {
        let row = sqlx::query(NEXT_QUEUED)
            .bind(chat.as_str())
            .fetch_optional(&mut *conn)
            .await
            .db(self)?;
        row.map(|r| {
            Ok((
                r.try_get("seq").db(self)?,
                r.try_get::<Option<String>, _>("author")
                    .db(self)?
                    .map(UserId),
            ))
        })
        .transpose()
    }

    async fn send_fast(&self, op: &SendOp<'_>) -> Result<Option<Sent>> {
        let req = op.lease;
        let m = op.message;
        let row = sqlx::query(SEND)
            .bind(op.chat.chat_id.as_str())
            .bind(user_str(op.chat.owner.as_ref()))
            .bind(op.chat.channel.as_ref().map(|c| c.platform.as_str()))
            .bind(op.chat.channel.as_ref().map(|c| c.thread.as_str()))
            .bind(req.now)
            .bind(&m.id)
            .bind(m.role.as_str())
            .bind(user_str(m.metadata.author.as_ref()))
            .bind(rows::message_body(m)?)
            .bind(op.delivery.as_str())
            .bind(&req.holder)
            .bind(req.now + req.ttl_ms)
            .bind(user_str(req.driver.as_ref()))
            .bind(op.queue_if_busy)
            .fetch_optional(&self.pool)
            .await
            .db(self)?;
        let Some(row) = row else { return Ok(None) };
        let decision: String = row.try_get("decision").db(self)?;
        let chat = rows::chat(&row)?;
        let message = rows::message(&row, "m_")?;
        let created = decision == "create";
        Ok(Some(match decision.as_str() {
            "create" | "start" => {
                let lease = chat
                    .lease
                    .as_ref()
                    .ok_or_else(|| StoreError::corrupt_msg("a started chat has no lease"))?;
                Sent::Started {
                    lease: Lease {
                        chat_id: chat.chat_id.clone(),
                        holder: lease.holder.clone(),
                        token: lease.token,
                        expires_at: lease.expires_at,
                        driver: lease.driver.clone(),
                        taken_over: false,
                    },
                    prior_version: row.try_get("prior_version").db(self)?,
                    created,
                    chat,
                    message,
                    interrupted: None,
                }
            }
            _ => {
                // The lease is as the decision read it (the swap proved it): the shared rules
                // agree with the SQL.
                debug_assert!(check_sender(&chat, op.chat, op.message).is_ok());
                debug_assert_eq!(
                    steer_or_queue(op.delivery, &chat, m.metadata.author.as_ref(), req.now),
                    message.delivery
                );
                Sent::Queued {
                    delivery: message.delivery,
                    chat,
                    created,
                    message,
                }
            }
        }))
    }

    /// `send` under the chat's lock, deciding with the shared rules on the locked row.
    async fn send_careful(&self, op: &SendOp<'_>) -> Result<Sent> {
        let req = op.lease;
        let now = req.now;
        let chat_id = &op.chat.chat_id;
        let mut tx = self.begin().await?;
        let Locked { chat, created } = self
            .lock_chat(&mut tx, chat_id, Some((op.chat, now)))
            .await?
            .ok_or_else(|| StoreError::corrupt_msg(format!("chat {chat_id} vanished")))?;
        if !created {
            check_sender(&chat, op.chat, op.message)?;
        }
        let (dup, last_position) = self.message_facts(&mut tx, chat_id, &op.message.id).await?;
        if dup {
            return Ok(Sent::Duplicate { chat });
        }
        let author = op.message.metadata.author.as_ref();
        let prior_version = chat.version;
        let idle = chat.live_lease(now).is_none() && chat.awaiting_message_id.is_none();
        let sent = if idle {
            let taken_over = chat.lease.is_some();
            let interrupted = if taken_over {
                self.interrupted_turn(&mut tx, chat_id, last_position, now)
                    .await?
            } else {
                None
            };
            let chat = self
                .take_lease(&mut tx, chat_id, req, req.driver.as_ref(), 1)
                .await?;
            let interrupted = self
                .save_interrupted(&mut tx, &chat, req, interrupted, last_position)
                .await?;
            let message = self
                .put_message(
                    &mut tx,
                    chat_id,
                    op.message,
                    false,
                    Delivery::Queue,
                    Some(last_position + 1),
                    0,
                    now,
                    chat.version,
                )
                .await?;
            let lease = chat.lease.clone().expect("the lease was just taken");
            Sent::Started {
                lease: Lease {
                    chat_id: chat_id.clone(),
                    holder: lease.holder,
                    token: lease.token,
                    expires_at: lease.expires_at,
                    driver: lease.driver,
                    taken_over,
                },
                chat,
                created,
                prior_version,
                message,
                interrupted,
            }
        } else if !op.queue_if_busy {
            tx.commit().await.db(self)?;
            return Ok(Sent::Busy { chat });
        } else {
            let delivery = steer_or_queue(op.delivery, &chat, author, now);
            let chat = self.bump_chat(&mut tx, chat_id, now).await?;
            let message = self
                .put_message(
                    &mut tx,
                    chat_id,
                    op.message,
                    true,
                    delivery,
                    None,
                    0,
                    now,
                    chat.version,
                )
                .await?;
            Sent::Queued {
                chat,
                created,
                message,
                delivery,
            }
        };
        tx.commit().await.db(self)?;
        Ok(sent)
    }

    async fn run_end_turn(
        &self,
        conn: &mut PgConnection,
        op: &EndTurnOp<'_>,
    ) -> Result<Option<TurnEnded>> {
        let l = op.lease;
        let (mode, job) = match op.mode {
            EndMode::Next => ("next", None),
            EndMode::Handoff(job) => ("handoff", Some(job)),
        };
        let (job, delivery) = (job_params(job)?, job_params(op.delivery)?);
        let (reply, position) = match op.reply {
            Some((m, p)) => (Some(m), Some(p)),
            None => (None, None),
        };
        let row = sqlx::query(END_TURN)
            .bind(l.chat_id.as_str())
            .bind(&l.holder)
            .bind(l.token)
            .bind(op.now)
            .bind(mode)
            .bind(reply.map(|m| m.id.as_str()))
            .bind(reply.map(|m| m.role.as_str()))
            .bind(reply.and_then(|m| user_str(m.metadata.author.as_ref())))
            .bind(reply.map(rows::message_body).transpose()?)
            .bind(position)
            .bind_job(job)
            .bind_job(delivery)
            .fetch_optional(&mut *conn)
            .await
            .db(self)?;
        let Some(row) = row else { return Ok(None) };
        let reply = rows::message_opt(&row, "r_")?;
        let has_queue: bool = row.try_get("has_queue").db(self)?;
        Ok(Some(match (op.mode, rows::message_opt(&row, "p_")?) {
            (EndMode::Next, Some(next)) => TurnEnded::Promoted {
                reply,
                lease: Lease {
                    driver: next.author().cloned(),
                    ..l.clone()
                },
                next,
            },
            (EndMode::Next, None) => TurnEnded::Released { reply },
            (EndMode::Handoff(_), _) => TurnEnded::HandedOn {
                reply,
                queued: has_queue,
            },
        }))
    }

    /// The careful path of a fenced operation begins: a transaction on `pool` that locked the chat
    /// and checked that `lease` still holds it.
    async fn begin_fenced(
        &self,
        pool: &PgPool,
        lease: &Lease,
    ) -> Result<Transaction<'static, Postgres>> {
        let mut tx = pool.begin().await.db(self)?;
        let locked = self.lock_chat(&mut tx, &lease.chat_id, None).await?;
        let held = locked
            .and_then(|l| l.chat.lease)
            .is_some_and(|l| l.holder == lease.holder && l.token == lease.token);
        if held {
            Ok(tx)
        } else {
            Err(lease_lost(&lease.chat_id))
        }
    }

    /// The careful path of a fenced operation ends: commits what it `done` (`None`: the lease
    /// was lost, nothing is committed).
    async fn commit_fenced<T>(
        &self,
        tx: Transaction<'static, Postgres>,
        lease: &Lease,
        done: Option<T>,
    ) -> Result<T> {
        let done = done.ok_or_else(|| lease_lost(&lease.chat_id))?;
        tx.commit().await.db(self)?;
        Ok(done)
    }

    async fn take_chat_careful(
        &self,
        chat_id: &ChatId,
        req: &LeaseRequest,
    ) -> Result<Option<Taken>> {
        let now = req.now;
        let mut tx = self.begin().await?;
        let Some(Locked { chat, .. }) = self.lock_chat(&mut tx, chat_id, None).await? else {
            return Ok(None);
        };
        if chat.live_lease(now).is_some() || chat.awaiting_message_id.is_some() {
            return Ok(None);
        }
        let taken_over = chat.lease.is_some();
        let (_, last_position) = self.message_facts(&mut tx, chat_id, "").await?;
        let interrupted = if taken_over {
            self.interrupted_turn(&mut tx, chat_id, last_position, now)
                .await?
        } else {
            None
        };
        let next = self.next_queued(&mut tx, chat_id).await?;
        let step = i64::from(interrupted.is_some() || next.is_some());
        let chat = match &next {
            Some((_, author)) => {
                self.take_lease(&mut tx, chat_id, req, author.as_ref(), step)
                    .await?
            }
            None if taken_over => {
                let row = sqlx::query(CLEAR_TAKEN_LEASE)
                    .bind(chat_id.as_str())
                    .bind(step)
                    .bind(now)
                    .fetch_one(&mut *tx)
                    .await
                    .db(self)?;
                rows::chat(&row)?
            }
            None => return Ok(Some(took_nothing())),
        };
        let interrupted = self
            .save_interrupted(&mut tx, &chat, req, interrupted, last_position)
            .await?;
        let next = match next {
            Some((seq, author)) => {
                let row = sqlx::query(PROMOTE)
                    .bind(chat_id.as_str())
                    .bind(seq)
                    .bind(last_position + 1)
                    .bind(now)
                    .bind(chat.version)
                    .fetch_one(&mut *tx)
                    .await
                    .db(self)?;
                let lease = chat.lease.clone().expect("the lease was just taken");
                Some((
                    Lease {
                        chat_id: chat_id.clone(),
                        holder: lease.holder,
                        token: lease.token,
                        expires_at: lease.expires_at,
                        driver: author,
                        taken_over,
                    },
                    rows::message(&row, "")?,
                ))
            }
            None => None,
        };
        tx.commit().await.db(self)?;
        Ok(Some(Taken { interrupted, next }))
    }

    async fn run_checkpoint(
        &self,
        conn: &mut PgConnection,
        op: &CheckpointOp<'_>,
    ) -> Result<Option<Checkpointed>> {
        let rows = fenced_reply(CHECKPOINT, op.lease, op.now, op.reply, op.position)?
            .bind(op.join_steers)
            .bind(user_str(op.lease.driver.as_ref()))
            .fetch_all(&mut *conn)
            .await
            .db(self)?;
        let mut reply = None;
        let mut steers = Vec::new();
        for row in &rows {
            let kind: String = row.try_get("kind").db(self)?;
            let m = rows::message(row, "")?;
            if kind == "reply" {
                reply = Some(m);
            } else {
                steers.push(m);
            }
        }
        steers.sort_by_key(|m| m.seq);
        Ok(reply.map(|reply| Checkpointed { reply, steers }))
    }
}

/// A `Taken` that took nothing (the chat was idle with an empty queue).
fn took_nothing() -> Taken {
    Taken {
        interrupted: None,
        next: None,
    }
}

impl PostgresStore {
    /// `r`, with the job a take-over owes its thread ([`LeaseRequest::interrupted`]) announced
    /// when a turn was marked interrupted.
    fn interruption_announced<T>(
        &self,
        req: &LeaseRequest,
        interrupted: impl Fn(&T) -> bool,
        r: Result<T>,
    ) -> Result<T> {
        match (&r, req.interrupted) {
            (Ok(t), Some(d)) if interrupted(t) => self.jobs_announced(&[Some(d.run_at)], r),
            _ => r,
        }
    }
}

#[async_trait]
impl TurnStore for PostgresStore {
    async fn expired_leases(&self, now: Millis, limit: u32) -> Result<Vec<ChatId>> {
        let rows = sqlx::query(
            "SELECT chat_id FROM chats \
             WHERE lease_holder IS NOT NULL AND lease_until <= $1 \
               AND awaiting_message_id IS NULL \
             ORDER BY lease_until, chat_id LIMIT $2",
        )
        .bind(now)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .db(self)?;
        rows.iter()
            .map(|r| {
                ChatId::new(r.try_get::<String, _>("chat_id").db(self)?)
                    .map_err(|e| StoreError::corrupt_msg(e.to_string()))
            })
            .collect()
    }

    async fn send(&self, op: &SendOp<'_>) -> Result<Sent> {
        let r = async {
            if !self.careful_only
                && let Some(sent) = self.send_fast(op).await?
            {
                return Ok(sent);
            }
            self.send_careful(op).await
        }
        .await;
        let r = self.interruption_announced(
            op.lease,
            |s| {
                matches!(
                    s,
                    Sent::Started {
                        interrupted: Some(_),
                        ..
                    }
                )
            },
            r,
        );
        self.announced(&op.chat.chat_id, r)
    }

    async fn checkpoint(&self, op: &CheckpointOp<'_>) -> Result<Checkpointed> {
        let r = async {
            // A step checkpoint commits without waiting for the server's disk (see `relaxed`).
            if !self.careful_only {
                let mut conn = self.relaxed.acquire().await.db(self)?;
                if let Some(done) = self.run_checkpoint(&mut conn, op).await? {
                    return Ok(done);
                }
                if !op.join_steers {
                    // Without steers the statement is only fenced: no row means the lease is lost.
                    return Err(lease_lost(&op.lease.chat_id));
                }
            }
            let mut tx = self.begin_fenced(&self.relaxed, op.lease).await?;
            let done = self.run_checkpoint(&mut tx, op).await?;
            self.commit_fenced(tx, op.lease, done).await
        }
        .await;
        self.announced(&op.lease.chat_id, r)
    }

    async fn await_answers(&self, op: &AwaitOp<'_>) -> Result<StoredMessage> {
        let r = async {
            let questions = questions_json(op.questions)?;
            let (job, delivery) = (job_params(op.job)?, job_params(op.delivery)?);
            let row = fenced_reply(AWAIT, op.lease, op.now, op.reply, op.position)?
                .bind(to_json(&questions)?)
                .bind(empty_record()?)
                .bind(op.now + QUESTION_TTL_MS)
                .bind_job(job)
                .bind_job(delivery)
                .fetch_optional(&self.pool)
                .await
                .db(self)?;
            match row {
                Some(row) => rows::message(&row, ""),
                None => Err(lease_lost(&op.lease.chat_id)),
            }
        }
        .await;
        let r = self.jobs_announced(
            &[op.job.map(|j| j.run_at), op.delivery.map(|j| j.run_at)],
            r,
        );
        self.announced(&op.lease.chat_id, r)
    }

    async fn end_turn(&self, op: &EndTurnOp<'_>) -> Result<TurnEnded> {
        let r = async {
            if !self.careful_only {
                let mut conn = self.pool.acquire().await.db(self)?;
                if let Some(ended) = self.run_end_turn(&mut conn, op).await? {
                    return Ok(ended);
                }
            }
            // The lease is lost, or something was written since the snapshot (a message queued):
            // lock the chat first, then decide on what is committed.
            let mut tx = self.begin_fenced(&self.pool, op.lease).await?;
            let ended = self.run_end_turn(&mut tx, op).await?;
            self.commit_fenced(tx, op.lease, ended).await
        }
        .await;
        let handoff = match op.mode {
            EndMode::Handoff(job) => Some(job.run_at),
            EndMode::Next => None,
        };
        let r = self.jobs_announced(&[handoff, op.delivery.map(|j| j.run_at)], r);
        self.announced(&op.lease.chat_id, r)
    }

    async fn take_chat(&self, chat: &ChatId, req: &LeaseRequest) -> Result<Option<Taken>> {
        let r = async {
            if !self.careful_only {
                let row = sqlx::query(TAKE_CHAT)
                    .bind(chat.as_str())
                    .bind(&req.holder)
                    .bind(req.now + req.ttl_ms)
                    .bind(req.now)
                    .fetch_optional(&self.pool)
                    .await
                    .db(self)?;
                let Some(row) = row else { return Ok(None) };
                let holder: Option<String> = row.try_get("lease_holder").db(self)?;
                let until: i64 = row.try_get("lease_until").db(self)?;
                let awaiting: Option<String> = row.try_get("awaiting_message_id").db(self)?;
                if awaiting.is_some() || (holder.is_some() && until > req.now) {
                    return Ok(None);
                }
                if holder.is_none() {
                    if !row.try_get::<bool, _>("has_queue").db(self)? {
                        // Idle with nothing queued: taking and releasing would change nothing.
                        return Ok(Some(took_nothing()));
                    }
                    if let Some(token) = row.try_get::<Option<i64>, _>("taken_token").db(self)? {
                        let next = rows::message_opt(&row, "p_")?.ok_or_else(|| {
                            StoreError::corrupt_msg("a promoted message vanished")
                        })?;
                        return Ok(Some(Taken {
                            interrupted: None,
                            next: Some((
                                Lease {
                                    chat_id: chat.clone(),
                                    holder: req.holder.clone(),
                                    token,
                                    expires_at: req.now + req.ttl_ms,
                                    driver: next.author().cloned(),
                                    taken_over: false,
                                },
                                next,
                            )),
                        }));
                    }
                }
                // An expired lease to take over (its turn is marked interrupted), or a lost swap.
            }
            self.take_chat_careful(chat, req).await
        }
        .await;
        let r = self.interruption_announced(
            req,
            |t: &Option<Taken>| t.as_ref().is_some_and(|t| t.interrupted.is_some()),
            r,
        );
        self.announced(chat, r)
    }

    async fn resume_turn(
        &self,
        chat: &ChatId,
        message_id: &str,
        req: &LeaseRequest,
    ) -> Result<Resume> {
        let r = async {
            if !self.careful_only {
                let mut conn = self.pool.acquire().await.db(self)?;
                if let Some(resume) = self.resume_once(&mut conn, chat, message_id, req).await? {
                    return Ok(resume);
                }
            }
            let mut tx = self.begin().await?;
            self.lock_chat(&mut tx, chat, None).await?;
            let resume = self
                .resume_once(&mut tx, chat, message_id, req)
                .await?
                .ok_or_else(|| {
                    StoreError::unavailable_msg(format!(
                        "resuming chat {chat} failed under its lock"
                    ))
                })?;
            tx.commit().await.db(self)?;
            Ok(resume)
        }
        .await;
        self.announced(chat, r)
    }

    async fn renew_lease(&self, lease: &mut Lease, ttl_ms: Millis, now: Millis) -> Result<()> {
        let expires_at = now + ttl_ms;
        self.set_lease_until(
            "UPDATE chats SET lease_until = $4 \
             WHERE chat_id = $1 AND lease_holder = $2 AND lease_token = $3",
            lease,
            expires_at,
        )
        .await?;
        lease.expires_at = expires_at;
        Ok(())
    }

    async fn expire_lease(&self, lease: &Lease, now: Millis) -> Result<()> {
        let r = self
            .set_lease_until(
                "UPDATE chats SET lease_until = LEAST(lease_until, $4) \
                 WHERE chat_id = $1 AND lease_holder = $2 AND lease_token = $3",
                lease,
                now,
            )
            .await;
        self.announced(&lease.chat_id, r)
    }

    async fn edit_queued(&self, op: &QueuedOp<'_>, edit: &QueuedEdit) -> Result<QueuedChange> {
        let r = async {
            let parts = edit.parts.as_ref().map(to_json).transpose()?;
            let query = || {
                queued_change(EDIT_QUEUED, op)
                    .bind(parts.as_deref())
                    .bind(edit.delivery.map(Delivery::as_str))
            };
            self.change_queued(query, op.by, |row| {
                Ok(rows::message_opt(row, "u_")?.map(|m| QueuedChange::Done(Some(Box::new(m)))))
            })
            .await
        }
        .await;
        self.announced(op.chat, r)
    }

    async fn delete_queued(&self, op: &QueuedOp<'_>) -> Result<QueuedChange> {
        let query = || queued_change(DELETE_QUEUED, op);
        let r = self
            .change_queued(query, op.by, |row| {
                let deleted = row.try_get::<i64, _>("deleted").db(self)? > 0;
                Ok(deleted.then_some(QueuedChange::Done(None)))
            })
            .await;
        self.announced(op.chat, r)
    }
}

/// `sql` ([`EDIT_QUEUED`], [`DELETE_QUEUED`]) with its first parameters bound: $1 chat, $2 id,
/// $3 by, $4 now.
fn queued_change<'q>(sql: &'static str, op: &QueuedOp<'q>) -> PgQuery<'q> {
    sqlx::query(sql)
        .bind(op.chat.as_str())
        .bind(op.id)
        .bind(user_str(op.by))
        .bind(op.now)
}

impl PostgresStore {
    /// Sets the lease's expiry with `sql` ($1 chat, $2 holder, $3 token, $4 time), fenced:
    /// [`StoreError::LeaseLost`] when it was taken over.
    async fn set_lease_until(&self, sql: &'static str, lease: &Lease, at: Millis) -> Result<()> {
        let q = sqlx::query(sql)
            .bind(lease.chat_id.as_str())
            .bind(&lease.holder)
            .bind(lease.token)
            .bind(at);
        if self.changed_one(q).await? {
            Ok(())
        } else {
            Err(lease_lost(&lease.chat_id))
        }
    }

    /// Runs a queued message's edit or delete (`query`, built afresh for each try): what `done`
    /// reads from the row when the change was made, else the refusal the statement's snapshot
    /// explains ([`snapshot_refusal`]); a change that raced a promotion or a delete (the message
    /// was queued in the snapshot but not when written) is tried again, three times at most.
    async fn change_queued<'q>(
        &self,
        query: impl Fn() -> PgQuery<'q>,
        by: Option<&UserId>,
        done: impl Fn(&PgRow) -> Result<Option<QueuedChange>>,
    ) -> Result<QueuedChange> {
        for _ in 0..3 {
            let row = query().fetch_optional(&self.pool).await.db(self)?;
            let Some(row) = row else {
                return Ok(QueuedChange::NotFound);
            };
            if let Some(changed) = done(&row)? {
                return Ok(changed);
            }
            if let Some(refused) = snapshot_refusal(self, &row, by)? {
                return Ok(refused);
            }
            // Promoted or deleted between the statement's snapshot and its write: look again.
        }
        Ok(QueuedChange::NotQueued)
    }
}

/// Why a queued message was not changed, from the statement's snapshot of it
/// ([`queued_refusal`]): `None` when the snapshot allowed the change (it raced a promotion or a
/// delete; look again).
fn snapshot_refusal(
    s: &PostgresStore,
    row: &PgRow,
    by: Option<&UserId>,
) -> Result<Option<QueuedChange>> {
    let role: String = row.try_get("role").db(s)?;
    let author: Option<String> = row.try_get("author").db(s)?;
    let queued: bool = row.try_get("queued").db(s)?;
    Ok(queued_refusal(&role, author.as_deref(), queued, by))
}

#[cfg(test)]
mod tests {
    #[test]
    fn reply_sub_matches_the_constant() {
        assert_eq!(
            reply_sub!().parse::<i64>().unwrap(),
            frogbot_core::store::REPLY_SUB
        );
    }
}
