//! Agent messages beyond text (issue 20) on the fake Slack: every block type drawn in Block Kit
//! within Slack's limits (golden request bodies in `tests/golden/blocks.json`; `UPDATE_GOLDEN=1`
//! rewrites it), big blocks kept within the limits, `post_message` idempotent on its delivery
//! key, edits in place (`chat.update`), deletions (`chat.delete`), pins (`pins.add` /
//! `pins.remove`) and the event buttons' clicks.

use frogbot_core::agent::{ChannelOutbox, Delivery};
use frogbot_model::blocks::{Block, UNKNOWN_BLOCK_TEXT};
use frogbot_model::faults::{Fault, FaultPlan};
use frogbot_model::{Thread, UiMessage};
use frogbot_slack::PLATFORM;
use frogbot_slack::channel::SlackAdapter;
use frogbot_slack::testing::{BOT_USER, FakeSlack};
use serde_json::{Value, json};

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
        "The **deploy** finished: 3 of 4 jobs <ok> & one retried.",
        json!([
            {"type": "table", "id": "jobs", "columns": ["Job", "State", "Time"],
             "rows": [["build", "ok", "3m"], ["test", "ok"], ["deploy", "retried", 42]]},
            {"type": "progress", "value": 3, "max": 4, "label": "Rollout"},
            {"type": "image", "url": "https://example.com/chart.png", "alt": "Latency chart"},
            {"type": "code", "code": "fn main() {\n    println!(\"<hi>\");\n}", "language": "rust"},
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

async fn adapter(fake: &FakeSlack) -> SlackAdapter {
    frogbot_slack::channel::connect(fake.http_config())
        .await
        .expect("connect")
}

fn thread(fake: &FakeSlack, channel: &str) -> Thread {
    let root = fake.user_message(channel, None, "U1", &format!("<@{BOT_USER}> hi"));
    let id = root.id();
    Thread {
        chat_id: format!("chat-{id}"),
        id,
        platform: PLATFORM.into(),
    }
}

/// Every `type` in the blocks of the message `id` as the fake shows it.
fn block_types(fake: &FakeSlack, id: &str) -> Vec<String> {
    fake.message(id)
        .expect("the message")
        .blocks
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap().to_owned())
        .collect()
}

fn golden_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/blocks.json")
}

#[tokio::test]
async fn every_block_type_is_drawn_as_the_golden_request_bodies() {
    let fake = FakeSlack::start().await;
    let slack = adapter(&fake).await;
    // A fixed thread, so the bodies are the same on every run.
    let th = Thread {
        chat_id: "chat-golden".into(),
        id: "C0GOLDEN:1700000000.000100".into(),
        platform: PLATFORM.into(),
    };
    let ids = slack
        .post_message(
            &th,
            &every_type(),
            &Delivery::new("deliver:chat-golden:m1:0"),
        )
        .await
        .unwrap();
    assert_eq!(fake.violations(), Vec::<String>::new());
    assert_eq!(ids.len(), 1, "one Slack message holds it all");
    let bodies: Vec<Value> = fake
        .calls("chat.postMessage")
        .into_iter()
        .map(|c| c.body)
        .collect();
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
    assert_eq!(
        block_types(&fake, &ids[0]),
        [
            "header",
            "section",
            "table",
            "section",
            "image",
            "rich_text",
            "section",
            "actions",
            "section",
            "section",
            "section"
        ]
    );
    let shown = fake.message(&ids[0]).unwrap();
    let blocks = shown.blocks.as_array().unwrap();
    assert_eq!(blocks[0]["text"]["text"], "Nightly deploy");
    assert_eq!(
        blocks[1]["text"]["text"],
        "The *deploy* finished: 3 of 4 jobs &lt;ok&gt; &amp; one retried."
    );
    assert_eq!(blocks[2]["rows"].as_array().unwrap().len(), 4);
    assert_eq!(
        blocks[2]["rows"][2][2]["text"], " ",
        "a short row is padded"
    );
    assert_eq!(blocks[2]["rows"][3][2]["text"], "42");
    assert!(
        blocks[3]["text"]["text"]
            .as_str()
            .unwrap()
            .contains("▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓░░░░░` 75%")
    );
    assert_eq!(blocks[4]["image_url"], "https://example.com/chart.png");
    assert_eq!(blocks[4]["alt_text"], "Latency chart");
    assert_eq!(blocks[5]["elements"][0]["language"], "rust");
    assert_eq!(blocks[6]["fields"][1]["text"], "*Commit*\nc01f247");
    let buttons = blocks[7]["elements"].as_array().unwrap();
    assert_eq!(buttons.len(), 2);
    assert_eq!(buttons[0]["action_id"], "fb1:e:4:0");
    assert_eq!(buttons[1]["action_id"], "fb1:e:4:1");
    assert_eq!(buttons[1]["text"]["text"], "Show logs");
    assert!(
        blocks[8]["text"]["text"]
            .as_str()
            .unwrap()
            .contains("Dashboard")
    );
    // With the server's public_url, the app links to its web view.
    assert_eq!(
        blocks[9]["text"]["text"],
        "🧩 *Chart*\n<https://bot.example.com/apps/chat-golden/m1/0123456789abcdef0123456789abcdef|Open the app>"
    );
    assert_eq!(blocks[10]["text"]["text"], UNKNOWN_BLOCK_TEXT);
    // The notification text is plain.
    assert!(shown.text.starts_with("Nightly deploy\n"), "{}", shown.text);
    assert!(shown.text.contains("Rollout: 75%"));
}

