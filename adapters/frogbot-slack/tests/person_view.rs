//! What a person sees in a Slack thread (issue 38), as golden transcripts of
//! `FakeSlack::person_view`: FrogBot's engine (SQLite, a scripted model) with the Slack adapter
//! in HTTP mode (signed Events API and interactivity requests from the fake), and the thread as
//! Slack's client shows it after edits — senders, texts, controls, reactions, which messages
//! notified (on Slack a new message does; `chat.update` and stream appends do not).
//!
//! Each case compares its transcript with `tests/golden/person_view/<case>.txt`;
//! `UPDATE_GOLDEN=1` rewrites them. The properties that matter are asserted in code as well.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use frogbot_channel::Adapter;
use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, call, reply};
use frogbot_core::agent::{
    ApprovalPolicy, ChannelSettings, Engine, EngineConfig, ModelEvent, ModelMessage, ModelRequest,
    channel_chat_id, tool_fn, with_approval,
};
use frogbot_core::model::TurnState;
use frogbot_slack::testing::{
    BOT_NAME, BOT_USER, FakeSlack, Message, SeenMessage, Signature, assert_golden, transcript,
};
use frogbot_testkit::eventually;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// Compares `actual` with `tests/golden/person_view/<case>.txt` (`UPDATE_GOLDEN=1` writes it).
fn golden(case: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/person_view")
        .join(format!("{case}.txt"));
    assert_golden(&path, actual);
}

