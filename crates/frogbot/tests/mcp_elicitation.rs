//! Elicitation through `frogbot serve` (issue 42 part 2): a scripted model calls server-everything's
//! `trigger-elicitation-request` (over stdio); the server's `elicitation/create` becomes a question
//! of the chat (listed by the HTTP API's `/pending`, as the web chat draws it), asked of the person
//! driving the turn. Answered, the typed values reach the server (it echoes the result it got);
//! dismissed, it gets `decline`; left to expire, `cancel`. The model then reads the server's
//! result. Skipped when node or the package is missing, unless `FROGBOT_REQUIRE_MCP=1`.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::Response;
use common::{ALICE, BOB, WAIT, client, msg};
use serde_json::{Value, json};

const TOOL: &str = "everything__trigger-elicitation-request";

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

/// The scripted model: calls the elicitation tool; after its result, says what it was.
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
    let mut all = match messages.iter().rev().find(|m| m["role"] == "tool") {
        Some(_) => vec![
            chunk(
                json!({"role": "assistant", "content": "The server has its answer."}),
                None,
            ),
            chunk(json!({}), Some("stop")),
        ],
        None => vec![
            chunk(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": TOOL, "arguments": "{}"}}]}),
                None,
            ),
            chunk(json!({}), Some("tool_calls")),
        ],
    };
    all.push("data: [DONE]\n\n".into());
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(all.concat()))
        .unwrap()
}

struct Serve {
    base: String,
    fake: Fake,
    stop: tokio::sync::oneshot::Sender<()>,
    serve: tokio::task::JoinHandle<Result<(), frogbot::Error>>,
}

impl Serve {
    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(WAIT, self.serve)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }

    /// The model's last request's tool result.
    fn last_tool_result(&self) -> String {
        let requests = self.fake.0.lock().unwrap().clone();
        let last = requests.last().unwrap();
        last["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_else(|| panic!("no tool result in {last}"))
            .to_owned()
    }
}

/// `serve` with the fake model and server-everything (only its elicitation tool offered); `mcp`
/// is the `[[mcp]]` table's extra lines.
async fn serve_with(entry: &std::path::Path, db: &frogbot_testkit::TestDb, mcp: &str) -> Serve {
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
tools = ["trigger-elicitation-request"]
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
    Serve {
        base,
        fake,
        stop,
        serve,
    }
}

