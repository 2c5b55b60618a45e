//! Agent messages on Telegram: a title, Markdown text and blocks drawn against the fake Bot API
//! (`frogbot_telegram::testing`), which refuses what Telegram refuses (4,096 characters of text,
//! 1,024 of caption, HTML it cannot parse, callback data over 64 bytes, over 100 buttons or 8 a
//! row). The request bodies of one message holding a block of every type are compared with
//! `tests/golden/blocks.json` (`UPDATE_GOLDEN=1` rewrites it).

use std::sync::Arc;

use frogbot_core::agent::{ChannelOutbox, Delivery};
use frogbot_model::EventControl;
use frogbot_model::blocks::{Block, UNKNOWN_BLOCK_TEXT};
use frogbot_model::faults::{Fault, FaultPlan};
use frogbot_model::{Thread, UiMessage};
use frogbot_telegram::channel::TelegramOutbox;
use frogbot_telegram::format::visible_text;
use frogbot_telegram::ids::{MAX_CALLBACK_DATA, read_event};
use frogbot_telegram::render::{MAX_CAPTION, MAX_TEXT};
use frogbot_telegram::testing::{Call, FakeBotApi};
use serde_json::{Value, json};

const CHAT: i64 = -100_500;

fn thread() -> Thread {
    Thread {
        id: CHAT.to_string(),
        platform: "telegram".into(),
        chat_id: "telegram--100500".into(),
    }
}

/// An agent message: `title`, `text` and the blocks written as agents write them.
fn message(title: Option<&str>, text: &str, blocks: Value) -> UiMessage {
    let blocks = Block::list_from_json(&blocks).expect("valid blocks");
    let mut parts = vec![json!({"type": "text", "text": text})];
    for b in blocks {
        parts.push(serde_json::to_value(b.to_part()).unwrap());
    }
    let mut m = json!({"id": "am1", "role": "assistant", "parts": parts, "metadata": {}});
    if let Some(t) = title {
        m["metadata"]["title"] = t.into();
    }
    serde_json::from_value(m).unwrap()
}

/// One block of every type (the fields block carries two event buttons).
fn every_type() -> Value {
    json!([
        {"type": "table", "id": "jobs", "columns": ["Job", "State", "Time"],
         "rows": [["build", "ok", 42], ["test <unit>", "failed", 7.5], ["deploy"]]},
        {"type": "progress", "id": "deploy", "value": 3, "max": 4, "label": "Deploying & checking"},
        {"type": "image", "id": "chart", "url": "https://example.com/chart.png", "alt": "Build times <last week>"},
        {"type": "code", "code": "fn main() {\n    println!(\"<frog> & toad\");\n}", "language": "rust"},
        {"type": "fields", "id": "summary", "fields": [{"key": "Branch", "value": "main"}, {"key": "Commit", "value": "c01f247"}],
         "events": [{"label": "Retry", "value": "retry"}, {"label": "Show logs"}]},
        {"type": "html", "html": "<!doctype html><p>hi</p>", "title": "Dashboard"},
        // With the server's public_url: a link to the app's web view.
        {"type": "html", "html": "<p>chart</p>", "title": "Chart", "link": "0123456789abcdef0123456789abcdef",
         "url": "https://bot.example.com/apps/chat-golden/m1/0123456789abcdef0123456789abcdef"},
        {"type": "sparkline", "id": "spark", "points": [1, 2, 3]}
    ])
}

fn golden_message() -> UiMessage {
    message(
        Some("Nightly build"),
        "The **nightly** build finished: see below.",
        every_type(),
    )
}

/// The sends (`sendMessage`, `sendPhoto`) among `calls`.
fn sends(calls: &[Call]) -> Vec<&Call> {
    calls
        .iter()
        .filter(|c| c.method == "sendmessage" || c.method == "sendphoto")
        .collect()
}

/// `chat:message_id` of what a call posted.
fn posted_id(c: &Call) -> String {
    let r = c.result.as_ref().expect("accepted by the fake");
    format!("{}:{}", r["chat"]["id"], r["message_id"])
}

