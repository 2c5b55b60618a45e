//! The built-in `fetch_url` tool against a real HTTP server on 127.0.0.1: private addresses are
//! refused by default (a literal one before any request, a name resolving to one at connect),
//! and when allowed a page is fetched, a big body cut off at the limit, a slow one timed out,
//! a redirect followed; past `max_per_turn` calls in one turn, the next are refused until the
//! next turn.

use std::time::Duration;

use axum::response::Redirect;
use frogbot::fetch::{FetchLimits, FetchUrl};
use frogbot_core::agent::ToolContext;
use frogbot_core::model::ChatId;
use serde_json::{Value, json};

async fn server() -> String {
    let app = axum::Router::new()
        .route("/page", axum::routing::get(|| async { "hello frog" }))
        .route("/big", axum::routing::get(|| async { "x".repeat(10_000) }))
        .route(
            "/slow",
            axum::routing::get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late"
            }),
        )
        .route(
            "/moved",
            axum::routing::get(|| async { Redirect::to("/page") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("127.0.0.1:{port}")
}

fn ctx(message_id: &str) -> ToolContext {
    ToolContext {
        chat_id: ChatId::new("fetch").unwrap(),
        driver: None,
        tool_call_id: "call-1".into(),
        message_id: message_id.into(),
    }
}

fn limits(allow_private: bool, max_bytes: usize) -> FetchLimits {
    FetchLimits {
        max_bytes,
        timeout: Duration::from_secs(2),
        allow_private,
        max_per_turn: 10,
        proxy: None,
    }
}

async fn fetch(allow_private: bool, max_bytes: usize, url: &str) -> Result<Value, String> {
    let tool = FetchUrl::tool(limits(allow_private, max_bytes)).unwrap();
    tool.call(json!({"url": url}), ctx("msg-1"))
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn private_addresses_are_refused_by_default() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let host = server().await;
    let port = host.rsplit(':').next().unwrap();
    let literal = fetch(false, 1_000, &format!("http://{host}/page"))
        .await
        .unwrap_err();
    assert!(literal.contains("private address"), "{literal}");
    let v6 = fetch(false, 1_000, &format!("http://[::1]:{port}/page"))
        .await
        .unwrap_err();
    assert!(v6.contains("private address"), "{v6}");
    // A name that resolves to loopback is refused by the resolver, before connecting.
    let name = fetch(false, 1_000, &format!("http://localhost:{port}/page"))
        .await
        .unwrap_err();
    assert!(name.contains("private address"), "{name}");
    for form in [
        format!("http://[::ffff:127.0.0.1]:{port}/page"),
        format!("http://[::127.0.0.1]:{port}/page"),
        format!("http://2130706433:{port}/page"),
        format!("http://0x7f.0.0.1:{port}/page"),
        format!("http://0:{port}/page"),
        "http://169.254.169.254/latest/meta-data/".into(),
        "http://[64:ff9b::a9fe:a9fe]/".into(),
        "http://[2002:a9fe:a9fe::]/".into(),
        "http://[fec0::1]/".into(),
    ] {
        let e = fetch(false, 1_000, &form).await.unwrap_err();
        assert!(e.contains("private address"), "{form}: {e}");
    }
    let scheme = fetch(false, 1_000, "file:///etc/passwd").await.unwrap_err();
    assert!(scheme.contains("only http and https"), "{scheme}");
    let bad = fetch(false, 1_000, "not a url").await.unwrap_err();
    assert!(bad.contains("not a URL"), "{bad}");
}

#[tokio::test]
async fn pages_are_fetched_within_the_limits_when_private_addresses_are_allowed() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let host = server().await;
    let page = fetch(true, 1_000, &format!("http://{host}/page"))
        .await
        .unwrap();
    assert_eq!(page["status"], 200);
    assert_eq!(page["text"], "hello frog");
    assert_eq!(page["truncated"], false);
    assert!(
        page["contentType"]
            .as_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let big = fetch(true, 1_000, &format!("http://{host}/big"))
        .await
        .unwrap();
    assert_eq!(big["text"].as_str().unwrap().len(), 1_000);
    assert_eq!(big["truncated"], true);
    let moved = fetch(true, 1_000, &format!("http://{host}/moved"))
        .await
        .unwrap();
    assert_eq!(moved["text"], "hello frog");
    assert!(moved["url"].as_str().unwrap().ends_with("/page"));
    let slow = fetch(true, 1_000, &format!("http://{host}/slow"))
        .await
        .unwrap_err();
    assert!(
        slow.contains("timed out") || slow.contains("timeout"),
        "{slow}"
    );
    let missing = fetch(true, 1_000, &format!("http://{host}/nope"))
        .await
        .unwrap();
    assert_eq!(missing["status"], 404);
}

#[tokio::test]
async fn calls_past_the_limit_of_a_turn_are_refused_until_the_next_turn() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let host = server().await;
    let tool = FetchUrl::tool(FetchLimits {
        max_per_turn: 3,
        ..limits(true, 1_000)
    })
    .unwrap();
    let call = |message: &'static str| {
        let tool = tool.clone();
        let url = format!("http://{host}/page");
        async move {
            tool.call(json!({"url": url}), ctx(message))
                .await
                .map_err(|e| e.to_string())
        }
    };
    for _ in 0..3 {
        assert_eq!(call("turn-1").await.unwrap()["text"], "hello frog");
    }
    let e = call("turn-1").await.unwrap_err();
    assert!(
        e.contains("fetch_url was called 4 times in this turn; the limit is 3"),
        "{e}"
    );
    let e = call("turn-1").await.unwrap_err();
    assert!(e.contains("called 5 times"), "{e}");
    // A refused call of a turn uses nothing of another's.
    assert_eq!(call("turn-2").await.unwrap()["status"], 200);
}
