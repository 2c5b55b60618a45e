//! A fake Discord for tests and benchmarks (feature `testing`), like matrix-sdk's
//! `MatrixMockServer`: the HTTP API routes this adapter uses and a gateway websocket, both on
//! 127.0.0.1, speaking Discord's documented shapes; plus [`DiscordHarness`], the
//! `ChannelQuestions` conformance harness over it.
//!
//! What it is for: pointing serenity's real `Http` (through `HttpBuilder::proxy`, rate limiter
//! disabled: [`FakeDiscord::http`]) and real gateway `Client` at something local.
//! `GET /api/v10/gateway` and `GET /api/v10/gateway/bot` return the fake gateway's `ws://` URL;
//! the gateway sends Hello (op 10), answers Identify (op 2) with a READY dispatch and heartbeats
//! (op 1) with op 11, and then forwards whatever [`FakeDiscord::dispatch`] /
//! [`FakeDiscord::send_raw`] are given (an `INTERACTION_CREATE` dispatched is registered, so its
//! token answers followups).
//!
//! Sharding, as Discord does it: `GET /gateway/bot` recommends [`FakeDiscord::set_shards`] shards
//! (1 by default); a session's Identify `shard: [id, total]` is kept (READY echoes it) and a
//! dispatch with a `guild_id` goes to the sessions with `(guild_id >> 22) % total == id`, one
//! without (a DM) to shard 0's. [`FakeDiscord::live_shards`] lists the connected sessions'
//! shards and [`FakeDiscord::deliveries`] counts, per guild, the sessions its dispatches reached.
//!
//! It keeps the messages the bot posted (components included: [`FakeDiscord::message`]) and
//! refuses, as Discord does (400 `Invalid Form Body`, code 50035), what breaks Discord's limits:
//! content over 2,000 characters, more than 5 action rows, more than 5 buttons a row or a select
//! sharing its row, a select with no or more than 25 options or `max_values` above its option
//! count, a button label over 80 characters, a select option label, value or description over
//! 100, a placeholder over 150, a `custom_id` over 100 or used twice in a message, a button style
//! other than 1–5 or a button without label, a thread name over 100; in a modal (an interaction
//! response of type 9): a title over 45 or empty, no or more than 5 rows, a row that is not an
//! action row holding exactly one text input (type 4), a text input without `custom_id` or with
//! one used twice, a style other than 1 (short) or 2 (paragraph), a label over 45 or empty, a
//! placeholder over 100, `min_length` over 4,000, `max_length` outside 1–4,000 or below
//! `min_length`, a `value` over 4,000 or longer than `max_length`. An edit of an
//! unknown message is 404 (`Unknown Message`, 10008); a followup with an unknown interaction
//! token 404 (`Unknown Webhook`, 10015); a second response to one interaction 400 (40060). Every
//! HTTP call is recorded ([`FakeDiscord::calls`], [`FakeDiscord::wait_for`]). Message edits
//! (`PATCH`) change the kept message; `GET /channels/{id}/messages?before=&limit=` pages a
//! channel's messages newest first ([`FakeDiscord::channel_messages`]); starting a thread on a
//! message in a thread ([`FakeDiscord::mark_thread`], or one the bot started) is 400 (50024), in a
//! DM channel 400 (50003), on a message that has one 400 (160004); a started thread (type 11) has
//! its message's id and is a channel from then on. `GET /channels/{id}` answers the channel
//! object of a text channel ([`FakeDiscord::add_text_channel`]), a thread or a DM channel, else
//! 404 (`Unknown Channel`, 10003); `POST /users/@me/channels` (`recipient_id`) opens the DM
//! channel (type 1, `recipients`) with a user the fake knows ([`FakeDiscord::add_user`]), the same
//! one every time, else 400 (`Invalid Recipient(s)`, 50033). A message posted with a `nonce` and
//! `enforce_nonce: true` that one of the bot's carried within [`NONCE_WINDOW`] is not posted
//! again: the first message is answered. Embeds are kept and checked (at most 10, title 256,
//! description 4,096, 25 fields of name 256 / value 1,024, 6,000 characters across a message's
//! embeds, an `http(s)` image URL). `DELETE /channels/{c}/messages/{m}` deletes (404 `Unknown
//! Message` for one gone); `PUT` / `DELETE /channels/{c}/pins/{m}` (serenity 0.12's route) and
//! `/channels/{c}/messages/pins/{m}` (Discord's newer one) pin and unpin ([`FakeDiscord::pins`],
//! at most 50 a channel).
//!
//! What a person sees ([`FakeDiscord::person_view`], [`SeenMessage`], [`transcript`]): the
//! messages of a conversation in order after edits and deletions, with their controls, the bot's
//! reactions, whether posting them notified (a message created does, unless it carries
//! `SUPPRESS_NOTIFICATIONS`; an edit never does) and what only one person was shown (ephemeral
//! responses and followups, modals opened: the fake keeps them for this).
//!
//! What it must not do: be used by a bot. It checks no tokens and no rate limits and keeps
//! everything in memory.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post, put};
use frogbot_model::conformance::{Harness, Limits};
use frogbot_model::faults::{Fault, FaultPlan};
use frogbot_model::{
    ChannelQuestions, Interaction, PlatformUser, QuestionCall, QuestionRecord, Thread,
};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use serenity::http::{Http, HttpBuilder};
use serenity::model::id::ApplicationId;
use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::DiscordQuestions;
use crate::convert;

