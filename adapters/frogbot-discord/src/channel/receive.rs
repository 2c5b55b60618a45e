//! Receiving: the gateway (runs of shards, each a serenity `ShardManager` with the event
//! handler, `run_shards`), the HTTP interactions endpoint (`POST /channels/discord/interactions`),
//! and the per-thread ordering of what is handed to the engine.
//!
//! Acknowledgements (and the "Other…" / "Answer…" modals) are sent at once, outside any queue: Discord's 3 s
//! window never waits for the engine. What goes to the engine — a message, a click, a modal
//! submission — is queued on its thread (the Discord channel it arrived in): one ordered queue
//! per thread, handled by a task of its own that ends when the queue has been idle a while, so
//! deliveries of one thread reach the engine in arrival order and different threads run in
//! parallel.
//!
//! Agent conversations in a DM (`{dm}~{root}`, see [`super::outbox`]): a DM cannot have threads,
//! so a person's DM message that **replies to** a message of an agent conversation goes to that
//! conversation (the agent's inbox); every other DM message goes to the DM's own thread (`{dm}`,
//! the conversation with the model), as before. The replied-to message `X` belongs to the
//! conversation `{dm}~{X}` when the engine knows that thread (`X` is its root), to `{dm}~{R}` when
//! `X` itself replies to `R` and the engine knows that one (everything the outbox posts in a
//! conversation replies to its root; Discord's `referenced_message` carries its own
//! `message_reference`), or to the conversation of the question whose current message `X` is. A
//! click or modal submission on a bot message in a DM is routed by that message the same way.
//! Guild channels and threads are not affected.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use frogbot_channel::receive::{agent_thread, lets_in, logged};
use frogbot_channel::{
    AccessCheck, EngineHandle, InteractionOutcome, MessageOutcome, RetryPolicy, StopOutcome,
    ThreadExecutor, channel_chat_id,
};
use frogbot_model::text::truncate;
use frogbot_model::{IdentityResolver, Progress, QuestionCall};
use serenity::all::{
    ChannelId, ComponentInteraction, Context, CreateInteractionResponse,
    CreateInteractionResponseMessage, CreateThread, Event, EventHandler, GatewayIntents, GuildId,
    Interaction as DiscordInteraction, InteractionId, Message, MessageId, MessageUpdateEvent,
    ModalInteraction, RawEventHandler, Ready, UserId,
};
use serenity::futures::StreamExt as _;
use serenity::gateway::{ShardManager, ShardManagerOptions};
use serenity::http::Http;
use serenity::prelude::TypeMap;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, info_span, warn};

use super::outbox::STOP_CUSTOM_ID;
use crate::client::DiscordApi;
use crate::convert::{self, EndpointRequest, EndpointVerifier, PONG};
use crate::ids::{Control, agent_thread_id, opens_modal, thread_root};
use crate::questions::modal_response;
use crate::{DiscordQuestions, Error, PLATFORM};

/// The path of the HTTP interactions endpoint inside `frogbot serve`.
pub const INTERACTIONS_PATH: &str = "/channels/discord/interactions";

/// How long a thread's queue task waits for more work before it ends.
const QUEUE_IDLE: Duration = Duration::from_secs(30);

/// What the adapter's receiving shares between the gateway handler, the endpoint and the hooks.
pub(super) struct Shared {
    pub(super) http: Arc<Http>,
    pub(super) questions: Arc<DiscordQuestions>,
    /// What the gateway connections are opened with.
    gateway: Gateway,
    pub(super) verifier: Option<EndpointVerifier>,
    pub(super) me: UserId,
    pub(super) identity: Arc<dyn IdentityResolver>,
    pub(super) access: Arc<dyn AccessCheck>,
    queues: ThreadExecutor,
}

/// What every run of gateway shards is opened with: the intents, the gateway URL (asked of
/// Discord once, at `connect`) and the configured shard count.
pub(super) struct Gateway {
    intents: GatewayIntents,
    url: String,
    shards: Option<u32>,
}

impl Gateway {
    /// The gateway for `intents`, its URL asked of Discord (`GET /gateway`) over `http` (as
    /// serenity's `Client` does: Discord's default URL when the call fails).
    pub(super) async fn new(http: &Http, intents: GatewayIntents, shards: Option<u32>) -> Self {
        let url = match http.get_gateway().await {
            Ok(g) => g.url,
            Err(e) => {
                warn!(error = %e, "discord: asking for the gateway URL failed; using Discord's default");
                "wss://gateway.discord.gg".to_owned()
            }
        };
        Gateway {
            intents,
            url,
            shards,
        }
    }
}

