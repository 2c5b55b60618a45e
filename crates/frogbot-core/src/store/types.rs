//! The values the store takes and returns, and the rules every backend applies the same way
//! ([`check_writer`], [`interrupted_reply`], [`steer_or_queue`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{Result, StoreError};
use crate::model::{
    Actor, ChannelRef, ChatId, Delivery, ErrorInfo, MessageMetadata, MessagePart, Millis,
    QuestionInput, QuestionOutcome, QuestionRecord, Role, ToolPart, ToolState, TurnState,
    UiMessage, UserId, millis_to_iso,
};

/// `sub` of a turn's reply in the chat's order: after the turn's user message (0) and the steers
/// that joined it (their `seq`).
pub const REPLY_SUB: i64 = 1 << 52;

/// The error code on the reply of a turn whose process stopped before it finished.
pub const INTERRUPTED: &str = "interrupted";

// ---- chats ---------------------------------------------------------------------------------------

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
    /// One higher on every write of one of its messages (saved, changed, promoted, deleted): a
    /// reader holding the messages up to a version reads only what is newer
    /// ([`super::ChatStore::messages_since`]).
    pub version: i64,
    /// The external agent the chat is bound to (its FrogBot user id; `""` for an anonymous
    /// caller): people's messages go to that agent's inbox instead of a model turn.
    pub agent: Option<String>,
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

    /// What hooks and access checks see of the chat.
    pub fn info(&self) -> crate::model::ChatInfo {
        crate::model::ChatInfo {
            chat_id: self.chat_id.clone(),
            owner: self.owner.clone(),
            channel: self.channel.clone(),
        }
    }
}

/// [`StoreError::ChannelChat`]'s reason for a channel chat written from elsewhere.
pub const CONTINUED_FROM_ITS_CHANNEL: &str = "is continued only from its channel";
/// [`StoreError::ChannelChat`]'s reason for a chat that is not the writing channel thread's.
pub const NOT_OF_THIS_THREAD: &str = "is not a chat of this channel thread";

/// The model of an ask's turn (`crate::agent::ASK_MODEL`): the one turn a chat bound to an agent
/// runs — its agent asking a person.
pub const ASK_MODEL: &str = "frogbot-ask";

/// Whether `message` may be [`super::TurnStore::send`] to the existing chat `row`: a chat bound to
/// an external agent runs no turn but asks' ([`StoreError::AgentChat`], decided first, so the
/// caller takes the agent's path — its inbox — whoever writes); then [`check_writer`].
pub fn check_sender(row: &ChatRow, chat: &NewChat, message: &UiMessage) -> Result<()> {
    if row.agent.is_some() && message.metadata.model.as_deref() != Some(ASK_MODEL) {
        return Err(StoreError::AgentChat {
            chat_id: row.chat_id.clone(),
        });
    }
    check_writer(row, chat)
}

/// Whether the writer of a new message may write to the existing chat `row` (the rule of
/// [`super::TurnStore::send`], after [`check_sender`]'s, and of [`super::AgentStore::bind_agent`]):
/// - a chat whose channel differs from `chat.channel` (a web chat for a channel message, a
///   channel chat for a web message, another thread) is refused with [`StoreError::ChannelChat`];
/// - a web chat with an owner is written by its owner only ([`StoreError::Forbidden`]); channel chats
///   are written by everyone in their thread, ownerless web chats by anyone.
pub fn check_writer(row: &ChatRow, chat: &NewChat) -> Result<()> {
    if row.channel != chat.channel {
        return Err(StoreError::ChannelChat {
            chat_id: row.chat_id.clone(),
            reason: match &row.channel {
                Some(_) => CONTINUED_FROM_ITS_CHANNEL,
                None => NOT_OF_THIS_THREAD,
            },
        });
    }
    if row.channel.is_none()
        && let Some(owner) = &row.owner
        && chat.owner.as_ref() != Some(owner)
    {
        return Err(StoreError::Forbidden {
            chat_id: row.chat_id.clone(),
        });
    }
    Ok(())
}

