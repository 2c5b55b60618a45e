//! Receiving (feature `engine`): the Events API and interactivity over HTTP (an axum router) or
//! Socket Mode, handed to FrogBot's engine in order per thread.
//!
//! Receiving rules:
//! - HTTP requests are verified with the signing secret ([`crate::convert::verify`]: HMAC over
//!   `v0:{timestamp}:{body}`, 5-minute window, constant-time compare) before anything is read;
//!   a bad or missing signature is `401`, malformed JSON `400`, each with a `warn!` line.
//! - Duplicates are processed once: Slack retries (`X-Slack-Retry-Num`) carry the same `event_id`,
//!   a click the same `trigger_id`, and a mention arrives twice (`app_mention` and `message`) with
//!   the same message `ts`; the keys go into a bounded in-memory set ([`Seen`]). That set is per
//!   process: a retry that reaches another process (or this one after a restart) is not recognised
//!   here; for clicks the store still records the first answer only (a repeat is answered `stale`).
//! - Ordering: every delivery goes into its thread's queue (one tokio task per busy thread, ended
//!   once the thread is idle): the deliveries of one thread reach the engine in arrival order,
//!   different threads run in parallel.
//! - Acknowledgement: the request waits for its delivery to be processed up to
//!   [`Config::ack_deadline`](super::Config::ack_deadline) (2.5 s by default, under Slack's 3 s).
//!   In the normal case the message or the click is therefore saved in the store *before* Slack
//!   gets its `200`, so an acknowledged delivery is not lost if the process dies; a slow one (or
//!   one queued behind a slow one) is acknowledged at the deadline and still processed, in order.
//!   A store failure before the deadline answers `500` and forgets the key, so Slack's retry is
//!   processed. Over Socket Mode the same holds with the envelope's acknowledgement.
//! - Modal submissions of a question set are read against the open question before they are
//!   queued ([`crate::questions::modal_field_error`]): one that does not validate is answered at
//!   once, in the acknowledgement (the HTTP body, or the envelope's `payload`), with
//!   `{"response_action": "errors", "errors": {"<block_id>": "<reason>"}}` — the modal stays open
//!   with what was typed, the field says why, and nothing reaches the engine.
//! - Load shedding: at most [`Config::max_pending`](super::Config::max_pending) deliveries
//!   (1,024 by default) wait in the thread queues or run at once. Past it a delivery is refused at
//!   once — `503` in HTTP mode, no acknowledgement in Socket Mode — and its key forgotten, so
//!   Slack's retry (HTTP mode: after about a minute, then five) or redelivery is processed,
//!   instead of the request waiting behind the backlog past Slack's 3-second window.
//! - Messages: a mention, a DM, or a reply in a thread whose chat exists starts or continues the
//!   chat of its thread (`channel:thread_ts`); the bot's own messages (learned with `auth.test`)
//!   and edits are ignored. A denied author gets an ephemeral note. The people a message names
//!   (`<@U…>`, never the bot) go to the engine as its mentions, read from the text it gets (the
//!   bot's own mention removed first): the `ask` command asks the one named first.
//! - Slash commands (`POST /channels/slack/commands`, signed like the rest; Socket Mode's
//!   `slash_commands` envelopes): `ask @person QUESTION [| OPTION…]` starts a new thread where
//!   it was typed and asks there; anything else is answered privately with the thread commands
//!   (Slack runs no slash command in a thread). Slack wants the answer within 3 s: the
//!   acknowledgement carries an ephemeral answer, or is empty once the ask is under way.

use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use frogbot_channel::{EngineHandle, InteractionOutcome, MessageOutcome, channel_chat_id};
use frogbot_model::{
    BoxError, Interaction, PlatformUser, decode_question_modal_metadata, now_millis,
};
use serde_json::{Value, json};
use slack_morphism::prelude::*;
use slack_morphism::socket_mode::clients_manager::{
    SlackSocketModeClientsManager, SlackSocketModeClientsManagerFactory,
};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, info_span, warn};

use super::outbox::STOP_ACTION_ID;
use super::{Inner, SlackAdapter};
use crate::client::SlackApi;
use crate::convert::{
    ChangedMessage, IncomingMessage, SIGNATURE_HEADER, SlashCommand, SlashText, TIMESTAMP_HEADER,
    changed_from_push_json, command_from_form, command_from_json, interaction_from_payload,
    message_from_push_json, payload_from_form, read_slash_text, slash_ask_message, verify,
    without_bot_mention,
};
use crate::ids::{ActionRef, message_id, split_id, thread_id};
use crate::questions::is_open_form_action;
use crate::{Error, PLATFORM};

/// The Events API path.
pub const EVENTS_PATH: &str = "/channels/slack/events";
/// The interactivity path.
pub const INTERACTIVITY_PATH: &str = "/channels/slack/interactivity";
/// The slash command path (the request URL of the app's slash command, e.g. `/frogbot`).
pub const COMMANDS_PATH: &str = "/channels/slack/commands";
/// The header Slack sets on retried deliveries.
pub const RETRY_HEADER: &str = "x-slack-retry-num";
pub use frogbot_model::NOT_ALLOWED_TEXT;