async fn chat(base: &str, id: &str) -> Value {
    client()
        .get(format!("{base}/api/chats/{id}"))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn chat_when(base: &str, id: &str, state: &str) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let chat = chat(base, id).await;
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

/// Sends a message in a new chat `id` (alice drives the turn) until the turn waits on the
/// server's request: the server's tools are listed in the background, so the first turns may
/// run before it is offered.
async fn ask_in(base: &str, prefix: &str) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut n = 0;
    loop {
        n += 1;
        let id = format!("{prefix}-{n}");
        let mut body = msg("fill in the form");
        body["model"] = json!("fake");
        let r = client()
            .post(format!("{base}/api/chats/{id}/messages"))
            .bearer_auth(ALICE)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.status());
        let _ = r.bytes().await;
        let deadline_turn = tokio::time::Instant::now() + WAIT;
        let chat = loop {
            let chat = chat(base, &id).await;
            if chat["state"] != "running" {
                break chat;
            }
            assert!(tokio::time::Instant::now() < deadline_turn, "{chat}");
            tokio::time::sleep(Duration::from_millis(25)).await;
        };
        if chat["state"] == "awaiting" {
            return id;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never asked: {chat}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn tool_part(chat: &Value) -> Value {
    chat["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
        .find(|p| p["type"] == format!("tool-{TOOL}"))
        .unwrap_or_else(|| panic!("no elicitation call: {chat}"))
}

/// The pending call of the chat, as the web chat reads it.
async fn pending(base: &str, id: &str) -> Value {
    let pending: Value = client()
        .get(format!("{base}/api/chats/{id}/pending"))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let calls = pending["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{pending}");
    calls[0].clone()
}

/// The `Raw result` the server echoes in its tool result.
fn raw_result(output: &Value) -> Value {
    let texts: Vec<&str> = match output {
        Value::String(s) => vec![s.as_str()],
        other => other["content"]
            .as_array()
            .unwrap_or_else(|| panic!("{other}"))
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect(),
    };
    let raw = texts
        .iter()
        .find_map(|t| t.trim_start().strip_prefix("Raw result: "))
        .unwrap_or_else(|| panic!("no raw result in {output}"));
    serde_json::from_str(raw).unwrap()
}

/// A person's answers to server-everything's form, by header.
fn answers(call: &Value) -> Value {
    let answers: Vec<Value> = call["input"]["questions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            let header = q["header"].as_str().unwrap();
            let selected: Vec<&str> = match header {
                "String" => vec!["Ada Lovelace"],
                "Boolean" => vec!["on"],
                "String with email format" => vec!["ada@example.com"],
                "Integer" => vec!["7"],
                "Number in range 1-1000" => vec!["2.5"],
                "Untitled Multiple Select Enum" => vec!["Piano", "Drums"],
                "Titled Single Select Enum" => vec!["Wonder Woman"],
                "Legacy Titled Single Select Enum" => vec!["Birds"],
                // The rest is left empty (optional).
                _ => vec![],
            };
            json!({"header": header, "selected": selected})
        })
        .collect();
    json!({"answers": answers})
}

/// The request is drawn as one form asked of the driver; answered, the server gets `accept`
/// with the typed values; dismissed (in another chat), `decline`; the model reads the server's
/// result each time and the turn ends.
#[tokio::test]
async fn an_elicitation_is_drawn_answered_and_declined_through_serve() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(entry) = server_everything() else {
        return;
    };
    let db = frogbot_testkit::sqlite_db();
    let s = serve_with(&entry, &db, "").await;
    let http = client();

    let id = ask_in(&s.base, "elicit").await;
    let chat = chat(&s.base, &id).await;
    let part = tool_part(&chat);
    assert_eq!(part["state"], "input-available", "{part}");
    let reply = chat["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(
        reply["metadata"]["elicitations"]["call_1"]["id"], "call_1~1",
        "{reply}"
    );
    // Listed as the chat's question: every property an input, asked of alice (the driver).
    let call = pending(&s.base, &id).await;
    assert_eq!(call["toolCallId"], "call_1~1");
    assert_eq!(call["elicitation"]["toolName"], TOOL, "{call}");
    assert_eq!(call["input"]["from"], json!(["alice"]));
    let kinds: Vec<&str> = call["input"]["questions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["kind"].as_str().unwrap_or("choice"))
        .collect();
    assert_eq!(
        kinds,
        [
            "text_input",
            "toggle",
            "text_input",
            "text_input",
            "text_input",
            "text_input",
            "number_input",
            "number_input",
            "choice",
            "choice",
            "choice",
            "choice",
            "choice"
        ]
    );
    assert!(
        call["input"]["questions"][0]["question"]
            .as_str()
            .unwrap()
            .starts_with("Please provide inputs for the following fields:"),
        "{call}"
    );
    // Bob may not answer alice's chat.
    let r = http
        .post(format!("{}/api/chats/{id}/settle", s.base))
        .bearer_auth(BOB)
        .json(&json!({"toolCallId": "call_1~1", "output": answers(&call)}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // Alice answers: the server gets the typed values, the model its result.
    let r = http
        .post(format!("{}/api/chats/{id}/settle", s.base))
        .bearer_auth(ALICE)
        .json(&json!({"toolCallId": "call_1~1", "output": answers(&call)}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    let chat = chat_when(&s.base, &id, "idle").await;
    let part = tool_part(&chat);
    assert_eq!(part["state"], "output-available", "{part}");
    assert_eq!(
        raw_result(&part["output"]),
        json!({"action": "accept", "content": {
            "name": "Ada Lovelace",
            "check": true,
            "email": "ada@example.com",
            "integer": 7,
            "number": 2.5,
            "untitledMultipleSelectEnum": ["Piano", "Drums"],
            "titledSingleSelectEnum": "hero-3",
            "legacyTitledEnum": "pet-3"
        }})
    );
    assert!(
        s.last_tool_result()
            .contains("User provided the requested information"),
        "{}",
        s.last_tool_result()
    );
    let reply = chat["messages"].as_array().unwrap().last().unwrap();
    assert!(
        reply["parts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["text"] == "The server has its answer."),
        "{reply}"
    );
    // A second answer is stale.
    let r = http
        .post(format!("{}/api/chats/{id}/settle", s.base))
        .bearer_auth(ALICE)
        .json(&json!({"toolCallId": "call_1~1", "output": answers(&call)}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);

    // Dismissed: `decline`, and the turn goes on with the server's result.
    let id = ask_in(&s.base, "decline").await;
    let r = http
        .post(format!("{}/api/chats/{id}/settle", s.base))
        .bearer_auth(ALICE)
        .json(&json!({"toolCallId": "call_1~1", "dismissed": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    let chat = chat_when(&s.base, &id, "idle").await;
    let part = tool_part(&chat);
    assert_eq!(part["state"], "output-available", "{part}");
    assert_eq!(raw_result(&part["output"]), json!({"action": "decline"}));
    assert!(
        s.last_tool_result().contains("User declined"),
        "{}",
        s.last_tool_result()
    );
    s.stop().await;
}

/// `elicitation_expires_seconds`: left unanswered, the request expires and the server gets
/// `cancel` (never a hang); the turn goes on with its result.
#[tokio::test]
async fn an_unanswered_elicitation_expires_as_cancel() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(entry) = server_everything() else {
        return;
    };
    let db = frogbot_testkit::sqlite_db();
    let s = serve_with(&entry, &db, "elicitation_expires_seconds = 1\n").await;
    let id = ask_in(&s.base, "expire").await;
    let call = pending(&s.base, &id).await;
    assert_eq!(call["input"]["expiresInSeconds"], 1);
    assert!(call["expiresAt"].is_string(), "{call}");
    assert!(tool_part(&chat(&s.base, &id).await)["expiresAt"].is_string());
    let chat = chat_when(&s.base, &id, "idle").await;
    let part = tool_part(&chat);
    assert_eq!(part["state"], "output-available", "{part}");
    assert_eq!(raw_result(&part["output"]), json!({"action": "cancel"}));
    assert!(
        s.last_tool_result().contains("User cancelled"),
        "{}",
        s.last_tool_result()
    );
    s.stop().await;
}

/// On Telegram (the real `frogbot serve` binary against the fake Bot API): the request is drawn
/// natively — a ForceReply prompt per text and number field, one card with the toggle, the
/// choices and "📨 Send answers" — the person replies to the required field's prompt and sends;
/// the server gets `accept` with the value, and the model's answer is posted in the chat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telegram_user_answers_an_elicitation_natively() {
    use common::child::{config_file, free_port, frogbot, start};
    use frogbot_telegram::testing::{Call, FakeBotApi, private_chat, user};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(entry) = server_everything() else {
        return;
    };
    let fake_model = Fake::default();
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(fake_model.clone());
    let model_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let model_base = format!("http://{}/v1", model_listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(model_listener, app).await.unwrap() });
    let bot = FakeBotApi::start().await;
    let db = frogbot_testkit::sqlite_db();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let path = config_file(
        dir.path(),
        port,
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
tools = ["trigger-elicitation-request"]

[channels.telegram]
token_env = "FROGBOT_TEST_TELEGRAM_TOKEN"
api_url = "{}"

[channels.telegram.users]
"42" = "ada"
"#,
            entry.display(),
            bot.url
        ),
    );
    let mut cmd = frogbot();
    cmd.arg("serve")
        .arg("--config")
        .arg(&path)
        .env("FROGBOT_TEST_TELEGRAM_TOKEN", "123456:TEST-token");
    let _serve = start(cmd, port).await;

    // The latest prompt (a question is drawn again below a message that arrives meanwhile).
    let prompt_for = |calls: &[Call], about: &str| -> Option<i64> {
        calls.iter().rev().find_map(|c| {
            (c.method == "sendmessage"
                && c.body["chat_id"] == 42
                && !c.body["reply_markup"]["force_reply"].is_null()
                && c.body["text"].as_str().is_some_and(|t| t.contains(about)))
            .then(|| c.result.as_ref()?["message_id"].as_i64())
            .flatten()
        })
    };
    // The server's tools are listed in the background: Ada writes until the form is asked.
    let deadline = tokio::time::Instant::now() + WAIT;
    let name_prompt = loop {
        let from = bot.all_calls().len();
        let update = bot.user_message(
            private_chat(42, "Ada"),
            user(42, "Ada"),
            "fill the form",
            None,
        );
        bot.push(update);
        let asked = bot
            .wait_for("the form, or the turn's end", |calls| {
                let calls = &calls[from.min(calls.len())..];
                prompt_for(calls, "Your full, legal name").or_else(|| {
                    // A turn that ran before the tool was listed ends without asking.
                    calls
                        .iter()
                        .any(|c| {
                            c.method == "sendmessage"
                                && c.body["text"] == "The server has its answer."
                        })
                        .then_some(-1)
                })
            })
            .await;
        if asked > 0 {
            break asked;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the form was never asked"
        );
    };
    // The card: the choices and toggle as buttons, Send answers, Skip.
    let card = bot
        .wait_for("the card", |calls| {
            calls.iter().rev().find_map(|c| {
                let buttons = c.body["reply_markup"]["inline_keyboard"].to_string();
                (c.method == "sendmessage"
                    && c.body["chat_id"] == 42
                    && buttons.contains("📨 Send answers"))
                .then(|| c.result.as_ref()?["message_id"].as_i64())
                .flatten()
            })
        })
        .await;
    let keyboard = bot.sent(card)["reply_markup"]["inline_keyboard"].to_string();
    for label in ["Wonder Woman", "Birds", "Piano", "Skip"] {
        assert!(keyboard.contains(label), "{label} in {keyboard}");
    }
    // FrogBot has recorded the drawing (an answer before that is out of date).
    let store = frogbot_testkit::open_store(&db.url).await;
    let chat = frogbot_core::agent::channel_chat_id("telegram", "42");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let q = store
            .get_question(&chat, "call_1~1", frogbot_core::model::now_millis())
            .await
            .unwrap();
        if q.is_some_and(|q| q.rendered && !q.posting) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the question was never recorded as drawn"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Ada replies to the name's prompt, then sends.
    let reply = bot.user_message(
        private_chat(42, "Ada"),
        user(42, "Ada"),
        "Ada Lovelace",
        Some(name_prompt),
    );
    bot.push(reply);
    bot.wait_for("the card to show the answer", |calls| {
        calls
            .iter()
            .any(|c| {
                c.method == "editmessagetext"
                    && c.body["message_id"] == card
                    && c.body["text"]
                        .as_str()
                        .is_some_and(|t| t.contains("Ada Lovelace"))
            })
            .then_some(())
    })
    .await;
    let data = bot.sent(card)["reply_markup"]["inline_keyboard"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap().iter())
        .find(|b| b["text"] == "📨 Send answers")
        .unwrap()["callback_data"]
        .as_str()
        .unwrap()
        .to_owned();
    bot.push(bot.click(&user(42, "Ada"), card, &data));
    bot.wait_for("the model's answer", |calls| {
        calls
            .iter()
            .any(|c| c.method == "sendmessage" && c.body["text"] == "The server has its answer.")
            .then_some(())
    })
    .await;
    // The server got `accept` with the name Ada typed.
    let requests = fake_model.0.lock().unwrap().clone();
    let result = requests.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_owned();
    let output: Value = serde_json::from_str(&result).unwrap_or(Value::String(result.clone()));
    let raw = raw_result(&output);
    assert_eq!(raw["action"], "accept", "{raw}");
    assert_eq!(raw["content"]["name"], "Ada Lovelace", "{raw}");
    assert_eq!(raw["content"]["check"], false, "the toggle as shown: {raw}");
}
