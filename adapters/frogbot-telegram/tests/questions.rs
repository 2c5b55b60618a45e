//! The question hooks against a local fake Bot API (axum on 127.0.0.1:0), with teloxide's `Bot`
//! pointed at it: documented response shapes, a `429` with `retry_after`, and the pure `parse`.

use std::time::{Duration, Instant};

use frogbot_model::{
    ActionEvent, ChannelQuestions, HookArgs, Interaction, ParseArgs, ParseResult, PlatformUser,
    QuestionCall, QuestionMessage, QuestionOutcome, QuestionRecord, RenderArgs, RequestContext,
    Thread, ThreadMessage, ThreadMessageMetadata,
};
use frogbot_telegram::TelegramQuestions;
use frogbot_telegram::client::SendTo;
use frogbot_telegram::questions::STALE_TEXT;
use frogbot_telegram::render::MAX_NOTICE;
use frogbot_telegram::testing::FakeBotApi;
use frogbot_telegram::testing::{ApiCall, RecordingTelegram};
use serde_json::{Value, json};
use teloxide::Bot;

const CHAT: i64 = -100200;

async fn start() -> (FakeBotApi, TelegramQuestions<Bot>) {
    let fake = FakeBotApi::start().await;
    let hooks = TelegramQuestions::new(fake.bot());
    (fake, hooks)
}

/// Renders [`call`] in [`thread`] and takes its steps (one question at a time): messages 100,
/// 101 and the prompt 102.
async fn render_call(hooks: &TelegramQuestions<Bot>) {
    let c = call();
    let req = RequestContext::default();
    let t = thread();
    hooks
        .render(RenderArgs {
            calls: std::slice::from_ref(&c),
            req: &req,
            thread: &t,
        })
        .await
        .unwrap();
    let steps: [(&[(i64, usize)], Value); 2] = [
        (&[(100, 0)], json!({"picks": [["prod"], null, null]})),
        (
            &[(100, 0), (101, 1)],
            json!({"picks": [["prod"], ["b"], null]}),
        ),
    ];
    for (ids, state) in steps {
        let q = record(ids, 1, Some(state));
        let args = HookArgs {
            call: &c,
            question: &q,
            req: &req,
            thread: &t,
        };
        assert!(hooks.updated(args, None).await.unwrap().is_some());
    }
}

fn thread() -> Thread {
    Thread {
        id: CHAT.to_string(),
        platform: "telegram".into(),
        chat_id: "chat-1".into(),
    }
}

fn call() -> QuestionCall {
    serde_json::from_value(json!({"toolCallId": "call-1", "input": {"questions": [
        {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]},
        {"header": "Checks", "question": "Which?", "options": [{"label": "a"}, {"label": "b"}], "multiple": true},
        {"header": "Note", "question": "Anything else?", "custom": true}
    ]}}))
    .unwrap()
}

fn user() -> PlatformUser {
    PlatformUser {
        id: "42".into(),
        name: Some("Ada".into()),
        is_bot: false,
    }
}

fn click(message: &str, data: &str) -> Interaction {
    let (action_id, value) = data.rsplit_once(':').unwrap();
    Interaction::Action {
        event: ActionEvent {
            action_id: action_id.into(),
            value: Some(value.into()),
            message_id: message.into(),
            user: user(),
            trigger_id: Some("cbq-1".into()),
            raw: Value::Null,
        },
    }
}

fn reply(to: &str, text: &str) -> Interaction {
    Interaction::Message {
        message: ThreadMessage {
            id: format!("{CHAT}:500"),
            text: text.into(),
            author: user(),
            metadata: ThreadMessageMetadata {
                date_sent: "2026-01-01T00:05:00Z".into(),
            },
            reply_to: Some(to.into()),
            raw: Value::Null,
            files: Vec::new(),
            mentions: Vec::new(),
        },
    }
}

fn record(ids: &[(i64, usize)], revision: u64, state: Option<Value>) -> QuestionRecord {
    QuestionRecord {
        messages: ids
            .iter()
            .map(|&(id, q)| QuestionMessage {
                id: format!("{CHAT}:{id}"),
                posted_at: "2026-01-01T00:00:00Z".into(),
                question: Some(q),
            })
            .collect(),
        revision,
        state,
    }
}

