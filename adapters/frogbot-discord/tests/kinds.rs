//! Every input kind (`choice`, `text_input`, `number_input`, `toggle`, `confirm`) through
//! `DiscordQuestions` against the fake Discord, with serenity's real `Http`: drawn within
//! Discord's limits (the fake refuses what Discord refuses), answered with the payloads Discord
//! sends (clicks, a `MODAL_SUBMIT` holding several text inputs), validated, and settled.

use frogbot_core::model::{
    ChannelQuestions, HookArgs, Interaction, Notice, NoticeTo, ParseArgs, ParseResult,
    QuestionCall, QuestionOutcome, QuestionRecord, RenderArgs, RequestContext, Thread,
};
use frogbot_discord::DiscordQuestions;
use frogbot_discord::convert;
use frogbot_discord::testing::{self, FakeDiscord};
use serde_json::{Value, json};

const APP_ID: u64 = 600000000000000006;
const BOT_ID: u64 = 610000000000000006;
const THREAD: u64 = 700000000000000007;
const BOB: u64 = 300000000000000003;

fn thread() -> Thread {
    Thread {
        id: THREAD.to_string(),
        platform: "discord".into(),
        chat_id: "chat-1".into(),
    }
}

fn bob() -> Value {
    testing::user(BOB, "bob", false)
}

/// A set of every kind but choice: a dangerous confirm, then three form inputs in a row (an
/// optional short text, a number with a default, a multiline text), then a toggle.
fn kinds() -> QuestionCall {
    serde_json::from_value(json!({
        "toolCallId": "call-k",
        "expiresAt": "2099-06-01T14:05:00Z",
        "input": {"questions": [
            {"header": "Go", "question": "Deploy v1.4 to production?", "kind": "confirm", "label": "Approve", "danger": true},
            {"header": "Why", "question": "Reason?", "kind": "text_input", "maxLength": 10, "placeholder": "because", "required": false},
            {"header": "Pods", "question": "How many pods?", "kind": "number_input", "min": 1, "max": 10, "step": 1, "unit": "pods", "default": 3},
            {"header": "Notes", "question": "Anything the on-call person should know before this goes out?", "kind": "text_input", "multiline": true},
            {"header": "Notify", "question": "Tell the team?", "kind": "toggle", "label": "Notify"}
        ], "expiresInSeconds": 600}
    }))
    .unwrap()
}

struct Run {
    fake: FakeDiscord,
    piece: DiscordQuestions,
    call: QuestionCall,
    record: QuestionRecord,
    next: u64,
}

impl Run {
    async fn start(call: QuestionCall) -> Run {
        let fake = FakeDiscord::start(APP_ID, BOT_ID).await;
        let piece = DiscordQuestions::new(fake.http());
        let req = RequestContext::default();
        let thread = thread();
        let rendered = piece
            .render(RenderArgs {
                calls: std::slice::from_ref(&call),
                req: &req,
                thread: &thread,
            })
            .await
            .expect("the fake accepted the first step");
        let record = QuestionRecord {
            messages: rendered[0].messages.clone(),
            revision: 0,
            state: rendered[0].state.clone(),
        };
        Run {
            fake,
            piece,
            call,
            record,
            next: 500000000000000100,
        }
    }

    /// The current question message as the fake keeps it.
    fn shown(&self) -> Value {
        let current = self.record.current().expect("a question message");
        self.fake.message(&current.id).expect("the fake keeps it")
    }

    /// The buttons of the current message: (custom_id, label, style).
    fn buttons(&self) -> Vec<(String, String, u64)> {
        let shown = self.shown();
        let mut out = Vec::new();
        for row in shown["components"].as_array().unwrap() {
            for c in row["components"].as_array().unwrap() {
                if c["type"] == 2 {
                    out.push((
                        c["custom_id"].as_str().unwrap().to_owned(),
                        c["label"].as_str().unwrap().to_owned(),
                        c["style"].as_u64().unwrap(),
                    ));
                }
            }
        }
        out
    }

    fn button(&self, label: &str) -> String {
        self.buttons()
            .into_iter()
            .find(|(_, l, _)| l == label)
            .unwrap_or_else(|| panic!("no {label:?} button: {}", self.shown()))
            .0
    }

