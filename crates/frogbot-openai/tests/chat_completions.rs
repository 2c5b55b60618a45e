//! `OpenAiCompatible` against a local fake Chat Completions server speaking the real wire format.

mod common;

use common::{
    FakeServer, Reply, UPSTREAM_MODEL, chunk, collect, collect_ok, data, split_bytes, sse,
    tool_fragment, usage_chunk,
};
use frogbot_core::agent::{
    FinishReason, Model, ModelEvent, ModelMessage, ModelRequest, ToolCallRequest, ToolSpec, Usage,
};
use frogbot_openai::{Error, OpenAiCompatible, OpenAiConfig, install_crypto_provider};
use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::Notify;

fn model(base_url: String, api_key: Option<&str>) -> OpenAiCompatible {
    install_crypto_provider();
    OpenAiCompatible::new(OpenAiConfig {
        base_url,
        api_key: api_key.map(str::to_owned),
        model: UPSTREAM_MODEL.to_owned(),
        // These tests look at one request each; tests/retries.rs covers retrying.
        max_retries: 0,
    })
    .unwrap()
}

fn hello() -> ModelRequest {
    ModelRequest {
        instructions: "You are a frog.".into(),
        messages: vec![ModelMessage::User {
            text: "Hello".into(),
        }]
        .into(),
        tools: vec![].into(),
        reasoning: None,
    }
}

fn text_reply() -> Vec<String> {
    sse(&[
        chunk(json!({ "role": "assistant", "content": "" }), None),
        chunk(json!({ "content": "Hel" }), None),
        chunk(json!({ "content": "lo, " }), None),
        chunk(json!({ "content": "frog!" }), None),
        chunk(json!({}), Some("stop")),
        usage_chunk(11, 3),
    ])
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Current weather for a city".into(),
        input_schema: json!({
            "type": "object",
            "properties": { "city": { "type": "string" } },
            "required": ["city"],
            "additionalProperties": false,
        }),
    }
}

fn error_of(error: &frogbot_core::BoxError) -> &Error {
    error
        .downcast_ref::<Error>()
        .unwrap_or_else(|| panic!("not a frogbot_openai::Error: {error}"))
}

// (a) plain text

#[tokio::test]
async fn text_deltas_then_finish_stop_with_usage() {
    // Re-cut the body into 7-byte writes so events and their JSON are split across reads.
    let server = FakeServer::start(Reply::Sse(split_bytes(&text_reply(), 7))).await;
    let model = model(server.base_url(), Some("KEY"));

    let events = collect_ok(model.stream(hello()).await.unwrap()).await;

    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta("Hel".into()),
            ModelEvent::TextDelta("lo, ".into()),
            ModelEvent::TextDelta("frog!".into()),
            ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: Some(Usage {
                    input_tokens: 11,
                    output_tokens: 3
                }),
            },
        ]
    );
}

#[tokio::test]
async fn finish_without_usage_chunk_has_no_usage_and_length_maps() {
    let server = FakeServer::start(Reply::Sse(sse(&[
        chunk(json!({ "role": "assistant", "content": "tr" }), None),
        chunk(json!({ "content": "unc" }), Some("length")),
    ])))
    .await;
    let model = model(server.base_url(), None);

    let events = collect_ok(model.stream(hello()).await.unwrap()).await;

    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta("tr".into()),
            ModelEvent::TextDelta("unc".into()),
            ModelEvent::Finish {
                reason: FinishReason::Length,
                usage: None
            },
        ]
    );
}

#[tokio::test]
async fn unknown_finish_reason_is_other() {
    let server = FakeServer::start(Reply::Sse(sse(&[
        chunk(json!({ "role": "assistant", "content": "" }), None),
        chunk(json!({}), Some("content_filter")),
        usage_chunk(5, 0),
    ])))
    .await;
    let model = model(server.base_url(), None);

    let events = collect_ok(model.stream(hello()).await.unwrap()).await;

    assert_eq!(
        events,
        vec![ModelEvent::Finish {
            reason: FinishReason::Other("content_filter".into()),
            usage: Some(Usage {
                input_tokens: 5,
                output_tokens: 0
            }),
        }]
    );
}

// (b) tool calls