impl Shared {
    #[allow(clippy::too_many_arguments)] // the parts `connect` checked and built
    pub(super) fn new(
        http: Arc<Http>,
        questions: Arc<DiscordQuestions>,
        gateway: Gateway,
        verifier: Option<EndpointVerifier>,
        me: UserId,
        identity: Arc<dyn IdentityResolver>,
        access: Arc<dyn AccessCheck>,
    ) -> Self {
        Shared {
            http,
            questions,
            gateway,
            verifier,
            me,
            identity,
            access,
            queues: ThreadExecutor::new(QUEUE_IDLE),
        }
    }
}

/// The bot's shard count: the configured one, else what Discord recommends
/// (`GET /gateway/bot`'s `shards`).
pub(super) async fn shard_count(shared: &Shared) -> Result<u32, Error> {
    if let Some(n) = shared.gateway.shards {
        return Ok(n.max(1));
    }
    Ok(shared.http.get_bot_gateway().await?.shards.max(1))
}

/// How long [`run_shards`] waits for its shards to close before it leaves that to a task of its
/// own (they receive nothing meanwhile).
const STOP_WAIT: Duration = Duration::from_secs(10);

/// Connects the gateway shards `shards` of `total` and receives until `shutdown` is cancelled
/// (or Discord refused the bot: a bad token, gateway intents not allowed — the one error it ends
/// with, besides a range past `total`), then shuts them down. Each call opens its own
/// connections (a serenity `ShardManager` over the adapter's one `Http`, so every call of the bot
/// still goes through one rate limiter), so the shards a process runs can change: stop one call,
/// start another. From the moment `shutdown` is cancelled, no event of these shards reaches the
/// engine, even while their connections close. An empty range waits for `shutdown`.
pub(super) async fn run_shards(
    shared: Arc<Shared>,
    engine: EngineHandle,
    shards: std::ops::Range<u32>,
    total: u32,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    if shards.end > total {
        return Err(Error::Malformed(format!(
            "shards {}..{} of {total}: past the last shard",
            shards.start, shards.end
        )));
    }
    if shards.is_empty() {
        shutdown.cancelled().await;
        return Ok(());
    }
    let open = Arc::new(AtomicBool::new(true));
    let handler: Arc<dyn EventHandler> = Arc::new(Handler {
        open: Some(open.clone()),
        ..Handler::new(shared.clone(), engine)
    });
    // serenity's `cache`, `framework` and `voice` features stay off (the workspace's serenity):
    // the options would have fields for them.
    let (manager, mut ended) = ShardManager::new(ShardManagerOptions {
        data: Arc::new(tokio::sync::RwLock::new(TypeMap::new())),
        event_handlers: vec![handler],
        raw_event_handlers: vec![Arc::new(Unhandled)],
        shard_index: shards.start,
        shard_init: shards.end - shards.start,
        shard_total: total,
        ws_url: Arc::new(tokio::sync::Mutex::new(shared.gateway.url.clone())),
        http: shared.http.clone(),
        intents: shared.gateway.intents,
        presence: None,
    });
    info!(
        first = shards.start,
        last = shards.end - 1,
        total,
        "discord: connecting gateway shards"
    );
    manager.initialize()?;
    let result = tokio::select! {
        r = ended.next() => match r {
            Some(Err(e)) => Err(Error::from(serenity::Error::Gateway(e))),
            _ => Ok(()),
        },
        () = shutdown.cancelled() => Ok(()),
    };
    open.store(false, Ordering::SeqCst);
    let stopping = tokio::spawn(stop_shards(manager));
    if tokio::time::timeout(STOP_WAIT, stopping).await.is_err() {
        warn!("discord: gateway shards still closing; they receive nothing meanwhile");
    }
    result
}

/// Shuts down every shard of `manager`. serenity's `shutdown_all` does nothing while no shard
/// has started (its queue boots them one after another, 5 s apart, and retries one that failed
/// to connect), so it waits for the first, however long that takes: a shard that connects later
/// is shut down then, never left running.
async fn stop_shards(manager: Arc<ShardManager>) {
    while manager.runners.lock().await.is_empty() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    manager.shutdown_all().await;
}

/// Every gateway dispatch, raw: the kinds FrogBot does not handle are logged (debug) with their
/// name, never dropped silently (serenity logs the ones it cannot read).
struct Unhandled;

/// The dispatches [`Handler`] handles.
const HANDLED: &[&str] = &[
    "READY",
    "MESSAGE_CREATE",
    "MESSAGE_UPDATE",
    "MESSAGE_DELETE",
    "INTERACTION_CREATE",
];

