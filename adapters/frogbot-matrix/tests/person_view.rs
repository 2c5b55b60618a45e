//! What a person sees of questions in a thread (`FakeHomeserver::person_view`): the question
//! messages after edits, their reactions, polls and notifications, and the plain `body` a client
//! that renders no poll shows — for each input kind, a 30-option question, a four-question set, a
//! multiple choice answered by clicks as Element sends them, and an approval.

#![recursion_limit = "256"]

use frogbot_matrix::testing::{SeenMessage, assert_golden, conformance_harness, transcript};
use frogbot_model::conformance::Harness;
use frogbot_model::{QuestionCall, QuestionInput, RenderArgs, RequestContext};
use matrix_sdk::ruma::UserId;
use serde_json::{Value, json};

fn call(input: Value) -> QuestionCall {
    QuestionCall {
        tool_call_id: "c1".into(),
        input: serde_json::from_value::<QuestionInput>(input).unwrap(),
        expires_at: None,
    }
}

/// Compares `seen` with `tests/golden/person_view/NAME.txt`.
fn golden(h: &frogbot_matrix::testing::MatrixHarness, name: &str, seen: &[SeenMessage]) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/person_view")
        .join(format!("{name}.txt"));
    assert_golden(&path, &transcript(seen, h.fake().bot().as_str()));
}

/// Renders `input` in a fresh thread; returns the harness, the thread id and what a person sees.
async fn shown(
    input: Value,
) -> (
    frogbot_matrix::testing::MatrixHarness,
    String,
    Vec<SeenMessage>,
) {
    let h = conformance_harness().await;
    let thread = h.thread().await;
    let c = call(input);
    h.hooks()
        .render(RenderArgs {
            calls: std::slice::from_ref(&c),
            req: &RequestContext::default(),
            thread: &thread,
        })
        .await
        .unwrap();
    let seen = h.fake().person_view(&thread.id);
    (h, thread.id, seen)
}

#[tokio::test]
async fn every_kind_shows_a_question_one_can_answer_even_without_polls() {
    let kinds = [
        json!({"header": "Env", "question": "Release **v1.4** where?",
               "options": [{"label": "staging", "description": "the *test* cluster"}, {"label": "prod"}]}),
        json!({"header": "Go", "question": "Deploy?", "kind": "confirm", "label": "Approve"}),
        json!({"header": "Notify", "question": "Tell them?", "kind": "toggle", "label": "Notify the team"}),
        json!({"header": "Pods", "question": "How many?", "kind": "number_input", "min": 1, "max": 9}),
        json!({"header": "Why", "question": "Reason?", "kind": "text_input"}),
    ];
    for (kind, name) in kinds.into_iter().zip([
        "kind_choice",
        "kind_confirm",
        "kind_toggle",
        "kind_number",
        "kind_text",
    ]) {
        let (h, _, seen) = shown(json!({"questions": [kind]})).await;
        golden(&h, name, &seen);
        // The root, then the question.
        assert_eq!(seen.len(), 2, "{seen:#?}");
        let q = &seen[1];
        assert_eq!(q.sender, h.fake().bot().as_str());
        assert!(q.notified && !q.edited, "{q:#?}");
        let body = q
            .fallback
            .as_deref()
            .expect("a plain body every client shows");
        assert!(
            body.ends_with("Reply skip to skip this question."),
            "{body}"
        );
        assert!(!body.contains("**") && !body.contains('*'), "{body}");
        if let Some(poll) = &q.poll {
            assert_eq!(poll.question, "Env: Release v1.4 where?");
            assert_eq!(poll.answers, ["staging — the test cluster", "prod"]);
            assert_eq!(poll.max_selections, 1);
            assert!(
                body.contains("\n1. staging — the test cluster\n2. prod\n"),
                "{body}"
            );
            assert!(body.contains("reply in this thread with it"), "{body}");
        } else {
            assert!(body.contains("reply") || body.contains("Reply"), "{body}");
        }
    }
}