/// Whether `by` may edit or delete a stored message (its `role`, `author` and whether it is
/// `queued`): `None` when it may — a user's own message still waiting in the queue — else why not:
/// [`QueuedChange::Forbidden`] for a queued message of someone else (or not a user's),
/// [`QueuedChange::NotQueued`] once it left the queue. Both backends decide with it.
pub fn queued_refusal(
    role: &str,
    author: Option<&str>,
    queued: bool,
    by: Option<&UserId>,
) -> Option<QueuedChange> {
    if role != Role::User.as_str() || author != by.map(UserId::as_str) {
        return Some(if queued {
            QueuedChange::Forbidden
        } else {
            QueuedChange::NotQueued
        });
    }
    (!queued).then_some(QueuedChange::NotQueued)
}

/// How a message sent while the chat is busy is saved: a steer joins the running turn only when
/// it comes from the turn's driving user while a live lease is held; anything else is queued.
pub fn steer_or_queue(
    requested: Delivery,
    chat: &ChatRow,
    author: Option<&UserId>,
    now: Millis,
) -> Delivery {
    match (requested, chat.live_lease(now)) {
        (Delivery::Steer, Some(lease)) if lease.driver.as_ref() == author => Delivery::Steer,
        _ => Delivery::Queue,
    }
}

/// The reply to save for an interrupted turn, given the messages of that turn (its position's
/// messages): the saved reply with the `interrupted` error, or an empty reply with it when none
/// was saved. `None` when the turn has no user message, or its reply already says it failed.
/// Backends call it when a lease is taken over, in the same transaction; `new_id` names the reply
/// when one is created.
///
/// `outcomes` are the recorded outcomes of the reply's question calls (tool call id, outcome):
/// a waiting call that has one is filled in ([`fill_question_part`]), so an answer settled just
/// before its continued turn's process died is kept in the reply, not only in its record.
pub fn interrupted_reply(
    turn: &[StoredMessage],
    outcomes: &[(String, QuestionOutcome)],
    new_id: &str,
    now: Millis,
) -> Option<UiMessage> {
    let error = ErrorInfo {
        code: INTERRUPTED.into(),
        message: "This reply was interrupted: the server stopped before it finished.".into(),
    };
    if let Some(reply) = turn.iter().find(|m| m.message.role == Role::Assistant) {
        if reply.message.metadata.error.is_some() {
            return None;
        }
        let mut reply = reply.message.clone();
        let mut continued = false;
        for part in reply.parts.iter_mut() {
            let MessagePart::Tool(t) = part else { continue };
            if t.state == ToolState::InputAvailable
                && let Some((_, o)) = outcomes.iter().find(|(id, _)| *id == t.tool_call_id)
            {
                fill_question_part(t, o);
                continued = true;
            }
            if t.state == ToolState::ApprovalRequested
                && let Some((_, o)) = outcomes.iter().find(|(id, _)| *id == t.tool_call_id)
            {
                // Decided, but the continued turn never saved that it started the call.
                fill_approval_part(t, o, None, None);
                if t.state == ToolState::ApprovalResponded {
                    t.state = ToolState::OutputError;
                    t.error_text = Some(APPROVED_NOT_RUN_TEXT.into());
                }
                continued = true;
            }
            if t.state == ToolState::ApprovalResponded {
                // Saved as started: the call may have run when the process died.
                t.state = ToolState::OutputError;
                t.error_text = Some(APPROVED_INTERRUPTED_TEXT.into());
            }
        }
        reply.metadata.approvals = approvals_of(&reply);
        if continued {
            // Its streamed messages drew the text before these questions (posted with the
            // wait): the interrupted continuation's text is posted anew, never drawn over them.
            reply.metadata.drafts.clear();
        }
        reply.metadata.error = Some(error);
        return Some(reply);
    }
    let user = turn.iter().find(|m| m.message.role == Role::User)?;
    Some(UiMessage {
        id: new_id.to_string(),
        role: Role::Assistant,
        parts: vec![],
        metadata: MessageMetadata {
            model: user.message.metadata.model.clone(),
            reasoning: user.message.metadata.reasoning.clone(),
            created_at: millis_to_iso(now),
            error: Some(error),
            ..Default::default()
        },
    })
}

