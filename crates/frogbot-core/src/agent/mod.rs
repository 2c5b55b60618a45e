//! Agents: a model, instructions and tools; the engines that run them.
//!
//! Three layers, each calling only the ones below it:
//!
//! - `channel` — messages arriving in platform threads, identity, the outbox; it listens to the
//!   turn engine's turn ends to post replies and draw questions;
//! - `questions` — routing clicks, forms and replies to question records, the one outcome path
//!   (HTTP settle, channel answers, expiry, withdrawal), closing, drawing, `updated` retries;
//! - `turn` — turns, the queue, steering, checkpoints, leases, continuing after answers;
//!
//! over the store. [`Engine`] wires them and groups what callers may do behind its handles
//! ([`Chats`], [`Questions`], [`Channels`], [`Agents`], [`Ops`] — the last is also what operators
//! do to a running database: `frogbot jobs`, `purge`); [`views`] names the data they return;
//! `jobs` types the durable jobs; `delivery` says what a thread is owed of a reply and how its
//! posting is retried; `clock` is the time.

pub mod ask;
mod channel;
pub mod clock;
mod delivery;
mod engine;
pub mod files;
pub mod jobs;
pub mod message_tools;
pub mod model;
mod questions;
mod registry;
pub mod scripted;
pub mod talk;
mod tool;
mod turn;
pub mod views;

pub use channel::{
    ASK_USAGE_TEXT, COMMAND_BUSY_TEXT, ChangeOutcome, ChannelMessageOutcome, Command,
    INTERRUPTED_MARK, MAX_STEPS_TEXT, NOTHING_TO_SKIP_TEXT, PERSON_ASK_SECONDS,
    QUEUED_BEHIND_QUESTION_TEXT, QUEUED_TEXT, STOP_REFUSED_TEXT, channel_chat_id,
    channel_message_id, failure_text, is_stop_word,
};
pub use clock::{Clock, DatabaseClock, ManualClock, SystemClock};
pub use engine::agents::Agents;
pub use engine::channels::Channels;
pub use engine::chats::Chats;
pub use engine::files::Files;
pub use engine::ops::{Housekeeping, Ops, Revival};
pub use engine::questions::Questions;
pub use engine::{Engine, JOB_FALLBACK_POLL};
pub use files::{FileError, FileLimits};
pub use model::*;
pub use questions::{
    FormTarget, InteractionOutcome, STILL_POSTING, UPDATED_FIRST_BACKOFF_MS, UPDATED_MAX_RUNS,
    updated_backoff_ms,
};
pub use registry::{
    AccessCheck, AllowAll, AllowList, AskPlace, Channel, ChannelOutbox, ChannelSettings, Delivery,
    DraftMessages, EditStream, FIRST_MESSAGE_WAIT, FileStream, OutFile, OutboxDelivery,
    ReplyStream, ShownAcks,
};
pub use talk::{AgentMessage, AgentPlace, ChannelTarget, EventOutcome, InboxItem, MessageEdit};
pub use tool::*;
pub use turn::{
    ChatEvent, ELICITATION_STOPPED_TEXT, EngineConfig, ModelOffer, NO_APPROVERS, STOPPED_TEXT,
    SendMessage, Sent, Settle, Settled, StopOutcome, TurnEvent, TurnHandle, TurnOutcome,
    question_tool_spec, to_model_messages,
};
