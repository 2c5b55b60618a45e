//! FrogBot as an MCP server: any agent that speaks the Model Context Protocol asks a person on
//! Slack, Discord, Telegram, Matrix or the web chat, and holds a conversation with them, through
//! four tools ([`TOOLS`]): `ask_person`, `send_message`, `read_inbox` and `wait_for_event`.
//!
//! Two transports, one set of tools:
//! - `frogbot mcp` speaks MCP over stdio and calls a running `frogbot serve` over its HTTP API
//!   (`FROGBOT_URL`, `FROGBOT_TOKEN`), as `frogbot ask` does;
//! - `frogbot serve` mounts streamable HTTP at [`MCP_PATH`] for callers with an agent token;
//!   each tool call goes through the same API router in process.
//!
//! Either way every tool is a request to the HTTP API made with the caller's bearer token, so
//! who may do what is decided where it is for every other caller: the policy behind the API's
//! routes. An agent reaches only its `targets`; a user token or none is refused at `/mcp`
//! (401/403) and by every route the tools call.
//!
//! Long waits (`ask_person` until the person answers, `wait_for_event`) send
//! `notifications/progress` every [`PROGRESS_EVERY`] when the client gave a progress token, so
//! a client that resets its timeout on progress waits as long as the person takes. A call the
//! client cancels (`notifications/cancelled`) or abandons (its connection closed) withdraws its
//! open ask: the card shows it was withdrawn and nobody answers into the void.
//!
//! What this module must NOT do: reach the engine or the store other than through the HTTP API
//! (one policy), or decide anything the API decides (targets, access, validation).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, header};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::ask::{AskError, Client};

/// Where `frogbot serve` mounts the streamable HTTP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// How often a long wait tells the client it is still waiting.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// How long a client has to answer the `ping` a long wait sends with each progress report; one
/// that does not (its process gone, its connection lost) abandoned the call.
pub const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest `wait_for_event` waits (`timeoutSeconds`).
pub const MAX_EVENT_WAIT_SECONDS: u64 = 3600;

/// The tools, by name.
pub const TOOLS: [&str; 4] = ["ask_person", "send_message", "read_inbox", "wait_for_event"];

/// Where the tools' requests go.
#[derive(Clone, Debug)]
enum Source {
    /// A running server over HTTP (`frogbot mcp`).
    Remote(Client),
    /// The API router of this process (`/mcp` in `frogbot serve`), carried by each request
    /// with the caller's bearer token.
    Mounted,
}

/// The API router a mounted endpoint's requests carry (inserted by the `/mcp` route).
#[derive(Clone, Debug)]
pub(crate) struct LocalApi(pub(crate) axum::Router);

/// The HTTP API as one call reaches it, with its caller's token.
#[derive(Clone, Debug)]
enum Api {
    Remote(Client),
    Local {
        router: axum::Router,
        auth: Option<HeaderValue>,
    },
}

impl Source {
    /// The API for the call `ctx`: the mounted endpoint's request carries the router and token.
    fn api(&self, ctx: &RequestContext<RoleServer>) -> Result<Api, AskError> {
        match self {
            Source::Remote(c) => Ok(Api::Remote(c.clone())),
            Source::Mounted => {
                let parts = ctx.extensions.get::<axum::http::request::Parts>();
                let router = parts.and_then(|p| p.extensions.get::<LocalApi>());
                match (parts, router) {
                    (Some(parts), Some(LocalApi(router))) => Ok(Api::Local {
                        router: router.clone(),
                        auth: parts.headers.get(header::AUTHORIZATION).cloned(),
                    }),
                    _ => Err(AskError::Usage("the MCP request carries no API".into())),
                }
            }
        }
    }
}

