//! `frogbot-core`: the platform-neutral heart of FrogBot.
//!
//! What it is for:
//! - [`model`]: chats, messages and their parts, users and channel identities, turn state, queued
//!   messages and delivery, the `question` tool's input and output, question records, the three
//!   interaction kinds, parse results, outcomes, and the [`model::ChannelQuestions`] hook trait that
//!   every channel adapter implements. The model is always built and needs neither a database nor
//!   an async runtime, so an adapter crate depends on `frogbot-core` with `default-features = false`.
//! - [`store`] (feature `engine`): the one [`store::Store`] trait that keeps chats, messages, the
//!   queue, turn leases, question records and durable jobs, with its SQLite (feature `sqlite`) and
//!   PostgreSQL (feature `postgres`) implementations over sqlx.
//!
//! What it must not do: name any platform type (Slack, Discord, Telegram, Matrix belong to the
//! adapter crates), or pull sqlx into a build that did not ask for a store backend.

#[cfg(feature = "engine")]
pub mod agent;
pub mod error;
pub mod model;
#[cfg(feature = "engine")]
pub mod store;

pub use error::{BoxError, Error, Result};
