//! Agent messages beyond text (issue 20) on the fake Discord: every block type drawn as content,
//! embeds and action rows within Discord's limits (golden request bodies in
//! `tests/golden/blocks.json`; `UPDATE_GOLDEN=1` rewrites it), big blocks kept within the
//! limits, `post_message` idempotent on its nonces, edits in place (`PATCH`), deletions
//! (`DELETE`), pins (`PUT` / `DELETE /channels/{c}/pins/{m}`) and the event buttons' clicks.

use std::sync::Arc;
use std::time::Duration;

use frogbot_core::agent::{ChannelOutbox, Delivery};
use frogbot_discord::testing::{self as fake, FakeDiscord};
use frogbot_model::blocks::{Block, UNKNOWN_BLOCK_TEXT};
use frogbot_model::faults::{Fault, FaultPlan};
use frogbot_model::{Thread, UiMessage};
use serde_json::{Value, json};

const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;

/// An agent message: a title, Markdown text and `blocks` (as agents write them).
fn agent_message(title: Option<&str>, text: &str, blocks: Value) -> UiMessage {
    let mut parts = vec![json!({"type": "text", "text": text})];
    parts.extend(
        Block::list_from_json(&blocks)
            .expect("valid blocks")
            .iter()
            .map(|b| serde_json::to_value(b.to_part()).unwrap()),
    );
    let mut m = json!({"id": "m1", "role": "assistant", "parts": parts});
    if let Some(t) = title {
        m["metadata"] = json!({"title": t});
    }
    serde_json::from_value(m).expect("a message")
}

/// The fixed message of the golden file: a title, text and one block of every type.
fn every_type() -> UiMessage {
    agent_message(
        Some("Nightly deploy"),
        "The **deploy** finished: 3 of 4 jobs ok, @everyone.",
        json!([
            {"type": "table", "id": "jobs", "columns": ["Job", "State", "Time"],
             "rows": [["build", "ok", "3m"], ["test", "ok"], ["deploy", "retried", 42]]},
            {"type": "progress", "value": 3, "max": 4, "label": "Rollout"},
            {"type": "image", "url": "https://example.com/chart.png", "alt": "Latency chart"},
            {"type": "code", "code": "fn main() {\n    println!(\"```\");\n}", "language": "rust"},
            {"type": "fields", "id": "info",
             "fields": [{"key": "Branch", "value": "main"}, {"key": "Commit", "value": "c01f247"}],
             "events": [{"label": "Retry", "value": "retry"}, {"label": "Show logs"}]},
            {"type": "html", "html": "<!doctype html><p>hi</p>", "title": "Dashboard"},
            // With the server's public_url: a link to the app's web view.
            {"type": "html", "html": "<p>chart</p>", "title": "Chart", "link": "0123456789abcdef0123456789abcdef",
             "url": "https://bot.example.com/apps/chat-golden/m1/0123456789abcdef0123456789abcdef"},
            {"type": "sparkline", "id": "spark", "points": [1, 2, 3]}
        ]),
    )
}

async fn outbox(fake: &FakeDiscord) -> Arc<dyn ChannelOutbox> {
    let mut config = fake.config();
    config.api_timeout = Duration::from_millis(500);
    frogbot_discord::channel::connect(config)
        .await
        .expect("connect")
        .outbox()
}

fn thread(channel: u64) -> Thread {
    Thread {
        id: channel.to_string(),
        platform: frogbot_discord::PLATFORM.into(),
        chat_id: format!("chat-{channel}"),
    }
}

/// The bodies of the messages posted so far.
fn posts(fake: &FakeDiscord) -> Vec<Value> {
    fake.calls()
        .into_iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/messages"))
        .map(|c| c.body)
        .collect()
}

fn calls(fake: &FakeDiscord, method: &str, path_has: &str) -> usize {
    fake.calls()
        .iter()
        .filter(|c| c.method == method && c.path.contains(path_has))
        .count()
}

fn golden_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/blocks.json")
}

