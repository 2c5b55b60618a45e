//! Elicitation on Slack, end to end through the fake Slack driving slack-morphism's real client:
//! a tool that asks the person driving the turn for input while it runs (`ToolStep::Ask`) has
//! its question drawn in the thread as Slack buttons (one per option, and Skip); someone else's
//! click is refused privately and nothing is recorded; the driver's click resumes the call with
//! what they chose, and the model's reply with the tool's result is posted in the thread; Skip
//! declines it and the turn goes on.
//! Run with `--nocapture` to print the thread as a transcript.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use frogbot_channel::Adapter;
use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{
    ChannelMessageOutcome, Engine, InteractionOutcome, ModelMessage, ModelRequest, Sent, Tool,
    ToolAnswer, ToolContext, ToolSpec, ToolStep, channel_chat_id,
};
use frogbot_core::model::{
    ChatId, QuestionInput, QuestionItem, QuestionOption, ToolPart, ToolState, TurnState,
};
use frogbot_core::store::DynStore;
use frogbot_slack::PLATFORM;
use frogbot_slack::convert::{interaction_from_payload, message_from_push_json};
use frogbot_slack::testing::{BOT_USER, FakeSlack};
use serde_json::{Value, json};

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

/// Every text of a message's blocks, in order.
fn shown(fake: &FakeSlack, id: &str) -> String {
    fn texts(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(t)) = o.get("text") {
                    out.push(t.clone());
                }
                o.values().for_each(|v| texts(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| texts(v, out)),
            _ => {}
        }
    }
    let m = fake.message(id).unwrap();
    let mut out = vec![m.text.clone()];
    texts(&m.blocks, &mut out);
    out.retain(|t| !t.is_empty());
    out.join(" | ")
}

fn transcript(fake: &FakeSlack, thread: &str) -> String {
    fake.thread_messages(thread)
        .iter()
        .map(|m| format!("[{}] {}", m.user, shown(fake, &m.id())))
        .collect::<Vec<_>>()
        .join("\n")
}

struct World {
    fake: FakeSlack,
    engine: Engine,
    store: DynStore,
    got: Arc<Mutex<Vec<ToolAnswer>>>,
    _db: frogbot_testkit::TestDb,
}

async fn world() -> World {
    let fake = FakeSlack::start().await;
    let slack = frogbot_slack::channel::connect(fake.http_config())
        .await
        .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let got = Arc::new(Mutex::new(Vec::new()));
    let tool: Arc<dyn Tool> = Arc::new(AskingTool { got: got.clone() });
    let model = ScriptedModel::new(|req: &ModelRequest| match req.messages.last() {
        Some(ModelMessage::Tool { content, .. }) => reply(&format!("Result: {content}")),
        _ => call("call_release", "release", json!({})),
    });
    let engine = Engine::new(
        store.clone(),
        vec![frogbot_testkit::offer("a", model)],
        vec![tool],
        frogbot_core::agent::EngineConfig {
            default_model: "a".into(),
            ..Default::default()
        },
    )
    // The adapter's whole channel: its hooks, identity and outbox (replies go to the thread).
    .with_channel(slack.channel());
    World {
        fake,
        engine,
        store,
        got,
        _db: db,
    }
}

/// U123 asks the bot in a new thread; returns the thread and its chat once the question waits.
async fn ask(w: &World, channel: &str) -> (String, ChatId) {
    let said = w.fake.user_message(
        channel,
        None,
        "U123",
        &format!("<@{BOT_USER}> release api 1.4.2 please"),
    );
    let push = w.fake.event_callback(w.fake.mention_event(&said));
    let incoming = message_from_push_json(&push, BOT_USER).unwrap().unwrap();
    match w
        .engine
        .channels()
        .message(PLATFORM, &incoming.thread, incoming.message)
        .await
        .unwrap()
    {
        ChannelMessageOutcome::Sent(Sent::Started(h)) => {
            h.done.await.unwrap().unwrap();
        }
        other => panic!("expected a turn, got {other:?}"),
    }
    let chat = channel_chat_id(PLATFORM, &incoming.thread);
    assert_eq!(
        w.engine.chats().state(&chat).await.unwrap(),
        TurnState::Awaiting
    );
    (incoming.thread, chat)
}

async fn click(w: &World, user: &str, message: &str, label: &str) -> InteractionOutcome {
    let payload = w
        .fake
        .click(user, message, label)
        .unwrap_or_else(|| panic!("no {label:?} button on {message}"));
    let interaction = interaction_from_payload(&payload).unwrap().unwrap();
    w.engine
        .channels()
        .interaction(PLATFORM, None, &interaction)
        .await
        .unwrap()
}

