//! Pure conversions from teloxide's types to FrogBot's model: callback queries become
//! [`Interaction::Action`], messages become [`Interaction::Message`], plus the id helpers and
//! [`split_text`].

use chrono::SecondsFormat;
use frogbot_model::{
    ActionEvent, Interaction, PlatformUser, ThreadMessage, ThreadMessageMetadata,
};
use teloxide::types::Message;
use teloxide::types::{
    CallbackQuery, ChatId, MessageEntityKind, MessageId, ThreadId, Update, UpdateKind, User,
};

use crate::Error;

/// Telegram's limit on a message's text, in characters.
pub const MAX_TEXT: usize = 4096;

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
    let mut name = user.first_name.clone();
    if let Some(last) = &user.last_name {
        name.push(' ');
        name.push_str(last);
    }
    PlatformUser {
        id: user.id.0.to_string(),
        name: Some(name),
        is_bot: user.is_bot,
    }
}

/// A message id: `chat_id:message_id`.
pub fn message_id(chat: ChatId, id: MessageId) -> String {
    format!("{}:{}", chat.0, id.0)
}

/// Splits a `chat_id:message_id` id.
pub fn split_message_id(id: &str) -> Result<(ChatId, MessageId), Error> {
    let bad = || Error::BadId(id.to_owned());
    let (chat, msg) = id.split_once(':').ok_or_else(bad)?;
    Ok((
        ChatId(chat.parse().map_err(|_| bad())?),
        MessageId(msg.parse().map_err(|_| bad())?),
    ))
}

/// The thread id of a message: its chat, or `chat_id:thread_id` for a forum topic message.
pub fn thread_id(message: &Message) -> String {
    match message.thread_id {
        Some(t) if message.is_topic_message => format!("{}:{}", message.chat.id.0, t.0.0),
        _ => message.chat.id.0.to_string(),
    }
}

/// Splits a thread id into the chat and, for a forum topic, the topic.
pub fn split_thread_id(id: &str) -> Result<(ChatId, Option<ThreadId>), Error> {
    let bad = || Error::BadId(id.to_owned());
    match id.split_once(':') {
        None => Ok((ChatId(id.parse().map_err(|_| bad())?), None)),
        Some((chat, topic)) => Ok((
            ChatId(chat.parse().map_err(|_| bad())?),
            Some(ThreadId(MessageId(topic.parse().map_err(|_| bad())?))),
        )),
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

/// A message as an [`Interaction::Message`]: its text (or caption), author, date and the message
/// it replies to.
pub fn thread_message(message: &Message) -> Result<Interaction, Error> {
    let text = message
        .text()
        .or_else(|| message.caption())
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
        },
    })
}

/// Whether a message is addressed to the bot: always in a private chat; in a group when it
/// mentions `@bot_username`, is a command (`/x` or `/x@bot_username`), or replies to the bot.
pub fn talks_to_bot(
    message: &Message,
    bot_id: teloxide::types::UserId,
    bot_username: &str,
) -> bool {
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
    let entities = message
        .parse_entities()
        .or_else(|| message.parse_caption_entities())
        .unwrap_or_default();
    entities.iter().any(|e| match e.kind() {
        MessageEntityKind::Mention => e.text().trim_start_matches('@').eq_ignore_ascii_case(bot),
        MessageEntityKind::TextMention { user } => user.id == bot_id,
        MessageEntityKind::BotCommand => match e.text().split_once('@') {
            Some((_, name)) => name.eq_ignore_ascii_case(bot),
            None => true,
        },
        _ => false,
    })
}

/// Whether the bot itself sent a message (its own messages are never conversation input).
pub fn is_own_message(message: &Message, bot_id: teloxide::types::UserId) -> bool {
    message.from.as_ref().is_some_and(|u| u.id == bot_id)
}

/// Splits text into pieces of at most `max` characters, preferring line breaks, then spaces.
pub fn split_text(text: &str, max: usize) -> Vec<String> {
    let max = max.max(1);
    let mut out = Vec::new();
    let mut rest = text;
    while rest.chars().count() > max {
        let cut = rest
            .char_indices()
            .nth(max)
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        let head = &rest[..cut];
        let at = head
            .rfind('\n')
            .or_else(|| head.rfind(' '))
            .filter(|&i| i > 0)
            .unwrap_or(cut);
        out.push(rest[..at].to_owned());
        rest = &rest[at..];
        if at < cut {
            // Drop the separator we split on.
            rest = &rest[1..];
        }
    }
    if !rest.is_empty() || out.is_empty() {
        out.push(rest.to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_text_respects_the_limit() {
        assert_eq!(split_text("", 10), vec![String::new()]);
        assert_eq!(split_text("abc", 10), vec!["abc"]);
        assert_eq!(split_text("aaaa bbbb cccc", 9), vec!["aaaa", "bbbb cccc"]);
        assert_eq!(split_text("line1\nline2", 8), vec!["line1", "line2"]);
        let long = "é".repeat(10_000);
        let parts = split_text(&long, MAX_TEXT);
        assert!(parts.iter().all(|p| p.chars().count() <= MAX_TEXT));
        assert_eq!(parts.concat(), long);
    }

    #[test]
    fn ids_round_trip() {
        let id = message_id(ChatId(-100123), MessageId(42));
        assert_eq!(id, "-100123:42");
        assert_eq!(
            split_message_id(&id).unwrap(),
            (ChatId(-100123), MessageId(42))
        );
        assert!(split_message_id("x").is_err());
        assert_eq!(split_thread_id("-5").unwrap(), (ChatId(-5), None));
        assert_eq!(
            split_thread_id("-5:7").unwrap(),
            (ChatId(-5), Some(ThreadId(MessageId(7))))
        );
    }
}
