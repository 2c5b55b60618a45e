//! The turn engine: one turn per chat (a store lease, renewed while the turn runs), the queue,
//! steering, a checkpoint after every model step, crash recovery (a lease that runs out marks its
//! turn interrupted and hands the chat on), and continuing a turn once its questions are answered.
//!
//! It knows nothing of channels or questions' hooks: what happens around a turn — offering the
//! question tool, posting a reply, drawing questions — is a [`TurnListener`]'s business, told of
//! each turn's end as an event.
//!
//! A turn: `send` is one store operation; a started turn runs in a task, step after step until a
//! final reply, a question, a failure or `max_steps`. It checkpoints after every step that calls
//! tools (the driver's steers join there) and at every `partial_checkpoint` while text streams,
//! then ends with one `end_turn` that saves the last reply and releases the chat or promotes the
//! next queued message. A turn of three steps costs four store operations (`send`, two
//! `checkpoint`s, `end_turn`). A step whose model stream is silent for `stream_idle_timeout` or
//! runs past `step_timeout` is aborted like a failed stream (the partial step kept, the turn failed
//! with `model-timeout`), so a hung model never holds a chat. A renewer extends the lease every
//! `ttl/3`; a lost lease stops the turn. `resume` continues a reply whose questions all have an
//! outcome (or ends it at once after a dismissal or withdrawal).
//!
//! Approvals: a step that calls a tool whose `approval()` is set does not run it. The call's part
//! goes `approval-requested` (`approval.descriptor`: the question) and the step's questions include
//! an approval question under the call's id, so the turn waits exactly as for the `question` tool.
//! When the turn resumes, `fill_approval_part` turns each decided call `approval-responded`
//! (approved, with who and when) or `output-denied`; `run_approved` checkpoints that decision, then
//! runs each approved call once and checkpoints its result, before the next model step. A reply
//! interrupted with an approved call still `approval-requested` was never started; one still
//! `approval-responded` may have run (`interrupted_reply` says which). Elicitations (`elicit.rs`)
//! are suspended the same way and run after the approved calls (`run_elicited`).
//!
//! Around a turn: a [`TurnListener`] (the channel layer) is asked whether to offer the question
//! tool and told every turn's start and end, in order. At the start it may return a `TurnWatch`
//! that receives the reply's text deltas and whose streamed message ids are written into the
//! reply's checkpoints (`metadata.drafts`). A running turn's stop switch (`halts`, per chat, with
//! its driver) is checked at every step boundary and raced against the model's stream: a stopped
//! turn keeps what it produced, marked `STOPPED_TEXT`, and ends like any other (the queue runs on).
//! The lease sweeper (`recover_expired_leases`, run by `Engine::spawn_worker`) takes chats whose
//! holder died, marks the interrupted turn and runs the queue. A stop (`begin_shutdown`) makes
//! ending turns hand their queue on (`run-queue` job); `drain` waits for the grace period, then
//! stops the rest and ends their leases at once.

mod elicit;
mod prompt;
mod step;
mod types;

pub use elicit::ELICITATION_STOPPED_TEXT;
pub use frogbot_channel::StopOutcome;
pub use prompt::{question_tool_spec, to_model_messages};
pub use step::NO_APPROVERS;
pub use types::*;

use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use tracing::{Instrument, debug, info_span, warn};

use super::clock::Clock;
use super::delivery::EndWhy;
use super::jobs::EngineJob;
use super::{ModelRequest, Tool, ToolSpec};
use crate::error::{Error, Result};
use crate::model::{
    ChatId, Delivery, ErrorInfo, MessageMetadata, MessagePart, QuestionOutcome, Role, ToolState,
    TurnState, UiMessage, UserId, millis_to_iso,
};
use crate::store::StoreError;
use crate::store::{
    self, AwaitOp, ChatRow, CheckpointOp, Checkpointed, DynStore, EndMode, EndTurnOp,
    InterruptedDelivery, Lease, LeaseRequest, NewChat, NewJob, NewQuestion, Resume, SendOp,
    StoredMessage, Taken, TurnEnded,
};
use prompt::HistoryCache;

/// What happens around turns, told by the turn engine (the channel layer listens).
#[async_trait]
pub(crate) trait TurnListener: Send + Sync {
    /// Whether the model gets the question tool in `chat` for the coming turn.
    async fn offers_questions(&self, chat: &ChatRow) -> bool;

    /// A turn starts in `chat`; `message_id` is the stored id of the user message it answers
    /// (`None` when a turn continues after its questions were answered), `reply` its reply so
    /// far. Must return quickly. A listener that shows the reply as it is written returns where
    /// its text goes.
    async fn turn_started(
        &self,
        chat: &ChatRow,
        message_id: Option<&str>,
        reply: &UiMessage,
    ) -> Option<TurnWatch>;

    /// A turn ended (`idle`), stopped to wait on questions (`awaiting`), or was found interrupted
    /// (`idle`, its reply carrying the error): `reply` is its reply as saved, `why` how it ended.
    /// Awaited in the turn's run, so replies of one chat are told in order.
    async fn turn_ended(&self, chat: &ChatRow, reply: &UiMessage, state: TurnState, why: EndWhy);

    /// A turn of a process that stopped was found interrupted (`reply` carrying the error):
    /// told in the chat's order like a turn's end, but not awaited — the finder may be a
    /// message of the same chat, whose own acknowledgement waits for it to return.
    async fn turn_interrupted(&self, chat: &ChatRow, reply: &UiMessage);
}

/// What a listener follows of a running turn: the reply's text as the model writes it, and the
/// messages it is shown in (kept with the reply's checkpoints, so a crash leaves them findable).
#[derive(Debug)]
pub(crate) struct TurnWatch {
    /// Receives each piece of reply text.
    pub(crate) text: mpsc::UnboundedSender<String>,
    /// The platform ids of the messages the reply is streamed into.
    pub(crate) drafts: Arc<std::sync::Mutex<Vec<String>>>,
    /// Told when `drafts` changed: the turn checkpoints them even while the model sends nothing
    /// (a first message posted after a wait), so a crash never leaves a message unknown.
    pub(crate) posted: Arc<tokio::sync::Notify>,
}

impl TurnWatch {
    /// Notes the streamed messages on `reply` before it is checkpointed.
    pub(crate) fn mark(&self, reply: &mut UiMessage) {
        let drafts = self.drafts.lock().expect("drafts");
        if reply.metadata.drafts != *drafts {
            reply.metadata.drafts = drafts.clone();
        }
    }
}

/// The text a stopped turn's reply ends with.
pub const STOPPED_TEXT: &str = "(stopped)";

/// A running turn's stop switch and who may use it.
struct Halt {
    id: u64,
    driver: Option<UserId>,
    token: tokio_util::sync::CancellationToken,
}

