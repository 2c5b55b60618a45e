//! Pure reading of what Slack sends: request signatures ([`verify`]: `X-Slack-Signature`,
//! `X-Slack-Request-Timestamp`), interaction payloads and Events API messages (slack-morphism
//! types) into FrogBot interactions and thread messages, mentions and the bot's own messages.
//! No I/O.
//!
//! Slack signs `v0:{timestamp}:{body}` with HMAC-SHA256 under the app's signing secret and sends
//! `v0=<hex>`. Requests more than five minutes old (or ahead) are refused to stop replays.

use frogbot_model::{
    ActionEvent, Interaction, Mention, ModalSubmitEvent, PlatformUser, ThreadMessage,
    ThreadMessageMetadata, millis_to_iso,
};
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;
use slack_morphism::prelude::*;

use crate::Error;
use crate::ids::{message_id, thread_id};

/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-slack-signature";
/// The timestamp header.
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";
/// How far a request timestamp may be from now, in seconds.
pub const MAX_SKEW_SECS: i64 = 5 * 60;

fn mac(secret: &str, timestamp: &str, body: &[u8]) -> Result<Hmac<Sha256>, Error> {
    if secret.is_empty() {
        return Err(Error::EmptySecret);
    }
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).map_err(|_| Error::EmptySecret)?;
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    Ok(mac)
}

/// The `X-Slack-Signature` value Slack would send for this body (`v0=<hex>`); for tests and tools.
pub fn sign(secret: &str, timestamp: &str, body: &[u8]) -> Result<String, Error> {
    let tag = mac(secret, timestamp, body)?.finalize().into_bytes();
    Ok(format!("v0={}", hex::encode(tag)))
}

/// Verifies a Slack request: `timestamp` and `signature` are the raw header values, `body` the raw
/// request body, `now_secs` the current Unix time in seconds. The comparison is constant-time.
pub fn verify(
    secret: &str,
    timestamp: &str,
    signature: &str,
    body: &[u8],
    now_secs: i64,
) -> Result<(), Error> {
    let ts: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| Error::MalformedTimestamp)?;
    // Checked: `now - ts` overflows for timestamps near `i64::MIN` / `i64::MAX` (and `abs` of
    // `i64::MIN` overflows too), which must not wrap into the window.
    let fresh = now_secs
        .checked_sub(ts)
        .and_then(i64::checked_abs)
        .is_some_and(|skew| skew <= MAX_SKEW_SECS);
    if !fresh {
        return Err(Error::StaleTimestamp);
    }
    let hex_sig = signature
        .trim()
        .strip_prefix("v0=")
        .ok_or(Error::MalformedSignature)?;
    let expected = hex::decode(hex_sig).map_err(|_| Error::MalformedSignature)?;
    if expected.len() != 32 {
        return Err(Error::MalformedSignature);
    }
    mac(secret, timestamp.trim(), body)?
        .verify_slice(&expected)
        .map_err(|_| Error::BadSignature)
}

/// A Slack `ts` (`"1700000000.123456"`) as RFC 3339 (millisecond precision); `None` when it is
/// not digits, a dot and digits, or too large for a time (checked: it never overflows).
pub fn ts_to_rfc3339(ts: &str) -> Option<String> {
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, "0"));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(secs) || !digits(frac) {
        return None;
    }
    let secs: i64 = secs.parse().ok()?;
    let millis: i64 = format!("{frac:0<3}").get(..3)?.parse().ok()?;
    Some(millis_to_iso(secs.checked_mul(1000)?.checked_add(millis)?))
}

/// Reads the `payload` field of an `application/x-www-form-urlencoded` interaction request body.
pub fn payload_from_form(body: &str) -> Result<Value, Error> {
    let payload = form_urlencoded::parse(body.as_bytes())
        .find(|(k, _)| k == "payload")
        .map(|(_, v)| v)
        .ok_or_else(|| Error::Payload("no `payload` field in the form body".into()))?;
    serde_json::from_str(&payload).map_err(|e| Error::Payload(e.to_string()))
}

