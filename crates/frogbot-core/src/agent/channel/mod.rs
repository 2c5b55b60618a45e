//! Channels: messages arriving in a platform thread, who sent them, and the outbox that posts the
//! agent's replies back to the thread.
//!
//! The channel layer sits on top: it hands thread replies to the question engine first (a reply
//! may answer a question), sends the rest to the turn engine, and listens to the turn engine's
//! turn ends to post replies and draw questions.
//!
//! Thread messages: a reply a question consumes never reaches the agent; `stop` from the turn's
//! driver stops it; the rest are identity- and access-checked and sent to the thread's chat with
//! the platform's `ChannelSettings` model. The first message of a thread without a chat reads the
//! thread's earlier messages (`thread_history`, within `context_messages` / `context_chars`). A
//! person's edit or deletion of their message on the platform (`engine.channels().message_changed`,
//! from each adapter's receive path in the thread's order) edits or removes it while it is queued,
//! under the store's author rule with the stored author; a message that already ran is left as read
//! (`ChangeOutcome::AlreadyRan`). `channel_stop` serves the platforms' Stop controls with
//! the same driver rule as the typed `stop`.
//!
//! What a thread is shown: `ChannelOutbox::ack` gives Seen when a message is stored (decided before
//! `send` and filled in after it, so the turn's Working always follows), Working at `turn_started`,
//! Done or Failed after the reply. A turn that ends waiting for an answer leaves Working on the
//! message (kept in `Channels::awaiting`, or found in the chat after a restart), and the continued
//! turn's end gives it Done. `working` is repeated every `working_every` while a turn runs; there
//! is one note per queue; a failure, an interruption or `max_steps` adds a short notice to the
//! reply (the error's details stay in the logs); questions are drawn after the reply.
//!
//! Streaming: a `Streamer` task per turn shows the text through `ChannelOutbox::start_stream`,
//! which returns a `ReplyStream` (usually `EditStream` over the adapter's `DraftMessages`: post,
//! edit, cut into pieces, the Stop control on the last message). The first message, the notified
//! one, waits until the text `reads_as_a_start` (`FIRST_MESSAGE_WAIT` at most), and the turn
//! checkpoints the new message id at once through `TurnWatch::posted`; after that at most one
//! update per `stream_interval`. At the turn's end the stream is handed back and `finish` draws the
//! final state (only the text not posted before a question, plus any notice). A reply whose stream
//! a crash cut off is found by the lease sweeper with its `drafts`: they are edited to the partial
//! text and `(interrupted)`. `ChannelOutbox::idle` is called once a reply is shown (or the turn
//! stopped): adapters turn typing off there.
//!
//! Order: everything a thread is shown runs in order on one task per chat (the chat's show queue, a
//! queue of futures), so a slow platform call never reorders it and never holds a turn (only
//! `turn_ended` waits for its reply to be posted).

pub use frogbot_channel::{
    ASK_USAGE_TEXT, COMMAND_BUSY_TEXT, ChangeOutcome, Command, NOTHING_TO_SKIP_TEXT,
    PERSON_ASK_SECONDS, STOP_REFUSED_TEXT, channel_chat_id, channel_message_id, is_stop_word,
};

use async_trait::async_trait;
use futures::future::BoxFuture;
use std::sync::Arc;
use tokio::sync::mpsc;
use tracing::{debug, error, warn};

use super::ask::{ASK_MODEL, ask_parts, pick_parts};
use super::delivery::{self, EndWhy};
use super::jobs::EngineJob;
use super::questions::{Drawn, InteractionOutcome, Questions};
use super::registry::{ChannelOutbox, Delivery, ReplyStream};
use super::registry::{Registry, thread_of};
use super::turn::{SendMessage, SendResult, Sent, StopOutcome, TurnListener, TurnWatch, Turns};
use crate::error::{Error, Result};
use crate::model::{
    Ack, ChannelRef, ChatId, ChatInfo, Interaction, MessagePart, PlatformUser, Role, Thread,
    ThreadMessage, TurnState, UiMessage, UserId,
};
use crate::store::ChatRow;

/// How a worker's attempt at a `deliver` job went.
#[derive(Debug)]
pub(crate) enum DeliveryRun {
    /// Posted, or nothing is owed any more (the chat or reply is gone).
    Done,
    /// This process does not serve the thread's platform (another may).
    NotHere,
    /// The post failed: the error, and whether it is worth retrying.
    Failed(crate::BoxError, bool),
}

/// A person's message in a bound chat's thread, as the inbox keeps it.
fn inbox_message(
    id: Option<String>,
    message: &ThreadMessage,
    author: Option<UserId>,
    speaker: Option<String>,
    created_at: String,
) -> UiMessage {
    let mut m = UiMessage {
        id: id.unwrap_or_else(|| format!("in_{}", uuid::Uuid::now_v7().simple())),
        role: Role::User,
        parts: vec![MessagePart::text(message.text.clone())],
        metadata: Default::default(),
    };
    m.metadata.author = author;
    m.metadata.speaker = speaker;
    m.metadata.created_at = created_at;
    m
}

/// The parts of a person's ask (or model picker) message, made by `parts` with its id: the
/// platform's, or a new one (`{prefix}-…`) when it gave none.
fn ask_message(
    message_id: &mut Option<String>,
    prefix: &str,
    parts: fn(&str, &crate::model::QuestionInput, &str) -> Vec<MessagePart>,
    text: &str,
    input: &crate::model::QuestionInput,
) -> Vec<MessagePart> {
    let id =
        message_id.get_or_insert_with(|| format!("{prefix}-{}", uuid::Uuid::now_v7().simple()));
    parts(text, input, id)
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
    /// A command answered with a notice in the thread, nothing saved: what `model` lists, or a
    /// refusal (`new` while a reply is written, [`COMMAND_BUSY_TEXT`]; a model not offered).
    Told,
    /// The thread's chat is bound to an external agent: the message waits in its inbox.
    Inbox,
}

impl ChannelMessageOutcome {
    /// The outcome as an adapter sees it (without a started turn's handle).
    pub fn outcome(&self) -> frogbot_channel::MessageOutcome {
        use frogbot_channel::MessageOutcome as M;
        match self {
            Self::Consumed(o) => M::Consumed(o.clone()),
            Self::Denied => M::Denied,
            Self::Sent(Sent::Started(_)) => M::Started,
            Self::Sent(Sent::Queued { .. }) => M::Queued,
            Self::Duplicate => M::Duplicate,
            Self::Stopped => M::Stopped,
            Self::StopRefused => M::StopRefused,
            Self::Told => M::Told,
            Self::Inbox => M::Inbox,
        }
    }
}

/// Said once while messages wait behind a running turn.
pub const QUEUED_TEXT: &str = "Got it — I'll get to this once I've finished the reply above.";
/// Said once while messages wait behind an open question.
pub const QUEUED_BEHIND_QUESTION_TEXT: &str =
    "Got it — this waits until the question above is answered or skipped.";
/// The mark a streamed reply that a crash cut off is left with.
pub const INTERRUPTED_MARK: &str = "(interrupted)";
/// Said when a turn ran out of steps.
pub const MAX_STEPS_TEXT: &str =
    "⚠️ I stopped after the most steps I may take in one reply. Send a message to continue.";

