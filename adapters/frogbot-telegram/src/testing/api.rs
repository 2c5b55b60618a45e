//! The fake Bot API: its state (messages, calls, webhook, faults), the HTTP server and its
//! methods' routes (with Telegram's refusals), `getUpdates`' long poll, and what a test reads
//! back from it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use frogbot_model::faults::{Fault, FaultPlan};
use serde_json::{Value, json};
use teloxide::Bot;
use tokio::sync::watch;

use super::updates::{as_reply_to, group_chat, now, private_chat};
use super::{BOT_ID, BOT_USERNAME, MAX_ROW, NOT_MODIFIED, TOKEN, WAIT};
use crate::client::{MAX_PHOTO, MAX_UPLOAD};
use crate::ids::MAX_CALLBACK_DATA;
use crate::render::{
    MAX_BUTTON_TEXT, MAX_BUTTONS, MAX_CAPTION, MAX_NOTICE, MAX_PLACEHOLDER, MAX_TEXT,
};

/// One recorded Bot API call.
#[derive(Clone, Debug)]
pub struct Call {
    /// The method, lower case (`sendmessage`).
    pub method: String,
    /// Its parameters (the JSON body, or the fields of a multipart form).
    pub body: Value,
    /// The `result` the fake answered with (`None` for errors and `getUpdates`).
    pub result: Option<Value>,
    /// When it arrived.
    pub at: Instant,
    /// The fault injected into it, if any (a reset call was carried out: its `result` is set).
    pub fault: Option<Fault>,
}

/// The webhook a bot registered (`setWebhook`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Webhook {
    /// The public URL.
    pub url: String,
    /// The secret token Telegram sends in `X-Telegram-Bot-Api-Secret-Token`.
    pub secret: Option<String>,
}

pub(super) struct Inner {
    calls: Mutex<Vec<Call>>,
    /// Updates not yet confirmed by an `offset`.
    pub(super) pending: Mutex<Vec<Value>>,
    /// update_id → when `getUpdates` first returned it.
    served: Mutex<HashMap<i64, Instant>>,
    /// Every message the fake knows, by message id (ids are unique across chats here).
    pub(super) messages: Mutex<HashMap<i64, Value>>,
    /// The bot's messages posted with `disable_notification`, and those whose text or media was
    /// edited (kept as the message changes, under its lock: what a person sees).
    pub(super) silent: Mutex<HashSet<i64>>,
    pub(super) edited: Mutex<HashSet<i64>>,
    /// Callback query id → the user who clicked.
    pub(super) queries: Mutex<HashMap<String, i64>>,
    /// Callback queries already answered (Telegram takes one answer per query).
    answered: Mutex<HashSet<String>>,
    webhook: Mutex<Option<Webhook>>,
    /// The command menu (`setMyCommands`).
    commands: Mutex<Vec<Value>>,
    pub(super) next_update: AtomicI64,
    pub(super) next_message: AtomicI64,
    pub(super) next_query: AtomicI64,
    /// How many `sendMessage` calls carrying an inline keyboard still get a 429.
    throttle_keyboard_sends: AtomicU32,
    refuse_token: AtomicBool,
    /// Set: `sendMessageDraft` is refused with this description.
    refuse_drafts: Mutex<Option<String>>,
    /// The fault plan and the methods it applies to (empty: all but `getUpdates`).
    faults: Mutex<Option<(Arc<FaultPlan>, Vec<String>)>>,
    pub(super) queued: watch::Sender<u64>,
    pub(super) recorded: watch::Sender<u64>,
    /// The newest `getUpdates` call's number: an older one still waiting is ended with 409
    /// Conflict, as Telegram does when two pollers share a bot.
    poller: AtomicU64,
    /// How many `getUpdates` calls were ended by a newer one (409 Conflict).
    conflicts: AtomicU64,
    /// People's files: `file_id` → (`file_path`, bytes). `getFile` answers with the path (not
    /// for a file over 20 MB: the Bot API's limit), `GET /file/bot<token>/<path>` the bytes.
    pub(super) files: Mutex<HashMap<String, (String, Vec<u8>)>>,
    /// The bot's uploads, by the message that shows them: `{"kind": "photo" | "document",
    /// "name", "media_type", "size", "file_id"}` as the fake received them.
    pub(super) uploads: Mutex<HashMap<i64, Value>>,
}

/// The running fake Bot API (cheap to clone; the server runs until the runtime ends).
#[derive(Clone)]
pub struct FakeBotApi {
    pub(super) inner: Arc<Inner>,
    /// Its base URL (`http://127.0.0.1:port/`), for `Bot::set_api_url` / `api_url`.
    pub url: String,
}