#[async_trait]
impl RawEventHandler for Unhandled {
    async fn raw_event(&self, _ctx: Context, event: Event) {
        let name = event.name().unwrap_or_else(|| "UNKNOWN".to_owned());
        if !HANDLED.contains(&name.as_str()) {
            debug!(kind = %name, "discord: gateway event FrogBot does not handle");
        }
    }
}

/// The gateway event handler.
pub(super) struct Handler {
    shared: Arc<Shared>,
    engine: EngineHandle,
    /// Whether its run of shards is on ([`run_shards`]; `None`: a handler of its own): an event
    /// that arrives after the run was told to stop is dropped (its shard is then another run's,
    /// or another process's).
    open: Option<Arc<AtomicBool>>,
}

impl Handler {
    pub(super) fn new(shared: Arc<Shared>, engine: EngineHandle) -> Self {
        Handler {
            shared,
            engine,
            open: None,
        }
    }

    /// Whether the event `what` is dropped: its run of shards was told to stop.
    fn stopped(&self, what: &str) -> bool {
        let stopped = self
            .open
            .as_ref()
            .is_some_and(|open| !open.load(Ordering::SeqCst));
        if stopped {
            debug!("discord: {what} on a shard being stopped; not handled here");
        }
        stopped
    }

    /// An edit (`text: Some`) or a deletion of `message` in `channel`, queued in the channel's
    /// order after the message itself.
    fn changed(&self, channel: ChannelId, message: MessageId, text: Option<String>) {
        let (thread, id) = (channel.to_string(), message.to_string());
        let engine = self.engine.clone();
        self.shared.queues.push(&thread.clone(), async move {
            let changed = engine.changed(PLATFORM, &thread, &id, text).await;
            logged(PLATFORM, "edit or deletion", changed);
        });
    }
}

#[async_trait]
impl EventHandler for Handler {
    async fn ready(&self, _ctx: Context, ready: Ready) {
        if !self.stopped("ready") {
            info!(user = %ready.user.id, "discord: gateway ready");
        }
    }

    async fn message(&self, _ctx: Context, message: Message) {
        if self.stopped("a message") || convert::is_own_message(&message, self.shared.me) {
            return;
        }
        let (shared, engine) = (self.shared.clone(), self.engine.clone());
        let thread = convert::thread_id(&message);
        let job = async move { on_message(&shared, &engine, &message).await };
        self.shared.queues.push(&thread, job);
    }

    /// A person's edit of their message: a message still queued runs with the new text (in its
    /// channel's order, after the message itself).
    async fn message_update(
        &self,
        _ctx: Context,
        _old: Option<Message>,
        _new: Option<Message>,
        event: MessageUpdateEvent,
    ) {
        let (Some(content), Some(author)) = (event.content.clone(), event.author.as_ref()) else {
            return;
        };
        if author.id == self.shared.me || author.bot || self.stopped("an edit") {
            return;
        }
        let text = convert::strip_mention(&content, self.shared.me);
        self.changed(event.channel_id, event.id, Some(text));
    }

    /// A message deleted: one still queued never runs.
    async fn message_delete(
        &self,
        _ctx: Context,
        channel: ChannelId,
        message: MessageId,
        _guild: Option<GuildId>,
    ) {
        if !self.stopped("a deletion") {
            self.changed(channel, message, None);
        }
    }

    async fn interaction_create(&self, _ctx: Context, interaction: DiscordInteraction) {
        if self.stopped("an interaction") {
            return;
        }
        match interaction {
            DiscordInteraction::Component(component) => {
                on_component(&self.shared, &self.engine, component).await;
            }
            DiscordInteraction::Modal(modal) => on_modal(&self.shared, &self.engine, modal).await,
            DiscordInteraction::Command(command) => {
                let response = command_response(&self.shared, &self.engine, &command).await;
                answer(
                    &self.shared,
                    command.id,
                    &command.token,
                    &response,
                    "a command",
                )
                .await;
            }
            other => warn!(
                kind = ?other.kind(),
                "discord: interaction of a kind FrogBot does not handle ignored"
            ),
        }
    }
}

/// Handles a gateway message (queued on its channel).
async fn on_message(shared: &Shared, engine: &EngineHandle, message: &Message) {
    let me = shared.me;
    let channel = message.channel_id.to_string();
    let known = match engine.thread_known(PLATFORM, &channel).await {
        Ok(known) => known,
        Err(e) => {
            error!(error = %e, "discord: store unavailable; message not handled");
            return;
        }
    };
    let thread = if message.guild_id.is_none() {
        dm_message_thread(engine, message).await
    } else if known {
        channel
    } else if convert::mentions(message, me) {
        if !may_start(shared, message).await {
            info!(user = %message.author.id, "discord: mention from a user without access ignored");
            return;
        }
        match open_thread_with(shared.http.as_ref(), me, message).await {
            Ok(thread) => thread,
            Err(e) => {
                // E.g. a mention inside a thread the bot did not open: answer right there.
                warn!(error = %e, "discord: could not open a thread; answering in the channel");
                channel
            }
        }
    } else {
        return;
    };
    let incoming = convert::thread_message_for(message, me);
    let span = info_span!("discord_message", thread = %thread, chat_id = %channel_chat_id(PLATFORM, &thread));
    let taken = engine.message(PLATFORM, &thread, incoming).instrument(span);
    if logged(PLATFORM, "message", taken.await) == Some(MessageOutcome::Denied) {
        info!(user = %message.author.id, thread, "discord: message from a user without access ignored");
    }
}

