//! Fuzzing every reader of what Telegram sends: Bot API updates (messages with entities and
//! captions, replies, callback queries) read with teloxide and converted, who a message talks
//! to, the adapter's ids and callback tokens, and the Markdown → HTML formatting of replies.
//! Arbitrary and mutated real-shaped input (the shapes of tests/convert.rs): no panic, a clear
//! error or a sane value.

use frogbot_model::fuzz::{arb_string, json_input, mutated_text};
use frogbot_model::{Interaction, iso_to_millis};
use frogbot_telegram::convert::{
    addressed_message, entity_text, interaction, is_own_message, parse_update, strip_mention,
    talks_to_bot,
};
use frogbot_telegram::format::{escape, messages, to_html, visible_len, visible_text};
use frogbot_telegram::ids::{Token, split_message_id, split_thread_id, thread_id};
use proptest::prelude::*;
use serde_json::{Value, json};
use teloxide::types::{UpdateKind, UserId};

const BOT: UserId = UserId(999);

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn user(id: u64, name: &str, is_bot: bool) -> Value {
    json!({"id": id, "is_bot": is_bot, "first_name": name, "username": name.to_lowercase()})
}

fn group() -> Value {
    json!({"id": -100200, "type": "supergroup", "title": "Ops", "is_forum": true})
}

fn bot_message(id: i64) -> Value {
    json!({
        "message_id": id, "date": 1_767_225_600, "chat": group(),
        "from": user(999, "FrogBot", true), "text": "❓ Env\nWhere?",
        "reply_markup": {"inline_keyboard": [[{"text": "prod", "callback_data": "q0:0:1"}]]}
    })
}

fn update_samples() -> Vec<Value> {
    vec![
        json!({"update_id": 10, "callback_query": {
            "id": "4382bfdwdsb323b2d9", "from": user(42, "Ada", false),
            "message": bot_message(77), "chat_instance": "-12345", "data": "q3:0:1"
        }}),
        json!({"update_id": 11, "message": {
            "message_id": 78, "message_thread_id": 5, "date": 1_767_225_700, "chat": group(),
            "from": user(42, "Ada", false), "text": "🐸 @frogbot /ask@frogbot deploy",
            "entities": [
                {"type": "mention", "offset": 3, "length": 8},
                {"type": "bot_command", "offset": 12, "length": 12},
                {"type": "bold", "offset": 0, "length": 2}
            ],
            "reply_to_message": bot_message(77)
        }}),
        json!({"update_id": 12, "message": {
            "message_id": 79, "date": 1_767_225_800, "chat": group(),
            "from": user(42, "Ada", false), "caption": "look @FrogBot",
            "caption_entities": [{"type": "mention", "offset": 5, "length": 8}],
            "photo": [{"file_id": "f1", "file_unique_id": "u1", "width": 1, "height": 1}]
        }}),
        json!({"update_id": 13, "message": {
            "message_id": 80, "date": 1_767_225_900, "chat": group(),
            "from": user(42, "Ada", false), "text": "hey Bot",
            "entities": [{"type": "text_mention", "offset": 4, "length": 3, "user": user(999, "FrogBot", true)}]
        }}),
        json!({"update_id": 14, "message": {
            "message_id": 81, "date": 1_767_226_000,
            "chat": {"id": 42, "type": "private", "first_name": "Ada"},
            "from": user(42, "Ada", false), "text": "hi"
        }}),
    ]
}

fn check_update(bytes: &[u8]) -> Result<(), TestCaseError> {
    let Ok(update) = parse_update(bytes) else {
        return Ok(());
    };
    match interaction(&update) {
        Ok(Some(Interaction::Message { message })) => {
            let date = &message.metadata.date_sent;
            prop_assert!(iso_to_millis(date).is_some(), "{date}");
            let _ = strip_mention(&message.text, "frogbot");
        }
        Ok(Some(Interaction::Action { event })) => {
            let _ = Token::from_action(&event.action_id, event.value.as_deref());
            prop_assert!(
                split_message_id(&event.message_id).is_ok(),
                "{}",
                event.message_id
            );
        }
        Ok(_) => {}
        Err(e) => prop_assert!(!e.to_string().is_empty()),
    }
    if let UpdateKind::Message(m) = &update.kind {
        let _ = talks_to_bot(m, BOT, "frogbot");
        let _ = talks_to_bot(m, BOT, "");
        let _ = is_own_message(m, BOT);
        // Who it names: ranges inside the text the engine gets, on character boundaries.
        if let Ok(named) = addressed_message(m, BOT, "frogbot") {
            for x in &named.mentions {
                prop_assert!(
                    x.start <= x.end && named.text.get(x.start..x.end).is_some(),
                    "{x:?}"
                );
                prop_assert!(x.user.id != BOT.0.to_string(), "{x:?}");
            }
        }
        let t = thread_id(m);
        prop_assert!(split_thread_id(&t).is_ok(), "{t}");
    }
    Ok(())
}

/// Entities anywhere: inside surrogate pairs, past the end, huge.
fn wild_entities() -> impl Strategy<Value = Value> {
    let offset = prop_oneof![
        0usize..40,
        Just(usize::MAX),
        Just(u32::MAX as usize),
        Just(1usize << 53)
    ];
    prop::collection::vec(
        (
            prop::sample::select(vec![
                "mention",
                "bot_command",
                "bold",
                "url",
                "hashtag",
                "text_mention",
            ]),
            offset.clone(),
            offset,
        ),
        0..5,
    )
    .prop_map(|es| {
        Value::Array(
            es.into_iter()
                .map(|(kind, o, l)| {
                    let mut e = json!({"type": kind, "offset": o, "length": l});
                    if kind == "text_mention" {
                        // Someone, or the bot itself.
                        let id = if o % 2 == 0 { 77 } else { 999 };
                        e["user"] = json!({"id": id, "is_bot": id == 999, "first_name": "X"});
                    }
                    e
                })
                .collect(),
        )
    })
}

