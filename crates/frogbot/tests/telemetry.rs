//! `[telemetry] otlp_endpoint` (feature `otlp`): a turn through the real `frogbot serve` binary,
//! its spans received by a fake OpenTelemetry collector (`POST /v1/traces`, the protobuf bodies
//! decoded with `opentelemetry-proto`), the last of them sent when the process stops on SIGTERM.

mod common;

use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use common::child::{config_file, free_port, frogbot, start};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value as Any};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::json;

/// What the fake collector received: each request's body, decoded.
type Received = Arc<Mutex<Vec<ExportTraceServiceRequest>>>;

async fn traces(
    State(received): State<Received>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, [(header::HeaderName, &'static str); 1], Vec<u8>) {
    let protobuf = [(header::CONTENT_TYPE, "application/x-protobuf")];
    if headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        != Some("application/x-protobuf")
    {
        return (StatusCode::UNSUPPORTED_MEDIA_TYPE, protobuf, Vec::new());
    }
    match ExportTraceServiceRequest::decode(body) {
        Ok(request) => {
            received.lock().unwrap().push(request);
            let ok = ExportTraceServiceResponse::default().encode_to_vec();
            (StatusCode::OK, protobuf, ok)
        }
        Err(_) => (StatusCode::BAD_REQUEST, protobuf, Vec::new()),
    }
}

/// A fake OTLP/HTTP collector on a free port: its base URL and what it receives.
async fn collector() -> (String, Received) {
    let received = Received::default();
    let app = axum::Router::new()
        .route("/v1/traces", axum::routing::post(traces))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, received)
}

fn string(v: &Option<AnyValue>) -> Option<&str> {
    match v.as_ref()?.value.as_ref()? {
        Any::StringValue(s) => Some(s),
        _ => None,
    }
}

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| string(&kv.value))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turns_spans_reach_the_collector_with_chat_and_turn_ids() {
    let (endpoint, received) = collector().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let database = format!("sqlite://{}", dir.path().join("t.db").display());
    let config = config_file(
        dir.path(),
        port,
        &database,
        &format!("[telemetry]\notlp_endpoint = \"{endpoint}/\"\nservice_name = \"frogbot-test\"\n"),
    );
    let mut cmd = frogbot();
    // The spans of turns and steps are at `info`; the filter decides what is exported too.
    cmd.env("RUST_LOG", "info,sqlx=warn")
        .arg("serve")
        .arg("--config")
        .arg(&config);
    let mut server = start(cmd, port).await;
    let r = reqwest::Client::new()
        .post(format!("{}/api/chats/traced/messages", server.base))
        .json(&json!({"parts": [{"type": "text", "text": "hello"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // SIGTERM: serve ends, and the spans still batched are sent before the process exits.
    let pid = server.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let exit = server.child.wait().unwrap();
    assert!(exit.success(), "exit status {exit:?}");

    let requests = received.lock().unwrap().clone();
    assert!(
        !requests.is_empty(),
        "no export request reached the collector"
    );
    let mut spans: Vec<Span> = Vec::new();
    for request in &requests {
        for resource_spans in &request.resource_spans {
            let resource = resource_spans.resource.as_ref().expect("a resource");
            assert_eq!(
                attribute(&resource.attributes, "service.name"),
                Some("frogbot-test")
            );
            for scope in &resource_spans.scope_spans {
                spans.extend(scope.spans.iter().cloned());
            }
        }
    }
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let turn = spans
        .iter()
        .find(|s| s.name == "turn" && attribute(&s.attributes, "chat_id") == Some("traced"))
        .unwrap_or_else(|| panic!("no turn span of chat traced in {names:?}"));
    let turn_id = attribute(&turn.attributes, "turn_id").expect("the turn span's turn_id");
    assert!(!turn_id.is_empty());
    let step = spans
        .iter()
        .find(|s| s.name == "step" && attribute(&s.attributes, "turn_id") == Some(turn_id))
        .unwrap_or_else(|| panic!("no step span of turn {turn_id} in {names:?}"));
    assert_eq!(attribute(&step.attributes, "chat_id"), Some("traced"));
    // The step is the turn's child, in the same trace.
    assert_eq!(step.trace_id, turn.trace_id);
    assert_eq!(step.parent_span_id, turn.span_id);
    assert!(turn.end_time_unix_nano >= step.end_time_unix_nano);
}
