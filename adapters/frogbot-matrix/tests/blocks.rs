//! Agent messages on Matrix against the fake homeserver: a title, Markdown text and blocks drawn
//! as `m.text` (HTML `formatted_body` with `<table>`, `<pre><code>`, `<strong>`) and `m.image`
//! (uploaded to the media repository), event buttons as the bot's reactions, edits as
//! `m.replace`, deletions as redactions, pins in `m.room.pinned_events`. The events of one
//! message holding a block of every type are compared with `tests/golden/blocks.json`
//! (`UPDATE_GOLDEN=1` rewrites it).

#![recursion_limit = "256"]

use std::sync::Arc;

use frogbot_core::agent::{ChannelOutbox, Delivery};
use frogbot_matrix::channel::MatrixOutbox;
use frogbot_matrix::client::image_policy;
use frogbot_matrix::convert::{Incoming, classify};
use frogbot_matrix::format::MAX_TEXT_BYTES;
use frogbot_matrix::ids::read_event;
use frogbot_matrix::testing::{FakeHomeserver, MAX_EVENT_BYTES};
use frogbot_model::blocks::{Block, UNKNOWN_BLOCK_TEXT};
use frogbot_model::faults::{Fault, FaultPlan};
use frogbot_model::{Thread, UiMessage};
use frogbot_net::FetchPolicy;
use matrix_sdk::Client;
use matrix_sdk::ruma::events::AnySyncTimelineEvent;
use matrix_sdk::ruma::serde::Raw;
use matrix_sdk::ruma::{OwnedRoomId, OwnedUserId};
use serde_json::{Value, json};

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

