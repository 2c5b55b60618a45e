//! What a person sees in a Discord thread (issue 38), golden: serenity's real gateway client and
//! `Http` against the fake Discord, FrogBot's engine on SQLite with a scripted model; Alice
//! mentions the bot in a channel, the bot opens a thread on her message and everything happens
//! there. Each case compares `testing::transcript` of `FakeDiscord::person_view` with
//! `tests/golden/person_view/<case>.txt` (`UPDATE_GOLDEN=1` rewrites them) and asserts the
//! properties that matter in code too.

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
use frogbot_core::model::{TurnState, now_millis};
use frogbot_discord::PLATFORM;
use frogbot_discord::channel::{self, Config, DiscordAdapter};
use frogbot_discord::testing::{self as fake, FakeDiscord, SeenMessage, transcript};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;
const GUILD: u64 = 100_000_000_000_000_001;
const CHANNEL: u64 = 700_000_000_000_000_007;
const ALICE: u64 = 300_000_000_000_000_003;
const WAIT: Duration = Duration::from_secs(30);
/// The stream interval of these tests.
const INTERVAL_MS: u64 = 100;

/// The 40,000-character reply: sentences, a paragraph break every eight.
fn long_reply() -> String {
    let mut out = String::new();
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

/// What the person typed (the model sees `alice: …`).
fn last_user(req: &ModelRequest) -> String {
    let said = req
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            ModelMessage::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default();
    said.split_once(": ")
        .map_or(said.clone(), |(_, t)| t.to_owned())
}

/// The question each `ask …` prompt asks.
fn question(what: &str) -> Value {
    let thirty: Vec<Value> = (1..=30)
        .map(|i| json!({"label": format!("region-{i}")}))
        .collect();
    match what {
        "choice" => json!({"questions": [{"header": "Env", "question": "Release **v1.4** where?",
            "options": [{"label": "staging", "description": "the test cluster"}, {"label": "prod"}]}]}),
        "confirm" => {
            json!({"questions": [{"header": "Go", "question": "Deploy build 42?", "kind": "confirm", "label": "Deploy"}]})
        }
        "review" => json!({"questions": [{"header": "Go", "question": "Scale the API?",
        "kind": "confirm", "label": "Approve"}],
        "blocks": [
            {"type": "code", "language": "diff", "code": "- replicas: 3\n+ replicas: 4"},
            {"type": "table", "columns": ["service", "pods"], "rows": [["api", 3]]}
        ]}),
        "toggle" => {
            json!({"questions": [{"header": "Notify", "question": "Tell the team?", "kind": "toggle", "label": "Notify the team"}]})
        }
        "number" => {
            json!({"questions": [{"header": "Pods", "question": "How many pods?", "kind": "number_input", "min": 1, "max": 9, "unit": "pods"}]})
        }
        "text" => {
            json!({"questions": [{"header": "Why", "question": "What is the reason?", "kind": "text_input"}]})
        }
        "thirty" => {
            json!({"questions": [{"header": "Region", "question": "Which region?", "options": thirty}]})
        }
        "multiple" => json!({"questions": [{"header": "Regions", "question": "Which regions?",
            "multiple": true, "options": [{"label": "eu"}, {"label": "us"}, {"label": "asia"}]}]}),
        "four" => json!({"questions": [
            {"header": "A", "question": "Which flavour?", "options": [{"label": "x"}, {"label": "y"}]},
            {"header": "B", "question": "Verbose logs?", "kind": "toggle"},
            {"header": "C", "question": "How many?", "kind": "number_input", "min": 1, "max": 5},
            {"header": "D", "question": "Go ahead?", "kind": "confirm"}
        ]}),
        other => panic!("no question {other}"),
    }
}

/// `long`: the long reply in 400-character deltas; `ask K`: the question K; `fail`: a model
/// error; `slow`: a first sentence, then waits for `gate`; `merge`: a call of `merge` (needs
/// approval); after a tool result: `got: <result>`; anything else: `hello: <text>`.
fn model(gate: Arc<Semaphore>) -> ScriptedModel {
    ScriptedModel::new(move |req: &ModelRequest| {
        if let Some(ModelMessage::Tool { content, .. }) = req.messages.last() {
            return reply(&format!("got: {content}"));
        }
        let text = last_user(req);
        if text == "long" {
            let mut e = Vec::new();
            let full: Vec<char> = long_reply().chars().collect();
            for chunk in full.chunks(400) {
                e.push(ScriptEvent::Event(ModelEvent::TextDelta(
                    chunk.iter().collect(),
                )));
                e.push(ScriptEvent::Pause(Duration::from_millis(5)));
            }
            e.extend(reply(""));
            return e;
        }
        if let Some(what) = text.strip_prefix("ask ") {
            return call("q1", "question", question(what));
        }
        if text == "fail" {
            return vec![ScriptEvent::Fail("the model is down".into())];
        }
        if text == "slow" {
            let mut e = vec![ScriptEvent::Event(ModelEvent::TextDelta(
                "I am writing a long answer, one sentence at a time.\n\n".into(),
            ))];
            e.push(ScriptEvent::Gate(gate.clone()));
            e.extend(reply("And here is the rest."));
            return e;
        }
        if text == "merge" {
            return call("m1", "merge", json!({"pr": 7}));
        }
        reply(&format!("hello: {text}"))
    })
}

struct Bot {
    fake: FakeDiscord,
    engine: Engine,
    gate: Arc<Semaphore>,
    runs: Arc<AtomicUsize>,
    next: AtomicUsize,
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
    fake.add_user(&alice());
    let adapter = channel::connect(Config {
        users: [(ALICE.to_string(), "alice".to_string())].into(),
        ..fake.config()
    })
    .await
    .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let merge = tool_fn(
        "merge",
        "Merges a pull request",
        move |input: Value, _ctx| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok::<_, BoxError>(json!({"merged": input["pr"]}))
            }
        },
    );
    let policy = ApprovalPolicy {
        approvers: vec![format!("discord:{ALICE}")],
        expires_in_seconds: None,
    };
    let gate = Arc::new(Semaphore::new(0));
    let engine = Engine::new(
        store,
        vec![frogbot_testkit::offer("main", model(gate.clone()))],
        vec![with_approval(merge, policy)],
        EngineConfig::default(),
    )
    .with_channel(adapter.channel())
    .with_channel_settings(
        PLATFORM,
        ChannelSettings {
            stream_interval: Duration::from_millis(INTERVAL_MS),
            ..Default::default()
        },
    )
    .unwrap();
    let shutdown = CancellationToken::new();
    let task = adapter
        .start(engine.handle(), shutdown.clone())
        .expect("the gateway task");
    assert!(fake.wait_ready(WAIT).await, "the client identified");
    Bot {
        fake,
        engine,
        gate,
        runs,
        next: AtomicUsize::new(1),
        _adapter: adapter,
        shutdown,
        task,
        _db: db,
    }
}

