//! Conversion of Slack's documented payloads into FrogBot interactions and thread messages.

use frogbot_core::model::Interaction;
use frogbot_slack::convert::{
    SlashText, command_from_form, command_from_json, interaction_from_payload, is_own_message,
    mentions_in, message_from_push_json, payload_from_form, read_slash_text, slash_ask_message,
    without_bot_mention,
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

// ---- Mentions (the `ask` command's person) --------------------------------------------------

/// The byte range of each mention, and who: `(id, name, written)`.
fn named(m: &frogbot_core::model::ThreadMessage) -> Vec<(String, Option<String>, String)> {
    m.mentions
        .iter()
        .map(|x| {
            (
                x.user.id.clone(),
                x.user.name.clone(),
                m.text[x.start..x.end].to_owned(),
            )
        })
        .collect()
}

/// Slack's documented `app_mention` example (docs.slack.dev, reference/events/app_mention): the
/// only person named is the bot itself, which is never a mention; once its mention is removed,
/// nothing is left to point at.
#[test]
fn the_bots_own_mention_is_never_one() {
    let body = json!({
        "token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456",
        "event": {"type": "app_mention", "user": "U061F7AUR",
                  "text": "<@U0LAN0Z89> is it everything a river should be?",
                  "ts": "1515449522.000016", "channel": "C123ABC456",
                  "event_ts": "1515449522000016"},
        "type": "event_callback",
        "authorizations": [{"team_id": "T123ABC456", "user_id": "U123ABC456", "is_bot": false,
                            "is_enterprise_install": false}],
        "event_id": "Ev123ABC456", "event_time": 123456789
    });
    let mut m = message_from_push_json(&body, "U0LAN0Z89")
        .unwrap()
        .unwrap()
        .message;
    assert!(m.mentions.is_empty(), "{:?}", m.mentions);
    without_bot_mention(&mut m, "U0LAN0Z89");
    assert_eq!(m.text, "is it everything a river should be?");
    assert!(m.mentions.is_empty());
}

/// A message as Slack's client sends it today (bolt-js's `app_mention` fixture, PR #2057): the
/// mention is a rich text `user` element in `blocks` and `<@U…>` in `text`; the ranges point
/// into the text the engine gets, after the bot's mention is removed.
#[test]
fn people_named_in_a_message_are_its_mentions_with_their_byte_ranges() {
    let body = event_callback(json!({
        "type": "message", "channel": "C42", "user": "U03E94MK0",
        "text": "<@UBOT> /ask <@U066C7XNE6M> Ship today? | yes | no",
        "ts": "1707806347.397809", "event_ts": "1707806347.397809", "channel_type": "channel",
        "client_msg_id": "883e5317-28e3-4ef8-9385-b88343560de6",
        "blocks": [{"type": "rich_text", "block_id": "t9D3L", "elements": [
            {"type": "rich_text_section", "elements": [
                {"type": "user", "user_id": "UBOT"},
                {"type": "text", "text": " /ask "},
                {"type": "user", "user_id": "U066C7XNE6M"},
                {"type": "text", "text": " Ship today? | yes | no"}
            ]}
        ]}]
    }));
    let incoming = message_from_push_json(&body, BOT).unwrap().unwrap();
    assert!(incoming.mentioned);
    // As converted: the ranges point into the text as Slack sent it.
    assert_eq!(
        named(&incoming.message),
        [("U066C7XNE6M".into(), None, "<@U066C7XNE6M>".into())]
    );
    assert_eq!(incoming.message.mentions[0].start, 13);
    // As the engine gets it: the bot's mention gone, the range moved with the text.
    let mut m = incoming.message;
    without_bot_mention(&mut m, BOT);
    assert_eq!(m.text, "/ask <@U066C7XNE6M> Ship today? | yes | no");
    assert_eq!((m.mentions[0].start, m.mentions[0].end), (5, 19));
    // What the engine's `ask` reads: bob first, then the question.
    let (who, question) = m.named_first(&m.text[5..]).unwrap();
    assert_eq!(who.id, "U066C7XNE6M");
    assert_eq!(question, " Ship today? | yes | no");
}

#[test]
fn mentions_are_in_text_order_with_names_and_exact_ranges() {
    // A name where Slack gives one (`<@U…|name>`), byte ranges past multi-byte text, the bot
    // skipped, and what only looks like a mention left out: `<!here>`, a channel, an escaped
    // `&lt;@U1&gt;` a person typed, an id that is no user id.
    let text = "héllo <@U0BOB|bob>, <@UBOT> <!here> <#C1|ops> &lt;@U9&gt; <@nope> <@W0CAROL>!";
    let m = mentions_in(text, BOT);
    let got: Vec<(&str, Option<&str>, &str)> = m
        .iter()
        .map(|x| {
            (
                x.user.id.as_str(),
                x.user.name.as_deref(),
                &text[x.start..x.end],
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("U0BOB", Some("bob"), "<@U0BOB|bob>"),
            ("W0CAROL", None, "<@W0CAROL>")
        ]
    );
    assert_eq!(m[0].start, "héllo ".len());
    assert!(mentions_in("<@U1", BOT).is_empty(), "unclosed");
    assert!(mentions_in("<@ <@U0BOB>", BOT).len() == 1);
}

// ---- Slash commands -------------------------------------------------------------------------

/// The slash command body of Slack's "Verifying requests from Slack" page, and one with
/// "Escape channels, users, and links" on, where a person is `<@U…|name>`.
#[test]
fn a_slash_command_body_is_read_and_its_ask_found() {
    let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    let cmd = command_from_form(body).unwrap();
    assert_eq!(cmd.command, "/webhook-collect");
    assert_eq!(cmd.text, "");
    assert_eq!(
        (cmd.user_id.as_str(), cmd.user_name.as_str()),
        ("U2CERLKJA", "roadrunner")
    );
    assert_eq!(cmd.channel_id, "G8PSS9T3V");
    assert_eq!(
        cmd.trigger_id,
        "398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    );
    assert!(
        cmd.raw.get("token").is_none(),
        "the legacy token is not kept"
    );
    assert_eq!(read_slash_text(&cmd.text, BOT), SlashText::Other);
    assert!(
        command_from_form("text=hi").is_err(),
        "no command, user or channel"
    );

    let json = json!({"command": "/frogbot", "text": "ask <@U012ABCDEF|worf> Ship today? | yes | no",
                      "user_id": "U2CERLKJA", "user_name": "roadrunner", "channel_id": "C42",
                      "channel_name": "ops", "team_id": "T1", "trigger_id": "1.2.3"});
    let cmd = command_from_json(&json).unwrap();
    let SlashText::Ask { args, to } = read_slash_text(&cmd.text, BOT) else {
        panic!("an ask")
    };
    assert_eq!(args, "<@U012ABCDEF|worf> Ship today? | yes | no");
    assert_eq!(
        (to.id.as_str(), to.name.as_deref()),
        ("U012ABCDEF", Some("worf"))
    );
    let m = slash_ask_message(&cmd, args, "C42:1700000000.000100", BOT);
    assert_eq!(m.text, "/ask <@U012ABCDEF|worf> Ship today? | yes | no");
    assert_eq!(m.id, "C42:1700000000.000100");
    assert_eq!(m.author.id, "U2CERLKJA");
    assert_eq!(
        named(&m),
        [(
            "U012ABCDEF".into(),
            Some("worf".into()),
            "<@U012ABCDEF|worf>".into()
        )]
    );
    assert_eq!(m.mentions[0].start, "/ask ".len());

    for usage in [
        "ask",
        "ask Ship today?",
        "ask <@U012ABCDEF|worf>",
        "ask <@U012ABCDEF|worf> | yes | no",
        "ask <@UBOT|frogbot> Ship today?",
        "ask is <@U012ABCDEF|worf> in?",
    ] {
        assert_eq!(read_slash_text(usage, BOT), SlashText::AskUsage, "{usage}");
    }
    for other in ["", "help", "new", "model alt", "stop", "skip"] {
        assert_eq!(read_slash_text(other, BOT), SlashText::Other, "{other}");
    }
}
