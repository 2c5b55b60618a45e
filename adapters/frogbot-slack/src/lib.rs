//! Slack ↔ FrogBot: turns Slack interaction payloads and Events API messages into FrogBot
//! [`Interaction`](frogbot_model::Interaction)s and [`ThreadMessage`](frogbot_model::ThreadMessage)s,
//! and draws the agent's questions as Block Kit messages and modals (on slack-morphism 2.x).
//!
//! The crate is reusable alone: [`verify`] checks Slack request signatures, [`convert`] and
//! [`render`] are pure functions over slack-morphism's types, and [`questions`] ties them to
//! FrogBot's [`ChannelQuestions`](frogbot_model::ChannelQuestions) hooks over a thin
//! [`SlackApi`] client ([`client`]).
//!
//! With the feature `engine`, [`channel`] is the glue `frogbot serve` uses: the Events API and
//! interactivity endpoints (axum), Socket Mode, and the outbox posting replies in threads.
//!
//! What it must not do: without `engine` it depends on `frogbot-core`'s model only
//! (`default-features = false`); with it, on the engine but never on sqlx. No storage of its own. Everything a later hook needs travels in the question record
//! FrogBot passes in; this crate keeps no state of its own.

#[cfg(feature = "engine")]
pub mod channel;
pub mod client;
pub mod convert;
pub mod questions;
pub mod render;
pub mod verify;

pub use client::{BotIdentity, SlackApi, SlackWebApi};
pub use questions::SlackQuestions;

/// The platform name this adapter uses in `ChannelRef` / `ChannelIdentity`.
pub const PLATFORM: &str = "slack";

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The `X-Slack-Signature` header is missing or not `v0=<hex>`.
    #[error("malformed Slack signature header")]
    MalformedSignature,
    /// The `X-Slack-Request-Timestamp` header is missing or not a number.
    #[error("malformed Slack request timestamp")]
    MalformedTimestamp,
    /// The request timestamp is more than five minutes away from now.
    #[error("Slack request timestamp is outside the 5-minute window")]
    StaleTimestamp,
    /// The signature does not match the body.
    #[error("Slack signature does not match")]
    BadSignature,
    /// The signing secret is empty.
    #[error("the Slack signing secret is empty")]
    EmptySecret,
    /// A payload could not be read.
    #[error("invalid Slack payload: {0}")]
    Payload(String),
    /// An id FrogBot handed in is not one this adapter made (`channel:ts`).
    #[error("not a Slack id: {0:?}")]
    BadId(String),
    /// A question set does not fit Slack's limits.
    #[error("question does not fit Slack's limits: {0}")]
    TooLarge(String),
    /// A Slack Web API call failed.
    #[error("Slack API call {method} failed: {message}")]
    Api {
        /// The Web API method.
        method: &'static str,
        /// What went wrong.
        message: String,
    },
}
