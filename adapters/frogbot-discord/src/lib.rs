//! Discord ↔ FrogBot: Discord interactions in, component questions out, on serenity 0.12.
//!
//! What it is for: turning Discord gateway events (component clicks, modal submissions, thread
//! messages) into FrogBot [`Interaction`](frogbot_model::Interaction)s ([`convert`]), drawing
//! the question tool's questions as buttons, string selects and modals ([`render`]), and tying both
//! to serenity's `Http` as a [`ChannelQuestions`](frogbot_model::ChannelQuestions)
//! implementation ([`DiscordQuestions`]), and verifying requests to an HTTP interactions endpoint
//! ([`endpoint`], Ed25519). `convert` and `render` are pure and usable alone in any
//! serenity bot (see `examples/discord-reuse`). With the `engine` feature, `channel` connects a
//! serenity gateway `Client` (and optionally the interactions endpoint) to FrogBot's engine; with
//! `fake`, `fake` is a local fake Discord (HTTP API + gateway) for tests and benchmarks.
//!
//! What it must not do: depend on sqlx, on `frogbot-core`'s `engine` feature (except through its
//! own `engine` feature), or on any storage.
//! Everything a later hook needs travels in the question record FrogBot passes in.
//!
//! Conventions: a FrogBot thread id is the Discord channel id of the thread (a snowflake as a
//! string); a question message id is the Discord message id.

#[cfg(feature = "engine")]
pub mod channel;
pub mod convert;
pub mod endpoint;
#[cfg(feature = "fake")]
pub mod fake;
pub mod questions;
pub mod render;

pub use questions::{DiscordQuestions, acknowledge, deferred_update};

/// What can go wrong in this adapter.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A payload did not parse (malformed JSON, or not the Discord shape expected).
    #[error("malformed Discord payload: {0}")]
    Malformed(String),
    /// A gateway dispatch or interaction kind this adapter does not convert.
    #[error("unsupported Discord event: {0}")]
    Unsupported(String),
    /// An id that should be a Discord snowflake is not one.
    #[error("not a Discord id: {0:?}")]
    BadId(String),
    /// A custom id is not one of this adapter's question controls.
    #[error("not a question control: {0:?}")]
    NotAControl(String),
    /// An interactions-endpoint request whose Ed25519 signature does not verify (answer 401).
    #[error("invalid request signature")]
    BadSignature,
    /// An interactions-endpoint request whose `X-Signature-Timestamp` is missing, not a number,
    /// or more than [`endpoint::MAX_SKEW_SECS`] from now (a replay; answer 401).
    #[error("request timestamp outside the accepted window")]
    StaleTimestamp,
    /// The Discord API call failed.
    #[error("Discord API: {0}")]
    Discord(Box<serenity::Error>),
}

impl From<serenity::Error> for Error {
    fn from(e: serenity::Error) -> Self {
        Error::Discord(Box::new(e))
    }
}
