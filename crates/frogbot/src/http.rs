//! The HTTP API of `serve-contract.md`, with axum.

mod access;
mod apps;
mod asks;
mod errors;
mod files;
mod input;
mod talk;

use access::{Api, Call, ChatCall, decide};
pub use access::{Principals, RouteInfo};
pub use asks::Waiters;

pub(crate) use errors::json_error;
use input::{check_message_id, check_user_parts};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

use frogbot_core::Error as CoreError;
use frogbot_core::StoreError;
use frogbot_core::agent::views::{ChatRow, QueuedChange, QueuedEdit};
use frogbot_core::agent::{Engine, SendMessage, Sent, Settle, StopOutcome};
use frogbot_core::model::{
    ChatId, Delivery, MessagePart, Millis, QuestionOutcome, QuestionOutput, UiMessage,
    millis_to_iso,
};
use frogbot_core::policy::{Access, Action, ChatView, Policy};

/// Shared state of the HTTP handlers.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The engine.
    pub engine: Engine,
    /// Bearer token → user or agent.
    pub principals: Arc<Principals>,
    /// Who may do what.
    pub policy: Policy,
    /// Ask waits open per caller.
    pub waiters: Arc<asks::Waiters>,
    /// The live event streams.
    pub watchers: crate::events::ChatWatchers,
    /// What `/readyz` checks besides the store.
    pub readiness: Arc<crate::ready::Readiness>,
    /// The MCP endpoint ([`crate::mcp_server::MCP_PATH`]).
    #[cfg(feature = "mcp")]
    pub(crate) mcp: Arc<crate::mcp_server::Endpoint>,
}

/// `frogbot serve`'s MCP endpoint, for agents: every method the streamable HTTP transport uses
/// (POST messages, GET the session's stream, DELETE the session). Its tools call this router
/// with the caller's token, so each of their requests is decided here again.
#[cfg(feature = "mcp")]
async fn mcp(Call { state, .. }: Call, req: axum::extract::Request) -> Response {
    let endpoint = state.mcp.clone();
    endpoint.handle(req, router(state)).await
}

/// The router of every endpoint.
pub fn router(state: AppState) -> Router {
    let (routes, _) = routes();
    errors::json_errors(routes.with_state(state))
}

/// Every route of the API with who may call it at all, registered in one place: the router
/// is built from it, and the route × principal test walks it.
#[rustfmt::skip]
pub fn routes() -> (Router<AppState>, Vec<RouteInfo>) {
    use Access::{Agent, Caller as Any, Public};
    use Method as M;
    use axum::routing::{delete, put};
    Api::new()
        .at(M::GET, "/", Public, get(crate::web::index))
        .at(M::GET, "/healthz", Public, get(healthz))
        .at(M::GET, "/readyz", Public, get(readyz))
        .at(M::GET, "/apps/{chat_id}/{message_id}/{link}", Public, get(apps::app_view))
        .at(M::GET, "/api/chats", Any, get(list_chats))
        .at(M::GET, "/api/chats/{chat_id}", Any, get(get_chat))
        .at(M::POST, "/api/chats/{chat_id}/messages", Any, post(post_message))
        .at(M::PATCH, "/api/chats/{chat_id}/messages/{message_id}", Any, patch(patch_message))
        .at(M::DELETE, "/api/chats/{chat_id}/messages/{message_id}", Any, delete(delete_message))
        .at(M::POST, "/api/chats/{chat_id}/files", Any, post(files::upload))
        .at(M::GET, "/api/chats/{chat_id}/files/{file_id}", Any, get(files::download))
        .at(M::GET, "/api/chats/{chat_id}/pending", Any, get(pending))
        .at(M::POST, "/api/chats/{chat_id}/settle", Any, post(settle))
        .at(M::POST, "/api/chats/{chat_id}/stop", Any, post(stop))
        .at(M::GET, "/api/chats/{chat_id}/events", Any, get(events))
        .at(M::POST, "/api/asks", Any, post(asks::create))
        .at(M::GET, "/api/asks/{id}", Any, get(asks::get))
        .at(M::DELETE, "/api/asks/{id}", Any, delete(asks::cancel))
        .at(M::GET, "/api/asks/{id}/wait", Any, get(asks::wait))
        .at(M::POST, "/api/agent-chats", Agent, post(talk::open))
        .at(M::POST, "/api/chats/{chat_id}/agent-messages", Agent, post(talk::send))
        .at(M::PATCH, "/api/chats/{chat_id}/agent-messages/{message_id}", Agent, patch(talk::edit))
        .at(M::DELETE, "/api/chats/{chat_id}/agent-messages/{message_id}", Agent, delete(talk::delete))
        .at(M::PUT, "/api/chats/{chat_id}/pins/{key}", Agent, put(talk::pin))
        .at(M::DELETE, "/api/chats/{chat_id}/pins/{key}", Any, delete(talk::unpin))
        .at(M::POST, "/api/chats/{chat_id}/messages/{message_id}/ack", Agent, post(talk::ack))
        .at(M::POST, "/api/chats/{chat_id}/block-events", Any, post(talk::event))
        .at(M::GET, "/api/inbox", Agent, get(talk::inbox))
        .at_mcp()
        .finish()
}

