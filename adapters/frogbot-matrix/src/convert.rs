//! Pure conversions from Matrix timeline events (ruma types, as matrix-sdk hands them over) to
//! FrogBot's model: poll responses (`m.poll.response` and `org.matrix.msc3381.poll.response`) and
//! reactions become [`Interaction::Action`], room messages become [`ThreadMessage`]s with their
//! thread; the bot's own events are dropped and a leading mention of the bot is stripped. Nothing
//! here talks to a server (and nothing here needs the `engine` feature).

use frogbot_model::blocks::EventClick;
use frogbot_model::{
    ActionEvent, Interaction, Mention, PlatformUser, ThreadMessage, ThreadMessageMetadata,
    millis_to_iso,
};
use matrix_sdk::ruma::events::relation::Replacement;
use matrix_sdk::ruma::events::room::message::{
    MessageType, Relation, RoomMessageEventContent, RoomMessageEventContentWithoutRelation,
};
use matrix_sdk::ruma::events::room::redaction::SyncRoomRedactionEvent;
use matrix_sdk::ruma::events::{
    AnySyncMessageLikeEvent, AnySyncTimelineEvent, SyncMessageLikeEvent,
};
use matrix_sdk::ruma::serde::Raw;
use matrix_sdk::ruma::{EventId, OwnedEventId, OwnedUserId, RoomId, UserId};

use crate::Error;
use crate::ids::{POLL_ACTION, REACTION_ACTION, message_id, read_event};

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
    /// A reaction with an event-button key ([`crate::ids::event_id`]) on an agent message: a
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
            if let Some(control) = read_event(&e.content.relates_to.key) =>
        {
            Some(Incoming::Event(control.clicked(
                message_id(room, &e.content.relates_to.event_id),
                platform_user(&sender),
            )))
        }
        AnySyncMessageLikeEvent::Reaction(SyncMessageLikeEvent::Original(e)) => Some(action(
            REACTION_ACTION,
            &e.content.relates_to.event_id,
            e.content.relates_to.key.clone(),
        )),
        AnySyncMessageLikeEvent::RoomMessage(SyncMessageLikeEvent::Original(e))
            if let Some(Relation::Replacement(r)) = &e.content.relates_to =>
        {
            edited(r, room, &sender, bot)
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
    r: &Replacement<RoomMessageEventContentWithoutRelation>,
    room: &RoomId,
    sender: &UserId,
    bot: &UserId,
) -> Option<Incoming> {
    let (body, formatted) = text_of(&r.new_content.msgtype)?;
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

/// The `body` and `formatted_body` of a text, notice or emote message; `None` for other kinds.
fn text_of(msgtype: &MessageType) -> Option<(&str, Option<&String>)> {
    let (body, formatted) = match msgtype {
        MessageType::Text(t) => (&t.body, &t.formatted),
        MessageType::Notice(t) => (&t.body, &t.formatted),
        MessageType::Emote(t) => (&t.body, &t.formatted),
        _ => return None,
    };
    Some((body.as_str(), formatted.as_ref().map(|f| &f.body)))
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
        // Media messages: the same fields in each kind (`info` types differ by name only).
        MessageType::Image(m) => media!(m),
        MessageType::File(m) => media!(m),
        MessageType::Audio(m) => media!(m),
        MessageType::Video(m) => media!(m),
        other => text_of(other)?,
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
    let text = strip_mention_of(&text, formatted.map(String::as_str), bot);
    let mentioned: Vec<OwnedUserId> = content
        .mentions
        .as_ref()
        .map(|m| m.user_ids.iter().cloned().collect())
        .unwrap_or_default();
    let mentions = mentions_in(
        &text,
        formatted.map(String::as_str),
        &mentioned,
        reply_to.is_some(),
        bot,
    );
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
            text,
            author: platform_user(sender),
            metadata: ThreadMessageMetadata {
                date_sent: millis_to_iso(origin_server_ts),
            },
            reply_to: reply_to.map(|r| message_id(room, &r)),
            raw,
            files,
            mentions,
        },
    })
}

/// The people a message names, in the order they are written in `text` (its final text: the
/// reply fallback and a leading mention of the bot already stripped), never `bot`:
/// - a user id typed in the text (`@bob:example.org`);
/// - a pill in `formatted` (the `formatted_body`), `<a href="https://matrix.to/#/@bob:example.org">Bob</a>`
///   (or a `matrix:u/bob:example.org` link), as Element sends it: `body` has only the pill's text
///   ("Bob"), so the mention is where that text sits in `text`, its first occurrence (a whole
///   word) after the previous pill's;
/// - with `replying` (the message replies to another), a user in `mentioned` (`m.mentions`'
///   `user_ids`: clients put the replied-to message's sender there) written nowhere in the text,
///   as a mention with `start == end` (named without being written).
///
/// Ranges are byte ranges into `text`; a person written twice is named twice.
pub fn mentions_in(
    text: &str,
    formatted: Option<&str>,
    mentioned: &[OwnedUserId],
    replying: bool,
    bot: &UserId,
) -> Vec<Mention> {
    let mut found: Vec<(usize, usize, OwnedUserId)> = typed_user_ids(text)
        .into_iter()
        .filter(|(_, _, u)| u != bot)
        .collect();
    let mut after = 0;
    for (user, name) in formatted.map(pills).unwrap_or_default() {
        if user == bot || name.trim().is_empty() {
            continue;
        }
        let overlaps = |s: usize, e: usize, found: &[(usize, usize, OwnedUserId)]| {
            found.iter().any(|(fs, fe, _)| s < *fe && *fs < e)
        };
        let mut from = after;
        while let Some(at) = find_word(text, &name, from) {
            let end = at + name.len();
            if !overlaps(at, end, &found) {
                found.push((at, end, user.clone()));
                after = end;
                break;
            }
            // Already a typed id (a pill whose text is the id), or another person's pill.
            if found
                .iter()
                .any(|(fs, fe, u)| *fs == at && *fe == end && *u == user)
            {
                after = end;
                break;
            }
            from = end;
        }
    }
    found.sort_by_key(|(s, _, _)| *s);
    if replying {
        let unwritten = mentioned
            .iter()
            .filter(|u| *u != bot && !found.iter().any(|(_, _, f)| f == *u))
            .map(|u| (0, 0, u.clone()));
        found.extend(unwritten.collect::<Vec<_>>());
    }
    let mention = |(start, end, user): (usize, usize, OwnedUserId)| Mention {
        user: platform_user(&user),
        start,
        end,
    };
    found.into_iter().map(mention).collect()
}