/// The error text of a question call a participant dismissed ([`fill_question_part`]).
pub const QUESTION_DISMISSED_TEXT: &str = "The question was dismissed.";
/// The error text of a question call that was withdrawn.
pub const QUESTION_WITHDRAWN_TEXT: &str = "The question was withdrawn.";
/// The error text of a question call that expired without an answer.
pub const QUESTION_EXPIRED_TEXT: &str = "The question expired without an answer.";

/// Fills a waiting question call (`input-available`) with its recorded outcome: the answer as
/// its output, or an error text (dismissed, withdrawn, expired without an answer). Returns
/// whether the outcome ends the turn (a dismissal or a withdrawal). A call not waiting is left.
pub fn fill_question_part(t: &mut ToolPart, outcome: &QuestionOutcome) -> bool {
    if t.state != ToolState::InputAvailable {
        return false;
    }
    if let Some(output) = outcome.output()
        && let Ok(value) = serde_json::to_value(output)
    {
        t.state = ToolState::OutputAvailable;
        t.output = Some(value);
        return false;
    }
    t.state = ToolState::OutputError;
    let (text, stop) = match outcome {
        QuestionOutcome::Dismissed => (QUESTION_DISMISSED_TEXT, true),
        QuestionOutcome::Cancelled => (QUESTION_WITHDRAWN_TEXT, true),
        _ => (QUESTION_EXPIRED_TEXT, false),
    };
    t.error_text = Some(text.into());
    stop
}

/// The error text of an approved call whose turn stopped before it started it.
pub const APPROVED_NOT_RUN_TEXT: &str =
    "The call was approved, but the server stopped before it ran; it did not run.";
/// The error text of an approved call whose turn was stopped (another question of its step was
/// dismissed) before it ran.
pub const APPROVED_STOPPED_TEXT: &str =
    "The call was approved, but the turn stopped before it ran.";
/// The error text of an approved call whose turn stopped while it ran.
pub const APPROVED_INTERRUPTED_TEXT: &str =
    "The call was approved and started, but the server stopped while it ran; it may have run.";

/// Fills a call waiting for approval (`approval-requested`) with its outcome: approved, it
/// becomes `approval-responded` (the continued turn runs it); otherwise `output-denied`, with
/// the reason. `by` and `at` say who decided and when. A call not waiting is left.
pub fn fill_approval_part(
    t: &mut ToolPart,
    outcome: &QuestionOutcome,
    by: Option<String>,
    at: Option<Millis>,
) {
    if t.state != ToolState::ApprovalRequested {
        return;
    }
    let (approved, reason) = crate::model::approval_decision(outcome);
    let approval = t.approval.get_or_insert_with(|| {
        Box::new(crate::model::ToolApproval {
            id: t.tool_call_id.clone(),
            ..Default::default()
        })
    });
    approval.approved = Some(approved);
    approval.reason = reason;
    approval.by = by;
    approval.at = at.map(millis_to_iso);
    approval.descriptor = None;
    t.state = if approved {
        ToolState::ApprovalResponded
    } else {
        ToolState::OutputDenied
    };
}

/// The decided approvals of `reply`'s calls by call id (its `metadata.approvals`).
pub fn approvals_of(
    reply: &UiMessage,
) -> std::collections::BTreeMap<String, crate::model::ToolApproval> {
    reply
        .tool_parts()
        .filter_map(|t| {
            let a = t.approval.as_ref()?;
            a.approved?;
            Some((t.tool_call_id.clone(), (**a).clone()))
        })
        .collect()
}

// ---- leases --------------------------------------------------------------------------------------

/// The engine's rule for what a reply marked interrupted owes its thread: a backend that marks
/// one (taking over an expired lease) writes this job in the same transaction, so a process
/// killed right after the take-over leaves it owed, not forgotten.
#[derive(Clone, Copy)]
pub struct InterruptedDelivery {
    /// The job for the chat (as the take-over found it) and the reply marked interrupted;
    /// `None`: nothing is owed (not a channel chat).
    pub job: fn(&ChatRow, &UiMessage) -> Option<NewJob>,
    /// When the job is due (its `run_at`).
    pub run_at: Millis,
}