mod view;
pub use view::{SeenMessage, seen, transcript};

/// One recorded HTTP call.
#[derive(Clone, Debug)]
pub struct Call {
    /// `GET`, `POST`, `PATCH`, …
    pub method: String,
    /// The path, e.g. `/api/v10/channels/1/messages`.
    pub path: String,
    /// The JSON body (`null` when there was none).
    pub body: Value,
    /// The HTTP status the fake answered.
    pub status: u16,
    /// What the fake answered (`null` for an empty response).
    pub response: Value,
    /// When it arrived.
    pub at: Instant,
}

/// An identified gateway session: the shard it identified as (`[id, total]`) and where its
/// dispatches go.
#[derive(Debug)]
struct Session {
    number: u64,
    shard: (u64, u64),
    tx: mpsc::UnboundedSender<String>,
}

impl Session {
    /// Whether Discord sends this session a dispatch of `guild` (`None`: a DM, shard 0 only):
    /// `(guild_id >> 22) % total == id`.
    fn receives(&self, guild: Option<u64>) -> bool {
        let (id, total) = self.shard;
        match guild {
            Some(g) => (g >> 22) % total.max(1) == id,
            None => id == 0,
        }
    }
}

/// An interaction the fake delivered (or was told about): whose it is and whether it was answered.
#[derive(Clone, Debug)]
struct Issued {
    id: String,
    user: String,
    /// The channel it came from (where its responses show).
    channel: String,
    responded: bool,
}