/// How a run starts.
pub(crate) enum Start {
    /// A new user message saved at a new turn position; `known` is the chat's version before the
    /// operation that saved it (the history cache is current if it holds that version).
    New {
        message: StoredMessage,
        known: Option<i64>,
    },
    /// Continue the waiting reply at `position`, with the latest user message's selection.
    Resume {
        reply: UiMessage,
        position: i64,
        model: Option<String>,
        reasoning: Option<String>,
    },
}

/// What [`Turns::send`] did (the store's answer, with the turn started).
pub(crate) enum SendResult {
    Started(TurnHandle),
    Queued {
        message_id: String,
        delivery: Delivery,
    },
    Duplicate,
}

/// A run in progress in this process.
struct ActiveRun {
    lease: Lease,
    stop: tokio::sync::oneshot::Sender<()>,
}

/// A task aborted when this is dropped (a turn's lease renewer ends with its run, also when the
/// run is stopped mid-way).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The turn engine.
pub(crate) struct Turns {
    pub(crate) store: DynStore,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) offers: Vec<ModelOffer>,
    tools: Vec<Arc<dyn Tool>>,
    /// Tools asked for at every step ([`crate::agent::ToolSource`]).
    source: OnceLock<Arc<dyn crate::agent::ToolSource>>,
    /// The tools offered, without and with the question tool (built once, shared by every
    /// request).
    tool_specs: Arc<[ToolSpec]>,
    tool_specs_with_question: Arc<[ToolSpec]>,
    pub(crate) config: EngineConfig,
    pub(crate) process: String,
    events: broadcast::Sender<ChatEvent>,
    listener: OnceLock<Weak<dyn TurnListener>>,
    active: AtomicUsize,
    idle: tokio::sync::Notify,
    stopping: AtomicBool,
    runs: Mutex<HashMap<u64, ActiveRun>>,
    /// The stop switch of each chat's running turn in this process.
    halts: Mutex<HashMap<ChatId, Halt>>,
    next_run: AtomicU64,
    history: HistoryCache,
    /// The run-at times of the jobs this process scheduled: its workers wake for them without
    /// waiting for a poll (a store that pushes also announces them to the other processes).
    jobs: broadcast::Sender<crate::model::Millis>,
}

impl std::fmt::Debug for Turns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turns")
            .field("process", &self.process)
            .finish_non_exhaustive()
    }
}

/// How many chats with an expired lease one sweep recovers.
const SWEEP_BATCH: u32 = 32;

impl Turns {
    pub(crate) fn new(
        store: DynStore,
        clock: Arc<dyn Clock>,
        offers: Vec<ModelOffer>,
        tools: Vec<Arc<dyn Tool>>,
        config: EngineConfig,
    ) -> Self {
        let (events, _) = broadcast::channel(1024);
        let plain: Vec<ToolSpec> = tools.iter().map(|t| t.spec()).collect();
        let mut with_question = plain.clone();
        with_question.push(question_tool_spec());
        Self {
            tool_specs: plain.into(),
            tool_specs_with_question: with_question.into(),
            store,
            clock,
            offers,
            tools,
            source: OnceLock::new(),
            history: HistoryCache::new(config.history_cache_messages),
            config,
            process: format!("p-{}", uuid::Uuid::new_v4().simple()),
            events,
            listener: OnceLock::new(),
            active: AtomicUsize::new(0),
            idle: tokio::sync::Notify::new(),
            stopping: AtomicBool::new(false),
            runs: Mutex::new(HashMap::new()),
            halts: Mutex::new(HashMap::new()),
            next_run: AtomicU64::new(0),
            jobs: broadcast::channel(256).0,
        }
    }

    /// Wakes this process's workers for a job due at `run_at` that it scheduled.
    pub(crate) fn job_scheduled(&self, run_at: crate::model::Millis) {
        let _ = self.jobs.send(run_at);
    }

