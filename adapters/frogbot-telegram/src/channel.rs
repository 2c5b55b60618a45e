//! Engine glue (feature `engine`): receives Bot API updates — by long polling (default) or by a
//! webhook route `frogbot serve` mounts at [`WEBHOOK_PATH`] — and hands them to FrogBot's engine;
//! posts the agent's replies back.
//!
//! Receiving uses teloxide's own update listeners (`Polling`, after `deleteWebhook`; or the axum
//! webhook listener) and teloxide's `Dispatcher` with its default distribution by chat id: one
//! worker per Telegram chat, so each update is handled once and the updates of a chat in order,
//! while different chats run in parallel. In webhook mode a guard in front of teloxide's route
//! checks `X-Telegram-Bot-Api-Secret-Token` in constant time (a missing or wrong one is `401`, and
//! the request goes no further) and drops bodies that are no update (`200`, so Telegram does not
//! resend them). Updates that cannot be read are dropped with a `warn!` line that shows at most
//! [`LOGGED_PREFIX`] bytes of them; polling's offset still moves past them.
//!
//! Conversations: in a private chat every message talks to the bot; in a group only a mention, a
//! command, or a reply to the bot does. A Telegram chat (a forum topic in forum supergroups) is one
//! FrogBot chat. Callback queries go to `Engine::handle_interaction` and are always answered.
//!
//! What it must not do: keep conversation state of its own. The only in-process state is which
//! message of a thread the bot should reply to (a hint: without it a reply is posted plainly in
//! the thread). No sqlx here: the engine feature of `frogbot-core` carries none.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::{Ready, ready};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::extract::State;
use frogbot_model::BoxError;
use frogbot_core::agent::{
    AccessCheck, Channel, ChannelMessageOutcome, ChannelOutbox, Engine, InteractionOutcome,
};
use frogbot_model::{IdentityResolver, Interaction, Thread, UiMessage};
use futures::StreamExt;
use futures::future::BoxFuture;
use teloxide::Bot;
use teloxide::dispatching::Dispatcher;
use teloxide::dptree;
use teloxide::error_handlers::ErrorHandler;
use teloxide::payloads::SetWebhookSetters;
use teloxide::requests::{Request, Requester};
use teloxide::stop::StopToken;
use teloxide::types::{
    AllowedUpdate, CallbackQuery, MaybeInaccessibleMessage, Me, Message, MessageId, Update,
    UpdateKind,
};
use teloxide::update_listeners::{AsUpdateStream, Polling, UpdateListener, webhooks};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::client::TelegramApi;
use crate::convert::{
    MAX_TEXT, action, is_own_message, split_text, split_thread_id, talks_to_bot, thread_id,
    thread_message,
};
use crate::questions::STALE_TEXT;
use crate::{Error, PLATFORM, TelegramQuestions};

/// Where `frogbot serve` mounts the webhook route.
pub const WEBHOOK_PATH: &str = "/channels/telegram/webhook";
/// What a user the access check refuses is told in a private chat.
pub const NOT_ALLOWED_TEXT: &str = "Sorry, you are not allowed to talk to this bot.";
/// What the user is told when the engine could not take a message.
pub const FAILED_TEXT: &str = "Sorry, something went wrong; please send that again.";
/// The header carrying the webhook's secret token.
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";
/// How many bytes of an unreadable update (or of the error describing it) a log line shows.
pub const LOGGED_PREFIX: usize = 256;
/// The largest webhook body read (axum's default body limit).
const MAX_UPDATE_BYTES: usize = 2 * 1024 * 1024;

/// How updates arrive.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Receive {
    /// Long polling (`getUpdates`), after `deleteWebhook`.
    Polling {
        /// How long one `getUpdates` call waits for updates.
        timeout: Duration,
    },
    /// Telegram posts updates to [`WEBHOOK_PATH`] with the secret token header.
    Webhook {
        /// The `X-Telegram-Bot-Api-Secret-Token` every request must carry.
        secret: String,
        /// The public URL to register with `setWebhook` at start; `None`: registered elsewhere.
        url: Option<url::Url>,
    },
}

