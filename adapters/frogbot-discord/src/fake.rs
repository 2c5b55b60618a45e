//! A local fake Discord for tests and benchmarks (feature `fake`): the HTTP API routes this
//! adapter uses and a gateway websocket, both on 127.0.0.1, speaking Discord's documented shapes.
//!
//! What it is for: pointing serenity's real `Http` (through `HttpBuilder::proxy`, rate limiter
//! disabled) and real gateway `Client` at something local. `GET /api/v10/gateway` and
//! `GET /api/v10/gateway/bot` return the fake gateway's `ws://` URL; the gateway sends Hello
//! (op 10), answers Identify (op 2) with a READY dispatch and heartbeats (op 1) with op 11, and then
//! forwards whatever [`FakeDiscord::dispatch`] / [`FakeDiscord::send_raw`] are given. Every HTTP
//! call is recorded ([`FakeDiscord::calls`], [`FakeDiscord::wait_for`]).
//!
//! What it must not do: be used by a bot. It checks nothing (no tokens, no rate limits) and keeps
//! everything in memory.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::tungstenite::Message as WsMessage;

/// One recorded HTTP call.
#[derive(Clone, Debug)]
pub struct Call {
    /// `GET`, `POST`, `PATCH`, …
    pub method: String,
    /// The path, e.g. `/api/v10/channels/1/messages`.
    pub path: String,
    /// The JSON body (`null` when there was none).
    pub body: Value,
    /// What the fake answered (`null` for an empty response).
    pub response: Value,
    /// When it arrived.
    pub at: Instant,
}

#[derive(Debug, Default)]
struct Inner {
    calls: Mutex<Vec<Call>>,
    changed: Notify,
    next_id: AtomicU64,
    seq: AtomicU64,
    sessions: Mutex<Vec<mpsc::UnboundedSender<String>>>,
    identifies: Mutex<Vec<Value>>,
    heartbeats: AtomicU64,
    readies: AtomicU64,
    app_id: u64,
    bot_id: u64,
    gateway_url: Mutex<String>,
    heartbeat_ms: u64,
}

/// A running fake Discord (its servers live as long as the Tokio runtime).
#[derive(Clone, Debug)]
pub struct FakeDiscord {
    inner: Arc<Inner>,
    /// The HTTP base URL to give `HttpBuilder::proxy` (`http://127.0.0.1:PORT`).
    pub api_url: String,
    /// The gateway URL (`ws://127.0.0.1:PORT`).
    pub gateway_url: String,
}

/// A Discord user object.
pub fn user(id: u64, name: &str, bot: bool) -> Value {
    json!({"id": id.to_string(), "username": name, "global_name": name, "discriminator": "0", "avatar": null, "bot": bot})
}

/// A message object (`MESSAGE_CREATE`'s `d`, and what the HTTP API returns). `guild` `None`: a DM.
pub fn message(
    id: u64,
    channel: u64,
    guild: Option<u64>,
    author: &Value,
    content: &str,
    mentions: &[Value],
) -> Value {
    let mut m = json!({
        "id": id.to_string(),
        "channel_id": channel.to_string(),
        "author": author,
        "content": content,
        "timestamp": "2026-01-01T00:00:00.000000+00:00",
        "edited_timestamp": null,
        "tts": false,
        "mention_everyone": false,
        "mentions": mentions,
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": false,
        "type": 0,
        "components": []
    });
    if let Some(guild) = guild {
        m["guild_id"] = json!(guild.to_string());
    }
    m
}

/// An `INTERACTION_CREATE` of type 3 (`MESSAGE_COMPONENT`): a click on `custom_id` (component type
/// 2, a button) or, with `values`, a string select (component type 3), on `message` in `channel`.
#[allow(clippy::too_many_arguments)] // one argument per field of the payload a test varies
pub fn component_interaction(
    id: u64,
    app_id: u64,
    channel: u64,
    message_id: u64,
    clicker: &Value,
    custom_id: &str,
    values: Option<&[&str]>,
    token: &str,
) -> Value {
    let data = match values {
        Some(values) => json!({"custom_id": custom_id, "component_type": 3, "values": values}),
        None => json!({"custom_id": custom_id, "component_type": 2}),
    };
    json!({
        "id": id.to_string(),
        "application_id": app_id.to_string(),
        "type": 3,
        "data": data,
        "channel_id": channel.to_string(),
        "user": clicker,
        "token": token,
        "version": 1,
        "message": message(message_id, channel, None, &user(app_id, "frogbot", true), "", &[]),
        "locale": "en-US",
        "entitlements": [],
        "attachment_size_limit": 26214400
    })
}

