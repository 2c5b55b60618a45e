//! Fuzzing serve's HTTP API bodies (`serve-contract.md`): arbitrary and mutated real-shaped JSON,
//! and cut or spliced text, POSTed / PATCHed to the endpoints that read a body (messages, a queued
//! message, settle) against one in-process server. Every answer is a 2xx (the body happened to be
//! valid) or a clear 4xx in the contract's error shape with a short message — never a 5xx or a
//! hang — and a refused request changes nothing.

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use frogbot_model::fuzz::{arb_json, json_input, mutated_text};
use proptest::prelude::*;
use serde_json::{Value, json};

/// The longest error message the API writes (an excerpt of what it quotes).
const MAX_MESSAGE: usize = 300;

struct World {
    rt: tokio::runtime::Runtime,
    server: Server,
    _db: frogbot_testkit::TestDb,
    /// A chat with a finished turn.
    chat: String,
    /// A chat waiting on the demo question.
    asked: String,
    call: String,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let db = frogbot_testkit::sqlite_db();
        let (server, chat, asked, call) = rt.block_on(async {
            let s = start(&db).await;
            let chat = chat_id("fuzz");
            let r = s.send(&chat, Some(ALICE), "hello").await;
            assert_eq!(r.status, 200, "{}", r.text);
            let asked = chat_id("fuzzq");
            let (call, _) = ask(&s, &asked, Some(ALICE)).await;
            (s, chat, asked, call)
        });
        World {
            rt,
            server,
            _db: db,
            chat,
            asked,
            call,
        }
    })
}

struct Answer {
    status: u16,
    json: Value,
    text: String,
}

async fn request(method: reqwest::Method, path: &str, body: String) -> Answer {
    let w = world();
    let send = w
        .server
        .client
        .request(method, format!("{}{path}", w.server.base))
        .bearer_auth(ALICE)
        .header("content-type", "application/json")
        .body(body)
        .send();
    let res = tokio::time::timeout(Duration::from_secs(20), send)
        .await
        .expect("an answer, not a hang")
        .expect("request");
    let status = res.status().as_u16();
    let text = res.text().await.expect("body");
    Answer {
        status,
        json: serde_json::from_str(&text).unwrap_or(Value::Null),
        text,
    }
}

