//! The real `frogbot` binary as separate processes: SIGTERM stops accepting requests, lets the
//! running turn finish and releases its lease; two `frogbot serve` processes on one database serve
//! the same chats.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::child::{ServeProcess, free_port, frogbot, start};

use frogbot_core::model::{ChatId, TurnState, now_millis};
use serde_json::{Value, json};

async fn serve(database: &str) -> ServeProcess {
    let port = free_port();
    let mut cmd = frogbot();
    cmd.arg("serve")
        .env("FROGBOT_DATABASE", database)
        .env("FROGBOT_LISTEN", format!("127.0.0.1:{port}"))
        .env("FROGBOT_CONFIG", "/dev/null");
    start(cmd, port).await
}

fn client() -> reqwest::Client {
    frogbot_openai::install_crypto_provider();
    reqwest::Client::new()
}

async fn post(base: &str, chat: &str, text: &str) -> (u16, Value) {
    let r = client()
        .post(format!("{base}/api/chats/{chat}/messages"))
        .json(&json!({"parts": [{"type": "text", "text": text}]}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn chat(base: &str, chat: &str) -> Value {
    client()
        .get(format!("{base}/api/chats/{chat}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn wait_for(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn sigterm_lets_the_running_turn_finish_and_releases_its_lease() {
    let db = frogbot_testkit::sqlite_db();
    let mut server = serve(&db.url).await;
    let base = server.base.clone();
    let turn = tokio::spawn({
        let base = base.clone();
        async move { post(&base, "term", "slow 1").await }
    });
    wait_for("the turn to run", async || {
        chat(&base, "term").await["state"] == "running"
    })
    .await;
    let pid = server.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    // The request in flight is answered, the process exits cleanly.
    let (status, body) = turn.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"]["parts"][1]["text"], "You said: slow 1");
    let exit = server.child.wait().unwrap();
    assert!(exit.success(), "exit status {exit:?}");
    // The turn's lease was released: the chat is idle right away, not after the lease time.
    let store = frogbot_core::store::open(&db.url).await.unwrap();
    let row = store
        .get_chat(&ChatId::new("term").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.state(now_millis()), TurnState::Idle);
    assert!(row.lease.is_none());
}

async fn two_processes_share_chats(database: &str) {
    let a = serve(database).await;
    let b = serve(database).await;
    let running = tokio::spawn({
        let base = a.base.clone();
        async move { post(&base, "shared", "slow 1").await }
    });
    wait_for("A's turn to run", async || {
        chat(&b.base, "shared").await["state"] == "running"
    })
    .await;
    let (status, queued) = post(&b.base, "shared", "queued through b").await;
    assert_eq!(status, 202, "{queued}");
    assert_eq!(queued["delivery"], "queue");
    assert_eq!(running.await.unwrap().0, 200);
    // A's turn ended and promoted the message queued through B.
    wait_for("the queued message to be answered", async || {
        let c = chat(&a.base, "shared").await;
        c["state"] == "idle"
            && c["messages"].as_array().is_some_and(|m| {
                m.len() == 4 && m[3]["parts"][1]["text"] == "You said: queued through b"
            })
    })
    .await;
}

#[tokio::test]
async fn two_serve_processes_on_one_sqlite_file_share_chats() {
    let db = frogbot_testkit::sqlite_db();
    two_processes_share_chats(&db.url).await;
}

#[tokio::test]
async fn two_serve_processes_on_one_postgres_database_share_chats() {
    let Some(db) = frogbot_testkit::postgres_db() else {
        return;
    };
    two_processes_share_chats(&db.url).await;
}