impl InterruptedDelivery {
    /// The job owed for `reply`, due at [`Self::run_at`].
    pub fn job_for(&self, chat: &ChatRow, reply: &UiMessage) -> Option<NewJob> {
        (self.job)(chat, reply).map(|j| NewJob {
            run_at: self.run_at,
            ..j
        })
    }
}

impl std::fmt::Debug for InterruptedDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterruptedDelivery")
            .field("run_at", &self.run_at)
            .finish_non_exhaustive()
    }
}

impl PartialEq for InterruptedDelivery {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::fn_addr_eq(self.job, other.job) && self.run_at == other.run_at
    }
}

impl Eq for InterruptedDelivery {}

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
    /// What a turn this request interrupts (an expired lease taken over) owes its thread.
    pub interrupted: Option<InterruptedDelivery>,
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

// ---- messages ------------------------------------------------------------------------------------

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
    /// Its place within the turn: 0 for the user message, the steer's `seq` for a steer that
    /// joined, [`REPLY_SUB`] for the reply.
    pub sub: i64,
    /// Whether it waits for promotion.
    pub queued: bool,
    /// How it asked to be delivered.
    pub delivery: Delivery,
    /// The chat's version when it was last written.
    pub version: i64,
}

impl StoredMessage {
    /// The author (from the message's metadata).
    pub fn author(&self) -> Option<&UserId> {
        self.message.metadata.author.as_ref()
    }

    /// The key of the chat's stored order: turns by position (queued last), then `sub`, then `seq`.
    pub fn order_key(&self) -> (bool, i64, i64, i64) {
        (
            self.position.is_none(),
            self.position.unwrap_or(0),
            self.sub,
            self.seq,
        )
    }
}

/// What changed in a chat since a version ([`super::ChatStore::messages_since`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ChatChanges {
    /// The chat's version now (`0` when the chat does not exist).
    pub version: i64,
    /// The messages written after the asked version, in stored order.
    pub messages: Vec<StoredMessage>,
}

/// A change to a queued message: absent fields stay.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueuedEdit {
    /// New parts.
    pub parts: Option<Vec<MessagePart>>,
    /// New delivery.
    pub delivery: Option<Delivery>,
}

/// [`super::TurnStore::edit_queued`] and [`super::TurnStore::delete_queued`]: a queued message,
/// changed for its author only.
#[derive(Clone, Copy, Debug)]
pub struct QueuedOp<'a> {
    /// The chat.
    pub chat: &'a ChatId,
    /// The queued message's id.
    pub id: &'a str,
    /// Who asks.
    pub by: Option<&'a UserId>,
    /// Now.
    pub now: Millis,
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

// ---- turn operations -----------------------------------------------------------------------------

/// [`super::TurnStore::send`]: a user message for a chat.
#[derive(Clone, Copy, Debug)]
pub struct SendOp<'a> {
    /// The chat to create, or to open for writing ([`check_sender`] decides on the stored row).
    pub chat: &'a NewChat,
    /// The message (its id chosen by the caller). A message with this id in the chat already
    /// makes the operation [`Sent::Duplicate`], changing nothing.
    pub message: &'a UiMessage,
    /// The delivery asked for while a turn runs ([`steer_or_queue`] decides).
    pub delivery: Delivery,
    /// The lease to take when the chat is idle (its driver is the sender).
    pub lease: &'a LeaseRequest,
    /// `false`: never queue — [`Sent::Busy`] when the chat is not idle (local `generate`).
    pub queue_if_busy: bool,
}