fn message_number(id: &str) -> i64 {
    id.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// Every call was accepted, within Telegram's limits.
fn assert_within_limits(calls: &[Call]) {
    for c in calls {
        assert!(c.result.is_some(), "refused: {} {}", c.method, c.body);
        let text = c.body["text"]
            .as_str()
            .or(c.body["caption"].as_str())
            .unwrap_or_default();
        let shown = visible_text(text).chars().count();
        let max = if c.method == "sendphoto" {
            MAX_CAPTION
        } else {
            MAX_TEXT
        };
        assert!(shown <= max, "{}: {shown} > {max}", c.method);
        let rows = c.body["reply_markup"]["inline_keyboard"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let buttons: Vec<&Value> = rows.iter().flat_map(|r| r.as_array().unwrap()).collect();
        assert!(buttons.len() <= 100);
        for b in buttons {
            let data = b["callback_data"].as_str().unwrap();
            assert!(data.len() <= MAX_CALLBACK_DATA);
            assert!(read_event(data).is_some(), "{data}");
        }
    }
}

#[tokio::test]
async fn golden_every_block_type() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let ids = outbox
        .post_message(
            &thread(),
            &golden_message(),
            &Delivery::new("deliver:c:am1:0"),
        )
        .await
        .unwrap();
    let calls = fake.all_calls();
    assert_within_limits(&calls);
    let sent = sends(&calls);
    assert_eq!(sent.len(), calls.len(), "only sends");
    assert_eq!(ids, sent.iter().map(|c| posted_id(c)).collect::<Vec<_>>());
    let bodies: Vec<Value> = sent
        .iter()
        .map(|c| json!({"method": c.method, "body": c.body}))
        .collect();
    let got = serde_json::to_string_pretty(&bodies).unwrap() + "\n";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/blocks.json");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, &got).unwrap();
    }
    let want = std::fs::read_to_string(path).expect("the golden file (UPDATE_GOLDEN=1 writes it)");
    assert_eq!(got, want, "golden differs (UPDATE_GOLDEN=1 rewrites it)");

    // What it looks like: the text (title, table, progress) then the photo, then the rest with
    // the fields block's buttons.
    assert_eq!(sent.len(), 3);
    let first = fake.sent(message_number(&ids[0]));
    let text = first["text"].as_str().unwrap();
    assert!(
        text.starts_with("Nightly build\n\nThe nightly build finished"),
        "{text}"
    );
    assert!(text.contains("test <unit> │ failed │ 7.5"), "{text}");
    assert!(text.contains("▓▓▓▓▓▓▓▓▓▓▓▓░░░░ 75%"), "{text}");
    let photo = fake.sent(message_number(&ids[1]));
    assert_eq!(photo["caption"], "Build times <last week>");
    assert!(photo["photo"].is_array());
    let last = fake.sent(message_number(&ids[2]));
    let text = last["text"].as_str().unwrap();
    assert!(text.contains("println!(\"<frog> & toad\");"), "{text}");
    assert!(text.contains("Branch: main\nCommit: c01f247"), "{text}");
    assert!(text.contains("Dashboard"), "{text}");
    assert!(text.ends_with(UNKNOWN_BLOCK_TEXT), "{text}");
    assert_eq!(
        last["reply_markup"]["inline_keyboard"],
        json!([[{"text": "Retry", "callback_data": "e4:0"}, {"text": "Show logs", "callback_data": "e4:1"}]])
    );
    // Only the first piece notifies.
    assert!(sent[0].body.get("disable_notification").is_none());
    assert!(
        sent[1..]
            .iter()
            .all(|c| c.body["disable_notification"] == true)
    );
}

