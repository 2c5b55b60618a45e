//! Live chat events (`GET /api/chats/{id}/events`) for many listeners at little cost.
//!
//! A listener holds only a cursor into its chat's stream of changes: each watched chat has one
//! task that learns of changes once — from this process's engine and, for changes made by other
//! processes, from the store's pushed notices (PostgreSQL's `LISTEN`/`NOTIFY`) or by polling it —
//! reads the messages changed since it last looked, serialises each change once and fans the
//! frame out to every listener of the chat. When a chat's last listener
//! leaves, its task and everything it kept go. A poll reads the chat's row and, only when its
//! version moved, the messages written since. The number of streams is capped in total and per
//! caller (`max_event_streams`, `max_event_streams_per_user`); past a cap a new stream gets 429.
//! Anonymous callers are counted per client address, so one client's streams cannot lock the
//! others out.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use frogbot_core::agent::{ChatEvent, Engine};
use frogbot_core::model::{ChatId, TurnState, UiMessage, UserId};
use serde_json::json;
use tokio::sync::{broadcast, mpsc};

/// How often a watched chat is polled for changes made by other processes, by default.
const POLL: Duration = Duration::from_secs(1);
/// … when the store pushes other processes' changes: only a fallback for notices lost with a
/// connection (each loss also sends a resync, which reads every watched chat at once).
const POLL_WITH_PUSH: Duration = Duration::from_secs(30);
/// Frames a listener may fall behind before its stream ends (the client reconnects and reloads).
const LAG_FRAMES: usize = 1024;
/// A comment line sent on an idle stream, so proxies and clients see it is alive.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The caps on live event streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamLimits {
    /// Streams open at once, in total.
    pub total: usize,
    /// Streams open at once per caller (anonymous callers count as one).
    pub per_user: usize,
    /// How often a watched chat is read for other processes' changes (`None`: `POLL`, or
    /// `POLL_WITH_PUSH` when the store pushes changes).
    pub poll: Option<Duration>,
}

/// Why a stream was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StreamRefused {
    /// The server's cap is reached.
    #[error("too many live event streams on this server (max_event_streams = {0})")]
    Total(usize),
    /// The caller's cap is reached.
    #[error("too many live event streams for this caller (max_event_streams_per_user = {0})")]
    PerUser(usize),
}

/// The live streams of one server: one fan-out per watched chat.
#[derive(Clone)]
pub struct ChatWatchers {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ChatWatchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.inner.state.lock().expect("watchers");
        f.debug_struct("ChatWatchers")
            .field("chats", &state.chats.len())
            .field("streams", &state.total)
            .finish()
    }
}

/// Whose budget a stream counts against: a user, or an anonymous client by its address (`None`
/// when the server does not know it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Caller {
    User(UserId),
    Anonymous(Option<std::net::IpAddr>),
}

struct Inner {
    engine: Engine,
    limits: StreamLimits,
    /// How often a watched chat is read for other processes' changes.
    poll: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    chats: HashMap<ChatId, Watched>,
    total: usize,
    per_user: HashMap<Caller, usize>,
    dispatcher: Option<tokio::task::JoinHandle<()>>,
}

/// What a watched chat's task learns: an event of this process's engine, or a notice that the
/// chat changed somewhere (read it).
enum Input {
    Event(ChatEvent),
    Changed,
}

