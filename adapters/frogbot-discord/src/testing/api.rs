//! The fake Discord's HTTP API: starting the fake (its HTTP server and gateway listener), the
//! routes with Discord's limits enforced, faults, and what a test reads back from it.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post, put};
use frogbot_model::faults::{Fault, FaultPlan};
use serde_json::{Value, json};
use serenity::http::{Http, HttpBuilder};
use serenity::model::id::ApplicationId;

use super::payloads::{dm_channel, message, text_channel, thread_channel, user};
use super::push::gateway_session;
use super::state::{Call, FakeDiscord, Inner, Issued};
use super::{DEFAULT_FAULT_HOLD, EPHEMERAL, GUILD, NONCE_WINDOW};

// ---- Discord's limits ----

/// What Discord allows (checked on every body the bot sends).
mod limits {
    pub(super) const CONTENT: usize = 2000;
    pub(super) const ROWS: usize = 5;
    pub(super) const BUTTONS_PER_ROW: usize = 5;
    pub(super) const SELECT_OPTIONS: usize = 25;
    pub(super) const BUTTON_LABEL: usize = 80;
    pub(super) const OPTION_TEXT: usize = 100;
    pub(super) const PLACEHOLDER: usize = 150;
    pub(super) const CUSTOM_ID: usize = 100;
    pub(super) const MODAL_TITLE: usize = 45;
    pub(super) const INPUT_LABEL: usize = 45;
    pub(super) const INPUT_LENGTH: u64 = 4000;
    pub(super) const INPUT_PLACEHOLDER: usize = 100;
    pub(super) const THREAD_NAME: usize = 100;
    pub(super) const EMBEDS: usize = 10;
    pub(super) const EMBED_TOTAL: usize = 6000;
    pub(super) const EMBED_TITLE: usize = 256;
    pub(super) const EMBED_DESCRIPTION: usize = 4096;
    pub(super) const EMBED_FIELDS: usize = 25;
    pub(super) const FIELD_NAME: usize = 256;
    pub(super) const FIELD_VALUE: usize = 1024;
    pub(super) const FOOTER: usize = 2048;
    pub(super) const AUTHOR_NAME: usize = 256;
    pub(super) const PINS: usize = 50;
}

/// The first limit a message's `embeds` break: at most 10 embeds, title 256, description 4,096,
/// 25 fields (name 256 and value 1,024, both required), footer 2,048, author name 256, 6,000
/// characters across all of them, an image URL that is `http(s)` or `attachment://`.
fn check_embeds(body: &Value) -> Result<(), String> {
    let Some(embeds) = body.get("embeds").and_then(Value::as_array) else {
        return Ok(());
    };
    if embeds.len() > limits::EMBEDS {
        return Err(format!(
            "embeds: Must be {} or fewer in length.",
            limits::EMBEDS
        ));
    }
    let mut total = 0;
    for (i, e) in embeds.iter().enumerate() {
        let at = format!("embeds.{i}");
        for (key, max) in [
            ("title", limits::EMBED_TITLE),
            ("description", limits::EMBED_DESCRIPTION),
        ] {
            if chars(&e[key]) > max {
                return Err(format!("{at}.{key}: Must be {max} or fewer in length."));
            }
            total += chars(&e[key]);
        }
        for (ptr, max) in [
            ("/footer/text", limits::FOOTER),
            ("/author/name", limits::AUTHOR_NAME),
        ] {
            let v = e.pointer(ptr).cloned().unwrap_or(Value::Null);
            if chars(&v) > max {
                return Err(format!("{at}{ptr}: Must be {max} or fewer in length."));
            }
            total += chars(&v);
        }
        let fields = e["fields"].as_array().cloned().unwrap_or_default();
        if fields.len() > limits::EMBED_FIELDS {
            return Err(format!("{at}.fields: Must be 25 or fewer in length."));
        }
        for (j, f) in fields.iter().enumerate() {
            for (key, max) in [("name", limits::FIELD_NAME), ("value", limits::FIELD_VALUE)] {
                let n = chars(&f[key]);
                if n == 0 {
                    return Err(format!("{at}.fields.{j}.{key}: This field is required"));
                }
                if n > max {
                    return Err(format!(
                        "{at}.fields.{j}.{key}: Must be {max} or fewer in length."
                    ));
                }
                total += n;
            }
        }
        if let Some(url) = e.pointer("/image/url") {
            let ok = url.as_str().is_some_and(|u| {
                u.starts_with("https://")
                    || u.starts_with("http://")
                    || u.starts_with("attachment://")
            });
            if !ok {
                return Err(format!(
                    "{at}.image.url: Scheme must be one of ('http', 'https', 'attachment')."
                ));
            }
        }
        let empty = e.get("title").is_none()
            && e.get("description").is_none()
            && fields.is_empty()
            && e.get("image").is_none();
        if empty {
            return Err(format!("{at}: an embed with nothing in it"));
        }
    }
    if total > limits::EMBED_TOTAL {
        return Err(format!(
            "embeds: Embed size exceeds maximum size of {}",
            limits::EMBED_TOTAL
        ));
    }
    Ok(())
}

fn chars(v: &Value) -> usize {
    v.as_str().map_or(0, |s| s.chars().count())
}

/// The first limit `body` (a message create/edit/followup body) breaks.
fn check_message(body: &Value) -> Result<(), String> {
    check_embeds(body)?;
    if chars(&body["content"]) > limits::CONTENT {
        return Err(format!(
            "content: Must be {} or fewer in length.",
            limits::CONTENT
        ));
    }
    let Some(rows) = body.get("components").and_then(Value::as_array) else {
        return Ok(());
    };
    if rows.len() > limits::ROWS {
        return Err(format!(
            "components: Must be {} or fewer in length.",
            limits::ROWS
        ));
    }
    let mut ids = std::collections::HashSet::new();
    for (r, row) in rows.iter().enumerate() {
        if row["type"] != 1 {
            return Err(format!("components.{r}: an action row (type 1) expected"));
        }
        let children = row["components"].as_array().cloned().unwrap_or_default();
        if children.is_empty() || children.len() > limits::BUTTONS_PER_ROW {
            return Err(format!("components.{r}.components: 1 to 5 components"));
        }
        for (c, child) in children.iter().enumerate() {
            let at = format!("components.{r}.components.{c}");
            let id = &child["custom_id"];
            if chars(id) > limits::CUSTOM_ID {
                return Err(format!("{at}.custom_id: Must be 100 or fewer in length."));
            }
            if let Some(id) = id.as_str()
                && !ids.insert(id.to_owned())
            {
                return Err(format!(
                    "{at}.custom_id: Component custom id cannot be duplicated"
                ));
            }
            match child["type"].as_u64() {
                Some(2) => {
                    if chars(&child["label"]) > limits::BUTTON_LABEL {
                        return Err(format!("{at}.label: Must be 80 or fewer in length."));
                    }
                    if !matches!(child["style"].as_u64(), Some(1..=5)) {
                        return Err(format!("{at}.style: Value must be one of (1, 2, 3, 4, 5)."));
                    }
                    if chars(&child["label"]) == 0 && child.get("emoji").is_none() {
                        return Err(format!("{at}: a button needs a label or an emoji"));
                    }
                    if child["style"].as_u64() != Some(5) && id.as_str().is_none() {
                        return Err(format!("{at}.custom_id: required"));
                    }
                }
                Some(3) => {
                    if children.len() != 1 {
                        return Err(format!("{at}: a select must be alone in its row"));
                    }
                    let options = child["options"].as_array().cloned().unwrap_or_default();
                    if options.is_empty() || options.len() > limits::SELECT_OPTIONS {
                        return Err(format!("{at}.options: 1 to 25 options"));
                    }
                    for (o, option) in options.iter().enumerate() {
                        for key in ["label", "value", "description"] {
                            if chars(&option[key]) > limits::OPTION_TEXT {
                                return Err(format!(
                                    "{at}.options.{o}.{key}: Must be 100 or fewer in length."
                                ));
                            }
                        }
                    }
                    if chars(&child["placeholder"]) > limits::PLACEHOLDER {
                        return Err(format!("{at}.placeholder: Must be 150 or fewer in length."));
                    }
                    let min = child["min_values"].as_u64().unwrap_or(1);
                    let max = child["max_values"].as_u64().unwrap_or(1);
                    if min > 25 || max == 0 || max > 25 || min > max || max > options.len() as u64 {
                        return Err(format!("{at}: min_values/max_values out of range"));
                    }
                }
                other => return Err(format!("{at}.type: unexpected component type {other:?}")),
            }
        }
    }
    Ok(())
}

