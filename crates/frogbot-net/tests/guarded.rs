//! The guarded client against real HTTP servers on 127.0.0.1: private addresses refused by
//! default (a literal one and a name resolving to one, with no request made), fetched when
//! allowed; redirects followed and counted; an endless body cut at the cap without being held
//! whole; a server that never answers timed out.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::response::Redirect;
use frogbot_net::{FetchError, FetchPolicy, GuardedClient, Oversize};

/// A server on 127.0.0.1 and its count of requests.
async fn server() -> (u16, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = axum::Router::new()
        .route("/page", axum::routing::get(|| async { "hello frog" }))
        .route(
            "/moved",
            axum::routing::get(|| async { Redirect::to("/page") }),
        )
        .route(
            "/loop",
            axum::routing::get(|| async { Redirect::to("/loop") }),
        )
        .route(
            "/to-file",
            axum::routing::get(|| async { Redirect::to("file:///etc/passwd") }),
        )
        .route(
            "/endless",
            axum::routing::get(|| async {
                // 10 MB in 64 KB chunks, produced only as they are read.
                let chunk = axum::body::Bytes::from(vec![b'x'; 64 * 1024]);
                let stream = futures::stream::iter(
                    (0..160).map(move |_| Ok::<_, std::io::Error>(chunk.clone())),
                );
                axum::body::Body::from_stream(stream)
            }),
        )
        .route(
            "/private",
            axum::routing::get(|h: axum::http::HeaderMap| async move {
                match h.get("authorization").and_then(|v| v.to_str().ok()) {
                    Some("Bearer xoxb-1") => (axum::http::StatusCode::OK, "secret file"),
                    _ => (axum::http::StatusCode::UNAUTHORIZED, "no"),
                }
            }),
        )
        .route(
            "/to-other-origin",
            axum::routing::get(|h: axum::http::HeaderMap| async move {
                // The same server under another name: another origin.
                let host = h.get("host").unwrap().to_str().unwrap().to_string();
                let port = host.rsplit(':').next().unwrap_or("80").to_string();
                Redirect::to(&format!("http://localhost:{port}/echo-auth"))
            }),
        )
        .route(
            "/echo-auth",
            axum::routing::get(|h: axum::http::HeaderMap| async move {
                format!(
                    "auth={:?}",
                    h.get("authorization")
                        .map(|v| v.to_str().unwrap().to_string())
                )
            }),
        )
        .route(
            "/post-moved",
            axum::routing::post(|| async { Redirect::temporary("/upload") }),
        )
        .route(
            "/upload",
            axum::routing::post(
                |h: axum::http::HeaderMap, body: axum::body::Bytes| async move {
                    let header = |n: &str| h.get(n).map(|v| v.to_str().unwrap().to_string());
                    format!(
                        "len={:?} chunked={:?} type={:?} auth={:?} got={}",
                        header("content-length"),
                        header("transfer-encoding"),
                        header("content-type"),
                        header("authorization"),
                        body.len()
                    )
                },
            ),
        )
        .route(
            "/never",
            axum::routing::get(|| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                "late"
            }),
        )
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let hits = counted.clone();
                async move {
                    hits.fetch_add(1, Ordering::SeqCst);
                    next.run(req).await
                }
            },
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, hits)
}

fn client(allow_private: bool, max_bytes: usize) -> GuardedClient {
    let _ = rustls::crypto::ring::default_provider().install_default();
    GuardedClient::new(FetchPolicy {
        allow_private,
        max_bytes,
        timeout: Duration::from_secs(2),
        max_redirects: 3,
        ..FetchPolicy::default()
    })
    .unwrap()
}

#[tokio::test]
async fn private_addresses_are_refused_by_default_with_no_request_made() {
    let (port, hits) = server().await;
    let public = client(false, 1_000);
    for url in [
        format!("http://127.0.0.1:{port}/page"),
        format!("http://[::1]:{port}/page"),
        format!("http://[::ffff:127.0.0.1]:{port}/page"),
        format!("http://localhost:{port}/page"),
        format!("http://LocalHost:{port}/page"),
        format!("http://2130706433:{port}/page"),
    ] {
        let e = public.get(&url).await.unwrap_err();
        assert!(matches!(e, FetchError::Forbidden { .. }), "{url}: {e}");
        assert!(e.to_string().contains("private address"), "{e}");
    }
    assert!(matches!(
        public.get("file:///etc/passwd").await.unwrap_err(),
        FetchError::Scheme { .. }
    ));
    assert!(matches!(
        public.get("not a url").await.unwrap_err(),
        FetchError::InvalidUrl(_)
    ));
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn private_addresses_are_fetched_when_allowed_and_redirects_checked() {
    let (port, hits) = server().await;
    let private = client(true, 1_000);
    let (r, body) = private
        .get_body(&format!("http://localhost:{port}/page"), Oversize::Refuse)
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.content_type().starts_with("text/plain"));
    assert_eq!(body.bytes, b"hello frog");
    let (r, body) = private
        .get_body(&format!("http://127.0.0.1:{port}/moved"), Oversize::Refuse)
        .await
        .unwrap();
    assert_eq!(r.url().path(), "/page");
    assert_eq!(body.bytes, b"hello frog");
    let e = private
        .get(&format!("http://127.0.0.1:{port}/loop"))
        .await
        .unwrap_err();
    assert!(
        matches!(e, FetchError::TooManyRedirects { max: 3, .. }),
        "{e}"
    );
    let e = private
        .get(&format!("http://127.0.0.1:{port}/to-file"))
        .await
        .unwrap_err();
    assert!(matches!(e, FetchError::Scheme { .. }), "{e}");
    let missing = private
        .get(&format!("http://127.0.0.1:{port}/nope"))
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert!(matches!(
        missing.error_for_status().unwrap_err(),
        FetchError::Status { status: 404, .. }
    ));
    // page, moved + page, loop ×4 (the first and three redirects), to-file, nope.
    assert_eq!(hits.load(Ordering::SeqCst), 9);
}