/// A watched chat: the fan-out of its frames and its task (stopped when the last listener leaves).
struct Watched {
    frames: broadcast::Sender<Bytes>,
    local: mpsc::UnboundedSender<Input>,
    listeners: usize,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ChatWatchers {
    /// Watchers over `engine`'s chats with `limits`.
    pub fn new(engine: Engine, limits: StreamLimits) -> Self {
        let pushed = engine.chats().changes().is_some();
        let poll = limits
            .poll
            .unwrap_or(if pushed { POLL_WITH_PUSH } else { POLL });
        Self {
            inner: Arc::new(Inner {
                engine,
                limits,
                poll,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// How many streams are open (for tests and operators).
    pub fn open_streams(&self) -> usize {
        self.inner.state.lock().expect("watchers").total
    }

    /// How many chats are watched.
    pub fn watched_chats(&self) -> usize {
        self.inner.state.lock().expect("watchers").chats.len()
    }

    /// Opens a stream of `chat`'s changes for `user` (anonymous: the client at `client`),
    /// starting with its `state` as of the chat row the caller read at `version`: everything
    /// written after that read is streamed.
    pub fn open(
        &self,
        chat: &ChatId,
        user: Option<&UserId>,
        client: Option<std::net::IpAddr>,
        state: TurnState,
        version: i64,
    ) -> Result<
        impl futures::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static,
        StreamRefused,
    > {
        let caller = match user {
            Some(u) => Caller::User(u.clone()),
            None => Caller::Anonymous(client),
        };
        let receiver = {
            let mut st = self.inner.state.lock().expect("watchers");
            if st.total >= self.inner.limits.total {
                return Err(StreamRefused::Total(self.inner.limits.total));
            }
            let mine = st.per_user.get(&caller).copied().unwrap_or(0);
            if mine >= self.inner.limits.per_user {
                return Err(StreamRefused::PerUser(self.inner.limits.per_user));
            }
            st.total += 1;
            *st.per_user.entry(caller.clone()).or_default() += 1;
            if st.dispatcher.is_none() {
                st.dispatcher = Some(tokio::spawn(dispatch(Arc::downgrade(&self.inner))));
            }
            let poll = self.inner.poll;
            let watched = st
                .chats
                .entry(chat.clone())
                .or_insert_with(|| watch(&self.inner.engine, chat, state, version, poll));
            watched.listeners += 1;
            watched.frames.subscribe()
        };
        let guard = Listener {
            _open: crate::metrics::OpenStream::new("events"),
            inner: self.inner.clone(),
            chat: chat.clone(),
            caller,
        };
        let first = frame(&json!({"type": "state", "state": state}));
        let stopping = self.inner.engine.clone();
        let stream = futures::stream::unfold(
            (Some(first), receiver, guard),
            move |(first, mut receiver, guard)| {
                let stopping = stopping.clone();
                async move {
                    if let Some(first) = first {
                        return Some((Ok(first), (None, receiver, guard)));
                    }
                    if stopping.is_stopping() {
                        return None;
                    }
                    let next = tokio::time::timeout(KEEP_ALIVE, receiver.recv()).await;
                    let bytes = match next {
                        Err(_) => Bytes::from_static(b": keep-alive\n\n"),
                        Ok(Ok(bytes)) => bytes,
                        // Fell too far behind, or the chat's watch ended: the client reconnects
                        // and reloads the chat.
                        Ok(Err(_)) => return None,
                    };
                    Some((Ok(bytes), (None, receiver, guard)))
                }
            },
        );
        Ok(stream)
    }
}

/// One open stream; dropping it (the client went away) releases its place and, for the chat's
/// last listener, the chat's watch.
struct Listener {
    _open: crate::metrics::OpenStream,
    inner: Arc<Inner>,
    chat: ChatId,
    caller: Caller,
}

impl Drop for Listener {
    fn drop(&mut self) {
        let mut st = self.inner.state.lock().expect("watchers");
        st.total = st.total.saturating_sub(1);
        if let Some(n) = st.per_user.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                st.per_user.remove(&self.caller);
            }
        }
        let last = st.chats.get_mut(&self.chat).is_some_and(|w| {
            w.listeners = w.listeners.saturating_sub(1);
            w.listeners == 0
        });
        if last {
            st.chats.remove(&self.chat);
        }
        if st.chats.is_empty() {
            // Nothing watched: the dispatcher stops until the next stream opens.
            if let Some(d) = st.dispatcher.take() {
                d.abort();
            }
            st.chats.shrink_to_fit();
            st.per_user.shrink_to_fit();
        }
    }
}

/// `{"type": "ack", "messageId", "ack"}`: a user message's acknowledgement changed.
fn ack_frame(id: &str, ack: frogbot_core::model::Ack) -> String {
    format!(
        "data: {}\n\n",
        json!({"type": "ack", "messageId": id, "ack": ack})
    )
}

fn frame(value: &serde_json::Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

/// The next notice `rx` brings, or never when the store pushes none (`rx` is `None`).
pub(crate) async fn pushed<T: Clone>(
    rx: &mut Option<broadcast::Receiver<T>>,
) -> Result<T, broadcast::error::RecvError> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Routes this process's engine events, and the store's notices of changes made anywhere, to
/// the watched chats.
async fn dispatch(inner: std::sync::Weak<Inner>) {
    let (mut events, mut changes) = match inner.upgrade() {
        Some(i) => (i.engine.chats().subscribe(), i.engine.chats().changes()),
        None => return,
    };
    loop {
        let input = tokio::select! {
            event = events.recv() => match event {
                Ok(ChatEvent::State { chat_id, state }) => {
                    (Some(chat_id.clone()), Input::Event(ChatEvent::State { chat_id, state }))
                }
                Ok(ChatEvent::Message { chat_id, message }) => {
                    (Some(chat_id.clone()), Input::Event(ChatEvent::Message { chat_id, message }))
                }
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::debug!(missed = n, "live events lagged; every watched chat is read");
                    (None, Input::Changed)
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            change = pushed(&mut changes) => match change {
                Ok(frogbot_core::agent::views::Change::Chat(chat)) => (Some(chat), Input::Changed),
                // A job scheduled: the worker's business, not a chat's.
                Ok(frogbot_core::agent::views::Change::Job { .. }) => continue,
                Ok(frogbot_core::agent::views::Change::Resync) => (None, Input::Changed),
                Err(broadcast::error::RecvError::Lagged(_)) => (None, Input::Changed),
                Err(broadcast::error::RecvError::Closed) => {
                    changes = None;
                    continue;
                }
            },
        };
        let Some(inner) = inner.upgrade() else { return };
        let st = inner.state.lock().expect("watchers");
        match input {
            (Some(chat), input) => {
                if let Some(w) = st.chats.get(&chat) {
                    let _ = w.local.send(input);
                }
            }
            // Notices were lost: every watched chat reads what changed.
            (None, _) => {
                for w in st.chats.values() {
                    let _ = w.local.send(Input::Changed);
                }
            }
        }
    }
}

/// Starts watching `chat`: its task turns local events and polled changes into frames.
fn watch(
    engine: &Engine,
    chat: &ChatId,
    state: TurnState,
    version: i64,
    poll: Duration,
) -> Watched {
    let (frames, _) = broadcast::channel(LAG_FRAMES);
    let (local, events) = mpsc::unbounded_channel();
    let task = tokio::spawn(run_watch(
        engine.clone(),
        chat.clone(),
        (state, version),
        frames.clone(),
        events,
        poll,
    ));
    Watched {
        frames,
        local,
        listeners: 0,
        task,
    }
}

/// What a watch has sent: each message's last version (by a hash of its JSON), the last state,
/// and the chat's version it has read up to.
struct Seen {
    versions: HashMap<String, u64>,
    state: TurnState,
    version: i64,
    /// User messages taken by a turn (not queued) since the last reply: what a reply marks done.
    unanswered: Vec<String>,
    /// The latest reply's outcome (done or failed), told to `unanswered` once that reply is final:
    /// when the chat stops running, or a promoted message starts the next turn.
    reply: Option<frogbot_core::model::Ack>,
    /// The chat is bound to an external agent: its acknowledgements are the ones the agent set
    /// (stored on each message), never derived from turns.
    agent: bool,
}

impl Seen {
    /// The `ack` frames of the messages the latest reply answered.
    fn answered(&mut self, out: &mut String) {
        if let Some(ack) = self.reply.take() {
            for id in self.unanswered.drain(..) {
                out.push_str(&ack_frame(&id, ack));
            }
        }
    }
}

impl Seen {
    /// The frames for `message` unless this version was sent already: the message (a user
    /// message with its `metadata.ack`), and for a reply the `ack` frames of the user messages it
    /// answers.
    fn message(&mut self, message: &UiMessage) -> Option<Bytes> {
        use frogbot_core::model::{Ack, MessageStatus, Role};
        // A version sent already changes nothing (the poll finds what the local events told).
        let plain = serde_json::to_string(message).ok()?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        plain.hash(&mut h);
        let version = h.finish();
        if self.versions.insert(message.id.clone(), version) == Some(version) {
            return None;
        }
        let mut acks = String::new();
        let mut message = std::borrow::Cow::Borrowed(message);
        match message.role {
            _ if self.agent => {}
            Role::User => {
                let queued = message.metadata.status == Some(MessageStatus::Queued);
                if !queued {
                    // A promoted message: the reply before it is final.
                    self.answered(&mut acks);
                }
                if !queued && !self.unanswered.contains(&message.id) {
                    self.unanswered.push(message.id.clone());
                }
                let ack = if !queued && self.state == TurnState::Running {
                    Ack::Working
                } else {
                    Ack::Seen
                };
                message.to_mut().metadata.ack = Some(ack);
            }
            Role::Assistant => {
                self.reply = Some(if message.metadata.error.is_some() {
                    Ack::Failed
                } else {
                    Ack::Done
                });
                if self.state != TurnState::Running {
                    self.answered(&mut acks);
                }
            }
        }
        let text = match message {
            std::borrow::Cow::Borrowed(_) => plain,
            std::borrow::Cow::Owned(m) => serde_json::to_string(&m).ok()?,
        };
        let mut out = format!("data: {{\"type\":\"message\",\"message\":{text}}}\n\n");
        out.push_str(&acks);
        Some(Bytes::from(out))
    }

    /// The frame of a state change; a turn that starts marks the message it took `working`.
    fn state(&mut self, state: TurnState) -> Option<Bytes> {
        if state == self.state {
            return None;
        }
        self.state = state;
        let mut out = format!("data: {}\n\n", json!({"type": "state", "state": state}));
        if self.agent {
            return Some(Bytes::from(out));
        }
        if state != TurnState::Running {
            self.answered(&mut out);
        }
        if state == TurnState::Running
            && let Some(id) = self.unanswered.last()
        {
            out.push_str(&ack_frame(id, frogbot_core::model::Ack::Working));
        }
        Some(Bytes::from(out))
    }
}

async fn run_watch(
    engine: Engine,
    chat: ChatId,
    (state, version): (TurnState, i64),
    frames: broadcast::Sender<Bytes>,
    mut local: mpsc::UnboundedReceiver<Input>,
    poll: Duration,
) {
    // Listeners load the chat themselves: what is written after the read that opened the stream
    // is streamed. The baseline is that read, not a later one of this task: a write landing
    // between the two was lost (a turn started on another process never showed its message).
    let mut seen = Seen {
        versions: HashMap::new(),
        state,
        version,
        unanswered: Vec::new(),
        reply: None,
        agent: matches!(engine.chats().get(&chat).await, Ok(Some(row)) if row.agent.is_some()),
    };
    let mut tick = tokio::time::interval(poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            input = local.recv() => {
                let out = match input {
                    None => return,
                    Some(Input::Event(ChatEvent::State { state, .. })) => seen.state(state),
                    Some(Input::Event(ChatEvent::Message { message, .. })) => seen.message(&message),
                    Some(Input::Event(_)) => None,
                    Some(Input::Changed) => {
                        read_changes(&engine, &chat, &mut seen, &frames).await;
                        // The next poll counts from this read.
                        tick.reset();
                        None
                    }
                };
                if let Some(bytes) = out {
                    let _ = frames.send(bytes);
                }
            }
            _ = tick.tick() => read_changes(&engine, &chat, &mut seen, &frames).await,
        }
    }
}

/// Reads what changed in `chat` since `seen` (by anyone: other processes, and anything this
/// process's events missed) and sends its frames: the chat's version says whether anything was
/// written, and only what is newer is read.
async fn read_changes(
    engine: &Engine,
    chat: &ChatId,
    seen: &mut Seen,
    frames: &broadcast::Sender<Bytes>,
) {
    let Ok(Some(row)) = engine.chats().get(chat).await else {
        return;
    };
    seen.agent = row.agent.is_some();
    // The messages first, then the state: a message the read finds with a turn already running
    // on it is shown as the person's client would have seen it live — `seen`, then the state
    // frame that marks it `working` — whichever of this read and the local events comes first.
    if row.version != seen.version
        && let Ok(changes) = engine.chats().changes_since(chat, seen.version).await
    {
        seen.version = changes.version;
        for m in &changes.messages {
            if let Some(bytes) = seen.message(&m.message) {
                let _ = frames.send(bytes);
            }
        }
    }
    if let Some(bytes) = seen.state(row.state(engine.now())) {
        let _ = frames.send(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use frogbot_core::model::{Ack, MessagePart, Role};

    fn msg(id: &str, role: Role, ack: Option<Ack>) -> UiMessage {
        let mut m = UiMessage {
            id: id.into(),
            role,
            parts: vec![MessagePart::text("x")],
            metadata: Default::default(),
        };
        m.metadata.ack = ack;
        m
    }

    fn seen(agent: bool) -> Seen {
        Seen {
            versions: HashMap::new(),
            state: TurnState::Idle,
            version: 0,
            unanswered: Vec::new(),
            reply: None,
            agent,
        }
    }

    /// In an agent's chat the frames carry the acks the agent set, never ones derived from
    /// turns: a person's message not taken yet has none, and the agent's message acks nothing.
    #[test]
    fn an_agents_chat_streams_only_the_acks_its_agent_set() {
        let mut s = seen(true);
        let f =
            String::from_utf8(s.message(&msg("p1", Role::User, None)).unwrap().to_vec()).unwrap();
        assert!(!f.contains("\"ack\""), "{f}");
        let f = String::from_utf8(
            s.message(&msg("a1", Role::Assistant, None))
                .unwrap()
                .to_vec(),
        )
        .unwrap();
        assert!(!f.contains("\"type\":\"ack\""), "{f}");
        let f = String::from_utf8(
            s.message(&msg("p1", Role::User, Some(Ack::Working)))
                .unwrap()
                .to_vec(),
        )
        .unwrap();
        assert!(f.contains("\"ack\":\"working\""), "{f}");
        let f = String::from_utf8(s.state(TurnState::Running).unwrap().to_vec()).unwrap();
        assert!(!f.contains("\"type\":\"ack\""), "{f}");
        // FrogBot's own chats derive them as before.
        let mut s = seen(false);
        let f =
            String::from_utf8(s.message(&msg("p1", Role::User, None)).unwrap().to_vec()).unwrap();
        assert!(f.contains("\"ack\":\"seen\""), "{f}");
    }
}
