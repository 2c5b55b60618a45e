//! Receiving (feature `engine`): Bot API updates arrive by long polling (`poll`, our own
//! `getUpdates` loop) or on the webhook route [`WEBHOOK_PATH`] (`webhook_router`), and are
//! handed to FrogBot's engine in order per thread: one queue (a tokio task fed by a channel) per
//! thread, so the updates of a thread (a chat, or a forum topic) are handled one after another in
//! arrival order while different threads run in parallel; a queue's task ends when it has been
//! idle for [`IDLE`].
//!
//! At least once: an update is confirmed to Telegram only once it has been handled (handed to the
//! engine, which stores a message before it answers; the store drops a message id it has seen, so
//! an update received twice is harmless). Polling confirms with the next `getUpdates`' `offset`,
//! which never passes the oldest update still being handled: a process that dies between fetching
//! and handling leaves the update with Telegram, and the next one receives it again (updates
//! after it that were handled may come again too). While the oldest is handled, later updates
//! still arrive (up to `getUpdates`' 100 per call). The webhook answers `200` only after the
//! update was handled, `503` while shutting down and `500` when its handler failed, so Telegram
//! delivers it again.
//!
//! The webhook route checks `X-Telegram-Bot-Api-Secret-Token` in constant time (a missing or wrong
//! one is `401`, and the request goes no further) and acknowledges bodies that are no update
//! (`200`, so Telegram does not resend them). Updates that cannot be read are dropped with a
//! `warn!` line that shows at most [`LOGGED_PREFIX`] bytes of them; polling's offset still moves
//! past them.
//!
//! Conversations: in a private chat every message talks to the bot; in a group only a mention, a
//! command, or a reply to the bot does. A Telegram chat (a forum topic in forum supergroups) is one
//! FrogBot chat. Callback queries go to `EngineHandle::interaction` and are always answered.
//!
//! Agent conversations in a private chat (`{chat}~{root}`, see [`super::outbox`]): a person's
//! message that **replies to** a message of an agent conversation goes to that conversation (so
//! to the agent's inbox); every other message in the private chat goes to the chat's own thread
//! (`{chat}`, the conversation with the model), as before. Telegram's `reply_to_message` does not
//! nest, so the message replied to, `X`, is looked up (`agent_thread`): a message the outbox
//! posted in (or routed to) an agent conversation lately, in this process
//! ([`TelegramOutbox::agent_thread_of`]); else `X` is itself a root (the engine knows the thread
//! `{chat}~{X}`); else `X` is the current message of a question asked in an agent conversation
//! (`EngineHandle::form_open`). After a restart, a reply to a later agent message that is
//! neither a root nor a question's goes to the model's chat. A click on a button is routed by the
//! message it is on the same way, and also by the message that one replies to (everything the
//! outbox posts in an agent conversation replies to its root). Groups and forum topics are not
//! affected.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use frogbot_channel::receive::logged;
use frogbot_channel::{
    Done, EngineHandle, EventOutcome, InteractionOutcome, MessageOutcome, Outcome, StopOutcome,
    ThreadExecutor,
};
use frogbot_model::blocks::EventClick;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use serde_json::{Value, json};
use teloxide::Bot;
use teloxide::types::{
    CallbackQuery, MaybeInaccessibleMessage, Me, Message, Update, UpdateId, UpdateKind,
};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use super::TelegramOutbox;
use crate::PLATFORM;
use crate::client::{self, MAX_WAIT, TelegramApi};
use crate::convert::{
    action, addressed_message, is_own_message, platform_user, strip_mention, talks_to_bot,
};
use crate::ids::{STOP_DATA, thread_id};
use crate::questions::STALE_TEXT;

/// Where `frogbot serve` mounts the webhook route.
pub const WEBHOOK_PATH: &str = "/channels/telegram/webhook";
pub use frogbot_model::NOT_ALLOWED_TEXT;
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
/// How much longer than its long-poll `timeout` a `getUpdates` request may take before the
/// client gives up on it.
pub const POLL_MARGIN: Duration = Duration::from_secs(10);
/// While the oldest update taken is still being handled (so `getUpdates` answers at once with
/// it), how often polling asks for new updates.
pub const BUSY_POLL: Duration = Duration::from_secs(1);
/// The longest wait between two `getUpdates` after failures (doubling from 1 second).
pub const MAX_POLL_BACKOFF: Duration = Duration::from_secs(30);