#[derive(Debug, Default)]
struct Inner {
    calls: Mutex<Vec<Call>>,
    changed: Notify,
    next_id: AtomicU64,
    seq: AtomicU64,
    sessions: Mutex<Vec<Session>>,
    /// The number of shards `GET /gateway/bot` recommends (0: 1).
    shards: AtomicU64,
    /// How many sessions each guild's dispatches were handed to, by guild id.
    deliveries: Mutex<HashMap<u64, u64>>,
    identifies: Mutex<Vec<Value>>,
    heartbeats: AtomicU64,
    readies: AtomicU64,
    app_id: u64,
    bot_id: u64,
    gateway_url: Mutex<String>,
    heartbeat_ms: u64,
    /// Messages by id (what the bot posted and what users said through the fake).
    messages: Mutex<HashMap<String, Value>>,
    /// Interactions by token.
    interactions: Mutex<HashMap<String, Issued>>,
    /// Whether removing the bot's reactions is refused (`403 Missing Access`).
    refuse_unreact: std::sync::atomic::AtomicBool,
    /// Channels that are threads (no thread can be started on their messages).
    threads: Mutex<std::collections::HashSet<String>>,
    /// Messages a thread was started from (a second start is refused, `160004`).
    started: Mutex<std::collections::HashSet<String>>,
    /// The bot's message nonces (with `enforce_nonce`): nonce → (message id, when).
    nonces: Mutex<HashMap<String, (String, Instant)>>,
    /// Channel objects by id (`GET /channels/{id}`): text channels, threads, DM channels.
    channels: Mutex<HashMap<String, Value>>,
    /// The users the bot can open a DM with, by id.
    users: Mutex<HashMap<String, Value>>,
    /// The DM channel of each user (one each, as Discord keeps it).
    dms: Mutex<HashMap<String, String>>,
    /// Injected faults on the write endpoints.
    faults: Mutex<Option<Arc<FaultPlan>>>,
    /// The pinned messages: (channel, message) in the order they were pinned.
    pins: Mutex<Vec<(String, String)>>,
    /// The messages deleted, as they were.
    deleted: Mutex<Vec<Value>>,
    /// What only one person sees: ephemeral interaction responses and followups, and the modals
    /// opened, each a message object with an id in snowflake order, its `channel_id` and
    /// `only_for` (the user id); a modal has `modal` (its `data`).
    ephemerals: Mutex<Vec<Value>>,
    /// How long a [`Fault::Timeout`] holds its request (`None`: [`DEFAULT_FAULT_HOLD`]).
    fault_hold: Mutex<Option<Duration>>,
    /// The bot token `GET /users/@me` and `GET /applications/@me` accept (any when `None`):
    /// another gets Discord's `401: Unauthorized`.
    token: Mutex<Option<String>>,
    /// The application's `flags` (`GET /applications/@me`); `None`: the Message Content intent
    /// on for an app in under 100 servers (`GATEWAY_MESSAGE_CONTENT_LIMITED`, `1 << 19`).
    app_flags: Mutex<Option<u64>>,
}

/// The `EPHEMERAL` message flag (`1 << 6`): only the interaction's user sees the message.
pub const EPHEMERAL: u64 = 1 << 6;

/// The `SUPPRESS_NOTIFICATIONS` message flag (`1 << 12`): the message notifies no one.
pub const SUPPRESS_NOTIFICATIONS: u64 = 1 << 12;

/// How long Discord remembers a message nonce for `enforce_nonce` ("the past few minutes").
pub const NONCE_WINDOW: Duration = Duration::from_secs(5 * 60);

/// How long a [`Fault::Timeout`] holds its request by default before answering `500` (having
/// done nothing): longer than a test's client timeout.
pub const DEFAULT_FAULT_HOLD: Duration = Duration::from_secs(2);

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

/// A guild text channel object (type 0) as `GET /channels/{id}` returns it.
pub fn text_channel(id: u64, guild: u64, name: &str) -> Value {
    json!({
        "id": id.to_string(), "type": 0, "guild_id": guild.to_string(), "name": name,
        "position": 0, "flags": 0, "parent_id": null, "topic": null, "last_message_id": null,
        "permission_overwrites": [], "rate_limit_per_user": 0, "nsfw": false
    })
}

/// A public thread channel object (type 11) in `parent`, started by `owner`, as Discord returns
/// it when starting a thread and from `GET /channels/{id}`.
pub fn thread_channel(id: &str, guild: u64, parent: &str, owner: u64, name: &Value) -> Value {
    json!({
        "id": id,
        "type": 11,
        "guild_id": guild.to_string(),
        "parent_id": parent,
        "owner_id": owner.to_string(),
        "name": name,
        "last_message_id": null,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "thread_metadata": {"archived": false, "auto_archive_duration": 1440, "archive_timestamp": "2026-01-01T00:00:00.000000+00:00", "locked": false},
        "flags": 0
    })
}

/// A DM channel object (type 1) with `recipient` (a user object), as `POST /users/@me/channels`
/// and `GET /channels/{id}` return it.
pub fn dm_channel(id: &str, recipient: &Value) -> Value {
    json!({
        "id": id, "type": 1, "last_message_id": null, "flags": 0, "name": null,
        "recipients": [recipient]
    })
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
        "flags": 0,
        "components": []
    });
    if let Some(guild) = guild {
        m["guild_id"] = json!(guild.to_string());
    }
    m
}