/// The thread of the bot's message `message` in DM channel `channel` (or of a message replying
/// to it): the agent conversation (`{dm}~{root}`) whose root is `message` or `root` (the message
/// it replies to) when the engine knows that thread, else the one of the question whose current
/// message is `message`, else the DM channel (a failing look-up is logged and finds nothing).
async fn dm_thread(
    engine: &EngineHandle,
    channel: ChannelId,
    message: MessageId,
    root: Option<MessageId>,
) -> String {
    let roots = std::iter::once(message).chain(root);
    let roots = roots.map(|root| agent_thread_id(channel, root));
    let here = |thread: &str| {
        crate::ids::channel_id(thread).is_ok_and(|c| c == channel) && thread_root(thread).is_some()
    };
    let found = agent_thread(engine, PLATFORM, roots, &message.to_string(), here).await;
    found.unwrap_or_else(|| channel.to_string())
}

/// The thread of a person's DM message: the agent conversation of the message it replies to
/// ([`dm_thread`]), else the DM channel.
async fn dm_message_thread(engine: &EngineHandle, message: &Message) -> String {
    let Some(replied) = convert::replied_to(message) else {
        return message.channel_id.to_string();
    };
    let root = message
        .referenced_message
        .as_ref()
        .and_then(|m| m.message_reference.as_ref()?.message_id);
    dm_thread(engine, message.channel_id, replied, root).await
}

/// The thread of a click or modal submission in `channel` on the bot's message `on`: in a DM,
/// the agent conversation that message belongs to ([`dm_thread`]), else the channel.
async fn interaction_thread(
    engine: &EngineHandle,
    channel: ChannelId,
    guild: Option<GuildId>,
    on: Option<&Message>,
) -> String {
    match on.filter(|_| guild.is_none()) {
        Some(m) => {
            let root = m.message_reference.as_ref().and_then(|r| r.message_id);
            dm_thread(engine, channel, m.id, root).await
        }
        None => channel.to_string(),
    }
}

/// Whether the author of a message may start a conversation (the adapter's identity and access
/// hooks), checked before a thread is opened for them.
async fn may_start(shared: &Shared, message: &Message) -> bool {
    let user = convert::platform_user(&message.author);
    let (identity, access) = (&*shared.identity, &*shared.access);
    let thread = message.channel_id.to_string();
    lets_in(identity, access, PLATFORM, &user, &thread)
        .await
        .unwrap_or_else(|e| {
            warn!(error = %e, "discord: access check failed: denied");
            false
        })
}

/// How many times opening a thread is tried when it fails in a way worth retrying.
pub const THREAD_ATTEMPTS: u32 = 4;

/// Discord's code for "A thread has already been created for this message".
const THREAD_EXISTS: isize = 160_004;

/// Opens the thread of a mention (named after its text) over any [`DiscordApi`]: the thread's
/// channel id. Failures worth retrying are retried ([`THREAD_ATTEMPTS`] in all, 250 ms, 500 ms,
/// 1 s apart) so the answer does not land in the parent channel under a passing fault. A thread
/// started from a message has that message's id: when an earlier attempt opened it and only its
/// answer was lost, Discord refuses the repeat (`160004`) and that id is the thread.
pub async fn open_thread_with<A: DiscordApi + ?Sized>(
    api: &A,
    me: UserId,
    message: &Message,
) -> Result<String, Error> {
    let text = convert::strip_mention(&message.content, me);
    let name = if text.is_empty() {
        "FrogBot".into()
    } else {
        truncate(&text, 100)
    };
    let thread = CreateThread::new(name);
    let policy = RetryPolicy {
        attempts: THREAD_ATTEMPTS,
        ..RetryPolicy::default()
    };
    let mut retried = false;
    let opened = policy.run(
        true,
        || api.create_thread(message.channel_id, message.id, &thread),
        Error::transient,
        |e, wait| {
            warn!(error = %e, ?wait, "discord: opening a thread failed; retrying");
            retried = true;
        },
    );
    match opened.await {
        Ok(thread) => Ok(thread.to_string()),
        Err(e) if retried && e.discord_code() == Some(THREAD_EXISTS) => {
            info!(message = %message.id, "discord: the thread was opened by an earlier attempt");
            Ok(message.id.to_string())
        }
        Err(e) => Err(e),
    }
}