#[tokio::test]
async fn render_sends_keyboards_and_a_force_reply_prompt_one_question_at_a_time() {
    let (fake, hooks) = start().await;
    let c = call();
    let req = RequestContext::default();
    let t = thread();
    let out = hooks
        .render(RenderArgs {
            calls: std::slice::from_ref(&c),
            req: &req,
            thread: &t,
        })
        .await
        .unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].calls, ["call-1"]);
    // The first question only: FrogBot counts the controls of a call's last message.
    let ids: Vec<_> = out[0].messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, [format!("{CHAT}:100")]);
    assert_eq!(out[0].messages[0].question, Some(0));
    assert!(out[0].messages[0].posted_at.ends_with('Z'));
    let sent = fake.calls("sendmessage");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["chat_id"], json!(CHAT));
    let kb = &sent[0]["reply_markup"]["inline_keyboard"];
    assert_eq!(kb[0][0]["text"], "staging");
    assert_eq!(kb[0][0]["callback_data"], "q0:0:0");
    assert_eq!(kb[1][0]["callback_data"], "q0:0:1");
    // Every keyboard ends with Skip.
    assert_eq!(kb[2][0]["text"], "Skip");
    assert_eq!(kb[2][0]["callback_data"], "q0:0:s");
    assert_eq!(out[0].state.as_ref().unwrap().get("prompts"), None);

    // Env answered (revision 1): the next question is posted, with the new revision's buttons,
    // and becomes the last message.
    let q = record(
        &[(100, 0)],
        1,
        Some(json!({"picks": [["prod"], null, null]})),
    );
    let args = HookArgs {
        call: &c,
        question: &q,
        req: &req,
        thread: &t,
    };
    let change = hooks.updated(args, None).await.unwrap().unwrap();
    let messages = change.messages.unwrap();
    let ids: Vec<_> = messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, [format!("{CHAT}:100"), format!("{CHAT}:101")]);
    assert_eq!(messages[1].question, Some(1));
    let sent = fake.calls("sendmessage");
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[1]["reply_markup"]["inline_keyboard"][2][0]["callback_data"],
        "q1:1:d"
    );
    // Again while the step is the same (a `multiple` choice checked): nothing more is posted.
    let q = record(
        &[(100, 0), (101, 1)],
        2,
        Some(json!({"picks": [["prod"], null, null], "checked": [[], [1]]})),
    );
    let args = HookArgs {
        call: &c,
        question: &q,
        req: &req,
        thread: &t,
    };
    assert_eq!(hooks.updated(args, None).await.unwrap(), None);
    assert_eq!(fake.calls("sendmessage").len(), 2);
    // Checks answered: the own-answer question, a ForceReply prompt, kept in the state.
    let q = record(
        &[(100, 0), (101, 1)],
        3,
        Some(json!({"picks": [["prod"], ["b"], null]})),
    );
    let args = HookArgs {
        call: &c,
        question: &q,
        req: &req,
        thread: &t,
    };
    let change = hooks.updated(args, None).await.unwrap().unwrap();
    let messages = change.messages.unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[2].id, format!("{CHAT}:102"));
    assert_eq!(messages[2].question, Some(2));
    let sent = fake.calls("sendmessage");
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[2]["reply_markup"]["force_reply"], json!(true));
    let state = change.state.unwrap();
    assert_eq!(state["prompts"], json!([format!("{CHAT}:102")]));
    assert_eq!(state["picks"], json!([["prod"], ["b"], null]));
}

#[tokio::test]
async fn parse_walks_the_question_set() {
    let (_fake, hooks) = start().await;
    let c = call();
    let m0 = format!("{CHAT}:100");
    let m1 = format!("{CHAT}:101");
    let m2 = format!("{CHAT}:102");
    let prompts = json!({"prompts": [m2.clone()]});
    let parse = |i: &Interaction, q: &QuestionRecord| {
        hooks.parse(ParseArgs {
            call: &c,
            interaction: i,
            question: q,
            settled: false,
        })
    };
    let q = record(&[(100, 0), (101, 1), (102, 2)], 0, Some(prompts));
    // Env → prod: progress, not yet an answer.
    let ParseResult::Partial { state: Some(s) } = parse(&click(&m0, "q0:0:1"), &q) else {
        panic!("expected partial")
    };
    assert_eq!(s["picks"][0], json!(["prod"]));
    // The old revision is stale.
    let q = record(&[(100, 0), (101, 1), (102, 2)], 1, Some(s));
    assert_eq!(parse(&click(&m0, "q0:0:0"), &q), ParseResult::Stale);
    // A token on a message of another record is stale too.
    assert_eq!(
        parse(&click(&format!("{CHAT}:7"), "q1:0:0"), &q),
        ParseResult::Stale
    );
    // Done with nothing toggled is refused.
    assert!(matches!(
        parse(&click(&m1, "q1:1:d"), &q),
        ParseResult::Rejected { .. }
    ));
    // Toggle b, then Done.
    let ParseResult::Partial { state: Some(s) } = parse(&click(&m1, "q1:1:1"), &q) else {
        panic!("expected partial")
    };
    assert_eq!(s["checked"][1], json!([1]));
    let q = record(&[(100, 0), (101, 1), (102, 2)], 2, Some(s));
    let ParseResult::Partial { state: Some(s) } = parse(&click(&m1, "q2:1:d"), &q) else {
        panic!("expected partial")
    };
    assert_eq!(s["picks"][1], json!(["b"]));
    // A reply to the ForceReply prompt is the own answer and completes the set.
    let q = record(&[(100, 0), (101, 1), (102, 2)], 3, Some(s));
    let ParseResult::Answer { output } = parse(&reply(&m2, "  ship it  "), &q) else {
        panic!("expected an answer")
    };
    let selected: Vec<_> = output.answers.iter().map(|a| a.selected.clone()).collect();
    assert_eq!(selected, [vec!["prod"], vec!["b"], vec!["ship it"]]);
    // A reply to a message of a question without `custom` is an ordinary message.
    assert_eq!(parse(&reply(&m0, "hm"), &q), ParseResult::Ignore);
    assert_eq!(parse(&reply("1:1", "hm"), &q), ParseResult::Ignore);
    assert_eq!(parse(&click(&m0, "other:x"), &q), ParseResult::Ignore);
}