/// What every handler shares.
pub(crate) struct Context {
    pub(crate) engine: EngineHandle,
    pub(crate) bot: Bot,
    pub(crate) me: Me,
    pub(crate) outbox: Arc<TelegramOutbox>,
}

/// What a queue does with an update.
type Handler = Arc<dyn Fn(Update) -> BoxFuture<'static, ()> + Send + Sync>;

/// What became of an update [`Deliveries::accept`] was given.
#[derive(Debug)]
pub(crate) enum Accepted {
    /// Nothing to do (no update for the engine: malformed, another kind): handled.
    Nothing,
    /// Queued: resolves once it was handled, or its handler failed (a panic).
    Queued(Done),
    /// Shutting down: not taken (Telegram keeps it).
    Closed,
}

/// The per-thread queues updates go through to the engine (a [`ThreadExecutor`] keyed by
/// [`queue_key`]).
pub(crate) struct Deliveries {
    handler: Handler,
    queues: ThreadExecutor,
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
            queues: ThreadExecutor::new(IDLE),
        })
    }

    /// Takes an update: a malformed one is dropped with a log line; any other goes to its
    /// thread's queue (after [`Self::close`], nowhere).
    pub(crate) fn accept(self: &Arc<Self>, update: Update) -> Accepted {
        if let UpdateKind::Error(raw) = &update.kind {
            warn!(
                update_id = update.id.0,
                raw = log_prefix(&raw.to_string()),
                "malformed Telegram update dropped"
            );
            return Accepted::Nothing;
        }
        let Some(key) = queue_key(&update) else {
            debug!(
                update_id = update.id.0,
                "Telegram update of another kind; ignored"
            );
            return Accepted::Nothing;
        };
        let update_id = update.id.0;
        match self.queues.push(&key, (self.handler)(update)) {
            Some(done) => Accepted::Queued(done),
            None => {
                debug!(update_id, "shutting down; Telegram update not taken");
                Accepted::Closed
            }
        }
    }

    fn closed(&self) -> bool {
        self.queues.is_closed()
    }

    /// Stops taking updates and waits until every queued one is handled.
    pub(crate) async fn close(&self) {
        self.queues.close().await;
    }
}

/// The queue an update belongs to: its thread (a click on a message whose topic Telegram no longer
/// reports is queued by its chat; an inline-mode click by its user).
fn queue_key(update: &Update) -> Option<String> {
    match &update.kind {
        UpdateKind::Message(m) | UpdateKind::EditedMessage(m) => Some(thread_id(m)),
        UpdateKind::CallbackQuery(q) => Some(match &q.message {
            Some(MaybeInaccessibleMessage::Regular(m)) => thread_id(m),
            Some(MaybeInaccessibleMessage::Inaccessible(m)) => m.chat.id.0.to_string(),
            None => format!("user:{}", q.from.id.0),
        }),
        _ => None,
    }
}

/// What polling may confirm: the updates taken and the ones still being handled.
#[derive(Debug, Default)]
struct Offsets {
    /// The highest update id handed over so far.
    highest: Option<u32>,
    /// Updates handed over and not handled yet.
    handling: BTreeSet<u32>,
}

impl Offsets {
    /// The `offset` of the next `getUpdates`: the oldest update still being handled, else the
    /// one after the highest taken (`None` before any: Telegram's oldest unconfirmed).
    fn offset(&self) -> Option<i32> {
        let next = self
            .handling
            .first()
            .copied()
            .or(self.highest.map(|h| h.saturating_add(1)))?;
        Some(i32::try_from(next).unwrap_or(i32::MAX))
    }

    /// Whether update `id` is new to this process (a `getUpdates` returns again the updates still
    /// being handled, which are not handed over twice).
    fn fresh(&self, id: u32) -> bool {
        self.highest.is_none_or(|h| id > h)
    }

    fn taken(&mut self, id: u32, queued: bool) {
        self.highest = Some(self.highest.map_or(id, |h| h.max(id)));
        if queued {
            self.handling.insert(id);
        }
    }
}

