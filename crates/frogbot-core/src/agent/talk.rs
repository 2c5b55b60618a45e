//! Talking with agents outside FrogBot (the rply messages model): a chat **bound** to an external
//! agent gets no model turns; the agent posts messages of text, a title and blocks
//! ([`AgentMessage`]), edits, deletes and pins them, and reads people's messages and block events
//! from its **inbox** ([`InboxItem`]), acknowledging them Seen (when the inbox returns them),
//! Working or Done. Every change reaches the chat's platform thread through the channel's outbox
//! and the web chat through the chat's messages.

use serde::{Deserialize, Serialize};

use crate::model::{Ack, Block, BlockEvent, ChatId, UiMessage, UserId};

/// What an event click found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventOutcome {
    /// The event is in the agent's inbox.
    Sent,
    /// The message, block or button is gone (edited away, deleted) or the chat has no agent.
    Stale,
    /// The person may not write in this chat.
    Denied,
}

/// Where an agent chat is held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentPlace {
    /// The web chat (and HTTP API) only: a chat with this id, owned by the agent's user.
    Web(ChatId),
    /// A platform thread (as the channel's adapter writes thread ids), or a channel or a person
    /// where the adapter starts one ([`super::AskPlace`]).
    Channel {
        /// The platform.
        platform: String,
        /// Where.
        place: ChannelTarget,
    },
}

/// A platform target of an agent chat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelTarget {
    /// A thread, or a channel where a thread is started.
    Thread(String),
    /// A person, in a direct conversation.
    User(String),
}

/// A message an agent posts: a title, Markdown text and blocks (at least one of them), and
/// optionally the pin key it goes under.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentMessage {
    /// The caller's id for the message (its idempotency key: the same id again returns the
    /// message already posted). Generated when absent.
    pub id: Option<String>,
    /// A title.
    pub title: Option<String>,
    /// Markdown text.
    pub text: Option<String>,
    /// Blocks.
    pub blocks: Vec<Block>,
    /// Pin it under this key (replacing the key's pin).
    pub pin: Option<String>,
}

/// How an agent changes one of its messages.
#[derive(Clone, Debug, PartialEq)]
pub enum MessageEdit {
    /// New content (the title, text and blocks given replace the old; `None` keeps that part).
    Replace {
        /// A new title.
        title: Option<String>,
        /// New text.
        text: Option<String>,
        /// New blocks.
        blocks: Option<Vec<Block>>,
    },
    /// One block, by id, replaced.
    Patch {
        /// The block's id.
        block_id: String,
        /// Its new content (its id is kept).
        block: Block,
    },
}

/// What an agent's inbox returns: a person's message, or an event from a block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxItem {
    /// The chat it arrived in.
    pub chat_id: ChatId,
    /// The message (a person's text; or an event, whose `data-event` part says which).
    pub message: UiMessage,
    /// The event it carries, for an event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<BlockEvent>,
    /// Who sent it (a FrogBot user, when known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<UserId>,
    /// The speaker's name on the platform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
    /// Its acknowledgement now (Seen once returned).
    pub ack: Ack,
}

/// The agent-chat operations over the engine's layers.
pub(crate) struct Talk<'a> {
    pub(crate) engine: &'a super::Engine,
}

impl Talk<'_> {
    pub(crate) async fn channel_event(
        &self,
        _platform: &str,
        _thread: &str,
        _click: crate::model::EventClick,
    ) -> crate::error::Result<EventOutcome> {
        let _ = self.engine;
        Err(crate::error::Error::invalid(
            "event buttons are being built: this engine does not route them yet",
        ))
    }
}