/// The form body Slack posts to the interactivity URL for `payload` (`payload=<urlencoded JSON>`);
/// for tests and tools.
pub fn form_from_payload(payload: &Value) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish()
}

fn platform_user(info: &SlackBasicUserInfo) -> PlatformUser {
    PlatformUser {
        id: info.id.0.clone(),
        name: info.username.clone().or_else(|| info.name.clone()),
        is_bot: false,
    }
}

/// Converts an interaction payload (the JSON inside the form's `payload` field) into an
/// [`Interaction`]. `Ok(None)` for interaction kinds FrogBot does not take (shortcuts, …).
pub fn interaction_from_payload(raw: &Value) -> Result<Option<Interaction>, Error> {
    let event: SlackInteractionEvent =
        serde_json::from_value(raw.clone()).map_err(|e| Error::Payload(e.to_string()))?;
    // `raw` is kept in the interaction as the platform payload.
    Ok(match &event {
        SlackInteractionEvent::BlockActions(ev) => action_from_block_actions(ev, raw.clone()),
        SlackInteractionEvent::ViewSubmission(ev) => {
            Some(modal_submit_from_view_submission(ev, raw.clone()))
        }
        _ => None,
    })
}

/// `block_actions` → [`Interaction::Action`] for its first action. `value` is the button value,
/// the selected option's value, or — for checkboxes and multi-selects — the selected values joined
/// by `,` (every one is also in `raw`). `messageId` is `channel:message_ts` (or `view:<id>` for a
/// control inside a modal).
pub fn action_from_block_actions(
    ev: &SlackInteractionBlockActionsEvent,
    raw: Value,
) -> Option<Interaction> {
    let action = ev.actions.as_ref()?.first()?;
    let user = platform_user(ev.user.as_ref()?);
    // A message's channel is the container's, else the payload's.
    let in_message = |channel: &Option<SlackChannelId>, ts: &SlackTs| {
        let channel = channel.as_ref().or(ev.channel.as_ref().map(|c| &c.id))?;
        Some(message_id(&channel.0, &ts.0))
    };
    let message_id = match &ev.container {
        SlackInteractionActionContainer::Message(m) => in_message(&m.channel_id, &m.message_ts)?,
        SlackInteractionActionContainer::MessageAttachment(m) => {
            in_message(&m.channel_id, &m.message_ts)?
        }
        SlackInteractionActionContainer::View(v) => format!("view:{}", v.view_id.0),
    };
    // A button's value, a select's chosen option, or a checkbox group's / multi-select's chosen
    // options (in order).
    let values: Vec<String> = match (&action.selected_options, &action.selected_option) {
        (Some(opts), _) => opts.iter().map(|o| o.value.clone()).collect(),
        (None, Some(opt)) => vec![opt.value.clone()],
        (None, None) => action.value.clone().into_iter().collect(),
    };
    let value = (!values.is_empty()).then(|| values.join(","));
    Some(Interaction::Action {
        event: ActionEvent {
            action_id: action.action_id.0.clone(),
            value,
            message_id,
            user,
            trigger_id: Some(ev.trigger_id.0.clone()),
            raw,
        },
    })
}

/// The click on an event button an action is (its `action_id` is
/// [`crate::ids::event_id`]): the message, the block and button indexes, and who; `None`
/// for any other action (a question's control, the Stop button, a foreign one) and for a control
/// inside a modal.
pub fn event_click(event: &ActionEvent) -> Option<frogbot_model::EventClick> {
    let control = crate::ids::read_event(&event.action_id)?;
    if event.message_id.starts_with("view:") {
        return None;
    }
    Some(control.clicked(event.message_id.clone(), event.user.clone()))
}

/// The selections the message's inputs held when the action was taken (a `block_actions`
/// payload's `state.values`, which Slack sends with every click): `(action_id, chosen values)` of
/// every checkbox group and select, in payload order.
pub fn state_selections(raw: &Value) -> Vec<(String, Vec<String>)> {
    let Some(Value::Object(blocks)) = raw.pointer("/state/values") else {
        return Vec::new();
    };
    let inputs = blocks.values().filter_map(Value::as_object).flatten();
    inputs
        .filter_map(|(action_id, v)| {
            let values = if let Some(Value::Array(opts)) = v.get("selected_options") {
                opts.iter()
                    .filter_map(|o| o["value"].as_str().map(str::to_string))
                    .collect()
            } else {
                vec![v.pointer("/selected_option/value")?.as_str()?.to_string()]
            };
            Some((action_id.clone(), values))
        })
        .collect()
}

