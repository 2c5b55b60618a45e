//! [`Engine`]: the one handle callers hold — the HTTP API, adapters, tests. It wires the three
//! layers (channel → questions → turns, each calling only the ones below it) and exposes what
//! callers may do and read. Callers never see the store.
//!
//! `Engine::store()` is crate-private: nothing outside this crate calls the store through the
//! engine; tests use `store_for_tests()` (feature `testing`).
//!
//! `spawn_worker(poll)` is the process's one background worker. It sweeps expired leases every
//! `poll` and runs due jobs when woken: by a job this process scheduled (`Turns::job_scheduled`,
//! called after every store operation that writes a job), by a `Change::Job { run_at }` the store
//! pushes for any process's job, or at the next due time it reads from the store after each run
//! (`live_jobs`: a later run-at, a retry's backoff, a claim running out). Polling for jobs is the
//! fallback: every `poll` when the store pushes nothing (SQLite), every [`JOB_FALLBACK_POLL`] when
//! it does.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;
use tracing::{debug, error, warn};

use frogbot_channel::{ChannelEngine, EngineError, EngineHandle, Incoming, Received};

use super::channel::{ChangeOutcome, ChannelMessageOutcome, Channels, DeliveryRun};
use super::clock::{Clock, SystemClock};
use super::delivery::{DELIVERY_MAX_ATTEMPTS, job_backoff_ms};
use super::jobs::EngineJob;
use super::questions::{FormTarget, InteractionOutcome, Questions, UPDATED_MAX_RUNS};
use super::registry::{Channel, ChannelSettings, Registry};
use super::turn::{
    ChatEvent, EngineConfig, ModelOffer, SendMessage, SendResult, Sent, Settle, Settled,
    StopOutcome, TurnHandle, TurnListener, Turns,
};
use super::{Tool, questions::updated_backoff_ms};
use crate::error::{Error, Result};
use crate::model::{
    Actor, ChatId, Interaction, MessagePart, Millis, ThreadMessage, TurnState, UserId,
};
use crate::store::{
    ChatChanges, ChatRow, DynStore, Job, QuestionRow, QueuedChange, QueuedEdit, StoredMessage,
};

/// How many dead jobs housekeeping names in its warning.
const HOUSEKEEPING_DEAD_REPORT: u32 = 100;

/// How often a worker looks for due jobs when its store pushes them ([`Engine::spawn_worker`]):
/// only a fallback, for what a lost connection missed.
pub const JOB_FALLBACK_POLL: Duration = Duration::from_secs(30);

/// How many live jobs a worker reads for the next due time (the soonest due first).
const NEXT_DUE_SCAN: u32 = 16;

/// How long after the reply owed before it a waiting reply's job is due again.
const DELIVERY_ORDER_WAIT_MS: Millis = 500;

/// What [`Engine::housekeep`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Housekeeping {
    /// Expired question records removed.
    pub questions_purged: u64,
    /// Dead jobs past their retention removed.
    pub dead_jobs_purged: u64,
    /// Dead jobs kept (at most 100 counted).
    pub dead_jobs: usize,
}

/// The engine: turns, questions and channels over one store. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Parts>,
}

struct Parts {
    turns: Arc<Turns>,
    questions: Arc<Questions>,
    channels: Arc<Channels>,
    registry: Arc<Registry>,
    /// Who may do what, when the embedding program gave a policy ([`Engine::with_policy`]).
    auth: std::sync::OnceLock<Authorizer>,
}

/// Which chat action [`Engine::authorize_chat`] asks about.
#[derive(Clone, Copy)]
enum ChatAct {
    AgentWrite,
    Write,
    Event,
}

/// The policy and the principals it knows by id.
struct Authorizer {
    policy: crate::policy::Policy,
    principals: std::collections::HashMap<String, crate::policy::Principal>,
}