#[tokio::test]
async fn an_unknown_block_type_shows_the_placeholder() {
    let fake = FakeSlack::start().await;
    let slack = adapter(&fake).await;
    let th = thread(&fake, "C1");
    let m = agent_message(None, "", json!([{"type": "hologram", "depth": 3}]));
    let ids = slack
        .post_message(&th, &m, &Delivery::new("deliver:c:u:0"))
        .await
        .unwrap();
    let shown = fake.message(&ids[0]).unwrap();
    assert_eq!(shown.blocks[0]["text"]["text"], UNKNOWN_BLOCK_TEXT);
    assert_eq!(shown.text, UNKNOWN_BLOCK_TEXT);
    assert!(fake.violations().is_empty());
}

/// Checks every message the fake shows against the limits the renderer keeps (beyond what the
/// fake itself refuses).
fn assert_within_limits(fake: &FakeSlack, ids: &[String]) {
    for id in ids {
        let m = fake.message(id).expect("posted");
        let blocks = m.blocks.as_array().unwrap();
        assert!(blocks.len() <= 50, "{id}: {} blocks", blocks.len());
        assert!(
            blocks.iter().filter(|b| b["type"] == "table").count() <= 1,
            "{id}: one table"
        );
        assert!(m.text.chars().count() <= 4000, "{id}: text");
        for b in blocks {
            if let Some(t) = b["text"]["text"].as_str() {
                assert!(t.chars().count() <= 3000);
            }
            for f in b["fields"].as_array().into_iter().flatten() {
                assert!(f["text"].as_str().unwrap().chars().count() <= 2000);
            }
            assert!(b["fields"].as_array().is_none_or(|f| f.len() <= 10));
            assert!(b["rows"].as_array().is_none_or(|r| r.len() <= 100));
            for pre in b["elements"].as_array().into_iter().flatten() {
                if pre["type"] == "rich_text_preformatted" {
                    let n: usize = pre["elements"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|e| e["text"].as_str().unwrap().chars().count())
                        .sum();
                    assert!(n <= 3000);
                }
            }
        }
    }
    assert_eq!(fake.violations(), Vec::<String>::new());
}

/// The data rows of each table the messages `ids` show.
fn table_rows(fake: &FakeSlack, ids: &[String]) -> Vec<usize> {
    ids.iter()
        .filter_map(|id| {
            let m = fake.message(id).unwrap();
            let t = m
                .blocks
                .as_array()?
                .iter()
                .find(|b| b["type"] == "table")?
                .clone();
            Some(t["rows"].as_array().unwrap().len() - 1)
        })
        .collect()
}