/// What a slash command other than `ask` is answered (ephemeral), `command` being the command
/// as typed (`/frogbot`): Slack's slash commands carry no thread, so the thread commands are
/// typed in the bot's thread.
pub fn command_help(command: &str) -> String {
    use frogbot_channel::Command;
    let mut out = String::from(
        "Slash commands cannot be used in threads, so type these in the bot's thread:",
    );
    for (c, word, what) in Command::ALL {
        let typed = match c {
            Command::Ask => continue,
            Command::Stop => word.to_owned(),
            _ => format!("!{word}"),
        };
        out.push_str(&format!("\n• `{typed}`: {what}"));
    }
    out.push_str(&format!(
        "\n• `{command} ask @person question` (here, or in a thread as `!ask @person question`): \
         ask someone a question in a new thread; for choices, `{command} ask @person Ship today? | yes | no`"
    ));
    out
}

/// What a slash command is answered when too many deliveries wait ([`Pending`]).
pub const COMMAND_BUSY_TEXT: &str =
    "Too much is going on right now: nothing was asked. Try again in a moment.";
/// How long a thread's queue task waits for another delivery before it ends.
pub(crate) const QUEUE_IDLE: Duration = Duration::from_secs(30);

/// A bounded set of recently seen delivery keys (oldest forgotten first).
pub type Seen = frogbot_channel::receive::Recent;
pub use frogbot_channel::receive::Pending;

/// Why a delivery was not processed.
#[derive(Debug)]
enum Failure {
    /// A store or engine failure: the delivery should be retried.
    Retry(String),
    /// Too many deliveries wait or run ([`Pending`]): refused, Slack sends it again later.
    Busy,
}

impl Failure {
    /// The engine's failure at `what`, logged as an error: the delivery should be retried.
    fn retry(what: &'static str) -> impl Fn(frogbot_channel::EngineError) -> Failure + Copy {
        move |e| {
            error!(error = %e, "{what}");
            Failure::Retry(e.to_string())
        }
    }
}

/// The HTTP routes: `POST /channels/slack/events`, `POST /channels/slack/interactivity` and
/// `POST /channels/slack/commands`.
pub(crate) fn router(adapter: SlackAdapter, engine: EngineHandle) -> Router {
    let rx = Receiver { adapter, engine };
    Router::new()
        .route(EVENTS_PATH, post(events))
        .route(INTERACTIVITY_PATH, post(interactivity))
        .route(COMMANDS_PATH, post(commands))
        .with_state(rx)
}

/// Starts Socket Mode (`apps.connections.open`, then the WebSocket); stops when `shutdown` is
/// cancelled.
pub(crate) fn spawn_socket_mode(
    adapter: SlackAdapter,
    engine: EngineHandle,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, Error> {
    let app_token = adapter
        .inner
        .config
        .app_token
        .clone()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Error::Api {
            method: "apps.connections.open",
            message: "Socket Mode needs an app-level token".into(),
        })?;
    let env = Arc::new(
        SlackClientEventsListenerEnvironment::new(adapter.inner.client.clone())
            .with_error_handler(socket_error),
    );
    let rx = Receiver { adapter, engine };
    // slack-morphism keeps the connections (open, reconnect, ping); the envelopes are read
    // here as JSON, not through its typed callbacks: those re-read a payload into types that
    // drop fields HTTP mode sees (a click's `container.thread_ts`, its conversation).
    let manager = env
        .client
        .http_api
        .connector
        .new_clients_manager(env.clone());
    let envelopes = Arc::new(SocketEnvelopes {
        rx,
        manager: Arc::downgrade(&manager),
    });
    let token = SlackApiToken::new(SlackApiTokenValue(app_token));
    Ok(tokio::spawn(async move {
        if let Err(e) = manager
            .register_new_token(&SlackClientSocketModeConfig::new(), token, envelopes)
            .await
        {
            error!(error = %e, "Slack Socket Mode could not register");
            return;
        }
        manager.start().await;
        info!("Slack Socket Mode started");
        shutdown.cancelled().await;
        manager.shutdown().await;
    }))
}

/// The receiving side: the adapter and the engine it feeds.
#[derive(Clone)]
struct Receiver {
    adapter: SlackAdapter,
    engine: EngineHandle,
}

fn status(code: StatusCode, msg: &'static str) -> Response {
    (code, msg).into_response()
}

impl Receiver {
    fn inner(&self) -> &Inner {
        &self.adapter.inner
    }

    /// Checks the signature headers against the raw body.
    fn verify(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), Error> {
        let h = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let ts = h(TIMESTAMP_HEADER).ok_or(Error::MalformedTimestamp)?;
        let sig = h(SIGNATURE_HEADER).ok_or(Error::MalformedSignature)?;
        let secret = self.inner().config.signing_secret.as_deref().unwrap_or("");
        verify(secret, ts, sig, body, now_millis() / 1000)
    }

    /// [`verify`](Self::verify) of a request to `path`: the `401` a failed check is answered
    /// with (logged), `None` for a signed request.
    fn refused(&self, headers: &HeaderMap, body: &[u8], path: &str) -> Option<Response> {
        let e = self.verify(headers, body).err()?;
        warn!(error = %e, path, "Slack request refused: signature check failed");
        Some(status(StatusCode::UNAUTHORIZED, "invalid signature"))
    }