    /// A click on `custom_id` of the current message, as Discord delivers it (registered at the
    /// fake); the serenity payload and the converted interaction.
    fn click(&mut self, custom_id: &str) -> (Value, Interaction) {
        self.next += 1;
        let payload = testing::component_on(
            self.next,
            APP_ID,
            &self.shown(),
            None,
            &bob(),
            custom_id,
            None,
            &format!("tok-{}", self.next),
        );
        self.fake.register_interaction(&payload, false);
        let dispatch = json!({"op": 0, "s": 1, "t": "INTERACTION_CREATE", "d": payload});
        let interaction = convert::interaction_from_gateway(&dispatch.to_string()).unwrap();
        (payload, interaction)
    }

    /// A `MODAL_SUBMIT` of the modal `custom_id` with `values`, as Discord delivers it, read
    /// both ways the adapter reads one (serenity's types, as the gateway does, and the JSON, as
    /// the interactions endpoint does): they must agree.
    fn submit(&mut self, custom_id: &str, values: &[(&str, &str)]) -> Interaction {
        self.next += 1;
        let payload = testing::modal_submit_interaction(
            self.next,
            APP_ID,
            THREAD,
            &bob(),
            custom_id,
            values,
            &format!("tok-{}", self.next),
        );
        self.fake.register_interaction(&payload, false);
        let dispatch = json!({"op": 0, "s": 1, "t": "INTERACTION_CREATE", "d": payload.clone()});
        let from_json = convert::interaction_from_gateway(&dispatch.to_string()).unwrap();
        let typed: serenity::model::application::Interaction =
            serde_json::from_value(payload).unwrap();
        let serenity::model::application::Interaction::Modal(modal) = typed else {
            panic!("a modal submission")
        };
        let from_types = convert::modal_submit(&modal);
        let values = |i: &Interaction| match i {
            Interaction::ModalSubmit { event } => event.values.clone(),
            _ => panic!("a modal submission"),
        };
        assert_eq!(values(&from_json), values(&from_types));
        from_json
    }

    fn parse(&self, interaction: &Interaction) -> ParseResult {
        self.piece.parse(ParseArgs {
            call: &self.call,
            interaction,
            question: &self.record,
            settled: false,
        })
    }

    /// What the engine does with a partial answer: saves the state at the next revision and
    /// calls `updated` (which posts the next step through the fake).
    async fn step(&mut self, result: ParseResult, interaction: &Interaction) {
        let ParseResult::Partial { state } = result else {
            panic!("a step, got {result:?}")
        };
        self.record.state = state;
        self.record.revision += 1;
        let req = RequestContext::default();
        let thread = thread();
        let change = self
            .piece
            .updated(
                HookArgs {
                    call: &self.call,
                    question: &self.record,
                    req: &req,
                    thread: &thread,
                },
                Some(interaction),
            )
            .await
            .expect("the fake accepted the next step")
            .expect("a message for the next step");
        self.record.messages = change.messages.unwrap();
    }

    async fn notify(&self, interaction: &Interaction, reason: &str) {
        let req = RequestContext::default();
        let thread = thread();
        self.piece
            .notify(
                HookArgs {
                    call: &self.call,
                    question: &self.record,
                    req: &req,
                    thread: &thread,
                },
                NoticeTo::new(interaction, Notice::Rejected(reason)),
            )
            .await
            .unwrap();
    }

    async fn settle(&self, outcome: &QuestionOutcome) {
        let req = RequestContext::default();
        let thread = thread();
        self.piece
            .settled(
                HookArgs {
                    call: &self.call,
                    question: &self.record,
                    req: &req,
                    thread: &thread,
                },
                outcome.by(None),
            )
            .await
            .expect("every message edited");
    }

    /// The modal the fake accepted as the response to the click with `payload`.
    fn modal_of(&self, payload: &Value) -> Value {
        let path = format!(
            "/api/v10/interactions/{}/{}/callback",
            payload["id"].as_str().unwrap(),
            payload["token"].as_str().unwrap()
        );
        let call = self
            .fake
            .calls()
            .into_iter()
            .find(|c| c.path == path)
            .expect("the click was answered");
        assert_eq!(
            call.status, 204,
            "the fake accepted the modal: {:?}",
            call.response
        );
        assert_eq!(call.body["type"], 9, "MODAL");
        call.body["data"].clone()
    }
}

fn rejected(result: ParseResult) -> String {
    match result {
        ParseResult::Rejected { reason } => reason,
        other => panic!("a rejection, got {other:?}"),
    }
}

