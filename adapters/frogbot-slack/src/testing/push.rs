//! What the fake Slack sends an app: Events API payloads and interactivity (clicks, modal
//! submissions) built from what the fake shows, and signed deliveries to the app's endpoints;
//! [`FakeSlack::socket`] hands out the Socket Mode connections (module `socket`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use frogbot_model::now_millis;
use serde_json::{Map, Value, json};

use super::api::{FakeSlack, Message, file_object, lock};
use super::socket::SocketConnection;
use super::{APP, BOT_ID, BOT_USER, TEAM};
use crate::channel::{COMMANDS_PATH, EVENTS_PATH, INTERACTIVITY_PATH, RETRY_HEADER};
use crate::convert::{SIGNATURE_HEADER, TIMESTAMP_HEADER, form_from_payload, sign};
use crate::ids::split_id;

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

impl FakeSlack {
    /// The `assistant_thread_started` event of a person opening an assistant thread
    /// (`channel` a DM, `thread_ts` its root).
    pub fn assistant_thread_started(&self, user: &str, channel: &str, thread_ts: &str) -> Value {
        json!({"type": "assistant_thread_started",
               "assistant_thread": {"user_id": user, "channel_id": channel, "thread_ts": thread_ts,
                                    "context": {"channel_id": null, "team_id": TEAM,
                                                "enterprise_id": null}},
               "event_ts": self.next_ts()})
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
            files: Vec::new(),
            mentioned: super::api::mentioned_users(text, &Value::Null),
        };
        lock(&self.shared).messages.push(m.clone());
        m
    }

    /// Stores a file a person uploads and returns its file object as Slack puts it in a
    /// message event's `files` (`id`, `name`, `title`, `mimetype`, `filetype`, `size`,
    /// `url_private`, `url_private_download`, `mode`, …), its links on this fake.
    pub fn upload_file(&self, name: &str, media_type: &str, bytes: Vec<u8>) -> Value {
        let id = format!("F{:08}", self.shared.seq.fetch_add(1, Ordering::Relaxed));
        let size = bytes.len();
        lock(&self.shared).files.insert(
            format!("{TEAM}-{id}/{name}"),
            (media_type.to_owned(), bytes),
        );
        let base = self.api_url().trim_end_matches("/api").to_owned();
        file_object(&base, &id, name, name, media_type, size, "U123")
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
}

impl FakeSlack {
    /// The slash command Slack sends when `user` types `{command} {typed}` in `channel` (a
    /// channel or a DM): its fields (`token`, `team_id`, `team_domain`, `channel_id`,
    /// `channel_name`, `user_id`, `user_name`, `command`, `text`, `api_app_id`,
    /// `is_enterprise_install`, `response_url`, `trigger_id`: a fresh one), every value a
    /// string, as a Socket Mode `slash_commands` envelope carries them and as
    /// [`FakeSlack::post_command`] form-encodes them. The text is escaped as Slack does with
    /// "Escape channels, users, and links" on: `&`, `<`, `>` as `&amp;`, `&lt;`, `&gt;`, and each
    /// `@name` of a person the fake knows ([`FakeSlack::set_user_name`]) as `<@U…|name>`.
    pub fn slash_command(&self, user: &str, channel: &str, command: &str, typed: &str) -> Value {
        let names = lock(&self.shared).names.clone();
        let text = escape_people(typed, &names);
        let user_name = names
            .get(user)
            .cloned()
            .unwrap_or_else(|| user.to_lowercase());
        let trigger = self.trigger_id();
        let channel_name = if channel.starts_with('D') {
            "directmessage"
        } else {
            "ops"
        };
        json!({
            "token": "legacy-verification-token",
            "team_id": TEAM,
            "team_domain": "frogs",
            "channel_id": channel,
            "channel_name": channel_name,
            "user_id": user,
            "user_name": user_name,
            "command": command,
            "text": text,
            "api_app_id": APP,
            "is_enterprise_install": "false",
            "response_url": format!("https://hooks.slack.com/commands/{TEAM}/1/fake"),
            "trigger_id": trigger,
        })
    }

    /// Posts a slash command ([`FakeSlack::slash_command`]) to the app at `base` as Slack does:
    /// its fields `application/x-www-form-urlencoded` to the command's request URL
    /// ([`COMMANDS_PATH`]), signed.
    pub async fn post_command(
        &self,
        base: &str,
        command: &Value,
        sig: Signature,
    ) -> reqwest::Response {
        let mut form = form_urlencoded::Serializer::new(String::new());
        for (k, v) in command.as_object().into_iter().flatten() {
            form.append_pair(k, v.as_str().unwrap_or_default());
        }
        self.post_signed(
            &format!("{base}{COMMANDS_PATH}"),
            "application/x-www-form-urlencoded",
            form.finish(),
            sig,
            None,
        )
        .await
    }
}

/// `typed` as Slack sends a slash command's text with escaping on: `&<>` escaped, then each
/// `@name` of a known person (`names`: user id → name; the longest name that ends where a word
/// does) as `<@U…|name>`.
fn escape_people(typed: &str, names: &HashMap<String, String>) -> String {
    let text = typed
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find('@') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let found = names
            .iter()
            .filter(|(_, name)| {
                after.starts_with(name.as_str())
                    && !after[name.len()..]
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
            })
            .max_by_key(|(_, name)| name.len());
        match found {
            Some((id, name)) => {
                out.push_str(&format!("<@{id}|{name}>"));
                rest = &after[name.len()..];
            }
            None => {
                out.push('@');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
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
pub(super) fn input_state(blocks: &Value, chosen: &HashMap<String, Vec<Value>>) -> Value {
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