/// Which updates `getUpdates` asks for.
const ALLOWED_UPDATES: [&str; 3] = ["message", "edited_message", "callback_query"];

/// One `getUpdates` from `offset`, held up to `timeout` by Telegram. An update teloxide cannot
/// read keeps its id (as [`UpdateKind::Error`] with its JSON) so the offset moves past it.
async fn fetch(
    bot: &Bot,
    offset: Option<i32>,
    timeout: Duration,
) -> Result<Vec<Update>, crate::Error> {
    let mut body = json!({"timeout": timeout.as_secs(), "allowed_updates": ALLOWED_UPDATES});
    if let Some(o) = offset {
        body["offset"] = o.into();
    }
    let raw: Vec<Value> =
        client::request(bot, "getUpdates", &body, Some(timeout + POLL_MARGIN)).await?;
    Ok(raw.into_iter().filter_map(read_update).collect())
}

/// An update of a `getUpdates` answer (`None`: it has no `update_id`; logged). Read from text:
/// teloxide's `Update` does not read from a `serde_json::Value`.
fn read_update(raw: Value) -> Option<Update> {
    match serde_json::from_str::<Update>(&raw.to_string()) {
        Ok(mut update) => {
            if let UpdateKind::Error(kept) = &mut update.kind {
                *kept = raw;
            }
            Some(update)
        }
        Err(e) => match raw["update_id"]
            .as_u64()
            .and_then(|id| u32::try_from(id).ok())
        {
            Some(id) => Some(Update {
                id: UpdateId(id),
                kind: UpdateKind::Error(raw),
            }),
            None => {
                warn!(error = %e, raw = log_prefix(&raw.to_string()), "Telegram update without an id dropped");
                None
            }
        },
    }
}

/// The updates being handled, each giving its id once its handler is done.
type Handling = FuturesUnordered<BoxFuture<'static, (u32, Outcome)>>;

fn note(offsets: &mut Offsets, (id, done): (u32, Outcome)) {
    match done {
        // A handler that panics would panic again: the update is given up, not retried.
        Outcome::Panicked => warn!(
            update_id = id,
            "a Telegram update whose handler failed is confirmed"
        ),
        // Its task was dropped without handling it (the runtime is going away): not confirmed.
        Outcome::Dropped => {
            debug!(update_id = id, "Telegram update not handled; not confirmed");
            return;
        }
        Outcome::Ran => {}
    }
    offsets.handling.remove(&id);
}

