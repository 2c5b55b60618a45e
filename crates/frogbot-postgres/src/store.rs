//! The [`Store`] implementation: the SQL of each operation and the careful (lock-first) path that
//! an operation falls back to when its one-statement compare-and-swap finds the chat changed.

use async_trait::async_trait;
use serde_json::{Value, json};
use sqlx::Row;
use sqlx::postgres::{PgConnection, PgRow};

use frogbot_core::model::{
    ChatId, Delivery, Millis, QuestionOutcome, QuestionRecord, Role, TurnState, UiMessage, UserId,
};
use frogbot_core::store::*;
use frogbot_core::store::{Result, StoreError};

use crate::PostgresStore;
use crate::rows::{self, chat_cols, from_json, job_cols, msg_cols, question_cols, to_json};

/// Maps a driver error to the store's error (see [`PostgresStore::storage`]).
trait Db<T> {
    fn db(self, s: &PostgresStore) -> Result<T>;
}

impl<T> Db<T> for std::result::Result<T, sqlx::Error> {
    fn db(self, s: &PostgresStore) -> Result<T> {
        self.map_err(|e| s.storage(e))
    }
}

/// `REPLY_SUB` as SQL text (checked against the constant in a test).
macro_rules! reply_sub {
    () => {
        "4503599627370496"
    };
}

/// The columns a message insert lists.
macro_rules! msg_insert {
    () => {
        "INSERT INTO messages AS m (chat_id, id, role, author, queued, delivery, position, sub, \
         body, created_at, updated_at, version) "
    };
}

/// What a turn message's upsert does when the id exists: it takes the new place and content.
macro_rules! msg_upsert_tail {
    () => {
        " ON CONFLICT (chat_id, id) DO UPDATE SET role = excluded.role, author = excluded.author, \
         queued = excluded.queued, delivery = excluded.delivery, position = excluded.position, \
         sub = excluded.sub, body = excluded.body, updated_at = excluded.updated_at, \
         version = excluded.version "
    };
}

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

