//! The fake Slack's Web API: its state (calls, messages, modals, pins, faults), the
//! HTTP server every clone shares, the methods' routes with Slack's documented limits enforced,
//! and what a test reads back from it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use frogbot_model::faults::{Fault, FaultPlan};
use frogbot_model::now_millis;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::socket::{SocketConnection, ws_server};
use super::{APP, APP_TOKEN, BOT_ID, BOT_TOKEN, BOT_USER, SIGNING_SECRET, TEAM};
use crate::channel::{Connector, connector};
use crate::ids::{message_id, split_id};
use crate::{SlackQuestions, SlackWebApi};

/// Slack's documented limits the fake enforces.
pub mod limits {
    /// Blocks in a message.
    pub const MESSAGE_BLOCKS: usize = 50;
    /// Blocks in a modal.
    pub const MODAL_BLOCKS: usize = 100;
    /// A message's `text`.
    pub const MESSAGE_TEXT: usize = 40_000;
    /// `markdown_text` of a streaming call, and a `markdown` block's text.
    pub const MARKDOWN_TEXT: usize = 12_000;
    /// A section's text.
    pub const SECTION_TEXT: usize = 3000;
    /// A section's fields.
    pub const SECTION_FIELDS: usize = 10;
    /// A context block's elements.
    pub const CONTEXT_ELEMENTS: usize = 10;
    /// An actions block's elements.
    pub const ACTIONS_ELEMENTS: usize = 25;
    /// A button's text.
    pub const BUTTON_TEXT: usize = 75;
    /// A button's value.
    pub const BUTTON_VALUE: usize = 2000;
    /// An `action_id` or `block_id`.
    pub const ID: usize = 255;
    /// A select's options.
    pub const SELECT_OPTIONS: usize = 100;
    /// A checkbox group's or radio group's options.
    pub const CHECKBOX_OPTIONS: usize = 10;
    /// An option's text.
    pub const OPTION_TEXT: usize = 75;
    /// An option's value.
    pub const OPTION_VALUE: usize = 150;
    /// An option's description.
    pub const OPTION_DESCRIPTION: usize = 75;
    /// A placeholder.
    pub const PLACEHOLDER: usize = 150;
    /// An input block's label.
    pub const LABEL: usize = 2000;
    /// A modal's title, submit and close texts.
    pub const MODAL_TITLE: usize = 24;
    /// A modal's private metadata.
    pub const PRIVATE_METADATA: usize = 3000;
    /// A `plain_text_input`'s `max_length` / `min_length`.
    pub const TEXT_INPUT: u64 = 3000;
    /// An input block's hint.
    pub const HINT: usize = 2000;
    /// A confirmation dialog's title.
    pub const CONFIRM_TITLE: usize = 100;
    /// A confirmation dialog's text.
    pub const CONFIRM_TEXT: usize = 300;
    /// A confirmation dialog's confirm and deny texts.
    pub const CONFIRM_BUTTON: usize = 30;
    /// The text of one of a section's `fields`.
    pub const FIELD_TEXT: usize = 2000;
    /// A `table` block's rows (its header row included).
    pub const TABLE_ROWS: usize = 100;
    /// Cells in a `table` row, and `column_settings`.
    pub const TABLE_CELLS: usize = 20;
    /// A `raw_text` cell's text (Slack documents none; the most a FrogBot cell holds).
    pub const CELL_TEXT: usize = 2000;
    /// An `image` block's `image_url`.
    pub const IMAGE_URL: usize = 3000;
    /// An `image` block's `alt_text`.
    pub const ALT_TEXT: usize = 2000;
}

/// A Web API call the fake received.
#[derive(Clone, Debug)]
pub struct Call {
    /// The method (`chat.postMessage`, …).
    pub method: String,
    /// The `Authorization` header.
    pub auth: String,
    /// The arguments: the JSON body, or the form / query fields as an object.
    pub body: Value,
    /// When the fake received it.
    pub at: std::time::Instant,
}

/// A message as the fake keeps it.
#[derive(Clone, Debug)]
pub struct Message {
    /// The conversation.
    pub channel: String,
    /// Its `ts`.
    pub ts: String,
    /// The thread's root `ts`, when it is in a thread.
    pub thread_ts: Option<String>,
    /// Who wrote it (the bot's messages: [`BOT_USER`]).
    pub user: String,
    /// Whether the bot posted it.
    pub bot: bool,
    /// Its text.
    pub text: String,
    /// Its blocks as Slack shows them (every block has a `block_id`), `[]` without.
    pub blocks: Value,
    /// Its reactions, `(emoji name, user)` in the order they were added.
    pub reactions: Vec<(String, String)>,
    /// Whether it is a native stream not stopped yet (`chat.startStream` until
    /// `chat.stopStream`).
    pub streaming: bool,
    /// The author's display name (`user_profile.display_name` in the Web API), when set with
    /// [`FakeSlack::set_user_name`].
    pub user_name: Option<String>,
    /// The message metadata it was posted with (`{"event_type", "event_payload"}`), returned by
    /// `conversations.replies` with `include_all_metadata=true`.
    pub metadata: Option<Value>,
    /// The text it was posted with (`chat.postMessage`'s `text`, `chat.startStream`'s first
    /// `markdown_text`): what a notification of it shows.
    pub first_text: String,
    /// Whether a `chat.update` changed it (Slack's client marks it "(edited)"; an edit does not
    /// notify).
    pub edited: bool,
    /// The files it shares, as Slack's file objects (`id`, `name`, `title`, `mimetype`,
    /// `filetype`, `size`, `url_private`, `url_private_download`, …): a file's share message
    /// (`files.completeUploadExternal`) has one. `[]` for other messages.
    pub files: Vec<Value>,
    /// The people its posting notified by mentioning them ([`mentioned_users`] of the text and
    /// blocks it was posted with), in order; a later `chat.update` notifies nobody.
    pub mentioned: Vec<String>,
}