/// Long polling until `shutdown`: `deleteWebhook`, then `getUpdates` (messages and callback
/// queries only), each with the `offset` that confirms exactly the updates handled so far
/// ([`Offsets`]); failures are retried after Telegram's `retry_after` (at most [`MAX_WAIT`]) or a
/// backoff doubling up to [`MAX_POLL_BACKOFF`]. At shutdown the queued updates are handled, then
/// confirmed with a last `getUpdates`.
pub(crate) async fn poll(
    bot: Bot,
    timeout: Duration,
    deliveries: Arc<Deliveries>,
    shutdown: CancellationToken,
) {
    let body = json!({});
    let deleted = client::with_retry("deleteWebhook", || {
        client::request::<bool>(&bot, "deleteWebhook", &body, None)
    });
    if let Err(e) = deleted.await {
        warn!(error = %e, "deleteWebhook failed; getUpdates may be refused");
    }
    let mut offsets = Offsets::default();
    let mut handling = Handling::new();
    let mut failures: u32 = 0;
    'poll: loop {
        let fetched = {
            let fetch = fetch(&bot, offsets.offset(), timeout);
            tokio::pin!(fetch);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break 'poll,
                    Some(done) = handling.next(), if !handling.is_empty() => note(&mut offsets, done),
                    fetched = &mut fetch => break fetched,
                }
            }
        };
        let updates = match fetched {
            Ok(updates) => {
                failures = 0;
                updates
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                let backoff = Duration::from_secs(1 << failures.min(5)).min(MAX_POLL_BACKOFF);
                let wait = e
                    .transient()
                    .and_then(|t| t.wait())
                    .map_or(backoff, |w| w.min(MAX_WAIT));
                warn!(error = %e, ?wait, "receiving Telegram updates failed; retrying");
                tokio::select! {
                    () = shutdown.cancelled() => break 'poll,
                    () = tokio::time::sleep(wait) => {}
                }
                continue;
            }
        };
        let returned = updates.len();
        let mut fresh = 0;
        for update in updates {
            let id = update.id.0;
            if !offsets.fresh(id) {
                continue;
            }
            fresh += 1;
            match deliveries.accept(update) {
                Accepted::Nothing => offsets.taken(id, false),
                Accepted::Queued(handled) => {
                    offsets.taken(id, true);
                    handling.push(async move { (id, handled.await) }.boxed());
                }
                Accepted::Closed => break 'poll,
            }
        }
        if returned > 0 && fresh == 0 {
            // Only updates being handled came back (the oldest holds the offset, so Telegram
            // answers at once): ask again once one finishes, or after BUSY_POLL for new ones.
            tokio::select! {
                () = shutdown.cancelled() => break 'poll,
                Some(done) = handling.next(), if !handling.is_empty() => note(&mut offsets, done),
                () = tokio::time::sleep(BUSY_POLL) => {}
            }
        }
    }
    deliveries.close().await;
    while let Some(done) = handling.next().await {
        note(&mut offsets, done);
    }
    if let Some(offset) = offsets.offset() {
        // Confirms what was handled; the updates it returns stay with Telegram for the next run.
        let body = json!({"offset": offset, "limit": 1, "timeout": 0});
        if let Err(e) = client::request::<Vec<Value>>(&bot, "getUpdates", &body, None).await {
            warn!(error = %e, "confirming the handled Telegram updates failed; they may come again");
        }
    }
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
/// is read further), else `200` once the update was handled (`500` when its handler failed, so
/// Telegram sends it again; an unreadable body is logged, with a bounded prefix, and dropped).
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
        Ok(update) => match hook.deliveries.accept(update) {
            Accepted::Nothing => {}
            Accepted::Closed => return StatusCode::SERVICE_UNAVAILABLE,
            Accepted::Queued(handled) => match handled.await {
                Outcome::Ran => {}
                Outcome::Panicked => return StatusCode::INTERNAL_SERVER_ERROR,
                Outcome::Dropped => return StatusCode::SERVICE_UNAVAILABLE,
            },
        },
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
    &text[..text.floor_char_boundary(LOGGED_PREFIX)]
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
            UpdateKind::EditedMessage(m) => on_edited(ctx, m).await,
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
    let thread = route(ctx, &m).await;
    // Without the bot's `@username`, naming the people it mentions (for `ask`).
    let message = match addressed_message(&m, me.user.id, me.username()) {
        Ok(message) => message,
        Err(e) => {
            warn!(thread = %thread, message_id = m.id.0, error = %e, "Telegram message dropped");
            return;
        }
    };
    ctx.outbox.remember(&thread, m.id);
    ctx.outbox
        .note_member(&thread, &crate::ids::message_id(m.chat.id, m.id));
    match ctx.engine.message(PLATFORM, &thread, message).await {
        Ok(MessageOutcome::Denied) => {
            info!(thread = %thread, "message from a user the access check refuses");
            if m.chat.is_private() {
                ctx.outbox.say(&thread, NOT_ALLOWED_TEXT, Some(m.id)).await;
            }
        }
        Ok(MessageOutcome::Consumed(outcome)) => {
            debug!(thread = %thread, ?outcome, "message consumed by a question");
        }
        Ok(_) => debug!(thread = %thread, "message sent to the chat"),
        Err(e) => {
            warn!(thread = %thread, error = %e, "the engine could not take a Telegram message");
            ctx.outbox.say(&thread, FAILED_TEXT, Some(m.id)).await;
        }
    }
}

/// A person edited their message (`edited_message`): one still queued runs with the new text;
/// one that already ran is left as it was. (The Bot API reports no deletions.)
async fn on_edited(ctx: &Context, m: Message) {
    if is_own_message(&m, ctx.me.user.id) {
        return;
    }
    let Some(text) = m.text().or(m.caption()) else {
        return;
    };
    let text = strip_mention(text, ctx.me.username());
    let thread = route(ctx, &m).await;
    let id = crate::ids::message_id(m.chat.id, m.id);
    logged(
        PLATFORM,
        "edit",
        ctx.engine.changed(PLATFORM, &thread, &id, Some(text)).await,
    );
}

