//! The turn engine: one turn per chat (a store lease), the queue, steering, checkpoints after every
//! model step, crash recovery through lease expiry, and continuing a turn once its questions are
//! answered.

use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use tracing::{Instrument, debug, info_span, warn};

use super::{
    FinishReason, Model, ModelEvent, ModelMessage, ModelRequest, Tool, ToolCallRequest,
    ToolContext, ToolSpec,
};
use crate::error::{Error, Result};
use crate::model::{
    Actor, ChannelRef, ChatId, Delivery, ErrorInfo, MessageMetadata, MessagePart, Millis,
    QUESTION_TOOL, QuestionInput, QuestionOutcome, QuestionOutput, Role, ToolPart, ToolState,
    TurnState, UiMessage, UserId, millis_to_iso, now_millis,
};
use crate::store::{
    DynStore, EndTurn, Lease, LeaseRequest, NewChat, NewJob, NewQuestion, Slot, StoredMessage,
    TurnEnd,
};

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
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            instructions: "You are a helpful assistant.".into(),
            max_steps: 20,
            turn_lease_ms: 60_000,
            default_model: "main".into(),
            partial_checkpoint: Duration::from_millis(250),
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

const RESUME_JOB: &str = "resume-chat";
/// The durable job that runs a chat's queue handed on by a process that stopped.
const RUN_QUEUE_JOB: &str = "run-queue";
/// The error code on the reply of a turn whose process stopped before it finished.
pub const INTERRUPTED: &str = "interrupted";
/// How many chats with an expired lease one sweep recovers.
const SWEEP_BATCH: u32 = 32;

/// How a turn starts.
enum Start {
    /// A new user message (saved at a new turn position).
    New(StoredMessage),
    /// Continue the waiting reply at `position`.
    Resume { reply: UiMessage, position: i64 },
}

/// The turn engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) store: DynStore,
    offers: Vec<ModelOffer>,
    tools: Vec<Arc<dyn Tool>>,
    config: EngineConfig,
    process: String,
    events: broadcast::Sender<ChatEvent>,
    pub(crate) channels: Vec<super::Channel>,
    active: std::sync::atomic::AtomicUsize,
    idle: tokio::sync::Notify,
    /// Set when the process begins to stop: turns that end hand their chat's queue on instead of
    /// promoting it here.
    stopping: AtomicBool,
    /// The runs of this process, by run id: their lease (to end it at shutdown) and how to stop them.
    runs: std::sync::Mutex<std::collections::HashMap<u64, ActiveRun>>,
    next_run: std::sync::atomic::AtomicU64,
}

