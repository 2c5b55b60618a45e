//! Pure conversions from teloxide's types to FrogBot's model: callback queries become
//! [`Interaction::Action`], messages become [`Interaction::Message`]; plus who a message talks to
//! ([`talks_to_bot`], [`is_own_message`]), [`strip_mention`], and the people a message names
//! ([`mentions`], [`addressed_message`]).

use chrono::SecondsFormat;
use frogbot_model::blocks::EventClick;
use frogbot_model::{
    ActionEvent, Interaction, Mention, PlatformUser, ThreadMessage, ThreadMessageMetadata,
};
use teloxide::types::{
    CallbackQuery, Message, MessageEntity, MessageEntityKind, Update, UpdateKind, User, UserId,
};

use crate::Error;
use crate::ids::message_id;

/// Reads a Bot API update (`{"update_id": …, "callback_query" | "message": …}`) into teloxide's
/// [`Update`]; an update teloxide cannot read is an error.
pub fn parse_update(json: &[u8]) -> Result<Update, Error> {
    let update: Update = serde_json::from_slice(json).map_err(|e| Error::Payload(e.to_string()))?;
    if let UpdateKind::Error(v) = &update.kind {
        return Err(Error::Payload(format!("unreadable update: {v}")));
    }
    Ok(update)
}

/// The FrogBot interaction an update carries: a callback query (`Action`) or a message
/// (`Message`); `None` for every other kind of update.
pub fn interaction(update: &Update) -> Result<Option<Interaction>, Error> {
    match &update.kind {
        UpdateKind::CallbackQuery(q) => action(q).map(Some),
        UpdateKind::Message(m) => thread_message(m).map(Some),
        UpdateKind::Error(v) => Err(Error::Payload(format!("unreadable update: {v}"))),
        _ => Ok(None),
    }
}

/// A platform user as FrogBot sees it.
pub fn platform_user(user: &User) -> PlatformUser {
    PlatformUser {
        id: user.id.0.to_string(),
        name: Some(user.full_name()),
        is_bot: user.is_bot,
    }
}

/// A callback query as an [`Interaction::Action`]: callback data `a:b:c` becomes action id `a:b`
/// and value `c` (data without `:` is the action id alone); the message id is
/// `chat_id:message_id`; the trigger id is the callback query id.
pub fn action(query: &CallbackQuery) -> Result<Interaction, Error> {
    let data = query
        .data
        .as_deref()
        .ok_or_else(|| Error::Payload("callback query without data".into()))?;
    let message = query.message.as_ref().ok_or_else(|| {
        Error::Payload(
            "callback query without a message (inline messages are not supported)".into(),
        )
    })?;
    let (action_id, value) = match data.rsplit_once(':') {
        Some((a, v)) => (a.to_owned(), Some(v.to_owned())),
        None => (data.to_owned(), None),
    };
    Ok(Interaction::Action {
        event: ActionEvent {
            action_id,
            value,
            message_id: message_id(message.chat().id, message.id()),
            user: platform_user(&query.from),
            trigger_id: Some(query.id.0.clone()),
            raw: serde_json::to_value(query).map_err(|e| Error::Payload(e.to_string()))?,
        },
    })
}

/// A click on an agent message's event button ([`crate::ids::event_id`] callback data) as the
/// engine's [`EventClick`]: the message it is on (`chat_id:message_id`), the block and button
/// indexes, who clicked. `None` for any other callback query (a question's, the Stop button's)
/// and for one without its message (an inline message).
pub fn event_click(query: &CallbackQuery) -> Option<EventClick> {
    let control = crate::ids::read_event(query.data.as_deref()?)?;
    let message = query.message.as_ref()?;
    Some(control.clicked(
        message_id(message.chat().id, message.id()),
        platform_user(&query.from),
    ))
}