#[tokio::test]
async fn big_blocks_stay_within_telegrams_limits() {
    let long = "x".repeat(2000);
    let rows: Vec<Value> = (0..100)
        .map(|i| json!([format!("row {i}"), long, "<&>"]))
        .collect();
    let events: Vec<Value> = (0..5)
        .map(|i| json!({"label": format!("Button {i} {}", &long[..1990])}))
        .collect();
    let fields: Vec<Value> = (0..50)
        .map(|i| json!({"key": format!("k{i}{}", &long[..1990]), "value": long}))
        .collect();
    let code: String = (0..3000)
        .map(|i| format!("let x{i} = \"<{i}>\"; // & more\n"))
        .collect();
    let mut blocks = vec![
        json!({"type": "table", "id": "b0", "columns": ["Name", "Long", "Escaped"], "rows": rows, "events": events}),
        json!({"type": "fields", "id": "b1", "fields": fields, "events": events}),
        json!({"type": "code", "id": "b2", "code": code, "language": "rust", "events": events}),
        json!({"type": "image", "id": "b3", "url": "https://example.com/a.png", "alt": long, "events": events}),
    ];
    for i in blocks.len()..20 {
        blocks.push(json!({"type": "progress", "id": format!("b{i}"), "value": i, "max": 20, "label": long, "events": events}));
    }
    let text = "Some **words** & <toads>. ".repeat(400);
    let m = message(Some(&long), &text, Value::Array(blocks));
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let ids = outbox
        .post_message(&thread(), &m, &Delivery::new("deliver:c:big:0"))
        .await
        .unwrap();
    let calls = fake.all_calls();
    assert_within_limits(&calls);
    assert_eq!(ids.len(), sends(&calls).len());
    // Every block's five buttons are on some message, each once: 100 in all.
    let tokens: Vec<EventControl> = calls
        .iter()
        .flat_map(|c| {
            c.body["reply_markup"]["inline_keyboard"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .flat_map(|r| r.as_array().cloned().unwrap())
        .map(|b| read_event(b["callback_data"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(tokens.len(), 100);
    for block in 0..20 {
        for button in 0..5 {
            assert!(tokens.contains(&EventControl::new(block, button)));
        }
    }
    // Every code line and every table row was drawn (none lost to the splitting).
    let shown: String = calls
        .iter()
        .filter_map(|c| c.result.as_ref()?["text"].as_str().map(str::to_owned))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        shown.lines().filter(|l| l.starts_with("let x")).count(),
        3000
    );
    assert_eq!(shown.lines().filter(|l| l.starts_with("row ")).count(), 100);
    assert_eq!(fake.calls("sendphoto").len(), 1);
}

fn transient_attempt(key: &str) -> Delivery {
    Delivery {
        key: key.into(),
        attempt: 1,
        quiet: false,
    }
}

#[tokio::test]
async fn a_retry_posts_only_what_is_missing_and_a_lost_answer_at_least_once() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let m = golden_message();
    // The photo (the second piece) fails with a 500: nothing done.
    fake.inject_faults(
        Arc::new(FaultPlan::new(1, 1.0).only(&[Fault::ServerError])),
        &["sendphoto"],
    );
    let key = "deliver:c:am1:0";
    let e = outbox
        .post_message(&thread(), &m, &Delivery::new(key))
        .await
        .expect_err("the photo fails");
    assert!(frogbot_model::Transient::find(&*e).is_some(), "{e}");
    fake.inject_faults(Arc::new(FaultPlan::none()), &[]);
    let ids = outbox
        .post_message(&thread(), &m, &transient_attempt(key))
        .await
        .unwrap();
    let sent = fake.calls("sendmessage");
    assert_eq!(sent.len(), 2, "the first piece was not posted again");
    assert_eq!(fake.bot_messages(CHAT).len(), 3);
    assert_eq!(ids.len(), 3);
    // Posting the same delivery again posts nothing and gives the same ids.
    let again = outbox
        .post_message(&thread(), &m, &transient_attempt(key))
        .await
        .unwrap();
    assert_eq!(again, ids);
    assert_eq!(fake.bot_messages(CHAT).len(), 3);

    // A reset after Telegram posted the photo: the answer is lost, so the retry posts it again
    // (Telegram has no idempotency key: at least once), and nothing else twice.
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    fake.inject_faults(
        Arc::new(FaultPlan::new(1, 1.0).only(&[Fault::ResetAfterProcessing])),
        &["sendphoto"],
    );
    outbox
        .post_message(&thread(), &m, &Delivery::new(key))
        .await
        .expect_err("the answer is lost");
    fake.inject_faults(Arc::new(FaultPlan::none()), &[]);
    let ids = outbox
        .post_message(&thread(), &m, &transient_attempt(key))
        .await
        .unwrap();
    assert_eq!(fake.calls("sendmessage").len(), 2);
    assert_eq!(fake.calls("sendphoto").len(), 2);
    assert_eq!(fake.bot_messages(CHAT).len(), 4, "the photo twice");
    assert_eq!(ids.len(), 3);
}

fn edits(calls: &[Call]) -> usize {
    calls
        .iter()
        .filter(|c| c.method.starts_with("edit"))
        .count()
}

#[tokio::test]
async fn an_edit_redraws_each_message_in_place_without_a_new_one() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let posted = outbox
        .post_message(&thread(), &golden_message(), &Delivery::new("d:1"))
        .await
        .unwrap();
    let before = fake.all_calls().len();
    let mut blocks = every_type();
    blocks[1]["value"] = json!(4);
    blocks[2]["url"] = json!("https://example.com/chart-2.png");
    let edited = message(Some("Nightly build"), "The build **passed**.", blocks);
    let ids = outbox
        .edit_posted(&thread(), &posted, &edited)
        .await
        .unwrap();
    assert_eq!(ids, posted);
    let calls = fake.all_calls()[before..].to_vec();
    assert_eq!(
        edits(&calls),
        posted.len(),
        "one edit per message: {calls:?}"
    );
    assert_eq!(
        calls.len(),
        posted.len(),
        "nothing else (no new message): {calls:?}"
    );
    // The first two changed; the last did not ("message is not modified", which is no failure).
    assert!(calls[0].result.is_some() && calls[1].result.is_some());
    assert_eq!(calls[0].method, "editmessagetext");
    assert_eq!(calls[1].method, "editmessagemedia");
    let first = fake.sent(message_number(&ids[0]));
    assert!(
        first["text"]
            .as_str()
            .unwrap()
            .contains("The build passed.")
    );
    assert!(first["text"].as_str().unwrap().contains("100%"));
    assert!(
        fake.sent(message_number(&ids[1]))["photo"][0]["file_id"]
            .as_str()
            .unwrap()
            .contains("chart-2.png")
    );
    // The buttons stay.
    assert!(fake.sent(message_number(&ids[2]))["reply_markup"].is_object());
    // Drawing the same again changes nothing and fails nothing ("message is not modified").
    let again = outbox.edit_posted(&thread(), &ids, &edited).await.unwrap();
    assert_eq!(again, ids);
    assert_eq!(fake.bot_messages(CHAT).len(), 3);
}

#[tokio::test]
async fn a_longer_edit_posts_the_extra_piece_and_a_shorter_one_deletes_the_surplus() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let short = message(None, "Starting.", json!([]));
    let posted = outbox
        .post_message(&thread(), &short, &Delivery::new("d:2"))
        .await
        .unwrap();
    assert_eq!(posted.len(), 1);
    let before = fake.all_calls().len();
    let long = message(None, "Started.", every_type());
    let ids = outbox.edit_posted(&thread(), &posted, &long).await.unwrap();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0], posted[0]);
    let calls = fake.all_calls()[before..].to_vec();
    assert_eq!(edits(&calls), 1);
    let new: Vec<&Call> = sends(&calls);
    assert_eq!(new.len(), 2);
    assert!(
        new.iter().all(|c| c.body["disable_notification"] == true),
        "silent"
    );
    assert_eq!(fake.bot_messages(CHAT).len(), 3);

    // Shorter again: the photo and the last message go.
    let before = fake.all_calls().len();
    let ids2 = outbox.edit_posted(&thread(), &ids, &short).await.unwrap();
    assert_eq!(ids2, vec![ids[0].clone()]);
    let calls = fake.all_calls()[before..].to_vec();
    assert_eq!(
        calls.iter().filter(|c| c.method == "deletemessage").count(),
        2
    );
    assert!(sends(&calls).is_empty());
    assert_eq!(fake.bot_messages(CHAT), vec![message_number(&ids[0])]);
    assert_eq!(fake.sent(message_number(&ids[0]))["text"], "Starting.");
}