/// Hands an interaction to the engine on its thread's queue.
fn enqueue(
    shared: &Shared,
    engine: &EngineHandle,
    thread: String,
    converted: frogbot_model::Interaction,
    what: &'static str,
    span: tracing::Span,
) {
    let engine = engine.clone();
    shared.queues.push(
        &thread.clone(),
        async move {
            let taken = engine.interaction(PLATFORM, Some(&thread), converted).await;
            if logged(PLATFORM, what, taken) == Some(InteractionOutcome::Ignored) {
                warn!("discord: a {what} on no FrogBot question ignored");
            }
        }
        .instrument(span),
    );
}

/// What a click on a streamed reply's Stop button is answered with: the turn stops when the
/// clicker drives it; anyone else gets [`STOP_REFUSED_TEXT`] ephemerally. Never a question's
/// answer.
async fn stop_response(
    engine: &EngineHandle,
    component: &ComponentInteraction,
) -> CreateInteractionResponse {
    let who = convert::platform_user(&component.user);
    let thread = component_thread(engine, component).await;
    let outcome = logged(
        PLATFORM,
        "Stop click",
        engine.stop(PLATFORM, &thread, &who).await,
    );
    info!(?outcome, user = %who.id, thread, "discord: Stop click");
    notice_response(outcome.and_then(StopOutcome::notice))
}

/// `notice` privately, else a deferred update (nothing shown, nothing edited).
fn notice_response(notice: Option<&str>) -> CreateInteractionResponse {
    notice.map_or_else(crate::deferred_update, private)
}

pub use frogbot_model::NOT_ALLOWED_TEXT;

/// What a click on an agent message's event button is answered with: the event goes to the
/// agent's inbox ([`EngineHandle::event`]) and the click is acknowledged with a deferred update
/// (nothing shown, nothing edited); someone who may not use the bot gets
/// [`NOT_ALLOWED_TEXT`] ephemerally.
async fn event_response(
    engine: &EngineHandle,
    component: &ComponentInteraction,
    click: frogbot_model::EventClick,
) -> CreateInteractionResponse {
    let thread = component_thread(engine, component).await;
    let who = click.user.id.clone();
    let outcome = logged(
        PLATFORM,
        "event click",
        engine.event(PLATFORM, &thread, click).await,
    );
    info!(?outcome, user = %who, thread, "discord: event click");
    notice_response(outcome.and_then(frogbot_channel::EventOutcome::notice))
}

/// The thread of a click ([`interaction_thread`]).
async fn component_thread(engine: &EngineHandle, component: &ComponentInteraction) -> String {
    interaction_thread(
        engine,
        component.channel_id,
        component.guild_id,
        Some(&component.message),
    )
    .await
}

/// Answers an interaction with `response`; a failure is logged (`what`: "a command", …), since
/// nothing else can be done with it: the interaction's token is Discord's to expire.
async fn answer(
    shared: &Shared,
    id: InteractionId,
    token: &str,
    response: &CreateInteractionResponse,
    what: &str,
) {
    if let Err(e) =
        DiscordApi::create_interaction_response(shared.http.as_ref(), id, token, response).await
    {
        warn!(error = %e, "discord: answering {what} failed");
    }
}

async fn on_component(shared: &Shared, engine: &EngineHandle, component: ComponentInteraction) {
    let custom_id = component.data.custom_id.clone();
    let span = info_span!("discord_component", custom_id = %custom_id, message_id = %component.message.id, chat_id = tracing::field::Empty, question_id = tracing::field::Empty);
    async {
        if !convert::is_someone(&component.user) {
            // serenity reads a click without a user as user 1: never credit anyone with it.
            warn!("discord: a click naming no user ignored");
            return;
        }
        if let Some((response, what)) = click_response(engine, &component).await {
            answer(shared, component.id, &component.token, &response, what).await;
            return;
        }
        if let Err(e) =
            crate::acknowledge(shared.http.as_ref(), component.id, &component.token).await
        {
            warn!(error = %e, "discord: acknowledging a click failed");
        }
        let converted = convert::action(&component);
        let thread = component_thread(engine, &component).await;
        enqueue(
            shared,
            engine,
            thread,
            converted,
            "click",
            tracing::Span::current(),
        );
    }
    .instrument(span.clone())
    .await;
}

