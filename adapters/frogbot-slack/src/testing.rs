//! A fake of Slack for tests and benches (feature `testing`), like matrix-sdk's `MatrixMockServer`:
//! one local HTTP server speaking Slack's real shapes.
//!
//! - **Web API** (`POST|GET /api/{method}`; point slack-morphism at [`FakeSlack::api_url`], e.g.
//!   with [`Config::with_api_url`](crate::channel::Config::with_api_url)): `auth.test`,
//!   `apps.connections.open`, `chat.postMessage`, `chat.update`, `chat.delete`, `pins.add`,
//!   `pins.remove`, `pins.list`, `chat.postEphemeral`,
//!   `views.open`, `conversations.replies`, `conversations.history` (top-level messages, newest
//!   first, `oldest` / `latest` / `limit` / `cursor`, message metadata with
//!   `include_all_metadata`), `conversations.open` (`users`: one user's DM, the same `D…` every
//!   time). A token other than [`BOT_TOKEN`] and [`APP_TOKEN`] gets `invalid_auth`, as Slack
//!   answers one it does not know. Every call is recorded ([`FakeSlack::calls`]); the
//!   messages are kept as Slack keeps them (a `chat.update` replaces the blocks), so a test reads
//!   what a person would see ([`FakeSlack::message`]). Slack's documented limits are enforced: a
//!   call that breaks one (more than 50 blocks, more than one `table`, a table over 100 rows or
//!   20 cells a row, more than 10 section fields or one over 2,000 characters, an image without
//!   `alt_text`, a section text over 3,000 characters, a button
//!   text over 75, more than 25 elements in an actions block, an option text over 75, …) is
//!   answered `invalid_blocks` like Slack does, and the breach is kept in
//!   [`FakeSlack::violations`].
//! - **Socket Mode**: `apps.connections.open` hands out the `ws://` URL of the fake's WebSocket
//!   server, which greets with `hello`, sends the envelopes a test gives it and reads the
//!   acknowledgements ([`FakeSlack::socket`], [`SocketConnection`]).
//! - **Events API and interactivity**: the payloads Slack posts (`event_callback`, `block_actions`
//!   built from the blocks the fake shows, `view_submission` built from a modal the app opened,
//!   [`FakeSlack::submit_view`]) and signed requests to an app's endpoints
//!   ([`FakeSlack::post_event`], [`FakeSlack::post_interaction`]).
//! - **Modals**: `views.open` keeps the view ([`FakeSlack::views`]); [`FakeSlack::submit_view`]
//!   fills it in as a person would and checks it as Slack's client does before it sends the
//!   submission (a required input left empty, a `number_input` out of `min_value`/`max_value` or
//!   with decimals where `is_decimal_allowed` is false, text over `max_length`: refused with the
//!   field errors Slack shows, nothing sent). `state.values` has Slack's shapes:
//!   `{"type": "plain_text_input" | "number_input", "value": "…" | null}`,
//!   `{"type": "checkboxes" | "multi_static_select", "selected_options": [{text, value}]}`,
//!   `{"type": "radio_buttons" | "static_select", "selected_option": {text, value} | null}`.
//! - **Confirmation dialogs**: a button with a `confirm` object is checked against Slack's limits
//!   (title 100, text 300, confirm / deny 30 characters, style `primary` | `danger`);
//!   [`FakeSlack::confirm_dialog`] is the dialog Slack would show before sending the click.
//! - **What a person sees**: [`FakeSlack::person_view`] reads a thread as Slack's client shows
//!   it after edits and deletions ([`SeenMessage`]: sender, text and controls, reactions, whether
//!   it notified and what the notification showed, edited), [`FakeSlack::seen_views`] the modals
//!   opened, and [`transcript`] renders a view as stable plain text for golden files.
//! - **Conformance**: [`FakeSlack::harness`] gives the `ChannelQuestions` conformance
//!   [`Harness`] over the fake, driving the crate's real [`SlackQuestions`] and client.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use frogbot_model::conformance::{Harness, Limits};
use frogbot_model::faults::{Fault, FaultPlan};
use frogbot_model::{
    ChannelQuestions, Interaction, PlatformUser, QuestionCall, QuestionRecord, Thread, now_millis,
};
use futures::{SinkExt, StreamExt};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::channel::{Connector, EVENTS_PATH, INTERACTIVITY_PATH, RETRY_HEADER, connector};
use crate::convert::{
    SIGNATURE_HEADER, TIMESTAMP_HEADER, form_from_payload, interaction_from_payload,
    message_from_push_json, sign,
};
use crate::ids::{message_id, split_id, thread_id};
use crate::{PLATFORM, SlackQuestions, SlackWebApi};

/// The bot user the fake's `auth.test` names.
pub const BOT_USER: &str = "UBOT";
/// The bot id the fake's `auth.test` names.
pub const BOT_ID: &str = "B1";
/// The workspace.
pub const TEAM: &str = "T1";
/// The app.
pub const APP: &str = "A1";
/// The bot token tests use.
pub const BOT_TOKEN: &str = "xoxb-test-token";
/// The app-level token tests use (Socket Mode).
pub const APP_TOKEN: &str = "xapp-test-token";
/// The signing secret the fake signs deliveries with (the one of Slack's documented example).
pub const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

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
    fn json(&self) -> Value {
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

/// How a delivery to an app is signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signature {
    /// With the signing secret, now.
    Good,
    /// With another secret.
    Wrong,
    /// With the secret, six minutes ago (outside Slack's five-minute window).
    Stale,
}

#[derive(Default)]
struct Store {
    calls: Vec<Call>,
    messages: Vec<Message>,
    ephemerals: Vec<Ephemeral>,
    violations: Vec<String>,
    fail: Option<String>,
    fail_method: HashMap<String, String>,
    names: HashMap<String, String>,
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
}

/// The Web API methods that change something: the ones faults are injected into.
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
];

/// How long a [`Fault::Timeout`] holds its request by default before answering `500` (having
/// done nothing): longer than a test's client timeout.
pub const DEFAULT_FAULT_HOLD: Duration = Duration::from_secs(2);

struct Shared {
    store: Mutex<Store>,
    seq: AtomicU64,
    base_secs: i64,
    ws_url: String,
    connections: tokio::sync::Mutex<mpsc::UnboundedReceiver<SocketConnection>>,
    secret: String,
}

