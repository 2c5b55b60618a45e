//! `GET /metrics`: the server's metrics in the Prometheus text format (version 0.0.4), from the
//! `metrics-exporter-prometheus` recorder installed once per process (without its own listener:
//! the route is served by the API's router), and the HTTP server's own metrics — requests by
//! route template and status, open SSE streams.
//!
//! The engine's metrics (turns, steps, questions, jobs, the store, platform calls) are named and
//! recorded in `frogbot_core::metrics`; this module only renders them, refreshing the gauges that
//! are read from the store (queue depth, jobs) on each scrape.
//!
//! `GET /metrics` takes an optional bearer token (compared in constant time). Queue depth and job
//! counts come from one backlog read per scrape (`engine.ops().refresh_backlog`).

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use frogbot_core::agent::Engine;
use frogbot_core::metrics as core_metrics;

/// HTTP requests answered, `{route, method, status}`: `route` is the matched route's template
/// (`/api/chats/:chat_id/messages`; ids never become labels), `unmatched` for a path no route
/// takes; `method` is the HTTP method (`other` for an unusual one); `status` the response's code.
pub const HTTP_REQUESTS: &str = "frogbot_http_requests_total";
/// How long a request took until its response's head, `{route, method}` (seconds; a stream's
/// body is not counted).
pub const HTTP_DURATION: &str = "frogbot_http_request_duration_seconds";
/// Server-sent event streams open now, `{stream}`: `turn` (a message's AI SDK stream), `events`
/// (a chat's live events).
pub const SSE_STREAMS: &str = "frogbot_sse_streams_open";

/// The histogram buckets of an HTTP request (seconds).
const HTTP_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The Prometheus text format's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The process's recorder, installed on first use; `None` when another recorder was installed
/// first (by an embedding program), whose metrics this route cannot render.
pub fn handle() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = buckets(PrometheusBuilder::new())
                .map(PrometheusBuilder::build_recorder)
                .inspect_err(|e| tracing::warn!(error = %e, "metrics: bad histogram buckets"))
                .ok()?;
            let handle = recorder.handle();
            if let Err(e) = metrics::set_global_recorder(recorder) {
                tracing::warn!(error = %e, "metrics: another recorder is installed; /metrics renders nothing");
                return None;
            }
            core_metrics::describe();
            describe();
            Some(handle)
        })
        .as_ref()
}

/// Every histogram with its buckets (so each renders as a Prometheus histogram, not a summary).
fn buckets(
    builder: PrometheusBuilder,
) -> Result<PrometheusBuilder, metrics_exporter_prometheus::BuildError> {
    [
        (core_metrics::TURN_DURATION, core_metrics::TURN_BUCKETS),
        (core_metrics::STEP_DURATION, core_metrics::STEP_BUCKETS),
        (core_metrics::ANSWER_LATENCY, core_metrics::ANSWER_BUCKETS),
        (core_metrics::STORE_OPERATION, core_metrics::STORE_BUCKETS),
        (HTTP_DURATION, HTTP_BUCKETS),
    ]
    .into_iter()
    .try_fold(builder, |builder, (name, buckets)| {
        builder.set_buckets_for_metric(Matcher::Full(name.to_owned()), buckets)
    })
}

fn describe() {
    describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests, by route template, method and status."
    );
    describe_histogram!(
        HTTP_DURATION,
        Unit::Seconds,
        "How long a request took until its response's head."
    );
    describe_gauge!(SSE_STREAMS, "Server-sent event streams open now.");
}

/// What `GET /metrics` needs.
#[derive(Clone)]
struct Scrape {
    engine: Engine,
    handle: &'static PrometheusHandle,
    token: Option<Arc<str>>,
}

/// `router` with `GET /metrics` (answering 401 without `Authorization: Bearer token` when a token
/// is given) and every request counted by [`track`]; `router` as it is when no recorder could be
/// installed.
pub fn install(router: Router, engine: Engine, token: Option<String>) -> Router {
    let Some(handle) = handle() else {
        return router;
    };
    let scrape = Scrape {
        engine,
        handle,
        token: token.map(Arc::from),
    };
    let route = Router::new()
        .route("/metrics", axum::routing::get(render))
        .with_state(scrape);
    router.merge(route).layer(axum::middleware::from_fn(track))
}

