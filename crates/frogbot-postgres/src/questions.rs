//! The questions part: [`QuestionStore`] for [`PostgresStore`], the question records' statements
//! (their revision, lock and links) and the reads behind them.

use async_trait::async_trait;
use serde_json::{Value, json};
use sqlx::Row;
use sqlx::postgres::{PgConnection, PgRow};

use frogbot_core::model::{ChatId, Millis};
use frogbot_core::store::*;
use frogbot_core::store::{Result, StoreError};

use crate::PostgresStore;
use crate::ops::*;
use crate::rows::{self, question_cols, to_json};

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

/// The end of a statement whose CTE `upd` updates the question ($1 chat, $2 call) and returns it:
/// the row as written with `wrote` TRUE, or — when `upd` wrote nothing — the live row as it is
/// (its expiry past `$now`) with `wrote` FALSE; no row when the question is gone.
macro_rules! wrote_or_current {
    ($now:literal) => {
        concat!(
            "RETURNING q.* ) SELECT TRUE AS wrote, ",
            question_cols!("u", ""),
            " FROM upd u UNION ALL SELECT FALSE, ",
            question_cols!("q", ""),
            " FROM questions q WHERE q.chat_id = $1::text AND q.tool_call_id = $2::text \
               AND q.expires_at > ",
            $now,
            "::bigint AND NOT EXISTS (SELECT 1 FROM upd)"
        )
    };
}

/// One question by chat ($1) and call ($2), live at $3.
const GET_QUESTION: &str = concat!(
    "SELECT ",
    question_cols!("q", ""),
    " FROM questions q WHERE q.chat_id = $1 AND q.tool_call_id = $2 AND q.expires_at > $3"
);

/// The live questions of an assistant message: $1 chat, $2 message id, $3 now.
const QUESTIONS_OF_MESSAGE: &str = concat!(
    "SELECT ",
    question_cols!("q", ""),
    " FROM questions q WHERE q.chat_id = $1 AND q.message_id = $2 AND q.expires_at > $3 \
      ORDER BY q.call_index, q.tool_call_id"
);

/// The live questions linked to a platform message: $1 platform, $2 message id, $3 now.
const QUESTIONS_BY_PLATFORM_MESSAGE: &str = concat!(
    "SELECT ",
    question_cols!("q", ""),
    " FROM question_links l JOIN questions q \
        ON q.chat_id = l.chat_id AND q.tool_call_id = l.tool_call_id \
      WHERE l.platform = $1 AND l.message_id = $2 AND q.expires_at > $3 \
      ORDER BY q.chat_id, q.call_index, q.tool_call_id"
);

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
        ",
    wrote_or_current!("$5")
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
        ",
    wrote_or_current!("$7")
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

/// A question read's statement, bound: $1 chat (or platform), $2 call (or message) id, $3 now.
fn question_read<'q>(sql: &'static str, key: &'q str, id: &'q str, now: Millis) -> PgQuery<'q> {
    sqlx::query(sql).bind(key).bind(id).bind(now)
}

/// A question row (unprefixed columns).
fn question(r: &PgRow) -> Result<QuestionRow> {
    rows::question(r, "")
}

impl PostgresStore {
    /// [`QuestionStore::get_question`] on `conn` (inside the caller's transaction, or on the
    /// connection it already holds: never a second connection from the pool while holding one).
    async fn question_on(
        &self,
        conn: &mut PgConnection,
        chat: &ChatId,
        tool_call_id: &str,
        now: Millis,
    ) -> Result<Option<QuestionRow>> {
        question_read(GET_QUESTION, chat.as_str(), tool_call_id, now)
            .fetch_optional(&mut *conn)
            .await
            .db(self)?
            .as_ref()
            .map(question)
            .transpose()
    }

    /// The question's lock that `holder` took, with the token the statement returned.
    fn question_lock(
        &self,
        row: &PgRow,
        chat: &ChatId,
        tool_call_id: &str,
        holder: &str,
    ) -> Result<QuestionLock> {
        Ok(QuestionLock {
            chat_id: chat.clone(),
            tool_call_id: tool_call_id.to_string(),
            holder: holder.to_string(),
            token: row.try_get("lock_token").db(self)?,
        })
    }

    /// The row of a [`wrote_or_current!`] statement: the question, and whether the update wrote
    /// it.
    fn wrote(&self, row: &PgRow) -> Result<(QuestionRow, bool)> {
        Ok((question(row)?, row.try_get("wrote").db(self)?))
    }
}

#[async_trait]
impl QuestionStore for PostgresStore {
    async fn get_question(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        now: Millis,
    ) -> Result<Option<QuestionRow>> {
        let q = question_read(GET_QUESTION, chat.as_str(), tool_call_id, now);
        self.opt(q, question).await
    }

    async fn questions_of_message(
        &self,
        chat: &ChatId,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<QuestionRow>> {
        let q = question_read(QUESTIONS_OF_MESSAGE, chat.as_str(), message_id, now);
        self.all(q, question).await
    }

    async fn questions_by_platform_message(
        &self,
        platform: &str,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<QuestionRow>> {
        let q = question_read(QUESTIONS_BY_PLATFORM_MESSAGE, platform, message_id, now);
        self.all(q, question).await
    }

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
        let row = self
            .one(
                sqlx::query(MARK_RENDERED)
                    .bind(op.chat.as_str())
                    .bind(op.platform)
                    .bind(to_json(&calls)?)
                    .bind(op.now)
                    .bind(op.now + QUESTION_TTL_MS),
            )
            .await?;
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
            let (question, wrote) = self.wrote(&row)?;
            if wrote {
                return Ok(Advanced::Done {
                    lock: self.question_lock(&row, op.chat, op.tool_call_id, op.lock.holder)?,
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
                match self.get_question(op.chat, op.tool_call_id, op.now).await? {
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
        op: &LockQuestionOp<'_>,
    ) -> Result<Option<(QuestionLock, QuestionRow)>> {
        let (chat, tool_call_id, holder) = (op.chat, op.tool_call_id, op.lock.holder);
        let row = sqlx::query(LOCK_QUESTION)
            .bind(chat.as_str())
            .bind(tool_call_id)
            .bind(holder)
            .bind(op.now + op.lock.ttl_ms)
            .bind(op.now)
            .fetch_optional(&self.pool)
            .await
            .db(self)?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some((
            self.question_lock(&row, chat, tool_call_id, holder)?,
            question(&row)?,
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
            let job = job_params(op.job)?;
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
                .bind_job(job)
                .fetch_optional(&self.pool)
                .await
                .db(self)?;
            match row {
                Some(row) => question(&row),
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
        let row = self.one(sqlx::query(PURGE_EXPIRED).bind(now)).await?;
        self.count(&row, "purged")
    }
}

impl PostgresStore {
    /// [`QuestionStore::record_outcome`] on `conn` (a pooled connection, or a transaction that
    /// continues the turn after it).
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
        let (question, wrote) = self.wrote(&row)?;
        if wrote {
            let lock = match op.lock {
                Some(l) => Some(self.question_lock(&row, op.chat, op.tool_call_id, l.holder)?),
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
