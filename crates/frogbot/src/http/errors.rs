//! The contract's error shape for what the handlers do not answer themselves: an unknown route
//! (404), a method a route does not take (405), and the rejections of axum's extractors (a `Path`
//! that is not UTF-8, a body over `DefaultBodyLimit`, a body that could not be read), which axum
//! answers in plain text. Under `/api` every error becomes `{"error": {"code", "message"}}`.

use axum::Router;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;

/// How much of a plain-text rejection is kept as the JSON error's message.
const MAX_MESSAGE: usize = 16 * 1024;

/// Adds the JSON fallbacks and the rejection mapping to the API router (its routes so far).
pub(super) fn json_errors(router: Router) -> Router {
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(json_rejections))
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        "this route does not take this method",
    )
}

/// An error response in the contract's shape, its code chosen by [`code_of`].
pub(crate) fn json_error(status: StatusCode, message: impl Into<String>) -> Response {
    ApiError::new(status, code_of(status), message).into_response()
}

/// The contract's code for a status that axum or a layer answered without one.
fn code_of(status: StatusCode) -> &'static str {
    match status {
        StatusCode::NOT_FOUND => "not-found",
        StatusCode::METHOD_NOT_ALLOWED => "method-not-allowed",
        StatusCode::REQUEST_TIMEOUT => "request-timeout",
        StatusCode::PAYLOAD_TOO_LARGE => "payload-too-large",
        StatusCode::URI_TOO_LONG => "uri-too-long",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported-media-type",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        s if s.is_server_error() => "internal",
        _ => "invalid-request",
    }
}

fn is_api(path: &str) -> bool {
    path == "/api" || path.starts_with("/api/")
}

fn is_json(res: &Response) -> bool {
    res.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// Rewrites an error response under `/api` that is not JSON (an extractor's plain-text rejection,
/// an empty body) into the contract's shape, keeping its status, its text as the message and its
/// other headers (`Allow`, `X-FrogBot-Chat-Id`).
async fn json_rejections(req: Request, next: Next) -> Response {
    let api = is_api(req.uri().path());
    let mut res = next.run(req).await;
    let status = res.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        // The body was not read to its end: the connection is closed after this answer, and
        // the client is told so (one that reused it would see its next request fail).
        res.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    if !api || !(status.is_client_error() || status.is_server_error()) || is_json(&res) {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let text = axum::body::to_bytes(body, MAX_MESSAGE)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let message = match text.trim() {
        "" => status.canonical_reason().unwrap_or("error").to_string(),
        t => t.to_string(),
    };
    let json = ApiError::new(status, code_of(status), message).into_response();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::CONTENT_TYPE);
    let (json_parts, body) = json.into_parts();
    parts.headers.extend(json_parts.headers);
    Response::from_parts(parts, body)
}