async fn snapshot(chat: &str) -> Value {
    let r = world().server.chat(chat, Some(ALICE)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json
}

/// Waits until nothing runs or waits in the queue of `chat` (after a request that was taken).
async fn quiet(chat: &str) {
    world()
        .server
        .wait_chat(chat, Some(ALICE), "no running turn, nothing queued", |c| {
            c["state"] != "running" && !has_queued(c)
        })
        .await;
}

fn check_error(a: &Answer) -> Result<(), TestCaseError> {
    let top = a.json.as_object();
    prop_assert!(
        top.is_some_and(|t| t.len() == 1),
        "only `error` at the top: {}",
        a.text
    );
    let err = a.json["error"].as_object();
    prop_assert!(
        err.is_some_and(|e| e.len() == 2),
        "only code and message: {}",
        a.text
    );
    let code = a.json["error"]["code"].as_str().unwrap_or_default();
    prop_assert!(!code.is_empty(), "{}", a.text);
    let message = a.json["error"]["message"].as_str().unwrap_or_default();
    prop_assert!(!message.is_empty(), "{}", a.text);
    prop_assert!(
        message.chars().count() <= MAX_MESSAGE,
        "an excerpt, not the body: {} characters",
        message.chars().count()
    );
    Ok(())
}

#[derive(Clone, Copy, Debug)]
enum Endpoint {
    Post,
    Patch,
    Settle,
}

fn samples(endpoint: Endpoint) -> Vec<Value> {
    let call = world().call.clone();
    match endpoint {
        Endpoint::Post => vec![
            json!({"parts": [{"type": "text", "text": "hi"}]}),
            json!({"id": "m_fuzz-1", "parts": [
                {"type": "text", "text": "hi"},
                {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA=="}
            ], "delivery": "queue", "model": "demo"}),
            json!({"parts": [{"type": "text", "text": "hi"}], "delivery": "steer", "reasoning": "high"}),
        ],
        Endpoint::Patch => vec![
            json!({"parts": [{"type": "text", "text": "edited"}], "delivery": "steer"}),
            json!({"delivery": "queue"}),
        ],
        Endpoint::Settle => vec![
            json!({"toolCallId": call, "output": {"answers": [{"header": "Colour", "selected": ["Blue"]}]}}),
            json!({"toolCallId": call, "dismissed": true}),
        ],
    }
}

fn body(endpoint: Endpoint) -> impl Strategy<Value = String> {
    prop_oneof![
        5 => json_input(samples(endpoint)).prop_map(|v| v.to_string()),
        1 => arb_json().prop_map(|v| v.to_string()),
        2 => prop::sample::select(samples(endpoint)).prop_flat_map(|v| mutated_text(v.to_string())),
    ]
}

fn endpoint_and_body() -> impl Strategy<Value = (Endpoint, String)> {
    prop_oneof![
        3 => body(Endpoint::Post).prop_map(|b| (Endpoint::Post, b)),
        1 => body(Endpoint::Patch).prop_map(|b| (Endpoint::Patch, b)),
        2 => body(Endpoint::Settle).prop_map(|b| (Endpoint::Settle, b)),
    ]
}

fn run(endpoint: Endpoint, body: String) -> Result<(), TestCaseError> {
    let w = world();
    w.rt.block_on(async {
        let (method, path, chat) = match endpoint {
            Endpoint::Post => (
                reqwest::Method::POST,
                format!("/api/chats/{}/messages", w.chat),
                &w.chat,
            ),
            Endpoint::Patch => (
                reqwest::Method::PATCH,
                format!("/api/chats/{}/messages/m_fuzz-1", w.chat),
                &w.chat,
            ),
            Endpoint::Settle => (
                reqwest::Method::POST,
                format!("/api/chats/{}/settle", w.asked),
                &w.asked,
            ),
        };
        let before = snapshot(chat).await;
        let a = request(method, &path, body.clone()).await;
        prop_assert!(
            a.status < 500,
            "{endpoint:?} {body:?} → {} {}",
            a.status,
            a.text
        );
        if (400..500).contains(&a.status) {
            check_error(&a)?;
            // Refused: nothing changed.
            let after = snapshot(chat).await;
            prop_assert_eq!(
                before,
                after,
                "{:?} {:?} → {} changed the chat",
                endpoint,
                body,
                a.status
            );
        } else {
            prop_assert!((200..300).contains(&a.status), "{}", a.status);
            quiet(chat).await;
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn bodies_get_a_clear_answer_and_refusals_change_nothing((endpoint, body) in endpoint_and_body()) {
        run(endpoint, body)?;
    }
}

// ---- Regressions (the minimal inputs the fuzzing found) ----

#[test]
fn regression_a_400_quotes_an_excerpt_not_the_body() {
    // A string of almost 1 MiB (the body limit) where `parts` must be a list: a 400 whose message
    // used to carry the whole string.
    let huge = "x".repeat(1_000_000);
    let w = world();
    let body = json!({"parts": huge}).to_string();
    let a = w.rt.block_on(request(
        reqwest::Method::POST,
        &format!("/api/chats/{}/messages", w.chat),
        body,
    ));
    assert_eq!(a.status, 400, "{}", &a.text[..a.text.len().min(400)]);
    assert_eq!(a.json["error"]["code"], "invalid-request");
    let message = a.json["error"]["message"].as_str().unwrap();
    assert!(message.chars().count() <= MAX_MESSAGE, "{}", message.len());
    assert!(message.contains("invalid type"), "{message}");
    assert!(a.text.len() < 1000, "{}", a.text.len());
}

#[test]
fn regression_bodies_found_by_fuzzing_are_clear_4xx() {
    let w = world();
    for body in [
        "",
        "null",
        "[]",
        "{\"parts\": [{}]}",
        "{\"parts\": [{\"type\": \"text\"}]}",
        "{\"parts\": [{\"type\": \"text\", \"text\": 5}]}",
        "{\"parts\": [{\"type\": \"text\", \"text\": \"hi\"}], \"id\": \"\"}",
        "{\"parts\": [{\"type\": \"text\", \"text\": \"hi\"}], \"delivery\": 18446744073709551615}",
    ] {
        let a = w.rt.block_on(request(
            reqwest::Method::POST,
            &format!("/api/chats/{}/messages", w.chat),
            body.to_owned(),
        ));
        assert!(
            (400..500).contains(&a.status),
            "{body:?} → {} {}",
            a.status,
            a.text
        );
    }
}
