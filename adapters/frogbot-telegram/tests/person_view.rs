//! What a person sees in a Telegram chat (`FakeBotApi::person_view`), end to end: FrogBot's
//! engine on SQLite driven by a scripted model, the Telegram channel over the fake Bot API (long
//! polling). Each case compares the view's [`transcript`] with
//! `tests/golden/person_view/<case>.txt` (`UPDATE_GOLDEN=1` rewrites them) and asserts in code what
//! matters: a short reply; a 40,000-character streamed reply (whole, in order, within 4,096
//! characters a message, only the first message notifying; its golden is a summary); each input
//! kind; a 30-option question; a four-question set; a multiple choice answered by clicks; `stop`
//! and `skip` written after a mention of the bot; a failed model; a message queued while a turn
//! runs; an approval.

use std::sync::Arc;
use std::time::Duration;

use frogbot_channel::Adapter;
use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, call, reply};
use frogbot_core::agent::{
    ApprovalPolicy, ChannelSettings, Engine, EngineConfig, ModelEvent, ModelMessage, ModelRequest,
    QUEUED_TEXT, channel_chat_id, tool_fn, with_approval,
};
use frogbot_core::model::now_millis;
use frogbot_telegram::PLATFORM;
use frogbot_telegram::channel::{Config, Receive, TelegramAdapter, connect};
use frogbot_telegram::render::MAX_TEXT;
use frogbot_telegram::testing::{
    self as testing, BOT_USERNAME, Call, FakeBotApi, SeenMessage, group_chat, private_chat,
    transcript, user,
};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

const ADA: i64 = 42;
const GROUP: i64 = -100700;
const INTERVAL: Duration = Duration::from_millis(150);
/// The long reply's length.
const LONG: usize = 40_000;

fn golden(case: &str, got: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/person_view")
        .join(format!("{case}.txt"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "no golden {} ({e}); run with UPDATE_GOLDEN=1 to write it",
            path.display()
        )
    });
    if want != got {
        let mut diff = String::new();
        let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
        for i in 0..w.len().max(g.len()) {
            match (w.get(i), g.get(i)) {
                (Some(a), Some(b)) if a == b => {}
                (a, b) => {
                    diff.push_str(&format!(
                        "line {}:\n  - {}\n  + {}\n",
                        i + 1,
                        a.unwrap_or(&"<none>"),
                        b.unwrap_or(&"<none>")
                    ));
                }
            }
        }
        panic!(
            "the person view of {case} differs from {} (UPDATE_GOLDEN=1 rewrites it):\n{diff}\n--- got:\n{got}",
            path.display()
        );
    }
}

/// The person's last message as the model reads it (without a "Name: " prefix).
fn last_user(req: &ModelRequest) -> String {
    let text = req
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            ModelMessage::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default();
    text.strip_prefix("Ada: ")
        .map_or(text.clone(), str::to_owned)
}

fn delta(text: &str) -> ScriptEvent {
    ScriptEvent::Event(ModelEvent::TextDelta(text.into()))
}

/// The long reply: numbered lines of prose, exactly [`LONG`] characters.
fn long_text() -> String {
    let mut text = String::new();
    let mut i = 0;
    while text.len() < LONG {
        i += 1;
        text.push_str(&format!(
            "Line {i:04}: the frog sat on the log and watched the water ripple.\n"
        ));
        if i % 10 == 0 {
            text.push('\n');
        }
    }
    text.truncate(LONG - 1);
    text.push('.');
    text
}

fn ask(input: Value) -> Vec<ScriptEvent> {
    call("c1", "question", input)
}