#[tokio::test]
async fn a_hundred_row_table_with_long_cells_stays_within_slacks_limits() {
    let fake = FakeSlack::start().await;
    let slack = adapter(&fake).await;
    let th = thread(&fake, "C1");
    // Short cells: Slack's 100 rows hold the header and 99 rows; the last row goes on.
    let rows: Vec<Vec<String>> = (0..100).map(|r| vec![r.to_string(), "ok".into()]).collect();
    let m = agent_message(
        Some(&"T".repeat(400)),
        "A big table.",
        json!([{"type": "table", "columns": ["n", "state"], "rows": rows}]),
    );
    let ids = slack
        .post_message(&th, &m, &Delivery::new("deliver:c:t:0"))
        .await
        .unwrap();
    assert_eq!(
        table_rows(&fake, &ids),
        [99, 1],
        "every row once, the header repeated"
    );
    assert_within_limits(&fake, &ids);
    let header = &fake.message(&ids[0]).unwrap().blocks[0];
    assert_eq!(header["type"], "header");
    assert_eq!(
        header["text"]["text"].as_str().unwrap().chars().count(),
        150
    );
    let second = fake.message(&ids[1]).unwrap();
    assert_eq!(second.blocks[0]["rows"][0][1]["text"], "state");
    assert_eq!(second.blocks[0]["rows"][1][0]["text"], "99");

    // 20 columns of 2,000-character cells: cells cut, tables split by size.
    let columns: Vec<String> = (0..20).map(|c| format!("column {c}")).collect();
    let rows: Vec<Vec<String>> = (0..100)
        .map(|r| {
            (0..20)
                .map(|c| format!("{r}/{c} {}", "x".repeat(1990)))
                .collect()
        })
        .collect();
    let m = agent_message(
        None,
        "",
        json!([{"type": "table", "columns": columns, "rows": rows}]),
    );
    let ids = slack
        .post_message(&th, &m, &Delivery::new("deliver:c:t2:0"))
        .await
        .unwrap();
    let shown = table_rows(&fake, &ids);
    assert_eq!(shown.iter().sum::<usize>(), 100, "{shown:?}");
    assert_within_limits(&fake, &ids);
    for id in &ids {
        let m = fake.message(id).unwrap();
        for row in m.blocks[0]["rows"].as_array().unwrap() {
            assert_eq!(row.as_array().unwrap().len(), 20);
            for c in row.as_array().unwrap() {
                assert!(c["text"].as_str().unwrap().chars().count() <= 500);
            }
        }
        assert!(
            m.blocks.to_string().len() < 200_000,
            "{id}: a message of a sane size"
        );
    }
}

#[tokio::test]
async fn twenty_big_blocks_are_packed_into_messages_within_slacks_limits() {
    let fake = FakeSlack::start().await;
    let slack = adapter(&fake).await;
    let th = thread(&fake, "C1");
    let long = "v".repeat(2000);
    let fields: Vec<Value> = (0..50)
        .map(|i| json!({"key": format!("key {i} {}", "k".repeat(1900)), "value": long}))
        .collect();
    let mut blocks: Vec<Value> = (0..10)
        .map(|i| {
            json!({"type": "fields", "id": format!("f{i}"), "fields": fields,
                   "events": (0..5).map(|j| json!({"label": format!("{j} {}", "b".repeat(200))})).collect::<Vec<_>>()})
        })
        .collect();
    blocks.extend(
        (0..5).map(|i| json!({"type": "code", "code": format!("line {i}\n").repeat(20_000)})),
    );
    blocks.extend((0..5).map(|_| json!({"type": "table", "columns": ["a"], "rows": [["1"]]})));
    let text = "word ".repeat(20_000);
    let m = agent_message(Some("Big"), &text, json!(blocks));
    let ids = slack
        .post_message(&th, &m, &Delivery::new("deliver:c:big:0"))
        .await
        .unwrap();
    assert!(ids.len() >= 5, "{} messages", ids.len());
    assert_within_limits(&fake, &ids);
    // Every event button is there once, with its block and button index.
    let mut buttons = Vec::new();
    for id in &ids {
        for b in fake.message(id).unwrap().blocks.as_array().unwrap() {
            if b["type"] == "actions" {
                for e in b["elements"].as_array().unwrap() {
                    assert!(e["text"]["text"].as_str().unwrap().chars().count() <= 75);
                    buttons.push(e["action_id"].as_str().unwrap().to_owned());
                }
            }
        }
    }
    let want: Vec<String> = (0..10)
        .flat_map(|i| (0..5).map(move |j| format!("fb1:e:{i}:{j}")))
        .collect();
    assert_eq!(buttons, want);
}