fn alice() -> Value {
    fake::user(ALICE, "alice", false)
}

impl Bot {
    /// Alice mentions the bot in the channel with `text` (`<@bot> text`); the thread the bot
    /// opens on her message.
    async fn mention(&self, text: &str) -> u64 {
        let from = self.fake.calls().len();
        let mut m =
            self.fake
                .user_message(CHANNEL, Some(GUILD), &alice(), &format!("<@{BOT}> {text}"));
        m["mentions"] = json!([fake::user(BOT, "frogbot", true)]);
        self.fake.dispatch("MESSAGE_CREATE", m);
        let opened = self
            .fake
            .wait_for(from, WAIT, |c| {
                c.path.ends_with("/threads") && c.status < 300
            })
            .await
            .expect("a thread opened");
        opened.response["id"].as_str().unwrap().parse().unwrap()
    }

    /// Alice writes `text` in `thread`; its id.
    fn say(&self, thread: u64, text: &str) -> String {
        let m = self.fake.user_message(thread, Some(GUILD), &alice(), text);
        let id = m["id"].as_str().unwrap().to_owned();
        self.fake.dispatch("MESSAGE_CREATE", m);
        id
    }

    async fn state(&self, thread: u64, want: TurnState) {
        let chat = channel_chat_id(PLATFORM, &thread.to_string());
        frogbot_testkit::eventually(&format!("the chat {want:?}"), WAIT, async || {
            self.engine.chats().state(&chat).await.ok() == Some(want)
        })
        .await;
    }

