//! `frogbot ask` / `wait` / `cancel` as real child processes against a real `frogbot serve`
//! (its own process, SQLite): the exit codes (0 answered, 2 expired or timed out, 3 cancelled,
//! 1 a bad flag), the JSON and text output, a default used on expiry, and many answers racing.

mod common;

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::child::{ServeProcess, config_file, free_port, frogbot, start};
use serde_json::{Value, json};

const TOKEN: &str = "deploy-secret";

async fn serve(dir: &std::path::Path) -> ServeProcess {
    let port = free_port();
    let db = format!("sqlite://{}", dir.join("ask.db").display());
    let config = config_file(
        dir,
        port,
        &db,
        &format!("[[users]]\nid = \"ops\"\ntoken = \"{TOKEN}\"\n"),
    );
    let mut cmd = frogbot();
    cmd.arg("serve").arg("--config").arg(config);
    start(cmd, port).await
}

/// Runs `frogbot ARGS --server BASE` with the token in the environment, to the end.
fn cli(base: &str, args: &[&str]) -> tokio::task::JoinHandle<Output> {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_frogbot"));
    cmd.args(args)
        .env("FROGBOT_URL", base)
        .env("FROGBOT_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    tokio::task::spawn_blocking(move || cmd.output().expect("run frogbot"))
}

fn stdout_json(o: &Output) -> Value {
    let text = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text:?}"))
}

fn http() -> reqwest::Client {
    frogbot_openai::install_crypto_provider();
    reqwest::Client::new()
}

