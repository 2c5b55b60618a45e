//! Telegram ↔ FrogBot: turns Bot API updates (callback queries, messages) into FrogBot
//! [`Interaction`](frogbot_model::Interaction)s and draws the agent's questions as messages
//! with inline keyboards (on teloxide 0.17, lean: rustls, no storage features).
//!
//! What it is for: a Telegram bot that asks FrogBot's questions. The crate is reusable alone:
//! [`ids`], [`convert`] and [`render`] are pure functions over teloxide's types, and [`questions`]
//! ties them to FrogBot's [`ChannelQuestions`](frogbot_model::ChannelQuestions) hooks over a thin
//! [`TelegramApi`] client ([`client`]), implemented for teloxide's [`Bot`](teloxide::Bot). With the
//! `engine` feature, [`channel`] receives updates (long polling or webhook) into
//! FrogBot's engine and posts its replies: that is what `frogbot serve` runs for
//! `[channels.telegram]`. With the `testing` feature, `testing` is a fake Telegram Bot API for
//! tests.
//!
//! Agent messages ([`render::agent_message`]): the title in `<b>`, the Markdown text, then the
//! blocks in Telegram's HTML — tables as aligned `<pre>` text, progress as a text bar, code as
//! `<pre><code class="language-x">`, fields as `<b>key:</b> value` lines, an app as its name with
//! "open it in the web chat", an unknown type as the "update FrogBot" placeholder — packed into
//! messages of at most 4,096 characters, and each image as a `sendPhoto` of its URL with the alt
//! as its caption (at most 1,024). A block's event buttons are a row of the inline keyboard of the
//! message its drawing ends in, with callback data `e{block}:{button}` ([`ids::event_id`]).
//! Edits are `editMessageText` / `editMessageMedia` in place (no notification), deletions
//! `deleteMessage`, pins `pinChatMessage` (`disable_notification`) / `unpinChatMessage`.
//!
//! Files a message carries (the engine's `OutFile`s, [`channel::outbox`]): each its own message
//! after the text, in the same chat, topic and reply, silent unless it is the message's first —
//! `sendPhoto` for a picture of at most 10 MB, `sendDocument` (file name and media type kept)
//! for anything else or a picture Telegram refuses as a photo, uploaded as multipart/form-data
//! with the bytes streamed ([`TelegramApi::send_file`]); a file over the Bot API's 50 MB for
//! bots ([`client::MAX_UPLOAD`]) is named in a text instead. At least once, like replies.
//!
//! Ids: a message is `chat_id:message_id`; a thread is `chat_id`, or `chat_id:thread_id` for a
//! forum topic, or `chat_id~root_id` for an agent's conversation with a person.
//!
//! Agent conversations (issue 37): a private chat has no threads, so an agent that opens a
//! conversation with a person (`ask_thread` to a user) gets a thread of its own,
//! `{chat}~{root}`, `root` being its first message in the private chat; everything posted there
//! replies to `root`. The private chat's own thread `{chat}` stays the person's conversation with
//! the model: a person's message that replies to a message of an agent conversation goes to that
//! conversation (the agent's inbox), every other message to the model, as before
//! ([`channel::receive`] says how the replied-to message is recognised, and what a restart
//! forgets). Groups and forum topics are unchanged. Callback data is a short token `q{revision}:{question}:{option}` (never a label), so
//! it always fits Telegram's 64 bytes.
//!
//! Delivery guarantees: at least once, both ways. A reply is posted piece by piece with no
//! idempotency key (the Bot API has none): a piece whose answer was lost after Telegram posted it
//! (a reset, a timeout) is posted again when the engine retries the delivery; within one process
//! the outbox remembers the pieces it posted under each delivery key, so only the missing ones are
//! posted again ([`channel::outbox`]). Every call reads a `429`'s `retry_after`, a `5xx` and a
//! network failure as a [`Transient`](frogbot_model::Transient) ([`client`]); the calls the
//! adapter retries by itself wait at most 60 s. Updates are confirmed to Telegram (the polling
//! offset, the webhook's `200`) only after they were handed to the engine, which drops a message
//! it has stored already ([`channel::receive`]).
//!
//! What it must not do: outside `channel`, depend on anything but `frogbot-model` (no sqlx, no
//! engine, no storage). Everything a later hook needs travels in the question record FrogBot passes
//! in; this crate keeps no state of its own.

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

pub use client::{SentMessage, TelegramApi};
pub use questions::TelegramQuestions;

/// The platform name this adapter uses in `ChannelRef` / `ChannelIdentity`.
pub const PLATFORM: &str = "telegram";

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An update could not be read.
    #[error("invalid Telegram update: {0}")]
    Payload(String),
    /// An id FrogBot handed in is not one this adapter made (`chat_id[:n]`).
    #[error("not a Telegram id: {0:?}")]
    BadId(String),
    /// The channel's configuration is unusable.
    #[error("invalid Telegram channel configuration: {0}")]
    Config(String),
    /// A Bot API call failed.
    #[error("Telegram API call {method} failed: {message}")]
    Api {
        /// The Bot API method.
        method: &'static str,
        /// What went wrong.
        message: String,
    },
    /// A Bot API call failed in a way worth retrying (a network failure, a `5xx`, a `429`): its
    /// source is the [`Transient`](frogbot_model::Transient) saying how (Telegram's
    /// `retry_after`, whether the request may have been carried out).
    #[error("Telegram API call {method} failed: {source}")]
    Unavailable {
        /// The Bot API method.
        method: &'static str,
        /// Why, and when to try again.
        #[source]
        source: frogbot_model::Transient,
    },
}