#[tokio::test]
async fn replies_after_the_answer_reach_the_agent() {
    let (_fake, hooks) = start().await;
    let c = call();
    let m0 = format!("{CHAT}:100");
    let m2 = format!("{CHAT}:102");
    let state = json!({"prompts": [m2.clone()], "picks": [["prod"], ["b"], null]});
    let q = record(&[(100, 0), (101, 1), (102, 2)], 3, Some(state));
    let parse = |i: &Interaction, settled: bool| {
        hooks.parse(ParseArgs {
            call: &c,
            interaction: i,
            question: &q,
            settled,
        })
    };
    // Open: a reply to the own-text prompt answers; chatter (not a reply to the prompt) and
    // replies to keyboard questions are not for the question.
    assert!(matches!(
        parse(&reply(&m2, "ship it"), false),
        ParseResult::Answer { .. }
    ));
    assert_eq!(parse(&reply(&m0, "1"), false), ParseResult::Ignore);
    assert_eq!(parse(&reply("1:1", "what?"), false), ParseResult::Ignore);
    // Answered: even a reply to the prompt is the conversation going on.
    assert_eq!(parse(&reply(&m2, "ship it"), true), ParseResult::Ignore);
    assert_eq!(parse(&reply(&m2, ""), true), ParseResult::Ignore);
    // Clicks are classified as before (the engine answers a match as stale).
    assert!(!matches!(
        parse(&click(&format!("{CHAT}:101"), "q3:1:d"), true),
        ParseResult::Ignore
    ));
}

#[tokio::test]
async fn updated_redraws_keyboards_with_the_new_revision() {
    let (fake, hooks) = start().await;
    render_call(&hooks).await;
    let c = call();
    let req = RequestContext::default();
    let t = thread();
    let q = record(
        &[(100, 0), (101, 1), (102, 2)],
        4,
        Some(json!({"toggled": [[], [0]], "prompts": [format!("{CHAT}:102")]})),
    );
    let args = HookArgs {
        call: &c,
        question: &q,
        req: &req,
        thread: &t,
    };
    let before = fake.calls("editmessagereplymarkup").len();
    assert_eq!(hooks.updated(args, None).await.unwrap(), None);
    let edits = &fake.calls("editmessagereplymarkup")[before..];
    assert_eq!(edits.len(), 2, "the prompt has no keyboard");
    assert_eq!(edits[1]["message_id"], 101);
    let kb = &edits[1]["reply_markup"]["inline_keyboard"];
    assert_eq!(kb[0][0]["text"], "✓ a");
    assert_eq!(kb[0][0]["callback_data"], "q4:1:0");
}

