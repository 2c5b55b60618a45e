//! `MatrixQuestions` over the recording `MatrixApi` (`RecordingMatrix`): what render sends (polls in
//! the thread, numbered fallback), how parse reads poll responses, reactions and thread replies,
//! what updated, settled and the notices send. (The same hooks run against the fake homeserver in
//! tests/conformance.rs and against a real Synapse in tests/synapse.rs.)

use frogbot_matrix::MatrixQuestions;
use frogbot_matrix::render::PollEvents;
use frogbot_matrix::testing::RecordingMatrix;
use frogbot_model::{
    ActionEvent, Actor, ChannelIdentity, ChannelQuestions, HookArgs, Interaction, ParseArgs,
    ParseResult, PlatformUser, QuestionAnswer, QuestionCall, QuestionInput, QuestionMessage,
    QuestionOutcome, QuestionOutput, QuestionRecord, RenderArgs, RequestContext, Thread,
    ThreadMessage, ThreadMessageMetadata,
};
use serde_json::{Value, json};

type Recorder = RecordingMatrix;

/// What the recorder sent: `(room, event type, content)`.
fn sent_by(h: &MatrixQuestions<Recorder>) -> Vec<(String, String, Value)> {
    h.api()
        .sent()
        .into_iter()
        .map(|s| (s.room, s.event_type, s.content))
        .collect()
}

fn call(q: Value) -> QuestionCall {
    QuestionCall {
        tool_call_id: "c1".into(),
        input: serde_json::from_value::<QuestionInput>(q).unwrap(),
        expires_at: None,
    }
}

fn thread() -> Thread {
    Thread {
        id: "!r:localhost|$root".into(),
        platform: "matrix".into(),
        chat_id: "matrix-x".into(),
    }
}

fn two_questions() -> QuestionCall {
    call(json!({"questions": [
        {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]},
        {"header": "Regions", "question": "Which?", "multiple": true, "custom": true,
         "options": [{"label": "eu"}, {"label": "us"}, {"label": "asia"}]},
        {"header": "Note", "question": "Anything else?", "custom": true, "options": []}
    ]}))
}

fn record(state: Option<Value>) -> QuestionRecord {
    QuestionRecord {
        messages: (0..3)
            .map(|q| QuestionMessage {
                id: format!("!r:localhost|$sent{}", q + 1),
                posted_at: String::new(),
                question: Some(q),
            })
            .collect(),
        revision: 0,
        state,
    }
}

fn user() -> PlatformUser {
    PlatformUser {
        id: "@alice:localhost".into(),
        name: None,
        is_bot: false,
    }
}

fn poll(message: &str, value: &str) -> Interaction {
    Interaction::Action {
        event: ActionEvent {
            action_id: "poll".into(),
            value: Some(value.into()),
            message_id: message.into(),
            user: user(),
            trigger_id: Some("!r:localhost|$resp".into()),
            raw: Value::Null,
        },
    }
}

fn reply(text: &str, reply_to: Option<&str>) -> Interaction {
    Interaction::Message {
        message: ThreadMessage {
            id: "!r:localhost|$reply".into(),
            text: text.into(),
            author: user(),
            metadata: ThreadMessageMetadata {
                date_sent: "2026-01-01T00:00:00Z".into(),
            },
            reply_to: reply_to.map(str::to_owned),
            raw: Value::Null,
            files: Vec::new(),
            mentions: Vec::new(),
        },
    }
}

fn parse(
    h: &MatrixQuestions<Recorder>,
    c: &QuestionCall,
    r: &QuestionRecord,
    i: &Interaction,
) -> ParseResult {
    h.parse(ParseArgs {
        call: c,
        interaction: i,
        question: r,
        settled: false,
    })
}