/// `view_submission` → [`Interaction::ModalSubmit`]: values flattened by `action_id` (a text
/// input's value or a single choice's option value as a string, several choices as an array).
pub fn modal_submit_from_view_submission(
    ev: &SlackInteractionViewSubmissionEvent,
    raw: Value,
) -> Interaction {
    let inputs = ev
        .view
        .state_params
        .state
        .iter()
        .flat_map(|s| s.values.values());
    let values = (inputs.flatten())
        .map(|(action_id, v)| {
            let value = match (&v.selected_options, &v.selected_option) {
                (Some(opts), _) => opts.iter().map(|o| o.value.clone()).collect(),
                (None, Some(opt)) => Value::from(opt.value.clone()),
                (None, None) => Value::from(v.value.clone()),
            };
            (action_id.0.clone(), value)
        })
        .collect();
    let private_metadata = match &ev.view.view {
        SlackView::Modal(m) => m.private_metadata.clone(),
        SlackView::Home(h) => h.private_metadata.clone(),
    };
    Interaction::ModalSubmit {
        event: ModalSubmitEvent {
            values,
            private_metadata,
            related_message_id: None,
            user: platform_user(&ev.user),
            trigger_id: ev.trigger_id.as_ref().map(|t| t.0.clone()),
            raw,
        },
    }
}

/// A message from the Events API, converted.
#[derive(Clone, Debug, PartialEq)]
pub struct IncomingMessage {
    /// The FrogBot thread id (`channel:thread_ts`).
    pub thread: String,
    /// Whether the message is a reply inside an existing thread (else it starts one).
    pub in_thread: bool,
    /// Whether the message mentions the bot (`<@BOT>`), or is an `app_mention` event.
    pub mentioned: bool,
    /// The message.
    pub message: ThreadMessage,
}

/// Whether a message is the bot's own (it has a `bot_id`, or its user is the bot user).
pub fn is_own_message(sender: &SlackMessageSender, bot_user_id: &str) -> bool {
    sender.bot_id.is_some() || sender.user.as_ref().is_some_and(|u| u.0 == bot_user_id)
}

/// Whether `text` mentions the user `bot_user_id` (`<@U123>` or `<@U123|name>`).
pub fn mentions(text: &str, bot_user_id: &str) -> bool {
    text.contains(&format!("<@{bot_user_id}>")) || text.contains(&format!("<@{bot_user_id}|"))
}

/// `text` without mentions of `bot_user_id`, trimmed, so commands (`stop`, `skip`) are read and
/// the model gets the text without them. A leading mention goes with the separator a person
/// writes after it (`<@U0BOT>: stop`, `<@U0BOT|frogbot>, skip`, `<@U0BOT> — stop`: `:`, `,`, `-`,
/// `–`, `—` and spaces); a mention further on is removed where it stands.
pub fn strip_mention(text: &str, bot_user_id: &str) -> String {
    let plain = format!("<@{bot_user_id}>");
    let named = format!("<@{bot_user_id}|");
    let mut out = text.replace(&plain, "\u{0}");
    while let Some(start) = out.find(&named) {
        match out[start..].find('>') {
            Some(end) => out.replace_range(start..start + end + 1, "\u{0}"),
            None => break,
        }
    }
    // `\0` marks where a mention stood (a person cannot type it in Slack).
    let mut rest = out.trim_start();
    while let Some(after) = rest.strip_prefix('\u{0}') {
        let after = after.trim_start();
        rest = if let Some(r) = after.strip_prefix([':', ',', '–', '—']) {
            r.trim_start()
        } else {
            // A hyphen is a separator when a space follows it (`-v` is the text's own).
            match after.strip_prefix('-') {
                Some(r) if r.is_empty() || r.starts_with(char::is_whitespace) => r.trim_start(),
                _ => after,
            }
        };
    }
    rest.replace('\u{0}', "").trim().to_string()
}