async fn get(base: &str, path: &str) -> Value {
    http()
        .get(format!("{base}{path}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn settle(base: &str, chat: &str, body: Value) -> (u16, Value) {
    let r = http()
        .post(format!("{base}/api/chats/{chat}/settle"))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// The chat's waiting calls, once there is one.
async fn open_call(base: &str, chat: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = get(base, &format!("/api/chats/{chat}/pending")).await;
        if let Some(call) = p["calls"].get(0) {
            return call.clone();
        }
        assert!(Instant::now() < deadline, "no open call in {chat}: {p}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited")
}

#[tokio::test]
async fn an_ask_answered_in_the_web_chat_exits_0_with_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path()).await;
    let base = server.base.clone();
    let asked = cli(
        &base,
        &[
            "ask",
            "Deploy v1.4 to production?",
            "--to",
            "web:deploy",
            "--confirm",
            "Approve",
            "--danger",
            "--expires",
            "2h",
            "--wait",
        ],
    );
    let call = open_call(&base, "deploy").await;
    assert_eq!(call["input"]["questions"][0]["kind"], "confirm");
    assert_eq!(call["input"]["expiresInSeconds"], 7200);
    let expires = call["expiresAt"].as_str().expect("expiresAt in /pending");
    // The waiting reply's tool part carries it too.
    let chat = get(&base, "/api/chats/deploy").await;
    let part = chat["messages"][1]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "tool-question")
        .cloned()
        .unwrap();
    assert_eq!(part["expiresAt"], expires);
    assert_eq!(
        chat["messages"][0]["parts"][0]["text"],
        "Deploy v1.4 to production?"
    );
    // A wrong answer is refused with the reason and changes nothing.
    let (status, body) = settle(
        &base,
        "deploy",
        json!({"toolCallId": call["toolCallId"], "output": {"answers": [{"header": "Answer", "selected": ["Deny"]}]}}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid-answer")),
        "{body}"
    );
    // Answered from the web chat (its settle endpoint).
    let (status, body) = settle(
        &base,
        "deploy",
        json!({"toolCallId": call["toolCallId"], "output": {"answers": [{"header": "Answer", "selected": ["Approve"]}]}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let out = asked.await.unwrap();
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["state"], "answered");
    assert_eq!(v["values"], json!({"Answer": true}));
    assert_eq!(v["answers"]["answers"][0]["selected"], json!(["Approve"]));
    assert_eq!(v["by"]["user"], "ops");
    assert_eq!(v["expiresAt"], expires);
    // `frogbot wait` on an ask that is over answers at once, in text.
    let again = cli(
        &base,
        &["wait", v["id"].as_str().unwrap(), "--format", "text"],
    )
    .await
    .unwrap();
    assert_eq!(code(&again), 0);
    assert_eq!(String::from_utf8_lossy(&again.stdout).trim(), "true");
    // The same idempotency key twice is one ask.
    let a = cli(&base, &["ask", "Again?", "--idempotency-key", "k1"])
        .await
        .unwrap();
    let b = cli(&base, &["ask", "Again?", "--idempotency-key", "k1"])
        .await
        .unwrap();
    assert_eq!(stdout_json(&a)["id"], stdout_json(&b)["id"]);
}

#[tokio::test]
async fn expiry_exits_2_without_a_default_and_0_with_one() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path()).await;
    let base = server.base.clone();
    let without = cli(
        &base,
        &[
            "ask",
            "Pick one",
            "--choice",
            "A",
            "--choice",
            "B",
            "--expires",
            "1s",
            "--wait",
        ],
    );
    let with = cli(
        &base,
        &[
            "ask",
            "How many pods?",
            "--number",
            "--min",
            "1",
            "--max",
            "10",
            "--default",
            "3",
            "--expires",
            "1s",
            "--wait",
            "--format",
            "text",
        ],
    );
    let (without, with) = (without.await.unwrap(), with.await.unwrap());
    assert_eq!(
        code(&without),
        2,
        "{}",
        String::from_utf8_lossy(&without.stderr)
    );
    let v = stdout_json(&without);
    assert_eq!(v["state"], "expired");
    assert!(v.get("answers").is_none(), "{v}");
    assert_eq!(code(&with), 0, "{}", String::from_utf8_lossy(&with.stderr));
    assert_eq!(String::from_utf8_lossy(&with.stdout).trim(), "3");
}

#[tokio::test]
async fn timeout_exits_2_and_a_cancel_from_another_process_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path()).await;
    let base = server.base.clone();
    let created = cli(&base, &["ask", "Ship it?", "--to", "web:ship", "--toggle"])
        .await
        .unwrap();
    assert_eq!(code(&created), 0);
    let id = stdout_json(&created)["id"].as_str().unwrap().to_owned();
    let timed = cli(&base, &["wait", &id, "--timeout", "1s"]).await.unwrap();
    assert_eq!(code(&timed), 2);
    assert_eq!(stdout_json(&timed)["state"], "open");
    let waiting = cli(&base, &["wait", &id]);
    let cancelled = cli(&base, &["cancel", &id]).await.unwrap();
    assert_eq!(
        code(&cancelled),
        0,
        "{}",
        String::from_utf8_lossy(&cancelled.stderr)
    );
    let waited = waiting.await.unwrap();
    assert_eq!(code(&waited), 3);
    assert_eq!(stdout_json(&waited)["state"], "cancelled");
    // Cancelling again: the ask is over; one line on stderr, exit 1.
    let again = cli(&base, &["cancel", &id]).await.unwrap();
    assert_eq!(code(&again), 1);
    let err = String::from_utf8_lossy(&again.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("stale"), "{err}");
    // The chat is free again: the next ask there opens at once. Its `--from` names someone
    // else: the chat's owner may not answer it (403), and it stays open.
    let next = cli(
        &base,
        &["ask", "Next?", "--to", "web:ship", "--from", "alice"],
    )
    .await
    .unwrap();
    assert_eq!(stdout_json(&next)["state"], "open");
    let call = open_call(&base, "ship").await;
    let (status, body) = settle(
        &base,
        "ship",
        json!({"toolCallId": call["toolCallId"], "output": {"answers": [{"header": "Answer", "selected": ["OK"]}]}}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
    let id = stdout_json(&next)["id"].as_str().unwrap().to_owned();
    assert_eq!(
        get(&base, &format!("/api/asks/{id}")).await["state"],
        "open"
    );
}

#[tokio::test]
async fn bad_flags_and_bad_inputs_exit_1_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path()).await;
    let base = server.base.clone();
    for args in [
        vec!["ask", "x", "--bogus"],
        vec!["ask", "x", "--to", "nowhere"],
        vec!["ask", "x", "--text", "--number"],
        vec!["ask", "x", "--expires", "soon"],
        vec!["ask", "x", "--number", "--min", "5", "--max", "1"],
        vec!["ask", "x", "--choice", "A", "--default", "C"],
        vec!["wait", "no-such.ask"],
    ] {
        let out = cli(&base, &args).await.unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 1, "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("frogbot: "), "{err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // A display block with an event button, or one that does not read: refused by the server.
    for bad in [
        json!([{"kind": "confirm"}, {"type": "fields", "id": "f", "fields": [], "events": [{"label": "Go"}]}]),
        json!([{"kind": "confirm"}, {"type": "table", "columns": 3}]),
    ] {
        let file = dir.path().join("bad.json");
        std::fs::write(&file, bad.to_string()).unwrap();
        let out = cli(&base, &["ask", "x", "--blocks", file.to_str().unwrap()])
            .await
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 1, "{bad}: {err}");
        assert!(err.contains("`blocks`"), "{err}");
    }
    // The server is not there.
    let out = cli("http://127.0.0.1:9", &["ask", "x"]).await.unwrap();
    assert_eq!(code(&out), 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach"));
}

#[tokio::test]
async fn several_inputs_from_blocks_are_answered_together() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path()).await;
    let base = server.base.clone();
    let blocks = dir.path().join("blocks.json");
    std::fs::write(
        &blocks,
        json!([
            {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]},
            {"header": "Pods", "question": "How many?", "kind": "number_input", "min": 1, "max": 10},
            {"header": "Why", "question": "Reason?", "kind": "text_input", "maxLength": 20, "required": false},
            {"header": "Notify", "question": "Tell the team?", "kind": "toggle"},
            {"type": "table", "columns": ["service", "pods"], "rows": [["api", 3]]},
            {"type": "code", "language": "diff", "code": "- replicas: 3\n+ replicas: 4"}
        ])
        .to_string(),
    )
    .unwrap();
    let asked = cli(
        &base,
        &[
            "ask",
            "Release",
            "--to",
            "web:rel",
            "--blocks",
            blocks.to_str().unwrap(),
            "--wait",
            "--format",
            "text",
        ],
    );
    let call = open_call(&base, "rel").await;
    // The display blocks among them are shown with the inputs, not asked.
    let shown: Vec<&str> = call["input"]["blocks"]
        .as_array()
        .expect("the ask's display blocks")
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(shown, ["table", "code"], "{call}");
    assert_eq!(call["input"]["questions"].as_array().unwrap().len(), 4);
    let answer = |pods: &str| {
        json!({"toolCallId": call["toolCallId"], "output": {"answers": [
            {"header": "Env", "selected": ["prod"]},
            {"header": "Pods", "selected": [pods]},
            {"header": "Why", "selected": []},
            {"header": "Notify", "selected": ["on"]}
        ]}})
    };
    let (status, body) = settle(&base, "rel", answer("11")).await;
    assert_eq!(status, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("enter a number from 1 to 10"),
        "{body}"
    );
    let (status, _) = settle(&base, "rel", answer("4")).await;
    assert_eq!(status, 200);
    let out = asked.await.unwrap();
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Env: prod\nNotify: true\nPods: 4\nWhy: null"
    );
}