#[tokio::test]
async fn settled_edits_every_message_and_removes_keyboards() {
    let (fake, hooks) = start().await;
    render_call(&hooks).await;
    let c = call();
    let req = RequestContext::default();
    let t = thread();
    let q = record(
        &[(100, 0), (101, 1), (102, 2)],
        3,
        Some(json!({"prompts": [format!("{CHAT}:102")]})),
    );
    let args = HookArgs {
        call: &c,
        question: &q,
        req: &req,
        thread: &t,
    };
    let outcome: QuestionOutcome = serde_json::from_value(json!({"output": {"answers": [
        {"header": "Env", "selected": ["prod"]},
        {"header": "Checks", "selected": ["a", "b"]},
        {"header": "Note", "selected": ["ship it"]}
    ]}}))
    .unwrap();
    assert_eq!(hooks.settled(args, outcome.by(None)).await.unwrap(), None);
    let edits = fake.calls("editmessagetext");
    let ids: Vec<_> = edits
        .iter()
        .map(|e| e["message_id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [100, 101, 102]);
    for e in &edits {
        assert_eq!(e["chat_id"], json!(CHAT));
        assert_eq!(e["reply_markup"]["inline_keyboard"], json!([]));
    }
    assert!(
        edits[0]["text"]
            .as_str()
            .unwrap()
            .ends_with("✅ Answered: prod")
    );
    assert!(
        edits[1]["text"]
            .as_str()
            .unwrap()
            .ends_with("✅ Answered: a, b")
    );
    assert!(
        edits[2]["text"]
            .as_str()
            .unwrap()
            .ends_with("✅ Answered: ship it")
    );
}

#[tokio::test]
async fn stale_answers_the_callback_query_with_a_notice() {
    let (fake, hooks) = start().await;
    let c = call();
    let req = RequestContext::default();
    let t = thread();
    let q = record(&[(100, 0)], 1, None);
    let args = HookArgs {
        call: &c,
        question: &q,
        req: &req,
        thread: &t,
    };
    render_call(&hooks).await;
    // A click the fake really delivered: Telegram takes one answer per callback query.
    let update = fake.click(
        &json!({"id": 42, "is_bot": false, "first_name": "Ada"}),
        100,
        "q0:0:1",
    );
    let query = update["callback_query"]["id"].as_str().unwrap().to_owned();
    let mut stale = click(&format!("{CHAT}:100"), "q0:0:1");
    if let Interaction::Action { event } = &mut stale {
        event.trigger_id = Some(query.clone());
    }
    hooks.stale(args, &stale).await.unwrap();
    let answers = fake.calls("answercallbackquery");
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["callback_query_id"], query.as_str());
    assert_eq!(answers[0]["text"], STALE_TEXT);
    // A second answer to the same query is refused, as Telegram refuses it.
    assert!(hooks.stale(args, &stale).await.is_err());
    // A rejected reply message gets a reply in the thread instead.
    hooks
        .rejected(
            args,
            &reply(&format!("{CHAT}:102"), ""),
            "The answer is empty.",
        )
        .await
        .unwrap();
    let sent = fake.calls("sendmessage");
    assert_eq!(
        sent.len(),
        4,
        "three messages of the question, then the reply"
    );
    assert_eq!(sent[3]["text"], "The answer is empty.");
    assert_eq!(sent[3]["reply_parameters"]["message_id"], 500);
}

#[tokio::test]
async fn a_429_is_waited_out_and_the_message_is_not_dropped() {
    let (fake, hooks) = start().await;
    fake.throttle_keyboard_sends(1);
    let c: QuestionCall = serde_json::from_value(json!({"toolCallId": "call-2", "input": {
        "questions": [{"header": "Env", "question": "Where?", "options": [{"label": "prod"}]}]
    }}))
    .unwrap();
    let req = RequestContext::default();
    let started = Instant::now();
    let out = hooks
        .render(RenderArgs {
            calls: std::slice::from_ref(&c),
            req: &req,
            thread: &thread(),
        })
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "waited for retry_after"
    );
    let sent = fake.calls("sendmessage");
    assert_eq!(sent.len(), 2, "the throttled call was sent again");
    assert_eq!(sent[0], sent[1]);
    assert_eq!(out[0].messages.len(), 1);
    assert_eq!(out[0].messages[0].id, format!("{CHAT}:100"));
}

#[tokio::test]
async fn replies_name_options_by_number_or_label() {
    let (_fake, hooks) = start().await;
    let c = call();
    let m0 = format!("{CHAT}:100");
    let m1 = format!("{CHAT}:101");
    let q = record(
        &[(100, 0), (101, 1), (102, 2)],
        0,
        Some(json!({"prompts": [format!("{CHAT}:102")]})),
    );
    let parse = |i: &Interaction| {
        hooks.parse(ParseArgs {
            call: &c,
            interaction: i,
            question: &q,
            settled: false,
        })
    };
    // A reply to a question's message answers it by number or by label.
    let ParseResult::Partial { state: Some(s) } = parse(&reply(&m0, "2")) else {
        panic!("expected partial")
    };
    assert_eq!(s["picks"][0], json!(["prod"]));
    let ParseResult::Partial { state: Some(s) } = parse(&reply(&m1, "a, b")) else {
        panic!("expected partial")
    };
    assert_eq!(s["picks"][1], json!(["a", "b"]));
    // A number that is no option is refused; several on a one-choice question too.
    assert!(matches!(
        parse(&reply(&m0, "7")),
        ParseResult::Rejected { .. }
    ));
    assert!(matches!(
        parse(&reply(&m0, "1, 2")),
        ParseResult::Rejected { .. }
    ));
    // A message that replies to nothing does not say which of three questions it answers.
    let mut plain = reply(&m0, "2");
    if let Interaction::Message { message } = &mut plain {
        message.reply_to = None;
    }
    assert_eq!(parse(&plain), ParseResult::Ignore);
}

