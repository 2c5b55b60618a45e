//! Fuzzing every reader of what Slack sends: request signatures (`convert::verify`), the
//! interactivity form, interaction payloads (`block_actions`, `view_submission`, shortcuts),
//! Events API bodies (`message`, `app_mention`), Socket Mode envelopes, timestamps and the
//! adapter's ids. Arbitrary and mutated real-shaped input (the shapes of tests/convert.rs): no
//! panic, a clear error or a sane value.

use frogbot_model::fuzz::{arb_json, arb_string, json_input, mutated, mutated_text};
use frogbot_model::{Interaction, iso_to_millis};
use frogbot_slack::Error;
use frogbot_slack::convert::{
    form_from_payload, interaction_from_payload, mentions, message_from_push_json,
    payload_from_form, sign, state_selections, strip_mention, ts_to_rfc3339, verify,
};
use frogbot_slack::ids::{ActionRef, split_id};
use proptest::prelude::*;
use serde_json::{Value, json};

const BOT: &str = "UBOT";
const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const NOW: i64 = 1_700_000_000;

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn block_actions(action: Value) -> Value {
    json!({
        "type": "block_actions",
        "user": {"id": "U123", "username": "ana", "name": "ana", "team_id": "T1"},
        "api_app_id": "A1",
        "token": "verification-token",
        "container": {"type": "message", "message_ts": "1700000100.000200", "channel_id": "C42", "is_ephemeral": false, "thread_ts": "1700000000.000100"},
        "trigger_id": "123.456.abcdef",
        "team": {"id": "T1", "domain": "frogs"},
        "channel": {"id": "C42", "name": "ops"},
        "message": {
            "type": "message", "subtype": "bot_message", "text": "Where?", "ts": "1700000100.000200",
            "bot_id": "B1", "thread_ts": "1700000000.000100", "blocks": []
        },
        "state": {"values": {"q1": {"fb1:c:1:0:pick": {"type": "checkboxes", "selected_options": [{"text": {"type": "plain_text", "text": "a"}, "value": "0"}]}}}},
        "response_url": "https://hooks.slack.com/actions/T1/1/xyz",
        "actions": [action]
    })
}

fn interaction_samples() -> Vec<Value> {
    vec![
        block_actions(
            json!({"action_id": "fb1:b:0:0", "block_id": "q0", "type": "button", "value": "1", "action_ts": "1700000101.1", "text": {"type": "plain_text", "text": "prod"}}),
        ),
        block_actions(
            json!({"action_id": "fb1:s:0:0", "block_id": "q0", "type": "static_select", "action_ts": "1.2", "selected_option": {"text": {"type": "plain_text", "text": "prod"}, "value": "1"}}),
        ),
        block_actions(
            json!({"action_id": "fb1:c:1:0", "block_id": "q1", "type": "checkboxes", "action_ts": "1.2", "selected_options": [
                {"text": {"type": "plain_text", "text": "a"}, "value": "0"},
                {"text": {"type": "plain_text", "text": "b"}, "value": "1"}
            ]}),
        ),
        json!({
            "type": "view_submission",
            "team": {"id": "T1", "domain": "frogs"},
            "user": {"id": "U123", "username": "ana", "name": "ana", "team_id": "T1"},
            "api_app_id": "A1", "token": "verification-token", "trigger_id": "999.888.fedcba",
            "view": {
                "id": "V1", "team_id": "T1", "type": "modal", "blocks": [],
                "private_metadata": "fq1:[\"C42:1700000000.000100\",\"C42:1700000100.000200\"]",
                "callback_id": "fb1:questions",
                "state": {"values": {
                    "q0": {"fb1:m:0:pick": {"type": "radio_buttons", "selected_option": {"text": {"type": "plain_text", "text": "prod"}, "value": "1"}}},
                    "q1": {"fb1:m:1:pick": {"type": "checkboxes", "selected_options": [{"text": {"type": "plain_text", "text": "a"}, "value": "0"}]}},
                    "q2t": {"fb1:m:2:text": {"type": "plain_text_input", "value": "my own words"}}
                }},
                "hash": "156772938.1827394",
                "title": {"type": "plain_text", "text": "Answer"},
                "close": {"type": "plain_text", "text": "Cancel"},
                "submit": {"type": "plain_text", "text": "Submit"},
                "root_view_id": "V1", "app_id": "A1", "external_id": "", "bot_id": "B1"
            },
            "response_urls": [], "is_enterprise_install": false
        }),
        json!({
            "type": "shortcut", "token": "t", "action_ts": "1.2",
            "team": {"id": "T1", "domain": "frogs"},
            "user": {"id": "U123", "username": "ana", "team_id": "T1"},
            "callback_id": "cb", "trigger_id": "1.2.3"
        }),
    ]
}

