//! FrogBot's cross-crate end-to-end suite. The tests live in `tests/tests/`; this library holds
//! what they share. Not published.
//!
//! What is here:
//! - message and question shorthands ([`chat`], [`msg`], [`started`], [`queued`], [`ask_input`],
//!   [`answer`]), and [`texts`] / [`wait_quiet`] / [`eventually`] to read and wait on a chat;
//! - [`TestModel`]: a [`Model`] that replies by script, records every call (awaitable with
//!   [`TestModel::wait_calls`]), can be held at a gate, and measures how many steps run at once
//!   through a [`Concurrency`] probe that several models (several engines) may share;
//! - [`test_engine`]: an [`Engine`] over its own store handle (its own pool: another "process" as
//!   far as the database is concerned) offering one `TestModel` as `main`;
//! - [`CrashChild`]: a real child process (the `frogbot-crash-child` binary of this package) that
//!   runs one turn on a database and is then SIGKILLed;
//! - [`PausingStore`]: a store wrapper that holds the engine once at a [`PausePoint`] between two
//!   of its writes, so a test can act inside that window;
//! - [`backends!`]: instantiates test functions taking a database URL once for SQLite (module
//!   `sqlite`) and once for PostgreSQL (module `postgres`, skipped when PostgreSQL is missing).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc, watch};

use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptEvent, call, reply};
use frogbot_core::agent::{
    Engine, EngineConfig, Model, ModelEvent, ModelMessage, ModelOffer, ModelRequest, ModelStream,
    SendMessage, Sent, TurnHandle,
};
use frogbot_core::model::{
    ChatId, Delivery, MessagePart, Millis, QUESTION_TOOL, QuestionAnswer, QuestionOutput, Role,
    TurnState, UserId,
};
use frogbot_core::store::DynStore;

mod pausing;
pub use pausing::{PausePoint, PausingStore};

/// The id of the question call every scripted `ask` makes.
pub const QUESTION_CALL: &str = "q1";

/// A chat id.
pub fn chat(id: &str) -> ChatId {
    ChatId::new(id).expect("a valid chat id")
}

/// A text message to `chat` from `who` (anonymous when `None`), queued behind a running turn.
pub fn msg(chat: &ChatId, who: Option<&str>, text: &str) -> SendMessage {
    SendMessage {
        chat_id: chat.clone(),
        id: None,
        parts: vec![MessagePart::text(text)],
        author: who.map(UserId::new),
        delivery: Delivery::Queue,
        model: None,
        reasoning: None,
        channel: None,
    }
}

/// The turn a sent message started (panics when it was queued).
pub fn started(s: Sent) -> TurnHandle {
    match s {
        Sent::Started(h) => h,
        Sent::Queued { message_id, .. } => {
            panic!("expected a turn to start, but {message_id} was queued")
        }
    }
}

/// The id and delivery of a queued message (panics when it started a turn).
pub fn queued(s: Sent) -> (String, Delivery) {
    match s {
        Sent::Queued {
            message_id,
            delivery,
        } => (message_id, delivery),
        Sent::Started(h) => panic!(
            "expected the message to be queued, but it started a turn ({})",
            h.message_id
        ),
    }
}

/// The question tool input every scripted `ask` uses: one question, `yes` or `no`.
pub fn ask_input() -> Value {
    json!({"questions": [{"header": "Go", "question": "Go on?",
                          "options": [{"label": "yes"}, {"label": "no"}]}]})
}

/// An answer to [`ask_input`]'s question.
pub fn answer(label: &str) -> QuestionOutput {
    QuestionOutput {
        answers: vec![QuestionAnswer {
            header: "Go".into(),
            selected: vec![label.into()],
        }],
    }
}