#[tokio::test]
async fn in_a_one_question_set_any_message_answers() {
    let (_fake, hooks) = start().await;
    let c: QuestionCall = serde_json::from_value(json!({"toolCallId": "call-3", "input": {
        "questions": [{"header": "Env", "question": "Where?",
            "options": [{"label": "staging"}, {"label": "prod"}], "custom": true}]
    }}))
    .unwrap();
    let q = record(&[(100, 0)], 0, None);
    let parse = |text: &str| {
        let mut i = reply("x", text);
        if let Interaction::Message { message } = &mut i {
            message.reply_to = None;
        }
        hooks.parse(ParseArgs {
            call: &c,
            interaction: &i,
            question: &q,
            settled: false,
        })
    };
    let ParseResult::Answer { output } = parse("PROD") else {
        panic!("expected an answer")
    };
    assert_eq!(output.answers[0].selected, ["prod"]);
    let ParseResult::Answer { output } = parse("the blue one") else {
        panic!("expected an answer")
    };
    assert_eq!(output.answers[0].selected, ["the blue one"]);
    assert_eq!(parse("   "), ParseResult::Ignore);
}

#[tokio::test]
async fn a_long_notice_is_cut_to_what_a_callback_answer_shows() {
    let api = RecordingTelegram::new();
    let hooks = TelegramQuestions::new(api);
    let c = call();
    let req = RequestContext::default();
    let t = thread();
    let q = record(&[(100, 0)], 0, None);
    let args = HookArgs {
        call: &c,
        question: &q,
        req: &req,
        thread: &t,
    };
    let reason = "too long ".repeat(100);
    hooks
        .rejected(args, &click(&format!("{CHAT}:100"), "q0:0:1"), &reason)
        .await
        .unwrap();
    let calls = hooks.api().calls();
    let [
        ApiCall::AnswerCallbackQuery {
            id,
            text: Some(text),
        },
    ] = calls.as_slice()
    else {
        panic!("{calls:?}")
    };
    assert_eq!(id, "cbq-1");
    assert!(text.chars().count() <= MAX_NOTICE);
    assert!(text.starts_with("too long"));
}

// ---- issue 38: no silent limits ----------------------------------------------------------------

fn big_call(n: usize, multiple: bool, label: impl Fn(usize) -> String) -> QuestionCall {
    serde_json::from_value(json!({"toolCallId": "call-big", "input": {"questions": [
        {"header": "Pick", "question": "Which?", "multiple": multiple,
         "options": (1..=n).map(|i| json!({"label": label(i)})).collect::<Vec<_>>()}
    ]}}))
    .unwrap()
}