/// The transcript with what varies between runs made stable (clock times).
fn stable(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.contains("open until") {
                l.chars()
                    .map(|c| if c.is_ascii_digit() { '#' } else { c })
                    .collect()
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The first delta of the long reply: a fragment no notification should show alone.
const FRAGMENT: &str = "Report:";

/// The 40,000-character reply: "Report:", then sentences, a paragraph break every eight.
fn long_reply() -> String {
    let mut out = String::from(FRAGMENT);
    out.push(' ');
    let mut i = 0;
    while out.chars().count() < 40_000 {
        out.push_str(&format!(
            "Sentence {i} of the long reply has a few plain words in it."
        ));
        out.push_str(if i % 8 == 7 { "\n\n" } else { " " });
        i += 1;
    }
    out.trim_end().to_owned()
}

fn question(input: Value) -> Vec<ScriptEvent> {
    call("q1", "question", input)
}

fn thirty() -> Vec<Value> {
    (1..=30)
        .map(|i| json!({"label": format!("region-{i}")}))
        .collect()
}

/// The model: a keyword in the person's last message picks the script; a tool result is
/// answered "Noted: <result>".
fn model(gate: Arc<tokio::sync::Semaphore>) -> ScriptedModel {
    ScriptedModel::new(move |req: &ModelRequest| {
        if let Some(ModelMessage::Tool { content, .. }) = req.messages.last() {
            return reply(&format!("Noted: {content}"));
        }
        let said = frogbot_testkit::last_user(req);
        let word = said.split_whitespace().last().unwrap_or_default();
        match word {
            "long" => {
                // A first fragment, a pause (a stream interval and more), then the rest.
                let full = long_reply();
                let (head, rest) = full.split_at(FRAGMENT.len());
                assert_eq!(head, FRAGMENT);
                let chars: Vec<char> = rest.chars().collect();
                let mut e = vec![
                    ScriptEvent::Event(ModelEvent::TextDelta(head.into())),
                    ScriptEvent::Pause(Duration::from_millis(500)),
                ];
                for chunk in chars.chunks(400) {
                    e.push(ScriptEvent::Event(ModelEvent::TextDelta(
                        chunk.iter().collect(),
                    )));
                    e.push(ScriptEvent::Pause(Duration::from_millis(2)));
                }
                e.extend(reply(""));
                e
            }
            "slow" => {
                let mut e = Vec::new();
                for i in 0..400 {
                    e.push(ScriptEvent::Event(ModelEvent::TextDelta(format!(
                        "Step {i} is done. "
                    ))));
                    e.push(ScriptEvent::Pause(Duration::from_millis(50)));
                }
                e.extend(reply("All done."));
                e
            }
            "gated" => {
                let mut e = vec![ScriptEvent::Gate(gate.clone())];
                e.extend(reply("The first answer."));
                e
            }
            "fail" => vec![ScriptEvent::Fail("the model is unavailable".into())],
            "deploy" => call(
                "d1",
                "deploy",
                json!({"service": "api", "version": "1.4.2"}),
            ),
            "choice" => question(json!({"questions": [{"header": "Env",
                "question": "Release **v1.4** where?",
                "options": [{"label": "staging", "description": "the test cluster"},
                            {"label": "prod"}]}]})),
            "confirm" => question(json!({"questions": [{"header": "Go",
                "question": "Deploy now?", "kind": "confirm", "label": "Deploy"}]})),
            "review" => question(json!({"questions": [{"header": "Go",
            "question": "Scale the API?", "kind": "confirm", "label": "Approve"}],
            "blocks": [
                {"type": "code", "language": "diff", "code": "- replicas: 3\n+ replicas: 4"},
                {"type": "table", "columns": ["service", "pods"], "rows": [["api", 3]]}
            ]})),
            "toggle" => question(json!({"questions": [{"header": "Notify",
                "question": "Tell the team?", "kind": "toggle", "label": "Notify the team"}]})),
            "number" => question(json!({"questions": [{"header": "Pods",
                "question": "How many pods?", "kind": "number_input", "min": 1, "max": 9}]})),
            "text" => question(json!({"questions": [{"header": "Why",
                "question": "What is the reason?", "kind": "text_input"}]})),
            "thirty" => question(json!({"questions": [{"header": "Region",
                "question": "Which region?", "options": thirty()}]})),
            "many" => question(json!({"questions": [{"header": "Host",
                "question": "Which host?", "options": (1..=101)
                    .map(|i| json!({"label": format!("host-{i}")}))
                    .collect::<Vec<_>>()}]})),
            "four" => question(json!({"questions": [
                {"header": "A", "question": "Which colour?",
                 "options": [{"label": "red"}, {"label": "blue"}]},
                {"header": "B", "question": "Notify?", "kind": "toggle"},
                {"header": "C", "question": "Why?", "kind": "text_input"},
                {"header": "D", "question": "Go ahead?", "kind": "confirm"}]})),
            "multi" => question(json!({"questions": [{"header": "Regions",
                "question": "Which regions?", "multiple": true,
                "options": [{"label": "eu"}, {"label": "us"}, {"label": "asia"}]}]})),
            _ => reply(&format!("Hello. You said: {said}")),
        }
    })
}

struct World {
    fake: FakeSlack,
    base: String,
    engine: Engine,
    gate: Arc<tokio::sync::Semaphore>,
    runs: Arc<AtomicUsize>,
    _db: frogbot_testkit::TestDb,
}

async fn world() -> World {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("frogbot_slack=info,frogbot_core=info")
        .try_init();
    let fake = FakeSlack::start().await;
    fake.set_user_name("U123", "Ada");
    fake.set_user_name("U777", "Bo");
    let slack = frogbot_slack::channel::connect(fake.http_config())
        .await
        .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let deploy = with_approval(
        tool_fn("deploy", "Deploys a service", move |d: Value, _ctx| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok::<_, BoxError>(json!({"deployed": d["service"]}))
            }
        }),
        ApprovalPolicy {
            approvers: vec!["slack:U123".into()],
            expires_in_seconds: None,
        },
    );
    let engine = Engine::new(
        store,
        vec![frogbot_testkit::offer("main", model(gate.clone()))],
        vec![deploy],
        EngineConfig {
            default_model: "main".into(),
            ..Default::default()
        },
    )
    .with_channel(slack.channel())
    .with_channel_settings(
        frogbot_slack::PLATFORM,
        ChannelSettings {
            stream_interval: Duration::from_millis(200),
            ..Default::default()
        },
    )
    .unwrap();
    let app = slack.routes(&engine.handle()).expect("HTTP routes");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    World {
        fake,
        base,
        engine,
        gate,
        runs,
        _db: db,
    }
}

