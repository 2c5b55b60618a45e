//! The store's questions part, [`QuestionStore`]: question records, their locks and their links
//! to the platform messages posted for them.

use async_trait::async_trait;

use super::*;
use crate::model::{ChatId, Millis};

/// The questions part of [`Store`]: question records, their locks and links.
#[async_trait]
pub trait QuestionStore: Send + Sync {
    /// One question record, `None` when absent or past its expiry.
    async fn get_question(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        now: Millis,
    ) -> Result<Option<QuestionRow>>;

    /// The live question records of an assistant message, in call order.
    async fn questions_of_message(
        &self,
        chat: &ChatId,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<QuestionRow>>;

    /// The live question records a platform message belongs to (one message may carry several
    /// calls), through the links kept for every message ever posted for a call.
    async fn questions_by_platform_message(
        &self,
        platform: &str,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<QuestionRow>>;

    /// Saves question records (one per call); a record whose id exists is left as it is.
    async fn insert_questions(&self, rows: &[NewQuestion], now: Millis) -> Result<()>;

    /// A channel posted questions: saves each call's record (its messages and state, revision 0),
    /// marks it rendered and links every platform message id to its call; one transaction.
    async fn mark_rendered(&self, op: &RenderedOp<'_>) -> Result<()>;

    /// Records an outcome if the question has none yet (the first one wins, across processes),
    /// fenced by what the caller read; takes the question's lock for closing when asked. See
    /// [`RecordOp`] and [`Recorded`].
    async fn record_outcome(&self, op: &RecordOp<'_>) -> Result<Recorded>;

    /// A partial answer: saves the new state with `revision + 1`, marks the question as still
    /// posting and takes its lock, when the question is open, not posting, unlocked and still at
    /// `op.expected_revision`.
    async fn advance_question(&self, op: &AdvanceOp<'_>) -> Result<Advanced>;

    /// Takes a question's lock for `ttl_ms` if it is free (or its holder's time ran out) and
    /// returns the record as it is under the lock.
    async fn lock_question(
        &self,
        op: &LockQuestionOp<'_>,
    ) -> Result<Option<(QuestionLock, QuestionRow)>>;

    /// Under a held lock: applies `op.update`, links the record's messages to the call, enqueues
    /// `op.job`, and releases the lock (unless `op.keep_lock`). [`StoreError::Locked`] when the
    /// lock is no longer held. The expiry is refreshed (30 days from now, unchanged once an outcome
    /// is recorded).
    async fn update_question(&self, op: &UpdateQuestionOp<'_>) -> Result<QuestionRow>;

    /// Releases a question's lock (no-op when it was taken over).
    async fn unlock_question(&self, lock: &QuestionLock) -> Result<()>;

    /// Deletes expired question records and their links. Returns how many records went.
    async fn purge_expired(&self, now: Millis) -> Result<u64>;
}