#[tokio::test]
async fn a_photo_that_becomes_text_is_sent_anew_in_its_place() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let with_image = message(
        None,
        "Chart:",
        json!([{"type": "image", "url": "https://example.com/a.png", "alt": "a"}]),
    );
    let posted = outbox
        .post_message(&thread(), &with_image, &Delivery::new("d:3"))
        .await
        .unwrap();
    assert_eq!(posted.len(), 2);
    let with_code = message(None, "Chart:", json!([{"type": "code", "code": "1 2 3"}]));
    // Code joins the text message: one piece; the photo goes.
    let ids = outbox
        .edit_posted(&thread(), &posted, &with_code)
        .await
        .unwrap();
    assert_eq!(ids, vec![posted[0].clone()]);
    assert!(fake.message(message_number(&posted[1])).is_none());
    // A text piece drawn where a photo was: Telegram cannot take media off a message, so the
    // photo is deleted and the text sent silently in its place.
    let two = message(
        None,
        "A",
        json!([{"type": "image", "url": "https://example.com/b.png", "alt": "b"},
               {"type": "code", "code": "x"}]),
    );
    let ids = outbox.edit_posted(&thread(), &ids, &two).await.unwrap();
    assert_eq!(ids.len(), 3);
    let before = fake.all_calls().len();
    let swapped = message(
        None,
        "A",
        json!([{"type": "code", "code": "x"},
               {"type": "image", "url": "https://example.com/b.png", "alt": "b"}]),
    );
    let ids2 = outbox.edit_posted(&thread(), &ids, &swapped).await.unwrap();
    let calls = fake.all_calls()[before..].to_vec();
    let methods: Vec<&str> = calls.iter().map(|c| c.method.as_str()).collect();
    assert!(methods.contains(&"editmessagemedia"), "{methods:?}");
    assert!(methods.contains(&"deletemessage"), "{methods:?}");
    assert_eq!(ids2.len(), 2);
    assert_eq!(fake.bot_messages(CHAT).len(), 2);
}

