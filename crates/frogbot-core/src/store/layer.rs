//! Store layers: a [`Store`] that forwards every operation to an inner store and does something
//! around each — times it ([`crate::metrics::metered`]), holds a test at a chosen point
//! (frogbot-testkit's `PausingStore`). A layer implements [`StoreLayer`] (its inner store, and
//! optionally [`StoreLayer::around`]); the [`Store`] implementation is this module's, written once
//! for every layer by the `layered!` list below, so a method added to [`Store`] is added here, in
//! one line, and no layer restates the trait.

use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;

use super::*;
use crate::model::{ChatId, Millis, UserId};

/// One operation of the inner store, not yet awaited.
pub type Call<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// A store wrapper: every [`Store`] method of a `StoreLayer` runs `around(name, inner.method(…))`.
#[async_trait]
pub trait StoreLayer: Send + Sync + std::fmt::Debug + 'static {
    /// The store every operation goes to.
    fn inner(&self) -> &dyn Store;

    /// Runs the operation `op` (the [`Store`] method's name); the default only awaits it.
    async fn around<T: Send + 'static>(&self, op: &'static str, call: Call<'_, T>) -> Result<T> {
        let _ = op;
        call.await
    }
}

/// The [`Store`] of every [`StoreLayer`], from the list of the trait's async methods.
macro_rules! layered {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        #[async_trait]
        impl<L: StoreLayer> Store for L {
            fn backend(&self) -> &'static str {
                self.inner().backend()
            }
            fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<Change>> {
                self.inner().changes()
            }
            $(
                async fn $name(&self, $($arg: $ty),*) -> $ret {
                    self.around(stringify!($name), Box::pin(self.inner().$name($($arg),*)))
                        .await
                }
            )*
        }
    };
}

layered! {
    ping() -> Result<()>;
    get_chat(chat: &ChatId) -> Result<Option<ChatRow>>;
    get_channel_chat(platform: &str, thread: &str) -> Result<Option<ChatRow>>;
    list_chats(owner: Option<&UserId>, limit: u32) -> Result<Vec<ChatRow>>;
    get_message(chat: &ChatId, id: &str) -> Result<Option<StoredMessage>>;
    list_messages(chat: &ChatId) -> Result<Vec<StoredMessage>>;
    messages_since(chat: &ChatId, version: i64) -> Result<ChatChanges>;
    queued_messages(chat: &ChatId) -> Result<Vec<StoredMessage>>;
    expired_leases(now: Millis, limit: u32) -> Result<Vec<ChatId>>;
    get_question(chat: &ChatId, tool_call_id: &str, now: Millis) -> Result<Option<QuestionRow>>;
    questions_of_message(chat: &ChatId, message_id: &str, now: Millis) -> Result<Vec<QuestionRow>>;
    questions_by_platform_message(platform: &str, message_id: &str, now: Millis) -> Result<Vec<QuestionRow>>;
    get_job(id: i64) -> Result<Option<Job>>;
    send(op: &SendOp<'_>) -> Result<Sent>;
    checkpoint(op: &CheckpointOp<'_>) -> Result<Checkpointed>;
    await_answers(op: &AwaitOp<'_>) -> Result<StoredMessage>;
    end_turn(op: &EndTurnOp<'_>) -> Result<TurnEnded>;
    take_chat(chat: &ChatId, req: &LeaseRequest) -> Result<Option<Taken>>;
    resume_turn(chat: &ChatId, message_id: &str, req: &LeaseRequest) -> Result<Resume>;
    renew_lease(lease: &mut Lease, ttl_ms: Millis, now: Millis) -> Result<()>;
    expire_lease(lease: &Lease, now: Millis) -> Result<()>;
    edit_queued(chat: &ChatId, id: &str, by: Option<&UserId>, edit: &QueuedEdit, now: Millis) -> Result<QueuedChange>;
    delete_queued(chat: &ChatId, id: &str, by: Option<&UserId>, now: Millis) -> Result<QueuedChange>;
    insert_questions(rows: &[NewQuestion], now: Millis) -> Result<()>;
    mark_rendered(op: &RenderedOp<'_>) -> Result<()>;
    record_outcome(op: &RecordOp<'_>) -> Result<Recorded>;
    advance_question(op: &AdvanceOp<'_>) -> Result<Advanced>;
    lock_question(chat: &ChatId, tool_call_id: &str, holder: &str, ttl_ms: Millis, now: Millis) -> Result<Option<(QuestionLock, QuestionRow)>>;
    update_question(op: &UpdateQuestionOp<'_>) -> Result<QuestionRow>;
    unlock_question(lock: &QuestionLock) -> Result<()>;
    purge_expired(now: Millis) -> Result<u64>;
    enqueue_job(job: &NewJob) -> Result<i64>;
    claim_job(worker: &str, claim_ms: Millis, now: Millis) -> Result<Option<Job>>;
    complete_job(job: &Job) -> Result<bool>;
    retry_job(job: &Job, run_at: Millis, error: &str) -> Result<bool>;
    bury_job(job: &Job, error: &str) -> Result<bool>;
    delete_job(key: &str) -> Result<bool>;
    earlier_job(key_prefix: &str, key: &str) -> Result<Option<Job>>;
    defer_job(job: &Job, run_at: Millis) -> Result<bool>;
    dead_jobs(limit: u32) -> Result<Vec<Job>>;
    purge_dead_jobs(before: Millis) -> Result<u64>;
    find_chats(filter: &ChatFilter, now: Millis) -> Result<Vec<ChatRow>>;
    live_jobs(limit: u32) -> Result<Vec<Job>>;
    revive_job(id: i64, now: Millis) -> Result<Option<Job>>;
    purgeable(now: Millis, dead_before: Millis) -> Result<Purgeable>;
    backlog(now: Millis) -> Result<Backlog>;
    bind_agent(op: &BindAgentOp<'_>) -> Result<Bound>;
    post_message(op: &PostMessageOp<'_>) -> Result<PostedMessage>;
    update_message(op: &UpdateMessageOp<'_>) -> Result<MessageUpdate>;
    take_inbox(op: &InboxOp<'_>) -> Result<Vec<StoredMessage>>;
    try_hold(key: &str) -> Result<Option<Box<dyn Held>>>;
    members(group: &str, member: &str, ttl_ms: Millis, now: Millis) -> Result<Vec<String>>;
    database_time() -> Result<Option<Millis>>;
}