impl std::fmt::Debug for FakeBotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeBotApi")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl FakeBotApi {
    /// Starts the fake on a free local port.
    pub async fn start() -> FakeBotApi {
        let inner = Arc::new(Inner {
            calls: Mutex::default(),
            pending: Mutex::default(),
            served: Mutex::default(),
            messages: Mutex::default(),
            silent: Mutex::default(),
            edited: Mutex::default(),
            queries: Mutex::default(),
            answered: Mutex::default(),
            webhook: Mutex::default(),
            commands: Mutex::default(),
            next_update: AtomicI64::new(1),
            next_message: AtomicI64::new(100),
            next_query: AtomicI64::new(1),
            throttle_keyboard_sends: AtomicU32::new(0),
            refuse_token: AtomicBool::new(false),
            refuse_drafts: Mutex::new(None),
            faults: Mutex::new(None),
            queued: watch::channel(0).0,
            recorded: watch::channel(0).0,
            poller: AtomicU64::new(0),
            conflicts: AtomicU64::new(0),
            files: Mutex::default(),
            uploads: Mutex::default(),
        });
        let app = Router::new().fallback(api).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free local port");
        let addr = listener.local_addr().expect("a bound address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeBotApi {
            inner,
            url: format!("http://{addr}/"),
        }
    }

    /// The base URL, parsed.
    pub fn api_url(&self) -> url::Url {
        url::Url::parse(&self.url).expect("the fake's URL is valid")
    }

    /// A teloxide client pointed at the fake.
    pub fn bot(&self) -> Bot {
        Bot::new(TOKEN).set_api_url(self.api_url())
    }

    /// A teloxide client pointed at the fake that gives up on a call after `timeout` (what an
    /// injected [`Fault::Timeout`] needs to end soon).
    pub fn bot_with_timeout(&self, timeout: Duration) -> Bot {
        let client = teloxide::net::default_reqwest_settings()
            .timeout(timeout)
            .build()
            .expect("a reqwest client");
        Bot::with_client(TOKEN, client).set_api_url(self.api_url())
    }

    /// From now on each call of `methods` (lower case, e.g. `sendmessage`; empty: every method
    /// but `getUpdates`) asks `plan` whether to fail (see the module for how each fault looks).
    pub fn inject_faults(&self, plan: Arc<FaultPlan>, methods: &[&str]) {
        let methods = methods.iter().map(|m| m.to_lowercase()).collect();
        *self.inner.faults.lock().expect("not poisoned") = Some((plan, methods));
    }

    /// The emojis of the bot's reactions on the message `message_id` now (`setMessageReaction`
    /// replaces them).
    pub fn bot_reactions(&self, message_id: i64) -> Vec<String> {
        let messages = self.inner.messages.lock().expect("not poisoned");
        messages
            .get(&message_id)
            .and_then(|m| m["bot_reactions"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|r| r["emoji"].as_str().map(str::to_owned))
            .collect()
    }

    /// From now on `sendMessageDraft` is refused with `description` (`None`: drafts work again), as
    /// Telegram refuses bots that may not draft.
    pub fn refuse_drafts(&self, description: Option<&str>) {
        *self.inner.refuse_drafts.lock().expect("not poisoned") = description.map(str::to_owned);
    }

    /// From now on every call gets `401 Unauthorized`, as Telegram answers a revoked token.
    pub fn refuse_token(&self) {
        self.inner.refuse_token.store(true, Ordering::SeqCst);
    }

    /// A fresh message id (for [`text_update`](super::text_update) and the like).
    pub fn next_message_id(&self) -> i64 {
        self.inner.next_message.fetch_add(1, Ordering::SeqCst)
    }

    /// Makes the next `n` `sendMessage` calls that carry an inline keyboard fail with `429`.
    pub fn throttle_keyboard_sends(&self, n: u32) {
        self.inner
            .throttle_keyboard_sends
            .store(n, Ordering::SeqCst);
    }

    /// Every call so far.
    pub fn all_calls(&self) -> Vec<Call> {
        self.inner.calls.lock().expect("not poisoned").clone()
    }

    /// How many `getUpdates` calls a newer one ended with 409 Conflict (two pollers of one bot).
    pub fn conflicts(&self) -> u64 {
        self.inner.conflicts.load(Ordering::SeqCst)
    }

    /// The parameters of the calls of `method` (lower case).
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.inner
            .calls
            .lock()
            .expect("not poisoned")
            .iter()
            .filter(|c| c.method == method)
            .map(|c| c.body.clone())
            .collect()
    }

    /// When `getUpdates` first returned update `id`.
    pub fn served_at(&self, id: i64) -> Option<Instant> {
        self.inner
            .served
            .lock()
            .expect("not poisoned")
            .get(&id)
            .copied()
    }

    /// A message as the fake shows it now (text, keyboard); panics when it knows none.
    pub fn sent(&self, message_id: i64) -> Value {
        self.message(message_id)
            .unwrap_or_else(|| panic!("the fake knows no message {message_id}"))
    }

    /// The ids of the messages pinned in chat `chat` now, in id order.
    pub fn pinned(&self, chat: i64) -> Vec<i64> {
        let messages = self.inner.messages.lock().expect("not poisoned");
        let mut ids: Vec<i64> = messages
            .iter()
            .filter(|(_, m)| m["chat"]["id"] == chat && m["pinned"] == true)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// The ids of the bot's messages in chat `chat` the fake still shows (not deleted), in order.
    pub fn bot_messages(&self, chat: i64) -> Vec<i64> {
        let messages = self.inner.messages.lock().expect("not poisoned");
        let mut ids: Vec<i64> = messages
            .iter()
            .filter(|(_, m)| m["chat"]["id"] == chat && m["from"]["id"] == BOT_ID)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// A message as the fake shows it now, if it knows it.
    pub fn message(&self, message_id: i64) -> Option<Value> {
        self.inner
            .messages
            .lock()
            .expect("not poisoned")
            .get(&message_id)
            .cloned()
    }

    /// The bytes the fake keeps under `file_id` (a file a person sent, or one the bot uploaded:
    /// what `getFile` and the file URL serve).
    pub fn file_bytes(&self, file_id: &str) -> Option<Vec<u8>> {
        self.inner
            .files
            .lock()
            .expect("not poisoned")
            .get(file_id)
            .map(|(_, b)| b.clone())
    }

    /// The webhook registered by the last `setWebhook` (`None` before, or after `deleteWebhook`).
    pub fn webhook(&self) -> Option<Webhook> {
        self.inner.webhook.lock().expect("not poisoned").clone()
    }

    /// The command menu the last `setMyCommands` registered (`BotCommand` objects).
    pub fn commands(&self) -> Vec<Value> {
        self.inner.commands.lock().expect("not poisoned").clone()
    }

    /// How many buttons message `message_id` shows now.
    pub fn buttons(&self, message_id: i64) -> usize {
        self.message(message_id).map_or(0, |m| {
            m["reply_markup"]["inline_keyboard"]
                .as_array()
                .map_or(0, |rows| {
                    rows.iter().filter_map(Value::as_array).map(Vec::len).sum()
                })
        })
    }

    /// The latest message of the bot in `chat` asking for a reply (ForceReply) that no message
    /// of the fake replies to yet: a Telegram client opens the reply to it.
    pub fn open_force_reply(&self, chat: i64) -> Option<i64> {
        let messages = self.inner.messages.lock().expect("not poisoned");
        let answered: Vec<i64> = messages
            .values()
            .filter_map(|m| m["reply_to_message"]["message_id"].as_i64())
            .collect();
        messages
            .iter()
            .filter(|(id, m)| {
                m["chat"]["id"] == chat
                    && m["reply_markup"]["force_reply"] == true
                    && !answered.contains(id)
            })
            .map(|(id, _)| *id)
            .max()
    }

    /// Every text the bot showed user `user_id`: notices on their callback queries, and messages
    /// replying to one of theirs or mentioning them.
    pub fn notices(&self, user_id: i64) -> Vec<String> {
        let queries = self.inner.queries.lock().expect("not poisoned").clone();
        let messages = self.inner.messages.lock().expect("not poisoned").clone();
        let authored = |id: Option<i64>| {
            id.and_then(|id| messages.get(&id))
                .is_some_and(|m| m["from"]["id"] == user_id)
        };
        self.all_calls()
            .into_iter()
            .filter(|c| c.result.is_some())
            .filter_map(|c| match c.method.as_str() {
                "answercallbackquery" => {
                    let from = c.body["callback_query_id"]
                        .as_str()
                        .and_then(|q| queries.get(q));
                    (from == Some(&user_id))
                        .then(|| c.body["text"].as_str().map(str::to_owned))
                        .flatten()
                }
                "sendmessage" => {
                    let text = c.body["text"].as_str()?.to_owned();
                    let replies = authored(c.body["reply_parameters"]["message_id"].as_i64());
                    let mentions = [&c.body, c.result.as_ref().unwrap_or(&Value::Null)]
                        .iter()
                        .filter_map(|m| m["entities"].as_array())
                        .flatten()
                        .any(|e| e["user"]["id"] == user_id);
                    (replies || mentions).then_some(text)
                }
                _ => None,
            })
            .collect()
    }

    /// Waits until `ready` holds over the recorded calls (failing after [`WAIT`]); returns what
    /// `ready` returned.
    pub async fn wait_for<T>(&self, what: &str, ready: impl Fn(&[Call]) -> Option<T>) -> T {
        let mut rx = self.inner.recorded.subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(v) = ready(&self.inner.calls.lock().expect("not poisoned")) {
                return v;
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                let calls: Vec<_> = self
                    .all_calls()
                    .into_iter()
                    .map(|c| (c.method, c.body))
                    .collect();
                panic!("timed out waiting for {what}; calls: {calls:#?}");
            }
        }
    }

    /// Waits for the `n`-th (1-based) call of `method` and returns its parameters.
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

/// A file a bot uploaded in a multipart form (`sendPhoto`, `sendDocument`).
pub(super) struct Received {
    /// The part's file name.
    pub(super) name: Option<String>,
    /// The part's `Content-Type`.
    pub(super) media_type: Option<String>,
    /// The bytes that arrived.
    pub(super) bytes: Vec<u8>,
}

/// The form fields Telegram reads as JSON values (numbers, booleans, objects), as teloxide
/// writes them into a multipart form; every other field is a string.
const JSON_FIELDS: &[&str] = &[
    "chat_id",
    "message_thread_id",
    "disable_notification",
    "protect_content",
    "reply_parameters",
    "reply_markup",
    "max_connections",
    "drop_pending_updates",
    "allowed_updates",
];

/// The request's parameters: its JSON body, or the fields of a multipart form (teloxide sends
/// `setWebhook` as one, the adapter its uploads) as a JSON object — [`JSON_FIELDS`] read as
/// JSON, the rest as strings, and each file part as `{"file_name", "mime_type", "file_size"}`,
/// its bytes in the map beside it by field name. The body is read as it streams (no size limit:
/// the methods apply Telegram's).
async fn params(req: Request) -> (Value, HashMap<String, Received>) {
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut files = HashMap::new();
    if content_type.starts_with("multipart/form-data") {
        let Ok(boundary) = multer::parse_boundary(&content_type) else {
            return (Value::Null, files);
        };
        let mut form = multer::Multipart::new(req.into_body().into_data_stream(), boundary);
        let mut out = serde_json::Map::new();
        while let Ok(Some(field)) = form.next_field().await {
            let name = field.name().unwrap_or_default().to_owned();
            if let Some(file_name) = field.file_name().map(str::to_owned) {
                let media_type = field.content_type().map(ToString::to_string);
                let Ok(bytes) = field.bytes().await else {
                    return (Value::Null, HashMap::new());
                };
                out.insert(
                    name.clone(),
                    json!({
                        "file_name": file_name, "mime_type": media_type, "file_size": bytes.len()
                    }),
                );
                files.insert(
                    name,
                    Received {
                        name: Some(file_name),
                        media_type,
                        bytes: bytes.to_vec(),
                    },
                );
                continue;
            }
            let text = field.text().await.unwrap_or_default();
            let value = if JSON_FIELDS.contains(&name.as_str()) {
                serde_json::from_str(&text).unwrap_or(Value::String(text))
            } else {
                Value::String(text)
            };
            out.insert(name, value);
        }
        return (Value::Object(out), files);
    }
    let body = axum::body::to_bytes(req.into_body(), usize::MAX)
        .await
        .unwrap_or_default();
    (serde_json::from_slice(&body).unwrap_or(Value::Null), files)
}

async fn api(State(fake): State<Arc<Inner>>, uri: Uri, req: Request) -> Response {
    // A file's bytes: `/file/bot<token>/<file_path>`.
    if let Some(rest) = uri.path().strip_prefix("/file/bot") {
        let path = rest.split_once('/').map(|(_, p)| p).unwrap_or_default();
        let found = fake
            .files
            .lock()
            .expect("not poisoned")
            .values()
            .find(|(p, _)| p == path)
            .map(|(_, b)| b.clone());
        return match found {
            Some(bytes) => (StatusCode::OK, bytes).into_response(),
            None => error(StatusCode::NOT_FOUND, "Not Found", None),
        };
    }
    let method = uri
        .path()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_lowercase();
    let (body, files) = params(req).await;
    let at = Instant::now();
    if fake.refuse_token.load(Ordering::SeqCst) {
        record(&fake, &method, &body, None, at, None);
        return error(StatusCode::UNAUTHORIZED, "Unauthorized", None);
    }
    let fault = fake.fault(&method);
    match fault {
        None => {}
        Some(Fault::ServerError) => {
            record(&fake, &method, &body, None, at, fault);
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error",
                None,
            );
        }
        Some(Fault::RateLimited(wait)) => {
            record(&fake, &method, &body, None, at, fault);
            // Telegram's retry_after is whole seconds.
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            let seconds = seconds.max(1);
            return error(
                StatusCode::TOO_MANY_REQUESTS,
                &format!("Too Many Requests: retry after {seconds}"),
                Some(json!({ "retry_after": seconds })),
            );
        }
        Some(Fault::Timeout) => {
            record(&fake, &method, &body, None, at, fault);
            tokio::time::sleep(HOLD).await;
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error",
                None,
            );
        }
        Some(Fault::ResetAfterProcessing) => {
            let result = if method == "getupdates" {
                // Served, and lost on the way.
                let _ = get_updates(&fake, &body).await;
                None
            } else {
                respond(&fake, &method, &body, &files).1
            };
            record(&fake, &method, &body, result, at, fault);
            return reset();
        }
    }
    if method == "getupdates" {
        record(&fake, &method, &body, None, at, None);
        return get_updates(&fake, &body).await;
    }
    let (response, result) = respond(&fake, &method, &body, &files);
    record(&fake, &method, &body, result, at, None);
    response
}

