//! Bot API updates (the documented JSON shapes) read with teloxide, then converted.

use frogbot_model::Interaction;
use frogbot_telegram::convert::{
    interaction, is_own_message, parse_update, talks_to_bot, thread_message,
};
use frogbot_telegram::ids::thread_id;
use serde_json::{Value, json};
use teloxide::types::{UpdateKind, UserId};

fn user(id: u64, name: &str, is_bot: bool) -> Value {
    json!({"id": id, "is_bot": is_bot, "first_name": name, "username": name.to_lowercase()})
}

fn group() -> Value {
    json!({"id": -100200, "type": "supergroup", "title": "Ops"})
}

fn bot_message(id: i64) -> Value {
    json!({
        "message_id": id, "date": 1_767_225_600, "chat": group(),
        "from": user(999, "FrogBot", true), "text": "❓ Env\nWhere?",
        "reply_markup": {"inline_keyboard": [[{"text": "prod", "callback_data": "q0:0:1"}]]}
    })
}

fn bytes(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

#[test]
fn callback_query_becomes_an_action() {
    let update = parse_update(&bytes(json!({
        "update_id": 10,
        "callback_query": {
            "id": "4382bfdwdsb323b2d9", "from": user(42, "Ada", false),
            "message": bot_message(77), "chat_instance": "-12345", "data": "q3:0:1"
        }
    })))
    .unwrap();
    let Some(Interaction::Action { event }) = interaction(&update).unwrap() else {
        panic!("not an action");
    };
    assert_eq!(event.action_id, "q3:0");
    assert_eq!(event.value.as_deref(), Some("1"));
    assert_eq!(event.message_id, "-100200:77");
    assert_eq!(event.user.id, "42");
    assert_eq!(event.user.name.as_deref(), Some("Ada"));
    assert_eq!(event.trigger_id.as_deref(), Some("4382bfdwdsb323b2d9"));
    assert_eq!(event.raw["data"], "q3:0:1");
}

/// A click as Telegram delivers it in a private chat (the shape of captured real updates: the
/// user's `language_code`, the bot's message with its keyboard, a long numeric `chat_instance`).
#[test]
fn a_private_chat_click_as_telegram_sends_it() {
    let update = parse_update(
        r#"{
        "update_id": 734997100,
        "callback_query": {
            "id": "4278655576057498999",
            "from": {"id": 996202000, "is_bot": false, "first_name": "Ada",
                     "username": "ada_l", "language_code": "en"},
            "message": {
                "message_id": 61,
                "from": {"id": 6097692000, "is_bot": true, "first_name": "FrogBot",
                         "username": "frogbot"},
                "chat": {"id": 996202000, "first_name": "Ada", "username": "ada_l",
                         "type": "private"},
                "date": 1686214500,
                "text": "\u2753 Env\nWhere?",
                "reply_markup": {"inline_keyboard": [
                    [{"text": "staging", "callback_data": "q0:0:0"}],
                    [{"text": "prod", "callback_data": "q0:0:1"}]
                ]}
            },
            "chat_instance": "-2291384178539442000",
            "data": "q0:0:1"
        }
    }"#
        .as_bytes(),
    )
    .unwrap();
    let Some(Interaction::Action { event }) = interaction(&update).unwrap() else {
        panic!("not an action");
    };
    assert_eq!(event.action_id, "q0:0");
    assert_eq!(event.value.as_deref(), Some("1"));
    assert_eq!(event.message_id, "996202000:61");
    assert_eq!(event.user.id, "996202000");
    assert_eq!(event.trigger_id.as_deref(), Some("4278655576057498999"));
}

