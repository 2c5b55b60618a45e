//! The questions part: [`QuestionStore`] for [`SqliteStore`], and the question records' reads and
//! writes (their revision, lock and links).

use async_trait::async_trait;
use rusqlite::{Connection, params};

use frogbot_core::model::{ChatId, Millis, QuestionRecord};
use frogbot_core::store::*;
use frogbot_core::store::{Result, StoreError};

use crate::SqliteStore;
use crate::ops::{self, *};

#[async_trait]
impl QuestionStore for SqliteStore {
    async fn get_question(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        now: Millis,
    ) -> Result<Option<QuestionRow>> {
        let (chat, call) = (chat.clone(), tool_call_id.to_string());
        self.read("get_question", move |c| get_question(c, &chat, &call, now))
            .await
    }

    async fn questions_of_message(
        &self,
        chat: &ChatId,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<QuestionRow>> {
        let (chat, id) = (chat.clone(), message_id.to_string());
        self.read("questions_of_message", move |c| {
            ops::questions_of_message(c, &chat, &id, now)
        })
        .await
    }

    async fn questions_by_platform_message(
        &self,
        platform: &str,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<QuestionRow>> {
        let (platform, id) = (platform.to_string(), message_id.to_string());
        self.read("questions_by_platform_message", move |c| {
            questions_by_platform_message(c, &platform, &id, now)
        })
        .await
    }

    async fn insert_questions(&self, rows: &[NewQuestion], now: Millis) -> Result<()> {
        let rows = rows.to_vec();
        self.write("insert_questions", move |c| {
            ops::insert_questions(c, &rows, now)
        })
        .await
    }

    async fn mark_rendered(&self, op: &RenderedOp<'_>) -> Result<()> {
        moved!(self.write("mark_rendered"), op => RenderedOp {
            r chat, r platform, r calls, v now
        }, |c, op| mark_rendered(c, &op))
    }

    async fn record_outcome(&self, op: &RecordOp<'_>) -> Result<Recorded> {
        moved!(self.write("record_outcome"), op => RecordOp {
            r chat, r tool_call_id, r outcome, o actor, v expected_revision, ol lock, o resume, v now
        }, |c, op| record_outcome(c, &op))
    }

    async fn advance_question(&self, op: &AdvanceOp<'_>) -> Result<Advanced> {
        moved!(self.write("advance_question"), op => AdvanceOp {
            r chat, r tool_call_id, v expected_revision, o state, l lock, v now
        }, |c, op| advance_question(c, &op))
    }

    async fn lock_question(
        &self,
        op: &LockQuestionOp<'_>,
    ) -> Result<Option<(QuestionLock, QuestionRow)>> {
        moved!(self.write("lock_question"), op => LockQuestionOp {
            r chat, r tool_call_id, l lock, v now
        }, |c, op| lock_question(c, &op))
    }

    async fn update_question(&self, op: &UpdateQuestionOp<'_>) -> Result<QuestionRow> {
        moved!(self.write("update_question"), op => UpdateQuestionOp {
            r lock, r update, s link_platform, o job, v keep_lock, v now
        }, |c, op| update_question(c, &op))
    }

    async fn unlock_question(&self, lock: &QuestionLock) -> Result<()> {
        let lock = lock.clone();
        self.write("unlock_question", move |c| unlock_question(c, &lock))
            .await
    }

    async fn purge_expired(&self, now: Millis) -> Result<u64> {
        self.write("purge_expired", move |c| purge_expired(c, now))
            .await
    }
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
    op: &LockQuestionOp<'_>,
) -> R<Option<(QuestionLock, QuestionRow)>> {
    let (chat, call, holder, now) = (op.chat, op.tool_call_id, op.lock.holder, op.now);
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
        params![chat.as_str(), call, holder, now + op.lock.ttl_ms, now],
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