#[tokio::test]
async fn every_kind_is_drawn_answered_validated_and_settled() {
    let mut run = Run::start(kinds()).await;

    // Step 1, the confirm: one danger-styled button with its label, the expiry line, Skip.
    let shown = run.shown();
    let content = shown["content"].as_str().unwrap();
    assert!(
        content.starts_with("**Go** (1/5)\nDeploy v1.4 to production?"),
        "{content}"
    );
    assert!(
        content.ends_with("⏳ open until 1 Jun 14:05 UTC"),
        "{content}"
    );
    assert_eq!(
        run.buttons(),
        [
            ("fq:0:0:0".to_owned(), "Approve".to_owned(), 4),
            ("fq:0:0:k".to_owned(), "Skip".to_owned(), 2)
        ]
    );
    let (_, approve) = run.click("fq:0:0:0");
    let result = run.parse(&approve);
    run.step(result, &approve).await;

    // Step 2: the run of three form inputs, asked in one message with one "Answer…" button.
    let shown = run.shown();
    let content = shown["content"].as_str().unwrap();
    for part in [
        "**Why** (2/5)\nReason?\n_At most 10 characters, optional_",
        "**Pods** (3/5)\nHow many pods?\n_A number from 1 to 10 in steps of 1 (pods)_",
        "**Notes** (4/5)\nAnything the on-call person",
        "⏳ open until",
    ] {
        assert!(content.contains(part), "{part:?} in {content}");
    }
    assert!(
        !content.contains("Tell the team"),
        "the toggle is a later step"
    );
    assert_eq!(
        run.buttons(),
        [
            ("fq:1:1:f".to_owned(), "Answer…".to_owned(), 1),
            ("fq:1:1:k".to_owned(), "Skip".to_owned(), 2)
        ]
    );
    // "Answer…" is not itself an answer; it opens the form (the click's only response).
    let (payload, answer) = run.click("fq:1:1:f");
    assert_eq!(run.parse(&answer), ParseResult::Ignore);
    let serenity::model::application::Interaction::Component(component) =
        serde_json::from_value(payload.clone()).unwrap()
    else {
        panic!("a component click")
    };
    run.piece.open_modal(&component, &run.call).await.unwrap();
    let modal = run.modal_of(&payload);
    let message = run.record.current().unwrap().id.clone();
    let locator = format!("fq1:[\"{THREAD}\",\"{message}\"]");
    assert_eq!(modal["custom_id"], locator);
    assert_eq!(modal["title"], "3 questions");
    let inputs: Vec<&Value> = modal["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            assert_eq!(row["type"], 1);
            &row["components"][0]
        })
        .collect();
    assert_eq!(inputs.len(), 3);
    let field = |i: usize, key: &str| inputs[i][key].clone();
    assert_eq!(
        inputs
            .iter()
            .map(|i| i["custom_id"].clone())
            .collect::<Vec<_>>(),
        [json!("fq:1:1:t"), json!("fq:1:2:t"), json!("fq:1:3:t")]
    );
    assert!(inputs.iter().all(|i| i["type"] == 4));
    // The optional text: short, not required, its limit and placeholder.
    assert_eq!(
        (
            field(0, "style"),
            field(0, "required"),
            field(0, "max_length")
        ),
        (json!(1), json!(false), json!(10))
    );
    assert_eq!(field(0, "placeholder"), "because");
    assert_eq!(field(0, "label"), "Reason?");
    // The number: short, required, its range as the placeholder, the default pre-filled.
    assert_eq!(
        (field(1, "style"), field(1, "required"), field(1, "value")),
        (json!(1), json!(true), json!("3"))
    );
    assert_eq!(
        field(1, "placeholder"),
        "A number from 1 to 10 in steps of 1 (pods)"
    );
    // The multiline text: a paragraph; its question is too long for a label, so the header.
    assert_eq!(
        (field(2, "style"), field(2, "max_length"), field(2, "label")),
        (json!(2), json!(4000), json!("Notes"))
    );

    // A number out of range: rejected with its reason, nothing recorded; told privately.
    let bad = run.submit(
        &locator,
        &[
            ("fq:1:1:t", ""),
            ("fq:1:2:t", "11"),
            ("fq:1:3:t", "all fine"),
        ],
    );
    let reason = rejected(run.parse(&bad));
    assert_eq!(reason, "Pods: enter a number from 1 to 10.");
    run.notify(&bad, &reason).await;
    assert_eq!(run.fake.notices(&BOB.to_string()), [reason]);
    // A text too long, and a number off its step, likewise.
    let long = run.submit(
        &locator,
        &[
            ("fq:1:1:t", "far too long"),
            ("fq:1:2:t", "4"),
            ("fq:1:3:t", "x"),
        ],
    );
    assert_eq!(
        rejected(run.parse(&long)),
        "Why: the text is longer than 10 characters."
    );
    let off = run.submit(
        &locator,
        &[("fq:1:1:t", ""), ("fq:1:2:t", "2.5"), ("fq:1:3:t", "x")],
    );
    assert!(rejected(run.parse(&off)).contains("in steps of 1"));
    // A required input left empty (Discord enforces `required`, the adapter checks too).
    let empty = run.submit(
        &locator,
        &[("fq:1:1:t", ""), ("fq:1:2:t", "4"), ("fq:1:3:t", "  ")],
    );
    assert_eq!(rejected(run.parse(&empty)), "Notes: type an answer.");
    // A submission of an older revision's form is stale.
    let old = run.submit(
        "fq1:[\"1\",\"2\"]",
        &[("fq:0:1:t", ""), ("fq:0:2:t", "4"), ("fq:0:3:t", "x")],
    );
    assert_eq!(run.parse(&old), ParseResult::Stale);

    // The three answered together: the optional one empty, the number with its unit.
    let good = run.submit(
        &locator,
        &[
            ("fq:1:1:t", ""),
            ("fq:1:2:t", "4 pods"),
            ("fq:1:3:t", " the cache is cold\nexpect slow starts "),
        ],
    );
    let result = run.parse(&good);
    run.step(result, &good).await;

    // Step 3, the toggle: ✓ On / ✗ Off buttons.
    let shown = run.shown();
    assert!(
        shown["content"]
            .as_str()
            .unwrap()
            .starts_with("**Notify** (5/5)\nTell the team?")
    );
    assert_eq!(
        run.buttons(),
        [
            ("fq:2:4:0".to_owned(), "✓ On".to_owned(), 3),
            ("fq:2:4:1".to_owned(), "✗ Off".to_owned(), 2),
            ("fq:2:4:k".to_owned(), "Skip".to_owned(), 2)
        ]
    );
    // A required toggle has no "No answer": a forged one is refused.
    let (_, clear) = run.click("fq:2:4:n");
    assert!(rejected(run.parse(&clear)).contains("needs an answer"));
    let (_, off) = run.click("fq:2:4:1");
    let ParseResult::Answer { output } = run.parse(&off) else {
        panic!("the set is answered")
    };
    assert_eq!(
        serde_json::Value::Object(run.call.input.values(&output)),
        json!({"Go": true, "Why": null, "Pods": 4, "Notes": "the cache is cold\nexpect slow starts", "Notify": false})
    );

    // Settled: every message edited, components gone, each answer as it reads.
    let from = run.fake.calls().len();
    run.settle(&QuestionOutcome::Answered(output)).await;
    let edits: Vec<Value> = run.fake.calls()[from..]
        .iter()
        .map(|c| {
            assert_eq!((c.method.as_str(), c.status), ("PATCH", 200));
            c.body.clone()
        })
        .collect();
    assert_eq!(edits.len(), 3);
    assert!(edits.iter().all(|e| e["components"] == json!([])));
    let text = |i: usize| edits[i]["content"].as_str().unwrap().to_owned();
    assert!(text(0).ends_with("✅ Answered: Approve"), "{}", text(0));
    assert!(
        text(1).ends_with(
            "✅ Answered:\n• **Why**: —\n• **Pods**: 4 pods\n• **Notes**: the cache is cold\nexpect slow starts"
        ),
        "{}",
        text(1)
    );
    // A toggle answered off says what is off: never "✅ Answered: ✗ Off".
    assert!(
        text(2).ends_with("✅ Answered: Notify — off"),
        "{}",
        text(2)
    );
    assert!(
        !text(0).contains("open until"),
        "the expiry line goes once settled"
    );
}