impl Api {
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, AskError> {
        let (router, auth) = match self {
            Api::Remote(client) => return client.call(method, path, body, timeout).await,
            Api::Local { router, auth } => (router.clone(), auth),
        };
        let mut req = Request::builder().method(method).uri(path);
        if let Some(auth) = auth {
            req = req.header(header::AUTHORIZATION, auth.clone());
        }
        let body = match body {
            Some(b) => {
                req = req.header(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                Body::from(b.to_string())
            }
            None => Body::empty(),
        };
        let req = req.body(body).map_err(|e| AskError::Usage(e.to_string()))?;
        let res = tokio::time::timeout(timeout, tower::ServiceExt::oneshot(router, req))
            .await
            .map_err(|_| AskError::Api {
                code: "timeout".into(),
                message: format!("the API did not answer within {timeout:?}"),
            })?
            .unwrap_or_else(|never| match never {});
        let status = res.status();
        let bytes = axum::body::to_bytes(res.into_body(), 16 << 20)
            .await
            .map_err(|e| AskError::Usage(e.to_string()))?;
        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if !status.is_success() {
            return Err(crate::ask::api_error(status, &v));
        }
        Ok(v)
    }
}

/// The MCP server: FrogBot's asks, agent messages and inbox as tools.
#[derive(Clone, Debug)]
pub struct FrogbotMcp {
    source: Source,
    /// The calls in flight and the withdrawals they leave behind: `frogbot mcp` waits for them
    /// once its client is gone, before it exits.
    tasks: tokio_util::task::TaskTracker,
    /// Cancelled when the transport is gone: the calls still waiting end (and withdraw).
    closing: tokio_util::sync::CancellationToken,
}

impl FrogbotMcp {
    /// The server of `frogbot mcp`: its tools call the server `client` reaches.
    pub fn remote(client: Client) -> FrogbotMcp {
        FrogbotMcp {
            source: Source::Remote(client),
            tasks: Default::default(),
            closing: Default::default(),
        }
    }

    /// The server `frogbot serve` mounts at [`MCP_PATH`].
    pub(crate) fn mounted() -> FrogbotMcp {
        FrogbotMcp {
            source: Source::Mounted,
            tasks: Default::default(),
            closing: Default::default(),
        }
    }