    /// Queues `work` in the queue of `thread` and waits for it up to the ack deadline. `Ok` when
    /// it is done or still queued or running at the deadline (it carries on); `Err` when it failed
    /// in a way a retry may fix (then `key` is forgotten).
    async fn process<F>(&self, key: String, thread: &str, work: F) -> Result<(), Failure>
    where
        F: Future<Output = Result<(), Failure>> + Send + 'static,
    {
        let Some(place) = self.inner().pending.take() else {
            self.inner().seen.forget(&key);
            warn!(%key, max = self.inner().pending.max(), "too many Slack deliveries pending; refused, Slack sends it again later");
            return Err(Failure::Busy);
        };
        let (done, result) = oneshot::channel();
        self.inner().queues.push(
            thread,
            Box::pin(async move {
                let _place = place;
                let _ = done.send(work.await);
            }),
        );
        match tokio::time::timeout(self.inner().config.ack_deadline, result).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(f))) => {
                self.inner().seen.forget(&key);
                Err(f)
            }
            Ok(Err(_)) => {
                error!(%key, "Slack delivery task failed");
                self.inner().seen.forget(&key);
                Err(Failure::Retry("the delivery task failed".into()))
            }
            Err(_) => {
                info!(%key, "Slack delivery still processing at the ack deadline; acknowledged");
                Ok(())
            }
        }
    }

    /// An Events API body (`event_callback`): dedup by `event_id`, then the message (dedup by
    /// its id: a mention arrives twice), in its thread's queue.
    async fn on_event_callback(&self, body: Value, retry: Option<&str>) -> Result<(), Failure> {
        let event_id = body["event_id"].as_str().unwrap_or_default().to_string();
        let kind = body
            .pointer("/event/type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let key = format!("event:{event_id}");
        if !event_id.is_empty() && !self.inner().seen.first(&key) {
            info!(%event_id, retry = retry.unwrap_or("-"), "duplicate Slack event delivery ignored");
            return Ok(());
        }
        if retry.is_some() {
            info!(%event_id, retry, "Slack retry of an event not seen by this process");
        }
        if kind == "assistant_thread_started" {
            // `{"assistant_thread": {"user_id", "channel_id", "thread_ts", "context": {…}}}`
            let t = body.pointer("/event/assistant_thread");
            let field = |k: &str| t.and_then(|t| t[k].as_str()).unwrap_or_default();
            let (channel, ts) = (field("channel_id"), field("thread_ts"));
            if !channel.is_empty() && !ts.is_empty() {
                let thread = thread_id(channel, ts);
                info!(%thread, "Slack assistant thread started");
                self.inner().threads.assistant_thread(&thread);
                let (user, team) = (field("user_id"), body["team_id"].as_str().unwrap_or(""));
                if !user.is_empty() {
                    self.inner().threads.spoke(&thread, user, team);
                }
            }
            return Ok(());
        }
        if kind != "message" && kind != "app_mention" {
            debug!(%event_id, %kind, "Slack event type not handled");
            return Ok(());
        }
        let bot = &self.inner().bot.user_id;
        let span = info_span!("slack_event", %event_id, %kind, chat_id = tracing::field::Empty);
        let rx = self.clone();
        if let Some(change) = changed_from_push_json(&body, bot) {
            // In the thread's queue, after the message it changes.
            let thread = change.thread.clone();
            let work = async move { rx.on_changed(change).await };
            return self.process(key, &thread, work.instrument(span)).await;
        }
        let incoming = match message_from_push_json(&body, bot) {
            Ok(Some(m)) => m,
            Ok(None) => {
                debug!("Slack message ignored (the bot's own, an edit, or another subtype)");
                return Ok(());
            }
            Err(e) => {
                warn!(error = %e, "Slack event could not be read; ignored");
                return Ok(());
            }
        };
        // A mention arrives twice (`app_mention` and `message.channels`) with one ts.
        let msg_key = format!("msg:{}", incoming.message.id);
        if !self.inner().seen.first(&msg_key) {
            debug!(message = %incoming.message.id, "Slack message already handled");
            return Ok(());
        }
        let thread = incoming.thread.clone();
        let work = async move { rx.route_message(body, incoming).await };
        let out = self.process(key, &thread, work.instrument(span)).await;
        if out.is_err() {
            self.inner().seen.forget(&msg_key);
        }
        out
    }

    /// A person's edit or deletion of their message: a message still queued runs with the new
    /// text, or not at all; one that already ran is left as it was.
    async fn on_changed(&self, change: ChangedMessage) -> Result<(), Failure> {
        let message = &change.message_id;
        let outcome = self
            .engine
            .changed(PLATFORM, &change.thread, message, change.text)
            .await
            .map_err(Failure::retry("Slack edit or deletion failed"))?;
        debug!(%message, ?outcome, "Slack edit or deletion handled");
        Ok(())
    }

    /// A new message: to its thread's chat when it is a DM, a mention, or a reply in a thread
    /// FrogBot is part of.
    async fn route_message(&self, body: Value, incoming: IncomingMessage) -> Result<(), Failure> {
        let dm = body.pointer("/event/channel_type").and_then(Value::as_str) == Some("im");
        let chat = channel_chat_id(PLATFORM, &incoming.thread);
        tracing::Span::current().record("chat_id", tracing::field::display(&chat));
        let team = body["team_id"]
            .as_str()
            .or_else(|| body.pointer("/event/team").and_then(Value::as_str))
            .unwrap_or_default();
        if !(dm || incoming.mentioned) {
            // A plain channel message: only replies in a thread FrogBot is part of.
            let known = incoming.in_thread
                && self
                    .engine
                    .thread_known(PLATFORM, &incoming.thread)
                    .await
                    .map_err(Failure::retry(
                        "Slack message: the thread could not be looked up",
                    ))?;
            if !known {
                debug!(thread = %incoming.thread, "Slack message outside a FrogBot thread ignored");
                return Ok(());
            }
        }
        self.inner()
            .threads
            .spoke(&incoming.thread, &incoming.message.author.id, team);
        self.send(incoming).await
    }

    async fn send(&self, mut incoming: IncomingMessage) -> Result<(), Failure> {
        without_bot_mention(&mut incoming.message, &self.inner().bot.user_id);
        let user = incoming.message.author.id.clone();
        let out = self
            .engine
            .message(PLATFORM, &incoming.thread, incoming.message)
            .await
            .map_err(Failure::retry(
                "Slack message could not be handed to the engine",
            ))?;
        match out {
            MessageOutcome::Denied => {
                warn!(%user, thread = %incoming.thread, "Slack user not allowed; message refused");
                self.tell(
                    &incoming.thread,
                    &user,
                    NOT_ALLOWED_TEXT,
                    "they are not allowed",
                )
                .await;
            }
            MessageOutcome::Consumed(o) => {
                info!(outcome = ?o, "Slack thread reply taken by a question");
            }
            other => info!(outcome = ?other, "Slack message sent to its chat"),
        }
        Ok(())
    }

    /// A slash command (HTTP or Socket Mode). `Some` is the body of the acknowledgement: an
    /// ephemeral answer (`{"response_type": "ephemeral", "text": …}`) only the person sees.
    ///
    /// `ask @person QUESTION [| OPTION…]` starts a new thread in the conversation the command was
    /// typed in ([`ChannelOutbox::ask_thread`](frogbot_channel::ChannelOutbox::ask_thread): its
    /// root says who asks whom, keyed by the command's `trigger_id`, so a repeat finds the same
    /// thread), then hands the engine the thread message `/ask <@U…> QUESTION…` by the person who
    /// typed the command, in the thread's queue like any message of it; the engine asks the
    /// person named. Answered within the ack deadline: an empty `200` once asked, else what to
    /// tell the person (not let in, the thread could not be started); what is known only later
    /// is told with `chat.postEphemeral`. An `ask` naming nobody, and anything else, is answered
    /// at once ([`ASK_USAGE_TEXT`](frogbot_channel::ASK_USAGE_TEXT), [`command_help`]).
    async fn on_command(&self, cmd: SlashCommand) -> Result<Option<Value>, Failure> {
        let tell = |text: &str| Some(json!({"response_type": "ephemeral", "text": text}));
        let bot = self.inner().bot.user_id.clone();
        let (args, to) = match read_slash_text(&cmd.text, &bot) {
            SlashText::Ask { args, to } => (args.to_owned(), to),
            SlashText::AskUsage => return Ok(tell(frogbot_channel::ASK_USAGE_TEXT)),
            SlashText::Other => return Ok(tell(&command_help(&cmd.command))),
        };
        let key = format!("cmd:{}", cmd.trigger_id);
        if !self.inner().seen.first(&key) {
            info!(trigger = %cmd.trigger_id, "duplicate Slack slash command ignored");
            return Ok(None);
        }
        let author = cmd.author();
        if !self.lets_in(&author, &cmd.channel_id).await {
            // Nothing posted: a person the channel does not let in starts no thread.
            warn!(user = %author.id, "Slack user not allowed; slash command refused");
            return Ok(tell(NOT_ALLOWED_TEXT));
        }
        if !self.lets_in(&to, &cmd.channel_id).await {
            // As the engine would say it, before a thread is started for nothing.
            let name = to.name.clone().unwrap_or_else(|| to.id.clone());
            return Ok(tell(&format!(
                "{name} is not let in to answer here, so nothing was asked."
            )));
        }
        let Some(place) = self.inner().pending.take() else {
            self.inner().seen.forget(&key);
            warn!(
                max = self.inner().pending.max(),
                "too many Slack deliveries pending; slash command refused"
            );
            return Ok(tell(COMMAND_BUSY_TEXT));
        };
        let (done, answer) = oneshot::channel::<Option<String>>();
        let rx = self.clone();
        let span =
            info_span!("slack_command", command = %cmd.command, chat_id = tracing::field::Empty);
        tokio::spawn(
            async move {
                let _place = place;
                let said = rx.ask_from_command(&cmd, &args, &author, &to).await;
                if said.is_some() {
                    rx.inner().seen.forget(&key);
                }
                // Past the ack deadline the acknowledgement has gone: told privately instead.
                if let Err(Some(text)) = done.send(said) {
                    let api = rx.inner().api();
                    if let Err(e) = api
                        .post_ephemeral(&cmd.channel_id, &cmd.user_id, None, &text)
                        .await
                    {
                        warn!(error = %e, "could not tell a Slack user what came of their slash command");
                    }
                }
            }
            .instrument(span),
        );
        match tokio::time::timeout(self.inner().config.ack_deadline, answer).await {
            Ok(Ok(said)) => Ok(said.as_deref().and_then(tell)),
            Ok(Err(_)) => {
                error!("Slack slash command task failed");
                Ok(tell("Something went wrong: nothing was asked. Try again."))
            }
            Err(_) => {
                info!("Slack slash command still processing at the ack deadline; acknowledged");
                Ok(None)
            }
        }
    }

    /// Whether the channel lets `user` in (its identity map and allow list, as the engine
    /// applies them), asked before a slash command starts a thread; the engine decides again.
    async fn lets_in(&self, user: &PlatformUser, conversation: &str) -> bool {
        let channel = frogbot_channel::Adapter::channel(&self.adapter);
        let (identity, access) = (&*channel.identity, &*channel.access);
        // A failing check is the engine's to report.
        frogbot_channel::receive::lets_in(identity, access, PLATFORM, user, conversation)
            .await
            .unwrap_or(true)
    }

    /// The `ask` of a slash command: a new thread, then the thread message `/ask …` in it.
    /// `Some` is what to tell the person who typed the command.
    async fn ask_from_command(
        &self,
        cmd: &SlashCommand,
        args: &str,
        author: &PlatformUser,
        to: &PlatformUser,
    ) -> Option<String> {
        let name = |u: &PlatformUser| u.name.clone().unwrap_or_else(|| u.id.clone());
        let root = format!("{} asks {}", name(author), name(to));
        let key = format!("slash:{}", cmd.trigger_id);
        let ask = frogbot_channel::outbox::AskTo {
            place: frogbot_channel::AskPlace::Thread(&cmd.channel_id),
            text: &root,
            key: &key,
        };
        let thread = match frogbot_channel::ChannelOutbox::ask_thread(&self.adapter, ask).await {
            Ok(t) => t,
            Err(e) => {
                warn!(channel = %cmd.channel_id, error = %e, "Slack slash command: no thread could be started");
                return Some(format!(
                    "Nothing was asked: I could not start a thread here ({e}). Invite me to \
                         this conversation, or ask in one I am in."
                ));
            }
        };
        tracing::Span::current().record(
            "chat_id",
            tracing::field::display(channel_chat_id(PLATFORM, &thread)),
        );
        self.inner()
            .threads
            .spoke(&thread, &author.id, &cmd.team_id);
        let message = slash_ask_message(cmd, args, &thread, &self.inner().bot.user_id);
        // In the thread's queue: ordered with a reply someone writes in the new thread.
        let (done, result) = oneshot::channel();
        let engine = self.engine.clone();
        let t = thread.clone();
        self.inner().queues.push(
            &thread,
            Box::pin(async move {
                let _ = done.send(engine.message(PLATFORM, &t, message).await);
            }),
        );
        match result.await {
            Ok(Ok(MessageOutcome::Denied)) => {
                warn!(user = %author.id, %thread, "Slack user not allowed; slash command ask refused");
                Some(NOT_ALLOWED_TEXT.to_owned())
            }
            Ok(Ok(out)) => {
                info!(outcome = ?out, %thread, "Slack slash command ask sent to its thread");
                None
            }
            Ok(Err(e)) => {
                error!(error = %e, "Slack slash command ask could not be handed to the engine");
                Some("Something went wrong: nothing was asked. Try again.".to_owned())
            }
            Err(_) => Some("Something went wrong: nothing was asked. Try again.".to_owned()),
        }
    }

    /// An interaction payload (`block_actions`, `view_submission`, …). `Some` is the body of
    /// the acknowledgement (a modal submission that does not validate: `response_action:
    /// errors`, which keeps the modal open).
    async fn on_interaction(&self, payload: Value) -> Result<Option<Value>, Failure> {
        let kind = payload["type"].as_str().unwrap_or("").to_string();
        let at = |p: &str| payload.pointer(p).and_then(Value::as_str).unwrap_or("");
        let key = match at("/trigger_id") {
            // No trigger id: fall back to the action's own timestamp or the view's hash.
            "" => format!(
                "ia:{kind}:{}:{}",
                at("/actions/0/action_ts"),
                at("/view/hash")
            ),
            trigger => format!("ia:{trigger}"),
        };
        if !self.inner().seen.first(&key) {
            info!(%kind, "duplicate Slack interaction delivery ignored");
            return Ok(None);
        }
        let interaction = match interaction_from_payload(&payload) {
            Ok(Some(i)) => i,
            Ok(None) => {
                debug!(%kind, "Slack interaction kind not handled");
                return Ok(None);
            }
            Err(e) => {
                warn!(%kind, error = %e, "Slack interaction payload could not be read; ignored");
                return Ok(None);
            }
        };
        if let Interaction::ModalSubmit { event } = &interaction
            && let Some((block, reason)) = self.modal_error(&payload, &event.values).await
        {
            // Answered within the acknowledgement: the modal stays open with what was typed,
            // the field saying why; nothing reaches the engine. A corrected submission is new.
            self.inner().seen.forget(&key);
            info!(%block, %reason, "Slack modal submission refused; the modal stays open");
            return Ok(Some(json!({
                "response_action": "errors",
                "errors": { block: reason },
            })));
        }
        let thread = thread_of_payload(&payload);
        if let (Interaction::Action { event }, Some(thread)) = (&interaction, thread.as_deref())
            && event.action_id == STOP_ACTION_ID
        {
            // Not queued behind the thread's deliveries, and never a question's answer.
            let span = info_span!("slack_stop", %thread);
            return self
                .stop_click(thread, &event.user)
                .instrument(span)
                .await
                .map(|()| None);
        }
        if let Interaction::Action { event } = &interaction
            && let Some(click) = crate::convert::event_click(event)
        {
            // An agent message's event button: sent to the agent's inbox, never an answer.
            let thread = thread.unwrap_or_else(|| click.message_id.clone());
            let span = info_span!("slack_event", %thread);
            return self
                .event_click(&thread, click)
                .instrument(span)
                .await
                .map(|()| None);
        }
        let queue = queue_of_payload(&payload, thread.as_deref());
        let rx = self.clone();
        let span = info_span!(
            "slack_interaction",
            %kind,
            chat_id = tracing::field::Empty,
            question_id = tracing::field::Empty
        );
        self.process(
            key,
            &queue,
            async move { rx.interact(thread, interaction).await }.instrument(span),
        )
        .await
        .map(|()| None)
    }

    /// Why a modal submission of a question set does not answer it (the field's `block_id` and
    /// the reason, [`crate::questions::modal_field_error`]), read against the question the
    /// modal's form locator names while it is open. `None` when it answers, or when the question
    /// is not found or not open (the engine then answers it as it does any submission).
    async fn modal_error(
        &self,
        payload: &Value,
        values: &serde_json::Map<String, Value>,
    ) -> Option<(String, String)> {
        if payload.pointer("/view/callback_id").and_then(Value::as_str)
            != Some(crate::ids::MODAL_CALLBACK_ID)
        {
            return None;
        }
        let locator = payload
            .pointer("/view/private_metadata")
            .and_then(Value::as_str)
            .and_then(decode_question_modal_metadata)?;
        let target = match self.engine.form_open(PLATFORM, &locator.message_id).await {
            Ok(t) => t?,
            Err(e) => {
                warn!(error = %e, "Slack modal submission: the question could not be looked up");
                return None;
            }
        };
        crate::questions::modal_field_error(&target.call.input, values)
    }

    async fn interact(
        &self,
        thread: Option<String>,
        interaction: Interaction,
    ) -> Result<(), Failure> {
        if let Interaction::Action { event } = &interaction
            && is_open_form_action(&event.action_id)
            && self.open_form(event).await?
        {
            return Ok(());
        }
        // What the log names of a click no question took (the interaction moves into the engine).
        let click = match &interaction {
            Interaction::Action { event } => {
                Some((event.action_id.clone(), event.message_id.clone()))
            }
            _ => None,
        };
        let out = self
            .engine
            .interaction(PLATFORM, thread.as_deref(), interaction)
            .await
            .map_err(Failure::retry("Slack interaction could not be handled"))?;
        match (&out, click) {
            (InteractionOutcome::Ignored, Some((action_id, message))) => warn!(
                %action_id,
                %message,
                "Slack action belongs to no question; ignored"
            ),
            (InteractionOutcome::Ignored, None) => {
                warn!("Slack interaction belongs to no question; ignored")
            }
            _ => info!(outcome = ?out, "Slack interaction handled"),
        }
        Ok(())
    }

    /// A click on an agent message's event button: the event goes to the agent's inbox
    /// ([`EngineHandle::event`]); nothing is answered. A person who may not write in the chat is
    /// told privately.
    async fn event_click(
        &self,
        thread: &str,
        click: frogbot_model::EventClick,
    ) -> Result<(), Failure> {
        let who = click.user.clone();
        let out = self
            .engine
            .event(PLATFORM, thread, click)
            .await
            .map_err(Failure::retry(
                "Slack event button click could not be handled",
            ))?;
        info!(outcome = ?out, user = %who.id, "Slack event button click");
        if let Some(text) = out.notice() {
            self.tell(thread, &who.id, text, "they are not allowed")
                .await;
        }
        Ok(())
    }

    /// A click on a streamed reply's Stop button: stops the thread's turn when the person drives
    /// it; anyone else is told privately that they cannot.
    async fn stop_click(&self, thread: &str, who: &PlatformUser) -> Result<(), Failure> {
        let out = self
            .engine
            .stop(PLATFORM, thread, who)
            .await
            .map_err(Failure::retry("Slack Stop click could not be handled"))?;
        info!(outcome = ?out, user = %who.id, "Slack Stop click");
        if let Some(text) = out.notice() {
            self.tell(thread, &who.id, text, "they cannot stop the turn")
                .await;
        }
        Ok(())
    }

    /// Tells `user` `text` privately (`chat.postEphemeral`) in the thread `thread`
    /// (`channel:thread_ts`); a failure is logged (`what` they were to be told), not returned.
    async fn tell(&self, thread: &str, user: &str, text: &str, what: &str) {
        if let Ok((channel, ts)) = split_id(thread)
            && let Err(e) = self
                .inner()
                .api()
                .post_ephemeral(channel, user, Some(ts), text)
                .await
        {
            warn!(error = %e, "could not tell a Slack user {what}");
        }
    }

    /// The "Other…" button: opens the question set's modal while the clicked message is the
    /// question's current, open one. `false` when it is not (the engine then answers `stale`).
    async fn open_form(&self, event: &frogbot_model::ActionEvent) -> Result<bool, Failure> {
        let retry = Failure::retry("Slack \"Other…\" click: the form could not be opened");
        let Some(target) = self
            .engine
            .form_open(PLATFORM, &event.message_id)
            .await
            .map_err(retry)?
        else {
            return Ok(false);
        };
        tracing::Span::current().record("chat_id", tracing::field::display(&target.chat_id));
        tracing::Span::current().record("question_id", target.call.tool_call_id.as_str());
        let revision = ActionRef::decode(&event.action_id).map(|a| a.revision);
        if revision != Some(target.record.revision) {
            return Ok(false);
        }
        let Some(trigger) = event.trigger_id.as_deref() else {
            return Ok(false);
        };
        match self
            .inner()
            .questions
            .open_other(&target.thread, &target.call, &target.record, trigger)
            .await
        {
            Ok(()) => info!("Slack question modal opened"),
            Err(e @ crate::Error::TooLarge(_)) => {
                // Never silent: the person is told to answer by typed replies instead.
                warn!(error = %e, "the Slack question modal is too large; typed replies answer it");
                let text = crate::render::TOO_LARGE_FOR_A_FORM;
                self.tell(
                    &target.thread.id,
                    &event.user.id,
                    text,
                    "the form is too large",
                )
                .await;
            }
            Err(e) => warn!(error = %e, "could not open the Slack question modal"),
        }
        Ok(true)
    }
}

