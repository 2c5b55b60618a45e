//! `frogbot-matrix`: the Matrix adapter for FrogBot, on matrix-sdk 0.18 — poll responses,
//! reactions and thread replies converted to FrogBot interactions, questions drawn as native polls
//! (MSC3381) with a numbered plain-text fallback.
//!
//! Shape (as every adapter): [`ids`] (message/thread ids, poll answer ids carrying the revision),
//! [`convert`] (pure: Matrix events → FrogBot's model), [`render`] (pure: a question → poll /
//! message contents), [`client`] (the thin send layer [`MatrixApi`], implemented for matrix-sdk's
//! `Client`; a recording one for unit tests is `testing::RecordingMatrix`), [`questions`] (the
//! `ChannelQuestions` hooks), behind the `engine` feature `channel` (`channel::connect(config)` →
//! an adapter: login, session restore, auto-join, the sync loop into FrogBot's engine, the
//! outbox), and behind the `testing` feature `testing` (a fake homeserver, the conformance
//! harness over it, and the real-Synapse test support).
//!
//! Agent messages ([`render::agent_message`]): the title, the Markdown text and the blocks as
//! `m.text` messages in the thread (`body` plain text / Markdown, `formatted_body` HTML: tables as
//! `<table>`, code as `<pre><code class="language-x">`, fields as `<strong>key:</strong> value`,
//! progress as a text bar, an app as its name with "open it in the web chat", an unknown type as
//! the "update FrogBot" placeholder), packed within the event limit; each image fetched with
//! `frogbot_net`'s guarded client (public addresses only unless `channel::Config::image_policy`
//! says otherwise, at most 8 MiB, 20 s) and uploaded to the media repository as an `m.image` (a
//! link saying it could not be shown otherwise: a refused or failed fetch is no lost message). Event buttons are reactions the bot places, one annotation key per button
//! (`Retry #4.0`: [`ids::event_id`]); a person's reaction with that key is the click. Edits are
//! `m.replace`, deletions redactions, pins a read-modify-write of `m.room.pinned_events`.
//!
//! Ids: a message id is `room_id|event_id`; a thread id is `room_id|root_event_id` (the bot always
//! answers in an `m.thread` on the message that talked to it, so one thread is one FrogBot chat).
//!
//! Agent conversations (issue 37): an agent that opens a conversation with a person (their DM
//! room) or in a room always gets a thread it started — `ask_thread` posts its first message as a
//! new root event and the conversation is `room|root`. A person's message in that thread goes to
//! the agent (its inbox); every other message in the room (a top-level one, which starts a
//! thread of its own, or one in another thread) goes to the model as before, so an agent never
//! takes over a person's conversation with the model.
//!
//! Delivery guarantee: exactly once for replies. Each piece of a reply is sent under a
//! transaction id made from its delivery key ([`channel::outbox::txn_id`]), so the homeserver
//! answers a retry (matrix-sdk's own, bounded by [`client::request_config`], or the engine's, in
//! this process or after a restart on the same device) with the event it already made; this holds
//! while the homeserver remembers the transaction (Synapse keeps it for the device's session).
//! `M_LIMIT_EXCEEDED` (with `retry_after_ms`), a `5xx` and a network failure come back as a
//! [`Transient`](frogbot_model::Transient) ([`Error::Unavailable`]). Receiving: a message in a
//! room whose members cannot be listed is not dropped (see [`channel::receive`]).
//!
//! What it must not do: depend on sqlx of ours or FrogBot's store (matrix-sdk's own SQLite store is
//! fine), or decide anything the question engine decides (staleness, identity, first answer wins).

// matrix-sdk's sync futures are deep: proving them `Send` needs a higher limit.
#![recursion_limit = "256"]

pub mod client;
pub mod convert;
pub mod format;
pub mod ids;
pub mod questions;
pub mod render;

#[cfg(feature = "engine")]
pub mod channel;
#[cfg(feature = "testing")]
pub mod testing;

pub use client::MatrixApi;
pub use questions::MatrixQuestions;

/// The platform name of this adapter.
pub const PLATFORM: &str = "matrix";

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An event could not be read.
    #[error("invalid Matrix event: {0}")]
    Event(String),
    /// An id FrogBot handed in is not one this adapter made (`room_id|event_id`).
    #[error("not a Matrix message or thread id: {0:?}")]
    BadId(String),
    /// The bot is not in the room.
    #[error("unknown Matrix room {0}")]
    UnknownRoom(String),
    /// No such user on their homeserver.
    #[error("unknown Matrix user {0}")]
    UnknownUser(String),
    /// A question cannot be drawn as a poll (e.g. more than 20 options).
    #[error("cannot render the question: {0}")]
    Render(String),
    /// A client-server API call failed.
    #[error("Matrix call {call} failed: {message}")]
    Api {
        /// What was called.
        call: &'static str,
        /// What went wrong.
        message: String,
    },
    /// A client-server API call failed in a way worth retrying (a network failure, a `5xx`,
    /// `M_LIMIT_EXCEEDED`): its source is the [`Transient`](frogbot_model::Transient) saying how
    /// (the server's `retry_after_ms`, whether the request may have been carried out).
    #[error("Matrix call {call} failed: {source}")]
    Unavailable {
        /// What was called.
        call: &'static str,
        /// Why, and when to try again.
        #[source]
        source: frogbot_model::Transient,
    },
    /// The homeserver refused an upload as larger than its limit (`M_TOO_LARGE`).
    #[error("the homeserver refused the upload as too large")]
    TooLarge,
    /// Logging in or restoring the session failed.
    #[error("Matrix login failed: {0}")]
    Login(String),
    /// Another process (or adapter) on this host has the store folder open: one store is one
    /// device of the account, which two clients must not share.
    #[error("the Matrix store {} is in use by another process", .0.display())]
    StoreInUse(std::path::PathBuf),
}

impl Error {
    /// [`Error::Api`]: the call `call` failed with `message`.
    pub(crate) fn api(call: &'static str, message: impl std::fmt::Display) -> Self {
        Error::Api {
            call,
            message: message.to_string(),
        }
    }
}
