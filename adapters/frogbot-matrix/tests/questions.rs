//! `MatrixQuestions` over a recording `MatrixApi`: what render sends (polls in the thread, numbered
//! fallback), how parse reads poll responses, reactions and thread replies, and what settled and
//! the notices send. (The same hooks run against a real Synapse in tests/synapse.rs.)

use std::sync::Mutex;

use async_trait::async_trait;
use frogbot_core::model::{
    ActionEvent, Actor, ChannelIdentity, ChannelQuestions, HookArgs, Interaction, ParseArgs,
    ParseResult, PlatformUser, QuestionAnswer, QuestionCall, QuestionInput, QuestionMessage,
    QuestionOutcome, QuestionOutput, QuestionRecord, RenderArgs, RequestContext, Thread,
    ThreadMessage, ThreadMessageMetadata,
};
use frogbot_matrix::render::PollEvents;
use frogbot_matrix::{Error, MatrixApi, MatrixQuestions};
use matrix_sdk::ruma::{OwnedEventId, RoomId};
use serde_json::{Value, json};

#[derive(Default)]
struct Recorder {
    sent: Mutex<Vec<(String, String, Value)>>,
}

#[async_trait]
impl MatrixApi for Recorder {
    async fn send(
        &self,
        room: &RoomId,
        event_type: &str,
        content: Value,
    ) -> Result<OwnedEventId, Error> {
        let mut s = self.sent.lock().unwrap();
        s.push((room.to_string(), event_type.to_owned(), content));
        Ok(format!("$sent{}", s.len()).try_into().unwrap())
    }
}

fn call(q: Value) -> QuestionCall {
    QuestionCall {
        tool_call_id: "c1".into(),
        input: serde_json::from_value::<QuestionInput>(q).unwrap(),
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
async fn render_posts_a_poll_per_question_in_the_thread_and_a_prompt_for_own_text() {
    let h = MatrixQuestions::new(Recorder::default());
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
    let ids: Vec<_> = out[0]
        .messages
        .iter()
        .map(|m| (m.id.as_str(), m.question))
        .collect();
    assert_eq!(
        ids,
        [
            ("!r:localhost|$sent1", Some(0)),
            ("!r:localhost|$sent2", Some(1)),
            ("!r:localhost|$sent3", Some(2))
        ]
    );
    let sent = h.api().sent.lock().unwrap().clone();
    assert_eq!(sent[0].1, "m.poll.start");
    assert_eq!(sent[0].2["m.relates_to"]["rel_type"], "m.thread");
    assert_eq!(sent[0].2["m.relates_to"]["event_id"], "$root");
    assert_eq!(sent[1].2["m.poll"]["max_selections"], 3);
    assert_eq!(sent[1].2["m.poll"]["kind"], "m.disclosed");
    let fallback = sent[1].2["m.text"][0]["body"].as_str().unwrap();
    assert!(
        fallback.starts_with("Regions: Which?\n1. eu\n2. us\n3. asia\n"),
        "{fallback}"
    );
    assert!(fallback.contains("own answer"), "{fallback}");
    assert_eq!(sent[2].1, "m.room.message");
    assert_eq!(sent[2].2["m.relates_to"]["rel_type"], "m.thread");

    // The unstable flavour.
    let h = MatrixQuestions::new(Recorder::default()).with_poll_events(PollEvents::Unstable);
    h.render(RenderArgs {
        calls: std::slice::from_ref(&c),
        req: &RequestContext::default(),
        thread: &thread(),
    })
    .await
    .unwrap();
    let sent = h.api().sent.lock().unwrap().clone();
    assert_eq!(sent[0].1, "org.matrix.msc3381.poll.start");
    assert_eq!(
        sent[0].2["org.matrix.msc3381.poll.start"]["answers"][1]["id"],
        "o1"
    );
}

#[test]
fn answers_accumulate_across_polls_numbers_and_own_text() {
    let h = MatrixQuestions::new(Recorder::default());
    let c = two_questions();
    let r = record(None);
    let ParseResult::Partial { state } = parse(&h, &c, &r, &poll("!r:localhost|$sent1", "o1"))
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
    let h = MatrixQuestions::new(Recorder::default());
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
    h.settled(args, Some(&actor), &outcome).await.unwrap();
    let sent = h.api().sent.lock().unwrap().clone();
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

    h.api().sent.lock().unwrap().clear();
    let args = HookArgs {
        call: &c,
        question: &r,
        req: &req,
        thread: &t,
    };
    h.stale(args, &reply("1", None)).await.unwrap();
    let sent = h.api().sent.lock().unwrap().clone();
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