/// The thread of an interaction's message (`channel:thread_ts`), when the payload says (HTTP and
/// Socket Mode payloads alike; without it the engine routes by message id alone).
fn thread_of_payload(p: &Value) -> Option<String> {
    let channel = p
        .pointer("/container/channel_id")
        .or_else(|| p.pointer("/channel/id"))
        .and_then(Value::as_str)?;
    let ts = p
        .pointer("/container/thread_ts")
        .or_else(|| p.pointer("/message/thread_ts"))
        .and_then(Value::as_str)?;
    Some(thread_id(channel, ts))
}

/// The queue a click or a submission goes into: its thread when the payload says (a modal's
/// form locator says for a submission), else its message.
fn queue_of_payload(p: &Value, thread: Option<&str>) -> String {
    if let Some(t) = thread {
        return t.to_owned();
    }
    if let Some(locator) = p
        .pointer("/view/private_metadata")
        .and_then(Value::as_str)
        .and_then(decode_question_modal_metadata)
    {
        return locator.thread_id;
    }
    let channel = p
        .pointer("/container/channel_id")
        .or_else(|| p.pointer("/channel/id"))
        .and_then(Value::as_str);
    let ts = p.pointer("/container/message_ts").and_then(Value::as_str);
    match (channel, ts) {
        (Some(c), Some(ts)) => message_id(c, ts),
        _ => "slack:interactions".to_owned(),
    }
}