#[tokio::test]
async fn render_posts_the_first_question_and_each_step_the_next_a_poll_or_a_prompt() {
    let h = MatrixQuestions::new(Recorder::default()).with_poll_events(PollEvents::Stable);
    let c = two_questions();
    let out = h
        .render(RenderArgs {
            calls: std::slice::from_ref(&c),
            req: &RequestContext::default(),
            thread: &thread(),
        })
        .await
        .unwrap();
    assert_eq!(out.len(), 1);
    // One message: the first question's poll, in the thread. (The engine takes controls only
    // from a call's current message, its last: so the questions come one at a time.)
    let ids: Vec<_> = out[0]
        .messages
        .iter()
        .map(|m| (m.id.as_str(), m.question))
        .collect();
    assert_eq!(ids, [("!r:localhost|$sent1", Some(0))]);
    let sent = sent_by(&h);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].1, "m.poll.start");
    assert_eq!(sent[0].2["m.relates_to"]["rel_type"], "m.thread");
    assert_eq!(sent[0].2["m.relates_to"]["event_id"], "$root");

    // A step posts the next question (answer ids at the new revision) as the current message.
    let req = RequestContext::default();
    let t = thread();
    let mut r = QuestionRecord {
        messages: out[0].messages.clone(),
        revision: 1,
        state: Some(json!({"picks": [["prod"], null, null]})),
    };
    let change = h
        .updated(
            HookArgs {
                call: &c,
                question: &r,
                req: &req,
                thread: &t,
            },
            None,
        )
        .await
        .unwrap()
        .expect("a new message");
    let messages = change.messages.unwrap();
    assert_eq!(
        messages.last().map(|m| (m.id.as_str(), m.question)),
        Some(("!r:localhost|$sent2", Some(1)))
    );
    let sent = sent_by(&h);
    // The poll, then (multiple choice) the bot's ✅ that sends what is picked.
    assert_eq!(sent.len(), 3, "{sent:#?}");
    assert_eq!(sent[2].1, "m.reaction");
    assert_eq!(sent[2].2["m.relates_to"]["key"], "✅");
    assert_eq!(sent[1].1, "m.poll.start");
    assert_eq!(sent[1].2["m.relates_to"]["rel_type"], "m.thread");
    assert_eq!(sent[1].2["m.poll"]["max_selections"], 3);
    assert_eq!(sent[1].2["m.poll"]["kind"], "m.disclosed");
    assert_eq!(sent[1].2["m.poll"]["answers"][2]["m.id"], "r1o2");
    let fallback = sent[1].2["m.text"][0]["body"].as_str().unwrap();
    assert!(
        fallback.starts_with("Question 2 of 3\nRegions: Which?\n1. eu\n2. us\n3. asia\n"),
        "{fallback}"
    );
    assert!(fallback.contains("own answer"), "{fallback}");

    // The last question has no options: a prompt. Asked once: the same step posts nothing more.
    r.messages = messages;
    r.revision = 2;
    r.state = Some(json!({"picks": [["prod"], ["eu"], null]}));
    let args = HookArgs {
        call: &c,
        question: &r,
        req: &req,
        thread: &t,
    };
    let messages = h
        .updated(args, None)
        .await
        .unwrap()
        .unwrap()
        .messages
        .unwrap();
    assert_eq!(messages.len(), 3);
    let sent = sent_by(&h);
    assert_eq!(sent[3].1, "m.room.message");
    assert_eq!(sent[3].2["m.relates_to"]["rel_type"], "m.thread");
    assert!(
        sent[3].2["body"]
            .as_str()
            .unwrap()
            .starts_with("Question 3 of 3\nNote: Anything else?\nReply in this thread"),
        "{sent:#?}"
    );
    r.messages = messages;
    let args = HookArgs {
        call: &c,
        question: &r,
        req: &req,
        thread: &t,
    };
    assert_eq!(h.updated(args, None).await.unwrap(), None);
    assert_eq!(sent_by(&h).len(), 4);

    // The unstable flavour.
    let h = MatrixQuestions::new(Recorder::default()).with_poll_events(PollEvents::Unstable);
    h.render(RenderArgs {
        calls: std::slice::from_ref(&c),
        req: &RequestContext::default(),
        thread: &thread(),
    })
    .await
    .unwrap();
    let sent = sent_by(&h);
    assert_eq!(sent[0].1, "org.matrix.msc3381.poll.start");
    assert_eq!(
        sent[0].2["org.matrix.msc3381.poll.start"]["answers"][1]["id"],
        "r0o1"
    );
}

#[test]
fn answers_accumulate_across_polls_numbers_and_own_text() {
    let h = MatrixQuestions::new(Recorder::default());
    let c = two_questions();
    let r = record(None);
    let ParseResult::Partial { state } = parse(&h, &c, &r, &poll("!r:localhost|$sent1", "r0o1"))
    else {
        panic!("expected partial")
    };
    let r = record(state);
    // A numbered reply goes to the first unanswered question (Regions), several allowed; labels
    // work as well as numbers.
    let ParseResult::Partial { state: by_label } = parse(&h, &c, &r, &reply("EU, asia", None))
    else {
        panic!("expected partial")
    };
    let ParseResult::Partial { state } = parse(&h, &c, &r, &reply("1 3", None)) else {
        panic!("expected partial")
    };
    assert_eq!(by_label, state);
    let r = record(state);
    // Text for the last, own-text-only question.
    let ParseResult::Answer { output } = parse(&h, &c, &r, &reply("ship it", None)) else {
        panic!("expected the answer")
    };
    let selected: Vec<Vec<String>> = output.answers.iter().map(|a| a.selected.clone()).collect();
    assert_eq!(
        selected,
        [vec!["prod"], vec!["eu", "asia"], vec!["ship it"]]
    );
}

