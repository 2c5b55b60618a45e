//! Conversion of Slack's documented payloads into FrogBot interactions and thread messages.

use frogbot_core::model::Interaction;
use frogbot_slack::convert::{
    interaction_from_payload, is_own_message, message_from_push_json, payload_from_form,
};
use serde_json::{Value, json};
use slack_morphism::prelude::*;

const BOT: &str = "UBOT";

fn block_actions(action: Value) -> Value {
    json!({
        "type": "block_actions",
        "user": {"id": "U123", "username": "ana", "name": "ana", "team_id": "T1"},
        "api_app_id": "A1",
        "token": "verification-token",
        "container": {"type": "message", "message_ts": "1700000100.000200", "channel_id": "C42", "is_ephemeral": false},
        "trigger_id": "123.456.abcdef",
        "team": {"id": "T1", "domain": "frogs"},
        "enterprise": null,
        "is_enterprise_install": false,
        "channel": {"id": "C42", "name": "ops"},
        "message": {
            "type": "message", "subtype": "bot_message", "text": "Where?", "ts": "1700000100.000200",
            "bot_id": "B1", "thread_ts": "1700000000.000100",
            "blocks": []
        },
        "state": {"values": {}},
        "response_url": "https://hooks.slack.com/actions/T1/1/xyz",
        "actions": [action]
    })
}

#[test]
fn button_click_becomes_an_action() {
    let raw = block_actions(json!({
        "action_id": "fb1:b:0:1:0", "block_id": "b1",
        "text": {"type": "plain_text", "text": "prod", "emoji": true},
        "value": "1", "type": "button", "action_ts": "1700000150.000300"
    }));
    let Some(Interaction::Action { event }) = interaction_from_payload(&raw).unwrap() else {
        panic!("not an action")
    };
    assert_eq!(event.action_id, "fb1:b:0:1:0");
    assert_eq!(event.value.as_deref(), Some("1"));
    assert_eq!(event.message_id, "C42:1700000100.000200");
    assert_eq!(event.user.id, "U123");
    assert_eq!(event.user.name.as_deref(), Some("ana"));
    assert_eq!(event.trigger_id.as_deref(), Some("123.456.abcdef"));
    assert_eq!(event.raw, raw);
}

#[test]
fn static_select_gives_the_selected_option_value() {
    let raw = block_actions(json!({
        "type": "static_select", "action_id": "fb1:s:0:-:3", "block_id": "b2",
        "selected_option": {"text": {"type": "plain_text", "text": "option 7", "emoji": true}, "value": "7"},
        "placeholder": {"type": "plain_text", "text": "Choose an option", "emoji": true},
        "action_ts": "1700000150.000300"
    }));
    let Some(Interaction::Action { event }) = interaction_from_payload(&raw).unwrap() else {
        panic!("not an action")
    };
    assert_eq!(event.action_id, "fb1:s:0:-:3");
    assert_eq!(event.value.as_deref(), Some("7"));
}

#[test]
fn checkboxes_give_all_selected_values_joined() {
    let raw = block_actions(json!({
        "type": "checkboxes", "action_id": "fb1:c:1:-:0", "block_id": "b3",
        "selected_options": [
            {"text": {"type": "plain_text", "text": "a", "emoji": true}, "value": "0"},
            {"text": {"type": "plain_text", "text": "c", "emoji": true}, "value": "2"}
        ],
        "action_ts": "1700000150.000300"
    }));
    let Some(Interaction::Action { event }) = interaction_from_payload(&raw).unwrap() else {
        panic!("not an action")
    };
    assert_eq!(event.value.as_deref(), Some("0,2"));
    // Unchecking everything.
    let raw = block_actions(json!({
        "type": "checkboxes", "action_id": "fb1:c:1:-:0", "block_id": "b3",
        "selected_options": [], "action_ts": "1700000150.000300"
    }));
    let Some(Interaction::Action { event }) = interaction_from_payload(&raw).unwrap() else {
        panic!("not an action")
    };
    assert_eq!(event.value, None);
}