impl World {
    /// Ada (`U123`) writes `text` as Slack delivers it: a mention (`app_mention`), in a new
    /// thread or in `thread_ts`.
    async fn mention(&self, thread_ts: Option<&str>, text: &str) -> Message {
        let said = self.fake.user_message("C42", thread_ts, "U123", text);
        let body = self.fake.event_callback(self.fake.mention_event(&said));
        let res = self
            .fake
            .post_event(&self.base, &body, Signature::Good, None)
            .await;
        assert_eq!(res.status(), 200);
        said
    }

    /// `user` writes `text` in the thread without a mention (a `message` event).
    async fn write(&self, thread_ts: &str, user: &str, text: &str) -> Message {
        let said = self.fake.user_message("C42", Some(thread_ts), user, text);
        let body = self
            .fake
            .event_callback(self.fake.message_event(&said, "channel"));
        let res = self
            .fake
            .post_event(&self.base, &body, Signature::Good, None)
            .await;
        assert_eq!(res.status(), 200);
        said
    }

    async fn interact(&self, payload: &Value) -> Value {
        let res = self
            .fake
            .post_interaction(&self.base, payload, Signature::Good, None)
            .await;
        assert_eq!(res.status(), 200);
        let body = res.text().await.unwrap();
        serde_json::from_str(&body).unwrap_or(Value::Null)
    }

    async fn click(&self, user: &str, message: &str, label: &str) {
        let payload = self
            .fake
            .click(user, message, label)
            .unwrap_or_else(|| panic!("no {label:?} button on {message}"));
        self.interact(&payload).await;
    }

    /// Waits until the turn of the thread `said` started waits for an answer (its question is
    /// recorded: a click before that would find none — no person clicks that fast).
    async fn until_awaiting(&self, said: &Message) {
        let chat = channel_chat_id(frogbot_slack::PLATFORM, &said.id());
        eventually("the turn to await its answer", WAIT, async || {
            self.engine.chats().state(&chat).await.unwrap() == TurnState::Awaiting
        })
        .await;
    }

    fn view(&self, said: &Message) -> Vec<SeenMessage> {
        self.fake.person_view(&said.id())
    }

    /// Waits until the person's message shows `emoji` alone from the bot (the ack before it
    /// removed).
    async fn until_ack(&self, said: &Message, emoji: &str) {
        eventually(&format!(":{emoji}: on {}", said.id()), WAIT, async || {
            self.fake
                .message(&said.id())
                .is_some_and(|m| m.bot_reactions() == [emoji])
        })
        .await;
    }

    /// Waits until the thread holds a bot message with controls; returns it.
    async fn until_question(&self, said: &Message) -> SeenMessage {
        eventually("a question in the thread", WAIT, async || {
            self.view(said)
                .iter()
                .any(|m| m.sender == BOT_NAME && !m.controls.is_empty())
        })
        .await;
        let card = self
            .view(said)
            .into_iter()
            .rfind(|m| m.sender == BOT_NAME && !m.controls.is_empty())
            .unwrap();
        // The engine finds the question by its message (no person clicks within milliseconds
        // of the card showing; a test would).
        eventually("the question known by its message", WAIT, async || {
            self.engine
                .channels()
                .form_target(frogbot_slack::PLATFORM, &card.id)
                .await
                .unwrap()
                .is_some()
        })
        .await;
        card
    }

