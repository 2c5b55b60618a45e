//! Files of a chat: `POST /api/chats/{id}/files` uploads one (the body is the file, streamed into
//! the store; `Content-Type` its media type, `?name=` its file name) and answers the file part a
//! message sends it with; `GET /api/chats/{id}/files/{file}` serves it to whoever may read the
//! chat. Who may do either is the engine's policy ([`frogbot_core::agent::Files`]).

use axum::body::Body;
use axum::extract::Query;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;

use frogbot_core::agent::files::file_url;
use frogbot_core::model::MessagePart;

use super::{ApiResult, ChatCall};

#[derive(Deserialize)]
pub(super) struct UploadQuery {
    name: Option<String>,
}

/// `POST /api/chats/{chat_id}/files?name=…`: 201 with `{"id", "size", "sha256", "part"}`,
/// `part` being the `file` part to send in a message.
pub(super) async fn upload(
    c: ChatCall,
    Query(q): Query<UploadQuery>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult {
    c.run(async |chat, user| {
        let media_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/octet-stream");
        let name = q.name.unwrap_or_default();
        let stream = body
            .into_data_stream()
            .map(|r| r.map_err(|e| e.to_string()));
        let files = c.state.engine.files();
        let row = files.upload(chat, user, media_type, &name, stream).await?;
        let url = file_url(chat, &row.id);
        let part = MessagePart::file(&row.media_type, &row.filename, &url);
        let (id, size, sha256) = (row.id, row.size, row.sha256);
        let body = json!({"id": id, "size": size, "sha256": sha256, "part": part});
        Ok((
            StatusCode::CREATED,
            [(header::LOCATION, url)],
            axum::Json(body),
        ))
    })
    .await
}

/// `GET /api/chats/{chat_id}/files/{file_id}`: the file's bytes, streamed. Only images other
/// than SVG are shown inline; every other type is a download, and nothing served here runs as
/// a page of this origin (`nosniff`, a sandboxing CSP).
pub(super) async fn download(c: ChatCall) -> ApiResult {
    c.run(async |chat, user| {
        let row = c.state.engine.files().get(chat, &c.item, user).await?;
        let inline = row.media_type.starts_with("image/") && row.media_type != "image/svg+xml";
        let disposition = format!(
            "{}; filename*=UTF-8''{}",
            if inline { "inline" } else { "attachment" },
            percent(if row.filename.is_empty() {
                "file"
            } else {
                &row.filename
            })
        );
        let size = row.size;
        let media = row.media_type.clone();
        let body = Body::from_stream(
            c.state
                .engine
                .files()
                .bytes(row)
                .map(|r| r.map_err(std::io::Error::other)),
        );
        let mut res = body.into_response();
        let h = res.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(&media)
                .unwrap_or(HeaderValue::from_static("application/octet-stream")),
        );
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
        if let Ok(v) = HeaderValue::from_str(&disposition) {
            h.insert(header::CONTENT_DISPOSITION, v);
        }
        h.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("sandbox; default-src 'none'"),
        );
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("private, max-age=3600"),
        );
        Ok(res)
    })
    .await
}

/// `s` percent-encoded for `filename*=UTF-8''…` (RFC 8187: attr-chars kept).
fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