#[tokio::test]
async fn a_thirty_option_question_is_a_numbered_list_answered_by_number() {
    let options: Vec<Value> = (1..=30)
        .map(|i| json!({"label": format!("opt{i}")}))
        .collect();
    let (h, _, seen) = shown(
        json!({"questions": [{"header": "Pick", "question": "Which?",
        "options": options}]}),
    )
    .await;
    golden(&h, "thirty_options", &seen);
    let q = &seen[1];
    assert!(q.poll.is_none());
    let body = q.fallback.as_deref().unwrap();
    for i in 1..=30 {
        assert!(body.contains(&format!("\n{i}. opt{i}")), "{body}");
    }
    assert!(
        body.contains("Reply in this thread with the number."),
        "{body}"
    );
}

#[tokio::test]
async fn each_question_of_a_four_question_set_says_where_it_stands() {
    let (h, _, seen) = shown(json!({"questions": [
        {"header": "A", "question": "a?", "options": [{"label": "x"}, {"label": "y"}]},
        {"header": "B", "question": "b?", "kind": "toggle"},
        {"header": "C", "question": "c?", "kind": "text_input"},
        {"header": "D", "question": "d?", "kind": "confirm"}
    ]}))
    .await;
    golden(&h, "four_question_set", &seen);
    let q = &seen[1];
    assert_eq!(q.poll.as_ref().unwrap().question, "Question 1 of 4 — A: a?");
    assert!(
        q.fallback
            .as_deref()
            .unwrap()
            .starts_with("Question 1 of 4\nA: a?")
    );
}

#[tokio::test]
async fn a_multiple_choice_poll_shows_the_clicks_and_a_check_to_send_them() {
    let (h, _, seen) = shown(
        json!({"questions": [{"header": "Regions", "question": "Which?",
        "multiple": true, "options": [{"label": "eu"}, {"label": "us"}, {"label": "asia"}]}]}),
    )
    .await;
    let q = &seen[1];
    assert_eq!(q.poll.as_ref().unwrap().max_selections, 3);
    let body = q.fallback.as_deref().unwrap();
    assert!(body.contains("then reply done or react ✅"), "{body}");
    // The bot's ✅ to tap once done.
    let message = format!("{}|{}", h.room(), q.id);
    h.fake()
        .wait_for(h.room(), 10, "the bot's ✅", |_| {
            h.fake().bot_reactions(&message) == ["✅"]
        })
        .await;
    // Element sends the whole selection at every click.
    let ada = UserId::parse("@ada:fake.test").unwrap();
    let answers = &h.fake().open_answers(&message);
    for picked in [vec![0], vec![0, 2]] {
        let ids: Vec<&str> = picked.iter().map(|&i| answers[i].0.as_str()).collect();
        h.fake().inject(
            h.room(),
            &ada,
            "org.matrix.msc3381.poll.response",
            json!({"org.matrix.msc3381.poll.response": {"answers": ids},
                   "m.relates_to": {"rel_type": "m.reference", "event_id": q.id}}),
        );
    }
    let thread = format!("{}|{}", h.room(), seen[0].id);
    let seen = h.fake().person_view(&thread);
    golden(&h, "multiple_choice_clicks", &seen);
    let poll = seen[1].poll.as_ref().unwrap();
    assert_eq!(
        poll.votes,
        [(ada.to_string(), vec!["eu".to_owned(), "asia".to_owned()])]
    );
    assert_eq!(poll.ended, None);
}

#[tokio::test]
async fn an_approval_shows_its_arguments_as_text_not_markdown() {
    let input = frogbot_model::approval_question("shell", &json!({"command": "ls -la"}), &[], None);
    let (h, _, seen) = shown(serde_json::to_value(input).unwrap()).await;
    golden(&h, "approval", &seen);
    let q = seen.last().unwrap();
    let text = match &q.poll {
        Some(p) => p.question.clone(),
        None => q.fallback.clone().unwrap(),
    };
    assert!(!text.contains("```") && !text.contains('`'), "{text}");
    assert!(text.contains("ls -la"), "{text}");
    assert!(q.fallback.as_deref().unwrap().contains("ls -la"));
}