#[tokio::test]
async fn interleaved_tool_call_fragments_are_assembled_by_index() {
    let server = FakeServer::start(Reply::Sse(sse(&[
        chunk(json!({ "role": "assistant", "content": null }), None),
        chunk(json!({ "content": "Checking." }), None),
        chunk(
            json!({ "tool_calls": [tool_fragment(0, Some("call_a"), Some("get_weather"), "")] }),
            None,
        ),
        chunk(
            json!({ "tool_calls": [tool_fragment(1, Some("call_b"), Some("search"), "")] }),
            None,
        ),
        chunk(
            json!({ "tool_calls": [tool_fragment(0, None, None, "{\"ci")] }),
            None,
        ),
        chunk(
            json!({ "tool_calls": [tool_fragment(1, None, None, "{\"query\": \"fro")] }),
            None,
        ),
        chunk(
            json!({ "tool_calls": [tool_fragment(0, None, None, "ty\": \"Par")] }),
            None,
        ),
        // Two fragments for different calls in one chunk.
        chunk(
            json!({ "tool_calls": [
                tool_fragment(1, None, None, "gs\", \"limit\""),
                tool_fragment(0, None, None, "is\"}"),
            ] }),
            None,
        ),
        chunk(
            json!({ "tool_calls": [tool_fragment(1, None, None, ": 3}")] }),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        usage_chunk(40, 25),
    ])))
    .await;
    let model = model(server.base_url(), Some("KEY"));
    let mut request = hello();
    request.tools = vec![weather_tool()].into();

    let events = collect_ok(model.stream(request).await.unwrap()).await;

    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta("Checking.".into()),
            ModelEvent::ToolCall(ToolCallRequest {
                id: "call_a".into(),
                name: "get_weather".into(),
                input: json!({ "city": "Paris" }),
            }),
            ModelEvent::ToolCall(ToolCallRequest {
                id: "call_b".into(),
                name: "search".into(),
                input: json!({ "query": "frogs", "limit": 3 }),
            }),
            ModelEvent::Finish {
                reason: FinishReason::ToolCalls,
                usage: Some(Usage {
                    input_tokens: 40,
                    output_tokens: 25
                }),
            },
        ]
    );
}

#[tokio::test]
async fn empty_arguments_become_an_object_and_invalid_ones_a_string() {
    let server = FakeServer::start(Reply::Sse(sse(&[
        chunk(json!({ "role": "assistant", "tool_calls": [tool_fragment(0, Some("call_now"), Some("now"), "")] }), None),
        chunk(json!({ "tool_calls": [tool_fragment(1, Some("call_bad"), Some("echo"), "{\"text\": ")] }), None),
        chunk(json!({ "tool_calls": [tool_fragment(1, None, None, "oops")] }), Some("tool_calls")),
    ])))
    .await;
    let model = model(server.base_url(), None);

    let events = collect_ok(model.stream(hello()).await.unwrap()).await;

    assert_eq!(
        events,
        vec![
            ModelEvent::ToolCall(ToolCallRequest {
                id: "call_now".into(),
                name: "now".into(),
                input: json!({}),
            }),
            ModelEvent::ToolCall(ToolCallRequest {
                id: "call_bad".into(),
                name: "echo".into(),
                input: Value::String("{\"text\": oops".into()),
            }),
            ModelEvent::Finish {
                reason: FinishReason::ToolCalls,
                usage: None
            },
        ]
    );
}

// (c) the request on the wire

#[tokio::test]
async fn request_carries_model_key_instructions_tools_history_and_reasoning() {
    let server = FakeServer::start(Reply::Sse(text_reply())).await;
    let model = model(server.base_url(), Some("KEY"));
    let request = ModelRequest {
        instructions: "You are a frog.".into(),
        messages: vec![
            ModelMessage::User {
                text: "Weather in Paris?".into(),
            },
            ModelMessage::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCallRequest {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    input: json!({ "city": "Paris" }),
                }],
            },
            ModelMessage::Tool {
                tool_call_id: "call_1".into(),
                name: "get_weather".into(),
                content: r#"{"temp_c":21}"#.into(),
                is_error: false,
            },
            ModelMessage::Assistant {
                text: "It is 21 °C.".into(),
                tool_calls: vec![],
            },
            ModelMessage::User {
                text: "Thanks!".into(),
            },
        ]
        .into(),
        tools: vec![weather_tool()].into(),
        reasoning: Some("high".into()),
    };

    let events = collect_ok(model.stream(request).await.unwrap()).await;
    assert!(matches!(
        events.last(),
        Some(ModelEvent::Finish {
            reason: FinishReason::Stop,
            ..
        })
    ));

    let received = server.received();
    assert_eq!(received.len(), 1);
    let received = &received[0];
    assert_eq!(received.method, "POST");
    assert_eq!(received.path, "/v1/chat/completions");
    assert_eq!(received.headers.get("authorization").unwrap(), "Bearer KEY");
    let body = &received.body;
    assert_eq!(body["model"], UPSTREAM_MODEL);
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["reasoning_effort"], "high");
    assert_eq!(
        body["messages"],
        json!([
            { "role": "system", "content": "You are a frog." },
            { "role": "user", "content": "Weather in Paris?" },
            {
                "role": "assistant",
                "tool_calls": [{
                    "id": "call_1",
                    "type": "function",
                    "function": { "name": "get_weather", "arguments": "{\"city\":\"Paris\"}" },
                }],
            },
            { "role": "tool", "tool_call_id": "call_1", "content": "{\"temp_c\":21}" },
            { "role": "assistant", "content": "It is 21 °C." },
            { "role": "user", "content": "Thanks!" },
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": weather_tool().input_schema,
            },
        }])
    );
}