/// An API error: `{"error": {"code", "message"}}` with its status.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    chat: Option<String>,
    /// Adds `Retry-After: 1` (a 503 the caller should retry).
    retry_after: bool,
}

/// The most characters an error message keeps: a message quoting the request (a JSON parser's
/// "invalid type: string \"…\"", a bad id) is cut to an excerpt, never the whole body echoed.
const MAX_ERROR_MESSAGE: usize = 300;

/// `message` cut to [`MAX_ERROR_MESSAGE`] characters: its start and its end (where a JSON error
/// says the line and column) around an ellipsis.
fn excerpt(message: String) -> String {
    let n = message.chars().count();
    if n <= MAX_ERROR_MESSAGE {
        return message;
    }
    const TAIL: usize = 60;
    let head: String = message.chars().take(MAX_ERROR_MESSAGE - TAIL - 1).collect();
    let tail: String = message.chars().skip(n - TAIL).collect();
    format!("{head}…{tail}")
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: excerpt(message.into()),
            chat: None,
            retry_after: false,
        }
    }
    fn internal(message: &str) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
    fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }
    fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid-request", message)
    }
    fn forbidden() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this chat belongs to another user",
        )
    }
    pub(crate) fn not_found(what: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", what)
    }
    fn channel_chat() -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "channel-chat",
            "this chat is continued only from its channel",
        )
    }
    fn with_chat(mut self, chat: &ChatId) -> Self {
        self.chat = Some(chat.to_string());
        self
    }
}