#[tokio::test]
async fn a_settled_toggle_says_who_by_display_name_its_label_and_off() {
    use frogbot_model::{
        Actor, ChannelIdentity, HookArgs, PlatformUser, QuestionAnswer, QuestionMessage,
        QuestionOutcome, QuestionOutput, QuestionRecord,
    };
    let h = conformance_harness().await;
    let thread = h.thread().await;
    let c = call(
        json!({"questions": [{"header": "Notify", "question": "Tell them?",
        "kind": "toggle", "label": "Notify the team"}]}),
    );
    let rendered = h
        .hooks()
        .render(RenderArgs {
            calls: std::slice::from_ref(&c),
            req: &RequestContext::default(),
            thread: &thread,
        })
        .await
        .unwrap();
    let ada = UserId::parse("@ada:fake.test").unwrap();
    h.fake().set_display_name(h.room(), &ada, "Ada");
    let record = QuestionRecord {
        messages: rendered[0].messages.clone(),
        revision: 0,
        state: None,
    };
    let _: &[QuestionMessage] = &record.messages;
    let actor = Actor {
        user: None,
        identity: Some(ChannelIdentity {
            platform: "matrix".into(),
            user: PlatformUser {
                id: ada.to_string(),
                name: None,
                is_bot: false,
            },
        }),
    };
    let outcome = QuestionOutcome::Answered(QuestionOutput {
        answers: vec![QuestionAnswer {
            header: "Notify".into(),
            selected: vec!["off".into()],
        }],
    });
    h.hooks()
        .settled(
            HookArgs {
                call: &c,
                question: &record,
                req: &RequestContext::default(),
                thread: &thread,
            },
            outcome.by(Some(&actor)),
        )
        .await
        .unwrap();
    let seen = h.fake().person_view(&thread.id);
    golden(&h, "toggle_settled_off", &seen);
    let q = &seen[1];
    assert!(q.edited, "{q:#?}");
    let body = q.fallback.as_deref().unwrap();
    assert_eq!(
        body,
        "Notify: Tell them?\n✅ Answered by Ada: Notify the team — off"
    );
}