#[tokio::test]
async fn post_message_returns_the_ids_and_a_retry_after_a_lost_answer_posts_nothing_twice() {
    let fake = FakeSlack::start().await;
    let slack = adapter(&fake).await;
    let th = thread(&fake, "C1");
    let rows: Vec<Vec<String>> = (0..80).map(|r| vec![r.to_string()]).collect();
    let m = agent_message(
        Some("Rows"),
        "Two tables.",
        json!([{"type": "table", "columns": ["n"], "rows": rows},
               {"type": "table", "columns": ["n"], "rows": rows},
               {"type": "code", "id": "c", "code": "ok", "events": [{"label": "Again"}]}]),
    );
    let d = Delivery::new("deliver:chat-1:m1:0");
    // Every write is carried out and its answer lost.
    fake.set_faults(FaultPlan::new(1, 1.0).only(&[Fault::ResetAfterProcessing]));
    let e = slack.post_message(&th, &m, &d).await.unwrap_err();
    assert!(frogbot_model::Transient::find(e.as_ref()).is_some(), "{e}");
    fake.clear_faults();
    assert_eq!(fake.thread_keys(&th.id), [d.piece_key(0)]);
    let retry = Delivery {
        attempt: 1,
        ..d.clone()
    };
    let ids = slack.post_message(&th, &m, &retry).await.unwrap();
    assert_eq!(ids.len(), 2);
    assert_eq!(fake.thread_keys(&th.id), [d.piece_key(0), d.piece_key(1)]);
    // The ids are the messages the fake shows, in order, the first posted by the lost attempt.
    let bot: Vec<String> = fake
        .thread_messages(&th.id)
        .into_iter()
        .filter(|m| m.bot)
        .map(|m| m.id())
        .collect();
    assert_eq!(ids, bot);
    assert_eq!(fake.calls("chat.postMessage").len(), 2);
    // A third attempt posts nothing and returns the same ids.
    let again = Delivery {
        attempt: 2,
        ..d.clone()
    };
    assert_eq!(slack.post_message(&th, &m, &again).await.unwrap(), ids);
    assert_eq!(fake.calls("chat.postMessage").len(), 2);
}

#[tokio::test]
async fn an_edit_updates_each_message_in_place_posts_the_extra_and_deletes_the_surplus() {
    let fake = FakeSlack::start().await;
    let slack = adapter(&fake).await;
    let th = thread(&fake, "C1");
    // `n` tables (one per Slack message) of `rows` rows.
    let tables = |n: usize, rows: usize| {
        let rows: Vec<Vec<String>> = (0..rows).map(|r| vec![r.to_string()]).collect();
        Value::Array(vec![
            json!({"type": "table", "columns": ["n"], "rows": rows});
            n
        ])
    };
    let ids = slack
        .post_message(
            &th,
            &agent_message(None, "v1", tables(1, 10)),
            &Delivery::new("deliver:c:e:0"),
        )
        .await
        .unwrap();
    assert_eq!(ids.len(), 1);
    let posts = fake.calls("chat.postMessage").len();

    // The same size: one chat.update, nothing posted (Slack does not notify of an update).
    let same = slack
        .edit_posted(&th, &ids, &agent_message(Some("Now"), "v2", tables(1, 20)))
        .await
        .unwrap();
    assert_eq!(same, ids);
    assert_eq!(fake.calls("chat.update").len(), 1);
    assert_eq!(fake.calls("chat.postMessage").len(), posts);
    let shown = fake.message(&ids[0]).unwrap();
    assert_eq!(shown.blocks[0]["text"]["text"], "Now");
    assert_eq!(shown.blocks[2]["rows"].as_array().unwrap().len(), 21);

    // Longer: the first is updated, the second posted in the thread.
    let longer = agent_message(None, "v3", tables(3, 5));
    let three = slack.edit_posted(&th, &ids, &longer).await.unwrap();
    assert_eq!(three.len(), 3);
    assert_eq!(three[0], ids[0]);
    assert_eq!(fake.calls("chat.update").len(), 2);
    assert_eq!(fake.calls("chat.postMessage").len(), posts + 2);
    for id in &three {
        assert_eq!(
            fake.message(id).unwrap().thread_ts.as_deref(),
            th.id.split_once(':').map(|x| x.1)
        );
    }
    // Drawing the same edit again (a retried edit that did not learn the new ids) posts nothing.
    let again = slack.edit_posted(&th, &ids, &longer).await.unwrap();
    assert_eq!(again, three);
    assert_eq!(fake.calls("chat.postMessage").len(), posts + 2);
    assert_within_limits(&fake, &three);

    // Shorter: the first is updated, the surplus deleted.
    let one = slack
        .edit_posted(&th, &three, &agent_message(None, "v4", json!([])))
        .await
        .unwrap();
    assert_eq!(one, [ids[0].clone()]);
    assert!(fake.message(&three[1]).is_none() && fake.message(&three[2]).is_none());
    assert_eq!(fake.calls("chat.delete").len(), 2);
    assert_eq!(fake.message(&ids[0]).unwrap().text, "v4");
}