    async fn call(
        &self,
        ctx: &RequestContext<RoleServer>,
        method: Method,
        path: String,
        body: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, AskError> {
        self.source
            .api(ctx)?
            .call(method, &path, body, timeout)
            .await
    }

    /// `POST path` with a JSON body, answered within a minute.
    async fn post(
        &self,
        ctx: &RequestContext<RoleServer>,
        path: impl Into<String>,
        body: Value,
    ) -> Result<Value, AskError> {
        let timeout = Duration::from_secs(60);
        self.call(ctx, Method::POST, path.into(), Some(body), timeout)
            .await
    }
}

/// A tool's failure the model should read: an error result, not a protocol error.
fn failed(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

fn succeeded(text: String, structured: Value) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(structured);
    r
}

fn schema(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(o) => Arc::new(o),
        _ => unreachable!("a tool schema is an object"),
    }
}

/// The tools as `tools/list` gives them.
pub fn tools() -> Vec<Tool> {
    let input_item =
        frogbot_core::agent::question_tool_spec().input_schema["properties"]["questions"]["items"]
            .clone();
    let to = json!({
        "type": "string",
        "description": "Where: `web:CHAT_ID` (a web chat; default: a new one), `PLATFORM:CHANNEL` \
            (a new thread there: `slack:C0123`, `discord:123456`, `telegram:-100123`, \
            `matrix:!room:server`) or `PLATFORM:@USER` (a direct message: `slack:@U0123`, \
            `telegram:@12345`, `matrix:@alice:server`). Only your token's targets are allowed."
    });
    let status = json!({
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "The ask's id (CHAT.MESSAGE)"},
            "chatId": {"type": "string"},
            "state": {"type": "string", "enum": ["queued", "open", "answered", "expired", "cancelled", "dismissed"]},
            "values": {"type": "object", "description": "The typed answer per input header: text, a number, true/false, a label or a list of labels"},
            "answers": {"type": "object", "description": "The answers as the question tool gives them ({answers: [{header, selected}]})"},
            "defaulted": {"type": "boolean", "description": "The values are the inputs' defaults (it expired)"},
            "by": {"type": "object", "description": "Who answered: {user, name?}"},
            "expiresAt": {"type": "string"}
        },
        "required": ["id", "state"]
    });
    let items = json!({
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "object"}}},
        "required": ["items"]
    });
    let waits = |read_only| {
        ToolAnnotations::new()
            .read_only(read_only)
            .destructive(false)
            .open_world(true)
    };
    vec![
        Tool::new(
            "ask_person",
            "Ask a person a question on Slack, Discord, Telegram, Matrix or the web chat and wait \
             for the answer, drawn with the platform's own controls (buttons, selects, forms). \
             Returns the state: `answered` with `values` (the typed answer per input header) \
             and `by`, or `expired` (with the inputs' defaults when they have some), \
             `dismissed` (the person declined) or `cancelled`. The first answer wins. Waiting \
             may take as long as the person does: progress is reported every 10 s.",
            schema(json!({
                "type": "object",
                "required": ["text"],
                "properties": {
                    "text": {"type": "string", "description": "What to ask (Markdown)"},
                    "to": to.clone(),
                    "title": {"type": "string", "description": "A title above the text"},
                    "inputs": {
                        "type": "array",
                        "description": "The inputs, answered together (default: one OK button)",
                        "items": input_item
                    },
                    "expiresInSeconds": {"type": "integer", "minimum": 1, "maximum": frogbot_core::model::MAX_EXPIRES_IN_SECONDS, "description": "Stop accepting answers after this long"},
                    "from": {"type": "array", "items": {"type": "string"}, "description": "Who may answer: FrogBot user ids or `platform:user` ids (default: whoever the chat lets)"},
                    "blocks": {"type": "array", "items": {"type": "object"}, "description": "What the question is about, shown before the inputs: display blocks as send_message takes them (a table, a code block or a diff, an image), without event buttons"},
                    "idempotencyKey": {"type": "string", "description": "Ask once per key: the same key again waits on the same ask"}
                }
            })),
        )
        .with_raw_output_schema(schema(status))
        .annotate(waits(false)),
        Tool::new(
            "send_message",
            "Post a message to a person (Markdown text, a title, display blocks such as a table, \
             code, a progress bar or buttons that send events to your inbox). Give `to` to open \
             a conversation, or `chatId` to continue one. Returns the message with `chatId` and \
             `ref` (CHAT.MESSAGE).",
            schema(json!({
                "type": "object",
                "properties": {
                    "to": to,
                    "chatId": {"type": "string", "description": "A conversation you opened (a previous result's chatId)"},
                    "text": {"type": "string"},
                    "title": {"type": "string"},
                    "blocks": {"type": "array", "items": {"type": "object"}, "description": "Display blocks: [{\"type\": \"table\", …}, {\"type\": \"code\", …}, …]"},
                    "pin": {"type": "string", "description": "Pin it under this key (e.g. `status`)"},
                    "id": {"type": "string", "description": "The message's id: the same id again posts nothing new"}
                }
            })),
        )
        .annotate(waits(false)),
        Tool::new(
            "read_inbox",
            "Read what people sent in your conversations since the last read: their messages and \
             clicks on your blocks (each item once). Returns `items` at once, maybe none.",
            schema(json!({
                "type": "object",
                "properties": {
                    "chatId": {"type": "string", "description": "Only this conversation"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 500}
                }
            })),
        )
        .with_raw_output_schema(schema(items.clone()))
        .annotate(waits(false)),
        Tool::new(
            "wait_for_event",
            "Wait until a person writes in one of your conversations or clicks one of your \
             blocks, then return those `items` (each once); an empty list after `timeoutSeconds`.",
            schema(json!({
                "type": "object",
                "properties": {
                    "chatId": {"type": "string", "description": "Only this conversation"},
                    "timeoutSeconds": {"type": "integer", "minimum": 1, "maximum": MAX_EVENT_WAIT_SECONDS, "description": "Default 300"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 500}
                }
            })),
        )
        .with_raw_output_schema(schema(items))
        .annotate(waits(false)),
    ]
}

fn string_arg(args: &JsonObject, key: &str) -> Result<Option<String>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("`{key}` must be a string, not {other}")),
    }
}

fn count_arg(args: &JsonObject, key: &str, max: u64) -> Result<Option<u64>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if (1..=max).contains(&n) => Ok(Some(n)),
            _ => Err(format!(
                "`{key}` must be a whole number from 1 to {max}, not {v}"
            )),
        },
    }
}

fn only_keys(args: &JsonObject, allowed: &[&str]) -> Result<(), String> {
    match args.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "unknown argument `{k}` (this tool takes {})",
            allowed.join(", ")
        )),
        None => Ok(()),
    }
}