#[test]
fn reply_becomes_a_thread_message() {
    let update = parse_update(&bytes(json!({
        "update_id": 11,
        "message": {
            "message_id": 78, "date": 1_767_225_660, "chat": group(),
            "from": user(42, "Ada", false), "text": "blue-green please",
            "reply_to_message": bot_message(77)
        }
    })))
    .unwrap();
    let UpdateKind::Message(m) = &update.kind else {
        panic!("not a message")
    };
    assert_eq!(thread_id(m), "-100200");
    assert!(!is_own_message(m, UserId(999)));
    assert!(is_own_message(m.reply_to_message().unwrap(), UserId(999)));
    let Interaction::Message { message } = thread_message(m).unwrap() else {
        panic!("not a message");
    };
    assert_eq!(message.id, "-100200:78");
    assert_eq!(message.text, "blue-green please");
    assert_eq!(message.reply_to.as_deref(), Some("-100200:77"));
    assert_eq!(message.metadata.date_sent, "2026-01-01T00:01:00Z");
    // A reply to the bot talks to it; the same text without the reply does not.
    assert!(talks_to_bot(m, UserId(999), "frogbot"));
    let mut plain = m.clone();
    plain.kind = match parse_update(&bytes(json!({"update_id": 1, "message": {
        "message_id": 79, "date": 1, "chat": group(), "from": user(42, "Ada", false), "text": "hi"
    }})))
    .unwrap()
    .kind
    {
        UpdateKind::Message(x) => x.kind,
        _ => unreachable!(),
    };
    assert!(!talks_to_bot(&plain, UserId(999), "frogbot"));
}

#[test]
fn forum_topics_have_their_own_thread() {
    let update = parse_update(&bytes(json!({"update_id": 12, "message": {
        "message_id": 90, "message_thread_id": 5, "is_topic_message": true, "date": 1,
        "chat": {"id": -100300, "type": "supergroup", "title": "Forum", "is_forum": true},
        "from": user(42, "Ada", false), "text": "hello"
    }})))
    .unwrap();
    let UpdateKind::Message(m) = &update.kind else {
        panic!()
    };
    assert_eq!(thread_id(m), "-100300:5");
}

#[test]
fn who_the_bot_listens_to() {
    let msg = |chat: Value, text: &str, entities: Value| {
        let u = parse_update(&bytes(json!({"update_id": 1, "message": {
            "message_id": 1, "date": 1, "chat": chat, "from": user(42, "Ada", false),
            "text": text, "entities": entities
        }})))
        .unwrap();
        match u.kind {
            UpdateKind::Message(m) => m,
            _ => unreachable!(),
        }
    };
    let private = json!({"id": 42, "type": "private", "first_name": "Ada"});
    assert!(talks_to_bot(
        &msg(private, "hi", json!([])),
        UserId(999),
        "frogbot"
    ));
    let mention = msg(
        group(),
        "@FrogBot hi",
        json!([{"type": "mention", "offset": 0, "length": 8}]),
    );
    assert!(talks_to_bot(&mention, UserId(999), "frogbot"));
    let other = msg(
        group(),
        "@other hi",
        json!([{"type": "mention", "offset": 0, "length": 6}]),
    );
    assert!(!talks_to_bot(&other, UserId(999), "frogbot"));
    let cmd = msg(
        group(),
        "/ask@frogbot x",
        json!([{"type": "bot_command", "offset": 0, "length": 12}]),
    );
    assert!(talks_to_bot(&cmd, UserId(999), "frogbot"));
    let cmd_other = msg(
        group(),
        "/ask@otherbot x",
        json!([{"type": "bot_command", "offset": 0, "length": 13}]),
    );
    assert!(!talks_to_bot(&cmd_other, UserId(999), "frogbot"));
}

#[test]
fn malformed_updates_are_errors() {
    assert!(parse_update(b"not json").is_err());
    assert!(parse_update(&bytes(json!({"message": {"text": "no update id"}}))).is_err());
    assert!(
        parse_update(&bytes(
            json!({"update_id": 1, "message": {"text": "no chat"}})
        ))
        .is_err()
    );
    // A callback query without data cannot be an action.
    let update = parse_update(&bytes(json!({"update_id": 2, "callback_query": {
        "id": "1", "from": user(42, "Ada", false), "message": bot_message(1), "chat_instance": "c"
    }})))
    .unwrap();
    assert!(interaction(&update).is_err());
}
