//! Every input kind on Slack, through the fake Slack driving slack-morphism's real client: a
//! `confirm` as a button (in the danger style with Slack's confirmation dialog), `text_input` /
//! `number_input` / `toggle` in the modal (`plain_text_input`, `number_input`, a checkbox), the
//! form card with its "Answer…" button, several inputs answered together in one modal, what
//! Slack's client refuses in a modal, what FrogBot rejects with its reason, typed replies, the
//! expiry line and the settled view.

use std::sync::Arc;

use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{
    AllowAll, Channel, ChannelMessageOutcome, InteractionOutcome, ModelMessage, ModelRequest, Sent,
    channel_chat_id,
};
use frogbot_core::model::{
    Actor, ChannelIdentity, ChannelQuestions, HookArgs, Interaction, ParseArgs, ParseResult,
    PlatformUser, PrefixedIdentity, QuestionAnswer, QuestionCall, QuestionInput, QuestionMessage,
    QuestionOutcome, QuestionOutput, QuestionRecord, RenderArgs, RequestContext, Thread, TurnState,
    now_millis,
};
use frogbot_slack::PLATFORM;
use frogbot_slack::channel::Connector;
use frogbot_slack::convert::{interaction_from_payload, message_from_push_json};
use frogbot_slack::questions::is_open_form_action;
use frogbot_slack::render::{question_card, settled_blocks};
use frogbot_slack::testing::{BOT_USER, FakeSlack};
use frogbot_slack::{SlackQuestions, SlackWebApi};
use serde_json::{Value, json};

const THREAD: &str = "C42:1700000000.000100";

fn thread() -> Thread {
    Thread {
        id: THREAD.into(),
        platform: "slack".into(),
        chat_id: "chat-1".into(),
    }
}

fn user() -> PlatformUser {
    PlatformUser {
        id: "U123".into(),
        name: Some("ana".into()),
        is_bot: false,
    }
}

fn actor() -> Actor {
    Actor {
        user: None,
        identity: Some(ChannelIdentity {
            platform: "slack".into(),
            user: user(),
        }),
    }
}

fn call_of(input: Value, expires_at: Option<&str>) -> QuestionCall {
    let input: QuestionInput = serde_json::from_value(input).unwrap();
    input.validate().unwrap();
    QuestionCall {
        tool_call_id: "call-k".into(),
        input,
        expires_at: expires_at.map(str::to_owned),
    }
}

/// Four kinds and a choice in one set, as the example has them.
fn kinds_input() -> Value {
    json!({"questions": [
        {"header": "Go", "question": "Deploy v1.4 to production?", "kind": "confirm", "label": "Approve", "danger": true},
        {"header": "Why", "question": "Reason?", "kind": "text_input", "maxLength": 10, "placeholder": "because", "multiline": true, "required": false},
        {"header": "Pods", "question": "How many?", "kind": "number_input", "min": 1, "max": 10, "step": 1, "unit": "pods", "default": 3},
        {"header": "Notify", "question": "Tell the team?", "kind": "toggle", "label": "Notify", "default": true},
        {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]}
    ], "expiresInSeconds": 3600})
}

async fn start() -> (FakeSlack, SlackQuestions<SlackWebApi<Connector>>) {
    let fake = FakeSlack::start().await;
    let questions = fake.questions();
    (fake, questions)
}

/// Renders `call` in the thread; the record of its one message.
async fn render(q: &SlackQuestions<SlackWebApi<Connector>>, call: &QuestionCall) -> QuestionRecord {
    let req = RequestContext::default();
    let out = q
        .render(RenderArgs {
            calls: std::slice::from_ref(call),
            req: &req,
            thread: &thread(),
        })
        .await
        .unwrap();
    QuestionRecord {
        messages: vec![QuestionMessage {
            id: out[0].messages[0].id.clone(),
            posted_at: out[0].messages[0].posted_at.clone(),
            question: None,
        }],
        revision: 0,
        state: None,
    }
}

fn parse(
    q: &SlackQuestions<SlackWebApi<Connector>>,
    call: &QuestionCall,
    rec: &QuestionRecord,
    i: &Interaction,
) -> ParseResult {
    q.parse(ParseArgs {
        call,
        interaction: i,
        question: rec,
        settled: false,
    })
}

fn answered(pairs: &[(&str, &[&str])]) -> QuestionOutput {
    QuestionOutput {
        answers: pairs
            .iter()
            .map(|(h, s)| QuestionAnswer {
                header: h.to_string(),
                selected: s.iter().map(|x| x.to_string()).collect(),
            })
            .collect(),
    }
}

