//! Live event streams (`GET /api/chats/{id}/events`) under load, against the real binary: many
//! listeners on a big chat cost little memory, all of them receive every change, and the memory is
//! given back when they leave (issue 14, defect 3).

mod common;

use std::time::{Duration, Instant};

use common::child::{ServeProcess, config_file, free_port, frogbot, start};
use futures::StreamExt;
use serde_json::{Value, json};

fn client() -> reqwest::Client {
    frogbot_openai::install_crypto_provider();
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

/// The resident memory of a process, in MiB (Linux `/proc`).
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb / 1024.0
}

/// The server's resident memory once it stops shrinking (the allocator returns freed memory to the
/// system after a short delay).
async fn settled_rss(pid: u32) -> f64 {
    let mut last = rss_mib(pid);
    let mut steady = 0;
    for _ in 0..80 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = rss_mib(pid);
        if (last - now).abs() < 0.25 {
            steady += 1;
            if steady == 12 {
                return now;
            }
        } else {
            steady = 0;
        }
        last = now;
    }
    last
}

async fn post(http: &reqwest::Client, base: &str, chat: &str, text: &str) -> u16 {
    http.post(format!("{base}/api/chats/{chat}/messages"))
        .json(&json!({"parts": [{"type": "text", "text": text}]}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn serve(dir: &std::path::Path, db: &str, extra: &str) -> ServeProcess {
    let port = free_port();
    let path = config_file(dir, port, db, extra);
    let mut cmd = frogbot();
    cmd.arg("serve").arg("--config").arg(&path);
    start(cmd, port).await
}

/// Reads SSE `data:` events from a response until `until` says the events so far are enough.
async fn read_events(
    res: reqwest::Response,
    mut until: impl FnMut(&[Value]) -> bool,
    within: Duration,
) -> Vec<Value> {
    let mut body = res.bytes_stream();
    let mut buf = String::new();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    while !until(&events) {
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .expect("events in time")
            .expect("the stream stays open")
            .expect("a chunk");
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(cut) = buf.find("\n\n") {
            let block: String = buf.drain(..cut + 2).collect();
            for line in block.lines() {
                if let Some(data) = line.strip_prefix("data: ") {
                    events.push(serde_json::from_str(data).unwrap());
                }
            }
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_listeners_on_a_4_mb_chat_cost_little_and_all_get_every_change() {
    const LISTENERS: usize = 500;
    let db = frogbot_testkit::sqlite_db();
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        &db.url,
        "[server]\nmax_event_streams = 1000\nmax_event_streams_per_user = 1000",
    )
    .await;
    let pid = server.child.id();
    let http = client();
    // A 4 MB chat: two 1 MB messages and their echoes.
    let big = "x".repeat(1 << 20);
    for _ in 0..2 {
        assert_eq!(post(&http, &server.base, "big", &big).await, 200);
    }
    let chat_json = http
        .get(format!("{}/api/chats/big", server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(chat_json.len() > 4_000_000, "{} bytes", chat_json.len());
    drop(chat_json);
    let baseline = settled_rss(pid).await;

    let mut streams = Vec::new();
    for _ in 0..LISTENERS {
        let res = http
            .get(format!("{}/api/chats/big/events", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        streams.push(res);
    }
    // Each listener gets the state first, then the change made below.
    let waiters: Vec<_> = streams
        .into_iter()
        .map(|res| {
            tokio::spawn(read_events(
                res,
                |events| {
                    events.iter().any(|e| {
                        e["type"] == "message"
                            && e["message"]["parts"]
                                .to_string()
                                .contains("You said: hello all")
                    })
                },
                Duration::from_secs(60),
            ))
        })
        .collect();
    assert_eq!(post(&http, &server.base, "big", "hello all").await, 200);
    let mut peak = rss_mib(pid);
    for w in waiters.into_iter() {
        let events = w.await.unwrap();
        assert_eq!(events[0]["type"], "state", "{:?}", events[0]);
        assert!(
            events
                .iter()
                .any(|e| e["type"] == "message" && e["message"]["parts"][0]["text"] == "hello all"),
            "the listener got the user's message too"
        );
        peak = peak.max(rss_mib(pid));
    }
    eprintln!("RSS: baseline {baseline:.1} MiB, with {LISTENERS} listeners {peak:.1} MiB");
    assert!(
        peak < baseline + 100.0,
        "{LISTENERS} listeners took the server from {baseline:.1} to {peak:.1} MiB"
    );
    // Every stream closed (the responses were dropped): the memory comes back.
    // The allocator gives freed pages back to the system within seconds (jemalloc's decay).
    let deadline = Instant::now() + Duration::from_secs(40);
    let after = loop {
        let now = rss_mib(pid);
        if now < baseline + 5.0 || Instant::now() > deadline {
            break now;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    eprintln!("RSS after the listeners left: {after:.1} MiB");
    assert!(
        after < baseline + 5.0,
        "after the listeners left the server kept {after:.1} MiB (baseline {baseline:.1})"
    );
    // The server still answers at once.
    let t = Instant::now();
    let ok = http
        .get(format!("{}/healthz", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_past_the_caps_get_429_and_a_closed_stream_frees_its_place() {
    let db = frogbot_testkit::sqlite_db();
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        &db.url,
        "anonymous = \"chat\"\n\n[server]\nmax_event_streams = 3\nmax_event_streams_per_user = 2\n\n\
         [[users]]\nid = \"alice\"\ntoken = \"alice-token\"",
    )
    .await;
    let http = client();
    assert_eq!(post(&http, &server.base, "capped", "hi").await, 200);
    let open = |token: Option<&'static str>| {
        let mut req = http.get(format!("{}/api/chats/capped/events", server.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    let a = open(None).await.unwrap();
    let b = open(None).await.unwrap();
    assert_eq!((a.status().as_u16(), b.status().as_u16()), (200, 200));
    // A third anonymous stream is over the per-caller cap.
    let c = open(None).await.unwrap();
    assert_eq!(c.status(), 429);
    let body: Value = c.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too-many-streams", "{body}");
    // alice (who may read this ownerless chat) has her own cap, but the server's is 3.
    let d = open(Some("alice-token")).await.unwrap();
    assert_eq!(d.status(), 200);
    let e = open(Some("alice-token")).await.unwrap();
    assert_eq!(e.status(), 429);
    // Closing one stream frees its place.
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let f = open(None).await.unwrap();
        if f.status() == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the closed stream's place was not freed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