/// The people `text` names the way Slack writes a mention in a message's text (`<@U123>`, or
/// `<@U123|name>` where Slack adds the name, e.g. a slash command's escaped text), in text order,
/// each with its byte range in `text`; never `bot_user_id`. A rich text `user` element is the
/// same mention written as `<@U123>` in the event's `text`, which is what is read. Only a valid
/// user id (`U…` / `W…`) counts: `<!here>`, `<#C1>` and what merely looks like a mention do not.
pub fn mentions_in(text: &str, bot_user_id: &str) -> Vec<Mention> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("<@") {
        let start = from + at;
        let Some(len) = text[start..].find('>') else {
            break;
        };
        let end = start + len + 1;
        let inner = &text[start + 2..end - 1];
        let (id, name) = inner.split_once('|').unwrap_or((inner, ""));
        if crate::ids::check_user_id(id).is_ok() && id != bot_user_id {
            out.push(Mention {
                user: PlatformUser {
                    id: id.to_owned(),
                    name: Some(name.trim().to_owned()).filter(|n| !n.is_empty()),
                    is_bot: false,
                },
                start,
                end,
            });
            from = end;
        } else {
            from = start + 2;
        }
    }
    out
}

/// `message` as the engine gets it: the bot's mentions removed ([`strip_mention`]) and
/// [`ThreadMessage::mentions`] read again from the text that is left, so every range points
/// into the final text.
pub fn without_bot_mention(message: &mut ThreadMessage, bot_user_id: &str) {
    message.text = strip_mention(&message.text, bot_user_id);
    message.mentions = mentions_in(&message.text, bot_user_id);
}

/// The files of a message event (`files`: Slack file objects), each downloaded from its
/// `url_private_download` (else `url_private`); a file Slack shares without a link (`file_access`
/// `check_file_info`, a file hidden by the workspace's plan) keeps an empty `url` and is named
/// to the person as not taken.
pub fn files_of(event: &Value) -> Vec<frogbot_model::PlatformFile> {
    let Some(files) = event.get("files").and_then(Value::as_array) else {
        return Vec::new();
    };
    let text = |f: &Value, k: &str| f.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    files
        .iter()
        .map(|f| frogbot_model::PlatformFile {
            id: text(f, "id"),
            url: f
                .get("url_private_download")
                .or_else(|| f.get("url_private"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            media_type: Some(text(f, "mimetype"))
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "application/octet-stream".into()),
            filename: Some(text(f, "name"))
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| text(f, "title")),
            size: f.get("size").and_then(Value::as_u64),
            source: Value::Null,
        })
        .collect()
}

/// Whether the bot token may go with a download of `url`: Slack's own hosts (`slack.com`,
/// `*.slack.com`), or the configured API's (a fake, a proxy).
pub fn slack_file_host(url: &str, api_url: Option<&str>) -> bool {
    let Ok(u) = url::Url::parse(url) else {
        return false;
    };
    if u.scheme() != "https" && api_url.is_none() {
        return false;
    }
    let host = u.host_str().unwrap_or("");
    if u.scheme() == "https" && (host == "slack.com" || host.ends_with(".slack.com")) {
        return true;
    }
    api_url
        .and_then(|a| url::Url::parse(a).ok())
        .is_some_and(|a| a.origin() == u.origin())
}

/// The fields of a message's content besides `text` (rich text blocks, attachments, files…): what
/// FrogBot does not read, and what must not cost a message its text when slack-morphism cannot
/// read it.
const CONTENT_FIELDS: [&str; 6] = [
    "blocks",
    "attachments",
    "files",
    "metadata",
    "reactions",
    "upload",
];

