//! `SlackQuestions` driven through slack-morphism's real client against the fake Slack
//! (`frogbot_slack::testing`), plus `parse` for every control.

use frogbot_core::model::{
    ActionEvent, Actor, ChannelIdentity, ChannelQuestions, HookArgs, Interaction, ModalSubmitEvent,
    ParseArgs, ParseResult, PlatformUser, QuestionAnswer, QuestionCall, QuestionInput,
    QuestionMessage, QuestionOutcome, QuestionOutput, QuestionRecord, RenderArgs, RequestContext,
    Thread, ThreadMessage, ThreadMessageMetadata, decode_question_modal_metadata,
};
use frogbot_slack::channel::Connector;
use frogbot_slack::convert::ts_to_rfc3339;
use frogbot_slack::testing::{BOT_TOKEN, FakeSlack};
use frogbot_slack::{SlackQuestions, SlackWebApi};
use serde_json::{Value, json};

async fn start() -> (FakeSlack, SlackQuestions<SlackWebApi<Connector>>) {
    let fake = FakeSlack::start().await;
    let questions = fake.questions();
    (fake, questions)
}

fn thread() -> Thread {
    Thread {
        id: "C42:1700000000.000100".into(),
        platform: "slack".into(),
        chat_id: "chat-1".into(),
    }
}

/// `n` question messages the bot posted in the thread (so `chat.update` finds them); their ids.
async fn posted(fake: &FakeSlack, n: usize) -> Vec<String> {
    let api = fake.client(BOT_TOKEN);
    let mut ids = Vec::new();
    for _ in 0..n {
        let ts = frogbot_slack::SlackApi::post_message(
            &api,
            "C42",
            Some("1700000000.000100"),
            Vec::new(),
            "a question",
        )
        .await
        .unwrap();
        ids.push(format!("C42:{ts}"));
    }
    fake.fail_with(None);
    ids
}

fn call(id: &str, questions: Value) -> QuestionCall {
    QuestionCall {
        tool_call_id: id.into(),
        input: serde_json::from_value::<QuestionInput>(json!({ "questions": questions })).unwrap(),
        expires_at: None,
    }
}

fn env_call() -> QuestionCall {
    call(
        "call-1",
        json!([{"header": "Env", "question": "Where to deploy?", "options": [{"label": "staging"}, {"label": "prod"}], "custom": true}]),
    )
}

fn set_call() -> QuestionCall {
    call(
        "call-2",
        json!([
            {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]},
            {"header": "Checks", "question": "Which checks?", "options": [{"label": "lint"}, {"label": "test"}, {"label": "bench"}], "multiple": true},
            {"header": "Note", "question": "Anything else?", "options": [], "custom": true}
        ]),
    )
}

fn record(messages: &[&str], revision: u64, state: Option<Value>) -> QuestionRecord {
    QuestionRecord {
        messages: messages
            .iter()
            .map(|id| QuestionMessage {
                id: id.to_string(),
                posted_at: "2023-11-14T22:15:00.000Z".into(),
                question: None,
            })
            .collect(),
        revision,
        state,
    }
}

fn user() -> PlatformUser {
    PlatformUser {
        id: "U123".into(),
        name: Some("ana".into()),
        is_bot: false,
    }
}

fn action(action_id: &str, value: Option<&str>) -> Interaction {
    Interaction::Action {
        event: ActionEvent {
            action_id: action_id.into(),
            value: value.map(str::to_string),
            message_id: "C42:1700000100.000001".into(),
            user: user(),
            trigger_id: Some("trigger-1".into()),
            raw: Value::Null,
        },
    }
}

fn modal(values: Value) -> Interaction {
    let Value::Object(values) = values else {
        panic!()
    };
    Interaction::ModalSubmit {
        event: ModalSubmitEvent {
            values,
            private_metadata: None,
            related_message_id: None,
            user: user(),
            trigger_id: None,
            raw: Value::Null,
        },
    }
}

