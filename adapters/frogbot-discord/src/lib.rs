//! Discord ↔ FrogBot: Discord interactions in, component questions out, on serenity 0.12.
//!
//! What it is for: turning Discord gateway events and interactions-endpoint requests (component
//! clicks, modal submissions, thread messages) into FrogBot
//! [`Interaction`](frogbot_model::Interaction)s and verifying endpoint requests (Ed25519)
//! ([`convert`]), drawing the question tool's questions as buttons, string selects and modals
//! ([`render`]) with control ids carrying the revision ([`ids`]), and tying both to Discord's API
//! ([`client::DiscordApi`], implemented for serenity's `Http`) as a
//! [`ChannelQuestions`](frogbot_model::ChannelQuestions) implementation ([`DiscordQuestions`]).
//! `ids`, `convert` and `render` are pure and usable alone in any serenity bot (see
//! `examples/discord-reuse`).
//!
//! Features: `engine` adds [`channel`] — `channel::connect(config)` gives a
//! `DiscordAdapter` (`frogbot_core::agent::Adapter`): the engine `Channel` (hooks, identity,
//! access, outbox), the HTTP interactions endpoint as routes, and the gateway client, with one
//! ordered queue per thread. `testing` adds [`testing`]: a fake Discord (HTTP API + gateway
//! websocket, enforcing Discord's limits) and the conformance harness over it.
//!
//! What it must not do: depend on sqlx, on `frogbot-core` (except through its own `engine`
//! feature), or on any storage; keep conversation state in memory. Everything a later hook needs
//! travels in the question record FrogBot passes in.
//!
//! Conventions: a FrogBot thread id is the Discord channel id of the thread (a snowflake as a
//! string); a question message id is the Discord message id.

#[cfg(feature = "engine")]
pub mod channel;
pub mod client;
pub mod convert;
pub mod format;
pub mod ids;
pub mod questions;
pub mod render;
#[cfg(feature = "testing")]
pub mod testing;

pub use client::{DiscordApi, RecordingDiscord};
pub use questions::{DiscordQuestions, acknowledge, deferred_update};

/// The platform name of Discord chats.
pub const PLATFORM: &str = "discord";

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
    /// or more than [`convert::MAX_SKEW_SECS`] from now (a replay; answer 401).
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