/// The first limit a modal (`data` of an interaction response of type 9) breaks: 1 to 5 action
/// rows, each holding one text input (type 4) within Discord's text input limits.
fn check_modal(data: &Value) -> Result<(), String> {
    if chars(&data["title"]) > limits::MODAL_TITLE || chars(&data["title"]) == 0 {
        return Err("title: 1 to 45 characters".into());
    }
    if chars(&data["custom_id"]) > limits::CUSTOM_ID || chars(&data["custom_id"]) == 0 {
        return Err("custom_id: 1 to 100 characters".into());
    }
    let rows = data["components"].as_array().cloned().unwrap_or_default();
    if rows.is_empty() || rows.len() > limits::ROWS {
        return Err("components: 1 to 5 components".into());
    }
    let mut ids = std::collections::HashSet::new();
    for (r, row) in rows.iter().enumerate() {
        if row["type"] != 1 {
            return Err(format!("components.{r}: an action row (type 1) expected"));
        }
        let inputs = row["components"].as_array().cloned().unwrap_or_default();
        let [input] = inputs.as_slice() else {
            return Err(format!("components.{r}.components: exactly one text input"));
        };
        let at = format!("components.{r}.components.0");
        if input["type"] != 4 {
            return Err(format!("{at}.type: a text input (type 4) expected"));
        }
        let id = input["custom_id"].as_str().unwrap_or_default();
        if id.is_empty() || id.chars().count() > limits::CUSTOM_ID {
            return Err(format!("{at}.custom_id: 1 to 100 characters"));
        }
        if !ids.insert(id.to_owned()) {
            return Err(format!(
                "{at}.custom_id: Component custom id cannot be duplicated"
            ));
        }
        if !matches!(input["style"].as_u64(), Some(1 | 2)) {
            return Err(format!("{at}.style: Value must be one of (1, 2)."));
        }
        if chars(&input["label"]) == 0 || chars(&input["label"]) > limits::INPUT_LABEL {
            return Err(format!("{at}.label: 1 to 45 characters"));
        }
        if chars(&input["placeholder"]) > limits::INPUT_PLACEHOLDER {
            return Err(format!("{at}.placeholder: Must be 100 or fewer in length."));
        }
        let min = input["min_length"].as_u64();
        let max = input["max_length"].as_u64();
        if min.is_some_and(|m| m > limits::INPUT_LENGTH) {
            return Err(format!("{at}.min_length: 0 to 4000"));
        }
        if max.is_some_and(|m| m == 0 || m > limits::INPUT_LENGTH) {
            return Err(format!("{at}.max_length: 1 to 4000"));
        }
        if let (Some(a), Some(b)) = (min, max)
            && a > b
        {
            return Err(format!("{at}.min_length: above max_length"));
        }
        let value = chars(&input["value"]) as u64;
        if value > limits::INPUT_LENGTH || max.is_some_and(|m| value > m) {
            return Err(format!("{at}.value: longer than max_length"));
        }
        if !input["required"].is_null() && !input["required"].is_boolean() {
            return Err(format!("{at}.required: a boolean"));
        }
    }
    Ok(())
}

fn invalid_form(reason: &str) -> (StatusCode, Value) {
    (
        StatusCode::BAD_REQUEST,
        json!({"code": 50035, "message": "Invalid Form Body", "errors": {"_errors": [{"code": "BASE_TYPE_INVALID", "message": reason}]}}),
    )
}

impl Inner {
    fn record(&self, method: &Method, uri: &Uri, body: &str, status: StatusCode, response: &Value) {
        self.record_with_files(method, uri, body, Vec::new(), status, response);
    }

    /// [`Inner::record`] of a request with file parts (`files`, described).
    fn record_with_files(
        &self,
        method: &Method,
        uri: &Uri,
        body: &str,
        files: Vec<Value>,
        status: StatusCode,
        response: &Value,
    ) {
        let at = Instant::now();
        let body = serde_json::from_str(body).unwrap_or(Value::Null);
        self.calls.lock().unwrap().push(Call {
            method: method.to_string(),
            path: uri.path().to_owned(),
            body,
            files,
            status: status.as_u16(),
            response: response.clone(),
            at,
        });
        self.changed.notify_waiters();
    }

    pub(super) fn next_id(&self) -> u64 {
        900_000_000_000_000_000 + self.next_id.fetch_add(1, Ordering::SeqCst)
    }

    /// Stores a message the bot posted in `channel`.
    fn post(&self, channel: &str, body: &Value) -> Value {
        self.post_with(channel, body, Vec::new())
    }

    /// Stores a message the bot posted in `channel` with the uploaded `files` as its
    /// attachments (their bytes on the CDN).
    fn post_with(&self, channel: &str, body: &Value, files: Vec<Upload>) -> Value {
        let mut m = message(
            self.next_id(),
            channel.parse().unwrap_or(1),
            None,
            &user(self.bot_id, "frogbot", true),
            body.get("content").and_then(Value::as_str).unwrap_or(""),
            &[],
        );
        m["components"] = numbered(body.get("components").cloned().unwrap_or(json!([])));
        if let Some(embeds) = body.get("embeds").filter(|e| e.is_array()) {
            m["embeds"] = shown_embeds(embeds);
        }
        if let Some(reference) = body.get("message_reference") {
            m["message_reference"] = reference.clone();
        }
        if let Some(flags) = body.get("flags") {
            m["flags"] = flags.clone();
        }
        if let Some(nonce) = body.get("nonce").filter(|n| !n.is_null()) {
            m["nonce"] = nonce.clone();
        }
        if let Some(allowed) = body.get("allowed_mentions").filter(|a| !a.is_null()) {
            m["allowed_mentions"] = allowed.clone();
        }
        m["pinged"] = json!(pinged(&m["content"], body.get("allowed_mentions")));
        if !files.is_empty() {
            m["attachments"] = Value::Array(
                files
                    .into_iter()
                    .map(|f| self.store_upload(channel, body, f))
                    .collect(),
            );
        }
        self.messages
            .lock()
            .unwrap()
            .insert(m["id"].as_str().unwrap_or_default().to_owned(), m.clone());
        m
    }

