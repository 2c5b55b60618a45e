//! Retries and fallbacks against the fake Chat Completions server: which failures are tried
//! again, how often, after which wait, and never once an event reached the caller.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{
    FakeServer, Reply, UPSTREAM_MODEL, chunk, collect, collect_ok, data, sse, tool_fragment,
};
use frogbot_core::BoxError;
use frogbot_core::agent::{FinishReason, Model, ModelEvent, ModelMessage, ModelRequest};
use frogbot_core::model::Transient;
use frogbot_openai::{
    AllFailed, Error, OpenAiCompatible, OpenAiConfig, WithFallbacks, install_crypto_provider,
};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::Notify;

fn model(base_url: String, max_retries: u32) -> OpenAiCompatible {
    install_crypto_provider();
    OpenAiCompatible::new(OpenAiConfig {
        base_url,
        api_key: None,
        model: UPSTREAM_MODEL.to_owned(),
        max_retries,
    })
    .unwrap()
}

fn hello() -> ModelRequest {
    ModelRequest {
        instructions: String::new(),
        messages: vec![ModelMessage::User {
            text: "Hello".into(),
        }]
        .into(),
        tools: vec![].into(),
        reasoning: None,
    }
}

fn text_reply(text: &str) -> Reply {
    Reply::Sse(sse(&[
        chunk(json!({ "role": "assistant", "content": "" }), None),
        chunk(json!({ "content": text }), None),
        chunk(json!({}), Some("stop")),
    ]))
}

fn answered(text: &str) -> Vec<ModelEvent> {
    vec![
        ModelEvent::TextDelta(text.into()),
        ModelEvent::Finish {
            reason: FinishReason::Stop,
            usage: None,
        },
    ]
}

/// A status answer that asks to retry after `seconds` (as the `Retry-After` header's text).
fn status_after(code: u16, seconds: &str) -> Reply {
    Reply::StatusWith(
        code,
        vec![("retry-after", seconds.to_owned())],
        json!({ "error": { "message": format!("status {code}"), "type": "requests" } }).to_string(),
    )
}

/// Opens the stream with a guard against a wait that never ends.
async fn open(model: &dyn Model) -> Result<frogbot_core::agent::ModelStream, BoxError> {
    tokio::time::timeout(Duration::from_secs(30), model.stream(hello()))
        .await
        .expect("the call did not end")
}

fn error_of(error: &BoxError) -> &Error {
    error
        .downcast_ref::<Error>()
        .unwrap_or_else(|| panic!("not a frogbot_openai::Error: {error}"))
}

