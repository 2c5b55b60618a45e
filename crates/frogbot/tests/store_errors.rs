//! A store that fails — SQLite locked by another process past its busy timeout, a PostgreSQL
//! database gone — is a clear 503 in the contract's error shape, and the request changed nothing.

mod common;

use common::*;

/// SQLite locked by another process: the send waits for the busy timeout, then is answered 503
/// `unavailable` with `Retry-After`; nothing of it was stored, and the same send works once the
/// lock is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_sqlite_database_is_a_503_and_nothing_is_written() {
    let db = frogbot_testkit::sqlite_db();
    let s = start(&db).await;
    let chat = chat_id("locked");
    assert_eq!(s.send(&chat, Some(ALICE), "first").await.status, 200);
    s.wait_state(&chat, Some(ALICE), "idle").await;
    let before = messages(&s.chat(&chat, Some(ALICE)).await.json).len();

    let lock = frogbot_testkit::lock_sqlite(&db.url);
    let res = s
        .client
        .post(format!("{}/api/chats/{chat}/messages", s.base))
        .bearer_auth(ALICE)
        .json(&msg("second"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 503);
    assert_eq!(
        res.headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap()),
        Some("1")
    );
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    let text = body["error"]["message"].as_str().unwrap();
    assert!(text.contains("nothing was changed"), "{text}");
    drop(lock);

    let after = s.chat(&chat, Some(ALICE)).await;
    assert_eq!(messages(&after.json).len(), before, "nothing was written");
    assert_eq!(after.json["state"], "idle");
    // The caller retries and is served.
    assert_eq!(s.send(&chat, Some(ALICE), "second").await.status, 200);
    let chat_now = s.wait_state(&chat, Some(ALICE), "idle").await;
    assert_eq!(messages(&chat_now).len(), before + 2);
}

/// The PostgreSQL database disappears under a running server: reads and writes are 503
/// `unavailable`, and the driver's words (host, user) are not in the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
async fn a_lost_postgres_database_is_a_503() {
    let Some(db) = frogbot_testkit::postgres_db() else {
        return;
    };
    let s = start(&db).await;
    let chat = chat_id("gone");
    assert_eq!(s.send(&chat, Some(ALICE), "hi").await.status, 200);
    s.wait_state(&chat, Some(ALICE), "idle").await;
    frogbot_testkit::drop_postgres_db(&db.url).await;
    // Connections the server cut may fail in other ways first; every answer is a 503 in shape.
    for _ in 0..4 {
        let r = s.send(&chat, Some(ALICE), "again").await;
        r.assert_error(503, "unavailable");
        assert!(!r.text.contains("127.0.0.1"), "{}", r.text);
        let r = s.chat(&chat, Some(ALICE)).await;
        r.assert_error(503, "unavailable");
    }
}

/// A client message id the chat already has is a conflict: 409 `duplicate-message` (not a 400:
/// the request is well formed, it collides with what is stored), and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_message_id_is_a_409_and_nothing_is_written() {
    let db = frogbot_testkit::sqlite_db();
    let s = start(&db).await;
    let chat = chat_id("dup");
    let mut body = msg("first");
    body["id"] = serde_json::json!("client-1");
    let path = format!("/api/chats/{chat}/messages");
    assert_eq!(s.post(&path, Some(ALICE), body.clone()).await.status, 200);
    s.wait_state(&chat, Some(ALICE), "idle").await;
    let before = messages(&s.chat(&chat, Some(ALICE)).await.json).len();

    body["parts"][0]["text"] = serde_json::json!("again");
    let r = s.post(&path, Some(ALICE), body).await;
    r.assert_error(409, "duplicate-message");
    assert!(r.text.contains("client-1"), "{}", r.text);
    let after = s.chat(&chat, Some(ALICE)).await;
    assert_eq!(messages(&after.json).len(), before, "nothing was written");
    assert_eq!(after.json["state"], "idle");
}

/// Stored data that no longer reads back (a broken invariant of the store, not the caller's
/// fault) is a 500 `internal` whose message says nothing about the data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_data_that_does_not_read_back_is_a_500() {
    let db = frogbot_testkit::sqlite_db();
    let s = start(&db).await;
    let chat = chat_id("corrupt");
    assert_eq!(s.send(&chat, Some(ALICE), "hi").await.status, 200);
    s.wait_state(&chat, Some(ALICE), "idle").await;
    frogbot_testkit::sqlite_exec(
        &db.url,
        &format!("UPDATE messages SET body = 'not json' WHERE chat_id = '{chat}'"),
    );
    let r = s.chat(&chat, Some(ALICE)).await;
    r.assert_error(500, "internal");
    assert!(!r.text.contains("not json"), "{}", r.text);
    assert!(!r.text.contains("corrupt"), "{}", r.text);
}
