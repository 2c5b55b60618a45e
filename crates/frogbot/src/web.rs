//! The web chat at `/`: one server-rendered page with a little JavaScript over the HTTP API.

use axum::response::Html;

/// `GET /`.
pub async fn index() -> Html<&'static str> {
    Html(include_str!("web/index.html"))
}