#[tokio::test]
async fn optional_inputs_have_no_answer_and_a_lone_confirm_answers_on_tap() {
    let call: QuestionCall = serde_json::from_value(json!({
        "toolCallId": "call-o",
        "input": {"questions": [
            {"header": "Ping", "question": "Ping the team?", "kind": "toggle", "required": false},
            {"header": "Ok", "question": "Ship it?", "kind": "confirm", "required": false}
        ]}
    }))
    .unwrap();
    let mut run = Run::start(call).await;
    let labels: Vec<String> = run.buttons().into_iter().map(|b| b.1).collect();
    assert_eq!(labels, ["✓ On", "✗ Off", "No answer", "Skip"]);
    let (_, none) = run.click(&run.button("No answer"));
    let result = run.parse(&none);
    run.step(result, &none).await;
    // The confirm without `danger`: a success-styled button with the default label.
    let buttons = run.buttons();
    assert_eq!(buttons[0].1, "Confirm");
    assert_eq!(buttons[0].2, 3);
    assert_eq!(buttons[1].1, "No answer");
    let (_, ok) = run.click(&buttons[0].0);
    let ParseResult::Answer { output } = run.parse(&ok) else {
        panic!("answered")
    };
    assert_eq!(output.answers[0].selected, Vec::<String>::new());
    assert_eq!(output.answers[1].selected, ["Confirm"]);

    // A single confirm answers on tap; typed replies answer every kind as well.
    let lone: QuestionCall = serde_json::from_value(json!({
        "toolCallId": "call-c",
        "input": {"questions": [
            {"header": "Go", "question": "Deploy?", "kind": "confirm", "label": "Approve"}
        ]}
    }))
    .unwrap();
    assert!(lone.input.submits_on_tap());
    let mut run = Run::start(lone).await;
    let (_, tap) = run.click("fq:0:0:0");
    assert!(matches!(run.parse(&tap), ParseResult::Answer { .. }));
}