    /// Wakes this process's workers for the jobs an operation scheduled (the earliest).
    pub(crate) fn jobs_scheduled<'a>(&self, jobs: impl IntoIterator<Item = Option<&'a NewJob>>) {
        if let Some(at) = jobs.into_iter().flatten().map(|j| j.run_at).min() {
            self.job_scheduled(at);
        }
    }

    /// The run-at times of the jobs this process schedules from now on.
    pub(crate) fn scheduled_jobs(&self) -> broadcast::Receiver<crate::model::Millis> {
        self.jobs.subscribe()
    }

    pub(crate) fn set_listener(&self, listener: Weak<dyn TurnListener>) {
        let _ = self.listener.set(listener);
    }

    fn listener(&self) -> Option<Arc<dyn TurnListener>> {
        self.listener.get().and_then(Weak::upgrade)
    }

    pub(crate) fn now(&self) -> crate::model::Millis {
        self.clock.now()
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<ChatEvent> {
        self.events.subscribe()
    }

    /// A message just saved: noted in the chat's history cache, and shown.
    fn note_and_show(&self, chat: &ChatId, saved: &StoredMessage) {
        self.history.note(chat, &[saved]);
        self.emit_message(chat, &saved.message);
    }

    /// The reply an ended turn saved (noted and shown), or `unsaved` when the end saved none.
    fn saved_or(
        &self,
        chat: &ChatId,
        saved: Option<StoredMessage>,
        unsaved: UiMessage,
    ) -> UiMessage {
        match saved {
            Some(s) => {
                self.note_and_show(chat, &s);
                s.message
            }
            None => unsaved,
        }
    }

    pub(crate) fn emit_message(&self, chat: &ChatId, message: &UiMessage) {
        if self.events.receiver_count() == 0 {
            return; // nobody listens: no copy
        }
        let _ = self.events.send(ChatEvent::Message {
            chat_id: chat.clone(),
            message: Box::new(message.clone()),
        });
    }

    pub(crate) fn emit_state(&self, chat: &ChatId, state: TurnState) {
        let _ = self.events.send(ChatEvent::State {
            chat_id: chat.clone(),
            state,
        });
    }

    pub(crate) fn holder(&self) -> String {
        format!("{}/{}", self.process, uuid::Uuid::new_v4().simple())
    }

    pub(crate) fn lease_request(&self, driver: Option<UserId>) -> LeaseRequest {
        let now = self.now();
        LeaseRequest {
            holder: self.holder(),
            driver,
            ttl_ms: self.config.turn_lease_ms,
            now,
            interrupted: Some(InterruptedDelivery {
                job: super::delivery::interrupted_job,
                run_at: now + self.delivery_grace_ms(),
            }),
        }
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    pub(crate) fn begin_shutdown(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Checks a model/reasoning choice against the offers; returns the resolved model id.
    pub(crate) fn check_selection(
        &self,
        model: Option<&str>,
        reasoning: Option<&str>,
    ) -> Result<String> {
        let id = model.unwrap_or(&self.config.default_model);
        let Some(offer) = self.offers.iter().find(|o| o.id == id) else {
            return Err(Error::SelectionUnavailable {
                model: id.to_string(),
                reasoning: None,
            });
        };
        if let Some(r) = reasoning
            && !offer.reasoning.iter().any(|o| o == r)
        {
            return Err(Error::SelectionUnavailable {
                model: id.to_string(),
                reasoning: Some(r.to_string()),
            });
        }
        Ok(id.to_string())
    }

    /// The model and reasoning option a chat's messages chose last (`model ID` in a thread), as
    /// of the chat row's `version`.
    pub(crate) async fn chat_choice(
        &self,
        chat: &ChatId,
        version: i64,
    ) -> Result<Option<(String, Option<String>)>> {
        self.history.choice(&self.store, chat, version).await
    }

    /// The models people may choose, each with its reasoning options (the default model first;
    /// not the built-in model of asks).
    pub(crate) fn offers(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = self
            .offers
            .iter()
            .filter(|o| o.id != crate::agent::ask::ASK_MODEL)
            .map(|o| (o.id.clone(), o.reasoning.clone()))
            .collect();
        out.sort_by_key(|(id, _)| *id != self.config.default_model);
        out
    }

    fn offered(&self, model: Option<&str>, reasoning: Option<&str>) -> Result<ModelOffer> {
        let id = self.check_selection(model, reasoning)?;
        Ok(self
            .offers
            .iter()
            .find(|o| o.id == id)
            .cloned()
            .expect("checked above"))
    }

    // ---- starting turns ------------------------------------------------------------------------

    /// Sends a user message: one store operation creates or opens the chat, and starts a turn
    /// (the chat was idle) or saves the message queued or as a steer.
    pub(crate) async fn send(
        self: &Arc<Self>,
        req: SendMessage,
        queue_if_busy: bool,
    ) -> Result<SendResult> {
        let model = self.check_selection(req.model.as_deref(), req.reasoning.as_deref())?;
        if req.parts.is_empty() {
            return Err(Error::invalid("a message needs at least one part"));
        }
        if req.channel.is_none()
            && req.chat_id.is_channel_space()
            && self.store.get_chat(&req.chat_id).await?.is_none()
        {
            // Only a channel creates a chat in the channel chats' id space.
            return Err(Error::ChannelChat {
                chat_id: req.chat_id.clone(),
                reason: "has an id in the channel chats' space: only a channel creates it",
            });
        }
        let now = self.now();
        let message = UiMessage {
            id: req
                .id
                .clone()
                .unwrap_or_else(|| format!("msg_{}", uuid::Uuid::new_v4().simple())),
            role: Role::User,
            parts: req.parts,
            metadata: MessageMetadata {
                author: req.author.clone(),
                model: Some(model),
                reasoning: req.reasoning,
                speaker: req.speaker,
                context: req.context,
                created_at: millis_to_iso(now),
                ..Default::default()
            },
        };
        let chat = NewChat {
            chat_id: req.chat_id.clone(),
            owner: req.author.clone(),
            channel: req.channel,
        };
        let lease = self.lease_request(req.author.clone());
        let sent = self
            .store
            .send(&SendOp {
                chat: &chat,
                message: &message,
                delivery: req.delivery,
                lease: &lease,
                queue_if_busy,
            })
            .await?;
        match sent {
            store::Sent::Started {
                chat,
                prior_version,
                lease,
                message,
                interrupted,
                ..
            } => {
                if let Some(reply) = &interrupted {
                    self.history.note(&chat.chat_id, &[reply]);
                    self.told_interrupted(&chat, reply).await;
                }
                self.note_and_show(&chat.chat_id, &message);
                self.emit_state(&chat.chat_id, TurnState::Running);
                Ok(SendResult::Started(self.spawn_run(
                    lease,
                    chat,
                    Start::New {
                        message,
                        known: Some(prior_version),
                    },
                )))
            }
            store::Sent::Queued {
                chat,
                message,
                delivery,
                ..
            } => {
                self.emit_message(&chat.chat_id, &message.message);
                Ok(SendResult::Queued {
                    message_id: message.message.id,
                    delivery,
                })
            }
            store::Sent::Duplicate { .. } => Ok(SendResult::Duplicate),
            store::Sent::Busy { chat } => Err(Error::TurnInProgress {
                chat_id: chat.chat_id,
            }),
        }
    }

    /// A reply marked interrupted: announced like a turn's end, so its channel says so.
    async fn told_interrupted(&self, chat: &ChatRow, reply: &StoredMessage) {
        warn!(chat_id = %chat.chat_id, "the previous turn was interrupted: its process stopped");
        self.emit_message(&chat.chat_id, &reply.message);
        // Its delivery job falls due after the grace (at the latest: workers read the due times).
        self.job_scheduled(self.now() + self.delivery_grace_ms());
        // Owed to its thread like any reply: the take-over that marked it wrote its delivery
        // job ([`LeaseRequest::interrupted`]), so this process dying now leaves it to another.
        if let Some(l) = self.listener() {
            l.turn_interrupted(chat, &reply.message).await;
        }
    }

    /// If the chat is idle (its lease free, or run out) and has queued messages, promotes the
    /// oldest and runs the queue in the background; a turn the expired lease ended is marked
    /// interrupted. Returns whether a turn was started.
    pub(crate) async fn run_queue(self: &Arc<Self>, chat: &ChatId) -> Result<bool> {
        if self.is_stopping() {
            return Ok(false);
        }
        let Some(Taken { interrupted, next }) = self
            .store
            .take_chat(chat, &self.lease_request(None))
            .await?
        else {
            return Ok(false);
        };
        let row = self.store.get_chat(chat).await?;
        if let (Some(reply), Some(row)) = (&interrupted, &row) {
            self.history.note(chat, &[reply]);
            self.told_interrupted(row, reply).await;
        }
        match (next, row) {
            (Some((lease, next)), Some(row)) => {
                self.note_and_show(chat, &next);
                self.emit_state(chat, TurnState::Running);
                drop(self.spawn_run(
                    lease,
                    row,
                    Start::New {
                        message: next,
                        known: None,
                    },
                ));
                Ok(true)
            }
            _ => {
                self.emit_state(chat, TurnState::Idle);
                Ok(false)
            }
        }
    }

    /// Recovers chats whose turn lease ran out without being released (their process stopped):
    /// each one's interrupted turn is marked and its queue runs, oldest first. Any process may do
    /// it; the conditional take of the lease lets exactly one. Returns how many were taken.
    pub(crate) async fn recover_expired_leases(self: &Arc<Self>) -> Result<usize> {
        if self.is_stopping() {
            return Ok(0);
        }
        let chats = self.store.expired_leases(self.now(), SWEEP_BATCH).await?;
        let mut taken = 0;
        for chat in chats {
            match self.run_queue(&chat).await {
                Ok(_) => taken += 1,
                Err(e) => warn!(chat_id = %chat, error = %e, "recovering an expired turn lease"),
            }
        }
        Ok(taken)
    }

    /// Continues the turn whose reply `message_id` waits on questions once all of them have an
    /// outcome: the answers go into the reply's tool calls and the agent continues (or, after a
    /// dismissal or withdrawal, the turn ends). When a live lease holds the chat (a process that
    /// has not released it yet, or died), a durable job tries again at the lease's expiry.
    pub(crate) async fn resume(
        self: &Arc<Self>,
        chat: &ChatId,
        message_id: &str,
        driver: Option<UserId>,
    ) -> Result<TurnState> {
        let resumed = self
            .store
            .resume_turn(chat, message_id, &self.lease_request(driver.clone()))
            .await?;
        self.resumed(chat, message_id, driver, resumed).await
    }

    /// Goes on from what [`TurnStore::resume_turn`] found (or what `record_outcome` found when it
    /// continued the turn in the same transaction): runs the continued turn, ends it on a
    /// dismissal, schedules a retry while another lease holds the chat.
    pub(crate) async fn resumed(
        self: &Arc<Self>,
        chat: &ChatId,
        message_id: &str,
        driver: Option<UserId>,
        resumed: Resume,
    ) -> Result<TurnState> {
        let (lease, stored, questions, model, reasoning) = match resumed {
            Resume::Taken {
                lease,
                reply,
                questions,
                model,
                reasoning,
            } => (lease, reply, questions, model, reasoning),
            Resume::Open => return Ok(TurnState::Awaiting),
            Resume::Busy { until } => {
                let job = EngineJob::ResumeChat {
                    chat: chat.clone(),
                    message: message_id.to_string(),
                    driver,
                };
                self.store.enqueue_job(&job.to_new_job(until)).await?;
                self.job_scheduled(until);
                return Ok(TurnState::Running);
            }
            Resume::NotWaiting => {
                return Ok(self
                    .store
                    .get_chat(chat)
                    .await?
                    .map(|r| r.state(self.now()))
                    .unwrap_or(TurnState::Idle));
            }
        };
        let Some(row) = self.store.get_chat(chat).await? else {
            return Ok(TurnState::Idle);
        };
        let mut reply = stored.message;
        let mut stop = false;
        let UiMessage {
            parts, metadata, ..
        } = &mut reply;
        for part in parts.iter_mut() {
            let MessagePart::Tool(t) = part else { continue };
            if let Some(e) = metadata.elicitations.get_mut(&t.tool_call_id)
                && t.state == ToolState::InputAvailable
            {
                // A call that waits for input: its outcome is handed to it when the turn
                // continues (`run_elicited`). A dismissal declines and the call goes on; a
                // withdrawal ends the turn, as it does for every question.
                if e.waiting()
                    && let Some(q) = questions.iter().find(|q| q.tool_call_id == e.id)
                {
                    let outcome = q.outcome.clone().unwrap_or(QuestionOutcome::Expired(None));
                    stop |= outcome == QuestionOutcome::Cancelled;
                    e.descriptor = None;
                    e.outcome = Some(outcome);
                }
                continue;
            }
            let Some(q) = questions.iter().find(|q| q.tool_call_id == t.tool_call_id) else {
                continue;
            };
            // A waiting call without an outcome cannot be here (the turn resumes once all have
            // one); it reads as expired, as before.
            let outcome = q.outcome.clone().unwrap_or(QuestionOutcome::Expired(None));
            if t.state == ToolState::ApprovalRequested {
                // Decided: approved calls run when the turn continues, denied ones never do.
                let by = q.actor.as_ref().and_then(crate::model::decided_by);
                store::fill_approval_part(t, &outcome, by, q.outcome_at);
                continue;
            }
            stop |= store::fill_question_part(t, &outcome);
        }
        reply.metadata.approvals = store::approvals_of(&reply);
        // The messages noted on the reply drew the text before its questions, which is posted:
        // the continuation streams (and notes) its own.
        reply.metadata.drafts.clear();
        let position = stored.position.unwrap_or_default();
        if stop {
            for part in reply.parts.iter_mut() {
                if let MessagePart::Tool(t) = part
                    && t.state == ToolState::ApprovalResponded
                {
                    t.state = ToolState::OutputError;
                    t.error_text = Some(store::APPROVED_STOPPED_TEXT.into());
                }
            }
            self.cancel_elicited(
                &mut reply,
                &lease,
                row.channel.as_ref().map(|c| c.platform.as_str()),
            );
            // A dismissal or withdrawal ends the turn here and now: the caller is told the state
            // that follows (idle, or running when a queued message was promoted).
            return self.end_stopped(lease, row, reply, position).await;
        }
        self.emit_state(chat, TurnState::Running);
        let start = Start::Resume {
            reply,
            position,
            model,
            reasoning,
        };
        drop(self.spawn_run(lease, row, start).events);
        Ok(TurnState::Running)
    }

    /// Ends the turn holding `lease` (one store operation): saves `reply` at its position, then
    /// releases the chat or promotes its oldest queued message — or, while this process stops,
    /// releases it with a `run-queue` job so another process (or the restart) runs the queue.
    async fn end_turn(
        &self,
        lease: &Lease,
        chat: &ChatId,
        reply: Option<(&UiMessage, i64)>,
        delivery: Option<EngineJob>,
    ) -> Result<TurnEnded> {
        let delivery = delivery.map(|d| d.to_new_job(self.now() + self.delivery_grace_ms()));
        let job;
        let mode = if self.is_stopping() {
            job = EngineJob::RunQueue { chat: chat.clone() }.to_new_job(self.now());
            EndMode::Handoff(&job)
        } else {
            EndMode::Next
        };
        let ended = self
            .store
            .end_turn(&EndTurnOp {
                lease,
                reply,
                mode,
                now: self.now(),
                delivery: delivery.as_ref(),
            })
            .await?;
        let handoff = match mode {
            EndMode::Handoff(job) => Some(job),
            EndMode::Next => None,
        };
        self.jobs_scheduled([handoff, delivery.as_ref()]);
        Ok(ended)
    }

    /// When a reply's delivery job falls due: after the grace its process has to post it.
    fn delivery_grace_ms(&self) -> crate::model::Millis {
        crate::model::Millis::try_from(self.config.delivery_grace.as_millis())
            .unwrap_or(crate::model::Millis::MAX / 2)
    }

    /// Saves the reply of a turn stopped by a dismissal or withdrawal and ends the turn (one
    /// operation), promoting the queue.
    async fn end_stopped(
        self: &Arc<Self>,
        lease: Lease,
        chat: ChatRow,
        reply: UiMessage,
        position: i64,
    ) -> Result<TurnState> {
        let owed = super::delivery::owed(&chat, &reply, EndWhy::Reply, false);
        let ended = self
            .end_turn(&lease, &chat.chat_id, Some((&reply, position)), owed)
            .await?;
        let (saved, promoted) = match ended {
            TurnEnded::Released { reply } | TurnEnded::HandedOn { reply, .. } => (reply, None),
            TurnEnded::Promoted { reply, lease, next } => (reply, Some((lease, next))),
        };
        let reply = self.saved_or(&chat.chat_id, saved, reply);
        if let Some(l) = self.listener() {
            l.turn_ended(&chat, &reply, TurnState::Idle, EndWhy::Reply)
                .await;
        }
        match promoted {
            None => {
                self.emit_state(&chat.chat_id, TurnState::Idle);
                Ok(TurnState::Idle)
            }
            Some((lease, next)) => {
                self.note_and_show(&chat.chat_id, &next);
                self.emit_state(&chat.chat_id, TurnState::Running);
                drop(self.spawn_run(
                    lease,
                    chat,
                    Start::New {
                        message: next,
                        known: None,
                    },
                ));
                Ok(TurnState::Running)
            }
        }
    }

    /// Stops the running turn of `chat` in this process when `by` drives it (a turn without a
    /// driver may be stopped by anyone who may write the chat).
    pub(crate) fn stop(&self, chat: &ChatId, by: Option<&UserId>, exact: bool) -> StopOutcome {
        let halts = self.halts.lock().expect("halts");
        match halts.get(chat) {
            None => StopOutcome::NotRunning,
            // `exact`: only the driver, and a turn without one only by an anonymous caller.
            Some(h) if (exact || h.driver.is_some()) && h.driver.as_ref() != by => {
                StopOutcome::NotDriver
            }
            Some(h) => {
                h.token.cancel();
                StopOutcome::Stopping
            }
        }
    }

    // ---- running turns -------------------------------------------------------------------------

    fn spawn_run(self: &Arc<Self>, lease: Lease, chat: ChatRow, start: Start) -> TurnHandle {
        let (tx, rx) = mpsc::unbounded_channel();
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let message_id = match &start {
            Start::New { message, .. } => message.message.id.clone(),
            Start::Resume { reply, .. } => reply.id.clone(),
        };
        let turns = self.clone();
        let span = info_span!("turn", chat_id = %lease.chat_id, turn_id = %lease.holder);
        turns.active.fetch_add(1, Ordering::SeqCst);
        let run_id = turns.next_run.fetch_add(1, Ordering::SeqCst);
        let (stop, stopped) = tokio::sync::oneshot::channel();
        turns.runs.lock().expect("runs").insert(
            run_id,
            ActiveRun {
                lease: lease.clone(),
                stop,
            },
        );
        tokio::spawn(
            async move {
                tokio::select! {
                    () = turns.run(lease, chat, start, tx, done_tx) => {}
                    _ = stopped => debug!("run stopped at shutdown"),
                }
                turns.runs.lock().expect("runs").remove(&run_id);
                if turns.active.fetch_sub(1, Ordering::SeqCst) == 1 {
                    turns.idle.notify_waiters();
                }
            }
            .instrument(span),
        );
        TurnHandle {
            message_id,
            events: rx,
            done,
        }
    }

    fn spawn_renewer(&self, lease: Lease, lost: Arc<AtomicBool>) -> AbortOnDrop {
        let store = self.store.clone();
        let clock = self.clock.clone();
        let ttl = self.config.turn_lease_ms;
        let every = Duration::from_millis((ttl / 3).max(1) as u64);
        AbortOnDrop(tokio::spawn(async move {
            let mut lease = lease;
            loop {
                tokio::time::sleep(every).await;
                if let Err(e) = store.renew_lease(&mut lease, ttl, clock.now()).await {
                    warn!(chat_id = %lease.chat_id, error = %e, "turn lease lost");
                    lost.store(true, Ordering::SeqCst);
                    return;
                }
            }
        }))
    }

    /// Runs turns under `lease` until the chat is idle (promoting the queue) or waits on a question.
    async fn run(
        self: &Arc<Self>,
        mut lease: Lease,
        chat: ChatRow,
        start: Start,
        tx: mpsc::UnboundedSender<TurnEvent>,
        done: tokio::sync::oneshot::Sender<Result<TurnOutcome>>,
    ) {
        let mut done = Some(done);
        let lost = Arc::new(AtomicBool::new(false));
        let renewer = self.spawn_renewer(lease.clone(), lost.clone());
        let listener = self.listener();
        let mut first = Some(tx);
        let mut next = Some(start);
        let result = loop {
            let Some(start) = next.take() else {
                break Err(Error::Internal("a turn loop has no turn to run".into()));
            };
            // Only the first turn streams to the caller; promoted turns are saved and broadcast.
            let tx = first.take().unwrap_or_else(|| mpsc::unbounded_channel().0);
            let clock = crate::metrics::TurnClock::start(&self.config.default_model);
            let ended = match self.run_turn(&mut lease, &chat, start, &tx, &lost).await {
                Ok(o) => o,
                Err(e) => break Err(e),
            };
            let (outcome, pending) = match ended {
                TurnEnd::Awaiting(reply) => {
                    clock.finished(&reply, "Awaiting");
                    let outcome = TurnOutcome {
                        state: TurnState::Awaiting,
                        reply: Some(reply),
                    };
                    self.emit_state(&chat.chat_id, TurnState::Awaiting);
                    if let (Some(l), Some(reply)) = (&listener, &outcome.reply) {
                        l.turn_ended(&chat, reply, TurnState::Awaiting, EndWhy::Reply)
                            .await;
                    }
                    let _ = tx.send(TurnEvent::Finish {
                        state: TurnState::Awaiting,
                    });
                    break Ok(outcome);
                }
                TurnEnd::Idle { reply, saved, why } => ((reply, why), !saved),
            };
            let ((outcome, why), pending) = (outcome, pending);
            let (outcome, position) = outcome;
            clock.finished(&outcome, &format!("{why:?}"));
            // The turn ended: save its last reply and release the chat, or promote the oldest
            // queued message under the same lease — one store operation. A stopping process hands
            // the queue on instead.
            let owed = super::delivery::owed(&chat, &outcome, why, false);
            let ended = self
                .end_turn(
                    &lease,
                    &chat.chat_id,
                    pending.then_some((&outcome, position)),
                    owed,
                )
                .await;
            let ended = match ended {
                Ok(e) => e,
                Err(e) => break Err(e),
            };
            let (saved, promoted) = match ended {
                TurnEnded::Released { reply } => (reply, None),
                TurnEnded::Promoted { reply, lease, next } => (reply, Some((lease, next))),
                TurnEnded::HandedOn { reply, queued } => {
                    if queued {
                        debug!(chat_id = %chat.chat_id, "stopping: the queue is handed on");
                    }
                    (reply, None)
                }
            };
            let reply = self.saved_or(&chat.chat_id, saved, outcome);
            if promoted.is_none() {
                self.emit_state(&chat.chat_id, TurnState::Idle);
            }
            if let Some(l) = &listener {
                l.turn_ended(&chat, &reply, TurnState::Idle, why).await;
            }
            let outcome = TurnOutcome {
                state: TurnState::Idle,
                reply: Some(reply),
            };
            if let Some(done) = done.take() {
                let _ = tx.send(TurnEvent::Finish {
                    state: TurnState::Idle,
                });
                let _ = done.send(Ok(outcome.clone()));
            }
            match promoted {
                None => break Ok(outcome),
                Some((promoted_lease, promoted)) => {
                    debug!(message_id = %promoted.message.id, "promoted queued message");
                    self.note_and_show(&chat.chat_id, &promoted);
                    lease = promoted_lease;
                    next = Some(Start::New {
                        message: promoted,
                        known: None,
                    });
                }
            }
        };
        drop(renewer);
        if let Err(e) = &result {
            crate::metrics::turn_errored();
            warn!(error = %e, "turn ended with an error");
        }
        if let Some(done) = done.take() {
            let _ = done.send(result);
        }
    }

    /// Runs one turn: model steps until a final reply, a pending question, a failure or
    /// `max_steps`.
    async fn run_turn(
        self: &Arc<Self>,
        lease: &mut Lease,
        chat: &ChatRow,
        start: Start,
        tx: &mpsc::UnboundedSender<TurnEvent>,
        lost: &AtomicBool,
    ) -> Result<TurnEnd> {
        let chat_id = chat.chat_id.clone();
        let resuming = matches!(start, Start::Resume { .. });
        let started_by = match &start {
            Start::New { message, .. } => Some(message.message.id.clone()),
            Start::Resume { .. } => None,
        };
        // A command's message is answered without the model.
        let command_reply = match &start {
            Start::New { message, .. } => command_reply(&message.message),
            Start::Resume { .. } => None,
        };
        let halt = tokio_util::sync::CancellationToken::new();
        let halt_id = self.next_run.fetch_add(1, Ordering::SeqCst);
        self.halts.lock().expect("halts").insert(
            chat_id.clone(),
            Halt {
                id: halt_id,
                driver: lease.driver.clone(),
                token: halt.clone(),
            },
        );
        let _unhalt = Unhalt {
            turns: self,
            chat: &chat_id,
            id: halt_id,
        };
        let (mut reply, position, mut model, mut reasoning, known) = match start {
            Start::New { message, known } => {
                let reply = UiMessage {
                    id: format!("msg_{}", uuid::Uuid::new_v4().simple()),
                    role: Role::Assistant,
                    parts: vec![],
                    metadata: MessageMetadata {
                        model: message.message.metadata.model.clone(),
                        reasoning: message.message.metadata.reasoning.clone(),
                        created_at: millis_to_iso(self.now()),
                        ..Default::default()
                    },
                };
                (
                    reply,
                    message.position.unwrap_or_default(),
                    message.message.metadata.model.clone(),
                    message.message.metadata.reasoning.clone(),
                    known,
                )
            }
            Start::Resume {
                reply,
                position,
                model,
                reasoning,
            } => (reply, position, model, reasoning, None),
        };
        crate::metrics::turn_started(model.as_deref().unwrap_or(&self.config.default_model));
        let watch = match (&chat.channel, self.listener()) {
            (Some(_), Some(l)) => l.turn_started(chat, started_by.as_deref(), &reply).await,
            _ => None,
        };
        let offer_questions = match (&chat.channel, self.listener()) {
            (None, _) => true,
            (Some(_), Some(l)) => l.offers_questions(chat).await,
            (Some(_), None) => false,
        };
        // The history before this turn's reply: from memory, reading only what is newer.
        let mut history = self
            .history
            .history(&self.store, &chat_id, known, &reply.id)
            .await?;
        let _ = tx.send(TurnEvent::Start {
            message_id: reply.id.clone(),
        });
        if let Some(text) = command_reply {
            reply.parts.push(MessagePart::text(text));
            return Ok(final_reply(watch.as_ref(), reply, position));
        }
        if resuming {
            let extra = self.step_tools(chat.channel.as_ref().map(|c| c.platform.as_str()));
            let mut asked = self
                .run_approved(lease, &mut reply, position, tx, &extra, offer_questions)
                .await?;
            asked.extend(
                self.run_elicited(lease, &mut reply, position, tx, &extra, offer_questions)
                    .await?,
            );
            if !asked.is_empty() {
                // A call asks (again): the turn waits on it.
                if let Some(w) = &watch {
                    w.mark(&mut reply);
                }
                return self
                    .await_answers(lease, chat, reply, position, asked)
                    .await;
            }
        }
        let mut steps_done = reply
            .parts
            .iter()
            .filter(|p| prompt::is_step_start(p))
            .count() as u32;
        loop {
            if lost.load(Ordering::SeqCst) {
                return Err(Error::Store(StoreError::LeaseLost {
                    chat_id: chat_id.clone(),
                }));
            }
            if halt.is_cancelled() {
                debug!("stopped by the driving user");
                return Ok(stopped(reply, position));
            }
            if steps_done >= self.config.max_steps {
                debug!(steps = steps_done, "max_steps reached");
                return Ok(TurnEnd::Idle {
                    reply: with_position(reply, position),
                    saved: false,
                    why: EndWhy::MaxSteps,
                });
            }
            let offer = match self.offered(model.as_deref(), reasoning.as_deref()) {
                Ok(o) => o,
                Err(e) => {
                    return Ok(self.fail(
                        reply,
                        position,
                        tx,
                        "selection-unavailable",
                        &e.to_string(),
                    ));
                }
            };
            let extra = self.step_tools(chat.channel.as_ref().map(|c| c.platform.as_str()));
            let mut request =
                self.request(&history, &reply, reasoning.clone(), offer_questions, &extra);
            request.messages = crate::agent::files::read_for_model(
                &self.store,
                &self.config.files,
                &chat_id,
                request.messages,
            )
            .await;
            let step_no = steps_done + 1;
            let step = self
                .run_step(
                    lease,
                    &mut reply,
                    position,
                    &offer,
                    request,
                    tx,
                    lost,
                    &halt,
                    watch.as_ref(),
                    &extra,
                    offer_questions,
                )
                .instrument(
                    info_span!("step", chat_id = %chat_id, turn_id = %lease.holder, step = step_no),
                )
                .await?;
            steps_done += 1;
            match step {
                step::StepEnd::Failed(info) => {
                    return Ok(self.fail(reply, position, tx, &info.code, &info.message));
                }
                step::StepEnd::Stopped => {
                    debug!("stopped by the driving user mid-step");
                    return Ok(stopped(reply, position));
                }
                step::StepEnd::Questions(calls) => {
                    // The messages streamed so far are saved with the wait, so a process that
                    // dies before posting the rest edits them instead of posting them again.
                    if let Some(w) = &watch {
                        w.mark(&mut reply);
                    }
                    return self
                        .await_answers(lease, chat, reply, position, calls)
                        .await;
                }
                step::StepEnd::Final => {
                    return Ok(final_reply(watch.as_ref(), reply, position));
                }
                step::StepEnd::Continue => {
                    // Checkpoint the step; the driving user's steers join here, at the step
                    // boundary, before the next model call.
                    if let Some(w) = &watch {
                        w.mark(&mut reply);
                    }
                    let saved = self
                        .store
                        .checkpoint(&CheckpointOp {
                            lease,
                            reply: &reply,
                            position,
                            join_steers: true,
                            now: self.now(),
                        })
                        .await?;
                    let mut noted: Vec<&StoredMessage> = saved.steers.iter().collect();
                    noted.push(&saved.reply);
                    self.history.note(&chat_id, &noted);
                    if let Some(last) = saved.steers.last() {
                        model = last.message.metadata.model.clone();
                        reasoning = last.message.metadata.reasoning.clone();
                        reply.metadata.model = model.clone();
                        reply.metadata.reasoning = reasoning.clone();
                        for s in &saved.steers {
                            let mut joined = Vec::new();
                            to_model_messages(&s.message, &mut joined);
                            history.extend(joined);
                            self.emit_message(&chat_id, &s.message);
                        }
                    }
                    self.emit_message(&chat_id, &saved.reply.message);
                }
            }
        }
    }

    /// A continued turn first runs the calls people approved (each once: the decision is saved
    /// before any runs, so a process that dies meanwhile leaves them marked, never run again),
    /// then saves their results; denied calls are told to the stream. Returns the questions
    /// approved calls ask while they run (elicitations): the turn waits on them.
    async fn run_approved(
        &self,
        lease: &Lease,
        reply: &mut UiMessage,
        position: i64,
        tx: &mpsc::UnboundedSender<TurnEvent>,
        extra: &[(Arc<dyn Tool>, ToolSpec)],
        can_ask: bool,
    ) -> Result<Vec<(String, crate::model::QuestionInput)>> {
        let mut approved = Vec::new();
        for (i, part) in reply.parts.iter().enumerate() {
            let MessagePart::Tool(t) = part else { continue };
            match t.state {
                ToolState::ApprovalResponded => approved.push(i),
                ToolState::OutputDenied => {
                    let _ = tx.send(TurnEvent::ToolOutputDenied {
                        tool_call_id: t.tool_call_id.clone(),
                    });
                }
                _ => {}
            }
        }
        if approved.is_empty() {
            return Ok(Vec::new());
        }
        // Who approved and when, saved before anything runs.
        self.checkpoint_as_is(lease, reply, position).await?;
        let mut asked = Vec::new();
        for i in approved {
            let MessagePart::Tool(t) = &reply.parts[i] else {
                continue;
            };
            let tool = self.find_tool(&t.tool_name, extra).cloned();
            let ctx = call_context(lease, &reply.id, &t.tool_call_id);
            let end = match tool {
                Some(tool) => {
                    debug!(tool = %t.tool_name, call = %t.tool_call_id, "running an approved call");
                    let first = tool.call_or_ask(t.input.clone(), ctx.clone()).await;
                    self.drive_call(&tool, lease, &ctx, first, 0, can_ask).await
                }
                None => elicit::CallEnd::no_longer_offered(&t.tool_name),
            };
            asked.extend(Self::place_call_end(reply, i, end, tx));
        }
        if asked.is_empty() {
            self.save_and_show(lease, reply, position).await?;
        }
        // Otherwise saved with the wait.
        Ok(asked)
    }

    /// Checkpoints `reply` as it stands, no steers joined: a continued turn's decisions and the
    /// results of its calls, the text of a step while it streams.
    pub(super) async fn checkpoint_as_is(
        &self,
        lease: &Lease,
        reply: &UiMessage,
        position: i64,
    ) -> Result<Checkpointed> {
        Ok(self
            .store
            .checkpoint(&CheckpointOp {
                lease,
                reply,
                position,
                join_steers: false,
                now: self.now(),
            })
            .await?)
    }

    /// Saves `reply` as it stands (no steers joined) and shows it: the results of the calls a
    /// continued turn ran.
    pub(super) async fn save_and_show(
        &self,
        lease: &Lease,
        reply: &UiMessage,
        position: i64,
    ) -> Result<()> {
        let saved = self.checkpoint_as_is(lease, reply, position).await?;
        self.note_and_show(&lease.chat_id, &saved.reply);
        Ok(())
    }

    /// The turn stops to wait on its questions: one operation saves the reply as the waiting
    /// message, creates the question records (and the expiry job) and releases the lease.
    async fn await_answers(
        &self,
        lease: &Lease,
        chat_row: &ChatRow,
        mut reply: UiMessage,
        position: i64,
        calls: Vec<(String, crate::model::QuestionInput)>,
    ) -> Result<TurnEnd> {
        let now = self.now();
        let chat = lease.chat_id.clone();
        let rows: Vec<NewQuestion> = calls
            .iter()
            .enumerate()
            .map(|(i, (id, input))| NewQuestion {
                tool_call_id: id.clone(),
                chat_id: chat.clone(),
                message_id: reply.id.clone(),
                call_index: i as i64,
                input: input.clone(),
                answer_deadline: input.expires_in_seconds.map(|s| {
                    now.saturating_add(i64::try_from(s).unwrap_or(i64::MAX).saturating_mul(1000))
                }),
            })
            .collect();
        for r in &rows {
            if let Some(deadline) = r.answer_deadline {
                let elicited = |t: &crate::model::ToolPart| {
                    reply
                        .metadata
                        .elicitations
                        .get(&t.tool_call_id)
                        .is_some_and(|e| e.id == r.tool_call_id)
                };
                let calls: Vec<String> = reply
                    .tool_parts()
                    .filter(|t| t.tool_call_id == r.tool_call_id || elicited(t))
                    .map(|t| t.tool_call_id.clone())
                    .collect();
                for p in &mut reply.parts {
                    if let MessagePart::Tool(t) = p
                        && calls.contains(&t.tool_call_id)
                    {
                        t.expires_at = Some(crate::model::millis_to_iso(deadline));
                    }
                }
            }
        }
        let job = rows
            .iter()
            .filter_map(|r| r.answer_deadline)
            .min()
            .map(|deadline| {
                EngineJob::QuestionExpire {
                    chat: chat.clone(),
                    message: reply.id.clone(),
                }
                .to_new_job(deadline)
            });
        let delivery = super::delivery::owed(chat_row, &reply, EndWhy::Reply, true)
            .map(|d| d.to_new_job(now + self.delivery_grace_ms()));
        let saved = self
            .store
            .await_answers(&AwaitOp {
                lease,
                reply: &reply,
                position,
                questions: &rows,
                job: job.as_ref(),
                now,
                delivery: delivery.as_ref(),
            })
            .await?;
        self.jobs_scheduled([job.as_ref(), delivery.as_ref()]);
        crate::metrics::questions_asked(chat_row, rows.len());
        self.note_and_show(&chat, &saved);
        Ok(TurnEnd::Awaiting(saved.message))
    }

    fn fail(
        &self,
        mut reply: UiMessage,
        position: i64,
        tx: &mpsc::UnboundedSender<TurnEvent>,
        code: &str,
        message: &str,
    ) -> TurnEnd {
        let info = ErrorInfo {
            code: code.into(),
            message: message.into(),
        };
        warn!(code, message, "turn failed");
        crate::metrics::turn_failed(&reply, &self.config.default_model, code);
        reply.metadata.error = Some(info.clone());
        let _ = tx.send(TurnEvent::Error(info));
        TurnEnd::Idle {
            reply: with_position(reply, position),
            saved: false,
            why: EndWhy::Reply,
        }
    }

    /// Sets the source of the tools asked for at every step (once).
    pub(crate) fn set_tool_source(&self, source: Arc<dyn crate::agent::ToolSource>) {
        let _ = self.source.set(source);
    }

    /// The source's tools for a step in a chat of `platform`, without names the engine's own
    /// tools (or the question tool) have.
    /// Each with its spec, read once a step (a source's specs carry whole JSON schemas).
    fn step_tools(&self, platform: Option<&str>) -> Vec<(Arc<dyn Tool>, ToolSpec)> {
        let Some(source) = self.source.get() else {
            return Vec::new();
        };
        source
            .tools(platform)
            .into_iter()
            .map(|t| {
                let spec = t.spec();
                (t, spec)
            })
            .filter(|(_, spec)| {
                spec.name != crate::model::QUESTION_TOOL
                    && !self.tool_specs.iter().any(|s| s.name == spec.name)
            })
            .collect()
    }

    fn request(
        &self,
        history: &super::Transcript,
        reply: &UiMessage,
        reasoning: Option<String>,
        offer_questions: bool,
        extra: &[(Arc<dyn Tool>, ToolSpec)],
    ) -> ModelRequest {
        // The oldest turns are left out past the budget; the turn in progress is always sent.
        let mut messages = history.within(self.config.history_bytes);
        let mut so_far = Vec::new();
        to_model_messages(reply, &mut so_far);
        messages.extend(so_far);
        let own = if offer_questions {
            &self.tool_specs_with_question
        } else {
            &self.tool_specs
        };
        let tools = if extra.is_empty() {
            own.clone()
        } else {
            own.iter()
                .cloned()
                .chain(extra.iter().map(|(_, spec)| spec.clone()))
                .collect()
        };
        ModelRequest {
            instructions: self.config.instructions.clone(),
            messages,
            tools,
            reasoning,
        }
    }

    // ---- stopping ------------------------------------------------------------------------------

    /// Waits (at most `grace`) for the turns running in this process to end; the rest are stopped
    /// and their leases ended at once (see [`crate::agent::Engine::drain`]).
    pub(crate) async fn drain(&self, grace: Duration) {
        self.begin_shutdown();
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let notified = self.idle.notified();
            let active = self.active.load(Ordering::SeqCst);
            if active == 0 {
                return;
            }
            tracing::info!(active, "waiting for running turns");
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break;
            }
        }
        let runs: Vec<ActiveRun> = self
            .runs
            .lock()
            .expect("runs")
            .drain()
            .map(|(_, r)| r)
            .collect();
        warn!(
            turns = runs.len(),
            "turns still running at shutdown: stopped, their chats handed on"
        );
        for run in runs {
            let _ = run.stop.send(());
            if let Err(e) = self.store.expire_lease(&run.lease, self.now()).await {
                debug!(chat_id = %run.lease.chat_id, error = %e, "ending the lease of a stopped turn");
            }
        }
    }

    /// The tool a call names: the engine's own first, then the step's source tools (`extra`,
    /// from [`Self::step_tools`]).
    pub(crate) fn find_tool<'a>(
        &'a self,
        name: &str,
        extra: &'a [(Arc<dyn Tool>, ToolSpec)],
    ) -> Option<&'a Arc<dyn Tool>> {
        self.tools
            .iter()
            .find(|t| t.spec().name == name)
            .or_else(|| extra.iter().find(|(_, s)| s.name == name).map(|(t, _)| t))
    }
}

