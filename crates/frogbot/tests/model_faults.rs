//! `frogbot serve` against a faulty OpenAI-compatible server (a fake in this file): it retries as
//! configured (`max_retries`, the fake counts the requests), falls back to the next model of
//! `fallback` when one keeps failing (and the reply's metadata says which answered), cuts off a
//! stream that hangs (`stream_idle_timeout_seconds`), never leaves the chat running, and shows
//! the caller the failure.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::Response;
use common::{ALICE, WAIT, client, messages, msg, text_of};
use frogbot_testkit::TestDb;
use serde_json::{Value, json};

/// What the fake answers to one request.
#[derive(Clone, Debug)]
enum Fault {
    /// An HTTP error status, with a `Retry-After` header when given.
    Status(u16, Option<&'static str>),
    /// A whole streamed reply with this text.
    Text(&'static str),
    /// This text, then the stream stays open and silent.
    TextThenHang(&'static str),
    /// This text, then the body ends (no `finish_reason`, no `[DONE]`).
    TextThenClose(&'static str),
}

/// The fake: per upstream model name, its answers in order (the last one repeats), and the
/// requests it got.
#[derive(Clone, Default)]
struct Fake {
    script: Arc<HashMap<&'static str, Vec<Fault>>>,
    counts: Arc<Mutex<HashMap<String, usize>>>,
}

impl Fake {
    fn count(&self, model: &str) -> usize {
        self.counts.lock().unwrap().get(model).copied().unwrap_or(0)
    }
}

/// Starts the fake on 127.0.0.1; its base URL.
async fn start_fake(script: &[(&'static str, Vec<Fault>)]) -> (String, Fake) {
    let fake = Fake {
        script: Arc::new(script.iter().cloned().collect()),
        counts: Arc::default(),
    };
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("fake model server");
    });
    (format!("http://{addr}/v1"), fake)
}

async fn completions(State(fake): State<Fake>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = body["model"].as_str().unwrap_or_default().to_owned();
    let n = {
        let mut counts = fake.counts.lock().unwrap();
        let n = counts.entry(model.clone()).or_default();
        *n += 1;
        *n - 1
    };
    let Some(faults) = fake.script.get(model.as_str()) else {
        return Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Body::from(r#"{"error":{"message":"no such model"}}"#))
            .unwrap();
    };
    let fault = faults[n.min(faults.len() - 1)].clone();
    let event = |delta: Value, finish: Option<&str>| {
        let chunk = json!({
            "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": model, "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        });
        format!("data: {chunk}\n\n")
    };
    let sse = |pieces: Vec<String>, then: Then| {
        let head = futures::stream::iter(pieces.into_iter().map(Ok::<_, std::io::Error>));
        let body = match then {
            Then::End => Body::from_stream(head),
            Then::Hang => {
                Body::from_stream(futures::StreamExt::chain(head, futures::stream::pending()))
            }
        };
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(body)
            .unwrap()
    };
    let token = |text: &str| event(json!({ "role": "assistant", "content": text }), None);
    match fault {
        Fault::Status(code, retry_after) => {
            let mut response = Response::builder()
                .status(code)
                .header(header::CONTENT_TYPE, "application/json");
            if let Some(wait) = retry_after {
                response = response.header(header::RETRY_AFTER, wait);
            }
            response
                .body(Body::from(
                    json!({ "error": { "message": format!("the fake says {code}") } }).to_string(),
                ))
                .unwrap()
        }
        Fault::Text(text) => sse(
            vec![
                token(text),
                event(json!({}), Some("stop")),
                "data: [DONE]\n\n".into(),
            ],
            Then::End,
        ),
        Fault::TextThenHang(text) => sse(vec![token(text)], Then::Hang),
        Fault::TextThenClose(text) => sse(vec![token(text)], Then::End),
    }
}

enum Then {
    End,
    Hang,
}

/// `frogbot serve` in-process with these `[[models]]` (and a one-second idle timeout).
struct Serve {
    base: String,
    client: reqwest::Client,
    task: tokio::task::JoinHandle<()>,
    _db: TestDb,
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(models: &str) -> Serve {
    let db = frogbot_testkit::sqlite_db();
    let text = format!(
        "listen = \"127.0.0.1:0\"\ndatabase = \"{}\"\nstream_idle_timeout_seconds = 1\n\
         [[users]]\nid = \"alice\"\ntoken = \"{ALICE}\"\n{models}",
        db.url
    );
    let config = frogbot::Config::parse(&text).expect("config parses");
    config.validate().expect("config is valid");
    let engine = frogbot::build_engine(&config).await.expect("engine");
    let app = frogbot::app(&config, engine);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let limits = config.server.clone();
    let task = tokio::spawn(async move {
        frogbot::server::run(listener, app, &limits, std::future::pending(), WAIT)
            .await
            .expect("serve");
    });
    Serve {
        base,
        client: client(),
        task,
        _db: db,
    }
}

/// A `[[models]]` entry served by the fake (`id` is also the upstream name).
fn model(id: &str, base_url: &str, extra: &str) -> String {
    format!(
        "[[models]]\nid = \"{id}\"\nprovider = \"openai-compatible\"\nbase_url = \"{base_url}\"\n{extra}\n"
    )
}

impl Serve {
    /// Sends `text` to a new chat and waits for the turn's end: the JSON answer.
    async fn send(&self, chat: &str, text: &str) -> Value {
        let response = tokio::time::timeout(
            WAIT,
            self.client
                .post(format!("{}/api/chats/{chat}/messages", self.base))
                .bearer_auth(ALICE)
                .json(&msg(text))
                .send(),
        )
        .await
        .expect("the turn ended in time")
        .expect("request");
        assert_eq!(response.status(), 200);
        response.json().await.expect("json")
    }

    /// The chat as GET returns it.
    async fn chat(&self, chat: &str) -> Value {
        self.client
            .get(format!("{}/api/chats/{chat}", self.base))
            .bearer_auth(ALICE)
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json")
    }

    /// Asserts the chat is idle (nothing left running) and returns its last message.
    async fn assert_idle(&self, chat: &str) -> Value {
        let c = self.chat(chat).await;
        assert_eq!(c["state"], "idle", "{c}");
        messages(&c).last().cloned().expect("a reply")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_requests_are_retried_as_configured() {
    let (url, fake) = start_fake(&[
        (
            "main",
            vec![
                Fault::Status(429, Some("0")),
                Fault::Status(502, None),
                Fault::Text("third time lucky"),
            ],
        ),
        ("stingy", vec![Fault::Status(503, Some("0"))]),
    ])
    .await;
    let s = serve(
        &[
            model("main", &url, "max_retries = 2"),
            model("stingy", &url, "max_retries = 1"),
        ]
        .concat(),
    )
    .await;

    let answer = s.send("retried", "hello").await;
    assert_eq!(answer["state"], "idle", "{answer}");
    assert_eq!(text_of(&answer["reply"]), "third time lucky");
    assert!(answer["reply"]["metadata"]["error"].is_null(), "{answer}");
    assert!(
        answer["reply"]["metadata"]["fallback"].is_null(),
        "no fallback was needed: {answer}"
    );
    assert_eq!(fake.count("main"), 3, "one request and two retries");

    let mut body = msg("hello");
    body["model"] = json!("stingy");
    let response = s
        .client
        .post(format!("{}/api/chats/gave-up/messages", s.base))
        .bearer_auth(ALICE)
        .json(&body)
        .send()
        .await
        .expect("request");
    let answer: Value = response.json().await.expect("json");
    let error = &answer["reply"]["metadata"]["error"];
    assert_eq!(error["code"], "model-error", "{answer}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("HTTP 503") && message.contains("after 2 attempts"),
        "the caller is told what failed: {message}"
    );
    assert_eq!(fake.count("stingy"), 2, "one request and one retry");
    s.assert_idle("gave-up").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_keeps_failing_falls_back_to_the_next() {
    let (url, fake) = start_fake(&[
        ("main", vec![Fault::Status(500, Some("0"))]),
        ("backup", vec![Fault::Text("the backup answers")]),
    ])
    .await;
    let s = serve(
        &[
            model("main", &url, "max_retries = 1\nfallback = [\"backup\"]"),
            model("backup", &url, "max_retries = 0"),
        ]
        .concat(),
    )
    .await;

    let answer = s.send("fell-back", "hello").await;

    assert_eq!(answer["state"], "idle", "{answer}");
    let reply = &answer["reply"];
    assert_eq!(text_of(reply), "the backup answers");
    assert_eq!(
        reply["metadata"]["model"], "main",
        "the model asked for: {reply}"
    );
    assert_eq!(
        reply["metadata"]["fallback"], "backup",
        "the one that answered: {reply}"
    );
    assert!(reply["metadata"]["error"].is_null(), "{reply}");
    assert_eq!(fake.count("main"), 2, "main's retries were used up first");
    assert_eq!(fake.count("backup"), 1);
    // Saved so: the chat's history says it too.
    let last = s.assert_idle("fell-back").await;
    assert_eq!(last["metadata"]["fallback"], "backup", "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_fallback_fails_too_the_caller_sees_both_failures() {
    let (url, fake) = start_fake(&[
        ("main", vec![Fault::Status(503, Some("0"))]),
        ("backup", vec![Fault::Status(429, Some("0"))]),
    ])
    .await;
    let s = serve(
        &[
            model("main", &url, "max_retries = 0\nfallback = [\"backup\"]"),
            model("backup", &url, "max_retries = 1"),
        ]
        .concat(),
    )
    .await;

    // Over the AI SDK stream: the failure is its `error` part.
    let response = s
        .client
        .post(format!("{}/api/chats/all-failed/messages", s.base))
        .bearer_auth(ALICE)
        .header(header::ACCEPT, "text/event-stream")
        .json(&msg("hello"))
        .send()
        .await
        .expect("request");
    let body = tokio::time::timeout(WAIT, response.text())
        .await
        .expect("the stream ended")
        .expect("body");
    let error = body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|part| part["type"] == "error")
        .unwrap_or_else(|| panic!("no error part in {body}"));
    let text = error["errorText"].as_str().unwrap_or_default();
    assert!(text.starts_with("model-error: "), "{text}");
    assert!(
        text.contains("main: ") && text.contains("HTTP 503"),
        "main's failure: {text}"
    );
    assert!(
        text.contains("backup: ") && text.contains("HTTP 429"),
        "backup's failure: {text}"
    );
    assert_eq!((fake.count("main"), fake.count("backup")), (1, 2));
    let last = s.assert_idle("all-failed").await;
    assert_eq!(last["metadata"]["error"]["code"], "model-error", "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_hangs_is_cut_off_by_the_idle_timeout() {
    let (url, fake) = start_fake(&[
        ("main", vec![Fault::TextThenHang("half an ans")]),
        ("backup", vec![Fault::Text("never asked")]),
    ])
    .await;
    let s = serve(
        &[
            model("main", &url, "max_retries = 3\nfallback = [\"backup\"]"),
            model("backup", &url, ""),
        ]
        .concat(),
    )
    .await;

    let answer = s.send("hung", "hello").await;

    assert_eq!(answer["state"], "idle", "{answer}");
    let reply = &answer["reply"];
    assert_eq!(text_of(reply), "half an ans", "what it wrote is kept");
    assert_eq!(
        reply["metadata"]["error"]["code"], "model-timeout",
        "{reply}"
    );
    assert_eq!(fake.count("main"), 1, "not retried once the answer started");
    assert_eq!(
        fake.count("backup"),
        0,
        "no fallback once the answer started"
    );
    let last = s.assert_idle("hung").await;
    assert_eq!(last["metadata"]["error"]["code"], "model-timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_closes_early_fails_the_turn_visibly() {
    let (url, fake) = start_fake(&[
        ("main", vec![Fault::TextThenClose("cut sh")]),
        ("backup", vec![Fault::Text("never asked")]),
    ])
    .await;
    let s = serve(
        &[
            model("main", &url, "max_retries = 3\nfallback = [\"backup\"]"),
            model("backup", &url, ""),
        ]
        .concat(),
    )
    .await;

    let answer = s.send("closed", "hello").await;

    assert_eq!(answer["state"], "idle", "{answer}");
    let reply = &answer["reply"];
    assert_eq!(text_of(reply), "cut sh");
    let error = &reply["metadata"]["error"];
    assert_eq!(error["code"], "model-error", "{reply}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("ended before the model finished")),
        "{reply}"
    );
    assert_eq!(fake.count("main"), 1, "not retried once the answer started");
    assert_eq!(fake.count("backup"), 0);
    s.assert_idle("closed").await;

    // The chat takes the next message: nothing was left running.
    let again = s.send("closed", "again").await;
    assert_eq!(again["state"], "idle", "{again}");
    assert_eq!(fake.count("main"), 2);
}