/// An `INTERACTION_CREATE` of type 3 (`MESSAGE_COMPONENT`) as Discord sends it: a click on
/// `custom_id` (component type 2, a button) or, with `values`, a string select (component type 3),
/// on `message_id` in `channel` (a DM-shaped interaction: `user`, no `member`).
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
    let shown = message(
        message_id,
        channel,
        None,
        &user(app_id, "frogbot", true),
        "",
        &[],
    );
    component_on(id, app_id, &shown, None, clicker, custom_id, values, token)
}

/// [`component_interaction`] on the message object `shown` (as the fake keeps it: its
/// components are in the payload, as Discord sends them). In a `guild` the clicker comes as
/// `member` (with `user` inside) and `guild_id` is set, as Discord sends it; else as `user`.
#[allow(clippy::too_many_arguments)] // one argument per field of the payload a test varies
pub fn component_on(
    id: u64,
    app_id: u64,
    shown: &Value,
    guild: Option<u64>,
    clicker: &Value,
    custom_id: &str,
    values: Option<&[&str]>,
    token: &str,
) -> Value {
    let data = match values {
        Some(values) => json!({"custom_id": custom_id, "component_type": 3, "values": values}),
        None => json!({"custom_id": custom_id, "component_type": 2}),
    };
    let channel = shown["channel_id"].clone();
    let mut payload = json!({
        "id": id.to_string(),
        "application_id": app_id.to_string(),
        "type": 3,
        "data": data,
        "channel_id": channel,
        "channel": {"id": channel, "type": if guild.is_some() { 11 } else { 1 }},
        "token": token,
        "version": 1,
        "message": shown,
        "app_permissions": "2248473465835073",
        "locale": "en-US",
        "entitlements": [],
        "attachment_size_limit": 26214400
    });
    match guild {
        Some(guild) => {
            payload["guild_id"] = json!(guild.to_string());
            payload["guild_locale"] = json!("en-US");
            payload["member"] = json!({
                "user": clicker, "roles": [], "joined_at": "2025-01-01T00:00:00.000000+00:00",
                "deaf": false, "mute": false, "flags": 0, "pending": false,
                "permissions": "2248473465835073", "nick": null, "avatar": null
            });
            payload["authorizing_integration_owners"] = json!({"0": guild.to_string()});
            payload["context"] = json!(0);
        }
        None => {
            payload["user"] = clicker.clone();
            payload["authorizing_integration_owners"] = json!({"1": clicker["id"]});
            payload["context"] = json!(1);
        }
    }
    payload
}

