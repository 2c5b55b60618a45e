//! Streamed replies, the Stop button, assistant thread status and thread context, end to end:
//! signed Events API and interactivity requests from the fake Slack to the adapter's HTTP routes,
//! FrogBot's engine on SQLite with a scripted model, and what the fake then shows.

use std::time::Duration;

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, reply};
use frogbot_core::agent::{
    ChannelSettings, Engine, ModelEvent, ModelMessage, ModelRequest, STOP_REFUSED_TEXT,
    STOPPED_TEXT,
};
use frogbot_slack::testing::{BOT_USER, FakeSlack, Message, Signature};
use frogbot_testkit::eventually;

const WAIT: Duration = Duration::from_secs(20);

struct World {
    fake: FakeSlack,
    base: String,
    engine: Engine,
    model: ScriptedModel,
    _db: frogbot_testkit::TestDb,
}

async fn world(settings: ChannelSettings, model: ScriptedModel, refuse: bool) -> World {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("frogbot_slack=debug,frogbot_core=info")
        .try_init();
    let fake = FakeSlack::start().await;
    if refuse {
        fake.refuse_streaming(Some("not_allowed_token_type"));
    }
    let slack = frogbot_slack::channel::connect(fake.http_config())
        .await
        .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let engine = frogbot_testkit::engine_with(store, model.clone())
        .with_channel(slack.channel())
        .with_channel_settings(frogbot_slack::PLATFORM, settings)
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
        model,
        _db: db,
    }
}

impl World {
    /// `user` mentions the bot in `channel` (a new thread, or a reply in `thread_ts`).
    async fn mention(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        user: &str,
        text: &str,
    ) -> Message {
        let said =
            self.fake
                .user_message(channel, thread_ts, user, &format!("<@{BOT_USER}> {text}"));
        let body = self.fake.event_callback(self.fake.mention_event(&said));
        let res = self
            .fake
            .post_event(&self.base, &body, Signature::Good, None)
            .await;
        assert_eq!(res.status(), 200);
        said
    }

    async fn until_reaction(&self, said: &Message, name: &str) {
        eventually(&format!("{name} on {}", said.id()), WAIT, async || {
            self.fake
                .message(&said.id())
                .is_some_and(|m| m.bot_reactions() == [name])
        })
        .await;
    }

    /// The bot's messages in `thread` (not the root).
    fn replies(&self, thread: &str) -> Vec<Message> {
        self.fake
            .thread_messages(thread)
            .into_iter()
            .filter(|m| m.bot)
            .collect()
    }

    async fn click_stop(&self, user: &str, message: &str) {
        let payload = self
            .fake
            .click(user, message, "Stop")
            .expect("a Stop button");
        let res = self
            .fake
            .post_interaction(&self.base, &payload, Signature::Good, None)
            .await;
        assert_eq!(res.status(), 200);
    }
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

fn settings(interval_ms: u64) -> ChannelSettings {
    ChannelSettings {
        stream_interval: Duration::from_millis(interval_ms),
        ..Default::default()
    }
}

fn summary(calls: &[frogbot_slack::testing::Call]) -> Vec<String> {
    calls
        .iter()
        .map(|c| match c.body["name"].as_str() {
            Some(name) => format!("{} {name}", c.method),
            None => c.method.clone(),
        })
        .collect()
}

/// Native streaming: Seen, Working, `chat.startStream` with the first text (for the person who
/// asked), `chat.appendStream` at most once per interval, `chat.stopStream`, then Done; the
/// message holds the complete reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_streams_natively_in_order_and_throttled() {
    let interval = Duration::from_millis(200);
    let model = ScriptedModel::new(|_: &ModelRequest| words(40, Duration::from_millis(15)));
    let w = world(settings(200), model, false).await;
    let from = w.fake.count();
    let said = w.mention("C42", None, "U123", "talk to me").await;
    w.until_reaction(&said, "white_check_mark").await;
    let calls: Vec<_> = w.fake.all_calls()[from..].to_vec();
    let names = summary(&calls);
    let pos = |m: &str| {
        names
            .iter()
            .position(|n| n == m)
            .unwrap_or_else(|| panic!("{m} in {names:?}"))
    };
    assert!(pos("reactions.add eyes") < pos("reactions.add hourglass_flowing_sand"));
    assert!(pos("reactions.add hourglass_flowing_sand") < pos("chat.startStream"));
    assert!(pos("chat.startStream") < pos("chat.stopStream"));
    assert!(pos("chat.stopStream") < pos("reactions.add white_check_mark"));
    assert!(!names.iter().any(|n| n == "chat.postMessage"), "{names:?}");
    let start = &calls[pos("chat.startStream")];
    assert_eq!(start.body["thread_ts"], said.ts.as_str());
    assert_eq!(start.body["recipient_user_id"], "U123");
    assert_eq!(start.body["recipient_team_id"], "T1");
    // Throttled: appends at least an interval apart (the final one aside).
    let appends: Vec<_> = calls
        .iter()
        .filter(|c| c.method == "chat.appendStream")
        .collect();
    assert!(!appends.is_empty(), "{names:?}");
    assert!(
        appends.len() < 20,
        "{} appends for 41 deltas",
        appends.len()
    );
    let mut times = vec![start.at];
    times.extend(appends.iter().map(|c| c.at));
    for pair in times.windows(2).take(times.len().saturating_sub(2)) {
        assert!(
            pair[1] - pair[0] >= interval - Duration::from_millis(20),
            "two updates within the interval: {:?}",
            pair[1] - pair[0]
        );
    }
    let full: String = (0..40).map(|i| format!("w{i} ")).collect::<String>() + "end.";
    let replies = w.replies(&said.id());
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].text, full);
    assert!(!replies[0].streaming, "stopped");
    assert!(w.fake.violations().is_empty(), "{:?}", w.fake.violations());
}

