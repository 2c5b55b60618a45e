//! The values the store takes and returns.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{
    Actor, ChannelRef, ChatId, Delivery, MessagePart, Millis, QuestionInput, QuestionOutcome,
    QuestionRecord, TurnState, UiMessage, UserId,
};

/// A chat to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewChat {
    /// Its id.
    pub chat_id: ChatId,
    /// Its owner: the sender of its first message (`None`: anonymous, shared).
    pub owner: Option<UserId>,
    /// The channel thread it belongs to, for channel chats.
    pub channel: Option<ChannelRef>,
}

/// A turn lease as stored on the chat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseInfo {
    /// Who holds it (a process/turn id).
    pub holder: String,
    /// The fencing token: one higher on every take.
    pub token: i64,
    /// When it runs out unless renewed.
    pub expires_at: Millis,
    /// The user driving the turn.
    pub driver: Option<UserId>,
}

/// A stored chat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatRow {
    /// Its id.
    pub chat_id: ChatId,
    /// Its owner.
    pub owner: Option<UserId>,
    /// Its channel thread, for channel chats.
    pub channel: Option<ChannelRef>,
    /// When it was created.
    pub created_at: Millis,
    /// When it last changed.
    pub updated_at: Millis,
    /// The assistant message whose questions wait for answers.
    pub awaiting_message_id: Option<String>,
    /// The lease, when one was ever taken and not released (it may have run out).
    pub lease: Option<LeaseInfo>,
}

impl ChatRow {
    /// The lease if it is live at `now`.
    pub fn live_lease(&self, now: Millis) -> Option<&LeaseInfo> {
        self.lease.as_ref().filter(|l| l.expires_at > now)
    }

    /// The turn state at `now`: `running` while a live lease is held, else `awaiting` while a
    /// question waits, else `idle`.
    pub fn state(&self, now: Millis) -> TurnState {
        if self.live_lease(now).is_some() {
            TurnState::Running
        } else if self.awaiting_message_id.is_some() {
            TurnState::Awaiting
        } else {
            TurnState::Idle
        }
    }
}

/// Asking for a turn lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRequest {
    /// Who asks (a unique id per turn attempt).
    pub holder: String,
    /// The user who will drive the turn.
    pub driver: Option<UserId>,
    /// How long the lease lasts unless renewed.
    pub ttl_ms: Millis,
    /// Now.
    pub now: Millis,
}

/// A held turn lease. Writes of the turn are fenced with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The chat.
    pub chat_id: ChatId,
    /// The holder.
    pub holder: String,
    /// The fencing token.
    pub token: i64,
    /// When it runs out unless renewed.
    pub expires_at: Millis,
    /// The user driving the turn.
    pub driver: Option<UserId>,
    /// Whether taking it ended a turn that never released it: its holder stopped (a crash, a kill,
    /// a lost lease) while the turn ran, so that turn was interrupted.
    pub taken_over: bool,
}

/// Where [`super::Store::save_turn_message`] puts a message in the chat's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The user message that starts a new turn: a new turn position after every other turn.
    /// The saved message's `position` is the turn's position.
    TurnStart,
    /// The turn's reply at the turn's position (after its user message and joined steers).
    Reply {
        /// The turn's position.
        position: i64,
    },
}

/// How a turn ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TurnEnd<'a> {
    /// Nothing waits: the chat goes idle unless messages are queued.
    Idle,
    /// The reply waits on questions.
    Awaiting(&'a str),
    /// Release the chat even when messages are queued, leaving them for another process (a
    /// graceful stop hands its chats' queues on).
    Handoff,
}

/// What [`super::Store::end_turn`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndTurn {
    /// The lease is released.
    Released,
    /// Messages are queued: the lease is still held, promote the next one.
    QueuedPending,
}

/// A stored message with its place in the chat.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredMessage {
    /// The chat.
    pub chat_id: ChatId,
    /// The message (`metadata.status` is `queued` while queued; `metadata.delivery` set then).
    pub message: UiMessage,
    /// Arrival order across the database.
    pub seq: i64,
    /// The turn position (`None` while queued).
    pub position: Option<i64>,
    /// Whether it waits for promotion.
    pub queued: bool,
    /// How it asked to be delivered.
    pub delivery: Delivery,
}

