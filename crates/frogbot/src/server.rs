//! The HTTP server under the router: hyper's HTTP/1 connections accepted from a tokio listener,
//! with the limits of `[server]` (see [`ServerConfig`]) and a graceful shutdown.
//!
//! - Header read timeout: hyper's own (`header_read_timeout`, driven by a tokio timer). hyper
//!   starts that clock when a connection opens and again each time it goes idle after a response
//!   (`State::idle` in hyper's `proto/h1/conn.rs` asks for a new header read), so it also closes
//!   idle keep-alive connections: one setting bounds both.
//! - Body read timeout: a deadline on each request body, counted from the end of its header; a
//!   body still incomplete then is answered 408 `request-timeout` and the connection is closed.
//! - URIs over [`MAX_URI_BYTES`] are answered 414 `uri-too-long` (hyper itself answers a bare 414
//!   beyond 64 KiB, before any service runs).
//! - At most `max_connections` connections are served at once (long-lived event streams
//!   included); one more is answered `503` with `Connection: close` at once and closed. Refusals
//!   are logged at a bounded rate ([`RefusalLog`]): the first, then at most one line per
//!   [`REFUSAL_LOG_EVERY`] with the number refused since.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::config::ServerConfig;

/// The longest request target (path and query) served; longer ones get 414 `uri-too-long`.
pub const MAX_URI_BYTES: usize = 8 * 1024;

/// How many refused connections are answered at once; beyond that they are closed unanswered.
const MAX_REFUSING: usize = 64;

/// How long a refused connection may take to receive its 503.
const REFUSAL_TIME: Duration = Duration::from_secs(1);

/// How often at most refused connections are logged.
pub const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

/// Counts refused connections and says when to log them: the first refusal at once, then at most
/// one line per `every`, counting the refusals since the last line (a flood of connections over
/// `max_connections` must not become a flood of log lines).
#[derive(Debug)]
pub struct RefusalLog {
    every: Duration,
    last: Option<Instant>,
    unlogged: u64,
}

impl RefusalLog {
    /// A log of at most one line per `every`.
    pub fn new(every: Duration) -> Self {
        Self {
            every,
            last: None,
            unlogged: 0,
        }
    }

    /// Notes a refusal at `now`; `Some(n)` when a line is due, `n` the refusals it reports (this
    /// one included).
    pub fn refused(&mut self, now: Instant) -> Option<u64> {
        self.unlogged += 1;
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < self.every)
        {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unlogged))
    }
}

/// Serves `app` on `listener` with the limits of `limits` until `shutdown` resolves; then stops
/// accepting, lets the requests in flight finish for up to `grace`, and returns.
pub async fn run(
    listener: TcpListener,
    app: Router,
    limits: &ServerConfig,
    shutdown: impl Future<Output = ()> + Send,
    grace: Duration,
) -> std::io::Result<()> {
    let app = app.layer(axum::middleware::from_fn_with_state(
        Duration::from_secs(limits.body_read_timeout_seconds),
        limit_requests,
    ));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(limits.header_read_timeout_seconds));
    let listen = listener.local_addr()?;
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
    let mut refusals = RefusalLog::new(REFUSAL_LOG_EVERY);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    accept_error(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            if let Some(refused) = refusals.refused(Instant::now()) {
                tracing::warn!(
                    %peer,
                    max_connections = limits.max_connections,
                    refused,
                    "connections refused: too many connections (logged at most once per {} s)",
                    REFUSAL_LOG_EVERY.as_secs()
                );
            }
            if let Ok(permit) = refusing.clone().try_acquire_owned() {
                tokio::spawn(async move {
                    refuse(stream).await;
                    drop(permit);
                });
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        // Each request is told its connection: the browser rules and the anonymous event-stream
        // budget need the listen and client addresses.
        let service = TowerToHyperService::new(tower::Layer::layer(
            &axum::Extension(crate::browser::Connection { peer, listen }),
            app.clone(),
        ));
        let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            grace_seconds = grace.as_secs(),
            "connections still open after the grace period; closing them"
        );
    }
    Ok(())
}

/// An accept error: one connection's (it is gone; go on), or the process's (out of file
/// descriptors: wait a moment rather than spin).
async fn accept_error(e: std::io::Error) {
    use std::io::ErrorKind::*;
    if matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset | Interrupted | WouldBlock
    ) {
        return;
    }
    tracing::error!(error = %e, "accept failed");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// The 503 of a refused connection, with the contract's error body.
fn refusal() -> Vec<u8> {
    let body = serde_json::json!({"error": {
        "code": "unavailable",
        "message": "the server has too many open connections; try again later",
    }})
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Answers a connection over the limit with a 503 and closes it, within [`REFUSAL_TIME`]. What
/// the client sent is read and dropped meanwhile, so the close does not reset the connection
/// before the client has read the answer.
async fn refuse(mut stream: TcpStream) {
    let answer = async {
        stream.write_all(&refusal()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 1024];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(REFUSAL_TIME, answer).await;
}

/// The limits of one request: its URI length and its body's deadline.
async fn limit_requests(State(body_time): State<Duration>, req: Request, next: Next) -> Response {
    let uri = req.uri();
    let target = uri.path_and_query().map_or(0, |p| p.as_str().len())
        + uri.authority().map_or(0, |a| a.as_str().len());
    if target > MAX_URI_BYTES {
        return crate::http::json_error(
            StatusCode::URI_TOO_LONG,
            format!("the request target is {target} bytes; at most {MAX_URI_BYTES} are served"),
        );
    }
    let late = Arc::new(AtomicBool::new(false));
    let req = req.map(|body| {
        Body::new(DeadlineBody {
            inner: body,
            deadline: tokio::time::sleep(body_time),
            late: late.clone(),
        })
    });
    let res = next.run(req).await;
    if late.load(Ordering::Acquire) {
        let mut res = crate::http::json_error(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} s",
                body_time.as_secs()
            ),
        );
        res.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return res;
    }
    res
}

/// The request body was not complete by its deadline.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
struct BodyTimeout;

pin_project_lite::pin_project! {
    /// A request body that fails with [`BodyTimeout`] once `deadline` passes (a total deadline,
    /// unlike tower-http's `TimeoutBody`, which only bounds the wait between two frames and so
    /// lets a body that trickles in a byte at a time hold its connection for ever).
    struct DeadlineBody {
        #[pin]
        inner: Body,
        #[pin]
        deadline: tokio::time::Sleep,
        late: Arc<AtomicBool>,
    }
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let this = self.project();
        if let Poll::Ready(frame) = this.inner.poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if this.deadline.poll(cx).is_ready() {
            this.late.store(true, Ordering::Release);
            return Poll::Ready(Some(Err(axum::Error::new(BodyTimeout))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_logged_first_then_once_per_period_with_their_count() {
        let mut log = RefusalLog::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(log.refused(t0), Some(1), "the first is logged");
        // 787 more within the period: none logged.
        for i in 0..787u64 {
            assert_eq!(log.refused(t0 + Duration::from_millis(i * 10)), None);
        }
        // The period is over: one line counting them all, this one included.
        assert_eq!(log.refused(t0 + Duration::from_secs(10)), Some(788));
        assert_eq!(log.refused(t0 + Duration::from_secs(11)), None);
        assert_eq!(log.refused(t0 + Duration::from_secs(25)), Some(2));
        // A quiet spell: the next is logged at once.
        assert_eq!(log.refused(t0 + Duration::from_secs(100)), Some(1));
    }
}
