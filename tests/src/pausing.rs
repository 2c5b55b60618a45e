//! [`PausingStore`]: a [`Store`] that delegates to another and holds the engine once at a chosen
//! point between two of its writes, so a test can act in that window (a settle racing the turn
//! that asks the question) without sleeping and hoping.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Semaphore;

use frogbot_core::error::Result;
use frogbot_core::model::{Actor, ChatId, Delivery, Millis, QuestionOutcome, UiMessage, UserId};
use frogbot_core::store::{
    Backend, ChatRow, DynStore, EndTurn, Job, Lease, LeaseRequest, NewChat, NewJob, NewQuestion,
    QuestionLock, QuestionRow, QuestionUpdate, QueuedChange, QueuedEdit, Slot, Store,
    StoredMessage, TurnEnd,
};

/// Where a [`PausingStore`] holds the engine (once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PausePoint {
    /// Before the checkpoint that saves a step asking a question (`save_turn_message` with a
    /// waiting message): the question records are inserted, the chat is not waiting yet.
    BeforeQuestionCheckpoint,
    /// Before the turn that asked a question releases the chat (`end_turn(Awaiting)`): the chat
    /// is waiting, and the asking turn still holds its lease.
    BeforeReleaseAwaiting,
}

/// A store that pauses the first call reaching its [`PausePoint`] until [`PausingStore::resume`].
#[derive(Debug)]
pub struct PausingStore {
    inner: DynStore,
    at: PausePoint,
    armed: AtomicBool,
    arrived: Semaphore,
    go_on: Semaphore,
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
            self.arrived.add_permits(1);
            if let Ok(p) = self.go_on.acquire().await {
                p.forget();
            }
        }
    }
}

#[async_trait]
impl Store for PausingStore {
    fn backend(&self) -> Backend {
        self.inner.backend()
    }
    async fn ping(&self) -> Result<()> {
        self.inner.ping().await
    }
    async fn create_chat(&self, chat: &NewChat, now: Millis) -> Result<(ChatRow, bool)> {
        self.inner.create_chat(chat, now).await
    }
    async fn get_chat(&self, chat: &ChatId) -> Result<Option<ChatRow>> {
        self.inner.get_chat(chat).await
    }
    async fn get_channel_chat(&self, platform: &str, thread: &str) -> Result<Option<ChatRow>> {
        self.inner.get_channel_chat(platform, thread).await
    }
    async fn expired_leases(&self, now: Millis, limit: u32) -> Result<Vec<ChatId>> {
        self.inner.expired_leases(now, limit).await
    }
    async fn expire_lease(&self, lease: &Lease, now: Millis) -> Result<()> {
        self.inner.expire_lease(lease, now).await
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
    async fn messages_since(&self, chat: &ChatId, since: Millis) -> Result<Vec<StoredMessage>> {
        self.inner.messages_since(chat, since).await
    }
    async fn enqueue_message(
        &self,
        chat: &ChatId,
        message: &UiMessage,
        delivery: Delivery,
        now: Millis,
    ) -> Result<StoredMessage> {
        self.inner
            .enqueue_message(chat, message, delivery, now)
            .await
    }
    async fn queued_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
        self.inner.queued_messages(chat).await
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
    ) -> Result<QueuedChange> {
        self.inner.delete_queued(chat, id, by).await
    }
    async fn try_start_turn(&self, chat: &ChatId, req: &LeaseRequest) -> Result<Option<Lease>> {
        self.inner.try_start_turn(chat, req).await
    }
    async fn try_resume_turn(
        &self,
        chat: &ChatId,
        awaiting_message_id: &str,
        req: &LeaseRequest,
    ) -> Result<Option<Lease>> {
        self.inner
            .try_resume_turn(chat, awaiting_message_id, req)
            .await
    }
    async fn clear_awaiting(
        &self,
        chat: &ChatId,
        awaiting_message_id: &str,
        now: Millis,
    ) -> Result<bool> {
        self.inner
            .clear_awaiting(chat, awaiting_message_id, now)
            .await
    }
    async fn renew_lease(&self, lease: &mut Lease, ttl_ms: Millis, now: Millis) -> Result<()> {
        self.inner.renew_lease(lease, ttl_ms, now).await
    }
    async fn set_driver(&self, lease: &mut Lease, driver: Option<&UserId>) -> Result<()> {
        self.inner.set_driver(lease, driver).await
    }
    async fn save_turn_message(
        &self,
        lease: &Lease,
        message: &UiMessage,
        slot: Slot,
        awaiting: Option<&str>,
        now: Millis,
    ) -> Result<StoredMessage> {
        if awaiting.is_some() {
            self.point(PausePoint::BeforeQuestionCheckpoint).await;
        }
        self.inner
            .save_turn_message(lease, message, slot, awaiting, now)
            .await
    }
    async fn promote_next(&self, lease: &Lease, now: Millis) -> Result<Option<StoredMessage>> {
        self.inner.promote_next(lease, now).await
    }
    async fn take_steers(
        &self,
        lease: &Lease,
        driver: Option<&UserId>,
        position: i64,
        now: Millis,
    ) -> Result<Vec<StoredMessage>> {
        self.inner.take_steers(lease, driver, position, now).await
    }
    async fn end_turn(&self, lease: &Lease, end: TurnEnd<'_>, now: Millis) -> Result<EndTurn> {
        if matches!(end, TurnEnd::Awaiting(_)) {
            self.point(PausePoint::BeforeReleaseAwaiting).await;
        }
        self.inner.end_turn(lease, end, now).await
    }
    async fn insert_questions(&self, rows: &[NewQuestion], now: Millis) -> Result<()> {
        self.inner.insert_questions(rows, now).await
    }
    async fn get_question(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        now: Millis,
    ) -> Result<Option<QuestionRow>> {
        self.inner.get_question(chat, tool_call_id, now).await
    }
    async fn questions_of_message(
        &self,
        chat: &ChatId,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<QuestionRow>> {
        self.inner.questions_of_message(chat, message_id, now).await
    }
    async fn try_lock_question(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        holder: &str,
        ttl_ms: Millis,
        now: Millis,
    ) -> Result<Option<QuestionLock>> {
        self.inner
            .try_lock_question(chat, tool_call_id, holder, ttl_ms, now)
            .await
    }
    async fn unlock_question(&self, lock: &QuestionLock) -> Result<()> {
        self.inner.unlock_question(lock).await
    }
    async fn update_question(
        &self,
        lock: &QuestionLock,
        update: &QuestionUpdate,
        now: Millis,
    ) -> Result<QuestionRow> {
        self.inner.update_question(lock, update, now).await
    }
    async fn record_outcome(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        outcome: &QuestionOutcome,
        actor: Option<&Actor>,
        now: Millis,
    ) -> Result<bool> {
        self.inner
            .record_outcome(chat, tool_call_id, outcome, actor, now)
            .await
    }
    async fn link_question_message(
        &self,
        platform: &str,
        message_id: &str,
        chat: &ChatId,
        tool_call_id: &str,
    ) -> Result<()> {
        self.inner
            .link_question_message(platform, message_id, chat, tool_call_id)
            .await
    }
    async fn find_questions_by_message(
        &self,
        platform: &str,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<(ChatId, String)>> {
        self.inner
            .find_questions_by_message(platform, message_id, now)
            .await
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
    async fn get_job(&self, id: i64) -> Result<Option<Job>> {
        self.inner.get_job(id).await
    }
}
