//! Pure conversions: Matrix events as they arrive from sync (JSON, the client-server API's shapes)
//! → FrogBot interactions and messages.

use frogbot_matrix::convert::{Incoming, classify, strip_mention, strip_mention_of};
use frogbot_matrix::ids::reaction_option;
use frogbot_model::Interaction;
use matrix_sdk::ruma::events::AnySyncTimelineEvent;
use matrix_sdk::ruma::serde::Raw;
use matrix_sdk::ruma::{room_id, user_id};
use serde_json::{Value, json};

fn raw(v: Value) -> Raw<AnySyncTimelineEvent> {
    Raw::from_json(serde_json::value::to_raw_value(&v).unwrap())
}

fn event(kind: &str, sender: &str, content: Value) -> Raw<AnySyncTimelineEvent> {
    raw(json!({"type": kind, "event_id": "$ev1", "sender": sender,
               "origin_server_ts": 1_700_000_000_000_i64, "content": content}))
}

const BOT: &str = "@frogbot:localhost";

fn run(r: Raw<AnySyncTimelineEvent>) -> Option<Incoming> {
    classify(
        &r,
        room_id!("!room:localhost"),
        user_id!("@frogbot:localhost"),
    )
    .unwrap()
}

fn action(i: Option<Incoming>) -> frogbot_model::ActionEvent {
    match i {
        Some(Incoming::Action(Interaction::Action { event })) => event,
        other => panic!("expected an action, got {other:?}"),
    }
}

#[test]
fn poll_responses_stable_and_unstable_become_actions() {
    let a = action(run(event(
        "m.poll.response",
        "@alice:localhost",
        json!({"m.selections": ["o1"], "m.relates_to": {"rel_type": "m.reference", "event_id": "$poll"}}),
    )));
    assert_eq!(a.action_id, "poll");
    assert_eq!(a.value.as_deref(), Some("o1"));
    assert_eq!(a.message_id, "!room:localhost|$poll");
    assert_eq!(a.trigger_id.as_deref(), Some("!room:localhost|$ev1"));
    assert_eq!(a.user.id, "@alice:localhost");

    let a = action(run(event(
        "org.matrix.msc3381.poll.response",
        "@alice:localhost",
        json!({"org.matrix.msc3381.poll.response": {"answers": ["o0", "o2"]},
               "m.relates_to": {"rel_type": "m.reference", "event_id": "$poll"}}),
    )));
    assert_eq!(a.value.as_deref(), Some("o0,o2"));
}

#[test]
fn a_reaction_becomes_an_action_with_its_key() {
    let a = action(run(event(
        "m.reaction",
        "@bob:localhost",
        json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": "$poll", "key": "2️⃣"}}),
    )));
    assert_eq!(a.action_id, "reaction");
    assert_eq!(a.value.as_deref(), Some("2️⃣"));
    assert_eq!(reaction_option("2️⃣"), Some(1));
    assert_eq!(reaction_option("🔟"), Some(9));
    assert_eq!(reaction_option("3"), Some(2));
    assert_eq!(reaction_option("👍"), None);
    assert_eq!(reaction_option("0️⃣"), None);
}

#[test]
fn a_thread_reply_is_a_message_of_the_thread() {
    let Some(Incoming::Message(m)) = run(event(
        "m.room.message",
        "@alice:localhost",
        json!({"msgtype": "m.text", "body": "2",
               "m.relates_to": {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": true,
                                "m.in_reply_to": {"event_id": "$root"}}}),
    )) else {
        panic!("expected a message")
    };
    assert_eq!(m.thread, "!room:localhost|$root");
    assert!(m.in_thread);
    assert!(!m.mentions_bot);
    assert_eq!(m.reply_to, None, "a thread's fallback reply is not a reply");
    assert_eq!(m.message.id, "!room:localhost|$ev1");
    assert_eq!(m.message.text, "2");
    assert_eq!(m.message.metadata.date_sent, "2023-11-14T22:13:20.000Z");

    // A genuine reply inside a thread points at the message.
    let Some(Incoming::Message(m)) = run(event(
        "m.room.message",
        "@alice:localhost",
        json!({"msgtype": "m.text", "body": "1",
               "m.relates_to": {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": false,
                                "m.in_reply_to": {"event_id": "$poll"}}}),
    )) else {
        panic!("expected a message")
    };
    assert_eq!(m.message.reply_to.as_deref(), Some("!room:localhost|$poll"));
}

#[test]
fn a_top_level_mention_starts_its_own_thread() {
    let Some(Incoming::Message(m)) = run(event(
        "m.room.message",
        "@alice:localhost",
        json!({"msgtype": "m.text", "body": format!("{BOT}: deploy"), "m.mentions": {"user_ids": [BOT]}}),
    )) else {
        panic!("expected a message")
    };
    assert!(m.mentions_bot);
    assert!(!m.in_thread);
    assert_eq!(m.thread, "!room:localhost|$ev1");
    assert_eq!(m.message.text, "deploy");
    assert_eq!(
        strip_mention("@frogbot:localhost, hi", user_id!("@frogbot:localhost")),
        "hi"
    );
}