/// A message's text: the content's, else the event's `text` field as Slack sent it (slack-morphism
/// drops the whole content when one of its fields, e.g. a block, cannot be read).
fn text_of(content: Option<&SlackMessageContent>, raw: &Value) -> String {
    content
        .and_then(|c| c.text.clone())
        .or_else(|| raw.get("text").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default()
}

/// Refuses a message event whose text cannot be read: a `text` that is not a string, or content
/// slack-morphism could not read (a malformed block…) with no text beside it. Such a message
/// would otherwise reach the conversation as an empty text.
fn check_text(event: &Value) -> Result<(), Error> {
    if event
        .get("text")
        .is_some_and(|t| !t.is_null() && !t.is_string())
    {
        let why = "the message's `text` is not a string";
        return Err(Error::Payload(why.into()));
    }
    let has_text = event
        .get("text")
        .and_then(Value::as_str)
        .is_some_and(|t| !t.trim().is_empty());
    let has_content = CONTENT_FIELDS.iter().any(|k| event.get(k).is_some());
    let typed: Option<SlackMessageContent> = serde_json::from_value(event.clone()).ok();
    if has_content && !has_text && typed.is_none() {
        return Err(Error::Payload(
            "the message's content could not be read and it has no text".into(),
        ));
    }
    Ok(())
}

/// A person's edit or deletion of their message (`message_changed` / `message_deleted`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangedMessage {
    /// The thread it is in (`channel:thread_ts`; a message outside a thread is its own).
    pub thread: String,
    /// The message's id (`channel:ts`).
    pub message_id: String,
    /// The new text (a leading mention of the bot stripped); `None` for a deletion.
    pub text: Option<String>,
}

/// Reads a `message_changed` or `message_deleted` event of an `event_callback` body; `None` for
/// any other event, and for the bot's own messages.
pub fn changed_from_push_json(body: &Value, bot_user_id: &str) -> Option<ChangedMessage> {
    let ev = body.get("event")?;
    if ev["type"] != "message" {
        return None;
    }
    let channel = ev["channel"].as_str()?;
    let (message, text) = match ev["subtype"].as_str()? {
        "message_changed" => {
            let m = &ev["message"];
            let text = strip_mention(m["text"].as_str().unwrap_or_default(), bot_user_id);
            (m, Some(text))
        }
        "message_deleted" => (&ev["previous_message"], None),
        _ => return None,
    };
    if message["user"].as_str().is_none_or(|u| u == bot_user_id)
        || message.get("bot_id").is_some_and(|b| !b.is_null())
    {
        return None;
    }
    let ts = match text {
        Some(_) => message["ts"].as_str()?,
        None => ev["deleted_ts"]
            .as_str()
            .or_else(|| message["ts"].as_str())?,
    };
    let thread_ts = message["thread_ts"].as_str().unwrap_or(ts);
    Some(ChangedMessage {
        thread: crate::ids::thread_id(channel, thread_ts),
        message_id: crate::ids::message_id(channel, ts),
        text,
    })
}

