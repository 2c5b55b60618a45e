//! Elicitation on Discord end to end: serenity's real gateway `Client` and `Http` against the
//! fake Discord, FrogBot's engine on SQLite with a scripted model that calls a tool which asks
//! the person driving the turn for input while it runs (`ToolStep::Ask`). The question is drawn
//! with Discord's components (a button per option, and Skip); clicks come through the adapter's
//! receive path (gateway `INTERACTION_CREATE`); someone else's click is told privately and
//! records nothing; the driver's click resumes the call with the choice and the model's reply
//! with the tool's result is posted in the thread; Skip declines it and the turn goes on.

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
    now_millis,
};
use frogbot_discord::PLATFORM;
use frogbot_discord::channel::{self, Config, DiscordAdapter};
use frogbot_discord::questions::DENIED_TEXT;
use frogbot_discord::testing::{self as fake, Call, FakeDiscord};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;
const GUILD: u64 = 100_000_000_000_000_001;
const CHANNEL: u64 = 700_000_000_000_000_007;
const ALICE: u64 = 300_000_000_000_000_003;
const MALLORY: u64 = 300_000_000_000_000_004;
const WAIT: Duration = Duration::from_secs(20);
/// The elicitation's question record: the call's id, asked once.
const RECORD: &str = "m1~1";

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
    fake: FakeDiscord,
    engine: Engine,
    got: Arc<Mutex<Vec<ToolAnswer>>>,
    _adapter: DiscordAdapter,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    _db: frogbot_testkit::TestDb,
}

impl Drop for Bot {
    fn drop(&mut self) {
        self.shutdown.cancel();
        self.task.abort();
    }
}

async fn start() -> Bot {
    let fake = FakeDiscord::start(APP, BOT).await;
    let adapter = channel::connect(Config {
        users: [(ALICE.to_string(), "alice".to_string())].into(),
        ..fake.config()
    })
    .await
    .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let got = Arc::new(Mutex::new(Vec::new()));
    let tool: Arc<dyn Tool> = Arc::new(AskingTool { got: got.clone() });
    let model = ScriptedModel::new(|req: &ModelRequest| match req.messages.last() {
        Some(ModelMessage::Tool { content, .. }) => reply(&format!("Result: {content}")),
        _ => call("m1", "release", json!({})),
    });
    let engine = Engine::new(
        store,
        vec![frogbot_testkit::offer("main", model)],
        vec![tool],
        EngineConfig::default(),
    )
    .with_channel(adapter.channel());
    let shutdown = CancellationToken::new();
    let task = adapter
        .start(engine.handle(), shutdown.clone())
        .expect("the gateway task");
    assert!(fake.wait_ready(WAIT).await, "the client identified");
    Bot {
        fake,
        engine,
        got,
        _adapter: adapter,
        shutdown,
        task,
        _db: db,
    }
}

fn alice() -> Value {
    fake::user(ALICE, "alice", false)
}

fn mallory() -> Value {
    fake::user(MALLORY, "mallory", false)
}

fn chat_of(thread: u64) -> ChatId {
    channel_chat_id(PLATFORM, &thread.to_string())
}

impl Bot {
    /// Alice mentions the bot: (thread, question message id, its `POST` body), once the
    /// question is drawn and recorded.
    async fn ask(&self, id: u64) -> (u64, u64, Value) {
        let from = self.fake.calls().len();
        self.fake.dispatch(
            "MESSAGE_CREATE",
            fake::message(
                id,
                CHANNEL,
                Some(GUILD),
                &alice(),
                &format!("<@{BOT}> release api 1.4.2 please"),
                &[fake::user(BOT, "frogbot", true)],
            ),
        );
        let opened = self
            .fake
            .wait_for(from, WAIT, |c| c.path.ends_with("/threads"))
            .await
            .expect("a thread opened");
        let thread: u64 = opened.response["id"].as_str().unwrap().parse().unwrap();
        let path = format!("/api/v10/channels/{thread}/messages");
        let posted = self
            .fake
            .wait_for(from, WAIT, |c| {
                c.method == "POST"
                    && c.path == path
                    && c.body["content"]
                        .as_str()
                        .is_some_and(|t| t.starts_with("**Go**"))
            })
            .await
            .unwrap_or_else(|| panic!("the question in {thread}: {:#?}", self.fake.calls()));
        let message: u64 = posted.response["id"].as_str().unwrap().parse().unwrap();
        let chat = chat_of(thread);
        frogbot_testkit::eventually("the question drawn and recorded", WAIT, async || {
            let q = self
                .engine
                .store_for_tests()
                .get_question(&chat, RECORD, now_millis())
                .await
                .unwrap();
            q.is_some_and(|q| q.rendered && !q.record.messages.is_empty())
                && self.engine.chats().state(&chat).await.unwrap() == TurnState::Awaiting
        })
        .await;
        (thread, message, posted.body)
    }