fn retry_num(headers: &HeaderMap) -> Option<String> {
    headers
        .get(RETRY_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

async fn events(State(rx): State<Receiver>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refused) = rx.refused(&headers, &body, EVENTS_PATH) {
        return refused;
    }
    let value: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) | Err(_) => {
            warn!(
                path = EVENTS_PATH,
                "Slack event body is not a JSON object; ignored"
            );
            return status(StatusCode::BAD_REQUEST, "malformed JSON");
        }
    };
    match value["type"].as_str() {
        Some("url_verification") => {
            info!("Slack url_verification answered");
            axum::Json(json!({"challenge": value["challenge"]})).into_response()
        }
        Some("event_callback") => {
            let retry = retry_num(&headers);
            let handled = rx.on_event_callback(value, retry.as_deref()).await;
            answer(handled.map(|()| None))
        }
        other => {
            debug!(kind = ?other, "Slack push type not handled; acknowledged");
            StatusCode::OK.into_response()
        }
    }
}

async fn interactivity(State(rx): State<Receiver>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refused) = rx.refused(&headers, &body, INTERACTIVITY_PATH) {
        return refused;
    }
    let payload = match form_text(&body).and_then(payload_from_form) {
        Ok(v @ Value::Object(_)) => v,
        other => {
            let error = other.err().map(|e| e.to_string());
            warn!(
                path = INTERACTIVITY_PATH,
                ?error,
                "Slack interaction payload unreadable or not a JSON object; ignored"
            );
            return status(StatusCode::BAD_REQUEST, "malformed payload");
        }
    };
    if let Some(n) = retry_num(&headers) {
        debug!(retry = %n, "Slack interactivity retry");
    }
    // An empty 200 acknowledges a click and closes a submitted modal; a modal submission's
    // field errors keep the modal open.
    answer(rx.on_interaction(payload).await)
}

