//! Channels: messages arriving in a platform thread, who sent them, and the outbox that posts the
//! agent's replies back to the thread.
//!
//! The channel layer sits on top: it hands thread replies to the question engine first (a reply
//! may answer a question), sends the rest to the turn engine, and listens to the turn engine's
//! turn ends to post replies and draw questions.

use async_trait::async_trait;
use futures::future::BoxFuture;
use std::sync::Arc;
use tokio::sync::mpsc;
use tracing::{debug, error, warn};

use super::questions::{InteractionOutcome, Questions};
use super::registry::ChannelOutbox;
use super::registry::{Registry, thread_of};
use super::turn::{EndWhy, SendMessage, SendResult, Sent, StopOutcome, TurnListener, Turns};
use crate::error::{Error, Result};
use crate::model::{
    Ack, ChannelRef, ChatId, ChatInfo, Interaction, Thread, ThreadMessage, TurnState, UiMessage,
};
use crate::store::ChatRow;

/// The chat id a channel thread's chat is created with: stable, so every process maps a thread to
/// the same chat, and in the channel chats' id space (it starts with
/// [`crate::model::CHANNEL_CHAT_PREFIX`]), which the HTTP API never creates, so no web caller can
/// take it first. Chats are looked up by their channel thread, so chats created before this id
/// space existed stay in use.
pub fn channel_chat_id(platform: &str, thread: &str) -> ChatId {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{platform}\u{0}{thread}").as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    let platform: String = platform
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(32)
        .collect();
    ChatId::new(format!(
        "{}{platform}-{hex}",
        crate::model::CHANNEL_CHAT_PREFIX
    ))
    .expect("the prefix, alphanumerics, a dash and hex")
}

/// The stored id of a channel message: the platform's message id, prefixed with the platform.
pub fn channel_message_id(platform: &str, platform_message_id: &str) -> String {
    format!("{platform}-{platform_message_id}")
}

/// What happened to a channel message.
#[derive(Debug)]
#[non_exhaustive]
pub enum ChannelMessageOutcome {
    /// It answered (or was otherwise consumed by) a question.
    Consumed(InteractionOutcome),
    /// The participant failed the access check.
    Denied,
    /// It started a turn or was queued.
    Sent(Sent),
    /// The same platform message was taken before (a repeated delivery); nothing was done.
    Duplicate,
    /// A `stop` from the driving user: the running turn stops.
    Stopped,
    /// A `stop` from someone else: refused, with a notice in the thread.
    StopRefused,
}

/// Whether a thread message asks to stop the running turn: `stop` or `/stop`.
pub fn is_stop_word(text: &str) -> bool {
    let t = text.trim();
    t.eq_ignore_ascii_case("stop") || t.eq_ignore_ascii_case("/stop")
}

/// Said to someone who is not driving the turn they try to stop.
pub const STOP_REFUSED_TEXT: &str = "Only the person who started this can stop it.";
/// Said once while messages wait behind a running turn.
pub const QUEUED_TEXT: &str = "Got it — I'll get to this once I've finished the reply above.";
/// Said once while messages wait behind an open question.
pub const QUEUED_BEHIND_QUESTION_TEXT: &str =
    "Got it — this waits until the question above is answered or skipped.";
/// Said when a turn ran out of steps.
pub const MAX_STEPS_TEXT: &str =
    "⚠️ I stopped after the most steps I may take in one reply. Send a message to continue.";

/// The notice of a failed turn, by its error code: what happened and that the person can retry
/// (the details are in the logs).
pub fn failure_text(code: &str) -> &'static str {
    match code {
        "interrupted" => "⚠️ My reply was interrupted. Send your message again to retry.",
        "selection-unavailable" => {
            "⚠️ The model chosen for this chat is not available any more. Send your message again once it is, or ask the admin."
        }
        _ => "⚠️ Something went wrong while I was answering. Send your message again to retry.",
    }
}

/// What a chat's thread shows of its running turn.
struct Progress {
    /// What the thread is shown, in the order it was decided: acknowledgements, notes and
    /// replies run one after the other on one task per chat.
    shows: mpsc::UnboundedSender<BoxFuture<'static, ()>>,
    /// Shows queued and not yet done: the entry (and its task) goes only when none is left, so
    /// two tasks never show one chat's thread at once.
    pending: Arc<std::sync::atomic::AtomicUsize>,
    /// The platform id of the message the running turn answers.
    current: Option<String>,
    /// The running turn's repeated `working` call (aborted when the turn ends).
    working: Option<tokio::task::AbortHandle>,
    /// A queued note was posted since the running turn started.
    queue_noted: bool,
}