#[tokio::test]
async fn every_block_type_is_drawn_as_the_golden_request_bodies() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let outbox = outbox(&fake).await;
    let th = thread(700_000_000_000_000_001);
    let ids = outbox
        .post_message(
            &th,
            &every_type(),
            &Delivery::new("deliver:chat-golden:m1:0"),
        )
        .await
        .unwrap();
    assert_eq!(ids.len(), 1, "one Discord message holds it all");
    let bodies = posts(&fake);
    let got = serde_json::to_string_pretty(&bodies).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(golden_path(), &got).unwrap();
    }
    let want = std::fs::read_to_string(golden_path()).expect("tests/golden/blocks.json");
    assert_eq!(
        got, want,
        "the request bodies differ from tests/golden/blocks.json"
    );

    // What a person sees.
    let shown = fake.message(&ids[0]).expect("posted");
    let content = shown["content"].as_str().unwrap();
    assert!(
        content.starts_with("## Nightly deploy\nThe **deploy** finished"),
        "{content}"
    );
    assert_eq!(
        bodies[0]["allowed_mentions"]["parse"],
        json!([]),
        "nothing pings"
    );
    let embeds = shown["embeds"].as_array().unwrap();
    assert_eq!(embeds.len(), 8);
    let table = embeds[0]["description"].as_str().unwrap();
    assert!(table.starts_with("```\nJob"), "{table}");
    assert!(table.contains("deploy | retried | 42"), "{table}");
    assert_eq!(embeds[1]["title"], "Rollout");
    assert!(
        embeds[1]["description"]
            .as_str()
            .unwrap()
            .ends_with("░░░░░` 75%")
    );
    assert_eq!(embeds[2]["image"]["url"], "https://example.com/chart.png");
    assert_eq!(embeds[2]["description"], "Latency chart");
    let code = embeds[3]["description"].as_str().unwrap();
    assert!(code.starts_with("```rust\n") && code.ends_with("\n```"));
    assert_eq!(
        code.matches("```").count(),
        2,
        "the code's own fence is broken up"
    );
    assert_eq!(
        embeds[4]["fields"][1],
        json!({"name": "Commit", "value": "c01f247", "inline": true})
    );
    assert_eq!(embeds[5]["title"], "Dashboard");
    assert_eq!(embeds[5].get("url"), None);
    // With the server's public_url, the app's title links to its web view.
    assert_eq!(embeds[6]["title"], "Chart");
    assert_eq!(
        embeds[6]["url"],
        "https://bot.example.com/apps/chat-golden/m1/0123456789abcdef0123456789abcdef"
    );
    assert_eq!(embeds[7]["description"], UNKNOWN_BLOCK_TEXT);
    let rows = shown["components"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    let buttons = rows[0]["components"].as_array().unwrap();
    assert_eq!(buttons[0]["custom_id"], "fe:4:0");
    assert_eq!(buttons[1]["custom_id"], "fe:4:1");
    assert_eq!(buttons[1]["label"], "Show logs");
}

#[tokio::test]
async fn an_unknown_block_type_shows_the_placeholder() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let outbox = outbox(&fake).await;
    let th = thread(fake.new_id());
    let m = agent_message(None, "", json!([{"type": "hologram", "depth": 3}]));
    let ids = outbox
        .post_message(&th, &m, &Delivery::new("deliver:c:u:0"))
        .await
        .unwrap();
    let shown = fake.message(&ids[0]).unwrap();
    assert_eq!(shown["embeds"][0]["description"], UNKNOWN_BLOCK_TEXT);
    assert_eq!(shown["content"], "");
}

/// Every message `ids` as the fake shows it is within Discord's limits (the fake refused any
/// that was not, so this reads what it kept).
fn assert_within_limits(fake: &FakeDiscord, ids: &[String]) {
    for id in ids {
        let m = fake.message(id).expect("posted");
        assert!(m["content"].as_str().unwrap().chars().count() <= 2000);
        let embeds = m["embeds"].as_array().unwrap();
        assert!(embeds.len() <= 10);
        let n = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
        let mut total = 0;
        for e in embeds {
            assert!(n(&e["title"]) <= 256);
            assert!(n(&e["description"]) <= 4096);
            let fields = e["fields"].as_array().cloned().unwrap_or_default();
            assert!(fields.len() <= 25);
            for f in &fields {
                assert!(n(&f["name"]) <= 256 && n(&f["value"]) <= 1024);
                total += n(&f["name"]) + n(&f["value"]);
            }
            total += n(&e["title"]) + n(&e["description"]);
        }
        assert!(total <= 6000, "{id}: {total} characters of embeds");
        let rows = m["components"].as_array().unwrap();
        assert!(rows.len() <= 5);
        for r in rows {
            assert!(r["components"].as_array().unwrap().len() <= 5);
        }
    }
}