    /// Waits until the `slow` reply's first message shows its first sentence (the turn runs,
    /// held at its gate).
    async fn first_sentence(&self, thread: u64) {
        self.state(thread, TurnState::Running).await;
        frogbot_testkit::eventually("the first sentence shown", WAIT, async || {
            self.fake.channel_messages(thread).iter().any(|m| {
                m["content"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("one sentence")
            })
        })
        .await;
    }

    /// Waits until `thread` is idle and no message shows a Stop button any more (the reply
    /// finished: an ✅ on the person's message may come before its last edit).
    async fn finished(&self, thread: u64) {
        self.state(thread, TurnState::Idle).await;
        frogbot_testkit::eventually("no Stop button left", WAIT, async || {
            self.fake
                .channel_messages(thread)
                .iter()
                .all(|m| !m["components"].to_string().contains("frogbot-stop"))
        })
        .await;
    }

    /// Waits until the message `id` shows the bot's reactions `want`.
    async fn reactions(&self, id: &str, want: &[&str]) {
        frogbot_testkit::eventually(&format!("{want:?} on {id}"), WAIT, async || {
            self.fake.own_reactions(id) == want
        })
        .await;
    }

    /// Waits until the question `call` of `thread` is recorded with `message` (its id) as its
    /// current message: a click on it is read from then on.
    async fn recorded(&self, thread: u64, call: &str, message: &Value) {
        let chat = channel_chat_id(PLATFORM, &thread.to_string());
        let id = message["id"].as_str().unwrap().to_owned();
        frogbot_testkit::eventually("the question recorded", WAIT, async || {
            let q = self
                .engine
                .store_for_tests()
                .get_question(&chat, call, now_millis())
                .await
                .unwrap();
            q.is_some_and(|q| q.rendered && q.record.current().is_some_and(|m| m.id == id))
        })
        .await;
    }

    /// The bot's latest message in `thread` with controls.
    async fn question(&self, thread: u64) -> Value {
        let mut found = None;
        frogbot_testkit::eventually("a message with controls", WAIT, async || {
            found = self
                .fake
                .channel_messages(thread)
                .into_iter()
                .rev()
                .find(|m| m["components"].as_array().is_some_and(|c| !c.is_empty()));
            found.is_some()
        })
        .await;
        found.unwrap()
    }

    fn token(&self) -> (u64, String) {
        let n = self.next.fetch_add(1, Ordering::SeqCst) as u64;
        (500_000_000_000_000_000 + n, format!("tok-{n}"))
    }

    /// Alice clicks the button `label` on `shown`; the token of the interaction.
    fn click(&self, shown: &Value, label: &str) -> String {
        let custom_id = controls(shown)
            .into_iter()
            .find(|(l, _)| l == label)
            .unwrap_or_else(|| panic!("no {label} on {shown:#}"))
            .1;
        let (id, token) = self.token();
        self.fake.dispatch(
            "INTERACTION_CREATE",
            fake::component_on(
                id,
                APP,
                shown,
                Some(GUILD),
                &alice(),
                &custom_id,
                None,
                &token,
            ),
        );
        token
    }

    /// Alice picks `labels` in the select of `shown`.
    fn pick(&self, shown: &Value, labels: &[&str]) {
        let select = shown["components"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["components"].as_array().unwrap().iter())
            .find(|c| c["type"] == 3)
            .expect("a select");
        let values: Vec<&str> = labels
            .iter()
            .map(|l| {
                select["options"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|o| o["label"] == *l)
                    .and_then(|o| o["value"].as_str())
                    .unwrap_or_else(|| panic!("no option {l}"))
            })
            .collect();
        let (id, token) = self.token();
        self.fake.dispatch(
            "INTERACTION_CREATE",
            fake::component_on(
                id,
                APP,
                shown,
                Some(GUILD),
                &alice(),
                select["custom_id"].as_str().unwrap(),
                Some(&values),
                &token,
            ),
        );
    }

    /// Alice clicks "Answer…" on `shown` and submits the modal it opens with `texts`, one per
    /// input in order.
    async fn answer_in_form(&self, thread: u64, shown: &Value, texts: &[&str]) {
        let from = self.fake.calls().len();
        let token = self.click(shown, "Answer…");
        let opened = self
            .fake
            .wait_for(from, WAIT, |c| {
                c.path.contains(&format!("/{token}/callback")) && c.body["type"] == 9
            })
            .await
            .expect("a modal opened");
        let data = &opened.body["data"];
        let inputs: Vec<String> = data["components"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                let input = if row["type"] == 18 {
                    &row["component"]
                } else {
                    &row["components"][0]
                };
                input["custom_id"].as_str().unwrap().to_owned()
            })
            .collect();
        let values: Vec<(&str, &str)> = inputs
            .iter()
            .map(String::as_str)
            .zip(texts.iter().copied())
            .collect();
        let (id, token) = self.token();
        let submit = if data["components"][0]["type"] == 18 {
            fake::modal_submit_in_labels(
                id,
                APP,
                thread,
                &alice(),
                data["custom_id"].as_str().unwrap(),
                &values,
                &[],
                &token,
            )
        } else {
            fake::modal_submit_interaction(
                id,
                APP,
                thread,
                &alice(),
                data["custom_id"].as_str().unwrap(),
                &values,
                &token,
            )
        };
        self.fake.dispatch("INTERACTION_CREATE", submit);
    }