/// The body of `POST /api/asks` for the tool's arguments.
fn ask_body(args: &JsonObject) -> Result<Value, String> {
    only_keys(
        args,
        &[
            "text",
            "to",
            "title",
            "inputs",
            "expiresInSeconds",
            "from",
            "blocks",
            "idempotencyKey",
        ],
    )?;
    let text = string_arg(args, "text")?.ok_or("`text` is required")?;
    let mut body = json!({"text": text});
    body["inputs"] = match args.get("inputs") {
        None | Some(Value::Null) => json!([{"kind": "confirm", "label": "OK"}]),
        Some(Value::Array(a)) if a.is_empty() => json!([{"kind": "confirm", "label": "OK"}]),
        Some(v @ Value::Array(_)) => v.clone(),
        Some(other) => return Err(format!("`inputs` must be an array, not {other}")),
    };
    if let Some(to) = string_arg(args, "to")? {
        body["to"] = crate::ask::target_of(&to).map_err(|e| e.to_string().replace("--to", "to"))?;
    }
    for key in ["title", "idempotencyKey"] {
        if let Some(v) = string_arg(args, key)? {
            body[key] = json!(v);
        }
    }
    if let Some(v) = args.get("expiresInSeconds").filter(|v| !v.is_null()) {
        body["expiresInSeconds"] = v.clone();
    }
    if let Some(v) = args.get("from").filter(|v| !v.is_null()) {
        body["from"] = v.clone();
    }
    if let Some(v) = args.get("blocks").filter(|v| !v.is_null()) {
        body["blocks"] = v.clone();
    }
    Ok(body)
}

/// The ask's state as one line for the model.
fn ask_summary(status: &Value) -> String {
    let state = status["state"].as_str().unwrap_or("unknown");
    let by = status["by"]
        .as_str()
        .map(|b| format!(" by {b}"))
        .unwrap_or_default();
    let values = status.get("values").filter(|v| v.is_object());
    match (state, values) {
        ("answered", Some(v)) => format!("answered{by}: {v}"),
        ("expired", Some(v)) => format!("expired without an answer; the defaults apply: {v}"),
        ("expired", None) => "expired without an answer".to_owned(),
        ("dismissed", _) => format!("dismissed{by}: the person declined to answer"),
        ("cancelled", _) => "cancelled: the question was withdrawn".to_owned(),
        (other, _) => format!("{other}: still waiting for an answer (id {})", status["id"]),
    }
}

/// Withdraws an open ask when the call that waits on it ends without its answer (cancelled by
/// the client, its client gone): disarmed once the ask is over.
struct Withdraw {
    ask: Option<(Api, String)>,
    tasks: tokio_util::task::TaskTracker,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        let Some((api, id)) = self.ask.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let cancel = async move {
            let path = format!("/api/asks/{id}");
            match api
                .call(Method::DELETE, &path, None, Duration::from_secs(30))
                .await
            {
                Ok(_) => {
                    tracing::info!(ask = %id, "the MCP call ended without an answer: its ask withdrawn")
                }
                Err(e) => {
                    tracing::warn!(ask = %id, error = %e, "could not withdraw the ask of an MCP call that ended")
                }
            }
        };
        self.tasks.spawn_on(cancel, &rt);
    }
}

/// Tells the client a long wait goes on (when it asked for progress).
async fn progress(ctx: &RequestContext<RoleServer>, waited: Duration, message: &str) {
    if let Some(token) = ctx.meta.get_progress_token() {
        let p = ProgressNotificationParam::new(token, waited.as_secs_f64())
            .with_message(message.to_owned());
        if let Err(e) = ctx.peer.notify_progress(p).await {
            tracing::debug!(error = %e, "progress notification not sent");
        }
    }
}

/// Whether the client is gone: its transport closed, or no answer to a `ping` within
/// [`PING_TIMEOUT`]. A client that answers, even with an error (a protocol version without
/// server requests), is there. (A streamable HTTP session outlives its connections, so a dead
/// client is only noticed so.)
async fn client_gone(ctx: &RequestContext<RoleServer>) -> bool {
    use rmcp::service::ServiceError;
    let ping = ctx
        .peer
        .send_request(rmcp::model::ServerRequest::PingRequest(Default::default()));
    match tokio::time::timeout(PING_TIMEOUT, ping).await {
        Err(_) => true,
        Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => true,
        Ok(_) => false,
    }
}