/// The notice of a failed turn, by its error code: what happened and that the person can retry
/// (the details are in the logs).
pub fn failure_text(code: &str) -> &'static str {
    match code {
        "interrupted" => "⚠️ My reply was interrupted. Send your message again to retry.",
        "model-timeout" => {
            "⚠️ The model stopped answering, so I gave up on this reply. Send your message again to retry."
        }
        "selection-unavailable" => {
            "⚠️ The model chosen for this chat is not available any more. Send your message again once it is, or ask the admin."
        }
        _ => "⚠️ Something went wrong while I was answering. Send your message again to retry.",
    }
}

/// How long a worker's attempt at a delivery may take: less than its job's claim (60 s).
pub(crate) const DELIVERY_ATTEMPT_LIMIT: std::time::Duration = std::time::Duration::from_secs(45);

/// How long a notice of the engine's (queued, refused, stopped) is retried.
const NOTICE_RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(10);

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
    /// The running turn's streamed reply: the task showing it, which hands the stream back for
    /// its final state once the turn's text ends.
    stream: Option<tokio::task::JoinHandle<Option<Box<dyn ReplyStream>>>>,
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
            stream: None,
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
    /// Per chat whose turn waits for an answer: the platform id of the message that turn answers,
    /// which keeps ⏳ until the turn that continues after the answer ends (then ✅ or ❌).
    awaiting: std::sync::Mutex<std::collections::HashMap<ChatId, String>>,
    /// Itself, for the shows that outlive a call.
    pub(crate) me: std::sync::OnceLock<std::sync::Weak<Channels>>,
    /// Told whenever something reaches an agent's inbox in this process (waiting readers look
    /// again; the store is polled for what other processes saved).
    pub(crate) inbox_arrived: tokio::sync::Notify,
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
            awaiting: Default::default(),
            me: std::sync::OnceLock::new(),
            inbox_arrived: tokio::sync::Notify::new(),
        }
    }

    /// Lets the shows that outlive a call reach this layer.
    pub(crate) fn set_self(self: &Arc<Self>) {
        let _ = self.me.set(Arc::downgrade(self));
    }

    pub(crate) fn outbox(&self, platform: &str) -> Option<Arc<dyn ChannelOutbox>> {
        self.registry.get(platform).and_then(|c| c.outbox.clone())
    }

    /// Queues `show` after everything `chat`'s thread is shown so far.
    pub(crate) fn show(&self, chat: &ChatId, show: impl Future<Output = ()> + Send + 'static) {
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
                && p.stream.is_none()
                && p.pending.load(std::sync::atomic::Ordering::SeqCst) == 0
        }) {
            all.remove(chat);
        }
    }

    fn awaiting_lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<ChatId, String>> {
        self.awaiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The platform id of the person's message a continued turn's `reply` answers, when this
    /// process did not see it wait (it waited in another process, or before a restart): the
    /// channel message before the reply. Only for a reply that called tools (a turn that waited
    /// for an answer did); `None` when acknowledgements are off.
    async fn answered_message(&self, chat: &ChatRow, reply: &UiMessage) -> Option<String> {
        let thread = thread_of(chat)?;
        // An ask's turn answers no person's message: nothing to read.
        if !self.registry.settings(&thread.platform).acks
            || reply.metadata.model.as_deref() == Some(ASK_MODEL)
            || !reply
                .parts
                .iter()
                .any(|p| matches!(p, MessagePart::Tool(_)))
        {
            return None;
        }
        let messages = match self.turns.store.list_messages(&chat.chat_id).await {
            Ok(m) => m,
            Err(e) => {
                debug!(chat_id = %chat.chat_id, error = %e, "finding the message a turn answers failed");
                return None;
            }
        };
        let at = messages.iter().position(|m| m.message.id == reply.id)?;
        let prefix = format!("{}-", thread.platform);
        messages[..at]
            .iter()
            .rev()
            .find(|m| m.message.role == Role::User)
            .and_then(|m| m.message.id.strip_prefix(&prefix))
            .map(str::to_owned)
    }

    /// Marks message `message_id` (the platform's id) with `ack`; a failure is logged.
    pub(crate) async fn ack(
        outbox: &dyn ChannelOutbox,
        thread: &Thread,
        message_id: &str,
        ack: Ack,
    ) {
        if let Err(e) = outbox.ack(thread, message_id, ack).await {
            warn!(thread = %thread.id, message_id, ?ack, error = %e, "acknowledging a message failed");
        }
    }

    /// Shows the platform's progress sign in `thread`; a failure is logged.
    async fn progress(outbox: &dyn ChannelOutbox, thread: &Thread) {
        if let Err(e) = outbox.working(thread).await {
            debug!(thread = %thread.id, error = %e, "showing progress failed");
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
        // Not durable (a notice is about the moment), but retried for a while under one key.
        let mut delivery = Delivery::new(message.id.clone());
        let mut retries = delivery::Retries::within(NOTICE_RETRY_FOR);
        loop {
            let Err(e) = outbox.deliver(thread, &message, &delivery).await else {
                return;
            };
            match retries.next(&e) {
                delivery::Next::After(wait) => {
                    tokio::time::sleep(wait).await;
                    delivery.attempt += 1;
                }
                delivery::Next::OutOfTime | delivery::Next::Permanent => {
                    warn!(thread = %thread.id, error = %e, "posting a notice failed");
                    return;
                }
            }
        }
    }
}

/// Shows one turn's reply as the model writes it: the first text at once, then at most one
/// update per `every`; each update goes through the chat's show queue, so it follows the turn's
/// Working acknowledgement. Returns the stream when the turn's text ends (for its final state).
struct Streamer {
    channels: std::sync::Weak<Channels>,
    chat: ChatId,
    outbox: Arc<dyn ChannelOutbox>,
    thread: Thread,
    every: std::time::Duration,
    drafts: Arc<std::sync::Mutex<Vec<String>>>,
    /// Told when `drafts` changed.
    posted: Arc<tokio::sync::Notify>,
    /// The key of the delivery job this reply will have (its turn's end writes it): not one
    /// owed before it.
    own_key: String,
}

/// Where a streamer is with its stream.
enum Live {
    /// Nothing shown yet.
    NotStarted,
    /// Showing.
    On(Box<dyn ReplyStream>),
    /// The outbox does not stream here, or starting failed: the reply is posted whole.
    Off,
}

impl Streamer {
    async fn run(self, mut rx: mpsc::UnboundedReceiver<String>) -> Option<Box<dyn ReplyStream>> {
        let mut text = String::new();
        let mut live = Live::NotStarted;
        loop {
            // Wait for text, then take all that has arrived. While the stream holds its first
            // message back, the same text is shown again every 100 ms (the stream decides when
            // it has waited long enough to post it anyway).
            let held = matches!(&live, Live::On(s) if !s.visible());
            let wait = if held {
                self.every.min(std::time::Duration::from_millis(100))
            } else {
                std::time::Duration::MAX
            };
            match tokio::time::timeout(wait, rx.recv()).await {
                Ok(Some(d)) => text.push_str(&d),
                Ok(None) => break,
                Err(_) => {}
            }
            while let Ok(d) = rx.try_recv() {
                text.push_str(&d);
            }
            if matches!(live, Live::Off) || text.trim().is_empty() {
                continue;
            }
            let shown_at = tokio::time::Instant::now();
            live = self.show(live, text.clone()).await;
            // Nothing posted yet (the outbox waits for a text worth notifying, e.g. a first
            // sentence): the next text is shown soon (100 ms), not an interval later.
            let every = match &live {
                Live::On(stream) if !stream.visible() => {
                    self.every.min(std::time::Duration::from_millis(100))
                }
                _ => self.every,
            };
            // At most one update per interval: collect text until it has passed.
            let next = shown_at + every;
            loop {
                tokio::select! {
                    () = tokio::time::sleep_until(next) => break,
                    d = rx.recv() => match d {
                        Some(d) => text.push_str(&d),
                        None => return Self::handed_back(live),
                    },
                }
            }
        }
        Self::handed_back(live)
    }

    fn handed_back(live: Live) -> Option<Box<dyn ReplyStream>> {
        match live {
            Live::On(s) => Some(s),
            _ => None,
        }
    }

    /// Starts the stream (first text) or updates it, in the chat's show queue.
    async fn show(&self, live: Live, text: String) -> Live {
        let Some(channels) = self.channels.upgrade() else {
            return live;
        };
        let (back, back_rx) = tokio::sync::oneshot::channel();
        let (outbox, thread, drafts, posted) = (
            self.outbox.clone(),
            self.thread.clone(),
            self.drafts.clone(),
            self.posted.clone(),
        );
        let (me, chat, own) = (channels.clone(), self.chat.clone(), self.own_key.clone());
        channels.show(&self.chat, async move {
            let started = match live {
                // A reply owed before this one is not posted yet: streaming now would show this
                // one first; it is posted whole, after that one.
                Live::NotStarted if me.owes_earlier(&chat, &own).await => None,
                Live::NotStarted => match outbox.start_stream(&thread).await {
                    Ok(Some(s)) => Some(s),
                    Ok(None) => None,
                    Err(e) => {
                        warn!(thread = %thread.id, error = %e, "starting a streamed reply failed; it is posted whole");
                        None
                    }
                },
                Live::On(s) => Some(s),
                Live::Off => None,
            };
            let live = match started {
                Some(mut s) => {
                    if let Err(e) = s.show(&text).await {
                        debug!(thread = %thread.id, error = %e, "updating a streamed reply failed");
                    }
                    let ids = s.message_ids();
                    let mut noted = drafts.lock().expect("drafts");
                    if *noted != ids {
                        *noted = ids;
                        posted.notify_one();
                    }
                    Live::On(s)
                }
                None => Live::Off,
            };
            let _ = back.send(live);
        });
        back_rx.await.unwrap_or(Live::Off)
    }
}

impl std::fmt::Debug for Channels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channels").finish_non_exhaustive()
    }
}