async fn on_modal(shared: &Shared, engine: &EngineHandle, modal: ModalInteraction) {
    let span = info_span!("discord_modal", custom_id = %modal.data.custom_id, chat_id = tracing::field::Empty, question_id = tracing::field::Empty);
    async {
        if let Err(e) = crate::acknowledge(shared.http.as_ref(), modal.id, &modal.token).await {
            warn!(error = %e, "discord: acknowledging a modal submission failed");
        }
        if convert::modal_lost_components(&modal) {
            // serenity 0.12's gateway types drop a Label's child (its typed text is gone);
            // FrogBot's own modals use action rows, which it reads. The interactions
            // endpoint reads both shapes.
            warn!("discord: a modal submission with components serenity cannot read (Labels) came through the gateway; their values are lost");
        }
        if !convert::is_someone(&modal.user) {
            warn!("discord: a modal submission naming no user ignored");
            return;
        }
        let converted = convert::modal_submit(&modal);
        let thread =
            interaction_thread(engine, modal.channel_id, modal.guild_id, modal.message.as_deref())
                .await;
        enqueue(shared, engine, thread, converted, "modal submission", tracing::Span::current());
    }
    .instrument(span)
    .await;
}

/// What a click is answered with at once when it is no answer for the engine's queue: a Stop
/// click's response ([`stop_response`]), an event click's ([`event_response`]), the modal of a
/// live "Other…" or "Answer…" click; with what it is, for the log. `None`: the click goes to the
/// engine (acknowledged with a deferred update). The same through the gateway and the
/// interactions endpoint.
async fn click_response(
    engine: &EngineHandle,
    component: &ComponentInteraction,
) -> Option<(CreateInteractionResponse, &'static str)> {
    if component.data.custom_id == STOP_CUSTOM_ID {
        return Some((stop_response(engine, component).await, "a Stop click"));
    }
    if let Some(click) = convert::event_click(component) {
        // An agent message's event button: an event for the agent, never an answer.
        let response = event_response(engine, component, click).await;
        return Some((response, "an event click"));
    }
    if opens_modal(&component.data.custom_id)
        && let Some(call) = live_call(engine, component).await
    {
        match modal_response(component, &call) {
            Ok(modal) => return Some((modal, "a click with a question's modal")),
            Err(e) => warn!(error = %e, "discord: a question's modal could not be built"),
        }
    }
    None
}

/// The question call a click belongs to, when the clicked control is the current one of a
/// question still open (else the engine answers the click as stale).
async fn live_call(
    engine: &EngineHandle,
    component: &ComponentInteraction,
) -> Option<QuestionCall> {
    let control = Control::decode(&component.data.custom_id)?;
    let target = engine
        .form_open(PLATFORM, &component.message.id.to_string())
        .await
        .ok()??;
    tracing::Span::current().record("chat_id", tracing::field::display(&target.chat_id));
    tracing::Span::current().record("question_id", target.call.tool_call_id.as_str());
    let step = Progress::of(&target.call.input, &target.record).step();
    if target.record.revision == control.revision && step == Some(control.question) {
        return Some(target.call);
    }
    None
}

#[derive(Clone)]
struct Endpoint {
    shared: Arc<Shared>,
    engine: EngineHandle,
}

/// `POST /channels/discord/interactions` when a public key is configured.
pub(super) fn router(shared: Arc<Shared>, engine: EngineHandle) -> Option<Router> {
    shared.verifier.as_ref()?;
    Some(
        Router::new()
            .route(INTERACTIONS_PATH, post(endpoint))
            .with_state(Endpoint { shared, engine }),
    )
}

async fn endpoint(State(state): State<Endpoint>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(verifier) = &state.shared.verifier else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    };
    let signature = header("x-signature-ed25519");
    let request = match verifier.receive(signature, header("x-signature-timestamp"), &body) {
        Ok(request) => request,
        Err(e @ (Error::BadSignature | Error::StaleTimestamp)) => {
            // A bad signature, or a timestamp outside the 5-minute window.
            warn!(error = %e, "discord: interactions endpoint request refused");
            return (StatusCode::UNAUTHORIZED, "invalid request signature").into_response();
        }
        Err(e) => {
            warn!(error = %e, "discord: malformed interactions endpoint request ignored");
            return (StatusCode::BAD_REQUEST, e.to_string()).into_response();
        }
    };
    match request {
        EndpointRequest::Ping => ([("content-type", "application/json")], PONG).into_response(),
        EndpointRequest::Interaction { interaction, raw } => {
            // The HTTP response is the interaction's response: the modal for a live "Other…" or "Answer…"
            // click, else the deferred update; the engine runs after it, on the thread's queue.
            if let DiscordInteraction::Component(c) = &*interaction
                && let Some((response, _)) = click_response(&state.engine, c).await
            {
                return json_response(&response);
            }
            let (converted, thread, what) = match &*interaction {
                DiscordInteraction::Component(c) => (
                    convert::action(c),
                    component_thread(&state.engine, c).await,
                    "click",
                ),
                DiscordInteraction::Modal(m) => (
                    convert::modal_submit_json(m, &raw),
                    interaction_thread(
                        &state.engine,
                        m.channel_id,
                        m.guild_id,
                        m.message.as_deref(),
                    )
                    .await,
                    "modal submission",
                ),
                DiscordInteraction::Command(command) => {
                    return json_response(
                        &command_response(&state.shared, &state.engine, command).await,
                    );
                }
                other => {
                    warn!(kind = ?other.kind(), "discord: interactions endpoint: interaction of a kind FrogBot does not handle ignored");
                    return (StatusCode::BAD_REQUEST, "unsupported interaction").into_response();
                }
            };
            let span = info_span!("discord_endpoint", thread = %thread);
            enqueue(&state.shared, &state.engine, thread, converted, what, span);
            json_response(&crate::deferred_update())
        }
    }
}