impl FrogbotMcp {
    async fn ask_person(
        &self,
        args: &JsonObject,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, AskError> {
        let body = match ask_body(args) {
            Ok(b) => b,
            Err(e) => return Ok(failed(e)),
        };
        let created = self.post(ctx, "/api/asks", body).await?;
        let id = created["id"].as_str().unwrap_or_default().to_owned();
        let mut status = created;
        let mut guard = Withdraw {
            ask: Some((self.source.api(ctx)?, id.clone())),
            tasks: self.tasks.clone(),
        };
        let started = tokio::time::Instant::now();
        if !crate::ask::is_final(&status) {
            progress(
                ctx,
                Duration::ZERO,
                &format!("asked ({id}): waiting for the person's answer"),
            )
            .await;
        }
        while !crate::ask::is_final(&status) {
            let wait = PROGRESS_EVERY;
            let next = self.call(
                ctx,
                Method::GET,
                format!("/api/asks/{id}/wait?timeout={}", wait.as_secs()),
                None,
                wait + Duration::from_secs(30),
            );
            tokio::select! {
                s = next => status = s?,
                () = ctx.ct.cancelled() => {
                    // The guard withdraws the question as this call ends.
                    return Ok(failed("cancelled by the client: the question was withdrawn"));
                }
                () = self.closing.cancelled() => {
                    return Ok(failed("the client went away: the question was withdrawn"));
                }
            }
            if !crate::ask::is_final(&status) {
                progress(ctx, started.elapsed(), "waiting for the person's answer").await;
                if client_gone(ctx).await {
                    // The guard withdraws the question as this call ends.
                    tracing::info!(ask = %id, "the MCP client is gone");
                    return Ok(failed("the client went away: the question was withdrawn"));
                }
            }
        }
        guard.ask = None;
        Ok(succeeded(ask_summary(&status), status))
    }

    async fn send_message(
        &self,
        args: &JsonObject,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, AskError> {
        let parsed = (|| {
            only_keys(
                args,
                &["to", "chatId", "text", "title", "blocks", "pin", "id"],
            )?;
            let to = string_arg(args, "to")?;
            let chat = string_arg(args, "chatId")?;
            if to.is_some() == chat.is_some() {
                return Err("give either `to` (a new conversation) or `chatId`".to_owned());
            }
            let mut body = json!({});
            for key in ["text", "title", "pin", "id"] {
                if let Some(v) = string_arg(args, key)? {
                    body[key] = json!(v);
                }
            }
            match args.get("blocks") {
                None | Some(Value::Null) => {}
                Some(b @ Value::Array(_)) => body["blocks"] = b.clone(),
                Some(other) => return Err(format!("`blocks` must be an array, not {other}")),
            }
            let to = to
                .map(|t| crate::ask::target_of(&t).map_err(|e| e.to_string().replace("--to", "to")))
                .transpose()?;
            Ok((to, chat, body))
        })();
        let (to, chat, body) = match parsed {
            Ok(p) => p,
            Err(e) => return Ok(failed(e)),
        };
        let chat = match (chat, to) {
            (Some(c), _) => c,
            (None, to) => {
                let mut open = json!({"to": to});
                if let Some(k) = body.get("id") {
                    open["idempotencyKey"] = k.clone();
                }
                let opened = self.post(ctx, "/api/agent-chats", open).await?;
                match opened["chatId"].as_str() {
                    Some(c) => c.to_owned(),
                    None => return Ok(failed("the server answered without a chatId")),
                }
            }
        };
        if frogbot_core::model::ChatId::new(&chat).is_err() {
            return Ok(failed(format!("`chatId` {chat:?} is not a chat id")));
        }
        let m = self
            .post(ctx, format!("/api/chats/{chat}/agent-messages"), body)
            .await?;
        let m = crate::talk::with_ref(m, &chat);
        Ok(succeeded(
            format!("posted {}", m["ref"].as_str().unwrap_or_default()),
            m,
        ))
    }

    /// `read_inbox` (`wait` zero) and `wait_for_event`.
    async fn inbox(
        &self,
        args: &JsonObject,
        ctx: &RequestContext<RoleServer>,
        wait: bool,
    ) -> Result<CallToolResult, AskError> {
        let parsed = (|| {
            let allowed: &[&str] = if wait {
                &["chatId", "timeoutSeconds", "limit"]
            } else {
                &["chatId", "limit"]
            };
            only_keys(args, allowed)?;
            let chat = string_arg(args, "chatId")?;
            if let Some(c) = &chat
                && frogbot_core::model::ChatId::new(c).is_err()
            {
                return Err(format!("`chatId` {c:?} is not a chat id"));
            }
            let limit = count_arg(args, "limit", 500)?.unwrap_or(50);
            let timeout = count_arg(args, "timeoutSeconds", MAX_EVENT_WAIT_SECONDS)?.unwrap_or(300);
            Ok((chat, limit, timeout))
        })();
        let (chat, limit, timeout) = match parsed {
            Ok(p) => p,
            Err(e) => return Ok(failed(e)),
        };
        let started = tokio::time::Instant::now();
        let deadline = started + Duration::from_secs(timeout);
        loop {
            let this = if wait {
                deadline
                    .saturating_duration_since(tokio::time::Instant::now())
                    .min(PROGRESS_EVERY)
            } else {
                Duration::ZERO
            };
            let mut path = format!("/api/inbox?limit={limit}&wait={}", this.as_secs());
            if let Some(c) = &chat {
                path.push_str(&format!("&chatId={c}"));
            }
            let next = self.call(ctx, Method::GET, path, None, this + Duration::from_secs(30));
            let v = tokio::select! {
                v = next => v?,
                () = ctx.ct.cancelled() => return Ok(failed("cancelled by the client")),
            };
            let items: Vec<Value> = v["items"]
                .as_array()
                .map(|a| a.iter().map(crate::talk::inbox_line).collect())
                .unwrap_or_default();
            let over =
                !wait || tokio::time::Instant::now() + Duration::from_millis(500) >= deadline;
            if !items.is_empty() || over {
                let text = match items.len() {
                    0 if wait => format!("nothing arrived within {timeout} s"),
                    0 => "the inbox is empty".to_owned(),
                    n => format!(
                        "{n} item{}: {}",
                        if n == 1 { "" } else { "s" },
                        Value::Array(items.clone())
                    ),
                };
                return Ok(succeeded(text, json!({"items": items})));
            }
            progress(ctx, started.elapsed(), "waiting for a person").await;
        }
    }
}

impl ServerHandler for FrogbotMcp {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("frogbot", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "FrogBot asks people on Slack, Discord, Telegram, Matrix or the web chat and \
                 talks with them: `ask_person` waits for a person's answer to a question with \
                 inputs; `send_message`, `read_inbox` and `wait_for_event` hold a conversation.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        // Counted until the call ends (and its withdrawal, if any, is spawned).
        let _in_flight = self.tasks.token();
        let span = tracing::info_span!("mcp_tool", tool = %request.name);
        let result = tracing::Instrument::instrument(
            async {
                match request.name.as_ref() {
                    "ask_person" => self.ask_person(&args, &ctx).await,
                    "send_message" => self.send_message(&args, &ctx).await,
                    "read_inbox" => self.inbox(&args, &ctx, false).await,
                    "wait_for_event" => self.inbox(&args, &ctx, true).await,
                    _ => Err(AskError::Usage(String::new())),
                }
            },
            span,
        )
        .await;
        match result {
            Ok(r) => Ok(r.into()),
            Err(AskError::Usage(m)) if m.is_empty() => Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {:?}: FrogBot offers {}",
                    request.name,
                    TOOLS.join(", ")
                ),
                None,
            )),
            Err(e) => Ok(failed(e.to_string()).into()),
        }
    }
}

