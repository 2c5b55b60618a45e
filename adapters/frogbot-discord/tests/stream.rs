//! Streamed replies, the Stop button and thread context on Discord, end to end: serenity's real
//! gateway client and `Http` against the fake Discord, FrogBot's engine on SQLite, a scripted
//! model.

use std::time::Duration;

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, reply};
use frogbot_core::agent::{
    ChannelSettings, Engine, ModelEvent, ModelMessage, ModelRequest, STOP_REFUSED_TEXT,
    STOPPED_TEXT, channel_chat_id,
};
use frogbot_core::model::TurnState;
use frogbot_discord::PLATFORM;
use frogbot_discord::channel::{self, Config};
use frogbot_discord::testing::{self as fake, Call, FakeDiscord};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;
const GUILD: u64 = 100_000_000_000_000_001;
const ALICE: u64 = 300_000_000_000_000_003;
const BOB: u64 = 300_000_000_000_000_005;
const WAIT: Duration = Duration::from_secs(20);

struct Bot {
    fake: FakeDiscord,
    engine: Engine,
    model: ScriptedModel,
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

async fn start(interval_ms: u64, model: ScriptedModel) -> Bot {
    let fake = FakeDiscord::start(APP, BOT).await;
    let adapter = channel::connect(Config {
        users: [(ALICE.to_string(), "alice".to_string())].into(),
        ..fake.config()
    })
    .await
    .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let engine = frogbot_testkit::engine_with(store, model.clone())
        .with_channel(adapter.channel())
        .with_channel_settings(
            PLATFORM,
            ChannelSettings {
                stream_interval: Duration::from_millis(interval_ms),
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
        model,
        shutdown,
        task,
        _db: db,
    }
}

fn alice() -> Value {
    fake::user(ALICE, "alice", false)
}

fn bob() -> Value {
    fake::user(BOB, "bob", false)
}

fn words(n: usize, pause: Duration) -> Vec<ScriptEvent> {
    let mut events = Vec::new();
    for i in 0..n {
        events.push(ScriptEvent::Event(ModelEvent::TextDelta(format!("w{i} "))));
        events.push(ScriptEvent::Pause(pause));
    }
    events.extend(reply("end."));
    events
}

impl Bot {
    /// `author` writes `text` in the DM `channel` (stored by the fake and dispatched); its id.
    fn dm(&self, channel: u64, author: &Value, text: &str) -> String {
        let m = self.fake.user_message(channel, None, author, text);
        let id = m["id"].as_str().unwrap().to_owned();
        self.fake.dispatch("MESSAGE_CREATE", m);
        id
    }

    async fn idle(&self, thread: u64) {
        let chat = channel_chat_id(PLATFORM, &thread.to_string());
        frogbot_testkit::eventually("the chat idle", WAIT, async || {
            self.engine.chats().state(&chat).await.ok() == Some(TurnState::Idle)
        })
        .await;
    }

    /// Waits for Done (✅) on message `id` in `channel`.
    async fn done(&self, channel: u64, id: &str) {
        let path = format!("/api/v10/channels/{channel}/messages/{id}/reactions/%E2%9C%85/@me");
        self.fake
            .wait_for(0, WAIT, |c| c.method == "PUT" && c.path == path)
            .await
            .unwrap_or_else(|| panic!("Done on {id}: {:#?}", self.fake.calls()));
    }

    /// The bot's messages in `channel`, oldest first.
    fn replies(&self, channel: u64) -> Vec<Value> {
        self.fake
            .channel_messages(channel)
            .into_iter()
            .filter(|m| m["author"]["id"] == BOT.to_string().as_str())
            .collect()
    }

    fn calls_on(&self, channel: u64) -> Vec<Call> {
        let messages = format!("/api/v10/channels/{channel}/messages");
        self.fake
            .calls()
            .into_iter()
            .filter(|c| c.path.starts_with(&messages))
            .collect()
    }

    /// `user` clicks `custom_id` on the message `shown` (as the fake keeps it); the token.
    fn click(&self, n: u64, shown: &Value, user: &Value, custom_id: &str) -> String {
        let token = format!("stop-{n}");
        self.fake.dispatch(
            "INTERACTION_CREATE",
            fake::component_on(
                500_000_000_000_000_000 + n,
                APP,
                shown,
                None,
                user,
                custom_id,
                None,
                &token,
            ),
        );
        token
    }

    async fn callback(&self, n: u64) -> Call {
        let path = format!(
            "/api/v10/interactions/{}/stop-{n}/callback",
            500_000_000_000_000_000 + n
        );
        self.fake
            .wait_for(0, WAIT, |c| c.path == path)
            .await
            .expect("the click was answered")
    }
}

fn has_stop(m: &Value) -> bool {
    m["components"][0]["components"][0]["custom_id"] == "frogbot-stop"
}

/// Seen → Working → the first text posted with a Stop button → edits at most once per interval
/// → the final state without components → Done; mentions never ping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_streams_by_post_and_throttled_edits_in_order() {
    let interval = Duration::from_millis(200);
    let model = ScriptedModel::new(|_: &ModelRequest| words(40, Duration::from_millis(15)));
    let bot = start(200, model).await;
    const DM: u64 = 720_000_000_000_000_001;
    let said = bot.dm(DM, &alice(), "talk to me");
    bot.done(DM, &said).await;
    let calls = bot.calls_on(DM);
    let on_said = format!("/api/v10/channels/{DM}/messages/{said}/reactions/");
    let pos = |pred: &dyn Fn(&Call) -> bool, what: &str| {
        calls
            .iter()
            .position(pred)
            .unwrap_or_else(|| panic!("{what}: {calls:#?}"))
    };
    let seen = pos(
        &|c| c.method == "PUT" && c.path == format!("{on_said}%F0%9F%91%80/@me"),
        "Seen",
    );
    let working = pos(
        &|c| c.method == "PUT" && c.path == format!("{on_said}%E2%8F%B3/@me"),
        "Working",
    );
    let first = pos(
        &|c| c.method == "POST" && c.path == format!("/api/v10/channels/{DM}/messages"),
        "the first text",
    );
    let done = pos(
        &|c| c.method == "PUT" && c.path == format!("{on_said}%E2%9C%85/@me"),
        "Done",
    );
    assert!(seen < working && working < first && first < done);
    let post = &calls[first];
    assert!(has_stop(&post.body), "{:?}", post.body);
    assert_eq!(post.body["components"][0]["components"][0]["style"], 4);
    assert_eq!(post.body["allowed_mentions"]["parse"], json!([]));
    let id = post.response["id"].as_str().unwrap().to_owned();
    let edits: Vec<&Call> = calls
        .iter()
        .filter(|c| c.method == "PATCH" && c.path.ends_with(&format!("/messages/{id}")))
        .collect();
    assert!(!edits.is_empty());
    assert!(edits.len() < 20, "{} edits for 41 deltas", edits.len());
    assert!(edits.iter().all(|c| c.status == 200));
    assert!(
        edits
            .iter()
            .all(|c| c.body["allowed_mentions"]["parse"] == json!([]))
    );
    let last_edit = calls.iter().rposition(|c| c.method == "PATCH").unwrap();
    assert!(last_edit < done, "the final state before Done");
    let mut times = vec![post.at];
    times.extend(edits.iter().map(|c| c.at));
    for pair in times.windows(2).take(times.len().saturating_sub(2)) {
        assert!(
            pair[1] - pair[0] >= interval - Duration::from_millis(20),
            "two edits within the interval: {:?}",
            pair[1] - pair[0]
        );
    }
    let full: String = (0..40).map(|i| format!("w{i} ")).collect::<String>() + "end.";
    let replies = bot.replies(DM);
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0]["content"], full.as_str());
    assert_eq!(replies[0]["components"], json!([]), "no Stop button left");
}