/// How a turn ended, before the operation that ends it.
enum TurnEnd {
    /// It waits on questions (already saved and released).
    Awaiting(UiMessage),
    /// It ended: `reply` is its last reply, `saved` whether a checkpoint already stored it.
    Idle {
        reply: (UiMessage, i64),
        saved: bool,
        why: EndWhy,
    },
}

/// A turn the driving user stopped: what it produced, and a mark that says so.
/// What the call `call_id` of the reply `reply_id` knows about where it runs.
pub(super) fn call_context(lease: &Lease, reply_id: &str, call_id: &str) -> super::ToolContext {
    super::ToolContext {
        chat_id: lease.chat_id.clone(),
        driver: lease.driver.clone(),
        tool_call_id: call_id.to_owned(),
        message_id: reply_id.to_owned(),
    }
}

fn stopped(mut reply: UiMessage, position: i64) -> TurnEnd {
    reply.parts.push(MessagePart::text(STOPPED_TEXT));
    TurnEnd::Idle {
        reply: with_position(reply, position),
        saved: false,
        why: EndWhy::Stopped,
    }
}

/// Removes a turn's stop switch when the turn ends (unless a newer turn of the chat replaced it).
struct Unhalt<'a> {
    turns: &'a Turns,
    chat: &'a ChatId,
    id: u64,
}

