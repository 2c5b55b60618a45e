//! `DiscordQuestions` against a local fake Discord HTTP API (axum on 127.0.0.1), with serenity's
//! real `Http` pointed at it through its proxy setting (which needs the rate limiter disabled).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{patch, post};
use frogbot_core::model::{
    ActionEvent, ChannelQuestions, HookArgs, Interaction, ParseArgs, ParseResult, PlatformUser,
    QuestionAnswer, QuestionCall, QuestionOutcome, QuestionOutput, QuestionRecord, RenderArgs,
    RequestContext, Thread,
};
use frogbot_discord::DiscordQuestions;
use serde_json::{Value, json};
use serenity::http::{Http, HttpBuilder};
use serenity::model::id::{ApplicationId, InteractionId};

const APP_ID: u64 = 600000000000000006;
const THREAD: &str = "700000000000000007";

#[derive(Clone, Default)]
struct Fake {
    calls: Arc<Mutex<Vec<(Method, String, Value)>>>,
    next_id: Arc<AtomicU64>,
}

impl Fake {
    fn record(&self, method: Method, uri: &Uri, body: &str) {
        let body = serde_json::from_str(body).unwrap_or(Value::Null);
        self.calls
            .lock()
            .unwrap()
            .push((method, uri.path().to_owned(), body));
    }

    fn calls(&self) -> Vec<(Method, String, Value)> {
        self.calls.lock().unwrap().clone()
    }
}

fn message(id: &str, channel: &str, body: &Value) -> Value {
    json!({
        "id": id,
        "channel_id": channel,
        "author": {"id": APP_ID.to_string(), "username": "frogbot", "discriminator": "0", "avatar": null, "bot": true},
        "content": body.get("content").cloned().unwrap_or(json!("")),
        "timestamp": "2026-01-01T00:00:00.000000+00:00",
        "edited_timestamp": null,
        "tts": false,
        "mention_everyone": false,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": false,
        "type": 0,
        "components": body.get("components").cloned().unwrap_or(json!([]))
    })
}

async fn create_message(
    State(fake): State<Fake>,
    Path(channel): Path<String>,
    uri: Uri,
    body: String,
) -> Response {
    fake.record(Method::POST, &uri, &body);
    let id = 900000000000000000 + fake.next_id.fetch_add(1, Ordering::SeqCst);
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    axum::Json(message(&id.to_string(), &channel, &body)).into_response()
}

async fn edit_message(
    State(fake): State<Fake>,
    Path((channel, id)): Path<(String, String)>,
    uri: Uri,
    body: String,
) -> Response {
    fake.record(Method::PATCH, &uri, &body);
    if id == "404" {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"message": "Unknown Message", "code": 10008})),
        )
            .into_response();
    }
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    axum::Json(message(&id, &channel, &body)).into_response()
}

async fn followup(State(fake): State<Fake>, uri: Uri, body: String) -> Response {
    fake.record(Method::POST, &uri, &body);
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    axum::Json(message("950000000000000000", THREAD, &body)).into_response()
}

async fn callback(State(fake): State<Fake>, uri: Uri, body: String) -> StatusCode {
    fake.record(Method::POST, &uri, &body);
    StatusCode::NO_CONTENT
}

async fn start() -> (Fake, Arc<Http>) {
    let fake = Fake::default();
    let app = Router::new()
        .route("/api/v10/channels/{id}/messages", post(create_message))
        .route(
            "/api/v10/channels/{cid}/messages/{mid}",
            patch(edit_message),
        )
        .route("/api/v10/webhooks/{app}/{token}", post(followup))
        .route(
            "/api/v10/interactions/{id}/{token}/callback",
            post(callback),
        )
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let http = HttpBuilder::new("fake-token")
        .proxy(format!("http://{addr}"))
        .ratelimiter_disabled(true)
        .application_id(ApplicationId::new(APP_ID))
        .build();
    (fake, Arc::new(http))
}