// ---- send ----------------------------------------------------------------------------------------

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
const MESSAGE_BY_ID: &str = concat!(
    "SELECT ",
    msg_cols!("m", ""),
    " FROM messages m WHERE m.chat_id = $1 AND m.id = $2"
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

// ---- turns ---------------------------------------------------------------------------------------

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
    msg_insert!(),
    "SELECT $1::text, $5::text, $6::text, $7::text, FALSE, 'queue', $9::bigint, ",
    reply_sub!(),
    ", $8::text, $4::bigint, $4::bigint, c.version FROM chat c",
    msg_upsert_tail!(),
    "RETURNING m.* \
     ) \
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
    msg_insert!(),
    "SELECT $1::text, $5::text, $6::text, $7::text, FALSE, 'queue', $9::bigint, ",
    reply_sub!(),
    ", $8::text, $4::bigint, $4::bigint, c.version FROM chat c",
    msg_upsert_tail!(),
    "RETURNING m.* \
     ), questions AS ( \
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

/// `resume_turn`: takes a free or expired lease and clears the wait when every question of the
/// waiting message has an outcome; a compare-and-swap on the lease the snapshot read, so the
/// snapshot's state explains a refusal. One row per question (at least one row when the chat
/// exists).
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

// ---- questions -----------------------------------------------------------------------------------

/// $1 questions (JSON), $2 empty record, $3 now, $4 expiry.
const INSERT_QUESTIONS: &str = "INSERT INTO questions (chat_id, tool_call_id, message_id, \
        call_index, input, record, revision, answer_deadline, created_at, updated_at, expires_at) \
     SELECT x.chat_id, x.tool_call_id, x.message_id, x.call_index, x.input, $2::text, 0, \
        x.answer_deadline, $3::bigint, $3::bigint, $4::bigint \
     FROM jsonb_to_recordset($1::text::jsonb) AS x(chat_id text, tool_call_id text, \
        message_id text, call_index bigint, input text, answer_deadline bigint) \
     ON CONFLICT (chat_id, tool_call_id) DO NOTHING";

/// $1 chat, $2 platform, $3 calls (JSON), $4 now, $5 expiry. Writes nothing unless every call
/// has a record (`missing` says which do not).
const MARK_RENDERED: &str = "WITH calls AS ( \
        SELECT * FROM jsonb_to_recordset($3::text::jsonb) \
            AS x(tool_call_id text, record text, revision bigint, message_ids jsonb) \
     ), missing AS ( \
        SELECT c.tool_call_id FROM calls c WHERE NOT EXISTS (SELECT 1 FROM questions q \
            WHERE q.chat_id = $1::text AND q.tool_call_id = c.tool_call_id) \
     ), upd AS ( \
        UPDATE questions q SET record = c.record, revision = c.revision, rendered = TRUE, \
            updated_at = $4::bigint, \
            expires_at = CASE WHEN q.outcome IS NULL THEN $5::bigint ELSE q.expires_at END \
        FROM calls c WHERE q.chat_id = $1::text AND q.tool_call_id = c.tool_call_id \
          AND NOT EXISTS (SELECT 1 FROM missing) \
        RETURNING 1 \
     ), links AS ( \
        INSERT INTO question_links (platform, message_id, chat_id, tool_call_id) \
        SELECT $2::text, m.id, $1::text, c.tool_call_id \
        FROM calls c, jsonb_array_elements_text(c.message_ids) AS m(id) \
        WHERE NOT EXISTS (SELECT 1 FROM missing) \
        ON CONFLICT DO NOTHING RETURNING 1 \
     ) SELECT (SELECT string_agg(tool_call_id, ', ') FROM missing) AS missing, \
        (SELECT count(*) FROM upd) AS updated, (SELECT count(*) FROM links) AS linked";

/// $1 chat, $2 call, $3 outcome, $4 actor, $5 now, $6 expiry, $7 expected revision (or NULL),
/// $8 lock holder (or NULL), $9 lock expiry.
const RECORD_OUTCOME: &str = concat!(
    "WITH upd AS ( \
        UPDATE questions q SET outcome = $3::text, actor = $4::text, outcome_at = $5::bigint, \
            updated_at = $5::bigint, expires_at = $6::bigint, \
            lock_holder = COALESCE($8::text, q.lock_holder), \
            lock_token = CASE WHEN $8::text IS NULL THEN q.lock_token ELSE q.lock_token + 1 END, \
            lock_until = CASE WHEN $8::text IS NULL THEN q.lock_until ELSE $9::bigint END \
        WHERE q.chat_id = $1::text AND q.tool_call_id = $2::text AND q.expires_at > $5::bigint \
          AND q.outcome IS NULL \
          AND ($7::bigint IS NULL OR (q.revision = $7::bigint AND NOT q.posting \
               AND (q.lock_holder IS NULL OR q.lock_until <= $5::bigint))) \
        RETURNING q.* \
     ) \
     SELECT TRUE AS won, ",
    question_cols!("u", ""),
    " FROM upd u UNION ALL SELECT FALSE, ",
    question_cols!("q", ""),
    " FROM questions q WHERE q.chat_id = $1::text AND q.tool_call_id = $2::text \
       AND q.expires_at > $5::bigint AND NOT EXISTS (SELECT 1 FROM upd)"
);

/// $1 chat, $2 call, $3 expected revision, $4 state (JSON or NULL), $5 holder, $6 lock expiry,
/// $7 now, $8 record expiry.
const ADVANCE: &str = concat!(
    "WITH upd AS ( \
        UPDATE questions q SET revision = q.revision + 1, \
            record = CASE WHEN $4::text IS NULL \
                THEN jsonb_set(q.record::jsonb, '{revision}', to_jsonb(q.revision + 1)) \
                ELSE jsonb_set(jsonb_set(q.record::jsonb, '{revision}', to_jsonb(q.revision + 1)), \
                               '{state}', $4::text::jsonb) END::text, \
            posting = TRUE, lock_holder = $5::text, lock_token = q.lock_token + 1, \
            lock_until = $6::bigint, updated_at = $7::bigint, expires_at = $8::bigint \
        WHERE q.chat_id = $1::text AND q.tool_call_id = $2::text AND q.expires_at > $7::bigint \
          AND q.outcome IS NULL AND NOT q.posting AND q.revision = $3::bigint \
          AND (q.lock_holder IS NULL OR q.lock_until <= $7::bigint) \
        RETURNING q.* \
     ) \
     SELECT TRUE AS done, ",
    question_cols!("u", ""),
    " FROM upd u UNION ALL SELECT FALSE, ",
    question_cols!("q", ""),
    " FROM questions q WHERE q.chat_id = $1::text AND q.tool_call_id = $2::text \
       AND q.expires_at > $7::bigint AND NOT EXISTS (SELECT 1 FROM upd)"
);

/// $1 chat, $2 call, $3 holder, $4 lock expiry, $5 now.
const LOCK_QUESTION: &str = concat!(
    "UPDATE questions q SET lock_holder = $3, lock_token = q.lock_token + 1, lock_until = $4 \
     WHERE q.chat_id = $1 AND q.tool_call_id = $2 AND q.expires_at > $5 \
       AND (q.lock_holder IS NULL OR q.lock_until <= $5) RETURNING ",
    question_cols!("q", "")
);

/// $1 chat, $2 call, $3 holder, $4 token, $5 record (or NULL), $6 revision (or NULL), $7 rendered,
/// $8 posting, $9 closed, $10 now, $11 expiry, $12 keep the lock, $13 link platform (or NULL),
/// $14 job kind (or NULL), $15 key, $16 payload, $17 run-at.
const UPDATE_QUESTION: &str = concat!(
    "WITH upd AS ( \
        UPDATE questions q SET record = COALESCE($5::text, q.record), \
            revision = COALESCE($6::bigint, q.revision), \
            rendered = COALESCE($7::boolean, q.rendered), \
            posting = COALESCE($8::boolean, q.posting), closed = COALESCE($9::boolean, q.closed), \
            updated_at = $10::bigint, \
            expires_at = CASE WHEN q.outcome IS NULL THEN $11::bigint ELSE q.expires_at END, \
            lock_holder = CASE WHEN $12::boolean THEN q.lock_holder END, \
            lock_until = CASE WHEN $12::boolean THEN q.lock_until ELSE 0 END \
        WHERE q.chat_id = $1::text AND q.tool_call_id = $2::text AND q.lock_holder = $3::text \
          AND q.lock_token = $4::bigint \
        RETURNING q.* \
     ), links AS ( \
        INSERT INTO question_links (platform, message_id, chat_id, tool_call_id) \
        SELECT $13::text, m.value ->> 'id', u.chat_id, u.tool_call_id \
        FROM upd u, jsonb_array_elements(u.record::jsonb -> 'messages') AS m \
        WHERE $13::text IS NOT NULL \
        ON CONFLICT DO NOTHING \
     ), job AS ( \
        INSERT INTO jobs (kind, key, payload, run_at, created_at) \
        SELECT $14::text, $15::text, $16::text, $17::bigint, $10::bigint FROM upd \
        WHERE $14::text IS NOT NULL",
    job_upsert_tail!(),
    ") SELECT ",
    question_cols!("u", ""),
    " FROM upd u"
);

/// $1 now.
const PURGE_EXPIRED: &str = "WITH gone AS ( \
        DELETE FROM questions WHERE expires_at <= $1 RETURNING chat_id, tool_call_id \
     ), links AS ( \
        DELETE FROM question_links l USING gone g \
        WHERE l.chat_id = g.chat_id AND l.tool_call_id = g.tool_call_id \
     ) SELECT count(*) AS purged FROM gone";

// ---- jobs ----------------------------------------------------------------------------------------

const ENQUEUE_JOB: &str = concat!(
    "INSERT INTO jobs (kind, key, payload, run_at, created_at) VALUES ($1, $2, $3, $4, $4)",
    job_upsert_tail!(),
    "RETURNING id"
);

const CLAIM_JOB: &str = concat!(
    "UPDATE jobs SET claimed_by = $1, claim_until = $2, attempts = attempts + 1 \
     WHERE id = (SELECT id FROM jobs WHERE NOT dead AND run_at <= $3 \
                 AND (claim_until IS NULL OR claim_until <= $3) ORDER BY run_at, id LIMIT 1 \
                 FOR UPDATE SKIP LOCKED) \
       AND NOT dead AND run_at <= $3 AND (claim_until IS NULL OR claim_until <= $3) \
     RETURNING ",
    job_cols!()
);

/// Removes the finished job, or — when it was re-enqueued while it ran (another generation) —
/// keeps it scheduled and releases the claim. $1 id, $2 worker, $3 attempts, $4 generation.
const COMPLETE_JOB: &str = "WITH del AS ( \
        DELETE FROM jobs WHERE id = $1 AND claimed_by = $2 AND attempts = $3 AND generation = $4 \
        RETURNING 1 \
     ), rel AS ( \
        UPDATE jobs SET claimed_by = NULL, claim_until = NULL \
        WHERE id = $1 AND claimed_by = $2 AND attempts = $3 AND generation <> $4 RETURNING 1 \
     ) SELECT (SELECT count(*) FROM del) + (SELECT count(*) FROM rel) AS done";

const RELEASE_JOB: &str = "UPDATE jobs SET claimed_by = NULL, claim_until = NULL \
     WHERE id = $1 AND claimed_by = $2 AND attempts = $3";

// ---- helpers -------------------------------------------------------------------------------------

fn user_str(u: Option<&UserId>) -> Option<&str> {
    u.map(UserId::as_str)
}

fn lease_lost(chat: &ChatId) -> StoreError {
    StoreError::LeaseLost {
        chat_id: chat.clone(),
    }
}

fn empty_record() -> Result<String> {
    to_json(&QuestionRecord {
        messages: vec![],
        revision: 0,
        state: None,
    })
}

/// A job to schedule with an operation, as its statement binds it (all NULL for none).
struct JobParams<'a> {
    kind: Option<&'a str>,
    key: Option<&'a str>,
    payload: Option<String>,
    run_at: i64,
}

fn job_params(job: Option<&NewJob>) -> Result<JobParams<'_>> {
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

fn new_message_id() -> String {
    format!("msg_{}", uuid::Uuid::new_v4().simple())
}

/// What the careful path of a turn operation found on the locked chat.
struct Locked {
    chat: ChatRow,
    created: bool,
}