    /// Posts a message, unless it carries a `nonce` with `enforce_nonce: true` that a message of
    /// the bot's carried within [`NONCE_WINDOW`]: then that message is returned, nothing posted
    /// (Discord's de-duplication).
    fn post_once(&self, channel: &str, body: &Value, files: Vec<Upload>) -> Value {
        let nonce = match &body["nonce"] {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        let enforce = body["enforce_nonce"] == true;
        if let (Some(nonce), true) = (&nonce, enforce) {
            let mut nonces = self.nonces.lock().unwrap();
            nonces.retain(|_, (_, at)| at.elapsed() < NONCE_WINDOW);
            if let Some((id, _)) = nonces.get(nonce)
                && let Some(m) = self.messages.lock().unwrap().get(id)
            {
                return m.clone();
            }
            let m = self.post_with(channel, body, files);
            let id = m["id"].as_str().unwrap_or_default().to_owned();
            nonces.insert(nonce.clone(), (id, Instant::now()));
            return m;
        }
        self.post_with(channel, body, files)
    }

    /// Keeps `file`, uploaded with a message in `channel` (`body` its `payload_json`), on the
    /// CDN and returns its attachment object: `id`, `filename` (the `attachments` entry's, else
    /// the part's), `size`, `url` (signed like Discord's: `ex`, `is`, `hm`), `proxy_url`,
    /// `content_type` (the part's), `description` (the entry's, when given).
    fn store_upload(&self, channel: &str, body: &Value, file: Upload) -> Value {
        let entry = body["attachments"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| attachment_index(&a["id"]) == Some(file.index))
            .cloned()
            .unwrap_or(Value::Null);
        let filename = entry["filename"]
            .as_str()
            .map_or(file.filename, str::to_owned);
        let id = self.next_id();
        let safe: String = filename
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = format!("{channel}/{id}/{safe}");
        let api = self.api_url.lock().unwrap().clone();
        let mut a = json!({
            "id": id.to_string(),
            "filename": filename,
            "size": file.bytes.len(),
            "url": format!("{api}/attachments/{path}?ex=6a1b2c3d&is=6a1a0000&hm=00ff"),
            "proxy_url": format!("{api}/attachments/{path}"),
            "content_type": file.content_type,
        });
        if let Some(d) = entry["description"].as_str() {
            a["description"] = json!(d);
        }
        self.attachments
            .lock()
            .unwrap()
            .insert(path, (file.content_type, file.bytes));
        a
    }

    /// Registers an interaction payload (its token answers followups and one callback).
    pub(super) fn issue(&self, payload: &Value, responded: bool) {
        let Some(token) = payload["token"].as_str() else {
            return;
        };
        let user = payload["user"]["id"]
            .as_str()
            .or_else(|| payload["member"]["user"]["id"].as_str())
            .unwrap_or_default();
        let channel = payload["channel_id"]
            .as_str()
            .or_else(|| payload["channel"]["id"].as_str())
            .unwrap_or("1");
        self.interactions.lock().unwrap().insert(
            token.to_owned(),
            Issued {
                id: payload["id"].as_str().unwrap_or_default().to_owned(),
                user: user.to_owned(),
                channel: channel.to_owned(),
                responded,
            },
        );
    }

    /// Keeps what the interaction `issued` answered only its user sees: an ephemeral message
    /// (`body`, a message body) or, with `modal`, the modal opened.
    fn show_only_to(&self, issued: &Issued, body: &Value, modal: bool) {
        let mut m = message(
            self.next_id(),
            issued.channel.parse().unwrap_or(1),
            None,
            &user(self.bot_id, "frogbot", true),
            body.get("content").and_then(Value::as_str).unwrap_or(""),
            &[],
        );
        m["only_for"] = json!(issued.user);
        if modal {
            m["modal"] = body.clone();
        } else {
            m["components"] = numbered(body.get("components").cloned().unwrap_or(json!([])));
            if let Some(embeds) = body.get("embeds").filter(|e| e.is_array()) {
                m["embeds"] = shown_embeds(embeds);
            }
        }
        self.ephemerals.lock().unwrap().push(m);
    }
}

/// Embeds as Discord shows them: each of `type` `rich`, an image with its `proxy_url`.
/// The user ids a new message pings, as Discord decides it: each user written `<@ID>` or
/// `<@!ID>` in `content`, once, whom `allowed_mentions` lets be pinged — all of them when it is
/// absent (a regular message's default, `parse` of every type) or its `parse` holds `"users"`,
/// else those in its `users` ("Allowed Mentions Object" in Discord's message reference).
pub(super) fn pinged(content: &Value, allowed: Option<&Value>) -> Vec<String> {
    let text = content.as_str().unwrap_or_default();
    let every = allowed.is_none_or(|a| {
        a.is_null()
            || a["parse"]
                .as_array()
                .is_some_and(|p| p.iter().any(|t| t == "users"))
    });
    let listed = |id: &str| {
        allowed
            .and_then(|a| a["users"].as_array())
            .is_some_and(|u| u.iter().any(|u| u == id))
    };
    let mut ids: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("<@") {
        let tail = &rest[at + 2..];
        let digits = tail.strip_prefix('!').unwrap_or(tail);
        let n = digits.bytes().take_while(u8::is_ascii_digit).count();
        let id = &digits[..n];
        if n > 0
            && digits[n..].starts_with('>')
            && (every || listed(id))
            && !ids.iter().any(|i| i == id)
        {
            ids.push(id.to_owned());
        }
        rest = tail;
    }
    ids
}

fn shown_embeds(embeds: &Value) -> Value {
    let mut embeds = embeds.clone();
    for e in embeds.as_array_mut().into_iter().flatten() {
        e["type"] = json!("rich");
        if let Some(url) = e.pointer("/image/url").cloned() {
            e["image"]["proxy_url"] = json!(format!(
                "https://images-ext-1.discordapp.net/external/fake/{}",
                url.as_str().unwrap_or_default().replace("://", "/")
            ));
        }
    }
    embeds
}

/// Components as Discord stores them: every component gets a numeric `id` (1, 2, … in order)
/// when the sender gave none.
fn numbered(mut components: Value) -> Value {
    fn walk(v: &mut Value, n: &mut u64) {
        if let Some(list) = v.as_array_mut() {
            for c in list {
                *n += 1;
                if c.get("id").is_none() {
                    c["id"] = json!(*n);
                }
                if let Some(children) = c.get_mut("components") {
                    walk(children, n);
                }
            }
        }
    }
    walk(&mut components, &mut 0);
    components
}

type Reply = (StatusCode, Value);

fn respond(
    inner: &Inner,
    method: &Method,
    uri: &Uri,
    body: &str,
    (status, value): Reply,
) -> Response {
    inner.record(method, uri, body, status, &value);
    if value.is_null() {
        return status.into_response();
    }
    (status, axum::Json(value)).into_response()
}

fn parse_body(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or(Value::Null)
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

/// Injects the [`FakeDiscord::set_faults`] plan's faults into the write calls (every method but
/// `GET`). When the fake checks tokens ([`FakeDiscord::require_token`]), any API call with
/// another is Discord's `401` first, as Discord answers every route.
async fn inject_faults(
    State(inner): State<Arc<Inner>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if req.uri().path().starts_with("/api/")
        && let Some((status, body)) = unauthorized(&inner, req.headers())
    {
        return (status, axum::Json(body)).into_response();
    }
    let fault = if req.method() == Method::GET {
        None
    } else {
        inner
            .faults
            .lock()
            .unwrap()
            .as_ref()
            .and_then(|plan| plan.next())
    };
    match fault {
        None => next.run(req).await,
        Some(Fault::ServerError) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"message": "500: Internal Server Error", "code": 0})),
        )
            .into_response(),
        Some(Fault::RateLimited(wait)) => {
            let secs = wait.as_secs_f64();
            (
                StatusCode::TOO_MANY_REQUESTS,
                [
                    ("retry-after", format!("{}", secs.ceil().max(1.0) as u64)),
                    ("x-ratelimit-limit", "5".to_owned()),
                    ("x-ratelimit-remaining", "0".to_owned()),
                    ("x-ratelimit-reset-after", format!("{secs:.3}")),
                    ("x-ratelimit-bucket", "fakebucket".to_owned()),
                    ("x-ratelimit-scope", "user".to_owned()),
                ],
                axum::Json(json!({"message": "You are being rate limited.",
                                  "retry_after": secs, "global": false})),
            )
                .into_response()
        }
        Some(Fault::Timeout) => {
            let hold = inner
                .fault_hold
                .lock()
                .unwrap()
                .unwrap_or(DEFAULT_FAULT_HOLD);
            tokio::time::sleep(hold).await;
            (StatusCode::INTERNAL_SERVER_ERROR, "fake: too late").into_response()
        }
        Some(Fault::ResetAfterProcessing) => {
            let _ = next.run(req).await;
            reset_response()
        }
    }
}