#[tokio::test]
async fn a_hundred_row_table_with_long_cells_stays_within_discords_limits() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let outbox = outbox(&fake).await;
    let th = thread(fake.new_id());
    let columns: Vec<String> = (0..20).map(|c| format!("column {c}")).collect();
    let rows: Vec<Vec<String>> = (0..100)
        .map(|r| {
            (0..20)
                .map(|c| format!("r{r}c{c} {}", "x".repeat(1990)))
                .collect()
        })
        .collect();
    let m = agent_message(
        Some(&"T".repeat(400)),
        "A big table.",
        json!([{"type": "table", "columns": columns, "rows": rows}]),
    );
    let ids = outbox
        .post_message(&th, &m, &Delivery::new("deliver:c:t:0"))
        .await
        .unwrap();
    assert_within_limits(&fake, &ids);
    // Every row shown once, in order, each code block under its header.
    let mut seen = Vec::new();
    for id in &ids {
        for e in fake.message(id).unwrap()["embeds"].as_array().unwrap() {
            let d = e["description"].as_str().unwrap();
            assert!(
                d.starts_with("```\ncolumn 0"),
                "the header in each: {d:.80}"
            );
            for line in d.lines() {
                if let Some(rest) = line.strip_prefix('r') {
                    seen.push(rest.split('c').next().unwrap().parse::<usize>().unwrap());
                }
            }
        }
    }
    assert_eq!(seen, (0..100).collect::<Vec<_>>());
    let first = fake.message(&ids[0]).unwrap();
    assert!(
        first["content"]
            .as_str()
            .unwrap()
            .starts_with(&format!("## {}…\n", "T".repeat(255)))
    );
}

#[tokio::test]
async fn twenty_big_blocks_are_packed_into_messages_within_discords_limits() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let outbox = outbox(&fake).await;
    let th = thread(fake.new_id());
    let fields: Vec<Value> = (0..50)
        .map(|i| json!({"key": format!("key {i} {}", "k".repeat(400)), "value": "v".repeat(2000)}))
        .collect();
    let mut blocks: Vec<Value> = (0..8)
        .map(|i| {
            json!({"type": "fields", "id": format!("f{i}"), "fields": fields,
                   "events": (0..5).map(|j| json!({"label": format!("{j} {}", "b".repeat(200))})).collect::<Vec<_>>()})
        })
        .collect();
    blocks.extend((0..6).map(|i| json!({"type": "code", "id": format!("c{i}"), "code": format!("line {i} ```\n").repeat(3_000),
        "events": [{"label": "Run"}]})));
    blocks.extend((0..6).map(|i| {
        json!({"type": "progress", "id": format!("p{i}"), "value": i, "max": 5,
        "events": [{"label": "Stop"}, {"label": "Faster"}]})
    }));
    let m = agent_message(Some("Big"), &"word ".repeat(2_000), json!(blocks));
    let ids = outbox
        .post_message(&th, &m, &Delivery::new("deliver:c:big:0"))
        .await
        .unwrap();
    assert!(ids.len() > 5, "{} messages", ids.len());
    assert_within_limits(&fake, &ids);
    // Every event button once, on the message holding its block's last embed.
    let mut buttons = Vec::new();
    for id in &ids {
        for row in fake.message(id).unwrap()["components"].as_array().unwrap() {
            for b in row["components"].as_array().unwrap() {
                assert!(b["label"].as_str().unwrap().chars().count() <= 80);
                buttons.push(b["custom_id"].as_str().unwrap().to_owned());
            }
        }
    }
    let mut want: Vec<String> = (0..8)
        .flat_map(|i| (0..5).map(move |j| format!("fe:{i}:{j}")))
        .collect();
    want.extend((8..14).map(|i| format!("fe:{i}:0")));
    want.extend((14..20).flat_map(|i| [format!("fe:{i}:0"), format!("fe:{i}:1")]));
    assert_eq!(buttons, want);
}