/// Every text of a message's blocks, joined.
fn shown(fake: &FakeSlack, id: &str) -> String {
    fn texts(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(t)) = o.get("text") {
                    out.push(t.clone());
                }
                o.values().for_each(|v| texts(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| texts(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    texts(&fake.message(id).unwrap().blocks, &mut out);
    out.join("\n")
}

/// Clicks "Answer…" on the message and opens the modal as the receiving layer does; the
/// opened view as the fake keeps it.
async fn open_modal(
    fake: &FakeSlack,
    q: &SlackQuestions<SlackWebApi<Connector>>,
    call: &QuestionCall,
    rec: &QuestionRecord,
) -> Value {
    let id = &rec.current().unwrap().id;
    let payload = fake
        .click("U123", id, "Answer…")
        .expect("an Answer… button");
    let Interaction::Action { event } = interaction_from_payload(&payload).unwrap().unwrap() else {
        panic!("a click")
    };
    assert!(is_open_form_action(&event.action_id));
    q.open_other(&thread(), call, rec, event.trigger_id.as_deref().unwrap())
        .await
        .unwrap();
    fake.views().pop().expect("a modal")
}

#[tokio::test]
async fn a_confirm_is_one_button_with_slacks_confirmation_dialog_when_danger() {
    let (fake, q) = start().await;
    let danger = call_of(
        json!({"questions": [{"header": "Go", "question": "Deploy v1.4 to production?", "kind": "confirm", "label": "Approve", "danger": true}]}),
        None,
    );
    let rec = render(&q, &danger).await;
    let id = rec.current().unwrap().id.clone();
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    let button = fake.element(&id, "Approve").expect("an Approve button");
    assert_eq!(button["style"], "danger");
    assert_eq!(button["action_id"], "fb1:y:0:-:0");
    let dialog = fake
        .confirm_dialog(&id, "Approve")
        .expect("a confirmation dialog");
    assert_eq!(dialog["title"]["text"], "Are you sure?");
    assert_eq!(dialog["text"]["text"], "Deploy v1.4 to production?");
    assert_eq!(dialog["confirm"]["text"], "Approve");
    assert_eq!(dialog["deny"]["text"], "Cancel");
    assert_eq!(dialog["style"], "danger");
    // The Approve button and Skip: nothing else to answer with.
    assert_eq!(fake.controls(&id), 2);

    // The person confirms in the dialog: Slack sends the click, and one tap answers.
    let payload = fake.click("U123", &id, "Approve").unwrap();
    let tap = interaction_from_payload(&payload).unwrap().unwrap();
    assert_eq!(
        parse(&q, &danger, &rec, &tap),
        ParseResult::Answer {
            output: answered(&[("Go", &["Approve"])])
        }
    );
    // A tap on controls drawn for an older revision is stale.
    let old = QuestionRecord {
        revision: 1,
        ..rec.clone()
    };
    assert_eq!(parse(&q, &danger, &old, &tap), ParseResult::Stale);

    // Settled: the label, no controls.
    let req = RequestContext::default();
    let args = HookArgs {
        call: &danger,
        question: &rec,
        req: &req,
        thread: &thread(),
    };
    let outcome = QuestionOutcome::Answered(answered(&[("Go", &["Approve"])]));
    q.settled(args, outcome.by(Some(&actor()))).await.unwrap();
    assert_eq!(fake.controls(&id), 0);
    assert!(shown(&fake, &id).contains("✅ Answered by <@U123>: Approve"));

    // Without `danger`: the primary style and no dialog.
    let plain = call_of(
        json!({"questions": [{"header": "Go", "question": "Ship it?", "kind": "confirm"}]}),
        None,
    );
    let rec = render(&q, &plain).await;
    let id = rec.current().unwrap().id.clone();
    let button = fake.element(&id, "Confirm").expect("a Confirm button");
    assert_eq!(button["style"], "primary");
    assert!(fake.confirm_dialog(&id, "Confirm").is_none());
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn text_number_and_toggle_are_a_form_card_with_answer_and_the_expiry_line() {
    let (fake, q) = start().await;
    let expires = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let c = call_of(kinds_input(), Some(&expires));
    let rec = render(&q, &c).await;
    let id = rec.current().unwrap().id.clone();
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    let text = shown(&fake, &id);
    for want in [
        "Deploy v1.4 to production?",
        "Confirm: Approve",
        "Text, at most 10 characters",
        "A number from 1 to 10, in steps of 1 (pods)",
        "default: 3",
        "On or off: Notify",
        "staging · prod",
        "optional",
    ] {
        assert!(text.contains(want), "{want:?} in {text}");
    }
    // "Answer…" (it opens the modal) and Skip.
    assert_eq!(fake.controls(&id), 2);
    assert!(fake.element(&id, "Answer…").is_some());
    assert!(fake.element(&id, "Skip").is_some());
    // The expiry line is the last block, a context block.
    let blocks = fake.message(&id).unwrap().blocks;
    let last = blocks.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["type"], "context");
    let line = last["elements"][0]["text"].as_str().unwrap();
    let at = chrono::DateTime::parse_from_rfc3339(&expires).unwrap();
    assert!(line.starts_with("⏳ open until "), "{line}");
    assert!(line.contains(&at.format("%H:%M UTC").to_string()), "{line}");

    // Pure: the line follows `now` (with the date when it is another day), and without an
    // expiry there is none.
    let now = chrono::DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z")
        .unwrap()
        .to_utc();
    let b = serde_json::to_value(question_card(
        &c.input,
        0,
        &Default::default(),
        Some("2026-12-01T14:05:00Z"),
        now,
    ))
    .unwrap();
    assert_eq!(
        b.as_array().unwrap().last().unwrap()["elements"][0]["text"],
        "⏳ open until 14:05 UTC"
    );
    let b = serde_json::to_value(question_card(
        &c.input,
        0,
        &Default::default(),
        Some("2026-12-02T14:05:00Z"),
        now,
    ))
    .unwrap();
    assert_eq!(
        b.as_array().unwrap().last().unwrap()["elements"][0]["text"],
        "⏳ open until 2 Dec 14:05 UTC"
    );
    let b =
        serde_json::to_value(question_card(&c.input, 0, &Default::default(), None, now)).unwrap();
    assert!(!b.to_string().contains("open until"));

    // One text input alone: the card tells how to answer by a thread reply too.
    let one = call_of(
        json!({"questions": [{"header": "Pods", "question": "How many?", "kind": "number_input", "min": 1, "max": 10, "unit": "pods"}]}),
        None,
    );
    let rec = render(&q, &one).await;
    let text = shown(&fake, &rec.current().unwrap().id);
    assert!(
        text.contains("Or in this thread: Reply with a number from 1 to 10 (pods)."),
        "{text}"
    );
}

#[tokio::test]
async fn the_modal_holds_every_input_with_slacks_own_elements() {
    let (fake, q) = start().await;
    let c = call_of(kinds_input(), None);
    let rec = render(&q, &c).await;
    let view = open_modal(&fake, &q, &c, &rec).await;
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    assert_eq!(view["submit"]["text"], "Send answers");
    let blocks = view["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 5);
    assert!(blocks.iter().all(|b| b["type"] == "input"));
    let el = |i: usize| blocks[i]["element"].clone();
    // confirm: one checkbox labelled with the confirm label, required.
    assert_eq!(el(0)["type"], "checkboxes");
    assert_eq!(el(0)["options"][0]["text"]["text"], "Approve");
    assert_eq!(blocks[0]["optional"], false);
    // text: a plain_text_input with Slack's fields.
    assert_eq!(el(1)["type"], "plain_text_input");
    assert_eq!(el(1)["multiline"], true);
    assert_eq!(el(1)["max_length"], 10);
    assert_eq!(el(1)["placeholder"]["text"], "because");
    assert_eq!(blocks[1]["optional"], true);
    // number: a number_input, whole numbers from 1 to 10, the default as initial value.
    assert_eq!(el(2)["type"], "number_input");
    assert_eq!(el(2)["is_decimal_allowed"], false);
    assert_eq!(el(2)["min_value"], "1");
    assert_eq!(el(2)["max_value"], "10");
    assert_eq!(el(2)["initial_value"], "3");
    assert_eq!(
        blocks[2]["hint"]["text"],
        "A number from 1 to 10, in steps of 1 (pods)"
    );
    // toggle: one checkbox, checked by its default, always optional (unchecked is "off").
    assert_eq!(el(3)["type"], "checkboxes");
    assert_eq!(el(3)["options"].as_array().unwrap().len(), 1);
    assert_eq!(el(3)["initial_options"][0]["text"]["text"], "Notify");
    assert_eq!(blocks[3]["optional"], true);
    // choice: radio buttons.
    assert_eq!(el(4)["type"], "radio_buttons");

    // Slack's limits: a text_input above Slack's 3,000 characters is clamped; a long
    // placeholder and a long confirm label are cut; decimals allowed without a whole step.
    let big = call_of(
        json!({"questions": [
            {"header": "Essay", "question": "Tell me", "kind": "text_input", "maxLength": 4000, "placeholder": "p".repeat(300)},
            {"header": "Ratio", "question": "How much?", "kind": "number_input", "min": 0, "max": 1},
            {"header": "Go", "question": "Sure?", "kind": "confirm", "label": "L".repeat(120), "danger": true}
        ]}),
        None,
    );
    let rec = render(&q, &big).await;
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    let view = open_modal(&fake, &q, &big, &rec).await;
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    assert_eq!(view["blocks"][0]["element"]["max_length"], 3000);
    assert_eq!(view["blocks"][1]["element"]["is_decimal_allowed"], true);
}

#[tokio::test]
async fn several_inputs_are_answered_together_in_one_modal() {
    let (fake, q) = start().await;
    let c = call_of(kinds_input(), None);
    let rec = render(&q, &c).await;
    let view = open_modal(&fake, &q, &c, &rec).await;
    let view_id = view["id"].as_str().unwrap();
    let payload = fake
        .submit_view(
            "U123",
            view_id,
            &[
                ("fb1:m:0:pick", json!(["0"])),
                ("fb1:m:2:text", json!("7")),
                ("fb1:m:3:pick", json!([])),
                ("fb1:m:4:pick", json!("1")),
            ],
        )
        .expect("Slack sends it");
    // Slack's shapes in state.values.
    let values = &payload["view"]["state"]["values"];
    assert_eq!(
        values["q1"]["fb1:m:1:text"],
        json!({"type": "plain_text_input", "value": null})
    );
    assert_eq!(
        values["q2"]["fb1:m:2:text"],
        json!({"type": "number_input", "value": "7"})
    );
    assert_eq!(values["q3"]["fb1:m:3:pick"]["type"], "checkboxes");
    assert_eq!(values["q3"]["fb1:m:3:pick"]["selected_options"], json!([]));
    assert_eq!(
        values["q0"]["fb1:m:0:pick"]["selected_options"][0]["value"],
        "0"
    );
    assert_eq!(
        values["q4"]["fb1:m:4:pick"]["selected_option"]["value"],
        "1"
    );

    let submit = interaction_from_payload(&payload).unwrap().unwrap();
    assert!(matches!(submit, Interaction::ModalSubmit { .. }));
    let output = answered(&[
        ("Go", &["Approve"]),
        ("Why", &[]),
        ("Pods", &["7"]),
        ("Notify", &["off"]),
        ("Env", &["prod"]),
    ]);
    assert_eq!(
        parse(&q, &c, &rec, &submit),
        ParseResult::Answer {
            output: output.clone()
        }
    );
    assert_eq!(
        Value::Object(c.input.values(&output)),
        json!({"Go": true, "Why": null, "Pods": 7, "Notify": false, "Env": "prod"})
    );

    // The text typed and the toggle left on (its default).
    let payload = fake
        .submit_view(
            "U123",
            view_id,
            &[
                ("fb1:m:0:pick", json!(["0"])),
                ("fb1:m:1:text", json!("  ship it ")),
                ("fb1:m:4:pick", json!("0")),
            ],
        )
        .unwrap();
    let submit = interaction_from_payload(&payload).unwrap().unwrap();
    assert_eq!(
        parse(&q, &c, &rec, &submit),
        ParseResult::Answer {
            output: answered(&[
                ("Go", &["Approve"]),
                ("Why", &["ship it"]),
                ("Pods", &["3"]),
                ("Notify", &["on"]),
                ("Env", &["staging"]),
            ])
        }
    );

    // The settled view prints each kind well.
    let req = RequestContext::default();
    let args = HookArgs {
        call: &c,
        question: &rec,
        req: &req,
        thread: &thread(),
    };
    q.settled(args, QuestionOutcome::Answered(output).by(Some(&actor())))
        .await
        .unwrap();
    let id = rec.current().unwrap().id.clone();
    assert_eq!(fake.controls(&id), 0);
    let text = shown(&fake, &id);
    assert!(
        text.contains(
            "✅ Answered by <@U123>: Go: Approve · Why: — · Pods: 7 pods · Notify: off · Env: prod"
        ),
        "{text}"
    );
    let expired = QuestionOutcome::Expired(Some(answered(&[
        ("Go", &["Approve"]),
        ("Why", &[]),
        ("Pods", &["3"]),
        ("Notify", &["on"]),
        ("Env", &["staging"]),
    ])));
    let b = serde_json::to_value(settled_blocks(&c.input, &expired, None)).unwrap();
    assert_eq!(
        b[1]["elements"][0]["text"],
        "⌛ Expired — defaults used: Go: Approve · Why: — · Pods: 3 pods · Notify: on · Env: staging"
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn slacks_client_refuses_what_the_modal_forbids() {
    let (fake, q) = start().await;
    let c = call_of(kinds_input(), None);
    let rec = render(&q, &c).await;
    let view = open_modal(&fake, &q, &c, &rec).await;
    let view_id = view["id"].as_str().unwrap();
    let base = |extra: (&'static str, Value)| {
        let mut f = vec![("fb1:m:0:pick", json!(["0"])), ("fb1:m:4:pick", json!("0"))];
        f.retain(|(k, _)| *k != extra.0);
        f.push(extra);
        f
    };
    for (fill, block, why) in [
        (base(("fb1:m:2:text", json!("11"))), "q2", "at most 10"),
        (base(("fb1:m:2:text", json!("0"))), "q2", "at least 1"),
        (base(("fb1:m:2:text", json!("2.5"))), "q2", "whole number"),
        (
            base(("fb1:m:2:text", json!("lots"))),
            "q2",
            "Enter a number",
        ),
        (
            base(("fb1:m:1:text", json!("far too long a reason"))),
            "q1",
            "at most 10 characters",
        ),
        (base(("fb1:m:0:pick", json!([]))), "q0", "required"),
        (base(("fb1:m:2:text", json!(""))), "q2", "required"),
    ] {
        let errors = fake.submit_view("U123", view_id, &fill).unwrap_err();
        assert!(
            errors.get(block).is_some_and(|e| e.contains(why)),
            "{why}: {errors:?}"
        );
    }
}

#[tokio::test]
async fn a_submission_frogbot_refuses_is_rejected_with_its_reason() {
    let (fake, q) = start().await;
    // Slack checks min and max, not a step of 5: FrogBot does.
    let c = call_of(
        json!({"questions": [
            {"header": "Pods", "question": "How many?", "kind": "number_input", "min": 0, "max": 50, "step": 5},
            {"header": "Notify", "question": "Tell the team?", "kind": "toggle"}
        ]}),
        None,
    );
    let rec = render(&q, &c).await;
    let view = open_modal(&fake, &q, &c, &rec).await;
    let payload = fake
        .submit_view(
            "U123",
            view["id"].as_str().unwrap(),
            &[("fb1:m:0:text", json!("7"))],
        )
        .expect("Slack lets 7 through");
    let submit = interaction_from_payload(&payload).unwrap().unwrap();
    let ParseResult::Rejected { reason } = parse(&q, &c, &rec, &submit) else {
        panic!("a step of 5 refuses 7")
    };
    assert_eq!(
        reason,
        "\"Pods\": enter a number from 0 to 50 in steps of 5."
    );
    // The reason reaches the person privately, in the thread.
    let req = RequestContext::default();
    let args = HookArgs {
        call: &c,
        question: &rec,
        req: &req,
        thread: &thread(),
    };
    q.rejected(args, &submit, &reason).await.unwrap();
    assert_eq!(fake.notices("U123"), vec![reason.clone()]);

    // 10 is fine: the toggle left unchecked is "off".
    let payload = fake
        .submit_view(
            "U123",
            view["id"].as_str().unwrap(),
            &[("fb1:m:0:text", json!("10"))],
        )
        .unwrap();
    let submit = interaction_from_payload(&payload).unwrap().unwrap();
    assert_eq!(
        parse(&q, &c, &rec, &submit),
        ParseResult::Answer {
            output: answered(&[("Pods", &["10"]), ("Notify", &["off"])])
        }
    );
}

/// A typed thread reply to a set of one input, as the Events API delivers it.
fn typed_reply(fake: &FakeSlack, text: &str) -> Interaction {
    let (channel, root) = THREAD.split_once(':').unwrap();
    let m = fake.user_message(channel, Some(root), "U123", text);
    let body = fake.event_callback(fake.message_event(&m, "channel"));
    let incoming = message_from_push_json(&body, BOT_USER).unwrap().unwrap();
    Interaction::Message {
        message: incoming.message,
    }
}

#[tokio::test]
async fn one_input_is_answered_by_a_thread_reply_too() {
    let (fake, q) = start().await;
    let number = call_of(
        json!({"questions": [{"header": "Pods", "question": "How many?", "kind": "number_input", "min": 1, "max": 10, "unit": "pods"}]}),
        None,
    );
    let rec = render(&q, &number).await;
    assert_eq!(
        parse(&q, &number, &rec, &typed_reply(&fake, "4 pods")),
        ParseResult::Answer {
            output: answered(&[("Pods", &["4"])])
        }
    );
    assert_eq!(
        parse(&q, &number, &rec, &typed_reply(&fake, "11")),
        ParseResult::Rejected {
            reason: "enter a number from 1 to 10.".into()
        }
    );
    // Text without a number is the conversation going on.
    assert_eq!(
        parse(&q, &number, &rec, &typed_reply(&fake, "what for?")),
        ParseResult::Ignore
    );

    let toggle = call_of(
        json!({"questions": [{"header": "Notify", "question": "Tell the team?", "kind": "toggle"}]}),
        None,
    );
    let rec = render(&q, &toggle).await;
    assert_eq!(
        parse(&q, &toggle, &rec, &typed_reply(&fake, "no")),
        ParseResult::Answer {
            output: answered(&[("Notify", &["off"])])
        }
    );
    let text = call_of(
        json!({"questions": [{"header": "Why", "question": "Reason?", "kind": "text_input", "maxLength": 5}]}),
        None,
    );
    let rec = render(&q, &text).await;
    assert_eq!(
        parse(&q, &text, &rec, &typed_reply(&fake, "ok")),
        ParseResult::Answer {
            output: answered(&[("Why", &["ok"])])
        }
    );
    assert_eq!(
        parse(&q, &text, &rec, &typed_reply(&fake, "much too long")),
        ParseResult::Rejected {
            reason: "the text is longer than 5 characters.".into()
        }
    );
    let confirm = call_of(
        json!({"questions": [{"header": "Go", "question": "Deploy?", "kind": "confirm", "label": "Approve"}]}),
        None,
    );
    let rec = render(&q, &confirm).await;
    assert_eq!(
        parse(&q, &confirm, &rec, &typed_reply(&fake, "approve")),
        ParseResult::Answer {
            output: answered(&[("Go", &["Approve"])])
        }
    );
}

/// A `view_submission` as Slack documents it (a modal with a `number_input`, a
/// `plain_text_input` left empty and a checkbox group), written by hand rather than by the
/// fake: the conversion reads every value.
#[test]
fn a_documented_view_submission_is_read() {
    let payload = json!({
        "type": "view_submission",
        "team": {"id": "T014K402SOW", "domain": "frogs"},
        "user": {"id": "U123", "username": "ana", "name": "ana", "team_id": "T014K402SOW"},
        "api_app_id": "A1",
        "token": "legacy",
        "trigger_id": "1.2.abc",
        "view": {
            "id": "V0001", "team_id": "T014K402SOW", "type": "modal",
            "callback_id": "fb1:questions", "private_metadata": "", "hash": "1.fake",
            "app_id": "A1", "bot_id": "B1",
            "title": {"type": "plain_text", "text": "Answer"},
            "blocks": [
                {"type": "input", "block_id": "q0", "label": {"type": "plain_text", "text": "Pods"},
                 "element": {"type": "number_input", "action_id": "fb1:m:0:text", "is_decimal_allowed": false, "min_value": "1"}},
                {"type": "input", "block_id": "q1", "optional": true, "label": {"type": "plain_text", "text": "Why"},
                 "element": {"type": "plain_text_input", "action_id": "fb1:m:1:text", "multiline": true}},
                {"type": "input", "block_id": "q2", "optional": true, "label": {"type": "plain_text", "text": "Notify"},
                 "element": {"type": "checkboxes", "action_id": "fb1:m:2:pick",
                             "options": [{"text": {"type": "plain_text", "text": "Notify"}, "value": "0"}]}}
            ],
            "state": {"values": {
                "q0": {"fb1:m:0:text": {"type": "number_input", "value": "4"}},
                "q1": {"fb1:m:1:text": {"type": "plain_text_input", "value": null}},
                "q2": {"fb1:m:2:pick": {"type": "checkboxes", "selected_options": [
                    {"text": {"type": "plain_text", "text": "Notify", "emoji": true}, "value": "0"}
                ]}}
            }}
        },
        "response_urls": [],
        "is_enterprise_install": false,
        "enterprise": null
    });
    let Some(Interaction::ModalSubmit { event }) = interaction_from_payload(&payload).unwrap()
    else {
        panic!("a modal submission")
    };
    assert_eq!(event.values["fb1:m:0:text"], "4");
    assert_eq!(event.values["fb1:m:1:text"], Value::Null);
    assert_eq!(event.values["fb1:m:2:pick"], json!(["0"]));
    let input: QuestionInput = serde_json::from_value(json!({"questions": [
        {"header": "Pods", "question": "How many?", "kind": "number_input", "min": 1},
        {"header": "Why", "question": "Reason?", "kind": "text_input", "required": false},
        {"header": "Notify", "question": "Tell?", "kind": "toggle"}
    ]}))
    .unwrap();
    assert_eq!(
        frogbot_slack::questions::output_from_modal(&input, &event.values).unwrap(),
        answered(&[("Pods", &["4"]), ("Why", &[]), ("Notify", &["on"])])
    );
}

fn last_user(req: &ModelRequest) -> String {
    req.messages
        .iter()
        .rev()
        .find_map(|m| match m {
            ModelMessage::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// End to end with the engine: the agent asks with several kinds, the card shows the form and
/// the expiry line, a modal submission FrogBot refuses is rejected with its reason (told
/// privately; the question stays open), the next one answers the whole set, the card is
/// settled and the agent continues with the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_takes_several_inputs_from_one_modal() {
    let fake = FakeSlack::start().await;
    let questions = Arc::new(fake.questions());
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let model = ScriptedModel::new(|req: &ModelRequest| {
        if let Some(ModelMessage::Tool { content, .. }) = req.messages.last() {
            return reply(&format!("got: {content}"));
        }
        if req.tools.iter().any(|t| t.name == "question") && last_user(req).contains("deploy") {
            return call(
                "c1",
                "question",
                json!({"questions": [
                    {"header": "Go", "question": "Deploy?", "kind": "confirm", "label": "Approve"},
                    {"header": "Pods", "question": "How many?", "kind": "number_input", "min": 0, "max": 50, "step": 5, "unit": "pods"},
                    {"header": "Notify", "question": "Tell the team?", "kind": "toggle", "label": "Notify"}
                ], "expiresInSeconds": 3600}),
            );
        }
        reply("hello")
    });
    let engine = frogbot_testkit::engine_with(store.clone(), model.clone()).with_channel(Channel {
        platform: PLATFORM.into(),
        questions: Some(questions.clone()),
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: None,
    });
    let said = fake.user_message("C42", None, "U123", &format!("<@{BOT_USER}> deploy please"));
    let push = fake.event_callback(fake.mention_event(&said));
    let incoming = message_from_push_json(&push, BOT_USER).unwrap().unwrap();
    match engine
        .channels()
        .message(PLATFORM, &incoming.thread, incoming.message)
        .await
        .unwrap()
    {
        ChannelMessageOutcome::Sent(Sent::Started(h)) => {
            h.done.await.unwrap().unwrap();
        }
        other => panic!("expected a turn, got {other:?}"),
    }
    let chat = channel_chat_id(PLATFORM, &incoming.thread);
    assert_eq!(
        engine.chats().state(&chat).await.unwrap(),
        TurnState::Awaiting
    );
    let card = fake.thread_messages(&incoming.thread).pop().unwrap();
    let text = shown(&fake, &card.id());
    assert!(text.contains("⏳ open until "), "{text}");
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());

    // "Answer…": the receiving layer finds the question and opens its modal.
    let click = fake.click("U123", &card.id(), "Answer…").unwrap();
    let Interaction::Action { event } = interaction_from_payload(&click).unwrap().unwrap() else {
        panic!("a click")
    };
    let target = engine
        .channels()
        .form_target(PLATFORM, &event.message_id)
        .await
        .unwrap()
        .expect("the open question");
    questions
        .open_other(
            &target.thread,
            &target.call,
            &target.record,
            event.trigger_id.as_deref().unwrap(),
        )
        .await
        .unwrap();
    let view = fake.views().pop().unwrap();
    let view_id = view["id"].as_str().unwrap();

    // 7 is within 0..50 (Slack sends it) but not a step of 5: rejected, the question stays open.
    let payload = fake
        .submit_view(
            "U123",
            view_id,
            &[("fb1:m:0:pick", json!(["0"])), ("fb1:m:1:text", json!("7"))],
        )
        .unwrap();
    let submit = interaction_from_payload(&payload).unwrap().unwrap();
    let out = engine
        .channels()
        .interaction(PLATFORM, None, &submit)
        .await
        .unwrap();
    let reason = "\"Pods\": enter a number from 0 to 50 in steps of 5.";
    assert_eq!(out, InteractionOutcome::Rejected(reason.into()));
    assert!(fake.notices("U123").contains(&reason.to_string()));
    assert_eq!(
        engine.chats().state(&chat).await.unwrap(),
        TurnState::Awaiting
    );

    // 15 and Notify checked: the whole set is answered at once.
    let payload = fake
        .submit_view(
            "U123",
            view_id,
            &[
                ("fb1:m:0:pick", json!(["0"])),
                ("fb1:m:1:text", json!("15")),
                ("fb1:m:2:pick", json!(["0"])),
            ],
        )
        .unwrap();
    let submit = interaction_from_payload(&payload).unwrap().unwrap();
    let out = engine
        .channels()
        .interaction(PLATFORM, None, &submit)
        .await
        .unwrap();
    assert_eq!(out, InteractionOutcome::Answered);
    let mut events = engine.chats().subscribe();
    while engine.chats().state(&chat).await.unwrap() != TurnState::Idle {
        let _ = tokio::time::timeout(std::time::Duration::from_millis(100), events.recv()).await;
    }
    let q = store
        .get_question(&chat, "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(q.closed);
    assert_eq!(fake.controls(&card.id()), 0);
    let text = shown(&fake, &card.id());
    assert!(
        text.contains("✅ Answered by <@U123>: Go: Approve · Pods: 15 pods · Notify: on"),
        "{text}"
    );
    let last = model.requests().pop().unwrap();
    assert!(
        matches!(last.messages.last(), Some(ModelMessage::Tool { content, .. }) if content.contains("15") && content.contains("Approve")),
        "{:?}",
        last.messages.last()
    );
}

/// The fake refuses the new elements where Slack does: a confirmation dialog over its limits
/// or with an unknown style, a `number_input` without `is_decimal_allowed` or with `min_value`
/// above `max_value`, a `plain_text_input` with `max_length` over 3,000.
#[tokio::test]
async fn the_fake_refuses_bad_dialogs_and_inputs_as_slack_does() {
    use frogbot_slack::SlackApi;
    use frogbot_slack::slack_morphism::prelude::*;
    let fake = FakeSlack::start().await;
    let api = fake.client(frogbot_slack::testing::BOT_TOKEN);
    let blocks = |v: Value| -> Vec<SlackBlock> { serde_json::from_value(v).unwrap() };
    let dialog = |confirm: &str, style: &str| {
        blocks(json!([{"type": "actions", "elements": [{
            "type": "button", "action_id": "a", "text": {"type": "plain_text", "text": "Go"},
            "style": "danger",
            "confirm": {"title": {"type": "plain_text", "text": "Sure?"},
                        "text": {"type": "plain_text", "text": "Really?"},
                        "confirm": {"type": "plain_text", "text": confirm},
                        "deny": {"type": "plain_text", "text": "No"}, "style": style}
        }]}]))
    };
    for (b, pointer) in [
        (
            dialog(&"c".repeat(31), "danger"),
            "/blocks/0/elements/0/confirm/confirm/text",
        ),
        (dialog("Yes", "red"), "/blocks/0/elements/0/confirm/style"),
    ] {
        let err = api.post_message("C42", None, b, "t").await.unwrap_err();
        assert!(err.to_string().contains("invalid_blocks"), "{err}");
        assert!(
            fake.violations()
                .last()
                .is_some_and(|v| v.contains(pointer)),
            "{pointer}: {:?}",
            fake.violations()
        );
    }
    api.post_message("C42", None, dialog(&"c".repeat(30), "danger"), "t")
        .await
        .unwrap();

    let modal = |element: Value| -> SlackView {
        serde_json::from_value(json!({
            "type": "modal", "title": {"type": "plain_text", "text": "Answer"},
            "blocks": [{"type": "input", "block_id": "q0",
                        "label": {"type": "plain_text", "text": "L"}, "element": element}]
        }))
        .unwrap()
    };
    for (element, pointer) in [
        (
            json!({"type": "number_input", "action_id": "n", "is_decimal_allowed": false, "min_value": "5", "max_value": "1"}),
            "/blocks/0/element/min_value",
        ),
        (
            json!({"type": "number_input", "action_id": "n", "is_decimal_allowed": true, "initial_value": "9", "max_value": "1"}),
            "/blocks/0/element/initial_value",
        ),
        (
            json!({"type": "plain_text_input", "action_id": "t", "max_length": 3001}),
            "/blocks/0/element/max_length",
        ),
    ] {
        let err = api
            .open_view("trigger-1", modal(element))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("invalid_arguments"), "{err}");
        assert!(
            fake.violations()
                .last()
                .is_some_and(|v| v.contains(pointer)),
            "{pointer}: {:?}",
            fake.violations()
        );
    }
    assert!(fake.views().is_empty(), "refused views are not opened");
}

/// In a set of choices and a confirm (nothing the modal alone answers) each is drawn in the
/// message: the confirm's tap is one step of the set, as a choice's is.
#[tokio::test]
async fn a_confirm_beside_choices_is_a_step_of_the_set() {
    let (fake, q) = start().await;
    let c = call_of(
        json!({"questions": [
            {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]},
            {"header": "Go", "question": "Deploy?", "kind": "confirm", "label": "Approve"}
        ]}),
        None,
    );
    let rec = render(&q, &c).await;
    let id = rec.current().unwrap().id.clone();
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    assert!(fake.element(&id, "Answer…").is_none(), "no form card");
    let payload = fake.click("U123", &id, "prod").unwrap();
    let ParseResult::Partial { state } = parse(
        &q,
        &c,
        &rec,
        &interaction_from_payload(&payload).unwrap().unwrap(),
    ) else {
        panic!("one of two answered")
    };
    // The engine saves the progress and redraws at the next revision.
    let rec = QuestionRecord {
        revision: 1,
        state,
        ..rec
    };
    let req = RequestContext::default();
    let args = HookArgs {
        call: &c,
        question: &rec,
        req: &req,
        thread: &thread(),
    };
    q.updated(args, None).await.unwrap();
    assert!(shown(&fake, &id).contains("Selected: prod"));
    let payload = fake.click("U123", &id, "Approve").unwrap();
    assert_eq!(
        parse(
            &q,
            &c,
            &rec,
            &interaction_from_payload(&payload).unwrap().unwrap()
        ),
        ParseResult::Answer {
            output: answered(&[("Env", &["prod"]), ("Go", &["Approve"])])
        }
    );
}

/// Issue 38: typed replies answer a set of several questions too — in order (the first question
/// still unanswered), or by number (`3: …`) — each kept until the last completes the set; `skip`
/// skips the whole call whatever question it reaches.
#[tokio::test]
async fn a_five_question_set_is_answered_by_typed_replies_in_order_or_by_number() {
    let (fake, q) = start().await;
    let set = call_of(
        json!({"questions": [
            {"header": "Colour", "question": "Which?", "options": [{"label": "red"}, {"label": "green"}]},
            {"header": "Sizes", "question": "Which sizes?", "multiple": true,
             "options": [{"label": "S"}, {"label": "M"}, {"label": "L"}]},
            {"header": "Pods", "question": "How many?", "kind": "number_input", "min": 1, "max": 10},
            {"header": "Notify", "question": "Tell the team?", "kind": "toggle"},
            {"header": "Why", "question": "Reason?", "kind": "text_input"}
        ]}),
        None,
    );
    let mut rec = render(&q, &set).await;
    let step = |rec: &mut QuestionRecord, text: &str| {
        let r = parse(&q, &set, rec, &typed_reply(&fake, text));
        if let ParseResult::Partial { state } = &r {
            rec.state = state.clone();
        }
        r
    };
    // In order: the first reply answers "Colour".
    assert!(matches!(
        step(&mut rec, "green"),
        ParseResult::Partial { .. }
    ));
    // By number: question 4 before 2 and 3.
    assert!(matches!(
        step(&mut rec, "4: yes"),
        ParseResult::Partial { .. }
    ));
    // A wrong answer names its question and keeps what was given.
    assert_eq!(
        step(&mut rec, "3: 11"),
        ParseResult::Rejected {
            reason: "Pods: enter a number from 1 to 10.".into()
        }
    );
    // Chatter that answers nothing (the next unanswered is a choice) reaches the agent.
    assert_eq!(step(&mut rec, "hmm, not sure"), ParseResult::Ignore);
    assert!(matches!(
        step(&mut rec, "1, 3"),
        ParseResult::Partial { .. }
    ));
    assert!(matches!(
        step(&mut rec, "3: 4"),
        ParseResult::Partial { .. }
    ));
    // A time is no question number: the text answers "Why" as it is.
    assert_eq!(
        step(&mut rec, "after 12:30"),
        ParseResult::Answer {
            output: answered(&[
                ("Colour", &["green"]),
                ("Sizes", &["S", "L"]),
                ("Pods", &["4"]),
                ("Notify", &["on"]),
                ("Why", &["after 12:30"]),
            ])
        }
    );
    // `skip` dismisses the whole call, addressed or not.
    let rec = render(&q, &set).await;
    for text in ["skip", "2: skip", "/skip"] {
        assert_eq!(
            parse(&q, &set, &rec, &typed_reply(&fake, text)),
            ParseResult::Dismiss,
            "{text}"
        );
    }
}

/// Issue 38: at a select's limit (100 options) and one past it, every option can be chosen: up
/// to 100 in the select; past it, every option listed, numbered, and answered by a typed reply
/// (`N: …` in a set of several) — no select showing only some. A 30-option multiple choice is one
/// multi-select of all 30.
#[tokio::test]
async fn every_option_can_be_chosen_at_the_select_limit_and_past_it() {
    let (fake, q) = start().await;
    let options = |n: usize| {
        (1..=n)
            .map(|i| json!({"label": format!("o{i}")}))
            .collect::<Vec<_>>()
    };
    for (n, multiple) in [(100, false), (101, false), (30, true), (101, true)] {
        let call = call_of(
            json!({"questions": [{"header": "Pick", "question": "Which?", "multiple": multiple,
                                  "options": options(n)}]}),
            None,
        );
        let rec = render(&q, &call).await;
        let id = rec.current().unwrap().id.clone();
        let controls = fake.controls(&id);
        let text = shown(&fake, &id);
        if n <= 100 {
            // The select (and Submit, for `multiple`) and Skip: every option in it.
            assert_eq!(controls, n + 1 + usize::from(multiple), "{n}");
            let last = fake.element(&id, &format!("o{n}"));
            assert!(
                last.is_some() || text.contains(&format!("o{n}")),
                "{n}: o{n} shown"
            );
        } else {
            assert_eq!(controls, 1, "{n}: Skip alone, no select showing only some");
            let lines: Vec<&str> = text.lines().collect();
            for i in 1..=n {
                let line = format!("{i}. o{i}");
                assert!(lines.contains(&line.as_str()), "{n}: option {i} listed");
            }
            assert!(
                text.contains("Reply in this thread with the number"),
                "{text}"
            );
            let (reply, want) = if multiple {
                ("2, 101", vec!["o2", "o101"])
            } else {
                ("101", vec!["o101"])
            };
            assert_eq!(
                parse(&q, &call, &rec, &typed_reply(&fake, reply)),
                ParseResult::Answer {
                    output: answered(&[("Pick", &want)])
                },
                "{n}"
            );
        }
        assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    }
    // In a set of several, the list's question is answered by number.
    let call = call_of(
        json!({"questions": [
            {"header": "Colour", "question": "Which?", "options": [{"label": "red"}, {"label": "green"}]},
            {"header": "Pick", "question": "Which?", "options": options(101)}
        ]}),
        None,
    );
    let mut rec = render(&q, &call).await;
    let ParseResult::Partial { state } = parse(&q, &call, &rec, &typed_reply(&fake, "2: 101"))
    else {
        panic!("question 2 answered")
    };
    rec.state = state;
    assert_eq!(
        parse(&q, &call, &rec, &typed_reply(&fake, "red")),
        ParseResult::Answer {
            output: answered(&[("Colour", &["red"]), ("Pick", &["o101"])])
        }
    );
}