/// How long an injected timeout holds a request (longer than any client waits in tests).
const HOLD: Duration = Duration::from_secs(60);

/// An answer cut off after its status line: the body fails, the connection is dropped.
fn reset() -> Response {
    let cut = futures::stream::once(async {
        Err::<Bytes, _>(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "connection reset after processing",
        ))
    });
    let mut response = Response::new(axum::body::Body::from_stream(cut));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, "application/json".parse().expect("a header"));
    response
}

impl Inner {
    /// Keeps `bytes` under a new `file_id` and `path` (what `getFile` and the file URL serve).
    pub(super) fn store(&self, path: &str, bytes: Vec<u8>) -> String {
        let n = self.next_message.fetch_add(1, Ordering::SeqCst);
        let id = format!("AgACAgIAAxkBAAI{n:06}");
        self.files
            .lock()
            .expect("not poisoned")
            .insert(id.clone(), (path.to_owned(), bytes));
        id
    }

    /// Remembers that message `id` shows the upload `file` (stored as `file_id`), as `kind`.
    fn note_upload(&self, id: i64, kind: &str, file: &Received, file_id: &str) {
        self.uploads.lock().expect("not poisoned").insert(
            id,
            json!({
                "kind": kind,
                "name": file.name.clone().unwrap_or_default(),
                "media_type": file.media_type.clone().unwrap_or_default(),
                "size": file.bytes.len(),
                "file_id": file_id,
            }),
        );
    }