impl Receive {
    /// Long polling with a 10-second `getUpdates` timeout.
    pub fn polling() -> Self {
        Receive::Polling {
            timeout: Duration::from_secs(10),
        }
    }
}

/// What a [`TelegramChannel`] needs.
#[derive(Clone)]
pub struct TelegramChannelConfig {
    /// The bot token from @BotFather.
    pub token: String,
    /// The Bot API base URL (`None`: `https://api.telegram.org/`); for fakes and local servers.
    pub api_url: Option<url::Url>,
    /// How updates arrive.
    pub receive: Receive,
    /// Telegram user → FrogBot user.
    pub identity: Arc<dyn IdentityResolver>,
    /// Who may talk to the agent and answer its questions.
    pub access: Arc<dyn AccessCheck>,
}

impl Debug for TelegramChannelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramChannelConfig")
            .field("api_url", &self.api_url.as_ref().map(|u| u.as_str()))
            .field("receive", &self.receive_kind())
            .finish_non_exhaustive()
    }
}

impl TelegramChannelConfig {
    fn receive_kind(&self) -> &'static str {
        match self.receive {
            Receive::Polling { .. } => "polling",
            Receive::Webhook { .. } => "webhook",
        }
    }
}

/// Whether `secret` is a valid webhook secret token: 1–256 characters of `A-Z a-z 0-9 _ -`.
pub fn valid_secret(secret: &str) -> bool {
    (1..=256).contains(&secret.len())
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Reads a URL (the Bot API base, or the public webhook URL); a Bot API base gets the trailing
/// `/` teloxide needs to append `bot<token>/<method>`.
pub fn parse_url(text: &str, api_base: bool) -> Result<url::Url, Error> {
    let mut text = text.trim().to_owned();
    if api_base && !text.ends_with('/') {
        text.push('/');
    }
    let url = url::Url::parse(&text).map_err(|e| Error::Config(format!("{text:?}: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Error::Config(format!("{text:?}: not an http(s) URL")));
    }
    Ok(url)
}

/// Whether `token` looks like a bot token from @BotFather (`123456:ABC-DEF…`).
pub fn valid_token(token: &str) -> bool {
    token.split_once(':').is_some_and(|(id, rest)| {
        !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) && !rest.is_empty()
    })
}

/// The Telegram channel of a FrogBot engine.
pub struct TelegramChannel {
    bot: Bot,
    me: Me,
    receive: Receive,
    questions: Arc<TelegramQuestions<Bot>>,
    outbox: Arc<TelegramOutbox>,
    identity: Arc<dyn IdentityResolver>,
    access: Arc<dyn AccessCheck>,
    /// The webhook receiver, spawned by [`Self::routes`] and handed out by [`Self::start`].
    webhook_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    webhook_stop: CancellationToken,
}

impl Debug for TelegramChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramChannel")
            .field("bot", &self.me.username())
            .finish_non_exhaustive()
    }
}

impl TelegramChannel {
    /// Builds the channel and learns the bot's own id and username (`getMe`).
    pub async fn connect(config: TelegramChannelConfig) -> Result<Self, Error> {
        if let Receive::Webhook { secret, .. } = &config.receive
            && !valid_secret(secret)
        {
            return Err(Error::Config(
                "the webhook secret must be 1-256 characters of A-Z, a-z, 0-9, _ and -".into(),
            ));
        }
        let mut bot = Bot::new(config.token);
        if let Some(url) = config.api_url {
            bot = bot.set_api_url(url);
        }
        let me = bot.get_me().send().await.map_err(|e| Error::Api {
            method: "getMe",
            message: e.to_string(),
        })?;
        if me.user.username.is_none() {
            return Err(Error::Payload(
                "getMe returned a bot without a username".into(),
            ));
        }
        Ok(Self {
            questions: Arc::new(TelegramQuestions::new(bot.clone())),
            outbox: Arc::new(TelegramOutbox {
                api: bot.clone(),
                reply_to: Mutex::default(),
            }),
            bot,
            me,
            receive: config.receive,
            identity: config.identity,
            access: config.access,
            webhook_task: Mutex::default(),
            webhook_stop: CancellationToken::new(),
        })
    }

