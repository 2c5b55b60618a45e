//! Streamed replies end to end: FrogBot's engine on SQLite, the Telegram channel over the fake
//! Bot API (long polling). A reply appears as `sendMessage` then throttled `editMessageText`s (HTML,
//! a Stop button while the model writes, none at the end); a long one is cut into several
//! messages; the Stop button stops the turn for the person driving it and is refused to others.

use std::time::Duration;

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, reply};
use frogbot_core::agent::{ChannelSettings, Engine, ModelEvent, STOP_REFUSED_TEXT};
use frogbot_telegram::channel::{Config, Receive, TelegramAdapter, connect};
use frogbot_telegram::render::MAX_TEXT;
use frogbot_telegram::testing::{
    Call, FakeBotApi, callback_update, group_chat, private_chat, text_update, user,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const ADA: i64 = 42;
const BOB: i64 = 77;
const GROUP: i64 = -100500;
const INTERVAL: Duration = Duration::from_millis(200);

fn delta(text: &str) -> ScriptEvent {
    ScriptEvent::Event(ModelEvent::TextDelta(text.into()))
}

/// The 10,000-character reply: prose, a code block across the 4,096 limit, prose.
fn big_reply() -> String {
    let prose = "Some **words** about _frogs_ & <toads>. ".repeat(60);
    let code: String = (0..250)
        .map(|i| format!("let x{i} = \"<{i}>\"; // & more\n"))
        .collect();
    format!("{prose}\n\n```rust\n{code}```\n\n{prose}")
}

/// "words": 60 words 40 ms apart (the first message waits for 80 characters, about 22 words: 60
/// leave over a second of edits after it, so a loaded machine still shows several); "slow": 300
/// words 40 ms apart (a turn to stop); "big": the big reply in 40 chunks, 20 ms apart.
fn model() -> ScriptedModel {
    ScriptedModel::new(|req: &frogbot_core::agent::ModelRequest| {
        let text = format!("{:?}", req.messages.last());
        let words = |n: usize| {
            let mut e = Vec::new();
            for i in 0..n {
                e.push(delta(&format!("w{i} ")));
                e.push(ScriptEvent::Pause(Duration::from_millis(40)));
            }
            e.extend(reply("end."));
            e
        };
        if text.contains("slow") {
            return words(300);
        }
        if text.contains("big") {
            let big: Vec<char> = big_reply().chars().collect();
            let mut e = Vec::new();
            for chunk in big.chunks(big.len().div_ceil(40)) {
                e.push(delta(&chunk.iter().collect::<String>()));
                e.push(ScriptEvent::Pause(Duration::from_millis(20)));
            }
            e.extend(reply(""));
            return e;
        }
        words(60)
    })
}

struct Setup {
    fake: FakeBotApi,
    _engine: Engine,
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
    let engine = frogbot_testkit::engine_with(store, model())
        .with_channel(channel.channel())
        .with_channel_settings(
            frogbot_telegram::PLATFORM,
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
        _engine: engine,
        _channel: channel,
        shutdown,
        _db: db,
    }
}

fn is_stop_keyboard(markup: &Value) -> bool {
    markup["inline_keyboard"] == json!([[{"text": "⏹ Stop", "callback_data": "frogbot-stop"}]])
}

/// The accepted message calls (`sendmessage` / `editmessagetext`) of the bot's replies, in order:
/// (message id, HTML, has the Stop button, when).
fn drawn(calls: &[Call]) -> Vec<(i64, String, bool, std::time::Instant)> {
    calls
        .iter()
        .filter(|c| c.method == "sendmessage" || c.method == "editmessagetext")
        .filter_map(|c| {
            let id = c.result.as_ref()?["message_id"].as_i64()?;
            Some((
                id,
                c.body["text"].as_str()?.to_owned(),
                is_stop_keyboard(&c.body["reply_markup"]),
                c.at,
            ))
        })
        .collect()
}

fn reaction_at(calls: &[Call], emoji: &str) -> Option<usize> {
    calls.iter().position(|c| {
        c.method == "setmessagereaction"
            && c.result.is_some()
            && c.body["reaction"][0]["emoji"] == emoji
    })
}

async fn until_done(fake: &FakeBotApi) -> Vec<Call> {
    fake.wait_for("Done", |c| reaction_at(c, "👌").map(|_| c.to_vec()))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_streams_in_order_throttled_and_ends_without_the_stop_button() {
    let s = setup().await;
    // This bot may not draft (Telegram's refusal): the reply is posted and edited instead.
    s.fake.refuse_drafts(Some(
        "Bad Request: method is available only for bots with forum topic mode enabled",
    ));
    s.fake.push(text_update(
        5,
        private_chat(ADA, "Ada"),
        user(ADA, "Ada"),
        "words please",
    ));
    let calls = until_done(&s.fake).await;
    let seen = reaction_at(&calls, "👀").expect("Seen");
    let working = reaction_at(&calls, "✍").expect("Working");
    let done = reaction_at(&calls, "👌").unwrap();
    let first = calls
        .iter()
        .position(|c| c.method == "sendmessage" && c.result.is_some())
        .expect("the first text");
    let last_edit = calls
        .iter()
        .rposition(|c| c.method == "editmessagetext" && c.result.is_some())
        .expect("edits");
    assert!(
        seen < working && working < first && first < last_edit && last_edit < done,
        "Seen {seen} < Working {working} < first text {first} < edits {last_edit} < Done {done}"
    );
    let drawn = drawn(&calls);
    let id = drawn[0].0;
    assert!(drawn.iter().all(|d| d.0 == id), "one message: {drawn:?}");
    // The first text replies to the person's message and carries the Stop button; every edit
    // but the last does too; the last shows the complete reply without it.
    assert_eq!(calls[first].body["reply_parameters"]["message_id"], 5);
    assert_eq!(calls[first].body["parse_mode"], "HTML");
    assert!(drawn[..drawn.len() - 1].iter().all(|d| d.2), "{drawn:?}");
    let full: String = (0..60).map(|i| format!("w{i} ")).collect::<String>() + "end.";
    let last = drawn.last().unwrap();
    assert!(!last.2, "the Stop button is gone at the end");
    assert_eq!(last.1, full);
    assert_eq!(s.fake.sent(id)["text"], full);
    assert!(s.fake.sent(id)["reply_markup"].is_null());
    // The text only grows while streaming, and several edits were made (60 words over 2.4 s).
    for pair in drawn.windows(2) {
        assert!(pair[1].1.starts_with(pair[0].1.trim_end()), "{pair:?}");
    }
    assert!(drawn.len() >= 3, "{drawn:?}");
    // Throttled: no two updates of the message within the interval (the final state aside).
    let updates = &drawn[..drawn.len() - 1];
    for pair in updates.windows(2) {
        assert!(
            pair[1].3 - pair[0].3 >= INTERVAL - Duration::from_millis(10),
            "two updates {:?} apart",
            pair[1].3 - pair[0].3
        );
    }
    assert!(drawn.len() < 20, "{} updates for 60 words", drawn.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_streamed_reply_ends_as_several_valid_html_messages() {
    let s = setup().await;
    s.fake.push(text_update(
        5,
        private_chat(ADA, "Ada"),
        user(ADA, "Ada"),
        "big one",
    ));
    let calls = until_done(&s.fake).await;
    // Every call the fake got for the reply was accepted (valid HTML, within the limit).
    let refused: Vec<_> = calls
        .iter()
        .filter(|c| {
            (c.method == "sendmessage" || c.method == "editmessagetext") && c.result.is_none()
        })
        .map(|c| c.body.clone())
        .collect();
    assert!(refused.is_empty(), "refused: {refused:#?}");
    let drawn = drawn(&calls);
    let mut ids: Vec<i64> = Vec::new();
    for d in &drawn {
        if !ids.contains(&d.0) {
            ids.push(d.0);
        }
    }
    assert!(ids.len() >= 3, "{} messages", ids.len());
    let mut code_lines = 0;
    for id in &ids {
        let m = s.fake.sent(*id);
        assert!(m["reply_markup"].is_null(), "no Stop button left on {id}");
        let shown = m["text"].as_str().unwrap();
        assert!(shown.chars().count() <= MAX_TEXT);
        code_lines += shown.lines().filter(|l| l.starts_with("let x")).count();
        // The HTML it last got has balanced <pre> blocks.
        let html = &drawn.iter().rev().find(|d| d.0 == *id).unwrap().1;
        assert_eq!(
            html.matches("<pre>").count(),
            html.matches("</pre>").count(),
            "{html}"
        );
    }
    assert_eq!(
        code_lines, 250,
        "every code line shown once, in a code block"
    );
}

fn group_mention(id: i64, text: &str) -> Value {
    json!({"message": {
        "message_id": id, "date": 1_767_225_600, "chat": group_chat(GROUP, false),
        "from": user(ADA, "Ada"), "text": format!("@frogbot {text}"),
        "entities": [{"type": "mention", "offset": 0, "length": 8}]
    }})
}

fn answer_of(calls: &[Call], query: &str) -> Option<Value> {
    calls
        .iter()
        .find(|c| {
            c.method == "answercallbackquery"
                && c.body["callback_query_id"] == query
                && c.result.is_some()
        })
        .map(|c| c.body.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stop_button_stops_the_drivers_turn_and_is_refused_to_others() {
    let s = setup().await;
    s.fake.push(group_mention(5, "slow please"));
    let id = s
        .fake
        .wait_for("the first text with Stop", |c| {
            drawn(c).into_iter().find(|d| d.2).map(|d| d.0)
        })
        .await;
    // Bob taps Stop: refused privately, the turn runs on.
    s.fake.push(callback_update(
        "q-bob",
        user(BOB, "Bob"),
        s.fake.sent(id),
        "frogbot-stop",
    ));
    let refused = s
        .fake
        .wait_for("Bob's answer", |c| answer_of(c, "q-bob"))
        .await;
    assert_eq!(refused["text"], STOP_REFUSED_TEXT);
    let edits_then = s.fake.calls("editmessagetext").len();
    s.fake
        .wait_for("more text after the refusal", |c| {
            (c.iter()
                .filter(|c| c.method == "editmessagetext" && c.result.is_some())
                .count()
                > edits_then + 1)
                .then_some(())
        })
        .await;
    assert!(
        reaction_at(&s.fake.all_calls(), "👌").is_none(),
        "still running"
    );
    // Ada taps Stop: answered quietly, the turn stops, the button goes.
    s.fake.push(callback_update(
        "q-ada",
        user(ADA, "Ada"),
        s.fake.sent(id),
        "frogbot-stop",
    ));
    let answered = s
        .fake
        .wait_for("Ada's answer", |c| answer_of(c, "q-ada"))
        .await;
    assert!(answered["text"].is_null(), "{answered}");
    let calls = s
        .fake
        .wait_for("the turn's end", |c| {
            c.iter()
                .any(|c| {
                    c.method == "setmessagereaction"
                        && c.result.is_some()
                        && c.body["message_id"] == 5
                        && c.body["reaction"][0]["emoji"] != "👀"
                        && c.body["reaction"][0]["emoji"] != "✍"
                })
                .then(|| c.to_vec())
        })
        .await;
    let m = s.fake.sent(id);
    assert!(m["reply_markup"].is_null(), "the Stop button is gone: {m}");
    let shown = m["text"].as_str().unwrap();
    assert!(shown.starts_with("w0 w1"), "{shown}");
    assert!(!shown.contains("w299"), "stopped before the end: {shown}");
    // The model was not asked again after the stop, and no question engine saw the taps.
    assert!(
        calls
            .iter()
            .filter(|c| c.method == "answercallbackquery")
            .count()
            == 2
    );
}

/// In a private chat the reply streams as a message draft (`sendMessageDraft`: one draft id, the
/// text growing, throttled), then the complete reply is sent as a message; nothing is edited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_reply_streams_as_a_draft_then_is_sent_whole() {
    let s = setup().await;
    s.fake.push(text_update(
        5,
        private_chat(ADA, "Ada"),
        user(ADA, "Ada"),
        "words please",
    ));
    let calls = until_done(&s.fake).await;
    let drafts: Vec<&Call> = calls
        .iter()
        .filter(|c| c.method == "sendmessagedraft" && c.result.is_some())
        .collect();
    assert!(drafts.len() >= 2, "several draft updates: {}", drafts.len());
    let draft_id = &drafts[0].body["draft_id"];
    assert!(drafts.iter().all(|d| &d.body["draft_id"] == draft_id));
    assert!(drafts.iter().all(|d| d.body["parse_mode"] == "HTML"));
    for pair in drafts.windows(2) {
        let (a, b) = (
            pair[0].body["text"].as_str().unwrap(),
            pair[1].body["text"].as_str().unwrap(),
        );
        assert!(
            b.starts_with(a.trim_end()),
            "the draft grows: {a:?} → {b:?}"
        );
        assert!(
            pair[1].at - pair[0].at >= INTERVAL - Duration::from_millis(10),
            "throttled"
        );
    }
    assert!(
        !calls.iter().any(|c| c.method == "editmessagetext"),
        "nothing edited"
    );
    let full: String = (0..60).map(|i| format!("w{i} ")).collect::<String>() + "end.";
    let sent: Vec<&Call> = calls
        .iter()
        .filter(|c| c.method == "sendmessage" && c.result.is_some())
        .collect();
    assert_eq!(sent.len(), 1, "the complete reply, once");
    assert_eq!(sent[0].body["text"], full.as_str());
    assert!(sent[0].body["reply_markup"].is_null());
    let first_draft = calls
        .iter()
        .position(|c| c.method == "sendmessagedraft")
        .unwrap();
    let working = reaction_at(&calls, "✍").unwrap();
    let done = reaction_at(&calls, "👌").unwrap();
    let message = calls
        .iter()
        .position(|c| c.method == "sendmessage" && c.result.is_some())
        .unwrap();
    assert!(working < first_draft && first_draft < message && message < done);
}
