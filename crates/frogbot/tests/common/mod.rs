//! Shared helpers of the HTTP tests: a real `frogbot` server on 127.0.0.1:0 over a fresh database,
//! and a small client that returns status, `X-FrogBot-Chat-Id` and the JSON body.

#![allow(dead_code)]

pub(crate) mod child;
pub(crate) mod crash_support;
pub(crate) mod mcp;

use std::time::Duration;

use frogbot_core::agent::Engine;
use frogbot_testkit::TestDb;
use futures::StreamExt;
use serde_json::{Value, json};

pub(crate) const ALICE: &str = "alice-token";
pub(crate) const BOB: &str = "bob-token";

/// How long any wait in these tests may take before it fails.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// A server started in-process.
pub(crate) struct Server {
    pub(crate) base: String,
    pub(crate) engine: Engine,
    pub(crate) client: reqwest::Client,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An agent allowed every platform and web chats for any user.
pub(crate) const AGENT: &str = "deploy-agent-token";
/// An agent allowed only Slack's channel C0123.
pub(crate) const NARROW_AGENT: &str = "narrow-agent-token";

/// The configuration of a test server on `database` (demo model, users alice and bob, agents
/// `deploy` and `narrow`; anonymous callers admitted to the web chat, as the contract's tests
/// need — see [`config_closed`] for the default with users).
pub(crate) fn config(database: &str) -> frogbot::Config {
    config_with(database, "")
}

/// [`config`] with `extra` TOML appended (e.g. `[[models]]`).
pub(crate) fn config_with(database: &str, extra: &str) -> frogbot::Config {
    config_text(database, "anonymous = \"chat\"", extra)
}

/// [`config`] without `anonymous`: with users configured, anonymous callers get nothing.
pub(crate) fn config_closed(database: &str, extra: &str) -> frogbot::Config {
    config_text(database, "", extra)
}

fn config_text(database: &str, top: &str, extra: &str) -> frogbot::Config {
    let text = format!(
        r#"
listen = "127.0.0.1:0"
database = "{database}"
{top}

[[users]]
id = "alice"
token = "{ALICE}"

[[users]]
id = "bob"
token = "{BOB}"

[[agents]]
id = "deploy"
token = "{AGENT}"
targets = ["slack:*", "discord:*", "telegram:*", "matrix:*", "web:*"]

[[agents]]
id = "narrow"
token = "{NARROW_AGENT}"
targets = ["slack:C0123"]
{extra}
"#
    );
    let config = frogbot::Config::parse(&text).expect("test config parses");
    config.validate().expect("test config is valid");
    config
}

pub(crate) fn client() -> reqwest::Client {
    frogbot_openai::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
}

/// Starts a server on `db` (a second call on the same database is a second "process": its own
/// engine and store pool).
pub(crate) async fn start(db: &TestDb) -> Server {
    start_with(db, "").await
}

/// [`start`] with `extra` TOML in the configuration.
pub(crate) async fn start_with(db: &TestDb, extra: &str) -> Server {
    start_config(config_with(&db.url, extra)).await
}

/// A server on `config`.
pub(crate) async fn start_config(config: frogbot::Config) -> Server {
    let engine = frogbot::build_engine(&config).await.expect("engine");
    let app = frogbot::app(&config, engine.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let limits = config.server.clone();
    let task = tokio::spawn(async move {
        frogbot::server::run(listener, app, &limits, std::future::pending(), WAIT)
            .await
            .expect("serve");
    });
    Server {
        base: format!("http://{addr}"),
        engine,
        client: client(),
        task,
    }
}

/// A response: status, chat header, body (JSON when it parses, else `Value::Null`) and raw text.
#[derive(Debug, Clone)]
pub(crate) struct Resp {
    pub(crate) status: u16,
    pub(crate) chat: Option<String>,
    pub(crate) content_type: Option<String>,
    pub(crate) json: Value,
    pub(crate) text: String,
}

impl Resp {
    /// Asserts an error response: `status`, exactly `{"error": {"code", "message"}}`, `code`.
    #[track_caller]
    pub(crate) fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status, status, "status of {self:?}");
        let top = self.json.as_object().expect("error body is an object");
        assert_eq!(top.len(), 1, "only `error` at the top: {}", self.text);
        let err = top["error"].as_object().expect("`error` is an object");
        assert_eq!(err.len(), 2, "only code and message: {}", self.text);
        assert_eq!(err["code"], json!(code), "code of {}", self.text);
        assert!(
            err["message"].as_str().is_some_and(|m| !m.is_empty()),
            "a message: {}",
            self.text
        );
    }

