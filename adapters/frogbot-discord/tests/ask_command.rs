//! A person asks another person (`ask`, issue 40) on Discord, end to end: serenity's real gateway
//! client and `Http` against the fake Discord, FrogBot's engine on SQLite. Alice opens a thread
//! with the bot, then asks Bob there — typed (`/ask @bob …`, a `MESSAGE_CREATE` whose `mentions`
//! name Bob) or with the application command `/ask person:@bob question:…` (through the gateway
//! and through the HTTP interactions endpoint). The question's message mentions Bob and pings
//! only him; Carol's click is refused, Bob's answers; an `ask` naming nobody gets the usage text.

use std::time::Duration;

use frogbot_channel::{ASK_USAGE_TEXT, Adapter};
use frogbot_core::agent::scripted::{ScriptedModel, reply};
use frogbot_core::agent::{Engine, ModelMessage, ModelRequest, channel_chat_id};
use frogbot_core::model::{DENIED_TEXT, TurnState, now_millis};
use frogbot_discord::PLATFORM;
use frogbot_discord::channel::{self, Config, DiscordAdapter};
use frogbot_discord::testing::{self as fake, Call, FakeDiscord, SeenMessage, transcript};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;
const GUILD: u64 = 100_000_000_000_000_001;
const CHANNEL: u64 = 700_000_000_000_000_007;
const ALICE: u64 = 300_000_000_000_000_003;
const BOB: u64 = 300_000_000_000_000_004;
const CAROL: u64 = 300_000_000_000_000_005;
const WAIT: Duration = Duration::from_secs(30);

fn alice() -> Value {
    fake::user(ALICE, "alice", false)
}

fn bob() -> Value {
    fake::user(BOB, "bob", false)
}

fn carol() -> Value {
    fake::user(CAROL, "carol", false)
}