fn parse(
    q: &SlackQuestions<impl frogbot_slack::SlackApi>,
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

fn answer(pairs: &[(&str, &[&str])]) -> ParseResult {
    ParseResult::Answer {
        output: QuestionOutput {
            answers: pairs
                .iter()
                .map(|(h, s)| QuestionAnswer {
                    header: h.to_string(),
                    selected: s.iter().map(|x| x.to_string()).collect(),
                })
                .collect(),
        },
    }
}

#[tokio::test]
async fn render_posts_one_block_kit_message_per_call_in_the_thread() {
    let (fake, q) = start().await;
    let calls = [env_call(), set_call()];
    let req = RequestContext::default();
    let out = q
        .render(RenderArgs {
            calls: &calls,
            req: &req,
            thread: &thread(),
        })
        .await
        .unwrap();
    let posts = fake.calls("chat.postMessage");
    assert_eq!(posts.len(), 2);
    assert_eq!(posts[0].auth, format!("Bearer {BOT_TOKEN}"));
    assert_eq!(posts[0].body["channel"], "C42");
    assert_eq!(posts[0].body["thread_ts"], "1700000000.000100");
    assert_eq!(posts[0].body["text"], "Where to deploy?");
    let blocks = posts[0].body["blocks"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "section");
    let ids: Vec<_> = blocks[1]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["fb1:b:0:0:0", "fb1:b:0:1:0", "fb1:o:0:-:0"]);
    // Last, "Skip" in an actions block of its own.
    assert_eq!(blocks.len(), 3);
    assert_eq!(blocks[2]["elements"][0]["action_id"], "fb1:k:0:-:0");
    assert_eq!(blocks[2]["elements"][0]["text"]["text"], "Skip");
    assert_eq!(posts[1].body["blocks"].as_array().unwrap().len(), 7);

    assert_eq!(out.len(), 2);
    let shown = fake.thread_messages("C42:1700000000.000100");
    assert_eq!(shown.len(), 2, "both posted in the thread");
    assert_eq!(out[0].calls, ["call-1"]);
    assert_eq!(out[0].messages[0].id, format!("C42:{}", shown[0].ts));
    assert_eq!(
        out[0].messages[0].posted_at,
        ts_to_rfc3339(&shown[0].ts).unwrap()
    );
    assert_eq!(out[1].calls, ["call-2"]);
    assert_eq!(out[1].messages[0].id, format!("C42:{}", shown[1].ts));
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn settled_updates_every_message_of_the_record() {
    let (fake, q) = start().await;
    let c = env_call();
    let ids = posted(&fake, 2).await;
    let rec = record(&[ids[0].as_str(), ids[1].as_str()], 0, None);
    let actor = Actor {
        user: None,
        identity: Some(ChannelIdentity {
            platform: "slack".into(),
            user: user(),
        }),
    };
    let outcome = QuestionOutcome::Answered(QuestionOutput {
        answers: vec![QuestionAnswer {
            header: "Env".into(),
            selected: vec!["prod".into()],
        }],
    });
    let req = RequestContext::default();
    let args = HookArgs {
        call: &c,
        question: &rec,
        req: &req,
        thread: &thread(),
    };
    assert_eq!(
        q.settled(args, outcome.by(Some(&actor))).await.unwrap(),
        None
    );
    let updates = fake.calls("chat.update");
    assert_eq!(updates.len(), 2);
    let ts: Vec<_> = updates.iter().map(|u| u.body["ts"].clone()).collect();
    let want: Vec<_> = ids
        .iter()
        .map(|id| json!(id.split_once(':').unwrap().1))
        .collect();
    assert_eq!(ts, want);
    // What a person sees now: the outcome, no controls.
    for id in &ids {
        assert_eq!(fake.controls(id), 0);
    }
    for u in &updates {
        assert_eq!(u.body["channel"], "C42");
        let blocks = u.body["blocks"].as_array().unwrap();
        assert_eq!(blocks.last().unwrap()["type"], "context");
        assert_eq!(
            blocks.last().unwrap()["elements"][0]["text"],
            "✅ Answered by <@U123>: prod"
        );
        assert!(!u.body["blocks"].to_string().contains("\"actions\""));
    }

    // A failing update is reported (FrogBot logs it and closes the question anyway).
    fake.fail_with(Some("message_not_found"));
    let err = q
        .settled(args, QuestionOutcome::Dismissed.by(None))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("chat.update"), "{err}");
    assert_eq!(
        fake.calls("chat.update").len(),
        4,
        "still tries every message"
    );
}