#[tokio::test]
async fn no_api_key_sends_no_authorization_and_no_reasoning_sends_no_effort() {
    let server = FakeServer::start(Reply::Sse(text_reply())).await;
    // A trailing slash on the base URL must not produce `//chat/completions`.
    let model = model(format!("{}/", server.base_url()), None);

    collect_ok(model.stream(hello()).await.unwrap()).await;

    let received = server.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].path, "/v1/chat/completions");
    assert!(received[0].headers.get("authorization").is_none());
    let body = &received[0].body;
    assert_eq!(body["model"], UPSTREAM_MODEL);
    assert!(body.get("reasoning_effort").is_none(), "{body}");
    assert!(
        body.get("tools").is_none(),
        "no tools means no `tools` field: {body}"
    );
}

#[tokio::test]
async fn unsupported_reasoning_option_fails_before_any_request() {
    let server = FakeServer::start(Reply::Sse(text_reply())).await;
    let model = model(server.base_url(), None);
    let mut request = hello();
    request.reasoning = Some("ludicrous".into());

    let error = model
        .stream(request)
        .await
        .err()
        .expect("an unknown reasoning option must fail");

    assert!(
        matches!(error_of(&error), Error::UnsupportedReasoning(option) if option == "ludicrous")
    );
    assert!(server.received().is_empty());
}

// (d) failures

#[tokio::test]
async fn http_500_is_an_error() {
    let server = FakeServer::start(Reply::Status(500, "upstream exploded".into())).await;
    let model = model(server.base_url(), None);

    let error = model
        .stream(hello())
        .await
        .err()
        .expect("HTTP 500 must fail");

    assert!(
        matches!(error_of(&error), Error::Status { status: 500, .. }),
        "{error:?}"
    );
    assert!(
        frogbot_core::model::Transient::is_transient(error.as_ref()),
        "a 500 is worth retrying"
    );
    let message = error.to_string();
    assert!(message.contains("500"), "{message}");
    assert!(message.contains("upstream exploded"), "{message}");
    assert!(!server.received().is_empty());
}

#[tokio::test]
async fn http_401_reports_the_server_message() {
    let server = FakeServer::start(Reply::Status(
        401,
        json!({ "error": { "message": "Incorrect API key provided", "type": "invalid_request_error", "param": null, "code": "invalid_api_key" } })
            .to_string(),
    ))
    .await;
    let model = model(server.base_url(), Some("wrong"));

    let error = model
        .stream(hello())
        .await
        .err()
        .expect("HTTP 401 must fail");

    assert!(
        matches!(error_of(&error), Error::Status { status: 401, .. }),
        "{error:?}"
    );
    assert!(!frogbot_core::model::Transient::is_transient(
        error.as_ref()
    ));
    assert!(
        error.to_string().contains("Incorrect API key provided"),
        "{error}"
    );
    assert_eq!(server.received().len(), 1, "a 401 is not retried");
}

#[tokio::test]
async fn malformed_chunk_is_an_error_item_and_ends_the_stream() {
    let server = FakeServer::start(Reply::Sse(vec![
        data(&chunk(
            json!({ "role": "assistant", "content": "Hi" }),
            None,
        )),
        "data: {\"choices\": [ this is not json\n\n".into(),
        data(&chunk(json!({ "content": " never seen" }), Some("stop"))),
        "data: [DONE]\n\n".into(),
    ]))
    .await;
    let model = model(server.base_url(), None);

    let items = collect(model.stream(hello()).await.unwrap()).await;

    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(
        items[0].as_ref().unwrap(),
        &ModelEvent::TextDelta("Hi".into())
    );
    let error = items[1].as_ref().unwrap_err();
    assert!(matches!(error_of(error), Error::Malformed(_)), "{error:?}");
}