/// What [`super::TurnStore::send`] did.
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Sent {
    /// The chat was idle: the lease is taken and the message saved at a new turn position.
    Started {
        /// The chat after the operation.
        chat: ChatRow,
        /// Whether this operation created the chat.
        created: bool,
        /// The chat's version before the operation.
        prior_version: i64,
        /// The turn's lease (driven by the sender).
        lease: Lease,
        /// The message as saved.
        message: StoredMessage,
        /// When the lease was taken over from a stopped turn: that turn's reply as saved with the
        /// `interrupted` error ([`interrupted_reply`]).
        interrupted: Option<StoredMessage>,
    },
    /// A turn runs or a question waits: the message is saved queued (or as a steer).
    Queued {
        /// The chat after the operation.
        chat: ChatRow,
        /// Whether this operation created the chat.
        created: bool,
        /// The message as saved.
        message: StoredMessage,
        /// `steer` when it will join the running turn, else `queue`.
        delivery: Delivery,
    },
    /// The chat already has a message with this id (a repeated delivery); nothing changed.
    Duplicate {
        /// The chat.
        chat: ChatRow,
    },
    /// `queue_if_busy` was `false` and the chat is not idle; nothing changed (the chat may have
    /// been created).
    Busy {
        /// The chat.
        chat: ChatRow,
    },
}

/// [`super::TurnStore::checkpoint`]: a step of a turn.
#[derive(Clone, Copy, Debug)]
pub struct CheckpointOp<'a> {
    /// The turn's lease (the write is fenced with it).
    pub lease: &'a Lease,
    /// The reply so far, saved at the turn's reply slot.
    pub reply: &'a UiMessage,
    /// The turn's position.
    pub position: i64,
    /// Whether to join the queued steers of `lease.driver` to the turn (at a step boundary).
    pub join_steers: bool,
    /// Now.
    pub now: Millis,
}

/// What [`super::TurnStore::checkpoint`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpointed {
    /// The reply as saved.
    pub reply: StoredMessage,
    /// The steers that joined the turn, oldest first (stored just before the reply).
    pub steers: Vec<StoredMessage>,
}

/// [`super::TurnStore::await_answers`]: a turn stops to wait on questions.
#[derive(Clone, Copy, Debug)]
pub struct AwaitOp<'a> {
    /// The turn's lease (fenced; released by the operation).
    pub lease: &'a Lease,
    /// The reply, which becomes the chat's waiting message.
    pub reply: &'a UiMessage,
    /// The turn's position.
    pub position: i64,
    /// The question records of the reply's waiting calls.
    pub questions: &'a [NewQuestion],
    /// A job to schedule with them (the expiry of the set), if any.
    pub job: Option<&'a NewJob>,
    /// The reply's delivery to its channel thread, scheduled in the same operation (a `deliver`
    /// job the posting process removes once posted), if any.
    pub delivery: Option<&'a NewJob>,
    /// Now.
    pub now: Millis,
}

/// How [`super::TurnStore::end_turn`] ends a turn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EndMode<'a> {
    /// Release the chat when nothing is queued, else promote the oldest queued message.
    Next,
    /// Release the chat whatever is queued (the process stops); when something is queued,
    /// schedule this job (which runs the queue on any process).
    Handoff(&'a NewJob),
}

/// [`super::TurnStore::end_turn`].
#[derive(Clone, Copy, Debug)]
pub struct EndTurnOp<'a> {
    /// The turn's lease (fenced).
    pub lease: &'a Lease,
    /// The turn's last reply to save first, with its position, when the last step did not save it.
    pub reply: Option<(&'a UiMessage, i64)>,
    /// Release, promote or hand on.
    pub mode: EndMode<'a>,
    /// The reply's delivery to its channel thread, scheduled in the same operation (a `deliver`
    /// job the posting process removes once posted), if any.
    pub delivery: Option<&'a NewJob>,
    /// Now.
    pub now: Millis,
}

/// What [`super::TurnStore::end_turn`] did.
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum TurnEnded {
    /// The chat is idle: the lease is released.
    Released {
        /// The reply as saved, when the operation saved one.
        reply: Option<StoredMessage>,
    },
    /// The oldest queued message was promoted to start the next turn under the same lease, now
    /// driven by its sender.
    Promoted {
        /// The reply as saved, when the operation saved one.
        reply: Option<StoredMessage>,
        /// The lease, its driver changed.
        lease: Lease,
        /// The promoted message at its new turn position.
        next: StoredMessage,
    },
    /// The chat was released for another process: `queued` says whether the job was scheduled.
    HandedOn {
        /// The reply as saved, when the operation saved one.
        reply: Option<StoredMessage>,
        /// Whether messages were left queued (and the job scheduled).
        queued: bool,
    },
}

