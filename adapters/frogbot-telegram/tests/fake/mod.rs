//! A fake Telegram Bot API on 127.0.0.1:0 that answers in the documented shapes
//! (`{"ok": true, "result": …}`): `getMe`, `getUpdates` (a long poll: held until an update is
//! queued or `timeout` passes; `offset` confirms and forgets earlier updates), `deleteWebhook`,
//! `setWebhook`, `sendMessage`, `editMessageText`, `editMessageReplyMarkup`,
//! `answerCallbackQuery`. Method names are matched case-insensitively (teloxide sends `GetMe`
//! style names). Every call is recorded with its arrival time; tests wait on conditions over
//! the recorded calls. Shared by the engine tests, the bench and `frogbot`'s serve test.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::watch;

/// The bot's own user id and username.
pub const BOT_ID: i64 = 999;
pub const BOT_USERNAME: &str = "frogbot";
/// How long a test waits for a condition before failing.
pub const WAIT: Duration = Duration::from_secs(20);

/// One recorded Bot API call.
#[derive(Clone, Debug)]
pub struct Call {
    /// The method, lower case.
    pub method: String,
    /// The JSON body.
    pub body: Value,
    /// The `result` the fake answered with (`None` for errors and `getUpdates`).
    pub result: Option<Value>,
    /// When it arrived.
    pub at: Instant,
}

#[derive(Default)]
struct Inner {
    calls: Mutex<Vec<Call>>,
    /// Updates not yet confirmed by an `offset`.
    pending: Mutex<Vec<Value>>,
    /// update_id → when `getUpdates` first returned it.
    served: Mutex<HashMap<i64, Instant>>,
    /// Messages the bot "sent", by message id (with their keyboards).
    sent: Mutex<HashMap<i64, Value>>,
    next_update: AtomicI64,
    next_message: AtomicI64,
    /// How many `sendMessage` calls carrying an inline keyboard still get a 429.
    throttle_keyboard_sends: AtomicU32,
    queued: Option<watch::Sender<u64>>,
    recorded: Option<watch::Sender<u64>>,
}

/// The running fake.
#[derive(Clone)]
pub struct FakeBotApi {
    inner: Arc<Inner>,
    /// Its base URL (`http://127.0.0.1:port/`), for `Bot::set_api_url` / `api_url`.
    pub url: String,
}

impl FakeBotApi {
    /// Starts the fake.
    pub async fn start() -> FakeBotApi {
        let inner = Arc::new(Inner {
            next_update: AtomicI64::new(1),
            next_message: AtomicI64::new(100),
            queued: Some(watch::channel(0).0),
            recorded: Some(watch::channel(0).0),
            ..Default::default()
        });
        let app = Router::new().fallback(api).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeBotApi {
            inner,
            url: format!("http://{addr}/"),
        }
    }

    /// Queues an update (`{"message": …}` etc.); its `update_id` is assigned unless given.
    pub fn push(&self, mut update: Value) -> i64 {
        let id = match update["update_id"].as_i64() {
            Some(id) => {
                self.inner.next_update.fetch_max(id + 1, Ordering::SeqCst);
                id
            }
            None => {
                let id = self.inner.next_update.fetch_add(1, Ordering::SeqCst);
                update["update_id"] = json!(id);
                id
            }
        };
        self.inner.pending.lock().unwrap().push(update);
        self.inner.queued.as_ref().unwrap().send_modify(|n| *n += 1);
        id
    }

    /// Makes the next `n` `sendMessage` calls that carry an inline keyboard fail with `429`.
    pub fn throttle_keyboard_sends(&self, n: u32) {
        self.inner
            .throttle_keyboard_sends
            .store(n, Ordering::SeqCst);
    }

    /// Every call so far.
    pub fn all_calls(&self) -> Vec<Call> {
        self.inner.calls.lock().unwrap().clone()
    }