impl Progress {
    fn new() -> Self {
        let (shows, mut rx) = mpsc::unbounded_channel::<BoxFuture<'static, ()>>();
        let pending = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let left = pending.clone();
        tokio::spawn(async move {
            while let Some(show) = rx.recv().await {
                show.await;
                left.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        Self {
            shows,
            pending,
            current: None,
            working: None,
            queue_noted: false,
        }
    }
}

/// The channel layer.
pub(crate) struct Channels {
    pub(crate) turns: Arc<Turns>,
    pub(crate) questions: Arc<Questions>,
    pub(crate) registry: Arc<Registry>,
    /// Per chat with a turn running or acknowledgements in flight: what its thread shows.
    progress: std::sync::Mutex<std::collections::HashMap<ChatId, Progress>>,
    /// Itself, for the shows that outlive a call.
    me: std::sync::OnceLock<std::sync::Weak<Channels>>,
}

impl Channels {
    pub(crate) fn new(
        turns: Arc<Turns>,
        questions: Arc<Questions>,
        registry: Arc<Registry>,
    ) -> Self {
        Self {
            turns,
            questions,
            registry,
            progress: Default::default(),
            me: std::sync::OnceLock::new(),
        }
    }

    /// Lets the shows that outlive a call reach this layer.
    pub(crate) fn set_self(self: &Arc<Self>) {
        let _ = self.me.set(Arc::downgrade(self));
    }

    fn outbox(&self, platform: &str) -> Option<Arc<dyn ChannelOutbox>> {
        self.registry.get(platform).and_then(|c| c.outbox.clone())
    }

    /// Queues `show` after everything `chat`'s thread is shown so far.
    fn show(&self, chat: &ChatId, show: impl Future<Output = ()> + Send + 'static) {
        let mut all = self.progress.lock().expect("progress");
        let p = all.entry(chat.clone()).or_insert_with(Progress::new);
        p.pending.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _ = p.shows.send(Box::pin(show));
    }

    /// Forgets `chat`'s progress once no turn runs (its task ends after what is queued).
    fn tidy(&self, chat: &ChatId) {
        let mut all = self.progress.lock().expect("progress");
        if all.get(chat).is_some_and(|p| {
            p.current.is_none()
                && p.working.is_none()
                && p.pending.load(std::sync::atomic::Ordering::SeqCst) == 0
        }) {
            all.remove(chat);
        }
    }

    /// Marks message `message_id` (the platform's id) with `ack`; a failure is logged.
    async fn ack(outbox: &dyn ChannelOutbox, thread: &Thread, message_id: &str, ack: Ack) {
        if let Err(e) = outbox.ack(thread, message_id, ack).await {
            warn!(thread = %thread.id, message_id, ?ack, error = %e, "acknowledging a message failed");
        }
    }

    /// Posts a short notice of the engine's in `thread`; a failure is logged.
    async fn notice(outbox: &dyn ChannelOutbox, thread: &Thread, text: &str) {
        let message = UiMessage {
            id: format!("notice_{}", uuid::Uuid::new_v4().simple()),
            role: crate::model::Role::Assistant,
            parts: vec![crate::model::MessagePart::text(text)],
            metadata: Default::default(),
        };
        if let Err(e) = outbox.post_reply(thread, &message).await {
            warn!(thread = %thread.id, error = %e, "posting a notice failed");
        }
    }
}

impl std::fmt::Debug for Channels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channels").finish_non_exhaustive()
    }
}

impl Channels {
    /// Posts the reply of a channel chat's turn to its thread (when this process runs the
    /// channel). A failed or interrupted turn says so in the thread instead of leaving it silent.
    async fn deliver_reply(&self, chat: &ChatRow, reply: &UiMessage, why: EndWhy) {
        let Some(thread) = thread_of(chat) else {
            return;
        };
        let Some(outbox) = self
            .registry
            .get(&thread.platform)
            .and_then(|c| c.outbox.clone())
        else {
            return;
        };
        let noted;
        let notice = match (&reply.metadata.error, why) {
            (Some(error), _) => Some(failure_text(&error.code)),
            (None, EndWhy::MaxSteps) => Some(MAX_STEPS_TEXT),
            _ => None,
        };
        let reply = match notice {
            Some(text) => {
                // What the turn produced stays; the notice follows it. Details are in the logs.
                let mut copy = reply.clone();
                let sep = if copy.text().trim().is_empty() {
                    ""
                } else {
                    "\n\n"
                };
                copy.parts
                    .push(crate::model::MessagePart::text(format!("{sep}{text}")));
                noted = copy;
                &noted
            }
            None => reply,
        };
        if let Err(e) = outbox.post_reply(&thread, reply).await {
            error!(chat_id = %chat.chat_id, error = %e, "posting the reply failed");
        }
    }

