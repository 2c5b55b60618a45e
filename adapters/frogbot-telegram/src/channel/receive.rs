//! Receiving (feature `engine`): Bot API updates arrive by long polling ([`poll`], teloxide's
//! `Polling` listener) or on the webhook route [`WEBHOOK_PATH`] ([`webhook_router`]), and are
//! handed to FrogBot's engine in order per thread: one queue (a tokio task fed by a channel) per
//! thread, so the updates of a thread (a chat, or a forum topic) are handled one after another in
//! arrival order while different threads run in parallel; a queue's task ends when it has been
//! idle for [`IDLE`].
//!
//! The webhook route checks `X-Telegram-Bot-Api-Secret-Token` in constant time (a missing or wrong
//! one is `401`, and the request goes no further) and acknowledges bodies that are no update
//! (`200`, so Telegram does not resend them). Updates that cannot be read are dropped with a
//! `warn!` line that shows at most [`LOGGED_PREFIX`] bytes of them; polling's offset still moves
//! past them.
//!
//! Conversations: in a private chat every message talks to the bot; in a group only a mention, a
//! command, or a reply to the bot does. A Telegram chat (a forum topic in forum supergroups) is one
//! FrogBot chat. Callback queries go to `Engine::handle_interaction` and are always answered.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use frogbot_core::agent::{
    ChannelMessageOutcome, Engine, InteractionOutcome, STOP_REFUSED_TEXT, StopOutcome,
};
use frogbot_model::Interaction;
use futures::StreamExt;
use futures::future::BoxFuture;
use teloxide::Bot;
use teloxide::requests::{Request, Requester};
use teloxide::types::{
    AllowedUpdate, CallbackQuery, MaybeInaccessibleMessage, Me, Message, Update, UpdateKind,
};
use teloxide::update_listeners::{AsUpdateStream, Polling, UpdateListener};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, info, info_span, warn};

use super::TelegramOutbox;
use crate::PLATFORM;
use crate::client::TelegramApi;
use crate::convert::{
    action, is_own_message, platform_user, strip_mention, talks_to_bot, thread_message,
};
use crate::ids::{STOP_DATA, thread_id};
use crate::questions::STALE_TEXT;

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
/// The largest webhook body read: an update is a few KiB (a message is at most 4,096 characters
/// with its entities); a longer body is refused `413` once this much has arrived.
pub const MAX_UPDATE_BYTES: usize = 1024 * 1024;
/// How long a thread's queue waits for its next update before its task ends.
pub const IDLE: Duration = Duration::from_secs(10);

/// What every handler shares.
pub(crate) struct Context {
    pub(crate) engine: Engine,
    pub(crate) bot: Bot,
    pub(crate) me: Me,
    pub(crate) outbox: Arc<TelegramOutbox>,
}

/// What a queue does with an update.
type Handler = Arc<dyn Fn(Update) -> BoxFuture<'static, ()> + Send + Sync>;

/// The per-thread queues updates go through to the engine.
pub(crate) struct Deliveries {
    handler: Handler,
    queues: Mutex<HashMap<String, mpsc::UnboundedSender<Update>>>,
    tasks: TaskTracker,
    closed: AtomicBool,
}

impl Deliveries {
    /// Queues handing every update to the engine.
    pub(crate) fn new(ctx: Context) -> Arc<Self> {
        let ctx = Arc::new(ctx);
        Self::with_handler(Arc::new(move |update| {
            let ctx = ctx.clone();
            Box::pin(async move { handle(&ctx, update).await })
        }))
    }

    fn with_handler(handler: Handler) -> Arc<Self> {
        Arc::new(Self {
            handler,
            queues: Mutex::default(),
            tasks: TaskTracker::new(),
            closed: AtomicBool::new(false),
        })
    }