async fn commands(State(rx): State<Receiver>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refused) = rx.refused(&headers, &body, COMMANDS_PATH) {
        return refused;
    }
    let cmd = match form_text(&body).and_then(command_from_form) {
        Ok(c) => c,
        Err(e) => {
            warn!(path = COMMANDS_PATH, error = %e, "Slack slash command unreadable; ignored");
            return status(StatusCode::BAD_REQUEST, "malformed slash command");
        }
    };
    // An empty 200 acknowledges: nothing shown to the person but what follows in Slack.
    answer(rx.on_command(cmd).await)
}

/// A form-encoded body as text.
fn form_text(body: &[u8]) -> Result<&str, Error> {
    std::str::from_utf8(body).map_err(|e| Error::Payload(e.to_string()))
}

/// The answer to a handled request: an empty `200`, or `200` with the JSON body the handling
/// gave; a failure is `500` (Slack retries) or, too busy, `503`.
fn answer(handled: Result<Option<Value>, Failure>) -> Response {
    match handled {
        Ok(None) => StatusCode::OK.into_response(),
        Ok(Some(body)) => axum::Json(body).into_response(),
        Err(Failure::Retry(msg)) => {
            // Logged once, where it failed; here only what Slack is told.
            debug!(error = %msg, "Slack delivery failed; answering 500 so Slack retries");
            status(StatusCode::INTERNAL_SERVER_ERROR, "retry later")
        }
        Err(Failure::Busy) => status(StatusCode::SERVICE_UNAVAILABLE, "busy, retry later"),
    }
}

