//! Store layers: a [`Store`] that forwards every operation to an inner store and does something
//! around each — times it ([`crate::metrics::metered`]), holds a test at a chosen point
//! (frogbot-testkit's `PausingStore`). A layer implements [`StoreLayer`] (its inner store, and
//! optionally [`StoreLayer::around`]); the implementation of every part of [`Store`] is this
//! module's, written once for every layer by the `layered!` list below (one block per part), so a
//! method added to a part is added here, in one line under that part, and no layer restates a
//! trait.

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

/// The parts of the [`Store`] of every [`StoreLayer`], from the list of each part's methods: an
/// `async fn` runs through [`StoreLayer::around`], a plain `fn` is only forwarded.
macro_rules! layered {
    ($(
        $part:ident {
            $(fn $plain:ident() -> $plain_ret:ty;)*
            $(async fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*
        }
    )*) => {
        $(
            #[async_trait]
            impl<L: StoreLayer> $part for L {
                $(
                    fn $plain(&self) -> $plain_ret {
                        self.inner().$plain()
                    }
                )*
                $(
                    async fn $name(&self, $($arg: $ty),*) -> $ret {
                        self.around(stringify!($name), Box::pin(self.inner().$name($($arg),*)))
                            .await
                    }
                )*
            }
        )*
    };
}

layered! {
    ChatStore {
        async fn get_chat(chat: &ChatId) -> Result<Option<ChatRow>>;
        async fn get_channel_chat(platform: &str, thread: &str) -> Result<Option<ChatRow>>;
        async fn list_chats(owner: Option<&UserId>, limit: u32) -> Result<Vec<ChatRow>>;
        async fn get_message(chat: &ChatId, id: &str) -> Result<Option<StoredMessage>>;
        async fn list_messages(chat: &ChatId) -> Result<Vec<StoredMessage>>;
        async fn messages_since(chat: &ChatId, version: i64) -> Result<ChatChanges>;
        async fn queued_messages(chat: &ChatId) -> Result<Vec<StoredMessage>>;
    }
    TurnStore {
        async fn expired_leases(now: Millis, limit: u32) -> Result<Vec<ChatId>>;
        async fn send(op: &SendOp<'_>) -> Result<Sent>;
        async fn checkpoint(op: &CheckpointOp<'_>) -> Result<Checkpointed>;
        async fn await_answers(op: &AwaitOp<'_>) -> Result<StoredMessage>;
        async fn end_turn(op: &EndTurnOp<'_>) -> Result<TurnEnded>;
        async fn take_chat(chat: &ChatId, req: &LeaseRequest) -> Result<Option<Taken>>;
        async fn resume_turn(chat: &ChatId, message_id: &str, req: &LeaseRequest) -> Result<Resume>;
        async fn renew_lease(lease: &mut Lease, ttl_ms: Millis, now: Millis) -> Result<()>;
        async fn expire_lease(lease: &Lease, now: Millis) -> Result<()>;
        async fn edit_queued(op: &QueuedOp<'_>, edit: &QueuedEdit) -> Result<QueuedChange>;
        async fn delete_queued(op: &QueuedOp<'_>) -> Result<QueuedChange>;
    }
    QuestionStore {
        async fn get_question(chat: &ChatId, tool_call_id: &str, now: Millis) -> Result<Option<QuestionRow>>;
        async fn questions_of_message(chat: &ChatId, message_id: &str, now: Millis) -> Result<Vec<QuestionRow>>;
        async fn questions_by_platform_message(platform: &str, message_id: &str, now: Millis) -> Result<Vec<QuestionRow>>;
        async fn insert_questions(rows: &[NewQuestion], now: Millis) -> Result<()>;
        async fn mark_rendered(op: &RenderedOp<'_>) -> Result<()>;
        async fn record_outcome(op: &RecordOp<'_>) -> Result<Recorded>;
        async fn advance_question(op: &AdvanceOp<'_>) -> Result<Advanced>;
        async fn lock_question(op: &LockQuestionOp<'_>) -> Result<Option<(QuestionLock, QuestionRow)>>;
        async fn update_question(op: &UpdateQuestionOp<'_>) -> Result<QuestionRow>;
        async fn unlock_question(lock: &QuestionLock) -> Result<()>;
        async fn purge_expired(now: Millis) -> Result<u64>;
    }
    JobStore {
        fn changes() -> Option<tokio::sync::broadcast::Receiver<Change>>;
        async fn get_job(id: i64) -> Result<Option<Job>>;
        async fn enqueue_job(job: &NewJob) -> Result<i64>;
        async fn claim_job(worker: &str, claim_ms: Millis, now: Millis) -> Result<Option<Job>>;
        async fn complete_job(job: &Job) -> Result<bool>;
        async fn retry_job(job: &Job, run_at: Millis, error: &str) -> Result<bool>;
        async fn bury_job(job: &Job, error: &str) -> Result<bool>;
        async fn delete_job(key: &str) -> Result<bool>;
        async fn earlier_job(key_prefix: &str, key: &str) -> Result<Option<Job>>;
        async fn defer_job(job: &Job, run_at: Millis) -> Result<bool>;
        async fn dead_jobs(limit: u32) -> Result<Vec<Job>>;
        async fn purge_dead_jobs(before: Millis) -> Result<u64>;
    }
    AgentStore {
        async fn bind_agent(op: &BindAgentOp<'_>) -> Result<Bound>;
        async fn post_message(op: &PostMessageOp<'_>) -> Result<PostedMessage>;
        async fn update_message(op: &UpdateMessageOp<'_>) -> Result<MessageUpdate>;
        async fn take_inbox(op: &InboxOp<'_>) -> Result<Vec<StoredMessage>>;
    }
    OperationsStore {
        fn backend() -> &'static str;
        async fn ping() -> Result<()>;
        async fn find_chats(filter: &ChatFilter, now: Millis) -> Result<Vec<ChatRow>>;
        async fn live_jobs(limit: u32) -> Result<Vec<Job>>;
        async fn revive_job(id: i64, now: Millis) -> Result<Option<Job>>;
        async fn purgeable(now: Millis, dead_before: Millis) -> Result<Purgeable>;
        async fn backlog(now: Millis) -> Result<Backlog>;
        async fn database_time() -> Result<Option<Millis>>;
    }
    RoleStore {
        async fn try_hold(key: &str) -> Result<Option<Box<dyn Held>>>;
        async fn members(op: &MembersOp<'_>) -> Result<Vec<String>>;
    }
    FileStore {
        async fn begin_file(file: &NewFile) -> Result<()>;
        async fn put_file_chunk(id: &str, index: u32, data: &[u8]) -> Result<()>;
        async fn finish_file(op: &FinishFile<'_>) -> Result<FileRow>;
        async fn get_file(chat: &ChatId, id: &str) -> Result<Option<FileRow>>;
        async fn file_chunk(id: &str, index: u32) -> Result<Option<Vec<u8>>>;
        async fn purge_files(before: Millis) -> Result<u64>;
    }
}
