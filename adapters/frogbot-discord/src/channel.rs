//! Engine glue (feature `engine`): Discord's gateway (serenity `Client`) and, optionally, the HTTP
//! interactions endpoint, feeding FrogBot's engine; the agent's replies posted back.
//!
//! What it does:
//! - a mention in a guild channel opens a thread on the message and starts that thread's chat (one
//!   FrogBot chat per thread); messages in a thread the bot has a chat for continue it; a DM
//!   channel is its own thread. The bot's own messages are ignored.
//! - every component click is acknowledged first (deferred update, `type 6`) and then handed to the
//!   engine; an "Other…" click on a live question opens the modal instead (that is its response);
//!   a modal submission is acknowledged the same way. Discord's 3 s window is never at the mercy
//!   of the engine's speed.
//! - replies longer than 2,000 characters are split.
//!
//! What it must not do: keep conversation state in memory (the engine and its store decide what a
//! thread is; the only in-process state is the bot's own user id from READY), or name sqlx.

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use frogbot_model::BoxError;
use frogbot_core::agent::{
    ChannelMessageOutcome, ChannelOutbox, Engine, InteractionOutcome, channel_chat_id,
};
use frogbot_model::ChatInfo;
use frogbot_model::{ChannelIdentity, ChannelRef, QuestionCall, Thread, UiMessage};
use serenity::all::{
    ChannelId, ClientBuilder, ComponentInteraction, Context, CreateThread, EventHandler,
    GatewayIntents, Interaction as DiscordInteraction, Message, ModalInteraction, Ready, UserId,
};
use serenity::http::{Http, HttpBuilder};
use serenity::model::id::ApplicationId;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::endpoint::{EndpointRequest, EndpointVerifier, PONG};
use crate::questions::{Progress, is_other};
use crate::render::Control;
use crate::{DiscordQuestions, Error, convert};

/// The platform name of Discord chats.
pub const PLATFORM: &str = "discord";

/// How many interactions (from the gateway or the HTTP endpoint together) the engine handles at
/// once; the rest wait, already acknowledged.
const ENGINE_SLOTS: usize = 4;

/// The path of the HTTP interactions endpoint inside `frogbot serve`.
pub const INTERACTIONS_PATH: &str = "/channels/discord/interactions";

/// The intents used when none are configured: guild messages, DMs and message content.
pub const DEFAULT_INTENTS: &[&str] = &["GUILD_MESSAGES", "DIRECT_MESSAGES", "MESSAGE_CONTENT"];

/// Gateway intents from their names (`GUILD_MESSAGES`, `direct_messages`, …; case-insensitive).
pub fn intents_from_names<S: AsRef<str>>(names: &[S]) -> Result<GatewayIntents, Error> {
    let mut intents = GatewayIntents::empty();
    for name in names {
        let upper = name.as_ref().trim().to_ascii_uppercase();
        let flag = GatewayIntents::from_name(&upper).ok_or_else(|| {
            Error::Malformed(format!("unknown gateway intent {:?}", name.as_ref()))
        })?;
        intents |= flag;
    }
    Ok(intents)
}

/// What the receiver needs to know.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The bot token.
    pub token: String,
    /// The application id (followups and modal responses need it).
    pub application_id: u64,
    /// Gateway intent names ([`DEFAULT_INTENTS`] when empty).
    pub intents: Vec<String>,
    /// The application's public key (64 hex digits): serve the HTTP interactions endpoint.
    pub public_key: Option<String>,
    /// A base URL replacing `https://discord.com` (a fake or a proxy); the gateway URL comes from
    /// `GET /api/v10/gateway` there.
    pub api_url: Option<String>,
}

/// Discord receiving for one bot: cheap to clone.
#[derive(Clone)]
pub struct DiscordReceiver {
    http: Arc<Http>,
    questions: Arc<DiscordQuestions>,
    intents: GatewayIntents,
    verifier: Option<EndpointVerifier>,
    me: Arc<OnceLock<UserId>>,
    /// Bounds how many interactions are in the engine at once, so a burst of clicks does not
    /// starve the acknowledgements of the later ones (acks never wait for a slot).
    engine_slots: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for DiscordReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordReceiver")
            .field("intents", &self.intents)
            .field("endpoint", &self.verifier.is_some())
            .field("me", &self.me.get())
            .finish_non_exhaustive()
    }
}