    /// The fault injected into this call of `method`, if any.
    fn fault(&self, method: &str) -> Option<Fault> {
        let faults = self.faults.lock().expect("not poisoned");
        let (plan, methods) = faults.as_ref()?;
        let applies = if methods.is_empty() {
            method != "getupdates"
        } else {
            methods.iter().any(|m| m == method)
        };
        if applies { plan.next() } else { None }
    }
}

fn record(
    fake: &Inner,
    method: &str,
    body: &Value,
    result: Option<Value>,
    at: Instant,
    fault: Option<Fault>,
) {
    fake.calls.lock().expect("not poisoned").push(Call {
        method: method.to_owned(),
        body: body.clone(),
        result,
        at,
        fault,
    });
    fake.recorded.send_modify(|n| *n += 1);
}

/// Why Telegram would refuse the message text of `body` (its `text`, parsed as HTML when its
/// `parse_mode` is `HTML`).
fn refuse_text(body: &Value) -> Option<String> {
    let text = match shown_text(body) {
        Ok(text) => text,
        Err(why) => return Some(format!("Bad Request: can't parse entities: {why}")),
    };
    if text.trim().is_empty() {
        Some("Bad Request: message text is empty".into())
    } else if text.chars().count() > MAX_TEXT {
        Some("Bad Request: message is too long".into())
    } else {
        None
    }
}

/// Why Telegram would refuse the caption `caption` (parsed as HTML when `parse_mode` is `HTML`),
/// else the caption shown.
fn read_caption(caption: &Value, parse_mode: &Value) -> Result<Option<String>, String> {
    let Some(text) = caption.as_str() else {
        return Ok(None);
    };
    let shown = shown_text(&json!({"text": text, "parse_mode": parse_mode}))
        .map_err(|why| format!("Bad Request: can't parse entities: {why}"))?;
    if shown.chars().count() > MAX_CAPTION {
        return Err("Bad Request: message caption is too long".into());
    }
    Ok(Some(shown).filter(|s| !s.is_empty()))
}

/// The `photo` sizes of a message showing the image at `url` (Telegram fetches an http(s) URL; a
/// file id is not supported by this fake).
fn photo_sizes(url: &Value) -> Result<Value, &'static str> {
    let url = url.as_str().unwrap_or_default();
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err("Bad Request: wrong file identifier/HTTP URL specified");
    }
    Ok(json!([
        {"file_id": format!("photo:{url}:s"), "file_unique_id": format!("s{}", url.len()),
         "width": 90, "height": 60, "file_size": 1200},
        {"file_id": format!("photo:{url}:m"), "file_unique_id": format!("m{}", url.len()),
         "width": 800, "height": 533, "file_size": 48000}
    ]))
}

/// The width and height of an uploaded photo, or why Telegram would refuse it as one: read from
/// a PNG's `IHDR` or a GIF's screen descriptor (JPEG and WebP are taken as 800×600, unread); at
/// most 10 MB ("PHOTO_SAVE_FILE_INVALID"), width + height at most 10,000 and a ratio at most 20
/// ("PHOTO_INVALID_DIMENSIONS", as documented for `sendPhoto`); anything else is no picture
/// ("IMAGE_PROCESS_FAILED").
fn photo_dimensions(bytes: &[u8]) -> Result<(u64, u64), &'static str> {
    if bytes.len() as u64 > MAX_PHOTO {
        return Err("Bad Request: PHOTO_SAVE_FILE_INVALID");
    }
    let be = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|b| u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
    };
    let le16 = |at: usize| {
        bytes
            .get(at..at + 2)
            .map(|b| u64::from(u16::from_le_bytes([b[0], b[1]])))
    };
    let (width, height) =
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.get(12..16) == Some(&b"IHDR"[..]) {
            (be(16), be(20))
        } else if bytes.starts_with(b"GIF8") {
            (le16(6), le16(8))
        } else if bytes.starts_with(&[0xff, 0xd8, 0xff])
            || (bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(&b"WEBP"[..]))
        {
            (Some(800), Some(600))
        } else {
            (None, None)
        };
    let (Some(width), Some(height)) = (width, height) else {
        return Err("Bad Request: IMAGE_PROCESS_FAILED");
    };
    let (small, large) = (width.min(height), width.max(height));
    if small == 0 || width + height > 10_000 || large > small * 20 {
        return Err("Bad Request: PHOTO_INVALID_DIMENSIONS");
    }
    Ok((width, height))
}

/// A `file_unique_id` for `file_id` (Telegram's is shorter and the same for every bot).
fn unique_id(file_id: &str) -> String {
    format!("AQAD{}", &file_id[file_id.len().saturating_sub(8)..])
}

/// The `photo` sizes of an uploaded picture of `width` × `height`: a thumbnail (at most 90 px
/// a side) and the picture itself, each a `PhotoSize` whose `file_id` `getFile` resolves. The
/// fake does not re-encode: both are the bytes uploaded (Telegram's sizes are re-encoded JPEGs).
fn uploaded_photo_sizes(
    fake: &Inner,
    file_id: &str,
    bytes: &[u8],
    width: u64,
    height: u64,
) -> Value {
    let full = json!({
        "file_id": file_id, "file_unique_id": unique_id(file_id),
        "width": width, "height": height, "file_size": bytes.len()
    });
    if width.max(height) <= 90 {
        return json!([full]);
    }
    let scale = |side: u64| (side * 90 / width.max(height)).max(1);
    let thumb_id = fake.store(&format!("photos/thumb_{file_id}.jpg"), bytes.to_vec());
    json!([
        {"file_id": thumb_id, "file_unique_id": unique_id(&thumb_id),
         "width": scale(width), "height": scale(height), "file_size": bytes.len()},
        full
    ])
}

/// The text a message of `body` shows: its `text`, or with `parse_mode` `HTML` what is left of it
/// after entity parsing (what Telegram returns as the message's `text`).
pub(super) fn shown_text(body: &Value) -> Result<String, String> {
    let text = body["text"].as_str().unwrap_or_default();
    match body["parse_mode"].as_str() {
        Some(mode) if mode.eq_ignore_ascii_case("html") => parse_html(text),
        Some(mode) => Err(format!("unsupported parse_mode {mode:?} in this fake")),
        None => Ok(text.to_owned()),
    }
}