/// The thread of message `m` (a person's message, or the bot's message a button was clicked on):
/// in a private chat, the agent conversation it replies to (a bot's message: it belongs to, or
/// replies to) when [`agent_thread`] finds one, else its chat or forum topic ([`thread_id`]).
async fn route(ctx: &Context, m: &Message) -> String {
    let thread = thread_id(m);
    if !m.chat.is_private() {
        return thread;
    }
    let own = is_own_message(m, ctx.me.user.id).then_some(m.id);
    for x in own.into_iter().chain(m.reply_to_message().map(|r| r.id)) {
        if let Some(agent) = agent_thread(ctx, m.chat.id, x).await {
            return agent;
        }
    }
    thread
}

/// The agent conversation of private chat `chat` message `x` belongs to, if any: as the outbox
/// remembers it, as the root of a conversation the engine knows, or as a question's current
/// message in one. A failing look-up is logged and finds nothing.
async fn agent_thread(
    ctx: &Context,
    chat: teloxide::types::ChatId,
    x: teloxide::types::MessageId,
) -> Option<String> {
    let id = crate::ids::message_id(chat, x);
    if let Some(thread) = ctx.outbox.agent_thread_of(&id) {
        return Some(thread);
    }
    let root = [crate::ids::agent_thread_id(chat, x)];
    let here = |thread: &str| {
        let same_chat = crate::ids::split_thread_id(thread).is_ok_and(|(c, _)| c == chat);
        same_chat && crate::ids::thread_root(thread).is_some()
    };
    frogbot_channel::receive::agent_thread(&ctx.engine, PLATFORM, root, &id, here).await
}

async fn on_callback(ctx: &Context, q: CallbackQuery) {
    // The conversation of the click, for the engine's same-conversation check. An inaccessible
    // message (date 0) keeps only its chat and id, not its forum topic, so its thread is not
    // known here: `None` lets the engine rely on the question found by the message id
    // (`chat:message_id`, unique in the chat) and its own record of the thread.
    let thread = match q.message.as_ref() {
        Some(MaybeInaccessibleMessage::Regular(m)) => Some(route(ctx, m).await),
        _ => None,
    };
    // The hooks answer the query for stale, denied and rejected clicks (with a notice); every
    // other case is answered here, so no button is left spinning.
    let notice = if q.data.as_deref() == Some(STOP_DATA) {
        on_stop(ctx, &q, thread).await
    } else if let Some(click) = crate::convert::event_click(&q) {
        on_event(ctx, thread, click).await
    } else {
        match action(&q) {
            Err(e) => {
                warn!(callback_query_id = %q.id, error = %e, "Telegram callback query dropped");
                Some(STALE_TEXT)
            }
            Ok(interaction) => {
                match ctx
                    .engine
                    .interaction(PLATFORM, thread.as_deref(), interaction)
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
        }
    };
    if let Err(e) = TelegramApi::answer_callback_query(&ctx.bot, &q.id.0, notice).await {
        warn!(callback_query_id = %q.id, error = %e, "answerCallbackQuery failed");
    }
}

/// A click on an agent message's event button: the engine sends the event to the agent's inbox
/// (any number of times; nothing is answered). A click on a message, block or button that is
/// gone, or by someone who may not write in the chat, gets a notice (returned).
async fn on_event(
    ctx: &Context,
    thread: Option<String>,
    click: EventClick,
) -> Option<&'static str> {
    let thread = thread.unwrap_or_else(|| {
        click
            .message_id
            .split_once(':')
            .map_or_else(String::new, |(chat, _)| chat.to_owned())
    });
    match ctx.engine.event(PLATFORM, &thread, click).await {
        Ok(EventOutcome::Stale) => Some(STALE_TEXT),
        Ok(outcome) => outcome.notice(),
        Err(e) => {
            warn!(thread = %thread, error = %e, "the engine could not take an event click");
            Some(FAILED_TEXT)
        }
    }
}

