//! Engines for tests: the scripted [`TestModel`], engines over a store offering it
//! ([`test_engine`], [`engine_over`], [`offer`]), message and question shorthands, and
//! [`eventually`] / [`wait_quiet`] to wait on a chat without sleeping and hoping.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, watch};

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
        speaker: None,
        context: None,
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

/// The texts of the request's user messages, in order: the conversation the model was shown.
pub fn user_texts(req: &ModelRequest) -> Vec<String> {
    req.messages
        .iter()
        .filter_map(|m| match m {
            ModelMessage::User { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
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
    let store = crate::open_store(url).await;
    engine_over(store, model, turn_lease_ms)
}

/// An engine over `store` offering `model` as `main`, with turn leases of `turn_lease_ms`.
pub fn engine_over(store: DynStore, model: &TestModel, turn_lease_ms: Millis) -> Engine {
    Engine::new(
        store,
        vec![offer("main", model.clone())],
        vec![],
        EngineConfig {
            default_model: "main".into(),
            turn_lease_ms,
            ..Default::default()
        },
    )
}

/// An engine over `store` offering `model` as `main`, with the default configuration — what an
/// adapter's tests wire their channel into.
pub fn engine_with(store: DynStore, model: impl Model + 'static) -> Engine {
    Engine::new(
        store,
        vec![offer("main", model)],
        vec![],
        EngineConfig::default(),
    )
}

/// A model offer `id` for `model`, with no reasoning options.
pub fn offer(id: &str, model: impl Model + 'static) -> ModelOffer {
    ModelOffer {
        id: id.into(),
        model: Arc::new(model),
        reasoning: vec![],
    }
}