#[test]
fn bad_picks_are_rejected_and_unknown_messages_are_stale() {
    let h = MatrixQuestions::new(Recorder::default());
    let c = two_questions();
    let r = record(None);
    assert!(
        matches!(parse(&h, &c, &r, &reply("5", None)), ParseResult::Rejected { reason } if reason.contains("1 to 2"))
    );
    assert!(
        matches!(parse(&h, &c, &r, &reply("1 2", None)), ParseResult::Rejected { reason } if reason.contains("only one"))
    );
    assert!(matches!(
        parse(&h, &c, &r, &poll("!r:localhost|$sent1", "zz")),
        ParseResult::Rejected { .. }
    ));
    assert_eq!(
        parse(&h, &c, &r, &poll("!r:localhost|$old", "o1")),
        ParseResult::Stale
    );
    // Text where the question takes no own answer is not for the question.
    assert_eq!(
        parse(&h, &c, &r, &reply("what?", None)),
        ParseResult::Ignore
    );
    // A vote taken back (no selections) changes nothing.
    assert_eq!(
        parse(&h, &c, &r, &poll("!r:localhost|$sent1", "")),
        ParseResult::Ignore
    );
    // A reply to a question's message targets that question.
    let ParseResult::Partial { state } =
        parse(&h, &c, &r, &reply("2", Some("!r:localhost|$sent2")))
    else {
        panic!("expected partial")
    };
    assert_eq!(state.unwrap()["picks"][1], json!(["us"]));
}

#[test]
fn replies_after_the_answer_reach_the_agent() {
    let h = MatrixQuestions::new(Recorder::default());
    let c = two_questions();
    // Everything answered but the last (own-text) question.
    let r = record(Some(json!({"picks": [["prod"], ["eu"], null]})));
    let settled = |i: &Interaction| {
        h.parse(ParseArgs {
            call: &c,
            interaction: i,
            question: &r,
            settled: true,
        })
    };
    // Own text, an option's number or label, a reply to a question message: after the answer,
    // all of it is the conversation going on.
    for i in [
        reply("ship it", None),
        reply("1", None),
        reply("prod", None),
        reply("2", Some("!r:localhost|$sent2")),
        reply("5", None),
    ] {
        assert_eq!(settled(&i), ParseResult::Ignore, "{i:?}");
    }
    // Poll responses are classified as before (the engine answers a match as stale).
    assert!(matches!(
        settled(&poll("!r:localhost|$sent1", "o1")),
        ParseResult::Answer { .. } | ParseResult::Partial { .. }
    ));
    // While open, the same own text answers.
    assert!(matches!(
        parse(&h, &c, &r, &reply("ship it", None)),
        ParseResult::Answer { .. }
    ));
}

#[tokio::test]
async fn settled_ends_polls_and_edits_every_message_and_notices_mention_the_person() {
    let h = MatrixQuestions::new(Recorder::default()).with_poll_events(PollEvents::Stable);
    let c = two_questions();
    let r = record(None);
    let outcome = QuestionOutcome::Answered(QuestionOutput {
        answers: vec![
            QuestionAnswer {
                header: "Env".into(),
                selected: vec!["prod".into()],
            },
            QuestionAnswer {
                header: "Regions".into(),
                selected: vec!["eu".into()],
            },
            QuestionAnswer {
                header: "Note".into(),
                selected: vec!["ok".into()],
            },
        ],
    });
    let actor = Actor {
        user: None,
        identity: Some(ChannelIdentity {
            platform: "matrix".into(),
            user: user(),
        }),
    };
    let req = RequestContext::default();
    let t = thread();
    let args = HookArgs {
        call: &c,
        question: &r,
        req: &req,
        thread: &t,
    };
    h.settled(args, outcome.by(Some(&actor))).await.unwrap();
    let sent = sent_by(&h);
    let kinds: Vec<&str> = sent.iter().map(|s| s.1.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "m.poll.end",
            "m.poll.start",
            "m.poll.end",
            "m.poll.start",
            "m.room.message"
        ]
    );
    assert_eq!(sent[0].2["m.relates_to"]["event_id"], "$sent1");
    assert_eq!(sent[1].2["m.relates_to"]["rel_type"], "m.replace");
    let new_text = sent[1].2["m.new_content"]["m.text"][0]["body"]
        .as_str()
        .unwrap();
    assert!(
        new_text.ends_with("✅ Answered by @alice:localhost: prod"),
        "{new_text}"
    );
    assert_eq!(sent[4].2["m.relates_to"]["rel_type"], "m.replace");
    assert!(
        sent[4].2["m.new_content"]["body"]
            .as_str()
            .unwrap()
            .ends_with(": ok")
    );

    h.api().clear();
    let args = HookArgs {
        call: &c,
        question: &r,
        req: &req,
        thread: &t,
    };
    h.stale(args, &reply("1", None)).await.unwrap();
    let sent = sent_by(&h);
    assert_eq!(sent[0].2["msgtype"], "m.notice");
    assert_eq!(sent[0].2["m.mentions"]["user_ids"][0], "@alice:localhost");
    assert!(
        sent[0].2["body"]
            .as_str()
            .unwrap()
            .starts_with("@alice:localhost: ")
    );
    assert_eq!(sent[0].2["m.relates_to"]["event_id"], "$root");
    assert_eq!(
        sent[0].2["m.relates_to"]["m.in_reply_to"]["event_id"],
        "$reply"
    );
}