/// A 10,000-character reply with a code block across the 2,000-character limit ends as several
/// messages, each within the limit with its code fences balanced; Discord refused nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_reply_ends_as_several_messages_with_balanced_fences() {
    let prose = "Some prose words here. ".repeat(100);
    let code: String = (0..400).map(|i| format!("let x{i} = {i};\n")).collect();
    let text = format!("{prose}\n\n```rust\n{code}```\n\n{prose}");
    assert!((10_000..11_000).contains(&text.chars().count()));
    let full = text.clone();
    let model = ScriptedModel::new(move |_: &ModelRequest| {
        let mut events = Vec::new();
        for chunk in text.as_bytes().chunks(500) {
            let s = String::from_utf8(chunk.to_vec()).unwrap();
            events.push(ScriptEvent::Event(ModelEvent::TextDelta(s)));
            events.push(ScriptEvent::Pause(Duration::from_millis(10)));
        }
        events.extend(reply(""));
        events
    });
    let bot = start(50, model).await;
    const DM: u64 = 720_000_000_000_000_002;
    let said = bot.dm(DM, &alice(), "write a lot");
    bot.done(DM, &said).await;
    let replies = bot.replies(DM);
    assert!(replies.len() >= 5, "{} messages", replies.len());
    for m in &replies {
        let content = m["content"].as_str().unwrap();
        assert!(content.chars().count() <= 2000);
        let fences = content
            .lines()
            .filter(|l| l.trim_start().starts_with("```"))
            .count();
        assert_eq!(fences % 2, 0, "unbalanced fences: {content}");
        assert_eq!(m["components"], json!([]));
    }
    let joined: String = replies
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(joined.contains("let x0 = 0;") && joined.contains("let x399 = 399;"));
    assert_eq!(
        joined.matches("Some prose words here.").count(),
        full.matches("Some prose words here.").count()
    );
    assert!(
        bot.fake.calls().iter().all(|c| c.status < 300),
        "Discord refused a call"
    );
}

