//! `POST /api/chats/{id}/stop` (only the driving user stops a running turn; what it produced is
//! kept and marked) and `metadata.ack` on user messages read over HTTP.

mod common;

use common::{ALICE, BOB, chat_id, hold_running, messages, start, text_of};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_stops_a_running_turn_and_acks_show_each_messages_state() {
    let db = frogbot_testkit::sqlite_db();
    let s = start(&db).await;
    let chat = chat_id("stop");
    let path = format!("/api/chats/{chat}/stop");

    // Nothing runs: not stopping, nothing changes.
    s.send(&chat, Some(ALICE), "hello").await;
    s.wait_settled(&chat, Some(ALICE)).await;
    let r = s.post(&path, Some(ALICE), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["stopping"], false);
    assert_eq!(r.json["state"], "idle");

    let held = hold_running(&s, &chat, Some(ALICE), 3600).await;
    let q = s.send(&chat, Some(ALICE), "after it").await;
    assert_eq!(q.status, 202, "{}", q.text);
    // While it runs: the first message is done, the running one working, the queued one seen.
    let c = s.chat(&chat, Some(ALICE)).await.json;
    let acks: Vec<(String, String)> = messages(&c)
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| {
            (
                text_of(m),
                m["metadata"]["ack"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        acks,
        [
            ("hello".to_owned(), "done".to_owned()),
            ("slow 3600".to_owned(), "working".to_owned()),
            ("after it".to_owned(), "seen".to_owned()),
        ]
    );

    // Bob may not (he cannot even read Alice's chat); Alice can.
    s.post(&path, Some(BOB), json!({}))
        .await
        .assert_error(403, "forbidden");
    let r = s.post(&path, Some(ALICE), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["stopping"], true);
    // The held request ends long before its hour; the queued message runs next.
    let done = tokio::time::timeout(common::WAIT, held)
        .await
        .expect("the stopped turn ended")
        .expect("held request");
    assert_eq!(done.status, 200, "{}", done.text);
    s.wait_settled(&chat, Some(ALICE)).await;
    let c = s.chat(&chat, Some(ALICE)).await.json;
    let all = messages(&c);
    let stopped = all
        .iter()
        .find(|m| {
            m["role"] == "assistant" && text_of(m).contains(frogbot_core::agent::STOPPED_TEXT)
        })
        .expect("the stopped reply is kept and marked");
    assert!(
        stopped["metadata"]["error"].is_null(),
        "a stop is no failure"
    );
    assert!(
        all.iter()
            .filter(|m| m["role"] == "user")
            .all(|m| m["metadata"]["ack"] == "done"),
        "{all:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_without_a_driver_stops_for_anyone_who_may_write_an_owned_one_for_its_owner() {
    let db = frogbot_testkit::sqlite_db();
    let s = start(&db).await;
    // An anonymous chat is shared: its turn has no driver, anyone who may write it stops it.
    let chat = chat_id("shared");
    let held = hold_running(&s, &chat, None, 3600).await;
    let r = s
        .post(&format!("/api/chats/{chat}/stop"), None, json!({}))
        .await;
    assert_eq!(
        r.status, 200,
        "a turn without a driver stops for anyone who may write: {}",
        r.text
    );
    tokio::time::timeout(common::WAIT, held)
        .await
        .expect("stopped")
        .expect("held");
    let chat2 = chat_id("driven");
    let held = hold_running(&s, &chat2, Some(ALICE), 3600).await;
    s.post(&format!("/api/chats/{chat2}/stop"), Some(BOB), json!({}))
        .await
        .assert_error(403, "forbidden");
    s.post(&format!("/api/chats/{chat2}/stop"), Some(ALICE), json!({}))
        .await;
    tokio::time::timeout(common::WAIT, held)
        .await
        .expect("stopped")
        .expect("held");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_events_stream_reports_each_messages_acknowledgement() {
    let db = frogbot_testkit::sqlite_db();
    let s = start(&db).await;
    let chat = chat_id("ev-acks");
    assert_eq!(s.send(&chat, Some(ALICE), "first").await.status, 200);
    let res = s
        .client
        .get(format!("{}/api/chats/{chat}/events", s.base))
        .bearer_auth(ALICE)
        .send()
        .await
        .expect("events");
    let mut stream = Box::pin(res.bytes_stream());
    let mut buf = String::new();
    common::next_event(&mut stream, &mut buf, |v| v["type"] == "state").await;

    let r = s.send(&chat, Some(ALICE), "second").await;
    assert_eq!(r.status, 200);
    // The message arrives seen, its turn marks it working, its reply done — in that order.
    let m = common::next_event(&mut stream, &mut buf, |v| {
        v["type"] == "message" && v["message"]["role"] == "user"
    })
    .await;
    let id = m["message"]["id"].as_str().unwrap().to_owned();
    assert_eq!(m["message"]["metadata"]["ack"], "seen");
    let working = common::next_event(&mut stream, &mut buf, |v| v["type"] == "ack").await;
    assert_eq!(
        working,
        json!({"type": "ack", "messageId": id, "ack": "working"})
    );
    let done = common::next_event(&mut stream, &mut buf, |v| v["type"] == "ack").await;
    assert_eq!(done, json!({"type": "ack", "messageId": id, "ack": "done"}));
}
