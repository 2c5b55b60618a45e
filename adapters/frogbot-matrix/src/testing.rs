//! A fake of the platform (feature `testing`): [`FakeHomeserver`], a local HTTP server speaking
//! the client-server API the adapter uses (login, `/sync` as the push side, sending and redacting
//! events, room state read and written (`m.room.pinned_events`), members, `/messages`, single
//! events, relations (threads, annotations; redacted ones left out), media uploads
//! (`POST /_matrix/media/v3/upload` → `mxc://`), and a test image host (`/_test/images/…`)),
//! recording every event, enforcing
//! Matrix's limits (65,536 bytes an event, 1–20 poll answers, known rooms), and able to inject
//! people's events, which the bot then receives through `/sync`. The adapter's real client
//! (matrix-sdk's `Client`) talks to it; [`MatrixHarness`] runs the `ChannelQuestions`
//! conformance suite over it.
//!
//! Faults ([`FakeHomeserver::inject_faults`]): a [`FaultPlan`] decides for each
//! `PUT /rooms/{room}/send/{type}/{txn}` whether it fails, as a homeserver and the network do:
//! `500` `{"errcode": "M_UNKNOWN"}` (nothing done); `429` `{"errcode": "M_LIMIT_EXCEEDED",
//! "retry_after_ms": N}` (nothing done); a timeout (the connection is dropped without an answer,
//! nothing done); a reset after processing (the event is stored under its transaction id, then
//! the answer is cut off). Like a real homeserver, a repeated transaction id is answered with the
//! event it made the first time.
//!
//! [`synapse`] is the other platform the tests use: a real Synapse on loopback (slower, started
//! once per test binary), for the end-to-end tests of encryption, gaps and restarts.
//!
//! (matrix-sdk's own `MatrixMockServer` needs matrix-sdk's `testing` feature and the
//! `matrix-sdk-test` crate with wiremock; this fake is a small axum server instead, shaped like the
//! other adapters' fakes, and serving a whole bot — login, sync loop and all — not only a client.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use frogbot_model::conformance::{Harness, Limits};
use frogbot_model::faults::{Fault, FaultPlan};
use frogbot_model::{
    ChannelQuestions, Interaction, PlatformUser, QuestionCall, QuestionRecord, Thread,
};
use matrix_sdk::authentication::matrix::MatrixSession;
use matrix_sdk::config::SyncSettings;
use matrix_sdk::ruma::events::AnySyncTimelineEvent;
use matrix_sdk::ruma::serde::Raw;
use matrix_sdk::ruma::{OwnedEventId, OwnedRoomId, OwnedUserId, RoomId, UserId};
use matrix_sdk::{Client, SessionMeta, SessionTokens};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::convert::{Incoming, classify};
use crate::ids::{message_id, split_message_id};
use crate::render::{ANSWER_CHARS, MAX_ANSWERS};
use crate::{MatrixQuestions, PLATFORM};

/// The server name of the fake.
pub const SERVER_NAME: &str = "fake.test";
/// The password the fake's bot account logs in with.
pub const BOT_PASSWORD: &str = "fake-bot-password";
/// The largest event the fake (as Synapse) accepts, in bytes of its JSON.
pub const MAX_EVENT_BYTES: usize = 65_536;
const TOKEN: &str = "fake-access-token";
const DEVICE: &str = "FAKEDEVICE";

/// One event in the fake's rooms, in stream order.
#[derive(Clone, Debug)]
struct Stored {
    room: OwnedRoomId,
    /// The whole event (`type`, `event_id`, `sender`, `origin_server_ts`, `content`, and
    /// `state_key` for state).
    event: Value,
}

#[derive(Debug, Default)]
struct Inner {
    /// Every event of every room, in order; the sync token is a position in it.
    events: Vec<Stored>,
    /// Rooms and their members.
    rooms: HashMap<OwnedRoomId, Vec<OwnedUserId>>,
    /// Transaction ids already used (`room|txn` → event id).
    txns: HashMap<String, String>,
    /// Paths the fake does not serve that were called (for debugging a test).
    unknown: Vec<String>,
    /// The bot's typing notices (`PUT …/typing/{user}`): the room, the stream position (how
    /// many events came before it) and the body, in order.
    typing: Vec<(OwnedRoomId, usize, Value)>,
    /// Whether redactions are refused (`M_FORBIDDEN`), to test what the bot does then.
    refuse_redactions: bool,
    /// Which sends fail, and how.
    faults: Option<Arc<FaultPlan>>,
    /// The rooms whose `/members` fails (`500`).
    failing_members: Vec<OwnedRoomId>,
    /// Uploads to the media repository: the `mxc://` URI, content type and size, in order.
    uploads: Vec<(String, String, usize)>,
    /// The largest event accepted (`None`: [`MAX_EVENT_BYTES`], as Synapse).
    max_event_bytes: Option<usize>,
    /// How many sends were refused as too large (`413 M_TOO_LARGE`).
    too_large: usize,
    next: u64,
}

