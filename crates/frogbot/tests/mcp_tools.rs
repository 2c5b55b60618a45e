//! `[[mcp]]` in `frogbot serve` (issue 21): a real MCP server nobody here wrote
//! (`@modelcontextprotocol/server-everything` from npm, over stdio) gives the agent its tools.
//! The model is a fake OpenAI-compatible server (in this file) that calls `everything__echo`:
//! its requests show the MCP tools in the provider's wire format (`{"type": "function",
//! "function": {"name", "description", "parameters"}}`), the call reaches the MCP server, and
//! its result reaches the model and the chat. Skipped when node or the package is missing,
//! unless `FROGBOT_REQUIRE_MCP=1`.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::Response;
use common::{ALICE, BOB, WAIT, client, msg};
use serde_json::{Value, json};

/// The package's entry point, if it is installed (`scripts/install-test-tools.sh`).
fn server_everything() -> Option<std::path::PathBuf> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../frogbot-mcp/tests/js/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    match (node, path.exists()) {
        (true, true) => Some(path),
        _ if std::env::var("FROGBOT_REQUIRE_MCP").is_ok_and(|v| v == "1") => {
            panic!(
                "FROGBOT_REQUIRE_MCP=1 but node or {} is missing",
                path.display()
            )
        }
        _ => {
            eprintln!(
                "skipped: node or server-everything is missing (scripts/install-test-tools.sh)"
            );
            None
        }
    }
}

/// The fake model's requests.
#[derive(Clone, Default)]
struct Fake(Arc<Mutex<Vec<Value>>>);

fn offers(body: &Value, tool: &str) -> bool {
    body["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == tool))
}

async fn completions(State(fake): State<Fake>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    fake.0.lock().unwrap().push(body.clone());
    let chunk = |delta: Value, finish: Option<&str>| {
        let c = json!({
            "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": body["model"], "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        format!("data: {c}\n\n")
    };
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let pieces = match messages.iter().rev().find(|m| m["role"] == "tool") {
        // After the tool's result: say what it was.
        Some(result) => vec![
            chunk(
                json!({"role": "assistant", "content": format!("The tool said: {}", result["content"].as_str().unwrap_or("?"))}),
                None,
            ),
            chunk(json!({}), Some("stop")),
        ],
        // The counter server's tool when it is offered (the kill test), else echo.
        None if offers(&body, "counter__record") => vec![
            chunk(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": "counter__record", "arguments": "{\"note\": \"once\"}"}}]}),
                None,
            ),
            chunk(json!({}), Some("tool_calls")),
        ],
        None => vec![
            chunk(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": "everything__echo", "arguments": "{\"message\": \"hi frog\"}"}}]}),
                None,
            ),
            chunk(json!({}), Some("tool_calls")),
        ],
    };
    let mut all = pieces;
    all.push("data: [DONE]\n\n".into());
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(all.concat()))
        .unwrap()
}