    fn click(&self, n: u64, thread: u64, message: u64, user: &Value, custom_id: &str) -> String {
        let token = format!("tok-{n}");
        self.fake.dispatch(
            "INTERACTION_CREATE",
            fake::component_interaction(
                500_000_000_000_000_000 + n,
                APP,
                thread,
                message,
                user,
                custom_id,
                None,
                &token,
            ),
        );
        token
    }

    async fn callback(&self, from: usize, n: u64) -> Call {
        let path = format!(
            "/api/v10/interactions/{}/tok-{n}/callback",
            500_000_000_000_000_000 + n
        );
        self.fake
            .wait_for(from, WAIT, |c| c.path == path)
            .await
            .expect("the interaction was answered")
    }

    async fn followup(&self, from: usize, token: &str) -> Call {
        let path = format!("/api/v10/webhooks/{APP}/{token}");
        self.fake
            .wait_for(from, WAIT, |c| c.path == path)
            .await
            .expect("an ephemeral followup")
    }

    /// The bot's message in `thread` starting with `prefix`, from call `from` on.
    async fn posted(&self, from: usize, thread: u64, prefix: &str) -> String {
        let path = format!("/api/v10/channels/{thread}/messages");
        let call = self
            .fake
            .wait_for(from, WAIT, |c| {
                c.method == "POST"
                    && c.path == path
                    && c.body["content"]
                        .as_str()
                        .is_some_and(|t| t.starts_with(prefix))
            })
            .await
            .unwrap_or_else(|| panic!("{prefix:?} in {thread}: {:#?}", self.fake.calls()));
        call.body["content"].as_str().unwrap().to_owned()
    }

    async fn idle(&self, thread: u64) {
        let chat = chat_of(thread);
        frogbot_testkit::eventually("the chat idle", WAIT, async || {
            self.engine.chats().state(&chat).await.unwrap() == TurnState::Idle
        })
        .await;
    }

    /// The `release` call's part in the chat's last reply.
    async fn release_part(&self, thread: u64) -> ToolPart {
        let messages = self
            .engine
            .store_for_tests()
            .list_messages(&chat_of(thread))
            .await
            .unwrap();
        messages
            .iter()
            .rev()
            .filter(|m| m.message.role == Role::Assistant)
            .find_map(|m| m.message.tool_parts().find(|t| t.tool_name == "release"))
            .cloned()
            .expect("the release call")
    }

    /// The message's settling edit, from call `from` on.
    async fn settled(&self, from: usize, thread: u64, message: u64) -> Call {
        let edit_path = format!("/api/v10/channels/{thread}/messages/{message}");
        self.fake
            .wait_for(from, WAIT, |c| c.method == "PATCH" && c.path == edit_path)
            .await
            .expect("the question settled")
    }
}

