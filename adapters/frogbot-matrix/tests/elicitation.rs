//! Elicitation on Matrix end to end: the whole adapter (`channel::connect`, the sync loop,
//! matrix-sdk's client) against the fake homeserver, with FrogBot's engine on SQLite and a
//! scripted model that calls a tool which asks the person driving the turn for input while it
//! runs (`ToolStep::Ask`). The single choice is drawn as an MSC3381 poll (an answer per option);
//! someone else's vote gets the denied notice and changes nothing; the driver's vote resumes the
//! call with the choice, ends the poll and the model's reply with the tool's result is posted in
//! the thread; `skip` typed in the thread declines it and the turn goes on.

#![recursion_limit = "256"]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use frogbot_channel::Adapter;
use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{
    Engine, EngineConfig, ModelMessage, ModelRequest, Tool, ToolAnswer, ToolContext, ToolSpec,
    ToolStep, channel_chat_id,
};
use frogbot_core::model::{
    ChatId, QuestionInput, QuestionItem, QuestionOption, Role, ToolPart, ToolState, TurnState,
};
use frogbot_matrix::PLATFORM;
use frogbot_matrix::channel::{Config, Login, MatrixAdapter, connect};
use frogbot_matrix::questions::DENIED_TEXT;
use frogbot_matrix::testing::{BOT_PASSWORD, FakeHomeserver};
use matrix_sdk::ruma::{OwnedUserId, RoomId, UserId};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: u64 = 60;

/// A tool that asks "Go?" (Approve / Hold) of whoever drives the turn, then returns the choice.
struct AskingTool {
    got: Arc<Mutex<Vec<ToolAnswer>>>,
}

#[async_trait]
impl Tool for AskingTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "release".into(),
            description: "Asks whether to go ahead".into(),
            input_schema: json!({"type": "object"}),
        }
    }

    async fn call(&self, _input: Value, _ctx: ToolContext) -> Result<Value, BoxError> {
        Err("a plain call cannot ask".into())
    }

    async fn call_or_ask(&self, _input: Value, _ctx: ToolContext) -> Result<ToolStep, BoxError> {
        Ok(ToolStep::Ask(QuestionInput {
            questions: vec![QuestionItem {
                header: "Go".into(),
                question: "Release api 1.4.2 now?".into(),
                options: ["Approve", "Hold"]
                    .map(|label| QuestionOption {
                        label: label.into(),
                        description: None,
                    })
                    .into(),
                ..QuestionItem::default()
            }],
            expires_in_seconds: None,
            from: Vec::new(),
            blocks: Vec::new(),
        }))
    }

    async fn resume(&self, answer: ToolAnswer, _ctx: ToolContext) -> Result<ToolStep, BoxError> {
        self.got.lock().unwrap().push(answer.clone());
        Ok(ToolStep::Done(match answer {
            ToolAnswer::Answered(out) => json!({"answer": out.answers[0].selected[0]}),
            ToolAnswer::Declined { .. } => json!({"declined": true}),
            ToolAnswer::Cancelled { reason } => json!({"cancelled": reason}),
        }))
    }
}

struct Bot {
    engine: Engine,
    got: Arc<Mutex<Vec<ToolAnswer>>>,
    _adapter: MatrixAdapter,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    worker: tokio::task::JoinHandle<()>,
    _store: tempfile::TempDir,
    _db: frogbot_testkit::TestDb,
}

async fn bot(url: &str, user: &UserId, password: &str) -> Bot {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let store = tempfile::tempdir().unwrap();
    let mut config = Config::new(
        url.to_owned(),
        user.to_owned(),
        Login::Password(password.to_owned()),
        store.path() as &Path,
    );
    config.poll_events = frogbot_matrix::render::PollEvents::Stable;
    let adapter = connect(config).await.unwrap();
    let db = frogbot_testkit::sqlite_db();
    let got = Arc::new(Mutex::new(Vec::new()));
    let tool: Arc<dyn Tool> = Arc::new(AskingTool { got: got.clone() });
    let model = ScriptedModel::new(|req: &ModelRequest| match req.messages.last() {
        Some(ModelMessage::Tool { content, .. }) => reply(&format!("Result: {content}")),
        _ => call("m1", "release", json!({})),
    });
    let engine = Engine::new(
        frogbot_testkit::open_store(&db.url).await,
        vec![frogbot_testkit::offer("main", model)],
        vec![tool],
        EngineConfig::default(),
    )
    .with_channel(adapter.channel());
    let shutdown = CancellationToken::new();
    let worker = engine.spawn_worker(Duration::from_millis(100));
    let task = adapter
        .start(engine.handle(), shutdown.clone())
        .expect("a sync loop");
    Bot {
        engine,
        got,
        _adapter: adapter,
        shutdown,
        task,
        worker,
        _store: store,
        _db: db,
    }
}

