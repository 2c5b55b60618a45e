//! `frogbot-core`: the platform-neutral heart of FrogBot.
//!
//! What it is for:
//! - [`model`]: chats, messages and their parts, users and channel identities, turn state, queued
//!   messages and delivery, the `question` tool's input and output, question records, the three
//!   interaction kinds, parse results, outcomes, and the [`model::ChannelQuestions`] hook trait that
//!   every channel adapter implements. The model is always built and needs neither a database nor
//!   an async runtime, so an adapter crate depends on `frogbot-core` with `default-features = false`.
//! - [`store`] (feature `engine`): the one [`store::Store`] trait that keeps chats, messages, the
//!   queue, turn leases, question records and durable jobs, shaped by the engine's operations (one
//!   transaction each), and its conformance suite (feature `testing`). The backends are crates of
//!   their own: `frogbot-sqlite` (rusqlite, a writer thread that group-commits) and
//!   `frogbot-postgres` (sqlx).
//! - [`agent`] (feature `engine`): the turn engine, the question engine and channels.
//!
//! What it must not do: name any platform type (Slack, Discord, Telegram, Matrix belong to the
//! adapter crates), depend on a database driver, or let an adapter reach the store (the engine's
//! methods are the adapters' only way in).

#[cfg(feature = "engine")]
pub mod agent;
pub mod error;
pub mod model;
#[cfg(feature = "engine")]
pub mod store;

pub use error::{BoxError, Error, Result};
