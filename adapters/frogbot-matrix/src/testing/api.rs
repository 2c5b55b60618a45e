//! The fake homeserver's client-server API: starting the fake, its routes with Matrix's limits
//! enforced (`/sync` aside), faults, and what a test reads back from it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use frogbot_model::faults::{Fault, FaultPlan};
use matrix_sdk::authentication::matrix::MatrixSession;
use matrix_sdk::config::SyncSettings;
use matrix_sdk::ruma::{OwnedRoomId, OwnedUserId, RoomId, UserId};
use matrix_sdk::{Client, SessionMeta, SessionTokens};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::push::sync;
use super::state::{FakeHomeserver, Inner, Shared, St, Stored};
use super::{BOT_PASSWORD, DEVICE, MAX_EVENT_BYTES, SERVER_NAME, TOKEN};
use crate::ids::split_message_id;
use crate::render::MAX_ANSWERS;

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
pub(super) fn poll_answers(content: &Value) -> Vec<(String, String)> {
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
pub(super) fn content_text(content: &Value) -> String {
    content["m.text"][0]["body"]
        .as_str()
        .or_else(|| content["org.matrix.msc1767.text"].as_str())
        .or_else(|| content["body"].as_str())
        .unwrap_or_default()
        .to_owned()
}

pub(super) fn is_poll_start(t: &str) -> bool {
    t == "m.poll.start" || t == "org.matrix.msc3381.poll.start"
}

pub(super) fn is_poll_end(t: &str) -> bool {
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

impl Shared {
    /// Appends an event to `room`; returns its id.
    pub(super) fn append(
        &self,
        room: &RoomId,
        sender: &UserId,
        event_type: &str,
        mut extra: Value,
    ) -> String {
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

/// `GET /_matrix/client/v1/media/config`: the upload limit, [`MAX_UPLOAD_BYTES`].
async fn media_config() -> Json<Value> {
    Json(json!({ "m.upload.size": MAX_UPLOAD_BYTES }))
}

/// `POST /_matrix/media/v3/upload` (the body is the file, `Content-Type` its type):
/// `{"content_uri": "mxc://fake.test/…"}`. As Synapse, a `Content-Length` over
/// [`MAX_UPLOAD_BYTES`] is refused (`413 M_TOO_LARGE`) before the body is read, and a body
/// shorter than its `Content-Length` is no file.
async fn upload(State(s): St, request: axum::extract::Request) -> Response {
    s.lock().upload_attempts += 1;
    let headers = request.headers().clone();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let too_large = || {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "M_TOO_LARGE",
            "Upload request body is too large",
        )
    };
    if header("content-length")
        .and_then(|n| n.parse::<usize>().ok())
        .is_some_and(|n| n > MAX_UPLOAD_BYTES)
    {
        return too_large();
    }
    let Ok(body) = axum::body::to_bytes(request.into_body(), MAX_UPLOAD_BYTES + 1).await else {
        return error(
            StatusCode::BAD_REQUEST,
            "M_UNKNOWN",
            "the body did not arrive",
        );
    };
    if body.len() > MAX_UPLOAD_BYTES {
        return too_large();
    }
    let content_type = header("content-type")
        .unwrap_or("application/octet-stream")
        .to_owned();
    let mut inner = s.lock();
    let uri = format!("mxc://{SERVER_NAME}/media{}", inner.uploads.len() + 1);
    inner
        .uploads
        .push((uri.clone(), content_type.clone(), body.len()));
    inner
        .media
        .insert(uri.clone(), (content_type, body.to_vec()));
    Json(json!({"content_uri": uri})).into_response()
}

/// `GET /_matrix/client/v1/media/download/{server}/{id}` (authenticated media, Matrix 1.11):
/// the file as uploaded, with its type; the bot's token required (`401 M_MISSING_TOKEN` /
/// `M_UNKNOWN_TOKEN`), `404 M_NOT_FOUND` for media the repository does not have.
async fn download(
    State(s): St,
    Path((server, id)): Path<(String, String)>,
    headers: axum::http::HeaderMap,
) -> Response {
    let mut inner = s.lock();
    let (code, message) = match headers.get("authorization").and_then(|v| v.to_str().ok()) {
        None => ("M_MISSING_TOKEN", "Missing access token"),
        Some(a) if a == format!("Bearer {TOKEN}") => ("", ""),
        Some(_) => ("M_UNKNOWN_TOKEN", "Invalid access token passed"),
    };
    if !code.is_empty() {
        inner.downloads.1 += 1;
        return error(StatusCode::UNAUTHORIZED, code, message);
    }
    match inner.media.get(&format!("mxc://{server}/{id}")).cloned() {
        Some((content_type, bytes)) => {
            inner.downloads.0 += 1;
            ([("content-type", content_type)], bytes).into_response()
        }
        None => error(StatusCode::NOT_FOUND, "M_NOT_FOUND", "Not found"),
    }
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
            .route("/_matrix/client/v1/media/config", get(media_config))
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
            // As Synapse, up to `max_upload_size` (axum's own 2 MB body limit would answer a
            // larger upload with a plain 413 no homeserver sends).
            .route(
                "/_matrix/media/v3/upload",
                post(upload).layer(axum::extract::DefaultBodyLimit::disable()),
            )
            .route(
                "/_matrix/client/v1/media/download/{server}/{id}",
                get(download),
            )
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

    /// Puts `bytes` of `content_type` in the media repository, as a person's client uploads a
    /// file (plain, or already encrypted): its `mxc://` URI.
    pub fn put_media(&self, content_type: &str, bytes: Vec<u8>) -> String {
        let mut inner = self.shared.lock();
        let uri = format!("mxc://{SERVER_NAME}/person{}", inner.media.len() + 1);
        inner
            .media
            .insert(uri.clone(), (content_type.to_owned(), bytes));
        uri
    }

    /// The bytes the media repository has at `mxc`, if any.
    pub fn media(&self, mxc: &str) -> Option<Vec<u8>> {
        self.shared.lock().media.get(mxc).map(|(_, b)| b.clone())
    }

    /// Media downloads answered, and refused for want of the bot's token.
    pub fn downloads(&self) -> (usize, usize) {
        self.shared.lock().downloads
    }

    /// How many upload requests arrived, refused ones too.
    pub fn upload_attempts(&self) -> usize {
        self.shared.lock().upload_attempts
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