    /// Whether a channel thread has a chat (a thread the bot takes part in).
    pub(crate) async fn thread_known(&self, platform: &str, thread: &str) -> Result<bool> {
        Ok(self
            .turns
            .store
            .get_channel_chat(platform, thread)
            .await?
            .is_some())
    }

    /// Handles a message in a channel thread: a reply that answers a question is consumed; else,
    /// after the identity and access checks, it starts or continues the thread's chat (queued while
    /// a turn runs or a question waits). Questions whose render failed are posted again first.
    pub(crate) async fn channel_message(
        &self,
        platform: &str,
        thread: &str,
        message: ThreadMessage,
    ) -> Result<ChannelMessageOutcome> {
        let interaction = Interaction::Message {
            message: message.clone(),
        };
        let handled = self
            .questions
            .handle_interaction(platform, Some(thread), &interaction)
            .await?;
        if handled.consumed() {
            return Ok(ChannelMessageOutcome::Consumed(handled));
        }
        let Some(channel) = self.registry.get(platform) else {
            return Err(Error::invalid(format!(
                "no channel {platform:?} in this process"
            )));
        };
        let channel_ref = ChannelRef {
            platform: platform.into(),
            thread: thread.into(),
        };
        // The thread's chat is found by its channel, never by an id a web caller could have taken.
        let existing = self.turns.store.get_channel_chat(platform, thread).await?;
        let chat_id = existing
            .as_ref()
            .map(|c| c.chat_id.clone())
            .unwrap_or_else(|| channel_chat_id(platform, thread));
        let info = existing.as_ref().map(ChatRow::info).unwrap_or(ChatInfo {
            chat_id: chat_id.clone(),
            owner: None,
            channel: Some(channel_ref.clone()),
        });
        let (actor, allowed) = self
            .questions
            .identify(&channel, &info, &message.author)
            .await;
        if !allowed {
            return Ok(ChannelMessageOutcome::Denied);
        }
        let thread_hook = Thread {
            id: thread.into(),
            platform: platform.into(),
            chat_id: chat_id.to_string(),
        };
        let outbox = channel.outbox.clone();
        if is_stop_word(&message.text) {
            match self.turns.stop(&chat_id, actor.user.as_ref()) {
                StopOutcome::Stopping => return Ok(ChannelMessageOutcome::Stopped),
                StopOutcome::NotDriver => {
                    if let Some(o) = &outbox {
                        Self::notice(o.as_ref(), &thread_hook, STOP_REFUSED_TEXT).await;
                    }
                    return Ok(ChannelMessageOutcome::StopRefused);
                }
                // Nothing runs here: an ordinary message.
                _ => {}
            }
        }
        let awaiting = existing
            .as_ref()
            .is_some_and(|c| c.awaiting_message_id.is_some());
        // Posted again with the next message: questions whose render failed or whose record expired.
        if awaiting {
            self.questions.render_pending(&chat_id).await?;
        }
        // Seen is queued before the message is sent, so the turn's Working (decided in its own
        // task) is shown after it; what to show is known once `send` returns.
        let settings = self.registry.settings(platform);
        let (seen_tx, seen_rx) = tokio::sync::oneshot::channel::<Option<Ack>>();
        if let Some(o) = outbox.clone().filter(|_| settings.acks)
            && !message.id.is_empty()
        {
            let (thread, id) = (thread_hook.clone(), message.id.clone());
            self.show(&chat_id, async move {
                if let Ok(Some(ack)) = seen_rx.await {
                    Self::ack(o.as_ref(), &thread, &id, ack).await;
                }
            });
        }
        let message_id =
            (!message.id.is_empty()).then(|| channel_message_id(platform, &message.id));
        let (model, reasoning) = (settings.model.clone(), settings.reasoning.clone());
        let sent = self
            .turns
            .send(
                SendMessage {
                    chat_id: chat_id.clone(),
                    id: message_id,
                    parts: vec![crate::model::MessagePart::text(message.text)],
                    author: actor.user,
                    delivery: crate::model::Delivery::Queue,
                    model,
                    reasoning,
                    channel: Some(channel_ref),
                },
                true,
            )
            .await;
        let _ = seen_tx.send(match &sent {
            Ok(SendResult::Started(_) | SendResult::Queued { .. }) => Some(Ack::Seen),
            Ok(SendResult::Duplicate) => None,
            Err(_) => Some(Ack::Failed),
        });
        if let (Some(o), Ok(SendResult::Queued { .. })) = (&outbox, &sent) {
            let first = {
                let mut all = self.progress.lock().expect("progress");
                let p = all.entry(chat_id.clone()).or_insert_with(Progress::new);
                !std::mem::replace(&mut p.queue_noted, true)
            };
            if first {
                let text = if awaiting {
                    QUEUED_BEHIND_QUESTION_TEXT
                } else {
                    QUEUED_TEXT
                };
                let (o, thread) = (o.clone(), thread_hook.clone());
                self.show(&chat_id, async move {
                    Self::notice(o.as_ref(), &thread, text).await;
                });
            }
        }
        self.tidy(&chat_id);
        let sent = sent?;
        Ok(match sent {
            SendResult::Started(h) => ChannelMessageOutcome::Sent(Sent::Started(h)),
            SendResult::Queued {
                message_id,
                delivery,
            } => ChannelMessageOutcome::Sent(Sent::Queued {
                message_id,
                delivery,
            }),
            SendResult::Duplicate => {
                debug!(thread, "repeated channel message; already taken");
                ChannelMessageOutcome::Duplicate
            }
        })
    }
}

#[async_trait]
impl TurnListener for Channels {
    async fn offers_questions(&self, chat: &ChatRow) -> bool {
        self.questions.offered_in(chat).await
    }