impl DiscordReceiver {
    /// Checks the settings (intent names, public key) and builds the HTTP client.
    pub fn new(settings: &Settings) -> Result<Self, Error> {
        let intents = if settings.intents.is_empty() {
            intents_from_names(DEFAULT_INTENTS)?
        } else {
            intents_from_names(&settings.intents)?
        };
        let verifier = settings
            .public_key
            .as_deref()
            .map(EndpointVerifier::new)
            .transpose()?;
        let application_id = std::num::NonZeroU64::new(settings.application_id)
            .ok_or_else(|| Error::BadId(settings.application_id.to_string()))?;
        let mut builder =
            HttpBuilder::new(&settings.token).application_id(ApplicationId::from(application_id));
        if let Some(url) = &settings.api_url {
            // serenity's proxy setting requires the rate limiter off.
            builder = builder
                .proxy(url.trim_end_matches('/'))
                .ratelimiter_disabled(true);
        }
        let http = Arc::new(builder.build());
        Ok(DiscordReceiver {
            questions: Arc::new(DiscordQuestions::new(http.clone())),
            http,
            intents,
            verifier,
            me: Arc::default(),
            engine_slots: Arc::new(tokio::sync::Semaphore::new(ENGINE_SLOTS)),
        })
    }

    /// The question hooks.
    pub fn questions(&self) -> Arc<DiscordQuestions> {
        self.questions.clone()
    }

    /// Where the agent's replies go.
    pub fn outbox(&self) -> Arc<dyn ChannelOutbox> {
        Arc::new(DiscordOutbox {
            http: self.http.clone(),
        })
    }

    /// The bot's own user id (known once READY arrived).
    pub fn bot_user(&self) -> Option<UserId> {
        self.me.get().copied()
    }

    /// The bot's user id: from READY, or — for a message handled before the READY handler ran —
    /// from `GET /users/@me`.
    async fn me(&self) -> Option<UserId> {
        if let Some(me) = self.bot_user() {
            return Some(me);
        }
        match self.http.get_current_user().await {
            Ok(user) => Some(*self.me.get_or_init(|| user.id)),
            Err(e) => {
                warn!(error = %e, "discord: GET /users/@me failed");
                None
            }
        }
    }