fn thread() -> Thread {
    Thread {
        id: THREAD.into(),
        platform: "discord".into(),
        chat_id: "chat-1".into(),
    }
}

fn call() -> QuestionCall {
    serde_json::from_value(json!({
        "toolCallId": "call-1",
        "input": {"questions": [
            {"header": "Colour", "question": "Which colour?", "options": [{"label": "red"}, {"label": "green"}]},
            {"header": "Size", "question": "Which size?", "options": [{"label": "S"}, {"label": "M"}, {"label": "L"}], "multiple": true, "custom": true}
        ]}
    }))
    .unwrap()
}

fn click(action_id: &str, message_id: &str, values: &[&str]) -> Interaction {
    Interaction::Action {
        event: ActionEvent {
            action_id: action_id.into(),
            value: values.first().map(|v| v.to_string()),
            message_id: message_id.into(),
            user: PlatformUser {
                id: "300000000000000003".into(),
                name: None,
                is_bot: false,
            },
            trigger_id: Some("tok-click".into()),
            raw: json!({"data": {"custom_id": action_id, "values": values}}),
        },
    }
}

#[tokio::test]
async fn render_posts_components_and_steps_through_the_set() {
    let (fake, http) = start().await;
    let piece = DiscordQuestions::new(http);
    let call = call();
    let req = RequestContext::default();
    let thread = thread();
    let rendered = piece
        .render(RenderArgs {
            calls: std::slice::from_ref(&call),
            req: &req,
            thread: &thread,
        })
        .await
        .unwrap();
    assert_eq!(rendered.len(), 1);
    assert_eq!(rendered[0].calls, vec!["call-1"]);
    let first = &rendered[0].messages[0];
    assert_eq!(first.id, "900000000000000000");
    assert_eq!(first.question, Some(0));
    assert!(first.posted_at.starts_with("2026-01-01T00:00:00"));

    let calls = fake.calls();
    assert_eq!(calls.len(), 1);
    let (method, path, body) = &calls[0];
    assert_eq!(*method, Method::POST);
    assert_eq!(path, &format!("/api/v10/channels/{THREAD}/messages"));
    assert_eq!(body["content"], "**Colour** (1/2)\nWhich colour?");
    let buttons = body["components"][0]["components"].as_array().unwrap();
    assert_eq!(buttons.len(), 2);
    assert_eq!(buttons[1]["custom_id"], "fq:0:0:1");
    assert_eq!(buttons[1]["label"], "green");

    // A click on "green" advances the set.
    let mut record = QuestionRecord {
        messages: rendered[0].messages.clone(),
        revision: 0,
        state: rendered[0].state.clone(),
    };
    let clicked = click("fq:0:0:1", &first.id, &[]);
    let result = piece.parse(ParseArgs {
        call: &call,
        interaction: &clicked,
        question: &record,
        settled: false,
    });
    let ParseResult::Partial { state } = result else {
        panic!("expected partial, got {result:?}")
    };
    record.revision = 1;
    record.state = state;
    let change = piece
        .updated(
            HookArgs {
                call: &call,
                question: &record,
                req: &req,
                thread: &thread,
            },
            Some(&clicked),
        )
        .await
        .unwrap()
        .unwrap();
    let messages = change.messages.unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1].question, Some(1));
    let (_, _, body) = fake.calls().pop().unwrap();
    let select = &body["components"][0]["components"][0];
    assert_eq!(select["custom_id"], "fq:1:1:s0");
    assert_eq!(select["max_values"], 3);
    assert_eq!(
        body["components"][1]["components"][0]["custom_id"],
        "fq:1:1:o"
    );
    record.messages = messages;

    // The old button is stale now; the select answers the set.
    let old = piece.parse(ParseArgs {
        call: &call,
        interaction: &clicked,
        question: &record,
        settled: false,
    });
    assert_eq!(old, ParseResult::Stale);
    let select = click("fq:1:1:s0", &record.messages[1].id, &["0", "2"]);
    let result = piece.parse(ParseArgs {
        call: &call,
        interaction: &select,
        question: &record,
        settled: false,
    });
    assert_eq!(
        result,
        ParseResult::Answer {
            output: QuestionOutput {
                answers: vec![
                    QuestionAnswer {
                        header: "Colour".into(),
                        selected: vec!["green".into()]
                    },
                    QuestionAnswer {
                        header: "Size".into(),
                        selected: vec!["S".into(), "L".into()]
                    },
                ]
            }
        }
    );
    // "Other…" is the receiver's side effect: parse ignores it.
    let other = click("fq:1:1:o", &record.messages[1].id, &[]);
    let result = piece.parse(ParseArgs {
        call: &call,
        interaction: &other,
        question: &record,
        settled: false,
    });
    assert_eq!(result, ParseResult::Ignore);
}