/// An `INTERACTION_CREATE` of type 5 (`MODAL_SUBMIT`): text inputs `values` (custom id, text) in a
/// modal whose custom id is `custom_id`.
pub fn modal_submit_interaction(
    id: u64,
    app_id: u64,
    channel: u64,
    submitter: &Value,
    custom_id: &str,
    values: &[(&str, &str)],
    token: &str,
) -> Value {
    let rows: Vec<Value> = values
        .iter()
        .map(|(id, text)| {
            json!({"type": 1, "components": [{"type": 4, "custom_id": id, "value": text}]})
        })
        .collect();
    json!({
        "id": id.to_string(),
        "application_id": app_id.to_string(),
        "type": 5,
        "data": {"custom_id": custom_id, "components": rows},
        "channel_id": channel.to_string(),
        "user": submitter,
        "token": token,
        "version": 1,
        "locale": "en-US",
        "entitlements": [],
        "attachment_size_limit": 26214400
    })
}

/// [`modal_submit_interaction`] in the shape of a modal built from Labels (component type 18,
/// each wrapping one child): text inputs `values` (custom id, text) and string selects `selects`
/// (custom id, chosen values).
#[allow(clippy::too_many_arguments)] // one argument per field of the payload a test varies
pub fn modal_submit_in_labels(
    id: u64,
    app_id: u64,
    channel: u64,
    submitter: &Value,
    custom_id: &str,
    values: &[(&str, &str)],
    selects: &[(&str, &[&str])],
    token: &str,
) -> Value {
    let mut n = 0;
    let mut next = || {
        n += 1;
        n
    };
    let mut labels: Vec<Value> = Vec::new();
    for (child, text) in values {
        labels.push(json!({"type": 18, "id": next(), "component":
            {"type": 4, "id": next(), "custom_id": child, "value": text}}));
    }
    for (child, chosen) in selects {
        labels.push(json!({"type": 18, "id": next(), "component":
            {"type": 3, "id": next(), "custom_id": child, "values": chosen}}));
    }
    let mut submit =
        modal_submit_interaction(id, app_id, channel, submitter, custom_id, &[], token);
    submit["data"]["components"] = Value::Array(labels);
    submit
}

fn created_message(inner: &Inner, channel: &str, body: &Value) -> Value {
    let id = 900_000_000_000_000_000 + inner.next_id.fetch_add(1, Ordering::SeqCst);
    let mut m = message(
        id,
        channel.parse().unwrap_or(1),
        None,
        &user(inner.bot_id, "frogbot", true),
        body.get("content").and_then(Value::as_str).unwrap_or(""),
        &[],
    );
    m["components"] = body.get("components").cloned().unwrap_or(json!([]));
    m
}

impl Inner {
    fn record(&self, method: &Method, uri: &Uri, body: &str, response: &Value) {
        let at = Instant::now();
        let body = serde_json::from_str(body).unwrap_or(Value::Null);
        self.calls.lock().unwrap().push(Call {
            method: method.to_string(),
            path: uri.path().to_owned(),
            body,
            response: response.clone(),
            at,
        });
        self.changed.notify_waiters();
    }
}

async fn gateway(State(inner): State<Arc<Inner>>, method: Method, uri: Uri) -> Response {
    let url = inner.gateway_url.lock().unwrap().clone();
    let response = json!({
        "url": url,
        "shards": 1,
        "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
    });
    inner.record(&method, &uri, "", &response);
    axum::Json(response).into_response()
}

