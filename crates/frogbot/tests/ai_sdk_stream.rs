//! The AI SDK reads FrogBot's UI message stream: a real server in-process, and
//! `tests/js/read-stream.mjs` (the `ai` package's parser and `readUIMessageStream`) as the client.
//!
//! `blocks_are_typed_data_parts` checks that an agent's blocks reach a `useChat` front end as
//! typed `data-block-*` parts, through `GET /api/chats/{id}` (validated by the `ai` package's
//! `validateUIMessages` in `tests/js/validate-messages.mjs`) and the live events.
//!
//! Needs Node and the packages of `tests/js` (`bash scripts/install-test-tools.sh`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

struct Server {
    url: String,
    _db: frogbot_testkit::TestDb,
    task: tokio::task::JoinHandle<()>,
    worker: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
        self.worker.abort();
    }
}

async fn start_server() -> Server {
    start_server_with("").await
}

async fn start_server_with(toml: &str) -> Server {
    let db = frogbot_testkit::sqlite_db();
    let mut config = frogbot::Config::parse(toml).expect("config");
    config.database = db.url.clone();
    let engine = frogbot::build_engine(&config).await.expect("engine");
    let worker = engine.spawn_worker(Duration::from_millis(200));
    let app = frogbot::app(&config, engine);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    Server {
        url: format!("http://{addr}"),
        _db: db,
        task,
        worker,
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

/// Makes sure `tests/js/node_modules` exists, running `scripts/install-test-tools.sh` if not.
fn ensure_js_tools() -> PathBuf {
    let root = workspace_root();
    let js = root.join("crates/frogbot/tests/js");
    if !js.join("node_modules").is_dir() {
        let status = Command::new("bash")
            .arg(root.join("scripts/install-test-tools.sh"))
            .status()
            .expect("run scripts/install-test-tools.sh (needs bash)");
        assert!(
            status.success() && js.join("node_modules").is_dir(),
            "the test tools are missing: run `bash scripts/install-test-tools.sh` (installs chromium and the npm packages of crates/frogbot/tests/js)"
        );
    }
    js
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ai_sdk_reads_the_ui_message_stream() {
    let js = ensure_js_tools();
    let server = start_server().await;
    let script = js.join("read-stream.mjs");
    let url = server.url.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(script)
            .arg(url)
            .output()
            .expect("run node (is Node installed?)")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("--- read-stream.mjs stdout ---\n{stdout}");
    println!("--- read-stream.mjs stderr ---\n{stderr}");
    assert!(
        output.status.success(),
        "read-stream.mjs failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("read-stream: ok"), "no ok line:\n{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_are_typed_data_parts() {
    use futures::StreamExt;
    use serde_json::{Value, json};

    const TOKEN: &str = "agent-token-blocks";
    let js = ensure_js_tools();
    let server = start_server_with(&format!(
        "[[agents]]\nid = \"agent\"\ntoken = \"{TOKEN}\"\ntargets = [\"web\"]\n"
    ))
    .await;
    let http = reqwest::Client::new();
    let base = server.url.clone();
    let chat = "blocks-as-parts";
    let res = http
        .post(format!("{base}/api/agent-chats"))
        .bearer_auth(TOKEN)
        .json(&json!({"to": {"web": chat}}))
        .send()
        .await
        .expect("open");
    assert_eq!(
        res.status().as_u16(),
        201,
        "{}",
        res.text().await.unwrap_or_default()
    );

    // The live events, opened before the message is posted (as the web chat reads them).
    let events = http
        .get(format!("{base}/api/chats/{chat}/events"))
        .bearer_auth(TOKEN)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("events");
    assert_eq!(events.status().as_u16(), 200);
    let mut events = events.bytes_stream();

    let res = http
        .post(format!("{base}/api/chats/{chat}/agent-messages"))
        .bearer_auth(TOKEN)
        .json(&json!({
            "id": "m1",
            "title": "Report",
            "text": "Numbers:",
            "blocks": [
                {"type": "table", "id": "t1", "columns": ["a", "b"], "rows": [["1", "2"]],
                 "events": [{"label": "Refresh", "value": "refresh"}]},
                {"type": "progress", "id": "p1", "value": 1, "max": 2, "label": "Half"},
                {"type": "html", "id": "app", "html": "<p>hi</p>", "title": "App"},
                {"type": "hologram", "id": "h1", "beam": 7}
            ]
        }))
        .send()
        .await
        .expect("post");
    assert_eq!(
        res.status().as_u16(),
        201,
        "{}",
        res.text().await.unwrap_or_default()
    );

    let want = json!([
        {"type": "data-block-table", "id": "t1", "data": {
            "columns": ["a", "b"], "rows": [["1", "2"]],
            "events": [{"label": "Refresh", "value": "refresh"}]}},
        {"type": "data-block-progress", "id": "p1", "data": {"value": 1.0, "max": 2.0, "label": "Half"}},
        {"type": "data-block-html", "id": "app", "data": {"html": "<p>hi</p>", "title": "App"}},
        {"type": "data-block-hologram", "id": "h1", "data": {"beam": 7}}
    ]);
    let blocks_of = |m: &Value| -> Value {
        Value::Array(
            m["parts"]
                .as_array()
                .expect("parts")
                .iter()
                .filter(|p| {
                    p["type"]
                        .as_str()
                        .is_some_and(|t| t.starts_with("data-block-"))
                })
                .cloned()
                .map(|mut p| {
                    // An app's capability (for its web view) is the engine's, fresh each time.
                    if let Some(link) = p["data"].as_object_mut().and_then(|d| d.remove("link")) {
                        assert!(
                            frogbot_core::model::is_app_link(link.as_str().unwrap_or("")),
                            "{link}"
                        );
                    }
                    p
                })
                .collect(),
        )
    };

    // GET /api/chats/{id}: the blocks as data-block-* parts with their id and data, after the text.
    let got: Value = http
        .get(format!("{base}/api/chats/{chat}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    let m = &got["messages"][0];
    assert_eq!(m["id"], "m1", "{got}");
    assert_eq!(
        m["parts"][0],
        json!({"type": "text", "text": "Numbers:"}),
        "{m}"
    );
    assert_eq!(m["metadata"]["title"], "Report", "{m}");
    assert_eq!(blocks_of(m), want, "{m}");

    // The live events carry the same parts.
    let mut buf = String::new();
    let streamed = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let chunk = events.next().await.expect("stream open").expect("chunk");
            buf.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(cut) = buf.find("\n\n") {
                let frame: String = buf.drain(..cut + 2).collect();
                let Some(data) = frame.strip_prefix("data: ") else {
                    continue;
                };
                let v: Value = serde_json::from_str(data.trim()).expect("frame json");
                if v["type"] == "message" && v["message"]["id"] == "m1" {
                    return v["message"].clone();
                }
            }
        }
    })
    .await
    .expect("the message's frame");
    assert_eq!(blocks_of(&streamed), want, "{streamed}");

    // The AI SDK accepts the chat's messages as UI messages.
    let script = js.join("validate-messages.mjs");
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(script)
            .arg(base)
            .arg(chat)
            .arg(TOKEN)
            .output()
            .expect("run node (is Node installed?)")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success() && stdout.contains("validate-messages: ok"),
        "validate-messages.mjs failed:\n{stdout}"
    );
}
