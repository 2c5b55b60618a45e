//! What the engine's handles ([`Engine::chats`](super::Engine::chats), `questions()`,
//! `channels()`, `agents()`, `ops()`) take and return, named for their callers outside this crate
//! (serve's HTTP API and operator commands): a chat's row, its messages and the changes since a
//! version, question records, jobs, a queued message's edit and its outcome, what an ask's chat
//! is created as, the change notices the store pushes, the backlog and what a purge would remove.
//!
//! They are plain data — no store behaviour comes with them — defined with the store that writes
//! them and re-exported here, so a caller reads them from the engine's side and never names
//! `frogbot_core::store` (scripts/check-invariants.sh, rule 5: in serve only `lib.rs` and
//! `main.rs`, which open the store).

pub use crate::store::{
    Backlog, Change, ChatChanges, ChatFilter, ChatRow, Held, Job, NewChat, Purgeable, QuestionRow,
    QueuedChange, QueuedEdit, StoredMessage,
};