/// What [`super::TurnStore::take_chat`] took.
#[derive(Clone, Debug, PartialEq)]
pub struct Taken {
    /// When the lease was taken over from a stopped turn: that turn's reply, marked interrupted.
    pub interrupted: Option<StoredMessage>,
    /// The promoted message and its lease; `None` when nothing was queued (the chat was released
    /// again).
    pub next: Option<(Lease, StoredMessage)>,
}

/// What [`super::TurnStore::resume_turn`] found.
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Resume {
    /// Every question of the reply has an outcome, and the lease is taken: continue the turn.
    Taken {
        /// The lease (driven by the request's driver).
        lease: Lease,
        /// The waiting reply.
        reply: StoredMessage,
        /// Its question records, in call order.
        questions: Vec<QuestionRow>,
        /// The model of the chat's latest user message (a continued turn uses it).
        model: Option<String>,
        /// Its reasoning option.
        reasoning: Option<String>,
    },
    /// Some question of the reply is still open.
    Open,
    /// A live lease holds the chat (a turn that saved the questions has not released it yet, or
    /// another process continues): try again at `until`.
    Busy {
        /// When the lease runs out unless renewed.
        until: Millis,
    },
    /// The chat does not wait on this message (continued already, withdrawn, or no such chat).
    NotWaiting,
}

// ---- questions -----------------------------------------------------------------------------------

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
    /// The holder of its lock, while one is held (it may have run out).
    pub lock_holder: Option<String>,
    /// Until when the lock is held.
    pub lock_until: Millis,
}

impl QuestionRow {
    /// Whether its lock is held at `now`.
    pub fn locked(&self, now: Millis) -> bool {
        self.lock_holder.is_some() && self.lock_until > now
    }
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

/// One rendered call of [`RenderedOp`].
#[derive(Clone, Debug, PartialEq)]
pub struct RenderedCall {
    /// The call.
    pub tool_call_id: String,
    /// Its record: the posted messages (never empty) and the piece's state, revision 0.
    pub record: QuestionRecord,
}

/// [`super::QuestionStore::mark_rendered`].
#[derive(Clone, Copy, Debug)]
pub struct RenderedOp<'a> {
    /// The chat.
    pub chat: &'a ChatId,
    /// The channel's platform (the links' namespace).
    pub platform: &'a str,
    /// The rendered calls.
    pub calls: &'a [RenderedCall],
    /// Now.
    pub now: Millis,
}

/// A lock to take with an operation: who and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockRequest<'a> {
    /// The holder.
    pub holder: &'a str,
    /// How long it is held unless released.
    pub ttl_ms: Millis,
}

/// [`super::QuestionStore::lock_question`]: a question's lock, taken if it is free.
#[derive(Clone, Copy, Debug)]
pub struct LockQuestionOp<'a> {
    /// The chat.
    pub chat: &'a ChatId,
    /// The question.
    pub tool_call_id: &'a str,
    /// The lock to take.
    pub lock: LockRequest<'a>,
    /// Now.
    pub now: Millis,
}

/// [`super::QuestionStore::record_outcome`].
#[derive(Clone, Copy, Debug)]
pub struct RecordOp<'a> {
    /// The chat.
    pub chat: &'a ChatId,
    /// The question.
    pub tool_call_id: &'a str,
    /// The outcome to record.
    pub outcome: &'a QuestionOutcome,
    /// Who recorded it.
    pub actor: Option<&'a Actor>,
    /// Record only while the record is at this revision and not posting (the revision the caller's
    /// `parse` read); `None`: whatever its revision (HTTP settle, expiry, withdrawal).
    pub expected_revision: Option<u64>,
    /// Take the question's lock with the outcome (to call `settled` and close it).
    pub lock: Option<LockRequest<'a>>,
    /// When this outcome wins, continue the turn in the same transaction as
    /// [`super::TurnStore::resume_turn`] would for the record's message (taking the lease with this
    /// request): one commit for an answer that needs no `settled` hook first (an HTTP settle, an
    /// expiry). The result comes back in [`Recorded::Won::resumed`].
    pub resume: Option<&'a LeaseRequest>,
    /// Now.
    pub now: Millis,
}

