//! The store: one trait, [`Store`], that keeps everything FrogBot must not lose — chats, messages,
//! the queue, turn leases, question records and their message links, and durable jobs — with one
//! implementation per SQL dialect over sqlx ([`SqliteStore`], [`PostgresStore`]).
//!
//! Every coordination rule that must hold across processes is enforced here, by the database, in a
//! single conditional statement or a write transaction: one lease per chat (with a fencing token
//! that refuses the writes of a holder that lost it), first outcome wins for a question, one
//! worker per job. SQL lives in this module only.

mod types;
pub use types::*;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "postgres")]
pub use sql::PostgresStore;
#[cfg(feature = "sqlite")]
pub use sql::SqliteStore;

#[cfg(feature = "testing")]
pub mod conformance;

use async_trait::async_trait;
use std::sync::Arc;

use crate::error::Result;
use crate::model::{Actor, ChatId, Delivery, Millis, QuestionOutcome, UiMessage, UserId};

/// How long an unanswered question record lives after its last change: 30 days.
pub const QUESTION_TTL_MS: Millis = 30 * 24 * 60 * 60 * 1000;
/// How long a question record is kept after its outcome is recorded: 24 hours.
pub const ANSWERED_TTL_MS: Millis = 24 * 60 * 60 * 1000;

/// Which database a store talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// SQLite (a file, WAL).
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

