//! Pure conversions from Matrix timeline events (ruma types, as matrix-sdk hands them over) to
//! FrogBot's model: poll responses (`m.poll.response` and `org.matrix.msc3381.poll.response`) and
//! reactions become [`Interaction::Action`], room messages become [`ThreadMessage`]s with their
//! thread; the bot's own events are dropped and a leading mention of the bot is stripped. Nothing
//! here talks to a server (and nothing here needs the `engine` feature).

use frogbot_model::blocks::EventClick;
use frogbot_model::{
    ActionEvent, Interaction, PlatformUser, ThreadMessage, ThreadMessageMetadata, millis_to_iso,
};
use matrix_sdk::ruma::events::room::message::{MessageType, Relation, RoomMessageEventContent};
use matrix_sdk::ruma::events::room::redaction::SyncRoomRedactionEvent;
use matrix_sdk::ruma::events::{
    AnySyncMessageLikeEvent, AnySyncTimelineEvent, SyncMessageLikeEvent,
};
use matrix_sdk::ruma::serde::Raw;
use matrix_sdk::ruma::{EventId, OwnedEventId, RoomId, UserId};

use crate::Error;
use crate::ids::{POLL_ACTION, REACTION_ACTION, event_key_indexes, message_id};

/// A platform user as FrogBot sees it (the Matrix user id).
pub fn platform_user(user: &UserId) -> PlatformUser {
    PlatformUser {
        id: user.to_string(),
        name: None,
        is_bot: false,
    }
}

/// A room message that may be talking to the bot.
#[derive(Clone, Debug)]
pub struct IncomingMessage {
    /// The thread it belongs to: its `m.thread` root, or the message itself (the bot answers in a
    /// thread on it).
    pub thread: String,
    /// Whether it was sent inside an existing thread.
    pub in_thread: bool,
    /// Whether it mentions the bot (`m.mentions`, its user id in the body, or a pill link).
    pub mentions_bot: bool,
    /// The event it replies to (`m.in_reply_to`, not a thread's fallback), if any.
    pub reply_to: Option<OwnedEventId>,
    /// The FrogBot message.
    pub message: ThreadMessage,
}

/// What a timeline event is for FrogBot.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Incoming {
    /// A text message.
    Message(IncomingMessage),
    /// A poll response or a reaction (routed by the message it relates to).
    Action(Interaction),
    /// A reaction with an event-button key ([`crate::ids::event_key`]) on an agent message: a
    /// click on that button.
    Event(EventClick),
    /// A message edited (`m.replace`: `text` is its new text, a leading mention of the bot
    /// stripped) or redacted (`text: None`).
    Changed {
        /// The changed message's id (`room|event`).
        message_id: String,
        /// Who sent the edit or the redaction.
        sender: String,
        /// The new text; `None` for a redaction.
        text: Option<String>,
    },
}

impl Incoming {
    /// The queue its handling must stay in order in: a message with the other messages of its
    /// thread; a poll response or reaction with the others on the same event (the event names no
    /// thread, only the poll it answers, which sits in one thread). Different keys may be handled
    /// concurrently.
    pub fn order_key(&self) -> &str {
        match self {
            Incoming::Message(m) => &m.thread,
            Incoming::Action(Interaction::Action { event }) => &event.message_id,
            Incoming::Action(other) => other.user().id.as_str(),
            Incoming::Event(click) => &click.message_id,
            Incoming::Changed { message_id, .. } => message_id,
        }
    }
}

