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
//! `DiscordAdapter` (`frogbot_channel::Adapter`): the engine `Channel` (hooks, identity,
//! access, outbox), the HTTP interactions endpoint as routes, and the gateway client, with one
//! ordered queue per thread. `testing` adds [`testing`]: a fake Discord (HTTP API + gateway
//! websocket, enforcing Discord's limits) and the conformance harness over it.
//!
//! What it must not do: depend on sqlx, on `frogbot-core` (except through its own `engine`
//! feature), or on any storage; keep conversation state in memory. Everything a later hook needs
//! travels in the question record FrogBot passes in.
//!
//! Conventions: a FrogBot thread id is the Discord channel id of the thread (a snowflake as a
//! string), or `{dm}~{root}` for an agent's conversation with a person in their DM; a question
//! message id is the Discord message id.
//!
//! Agent conversations (issue 37): in a channel, an agent's conversation is a public thread
//! started on its first message (as before). A DM cannot have threads, so an agent that opens a
//! conversation with a person (`ask_thread` to a user) posts its first message in their DM and
//! gets the thread `{dm}~{root}` — never the DM channel itself, which stays the person's
//! conversation with the model. Everything posted there replies to `root`; a person's DM message
//! that replies to a message of the conversation goes to the agent (its inbox), every other DM
//! message to the model as before ([`channel::receive`] says how the replied-to message is
//! recognised).

//! Delivery guarantee (issue 18): a reply handed to `ChannelOutbox::deliver` is posted piece by
//! piece, each with a `nonce` made from its piece key and `enforce_nonce: true`; a retry after a
//! failure (a timeout, a dropped connection, a 5xx, a 429) posts the same nonces, and Discord
//! returns the message it created instead of creating another — **exactly once per piece** as long
//! as the retry comes within Discord's nonce memory ("the past few minutes"); a retry later than
//! that may repeat a piece whose first post's answer was lost. API failures worth retrying are
//! [`Error::Unavailable`] (a [`frogbot_model::Transient`] in the source chain; a `429` reaching the
//! adapter carries no wait, serenity keeps none). The bot has one serenity `Http` (one rate
//! limiter). Receiving: every gateway event is handled, or logged with its kind (debug); a
//! failure to hand one to the engine is logged as an error.
//!
//! Agent messages (issue 20): `ChannelOutbox::post_message` posts [`render::agent_message`]'s
//! messages (content, embeds, action rows of event buttons `fe:{block}:{button}`) under nonces
//! from their piece keys with `enforce_nonce`, as `deliver` does; `edit_posted` is
//! `PATCH /channels/{c}/messages/{m}` (Discord's edits notify no one; extra messages posted under
//! nonces, surplus ones deleted), `delete_posted` is `DELETE` (`Unknown Message` is done),
//! `pin_posted` is `PUT` / `DELETE /channels/{c}/pins/{m}` (serenity 0.12's route). A click on an
//! event button goes to `EngineHandle::event`, answered with a deferred update.
//!
//! Files out: `ChannelOutbox::deliver_files` uploads a message's files after its text, each as
//! the attachment of a message of its own (`POST /channels/{c}/messages` as `multipart/form-data`
//! streamed, [`client::DiscordApi::send_file`]) under the nonce of its key with
//! `enforce_nonce`, silent after the message's first piece; a file past the upload limit
//! (`channel::Config::max_upload_bytes`, Discord's 10 MiB for bots by default) or refused by
//! Discord as too large (`413`) is a text naming it. Deleting the message deletes them.
//!
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

pub use client::DiscordApi;
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
    /// The Discord API call failed in a way worth retrying: a `429` that reached the adapter, a
    /// `5xx`, a network failure, no answer in time. The
    /// [`Transient`](frogbot_model::Transient) in its source chain says whether the call may
    /// have been carried out (a timeout, a connection dropped after the request was sent).
    /// serenity's rate limiter waits out the `429`s it sees with a `Retry-After` itself; the one
    /// reaching the adapter (serenity's limiter is off behind a proxy) carries no wait, because
    /// serenity's error keeps neither the headers nor the body's `retry_after`: the caller backs
    /// off.
    #[error("Discord API (worth retrying): {source}")]
    Unavailable {
        /// Why, and whether it may be done.
        #[source]
        source: frogbot_model::Transient,
    },
    /// Discord refused a request the adapter sent itself (a message with a file, streamed): its
    /// HTTP status, Discord's JSON error code when it gave one, and its message.
    #[error("Discord API: {status} {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// Discord's error code (`40005` Request entity too large, …).
        code: Option<isize>,
        /// Discord's message.
        message: String,
    },
}

impl Error {
    /// The [`Transient`](frogbot_model::Transient) of an [`Error::Unavailable`].
    pub fn transient(&self) -> Option<&frogbot_model::Transient> {
        match self {
            Error::Unavailable { source } => Some(source),
            _ => None,
        }
    }

    /// The HTTP status of a refused call (`404`, `413`, …; `None` for a failure without an
    /// answer).
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Error::Discord(e) => match e.as_ref() {
                serenity::Error::Http(serenity::http::HttpError::UnsuccessfulRequest(r)) => {
                    Some(r.status_code.as_u16())
                }
                _ => None,
            },
            Error::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Discord's JSON error code of a refused call (`10008` Unknown Message, `160004` a thread
    /// exists already, …).
    pub fn discord_code(&self) -> Option<isize> {
        match self {
            Error::Discord(e) => match e.as_ref() {
                serenity::Error::Http(serenity::http::HttpError::UnsuccessfulRequest(r)) => {
                    Some(r.error.code)
                }
                _ => None,
            },
            Error::Refused { code, .. } => *code,
            _ => None,
        }
    }
}

impl From<serenity::Error> for Error {
    /// A `429`, a `5xx`, a network failure → [`Error::Unavailable`], maybe carried out as
    /// frogbot-channel's one [`Failure`](frogbot_channel::retry::Failure) classification says (a
    /// `502`/`504`, a failure after the connection was made); anything else → [`Error::Discord`].
    fn from(e: serenity::Error) -> Self {
        use frogbot_channel::retry::Failure;
        use serenity::http::HttpError;
        let failure = match &e {
            serenity::Error::Http(HttpError::UnsuccessfulRequest(r)) => {
                Failure::status(r.status_code.as_u16())
            }
            serenity::Error::Http(HttpError::Request(r)) if r.is_connect() => Failure::NotSent,
            serenity::Error::Http(HttpError::Request(_)) | serenity::Error::Io(_) => {
                Failure::MaybeDone
            }
            _ => return Error::Discord(Box::new(e)),
        };
        if !failure.retryable() {
            return Error::Discord(Box::new(e));
        }
        let t = frogbot_model::Transient::from_source(format!("Discord API: {e}"), e);
        Error::Unavailable {
            source: failure.mark(t),
        }
    }
}