/// The user ids typed in `text` (`@bob:example.org`, `@bob:example.org:8448`) with their byte
/// ranges: an `@` not after a letter or digit, a localpart, `:` and a server name; punctuation
/// after it (`@bob:example.org: hi`, `… @bob:example.org.`) is not part of it.
fn typed_user_ids(text: &str) -> Vec<(usize, usize, OwnedUserId)> {
    let local = |c: char| c.is_ascii_alphanumeric() || "._=-/+".contains(c);
    let host = |c: char| c.is_ascii_alphanumeric() || ".-[]".contains(c);
    let mut out = Vec::new();
    for (at, _) in text.match_indices('@') {
        if text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '@')
        {
            continue;
        }
        let rest = &text[at + 1..];
        let local_len = rest.find(|c| !local(c)).unwrap_or(rest.len());
        if local_len == 0 || !rest[local_len..].starts_with(':') {
            continue;
        }
        let server = &rest[local_len + 1..];
        let mut len = server.find(|c| !host(c)).unwrap_or(server.len());
        len = server[..len].trim_end_matches(['.', '-']).len();
        // A port: `:` and digits (a `:` alone is punctuation).
        if server[len..].starts_with(':') {
            let digits = server[len + 1..]
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(server.len() - len - 1);
            if digits > 0 {
                len += 1 + digits;
            }
        }
        let end = at + 1 + local_len + 1 + len;
        if let Ok(user) = UserId::parse(&text[at..end]) {
            out.push((at, end, user));
        }
    }
    out
}

/// The first occurrence of `word` in `text` at or after byte `from` that is not part of a longer
/// word (no letter or digit right before or after it).
fn find_word(text: &str, word: &str, from: usize) -> Option<usize> {
    let edge = |c: Option<char>| !c.is_some_and(char::is_alphanumeric);
    find_where(text, word, from, |before, after| {
        edge(before) && edge(after.chars().next())
    })
}

/// The first occurrence of `word` in `text` at or after byte `from` that `fits`, given the
/// character before it and the text after it.
pub(crate) fn find_where(
    text: &str,
    word: &str,
    from: usize,
    fits: impl Fn(Option<char>, &str) -> bool,
) -> Option<usize> {
    let mut from = from;
    while let Some(i) = text.get(from..)?.find(word) {
        let at = from + i;
        if fits(text[..at].chars().next_back(), &text[at + word.len()..]) {
            return Some(at);
        }
        from = at + word.chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// Every user pill of a `formatted_body`, in order: the user and the pill's text, HTML entities
/// decoded.
fn pills(formatted: &str) -> Vec<(OwnedUserId, String)> {
    let mut out = Vec::new();
    let mut rest = formatted;
    while let Some(i) = rest.find("<a ") {
        rest = &rest[i..];
        match pill(rest) {
            Some((user, name, len)) => {
                out.extend(UserId::parse(user).ok().map(|u| (u, name)));
                rest = &rest[len..];
            }
            None => rest = &rest[3..],
        }
    }
    out
}

/// The pill `s` starts with (`<a href="https://matrix.to/#/@bob:server">Bob</a>`, or a
/// `matrix:u/bob:server` link): its target (`@bob:server`, not checked), its text (entities
/// decoded) and its length in bytes.
fn pill(s: &str) -> Option<(String, String, usize)> {
    let open_end = s.find('>')?;
    let tag = &s[..open_end];
    let href_at = tag.find("href=")?;
    let rest = &tag[href_at + 5..];
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let rest = &rest[1..];
    let href = &rest[..rest.find(quote)?];
    let href = href
        .replace("%40", "@")
        .replace("%3A", ":")
        .replace("%3a", ":");
    let target = match href.strip_prefix("https://matrix.to/#/") {
        Some(t) => t.split(['?', '/']).next().unwrap_or_default().to_owned(),
        None => format!(
            "@{}",
            href.strip_prefix("matrix:u/")?
                .split(['?', '/'])
                .next()
                .unwrap_or_default()
        ),
    };
    if !target.starts_with('@') {
        return None;
    }
    let inner = &s[open_end + 1..];
    let close = inner.find("</a>")?;
    let name = &inner[..close];
    if name.contains('<') {
        return None;
    }
    Some((target, decode_entities(name), open_end + 1 + close + 4))
}

fn decode_entities(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
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
    if !f.starts_with("<a ") {
        return None;
    }
    let (target, name, _) = pill(f)?;
    (target == bot.as_str()).then_some(name)
}

/// Parses a Matrix user id (`@name:server`); `None` when it is not one.
pub fn parse_user_id(id: &str) -> Option<matrix_sdk::ruma::OwnedUserId> {
    UserId::parse(id).ok()
}