/// Converts a timeline event of `room` (as delivered by sync, decrypted) into what FrogBot sees;
/// `None` for everything else: other event types, redacted events, edits, the bot's own events.
pub fn classify(
    raw: &Raw<AnySyncTimelineEvent>,
    room: &RoomId,
    bot: &UserId,
) -> Result<Option<Incoming>, Error> {
    let event = raw.deserialize().map_err(|e| Error::Event(e.to_string()))?;
    if event.sender() == bot {
        return Ok(None);
    }
    let raw_json: serde_json::Value =
        serde_json::from_str(raw.json().get()).map_err(|e| Error::Event(e.to_string()))?;
    let AnySyncTimelineEvent::MessageLike(event) = event else {
        return Ok(None);
    };
    let sender = event.sender().to_owned();
    let event_id = event.event_id().to_owned();
    let ts: i64 = event.origin_server_ts().get().into();
    let action = |action_id: &str, target: &EventId, value: String| {
        Incoming::Action(Interaction::Action {
            event: ActionEvent {
                action_id: action_id.into(),
                value: Some(value),
                message_id: message_id(room, target),
                user: platform_user(&sender),
                trigger_id: Some(message_id(room, &event_id)),
                raw: raw_json.clone(),
            },
        })
    };
    Ok(match &event {
        AnySyncMessageLikeEvent::PollResponse(SyncMessageLikeEvent::Original(e)) => Some(action(
            POLL_ACTION,
            &e.content.relates_to.event_id,
            e.content.selections.join(","),
        )),
        AnySyncMessageLikeEvent::UnstablePollResponse(SyncMessageLikeEvent::Original(e)) => {
            Some(action(
                POLL_ACTION,
                &e.content.relates_to.event_id,
                e.content.poll_response.answers.join(","),
            ))
        }
        AnySyncMessageLikeEvent::Reaction(SyncMessageLikeEvent::Original(e))
            if event_key_indexes(&e.content.relates_to.key).is_some() =>
        {
            let (block, button) = event_key_indexes(&e.content.relates_to.key).unwrap_or_default();
            Some(Incoming::Event(EventClick {
                message_id: message_id(room, &e.content.relates_to.event_id),
                block,
                button,
                user: platform_user(&sender),
            }))
        }
        AnySyncMessageLikeEvent::Reaction(SyncMessageLikeEvent::Original(e)) => Some(action(
            REACTION_ACTION,
            &e.content.relates_to.event_id,
            e.content.relates_to.key.clone(),
        )),
        AnySyncMessageLikeEvent::RoomMessage(SyncMessageLikeEvent::Original(e))
            if matches!(e.content.relates_to, Some(Relation::Replacement(_))) =>
        {
            edited(&e.content, room, &sender, bot)
        }
        AnySyncMessageLikeEvent::RoomMessage(SyncMessageLikeEvent::Original(e)) => {
            room_message(&e.content, room, &event_id, &sender, ts, bot, raw_json)
                .map(Incoming::Message)
        }
        AnySyncMessageLikeEvent::RoomRedaction(SyncRoomRedactionEvent::Original(e)) => e
            .redacts
            .as_ref()
            .or(e.content.redacts.as_ref())
            .map(|redacted| Incoming::Changed {
                message_id: message_id(room, redacted),
                sender: sender.to_string(),
                text: None,
            }),
        _ => None,
    })
}

/// An edit (`m.replace`) as [`Incoming::Changed`] with the new text (`m.new_content`, a leading
/// mention of the bot stripped); `None` when it carries no text.
fn edited(
    content: &RoomMessageEventContent,
    room: &RoomId,
    sender: &UserId,
    bot: &UserId,
) -> Option<Incoming> {
    let Some(Relation::Replacement(r)) = &content.relates_to else {
        return None;
    };
    let (body, formatted) = match &r.new_content.msgtype {
        MessageType::Text(t) => (t.body.as_str(), t.formatted.as_ref().map(|f| &f.body)),
        MessageType::Notice(t) => (t.body.as_str(), t.formatted.as_ref().map(|f| &f.body)),
        MessageType::Emote(t) => (t.body.as_str(), t.formatted.as_ref().map(|f| &f.body)),
        _ => return None,
    };
    Some(Incoming::Changed {
        message_id: message_id(room, &r.event_id),
        sender: sender.to_string(),
        text: Some(strip_mention_of(
            &strip_reply_fallback(body),
            formatted.map(String::as_str),
            bot,
        )),
    })
}

