//! Bot API updates (the documented JSON shapes) read with teloxide, then converted.

use frogbot_model::Interaction;
use frogbot_telegram::convert::{
    addressed_message, interaction, is_own_message, parse_update, talks_to_bot, thread_message,
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

/// The message of an update, read with teloxide.
fn message_of(update: Value) -> teloxide::types::Message {
    match parse_update(&bytes(update)).unwrap().kind {
        UpdateKind::Message(m) => m,
        other => panic!("not a message: {other:?}"),
    }
}

/// Who a message names and where, on the text the engine gets: `(user id, the text named)`.
fn names(update: Value) -> (String, Vec<(String, String)>) {
    let m = addressed_message(&message_of(update), UserId(999), "frogbot").unwrap();
    let named = m
        .mentions
        .iter()
        .map(|x| (x.user.id.clone(), m.text[x.start..x.end].to_owned()))
        .collect();
    (m.text, named)
}

/// `text_mention` entities (a person picked from the member list who has no username; the shape
/// of the Bot API's MessageEntity: `type`, `offset` and `length` in UTF-16 code units, `user`)
/// become mentions with byte ranges into the text the engine gets, after the bot's own
/// `/ask@frogbot` is read as `/ask`; the bot itself is never named.
#[test]
fn text_mentions_are_named_with_byte_ranges_of_the_final_text() {
    // "/ask@frogbot 🐸 Bob Ship it? | yes | no": 🐸 is two UTF-16 units (offset 15 = 12 + 1 + 2).
    let (text, named) = names(json!({"update_id": 1, "message": {
        "message_id": 30, "date": 1_767_225_600, "chat": group(),
        "from": user(42, "Alice", false),
        "text": "/ask@frogbot Bob 🐸 Ship it? | yes | no",
        "entities": [
            {"type": "bot_command", "offset": 0, "length": 12},
            {"type": "text_mention", "offset": 13, "length": 3,
             "user": {"id": 77, "is_bot": false, "first_name": "Bob"}}
        ]
    }}));
    assert_eq!(text, "/ask Bob 🐸 Ship it? | yes | no");
    assert_eq!(named, [("77".to_owned(), "Bob".to_owned())]);

    // After a leading `@frogbot:` (stripped), a name after an emoji, and the bot's own text
    // mention (not named).
    let (text, named) = names(json!({"update_id": 2, "message": {
        "message_id": 31, "date": 1_767_225_600, "chat": group(),
        "from": user(42, "Alice", false),
        "text": "@frogbot: /ask 🐸 Bob Vega: ready? ask FrogBot",
        "entities": [
            {"type": "mention", "offset": 0, "length": 8},
            {"type": "text_mention", "offset": 18, "length": 8,
             "user": {"id": 77, "is_bot": false, "first_name": "Bob", "last_name": "Vega"}},
            {"type": "text_mention", "offset": 39, "length": 7,
             "user": {"id": 999, "is_bot": true, "first_name": "FrogBot"}}
        ]
    }}));
    assert_eq!(text, "/ask 🐸 Bob Vega: ready? ask FrogBot");
    assert_eq!(named, [("77".to_owned(), "Bob Vega".to_owned())]);
    let m = addressed_message(
        &message_of(json!({"update_id": 3, "message": {
            "message_id": 32, "date": 1_767_225_600, "chat": group(),
            "from": user(42, "Alice", false),
            "text": "/ask Bob hi",
            "entities": [{"type": "text_mention", "offset": 5, "length": 3,
                "user": {"id": 77, "is_bot": false, "first_name": "Bob", "last_name": "Vega"}}]
        }})),
        UserId(999),
        "frogbot",
    )
    .unwrap();
    assert_eq!(m.mentions[0].user.name.as_deref(), Some("Bob Vega"));
    assert_eq!((m.mentions[0].start, m.mentions[0].end), (5, 8));

    // An entity that does not fit the text (past its end) names nobody, and nothing panics.
    let (_, named) = names(json!({"update_id": 4, "message": {
        "message_id": 33, "date": 1_767_225_600, "chat": group(),
        "from": user(42, "Alice", false), "text": "/ask Bob",
        "entities": [{"type": "text_mention", "offset": 5, "length": 30,
            "user": {"id": 77, "is_bot": false, "first_name": "Bob"}}]
    }}));
    assert!(named.is_empty());
}

/// The author of the message replied to is named without being written (`start == end == 0`):
/// `/ask Ship today?` as a reply to bob's message asks bob. A reply to the bot, and the forum
/// topic's opening message (which every message of a topic replies to), name nobody; `@bob` is
/// a mention only as the username of the author replied to (a `mention` entity carries no user
/// and a bot cannot look a username up).
#[test]
fn the_author_replied_to_is_named_and_usernames_only_as_that_author() {
    let bob = json!({"message_id": 20, "date": 1_767_225_500, "chat": group(),
        "from": user(77, "Bob", false), "text": "I can ship"});
    let (text, named) = names(json!({"update_id": 5, "message": {
        "message_id": 34, "date": 1_767_225_600, "chat": group(),
        "from": user(42, "Alice", false), "text": "/ask@frogbot Ship today?",
        "entities": [{"type": "bot_command", "offset": 0, "length": 12}],
        "reply_to_message": bob
    }}));
    assert_eq!(text, "/ask Ship today?");
    assert_eq!(named, [("77".to_owned(), String::new())]);

    // `@bob` written: the replied-to author's username, so a mention with its range; `@carol`
    // is nobody the message lets the bot know.
    let (text, named) = names(json!({"update_id": 6, "message": {
        "message_id": 35, "date": 1_767_225_600, "chat": group(),
        "from": user(42, "Alice", false), "text": "/ask @Bob ready? cc @carol",
        "entities": [
            {"type": "bot_command", "offset": 0, "length": 4},
            {"type": "mention", "offset": 5, "length": 4},
            {"type": "mention", "offset": 20, "length": 6}
        ],
        "reply_to_message": bob
    }}));
    assert_eq!(text, "/ask @Bob ready? cc @carol");
    assert_eq!(
        named,
        [
            ("77".to_owned(), String::new()),
            ("77".to_owned(), "@Bob".to_owned())
        ]
    );
    // Without a reply, `@bob` names nobody.
    let (_, named) = names(json!({"update_id": 7, "message": {
        "message_id": 36, "date": 1_767_225_600, "chat": group(),
        "from": user(42, "Alice", false), "text": "/ask @bob ready?",
        "entities": [{"type": "mention", "offset": 5, "length": 4}]
    }}));
    assert!(named.is_empty());

    // A reply to the bot's own message: nobody.
    let (_, named) = names(json!({"update_id": 8, "message": {
        "message_id": 37, "date": 1_767_225_600, "chat": group(),
        "from": user(42, "Alice", false), "text": "/ask Ship today?",
        "reply_to_message": bot_message(21)
    }}));
    assert!(named.is_empty());

    // In a forum topic, a message "replies" to the topic's opening (a service message): nobody.
    let forum = json!({"id": -100300, "type": "supergroup", "title": "Ops", "is_forum": true});
    let (_, named) = names(json!({"update_id": 9, "message": {
        "message_id": 38, "message_thread_id": 7, "is_topic_message": true,
        "date": 1_767_225_600, "chat": forum, "from": user(42, "Alice", false),
        "text": "/ask Ship today?",
        "reply_to_message": {"message_id": 7, "message_thread_id": 7, "date": 1_767_225_000,
            "chat": forum, "from": user(77, "Bob", false),
            "forum_topic_created": {"name": "Releases", "icon_color": 7322096}}
    }}));
    assert!(named.is_empty());
}