impl Channels {
    /// One attempt to post what `reply` owes its thread: the text of its parts `from..to` — as
    /// the final state of its stream, or posted whole —, a failure or out-of-steps notice after
    /// it. A stream a crash cut off (no stream here, drafts noted on the reply) has its messages
    /// edited to the text (marked [`INTERRUPTED_MARK`] when the turn was interrupted) and only
    /// the rest is posted.
    #[allow(clippy::too_many_arguments)]
    async fn post_owed(
        outbox: &dyn ChannelOutbox,
        thread: &Thread,
        reply: &UiMessage,
        (from, to): (usize, usize),
        max_steps: bool,
        stream: &mut Option<Box<dyn ReplyStream>>,
        delivery: &Delivery,
        files: &[frogbot_channel::OutFile],
    ) -> std::result::Result<Vec<String>, crate::BoxError> {
        let notice = match &reply.metadata.error {
            Some(error) => Some(failure_text(&error.code)),
            None if max_steps => Some(MAX_STEPS_TEXT),
            None => None,
        };
        let mut text = delivery::text_of(reply, from, to);
        // The platform ids the text is in: drafts kept, then what is posted.
        let mut ids: Vec<String> = Vec::new();
        // The drafts noted on the reply draw its latest segment: a job for an earlier one (its
        // process died before removing it, and the reply has gone on past an answer) never
        // draws over them — the crash suite lost a continuation's first piece so.
        let drafts_are_ours = delivery::unposted_from(reply) == from;
        if stream.is_none() && !reply.metadata.drafts.is_empty() && drafts_are_ours {
            let interrupted = reply
                .metadata
                .error
                .as_ref()
                .is_some_and(|e| e.code == crate::store::INTERRUPTED);
            let shown = if interrupted {
                format!("{} {INTERRUPTED_MARK}", text.trim_end())
            } else {
                text.clone()
            };
            let pieces = outbox.pieces(&shown);
            // Each draft shows its piece; a draft that cannot be edited for good (deleted)
            // has its piece and the rest posted anew. A transient failure fails the attempt
            // (an edit to the same text is harmless when it is retried).
            let mut kept = 0;
            for (id, piece) in reply.metadata.drafts.iter().zip(&pieces) {
                match outbox.edit_message(thread.message(id), piece).await {
                    Ok(()) => kept += 1,
                    Err(e) if frogbot_model::Transient::is_transient(e.as_ref()) => {
                        return Err(e);
                    }
                    Err(e) => {
                        warn!(thread = %thread.id, error = %e, "a streamed reply's message cannot be edited; the rest of the reply is posted anew");
                        break;
                    }
                }
            }
            text = pieces.iter().skip(kept).map(String::as_str).collect();
            ids.extend(reply.metadata.drafts.iter().take(kept).cloned());
        }
        if let Some(notice) = notice {
            // What the turn produced stays; the notice follows it. Details are in the logs.
            if !text.trim().is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(notice);
        }
        match stream {
            Some(s) => {
                s.finish(&text).await?;
                ids = s.message_ids();
            }
            None if text.trim().is_empty() => {}
            None => {
                let message = UiMessage {
                    id: reply.id.clone(),
                    role: reply.role,
                    parts: vec![MessagePart::text(text)],
                    metadata: reply.metadata.clone(),
                };
                ids.extend(outbox.deliver(thread, &message, delivery).await?);
            }
        }
        // The files after the text, each the platform's own upload.
        let after = ids.len();
        ids.extend(outbox.deliver_files(thread, files, after, delivery).await?);
        Ok(ids)
    }

    /// The files of `reply`'s parts `from..to`, as its channel sends them.
    async fn files_to_send(
        &self,
        chat: &ChatId,
        reply: &UiMessage,
        (from, to): (usize, usize),
    ) -> Result<Vec<frogbot_channel::OutFile>> {
        let parts = delivery::files_of(reply, from, to);
        if parts.is_empty() {
            return Ok(Vec::new());
        }
        crate::agent::files::out_files(&self.turns.store, chat, &parts).await
    }