/// Element's mention (display name and `: ` in `body`, a pill in `formatted_body`, `m.mentions`)
/// and the other forms are stripped with their separator; a word that only starts like the bot's
/// name is not.
#[test]
fn element_pills_and_names_of_the_bot_are_stripped_before_the_text() {
    for (body, html, want) in [
        (
            "FrogBot Helper: stop",
            "<a href=\"https://matrix.to/#/@frogbot:localhost\">FrogBot Helper</a>: stop",
            "stop",
        ),
        (
            "FrogBot & Co: skip",
            "<a href=\"https://matrix.to/#/%40frogbot%3Alocalhost\">FrogBot &amp; Co</a>: skip",
            "skip",
        ),
        ("frogbot: deploy it", "", "deploy it"),
        ("@frogbot, deploy", "", "deploy"),
        ("Frogbot, deploy", "", "deploy"),
        ("Frogbot is green", "", "Frogbot is green"),
        ("frogbots are green", "", "frogbots are green"),
        // A pill of someone else is left as it is.
        (
            "Alice: stop",
            "<a href=\"https://matrix.to/#/@alice:localhost\">Alice</a>: stop",
            "Alice: stop",
        ),
    ] {
        let html = (!html.is_empty()).then_some(html);
        assert_eq!(
            strip_mention_of(body, html, user_id!("@frogbot:localhost")),
            want,
            "{body:?}"
        );
    }
    let Some(Incoming::Message(m)) = run(event(
        "m.room.message",
        "@alice:localhost",
        json!({"msgtype": "m.text", "body": "FrogBot Helper: stop",
               "format": "org.matrix.custom.html",
               "formatted_body": "<a href=\"https://matrix.to/#/@frogbot:localhost\">FrogBot Helper</a>: stop",
               "m.mentions": {"user_ids": [BOT]}}),
    )) else {
        panic!("expected a message")
    };
    assert!(m.mentions_bot);
    assert_eq!(m.message.text, "stop");
}

#[test]
fn an_edit_and_a_redaction_are_changes_of_the_message_they_name() {
    let Some(Incoming::Changed {
        message_id,
        sender,
        text,
    }) = run(event(
        "m.room.message",
        "@alice:localhost",
        json!({"msgtype": "m.text", "body": "* FrogBot: x", "m.new_content": {"msgtype": "m.text", "body": "@frogbot:localhost: x"},
               "m.relates_to": {"rel_type": "m.replace", "event_id": "$old"}}),
    ))
    else {
        panic!("an edit is a change")
    };
    assert!(message_id.ends_with("|$old"), "{message_id}");
    assert_eq!(sender, "@alice:localhost");
    assert_eq!(text.as_deref(), Some("x"));
    let Some(Incoming::Changed {
        message_id, text, ..
    }) = run(event(
        "m.room.redaction",
        "@alice:localhost",
        json!({"redacts": "$gone"}),
    ))
    else {
        panic!("a redaction is a change")
    };
    assert!(message_id.ends_with("|$gone"), "{message_id}");
    assert_eq!(text, None);
}

#[test]
fn own_events_and_other_types_are_ignored() {
    assert!(
        run(event(
            "m.room.message",
            BOT,
            json!({"msgtype": "m.text", "body": "x"})
        ))
        .is_none()
    );
    // A person's image is a message with a file (its name, no text), not ignored.
    let Some(Incoming::Message(m)) = run(event(
        "m.room.message",
        "@alice:localhost",
        json!({"msgtype": "m.image", "body": "a.png", "url": "mxc://x/y",
               "info": {"mimetype": "image/png", "size": 12}}),
    )) else {
        panic!("an image is a message")
    };
    assert_eq!(m.message.text, "");
    assert_eq!(m.message.files.len(), 1);
    let f = &m.message.files[0];
    assert_eq!(
        (
            f.id.as_str(),
            f.filename.as_str(),
            f.media_type.as_str(),
            f.size
        ),
        ("mxc://x/y", "a.png", "image/png", Some(12))
    );
    assert_eq!(f.source, json!({"url": "mxc://x/y"}));
    // With a `filename` other than `body`, `body` is its caption (Matrix 1.10).
    let Some(Incoming::Message(m)) = run(event(
        "m.room.message",
        "@alice:localhost",
        json!({"msgtype": "m.file", "body": "the report", "filename": "q3.pdf",
               "url": "mxc://x/z"}),
    )) else {
        panic!("a file is a message")
    };
    assert_eq!(m.message.text, "the report");
    assert_eq!(m.message.files[0].filename, "q3.pdf");
    assert_eq!(m.message.files[0].media_type, "application/octet-stream");
    assert!(
        run(event(
            "m.sticker",
            "@alice:localhost",
            json!({"body": "s", "url": "mxc://x/y", "info": {}})
        ))
        .is_none()
    );
}

#[test]
fn an_unreadable_event_is_an_error() {
    let r = raw(json!({"type": "m.room.message", "content": {}}));
    assert!(
        classify(
            &r,
            room_id!("!room:localhost"),
            user_id!("@frogbot:localhost")
        )
        .is_err()
    );
}
