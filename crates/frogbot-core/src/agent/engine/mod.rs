//! [`Engine`]: the one handle callers hold — the HTTP API, adapters, tests. It wires the three
//! layers (channel → questions → turns, each calling only the ones below it) and exposes what
//! callers may do and read. Callers never see the store.
//!
//! The engine itself holds construction (`new`, `with_*`), [`Engine::receive`] (the adapters'
//! entry, behind [`Engine::handle`]), [`Engine::now`], the configuration and the process's life
//! cycle (`spawn_worker`, `begin_shutdown`, `drain`). The rest is grouped by concern behind cheap
//! borrowed handles, one module each:
//!
//! - [`Engine::chats`] ([`Chats`](chats::Chats)): chat rows, messages, history, queued edits, the
//!   change subscriptions, people's messages and events in an agent's web chat;
//! - [`Engine::questions`] ([`Questions`](questions::Questions)): question records, settling,
//!   withdrawal, expiry, an ask's status;
//! - [`Engine::channels`] ([`Channels`](channels::Channels)): the registered channels and the
//!   typed channel entries behind `receive`, an ask's thread;
//! - [`Engine::agents`] ([`Agents`](agents::Agents)): models, sending, generating, kicking and
//!   stopping turns; the API of agents outside FrogBot (their chats, messages, inbox);
//! - [`Engine::ops`] ([`Ops`](ops::Ops)): the store's ping, the backlog, roles, jobs, the
//!   housekeeping purge and the lease recovery.
//!
//! What they return is named for callers in [`views`](super::views).
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

pub(super) mod agents;
pub(super) mod channels;
pub(super) mod chats;
pub(super) mod files;
pub(super) mod ops;
pub(super) mod questions;

/// How many dead jobs housekeeping names in its warning.
const HOUSEKEEPING_DEAD_REPORT: u32 = 100;

/// How often a worker looks for due jobs when its store pushes them ([`Engine::spawn_worker`]):
/// only a fallback, for what a lost connection missed.
pub const JOB_FALLBACK_POLL: Duration = Duration::from_secs(30);

/// How many live jobs a worker reads for the next due time (the soonest due first).
const NEXT_DUE_SCAN: u32 = 16;

/// How long after the reply owed before it a waiting reply's job is due again.
const DELIVERY_ORDER_WAIT_MS: Millis = 500;

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
    Upload,
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
        let row = self
            .chats()
            .get(chat)
            .await?
            .ok_or_else(|| Error::NotFound {
                item: crate::Item::Chat,
                id: chat.to_string(),
            })?;
        let view = crate::policy::ChatView::of(&row);
        self.authorize(
            caller,
            match action {
                ChatAct::AgentWrite => crate::policy::Action::AgentWrite(&view),
                ChatAct::Write => crate::policy::Action::WriteChat(&view),
                ChatAct::Upload => crate::policy::Action::UploadFile(&view),
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

    /// The chats: rows, messages, history, queued edits, change subscriptions.
    pub fn chats(&self) -> chats::Chats<'_> {
        chats::Chats(self)
    }

    /// The questions: records, answers, withdrawals, expiry, asks' status.
    pub fn questions(&self) -> questions::Questions<'_> {
        questions::Questions(self)
    }

    /// The channel-facing entries: registered channels, threads' messages, clicks, forms, stops,
    /// asks' threads.
    pub fn channels(&self) -> channels::Channels<'_> {
        channels::Channels(self)
    }

    /// Running agents: turns, steering, models; external agents' chats, messages and inbox.
    pub fn agents(&self) -> agents::Agents<'_> {
        agents::Agents(self)
    }

    /// Files: uploads to chats and reading them back.
    pub fn files(&self) -> files::Files<'_> {
        files::Files(self)
    }

    /// Operations: jobs, the housekeeping purge, the backlog, roles, the store's health.
    pub fn ops(&self) -> ops::Ops<'_> {
        ops::Ops(self)
    }

    /// How long a dead job is kept, in milliseconds.
    pub(crate) fn dead_job_retention_ms(&self) -> Millis {
        Millis::try_from(self.config().dead_job_retention.as_millis()).unwrap_or(Millis::MAX)
    }

    /// Takes in what an adapter of `platform` received — every kind through one entry (the
    /// `ChannelEngine` an adapter holds calls this); the outcome is the [`Received`] variant of
    /// the same name. The typed methods of [`Engine::channels`] (`message`, `interaction`, …) are
    /// the same paths for callers that want a kind's full outcome (a started turn's handle).
    pub async fn receive(&self, platform: &str, incoming: Incoming) -> Result<Received> {
        Ok(match incoming {
            Incoming::Message { thread, message } => Received::Message(
                self.channels()
                    .message(platform, &thread, message)
                    .await?
                    .outcome(),
            ),
            Incoming::Changed {
                thread,
                message_id,
                text,
            } => Received::Changed(
                self.channels()
                    .message_changed(platform, &thread, &message_id, text)
                    .await?,
            ),
            Incoming::Interaction {
                thread,
                interaction,
            } => Received::Interaction(
                self.channels()
                    .interaction(platform, thread.as_deref(), &interaction)
                    .await?,
            ),
            Incoming::Stop { thread, who } => {
                Received::Stop(self.channels().stop(platform, &thread, &who).await?)
            }
            Incoming::Event { thread, click } => {
                Received::Event(self.channels().event(platform, &thread, click).await?)
            }
            Incoming::FormOpen { message_id } => Received::FormOpen(
                self.channels()
                    .form_target(platform, &message_id)
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

    /// Sets how `platform`'s chats are treated: the model and reasoning option their messages
    /// are sent with, and whether messages get acknowledgements. The selection is checked like
    /// any: an id that is not offered is an error here, not at the first message.
    pub fn with_channel_settings(self, platform: &str, settings: ChannelSettings) -> Result<Self> {
        self.agents()
            .check_selection(settings.model.as_deref(), settings.reasoning.as_deref())?;
        self.inner.registry.set(platform, settings);
        Ok(self)
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
                        if let Err(e) = engine.ops().recover_expired_leases().await {
                            warn!(error = %e, "lease sweeper");
                        }
                    }
                    if jobs_due && let Err(e) = engine.ops().run_due_jobs(&worker).await {
                        warn!(error = %e, "job worker");
                        failed = true;
                    }
                    if Instant::now() >= next_housekeeping {
                        next_housekeeping = Instant::now() + every;
                        match engine.ops().housekeep().await {
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
    /// Draining begins the stop ([`Engine::begin_shutdown`]): a turn that ends releases its chat
    /// and hands the queue on. Turns still running when `grace` is over are stopped and their
    /// leases ended at once, so another process (or this one, restarted) takes their chats over
    /// without waiting for the leases to run out; their replies are marked interrupted then.
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
        self.channels()
            .thread_known(platform, thread)
            .await
            .map_err(engine_error)
    }

    fn models(&self) -> Vec<(String, Vec<String>)> {
        self.inner.turns.offers()
    }
}

fn engine_error(e: Error) -> EngineError {
    if e.is_transient() {
        EngineError::transient(e)
    } else {
        EngineError::new(e)
    }
}