async fn gateway(State(inner): State<Arc<Inner>>, method: Method, uri: Uri) -> Response {
    let url = inner.gateway_url.lock().unwrap().clone();
    let response = json!({
        "url": url,
        "shards": inner.shards.load(Ordering::SeqCst).max(1),
        "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
    });
    respond(&inner, &method, &uri, "", (StatusCode::OK, response))
}

/// Discord's answer to a bad bot token (`{"message": "401: Unauthorized", "code": 0}`), when
/// the fake checks tokens ([`FakeDiscord::require_token`]).
fn unauthorized(inner: &Inner, headers: &axum::http::HeaderMap) -> Option<(StatusCode, Value)> {
    let want = inner.token.lock().unwrap().clone()?;
    let given = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    (given != format!("Bot {want}")).then(|| {
        (
            StatusCode::UNAUTHORIZED,
            json!({"message": "401: Unauthorized", "code": 0}),
        )
    })
}

/// `GET /attachments/{channel}/{id}/{name}` on the CDN: an attachment's bytes (`404` for an
/// unknown one, as the CDN answers an expired link).
async fn cdn_attachment(
    State(inner): State<Arc<Inner>>,
    Path((cid, aid, name)): Path<(String, String, String)>,
) -> Response {
    let key = format!("{cid}/{aid}/{name}");
    match inner.attachments.lock().unwrap().get(&key) {
        Some((media, bytes)) => (
            StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, media.clone())],
            bytes.clone(),
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "This content is no longer available.",
        )
            .into_response(),
    }
}

async fn current_user(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: axum::http::HeaderMap,
) -> Response {
    let response = unauthorized(&inner, &headers).unwrap_or_else(|| {
        (
            StatusCode::OK,
            json!({"id": inner.bot_id.to_string(), "username": "frogbot", "discriminator": "0", "avatar": null, "bot": true, "verified": true, "mfa_enabled": false, "flags": 0}),
        )
    });
    respond(&inner, &method, &uri, "", response)
}

/// `GET /applications/@me`: the bot's application (its `flags` say which privileged intents
/// are on).
async fn current_application(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: axum::http::HeaderMap,
) -> Response {
    let response = unauthorized(&inner, &headers).unwrap_or_else(|| {
        let flags = inner.app_flags.lock().unwrap().unwrap_or(1 << 19);
        (
            StatusCode::OK,
            json!({"id": inner.app_id.to_string(), "name": "frogbot", "icon": null, "description": "",
                   "bot_public": true, "bot_require_code_grant": false, "verify_key": "0".repeat(64),
                   "flags": flags, "bot": {"id": inner.bot_id.to_string(), "username": "frogbot", "bot": true}}),
        )
    });
    respond(&inner, &method, &uri, "", response)
}

/// A file part (`files[n]`) of a `multipart/form-data` create message.
#[derive(Debug)]
pub(super) struct Upload {
    /// `n`, the snowflake placeholder its `attachments` entry names it by.
    index: u64,
    /// The part's file name.
    filename: String,
    /// The part's `Content-Type` (`application/octet-stream` when it gave none).
    content_type: String,
    bytes: Vec<u8>,
}

/// An `attachments` entry's `id` (a number or a numeric string) as a part index.
fn attachment_index(id: &Value) -> Option<u64> {
    id.as_u64()
        .or_else(|| id.as_str().and_then(|s| s.parse().ok()))
}

/// A `multipart/form-data` body read with multer: the `payload_json` part (else the text
/// fields as a JSON object, as Discord takes them) and the `files[n]` parts. A file part
/// without a file name, a part name used twice, a malformed body: an error (Discord's 50035).
async fn read_form(
    content_type: &str,
    body: axum::body::Body,
) -> Result<(String, Vec<Upload>), String> {
    let boundary = multer::parse_boundary(content_type).map_err(|e| e.to_string())?;
    let mut form = multer::Multipart::new(body.into_data_stream(), boundary);
    let mut payload = None;
    let mut fields = serde_json::Map::new();
    let mut files: Vec<Upload> = Vec::new();
    let mut names = std::collections::HashSet::new();
    while let Some(field) = form.next_field().await.map_err(|e| e.to_string())? {
        let name = field.name().unwrap_or_default().to_owned();
        if !names.insert(name.clone()) {
            return Err(format!("{name}: a part name used twice"));
        }
        let index = name
            .strip_prefix("files[")
            .and_then(|n| n.strip_suffix(']'))
            .and_then(|n| n.parse::<u64>().ok());
        match index {
            Some(index) => {
                let filename = field
                    .file_name()
                    .filter(|f| !f.is_empty())
                    .ok_or_else(|| format!("{name}: a file part needs a filename"))?
                    .to_owned();
                let content_type = field.content_type().map_or_else(
                    || "application/octet-stream".to_owned(),
                    ToString::to_string,
                );
                let bytes = field.bytes().await.map_err(|e| e.to_string())?.to_vec();
                files.push(Upload {
                    index,
                    filename,
                    content_type,
                    bytes,
                });
            }
            None if name == "payload_json" => {
                payload = Some(field.text().await.map_err(|e| e.to_string())?);
            }
            None => {
                let text = field.text().await.map_err(|e| e.to_string())?;
                fields.insert(name, Value::String(text));
            }
        }
    }
    let payload = payload.unwrap_or_else(|| Value::Object(fields).to_string());
    Ok((payload, files))
}