impl StoredMessage {
    /// The author (from the message's metadata).
    pub fn author(&self) -> Option<&UserId> {
        self.message.metadata.author.as_ref()
    }
}

/// A change to a queued message: absent fields stay.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueuedEdit {
    /// New parts.
    pub parts: Option<Vec<MessagePart>>,
    /// New delivery.
    pub delivery: Option<Delivery>,
}

/// What an edit or delete of a queued message did.
#[derive(Clone, Debug, PartialEq)]
pub enum QueuedChange {
    /// Edited (the new message) or deleted (`None`).
    Done(Option<Box<StoredMessage>>),
    /// No such message.
    NotFound,
    /// The caller is not the author.
    Forbidden,
    /// The message was already promoted.
    NotQueued,
}

/// A question record to create.
#[derive(Clone, Debug, PartialEq)]
pub struct NewQuestion {
    /// The tool call id (the record's key).
    pub tool_call_id: String,
    /// The chat.
    pub chat_id: ChatId,
    /// The assistant message holding the call.
    pub message_id: String,
    /// The call's position among the step's question calls.
    pub call_index: i64,
    /// The validated input.
    pub input: QuestionInput,
    /// Until when answers are accepted (rply expiry), if the set expires.
    pub answer_deadline: Option<Millis>,
}

/// A stored question record.
#[derive(Clone, Debug, PartialEq)]
pub struct QuestionRow {
    /// The tool call id.
    pub tool_call_id: String,
    /// The chat.
    pub chat_id: ChatId,
    /// The assistant message holding the call.
    pub message_id: String,
    /// The call's position among the step's question calls.
    pub call_index: i64,
    /// The validated input.
    pub input: QuestionInput,
    /// What the hooks see (`messages` is empty until rendered).
    pub record: QuestionRecord,
    /// Whether a channel posted it.
    pub rendered: bool,
    /// Whether the next question of a partial answer is still posting.
    pub posting: bool,
    /// The outcome, once recorded.
    pub outcome: Option<QuestionOutcome>,
    /// Who recorded the outcome.
    pub actor: Option<Actor>,
    /// When the outcome was recorded.
    pub outcome_at: Option<Millis>,
    /// Whether `settled` ran (or was given up on) after the outcome.
    pub closed: bool,
    /// Until when answers are accepted, if the set expires.
    pub answer_deadline: Option<Millis>,
    /// When it was created.
    pub created_at: Millis,
    /// When it last changed.
    pub updated_at: Millis,
    /// When the record is gone.
    pub expires_at: Millis,
}

/// A held question lock. Updates are fenced with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuestionLock {
    /// The chat.
    pub chat_id: ChatId,
    /// The question.
    pub tool_call_id: String,
    /// The holder.
    pub holder: String,
    /// The fencing token.
    pub token: i64,
}

/// A change to a question record: absent fields stay.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuestionUpdate {
    /// The new record (messages, revision, state).
    pub record: Option<QuestionRecord>,
    /// Rendered or not.
    pub rendered: Option<bool>,
    /// Still posting or not.
    pub posting: Option<bool>,
    /// Closed or not.
    pub closed: Option<bool>,
}

/// A job to schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewJob {
    /// What to run (the worker dispatches on it).
    pub kind: String,
    /// A de-duplication key: one job per key.
    pub key: Option<String>,
    /// The job's arguments.
    pub payload: Value,
    /// When to run it.
    pub run_at: Millis,
}

/// A stored job.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// Its id.
    pub id: i64,
    /// What to run.
    pub kind: String,
    /// Its de-duplication key.
    pub key: Option<String>,
    /// Its arguments.
    pub payload: Value,
    /// When it is due.
    pub run_at: Millis,
    /// How many times it was claimed.
    pub attempts: i64,
    /// The worker holding it.
    pub claimed_by: Option<String>,
    /// Until when the claim holds.
    pub claim_until: Option<Millis>,
    /// The last error noted.
    pub last_error: Option<String>,
    /// Whether it was given up on.
    pub dead: bool,
    /// How many times it was re-enqueued by key (a claim finished after a re-enqueue keeps the job).
    pub generation: i64,
}