#[tokio::test]
async fn thirty_two_racing_answers_record_one_and_every_waiter_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path()).await;
    let base = server.base.clone();
    let created = cli(
        &base,
        &[
            "ask", "Which?", "--to", "web:race", "--choice", "A", "--choice", "B", "--choice", "C",
        ],
    )
    .await
    .unwrap();
    let id = stdout_json(&created)["id"].as_str().unwrap().to_owned();
    let call = open_call(&base, "race").await;
    let waiters: Vec<_> = (0..4).map(|_| cli(&base, &["wait", &id])).collect();
    let answers: Vec<_> = (0..32)
        .map(|i| {
            let base = base.clone();
            let pick = ["A", "B", "C"][i % 3];
            let body = json!({"toolCallId": call["toolCallId"], "output": {"answers": [
                {"header": "Answer", "selected": [pick]}]}});
            tokio::spawn(async move { settle(&base, "race", body).await })
        })
        .collect();
    let mut won = Vec::new();
    for a in answers {
        let (status, body) = a.await.unwrap();
        match status {
            200 => won.push(body),
            409 => assert_eq!(body["error"]["code"], "stale"),
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!(won.len(), 1, "{won:?}");
    let recorded = get(&base, &format!("/api/asks/{id}")).await;
    assert_eq!(recorded["state"], "answered");
    for w in waiters {
        let out = w.await.unwrap();
        assert_eq!(code(&out), 0);
        assert_eq!(stdout_json(&out)["values"], recorded["values"]);
    }
}