fn chat_of(room: &RoomId, root: &str) -> ChatId {
    channel_chat_id(PLATFORM, &format!("{room}|{root}"))
}

impl Bot {
    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap();
        self.worker.abort();
    }

    /// The `release` call's part in the last reply of the thread on `root` in `room`.
    async fn release_part(&self, room: &RoomId, root: &str) -> ToolPart {
        let chat = chat_of(room, root);
        let messages = self
            .engine
            .store_for_tests()
            .list_messages(&chat)
            .await
            .unwrap();
        messages
            .iter()
            .rev()
            .filter(|m| m.message.role == Role::Assistant)
            .find_map(|m| m.message.tool_parts().find(|t| t.tool_name == "release"))
            .cloned()
            .unwrap_or_else(|| panic!("the release call in {chat}: {messages:#?}"))
    }

    async fn until(&self, room: &RoomId, root: &str, state: TurnState) {
        let chat = chat_of(room, root);
        frogbot_testkit::eventually("the chat's state", Duration::from_secs(WAIT), async || {
            self.engine.chats().state(&chat).await.unwrap() == state
        })
        .await;
    }
}

/// A message in the thread on `root`.
fn in_thread(body: &str, root: &str) -> Value {
    json!({"msgtype": "m.text", "body": body,
           "m.relates_to": {"rel_type": "m.thread", "event_id": root, "is_falling_back": true,
                            "m.in_reply_to": {"event_id": root}}})
}

/// A message to the bot in a room with several people: it mentions the bot.
fn mention(bot: &UserId, body: &str) -> Value {
    json!({"msgtype": "m.text", "body": format!("{bot}: {body}"),
           "m.mentions": {"user_ids": [bot]}})
}

fn vote(poll: &str, answer: &str) -> Value {
    json!({"m.selections": [answer],
           "m.relates_to": {"rel_type": "m.reference", "event_id": poll}})
}

fn body(e: &Value) -> &str {
    e["content"]["body"].as_str().unwrap_or("")
}