/// At the keyboard's limit (99 options and Skip; 98, Done and Skip for `multiple`) and one past
/// it, every option can be chosen: by its button up to the limit; past it every option is listed,
/// numbered, and a reply with the number answers — no keyboard showing only some.
#[tokio::test]
async fn every_option_can_be_chosen_at_the_keyboard_limit_and_past_it() {
    let (fake, hooks) = start().await;
    let o = |i: usize| format!("o{i}");
    let req = RequestContext::default();
    let t = thread();
    for (n, multiple) in [
        (99, false),
        (100, false),
        (98, true),
        (99, true),
        (30, true),
    ] {
        let c = big_call(n, multiple, o);
        let before = fake.calls("sendmessage").len();
        let out = hooks
            .render(RenderArgs {
                calls: std::slice::from_ref(&c),
                req: &req,
                thread: &t,
            })
            .await
            .unwrap();
        let sent = fake.calls("sendmessage")[before..].to_vec();
        let last = sent.last().unwrap();
        let id = out[0].messages.last().unwrap().id.clone();
        let kb = last["reply_markup"]["inline_keyboard"].as_array().unwrap();
        let buttons: Vec<&Value> = kb.iter().flat_map(|r| r.as_array().unwrap()).collect();
        let q = QuestionRecord {
            messages: out[0].messages.clone(),
            revision: 0,
            state: out[0].state.clone(),
        };
        let parse = |i: &Interaction| {
            hooks.parse(ParseArgs {
                call: &c,
                interaction: i,
                question: &q,
                settled: false,
            })
        };
        let limit = if multiple { 98 } else { 99 };
        if n <= limit {
            let options: Vec<&&Value> = buttons
                .iter()
                .filter(|b| b["text"].as_str().unwrap().starts_with('o'))
                .collect();
            assert_eq!(options.len(), n, "{n}: a button per option");
            assert!(buttons.len() <= 100, "{n}: within Telegram's keyboard");
            if !multiple {
                let data = options.last().unwrap()["callback_data"].as_str().unwrap();
                let ParseResult::Answer { output } = parse(&click(&id, data)) else {
                    panic!("{n}: the last button answers")
                };
                assert_eq!(output.answers[0].selected, [o(n)]);
            }
        } else {
            assert_eq!(
                buttons.len(),
                1,
                "{n}: Skip alone, no keyboard showing only some"
            );
            let text: String = sent
                .iter()
                .map(|m| m["text"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
                .join("\n");
            for i in 1..=n {
                assert!(
                    text.lines().any(|l| l == format!("{i}. o{i}")),
                    "{n}: option {i} listed"
                );
            }
            let (typed, want) = if multiple {
                (format!("1, {n}"), vec![o(1), o(n)])
            } else {
                (n.to_string(), vec![o(n)])
            };
            let ParseResult::Answer { output } = parse(&reply(&id, &typed)) else {
                panic!("{n}: a reply with the number answers")
            };
            assert_eq!(output.answers[0].selected, want);
        }
        assert!(
            sent.iter()
                .all(|m| m["text"].as_str().unwrap().chars().count() <= 4096),
            "{n}: within a message"
        );
    }
}

/// A list longer than one message continues in messages before the keyboard's, nothing cut; a
/// label longer than a button shows is written out in full.
#[tokio::test]
async fn a_long_list_continues_before_the_keyboard_and_long_labels_are_written_out() {
    let (fake, hooks) = start().await;
    let req = RequestContext::default();
    let t = thread();
    let long = |i: usize| format!("option {i} {}", "y".repeat(70));
    let c = big_call(150, false, long);
    let out = hooks
        .render(RenderArgs {
            calls: std::slice::from_ref(&c),
            req: &req,
            thread: &t,
        })
        .await
        .unwrap();
    let sent = fake.calls("sendmessage");
    assert!(sent.len() > 1, "several messages");
    let text: String = sent
        .iter()
        .map(|m| m["text"].as_str().unwrap().to_owned())
        .collect::<Vec<_>>()
        .join("\n");
    for i in 1..=150 {
        assert!(text.contains(&long(i)), "option {i} shown");
    }
    assert!(sent.last().unwrap()["reply_markup"].is_object());
    assert_eq!(
        out[0].messages.len(),
        1,
        "the keyboard's message is the question's"
    );

    let before = fake.calls("sendmessage").len();
    let c = big_call(2, false, |i| format!("{i}{}", "z".repeat(70)));
    hooks
        .render(RenderArgs {
            calls: std::slice::from_ref(&c),
            req: &req,
            thread: &t,
        })
        .await
        .unwrap();
    let m = &fake.calls("sendmessage")[before];
    assert!(
        m["text"]
            .as_str()
            .unwrap()
            .contains(&format!("1{}", "z".repeat(70)))
    );
}

/// A card (several inputs, one not a choice) whose choices with `a`, `b` options and a confirm.
fn card_call(a: usize, b: usize, label: impl Fn(usize, usize) -> String) -> QuestionCall {
    let options = |q: usize, n: usize| {
        (1..=n)
            .map(|i| json!({"label": label(q, i)}))
            .collect::<Vec<_>>()
    };
    serde_json::from_value(json!({"toolCallId": "call-card", "input": {"questions": [
        {"header": "A", "question": "Which a?", "options": options(0, a)},
        {"header": "B", "question": "Which b?", "options": options(1, b)},
        {"header": "Go", "question": "Ready?", "kind": "confirm"}
    ]}}))
    .unwrap()
}

/// A card's keyboard holds 100 buttons: Send answers, Skip, one per confirm, and the choices'
/// options, each choice all of its options or none. At the limit (95 + 2 + 1 + 2 = 100) every
/// option is a button; one past it (96 + 2) the choice that no longer fits — and a choice larger
/// than the whole keyboard — is listed, numbered, in a prompt of its own answered by a reply with
/// the number. Every option of every question stays answerable; nothing shows only some.
#[tokio::test]
async fn every_option_of_a_card_set_can_be_chosen_at_the_keyboard_limit_and_past_it() {
    let (fake, hooks) = start().await;
    let req = RequestContext::default();
    let t = thread();
    let label = |q: usize, i: usize| format!("{}{i}", ["a", "b"][q]);
    // (options of A, of B, which are listed)
    for (a, b, listed) in [
        (95, 2, [false, false]),
        (96, 2, [false, true]),
        (98, 2, [true, false]),
        (150, 120, [true, true]),
    ] {
        let c = card_call(a, b, label);
        let before = fake.calls("sendmessage").len();
        let out = hooks
            .render(RenderArgs {
                calls: std::slice::from_ref(&c),
                req: &req,
                thread: &t,
            })
            .await
            .unwrap_or_else(|e| panic!("{a}+{b}: Telegram refused the card: {e}"));
        let sent = fake.calls("sendmessage")[before..].to_vec();
        assert!(
            sent.iter()
                .all(|m| m["text"].as_str().unwrap().chars().count() <= 4096)
        );
        let card = out[0].messages.last().unwrap();
        assert_eq!(card.question, None, "the card is last");
        let card_body = sent.last().unwrap();
        let buttons: Vec<(String, String)> = card_body["reply_markup"]["inline_keyboard"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r.as_array().unwrap())
            .map(|b| {
                (
                    b["text"].as_str().unwrap().to_owned(),
                    b["callback_data"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert!(buttons.len() <= 100, "{a}+{b}: {} buttons", buttons.len());
        let q = QuestionRecord {
            messages: out[0].messages.clone(),
            revision: 0,
            state: out[0].state.clone(),
        };
        let picked = |i: &Interaction, question: usize| -> Vec<String> {
            let r = hooks.parse(ParseArgs {
                call: &c,
                interaction: i,
                question: &q,
                settled: false,
            });
            let ParseResult::Partial { state } = r else {
                panic!("{a}+{b}: not taken: {r:?}")
            };
            frogbot_model::Progress::from_state(&c.input, state.as_ref()).picks[question]
                .clone()
                .unwrap_or_default()
        };
        for (question, n) in [(0, a), (1, b)] {
            let header = ["A", "B"][question];
            let on_card: Vec<&(String, String)> = buttons
                .iter()
                .filter(|(t, _)| t.starts_with(&format!("{header}: ")))
                .collect();
            if listed[question] {
                assert!(on_card.is_empty(), "{a}+{b}: {header} shows no button");
                let prompt = out[0]
                    .messages
                    .iter()
                    .find(|m| m.question == Some(question))
                    .unwrap_or_else(|| panic!("{a}+{b}: {header} has a prompt"));
                let text: String = sent
                    .iter()
                    .map(|m| m["text"].as_str().unwrap().to_owned())
                    .collect::<Vec<_>>()
                    .join("\n");
                for i in 1..=n {
                    assert!(
                        text.lines()
                            .any(|l| l == format!("{i}. {}", label(question, i))),
                        "{a}+{b}: {header} option {i} listed"
                    );
                }
                let r = hooks.parse(ParseArgs {
                    call: &c,
                    interaction: &reply(&prompt.id, "the blue one"),
                    question: &q,
                    settled: false,
                });
                assert!(
                    matches!(&r, ParseResult::Rejected { reason } if reason.contains("number")),
                    "{a}+{b}: {r:?}"
                );
                for i in [1, n] {
                    assert_eq!(
                        picked(&reply(&prompt.id, &i.to_string()), question),
                        [label(question, i)],
                        "{a}+{b}: a reply with {i} answers {header}"
                    );
                }
                assert!(
                    card_body["text"]
                        .as_str()
                        .unwrap()
                        .contains("reply to its message above with the number"),
                    "{a}+{b}: the card says how {header} is answered"
                );
            } else {
                assert_eq!(on_card.len(), n, "{a}+{b}: a button per option of {header}");
                for (i, (_, data)) in on_card.iter().enumerate() {
                    assert_eq!(
                        picked(&click(&card.id, data), question),
                        [label(question, i + 1)]
                    );
                }
            }
        }
        assert!(
            buttons.iter().any(|(t, _)| t == "Confirm"),
            "{a}+{b}: the confirm"
        );
    }
}

/// A card whose questions written out in full would not fit one message: they are posted in full
/// before it (nothing cut) and the card lists each input by its header with its answer.
#[tokio::test]
async fn a_card_too_long_for_a_message_writes_its_questions_out_above() {
    let (fake, hooks) = start().await;
    let req = RequestContext::default();
    let t = thread();
    let long = |c: char| format!("{} — the end of {c}.", c.to_string().repeat(1_500));
    let c: QuestionCall =
        serde_json::from_value(json!({"toolCallId": "call-long", "input": {"questions": [
            {"header": "A", "question": long('a'), "options": [{"label": "x"}, {"label": "y"}]},
            {"header": "B", "question": long('b'), "kind": "toggle"},
            {"header": "C", "question": long('c'), "kind": "text_input"},
            {"header": "D", "question": long('d'), "kind": "confirm"}
        ]}}))
        .unwrap();
    hooks
        .render(RenderArgs {
            calls: std::slice::from_ref(&c),
            req: &req,
            thread: &t,
        })
        .await
        .unwrap();
    let sent = fake.calls("sendmessage");
    let texts: Vec<&str> = sent.iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert!(texts.iter().all(|t| t.chars().count() <= 4096));
    let all = texts.join("\n");
    for ch in ['a', 'b', 'c', 'd'] {
        assert!(all.contains(&format!("the end of {ch}.")), "{ch} in full");
    }
    let card = texts.last().unwrap();
    assert!(card.contains("written out in full above"), "{card}");
    for h in ["❓ A", "❓ B", "❓ C", "❓ D"] {
        assert!(card.contains(h), "{card}");
    }
    // One notification: the first message, which starts the questions.
    let loud: Vec<usize> = sent
        .iter()
        .enumerate()
        .filter(|(_, m)| m["disable_notification"] != true)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(loud, [0]);
    assert!(texts[0].starts_with("❓ A"), "{}", texts[0]);
}

/// A lone text input whose question is longer than a message: it continues in messages before
/// its prompt, nothing cut, the prompt last.
#[tokio::test]
async fn a_long_prompt_continues_before_the_reply_prompt() {
    let (fake, hooks) = start().await;
    let req = RequestContext::default();
    let t = thread();
    let question = format!("{} — the end.", "why ".repeat(1_500));
    let c: QuestionCall = serde_json::from_value(json!({"toolCallId": "call-why", "input": {
        "questions": [{"header": "Why", "question": question, "kind": "text_input"}]}}))
    .unwrap();
    let out = hooks
        .render(RenderArgs {
            calls: std::slice::from_ref(&c),
            req: &req,
            thread: &t,
        })
        .await
        .unwrap();
    let sent = fake.calls("sendmessage");
    assert!(sent.len() >= 2, "several messages");
    let texts: Vec<&str> = sent.iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert!(texts.iter().all(|t| t.chars().count() <= 4096));
    assert!(texts.join("\n").contains("the end."));
    assert_eq!(sent.last().unwrap()["reply_markup"]["force_reply"], true);
    assert_eq!(
        out[0].messages.len(),
        1,
        "the prompt is the question's message"
    );
}

/// Callback data is 1–64 bytes (Bot API `InlineKeyboardButton.callback_data`): this adapter's
/// tokens are at most 44 (the worst case, every number at its largest, is in `ids`'s tests); the
/// fake takes data of 64 bytes and refuses 65 as Telegram does (`BUTTON_DATA_INVALID`), so a
/// token that ever grew past the limit would fail every test that draws it.
#[tokio::test]
async fn callback_data_at_64_bytes_is_taken_and_65_refused() {
    use frogbot_telegram::TelegramApi;
    use frogbot_telegram::ids::{MAX_CALLBACK_DATA, Pick, Token};
    use teloxide::types::{ChatId, InlineKeyboardButton, InlineKeyboardMarkup, ReplyMarkup};
    let worst = Token {
        revision: u64::MAX,
        question: usize::MAX,
        pick: Pick::Option(usize::MAX),
    };
    assert!(
        worst.encode().len() <= MAX_CALLBACK_DATA,
        "{}",
        worst.encode()
    );
    let (_fake, hooks) = start().await;
    let send = |data: String| {
        let kb = InlineKeyboardMarkup::new([[InlineKeyboardButton::callback("x", data)]]);
        async {
            hooks
                .api()
                .send_message(
                    SendTo::new(ChatId(CHAT), None),
                    "q",
                    None,
                    Some(ReplyMarkup::InlineKeyboard(kb)),
                )
                .await
        }
    };
    assert!(send("d".repeat(MAX_CALLBACK_DATA)).await.is_ok());
    let e = send("d".repeat(MAX_CALLBACK_DATA + 1)).await.unwrap_err();
    assert!(e.to_string().contains("BUTTON_DATA_INVALID"), "{e}");
}