#[tokio::test]
async fn a_step_redraws_the_open_polls_at_the_new_revision_and_old_answers_are_stale() {
    let h = MatrixQuestions::new(Recorder::default()).with_poll_events(PollEvents::Stable);
    let c = two_questions();
    let r = record(None);
    let first = poll("!r:localhost|$sent1", "r0o1");
    let ParseResult::Partial { state } = parse(&h, &c, &r, &first) else {
        panic!("expected partial")
    };
    let mut r = record(state);
    r.revision = 1;
    let req = RequestContext::default();
    let t = thread();
    let args = HookArgs {
        call: &c,
        question: &r,
        req: &req,
        thread: &t,
    };
    assert_eq!(h.updated(args, Some(&first)).await.unwrap(), None);
    // Only the poll still open (Regions) is redrawn; the prompt without options is not.
    let sent = sent_by(&h);
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(sent[0].2["m.relates_to"]["rel_type"], "m.replace");
    assert_eq!(sent[0].2["m.relates_to"]["event_id"], "$sent2");
    assert_eq!(
        sent[0].2["m.new_content"]["m.poll"]["answers"][2]["m.id"],
        "r1o2"
    );
    // The first poll's answers are of revision 0 now: stale; a reaction there too.
    assert_eq!(parse(&h, &c, &r, &first), ParseResult::Stale);
    assert_eq!(
        parse(&h, &c, &r, &poll("!r:localhost|$sent2", "r0o0")),
        ParseResult::Stale
    );
    let mut reaction = poll("!r:localhost|$sent1", "1\u{fe0f}\u{20e3}");
    if let Interaction::Action { event } = &mut reaction {
        event.action_id = "reaction".into();
    }
    assert_eq!(parse(&h, &c, &r, &reaction), ParseResult::Stale);
    assert!(matches!(
        parse(&h, &c, &r, &poll("!r:localhost|$sent2", "r1o0,r1o2")),
        ParseResult::Partial { .. }
    ));
}

#[tokio::test]
async fn long_texts_are_cut_and_more_than_20_options_are_a_numbered_list() {
    let h = MatrixQuestions::new(Recorder::default()).with_poll_events(PollEvents::Stable);
    let long = |n: usize| "é".repeat(n);
    let c = call(
        json!({"questions": [{"header": "H", "question": long(5_000),
        "options": (0..20).map(|i| json!({"label": format!("{i}{}", long(500)), "description": long(500)})).collect::<Vec<_>>()}]}),
    );
    h.render(RenderArgs {
        calls: std::slice::from_ref(&c),
        req: &RequestContext::default(),
        thread: &thread(),
    })
    .await
    .unwrap();
    let sent = sent_by(&h);
    let content = &sent[0].2;
    assert!(serde_json::to_vec(content).unwrap().len() < 30_000);
    let label = content["m.poll"]["answers"][0]["m.text"][0]["body"]
        .as_str()
        .unwrap();
    assert!(
        label.chars().count() <= frogbot_matrix::render::ANSWER_CHARS && label.ends_with('…'),
        "{label}"
    );

    let c = call(json!({"questions": [{"header": "H", "question": "?",
        "options": (0..21).map(|i| json!({"label": format!("o{i}")})).collect::<Vec<_>>()}]}));
    // No longer refused (MSC3381 allows 20 answers): a message listing every option, numbered.
    h.render(RenderArgs {
        calls: std::slice::from_ref(&c),
        req: &RequestContext::default(),
        thread: &thread(),
    })
    .await
    .unwrap();
    let sent = sent_by(&h);
    let last = sent.last().unwrap();
    assert_eq!(last.1, "m.room.message");
    let body = last.2["body"].as_str().unwrap();
    assert!(body.contains("\n21. o20\n"), "{body}");
    assert!(
        body.contains("Reply in this thread with the number"),
        "{body}"
    );
}