/// Said, privately, to a command used where the bot holds no conversation (a guild channel
/// that is not one of its threads).
pub const COMMAND_WHERE_TEXT: &str =
    "Use this command in a thread the bot is in, or in a DM with it.";

/// Said, privately, to an application command FrogBot does not know (registered by an earlier
/// version, or by hand).
pub const UNKNOWN_COMMAND_TEXT: &str = "This command is not offered any more.";

/// The application commands FrogBot registers (Discord's slash commands): one per
/// [`Command`](frogbot_channel::Command), `model` with the options `model` and `reasoning`,
/// offered as choices (`models`, from [`EngineHandle::models`]) when there are at most 25 of
/// each (Discord's limit), else typed; `ask` with two required options, `person` (a user, picked
/// from Discord's member list) and `question` (the text, `|` before each choice).
pub fn application_commands(models: &[(String, Vec<String>)]) -> Vec<serenity::all::CreateCommand> {
    use serenity::all::{CommandOptionType, CreateCommand, CreateCommandOption};
    const CHOICES: usize = 25;
    let mut reasoning: Vec<&String> = models.iter().flat_map(|(_, r)| r).collect();
    reasoning.sort();
    reasoning.dedup();
    // A string option, its `values` offered as choices when there are few enough.
    let option = |name: &str, about: &str, values: &[&String]| {
        let option = CreateCommandOption::new(CommandOptionType::String, name, about);
        let choices = values.iter().filter(|_| values.len() <= CHOICES);
        choices.fold(option, |o, v| {
            o.add_string_choice(truncate(v, 100), truncate(v, 100))
        })
    };
    let ids: Vec<&String> = models.iter().map(|(id, _)| id).collect();
    frogbot_channel::Command::ALL
        .iter()
        .map(|(command, word, about)| {
            let mut c = CreateCommand::new(*word).description(truncate(about, 100));
            if *command == frogbot_channel::Command::Model {
                let model = option("model", "The model (leave out to list them)", &ids);
                let reasoning = option("reasoning", "The reasoning option", &reasoning);
                c = c.add_option(model).add_option(reasoning);
            }
            if *command == frogbot_channel::Command::Ask {
                let person =
                    CreateCommandOption::new(CommandOptionType::User, "person", "Who to ask")
                        .required(true);
                let question = CreateCommandOption::new(
                    CommandOptionType::String,
                    "question",
                    "The question (for choices: Ship today? | yes | no)",
                )
                .required(true);
                c = c.add_option(person).add_option(question);
            }
            c
        })
        .collect()
}

/// Registers [`application_commands`] as the bot's global commands (`PUT
/// /applications/{id}/commands`), or in each of `guilds` only (`PUT
/// /applications/{id}/guilds/{guild}/commands`), replacing the earlier set. A failure is logged:
/// the commands still work when typed.
pub(super) async fn register_commands(
    http: &Http,
    models: &[(String, Vec<String>)],
    guilds: &[u64],
) {
    let commands = application_commands(models);
    let global = guilds.is_empty().then_some(None);
    for guild in guilds.iter().copied().map(Some).chain(global) {
        let set = match guild {
            None => http.create_global_commands(&commands).await,
            Some(g) => http.create_guild_commands(GuildId::new(g), &commands).await,
        };
        match set {
            Ok(set) => info!(
                commands = set.len(),
                guild, "discord: application commands registered"
            ),
            Err(e) => {
                warn!(error = %e, guild, "discord: registering the application commands failed; typed commands still work")
            }
        }
    }
}