impl PostgresStore {
    async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        self.pool.begin().await.db(self)
    }

    /// Locks the chat row (creating the chat when `create` is given and it is missing). Every
    /// statement after it in the transaction sees every commit made before the lock.
    async fn lock_chat(
        &self,
        conn: &mut PgConnection,
        chat: &ChatId,
        create: Option<(&NewChat, Millis)>,
    ) -> Result<Option<Locked>> {
        loop {
            let row = sqlx::query(LOCK_CHAT)
                .bind(chat.as_str())
                .fetch_optional(&mut *conn)
                .await
                .db(self)?;
            if let Some(row) = row {
                return Ok(Some(Locked {
                    chat: rows::chat(&row)?,
                    created: false,
                }));
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
                return Ok(Some(Locked {
                    chat: rows::chat(&row)?,
                    created: true,
                }));
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

    /// Inserts or moves a message (see [`PUT_MESSAGE`]).
    #[allow(clippy::too_many_arguments)]
    async fn put_message(
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
    async fn enqueue_in(&self, conn: &mut PgConnection, job: &NewJob) -> Result<()> {
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
    async fn message_facts(
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

    // ---- send --------------------------------------------------------------------------------

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
            let row = sqlx::query(BUMP_CHAT)
                .bind(chat_id.as_str())
                .bind(now)
                .fetch_one(&mut *tx)
                .await
                .db(self)?;
            let chat = rows::chat(&row)?;
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

    // ---- end_turn, take_chat, checkpoint ------------------------------------------------------

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
        let JobParams {
            kind,
            key,
            payload,
            run_at,
        } = job_params(job)?;
        let delivery = job_params(op.delivery)?;
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
            .bind(kind)
            .bind(key)
            .bind(payload)
            .bind(run_at)
            .bind(delivery.kind)
            .bind(delivery.key)
            .bind(delivery.payload)
            .bind(delivery.run_at)
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

    /// Locks the chat in `tx` and checks that `lease` still holds it.
    async fn lock_fenced(&self, conn: &mut PgConnection, lease: &Lease) -> Result<()> {
        let locked = self.lock_chat(conn, &lease.chat_id, None).await?;
        let held = locked
            .and_then(|l| l.chat.lease)
            .is_some_and(|l| l.holder == lease.holder && l.token == lease.token);
        if held {
            Ok(())
        } else {
            Err(lease_lost(&lease.chat_id))
        }
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
        let l = op.lease;
        let r = op.reply;
        let rows = sqlx::query(CHECKPOINT)
            .bind(l.chat_id.as_str())
            .bind(&l.holder)
            .bind(l.token)
            .bind(op.now)
            .bind(&r.id)
            .bind(r.role.as_str())
            .bind(user_str(r.metadata.author.as_ref()))
            .bind(rows::message_body(r)?)
            .bind(op.position)
            .bind(op.join_steers)
            .bind(user_str(l.driver.as_ref()))
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

    async fn resume_once(
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

    // ---- questions ---------------------------------------------------------------------------

    async fn fresh_question(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        now: Millis,
    ) -> Result<Option<QuestionRow>> {
        self.get_question(chat, tool_call_id, now).await
    }

    /// [`Store::get_question`] on `conn` (inside the caller's transaction, or on the connection
    /// it already holds: never a second connection from the pool while holding one).
    async fn question_on(
        &self,
        conn: &mut PgConnection,
        chat: &ChatId,
        tool_call_id: &str,
        now: Millis,
    ) -> Result<Option<QuestionRow>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            question_cols!("q", ""),
            " FROM questions q WHERE q.chat_id = $1 AND q.tool_call_id = $2 AND q.expires_at > $3"
        ))
        .bind(chat.as_str())
        .bind(tool_call_id)
        .bind(now)
        .fetch_optional(&mut *conn)
        .await
        .db(self)?;
        row.map(|r| rows::question(&r, "")).transpose()
    }
}

/// A `Taken` that took nothing (the chat was idle with an empty queue).
fn took_nothing() -> Taken {
    Taken {
        interrupted: None,
        next: None,
    }
}

/// New question records as the statements that insert them read them (a JSON array).
fn questions_json(rows: &[NewQuestion]) -> Result<Vec<Value>> {
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
    /// `r`, with the chat announced to every process listening ([`Store::changes`]) when the
    /// operation succeeded.
    fn announced<T>(&self, chat: &ChatId, r: Result<T>) -> Result<T> {
        if r.is_ok() {
            self.feed.announce(&self.relaxed, chat);
        }
        r
    }

    /// `r`, with the jobs an operation scheduled (their run-at times) announced to every process
    /// listening ([`Store::changes`]) when it succeeded.
    fn jobs_announced<T>(&self, run_at: &[Option<Millis>], r: Result<T>) -> Result<T> {
        if r.is_ok()
            && let Some(at) = run_at.iter().flatten().min()
        {
            self.feed.announce_job(&self.relaxed, *at);
        }
        r
    }

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
impl Store for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await.db(self)?;
        Ok(())
    }

    // ---- reads -------------------------------------------------------------------------------

    async fn get_chat(&self, chat: &ChatId) -> Result<Option<ChatRow>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            chat_cols!("c"),
            " FROM chats c WHERE c.chat_id = $1"
        ))
        .bind(chat.as_str())
        .fetch_optional(&self.pool)
        .await
        .db(self)?;
        row.as_ref().map(rows::chat).transpose()
    }

    async fn get_channel_chat(&self, platform: &str, thread: &str) -> Result<Option<ChatRow>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            chat_cols!("c"),
            " FROM chats c WHERE c.channel_platform = $1 AND c.channel_thread = $2"
        ))
        .bind(platform)
        .bind(thread)
        .fetch_optional(&self.pool)
        .await
        .db(self)?;
        row.as_ref().map(rows::chat).transpose()
    }

    async fn list_chats(&self, owner: Option<&UserId>, limit: u32) -> Result<Vec<ChatRow>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            chat_cols!("c"),
            " FROM chats c WHERE c.owner IS NOT DISTINCT FROM $1 \
              ORDER BY c.updated_at DESC, c.chat_id LIMIT $2"
        ))
        .bind(user_str(owner))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .db(self)?;
        rows.iter().map(rows::chat).collect()
    }

    async fn get_message(&self, chat: &ChatId, id: &str) -> Result<Option<StoredMessage>> {
        let row = sqlx::query(MESSAGE_BY_ID)
            .bind(chat.as_str())
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .db(self)?;
        row.map(|r| rows::message(&r, "")).transpose()
    }

    async fn list_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            msg_cols!("m", ""),
            " FROM messages m WHERE m.chat_id = $1 \
              ORDER BY (m.position IS NULL), m.position, m.sub, m.seq"
        ))
        .bind(chat.as_str())
        .fetch_all(&self.pool)
        .await
        .db(self)?;
        rows.iter().map(|r| rows::message(r, "")).collect()
    }

    async fn messages_since(&self, chat: &ChatId, version: i64) -> Result<ChatChanges> {
        // One statement: the chat's version and the messages newer than `version` from the same
        // snapshot, so none written at or below the returned version can be missed later.
        let rows = sqlx::query(concat!(
            "SELECT c.version AS chat_version, ",
            msg_cols!("m", "m_"),
            " FROM chats c LEFT JOIN messages m ON m.chat_id = c.chat_id AND m.version > $2 \
              WHERE c.chat_id = $1 \
              ORDER BY (m.position IS NULL), m.position, m.sub, m.seq"
        ))
        .bind(chat.as_str())
        .bind(version)
        .fetch_all(&self.pool)
        .await
        .db(self)?;
        let Some(first) = rows.first() else {
            return Ok(ChatChanges {
                version: 0,
                messages: vec![],
            });
        };
        Ok(ChatChanges {
            version: first.try_get("chat_version").db(self)?,
            messages: rows
                .iter()
                .map(|r| rows::message_opt(r, "m_"))
                .filter_map(Result::transpose)
                .collect::<Result<_>>()?,
        })
    }

    async fn queued_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            msg_cols!("m", ""),
            " FROM messages m WHERE m.chat_id = $1 AND m.queued ORDER BY m.seq"
        ))
        .bind(chat.as_str())
        .fetch_all(&self.pool)
        .await
        .db(self)?;
        rows.iter().map(|r| rows::message(r, "")).collect()
    }

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

    async fn get_question(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        now: Millis,
    ) -> Result<Option<QuestionRow>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            question_cols!("q", ""),
            " FROM questions q WHERE q.chat_id = $1 AND q.tool_call_id = $2 AND q.expires_at > $3"
        ))
        .bind(chat.as_str())
        .bind(tool_call_id)
        .bind(now)
        .fetch_optional(&self.pool)
        .await
        .db(self)?;
        row.map(|r| rows::question(&r, "")).transpose()
    }

    async fn questions_of_message(
        &self,
        chat: &ChatId,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<QuestionRow>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            question_cols!("q", ""),
            " FROM questions q WHERE q.chat_id = $1 AND q.message_id = $2 AND q.expires_at > $3 \
              ORDER BY q.call_index, q.tool_call_id"
        ))
        .bind(chat.as_str())
        .bind(message_id)
        .bind(now)
        .fetch_all(&self.pool)
        .await
        .db(self)?;
        rows.iter().map(|r| rows::question(r, "")).collect()
    }

    async fn questions_by_platform_message(
        &self,
        platform: &str,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<QuestionRow>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            question_cols!("q", ""),
            " FROM question_links l JOIN questions q \
                ON q.chat_id = l.chat_id AND q.tool_call_id = l.tool_call_id \
              WHERE l.platform = $1 AND l.message_id = $2 AND q.expires_at > $3 \
              ORDER BY q.chat_id, q.call_index, q.tool_call_id"
        ))
        .bind(platform)
        .bind(message_id)
        .bind(now)
        .fetch_all(&self.pool)
        .await
        .db(self)?;
        rows.iter().map(|r| rows::question(r, "")).collect()
    }

    async fn get_job(&self, id: i64) -> Result<Option<Job>> {
        let row = sqlx::query(concat!("SELECT ", job_cols!(), " FROM jobs WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .db(self)?;
        row.as_ref().map(rows::job).transpose()
    }

    // ---- turns -------------------------------------------------------------------------------

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
            let mut tx = self.relaxed.begin().await.db(self)?;
            self.lock_fenced(&mut tx, op.lease).await?;
            let done = self
                .run_checkpoint(&mut tx, op)
                .await?
                .ok_or_else(|| lease_lost(&op.lease.chat_id))?;
            tx.commit().await.db(self)?;
            Ok(done)
        }
        .await;
        self.announced(&op.lease.chat_id, r)
    }

    async fn await_answers(&self, op: &AwaitOp<'_>) -> Result<StoredMessage> {
        let r = async {
            let l = op.lease;
            let r = op.reply;
            let questions = questions_json(op.questions)?;
            let JobParams {
                kind,
                key,
                payload,
                run_at,
            } = job_params(op.job)?;
            let delivery = job_params(op.delivery)?;
            let row = sqlx::query(AWAIT)
                .bind(l.chat_id.as_str())
                .bind(&l.holder)
                .bind(l.token)
                .bind(op.now)
                .bind(&r.id)
                .bind(r.role.as_str())
                .bind(user_str(r.metadata.author.as_ref()))
                .bind(rows::message_body(r)?)
                .bind(op.position)
                .bind(to_json(&questions)?)
                .bind(empty_record()?)
                .bind(op.now + QUESTION_TTL_MS)
                .bind(kind)
                .bind(key)
                .bind(payload)
                .bind(run_at)
                .bind(delivery.kind)
                .bind(delivery.key)
                .bind(delivery.payload)
                .bind(delivery.run_at)
                .fetch_optional(&self.pool)
                .await
                .db(self)?;
            match row {
                Some(row) => rows::message(&row, ""),
                None => Err(lease_lost(&l.chat_id)),
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
            let mut tx = self.begin().await?;
            self.lock_fenced(&mut tx, op.lease).await?;
            let ended = self
                .run_end_turn(&mut tx, op)
                .await?
                .ok_or_else(|| lease_lost(&op.lease.chat_id))?;
            tx.commit().await.db(self)?;
            Ok(ended)
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
        let done = sqlx::query(
            "UPDATE chats SET lease_until = $4 \
             WHERE chat_id = $1 AND lease_holder = $2 AND lease_token = $3",
        )
        .bind(lease.chat_id.as_str())
        .bind(&lease.holder)
        .bind(lease.token)
        .bind(expires_at)
        .execute(&self.pool)
        .await
        .db(self)?;
        if done.rows_affected() == 1 {
            lease.expires_at = expires_at;
            Ok(())
        } else {
            Err(lease_lost(&lease.chat_id))
        }
    }

    async fn expire_lease(&self, lease: &Lease, now: Millis) -> Result<()> {
        let r = async {
            let done = sqlx::query(
                "UPDATE chats SET lease_until = LEAST(lease_until, $4) \
                 WHERE chat_id = $1 AND lease_holder = $2 AND lease_token = $3",
            )
            .bind(lease.chat_id.as_str())
            .bind(&lease.holder)
            .bind(lease.token)
            .bind(now)
            .execute(&self.pool)
            .await
            .db(self)?;
            if done.rows_affected() == 1 {
                Ok(())
            } else {
                Err(lease_lost(&lease.chat_id))
            }
        }
        .await;
        self.announced(&lease.chat_id, r)
    }

    async fn edit_queued(
        &self,
        chat: &ChatId,
        id: &str,
        by: Option<&UserId>,
        edit: &QueuedEdit,
        now: Millis,
    ) -> Result<QueuedChange> {
        let r = async {
            let parts = edit.parts.as_ref().map(to_json).transpose()?;
            for _ in 0..3 {
                let row = sqlx::query(EDIT_QUEUED)
                    .bind(chat.as_str())
                    .bind(id)
                    .bind(user_str(by))
                    .bind(now)
                    .bind(parts.as_deref())
                    .bind(edit.delivery.map(Delivery::as_str))
                    .fetch_optional(&self.pool)
                    .await
                    .db(self)?;
                let Some(row) = row else {
                    return Ok(QueuedChange::NotFound);
                };
                if let Some(m) = rows::message_opt(&row, "u_")? {
                    return Ok(QueuedChange::Done(Some(Box::new(m))));
                }
                if let Some(refused) = snapshot_refusal(self, &row, by)? {
                    return Ok(refused);
                }
                // Promoted or deleted between the statement's snapshot and its write: look again.
            }
            Ok(QueuedChange::NotQueued)
        }
        .await;
        self.announced(chat, r)
    }

    async fn delete_queued(
        &self,
        chat: &ChatId,
        id: &str,
        by: Option<&UserId>,
        now: Millis,
    ) -> Result<QueuedChange> {
        let r = async {
            for _ in 0..3 {
                let row = sqlx::query(DELETE_QUEUED)
                    .bind(chat.as_str())
                    .bind(id)
                    .bind(user_str(by))
                    .bind(now)
                    .fetch_optional(&self.pool)
                    .await
                    .db(self)?;
                let Some(row) = row else {
                    return Ok(QueuedChange::NotFound);
                };
                if row.try_get::<i64, _>("deleted").db(self)? > 0 {
                    return Ok(QueuedChange::Done(None));
                }
                if let Some(refused) = snapshot_refusal(self, &row, by)? {
                    return Ok(refused);
                }
            }
            Ok(QueuedChange::NotQueued)
        }
        .await;
        self.announced(chat, r)
    }

    // ---- questions ---------------------------------------------------------------------------

    async fn insert_questions(&self, rows: &[NewQuestion], now: Millis) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let questions = questions_json(rows)?;
        sqlx::query(INSERT_QUESTIONS)
            .bind(to_json(&questions)?)
            .bind(empty_record()?)
            .bind(now)
            .bind(now + QUESTION_TTL_MS)
            .execute(&self.pool)
            .await
            .db(self)?;
        Ok(())
    }

    async fn mark_rendered(&self, op: &RenderedOp<'_>) -> Result<()> {
        if op.calls.is_empty() {
            return Ok(());
        }
        let calls: Vec<Value> = op
            .calls
            .iter()
            .map(|c| {
                if c.record.messages.is_empty() {
                    return Err(StoreError::invalid(format!(
                        "question {}: a rendered record has at least one message",
                        c.tool_call_id
                    )));
                }
                Ok(json!({
                    "tool_call_id": c.tool_call_id,
                    "record": to_json(&c.record)?,
                    "revision": c.record.revision,
                    "message_ids": c.record.messages.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
                }))
            })
            .collect::<Result<_>>()?;
        let row = sqlx::query(MARK_RENDERED)
            .bind(op.chat.as_str())
            .bind(op.platform)
            .bind(to_json(&calls)?)
            .bind(op.now)
            .bind(op.now + QUESTION_TTL_MS)
            .fetch_one(&self.pool)
            .await
            .db(self)?;
        match row.try_get::<Option<String>, _>("missing").db(self)? {
            Some(missing) => Err(StoreError::not_found(Item::ToolCall, missing)),
            None => Ok(()),
        }
    }

    async fn record_outcome(&self, op: &RecordOp<'_>) -> Result<Recorded> {
        let r = async {
            let Some(req) = op.resume else {
                let mut conn = self.pool.acquire().await.db(self)?;
                return self.record_on(&mut conn, op).await;
            };
            // Record and continue the turn in one transaction (one commit).
            let mut tx = self.begin().await?;
            let mut recorded = self.record_on(&mut tx, op).await?;
            if let Recorded::Won {
                question, resumed, ..
            } = &mut recorded
            {
                let fast = if self.careful_only {
                    None
                } else {
                    self.resume_once(&mut tx, op.chat, &question.message_id, req)
                        .await?
                };
                *resumed = Some(match fast {
                    Some(r) => r,
                    None => {
                        self.lock_chat(&mut tx, op.chat, None).await?;
                        self.resume_once(&mut tx, op.chat, &question.message_id, req)
                            .await?
                            .ok_or_else(|| {
                                StoreError::unavailable_msg(format!(
                                    "resuming chat {} failed under its lock",
                                    op.chat
                                ))
                            })?
                    }
                });
            }
            tx.commit().await.db(self)?;
            Ok(recorded)
        }
        .await;
        self.announced(op.chat, r)
    }

    async fn advance_question(&self, op: &AdvanceOp<'_>) -> Result<Advanced> {
        let r = async {
            let row = sqlx::query(ADVANCE)
                .bind(op.chat.as_str())
                .bind(op.tool_call_id)
                .bind(i64::try_from(op.expected_revision).unwrap_or(i64::MAX))
                .bind(op.state.map(to_json).transpose()?)
                .bind(op.lock.holder)
                .bind(op.now + op.lock.ttl_ms)
                .bind(op.now)
                .bind(op.now + QUESTION_TTL_MS)
                .fetch_optional(&self.pool)
                .await
                .db(self)?;
            let Some(row) = row else {
                return Ok(Advanced::Gone);
            };
            let question = rows::question(&row, "")?;
            if row.try_get::<bool, _>("done").db(self)? {
                return Ok(Advanced::Done {
                    lock: QuestionLock {
                        chat_id: op.chat.clone(),
                        tool_call_id: op.tool_call_id.to_string(),
                        holder: op.lock.holder.to_string(),
                        token: row.try_get("lock_token").db(self)?,
                    },
                    question,
                });
            }
            let fits = question.outcome.is_none()
                && !question.posting
                && !question.locked(op.now)
                && question.record.revision == op.expected_revision;
            if !fits {
                return Ok(Advanced::Changed { question });
            }
            Ok(
                match self
                    .fresh_question(op.chat, op.tool_call_id, op.now)
                    .await?
                {
                    None => Advanced::Gone,
                    Some(q) => Advanced::Changed { question: q },
                },
            )
        }
        .await;
        self.announced(op.chat, r)
    }

    async fn lock_question(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        holder: &str,
        ttl_ms: Millis,
        now: Millis,
    ) -> Result<Option<(QuestionLock, QuestionRow)>> {
        let row = sqlx::query(LOCK_QUESTION)
            .bind(chat.as_str())
            .bind(tool_call_id)
            .bind(holder)
            .bind(now + ttl_ms)
            .bind(now)
            .fetch_optional(&self.pool)
            .await
            .db(self)?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some((
            QuestionLock {
                chat_id: chat.clone(),
                tool_call_id: tool_call_id.to_string(),
                holder: holder.to_string(),
                token: row.try_get("lock_token").db(self)?,
            },
            rows::question(&row, "")?,
        )))
    }

    async fn update_question(&self, op: &UpdateQuestionOp<'_>) -> Result<QuestionRow> {
        let r = async {
            let u = op.update;
            if let Some(record) = &u.record
                && record.messages.is_empty()
                && u.rendered != Some(false)
            {
                return Err(StoreError::invalid(
                    "a question record's messages are never empty",
                ));
            }
            let JobParams {
                kind,
                key,
                payload,
                run_at,
            } = job_params(op.job)?;
            let l = op.lock;
            let row = sqlx::query(UPDATE_QUESTION)
                .bind(l.chat_id.as_str())
                .bind(&l.tool_call_id)
                .bind(&l.holder)
                .bind(l.token)
                .bind(u.record.as_ref().map(to_json).transpose()?)
                .bind(
                    u.record
                        .as_ref()
                        .map(|r| i64::try_from(r.revision).unwrap_or(i64::MAX)),
                )
                .bind(u.rendered)
                .bind(u.posting)
                .bind(u.closed)
                .bind(op.now)
                .bind(op.now + QUESTION_TTL_MS)
                .bind(op.keep_lock)
                .bind(op.link_platform)
                .bind(kind)
                .bind(key)
                .bind(payload)
                .bind(run_at)
                .fetch_optional(&self.pool)
                .await
                .db(self)?;
            match row {
                Some(row) => rows::question(&row, ""),
                None => Err(StoreError::Locked {
                    question: l.tool_call_id.clone(),
                }),
            }
        }
        .await;
        self.jobs_announced(&[op.job.map(|j| j.run_at)], r)
    }

    async fn unlock_question(&self, lock: &QuestionLock) -> Result<()> {
        sqlx::query(
            "UPDATE questions SET lock_holder = NULL, lock_until = 0 \
             WHERE chat_id = $1 AND tool_call_id = $2 AND lock_holder = $3 AND lock_token = $4",
        )
        .bind(lock.chat_id.as_str())
        .bind(&lock.tool_call_id)
        .bind(&lock.holder)
        .bind(lock.token)
        .execute(&self.pool)
        .await
        .db(self)?;
        Ok(())
    }

    async fn purge_expired(&self, now: Millis) -> Result<u64> {
        let row = sqlx::query(PURGE_EXPIRED)
            .bind(now)
            .fetch_one(&self.pool)
            .await
            .db(self)?;
        let n: i64 = row.try_get("purged").db(self)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    // ---- jobs --------------------------------------------------------------------------------

    async fn enqueue_job(&self, job: &NewJob) -> Result<i64> {
        let r = async {
            let row = sqlx::query(ENQUEUE_JOB)
                .bind(&job.kind)
                .bind(job.key.as_deref())
                .bind(to_json(&job.payload)?)
                .bind(job.run_at)
                .fetch_one(&self.pool)
                .await
                .db(self)?;
            row.try_get("id").db(self)
        }
        .await;
        self.jobs_announced(&[Some(job.run_at)], r)
    }

    async fn claim_job(&self, worker: &str, claim_ms: Millis, now: Millis) -> Result<Option<Job>> {
        let row = sqlx::query(CLAIM_JOB)
            .bind(worker)
            .bind(now + claim_ms)
            .bind(now)
            .fetch_optional(&self.pool)
            .await
            .db(self)?;
        row.as_ref().map(rows::job).transpose()
    }

    async fn complete_job(&self, job: &Job) -> Result<bool> {
        let row = sqlx::query(COMPLETE_JOB)
            .bind(job.id)
            .bind(job.claimed_by.as_deref())
            .bind(job.attempts)
            .bind(job.generation)
            .fetch_one(&self.pool)
            .await
            .db(self)?;
        if row.try_get::<i64, _>("done").db(self)? > 0 {
            return Ok(true);
        }
        // Re-enqueued between the statement's snapshot and its delete: the job stays; release
        // the claim.
        let done = sqlx::query(RELEASE_JOB)
            .bind(job.id)
            .bind(job.claimed_by.as_deref())
            .bind(job.attempts)
            .execute(&self.pool)
            .await
            .db(self)?;
        Ok(done.rows_affected() == 1)
    }

    async fn retry_job(&self, job: &Job, run_at: Millis, error: &str) -> Result<bool> {
        let r = async {
            let done = sqlx::query(
                "UPDATE jobs SET claimed_by = NULL, claim_until = NULL, last_error = $5, \
                        run_at = CASE WHEN generation <> $4 AND run_at < $6 THEN run_at ELSE $6 END \
                 WHERE id = $1 AND claimed_by = $2 AND attempts = $3",
            )
            .bind(job.id)
            .bind(job.claimed_by.as_deref())
            .bind(job.attempts)
            .bind(job.generation)
            .bind(error)
            .bind(run_at)
            .execute(&self.pool)
            .await
            .db(self)?;
            Ok(done.rows_affected() == 1)
        }
        .await;
        self.jobs_announced(&[Some(run_at)], r)
    }

    async fn delete_job(&self, key: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM jobs WHERE key = $1")
            .bind(key)
            .execute(&self.pool)
            .await
            .db(self)?;
        Ok(done.rows_affected() == 1)
    }

    async fn earlier_job(&self, key_prefix: &str, key: &str) -> Result<Option<Job>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            job_cols!(),
            " FROM jobs WHERE NOT dead AND starts_with(key, $1) AND key <> $2 \
               AND id < COALESCE((SELECT id FROM jobs WHERE key = $2), 9223372036854775807) \
             ORDER BY id LIMIT 1"
        ))
        .bind(key_prefix)
        .bind(key)
        .fetch_optional(&self.pool)
        .await
        .db(self)?;
        row.as_ref().map(rows::job).transpose()
    }

    async fn defer_job(&self, job: &Job, run_at: Millis) -> Result<bool> {
        let r = async {
            let done = sqlx::query(
                "UPDATE jobs SET claimed_by = NULL, claim_until = NULL, \
                        attempts = GREATEST(attempts - 1, 0), \
                        run_at = CASE WHEN generation <> $4 AND run_at < $5 THEN run_at ELSE $5 END \
                 WHERE id = $1 AND claimed_by = $2 AND attempts = $3",
            )
            .bind(job.id)
            .bind(job.claimed_by.as_deref())
            .bind(job.attempts)
            .bind(job.generation)
            .bind(run_at)
            .execute(&self.pool)
            .await
            .db(self)?;
            Ok(done.rows_affected() == 1)
        }
        .await;
        self.jobs_announced(&[Some(run_at)], r)
    }

    async fn dead_jobs(&self, limit: u32) -> Result<Vec<Job>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            job_cols!(),
            " FROM jobs WHERE dead ORDER BY created_at, id LIMIT $1"
        ))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .db(self)?;
        rows.iter().map(rows::job).collect()
    }

    async fn purge_dead_jobs(&self, before: Millis) -> Result<u64> {
        let done = sqlx::query("DELETE FROM jobs WHERE dead AND created_at < $1")
            .bind(before)
            .execute(&self.pool)
            .await
            .db(self)?;
        Ok(done.rows_affected())
    }

    // ---- operators ---------------------------------------------------------------------------

    async fn find_chats(&self, filter: &ChatFilter, now: Millis) -> Result<Vec<ChatRow>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            chat_cols!("c"),
            " FROM chats c \
              WHERE ($1::text IS NULL OR \
                     CASE WHEN c.lease_holder IS NOT NULL AND c.lease_until > $2 THEN 'running' \
                          WHEN c.awaiting_message_id IS NOT NULL THEN 'awaiting' \
                          ELSE 'idle' END = $1) \
                AND ($3::text IS NULL OR c.channel_platform = $3) \
              ORDER BY c.updated_at DESC, c.chat_id LIMIT $4"
        ))
        .bind(filter.state.map(TurnState::as_str))
        .bind(now)
        .bind(filter.platform.as_deref())
        .bind(i64::from(filter.limit))
        .fetch_all(&self.pool)
        .await
        .db(self)?;
        rows.iter().map(rows::chat).collect()
    }

    async fn live_jobs(&self, limit: u32) -> Result<Vec<Job>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            job_cols!(),
            " FROM jobs WHERE NOT dead ORDER BY run_at, id LIMIT $1"
        ))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .db(self)?;
        rows.iter().map(rows::job).collect()
    }

    async fn revive_job(&self, id: i64, now: Millis) -> Result<Option<Job>> {
        let r = async {
            let row = sqlx::query(concat!(
                "UPDATE jobs SET dead = FALSE, attempts = 0, run_at = $2, claimed_by = NULL, \
                 claim_until = NULL WHERE id = $1 AND dead RETURNING ",
                job_cols!()
            ))
            .bind(id)
            .bind(now)
            .fetch_optional(&self.pool)
            .await
            .db(self)?;
            row.as_ref().map(rows::job).transpose()
        }
        .await;
        self.jobs_announced(&[Some(now)], r)
    }

    async fn backlog(&self, now: Millis) -> Result<Backlog> {
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM messages WHERE queued) AS queued, \
                    (SELECT COUNT(*) FROM jobs WHERE NOT dead AND run_at <= $1 \
                       AND (claim_until IS NULL OR claim_until <= $1)) AS due, \
                    (SELECT COUNT(*) FROM jobs WHERE NOT dead AND claim_until > $1) AS running, \
                    (SELECT COUNT(*) FROM jobs WHERE dead) AS dead",
        )
        .bind(now)
        .fetch_one(&self.pool)
        .await
        .db(self)?;
        let count = |name: &str| -> Result<u64> {
            let n: i64 = row.try_get(name).db(self)?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        Ok(Backlog {
            queued: count("queued")?,
            jobs_due: count("due")?,
            jobs_running: count("running")?,
            jobs_dead: count("dead")?,
        })
    }

    async fn purgeable(&self, now: Millis, dead_before: Millis) -> Result<Purgeable> {
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM questions WHERE expires_at <= $1) AS questions, \
                    (SELECT COUNT(*) FROM jobs WHERE dead AND created_at < $2) AS dead_jobs",
        )
        .bind(now)
        .bind(dead_before)
        .fetch_one(&self.pool)
        .await
        .db(self)?;
        let count = |name: &str| -> Result<u64> {
            let n: i64 = row.try_get(name).db(self)?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        Ok(Purgeable {
            questions: count("questions")?,
            dead_jobs: count("dead_jobs")?,
        })
    }

    async fn bind_agent(&self, op: &BindAgentOp<'_>) -> Result<Bound> {
        let r = async {
            let id = &op.chat.chat_id;
            let mut tx = self.begin().await?;
            let Locked { chat, created } = self
                .lock_chat(&mut tx, id, Some((op.chat, op.now)))
                .await?
                .ok_or_else(|| StoreError::corrupt_msg(format!("chat {id} vanished")))?;
            let bound = match bind_decision(&chat, created, op)? {
                Some(bound) => bound,
                None => {
                    let row = sqlx::query(concat!(
                        "UPDATE chats c SET agent = $2, updated_at = $3 WHERE c.chat_id = $1 RETURNING ",
                        chat_cols!("c")
                    ))
                    .bind(id.as_str())
                    .bind(op.agent)
                    .bind(op.now)
                    .fetch_one(&mut *tx)
                    .await
                    .db(self)?;
                    Bound::Bound(rows::chat(&row)?)
                }
            };
            tx.commit().await.db(self)?;
            Ok(bound)
        }
        .await;
        self.announced(&op.chat.chat_id, r)
    }

    async fn post_message(&self, op: &PostMessageOp<'_>) -> Result<PostedMessage> {
        let r = async {
            let mut tx = self.begin().await?;
            self.lock_chat(&mut tx, op.chat, None)
                .await?
                .ok_or_else(|| StoreError::not_found(Item::Chat, op.chat.as_str()))?;
            let (dup, last_position) = self.message_facts(&mut tx, op.chat, &op.message.id).await?;
            if dup {
                let row = sqlx::query(MESSAGE_BY_ID)
                    .bind(op.chat.as_str())
                    .bind(&op.message.id)
                    .fetch_one(&mut *tx)
                    .await
                    .db(self)?;
                return Ok(PostedMessage::Duplicate(rows::message(&row, "")?));
            }
            let row = sqlx::query(BUMP_CHAT)
                .bind(op.chat.as_str())
                .bind(op.now)
                .fetch_one(&mut *tx)
                .await
                .db(self)?;
            let chat = rows::chat(&row)?;
            let saved = self
                .put_message(
                    &mut tx,
                    op.chat,
                    op.message,
                    false,
                    Delivery::Queue,
                    Some(last_position + 1),
                    0,
                    op.now,
                    chat.version,
                )
                .await?;
            if op.inbox {
                sqlx::query("UPDATE messages SET inbox = TRUE WHERE chat_id = $1 AND seq = $2")
                    .bind(op.chat.as_str())
                    .bind(saved.seq)
                    .execute(&mut *tx)
                    .await
                    .db(self)?;
            }
            if let Some(job) = op.job {
                self.enqueue_in(&mut tx, job).await?;
            }
            tx.commit().await.db(self)?;
            Ok(PostedMessage::New(saved))
        }
        .await;
        let r = self.jobs_announced(&[op.job.map(|j| j.run_at)], r);
        self.announced(op.chat, r)
    }

    async fn update_message(&self, op: &UpdateMessageOp<'_>) -> Result<MessageUpdate> {
        let r = async {
            let mut tx = self.begin().await?;
            if self.lock_chat(&mut tx, op.chat, None).await?.is_none() {
                return Ok(MessageUpdate::Moved(None));
            }
            let current = sqlx::query(MESSAGE_BY_ID)
                .bind(op.chat.as_str())
                .bind(&op.message.id)
                .fetch_optional(&mut *tx)
                .await
                .db(self)?
                .map(|r| rows::message(&r, ""))
                .transpose()?;
            let Some(current) = current else {
                return Ok(MessageUpdate::Moved(None));
            };
            if current.queued || current.version != op.expected_version {
                return Ok(MessageUpdate::Moved(Some(Box::new(current))));
            }
            let mut message = op.message.clone();
            message.role = current.message.role;
            message.metadata.author = current.message.metadata.author.clone();
            let row = sqlx::query(BUMP_CHAT)
                .bind(op.chat.as_str())
                .bind(op.now)
                .fetch_one(&mut *tx)
                .await
                .db(self)?;
            let version = rows::chat(&row)?.version;
            let row = sqlx::query(concat!(
                "UPDATE messages m SET body = $3, updated_at = $4, version = $5 \
                 WHERE m.chat_id = $1 AND m.seq = $2 RETURNING ",
                msg_cols!("m", "")
            ))
            .bind(op.chat.as_str())
            .bind(current.seq)
            .bind(rows::message_body(&message)?)
            .bind(op.now)
            .bind(version)
            .fetch_one(&mut *tx)
            .await
            .db(self)?;
            let saved = rows::message(&row, "")?;
            if let Some(job) = op.job {
                self.enqueue_in(&mut tx, job).await?;
            }
            tx.commit().await.db(self)?;
            Ok(MessageUpdate::Done(Box::new(saved)))
        }
        .await;
        let r = self.jobs_announced(&[op.job.map(|j| j.run_at)], r);
        self.announced(op.chat, r)
    }

    async fn take_inbox(&self, op: &InboxOp<'_>) -> Result<Vec<StoredMessage>> {
        let mut tx = self.begin().await?;
        // Two readers never take the same message: the rows are locked, a locked one skipped.
        let found = sqlx::query(concat!(
            "SELECT ",
            msg_cols!("m", ""),
            " FROM messages m JOIN chats c ON c.chat_id = m.chat_id \
             WHERE m.inbox AND c.agent = $1 AND ($2::text IS NULL OR m.chat_id = $2::text) \
             ORDER BY m.seq LIMIT $3 FOR UPDATE OF m SKIP LOCKED"
        ))
        .bind(op.agent)
        .bind(op.chat.map(ChatId::as_str))
        .bind(i64::from(op.limit))
        .fetch_all(&mut *tx)
        .await
        .db(self)?;
        let mut out = Vec::with_capacity(found.len());
        for row in found {
            let mut m = rows::message(&row, "")?;
            inbox_seen(&mut m.message);
            let chat = sqlx::query(BUMP_CHAT)
                .bind(m.chat_id.as_str())
                .bind(op.now)
                .fetch_one(&mut *tx)
                .await
                .db(self)?;
            let version = rows::chat(&chat)?.version;
            sqlx::query(
                "UPDATE messages SET inbox = FALSE, body = $2, updated_at = $3, version = $4 \
                 WHERE seq = $1",
            )
            .bind(m.seq)
            .bind(rows::message_body(&m.message)?)
            .bind(op.now)
            .bind(version)
            .execute(&mut *tx)
            .await
            .db(self)?;
            m.version = version;
            out.push(m);
        }
        tx.commit().await.db(self)?;
        Ok(out)
    }

    async fn bury_job(&self, job: &Job, error: &str) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE jobs SET claimed_by = NULL, claim_until = NULL, last_error = $5, \
                    dead = (generation = $4) \
             WHERE id = $1 AND claimed_by = $2 AND attempts = $3",
        )
        .bind(job.id)
        .bind(job.claimed_by.as_deref())
        .bind(job.attempts)
        .bind(job.generation)
        .bind(error)
        .execute(&self.pool)
        .await
        .db(self)?;
        Ok(done.rows_affected() == 1)
    }

    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<frogbot_core::store::Change>> {
        Some(self.feed.subscribe(&self.pool))
    }

    async fn try_hold(&self, key: &str) -> Result<Option<Box<dyn Held>>> {
        // A session advisory lock on a connection of its own, taken out of the pool: PostgreSQL
        // releases it when that session ends, so a process that dies gives the role up at once.
        let mut conn = self.pool.acquire().await.db(self)?.detach();
        let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtextextended($1, 0))")
            .bind(hold_key(key))
            .fetch_one(&mut conn)
            .await
            .db(self)?;
        if !got {
            let _ = sqlx::Connection::close(conn).await;
            return Ok(None);
        }
        Ok(Some(Box::new(PgHeld::start(conn, hold_key(key)))))
    }

    async fn members(
        &self,
        group: &str,
        member: &str,
        ttl_ms: Millis,
        now: Millis,
    ) -> Result<Vec<String>> {
        // One statement: the renewal (or the leave), the sweep of memberships expired a while
        // ago, and the live members. The outer SELECT reads the snapshot from before the
        // statement, so this member's own row is taken from the renewal's RETURNING.
        let members: Vec<String> = sqlx::query_scalar(
            "WITH renewed AS ( \
                 INSERT INTO members (grp, member, expires_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (grp, member) DO UPDATE SET expires_at = EXCLUDED.expires_at \
                 RETURNING member, expires_at), \
             swept AS ( \
                 DELETE FROM members WHERE grp = $1 AND member <> $2 AND expires_at < $5) \
             SELECT member FROM members WHERE grp = $1 AND member <> $2 AND expires_at > $4 \
             UNION SELECT member FROM renewed WHERE expires_at > $4 \
             ORDER BY 1",
        )
        .bind(group)
        .bind(member)
        .bind(now.saturating_add(ttl_ms.max(0)))
        .bind(now)
        .bind(now.saturating_sub(MEMBERS_SWEPT_AFTER_MS))
        .fetch_all(&self.pool)
        .await
        .db(self)?;
        Ok(members)
    }

    async fn database_time(&self) -> Result<Option<Millis>> {
        // `clock_timestamp()`: the time of the read, not of the transaction's start.
        let now: i64 =
            sqlx::query_scalar("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")
                .fetch_one(&self.pool)
                .await
                .db(self)?;
        Ok(Some(now))
    }
}