/// `GET /metrics`.
async fn render(State(scrape): State<Scrape>, headers: HeaderMap) -> Response {
    if let Some(token) = &scrape.token
        && !bearer_matches(&headers, token)
    {
        let mut res = (StatusCode::UNAUTHORIZED, "unauthorized\n").into_response();
        res.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"metrics\""),
        );
        return res;
    }
    if let Err(e) = scrape.engine.ops().refresh_backlog().await {
        // The other series still render; the gauges keep their last values.
        tracing::warn!(error = %e, "metrics: the store's backlog could not be read");
    }
    scrape.handle.run_upkeep();
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE))],
        scrape.handle.render(),
    )
        .into_response()
}

/// Whether `headers` carry `Authorization: Bearer token` (compared in constant time).
fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    let Some(given) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return false;
    };
    let (a, b) = (given.trim().as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The route label of a request: its matched route's template with each parameter written
/// `:name` (`/api/chats/:chat_id/messages`: braces in a label value trip simple parsers of the
/// text format), or `unmatched`.
pub fn route_label(req: &Request) -> String {
    let Some(path) = req.extensions().get::<MatchedPath>() else {
        return "unmatched".to_owned();
    };
    path.as_str()
        .split('/')
        .map(
            |seg| match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) => format!(":{}", name.trim_start_matches('*')),
                None => seg.to_owned(),
            },
        )
        .collect::<Vec<_>>()
        .join("/")
}

/// The method label: the usual methods by name, anything else `other`.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// The middleware counting every request by route template, method and status.
pub async fn track(req: Request, next: Next) -> Response {
    let route = route_label(&req);
    let method = method_label(req.method());
    let started = Instant::now();
    let res = next.run(req).await;
    let status = res.status().as_u16().to_string();
    histogram!(HTTP_DURATION, "route" => route.clone(), "method" => method)
        .record(started.elapsed().as_secs_f64());
    counter!(HTTP_REQUESTS, "route" => route, "method" => method, "status" => status).increment(1);
    res
}

/// An open SSE stream, counted in [`SSE_STREAMS`] until dropped.
#[derive(Debug)]
pub struct OpenStream(&'static str);

impl OpenStream {
    /// Counts an open stream of `kind` (`turn`, `events`).
    pub fn new(kind: &'static str) -> Self {
        gauge!(SSE_STREAMS, "stream" => kind).increment(1.0);
        Self(kind)
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        gauge!(SSE_STREAMS, "stream" => self.0).decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    /// The label the middleware sees for `path` on a router like the API's.
    async fn label_of(path: &str) -> String {
        let seen = Arc::new(std::sync::Mutex::new(String::new()));
        let seen2 = seen.clone();
        let app = Router::new()
            .route("/api/chats/{chat_id}/messages", get(|| async { "ok" }))
            .route("/healthz", get(|| async { "ok" }))
            .layer(axum::middleware::from_fn(
                move |req: Request, next: Next| {
                    let seen = seen2.clone();
                    async move {
                        *seen.lock().unwrap() = route_label(&req);
                        next.run(req).await
                    }
                },
            ));
        let res = app
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let _ = res.status();
        seen.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn an_id_in_the_path_stays_a_template() {
        assert_eq!(
            label_of("/api/chats/c-123456/messages").await,
            "/api/chats/:chat_id/messages"
        );
        assert_eq!(
            label_of("/api/chats/another-id/messages").await,
            "/api/chats/:chat_id/messages"
        );
        assert_eq!(label_of("/healthz").await, "/healthz");
        assert_eq!(label_of("/no/such/c-123456").await, "unmatched");
    }

    #[test]
    fn the_bearer_token_is_compared_whole() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            h
        };
        assert!(bearer_matches(&with("Bearer s3cret"), "s3cret"));
        assert!(!bearer_matches(&with("Bearer s3cre"), "s3cret"));
        assert!(!bearer_matches(&with("Bearer s3cret2"), "s3cret"));
        assert!(!bearer_matches(&with("Basic s3cret"), "s3cret"));
        assert!(!bearer_matches(&HeaderMap::new(), "s3cret"));
    }
}