    /// Waits until a bot message shows `text` (not streaming any more).
    async fn until_text(&self, said: &Message, text: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while !self
            .view(said)
            .iter()
            .any(|m| m.sender == BOT_NAME && m.text.contains(text) && !m.streaming)
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {text:?} in the thread:\n{}\n{:?}",
                self.transcript(said),
                self.fake.ephemerals()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn transcript(&self, said: &Message) -> String {
        stable(&transcript(&self.view(said)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_reply() {
    let w = world().await;
    let said = w.mention(None, &format!("<@{BOT_USER}> hi there")).await;
    w.until_ack(&said, "white_check_mark").await;
    let seen = w.view(&said);
    assert_eq!(seen.len(), 2, "{seen:#?}");
    assert_eq!(seen[1].text, "Hello. You said: hi there");
    assert!(seen[1].notified && !seen[1].edited);
    golden("short_reply", &w.transcript(&said));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forty_thousand_character_streamed_reply() {
    let w = world().await;
    let said = w.mention(None, &format!("<@{BOT_USER}> long")).await;
    w.until_ack(&said, "white_check_mark").await;
    let seen = w.view(&said);
    let replies: Vec<&SeenMessage> = seen[1..].iter().collect();
    // The whole text, in order, over messages within Slack's 40,000 characters.
    let full = long_reply();
    let joined: String = replies
        .iter()
        .map(|m| m.text.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(squash(&joined), squash(&full));
    for m in &replies {
        assert!(m.text.chars().count() <= 40_000, "{}", m.text.len());
        // (A message may be edited once at the end, should the final cut differ.)
        assert!(!m.streaming);
    }
    // The first message notifies with the start of the reply, not a fragment.
    assert!(replies[0].notified);
    let note = replies[0].notification.as_deref().unwrap();
    assert!(
        note.starts_with("Report: Sentence 0 of the long reply"),
        "{note}"
    );
    // Slack has no silent post: each message of the reply is new and notifies (its Markdown is
    // at most 12,000 characters, Slack's limit of a streamed message), so each notification
    // shows the start of a sentence, never a fragment.
    assert!(replies.len() <= 4, "{}", replies.len());
    for m in &replies[1..] {
        let note = m.notification.as_deref().unwrap();
        assert!(note.starts_with("Sentence "), "{note}");
    }
    let mut summary = format!("{} messages after the person's\n", replies.len());
    for (i, m) in replies.iter().enumerate() {
        let first = m.notification.as_deref().unwrap_or_default();
        summary.push_str(&format!(
            "[{}] {} ({}) {} characters, starts {:?}, ends {:?}, notification starts {:?}\n",
            i + 2,
            m.sender,
            if m.notified { "notified" } else { "silent" },
            m.text.chars().count(),
            m.text.chars().take(30).collect::<String>(),
            m.text
                .chars()
                .rev()
                .take(20)
                .collect::<String>()
                .chars()
                .rev()
                .collect::<String>(),
            first.chars().take(30).collect::<String>(),
        ));
    }
    summary.push_str(&format!("person's reactions: {:?}\n", seen[0].reactions));
    golden("long_stream", &summary);
}

/// Asks `word`, returns the person's message and the question as seen.
async fn asked(w: &World, word: &str) -> (Message, SeenMessage) {
    let said = w.mention(None, &format!("<@{BOT_USER}> ask {word}")).await;
    w.until_awaiting(&said).await;
    let q = w.until_question(&said).await;
    (said, q)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_choice_answered_by_a_click() {
    let w = world().await;
    let (said, q) = asked(&w, "choice").await;
    assert!(q.notified);
    let mut out = w.transcript(&said);
    w.click("U777", &q.id, "staging").await;
    w.until_text(&said, "Noted:").await;
    w.until_ack(&said, "white_check_mark").await;
    let seen = w.view(&said);
    let settled = seen.iter().find(|m| m.id == q.id).unwrap();
    assert!(
        settled.edited && settled.controls.is_empty(),
        "{settled:#?}"
    );
    assert!(
        settled.text.contains("Answered by @Bo: staging"),
        "{}",
        settled.text
    );
    out.push_str("--- after Bo clicks staging ---\n");
    out.push_str(&w.transcript(&said));
    golden("choice", &out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_answered_by_a_click() {
    let w = world().await;
    let (said, q) = asked(&w, "confirm").await;
    let mut out = w.transcript(&said);
    w.click("U123", &q.id, "Deploy").await;
    w.until_text(&said, "Noted:").await;
    w.until_ack(&said, "white_check_mark").await;
    out.push_str("--- after Ada clicks Deploy ---\n");
    out.push_str(&w.transcript(&said));
    golden("confirm", &out);
}

/// A question with what it is about (issue 40): the diff and the table come first, then the
/// question's card; Ada clicks Approve and the card reads answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_beside_a_diff() {
    let w = world().await;
    let (said, q) = asked(&w, "review").await;
    let seen = w.view(&said);
    let card = seen
        .iter()
        .position(|m| m.id == q.id)
        .expect("the question's card");
    let diff = seen
        .iter()
        .position(|m| m.sender == BOT_NAME && m.text.contains("+ replicas: 4"))
        .unwrap_or_else(|| panic!("no diff in the thread:\n{}", transcript(&seen)));
    assert!(
        diff < card,
        "the diff before the card:\n{}",
        transcript(&seen)
    );
    assert!(
        seen[diff].text.contains("- replicas: 3"),
        "{:#?}",
        seen[diff]
    );
    assert!(
        seen[diff..card]
            .iter()
            .any(|m| m.text.contains("service | pods") && m.text.contains("api | 3")),
        "the table before the card:\n{}",
        transcript(&seen)
    );
    assert!(seen[diff].controls.is_empty(), "{:#?}", seen[diff]);
    // The engine delivers the blocks quietly (`Delivery::quietly`), but Slack has no silent
    // post: the blocks' message notifies like any new message in the thread (see the outbox's
    // `PostPieces`), where Discord and Telegram post it silently. Its notification starts with
    // the diff, and it mentions nobody; the question's card notifies too.
    assert!(
        seen[diff].notified && seen[diff].mentioned.is_empty(),
        "{:#?}",
        seen[diff]
    );
    assert_eq!(
        seen[diff].notification.as_deref().map(|n| n.lines().next()),
        Some(Some("- replicas: 3")),
        "{:#?}",
        seen[diff]
    );
    assert!(seen[card].notified, "the question notifies: {q:#?}");
    let mut out = w.transcript(&said);
    w.click("U123", &q.id, "Approve").await;
    w.until_text(&said, "Noted:").await;
    w.until_ack(&said, "white_check_mark").await;
    let settled = w.view(&said).into_iter().find(|m| m.id == q.id).unwrap();
    assert!(
        settled.edited && settled.controls.is_empty(),
        "{settled:#?}"
    );
    assert!(
        settled.text.contains("Answered by @Ada"),
        "{}",
        settled.text
    );
    out.push_str("--- after Ada clicks Approve ---\n");
    out.push_str(&w.transcript(&said));
    golden("confirm_with_blocks", &out);
}

/// A form input: the card, the modal its "Answer…" opens, the thread after the submission.
async fn form_case(word: &str, fill: &[(&str, Value)]) -> String {
    let w = world().await;
    let (said, q) = asked(&w, word).await;
    let mut out = w.transcript(&said);
    w.click("U123", &q.id, "Answer…").await;
    eventually("the modal", WAIT, async || !w.fake.views().is_empty()).await;
    out.push_str("--- Ada clicks Answer… ---\n");
    for v in w.fake.seen_views() {
        out.push_str(&v);
        out.push('\n');
    }
    let view = w.fake.views().pop().unwrap();
    let payload = w
        .fake
        .submit_view("U123", view["id"].as_str().unwrap(), fill)
        .expect("a valid submission");
    w.interact(&payload).await;
    w.until_text(&said, "Noted:").await;
    w.until_ack(&said, "white_check_mark").await;
    out.push_str("--- after Ada sends the modal ---\n");
    out.push_str(&w.transcript(&said));
    out
}

fn input_id(view: &Value, block: usize) -> String {
    view["blocks"][block]["element"]["action_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toggle_left_off() {
    let out = form_case("toggle", &[]).await;
    assert!(
        out.contains("Answered by @Ada: Notify the team — off"),
        "{out}"
    );
    golden("toggle", &out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_number_input() {
    let out = {
        let w = world().await;
        let (said, q) = asked(&w, "number").await;
        let mut out = w.transcript(&said);
        w.click("U123", &q.id, "Answer…").await;
        eventually("the modal", WAIT, async || !w.fake.views().is_empty()).await;
        out.push_str("--- Ada clicks Answer… ---\n");
        out.push_str(&w.fake.seen_views().join("\n"));
        out.push('\n');
        let view = w.fake.views().pop().unwrap();
        let id = input_id(&view, 0);
        let payload = w
            .fake
            .submit_view("U123", view["id"].as_str().unwrap(), &[(&id, json!("3"))])
            .expect("a valid submission");
        w.interact(&payload).await;
        w.until_text(&said, "Noted:").await;
        w.until_ack(&said, "white_check_mark").await;
        out.push_str("--- after Ada sends 3 ---\n");
        out.push_str(&w.transcript(&said));
        out
    };
    assert!(out.contains("Answered by @Ada: 3"), "{out}");
    golden("number_input", &out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_input_answered_by_a_typed_reply() {
    let w = world().await;
    let (said, _) = asked(&w, "text").await;
    let mut out = w.transcript(&said);
    w.write(&said.ts, "U123", "the disk is full").await;
    w.until_text(&said, "Noted:").await;
    w.until_ack(&said, "white_check_mark").await;
    out.push_str("--- after Ada replies in the thread ---\n");
    out.push_str(&w.transcript(&said));
    assert!(out.contains("the disk is full"), "{out}");
    golden("text_input", &out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thirty_option_question() {
    let w = world().await;
    let (said, q) = asked(&w, "thirty").await;
    for i in 1..=30 {
        assert!(
            q.controls.iter().any(
                |c| c.contains(&format!("region-{i} |")) || c.ends_with(&format!("region-{i}"))
            ),
            "region-{i}: {:?}",
            q.controls
        );
    }
    golden("thirty_options", &w.transcript(&said));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_four_question_set() {
    let w = world().await;
    let (said, q) = asked(&w, "four").await;
    let mut out = w.transcript(&said);
    w.click("U123", &q.id, "Answer…").await;
    eventually("the modal", WAIT, async || !w.fake.views().is_empty()).await;
    out.push_str("--- Ada clicks Answer… ---\n");
    out.push_str(&w.fake.seen_views().join("\n"));
    out.push('\n');
    golden("four_questions", &out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multiple_choice_answered_by_clicks() {
    let w = world().await;
    let (said, q) = asked(&w, "multi").await;
    let mut out = w.transcript(&said);
    // Two boxes checked, then Submit: Slack sends the message's state with the click.
    let msg = w.fake.message(&q.id).unwrap();
    let group = msg
        .blocks
        .as_array()
        .unwrap()
        .iter()
        .find_map(|b| {
            b["elements"]
                .as_array()?
                .iter()
                .find(|e| e["type"] == "checkboxes")
                .map(|e| (b["block_id"].clone(), e.clone()))
        })
        .expect("a checkbox group");
    let (block_id, boxes) = group;
    let picked: Vec<Value> = boxes["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["text"]["text"] == "eu" || o["text"]["text"] == "asia")
        .map(|o| json!({"text": o["text"], "value": o["value"]}))
        .collect();
    let state = json!({block_id.as_str().unwrap(): {boxes["action_id"].as_str().unwrap():
        {"type": "checkboxes", "selected_options": picked}}});
    let mut check = boxes.clone();
    check["block_id"] = block_id.clone();
    check["selected_options"] = json!(picked);
    let payload = w
        .fake
        .block_actions("U123", &q.id, check, state.clone(), &w.fake.trigger_id());
    w.interact(&payload).await;
    let mut submit = w.fake.element(&q.id, "Submit").expect("Submit");
    submit["block_id"] = w.fake.element(&q.id, "Submit").unwrap()["block_id"].clone();
    let payload = w
        .fake
        .block_actions("U123", &q.id, submit, state, &w.fake.trigger_id());
    w.interact(&payload).await;
    w.until_text(&said, "Noted:").await;
    w.until_ack(&said, "white_check_mark").await;
    out.push_str("--- after Ada checks eu and asia, then Submit ---\n");
    out.push_str(&w.transcript(&said));
    assert!(out.contains("eu, asia"), "{out}");
    golden("multiple_choice", &out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_after_a_mention() {
    let w = world().await;
    let said = w.mention(None, &format!("<@{BOT_USER}> slow")).await;
    eventually("the reply to start", WAIT, async || {
        w.view(&said)
            .iter()
            .any(|m| m.sender == BOT_NAME && m.text.contains("Step 3"))
    })
    .await;
    let stop = w
        .mention(Some(&said.ts), &format!("<@{BOT_USER}>: stop"))
        .await;
    w.until_ack(&said, "white_check_mark").await;
    eventually("the reply to stop", WAIT, async || {
        w.view(&said).iter().all(|m| !m.streaming)
    })
    .await;
    let seen = w.view(&said);
    let reply = seen
        .iter()
        .find(|m| m.sender == BOT_NAME && m.text.contains("Step 0"))
        .unwrap();
    assert!(!reply.text.contains("All done."), "{}", reply.text);
    assert!(w.fake.message(&stop.id()).is_some());
    // The reply's length varies with timing: the golden keeps its start and end marks.
    let out: String = transcript(&seen)
        .lines()
        .map(|l| {
            if l.starts_with("    notification: \"Step 0 is done") {
                "    notification: \"Step 0 is done. …\"".to_owned()
            } else if l.contains("Step 0 is done") {
                // Where it stops varies: its start, and whether it says it was stopped.
                let end = if l.ends_with("(stopped)") {
                    "(stopped)"
                } else {
                    "(not marked)"
                };
                format!("    Step 0 is done. Step 1 is done. … {end}")
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    golden("stop_after_mention", &stable(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_after_a_mention() {
    let w = world().await;
    let (said, _) = asked(&w, "choice").await;
    w.mention(Some(&said.ts), &format!("<@{BOT_USER}>, skip"))
        .await;
    // The set is dismissed: the card says so and has no controls left.
    w.until_text(&said, "Skipped by @Ada").await;
    w.until_ack(&said, "white_check_mark").await;
    let out = w.transcript(&said);
    let card = w
        .view(&said)
        .into_iter()
        .find(|m| m.text.contains("Skipped"))
        .unwrap();
    assert!(card.controls.is_empty(), "{card:#?}");
    golden("skip_after_mention", &out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_model() {
    let w = world().await;
    let said = w.mention(None, &format!("<@{BOT_USER}> fail")).await;
    w.until_ack(&said, "x").await;
    eventually("the failure notice", WAIT, async || w.view(&said).len() > 1).await;
    golden("failed_model", &w.transcript(&said));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_queued_while_a_turn_runs() {
    let w = world().await;
    let first = w.mention(None, &format!("<@{BOT_USER}> gated")).await;
    w.until_ack(&first, "hourglass_flowing_sand").await;
    let second = w.write(&first.ts, "U123", "and then hi").await;
    eventually("the queued message's ack", WAIT, async || {
        w.fake
            .message(&second.id())
            .is_some_and(|m| !m.bot_reactions().is_empty())
    })
    .await;
    w.until_text(&first, "Got it").await;
    let mut out = w.transcript(&first);
    w.gate.add_permits(1);
    w.until_ack(&second, "white_check_mark").await;
    w.until_text(&first, "You said: and then hi").await;
    out.push_str("--- after the first turn ends ---\n");
    out.push_str(&w.transcript(&first));
    golden("queued_message", &out);
}

/// Ada fixes a typo in a message that waits behind a running turn, and deletes another (Slack's
/// `message_changed` / `message_deleted`): the first runs with the new text, the other never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_message_edited_or_deleted_in_slack_runs_new_or_not_at_all() {
    let w = world().await;
    let first = w.mention(None, &format!("<@{BOT_USER}> gated")).await;
    w.until_ack(&first, "hourglass_flowing_sand").await;
    let typo = w.write(&first.ts, "U123", "and then hi tehre").await;
    let gone = w.write(&first.ts, "U123", "never mind").await;
    w.until_ack(&gone, "eyes").await;
    let w = &w;
    let post = |event: Value| async move {
        let body = w.fake.event_callback(event);
        let res = w
            .fake
            .post_event(&w.base, &body, Signature::Good, None)
            .await;
        assert_eq!(res.status(), 200);
    };
    let original = |m: &Message| {
        json!({"type": "message", "user": m.user, "text": m.text, "ts": m.ts,
               "thread_ts": first.ts})
    };
    let mut edited = original(&typo);
    edited["text"] = json!("and then hi there");
    edited["edited"] = json!({"user": "U123", "ts": w.fake.next_ts()});
    post(
        json!({"type": "message", "subtype": "message_changed", "hidden": true,
                "channel": "C42", "ts": w.fake.next_ts(), "event_ts": w.fake.next_ts(),
                "channel_type": "channel", "message": edited,
                "previous_message": original(&typo)}),
    )
    .await;
    post(
        json!({"type": "message", "subtype": "message_deleted", "hidden": true,
                "channel": "C42", "ts": w.fake.next_ts(), "event_ts": w.fake.next_ts(),
                "channel_type": "channel", "deleted_ts": gone.ts,
                "previous_message": original(&gone)}),
    )
    .await;
    w.gate.add_permits(1);
    w.until_ack(&typo, "white_check_mark").await;
    w.until_text(&first, "You said: and then hi there").await;
    let text = w.transcript(&first);
    assert!(!text.contains("You said: and then hi tehre"), "{text}");
    assert!(!text.contains("You said: never mind"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval() {
    let w = world().await;
    let said = w
        .mention(None, &format!("<@{BOT_USER}> please deploy"))
        .await;
    let q = w.until_question(&said).await;
    let mut out = w.transcript(&said);
    // Bo is no approver: only Bo is told so, and the card stays.
    w.click("U777", &q.id, "Approve").await;
    eventually("Bo's notice", WAIT, async || {
        w.view(&said)
            .iter()
            .any(|m| m.only_for.as_deref() == Some("Bo"))
    })
    .await;
    let notice = w
        .view(&said)
        .into_iter()
        .find(|m| m.only_for.is_some())
        .unwrap();
    assert!(!notice.notified, "{notice:#?}");
    assert_eq!(w.runs.load(Ordering::SeqCst), 0);
    out.push_str("--- after Bo clicks Approve ---\n");
    out.push_str(&w.transcript(&said));
    w.click("U123", &q.id, "Approve").await;
    w.until_text(&said, "Noted:").await;
    w.until_ack(&said, "white_check_mark").await;
    assert_eq!(w.runs.load(Ordering::SeqCst), 1);
    // Settled, the card no longer says how to answer; it keeps the tool and its arguments.
    let card = w.view(&said).into_iter().find(|m| m.id == q.id).unwrap();
    assert!(!card.text.contains("refuses it"), "{}", card.text);
    assert!(
        card.text.contains("\"version\": \"1.4.2\""),
        "{}",
        card.text
    );
    out.push_str("--- after Ada approves ---\n");
    out.push_str(&w.transcript(&said));
    // Slack draws the fence as a code block: no language tag left in it.
    assert!(!out.contains("```json"), "{out}");
    golden("approval", &out);
}

/// Past Slack's 100 options a select would show only some: every option is listed, numbered, and
/// a reply in the thread with its number answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_and_one_options_answered_by_number() {
    let w = world().await;
    let (said, q) = asked(&w, "many").await;
    for i in 1..=101 {
        assert!(q.text.contains(&format!("\n{i}. host-{i}")), "host-{i}");
    }
    assert!(
        !q.controls.iter().any(|c| c.contains("select")),
        "{:?}",
        q.controls
    );
    let mut out = w.transcript(&said);
    w.write(&said.ts, "U123", "101").await;
    w.until_text(&said, "Noted:").await;
    w.until_ack(&said, "white_check_mark").await;
    out.push_str("--- after Ada replies 101 ---\n");
    out.push_str(&w.transcript(&said));
    assert!(out.contains("Answered by @Ada: host-101"), "{out}");
    golden("hundred_and_one_options", &out);
}