async fn until_idle(w: &World, chat: &ChatId) {
    frogbot_testkit::eventually(
        "the turn to end",
        std::time::Duration::from_secs(20),
        async || w.engine.chats().state(chat).await.unwrap() == TurnState::Idle,
    )
    .await;
}

async fn release_part(w: &World, chat: &ChatId) -> ToolPart {
    let messages = w.store.list_messages(chat).await.unwrap();
    messages
        .iter()
        .rev()
        .flat_map(|m| m.message.tool_parts().cloned().collect::<Vec<_>>())
        .find(|t| t.tool_name == "release")
        .expect("the release call")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elicitation_on_slack_is_drawn_as_buttons_refused_to_others_and_answered_by_the_driver()
{
    let w = world().await;
    let (thread, chat) = ask(&w, "C42").await;
    assert!(w.got.lock().unwrap().is_empty(), "not resumed yet");
    assert_eq!(
        release_part(&w, &chat).await.state,
        ToolState::InputAvailable
    );
    // The question, in the thread: its text, a button per option and Skip.
    let card = w.fake.thread_messages(&thread).pop().unwrap();
    let text = shown(&w.fake, &card.id());
    assert!(text.contains("Release api 1.4.2 now?"), "{text}");
    for label in ["Approve", "Hold", "Skip"] {
        assert!(
            w.fake.element(&card.id(), label).is_some(),
            "{label} on {text}"
        );
    }
    assert!(w.fake.violations().is_empty(), "{:?}", w.fake.violations());
    let before = transcript(&w.fake, &thread);

    // U999 does not drive the turn: told privately, the buttons stay, nothing is recorded.
    assert_eq!(
        click(&w, "U999", &card.id(), "Approve").await,
        InteractionOutcome::Denied
    );
    assert!(!w.fake.notices("U999").is_empty());
    assert_eq!(
        w.engine.chats().state(&chat).await.unwrap(),
        TurnState::Awaiting
    );
    assert!(w.got.lock().unwrap().is_empty());
    assert!(w.fake.controls(&card.id()) > 0);

    // U123 approves: the call resumes with the choice, the model's reply lands in the thread.
    assert_eq!(
        click(&w, "U123", &card.id(), "Approve").await,
        InteractionOutcome::Answered
    );
    until_idle(&w, &chat).await;
    let got = w.got.lock().unwrap().clone();
    assert!(
        matches!(&got[..], [ToolAnswer::Answered(o)]
            if o.answers[0].header == "Go" && o.answers[0].selected == ["Approve"]),
        "{got:?}"
    );
    let part = release_part(&w, &chat).await;
    assert_eq!(part.state, ToolState::OutputAvailable);
    assert_eq!(part.output, Some(json!({"answer": "Approve"})));
    assert_eq!(w.fake.controls(&card.id()), 0, "settled: no buttons left");
    let settled = shown(&w.fake, &card.id());
    assert!(
        settled.contains("✅ Answered by <@U123>: Approve"),
        "{settled}"
    );
    let after = transcript(&w.fake, &thread);
    assert!(
        after.contains("Result: {\"answer\":\"Approve\"}"),
        "{after}"
    );
    assert!(w.fake.violations().is_empty(), "{:?}", w.fake.violations());
    println!(
        "--- the thread while the question waits ---\n{before}\n--- after U999's click (private notice: {:?}) and U123's Approve ---\n{after}",
        w.fake.notices("U999")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipping_an_elicitation_on_slack_declines_it_and_the_turn_goes_on() {
    let w = world().await;
    let (thread, chat) = ask(&w, "C43").await;
    let card = w.fake.thread_messages(&thread).pop().unwrap();
    let skipped = click(&w, "U123", &card.id(), "Skip").await;
    assert!(
        matches!(
            skipped,
            InteractionOutcome::Dismissed | InteractionOutcome::Answered
        ),
        "{skipped:?}"
    );
    until_idle(&w, &chat).await;
    assert_eq!(
        *w.got.lock().unwrap(),
        [ToolAnswer::Declined { reason: None }]
    );
    let part = release_part(&w, &chat).await;
    assert_eq!(part.state, ToolState::OutputAvailable);
    assert_eq!(part.output, Some(json!({"declined": true})));
    assert_eq!(w.fake.controls(&card.id()), 0, "settled: no buttons left");
    let settled = shown(&w.fake, &card.id());
    assert!(settled.contains("Skipped by <@U123>"), "{settled}");
    let after = transcript(&w.fake, &thread);
    assert!(after.contains("Result: {\"declined\":true}"), "{after}");
    println!("--- a skipped question ---\n{after}");
}