/// The text of the request's last user message.
pub fn last_user(req: &ModelRequest) -> String {
    req.messages
        .iter()
        .rev()
        .find_map(|m| match m {
            ModelMessage::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Whether the request continues after a tool result (the step after an answered question).
pub fn after_tool(req: &ModelRequest) -> bool {
    matches!(req.messages.last(), Some(ModelMessage::Tool { .. }))
}

/// The chat's messages in stored order as (role, text, queued).
pub async fn texts(store: &DynStore, chat: &ChatId) -> Vec<(Role, String, bool)> {
    store
        .list_messages(chat)
        .await
        .expect("list messages")
        .into_iter()
        .map(|m| (m.message.role, m.message.text(), m.queued))
        .collect()
}

/// Polls `check` every 20 ms until it holds; panics naming `what` after `timeout`.
pub async fn eventually(what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (at most 30 s) until the chat has no turn running and nothing queued, or a question waits.
pub async fn wait_quiet(store: &DynStore, chat: &ChatId) {
    eventually(
        "the chat to go quiet",
        Duration::from_secs(30),
        async || {
            let row = store.get_chat(chat).await.expect("get chat");
            let state = row
                .map(|r| r.state(frogbot_core::model::now_millis()))
                .unwrap_or(TurnState::Idle);
            match state {
                TurnState::Running => false,
                TurnState::Awaiting => true,
                TurnState::Idle => store
                    .queued_messages(chat)
                    .await
                    .expect("queued messages")
                    .is_empty(),
            }
        },
    )
    .await;
}

// ---- a probing model -----------------------------------------------------------------------------

/// Counts the model steps in progress, and the most ever seen at once. Share one between the
/// models of several engines to see whether two steps of one chat ever overlapped.
#[derive(Debug, Default)]
pub struct Concurrency {
    now: AtomicUsize,
    max: AtomicUsize,
}

impl Concurrency {
    /// The most steps that were ever in progress at once.
    pub fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }

    /// Steps in progress now.
    pub fn current(&self) -> usize {
        self.now.load(Ordering::SeqCst)
    }

    fn enter(self: &Arc<Self>) -> StepGuard {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        StepGuard(self.clone())
    }
}

/// Leaves the probe when the step's stream is dropped.
struct StepGuard(Arc<Concurrency>);

impl Drop for StepGuard {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One call a [`TestModel`] received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The text of the request's last user message.
    pub text: String,
    /// Whether it continued after a tool result.
    pub after_tool: bool,
}

/// A scripted [`Model`] for the e2e tests. Keyed on the request's last user text:
/// - after a tool result (an answered question): replies `"{name} continues: {text}"`;
/// - text containing `ask`: calls the question tool (call id [`QUESTION_CALL`], [`ask_input`]);
/// - otherwise: replies `"{name} says: {text}"`.
///
/// A step whose text contains `gate` first waits for a permit of [`TestModel::gate`]; every step
/// first waits `step_pause`. Each step counts in the [`Concurrency`] probe from the call until the
/// engine drops its stream.
#[derive(Clone, Debug)]
pub struct TestModel {
    name: String,
    /// Steps whose text contains `gate` wait for a permit of this semaphore.
    pub gate: Arc<Semaphore>,
    /// The concurrency probe.
    pub probe: Arc<Concurrency>,
    step_pause: Duration,
    calls: watch::Sender<Vec<Call>>,
}

impl TestModel {
    /// A model named `name` with its own probe and no step pause.
    pub fn new(name: &str) -> Self {
        Self::with_probe(name, Arc::default(), Duration::ZERO)
    }

    /// A model that shares `probe` and spends `step_pause` in every step.
    pub fn with_probe(name: &str, probe: Arc<Concurrency>, step_pause: Duration) -> Self {
        Self {
            name: name.into(),
            gate: Arc::new(Semaphore::new(0)),
            probe,
            step_pause,
            calls: watch::channel(Vec::new()).0,
        }
    }

    /// Every call so far, oldest first.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.borrow().clone()
    }

    /// Waits (at most 30 s) until `n` calls were made; returns them all.
    pub async fn wait_calls(&self, n: usize) -> Vec<Call> {
        let mut rx = self.calls.subscribe();
        let waited = tokio::time::timeout(Duration::from_secs(30), rx.wait_for(|c| c.len() >= n))
            .await
            .map(|got| got.is_ok());
        assert!(
            matches!(waited, Ok(true)),
            "model {} got {:?}, waited for {n} calls",
            self.name,
            self.calls()
        );
        self.calls()
    }

    fn script(&self, req: &ModelRequest) -> Vec<ScriptEvent> {
        let text = last_user(req);
        let mut events = Vec::new();
        if !self.step_pause.is_zero() {
            events.push(ScriptEvent::Pause(self.step_pause));
        }
        if text.contains("gate") {
            events.push(ScriptEvent::Gate(self.gate.clone()));
        }
        if after_tool(req) {
            events.extend(reply(&format!("{} continues: {text}", self.name)));
        } else if text.contains("ask") {
            events.extend(call(QUESTION_CALL, QUESTION_TOOL, ask_input()));
        } else {
            events.extend(reply(&format!("{} says: {text}", self.name)));
        }
        events
    }
}

#[async_trait]
impl Model for TestModel {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, BoxError> {
        let guard = self.probe.enter();
        let events = self.script(&request);
        self.calls.send_modify(|c| {
            c.push(Call {
                text: last_user(&request),
                after_tool: after_tool(&request),
            })
        });
        let stream = futures::stream::iter(events)
            .then(|e| async move {
                match e {
                    ScriptEvent::Event(e) => Some(Ok::<ModelEvent, BoxError>(e)),
                    ScriptEvent::Pause(d) => {
                        tokio::time::sleep(d).await;
                        None
                    }
                    ScriptEvent::Fail(m) => Some(Err(BoxError::from(m))),
                    ScriptEvent::Gate(g) => {
                        if let Ok(p) = g.acquire().await {
                            p.forget();
                        }
                        None
                    }
                }
            })
            .filter_map(move |e| {
                // The guard lives as long as the stream: the step counts until it is dropped.
                let _in_step = &guard;
                futures::future::ready(e)
            });
        Ok(stream.boxed())
    }
}

/// An engine over its own store handle on `url` offering `model` as `main`, with turn leases of
/// `turn_lease_ms`.
pub async fn test_engine(url: &str, model: &TestModel, turn_lease_ms: Millis) -> Engine {
    let store = frogbot_testkit::open_store(url).await;
    engine_over(store, model, turn_lease_ms)
}

/// An engine over `store` offering `model` as `main`, with turn leases of `turn_lease_ms`.
pub fn engine_over(store: DynStore, model: &TestModel, turn_lease_ms: Millis) -> Engine {
    Engine::new(
        store,
        vec![ModelOffer {
            id: "main".into(),
            model: Arc::new(model.clone()),
            reasoning: vec![],
        }],
        vec![],
        EngineConfig {
            default_model: "main".into(),
            turn_lease_ms,
            ..Default::default()
        },
    )
}

// ---- a FrogBot process to kill -------------------------------------------------------------------

/// What the crash child prints once its step streamed text that is checkpointed, and then hangs.
pub const STEP_STARTED: &str = "STEP-STARTED";
/// What the crash child prints once its turn waits on a question.
pub const AWAITING: &str = "AWAITING";
/// The text the crash child's hanging step streams (in two deltas) before it hangs.
pub const PARTIAL_TEXT: [&str; 2] = ["thinking… ", "still thinking"];

/// A running `frogbot-crash-child`: `frogbot-crash-child DB_URL CHAT_ID TURN_LEASE_MS TEXT` sends
/// `TEXT` to the chat and runs the turn by script (`hang`: streams [`PARTIAL_TEXT`], waits until
/// it is checkpointed, prints [`STEP_STARTED`] and hangs mid-step; `ask`: asks a question, prints
/// [`AWAITING`] when the turn waits, and sleeps). The child exits when its stdin closes, so a
/// test that dies takes it along; dropping this kills it.
#[derive(Debug)]
pub struct CrashChild {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    stderr: Arc<Mutex<String>>,
    _stdin: Option<ChildStdin>,
}

impl CrashChild {
    /// Starts the child binary at `bin` (an integration test passes
    /// `env!("CARGO_BIN_EXE_frogbot-crash-child")`).
    pub fn spawn(bin: &str, url: &str, chat: &ChatId, turn_lease_ms: Millis, text: &str) -> Self {
        let mut child = Command::new(bin)
            .args([url, chat.as_str(), &turn_lease_ms.to_string(), text])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {bin}: {e}"));
        let (tx, lines) = mpsc::unbounded_channel();
        let stdout = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().expect("piped stderr");
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .expect("stderr lock")
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let stdin = child.stdin.take();
        Self {
            child,
            lines,
            stderr,
            _stdin: stdin,
        }
    }

    /// Waits for the child to print the line `want` (an event, not a sleep); panics with the
    /// child's stderr when it prints something else, exits, or stays silent for `timeout`.
    pub async fn expect_line(&mut self, want: &str, timeout: Duration) {
        match tokio::time::timeout(timeout, self.lines.recv()).await {
            Ok(Some(line)) if line == want => {}
            Ok(Some(line)) => panic!(
                "the child printed {line:?}, expected {want:?}; stderr:\n{}",
                self.stderr()
            ),
            Ok(None) => {
                let status = self.child.wait().ok();
                panic!(
                    "the child exited ({status:?}) before printing {want:?}; stderr:\n{}",
                    self.stderr()
                )
            }
            Err(_) => panic!(
                "the child printed nothing for {timeout:?}, expected {want:?}; stderr:\n{}",
                self.stderr()
            ),
        }
    }

    /// What the child wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr lock").clone()
    }

    /// Kills the child with SIGKILL (no cleanup runs in it) and reaps it. Panics if it had already
    /// exited on its own.
    pub fn kill(&mut self) -> ExitStatus {
        use std::os::unix::process::ExitStatusExt;
        if let Some(status) = self.child.try_wait().expect("poll child") {
            panic!(
                "the child exited on its own ({status}) before the kill; stderr:\n{}",
                self.stderr()
            );
        }
        self.child.kill().expect("SIGKILL the child");
        let status = self.child.wait().expect("reap the child");
        assert_eq!(
            status.signal(),
            Some(9),
            "the child died of SIGKILL: {status}"
        );
        status
    }
}

impl Drop for CrashChild {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Instantiates `async fn NAME(url: &str)` test functions for both backends: `sqlite::NAME` on a
/// fresh SQLite file and `postgres::NAME` on a fresh PostgreSQL database (returning early, with
/// the testkit's message, when PostgreSQL is not installed). Attributes written before a name
/// (`#[ignore = "…"]`) go on both tests.
#[macro_export]
macro_rules! backends {
    ($($(#[$meta:meta])* $name:ident),* $(,)?) => {
        mod sqlite {
            $(
                $(#[$meta])*
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let db = ::frogbot_testkit::sqlite_db();
                    super::$name(&db.url).await;
                }
            )*
        }
        mod postgres {
            $(
                $(#[$meta])*
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(db) = ::frogbot_testkit::postgres_db() else { return };
                    super::$name(&db.url).await;
                }
            )*
        }
    };
}