/// Reads an Events API request body (`event_callback` JSON) and converts its message, if any: a
/// `message` event, or an `app_mention` (always `mentioned`); `None` for the bot's own messages,
/// edits, deletions and other subtypes that are not something a person wrote.
pub fn message_from_push_json(
    body: &Value,
    bot_user_id: &str,
) -> Result<Option<IncomingMessage>, Error> {
    let push: SlackPushEvent =
        serde_json::from_value(body.clone()).map_err(|e| Error::Payload(e.to_string()))?;
    let SlackPushEvent::EventCallback(cb) = push else {
        return Ok(None);
    };
    let raw = body.get("event").cloned().unwrap_or(Value::Null);
    let event = match cb.event {
        // slack-morphism files an event it cannot read (a malformed block, attachment or file)
        // as `Unknown`: a person's message must not vanish with it.
        SlackEventCallbackBody::Unknown(_) => match reread(&raw)? {
            Some(event) => event,
            None => return Ok(None),
        },
        event => event,
    };
    let person = |id: &SlackUserId, name| PlatformUser {
        id: id.0.clone(),
        name,
        is_bot: false,
    };
    let (channel, origin, content, author) = match &event {
        SlackEventCallbackBody::Message(ev) => {
            check_text(&raw)?;
            let taken = matches!(
                &ev.subtype,
                None | Some(
                    SlackMessageEventType::ThreadBroadcast
                        | SlackMessageEventType::FileShare
                        | SlackMessageEventType::MeMessage
                )
            );
            let user = ev.sender.user.as_ref();
            let (true, false, Some(channel), Some(user)) = (
                taken,
                is_own_message(&ev.sender, bot_user_id),
                &ev.origin.channel,
                user,
            ) else {
                return Ok(None);
            };
            let author = person(user, ev.sender.username.clone());
            (channel, &ev.origin, ev.content.as_ref(), author)
        }
        SlackEventCallbackBody::AppMention(ev) => {
            check_text(&raw)?;
            if ev.user.0 == bot_user_id {
                return Ok(None);
            }
            (
                &ev.channel,
                &ev.origin,
                Some(&ev.content),
                person(&ev.user, None),
            )
        }
        _ => return Ok(None),
    };
    let text = text_of(content, &raw);
    let mentioned =
        matches!(event, SlackEventCallbackBody::AppMention(_)) || mentions(&text, bot_user_id);
    let (channel, ts) = (&channel.0, &origin.ts.0);
    // The thread's root, for a reply inside an existing thread (else the message starts one).
    let root = origin.thread_ts.as_ref().map(|t| &t.0).filter(|r| *r != ts);
    Ok(Some(IncomingMessage {
        thread: thread_id(channel, root.unwrap_or(ts)),
        in_thread: root.is_some(),
        mentioned,
        message: ThreadMessage {
            id: message_id(channel, ts),
            mentions: mentions_in(&text, bot_user_id),
            text,
            author,
            metadata: ThreadMessageMetadata {
                date_sent: ts_to_rfc3339(ts).unwrap_or_default(),
            },
            reply_to: root.map(|r| message_id(channel, r)),
            files: files_of(&raw),
            raw,
        },
    }))
}

/// A `message` or `app_mention` event slack-morphism could not read, read again without the
/// content fields FrogBot does not take ([`CONTENT_FIELDS`]; the text is what it takes).
/// `Ok(None)` for other event types and for message subtypes FrogBot ignores anyway; an error
/// when even that does not read.
fn reread(raw: &Value) -> Result<Option<SlackEventCallbackBody>, Error> {
    let kind = raw.get("type").and_then(Value::as_str).unwrap_or_default();
    if kind != "message" && kind != "app_mention" {
        return Ok(None);
    }
    let taken = ["thread_broadcast", "file_share", "me_message"];
    match raw.get("subtype") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if taken.contains(&s.as_str()) => {}
        Some(_) => return Ok(None),
    }
    let mut lean = raw.clone();
    if let Some(ev) = lean.as_object_mut() {
        for k in CONTENT_FIELDS {
            ev.remove(k);
        }
    }
    match serde_json::from_value(lean) {
        Ok(ev @ (SlackEventCallbackBody::Message(_) | SlackEventCallbackBody::AppMention(_))) => {
            Ok(Some(ev))
        }
        _ => Err(Error::Payload(format!(
            "a Slack `{kind}` event that could not be read"
        ))),
    }
}

/// A slash command as Slack sends it: the `application/x-www-form-urlencoded` fields POSTed to
/// the command's request URL ([`command_from_form`]), or the JSON payload of a Socket Mode
/// `slash_commands` envelope ([`command_from_json`]). Slack's own fields, the deprecated
/// `token` left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlashCommand {
    /// The command as typed (`/frogbot`).
    pub command: String,
    /// What follows it; with "Escape channels, users, and links" on, a person is `<@U123|bob>`
    /// and `&`, `<`, `>` come as `&amp;`, `&lt;`, `&gt;`.
    pub text: String,
    /// Who typed it.
    pub user_id: String,
    /// Their (legacy) user name.
    pub user_name: String,
    /// Where: a channel or a direct message (`C…`, `G…`, `D…`).
    pub channel_id: String,
    /// Its name.
    pub channel_name: String,
    /// The workspace.
    pub team_id: String,
    /// Unique per invocation (what a repeat of one invocation is known by).
    pub trigger_id: String,
    /// The fields as they came, as a JSON object.
    pub raw: Value,
}