#[tokio::test]
async fn delete_removes_the_messages_and_one_already_gone_is_ok() {
    let fake = FakeSlack::start().await;
    let slack = adapter(&fake).await;
    let th = thread(&fake, "C1");
    let ids = slack
        .post_message(&th, &every_type(), &Delivery::new("deliver:c:d:0"))
        .await
        .unwrap();
    slack.delete_posted(&th, &ids).await.unwrap();
    assert!(fake.message(&ids[0]).is_none());
    assert_eq!(fake.deleted().len(), 1);
    // Again: message_not_found is done.
    slack.delete_posted(&th, &ids).await.unwrap();
    assert_eq!(fake.calls("chat.delete").len(), 2);
    assert!(slack.delete_posted(&th, &["nocolon".into()]).await.is_err());
}

#[tokio::test]
async fn pins_follow_pin_posted() {
    let fake = FakeSlack::start().await;
    let slack = adapter(&fake).await;
    let th = thread(&fake, "C1");
    let ids = slack
        .post_message(&th, &every_type(), &Delivery::new("deliver:c:p:0"))
        .await
        .unwrap();
    let ts = ids[0].split_once(':').unwrap().1.to_owned();
    slack.pin_posted(th.message(&ids[0]), true).await.unwrap();
    assert_eq!(fake.pins("C1"), std::slice::from_ref(&ts));
    // Already pinned is done.
    slack.pin_posted(th.message(&ids[0]), true).await.unwrap();
    assert_eq!(fake.pins("C1"), [ts]);
    slack.pin_posted(th.message(&ids[0]), false).await.unwrap();
    assert!(fake.pins("C1").is_empty());
    slack.pin_posted(th.message(&ids[0]), false).await.unwrap();
    let calls: Vec<(String, Value)> = fake
        .all_calls()
        .into_iter()
        .filter(|c| c.method.starts_with("pins."))
        .map(|c| (c.method, c.body["timestamp"].clone()))
        .collect();
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[0].0, "pins.add");
    assert_eq!(calls[3].0, "pins.remove");
}

#[tokio::test]
async fn a_click_on_an_event_button_reads_as_its_block_and_button() {
    let fake = FakeSlack::start().await;
    let slack = adapter(&fake).await;
    let th = thread(&fake, "C1");
    let ids = slack
        .post_message(&th, &every_type(), &Delivery::new("deliver:c:k:0"))
        .await
        .unwrap();
    for (label, button) in [("Retry", 0), ("Show logs", 1)] {
        let payload = fake.click("U7", &ids[0], label).expect("the button");
        let interaction = frogbot_slack::convert::interaction_from_payload(&payload)
            .unwrap()
            .unwrap();
        let frogbot_model::Interaction::Action { event } = &interaction else {
            panic!("an action")
        };
        let click = frogbot_slack::convert::event_click(event).expect("an event click");
        assert_eq!(click.message_id, ids[0]);
        assert_eq!((click.block, click.button), (4, button));
        assert_eq!(click.user.id, "U7");
    }
    // A question's control or the Stop button is no event click.
    let mut stop = fake.click("U7", &ids[0], "Retry").unwrap();
    stop["actions"][0]["action_id"] = json!("frogbot-stop");
    let i = frogbot_slack::convert::interaction_from_payload(&stop)
        .unwrap()
        .unwrap();
    let frogbot_model::Interaction::Action { event } = &i else {
        panic!()
    };
    assert_eq!(frogbot_slack::convert::event_click(event), None);
}