fn options(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| json!({"label": format!("Option **{i}**"), "description": format!("about `{i}`")}))
        .collect()
}

#[tokio::test]
async fn polls_are_unstable_by_default_with_a_plain_body_and_lists_past_20_options() {
    for (n, poll) in [(1, true), (20, true), (21, false), (30, false)] {
        let h = MatrixQuestions::new(Recorder::default());
        let c = call(
            json!({"questions": [{"header": "Pick", "question": "Which **one**?",
            "options": options(n)}]}),
        );
        h.render(RenderArgs {
            calls: std::slice::from_ref(&c),
            req: &RequestContext::default(),
            thread: &thread(),
        })
        .await
        .unwrap();
        let sent = sent_by(&h);
        let content = &sent[0].2;
        let body = content["body"].as_str().unwrap_or_default();
        // Every option is listed in the plain body, numbered, with its description, Markdown
        // as plain text.
        for i in 0..n {
            assert!(
                body.contains(&format!("\n{}. Option {i} — about {i}", i + 1)),
                "{n}: {body}"
            );
        }
        assert!(body.starts_with("Pick: Which one?\n"), "{body}");
        assert!(!body.contains("**") && !body.contains('`'), "{body}");
        if poll {
            assert_eq!(sent[0].1, "org.matrix.msc3381.poll.start", "{n}");
            let block = &content["org.matrix.msc3381.poll.start"];
            assert_eq!(
                block["question"]["org.matrix.msc1767.text"],
                "Pick: Which one?"
            );
            assert_eq!(block["answers"].as_array().unwrap().len(), n);
            assert_eq!(
                block["answers"][0]["org.matrix.msc1767.text"],
                "Option 0 — about 0"
            );
            assert_eq!(content["org.matrix.msc1767.text"], content["body"]);
            assert!(body.contains("reply in this thread with it"), "{body}");
        } else {
            assert_eq!(sent[0].1, "m.room.message", "{n}");
            assert!(
                body.contains("Reply in this thread with the number."),
                "{body}"
            );
            assert!(
                content["formatted_body"]
                    .as_str()
                    .unwrap()
                    .contains("<b>Pick</b>: Which <strong>one</strong>?"),
                "{content}"
            );
        }
    }
    // The stable flavour carries the body too.
    let h = MatrixQuestions::new(Recorder::default()).with_poll_events(PollEvents::Stable);
    let c =
        call(json!({"questions": [{"header": "Pick", "question": "?", "options": options(2)}]}));
    h.render(RenderArgs {
        calls: std::slice::from_ref(&c),
        req: &RequestContext::default(),
        thread: &thread(),
    })
    .await
    .unwrap();
    let sent = sent_by(&h);
    assert_eq!(sent[0].1, "m.poll.start");
    assert!(
        sent[0].2["body"]
            .as_str()
            .unwrap()
            .contains("\n2. Option 1")
    );
}

#[test]
fn thirty_options_are_answered_by_number() {
    let h = MatrixQuestions::new(Recorder::default());
    let c = call(
        json!({"questions": [{"header": "Pick", "question": "?", "multiple": true,
        "options": options(30)}]}),
    );
    let r = QuestionRecord {
        messages: vec![QuestionMessage {
            id: "!r:localhost|$sent1".into(),
            posted_at: String::new(),
            question: Some(0),
        }],
        revision: 0,
        state: None,
    };
    let ParseResult::Answer { output } = parse(&h, &c, &r, &reply("30 21", None)) else {
        panic!("expected the answer")
    };
    assert_eq!(
        output.answers[0].selected,
        ["Option **29**", "Option **20**"]
    );
    assert!(matches!(
        parse(&h, &c, &r, &reply("31", None)),
        ParseResult::Rejected { reason } if reason.contains("1 to 30")
    ));
}

fn regions() -> QuestionCall {
    call(json!({"questions": [
        {"header": "Regions", "question": "Which?", "multiple": true,
         "options": [{"label": "eu"}, {"label": "us"}, {"label": "asia"}]},
        {"header": "Note", "question": "Anything else?", "custom": true, "options": []}
    ]}))
}

fn one_poll(revision: u64, state: Option<Value>) -> QuestionRecord {
    QuestionRecord {
        messages: vec![QuestionMessage {
            id: "!r:localhost|$sent1".into(),
            posted_at: String::new(),
            question: Some(0),
        }],
        revision,
        state,
    }
}