/// The poll's answers as `(id, text)`.
fn poll_answers(e: &Value) -> Vec<(String, String)> {
    e["content"]["m.poll"]["answers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            (
                a["m.id"].as_str().unwrap().to_owned(),
                a["m.text"][0]["body"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn answer_id(poll: &Value, label: &str) -> String {
    poll_answers(poll)
        .into_iter()
        .find(|(_, t)| t == label)
        .unwrap_or_else(|| panic!("no answer {label} in {poll:#}"))
        .0
}

fn person(name: &str) -> OwnedUserId {
    OwnedUserId::try_from(format!("@{name}:fake.test")).unwrap()
}

fn from_bot(fake: &FakeHomeserver, e: &Value) -> bool {
    e["sender"] == fake.bot().as_str()
}

fn threaded(e: &Value, root: &str) -> bool {
    e["content"]["m.relates_to"]["rel_type"] == "m.thread"
        && e["content"]["m.relates_to"]["event_id"] == root
}

async fn fake_poll(fake: &FakeHomeserver, room: &RoomId, root: &str) -> Value {
    fake.wait_for(room, WAIT, "the question's poll", |e| {
        from_bot(fake, e) && e["type"] == "m.poll.start" && threaded(e, root)
    })
    .await
}

async fn fake_said(fake: &FakeHomeserver, room: &RoomId, root: &str, starts: &str) -> Value {
    fake.wait_for(room, WAIT, starts, |e| {
        from_bot(fake, e) && threaded(e, root) && body(e).starts_with(starts)
    })
    .await
}

/// Waits until the poll `poll` is ended and edited to its outcome; the edit's text.
async fn fake_settled(fake: &FakeHomeserver, room: &RoomId, poll: &str) -> String {
    fake.wait_for(room, WAIT, "the poll's end", |e| {
        from_bot(fake, e)
            && e["type"] == "m.poll.end"
            && e["content"]["m.relates_to"]["event_id"] == poll
    })
    .await;
    let edit = fake
        .wait_for(room, WAIT, "the poll's settled edit", |e| {
            from_bot(fake, e)
                && e["content"]["m.relates_to"]["rel_type"] == "m.replace"
                && e["content"]["m.relates_to"]["event_id"] == poll
        })
        .await;
    assert!(fake.open_answers(&format!("{room}|{poll}")).is_empty());
    edit["content"]["m.new_content"]["m.text"][0]["body"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_an_elicitation_is_a_poll_refused_to_others_and_answered_by_the_driver() {
    let fake = FakeHomeserver::start().await;
    let alice = person("alice");
    let bob = person("bob");
    let room = fake.create_room(&[&alice, &bob]);
    let bot = bot(fake.url(), fake.bot(), BOT_PASSWORD).await;
    let root = fake.inject(
        &room,
        &alice,
        "m.room.message",
        mention(fake.bot(), "release api 1.4.2 please"),
    );
    let root = root.as_str();

    // Drawn as a poll in the thread: the question, an answer per option.
    let poll = fake_poll(&fake, &room, root).await;
    assert_eq!(poll["type"], "m.poll.start");
    let question = poll["content"]["m.poll"]["question"]["m.text"][0]["body"]
        .as_str()
        .unwrap_or_default();
    assert!(question.contains("Release api 1.4.2 now?"), "{poll:#}");
    let labels: Vec<String> = poll_answers(&poll).into_iter().map(|(_, t)| t).collect();
    assert_eq!(labels, ["Approve", "Hold"]);
    let poll_id = poll["event_id"].as_str().unwrap();
    bot.until(&room, root, TurnState::Awaiting).await;
    assert!(bot.got.lock().unwrap().is_empty(), "not resumed yet");
    assert_eq!(
        bot.release_part(&room, root).await.state,
        ToolState::InputAvailable
    );

    // Bob votes Approve: he is in the room but does not drive the turn. Told with a mention,
    // nothing recorded, the poll still open.
    fake.inject(
        &room,
        &bob,
        "m.poll.response",
        vote(poll_id, &answer_id(&poll, "Approve")),
    );
    let denied = fake
        .wait_for(&room, WAIT, "the denied notice", |e| {
            from_bot(&fake, e) && body(e).contains(DENIED_TEXT)
        })
        .await;
    assert_eq!(denied["content"]["m.mentions"]["user_ids"][0], bob.as_str());
    assert!(bot.got.lock().unwrap().is_empty());
    assert_eq!(
        fake.open_answers(&format!("{room}|{poll_id}")).len(),
        2,
        "the poll is still open"
    );
    assert_eq!(
        bot.engine
            .chats()
            .state(&chat_of(&room, root))
            .await
            .unwrap(),
        TurnState::Awaiting
    );

    // Alice votes Approve: the call resumes with her choice, the poll ends, the model's reply
    // with the result is posted in the thread.
    fake.inject(
        &room,
        &alice,
        "m.poll.response",
        vote(poll_id, &answer_id(&poll, "Approve")),
    );
    let answer = fake_said(&fake, &room, root, "Result").await;
    assert_eq!(body(&answer), "Result: {\"answer\":\"Approve\"}");
    let shown = fake_settled(&fake, &room, poll_id).await;
    assert!(
        shown.ends_with(&format!("✅ Answered by {alice}: Approve")),
        "{shown}"
    );
    bot.until(&room, root, TurnState::Idle).await;
    let got = bot.got.lock().unwrap().clone();
    assert!(
        matches!(&got[..], [ToolAnswer::Answered(o)]
            if o.answers[0].header == "Go" && o.answers[0].selected == ["Approve"]),
        "{got:?}"
    );
    let part = bot.release_part(&room, root).await;
    assert_eq!(part.state, ToolState::OutputAvailable);
    assert_eq!(part.output, Some(json!({"answer": "Approve"})));
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_skip_typed_in_the_thread_declines_an_elicitation() {
    let fake = FakeHomeserver::start().await;
    let alice = person("alice");
    let bob = person("bob");
    let room = fake.create_room(&[&alice, &bob]);
    let bot = bot(fake.url(), fake.bot(), BOT_PASSWORD).await;
    let root = fake.inject(
        &room,
        &alice,
        "m.room.message",
        mention(fake.bot(), "release api 1.4.2 please"),
    );
    let root = root.as_str();
    let poll = fake_poll(&fake, &room, root).await;
    let poll_id = poll["event_id"].as_str().unwrap();
    bot.until(&room, root, TurnState::Awaiting).await;
    fake.inject(&room, &alice, "m.room.message", in_thread("skip", root));
    let answer = fake_said(&fake, &room, root, "Result").await;
    assert_eq!(body(&answer), "Result: {\"declined\":true}");
    let shown = fake_settled(&fake, &room, poll_id).await;
    assert!(shown.ends_with(&format!("Skipped by {alice}")), "{shown}");
    bot.until(&room, root, TurnState::Idle).await;
    assert_eq!(
        *bot.got.lock().unwrap(),
        [ToolAnswer::Declined { reason: None }]
    );
    let part = bot.release_part(&room, root).await;
    assert_eq!(part.state, ToolState::OutputAvailable);
    assert_eq!(part.output, Some(json!({"declined": true})));
    bot.stop().await;
}