/// The agent. `gate`: what the "wait" turn waits for before it answers.
fn model(gate: Arc<Semaphore>) -> ScriptedModel {
    ScriptedModel::new(move |req: &ModelRequest| {
        if let Some(ModelMessage::Tool { content, .. }) = req.messages.last() {
            return reply(&format!("Thanks, I have your answer: {content}"));
        }
        let text = last_user(req);
        let choice = json!({"header": "Env", "question": "Deploy **v1.4** where?",
            "options": [{"label": "staging", "description": "the *test* cluster"}, {"label": "prod"}]});
        match text.as_str() {
            "hi" => reply("Hello Ada! The pond is calm today."),
            "long" => {
                let long: Vec<char> = long_text().chars().collect();
                let mut e = Vec::new();
                for chunk in long.chunks(500) {
                    e.push(delta(&chunk.iter().collect::<String>()));
                    e.push(ScriptEvent::Pause(Duration::from_millis(5)));
                }
                e.extend(reply(""));
                e
            }
            "count" => vec![
                delta("Counting the frogs in the pond, one by one.\n\n"),
                // Never opened: the turn writes until it is stopped.
                ScriptEvent::Gate(Arc::new(Semaphore::new(0))),
            ],
            "wait" => {
                let mut e = vec![ScriptEvent::Gate(gate.clone())];
                e.extend(reply("Here is the first answer."));
                e
            }
            "and this" => reply("And here is the second one."),
            "fail" => vec![
                delta("Let me check the "),
                ScriptEvent::Fail("the model is overloaded".into()),
            ],
            "choice" | "ask" => ask(json!({"questions": [choice]})),
            "confirm" => ask(json!({"questions": [{"header": "Go",
                "question": "Deploy <v1.4> & restart?", "kind": "confirm", "label": "Deploy",
                "danger": true}]})),
            "review" => ask(json!({"questions": [{"header": "Go",
            "question": "Scale the API?", "kind": "confirm", "label": "Approve"}],
            "blocks": [
                {"type": "code", "language": "diff", "code": "- replicas: 3\n+ replicas: 4"},
                {"type": "table", "columns": ["service", "pods"], "rows": [["api", 3]]}
            ]})),
            "toggle" => ask(json!({"questions": [{"header": "Notify",
                "question": "Tell the team?", "kind": "toggle", "label": "Notify the team"}]})),
            "number" => ask(
                json!({"questions": [{"header": "Pods", "question": "How many?",
                "kind": "number_input", "min": 1, "max": 9, "unit": "pods"}]}),
            ),
            "text" => ask(
                json!({"questions": [{"header": "Why", "question": "Reason?",
                "kind": "text_input", "placeholder": "because…"}]}),
            ),
            "thirty" => {
                let options: Vec<Value> = (1..=30)
                    .map(|i| json!({"label": format!("pond {i}")}))
                    .collect();
                ask(
                    json!({"questions": [{"header": "Pond", "question": "Which pond?",
                    "options": options}]}),
                )
            }
            "set" => ask(json!({"questions": [
                choice,
                {"header": "Notify", "question": "Tell the team?", "kind": "toggle",
                    "label": "Notify the team"},
                {"header": "Why", "question": "Reason?", "kind": "text_input"},
                {"header": "Go", "question": "Ready?", "kind": "confirm", "label": "Go"}
            ]})),
            "multi" => ask(
                json!({"questions": [{"header": "Regions", "question": "Which regions?",
                "multiple": true, "options": [{"label": "eu"}, {"label": "us"}, {"label": "asia"}]}]}),
            ),
            "merge" => call("m1", "merge", json!({"pr": 7, "branch": "frog/lily"})),
            _ => reply(&format!("echo: {text}")),
        }
    })
}

