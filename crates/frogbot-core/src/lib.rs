//! `frogbot-core`: FrogBot's engines — what runs turns and questions over a store.
//!
//! What it is for:
//! - [`model`]: a re-export of `frogbot-model` (chats, messages, questions, interactions, the hook
//!   traits), so engine users need one import path.
//! - [`store`]: the one [`store::Store`] trait that keeps chats, messages, the queue, turn leases,
//!   question records and durable jobs, shaped by the engine's operations (one transaction each),
//!   made of one sub-trait per part ([`store::ChatStore`], [`store::TurnStore`], …).
//!   The backends are crates of their own: `frogbot-sqlite` (rusqlite, a writer thread that
//!   group-commits) and `frogbot-postgres` (sqlx); the conformance suite every backend runs is
//!   `frogbot-store-conformance`, a test-only crate.
//! - [`agent`]: the turn engine, the question engine, and channels; [`agent::Engine`] implements
//!   frogbot-channel's `ChannelEngine`, the one entry every adapter delivers into.
//! - [`metrics`]: the engine's metric names (with their labels) and the helpers that record them
//!   through the `metrics` facade — the engine, a metered store wrapper and the adapters' client
//!   funnels call them; the binary chooses the exporter (this crate installs none).
//!
//! What it must not do: name any platform type (Slack, Discord, Telegram, Matrix belong to the
//! adapter crates), depend on a database driver, or let an adapter reach the store (the engine's
//! methods are the adapters' only way in). Adapters depend on `frogbot-model` alone, and on this
//! crate only under their `engine` feature.

pub mod agent;
pub mod error;
pub mod metrics;
pub mod policy;
pub mod store;

pub use error::{BoxError, Error, Item, Result, StaleReason};
pub use frogbot_model as model;
pub use store::StoreError;