/// The tags Telegram's HTML parse mode knows.
const HTML_TAGS: &str =
    "b strong i em u ins s strike del span tg-spoiler a code pre blockquote tg-emoji";

/// Decodes the HTML entity at the start of `s` (which starts with `&`): the character and the
/// entity's length. Telegram knows `&lt;`, `&gt;`, `&amp;`, `&quot;` and numeric entities.
fn html_entity(s: &str) -> Option<(char, usize)> {
    let end = s.find(';')?;
    let name = &s[1..end];
    let c = match name {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        _ => {
            let n = name.strip_prefix('#')?;
            let code = match n.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => n.parse().ok()?,
            };
            char::from_u32(code)?
        }
    };
    Some((c, end + 1))
}

/// Parses `html` as Telegram's HTML parse mode does: the text left after entity parsing, or why
/// it cannot be parsed (as Telegram words it after "can't parse entities: ").
fn parse_html(html: &str) -> Result<String, String> {
    parse_html_mentions(html).map(|(shown, _)| shown)
}

/// A user mention of an inline link `<a href="tg://user?id=ID">`: `(ID, offset, length)` in the
/// shown text, in UTF-16 code units (as a `MessageEntity`).
type LinkMention = (i64, usize, usize);

/// [`parse_html`], with the user mentions of its inline links ([`LinkMention`]).
fn parse_html_mentions(html: &str) -> Result<(String, Vec<LinkMention>), String> {
    let mut shown = String::new();
    let mut open: Vec<&str> = Vec::new();
    // The mention each open `a` starts (user id, offset), and the mentions closed.
    let mut links: Vec<Option<(i64, usize)>> = Vec::new();
    let mut mentions = Vec::new();
    let units = |s: &str| s.encode_utf16().count();
    let mut at = 0;
    while at < html.len() {
        let rest = &html[at..];
        let c = rest.chars().next().expect("not at the end");
        match c {
            '&' => {
                let (c, len) = html_entity(rest).ok_or_else(|| {
                    format!("Character '&' is reserved and must be escaped as \"&amp;\" at byte offset {at}")
                })?;
                shown.push(c);
                at += len;
            }
            '>' => {
                return Err(format!(
                    "Character '>' is reserved and must be escaped as \"&gt;\" at byte offset {at}"
                ));
            }
            '<' => {
                let end = rest
                    .find('>')
                    .filter(|&e| !rest[1..e].contains('<'))
                    .ok_or_else(|| format!("Unexpected end of name token at byte offset {at}"))?;
                let inner = &rest[1..end];
                if let Some(name) = inner.strip_prefix('/') {
                    let name = name.trim();
                    match open.pop() {
                        Some(top) if top == name => {
                            if name == "a"
                                && let Some(Some((id, from))) = links.pop()
                            {
                                mentions.push((id, from, units(&shown) - from));
                            }
                        }
                        Some(top) => {
                            return Err(format!(
                                "Unmatched end tag at byte offset {at}, expected \"</{top}>\", found \"</{name}>\""
                            ));
                        }
                        None => return Err(format!("Unexpected end tag at byte offset {at}")),
                    }
                } else {
                    let name = inner
                        .split(|c: char| c.is_whitespace())
                        .next()
                        .unwrap_or_default();
                    let Some(name) = HTML_TAGS.split(' ').find(|t| *t == name) else {
                        return Err(format!(
                            "Unsupported start tag \"{name}\" at byte offset {at}"
                        ));
                    };
                    let attrs = &inner[name.len()..];
                    let has = |attr: &str| attrs.contains(&format!("{attr}="));
                    let inside = |names: &[&str]| open.iter().any(|o| names.contains(o));
                    let refused = if name == "a" && !has("href") {
                        Some("Tag \"a\" must have an href".to_owned())
                    } else if name == "span" && !attrs.contains("tg-spoiler") {
                        Some("Tag \"span\" must have class \"tg-spoiler\"".to_owned())
                    } else if inside(&["code"]) || (inside(&["pre"]) && name != "code") {
                        Some(format!(
                            "Entity \"{name}\" can't be inside \"code\" or \"pre\""
                        ))
                    } else if name == "pre" && !open.is_empty() {
                        // Documented: pre and code entities can't be part of any other entity.
                        Some("Entity \"pre\" can't be inside another entity".to_owned())
                    } else if name == "code"
                        && open.iter().any(|o| !["pre", "blockquote"].contains(o))
                    {
                        Some("Entity \"code\" can't be inside another entity".to_owned())
                    } else if name == "blockquote" && inside(&["blockquote"]) {
                        Some("Entity \"blockquote\" can't be nested".to_owned())
                    } else if name == "a" && inside(&["a"]) {
                        Some("Entity \"a\" can't be nested".to_owned())
                    } else {
                        None
                    };
                    if let Some(why) = refused {
                        return Err(format!("{why} at byte offset {at}"));
                    }
                    if name == "a" {
                        let user = attrs
                            .split_once("href=\"tg://user?id=")
                            .and_then(|(_, id)| id.split_once('"'))
                            .and_then(|(id, _)| id.parse::<i64>().ok());
                        links.push(user.map(|id| (id, units(&shown))));
                    }
                    open.push(name);
                }
                at += end + 1;
            }
            c => {
                shown.push(c);
                at += c.len_utf8();
            }
        }
    }
    match open.last() {
        Some(name) => Err(format!(
            "Can't find end tag corresponding to start tag \"{name}\""
        )),
        None => Ok((shown, mentions)),
    }
}

/// The `text_mention` entities Telegram gives a message sent with `body` (parse mode HTML): one
/// per `tg://user?id=` link to a user the fake knows (the author of a message it keeps, or a user
/// a message mentions), carrying that user. A link to a user it does not know stays plain text:
/// the Bot API guarantees such mentions only for members of the chat and users who contacted
/// the bot.
fn mention_entities(body: &Value, messages: &HashMap<i64, Value>) -> Vec<Value> {
    let html = body["parse_mode"]
        .as_str()
        .is_some_and(|m| m.eq_ignore_ascii_case("html"));
    let Some(Ok((_, links))) = body["text"]
        .as_str()
        .filter(|_| html)
        .map(parse_html_mentions)
    else {
        return Vec::new();
    };
    let known = |id: i64| {
        messages.values().find_map(|m| {
            if m["from"]["id"] == id {
                return Some(m["from"].clone());
            }
            m["entities"]
                .as_array()?
                .iter()
                .find(|e| e["user"]["id"] == id)
                .map(|e| e["user"].clone())
        })
    };
    links
        .into_iter()
        .filter_map(|(id, offset, length)| {
            let user = known(id)?;
            Some(json!({"type": "text_mention", "offset": offset, "length": length, "user": user}))
        })
        .collect()
}