#[tokio::test]
async fn a_multiple_choice_poll_takes_the_clicks_as_element_sends_them_until_done() {
    let h = MatrixQuestions::new(Recorder::default());
    let c = regions();
    // Element sends the whole selection at every click: [eu], then [eu, asia].
    let mut r = one_poll(0, None);
    let ParseResult::Partial { state } = parse(&h, &c, &r, &poll("!r:localhost|$sent1", "r0o0"))
    else {
        panic!("a click is no answer yet")
    };
    assert_eq!(state.as_ref().unwrap()["checked"][0], json!([0]));
    // The engine bumps the revision and calls updated: the poll with a selection is not redrawn
    // (an edit would clear the selection Element shows), and no next question is posted.
    r = one_poll(1, state);
    let req = RequestContext::default();
    let t = thread();
    let change = h
        .updated(
            HookArgs {
                call: &c,
                question: &r,
                req: &req,
                thread: &t,
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(change, None);
    assert!(sent_by(&h).is_empty(), "{:#?}", sent_by(&h));
    // The next click, still with the answer ids drawn at revision 0, is taken.
    let ParseResult::Partial { state } =
        parse(&h, &c, &r, &poll("!r:localhost|$sent1", "r0o0,r0o2"))
    else {
        panic!("a second click is no answer yet")
    };
    assert_eq!(state.as_ref().unwrap()["checked"][0], json!([0, 2]));
    let r = one_poll(2, state);
    // Ids of another revision are stale.
    assert_eq!(
        parse(&h, &c, &r, &poll("!r:localhost|$sent1", "r1o1")),
        ParseResult::Stale
    );
    // "done" (or ✅ on the poll) sends the selection.
    for done in [
        reply("done", None),
        reply("Done", Some("!r:localhost|$sent1")),
    ] {
        let ParseResult::Partial { state } = parse(&h, &c, &r, &done) else {
            panic!("expected the first answer of two")
        };
        assert_eq!(state.unwrap()["picks"][0], json!(["eu", "asia"]));
    }
    let check = Interaction::Action {
        event: frogbot_model::ActionEvent {
            action_id: "reaction".into(),
            value: Some("✅".into()),
            message_id: "!r:localhost|$sent1".into(),
            user: user(),
            trigger_id: None,
            raw: Value::Null,
        },
    };
    let ParseResult::Partial { state } = parse(&h, &c, &r, &check) else {
        panic!("expected the first answer of two")
    };
    assert_eq!(state.unwrap()["picks"][0], json!(["eu", "asia"]));
    // Done with nothing picked is refused, saying what to do.
    assert!(matches!(
        parse(&h, &c, &one_poll(0, None), &reply("done", None)),
        ParseResult::Rejected { reason } if reason.contains("pick one or more")
    ));
    // A single-choice poll still answers on the first vote.
    let single = call(json!({"questions": [{"header": "Env", "question": "?",
        "options": [{"label": "a"}, {"label": "b"}]}]}));
    assert!(matches!(
        parse(
            &h,
            &single,
            &one_poll(0, None),
            &poll("!r:localhost|$sent1", "r0o1")
        ),
        ParseResult::Answer { .. }
    ));
}

#[tokio::test]
async fn settled_texts_say_how_it_ended_and_sets_say_question_i_of_n() {
    let h = MatrixQuestions::new(Recorder::default());
    let c = call(json!({"questions": [
        {"header": "Env", "question": "Release **v1.4** where?", "options": [{"label": "staging"}, {"label": "prod"}]},
        {"header": "Notify", "question": "Tell them?", "kind": "toggle", "label": "Notify the team"},
        {"header": "Pods", "question": "How many?", "kind": "number_input"},
        {"header": "Why", "question": "Reason?", "kind": "text_input"}
    ]}));
    h.render(RenderArgs {
        calls: std::slice::from_ref(&c),
        req: &RequestContext::default(),
        thread: &thread(),
    })
    .await
    .unwrap();
    let sent = sent_by(&h);
    let block = &sent[0].2["org.matrix.msc3381.poll.start"];
    assert_eq!(
        block["question"]["org.matrix.msc1767.text"],
        "Question 1 of 4 — Env: Release v1.4 where?"
    );
    assert!(
        sent[0].2["body"]
            .as_str()
            .unwrap()
            .starts_with("Question 1 of 4\nEnv: Release v1.4 where?\n1. staging"),
        "{sent:#?}"
    );
    let r = QuestionRecord {
        messages: (0..4)
            .map(|q| QuestionMessage {
                id: format!("!r:localhost|$sent{}", q + 1),
                posted_at: String::new(),
                question: Some(q),
            })
            .collect(),
        revision: 3,
        state: None,
    };
    let outcome = QuestionOutcome::Answered(QuestionOutput {
        answers: [
            ("Env", "prod"),
            ("Notify", "off"),
            ("Pods", "3"),
            ("Why", "x"),
        ]
        .iter()
        .map(|(h, a)| QuestionAnswer {
            header: (*h).into(),
            selected: vec![(*a).into()],
        })
        .collect(),
    });
    let req = RequestContext::default();
    let t = thread();
    h.settled(
        HookArgs {
            call: &c,
            question: &r,
            req: &req,
            thread: &t,
        },
        outcome.by(None),
    )
    .await
    .unwrap();
    let sent = sent_by(&h);
    let edits: Vec<&Value> = sent
        .iter()
        .filter(|s| s.2["m.relates_to"]["rel_type"] == "m.replace")
        .map(|s| &s.2)
        .collect();
    assert_eq!(edits.len(), 4);
    for e in &edits {
        let body = e["m.new_content"]["body"].as_str().unwrap();
        assert!(
            !body.contains("Vote in the poll") && !body.contains("Reply"),
            "{body}"
        );
        assert!(!body.contains("skip"), "{body}");
    }
    assert!(
        edits[1]["m.new_content"]["body"]
            .as_str()
            .unwrap()
            .ends_with("\n✅ Answered: Notify the team — off"),
        "{:#}",
        edits[1]
    );
    assert!(
        edits[0]["m.new_content"]["body"]
            .as_str()
            .unwrap()
            .ends_with("\n2. prod\n✅ Answered: prod"),
        "{:#}",
        edits[0]
    );
}

fn kinds_call() -> QuestionCall {
    call(json!({"questions": [
        {"header": "Go", "question": "Deploy?", "kind": "confirm", "label": "Approve", "danger": true},
        {"header": "Pods", "question": "How many?", "kind": "number_input", "min": 1, "max": 10,
         "unit": "pods", "required": false},
        {"header": "Notify", "question": "Tell the team?", "kind": "toggle"}
    ]}))
}

fn reaction(message: &str, key: &str) -> Interaction {
    let mut i = poll(message, key);
    if let Interaction::Action { event } = &mut i {
        event.action_id = "reaction".into();
    }
    i
}

#[test]
fn reactions_and_replies_answer_the_other_kinds_and_say_what_is_wanted() {
    let h = MatrixQuestions::new(Recorder::default());
    let c = kinds_call();
    let r = record(None);
    let partial = |p: ParseResult| match p {
        ParseResult::Partial { state } => state.unwrap(),
        other => panic!("expected partial, got {other:?}"),
    };
    // ✅ on the confirm answers it with its label; another key is not for the question.
    let state = partial(parse(&h, &c, &r, &reaction("!r:localhost|$sent1", "✅")));
    assert_eq!(state["picks"][0], json!(["Approve"]));
    assert_eq!(
        parse(&h, &c, &r, &reaction("!r:localhost|$sent1", "🎉")),
        ParseResult::Ignore
    );
    // A keycap is no answer to a confirm; a poll response neither.
    assert_eq!(
        parse(
            &h,
            &c,
            &r,
            &reaction("!r:localhost|$sent1", "1\u{fe0f}\u{20e3}")
        ),
        ParseResult::Ignore
    );
    // Addressed to the confirm, "no" is told what is wanted; in the thread it is chatter.
    assert_eq!(
        parse(&h, &c, &r, &reply("no", Some("!r:localhost|$sent1"))),
        ParseResult::Rejected {
            reason: "reply \"Approve\" to confirm, or skip to skip.".into()
        }
    );
    assert_eq!(parse(&h, &c, &r, &reply("no", None)), ParseResult::Ignore);

    let r = record(Some(state));
    // ✅ again on the answered confirm is out of date.
    assert_eq!(
        parse(&h, &c, &r, &reaction("!r:localhost|$sent1", "✅")),
        ParseResult::Stale
    );
    // The number: out of range and not a number, with the reason; `-` leaves it (optional) empty.
    assert_eq!(
        parse(&h, &c, &r, &reply("0", None)),
        ParseResult::Rejected {
            reason: "enter a number from 1 to 10.".into()
        }
    );
    assert_eq!(
        parse(&h, &c, &r, &reply("lots", Some("!r:localhost|$sent2"))),
        ParseResult::Rejected {
            reason: "enter a number from 1 to 10.".into()
        }
    );
    let state = partial(parse(&h, &c, &r, &reply("-", None)));
    assert_eq!(state["picks"][1], json!([]));
    let r = record(Some(state));
    // The toggle: ❌ is off, 👍 on; the last answer completes the set.
    for (key, value) in [("❌", "off"), ("👍", "on")] {
        let ParseResult::Answer { output } =
            parse(&h, &c, &r, &reaction("!r:localhost|$sent3", key))
        else {
            panic!("expected the answer")
        };
        assert_eq!(output.answers[2].selected, [value]);
        assert!(output.answers[1].selected.is_empty());
        c.input.check_output(&output).unwrap();
    }
    assert_eq!(
        parse(&h, &c, &r, &reply("maybe", Some("!r:localhost|$sent3"))),
        ParseResult::Rejected {
            reason: "reply yes or no.".into()
        }
    );
}

#[tokio::test]
async fn kinds_are_messages_with_hints_and_reactions_and_long_questions_keep_the_hint() {
    let h = MatrixQuestions::new(Recorder::default());
    let mut c = kinds_call();
    c.input.questions[0].question = "<b>why</b> ".repeat(1_000);
    c.expires_at = Some("2099-01-01T14:05:00Z".into());
    h.render(RenderArgs {
        calls: std::slice::from_ref(&c),
        req: &RequestContext::default(),
        thread: &thread(),
    })
    .await
    .unwrap();
    let sent = sent_by(&h);
    // The confirm's message, then the bot's ✅ on it.
    assert_eq!(sent.len(), 2, "{sent:#?}");
    let content = &sent[0].2;
    assert_eq!(sent[0].1, "m.room.message");
    let body = content["body"].as_str().unwrap();
    assert!(
        body.starts_with("Question 1 of 3\n⚠️ Go: <b>why</b>"),
        "{body}"
    );
    assert!(
        body.ends_with(
            "…\nReact ✅, or reply \"Approve\" to confirm.\nopen until 1 Jan 14:05 UTC\nReply skip to skip this question."
        ),
        "{body}"
    );
    assert!(body.chars().count() <= frogbot_matrix::render::FALLBACK_CHARS);
    let html = content["formatted_body"].as_str().unwrap();
    assert!(
        html.starts_with("<i>Question 1 of 3</i><br>⚠️ <b>Go</b>: &lt;b&gt;why&lt;/b&gt;"),
        "{html}"
    );
    assert!(
        html.ends_with(
            "<br><i>open until 1 Jan 14:05 UTC</i><br>Reply skip to skip this question."
        ),
        "{html}"
    );
    assert!(serde_json::to_vec(content).unwrap().len() < 40_000);
    assert_eq!(sent[1].1, "m.reaction");
    assert_eq!(
        sent[1].2,
        json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": "$sent1", "key": "✅"}})
    );
}

#[tokio::test]
async fn a_huge_list_stays_under_the_event_limit_and_keeps_how_to_answer() {
    // 300 options, each with a label and a description past their limits, in 4-byte characters.
    let h = MatrixQuestions::new(Recorder::default());
    let options: Vec<Value> = (0..300)
        .map(|i| json!({"label": format!("{i}{}", "😀".repeat(150)), "description": "😀".repeat(300)}))
        .collect();
    let c = call(json!({"questions": [{"header": "Pick", "question": "?", "options": options}]}));
    h.render(RenderArgs {
        calls: std::slice::from_ref(&c),
        req: &RequestContext::default(),
        thread: &thread(),
    })
    .await
    .unwrap();
    let sent = sent_by(&h);
    // Every option is shown, numbered, in messages before the question, none past the limit.
    let (pages, question) = sent.split_at(sent.len() - 1);
    assert!(pages.len() > 10, "{}", pages.len());
    let listed: String = pages
        .iter()
        .map(|p| {
            assert!(serde_json::to_vec(&p.2).unwrap().len() < 65_536);
            p.2["body"].as_str().unwrap().to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n");
    for i in 1..=300 {
        assert!(listed.contains(&format!("\n{i}. {}", i - 1)), "{i}");
    }
    let content = &question[0].2;
    assert!(serde_json::to_vec(content).unwrap().len() < 65_536);
    let body = content["body"].as_str().unwrap();
    assert!(body.chars().count() <= frogbot_matrix::render::LIST_CHARS);
    assert!(
        body.contains(&format!(
            "(The 300 options are listed, numbered, in the {} messages above.)",
            pages.len()
        )),
        "{body}"
    );
    assert!(
        body.ends_with("Reply in this thread with the number.\nReply skip to skip this question.")
    );
    // A number past what the text could show still answers.
    let r = QuestionRecord {
        messages: vec![QuestionMessage {
            id: "!r:localhost|$sent1".into(),
            posted_at: String::new(),
            question: Some(0),
        }],
        revision: 0,
        state: None,
    };
    assert!(matches!(
        parse(&h, &c, &r, &reply("300", None)),
        ParseResult::Answer { .. }
    ));
}