#[tokio::test]
async fn stale_rejected_and_denied_answer_the_clicking_user_privately() {
    let (fake, q) = start().await;
    let c = env_call();
    let rec = record(&["C42:1700000100.000001"], 0, None);
    let req = RequestContext::default();
    let args = HookArgs {
        call: &c,
        question: &rec,
        req: &req,
        thread: &thread(),
    };
    let click = action("fb1:b:0:1:0", Some("1"));
    q.stale(args, &click).await.unwrap();
    q.rejected(args, &click, "Pick one of the buttons.")
        .await
        .unwrap();
    q.denied(args, &click).await.unwrap();
    let eph = fake.calls("chat.postEphemeral");
    assert_eq!(eph.len(), 3);
    for e in &eph {
        assert_eq!(e.body["channel"], "C42");
        assert_eq!(e.body["user"], "U123");
        assert_eq!(e.body["thread_ts"], "1700000000.000100");
    }
    assert_eq!(eph[0].body["text"], frogbot_slack::questions::STALE_TEXT);
    assert_eq!(eph[1].body["text"], "Pick one of the buttons.");
    assert_eq!(eph[2].body["text"], frogbot_slack::questions::DENIED_TEXT);
    assert!(fake.calls("chat.update").is_empty());
}

#[tokio::test]
async fn open_other_opens_the_modal_with_the_form_locator() {
    let (fake, q) = start().await;
    let c = env_call();
    let rec = record(&["C42:1700000100.000001", "C42:1700000100.000007"], 0, None);
    let other = action("fb1:o:0:-:0", None);
    // parse is free of side effects: the "Other…" button is ignored there…
    assert_eq!(parse(&q, &c, &rec, &other), ParseResult::Ignore);
    assert!(frogbot_slack::questions::is_open_form_action("fb1:o:0:-:0"));
    assert_eq!(fake.count(), 0);
    // …and the receiving layer opens the form.
    q.open_other(&thread(), &c, &rec, "trigger-1")
        .await
        .unwrap();
    let opened = fake.calls("views.open");
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0].body["trigger_id"], "trigger-1");
    let view = &opened[0].body["view"];
    assert_eq!(view["type"], "modal");
    let locator =
        decode_question_modal_metadata(view["private_metadata"].as_str().unwrap()).unwrap();
    assert_eq!(locator.thread_id, "C42:1700000000.000100");
    assert_eq!(locator.message_id, "C42:1700000100.000007");
    assert_eq!(view["blocks"][0]["element"]["type"], "radio_buttons");
    assert_eq!(view["blocks"][1]["element"]["type"], "plain_text_input");
}

#[tokio::test]
async fn updated_redraws_the_current_message_at_the_new_revision() {
    let (fake, q) = start().await;
    let c = set_call();
    let state = json!({"picks": [["prod"], null, null], "checked": [[], [1], []]});
    let ids = posted(&fake, 1).await;
    let rec = record(&[ids[0].as_str()], 3, Some(state));
    let req = RequestContext::default();
    let args = HookArgs {
        call: &c,
        question: &rec,
        req: &req,
        thread: &thread(),
    };
    assert_eq!(q.updated(args, None).await.unwrap(), None);
    let updates = fake.calls("chat.update");
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].body["ts"], ids[0].split_once(':').unwrap().1);
    let blocks = &updates[0].body["blocks"];
    assert!(
        blocks[0]["text"]["text"]
            .as_str()
            .unwrap()
            .contains("Selected: prod")
    );
    assert_eq!(blocks[1]["elements"][1]["style"], "primary");
    assert_eq!(blocks[3]["elements"][0]["action_id"], "fb1:c:1:-:3");
    assert_eq!(blocks[3]["elements"][0]["initial_options"][0]["value"], "1");
}

