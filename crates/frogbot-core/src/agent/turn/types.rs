//! The turn engine's public values: what callers send, what they get back, the live events.

use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

use crate::error::Result;
use crate::model::{
    ChannelRef, ChatId, Delivery, ErrorInfo, MessagePart, Millis, QuestionOutcome, QuestionOutput,
    TurnState, UiMessage, UserId,
};

use super::super::Model;

/// A model offered to clients: `id` is what they send as `model`.
#[derive(Clone, Debug)]
pub struct ModelOffer {
    /// The id clients choose.
    pub id: String,
    /// The model.
    pub model: Arc<dyn Model>,
    /// The reasoning options offered for it (empty: none).
    pub reasoning: Vec<String>,
}

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The agent's instructions.
    pub instructions: String,
    /// Model steps per turn.
    pub max_steps: u32,
    /// How long a turn of a stopped process blocks its chat.
    pub turn_lease_ms: Millis,
    /// The model used when a message names none.
    pub default_model: String,
    /// How often the text of a step in progress is checkpointed while it streams.
    pub partial_checkpoint: Duration,
    /// How many stored messages the history cache keeps across chats (least recently used chats
    /// go first). A chat's history is read once and then only what is newer.
    pub history_cache_messages: usize,
    /// The most of the conversation before the current turn sent to the model, in bytes of text
    /// ([`crate::agent::ModelMessage::size`]): the oldest turns are left out first. The
    /// instructions and the turn in progress (with an open question) are always sent.
    pub history_bytes: usize,
    /// How long a model's stream may send nothing before its step is aborted (the partial step
    /// kept, the turn failed with `model-timeout`).
    pub stream_idle_timeout: Duration,
    /// How long one model step may take in all, from the request to its last chunk.
    pub step_timeout: Duration,
    /// How long a channel reply's delivery is left to the turn's process before any process's
    /// worker takes it over (the process retries failed posts for half of it).
    pub delivery_grace: Duration,
    /// How often the worker purges expired question records and old dead jobs and reports the
    /// dead ones.
    pub housekeeping_every: Duration,
    /// How long a dead job is kept for operators before housekeeping removes it.
    pub dead_job_retention: Duration,
    /// Offer the agent the message tools `send_message`, `edit_message` and `set_status`
    /// ([`crate::agent::message_tools`]; off by default, on in `frogbot serve`).
    pub message_tools: bool,
    /// The users that are agent principals (other agents driving turns through the API). An
    /// agent never approves a call of a turn it drove: it is left out of that approval's
    /// approvers, and an agent answers an approval only when named by its user id among them.
    pub agents: HashSet<UserId>,
    /// What files are accepted and how much of one the model reads.
    pub files: crate::agent::FileLimits,
    /// The server's address as people reach it (`[server] public_url`): an app block drawn on
    /// a platform links to its web view there. `None`: platforms show the app's name only.
    pub public_url: Option<String>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            instructions: "You are a helpful assistant.".into(),
            max_steps: 20,
            turn_lease_ms: 60_000,
            default_model: "main".into(),
            partial_checkpoint: Duration::from_millis(250),
            history_cache_messages: 100_000,
            history_bytes: 400_000,
            stream_idle_timeout: Duration::from_secs(60),
            step_timeout: Duration::from_secs(600),
            delivery_grace: Duration::from_secs(120),
            housekeeping_every: Duration::from_secs(600),
            dead_job_retention: Duration::from_secs(7 * 24 * 3600),
            message_tools: false,
            agents: HashSet::new(),
            files: crate::agent::FileLimits::default(),
            public_url: None,
        }
    }
}

/// A user message to send.
#[derive(Clone, Debug)]
pub struct SendMessage {
    /// The chat.
    pub chat_id: ChatId,
    /// The message id (generated when `None`).
    pub id: Option<String>,
    /// Its parts.
    pub parts: Vec<MessagePart>,
    /// The sender (`None`: anonymous).
    pub author: Option<UserId>,
    /// Queue or steer, when a turn is in progress.
    pub delivery: Delivery,
    /// The model id (default model when `None`).
    pub model: Option<String>,
    /// The reasoning option.
    pub reasoning: Option<String>,
    /// The channel thread, for a channel chat's first message.
    pub channel: Option<ChannelRef>,
    /// The speaker's display name in a channel thread (the model sees it before the text).
    pub speaker: Option<String>,
    /// The thread's earlier messages, for the first message of a thread the bot joined late.
    pub context: Option<String>,
}

/// What happened to a sent message.
#[derive(Debug)]
pub enum Sent {
    /// It started a turn.
    Started(TurnHandle),
    /// A turn was in progress: it was saved, not run.
    Queued {
        /// The message id.
        message_id: String,
        /// `steer` when it will join the running turn, else `queue`.
        delivery: Delivery,
    },
}

/// A running turn: its live events and its end.
#[derive(Debug)]
pub struct TurnHandle {
    /// The user message that started it.
    pub message_id: String,
    /// Live events (text deltas, tool calls, steps).
    pub events: mpsc::UnboundedReceiver<TurnEvent>,
    /// Resolves when this turn ends or starts waiting on a question (promoted turns that follow
    /// run on in the background).
    pub done: tokio::sync::oneshot::Receiver<Result<TurnOutcome>>,
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnOutcome {
    /// `idle` or `awaiting`.
    pub state: TurnState,
    /// The assistant reply as saved.
    pub reply: Option<UiMessage>,
}

/// A live event of a turn (what the HTTP stream turns into AI SDK parts).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum TurnEvent {
    /// The reply message began.
    Start {
        /// The assistant message id.
        message_id: String,
    },
    /// A step began.
    StartStep,
    /// Reply text.
    TextDelta(String),
    /// A tool call's input is complete.
    ToolInput {
        /// Call id.
        tool_call_id: String,
        /// Tool name.
        tool_name: String,
        /// Input.
        input: Value,
    },
    /// A tool call's output.
    ToolOutput {
        /// Call id.
        tool_call_id: String,
        /// Output.
        output: Value,
    },
    /// A tool call failed.
    ToolError {
        /// Call id.
        tool_call_id: String,
        /// Why.
        error_text: String,
    },
    /// A tool call waits for a person's approval (asked as a question of the same id).
    ToolApprovalRequest {
        /// Call id.
        tool_call_id: String,
        /// The approval's id (the call id).
        approval_id: String,
    },
    /// A tool call was denied (or its approval expired): it never ran.
    ToolOutputDenied {
        /// Call id.
        tool_call_id: String,
    },
    /// A step ended.
    FinishStep,
    /// The turn failed.
    Error(ErrorInfo),
    /// The turn ended (idle) or waits (awaiting).
    Finish {
        /// The state after.
        state: TurnState,
    },
}

/// A change of a chat, for live views.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ChatEvent {
    /// The turn state changed.
    State {
        /// The chat.
        chat_id: ChatId,
        /// Its new state.
        state: TurnState,
    },
    /// A message was saved or changed status.
    Message {
        /// The chat.
        chat_id: ChatId,
        /// The message.
        message: Box<UiMessage>,
    },
}

/// An answer or a dismissal given through the settle endpoint or a channel.
#[derive(Clone, Debug, PartialEq)]
pub enum Settle {
    /// The answer.
    Answer(QuestionOutput),
    /// Dismissed.
    Dismiss,
}

/// What a settle did.
#[derive(Clone, Debug, PartialEq)]
pub struct Settled {
    /// The recorded outcome.
    pub outcome: QuestionOutcome,
    /// The chat's state after.
    pub state: TurnState,
}