#[tokio::test]
async fn delete_removes_every_piece_and_a_gone_one_is_ok() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let posted = outbox
        .post_message(&thread(), &golden_message(), &Delivery::new("d:4"))
        .await
        .unwrap();
    assert_eq!(fake.bot_messages(CHAT).len(), 3);
    outbox.delete_posted(&thread(), &posted).await.unwrap();
    assert!(fake.bot_messages(CHAT).is_empty());
    assert_eq!(fake.calls("deletemessage").len(), 3);
    // Again: every one is gone already ("message to delete not found"), which is no failure.
    outbox.delete_posted(&thread(), &posted).await.unwrap();
    assert_eq!(fake.all_calls().last().unwrap().result, None);
}

#[tokio::test]
async fn pin_and_unpin_quietly() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let posted = outbox
        .post_message(&thread(), &golden_message(), &Delivery::new("d:5"))
        .await
        .unwrap();
    outbox
        .pin_posted(thread().message(&posted[0]), true)
        .await
        .unwrap();
    assert_eq!(fake.pinned(CHAT), vec![message_number(&posted[0])]);
    let pins = fake.calls("pinchatmessage");
    assert_eq!(pins[0]["disable_notification"], true);
    // Already pinned: no failure.
    outbox
        .pin_posted(thread().message(&posted[0]), true)
        .await
        .unwrap();
    outbox
        .pin_posted(thread().message(&posted[0]), false)
        .await
        .unwrap();
    assert!(fake.pinned(CHAT).is_empty());
    assert_eq!(fake.calls("unpinchatmessage").len(), 1);
    assert!(
        outbox
            .pin_posted(thread().message("nope"), true)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn an_unknown_block_shows_the_placeholder() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let m = message(
        None,
        "",
        json!([{"type": "hologram", "id": "h", "depth": 3}]),
    );
    let ids = outbox
        .post_message(&thread(), &m, &Delivery::new("d:6"))
        .await
        .unwrap();
    assert_eq!(ids.len(), 1);
    assert_eq!(
        fake.sent(message_number(&ids[0]))["text"],
        UNKNOWN_BLOCK_TEXT
    );
    // An empty message posts nothing.
    let ids = outbox
        .post_message(
            &thread(),
            &message(None, " ", json!([])),
            &Delivery::new("d:7"),
        )
        .await
        .unwrap();
    assert!(ids.is_empty());
}