/// The Stop button: another person's click gets the refusal ephemerally and the turn runs on;
/// the driver's click stops it, the reply says so and the button goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stop_button_stops_for_the_driver_only() {
    let model = ScriptedModel::new(|_: &ModelRequest| words(400, Duration::from_millis(20)));
    let bot = start(100, model).await;
    const DM: u64 = 720_000_000_000_000_003;
    let said = bot.dm(DM, &alice(), "talk for long");
    frogbot_testkit::eventually("a message with Stop", WAIT, async || {
        bot.replies(DM).first().is_some_and(has_stop)
    })
    .await;
    let shown = bot.replies(DM)[0].clone();
    let id = shown["id"].as_str().unwrap().to_owned();
    bot.click(1, &shown, &bob(), "frogbot-stop");
    let refused = bot.callback(1).await;
    assert_eq!(refused.status, 204);
    assert_eq!(refused.body["type"], 4);
    assert_eq!(refused.body["data"]["content"], STOP_REFUSED_TEXT);
    assert_eq!(refused.body["data"]["flags"], 64, "ephemeral");
    let before = bot.fake.message(&id).unwrap()["content"]
        .as_str()
        .unwrap()
        .len();
    frogbot_testkit::eventually("more text", WAIT, async || {
        bot.fake.message(&id).unwrap()["content"]
            .as_str()
            .unwrap()
            .len()
            > before
    })
    .await;
    let shown = bot.fake.message(&id).unwrap();
    bot.click(2, &shown, &alice(), "frogbot-stop");
    let stopped = bot.callback(2).await;
    assert_eq!(stopped.body["type"], 6, "a deferred update");
    bot.done(DM, &said).await;
    bot.idle(DM).await;
    let last = bot.replies(DM).pop().unwrap();
    let content = last["content"].as_str().unwrap();
    assert!(content.contains(STOPPED_TEXT), "{content}");
    assert!(!content.contains("end."));
    for m in bot.replies(DM) {
        assert_eq!(m["components"], json!([]), "no Stop button left");
    }
    assert!(bot.fake.notices(&ALICE.to_string()).is_empty());
}

/// Mentioned in a thread it has not seen, the bot reads the thread's earlier messages and the
/// model sees who said what.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_mid_thread_gives_the_model_the_earlier_messages_with_names() {
    let model = ScriptedModel::new(|_: &ModelRequest| reply("on it"));
    let bot = start(100, model).await;
    const THREAD: u64 = 730_000_000_000_000_001;
    bot.fake.mark_thread(THREAD);
    bot.fake
        .user_message(THREAD, Some(GUILD), &bob(), "the deploy is failing");
    bot.fake.user_message(
        THREAD,
        Some(GUILD),
        &fake::user(300_000_000_000_000_009, "carol", false),
        "since this morning, on staging",
    );
    let mut m = bot.fake.user_message(
        THREAD,
        Some(GUILD),
        &alice(),
        &format!("<@{BOT}> can you look?"),
    );
    m["mentions"] = json!([fake::user(BOT, "frogbot", true)]);
    let id = m["id"].as_str().unwrap().to_owned();
    bot.fake.dispatch("MESSAGE_CREATE", m);
    bot.done(THREAD, &id).await;
    let history = bot
        .fake
        .calls()
        .into_iter()
        .find(|c| c.method == "GET" && c.path == format!("/api/v10/channels/{THREAD}/messages"))
        .expect("the thread's history read");
    assert_eq!(history.status, 200);
    let req = bot.model.requests().pop().expect("a model request");
    let all: String = req
        .messages
        .iter()
        .filter_map(|m| match m {
            ModelMessage::User { text } => Some(text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(all.contains("bob: the deploy is failing"), "{all}");
    assert!(
        all.contains("carol: since this morning, on staging"),
        "{all}"
    );
    assert!(all.find("bob:").unwrap() < all.find("carol:").unwrap());
    assert!(all.contains("can you look?"));
    // The answer is in the thread itself.
    assert_eq!(bot.replies(THREAD).len(), 1);
}