#[tokio::test]
async fn post_message_returns_the_ids_and_a_retry_after_a_lost_answer_posts_nothing_twice() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let outbox = outbox(&fake).await;
    let channel = fake.new_id();
    let th = thread(channel);
    let m = agent_message(
        Some("Rows"),
        &"long text ".repeat(300),
        json!([{"type": "code", "id": "c", "code": "ok", "events": [{"label": "Again"}]}]),
    );
    let d = Delivery::new("deliver:chat-1:m1:0");
    // Every write is carried out and its answer lost.
    fake.set_faults(FaultPlan::new(1, 1.0).only(&[Fault::ResetAfterProcessing]));
    let e = outbox.post_message(&th, &m, &d).await.unwrap_err();
    assert!(frogbot_model::Transient::find(e.as_ref()).is_some(), "{e}");
    fake.clear_faults();
    assert_eq!(fake.channel_messages(channel).len(), 1);
    let retry = Delivery {
        attempt: 1,
        ..d.clone()
    };
    let ids = outbox.post_message(&th, &m, &retry).await.unwrap();
    // The title alone, the text, the text's end with the code.
    assert_eq!(ids.len(), 3);
    assert_eq!(frogbot_discord::render::agent_message(&m).len(), 3);
    let shown: Vec<String> = fake
        .channel_messages(channel)
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(shown.len(), 3, "nothing posted twice");
    let mut sorted = ids.clone();
    sorted.sort();
    let mut shown_sorted = shown.clone();
    shown_sorted.sort();
    assert_eq!(sorted, shown_sorted);
    assert!(
        posts(&fake)
            .iter()
            .all(|b| b["enforce_nonce"] == true
                && b["nonce"].as_str().is_some_and(|n| n.len() <= 25))
    );
    // A third attempt gets the same messages back.
    let again = Delivery {
        attempt: 2,
        ..d.clone()
    };
    assert_eq!(outbox.post_message(&th, &m, &again).await.unwrap(), ids);
    assert_eq!(fake.channel_messages(channel).len(), 3);
}

#[tokio::test]
async fn an_edit_patches_each_message_in_place_posts_the_extra_and_deletes_the_surplus() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let outbox = outbox(&fake).await;
    let channel = fake.new_id();
    let th = thread(channel);
    let ids = outbox
        .post_message(
            &th,
            &agent_message(None, "v1", json!([{"type": "code", "code": "a"}])),
            &Delivery::new("deliver:c:e:0"),
        )
        .await
        .unwrap();
    assert_eq!(ids.len(), 1);
    let posted = posts(&fake).len();

    // The same size: one PATCH, nothing posted.
    let same = outbox
        .edit_posted(
            &th,
            &ids,
            &agent_message(Some("Now"), "v2", json!([{"type": "code", "code": "b"}])),
        )
        .await
        .unwrap();
    assert_eq!(same, ids);
    assert_eq!(calls(&fake, "PATCH", "/messages/"), 1);
    assert_eq!(posts(&fake).len(), posted);
    let shown = fake.message(&ids[0]).unwrap();
    assert_eq!(shown["content"], "## Now\nv2");
    assert_eq!(shown["embeds"][0]["description"], "```\nb\n```");
    assert!(!shown["edited_timestamp"].is_null());

    // Longer (2 × 2,000 characters of text, then the block): the first patched, two posted.
    let longer = agent_message(
        None,
        &"word ".repeat(900),
        json!([{"type": "code", "code": "c"}]),
    );
    assert_eq!(frogbot_discord::render::agent_message(&longer).len(), 3);
    let three = outbox.edit_posted(&th, &ids, &longer).await.unwrap();
    assert_eq!(three.len(), 3);
    assert_eq!(three[0], ids[0]);
    assert_eq!(calls(&fake, "PATCH", "/messages/"), 2);
    assert_eq!(posts(&fake).len(), posted + 2);
    // The same edit again (a retry that did not learn the new ids) gets them back by nonce.
    let again = outbox.edit_posted(&th, &ids, &longer).await.unwrap();
    assert_eq!(again, three);
    assert_eq!(fake.channel_messages(channel).len(), 3);
    assert_within_limits(&fake, &three);

    // Shorter: the first patched, the surplus deleted (one already gone is fine).
    outbox.delete_posted(&th, &three[2..]).await.unwrap();
    let one = outbox
        .edit_posted(&th, &three, &agent_message(None, "v4", json!([])))
        .await
        .unwrap();
    assert_eq!(one, [ids[0].clone()]);
    assert!(fake.message(&three[1]).is_none() && fake.message(&three[2]).is_none());
    let shown = fake.message(&ids[0]).unwrap();
    assert_eq!(shown["content"], "v4");
    assert_eq!(shown["embeds"], json!([]), "the old embeds are gone");
}