/// Why Telegram would refuse `markup` (an inline keyboard; other markups pass).
fn refuse_markup(markup: &Value) -> Option<&'static str> {
    if let Some(force) = markup.get("force_reply") {
        // ForceReply: `force_reply` is `true`; `input_field_placeholder` 1–64 characters.
        if force != &json!(true) {
            return Some("Bad Request: can't parse reply keyboard markup JSON object");
        }
        if let Some(p) = markup.get("input_field_placeholder") {
            let n = p.as_str().map_or(0, |p| p.chars().count());
            if !(1..=MAX_PLACEHOLDER).contains(&n) {
                return Some("Bad Request: can't parse reply keyboard markup JSON object");
            }
        }
        return None;
    }
    let rows = markup.get("inline_keyboard")?;
    let Some(rows) = rows.as_array() else {
        return Some(
            "Bad Request: can't parse inline keyboard button: field \"inline_keyboard\" must be an Array",
        );
    };
    let buttons: Vec<&Value> = rows.iter().filter_map(Value::as_array).flatten().collect();
    if buttons.len() > MAX_BUTTONS {
        return Some("Bad Request: reply markup is too long");
    }
    if rows
        .iter()
        .any(|r| r.as_array().is_some_and(|r| r.len() > MAX_ROW))
    {
        return Some("Bad Request: too many buttons in a row");
    }
    for b in buttons {
        let text = b["text"].as_str().unwrap_or_default();
        if text.is_empty() || text.chars().count() > MAX_BUTTON_TEXT {
            return Some("Bad Request: BUTTON_TEXT_INVALID");
        }
        if let Some(data) = b.get("callback_data") {
            let len = data.as_str().map_or(0, str::len);
            if !(1..=MAX_CALLBACK_DATA).contains(&len) {
                return Some("Bad Request: BUTTON_DATA_INVALID");
            }
        }
    }
    None
}

/// The emojis a bot may react with (the Bot API's `ReactionTypeEmoji` list).
const REACTION_EMOJIS: &[&str] = &[
    "👍",
    "👎",
    "❤",
    "🔥",
    "🥰",
    "👏",
    "😁",
    "🤔",
    "🤯",
    "😱",
    "🤬",
    "😢",
    "🎉",
    "🤩",
    "🤮",
    "💩",
    "🙏",
    "👌",
    "🕊",
    "🤡",
    "🥱",
    "🥴",
    "😍",
    "🐳",
    "❤\u{200d}🔥",
    "🌚",
    "🌭",
    "💯",
    "🤣",
    "⚡",
    "🍌",
    "🏆",
    "💔",
    "🤨",
    "😐",
    "🍓",
    "🍾",
    "💋",
    "🖕",
    "😈",
    "😴",
    "😭",
    "🤓",
    "👻",
    "👨\u{200d}💻",
    "👀",
    "🎃",
    "🙈",
    "😇",
    "😨",
    "🤝",
    "✍",
    "🤗",
    "🫡",
    "🎅",
    "🎄",
    "☃",
    "💅",
    "🤪",
    "🗿",
    "🆒",
    "💘",
    "🙉",
    "🦄",
    "😘",
    "💊",
    "🙊",
    "😎",
    "👾",
    "🤷\u{200d}♂",
    "🤷",
    "🤷\u{200d}♀",
    "😡",
];