/// The buttons of a posted message: (label, custom id).
fn buttons(body: &Value) -> Vec<(String, String)> {
    body["components"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
        .map(|b| {
            (
                b["label"].as_str().unwrap_or_default().to_owned(),
                b["custom_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn button(body: &Value, label: &str) -> String {
    buttons(body)
        .into_iter()
        .find(|(l, _)| l == label)
        .unwrap_or_else(|| panic!("no {label} button on {body:#}"))
        .1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elicitation_is_drawn_as_buttons_refused_to_others_and_answered_by_the_driver() {
    let bot = start().await;
    let (thread, message, body) = bot.ask(950_000_000_000_000_001).await;

    // Drawn as a question with Discord's buttons: one per option, and Skip.
    let content = body["content"].as_str().unwrap();
    assert!(content.contains("Release api 1.4.2 now?"), "{content}");
    let labels: Vec<String> = buttons(&body).into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["Approve", "Hold", "Skip"]);
    assert!(bot.got.lock().unwrap().is_empty(), "not resumed yet");
    assert_eq!(
        bot.release_part(thread).await.state,
        ToolState::InputAvailable
    );
    let approve = button(&body, "Approve");

    // Mallory does not drive the turn: acked, told privately, nothing recorded, still waiting.
    let from = bot.fake.calls().len();
    let token = bot.click(1, thread, message, &mallory(), &approve);
    assert_eq!(bot.callback(from, 1).await.body["type"], 6);
    let note = bot.followup(from, &token).await;
    assert_eq!(note.body["content"], DENIED_TEXT);
    assert_eq!(note.body["flags"], 64, "ephemeral");
    let chat = chat_of(thread);
    assert_eq!(
        bot.engine.chats().state(&chat).await.unwrap(),
        TurnState::Awaiting
    );
    let q = bot
        .engine
        .store_for_tests()
        .get_question(&chat, RECORD, now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(q.outcome.is_none() && !q.closed);
    assert!(bot.got.lock().unwrap().is_empty());
    assert!(
        !bot.fake
            .calls()
            .iter()
            .skip(from)
            .any(|c| c.method == "PATCH" && c.path.ends_with(&message.to_string())),
        "the question was not settled"
    );

    // Alice approves: acked, the message settled (its buttons gone), the call resumed with her
    // choice, the model's reply with the result posted in the thread.
    let from = bot.fake.calls().len();
    bot.click(2, thread, message, &alice(), &approve);
    assert_eq!(bot.callback(from, 2).await.body["type"], 6);
    let edit = bot.settled(from, thread, message).await;
    assert_eq!(edit.body["components"], json!([]));
    let settled = edit.body["content"].as_str().unwrap();
    assert!(
        settled.contains("Release api 1.4.2 now?")
            && settled.ends_with(&format!("✅ Answered by <@{ALICE}>: Approve")),
        "{settled}"
    );
    let answer = bot.posted(from, thread, "Result").await;
    assert_eq!(answer, "Result: {\"answer\":\"Approve\"}");
    bot.idle(thread).await;
    let got = bot.got.lock().unwrap().clone();
    assert!(
        matches!(&got[..], [ToolAnswer::Answered(o)]
            if o.answers[0].header == "Go" && o.answers[0].selected == ["Approve"]),
        "{got:?}"
    );
    let part = bot.release_part(thread).await;
    assert_eq!(part.state, ToolState::OutputAvailable);
    assert_eq!(part.output, Some(json!({"answer": "Approve"})));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipping_an_elicitation_declines_it_and_the_turn_goes_on() {
    let bot = start().await;
    let (thread, message, body) = bot.ask(960_000_000_000_000_001).await;
    let from = bot.fake.calls().len();
    bot.click(1, thread, message, &alice(), &button(&body, "Skip"));
    assert_eq!(bot.callback(from, 1).await.body["type"], 6);
    let edit = bot.settled(from, thread, message).await;
    assert_eq!(edit.body["components"], json!([]));
    let settled = edit.body["content"].as_str().unwrap();
    assert!(
        settled.ends_with(&format!("Skipped by <@{ALICE}>")),
        "{settled}"
    );
    let answer = bot.posted(from, thread, "Result").await;
    assert_eq!(answer, "Result: {\"declined\":true}");
    bot.idle(thread).await;
    assert_eq!(
        *bot.got.lock().unwrap(),
        [ToolAnswer::Declined { reason: None }]
    );
    let part = bot.release_part(thread).await;
    assert_eq!(part.state, ToolState::OutputAvailable);
    assert_eq!(part.output, Some(json!({"declined": true})));
}