#[test]
fn a_form_encoded_request_body_is_read() {
    let raw = block_actions(json!({"action_id": "x", "value": "1", "type": "button"}));
    let encoded: String = raw
        .to_string()
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            b' ' => "+".into(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let body = format!("payload={encoded}");
    assert_eq!(payload_from_form(&body).unwrap(), raw);
}

#[test]
fn view_submission_becomes_a_modal_submit() {
    let raw = json!({
        "type": "view_submission",
        "team": {"id": "T1", "domain": "frogs"},
        "user": {"id": "U123", "username": "ana", "name": "ana", "team_id": "T1"},
        "api_app_id": "A1",
        "token": "verification-token",
        "trigger_id": "999.888.fedcba",
        "view": {
            "id": "V1", "team_id": "T1", "type": "modal",
            "blocks": [],
            "private_metadata": "fq1:[\"C42:1700000000.000100\",\"C42:1700000100.000200\"]",
            "callback_id": "fb1:questions",
            "state": {"values": {
                "q0": {"fb1:m:0:pick": {"type": "radio_buttons", "selected_option": {"text": {"type": "plain_text", "text": "prod"}, "value": "1"}}},
                "q1": {"fb1:m:1:pick": {"type": "checkboxes", "selected_options": [
                    {"text": {"type": "plain_text", "text": "a"}, "value": "0"},
                    {"text": {"type": "plain_text", "text": "b"}, "value": "1"}
                ]}},
                "q2t": {"fb1:m:2:text": {"type": "plain_text_input", "value": "my own words"}}
            }},
            "hash": "156772938.1827394",
            "title": {"type": "plain_text", "text": "Answer"},
            "clear_on_close": false, "notify_on_close": false,
            "close": {"type": "plain_text", "text": "Cancel"},
            "submit": {"type": "plain_text", "text": "Submit"},
            "previous_view_id": null, "root_view_id": "V1", "app_id": "A1",
            "external_id": "", "app_installed_team_id": "T1", "bot_id": "B1"
        },
        "response_urls": [],
        "is_enterprise_install": false
    });
    let Some(Interaction::ModalSubmit { event }) = interaction_from_payload(&raw).unwrap() else {
        panic!("not a modal submit")
    };
    assert_eq!(event.values["fb1:m:0:pick"], json!("1"));
    assert_eq!(event.values["fb1:m:1:pick"], json!(["0", "1"]));
    assert_eq!(event.values["fb1:m:2:text"], json!("my own words"));
    assert_eq!(
        event.private_metadata.as_deref(),
        Some("fq1:[\"C42:1700000000.000100\",\"C42:1700000100.000200\"]")
    );
    assert_eq!(event.user.id, "U123");
    assert_eq!(event.trigger_id.as_deref(), Some("999.888.fedcba"));
}

#[test]
fn shortcuts_are_not_interactions() {
    let raw = json!({
        "type": "shortcut", "token": "t", "action_ts": "1.2",
        "team": {"id": "T1", "domain": "frogs"},
        "user": {"id": "U123", "username": "ana", "team_id": "T1"},
        "callback_id": "cb", "trigger_id": "1.2.3"
    });
    assert_eq!(interaction_from_payload(&raw).unwrap(), None);
    assert!(interaction_from_payload(&json!({"type": "nonsense"})).is_err());
}

fn event_callback(event: Value) -> Value {
    json!({
        "token": "verification-token",
        "team_id": "T1",
        "api_app_id": "A1",
        "event": event,
        "type": "event_callback",
        "event_id": "Ev1",
        "event_time": 1700000200,
        "authorizations": [{"enterprise_id": null, "team_id": "T1", "user_id": BOT, "is_bot": true, "is_enterprise_install": false}],
        "is_ext_shared_channel": false,
        "event_context": "4-abc"
    })
}

#[test]
fn a_thread_reply_becomes_a_thread_message() {
    let body = event_callback(json!({
        "type": "message", "channel": "C42", "user": "U123",
        "text": "/answer 2", "ts": "1700000200.000300", "thread_ts": "1700000000.000100",
        "event_ts": "1700000200.000300", "channel_type": "channel", "team": "T1",
        "client_msg_id": "4b7c3c43-7b3e-4e7f-a2c1-5d8e3f7c9a10"
    }));
    let m = message_from_push_json(&body, BOT).unwrap().unwrap();
    assert_eq!(m.thread, "C42:1700000000.000100");
    assert!(m.in_thread);
    assert!(!m.mentioned);
    assert_eq!(m.message.id, "C42:1700000200.000300");
    assert_eq!(m.message.text, "/answer 2");
    assert_eq!(m.message.author.id, "U123");
    assert_eq!(m.message.metadata.date_sent, "2023-11-14T22:16:40.000Z");
    assert_eq!(m.message.reply_to.as_deref(), Some("C42:1700000000.000100"));
    assert_eq!(
        m.message.raw["client_msg_id"],
        "4b7c3c43-7b3e-4e7f-a2c1-5d8e3f7c9a10"
    );
}

#[test]
fn a_top_level_mention_starts_a_thread_at_its_own_ts() {
    let body = event_callback(json!({
        "type": "app_mention", "user": "U123", "text": "<@UBOT> deploy please",
        "ts": "1700000300.000400", "channel": "C42", "event_ts": "1700000300.000400", "team": "T1"
    }));
    let m = message_from_push_json(&body, BOT).unwrap().unwrap();
    assert_eq!(m.thread, "C42:1700000300.000400");
    assert!(!m.in_thread);
    assert!(m.mentioned);
    assert_eq!(m.message.reply_to, None);
    // The same as a plain message event also detects the mention.
    let body = event_callback(json!({
        "type": "message", "channel": "C42", "user": "U123", "text": "hey <@UBOT>",
        "ts": "1700000300.000400", "event_ts": "1700000300.000400", "channel_type": "channel"
    }));
    assert!(
        message_from_push_json(&body, BOT)
            .unwrap()
            .unwrap()
            .mentioned
    );
}

#[test]
fn own_messages_and_edits_are_ignored() {
    let bot = event_callback(json!({
        "type": "message", "subtype": "bot_message", "channel": "C42", "bot_id": "B1",
        "text": "Where?", "ts": "1700000100.000200", "thread_ts": "1700000000.000100"
    }));
    assert_eq!(message_from_push_json(&bot, BOT).unwrap(), None);
    let own_user = event_callback(json!({
        "type": "message", "channel": "C42", "user": BOT, "text": "hi", "ts": "1700000100.000200"
    }));
    assert_eq!(message_from_push_json(&own_user, BOT).unwrap(), None);
    let edit = event_callback(json!({
        "type": "message", "subtype": "message_changed", "channel": "C42", "hidden": true,
        "ts": "1700000400.000100", "event_ts": "1700000400.000100",
        "message": {"type": "message", "user": "U123", "text": "edited", "ts": "1700000200.000300"},
        "previous_message": {"type": "message", "user": "U123", "text": "orig", "ts": "1700000200.000300"}
    }));
    assert_eq!(message_from_push_json(&edit, BOT).unwrap(), None);

    let sender = SlackMessageSender::new().with_bot_id(SlackBotId("B1".into()));
    assert!(is_own_message(&sender, BOT));
    let sender = SlackMessageSender::new().with_user(SlackUserId(BOT.into()));
    assert!(is_own_message(&sender, BOT));
    let sender = SlackMessageSender::new().with_user(SlackUserId("U123".into()));
    assert!(!is_own_message(&sender, BOT));
}

#[test]
fn url_verification_is_not_a_message() {
    let body = json!({"type": "url_verification", "token": "t", "challenge": "abc"});
    assert_eq!(message_from_push_json(&body, BOT).unwrap(), None);
}