#[tokio::test]
async fn parse_reads_every_control() {
    let (fake, q) = start().await;
    // A single question: a button answers it.
    let c = env_call();
    let rec = record(&["C42:1700000100.000001"], 0, None);
    assert_eq!(
        parse(&q, &c, &rec, &action("fb1:b:0:1:0", Some("1"))),
        answer(&[("Env", &["prod"])])
    );
    // Controls drawn for another revision are stale.
    assert_eq!(
        parse(&q, &c, &rec, &action("fb1:b:0:1:1", Some("1"))),
        ParseResult::Stale
    );
    // Not ours, or an option that does not exist.
    assert_eq!(
        parse(&q, &c, &rec, &action("approve", Some("1"))),
        ParseResult::Ignore
    );
    assert!(matches!(
        parse(&q, &c, &rec, &action("fb1:b:0:7:0", Some("7"))),
        ParseResult::Rejected { .. }
    ));
    // A thread reply answers a single question: an option's label (any case) or number, else
    // (with `custom`) its own text; one sent before the question was posted is stale; once the
    // question is settled replies are the conversation's.
    let reply = |text: &str, sent: &str| Interaction::Message {
        message: ThreadMessage {
            id: "C42:1700000200.000001".into(),
            text: text.into(),
            author: user(),
            metadata: ThreadMessageMetadata {
                date_sent: sent.into(),
            },
            reply_to: None,
            raw: Value::Null,
            files: Vec::new(),
            mentions: Vec::new(),
        },
    };
    let later = "2023-11-14T22:16:40.000Z";
    assert_eq!(
        parse(&q, &c, &rec, &reply("PROD", later)),
        answer(&[("Env", &["prod"])])
    );
    assert_eq!(
        parse(&q, &c, &rec, &reply("1", later)),
        answer(&[("Env", &["staging"])])
    );
    assert_eq!(
        parse(&q, &c, &rec, &reply("the moon", later)),
        answer(&[("Env", &["the moon"])])
    );
    // Numbers that are no option, or two for a one-choice question, are rejected with a reason.
    assert_eq!(
        parse(&q, &c, &rec, &reply("1, 2", later)),
        ParseResult::Rejected {
            reason: "pick only one option.".into()
        }
    );
    assert!(matches!(
        parse(&q, &c, &rec, &reply("9", later)),
        ParseResult::Rejected { reason } if reason.contains("from 1 to")
    ));
    assert_eq!(
        parse(&q, &c, &rec, &reply("prod", "2023-11-14T22:00:00.000Z")),
        ParseResult::Stale
    );
    assert_eq!(
        q.parse(ParseArgs {
            call: &c,
            interaction: &reply("prod", later),
            question: &rec,
            settled: true,
        }),
        ParseResult::Ignore
    );

    // A set: a pick is partial, checkboxes are partial, Submit completes.
    let c = set_call();
    let rec0 = record(&["C42:1700000100.000001"], 0, None);
    let ParseResult::Partial { state: Some(s1) } =
        parse(&q, &c, &rec0, &action("fb1:b:0:0:0", Some("0")))
    else {
        panic!("expected partial")
    };
    assert_eq!(s1["picks"][0], json!(["staging"]));
    let rec1 = record(&["C42:1700000100.000001"], 1, Some(s1));
    let ParseResult::Partial { state: Some(s2) } =
        parse(&q, &c, &rec1, &action("fb1:c:1:-:1", Some("0,2")))
    else {
        panic!("expected partial")
    };
    assert_eq!(s2["checked"][1], json!([0, 2]));
    let rec2 = record(&["C42:1700000100.000001"], 2, Some(s2));
    // Submit at the old revision is stale; an empty Submit is rejected.
    assert_eq!(
        parse(&q, &c, &rec2, &action("fb1:u:1:-:1", None)),
        ParseResult::Stale
    );
    assert!(matches!(
        parse(&q, &c, &rec0, &action("fb1:u:1:-:0", None)),
        ParseResult::Rejected { .. }
    ));
    let ParseResult::Partial { state: Some(s3) } =
        parse(&q, &c, &rec2, &action("fb1:u:1:-:2", None))
    else {
        panic!("expected partial: the note is still open")
    };
    assert_eq!(s3["picks"][1], json!(["lint", "bench"]));

    // The modal answers the whole set at once, validated.
    let good = modal(json!({
        "fb1:m:0:pick": "1",
        "fb1:m:1:pick": ["0", "1"],
        "fb1:m:2:text": "ship it"
    }));
    assert_eq!(
        parse(&q, &c, &rec2, &good),
        answer(&[
            ("Env", &["prod"]),
            ("Checks", &["lint", "test"]),
            ("Note", &["ship it"])
        ])
    );
    let missing = modal(json!({"fb1:m:0:pick": "1", "fb1:m:1:pick": []}));
    assert!(matches!(
        parse(&q, &c, &rec2, &missing),
        ParseResult::Rejected { .. }
    ));
    let other_text = modal(json!({"fb1:m:0:text": "moon"}));
    let c1 = env_call();
    assert_eq!(
        parse(&q, &c1, &rec0, &other_text),
        answer(&[("Env", &["moon"])])
    );
    assert!(matches!(
        parse(&q, &c1, &rec0, &modal(json!({"fb1:m:0:pick": "9"}))),
        ParseResult::Rejected { .. }
    ));
    assert_eq!(fake.count(), 0, "parse made no call");
}

