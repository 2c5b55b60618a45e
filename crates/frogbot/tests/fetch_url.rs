//! The built-in `fetch_url` tool against a real HTTP server on 127.0.0.1: private addresses are
//! refused by default (a literal one before any request, a name resolving to one at connect),
//! and when allowed a page is fetched, a big body cut off at the limit, a slow one timed out,
//! a redirect followed.

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

fn ctx() -> ToolContext {
    ToolContext {
        chat_id: ChatId::new("fetch").unwrap(),
        driver: None,
        tool_call_id: "call-1".into(),
        message_id: "msg-1".into(),
    }
}

async fn fetch(allow_private: bool, max_bytes: usize, url: &str) -> Result<Value, String> {
    let tool = FetchUrl::tool(FetchLimits {
        max_bytes,
        timeout: Duration::from_secs(2),
        allow_private,
    })
    .unwrap();
    tool.call(json!({"url": url}), ctx())
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
    assert!(name.contains("no public address"), "{name}");
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