    /// Takes an update: a malformed one is dropped with a log line; any other goes to its
    /// thread's queue (after [`Self::close`], nowhere).
    pub(crate) fn accept(self: &Arc<Self>, update: Update) {
        if self.closed() {
            debug!(
                update_id = update.id.0,
                "shutting down; Telegram update not taken"
            );
            return;
        }
        if let UpdateKind::Error(raw) = &update.kind {
            warn!(
                update_id = update.id.0,
                raw = log_prefix(&raw.to_string()),
                "malformed Telegram update dropped"
            );
            return;
        }
        let Some(key) = queue_key(&update) else {
            debug!(
                update_id = update.id.0,
                "Telegram update of another kind; ignored"
            );
            return;
        };
        let mut queues = self.queues.lock().expect("not poisoned");
        // Sending under the lock: a queue that is going idle removes itself under it too, so an
        // update is never sent to a queue whose task has ended.
        let update = match queues.get(&key) {
            Some(tx) => match tx.send(update) {
                Ok(()) => return,
                Err(mpsc::error::SendError(update)) => update,
            },
            None => update,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(update);
        queues.insert(key.clone(), tx);
        let this = self.clone();
        self.tasks.spawn(async move { this.work(key, rx).await });
    }

    /// One thread's queue: its updates, one after another.
    async fn work(self: Arc<Self>, key: String, mut rx: mpsc::UnboundedReceiver<Update>) {
        loop {
            let update = match tokio::time::timeout(IDLE, rx.recv()).await {
                Ok(Some(update)) => update,
                Ok(None) => return,
                Err(_) => {
                    let mut queues = self.queues.lock().expect("not poisoned");
                    match rx.try_recv() {
                        Ok(update) => update,
                        Err(_) => {
                            queues.remove(&key);
                            return;
                        }
                    }
                }
            };
            (self.handler)(update).await;
        }
    }

    fn closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Stops taking updates and waits until every queued one is handled.
    pub(crate) async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.queues.lock().expect("not poisoned").clear();
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// The queue an update belongs to: its thread (a click on a message whose topic Telegram no longer
/// reports is queued by its chat; an inline-mode click by its user).
fn queue_key(update: &Update) -> Option<String> {
    match &update.kind {
        UpdateKind::Message(m) => Some(thread_id(m)),
        UpdateKind::CallbackQuery(q) => Some(match &q.message {
            Some(MaybeInaccessibleMessage::Regular(m)) => thread_id(m),
            Some(MaybeInaccessibleMessage::Inaccessible(m)) => m.chat.id.0.to_string(),
            None => format!("user:{}", q.from.id.0),
        }),
        _ => None,
    }
}

/// Long polling until `shutdown`: `deleteWebhook`, then `getUpdates` (messages and callback
/// queries only) through teloxide's listener, which confirms the offset and backs off on errors.
pub(crate) async fn poll(
    bot: Bot,
    timeout: Duration,
    deliveries: Arc<Deliveries>,
    shutdown: CancellationToken,
) {
    if let Err(e) = bot.delete_webhook().send().await {
        warn!(error = %e, "deleteWebhook failed; getUpdates may be refused");
    }
    let mut listener = Polling::builder(bot).timeout(timeout).build();
    listener.hint_allowed_updates(
        &mut [AllowedUpdate::Message, AllowedUpdate::CallbackQuery].into_iter(),
    );
    let stop = listener.stop_token();
    let stopper = tokio::spawn(async move {
        shutdown.cancelled().await;
        stop.stop();
    });
    {
        let mut stream = std::pin::pin!(listener.as_stream());
        while let Some(item) = stream.next().await {
            match item {
                Ok(update) => deliveries.accept(update),
                Err(e) => warn!(error = %e, "receiving Telegram updates failed; retrying"),
            }
        }
    }
    stopper.abort();
    deliveries.close().await;
}

/// The webhook route: `POST` [`WEBHOOK_PATH`], checking the secret token.
pub(crate) fn webhook_router(
    secret: &str,
    body_timeout: Duration,
    deliveries: Arc<Deliveries>,
) -> axum::Router {
    let state = Arc::new(Webhook {
        secret: secret.as_bytes().to_vec(),
        body_timeout,
        deliveries,
    });
    axum::Router::new()
        .route(WEBHOOK_PATH, axum::routing::post(webhook))
        .with_state(state)
}

struct Webhook {
    secret: Vec<u8>,
    body_timeout: Duration,
    deliveries: Arc<Deliveries>,
}

/// One webhook request: `401` without the right secret token (compared in constant time, before
/// any of the body is read), `503` once shut down (Telegram tries again later), `413` for a body
/// over [`MAX_UPDATE_BYTES`] and `408` for one slower than the configured body timeout (neither
/// is read further), else `200` (an unreadable body is logged, with a bounded prefix, and
/// dropped).
async fn webhook(State(hook): State<Arc<Webhook>>, request: axum::extract::Request) -> StatusCode {
    use subtle::ConstantTimeEq;

    let (parts, body) = request.into_parts();
    let given = parts
        .headers
        .get(SECRET_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !bool::from(given.ct_eq(&hook.secret)) {
        warn!("Telegram webhook request without the right secret token refused");
        return StatusCode::UNAUTHORIZED;
    }
    if hook.deliveries.closed() {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let declared = parts
        .headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_UPDATE_BYTES as u64) {
        warn!(
            content_length = declared,
            "Telegram webhook body over the limit refused"
        );
        return StatusCode::PAYLOAD_TOO_LARGE;
    }
    let read = axum::body::to_bytes(body, MAX_UPDATE_BYTES);
    let body = match tokio::time::timeout(hook.body_timeout, read).await {
        Ok(Ok(body)) => body,
        Ok(Err(e)) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            warn!(error = %e, "Telegram webhook body refused");
            return if too_large {
                StatusCode::PAYLOAD_TOO_LARGE
            } else {
                StatusCode::BAD_REQUEST
            };
        }
        Err(_) => {
            warn!(timeout = ?hook.body_timeout, "Telegram webhook body too slow; refused");
            return StatusCode::REQUEST_TIMEOUT;
        }
    };
    match serde_json::from_slice::<Update>(&body) {
        Ok(update) => hook.deliveries.accept(update),
        Err(e) => {
            let text = String::from_utf8_lossy(&body);
            warn!(
                error = log_prefix(&e.to_string()),
                len = body.len(),
                body = log_prefix(&text),
                "unreadable Telegram update dropped"
            );
        }
    }
    StatusCode::OK
}

/// At most [`LOGGED_PREFIX`] bytes of `text` (cut at a character boundary).
pub fn log_prefix(text: &str) -> &str {
    let mut end = text.len().min(LOGGED_PREFIX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Handles one update (called by its thread's queue, in order).
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
    if q.data.as_deref() == Some(STOP_DATA) {
        return on_stop(ctx, &q, thread).await;
    }
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

/// A click on a streamed reply's Stop button: the engine stops the thread's turn when the
/// clicker drives it; anyone else is told [`STOP_REFUSED_TEXT`] (as a denied answer is told its
/// notice). Never a question's interaction.
async fn on_stop(ctx: &Context, q: &CallbackQuery, thread: Option<String>) {
    let thread = thread.or_else(|| match &q.message {
        Some(MaybeInaccessibleMessage::Inaccessible(m)) => Some(m.chat.id.0.to_string()),
        _ => None,
    });
    let notice = match thread {
        None => Some(STALE_TEXT),
        Some(thread) => {
            let who = platform_user(&q.from);
            match ctx.engine.channel_stop(PLATFORM, &thread, &who).await {
                Ok(StopOutcome::Stopping) => {
                    info!(thread = %thread, "turn stopped from Telegram");
                    None
                }
                Ok(StopOutcome::NotDriver) => Some(STOP_REFUSED_TEXT),
                Err(e) => {
                    warn!(thread = %thread, error = %e, "the engine could not stop a turn");
                    Some(FAILED_TEXT)
                }
                // Nothing runs (it ended already): acknowledged quietly.
                Ok(_) => None,
            }
        }
    };
    if let Err(e) = TelegramApi::answer_callback_query(&ctx.bot, &q.id.0, notice).await {
        warn!(callback_query_id = %q.id, error = %e, "answerCallbackQuery failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(update_id: i64, chat: i64, text: &str) -> Update {
        let update = json!({"update_id": update_id, "message": {
            "message_id": update_id, "date": 1, "text": text,
            "chat": {"id": chat, "type": "private", "first_name": "A"},
            "from": {"id": chat, "is_bot": false, "first_name": "A"}
        }});
        let update: Update = serde_json::from_str(&update.to_string()).unwrap();
        assert!(matches!(update.kind, UpdateKind::Message(_)), "{update:?}");
        update
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_thread_in_order_threads_in_parallel() {
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let log = seen.clone();
        let deliveries = Deliveries::with_handler(Arc::new(move |update: Update| {
            let log = log.clone();
            Box::pin(async move {
                let UpdateKind::Message(m) = &update.kind else {
                    return;
                };
                let text = m.text().unwrap_or_default().to_owned();
                // The first update of chat 1 is slow: chat 2 must not wait for it, and the
                // second update of chat 1 must.
                if text == "1a" {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                log.lock().unwrap().push(text);
            })
        }));
        deliveries.accept(message(1, 1, "1a"));
        deliveries.accept(message(2, 1, "1b"));
        deliveries.accept(message(3, 2, "2a"));
        deliveries.accept(message(4, 2, "2b"));
        deliveries.close().await;
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen, ["2a", "2b", "1a", "1b"]);
        // Shut down: nothing more is taken.
        assert!(deliveries.closed());
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