/// A message as an [`Interaction::Message`]: its text (or caption), author, date and the message
/// it replies to.
pub fn thread_message(message: &Message) -> Result<Interaction, Error> {
    let files = files_of(message);
    let text = message
        .text()
        .or_else(|| message.caption())
        .or_else(|| (!files.is_empty()).then_some(""))
        .ok_or_else(|| Error::Payload("message without text".into()))?;
    let author = message
        .from
        .as_ref()
        .ok_or_else(|| Error::Payload("message without a sender".into()))?;
    Ok(Interaction::Message {
        message: ThreadMessage {
            id: message_id(message.chat.id, message.id),
            text: text.to_owned(),
            author: platform_user(author),
            metadata: ThreadMessageMetadata {
                date_sent: message.date.to_rfc3339_opts(SecondsFormat::Secs, true),
            },
            reply_to: message
                .reply_to_message()
                .map(|r| message_id(r.chat.id, r.id)),
            raw: serde_json::to_value(message).map_err(|e| Error::Payload(e.to_string()))?,
            files,
            // Who is named needs the bot's id: see [`mentions`] and [`addressed_message`].
            mentions: Vec::new(),
        },
    })
}

/// The files of a message: its photo (the largest size; Telegram sends photos as JPEG), or its
/// document, video, audio or voice note, each by its `file_id` (found with `getFile`).
pub fn files_of(message: &Message) -> Vec<frogbot_model::PlatformFile> {
    let photo = message.photo().and_then(|sizes| {
        sizes
            .iter()
            .max_by_key(|p| u64::from(p.width) * u64::from(p.height))
    });
    let (meta, mime, name) = if let Some(d) = message.document() {
        (&d.file, d.mime_type.as_ref(), d.file_name.clone())
    } else if let Some(v) = message.video() {
        (&v.file, v.mime_type.as_ref(), v.file_name.clone())
    } else if let Some(a) = message.audio() {
        (&a.file, a.mime_type.as_ref(), a.file_name.clone())
    } else if let Some(v) = message.voice() {
        let name = format!("voice-{}.ogg", v.file.unique_id.0);
        (&v.file, v.mime_type.as_ref(), Some(name))
    } else if let Some(p) = photo {
        (
            &p.file,
            None,
            Some(format!("photo-{}.jpg", p.file.unique_id.0)),
        )
    } else {
        return Vec::new();
    };
    let media = mime.map(|m| m.essence_str().to_owned());
    // A message carries one file: a photo's is JPEG, as Telegram sends every photo.
    let media = media.or_else(|| photo.map(|_| "image/jpeg".to_owned()));
    vec![frogbot_model::PlatformFile {
        id: meta.id.0.clone(),
        url: String::new(),
        media_type: media.unwrap_or_else(|| "application/octet-stream".into()),
        filename: name.unwrap_or_default(),
        // teloxide reads a missing `file_size` as `u32::MAX`: unknown, not 4 GiB.
        size: (meta.size != u32::MAX).then(|| u64::from(meta.size)),
        source: serde_json::Value::Null,
    }]
}

/// Whether a message is addressed to the bot: always in a private chat; in a group when it
/// mentions `@bot_username`, is a command (`/x` or `/x@bot_username`), or replies to the bot.
pub fn talks_to_bot(message: &Message, bot_id: UserId, bot_username: &str) -> bool {
    if message.chat.is_private() {
        return true;
    }
    if message
        .reply_to_message()
        .and_then(|r| r.from.as_ref())
        .is_some_and(|u| u.id == bot_id)
    {
        return true;
    }
    let bot = bot_username.trim_start_matches('@');
    // Not teloxide's `parse_entities`: it panics on an entity past the text or inside a UTF-16
    // surrogate pair (which a client can send), and a panic here ends the thread's queue.
    let Some((text, entities)) = text_entities(message) else {
        return false;
    };
    entities.iter().any(|e| {
        let Some(covered) = entity_text(text, e.offset, e.length) else {
            return false;
        };
        match &e.kind {
            MessageEntityKind::Mention => covered.trim_start_matches('@').eq_ignore_ascii_case(bot),
            MessageEntityKind::TextMention { user } => user.id == bot_id,
            MessageEntityKind::BotCommand => match covered.split_once('@') {
                Some((_, name)) => name.eq_ignore_ascii_case(bot),
                None => true,
            },
            _ => false,
        }
    })
}