async fn current_user(State(inner): State<Arc<Inner>>, method: Method, uri: Uri) -> Response {
    let response = json!({"id": inner.bot_id.to_string(), "username": "frogbot", "discriminator": "0", "avatar": null, "bot": true, "verified": true, "mfa_enabled": false, "flags": 0});
    inner.record(&method, &uri, "", &response);
    axum::Json(response).into_response()
}

async fn create_message(
    State(inner): State<Arc<Inner>>,
    Path(channel): Path<String>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let response = created_message(&inner, &channel, &parsed);
    inner.record(&method, &uri, &body, &response);
    axum::Json(response).into_response()
}

async fn edit_message(
    State(inner): State<Arc<Inner>>,
    Path((channel, id)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let mut m = created_message(&inner, &channel, &parsed);
    m["id"] = json!(id);
    inner.record(&method, &uri, &body, &m);
    axum::Json(m).into_response()
}

async fn start_thread(
    State(inner): State<Arc<Inner>>,
    Path((channel, _message)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let id = 800_000_000_000_000_000 + inner.next_id.fetch_add(1, Ordering::SeqCst);
    let response = json!({
        "id": id.to_string(),
        "type": 11,
        "guild_id": "100000000000000001",
        "parent_id": channel,
        "owner_id": inner.bot_id.to_string(),
        "name": parsed.get("name").cloned().unwrap_or(json!("thread")),
        "last_message_id": null,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "thread_metadata": {"archived": false, "auto_archive_duration": 1440, "archive_timestamp": "2026-01-01T00:00:00.000000+00:00", "locked": false},
        "flags": 0
    });
    inner.record(&method, &uri, &body, &response);
    axum::Json(response).into_response()
}

async fn followup(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let response = created_message(&inner, "1", &parsed);
    inner.record(&method, &uri, &body, &response);
    axum::Json(response).into_response()
}

async fn callback(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    body: String,
) -> StatusCode {
    inner.record(&method, &uri, &body, &Value::Null);
    StatusCode::NO_CONTENT
}

async fn unknown(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let response = json!({"message": "404: Not Found", "code": 0});
    inner.record(&method, &uri, &body, &response);
    (StatusCode::NOT_FOUND, axum::Json(response)).into_response()
}

async fn gateway_session(inner: Arc<Inner>, stream: tokio::net::TcpStream) {
    let Ok(ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let hello =
        json!({"op": 10, "d": {"heartbeat_interval": inner.heartbeat_ms}, "s": null, "t": null});
    if sink.send(WsMessage::Text(hello.to_string())).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            outgoing = rx.recv() => {
                let Some(text) = outgoing else { break };
                if sink.send(WsMessage::Text(text)).await.is_err() {
                    break;
                }
            }
            incoming = source.next() => {
                let Some(Ok(frame)) = incoming else { break };
                let WsMessage::Text(text) = frame else { continue };
                let Ok(payload) = serde_json::from_str::<Value>(&text) else { continue };
                match payload["op"].as_u64() {
                    Some(1) => {
                        inner.heartbeats.fetch_add(1, Ordering::SeqCst);
                        let ack = json!({"op": 11, "d": null, "s": null, "t": null}).to_string();
                        if sink.send(WsMessage::Text(ack)).await.is_err() {
                            break;
                        }
                    }
                    Some(2) => {
                        inner.identifies.lock().unwrap().push(payload["d"].clone());
                        let url = inner.gateway_url.lock().unwrap().clone();
                        let ready = json!({
                            "v": 10,
                            "user": {"id": inner.bot_id.to_string(), "username": "frogbot", "discriminator": "0", "avatar": null, "bot": true, "verified": true, "mfa_enabled": false, "flags": 0},
                            "guilds": [],
                            "session_id": "fake-session",
                            "resume_gateway_url": url,
                            "shard": [0, 1],
                            "application": {"id": inner.app_id.to_string(), "flags": 0}
                        });
                        let seq = inner.seq.fetch_add(1, Ordering::SeqCst) + 1;
                        let text = json!({"op": 0, "s": seq, "t": "READY", "d": ready}).to_string();
                        if sink.send(WsMessage::Text(text)).await.is_err() {
                            break;
                        }
                        inner.sessions.lock().unwrap().push(tx.clone());
                        inner.readies.fetch_add(1, Ordering::SeqCst);
                        inner.changed.notify_waiters();
                    }
                    _ => {}
                }
            }
        }
    }
}

impl FakeDiscord {
    /// Starts the fake for application `app_id` whose bot user is `bot_id` (heartbeat interval
    /// 1 s, so a test sees heartbeats).
    pub async fn start(app_id: u64, bot_id: u64) -> FakeDiscord {
        let http = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind fake API");
        let ws = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind fake gateway");
        let api_url = format!("http://{}", http.local_addr().expect("addr"));
        let gateway_url = format!("ws://{}", ws.local_addr().expect("addr"));
        let inner = Arc::new(Inner {
            app_id,
            bot_id,
            heartbeat_ms: 1000,
            gateway_url: Mutex::new(gateway_url.clone()),
            ..Default::default()
        });
        let app = Router::new()
            .route("/api/v10/gateway", get(gateway))
            .route("/api/v10/gateway/bot", get(gateway))
            .route("/api/v10/users/@me", get(current_user))
            .route("/api/v10/channels/{id}/messages", post(create_message))
            .route(
                "/api/v10/channels/{cid}/messages/{mid}",
                patch(edit_message),
            )
            .route(
                "/api/v10/channels/{cid}/messages/{mid}/threads",
                post(start_thread),
            )
            .route("/api/v10/webhooks/{app}/{token}", post(followup))
            .route(
                "/api/v10/interactions/{id}/{token}/callback",
                post(callback),
            )
            .fallback(unknown)
            .with_state(inner.clone());
        tokio::spawn(async move {
            let _ = axum::serve(http, app).await;
        });
        let accept = inner.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = ws.accept().await {
                tokio::spawn(gateway_session(accept.clone(), stream));
            }
        });
        FakeDiscord {
            inner,
            api_url,
            gateway_url,
        }
    }

    /// Every HTTP call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.inner.calls.lock().unwrap().clone()
    }

    /// The Identify payloads received (`d` of op 2).
    pub fn identifies(&self) -> Vec<Value> {
        self.inner.identifies.lock().unwrap().clone()
    }

    /// How many heartbeats (op 1) were acknowledged.
    pub fn heartbeats(&self) -> u64 {
        self.inner.heartbeats.load(Ordering::SeqCst)
    }

    /// Waits until `check` holds for the state, or `timeout` passes (then `false`).
    async fn wait_until(&self, timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.inner.changed.notified();
            if check() {
                return true;
            }
            // Poll too: a change may land between `check` and `notified`.
            let wait = tokio::time::sleep(Duration::from_millis(50));
            tokio::select! {
                () = notified => {}
                () = wait => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return check();
            }
        }
    }

    /// Waits until a client has identified and received READY.
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        self.wait_until(timeout, || self.inner.readies.load(Ordering::SeqCst) > 0)
            .await
    }

    /// Waits for the first call (at index `from` or later) that `pred` accepts.
    pub async fn wait_for(
        &self,
        from: usize,
        timeout: Duration,
        pred: impl Fn(&Call) -> bool,
    ) -> Option<Call> {
        let mut found = None;
        self.wait_until(timeout, || {
            found = self.calls().into_iter().skip(from).find(|c| pred(c));
            found.is_some()
        })
        .await;
        found
    }

    /// Sends a dispatch (op 0) `t` with data `d` to every identified session; returns the time it
    /// was handed to the sockets.
    pub fn dispatch(&self, t: &str, d: Value) -> Instant {
        let seq = self.inner.seq.fetch_add(1, Ordering::SeqCst) + 1;
        self.send_raw(&json!({"op": 0, "s": seq, "t": t, "d": d}).to_string())
    }

    /// Sends a raw text frame to every identified session (for malformed payloads).
    pub fn send_raw(&self, text: &str) -> Instant {
        let at = Instant::now();
        self.inner
            .sessions
            .lock()
            .unwrap()
            .retain(|s| s.send(text.to_owned()).is_ok());
        at
    }
}