/// `POST /channels/{id}/messages`: a JSON body, or `multipart/form-data` with files (see the
/// module: the upload limit, the `attachments` entries).
async fn create_message(
    State(inner): State<Arc<Inner>>,
    Path(channel): Path<String>,
    method: Method,
    uri: Uri,
    request: axum::extract::Request,
) -> Response {
    let content_type = request
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let (body, files) = if content_type.starts_with("multipart/form-data") {
        match read_form(&content_type, request.into_body()).await {
            Ok(form) => form,
            Err(reason) => {
                return respond(&inner, &method, &uri, "", invalid_form(&reason));
            }
        }
    } else {
        match axum::body::to_bytes(request.into_body(), usize::MAX).await {
            Ok(bytes) => (String::from_utf8_lossy(&bytes).into_owned(), Vec::new()),
            Err(e) => return respond(&inner, &method, &uri, "", invalid_form(&e.to_string())),
        }
    };
    let described: Vec<Value> = files
        .iter()
        .map(|f| {
            json!({"name": format!("files[{}]", f.index), "filename": f.filename,
                   "content_type": f.content_type, "size": f.bytes.len()})
        })
        .collect();
    let parsed = parse_body(&body);
    let limit = inner
        .upload_limit
        .lock()
        .unwrap()
        .unwrap_or(super::DEFAULT_UPLOAD_LIMIT);
    let total: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
    let unknown = parsed["attachments"]
        .as_array()
        .into_iter()
        .flatten()
        .position(|a| {
            attachment_index(&a["id"]).is_none_or(|n| !files.iter().any(|f| f.index == n))
        });
    let reply = match check_message(&parsed) {
        Err(reason) => invalid_form(&reason),
        Ok(()) if total > limit => (
            StatusCode::PAYLOAD_TOO_LARGE,
            json!({"message": "Request entity too large", "code": 40005}),
        ),
        Ok(()) if unknown.is_some() => invalid_form(&format!(
            "attachments.{}.id: no files[n] part of this id",
            unknown.unwrap_or_default()
        )),
        Ok(())
            if chars(&parsed["content"]) == 0
                && files.is_empty()
                && parsed["components"].as_array().is_none_or(Vec::is_empty)
                && parsed["embeds"].as_array().is_none_or(Vec::is_empty) =>
        {
            (
                StatusCode::BAD_REQUEST,
                json!({"code": 50006, "message": "Cannot send an empty message"}),
            )
        }
        Ok(()) => (StatusCode::OK, inner.post_once(&channel, &parsed, files)),
    };
    let (status, value) = reply;
    inner.record_with_files(&method, &uri, &body, described, status, &value);
    if value.is_null() {
        return status.into_response();
    }
    (status, axum::Json(value)).into_response()
}

/// `PUT` / `DELETE …/reactions/{emoji}/@me`: 204 on a message the fake knows (its `reactions` by
/// the bot kept in `me_reactions`), 404 `Unknown Message` otherwise.
async fn own_reaction(
    State(inner): State<Arc<Inner>>,
    Path((_channel, id, emoji)): Path<(String, String, String)>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let refused = method == Method::DELETE
        && inner
            .refuse_unreact
            .load(std::sync::atomic::Ordering::SeqCst);
    if refused {
        let reply = (
            StatusCode::FORBIDDEN,
            json!({"message": "Missing Access", "code": 50001}),
        );
        return respond(&inner, &method, &uri, &body, reply);
    }
    let reply = {
        let mut messages = inner.messages.lock().unwrap();
        match messages.get_mut(&id) {
            None => (
                StatusCode::NOT_FOUND,
                json!({"message": "Unknown Message", "code": 10008}),
            ),
            Some(m) => {
                let mut mine: Vec<Value> =
                    m["me_reactions"].as_array().cloned().unwrap_or_default();
                mine.retain(|e| e != &json!(emoji));
                if method == Method::PUT {
                    mine.push(json!(emoji));
                }
                m["me_reactions"] = json!(mine);
                (StatusCode::NO_CONTENT, Value::Null)
            }
        }
    };
    respond(&inner, &method, &uri, &body, reply)
}

/// `POST /channels/{id}/typing`: 204.
async fn typing(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    respond(
        &inner,
        &method,
        &uri,
        &body,
        (StatusCode::NO_CONTENT, Value::Null),
    )
}