/// A message's text with its entities, else its caption with its caption's.
fn text_entities(message: &Message) -> Option<(&str, &[MessageEntity])> {
    message
        .text()
        .zip(message.entities())
        .or_else(|| message.caption().zip(message.caption_entities()))
}

/// The part of `text` an entity covers. Telegram counts `offset` and `length` in UTF-16 code
/// units; `None` for an entity that does not fit the text (past its end, starting or ending
/// inside a surrogate pair, or too large to add up) — never a panic.
pub fn entity_text(text: &str, offset: usize, length: usize) -> Option<&str> {
    entity_range(text, offset, length).and_then(|(from, to)| text.get(from..to))
}

/// [`entity_text`] as the byte range of `text` the entity covers.
pub fn entity_range(text: &str, offset: usize, length: usize) -> Option<(usize, usize)> {
    let end = offset.checked_add(length)?;
    // The byte where UTF-16 unit `unit` starts (none inside a pair, none past the end).
    let byte = |unit: usize| {
        let mut units = 0;
        text.char_indices()
            .chain([(text.len(), '\0')])
            .find_map(|(at, c)| {
                let here = units;
                units += c.len_utf16();
                (here == unit).then_some(at)
            })
    };
    Some((byte(offset)?, byte(end)?))
}

/// The people a message names ([`ThreadMessage::mentions`]), with byte ranges into its text (or
/// caption) as Telegram sent it, never the bot (`bot_id`):
/// - the author of the message it replies to (a person's reply, not a forum topic's opening,
///   which every message of a topic replies to), named without being written (`start == end ==
///   0`): `/ask Ship today?` sent as a reply to bob's message asks bob;
/// - each `text_mention` entity (a person picked from the member list who has no username: the
///   entity carries the user), in text order;
/// - an `@username` (`mention` entity) only when it is the replied-to author's username: a
///   `mention` carries no user and the Bot API has no way to look a username up.
pub fn mentions(message: &Message, bot_id: UserId) -> Vec<Mention> {
    let replied = message
        .reply_to_message()
        .filter(|r| r.forum_topic_created().is_none())
        .and_then(|r| r.from.as_ref())
        .filter(|u| u.id != bot_id);
    let (text, entities) = text_entities(message).unwrap_or_default();
    let written = entities.iter().filter_map(|e| {
        let (start, end) = entity_range(text, e.offset, e.length)?;
        let user = match &e.kind {
            MessageEntityKind::TextMention { user } => Some(user),
            MessageEntityKind::Mention => replied.filter(|u| {
                u.username.as_deref().is_some_and(|name| {
                    text[start..end]
                        .trim_start_matches('@')
                        .eq_ignore_ascii_case(name)
                })
            }),
            _ => None,
        };
        Some((user.filter(|u| u.id != bot_id && start < end)?, start, end))
    });
    let mut out: Vec<Mention> = replied
        .map(|u| (u, 0, 0))
        .into_iter()
        .chain(written)
        .map(|(u, start, end)| Mention {
            user: platform_user(u),
            start,
            end,
        })
        .collect();
    out.sort_by_key(|m| (m.start, m.end));
    out
}

/// A message addressed to the bot as the engine takes it: [`thread_message`] without the bot's
/// `@username` ([`strip_mention`]), naming the people [`mentions`] finds, their ranges moved to
/// the text left (a mention whose text did not stay whole is dropped).
pub fn addressed_message(
    message: &Message,
    bot_id: UserId,
    bot_username: &str,
) -> Result<ThreadMessage, Error> {
    let Interaction::Message { message: mut out } = thread_message(message)? else {
        return Err(Error::Payload("not a message".into()));
    };
    let (text, kept) = stripped(&out.text, bot_username);
    out.mentions = mentions(message, bot_id)
        .into_iter()
        .filter_map(|m| {
            if m.start == m.end {
                return Some(m);
            }
            let &(from, to, _) = kept
                .iter()
                .find(|&&(from, _, len)| from <= m.start && m.end <= from + len)?;
            let start = to + (m.start - from);
            let end = start + (m.end - m.start);
            (text.get(start..end) == out.text.get(m.start..m.end)).then_some(Mention {
                start,
                end,
                ..m
            })
        })
        .collect();
    out.text = text;
    Ok(out)
}