/// What [`super::QuestionStore::record_outcome`] did. Each variant carries the record as it is
/// after the operation (`None` when there is no live record).
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Recorded {
    /// This outcome was recorded (first); the record is kept 24 hours from now. With the lock when
    /// one was asked for.
    Won {
        /// The record after.
        question: QuestionRow,
        /// The lock, when asked for.
        lock: Option<QuestionLock>,
        /// What continuing the turn found, when [`RecordOp::resume`] asked for it.
        resumed: Option<Resume>,
    },
    /// Another outcome was recorded first.
    Settled {
        /// The record.
        question: QuestionRow,
    },
    /// The record moved on since it was read (another revision, posting, or locked by another
    /// holder): read it again and decide again.
    Changed {
        /// The record now.
        question: QuestionRow,
    },
    /// No live record.
    Gone,
}

/// [`super::QuestionStore::advance_question`]: a partial answer.
#[derive(Clone, Copy, Debug)]
pub struct AdvanceOp<'a> {
    /// The chat.
    pub chat: &'a ChatId,
    /// The question.
    pub tool_call_id: &'a str,
    /// The revision the caller's `parse` read.
    pub expected_revision: u64,
    /// The new state (`None`: keep it).
    pub state: Option<&'a Value>,
    /// The lock to hold while `updated` posts the next question.
    pub lock: LockRequest<'a>,
    /// Now.
    pub now: Millis,
}

/// What [`super::QuestionStore::advance_question`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Advanced {
    /// Saved (`revision + 1`, posting), and locked.
    Done {
        /// The record after.
        question: QuestionRow,
        /// The lock.
        lock: QuestionLock,
    },
    /// The record moved on (answered, another revision, posting or locked): read it again.
    Changed {
        /// The record now.
        question: QuestionRow,
    },
    /// No live record.
    Gone,
}

/// [`super::QuestionStore::update_question`]: a change under a held lock.
#[derive(Clone, Copy, Debug)]
pub struct UpdateQuestionOp<'a> {
    /// The held lock.
    pub lock: &'a QuestionLock,
    /// The change.
    pub update: &'a QuestionUpdate,
    /// Link every message of the (new) record to the call under this platform.
    pub link_platform: Option<&'a str>,
    /// A job to schedule in the same transaction (a retry of `updated`).
    pub job: Option<&'a NewJob>,
    /// Keep holding the lock after the change.
    pub keep_lock: bool,
    /// Now.
    pub now: Millis,
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

// ---- jobs ----------------------------------------------------------------------------------------

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

/// Which chats an operator lists ([`super::OperationsStore::find_chats`]): every owner's, newest
/// first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChatFilter {
    /// Only chats in this state at the time given (derived as [`ChatRow::state`] derives it).
    pub state: Option<TurnState>,
    /// Only the chats of this channel platform (`slack`, …).
    pub platform: Option<String>,
    /// At most this many.
    pub limit: u32,
}

/// What a purge would remove ([`super::OperationsStore::purgeable`]): the records
/// [`super::QuestionStore::purge_expired`] and [`super::JobStore::purge_dead_jobs`] delete.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Purgeable {
    /// Question records past their expiry.
    pub questions: u64,
    /// Dead jobs created before the retention's start.
    pub dead_jobs: u64,
}

/// What waits in the store ([`super::OperationsStore::backlog`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Messages queued behind running turns (not yet promoted), in every chat.
    pub queued: u64,
    /// Live jobs that may be claimed now: due, and unclaimed or their claim ended.
    pub jobs_due: u64,
    /// Live jobs whose claim is live.
    pub jobs_running: u64,
    /// Dead jobs.
    pub jobs_dead: u64,
}