#[derive(Debug)]
struct Shared {
    bot: OwnedUserId,
    inner: Mutex<Inner>,
    changed: Notify,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One message of a thread as a person sees it ([`FakeHomeserver::person_view`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SeenMessage {
    /// Its event id.
    pub id: String,
    /// Who sent it.
    pub sender: String,
    /// Its `body` after edits: what every client shows of a message, and what a client that
    /// renders no poll shows of a poll (`None`: such a client shows nothing).
    pub fallback: Option<String>,
    /// Its HTML (`formatted_body`) after edits.
    pub html: Option<String>,
    /// Its poll, for a poll start.
    pub poll: Option<SeenPoll>,
    /// Its reactions: each key with who reacted, in order.
    pub reactions: Vec<(String, Vec<String>)>,
    /// Whether its posting notified (not an `m.notice`; edits never notify).
    pub notified: bool,
    /// Whether it was edited.
    pub edited: bool,
}

/// A poll as a client that renders polls shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct SeenPoll {
    /// Its question.
    pub question: String,
    /// Its answers' texts, in order.
    pub answers: Vec<String>,
    /// How many answers one may pick.
    pub max_selections: u64,
    /// The poll end's text, once ended.
    pub ended: Option<String>,
    /// Each person's last selection (answer texts), in the order they first voted.
    pub votes: Vec<(String, Vec<String>)>,
}

/// What a person sees of the thread on `root` given the room's `events` in order (as the fake
/// stores them, or as a second client saw them on a real homeserver): see
/// [`FakeHomeserver::person_view`].
pub fn person_view_of(events: &[Value], root: &str) -> Vec<SeenMessage> {
    let rel = |e: &Value| {
        e["content"]["m.relates_to"]["rel_type"]
            .as_str()
            .map(str::to_owned)
    };
    let target = |e: &Value| {
        e["content"]["m.relates_to"]["event_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let redacted = |id: &str| {
        events
            .iter()
            .any(|r| r["type"] == "m.room.redaction" && r["redacts"] == id)
    };
    let mut out = Vec::new();
    for e in events {
        let id = e["event_id"].as_str().unwrap_or_default();
        let t = e["type"].as_str().unwrap_or_default();
        let in_thread = id == root || (rel(e).as_deref() == Some("m.thread") && target(e) == root);
        if !in_thread || !(t == "m.room.message" || is_poll_start(t)) || redacted(id) {
            continue;
        }
        let edit = events.iter().rev().find(|x| {
            x["sender"] == e["sender"] && rel(x).as_deref() == Some("m.replace") && target(x) == id
        });
        let content = edit.map_or(&e["content"], |x| &x["content"]["m.new_content"]);
        let poll = is_poll_start(t).then(|| {
            let block = if content["m.poll"].is_object() {
                &content["m.poll"]
            } else {
                &content["org.matrix.msc3381.poll.start"]
            };
            let question = block["question"]["m.text"][0]["body"]
                .as_str()
                .or_else(|| block["question"]["org.matrix.msc1767.text"].as_str())
                .unwrap_or_default()
                .to_owned();
            let answers = poll_answers(content);
            let end = events.iter().find(|x| {
                is_poll_end(x["type"].as_str().unwrap_or_default())
                    && rel(x).as_deref() == Some("m.reference")
                    && target(x) == id
            });
            let mut votes: Vec<(String, Vec<String>)> = Vec::new();
            for r in events.iter().filter(|x| {
                matches!(
                    x["type"].as_str(),
                    Some("m.poll.response" | "org.matrix.msc3381.poll.response")
                ) && target(x) == id
            }) {
                let picked = r["content"]["m.selections"]
                    .as_array()
                    .or_else(|| {
                        r["content"]["org.matrix.msc3381.poll.response"]["answers"].as_array()
                    })
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str())
                            .filter_map(|v| answers.iter().find(|(i, _)| i == v))
                            .map(|(_, text)| text.clone())
                            .collect()
                    })
                    .unwrap_or_default();
                let who = r["sender"].as_str().unwrap_or_default().to_owned();
                votes.retain(|(w, _)| *w != who);
                votes.push((who, picked));
            }
            SeenPoll {
                question,
                answers: answers.into_iter().map(|(_, text)| text).collect(),
                max_selections: block["max_selections"].as_u64().unwrap_or(1),
                ended: end.map(|x| content_text(&x["content"])),
                votes,
            }
        });
        let mut reactions: Vec<(String, Vec<String>)> = Vec::new();
        for r in events.iter().filter(|x| {
            x["type"] == "m.reaction"
                && target(x) == id
                && !redacted(x["event_id"].as_str().unwrap_or_default())
        }) {
            let key = r["content"]["m.relates_to"]["key"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let who = r["sender"].as_str().unwrap_or_default().to_owned();
            match reactions.iter_mut().find(|(k, _)| *k == key) {
                Some((_, by)) => by.push(who),
                None => reactions.push((key, vec![who])),
            }
        }
        out.push(SeenMessage {
            id: id.to_owned(),
            sender: e["sender"].as_str().unwrap_or_default().to_owned(),
            fallback: content["body"].as_str().map(str::to_owned),
            html: content["formatted_body"].as_str().map(str::to_owned),
            poll,
            reactions,
            notified: e["content"]["msgtype"] != "m.notice",
            edited: edit.is_some(),
        });
    }
    out
}

/// The longest text a [`transcript`] writes out whole; a longer one is its first
/// [`TRANSCRIPT_HEAD`] characters and its length.
pub const TRANSCRIPT_TEXT: usize = 600;
/// See [`TRANSCRIPT_TEXT`].
pub const TRANSCRIPT_HEAD: usize = 120;

/// `view` ([`FakeHomeserver::person_view`]) as stable plain text for golden files: one block
/// per message — `[n] who (notified|silent)(, edited)`, then its text (a client's `body`)
/// indented, its poll, and its reactions. `bot` is written for the bot's id and `@name` for a
/// person's; event ids are left out.
pub fn transcript(view: &[SeenMessage], bot: &str) -> String {
    use std::fmt::Write as _;
    let who = |id: &str| {
        if id == bot {
            "bot".to_owned()
        } else {
            id.split(':').next().unwrap_or(id).to_owned()
        }
    };
    let text = |t: &str| {
        let n = t.chars().count();
        if n <= TRANSCRIPT_TEXT {
            t.to_owned()
        } else {
            let head: String = t.chars().take(TRANSCRIPT_HEAD).collect();
            format!("{head}… ({n} characters)")
        }
    };
    let mut out = String::new();
    for (i, m) in view.iter().enumerate() {
        let _ = writeln!(
            out,
            "[{}] {} ({}{})",
            i + 1,
            who(&m.sender),
            if m.notified { "notified" } else { "silent" },
            if m.edited { ", edited" } else { "" }
        );
        match &m.fallback {
            Some(body) => {
                for line in text(body).lines() {
                    let _ = writeln!(out, "    {line}");
                }
            }
            None => {
                let _ = writeln!(out, "    (no body: a client without polls shows nothing)");
            }
        }
        if let Some(p) = &m.poll {
            let _ = writeln!(
                out,
                "  poll (pick up to {}): {}",
                p.max_selections,
                p.question.replace('\n', "\n      ")
            );
            for (n, a) in p.answers.iter().enumerate() {
                let _ = writeln!(out, "    ({}) {a}", n + 1);
            }
            for (voter, picked) in &p.votes {
                let _ = writeln!(out, "  vote {}: {}", who(voter), picked.join(", "));
            }
            if let Some(end) = &p.ended {
                let _ = writeln!(out, "  ended: {}", end.replace('\n', " / "));
            }
        }
        for (key, by) in &m.reactions {
            let by: Vec<String> = by.iter().map(|b| who(b)).collect();
            let _ = writeln!(out, "  reaction {key} by {}", by.join(", "));
        }
    }
    out
}

/// Compares `actual` with the golden file `path` (`UPDATE_GOLDEN=1` writes it instead), showing
/// both on a difference.
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
    assert!(
        expected == actual,
        "{} differs (UPDATE_GOLDEN=1 rewrites it)\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

/// A fake Matrix homeserver on loopback, with one bot account (`@frogbot:fake.test`, password
/// [`BOT_PASSWORD`]). It stops when dropped.
#[derive(Debug)]
pub struct FakeHomeserver {
    url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeHomeserver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn error(status: StatusCode, errcode: &str, message: &str) -> Response {
    (status, Json(json!({"errcode": errcode, "error": message}))).into_response()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// What the fake shows of a poll: its answers `(id, text)`.
fn poll_answers(content: &Value) -> Vec<(String, String)> {
    if let Some(answers) = content["m.poll"]["answers"].as_array() {
        return answers
            .iter()
            .map(|a| {
                (
                    a["m.id"].as_str().unwrap_or_default().to_owned(),
                    a["m.text"][0]["body"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
            .collect();
    }
    content["org.matrix.msc3381.poll.start"]["answers"]
        .as_array()
        .map(|answers| {
            answers
                .iter()
                .map(|a| {
                    (
                        a["id"].as_str().unwrap_or_default().to_owned(),
                        a["org.matrix.msc1767.text"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The text a content shows: a stable poll's `m.text`, an unstable one's
/// `org.matrix.msc1767.text`, a message's `body`.
fn content_text(content: &Value) -> String {
    content["m.text"][0]["body"]
        .as_str()
        .or_else(|| content["org.matrix.msc1767.text"].as_str())
        .or_else(|| content["body"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn is_poll_start(t: &str) -> bool {
    t == "m.poll.start" || t == "org.matrix.msc3381.poll.start"
}

fn is_poll_end(t: &str) -> bool {
    t == "m.poll.end" || t == "org.matrix.msc3381.poll.end"
}

/// Checks an event the bot sends the way a homeserver (and clients) would refuse it: at most
/// `max_bytes` of JSON (`413 M_TOO_LARGE`, as Synapse answers an event over 65,536 bytes).
fn check_event(
    event_type: &str,
    content: &Value,
    event: &Value,
    max_bytes: usize,
) -> Result<(), (StatusCode, &'static str, String)> {
    let bytes = serde_json::to_vec(event).map(|v| v.len()).unwrap_or(0);
    if bytes > max_bytes {
        return Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            "M_TOO_LARGE",
            format!("event is {bytes} bytes, more than {max_bytes}"),
        ));
    }
    if is_poll_start(event_type) {
        let shown = match content.get("m.new_content") {
            Some(new) => poll_answers(new),
            None => poll_answers(content),
        };
        if shown.is_empty() || shown.len() > MAX_ANSWERS {
            return Err((
                StatusCode::BAD_REQUEST,
                "M_BAD_JSON",
                format!("a poll has 1 to {MAX_ANSWERS} answers, not {}", shown.len()),
            ));
        }
        let mut ids: Vec<&str> = shown.iter().map(|(id, _)| id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() != shown.len() || ids.contains(&"") {
            return Err((
                StatusCode::BAD_REQUEST,
                "M_BAD_JSON",
                "poll answer ids must be unique and not empty".into(),
            ));
        }
    }
    Ok(())
}

type St = State<Arc<Shared>>;

async fn versions() -> Json<Value> {
    Json(json!({
        "versions": ["r0.6.1", "v1.1", "v1.2", "v1.3", "v1.4", "v1.5", "v1.6", "v1.7", "v1.8", "v1.9", "v1.10", "v1.11"],
        "unstable_features": {}
    }))
}

async fn login(State(s): St, Json(body): Json<Value>) -> Response {
    let user = body["identifier"]["user"]
        .as_str()
        .or_else(|| body["user"].as_str())
        .unwrap_or_default();
    let known = user == s.bot.as_str() || user == s.bot.localpart();
    if !known || body["password"] != BOT_PASSWORD {
        return error(
            StatusCode::FORBIDDEN,
            "M_FORBIDDEN",
            "Invalid username or password",
        );
    }
    Json(json!({"user_id": s.bot, "access_token": TOKEN, "device_id": DEVICE})).into_response()
}

async fn whoami(State(s): St) -> Json<Value> {
    Json(json!({"user_id": s.bot, "device_id": DEVICE}))
}

async fn keys_upload() -> Json<Value> {
    Json(json!({"one_time_key_counts": {"signed_curve25519": 50}}))
}

async fn keys_query() -> Json<Value> {
    Json(json!({"device_keys": {}, "failures": {}}))
}

fn token(pos: u64) -> String {
    format!("s{pos}")
}

async fn sync(State(s): St, Query(q): Query<HashMap<String, String>>) -> Json<Value> {
    let since: Option<u64> = q
        .get("since")
        .and_then(|t| t.strip_prefix('s'))
        .and_then(|t| t.parse().ok());
    let timeout = q
        .get("timeout")
        .and_then(|t| t.parse().ok())
        .unwrap_or(0u64)
        .min(30_000);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout);
    loop {
        let changed = s.changed.notified();
        {
            let inner = s.lock();
            let pos = inner.events.len() as u64;
            let mut join = serde_json::Map::new();
            match since {
                // The first sync: the rooms and their state, no history.
                None => {
                    for room in inner.rooms.keys() {
                        let state: Vec<&Value> = inner
                            .events
                            .iter()
                            .filter(|e| &e.room == room && e.event.get("state_key").is_some())
                            .map(|e| &e.event)
                            .collect();
                        join.insert(
                            room.to_string(),
                            json!({"state": {"events": state},
                                   "timeline": {"events": [], "limited": false, "prev_batch": token(pos)}}),
                        );
                    }
                }
                Some(since) => {
                    for e in inner.events.iter().skip(since as usize) {
                        let entry = join.entry(e.room.to_string()).or_insert_with(|| {
                            json!({"timeline": {"events": [], "limited": false, "prev_batch": token(since)}})
                        });
                        if let Some(events) = entry["timeline"]["events"].as_array_mut() {
                            events.push(e.event.clone());
                        }
                    }
                }
            }
            if since.is_none() || !join.is_empty() || tokio::time::Instant::now() >= deadline {
                return Json(json!({"next_batch": token(pos), "rooms": {"join": join}}));
            }
        }
        let _ = tokio::time::timeout_at(deadline, changed).await;
    }
}

impl Shared {
    /// Appends an event to `room`; returns its id.
    fn append(&self, room: &RoomId, sender: &UserId, event_type: &str, mut extra: Value) -> String {
        let mut inner = self.lock();
        inner.next += 1;
        let id = format!("$fake{}", inner.next);
        let mut event = json!({
            "type": event_type,
            "event_id": id,
            "sender": sender,
            "origin_server_ts": now_ms(),
            "room_id": room,
            "unsigned": {},
        });
        if let (Some(map), Some(more)) = (event.as_object_mut(), extra.as_object_mut()) {
            map.append(more);
        }
        inner.events.push(Stored {
            room: room.to_owned(),
            event,
        });
        drop(inner);
        self.changed.notify_waiters();
        id
    }
}

async fn send(
    State(s): St,
    Path((room, event_type, txn)): Path<(String, String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let Ok(content) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "M_NOT_JSON", "content is not JSON");
    };
    let Ok(room) = RoomId::parse(&room) else {
        return error(StatusCode::BAD_REQUEST, "M_INVALID_PARAM", "bad room id");
    };
    let key = format!("{room}|{txn}");
    let fault = s.lock().faults.as_ref().and_then(|plan| plan.next());
    match fault {
        Some(Fault::ServerError) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "M_UNKNOWN",
                "Internal server error",
            );
        }
        Some(Fault::RateLimited(wait)) => {
            let body = json!({"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests",
                "retry_after_ms": wait.as_millis() as u64});
            return (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response();
        }
        Some(Fault::Timeout) => return reset(),
        Some(Fault::ResetAfterProcessing) | None => {}
    }
    let answer = send_event(&s, &room, &event_type, &key, content);
    if fault == Some(Fault::ResetAfterProcessing) {
        return reset();
    }
    answer
}

/// An answer cut off after its status line: the body fails, the connection is dropped.
fn reset() -> Response {
    let cut = futures::stream::once(async {
        Err::<axum::body::Bytes, _>(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "connection reset",
        ))
    });
    Response::new(axum::body::Body::from_stream(cut))
}

/// Stores the bot's event `content` under the transaction `key` (`room|txn`), or answers the
/// event a repeated transaction made.
fn send_event(s: &Shared, room: &RoomId, event_type: &str, key: &str, content: Value) -> Response {
    let room = room.to_owned();
    let event_type = event_type.to_owned();
    let key = key.to_owned();
    {
        let inner = s.lock();
        if !inner.rooms.contains_key(&room) {
            return error(StatusCode::FORBIDDEN, "M_FORBIDDEN", "not in the room");
        }
        if let Some(id) = inner.txns.get(&key) {
            return Json(json!({"event_id": id})).into_response();
        }
    }
    // Measured as Synapse measures a PDU: with its envelope (auth and previous events, hashes,
    // signatures, depth), about 700 bytes besides the content.
    let id = "$0000000000000000000000000000000000000000000";
    let preview = json!({"type": event_type, "event_id": id,
        "sender": s.bot, "origin_server_ts": now_ms(), "room_id": room, "content": content,
        "auth_events": [id, id, id, id], "prev_events": [id], "depth": 1_000_000,
        "hashes": {"sha256": "0".repeat(43)},
        "signatures": {SERVER_NAME: {"ed25519:a_AAAA": "0".repeat(86)}},
        "unsigned": {}});
    let max_bytes = s.lock().max_event_bytes.unwrap_or(MAX_EVENT_BYTES);
    if let Err((status, errcode, message)) = check_event(&event_type, &content, &preview, max_bytes)
    {
        if errcode == "M_TOO_LARGE" {
            s.lock().too_large += 1;
        }
        return error(status, errcode, &message);
    }
    if event_type == "m.reaction"
        && let Err((status, errcode, message)) = check_annotation(s, &room, &content)
    {
        return error(status, errcode, &message);
    }
    let bot = s.bot.clone();
    let id = s.append(&room, &bot, &event_type, json!({"content": content}));
    s.lock().txns.insert(key, id.clone());
    Json(json!({"event_id": id})).into_response()
}

/// Checks the bot's `m.reaction` as Synapse does: an `m.annotation` of an event the room has
/// (`400 Can't send relation to unknown event`), not the same key twice on one event by the same
/// sender unless the first was redacted (`400 M_DUPLICATE_ANNOTATION`).
fn check_annotation(
    s: &Shared,
    room: &RoomId,
    content: &Value,
) -> Result<(), (StatusCode, &'static str, String)> {
    let rel = &content["m.relates_to"];
    let (Some(target), Some(key)) = (rel["event_id"].as_str(), rel["key"].as_str()) else {
        return Err((
            StatusCode::BAD_REQUEST,
            "M_BAD_JSON",
            "a reaction needs m.relates_to.event_id and key".into(),
        ));
    };
    if rel["rel_type"] != "m.annotation" {
        return Err((
            StatusCode::BAD_REQUEST,
            "M_BAD_JSON",
            "a reaction is an m.annotation".into(),
        ));
    }
    let inner = s.lock();
    let in_room = || inner.events.iter().filter(|e| e.room == room);
    if !in_room().any(|e| e.event["event_id"] == target) {
        return Err((
            StatusCode::BAD_REQUEST,
            "M_UNKNOWN",
            "Can't send relation to unknown event".into(),
        ));
    }
    let redacted = |id: &Value| {
        in_room().any(|e| e.event["type"] == "m.room.redaction" && &e.event["redacts"] == id)
    };
    let twice = in_room().any(|e| {
        e.event["type"] == "m.reaction"
            && e.event["sender"] == s.bot.as_str()
            && e.event["content"]["m.relates_to"]["event_id"] == target
            && e.event["content"]["m.relates_to"]["key"] == key
            && !redacted(&e.event["event_id"])
    });
    if twice {
        return Err((
            StatusCode::BAD_REQUEST,
            "M_DUPLICATE_ANNOTATION",
            "Can't send same reaction twice".into(),
        ));
    }
    Ok(())
}

/// `PUT /rooms/{room}/typing/{user}` with `{"typing": true, "timeout": ms}` or
/// `{"typing": false}`: only for the bot itself, in a room it is in.
async fn typing(
    State(s): St,
    Path((room, user)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "M_NOT_JSON", "content is not JSON");
    };
    let Ok(room) = RoomId::parse(&room) else {
        return error(StatusCode::BAD_REQUEST, "M_INVALID_PARAM", "bad room id");
    };
    if user != s.bot.as_str() {
        return error(
            StatusCode::FORBIDDEN,
            "M_FORBIDDEN",
            "Cannot set another user's typing state",
        );
    }
    let Some(on) = body["typing"].as_bool() else {
        return error(StatusCode::BAD_REQUEST, "M_BAD_JSON", "typing is required");
    };
    if on && body["timeout"].as_u64().is_none() {
        return error(StatusCode::BAD_REQUEST, "M_BAD_JSON", "timeout is required");
    }
    let mut inner = s.lock();
    if !inner.rooms.contains_key(&room) {
        return error(StatusCode::FORBIDDEN, "M_FORBIDDEN", "not in the room");
    }
    let at = inner.events.len();
    inner.typing.push((room, at, body));
    drop(inner);
    s.changed.notify_waiters();
    Json(json!({})).into_response()
}

async fn redact(
    State(s): St,
    Path((room, event, _txn)): Path<(String, String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let content = serde_json::from_slice::<Value>(&body).unwrap_or_else(|_| json!({}));
    let Ok(room) = RoomId::parse(&room) else {
        return error(StatusCode::BAD_REQUEST, "M_INVALID_PARAM", "bad room id");
    };
    {
        let inner = s.lock();
        if !inner.rooms.contains_key(&room) {
            return error(StatusCode::FORBIDDEN, "M_FORBIDDEN", "not in the room");
        }
        if inner.refuse_redactions {
            return error(
                StatusCode::FORBIDDEN,
                "M_FORBIDDEN",
                "You don't have permission to redact events",
            );
        }
    }
    let bot = s.bot.clone();
    let id = s.append(
        &room,
        &bot,
        "m.room.redaction",
        json!({"redacts": event, "content": content}),
    );
    Json(json!({"event_id": id})).into_response()
}

async fn state_event(s: &Shared, room: &str, event_type: &str, key: &str) -> Response {
    let inner = s.lock();
    let found = inner.events.iter().rev().find(|e| {
        e.room.as_str() == room && e.event["type"] == event_type && e.event["state_key"] == key
    });
    match found {
        Some(e) => Json(e.event["content"].clone()).into_response(),
        None => error(StatusCode::NOT_FOUND, "M_NOT_FOUND", "Event not found."),
    }
}

async fn state_keyed(
    State(s): St,
    Path((room, t, key)): Path<(String, String, String)>,
) -> Response {
    state_event(&s, &room, &t, &key).await
}

async fn state_empty(State(s): St, Path((room, t)): Path<(String, String)>) -> Response {
    state_event(&s, &room, &t, "").await
}

async fn members(State(s): St, Path(room): Path<String>) -> Response {
    let inner = s.lock();
    if inner.failing_members.iter().any(|r| r.as_str() == room) {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "M_UNKNOWN",
            "Internal server error",
        );
    }
    let chunk: Vec<Value> = inner
        .events
        .iter()
        .filter(|e| e.room.as_str() == room && e.event["type"] == "m.room.member")
        .map(|e| e.event.clone())
        .collect();
    Json(json!({"chunk": chunk})).into_response()
}

async fn messages(Path(_room): Path<String>, Query(q): Query<HashMap<String, String>>) -> Response {
    // Syncs are never `limited` here: there is no gap to fill.
    let from = q.get("from").cloned().unwrap_or_default();
    Json(json!({"chunk": [], "start": from})).into_response()
}

async fn event(State(s): St, Path((room, id)): Path<(String, String)>) -> Response {
    let inner = s.lock();
    match inner
        .events
        .iter()
        .find(|e| e.room.as_str() == room && e.event["event_id"] == id.as_str())
    {
        Some(e) => Json(e.event.clone()).into_response(),
        None => error(StatusCode::NOT_FOUND, "M_NOT_FOUND", "Event not found."),
    }
}

/// `GET /_matrix/client/v1/rooms/{room}/relations/{event}/{relType}`: the events of `room` whose
/// `m.relates_to` has that `rel_type` and `event_id`, newest first (`dir=b`, the default) or oldest
/// first (`dir=f`), at most `limit` (default 5 here; no pagination tokens).
async fn relations(
    State(s): St,
    Path((room, id, rel_type)): Path<(String, String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let inner = s.lock();
    // A redacted event loses its relation (its content is gone).
    let redacted = |id: &Value| {
        inner.events.iter().any(|e| {
            e.room.as_str() == room
                && e.event["type"] == "m.room.redaction"
                && &e.event["redacts"] == id
        })
    };
    let mut chunk: Vec<Value> = inner
        .events
        .iter()
        .filter(|e| {
            e.room.as_str() == room
                && e.event["content"]["m.relates_to"]["rel_type"] == rel_type.as_str()
                && e.event["content"]["m.relates_to"]["event_id"] == id.as_str()
                && !redacted(&e.event["event_id"])
        })
        .map(|e| e.event.clone())
        .collect();
    if q.get("dir").map(String::as_str) != Some("f") {
        chunk.reverse();
    }
    let limit = q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(5);
    chunk.truncate(limit);
    Json(json!({"chunk": chunk})).into_response()
}

/// The largest upload the fake takes (Synapse's default `max_upload_size` is 50M).
pub const MAX_UPLOAD_BYTES: usize = 50 * 1024 * 1024;

/// `POST /_matrix/media/v3/upload` (the body is the file, `Content-Type` its type):
/// `{"content_uri": "mxc://fake.test/…"}`.
async fn upload(State(s): St, headers: axum::http::HeaderMap, body: axum::body::Bytes) -> Response {
    if body.len() > MAX_UPLOAD_BYTES {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "M_TOO_LARGE",
            "Upload request body is too large",
        );
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/octet-stream")
        .to_owned();
    let mut inner = s.lock();
    let uri = format!("mxc://{SERVER_NAME}/media{}", inner.uploads.len() + 1);
    inner.uploads.push((uri.clone(), content_type, body.len()));
    Json(json!({"content_uri": uri})).into_response()
}

/// A 1×1 PNG.
pub const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// `GET /_test/images/{name}`: the web server an agent's image URLs point at in tests. A name
/// ending in `.png` is [`PNG`]; `page.html` is no image; `huge.png` is larger than the adapter
/// fetches; anything else is `404`.
async fn image(Path(name): Path<String>) -> Response {
    match name.as_str() {
        "page.html" => ([("content-type", "text/html")], "<p>no</p>").into_response(),
        "huge.png" => (
            [("content-type", "image/png")],
            vec![0u8; crate::client::MAX_IMAGE_BYTES + 1],
        )
            .into_response(),
        n if n.ends_with(".png") => ([("content-type", "image/png")], PNG).into_response(),
        _ => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

/// `PUT /rooms/{room}/state/{type}/{key}`: the bot sets room state (here: any type, as the
/// room's creator may), stored as a state event.
async fn put_state(s: &Shared, room: &str, event_type: &str, key: &str, body: &[u8]) -> Response {
    let Ok(content) = serde_json::from_slice::<Value>(body) else {
        return error(StatusCode::BAD_REQUEST, "M_NOT_JSON", "content is not JSON");
    };
    let Ok(room) = RoomId::parse(room) else {
        return error(StatusCode::BAD_REQUEST, "M_INVALID_PARAM", "bad room id");
    };
    if !s.lock().rooms.contains_key(&room) {
        return error(StatusCode::FORBIDDEN, "M_FORBIDDEN", "not in the room");
    }
    if event_type == "m.room.pinned_events"
        && !content["pinned"]
            .as_array()
            .is_some_and(|a| a.iter().all(Value::is_string))
    {
        return error(
            StatusCode::BAD_REQUEST,
            "M_BAD_JSON",
            "pinned must be a list of event ids",
        );
    }
    let bot = s.bot.clone();
    let id = s.append(
        &room,
        &bot,
        event_type,
        json!({"state_key": key, "content": content}),
    );
    Json(json!({"event_id": id})).into_response()
}

async fn put_state_keyed(
    State(s): St,
    Path((room, t, key)): Path<(String, String, String)>,
    body: axum::body::Bytes,
) -> Response {
    put_state(&s, &room, &t, &key, &body).await
}

async fn put_state_empty(
    State(s): St,
    Path((room, t)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    put_state(&s, &room, &t, "", &body).await
}

async fn join(State(s): St, Path(room): Path<String>) -> Response {
    match RoomId::parse(&room) {
        Ok(r) if s.lock().rooms.contains_key(&r) => Json(json!({"room_id": r})).into_response(),
        _ => error(StatusCode::NOT_FOUND, "M_NOT_FOUND", "No such room"),
    }
}

async fn fallback(State(s): St, uri: axum::http::Uri) -> Response {
    s.lock().unknown.push(uri.path().to_owned());
    error(
        StatusCode::NOT_FOUND,
        "M_UNRECOGNIZED",
        "Unrecognized request",
    )
}

impl FakeHomeserver {
    /// Starts a fake homeserver on a free loopback port.
    pub async fn start() -> FakeHomeserver {
        let bot = OwnedUserId::try_from(format!("@frogbot:{SERVER_NAME}")).expect("a user id");
        let shared = Arc::new(Shared {
            bot,
            inner: Mutex::new(Inner::default()),
            changed: Notify::new(),
        });
        let rooms = "/_matrix/client/v3/rooms/{room}";
        let app = axum::Router::new()
            .route("/_matrix/client/versions", get(versions))
            .route("/_matrix/client/v3/login", post(login))
            .route("/_matrix/client/v3/account/whoami", get(whoami))
            .route("/_matrix/client/v3/sync", get(sync))
            .route("/_matrix/client/v3/keys/upload", post(keys_upload))
            .route("/_matrix/client/v3/keys/query", post(keys_query))
            .route("/_matrix/client/v3/join/{room}", post(join))
            .route(&format!("{rooms}/join"), post(join))
            .route(&format!("{rooms}/send/{{type}}/{{txn}}"), put(send))
            .route(&format!("{rooms}/redact/{{event}}/{{txn}}"), put(redact))
            .route(&format!("{rooms}/typing/{{user}}"), put(typing))
            .route(
                &format!("{rooms}/state/{{type}}/{{key}}"),
                get(state_keyed).put(put_state_keyed),
            )
            .route(
                &format!("{rooms}/state/{{type}}/"),
                get(state_empty).put(put_state_empty),
            )
            .route(
                &format!("{rooms}/state/{{type}}"),
                get(state_empty).put(put_state_empty),
            )
            .route("/_matrix/media/v3/upload", post(upload))
            .route("/_test/images/{name}", get(image))
            .route(&format!("{rooms}/members"), get(members))
            .route(&format!("{rooms}/messages"), get(messages))
            .route(&format!("{rooms}/event/{{event}}"), get(event))
            .route(
                "/_matrix/client/v1/rooms/{room}/relations/{event}/{rel_type}",
                get(relations),
            )
            .fallback(fallback)
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeHomeserver { url, shared, task }
    }

    /// The base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bot's user id (`@frogbot:fake.test`; password [`BOT_PASSWORD`]).
    pub fn bot(&self) -> &UserId {
        &self.shared.bot
    }

    /// From now on each `PUT …/send/{type}/{txn}` asks `plan` whether to fail (see the module).
    pub fn inject_faults(&self, plan: Arc<FaultPlan>) {
        self.shared.lock().faults = Some(plan);
    }

    /// From now on events over `bytes` of JSON are refused with `413 M_TOO_LARGE` (as an
    /// encrypted room, whose ciphertext is larger, reaches Synapse's limit sooner); `None`:
    /// [`MAX_EVENT_BYTES`] again.
    pub fn set_max_event_bytes(&self, bytes: Option<usize>) {
        self.shared.lock().max_event_bytes = bytes;
    }

    /// How many of the bot's sends were refused as too large (`413 M_TOO_LARGE`).
    pub fn refused_too_large(&self) -> usize {
        self.shared.lock().too_large
    }

    /// From now on `/members` of `room` fails with `500` (`fail` false: it works again).
    pub fn fail_members(&self, room: &RoomId, fail: bool) {
        let mut inner = self.shared.lock();
        inner.failing_members.retain(|r| r != room);
        if fail {
            inner.failing_members.push(room.to_owned());
        }
    }

    /// A room where the bot and `people` are joined (a room of two is a DM).
    pub fn create_room(&self, people: &[&UserId]) -> OwnedRoomId {
        let room = {
            let mut inner = self.shared.lock();
            inner.next += 1;
            let room = OwnedRoomId::try_from(format!("!room{}:{SERVER_NAME}", inner.next))
                .expect("a room id");
            let mut members = vec![self.shared.bot.clone()];
            members.extend(people.iter().map(|p| (*p).to_owned()));
            inner.rooms.insert(room.clone(), members);
            room
        };
        let bot = self.shared.bot.clone();
        self.shared.append(
            &room,
            &bot,
            "m.room.create",
            json!({"state_key": "", "content": {"creator": bot, "room_version": "10"}}),
        );
        for member in std::iter::once(bot.as_ref()).chain(people.iter().copied()) {
            self.shared.append(
                &room,
                member,
                "m.room.member",
                json!({"state_key": member, "content": {"membership": "join"}}),
            );
        }
        room
    }

    /// Sets `user`'s display name in `room` (a new `m.room.member` join event with `displayname`).
    pub fn set_display_name(&self, room: &RoomId, user: &UserId, name: &str) {
        self.shared.append(
            room,
            user,
            "m.room.member",
            json!({"state_key": user, "content": {"membership": "join", "displayname": name}}),
        );
    }

    /// Injects an event `sender` sends to `room` (the bot receives it through `/sync`); returns
    /// its id.
    pub fn inject(
        &self,
        room: &RoomId,
        sender: &UserId,
        event_type: &str,
        content: Value,
    ) -> OwnedEventId {
        let id = self
            .shared
            .append(room, sender, event_type, json!({"content": content}));
        OwnedEventId::try_from(id).expect("an event id")
    }

    /// The event `id` as sync delivers it.
    pub fn event(&self, id: &str) -> Option<Value> {
        self.shared
            .lock()
            .events
            .iter()
            .find(|e| e.event["event_id"] == id)
            .map(|e| e.event.clone())
    }

    /// Every event of `room`, in order.
    pub fn events(&self, room: &RoomId) -> Vec<Value> {
        self.shared
            .lock()
            .events
            .iter()
            .filter(|e| e.room == room)
            .map(|e| e.event.clone())
            .collect()
    }

    /// The uploads to the media repository so far: `mxc://` URI, content type, size.
    pub fn uploads(&self) -> Vec<(String, String, usize)> {
        self.shared.lock().uploads.clone()
    }

    /// The URL of a test image named `name` this fake serves (see the `/_test/images` route:
    /// `*.png` an image, `page.html` no image, `huge.png` too large, anything else `404`).
    pub fn image_url(&self, name: &str) -> String {
        format!("{}/_test/images/{name}", self.url)
    }

    /// The room's pinned events now (its last `m.room.pinned_events` state).
    pub fn pinned(&self, room: &RoomId) -> Vec<String> {
        self.shared
            .lock()
            .events
            .iter()
            .rev()
            .find(|e| e.room == room && e.event["type"] == "m.room.pinned_events")
            .and_then(|e| e.event["content"]["pinned"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    }

    /// Whether the event `id` was redacted.
    pub fn redacted(&self, id: &str) -> bool {
        self.shared
            .lock()
            .events
            .iter()
            .any(|e| e.event["type"] == "m.room.redaction" && e.event["redacts"] == id)
    }

    /// Every message-like event the bot sent (through the API), in order.
    pub fn sent(&self) -> Vec<Value> {
        let bot = self.shared.bot.as_str();
        self.shared
            .lock()
            .events
            .iter()
            .filter(|e| e.event["sender"] == bot && e.event.get("state_key").is_none())
            .map(|e| e.event.clone())
            .collect()
    }

    /// The answers `(id, text)` the poll `message_id` (`room|event`) shows now: its latest edit's,
    /// none once it is ended or redacted, none for a message that is no poll.
    pub fn open_answers(&self, message_id: &str) -> Vec<(String, String)> {
        let Ok((room, poll)) = split_message_id(message_id) else {
            return Vec::new();
        };
        let inner = self.shared.lock();
        let in_room: Vec<&Value> = inner
            .events
            .iter()
            .filter(|e| e.room == room)
            .map(|e| &e.event)
            .collect();
        let Some(start) = in_room.iter().find(|e| {
            e["event_id"] == poll.as_str() && is_poll_start(e["type"].as_str().unwrap_or(""))
        }) else {
            return Vec::new();
        };
        let relates = |e: &Value, rel: &str| {
            e["content"]["m.relates_to"]["rel_type"] == rel
                && e["content"]["m.relates_to"]["event_id"] == poll.as_str()
        };
        let closed = in_room.iter().any(|e| {
            (is_poll_end(e["type"].as_str().unwrap_or("")) && relates(e, "m.reference"))
                || (e["type"] == "m.room.redaction" && e["redacts"] == poll.as_str())
        });
        if closed {
            return Vec::new();
        }
        match in_room
            .iter()
            .rev()
            .find(|e| e["sender"] == start["sender"] && relates(e, "m.replace"))
        {
            Some(edit) => poll_answers(&edit["content"]["m.new_content"]),
            None => poll_answers(&start["content"]),
        }
    }

    /// The text message `message_id` (`room|event`, a poll or a plain message) shows now: its
    /// latest edit's (by its sender), else its own.
    pub fn shown_text(&self, message_id: &str) -> String {
        let Ok((room, event)) = split_message_id(message_id) else {
            return String::new();
        };
        let inner = self.shared.lock();
        let in_room: Vec<&Value> = inner
            .events
            .iter()
            .filter(|e| e.room == room)
            .map(|e| &e.event)
            .collect();
        let Some(original) = in_room.iter().find(|e| e["event_id"] == event.as_str()) else {
            return String::new();
        };
        let edit = in_room.iter().rev().find(|e| {
            e["sender"] == original["sender"]
                && e["content"]["m.relates_to"]["rel_type"] == "m.replace"
                && e["content"]["m.relates_to"]["event_id"] == event.as_str()
        });
        match edit {
            Some(edit) => content_text(&edit["content"]["m.new_content"]),
            None => content_text(&original["content"]),
        }
    }

    /// What a person sees of the thread `thread_id` (`room|root`) in a client, in order: the
    /// root and every message in the thread (not edits, reactions, poll responses or ends, which
    /// change what a message shows), each after its latest edit by its sender (`m.replace`
    /// applied), with its reactions (not redacted), its poll (question, answers, whether ended,
    /// each person's last selection) and whether it notified (a new message does, unless it is
    /// an `m.notice`; an edit does not). `fallback` is what a client that renders no poll shows:
    /// the `body`.
    pub fn person_view(&self, thread_id: &str) -> Vec<SeenMessage> {
        let Ok((room, root)) = split_message_id(thread_id) else {
            return Vec::new();
        };
        person_view_of(&self.events(&room), root.as_str())
    }

    /// The keys of the bot's reactions on the message `message_id` (`room|event`) that are not
    /// redacted, in the order it sent them.
    pub fn bot_reactions(&self, message_id: &str) -> Vec<String> {
        let Ok((room, event)) = split_message_id(message_id) else {
            return Vec::new();
        };
        let inner = self.shared.lock();
        let in_room = || inner.events.iter().filter(|e| e.room == room);
        in_room()
            .filter(|e| {
                e.event["type"] == "m.reaction"
                    && e.event["sender"] == self.shared.bot.as_str()
                    && e.event["content"]["m.relates_to"]["event_id"] == event.as_str()
                    && !in_room().any(|r| {
                        r.event["type"] == "m.room.redaction"
                            && r.event["redacts"] == e.event["event_id"]
                    })
            })
            .filter_map(|e| e.event["content"]["m.relates_to"]["key"].as_str())
            .map(str::to_owned)
            .collect()
    }

    /// The bot's typing notices in `room`, in order: each with how many events of the whole
    /// server came before it, and its body (`{"typing": true, "timeout": ms}`).
    pub fn typing(&self, room: &RoomId) -> Vec<(usize, Value)> {
        self.shared
            .lock()
            .typing
            .iter()
            .filter(|(r, _, _)| r == room)
            .map(|(_, at, body)| (*at, body.clone()))
            .collect()
    }

    /// From now on redactions are refused with `403 M_FORBIDDEN` (`true`), or accepted again.
    pub fn refuse_redactions(&self, refuse: bool) {
        self.shared.lock().refuse_redactions = refuse;
    }

    /// Paths the bot called that the fake does not serve.
    pub fn unknown_calls(&self) -> Vec<String> {
        self.shared.lock().unknown.clone()
    }

    /// Waits (up to `secs`) for an event of `room` matching `pred`; panics with the room's events
    /// otherwise.
    pub async fn wait_for(
        &self,
        room: &RoomId,
        secs: u64,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let changed = self.shared.changed.notified();
            if let Some(e) = self.events(room).into_iter().find(|e| pred(e)) {
                return e;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "timed out waiting for {what}; the room has {:#?}; unknown calls {:?}",
                    self.events(room),
                    self.unknown_calls()
                );
            }
            let _ = tokio::time::timeout_at(deadline, changed).await;
        }
    }

    /// A matrix-sdk client of the bot on this server (a session restored, not a login), synced
    /// once so it knows its rooms.
    pub async fn client(&self) -> Client {
        let client = Client::builder()
            .homeserver_url(&self.url)
            .request_config(crate::client::request_config())
            .build()
            .await
            .expect("a client");
        client
            .restore_session(MatrixSession {
                meta: SessionMeta {
                    user_id: self.shared.bot.clone(),
                    device_id: DEVICE.into(),
                },
                tokens: SessionTokens {
                    access_token: TOKEN.into(),
                    refresh_token: None,
                },
            })
            .await
            .expect("a session");
        client
            .sync_once(SyncSettings::default())
            .await
            .expect("the first sync");
        client
    }
}

/// The Matrix user a [`PlatformUser`] of the conformance suite is on the fake: its id when it is a
/// Matrix user id, else `@{id in lower case}:fake.test`.
pub fn matrix_user(user: &PlatformUser) -> OwnedUserId {
    UserId::parse(user.id.as_str())
        .or_else(|_| UserId::parse(format!("@{}:{SERVER_NAME}", user.id.to_lowercase())))
        .expect("a user id")
}

/// The `ChannelQuestions` conformance harness: [`MatrixQuestions`] over matrix-sdk's `Client`
/// talking to a [`FakeHomeserver`], one room with the suite's participant; interactions are the
/// events the fake delivers, converted by [`crate::convert::classify`].
#[derive(Debug)]
pub struct MatrixHarness {
    fake: FakeHomeserver,
    room: OwnedRoomId,
    hooks: MatrixQuestions<Client>,
}

/// A fresh harness (its own fake homeserver).
pub async fn conformance_harness() -> MatrixHarness {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeHomeserver::start().await;
    let person = matrix_user(&frogbot_model::conformance::participant());
    let room = fake.create_room(&[&person]);
    let hooks = MatrixQuestions::new(fake.client().await);
    MatrixHarness { fake, room, hooks }
}

impl MatrixHarness {
    /// The fake homeserver.
    pub fn fake(&self) -> &FakeHomeserver {
        &self.fake
    }

    /// The harness's room.
    pub fn room(&self) -> &RoomId {
        &self.room
    }

    /// The event `id` of the fake converted as the adapter's sync loop converts it.
    fn deliver(&self, room: &RoomId, id: &OwnedEventId) -> Interaction {
        let event = self.fake.event(id.as_str()).expect("the injected event");
        let raw: Raw<AnySyncTimelineEvent> =
            Raw::from_json(serde_json::value::to_raw_value(&event).expect("JSON"));
        match classify(&raw, room, self.fake.bot()) {
            Ok(Some(Incoming::Action(interaction))) => interaction,
            Ok(Some(Incoming::Message(m))) => Interaction::Message { message: m.message },
            Ok(Some(other @ Incoming::Event(_))) => {
                panic!("an event click, not an interaction: {other:?}")
            }
            other => panic!("the event {event} converts to no interaction: {other:?}"),
        }
    }
}

#[async_trait]
impl Harness for MatrixHarness {
    fn hooks(&self) -> &dyn ChannelQuestions {
        &self.hooks
    }

    async fn thread(&self) -> Thread {
        let person = matrix_user(&frogbot_model::conformance::participant());
        let root = self.fake.inject(
            &self.room,
            &person,
            "m.room.message",
            json!({"msgtype": "m.text", "body": "a conversation with the bot"}),
        );
        Thread {
            id: message_id(&self.room, &root),
            platform: PLATFORM.into(),
            chat_id: format!("matrix-{root}"),
        }
    }

    fn limits(&self) -> Limits {
        Limits {
            questions: 5,
            options: MAX_ANSWERS,
            label: ANSWER_CHARS,
        }
    }

    async fn choose(
        &self,
        thread: &Thread,
        call: &QuestionCall,
        record: &QuestionRecord,
        q: usize,
        options: &[usize],
        user: &PlatformUser,
    ) -> Vec<Interaction> {
        let Some(message) = record
            .messages
            .iter()
            .find(|m| m.question == Some(q))
            .or_else(|| record.messages.first().filter(|_| q == 0))
        else {
            return Vec::new();
        };
        let shown = self.fake.open_answers(&message.id);
        let ids: Vec<&str> = options
            .iter()
            .filter_map(|&o| shown.get(o).map(|(id, _)| id.as_str()))
            .collect();
        if ids.is_empty() {
            return Vec::new();
        }
        let (room, poll) = split_message_id(&message.id).expect("a message id");
        let response = self.fake.inject(
            &room,
            &matrix_user(user),
            "m.poll.response",
            json!({"m.selections": ids,
                   "m.relates_to": {"rel_type": "m.reference", "event_id": poll}}),
        );
        let mut out = vec![self.deliver(&room, &response)];
        // A multiple-choice poll takes the selection when the person says done.
        if call.input.questions.get(q).is_some_and(|i| i.multiple) {
            out.push(self.reply(thread, crate::render::DONE_REPLY, user).await);
        }
        out
    }

    async fn reply(&self, thread: &Thread, text: &str, user: &PlatformUser) -> Interaction {
        let (room, root) = split_message_id(&thread.id).expect("a thread id");
        let reply = self.fake.inject(
            &room,
            &matrix_user(user),
            "m.room.message",
            json!({"msgtype": "m.text", "body": text,
                   "m.relates_to": {"rel_type": "m.thread", "event_id": root,
                                    "is_falling_back": true, "m.in_reply_to": {"event_id": root}}}),
        );
        self.deliver(&room, &reply)
    }

    async fn skip(
        &self,
        thread: &Thread,
        _call: &QuestionCall,
        record: &QuestionRecord,
        user: &PlatformUser,
    ) -> Interaction {
        // Polls have no buttons: the question says to reply `skip` in the thread.
        let current = record.current().expect("a question message");
        let shown = self.fake.shown_text(&current.id);
        assert!(
            shown.contains("Reply skip to skip"),
            "the question says how to skip it: {shown:?}"
        );
        self.reply(thread, "skip", user).await
    }

    async fn controls(&self, message_id: &str) -> usize {
        self.fake.open_answers(message_id).len()
    }

    async fn shown_text(&self, message_id: &str) -> String {
        self.fake.shown_text(message_id)
    }

    async fn notices(&self, user: &PlatformUser) -> Vec<String> {
        let user = matrix_user(user);
        self.fake
            .sent()
            .into_iter()
            .filter(|e| {
                e["type"] == "m.room.message"
                    && e["content"]["m.mentions"]["user_ids"]
                        .as_array()
                        .is_some_and(|ids| ids.iter().any(|u| u == user.as_str()))
            })
            .map(|e| e["content"]["body"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

/// A real Synapse homeserver on loopback, shared by the tests of one test binary, and people
/// driven with a second matrix-sdk client.
///
/// Synapse comes from the venv `scripts/synapse.sh` installs
/// (`${FROGBOT_SYNAPSE_VENV:-$HOME/.cache/frogbot-synapse-venv}`). Without it the tests print why
/// and return early, unless `FROGBOT_REQUIRE_SYNAPSE=1` (then they fail). Synapse is started once
/// per test binary on a free port with a generated config (SQLite, no TLS, registration only with
/// the shared secret, rate limits raised) and stopped when the test process exits: it runs under a
/// small shell guard that kills it as soon as the test process closes the guard's stdin.
pub mod synapse {
    use std::path::PathBuf;
    use std::process::{Child, Command, Stdio};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use hmac::{Hmac, Mac};
    use matrix_sdk::authentication::matrix::MatrixSession;
    use matrix_sdk::config::SyncSettings;
    use matrix_sdk::ruma::api::client::filter::FilterDefinition;
    use matrix_sdk::ruma::api::client::sync::sync_events::v3::Filter;
    use matrix_sdk::ruma::events::AnySyncTimelineEvent;
    use matrix_sdk::ruma::serde::Raw;
    use matrix_sdk::ruma::{OwnedDeviceId, OwnedRoomId, OwnedUserId, RoomId};
    use matrix_sdk::{Client, Room, SessionMeta, SessionTokens};
    use serde_json::{Value, json};
    use tokio::sync::{Notify, OnceCell};

    const SECRET: &str = "frogbot-test-shared-secret";

    /// A running Synapse.
    #[derive(Debug)]
    pub struct Synapse {
        /// `http://127.0.0.1:PORT`.
        pub url: String,
        /// Its server name.
        pub server_name: String,
        /// How long it took to answer `/_matrix/client/versions`.
        pub start_time: Duration,
        _dir: tempfile::TempDir,
        _guard: Mutex<Child>,
    }

    static SYNAPSE: OnceCell<Option<Arc<Synapse>>> = OnceCell::const_new();
    static COUNTER: AtomicUsize = AtomicUsize::new(0);

    fn venv() -> PathBuf {
        match std::env::var_os("FROGBOT_SYNAPSE_VENV") {
            Some(v) => PathBuf::from(v),
            None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/frogbot-synapse-venv"),
        }
    }

    /// A free loopback port.
    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    fn config(dir: &std::path::Path, port: u16) -> String {
        let d = dir.display();
        let rate = "{per_second: 10000, burst_count: 100000}";
        format!(
            r#"server_name: "localhost"
pid_file: "{d}/homeserver.pid"
public_baseurl: "http://127.0.0.1:{port}/"
listeners:
  - port: {port}
    bind_addresses: ["127.0.0.1"]
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: "{d}/homeserver.db"
log_config: "{d}/log.yaml"
media_store_path: "{d}/media"
signing_key_path: "{d}/signing.key"
registration_shared_secret: "{SECRET}"
enable_registration: false
report_stats: false
macaroon_secret_key: "frogbot-test-macaroon"
form_secret: "frogbot-test-form"
trusted_key_servers: []
suppress_key_server_warning: true
presence:
  enabled: false
url_preview_enabled: false
rc_message: {rate}
rc_registration: {rate}
rc_room_creation: {rate}
rc_login:
  address: {rate}
  account: {rate}
  failed_attempts: {rate}
rc_joins:
  local: {rate}
  remote: {rate}
rc_joins_per_room: {rate}
rc_invites:
  per_room: {rate}
  per_user: {rate}
  per_issuer: {rate}
rc_3pid_validation: {rate}
rc_admin_redaction: {rate}
rc_key_requests: {rate}
"#
        )
    }

    const LOG_CONFIG: &str = r#"version: 1
formatters:
  precise:
    format: '%(asctime)s - %(name)s - %(lineno)d - %(levelname)s - %(message)s'
handlers:
  file:
    class: logging.FileHandler
    formatter: precise
    filename: LOGFILE
root:
  level: WARNING
  handlers: [file]
disable_existing_loggers: false
"#;

    fn required() -> bool {
        std::env::var("FROGBOT_REQUIRE_SYNAPSE").is_ok_and(|v| v == "1")
    }

    /// The shared Synapse, or `None` (with a message) when it is not installed and not required.
    pub async fn synapse() -> Option<Arc<Synapse>> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        SYNAPSE
            .get_or_init(|| async {
                let python = venv().join("bin/python");
                if !python.exists() {
                    let msg = format!(
                        "Synapse is not installed ({} missing): run `bash scripts/synapse.sh`",
                        python.display()
                    );
                    if required() {
                        panic!("{msg} (FROGBOT_REQUIRE_SYNAPSE=1)");
                    }
                    eprintln!("skipping the Synapse tests: {msg}");
                    return None;
                }
                Some(Arc::new(start(&python).await))
            })
            .await
            .clone()
    }

    async fn start(python: &std::path::Path) -> Synapse {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let cfg = dir.path().join("homeserver.yaml");
        std::fs::write(&cfg, config(dir.path(), port)).unwrap();
        std::fs::write(
            dir.path().join("log.yaml"),
            LOG_CONFIG.replace(
                "LOGFILE",
                &dir.path().join("homeserver.log").display().to_string(),
            ),
        )
        .unwrap();
        let began = Instant::now();
        let keys = Command::new(python)
            .args(["-m", "synapse.app.homeserver", "-c"])
            .arg(&cfg)
            .arg("--generate-keys")
            .output()
            .unwrap();
        assert!(
            keys.status.success(),
            "synapse --generate-keys failed: {}",
            String::from_utf8_lossy(&keys.stderr)
        );
        // The guard: runs Synapse, and kills it when our end of its stdin closes (test exit).
        let guard = Command::new("sh")
            .arg("-c")
            .arg(r#""$0" -m synapse.app.homeserver -c "$1" >"$2" 2>&1 </dev/null & pid=$!; cat >/dev/null; kill "$pid"; wait "$pid"; rm -rf "$3""#)
            .arg(python)
            .arg(&cfg)
            .arg(dir.path().join("stdout.log"))
            // The static `Synapse` is never dropped: the guard removes its folder.
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(r) = http
                .get(format!("{url}/_matrix/client/versions"))
                .send()
                .await
                && r.status().is_success()
            {
                break;
            }
            if Instant::now() > deadline {
                let log =
                    std::fs::read_to_string(dir.path().join("stdout.log")).unwrap_or_default();
                panic!("Synapse did not start within 120 s:\n{log}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let start_time = began.elapsed();
        eprintln!("Synapse started at {url} in {start_time:?}");
        Synapse {
            url,
            server_name: "localhost".into(),
            start_time,
            _dir: dir,
            _guard: Mutex::new(guard),
        }
    }

    /// A registered account.
    #[derive(Clone, Debug)]
    pub struct Account {
        /// Its user id.
        pub user_id: OwnedUserId,
        /// Its password.
        pub password: String,
        /// An access token (of the registration's device).
        pub access_token: String,
        /// The registration's device.
        pub device_id: OwnedDeviceId,
    }

    impl Synapse {
        /// Registers a new user (`{prefix}{n}`) through the shared-secret admin API.
        pub async fn register(&self, prefix: &str) -> Account {
            let n = COUNTER.fetch_add(1, Ordering::SeqCst);
            let username = format!("{prefix}{n}_{}", std::process::id());
            let password = format!("pw-{username}");
            let http = reqwest::Client::new();
            let endpoint = format!("{}/_synapse/admin/v1/register", self.url);
            let nonce: Value = http
                .get(&endpoint)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let nonce = nonce["nonce"].as_str().unwrap().to_owned();
            let mut mac = Hmac::<sha1::Sha1>::new_from_slice(SECRET.as_bytes()).unwrap();
            mac.update(nonce.as_bytes());
            mac.update(b"\0");
            mac.update(username.as_bytes());
            mac.update(b"\0");
            mac.update(password.as_bytes());
            mac.update(b"\0notadmin");
            let mac = hex::encode(mac.finalize().into_bytes());
            let r: Value = http
                .post(&endpoint)
                .json(&json!({"nonce": nonce, "username": username, "password": password, "admin": false, "mac": mac}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            Account {
                user_id: OwnedUserId::try_from(r["user_id"].as_str().expect("registered")).unwrap(),
                password,
                access_token: r["access_token"].as_str().unwrap().to_owned(),
                device_id: r["device_id"].as_str().unwrap().into(),
            }
        }

        /// A person: a matrix-sdk client on `account`, syncing, recording every timeline event.
        pub async fn person(&self, account: &Account) -> Person {
            let client = Client::builder()
                .homeserver_url(&self.url)
                .build()
                .await
                .unwrap();
            client
                .restore_session(MatrixSession {
                    meta: SessionMeta {
                        user_id: account.user_id.clone(),
                        device_id: account.device_id.clone(),
                    },
                    tokens: SessionTokens {
                        access_token: account.access_token.clone(),
                        refresh_token: None,
                    },
                })
                .await
                .unwrap();
            client.sync_once(SyncSettings::default()).await.unwrap();
            let seen: Seen = Arc::default();
            let s = seen.clone();
            client.add_event_handler(move |raw: Raw<AnySyncTimelineEvent>, room: Room| {
                let s = s.clone();
                async move {
                    let v: Value = serde_json::from_str(raw.json().get()).unwrap();
                    s.0.lock().unwrap().push((room.room_id().to_owned(), v));
                    s.1.notify_waiters();
                }
            });
            let c = client.clone();
            // A large timeline limit: matrix-sdk's loop syncs at most once a second, and a sync's
            // default limit (10 events a room) would hide the rest of a burst from the recorder.
            let mut filter = FilterDefinition::default();
            filter.room.timeline.limit = Some(10_000u32.into());
            let task = tokio::spawn(async move {
                let _ = c
                    .sync(
                        SyncSettings::default()
                            .timeout(Duration::from_secs(5))
                            .filter(Filter::FilterDefinition(filter)),
                    )
                    .await;
            });
            Person {
                client,
                account: account.clone(),
                seen,
                _task: task,
            }
        }
    }

    type Seen = Arc<(Mutex<Vec<(OwnedRoomId, Value)>>, Notify)>;

    /// A test person.
    #[derive(Debug)]
    pub struct Person {
        /// The person's client.
        pub client: Client,
        /// The person's account.
        pub account: Account,
        seen: Seen,
        _task: tokio::task::JoinHandle<()>,
    }

    impl Drop for Person {
        fn drop(&mut self) {
            self._task.abort();
        }
    }

    impl Person {
        /// The person's user id.
        pub fn user_id(&self) -> &matrix_sdk::ruma::UserId {
            &self.account.user_id
        }

        /// Creates a room inviting `invite` (a DM flag is not set: rooms of two count as DMs anyway).
        pub async fn create_room(&self, invite: &[&OwnedUserId], encrypted: bool) -> OwnedRoomId {
            use matrix_sdk::ruma::api::client::room::create_room::v3::Request;
            let mut req = Request::new();
            req.invite = invite.iter().map(|u| (*u).clone()).collect();
            if encrypted {
                let ev = json!({"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}});
                req.initial_state = vec![Raw::from_json(
                    serde_json::value::to_raw_value(&ev).unwrap(),
                )];
            }
            let room = self.client.create_room(req).await.unwrap();
            room.room_id().to_owned()
        }

        /// Joins a room (after an invite).
        pub async fn join(&self, room: &RoomId) {
            self.client.join_room_by_id(room).await.unwrap();
        }

        /// A room the person is in.
        pub fn room(&self, room: &RoomId) -> Room {
            self.client
                .get_room(room)
                .expect("room known to the person")
        }

        /// Sends an event; returns its id.
        pub async fn send(&self, room: &RoomId, event_type: &str, content: Value) -> String {
            self.room(room)
                .send_raw(event_type, content)
                .await
                .unwrap()
                .response
                .event_id
                .to_string()
        }

        /// Waits (up to `secs`) until an event matching `pred` has been seen in `room`; returns it.
        pub async fn wait_for(
            &self,
            room: &RoomId,
            secs: u64,
            what: &str,
            pred: impl Fn(&Value) -> bool,
        ) -> Value {
            let deadline = Instant::now() + Duration::from_secs(secs);
            loop {
                let notified = self.seen.1.notified();
                // A copy: `pred` may look at `seen` itself.
                let events: Vec<Value> = self.seen(room, |_| true);
                if let Some(v) = events.into_iter().find(|v| pred(v)) {
                    return v;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    let all: Vec<Value> = self
                        .seen
                        .0
                        .lock()
                        .unwrap()
                        .iter()
                        .filter(|(r, _)| r == room)
                        .map(|(_, v)| v.clone())
                        .collect();
                    panic!("timed out waiting for {what}; seen in the room: {all:#?}");
                }
                let _ = tokio::time::timeout(left.min(Duration::from_millis(500)), notified).await;
            }
        }

        /// Every event seen in `room` matching `pred`.
        pub fn seen(&self, room: &RoomId, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
            self.seen
                .0
                .lock()
                .unwrap()
                .iter()
                .filter(|(r, v)| r == room && pred(v))
                .map(|(_, v)| v.clone())
                .collect()
        }
    }

    /// The event's thread root, if it is in a thread.
    pub fn thread_root(ev: &Value) -> Option<&str> {
        let rel = &ev["content"]["m.relates_to"];
        (rel["rel_type"] == "m.thread")
            .then(|| rel["event_id"].as_str())
            .flatten()
    }
}