// ---- Socket Mode ---------------------------------------------------------------------------

/// Reads Socket Mode envelopes (`hello`, `disconnect`, `events_api`, `interactive`,
/// `slash_commands`, …) as JSON
/// and hands their payloads, unchanged, to the handling HTTP mode uses. A delivery is
/// acknowledged (`{"envelope_id": …}`) once handled, or when it can never be handled; a store or
/// engine failure leaves it unacknowledged, so Slack sends it again.
struct SocketEnvelopes {
    rx: Receiver,
    manager: Weak<dyn SlackSocketModeClientsManager + Send + Sync>,
}

impl SocketEnvelopes {
    async fn restart(&self, client_id: &SlackSocketModeWssClientId) {
        if let Some(manager) = self.manager.upgrade() {
            manager.restart_client(client_id).await;
        }
    }
}

/// What a Socket Mode envelope asks for.
#[derive(Debug, PartialEq)]
enum Envelope {
    /// Nothing to do or to acknowledge (`hello`, a frame that is no envelope).
    Nothing,
    /// Reconnect (`disconnect`).
    Reconnect,
    /// A delivery to acknowledge with this id once its payload is handled.
    Deliver {
        id: String,
        kind: String,
        payload: Value,
    },
}

fn read_envelope(frame: &str) -> Envelope {
    let Ok(mut envelope) = serde_json::from_str::<Value>(frame) else {
        warn!("Socket Mode frame that is not JSON ignored");
        return Envelope::Nothing;
    };
    let kind = envelope["type"].as_str().unwrap_or_default().to_owned();
    match (kind.as_str(), envelope["envelope_id"].as_str()) {
        ("disconnect", _) => Envelope::Reconnect,
        (_, Some(id)) => Envelope::Deliver {
            id: id.to_owned(),
            payload: envelope["payload"].take(),
            kind,
        },
        _ => Envelope::Nothing,
    }
}