#[tokio::test]
async fn six_form_inputs_take_two_modals_and_a_single_input_is_titled_by_its_header() {
    let questions: Vec<Value> = (0..6)
        .map(|i| json!({"header": format!("Q{i}"), "question": format!("Number {i}?"), "kind": "number_input"}))
        .collect();
    let call: QuestionCall = serde_json::from_value(json!({
        "toolCallId": "call-6", "input": {"questions": questions}
    }))
    .unwrap();
    let mut run = Run::start(call).await;
    let (payload, _) = run.click("fq:0:0:f");
    let serenity::model::application::Interaction::Component(component) =
        serde_json::from_value(payload.clone()).unwrap()
    else {
        panic!("a component click")
    };
    run.piece.open_modal(&component, &run.call).await.unwrap();
    let modal = run.modal_of(&payload);
    assert_eq!(
        modal["components"].as_array().unwrap().len(),
        5,
        "Discord's limit"
    );
    let locator = modal["custom_id"].as_str().unwrap().to_owned();
    let values: Vec<(String, String)> = (0..5)
        .map(|q| (format!("fq:0:{q}:t"), format!("{q}")))
        .collect();
    let values: Vec<(&str, &str)> = values
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let five = run.submit(&locator, &values);
    let result = run.parse(&five);
    run.step(result, &five).await;
    // The sixth, alone: its own modal, titled by its header.
    let (payload, _) = run.click("fq:1:5:f");
    let serenity::model::application::Interaction::Component(component) =
        serde_json::from_value(payload.clone()).unwrap()
    else {
        panic!("a component click")
    };
    run.piece.open_modal(&component, &run.call).await.unwrap();
    let modal = run.modal_of(&payload);
    assert_eq!(modal["title"], "Q5");
    assert_eq!(modal["components"].as_array().unwrap().len(), 1);
    let locator = modal["custom_id"].as_str().unwrap().to_owned();
    let last = run.submit(&locator, &[("fq:1:5:t", "-2.5")]);
    let ParseResult::Answer { output } = run.parse(&last) else {
        panic!("answered")
    };
    assert_eq!(output.answers[5].selected, ["-2.5"]);
    assert_eq!(output.answers[3].selected, ["3"]);
}

