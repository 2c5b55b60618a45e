//! A fake OpenAI Chat Completions server for the tests: `POST /v1/chat/completions` answers with a
//! scripted `text/event-stream` (or an HTTP error) and records every request it received. Given a
//! sequence of replies, the n-th request gets the n-th (the last one repeats).

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::Response;
use frogbot_core::BoxError;
use frogbot_core::agent::{ModelEvent, ModelStream};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The upstream model name the tests configure and the fake server echoes.
pub const UPSTREAM_MODEL: &str = "upstream-model";

/// What the fake server answers to every request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// `200 text/event-stream`, the body sent as these pieces (each its own write).
    Sse(Vec<String>),
    /// Like `Sse`, then — once `cut` is notified — the connection is aborted mid-body.
    SseThenAbort(Vec<String>, Arc<Notify>),
    /// An HTTP error status with this body (as JSON if it parses as JSON).
    Status(u16, String),
    /// This status with a JSON body (`application/json`), whatever the request asked for.
    Json(u16, String),
    /// An HTTP error status with these headers and this body.
    StatusWith(u16, Vec<(&'static str, String)>, String),
}

/// One request the fake server received.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
    /// When it arrived.
    pub at: Instant,
}

#[derive(Clone)]
struct Shared {
    replies: Arc<Vec<Reply>>,
    received: Arc<Mutex<Vec<Received>>>,
}

/// A running fake server on 127.0.0.1 (stopped when dropped).
pub struct FakeServer {
    addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
    task: JoinHandle<()>,
}

impl FakeServer {
    pub async fn start(reply: Reply) -> Self {
        Self::start_seq(vec![reply]).await
    }

    /// A server whose n-th request gets `replies[n]` (the last one once they run out).
    pub async fn start_seq(replies: Vec<Reply>) -> Self {
        assert!(!replies.is_empty());
        let received = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            replies: Arc::new(replies),
            received: received.clone(),
        };
        let app = Router::new().fallback(handle).with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            addr,
            received,
            task,
        }
    }

    /// The base URL a client should use (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The requests received so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body_json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let reply = {
        let mut received = shared.received.lock().unwrap();
        let reply = shared.replies[received.len().min(shared.replies.len() - 1)].clone();
        received.push(Received {
            method: method.clone(),
            path: uri.path().to_owned(),
            headers,
            body: body_json.clone(),
            at: Instant::now(),
        });
        reply
    };

    if method != Method::POST || uri.path() != "/v1/chat/completions" {
        return status(
            StatusCode::NOT_FOUND,
            r#"{"error":{"message":"no such route"}}"#,
        );
    }
    if body_json.get("stream") != Some(&Value::Bool(true)) {
        return status(
            StatusCode::BAD_REQUEST,
            r#"{"error":{"message":"expected stream: true"}}"#,
        );
    }

    match reply {
        Reply::Sse(pieces) => {
            let body = futures::stream::iter(pieces.into_iter().map(Ok::<_, std::io::Error>));
            event_stream(Body::from_stream(body))
        }
        Reply::SseThenAbort(pieces, cut) => {
            let body = futures::stream::iter(pieces.into_iter().map(Ok::<_, std::io::Error>))
                .chain(futures::stream::once(async move {
                    cut.notified().await;
                    Err(std::io::Error::other("connection cut by the test"))
                }));
            event_stream(Body::from_stream(body))
        }
        Reply::Status(code, text) => status(StatusCode::from_u16(code).unwrap(), &text),
        Reply::Json(code, text) => Response::builder()
            .status(code)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(text))
            .unwrap(),
        Reply::StatusWith(code, headers, text) => {
            let mut response = status(StatusCode::from_u16(code).unwrap(), &text);
            for (name, value) in headers {
                response.headers_mut().insert(name, value.parse().unwrap());
            }
            response
        }
    }
}

fn event_stream(body: Body) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(body)
        .unwrap()
}

fn status(code: StatusCode, text: &str) -> Response {
    let content_type = if serde_json::from_str::<Value>(text).is_ok() {
        "application/json"
    } else {
        "text/plain"
    };
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(text.to_owned()))
        .unwrap()
}

/// A `chat.completion.chunk` with one choice, shaped like OpenAI's.
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": UPSTREAM_MODEL,
        "system_fingerprint": "fp_test",
        "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason }],
        "usage": null,
    })
}

/// A tool-call fragment for `delta.tool_calls`.
pub fn tool_fragment(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> Value {
    let mut fragment = json!({ "index": index, "function": { "arguments": arguments } });
    if let Some(id) = id {
        fragment["id"] = json!(id);
        fragment["type"] = json!("function");
    }
    if let Some(name) = name {
        fragment["function"]["name"] = json!(name);
    }
    fragment
}

/// The final usage chunk (`choices: []`) sent when `stream_options.include_usage` is true.
pub fn usage_chunk(prompt_tokens: u64, completion_tokens: u64) -> Value {
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": UPSTREAM_MODEL,
        "system_fingerprint": "fp_test",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    })
}

/// One `data:` event.
pub fn data(chunk: &Value) -> String {
    format!("data: {chunk}\n\n")
}

/// The SSE body for these chunks, ending with `data: [DONE]`, one write per event.
pub fn sse(chunks: &[Value]) -> Vec<String> {
    chunks
        .iter()
        .map(data)
        .chain(["data: [DONE]\n\n".to_owned()])
        .collect()
}

/// Re-cuts a body into writes of `size` bytes, so events and JSON are split across reads.
pub fn split_bytes(pieces: &[String], size: usize) -> Vec<String> {
    let joined = pieces.concat();
    joined
        .as_bytes()
        .chunks(size)
        .map(|bytes| String::from_utf8(bytes.to_vec()).unwrap())
        .collect()
}

/// Collects a model stream to its end (a guard timeout turns a hang into a failure).
pub async fn collect(stream: ModelStream) -> Vec<Result<ModelEvent, BoxError>> {
    tokio::time::timeout(Duration::from_secs(30), stream.collect::<Vec<_>>())
        .await
        .expect("the model stream did not end")
}

/// Collects a stream that must not fail.
pub async fn collect_ok(stream: ModelStream) -> Vec<ModelEvent> {
    collect(stream)
        .await
        .into_iter()
        .map(|item| item.unwrap_or_else(|error| panic!("unexpected stream error: {error}")))
        .collect()
}
