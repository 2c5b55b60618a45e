//! The store: one trait, [`Store`], that keeps everything FrogBot must not lose — chats, messages,
//! the queue, turn leases, question records and their message links, and durable jobs. It is made
//! of parts, one sub-trait and one file each (the conformance suite's and the backends' files bear
//! the same names): `chats.rs` ([`ChatStore`]), `turns.rs` ([`TurnStore`]), `questions.rs`
//! ([`QuestionStore`]), `jobs.rs` ([`JobStore`]), `agent.rs` ([`AgentStore`]), `operations.rs`
//! ([`OperationsStore`]), `roles.rs` ([`RoleStore`]) and `files.rs` ([`FileStore`]); `types.rs` holds the values they take and
//! the rules every backend shares, `layer.rs` the wrappers' delegation.
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
//! [`OperationsStore::database_time`], which reads the database server's.
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

mod agent;
mod chats;
mod error;
mod files;
mod jobs;
mod layer;
mod operations;
mod questions;
mod roles;
mod turns;
mod types;
pub use agent::AgentStore;
pub use chats::ChatStore;
pub use error::{Item, Result, StoreError};
pub use files::{FILE_CHUNK_BYTES, FileRow, FileStore, FinishFile, NewFile};
pub use jobs::JobStore;
pub use layer::{Call, StoreLayer};
pub use operations::OperationsStore;
pub use questions::QuestionStore;
pub use roles::{Held, HeldForever, MEMBERS_SWEPT_AFTER_MS, MembersOp, RoleStore};
pub use turns::TurnStore;
pub use types::*;

use std::sync::Arc;

use crate::model::{ChatId, Millis};

/// How long an unanswered question record lives after its last change: 30 days.
pub const QUESTION_TTL_MS: Millis = 30 * 24 * 60 * 60 * 1000;
/// How long a question record is kept after its outcome is recorded: 24 hours.
pub const ANSWERED_TTL_MS: Millis = 24 * 60 * 60 * 1000;

/// The trait [`Store`] and its blanket impl, from one list of its parts.
macro_rules! store_of_parts {
    ($(#[$doc:meta])* $($part:ident),+) => {
        $(#[$doc])*
        pub trait Store: $($part +)+ std::fmt::Debug + 'static {}

        impl<T> Store for T where T: $($part +)+ std::fmt::Debug + 'static {}
    };
}

store_of_parts! {
    /// Everything FrogBot keeps, in parts: [`ChatStore`], [`TurnStore`], [`QuestionStore`],
    /// [`JobStore`], [`AgentStore`], [`OperationsStore`], [`RoleStore`] and [`FileStore`] (one file
    /// each, named as the conformance suite's). A type that implements every part is a `Store` (the
    /// blanket impl below); a caller holding a [`DynStore`] calls any part's methods on it, and a
    /// caller holding a concrete store imports the parts with [`prelude`]. Implementations must be
    /// safe to share between tasks and between processes on one database: each method is atomic on
    /// its own, and a method that returns an error has changed nothing.
    ChatStore, TurnStore, QuestionStore, JobStore, AgentStore, OperationsStore, RoleStore, FileStore
}

/// Every part of the store, to call a concrete store's methods: `use
/// frogbot_core::store::prelude::*`.
pub mod prelude {
    pub use super::{
        AgentStore, ChatStore, FileStore, JobStore, OperationsStore, QuestionStore, RoleStore,
        Store, TurnStore,
    };
}

/// A change [`JobStore::changes`] pushes.
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

/// A shared store handle.
pub type DynStore = Arc<dyn Store>;
