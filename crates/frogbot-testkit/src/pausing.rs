//! [`PausingStore`]: a [`Store`] that delegates to another and holds the engine once at a chosen
//! point around one of its operations, so a test can act in that window (a settle racing the turn
//! that asks the question) without sleeping and hoping.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Semaphore;

use frogbot_core::model::{ChatId, Millis, UserId};
use frogbot_core::store::Result;
use frogbot_core::store::*;

/// Where a [`PausingStore`] holds the engine (once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PausePoint {
    /// Before the operation that saves a step asking a question (`await_answers`): a client saw
    /// the call streamed, the question record does not exist yet.
    BeforeAwaitAnswers,
    /// After it: the question records exist and the chat is released, the asking turn has not
    /// finished (its channel has not drawn the question yet).
    AfterAwaitAnswers,
    /// Before `await_answers`, held until a look-up of a question record (`get_question`) finds
    /// none; then the held save runs to its end before that look-up answers "none" — the save
    /// lands between a reader's two reads, the worst moment for a settle that looks for the record
    /// and at the chat. Released by the look-up, not by [`PausingStore::resume`].
    SaveDuringLookUp,
}
/// A store that pauses the first call reaching its [`PausePoint`] until [`PausingStore::resume`].
#[derive(Debug)]
pub struct PausingStore {
    inner: DynStore,
    at: PausePoint,
    armed: AtomicBool,
    arrived: Semaphore,
    go_on: Semaphore,
    /// `SaveDuringLookUp`: the held save has finished.
    saved: Semaphore,
    /// `SaveDuringLookUp`: a save is held (the look-up releases it once).
    holding: AtomicBool,
}

impl PausingStore {
    /// Wraps `inner`, pausing once at `at`.
    pub fn new(inner: DynStore, at: PausePoint) -> Arc<Self> {
        Arc::new(Self {
            inner,
            at,
            armed: AtomicBool::new(true),
            arrived: Semaphore::new(0),
            go_on: Semaphore::new(0),
            saved: Semaphore::new(0),
            holding: AtomicBool::new(false),
        })
    }

    /// Waits (at most 30 s) until a call is held at the pause point.
    pub async fn reached(&self) {
        tokio::time::timeout(Duration::from_secs(30), self.arrived.acquire())
            .await
            .unwrap_or_else(|_| panic!("nothing reached {:?}", self.at))
            .expect("semaphore open")
            .forget();
    }

    /// Lets the held call go on.
    pub fn resume(&self) {
        self.go_on.add_permits(1);
    }

    async fn point(&self, here: PausePoint) {
        if here == self.at && self.armed.swap(false, Ordering::SeqCst) {
            if here == PausePoint::SaveDuringLookUp {
                self.holding.store(true, Ordering::SeqCst);
            }
            self.arrived.add_permits(1);
            if let Ok(p) = self.go_on.acquire().await {
                p.forget();
            }
        }
    }
}