/// Replies `hello: <what the person said>`.
fn model() -> ScriptedModel {
    ScriptedModel::new(|req: &ModelRequest| {
        let said = req
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                ModelMessage::User { text } => Some(text.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let text = said.split_once(": ").map_or(said.as_str(), |(_, t)| t);
        reply(&format!("hello: {text}"))
    })
}

struct Bot {
    fake: FakeDiscord,
    engine: Engine,
    adapter: DiscordAdapter,
    next: std::sync::atomic::AtomicU64,
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

/// The bot over the fake (everyone let in; with `public_key`, the interactions endpoint too).
async fn start(public_key: Option<String>) -> Bot {
    let fake = FakeDiscord::start(APP, BOT).await;
    for person in [alice(), bob(), carol()] {
        fake.add_user(&person);
    }
    let adapter = channel::connect(Config {
        public_key,
        ..fake.config()
    })
    .await
    .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let engine = frogbot_testkit::engine_with(store, model()).with_channel(adapter.channel());
    let shutdown = CancellationToken::new();
    let task = adapter
        .start(engine.handle(), shutdown.clone())
        .expect("the gateway task");
    assert!(fake.wait_ready(WAIT).await, "the client identified");
    Bot {
        fake,
        engine,
        adapter,
        next: std::sync::atomic::AtomicU64::new(1),
        shutdown,
        task,
        _db: db,
    }
}

impl Bot {
    fn n(&self) -> u64 {
        self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    }

    /// `author` writes `text` in `channel`, naming `mentions` (user objects, as Discord resolves
    /// the `<@id>` of the text into the message's `mentions`).
    fn say(&self, channel: u64, author: &Value, text: &str, mentions: &[Value]) {
        let mut m = self.fake.user_message(channel, Some(GUILD), author, text);
        m["mentions"] = json!(mentions);
        self.fake.dispatch("MESSAGE_CREATE", m);
    }

    /// Alice mentions the bot in the channel; the thread it opens, once its reply is there.
    async fn thread(&self) -> u64 {
        let from = self.fake.calls().len();
        self.say(
            CHANNEL,
            &alice(),
            &format!("<@{BOT}> hi"),
            &[fake::user(BOT, "frogbot", true)],
        );
        let opened = self
            .fake
            .wait_for(from, WAIT, |c| {
                c.path.ends_with("/threads") && c.status < 300
            })
            .await
            .expect("a thread opened");
        let thread = opened.response["id"].as_str().unwrap().parse().unwrap();
        self.state(thread, TurnState::Idle).await;
        self.posted(from, thread, |t| t == "hello: hi").await;
        thread
    }

    async fn state(&self, thread: u64, want: TurnState) {
        let chat = channel_chat_id(PLATFORM, &thread.to_string());
        frogbot_testkit::eventually(&format!("the chat {want:?}"), WAIT, async || {
            self.engine.chats().state(&chat).await.ok() == Some(want)
        })
        .await;
    }

    /// The bot's first message in `thread` since call `from` whose content `pred` accepts.
    async fn posted(&self, from: usize, thread: u64, pred: impl Fn(&str) -> bool) -> Call {
        let path = format!("/api/v10/channels/{thread}/messages");
        self.fake
            .wait_for(from, WAIT, |c| {
                c.method == "POST"
                    && c.path == path
                    && c.status < 300
                    && pred(c.body["content"].as_str().unwrap_or_default())
            })
            .await
            .unwrap_or_else(|| panic!("a message in {thread}: {:#?}", self.fake.calls()))
    }

    /// The question message posted since call `from` (the one with controls), once the engine
    /// reads clicks on it.
    async fn question(&self, from: usize, thread: u64) -> Value {
        let path = format!("/api/v10/channels/{thread}/messages");
        let posted = self
            .fake
            .wait_for(from, WAIT, |c| {
                c.method == "POST"
                    && c.path == path
                    && c.status < 300
                    && c.body["components"]
                        .as_array()
                        .is_some_and(|r| !r.is_empty())
            })
            .await
            .expect("a question message");
        let id = posted.response["id"].as_str().unwrap().to_owned();
        let handle = self.engine.handle();
        frogbot_testkit::eventually("the question open", WAIT, async || {
            handle
                .form_open(PLATFORM, &id)
                .await
                .ok()
                .flatten()
                .is_some()
        })
        .await;
        self.state(thread, TurnState::Awaiting).await;
        self.fake.message(&id).expect("kept")
    }

    /// `who` clicks the button `label` on `shown`; the interaction's token.
    fn click(&self, shown: &Value, who: &Value, label: &str) -> String {
        let custom_id = shown["components"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
            .find(|c| c["label"] == label)
            .unwrap_or_else(|| panic!("no {label} on {shown:#}"))["custom_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let n = self.n();
        let token = format!("tok-{n}");
        self.fake.dispatch(
            "INTERACTION_CREATE",
            fake::component_on(
                500_000_000_000_000_000 + n,
                APP,
                shown,
                Some(GUILD),
                who,
                &custom_id,
                None,
                &token,
            ),
        );
        token
    }

    /// The `INTERACTION_CREATE` of Alice's `/ask person:<person> question:<question>` in `thread`
    /// (the registered command), and its token.
    fn ask_command(&self, thread: u64, person: &Value, question: &str) -> (Value, String) {
        let id = self
            .fake
            .commands()
            .iter()
            .find(|c| c["name"] == "ask")
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .expect("ask is registered");
        let n = self.n();
        let token = format!("tok-{n}");
        let command = fake::command_interaction(
            500_000_000_000_000_000 + n,
            APP,
            &id,
            thread,
            Some(GUILD),
            &alice(),
            "ask",
            &[("question", question)],
            &token,
        );
        (fake::with_user_option(command, "person", person), token)
    }

    /// The interaction callback of `token` since call `from`.
    async fn callback(&self, from: usize, token: &str) -> Call {
        self.fake
            .wait_for(from, WAIT, |c| {
                c.path.ends_with(&format!("/{token}/callback"))
            })
            .await
            .expect("the interaction was answered")
    }
}

/// The people pinged by the bot's message `id` in a view.
fn pinged<'a>(seen: &'a [SeenMessage], id: &str) -> &'a [String] {
    &seen
        .iter()
        .find(|m| m.id == id)
        .expect("in the view")
        .pinged
}

/// Compares `got` with `tests/golden/ask_command/<case>.txt` (`UPDATE_GOLDEN=1` writes it); the
/// expiry line (a person's ask is open for a day from now) reads `⏳ open until (a day from now)`.
fn golden(case: &str, got: &str) {
    let got: String = got
        .lines()
        .map(|l| match l.find("⏳ open until ") {
            Some(at) => format!("{}⏳ open until (a day from now)\n", &l[..at]),
            None => format!("{l}\n"),
        })
        .collect();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/ask_command")
        .join(format!("{case}.txt"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(got, want, "{} differs", path.display());
}

/// The question Alice asked Bob with choices, as the thread shows it while it waits, then Carol's
/// refused click and Bob's answer: the transcripts (asked, answered).
async fn carol_is_refused_and_bob_answers(bot: &Bot, thread: u64, shown: &Value) -> String {
    let id = shown["id"].as_str().unwrap();
    let asked = transcript(&bot.fake.person_view(&thread.to_string()));
    // Open for a day.
    let tomorrow = chrono::Utc::now() + chrono::Duration::days(1);
    assert!(
        asked.contains(&format!("⏳ open until {}", tomorrow.format("%-d %b"))),
        "{asked}"
    );
    // Only Bob is pinged, by the question's message; it says who asks what.
    let content = shown["content"].as_str().unwrap();
    assert!(
        content.starts_with(&format!("<@{BOB}> ")),
        "the question mentions Bob first: {content}"
    );
    assert!(content.contains("alice asks bob: Ship today?"), "{content}");
    assert_eq!(
        shown["allowed_mentions"],
        json!({"parse": [], "users": [BOB.to_string()], "roles": []}),
        "Bob and nobody else may be pinged"
    );
    let seen = bot.fake.person_view(&thread.to_string());
    assert_eq!(pinged(&seen, id), ["bob"]);
    assert!(seen.iter().find(|m| m.id == id).unwrap().notified);
    // No other message of the bot pinged anybody.
    assert!(
        seen.iter()
            .filter(|m| m.sender == "frogbot" && m.id != id)
            .all(|m| m.pinged.is_empty()),
        "{seen:#?}"
    );

    // Carol's click: refused, privately; the question still waits.
    let from = bot.fake.calls().len();
    let token = bot.click(shown, &carol(), "yes");
    bot.fake
        .wait_for(from, WAIT, |c| {
            c.path.ends_with(&format!("/{token}")) && c.body["content"] == DENIED_TEXT
        })
        .await
        .expect("Carol told she can't answer");
    assert!(
        bot.fake
            .notices(&CAROL.to_string())
            .iter()
            .any(|t| t == DENIED_TEXT)
    );
    bot.state(thread, TurnState::Awaiting).await;
    assert!(
        bot.fake.message(id).unwrap()["edited_timestamp"].is_null(),
        "the question unchanged"
    );

    // Bob's click answers it: it reads answered, by Bob, and the thread is free again.
    bot.click(shown, &bob(), "yes");
    bot.state(thread, TurnState::Idle).await;
    frogbot_testkit::eventually("the question settled", WAIT, async || {
        bot.fake.message(id).is_some_and(|m| {
            m["components"].as_array().is_some_and(Vec::is_empty)
                && m["content"].as_str().unwrap_or_default().contains("bob")
        })
    })
    .await;
    // The ask's ⏳ turns ✅ once the continued turn's end is shown, just after the chat is idle;
    // ✅ is added before ⏳ comes off (never no mark at all): wait for the swap to finish.
    frogbot_testkit::eventually("the ask marked done", WAIT, async || {
        let shown = transcript(&bot.fake.person_view(&thread.to_string()));
        !shown
            .lines()
            .any(|l| l.trim_start().starts_with("reactions:") && l.contains('⏳'))
    })
    .await;
    let settled = bot.fake.message(id).unwrap();
    let text = settled["content"].as_str().unwrap();
    assert!(
        text.contains(&format!("✅ Answered by <@{BOB}>: yes")),
        "{text}"
    );
    let seen = bot.fake.person_view(&thread.to_string());
    let q = seen.iter().find(|m| m.id == id).unwrap();
    assert!(q.edited && q.controls.is_empty(), "{q:#?}");
    assert_eq!(q.pinged, ["bob"], "an edit pings nobody new");
    format!(
        "--- asked ---\n{asked}--- answered ---\n{}",
        transcript(&seen)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_ask_mentions_the_person_asked_and_only_they_answer() {
    let bot = start(None).await;
    let thread = bot.thread().await;
    let from = bot.fake.calls().len();
    bot.say(
        thread,
        &alice(),
        &format!("/ask <@{BOB}> Ship today? | yes | no"),
        &[bob()],
    );
    let shown = bot.question(from, thread).await;
    let text = carol_is_refused_and_bob_answers(&bot, thread, &shown).await;
    golden("typed", &text);
    // The thread goes on with the model afterwards.
    let from = bot.fake.calls().len();
    bot.say(thread, &alice(), "thanks", &[]);
    bot.posted(from, thread, |t| t == "hello: thanks").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ask_application_command_asks_the_person_picked() {
    let bot = start(None).await;
    frogbot_testkit::eventually("the commands registered", WAIT, async || {
        bot.fake.commands().iter().any(|c| c["name"] == "ask")
    })
    .await;
    let ask = bot
        .fake
        .commands()
        .into_iter()
        .find(|c| c["name"] == "ask")
        .unwrap();
    assert_eq!(
        ask["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o["name"].clone(), o["type"].clone(), o["required"].clone()))
            .collect::<Vec<_>>(),
        [
            (json!("person"), json!(6), json!(true)),
            (json!("question"), json!(3), json!(true))
        ]
    );

    let thread = bot.thread().await;
    let from = bot.fake.calls().len();
    let (command, token) = bot.ask_command(thread, &bob(), " Ship today? | yes | no ");
    bot.fake.dispatch("INTERACTION_CREATE", command);
    // Answered privately with the command as the engine reads it (nobody pinged by it).
    let answered = bot.callback(from, &token).await;
    assert_eq!(answered.body["type"], 4);
    assert_eq!(answered.body["data"]["flags"], 64, "ephemeral");
    assert_eq!(
        answered.body["data"]["content"],
        format!("/ask <@{BOB}> Ship today? | yes | no")
    );
    assert_eq!(
        answered.body["data"]["allowed_mentions"]["users"],
        json!([])
    );
    let shown = bot.question(from, thread).await;
    let text = carol_is_refused_and_bob_answers(&bot, thread, &shown).await;
    golden("command", &text);

    // `/ask` picking the bot itself names nobody: the usage text.
    let from = bot.fake.calls().len();
    let (command, _) = bot.ask_command(thread, &fake::user(BOT, "frogbot", true), "Ready?");
    bot.fake.dispatch("INTERACTION_CREATE", command);
    bot.posted(from, thread, |t| t == ASK_USAGE_TEXT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ask_command_through_the_interactions_endpoint() {
    use ed25519_dalek::Signer;
    use tower::ServiceExt;
    let key = ed25519_dalek::SigningKey::from_bytes(&[5; 32]);
    let public: String = key
        .verifying_key()
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let bot = start(Some(public)).await;
    frogbot_testkit::eventually("the commands registered", WAIT, async || {
        bot.fake.commands().iter().any(|c| c["name"] == "ask")
    })
    .await;
    let router = bot.adapter.routes(&bot.engine.handle()).unwrap();
    let thread = bot.thread().await;
    let (command, _) = bot.ask_command(thread, &bob(), "Ship today? | yes | no");
    bot.fake.register_interaction(&command, true);
    let body = command.to_string();
    let ts = (now_millis() / 1000).to_string();
    let signature: String = key
        .sign(format!("{ts}{body}").as_bytes())
        .to_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let request = axum::http::Request::post("/channels/discord/interactions")
        .header("content-type", "application/json")
        .header("x-signature-ed25519", signature)
        .header("x-signature-timestamp", ts)
        .body(axum::body::Body::from(body))
        .unwrap();
    let from = bot.fake.calls().len();
    let response = router.oneshot(request).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let response: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(response["type"], 4);
    assert_eq!(response["data"]["flags"], 64);
    assert_eq!(
        response["data"]["content"],
        format!("/ask <@{BOB}> Ship today? | yes | no")
    );
    let shown = bot.question(from, thread).await;
    carol_is_refused_and_bob_answers(&bot, thread, &shown).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_naming_nobody_gets_the_usage_text() {
    let bot = start(None).await;
    let thread = bot.thread().await;
    // Nobody named; Bob named but not first (the question would be about him); Bob written but
    // not a mention Discord resolved (no user object in `mentions`).
    for (text, mentions) in [
        ("/ask Ship today? | yes | no".to_owned(), vec![]),
        (format!("!ask is <@{BOB}> in?"), vec![bob()]),
        (format!("/ask <@{BOB}> Ship today?"), vec![]),
    ] {
        let from = bot.fake.calls().len();
        bot.say(thread, &alice(), &text, &mentions);
        let told = bot.posted(from, thread, |t| t == ASK_USAGE_TEXT).await;
        assert_eq!(
            told.body["allowed_mentions"],
            json!({"parse": [], "users": [], "roles": []}),
            "{text}: nobody pinged"
        );
        bot.state(thread, TurnState::Idle).await;
    }
    let seen = bot.fake.person_view(&thread.to_string());
    assert!(
        seen.iter().all(|m| m.controls.is_empty()),
        "nothing asked: {seen:#?}"
    );
    assert!(
        bot.fake.notices(&BOB.to_string()).is_empty(),
        "Bob never notified"
    );
}