#[tokio::test]
async fn an_endless_body_is_cut_or_refused_at_the_cap() {
    let (port, _) = server().await;
    let private = client(true, 100_000);
    let url = format!("http://127.0.0.1:{port}/endless");
    let (_, body) = private.get_body(&url, Oversize::Truncate).await.unwrap();
    assert_eq!(body.bytes.len(), 100_000);
    assert!(body.truncated);
    assert!(
        body.bytes.capacity() < 1_000_000,
        "{}",
        body.bytes.capacity()
    );
    let e = private.get_body(&url, Oversize::Refuse).await.unwrap_err();
    assert!(
        matches!(e, FetchError::TooLarge { max: 100_000, .. }),
        "{e}"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_is_timed_out() {
    let (port, _) = server().await;
    let private = client(true, 1_000);
    let started = std::time::Instant::now();
    let e = private
        .get(&format!("http://127.0.0.1:{port}/never"))
        .await
        .unwrap_err();
    assert!(matches!(e, FetchError::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("timed out"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_body_streams_with_headers_kept_to_its_origin_and_capped() {
    use futures::StreamExt;
    let (port, _) = server().await;
    let private = client(true, 100_000);
    let base = format!("http://127.0.0.1:{port}");
    let auth = [("authorization", "Bearer xoxb-1")];
    let r = private
        .get_with_headers(&format!("{base}/private"), &auth)
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let got: Vec<Vec<u8>> = r.into_stream().map(|c| c.unwrap()).collect().await;
    assert_eq!(got.concat(), b"secret file");
    // A redirect to another origin goes without the header.
    let r = private
        .get_with_headers(&format!("{base}/to-other-origin"), &auth)
        .await
        .unwrap();
    let got: Vec<Vec<u8>> = r.into_stream().map(|c| c.unwrap()).collect().await;
    assert_eq!(String::from_utf8(got.concat()).unwrap(), "auth=None");
    // An endless body ends with TooLarge once past the cap, having read little more.
    let r = private.get(&format!("{base}/endless")).await.unwrap();
    let mut s = std::pin::pin!(r.into_stream());
    let mut read = 0;
    let e = loop {
        match s.next().await.expect("an end") {
            Ok(c) => read += c.len(),
            Err(e) => break e,
        }
    };
    assert!(
        matches!(e, FetchError::TooLarge { max: 100_000, .. }),
        "{e}"
    );
    assert!(read <= 100_000, "{read}");
}

#[tokio::test]
async fn a_post_sends_its_body_as_it_is_read_with_its_length_and_follows_no_redirect() {
    use futures::StreamExt;
    let (port, hits) = server().await;
    let base = format!("http://127.0.0.1:{port}");
    // 1 MB made 64 KB at a time as the client asks for it; the pieces produced are counted.
    let produced = Arc::new(AtomicUsize::new(0));
    let body = |produced: Arc<AtomicUsize>| {
        futures::stream::iter(0..16).map(move |_| {
            produced.fetch_add(1, Ordering::SeqCst);
            Ok::<_, std::io::Error>(vec![b'y'; 64 * 1024])
        })
    };
    let r = client(true, 1_000)
        .post_stream(
            &format!("{base}/upload"),
            &[("authorization", "Bearer xoxb-1")],
            "image/png",
            1024 * 1024,
            body(produced.clone()),
        )
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let got: Vec<Vec<u8>> = r.into_stream().map(|c| c.unwrap()).collect().await;
    assert_eq!(
        String::from_utf8(got.concat()).unwrap(),
        "len=Some(\"1048576\") chunked=None type=Some(\"image/png\") auth=Some(\"Bearer xoxb-1\") got=1048576"
    );
    assert_eq!(produced.load(Ordering::SeqCst), 16);
    // A media type that cannot be sent goes as bytes, not as a failed upload.
    let r = client(true, 1_000)
        .post_stream(
            &format!("{base}/upload"),
            &[],
            "image/png\r\nx-injected: 1",
            64 * 1024,
            body(Arc::default()).take(1),
        )
        .await
        .unwrap();
    let got: Vec<Vec<u8>> = r.into_stream().map(|c| c.unwrap()).collect().await;
    assert!(
        String::from_utf8(got.concat())
            .unwrap()
            .contains("type=Some(\"application/octet-stream\")"),
    );
    // A redirect is an answer: not followed (the body cannot be sent again).
    let r = client(true, 1_000)
        .post_stream(
            &format!("{base}/post-moved"),
            &[],
            "text/plain",
            0,
            body(Arc::default()).take(0),
        )
        .await
        .unwrap();
    assert_eq!(r.status(), 307);
    // A private address is refused before anything is sent, unless allowed.
    let before = hits.load(Ordering::SeqCst);
    let e = client(false, 1_000)
        .post_stream(
            &format!("{base}/upload"),
            &[],
            "text/plain",
            1,
            body(produced.clone()),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, FetchError::Forbidden { .. }), "{e}");
    assert_eq!(hits.load(Ordering::SeqCst), before);
    assert_eq!(
        produced.load(Ordering::SeqCst),
        16,
        "nothing read for a refused post"
    );
}