impl SlashCommand {
    /// Who typed it, as a FrogBot user.
    pub fn author(&self) -> PlatformUser {
        PlatformUser {
            id: self.user_id.clone(),
            name: Some(self.user_name.clone()).filter(|n| !n.is_empty()),
            is_bot: false,
        }
    }
}

/// The fields of a slash command; `command`, `user_id`, `channel_id` and `trigger_id` must be
/// there.
fn command_from_fields(fields: Map<String, Value>) -> Result<SlashCommand, Error> {
    let field = |k: &str| {
        fields
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let required = ["command", "user_id", "channel_id", "trigger_id"];
    if let Some(k) = required.into_iter().find(|k| field(k).is_empty()) {
        return Err(Error::Payload(format!("a slash command without `{k}`")));
    }
    let cmd = SlashCommand {
        command: field("command"),
        text: field("text"),
        user_id: field("user_id"),
        user_name: field("user_name"),
        channel_id: field("channel_id"),
        channel_name: field("channel_name"),
        team_id: field("team_id"),
        trigger_id: field("trigger_id"),
        raw: Value::Null,
    };
    let mut fields = fields;
    fields.remove("token");
    Ok(SlashCommand {
        raw: Value::Object(fields),
        ..cmd
    })
}

/// Reads a slash command request body (`command=%2Ffrogbot&text=…&user_id=…`).
pub fn command_from_form(body: &str) -> Result<SlashCommand, Error> {
    let fields = form_urlencoded::parse(body.as_bytes())
        .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
        .collect();
    command_from_fields(fields)
}

/// Reads the payload of a Socket Mode `slash_commands` envelope (the same fields, as JSON).
pub fn command_from_json(payload: &Value) -> Result<SlashCommand, Error> {
    match payload {
        Value::Object(fields) => command_from_fields(fields.clone()),
        _ => Err(Error::Payload(
            "a slash command payload that is no object".into(),
        )),
    }
}

/// What a slash command's text asks for ([`read_slash_text`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlashText<'a> {
    /// `ask <@U123|bob> QUESTION [| OPTION…]`: the arguments after `ask` (from the mention on)
    /// and the person they name first.
    Ask {
        /// `<@U123|bob> Ship today? | yes | no`.
        args: &'a str,
        /// Who is asked.
        to: PlatformUser,
    },
    /// `ask` without a person (not the bot) right after it, or without a question after them.
    AskUsage,
    /// Anything else: `help`, nothing, a thread command (`new`, `model`, `stop`, `skip`).
    Other,
}

/// Reads a slash command's text: `ask`, then a mention of a person, then the question (with
/// choices after `|`), as the engine's `ask` command reads it after the person.
pub fn read_slash_text<'a>(text: &'a str, bot_user_id: &str) -> SlashText<'a> {
    let t = text.trim();
    let (word, rest) = t
        .split_once(char::is_whitespace)
        .map_or((t, ""), |(w, r)| (w, r.trim()));
    if !word
        .trim_start_matches(['/', '!'])
        .eq_ignore_ascii_case("ask")
    {
        return SlashText::Other;
    }
    let Some(first) = mentions_in(rest, bot_user_id)
        .into_iter()
        .next()
        .filter(|m| m.start == 0)
    else {
        return SlashText::AskUsage;
    };
    let question = rest[first.end..].trim_start_matches([':', ',', ' ']);
    if question.split('|').next().unwrap_or("").trim().is_empty() {
        return SlashText::AskUsage;
    }
    SlashText::Ask {
        args: rest,
        to: first.user,
    }
}