#[async_trait]
impl Store for PausingStore {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    async fn ping(&self) -> Result<()> {
        self.inner.ping().await
    }
    async fn get_chat(&self, chat: &ChatId) -> Result<Option<ChatRow>> {
        self.inner.get_chat(chat).await
    }
    async fn get_channel_chat(&self, platform: &str, thread: &str) -> Result<Option<ChatRow>> {
        self.inner.get_channel_chat(platform, thread).await
    }
    async fn list_chats(&self, owner: Option<&UserId>, limit: u32) -> Result<Vec<ChatRow>> {
        self.inner.list_chats(owner, limit).await
    }
    async fn get_message(&self, chat: &ChatId, id: &str) -> Result<Option<StoredMessage>> {
        self.inner.get_message(chat, id).await
    }
    async fn list_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
        self.inner.list_messages(chat).await
    }
    async fn messages_since(&self, chat: &ChatId, version: i64) -> Result<ChatChanges> {
        self.inner.messages_since(chat, version).await
    }
    async fn queued_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
        self.inner.queued_messages(chat).await
    }
    async fn expired_leases(&self, now: Millis, limit: u32) -> Result<Vec<ChatId>> {
        self.inner.expired_leases(now, limit).await
    }
    async fn get_question(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        now: Millis,
    ) -> Result<Option<QuestionRow>> {
        let found = self.inner.get_question(chat, tool_call_id, now).await?;
        if found.is_none() && self.holding.swap(false, Ordering::SeqCst) {
            // Let the held save run to its end, then answer what was read before it.
            self.go_on.add_permits(1);
            tokio::time::timeout(Duration::from_secs(30), self.saved.acquire())
                .await
                .expect("the held save finishes")
                .expect("semaphore open")
                .forget();
        }
        Ok(found)
    }
    async fn questions_of_message(
        &self,
        chat: &ChatId,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<QuestionRow>> {
        self.inner.questions_of_message(chat, message_id, now).await
    }
    async fn questions_by_platform_message(
        &self,
        platform: &str,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<QuestionRow>> {
        self.inner
            .questions_by_platform_message(platform, message_id, now)
            .await
    }
    async fn get_job(&self, id: i64) -> Result<Option<Job>> {
        self.inner.get_job(id).await
    }
    async fn send(&self, op: &SendOp<'_>) -> Result<Sent> {
        self.inner.send(op).await
    }
    async fn checkpoint(&self, op: &CheckpointOp<'_>) -> Result<Checkpointed> {
        self.inner.checkpoint(op).await
    }
    async fn await_answers(&self, op: &AwaitOp<'_>) -> Result<StoredMessage> {
        self.point(PausePoint::BeforeAwaitAnswers).await;
        self.point(PausePoint::SaveDuringLookUp).await;
        let saved = self.inner.await_answers(op).await;
        if self.at == PausePoint::SaveDuringLookUp {
            self.saved.add_permits(1);
        }
        self.point(PausePoint::AfterAwaitAnswers).await;
        saved
    }
    async fn end_turn(&self, op: &EndTurnOp<'_>) -> Result<TurnEnded> {
        self.inner.end_turn(op).await
    }
    async fn take_chat(&self, chat: &ChatId, req: &LeaseRequest) -> Result<Option<Taken>> {
        self.inner.take_chat(chat, req).await
    }
    async fn resume_turn(
        &self,
        chat: &ChatId,
        message_id: &str,
        req: &LeaseRequest,
    ) -> Result<Resume> {
        self.inner.resume_turn(chat, message_id, req).await
    }
    async fn renew_lease(&self, lease: &mut Lease, ttl_ms: Millis, now: Millis) -> Result<()> {
        self.inner.renew_lease(lease, ttl_ms, now).await
    }
    async fn expire_lease(&self, lease: &Lease, now: Millis) -> Result<()> {
        self.inner.expire_lease(lease, now).await
    }
    async fn edit_queued(
        &self,
        chat: &ChatId,
        id: &str,
        by: Option<&UserId>,
        edit: &QueuedEdit,
        now: Millis,
    ) -> Result<QueuedChange> {
        self.inner.edit_queued(chat, id, by, edit, now).await
    }
    async fn delete_queued(
        &self,
        chat: &ChatId,
        id: &str,
        by: Option<&UserId>,
        now: Millis,
    ) -> Result<QueuedChange> {
        self.inner.delete_queued(chat, id, by, now).await
    }
    async fn insert_questions(&self, rows: &[NewQuestion], now: Millis) -> Result<()> {
        self.inner.insert_questions(rows, now).await
    }
    async fn mark_rendered(&self, op: &RenderedOp<'_>) -> Result<()> {
        self.inner.mark_rendered(op).await
    }
    async fn record_outcome(&self, op: &RecordOp<'_>) -> Result<Recorded> {
        self.inner.record_outcome(op).await
    }
    async fn advance_question(&self, op: &AdvanceOp<'_>) -> Result<Advanced> {
        self.inner.advance_question(op).await
    }
    async fn lock_question(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        holder: &str,
        ttl_ms: Millis,
        now: Millis,
    ) -> Result<Option<(QuestionLock, QuestionRow)>> {
        self.inner
            .lock_question(chat, tool_call_id, holder, ttl_ms, now)
            .await
    }
    async fn update_question(&self, op: &UpdateQuestionOp<'_>) -> Result<QuestionRow> {
        self.inner.update_question(op).await
    }
    async fn unlock_question(&self, lock: &QuestionLock) -> Result<()> {
        self.inner.unlock_question(lock).await
    }
    async fn purge_expired(&self, now: Millis) -> Result<u64> {
        self.inner.purge_expired(now).await
    }
    async fn enqueue_job(&self, job: &NewJob) -> Result<i64> {
        self.inner.enqueue_job(job).await
    }
    async fn claim_job(&self, worker: &str, claim_ms: Millis, now: Millis) -> Result<Option<Job>> {
        self.inner.claim_job(worker, claim_ms, now).await
    }
    async fn complete_job(&self, job: &Job) -> Result<bool> {
        self.inner.complete_job(job).await
    }
    async fn retry_job(&self, job: &Job, run_at: Millis, error: &str) -> Result<bool> {
        self.inner.retry_job(job, run_at, error).await
    }
    async fn bury_job(&self, job: &Job, error: &str) -> Result<bool> {
        self.inner.bury_job(job, error).await
    }
    async fn delete_job(&self, key: &str) -> Result<bool> {
        self.inner.delete_job(key).await
    }
    async fn earlier_job(&self, key_prefix: &str, key: &str) -> Result<Option<Job>> {
        self.inner.earlier_job(key_prefix, key).await
    }
    async fn defer_job(&self, job: &Job, run_at: Millis) -> Result<bool> {
        self.inner.defer_job(job, run_at).await
    }
    async fn dead_jobs(&self, limit: u32) -> Result<Vec<Job>> {
        self.inner.dead_jobs(limit).await
    }
    async fn purge_dead_jobs(&self, before: Millis) -> Result<u64> {
        self.inner.purge_dead_jobs(before).await
    }
    async fn find_chats(&self, filter: &ChatFilter, now: Millis) -> Result<Vec<ChatRow>> {
        self.inner.find_chats(filter, now).await
    }
    async fn live_jobs(&self, limit: u32) -> Result<Vec<Job>> {
        self.inner.live_jobs(limit).await
    }
    async fn revive_job(&self, id: i64, now: Millis) -> Result<Option<Job>> {
        self.inner.revive_job(id, now).await
    }
    async fn backlog(&self, now: Millis) -> Result<Backlog> {
        self.inner.backlog(now).await
    }
    async fn purgeable(&self, now: Millis, dead_before: Millis) -> Result<Purgeable> {
        self.inner.purgeable(now, dead_before).await
    }
    async fn bind_agent(&self, op: &BindAgentOp<'_>) -> Result<Bound> {
        self.inner.bind_agent(op).await
    }
    async fn post_message(&self, op: &PostMessageOp<'_>) -> Result<PostedMessage> {
        self.inner.post_message(op).await
    }
    async fn update_message(&self, op: &UpdateMessageOp<'_>) -> Result<MessageUpdate> {
        self.inner.update_message(op).await
    }
    async fn take_inbox(&self, op: &InboxOp<'_>) -> Result<Vec<StoredMessage>> {
        self.inner.take_inbox(op).await
    }
    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<frogbot_core::store::Change>> {
        self.inner.changes()
    }
    async fn database_time(&self) -> Result<Option<i64>> {
        self.inner.database_time().await
    }
    async fn try_hold(&self, key: &str) -> Result<Option<Box<dyn frogbot_core::store::Held>>> {
        self.inner.try_hold(key).await
    }
    async fn members(
        &self,
        group: &str,
        member: &str,
        ttl_ms: i64,
        now: i64,
    ) -> Result<Vec<String>> {
        self.inner.members(group, member, ttl_ms, now).await
    }
}