/// The engine's errors as HTTP answers (`serve-contract.md`'s table, and what it leaves open):
///
/// | error | status | code |
/// |---|---|---|
/// | `InvalidInput`, `InvalidChatId` | 400 | `invalid-request` |
/// | `SelectionUnavailable` | 400 | `selection-unavailable` |
/// | `InvalidAnswer` | 400 | `invalid-answer` |
/// | `Forbidden` | 403 | `forbidden` |
/// | `Denied` (the policy) | 401 / 403 / 404 | `unauthorized` / `forbidden` / `not-found` |
/// | `NotFound` | 404 | `not-found` |
/// | `ChannelChat` | 409 | `channel-chat` |
/// | `AgentChat` (a turn asked of a chat bound to an agent, e.g. `generate`) | 409 | `agent-chat` |
/// | `Stale` | 409 | `stale` |
/// | `DuplicateMessage` | 409 | `duplicate-message` |
/// | `TurnInProgress` | 409 | `turn-in-progress` |
/// | `Store(Conflict)` | 409 | `conflict` |
/// | `Store(Unavailable \| Locked)` | 503 + `Retry-After: 1` | `unavailable` |
/// | `Stopping` | 503 + `Retry-After: 1` | `stopping` |
/// | `File(TooLarge)` | 413 | `too-large` |
/// | `File(MediaType)` | 415 | `unsupported-media-type` |
/// | `File(TooMany \| Upload \| Unknown)` | 400 | `invalid-request` |
/// | `Channel` (a platform failed a call made for the caller) | 502 | `channel-error` |
/// | `Internal`, `Store(LeaseLost \| Corrupt \| Migration \| …)` | 500 | `internal` |
impl From<CoreError> for ApiError {
    fn from(e: CoreError) -> Self {
        match &e {
            CoreError::SelectionUnavailable { .. } => Self::new(
                StatusCode::BAD_REQUEST,
                "selection-unavailable",
                e.to_string(),
            ),
            CoreError::InvalidAnswer { reason } => {
                Self::new(StatusCode::BAD_REQUEST, "invalid-answer", reason)
            }
            CoreError::InvalidInput { reason } => Self::invalid(reason),
            CoreError::Denied(d) => Self::denied(d.clone()),
            CoreError::InvalidChatId(m) => Self::invalid(format!("bad chat id {m:?}")),
            CoreError::NotFound { item, id } => Self::not_found(format!("{item} {id}")),
            CoreError::Stale {
                tool_call_id,
                reason,
            } => Self::new(
                StatusCode::CONFLICT,
                "stale",
                format!("{tool_call_id} {reason}"),
            ),
            CoreError::Forbidden { chat_id } => Self::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("chat {chat_id} belongs to another user"),
            ),
            CoreError::ChannelChat { chat_id, reason } => Self::new(
                StatusCode::CONFLICT,
                "channel-chat",
                format!("chat {chat_id} {reason}"),
            ),
            CoreError::AgentChat { .. } => {
                Self::new(StatusCode::CONFLICT, "agent-chat", e.to_string())
            }
            CoreError::DuplicateMessage { .. } => {
                Self::new(StatusCode::CONFLICT, "duplicate-message", e.to_string())
            }
            CoreError::TurnInProgress { .. } => {
                Self::new(StatusCode::CONFLICT, "turn-in-progress", e.to_string())
            }
            CoreError::Store(StoreError::Conflict { message }) => {
                Self::new(StatusCode::CONFLICT, "conflict", message)
            }
            // The database failed (unreachable, locked past its timeout, full): the operation
            // changed nothing and may be tried again. Logged here, once, with the driver's words;
            // the caller gets a clear message without them (they may name hosts).
            e if e.is_transient() => {
                tracing::error!(error = %e, "store unavailable; answering 503");
                let mut err = Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the database is unavailable; nothing was changed, try again later",
                );
                err.retry_after = true;
                err
            }
            CoreError::File(f) => {
                use frogbot_core::agent::FileError;
                let (status, code) = match f {
                    FileError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "too-large"),
                    FileError::MediaType { .. } => {
                        (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported-media-type")
                    }
                    _ => (StatusCode::BAD_REQUEST, "invalid-request"),
                };
                Self::new(status, code, f.to_string())
            }
            CoreError::Channel { .. } => {
                Self::new(StatusCode::BAD_GATEWAY, "channel-error", e.to_string())
            }
            CoreError::Stopping => {
                let mut err = Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "stopping",
                    "the server is stopping; try again later",
                );
                err.retry_after = true;
                err
            }
            // An invariant that does not hold, stored data that does not read back, a lost lease:
            // the server's fault. Logged with the details; the caller learns nothing more.
            other => {
                tracing::error!(error = %other, "internal error");
                Self::internal("internal error")
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        let mut res = (self.status, axum::Json(body)).into_response();
        if let Some(chat) = self.chat.and_then(|c| HeaderValue::from_str(&c).ok()) {
            res.headers_mut().insert(CHAT_HEADER, chat);
        }
        if self.retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        res
    }
}