#[tokio::test]
async fn thread_replies_that_are_no_answer_reach_the_agent() {
    let (_fake, q) = start().await;
    let c = call(
        "call-3",
        json!([{"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]}]),
    );
    let rec = record(&["C42:1700000100.000001"], 0, None);
    let reply = |text: &str| Interaction::Message {
        message: ThreadMessage {
            id: "C42:1700000200.000001".into(),
            text: text.into(),
            author: user(),
            metadata: ThreadMessageMetadata {
                date_sent: "2023-11-14T22:16:40.000Z".into(),
            },
            reply_to: None,
            raw: Value::Null,
            files: Vec::new(),
            mentions: Vec::new(),
        },
    };
    let parse_at = |text: &str, settled: bool| {
        q.parse(ParseArgs {
            call: &c,
            interaction: &reply(text),
            question: &rec,
            settled,
        })
    };
    // Open, options only: chatter is not for the question; answers and wrong numbers are.
    assert_eq!(parse_at("what do you mean?", false), ParseResult::Ignore);
    assert_eq!(parse_at("prod", false), answer(&[("Env", &["prod"])]));
    assert!(matches!(
        parse_at("3", false),
        ParseResult::Rejected { reason } if reason.contains("1 to 2")
    ));
    // Answered: every reply is the conversation's.
    for text in ["prod", "3", "thanks"] {
        assert_eq!(parse_at(text, true), ParseResult::Ignore, "{text:?}");
    }
}

#[tokio::test]
async fn auth_test_tells_the_bot_its_own_ids() {
    let (fake, q) = start().await;
    let me = q.api().bot_identity().await.unwrap();
    assert_eq!(me.user_id, "UBOT");
    assert_eq!(me.bot_id.as_deref(), Some("B1"));
    assert_eq!(me.team_id, "T1");
    let calls = fake.calls("auth.test");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].auth, format!("Bearer {BOT_TOKEN}"));
}

#[tokio::test]
async fn the_fake_refuses_what_slack_refuses() {
    use frogbot_slack::SlackApi;
    use frogbot_slack::slack_morphism::prelude::*;
    let (fake, _q) = start().await;
    let api = fake.client(BOT_TOKEN);
    let section = |text: &str| -> SlackBlock {
        SlackSectionBlock::new()
            .with_text(SlackBlockMarkDownText::new(text.into()).into())
            .into()
    };
    let button = |text: &str, id: usize| -> SlackActionBlockElement {
        SlackBlockButtonElement::new(SlackBlockPlainText::new(text.into()).into())
            .with_action_id(SlackActionId(format!("a{id}")))
            .into()
    };
    // 51 blocks, a 3001-character section, a 76-character button, 26 elements in an actions block.
    let cases: Vec<(Vec<SlackBlock>, &str)> = vec![
        ((0..51).map(|_| section("x")).collect(), "/blocks"),
        (vec![section(&"y".repeat(3001))], "/blocks/0/text/text"),
        (
            vec![SlackActionsBlock::new(vec![button(&"z".repeat(76), 0)]).into()],
            "/blocks/0/elements/0/text/text",
        ),
        (
            vec![SlackActionsBlock::new((0..26).map(|i| button("ok", i)).collect()).into()],
            "/blocks/0/elements",
        ),
    ];
    for (blocks, pointer) in cases {
        let err = api
            .post_message("C42", None, blocks, "t")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("invalid_blocks"), "{err}");
        assert!(
            fake.violations()
                .last()
                .is_some_and(|v| v.contains(pointer)),
            "{pointer}: {:?}",
            fake.violations()
        );
    }
    // Within the limits: accepted, and shown as sent (every block gets a block_id).
    let ts = api
        .post_message("C42", None, vec![section(&"y".repeat(3000))], "t")
        .await
        .unwrap();
    let shown = fake.message(&format!("C42:{ts}")).unwrap();
    assert!(shown.blocks[0]["block_id"].is_string());
    // A text over 40,000 characters is too long; an unknown message cannot be updated.
    assert!(
        api.post_message("C42", None, vec![], &"w".repeat(40_001))
            .await
            .is_err()
    );
    let err = api
        .update_message("C42", "1.000001", vec![section("x")], "t")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("message_not_found"), "{err}");
}

