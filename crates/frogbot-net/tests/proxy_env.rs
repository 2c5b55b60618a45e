//! The environment's proxy settings are never followed: with `HTTP_PROXY`, `http_proxy`,
//! `ALL_PROXY` and `HTTPS_PROXY` pointing at a local recording proxy, a request to
//! `http://localhost:PORT/` is refused and the proxy receives nothing; allowed, it goes straight
//! to the server. A configured proxy is used, and the target's name is checked first. (Its own
//! test binary: the environment is the process's.)

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use frogbot_net::{FetchError, FetchPolicy, GuardedClient, Oversize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A "proxy" on 127.0.0.1 that counts connections and answers each with `proxied`.
async fn recording_proxy() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = socket.read(&mut buf).await;
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\nproxied",
                    )
                    .await;
            });
        }
    });
    (format!("http://{addr}"), hits)
}

async fn server() -> u16 {
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "direct" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

fn policy(allow_private: bool) -> FetchPolicy {
    FetchPolicy {
        allow_private,
        timeout: Duration::from_secs(3),
        ..FetchPolicy::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environments_proxy_is_never_used() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if std::env::var_os("FROGBOT_NET_PROXY_CHILD").is_some() {
        return child().await;
    }
    // The variables are set for a child run of this test (the crate denies unsafe code, and
    // edition 2024's `set_var` is unsafe); the proxy is this process's, counting what it gets.
    let (proxy, proxy_hits) = recording_proxy().await;
    let status = tokio::task::spawn_blocking(move || {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "the_environments_proxy_is_never_used",
                "--nocapture",
            ])
            .env("FROGBOT_NET_PROXY_CHILD", "1")
            .env("FROGBOT_NET_TEST_PROXY", &proxy)
            .env("HTTP_PROXY", &proxy)
            .env("http_proxy", &proxy)
            .env("HTTPS_PROXY", &proxy)
            .env("https_proxy", &proxy)
            .env("ALL_PROXY", &proxy)
            .env("all_proxy", &proxy)
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .status()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(status.success(), "the child run failed");
    assert_eq!(
        proxy_hits.load(Ordering::SeqCst),
        0,
        "the proxy got requests"
    );
}

/// The child run: the environment points at the parent's proxy.
async fn child() {
    let proxy = std::env::var("FROGBOT_NET_TEST_PROXY").unwrap();
    assert_eq!(std::env::var("HTTP_PROXY").unwrap(), proxy);
    assert_eq!(std::env::var("ALL_PROXY").unwrap(), proxy);
    let port = server().await;
    let public = GuardedClient::new(policy(false)).unwrap();
    for url in [
        format!("http://localhost:{port}/"),
        format!("http://127.0.0.1:{port}/"),
    ] {
        let e = public.get(&url).await.unwrap_err();
        assert!(matches!(e, FetchError::Forbidden { .. }), "{url}: {e}");
    }
    let private = GuardedClient::new(policy(true)).unwrap();
    let (_, body) = private
        .get_body(&format!("http://localhost:{port}/"), Oversize::Refuse)
        .await
        .unwrap();
    assert_eq!(body.bytes, b"direct", "the request went to the proxy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_proxy_is_used_and_the_target_checked_first() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if std::env::var_os("FROGBOT_NET_PROXY_CHILD").is_some() {
        return;
    }
    let (proxy, proxy_hits) = recording_proxy().await;
    let port = server().await;
    let through = |allow_private| {
        GuardedClient::new(FetchPolicy {
            proxy: Some(proxy.parse().unwrap()),
            ..policy(allow_private)
        })
        .unwrap()
    };
    // The proxy (on loopback itself) is reached; the target's name is checked before.
    for url in [
        format!("http://localhost:{port}/"),
        format!("http://127.0.0.1:{port}/"),
        format!("http://[::1]:{port}/"),
    ] {
        let e = through(false).get(&url).await.unwrap_err();
        assert!(matches!(e, FetchError::Forbidden { .. }), "{url}: {e}");
    }
    assert_eq!(proxy_hits.load(Ordering::SeqCst), 0);
    let (_, body) = through(true)
        .get_body(&format!("http://localhost:{port}/"), Oversize::Refuse)
        .await
        .unwrap();
    assert_eq!(body.bytes, b"proxied");
    assert_eq!(proxy_hits.load(Ordering::SeqCst), 1);
}