/// How long after its expiry a membership row is deleted (by the next renewal in its group).
const MEMBERS_SWEPT_AFTER_MS: Millis = 60 * 60 * 1000;

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

impl PostgresStore {
    /// [`Store::record_outcome`] on `conn` (a pooled connection, or a transaction that continues
    /// the turn after it).
    async fn record_on(&self, conn: &mut PgConnection, op: &RecordOp<'_>) -> Result<Recorded> {
        let expected = op
            .expected_revision
            .map(|r| i64::try_from(r).unwrap_or(i64::MAX));
        let row = sqlx::query(RECORD_OUTCOME)
            .bind(op.chat.as_str())
            .bind(op.tool_call_id)
            .bind(to_json(op.outcome)?)
            .bind(op.actor.map(to_json).transpose()?)
            .bind(op.now)
            .bind(op.now + ANSWERED_TTL_MS)
            .bind(expected)
            .bind(op.lock.map(|l| l.holder))
            .bind(op.lock.map_or(0, |l| op.now + l.ttl_ms))
            .fetch_optional(&mut *conn)
            .await
            .db(self)?;
        let Some(row) = row else {
            return Ok(Recorded::Gone);
        };
        let question = rows::question(&row, "")?;
        if row.try_get::<bool, _>("won").db(self)? {
            let lock = match op.lock {
                Some(l) => Some(QuestionLock {
                    chat_id: op.chat.clone(),
                    tool_call_id: op.tool_call_id.to_string(),
                    holder: l.holder.to_string(),
                    token: row.try_get("lock_token").db(self)?,
                }),
                None => None,
            };
            return Ok(Recorded::Won {
                question,
                lock,
                resumed: None,
            });
        }
        if question.outcome.is_some() {
            return Ok(Recorded::Settled { question });
        }
        let fits = expected.is_none_or(|e| {
            question.record.revision == e as u64 && !question.posting && !question.locked(op.now)
        });
        if !fits {
            return Ok(Recorded::Changed { question });
        }
        // The snapshot says it should have won: an outcome (or a change) committed while this
        // statement waited for the row. Read what is there now.
        Ok(
            match self
                .question_on(conn, op.chat, op.tool_call_id, op.now)
                .await?
            {
                None => Recorded::Gone,
                Some(q) if q.outcome.is_some() => Recorded::Settled { question: q },
                Some(q) => Recorded::Changed { question: q },
            },
        )
    }
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

/// The text an advisory lock of role `key` is hashed from (its own namespace).
fn hold_key(key: &str) -> String {
    format!("frogbot-hold:{key}")
}

/// How often a held role's connection is checked (a broken one loses the role).
const HOLD_CHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// A role held by a session advisory lock on a connection of its own: a task keeps the
/// connection, checks it every [`HOLD_CHECK`], and unlocks and closes it when the hold is
/// dropped.
#[derive(Debug)]
struct PgHeld {
    lost: tokio::sync::watch::Receiver<bool>,
    release: Option<tokio::sync::oneshot::Sender<()>>,
}

impl PgHeld {
    fn start(mut conn: PgConnection, key: String) -> Self {
        let (gone, lost) = tokio::sync::watch::channel(false);
        let (release, mut released) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut released => {
                        let _ = sqlx::query("SELECT pg_advisory_unlock(hashtextextended($1, 0))")
                            .bind(&key)
                            .execute(&mut conn)
                            .await;
                        let _ = sqlx::Connection::close(conn).await;
                        return;
                    }
                    () = tokio::time::sleep(HOLD_CHECK) => {
                        if let Err(e) = sqlx::query("SELECT 1").execute(&mut conn).await {
                            tracing::warn!(role = %key, error = %e, "the connection holding a role broke; the role is lost");
                            let _ = gone.send(true);
                            return;
                        }
                    }
                }
            }
        });
        Self {
            lost,
            release: Some(release),
        }
    }
}

impl Drop for PgHeld {
    fn drop(&mut self) {
        if let Some(r) = self.release.take() {
            let _ = r.send(());
        }
    }
}

#[async_trait]
impl Held for PgHeld {
    async fn lost(&self) {
        let mut lost = self.lost.clone();
        // A closed channel without `true` means the hold was released, never lost.
        if lost.wait_for(|l| *l).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
