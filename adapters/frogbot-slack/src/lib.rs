//! Slack ↔ FrogBot: turns Slack interaction payloads and Events API messages into FrogBot
//! [`Interaction`](frogbot_model::Interaction)s and [`ThreadMessage`](frogbot_model::ThreadMessage)s,
//! and draws the agent's questions as Block Kit messages and modals (on slack-morphism 2.x).
//!
//! The modules, the same in every FrogBot adapter:
//! - [`ids`]: the control id codec (`fb1:{kind}:{question}:{option}:{revision}`) and Slack's
//!   `channel:ts` message / thread ids;
//! - [`convert`]: pure — request signature checks, interaction payloads and Events API messages →
//!   FrogBot's model, mentions, the bot's own messages;
//! - [`render`]: pure — a question set → Block Kit blocks and the modal, within Slack's limits
//!   (every input kind: choice, text, number, toggle, confirm; the expiry line); an agent message
//!   (title, text, table / progress / image / code / fields / app / unknown blocks, event
//!   buttons) → Block Kit messages ([`render::agent_message`]);
//! - [`format`](mod@format): pure — the model's Markdown → Slack `mrkdwn`, split into messages;
//! - [`client`]: the [`SlackApi`] trait the hooks call, [`SlackWebApi`] over slack-morphism's
//!   client (a recording one for unit tests is `testing::RecordingSlack`, feature `testing`);
//! - [`questions`]: [`SlackQuestions`], FrogBot's
//!   [`ChannelQuestions`](frogbot_model::ChannelQuestions) hooks;
//! - [`channel`] (feature `engine`): `channel::connect(Config)` → [`channel::SlackAdapter`],
//!   FrogBot's `Adapter`: the engine `Channel` (hooks, identity, access, outbox), the Events API
//!   and interactivity routes (HTTP mode) or Socket Mode, per-thread ordering of deliveries;
//! - `testing` (feature `testing`): a fake of Slack (Web API with its limits, Socket Mode, signed
//!   HTTP deliveries) and the `ChannelQuestions` conformance harness over it.
//!
//! The crate is reusable alone: without `engine` it needs only `frogbot-model` (no database; tokio
//! only for the Web API client's timeouts and retry waits, slack-morphism's connector runs on it
//! anyway); [`slack_morphism`] is re-exported for the types [`render`] and [`convert`] speak.
//!
//! What it must not do: depend on `frogbot-core` outside the `engine` feature, or on a database
//! anywhere; keep state of its own — everything a later hook needs travels in the question record
//! FrogBot passes in, and chats, questions and answers are the engine's, in its store.

//! Agent conversations (issue 37): an agent that opens a conversation with a person (their DM,
//! `conversations.open`) or in a channel always gets a thread it started — `ask_thread` posts its
//! first message as a new root (idempotent on the key through the root's message metadata) and
//! the conversation is `channel:root_ts`. A person's message in that thread goes to the agent (its
//! inbox); every other message in the DM or channel (a top-level one, which starts a thread of its
//! own, or one in another thread) goes to the model as before, so an agent never takes over a
//! person's conversation with the model.
//!
//! Delivery guarantee (issue 18): a reply handed to `ChannelOutbox::deliver` is posted piece by
//! piece, each carrying message metadata `{"event_type": "frogbot_delivery", "event_payload":
//! {"key": <piece key>}}`; a retry first reads the thread (`conversations.replies`,
//! `include_all_metadata=true`) and posts only the pieces not there — **exactly once per piece**,
//! provided the piece an earlier attempt posted is readable in the thread by the time of the
//! retry (Slack's history is read right after a failure; a message Slack accepted but does not
//! list yet could be posted twice). Web API failures worth retrying are [`Error::Unavailable`]
//! (a [`frogbot_model::Transient`] in the source chain, with Slack's `Retry-After` on a 429;
//! `maybe_done` after a timeout or a dropped connection); the client also retries by itself a
//! few times ([`RetryPolicy`]). Receiving sheds load past
//! [`channel::Config::max_pending`](crate::channel::Config) deliveries (`503`, Slack retries)
//! rather than miss the 3-second acknowledgement.
//!
//! Files out: a message's files (`ChannelOutbox::deliver_files`) are uploaded after its text with
//! Slack's external upload (`files.getUploadURLExternal`, the bytes `POST`ed to its
//! `upload_url` — with the bot token only when that is a Slack host or the configured API's —,
//! `files.completeUploadExternal` into the reply's thread), one message per file; the app needs
//! `files:write` and `files:read`. Their ids are `file:{file id}`, deleted with `files.delete`.
//! A file over 1 GB (`channel::outbox::MAX_FILE_BYTES`, feature `engine`) or
//! an empty one is not uploaded: a text saying so takes its place. A file's message carries no
//! message metadata, so its idempotency is this process's memory (a retry finds an earlier
//! share in the thread, or deletes the unshared upload before uploading anew): exactly once
//! within a process, **at least once** across processes.
//!
//! Agent messages (issue 20): `ChannelOutbox::post_message` posts [`render::agent_message`]'s
//! messages with the same metadata keys and the same retry rule (exactly once per Slack message);
//! `edit_posted` is `chat.update` in place (no notification; extra messages posted under
//! `frogbot_edit` keys, surplus ones `chat.delete`d), `delete_posted` is `chat.delete`
//! (`message_not_found` is done), `pin_posted` is `pins.add` / `pins.remove`. A click on an
//! event button (`fb1:e:{block}:{button}`) goes to `EngineHandle::event`.
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

pub use client::{BotIdentity, HistoryMessage, RetryPolicy, SlackApi, SlackWebApi};
pub use questions::SlackQuestions;
pub use slack_morphism;

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
    /// An ask's target is not a Slack user or channel id (the reason, one line).
    #[error("{0}")]
    BadTarget(String),
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
    /// A Slack Web API call failed in a way worth retrying: a 429 (with Slack's `Retry-After`),
    /// a 5xx or Slack's `internal_error` / `fatal_error` / `service_unavailable` / `ratelimited`,
    /// a network failure, no answer in time. The [`Transient`](frogbot_model::Transient) in its
    /// source chain says how long Slack asked to wait and whether the call may have been carried
    /// out (a timeout, a connection reset after the request was sent).
    #[error("Slack API call {method} failed (worth retrying): {source}")]
    Unavailable {
        /// The Web API method.
        method: &'static str,
        /// Why, how long to wait, whether it may be done.
        #[source]
        source: frogbot_model::Transient,
    },
}

impl Error {
    /// The [`Transient`](frogbot_model::Transient) of an [`Error::Unavailable`].
    pub fn transient(&self) -> Option<&frogbot_model::Transient> {
        match self {
            Error::Unavailable { source, .. } => Some(source),
            _ => None,
        }
    }
}