    /// The gateway event handler (for a serenity `Client` you build yourself).
    pub fn handler(&self, engine: Engine) -> impl EventHandler + 'static {
        Handler {
            receiver: self.clone(),
            engine,
        }
    }

    /// Connects to the gateway and receives until `shutdown` is cancelled.
    pub async fn run(&self, engine: Engine, shutdown: CancellationToken) -> Result<(), Error> {
        let mut client = ClientBuilder::new_with_http(clone_http(&self.http), self.intents)
            .event_handler(Handler {
                receiver: self.clone(),
                engine,
            })
            .await?;
        let shards = client.shard_manager.clone();
        tokio::select! {
            result = client.start() => result.map_err(Error::from),
            () = shutdown.cancelled() => {
                shards.shutdown_all().await;
                Ok(())
            }
        }
    }

    /// `POST /channels/discord/interactions` when a public key is configured.
    pub fn interactions_router(&self, engine: Engine) -> Option<Router> {
        self.verifier.as_ref()?;
        Some(
            Router::new()
                .route(INTERACTIONS_PATH, post(endpoint))
                .with_state(Endpoint {
                    receiver: self.clone(),
                    engine,
                }),
        )
    }

    /// Handles a gateway message (what the `message` event does).
    pub async fn on_message(&self, engine: &Engine, message: &Message) {
        let Some(me) = self.me().await else {
            warn!(message_id = %message.id, "discord: the bot's own user id is unknown; message ignored");
            return;
        };
        if convert::is_own_message(message, me) {
            return;
        }
        let channel = message.channel_id.to_string();
        let known = match engine.channel_thread_known(PLATFORM, &channel).await {
            Ok(known) => known,
            Err(e) => {
                warn!(error = %e, "discord: store unavailable; message not handled");
                return;
            }
        };
        let dm = message.guild_id.is_none();
        let thread = if dm || known {
            channel
        } else if convert::mentions(message, me) {
            if !self.may_start(engine, message).await {
                info!(user = %message.author.id, "discord: mention from a user without access ignored");
                return;
            }
            match self.open_thread(message).await {
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
        let mut incoming = convert::thread_message(message);
        incoming.text = convert::strip_mention(&incoming.text, me);
        let span = info_span!("discord_message", thread = %thread, chat_id = %channel_chat_id(PLATFORM, &thread));
        match engine
            .channel_message(PLATFORM, &thread, incoming)
            .instrument(span)
            .await
        {
            Ok(ChannelMessageOutcome::Denied) => {
                info!(user = %message.author.id, thread, "discord: message from a user without access ignored");
            }
            Ok(outcome) => debug!(?outcome, thread, "discord: message handled"),
            Err(e) => warn!(error = %e, thread, "discord: message not handled"),
        }
    }

    /// Whether the author of a message may start a conversation (identity and access hooks of
    /// the engine's Discord channel), checked before a thread is opened for them.
    async fn may_start(&self, engine: &Engine, message: &Message) -> bool {
        let Some(channel) = engine.channel(PLATFORM) else {
            return false;
        };
        let identity = ChannelIdentity {
            platform: PLATFORM.into(),
            user: convert::platform_user(&message.author),
        };
        let user = match channel.identity.resolve(&identity).await {
            Ok(user) => user,
            Err(e) => {
                warn!(error = %e, "discord: identity hook failed: denied");
                return false;
            }
        };
        let channel_id = message.channel_id.to_string();
        let probe = ChatInfo {
            chat_id: channel_chat_id(PLATFORM, &channel_id),
            owner: None,
            channel: Some(ChannelRef {
                platform: PLATFORM.into(),
                thread: channel_id,
            }),
        };
        channel
            .access
            .allow(user.as_ref(), &probe)
            .await
            .unwrap_or_else(|e| {
                warn!(error = %e, "discord: access check failed: denied");
                false
            })
    }

    async fn open_thread(&self, message: &Message) -> Result<String, Error> {
        let name: String = {
            let me = self.bot_user().unwrap_or(UserId::new(1));
            let text = convert::strip_mention(&message.content, me);
            let text = if text.is_empty() {
                "FrogBot".into()
            } else {
                text
            };
            crate::render::truncate(&text, 100)
        };
        let thread = self
            .http
            .create_thread_from_message(
                message.channel_id,
                message.id,
                &CreateThread::new(name),
                Some("FrogBot conversation"),
            )
            .await?;
        Ok(thread.id.to_string())
    }

    /// Handles an interaction (what the `interaction_create` event does): acknowledge, then the
    /// engine.
    pub async fn on_interaction(&self, engine: &Engine, interaction: &DiscordInteraction) {
        match interaction {
            DiscordInteraction::Component(component) => {
                self.on_component(engine, component).await;
            }
            DiscordInteraction::Modal(modal) => self.on_modal(engine, modal).await,
            other => warn!(
                kind = ?other.kind(),
                "discord: interaction of a kind FrogBot does not handle ignored"
            ),
        }
    }

    async fn on_component(&self, engine: &Engine, component: &ComponentInteraction) {
        let custom_id = &component.data.custom_id;
        let span = info_span!("discord_component", custom_id = %custom_id, message_id = %component.message.id, chat_id = tracing::field::Empty, question_id = tracing::field::Empty);
        async {
            if is_other(custom_id)
                && let Some(call) = self.live_call(engine, component).await
            {
                match self.questions.open_other(component, &call).await {
                    Ok(()) => return,
                    Err(e) => warn!(error = %e, "discord: opening the \"Other…\" modal failed"),
                }
            }
            if let Err(e) = crate::acknowledge(&self.http, component.id, &component.token).await {
                warn!(error = %e, "discord: acknowledging a click failed");
            }
            let _slot = self.engine_slots.acquire().await;
            let converted = convert::action(component);
            let thread = component.channel_id.to_string();
            match engine
                .handle_interaction(PLATFORM, Some(&thread), &converted)
                .await
            {
                Ok(InteractionOutcome::Ignored) => {
                    warn!("discord: a click on no FrogBot question ignored");
                }
                Ok(outcome) => debug!(?outcome, "discord: click handled"),
                Err(e) => warn!(error = %e, "discord: click not handled"),
            }
        }
        .instrument(span)
        .await;
    }

    async fn on_modal(&self, engine: &Engine, modal: &ModalInteraction) {
        let span = info_span!("discord_modal", custom_id = %modal.data.custom_id, chat_id = tracing::field::Empty, question_id = tracing::field::Empty);
        async {
            if let Err(e) = crate::acknowledge(&self.http, modal.id, &modal.token).await {
                warn!(error = %e, "discord: acknowledging a modal submission failed");
            }
            if convert::modal_lost_components(modal) {
                // serenity 0.12's gateway types drop a Label's child (its typed text is gone);
                // FrogBot's own modals use action rows, which it reads. The interactions
                // endpoint reads both shapes.
                warn!("discord: a modal submission with components serenity cannot read (Labels) came through the gateway; their values are lost");
            }
            let _slot = self.engine_slots.acquire().await;
            let converted = convert::modal_submit(modal);
            let thread = modal.channel_id.to_string();
            match engine
                .handle_interaction(PLATFORM, Some(&thread), &converted)
                .await
            {
                Ok(InteractionOutcome::Ignored) => {
                    warn!("discord: a modal submission for no FrogBot question ignored");
                }
                Ok(outcome) => debug!(?outcome, "discord: modal submission handled"),
                Err(e) => warn!(error = %e, "discord: modal submission not handled"),
            }
        }
        .instrument(span)
        .await;
    }

    /// The question call a click belongs to, when the clicked control is the current one of a
    /// question still open (else the engine answers the click as stale).
    async fn live_call(
        &self,
        engine: &Engine,
        component: &ComponentInteraction,
    ) -> Option<QuestionCall> {
        let control = Control::decode(&component.data.custom_id)?;
        let target = engine
            .question_for_form(PLATFORM, &component.message.id.to_string())
            .await
            .ok()??;
        tracing::Span::current().record("chat_id", tracing::field::display(&target.chat_id));
        tracing::Span::current().record("question_id", target.call.tool_call_id.as_str());
        let step = Progress::of(&target.record).step;
        if target.record.revision == control.revision && step == control.question {
            return Some(target.call);
        }
        None
    }
}

/// Copies the configuration of an `Http` (serenity's `Client` takes one by value).
fn clone_http(http: &Http) -> Http {
    let mut builder = HttpBuilder::new(http.token());
    if let Some(app) = http.application_id() {
        builder = builder.application_id(app);
    }
    if let Some(proxy) = &http.proxy {
        builder = builder.proxy(proxy.clone()).ratelimiter_disabled(true);
    }
    builder.build()
}

struct Handler {
    receiver: DiscordReceiver,
    engine: Engine,
}

#[async_trait]
impl EventHandler for Handler {
    async fn ready(&self, _ctx: Context, ready: Ready) {
        let _ = self.receiver.me.set(ready.user.id);
        info!(user = %ready.user.id, "discord: gateway ready");
    }

    async fn message(&self, _ctx: Context, message: Message) {
        self.receiver.on_message(&self.engine, &message).await;
    }

    async fn interaction_create(&self, _ctx: Context, interaction: DiscordInteraction) {
        self.receiver
            .on_interaction(&self.engine, &interaction)
            .await;
    }
}

/// Posts the agent's replies, split at Discord's 2,000 characters.
struct DiscordOutbox {
    http: Arc<Http>,
}

#[async_trait]
impl ChannelOutbox for DiscordOutbox {
    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        let channel: ChannelId = crate::questions::channel_id(&thread.id)?;
        for piece in convert::split_message(&reply.text(), convert::MESSAGE_LIMIT) {
            channel
                .send_message(
                    &self.http,
                    serenity::builder::CreateMessage::new().content(piece),
                )
                .await?;
        }
        Ok(())
    }
}