const CHAT_HEADER: HeaderName = HeaderName::from_static("x-frogbot-chat-id");

fn with_chat(chat: &ChatId, res: impl IntoResponse) -> Response {
    let mut res = res.into_response();
    if let Ok(v) = HeaderValue::from_str(chat.as_str()) {
        res.headers_mut().insert(CHAT_HEADER, v);
    }
    res
}

type ApiResult = Result<Response, ApiError>;

fn chat_id(raw: &str) -> Result<ChatId, ApiError> {
    ChatId::new(raw).map_err(|_| {
        ApiError::invalid(format!(
            "bad chat id {raw:?}: use 1-128 characters of A-Z a-z 0-9 _ -"
        ))
    })
}

async fn healthz(State(state): State<AppState>) -> Response {
    match state.engine.ops().ping().await {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(e) => {
            // The driver's words (paths, hosts) go to the log, not to whoever asks.
            tracing::warn!(error = %e, "healthz: store unreachable");
            (StatusCode::SERVICE_UNAVAILABLE, "store unreachable").into_response()
        }
    }
}

/// Readiness: 200 `{"ready": true, "checks": […]}`, or 503 with `notReady` naming what failed
/// (see [`crate::ready`]). `/healthz` stays the contract's liveness answer.
async fn readyz(State(state): State<AppState>) -> Response {
    let checks = state.readiness.check(&state.engine).await;
    let (ready, body) = crate::ready::body(&checks);
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(body)).into_response()
}

fn chat_summary(row: &ChatRow, now: Millis) -> Value {
    let mut v = json!({
        "chatId": row.chat_id,
        "owner": row.owner,
        "channel": row.channel,
        "state": row.state(now),
        "updatedAt": millis_to_iso(row.updated_at),
    });
    // A chat bound to an external agent (its people's messages go to the agent's inbox).
    if row.agent.is_some() {
        v["agentChat"] = json!(true);
    }
    v
}

async fn list_chats(Call { state, who }: Call) -> ApiResult {
    decide(&state.policy, &who, Action::ListChats)?;
    let rows = state
        .engine
        .chats()
        .list(state.policy.list_owner(&who), 500)
        .await?;
    let now = state.engine.now();
    let chats: Vec<Value> = rows
        .iter()
        .filter(|r| {
            state
                .policy
                .decide(&who, Action::ReadChat(&ChatView::of(r)))
                .is_ok()
        })
        .map(|r| chat_summary(r, now))
        .collect();
    Ok(axum::Json(json!({"chats": chats})).into_response())
}

async fn get_chat(c: ChatCall) -> ApiResult {
    c.run(async |chat, _| {
        let row = c.readable(chat).await?;
        let (chats, now) = (c.state.engine.chats(), c.state.engine.now());
        let stored = chats.messages(chat).await?.into_iter();
        let mut messages: Vec<UiMessage> = stored.map(|m| m.message).collect();
        // An agent's chat keeps the acknowledgements its agent set; a deleted message is not
        // shown.
        if row.agent.is_some() {
            messages.retain(|m| m.metadata.deleted_at.is_none());
        } else {
            with_acks(&mut messages, row.state(now));
        }
        let mut body = chat_summary(&row, now);
        body.as_object_mut().expect("object").remove("updatedAt");
        body["messages"] = serde_json::to_value(messages).expect("messages serialise");
        Ok(axum::Json(body))
    })
    .await
}

#[derive(Deserialize)]
struct PostBody {
    id: Option<String>,
    parts: Vec<MessagePart>,
    delivery: Option<String>,
    model: Option<String>,
    reasoning: Option<String>,
}

fn parse_delivery(d: Option<&str>) -> Result<Delivery, ApiError> {
    match d {
        None | Some("queue") => Ok(Delivery::Queue),
        Some("steer") => Ok(Delivery::Steer),
        Some(other) => Err(ApiError::invalid(format!(
            "unknown delivery {other:?}: use \"queue\" or \"steer\""
        ))),
    }
}