/// A room message as an [`IncomingMessage`]; `None` for edits and messages without text.
pub fn room_message(
    content: &RoomMessageEventContent,
    room: &RoomId,
    event_id: &EventId,
    sender: &UserId,
    origin_server_ts: i64,
    bot: &UserId,
    raw: serde_json::Value,
) -> Option<IncomingMessage> {
    let mut files = Vec::new();
    macro_rules! media {
        ($m:expr) => {{
            let info = $m.info.as_deref();
            media(
                &mut files,
                &$m.body,
                $m.filename.as_deref(),
                &$m.source,
                info.and_then(|i| i.mimetype.as_deref()),
                info.and_then(|i| i.size),
            )
        }};
    }
    let (body, formatted) = match &content.msgtype {
        MessageType::Text(t) => (t.body.as_str(), t.formatted.as_ref().map(|f| &f.body)),
        MessageType::Notice(t) => (t.body.as_str(), t.formatted.as_ref().map(|f| &f.body)),
        MessageType::Emote(t) => (t.body.as_str(), t.formatted.as_ref().map(|f| &f.body)),
        // Media messages: the same fields in each kind (`info` types differ by name only).
        MessageType::Image(m) => media!(m),
        MessageType::File(m) => media!(m),
        MessageType::Audio(m) => media!(m),
        MessageType::Video(m) => media!(m),
        _ => return None,
    };
    let (thread_root, reply_to) = match &content.relates_to {
        Some(Relation::Replacement(_)) => return None,
        Some(Relation::Thread(t)) => (
            Some(t.event_id.clone()),
            t.in_reply_to
                .as_ref()
                .filter(|_| !t.is_falling_back)
                .map(|r| r.event_id.clone()),
        ),
        Some(Relation::Reply(r)) => (None, Some(r.in_reply_to.event_id.clone())),
        _ => (None, None),
    };
    let text = strip_reply_fallback(body);
    let mentions_bot = content
        .mentions
        .as_ref()
        .is_some_and(|m| m.user_ids.iter().any(|u| u == bot))
        || body.contains(bot.as_str())
        || formatted.is_some_and(|f| f.contains(&format!("matrix.to/#/{bot}")));
    Some(IncomingMessage {
        thread: message_id(room, thread_root.as_deref().unwrap_or(event_id)),
        in_thread: thread_root.is_some(),
        mentions_bot,
        reply_to: reply_to.clone(),
        message: ThreadMessage {
            id: message_id(room, event_id),
            text: strip_mention_of(&text, formatted.map(String::as_str), bot),
            author: platform_user(sender),
            metadata: ThreadMessageMetadata {
                date_sent: millis_to_iso(origin_server_ts),
            },
            reply_to: reply_to.map(|r| message_id(room, &r)),
            raw,
            files,
        },
    })
}

/// A media message's file (`m.image`, `m.file`, `m.audio`, `m.video`; plain or encrypted) into
/// `files`, and its caption as the message's text: per the spec, `body` is a caption when a
/// `filename` other than it is given, else it is the file's name (and there is no text).
fn media<'a>(
    files: &mut Vec<frogbot_model::PlatformFile>,
    body: &'a str,
    filename: Option<&str>,
    source: &matrix_sdk::ruma::events::room::MediaSource,
    mimetype: Option<&str>,
    size: Option<matrix_sdk::ruma::UInt>,
) -> (&'a str, Option<&'a String>) {
    let caption = filename.is_some_and(|f| f != body);
    let id = match source {
        matrix_sdk::ruma::events::room::MediaSource::Plain(uri) => uri.to_string(),
        matrix_sdk::ruma::events::room::MediaSource::Encrypted(f) => f.url.to_string(),
    };
    files.push(frogbot_model::PlatformFile {
        id,
        url: String::new(),
        media_type: mimetype.unwrap_or("application/octet-stream").to_owned(),
        filename: filename.unwrap_or(body).to_owned(),
        size: size.map(u64::from),
        source: serde_json::to_value(source).unwrap_or_default(),
    });
    (if caption { body } else { "" }, None)
}