#[derive(Clone)]
struct Endpoint {
    receiver: DiscordReceiver,
    engine: Engine,
}

async fn endpoint(State(state): State<Endpoint>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(verifier) = &state.receiver.verifier else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let request = match verifier.receive(
        &header("x-signature-ed25519"),
        &header("x-signature-timestamp"),
        &body,
    ) {
        Ok(request) => request,
        Err(Error::BadSignature) => {
            warn!("discord: interactions endpoint request with a bad signature refused");
            return (StatusCode::UNAUTHORIZED, "invalid request signature").into_response();
        }
        Err(Error::StaleTimestamp) => {
            warn!(
                "discord: interactions endpoint request with a timestamp outside the 5-minute window refused"
            );
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
            // The HTTP response is the interaction's response: the modal for a live "Other…"
            // click, else the deferred update; the engine runs after it, in the background.
            if let DiscordInteraction::Component(c) = &*interaction
                && is_other(&c.data.custom_id)
                && let Some(call) = state.receiver.live_call(&state.engine, c).await
            {
                match DiscordQuestions::other_modal_response(c, &call) {
                    Ok(modal) => return json_response(&modal),
                    Err(e) => warn!(error = %e, "discord: the \"Other…\" modal could not be built"),
                }
            }
            let (converted, thread) = match &*interaction {
                DiscordInteraction::Component(c) => (convert::action(c), c.channel_id.to_string()),
                DiscordInteraction::Modal(m) => (
                    convert::modal_submit_json(m, &raw),
                    m.channel_id.to_string(),
                ),
                other => {
                    warn!(kind = ?other.kind(), "discord: interactions endpoint: interaction of a kind FrogBot does not handle ignored");
                    return (StatusCode::BAD_REQUEST, "unsupported interaction").into_response();
                }
            };
            let engine = state.engine.clone();
            let slots = state.receiver.engine_slots.clone();
            tokio::spawn(async move {
                let _slot = slots.acquire_owned().await;
                match engine
                    .handle_interaction(PLATFORM, Some(&thread), &converted)
                    .await
                {
                    Ok(outcome) => debug!(?outcome, "discord: endpoint interaction handled"),
                    Err(e) => warn!(error = %e, "discord: endpoint interaction not handled"),
                }
            });
            json_response(&crate::deferred_update())
        }
    }
}

fn json_response(response: &serenity::builder::CreateInteractionResponse) -> Response {
    match serde_json::to_string(response) {
        Ok(body) => ([("content-type", "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
