//! The server's limits of `[server]`, through raw sockets: a header or a body that does not arrive
//! in time, idle connections, and the connection cap.

mod common;

use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The generous bound within which a timed-out connection must be closed (its timeout is 1 s).
const CLOSED_WITHIN: Duration = Duration::from_secs(10);

async fn server(extra: &str) -> (Server, frogbot_testkit::TestDb) {
    let db = frogbot_testkit::sqlite_db();
    let s = start_with(&db, extra).await;
    (s, db)
}

async fn connect(s: &Server) -> TcpStream {
    TcpStream::connect(s.base.trim_start_matches("http://"))
        .await
        .expect("connect")
}

/// Reads until `done` holds on what arrived; fails after [`WAIT`] or at EOF.
async fn read_until(stream: &mut TcpStream, done: impl Fn(&str) -> bool) -> String {
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        while !done(&String::from_utf8_lossy(&got)) {
            let n = stream.read(&mut buf).await.expect("read");
            assert!(
                n > 0,
                "closed early; got {:?}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(WAIT, read)
        .await
        .expect("the expected bytes in time");
    String::from_utf8_lossy(&got).into_owned()
}

/// Reads until the server closes the connection (EOF or reset) and returns what arrived; fails if
/// it is still open after [`CLOSED_WITHIN`].
async fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(CLOSED_WITHIN, read)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the server kept the connection open; got {:?}",
                String::from_utf8_lossy(&got)
            )
        });
    String::from_utf8_lossy(&got).into_owned()
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";

fn is_healthz_answer(s: &str) -> bool {
    s.contains("\r\n\r\n") && s.ends_with("ok")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_that_stalls_is_closed_after_the_header_timeout() {
    let (s, _db) = server("[server]\nheader_read_timeout_seconds = 1").await;
    let mut slow = connect(&s).await;
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: frog")
        .await
        .expect("write");
    let got = read_until_closed(&mut slow).await;
    assert!(!got.contains("200 OK"), "{got:?}");
    // The server still answers others.
    assert_eq!(s.get("/healthz", None).await.text, "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_after_the_timeout() {
    let (s, _db) = server("[server]\nheader_read_timeout_seconds = 1").await;
    // A keep-alive connection after its answer.
    let mut kept = connect(&s).await;
    kept.write_all(HEALTHZ).await.expect("write");
    let answer = read_until(&mut kept, is_healthz_answer).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    assert_eq!(read_until_closed(&mut kept).await, "");
    // A connection that never sends anything.
    let mut silent = connect(&s).await;
    assert_eq!(read_until_closed(&mut silent).await, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_body_is_cut_off_with_408() {
    let (s, _db) = server("[server]\nbody_read_timeout_seconds = 1").await;
    let head = "POST /api/chats/slow-body/messages HTTP/1.1\r\nHost: localhost\r\n\
                Content-Type: application/json\r\nContent-Length: 200\r\n\r\n";
    // A body that stops.
    let mut stalled = connect(&s).await;
    stalled
        .write_all(format!("{head}{{\"parts\": [").as_bytes())
        .await
        .expect("write");
    let got = read_until_closed(&mut stalled).await;
    assert!(got.starts_with("HTTP/1.1 408"), "{got:?}");
    assert!(got.contains("\"code\":\"request-timeout\""), "{got:?}");
    // A body that trickles in, a byte every 100 ms (it would take 20 s): the deadline is total.
    let trickle = connect(&s).await;
    let (mut rx, mut tx) = trickle.into_split();
    tx.write_all(head.as_bytes()).await.expect("write");
    let writer = tokio::spawn(async move {
        for _ in 0..200 {
            if tx.write_all(b" ").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let mut got = Vec::new();
    tokio::time::timeout(CLOSED_WITHIN, rx.read_to_end(&mut got))
        .await
        .expect("a trickling body is cut off")
        .ok();
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("HTTP/1.1 408"), "{got:?}");
    writer.abort();
    // Nothing was created.
    s.chat("slow-body", None)
        .await
        .assert_error(404, "not-found");
}

/// Opens a connection and makes `request` on it until it is answered (not refused), reading up to
/// `done`; the connection is then held open by the caller.
async fn hold(s: &Server, request: &str, done: impl Fn(&str) -> bool + Copy) -> TcpStream {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut c = connect(s).await;
        c.write_all(request.as_bytes()).await.expect("write");
        let got = read_until(&mut c, |g| g.starts_with("HTTP/1.1 503") || done(g)).await;
        if !got.starts_with("HTTP/1.1 503") {
            assert!(got.starts_with("HTTP/1.1 200"), "{got:?}");
            return c;
        }
        // A slot of a connection closed a moment ago may not be free yet.
        assert!(tokio::time::Instant::now() < deadline, "never admitted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_limit_are_refused_at_once() {
    let (s, _db) = server("[server]\nmax_connections = 4").await;
    let chat = chat_id("cap");
    let post = format!(
        "POST /api/chats/{chat}/messages HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
        msg("hi").to_string().len(),
        msg("hi")
    );
    let mut c = connect(&s).await;
    c.write_all(post.as_bytes()).await.expect("write");
    assert!(read_until_closed(&mut c).await.starts_with("HTTP/1.1 200"));
    // Two live event streams and two idle keep-alive connections fill the four slots.
    let events = format!("GET /api/chats/{chat}/events HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(hold(&s, &events, |g| g.contains("data: ")).await);
    }
    let healthz = std::str::from_utf8(HEALTHZ).unwrap();
    for _ in 0..2 {
        held.push(hold(&s, healthz, is_healthz_answer).await);
    }
    // A fifth is answered 503 at once (or, at worst, closed), never left waiting.
    let fresh = reqwest::Client::new();
    let refused = tokio::time::timeout(
        Duration::from_secs(2),
        fresh.get(format!("{}/healthz", s.base)).send(),
    )
    .await
    .expect("the fifth connection is answered or closed within 2 s");
    if let Ok(res) = refused {
        assert_eq!(res.status().as_u16(), 503);
        assert_eq!(
            res.headers()
                .get("connection")
                .and_then(|v| v.to_str().ok()),
            Some("close")
        );
        let body: serde_json::Value = res.json().await.expect("json");
        assert_eq!(body["error"]["code"], "unavailable", "{body}");
    }
    // An event stream that ends frees its slot.
    drop(held.remove(0));
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let res = reqwest::Client::new()
            .get(format!("{}/healthz", s.base))
            .send()
            .await;
        if res.is_ok_and(|r| r.status() == 200) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no slot came free");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
