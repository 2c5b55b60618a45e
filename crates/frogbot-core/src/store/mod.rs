//! The store: one trait, [`Store`], that keeps everything FrogBot must not lose — chats, messages,
//! the queue, turn leases, question records and their message links, and durable jobs.
//!
//! The trait is shaped by the engine's operations, not by tables: starting a turn, saving a step,
//! waiting on questions, ending a turn or promoting the next one, recording an answer, closing a
//! question, claiming a job. **Each write method is one transaction** (one round trip where the
//! backend can), and all of an operation's rules are decided inside it:
//!
//! - one lease per chat, with a fencing token that refuses the writes of a holder that lost it;
//! - who may write a chat (owner, channel) decided on the row the operation created or found;
//! - the first outcome of a question wins; a question changed since it was read is not
//!   overwritten (its `revision` fences answers and partial answers);
//! - a job is claimed by one worker at a time.
//!
//! Backends live in their own crates (`frogbot-sqlite` over rusqlite, `frogbot-postgres` over
//! sqlx) and prove themselves with the store conformance suite (the `frogbot-store-conformance`
//! crate, a dev-dependency of their tests), which takes a store factory, so a wrapped or
//! third-party store runs the same suite.
//!
//! Time is passed in by the caller (milliseconds since the epoch); no method reads a clock but
//! [`Store::database_time`], which reads the database server's.
//!
//! # The operations
//!
//! Each write method is one transaction (one writer hand-off on SQLite, one statement or one
//! transaction on PostgreSQL); a method that fails has changed nothing.
//!
//! | operation | what it does, atomically |
//! |---|---|
//! | `send` | create the chat or open it (`check_writer`: channel chats only from their thread, owned web chats only by their owner, refused with `ChannelChat` / `Forbidden`); a known message id → `Duplicate`; take the lease (free, else take over an expired one and mark its turn `interrupted`) and save the message at a new turn position → `Started`; or save it queued / as a steer of the live turn's driver → `Queued`; `queue_if_busy = false` → `Busy` |
//! | `checkpoint` | fenced save of the reply at the turn's slot; join the driver's queued steers (stored just before the reply) |
//! | `await_answers` | fenced save of the reply as the chat's waiting message, the question records, the expiry job, release the lease |
//! | `end_turn` | fenced save of the last reply, then release (nothing queued), promote the oldest queued message under the same lease with its sender as driver, or (`Handoff`) release and schedule the `run-queue` job |
//! | `take_chat` | take a free or expired lease (marking the interrupted turn), promote the oldest queued message, or release again |
//! | `resume_turn` | once every question of the waiting reply has an outcome: take the lease and clear the wait; `Open`, `Busy{until}`, `NotWaiting` otherwise |
//! | `record_outcome` | first outcome wins (`outcome IS NULL`), fenced by the revision `parse` read and not posting/locked when asked; take the lock for closing with it; with `resume`, a winning outcome also does what `resume_turn` does, in the same transaction |
//! | `advance_question` | a partial answer: `revision + 1`, the state, posting, the lock — fenced by the revision read |
//! | `update_question` | under a held lock: the change (record, posting, closed), the links of the record's messages, a job, unlock |
//! | `mark_rendered` | the records, rendered, and the links of every posted message, for a whole render |
//! | jobs | `enqueue_job` (a key reschedules / revives), `claim_job` (one worker; attempts are the fencing token), `complete_job`, `retry_job`, `bury_job`, `delete_job` (by key, whoever holds it: the reply was posted), `dead_jobs`, `purge_dead_jobs` |
//! | agent chats | `bind_agent` (create the chat as `send` would, with its writer rules, or bind an unbound one; one bound to another agent is left: `Bound::Other`), `post_message` (a message outside any turn at a new position, with its job; a known id → `Duplicate`; the lease, wait and queue untouched; `inbox` marks it for the agent), `update_message` (a message's new body fenced by the version read: `Moved` otherwise), `take_inbox` (the oldest inbox messages of the chats bound to an agent, out of the inbox and marked Seen in the same transaction — two readers never get one; PostgreSQL skips locked rows) |
//! | operators | `find_chats` (every owner's chats, newest first, filtered by the state derived at `now` — as `ChatRow::state` derives it, in SQL — and by platform), `live_jobs` (soonest due first), `revive_job` (one `UPDATE … WHERE dead`: due now, attempts 0, unclaimed, the last error kept; `None` for a live or unknown id), `purgeable` (counts what `purge_expired` and `purge_dead_jobs` would remove, removing nothing), `backlog` (one read: queued messages and the jobs due, running and dead at `now`, for a metrics scrape) |
//!
//! # Concepts
//!
//! - **Turn lease**: columns on the chat row (`lease_holder`, `lease_token`, `lease_until`, `driver`).
//!   Every take raises the token; every write of a turn is fenced with holder + token, so a process
//!   that lost its lease cannot write.
//! - **Chat state** is derived, not stored: `running` while a live lease exists, else `awaiting` while
//!   `awaiting_message_id` is set, else `idle`.
//! - **Message order**: a turn has a `position`; its user message has `sub = 0`, steers that joined it
//!   `sub = seq`, its reply `sub = 2^52`; queued messages have no position and sort last by `seq`.
//! - **Versions**: a chat's `version` rises with every write of one of its messages and a message keeps
//!   the version of its last write, so a reader holding the chat up to a version reads only what is
//!   newer (`messages_since`): the engine's history cache and the live event streams do.
//! - **Question records**: keyed by (chat, tool call id); `revision` (a column too) fences answers and
//!   partial answers; a lease-style lock with a fencing token serialises closing and posting; the
//!   outcome is set only while none is (first wins); `expires_at` is 30 days after the last change, 24
//!   hours after the outcome. `question_links` maps every platform message id ever posted for a call.
//! - **Jobs**: run-at time, attempts (also the claim's fencing token), a de-duplication key whose
//!   re-enqueue reschedules (and revives a dead job), a generation so a job re-enqueued while running
//!   is not lost when that run completes. The engine's jobs are typed (`agent::jobs::EngineJob`):
//!   `resume-chat`, `run-queue`, `question-updated`, `question-expire`, `deliver`, `sync-message`. `end_turn` and
//!   `await_answers` take the reply's `deliver` job (`delivery`) and write it in their transaction.
//! - **Agent chats**: `chats.agent` names the external agent a chat is bound to (its user id, `""`
//!   for an anonymous caller); `messages.inbox` marks what waits in that agent's inbox (a partial
//!   index holds only those). A bound chat runs no model turn for people's messages (asks still
//!   run as turns).
//! - **Who writes a chat** is decided by `send`, on the row it created or found (`check_writer`), so
//!   two first messages racing on a new chat id cannot both get in.
//! - **Channel chats' id space**: a channel creates a thread's chat as `_{platform}-{hash}`; the HTTP
//!   API never creates an id starting with `_`, so no caller can take a thread's chat id first. Channel
//!   chats are found by their thread (the unique `(platform, thread)` index), so chats made under
//!   older id schemes stay in use and a web chat is never delivered into.
//! - **Interrupted turns**: a lease that ran out without being released marks an interrupted turn; the
//!   operation that takes it over marks the previous turn's reply `error: interrupted` (an empty reply
//!   when none was saved) in the same transaction, and the engine posts it to the channel thread.