impl Authorizer {
    fn principal(&self, caller: Option<&crate::model::UserId>) -> crate::policy::Principal {
        use crate::policy::Principal;
        match caller {
            None => Principal::Anonymous,
            Some(id) => self
                .principals
                .get(id.as_str())
                .cloned()
                .unwrap_or_else(|| Principal::User(id.clone())),
        }
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("process", &self.inner.turns.process)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine over `store` offering `offers` and `tools`, on the system clock.
    pub fn new(
        store: DynStore,
        offers: Vec<ModelOffer>,
        tools: Vec<Arc<dyn Tool>>,
        config: EngineConfig,
    ) -> Self {
        Self::with_clock(store, offers, tools, config, Arc::new(SystemClock))
    }

    /// An engine reading the time from `clock` (tests drive time with a
    /// [`super::ManualClock`]).
    pub fn with_clock(
        store: DynStore,
        offers: Vec<ModelOffer>,
        tools: Vec<Arc<dyn Tool>>,
        config: EngineConfig,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let registry = Arc::new(Registry::default());
        let mut offers = offers;
        if !offers.iter().any(|o| o.id == super::ask::ASK_MODEL) {
            offers.push(ModelOffer {
                id: super::ask::ASK_MODEL.into(),
                model: Arc::new(super::ask::ask_model()),
                reasoning: vec![],
            });
        }
        let mut tools = tools;
        let own_tools: super::message_tools::ChannelsCell = Default::default();
        if config.message_tools {
            tools.extend(super::message_tools::message_tools(&own_tools));
        }
        let turns = Arc::new(Turns::new(store, clock, offers, tools, config));
        let questions = Arc::new(Questions {
            turns: turns.clone(),
            registry: registry.clone(),
        });
        let channels = Arc::new(Channels::new(
            turns.clone(),
            questions.clone(),
            registry.clone(),
        ));
        channels.set_self();
        let _ = own_tools.set(Arc::downgrade(&channels));
        let listener: Arc<dyn TurnListener> = channels.clone();
        turns.set_listener(Arc::downgrade(&listener));
        Self {
            inner: Arc::new(Parts {
                turns,
                questions,
                channels,
                registry,
                auth: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Asks `policy` at every engine entry that takes a caller (agent chats, agent messages,
    /// pins, acknowledgements, the inbox, people's web messages and block events), knowing the
    /// callers `principals` by their ids; a caller id it does not know is a user. Without it the
    /// engine trusts the embedding program's checks. Set once; later calls are ignored.
    pub fn with_policy(
        self,
        policy: crate::policy::Policy,
        principals: impl IntoIterator<Item = crate::policy::Principal>,
    ) -> Self {
        let principals = principals
            .into_iter()
            .filter_map(|p| p.user_id().map(|id| (id.as_str().to_owned(), p.clone())))
            .collect();
        let _ = self.inner.auth.set(Authorizer { policy, principals });
        self
    }

    /// Asks the policy (when one is set) whether `caller` may do `action`.
    fn authorize(
        &self,
        caller: Option<&crate::model::UserId>,
        action: crate::policy::Action<'_>,
    ) -> Result<()> {
        match self.inner.auth.get() {
            None => Ok(()),
            Some(a) => a
                .policy
                .decide(&a.principal(caller), action)
                .map_err(Error::Denied),
        }
    }

    /// [`Engine::authorize`] about a stored chat (a chat that does not exist is `NotFound`).
    async fn authorize_chat(
        &self,
        caller: Option<&crate::model::UserId>,
        chat: &ChatId,
        action: ChatAct,
    ) -> Result<()> {
        if self.inner.auth.get().is_none() {
            return Ok(());
        }
        let row = self.chat(chat).await?.ok_or_else(|| Error::NotFound {
            item: crate::Item::Chat,
            id: chat.to_string(),
        })?;
        let view = crate::policy::ChatView::of(&row);
        self.authorize(
            caller,
            match action {
                ChatAct::AgentWrite => crate::policy::Action::AgentWrite(&view),
                ChatAct::Write => crate::policy::Action::WriteChat(&view),
                ChatAct::Event => crate::policy::Action::BlockEvent(&view),
            },
        )
    }

    /// Asks `source` for more tools at every model step (MCP servers' tools, which change while
    /// the engine runs). Set once; later calls are ignored.
    pub fn with_tool_source(self, source: Arc<dyn super::ToolSource>) -> Self {
        self.inner.turns.set_tool_source(source);
        self
    }

    /// Registers a channel served by this process (a channel of the same platform is replaced).
    pub fn with_channel(self, channel: Channel) -> Self {
        self.inner.registry.add(channel);
        self
    }

    pub(crate) fn store(&self) -> &DynStore {
        &self.inner.turns.store
    }

    /// The store, for tests that look behind the engine (feature `testing`; production code —
    /// adapters, the HTTP API — uses the engine's methods).
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn store_for_tests(&self) -> &DynStore {
        self.store()
    }

    /// The time on the engine's clock (the one its leases and deadlines are read against).
    pub fn now(&self) -> Millis {
        self.inner.turns.now()
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.turns.config
    }

    /// The models offered.
    pub fn offers(&self) -> &[ModelOffer] {
        &self.inner.turns.offers
    }

    /// Live chat changes made by this process.
    pub fn subscribe(&self) -> broadcast::Receiver<ChatEvent> {
        self.inner.turns.subscribe()
    }

    /// Checks a model/reasoning choice against the offers; returns the resolved model id.
    pub fn check_selection(&self, model: Option<&str>, reasoning: Option<&str>) -> Result<String> {
        self.inner.turns.check_selection(model, reasoning)
    }

    // ---- turns ---------------------------------------------------------------------------------

    /// Sends a user message: starts a turn when the chat is idle, otherwise saves it as queued
    /// (or as a steer for the running turn, from its driving user). Who may write the chat is
    /// decided in the same store operation ([`Error::Forbidden`], [`Error::ChannelChat`]); a
    /// message id the chat has already is [`Error::DuplicateMessage`].
    pub async fn send(&self, req: SendMessage) -> Result<Sent> {
        let chat = req.chat_id.clone();
        let id = req.id.clone();
        match self.inner.turns.send(req, true).await? {
            SendResult::Started(h) => Ok(Sent::Started(h)),
            SendResult::Queued {
                message_id,
                delivery,
            } => Ok(Sent::Queued {
                message_id,
                delivery,
            }),
            SendResult::Duplicate => Err(Error::DuplicateMessage {
                chat_id: chat,
                message_id: id.unwrap_or_default(),
            }),
        }
    }

    /// Runs a turn on the chat's latest messages without queueing: rejects with
    /// [`Error::TurnInProgress`] while a turn runs or a question waits.
    pub async fn generate(
        &self,
        chat_id: &ChatId,
        parts: Vec<MessagePart>,
        author: Option<UserId>,
    ) -> Result<TurnHandle> {
        let req = SendMessage {
            chat_id: chat_id.clone(),
            id: None,
            parts,
            author,
            delivery: crate::model::Delivery::Queue,
            model: None,
            reasoning: None,
            channel: None,
            speaker: None,
            context: None,
        };
        match self.inner.turns.send(req, false).await? {
            SendResult::Started(h) => Ok(h),
            _ => Err(Error::TurnInProgress {
                chat_id: chat_id.clone(),
            }),
        }
    }

    /// If the chat is idle (its lease free or run out) and has queued messages, promotes the
    /// oldest and runs it (in the background). Returns whether a turn was started.
    pub async fn kick(&self, chat_id: &ChatId) -> Result<bool> {
        self.inner.turns.run_queue(chat_id).await
    }

    /// The chat's state now.
    pub async fn state(&self, chat: &ChatId) -> Result<TurnState> {
        Ok(self
            .store()
            .get_chat(chat)
            .await?
            .map(|c| c.state(self.now()))
            .unwrap_or(TurnState::Idle))
    }

    // ---- questions -----------------------------------------------------------------------------

    /// Records an answer or a dismissal of a waiting question call (the first one wins), then
    /// continues the turn when the step's last waiting call is answered, or ends it on a dismissal.
    pub async fn settle(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        settle: Settle,
        actor: Option<Actor>,
    ) -> Result<Settled> {
        self.inner
            .questions
            .settle(chat, tool_call_id, settle, actor, None)
            .await
    }

    /// [`Engine::settle`] by a caller that has just read the chat (to decide who may answer):
    /// `read` is that row, which spares the settle reading it again. Read it before calling, never
    /// keep it: the question is looked up after it.
    pub async fn settle_read(
        &self,
        read: ChatRow,
        tool_call_id: &str,
        settle: Settle,
        actor: Option<Actor>,
    ) -> Result<Settled> {
        let chat = read.chat_id.clone();
        self.inner
            .questions
            .settle(&chat, tool_call_id, settle, actor, Some(read))
            .await
    }

    /// Withdraws the questions of a waiting reply (cancelled) and returns the chat to idle.
    /// `false` when `message_id` is not the waiting reply, or when an answer (or another
    /// withdrawal) gave every question its outcome first.
    pub async fn withdraw(&self, chat: &ChatId, message_id: &str) -> Result<bool> {
        self.inner.questions.withdraw(chat, message_id).await
    }

    /// Records `expired` (with the defaults when a question has them) on the waiting calls of
    /// `message_id` whose deadline passed, and continues.
    pub async fn expire(&self, chat: &ChatId, message_id: &str) -> Result<()> {
        self.inner.questions.expire(chat, message_id).await
    }

    // ---- channels ------------------------------------------------------------------------------

    /// The channel registered for `platform`.
    pub fn channel(&self, platform: &str) -> Option<Arc<Channel>> {
        self.inner.registry.get(platform)
    }

    /// Takes in what an adapter of `platform` received — every kind through one entry (the
    /// `ChannelEngine` an adapter holds calls this); the outcome is the [`Received`] variant of
    /// the same name. The typed methods below (`channel_message`, `handle_interaction`, …) are the
    /// same paths for callers that want a kind's full outcome (a started turn's handle).
    pub async fn receive(&self, platform: &str, incoming: Incoming) -> Result<Received> {
        Ok(match incoming {
            Incoming::Message { thread, message } => Received::Message(
                self.channel_message(platform, &thread, message)
                    .await?
                    .outcome(),
            ),
            Incoming::Changed {
                thread,
                message_id,
                text,
            } => Received::Changed(
                self.channel_message_changed(platform, &thread, &message_id, text)
                    .await?,
            ),
            Incoming::Interaction {
                thread,
                interaction,
            } => Received::Interaction(
                self.handle_interaction(platform, thread.as_deref(), &interaction)
                    .await?,
            ),
            Incoming::Stop { thread, who } => {
                Received::Stop(self.channel_stop(platform, &thread, &who).await?)
            }
            Incoming::Event { thread, click } => {
                Received::Event(self.channel_event(platform, &thread, click).await?)
            }
            Incoming::FormOpen { message_id } => Received::FormOpen(
                self.question_for_form(platform, &message_id)
                    .await?
                    .map(Box::new),
            ),
            other => {
                return Err(Error::invalid(format!(
                    "this engine does not take {other:?} in"
                )));
            }
        })
    }

    /// A handle on this engine for an adapter (`frogbot_channel::Adapter::start` takes one).
    pub fn handle(&self) -> EngineHandle {
        EngineHandle::new(self.clone())
    }

    /// Whether a channel thread has a chat: the bot takes part in it (a reply there needs no
    /// mention).
    pub async fn channel_thread_known(&self, platform: &str, thread: &str) -> Result<bool> {
        self.inner.channels.thread_known(platform, thread).await
    }

    /// Handles a click, a form submission or a thread reply from `platform` (in `thread`, when the
    /// platform says). For a thread reply, anything but [`InteractionOutcome::Ignored`] means it was
    /// consumed and must not reach the agent as a message.
    pub async fn handle_interaction(
        &self,
        platform: &str,
        thread: Option<&str>,
        interaction: &Interaction,
    ) -> Result<InteractionOutcome> {
        self.inner
            .questions
            .handle_interaction(platform, thread, interaction)
            .await
    }

    /// Sets how `platform`'s chats are treated: the model and reasoning option their messages
    /// are sent with, and whether messages get acknowledgements. The selection is checked like
    /// any: an id that is not offered is an error here, not at the first message.
    pub fn with_channel_settings(self, platform: &str, settings: ChannelSettings) -> Result<Self> {
        self.check_selection(settings.model.as_deref(), settings.reasoning.as_deref())?;
        self.inner.registry.set(platform, settings);
        Ok(self)
    }

    /// Stops the running turn of `chat` when `by` is the user driving it (a turn without a
    /// driver — an anonymous caller's — only by an anonymous caller): it stops at the next step boundary, a streaming
    /// model answer is cut off, and what it produced is kept with a [`STOPPED_TEXT`] mark. Only a
    /// turn running in this process can be stopped. The caller checks that `by` may write `chat`.
    ///
    /// [`STOPPED_TEXT`]: super::STOPPED_TEXT
    pub fn stop(&self, chat: &ChatId, by: Option<&UserId>) -> StopOutcome {
        self.inner.turns.stop(chat, by, true)
    }

    /// Stops the running turn of a channel thread's chat for the platform user `who` (the Stop
    /// control on a streamed reply): `NotDriver` for anyone but the person driving the turn.
    pub async fn channel_stop(
        &self,
        platform: &str,
        thread: &str,
        who: &crate::model::PlatformUser,
    ) -> Result<StopOutcome> {
        self.inner
            .channels
            .channel_stop(platform, thread, who)
            .await
    }

    /// A click on an event button of an agent message in a channel thread (read by the adapter
    /// into an [`EventClick`](crate::model::EventClick)): after the identity and access checks,
    /// the event goes to the bound agent's inbox; it answers nothing and may be sent any number
    /// of times. `Stale` when the message, block or button is gone.
    pub async fn channel_event(
        &self,
        platform: &str,
        thread: &str,
        click: crate::model::EventClick,
    ) -> Result<super::EventOutcome> {
        self.inner
            .channels
            .channel_event(platform, thread, click)
            .await
    }

    // ---- agent chats (agents outside FrogBot) --------------------------------------------------

    /// Opens a chat for an external agent (`agent`: its FrogBot user, `None` for an anonymous
    /// caller): a web chat of the given id, or a platform thread — for a channel or a person the
    /// channel starts one with `text` as its first message, idempotent on `key`. People's
    /// messages there then reach the agent's inbox instead of a model. A chat bound to another
    /// agent is `Forbidden`.
    pub async fn open_agent_chat(
        &self,
        agent: Option<&UserId>,
        place: super::AgentPlace,
        text: &str,
        key: &str,
    ) -> Result<ChatRow> {
        self.authorize(agent, crate::policy::Action::OpenAgentChat(place.target()))?;
        self.inner
            .channels
            .open_agent_chat(agent, place, text, key)
            .await
    }

    /// Binds an ask's chat to its asker, so people's later messages in the ask's thread reach
    /// the asker's inbox (a chat bound to someone else is left as it is).
    pub async fn bind_ask_chat(&self, chat: &crate::store::NewChat, asker: Option<&UserId>) {
        self.inner.channels.bind_for_ask(chat, asker).await
    }

    /// Posts an agent message (title, text, blocks; optionally pinned) in the agent's chat; the
    /// same message id again returns the message already posted. Shown on the chat's platform
    /// at once (a worker retries what fails).
    pub async fn agent_send(
        &self,
        chat: &ChatId,
        agent: Option<&UserId>,
        message: super::AgentMessage,
    ) -> Result<crate::model::UiMessage> {
        self.authorize_chat(agent, chat, ChatAct::AgentWrite)
            .await?;
        self.inner.channels.agent_send(chat, agent, message).await
    }

    /// Edits one of the agent's messages (its content, or one block by id), in place on the
    /// platform.
    pub async fn agent_edit(
        &self,
        chat: &ChatId,
        agent: Option<&UserId>,
        message_id: &str,
        edit: super::MessageEdit,
    ) -> Result<crate::model::UiMessage> {
        self.authorize_chat(agent, chat, ChatAct::AgentWrite)
            .await?;
        self.inner
            .channels
            .agent_edit(chat, agent, message_id, edit)
            .await
    }

    /// Deletes one of the agent's messages: removed on the platform and from every view (a
    /// tombstone stays). Deleting an ask's message whose question waits withdraws it.
    pub async fn agent_delete(
        &self,
        chat: &ChatId,
        agent: Option<&UserId>,
        message_id: &str,
    ) -> Result<()> {
        self.authorize_chat(agent, chat, ChatAct::AgentWrite)
            .await?;
        let row = self.inner.channels.agent_chat_of(chat, agent).await?;
        if row.awaiting_message_id.as_deref() == Some(message_id) {
            self.withdraw(chat, message_id).await?;
            return Ok(());
        }
        self.inner
            .channels
            .agent_delete(chat, agent, message_id)
            .await
    }

    /// Pins the agent's message `message` under `key` (replacing the key's pin), or unpins
    /// `key` (`None`).
    pub async fn agent_pin(
        &self,
        chat: &ChatId,
        agent: Option<&UserId>,
        key: &str,
        message: Option<&str>,
    ) -> Result<Option<crate::model::UiMessage>> {
        self.authorize_chat(agent, chat, ChatAct::AgentWrite)
            .await?;
        self.inner
            .channels
            .agent_pin(chat, agent, key, message)
            .await
    }

    /// The oldest messages and events waiting in `agent`'s inbox (of one chat, or all its
    /// chats), at most `limit`; each is marked Seen (on its platform too) and never returned
    /// again.
    pub async fn inbox(
        &self,
        agent: Option<&UserId>,
        chat: Option<&ChatId>,
        limit: u32,
    ) -> Result<Vec<super::InboxItem>> {
        self.authorize(agent, crate::policy::Action::ReadInbox)?;
        self.inner.channels.inbox(agent, chat, limit).await
    }

    /// [`Engine::inbox`], waiting up to `wait` for something to arrive (woken by this process's
    /// arrivals, and looking at the store every second for other processes').
    pub async fn inbox_wait(
        &self,
        agent: Option<&UserId>,
        chat: Option<&ChatId>,
        limit: u32,
        wait: Duration,
    ) -> Result<Vec<super::InboxItem>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.inner.channels.inbox_arrived.notified();
            let items = self.inbox(agent, chat, limit).await?;
            if !items.is_empty() || tokio::time::Instant::now() >= deadline {
                return Ok(items);
            }
            let next = (tokio::time::Instant::now() + Duration::from_secs(1)).min(deadline);
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(next) => {}
            }
        }
    }

    /// The agent acknowledges a person's message in its chat: Working or Done.
    pub async fn agent_ack(
        &self,
        chat: &ChatId,
        agent: Option<&UserId>,
        message_id: &str,
        ack: crate::model::Ack,
    ) -> Result<()> {
        self.authorize_chat(agent, chat, ChatAct::AgentWrite)
            .await?;
        self.inner
            .channels
            .agent_ack(chat, agent, message_id, ack)
            .await
    }

    /// A person's message in a web chat bound to an agent (`POST /api/chats/{id}/messages`):
    /// it waits in the agent's inbox; no model runs. `None` for a repeated message id.
    pub async fn web_message(
        &self,
        chat: &ChatId,
        by: Option<&UserId>,
        id: Option<String>,
        text: &str,
    ) -> Result<Option<crate::model::UiMessage>> {
        self.authorize_chat(by, chat, ChatAct::Write).await?;
        self.inner.channels.web_message(chat, by, id, text).await
    }

    /// An event button clicked in the web chat (or over HTTP) by `by`: the event goes to the
    /// chat's agent's inbox.
    pub async fn web_event(
        &self,
        chat: &ChatId,
        by: Option<&UserId>,
        message_id: &str,
        block_id: &str,
        value: &str,
    ) -> Result<super::EventOutcome> {
        self.authorize_chat(by, chat, ChatAct::Event).await?;
        self.inner
            .channels
            .web_event(chat, by, message_id, block_id, value)
            .await
    }

    /// Handles a message in a channel thread: a reply that answers a question is consumed; else,
    /// after the identity and access checks, it starts or continues the thread's chat.
    pub async fn channel_message(
        &self,
        platform: &str,
        thread: &str,
        message: ThreadMessage,
    ) -> Result<ChannelMessageOutcome> {
        self.inner
            .channels
            .channel_message(platform, thread, message)
            .await
    }

    /// A person edited their message `message_id` (the platform's id) in `thread` to `text`
    /// (`Some`, a leading mention stripped as for [`Engine::channel_message`]) or it was deleted
    /// (`None`): a message still queued runs with the new text, or never; one that already ran is
    /// left as the agent read it ([`ChangeOutcome`]).
    pub async fn channel_message_changed(
        &self,
        platform: &str,
        thread: &str,
        message_id: &str,
        text: Option<String>,
    ) -> Result<ChangeOutcome> {
        self.inner
            .channels
            .channel_message_changed(platform, thread, message_id, text)
            .await
    }

    /// The question a click on the platform message `message_id` may open a form for ("Other…"):
    /// `None` unless that message is the current message of an open question.
    pub async fn question_for_form(
        &self,
        platform: &str,
        message_id: &str,
    ) -> Result<Option<FormTarget>> {
        self.inner.questions.form_target(platform, message_id).await
    }

    // ---- reading (the HTTP API) ----------------------------------------------------------------

    /// Whether the store answers.
    pub async fn ping(&self) -> Result<()> {
        self.store().ping().await.map_err(Error::from)
    }

    /// Reads the backlog (queued messages; jobs due, running and dead, on the engine's clock) and
    /// sets the backlog gauges of [`crate::metrics`] to it: what a metrics scrape calls.
    pub async fn refresh_backlog(&self) -> Result<crate::store::Backlog> {
        crate::metrics::refresh_backlog(self.store().as_ref(), self.now())
            .await
            .map_err(Error::from)
    }

    /// Takes the role `key` when no process sharing this database holds it (`None` when one
    /// does): for a receiver the platform allows only once, such as a bot's Telegram poller or
    /// a Matrix account's sync. Released when the returned hold is dropped or this process
    /// dies; [`Held::lost`](crate::store::Held::lost) says when it was lost otherwise.
    pub async fn try_hold(&self, key: &str) -> Result<Option<Box<dyn crate::store::Held>>> {
        self.store().try_hold(key).await.map_err(Error::from)
    }

    /// Renews this process's membership `member` of `group` for `ttl` and returns the group's
    /// live members, sorted ([`RoleStore::members`](crate::store::RoleStore::members)): how the
    /// replicas sharing this database split a piece of work, such as a Discord bot's gateway
    /// shards. `ttl` zero leaves the group.
    pub async fn members(
        &self,
        group: &str,
        member: &str,
        ttl: std::time::Duration,
    ) -> Result<Vec<String>> {
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        self.store()
            .members(group, member, ttl_ms, self.now())
            .await
            .map_err(Error::from)
    }

    /// The changes any process makes on the database, as the store pushes them
    /// ([`JobStore::changes`](crate::store::JobStore::changes)); `None` when the store pushes
    /// nothing (other processes' changes are then found by polling).
    pub fn store_changes(&self) -> Option<tokio::sync::broadcast::Receiver<crate::store::Change>> {
        self.store().changes()
    }

    /// One chat.
    pub async fn chat(&self, chat: &ChatId) -> Result<Option<ChatRow>> {
        self.store().get_chat(chat).await.map_err(Error::from)
    }

    /// The chats owned by `owner` (`None`: the ownerless ones), newest first.
    pub async fn chats(&self, owner: Option<&UserId>, limit: u32) -> Result<Vec<ChatRow>> {
        self.store()
            .list_chats(owner, limit)
            .await
            .map_err(Error::from)
    }

    /// One message of a chat by id.
    pub async fn message(&self, chat: &ChatId, id: &str) -> Result<Option<StoredMessage>> {
        Ok(self.store().get_message(chat, id).await?)
    }

    /// A chat's messages in stored order.
    pub async fn messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
        self.store().list_messages(chat).await.map_err(Error::from)
    }

    /// The channel thread an ask to `place` on `platform` goes to (the adapter may start one,
    /// posting `text`, idempotent on `key`, the ask's message id — see
    /// [`ChannelOutbox::ask_thread`](super::ChannelOutbox::ask_thread)): [`Error::InvalidInput`]
    /// when this process serves no such channel, [`Error::Channel`] when the platform fails.
    pub async fn ask_thread(
        &self,
        platform: &str,
        place: super::AskPlace<'_>,
        text: &str,
        key: &str,
    ) -> Result<crate::model::ChannelRef> {
        let outbox = self
            .inner
            .registry
            .get(platform)
            .and_then(|c| c.outbox.clone())
            .ok_or_else(|| Error::InvalidInput {
                reason: format!("no {platform} channel is configured"),
            })?;
        let thread = outbox
            .ask_thread(place, text, key)
            .await
            .map_err(|e| Error::Channel {
                platform: platform.to_owned(),
                reason: e.to_string(),
            })?;
        Ok(crate::model::ChannelRef {
            platform: platform.to_owned(),
            thread,
        })
    }

    /// Whether an ask's question waits, from its question record alone (no messages read):
    /// `Some(true)` while it is open, `Some(false)` once it has an outcome, `None` without a
    /// record (the ask is queued, unknown, or its record is gone). What an ask's wait polls.
    pub async fn ask_waits(&self, id: &super::ask::AskId) -> Result<Option<bool>> {
        Ok(self
            .store()
            .get_question(&id.chat, &super::ask::ask_call_id(&id.message), self.now())
            .await?
            .map(|q| q.outcome.is_none()))
    }

    /// An ask's status (`None`: no such ask in that chat): its question record's outcome while
    /// the record lives, else what the reply's tool part says.
    pub async fn ask_status(
        &self,
        id: &super::ask::AskId,
    ) -> Result<Option<super::ask::AskStatus>> {
        let messages: Vec<_> = self
            .messages(&id.chat)
            .await?
            .into_iter()
            .map(|m| m.message)
            .collect();
        let record = self
            .store()
            .get_question(&id.chat, &super::ask::ask_call_id(&id.message), self.now())
            .await?
            .map(|q| (q.outcome, q.actor));
        Ok(super::ask::AskStatus::read(id, &messages, record))
    }

    /// The messages of a chat written after `version`, with its version now.
    pub async fn changes_since(&self, chat: &ChatId, version: i64) -> Result<ChatChanges> {
        self.store()
            .messages_since(chat, version)
            .await
            .map_err(Error::from)
    }

    /// The open question calls of the chat's waiting reply, in call order.
    pub async fn pending(&self, chat: &ChatRow) -> Result<Vec<QuestionRow>> {
        let Some(message) = &chat.awaiting_message_id else {
            return Ok(vec![]);
        };
        Ok(self
            .store()
            .questions_of_message(&chat.chat_id, message, self.now())
            .await?
            .into_iter()
            .filter(|q| q.outcome.is_none())
            .collect())
    }

    /// Changes a queued message (its author only); the queue runs if the chat went idle meanwhile.
    pub async fn edit_queued(
        &self,
        chat: &ChatId,
        id: &str,
        by: Option<&UserId>,
        edit: &QueuedEdit,
    ) -> Result<QueuedChange> {
        let change = self
            .store()
            .edit_queued(chat, id, by, edit, self.now())
            .await?;
        if let QueuedChange::Done(Some(m)) = &change {
            self.inner.turns.emit_message(chat, &m.message);
        }
        Ok(change)
    }

    /// Removes a queued message (its author only).
    pub async fn delete_queued(
        &self,
        chat: &ChatId,
        id: &str,
        by: Option<&UserId>,
    ) -> Result<QueuedChange> {
        self.store()
            .delete_queued(chat, id, by, self.now())
            .await
            .map_err(Error::from)
    }

    // ---- jobs and life cycle -------------------------------------------------------------------

    /// Runs due durable jobs (continuing turns a dead process left waiting, runs of handed-on
    /// queues, `updated` retries, expiries). Returns how many ran.
    pub async fn run_due_jobs(&self, worker: &str) -> Result<usize> {
        let store = self.store();
        let mut ran = 0;
        while let Some(job) = store.claim_job(worker, 60_000, self.now()).await? {
            ran += 1;
            let Some(typed) = EngineJob::from_job(&job) else {
                store
                    .bury_job(&job, "no engine job of this kind and payload")
                    .await?;
                continue;
            };
            if let EngineJob::Deliver { .. } = &typed {
                self.finish_delivery_job(&job, &typed).await?;
                continue;
            }
            let result = match &typed {
                EngineJob::ResumeChat {
                    chat,
                    message,
                    driver,
                } => self
                    .inner
                    .turns
                    .resume(chat, message, driver.clone())
                    .await
                    .map(|_| true),
                EngineJob::RunQueue { chat } => {
                    self.inner.turns.run_queue(chat).await.map(|_| true)
                }
                EngineJob::QuestionUpdated {
                    chat,
                    call,
                    revision,
                } => {
                    self.inner
                        .questions
                        .run_updated_job(chat, call, *revision)
                        .await
                }
                EngineJob::QuestionExpire { chat, message } => self
                    .inner
                    .questions
                    .expire(chat, message)
                    .await
                    .map(|_| true),
                EngineJob::Deliver { .. } => Ok(true),
                EngineJob::SyncMessage { chat, message } => {
                    self.inner.channels.sync_message(chat, message).await
                }
            };
            let retry_at = |attempts: i64| self.now() + updated_backoff_ms(attempts);
            match result {
                Ok(true) => {
                    store.complete_job(&job).await?;
                }
                Ok(false) if job.attempts >= UPDATED_MAX_RUNS => {
                    store.bury_job(&job, "updated kept failing").await?;
                }
                Ok(false) => {
                    store
                        .retry_job(&job, retry_at(job.attempts), "updated failed")
                        .await?;
                }
                Err(e) => {
                    let at = match typed {
                        EngineJob::QuestionUpdated { .. } => retry_at(job.attempts),
                        _ => self.now() + 5_000,
                    };
                    store.retry_job(&job, at, &e.to_string()).await?;
                }
            }
        }
        Ok(ran)
    }

    /// A worker's attempt at a reply's delivery its process did not finish: done, retried with
    /// backoff (at least the platform's wait), or buried after [`DELIVERY_MAX_ATTEMPTS`] or a
    /// permanent failure (an error log; the dead job stays for operators).
    async fn finish_delivery_job(&self, job: &Job, typed: &EngineJob) -> Result<()> {
        let store = self.store();
        let key = job.key.as_deref().unwrap_or_default();
        // A thread's replies in order: one owed before this one goes first (this claim does
        // not count as an attempt).
        if let EngineJob::Deliver { chat, .. } = typed
            && let Some(earlier) = store
                .earlier_job(&EngineJob::deliver_prefix(chat), key)
                .await?
        {
            let after = earlier.run_at.max(earlier.claim_until.unwrap_or(0));
            let at = after.max(self.now()) + DELIVERY_ORDER_WAIT_MS;
            debug!(key, earlier = ?earlier.key, "a reply owed before this one goes first");
            store.defer_job(job, at).await?;
            return Ok(());
        }
        let attempt = u32::try_from(job.attempts).unwrap_or(u32::MAX);
        let run = self.inner.channels.run_delivery_job(typed, attempt).await;
        let (why, transient) = match run {
            DeliveryRun::Done => {
                store.complete_job(job).await?;
                return Ok(());
            }
            DeliveryRun::NotHere => (
                "no channel for this thread in this process".to_string(),
                true,
            ),
            DeliveryRun::Failed(e, transient) => (e.to_string(), transient),
        };
        if transient && job.attempts < DELIVERY_MAX_ATTEMPTS {
            warn!(key, attempt = job.attempts, error = %why, "delivering a reply failed; retrying later");
            let at = self.now() + job_backoff_ms(job.attempts);
            store.retry_job(job, at, &why).await?;
        } else {
            error!(key, attempts = job.attempts, error = %why, "giving up on delivering a reply: the thread misses it (dead job kept)");
            store.bury_job(job, &why).await?;
        }
        Ok(())
    }

    /// Housekeeping: removes expired question records and the dead jobs older than
    /// [`EngineConfig::dead_job_retention`], and warns about the dead jobs kept (the replies or
    /// updates given up on).
    pub async fn housekeep(&self) -> Result<Housekeeping> {
        let store = self.store();
        let now = self.now();
        let questions = store.purge_expired(now).await?;
        let dead_jobs_purged = store
            .purge_dead_jobs(now.saturating_sub(self.dead_job_retention_ms()))
            .await?;
        let dead = store.dead_jobs(HOUSEKEEPING_DEAD_REPORT).await?;
        if !dead.is_empty() {
            let kinds: Vec<String> = dead
                .iter()
                .map(|j| j.key.clone().unwrap_or_else(|| j.kind.clone()))
                .collect();
            warn!(count = dead.len(), jobs = ?kinds, "dead jobs are kept for inspection");
        }
        Ok(Housekeeping {
            questions_purged: questions,
            dead_jobs_purged,
            dead_jobs: dead.len(),
        })
    }

    /// Recovers chats whose turn lease ran out without being released: marks each one's
    /// interrupted turn and runs its queue. Returns how many were taken.
    pub async fn recover_expired_leases(&self) -> Result<usize> {
        self.inner.turns.recover_expired_leases().await
    }

    /// Starts the background worker of this process: it sweeps expired leases every `poll`, and
    /// runs the durable jobs as they fall due (a lease sweep alone does not look for jobs).
    ///
    /// Jobs are pushed, not polled: the worker wakes when this process schedules a job, when the
    /// store announces one scheduled by any process ([`crate::store::Change::Job`]), and at the
    /// next due time it read from the store after its last run (a job scheduled for later, a
    /// retry's backoff, a claim whose time runs out). Polling is only the fallback: every `poll`
    /// when the store pushes nothing (another process's jobs are found then), and every
    /// [`JOB_FALLBACK_POLL`] (or `poll`, when longer) when it does — for what a lost connection
    /// missed before its resync.
    pub fn spawn_worker(&self, poll: Duration) -> tokio::task::JoinHandle<()> {
        let engine = self.clone();
        let worker = format!("{}/worker", self.inner.turns.process);
        // Subscribed before the first run: nothing scheduled from now on is missed.
        let mut local = self.inner.turns.scheduled_jobs();
        let mut pushed = self.store().changes();
        tokio::spawn(async move {
            use tokio::time::Instant;
            let every = engine.config().housekeeping_every;
            let mut next_housekeeping = Instant::now() + every;
            let mut next_sweep = Instant::now();
            // When jobs are looked for next (now, at the start), and the next due time on the
            // engine's clock: the clock can move by more than the time slept (a stepped host
            // clock, a new offset from the database's, a test's injected clock), so a due time
            // is checked against it at every wake-up (at least every `poll`, the lease sweep's),
            // not only against the instant computed when the wait began.
            let mut jobs_at = Instant::now();
            let mut due_ms: Option<Millis> = None;
            loop {
                let now = Instant::now();
                let jobs_due = jobs_at <= now || due_ms.is_some_and(|d| d <= engine.now());
                let mut failed = false;
                if jobs_due {
                    // What was announced before this run is run (or read as the next due time)
                    // by it.
                    while local.try_recv().is_ok() {}
                    if let Some(rx) = pushed.as_mut() {
                        while rx.try_recv().is_ok() {}
                    }
                }
                if !engine.is_stopping() {
                    if now >= next_sweep {
                        next_sweep = now + poll;
                        if let Err(e) = engine.recover_expired_leases().await {
                            warn!(error = %e, "lease sweeper");
                        }
                    }
                    if jobs_due && let Err(e) = engine.run_due_jobs(&worker).await {
                        warn!(error = %e, "job worker");
                        failed = true;
                    }
                    if Instant::now() >= next_housekeeping {
                        next_housekeeping = Instant::now() + every;
                        match engine.housekeep().await {
                            Ok(h) => tracing::debug!(?h, "housekeeping"),
                            Err(e) => warn!(error = %e, "housekeeping"),
                        }
                    }
                }
                if jobs_due {
                    let fallback = if pushed.is_some() {
                        poll.max(JOB_FALLBACK_POLL)
                    } else {
                        poll
                    };
                    jobs_at = Instant::now() + fallback;
                    due_ms = None;
                    match engine.next_job_due().await {
                        Ok(Some(at)) => {
                            due_ms = Some(at);
                            jobs_at = jobs_at.min(engine.instant_at(at));
                        }
                        Ok(None) => {}
                        Err(e) => warn!(error = %e, "job worker: reading the next due job"),
                    }
                    if failed {
                        // Not again at once (a due job the store would not give out).
                        jobs_at = jobs_at.max(Instant::now() + poll);
                        due_ms = None;
                    }
                }
                // Sleep until the next lease sweep or due job, or a job announced due sooner.
                loop {
                    let until = jobs_at.min(next_sweep);
                    let due: Option<Millis> = tokio::select! {
                        () = tokio::time::sleep_until(until) => break,
                        at = local.recv() => match at {
                            Ok(at) => Some(at),
                            Err(broadcast::error::RecvError::Lagged(_)) => Some(0),
                            // The engine is gone: so is this worker.
                            Err(broadcast::error::RecvError::Closed) => return,
                        },
                        change = async {
                            match pushed.as_mut() {
                                Some(rx) => rx.recv().await,
                                None => std::future::pending().await,
                            }
                        } => match change {
                            Ok(crate::store::Change::Job { run_at }) => Some(run_at),
                            Ok(crate::store::Change::Chat(_)) => None,
                            // Notices may have been lost: read the store now.
                            Ok(crate::store::Change::Resync)
                            | Err(broadcast::error::RecvError::Lagged(_)) => Some(0),
                            Err(broadcast::error::RecvError::Closed) => {
                                pushed = None;
                                None
                            }
                        },
                    };
                    if let Some(at) = due {
                        due_ms = Some(due_ms.map_or(at, |d| d.min(at)));
                        jobs_at = jobs_at.min(engine.instant_at(at));
                        if jobs_at <= Instant::now() {
                            break;
                        }
                    }
                }
            }
        })
    }

    /// Wakes this process's workers for a job due at `run_at` that it scheduled.
    pub(crate) fn job_scheduled(&self, run_at: Millis) {
        self.inner.turns.job_scheduled(run_at);
    }

    /// When the next job may be claimed, as far as the store says: the earliest of the live
    /// jobs' run-at times (a claimed one's when its claim runs out).
    async fn next_job_due(&self) -> Result<Option<Millis>> {
        let jobs = self.store().live_jobs(NEXT_DUE_SCAN).await?;
        Ok(jobs
            .iter()
            .map(|j| j.run_at.max(j.claim_until.unwrap_or(0)))
            .min())
    }

    /// The instant of `at` on the engine's clock.
    fn instant_at(&self, at: Millis) -> tokio::time::Instant {
        let ahead = u64::try_from(at.saturating_sub(self.now())).unwrap_or(0);
        tokio::time::Instant::now() + Duration::from_millis(ahead)
    }

    /// Begins a graceful stop: from now on a turn that ends releases its chat and hands the queue
    /// on (a durable job) instead of promoting it in this process.
    pub fn begin_shutdown(&self) {
        self.inner.turns.begin_shutdown();
    }

    /// Whether [`Engine::begin_shutdown`] was called.
    pub fn is_stopping(&self) -> bool {
        self.inner.turns.is_stopping()
    }

    /// Waits (at most `grace`) for the turns running in this process to end, so their steps are
    /// checkpointed and their leases released.
    ///
    /// Draining begins the stop ([`Engine::begin_shutdown`]): a turn that ends releases its chat and
    /// hands the queue on. Turns still running when `grace` is over are stopped and their leases
    /// ended at once, so another process (or this one, restarted) takes their chats over without
    /// waiting for the leases to run out; their replies are marked interrupted then.
    pub async fn drain(&self, grace: Duration) {
        self.inner.turns.drain(grace).await;
    }
}

#[async_trait::async_trait]
impl ChannelEngine for Engine {
    async fn receive(&self, platform: &str, incoming: Incoming) -> Result<Received, EngineError> {
        Engine::receive(self, platform, incoming)
            .await
            .map_err(engine_error)
    }

    async fn thread_known(&self, platform: &str, thread: &str) -> Result<bool, EngineError> {
        self.channel_thread_known(platform, thread)
            .await
            .map_err(engine_error)
    }
}

fn engine_error(e: Error) -> EngineError {
    if e.is_transient() {
        EngineError::transient(e)
    } else {
        EngineError::new(e)
    }
}