#[tokio::test]
async fn the_recording_client_records_what_the_hooks_call() {
    use frogbot_slack::testing::{RecordingSlack, SlackCall};
    let q = SlackQuestions::new(RecordingSlack::new());
    let req = RequestContext::default();
    let out = q
        .render(RenderArgs {
            calls: &[env_call()],
            req: &req,
            thread: &thread(),
        })
        .await
        .unwrap();
    assert_eq!(out[0].messages[0].id, "C42:1700000100.000001");
    let calls = q.api().calls();
    assert!(matches!(
        &calls[..],
        [SlackCall::PostMessage { channel, thread_ts: Some(t), .. }]
            if channel == "C42" && t == "1700000000.000100"
    ));
}

#[tokio::test]
async fn submit_takes_the_checks_the_message_shows() {
    let (_fake, q) = start().await;
    let c = set_call();
    let rec = record(&["C42:1700000100.000001"], 2, None);
    // Slack sends the message's input state with the Submit click.
    let submit = Interaction::Action {
        event: ActionEvent {
            action_id: "fb1:u:1:-:2".into(),
            value: None,
            message_id: "C42:1700000100.000001".into(),
            user: user(),
            trigger_id: None,
            raw: json!({"state": {"values": {"b3": {"fb1:c:1:-:2": {
                "type": "checkboxes",
                "selected_options": [{"value": "0"}, {"value": "2"}]
            }}}}}),
        },
    };
    let ParseResult::Partial { state: Some(s) } = parse(&q, &c, &rec, &submit) else {
        panic!("expected partial: the other questions are open")
    };
    assert_eq!(s["picks"][1], json!(["lint", "bench"]));
}