    /// The bot, as `getMe` described it.
    pub fn me(&self) -> &Me {
        &self.me
    }

    /// What the engine needs (`Engine::with_channel`).
    pub fn channel(&self) -> Channel {
        Channel {
            platform: PLATFORM.into(),
            questions: Some(self.questions.clone()),
            identity: self.identity.clone(),
            access: self.access.clone(),
            outbox: Some(self.outbox.clone()),
        }
    }

    fn context(&self, engine: Engine) -> Arc<Context> {
        Arc::new(Context {
            engine,
            bot: self.bot.clone(),
            me: self.me.clone(),
            outbox: self.outbox.clone(),
        })
    }

    /// In webhook mode, the route `POST` [`WEBHOOK_PATH`] (teloxide's axum webhook listener); its
    /// updates are handled from now on, until [`Self::start`]'s shutdown. `None` when polling.
    pub fn routes(&self, engine: &Engine) -> Option<axum::Router> {
        let Receive::Webhook { secret, url } = &self.receive else {
            return None;
        };
        // The address is unused: the route is served by `frogbot serve`'s own listener.
        let public = url
            .clone()
            .unwrap_or_else(|| url::Url::parse("http://localhost/").expect("a valid URL"));
        let options = webhooks::Options::new(([127, 0, 0, 1], 0).into(), public)
            .path(WEBHOOK_PATH.into())
            .secret_token(secret.clone());
        let (listener, _stopped, router) = webhooks::axum_no_setup(options);
        // The guard runs before teloxide's handler sees the request.
        let router = router.layer(axum::middleware::from_fn_with_state(
            Arc::<str>::from(secret.as_str()),
            webhook_guard,
        ));
        let bot = self.bot.clone();
        let register = url.clone().map(|u| (u, secret.clone()));
        let ctx = self.context(engine.clone());
        let stop = self.webhook_stop.clone();
        let task = tokio::spawn(async move {
            if let Some((url, secret)) = register {
                let set = bot.set_webhook(url.clone()).secret_token(secret);
                match set.send().await {
                    Ok(_) => info!(url = %url, "Telegram webhook registered"),
                    Err(e) => {
                        warn!(url = %url, error = %e, "setWebhook failed; updates may not arrive")
                    }
                }
            }
            dispatch(bot, ctx, listener, stop).await;
        });
        *self.webhook_task.lock().expect("not poisoned") = Some(task);
        Some(router)
    }

    /// Starts receiving: long polling, or (webhook mode) ties the receiver [`Self::routes`] started
    /// to `shutdown`. The task ends once `shutdown` is cancelled and running handlers finish.
    pub fn start(
        &self,
        engine: Engine,
        shutdown: CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        match &self.receive {
            Receive::Polling { timeout } => {
                let bot = self.bot.clone();
                let timeout = *timeout;
                let ctx = self.context(engine);
                Some(tokio::spawn(async move {
                    if let Err(e) = bot.delete_webhook().send().await {
                        warn!(error = %e, "deleteWebhook failed; getUpdates may be refused");
                    }
                    let polling = Polling::builder(bot.clone()).timeout(timeout).build();
                    dispatch(bot, ctx, polling, shutdown).await;
                }))
            }
            Receive::Webhook { .. } => {
                let task = self.webhook_task.lock().expect("not poisoned").take();
                let stop = self.webhook_stop.clone();
                match task {
                    Some(task) => Some(tokio::spawn(async move {
                        shutdown.cancelled().await;
                        stop.cancel();
                        let _ = task.await;
                    })),
                    None => {
                        warn!("Telegram webhook mode: start() before routes(); nothing receives");
                        None
                    }
                }
            }
        }
    }
}