/// The users a message mentions the way Slack notifies them: `<@U…>` / `<@U…|name>` in its
/// `text`, in the `mrkdwn` texts of its blocks (a section's text and fields, a context's
/// elements) and rich text `user` elements, each once, in order. A `plain_text` object mentions
/// nobody (Slack shows `<@U1>` there as it is written), nor does an escaped `&lt;@U1&gt;`.
pub fn mentioned_users(text: &str, blocks: &Value) -> Vec<String> {
    fn scan(text: &str, out: &mut Vec<String>) {
        for m in crate::convert::mentions_in(text, "") {
            if !out.contains(&m.user.id) {
                out.push(m.user.id);
            }
        }
    }
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                match o.get("type").and_then(Value::as_str) {
                    Some("mrkdwn") => {
                        if let Some(t) = o.get("text").and_then(Value::as_str) {
                            scan(t, out);
                        }
                        return;
                    }
                    Some("plain_text") => return,
                    Some("user") => {
                        if let Some(id) = o.get("user_id").and_then(Value::as_str)
                            && !out.iter().any(|u| u == id)
                        {
                            out.push(id.to_owned());
                        }
                        return;
                    }
                    _ => {}
                }
                for (k, child) in o {
                    // Controls' texts and values are no message text.
                    if k != "accessory" && k != "value" {
                        walk(child, out);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|c| walk(c, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    scan(text, &mut out);
    if let Value::Array(list) = blocks {
        for b in list {
            // An actions block holds controls only.
            if b["type"] != "actions" {
                walk(b, &mut out);
            }
        }
    }
    out
}

impl Message {
    /// `channel:ts`.
    pub fn id(&self) -> String {
        message_id(&self.channel, &self.ts)
    }

    /// The names of the emojis the bot reacted with, in the order it added them.
    pub fn bot_reactions(&self) -> Vec<String> {
        self.reactions
            .iter()
            .filter(|(_, user)| user == BOT_USER)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The message as `conversations.replies` with `include_all_metadata=true` returns it.
    fn json_with_metadata(&self) -> Value {
        let mut m = self.json();
        if let Some(meta) = &self.metadata {
            m["metadata"] = meta.clone();
        }
        m
    }

    /// The message as the Web API returns it.
    pub(super) fn json(&self) -> Value {
        let mut m = json!({"type": "message", "text": self.text, "user": self.user, "ts": self.ts,
                           "team": TEAM});
        if self.bot {
            m["bot_id"] = json!(BOT_ID);
            m["app_id"] = json!(APP);
            m["bot_profile"] = json!({"id": BOT_ID, "app_id": APP, "name": "frogbot",
                                      "user_id": BOT_USER, "team_id": TEAM, "deleted": false});
        } else if let Some(name) = &self.user_name {
            m["user_profile"] = json!({"display_name": name, "real_name": name,
                                       "name": name.to_lowercase(), "team": TEAM});
        }
        if let Some(t) = &self.thread_ts {
            m["thread_ts"] = json!(t);
        }
        if self.blocks.as_array().is_some_and(|b| !b.is_empty()) {
            m["blocks"] = self.blocks.clone();
        }
        if !self.files.is_empty() {
            m["files"] = json!(self.files);
            m["upload"] = json!(false);
            m["display_as_bot"] = json!(false);
        }
        // `[{"name", "users", "count"}]`, one per emoji, as the Web API groups them.
        let mut reactions: Vec<Value> = Vec::new();
        for (name, user) in &self.reactions {
            match reactions.iter_mut().find(|r| r["name"] == name.as_str()) {
                Some(r) => {
                    r["users"].as_array_mut().expect("users").push(json!(user));
                    r["count"] = json!(r["users"].as_array().map_or(0, Vec::len));
                }
                None => reactions.push(json!({"name": name, "users": [user], "count": 1})),
            }
        }
        if !reactions.is_empty() {
            m["reactions"] = json!(reactions);
        }
        m
    }
}

/// An ephemeral message the fake showed someone.
#[derive(Clone, Debug)]
pub struct Ephemeral {
    /// The conversation.
    pub channel: String,
    /// Who saw it.
    pub user: String,
    /// The thread, if any.
    pub thread_ts: Option<String>,
    /// The text.
    pub text: String,
    /// Its `ts` (`message_ts` in the answer): where it stands among the thread's messages.
    pub ts: String,
}

#[derive(Default)]
pub(super) struct Store {
    calls: Vec<Call>,
    pub(super) messages: Vec<Message>,
    pub(super) ephemerals: Vec<Ephemeral>,
    violations: Vec<String>,
    fail: Option<String>,
    fail_method: HashMap<String, String>,
    pub(super) names: HashMap<String, String>,
    refuse_streaming: Option<String>,
    statuses: Vec<(String, String, String)>,
    faults: Option<Arc<FaultPlan>>,
    fault_hold: Option<Duration>,
    holds: HashMap<String, Arc<tokio::sync::Semaphore>>,
    /// The modals `views.open` opened, as Slack answered them (with `id`, `hash`, `state`).
    views: Vec<Value>,
    /// The direct message conversations `conversations.open` opened: user → `D…`.
    dms: HashMap<String, String>,
    /// The pinned messages (`pins.add`): `(channel, ts)` in the order they were pinned.
    pins: Vec<(String, String)>,
    /// The messages `chat.delete` removed, as they were.
    deleted: Vec<Message>,
    /// People's files (`/files-pri/{team}-{id}/download/{name}`): path → (media type, bytes).
    pub(super) files: HashMap<String, (String, Vec<u8>)>,
    /// The bot's uploads (`files.getUploadURLExternal` on), by file id.
    uploads: HashMap<String, Upload>,
    /// The bot's uploads in the order they were reserved.
    upload_order: Vec<String>,
    /// Faults for the next calls of a method ([`FakeSlack::fail_next`]): method → (fault,
    /// how many calls more).
    next_faults: HashMap<String, (Fault, usize)>,
    /// Where upload URLs point instead of the fake's own address ([`FakeSlack::set_upload_base`]).
    upload_base: Option<String>,
}

/// A file the bot uploads through Slack's external upload, as the fake keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct Upload {
    /// Its id (`F…`).
    pub id: String,
    /// `files.getUploadURLExternal`'s `filename`.
    pub filename: String,
    /// `files.getUploadURLExternal`'s `length`.
    pub length: u64,
    /// `files.getUploadURLExternal`'s `alt_txt`.
    pub alt_txt: Option<String>,
    /// The bytes `POST`ed to the upload URL (`None`: never uploaded).
    pub bytes: Option<Vec<u8>>,
    /// The media type they came with (the raw body's or the multipart part's `Content-Type`).
    pub media_type: Option<String>,
    /// The `Authorization` header of the upload (empty without one).
    pub upload_auth: String,
    /// `files.completeUploadExternal`'s `title`, once completed.
    pub title: Option<String>,
    /// Where it was shared: `(channel, thread_ts)` (`None` before completion, or completed
    /// without a channel: private).
    pub shared_in: Option<(String, Option<String>)>,
    /// Whether `files.completeUploadExternal` took it (Slack takes it once).
    pub completed: bool,
    /// Whether `files.delete` deleted it.
    pub deleted: bool,
}

/// The Web API methods that change something: the ones faults are injected into (and the upload
/// of a file's bytes to its `upload_url`, [`UPLOAD_STEP`](crate::client::UPLOAD_STEP)).
pub const WRITE_METHODS: &[&str] = &[
    "chat.postMessage",
    "chat.update",
    "chat.delete",
    "pins.add",
    "pins.remove",
    "chat.postEphemeral",
    "views.open",
    "reactions.add",
    "reactions.remove",
    "chat.startStream",
    "chat.appendStream",
    "chat.stopStream",
    "assistant.threads.setStatus",
    "files.completeUploadExternal",
    "files.delete",
    crate::client::UPLOAD_STEP,
];

/// How long a [`Fault::Timeout`] holds its request by default before answering `500` (having
/// done nothing): longer than a test's client timeout.
pub const DEFAULT_FAULT_HOLD: Duration = Duration::from_secs(2);

pub(super) struct Shared {
    store: Mutex<Store>,
    pub(super) seq: AtomicU64,
    pub(super) base_secs: i64,
    ws_url: String,
    pub(super) connections: tokio::sync::Mutex<mpsc::UnboundedReceiver<SocketConnection>>,
    pub(super) secret: String,
    /// `http://127.0.0.1:N`: where the fake serves (its upload URLs and file links).
    base_url: String,
}

/// The fake Slack. Cheap to clone (all clones are the same fake); the servers stop when the
/// runtime does.
#[derive(Clone)]
pub struct FakeSlack {
    pub(super) shared: Arc<Shared>,
    addr: SocketAddr,
    pub(super) http: reqwest::Client,
}

impl std::fmt::Debug for FakeSlack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeSlack")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// `GET /files-pri/{team}-{id}/download/{name}`: a file's bytes, to the bot token only; without
/// it Slack answers `200` with its sign-in page (HTML), as it does.
async fn file_download(
    State(shared): State<Arc<Shared>>,
    axum::extract::Path((file, name)): axum::extract::Path<(String, String)>,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let authorized = headers.get("authorization").and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {BOT_TOKEN}"));
    if !authorized {
        return (
            axum::http::StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8")],
            "<!DOCTYPE html><html><body>Sign in to Slack</body></html>",
        )
            .into_response();
    }
    match lock(&shared).files.get(&format!("{file}/{name}")) {
        Some((media, bytes)) => (
            axum::http::StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, media.clone())],
            bytes.clone(),
        )
            .into_response(),
        None => (axum::http::StatusCode::NOT_FOUND, "file_not_found").into_response(),
    }
}

/// Downloads from this fake's address.
fn local_files() -> frogbot_channel::files::FetchPolicy {
    frogbot_channel::files::FetchPolicy {
        allow_private: true,
        ..frogbot_channel::files::FetchPolicy::for_files()
    }
}

pub(super) fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Store> {
    shared.store.lock().unwrap_or_else(|p| p.into_inner())
}

impl FakeSlack {
    /// Starts the fake (Web API and Socket Mode servers on 127.0.0.1).
    pub async fn start() -> FakeSlack {
        // reqwest is built without a default crypto provider; plain HTTP needs none, but its
        // builder wants one installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ws = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake Socket Mode server");
        let ws_addr = ws.local_addr().expect("local address");
        let (conn_tx, conn_rx) = mpsc::unbounded_channel();
        tokio::spawn(ws_server(ws, conn_tx));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake Web API");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::default()),
            seq: AtomicU64::new(0),
            base_secs: now_millis() / 1000,
            ws_url: format!("ws://{ws_addr}/link/?ticket=fake-ticket&app_id={APP}"),
            connections: tokio::sync::Mutex::new(conn_rx),
            secret: SIGNING_SECRET.to_owned(),
            base_url: format!("http://{addr}"),
        });
        let app = Router::new()
            .route("/api/{method}", post(api).get(api))
            .route(
                "/files-pri/{file}/download/{name}",
                axum::routing::get(file_download),
            )
            // Files up to Slack's 1 GB: no body limit on the upload URL.
            .route(
                "/upload/v1/{file}",
                post(upload_bytes).layer(axum::extract::DefaultBodyLimit::disable()),
            )
            .with_state(shared.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeSlack {
            shared,
            addr,
            http: reqwest::Client::new(),
        }
    }

    /// The Web API base (`http://127.0.0.1:N/api`).
    pub fn api_url(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    /// A [`Config`](crate::channel::Config) for HTTP mode against this fake (files downloaded
    /// from it, on 127.0.0.1).
    pub fn http_config(&self) -> crate::channel::Config {
        crate::channel::Config::http(BOT_TOKEN, self.shared.secret.clone())
            .with_api_url(self.api_url())
            .with_file_policy(local_files())
    }

    /// A [`Config`](crate::channel::Config) for Socket Mode against this fake.
    pub fn socket_config(&self) -> crate::channel::Config {
        crate::channel::Config::socket(BOT_TOKEN, APP_TOKEN)
            .with_api_url(self.api_url())
            .with_file_policy(local_files())
    }

    /// The crate's real client, pointed at this fake, with `token`.
    pub fn client(&self, token: &str) -> SlackWebApi<Connector> {
        SlackWebApi::new(
            connector(Some(&self.api_url())).expect("a connector"),
            token,
        )
        .with_api_url(Some(&self.api_url()))
        .with_files(Arc::new(frogbot_channel::files::Downloads::new(
            local_files(),
        )))
    }

    /// [`SlackQuestions`] over [`FakeSlack::client`] with [`BOT_TOKEN`].
    pub fn questions(&self) -> SlackQuestions<SlackWebApi<Connector>> {
        SlackQuestions::new(self.client(BOT_TOKEN))
    }

    /// A fresh `ts`: the fake's clock (its start time) plus one millisecond per `ts` handed out,
    /// so every `ts` is later than the ones before, also at millisecond precision.
    pub fn next_ts(&self) -> String {
        next_ts(&self.shared)
    }

    /// Every Web API call so far.
    pub fn all_calls(&self) -> Vec<Call> {
        lock(&self.shared).calls.clone()
    }

    /// The calls of `method` so far.
    pub fn calls(&self, method: &str) -> Vec<Call> {
        lock(&self.shared)
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// How many Web API calls so far.
    pub fn count(&self) -> usize {
        lock(&self.shared).calls.len()
    }

    /// The limits calls broke so far (each also answered `invalid_blocks` or `msg_too_long`).
    pub fn violations(&self) -> Vec<String> {
        lock(&self.shared).violations.clone()
    }

    /// From now on, every Web API call but `auth.test` fails with `error` (`None`: they succeed).
    pub fn fail_with(&self, error: Option<&str>) {
        lock(&self.shared).fail = error.map(str::to_owned);
    }

    /// From now on, every call of `method` fails with `error` (`None`: it succeeds again).
    pub fn fail_method(&self, method: &str, error: Option<&str>) {
        let mut store = lock(&self.shared);
        match error {
            Some(e) => store.fail_method.insert(method.to_owned(), e.to_owned()),
            None => store.fail_method.remove(method),
        };
    }

    /// From now on `chat.startStream` fails with `error` (e.g. `not_allowed_token_type`, as for
    /// a workspace that does not let the app stream; `None`: streams are allowed).
    pub fn refuse_streaming(&self, error: Option<&str>) {
        lock(&self.shared).refuse_streaming = error.map(str::to_owned);
    }

    /// From now on the write methods ([`WRITE_METHODS`]) fail as `plan` draws, as Slack fails
    /// them: [`Fault::ServerError`] → `500`, nothing done; [`Fault::RateLimited`] → `429` with
    /// `Retry-After` (whole seconds, rounded up, as Slack sends it) and
    /// `{"ok": false, "error": "ratelimited"}`, nothing done; [`Fault::Timeout`] → no answer for
    /// [`DEFAULT_FAULT_HOLD`] ([`FakeSlack::set_fault_hold`]), then `500`, nothing done;
    /// [`Fault::ResetAfterProcessing`] → the call IS carried out, then the connection is dropped
    /// before the answer's body. Returns the plan (for its counts).
    pub fn set_faults(&self, plan: FaultPlan) -> Arc<FaultPlan> {
        let plan = Arc::new(plan);
        lock(&self.shared).faults = Some(plan.clone());
        plan
    }

    /// The next `times` calls of `method` (a Web API method, or
    /// [`UPLOAD_STEP`](crate::client::UPLOAD_STEP)) fail with `fault`, as
    /// [`FakeSlack::set_faults`] describes each fault.
    pub fn fail_next(&self, method: &str, fault: Fault, times: usize) {
        if times > 0 {
            lock(&self.shared)
                .next_faults
                .insert(method.to_owned(), (fault, times));
        }
    }

    /// Upload URLs point at `base` (e.g. `http://localhost:N`, another origin than the API's)
    /// instead of the fake's own `http://127.0.0.1:N` (`None`); the fake serves them either way
    /// when `base` reaches it.
    pub fn set_upload_base(&self, base: Option<&str>) {
        lock(&self.shared).upload_base = base.map(str::to_owned);
    }

    /// The fake's own address, `http://127.0.0.1:N` (upload URLs and file links are on it).
    pub fn base_url(&self) -> String {
        self.shared.base_url.clone()
    }

    /// No more injected faults.
    pub fn clear_faults(&self) {
        lock(&self.shared).faults = None;
    }

    /// How long a [`Fault::Timeout`] holds its request.
    pub fn set_fault_hold(&self, hold: Duration) {
        lock(&self.shared).fault_hold = Some(hold);
    }

    /// From now on calls of `method` are held (recorded, not answered) until
    /// [`FakeSlack::release`].
    pub fn hold(&self, method: &str) {
        lock(&self.shared)
            .holds
            .insert(method.to_owned(), Arc::new(tokio::sync::Semaphore::new(0)));
    }

    /// Lets the held calls of `method` (and later ones) go on.
    pub fn release(&self, method: &str) {
        if let Some(gate) = lock(&self.shared).holds.remove(method) {
            gate.close();
        }
    }

    /// The metadata keys (`event_payload.key`) of the bot's messages in thread `thread`
    /// (`channel:thread_ts`), in order, each as many times as it was posted.
    pub fn thread_keys(&self, thread: &str) -> Vec<String> {
        self.thread_messages(thread)
            .iter()
            .filter_map(|m| {
                m.metadata
                    .as_ref()?
                    .pointer("/event_payload/key")?
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    }

    /// The `ts` of the pinned messages of `channel`, in the order they were pinned.
    pub fn pins(&self, channel: &str) -> Vec<String> {
        lock(&self.shared)
            .pins
            .iter()
            .filter(|(c, _)| c == channel)
            .map(|(_, ts)| ts.clone())
            .collect()
    }

    /// The messages `chat.delete` removed, as they were, in order.
    pub fn deleted(&self) -> Vec<Message> {
        lock(&self.shared).deleted.clone()
    }

    /// `user`'s display name, shown in the `user_profile` of their messages from now on.
    pub fn set_user_name(&self, user: &str, name: &str) {
        lock(&self.shared)
            .names
            .insert(user.to_owned(), name.to_owned());
    }

    /// The direct message conversation (`D…`) `conversations.open` opened with `user`, if any.
    pub fn dm_channel(&self, user: &str) -> Option<String> {
        lock(&self.shared).dms.get(user).cloned()
    }

    /// The top-level messages of `channel` (thread roots and messages outside threads), in order.
    pub fn channel_messages(&self, channel: &str) -> Vec<Message> {
        lock(&self.shared)
            .messages
            .iter()
            .filter(|m| m.channel == channel && m.thread_ts.as_ref().is_none_or(|t| *t == m.ts))
            .cloned()
            .collect()
    }

    /// The assistant thread statuses set so far: `(channel, thread_ts, status)`.
    pub fn statuses(&self) -> Vec<(String, String, String)> {
        lock(&self.shared).statuses.clone()
    }

    /// The message `channel:ts`, as it is now.
    pub fn message(&self, id: &str) -> Option<Message> {
        let (channel, ts) = split_id(id).ok()?;
        lock(&self.shared)
            .messages
            .iter()
            .find(|m| m.channel == channel && m.ts == ts)
            .cloned()
    }

    /// The messages of the thread `channel:thread_ts` (its root first), in order.
    pub fn thread_messages(&self, thread: &str) -> Vec<Message> {
        let Ok((channel, root)) = split_id(thread) else {
            return Vec::new();
        };
        lock(&self.shared)
            .messages
            .iter()
            .filter(|m| {
                m.channel == channel && (m.ts == root || m.thread_ts.as_deref() == Some(root))
            })
            .cloned()
            .collect()
    }

    /// The ephemeral messages shown so far.
    pub fn ephemerals(&self) -> Vec<Ephemeral> {
        lock(&self.shared).ephemerals.clone()
    }

    /// The modals `views.open` opened, oldest first, as Slack answered them (each with its `id`).
    pub fn views(&self) -> Vec<Value> {
        lock(&self.shared).views.clone()
    }

    /// How many answer controls (buttons, select and checkbox options) message `id` shows.
    pub fn controls(&self, id: &str) -> usize {
        let Some(m) = self.message(id) else {
            return 0;
        };
        let count = |e: &Value| match e["type"].as_str() {
            Some("button") => 1,
            Some(_) => e["options"].as_array().map_or(0, Vec::len),
            None => 0,
        };
        m.blocks
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| {
                b["elements"]
                    .as_array()
                    .filter(|_| b["type"] == "actions")
                    .into_iter()
                    .flatten()
                    .map(count)
                    .sum::<usize>()
                    + b.get("accessory").map_or(0, count)
            })
            .sum()
    }

    /// Every text shown to `user`: ephemeral messages to them, and messages mentioning them.
    pub fn notices(&self, user: &str) -> Vec<String> {
        let mention = format!("<@{user}>");
        let store = lock(&self.shared);
        let mut out: Vec<String> = store
            .ephemerals
            .iter()
            .filter(|e| e.user == user)
            .map(|e| e.text.clone())
            .collect();
        out.extend(
            store
                .messages
                .iter()
                .filter(|m| m.bot && m.text.contains(&mention))
                .map(|m| m.text.clone()),
        );
        out
    }
}

fn next_ts(shared: &Shared) -> String {
    let n = shared.seq.fetch_add(1, Ordering::Relaxed) + 1;
    let micros = n * 1000;
    format!(
        "{}.{:06}",
        shared.base_secs + (micros / 1_000_000) as i64,
        micros % 1_000_000
    )
}

fn args(query: HashMap<String, String>, body: &str) -> Value {
    let mut v: Value = serde_json::from_str(body).unwrap_or_else(|_| {
        Value::Object(
            form_urlencoded::parse(body.as_bytes())
                .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
                .collect(),
        )
    });
    if let Value::Object(o) = &mut v {
        for (k, val) in query {
            o.entry(k).or_insert(Value::String(val));
        }
    }
    // Form-encoded blocks / views arrive as JSON strings.
    for key in ["blocks", "view", "metadata"] {
        if let Some(s) = v.get(key).and_then(Value::as_str)
            && let Ok(parsed) = serde_json::from_str::<Value>(s)
        {
            v[key] = parsed;
        }
    }
    v
}

fn error(e: &str) -> Value {
    json!({"ok": false, "error": e})
}

/// A `200` whose body breaks off: the connection drops after the call was carried out.
fn reset_response() -> Response {
    let broken = futures::stream::once(async {
        Err::<axum::body::Bytes, std::io::Error>(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "fake: connection reset after processing",
        ))
    });
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        axum::body::Body::from_stream(broken),
    )
        .into_response()
}

async fn api(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> Response {
    let (fault, hold, gate) = draw_fault(&shared, &method);
    if let Some(gate) = gate {
        let _ = gate.acquire().await;
    }
    if let Some(refused) = fault_answer(fault, hold).await {
        return refused;
    }
    let answer = api_answer(&shared, method, uri, headers, body);
    if fault == Some(Fault::ResetAfterProcessing) {
        return reset_response();
    }
    answer.into_response()
}

/// The fault's answer when it keeps the call from being carried out (`None`: carry it out).
async fn fault_answer(fault: Option<Fault>, hold: Duration) -> Option<Response> {
    Some(match fault {
        Some(Fault::ServerError) => {
            (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "fake: 500").into_response()
        }
        Some(Fault::RateLimited(wait)) => {
            let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            (
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                [(axum::http::header::RETRY_AFTER, secs.to_string())],
                axum::Json(error("ratelimited")),
            )
                .into_response()
        }
        Some(Fault::Timeout) => {
            tokio::time::sleep(hold).await;
            (
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "fake: too late",
            )
                .into_response()
        }
        Some(Fault::ResetAfterProcessing) | None => return None,
    })
}

/// The fault (if any) the plan draws for a call of `method`, how long a timeout holds, and the
/// gate a [`FakeSlack::hold`] put on it.
fn draw_fault(
    shared: &Shared,
    method: &str,
) -> (Option<Fault>, Duration, Option<Arc<tokio::sync::Semaphore>>) {
    let mut store = lock(shared);
    let planned = match store.next_faults.get_mut(method) {
        Some((fault, left)) => {
            let fault = *fault;
            *left -= 1;
            if *left == 0 {
                store.next_faults.remove(method);
            }
            Some(fault)
        }
        None => None,
    };
    let fault = if planned.is_some() {
        planned
    } else if WRITE_METHODS.contains(&method) {
        store.faults.as_ref().and_then(|p| p.next())
    } else {
        None
    };
    (
        fault,
        store.fault_hold.unwrap_or(DEFAULT_FAULT_HOLD),
        store.holds.get(method).cloned(),
    )
}

/// `POST /upload/v1/{file}`: the upload URL `files.getUploadURLExternal` hands out. Takes the
/// file's bytes as the raw body or multipart form data (its first part with a file name, else
/// its first part), as Slack documents; answers `200` `OK - {length}` (text) as Slack's upload
/// service does, `404` for a file id never reserved or completed already, `400` when the
/// bytes are not the `length` reserved. Faults apply as to a write method
/// ([`UPLOAD_STEP`](crate::client::UPLOAD_STEP)); a [`FakeSlack::hold`] of that name holds it.
async fn upload_bytes(
    State(shared): State<Arc<Shared>>,
    Path(file): Path<String>,
    request: axum::extract::Request,
) -> Response {
    use axum::extract::FromRequest;
    use axum::http::StatusCode;
    let step = crate::client::UPLOAD_STEP;
    let (fault, hold, gate) = draw_fault(&shared, step);
    if let Some(gate) = gate {
        let _ = gate.acquire().await;
    }
    if let Some(refused) = fault_answer(fault, hold).await {
        return refused;
    }
    let auth = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let content_type = request
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let content_length = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let (bytes, media_type) = if content_type.starts_with("multipart/form-data") {
        let Ok(mut form) = axum::extract::Multipart::from_request(request, &()).await else {
            return (StatusCode::BAD_REQUEST, "fake: not multipart").into_response();
        };
        let mut found: Option<(Vec<u8>, Option<String>)> = None;
        while let Ok(Some(field)) = form.next_field().await {
            let named = field.file_name().is_some();
            let media = field.content_type().map(str::to_owned);
            let Ok(data) = field.bytes().await else {
                return (StatusCode::BAD_REQUEST, "fake: broken part").into_response();
            };
            if named || found.is_none() {
                found = Some((data.to_vec(), media));
            }
            if named {
                break;
            }
        }
        match found {
            Some(f) => f,
            None => return (StatusCode::BAD_REQUEST, "fake: no file part").into_response(),
        }
    } else {
        match axum::body::to_bytes(request.into_body(), usize::MAX).await {
            Ok(b) => (b.to_vec(), Some(content_type).filter(|c| !c.is_empty())),
            Err(_) => return (StatusCode::BAD_REQUEST, "fake: broken body").into_response(),
        }
    };
    let answer = {
        let mut store = lock(&shared);
        store.calls.push(Call {
            method: step.to_owned(),
            auth: auth.clone(),
            body: json!({
                "file": file,
                "length": bytes.len(),
                "content_type": media_type,
                "content_length": content_length,
            }),
            at: std::time::Instant::now(),
        });
        match store.uploads.get_mut(&file) {
            Some(u) if !u.completed && !u.deleted => {
                if bytes.len() as u64 != u.length {
                    (
                        StatusCode::BAD_REQUEST,
                        format!("fake: {} bytes, {} reserved", bytes.len(), u.length),
                    )
                        .into_response()
                } else {
                    let n = bytes.len();
                    u.bytes = Some(bytes);
                    u.media_type = media_type;
                    u.upload_auth = auth;
                    (
                        StatusCode::OK,
                        [(axum::http::header::CONTENT_TYPE, "text/plain")],
                        format!("OK - {n}"),
                    )
                        .into_response()
                }
            }
            _ => (StatusCode::NOT_FOUND, "fake: no such upload").into_response(),
        }
    };
    if fault == Some(Fault::ResetAfterProcessing) {
        return reset_response();
    }
    answer
}

fn api_answer(
    shared: &Arc<Shared>,
    method: String,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> axum::Json<Value> {
    let query = form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let body = args(query, &body);
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let fail = {
        let mut store = lock(shared);
        store.calls.push(Call {
            method: method.clone(),
            auth: auth.clone(),
            body: body.clone(),
            at: std::time::Instant::now(),
        });
        store
            .fail_method
            .get(&method)
            .or(store.fail.as_ref())
            .cloned()
    };
    if auth.is_empty() && method != "api.test" {
        return axum::Json(error("not_authed"));
    }
    // Slack refuses a token it does not know on every method.
    if method != "api.test"
        && ![BOT_TOKEN, APP_TOKEN]
            .iter()
            .any(|t| auth == format!("Bearer {t}"))
    {
        return axum::Json(error("invalid_auth"));
    }
    if let Some(e) = fail
        && method != "auth.test"
    {
        return axum::Json(error(&e));
    }
    axum::Json(match method.as_str() {
        "auth.test" => json!({
            "ok": true, "url": "https://frogs.slack.com/", "team": "Frogs", "user": "frogbot",
            "team_id": TEAM, "user_id": BOT_USER, "bot_id": BOT_ID, "is_enterprise_install": false
        }),
        "apps.connections.open" if auth.contains("xapp-") => {
            json!({"ok": true, "url": shared.ws_url})
        }
        "apps.connections.open" => error("not_allowed_token_type"),
        "chat.postMessage" => post_message(shared, &body),
        "chat.update" => update_message(shared, &body),
        "chat.delete" => delete_message(shared, &body),
        "pins.add" => pin(shared, &body, true),
        "pins.remove" => pin(shared, &body, false),
        "pins.list" => pins_list(shared, &body),
        "chat.postEphemeral" => post_ephemeral(shared, &body),
        "views.open" => open_view(shared, &body),
        "reactions.add" => reaction(shared, &body, true),
        "reactions.remove" => reaction(shared, &body, false),
        "conversations.replies" => replies(shared, &body),
        "conversations.history" => history(shared, &body),
        "conversations.open" => open_conversation(shared, &body),
        "chat.startStream" => start_stream(shared, &body),
        "chat.appendStream" => append_stream(shared, &body),
        "chat.stopStream" => stop_stream(shared, &body),
        "assistant.threads.setStatus" => set_status(shared, &body),
        "files.getUploadURLExternal" => get_upload_url(shared, &body),
        "files.completeUploadExternal" => complete_upload(shared, &body),
        "files.delete" => delete_file(shared, &body),
        _ => error("unknown_method"),
    })
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn refuse(shared: &Shared, method: &str, errors: Vec<String>, code: &str) -> Value {
    let mut store = lock(shared);
    store
        .violations
        .extend(errors.iter().map(|e| format!("{method}: {e}")));
    json!({"ok": false, "error": code, "errors": errors,
           "response_metadata": {"messages": errors.iter().map(|e| format!("[ERROR] {e}")).collect::<Vec<_>>()}})
}

/// Checks a message's `text` and `blocks`; `Err` is the answer Slack gives.
fn check_message(shared: &Shared, method: &str, body: &Value) -> Result<(), Value> {
    let text = str_of(body, "text").unwrap_or_default();
    let blocks = body.get("blocks").cloned().unwrap_or(Value::Null);
    if text.is_empty() && blocks.as_array().is_none_or(Vec::is_empty) {
        return Err(error("no_text"));
    }
    if text.chars().count() > limits::MESSAGE_TEXT {
        return Err(refuse(
            shared,
            method,
            vec![format!(
                "text longer than {} characters",
                limits::MESSAGE_TEXT
            )],
            "msg_too_long",
        ));
    }
    let tables = blocks
        .as_array()
        .map_or(0, |b| b.iter().filter(|b| b["type"] == "table").count());
    if tables > 1 {
        return Err(refuse(
            shared,
            method,
            vec!["only_one_table_allowed".to_owned()],
            "invalid_attachments",
        ));
    }
    let mut errors = Vec::new();
    check_blocks(&blocks, limits::MESSAGE_BLOCKS, &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(refuse(shared, method, errors, "invalid_blocks"))
    }
}

fn too_long(errors: &mut Vec<String>, v: &Value, max: usize, at: &str) {
    if let Some(s) = v.as_str() {
        let n = s.chars().count();
        if n > max {
            errors.push(format!(
                "must be less than {} characters (was {n}) [json-pointer:{at}]",
                max + 1
            ));
        } else if n == 0 {
            errors.push(format!("must be at least 1 character [json-pointer:{at}]"));
        }
    }
}

fn too_many(errors: &mut Vec<String>, v: &Value, max: usize, at: &str) {
    if let Some(a) = v.as_array()
        && a.len() > max
    {
        errors.push(format!(
            "must contain at most {max} items (was {}) [json-pointer:{at}]",
            a.len()
        ));
    }
}

fn check_blocks(blocks: &Value, max: usize, errors: &mut Vec<String>) {
    let Some(list) = blocks.as_array() else {
        return;
    };
    too_many(errors, blocks, max, "/blocks");
    for (i, b) in list.iter().enumerate() {
        let at = format!("/blocks/{i}");
        too_long(
            errors,
            &b["block_id"],
            limits::ID,
            &format!("{at}/block_id"),
        );
        match b["type"].as_str() {
            Some("section") => {
                too_long(
                    errors,
                    &b["text"]["text"],
                    limits::SECTION_TEXT,
                    &format!("{at}/text/text"),
                );
                too_many(
                    errors,
                    &b["fields"],
                    limits::SECTION_FIELDS,
                    &format!("{at}/fields"),
                );
                for (j, f) in b["fields"].as_array().into_iter().flatten().enumerate() {
                    too_long(
                        errors,
                        &f["text"],
                        limits::FIELD_TEXT,
                        &format!("{at}/fields/{j}/text"),
                    );
                }
                if let Some(a) = b.get("accessory") {
                    check_element(a, &format!("{at}/accessory"), errors);
                }
            }
            Some("actions") => {
                too_many(
                    errors,
                    &b["elements"],
                    limits::ACTIONS_ELEMENTS,
                    &format!("{at}/elements"),
                );
                for (j, e) in b["elements"].as_array().into_iter().flatten().enumerate() {
                    check_element(e, &format!("{at}/elements/{j}"), errors);
                }
            }
            Some("context") => too_many(
                errors,
                &b["elements"],
                limits::CONTEXT_ELEMENTS,
                &format!("{at}/elements"),
            ),
            Some("input") => {
                too_long(
                    errors,
                    &b["label"]["text"],
                    limits::LABEL,
                    &format!("{at}/label/text"),
                );
                too_long(
                    errors,
                    &b["hint"]["text"],
                    limits::HINT,
                    &format!("{at}/hint/text"),
                );
                check_element(&b["element"], &format!("{at}/element"), errors);
            }
            Some("header") => too_long(errors, &b["text"]["text"], 150, &format!("{at}/text/text")),
            Some("table") => check_table(b, &at, errors),
            Some("image") => {
                for (key, max) in [
                    ("image_url", limits::IMAGE_URL),
                    ("alt_text", limits::ALT_TEXT),
                ] {
                    if !b[key].is_string() {
                        errors.push(format!("is required [json-pointer:{at}/{key}]"));
                    }
                    too_long(errors, &b[key], max, &format!("{at}/{key}"));
                }
            }
            Some("markdown") => too_long(
                errors,
                &b["text"],
                limits::MARKDOWN_TEXT,
                &format!("{at}/text"),
            ),
            Some("divider" | "rich_text" | "file" | "video") => {}
            other => errors.push(format!("unknown block type {other:?} [json-pointer:{at}]")),
        }
    }
}

/// A `table` block: at most 100 rows of at most 20 cells (`raw_text` with a non-empty `text`, or
/// `rich_text`), at most 20 `column_settings`.
fn check_table(b: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(rows) = b["rows"].as_array().filter(|r| !r.is_empty()) else {
        errors.push(format!("is required [json-pointer:{at}/rows]"));
        return;
    };
    too_many(
        errors,
        &b["rows"],
        limits::TABLE_ROWS,
        &format!("{at}/rows"),
    );
    too_many(
        errors,
        &b["column_settings"],
        limits::TABLE_CELLS,
        &format!("{at}/column_settings"),
    );
    for (i, row) in rows.iter().enumerate() {
        too_many(errors, row, limits::TABLE_CELLS, &format!("{at}/rows/{i}"));
        for (j, c) in row.as_array().into_iter().flatten().enumerate() {
            let here = format!("{at}/rows/{i}/{j}");
            match c["type"].as_str() {
                Some("raw_text") => {
                    if !c["text"].is_string() {
                        errors.push(format!("is required [json-pointer:{here}/text]"));
                    }
                    too_long(
                        errors,
                        &c["text"],
                        limits::CELL_TEXT,
                        &format!("{here}/text"),
                    );
                }
                Some("rich_text") => {}
                other => errors.push(format!("unknown cell type {other:?} [json-pointer:{here}]")),
            }
        }
    }
}

fn check_option(o: &Value, at: &str, errors: &mut Vec<String>) {
    too_long(
        errors,
        &o["text"]["text"],
        limits::OPTION_TEXT,
        &format!("{at}/text/text"),
    );
    too_long(
        errors,
        &o["value"],
        limits::OPTION_VALUE,
        &format!("{at}/value"),
    );
    too_long(
        errors,
        &o["description"]["text"],
        limits::OPTION_DESCRIPTION,
        &format!("{at}/description/text"),
    );
}

fn check_element(e: &Value, at: &str, errors: &mut Vec<String>) {
    too_long(
        errors,
        &e["action_id"],
        limits::ID,
        &format!("{at}/action_id"),
    );
    too_long(
        errors,
        &e["placeholder"]["text"],
        limits::PLACEHOLDER,
        &format!("{at}/placeholder/text"),
    );
    let options_max = match e["type"].as_str() {
        Some("button") => {
            too_long(
                errors,
                &e["text"]["text"],
                limits::BUTTON_TEXT,
                &format!("{at}/text/text"),
            );
            too_long(
                errors,
                &e["value"],
                limits::BUTTON_VALUE,
                &format!("{at}/value"),
            );
            check_style(&e["style"], &format!("{at}/style"), errors);
            if let Some(c) = e.get("confirm") {
                check_confirm(c, &format!("{at}/confirm"), errors);
            }
            return;
        }
        Some("plain_text_input") => {
            for key in ["max_length", "min_length"] {
                match &e[key] {
                    Value::Null => {}
                    v => match v.as_u64() {
                        Some(n)
                            if (1..=limits::TEXT_INPUT).contains(&n)
                                || (key == "min_length" && n == 0) => {}
                        _ => errors.push(format!(
                            "must be a number from {} to {} [json-pointer:{at}/{key}]",
                            u64::from(key == "max_length"),
                            limits::TEXT_INPUT
                        )),
                    },
                }
            }
            if let (Some(init), Some(max)) = (e["initial_value"].as_str(), e["max_length"].as_u64())
                && init.chars().count() as u64 > max
            {
                errors.push(format!(
                    "must be at most max_length characters [json-pointer:{at}/initial_value]"
                ));
            }
            return;
        }
        Some("number_input") => {
            if !e["is_decimal_allowed"].is_boolean() {
                errors.push(format!(
                    "is required and must be a boolean [json-pointer:{at}/is_decimal_allowed]"
                ));
            }
            let number = |k: &str, errors: &mut Vec<String>| match &e[k] {
                Value::Null => None,
                Value::String(s) => match s.parse::<f64>() {
                    Ok(v) => Some(v),
                    Err(_) => {
                        errors.push(format!("must be a number [json-pointer:{at}/{k}]"));
                        None
                    }
                },
                _ => {
                    errors.push(format!("must be a string [json-pointer:{at}/{k}]"));
                    None
                }
            };
            let min = number("min_value", errors);
            let max = number("max_value", errors);
            let init = number("initial_value", errors);
            if let (Some(a), Some(b)) = (min, max)
                && a > b
            {
                errors.push(format!(
                    "min_value cannot be greater than max_value [json-pointer:{at}/min_value]"
                ));
            }
            if let Some(v) = init
                && (min.is_some_and(|m| v < m) || max.is_some_and(|m| v > m))
            {
                errors.push(format!(
                    "must be within min_value and max_value [json-pointer:{at}/initial_value]"
                ));
            }
            return;
        }
        Some("checkboxes" | "radio_buttons") => limits::CHECKBOX_OPTIONS,
        Some("static_select" | "multi_static_select" | "overflow") => limits::SELECT_OPTIONS,
        Some(_) => return,
        None => {
            errors.push(format!("an element without a type [json-pointer:{at}]"));
            return;
        }
    };
    too_many(errors, &e["options"], options_max, &format!("{at}/options"));
    for key in ["options", "initial_options"] {
        for (k, o) in e[key].as_array().into_iter().flatten().enumerate() {
            check_option(o, &format!("{at}/{key}/{k}"), errors);
        }
    }
}

fn check_style(style: &Value, at: &str, errors: &mut Vec<String>) {
    match style {
        Value::Null => {}
        Value::String(s) if s == "primary" || s == "danger" => {}
        other => errors.push(format!(
            "must be \"primary\" or \"danger\" (was {other}) [json-pointer:{at}]"
        )),
    }
}

/// A confirmation dialog object: `title`, `text`, `confirm`, `deny` (all required), `style`.
fn check_confirm(c: &Value, at: &str, errors: &mut Vec<String>) {
    for (key, max) in [
        ("title", limits::CONFIRM_TITLE),
        ("text", limits::CONFIRM_TEXT),
        ("confirm", limits::CONFIRM_BUTTON),
        ("deny", limits::CONFIRM_BUTTON),
    ] {
        let text = &c[key]["text"];
        if !text.is_string() {
            errors.push(format!("is required [json-pointer:{at}/{key}]"));
        }
        if key != "text" && c[key]["type"] != "plain_text" {
            errors.push(format!("must be plain_text [json-pointer:{at}/{key}/type]"));
        }
        too_long(errors, text, max, &format!("{at}/{key}/text"));
    }
    check_style(&c["style"], &format!("{at}/style"), errors);
}

/// Gives every block without a `block_id` one, as Slack does.
fn with_block_ids(blocks: Value, ts: &str) -> Value {
    let Value::Array(list) = blocks else {
        return json!([]);
    };
    Value::Array(
        list.into_iter()
            .enumerate()
            .map(|(i, mut b)| {
                if b.get("block_id").is_none_or(Value::is_null) {
                    b["block_id"] = json!(format!("b{i}-{}", ts.replace('.', "")));
                }
                b
            })
            .collect(),
    )
}

fn post_message(shared: &Shared, body: &Value) -> Value {
    let Some(channel) = str_of(body, "channel") else {
        return error("channel_not_found");
    };
    if let Err(e) = check_message(shared, "chat.postMessage", body) {
        return e;
    }
    let ts = next_ts(shared);
    let m = Message {
        channel: channel.to_owned(),
        thread_ts: str_of(body, "thread_ts").map(str::to_owned),
        user: BOT_USER.to_owned(),
        bot: true,
        text: str_of(body, "text").unwrap_or_default().to_owned(),
        blocks: with_block_ids(body.get("blocks").cloned().unwrap_or(Value::Null), &ts),
        ts,
        reactions: Vec::new(),
        streaming: false,
        user_name: None,
        metadata: body
            .get("metadata")
            .filter(|m| m.get("event_type").is_some())
            .cloned(),
        first_text: str_of(body, "text").unwrap_or_default().to_owned(),
        edited: false,
        files: Vec::new(),
        mentioned: Vec::new(),
    };
    let m = Message {
        mentioned: mentioned_users(&m.first_text, &m.blocks),
        ..m
    };
    let out = json!({"ok": true, "channel": m.channel, "ts": m.ts, "message": m.json()});
    lock(shared).messages.push(m);
    out
}

fn update_message(shared: &Shared, body: &Value) -> Value {
    let (Some(channel), Some(ts)) = (str_of(body, "channel"), str_of(body, "ts")) else {
        return error("message_not_found");
    };
    if let Err(e) = check_message(shared, "chat.update", body) {
        return e;
    }
    let mut store = lock(shared);
    let Some(m) = store
        .messages
        .iter_mut()
        .find(|m| m.channel == channel && m.ts == ts)
    else {
        return error("message_not_found");
    };
    if !m.bot {
        return error("cant_update_message");
    }
    if m.streaming {
        return error("message_not_editable");
    }
    m.text = str_of(body, "text").unwrap_or_default().to_owned();
    m.blocks = with_block_ids(body.get("blocks").cloned().unwrap_or(Value::Null), ts);
    m.edited = true;
    json!({"ok": true, "channel": channel, "ts": ts, "text": m.text, "message": m.json()})
}

/// `chat.delete`: the bot's own message goes (`message_not_found` when there is none,
/// `cant_delete_message` for someone else's).
fn delete_message(shared: &Shared, body: &Value) -> Value {
    let (Some(channel), Some(ts)) = (str_of(body, "channel"), str_of(body, "ts")) else {
        return error("message_not_found");
    };
    let mut store = lock(shared);
    let Some(i) = store
        .messages
        .iter()
        .position(|m| m.channel == channel && m.ts == ts)
    else {
        return error("message_not_found");
    };
    if !store.messages[i].bot {
        return error("cant_delete_message");
    }
    let m = store.messages.remove(i);
    store.pins.retain(|(c, t)| !(c == channel && t == ts));
    store.deleted.push(m);
    json!({"ok": true, "channel": channel, "ts": ts})
}

/// `pins.add` / `pins.remove` (`channel`, `timestamp`): `already_pinned`, `no_pin`,
/// `message_not_found` as Slack answers them.
fn pin(shared: &Shared, body: &Value, add: bool) -> Value {
    let (Some(channel), Some(ts)) = (str_of(body, "channel"), str_of(body, "timestamp")) else {
        return error("no_item_specified");
    };
    let mut store = lock(shared);
    if !store
        .messages
        .iter()
        .any(|m| m.channel == channel && m.ts == ts)
    {
        return error("message_not_found");
    }
    let at = store.pins.iter().position(|(c, t)| c == channel && t == ts);
    match (add, at) {
        (true, Some(_)) => error("already_pinned"),
        (true, None) => {
            store.pins.push((channel.to_owned(), ts.to_owned()));
            json!({"ok": true})
        }
        (false, None) => error("no_pin"),
        (false, Some(i)) => {
            store.pins.remove(i);
            json!({"ok": true})
        }
    }
}

/// `pins.list` of a channel: `{"items": [{"type": "message", "channel", "created_by",
/// "message"}]}`.
fn pins_list(shared: &Shared, body: &Value) -> Value {
    let Some(channel) = str_of(body, "channel") else {
        return error("channel_not_found");
    };
    let store = lock(shared);
    let items: Vec<Value> = store
        .pins
        .iter()
        .filter(|(c, _)| c == channel)
        .filter_map(|(c, ts)| {
            let m = store
                .messages
                .iter()
                .find(|m| &m.channel == c && &m.ts == ts)?;
            Some(
                json!({"type": "message", "channel": c, "created": now_millis() / 1000,
                        "created_by": BOT_USER, "message": m.json()}),
            )
        })
        .collect();
    json!({"ok": true, "items": items})
}

fn post_ephemeral(shared: &Shared, body: &Value) -> Value {
    let (Some(channel), Some(user)) = (str_of(body, "channel"), str_of(body, "user")) else {
        return error("user_not_in_channel");
    };
    if let Err(e) = check_message(shared, "chat.postEphemeral", body) {
        return e;
    }
    let ts = next_ts(shared);
    lock(shared).ephemerals.push(Ephemeral {
        channel: channel.to_owned(),
        user: user.to_owned(),
        thread_ts: str_of(body, "thread_ts").map(str::to_owned),
        text: str_of(body, "text").unwrap_or_default().to_owned(),
        ts: ts.clone(),
    });
    json!({"ok": true, "message_ts": ts})
}

fn open_view(shared: &Shared, body: &Value) -> Value {
    if str_of(body, "trigger_id").is_none() {
        return error("invalid_trigger_id");
    }
    let mut view = body["view"].clone();
    let mut errors = Vec::new();
    check_blocks(&view["blocks"], limits::MODAL_BLOCKS, &mut errors);
    for key in ["title", "submit", "close"] {
        too_long(
            &mut errors,
            &view[key]["text"],
            limits::MODAL_TITLE,
            &format!("/view/{key}/text"),
        );
    }
    too_long(
        &mut errors,
        &view["private_metadata"],
        limits::PRIVATE_METADATA,
        "/view/private_metadata",
    );
    too_long(
        &mut errors,
        &view["callback_id"],
        limits::ID,
        "/view/callback_id",
    );
    if !errors.is_empty() {
        return refuse(shared, "views.open", errors, "invalid_arguments");
    }
    let n = shared.seq.fetch_add(1, Ordering::Relaxed);
    view["id"] = json!(format!("V{n:08}"));
    view["team_id"] = json!(TEAM);
    view["app_id"] = json!(APP);
    view["bot_id"] = json!(BOT_ID);
    view["hash"] = json!(format!("{}.fake{n}", shared.base_secs));
    view["state"] = json!({"values": {}});
    view["blocks"] = with_block_ids(view["blocks"].take(), &n.to_string());
    lock(shared).views.push(view.clone());
    json!({"ok": true, "view": view})
}

/// The most reactions one message takes (distinct emojis and users), as Slack limits them.
const MAX_REACTIONS: usize = 50;

/// `reactions.add` (`add`) or `reactions.remove` by the bot on the message `channel` + `timestamp`
/// with the emoji `name` (no colons): `already_reacted`, `no_reaction`, `message_not_found`,
/// `invalid_name` as Slack answers them.
fn reaction(shared: &Shared, body: &Value, add: bool) -> Value {
    let (Some(channel), Some(ts)) = (str_of(body, "channel"), str_of(body, "timestamp")) else {
        return error("no_item_specified");
    };
    let Some(name) = str_of(body, "name") else {
        return error("invalid_name");
    };
    let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "_+-'".contains(c);
    if !name.chars().all(valid) {
        return error("invalid_name");
    }
    let mut store = lock(shared);
    let Some(m) = store
        .messages
        .iter_mut()
        .find(|m| m.channel == channel && m.ts == ts)
    else {
        return error("message_not_found");
    };
    let at = m
        .reactions
        .iter()
        .position(|(n, u)| n == name && u == BOT_USER);
    match (add, at) {
        (true, Some(_)) => error("already_reacted"),
        (true, None) if m.reactions.len() >= MAX_REACTIONS => error("too_many_reactions"),
        (true, None) => {
            m.reactions.push((name.to_owned(), BOT_USER.to_owned()));
            json!({"ok": true})
        }
        (false, None) => error("no_reaction"),
        (false, Some(i)) => {
            m.reactions.remove(i);
            json!({"ok": true})
        }
    }
}

fn replies(shared: &Shared, body: &Value) -> Value {
    let (Some(channel), Some(ts)) = (str_of(body, "channel"), str_of(body, "ts")) else {
        return error("thread_not_found");
    };
    let store = lock(shared);
    let thread: Vec<&Message> = store
        .messages
        .iter()
        .filter(|m| m.channel == channel && (m.ts == ts || m.thread_ts.as_deref() == Some(ts)))
        .collect();
    if thread.is_empty() {
        return error("thread_not_found");
    }
    // `latest` (exclusive unless `inclusive`), oldest first, the first `limit` (default 1000).
    let inclusive = matches!(body.get("inclusive"), Some(Value::Bool(true)))
        || str_of(body, "inclusive").is_some_and(|v| v == "true" || v == "1");
    let latest = str_of(body, "latest").map(ts_key);
    let limit = body
        .get("limit")
        .and_then(|v| {
            v.as_u64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        })
        .unwrap_or(1000)
        .clamp(1, 1000) as usize;
    let within: Vec<&&Message> = thread
        .iter()
        .filter(|m| match latest {
            Some(l) if inclusive => ts_key(&m.ts) <= l,
            Some(l) => ts_key(&m.ts) < l,
            None => true,
        })
        .collect();
    // `cursor`: where the page before ended (the fake's cursors are offsets).
    let offset = str_of(body, "cursor")
        .and_then(|c| c.strip_prefix("off:"))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0);
    let has_more = within.len() > offset + limit;
    let all_metadata = matches!(body.get("include_all_metadata"), Some(Value::Bool(true)))
        || str_of(body, "include_all_metadata").is_some_and(|v| v == "true" || v == "1");
    let messages: Vec<Value> = within
        .iter()
        .skip(offset)
        .take(limit)
        .map(|m| {
            if all_metadata {
                m.json_with_metadata()
            } else {
                m.json()
            }
        })
        .collect();
    let next = if has_more {
        format!("off:{}", offset + limit)
    } else {
        String::new()
    };
    json!({"ok": true, "messages": messages, "has_more": has_more,
           "response_metadata": {"next_cursor": next}})
}

/// `conversations.history`: the channel's top-level messages (a thread's replies are not in it),
/// newest first, within `oldest` / `latest` (exclusive unless `inclusive`), `limit` a page
/// (default 100, at most 999), `cursor` as `response_metadata.next_cursor` gave it; metadata
/// only with `include_all_metadata`.
fn history(shared: &Shared, body: &Value) -> Value {
    let Some(channel) = str_of(body, "channel") else {
        return error("channel_not_found");
    };
    let truthy = |key: &str| {
        matches!(body.get(key), Some(Value::Bool(true)))
            || str_of(body, key).is_some_and(|v| v == "true" || v == "1")
    };
    let inclusive = truthy("inclusive");
    let oldest = str_of(body, "oldest").map(ts_key);
    let latest = str_of(body, "latest").map(ts_key);
    let limit = body
        .get("limit")
        .and_then(|v| {
            v.as_u64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        })
        .unwrap_or(100)
        .clamp(1, 999) as usize;
    let store = lock(shared);
    let mut within: Vec<&Message> = store
        .messages
        .iter()
        .filter(|m| m.channel == channel && m.thread_ts.as_ref().is_none_or(|t| *t == m.ts))
        .filter(|m| {
            let k = ts_key(&m.ts);
            let after = oldest.is_none_or(|o| if inclusive { k >= o } else { k > o });
            let before = latest.is_none_or(|l| if inclusive { k <= l } else { k < l });
            after && before
        })
        .collect();
    within.sort_by_key(|m| std::cmp::Reverse(ts_key(&m.ts)));
    let offset = str_of(body, "cursor")
        .and_then(|c| c.strip_prefix("off:"))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0);
    let has_more = within.len() > offset + limit;
    let all_metadata = truthy("include_all_metadata");
    let messages: Vec<Value> = within
        .iter()
        .skip(offset)
        .take(limit)
        .map(|m| {
            let mut v = if all_metadata {
                m.json_with_metadata()
            } else {
                m.json()
            };
            if let Some(t) = &m.thread_ts {
                // A thread's root, as Slack shows it in the channel.
                let replies = store
                    .messages
                    .iter()
                    .filter(|r| {
                        r.channel == m.channel && r.thread_ts.as_ref() == Some(t) && r.ts != *t
                    })
                    .count();
                v["reply_count"] = json!(replies);
            }
            v
        })
        .collect();
    let next = if has_more {
        format!("off:{}", offset + limit)
    } else {
        String::new()
    };
    json!({"ok": true, "messages": messages, "has_more": has_more, "pin_count": 0,
           "channel_actions_ts": null, "channel_actions_count": 0,
           "response_metadata": {"next_cursor": next}})
}

/// `conversations.open` with `users` (a comma-separated string, as Slack documents it, or a
/// JSON array): one user's direct message conversation, opened once and the same `D…` after
/// (`"no_op": true, "already_open": true`). A user that is not a user id (`U…` / `W…`) is
/// `user_not_found`; several users (a group DM) are not served by the fake.
fn open_conversation(shared: &Shared, body: &Value) -> Value {
    let users: Vec<String> = match body.get("users") {
        Some(Value::String(s)) => s
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_owned)
            .collect(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    let [user] = users.as_slice() else {
        return error(if users.is_empty() {
            "users_list_not_supplied"
        } else {
            "method_not_supported_for_channel_type"
        });
    };
    let valid = user.len() >= 2
        && user.starts_with(['U', 'W'])
        && user
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    if !valid {
        return error("user_not_found");
    }
    let mut store = lock(shared);
    if let Some(id) = store.dms.get(user) {
        return json!({"ok": true, "no_op": true, "already_open": true, "channel": {"id": id}});
    }
    let id = format!("D{}", &user[1..]);
    store.dms.insert(user.clone(), id.clone());
    json!({"ok": true, "channel": {"id": id}})
}

pub(super) fn ts_key(ts: &str) -> (u64, u64) {
    let (s, f) = ts.split_once('.').unwrap_or((ts, "0"));
    (s.parse().unwrap_or(0), f.parse().unwrap_or(0))
}

/// `chat.startStream`: a new bot message in `thread_ts`, streaming, showing `markdown_text`.
fn start_stream(shared: &Shared, body: &Value) -> Value {
    if let Some(e) = lock(shared).refuse_streaming.clone() {
        return error(&e);
    }
    let Some(channel) = str_of(body, "channel") else {
        return error("channel_not_found");
    };
    let Some(thread_ts) = str_of(body, "thread_ts") else {
        return error("invalid_arguments");
    };
    let text = str_of(body, "markdown_text").unwrap_or_default();
    if text.chars().count() > limits::MARKDOWN_TEXT {
        return refuse(
            shared,
            "chat.startStream",
            vec![format!(
                "markdown_text longer than {}",
                limits::MARKDOWN_TEXT
            )],
            "msg_too_long",
        );
    }
    let ts = next_ts(shared);
    let m = Message {
        channel: channel.to_owned(),
        thread_ts: Some(thread_ts.to_owned()),
        user: BOT_USER.to_owned(),
        bot: true,
        text: text.to_owned(),
        blocks: json!([]),
        ts: ts.clone(),
        reactions: Vec::new(),
        streaming: true,
        user_name: None,
        metadata: None,
        first_text: text.to_owned(),
        edited: false,
        files: Vec::new(),
        mentioned: mentioned_users(text, &Value::Null),
    };
    lock(shared).messages.push(m);
    json!({"ok": true, "channel": channel, "ts": ts})
}

/// `chat.appendStream`: `markdown_text` appended to the streaming message `ts`.
fn append_stream(shared: &Shared, body: &Value) -> Value {
    let (Some(channel), Some(ts)) = (str_of(body, "channel"), str_of(body, "ts")) else {
        return error("invalid_arguments");
    };
    let Some(text) = str_of(body, "markdown_text") else {
        return error("invalid_arguments");
    };
    let mut store = lock(shared);
    let Some(m) = store
        .messages
        .iter_mut()
        .find(|m| m.channel == channel && m.ts == ts)
    else {
        return error("message_not_found");
    };
    if !m.streaming {
        return error("message_not_in_streaming_state");
    }
    if text.chars().count() > limits::MARKDOWN_TEXT
        || (m.text.chars().count() + text.chars().count()) > limits::MESSAGE_TEXT
    {
        drop(store);
        return refuse(
            shared,
            "chat.appendStream",
            vec!["markdown_text too long".into()],
            "msg_too_long",
        );
    }
    m.text.push_str(text);
    json!({"ok": true, "channel": channel, "ts": ts})
}

/// `chat.stopStream`: the streaming message `ts` is final (with `markdown_text` appended).
fn stop_stream(shared: &Shared, body: &Value) -> Value {
    let (Some(channel), Some(ts)) = (str_of(body, "channel"), str_of(body, "ts")) else {
        return error("invalid_arguments");
    };
    let mut store = lock(shared);
    let Some(m) = store
        .messages
        .iter_mut()
        .find(|m| m.channel == channel && m.ts == ts)
    else {
        return error("message_not_found");
    };
    if !m.streaming {
        return error("message_not_in_streaming_state");
    }
    if let Some(text) = str_of(body, "markdown_text") {
        m.text.push_str(text);
    }
    m.streaming = false;
    let message = m.json();
    json!({"ok": true, "channel": channel, "ts": ts, "message": message})
}

/// `assistant.threads.setStatus`.
fn set_status(shared: &Shared, body: &Value) -> Value {
    let (Some(channel), Some(ts)) = (str_of(body, "channel_id"), str_of(body, "thread_ts")) else {
        return error("invalid_arguments");
    };
    let status = body["status"].as_str().unwrap_or_default().to_owned();
    lock(shared)
        .statuses
        .push((channel.to_owned(), ts.to_owned(), status));
    json!({"ok": true})
}

/// The most characters of `alt_txt` (`files.getUploadURLExternal`).
const MAX_ALT_TXT: usize = 1000;

/// `files.getUploadURLExternal` (`filename`, `length`, `alt_txt`; form, query or JSON):
/// `{"ok": true, "upload_url", "file_id"}`, the upload URL on this fake. A `length` of 0 or
/// missing is `missing_argument` (or `invalid_arguments` when not a number), as Slack answers.
fn get_upload_url(shared: &Arc<Shared>, body: &Value) -> Value {
    let Some(filename) = str_of(body, "filename") else {
        return error("missing_argument");
    };
    let length = match body.get("length") {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => match s.parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => return error("invalid_arguments"),
        },
        _ => None,
    };
    let Some(length) = length.filter(|n| *n > 0) else {
        return error("missing_argument");
    };
    let alt_txt = str_of(body, "alt_txt").map(str::to_owned);
    if alt_txt
        .as_ref()
        .is_some_and(|a| a.chars().count() > MAX_ALT_TXT)
    {
        return error("alt_txt_too_large");
    }
    let id = format!("F{:08}", shared.seq.fetch_add(1, Ordering::Relaxed));
    let mut store = lock(shared);
    store.uploads.insert(
        id.clone(),
        Upload {
            id: id.clone(),
            filename: filename.to_owned(),
            length,
            alt_txt,
            bytes: None,
            media_type: None,
            upload_auth: String::new(),
            title: None,
            shared_in: None,
            completed: false,
            deleted: false,
        },
    );
    store.upload_order.push(id.clone());
    let base = store
        .upload_base
        .clone()
        .unwrap_or_else(|| shared.base_url.clone());
    json!({"ok": true, "upload_url": format!("{base}/upload/v1/{id}"), "file_id": id})
}

/// `files.completeUploadExternal` (`files` = `[{"id", "title"}]`, a JSON array or its JSON
/// text; `channel_id`, `thread_ts`, `initial_comment`): every file must have been reserved and
/// its bytes uploaded, and not completed before (Slack takes a file once), else `file_not_found`
/// and nothing is shared. With `channel_id` the files are shared as one new bot message (in
/// the thread `thread_ts`) carrying their file objects; without, they stay private. Answers
/// `{"ok": true, "files": [{"id", "title"}]}`.
fn complete_upload(shared: &Arc<Shared>, body: &Value) -> Value {
    let files: Vec<Value> = match body.get("files") {
        Some(Value::Array(a)) => a.clone(),
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_default(),
        _ => Vec::new(),
    };
    if files.is_empty() {
        return error("invalid_arguments");
    }
    let channel = str_of(body, "channel_id")
        .or_else(|| str_of(body, "channels"))
        .map(str::to_owned);
    let thread_ts = str_of(body, "thread_ts").map(str::to_owned);
    let base = shared.base_url.clone();
    let ts = next_ts(shared);
    let mut store = lock(shared);
    let mut objects = Vec::new();
    for f in &files {
        let Some(id) = f.get("id").and_then(Value::as_str) else {
            return error("invalid_arguments");
        };
        match store.uploads.get(id) {
            Some(u) if u.bytes.is_some() && !u.completed && !u.deleted => {}
            _ => return error("file_not_found"),
        }
    }
    for f in &files {
        let id = f["id"].as_str().unwrap_or_default();
        let title = f.get("title").and_then(Value::as_str).map(str::to_owned);
        let u = store.uploads.get_mut(id).expect("checked");
        u.completed = true;
        u.title = Some(title.unwrap_or_else(|| u.filename.clone()));
        u.shared_in = channel.clone().map(|c| (c, thread_ts.clone()));
        let u = u.clone();
        let media = u
            .media_type
            .clone()
            .filter(|m| m != "application/x-www-form-urlencoded")
            .unwrap_or_else(|| "application/octet-stream".to_owned());
        let bytes = u.bytes.clone().unwrap_or_default();
        let mut object = file_object(
            &base,
            &u.id,
            &u.filename,
            u.title.as_deref().unwrap_or(&u.filename),
            &media,
            bytes.len(),
            BOT_USER,
        );
        if let Some(alt) = &u.alt_txt {
            object["alt_txt"] = json!(alt);
        }
        store
            .files
            .insert(format!("{TEAM}-{}/{}", u.id, u.filename), (media, bytes));
        objects.push(object);
    }
    let answer: Vec<Value> = objects
        .iter()
        .map(|o| json!({"id": o["id"], "title": o["title"]}))
        .collect();
    if let Some(channel) = channel {
        let comment = str_of(body, "initial_comment")
            .unwrap_or_default()
            .to_owned();
        let first = if comment.is_empty() {
            objects
                .iter()
                .filter_map(|o| o["title"].as_str())
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            comment.clone()
        };
        store.messages.push(Message {
            channel,
            thread_ts,
            user: BOT_USER.to_owned(),
            bot: true,
            text: comment,
            blocks: json!([]),
            ts,
            reactions: Vec::new(),
            streaming: false,
            user_name: None,
            metadata: None,
            mentioned: mentioned_users(&first, &Value::Null),
            first_text: first,
            edited: false,
            files: objects,
        });
    }
    json!({"ok": true, "files": answer})
}

/// `files.delete` (`file`): the bot's file goes, and with it from every message that shares
/// it (a message left with neither text nor files goes too, as Slack's client shows it);
/// `file_not_found` for an id never handed out, `file_deleted` for one deleted before.
fn delete_file(shared: &Arc<Shared>, body: &Value) -> Value {
    let Some(id) = str_of(body, "file") else {
        return error("file_not_found");
    };
    let mut store = lock(shared);
    match store.uploads.get_mut(id) {
        None => return error("file_not_found"),
        Some(u) if u.deleted => return error("file_deleted"),
        Some(u) => u.deleted = true,
    }
    let mut gone = Vec::new();
    store.messages.retain_mut(|m| {
        let before = m.files.len();
        m.files.retain(|f| f["id"] != id);
        let emptied = before > m.files.len()
            && m.files.is_empty()
            && m.text.is_empty()
            && m.blocks.as_array().is_none_or(Vec::is_empty);
        if emptied {
            gone.push(m.clone());
        }
        !emptied
    });
    store.deleted.extend(gone);
    store
        .files
        .retain(|path, _| !path.starts_with(&format!("{TEAM}-{id}/")));
    json!({"ok": true})
}

impl FakeSlack {
    /// The bot's uploads so far (`files.getUploadURLExternal` on), in the order they were
    /// reserved.
    pub fn uploads(&self) -> Vec<Upload> {
        let store = lock(&self.shared);
        store
            .upload_order
            .iter()
            .filter_map(|id| store.uploads.get(id).cloned())
            .collect()
    }
}

/// A file object as Slack puts it in a message's `files` (`id`, `name`, `title`, `mimetype`,
/// `filetype`, `size`, `url_private`, `url_private_download`, `mode`, …), its links on the fake
/// at `base` (`http://127.0.0.1:N`), uploaded by `user`.
pub(super) fn file_object(
    base: &str,
    id: &str,
    name: &str,
    title: &str,
    media_type: &str,
    size: usize,
    user: &str,
) -> Value {
    let filetype = name.rsplit('.').next().unwrap_or("binary");
    json!({
        "id": id, "created": now_millis() / 1000, "timestamp": now_millis() / 1000,
        "name": name, "title": title, "mimetype": media_type, "filetype": filetype,
        "pretty_type": filetype.to_uppercase(), "user": user, "user_team": TEAM,
        "editable": false, "size": size, "mode": "hosted", "is_external": false,
        "external_type": "", "is_public": false, "public_url_shared": false,
        "display_as_bot": false, "username": "",
        "url_private": format!("{base}/files-pri/{TEAM}-{id}/{name}"),
        "url_private_download": format!("{base}/files-pri/{TEAM}-{id}/download/{name}"),
        "permalink": format!("https://fake.slack.com/files/{user}/{id}/{name}"),
        "has_rich_preview": false, "file_access": "visible"
    })
}