#[tokio::test]
async fn stream_ending_before_finish_reason_is_an_error_item() {
    // The body ends cleanly, but neither a finish_reason nor [DONE] ever came.
    let server = FakeServer::start(Reply::Sse(vec![
        data(&chunk(
            json!({ "role": "assistant", "content": "Half an" }),
            None,
        )),
        data(&chunk(
            json!({ "tool_calls": [tool_fragment(0, Some("call_x"), Some("f"), "{\"a\":")] }),
            None,
        )),
    ]))
    .await;
    let model = model(server.base_url(), None);

    let items = collect(model.stream(hello()).await.unwrap()).await;

    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(
        items[0].as_ref().unwrap(),
        &ModelEvent::TextDelta("Half an".into())
    );
    let error = items[1].as_ref().unwrap_err();
    assert!(matches!(error_of(error), Error::Incomplete(_)), "{error:?}");
}

#[tokio::test]
async fn done_without_finish_reason_is_an_error_item() {
    let server = FakeServer::start(Reply::Sse(sse(&[chunk(
        json!({ "role": "assistant", "content": "Hm" }),
        None,
    )])))
    .await;
    let model = model(server.base_url(), None);

    let items = collect(model.stream(hello()).await.unwrap()).await;

    assert_eq!(items.len(), 2, "{items:?}");
    assert!(matches!(
        error_of(items[1].as_ref().unwrap_err()),
        Error::Incomplete(_)
    ));
}

#[tokio::test]
async fn connection_cut_mid_stream_is_an_error_item() {
    let cut = Arc::new(Notify::new());
    let server = FakeServer::start(Reply::SseThenAbort(
        vec![data(&chunk(
            json!({ "role": "assistant", "content": "Before the cut" }),
            None,
        ))],
        cut.clone(),
    ))
    .await;
    let model = model(server.base_url(), None);
    let mut stream = model.stream(hello()).await.unwrap();

    // The first event arrived over the open connection; only then does the server cut it.
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first, ModelEvent::TextDelta("Before the cut".into()));
    cut.notify_one();

    let rest = collect(stream).await;
    assert_eq!(rest.len(), 1, "{rest:?}");
    let error = rest[0].as_ref().unwrap_err();
    assert!(matches!(error_of(error), Error::Stream(_)), "{error:?}");
}

#[tokio::test]
async fn error_object_in_the_stream_is_an_error_item() {
    let server = FakeServer::start(Reply::Sse(sse(&[
        chunk(json!({ "role": "assistant", "content": "Par" }), None),
        json!({
            "id": "gen-1",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": UPSTREAM_MODEL,
            "error": { "code": 502, "message": "Provider disconnected" },
            "choices": [{ "index": 0, "delta": { "content": "" }, "finish_reason": "error" }],
        }),
    ])))
    .await;
    let model = model(server.base_url(), None);

    let items = collect(model.stream(hello()).await.unwrap()).await;

    assert_eq!(items.len(), 2, "{items:?}");
    let error = items[1].as_ref().unwrap_err();
    assert!(
        matches!(error_of(error), Error::Provider { message, .. } if message.contains("Provider disconnected")),
        "{error:?}"
    );
}

#[tokio::test]
async fn unreachable_server_is_a_request_error() {
    // Bind a port, then free it, so nothing listens there.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let model = model(format!("http://{addr}/v1"), None);

    let error = model
        .stream(hello())
        .await
        .err()
        .expect("no server must fail");

    assert!(
        matches!(error_of(&error), Error::Connection(_)),
        "{error:?}"
    );
    let transient = frogbot_core::model::Transient::find(error.as_ref()).expect("transient");
    assert!(!transient.may_be_done(), "a refused connection did nothing");
}

#[tokio::test]
async fn a_json_answer_instead_of_a_stream_is_a_clear_permanent_error() {
    // A server that ignores `stream: true` (or says 200 with an error object).
    let server = FakeServer::start(Reply::Json(
        200,
        json!({ "error": { "message": "streaming is not supported" } }).to_string(),
    ))
    .await;
    let model = model(server.base_url(), None);

    let error = model
        .stream(hello())
        .await
        .err()
        .expect("not an event stream");

    assert!(matches!(error_of(&error), Error::Malformed(_)), "{error:?}");
    assert!(
        error.to_string().contains("streaming is not supported"),
        "{error}"
    );
    assert!(!frogbot_core::model::Transient::is_transient(
        error.as_ref()
    ));
}