/// `frogbot mcp`.
#[derive(Clone, Debug, clap::Args)]
pub struct McpArgs {
    /// The running server's URL.
    #[arg(long, env = "FROGBOT_URL", default_value = "http://127.0.0.1:8787")]
    pub server: String,
    /// An `[[agents]]` token of the server: the tools reach that agent's targets only.
    #[arg(long, env = "FROGBOT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// `frogbot mcp`: serves the tools over stdio until the client closes it.
pub async fn run_stdio(args: McpArgs) -> Result<(), AskError> {
    let client = Client::new(&crate::ask::ServerArgs {
        server: args.server,
        token: args.token,
        format: crate::ask::Format::Json,
    })?;
    let server = FrogbotMcp::remote(client);
    let service = rmcp::ServiceExt::serve(server.clone(), rmcp::transport::stdio())
        .await
        .map_err(|e| AskError::Usage(format!("MCP start-up failed: {e}")))?;
    let ended = service.waiting().await;
    // The client is gone: the calls still waiting end and withdraw their asks before exiting.
    server.closing.cancel();
    server.tasks.close();
    if tokio::time::timeout(Duration::from_secs(10), server.tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!("calls still running at exit; their asks may stay open");
    }
    ended.map_err(|e| AskError::Usage(format!("MCP server failed: {e}")))?;
    Ok(())
}

/// The streamable HTTP endpoint `frogbot serve` mounts at [`MCP_PATH`].
pub(crate) struct Endpoint {
    service: rmcp::transport::StreamableHttpService<
        FrogbotMcp,
        rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
    >,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Endpoint")
    }
}

