//! Builders of the Bot API's real update shapes: users, private and group chats, text messages
//! and callback queries.

use serde_json::{Value, json};

pub(super) fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A user.
pub fn user(id: i64, name: &str) -> Value {
    json!({"id": id, "is_bot": false, "first_name": name, "username": name.to_lowercase()})
}

/// A private chat with user `id`.
pub fn private_chat(id: i64, name: &str) -> Value {
    json!({"id": id, "type": "private", "first_name": name})
}

/// A supergroup (a forum when `forum`).
pub fn group_chat(id: i64, forum: bool) -> Value {
    json!({"id": id, "type": "supergroup", "title": "Ops", "is_forum": forum})
}

/// A `message` update with text from `from` in `chat`.
pub fn text_update(message_id: i64, chat: Value, from: Value, text: &str) -> Value {
    json!({"message": {
        "message_id": message_id, "date": 1_767_225_600, "chat": chat, "from": from, "text": text
    }})
}

/// A `callback_query` update: `from` pressed the button with `data` on the bot's `message`.
pub fn callback_update(query_id: &str, from: Value, message: Value, data: &str) -> Value {
    json!({"callback_query": {
        "id": query_id, "from": from, "message": message,
        "chat_instance": "-4242", "data": data
    }})
}

/// A message as an update's `reply_to_message` shows it: without its own `reply_to_message`
/// ("will not contain further reply_to_message fields even if it itself is a reply") and with a
/// `reply_markup` only when it is an inline keyboard (a Message's `reply_markup` is one; a
/// ForceReply a bot sent is not shown).
pub(super) fn as_reply_to(message: &Value) -> Value {
    let mut m = message.clone();
    if let Some(o) = m.as_object_mut() {
        o.remove("reply_to_message");
        if o.get("reply_markup")
            .is_some_and(|k| k["inline_keyboard"].is_null())
        {
            o.remove("reply_markup");
        }
    }
    m
}