/// At most [`LOGGED_PREFIX`] bytes of `text` (cut at a character boundary).
pub fn log_prefix(text: &str) -> &str {
    let mut end = text.len().min(LOGGED_PREFIX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// In front of teloxide's webhook route: refuses (401) a request whose secret token is missing or
/// wrong, compared in constant time, so teloxide's own (plain) comparison only ever sees the
/// right token; and acknowledges without passing on (200) a body that is no Bot API update,
/// logging a bounded prefix of it at WARN (teloxide would log all of it at ERROR).
async fn webhook_guard(
    State(secret): State<Arc<str>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use subtle::ConstantTimeEq;

    let given = request
        .headers()
        .get(SECRET_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !bool::from(given.ct_eq(secret.as_bytes())) {
        warn!("Telegram webhook request without the right secret token refused");
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_UPDATE_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => {
            warn!(error = %e, "Telegram webhook body could not be read");
            return StatusCode::BAD_REQUEST.into_response();
        }
    };
    if let Err(e) = serde_json::from_slice::<Update>(&bytes) {
        let text = String::from_utf8_lossy(&bytes);
        warn!(
            error = log_prefix(&e.to_string()),
            len = bytes.len(),
            body = log_prefix(&text),
            "unreadable Telegram update dropped"
        );
        return StatusCode::OK.into_response();
    }
    next.run(axum::extract::Request::from_parts(parts, bytes.into()))
        .await
}

/// Runs teloxide's dispatcher (one worker per chat) over `listener` until `shutdown`.
async fn dispatch<L>(bot: Bot, ctx: Arc<Context>, listener: L, shutdown: CancellationToken)
where
    L: UpdateListener + Send + 'static,
    L::Err: Debug + Send + 'static,
{
    let handler = dptree::endpoint(|update: Update, ctx: Arc<Context>| async move {
        handle(&ctx, update).await;
        Ok::<(), std::convert::Infallible>(())
    });
    let mut dp = Dispatcher::builder(bot, handler)
        .dependencies(dptree::deps![ctx])
        .build();
    let token = dp.shutdown_token();
    let stopper = tokio::spawn(async move {
        shutdown.cancelled().await;
        // Until the dispatcher runs, it cannot be shut down: try again shortly.
        loop {
            match token.shutdown() {
                Ok(done) => break done.await,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    });
    let result = dp
        .try_dispatch_with_listener(Checked(listener), Arc::new(ListenerErrors))
        .await;
    stopper.abort();
    if let Err(e) = result {
        warn!(error = %e, "Telegram receiving could not start (getMe failed)");
    }
}

/// Logs listener errors (a failed `getUpdates`; teloxide backs off and tries again).
struct ListenerErrors;

impl<E: Debug + Send + 'static> ErrorHandler<E> for ListenerErrors {
    fn handle_error(self: Arc<Self>, error: E) -> BoxFuture<'static, ()> {
        warn!(error = ?error, "receiving Telegram updates failed; retrying");
        Box::pin(ready(()))
    }
}

/// An update listener that drops (with a clear log line) the updates teloxide could not read,
/// before the dispatcher sees them.
struct Checked<L>(L);

type Item<E> = Result<Update, E>;

fn keep_readable<E>(item: Item<E>) -> Ready<Option<Item<E>>> {
    if let Ok(update) = &item
        && let UpdateKind::Error(raw) = &update.kind
    {
        warn!(
            update_id = update.id.0,
            raw = log_prefix(&raw.to_string()),
            "malformed Telegram update dropped"
        );
        return ready(None);
    }
    ready(Some(item))
}

impl<'a, L> AsUpdateStream<'a> for Checked<L>
where
    L: UpdateListener + 'a,
    L::Err: Send + 'a,
{
    type StreamErr = L::Err;
    type Stream = futures::stream::FilterMap<
        <L as AsUpdateStream<'a>>::Stream,
        Ready<Option<Item<L::Err>>>,
        fn(Item<L::Err>) -> Ready<Option<Item<L::Err>>>,
    >;

    fn as_stream(&'a mut self) -> Self::Stream {
        self.0
            .as_stream()
            .filter_map(keep_readable::<L::Err> as fn(_) -> _)
    }
}

impl<L> UpdateListener for Checked<L>
where
    L: UpdateListener + 'static,
    L::Err: Send + 'static,
{
    type Err = L::Err;

    fn stop_token(&mut self) -> StopToken {
        self.0.stop_token()
    }

    /// Asks Telegram for messages and callback queries only (the dispatcher's endpoint would
    /// accept every kind; the others are ignored anyway).
    fn hint_allowed_updates(&mut self, _hint: &mut dyn Iterator<Item = AllowedUpdate>) {
        self.0.hint_allowed_updates(
            &mut [AllowedUpdate::Message, AllowedUpdate::CallbackQuery].into_iter(),
        );
    }
}

/// What every handler shares.
struct Context {
    engine: Engine,
    bot: Bot,
    me: Me,
    outbox: Arc<TelegramOutbox>,
}

/// Handles one update (called by the chat's worker, in order).
async fn handle(ctx: &Context, update: Update) {
    let span = info_span!(
        "telegram_update",
        update_id = update.id.0,
        chat_id = tracing::field::Empty
    );
    if let Some(chat) = update.chat() {
        span.record("chat_id", chat.id.0);
    }
    async {
        match update.kind {
            UpdateKind::Message(m) => on_message(ctx, m).await,
            UpdateKind::CallbackQuery(q) => on_callback(ctx, q).await,
            _ => debug!("Telegram update of another kind; ignored"),
        }
    }
    .instrument(span)
    .await
}

async fn on_message(ctx: &Context, m: Message) {
    let me = &ctx.me;
    if is_own_message(&m, me.user.id) {
        return;
    }
    if !talks_to_bot(&m, me.user.id, me.username()) {
        debug!("group message not addressed to the bot; ignored");
        return;
    }
    let thread = thread_id(&m);
    let mut message = match thread_message(&m) {
        Ok(Interaction::Message { message }) => message,
        Ok(_) => return,
        Err(e) => {
            warn!(thread = %thread, message_id = m.id.0, error = %e, "Telegram message dropped");
            return;
        }
    };
    message.text = strip_mention(&message.text, me.username());
    ctx.outbox.remember(&thread, m.id);
    match ctx.engine.channel_message(PLATFORM, &thread, message).await {
        Ok(ChannelMessageOutcome::Denied) => {
            info!(thread = %thread, "message from a user the access check refuses");
            if m.chat.is_private() {
                ctx.outbox.say(&thread, NOT_ALLOWED_TEXT, Some(m.id)).await;
            }
        }
        Ok(ChannelMessageOutcome::Consumed(outcome)) => {
            debug!(thread = %thread, ?outcome, "message consumed by a question");
        }
        Ok(_) => debug!(thread = %thread, "message sent to the chat"),
        Err(e) => {
            warn!(thread = %thread, error = %e, "the engine could not take a Telegram message");
            ctx.outbox.say(&thread, FAILED_TEXT, Some(m.id)).await;
        }
    }
}

async fn on_callback(ctx: &Context, q: CallbackQuery) {
    // The conversation of the click, for the engine's same-conversation check. An inaccessible
    // message (date 0) keeps only its chat and id, not its forum topic, so its thread is not
    // known here: `None` lets the engine rely on the question found by the message id
    // (`chat:message_id`, unique in the chat) and its own record of the thread.
    let thread = q.message.as_ref().and_then(|m| match m {
        MaybeInaccessibleMessage::Regular(m) => Some(thread_id(m)),
        MaybeInaccessibleMessage::Inaccessible(_) => None,
    });
    // The hooks answer the query for stale, denied and rejected clicks (with a notice); every
    // other case is answered here, so no button is left spinning.
    let notice = match action(&q) {
        Err(e) => {
            warn!(callback_query_id = %q.id, error = %e, "Telegram callback query dropped");
            Some(STALE_TEXT)
        }
        Ok(interaction) => {
            match ctx
                .engine
                .handle_interaction(PLATFORM, thread.as_deref(), &interaction)
                .await
            {
                Ok(
                    InteractionOutcome::Stale
                    | InteractionOutcome::Denied
                    | InteractionOutcome::Rejected(_),
                ) => return,
                Ok(InteractionOutcome::Ignored) => Some(STALE_TEXT),
                Ok(outcome) => {
                    debug!(?outcome, "callback query handled");
                    None
                }
                Err(e) => {
                    warn!(callback_query_id = %q.id, error = %e, "the engine could not take a callback query");
                    Some(FAILED_TEXT)
                }
            }
        }
    };
    if let Err(e) = TelegramApi::answer_callback_query(&ctx.bot, &q.id.0, notice).await {
        warn!(callback_query_id = %q.id, error = %e, "answerCallbackQuery failed");
    }
}

/// Removes the bot's `@username` from a message (`/cmd@bot x` → `/cmd x`, `@bot hi` → `hi`).
pub fn strip_mention(text: &str, username: &str) -> String {
    let needle = format!("@{}", username.trim_start_matches('@')).to_ascii_lowercase();
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    for (at, _) in lower.match_indices(&needle) {
        out.push_str(&text[rest..at]);
        rest = at + needle.len();
    }
    out.push_str(&text[rest..]);
    let trimmed = out.trim();
    if trimmed.is_empty() {
        text.trim().to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// Posts the agent's replies: in the thread (topic), as a reply to the last message that talked
/// to the bot there, split at Telegram's 4,096 characters.
#[derive(Debug)]
pub struct TelegramOutbox {
    api: Bot,
    /// Thread id → the last message addressed to the bot there (a hint for `reply_parameters`).
    reply_to: Mutex<HashMap<String, MessageId>>,
}

impl TelegramOutbox {
    fn remember(&self, thread: &str, id: MessageId) {
        self.reply_to
            .lock()
            .expect("not poisoned")
            .insert(thread.to_owned(), id);
    }

    async fn say(&self, thread: &str, text: &str, reply_to: Option<MessageId>) {
        let Ok((chat, topic)) = split_thread_id(thread) else {
            return;
        };
        if let Err(e) =
            TelegramApi::send_message(&self.api, chat, topic, text, None, reply_to).await
        {
            warn!(thread, error = %e, "could not post a notice to Telegram");
        }
    }
}

#[async_trait]
impl ChannelOutbox for TelegramOutbox {
    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        let text = reply.text();
        if text.trim().is_empty() {
            return Ok(());
        }
        let (chat, topic) = split_thread_id(&thread.id)?;
        let reply_to = self
            .reply_to
            .lock()
            .expect("not poisoned")
            .get(&thread.id)
            .copied();
        for part in split_text(&text, MAX_TEXT) {
            TelegramApi::send_message(&self.api, chat, topic, &part, None, reply_to).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bots_mention_is_removed() {
        assert_eq!(
            strip_mention("@FrogBot deploy now", "frogbot"),
            "deploy now"
        );
        assert_eq!(
            strip_mention("/ask@frogbot where?", "frogbot"),
            "/ask where?"
        );
        assert_eq!(strip_mention("ask @other too", "frogbot"), "ask @other too");
        assert_eq!(strip_mention("@frogbot", "frogbot"), "@frogbot");
        assert_eq!(strip_mention("é @frogbot ü", "frogbot"), "é  ü");
    }

    #[test]
    fn secrets_and_tokens_are_checked() {
        assert!(valid_secret("abc-DEF_123"));
        assert!(!valid_secret(""));
        assert!(!valid_secret("has space"));
        assert!(!valid_secret(&"a".repeat(257)));
        assert!(valid_token("123456:ABC-def"));
        assert!(!valid_token("ABC"));
        assert!(!valid_token("x1:abc"));
        assert_eq!(
            parse_url("http://127.0.0.1:8081", true).unwrap().as_str(),
            "http://127.0.0.1:8081/"
        );
        assert!(parse_url("ftp://x/", true).is_err());
    }

    #[test]
    fn logged_prefixes_are_bounded_at_a_character_boundary() {
        assert_eq!(log_prefix("short"), "short");
        let long = "é".repeat(200); // 400 bytes
        let cut = log_prefix(&long);
        assert!(cut.len() <= LOGGED_PREFIX && cut.len() >= LOGGED_PREFIX - 1);
        assert!(long.starts_with(cut));
    }
}