#[tokio::test]
async fn typed_replies_answer_the_new_kinds_and_an_expired_set_says_so() {
    let mut run = Run::start(kinds()).await;
    let reply = |id: &str, text: &str| -> Interaction {
        serde_json::from_value(json!({
            "type": "message",
            "message": {"id": id, "text": text, "author": {"id": BOB.to_string()},
                        "metadata": {"dateSent": "2026-01-01T00:00:00Z"}}
        }))
        .unwrap()
    };
    // Far later snowflakes than the question messages.
    let yes = reply("990000000000000001", "yes");
    let result = run.parse(&yes);
    run.step(result, &yes).await;
    let long = reply("990000000000000002", "a reason far too long");
    assert_eq!(
        rejected(run.parse(&long)),
        "the text is longer than 10 characters."
    );
    let short = reply("990000000000000003", "because");
    let result = run.parse(&short);
    run.step(result, &short).await;
    // The message of the next step holds what is left of the run.
    assert_eq!(
        run.record.current().map(|m| m.question),
        Some(Some(2)),
        "{:?}",
        run.record.messages
    );
    let n = reply("990000000000000004", "lots");
    assert_eq!(
        run.parse(&n),
        ParseResult::Ignore,
        "no number: for the agent"
    );
    let far = reply("990000000000000005", "12 pods");
    assert_eq!(rejected(run.parse(&far)), "enter a number from 1 to 10.");

    // Expired without an answer: every message says so and loses its controls.
    let from = run.fake.calls().len();
    run.settle(&QuestionOutcome::Expired(None)).await;
    let edits: Vec<_> = run.fake.calls()[from..].to_vec();
    assert_eq!(edits.len(), run.record.messages.len());
    for e in edits {
        assert_eq!(e.status, 200);
        assert_eq!(e.body["components"], json!([]));
        let content = e.body["content"].as_str().unwrap();
        assert!(content.ends_with("⌛ Expired."), "{content}");
        assert!(!content.contains("open until"), "{content}");
    }
}

/// The fake refuses a modal Discord refuses (so the modals above passed real limits).
#[tokio::test]
async fn the_fake_refuses_modals_discord_refuses() {
    use frogbot_discord::DiscordApi;
    use serenity::builder::{
        CreateActionRow, CreateInputText, CreateInteractionResponse, CreateModal,
    };
    use serenity::model::application::InputTextStyle;
    use serenity::model::id::InteractionId;
    let fake = FakeDiscord::start(APP_ID, BOT_ID).await;
    let piece = DiscordQuestions::new(fake.http());
    let api: &dyn DiscordApi = piece.api().as_ref();
    let payload = testing::component_interaction(
        500000000000000077,
        APP_ID,
        THREAD,
        910000000000000001,
        &bob(),
        "fq:0:0:f",
        None,
        "tok-modal",
    );
    fake.register_interaction(&payload, false);
    let input = |id: &str| CreateInputText::new(InputTextStyle::Short, "Label", id);
    let send = |rows: Vec<CreateActionRow>| {
        let modal = CreateInteractionResponse::Modal(
            CreateModal::new("fq1:[\"1\",\"2\"]", "Title").components(rows),
        );
        async move {
            api.create_interaction_response(
                InteractionId::new(500000000000000077),
                "tok-modal",
                &modal,
            )
            .await
        }
    };
    let row = CreateActionRow::InputText;
    for (bad, why) in [
        (
            vec![row(input("a")), row(input("a"))],
            "a custom id used twice",
        ),
        (
            (0..6).map(|i| row(input(&format!("r{i}")))).collect(),
            "six rows",
        ),
        (vec![row(input("a").max_length(0))], "max_length 0"),
        (
            vec![row(input("a").max_length(4001))],
            "max_length over 4000",
        ),
        (
            vec![row(input("a").min_length(5).max_length(4))],
            "min above max",
        ),
        (
            vec![row(input("a").max_length(3).value("four"))],
            "a value over max_length",
        ),
        (
            vec![row(input("a").placeholder("p".repeat(101)))],
            "a placeholder over 100",
        ),
        (
            vec![row(CreateInputText::new(
                InputTextStyle::Short,
                "l".repeat(46),
                "a",
            ))],
            "a label over 45",
        ),
        (
            vec![row(CreateInputText::new(
                InputTextStyle::Unknown(3),
                "l",
                "a",
            ))],
            "style 3",
        ),
        (vec![], "no rows"),
    ] {
        assert!(send(bad).await.is_err(), "{why}");
        let last = fake.calls().last().unwrap().clone();
        assert_eq!(
            (last.status, last.response["code"].clone()),
            (400, json!(50035)),
            "{why}"
        );
    }
    // Within the limits: accepted (once).
    let fine = vec![
        row(input("a").max_length(10).value("x").required(false)),
        row(CreateInputText::new(InputTextStyle::Paragraph, "Notes", "b").max_length(4000)),
    ];
    send(fine).await.unwrap();
}