/// An `INTERACTION_CREATE` of type 5 (`MODAL_SUBMIT`): text inputs `values` (custom id, text) in
/// action rows, one a row, in a modal whose custom id is `custom_id`. As Discord sends it, each
/// component carries its numeric `id` and a text input its `type` (4), `custom_id` and `value`
/// (`""` for an optional input left empty) and nothing else of what the modal set.
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
        .enumerate()
        .map(|(n, (id, text))| {
            let n = 2 * n as u64;
            json!({"type": 1, "id": n + 1, "components":
                [{"type": 4, "id": n + 2, "custom_id": id, "value": text}]})
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
        let at = Instant::now();
        let body = serde_json::from_str(body).unwrap_or(Value::Null);
        self.calls.lock().unwrap().push(Call {
            method: method.to_string(),
            path: uri.path().to_owned(),
            body,
            status: status.as_u16(),
            response: response.clone(),
            at,
        });
        self.changed.notify_waiters();
    }

    fn next_id(&self) -> u64 {
        900_000_000_000_000_000 + self.next_id.fetch_add(1, Ordering::SeqCst)
    }

    /// Stores a message the bot posted in `channel`.
    fn post(&self, channel: &str, body: &Value) -> Value {
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
        self.messages
            .lock()
            .unwrap()
            .insert(m["id"].as_str().unwrap_or_default().to_owned(), m.clone());
        m
    }

    /// Posts a message, unless it carries a `nonce` with `enforce_nonce: true` that a message of
    /// the bot's carried within [`NONCE_WINDOW`]: then that message is returned, nothing posted
    /// (Discord's de-duplication).
    fn post_once(&self, channel: &str, body: &Value) -> Value {
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
            let m = self.post(channel, body);
            let id = m["id"].as_str().unwrap_or_default().to_owned();
            nonces.insert(nonce.clone(), (id, Instant::now()));
            return m;
        }
        self.post(channel, body)
    }

    /// Registers an interaction payload (its token answers followups and one callback).
    fn issue(&self, payload: &Value, responded: bool) {
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
/// `GET`).
async fn inject_faults(
    State(inner): State<Arc<Inner>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
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

async fn create_message(
    State(inner): State<Arc<Inner>>,
    Path(channel): Path<String>,
    method: Method,
    uri: Uri,
    body: String,
) -> Response {
    let parsed = parse_body(&body);
    let reply = match check_message(&parsed) {
        Err(reason) => invalid_form(&reason),
        Ok(())
            if chars(&parsed["content"]) == 0
                && parsed["components"].as_array().is_none_or(Vec::is_empty)
                && parsed["embeds"].as_array().is_none_or(Vec::is_empty) =>
        {
            (
                StatusCode::BAD_REQUEST,
                json!({"code": 50006, "message": "Cannot send an empty message"}),
            )
        }
        Ok(()) => (StatusCode::OK, inner.post_once(&channel, &parsed)),
    };
    respond(&inner, &method, &uri, &body, reply)
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

async fn gateway_session(inner: Arc<Inner>, stream: tokio::net::TcpStream) {
    let Ok(ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    // This connection's number, once identified (its entry in `sessions` goes when it closes).
    let mut identified: Option<u64> = None;
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
                        let want = inner.token.lock().unwrap().clone();
                        if want.is_some_and(|t| payload["d"]["token"] != format!("Bot {t}")) {
                            // Discord's close code 4004: Authentication failed.
                            let close = tokio_tungstenite::tungstenite::protocol::CloseFrame {
                                code: 4004.into(),
                                reason: "Authentication failed.".into(),
                            };
                            let _ = sink.send(WsMessage::Close(Some(close))).await;
                            break;
                        }
                        let shard = &payload["d"]["shard"];
                        let shard = (
                            shard[0].as_u64().unwrap_or(0),
                            shard[1].as_u64().unwrap_or(1).max(1),
                        );
                        let number = inner.next_id();
                        let url = inner.gateway_url.lock().unwrap().clone();
                        let ready = json!({
                            "v": 10,
                            "user": {"id": inner.bot_id.to_string(), "username": "frogbot", "discriminator": "0", "avatar": null, "bot": true, "verified": true, "mfa_enabled": false, "flags": 0},
                            "guilds": [],
                            "session_id": format!("fake-session-{number}"),
                            "resume_gateway_url": url,
                            "shard": [shard.0, shard.1],
                            "application": {"id": inner.app_id.to_string(), "flags": 0}
                        });
                        let seq = inner.seq.fetch_add(1, Ordering::SeqCst) + 1;
                        let text = json!({"op": 0, "s": seq, "t": "READY", "d": ready}).to_string();
                        if sink.send(WsMessage::Text(text)).await.is_err() {
                            break;
                        }
                        inner.sessions.lock().unwrap().push(Session {
                            number,
                            shard,
                            tx: tx.clone(),
                        });
                        identified = Some(number);
                        inner.readies.fetch_add(1, Ordering::SeqCst);
                        inner.changed.notify_waiters();
                    }
                    _ => {}
                }
            }
        }
    }
    if let Some(number) = identified {
        inner
            .sessions
            .lock()
            .unwrap()
            .retain(|s| s.number != number);
        inner.changed.notify_waiters();
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
            .route("/api/v10/applications/@me", get(current_application))
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

    /// A config for `channel::connect` against the fake (token `fake-token`).
    #[cfg(feature = "engine")]
    pub fn config(&self) -> crate::channel::Config {
        crate::channel::Config {
            api_url: Some(self.api_url.clone()),
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

    /// Stores a message `author` wrote in `channel` (ids after every earlier message's) and
    /// returns it; dispatch it as `MESSAGE_CREATE` to deliver it.
    pub fn user_message(
        &self,
        channel: u64,
        guild: Option<u64>,
        author: &Value,
        text: &str,
    ) -> Value {
        let m = message(self.new_id(), channel, guild, author, text, &[]);
        self.inner
            .messages
            .lock()
            .unwrap()
            .insert(m["id"].as_str().unwrap_or_default().to_owned(), m.clone());
        m
    }

    /// Registers an interaction payload delivered some other way than the gateway (e.g. posted
    /// to the interactions endpoint, whose HTTP response is its answer: `responded`), so its
    /// token answers followups.
    pub fn register_interaction(&self, payload: &Value, responded: bool) {
        self.inner.issue(payload, responded);
    }

    /// The identify payloads received (`d` of op 2).
    pub fn identifies(&self) -> Vec<Value> {
        self.inner.identifies.lock().unwrap().clone()
    }

    /// How many heartbeats (op 1) were acknowledged.
    pub fn heartbeats(&self) -> u64 {
        self.inner.heartbeats.load(Ordering::SeqCst)
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

    /// Sends a dispatch (op 0) `t` with data `d` to the identified sessions that Discord sends
    /// it to: with a `guild_id`, each session whose shard `[id, total]` has
    /// `(guild_id >> 22) % total == id`; without (a DM), each session of shard 0 — so with
    /// unsharded sessions (`[0, 1]`), every one. Returns the time it was handed to the sockets.
    /// A guild's dispatches are counted per session reached ([`FakeDiscord::deliveries`]). An
    /// `INTERACTION_CREATE` is registered first (its token then answers one callback and
    /// followups).
    pub fn dispatch(&self, t: &str, d: Value) -> Instant {
        if t == "INTERACTION_CREATE" {
            self.inner.issue(&d, false);
        }
        let guild = d["guild_id"].as_str().and_then(|g| g.parse::<u64>().ok());
        let seq = self.inner.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let text = json!({"op": 0, "s": seq, "t": t, "d": d}).to_string();
        let at = Instant::now();
        let mut reached = 0;
        self.inner.sessions.lock().unwrap().retain(|s| {
            if !s.receives(guild) {
                return true;
            }
            let sent = s.tx.send(text.clone()).is_ok();
            reached += u64::from(sent);
            sent
        });
        if let Some(g) = guild {
            *self.inner.deliveries.lock().unwrap().entry(g).or_default() += reached;
        }
        at
    }

    /// Sends a raw text frame to every identified session (for malformed payloads).
    pub fn send_raw(&self, text: &str) -> Instant {
        let at = Instant::now();
        self.inner
            .sessions
            .lock()
            .unwrap()
            .retain(|s| s.tx.send(text.to_owned()).is_ok());
        at
    }

    /// Makes `GET /gateway/bot` recommend `shards` shards (1 until set).
    pub fn set_shards(&self, shards: u64) {
        self.inner.shards.store(shards, Ordering::SeqCst);
    }

    /// The shards (`[id, total]`) of the identified sessions still connected, sorted (a shard
    /// twice when two sessions identified as it).
    pub fn live_shards(&self) -> Vec<(u64, u64)> {
        let mut shards: Vec<_> = self
            .inner
            .sessions
            .lock()
            .unwrap()
            .iter()
            .filter(|s| !s.tx.is_closed())
            .map(|s| s.shard)
            .collect();
        shards.sort_unstable();
        shards
    }

    /// Waits until the live sessions are exactly shards `0..total` of `total`, once each (every
    /// guild reaches one session), or `timeout` passes (then `false`).
    pub async fn wait_shards_covered(&self, total: u64, timeout: Duration) -> bool {
        let want: Vec<(u64, u64)> = (0..total).map(|id| (id, total)).collect();
        self.wait_until(timeout, || self.live_shards() == want)
            .await
    }

    /// How many sessions the dispatches of `guild` were handed to, all told.
    pub fn deliveries(&self, guild: u64) -> u64 {
        self.inner
            .deliveries
            .lock()
            .unwrap()
            .get(&guild)
            .copied()
            .unwrap_or(0)
    }

    /// The shard (of `total`) that receives `guild`'s events: `(guild_id >> 22) % total`.
    pub fn shard_of(guild: u64, total: u64) -> u64 {
        (guild >> 22) % total.max(1)
    }
}

// ---- The conformance harness ----

/// The guild the harness's threads are in.
const GUILD: u64 = 100_000_000_000_000_001;

/// The `ChannelQuestions` conformance harness: [`DiscordQuestions`] over serenity's real `Http`
/// against a [`FakeDiscord`]. Interactions are built from the components the fake shows on the
/// message (their real `custom_id`s and option values), as Discord delivers them
/// (`INTERACTION_CREATE` JSON with a token the fake knows), and converted through
/// [`convert::interaction_from_gateway`]; replies through [`convert::message_interaction`].
pub struct DiscordHarness {
    /// The fake.
    pub fake: FakeDiscord,
    hooks: DiscordQuestions,
    users: Mutex<HashMap<String, u64>>,
}

impl std::fmt::Debug for DiscordHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordHarness")
            .field("fake", &self.fake.api_url)
            .finish_non_exhaustive()
    }
}

/// A fresh fake Discord and a harness over it.
pub async fn conformance_harness() -> DiscordHarness {
    let fake = FakeDiscord::start(600_000_000_000_000_006, 610_000_000_000_000_006).await;
    DiscordHarness {
        hooks: DiscordQuestions::new(fake.http()),
        fake,
        users: Mutex::default(),
    }
}

impl DiscordHarness {
    /// The Discord user object standing for `user` (a snowflake of its own per id).
    fn discord_user(&self, user: &PlatformUser) -> Value {
        let id = *self
            .users
            .lock()
            .unwrap()
            .entry(user.id.clone())
            .or_insert_with(|| self.fake.new_id());
        self::user(id, user.name.as_deref().unwrap_or("someone"), user.is_bot)
    }

    /// The components of question `q`'s current message of `record`, as the fake shows them.
    fn shown(&self, record: &QuestionRecord, q: usize) -> Option<Value> {
        let m = record
            .messages
            .iter()
            .rev()
            .find(|m| m.question == Some(q))
            .or(record.messages.last())?;
        self.fake.message(&m.id)
    }
}

/// The answer controls of a message's components: buttons (but "Other…" and "Answer…", which
/// open a form, "No answer" and "Skip") and select options, as `(custom_id, Some(value) for a
/// select option)`, in display order.
fn answer_controls(shown: &Value) -> Vec<(String, Option<String>)> {
    controls_of(shown)
        .into_iter()
        .filter(|(_, label, _)| {
            ![
                "Other…",
                "Skip",
                crate::render::ANSWER_LABEL,
                crate::render::NO_ANSWER_LABEL,
            ]
            .contains(&label.as_str())
        })
        .map(|(id, _, value)| (id, value))
        .collect()
}

/// Every control of a message's components: each button as `(custom_id, label, None)`, each
/// select option as `(select's custom_id, "", Some(value))`, in display order.
fn controls_of(shown: &Value) -> Vec<(String, String, Option<String>)> {
    let mut out = Vec::new();
    for row in shown["components"].as_array().into_iter().flatten() {
        for c in row["components"].as_array().into_iter().flatten() {
            let id = c["custom_id"].as_str().unwrap_or_default().to_owned();
            match c["type"].as_u64() {
                Some(2) => {
                    let label = c["label"].as_str().unwrap_or_default().to_owned();
                    out.push((id, label, None));
                }
                Some(3) => {
                    for o in c["options"].as_array().into_iter().flatten() {
                        let value = o["value"].as_str().map(str::to_owned);
                        out.push((id.clone(), String::new(), value));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

#[async_trait]
impl Harness for DiscordHarness {
    fn hooks(&self) -> &dyn ChannelQuestions {
        &self.hooks
    }

    async fn thread(&self) -> Thread {
        let id = self.fake.new_id().to_string();
        Thread {
            chat_id: format!("discord:{id}"),
            id,
            platform: crate::PLATFORM.into(),
        }
    }

    fn limits(&self) -> Limits {
        // One question a message, asked in turn; up to 4 string selects of 25 options (the
        // fifth row holds "Skip").
        Limits {
            questions: 10,
            options: 100,
            label: 100,
        }
    }

    async fn choose(
        &self,
        _thread: &Thread,
        _call: &QuestionCall,
        record: &QuestionRecord,
        q: usize,
        options: &[usize],
        user: &PlatformUser,
    ) -> Vec<Interaction> {
        let Some(shown) = self.shown(record, q) else {
            return Vec::new();
        };
        let controls = answer_controls(&shown);
        // One interaction per control: a button click each, or one select with every value.
        let mut picked: Vec<(String, Vec<String>, bool)> = Vec::new();
        for &o in options {
            let Some((id, value)) = controls.get(o) else {
                continue;
            };
            match (
                value,
                picked.iter_mut().find(|(p, _, select)| p == id && *select),
            ) {
                (Some(v), Some((_, values, _))) => values.push(v.clone()),
                (Some(v), None) => picked.push((id.clone(), vec![v.clone()], true)),
                (None, _) => picked.push((id.clone(), vec![], false)),
            }
        }
        let clicker = self.discord_user(user);
        picked
            .into_iter()
            .map(|(custom_id, values, select)| {
                let id = self.fake.new_id();
                let token = format!("tok-{id}");
                let values: Vec<&str> = values.iter().map(String::as_str).collect();
                let payload = component_on(
                    id,
                    self.fake.app_id(),
                    &shown,
                    Some(GUILD),
                    &clicker,
                    &custom_id,
                    select.then_some(values.as_slice()),
                    &token,
                );
                self.fake.register_interaction(&payload, false);
                let dispatch = json!({"op": 0, "s": 1, "t": "INTERACTION_CREATE", "d": payload});
                convert::interaction_from_gateway(&dispatch.to_string())
                    .expect("the fake's interaction converts")
            })
            .collect()
    }

    async fn reply(&self, thread: &Thread, text: &str, user: &PlatformUser) -> Interaction {
        let author = self.discord_user(user);
        let channel = thread.id.parse().expect("a snowflake thread");
        let m = self.fake.user_message(channel, Some(GUILD), &author, text);
        let message: serenity::model::channel::Message =
            serde_json::from_value(m).expect("a Discord message");
        convert::message_interaction(&message)
    }

    async fn skip(
        &self,
        _thread: &Thread,
        _call: &QuestionCall,
        record: &QuestionRecord,
        user: &PlatformUser,
    ) -> Interaction {
        let current = record.current().expect("a question message");
        let shown = self
            .fake
            .message(&current.id)
            .unwrap_or_else(|| panic!("the fake knows no message {}", current.id));
        let (custom_id, _, _) = controls_of(&shown)
            .into_iter()
            .find(|(_, label, _)| label == "Skip")
            .unwrap_or_else(|| panic!("message {} shows no Skip button: {shown}", current.id));
        let id = self.fake.new_id();
        let token = format!("tok-{id}");
        let payload = component_on(
            id,
            self.fake.app_id(),
            &shown,
            Some(GUILD),
            &self.discord_user(user),
            &custom_id,
            None,
            &token,
        );
        self.fake.register_interaction(&payload, false);
        let dispatch = json!({"op": 0, "s": 1, "t": "INTERACTION_CREATE", "d": payload});
        convert::interaction_from_gateway(&dispatch.to_string())
            .expect("the fake's interaction converts")
    }

    async fn controls(&self, message_id: &str) -> usize {
        self.fake
            .message(message_id)
            .map_or(0, |m| controls_of(&m).len())
    }

    async fn shown_text(&self, message_id: &str) -> String {
        self.fake.message(message_id).map_or_else(String::new, |m| {
            m["content"].as_str().unwrap_or_default().to_owned()
        })
    }

    async fn notices(&self, user: &PlatformUser) -> Vec<String> {
        let id = self.discord_user(user);
        self.fake.notices(id["id"].as_str().unwrap_or_default())
    }
}