proptest! {
    #![proptest_config(config(384))]

    #[test]
    fn updates_never_panic(v in json_input(update_samples())) {
        check_update(&serde_json::to_vec(&v).unwrap())?;
    }

    #[test]
    fn cut_updates_never_panic(text in prop::sample::select(update_samples()).prop_flat_map(|v| mutated_text(v.to_string()))) {
        check_update(text.as_bytes())?;
    }

    #[test]
    fn any_entity_is_read_or_ignored(text in prop_oneof![arb_string(), "[🐸a@/ ]{0,20}"], entities in wild_entities(), caption in any::<bool>()) {
        let (t, e) = if caption { ("caption", "caption_entities") } else { ("text", "entities") };
        let mut message = json!({
            "message_id": 78, "date": 1_767_225_700, "chat": group(),
            "from": user(42, "Ada", false)
        });
        message[t] = json!(text);
        message[e] = entities;
        if caption {
            message["photo"] = json!([{"file_id": "f1", "file_unique_id": "u1", "width": 1, "height": 1}]);
        }
        check_update(&serde_json::to_vec(&json!({"update_id": 1, "message": message})).unwrap())?;
    }

    #[test]
    fn entity_ranges_never_panic(text in prop_oneof![arb_string(), "[🐸é a]{0,12}"], offset in prop_oneof![0usize..30, any::<usize>()], length in prop_oneof![0usize..30, any::<usize>()]) {
        if let Some(covered) = entity_text(&text, offset, length) {
            prop_assert_eq!(covered.encode_utf16().count(), length);
            prop_assert!(text.contains(covered));
        }
    }

    #[test]
    fn ids_and_tokens_never_panic(s in prop_oneof![
        arb_string(),
        mutated_text("q3:0:1".into()),
        mutated_text("-100200:77".into()),
        mutated_text("-100200/5".into()),
        any::<i64>().prop_map(|n| format!("{n}:{n}")),
    ]) {
        if let Some(t) = Token::decode(&s) {
            prop_assert!(Token::decode(&t.encode()).is_some());
        }
        let _ = split_message_id(&s);
        let _ = split_thread_id(&s);
        let _ = strip_mention(&s, "frogbot");
        let _ = strip_mention(&s, &s);
    }
}

proptest! {
    // Formatting splits text (slow in debug builds): fewer cases.
    #![proptest_config(config(48))]

    #[test]
    fn formatting_keeps_the_limit_and_never_panics(markdown in prop_oneof![
        prop::collection::vec(any::<char>(), 0..300).prop_map(String::from_iter),
        prop::collection::vec(prop_oneof![
            Just("**b** ".to_owned()), Just("_i_ ".to_owned()), Just("`c` ".to_owned()), Just("```rust\n".to_owned()),
            Just("[l](http://x) ".to_owned()), Just("[m](tg://user?id=1) ".to_owned()), Just("| a | b |\n|---|---|\n| 1 | 2 |\n".to_owned()),
            Just("> q\n".to_owned()), Just("- i\n".to_owned()), Just("<&>".to_owned()), Just("\n\n".to_owned()), "[a-z🐸 ]{0,30}",
        ], 0..16).prop_map(|v| v.concat()),
    ], max in prop_oneof![1usize..20, Just(100usize), Just(4096usize)]) {
        for html in messages(&markdown, max) {
            prop_assert!(visible_len(&html) <= max, "{} > {max}: {html:?}", visible_len(&html));
            prop_assert!(!visible_text(&html).trim().is_empty());
        }
        let _ = to_html(&markdown);
        let _ = visible_text(&markdown);
        prop_assert_eq!(visible_text(&escape(&markdown)), markdown.clone());
    }
}

// ---- Regressions (the minimal inputs the fuzzing found) ----

fn group_message(text: &str, entities: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"update_id": 1, "message": {
        "message_id": 78, "date": 1_767_225_700, "chat": group(),
        "from": user(42, "Ada", false), "text": text, "entities": entities
    }}))
    .unwrap()
}

#[test]
fn regression_entities_past_the_text_or_inside_a_surrogate_pair_do_not_panic() {
    for entities in [
        json!([{"type": "mention", "offset": 0, "length": 50}]),
        json!([{"type": "mention", "offset": 1, "length": 1}]),
        json!([{"type": "bot_command", "offset": 9, "length": 0}]),
        json!([{"type": "mention", "offset": u64::MAX, "length": 2}]),
    ] {
        let update = parse_update(&group_message("🐸", entities.clone())).unwrap();
        let UpdateKind::Message(m) = &update.kind else {
            panic!("a message")
        };
        assert!(!talks_to_bot(m, BOT, "frogbot"), "{entities}");
    }
    // A good entity beside a broken one still counts.
    let update = parse_update(&group_message(
        "🐸 @frogbot",
        json!([{"type": "mention", "offset": 1, "length": 1}, {"type": "mention", "offset": 3, "length": 8}]),
    ))
    .unwrap();
    let UpdateKind::Message(m) = &update.kind else {
        panic!("a message")
    };
    assert!(talks_to_bot(m, BOT, "frogbot"));
}