impl Drop for Unhalt<'_> {
    fn drop(&mut self) {
        let mut halts = self.turns.halts.lock().expect("halts");
        if halts.get(self.chat).is_some_and(|h| h.id == self.id) {
            halts.remove(self.chat);
        }
    }
}

fn with_position(reply: UiMessage, position: i64) -> (UiMessage, i64) {
    (reply, position)
}

/// The turn ends with `reply`, its last word: saved with the turn's end, in one operation (with
/// its streamed messages, marked on it).
fn final_reply(watch: Option<&TurnWatch>, mut reply: UiMessage, position: i64) -> TurnEnd {
    if let Some(w) = watch {
        w.mark(&mut reply);
    }
    TurnEnd::Idle {
        reply: with_position(reply, position),
        saved: false,
        why: EndWhy::Reply,
    }
}

/// The reply to a command's message, written without the model: `new` (the history the model
/// sees starts after it) and a model choice.
fn command_reply(message: &UiMessage) -> Option<String> {
    if message.starts_conversation() {
        return Some(crate::model::NEW_CONVERSATION_TEXT.to_owned());
    }
    let (model, reasoning) = message.model_choice()?;
    Some(crate::model::model_choice_text(
        &model,
        reasoning.as_deref(),
    ))
}

/// A fresh app capability (an html block's `link`): a random (v4) UUID, 122 random bits, as 32
/// hex digits. Given to the apps of agent messages (`talk`) and of questions (`step`).
pub(crate) fn fresh_app_link() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