    /// What Alice sees of `thread`. Whether a streamed reply shows "(edited)" depends on timing
    /// (posted with its Stop button, then finished by an edit; or posted whole): for the goldens
    /// the model's replies (`hello: `, `got: `, the failure notice) are read as not edited.
    fn view(&self, thread: u64) -> Vec<SeenMessage> {
        let mut seen = self.fake.person_view(&thread.to_string());
        for m in &mut seen {
            let reply = ["hello: ", "got: ", "⚠️"]
                .iter()
                .any(|p| m.text.starts_with(p));
            if m.sender == "frogbot" && reply && m.controls.is_empty() {
                m.edited = false;
            }
        }
        seen
    }
}

/// The buttons of a message: (label, custom id).
fn controls(shown: &Value) -> Vec<(String, String)> {
    shown["components"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["type"] == 2)
        .map(|b| {
            (
                b["label"].as_str().unwrap_or_default().to_owned(),
                b["custom_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Compares `got` with `tests/golden/person_view/<case>.txt` (`UPDATE_GOLDEN=1` writes it),
/// showing the lines that differ.
fn golden(case: &str, got: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/person_view")
        .join(format!("{case}.txt"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} (UPDATE_GOLDEN=1 writes it)", path.display()));
    if got != want {
        let (g, w): (Vec<&str>, Vec<&str>) = (got.lines().collect(), want.lines().collect());
        let mut diff = String::new();
        for i in 0..g.len().max(w.len()) {
            let (a, b) = (w.get(i).copied(), g.get(i).copied());
            if a != b {
                diff.push_str(&format!(
                    "line {}:\n- {}\n+ {}\n",
                    i + 1,
                    a.unwrap_or("<none>"),
                    b.unwrap_or("<none>")
                ));
            }
        }
        panic!(
            "{case}: the person's view differs from {} (UPDATE_GOLDEN=1 rewrites it):\n{diff}\n--- got ---\n{got}",
            path.display()
        );
    }
}

/// No message a person sees is longer than Discord's 2,000 characters, none shows Markdown in a
/// control, none shows a raw user id.
fn looks_right(seen: &[SeenMessage]) {
    for m in seen {
        assert!(m.text.chars().count() <= 2000, "{m:#?}");
        for line in &m.controls {
            assert!(!line.contains("**") && !line.contains('`'), "{line}");
        }
        assert!(!m.text.contains("<@"), "an id instead of a name: {m:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_reply() {
    let bot = start().await;
    let thread = bot.mention("hi there").await;
    bot.reactions(&thread.to_string(), &["✅"]).await;
    bot.finished(thread).await;
    let seen = bot.view(thread);
    looks_right(&seen);
    assert_eq!(seen.len(), 2, "{seen:#?}");
    assert!(seen[1].notified && seen[1].text == "hello: hi there");
    golden("short_reply", &transcript(&seen));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forty_thousand_character_streamed_reply() {
    let bot = start().await;
    let thread = bot.mention("long").await;
    bot.reactions(&thread.to_string(), &["✅"]).await;
    bot.finished(thread).await;
    let seen = bot.view(thread);
    looks_right(&seen);
    let replies = &seen[1..];
    // Each message is read on its own: a split at a space keeps no space at either end.
    let whole = replies
        .iter()
        .map(|m| m.text.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let (got, want) = (squash(&whole), squash(&long_reply()));
    if got != want {
        let at = got
            .chars()
            .zip(want.chars())
            .take_while(|(a, b)| a == b)
            .count();
        let near = |s: &str| {
            s.chars()
                .skip(at.saturating_sub(80))
                .take(200)
                .collect::<String>()
        };
        panic!(
            "the whole text differs at {at} ({} vs {} chars):\n got: {}\nwant: {}",
            got.chars().count(),
            want.chars().count(),
            near(&got),
            near(&want)
        );
    }
    assert!(
        replies.iter().all(|m| m.controls.is_empty()),
        "no Stop left"
    );
    assert!(replies[0].notified, "the first message notifies");
    assert!(
        replies[1..].iter().all(|m| !m.notified),
        "one reply, one notification: {replies:#?}"
    );
    let mut summary = format!(
        "{} messages after the person's; the whole text in order: yes\n",
        replies.len()
    );
    for (i, m) in replies.iter().enumerate() {
        let first = m.text.lines().next().unwrap_or_default();
        // (Which messages were edited while streaming depends on timing: not in the golden.)
        summary.push_str(&format!(
            "[{}] {} ({}) ≤ 2000 characters: {}, starts: {}\n",
            i + 2,
            m.sender,
            if m.notified { "notified" } else { "silent" },
            m.text.chars().count() <= 2000,
            first.chars().take(40).collect::<String>()
        ));
    }
    golden(
        "long_reply",
        &format!("{}{summary}", transcript(&seen[..1])),
    );
}

/// Asks `what`, answers it with `answer`, waits for the reply after it; the transcript.
async fn asked_and_answered(
    what: &str,
    answer: impl AsyncFnOnce(&Bot, u64, Value),
) -> (Vec<SeenMessage>, String) {
    let bot = start().await;
    let thread = bot.mention(&format!("ask {what}")).await;
    bot.state(thread, TurnState::Awaiting).await;
    let shown = bot.question(thread).await;
    bot.recorded(thread, "q1", &shown).await;
    let asked = transcript(&bot.view(thread));
    answer(&bot, thread, shown).await;
    bot.finished(thread).await;
    bot.reactions(&thread.to_string(), &["✅"]).await;
    let seen = bot.view(thread);
    looks_right(&seen);
    let text = format!(
        "--- asked ---\n{asked}--- answered ---\n{}",
        transcript(&seen)
    );
    (seen, text)
}

/// The settled question of a view: the edited message that had controls.
fn settled(seen: &[SeenMessage]) -> &SeenMessage {
    seen.iter()
        .find(|m| m.sender == "frogbot" && m.edited && m.only_for.is_none())
        .unwrap_or_else(|| panic!("a settled question: {seen:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_choice_answered_by_a_click() {
    let (seen, text) = asked_and_answered("choice", async |bot, _, shown| {
        bot.click(&shown, "staging");
    })
    .await;
    let q = settled(&seen);
    assert!(
        q.controls.is_empty() && q.text.contains("staging"),
        "{q:#?}"
    );
    golden("choice", &text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_answered_by_a_click() {
    let (_, text) = asked_and_answered("confirm", async |bot, _, shown| {
        bot.click(&shown, "Deploy");
    })
    .await;
    golden("confirm", &text);
}

/// A question with what it is about (issue 40): the diff and the table come first, silently (a
/// suppressed notification), then the question, which is what notifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_beside_a_diff() {
    let (seen, text) = asked_and_answered("review", async |bot, _, shown| {
        bot.click(&shown, "Approve");
    })
    .await;
    let diff = seen
        .iter()
        .position(|m| m.sender == "frogbot" && format!("{m:?}").contains("+ replicas: 4"))
        .unwrap_or_else(|| panic!("no diff: {seen:#?}"));
    let card = seen
        .iter()
        .position(|m| m.sender == "frogbot" && m.edited && m.only_for.is_none())
        .expect("the question");
    assert!(diff < card, "the diff before the question: {seen:#?}");
    assert!(!seen[diff].notified, "the blocks are silent: {seen:#?}");
    assert!(seen[card].notified, "the question notifies");
    golden("confirm_with_blocks", &text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toggle_answered_off() {
    let (seen, text) = asked_and_answered("toggle", async |bot, _, shown| {
        bot.click(&shown, "✗ Off");
    })
    .await;
    let q = settled(&seen);
    assert!(!q.text.contains("✅ Answered: ✗ Off"), "{q:#?}");
    golden("toggle", &text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_number_answered_in_a_form() {
    let (seen, text) = asked_and_answered("number", async |bot, thread, shown| {
        bot.answer_in_form(thread, &shown, &["3"]).await;
    })
    .await;
    assert!(seen.iter().any(|m| m.modal), "the form shows: {seen:#?}");
    golden("number_input", &text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_answered_in_a_form() {
    let (_, text) = asked_and_answered("text", async |bot, thread, shown| {
        bot.answer_in_form(thread, &shown, &["the tests are red"])
            .await;
    })
    .await;
    golden("text_input", &text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thirty_option_question_answered_by_number() {
    let (seen, text) = asked_and_answered("thirty", async |bot, thread, _| {
        bot.say(thread, "17");
    })
    .await;
    let q = settled(&seen);
    assert!(q.text.contains("region-17"), "{q:#?}");
    golden("thirty_options", &text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multiple_choice_answered_by_clicks() {
    let (seen, text) = asked_and_answered("multiple", async |bot, _, shown| {
        bot.pick(&shown, &["eu", "asia"]);
    })
    .await;
    let q = settled(&seen);
    assert!(q.text.contains("eu, asia"), "{q:#?}");
    golden("multiple_choice", &text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_four_question_set_answered_step_by_step() {
    let (_, text) = asked_and_answered("four", async |bot, thread, shown| {
        bot.click(&shown, "y");
        let next = async |before: &Value| {
            let mut found = None;
            frogbot_testkit::eventually("the next step", WAIT, async || {
                found = Some(bot.question(thread).await).filter(|m| m["id"] != before["id"]);
                found.is_some()
            })
            .await;
            let found = found.unwrap();
            bot.recorded(thread, "q1", &found).await;
            found
        };
        let second = next(&shown).await;
        bot.click(&second, "✓ On");
        let third = next(&second).await;
        bot.answer_in_form(thread, &third, &["4"]).await;
        let fourth = next(&third).await;
        let label = controls(&fourth)[0].0.clone();
        bot.click(&fourth, &label);
    })
    .await;
    golden("four_questions", &text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_after_a_mention() {
    let bot = start().await;
    let thread = bot.mention("slow").await;
    bot.first_sentence(thread).await;
    bot.say(thread, &format!("<@{BOT}>: stop"));
    bot.finished(thread).await;
    bot.reactions(&thread.to_string(), &["✅"]).await;
    let seen = bot.view(thread);
    looks_right(&seen);
    assert!(
        !seen.iter().any(|m| m.text.contains("the rest")),
        "{seen:#?}"
    );
    golden("stop_after_mention", &transcript(&seen));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_after_a_mention() {
    let bot = start().await;
    let thread = bot.mention("ask choice").await;
    bot.state(thread, TurnState::Awaiting).await;
    let shown = bot.question(thread).await;
    bot.recorded(thread, "q1", &shown).await;
    let said = bot.say(thread, &format!("<@{BOT}>, skip"));
    bot.finished(thread).await;
    bot.reactions(&thread.to_string(), &["✅"]).await;
    let seen = bot.view(thread);
    looks_right(&seen);
    let q = settled(&seen);
    assert!(q.text.contains("Skipped"), "{q:#?}");
    assert!(
        seen.iter().all(|m| !m.text.contains("hello: skip")),
        "the skip reached the model: {seen:#?}"
    );
    assert_eq!(
        bot.fake.own_reactions(&said),
        Vec::<String>::new(),
        "the skip is no prompt"
    );
    golden("skip_after_mention", &transcript(&seen));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_model() {
    let bot = start().await;
    let thread = bot.mention("fail").await;
    bot.reactions(&thread.to_string(), &["❌"]).await;
    bot.finished(thread).await;
    let seen = bot.view(thread);
    looks_right(&seen);
    // The person is told, in words, and not the model's internal error.
    assert!(
        seen.last().unwrap().text.contains("Something went wrong"),
        "{seen:#?}"
    );
    assert!(
        !seen.iter().any(|m| m.text.contains("the model is down")),
        "{seen:#?}"
    );
    golden("failed_model", &transcript(&seen));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_queued_while_a_turn_runs() {
    let bot = start().await;
    let thread = bot.mention("slow").await;
    // (The reply's first message is posted once it reads as a start: its first sentence.)
    bot.first_sentence(thread).await;
    let queued = bot.say(thread, "and one more thing");
    bot.reactions(&queued, &["👀"]).await;
    let while_queued = transcript(&bot.view(thread));
    bot.gate.add_permits(1);
    bot.reactions(&queued, &["✅"]).await;
    bot.finished(thread).await;
    let seen = bot.view(thread);
    looks_right(&seen);
    golden(
        "queued_message",
        &format!(
            "--- while queued ---\n{while_queued}--- answered ---\n{}",
            transcript(&seen)
        ),
    );
}

/// Alice fixes a typo in a message that waits behind a running turn, and deletes another
/// (`MESSAGE_UPDATE` / `MESSAGE_DELETE`): the first runs with the new text, the other never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_message_edited_or_deleted_runs_new_or_not_at_all() {
    let bot = start().await;
    let thread = bot.mention("slow").await;
    bot.first_sentence(thread).await;
    let typo = bot.say(thread, "and one mroe thing");
    bot.reactions(&typo, &["👀"]).await;
    let gone = bot.say(thread, "never mind");
    bot.reactions(&gone, &["👀"]).await;
    bot.fake.dispatch(
        "MESSAGE_UPDATE",
        json!({"id": typo, "channel_id": thread.to_string(), "guild_id": GUILD.to_string(),
               "author": alice(), "content": "and one more thing",
               "edited_timestamp": "2026-12-05T14:00:00.000000+00:00"}),
    );
    bot.fake.dispatch(
        "MESSAGE_DELETE",
        json!({"id": gone, "channel_id": thread.to_string(), "guild_id": GUILD.to_string()}),
    );
    let chat = channel_chat_id(PLATFORM, &thread.to_string());
    frogbot_testkit::eventually("the queue edited", WAIT, async || {
        let texts: Vec<String> = bot
            .engine
            .chats()
            .messages(&chat)
            .await
            .unwrap()
            .iter()
            .map(|m| m.message.text())
            .collect();
        texts.iter().any(|t| t.ends_with("and one more thing"))
            && !texts.iter().any(|t| t.ends_with("never mind"))
    })
    .await;
    bot.gate.add_permits(1);
    bot.reactions(&typo, &["✅"]).await;
    bot.finished(thread).await;
    let said: Vec<String> = bot
        .fake
        .channel_messages(thread)
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect();
    assert!(
        said.iter().any(|t| t == "hello: and one more thing"),
        "{said:?}"
    );
    assert!(
        !said
            .iter()
            .any(|t| t.contains("mroe") && t.starts_with("hello") || t == "hello: never mind"),
        "{said:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_approved() {
    let bot = start().await;
    let thread = bot.mention("merge").await;
    bot.state(thread, TurnState::Awaiting).await;
    let card = bot.question(thread).await;
    bot.recorded(thread, "m1", &card).await;
    let asked = transcript(&bot.view(thread));
    bot.click(&card, frogbot_core::model::APPROVE_LABEL);
    bot.finished(thread).await;
    bot.reactions(&thread.to_string(), &["✅"]).await;
    assert_eq!(bot.runs.load(Ordering::SeqCst), 1);
    let seen = bot.view(thread);
    looks_right(&seen);
    golden(
        "approval",
        &format!(
            "--- asked ---\n{asked}--- approved ---\n{}",
            transcript(&seen)
        ),
    );
}