    /// The bodies of the calls of `method` (lower case).
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.inner
            .calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.method == method)
            .map(|c| c.body.clone())
            .collect()
    }

    /// When `getUpdates` first returned update `id`.
    pub fn served_at(&self, id: i64) -> Option<Instant> {
        self.inner.served.lock().unwrap().get(&id).copied()
    }

    /// A message the bot sent, as the fake returned it.
    pub fn sent(&self, message_id: i64) -> Value {
        self.inner.sent.lock().unwrap()[&message_id].clone()
    }

    /// Waits until `ready` holds over the recorded calls (failing after [`WAIT`]); returns what
    /// `ready` returned.
    pub async fn wait_for<T>(&self, what: &str, ready: impl Fn(&[Call]) -> Option<T>) -> T {
        let mut rx = self.inner.recorded.as_ref().unwrap().subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(v) = ready(&self.inner.calls.lock().unwrap()) {
                return v;
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                panic!(
                    "timed out waiting for {what}; calls: {:#?}",
                    self.all_calls()
                        .iter()
                        .map(|c| (&c.method, &c.body))
                        .collect::<Vec<_>>()
                );
            }
        }
    }

    /// Waits for the `n`-th (1-based) call of `method` and returns its body.
    pub async fn nth(&self, method: &str, n: usize) -> Value {
        self.wait_for(&format!("{method} #{n}"), |calls| {
            calls
                .iter()
                .filter(|c| c.method == method)
                .nth(n - 1)
                .map(|c| c.body.clone())
        })
        .await
    }
}

/// A user.
pub fn user(id: i64, name: &str) -> Value {
    json!({"id": id, "is_bot": false, "first_name": name, "username": name.to_lowercase()})
}

/// A private chat with user `id`.
pub fn private_chat(id: i64, name: &str) -> Value {
    json!({"id": id, "type": "private", "first_name": name})
}

/// A supergroup (a forum when `forum`).
pub fn group_chat(id: i64, forum: bool) -> Value {
    json!({"id": id, "type": "supergroup", "title": "Ops", "is_forum": forum})
}

/// A `message` update with text from `from` in `chat`.
pub fn text_update(message_id: i64, chat: Value, from: Value, text: &str) -> Value {
    json!({"message": {
        "message_id": message_id, "date": 1_767_225_600, "chat": chat, "from": from, "text": text
    }})
}

/// A `callback_query` update: `from` pressed the button with `data` on the bot's message.
pub fn callback_update(query_id: &str, from: Value, message: Value, data: &str) -> Value {
    json!({"callback_query": {
        "id": query_id, "from": from, "message": message,
        "chat_instance": "-4242", "data": data
    }})
}

fn bot_user() -> Value {
    json!({"id": BOT_ID, "is_bot": true, "first_name": "FrogBot", "username": BOT_USERNAME})
}

fn chat_of(id: &Value) -> Value {
    match id.as_i64() {
        Some(n) if n > 0 => private_chat(n, "Someone"),
        _ => group_chat(id.as_i64().unwrap_or(0), true),
    }
}

fn ok(result: Value) -> Response {
    axum::Json(json!({"ok": true, "result": result})).into_response()
}

fn error(status: StatusCode, description: &str, parameters: Option<Value>) -> Response {
    let mut body = json!({"ok": false, "error_code": status.as_u16(), "description": description});
    if let Some(p) = parameters {
        body["parameters"] = p;
    }
    (status, axum::Json(body)).into_response()
}

/// The request's parameters: its JSON body; a multipart form (teloxide's `setWebhook`) is kept as
/// `{"multipart": raw body, "content_type": header}` for the test to read.
async fn params(req: Request) -> Value {
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = Bytes::from_request(req, &()).await.unwrap_or_default();
    if content_type.starts_with("multipart/form-data") {
        return json!({
            "multipart": String::from_utf8_lossy(&body),
            "content_type": content_type
        });
    }
    serde_json::from_slice(&body).unwrap_or(Value::Null)
}

async fn api(State(fake): State<Arc<Inner>>, uri: Uri, req: Request) -> Response {
    let method = uri
        .path()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_lowercase();
    let body = params(req).await;
    let at = Instant::now();
    if method == "getupdates" {
        record(&fake, &method, &body, None, at);
        return get_updates(&fake, &body).await;
    }
    let (response, result) = respond(&fake, &method, &body);
    record(&fake, &method, &body, result, at);
    response
}