/// Whether the bot itself sent a message (its own messages are never conversation input).
pub fn is_own_message(message: &Message, bot_id: UserId) -> bool {
    message.from.as_ref().is_some_and(|u| u.id == bot_id)
}

/// Removes the bot's `@username` from a message, so commands (`stop`, `skip`) are read and the
/// model gets the text without it: a leading mention with the separator a person writes after it
/// (`@bot: stop`, `@bot, skip`, `@bot - stop`, `@bot — stop`, `@bot stop` → `stop`), and the
/// mention anywhere else (`/cmd@bot x` → `/cmd x`, `é @bot ü` → `é  ü`). Only the whole name
/// counts (`@botx` is someone else); a message that is only the mention stays as it is.
pub fn strip_mention(text: &str, username: &str) -> String {
    stripped(text, username).0
}

/// [`strip_mention`], with the parts of `text` kept: `(byte in text, byte in the result,
/// length)` each.
fn stripped(text: &str, username: &str) -> (String, Vec<(usize, usize, usize)>) {
    let needle = format!("@{}", username.trim_start_matches('@'));
    let is_name_char = |c: char| c.is_alphanumeric() || c == '_';
    let whole_at = |s: &str, at: usize| {
        s.get(at..at + needle.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(&needle))
            && !s[at + needle.len()..].starts_with(is_name_char)
    };
    let t = text.trim_start();
    let body = if whole_at(t, 0) {
        let rest = t[needle.len()..].trim_start();
        let rest = if let Some(r) = rest.strip_prefix([':', ',']) {
            r
        } else {
            // A dash is a separator only with a space after it (`@bot -5` keeps its minus).
            match rest.strip_prefix(['-', '\u{2013}', '\u{2014}']) {
                Some(r) if r.is_empty() || r.starts_with(char::is_whitespace) => r,
                _ => rest,
            }
        };
        rest.trim_start()
    } else {
        t
    };
    // `body` is a suffix of `text`.
    let base = text.len() - body.len();
    let mut out = String::with_capacity(body.len());
    let mut kept: Vec<(usize, usize, usize)> = Vec::new();
    let mut at = 0;
    while at < body.len() {
        if whole_at(body, at) {
            at += needle.len();
            continue;
        }
        let c = body[at..].chars().next().expect("not at the end");
        match kept.last_mut() {
            Some((from, to, len)) if *from + *len == base + at && *to + *len == out.len() => {
                *len += c.len_utf8();
            }
            _ => kept.push((base + at, out.len(), c.len_utf8())),
        }
        out.push(c);
        at += c.len_utf8();
    }
    let trimmed = out.trim();
    if trimmed.is_empty() {
        let whole = text.trim();
        let lead = text.len() - text.trim_start().len();
        return (whole.to_owned(), vec![(lead, 0, whole.len())]);
    }
    // Trimming keeps `out[lead..lead + trimmed.len()]`: each kept part is cut to it.
    let lead = out.len() - out.trim_start().len();
    let last = lead + trimmed.len();
    let kept = kept
        .into_iter()
        .filter_map(|(from, to, len)| {
            let (start, end) = (to.max(lead), (to + len).min(last));
            (start < end).then_some((from + (start - to), start - lead, end - start))
        })
        .collect();
    (trimmed.to_owned(), kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_are_read_in_utf16_units_and_never_panic() {
        assert_eq!(entity_text("hi @frogbot", 3, 8), Some("@frogbot"));
        // 🐸 is two UTF-16 units.
        assert_eq!(entity_text("🐸 @frogbot", 3, 8), Some("@frogbot"));
        assert_eq!(entity_text("🐸", 0, 2), Some("🐸"));
        assert_eq!(entity_text("abc", 3, 0), Some(""));
        // Found by fuzzing (teloxide's parse_entities panicked on these): inside the pair, past
        // the end, overflowing.
        assert_eq!(entity_text("🐸", 1, 1), None);
        assert_eq!(entity_text("🐸", 0, 1), None);
        assert_eq!(entity_text("abc", 2, 5), None);
        assert_eq!(entity_text("abc", 7, 0), None);
        assert_eq!(entity_text("abc", usize::MAX, 2), None);
        assert_eq!(entity_text("abc", 1, usize::MAX), None);
    }

    #[test]
    fn an_event_buttons_click_is_an_event_click_and_nothing_else_is() {
        let query = |data: &str| -> CallbackQuery {
            serde_json::from_value(serde_json::json!({
                "id": "77", "chat_instance": "1", "data": data,
                "from": {"id": 42, "is_bot": false, "first_name": "Ada", "last_name": "L"},
                "message": {"message_id": 12, "date": 1, "text": "x",
                    "chat": {"id": -100, "type": "supergroup", "title": "Ops"},
                    "from": {"id": 999, "is_bot": true, "first_name": "FrogBot"}}
            }))
            .unwrap()
        };
        let click = event_click(&query("e3:1")).unwrap();
        assert_eq!(click.message_id, "-100:12");
        assert_eq!((click.block, click.button), (3, 1));
        assert_eq!(click.user.id, "42");
        assert_eq!(click.user.name.as_deref(), Some("Ada L"));
        for other in ["q1:3:1", "frogbot-stop", "e3", "x"] {
            assert_eq!(event_click(&query(other)), None, "{other}");
        }
    }

    #[test]
    fn the_bots_mention_is_removed() {
        assert_eq!(
            strip_mention("@FrogBot deploy now", "frogbot"),
            "deploy now"
        );
        assert_eq!(
            strip_mention("/ask@frogbot where?", "frogbot"),
            "/ask where?"
        );
        assert_eq!(strip_mention("ask @other too", "frogbot"), "ask @other too");
        assert_eq!(strip_mention("@frogbot", "frogbot"), "@frogbot");
        assert_eq!(strip_mention("é @frogbot ü", "frogbot"), "é  ü");
    }

    /// The forms a Telegram client produces when a person addresses the bot (issue 38): the
    /// mention and its separator go, so `stop` and `skip` are read as commands.
    #[test]
    fn a_leading_mention_goes_with_its_separator() {
        let bot = "frogbot_bot";
        for (said, left) in [
            ("@frogbot_bot: stop", "stop"),
            ("@frogbot_bot stop", "stop"),
            ("/stop@frogbot_bot", "/stop"),
            ("@frogbot_bot, skip", "skip"),
            ("@frogbot_bot , skip", "skip"),
            ("@Frogbot_Bot:stop", "stop"),
            ("@frogbot_bot - stop", "stop"),
            ("@frogbot_bot \u{2014} stop", "stop"),
            ("@frogbot_bot \u{2013} skip", "skip"),
            ("  @frogbot_bot:  deploy now ", "deploy now"),
            ("@frogbot_bot: what is 2:3?", "what is 2:3?"),
            // Not separators: a minus sign, and a longer name (someone else).
            ("@frogbot_bot -5 pods", "-5 pods"),
            ("@frogbot_botx: stop", "@frogbot_botx: stop"),
            ("@frogbot_bot", "@frogbot_bot"),
            ("@frogbot_bot:", "@frogbot_bot:"),
        ] {
            assert_eq!(strip_mention(said, bot), left, "{said:?}");
        }
        assert!(frogbot_channel::is_stop_word(&strip_mention(
            "@frogbot_bot: stop",
            bot
        )));
        assert!(frogbot_model::is_skip_reply(&strip_mention(
            "@frogbot_bot, skip",
            bot
        )));
    }
}