/// [`super::AgentStore::bind_agent`]: bind a chat (created when missing) to an external agent.
#[derive(Clone, Debug)]
pub struct BindAgentOp<'a> {
    /// The chat, as `send` would create it (owner, channel thread).
    pub chat: &'a NewChat,
    /// The agent (a FrogBot user id, `""` for an anonymous caller).
    pub agent: &'a str,
    /// Whether a chat that exists already without an agent may be bound (an ask's own chat,
    /// which the asker created). `false` for [`open_agent_chat`]: an agent binds only a chat
    /// this call creates, or one bound to it already — never a person's conversation.
    ///
    /// [`open_agent_chat`]: crate::agent::Agents::open_chat
    pub existing: bool,
    /// Now.
    pub now: Millis,
}

/// The rule every backend applies in [`super::AgentStore::bind_agent`], once it holds the chat row
/// (`created`: this call inserted it): `Ok(Some(bound))` is the answer with nothing to change,
/// `Ok(None)` means "set the chat's agent to `op.agent`". A chat bound to another agent, or an
/// existing unbound chat when `op.existing` is false, is [`Bound::Other`].
pub fn bind_decision(chat: &ChatRow, created: bool, op: &BindAgentOp<'_>) -> Result<Option<Bound>> {
    if !created {
        check_writer(chat, op.chat)?;
    }
    Ok(match chat.agent.as_deref() {
        Some(a) if a == op.agent => Some(Bound::Bound(chat.clone())),
        Some(_) => Some(Bound::Other(chat.clone())),
        None if created || op.existing => None,
        None => Some(Bound::Other(chat.clone())),
    })
}

/// What [`super::AgentStore::bind_agent`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Bound {
    /// The chat is bound to the agent (now, or already).
    Bound(ChatRow),
    /// The chat is bound to another agent, or is someone's conversation that this call may not
    /// bind; nothing changed.
    Other(ChatRow),
}

/// [`super::AgentStore::post_message`]: a message outside any turn (an agent's message, a person's
/// message or an event for the agent's inbox), appended at the chat's end.
#[derive(Clone, Debug)]
pub struct PostMessageOp<'a> {
    /// The chat (it must exist).
    pub chat: &'a ChatId,
    /// The message (its id unique in the chat).
    pub message: &'a UiMessage,
    /// Whether it waits in the chat's agent's inbox.
    pub inbox: bool,
    /// A job written with it (the message's delivery to its platform).
    pub job: Option<&'a NewJob>,
    /// Now.
    pub now: Millis,
}

/// What [`super::AgentStore::post_message`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum PostedMessage {
    /// Saved.
    New(StoredMessage),
    /// A message of that id was there already (returned as it is; nothing changed).
    Duplicate(StoredMessage),
}

/// [`super::AgentStore::update_message`]: a message's new content, if it is still as read.
#[derive(Clone, Debug)]
pub struct UpdateMessageOp<'a> {
    /// The chat.
    pub chat: &'a ChatId,
    /// The message as it is to be (found by its id; its role and author stay).
    pub message: &'a UiMessage,
    /// The message's version when it was read ([`StoredMessage::version`]): another write since
    /// then wins, and this one changes nothing.
    pub expected_version: i64,
    /// A job written with it.
    pub job: Option<&'a NewJob>,
    /// Now.
    pub now: Millis,
}

/// What [`super::AgentStore::update_message`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum MessageUpdate {
    /// Saved.
    Done(Box<StoredMessage>),
    /// The message changed since it was read (it is returned as it is now) or is gone (`None`),
    /// or is queued; nothing changed.
    Moved(Option<Box<StoredMessage>>),
}

/// [`super::AgentStore::take_inbox`]: an agent reads its inbox.
#[derive(Clone, Debug)]
pub struct InboxOp<'a> {
    /// The agent.
    pub agent: &'a str,
    /// Only this chat's messages.
    pub chat: Option<&'a ChatId>,
    /// At most this many, oldest first.
    pub limit: u32,
    /// Now.
    pub now: Millis,
}

/// What taking a message out of the inbox does to it: marked Seen (an ack already further on —
/// Working, Done — stays). The rule every backend applies in [`super::AgentStore::take_inbox`].
pub fn inbox_seen(message: &mut UiMessage) {
    if message.metadata.ack.is_none() {
        message.metadata.ack = Some(crate::model::Ack::Seen);
    }
}