    /// Keeps the platform ids of a reply's messages on it (`metadata.posted`; the ids of the
    /// part `from..` of its text, after those of its earlier parts), so the agent can edit it
    /// later. A failure is logged: the reply is then final on the platform.
    async fn note_posted(&self, chat: &ChatId, reply: &str, from: usize, ids: Vec<String>) {
        if ids.is_empty() {
            return;
        }
        let store = &self.turns.store;
        for _ in 0..8 {
            let current = match store.get_message(chat, reply).await {
                Ok(Some(m)) => m,
                Ok(None) => return,
                Err(e) => {
                    warn!(chat_id = %chat, reply, error = %e, "keeping a reply's platform ids failed");
                    return;
                }
            };
            let mut m = current.message.clone();
            if from == 0 {
                m.metadata.posted.clear();
            }
            for id in &ids {
                if !m.metadata.posted.contains(id) {
                    m.metadata.posted.push(id.clone());
                }
            }
            if m.metadata.posted == current.message.metadata.posted {
                return;
            }
            match store
                .update_message(&crate::store::UpdateMessageOp {
                    chat,
                    message: &m,
                    expected_version: current.version,
                    job: None,
                    now: self.turns.now(),
                })
                .await
            {
                Ok(crate::store::MessageUpdate::Done(_)) => return,
                Ok(crate::store::MessageUpdate::Moved(_)) => continue,
                Err(e) => {
                    warn!(chat_id = %chat, reply, error = %e, "keeping a reply's platform ids failed");
                    return;
                }
            }
        }
    }

    /// Posts the reply of a channel chat's turn to its thread (when this process runs the
    /// channel), retrying what the outbox marks transient for half of the delivery grace.
    /// Returns the key of its delivery job once posted (the caller removes the job when all
    /// the job stands for is done); `None` leaves it to the job (any process's worker posts it
    /// once the grace is over).
    async fn deliver_reply(
        &self,
        chat: &ChatRow,
        reply: &UiMessage,
        why: EndWhy,
        waiting: bool,
        mut stream: Option<Box<dyn ReplyStream>>,
    ) -> Option<(String, usize, Vec<String>)> {
        let job = delivery::owed(chat, reply, why, waiting)?;
        let thread = thread_of(chat)?;
        let outbox = self.outbox(&thread.platform)?;
        let EngineJob::Deliver {
            from,
            to,
            max_steps,
            ..
        } = &job
        else {
            return None;
        };
        let key = job.key();
        let files = match self.files_to_send(&chat.chat_id, reply, (*from, *to)).await {
            Ok(files) => files,
            Err(e) => {
                warn!(chat_id = %chat.chat_id, key, error = %e, "reading the reply's files failed; its delivery job takes over");
                return None;
            }
        };
        let mut delivery = Delivery::new(key.clone());
        let mut retries = delivery::Retries::within(self.turns.config.delivery_grace / 2);
        loop {
            // One attempt may not outlast the budget (the worker could take the job over while
            // it still ran): cut off, its outcome is unknown and the job takes over.
            let left = retries.left();
            let attempt = Self::post_owed(
                outbox.as_ref(),
                &thread,
                reply,
                (*from, *to),
                *max_steps,
                &mut stream,
                &delivery,
                &files,
            );
            let e = match tokio::time::timeout(left, attempt).await {
                Ok(Ok(ids)) => return Some((key, *from, ids)),
                Ok(Err(e)) => e,
                Err(_) => {
                    warn!(chat_id = %chat.chat_id, key, "posting the reply took too long; its delivery job takes over");
                    return None;
                }
            };
            match retries.next(&e) {
                delivery::Next::After(wait) => {
                    debug!(chat_id = %chat.chat_id, key, attempt = delivery.attempt, error = %e, ?wait, "posting the reply failed; retrying");
                    tokio::time::sleep(wait).await;
                    delivery.attempt += 1;
                }
                delivery::Next::OutOfTime => {
                    warn!(chat_id = %chat.chat_id, key, error = %e, "posting the reply keeps failing; its delivery job takes over");
                    return None;
                }
                delivery::Next::Permanent => {
                    error!(chat_id = %chat.chat_id, key, error = %e, "posting the reply failed; its delivery job tries again");
                    return None;
                }
            }
        }
    }

    /// Whether a reply `chat` owes its thread from before `reply` is not posted yet (its
    /// delivery job is pending): `reply` then waits for it, so the thread sees them in order.
    /// A failed look counts as owed (the job posts it, in order).
    async fn owed_before(
        &self,
        chat: &ChatRow,
        reply: &UiMessage,
        why: EndWhy,
        waiting: bool,
    ) -> bool {
        match delivery::owed(chat, reply, why, waiting) {
            Some(job) => self.owes_earlier(&chat.chat_id, &job.key()).await,
            None => false,
        }
    }

    /// Whether `chat` owes its thread a reply from before the one whose delivery job is (or
    /// will be) `key`, not posted yet — looked at in the show queue, where this process's own
    /// replies are posted and their jobs removed. A failed look counts as owed.
    async fn owes_earlier(&self, chat: &ChatId, key: &str) -> bool {
        let prefix = EngineJob::deliver_prefix(chat);
        match self.turns.store.earlier_job(&prefix, key).await {
            Ok(None) => false,
            Ok(Some(earlier)) => {
                debug!(chat_id = %chat, earlier = ?earlier.key, "a reply owed before this one is not posted yet: this one waits for it");
                true
            }
            Err(e) => {
                warn!(chat_id = %chat, error = %e, "could not look for replies owed before this one: this one waits for its delivery job");
                true
            }
        }
    }

    /// Removes the delivery job `key`: what it stood for is posted.
    async fn delivered(&self, chat: &ChatId, key: &str) {
        if let Err(e) = self.turns.store.delete_job(key).await {
            warn!(chat_id = %chat, key, error = %e, "a posted reply's delivery job is left (it may be posted again)");
        }
    }