#[tokio::test]
async fn server_errors_are_retried_until_the_stream_answers() {
    // One plain 500 (the backoff's wait), one 503 that says to retry at once.
    let server = FakeServer::start_seq(vec![
        Reply::Status(500, "boom".into()),
        status_after(503, "0"),
        text_reply("third time"),
    ])
    .await;
    let model = model(server.base_url(), 2);

    let events = collect_ok(open(&model).await.unwrap()).await;

    assert_eq!(events, answered("third time"));
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn retries_stop_after_max_retries_and_the_error_stays_transient() {
    let server = FakeServer::start(status_after(500, "0")).await;
    let model = model(server.base_url(), 2);

    let error = open(&model).await.err().expect("every attempt failed");

    assert_eq!(server.received().len(), 3, "one request and two retries");
    assert!(
        matches!(error_of(&error), Error::GaveUp { attempts: 3, .. }),
        "{error:?}"
    );
    assert!(Transient::is_transient(error.as_ref()), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("HTTP 500") && message.contains("status 500"),
        "{message}"
    );
    assert!(message.contains("after 3 attempts"), "{message}");
}

#[tokio::test]
async fn no_retries_configured_sends_one_request() {
    let server = FakeServer::start(status_after(429, "0")).await;
    let model = model(server.base_url(), 0);

    let error = open(&model).await.err().expect("the 429 is the answer");

    assert_eq!(server.received().len(), 1);
    assert!(
        matches!(error_of(&error), Error::Status { status: 429, .. }),
        "{error:?}"
    );
    assert!(Transient::is_transient(error.as_ref()));
}

#[tokio::test]
async fn the_servers_retry_after_is_waited() {
    let server =
        FakeServer::start_seq(vec![status_after(429, "1"), text_reply("after the wait")]).await;
    let model = model(server.base_url(), 2);

    let events = collect_ok(open(&model).await.unwrap()).await;

    assert_eq!(events, answered("after the wait"));
    let received = server.received();
    assert_eq!(received.len(), 2);
    // A lower bound only: the client slept at least what the server asked.
    let waited = received[1].at - received[0].at;
    assert!(waited >= Duration::from_secs(1), "retried after {waited:?}");
}

#[tokio::test]
async fn a_retry_after_over_60_seconds_is_not_waited() {
    let server = FakeServer::start(status_after(429, "120")).await;
    let model = model(server.base_url(), 2);

    let error = open(&model)
        .await
        .err()
        .expect("fails at once instead of waiting two minutes");

    assert_eq!(server.received().len(), 1);
    assert!(
        matches!(error_of(&error), Error::WaitTooLong { seconds: 120, .. }),
        "{error:?}"
    );
    let transient = Transient::find(error.as_ref()).expect("transient");
    assert_eq!(transient.wait(), Some(Duration::from_secs(120)));
    assert!(error.to_string().contains("120 s"), "{error}");
}

#[tokio::test]
async fn an_exhausted_quota_is_not_retried() {
    let server = FakeServer::start(Reply::Status(
        429,
        json!({ "error": { "message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota" } })
            .to_string(),
    ))
    .await;
    let model = model(server.base_url(), 2);

    let error = open(&model).await.err().expect("quota");

    assert_eq!(server.received().len(), 1);
    assert!(!Transient::is_transient(error.as_ref()), "{error:?}");
    assert!(error.to_string().contains("current quota"), "{error}");
}

#[tokio::test]
async fn a_stream_closed_before_its_first_event_is_retried() {
    let server = FakeServer::start_seq(vec![
        // 200, then the body ends at once.
        Reply::Sse(vec![]),
        // 200, the role chunk and half a tool call (no event yet), then the body ends.
        Reply::Sse(vec![
            data(&chunk(json!({ "role": "assistant", "content": "" }), None)),
            data(&chunk(
                json!({ "tool_calls": [tool_fragment(0, Some("call_a"), Some("f"), "{\"a\"")] }),
                None,
            )),
        ]),
        text_reply("whole"),
    ])
    .await;
    let model = model(server.base_url(), 2);

    let events = collect_ok(open(&model).await.unwrap()).await;

    assert_eq!(
        events,
        answered("whole"),
        "no fragment of the failed attempts"
    );
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn an_error_object_before_the_first_event_is_retried_and_reported_when_it_persists() {
    let overloaded = Reply::Sse(sse(&[json!({
        "error": { "code": 502, "message": "Provider disconnected" },
    })]));
    let server = FakeServer::start_seq(vec![overloaded.clone(), text_reply("ok")]).await;
    let events = collect_ok(open(&model(server.base_url(), 1)).await.unwrap()).await;
    assert_eq!(events, answered("ok"));
    assert_eq!(server.received().len(), 2);

    let server = FakeServer::start(overloaded).await;
    let items = collect(open(&model(server.base_url(), 1)).await.unwrap()).await;
    assert_eq!(server.received().len(), 2);
    assert_eq!(items.len(), 1, "{items:?}");
    let error = items[0].as_ref().unwrap_err();
    assert!(
        matches!(error_of(error), Error::GaveUp { attempts: 2, .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("Provider disconnected"),
        "{error}"
    );
    assert!(Transient::is_transient(error.as_ref()));
}

#[tokio::test]
async fn nothing_is_retried_after_the_first_token() {
    // The connection is cut after a token.
    let cut = Arc::new(Notify::new());
    let server = FakeServer::start(Reply::SseThenAbort(
        vec![data(&chunk(
            json!({ "role": "assistant", "content": "Hal" }),
            None,
        ))],
        cut.clone(),
    ))
    .await;
    let cut_model = model(server.base_url(), 3);
    let mut stream = open(&cut_model).await.unwrap();
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        ModelEvent::TextDelta("Hal".into())
    );
    cut.notify_one();
    let rest = collect(stream).await;
    assert_eq!(rest.len(), 1, "{rest:?}");
    let error = rest[0].as_ref().unwrap_err();
    assert!(matches!(error_of(error), Error::Stream(_)), "{error:?}");
    let transient = Transient::find(error.as_ref()).expect("a cut is transient");
    assert!(transient.may_be_done());
    assert_eq!(server.received().len(), 1, "not retried after a token");

    // The body ends cleanly after a token, without a finish_reason.
    let server = FakeServer::start(Reply::Sse(vec![data(&chunk(
        json!({ "role": "assistant", "content": "Hal" }),
        None,
    ))]))
    .await;
    let items = collect(open(&model(server.base_url(), 3)).await.unwrap()).await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(matches!(
        error_of(items[1].as_ref().unwrap_err()),
        Error::Incomplete(_)
    ));
    assert_eq!(server.received().len(), 1, "not retried after a token");
}

#[tokio::test]
async fn a_refused_connection_is_retried_and_stays_transient() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let model = model(format!("http://{addr}/v1"), 1);

    let error = open(&model).await.err().expect("nothing listens");

    assert!(
        matches!(error_of(&error), Error::GaveUp { attempts: 2, last } if matches!(**last, Error::Connection(_))),
        "{error:?}"
    );
    assert!(!Transient::find(error.as_ref()).unwrap().may_be_done());
}

// Fallbacks

fn with_backup(primary: &FakeServer, backup: &FakeServer, retries: u32) -> WithFallbacks {
    WithFallbacks::new("main", Arc::new(model(primary.base_url(), retries))).fallback(
        "backup",
        Arc::new(model(backup.base_url(), 0)),
        vec!["low".into()],
    )
}

#[tokio::test]
async fn a_fallback_answers_once_the_models_retries_are_used_up() {
    let primary = FakeServer::start(status_after(503, "0")).await;
    let backup = FakeServer::start(text_reply("from the backup")).await;
    let model = with_backup(&primary, &backup, 1);
    let mut request = hello();
    request.reasoning = Some("high".into());

    let events = collect_ok(model.stream(request).await.unwrap()).await;

    let mut expected = vec![ModelEvent::Fallback {
        model: "backup".into(),
    }];
    expected.extend(answered("from the backup"));
    assert_eq!(events, expected);
    assert_eq!(
        primary.received().len(),
        2,
        "the primary's retries came first"
    );
    let to_backup = backup.received();
    assert_eq!(to_backup.len(), 1);
    assert_eq!(primary.received()[0].body["reasoning_effort"], "high");
    assert!(
        to_backup[0].body.get("reasoning_effort").is_none(),
        "an option the backup does not offer is left out: {}",
        to_backup[0].body
    );
}

#[tokio::test]
async fn a_fallback_answers_when_the_stream_breaks_before_its_first_event() {
    let primary = FakeServer::start(Reply::Sse(vec![])).await;
    let backup = FakeServer::start(text_reply("backup")).await;
    let model = with_backup(&primary, &backup, 0);

    let events = collect_ok(model.stream(hello()).await.unwrap()).await;

    assert_eq!(
        events[0],
        ModelEvent::Fallback {
            model: "backup".into()
        }
    );
    assert_eq!(primary.received().len(), 1);
    assert_eq!(backup.received().len(), 1);
}

#[tokio::test]
async fn no_fallback_for_a_permanent_failure_or_after_the_first_token() {
    let backup = FakeServer::start(text_reply("backup")).await;
    let refused = FakeServer::start(Reply::Status(
        400,
        r#"{"error":{"message":"bad request"}}"#.into(),
    ))
    .await;
    let error = with_backup(&refused, &backup, 2)
        .stream(hello())
        .await
        .err()
        .expect("a 400 is the answer");
    assert!(
        matches!(error_of(&error), Error::Status { status: 400, .. }),
        "{error:?}"
    );

    let half = FakeServer::start(Reply::Sse(vec![data(&chunk(
        json!({ "role": "assistant", "content": "Hal" }),
        None,
    ))]))
    .await;
    let items = collect(
        with_backup(&half, &backup, 2)
            .stream(hello())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(
        items[0].as_ref().unwrap(),
        &ModelEvent::TextDelta("Hal".into())
    );
    assert!(matches!(
        error_of(items[1].as_ref().unwrap_err()),
        Error::Incomplete(_)
    ));
    assert!(backup.received().is_empty(), "the backup was never asked");
}

#[tokio::test]
async fn when_every_model_fails_each_failure_is_reported() {
    let primary = FakeServer::start(status_after(500, "0")).await;
    let backup = FakeServer::start(Reply::Sse(vec![])).await;
    let model = with_backup(&primary, &backup, 1);

    let items = collect(model.stream(hello()).await.unwrap()).await;

    assert_eq!(items.len(), 1, "{items:?}");
    let error = items[0].as_ref().unwrap_err();
    let all = error.downcast_ref::<AllFailed>().expect("AllFailed");
    let ids: Vec<&str> = all.failures.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["main", "backup"]);
    let message = error.to_string();
    assert!(
        message.contains("main: ") && message.contains("HTTP 500"),
        "{message}"
    );
    assert!(
        message.contains("backup: ") && message.contains("ended before"),
        "{message}"
    );
    assert!(Transient::is_transient(error.as_ref()));
    assert_eq!(primary.received().len(), 2);
    assert_eq!(backup.received().len(), 1);
}