/// A task aborted when this is dropped (a turn's lease renewer ends with its run, also when the
/// run is stopped mid-way).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A run in progress in this process.
struct ActiveRun {
    lease: Lease,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("process", &self.inner.process)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine over `store` offering `offers` and `tools`.
    pub fn new(
        store: DynStore,
        offers: Vec<ModelOffer>,
        tools: Vec<Arc<dyn Tool>>,
        config: EngineConfig,
    ) -> Self {
        let (events, _) = broadcast::channel(1024);
        Self {
            inner: Arc::new(Inner {
                store,
                offers,
                tools,
                config,
                process: format!("p-{}", uuid::Uuid::new_v4().simple()),
                events,
                channels: Vec::new(),
                active: std::sync::atomic::AtomicUsize::new(0),
                idle: tokio::sync::Notify::new(),
                stopping: AtomicBool::new(false),
                runs: std::sync::Mutex::new(std::collections::HashMap::new()),
                next_run: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// Registers a channel served by this process (before the engine is cloned or used).
    ///
    /// # Panics
    /// When the engine was already cloned.
    pub fn with_channel(mut self, channel: super::Channel) -> Self {
        Arc::get_mut(&mut self.inner)
            .expect("register channels before the engine is shared")
            .channels
            .push(channel);
        self
    }

    /// The store.
    pub fn store(&self) -> &DynStore {
        &self.inner.store
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// The models offered.
    pub fn offers(&self) -> &[ModelOffer] {
        &self.inner.offers
    }

    /// Live chat changes made by this process.
    pub fn subscribe(&self) -> broadcast::Receiver<ChatEvent> {
        self.inner.events.subscribe()
    }

    fn emit(&self, event: ChatEvent) {
        let _ = self.inner.events.send(event);
    }

    fn emit_message(&self, chat: &ChatId, message: &UiMessage) {
        self.emit(ChatEvent::Message {
            chat_id: chat.clone(),
            message: Box::new(message.clone()),
        });
    }

    fn emit_state(&self, chat: &ChatId, state: TurnState) {
        self.emit(ChatEvent::State {
            chat_id: chat.clone(),
            state,
        });
    }

    pub(crate) fn holder(&self) -> String {
        format!("{}/{}", self.inner.process, uuid::Uuid::new_v4().simple())
    }

    fn lease_request(&self, driver: Option<UserId>) -> LeaseRequest {
        LeaseRequest {
            holder: self.holder(),
            driver,
            ttl_ms: self.inner.config.turn_lease_ms,
            now: now_millis(),
        }
    }

    /// Checks a model/reasoning choice against the offers; returns the resolved model id.
    pub fn check_selection(&self, model: Option<&str>, reasoning: Option<&str>) -> Result<String> {
        let id = model.unwrap_or(&self.inner.config.default_model);
        let Some(offer) = self.inner.offers.iter().find(|o| o.id == id) else {
            return Err(Error::SelectionUnavailable(format!(
                "model {id:?} is not offered"
            )));
        };
        if let Some(r) = reasoning
            && !offer.reasoning.iter().any(|o| o == r)
        {
            return Err(Error::SelectionUnavailable(format!(
                "reasoning option {r:?} is not offered for model {id:?}"
            )));
        }
        Ok(id.to_string())
    }

    /// Sends a user message: starts a turn when the chat is idle, otherwise saves it as queued
    /// (or as a steer for the running turn, from its driving user).
    pub async fn send(&self, req: SendMessage) -> Result<Sent> {
        let model = self.check_selection(req.model.as_deref(), req.reasoning.as_deref())?;
        if req.parts.is_empty() {
            return Err(Error::InvalidInput(
                "a message needs at least one part".into(),
            ));
        }
        let store = &self.inner.store;
        if req.channel.is_none()
            && req.chat_id.is_channel_space()
            && store.get_chat(&req.chat_id).await?.is_none()
        {
            // Only a channel creates a chat in the channel chats' id space.
            return Err(Error::ChannelChat(format!(
                "chat ids starting with {:?} are created only by channels",
                crate::model::CHANNEL_CHAT_PREFIX
            )));
        }
        let now = now_millis();
        let message = UiMessage {
            id: req
                .id
                .clone()
                .unwrap_or_else(|| format!("msg_{}", uuid::Uuid::new_v4().simple())),
            role: Role::User,
            parts: req.parts.clone(),
            metadata: MessageMetadata {
                author: req.author.clone(),
                model: Some(model),
                reasoning: req.reasoning.clone(),
                created_at: millis_to_iso(now),
                ..Default::default()
            },
        };
        let (_, created) = store
            .create_chat(
                &NewChat {
                    chat_id: req.chat_id.clone(),
                    owner: req.author.clone(),
                    channel: req.channel.clone(),
                },
                now,
            )
            .await?;
        // A chat created just now has no messages to collide with.
        if !created
            && store
                .get_message(&req.chat_id, &message.id)
                .await?
                .is_some()
        {
            return Err(Error::InvalidInput(format!(
                "chat {} already has a message {:?}",
                req.chat_id, message.id
            )));
        }
        if let Some((lease, stored)) = store
            .start_turn_with(
                &req.chat_id,
                &self.lease_request(req.author.clone()),
                &message,
            )
            .await?
        {
            if lease.taken_over {
                self.mark_interrupted(&lease, stored.position).await?;
            }
            self.emit_message(&req.chat_id, &stored.message);
            self.emit_state(&req.chat_id, TurnState::Running);
            return Ok(Sent::Started(self.spawn_run(lease, Start::New(stored))));
        }
        // A turn runs or a question waits: save it, not run.
        let chat = store
            .get_chat(&req.chat_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("chat {}", req.chat_id)))?;
        let delivery = match (req.delivery, chat.live_lease(now_millis())) {
            (Delivery::Steer, Some(lease)) if lease.driver == req.author => Delivery::Steer,
            _ => Delivery::Queue,
        };
        let stored = store
            .enqueue_message(&req.chat_id, &message, delivery, now_millis())
            .await?;
        self.emit_message(&req.chat_id, &stored.message);
        // The turn may have ended between our attempt and the enqueue: run the queue if idle.
        self.kick(&req.chat_id).await?;
        Ok(Sent::Queued {
            message_id: message.id,
            delivery,
        })
    }

    /// Runs a turn on the chat's latest messages without queueing: rejects with
    /// [`Error::TurnInProgress`] while a turn runs or a question waits.
    pub async fn generate(
        &self,
        chat_id: &ChatId,
        parts: Vec<MessagePart>,
        author: Option<UserId>,
    ) -> Result<TurnHandle> {
        let store = &self.inner.store;
        let now = now_millis();
        store
            .create_chat(
                &NewChat {
                    chat_id: chat_id.clone(),
                    owner: author.clone(),
                    channel: None,
                },
                now,
            )
            .await?;
        let message = UiMessage {
            id: format!("msg_{}", uuid::Uuid::new_v4().simple()),
            role: Role::User,
            parts,
            metadata: MessageMetadata {
                author: author.clone(),
                model: Some(self.inner.config.default_model.clone()),
                created_at: millis_to_iso(now),
                ..Default::default()
            },
        };
        let Some((lease, stored)) = store
            .start_turn_with(chat_id, &self.lease_request(author), &message)
            .await?
        else {
            return Err(Error::TurnInProgress(chat_id.to_string()));
        };
        if lease.taken_over {
            self.mark_interrupted(&lease, stored.position).await?;
        }
        Ok(self.spawn_run(lease, Start::New(stored)))
    }

    /// If the chat is idle and has queued messages, promotes the oldest and runs it (in the
    /// background). Returns whether a turn was started.
    pub async fn kick(&self, chat_id: &ChatId) -> Result<bool> {
        let store = &self.inner.store;
        if store.queued_messages(chat_id).await?.is_empty() {
            return Ok(false);
        }
        self.take_and_run_queue(chat_id).await
    }

    /// Takes the chat's lease if it is free or ran out (marking the turn it ended as interrupted),
    /// then promotes the oldest queued message and runs the queue in the background, or releases
    /// the chat when nothing is queued. Returns whether a turn was started.
    async fn take_and_run_queue(&self, chat_id: &ChatId) -> Result<bool> {
        let store = &self.inner.store;
        let Some(lease) = store
            .try_start_turn(chat_id, &self.lease_request(None))
            .await?
        else {
            return Ok(false);
        };
        if lease.taken_over {
            self.mark_interrupted(&lease, None).await?;
        }
        if self.inner.stopping.load(Ordering::SeqCst) {
            self.hand_on(&lease).await?;
            return Ok(false);
        }
        match self.end_or_promote(lease).await? {
            Some((lease, next)) => {
                self.emit_state(chat_id, TurnState::Running);
                drop(self.spawn_run(lease, Start::New(next)).events);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Marks the last turn before position `below` (the latest turn when `None`) as interrupted:
    /// its holder stopped before the turn ended, so its reply gets the `interrupted` error (an
    /// empty reply is created when none was saved) and is posted to its channel thread.
    async fn mark_interrupted(&self, lease: &Lease, below: Option<i64>) -> Result<()> {
        let store = &self.inner.store;
        let chat = &lease.chat_id;
        let messages = store.list_messages(chat).await?;
        let Some(position) = messages
            .iter()
            .filter_map(|m| m.position)
            .filter(|p| below.is_none_or(|b| *p < b))
            .max()
        else {
            return Ok(());
        };
        let turn: Vec<&StoredMessage> = messages
            .iter()
            .filter(|m| m.position == Some(position))
            .collect();
        let info = ErrorInfo {
            code: INTERRUPTED.into(),
            message: "This reply was interrupted: the server stopped before it finished.".into(),
        };
        let reply = match turn.iter().find(|m| m.message.role == Role::Assistant) {
            Some(r) if r.message.metadata.error.is_some() => return Ok(()),
            Some(r) => {
                let mut reply = r.message.clone();
                reply.metadata.error = Some(info);
                reply
            }
            None => {
                let Some(user) = turn.iter().find(|m| m.message.role == Role::User) else {
                    return Ok(());
                };
                UiMessage {
                    id: format!("msg_{}", uuid::Uuid::new_v4().simple()),
                    role: Role::Assistant,
                    parts: vec![],
                    metadata: MessageMetadata {
                        model: user.message.metadata.model.clone(),
                        reasoning: user.message.metadata.reasoning.clone(),
                        created_at: millis_to_iso(now_millis()),
                        error: Some(info),
                        ..Default::default()
                    },
                }
            }
        };
        warn!(chat_id = %chat, position, "the previous turn was interrupted: its process stopped");
        let saved = store
            .save_turn_message(lease, &reply, Slot::Reply { position }, None, now_millis())
            .await?;
        self.emit_message(chat, &saved.message);
        if let Some(row) = store.get_chat(chat).await? {
            self.deliver_reply(&row, &saved.message).await;
        }
        Ok(())
    }

    /// Releases the chat of a stopping process, leaving its queue for another process (or this
    /// one after a restart): a durable job runs the queue at once, on any process.
    async fn hand_on(&self, lease: &Lease) -> Result<()> {
        let store = &self.inner.store;
        store
            .end_turn(lease, TurnEnd::Handoff, now_millis())
            .await?;
        self.emit_state(&lease.chat_id, TurnState::Idle);
        if !store.queued_messages(&lease.chat_id).await?.is_empty() {
            store
                .enqueue_job(&NewJob {
                    kind: RUN_QUEUE_JOB.into(),
                    key: Some(format!("{RUN_QUEUE_JOB}:{}", lease.chat_id)),
                    payload: json!({"chat": lease.chat_id}),
                    run_at: now_millis(),
                })
                .await?;
            debug!(chat_id = %lease.chat_id, "stopping: the queue is handed on");
        }
        Ok(())
    }

    /// Recovers chats whose turn lease ran out without being released (their process stopped):
    /// each one's interrupted turn is marked and its queue runs, oldest first. Any process may do
    /// it; the conditional take of the lease lets exactly one. Returns how many were taken.
    pub async fn recover_expired_leases(&self) -> Result<usize> {
        let chats = self
            .inner
            .store
            .expired_leases(now_millis(), SWEEP_BATCH)
            .await?;
        let mut taken = 0;
        for chat in chats {
            match self.take_and_run_queue(&chat).await {
                Ok(_) => taken += 1,
                Err(e) => warn!(chat_id = %chat, error = %e, "recovering an expired turn lease"),
            }
        }
        Ok(taken)
    }

    /// Begins a graceful stop: from now on a turn that ends releases its chat and hands the queue
    /// on (a durable job) instead of promoting it in this process.
    pub fn begin_shutdown(&self) {
        self.inner.stopping.store(true, Ordering::SeqCst);
    }

    /// Whether [`Engine::begin_shutdown`] was called.
    pub fn is_stopping(&self) -> bool {
        self.inner.stopping.load(Ordering::SeqCst)
    }

    /// Ends the turn held by `lease`: releases the chat when nothing is queued, otherwise promotes
    /// the oldest queued message and returns it with the lease, driven by its sender.
    async fn end_or_promote(&self, mut lease: Lease) -> Result<Option<(Lease, StoredMessage)>> {
        let store = &self.inner.store;
        if self.inner.stopping.load(Ordering::SeqCst) {
            self.hand_on(&lease).await?;
            return Ok(None);
        }
        loop {
            match store.end_turn(&lease, TurnEnd::Idle, now_millis()).await? {
                EndTurn::Released => {
                    self.emit_state(&lease.chat_id, TurnState::Idle);
                    return Ok(None);
                }
                EndTurn::QueuedPending => {
                    if let Some(next) = store.promote_next(&lease, now_millis()).await? {
                        store.set_driver(&mut lease, next.author()).await?;
                        self.emit_message(&lease.chat_id, &next.message);
                        return Ok(Some((lease, next)));
                    }
                }
            }
        }
    }

    fn spawn_run(&self, lease: Lease, start: Start) -> TurnHandle {
        let (tx, rx) = mpsc::unbounded_channel();
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let message_id = match &start {
            Start::New(m) => m.message.id.clone(),
            Start::Resume { reply, .. } => reply.id.clone(),
        };
        let engine = self.clone();
        let span = info_span!("turn", chat_id = %lease.chat_id, turn_id = %lease.holder);
        engine.inner.active.fetch_add(1, Ordering::SeqCst);
        let run_id = engine.inner.next_run.fetch_add(1, Ordering::SeqCst);
        let (stop, stopped) = tokio::sync::oneshot::channel();
        engine.inner.runs.lock().expect("runs").insert(
            run_id,
            ActiveRun {
                lease: lease.clone(),
                stop,
            },
        );
        tokio::spawn(
            async move {
                tokio::select! {
                    () = engine.run(lease, start, tx, done_tx) => {}
                    _ = stopped => debug!("run stopped at shutdown"),
                }
                engine.inner.runs.lock().expect("runs").remove(&run_id);
                if engine.inner.active.fetch_sub(1, Ordering::SeqCst) == 1 {
                    engine.inner.idle.notify_waiters();
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

    /// Runs turns under `lease` until the chat is idle (promoting the queue) or waits on a question.
    async fn run(
        &self,
        mut lease: Lease,
        start: Start,
        tx: mpsc::UnboundedSender<TurnEvent>,
        done: tokio::sync::oneshot::Sender<Result<TurnOutcome>>,
    ) {
        let mut done = Some(done);
        let store = self.inner.store.clone();
        let chat = lease.chat_id.clone();
        let lost = Arc::new(AtomicBool::new(false));
        let renewer = self.spawn_renewer(lease.clone(), lost.clone());
        // A chat's channel never changes: read it once for every turn of this run.
        let row = store.get_chat(&chat).await.ok().flatten();
        let is_channel = row.as_ref().is_some_and(|r| r.channel.is_some());
        let mut first = Some(tx);
        let mut next = Some(start);
        let result = loop {
            let Some(start) = next.take() else {
                break Err(Error::InvalidInput("no turn to run".into()));
            };
            // Only the first turn streams to the caller; promoted turns are saved and broadcast.
            let tx = first.take().unwrap_or_else(|| mpsc::unbounded_channel().0);
            let outcome = match self
                .run_turn(&mut lease, start, &tx, &lost, row.as_ref())
                .await
            {
                Ok(o) => o,
                Err(e) => break Err(e),
            };

            if let (Some(row), Some(reply)) = (&row, &outcome.reply) {
                self.deliver_reply(row, reply).await;
            }
            if outcome.state == TurnState::Awaiting {
                if is_channel && let Err(e) = self.render_pending(&chat).await {
                    warn!(error = %e, "rendering the questions failed");
                }
                // An answer may have been recorded while this turn was still saving the question and
                // holding the chat: the settle could not continue then, so continue now.
                if let Some(reply) = &outcome.reply
                    && let Ok(questions) = store
                        .questions_of_message(&chat, &reply.id, now_millis())
                        .await
                    && !questions.is_empty()
                    && questions.iter().all(|q| q.outcome.is_some())
                {
                    let driver = questions
                        .iter()
                        .find_map(|q| q.actor.as_ref().and_then(|a| a.user.clone()));
                    if let Err(e) = self.continue_after_outcome(&chat, &reply.id, driver).await {
                        warn!(error = %e, "continuing after an early answer failed");
                    }
                }
                let _ = tx.send(TurnEvent::Finish {
                    state: TurnState::Awaiting,
                });
                self.emit_state(&chat, TurnState::Awaiting);
                break Ok(outcome);
            }
            // The turn ended: release the chat, or promote the oldest queued message and run it.
            let ended = self.end_or_promote(lease.clone()).await;
            if ended.is_ok()
                && let Some(done) = done.take()
            {
                let _ = tx.send(TurnEvent::Finish {
                    state: TurnState::Idle,
                });
                let _ = done.send(Ok(outcome.clone()));
            }
            match ended {
                Ok(None) => break Ok(outcome),
                Ok(Some((promoted_lease, promoted))) => {
                    debug!(message_id = %promoted.message.id, "promoted queued message");
                    lease = promoted_lease;
                    next = Some(Start::New(promoted));
                }
                Err(e) => break Err(e),
            }
        };
        drop(renewer);
        if let Err(e) = &result {
            warn!(error = %e, "turn ended with an error");
        }
        if let Some(done) = done.take() {
            let _ = done.send(result);
        }
    }

    fn spawn_renewer(&self, lease: Lease, lost: Arc<AtomicBool>) -> AbortOnDrop {
        let store = self.inner.store.clone();
        let ttl = self.inner.config.turn_lease_ms;
        let every = Duration::from_millis((ttl / 3).max(1) as u64);
        AbortOnDrop(tokio::spawn(async move {
            let mut lease = lease;
            loop {
                tokio::time::sleep(every).await;
                if let Err(e) = store.renew_lease(&mut lease, ttl, now_millis()).await {
                    warn!(chat_id = %lease.chat_id, error = %e, "turn lease lost");
                    lost.store(true, Ordering::SeqCst);
                    return;
                }
            }
        }))
    }

    /// Runs one turn: model steps until a final reply, a pending question, a failure or `max_steps`.
    async fn run_turn(
        &self,
        lease: &mut Lease,
        start: Start,
        tx: &mpsc::UnboundedSender<TurnEvent>,
        lost: &AtomicBool,
        row: Option<&crate::store::ChatRow>,
    ) -> Result<TurnOutcome> {
        let store = &self.inner.store;
        let chat = lease.chat_id.clone();
        let (mut reply, position, mut model, mut reasoning) = match start {
            Start::New(user) => {
                let reply = UiMessage {
                    id: format!("msg_{}", uuid::Uuid::new_v4().simple()),
                    role: Role::Assistant,
                    parts: vec![],
                    metadata: MessageMetadata {
                        model: user.message.metadata.model.clone(),
                        reasoning: user.message.metadata.reasoning.clone(),
                        created_at: millis_to_iso(now_millis()),
                        ..Default::default()
                    },
                };
                let position = user.position.unwrap_or_default();
                (
                    reply,
                    position,
                    user.message.metadata.model.clone(),
                    user.message.metadata.reasoning.clone(),
                )
            }
            Start::Resume { reply, position } => {
                // A continued turn uses the chat's latest user message's model and reasoning.
                let latest = store
                    .list_messages(&chat)
                    .await?
                    .into_iter()
                    .rev()
                    .find(|m| !m.queued && m.message.role == Role::User);
                let (m, r) = latest
                    .map(|m| (m.message.metadata.model, m.message.metadata.reasoning))
                    .unwrap_or((None, None));
                (reply, position, m, r)
            }
        };
        let offer_questions = match row {
            Some(row) if row.channel.is_some() => self.questions_offered(row).await,
            _ => true,
        };
        // The history before this turn's reply, read once; steers that join are appended to it.
        let mut history = self.history(&chat, &reply.id).await?;
        let _ = tx.send(TurnEvent::Start {
            message_id: reply.id.clone(),
        });
        let mut checkpointed = false;
        let mut steps_done = reply.parts.iter().filter(|p| is_step_start(p)).count() as u32;
        loop {
            if lost.load(Ordering::SeqCst) {
                return Err(Error::LeaseLost {
                    chat_id: chat.to_string(),
                });
            }
            if steps_done >= self.inner.config.max_steps {
                debug!(steps = steps_done, "max_steps reached");
                break;
            }
            // Step boundary: steers of the driving user join here.
            let steers = store
                .take_steers(lease, lease.driver.clone().as_ref(), position, now_millis())
                .await?;
            if let Some(last) = steers.last() {
                model = last.message.metadata.model.clone();
                reasoning = last.message.metadata.reasoning.clone();
                reply.metadata.model = model.clone();
                reply.metadata.reasoning = reasoning.clone();
                for s in &steers {
                    to_model_messages(&s.message, &mut history);
                    self.emit_message(&chat, &s.message);
                }
            }
            let offer = match self.offered(model.as_deref(), reasoning.as_deref()) {
                Ok(o) => o,
                Err(e) => {
                    return self
                        .fail(
                            lease,
                            reply,
                            position,
                            tx,
                            "selection-unavailable",
                            &e.to_string(),
                        )
                        .await;
                }
            };
            let request = self.request(&history, &reply, reasoning.clone(), offer_questions);
            let step_no = steps_done + 1;
            let step = self
                .run_step(lease, &mut reply, position, &offer, request, tx, lost)
                .instrument(
                    info_span!("step", chat_id = %chat, turn_id = %lease.holder, step = step_no),
                )
                .await?;
            steps_done += 1;
            match step {
                StepEnd::Failed(info) => {
                    return self
                        .fail(lease, reply, position, tx, &info.code, &info.message)
                        .await;
                }
                StepEnd::Questions(calls) => {
                    let now = now_millis();
                    let rows: Vec<NewQuestion> = calls
                        .iter()
                        .enumerate()
                        .map(|(i, (id, input))| NewQuestion {
                            tool_call_id: id.clone(),
                            chat_id: chat.clone(),
                            message_id: reply.id.clone(),
                            call_index: i as i64,
                            input: input.clone(),
                            answer_deadline: input
                                .expires_in_seconds
                                .map(|s| now + (s as i64) * 1000),
                        })
                        .collect();
                    store.insert_questions(&rows, now).await?;
                    if let Some(deadline) = rows.iter().filter_map(|r| r.answer_deadline).min() {
                        store
                            .enqueue_job(&NewJob {
                                kind: super::channel::EXPIRE_JOB.into(),
                                key: Some(format!(
                                    "{}:{chat}:{}",
                                    super::channel::EXPIRE_JOB,
                                    reply.id
                                )),
                                payload: json!({"chat": chat, "message": reply.id}),
                                run_at: deadline,
                            })
                            .await?;
                    }
                    let saved = store
                        .save_turn_message(
                            lease,
                            &reply,
                            Slot::Reply { position },
                            Some(&reply.id),
                            now,
                        )
                        .await?;
                    self.emit_message(&chat, &saved.message);
                    store
                        .end_turn(lease, TurnEnd::Awaiting(&reply.id), now_millis())
                        .await?;
                    return Ok(TurnOutcome {
                        state: TurnState::Awaiting,
                        reply: Some(saved.message),
                    });
                }
                StepEnd::Continue => {
                    checkpointed = true;
                    continue;
                }
                StepEnd::Final => {
                    checkpointed = true;
                    break;
                }
            }
        }
        if checkpointed {
            // The last step's checkpoint already saved (and announced) the reply.
            return Ok(TurnOutcome {
                state: TurnState::Idle,
                reply: Some(reply),
            });
        }
        let saved = store
            .save_turn_message(lease, &reply, Slot::Reply { position }, None, now_millis())
            .await?;
        self.emit_message(&chat, &saved.message);
        Ok(TurnOutcome {
            state: TurnState::Idle,
            reply: Some(saved.message),
        })
    }

    fn offered(&self, model: Option<&str>, reasoning: Option<&str>) -> Result<ModelOffer> {
        let id = self.check_selection(model, reasoning)?;
        Ok(self
            .inner
            .offers
            .iter()
            .find(|o| o.id == id)
            .cloned()
            .expect("checked above"))
    }

    async fn fail(
        &self,
        lease: &Lease,
        mut reply: UiMessage,
        position: i64,
        tx: &mpsc::UnboundedSender<TurnEvent>,
        code: &str,
        message: &str,
    ) -> Result<TurnOutcome> {
        let info = ErrorInfo {
            code: code.into(),
            message: message.into(),
        };
        warn!(code, message, "turn failed");
        reply.metadata.error = Some(info.clone());
        let saved = self
            .inner
            .store
            .save_turn_message(lease, &reply, Slot::Reply { position }, None, now_millis())
            .await?;
        self.emit_message(&lease.chat_id, &saved.message);
        let _ = tx.send(TurnEvent::Error(info));
        Ok(TurnOutcome {
            state: TurnState::Idle,
            reply: Some(saved.message),
        })
    }

    /// The model request for the next step: the chat's history (queued messages excluded) with the
    /// reply so far.
    async fn history(&self, chat: &ChatId, reply_id: &str) -> Result<Vec<ModelMessage>> {
        let stored = self.inner.store.list_messages(chat).await?;
        let mut messages = Vec::new();
        for m in stored
            .iter()
            .filter(|m| !m.queued && m.message.id != reply_id)
        {
            to_model_messages(&m.message, &mut messages);
        }
        Ok(messages)
    }

    fn request(
        &self,
        history: &[ModelMessage],
        reply: &UiMessage,
        reasoning: Option<String>,
        offer_questions: bool,
    ) -> ModelRequest {
        let mut messages = history.to_vec();
        to_model_messages(reply, &mut messages);
        let mut tools: Vec<ToolSpec> = self.inner.tools.iter().map(|t| t.spec()).collect();
        if offer_questions {
            tools.push(question_tool_spec());
        }
        ModelRequest {
            instructions: self.inner.config.instructions.clone(),
            messages,
            tools,
            reasoning,
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn run_step(
        &self,
        lease: &Lease,
        reply: &mut UiMessage,
        position: i64,
        offer: &ModelOffer,
        request: ModelRequest,
        tx: &mpsc::UnboundedSender<TurnEvent>,
        lost: &AtomicBool,
    ) -> Result<StepEnd> {
        let store = &self.inner.store;
        reply
            .parts
            .push(MessagePart::Other(json!({"type": "step-start"})));
        let _ = tx.send(TurnEvent::StartStep);
        let mut stream = match offer.model.stream(request).await {
            Ok(s) => s,
            Err(e) => {
                return Ok(StepEnd::Failed(ErrorInfo {
                    code: "model-error".into(),
                    message: e.to_string(),
                }));
            }
        };
        let text_index = reply.parts.len();
        let mut text = String::new();
        let mut calls: Vec<ToolCallRequest> = Vec::new();
        let mut finish: Option<FinishReason> = None;
        let mut last_checkpoint = tokio::time::Instant::now();
        let mut failure: Option<String> = None;
        while let Some(event) = stream.next().await {
            match event {
                Ok(ModelEvent::TextDelta(d)) => {
                    text.push_str(&d);
                    let _ = tx.send(TurnEvent::TextDelta(d));
                    if last_checkpoint.elapsed() >= self.inner.config.partial_checkpoint {
                        // Keep the text streamed so far, so a process that dies mid-step leaves it.
                        let mut partial = reply.clone();
                        partial.parts.push(MessagePart::text(text.clone()));
                        store
                            .save_turn_message(
                                lease,
                                &partial,
                                Slot::Reply { position },
                                None,
                                now_millis(),
                            )
                            .await?;
                        last_checkpoint = tokio::time::Instant::now();
                    }
                }
                Ok(ModelEvent::ToolCall(c)) => calls.push(c),
                Ok(ModelEvent::Finish { reason, .. }) => {
                    finish = Some(reason);
                    break;
                }
                Err(e) => {
                    failure = Some(e.to_string());
                    break;
                }
            }
            if lost.load(Ordering::SeqCst) {
                return Err(Error::LeaseLost {
                    chat_id: lease.chat_id.to_string(),
                });
            }
        }
        if finish.is_none() && failure.is_none() {
            failure = Some("the model stream ended before the step finished".into());
        }
        if !text.is_empty() {
            reply.parts.insert(text_index, MessagePart::text(text));
        }
        if let Some(message) = failure {
            // Save the partial step: unfinished tool calls are marked as errors.
            for c in calls {
                let error_text = "the step was interrupted before this call ran".to_string();
                let _ = tx.send(TurnEvent::ToolError {
                    tool_call_id: c.id.clone(),
                    error_text: error_text.clone(),
                });
                reply.parts.push(MessagePart::Tool(ToolPart {
                    tool_name: c.name,
                    tool_call_id: c.id,
                    state: ToolState::OutputError,
                    input: c.input,
                    output: None,
                    error_text: Some(error_text),
                }));
            }
            let _ = tx.send(TurnEvent::FinishStep);
            return Ok(StepEnd::Failed(ErrorInfo {
                code: "model-error".into(),
                message,
            }));
        }
        let had_calls = !calls.is_empty();
        let mut questions = Vec::new();
        for c in calls {
            let c = self.unique_call_id(reply, c);
            let _ = tx.send(TurnEvent::ToolInput {
                tool_call_id: c.id.clone(),
                tool_name: c.name.clone(),
                input: c.input.clone(),
            });
            let (state, output, error_text) = if c.name == QUESTION_TOOL {
                match serde_json::from_value::<QuestionInput>(c.input.clone())
                    .map_err(|e| e.to_string())
                    .and_then(|i| i.validate().map(|_| i))
                {
                    Ok(input) => {
                        questions.push((c.id.clone(), input));
                        (ToolState::InputAvailable, None, None)
                    }
                    Err(e) => (
                        ToolState::OutputError,
                        None,
                        Some(format!("invalid question input: {e}")),
                    ),
                }
            } else if let Some(tool) = self.inner.tools.iter().find(|t| t.spec().name == c.name) {
                let ctx = ToolContext {
                    chat_id: lease.chat_id.clone(),
                    driver: lease.driver.clone(),
                    tool_call_id: c.id.clone(),
                };
                match tool.call(c.input.clone(), ctx).await {
                    Ok(v) => (ToolState::OutputAvailable, Some(v), None),
                    Err(e) => (ToolState::OutputError, None, Some(e.to_string())),
                }
            } else {
                (
                    ToolState::OutputError,
                    None,
                    Some(format!("unknown tool {:?}", c.name)),
                )
            };
            match (&output, &error_text) {
                (Some(o), _) => {
                    let _ = tx.send(TurnEvent::ToolOutput {
                        tool_call_id: c.id.clone(),
                        output: o.clone(),
                    });
                }
                (None, Some(e)) => {
                    let _ = tx.send(TurnEvent::ToolError {
                        tool_call_id: c.id.clone(),
                        error_text: e.clone(),
                    });
                }
                _ => {}
            }
            reply.parts.push(MessagePart::Tool(ToolPart {
                tool_name: c.name,
                tool_call_id: c.id,
                state,
                input: c.input,
                output,
                error_text,
            }));
        }
        let _ = tx.send(TurnEvent::FinishStep);
        if !questions.is_empty() {
            return Ok(StepEnd::Questions(questions));
        }
        // Checkpoint after every step.
        let saved = store
            .save_turn_message(lease, reply, Slot::Reply { position }, None, now_millis())
            .await?;
        self.emit_message(&lease.chat_id, &saved.message);
        Ok(if had_calls {
            StepEnd::Continue
        } else {
            StepEnd::Final
        })
    }

    /// Tool call ids key question records per chat: a model that repeats an id gets a fresh one.
    fn unique_call_id(&self, reply: &UiMessage, mut call: ToolCallRequest) -> ToolCallRequest {
        if call.id.is_empty() || reply.tool_parts().any(|t| t.tool_call_id == call.id) {
            call.id = format!("call_{}", uuid::Uuid::new_v4().simple());
        }
        call
    }

    // ---- questions: settle, withdraw, continue ----------------------------------------------------

    /// Records an answer or a dismissal of a waiting question call (the first one wins), then
    /// continues the turn when the step's last waiting call is answered, or ends it on a dismissal.
    pub async fn settle(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        settle: Settle,
        actor: Option<Actor>,
    ) -> Result<Settled> {
        let store = &self.inner.store;
        let now = now_millis();
        let Some(q) = store.get_question(chat, tool_call_id, now).await? else {
            return Err(Error::NotFound(format!("tool call {tool_call_id}")));
        };
        if q.outcome.is_some() {
            return Err(Error::Stale(format!("{tool_call_id} is already settled")));
        }
        let outcome = match settle {
            Settle::Answer(output) => {
                q.input
                    .check_output(&output)
                    .map_err(Error::InvalidAnswer)?;
                QuestionOutcome::Answered(output)
            }
            Settle::Dismiss => QuestionOutcome::Dismissed,
        };
        if q.answer_deadline.is_some_and(|d| d <= now) {
            self.expire(chat, &q.message_id).await?;
            return Err(Error::Stale(format!("{tool_call_id} has expired")));
        }
        if !store
            .record_outcome(chat, tool_call_id, &outcome, actor.as_ref(), now)
            .await?
        {
            return Err(Error::Stale(format!("{tool_call_id} is already settled")));
        }
        self.close_outcomes_of(chat, &q.message_id).await;
        let driver = actor.and_then(|a| a.user);
        let state = self
            .continue_after_outcome(chat, &q.message_id, driver)
            .await?;
        if state == TurnState::Awaiting {
            self.render_pending(chat).await?;
        }
        Ok(Settled { outcome, state })
    }

    /// Withdraws the questions of a waiting reply (cancelled) and returns the chat to idle.
    /// `false` when `message_id` is not the waiting reply.
    pub async fn withdraw(&self, chat: &ChatId, message_id: &str) -> Result<bool> {
        let store = &self.inner.store;
        let Some(row) = store.get_chat(chat).await? else {
            return Ok(false);
        };
        if row.awaiting_message_id.as_deref() != Some(message_id) {
            return Ok(false);
        }
        for q in store
            .questions_of_message(chat, message_id, now_millis())
            .await?
        {
            if q.outcome.is_none() {
                store
                    .record_outcome(
                        chat,
                        &q.tool_call_id,
                        &QuestionOutcome::Cancelled,
                        None,
                        now_millis(),
                    )
                    .await?;
            }
        }
        self.close_outcomes_of(chat, message_id).await;
        self.continue_after_outcome(chat, message_id, None).await?;
        Ok(true)
    }

    /// Records `expired` (with the defaults when every question has one) on the waiting calls of
    /// `message_id` whose deadline passed, and continues.
    pub async fn expire(&self, chat: &ChatId, message_id: &str) -> Result<()> {
        let store = &self.inner.store;
        let now = now_millis();
        let mut any = false;
        for q in store.questions_of_message(chat, message_id, now).await? {
            if q.outcome.is_none() && q.answer_deadline.is_some_and(|d| d <= now) {
                let outcome = QuestionOutcome::Expired(q.input.default_output());
                any |= store
                    .record_outcome(chat, &q.tool_call_id, &outcome, None, now)
                    .await?;
            }
        }
        if any {
            self.close_outcomes_of(chat, message_id).await;
            self.continue_after_outcome(chat, message_id, None).await?;
        }
        Ok(())
    }

    /// After an outcome: if every call of the waiting reply has one, take the lease and continue
    /// (or end, on a dismissal or withdrawal). When a dead process still holds the lease, a durable
    /// job retries at its expiry.
    pub(crate) async fn continue_after_outcome(
        &self,
        chat: &ChatId,
        message_id: &str,
        driver: Option<UserId>,
    ) -> Result<TurnState> {
        let store = &self.inner.store;
        let questions = store
            .questions_of_message(chat, message_id, now_millis())
            .await?;
        if questions.iter().any(|q| q.outcome.is_none()) {
            return Ok(TurnState::Awaiting);
        }
        let Some(lease) = store
            .try_resume_turn(chat, message_id, &self.lease_request(driver.clone()))
            .await?
        else {
            let row = store.get_chat(chat).await?;
            if let Some(row) = &row
                && row.awaiting_message_id.as_deref() == Some(message_id)
            {
                let run_at = row
                    .lease
                    .as_ref()
                    .map(|l| l.expires_at)
                    .unwrap_or_else(now_millis);
                store
                    .enqueue_job(&NewJob {
                        kind: RESUME_JOB.into(),
                        key: Some(format!("{RESUME_JOB}:{chat}:{message_id}")),
                        payload: json!({"chat": chat, "message": message_id, "driver": driver}),
                        run_at,
                    })
                    .await?;
                return Ok(TurnState::Running);
            }
            return Ok(row
                .map(|r| r.state(now_millis()))
                .unwrap_or(TurnState::Idle));
        };
        let Some(stored) = store.get_message(chat, message_id).await? else {
            // The waiting reply is gone: end as after any turn.
            if let Some((lease, next)) = self.end_or_promote(lease).await? {
                drop(self.spawn_run(lease, Start::New(next)).events);
                return Ok(TurnState::Running);
            }
            return Ok(TurnState::Idle);
        };
        let mut reply = stored.message;
        let mut stop = false;
        for part in reply.parts.iter_mut() {
            let MessagePart::Tool(t) = part else { continue };
            if t.state != ToolState::InputAvailable {
                continue;
            }
            let Some(q) = questions.iter().find(|q| q.tool_call_id == t.tool_call_id) else {
                continue;
            };
            match q.outcome.as_ref() {
                Some(o) if o.output().is_some() => {
                    t.state = ToolState::OutputAvailable;
                    t.output = Some(serde_json::to_value(o.output())?);
                }
                Some(QuestionOutcome::Dismissed) => {
                    t.state = ToolState::OutputError;
                    t.error_text = Some("The question was dismissed.".into());
                    stop = true;
                }
                Some(QuestionOutcome::Cancelled) => {
                    t.state = ToolState::OutputError;
                    t.error_text = Some("The question was withdrawn.".into());
                    stop = true;
                }
                _ => {
                    t.state = ToolState::OutputError;
                    t.error_text = Some("The question expired without an answer.".into());
                }
            }
        }
        let position = stored.position.unwrap_or_default();
        if stop {
            let saved = store
                .save_turn_message(&lease, &reply, Slot::Reply { position }, None, now_millis())
                .await?;
            self.emit_message(chat, &saved.message);
            if let Some((lease, next)) = self.end_or_promote(lease).await? {
                drop(self.spawn_run(lease, Start::New(next)).events);
                return Ok(TurnState::Running);
            }
            return Ok(TurnState::Idle);
        }
        self.emit_state(chat, TurnState::Running);
        drop(
            self.spawn_run(lease, Start::Resume { reply, position })
                .events,
        );
        Ok(TurnState::Running)
    }

    /// Runs due durable jobs of the turn engine (continuing turns a dead process left waiting).
    /// Returns how many ran.
    pub async fn run_due_jobs(&self, worker: &str) -> Result<usize> {
        let store = &self.inner.store;
        let mut ran = 0;
        while let Some(job) = store.claim_job(worker, 60_000, now_millis()).await? {
            ran += 1;
            if let Some(result) = self.run_question_job(&job).await {
                match result {
                    Ok(true) => {
                        store.complete_job(&job).await?;
                    }
                    Ok(false) if job.attempts >= super::UPDATED_MAX_RUNS => {
                        store.bury_job(&job, "updated kept failing").await?;
                    }
                    Ok(false) => {
                        let at = now_millis() + super::updated_backoff_ms(job.attempts);
                        store.retry_job(&job, at, "updated failed").await?;
                    }
                    Err(e) => {
                        let at = now_millis() + super::updated_backoff_ms(job.attempts);
                        store.retry_job(&job, at, &e.to_string()).await?;
                    }
                }
                continue;
            }
            if job.kind == RUN_QUEUE_JOB {
                if let Some(chat) = job.payload["chat"]
                    .as_str()
                    .and_then(|c| ChatId::new(c).ok())
                {
                    match self.kick(&chat).await {
                        Ok(_) => {
                            store.complete_job(&job).await?;
                        }
                        Err(e) => {
                            store
                                .retry_job(&job, now_millis() + 5_000, &e.to_string())
                                .await?;
                        }
                    }
                } else {
                    store.bury_job(&job, "malformed payload").await?;
                }
                continue;
            }
            if job.kind != RESUME_JOB {
                store
                    .retry_job(&job, now_millis() + 60_000, "no handler in this process")
                    .await?;
                continue;
            }
            let chat = job.payload["chat"]
                .as_str()
                .and_then(|c| ChatId::new(c).ok());
            let message = job.payload["message"].as_str().map(str::to_string);
            let driver = job.payload["driver"].as_str().map(UserId::new);
            match (chat, message) {
                (Some(chat), Some(message)) => {
                    match self.continue_after_outcome(&chat, &message, driver).await {
                        Ok(_) => {
                            store.complete_job(&job).await?;
                        }
                        Err(e) => {
                            store
                                .retry_job(&job, now_millis() + 5_000, &e.to_string())
                                .await?;
                        }
                    }
                }
                _ => {
                    store.bury_job(&job, "malformed payload").await?;
                }
            }
        }
        Ok(ran)
    }

    /// Starts the background worker of this process: every `poll` it runs due durable jobs (such as
    /// continuing a turn whose answer arrived while a dead process still held the chat). The store
    /// is the only coordination between processes; this loop is the polling path.
    pub fn spawn_worker(&self, poll: Duration) -> tokio::task::JoinHandle<()> {
        let engine = self.clone();
        let worker = format!("{}/worker", self.inner.process);
        tokio::spawn(async move {
            loop {
                if !engine.is_stopping() {
                    if let Err(e) = engine.recover_expired_leases().await {
                        warn!(error = %e, "lease sweeper");
                    }
                    if let Err(e) = engine.run_due_jobs(&worker).await {
                        warn!(error = %e, "job worker");
                    }
                }
                tokio::time::sleep(poll).await;
            }
        })
    }

    /// Waits (at most `grace`) for the turns running in this process to end, so their steps are
    /// checkpointed and their leases released; a turn still running after that keeps its lease
    /// until it expires, as after a crash.
    ///
    /// Draining begins the stop ([`Engine::begin_shutdown`]): a turn that ends releases its chat and
    /// hands the queue on. Turns still running when `grace` is over are stopped and their leases
    /// ended at once, so another process (or this one, restarted) takes their chats over without
    /// waiting for the leases to run out; their replies are marked interrupted then.
    pub async fn drain(&self, grace: Duration) {
        self.begin_shutdown();
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let notified = self.inner.idle.notified();
            let active = self.inner.active.load(Ordering::SeqCst);
            if active == 0 {
                return;
            }
            tracing::info!(active, "waiting for running turns");
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break;
            }
        }
        let runs: Vec<ActiveRun> = self
            .inner
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
            if let Err(e) = self
                .inner
                .store
                .expire_lease(&run.lease, now_millis())
                .await
            {
                debug!(chat_id = %run.lease.chat_id, error = %e, "ending the lease of a stopped turn");
            }
        }
    }

    /// The chat's state now.
    pub async fn state(&self, chat: &ChatId) -> Result<TurnState> {
        Ok(self
            .inner
            .store
            .get_chat(chat)
            .await?
            .map(|c| c.state(now_millis()))
            .unwrap_or(TurnState::Idle))
    }
}

enum StepEnd {
    Continue,
    Final,
    Questions(Vec<(String, QuestionInput)>),
    Failed(ErrorInfo),
}

fn is_step_start(p: &MessagePart) -> bool {
    matches!(p, MessagePart::Other(v) if v.get("type").and_then(Value::as_str) == Some("step-start"))
}

/// The question tool as the model sees it.
pub fn question_tool_spec() -> ToolSpec {
    ToolSpec {
        name: QUESTION_TOOL.into(),
        description: "Ask the user one or more multiple-choice questions and wait for the answer."
            .into(),
        input_schema: json!({
            "type": "object",
            "required": ["questions"],
            "properties": {
                "questions": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["header", "question", "options"],
                        "properties": {
                            "header": {"type": "string", "description": "A short title"},
                            "question": {"type": "string"},
                            "options": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["label"],
                                    "properties": {
                                        "label": {"type": "string"},
                                        "description": {"type": "string"}
                                    }
                                }
                            },
                            "multiple": {"type": "boolean"},
                            "custom": {"type": "boolean"}
                        }
                    }
                }
            }
        }),
    }
}

/// Converts a stored message into model messages: a user message into one; an assistant message
/// into one assistant message per step followed by its tool results.
pub fn to_model_messages(m: &UiMessage, out: &mut Vec<ModelMessage>) {
    match m.role {
        Role::User => out.push(ModelMessage::User { text: m.text() }),
        Role::Assistant => {
            let mut steps: Vec<Vec<&MessagePart>> = vec![vec![]];
            for p in &m.parts {
                if is_step_start(p) {
                    if !steps.last().is_some_and(Vec::is_empty) {
                        steps.push(vec![]);
                    }
                } else {
                    steps.last_mut().expect("one step").push(p);
                }
            }
            for step in steps.into_iter().filter(|s| !s.is_empty()) {
                let text: String = step
                    .iter()
                    .filter_map(|p| match p {
                        MessagePart::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                let tools: Vec<&ToolPart> = step
                    .iter()
                    .filter_map(|p| match p {
                        MessagePart::Tool(t) => Some(t),
                        _ => None,
                    })
                    .collect();
                out.push(ModelMessage::Assistant {
                    text,
                    tool_calls: tools
                        .iter()
                        .map(|t| ToolCallRequest {
                            id: t.tool_call_id.clone(),
                            name: t.tool_name.clone(),
                            input: t.input.clone(),
                        })
                        .collect(),
                });
                for t in tools {
                    let (content, is_error) = match t.state {
                        ToolState::OutputAvailable => (
                            t.output.as_ref().map(Value::to_string).unwrap_or_default(),
                            false,
                        ),
                        ToolState::OutputError => (t.error_text.clone().unwrap_or_default(), true),
                        ToolState::InputAvailable => ("no result".into(), true),
                    };
                    out.push(ModelMessage::Tool {
                        tool_call_id: t.tool_call_id.clone(),
                        name: t.tool_name.clone(),
                        content,
                        is_error,
                    });
                }
            }
        }
    }
}