/// The thread message a slash command's `ask` becomes in the thread it started (`thread`,
/// whose root message is the message's id, so a repeat of the same invocation that finds the
/// same thread is the same message): `/ask {args}` by the person who typed the command, the
/// people it names in [`ThreadMessage::mentions`] (the one asked right after `/ask `).
pub fn slash_ask_message(
    cmd: &SlashCommand,
    args: &str,
    thread: &str,
    bot_user_id: &str,
) -> ThreadMessage {
    let text = format!("/ask {args}");
    ThreadMessage {
        id: thread.to_owned(),
        mentions: mentions_in(&text, bot_user_id),
        text,
        author: cmd.author(),
        metadata: ThreadMessageMetadata {
            date_sent: millis_to_iso(frogbot_model::now_millis()),
        },
        reply_to: None,
        raw: cmd.raw.clone(),
        files: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(
            ts_to_rfc3339("1700000000.123456").unwrap(),
            "2023-11-14T22:13:20.123Z"
        );
        assert_eq!(
            ts_to_rfc3339("1700000000").unwrap(),
            "2023-11-14T22:13:20.000Z"
        );
        assert!(ts_to_rfc3339("x").is_none());
    }

    #[test]
    fn overflowing_or_odd_timestamps_are_no_time() {
        // Found by fuzzing: `secs * 1000` overflowed (a panic in debug builds).
        assert_eq!(ts_to_rfc3339("9223372036854775807.000000"), None);
        assert_eq!(ts_to_rfc3339("9223372036854775.999"), None);
        for ts in [
            "-1.5", "+1.5", "1.-5", "1.", ".5", "", "1.5.6", "1.é", "１.5",
        ] {
            assert_eq!(ts_to_rfc3339(ts), None, "{ts:?}");
        }
        // Huge but representable: clamped to year 9999.
        assert_eq!(
            ts_to_rfc3339("9223372036854775.000").as_deref(),
            Some("9999-12-31T23:59:59.999Z")
        );
    }

    #[test]
    fn mentions_and_forms() {
        assert!(mentions("hi <@UBOT> there", "UBOT"));
        assert!(mentions("hi <@UBOT|frog>", "UBOT"));
        assert!(!mentions("hi <@UOTHER>", "UBOT"));
        assert_eq!(strip_mention("<@UBOT|frog> deploy", "UBOT"), "deploy");
        assert_eq!(strip_mention("<@UBOT> deploy", "UBOT"), "deploy");
        assert_eq!(strip_mention("hi <@UBOT> there", "UBOT"), "hi  there");
        let v = payload_from_form("payload=%7B%22a%22%3A%22b+c%22%7D&x=1").unwrap();
        assert_eq!(v, serde_json::json!({"a": "b c"}));
        assert!(payload_from_form("x=1").is_err());
    }

    /// The forms Slack's client produces when a person addresses the bot, and its separators.
    #[test]
    fn a_leading_mention_goes_with_its_separator() {
        for text in [
            "<@U0BOT>: stop",
            "<@U0BOT> stop",
            "<@U0BOT|frogbot> stop",
            "<@U0BOT|frogbot>: stop",
            "<@U0BOT>, stop",
            "<@U0BOT> - stop",
            "<@U0BOT> — stop",
            "<@U0BOT>— stop",
            "<@U0BOT> —stop",
            "<@U0BOT> – stop",
            "  <@U0BOT>:\nstop ",
            "<@U0BOT> <@U0BOT>: stop",
        ] {
            assert_eq!(strip_mention(text, "U0BOT"), "stop", "{text:?}");
        }
        assert_eq!(strip_mention("<@U0BOT>, skip", "U0BOT"), "skip");
        // Only the bot's mention, and only separators go: the text after them stays.
        assert_eq!(strip_mention("<@U0BOT>: -v flag?", "U0BOT"), "-v flag?");
        assert_eq!(strip_mention("<@UOTHER>: stop", "U0BOT"), "<@UOTHER>: stop");
        assert_eq!(strip_mention("stop: <@U0BOT>", "U0BOT"), "stop:");
        assert_eq!(strip_mention("<@U0BOT>", "U0BOT"), "");
    }

    #[test]
    fn signs_slack_documented_example() {
        // The example from Slack's "Verifying requests from Slack" page.
        let secret = "8f742231b10e8888abcd99yyyzzz85a5";
        let ts = "1531420618";
        let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let sig = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        assert_eq!(sign(secret, ts, body.as_bytes()).unwrap(), sig);
        verify(secret, ts, sig, body.as_bytes(), 1531420618 + 10).unwrap();
    }
}