    async fn turn_started(&self, chat: &ChatRow, message_id: Option<&str>) {
        let Some(thread) = thread_of(chat) else {
            return;
        };
        let Some(outbox) = self.outbox(&thread.platform) else {
            return;
        };
        // A stored channel message id is `platform-<the platform's id>`.
        let prefix = format!("{}-", thread.platform);
        let platform_id = message_id
            .and_then(|id| id.strip_prefix(&prefix))
            .filter(|_| self.registry.settings(&thread.platform).acks)
            .map(str::to_owned);
        let every = outbox.working_every();
        let working = {
            let (outbox, thread) = (outbox.clone(), thread.clone());
            tokio::spawn(async move {
                loop {
                    if let Err(e) = outbox.working(&thread).await {
                        debug!(thread = %thread.id, error = %e, "showing progress failed");
                    }
                    tokio::time::sleep(every).await;
                }
            })
            .abort_handle()
        };
        {
            let mut all = self.progress.lock().expect("progress");
            let p = all
                .entry(chat.chat_id.clone())
                .or_insert_with(Progress::new);
            if let Some(old) = p.working.replace(working) {
                old.abort();
            }
            p.queue_noted = false;
            if platform_id.is_some() {
                p.current = platform_id.clone();
            }
        }
        if let Some(id) = platform_id {
            self.show(&chat.chat_id, async move {
                Self::ack(outbox.as_ref(), &thread, &id, Ack::Working).await;
            });
        }
    }

    async fn turn_ended(&self, chat: &ChatRow, reply: &UiMessage, state: TurnState, why: EndWhy) {
        if chat.channel.is_none() {
            return;
        }
        let current = {
            let mut all = self.progress.lock().expect("progress");
            all.get_mut(&chat.chat_id).and_then(|p| {
                if let Some(w) = p.working.take() {
                    w.abort();
                }
                p.current.take()
            })
        };
        // The reply and then Done (or Failed), after everything shown before; awaited, so the
        // replies of one chat are posted in the order their turns ended.
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let this = self.me.get().and_then(std::sync::Weak::upgrade);
        if let Some(this) = this {
            let (chat_row, reply, why) = (chat.clone(), reply.clone(), why);
            self.show(&chat.chat_id, async move {
                this.deliver_reply(&chat_row, &reply, why).await;
                if let (Some(thread), Some(id)) = (thread_of(&chat_row), current)
                    && let Some(outbox) = this.outbox(&thread.platform)
                {
                    let ack = if reply.metadata.error.is_some() {
                        Ack::Failed
                    } else {
                        Ack::Done
                    };
                    Self::ack(outbox.as_ref(), &thread, &id, ack).await;
                }
                let _ = done_tx.send(());
            });
            let _ = done.await;
        }
        self.tidy(&chat.chat_id);
        if state == TurnState::Awaiting
            && let Err(e) = self.questions.render_pending(&chat.chat_id).await
        {
            error!(chat_id = %chat.chat_id, error = %e, "rendering the questions failed");
        }
    }
}