#[async_trait]
impl SlackSocketModeClientListener for SocketEnvelopes {
    async fn on_message(
        &self,
        client_id: &SlackSocketModeWssClientId,
        message_body: String,
    ) -> Option<String> {
        let (id, kind, payload) = match read_envelope(&message_body) {
            Envelope::Nothing => return None,
            Envelope::Reconnect => {
                self.restart(client_id).await;
                return None;
            }
            Envelope::Deliver { id, kind, payload } => (id, kind, payload),
        };
        let handled = match kind.as_str() {
            "events_api" => self
                .rx
                .on_event_callback(payload, None)
                .await
                .map(|()| None),
            "interactive" => self.rx.on_interaction(payload).await,
            "slash_commands" => match command_from_json(&payload) {
                Ok(cmd) => self.rx.on_command(cmd).await,
                Err(e) => {
                    warn!(error = %e, "Socket Mode slash command unreadable; acknowledged");
                    Ok(None)
                }
            },
            other => {
                debug!(
                    kind = other,
                    "Socket Mode envelope of a kind FrogBot does not take"
                );
                Ok(None)
            }
        };
        match handled {
            Ok(None) => Some(json!({ "envelope_id": id }).to_string()),
            // The acknowledgement carries the response (a modal's field errors).
            Ok(Some(body)) => Some(json!({ "envelope_id": id, "payload": body }).to_string()),
            Err(f) => {
                debug!(failure = ?f, "Slack Socket Mode delivery not acknowledged (Slack redelivers)");
                None
            }
        }
    }

    async fn on_error(&self, error: BoxError) {
        warn!(error = %error, "Slack Socket Mode connection error");
    }

    async fn on_disconnect(&self, client_id: &SlackSocketModeWssClientId) {
        self.restart(client_id).await;
    }
}

/// Errors slack-morphism's connection manager reports (deliveries are handled, and their
/// failures logged, by [`SocketEnvelopes`]).
fn socket_error(
    err: BoxError,
    _client: Arc<SlackHyperClient>,
    _state: SlackClientEventsUserState,
) -> axum::http::StatusCode {
    warn!(error = %err, "Slack Socket Mode error");
    axum::http::StatusCode::INTERNAL_SERVER_ERROR
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_mode_envelopes_are_read_as_json() {
        assert_eq!(
            read_envelope(r#"{"type": "hello", "num_connections": 1}"#),
            Envelope::Nothing
        );
        assert_eq!(read_envelope("{not json"), Envelope::Nothing);
        assert_eq!(
            read_envelope(r#"{"type": "disconnect", "reason": "refresh_requested"}"#),
            Envelope::Reconnect
        );
        // The payload is kept as Slack sent it, fields slack-morphism's types lack included.
        let click = json!({"envelope_id": "e1", "type": "interactive", "payload": {
            "type": "block_actions",
            "container": {"type": "message", "message_ts": "1.2", "channel_id": "C1", "thread_ts": "1.1"}
        }});
        let Envelope::Deliver { id, kind, payload } = read_envelope(&click.to_string()) else {
            panic!("a delivery")
        };
        assert_eq!((id.as_str(), kind.as_str()), ("e1", "interactive"));
        assert_eq!(payload, click["payload"]);
        assert_eq!(thread_of_payload(&payload).as_deref(), Some("C1:1.1"));
    }
}