#[tokio::test]
async fn an_mcp_servers_tools_reach_the_model_and_run() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(entry) = server_everything() else {
        return;
    };
    let fake = Fake::default();
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(fake.clone());
    let model_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let model_base = format!("http://{}/v1", model_listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(model_listener, app).await.unwrap() });

    let db = frogbot_testkit::sqlite_db();
    let config = common::config_with(
        &db.url,
        &format!(
            r#"
[[models]]
id = "fake"
provider = "openai-compatible"
base_url = "{model_base}"

[[mcp]]
id = "everything"
command = "node"
args = ["{}", "stdio"]
tools = ["echo", "get-sum"]
"#,
            entry.display()
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serve = tokio::spawn(frogbot::serve(
        config,
        listener,
        async move {
            let _ = stopped.await;
        },
        Duration::from_secs(5),
    ));

    let http = client();
    let mut body = msg("echo something");
    body["model"] = json!("fake");
    let deadline = tokio::time::Instant::now() + WAIT;
    // The server is up once it answers.
    let sent = loop {
        match http
            .post(format!("{base}/api/chats/mcp-1/messages"))
            .bearer_auth(ALICE)
            .json(&body)
            .send()
            .await
        {
            Ok(r) => break r,
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("frogbot serve did not answer: {e}"),
        }
    };
    assert!(sent.status().is_success(), "{}", sent.status());
    let _ = sent.bytes().await;
    let chat = loop {
        let chat: Value = http
            .get(format!("{base}/api/chats/mcp-1"))
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if chat["state"] == "idle" && chat["messages"].as_array().is_some_and(|m| m.len() == 2) {
            break chat;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn did not end: {chat}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let reply = &chat["messages"][1];
    let tool = reply["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "tool-everything__echo")
        .unwrap_or_else(|| panic!("no tool part: {reply}"));
    assert_eq!(tool["state"], "output-available", "{tool}");
    assert_eq!(tool["output"], "Echo: hi frog");
    let text: String = reply["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(text, "The tool said: \"Echo: hi frog\"");

    // The provider saw the MCP tools (the allow-list's only) as functions with their schemas.
    let requests = fake.0.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    let tools = requests[0]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(names.contains(&"everything__echo"), "{names:?}");
    // With the built-in tools, which are on by default.
    for builtin in [
        "question",
        "fetch_url",
        "send_message",
        "edit_message",
        "set_status",
    ] {
        assert!(names.contains(&builtin), "{builtin} in {names:?}");
    }
    assert!(names.contains(&"everything__get-sum"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("everything__get-tiny")),
        "{names:?}"
    );
    let echo = tools
        .iter()
        .find(|t| t["function"]["name"] == "everything__echo")
        .unwrap();
    assert_eq!(echo["type"], "function");
    assert_eq!(echo["function"]["parameters"]["type"], "object");
    assert!(
        echo["function"]["parameters"]["properties"]["message"].is_object(),
        "{echo}"
    );

    let _ = stop.send(());
    tokio::time::timeout(WAIT, serve)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// `serve` with the fake model and server-everything (`mcp` is the `[[mcp]]` table's extra
/// lines); returns its base URL, the fake's requests and the stop switch.
async fn serve_with(
    entry: &std::path::Path,
    db: &frogbot_testkit::TestDb,
    mcp: &str,
) -> (
    String,
    Fake,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), frogbot::Error>>,
) {
    let fake = Fake::default();
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(fake.clone());
    let model_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let model_base = format!("http://{}/v1", model_listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(model_listener, app).await.unwrap() });
    let config = common::config_with(
        &db.url,
        &format!(
            r#"
[[models]]
id = "fake"
provider = "openai-compatible"
base_url = "{model_base}"

[[mcp]]
id = "everything"
command = "node"
args = ["{}", "stdio"]
tools = ["echo"]
{mcp}
"#,
            entry.display()
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serve = tokio::spawn(frogbot::serve(
        config,
        listener,
        async move {
            let _ = stopped.await;
        },
        Duration::from_secs(5),
    ));
    // Up once it answers.
    let deadline = tokio::time::Instant::now() + WAIT;
    while client()
        .get(format!("{base}/healthz"))
        .send()
        .await
        .is_err()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "serve did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (base, fake, stop, serve)
}

/// Runs `tests/js/approval.mjs` (the AI SDK reading the stream or the stored messages); returns
/// the tool parts it read.
async fn approval_js(args: &[&str]) -> Value {
    let js = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    assert!(
        js.join("node_modules/ai").exists(),
        "the `ai` package is missing (scripts/install-test-tools.sh)"
    );
    // Not `std::process`: the server runs on this test's runtime thread.
    let out = tokio::process::Command::new("node")
        .arg(js.join("approval.mjs"))
        .args(args)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("approval: ok "))
        .unwrap_or_else(|| {
            panic!(
                "approval.mjs failed:\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(line).unwrap()
}

async fn chat_when(base: &str, id: &str, state: &str) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let chat: Value = client()
            .get(format!("{base}/api/chats/{id}"))
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if chat["state"] == state {
            return chat;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the chat did not get {state}: {chat}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn echo_part(chat: &Value) -> Value {
    chat["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
        .find(|p| p["type"] == "tool-everything__echo")
        .unwrap_or_else(|| panic!("no echo call: {chat}"))
}

fn approval_answer(call: &str, pick: &str) -> Value {
    json!({"toolCallId": call, "output": {"answers": [{"header": "Approval", "selected": [pick]}]}})
}

/// `approval = "always"`: the call waits as a question the HTTP API lists and the AI SDK reads
/// (`tool-approval-request`, state `approval-requested`); someone else than the driver is
/// refused; the driver's Approve runs it once on the MCP server and the model continues with its
/// result; a Deny with a reason never runs it and the model reads why.
#[tokio::test]
async fn an_mcp_call_waits_for_approval_through_the_http_api() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(entry) = server_everything() else {
        return;
    };
    let db = frogbot_testkit::sqlite_db();
    let (base, fake, stop, serve) = serve_with(
        &entry,
        &db,
        "approval = \"always\"\napproval_expires_seconds = 600\n",
    )
    .await;
    let http = client();

    // The AI SDK reads the stream: the call asks for approval.
    let parts = approval_js(&["stream", &base, "appr-1", ALICE, "fake", "echo something"]).await;
    assert_eq!(parts[0]["type"], "tool-everything__echo", "{parts}");
    assert_eq!(parts[0]["state"], "approval-requested", "{parts}");
    assert_eq!(parts[0]["approval"]["id"], "call_1", "{parts}");
    let chat = chat_when(&base, "appr-1", "awaiting").await;
    let part = echo_part(&chat);
    assert_eq!(part["state"], "approval-requested");
    assert_eq!(part["input"], json!({"message": "hi frog"}));
    assert!(part["expiresAt"].is_string(), "{part}");
    // The stored messages are valid AI SDK UI messages.
    let stored = approval_js(&["validate", &base, "appr-1", ALICE]).await;
    assert_eq!(stored[0]["state"], "approval-requested", "{stored}");

    // The pending call: the question, and what it approves.
    let pending: Value = http
        .get(format!("{base}/api/chats/appr-1/pending"))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let call = &pending["calls"][0];
    assert_eq!(call["toolName"], "question", "{pending}");
    assert_eq!(call["approval"]["toolName"], "everything__echo");
    assert_eq!(call["approval"]["toolInput"], json!({"message": "hi frog"}));
    assert_eq!(call["input"]["from"], json!(["alice"]));
    let labels: Vec<&str> = call["input"]["questions"][0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["label"].as_str())
        .collect();
    assert_eq!(labels, ["Approve", "Deny"]);
    assert!(call["expiresAt"].is_string());
    assert_eq!(fake.0.lock().unwrap().len(), 1, "the model waits too");

    // Bob may not approve alice's call (the chat is alice's: 403 either way).
    let r = http
        .post(format!("{base}/api/chats/appr-1/settle"))
        .bearer_auth(BOB)
        .json(&approval_answer("call_1", "Approve"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        chat_when(&base, "appr-1", "awaiting").await["state"],
        "awaiting"
    );

    // Alice approves: the call runs on the MCP server, the model reads its result.
    let r = http
        .post(format!("{base}/api/chats/appr-1/settle"))
        .bearer_auth(ALICE)
        .json(&approval_answer("call_1", "Approve"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let chat = chat_when(&base, "appr-1", "idle").await;
    let part = echo_part(&chat);
    assert_eq!(part["state"], "output-available", "{part}");
    assert_eq!(part["output"], "Echo: hi frog");
    assert_eq!(part["approval"]["approved"], true);
    assert_eq!(part["approval"]["by"], "alice");
    assert!(part["approval"]["at"].is_string());
    let reply = chat["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(reply["metadata"]["approvals"]["call_1"]["approved"], true);
    let text: String = reply["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(text, "The tool said: \"Echo: hi frog\"");
    let stored = approval_js(&["validate", &base, "appr-1", ALICE]).await;
    assert_eq!(stored[0]["state"], "output-available", "{stored}");
    assert_eq!(stored[0]["approval"]["approved"], true, "{stored}");
    // A second approval is stale.
    let r = http
        .post(format!("{base}/api/chats/appr-1/settle"))
        .bearer_auth(ALICE)
        .json(&approval_answer("call_1", "Approve"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);

    // Deny with a reason: never runs; the model reads the reason.
    let mut body = msg("echo again");
    body["model"] = json!("fake");
    let r = http
        .post(format!("{base}/api/chats/appr-2/messages"))
        .bearer_auth(ALICE)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let _ = r.bytes().await;
    chat_when(&base, "appr-2", "awaiting").await;
    let r = http
        .post(format!("{base}/api/chats/appr-2/settle"))
        .bearer_auth(ALICE)
        .json(&approval_answer("call_1", "not in production"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let chat = chat_when(&base, "appr-2", "idle").await;
    let part = echo_part(&chat);
    assert_eq!(part["state"], "output-denied", "{part}");
    assert_eq!(part["approval"]["approved"], false);
    assert_eq!(part["approval"]["reason"], "not in production");
    assert!(part.get("output").is_none());
    let requests = fake.0.lock().unwrap().clone();
    let last = requests.last().unwrap();
    let result = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let content = result["content"].as_str().unwrap();
    assert!(
        content.contains("denied") && content.contains("not in production"),
        "{content}"
    );
    let stored = approval_js(&["validate", &base, "appr-2", ALICE]).await;
    assert_eq!(stored[0]["state"], "output-denied", "{stored}");

    let _ = stop.send(());
    tokio::time::timeout(WAIT, serve)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// SIGKILL while an approval waits: a new `frogbot serve` on the same database takes the answer
/// and runs the call exactly once (counted by the MCP server itself, in a file).
#[tokio::test]
async fn an_approval_waiting_across_kill_9_runs_once_after_the_restart() {
    use common::child::{config_file, free_port, frogbot, start};
    let _ = rustls::crypto::ring::default_provider().install_default();
    if server_everything().is_none() {
        return;
    }
    let counter = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../frogbot-mcp/tests/js/counter-server.mjs");
    let fake = Fake::default();
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(fake.clone());
    let model_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let model_base = format!("http://{}/v1", model_listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(model_listener, app).await.unwrap() });
    let dir = tempfile::tempdir().unwrap();
    let db = frogbot_testkit::sqlite_db();
    let calls = dir.path().join("calls.txt");
    let port = free_port();
    let path = config_file(
        dir.path(),
        port,
        &db.url,
        &format!(
            r#"
anonymous = "chat"

[[users]]
id = "ops"
token = "ops-token-1"

[[models]]
id = "fake"
provider = "openai-compatible"
base_url = "{model_base}"

[[mcp]]
id = "counter"
command = "node"
args = ["{}"]
approval = "always"
approvers = ["ops"]
env = {{ COUNTER_FILE = "{}" }}
"#,
            counter.display(),
            calls.display()
        ),
    );
    let serve = || {
        let mut cmd = frogbot();
        cmd.arg("serve").arg("--config").arg(&path);
        cmd
    };
    let http = client();
    let mut first = start(serve(), port).await;
    let base = first.base.clone();
    let mut body = msg("record it");
    body["model"] = json!("fake");
    // The server's tools are listed in the background: ask (in a new chat) until they are offered.
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut n = 0;
    let id = loop {
        n += 1;
        let id = format!("killed-{n}");
        let r = http
            .post(format!("{base}/api/chats/{id}/messages"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.status());
        let _ = r.bytes().await;
        let chat = chat_when_any(&base, &id).await;
        if chat["state"] == "awaiting" {
            break id;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never asked: {chat}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(!calls.exists(), "nothing ran before the approval");
    first.child.kill().unwrap(); // SIGKILL
    let _ = first.child.wait();

    let second = start(serve(), port).await;
    let r = http
        .post(format!("{}/api/chats/{id}/settle", second.base))
        // The configured approver (an anonymous chat has no driver to ask).
        .bearer_auth("ops-token-1")
        .json(&approval_answer("call_1", "Approve"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    let deadline = tokio::time::Instant::now() + WAIT;
    let chat = loop {
        let chat = chat_when_any(&second.base, &id).await;
        if chat["state"] == "idle" {
            break chat;
        }
        assert!(tokio::time::Instant::now() < deadline, "{chat}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let part = chat["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
        .find(|p| p["type"] == "tool-counter__record")
        .unwrap();
    assert_eq!(part["state"], "output-available", "{part}");
    assert_eq!(part["output"], "recorded once");
    assert_eq!(
        std::fs::read_to_string(&calls).unwrap(),
        "once\n",
        "the call ran exactly once"
    );
    drop(second);
}

async fn chat_when_any(base: &str, id: &str) -> Value {
    client()
        .get(format!("{base}/api/chats/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The web chat draws the approval as a card (the tool, its arguments, Approve / Deny / a
/// reason) and the call as waiting; Approve runs it, and the call is shown done with its
/// arguments, result and who approved it (headless Chromium, `tests/js/web-approval.mjs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_chat_shows_an_approval_and_the_approved_call() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(entry) = server_everything() else {
        return;
    };
    let js = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    assert!(
        js.join("node_modules/playwright-core").exists()
            && std::path::Path::new("/usr/bin/chromium").exists(),
        "chromium or playwright-core is missing (scripts/install-test-tools.sh)"
    );
    let db = frogbot_testkit::sqlite_db();
    let (base, _fake, stop, serve) = serve_with(&entry, &db, "approval = \"always\"\n").await;
    let shot =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/web-approval.png");
    let out = tokio::process::Command::new("node")
        .arg(js.join("web-approval.mjs"))
        .arg(&base)
        .arg(ALICE)
        .arg(&shot)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!(
        "--- web-approval.mjs ---\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && stdout.contains("web-approval: ok"),
        "web-approval.mjs failed:\n{stdout}"
    );
    let _ = stop.send(());
    tokio::time::timeout(WAIT, serve)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