#[tokio::test]
async fn settled_edits_every_message_and_removes_components() {
    let (fake, http) = start().await;
    let piece = DiscordQuestions::new(http);
    let call = call();
    let req = RequestContext::default();
    let thread = thread();
    let record: QuestionRecord = serde_json::from_value(json!({
        "messages": [
            {"id": "910000000000000001", "postedAt": "", "question": 0},
            {"id": "910000000000000002", "postedAt": "", "question": 1}
        ],
        "revision": 1,
        "state": {"step": 1, "picks": [["red"]]}
    }))
    .unwrap();
    let outcome = QuestionOutcome::Answered(QuestionOutput {
        answers: vec![
            QuestionAnswer {
                header: "Colour".into(),
                selected: vec!["red".into()],
            },
            QuestionAnswer {
                header: "Size".into(),
                selected: vec!["M".into()],
            },
        ],
    });
    let change = piece
        .settled(
            HookArgs {
                call: &call,
                question: &record,
                req: &req,
                thread: &thread,
            },
            None,
            &outcome,
        )
        .await
        .unwrap();
    assert_eq!(change, None);
    let calls = fake.calls();
    assert_eq!(calls.len(), 2);
    for ((method, path, body), (id, answer)) in calls
        .iter()
        .zip([("910000000000000001", "red"), ("910000000000000002", "M")])
    {
        assert_eq!(*method, Method::PATCH);
        assert_eq!(path, &format!("/api/v10/channels/{THREAD}/messages/{id}"));
        assert_eq!(body["components"], json!([]));
        assert!(
            body["content"]
                .as_str()
                .unwrap()
                .ends_with(&format!("✅ Answered: {answer}")),
            "{body}"
        );
    }
}

#[tokio::test]
async fn stale_and_denied_send_ephemeral_followups() {
    let (fake, http) = start().await;
    let piece = DiscordQuestions::new(http);
    let call = call();
    let req = RequestContext::default();
    let thread = thread();
    let record: QuestionRecord = serde_json::from_value(json!({
        "messages": [{"id": "910000000000000001", "postedAt": ""}],
        "revision": 0
    }))
    .unwrap();
    let args = HookArgs {
        call: &call,
        question: &record,
        req: &req,
        thread: &thread,
    };
    let clicked = click("fq:0:0:0", "910000000000000001", &[]);
    piece.stale(args, &clicked).await.unwrap();
    piece.denied(args, &clicked).await.unwrap();
    piece
        .rejected(args, &clicked, "Not that one.")
        .await
        .unwrap();
    let calls = fake.calls();
    assert_eq!(calls.len(), 3);
    for ((method, path, body), text) in calls.iter().zip([
        frogbot_discord::questions::STALE_TEXT,
        frogbot_discord::questions::DENIED_TEXT,
        "Not that one.",
    ]) {
        assert_eq!(*method, Method::POST);
        assert_eq!(path, &format!("/api/v10/webhooks/{APP_ID}/tok-click"));
        assert_eq!(body["content"], text);
        assert_eq!(body["flags"], 64, "ephemeral");
    }
}