mod error;
mod layer;
mod types;
pub use error::{Item, Result, StoreError};
pub use layer::{Call, StoreLayer};
pub use types::*;

use async_trait::async_trait;
use std::sync::Arc;

use crate::model::{ChatId, Millis, UserId};

/// How long an unanswered question record lives after its last change: 30 days.
pub const QUESTION_TTL_MS: Millis = 30 * 24 * 60 * 60 * 1000;
/// How long a question record is kept after its outcome is recorded: 24 hours.
pub const ANSWERED_TTL_MS: Millis = 24 * 60 * 60 * 1000;

/// Everything FrogBot keeps. Implementations must be safe to share between tasks and between
/// processes on one database: each method is atomic on its own, and a method that returns an
/// error has changed nothing.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// The backend's name (`sqlite`, `postgres`, …), for logs and benchmarks.
    fn backend(&self) -> &'static str;

    /// Whether the database answers (for `/healthz`).
    async fn ping(&self) -> Result<()>;

    // ---- reads -----------------------------------------------------------------------------------

    /// One chat.
    async fn get_chat(&self, chat: &ChatId) -> Result<Option<ChatRow>>;

    /// The chat of a channel thread, if one was created.
    async fn get_channel_chat(&self, platform: &str, thread: &str) -> Result<Option<ChatRow>>;

    /// The chats owned by `owner` (`None`: the ownerless ones), most recently updated first.
    async fn list_chats(&self, owner: Option<&UserId>, limit: u32) -> Result<Vec<ChatRow>>;

    /// One message.
    async fn get_message(&self, chat: &ChatId, id: &str) -> Result<Option<StoredMessage>>;

    /// A chat's messages in stored order: turns in order (each turn's user message, the steers that
    /// joined it, its reply), then the queued messages oldest first.
    async fn list_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>>;

    /// The messages of a chat written after `version` (see [`ChatRow::version`]), queued ones
    /// included, in stored order, with the chat's version now. What live views and the history
    /// cache read instead of the whole chat.
    async fn messages_since(&self, chat: &ChatId, version: i64) -> Result<ChatChanges>;

    /// The chat's queued messages, oldest first.
    async fn queued_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>>;

    /// Chats whose turn lease ran out without being released (a turn whose process stopped) and
    /// that wait on no question: at most `limit`, the longest expired first.
    async fn expired_leases(&self, now: Millis, limit: u32) -> Result<Vec<ChatId>>;

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

    /// One job by id.
    async fn get_job(&self, id: i64) -> Result<Option<Job>>;

    // ---- turns -----------------------------------------------------------------------------------

    /// A user message arrives: creates the chat or opens it for writing, then starts a turn with the
    /// message when the chat is idle, or saves it queued (a steer from the driving user while a
    /// turn runs). See [`SendOp`] and [`Sent`] for the rules; one transaction.
    async fn send(&self, op: &SendOp<'_>) -> Result<Sent>;

    /// Saves a step of the turn that holds `op.lease` (fenced), and joins the queued steers of the
    /// turn's driving user to the turn when `op.join_steers`.
    ///
    /// The one operation that may commit without waiting for the disk: a step checkpoint must
    /// survive the FrogBot process dying (what it is for), while a power loss may take the last
    /// steps of a running turn with it — the next operation that waits for the disk (the turn's
    /// end) makes them durable. Every other write method is durable when it returns.
    async fn checkpoint(&self, op: &CheckpointOp<'_>) -> Result<Checkpointed>;

    /// The turn stops to wait on questions: saves the reply as the chat's waiting message, creates
    /// the question records (and `op.job`, e.g. the expiry), and releases the lease.
    async fn await_answers(&self, op: &AwaitOp<'_>) -> Result<StoredMessage>;

    /// Ends the turn that holds `op.lease`: saves its last reply (when given), then releases the
    /// chat, or promotes the oldest queued message to start the next turn under the same lease
    /// driven by its sender, or — when handing on — releases it whatever is queued and schedules
    /// `op.mode`'s job if something is.
    async fn end_turn(&self, op: &EndTurnOp<'_>) -> Result<TurnEnded>;

    /// Takes an idle chat (its lease free, or expired: the turn it ended is marked interrupted)
    /// to run its queue: promotes the oldest queued message under the new lease, or releases the
    /// chat again when nothing is queued. `None` when a live turn holds it or a question waits.
    async fn take_chat(&self, chat: &ChatId, req: &LeaseRequest) -> Result<Option<Taken>>;

    /// Continues the turn whose reply `message_id` waits on questions, once every one of them has
    /// an outcome: takes the lease (free or expired) and clears the wait. See [`Resume`].
    async fn resume_turn(
        &self,
        chat: &ChatId,
        message_id: &str,
        req: &LeaseRequest,
    ) -> Result<Resume>;

    /// Extends a lease. [`StoreError::LeaseLost`] when it was taken over.
    async fn renew_lease(&self, lease: &mut Lease, ttl_ms: Millis, now: Millis) -> Result<()>;

    /// Ends a held lease now without releasing it (fenced), so the next taker treats its turn as
    /// interrupted: a process that stops with a turn still running hands the chat on at once.
    async fn expire_lease(&self, lease: &Lease, now: Millis) -> Result<()>;

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
        now: Millis,
    ) -> Result<QueuedChange>;

    // ---- questions -------------------------------------------------------------------------------

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
        chat: &ChatId,
        tool_call_id: &str,
        holder: &str,
        ttl_ms: Millis,
        now: Millis,
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

    // ---- durable jobs ----------------------------------------------------------------------------

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

    /// Removes the job of `key` whoever holds it, dead or not (its work was done elsewhere: a
    /// reply its turn's process posted). `false` when there was none.
    async fn delete_job(&self, key: &str) -> Result<bool>;

    /// The oldest live (not dead) job whose key starts with `key_prefix`, enqueued before the
    /// job of `key` (a lower id; when `key` has no job, any such job but `key`). The engine keeps
    /// a thread's replies in order with it: a reply waits for the replies owed before it.
    async fn earlier_job(&self, key_prefix: &str, key: &str) -> Result<Option<Job>>;

    /// Releases a claimed job to run at `run_at` without counting the claim as an attempt (it
    /// waited for another; it did not fail). `false` when the claim was lost.
    async fn defer_job(&self, job: &Job, run_at: Millis) -> Result<bool>;

    /// The dead jobs, oldest first, at most `limit` (for operators and the housekeeping report).
    async fn dead_jobs(&self, limit: u32) -> Result<Vec<Job>>;

    /// Removes the dead jobs created before `before`. Returns how many.
    async fn purge_dead_jobs(&self, before: Millis) -> Result<u64>;

    // ---- operators (`frogbot chats`, `jobs`, `purge`) ----------------------------------------

    /// Every owner's chats that `filter` lets through (state as at `now`), most recently updated
    /// first.
    async fn find_chats(&self, filter: &ChatFilter, now: Millis) -> Result<Vec<ChatRow>>;

    /// The live (not dead) jobs, the soonest due first, at most `limit`.
    async fn live_jobs(&self, limit: u32) -> Result<Vec<Job>>;

    /// Makes the dead job `id` live again: due at `now`, its attempts reset, unclaimed (its last
    /// error kept). `None` when no dead job has that id (a live job is left as it is).
    async fn revive_job(&self, id: i64, now: Millis) -> Result<Option<Job>>;

    /// Counts what [`Store::purge_expired`] at `now` and [`Store::purge_dead_jobs`] of
    /// `dead_before` would remove, removing nothing.
    async fn purgeable(&self, now: Millis, dead_before: Millis) -> Result<Purgeable>;

    /// Counts, at `now`, the queued messages of every chat and the jobs due (unclaimed or their
    /// claim ended, `run_at <= now`), running (claimed, the claim live) and dead — one read, for
    /// a metrics scrape.
    async fn backlog(&self, now: Millis) -> Result<Backlog>;

    // ---- agent chats (an external agent's conversation) ------------------------------------

    /// Binds a chat to an external agent, creating it as `send` would when it is missing (the
    /// same writer rules: a channel chat only by its thread, an owned chat only by its owner).
    /// A chat bound to another agent is left as it is ([`Bound::Other`]).
    async fn bind_agent(&self, op: &BindAgentOp<'_>) -> Result<Bound>;

    /// Appends a message outside any turn at the chat's end (a new turn position), with
    /// `op.job`; a known message id → [`PostedMessage::Duplicate`] and nothing written. The
    /// lease, the wait and the queue are left alone. [`StoreError::NotFound`] for no chat.
    async fn post_message(&self, op: &PostMessageOp<'_>) -> Result<PostedMessage>;

    /// Replaces a stored (not queued) message's parts and metadata, when its version is still
    /// `op.expected_version`, with `op.job`; else nothing changes ([`MessageUpdate::Moved`]).
    async fn update_message(&self, op: &UpdateMessageOp<'_>) -> Result<MessageUpdate>;

    /// The oldest messages waiting in `op.agent`'s inbox (of the chats bound to it), at most
    /// `op.limit`: each leaves the inbox and is marked Seen (`metadata.ack`) in the same
    /// transaction, so two readers never get the same message.
    async fn take_inbox(&self, op: &InboxOp<'_>) -> Result<Vec<StoredMessage>>;

    // ---- single roles (one process of all that share the database) -------------------------

    /// Takes the role `key` (e.g. the one Telegram poller of a bot, the one sync of a Matrix
    /// account) when no holder in any process on this database has it: `None` when one does.
    /// The role is released when the returned [`Held`] is dropped, and when this process dies
    /// (PostgreSQL: a session advisory lock, gone with its connection; SQLite: a lock on a file
    /// beside the database, gone with the process).
    async fn try_hold(&self, key: &str) -> Result<Option<Box<dyn Held>>>;

    // ---- groups (the processes sharing the database that do one thing together) ------------

    /// Renews `member`'s membership of `group` until `now + ttl_ms` and returns the group's live
    /// members (their membership lasting past `now`), sorted, in one step: how replicas learn who
    /// shares a piece of work (e.g. a Discord bot's gateway shards). A member that stops renewing
    /// drops out once its `ttl_ms` has passed; `ttl_ms <= 0` leaves the group at once (`member`
    /// is then not among those returned). Memberships long expired may be deleted.
    async fn members(
        &self,
        group: &str,
        member: &str,
        ttl_ms: Millis,
        now: Millis,
    ) -> Result<Vec<String>>;

    /// The changes any process makes on this database — chats changed, jobs scheduled — pushed
    /// as they commit (PostgreSQL: `LISTEN`/`NOTIFY`); `None` (the default) when the backend
    /// pushes nothing and other processes' changes are found by polling. A receiver that lags, or
    /// a [`Change::Resync`], means notices were lost: read what is watched again.
    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<Change>> {
        None
    }

    /// The database server's clock now, in milliseconds since the epoch, where processes on
    /// several hosts share this database (PostgreSQL); `None` (the default) where only this
    /// host's processes do (SQLite). Leases are compared against the time their writers pass in,
    /// so replicas read the time from one clock: the engine corrects this host's clock to it
    /// ([`crate::agent::DatabaseClock`]).
    async fn database_time(&self) -> Result<Option<Millis>> {
        Ok(None)
    }
}

/// A change [`Store::changes`] pushes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The chat's row changed (its version moved, or it was created): a message saved, a turn
    /// started or ended, a question answered, …
    Chat(ChatId),
    /// A job was scheduled (enqueued, retried, deferred or revived) to run at `run_at`: an idle
    /// worker claims it then ([`crate::agent::Engine::spawn_worker`]). Several jobs scheduled
    /// together may be announced once, with the earliest time; a worker reads the next due time
    /// from the store after each run, so the later ones are not missed.
    Job {
        /// When the (earliest) job announced is due.
        run_at: Millis,
    },
    /// Notices may have been lost (the listening connection was re-established): whatever is
    /// watched should be read again.
    Resync,
}

/// A role held through [`Store::try_hold`]: released when dropped.
#[async_trait]
pub trait Held: Send + Sync + std::fmt::Debug {
    /// Resolves when the hold was lost without being dropped (the connection that kept it
    /// broke): the role must stop at once, since another process may take it.
    async fn lost(&self);
}

/// A hold that is never lost (a store only this process uses).
#[derive(Debug, Default)]
pub struct HeldForever;

#[async_trait]
impl Held for HeldForever {
    async fn lost(&self) {
        std::future::pending::<()>().await;
    }
}

/// A shared store handle.
pub type DynStore = Arc<dyn Store>;