/// The fake Slack. Cheap to clone (all clones are the same fake); the servers stop when the
/// runtime does.
#[derive(Clone)]
pub struct FakeSlack {
    shared: Arc<Shared>,
    addr: SocketAddr,
    http: reqwest::Client,
}

impl std::fmt::Debug for FakeSlack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeSlack")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Store> {
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
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::default()),
            seq: AtomicU64::new(0),
            base_secs: now_millis() / 1000,
            ws_url: format!("ws://{ws_addr}/link/?ticket=fake-ticket&app_id={APP}"),
            connections: tokio::sync::Mutex::new(conn_rx),
            secret: SIGNING_SECRET.to_owned(),
        });
        let app = Router::new()
            .route("/api/{method}", post(api).get(api))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake Web API");
        let addr = listener.local_addr().expect("local address");
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

    /// A [`Config`](crate::channel::Config) for HTTP mode against this fake.
    pub fn http_config(&self) -> crate::channel::Config {
        crate::channel::Config::http(BOT_TOKEN, self.shared.secret.clone())
            .with_api_url(self.api_url())
    }

    /// A [`Config`](crate::channel::Config) for Socket Mode against this fake.
    pub fn socket_config(&self) -> crate::channel::Config {
        crate::channel::Config::socket(BOT_TOKEN, APP_TOKEN).with_api_url(self.api_url())
    }

    /// The crate's real client, pointed at this fake, with `token`.
    pub fn client(&self, token: &str) -> SlackWebApi<Connector> {
        SlackWebApi::new(
            connector(Some(&self.api_url())).expect("a connector"),
            token,
        )
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

    /// The `assistant_thread_started` event of a person opening an assistant thread
    /// (`channel` a DM, `thread_ts` its root).
    pub fn assistant_thread_started(&self, user: &str, channel: &str, thread_ts: &str) -> Value {
        json!({"type": "assistant_thread_started",
               "assistant_thread": {"user_id": user, "channel_id": channel, "thread_ts": thread_ts,
                                    "context": {"channel_id": null, "team_id": TEAM,
                                                "enterprise_id": null}},
               "event_ts": self.next_ts()})
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

    /// Records a message written by a person (as Slack stores it before delivering the event)
    /// and returns it. `thread_ts` makes it a reply in that thread.
    pub fn user_message(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        user: &str,
        text: &str,
    ) -> Message {
        let user_name = lock(&self.shared).names.get(user).cloned();
        let m = Message {
            channel: channel.to_owned(),
            ts: self.next_ts(),
            thread_ts: thread_ts.map(str::to_owned),
            user: user.to_owned(),
            bot: false,
            text: text.to_owned(),
            blocks: json!([]),
            reactions: Vec::new(),
            streaming: false,
            user_name,
            metadata: None,
            first_text: text.to_owned(),
            edited: false,
        };
        lock(&self.shared).messages.push(m.clone());
        m
    }

    /// The `message` event of `m` (a channel message; `channel_type` as given).
    pub fn message_event(&self, m: &Message, channel_type: &str) -> Value {
        let mut e = json!({"type": "message", "channel": m.channel, "user": m.user,
                           "text": m.text, "ts": m.ts, "event_ts": m.ts,
                           "channel_type": channel_type, "team": TEAM});
        if let Some(t) = &m.thread_ts {
            e["thread_ts"] = json!(t);
        }
        e
    }

    /// The `app_mention` event of `m`.
    pub fn mention_event(&self, m: &Message) -> Value {
        let mut e = json!({"type": "app_mention", "channel": m.channel, "user": m.user,
                           "text": m.text, "ts": m.ts, "event_ts": m.ts, "team": TEAM});
        if let Some(t) = &m.thread_ts {
            e["thread_ts"] = json!(t);
        }
        e
    }

    /// The Events API body Slack posts for `event` (`event_callback`), with a fresh `event_id`.
    pub fn event_callback(&self, event: Value) -> Value {
        let id = format!("Ev{:08}", self.shared.seq.fetch_add(1, Ordering::Relaxed));
        self.event_callback_with_id(event, &id)
    }

    /// [`FakeSlack::event_callback`] with a given `event_id` (a retry carries the same one).
    pub fn event_callback_with_id(&self, event: Value, event_id: &str) -> Value {
        json!({
            "token": "legacy-verification-token", "team_id": TEAM, "api_app_id": APP,
            "type": "event_callback", "event_id": event_id,
            "event_time": now_millis() / 1000, "event": event,
            "event_context": format!("4-{event_id}"),
            "authorizations": [{"enterprise_id": null, "team_id": TEAM, "user_id": BOT_USER,
                                "is_bot": true, "is_enterprise_install": false}],
            "is_ext_shared_channel": false
        })
    }

    /// A fresh `trigger_id`.
    pub fn trigger_id(&self) -> String {
        let n = self.shared.seq.fetch_add(1, Ordering::Relaxed);
        format!("{n}.{}.fake{n:x}", self.shared.base_secs)
    }

    /// The `block_actions` payload Slack sends when `user` uses `action` (an element of the
    /// message's blocks, as [`FakeSlack::element`] finds it, plus what the person chose) on the
    /// message `channel:message_ts` (which the fake need not know: a foreign message). `state` is
    /// the message's input state (`state.values`); the message's blocks are included as Slack
    /// does.
    pub fn block_actions(
        &self,
        user: &str,
        message: &str,
        action: Value,
        state: Value,
        trigger_id: &str,
    ) -> Value {
        let (channel, ts) = split_id(message).unwrap_or(("C0UNKNOWN", message));
        let known = self.message(message);
        let thread_ts = known
            .as_ref()
            .and_then(|m| m.thread_ts.clone())
            .unwrap_or_else(|| ts.to_owned());
        let mut action = action;
        action["action_ts"] = json!(format!("{}.{:06}", now_millis() / 1000, 1));
        let msg = known.map(|m| m.json()).unwrap_or_else(
            || json!({"type": "message", "ts": ts, "bot_id": BOT_ID, "text": "", "user": BOT_USER}),
        );
        json!({
            "type": "block_actions",
            "user": {"id": user, "username": user.to_lowercase(), "name": user.to_lowercase(),
                     "team_id": TEAM},
            "api_app_id": APP,
            "token": "legacy-verification-token",
            "container": {"type": "message", "message_ts": ts, "channel_id": channel,
                          "is_ephemeral": false, "thread_ts": thread_ts},
            "trigger_id": trigger_id,
            "team": {"id": TEAM, "domain": "frogs"},
            "enterprise": null,
            "is_enterprise_install": false,
            "channel": {"id": channel, "name": "ops"},
            "message": msg,
            "state": {"values": state},
            "response_url": format!("https://hooks.slack.com/actions/{TEAM}/1/fake"),
            "actions": [action]
        })
    }

    /// The button labelled `label` on message `message` as Slack reports it in an action
    /// (`type`, `block_id`, `action_id`, `text`, `value`, `style`).
    pub fn element(&self, message: &str, label: &str) -> Option<Value> {
        let m = self.message(message)?;
        for block in m.blocks.as_array()? {
            for e in block["elements"].as_array().into_iter().flatten() {
                if e["type"] == "button" && e["text"]["text"] == label {
                    let mut a = e.clone();
                    a["block_id"] = block["block_id"].clone();
                    return Some(a);
                }
            }
        }
        None
    }

    /// `user` clicking the button labelled `label` on message `message`: the `block_actions`
    /// payload (with the message's input state).
    pub fn click(&self, user: &str, message: &str, label: &str) -> Option<Value> {
        let action = self.element(message, label)?;
        let state = self
            .message(message)
            .map(|m| input_state(&m.blocks, &HashMap::new()))
            .unwrap_or_else(|| json!({}));
        Some(self.block_actions(user, message, action, state, &self.trigger_id()))
    }

    /// The modals `views.open` opened, oldest first, as Slack answered them (each with its `id`).
    pub fn views(&self) -> Vec<Value> {
        lock(&self.shared).views.clone()
    }

    /// The confirmation dialog Slack shows before it sends a click on the button labelled
    /// `label` of message `message` (the button's `confirm` object), when it has one.
    pub fn confirm_dialog(&self, message: &str, label: &str) -> Option<Value> {
        self.element(message, label)?.get("confirm").cloned()
    }

    /// `user` filling in and submitting the modal `view_id` (one [`FakeSlack::views`] opened):
    /// `fill` gives, by `action_id`, a string for a `plain_text_input` / `number_input` (what is
    /// typed) or an array of option values for a checkbox group or select (what is checked);
    /// an input not named keeps its initial value. Checked as Slack's client checks a modal
    /// before it sends anything: `Err` holds the field errors by `block_id` (a required input
    /// empty, a number that is no number, has decimals where `is_decimal_allowed` is false or is
    /// outside `min_value`/`max_value`, text longer than `max_length` or shorter than
    /// `min_length`). `Ok` is the `view_submission` payload Slack posts, with `view.state.values`
    /// in Slack's shapes.
    pub fn submit_view(
        &self,
        user: &str,
        view_id: &str,
        fill: &[(&str, Value)],
    ) -> Result<Value, HashMap<String, String>> {
        let Some(mut view) = self.views().into_iter().find(|v| v["id"] == view_id) else {
            return Err(HashMap::from([(
                String::new(),
                format!("no view {view_id} is open"),
            )]));
        };
        let fill: HashMap<&str, &Value> = fill.iter().map(|(k, v)| (*k, v)).collect();
        let mut values = Map::new();
        let mut errors = HashMap::new();
        for block in view["blocks"].as_array().cloned().unwrap_or_default() {
            if block["type"] != "input" {
                continue;
            }
            let block_id = block["block_id"].as_str().unwrap_or_default().to_owned();
            let e = &block["element"];
            let kind = e["type"].as_str().unwrap_or_default();
            let id = e["action_id"].as_str().unwrap_or_default().to_owned();
            let optional = block["optional"].as_bool().unwrap_or(false);
            let given = fill.get(id.as_str()).copied();
            let (state, empty, error) = match kind {
                "plain_text_input" | "number_input" => {
                    let text = match given {
                        Some(Value::String(t)) => Some(t.clone()),
                        _ => e["initial_value"].as_str().map(str::to_owned),
                    }
                    .filter(|t| !t.is_empty());
                    let error = text.as_deref().and_then(|t| {
                        if kind == "number_input" {
                            number_input_error(e, t)
                        } else {
                            text_input_error(e, t)
                        }
                    });
                    (json!({"type": kind, "value": text}), text.is_none(), error)
                }
                "checkboxes" | "multi_static_select" | "radio_buttons" | "static_select" => {
                    let options = e["options"].as_array().cloned().unwrap_or_default();
                    let chosen: Vec<Value> = match given {
                        Some(Value::Array(picked)) => options
                            .iter()
                            .filter(|o| picked.contains(&o["value"]))
                            .cloned()
                            .collect(),
                        Some(Value::String(v)) => options
                            .iter()
                            .filter(|o| o["value"] == *v)
                            .cloned()
                            .collect(),
                        _ => e["initial_options"]
                            .as_array()
                            .cloned()
                            .or_else(|| e.get("initial_option").map(|o| vec![o.clone()]))
                            .unwrap_or_default(),
                    };
                    let empty = chosen.is_empty();
                    let state = if kind == "checkboxes" || kind == "multi_static_select" {
                        json!({"type": kind, "selected_options": chosen})
                    } else {
                        json!({"type": kind, "selected_option": chosen.into_iter().next()})
                    };
                    (state, empty, None)
                }
                _ => continue,
            };
            if let Some(err) = error {
                errors.insert(block_id.clone(), err);
            } else if empty && !optional {
                errors.insert(
                    block_id.clone(),
                    "Please complete this required field.".into(),
                );
            }
            values.insert(block_id, json!({ id: state }));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        view["state"] = json!({"values": values});
        Ok(json!({
            "type": "view_submission",
            "team": {"id": TEAM, "domain": "frogs"},
            "user": {"id": user, "username": user.to_lowercase(), "name": user.to_lowercase(),
                     "team_id": TEAM},
            "api_app_id": APP,
            "token": "legacy-verification-token",
            "trigger_id": self.trigger_id(),
            "view": view,
            "response_urls": [],
            "is_enterprise_install": false,
            "enterprise": null
        }))
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

    /// The next Socket Mode connection an app opens (it has received `hello`).
    pub async fn socket(&self) -> SocketConnection {
        let mut rx = self.shared.connections.lock().await;
        tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("the app connects to Socket Mode in time")
            .expect("the fake's Socket Mode server runs")
    }

    /// Posts `body` to `url` signed as Slack does (`X-Slack-Signature`,
    /// `X-Slack-Request-Timestamp`), with `X-Slack-Retry-Num` when `retry` is given.
    pub async fn post_signed(
        &self,
        url: &str,
        content_type: &str,
        body: String,
        sig: Signature,
        retry: Option<u32>,
    ) -> reqwest::Response {
        let now = now_millis() / 1000;
        let ts = match sig {
            Signature::Stale => now - 6 * 60,
            _ => now,
        }
        .to_string();
        let secret = match sig {
            Signature::Wrong => "not-the-signing-secret",
            _ => &self.shared.secret,
        };
        let signature = sign(secret, &ts, body.as_bytes()).expect("a signature");
        let mut req = self
            .http
            .post(url)
            .header("content-type", content_type)
            .header(TIMESTAMP_HEADER, ts)
            .header(SIGNATURE_HEADER, signature)
            .body(body);
        if let Some(n) = retry {
            req = req
                .header(RETRY_HEADER, n.to_string())
                .header("x-slack-retry-reason", "http_timeout");
        }
        req.send().await.expect("the app answers")
    }

    /// Posts an Events API body to the app at `base` (`http://host:port`), signed.
    pub async fn post_event(
        &self,
        base: &str,
        body: &Value,
        sig: Signature,
        retry: Option<u32>,
    ) -> reqwest::Response {
        self.post_signed(
            &format!("{base}{EVENTS_PATH}"),
            "application/json",
            body.to_string(),
            sig,
            retry,
        )
        .await
    }

    /// Posts an interaction payload to the app at `base` as Slack does
    /// (`payload=<urlencoded JSON>`), signed.
    pub async fn post_interaction(
        &self,
        base: &str,
        payload: &Value,
        sig: Signature,
        retry: Option<u32>,
    ) -> reqwest::Response {
        self.post_signed(
            &format!("{base}{INTERACTIVITY_PATH}"),
            "application/x-www-form-urlencoded",
            form_from_payload(payload),
            sig,
            retry,
        )
        .await
    }

    /// The `ChannelQuestions` conformance harness over a new fake.
    pub async fn harness() -> SlackHarness {
        let fake = FakeSlack::start().await;
        let hooks = fake.questions();
        SlackHarness { fake, hooks }
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

/// What Slack's client says of a `number_input`'s text, if it refuses it.
fn number_input_error(e: &Value, text: &str) -> Option<String> {
    let Ok(v) = text.trim().parse::<f64>() else {
        return Some("Enter a number.".into());
    };
    if !e["is_decimal_allowed"].as_bool().unwrap_or(false) && v.fract() != 0.0 {
        return Some("Enter a whole number.".into());
    }
    let bound = |k: &str| e[k].as_str().and_then(|b| b.parse::<f64>().ok());
    if let Some(min) = bound("min_value")
        && v < min
    {
        return Some(format!(
            "Enter a number of at least {}.",
            e["min_value"].as_str()?
        ));
    }
    if let Some(max) = bound("max_value")
        && v > max
    {
        return Some(format!(
            "Enter a number of at most {}.",
            e["max_value"].as_str()?
        ));
    }
    None
}

/// What Slack's client says of a `plain_text_input`'s text, if it refuses it.
fn text_input_error(e: &Value, text: &str) -> Option<String> {
    let n = text.chars().count() as u64;
    if let Some(max) = e["max_length"].as_u64()
        && n > max
    {
        return Some(format!("Enter at most {max} characters."));
    }
    if let Some(min) = e["min_length"].as_u64()
        && n < min
    {
        return Some(format!("Enter at least {min} characters."));
    }
    None
}

/// The `state.values` of a message's inputs: each checkbox group and select with its initial
/// options, unless `chosen` (by `action_id`) says what the person picked.
fn input_state(blocks: &Value, chosen: &HashMap<String, Vec<Value>>) -> Value {
    let mut values = Map::new();
    for block in blocks.as_array().into_iter().flatten() {
        let elements = block["elements"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .chain(block.get("accessory").cloned());
        let mut inputs = Map::new();
        for e in elements {
            let Some(kind) = e["type"].as_str() else {
                continue;
            };
            let id = e["action_id"].as_str().unwrap_or_default().to_owned();
            let picked = chosen.get(&id).cloned();
            match kind {
                "checkboxes" | "multi_static_select" => {
                    let opts = picked.unwrap_or_else(|| {
                        e["initial_options"].as_array().cloned().unwrap_or_default()
                    });
                    inputs.insert(id, json!({"type": kind, "selected_options": opts}));
                }
                "static_select" | "radio_buttons" => {
                    let opt = picked
                        .and_then(|p| p.into_iter().next())
                        .or_else(|| e.get("initial_option").cloned())
                        .unwrap_or(Value::Null);
                    inputs.insert(id, json!({"type": kind, "selected_option": opt}));
                }
                _ => {}
            }
        }
        if !inputs.is_empty()
            && let Some(b) = block["block_id"].as_str()
        {
            values.insert(b.to_owned(), Value::Object(inputs));
        }
    }
    Value::Object(values)
}

// ---- the Web API ----------------------------------------------------------------------------

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
    let (fault, hold, gate) = {
        let store = lock(&shared);
        let fault = if WRITE_METHODS.contains(&method.as_str()) {
            store.faults.as_ref().and_then(|p| p.next())
        } else {
            None
        };
        (
            fault,
            store.fault_hold.unwrap_or(DEFAULT_FAULT_HOLD),
            store.holds.get(&method).cloned(),
        )
    };
    if let Some(gate) = gate {
        let _ = gate.acquire().await;
    }
    match fault {
        Some(Fault::ServerError) => {
            return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "fake: 500").into_response();
        }
        Some(Fault::RateLimited(wait)) => {
            let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            return (
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                [(axum::http::header::RETRY_AFTER, secs.to_string())],
                axum::Json(error("ratelimited")),
            )
                .into_response();
        }
        Some(Fault::Timeout) => {
            tokio::time::sleep(hold).await;
            return (
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "fake: too late",
            )
                .into_response();
        }
        Some(Fault::ResetAfterProcessing) | None => {}
    }
    let answer = api_answer(&shared, method, uri, headers, body);
    if fault == Some(Fault::ResetAfterProcessing) {
        return reset_response();
    }
    answer.into_response()
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

fn ts_key(ts: &str) -> (u64, u64) {
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

// ---- Socket Mode ------------------------------------------------------------------------------

/// One Socket Mode connection an app opened: envelopes to send it, acknowledgements it sent.
#[derive(Debug)]
pub struct SocketConnection {
    send: mpsc::UnboundedSender<String>,
    recv: mpsc::UnboundedReceiver<String>,
    seq: u64,
}

impl SocketConnection {
    /// Sends an envelope of `kind` (`events_api`, `interactive`, …) carrying `payload`; returns
    /// its `envelope_id`.
    pub fn send(&mut self, kind: &str, payload: Value) -> String {
        self.seq += 1;
        let id = format!("fake-envelope-{}", self.seq);
        self.send_envelope(&id, kind, payload);
        id
    }

    /// Sends an envelope with a given id.
    pub fn send_envelope(&self, id: &str, kind: &str, payload: Value) {
        self.send_frame(
            json!({"envelope_id": id, "type": kind, "accepts_response_payload": kind != "events_api",
                   "retry_attempt": 0, "retry_reason": "", "payload": payload})
            .to_string(),
        );
    }

    /// Sends a raw text frame (e.g. `{"type": "disconnect", …}`).
    pub fn send_frame(&self, frame: String) {
        let _ = self.send.send(frame);
    }

    /// The next frame the app sends (an acknowledgement `{"envelope_id": …}`), within 20 s.
    pub async fn ack(&mut self) -> Value {
        let frame = tokio::time::timeout(Duration::from_secs(20), self.recv.recv())
            .await
            .expect("an acknowledgement in time")
            .expect("the socket is open");
        serde_json::from_str(&frame).expect("an acknowledgement is JSON")
    }
}

async fn ws_server(
    listener: tokio::net::TcpListener,
    conns: mpsc::UnboundedSender<SocketConnection>,
) {
    while let Ok((tcp, _)) = listener.accept().await {
        let conns = conns.clone();
        tokio::spawn(async move {
            let Ok(ws) = tokio_tungstenite::accept_async(tcp).await else {
                return;
            };
            let (mut sink, mut stream) = ws.split();
            let (to_app, mut outbox) = mpsc::unbounded_channel::<String>();
            let (from_app, inbox) = mpsc::unbounded_channel::<String>();
            let hello = json!({
                "type": "hello", "num_connections": 1,
                "debug_info": {"host": "applink-fake", "approximate_connection_time": 18060},
                "connection_info": {"app_id": APP}
            });
            if sink.send(WsMessage::text(hello.to_string())).await.is_err() {
                return;
            }
            let _ = conns.send(SocketConnection {
                send: to_app,
                recv: inbox,
                seq: 0,
            });
            loop {
                tokio::select! {
                    out = outbox.recv() => match out {
                        Some(f) => if sink.send(WsMessage::text(f)).await.is_err() { return },
                        None => return,
                    },
                    msg = stream.next() => match msg {
                        Some(Ok(WsMessage::Text(t))) => { let _ = from_app.send(t.to_string()); }
                        Some(Ok(WsMessage::Ping(p))) => { let _ = sink.send(WsMessage::Pong(p)).await; }
                        Some(Ok(_)) => {}
                        _ => return,
                    },
                }
            }
        });
    }
}

// ---- the conformance harness -----------------------------------------------------------------

/// The `ChannelQuestions` conformance [`Harness`] over a [`FakeSlack`]: the crate's
/// [`SlackQuestions`] talking to the fake through its real client.
#[derive(Debug)]
pub struct SlackHarness {
    /// The fake.
    pub fake: FakeSlack,
    hooks: SlackQuestions<SlackWebApi<Connector>>,
}

/// The conversation the harness's threads live in.
const CONFORMANCE_CHANNEL: &str = "C0CONFORM";

#[async_trait]
impl Harness for SlackHarness {
    fn hooks(&self) -> &dyn ChannelQuestions {
        &self.hooks
    }

    async fn thread(&self) -> Thread {
        let root = self.fake.user_message(
            CONFORMANCE_CHANNEL,
            None,
            &frogbot_model::conformance::participant().id,
            &format!("<@{BOT_USER}> ask me"),
        );
        let id = thread_id(CONFORMANCE_CHANNEL, &root.ts);
        Thread {
            chat_id: format!("chat-{id}"),
            id,
            platform: PLATFORM.into(),
        }
    }

    fn limits(&self) -> Limits {
        // Twelve questions of two blocks each stay under FrogBot's 25 blocks (Slack allows 50);
        // a static select takes 100 options; Slack cuts nothing of a 75-character option text.
        Limits {
            questions: 12,
            options: 100,
            label: 75,
        }
    }

    async fn choose(
        &self,
        _thread: &Thread,
        call: &QuestionCall,
        record: &QuestionRecord,
        q: usize,
        options: &[usize],
        user: &PlatformUser,
    ) -> Vec<Interaction> {
        let Some(current) = record.current() else {
            return Vec::new();
        };
        let Some(message) = self.fake.message(&current.id) else {
            return Vec::new();
        };
        let Some(blocks) = message.blocks.as_array() else {
            return Vec::new();
        };
        // Question `q` is drawn as its section and the `q`-th actions block after it.
        let Some(at) = blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b["type"] == "actions")
            .map(|(i, _)| i)
            .nth(q)
        else {
            return Vec::new();
        };
        let actions = &blocks[at];
        let section = at.checked_sub(1).map(|i| &blocks[i]);
        let with_block = |e: &Value, block: &Value| {
            let mut a = e.clone();
            a["block_id"] = block["block_id"].clone();
            a
        };
        let elements = actions["elements"].as_array().cloned().unwrap_or_default();
        let multiple = call.input.questions.get(q).is_some_and(|x| x.multiple);
        let (action, chosen) = if multiple {
            // Checks (a checkbox group, or a multi-select beside the question), then Submit: the
            // Submit click carries what is checked in the message's state, as Slack sends it.
            let Some(group) = elements
                .iter()
                .find(|e| e["type"] == "checkboxes")
                .or_else(|| section.and_then(|s| s.get("accessory")))
            else {
                return Vec::new();
            };
            let picked: Vec<Value> = options
                .iter()
                .filter_map(|&o| group["options"].get(o).cloned())
                .collect();
            let Some(submit) = elements.iter().find(|e| e["type"] == "button") else {
                return Vec::new();
            };
            let id = group["action_id"].as_str().unwrap_or_default().to_owned();
            (with_block(submit, actions), HashMap::from([(id, picked)]))
        } else {
            let &[o] = options else {
                return Vec::new();
            };
            // Option buttons carry a value (Submit and "Other…" carry none); else a select.
            let buttons: Vec<&Value> = elements
                .iter()
                .filter(|e| e["type"] == "button" && e.get("value").is_some())
                .collect();
            if let Some(b) = buttons.get(o) {
                (with_block(b, actions), HashMap::new())
            } else if let Some(select) = elements.iter().find(|e| e["type"] == "static_select") {
                let Some(opt) = select["options"].get(o).cloned() else {
                    return Vec::new();
                };
                let a = json!({
                    "type": "static_select", "action_id": select["action_id"],
                    "block_id": actions["block_id"], "selected_option": opt,
                    "placeholder": select["placeholder"]
                });
                let id = select["action_id"].as_str().unwrap_or_default().to_owned();
                (a, HashMap::from([(id, vec![opt])]))
            } else {
                return Vec::new();
            }
        };
        let state = input_state(&message.blocks, &chosen);
        let payload = self.fake.block_actions(
            &user.id,
            &current.id,
            action,
            state,
            &self.fake.trigger_id(),
        );
        match interaction_from_payload(&payload) {
            Ok(Some(i)) => vec![i],
            _ => Vec::new(),
        }
    }

    async fn reply(&self, thread: &Thread, text: &str, user: &PlatformUser) -> Interaction {
        let (channel, root) = split_id(&thread.id).expect("a Slack thread id");
        let m = self.fake.user_message(channel, Some(root), &user.id, text);
        let body = self
            .fake
            .event_callback(self.fake.message_event(&m, "channel"));
        let incoming = message_from_push_json(&body, BOT_USER)
            .expect("a readable event")
            .expect("a person's message");
        Interaction::Message {
            message: incoming.message,
        }
    }

    async fn skip(
        &self,
        _thread: &Thread,
        _call: &QuestionCall,
        record: &QuestionRecord,
        user: &PlatformUser,
    ) -> Interaction {
        let current = record.current().expect("a question message");
        let payload = self
            .fake
            .click(&user.id, &current.id, "Skip")
            .unwrap_or_else(|| panic!("message {} shows no Skip button", current.id));
        interaction_from_payload(&payload)
            .expect("a readable click")
            .expect("an interaction")
    }

    async fn controls(&self, message_id: &str) -> usize {
        self.fake.controls(message_id)
    }

    async fn shown_text(&self, message_id: &str) -> String {
        fn texts(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(o) => {
                    if let Some(Value::String(t)) = o.get("text") {
                        out.push(t.clone());
                    }
                    o.values().for_each(|v| texts(v, out));
                }
                Value::Array(a) => a.iter().for_each(|v| texts(v, out)),
                _ => {}
            }
        }
        let Some(m) = self.fake.message(message_id) else {
            return String::new();
        };
        let mut out = Vec::new();
        texts(&m.blocks, &mut out);
        if out.is_empty() {
            out.push(m.text);
        }
        out.join("\n")
    }

    async fn notices(&self, user: &PlatformUser) -> Vec<String> {
        self.fake.notices(&user.id)
    }
}

// ---- What a person sees -----------------------------------------------------------------------

/// The name the person view gives the bot.
pub const BOT_NAME: &str = "frogbot";

/// One message of a thread as a person sees it in Slack's client ([`FakeSlack::person_view`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SeenMessage {
    /// `channel:ts`.
    pub id: String,
    /// Who wrote it: [`BOT_NAME`] for the bot, else the person's name when the fake knows it
    /// ([`FakeSlack::set_user_name`]), else their user id.
    pub sender: String,
    /// What it shows after edits, as plain lines: its blocks' texts (a message with blocks
    /// shows them, not its `text`), else its `text`; mentions as `@name`, Slack's `&lt;` `&gt;`
    /// `&amp;` as the characters. Controls are in [`SeenMessage::controls`].
    pub text: String,
    /// Its controls, one line per actions block or accessory, in order: `[label]` a button,
    /// `select "placeholder": a | b — description` a select, `checkboxes: ☐ a | ☑ b`,
    /// `radio: ○ a | ● b`, …
    pub controls: Vec<String>,
    /// Its reactions: each emoji name with who reacted, in order.
    pub reactions: Vec<(String, Vec<String>)>,
    /// Whether its posting notified. On Slack a new message does (`chat.postMessage`, the
    /// message `chat.startStream` opens, a person's message); `chat.update` and
    /// `chat.appendStream` / `chat.stopStream` never do, and an ephemeral message does not.
    /// Slack has no silent post, so each message of a reply split over several (a streamed
    /// message holds 12,000 characters of Markdown) notifies; what the first notification shows
    /// is held back until the text reads as a start (see the outbox's `SlackStream`).
    pub notified: bool,
    /// What the notification showed: the text the message was posted with (`None` when it did
    /// not notify).
    pub notification: Option<String>,
    /// Whether a `chat.update` changed it.
    pub edited: bool,
    /// Whether it is a native stream not stopped yet.
    pub streaming: bool,
    /// For an ephemeral message: the only person who sees it.
    pub only_for: Option<String>,
}

impl FakeSlack {
    /// What a person sees of the thread `channel:thread_ts`, in order: its root and replies
    /// after edits (deleted messages gone), with their reactions and whether each notified, and
    /// the ephemeral messages shown in it (each marked with the one person who sees it).
    pub fn person_view(&self, thread: &str) -> Vec<SeenMessage> {
        let Ok((channel, root)) = split_id(thread) else {
            return Vec::new();
        };
        let store = lock(&self.shared);
        let name = |user: &str| -> String {
            if user == BOT_USER {
                BOT_NAME.to_owned()
            } else {
                store
                    .names
                    .get(user)
                    .cloned()
                    .unwrap_or_else(|| user.to_owned())
            }
        };
        let mut out: Vec<(String, SeenMessage)> = Vec::new();
        for m in store.messages.iter().filter(|m| {
            m.channel == channel && (m.ts == root || m.thread_ts.as_deref() == Some(root))
        }) {
            let (text, controls) = match m.blocks.as_array().filter(|b| !b.is_empty()) {
                Some(blocks) => seen_blocks(blocks, &name),
                None => (seen_text(&m.text, &name), Vec::new()),
            };
            let mut reactions: Vec<(String, Vec<String>)> = Vec::new();
            for (emoji, user) in &m.reactions {
                match reactions.iter_mut().find(|(e, _)| e == emoji) {
                    Some((_, by)) => by.push(name(user)),
                    None => reactions.push((emoji.clone(), vec![name(user)])),
                }
            }
            out.push((
                m.ts.clone(),
                SeenMessage {
                    id: m.id(),
                    sender: if m.bot {
                        BOT_NAME.to_owned()
                    } else {
                        name(&m.user)
                    },
                    text,
                    controls,
                    reactions,
                    notified: true,
                    notification: Some(seen_text(&m.first_text, &name)),
                    edited: m.edited,
                    streaming: m.streaming,
                    only_for: None,
                },
            ));
        }
        for e in store
            .ephemerals
            .iter()
            .filter(|e| e.channel == channel && e.thread_ts.as_deref() == Some(root))
        {
            out.push((
                e.ts.clone(),
                SeenMessage {
                    id: message_id(&e.channel, &e.ts),
                    sender: BOT_NAME.to_owned(),
                    text: seen_text(&e.text, &name),
                    controls: Vec::new(),
                    reactions: Vec::new(),
                    notified: false,
                    notification: None,
                    edited: false,
                    streaming: false,
                    only_for: Some(name(&e.user)),
                },
            ));
        }
        out.sort_by_key(|(ts, _)| ts_key(ts));
        out.into_iter().map(|(_, m)| m).collect()
    }

    /// The modals opened so far as a person sees them, each as plain lines ([`seen_view`]).
    pub fn seen_views(&self) -> Vec<String> {
        let names = lock(&self.shared).names.clone();
        let name = |user: &str| names.get(user).cloned().unwrap_or_else(|| user.to_owned());
        self.views().iter().map(|v| seen_view(v, &name)).collect()
    }
}

/// A modal as a person sees it: its title, each block's text and controls (an input block as
/// its label, `(optional)` where it is, its control and hint), then its submit and close
/// buttons.
pub fn seen_view(view: &Value, name: &dyn Fn(&str) -> String) -> String {
    let mut lines = vec![format!("modal \"{}\"", plain_of(&view["title"]))];
    if let Some(blocks) = view["blocks"].as_array() {
        for b in blocks {
            let (text, controls) = seen_blocks(std::slice::from_ref(b), name);
            lines.extend(
                text.lines()
                    .filter(|l| !l.is_empty())
                    .map(|l| format!("  {l}")),
            );
            lines.extend(controls.iter().map(|c| format!("  > {c}")));
        }
    }
    let mut buttons = Vec::new();
    for key in ["submit", "close"] {
        if view[key].is_object() {
            buttons.push(format!("[{}]", plain_of(&view[key])));
        }
    }
    if !buttons.is_empty() {
        lines.push(format!("  > {}", buttons.join(" ")));
    }
    lines.join("\n")
}

/// The characters of a text object (`{"type", "text"}`) or a string.
fn plain_of(v: &Value) -> String {
    v["text"]
        .as_str()
        .or_else(|| v.as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Slack's message text as the client shows it: `<@U1>` / `<@U1|name>` as `@name`, `<url|label>`
/// as `label (url)`, `<url>` as the url, and `&lt;` `&gt;` `&amp;` as the characters. Markdown
/// marks stay as they are (so raw `**x**` is seen).
pub fn seen_text(text: &str, name: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find('<') {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find('>') else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let inner = &rest[start + 1..start + end];
        let (target, label) = match inner.split_once('|') {
            Some((t, l)) => (t, Some(l)),
            None => (inner, None),
        };
        if let Some(user) = target.strip_prefix('@') {
            out.push('@');
            out.push_str(&name(user));
        } else if let Some(special) = target.strip_prefix('!') {
            out.push('@');
            out.push_str(label.unwrap_or(special));
        } else {
            match label {
                Some(l) => out.push_str(&format!("{l} ({target})")),
                None => out.push_str(target),
            }
        }
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// An option (`{text, description}`) as `label — description`.
fn seen_option(o: &Value) -> String {
    let label = plain_of(&o["text"]);
    match o["description"]["text"].as_str() {
        Some(d) => format!("{label} — {d}"),
        None => label,
    }
}

/// One interactive element as a line (`None` for what is no control).
fn seen_control(e: &Value) -> Option<String> {
    let t = e["type"].as_str().unwrap_or_default();
    let options = |key: &str| -> Vec<Value> { e[key].as_array().cloned().unwrap_or_default() };
    let initial: Vec<Value> = match (&e["initial_options"], &e["initial_option"]) {
        (Value::Array(a), _) => a.clone(),
        (_, o) if o.is_object() => vec![o.clone()],
        _ => Vec::new(),
    };
    let picked = |o: &Value| initial.iter().any(|i| i["value"] == o["value"]);
    let placeholder = e["placeholder"]["text"]
        .as_str()
        .map(|p| format!(" \"{p}\""))
        .unwrap_or_default();
    let listed = |marks: (&str, &str)| -> String {
        options("options")
            .iter()
            .map(|o| {
                format!(
                    "{} {}",
                    if picked(o) { marks.1 } else { marks.0 },
                    seen_option(o)
                )
            })
            .collect::<Vec<_>>()
            .join(" | ")
    };
    let line = match t {
        "button" => {
            let mut b = format!("[{}]", plain_of(&e["text"]));
            if let Some(style) = e["style"].as_str() {
                b.push_str(&format!("({style})"));
            }
            if e["confirm"].is_object() {
                b.push_str(&format!(
                    " (asks \"{}\": \"{}\" [{}] [{}])",
                    plain_of(&e["confirm"]["title"]),
                    plain_of(&e["confirm"]["text"]),
                    plain_of(&e["confirm"]["confirm"]),
                    plain_of(&e["confirm"]["deny"]),
                ));
            }
            b
        }
        "static_select" | "multi_static_select" | "overflow" => {
            let kind = match t {
                "static_select" => "select",
                "multi_static_select" => "multi-select",
                _ => "overflow",
            };
            let shown: Vec<String> = options("options")
                .iter()
                .map(|o| {
                    if picked(o) {
                        format!("{} (selected)", seen_option(o))
                    } else {
                        seen_option(o)
                    }
                })
                .collect();
            format!("{kind}{placeholder}: {}", shown.join(" | "))
        }
        "checkboxes" => format!("checkboxes: {}", listed(("☐", "☑"))),
        "radio_buttons" => format!("radio: {}", listed(("○", "●"))),
        "plain_text_input" => {
            let mut l = format!("text field{placeholder}");
            if let Some(v) = e["initial_value"].as_str() {
                l.push_str(&format!(" = \"{v}\""));
            }
            if let Some(n) = e["max_length"].as_u64() {
                l.push_str(&format!(" (at most {n} characters)"));
            }
            l
        }
        "number_input" => {
            let mut l = format!("number field{placeholder}");
            if let Some(v) = e["initial_value"].as_str() {
                l.push_str(&format!(" = {v}"));
            }
            l
        }
        "" => return None,
        other => format!("[{other}]"),
    };
    Some(line)
}

/// A list of blocks as plain text lines and control lines.
fn seen_blocks(blocks: &[Value], name: &dyn Fn(&str) -> String) -> (String, Vec<String>) {
    let mut text: Vec<String> = Vec::new();
    let mut controls = Vec::new();
    let mrk = |v: &Value| seen_text(&plain_of(v), name);
    for b in blocks {
        match b["type"].as_str().unwrap_or_default() {
            "section" => {
                if b["text"].is_object() {
                    text.push(mrk(&b["text"]));
                }
                for f in b["fields"].as_array().into_iter().flatten() {
                    text.push(mrk(f));
                }
                if let Some(c) = b.get("accessory").and_then(seen_control) {
                    controls.push(c);
                }
            }
            "header" | "markdown" => text.push(mrk(&b["text"])),
            "context" => text.push(
                b["elements"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|e| match e["type"].as_str() {
                        Some("image") => format!("[image: {}]", plain_of(&e["alt_text"])),
                        _ => mrk(e),
                    })
                    .collect::<Vec<_>>()
                    .join("  "),
            ),
            "divider" => text.push("────".into()),
            "image" => text.push(format!("[image: {}]", plain_of(&b["alt_text"]))),
            "actions" => {
                let line: Vec<String> = b["elements"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(seen_control)
                    .collect();
                controls.push(line.join(" "));
            }
            "input" => {
                let mut label = plain_of(&b["label"]);
                if b["optional"] == true {
                    label.push_str(" (optional)");
                }
                text.push(label);
                if let Some(c) = seen_control(&b["element"]) {
                    controls.push(c);
                }
                if b["hint"].is_object() {
                    text.push(format!("hint: {}", plain_of(&b["hint"])));
                }
            }
            "table" => {
                for row in b["rows"].as_array().into_iter().flatten() {
                    let cells: Vec<String> = row
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|c| {
                            c["text"]
                                .as_str()
                                .map(str::to_owned)
                                .unwrap_or_else(|| rich_text(c))
                        })
                        .collect();
                    text.push(cells.join(" | "));
                }
            }
            "rich_text" => text.push(rich_text(b)),
            other => text.push(format!("[{other} block]")),
        }
    }
    (text.join("\n"), controls)
}

/// The characters of a `rich_text` value, depth first.
fn rich_text(v: &Value) -> String {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(t)) = o.get("text") {
                return t.clone();
            }
            o.get("elements").map(rich_text).unwrap_or_default()
        }
        Value::Array(a) => a.iter().map(rich_text).collect(),
        _ => String::new(),
    }
}

/// The person view as stable plain text for golden files: one block per message, `[n] sender
/// (notified|silent)(, edited)(, streaming)(, only for NAME)`, the notification's first line
/// where it notified, the text indented, then `controls:` and `reactions:` lines.
pub fn transcript(seen: &[SeenMessage]) -> String {
    let mut out = String::new();
    for (i, m) in seen.iter().enumerate() {
        let mut head = format!(
            "[{}] {} ({}",
            i + 1,
            m.sender,
            if m.notified { "notified" } else { "silent" }
        );
        if m.edited {
            head.push_str(", edited");
        }
        if m.streaming {
            head.push_str(", streaming");
        }
        if let Some(who) = &m.only_for {
            head.push_str(&format!(", only for {who}"));
        }
        head.push(')');
        out.push_str(&head);
        out.push('\n');
        if let Some(n) = &m.notification
            && m.sender == BOT_NAME
        {
            let first = n.lines().next().unwrap_or_default();
            let cut: String = first.chars().take(100).collect();
            let more = if cut.len() < n.len() { "…" } else { "" };
            out.push_str(&format!("    notification: \"{cut}{more}\"\n"));
        }
        for line in m.text.lines() {
            if line.is_empty() {
                out.push('\n');
            } else {
                out.push_str(&format!("    {line}\n"));
            }
        }
        for c in &m.controls {
            out.push_str(&format!("    controls: {c}\n"));
        }
        if !m.reactions.is_empty() {
            let r: Vec<String> = m
                .reactions
                .iter()
                .map(|(e, by)| format!(":{e}: {}", by.join(", ")))
                .collect();
            out.push_str(&format!("    reactions: {}\n", r.join(" · ")));
        }
    }
    out
}

/// Compares `actual` with the golden file `path` (`UPDATE_GOLDEN=1` writes it instead); on a
/// difference, panics with the lines that differ (`-` expected, `+` actual).
pub fn assert_golden(path: &std::path::Path, actual: &str) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("golden dir");
        }
        std::fs::write(path, actual).expect("golden written");
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    if expected == actual {
        return;
    }
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let mut diff = String::new();
    for i in 0..e.len().max(a.len()) {
        match (e.get(i), a.get(i)) {
            (Some(x), Some(y)) if x == y => diff.push_str(&format!("  {x}\n")),
            (x, y) => {
                if let Some(x) = x {
                    diff.push_str(&format!("- {x}\n"));
                }
                if let Some(y) = y {
                    diff.push_str(&format!("+ {y}\n"));
                }
            }
        }
    }
    panic!(
        "{} differs (UPDATE_GOLDEN=1 rewrites it):\n{diff}",
        path.display()
    );
}