/// A click on a streamed reply's Stop button: the engine stops the thread's turn when the
/// clicker drives it; anyone else is told [`frogbot_channel::STOP_REFUSED_TEXT`] (as a denied answer is told its
/// notice). Never a question's interaction. Returns the notice.
async fn on_stop(ctx: &Context, q: &CallbackQuery, thread: Option<String>) -> Option<&'static str> {
    let thread = thread.or_else(|| match &q.message {
        Some(MaybeInaccessibleMessage::Inaccessible(m)) => Some(m.chat.id.0.to_string()),
        _ => None,
    });
    match thread {
        None => Some(STALE_TEXT),
        Some(thread) => {
            let who = platform_user(&q.from);
            match ctx.engine.stop(PLATFORM, &thread, &who).await {
                Ok(StopOutcome::Stopping) => {
                    info!(thread = %thread, "turn stopped from Telegram");
                    None
                }
                // Nothing runs (it ended already): acknowledged quietly.
                Ok(outcome) => outcome.notice(),
                Err(e) => {
                    warn!(thread = %thread, error = %e, "the engine could not stop a turn");
                    Some(FAILED_TEXT)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{self, FakeBotApi};
    use std::sync::Mutex;
    use tokio::sync::mpsc;

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
        let _ = deliveries.accept(message(1, 1, "1a"));
        let _ = deliveries.accept(message(2, 1, "1b"));
        let _ = deliveries.accept(message(3, 2, "2a"));
        let _ = deliveries.accept(message(4, 2, "2b"));
        deliveries.close().await;
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen, ["2a", "2b", "1a", "1b"]);
        // Shut down: nothing more is taken.
        assert!(deliveries.closed());
    }

    /// The text of a message update.
    fn text_of(update: &Update) -> String {
        match &update.kind {
            UpdateKind::Message(m) => m.text().unwrap_or_default().to_owned(),
            _ => String::new(),
        }
    }

    /// A handler that logs the text of each update it finished (and says so on `finished`), and
    /// holds the update with text `hold` until `release` fires (telling `started` when it began).
    fn holding(
        hold: &'static str,
        started: mpsc::UnboundedSender<()>,
        release: Arc<tokio::sync::Notify>,
        log: Arc<Mutex<Vec<String>>>,
    ) -> (Handler, mpsc::UnboundedReceiver<String>) {
        let (finished, finishes) = mpsc::unbounded_channel();
        let handler: Handler = Arc::new(move |update: Update| {
            let (started, release, log) = (started.clone(), release.clone(), log.clone());
            let finished = finished.clone();
            Box::pin(async move {
                let text = text_of(&update);
                if text == hold {
                    let _ = started.send(());
                    release.notified().await;
                }
                log.lock().unwrap().push(text.clone());
                let _ = finished.send(text);
            })
        });
        (handler, finishes)
    }

    fn push_text(fake: &FakeBotApi, chat: i64, text: &str) -> i64 {
        fake.push(testing::text_update(
            fake.next_message_id(),
            testing::private_chat(chat, "A"),
            testing::user(chat, "A"),
            text,
        ))
    }

    fn offsets(calls: &[testing::Call]) -> Vec<Option<i64>> {
        calls
            .iter()
            .filter(|c| c.method == "getupdates")
            .map(|c| c.body["offset"].as_i64())
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn polling_confirms_an_update_only_once_it_was_handled() {
        let fake = FakeBotApi::start().await;
        let a = push_text(&fake, 1, "a");
        let b = push_text(&fake, 2, "b");
        let (started, mut began) = mpsc::unbounded_channel();
        let release = Arc::new(tokio::sync::Notify::new());
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let (handler, mut finishes) = holding("a", started, release.clone(), log.clone());
        let deliveries = Deliveries::with_handler(handler);
        let shutdown = CancellationToken::new();
        let polling = tokio::spawn(poll(
            fake.bot(),
            Duration::from_secs(1),
            deliveries,
            shutdown.clone(),
        ));
        began.recv().await.expect("a is being handled");
        // b (another chat) is handled meanwhile, and c, which comes later; polling goes on,
        // asking from a: a stays with Telegram, b and c too (they come after a).
        assert_eq!(finishes.recv().await.unwrap(), "b");
        let c = push_text(&fake, 3, "c");
        assert_eq!(finishes.recv().await.unwrap(), "c");
        fake.wait_for("two polls from a", |calls| {
            let from_a = offsets(calls).iter().filter(|o| **o == Some(a)).count();
            (from_a >= 2).then_some(())
        })
        .await;
        assert_eq!(*log.lock().unwrap(), ["b", "c"]);
        let asked = offsets(&fake.all_calls());
        assert!(
            asked.iter().all(|o| o.is_none_or(|o| o <= a)),
            "confirmed past the update being handled: {asked:?}"
        );
        // Handled: the next poll confirms both.
        release.notify_one();
        fake.wait_for("a poll past c", |calls| {
            offsets(calls).contains(&Some(c + 1)).then_some(())
        })
        .await;
        assert!(b < c);
        // Each was handed over once, though Telegram returned them several times.
        assert_eq!(*log.lock().unwrap(), ["b", "c", "a"]);
        shutdown.cancel();
        polling.await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_update_being_handled_when_the_process_dies_is_received_again() {
        let fake = FakeBotApi::start().await;
        push_text(&fake, 1, "a");
        let (started, mut began) = mpsc::unbounded_channel();
        let never = Arc::new(tokio::sync::Notify::new());
        let first_log: Arc<Mutex<Vec<String>>> = Arc::default();
        let first = Deliveries::with_handler(holding("a", started, never, first_log.clone()).0);
        let polling = tokio::spawn(poll(
            fake.bot(),
            Duration::from_secs(1),
            first,
            CancellationToken::new(),
        ));
        began.recv().await.expect("a is being handled");
        // The process dies mid-handling: its polling loop is gone, the handler never finishes.
        polling.abort();
        assert!(polling.await.unwrap_err().is_cancelled());
        assert!(first_log.lock().unwrap().is_empty());
        // The next process receives a again.
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let (started, _began) = mpsc::unbounded_channel();
        let second = Deliveries::with_handler(holding("-", started, Arc::default(), log.clone()).0);
        let shutdown = CancellationToken::new();
        let polling = tokio::spawn(poll(
            fake.bot(),
            Duration::from_secs(1),
            second,
            shutdown.clone(),
        ));
        fake.wait_for("a handled again", |_| {
            (log.lock().unwrap().as_slice() == ["a"]).then_some(())
        })
        .await;
        shutdown.cancel();
        polling.await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_webhook_answers_once_the_update_is_handled_and_500_when_its_handler_failed() {
        let (started, mut began) = mpsc::unbounded_channel();
        let release = Arc::new(tokio::sync::Notify::new());
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let held = holding("a", started, release.clone(), log.clone()).0;
        let handler: Handler = Arc::new(move |update: Update| {
            if text_of(&update) == "boom" {
                return Box::pin(async { panic!("a handler fails") });
            }
            held(update)
        });
        let deliveries = Deliveries::with_handler(handler);
        let app = webhook_router("s3cret", Duration::from_secs(5), deliveries.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}{WEBHOOK_PATH}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let body = |id: i64, text: &str| {
            let mut u = testing::text_update(
                id,
                testing::private_chat(1, "A"),
                testing::user(1, "A"),
                text,
            );
            u["update_id"] = json!(id);
            u.to_string()
        };

        let post = testing::post_update(&url, Some("s3cret"), &body(1, "a"));
        tokio::pin!(post);
        tokio::select! {
            status = &mut post => panic!("answered {status} before the update was handled"),
            _ = began.recv() => {}
        }
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(
            futures::poll!(&mut post).is_pending(),
            "answered while handling"
        );
        release.notify_one();
        assert_eq!(post.await, 200);
        assert_eq!(*log.lock().unwrap(), ["a"]);

        // A handler that panics: 500, so Telegram sends the update again; the queue goes on.
        assert_eq!(
            testing::post_update(&url, Some("s3cret"), &body(2, "boom")).await,
            500
        );
        assert_eq!(
            testing::post_update(&url, Some("s3cret"), &body(3, "c")).await,
            200
        );
        assert_eq!(*log.lock().unwrap(), ["a", "c"]);
        // Shut down: not taken, Telegram keeps it.
        deliveries.close().await;
        assert_eq!(
            testing::post_update(&url, Some("s3cret"), &body(4, "d")).await,
            503
        );
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