fn respond(
    fake: &Inner,
    method: &str,
    body: &Value,
    files: &HashMap<String, Received>,
) -> (Response, Option<Value>) {
    let ok = |result: Value| (ok(result.clone()), Some(result));
    let bad = |description: &str| (error(StatusCode::BAD_REQUEST, description, None), None);
    match method {
        "getfile" => {
            let id = body["file_id"].as_str().unwrap_or_default();
            match fake.files.lock().expect("not poisoned").get(id) {
                Some((_, bytes)) if bytes.len() > 20 * 1024 * 1024 => {
                    bad("Bad Request: file is too big")
                }
                Some((path, bytes)) => ok(json!({
                    "file_id": id, "file_unique_id": format!("u{id}"),
                    "file_size": bytes.len(), "file_path": path
                })),
                None => bad("Bad Request: invalid file_id"),
            }
        }
        "getme" => ok(json!({
            "id": BOT_ID, "is_bot": true, "first_name": "FrogBot", "username": BOT_USERNAME,
            "can_join_groups": true, "can_read_all_group_messages": false,
            "supports_inline_queries": false, "can_connect_to_business": false,
            "has_main_web_app": false
        })),
        "setwebhook" => {
            let url = body["url"].as_str().unwrap_or_default();
            if !url.starts_with("https://") {
                return bad("Bad Request: bad webhook: An HTTPS URL must be provided for webhook");
            }
            *fake.webhook.lock().expect("not poisoned") = Some(Webhook {
                url: url.to_owned(),
                secret: body["secret_token"].as_str().map(str::to_owned),
            });
            ok(json!(true))
        }
        // BotCommand: `command` 1-32 characters of a-z, 0-9 and _; `description` 1-256 characters.
        "setmycommands" => {
            let Some(commands) = body["commands"].as_array() else {
                return bad("Bad Request: parameter \"commands\" is required");
            };
            for c in commands {
                let name = c["command"].as_str().unwrap_or_default();
                let about = c["description"].as_str().unwrap_or_default();
                if name.is_empty()
                    || name.len() > 32
                    || !name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                {
                    return bad("Bad Request: BOT_COMMAND_INVALID");
                }
                if about.is_empty() || about.chars().count() > 256 {
                    return bad("Bad Request: BOT_COMMAND_DESCRIPTION_INVALID");
                }
            }
            *fake.commands.lock().expect("not poisoned") = commands.clone();
            ok(json!(true))
        }
        "deletewebhook" => {
            *fake.webhook.lock().expect("not poisoned") = None;
            ok(json!(true))
        }
        // WebhookInfo: `url` empty when none is set; updates not yet confirmed are pending.
        "getwebhookinfo" => {
            let url = fake
                .webhook
                .lock()
                .expect("not poisoned")
                .as_ref()
                .map(|w| w.url.clone())
                .unwrap_or_default();
            let pending = fake.pending.lock().expect("not poisoned").len();
            ok(json!({
                "url": url, "has_custom_certificate": false, "pending_update_count": pending
            }))
        }
        "setmessagereaction" => {
            // A bot sets at most one reaction, from Telegram's list; the message must exist.
            let reactions = body["reaction"].as_array().cloned().unwrap_or_default();
            if reactions.len() > 1 {
                return bad("Bad Request: REACTIONS_TOO_MANY");
            }
            let allowed = reactions.iter().all(|r| {
                r["type"] == "emoji"
                    && r["emoji"]
                        .as_str()
                        .is_some_and(|e| REACTION_EMOJIS.contains(&e))
            });
            if !allowed {
                return bad("Bad Request: REACTION_INVALID");
            }
            let id = body["message_id"].as_i64().unwrap_or_default();
            let mut messages = fake.messages.lock().expect("not poisoned");
            let Some(m) = messages.get_mut(&id) else {
                return bad("Bad Request: message to react not found");
            };
            // The bot's reactions now: the call replaces them all.
            m["bot_reactions"] = json!(reactions);
            ok(json!(true))
        }
        "sendmessagedraft" => {
            // Bot API 9.3: private chats only, a non-zero draft id, 1–4,096 characters of text.
            if let Some(why) = fake.refuse_drafts.lock().expect("not poisoned").clone() {
                return bad(&why);
            }
            if body["chat_id"].as_i64().is_none_or(|c| c <= 0) {
                return bad("Bad Request: chat not found");
            }
            if body["draft_id"].as_i64().is_none_or(|d| d == 0) {
                return bad("Bad Request: DRAFT_ID_INVALID");
            }
            if let Some(why) = refuse_text(body) {
                return bad(&why);
            }
            ok(json!(true))
        }
        "sendchataction" => {
            if body["action"].as_str().is_none() {
                return bad("Bad Request: wrong parameter action in request");
            }
            ok(json!(true))
        }
        "answercallbackquery" => {
            let text = body["text"].as_str().unwrap_or_default();
            if text.chars().count() > MAX_NOTICE {
                return bad("Bad Request: MESSAGE_TOO_LONG");
            }
            // A query the fake never sent, or one already answered, is refused as Telegram does.
            let id = body["callback_query_id"].as_str().unwrap_or_default();
            let known = fake.queries.lock().expect("not poisoned").contains_key(id);
            if !known
                || !fake
                    .answered
                    .lock()
                    .expect("not poisoned")
                    .insert(id.to_owned())
            {
                return bad(
                    "Bad Request: query is too old and response timeout expired or query ID is invalid",
                );
            }
            ok(json!(true))
        }
        "sendmessage" => {
            if let Some(why) =
                refuse_text(body).or_else(|| refuse_markup(&body["reply_markup"]).map(Into::into))
            {
                return bad(&why);
            }
            let has_keyboard = body["reply_markup"]["inline_keyboard"].is_array();
            let throttled = has_keyboard
                && fake
                    .throttle_keyboard_sends
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
            if throttled {
                return (
                    error(
                        StatusCode::TOO_MANY_REQUESTS,
                        "Too Many Requests: retry after 1",
                        Some(json!({"retry_after": 1})),
                    ),
                    None,
                );
            }
            let id = fake.next_message.fetch_add(1, Ordering::SeqCst);
            let mut m = json!({
                "message_id": id, "date": now(), "chat": chat_of(&body["chat_id"]),
                "from": bot_user(), "text": shown_text(body).unwrap_or_default()
            });
            if let Some(t) = body["message_thread_id"].as_i64() {
                m["message_thread_id"] = json!(t);
                m["is_topic_message"] = json!(true);
            }
            if !body["reply_markup"].is_null() {
                m["reply_markup"] = body["reply_markup"].clone();
            }
            let mut messages = fake.messages.lock().expect("not poisoned");
            let mentions = mention_entities(body, &messages);
            if !mentions.is_empty() {
                m["entities"] = json!(mentions);
            }
            if let Some(r) = body["reply_parameters"]["message_id"].as_i64()
                && let Some(original) = messages.get(&r)
            {
                m["reply_to_message"] = as_reply_to(original);
            }
            if body["disable_notification"] == true {
                fake.silent.lock().expect("not poisoned").insert(id);
            }
            messages.insert(id, m.clone());
            // What a client shows: ForceReply is no keyboard of the message.
            let mut shown = m.clone();
            if shown["reply_markup"]["inline_keyboard"].is_null()
                && let Some(o) = shown.as_object_mut()
            {
                o.remove("reply_markup");
            }
            ok(shown)
        }
        "sendphoto" | "senddocument" => {
            let field = if method == "sendphoto" {
                "photo"
            } else {
                "document"
            };
            let upload = files.get(field);
            if let Some(u) = upload {
                if u.bytes.len() as u64 > MAX_UPLOAD {
                    return (
                        error(
                            StatusCode::PAYLOAD_TOO_LARGE,
                            "Request Entity Too Large",
                            None,
                        ),
                        None,
                    );
                }
                if u.bytes.is_empty() {
                    return bad("Bad Request: file must be non-empty");
                }
            }
            // A photo's sizes, checked before anything is stored.
            let dimensions = match (method, upload) {
                ("sendphoto", Some(u)) => match photo_dimensions(&u.bytes) {
                    Ok(d) => Some(d),
                    Err(why) => return bad(why),
                },
                ("sendphoto", None) => None,
                (_, Some(_)) => None,
                // A document by URL or file id: this fake takes uploads only.
                (_, None) => {
                    return bad("Bad Request: wrong file identifier/HTTP URL specified");
                }
            };
            let url_sizes = match (method, upload) {
                ("sendphoto", None) => match photo_sizes(&body["photo"]) {
                    Ok(s) => Some(s),
                    Err(why) => return bad(why),
                },
                _ => None,
            };
            let caption = match read_caption(&body["caption"], &body["parse_mode"]) {
                Ok(c) => c,
                Err(why) => return bad(&why),
            };
            if let Some(why) = refuse_markup(&body["reply_markup"]) {
                return bad(why);
            }
            let id = fake.next_message.fetch_add(1, Ordering::SeqCst);
            let mut m = json!({
                "message_id": id, "date": now(), "chat": chat_of(&body["chat_id"]),
                "from": bot_user()
            });
            match (upload, dimensions, url_sizes) {
                (_, _, Some(sizes)) => m["photo"] = sizes,
                (Some(u), Some((width, height)), None) => {
                    let file_id = fake.store(&format!("photos/file_{id}.jpg"), u.bytes.clone());
                    m["photo"] = uploaded_photo_sizes(fake, &file_id, &u.bytes, width, height);
                    fake.note_upload(id, "photo", u, &file_id);
                }
                (Some(u), _, None) => {
                    let name = u.name.clone().unwrap_or_else(|| "file".to_owned());
                    let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("bin");
                    let file_id =
                        fake.store(&format!("documents/file_{id}.{ext}"), u.bytes.clone());
                    let mut document = json!({
                        "file_id": file_id, "file_unique_id": unique_id(&file_id),
                        "file_name": name, "file_size": u.bytes.len()
                    });
                    if let Some(t) = &u.media_type {
                        document["mime_type"] = json!(t);
                    }
                    m["document"] = document;
                    fake.note_upload(id, "document", u, &file_id);
                }
                (None, _, None) => unreachable!("refused above"),
            }
            if let Some(c) = caption {
                m["caption"] = json!(c);
            }
            if let Some(t) = body["message_thread_id"].as_i64() {
                m["message_thread_id"] = json!(t);
                m["is_topic_message"] = json!(true);
            }
            if body["reply_markup"]["inline_keyboard"].is_array() {
                m["reply_markup"] = body["reply_markup"].clone();
            }
            let mut messages = fake.messages.lock().expect("not poisoned");
            if let Some(r) = body["reply_parameters"]["message_id"].as_i64()
                && let Some(original) = messages.get(&r)
            {
                m["reply_to_message"] = as_reply_to(original);
            }
            if body["disable_notification"] == true {
                fake.silent.lock().expect("not poisoned").insert(id);
            }
            messages.insert(id, m.clone());
            ok(m)
        }
        "editmessagemedia" => {
            // The new media replaces the message's (a text message gets it added: Bot API 7.x+
            // "or to add media to text messages"); the caption is the media's.
            let media = &body["media"];
            if media["type"] != "photo" {
                return bad("Bad Request: this fake edits photos only");
            }
            let sizes = match photo_sizes(&media["media"]) {
                Ok(s) => s,
                Err(why) => return bad(why),
            };
            let caption = match read_caption(&media["caption"], &media["parse_mode"]) {
                Ok(c) => c,
                Err(why) => return bad(&why),
            };
            if let Some(why) = refuse_markup(&body["reply_markup"]) {
                return bad(why);
            }
            let id = body["message_id"].as_i64().unwrap_or(0);
            let mut messages = fake.messages.lock().expect("not poisoned");
            let Some(m) = messages
                .get_mut(&id)
                .filter(|m| m["chat"]["id"] == body["chat_id"] && m["from"]["id"] == BOT_ID)
            else {
                return bad("Bad Request: message to edit not found");
            };
            let mut edited = m.clone();
            if let Some(o) = edited.as_object_mut() {
                o.remove("text");
                o.remove("caption");
                o.remove("reply_markup");
            }
            edited["photo"] = sizes;
            if let Some(c) = caption {
                edited["caption"] = json!(c);
            }
            if body["reply_markup"]["inline_keyboard"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
            {
                edited["reply_markup"] = body["reply_markup"].clone();
            }
            if edited == *m {
                return bad(NOT_MODIFIED);
            }
            edited["edit_date"] = json!(now());
            fake.edited.lock().expect("not poisoned").insert(id);
            *m = edited.clone();
            ok(edited)
        }
        "deletemessage" => {
            let id = body["message_id"].as_i64().unwrap_or(0);
            let mut messages = fake.messages.lock().expect("not poisoned");
            if !messages
                .get(&id)
                .is_some_and(|m| m["chat"]["id"] == body["chat_id"])
            {
                return bad("Bad Request: message to delete not found");
            }
            messages.remove(&id);
            ok(json!(true))
        }
        "pinchatmessage" | "unpinchatmessage" => {
            let id = body["message_id"].as_i64().unwrap_or(0);
            let mut messages = fake.messages.lock().expect("not poisoned");
            let Some(m) = messages
                .get_mut(&id)
                .filter(|m| m["chat"]["id"] == body["chat_id"])
            else {
                return bad("Bad Request: message not found");
            };
            // Pinning a pinned message (or unpinning one that is not) is accepted as done.
            m["pinned"] = json!(method == "pinchatmessage");
            ok(json!(true))
        }
        "editmessagetext" | "editmessagereplymarkup" => {
            if method == "editmessagetext"
                && let Some(why) = refuse_text(body)
            {
                return bad(&why);
            }
            if let Some(why) = refuse_markup(&body["reply_markup"]) {
                return bad(why);
            }
            // An edit takes an inline keyboard only (no ForceReply).
            if !body["reply_markup"].is_null() && body["reply_markup"]["inline_keyboard"].is_null()
            {
                return bad("Bad Request: inline keyboard expected");
            }
            let id = body["message_id"].as_i64().unwrap_or(0);
            let mut messages = fake.messages.lock().expect("not poisoned");
            let mentions = mention_entities(body, &messages);
            let Some(m) = messages
                .get_mut(&id)
                .filter(|m| m["chat"]["id"] == body["chat_id"] && m["from"]["id"] == BOT_ID)
            else {
                return bad("Bad Request: message to edit not found");
            };
            if method == "editmessagetext" && m.get("photo").is_some() {
                return bad("Bad Request: there is no text in the message to edit");
            }
            let mut edited = m.clone();
            if body.get("text").is_some() {
                edited["text"] = json!(shown_text(body).unwrap_or_default());
                match edited.as_object_mut() {
                    Some(o) if mentions.is_empty() => {
                        o.remove("entities");
                    }
                    _ => edited["entities"] = json!(mentions),
                }
            }
            match body.get("reply_markup") {
                Some(k)
                    if k["inline_keyboard"]
                        .as_array()
                        .is_some_and(|r| !r.is_empty()) =>
                {
                    edited["reply_markup"] = k.clone();
                }
                _ => {
                    if let Some(o) = edited.as_object_mut() {
                        o.remove("reply_markup");
                    }
                }
            }
            if edited == *m {
                return bad(NOT_MODIFIED);
            }
            if method == "editmessagetext" {
                fake.edited.lock().expect("not poisoned").insert(id);
            }
            *m = edited.clone();
            ok(edited)
        }
        _ => (error(StatusCode::NOT_FOUND, "Not Found", None), None),
    }
}

async fn get_updates(fake: &Inner, body: &Value) -> Response {
    // The newest poller wins: one still waiting learns it was terminated (and wakes up).
    let me = fake.poller.fetch_add(1, Ordering::SeqCst) + 1;
    fake.queued.send_modify(|n| *n += 1);
    let offset = body["offset"].as_i64().unwrap_or(0);
    let limit = body["limit"].as_u64().unwrap_or(100).clamp(1, 100) as usize;
    let timeout = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
    let deadline = tokio::time::Instant::now() + timeout;
    let mut rx = fake.queued.subscribe();
    loop {
        if fake.poller.load(Ordering::SeqCst) != me {
            fake.conflicts.fetch_add(1, Ordering::SeqCst);
            return error(
                StatusCode::CONFLICT,
                "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                None,
            );
        }
        let batch: Vec<Value> = {
            let mut pending = fake.pending.lock().expect("not poisoned");
            // An offset confirms every update before it: they are forgotten.
            pending.retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
            pending.iter().take(limit).cloned().collect()
        };
        if !batch.is_empty() {
            let now = Instant::now();
            let mut served = fake.served.lock().expect("not poisoned");
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
