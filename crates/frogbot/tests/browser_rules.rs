//! The browser rules of the API (issue 37): JSON content type and an allowed `Origin` for
//! state-changing requests, the loopback server's `Host` check, the web chat's security headers,
//! the parts a person may send, and the anonymous event-stream budget per client address.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use common::{ALICE, Resp, Server, chat_id, msg, start_with};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ALLOWED: &str = "[server]\nallowed_origins = [\"https://chat.example.com\"]";

async fn server(extra: &str) -> (Server, frogbot_testkit::TestDb) {
    let db = frogbot_testkit::sqlite_db();
    let s = start_with(&db, extra).await;
    (s, db)
}

/// A POST of `body` with these headers (no JSON helper: the content type is the test's).
async fn post_raw(
    s: &Server,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<reqwest::Body>,
) -> Resp {
    let mut req = s.client.post(format!("{}{path}", s.base)).body(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    resp(req.send().await.expect("request")).await
}

async fn resp(res: reqwest::Response) -> Resp {
    let status = res.status().as_u16();
    let header = |n: &str| {
        res.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let chat = header("x-frogbot-chat-id");
    let content_type = header("content-type");
    let text = res.text().await.expect("body");
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    Resp {
        status,
        chat,
        content_type,
        json,
        text,
    }
}

/// One raw HTTP/1.1 request (its own `Host`), answered and closed: (status, body).
async fn raw(s: &Server, request: &str) -> (u16, Value) {
    let addr = s.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(common::WAIT, stream.read_to_end(&mut answer))
        .await
        .expect("answered in time")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer).to_string();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"));
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn port(s: &Server) -> &str {
    s.base.rsplit(':').next().expect("port")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_origin_text_plain_post_is_refused_and_creates_nothing() {
    let (s, _db) = server("").await;
    let chat = chat_id("csrf");
    let path = format!("/api/chats/{chat}/messages");
    let body = msg("drive the agent").to_string();
    // What a form or `fetch(…, {mode: "no-cors"})` on another origin can send without a preflight.
    let r = post_raw(
        &s,
        &path,
        &[
            ("content-type", "text/plain;charset=UTF-8"),
            ("origin", "https://evil.example"),
        ],
        body.clone(),
    )
    .await;
    r.assert_error(403, "forbidden-origin");
    // The same from this origin, or with no Origin at all: still not JSON.
    let own = s.base.clone();
    for headers in [
        vec![("content-type", "text/plain"), ("origin", own.as_str())],
        vec![("content-type", "application/x-www-form-urlencoded")],
        vec![],
    ] {
        let r = post_raw(&s, &path, &headers, body.clone()).await;
        r.assert_error(415, "unsupported-media-type");
    }
    // Nothing was created.
    s.chat(&chat, None).await.assert_error(404, "not-found");
    // Cross-origin with a JSON content type (a browser would have asked first): refused too.
    let r = post_raw(
        &s,
        &path,
        &[
            ("content-type", "application/json"),
            ("origin", "http://localhost.evil.example"),
        ],
        body,
    )
    .await;
    r.assert_error(403, "forbidden-origin");
    s.chat(&chat, None).await.assert_error(404, "not-found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_origin_json_post_is_accepted() {
    let (s, _db) = server("").await;
    let chat = chat_id("same");
    let path = format!("/api/chats/{chat}/messages");
    let own = s.base.clone();
    let r = post_raw(
        &s,
        &path,
        &[
            ("content-type", "application/json; charset=utf-8"),
            ("origin", own.as_str()),
        ],
        msg("hi").to_string(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.assert_chat(&chat);
    // `localhost` is the same server by another name: its Host and Origin agree.
    let body = msg("again").to_string();
    let p = port(&s);
    let (status, answer) = raw(
        &s,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: localhost:{p}\r\nOrigin: http://localhost:{p}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    // A body-less POST needs no content type.
    let r = resp(
        s.client
            .post(format!("{}/api/chats/{chat}/stop", s.base))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_origins_are_respected_and_others_refused_even_without_a_body() {
    let (s, _db) = server(ALLOWED).await;
    let chat = chat_id("allowed");
    let path = format!("/api/chats/{chat}/messages");
    let json_from =
        |origin: &'static str| [("content-type", "application/json"), ("origin", origin)];
    let r = post_raw(
        &s,
        &path,
        &json_from("https://chat.example.com"),
        msg("hi").to_string(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    for origin in [
        "http://chat.example.com",
        "https://chat.example.com:8443",
        "https://other.example",
        "null",
    ] {
        let r = post_raw(&s, &path, &json_from(origin), msg("no").to_string()).await;
        r.assert_error(403, "forbidden-origin");
    }
    // Body-less state changes from a foreign origin: refused before anything happens.
    let stop = s
        .client
        .post(format!("{}/api/chats/{chat}/stop", s.base))
        .header("origin", "https://other.example")
        .send()
        .await
        .unwrap();
    resp(stop).await.assert_error(403, "forbidden-origin");
    let chat_now = s.chat(&chat, None).await;
    assert_eq!(chat_now.status, 200, "{}", chat_now.text);
    let first = chat_now.json["messages"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let delete = s
        .client
        .delete(format!("{}/api/chats/{chat}/messages/{first}", s.base))
        .header("origin", "https://other.example")
        .send()
        .await
        .unwrap();
    resp(delete).await.assert_error(403, "forbidden-origin");
    // Reads are not state changes: a GET with a foreign Origin is answered (the browser keeps
    // the answer from the foreign page, as no CORS header allows it).
    let r = resp(
        s.client
            .get(format!("{}/api/chats/{chat}", s.base))
            .header("origin", "https://other.example")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.json["messages"].as_array().is_some_and(|m| m.len() == 2),
        "{}",
        r.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_is_refused_on_loopback() {
    let (s, _db) = server(ALLOWED).await;
    let get = |host: String| {
        format!("GET /api/chats HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
    };
    let p = port(&s).to_string();
    // DNS rebinding: a page of rebind.evil.example whose name now resolves to 127.0.0.1.
    for host in [
        format!("rebind.evil.example:{p}"),
        "rebind.evil.example".into(),
        format!("localhost.evil.example:{p}"),
    ] {
        let (status, body) = raw(&s, &get(host.clone())).await;
        assert_eq!(status, 421, "{host}: {body}");
        assert_eq!(body["error"]["code"], "misdirected-request", "{body}");
    }
    let (status, _) = raw(
        &s,
        &get(format!("rebind.evil.example:{p}")).replace("/api/chats", "/"),
    )
    .await;
    assert_eq!(status, 421, "the web chat page too");
    for host in [
        format!("localhost:{p}"),
        format!("127.0.0.1:{p}"),
        "localhost".into(),
        format!("[::1]:{p}"),
        "chat.example.com".into(),
    ] {
        let (status, body) = raw(&s, &get(host.clone())).await;
        assert_eq!(status, 200, "{host}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_chat_page_sends_its_security_headers() {
    let (s, _db) = server("").await;
    let res = s.client.get(format!("{}/", s.base)).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let h = |n: &str| {
        res.headers()
            .get(n)
            .unwrap_or_else(|| panic!("no {n} header"))
            .to_str()
            .unwrap()
            .to_string()
    };
    let csp = h("content-security-policy");
    assert!(csp.contains("default-src 'self'"), "{csp}");
    assert!(csp.contains("script-src 'nonce-"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(h("x-frame-options"), "DENY");
    assert_eq!(h("x-content-type-options"), "nosniff");
    assert_eq!(h("referrer-policy"), "no-referrer");
    // The apps' frame page: a sandbox of its own, even opened outside a frame.
    let res = s
        .client
        .get(format!("{}/app-frame", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let csp = res.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("sandbox allow-scripts"), "{csp}");
    assert!(!csp.contains("allow-same-origin"), "{csp}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_block_parts_are_refused() {
    let (s, _db) = server("").await;
    let chat = chat_id("blocks");
    let path = format!("/api/chats/{chat}/messages");
    for part in [
        json!({"type": "data-block-html", "data": {"html": "<script>alert(1)</script>"}}),
        json!({"type": "data-block-image", "data": {"url": "https://evil.example/x.png"}}),
    ] {
        let ty = part["type"].as_str().unwrap().to_string();
        let r = s
            .post(
                &path,
                Some(ALICE),
                json!({"parts": [{"type": "text", "text": "look"}, part]}),
            )
            .await;
        r.assert_error(400, "invalid-request");
        assert!(
            r.json["error"]["message"].as_str().unwrap().contains(&ty),
            "{}",
            r.text
        );
    }
    s.chat(&chat, Some(ALICE))
        .await
        .assert_error(404, "not-found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_streams_are_budgeted_per_client_address() {
    let (s, _db) = server("[server]\nmax_event_streams_per_user = 2").await;
    let chat = chat_id("streams");
    assert_eq!(s.send(&chat, None, "hi").await.status, 200);
    let from = |ip: Ipv4Addr| {
        reqwest::Client::builder()
            .local_address(IpAddr::V4(ip))
            .build()
            .unwrap()
    };
    let first = from(Ipv4Addr::new(127, 0, 0, 1));
    let other = from(Ipv4Addr::new(127, 0, 0, 2));
    let url = format!("{}/api/chats/{chat}/events", s.base);
    let a = first.get(&url).send().await.unwrap();
    let b = first.get(&url).send().await.unwrap();
    assert_eq!((a.status().as_u16(), b.status().as_u16()), (200, 200));
    let c = resp(first.get(&url).send().await.unwrap()).await;
    c.assert_error(429, "too-many-streams");
    // Another client, anonymous too, is not locked out by the first one's streams.
    let d = other.get(&url).send().await.unwrap();
    assert_eq!(d.status(), 200);
    let e = other.get(&url).send().await.unwrap();
    assert_eq!(e.status(), 200);
    drop((a, b, d, e));
}

/// Routes merged after the API's (the channels' webhooks) are not under the browser rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_merged_after_the_api_are_not_under_the_rules() {
    use tower::ServiceExt;
    let db = frogbot_testkit::sqlite_db();
    let config = common::config(&db.url);
    let engine = frogbot::build_engine(&config).await.expect("engine");
    let hook = axum::Router::new().route(
        "/webhooks/test",
        axum::routing::post(|body: String| async move { body }),
    );
    let app = frogbot::app(&config, engine).merge(hook);
    let req = |path: &str| {
        axum::http::Request::post(path)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", "https://hooks.platform.example")
            .body(axum::body::Body::from("payload=1"))
            .unwrap()
    };
    let res = app.clone().oneshot(req("/webhooks/test")).await.unwrap();
    assert_eq!(res.status(), 200);
    let res = app.oneshot(req("/api/chats/x/messages")).await.unwrap();
    assert_eq!(res.status(), 403);
}

/// An app's web view (`GET /apps/{chat}/{message}/{link}`, issue 40 item 5): the address a
/// platform shows for an app is its capability, opened without a token; the page is its own
/// origin-less sandbox, never framed, its address not sent on as a referrer; a wrong or malformed
/// link, another message's, or a deleted message's is a 404 that says nothing of which.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apps_web_view_is_for_whoever_holds_its_address() {
    let (s, _db) = server("[server]\npublic_url = \"https://bot.example.com\"").await;
    let r = s
        .post(
            "/api/agent-chats",
            Some(common::AGENT),
            json!({"to": {"web": "app-for-alice", "user": "alice"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let html = "<!doctype html><p>chart</p><script>document.title='ran'</script>";
    let r = s
        .post(
            "/api/chats/app-for-alice/agent-messages",
            Some(common::AGENT),
            json!({"id": "m1", "text": "Numbers", "blocks": [
                {"type": "html", "title": "Chart", "html": html},
            ]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let link = r.json["parts"][1]["data"]["link"]
        .as_str()
        .expect("the engine gave the app a link")
        .to_owned();
    let view = |path: String| {
        let s = &s;
        async move {
            resp(
                s.client
                    .get(format!("{}{path}", s.base))
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    let page = view(format!("/apps/app-for-alice/m1/{link}")).await;
    assert_eq!(page.status, 200, "{}", page.text);
    assert_eq!(page.text, html);
    let got = s
        .client
        .get(format!("{}/apps/app-for-alice/m1/{link}", s.base))
        .send()
        .await
        .unwrap();
    let h = |n: &str| got.headers()[n].to_str().unwrap().to_owned();
    assert_eq!(
        h("content-security-policy"),
        "sandbox allow-scripts allow-forms allow-popups; frame-ancestors 'none'"
    );
    assert_eq!(h("referrer-policy"), "no-referrer");
    assert_eq!(h("x-content-type-options"), "nosniff");
    assert_eq!(h("cache-control"), "private, no-store");
    let other = "0".repeat(32);
    for wrong in [
        format!("/apps/app-for-alice/m1/{other}"),
        format!("/apps/app-for-alice/m1/{}", &link[..31]),
        format!("/apps/app-for-alice/m2/{link}"),
        format!("/apps/other-chat/m1/{link}"),
        format!("/apps/..%2F/m1/{link}"),
    ] {
        view(wrong.clone()).await.assert_error(404, "not-found");
    }
    // Deleted: gone.
    let r = s
        .delete(
            "/api/chats/app-for-alice/agent-messages/m1",
            Some(common::AGENT),
        )
        .await;
    assert!(r.status < 300, "{}", r.text);
    view(format!("/apps/app-for-alice/m1/{link}"))
        .await
        .assert_error(404, "not-found");
}