/// A JSON request body, or 400 `invalid-request`.
fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::invalid(format!("malformed JSON: {e}")))
}

fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"))
}

async fn post_message(c: ChatCall, headers: HeaderMap, body: Bytes) -> ApiResult {
    c.run(async |chat, user| {
        let body: PostBody = parse_json(&body)?;
        if body.parts.is_empty() {
            return Err(ApiError::invalid("`parts` is empty"));
        }
        check_user_parts(&body.parts)?;
        body.id.as_deref().map(check_message_id).transpose()?;
        let delivery = parse_delivery(body.delivery.as_deref())?;
        // Who may write is decided by the store in the operation that creates or opens the chat
        // (403 `forbidden`, 409 `channel-chat`), so two first messages racing cannot both get
        // in. Kept for a chat bound to an agent, where the message goes to its inbox instead.
        let (message_id, parts) = (body.id.clone(), body.parts.clone());
        let sent = c.state.engine.agents().send(SendMessage {
            chat_id: chat.clone(),
            id: body.id,
            parts: body.parts,
            author: user.cloned(),
            delivery,
            model: body.model,
            reasoning: body.reasoning,
            channel: None,
            speaker: None,
            context: None,
        });
        let sent = match sent.await {
            Ok(sent) => sent,
            // A chat bound to an external agent (the store refuses a turn there, whoever
            // sends): the person's message waits in the agent's inbox, if they may write it.
            Err(CoreError::AgentChat { .. }) => {
                c.writable(chat).await?;
                let text: String = parts
                    .iter()
                    .filter_map(|p| match p {
                        MessagePart::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                let files = parts.iter().filter(|p| p.as_file().is_some()).cloned();
                let saved = c.state.engine.chats().web_message(
                    chat,
                    user,
                    message_id,
                    &text,
                    files.collect(),
                );
                return Ok(match saved.await? {
                    Some(m) => (StatusCode::ACCEPTED, axum::Json(m)).into_response(),
                    None => StatusCode::OK.into_response(),
                });
            }
            Err(e @ CoreError::ChannelChat { .. }) => {
                // A chat the caller may not even read is not described to them.
                return Err(match c.state.engine.chats().get(chat).await? {
                    Some(row)
                        if decide(
                            &c.state.policy,
                            &c.who,
                            Action::ReadChat(&ChatView::of(&row)),
                        )
                        .is_err() =>
                    {
                        ApiError::forbidden()
                    }
                    _ => e.into(),
                });
            }
            Err(e) => return Err(e.into()),
        };
        sent_response(chat, sent, wants_stream(&headers)).await
    })
    .await
}

/// What `POST …/messages` answers for the message sent: queued, or the turn it started (its
/// stream, or its outcome once it ends).
async fn sent_response(chat: &ChatId, sent: Sent, stream: bool) -> ApiResult {
    Ok(match sent {
        Sent::Queued {
            message_id,
            delivery,
        } => {
            let queued = json!({"messageId": message_id, "delivery": delivery});
            if stream {
                let part = json!({"type": "data-queued", "data": queued, "transient": true});
                let body = format!("data: {part}\n\ndata: [DONE]\n\n");
                sse_response(axum::body::Body::from(body))
            } else {
                (StatusCode::ACCEPTED, axum::Json(queued)).into_response()
            }
        }
        Sent::Started(handle) if stream => {
            let body = crate::stream::ui_message_stream(handle);
            sse_response(axum::body::Body::from_stream(body))
        }
        Sent::Started(handle) => {
            let message_id = handle.message_id.clone();
            let dropped = |_| ApiError::internal("the turn was dropped");
            let outcome = handle.done.await.map_err(dropped)??;
            axum::Json(json!({"chatId": chat, "messageId": message_id, "state": outcome.state, "reply": outcome.reply})).into_response()
        }
    })
}

fn sse_response(body: axum::body::Body) -> Response {
    let mut res = Response::new(body);
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        HeaderName::from_static("x-vercel-ai-ui-message-stream"),
        HeaderValue::from_static("v1"),
    );
    h.insert(
        HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    res
}

#[derive(Deserialize)]
struct PatchBody {
    parts: Option<Vec<MessagePart>>,
    delivery: Option<String>,
}

async fn patch_message(c: ChatCall, body: Bytes) -> ApiResult {
    c.run(async |chat, user| {
        let body: PatchBody = parse_json(&body)?;
        if body.parts.as_ref().is_some_and(Vec::is_empty) {
            return Err(ApiError::invalid("`parts` is empty"));
        }
        check_user_parts(body.parts.as_deref().unwrap_or_default())?;
        let delivery = match body.delivery.as_deref() {
            Some(d) => Some(parse_delivery(Some(d))?),
            None => None,
        };
        c.writable(chat).await?;
        let parts = body.parts;
        let edit = QueuedEdit { parts, delivery };
        let chats = c.state.engine.chats();
        match chats.edit_queued(chat, &c.item, user, &edit).await? {
            QueuedChange::Done(Some(m)) => {
                c.state.engine.agents().kick(chat).await?;
                Ok(axum::Json(m.message))
            }
            other => Err(queued_error(other)),
        }
    })
    .await
}

fn queued_error(change: QueuedChange) -> ApiError {
    match change {
        QueuedChange::NotFound => ApiError::not_found("no such message"),
        QueuedChange::Forbidden => ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "only the author may change a queued message",
        ),
        QueuedChange::NotQueued | QueuedChange::Done(_) => ApiError::new(
            StatusCode::CONFLICT,
            "not-queued",
            "the message was already promoted",
        ),
    }
}

async fn delete_message(c: ChatCall) -> ApiResult {
    c.run(async |chat, user| {
        let row = c.writable(chat).await?;
        let message_id = &c.item;
        if row.awaiting_message_id.as_ref() == Some(message_id) {
            // Withdraw the waiting questions (whoever may write the chat).
            c.state
                .engine
                .questions()
                .withdraw(chat, message_id)
                .await?;
            return Ok(StatusCode::NO_CONTENT);
        }
        let chats = c.state.engine.chats();
        match chats.delete_queued(chat, message_id, user).await? {
            QueuedChange::Done(None) => Ok(StatusCode::NO_CONTENT),
            other => Err(queued_error(other)),
        }
    })
    .await
}

async fn pending(c: ChatCall) -> ApiResult {
    c.run(async |chat, _| pending_calls(&c.state, chat, c.readable(chat).await?).await)
        .await
}

/// `GET /api/chats/{id}/pending`'s answer: the chat's state and its calls waiting for a person.
async fn pending_calls(state: &AppState, chat: &ChatId, row: ChatRow) -> ApiResult {
    let now = state.engine.now();
    let mut calls = Vec::new();
    // The reply the calls wait in (read once): an approval names the tool and its arguments.
    let mut reply: Option<frogbot_core::agent::views::StoredMessage> = None;
    for q in state.engine.questions().pending(&row).await? {
        if reply.as_ref().is_none_or(|r| r.message.id != q.message_id) {
            reply = state.engine.chats().message(chat, &q.message_id).await?;
        }
        let approval = reply.as_ref().and_then(|r| {
            r.message.tool_parts().find(|t| {
                t.tool_call_id == q.tool_call_id
                    && t.state == frogbot_core::model::ToolState::ApprovalRequested
            })
        });
        // A call that waits for input (an MCP server's elicitation): its record has its own id.
        let elicited = reply.as_ref().and_then(|r| {
            r.message.tool_parts().find(|t| {
                r.message
                    .metadata
                    .elicitations
                    .get(&t.tool_call_id)
                    .is_some_and(|e| e.id == q.tool_call_id)
            })
        });
        let mut call = match (approval, elicited) {
            // Still the question tool's call for the contract; `approval` says what it approves.
            (Some(t), _) => json!({
                "toolCallId": q.tool_call_id,
                "toolName": "question",
                "input": q.input,
                "approval": {"id": q.tool_call_id, "toolName": t.tool_name, "toolInput": t.input},
            }),
            // `elicitation` says which call asks.
            (None, Some(t)) => json!({
                "toolCallId": q.tool_call_id,
                "toolName": "question",
                "input": q.input,
                "elicitation": {"toolCallId": t.tool_call_id, "toolName": t.tool_name, "toolInput": t.input},
            }),
            (None, None) => {
                json!({"toolCallId": q.tool_call_id, "toolName": "question", "input": q.input})
            }
        };
        if let Some(deadline) = q.answer_deadline {
            call["expiresAt"] = json!(frogbot_core::model::millis_to_iso(deadline));
        }
        calls.push(call);
    }
    Ok(axum::Json(json!({"state": row.state(now), "calls": calls})).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
struct SettleBody {
    tool_call_id: String,
    output: Option<QuestionOutput>,
    #[serde(default)]
    dismissed: bool,
}

async fn settle(c: ChatCall, body: Bytes) -> ApiResult {
    c.run(async |chat, user| {
        let body: SettleBody = parse_json(&body)?;
        let settle = match (body.output, body.dismissed) {
            (Some(o), false) => Settle::Answer(o),
            (None, true) => Settle::Dismiss,
            _ => {
                return Err(ApiError::invalid(
                    "send either `output` or `dismissed: true`",
                ));
            }
        };
        let row = c.writable(chat).await?;
        let actor = frogbot_core::model::Actor {
            user: user.cloned(),
            identity: None,
        };
        let done = c
            .state
            .engine
            .questions()
            .settle_read(row, &body.tool_call_id, settle, Some(actor))
            .await?;
        let outcome = match done.outcome {
            QuestionOutcome::Dismissed => "dismissed",
            _ => "answered",
        };
        Ok(axum::Json(
            json!({"toolCallId": body.tool_call_id, "outcome": outcome, "state": done.state}),
        ))
    })
    .await
}

/// `POST /api/chats/{id}/stop`: the user driving the running turn stops it (the same ownership
/// rules as sending; a channel chat is stopped from its thread). 200 `{"chatId", "stopping",
/// "state"}` — `stopping: false` when no turn of the chat runs in this process; 403 `forbidden`
/// for someone else than the driver.
async fn stop(c: ChatCall) -> ApiResult {
    c.run(async |chat, user| {
        c.writable(chat).await?;
        let stopping = match c.state.engine.agents().stop(chat, user) {
            StopOutcome::Stopping => true,
            StopOutcome::NotDriver => {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    "only the user who started this turn can stop it",
                ));
            }
            _ => false,
        };
        let state = c.state.engine.chats().state(chat).await?;
        Ok(axum::Json(
            json!({"chatId": chat, "stopping": stopping, "state": state}),
        ))
    })
    .await
}

/// Sets `metadata.ack` on the user messages of a chat's history (derived, never stored): a
/// queued message is `seen`; while a turn runs, the last message it took is `working` (its reply
/// may be saved part-way already); one answered by a later assistant message is `done` (`failed`
/// when that reply carries an error); any other is `seen`.
pub(crate) fn with_acks(messages: &mut [UiMessage], state: frogbot_core::model::TurnState) {
    use frogbot_core::model::{Ack, MessageStatus, Role, TurnState};
    let queued = |m: &UiMessage| m.metadata.status == Some(MessageStatus::Queued);
    let current = (state == TurnState::Running)
        .then(|| {
            messages
                .iter()
                .rposition(|m| m.role == Role::User && !queued(m))
        })
        .flatten();
    let mut answer: Option<Ack> = None;
    for (i, m) in messages.iter_mut().enumerate().rev() {
        match m.role {
            Role::Assistant => {
                answer = Some(if m.metadata.error.is_some() {
                    Ack::Failed
                } else {
                    Ack::Done
                });
            }
            Role::User => {
                m.metadata.ack = Some(if queued(m) {
                    Ack::Seen
                } else if Some(i) == current {
                    Ack::Working
                } else {
                    answer.unwrap_or(Ack::Seen)
                });
            }
        }
    }
}

async fn events(c: ChatCall, client: crate::browser::ClientAddr) -> ApiResult {
    c.run(async |chat, user| {
        let row = c.readable(chat).await?;
        // Only changes are streamed: the client loads the chat itself.
        let now = row.state(c.state.engine.now());
        let stream = c
            .state
            .watchers
            .open(chat, user, client.0, now, row.version)
            .map_err(|e| {
                ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too-many-streams",
                    e.to_string(),
                )
            })?;
        let mut res = Response::new(axum::body::Body::from_stream(stream));
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        res.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        Ok(res)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use frogbot_core::Item;

    fn mapped(e: CoreError) -> (u16, &'static str, bool) {
        let a = ApiError::from(e);
        (a.status.as_u16(), a.code, a.retry_after)
    }

    #[test]
    fn error_messages_are_excerpts_of_the_request() {
        // Found by fuzzing: a 1 MiB string in a body came back whole in the 400's message.
        let huge = "é".repeat(1 << 20);
        let e =
            super::parse_json::<super::PostBody>(format!("{{\"parts\": \"{huge}\"}}").as_bytes())
                .err()
                .unwrap();
        assert!(
            e.message.chars().count() <= super::MAX_ERROR_MESSAGE,
            "{}",
            e.message.len()
        );
        assert!(
            e.message.starts_with("malformed JSON: invalid type"),
            "{}",
            e.message
        );
        assert!(e.message.contains("line 1 column"), "{}", e.message);
        let short = super::excerpt("short".into());
        assert_eq!(short, "short");
        let long = super::excerpt("x".repeat(1000));
        assert_eq!(long.chars().count(), super::MAX_ERROR_MESSAGE);
    }

    #[test]
    fn engine_errors_map_to_the_contracts_statuses() {
        let chat = ChatId::new("c1").unwrap();
        assert_eq!(
            mapped(CoreError::DuplicateMessage {
                chat_id: chat.clone(),
                message_id: "m1".into()
            }),
            (409, "duplicate-message", false)
        );
        assert_eq!(
            mapped(CoreError::Internal("a turn loop has no turn".into())),
            (500, "internal", false)
        );
        assert_eq!(
            mapped(CoreError::Store(StoreError::LeaseLost {
                chat_id: chat.clone()
            })),
            (500, "internal", false)
        );
        assert_eq!(
            mapped(CoreError::Store(StoreError::corrupt_msg("row"))),
            (500, "internal", false)
        );
        assert_eq!(
            mapped(CoreError::Store(StoreError::unavailable_msg("down"))),
            (503, "unavailable", true)
        );
        assert_eq!(
            mapped(CoreError::Store(StoreError::Locked {
                question: "q1".into()
            })),
            (503, "unavailable", true)
        );
        assert_eq!(
            mapped(CoreError::Store(StoreError::Conflict {
                message: "taken".into()
            })),
            (409, "conflict", false)
        );
        assert_eq!(
            mapped(CoreError::from(StoreError::Forbidden {
                chat_id: chat.clone()
            })),
            (403, "forbidden", false)
        );
        assert_eq!(
            mapped(CoreError::NotFound {
                item: Item::ToolCall,
                id: "q9".into()
            }),
            (404, "not-found", false)
        );
        assert_eq!(
            mapped(CoreError::TurnInProgress { chat_id: chat }),
            (409, "turn-in-progress", false)
        );
        assert_eq!(mapped(CoreError::Stopping), (503, "stopping", true));
    }
}