fn record(fake: &Inner, method: &str, body: &Value, result: Option<Value>, at: Instant) {
    fake.calls.lock().unwrap().push(Call {
        method: method.to_owned(),
        body: body.clone(),
        result,
        at,
    });
    fake.recorded.as_ref().unwrap().send_modify(|n| *n += 1);
}

fn respond(fake: &Inner, method: &str, body: &Value) -> (Response, Option<Value>) {
    let ok = |result: Value| (ok(result.clone()), Some(result));
    let error =
        |status, description: &str, parameters| (error(status, description, parameters), None);
    match method {
        "getme" => ok(json!({
            "id": BOT_ID, "is_bot": true, "first_name": "FrogBot", "username": BOT_USERNAME,
            "can_join_groups": true, "can_read_all_group_messages": false,
            "supports_inline_queries": false, "can_connect_to_business": false,
            "has_main_web_app": false
        })),
        "deletewebhook" | "setwebhook" | "answercallbackquery" => ok(json!(true)),
        "sendmessage" => {
            let has_keyboard = body["reply_markup"]["inline_keyboard"].is_array();
            let throttled = has_keyboard
                && fake
                    .throttle_keyboard_sends
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
            if throttled {
                return error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "Too Many Requests: retry after 1",
                    Some(json!({"retry_after": 1})),
                );
            }
            let id = fake.next_message.fetch_add(1, Ordering::SeqCst);
            let mut m = json!({
                "message_id": id, "date": 1_767_225_700, "chat": chat_of(&body["chat_id"]),
                "from": bot_user(), "text": body["text"]
            });
            if let Some(t) = body["message_thread_id"].as_i64() {
                m["message_thread_id"] = json!(t);
                m["is_topic_message"] = json!(true);
            }
            if body["reply_markup"]["inline_keyboard"].is_array() {
                m["reply_markup"] = body["reply_markup"].clone();
            }
            fake.sent.lock().unwrap().insert(id, m.clone());
            ok(m)
        }
        "editmessagetext" | "editmessagereplymarkup" => {
            let id = body["message_id"].as_i64().unwrap_or(0);
            let mut sent = fake.sent.lock().unwrap();
            let Some(m) = sent.get_mut(&id) else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: message to edit not found",
                    None,
                );
            };
            if let Some(t) = body.get("text") {
                m["text"] = t.clone();
            }
            match body.get("reply_markup") {
                Some(k)
                    if k["inline_keyboard"]
                        .as_array()
                        .is_some_and(|r| !r.is_empty()) =>
                {
                    m["reply_markup"] = k.clone();
                }
                _ => {
                    if let Some(o) = m.as_object_mut() {
                        o.remove("reply_markup");
                    }
                }
            }
            ok(m.clone())
        }
        _ => error(StatusCode::NOT_FOUND, "Not Found", None),
    }
}

async fn get_updates(fake: &Inner, body: &Value) -> Response {
    let offset = body["offset"].as_i64().unwrap_or(0);
    let limit = body["limit"].as_u64().unwrap_or(100).clamp(1, 100) as usize;
    let timeout = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
    let deadline = tokio::time::Instant::now() + timeout;
    let mut rx = fake.queued.as_ref().unwrap().subscribe();
    loop {
        let batch: Vec<Value> = {
            let mut pending = fake.pending.lock().unwrap();
            // An offset confirms every update before it: they are forgotten.
            pending.retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
            pending.iter().take(limit).cloned().collect()
        };
        if !batch.is_empty() {
            let now = Instant::now();
            let mut served = fake.served.lock().unwrap();
            for u in &batch {
                served
                    .entry(u["update_id"].as_i64().unwrap_or(0))
                    .or_insert(now);
            }
            return ok(Value::Array(batch));
        }
        if tokio::time::timeout_at(deadline, rx.changed())
            .await
            .is_err()
        {
            return ok(json!([]));
        }
    }
}