/// A workspace that refuses `chat.startStream`: the reply is posted with a Stop button and
/// edited (throttled); the final state has no button.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_stream_falls_back_to_post_and_edit() {
    let interval = Duration::from_millis(200);
    let model = ScriptedModel::new(|_: &ModelRequest| words(40, Duration::from_millis(15)));
    let w = world(settings(200), model, true).await;
    let said = w.mention("C42", None, "U123", "talk to me").await;
    eventually("a first message with Stop", WAIT, async || {
        w.replies(&said.id())
            .first()
            .is_some_and(|m| w.fake.element(&m.id(), "Stop").is_some())
    })
    .await;
    w.until_reaction(&said, "white_check_mark").await;
    assert_eq!(w.fake.calls("chat.startStream").len(), 1, "tried once");
    assert!(w.fake.calls("chat.appendStream").is_empty());
    let posts = w.fake.calls("chat.postMessage");
    assert_eq!(posts.len(), 1);
    assert_eq!(
        posts[0].body["blocks"][1]["elements"][0]["action_id"],
        "frogbot-stop"
    );
    let edits = w.fake.calls("chat.update");
    assert!(!edits.is_empty());
    let mut times = vec![posts[0].at];
    times.extend(edits.iter().map(|c| c.at));
    for pair in times.windows(2).take(times.len().saturating_sub(2)) {
        assert!(pair[1] - pair[0] >= interval - Duration::from_millis(20));
    }
    let full: String = (0..40).map(|i| format!("w{i} ")).collect::<String>() + "end.";
    let replies = w.replies(&said.id());
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].blocks[0]["type"], "markdown");
    assert_eq!(replies[0].blocks[0]["text"], full.as_str());
    assert_eq!(
        w.fake.controls(&replies[0].id()),
        0,
        "the Stop button is gone"
    );
}

fn long_reply() -> String {
    // ~30,000 characters with a code block across the 12,000-character cut.
    let prose = "Some prose words here. ".repeat(450);
    let code: String = (0..600).map(|i| format!("let x{i} = {i};\n")).collect();
    format!("{prose}\n\n```rust\n{code}```\n\n{prose}")
}

fn assert_balanced(texts: &[String]) {
    for t in texts {
        assert!(
            t.chars().count() <= 12_000,
            "{} characters",
            t.chars().count()
        );
        let fences = t
            .lines()
            .filter(|l| l.trim_start().starts_with("```"))
            .count();
        assert_eq!(fences % 2, 0, "unbalanced fences in a message");
    }
}

/// A reply longer than a streamed message takes ends as several messages, each within 12,000
/// characters with its code fences balanced: natively (a stream stopped, a new one started) and
/// by post + edit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_reply_ends_as_several_messages_with_balanced_fences() {
    for refuse in [false, true] {
        let text = long_reply();
        let model = ScriptedModel::new(move |_: &ModelRequest| {
            let mut events = Vec::new();
            for chunk in text.as_bytes().chunks(2000) {
                let s = String::from_utf8(chunk.to_vec()).unwrap();
                events.push(ScriptEvent::Event(ModelEvent::TextDelta(s)));
                events.push(ScriptEvent::Pause(Duration::from_millis(20)));
            }
            events.extend(reply(""));
            events
        });
        let w = world(settings(50), model, refuse).await;
        let said = w.mention("C42", None, "U123", "write a lot").await;
        w.until_reaction(&said, "white_check_mark").await;
        let replies = w.replies(&said.id());
        assert!(replies.len() >= 3, "{} messages", replies.len());
        let texts: Vec<String> = replies
            .iter()
            .map(|m| {
                if refuse {
                    m.blocks[0]["text"].as_str().unwrap().to_owned()
                } else {
                    assert!(!m.streaming);
                    m.text.clone()
                }
            })
            .collect();
        assert_balanced(&texts);
        let joined = texts.concat();
        assert!(joined.contains("let x0 = 0;") && joined.contains("let x599 = 599;"));
        for r in &replies {
            assert_eq!(w.fake.controls(&r.id()), 0);
        }
        assert!(w.fake.violations().is_empty(), "{:?}", w.fake.violations());
        if !refuse {
            assert!(w.fake.calls("chat.startStream").len() >= 3);
            assert_eq!(
                w.fake.calls("chat.startStream").len(),
                w.fake.calls("chat.stopStream").len()
            );
        }
    }
}