/// A question with what it is about (issue 40), asked by FrogBot's engine (which posts a
/// question's display blocks before the question): the diff and the table come first, then the
/// question; Ada reacts ✅ (Matrix's Approve) and the question reads answered.
#[cfg(feature = "engine")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_beside_a_diff() {
    use frogbot_channel::Adapter;
    use frogbot_core::agent::scripted::{ScriptedModel, call as tool_call, reply};
    use frogbot_core::agent::{ModelMessage, ModelRequest};
    use frogbot_matrix::channel::{Config, Login, connect};
    use frogbot_matrix::testing::{BOT_PASSWORD, FakeHomeserver};
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    const WAIT: u64 = 30;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeHomeserver::start().await;
    let ada = UserId::parse("@ada:fake.test").unwrap();
    let room = fake.create_room(&[&ada]);
    fake.set_display_name(&room, &ada, "Ada");
    // The model asks the "review" question; its result is answered "got: <result>".
    let model = ScriptedModel::new(|req: &ModelRequest| {
        if let Some(ModelMessage::Tool { content, .. }) = req.messages.last() {
            return reply(&format!("got: {content}"));
        }
        tool_call(
            "q1",
            "question",
            json!({"questions": [{"header": "Go", "question": "Scale the API?",
                "kind": "confirm", "label": "Approve"}],
            "blocks": [
                {"type": "code", "language": "diff", "code": "- replicas: 3\n+ replicas: 4"},
                {"type": "table", "columns": ["service", "pods"], "rows": [["api", 3]]}
            ]}),
        )
    });
    let store = tempfile::tempdir().unwrap();
    let adapter = connect(Config::new(
        fake.url(),
        fake.bot().to_owned(),
        Login::Password(BOT_PASSWORD.into()),
        store.path(),
    ))
    .await
    .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let engine = frogbot_testkit::engine_with(frogbot_testkit::open_store(&db.url).await, model)
        .with_channel(adapter.channel());
    let shutdown = CancellationToken::new();
    let worker = engine.spawn_worker(Duration::from_millis(100));
    let task = adapter
        .start(engine.handle(), shutdown.clone())
        .expect("a sync loop");

    let said = fake.inject(
        &room,
        &ada,
        "m.room.message",
        json!({"msgtype": "m.text", "body": "please review"}),
    );
    let thread = format!("{room}|{said}");
    let bot = fake.bot().as_str().to_owned();
    let card = fake
        .wait_for(&room, WAIT, "the question", |e| {
            e["sender"] == bot.as_str()
                && e["content"]["body"]
                    .as_str()
                    .is_some_and(|b| b.contains("Scale the API?"))
        })
        .await;
    let card_id = format!("{room}|{}", card["event_id"].as_str().unwrap());
    // The engine knows the question by its message, and its ✅ to tap is placed.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(WAIT);
    while engine
        .channels()
        .form_target("matrix", &card_id)
        .await
        .unwrap()
        .is_none()
        || fake.bot_reactions(&card_id) != ["✅"]
    {
        assert!(tokio::time::Instant::now() < deadline, "the question known");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seen = fake.person_view(&thread);
    let asked = transcript(&seen, &bot);
    let body = |m: &SeenMessage| m.fallback.clone().unwrap_or_default();
    let at_card = seen
        .iter()
        .position(|m| card_id.ends_with(&m.id))
        .unwrap_or_else(|| panic!("no question in the thread:\n{asked}"));
    let diff = seen
        .iter()
        .position(|m| m.sender == bot && body(m).contains("+ replicas: 4"))
        .unwrap_or_else(|| panic!("no diff in the thread:\n{asked}"));
    assert!(diff < at_card, "the diff before the question:\n{asked}");
    assert!(body(&seen[diff]).contains("- replicas: 3"), "{asked}");
    assert!(
        seen[diff..at_card].iter().any(|m| {
            let b = body(m);
            b.contains("service") && b.contains("pods") && b.contains("api") && b.contains('3')
        }),
        "the table before the question:\n{asked}"
    );
    // The blocks are delivered quietly (`Delivery::quietly`): an `m.notice`, silent under the
    // default push rule `.m.rule.suppress_notices`; the question is what notifies. It mentions
    // nobody.
    assert!(
        !seen[diff].notified && seen[diff].mentions.is_empty(),
        "the blocks are silent:\n{asked}"
    );
    assert!(seen[at_card].notified, "the question notifies:\n{asked}");

    // Ada taps ✅: Matrix's Approve.
    fake.inject(
        &room,
        &ada,
        "m.reaction",
        json!({"m.relates_to": {"rel_type": "m.annotation",
            "event_id": card["event_id"], "key": "✅"}}),
    );
    fake.wait_for(&room, WAIT, "the continued turn's reply", |e| {
        e["sender"] == bot.as_str()
            && e["content"]["body"]
                .as_str()
                .is_some_and(|b| b.starts_with("got: "))
    })
    .await;
    fake.wait_for(&room, WAIT, "✅ on Ada's message", |_| {
        fake.bot_reactions(&thread) == ["✅"]
    })
    .await;
    let seen = fake.person_view(&thread);
    let settled = seen.iter().find(|m| card_id.ends_with(&m.id)).unwrap();
    assert!(settled.edited, "{settled:#?}");
    assert!(
        body(settled).contains("✅ Answered by Ada: Approve"),
        "{settled:#?}"
    );
    shutdown.cancel();
    task.await.unwrap();
    worker.abort();
    let mut out = asked;
    out.push_str("--- after Ada reacts ✅ ---\n");
    out.push_str(&transcript(&seen, &bot));
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/person_view/confirm_with_blocks.txt");
    assert_golden(&path, &out);
}
