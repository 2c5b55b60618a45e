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
use common::{ALICE, WAIT, client, msg};
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