/// Drops the `> <@user> quoted` lines older clients put before a reply's text.
pub fn strip_reply_fallback(body: &str) -> String {
    if !body.starts_with("> ") {
        return body.to_owned();
    }
    let rest: Vec<&str> = body.lines().skip_while(|l| l.starts_with('>')).collect();
    rest.join("\n").trim_start().to_owned()
}

/// Removes a leading `@bot:server:` (or the bot's user id anywhere at the start) from the text:
/// [`strip_mention_of`] without a `formatted_body`.
pub fn strip_mention(text: &str, bot: &UserId) -> String {
    strip_mention_of(text, None, bot)
}

/// Removes a leading mention of the bot and its separator (`:` or `,`, then spaces) from a
/// message's `body`, so commands (`stop`, `skip`) are read and the model gets the text without
/// it. The mention is the bot's user id (`@frogbot:server`), `@localpart` or the localpart, or —
/// when `formatted` (the `formatted_body`) starts with a pill of the bot, `<a
/// href="https://matrix.to/#/@frogbot:server">frogbot</a>`, as Element sends it — the pill's text
/// (Element writes the bot's display name in `body`: `frogbot: stop`). Only a whole word counts
/// (`frogbots` is left as it is), and the bare localpart only with `:` or `,` after it.
pub fn strip_mention_of(text: &str, formatted: Option<&str>, bot: &UserId) -> String {
    // Each form, and whether a space alone may follow it (a bare name needs `:` or `,`).
    let mut names: Vec<(String, bool)> = vec![
        (bot.as_str().to_owned(), true),
        (format!("@{}", bot.localpart()), true),
        (bot.localpart().to_owned(), false),
    ];
    if let Some(name) = formatted.and_then(|f| pill_text(f, bot)) {
        names.push((name, true));
    }
    names.sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
    let t = text.trim_start();
    for (name, spaced) in names.iter().filter(|(n, _)| !n.trim().is_empty()) {
        let Some(head) = t.get(..name.len()) else {
            continue;
        };
        if !head.eq_ignore_ascii_case(name) {
            continue;
        }
        let rest = &t[name.len()..];
        if rest.is_empty() {
            return String::new();
        }
        if rest.starts_with([':', ',']) || (*spaced && rest.starts_with(char::is_whitespace)) {
            return rest.trim_start_matches([':', ',']).trim_start().to_owned();
        }
    }
    text.to_owned()
}

/// The text of the pill of `bot` that `formatted` (a `formatted_body`) starts with, HTML entities
/// decoded: `<a href="https://matrix.to/#/@bot:server">frogbot</a>` → `frogbot`.
fn pill_text(formatted: &str, bot: &UserId) -> Option<String> {
    let f = formatted.trim_start();
    let f = f.strip_prefix("<p>").unwrap_or(f);
    let rest = f.strip_prefix("<a href=")?;
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let rest = &rest[1..];
    let end = rest.find(quote)?;
    let href = rest[..end]
        .replace("%40", "@")
        .replace("%3A", ":")
        .replace("%3a", ":");
    let target = href.strip_prefix("https://matrix.to/#/")?;
    let target = target.split(['?', '/']).next().unwrap_or_default();
    if target != bot.as_str() {
        return None;
    }
    let after = &rest[end + 1..];
    let open_end = after.find('>')?;
    let inner = &after[open_end + 1..];
    let close = inner.find("</a>")?;
    let name = &inner[..close];
    if name.contains('<') {
        return None;
    }
    Some(
        name.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&"),
    )
}

/// Parses a Matrix user id (`@name:server`); `None` when it is not one.
pub fn parse_user_id(id: &str) -> Option<matrix_sdk::ruma::OwnedUserId> {
    UserId::parse(id).ok()
}