fn every_type(image: &str) -> Value {
    json!([
        {"type": "table", "id": "jobs", "columns": ["Job", "State", "Time"],
         "rows": [["build", "ok", 42], ["test <unit>", "failed", 7.5], ["deploy"]]},
        {"type": "progress", "id": "deploy", "value": 3, "max": 4, "label": "Deploying & checking"},
        {"type": "image", "id": "chart", "url": image, "alt": "Build times <last week>"},
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

struct Env {
    fake: FakeHomeserver,
    room: OwnedRoomId,
    alice: OwnedUserId,
    outbox: MatrixOutbox<Client>,
    thread: Thread,
}

async fn env() -> Env {
    env_with(true).await
}

/// The environment; its test image host is on loopback: `private_images` lets the outbox
/// fetch from it.
async fn env_with(private_images: bool) -> Env {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeHomeserver::start().await;
    let alice = OwnedUserId::try_from("@alice:fake.test").unwrap();
    let room = fake.create_room(&[&alice]);
    let root = fake.inject(
        &room,
        &alice,
        "m.room.message",
        json!({"msgtype": "m.text", "body": "status please"}),
    );
    let outbox = MatrixOutbox::new(fake.client().await).with_image_policy(FetchPolicy {
        allow_private: private_images,
        ..image_policy()
    });
    let thread = Thread {
        id: format!("{room}|{root}"),
        platform: "matrix".into(),
        chat_id: "chat-1".into(),
    };
    Env {
        fake,
        room,
        alice,
        outbox,
        thread,
    }
}

impl Env {
    fn golden(&self) -> UiMessage {
        message(
            Some("Nightly build"),
            "The **nightly** build finished: see below.",
            every_type(&self.fake.image_url("chart.png")),
        )
    }

    /// The bot's events (type and content), leaving out the ones before `from`.
    fn sent_since(&self, from: usize) -> Vec<Value> {
        self.fake.sent()[from..].to_vec()
    }

    fn event(&self, id: &str) -> Value {
        let (_, e) = id.split_once('|').unwrap();
        self.fake.event(e).expect("the event")
    }
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_every_block_type() {
    let env = env().await;
    let ids = env
        .outbox
        .post_message(
            &env.thread,
            &env.golden(),
            &Delivery::new("deliver:c:am1:0"),
        )
        .await
        .unwrap();
    let sent = env.fake.sent();
    let bodies: Vec<Value> = sent
        .iter()
        .map(|e| json!({"type": e["type"], "content": e["content"]}))
        .collect();
    let got =
        serde_json::to_string_pretty(&json!({"events": bodies, "uploads": env.fake.uploads()}))
            .unwrap()
            + "\n";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/blocks.json");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, &got).unwrap();
    }
    let want = std::fs::read_to_string(path).expect("the golden file (UPDATE_GOLDEN=1 writes it)");
    assert_eq!(got, want, "golden differs (UPDATE_GOLDEN=1 rewrites it)");

    // Text (title, table, progress), the image, the rest with two reactions for the buttons.
    assert_eq!(ids.len(), 3);
    let first = env.event(&ids[0]);
    let html = first["content"]["formatted_body"].as_str().unwrap();
    assert!(
        html.starts_with("<p><strong>Nightly build</strong></p>"),
        "{html}"
    );
    assert!(
        html.contains("<th>Job</th>") && html.contains("<td>test &lt;unit&gt;</td>"),
        "{html}"
    );
    assert!(first["content"]["body"].as_str().unwrap().contains("75%"));
    let image = env.event(&ids[1]);
    assert_eq!(image["content"]["msgtype"], "m.image");
    assert_eq!(image["content"]["body"], "Build times <last week>");
    assert!(
        image["content"]["url"]
            .as_str()
            .unwrap()
            .starts_with("mxc://")
    );
    assert_eq!(image["content"]["info"]["mimetype"], "image/png");
    assert_eq!(env.fake.uploads().len(), 1);
    let last = env.event(&ids[2]);
    let html = last["content"]["formatted_body"].as_str().unwrap();
    assert!(
        html.contains("<pre><code class=\"language-rust\">"),
        "{html}"
    );
    assert!(html.contains("<strong>Branch:</strong> main"), "{html}");
    assert!(
        last["content"]["body"]
            .as_str()
            .unwrap()
            .ends_with(UNKNOWN_BLOCK_TEXT)
    );
    let reactions = of_type(&sent, "m.reaction");
    let keys: Vec<&str> = reactions
        .iter()
        .map(|r| r["content"]["m.relates_to"]["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["Retry #4.0", "Show logs #4.1"]);
    assert!(
        reactions
            .iter()
            .all(|r| r["content"]["m.relates_to"]["event_id"] == ids[2].split_once('|').unwrap().1)
    );
    // Every piece is in the thread.
    for id in &ids {
        assert_eq!(
            env.event(id)["content"]["m.relates_to"]["rel_type"],
            "m.thread"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_blocks_stay_within_the_event_limit() {
    let env = env().await;
    let long = "x".repeat(2000);
    let rows: Vec<Value> = (0..100)
        .map(|i| json!([format!("row {i}"), long, "<&>", long, long]))
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
        json!({"type": "table", "id": "b0", "columns": ["Name", "A", "Escaped", "B", "C"], "rows": rows, "events": events}),
        json!({"type": "fields", "id": "b1", "fields": fields, "events": events}),
        json!({"type": "code", "id": "b2", "code": code, "language": "rust", "events": events}),
        json!({"type": "image", "id": "b3", "url": env.fake.image_url("a.png"), "alt": long, "events": events}),
    ];
    for i in blocks.len()..20 {
        blocks.push(json!({"type": "progress", "id": format!("b{i}"), "value": i, "max": 20, "label": long, "events": events}));
    }
    let m = message(
        Some(&long),
        &"Some **words** & <toads>. ".repeat(2000),
        Value::Array(blocks),
    );
    let ids = env
        .outbox
        .post_message(&env.thread, &m, &Delivery::new("deliver:c:big:0"))
        .await
        .unwrap();
    let sent = env.fake.sent();
    for e in &sent {
        assert!(serde_json::to_vec(e).unwrap().len() <= MAX_EVENT_BYTES);
        let c = &e["content"];
        if let Some(body) = c["body"].as_str() {
            let html = c["formatted_body"].as_str().unwrap_or("");
            let bytes = serde_json::to_string(body).unwrap().len()
                + serde_json::to_string(html).unwrap().len();
            assert!(bytes <= MAX_TEXT_BYTES + 200, "{bytes}");
        }
    }
    let messages = of_type(&sent, "m.room.message");
    assert_eq!(messages.len(), ids.len());
    // All 100 buttons are reactions, each key once.
    let keys: Vec<(usize, usize)> = of_type(&sent, "m.reaction")
        .iter()
        .map(|r| read_event(r["content"]["m.relates_to"]["key"].as_str().unwrap()).unwrap())
        .map(|c| (c.block, c.button))
        .collect();
    assert_eq!(keys.len(), 100);
    for block in 0..20 {
        for button in 0..5 {
            assert!(keys.contains(&(block, button)));
        }
    }
    let bodies: String = messages
        .iter()
        .filter_map(|e| e["content"]["body"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        bodies.lines().filter(|l| l.starts_with("let x")).count(),
        3000
    );
    assert_eq!(
        bodies.lines().filter(|l| l.starts_with("row ")).count(),
        100
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_posts_nothing_twice() {
    let env = env().await;
    let m = env.golden();
    let key = "deliver:c:am1:0";
    // The first send is carried out, then its answer is lost.
    env.fake.inject_faults(Arc::new(
        FaultPlan::new(1, 1.0).only(&[Fault::ResetAfterProcessing]),
    ));
    env.outbox
        .post_message(&env.thread, &m, &Delivery::new(key))
        .await
        .expect_err("the answer is lost");
    env.fake.inject_faults(Arc::new(FaultPlan::none()));
    let retry = Delivery {
        key: key.into(),
        attempt: 1,
        quiet: false,
    };
    let ids = env
        .outbox
        .post_message(&env.thread, &m, &retry)
        .await
        .unwrap();
    let sent = env.fake.sent();
    assert_eq!(of_type(&sent, "m.room.message").len(), 3, "{sent:#?}");
    assert_eq!(of_type(&sent, "m.reaction").len(), 2);
    // Again: the same events, nothing new.
    let again = env
        .outbox
        .post_message(&env.thread, &m, &retry)
        .await
        .unwrap();
    assert_eq!(again, ids);
    assert_eq!(env.fake.sent().len(), sent.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_replaces_each_message_in_place() {
    let env = env().await;
    let posted = env
        .outbox
        .post_message(&env.thread, &env.golden(), &Delivery::new("d:1"))
        .await
        .unwrap();
    let from = env.fake.sent().len();
    let mut blocks = every_type(&env.fake.image_url("chart-2.png"));
    blocks[1]["value"] = json!(4);
    let edited = message(Some("Nightly build"), "The build **passed**.", blocks);
    let ids = env
        .outbox
        .edit_posted(&env.thread, &posted, &edited)
        .await
        .unwrap();
    assert_eq!(ids, posted);
    let sent = env.sent_since(from);
    assert_eq!(
        sent.len(),
        posted.len(),
        "one edit per message, nothing else: {sent:#?}"
    );
    for (e, id) in sent.iter().zip(&posted) {
        assert_eq!(e["type"], "m.room.message");
        assert_eq!(e["content"]["m.relates_to"]["rel_type"], "m.replace");
        assert_eq!(
            e["content"]["m.relates_to"]["event_id"],
            id.split_once('|').unwrap().1
        );
    }
    let new = &sent[0]["content"]["m.new_content"];
    assert!(
        new["body"]
            .as_str()
            .unwrap()
            .contains("The build **passed**.")
    );
    assert!(new["formatted_body"].as_str().unwrap().contains("100%"));
    assert!(new.get("m.relates_to").is_none());
    assert_eq!(sent[1]["content"]["m.new_content"]["msgtype"], "m.image");

    // Other buttons: the old reactions go, the new come.
    let mut blocks = every_type(&env.fake.image_url("chart-2.png"));
    blocks[4]["events"] = json!([{"label": "Retry"}, {"label": "Cancel"}]);
    let from = env.fake.sent().len();
    env.outbox
        .edit_posted(&env.thread, &posted, &message(None, "x", blocks))
        .await
        .unwrap();
    let sent = env.sent_since(from);
    let redactions = of_type(&sent, "m.room.redaction");
    assert_eq!(redactions.len(), 1, "{sent:#?}");
    let added: Vec<&str> = of_type(&sent, "m.reaction")
        .iter()
        .map(|r| r["content"]["m.relates_to"]["key"].as_str().unwrap())
        .collect();
    assert_eq!(added, ["Cancel #4.1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_longer_edit_posts_more_and_a_shorter_one_redacts_the_surplus() {
    let env = env().await;
    let short = message(None, "Starting.", json!([]));
    let posted = env
        .outbox
        .post_message(&env.thread, &short, &Delivery::new("d:2"))
        .await
        .unwrap();
    assert_eq!(posted.len(), 1);
    let long = message(None, "Started.", every_type(&env.fake.image_url("a.png")));
    let ids = env
        .outbox
        .edit_posted(&env.thread, &posted, &long)
        .await
        .unwrap();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0], posted[0]);
    for id in &ids[1..] {
        assert_eq!(
            env.event(id)["content"]["m.relates_to"]["rel_type"],
            "m.thread"
        );
    }
    let back = env
        .outbox
        .edit_posted(&env.thread, &ids, &short)
        .await
        .unwrap();
    assert_eq!(back, posted);
    for id in &ids[1..] {
        assert!(env.fake.redacted(id.split_once('|').unwrap().1), "{id}");
    }
    assert!(!env.fake.redacted(posted[0].split_once('|').unwrap().1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_redacts_and_pins_are_read_modify_write() {
    let env = env().await;
    let posted = env
        .outbox
        .post_message(&env.thread, &env.golden(), &Delivery::new("d:3"))
        .await
        .unwrap();
    let event = |id: &String| id.split_once('|').unwrap().1.to_owned();
    env.outbox
        .pin_posted(env.thread.message(&posted[0]), true)
        .await
        .unwrap();
    env.outbox
        .pin_posted(env.thread.message(&posted[2]), true)
        .await
        .unwrap();
    assert_eq!(
        env.fake.pinned(&env.room),
        [event(&posted[0]), event(&posted[2])]
    );
    // Already pinned: nothing written.
    let states = |env: &Env| {
        env.fake
            .events(&env.room)
            .iter()
            .filter(|e| e["type"] == "m.room.pinned_events")
            .count()
    };
    let before = states(&env);
    env.outbox
        .pin_posted(env.thread.message(&posted[0]), true)
        .await
        .unwrap();
    assert_eq!(states(&env), before);
    env.outbox
        .pin_posted(env.thread.message(&posted[0]), false)
        .await
        .unwrap();
    assert_eq!(env.fake.pinned(&env.room), [event(&posted[2])]);

    env.outbox
        .delete_posted(&env.thread, &posted)
        .await
        .unwrap();
    for id in &posted {
        assert!(env.fake.redacted(&event(id)));
    }
    // Gone already: no failure.
    env.outbox
        .delete_posted(&env.thread, &posted)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_blocks_show_the_placeholder_and_a_bad_image_a_link() {
    let env = env().await;
    let m = message(
        None,
        "",
        json!([{"type": "hologram", "depth": 3},
               {"type": "image", "url": env.fake.image_url("page.html"), "alt": "chart"},
               {"type": "image", "url": env.fake.image_url("huge.png"), "alt": ""},
               {"type": "image", "url": env.fake.image_url("missing"), "alt": "gone"}]),
    );
    let ids = env
        .outbox
        .post_message(&env.thread, &m, &Delivery::new("d:4"))
        .await
        .unwrap();
    assert_eq!(ids.len(), 4);
    assert_eq!(env.event(&ids[0])["content"]["body"], UNKNOWN_BLOCK_TEXT);
    for id in &ids[1..] {
        let c = &env.event(id)["content"];
        assert_eq!(c["msgtype"], "m.text");
        assert!(
            c["body"]
                .as_str()
                .unwrap()
                .contains("could not be shown here"),
            "{c}"
        );
        assert!(
            c["formatted_body"]
                .as_str()
                .unwrap()
                .contains("<a href=\"http"),
            "{c}"
        );
    }
    assert!(env.fake.uploads().is_empty());
    // Nothing to draw: nothing posted.
    let ids = env
        .outbox
        .post_message(
            &env.thread,
            &message(None, " ", json!([])),
            &Delivery::new("d:5"),
        )
        .await
        .unwrap();
    assert!(ids.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_reaction_with_a_button_key_is_an_event_click() {
    let env = env().await;
    let posted = env
        .outbox
        .post_message(&env.thread, &env.golden(), &Delivery::new("d:6"))
        .await
        .unwrap();
    let target = posted[2].split_once('|').unwrap().1;
    let convert = |key: &str| {
        let id = env.fake.inject(
            &env.room,
            &env.alice,
            "m.reaction",
            json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": target, "key": key}}),
        );
        let event = env.fake.event(id.as_str()).unwrap();
        let raw: Raw<AnySyncTimelineEvent> =
            Raw::from_json(serde_json::value::to_raw_value(&event).unwrap());
        classify(&raw, &env.room, env.fake.bot()).unwrap()
    };
    let Some(Incoming::Event(click)) = convert("Show logs #4.1") else {
        panic!("an event click");
    };
    assert_eq!(click.message_id, posted[2]);
    assert_eq!((click.block, click.button), (4, 1));
    assert_eq!(click.user.id, "@alice:fake.test");
    // Any other reaction stays a question's action.
    assert!(matches!(convert("👍"), Some(Incoming::Action(_))));
    assert!(matches!(
        convert("1\u{fe0f}\u{20e3}"),
        Some(Incoming::Action(_))
    ));
}

/// A local server counting its requests, answering every path with a small PNG.
async fn secret_server() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = axum::Router::new().fallback(move || {
        let hits = counted.clone();
        async move {
            hits.fetch_add(1, Ordering::SeqCst);
            (
                [("content-type", "image/png")],
                b"\x89PNG\r\n\x1a\nsecret".to_vec(),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, hits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_on_a_private_address_is_not_fetched_but_the_message_is_delivered() {
    use std::sync::atomic::Ordering;
    // The outbox as `frogbot serve` makes it: public addresses only.
    let env = env_with(false).await;
    let (port, hits) = secret_server().await;
    let m = message(
        Some("Report"),
        "Here is the chart.",
        json!([{"type": "image", "url": format!("http://127.0.0.1:{port}/secret"), "alt": "chart"},
               {"type": "image", "url": format!("http://localhost:{port}/secret"), "alt": ""},
               {"type": "image", "url": format!("http://[::ffff:127.0.0.1]:{port}/secret"), "alt": "v6"}]),
    );
    let ids = env
        .outbox
        .post_message(&env.thread, &m, &Delivery::new("d:private"))
        .await
        .unwrap();
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the private server was fetched"
    );
    assert!(env.fake.uploads().is_empty(), "{:?}", env.fake.uploads());
    // The text, and each image as a link.
    assert_eq!(ids.len(), 4, "{ids:?}");
    assert!(
        env.event(&ids[0])["content"]["body"]
            .as_str()
            .unwrap()
            .contains("Here is the chart."),
    );
    for id in &ids[1..] {
        let c = &env.event(id)["content"];
        assert_eq!(c["msgtype"], "m.text", "{c}");
        assert!(
            c["body"]
                .as_str()
                .unwrap()
                .contains("could not be shown here"),
            "{c}"
        );
        assert!(c["body"].as_str().unwrap().contains("/secret"), "{c}");
    }
    assert!(
        env.fake
            .sent()
            .iter()
            .all(|e| e["content"]["msgtype"] != "m.image"),
        "an m.image was sent"
    );
    // The same server is fetched when private addresses are allowed (the test's own check).
    let env = env_with(true).await;
    env.outbox
        .post_message(&env.thread, &m, &Delivery::new("d:allowed"))
        .await
        .unwrap();
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    assert_eq!(env.fake.uploads().len(), 3);
}
