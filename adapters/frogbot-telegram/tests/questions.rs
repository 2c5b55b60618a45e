//! The question hooks against a local fake Bot API (axum on 127.0.0.1:0), with teloxide's `Bot`
//! pointed at it: documented response shapes, a `429` with `retry_after`, and the pure `parse`.

use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use frogbot_core::model::{
    ActionEvent, ChannelQuestions, HookArgs, Interaction, ParseArgs, ParseResult, PlatformUser,
    QuestionCall, QuestionMessage, QuestionOutcome, QuestionRecord, RenderArgs, RequestContext,
    Thread, ThreadMessage, ThreadMessageMetadata,
};
use frogbot_telegram::TelegramQuestions;
use frogbot_telegram::questions::STALE_TEXT;
use serde_json::{Value, json};
use teloxide::Bot;

const CHAT: i64 = -100200;

#[derive(Default)]
struct Fake {
    /// (method in lower case, JSON body) of every call.
    calls: Mutex<Vec<(String, Value)>>,
    next_id: AtomicI64,
    /// How many `sendMessage` calls still get a 429.
    throttle_sends: AtomicU32,
}

impl Fake {
    fn calls(&self, method: &str) -> Vec<Value> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, b)| b.clone())
            .collect()
    }
}

fn message(id: i64, chat: &Value, text: &Value) -> Value {
    json!({
        "message_id": id, "date": 1_767_225_600,
        "chat": {"id": chat, "type": "supergroup", "title": "Ops"},
        "from": {"id": 999, "is_bot": true, "first_name": "FrogBot", "username": "frogbot"},
        "text": text
    })
}

async fn api(State(fake): State<Arc<Fake>>, uri: Uri, body: Bytes) -> Response {
    let method = uri
        .path()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_lowercase();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    fake.calls
        .lock()
        .unwrap()
        .push((method.clone(), body.clone()));
    let ok = |result: Value| axum::Json(json!({"ok": true, "result": result})).into_response();
    match method.as_str() {
        "sendmessage" => {
            let throttled = fake
                .throttle_sends
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if throttled {
                return (
                    StatusCode::TOO_MANY_REQUESTS,
                    axum::Json(json!({
                        "ok": false, "error_code": 429,
                        "description": "Too Many Requests: retry after 1",
                        "parameters": {"retry_after": 1}
                    })),
                )
                    .into_response();
            }
            let id = fake.next_id.fetch_add(1, Ordering::SeqCst) + 100;
            ok(message(id, &body["chat_id"], &body["text"]))
        }
        "editmessagetext" | "editmessagereplymarkup" => ok(message(
            body["message_id"].as_i64().unwrap_or(0),
            &body["chat_id"],
            &body.get("text").cloned().unwrap_or(json!("x")),
        )),
        "answercallbackquery" => ok(json!(true)),
        _ => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"ok": false, "error_code": 404, "description": "Not Found"})),
        )
            .into_response(),
    }
}

async fn start() -> (Arc<Fake>, TelegramQuestions<Bot>) {
    let fake = Arc::new(Fake::default());
    let app = Router::new().fallback(api).with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let url = url::Url::parse(&format!("http://{addr}/")).unwrap();
    let bot = Bot::new("123:TEST").set_api_url(url);
    (fake, TelegramQuestions::new(bot))
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
async fn render_sends_keyboards_and_a_force_reply_prompt() {
    let (fake, hooks) = start().await;
    let c = call();
    let req = RequestContext::default();
    let out = hooks
        .render(RenderArgs {
            calls: std::slice::from_ref(&c),
            req: &req,
            thread: &thread(),
        })
        .await
        .unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].calls, ["call-1"]);
    let ids: Vec<_> = out[0].messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            format!("{CHAT}:100"),
            format!("{CHAT}:101"),
            format!("{CHAT}:102")
        ]
    );
    assert_eq!(out[0].messages[2].question, Some(2));
    assert_eq!(out[0].messages[0].posted_at, "2026-01-01T00:00:00Z");
    let sent = fake.calls("sendmessage");
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[0]["chat_id"], json!(CHAT));
    let kb = &sent[0]["reply_markup"]["inline_keyboard"];
    assert_eq!(kb[0][0]["text"], "staging");
    assert_eq!(kb[0][0]["callback_data"], "q0:0:0");
    assert_eq!(kb[1][0]["callback_data"], "q0:0:1");
    assert_eq!(
        sent[1]["reply_markup"]["inline_keyboard"][2][0]["callback_data"],
        "q0:1:d"
    );
    assert_eq!(sent[2]["reply_markup"]["force_reply"], json!(true));
    assert_eq!(
        out[0].state.as_ref().unwrap()["prompts"],
        json!([format!("{CHAT}:102")])
    );
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
    assert_eq!(s["toggled"][1], json!([1]));
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
    hooks.updated(args, None).await.unwrap();
    let edits = fake.calls("editmessagereplymarkup");
    assert_eq!(edits.len(), 2, "the prompt has no keyboard");
    assert_eq!(edits[1]["message_id"], 101);
    let kb = &edits[1]["reply_markup"]["inline_keyboard"];
    assert_eq!(kb[0][0]["text"], "✓ a");
    assert_eq!(kb[0][0]["callback_data"], "q4:1:0");
}

#[tokio::test]
async fn settled_edits_every_message_and_removes_keyboards() {
    let (fake, hooks) = start().await;
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
    assert_eq!(hooks.settled(args, None, &outcome).await.unwrap(), None);
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
    assert!(edits[0]["text"].as_str().unwrap().ends_with("✅ prod"));
    assert!(edits[1]["text"].as_str().unwrap().ends_with("✅ a, b"));
    assert!(edits[2]["text"].as_str().unwrap().ends_with("✅ ship it"));
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
    hooks
        .stale(args, &click(&format!("{CHAT}:100"), "q0:0:1"))
        .await
        .unwrap();
    let answers = fake.calls("answercallbackquery");
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["callback_query_id"], "cbq-1");
    assert_eq!(answers[0]["text"], STALE_TEXT);
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
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["text"], "The answer is empty.");
    assert_eq!(sent[0]["reply_parameters"]["message_id"], 500);
}

#[tokio::test]
async fn a_429_is_waited_out_and_the_message_is_not_dropped() {
    let (fake, hooks) = start().await;
    fake.throttle_sends.store(1, Ordering::SeqCst);
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