#[tokio::test]
async fn deferred_ack_and_other_modal_use_the_callback() {
    let (fake, http) = start().await;
    frogbot_discord::acknowledge(&http, InteractionId::new(500000000000000005), "tok-ack")
        .await
        .unwrap();
    let calls = fake.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0].1,
        "/api/v10/interactions/500000000000000005/tok-ack/callback"
    );
    assert_eq!(calls[0].2["type"], 6, "DEFERRED_UPDATE_MESSAGE");

    // "Other…": open the modal as the first response, its custom id the form locator.
    let piece = DiscordQuestions::new(http);
    let payload = json!({
        "id": "500000000000000006",
        "application_id": APP_ID.to_string(),
        "type": 3,
        "data": {"custom_id": "fq:1:1:o", "component_type": 2},
        "channel_id": THREAD,
        "user": {"id": "300000000000000003", "username": "bob", "discriminator": "0", "avatar": null},
        "token": "tok-other",
        "version": 1,
        "message": message("910000000000000002", THREAD, &json!({})),
        "locale": "en-US",
        "entitlements": [],
        "attachment_size_limit": 26214400
    });
    let interaction: serenity::model::application::ComponentInteraction =
        serde_json::from_value(payload).unwrap();
    assert!(frogbot_discord::questions::is_other(
        &interaction.data.custom_id
    ));
    piece.open_other(&interaction, &call()).await.unwrap();
    let (_, path, body) = fake.calls().pop().unwrap();
    assert_eq!(
        path,
        "/api/v10/interactions/500000000000000006/tok-other/callback"
    );
    assert_eq!(body["type"], 9);
    assert_eq!(
        body["data"]["custom_id"],
        format!("fq1:[\"{THREAD}\",\"910000000000000002\"]")
    );
    assert_eq!(
        body["data"]["components"][0]["components"][0]["custom_id"],
        "fq:1:1:t"
    );
}

#[tokio::test]
async fn settled_tries_every_message_even_when_one_edit_fails() {
    let (fake, http) = start().await;
    let piece = DiscordQuestions::new(http);
    let call = call();
    let req = RequestContext::default();
    let thread = thread();
    let record: QuestionRecord = serde_json::from_value(json!({
        "messages": [
            {"id": "404", "postedAt": "", "question": 0},
            {"id": "910000000000000002", "postedAt": "", "question": 1}
        ],
        "revision": 1
    }))
    .unwrap();
    let args = HookArgs {
        call: &call,
        question: &record,
        req: &req,
        thread: &thread,
    };
    let result = piece.settled(args, None, &QuestionOutcome::Dismissed).await;
    assert!(result.is_err());
    let calls = fake.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[1].1,
        format!("/api/v10/channels/{THREAD}/messages/910000000000000002")
    );
    assert_eq!(calls[1].2["components"], json!([]));
}

#[tokio::test]
async fn a_thread_message_is_answered_with_a_reply() {
    let (fake, http) = start().await;
    let piece = DiscordQuestions::new(http);
    let reply: Interaction = serde_json::from_value(json!({
        "type": "message",
        "message": {"id": "920000000000000001", "text": "maybe", "author": {"id": "3"}, "metadata": {"dateSent": "2026-01-01T00:00:00Z"}}
    }))
    .unwrap();
    piece
        .notify(&thread(), &reply, "Pick a button.")
        .await
        .unwrap();
    let (method, path, body) = fake.calls().pop().unwrap();
    assert_eq!(method, Method::POST);
    assert_eq!(path, format!("/api/v10/channels/{THREAD}/messages"));
    assert_eq!(body["content"], "Pick a button.");
    assert_eq!(
        body["message_reference"]["message_id"],
        "920000000000000001"
    );
}
