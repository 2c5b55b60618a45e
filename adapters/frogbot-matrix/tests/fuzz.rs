//! Fuzzing every reader of what a Matrix homeserver sends: timeline events as sync delivers them
//! (room messages with threads, replies and mentions, poll responses stable and unstable,
//! reactions, edits) classified into FrogBot messages and actions, and the adapter's ids.
//! Arbitrary and mutated real-shaped input (the shapes of tests/convert.rs): no panic, a clear
//! error or a sane value.

use frogbot_matrix::convert::{
    Incoming, classify, parse_user_id, strip_mention, strip_reply_fallback,
};
use frogbot_matrix::ids::{parse_answer_id, reaction_option, split_message_id};
use frogbot_model::fuzz::{arb_string, json_input, mutated_text};
use frogbot_model::{Interaction, iso_to_millis};
use matrix_sdk::ruma::events::AnySyncTimelineEvent;
use matrix_sdk::ruma::serde::Raw;
use matrix_sdk::ruma::{room_id, user_id};
use proptest::prelude::*;
use serde_json::{Value, json};

const BOT: &str = "@frogbot:localhost";

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn event(kind: &str, sender: &str, content: Value) -> Value {
    json!({"type": kind, "event_id": "$ev1", "sender": sender,
           "origin_server_ts": 1_700_000_000_000_i64, "content": content,
           "unsigned": {"age": 12}})
}

fn samples() -> Vec<Value> {
    vec![
        event(
            "m.poll.response",
            "@alice:localhost",
            json!({"m.selections": ["o1"], "m.relates_to": {"rel_type": "m.reference", "event_id": "$poll"}}),
        ),
        event(
            "org.matrix.msc3381.poll.response",
            "@alice:localhost",
            json!({"org.matrix.msc3381.poll.response": {"answers": ["o0", "o2"]},
                   "m.relates_to": {"rel_type": "m.reference", "event_id": "$poll"}}),
        ),
        event(
            "m.reaction",
            "@bob:localhost",
            json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": "$poll", "key": "2️⃣"}}),
        ),
        event(
            "m.room.message",
            "@alice:localhost",
            json!({"msgtype": "m.text", "body": "2",
                   "m.relates_to": {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": true,
                                    "m.in_reply_to": {"event_id": "$last"}}}),
        ),
        event(
            "m.room.message",
            "@alice:localhost",
            json!({"msgtype": "m.text", "body": "> <@bob:localhost> quoted\n\n1",
                   "format": "org.matrix.custom.html",
                   "formatted_body": "<mx-reply>…</mx-reply>1 <a href=\"https://matrix.to/#/@frogbot:localhost\">bot</a>",
                   "m.relates_to": {"m.in_reply_to": {"event_id": "$q"}}}),
        ),
        event(
            "m.room.message",
            "@alice:localhost",
            json!({"msgtype": "m.text", "body": format!("{BOT}: deploy"), "m.mentions": {"user_ids": [BOT]}}),
        ),
        event(
            "m.room.message",
            "@alice:localhost",
            json!({"msgtype": "m.text", "body": "* x", "m.new_content": {"msgtype": "m.text", "body": "x"},
                   "m.relates_to": {"rel_type": "m.replace", "event_id": "$orig"}}),
        ),
        event(
            "m.room.message",
            BOT,
            json!({"msgtype": "m.notice", "body": "mine"}),
        ),
    ]
}

fn check(v: &Value) -> Result<(), TestCaseError> {
    let Ok(raw_value) = serde_json::value::to_raw_value(v) else {
        return Ok(());
    };
    let raw: Raw<AnySyncTimelineEvent> = Raw::from_json(raw_value);
    match classify(
        &raw,
        room_id!("!room:localhost"),
        user_id!("@frogbot:localhost"),
    ) {
        Ok(Some(Incoming::Message(m))) => {
            let date = &m.message.metadata.date_sent;
            prop_assert!(iso_to_millis(date).is_some(), "{date}");
            prop_assert!(split_message_id(&m.thread).is_ok(), "{}", m.thread);
            prop_assert!(split_message_id(&m.message.id).is_ok(), "{}", m.message.id);
            prop_assert_ne!(m.message.author.id.as_str(), BOT);
        }
        Ok(Some(Incoming::Action(i))) => {
            if let Interaction::Action { event } = &i {
                prop_assert!(
                    split_message_id(&event.message_id).is_ok(),
                    "{}",
                    event.message_id
                );
                if let Some(value) = &event.value {
                    let _ = reaction_option(value);
                    for id in value.split(',') {
                        let _ = parse_answer_id(id);
                    }
                }
            }
            let _ = Incoming::Action(i).order_key().len();
        }
        Ok(_) => {}
        Err(e) => prop_assert!(!e.to_string().is_empty()),
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(384))]

    #[test]
    fn timeline_events_never_panic(v in json_input(samples())) {
        check(&v)?;
    }

    #[test]
    fn odd_times_and_ids_never_panic(
        sample in prop::sample::select(samples()),
        ts in prop_oneof![any::<i64>().prop_map(Value::from), any::<u64>().prop_map(Value::from), Just(json!(9_007_199_254_740_991_i64)), Just(json!(-1))],
        sender in prop_oneof![arb_string(), mutated_text("@alice:localhost".into())],
        event_id in prop_oneof![arb_string(), mutated_text("$ev1".into())],
    ) {
        let mut v = sample;
        v["origin_server_ts"] = ts;
        v["sender"] = json!(sender);
        v["event_id"] = json!(event_id);
        check(&v)?;
    }

    #[test]
    fn cut_events_never_panic(text in prop::sample::select(samples()).prop_flat_map(|v| mutated_text(v.to_string()))) {
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            check(&v)?;
        }
    }

    #[test]
    fn texts_and_ids_never_panic(s in prop_oneof![
        arb_string(),
        mutated_text("> <@bob:localhost> quoted\n\n1".into()),
        mutated_text("@frogbot:localhost: deploy".into()),
        mutated_text("!room:localhost|$ev1".into()),
        mutated_text("fqa:3:1".into()),
    ]) {
        let _ = strip_reply_fallback(&s);
        let _ = strip_mention(&s, user_id!("@frogbot:localhost"));
        let _ = split_message_id(&s);
        let _ = parse_answer_id(&s);
        let _ = reaction_option(&s);
        if let Some(u) = parse_user_id(&s) {
            prop_assert_eq!(u.as_str(), s.as_str());
        }
    }
}

// ---- Regressions ----

#[test]
fn regression_a_time_past_year_9999_is_clamped() {
    let mut v = samples()[3].clone();
    v["origin_server_ts"] = json!(9_007_199_254_740_991_i64);
    let raw: Raw<AnySyncTimelineEvent> =
        Raw::from_json(serde_json::value::to_raw_value(&v).unwrap());
    let Ok(Some(Incoming::Message(m))) = classify(
        &raw,
        room_id!("!room:localhost"),
        user_id!("@frogbot:localhost"),
    ) else {
        panic!("a message")
    };
    assert_eq!(m.message.metadata.date_sent, "9999-12-31T23:59:59.999Z");
}
