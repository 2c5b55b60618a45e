//! FrogBot's channel runtime: what every platform adapter shares, so that an adapter holds only
//! what its platform needs, and depends on this crate and `frogbot-model` alone.
//!
//! - [`engine`]: the engine as an adapter sees it — [`ChannelEngine::receive`], one entry for
//!   every kind of thing a platform delivers ([`Incoming`]), through a cloneable
//!   [`EngineHandle`]; FrogBot's engine (`frogbot-core`) implements it.
//! - [`outbox`]: what an adapter gives the engine ([`Channel`]: question hooks, identity, access
//!   check, and the [`ChannelOutbox`] that posts replies, streams, acks, edits and pins).
//! - [`delivery`]: the one delivery loop every outbox runs — a message's pieces posted under
//!   stable keys (nothing twice on a retry), edited in place, deleted — over the platform's
//!   [`delivery::PostPieces`].
//! - [`markdown`]: one walker over pulldown-cmark's events with a [`markdown::Dialect`] per
//!   platform (Slack's `mrkdwn`, Telegram's HTML…), and [`markdown::fit`], the loop that cuts a
//!   reply into messages within a platform's limit.
//! - [`ThreadExecutor`]: one ordered queue per thread, which every adapter's receive path hands the
//!   platform's deliveries to (a thread's events in order, threads in parallel).
//! - [`questions`]: what the adapters' question hooks share beyond drawing ([`questions::settle_each`]).
//! - [`render`] and [`receive`]: layout rules and call/delivery rules the adapters' `render.rs`
//!   and `receive.rs`/`client.rs` share.
//! - [`retry`]: the one retry policy ([`RetryPolicy`], on backon) of every platform and model call.
//! - [`metrics`]: the platform-call metrics every adapter's client records.
//! - `Adapter` (feature `adapter`): the one shape a host (`frogbot serve`) drives any adapter by.
//!
//! What this crate must not do: name a platform SDK type (slack-morphism, serenity, teloxide,
//! matrix-sdk), hold a platform-specific rule beyond a dialect's own escaping and marks (the
//! dialects themselves live in the adapters), or talk to a store.
//!
//! A dialect and the two entry points, [`markdown::render`] and [`markdown::fit`]: a made-up
//! platform that writes `*bold*`, `_italic_` and `~strike~`, links as `<url|text>`, and allows
//! 40 characters a message.
//!
//! ```
//! use frogbot_channel::markdown::{self, Dialect, Fit, Quote, Style};
//!
//! struct Chat;
//!
//! impl Dialect for Chat {
//!     const QUOTE: Quote = Quote::Lines { prefix: "> ", blank: ">" };
//!     const EAGER: bool = true;
//!     const CODE_IN_MARKS: bool = true;
//!     const BARE_AUTOLINKS: bool = false;
//!
//!     fn escape(&self, text: &str) -> String {
//!         markdown::escape(text)
//!     }
//!     fn linkable(&self, url: &str) -> bool {
//!         url.starts_with("https://")
//!     }
//!     fn mark(&self, style: Style) -> (&'static str, &'static str) {
//!         match style {
//!             Style::Strong => ("*", "*"),
//!             Style::Emphasis => ("_", "_"),
//!             Style::Strikethrough => ("~", "~"),
//!         }
//!     }
//!     fn link(&self, url: &str, _bare: bool) -> (String, String) {
//!         (format!("<{url}|"), ">".into())
//!     }
//!     fn code(&self, code: &str) -> String {
//!         format!("`{}`", markdown::escape(code))
//!     }
//!     fn code_block(&self, _info: Option<&str>, code: &str) -> String {
//!         format!("```\n{}\n```", markdown::escape(code))
//!     }
//! }
//!
//! let text = "# Ponds\n\n**Lily** & *Mill*, see [the map](https://example.org).\n\n- one\n- two";
//! assert_eq!(
//!     markdown::render(&Chat, text),
//!     "*Ponds*\n\n*Lily* &amp; _Mill_, see <https://example.org|the map>.\n\n• one\n• two"
//! );
//!
//! // A long reply, cut into messages of at most 40 characters as the platform shows them.
//! let long = "A frog sat on a lily pad. ".repeat(6);
//! let messages = markdown::fit(&long, 1000, |piece| {
//!     let shown = markdown::render(&Chat, piece);
//!     Fit::chars(shown.clone(), &shown, 40)
//! });
//! assert!(messages.len() > 1);
//! assert!(messages.iter().all(|m| m.chars().count() <= 40));
//! ```

#[cfg(feature = "adapter")]
mod adapter;
pub mod delivery;
pub mod engine;
mod executor;
pub mod files;
pub mod markdown;
pub mod metrics;
pub mod outbox;
pub mod questions;
pub mod receive;
pub mod render;
pub mod retry;

#[cfg(feature = "adapter")]
pub use adapter::Adapter;
pub use delivery::Delivery;
pub use engine::{
    ASK_USAGE_TEXT, COMMAND_BUSY_TEXT, ChangeOutcome, ChannelEngine, Command, EngineError,
    EngineHandle, EventOutcome, FormTarget, Incoming, InteractionOutcome, MessageOutcome,
    NOTHING_TO_SKIP_TEXT, PERSON_ASK_SECONDS, Received, STOP_REFUSED_TEXT, StopOutcome,
    channel_chat_id, channel_message_id, is_stop_word,
};
pub use executor::{Done, Outcome, ThreadExecutor};
pub use files::OutFile;
pub use frogbot_model::NEW_CONVERSATION_TEXT;
pub use outbox::{
    AccessCheck, AllowAll, AllowList, AskPlace, Channel, ChannelOutbox, ChannelSettings,
    DraftMessages, EditStream, FIRST_MESSAGE_WAIT, FileStream, FirstMessageHold, OutboxDelivery,
    ReplyStream, ShownAcks,
};
pub use retry::{Retry, RetryPolicy};