    /// Runs a `deliver` job (a worker's attempt, in the chat's show queue): the reply's text
    /// its process did not post.
    pub(crate) async fn run_delivery_job(&self, job: &EngineJob, attempt: u32) -> DeliveryRun {
        let EngineJob::Deliver {
            chat,
            message,
            from,
            to,
            max_steps,
        } = job
        else {
            return DeliveryRun::Done;
        };
        let row = match self.turns.store.get_chat(chat).await {
            Ok(Some(row)) => row,
            Ok(None) => return DeliveryRun::Done,
            Err(e) => return DeliveryRun::Failed(Box::new(e), true),
        };
        let Some(thread) = thread_of(&row) else {
            return DeliveryRun::Done;
        };
        let Some(outbox) = self.outbox(&thread.platform) else {
            return DeliveryRun::NotHere;
        };
        let reply = match self.turns.store.get_message(chat, message).await {
            Ok(Some(m)) => m.message,
            Ok(None) => return DeliveryRun::Done,
            Err(e) => return DeliveryRun::Failed(Box::new(e), true),
        };
        let delivery = Delivery {
            key: job.key(),
            attempt: attempt.max(1),
            quiet: false,
        };
        let files = match self.files_to_send(chat, &reply, (*from, *to)).await {
            Ok(files) => files,
            Err(e) => return DeliveryRun::Failed(Box::new(e), true),
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (parts, max_steps) = ((*from, *to), *max_steps);
        let awaiting = row.awaiting_message_id.as_deref() == Some(message.as_str());
        self.show(chat, async move {
            let mut none = None;
            let attempt = Self::post_owed(
                outbox.as_ref(),
                &thread,
                &reply,
                parts,
                max_steps,
                &mut none,
                &delivery,
                &files,
            );
            // Within the job's claim (another worker may claim it once the claim runs out).
            let result = match tokio::time::timeout(DELIVERY_ATTEMPT_LIMIT, attempt).await {
                Ok(r) => r,
                Err(_) => Err(Box::new(
                    crate::model::Transient::new("posting the reply took too long").maybe_done(),
                ) as crate::BoxError),
            };
            let _ = tx.send(result);
        });
        let result = rx.await;
        debug!(chat_id = %chat, reply = %message, awaiting, ok = matches!(result, Ok(Ok(_))), "a delivery job's attempt");
        self.tidy(chat);
        match result {
            Ok(Ok(ids)) => {
                self.note_posted(chat, message, *from, ids).await;
                if awaiting {
                    match self.questions.render_pending(chat).await {
                        Ok(Drawn::Done) => {}
                        // The job stays: its next attempt (after its backoff) draws again.
                        Ok(Drawn::Failed(e)) => return DeliveryRun::Failed(e, true),
                        Err(e) => {
                            warn!(chat_id = %chat, error = %e, "drawing the questions after a delivery failed");
                            return DeliveryRun::Failed(Box::new(e), true);
                        }
                    }
                }
                DeliveryRun::Done
            }
            Ok(Err(e)) => {
                let transient = crate::model::Transient::is_transient(e.as_ref());
                DeliveryRun::Failed(e, transient)
            }
            Err(_) => DeliveryRun::NotHere,
        }
    }

    /// Stops the running turn of a channel thread's chat for the platform user `who` (a Stop
    /// control on the streamed reply): only the person driving the turn may.
    pub(crate) async fn channel_stop(
        &self,
        platform: &str,
        thread: &str,
        who: &PlatformUser,
    ) -> Result<StopOutcome> {
        let Some(channel) = self.registry.get(platform) else {
            return Err(Error::invalid(format!(
                "no channel {platform:?} in this process"
            )));
        };
        let Some(chat) = self.turns.store.get_channel_chat(platform, thread).await? else {
            return Ok(StopOutcome::NotRunning);
        };
        let (actor, allowed) = self.questions.identify(&channel, &chat.info(), who).await;
        if !allowed {
            return Ok(StopOutcome::NotDriver);
        }
        Ok(self.turns.stop(&chat.chat_id, actor.user.as_ref(), false))
    }

    /// The thread's earlier messages as `name: text` lines, oldest first, at most
    /// `context_chars` characters (the newest kept): read from the platform for the first
    /// message of a thread the bot has not seen. A failure is logged and nothing is read.
    async fn thread_context(
        outbox: &dyn ChannelOutbox,
        thread: &Thread,
        before: &str,
        settings: &super::registry::ChannelSettings,
    ) -> Option<String> {
        // A message that is its thread's root (the thread has its id) has nothing before it in
        // the thread: nothing to read.
        if settings.context_messages == 0 || before.is_empty() || before == thread.id {
            return None;
        }
        let limit = settings.context_messages;
        let history = frogbot_channel::outbox::History {
            thread,
            before,
            limit,
        };
        let earlier = match outbox.thread_history(history).await {
            Ok(m) => m,
            Err(e) => {
                warn!(thread = %thread.id, error = %e, "reading the thread's earlier messages failed");
                return None;
            }
        };
        let mut lines: Vec<String> = Vec::new();
        let mut used = 0usize;
        for m in earlier.iter().rev().take(settings.context_messages) {
            if m.text.trim().is_empty() {
                continue;
            }
            let name = m.author.name.as_deref().unwrap_or(&m.author.id);
            let line = format!("{name}: {}", m.text.trim());
            let chars = line.chars().count() + 1;
            if used + chars > settings.context_chars {
                break;
            }
            used += chars;
            lines.push(line);
        }
        if lines.is_empty() {
            return None;
        }
        lines.reverse();
        Some(lines.join("\n"))
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
    /// The person edited (`text: Some`) or deleted (`None`) their message `message_id` (the
    /// platform's id) in `thread`: a message still queued is edited or removed in the queue
    /// (the platform guarantees the author: only they edit, and deletions by moderators remove
    /// it too); one that already ran is left as the agent read it.
    pub(crate) async fn channel_message_changed(
        &self,
        platform: &str,
        thread: &str,
        message_id: &str,
        text: Option<String>,
    ) -> Result<ChangeOutcome> {
        let store = &self.turns.store;
        let Some(chat) = store.get_channel_chat(platform, thread).await? else {
            return Ok(ChangeOutcome::Unknown);
        };
        let id = channel_message_id(platform, message_id);
        let Some(stored) = store.get_message(&chat.chat_id, &id).await? else {
            return Ok(ChangeOutcome::Unknown);
        };
        if stored.message.metadata.status != Some(crate::model::MessageStatus::Queued) {
            return Ok(ChangeOutcome::AlreadyRan);
        }
        let by = stored.message.metadata.author.clone();
        let queued = crate::store::QueuedOp {
            chat: &chat.chat_id,
            id: &id,
            by: by.as_ref(),
            now: self.turns.now(),
        };
        let change = match text {
            Some(text) => {
                // A platform edit changes the text; the message's files stay.
                let mut parts: Vec<crate::model::MessagePart> = stored
                    .message
                    .parts
                    .iter()
                    .filter(|p| p.as_file().is_some())
                    .cloned()
                    .collect();
                if !text.trim().is_empty() || parts.is_empty() {
                    parts.push(crate::model::MessagePart::text(text));
                }
                let edit = crate::store::QueuedEdit {
                    parts: Some(parts),
                    delivery: None,
                };
                store.edit_queued(&queued, &edit).await?
            }
            None => store.delete_queued(&queued).await?,
        };
        Ok(match change {
            crate::store::QueuedChange::Done(Some(m)) => {
                self.turns.emit_message(&chat.chat_id, &m.message);
                ChangeOutcome::Edited
            }
            crate::store::QueuedChange::Done(None) => ChangeOutcome::Deleted,
            crate::store::QueuedChange::NotQueued => ChangeOutcome::AlreadyRan,
            crate::store::QueuedChange::NotFound | crate::store::QueuedChange::Forbidden => {
                ChangeOutcome::Unknown
            }
        })
    }

    pub(crate) async fn channel_message(
        &self,
        platform: &str,
        thread: &str,
        message: ThreadMessage,
    ) -> Result<ChannelMessageOutcome> {
        match self
            .channel_message_once(platform, thread, message.clone())
            .await
        {
            // The thread's chat was bound to an agent between its look-up and the send (which
            // refuses a turn there): read again, the message goes to the agent's inbox.
            Err(Error::AgentChat { .. }) => {
                self.channel_message_once(platform, thread, message).await
            }
            other => other,
        }
    }

    /// What `model` says: the offered models (each with its reasoning options), the thread's,
    /// and how to choose; first, when `refused` names a choice, that it is not offered.
    fn models_text(
        &self,
        current: Option<&str>,
        reasoning: Option<&str>,
        refused: Option<&str>,
    ) -> String {
        let offers = self.turns.offers();
        let listed: Vec<String> = offers
            .iter()
            .enumerate()
            .map(|(i, (id, options))| {
                let default = if i == 0 { " (default)" } else { "" };
                if options.is_empty() {
                    format!("{id}{default}")
                } else {
                    format!("{id}{default} — reasoning {}", options.join(", "))
                }
            })
            .collect();
        let mut out = String::new();
        if let Some(what) = refused {
            out.push_str(&format!("{what} is not offered here; nothing changed. "));
        }
        out.push_str(&format!("Models offered: {}.", listed.join("; ")));
        if let Some(m) = current.or(offers.first().map(|(id, _)| id.as_str())) {
            match reasoning {
                Some(r) => out.push_str(&format!(" This thread: {m}, reasoning {r}.")),
                None => out.push_str(&format!(" This thread: {m}.")),
            }
        }
        let example = offers
            .iter()
            .find(|(_, o)| !o.is_empty())
            .map(|(id, o)| format!("{id} {}", o[0]))
            .or_else(|| offers.first().map(|(id, _)| id.clone()))
            .unwrap_or_default();
        out.push_str(&format!(
            " Choose with: /model ID [REASONING] (e.g. /model {example}; !model on Slack and Matrix)."
        ));
        out
    }

    /// The question `model` alone asks where the thread draws questions: one choice among the
    /// offers (each model, then each with a reasoning option; at most 25, a select's limit on
    /// Discord), answered only by `who`, for ten minutes.
    fn model_picker(
        &self,
        platform: &str,
        who: &PlatformUser,
        current: Option<&str>,
        reasoning: Option<&str>,
    ) -> crate::model::QuestionInput {
        let offers = self.turns.offers();
        let now = current.or(offers.first().map(|(id, _)| id.as_str()));
        let options: Vec<serde_json::Value> = offers
            .iter()
            .flat_map(|(id, rs)| {
                std::iter::once(None)
                    .chain(rs.iter().map(Some))
                    .map(move |r| (id, r))
            })
            .take(25)
            .map(|(id, r)| {
                serde_json::json!({"label": crate::model::model_pick_label(id, r.map(String::as_str))})
            })
            .collect();
        let now = match (now, reasoning) {
            (Some(m), Some(r)) => format!(" Now: {}.", crate::model::model_pick_label(m, Some(r))),
            (Some(m), None) => format!(" Now: {m}."),
            _ => String::new(),
        };
        let mut input: crate::model::QuestionInput = serde_json::from_value(serde_json::json!({
            "questions": [{
                "header": "Model",
                "question": format!("Which model answers this thread from now on?{now}"),
                "options": options,
            }]
        }))
        .expect("a choice");
        input.expires_in_seconds = Some(10 * 60);
        input.from = vec![format!("{platform}:{}", who.id)];
        input
    }

    /// The question of a person's `ask` (`ask @person QUESTION [| OPTION…]`): only the person
    /// named first may answer, and only if the channel lets them in; `Err` is what to tell the
    /// asker instead (nothing is saved).
    async fn person_ask(
        &self,
        channel: &super::registry::Channel,
        chat: &ChatInfo,
        message: &ThreadMessage,
        args: &str,
    ) -> std::result::Result<crate::model::QuestionInput, String> {
        let Some((to, rest)) = message.named_first(args) else {
            return Err(ASK_USAGE_TEXT.to_owned());
        };
        let rest = rest.trim_start_matches([':', ',']).trim();
        let mut pieces = rest.split('|').map(str::trim);
        let question = pieces.next().unwrap_or_default();
        let options: Vec<&str> = pieces.filter(|o| !o.is_empty()).collect();
        if question.is_empty() {
            return Err(ASK_USAGE_TEXT.to_owned());
        }
        let name = |u: &PlatformUser| {
            u.name
                .clone()
                .filter(|n| !n.trim().is_empty())
                .unwrap_or_else(|| u.id.clone())
        };
        if to.is_bot {
            return Err(format!(
                "{} is a bot: ask a person. {ASK_USAGE_TEXT}",
                name(to)
            ));
        }
        let (_, allowed) = self.questions.identify(channel, chat, to).await;
        if !allowed {
            return Err(format!(
                "{} is not let in to answer here, so nothing was asked.",
                name(to)
            ));
        }
        let mut item = serde_json::json!({
            "header": format!("For {}", name(to)),
            "question": format!("{} asks {}: {question}", name(&message.author), name(to)),
        });
        if options.is_empty() {
            item["kind"] = "text_input".into();
        } else {
            item["options"] = options
                .iter()
                .map(|o| serde_json::json!({"label": o}))
                .collect();
            item["custom"] = true.into();
        }
        let mut input: crate::model::QuestionInput =
            serde_json::from_value(serde_json::json!({ "questions": [item] }))
                .map_err(|e| e.to_string())?;
        input.expires_in_seconds = Some(PERSON_ASK_SECONDS);
        input.from = vec![format!("{}:{}", channel.platform, to.id)];
        input
            .validate()
            .map_err(|e| format!("Nothing was asked: {e}. {ASK_USAGE_TEXT}"))?;
        Ok(input)
    }

    /// Whether `message`, with files, was taken before under `id` (a platform's redelivery: after
    /// a restart, a retried webhook): its files are then not downloaded again, nor their notice
    /// posted twice. Asked only of messages with files, so a plain message costs no read.
    async fn taken_before(
        &self,
        chat: &ChatId,
        id: Option<&str>,
        message: &ThreadMessage,
    ) -> Result<bool> {
        let Some(id) = id.filter(|_| !message.files.is_empty()) else {
            return Ok(false);
        };
        let taken = self.turns.store.get_message(chat, id).await?.is_some();
        if taken {
            debug!(chat_id = %chat, message_id = id, "repeated channel message with files; already taken");
        }
        Ok(taken)
    }

    async fn channel_message_once(
        &self,
        platform: &str,
        thread: &str,
        message: ThreadMessage,
    ) -> Result<ChannelMessageOutcome> {
        // `new` and `model` are never a question's answer (a question taking its own text would
        // take them): they are refused while it waits, with a notice saying so.
        let command_only = matches!(
            Command::parse(&message.text),
            Some(Command::New | Command::Model | Command::Ask)
        );
        if !command_only {
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
        // A chat bound to an external agent: people's messages go to its inbox, no turn runs.
        if let Some(row) = existing.as_ref().filter(|c| c.agent.is_some()) {
            let id = (!message.id.is_empty()).then(|| channel_message_id(platform, &message.id));
            let speaker = message
                .author
                .name
                .clone()
                .filter(|n| !n.trim().is_empty())
                .or_else(|| Some(message.author.id.clone()));
            // A platform's redelivery of a message already taken: its files are not downloaded
            // again, nor is their notice posted twice.
            if self.taken_before(&chat_id, id.as_deref(), &message).await? {
                return Ok(ChannelMessageOutcome::Duplicate);
            }
            // The person's files go to the agent too (downloaded into the chat first).
            let (files, refused) = crate::agent::files::take_platform_files(
                &self.turns.store,
                &self.turns.config.files,
                outbox.as_deref(),
                &chat_id,
                actor.user.as_ref().map(|u| u.as_str()).unwrap_or(""),
                &message.files,
                self.turns.now(),
            )
            .await;
            if !refused.is_empty()
                && let Some(o) = &outbox
            {
                Self::notice(
                    o.as_ref(),
                    &thread_hook,
                    &crate::agent::files::refused_text(&refused),
                )
                .await;
            }
            if files.is_empty() && message.text.trim().is_empty() {
                return Ok(ChannelMessageOutcome::Told);
            }
            let mut m = inbox_message(
                id,
                &message,
                actor.user,
                speaker,
                crate::model::millis_to_iso(self.turns.now()),
            );
            if message.text.trim().is_empty() {
                m.parts.clear();
            }
            m.parts.splice(0..0, files);
            return Ok(if self.to_inbox(row, m).await? {
                ChannelMessageOutcome::Inbox
            } else {
                ChannelMessageOutcome::Duplicate
            });
        }
        if is_stop_word(&message.text) {
            match self.turns.stop(&chat_id, actor.user.as_ref(), false) {
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
            let _ = self.questions.render_pending(&chat_id).await?;
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
        let mut message_id =
            (!message.id.is_empty()).then(|| channel_message_id(platform, &message.id));
        // The thread's model: its last `model` choice, else the channel's.
        let (mut model, mut reasoning) = (settings.model.clone(), settings.reasoning.clone());
        let chosen = match &existing {
            Some(row) => self.turns.chat_choice(&chat_id, row.version).await?,
            None => None,
        };
        let thread_chose = chosen.is_some();
        if let Some((m, r)) = chosen {
            (model, reasoning) = (Some(m), r);
        }
        // `new` and `model ID` are sent like any message, with the part that says what they do,
        // and only into an idle chat (their turn answers them without the model).
        let command = Command::read(&message.text).map(|(c, args)| (c, args.to_owned()));
        let mut parts = vec![crate::model::MessagePart::text(message.text.clone())];
        let notify = |text: String| {
            let (o, thread) = (outbox.clone(), thread_hook.clone());
            self.show(&chat_id, async move {
                if let Some(o) = o {
                    Self::notice(o.as_ref(), &thread, &text).await;
                }
            });
        };
        let told = |text: String| {
            notify(text);
            Ok(ChannelMessageOutcome::Told)
        };
        let mut ask = false;
        let new = match command {
            Some((Command::Ask, args)) => {
                let input = match self.person_ask(&channel, &info, &message, &args).await {
                    Ok(input) => input,
                    Err(text) => return told(text),
                };
                parts = ask_message(&mut message_id, "ask", ask_parts, &message.text, &input);
                (model, reasoning, ask) = (Some(ASK_MODEL.to_owned()), None, true);
                false
            }
            Some((Command::New, _)) => {
                parts.push(crate::model::MessagePart::new_conversation());
                true
            }
            Some((Command::Skip, _)) => {
                // Not taken by a question above: none waits.
                return told(NOTHING_TO_SKIP_TEXT.to_owned());
            }
            Some((Command::Model, args)) => {
                let words: Vec<&str> = args.split_whitespace().collect();
                let choices = self
                    .turns
                    .offers()
                    .iter()
                    .map(|(_, r)| 1 + r.len())
                    .sum::<usize>();
                if words.is_empty() && channel.questions.is_some() && choices > 1 {
                    // `model` alone where the thread draws questions and there is a choice: the
                    // offers as the platform's own choice control, answered by whoever asked.
                    let input = self.model_picker(
                        &channel.platform,
                        &message.author,
                        model.as_deref(),
                        reasoning.as_deref(),
                    );
                    parts = ask_message(&mut message_id, "pick", pick_parts, &message.text, &input);
                    (model, reasoning, ask) = (Some(ASK_MODEL.to_owned()), None, true);
                    // Refused while a reply is written, as a choice by name is.
                    true
                } else {
                    let Some((m, r)) = words.split_first().filter(|(_, r)| r.len() <= 1) else {
                        return told(self.models_text(
                            model.as_deref(),
                            reasoning.as_deref(),
                            None,
                        ));
                    };
                    let r = r.first().copied();
                    if *m == ASK_MODEL || self.turns.check_selection(Some(m), r).is_err() {
                        let what = match r {
                            Some(r) => format!("{m} with reasoning {r}"),
                            None => (*m).to_owned(),
                        };
                        return told(self.models_text(
                            model.as_deref(),
                            reasoning.as_deref(),
                            Some(&what),
                        ));
                    }
                    parts.push(crate::model::MessagePart::model_choice(m, r));
                    (model, reasoning) = (Some((*m).to_owned()), r.map(str::to_owned));
                    true
                }
            }
            _ => {
                if thread_chose
                    && self
                        .turns
                        .check_selection(model.as_deref(), reasoning.as_deref())
                        .is_err()
                {
                    // The thread's choice is no longer offered (the configuration changed):
                    // never another model in its place.
                    return told(format!(
                        "The model chosen for this thread ({}) is no longer offered. {}",
                        model.as_deref().unwrap_or("?"),
                        self.models_text(None, None, None)
                    ));
                }
                false
            }
        };
        // The files posted with it, stored before the message (first, then its text); those
        // not taken are named to the person, and the rest of the message still goes.
        if !message.files.is_empty() && !new && !ask {
            if existing.is_some()
                && self
                    .taken_before(&chat_id, message_id.as_deref(), &message)
                    .await?
            {
                return Ok(ChannelMessageOutcome::Duplicate);
            }
            let owner = actor.user.as_ref().map(|u| u.as_str()).unwrap_or("");
            let (taken, refused) = crate::agent::files::take_platform_files(
                &self.turns.store,
                &self.turns.config.files,
                outbox.as_deref(),
                &chat_id,
                owner,
                &message.files,
                self.turns.now(),
            )
            .await;
            if !refused.is_empty() {
                notify(crate::agent::files::refused_text(&refused));
            }
            if message.text.trim().is_empty() {
                parts.clear();
            }
            if taken.is_empty() && parts.is_empty() {
                return Ok(ChannelMessageOutcome::Told);
            }
            parts.splice(0..0, taken);
        }
        let context = match (&existing, &outbox) {
            (None, Some(o)) => {
                Self::thread_context(o.as_ref(), &thread_hook, &message.id, &settings).await
            }
            _ => None,
        };
        let speaker = message
            .author
            .name
            .clone()
            .filter(|n| !n.trim().is_empty())
            .or_else(|| Some(message.author.id.clone()));
        let sent = self
            .turns
            .send(
                SendMessage {
                    chat_id: chat_id.clone(),
                    id: message_id,
                    parts,
                    author: actor.user,
                    delivery: crate::model::Delivery::Queue,
                    model,
                    reasoning,
                    channel: Some(channel_ref),
                    speaker,
                    context,
                },
                !new,
            )
            .await;
        let _ = seen_tx.send(match &sent {
            Ok(SendResult::Started(_) | SendResult::Queued { .. }) => Some(Ack::Seen),
            // Taken to the agent's inbox instead (`channel_message`), or a refused `new` (its
            // notice says why).
            Ok(SendResult::Duplicate)
            | Err(Error::AgentChat { .. } | Error::TurnInProgress { .. }) => None,
            Err(_) => Some(Ack::Failed),
        });
        if new && matches!(sent, Err(Error::TurnInProgress { .. })) {
            let outcome = told(COMMAND_BUSY_TEXT.to_owned());
            self.tidy(&chat_id);
            return outcome;
        }
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

    async fn turn_started(
        &self,
        chat: &ChatRow,
        message_id: Option<&str>,
        reply: &UiMessage,
    ) -> Option<TurnWatch> {
        let thread = thread_of(chat)?;
        let outbox = self.outbox(&thread.platform)?;
        let settings = self.registry.settings(&thread.platform);
        // A stored channel message id is `platform-<the platform's id>`.
        let prefix = format!("{}-", thread.platform);
        let platform_id = message_id
            .and_then(|id| id.strip_prefix(&prefix))
            .filter(|_| settings.acks)
            .map(str::to_owned);
        let every = outbox.working_every();
        // An ask writes nothing for the person: it shows no progress sign (no "typing…").
        let ask = reply.metadata.model.as_deref() == Some(ASK_MODEL);
        // The first progress sign is shown in order (after Working, before any text); the
        // repeats run beside the turn until it ends.
        let working = {
            let (outbox, thread) = (outbox.clone(), thread.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    if !ask {
                        Self::progress(outbox.as_ref(), &thread).await;
                    }
                }
            })
            .abort_handle()
        };
        let watch = settings.stream.then(|| TurnWatch {
            text: mpsc::unbounded_channel().0,
            drafts: Default::default(),
            posted: Default::default(),
        });
        let (watch, streamer) = match (watch, self.me.get()) {
            (Some(mut w), Some(me)) => {
                let (tx, rx) = mpsc::unbounded_channel();
                w.text = tx;
                let task = Streamer {
                    channels: me.clone(),
                    chat: chat.chat_id.clone(),
                    outbox: outbox.clone(),
                    thread: thread.clone(),
                    every: settings.stream_interval,
                    drafts: w.drafts.clone(),
                    posted: w.posted.clone(),
                    own_key: EngineJob::Deliver {
                        chat: chat.chat_id.clone(),
                        message: reply.id.clone(),
                        from: delivery::unposted_from(reply),
                        to: 0,
                        max_steps: false,
                    }
                    .key(),
                };
                (Some(w), Some(tokio::spawn(task.run(rx))))
            }
            _ => (None, None),
        };
        {
            let mut all = self.progress.lock().expect("progress");
            let p = all
                .entry(chat.chat_id.clone())
                .or_insert_with(Progress::new);
            if let Some(old) = p.working.replace(working) {
                old.abort();
            }
            if let Some(old) = std::mem::replace(&mut p.stream, streamer) {
                old.abort();
            }
            p.queue_noted = false;
            if platform_id.is_some() {
                p.current = platform_id.clone();
            }
        }
        self.show(&chat.chat_id, async move {
            if let Some(id) = platform_id {
                Self::ack(outbox.as_ref(), &thread, &id, Ack::Working).await;
            }
            if !ask {
                Self::progress(outbox.as_ref(), &thread).await;
            }
        });
        watch
    }

    async fn turn_ended(&self, chat: &ChatRow, reply: &UiMessage, state: TurnState, why: EndWhy) {
        let Some(shown) = self.show_turn_end(chat, reply, state, why).await else {
            return;
        };
        let (posted, behind) = shown.await.unwrap_or_default();
        debug!(chat_id = %chat.chat_id, reply = %reply.id, waiting = state == TurnState::Awaiting, behind, posted = ?posted, "a turn's end shown");
        self.tidy(&chat.chat_id);
        if behind || state != TurnState::Awaiting {
            return;
        }
        match self.questions.render_pending(&chat.chat_id).await {
            Ok(Drawn::Done) => {}
            // Left to the delivery job (kept), whose next attempt draws them after the text: a
            // question a render failed to show is owed like the text before it.
            Ok(Drawn::Failed(_)) => return,
            Err(e) => {
                error!(chat_id = %chat.chat_id, error = %e, "rendering the questions failed");
                return;
            }
        }
        if let Some(key) = posted {
            self.delivered(&chat.chat_id, &key).await;
        }
    }

    async fn turn_interrupted(&self, chat: &ChatRow, reply: &UiMessage) {
        // Queued in the thread's order, not awaited: the caller may be a message of this very
        // thread whose Seen waits in the queue until its send returns (regression: the send
        // that took an expired lease over waited here for the notice, behind its own Seen, and
        // the chat — then the job worker sweeping it — hung for good).
        let _ = self
            .show_turn_end(chat, reply, TurnState::Idle, EndWhy::Reply)
            .await;
    }
}

impl Channels {
    /// Queues the end of a turn in `chat`'s thread (the reply, then Done or Failed, after
    /// everything shown before); the receiver tells when it is shown: the key of the delivery
    /// it posted, and whether it was left behind a reply owed before it. `None` outside a
    /// channel.
    async fn show_turn_end(
        &self,
        chat: &ChatRow,
        reply: &UiMessage,
        state: TurnState,
        why: EndWhy,
    ) -> Option<tokio::sync::oneshot::Receiver<(Option<String>, bool)>> {
        chat.channel.as_ref()?;
        let (current, streamer) = {
            let mut all = self.progress.lock().expect("progress");
            all.get_mut(&chat.chat_id)
                .map(|p| {
                    if let Some(w) = p.working.take() {
                        w.abort();
                    }
                    (p.current.take(), p.stream.take())
                })
                .unwrap_or_default()
        };
        let waiting = state == TurnState::Awaiting;
        // The message a turn answers keeps ⏳ while a question of the turn waits: its ✅ (or ❌)
        // comes when the turn continued after the answer ends.
        let current = match current {
            Some(id) if waiting => {
                self.awaiting_lock().insert(chat.chat_id.clone(), id);
                None
            }
            Some(id) => Some(id),
            None if waiting => None,
            None => {
                let kept = self.awaiting_lock().remove(&chat.chat_id);
                match kept {
                    Some(id) => Some(id),
                    None => self.answered_message(chat, reply).await,
                }
            }
        };
        // The turn's text has ended (its watch is gone): the streamer hands its stream back.
        let stream = match streamer {
            Some(task) => task.await.ok().flatten(),
            None => None,
        };
        // The reply and then Done (or Failed), after everything shown before; awaited by a
        // turn's end, so the replies of one chat are posted in the order their turns ended.
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let this = self.me.get().and_then(std::sync::Weak::upgrade)?;
        {
            let (chat_row, reply, why) = (chat.clone(), reply.clone(), why);
            self.show(&chat.chat_id, async move {
                // Looked at in the show queue, where this process's earlier replies are posted
                // (and their jobs removed): a job still there was given up here, or left by a
                // process that died. This reply waits for it: its own job posts it after, then
                // draws its questions.
                let behind = this.owed_before(&chat_row, &reply, why, waiting).await;
                let posted = if behind {
                    None
                } else {
                    this.deliver_reply(&chat_row, &reply, why, waiting, stream)
                        .await
                };
                if let Some((key, ..)) = &posted
                    && !waiting
                {
                    // Removed before the next reply in the queue looks.
                    this.delivered(&chat_row.chat_id, key).await;
                }
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
                // The progress sign off, once the reply (or its failure) is shown.
                if let Some(thread) = thread_of(&chat_row)
                    && let Some(outbox) = this.outbox(&thread.platform)
                    && let Err(e) = outbox.idle(&thread).await
                {
                    debug!(thread = %thread.id, error = %e, "taking the progress sign off failed");
                }
                if let Some((_, from, ids)) = &posted {
                    this.note_posted(&chat_row.chat_id, &reply.id, *from, ids.clone())
                        .await;
                }
                let _ = done_tx.send((posted.map(|(key, ..)| key), behind));
            });
        }
        Some(done)
    }
}