/// Everything FrogBot keeps. Implementations must be safe to share between tasks and between
/// processes on one database: each method is atomic on its own.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// Which database this is.
    fn backend(&self) -> Backend;

    /// Whether the database answers (for `/healthz`).
    async fn ping(&self) -> Result<()>;

    // ---- chats -------------------------------------------------------------------------------

    /// Creates the chat if it does not exist, or opens the existing one for writing. Returns the
    /// stored chat and whether this call created it (the first sender owns a chat). Who may write
    /// is decided here, on the row this call created or found, so two first messages racing on a
    /// new chat cannot both get in:
    /// - an existing chat whose channel differs from `chat.channel` (a web chat for a channel
    ///   message, a channel chat for a web message, another thread) fails with
    ///   [`crate::Error::ChannelChat`];
    /// - an existing web chat with an owner, written by anyone else, fails with
    ///   [`crate::Error::Forbidden`] (channel chats are written by everyone in their thread).
    async fn create_chat(&self, chat: &NewChat, now: Millis) -> Result<(ChatRow, bool)>;

    /// The chat of a channel thread, if one was created.
    async fn get_channel_chat(&self, platform: &str, thread: &str) -> Result<Option<ChatRow>>;

    /// One chat.
    async fn get_chat(&self, chat: &ChatId) -> Result<Option<ChatRow>>;

    /// The chats owned by `owner` (`None`: the ownerless ones), most recently updated first.
    async fn list_chats(&self, owner: Option<&UserId>, limit: u32) -> Result<Vec<ChatRow>>;

    // ---- messages and the queue ----------------------------------------------------------------

    /// One message.
    async fn get_message(&self, chat: &ChatId, id: &str) -> Result<Option<StoredMessage>>;

    /// A chat's messages in stored order: turns in order (each turn's user message, the steers that
    /// joined it, its reply), then the queued messages oldest first.
    async fn list_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>>;

    /// The chat's messages saved or changed at or after `since` (by the store's `updated_at`), in
    /// stored order: what live views poll for, without reading the whole chat.
    async fn messages_since(&self, chat: &ChatId, since: Millis) -> Result<Vec<StoredMessage>>;

    /// Saves a user message as queued (not yet sent to the model). Fails with
    /// [`crate::Error::InvalidInput`] when the chat already has a message with this id.
    async fn enqueue_message(
        &self,
        chat: &ChatId,
        message: &UiMessage,
        delivery: Delivery,
        now: Millis,
    ) -> Result<StoredMessage>;

    /// The chat's queued messages, oldest first.
    async fn queued_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>>;

    /// Changes a queued message's parts and/or delivery, for its author only.
    async fn edit_queued(
        &self,
        chat: &ChatId,
        id: &str,
        by: Option<&UserId>,
        edit: &QueuedEdit,
        now: Millis,
    ) -> Result<QueuedChange>;

    /// Removes a queued message, for its author only.
    async fn delete_queued(
        &self,
        chat: &ChatId,
        id: &str,
        by: Option<&UserId>,
    ) -> Result<QueuedChange>;

    // ---- turns ---------------------------------------------------------------------------------

    /// Takes the chat's turn lease for a new turn when the chat is idle: no live lease and no
    /// waiting question. `None` when a turn runs or a question waits. The chat must exist. The
    /// lease says whether it was taken over from a turn that never released it
    /// ([`Lease::taken_over`]).
    async fn try_start_turn(&self, chat: &ChatId, req: &LeaseRequest) -> Result<Option<Lease>>;

    /// Takes the lease to continue the turn whose assistant message `awaiting_message_id` waits on
    /// questions, clearing the wait. `None` when the chat is not waiting on that message or a live
    /// lease exists.
    async fn try_resume_turn(
        &self,
        chat: &ChatId,
        awaiting_message_id: &str,
        req: &LeaseRequest,
    ) -> Result<Option<Lease>>;

    /// Clears a wait on `awaiting_message_id` without continuing (a dismissal or a withdrawal).
    /// `false` when the chat was not waiting on it, or a live lease exists.
    async fn clear_awaiting(
        &self,
        chat: &ChatId,
        awaiting_message_id: &str,
        now: Millis,
    ) -> Result<bool>;

    /// Chats whose turn lease ran out without being released (a turn whose process stopped), and
    /// that wait on no question: at most `limit`, the longest expired first.
    async fn expired_leases(&self, now: Millis, limit: u32) -> Result<Vec<ChatId>>;

    /// Ends a held lease now without releasing it (fenced), so the next taker treats its turn as
    /// interrupted: a process that stops with a turn still running hands the chat on at once.
    async fn expire_lease(&self, lease: &Lease, now: Millis) -> Result<()>;

    /// Extends a lease. [`crate::Error::LeaseLost`] when it was taken over.
    async fn renew_lease(&self, lease: &mut Lease, ttl_ms: Millis, now: Millis) -> Result<()>;

    /// Changes the user driving the turn (after a promotion, or the answerer of a question).
    async fn set_driver(&self, lease: &mut Lease, driver: Option<&UserId>) -> Result<()>;

    /// Saves a message of the turn that holds `lease` (a checkpoint): inserts or replaces it at
    /// `slot`, and sets or clears the chat's waiting message. Refused with
    /// [`crate::Error::LeaseLost`] when the lease was taken over.
    async fn save_turn_message(
        &self,
        lease: &Lease,
        message: &UiMessage,
        slot: Slot,
        awaiting: Option<&str>,
        now: Millis,
    ) -> Result<StoredMessage>;

    /// Takes the lease for a new turn (as [`Store::try_start_turn`]) and saves the turn's user
    /// message at a new turn position (as [`Store::save_turn_message`] with [`Slot::TurnStart`]), in
    /// one step where the backend can. `None` when the chat is not idle; nothing is saved then.
    async fn start_turn_with(
        &self,
        chat: &ChatId,
        req: &LeaseRequest,
        message: &UiMessage,
    ) -> Result<Option<(Lease, StoredMessage)>> {
        let Some(lease) = self.try_start_turn(chat, req).await? else {
            return Ok(None);
        };
        let stored = self
            .save_turn_message(&lease, message, Slot::TurnStart, None, req.now)
            .await?;
        Ok(Some((lease, stored)))
    }

    /// Promotes the oldest queued message to start the next turn under `lease` (fenced), giving it
    /// a new turn position. `None` when nothing is queued.
    async fn promote_next(&self, lease: &Lease, now: Millis) -> Result<Option<StoredMessage>>;

    /// Joins the queued steer messages of `driver` to the turn at `position` (fenced), oldest first.
    async fn take_steers(
        &self,
        lease: &Lease,
        driver: Option<&UserId>,
        position: i64,
        now: Millis,
    ) -> Result<Vec<StoredMessage>>;

    /// Ends the turn that holds `lease`. [`TurnEnd::Idle`] releases the lease only when nothing is
    /// queued (otherwise [`EndTurn::QueuedPending`]: promote and run the next turn);
    /// [`TurnEnd::Awaiting`] releases it and leaves the chat waiting on that message.
    async fn end_turn(&self, lease: &Lease, end: TurnEnd<'_>, now: Millis) -> Result<EndTurn>;

    // ---- questions -----------------------------------------------------------------------------

    /// Saves new question records (one per call). A record whose id exists is left as it is.
    async fn insert_questions(&self, rows: &[NewQuestion], now: Millis) -> Result<()>;

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

    /// Takes a question's lock for `ttl_ms` if it is free (or its holder's time ran out).
    async fn try_lock_question(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        holder: &str,
        ttl_ms: Millis,
        now: Millis,
    ) -> Result<Option<QuestionLock>>;

    /// Releases a question's lock (no-op when it was taken over).
    async fn unlock_question(&self, lock: &QuestionLock) -> Result<()>;

    /// Applies an update to a question record under its lock, refreshing its expiry (30 days from
    /// now, or unchanged once an outcome is recorded). [`crate::Error::Locked`] when the lock is no
    /// longer held.
    async fn update_question(
        &self,
        lock: &QuestionLock,
        update: &QuestionUpdate,
        now: Millis,
    ) -> Result<QuestionRow>;

    /// Records a question's outcome if it has none yet: the first outcome wins, across processes.
    /// `true` when this call recorded it. The record is then kept 24 hours.
    async fn record_outcome(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        outcome: &QuestionOutcome,
        actor: Option<&Actor>,
        now: Millis,
    ) -> Result<bool>;

    /// Links a platform message id to its question call (kept as long as the record lives, even
    /// after the id leaves the record's `messages`).
    async fn link_question_message(
        &self,
        platform: &str,
        message_id: &str,
        chat: &ChatId,
        tool_call_id: &str,
    ) -> Result<()>;

    /// The live question calls a platform message belongs to (one message may carry several).
    async fn find_questions_by_message(
        &self,
        platform: &str,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<(ChatId, String)>>;

    /// Deletes expired question records and their links. Returns how many records went.
    async fn purge_expired(&self, now: Millis) -> Result<u64>;

    // ---- durable jobs --------------------------------------------------------------------------

    /// Schedules a job. With a `key`, an existing job of that key is rescheduled instead (to the
    /// earlier run-at time; a dead one is revived with its attempts reset).
    async fn enqueue_job(&self, job: &NewJob) -> Result<i64>;

    /// Claims the due job with the earliest run-at time for `worker`, for `claim_ms`. A job is
    /// claimed by one worker at a time; a claim whose time ran out can be taken again.
    async fn claim_job(&self, worker: &str, claim_ms: Millis, now: Millis) -> Result<Option<Job>>;

    /// Removes a finished job. `false` when the claim was lost.
    async fn complete_job(&self, job: &Job) -> Result<bool>;

    /// Releases a claimed job to run again at `run_at`, noting the error.
    async fn retry_job(&self, job: &Job, run_at: Millis, error: &str) -> Result<bool>;

    /// Marks a claimed job dead (kept for inspection, never run again unless re-enqueued by key).
    async fn bury_job(&self, job: &Job, error: &str) -> Result<bool>;

    /// One job by id.
    async fn get_job(&self, id: i64) -> Result<Option<Job>>;
}

/// A shared store handle.
pub type DynStore = Arc<dyn Store>;

/// Opens the store a database URL names and applies its migrations: `sqlite://PATH` (created when
/// missing), `sqlite::memory:`, or `postgres://…`.
pub async fn open(url: &str) -> Result<DynStore> {
    #[cfg(feature = "sqlite")]
    if url.starts_with("sqlite:") {
        return Ok(Arc::new(SqliteStore::open(url).await?));
    }
    #[cfg(feature = "postgres")]
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Arc::new(PostgresStore::open(url).await?));
    }
    Err(crate::Error::UnsupportedDatabase(url.to_string()))
}

/// Takes a question's lock, waiting (with a short backoff) while another task or process holds it,
/// for at most `wait_ms`. The lock itself lasts `ttl_ms`, so a holder that died frees it.
pub async fn lock_question(
    store: &dyn Store,
    chat: &ChatId,
    tool_call_id: &str,
    holder: &str,
    ttl_ms: Millis,
    wait_ms: Millis,
) -> Result<QuestionLock> {
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_micros(500);
    loop {
        let now = crate::model::now_millis();
        if let Some(lock) = store
            .try_lock_question(chat, tool_call_id, holder, ttl_ms, now)
            .await?
        {
            return Ok(lock);
        }
        if store.get_question(chat, tool_call_id, now).await?.is_none() {
            return Err(crate::Error::InvalidInput(format!(
                "no live question {tool_call_id} in chat {chat}"
            )));
        }
        if started.elapsed().as_millis() as Millis >= wait_ms {
            return Err(crate::Error::Locked(tool_call_id.to_string()));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_millis(20));
    }
}
