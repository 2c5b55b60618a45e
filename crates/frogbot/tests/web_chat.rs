//! The web chat at `/` in a real browser: a server in-process, and `tests/js/web-chat.mjs`
//! (playwright-core driving the Debian `/usr/bin/chromium`, headless) sends `ask`, answers the
//! question with a click and waits for the agent's continued reply. It leaves a screenshot at
//! `target/web-chat.png` for a person to look at.
//!
//! `web_chat_draws_an_agents_messages` does the same with `tests/js/web-agent.mjs` on a chat an
//! outside agent talks in: the agent (this test, over HTTP with its bearer token) posts blocks, a
//! pin and an app, and edits, deletes, unpins and acknowledges while the page is open.
//!
//! Needs Node, Chromium and the packages of `tests/js` (`bash scripts/install-test-tools.sh`).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// The bearer token of the agent in `web_chat_draws_an_agents_messages`.
const AGENT_TOKEN: &str = "agent-token-web-chat";
/// The person the agent opened that chat for (a configured user; the page holds its token).
const PERSON_TOKEN: &str = "person-token-web-chat";

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
    if !js.join("node_modules").is_dir() || !Path::new("/usr/bin/chromium").exists() {
        let status = Command::new("bash")
            .arg(root.join("scripts/install-test-tools.sh"))
            .status()
            .expect("run scripts/install-test-tools.sh (needs bash)");
        assert!(
            status.success()
                && js.join("node_modules").is_dir()
                && Path::new("/usr/bin/chromium").exists(),
            "the test tools are missing: run `bash scripts/install-test-tools.sh` (installs chromium and the npm packages of crates/frogbot/tests/js)"
        );
    }
    js
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_chat_asks_and_continues_after_a_click() {
    let js = ensure_js_tools();
    let server = start_server().await;
    let script = js.join("web-chat.mjs");
    let target = workspace_root().join("target");
    std::fs::create_dir_all(&target).expect("target dir");
    let screenshot = target.join("web-chat.png");
    let url = server.url.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(script)
            .arg(url)
            .arg(&screenshot)
            .output()
            .expect("run node (is Node installed?)")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("--- web-chat.mjs stdout ---\n{stdout}");
    println!("--- web-chat.mjs stderr ---\n{stderr}");
    assert!(
        output.status.success(),
        "web-chat.mjs failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("web-chat: ok"), "no ok line:\n{stdout}");
}

/// The agent's side of `web_chat_draws_an_agents_messages`: plain HTTP calls with its token.
struct Agent {
    http: reqwest::Client,
    base: String,
    chat: String,
}

impl Agent {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(AGENT_TOKEN);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("request");
        let status = res.status().as_u16();
        let text = res.text().await.expect("body");
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    async fn expect(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        want: u16,
    ) -> Value {
        let (status, value) = self.call(method.clone(), path, body).await;
        assert_eq!(status, want, "{method} {path}: {value}");
        value
    }

    async fn post(&self, body: Value) {
        let path = format!("/api/chats/{}/agent-messages", self.chat);
        self.expect(reqwest::Method::POST, &path, Some(body), 201)
            .await;
    }

    /// Uploads `body` to the chat (as the agent) and returns its file part.
    async fn upload(&self, media: &str, name: &str, body: Vec<u8>) -> Value {
        let res = self
            .http
            .post(format!(
                "{}/api/chats/{}/files?name={name}",
                self.base, self.chat
            ))
            .bearer_auth(AGENT_TOKEN)
            .header("content-type", media)
            .header("x-frogbot-upload", "1")
            .body(body)
            .send()
            .await
            .expect("upload");
        assert_eq!(res.status().as_u16(), 201, "upload {name}");
        res.json::<Value>().await.expect("json")["part"].clone()
    }

    async fn inbox(&self) -> Vec<Value> {
        let v = self
            .expect(reqwest::Method::GET, "/api/inbox?wait=5", None, 200)
            .await;
        v["items"].as_array().cloned().unwrap_or_default()
    }

    /// Does what the page asks for; `Err` says why it could not.
    async fn act(&self, action: &str, person_message: &mut Option<String>) -> Result<(), String> {
        let chat = &self.chat;
        match action {
            "inbox-event" => {
                let items = self.inbox().await;
                let found = items.iter().any(|i| {
                    i["event"]["messageId"] == "m-blocks"
                        && i["event"]["blockId"] == "deploy"
                        && i["event"]["value"] == "approve"
                });
                if !found {
                    return Err(format!("no approve event in the inbox: {items:?}"));
                }
            }
            "inbox-app-event" => {
                let items = self.inbox().await;
                let events: Vec<&Value> = items.iter().map(|i| &i["event"]).collect();
                let found = events.iter().any(|e| {
                    e["messageId"] == "m-app" && e["blockId"] == "dash" && e["value"] == "refresh"
                });
                if !found || events.iter().any(|e| e["value"] == "drop-tables") {
                    return Err(format!("not just the app's refresh event: {items:?}"));
                }
            }
            "app-unpinned" => {
                let c = self
                    .expect(
                        reqwest::Method::GET,
                        &format!("/api/chats/{chat}"),
                        None,
                        200,
                    )
                    .await;
                let app = c["messages"]
                    .as_array()
                    .and_then(|ms| ms.iter().find(|m| m["id"] == "m-app"))
                    .cloned()
                    .unwrap_or_default();
                if app.is_null() || !app["metadata"]["pin"].is_null() {
                    return Err(format!("m-app is still pinned (or gone): {app}"));
                }
            }
            "edit" => {
                self.expect(
                    reqwest::Method::PATCH,
                    &format!("/api/chats/{chat}/agent-messages/m-edit"),
                    Some(json!({"text": "version two"})),
                    200,
                )
                .await;
            }
            "patch-progress" => {
                self.expect(
                    reqwest::Method::PATCH,
                    &format!("/api/chats/{chat}/agent-messages/m-blocks"),
                    Some(json!({"block": {"id": "steps", "type": "progress", "value": 4, "max": 4, "label": "Steps"}})),
                    200,
                )
                .await;
            }
            "delete" => {
                self.expect(
                    reqwest::Method::DELETE,
                    &format!("/api/chats/{chat}/agent-messages/m-delete"),
                    None,
                    204,
                )
                .await;
            }
            "unpin" => {
                self.expect(
                    reqwest::Method::DELETE,
                    &format!("/api/chats/{chat}/pins/status"),
                    None,
                    204,
                )
                .await;
            }
            "take" => {
                let items = self.inbox().await;
                let item = items
                    .iter()
                    .find(|i| i["message"]["parts"][0]["text"] == "hello agent")
                    .ok_or_else(|| {
                        format!("the person's message is not in the inbox: {items:?}")
                    })?;
                *person_message = item["message"]["id"].as_str().map(str::to_owned);
            }
            "working" | "done" => {
                let id = person_message.as_deref().ok_or("no message taken")?;
                self.expect(
                    reqwest::Method::POST,
                    &format!("/api/chats/{chat}/messages/{id}/ack"),
                    Some(json!({"state": action})),
                    204,
                )
                .await;
            }
            other => return Err(format!("unknown action {other:?}")),
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_chat_draws_an_agents_messages() {
    let js = ensure_js_tools();
    let server = start_server_with(&format!(
        "[[users]]\nid = \"person\"\ntoken = \"{PERSON_TOKEN}\"\n\n\
         [[agents]]\nid = \"agent\"\ntoken = \"{AGENT_TOKEN}\"\ntargets = [\"web:person\"]\n"
    ))
    .await;
    let chat = format!("web-agent-{}", std::process::id());
    let agent = Agent {
        http: reqwest::Client::new(),
        base: server.url.clone(),
        chat: chat.clone(),
    };
    let opened = agent
        .expect(
            reqwest::Method::POST,
            "/api/agent-chats",
            Some(json!({"to": {"web": chat, "user": "person"}})),
            201,
        )
        .await;
    assert_eq!(opened["chatId"], chat.as_str());

    // Every block type, with agent data that must stay text.
    agent
        .post(json!({
            "id": "m-blocks",
            "title": "Build report <img src=x onerror=\"window.__xss = 3\">",
            "text": "All the blocks:",
            "blocks": [
                {"type": "table", "columns": ["Name", "Value"], "rows": [
                    ["<script>window.__xss = 1</script>", "<img src=x onerror=\"window.__xss = 2\">"],
                    ["plain", 42]
                ]},
                {"type": "progress", "id": "steps", "value": 3, "max": 4, "label": "Steps"},
                {"type": "image", "url": format!("{}/no-such-frog.png", server.url), "alt": "A frog"},
                {"type": "code", "code": "fn main() {}", "language": "rust"},
                {"type": "fields", "id": "deploy", "fields": [
                    {"key": "Branch", "value": "main"},
                    {"key": "Note", "value": "<b>bold?</b>"}
                ], "events": [{"label": "Approve", "value": "approve"}, {"label": "Reject"}]},
                {"type": "hologram", "beam": 7}
            ]
        }))
        .await;
    agent
        .post(json!({"id": "m-status", "text": "Deploying 1/3", "pin": "status"}))
        .await;
    agent
        .post(json!({"id": "m-after", "text": "After the status"}))
        .await;
    // The app also sends its block's event through the bridge (and tries one it was not given).
    let app_html = "<!doctype html><p id=app>app ok</p>\
        <button id=ev>Refresh</button><button id=bad>Drop</button><script>\
        document.getElementById('app').textContent = 'app ran';\
        try { parent.document.body.dataset.pwned = '1'; } catch (e) { document.body.dataset.blocked = '1'; }\
        addEventListener('message', (e) => { if (e.data && e.data.type === 'frogbot:event-result') \
          document.body.setAttribute('data-result-' + e.data.value, String(e.data.sent)); });\
        const send = (value) => parent.postMessage({type: 'frogbot:event', value}, '*');\
        document.getElementById('ev').onclick = () => send('refresh');\
        document.getElementById('bad').onclick = () => send('drop-tables');\
        </script>";
    agent
        .post(json!({
            "id": "m-app",
            "blocks": [{"type": "html", "id": "dash", "html": app_html, "title": "Dashboard",
                        "events": [{"label": "Refresh", "value": "refresh"}]}],
            "pin": "dashboard"
        }))
        .await;
    // Files the agent sends: an image shown, a text file to download.
    const DOT_PNG: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0x64,
        0xf8, 0xcf, 0x50, 0x0f, 0x00, 0x03, 0x86, 0x01, 0x80, 0x5a, 0x34, 0x7d, 0x6b, 0x00, 0x00,
        0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
    let chart = agent
        .upload("image/png", "chart.png", DOT_PNG.to_vec())
        .await;
    let notes = agent
        .upload("text/plain", "notes.txt", b"weekly notes".to_vec())
        .await;
    agent
        .post(json!({"id": "m-files", "text": "Here are the files", "files": [chart, notes]}))
        .await;
    agent
        .post(json!({"id": "m-edit", "text": "version one"}))
        .await;
    agent
        .post(json!({"id": "m-delete", "text": "delete me"}))
        .await;

    let target = workspace_root().join("target");
    std::fs::create_dir_all(&target).expect("target dir");
    let mut child = Command::new("node")
        .arg(js.join("web-agent.mjs"))
        .arg(&server.url)
        .arg(&chat)
        .arg(target.join("web-agent.png"))
        .arg(PERSON_TOKEN)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node (is Node installed?)");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut transcript = String::new();
    let mut person_message = None;
    loop {
        let line = tokio::time::timeout(Duration::from_secs(150), lines.recv())
            .await
            .expect("web-agent.mjs went quiet");
        let Some(line) = line else { break };
        println!("{line}");
        transcript.push_str(&line);
        transcript.push('\n');
        if let Some(action) = line.strip_prefix("agent: ") {
            let reply = match agent.act(action, &mut person_message).await {
                Ok(()) => "ok".to_owned(),
                Err(why) => format!("fail: {why}"),
            };
            writeln!(stdin, "{reply}").expect("answer web-agent.mjs");
            stdin.flush().expect("flush");
        }
    }
    drop(stdin);
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("wait for node");
    let stderr = errors.join().unwrap_or_default();
    println!("--- web-agent.mjs stderr ---\n{stderr}");
    assert!(
        status.success() && transcript.contains("web-agent: ok"),
        "web-agent.mjs failed ({status}):\n{transcript}\n{stderr}"
    );
}

/// The web chat's placeholder for a block type it does not know is the model's sentence.
#[test]
fn web_chat_shows_the_models_unknown_block_text() {
    let script = include_str!("../src/web/app.js");
    assert!(
        script.contains(&format!(
            "const UNKNOWN_BLOCK_TEXT = \"{}\";",
            frogbot_model::blocks::UNKNOWN_BLOCK_TEXT
        )),
        "app.js's UNKNOWN_BLOCK_TEXT differs from frogbot_model::blocks::UNKNOWN_BLOCK_TEXT"
    );
}