async fn edit_message(
    State(inner): State<Arc<Inner>>,
    Path((_channel, id)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let parsed = parse_body(&body);
    let reply = match check_message(&parsed) {
        Err(reason) => invalid_form(&reason),
        Ok(()) => {
            let mut messages = inner.messages.lock().unwrap();
            match messages.get_mut(&id) {
                None => (
                    StatusCode::NOT_FOUND,
                    json!({"message": "Unknown Message", "code": 10008}),
                ),
                Some(m) => {
                    if let Some(v) = parsed.get("content") {
                        m["content"] = v.clone();
                    }
                    if let Some(v) = parsed.get("components") {
                        m["components"] = numbered(v.clone());
                    }
                    if let Some(v) = parsed.get("embeds").filter(|e| e.is_array()) {
                        m["embeds"] = shown_embeds(v);
                    }
                    m["edited_timestamp"] = json!("2026-01-01T00:00:01.000000+00:00");
                    (StatusCode::OK, m.clone())
                }
            }
        }
    };
    respond(&inner, &method, &uri, &body, reply)
}

/// `DELETE /channels/{id}/messages/{id}`: 204, the message gone (with its pin); 404 `Unknown
/// Message` (10008) for one the fake does not know (any more).
async fn delete_message(
    State(inner): State<Arc<Inner>>,
    Path((_channel, id)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let removed = inner.messages.lock().unwrap().remove(&id);
    let reply = match removed {
        None => (
            StatusCode::NOT_FOUND,
            json!({"message": "Unknown Message", "code": 10008}),
        ),
        Some(m) => {
            inner.pins.lock().unwrap().retain(|(_, p)| *p != id);
            inner.deleted.lock().unwrap().push(m);
            (StatusCode::NO_CONTENT, Value::Null)
        }
    };
    respond(&inner, &method, &uri, &body, reply)
}

/// `PUT` / `DELETE /channels/{channel}/pins/{message}` (the route serenity 0.12 calls) and
/// `/channels/{channel}/messages/pins/{message}` (Discord's newer one): 204 (pinning a pinned
/// message or unpinning one that is not pinned changes nothing), 404 `Unknown Message` for a
/// message the fake does not know, 400 `Maximum number of pins reached (50)` (30003) past 50 pins
/// in a channel.
async fn pin(
    State(inner): State<Arc<Inner>>,
    Path((channel, id)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let known = inner
        .messages
        .lock()
        .unwrap()
        .get(&id)
        .is_some_and(|m| m["channel_id"] == channel.as_str());
    let reply = if !known {
        (
            StatusCode::NOT_FOUND,
            json!({"message": "Unknown Message", "code": 10008}),
        )
    } else {
        let mut pins = inner.pins.lock().unwrap();
        let at = pins.iter().position(|(c, m)| *c == channel && *m == id);
        let count = pins.iter().filter(|(c, _)| *c == channel).count();
        match (method == Method::PUT, at) {
            (true, None) if count >= limits::PINS => (
                StatusCode::BAD_REQUEST,
                json!({"message": "Maximum number of pins reached (50)", "code": 30003}),
            ),
            (true, None) => {
                pins.push((channel.clone(), id.clone()));
                (StatusCode::NO_CONTENT, Value::Null)
            }
            (false, Some(i)) => {
                pins.remove(i);
                (StatusCode::NO_CONTENT, Value::Null)
            }
            _ => (StatusCode::NO_CONTENT, Value::Null),
        }
    };
    if reply.0 == StatusCode::NO_CONTENT {
        let pinned = inner
            .pins
            .lock()
            .unwrap()
            .iter()
            .any(|(c, m)| *c == channel && *m == id);
        if let Some(m) = inner.messages.lock().unwrap().get_mut(&id) {
            m["pinned"] = json!(pinned);
        }
    }
    respond(&inner, &method, &uri, &body, reply)
}

/// `GET /channels/{id}/messages?before=&after=&limit=`: the channel's messages (the bot's and
/// people's), newest first, at most `limit` (1–100, default 50; out of range: 50035).
async fn channel_messages(
    State(inner): State<Arc<Inner>>,
    Path(channel): Path<String>,
    method: Method,
    uri: Uri,
) -> Response {
    let query: HashMap<String, String> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let num = |k: &str| query.get(k).and_then(|v| v.parse::<u64>().ok());
    let limit = num("limit").unwrap_or(50);
    let reply = if !(1..=100).contains(&limit) {
        invalid_form("limit: int value should be less than or equal to 100.")
    } else {
        let mut list: Vec<Value> = inner
            .messages
            .lock()
            .unwrap()
            .values()
            .filter(|m| m["channel_id"] == channel.as_str())
            .filter(|m| {
                let id = m["id"]
                    .as_str()
                    .and_then(|i| i.parse::<u64>().ok())
                    .unwrap_or(0);
                num("before").is_none_or(|b| id < b) && num("after").is_none_or(|a| id > a)
            })
            .cloned()
            .collect();
        list.sort_by_key(|m| {
            std::cmp::Reverse(m["id"].as_str().and_then(|i| i.parse::<u64>().ok()))
        });
        list.truncate(limit as usize);
        (StatusCode::OK, Value::Array(list))
    };
    respond(&inner, &method, &uri, "", reply)
}

async fn start_thread(
    State(inner): State<Arc<Inner>>,
    Path((channel, message)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let parsed = parse_body(&body);
    let name = chars(&parsed["name"]);
    let in_thread = inner.threads.lock().unwrap().contains(&channel);
    let in_dm = inner
        .channels
        .lock()
        .unwrap()
        .get(&channel)
        .is_some_and(|c| c["type"] == 1);
    let started = inner.started.lock().unwrap().contains(&message);
    let reply = if started {
        (
            StatusCode::BAD_REQUEST,
            json!({"message": "A thread has already been created for this message", "code": 160004}),
        )
    } else if in_dm {
        (
            StatusCode::BAD_REQUEST,
            json!({"message": "Cannot execute action on a DM channel", "code": 50003}),
        )
    } else if in_thread {
        (
            StatusCode::BAD_REQUEST,
            json!({"message": "Cannot execute action on this channel type", "code": 50024}),
        )
    } else if name == 0 || name > limits::THREAD_NAME {
        invalid_form("name: 1 to 100 characters")
    } else {
        // A thread started from a message has the message's id; it is a channel from now on.
        let id = message.clone();
        inner.started.lock().unwrap().insert(message.clone());
        let thread = thread_channel(&id, GUILD, &channel, inner.bot_id, &parsed["name"]);
        inner.threads.lock().unwrap().insert(id.clone());
        inner
            .channels
            .lock()
            .unwrap()
            .insert(id.clone(), thread.clone());
        (StatusCode::CREATED, thread)
    };
    respond(&inner, &method, &uri, &body, reply)
}

/// `GET /channels/{id}`: the channel object, or 404 `Unknown Channel` (10003).
async fn get_channel(
    State(inner): State<Arc<Inner>>,
    Path(channel): Path<String>,
    method: Method,
    uri: Uri,
) -> Response {
    let reply = match inner.channels.lock().unwrap().get(&channel) {
        Some(c) => (StatusCode::OK, c.clone()),
        None => (
            StatusCode::NOT_FOUND,
            json!({"message": "Unknown Channel", "code": 10003}),
        ),
    };
    respond(&inner, &method, &uri, "", reply)
}

/// `POST /users/@me/channels` (`{"recipient_id": …}`): the DM channel with a user the fake knows
/// ([`FakeDiscord::add_user`]) — the same one every time —, else 400 `Invalid Recipient(s)`
/// (50033).
async fn create_dm(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let parsed = parse_body(&body);
    let recipient = parsed["recipient_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let user = inner.users.lock().unwrap().get(&recipient).cloned();
    let reply = match user {
        None => (
            StatusCode::BAD_REQUEST,
            json!({"message": "Invalid Recipient(s)", "code": 50033}),
        ),
        Some(user) => {
            let mut dms = inner.dms.lock().unwrap();
            let id = dms
                .entry(recipient)
                .or_insert_with(|| inner.next_id().to_string())
                .clone();
            let channel = dm_channel(&id, &user);
            inner.channels.lock().unwrap().insert(id, channel.clone());
            (StatusCode::OK, channel)
        }
    };
    respond(&inner, &method, &uri, &body, reply)
}

async fn followup(
    State(inner): State<Arc<Inner>>,
    Path((app, token)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let parsed = parse_body(&body);
    let issued = inner.interactions.lock().unwrap().get(&token).cloned();
    let reply = match issued {
        Some(issued) if app == inner.app_id.to_string() => match check_message(&parsed) {
            Err(reason) => invalid_form(&reason),
            Ok(()) if parsed["flags"].as_u64().unwrap_or(0) & EPHEMERAL != 0 => {
                inner.show_only_to(&issued, &parsed, false);
                (StatusCode::OK, inner.post("1", &parsed))
            }
            Ok(()) => (StatusCode::OK, inner.post(&issued.channel, &parsed)),
        },
        _ => (
            StatusCode::NOT_FOUND,
            json!({"message": "Unknown Webhook", "code": 10015}),
        ),
    };
    respond(&inner, &method, &uri, &body, reply)
}

/// `PUT /applications/{app}/guilds/{guild}/commands`: [`set_commands`] for one guild (`guild_id`
/// on each command answered).
async fn set_guild_commands(
    State(inner): State<Arc<Inner>>,
    Path((app, guild)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    put_commands(inner, app, Some(guild), method, uri, body)
}

/// `PUT /applications/{app}/commands`: replaces the bot's global application commands, checked
/// as Discord checks them (at most 100; a `CHAT_INPUT` name 1-32 lowercase letters, digits, `-`
/// or `_`; a description 1-100 characters; at most 25 options and 25 choices each, names and
/// values at most 100 characters); answers the commands with their ids.
async fn set_commands(
    State(inner): State<Arc<Inner>>,
    Path(app): Path<String>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    put_commands(inner, app, None, method, uri, body)
}

fn put_commands(
    inner: Arc<Inner>,
    app: String,
    guild: Option<String>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let parsed = parse_body(&body);
    let name_ok = |v: &Value| {
        v.as_str().is_some_and(|n| {
            (1..=32).contains(&n.chars().count())
                && n.chars()
                    .all(|c| c.is_lowercase() || c.is_numeric() || c == '-' || c == '_')
        })
    };
    let text_ok = |v: &Value| {
        v.as_str()
            .is_some_and(|d| (1..=100).contains(&d.chars().count()))
    };
    let check = |commands: &Vec<Value>| -> Result<(), String> {
        if commands.len() > 100 {
            return Err("at most 100 commands".into());
        }
        for c in commands {
            if !name_ok(&c["name"]) || !text_ok(&c["description"]) {
                return Err(format!("invalid command {c}"));
            }
            let options = c["options"].as_array().cloned().unwrap_or_default();
            if options.len() > 25 {
                return Err("at most 25 options".into());
            }
            for o in &options {
                let choices = o["choices"].as_array().cloned().unwrap_or_default();
                if !name_ok(&o["name"]) || !text_ok(&o["description"]) || choices.len() > 25 {
                    return Err(format!("invalid option {o}"));
                }
                if choices
                    .iter()
                    .any(|ch| !text_ok(&ch["name"]) || !text_ok(&ch["value"]))
                {
                    return Err(format!("invalid choice in {o}"));
                }
            }
        }
        Ok(())
    };
    let reply = match parsed.as_array() {
        _ if app != inner.app_id.to_string() => (
            StatusCode::FORBIDDEN,
            json!({"code": 50001, "message": "Missing Access"}),
        ),
        None => invalid_form("an array of application commands"),
        Some(commands) => match check(commands) {
            Err(reason) => invalid_form(&reason),
            Ok(()) => {
                let set: Vec<Value> = commands
                    .iter()
                    .map(|c| {
                        let mut c = c.clone();
                        c["id"] = json!(inner.next_id().to_string());
                        c["application_id"] = json!(inner.app_id.to_string());
                        c["version"] = json!(inner.next_id().to_string());
                        c["type"] = c.get("type").cloned().unwrap_or(json!(1));
                        c["default_member_permissions"] = Value::Null;
                        c["nsfw"] = json!(false);
                        if let Some(g) = &guild {
                            c["guild_id"] = json!(g);
                        }
                        c
                    })
                    .collect();
                match &guild {
                    None => *inner.commands.lock().unwrap() = set.clone(),
                    Some(g) => {
                        inner
                            .guild_commands
                            .lock()
                            .unwrap()
                            .insert(g.clone(), set.clone());
                    }
                }
                (StatusCode::OK, Value::Array(set))
            }
        },
    };
    respond(&inner, &method, &uri, &body, reply)
}

async fn callback(
    State(inner): State<Arc<Inner>>,
    Path((id, token)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let parsed = parse_body(&body);
    let reply = {
        let mut issued = inner.interactions.lock().unwrap();
        match issued.get_mut(&token).filter(|i| i.id == id) {
            None => (
                StatusCode::NOT_FOUND,
                json!({"message": "Unknown interaction", "code": 10062}),
            ),
            Some(i) if i.responded => (
                StatusCode::BAD_REQUEST,
                json!({"message": "Interaction has already been acknowledged.", "code": 40060}),
            ),
            Some(i) => {
                let check = match parsed["type"].as_u64() {
                    Some(9) => check_modal(&parsed["data"]),
                    Some(4 | 7) => check_message(&parsed["data"]),
                    Some(5 | 6) => Ok(()),
                    other => Err(format!("type: unknown response type {other:?}")),
                };
                match check {
                    Ok(()) => {
                        i.responded = true;
                        let data = &parsed["data"];
                        match parsed["type"].as_u64() {
                            Some(9) => inner.show_only_to(i, data, true),
                            Some(4) if data["flags"].as_u64().unwrap_or(0) & EPHEMERAL != 0 => {
                                inner.show_only_to(i, data, false);
                            }
                            Some(4) => {
                                inner.post(&i.channel, data);
                            }
                            _ => {}
                        }
                        (StatusCode::NO_CONTENT, Value::Null)
                    }
                    Err(reason) => invalid_form(&reason),
                }
            }
        }
    };
    respond(&inner, &method, &uri, &body, reply)
}

async fn unknown(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let response = json!({"message": "404: Not Found", "code": 0});
    respond(
        &inner,
        &method,
        &uri,
        &body,
        (StatusCode::NOT_FOUND, response),
    )
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
            api_url: Mutex::new(api_url.clone()),
            ..Default::default()
        });
        let app = Router::new()
            .route("/api/v10/gateway", get(gateway))
            .route("/api/v10/gateway/bot", get(gateway))
            .route("/api/v10/users/@me", get(current_user))
            .route("/api/v10/applications/@me", get(current_application))
            .route("/api/v10/applications/{app}/commands", put(set_commands))
            .route(
                "/api/v10/applications/{app}/guilds/{guild}/commands",
                put(set_guild_commands),
            )
            .route("/api/v10/users/@me/channels", post(create_dm))
            .route("/api/v10/channels/{id}", get(get_channel))
            .route(
                "/api/v10/channels/{id}/messages",
                post(create_message).get(channel_messages),
            )
            .route(
                "/api/v10/channels/{cid}/messages/{mid}",
                patch(edit_message).delete(delete_message),
            )
            .route("/api/v10/channels/{cid}/pins/{mid}", put(pin).delete(pin))
            .route(
                "/api/v10/channels/{cid}/messages/pins/{mid}",
                put(pin).delete(pin),
            )
            .route(
                "/api/v10/channels/{cid}/messages/{mid}/threads",
                post(start_thread),
            )
            .route(
                "/api/v10/channels/{cid}/messages/{mid}/reactions/{emoji}/@me",
                put(own_reaction).delete(own_reaction),
            )
            .route("/api/v10/channels/{cid}/typing", post(typing))
            .route("/attachments/{cid}/{aid}/{name}", get(cdn_attachment))
            .route("/api/v10/webhooks/{app}/{token}", post(followup))
            .route(
                "/api/v10/interactions/{id}/{token}/callback",
                post(callback),
            )
            .fallback(unknown)
            .layer(axum::middleware::from_fn_with_state(
                inner.clone(),
                inject_faults,
            ))
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

    /// The global application commands the bot registered last (as answered).
    pub fn commands(&self) -> Vec<Value> {
        self.inner.commands.lock().unwrap().clone()
    }

    /// The application commands the bot registered last in `guild` (as answered).
    pub fn guild_commands(&self, guild: &str) -> Vec<Value> {
        self.inner
            .guild_commands
            .lock()
            .unwrap()
            .get(guild)
            .cloned()
            .unwrap_or_default()
    }

    /// The application id.
    pub fn app_id(&self) -> u64 {
        self.inner.app_id
    }

    /// The bot's user id.
    pub fn bot_id(&self) -> u64 {
        self.inner.bot_id
    }

    /// serenity's real `Http`, pointed at the fake (application id set, rate limiter off).
    pub fn http(&self) -> Arc<Http> {
        Arc::new(
            HttpBuilder::new("fake-token")
                .proxy(self.api_url.clone())
                .ratelimiter_disabled(true)
                .application_id(ApplicationId::new(self.inner.app_id))
                .build(),
        )
    }

    /// A config for `channel::connect` against the fake (token `fake-token`); attachments are
    /// downloaded from the fake's CDN on 127.0.0.1.
    #[cfg(feature = "engine")]
    pub fn config(&self) -> crate::channel::Config {
        crate::channel::Config {
            api_url: Some(self.api_url.clone()),
            file_policy: Some(frogbot_channel::files::FetchPolicy {
                allow_private: true,
                ..frogbot_channel::files::FetchPolicy::for_files()
            }),
            ..crate::channel::Config::new("fake-token", self.inner.app_id)
        }
    }

    /// From now on the write calls (every method but `GET`) fail as `plan` draws, as Discord
    /// fails them: [`Fault::ServerError`] → `500`, nothing done; [`Fault::RateLimited`] → `429`
    /// with `Retry-After` (whole seconds), the `X-RateLimit-*` headers and
    /// `{"message": "You are being rate limited.", "retry_after": <seconds>, "global": false}`,
    /// nothing done; [`Fault::Timeout`] → no answer for [`DEFAULT_FAULT_HOLD`], then `500`,
    /// nothing done; [`Fault::ResetAfterProcessing`] → the call IS carried out, then the
    /// connection drops before the answer's body. Returns the plan (for its counts).
    pub fn set_faults(&self, plan: FaultPlan) -> Arc<FaultPlan> {
        let plan = Arc::new(plan);
        *self.inner.faults.lock().unwrap() = Some(plan.clone());
        plan
    }

    /// The upload limit of one request's files together from now on (a boosted server's; by
    /// default [`DEFAULT_UPLOAD_LIMIT`](super::DEFAULT_UPLOAD_LIMIT), 10 MiB).
    pub fn set_upload_limit(&self, bytes: u64) {
        *self.inner.upload_limit.lock().unwrap() = Some(bytes);
    }

    /// The files the message `id` carries, as uploaded: (attachment object, bytes), in order
    /// (empty for an unknown message or one without files).
    pub fn uploads(&self, id: &str) -> Vec<(Value, Vec<u8>)> {
        let api = self.inner.api_url.lock().unwrap().clone();
        let cdn = self.inner.attachments.lock().unwrap();
        self.message(id)
            .and_then(|m| m["attachments"].as_array().cloned())
            .unwrap_or_default()
            .into_iter()
            .map(|a| {
                let path = a["proxy_url"]
                    .as_str()
                    .and_then(|u| u.strip_prefix(&format!("{api}/attachments/")))
                    .unwrap_or_default()
                    .to_owned();
                let bytes = cdn.get(&path).map(|(_, b)| b.clone()).unwrap_or_default();
                (a, bytes)
            })
            .collect()
    }

    /// No more injected faults.
    pub fn clear_faults(&self) {
        *self.inner.faults.lock().unwrap() = None;
    }

    /// From now on `GET /users/@me` and `GET /applications/@me` accept only `token` (Discord's
    /// `401` otherwise), and the gateway closes a session identifying with another (close code
    /// 4004, Authentication failed).
    pub fn require_token(&self, token: &str) {
        *self.inner.token.lock().unwrap() = Some(token.to_owned());
    }

    /// The application's `flags` from now on (which privileged gateway intents are on).
    pub fn set_application_flags(&self, flags: u64) {
        *self.inner.app_flags.lock().unwrap() = Some(flags);
    }

    /// How long a [`Fault::Timeout`] holds its request.
    pub fn set_fault_hold(&self, hold: Duration) {
        *self.inner.fault_hold.lock().unwrap() = Some(hold);
    }

    /// A new id (snowflake order: later ids are larger), for channels, users and messages.
    pub fn new_id(&self) -> u64 {
        self.inner.next_id()
    }

    /// Every HTTP call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.inner.calls.lock().unwrap().clone()
    }

    /// From now on removing the bot's reactions is refused with `403 Missing Access` (`true`), or
    /// done again.
    pub fn refuse_reaction_removals(&self, refuse: bool) {
        self.inner
            .refuse_unreact
            .store(refuse, std::sync::atomic::Ordering::SeqCst);
    }

    /// The emojis of the bot's own reactions on the message `id` now, in the order it added them.
    pub fn own_reactions(&self, id: &str) -> Vec<String> {
        self.message(id)
            .and_then(|m| m["me_reactions"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|e| e.as_str().map(str::to_owned))
            .collect()
    }

    /// Makes `channel` a thread (a thread channel somebody else started): starting a thread on
    /// one of its messages is refused (400, code 50024), as Discord refuses it.
    pub fn mark_thread(&self, channel: u64) {
        let id = channel.to_string();
        self.inner.threads.lock().unwrap().insert(id.clone());
        let thread = thread_channel(&id, GUILD, "700000000000000007", 1, &json!("a thread"));
        self.inner.channels.lock().unwrap().insert(id, thread);
    }

    /// A new guild text channel (type 0) in `guild`, known to `GET /channels/{id}`: its id.
    pub fn add_text_channel(&self, guild: u64) -> u64 {
        let id = self.new_id();
        self.inner
            .channels
            .lock()
            .unwrap()
            .insert(id.to_string(), text_channel(id, guild, "general"));
        id
    }

    /// Makes the user object `user` someone the bot can open a DM channel with
    /// (`POST /users/@me/channels`).
    pub fn add_user(&self, user: &Value) {
        let id = user["id"].as_str().unwrap_or_default().to_owned();
        self.inner.users.lock().unwrap().insert(id, user.clone());
    }

    /// The DM channel opened with the user `user_id` (`None`: none was opened).
    pub fn dm_of(&self, user_id: &str) -> Option<u64> {
        self.inner
            .dms
            .lock()
            .unwrap()
            .get(user_id)
            .and_then(|id| id.parse().ok())
    }

    /// The messages of `channel` now (the bot's and people's), oldest first.
    pub fn channel_messages(&self, channel: u64) -> Vec<Value> {
        let mut list: Vec<Value> = self
            .inner
            .messages
            .lock()
            .unwrap()
            .values()
            .filter(|m| m["channel_id"] == channel.to_string().as_str())
            .cloned()
            .collect();
        list.sort_by_key(|m| m["id"].as_str().and_then(|i| i.parse::<u64>().ok()));
        list
    }

    /// The message `id` as the fake shows it now (`None`: no such message).
    pub fn message(&self, id: &str) -> Option<Value> {
        self.inner.messages.lock().unwrap().get(id).cloned()
    }

    /// The ids of the pinned messages of `channel`, in the order they were pinned.
    pub fn pins(&self, channel: &str) -> Vec<String> {
        self.inner
            .pins
            .lock()
            .unwrap()
            .iter()
            .filter(|(c, _)| c == channel)
            .map(|(_, m)| m.clone())
            .collect()
    }

    /// The messages deleted so far, as they were.
    pub fn deleted(&self) -> Vec<Value> {
        self.inner.deleted.lock().unwrap().clone()
    }

    /// Every text shown to the user `user_id`: ephemeral interaction responses and followups of
    /// their interactions, and bot messages mentioning them or replying to their messages.
    pub fn notices(&self, user_id: &str) -> Vec<String> {
        let issued = self.inner.interactions.lock().unwrap().clone();
        let messages = self.inner.messages.lock().unwrap().clone();
        let theirs = |token: &str| issued.get(token).is_some_and(|i| i.user == user_id);
        let ephemeral = |v: &Value| v["flags"].as_u64().unwrap_or(0) & 64 != 0;
        let mut out = Vec::new();
        for call in self
            .calls()
            .iter()
            .filter(|c| c.status < 300 && c.method == "POST")
        {
            let parts: Vec<&str> = call
                .path
                .trim_start_matches("/api/v10/")
                .split('/')
                .collect();
            let text = match parts.as_slice() {
                ["webhooks", _, token] if theirs(token) && ephemeral(&call.body) => {
                    call.body["content"].as_str()
                }
                ["interactions", _, token, "callback"]
                    if theirs(token) && call.body["type"] == 4 && ephemeral(&call.body["data"]) =>
                {
                    call.body["data"]["content"].as_str()
                }
                ["channels", _, "messages"] => {
                    let content = call.body["content"].as_str().unwrap_or_default();
                    let replied = call.body["message_reference"]["message_id"]
                        .as_str()
                        .and_then(|id| messages.get(id))
                        .is_some_and(|m| m["author"]["id"] == user_id);
                    let mentioned = content.contains(&format!("<@{user_id}>"));
                    (replied || mentioned).then_some(content)
                }
                _ => None,
            };
            out.extend(text.map(str::to_owned));
        }
        out
    }

    /// Waits until `check` holds for the state, or `timeout` passes (then `false`).
    pub(super) async fn wait_until(
        &self,
        timeout: Duration,
        mut check: impl FnMut() -> bool,
    ) -> bool {
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
}