impl Endpoint {
    pub(crate) fn new() -> Endpoint {
        // The API's browser rules already check `Host` and `Origin` for this route.
        let config = rmcp::transport::StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .with_sse_keep_alive(Some(Duration::from_secs(15)));
        Endpoint {
            service: rmcp::transport::StreamableHttpService::new(
                || Ok(FrogbotMcp::mounted()),
                Arc::default(),
                config,
            ),
        }
    }

    /// Serves one HTTP request of the endpoint; its tools call `api` with the request's token.
    pub(crate) async fn handle(
        &self,
        mut req: Request<Body>,
        api: axum::Router,
    ) -> axum::response::Response {
        req.extensions_mut().insert(LocalApi(api));
        let res = self.service.handle(req).await;
        res.map(Body::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> JsonObject {
        match v {
            Value::Object(o) => o,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn ask_arguments_become_the_api_body() {
        assert_eq!(
            ask_body(&obj(json!({"text": "Deploy?", "to": "slack:@U1"}))).unwrap(),
            json!({"text": "Deploy?", "to": {"channel": "slack", "user": "U1"},
                   "inputs": [{"kind": "confirm", "label": "OK"}]})
        );
        let full = ask_body(&obj(json!({
            "text": "Which?", "title": "Pick", "to": "web:c1",
            "inputs": [{"header": "Colour", "question": "Which?", "options": [{"label": "Red"}]}],
            "expiresInSeconds": 60, "from": ["alice"], "idempotencyKey": "k1",
            "blocks": [{"type": "code", "code": "- a\n+ b", "language": "diff"}]
        })))
        .unwrap();
        assert_eq!(full["blocks"][0]["type"], json!("code"));
        assert_eq!(full["to"], json!({"web": "c1"}));
        assert_eq!(full["expiresInSeconds"], json!(60));
        assert_eq!(full["inputs"][0]["header"], json!("Colour"));
        assert!(ask_body(&obj(json!({}))).unwrap_err().contains("`text`"));
        assert!(
            ask_body(&obj(json!({"text": "x", "bogus": 1})))
                .unwrap_err()
                .contains("unknown argument `bogus`")
        );
        assert!(
            ask_body(&obj(json!({"text": "x", "to": "nowhere"})))
                .unwrap_err()
                .contains("to \"nowhere\"")
        );
        assert!(ask_body(&obj(json!({"text": 3}))).is_err());
    }

    #[test]
    fn every_tool_is_listed_with_an_object_schema() {
        let tools = tools();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, TOOLS);
        for t in &tools {
            assert_eq!(t.input_schema["type"], json!("object"), "{}", t.name);
            assert!(t.description.as_ref().is_some_and(|d| d.len() > 40));
        }
        // The ask's inputs are the question tool's items: every input kind.
        let kinds =
            &tools[0].input_schema["properties"]["inputs"]["items"]["properties"]["kind"]["enum"];
        assert_eq!(
            kinds,
            &json!(["choice", "text_input", "number_input", "toggle", "confirm"])
        );
    }

    /// `docs/mcp-tools.json` is the tool list as `tools/list` gives it (names, descriptions, input
    /// and output schemas); `UPDATE_GOLDEN=1` rewrites it.
    #[test]
    fn the_documented_tool_list_is_current() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/mcp-tools.json");
        let now = serde_json::to_string_pretty(&tools()).unwrap() + "\n";
        if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
            std::fs::write(&path, &now).unwrap();
        }
        let documented = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            documented == now,
            "docs/mcp-tools.json is out of date: run UPDATE_GOLDEN=1 cargo test -p frogbot --lib mcp_server"
        );
    }

    #[test]
    fn summaries_say_what_happened() {
        assert_eq!(
            ask_summary(
                &json!({"id": "a.b", "state": "answered", "by": "alice", "values": {"Colour": "Red"}})
            ),
            "answered by alice: {\"Colour\":\"Red\"}"
        );
        assert_eq!(
            ask_summary(&json!({"id": "a.b", "state": "expired", "values": null})),
            "expired without an answer"
        );
        assert!(ask_summary(&json!({"id": "a.b", "state": "dismissed"})).contains("declined"));
        assert!(ask_summary(&json!({"id": "a.b", "state": "cancelled"})).contains("withdrawn"));
    }
}