    /// Asserts the chat header names `chat`.
    #[track_caller]
    pub(crate) fn assert_chat(&self, chat: &str) {
        assert_eq!(
            self.chat.as_deref(),
            Some(chat),
            "X-FrogBot-Chat-Id on {self:?}"
        );
    }
}

impl Server {
    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<RawBody>,
    ) -> Resp {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if path
            .split('?')
            .next()
            .is_some_and(|p| p.ends_with("/files"))
        {
            req = req.header("x-frogbot-upload", "1");
        }
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        match body {
            Some(RawBody::Json(v)) => req = req.json(&v),
            Some(RawBody::Text(t)) => {
                req = req
                    .header("content-type", "application/json")
                    .body(t.to_string());
            }
            None => {}
        }
        let res = req.send().await.expect("request");
        let status = res.status().as_u16();
        let chat = res
            .headers()
            .get("x-frogbot-chat-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let content_type = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = res.text().await.expect("body");
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        Resp {
            status,
            chat,
            content_type,
            json,
            text,
        }
    }

    pub(crate) async fn get(&self, path: &str, token: Option<&str>) -> Resp {
        self.call(reqwest::Method::GET, path, token, None).await
    }

    pub(crate) async fn post(&self, path: &str, token: Option<&str>, body: Value) -> Resp {
        self.call(
            reqwest::Method::POST,
            path,
            token,
            Some(RawBody::Json(body)),
        )
        .await
    }

    pub(crate) async fn patch(&self, path: &str, token: Option<&str>, body: Value) -> Resp {
        self.call(
            reqwest::Method::PATCH,
            path,
            token,
            Some(RawBody::Json(body)),
        )
        .await
    }

    pub(crate) async fn delete(&self, path: &str, token: Option<&str>) -> Resp {
        self.call(reqwest::Method::DELETE, path, token, None).await
    }

    /// POSTs a text message (JSON request).
    pub(crate) async fn send(&self, chat: &str, token: Option<&str>, text: &str) -> Resp {
        self.post(&format!("/api/chats/{chat}/messages"), token, msg(text))
            .await
    }

    /// POSTs a text message with a delivery.
    pub(crate) async fn send_with(
        &self,
        chat: &str,
        token: Option<&str>,
        text: &str,
        delivery: &str,
    ) -> Resp {
        let mut body = msg(text);
        body["delivery"] = json!(delivery);
        self.post(&format!("/api/chats/{chat}/messages"), token, body)
            .await
    }

    pub(crate) async fn chat(&self, chat: &str, token: Option<&str>) -> Resp {
        self.get(&format!("/api/chats/{chat}"), token).await
    }

    pub(crate) async fn pending(&self, chat: &str, token: Option<&str>) -> Resp {
        self.get(&format!("/api/chats/{chat}/pending"), token).await
    }

    pub(crate) async fn settle(&self, chat: &str, token: Option<&str>, body: Value) -> Resp {
        self.post(&format!("/api/chats/{chat}/settle"), token, body)
            .await
    }

    /// Polls GET chat until `pred` holds on its body; fails after [`WAIT`].
    pub(crate) async fn wait_chat(
        &self,
        chat: &str,
        token: Option<&str>,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let r = self.chat(chat, token).await;
            if r.status == 200 && pred(&r.json) {
                return r.json;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}; last: {}",
                r.text
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the chat is idle with nothing queued.
    pub(crate) async fn wait_settled(&self, chat: &str, token: Option<&str>) -> Value {
        self.wait_chat(chat, token, "idle with nothing queued", |c| {
            c["state"] == "idle" && !has_queued(c)
        })
        .await
    }

    /// Waits until the chat is in `state`.
    pub(crate) async fn wait_state(&self, chat: &str, token: Option<&str>, state: &str) -> Value {
        self.wait_chat(chat, token, state, |c| c["state"] == state)
            .await
    }
}

/// A raw request body.
pub(crate) enum RawBody {
    Json(Value),
    Text(&'static str),
}

/// `{"parts": [{"type": "text", "text"}]}`.
pub(crate) fn msg(text: &str) -> Value {
    json!({"parts": [{"type": "text", "text": text}]})
}

/// The text of a UIMessage (its text parts joined).
pub(crate) fn text_of(m: &Value) -> String {
    m["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("")
}

pub(crate) fn messages(chat: &Value) -> Vec<Value> {
    chat["messages"].as_array().cloned().unwrap_or_default()
}

pub(crate) fn has_queued(chat: &Value) -> bool {
    messages(chat)
        .iter()
        .any(|m| m["metadata"]["status"] == "queued")
}

/// The index of the message with `id`.
pub(crate) fn index_of(chat: &Value, id: &str) -> Option<usize> {
    messages(chat).iter().position(|m| m["id"] == id)
}

/// A fresh chat id.
pub(crate) fn chat_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// The answer of the demo question.
pub(crate) fn answer(call: &str, label: &str) -> Value {
    json!({"toolCallId": call, "output": {"answers": [{"header": "Colour", "selected": [label]}]}})
}

/// Sends `ask` as `token` on `chat` and returns the waiting tool call id (asserting 200 awaiting).
pub(crate) async fn ask(s: &Server, chat: &str, token: Option<&str>) -> (String, String) {
    let r = s.send(chat, token, "please ask me").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["state"], "awaiting", "{}", r.text);
    let p = s.pending(chat, token).await;
    assert_eq!(p.status, 200, "{}", p.text);
    assert_eq!(p.json["state"], "awaiting");
    let calls = p.json["calls"].as_array().expect("calls");
    assert_eq!(calls.len(), 1, "{}", p.text);
    let reply_id = r.json["reply"]["id"]
        .as_str()
        .expect("reply id")
        .to_string();
    (
        calls[0]["toolCallId"].as_str().expect("id").to_string(),
        reply_id,
    )
}

/// Starts a `slow N` turn in the background and waits until the chat is running.
pub(crate) async fn hold_running(
    s: &Server,
    chat: &str,
    token: Option<&str>,
    secs: u32,
) -> tokio::task::JoinHandle<Resp> {
    let base = s.base.clone();
    let chat_s = chat.to_string();
    let token_s = token.map(str::to_string);
    let client = s.client.clone();
    let h = tokio::spawn(async move {
        let mut req = client
            .post(format!("{base}/api/chats/{chat_s}/messages"))
            .json(&msg(&format!("slow {secs}")));
        if let Some(t) = token_s {
            req = req.bearer_auth(t);
        }
        let res = req.send().await.expect("slow request");
        let status = res.status().as_u16();
        let chat = res
            .headers()
            .get("x-frogbot-chat-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = res.text().await.expect("body");
        Resp {
            status,
            chat,
            content_type: None,
            json: serde_json::from_str(&text).unwrap_or(Value::Null),
            text,
        }
    });
    s.wait_chat(chat, token, "running", |c| c["state"] == "running")
        .await;
    h
}

/// Reads SSE `data:` events from a stream until `pred` matches one, within a timeout.
pub(crate) async fn next_event(
    stream: &mut (impl futures::Stream<Item = reqwest::Result<axum::body::Bytes>> + Unpin),
    buf: &mut String,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let fut = async {
        loop {
            while let Some(end) = buf.find("\n\n") {
                let frame: String = buf.drain(..end + 2).collect();
                for line in frame.lines() {
                    if let Some(data) = line.strip_prefix("data: ")
                        && let Ok(v) = serde_json::from_str::<Value>(data)
                        && pred(&v)
                    {
                        return v;
                    }
                }
            }
            let chunk = stream.next().await.expect("stream ended").expect("chunk");
            buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    tokio::time::timeout(WAIT, fut)
        .await
        .expect("event within the timeout")
}

/// A tool that does nothing (lets a scripted model take a second step).
struct Noop;

#[async_trait::async_trait]
impl frogbot_core::agent::Tool for Noop {
    fn spec(&self) -> frogbot_core::agent::ToolSpec {
        frogbot_core::agent::ToolSpec {
            name: "noop".into(),
            description: "does nothing".into(),
            input_schema: json!({"type": "object", "properties": {}}),
        }
    }
    async fn call(
        &self,
        _input: Value,
        _ctx: frogbot_core::agent::ToolContext,
    ) -> Result<Value, frogbot_core::BoxError> {
        Ok(json!({"ok": true}))
    }
}

/// A server whose only model, `multi`, takes two steps: step one waits at `gate`, then calls
/// `noop`; step two replies `saw: ` and every user text of its request joined by `|`.
pub(crate) async fn start_multi_step(
    db: &TestDb,
    gate: std::sync::Arc<tokio::sync::Semaphore>,
) -> Server {
    use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, call, reply};
    use frogbot_core::agent::{EngineConfig, ModelMessage, ModelOffer};
    let config = config(&db.url);
    let store = frogbot_testkit::open_store(&db.url).await;
    let model = ScriptedModel::new(move |req| {
        if matches!(req.messages.last(), Some(ModelMessage::Tool { .. })) {
            let users: Vec<String> = req
                .messages
                .iter()
                .filter_map(|m| match m {
                    ModelMessage::User { text } => Some(text.clone()),
                    _ => None,
                })
                .collect();
            return reply(&format!("saw: {}", users.join("|")));
        }
        let mut events = vec![ScriptEvent::Gate(gate.clone())];
        events.extend(call(
            &format!("call_{}", uuid::Uuid::new_v4().simple()),
            "noop",
            json!({}),
        ));
        events
    });
    let engine = Engine::new(
        store,
        vec![ModelOffer {
            id: "multi".into(),
            model: std::sync::Arc::new(model),
            reasoning: vec![],
        }],
        vec![std::sync::Arc::new(Noop)],
        EngineConfig {
            instructions: "test".into(),
            max_steps: 5,
            turn_lease_ms: 60_000,
            default_model: "multi".into(),
            ..Default::default()
        },
    );
    let app = frogbot::app(&config, engine.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let limits = config.server.clone();
    let task = tokio::spawn(async move {
        frogbot::server::run(listener, app, &limits, std::future::pending(), WAIT)
            .await
            .expect("serve");
    });
    Server {
        base: format!("http://{addr}"),
        engine,
        client: client(),
        task,
    }
}

/// Starts a turn in the background (JSON POST of `text`) and waits until the chat is running.
pub(crate) async fn start_running(
    s: &Server,
    chat: &str,
    token: Option<&str>,
    text: &str,
) -> tokio::task::JoinHandle<Value> {
    let url = format!("{}/api/chats/{chat}/messages", s.base);
    let mut req = s.client.post(url).json(&msg(text));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let h = tokio::spawn(async move {
        let res = req.send().await.expect("request");
        assert_eq!(res.status().as_u16(), 200);
        res.json::<Value>().await.expect("json")
    });
    s.wait_chat(chat, token, "running", |c| c["state"] == "running")
        .await;
    h
}

/// Creates a channel chat the way its channel would: the thread's first message (from `owner`,
/// as the identity hook mapped them), its turn then ended without a reply.
pub(crate) async fn create_channel_chat(
    engine: &Engine,
    chat: frogbot_core::model::ChatId,
    owner: Option<frogbot_core::model::UserId>,
    platform: &str,
    thread: &str,
) {
    use frogbot_core::store::{EndMode, EndTurnOp, LeaseRequest, NewChat, SendOp, Sent};
    let store = engine.store_for_tests();
    let now = frogbot_core::model::now_millis();
    let message = frogbot_core::model::UiMessage {
        id: format!("{platform}-first"),
        role: frogbot_core::model::Role::User,
        parts: vec![frogbot_core::model::MessagePart::text("from the thread")],
        metadata: frogbot_core::model::MessageMetadata {
            author: owner.clone(),
            ..Default::default()
        },
    };
    let sent = store
        .send(&SendOp {
            chat: &NewChat {
                chat_id: chat,
                owner: owner.clone(),
                channel: Some(frogbot_core::model::ChannelRef {
                    platform: platform.into(),
                    thread: thread.into(),
                }),
            },
            message: &message,
            delivery: frogbot_core::model::Delivery::Queue,
            lease: &LeaseRequest {
                holder: "test".into(),
                driver: owner,
                ttl_ms: 60_000,
                now,
                interrupted: None,
            },
            queue_if_busy: false,
        })
        .await
        .expect("create the channel chat");
    let Sent::Started { lease, .. } = sent else {
        panic!("the channel chat existed: {sent:?}");
    };
    store
        .end_turn(&EndTurnOp {
            lease: &lease,
            reply: None,
            mode: EndMode::Next,
            now,
            delivery: None,
        })
        .await
        .expect("end the thread's first turn");
}