fn event_callback(event: Value) -> Value {
    json!({
        "token": "verification-token", "team_id": "T1", "api_app_id": "A1",
        "event": event, "type": "event_callback", "event_id": "Ev1", "event_time": 1700000200,
        "authorizations": [{"team_id": "T1", "user_id": BOT, "is_bot": true, "is_enterprise_install": false}],
        "is_ext_shared_channel": false, "event_context": "4-abc"
    })
}

fn rich_text_blocks(text: &str) -> Value {
    json!([{"type": "rich_text", "block_id": "b1", "elements": [
        {"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}
    ]}])
}

fn event_samples() -> Vec<Value> {
    vec![
        event_callback(json!({
            "type": "message", "channel": "C42", "user": "U123",
            "text": "/answer 2", "ts": "1700000200.000300", "thread_ts": "1700000000.000100",
            "event_ts": "1700000200.000300", "channel_type": "channel", "team": "T1",
            "blocks": rich_text_blocks("/answer 2"),
            "client_msg_id": "4b7c3c43-7b3e-4e7f-a2c1-5d8e3f7c9a10"
        })),
        event_callback(json!({
            "type": "app_mention", "user": "U123", "text": "<@UBOT> deploy please",
            "ts": "1700000300.000400", "channel": "C42", "event_ts": "1700000300.000400", "team": "T1",
            "blocks": rich_text_blocks("deploy please")
        })),
        event_callback(json!({
            "type": "message", "subtype": "message_changed", "channel": "C42", "hidden": true,
            "ts": "1700000400.000100", "event_ts": "1700000400.000100",
            "message": {"type": "message", "user": "U123", "text": "edited", "ts": "1700000200.000300"},
            "previous_message": {"type": "message", "user": "U123", "text": "orig", "ts": "1700000200.000300"}
        })),
        event_callback(json!({
            "type": "message", "subtype": "file_share", "channel": "D1", "user": "U123", "text": "a file",
            "ts": "1700000500.000100", "channel_type": "im",
            "files": [{"id": "F1", "name": "x.txt", "mimetype": "text/plain"}]
        })),
        json!({"type": "url_verification", "token": "t", "challenge": "abc"}),
    ]
}

/// What a converted message promises: a time that is RFC 3339 or empty, and the text Slack sent.
fn check_message(body: &Value) -> Result<(), TestCaseError> {
    match message_from_push_json(body, BOT) {
        Ok(Some(m)) => {
            let date = &m.message.metadata.date_sent;
            prop_assert!(date.is_empty() || iso_to_millis(date).is_some(), "{date:?}");
            // A person's text is never lost (whatever happened to the blocks beside it).
            if let Some(text) = body.pointer("/event/text").and_then(Value::as_str) {
                prop_assert_eq!(&m.message.text, text);
            }
            prop_assert!(m.thread.contains(':') && m.message.id.contains(':'));
            let _ = strip_mention(&m.message.text, BOT);
        }
        Ok(None) => {}
        Err(e) => prop_assert!(!e.to_string().is_empty()),
    }
    Ok(())
}

fn check_interaction(payload: &Value) -> Result<(), TestCaseError> {
    let _ = state_selections(payload);
    match interaction_from_payload(payload) {
        Ok(Some(Interaction::Action { event })) => {
            let _ = ActionRef::decode(&event.action_id);
        }
        Ok(Some(Interaction::ModalSubmit { event })) => {
            let _ = event.values.len();
        }
        Ok(_) => {}
        Err(e) => prop_assert!(matches!(e, Error::Payload(_))),
    }
    Ok(())
}

/// Socket Mode's frame as the adapter reads it: JSON, an `envelope_id`, a `type`, the payload
/// handed unchanged to the HTTP mode's readers.
fn socket_frame(frame: &str) -> Result<(), TestCaseError> {
    let Ok(mut envelope) = serde_json::from_str::<Value>(frame) else {
        return Ok(());
    };
    let kind = envelope["type"].as_str().unwrap_or_default().to_owned();
    if envelope["envelope_id"].as_str().is_none() {
        return Ok(());
    }
    let payload = envelope["payload"].take();
    match kind.as_str() {
        "events_api" => check_message(&payload),
        "interactive" => check_interaction(&payload),
        _ => Ok(()),
    }
}

fn envelope_samples() -> Vec<Value> {
    let mut out: Vec<Value> = event_samples()
        .into_iter()
        .map(|p| json!({"envelope_id": "e1", "type": "events_api", "accepts_response_payload": false, "retry_attempt": 0, "payload": p}))
        .collect();
    out.extend(interaction_samples().into_iter().map(
        |p| json!({"envelope_id": "e2", "type": "interactive", "accepts_response_payload": true, "payload": p}),
    ));
    out.push(json!({"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A1"}}));
    out.push(json!({"type": "disconnect", "reason": "refresh_requested"}));
    out
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn interactions_never_panic(payload in json_input(interaction_samples())) {
        check_interaction(&payload)?;
    }

    #[test]
    fn event_bodies_never_panic(body in json_input(event_samples())) {
        check_message(&body)?;
    }

    #[test]
    fn socket_mode_envelopes_never_panic(envelope in json_input(envelope_samples()), cut in any::<bool>()) {
        let frame = envelope.to_string();
        socket_frame(&frame)?;
        if cut {
            // Half a frame.
            let mut half = frame.len() / 2;
            while !frame.is_char_boundary(half) {
                half -= 1;
            }
            socket_frame(&frame[..half])?;
        }
    }

    #[test]
    fn forms_never_panic(form in prop_oneof![
        prop::sample::select(interaction_samples()).prop_flat_map(|p| mutated_text(form_from_payload(&p))),
        arb_string(),
    ]) {
        if let Ok(payload) = payload_from_form(&form) {
            check_interaction(&payload)?;
        }
    }

    #[test]
    fn signatures_never_panic_and_only_the_right_one_passes(
        body in prop_oneof![arb_string(), arb_json().prop_map(|v| v.to_string())],
        ts in prop_oneof![
            arb_string(),
            any::<i64>().prop_map(|t| t.to_string()),
            Just(NOW.to_string()),
            mutated_text(NOW.to_string()),
        ],
        sig in prop_oneof![arb_string(), Just("v0=".to_owned()), "v0=[0-9a-f]{0,70}"],
        now in prop_oneof![Just(NOW), any::<i64>()],
    ) {
        let _ = verify(SECRET, &ts, &sig, body.as_bytes(), now);
        let _ = verify("", &ts, &sig, body.as_bytes(), now);
        // The genuine signature passes at its time; any change to it fails.
        let good = sign(SECRET, &NOW.to_string(), body.as_bytes()).unwrap();
        verify(SECRET, &NOW.to_string(), &good, body.as_bytes(), NOW).unwrap();
        if sig != good {
            prop_assert!(verify(SECRET, &NOW.to_string(), &sig, body.as_bytes(), NOW).is_err());
        }
    }

    #[test]
    fn timestamps_and_ids_never_panic(s in prop_oneof![
        arb_string(),
        mutated_text("1700000000.123456".into()),
        any::<u64>().prop_map(|n| format!("{n}.999999")),
        mutated_text("C42:1700000000.000100".into()),
        mutated_text("fb1:c:1:0:pick".into()),
    ]) {
        if let Some(t) = ts_to_rfc3339(&s) {
            prop_assert!(iso_to_millis(&t).is_some(), "{t}");
        }
        let _ = split_id(&s);
        let _ = ActionRef::decode(&s);
        let _ = mentions(&s, BOT);
        let _ = strip_mention(&s, BOT);
        let _ = strip_mention(&s, &s);
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// A message whose blocks are garbage still arrives with its text.
    #[test]
    fn unreadable_blocks_never_cost_the_text(blocks in mutated(rich_text_blocks("x")), text in "[a-z][a-z ]{0,19}") {
        for kind in ["message", "app_mention"] {
            let body = event_callback(json!({
                "type": kind, "channel": "C42", "user": "U123", "text": text,
                "ts": "1700000200.000300", "blocks": blocks
            }));
            match message_from_push_json(&body, BOT) {
                Ok(Some(m)) => prop_assert_eq!(&m.message.text, &text),
                other => prop_assert!(false, "{kind}: a person's message was lost: {other:?}"),
            }
        }
    }
}

// ---- Regressions (the minimal inputs the fuzzing found) ----

#[test]
fn regression_an_overflowing_ts_is_no_panic() {
    assert_eq!(ts_to_rfc3339("9223372036854775807.000000"), None);
    let body = event_callback(json!({
        "type": "message", "channel": "C42", "user": "U123", "text": "hi",
        "ts": "9223372036854775807.000000"
    }));
    let m = message_from_push_json(&body, BOT).unwrap().unwrap();
    assert_eq!(m.message.metadata.date_sent, "");
}

#[test]
fn regression_unreadable_blocks_keep_the_text() {
    for kind in ["message", "app_mention"] {
        let body = event_callback(json!({
            "type": kind, "channel": "C42", "user": "U123", "text": "deploy it",
            "ts": "1700000200.000300", "blocks": "not blocks"
        }));
        let m = message_from_push_json(&body, BOT).unwrap().unwrap();
        assert_eq!(m.message.text, "deploy it", "{kind}");
        assert_eq!(m.message.raw["blocks"], "not blocks");
    }
}

#[test]
fn regression_unreadable_content_without_text_is_refused() {
    let body = event_callback(json!({
        "type": "message", "channel": "C42", "user": "U123",
        "ts": "1700000200.000300", "blocks": "not blocks"
    }));
    assert!(matches!(
        message_from_push_json(&body, BOT),
        Err(Error::Payload(_))
    ));
    let body = event_callback(json!({
        "type": "message", "channel": "C42", "user": "U123", "text": 42,
        "ts": "1700000200.000300"
    }));
    assert!(matches!(
        message_from_push_json(&body, BOT),
        Err(Error::Payload(_))
    ));
}