struct Setup {
    fake: FakeBotApi,
    gate: Arc<Semaphore>,
    engine: Engine,
    _channel: TelegramAdapter,
    shutdown: CancellationToken,
    _db: frogbot_testkit::TestDb,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn setup() -> Setup {
    let fake = FakeBotApi::start().await;
    let mut config = Config::new("123:TEST");
    config.api_url = Some(fake.api_url());
    config.receive = Receive::polling();
    config.users = [(ADA.to_string(), "ada".to_string())].into();
    let channel = connect(config).await.unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let gate = Arc::new(Semaphore::new(0));
    let merge = tool_fn(
        "merge",
        "Merges a pull request",
        |input: Value, _ctx| async move { Ok::<_, BoxError>(json!({"merged": input["pr"]})) },
    );
    let policy = ApprovalPolicy {
        approvers: vec!["ada".into()],
        expires_in_seconds: None,
    };
    let engine = Engine::new(
        store,
        vec![frogbot_testkit::offer("main", model(gate.clone()))],
        vec![with_approval(merge, policy)],
        EngineConfig::default(),
    )
    .with_channel(channel.channel())
    .with_channel_settings(
        PLATFORM,
        ChannelSettings {
            stream_interval: INTERVAL,
            ..Default::default()
        },
    )
    .unwrap();
    let shutdown = CancellationToken::new();
    channel.start(engine.handle(), shutdown.clone()).unwrap();
    Setup {
        fake,
        gate,
        engine,
        _channel: channel,
        shutdown,
        _db: db,
    }
}

/// Ada writes `text` in her private chat; the message id.
fn say(s: &Setup, text: &str) -> i64 {
    let update = s
        .fake
        .user_message(private_chat(ADA, "Ada"), user(ADA, "Ada"), text, None);
    let id = update["message"]["message_id"].as_i64().unwrap();
    s.fake.push(update);
    id
}

/// Ada writes `text` in the group (its entities as a Telegram client marks them: a leading
/// `@frogbot` mention, a `/command@frogbot`); the message id.
fn say_in_group(s: &Setup, text: &str) -> i64 {
    let mut update = s
        .fake
        .user_message(group_chat(GROUP, false), user(ADA, "Ada"), text, None);
    let mention = format!("@{BOT_USERNAME}");
    let entities = if text.starts_with(&mention) {
        json!([{"type": "mention", "offset": 0, "length": mention.len()}])
    } else if text.starts_with('/') {
        let len = text.find(' ').unwrap_or(text.len());
        json!([{"type": "bot_command", "offset": 0, "length": len}])
    } else {
        json!([])
    };
    update["message"]["entities"] = entities;
    let id = update["message"]["message_id"].as_i64().unwrap();
    s.fake.push(update);
    id
}

/// Whether FrogBot has finished showing the turn of the person's message `id` in `chat`: the
/// bot's reaction on it is one of `acks` and came after every message the bot sent or edited in
/// the chat.
fn shown(calls: &[Call], chat: i64, id: i64, acks: &[&str]) -> bool {
    let ok = |c: &&Call| c.result.is_some();
    let Some(last_ack) = calls.iter().rposition(|c| {
        c.result.is_some() && c.method == "setmessagereaction" && c.body["message_id"] == id
    }) else {
        return false;
    };
    let emoji = calls[last_ack].body["reaction"][0]["emoji"]
        .as_str()
        .unwrap_or_default();
    acks.contains(&emoji)
        && !calls[last_ack..].iter().filter(ok).any(|c| {
            c.body["chat_id"] == chat
                && matches!(
                    c.method.as_str(),
                    "sendmessage"
                        | "editmessagetext"
                        | "editmessagereplymarkup"
                        | "sendmessagedraft"
                )
        })
}

/// The view of Ada's private chat once the turn of her message `id` is shown.
async fn after_turn(s: &Setup, id: i64, acks: &[&str]) -> Vec<SeenMessage> {
    s.fake
        .wait_view(&ADA.to_string(), "the turn shown", |_, calls| {
            shown(calls, ADA, id, acks)
        })
        .await
}

/// Whether the agent's answer after the question is shown and the person's first message is
/// marked done (👌): the question's turn is over.
fn answered(seen: &[SeenMessage], _: &[Call]) -> bool {
    seen.iter()
        .any(|m| !m.draft && m.text.starts_with("Thanks, I have your answer"))
        && seen
            .first()
            .is_some_and(|m| m.reactions.iter().any(|r| r.0 == "👌"))
}

/// What the person's message shows once its turn ended with a question waiting for its answer:
/// still ✍ (working), not 👌 — the turn is not done until the question is answered.
const ENDED: &[&str] = &["✍"];

/// The view of `thread` once the turn of the person's message `id` ended (its reaction one of
/// [`ENDED`]) and its question is drawn: the view's last message is what `last` expects (FrogBot
/// draws a question after the turn's end: a keyboard last, or a prompt for a typed answer).
async fn after_question_in(
    s: &Setup,
    thread: &str,
    id: i64,
    last: impl Fn(&SeenMessage) -> bool,
) -> Vec<SeenMessage> {
    let seen = s
        .fake
        .wait_view(thread, "the question shown", |seen, _| {
            let acked = seen
                .iter()
                .find(|m| m.id == id)
                .is_some_and(|m| m.reactions.iter().any(|r| ENDED.contains(&r.0.as_str())));
            acked
                && seen
                    .last()
                    .is_some_and(|m| m.sender == "FrogBot" && last(m))
        })
        .await;
    let call = if seen.iter().any(|m| m.text.contains("Approval")) {
        "m1"
    } else {
        "c1"
    };
    recorded(s, thread, call).await;
    seen
}

/// Waits until FrogBot recorded the question of call `call` in `thread` as drawn (not posting: a
/// click before that is answered as out of date — the person would have to click again).
async fn recorded(s: &Setup, thread: &str, call: &str) {
    let chat = channel_chat_id(PLATFORM, thread);
    let deadline = std::time::Instant::now() + testing::WAIT;
    loop {
        let q = s
            .engine
            .store_for_tests()
            .get_question(&chat, call, now_millis())
            .await
            .unwrap();
        if q.is_some_and(|q| q.rendered && !q.posting) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "question {call} never recorded"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// [`after_question_in`] Ada's private chat, the question's keyboard last.
async fn after_question(s: &Setup, id: i64) -> Vec<SeenMessage> {
    after_question_in(s, &ADA.to_string(), id, |m| !m.buttons.is_empty()).await
}

/// The last message of the view showing a button labelled `label`: (its id, the callback data).
fn button(s: &Setup, seen: &[SeenMessage], label: &str) -> (i64, String) {
    let m = seen
        .iter()
        .rev()
        .find(|m| m.buttons.iter().flatten().any(|b| b == label))
        .unwrap_or_else(|| panic!("no button {label:?} in {}", transcript(seen)));
    let data = s.fake.sent(m.id)["reply_markup"]["inline_keyboard"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap().iter())
        .find(|b| b["text"] == label)
        .unwrap()["callback_data"]
        .as_str()
        .unwrap()
        .to_owned();
    (m.id, data)
}

/// Ada presses `label` on the latest message showing it.
fn press(s: &Setup, seen: &[SeenMessage], label: &str) {
    let (id, data) = button(s, seen, label);
    let update = s.fake.click(&user(ADA, "Ada"), id, &data);
    s.fake.push(update);
}

/// A question notifies once: one of the bot's messages in `open` (its prompts, pages and card are
/// one question) notified.
fn notifies_once(open: &[SeenMessage]) {
    let n = open
        .iter()
        .filter(|m| m.sender == "FrogBot" && m.notified)
        .count();
    assert_eq!(n, 1, "one notification: {}", transcript(open));
}

fn no_markdown(seen: &[SeenMessage]) {
    for m in seen.iter().filter(|m| m.sender == "FrogBot") {
        for t in std::iter::once(&m.text).chain(m.buttons.iter().flatten()) {
            assert!(!t.contains("**") && !t.contains('`'), "raw Markdown: {t}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_reply() {
    let s = setup().await;
    let id = say(&s, "hi");
    let seen = after_turn(&s, id, &["👌"]).await;
    assert_eq!(seen.len(), 2, "{}", transcript(&seen));
    assert_eq!(seen[1].text, "Hello Ada! The pond is calm today.");
    assert!(seen[1].notified && !seen[1].draft);
    assert_eq!(seen[1].reply_to, Some(id));
    golden("short_reply", &transcript(&seen));
}

/// Checks a long streamed reply as a person sees it and sums it up for the golden.
fn long_summary(seen: &[SeenMessage]) -> String {
    let replies = &seen[1..];
    let words: Vec<&str> = replies
        .iter()
        .flat_map(|m| m.text.split_whitespace())
        .collect();
    let want = long_text();
    assert_eq!(
        words,
        want.split_whitespace().collect::<Vec<_>>(),
        "the whole text, in order"
    );
    assert!(
        replies.len() >= LONG / MAX_TEXT,
        "{} messages",
        replies.len()
    );
    for (i, m) in replies.iter().enumerate() {
        assert!(m.text.chars().count() <= MAX_TEXT);
        assert!(m.buttons.is_empty(), "no Stop button left: {:?}", m.buttons);
        assert_eq!(
            m.notified,
            i == 0,
            "only the first message notifies: [{}]",
            i + 2
        );
        assert!(!m.draft);
    }
    let mut out = format!(
        "{} messages after the person's, {} characters shown\n",
        replies.len(),
        replies
            .iter()
            .map(|m| m.text.chars().count())
            .sum::<usize>()
    );
    for (i, m) in replies.iter().enumerate() {
        let first = m.text.lines().next().unwrap_or_default();
        let last = m.text.lines().last().unwrap_or_default();
        out.push_str(&format!(
            // Whether a piece was edited depends on when the stream drew it: not in the golden.
            "[{}] {} ({}): {} characters, buttons {}, from {first:?} to {last:?}\n",
            i + 2,
            m.sender,
            if m.notified { "notified" } else { "silent" },
            m.text.chars().count(),
            m.buttons.len(),
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_streamed_reply_with_drafts() {
    let s = setup().await;
    let id = say(&s, "long");
    // While the model writes, the person sees a draft: the piece being written, as an ephemeral
    // preview that notifies nobody and has no button (a typed stop is the Stop control there).
    let writing = s
        .fake
        .wait_view(&ADA.to_string(), "a draft", |seen, _| {
            seen.last().is_some_and(|m| m.draft)
        })
        .await;
    let draft = writing.last().unwrap();
    assert!(!draft.notified && draft.buttons.is_empty() && !draft.text.is_empty());
    assert!(
        long_text().contains(draft.text.trim()),
        "a piece of the reply"
    );
    let seen = after_turn(&s, id, &["👌"]).await;
    // At the end the drafts are gone, replaced by the messages.
    assert!(!seen.iter().any(|m| m.draft));
    golden("long_reply_private", &long_summary(&seen));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_streamed_reply_by_edits() {
    let s = setup().await;
    s.fake.refuse_drafts(Some(
        "Bad Request: method is available only for bots with forum topic mode enabled",
    ));
    let id = say(&s, "long");
    let seen = after_turn(&s, id, &["👌"]).await;
    assert!(seen[1].edited, "streamed by edits");
    golden("long_reply_edits", &long_summary(&seen));
}

/// Asks `what`, shows the open question, answers it with `answer`, shows the outcome.
async fn kind_case(case: &str, what: &str, prompt: bool, answer: impl Fn(&Setup, &[SeenMessage])) {
    let s = setup().await;
    let id = say(&s, what);
    let open = after_question_in(&s, &ADA.to_string(), id, |m| {
        if prompt {
            m.reply_field.is_some()
        } else {
            !m.buttons.is_empty()
        }
    })
    .await;
    no_markdown(&open);
    notifies_once(&open);
    answer(&s, &open);
    let done = s
        .fake
        .wait_view(&ADA.to_string(), "the agent's answer", answered)
        .await;
    no_markdown(&done);
    golden(
        case,
        &format!(
            "{}--- after the answer ---\n{}",
            transcript(&open),
            transcript(&done)
        ),
    );
}

/// Ada replies `text` to the bot's latest message asking for a reply.
fn reply_to_prompt(s: &Setup, seen: &[SeenMessage], text: &str) {
    let prompt = seen
        .iter()
        .rev()
        .find(|m| m.reply_field.is_some())
        .unwrap_or_else(|| panic!("no prompt in {}", transcript(seen)));
    let update = s.fake.user_message(
        private_chat(ADA, "Ada"),
        user(ADA, "Ada"),
        text,
        Some(prompt.id),
    );
    s.fake.push(update);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_choice() {
    kind_case("kind_choice", "choice", false, |s, seen| {
        press(s, seen, "staging")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm() {
    kind_case("kind_confirm", "confirm", false, |s, seen| {
        press(s, seen, "⚠️ Deploy")
    })
    .await;
}

/// A question with what it is about (issue 40): the diff and the table come first, without a
/// notification, then the question's card, which is the one message that notifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_beside_a_diff() {
    kind_case("kind_confirm_with_blocks", "review", false, |s, seen| {
        let card = seen
            .iter()
            .position(|m| !m.buttons.is_empty())
            .expect("the card");
        let diff = seen
            .iter()
            .position(|m| m.text.contains("+ replicas: 4"))
            .unwrap_or_else(|| panic!("no diff in {}", transcript(seen)));
        assert!(
            diff < card,
            "the diff before the card: {}",
            transcript(seen)
        );
        assert!(!seen[diff].notified && seen[card].notified);
        assert!(seen[diff].text.contains("api"), "the table with the diff");
        press(s, seen, "Approve")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toggle() {
    kind_case("kind_toggle", "toggle", false, |s, seen| {
        press(s, seen, "✗ Off")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_number_input() {
    kind_case("kind_number_input", "number", true, |s, seen| {
        reply_to_prompt(s, seen, "3")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_input() {
    kind_case("kind_text_input", "text", true, |s, seen| {
        reply_to_prompt(s, seen, "the tests pass")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thirty_option_question() {
    let s = setup().await;
    let id = say(&s, "thirty");
    let seen = after_question(&s, id).await;
    let q = seen.last().unwrap();
    let labels: Vec<&String> = q.buttons.iter().flatten().collect();
    assert_eq!(labels.len(), 31, "30 options and Skip");
    for i in 1..=30 {
        assert!(labels.iter().any(|l| **l == format!("pond {i}")));
    }
    golden("thirty_options", &transcript(&seen));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_four_question_set() {
    let s = setup().await;
    let id = say(&s, "set");
    let open = after_question_in(&s, &ADA.to_string(), id, |m| {
        m.buttons.iter().flatten().any(|b| b == "📨 Send answers")
    })
    .await;
    no_markdown(&open);
    notifies_once(&open);
    press(&s, &open, "Env: prod");
    let picked = s
        .fake
        .wait_view(&ADA.to_string(), "prod picked", |seen, _| {
            seen.iter()
                .flat_map(|m| m.buttons.iter().flatten())
                .any(|b| b == "✓ Env: prod")
        })
        .await;
    recorded(&s, &ADA.to_string(), "c1").await;
    reply_to_prompt(&s, &picked, "release day");
    let typed = s
        .fake
        .wait_view(&ADA.to_string(), "the reason on the card", |seen, _| {
            seen.iter().any(|m| m.text.contains("✅ release day"))
        })
        .await;
    recorded(&s, &ADA.to_string(), "c1").await;
    press(&s, &typed, "Go");
    let ready = s
        .fake
        .wait_view(&ADA.to_string(), "Go pressed", |seen, _| {
            seen.iter()
                .flat_map(|m| m.buttons.iter().flatten())
                .any(|b| b == "✓ Go")
        })
        .await;
    recorded(&s, &ADA.to_string(), "c1").await;
    press(&s, &ready, "📨 Send answers");
    let done = s
        .fake
        .wait_view(&ADA.to_string(), "the agent's answer", answered)
        .await;
    no_markdown(&done);
    golden(
        "four_question_set",
        &format!(
            "{}--- before Send answers ---\n{}--- after the answers ---\n{}",
            transcript(&open),
            transcript(&ready),
            transcript(&done)
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multiple_choice_answered_by_clicks() {
    let s = setup().await;
    let id = say(&s, "multi");
    let open = after_question(&s, id).await;
    press(&s, &open, "eu");
    let one = s
        .fake
        .wait_view(&ADA.to_string(), "eu checked", |seen, _| {
            seen.iter()
                .flat_map(|m| m.buttons.iter().flatten())
                .any(|b| b == "✓ eu")
        })
        .await;
    recorded(&s, &ADA.to_string(), "c1").await;
    press(&s, &one, "asia");
    let two = s
        .fake
        .wait_view(&ADA.to_string(), "asia checked", |seen, _| {
            seen.iter()
                .flat_map(|m| m.buttons.iter().flatten())
                .any(|b| b == "✓ asia")
        })
        .await;
    recorded(&s, &ADA.to_string(), "c1").await;
    press(&s, &two, "Done");
    let done = s
        .fake
        .wait_view(&ADA.to_string(), "the agent's answer", answered)
        .await;
    assert!(
        done.iter().any(|m| m.text.contains("eu, asia")),
        "{}",
        transcript(&done)
    );
    // Settled, the question no longer says how to answer it.
    assert!(!done[1].text.contains("Done"), "{}", done[1].text);
    golden(
        "multiple_choice_clicks",
        &format!(
            "{}--- two clicks ---\n{}--- Done ---\n{}",
            transcript(&open),
            transcript(&two),
            transcript(&done)
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_and_skip_after_a_mention() {
    let s = setup().await;
    let group = GROUP.to_string();
    say_in_group(&s, &format!("@{BOT_USERNAME} count"));
    s.fake
        .wait_view(&group, "the first sentence", |seen, _| {
            seen.iter()
                .any(|m| m.text.starts_with("Counting the frogs"))
        })
        .await;
    let stop = say_in_group(&s, &format!("@{BOT_USERNAME}: stop"));
    let stopped = s
        .fake
        .wait_view(&group, "the stopped reply", |seen, _| {
            seen.iter()
                .any(|m| m.sender == "FrogBot" && m.buttons.is_empty() && m.edited)
                && seen
                    .first()
                    .is_some_and(|m| m.reactions.iter().any(|r| r.0 == "👌"))
        })
        .await;
    // `stop` after the mention is a command: it never reached the model as text.
    assert!(
        !stopped.iter().any(|m| m.text.contains("echo")),
        "{}",
        transcript(&stopped)
    );
    let _ = stop;
    let ask = say_in_group(&s, &format!("@{BOT_USERNAME} ask"));
    after_question_in(&s, &group, ask, |m| !m.buttons.is_empty()).await;
    say_in_group(&s, &format!("@{BOT_USERNAME}, skip"));
    s.fake
        .wait_view(&group, "the question skipped", |seen, _| {
            seen.iter().any(|m| m.text.contains("⏭"))
        })
        .await;
    frogbot_testkit::wait_quiet(
        s.engine.store_for_tests(),
        &channel_chat_id(PLATFORM, &group),
    )
    .await;
    let skipped = s
        .fake
        .wait_view(&group, "the asking message done", |seen, _| {
            seen.iter()
                .find(|m| m.id == ask)
                .is_some_and(|m| m.reactions.iter().any(|r| r.0 == "👌"))
        })
        .await;
    assert!(!skipped.iter().any(|m| m.text.contains("echo")));
    golden("stop_and_skip_after_a_mention", &transcript(&skipped));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_model() {
    let s = setup().await;
    let id = say(&s, "fail");
    let seen = after_turn(&s, id, &["😢"]).await;
    assert!(seen.len() >= 2, "the person is told: {}", transcript(&seen));
    golden("failed_model", &transcript(&seen));
}

/// Ada fixes a typo in a message that waits behind a running turn (`edited_message`; the Bot
/// API reports no deletions): it runs with the new text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_message_edited_runs_with_its_new_text() {
    let s = setup().await;
    let first = say(&s, "wait");
    s.fake
        .wait_view(&ADA.to_string(), "the first turn working", |seen, _| {
            seen.iter()
                .any(|m| m.id == first && m.reactions.iter().any(|r| r.0 == "✍"))
        })
        .await;
    let second = say(&s, "and thsi");
    s.fake
        .wait_view(
            &ADA.to_string(),
            "the queued message acknowledged",
            |seen, _| {
                seen.iter()
                    .any(|m| m.id == second && m.reactions.iter().any(|r| r.0 == "👀"))
            },
        )
        .await;
    s.fake.push(json!({"edited_message": {
        "message_id": second, "date": 1_767_225_600, "edit_date": 1_767_225_660,
        "chat": private_chat(ADA, "Ada"), "from": user(ADA, "Ada"), "text": "and this"}}));
    let chat = channel_chat_id(PLATFORM, &ADA.to_string());
    frogbot_testkit::eventually(
        "the queued message edited",
        Duration::from_secs(20),
        async || {
            s.engine
                .chats()
                .messages(&chat)
                .await
                .unwrap()
                .iter()
                .any(|m| m.message.text().ends_with("and this"))
        },
    )
    .await;
    s.gate.add_permits(1);
    let done = after_turn(&s, second, &["👌"]).await;
    assert!(
        done.iter().any(|m| m.text == "And here is the second one."),
        "{}",
        transcript(&done)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_queued_while_a_turn_runs() {
    let s = setup().await;
    let first = say(&s, "wait");
    s.fake
        .wait_view(&ADA.to_string(), "the first turn working", |seen, _| {
            seen.iter()
                .any(|m| m.id == first && m.reactions.iter().any(|r| r.0 == "✍"))
        })
        .await;
    let second = say(&s, "and this");
    let queued = s
        .fake
        .wait_view(
            &ADA.to_string(),
            "the queued message acknowledged",
            |seen, _| {
                seen.iter().any(|m| m.text == QUEUED_TEXT)
                    && seen
                        .iter()
                        .any(|m| m.id == second && m.reactions.iter().any(|r| r.0 == "👀"))
            },
        )
        .await;
    s.gate.add_permits(1);
    let done = after_turn(&s, second, &["👌"]).await;
    let texts: Vec<&str> = done.iter().map(|m| m.text.as_str()).collect();
    let a = texts
        .iter()
        .position(|t| *t == "Here is the first answer.")
        .unwrap();
    let b = texts
        .iter()
        .position(|t| *t == "And here is the second one.")
        .unwrap();
    assert!(a < b, "{texts:?}");
    golden(
        "queued_message",
        &format!(
            "{}--- after both turns ---\n{}",
            transcript(&queued),
            transcript(&done)
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval() {
    let s = setup().await;
    let id = say(&s, "merge");
    let open = after_question(&s, id).await;
    no_markdown(&open);
    notifies_once(&open);
    press(&s, &open, frogbot_core::model::APPROVE_LABEL);
    let done = s
        .fake
        .wait_view(&ADA.to_string(), "the agent's answer", answered)
        .await;
    let settled: Vec<&SeenMessage> = done
        .iter()
        .filter(|m| m.text.contains("✅ Approved"))
        .collect();
    assert_eq!(settled.len(), 2, "{}", transcript(&done));
    for m in settled {
        assert!(
            !m.text.contains("runs it;") && !m.text.contains("reply to"),
            "{}",
            m.text
        );
    }
    golden(
        "approval",
        &format!(
            "{}--- approved ---\n{}",
            transcript(&open),
            transcript(&done)
        ),
    );
}