/// The Stop button: another person's click is refused privately and the turn runs on; the
/// driver's click stops it, the reply says so and the button goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stop_button_stops_for_the_driver_only() {
    let model = ScriptedModel::new(|_: &ModelRequest| words(400, Duration::from_millis(20)));
    let w = world(settings(100), model, true).await;
    let said = w.mention("C42", None, "U123", "talk for long").await;
    eventually("a message with Stop", WAIT, async || {
        w.replies(&said.id())
            .first()
            .is_some_and(|m| w.fake.element(&m.id(), "Stop").is_some())
    })
    .await;
    let streamed = w.replies(&said.id())[0].clone();
    w.click_stop("U999", &streamed.id()).await;
    eventually("the refusal", WAIT, async || {
        w.fake
            .ephemerals()
            .iter()
            .any(|e| e.user == "U999" && e.text == STOP_REFUSED_TEXT)
    })
    .await;
    // It runs on: more text shows.
    let before = w.fake.message(&streamed.id()).unwrap().text;
    eventually("more text", WAIT, async || {
        w.fake.message(&streamed.id()).unwrap().text.len() > before.len()
    })
    .await;
    w.click_stop("U123", &streamed.id()).await;
    w.until_reaction(&said, "white_check_mark").await;
    let last = w.replies(&said.id()).pop().unwrap();
    let shown = last.blocks[0]["text"].as_str().unwrap_or_default();
    assert!(shown.contains(STOPPED_TEXT), "{shown}");
    assert!(!shown.contains("end."), "stopped before the end");
    assert_eq!(w.fake.controls(&last.id()), 0, "no Stop button left");
    assert!(
        !w.fake
            .ephemerals()
            .iter()
            .any(|e| e.user == "U123" && e.text == STOP_REFUSED_TEXT)
    );
    // The clicks never reached the question engine (no question, no "stale" note).
    assert!(w.fake.notices("U123").is_empty());
    assert!(
        w.fake
            .notices("U999")
            .iter()
            .all(|t| t == STOP_REFUSED_TEXT)
    );
}

/// Mentioned in a thread it has not seen, the bot reads the thread's earlier messages
/// (`conversations.replies`) and the model sees who said what.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_mid_thread_gives_the_model_the_earlier_messages_with_names() {
    let model = ScriptedModel::new(|_: &ModelRequest| reply("on it"));
    let w = world(settings(100), model, false).await;
    w.fake.set_user_name("U1", "Alice");
    w.fake.set_user_name("U2", "Bob");
    let root = w
        .fake
        .user_message("C42", None, "U1", "the deploy is failing");
    w.fake.user_message(
        "C42",
        Some(&root.ts),
        "U2",
        "since this morning, on staging",
    );
    let said = w
        .mention("C42", Some(&root.ts), "U3", "can you look?")
        .await;
    w.until_reaction(&said, "white_check_mark").await;
    let calls = w.fake.calls("conversations.replies");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].body["ts"], root.ts.as_str());
    assert_eq!(calls[0].body["latest"], said.ts.as_str());
    let req = w.model.requests().pop().expect("a model request");
    let all: String = req
        .messages
        .iter()
        .filter_map(|m| match m {
            ModelMessage::User { text } => Some(text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(all.contains("Alice: the deploy is failing"), "{all}");
    assert!(all.contains("Bob: since this morning, on staging"), "{all}");
    assert!(all.contains("can you look?"), "{all}");
    let alice = all.find("Alice:").unwrap();
    assert!(alice < all.find("Bob:").unwrap());
}

/// In an assistant thread (learned from `assistant_thread_started`), a running turn shows
/// "is thinking…" with `assistant.threads.setStatus`; elsewhere no status is set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assistant_thread_shows_its_thinking_status() {
    let model = ScriptedModel::new(|_: &ModelRequest| reply("hi"));
    let w = world(settings(100), model, false).await;
    let root_ts = w.fake.next_ts();
    let started = w.fake.assistant_thread_started("U5", "D77", &root_ts);
    let body = w.fake.event_callback(started);
    let res = w
        .fake
        .post_event(&w.base, &body, Signature::Good, None)
        .await;
    assert_eq!(res.status(), 200);
    // The person writes in the assistant thread (a DM: no mention needed).
    let said = w.fake.user_message("D77", Some(&root_ts), "U5", "hello");
    let body = w.fake.event_callback(w.fake.message_event(&said, "im"));
    let res = w
        .fake
        .post_event(&w.base, &body, Signature::Good, None)
        .await;
    assert_eq!(res.status(), 200);
    w.until_reaction(&said, "white_check_mark").await;
    let statuses = w.fake.statuses();
    assert!(
        statuses.contains(&("D77".into(), root_ts.clone(), "is thinking…".into())),
        "{statuses:?}"
    );
    // A channel thread that is no assistant thread gets no status.
    let other = w.mention("C42", None, "U5", "hi there").await;
    w.until_reaction(&other, "white_check_mark").await;
    assert!(w.fake.statuses().iter().all(|(c, _, _)| c == "D77"));
    let _ = &w.engine;
}