/// The text command an application command stands for (`/model alt high`, `/ask <@ID> Ship
/// today? | yes | no`): the engine reads it as it reads a typed one.
pub fn command_text(data: &serenity::all::CommandData) -> String {
    command_message(data, None).0
}

/// [`command_text`] and the people it names: the `person` option (a user id, its user object in
/// `data.resolved.users`) is written `<@ID>` where it stands in the text, as a typed mention is,
/// and named there ([`frogbot_model::Mention`]) — never `bot`, and nobody whose user object
/// Discord did not send. Options are written in the order `person`, `model`, `reasoning`,
/// `question`, whatever order they came in.
pub fn command_message(
    data: &serenity::all::CommandData,
    bot: Option<UserId>,
) -> (String, Vec<frogbot_model::Mention>) {
    let mut text = format!("/{}", data.name);
    let mut mentions = Vec::new();
    let options = ["person", "model", "reasoning", "question"]
        .into_iter()
        .filter_map(|name| data.options.iter().find(|o| o.name == name));
    for option in options {
        if let Some(id) = option.value.as_user_id() {
            let start = text.len() + 1;
            text.push_str(&format!(" <@{id}>"));
            if let Some(user) = data.resolved.users.get(&id).filter(|_| Some(id) != bot) {
                mentions.push(frogbot_model::Mention {
                    user: convert::platform_user(user),
                    start,
                    end: text.len(),
                });
            }
        } else if let Some(value) = option.value.as_str() {
            text.push(' ');
            text.push_str(value.trim());
        }
    }
    (text, mentions)
}

/// What an application command is answered with (within Discord's 3 s): privately, the command
/// as the engine reads it; the engine's answer (its reply or notice) follows in the thread, as
/// for a typed command, in the thread's order. Used in a DM, the command goes to the DM's own
/// conversation; in a guild, only in a thread the bot holds ([`COMMAND_WHERE_TEXT`] elsewhere).
/// Someone the bot does not let in is told so privately afterwards.
async fn command_response(
    shared: &Arc<Shared>,
    engine: &EngineHandle,
    command: &serenity::all::CommandInteraction,
) -> CreateInteractionResponse {
    if !convert::is_someone(&command.user) {
        warn!("discord: a command naming no user ignored");
        return private(NOT_ALLOWED_TEXT);
    }
    if frogbot_channel::Command::ALL
        .iter()
        .all(|(_, word, _)| *word != command.data.name)
    {
        // Registered by an earlier version, or by hand: never a message to the model.
        warn!(name = %command.data.name, "discord: an application command FrogBot does not know ignored");
        return private(UNKNOWN_COMMAND_TEXT);
    }
    let channel = command.channel_id.to_string();
    if command.guild_id.is_some()
        && !engine
            .thread_known(PLATFORM, &channel)
            .await
            .unwrap_or(false)
    {
        return private(COMMAND_WHERE_TEXT);
    }
    let (text, mentions) = command_message(&command.data, Some(shared.me));
    let message = frogbot_model::ThreadMessage {
        // No platform message: nothing to acknowledge, a fresh id.
        id: String::new(),
        text: text.clone(),
        author: convert::platform_user(&command.user),
        metadata: frogbot_model::ThreadMessageMetadata {
            date_sent: command.id.created_at().to_string(),
        },
        reply_to: None,
        raw: serde_json::Value::Null,
        files: Vec::new(),
        mentions,
    };
    let (engine, http, token) = (engine.clone(), shared.http.clone(), command.token.clone());
    let span = info_span!("discord_command", thread = %channel, command = %command.data.name);
    shared.queues.push(
        &channel.clone(),
        async move {
            let taken = engine.message(PLATFORM, &channel, message).await;
            if logged(PLATFORM, "command", taken) == Some(MessageOutcome::Denied) {
                info!("discord: a command from a user without access refused");
                let note = serenity::all::CreateInteractionResponseFollowup::new()
                    .ephemeral(true)
                    .content(NOT_ALLOWED_TEXT);
                if let Err(e) = DiscordApi::create_followup(http.as_ref(), &token, &note).await {
                    warn!(error = %e, "discord: telling a refused command failed");
                }
            }
        }
        .instrument(span),
    );
    private(&text)
}

/// A response only the interaction's user sees, saying `text` (it pings nobody).
fn private(text: &str) -> CreateInteractionResponse {
    CreateInteractionResponse::Message(
        CreateInteractionResponseMessage::new()
            .ephemeral(true)
            .content(text)
            .allowed_mentions(crate::format::no_mentions()),
    )
}

fn json_response(response: &serenity::builder::CreateInteractionResponse) -> Response {
    match serde_json::to_string(response) {
        Ok(body) => ([("content-type", "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