#[tokio::test]
async fn delete_removes_the_messages_and_one_already_gone_is_ok() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let outbox = outbox(&fake).await;
    let th = thread(fake.new_id());
    let ids = outbox
        .post_message(&th, &every_type(), &Delivery::new("deliver:c:d:0"))
        .await
        .unwrap();
    outbox.delete_posted(&th, &ids).await.unwrap();
    assert!(fake.message(&ids[0]).is_none());
    assert_eq!(fake.deleted().len(), 1);
    // Again: Unknown Message (10008) is done.
    outbox.delete_posted(&th, &ids).await.unwrap();
    assert_eq!(calls(&fake, "DELETE", "/messages/"), 2);
    assert!(
        outbox
            .delete_posted(&th, &["not-a-snowflake".into()])
            .await
            .is_err()
    );
}

#[tokio::test]
async fn pins_follow_pin_posted() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let outbox = outbox(&fake).await;
    let channel = fake.new_id();
    let th = thread(channel);
    let ids = outbox
        .post_message(&th, &every_type(), &Delivery::new("deliver:c:p:0"))
        .await
        .unwrap();
    let c = channel.to_string();
    outbox.pin_posted(th.message(&ids[0]), true).await.unwrap();
    assert_eq!(fake.pins(&c), std::slice::from_ref(&ids[0]));
    assert_eq!(fake.message(&ids[0]).unwrap()["pinned"], true);
    outbox.pin_posted(th.message(&ids[0]), true).await.unwrap();
    assert_eq!(fake.pins(&c).len(), 1, "pinned once");
    outbox.pin_posted(th.message(&ids[0]), false).await.unwrap();
    assert!(fake.pins(&c).is_empty());
    outbox.pin_posted(th.message(&ids[0]), false).await.unwrap();
    assert_eq!(calls(&fake, "PUT", &format!("/channels/{c}/pins/")), 2);
    assert_eq!(calls(&fake, "DELETE", &format!("/channels/{c}/pins/")), 2);
    // Unpinning a message that is gone is done; pinning it is not.
    outbox.delete_posted(&th, &ids).await.unwrap();
    outbox.pin_posted(th.message(&ids[0]), false).await.unwrap();
    assert!(outbox.pin_posted(th.message(&ids[0]), true).await.is_err());
}

#[tokio::test]
async fn a_click_on_an_event_button_reads_as_its_block_and_button() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let outbox = outbox(&fake).await;
    let th = thread(fake.new_id());
    let ids = outbox
        .post_message(&th, &every_type(), &Delivery::new("deliver:c:k:0"))
        .await
        .unwrap();
    let shown = fake.message(&ids[0]).unwrap();
    let clicker = fake::user(42, "ana", false);
    for (custom_id, button) in [("fe:4:0", 0), ("fe:4:1", 1)] {
        let payload = fake::component_on(
            fake.new_id(),
            APP,
            &shown,
            None,
            &clicker,
            custom_id,
            None,
            "tok",
        );
        let c: serenity::model::application::ComponentInteraction =
            serde_json::from_value(payload).expect("a component interaction");
        let click = frogbot_discord::convert::event_click(&c).expect("an event click");
        assert_eq!(click.message_id, ids[0]);
        assert_eq!((click.block, click.button), (4, button));
        assert_eq!(click.user.id, "42");
    }
    for other in ["frogbot-stop", "fq:1:0:0"] {
        let payload = fake::component_on(
            fake.new_id(),
            APP,
            &shown,
            None,
            &clicker,
            other,
            None,
            "tok",
        );
        let c: serenity::model::application::ComponentInteraction =
            serde_json::from_value(payload).unwrap();
        assert_eq!(frogbot_discord::convert::event_click(&c), None, "{other}");
    }
}
