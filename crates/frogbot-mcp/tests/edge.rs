//! Edge cases against an `rmcp` server written here, served over streamable HTTP in this process:
//! tools added, removed and changed at run time with `notifications/tools/list_changed`, `isError`
//! results, structured content, images, the allow-list, the per-channel selection, approvals,
//! a timed-out call's cancellation reaching the server, and requests for input (URL mode
//! declined; a call that asks twice).

mod common;

use common::*;
use frogbot_mcp::{Approval, McpHub, ServerConfig};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientResult, ContentBlock,
    ElicitRequest, ElicitRequestParams, JsonObject, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig as ServerInit, ServerRequest, Tool as RTool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

fn schema(properties: Value) -> Arc<JsonObject> {
    Arc::new(
        json!({"type": "object", "properties": properties})
            .as_object()
            .unwrap()
            .clone(),
    )
}

fn echo_tool() -> RTool {
    RTool::new(
        "echo",
        "Echoes the text",
        schema(json!({"text": {"type": "string"}})),
    )
}

fn base_tools() -> Vec<RTool> {
    vec![
        echo_tool(),
        RTool::new("fail", "Always fails", schema(json!({}))),
        RTool::new("weather", "Structured weather", schema(json!({}))),
        RTool::new("picture", "A picture", schema(json!({}))),
        RTool::new("hang", "Never answers", schema(json!({}))),
        RTool::new("secret", "Hidden by allow-lists", schema(json!({}))),
        RTool::new("whoami", "The Authorization header", schema(json!({}))),
        // Not a name model APIs take (`.`): never offered.
        RTool::new("dotted.name", "Skipped", schema(json!({}))),
    ]
}

#[derive(Default)]
struct Shared {
    tools: Mutex<Vec<RTool>>,
    peers: Mutex<Vec<Peer<RoleServer>>>,
    hang_started: Notify,
    hang_cancelled: Notify,
}

/// The test server; its tool list is changed by the test.
#[derive(Clone)]
struct Edge(Arc<Shared>);

impl Edge {
    fn new() -> Edge {
        let shared = Shared::default();
        *shared.tools.lock().unwrap() = base_tools();
        Edge(Arc::new(shared))
    }

    /// Changes the tool list and tells every connected client.
    async fn set_tools(&self, change: impl FnOnce(&mut Vec<RTool>)) {
        change(&mut self.0.tools.lock().unwrap());
        let peers = self.0.peers.lock().unwrap().clone();
        for peer in peers {
            let _ = peer.notify_tool_list_changed().await;
        }
    }
}

impl ServerHandler for Edge {
    fn get_info(&self) -> ServerInit {
        ServerInit::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.0.peers.lock().unwrap().push(context.peer.clone());
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.0.tools.lock().unwrap().clone(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            "echo" => CallToolResult::success(vec![ContentBlock::text(format!(
                "echo: {}",
                args.get("text").and_then(Value::as_str).unwrap_or("")
            ))]),
            "fail" => CallToolResult::error(vec![ContentBlock::text("the disk is full")]),
            "weather" => CallToolResult::structured(json!({"temperature": 21.5, "sky": "clear"})),
            "picture" => CallToolResult::success(vec![
                ContentBlock::text("a red pixel:"),
                ContentBlock::image("iVBORw0KGgo=", "image/png"),
            ]),
            "hang" => {
                self.0.hang_started.notify_one();
                context.ct.cancelled().await;
                self.0.hang_cancelled.notify_one();
                return Err(ErrorData::internal_error("cancelled", None));
            }
            "whoami" => {
                let auth = context
                    .extensions
                    .get::<axum::http::request::Parts>()
                    .and_then(|parts| parts.headers.get("authorization"))
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("none")
                    .to_owned();
                CallToolResult::success(vec![ContentBlock::text(auth)])
            }
            "extra" | "secret" => CallToolResult::success(vec![ContentBlock::text("ok")]),
            // Asks for input at a URL (URL-mode elicitation), then says what it got.
            "ask_url" => {
                let params = ElicitRequestParams::UrlElicitationParams {
                    meta: None,
                    message: "Sign in".into(),
                    url: "https://example.com/sign-in".into(),
                    elicitation_id: "e1".into(),
                };
                CallToolResult::success(vec![ContentBlock::text(
                    elicit(&context.peer, params).await,
                )])
            }
            // Asks twice (a number, then a yes), then says what it got each time.
            "ask_twice" => {
                let form =
                    |message: &str, schema: Value| ElicitRequestParams::FormElicitationParams {
                        meta: None,
                        message: message.into(),
                        requested_schema: serde_json::from_value(schema).unwrap(),
                    };
                let first = elicit(
                    &context.peer,
                    form(
                        "How many?",
                        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
                    ),
                )
                .await;
                let second = elicit(
                    &context.peer,
                    form(
                        "Sure?",
                        json!({"type": "object", "properties": {"sure": {"type": "boolean"}}, "required": ["sure"]}),
                    ),
                )
                .await;
                CallToolResult::success(vec![ContentBlock::text(format!("{first} then {second}"))])
            }
            other => {
                return Err(ErrorData::invalid_params(format!("no tool {other}"), None));
            }
        };
        Ok(result.into())
    }
}

/// Sends `elicitation/create`; the result as JSON text (or the error).
async fn elicit(peer: &Peer<RoleServer>, params: ElicitRequestParams) -> String {
    match peer
        .send_request(ServerRequest::ElicitRequest(ElicitRequest::new(params)))
        .await
    {
        Ok(ClientResult::ElicitResult(r)) => serde_json::to_string(&r).unwrap(),
        Ok(other) => format!("unexpected {other:?}"),
        Err(e) => format!("error {e}"),
    }
}

/// Serves `edge` at `http://127.0.0.1:{port}/mcp`; returns the URL.
async fn serve(edge: Edge) -> String {
    let service = StreamableHttpService::new(
        move || Ok(edge.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    url
}

/// Awaits the next bump of `changed` (fails after WAIT).
async fn next_change(changed: &mut tokio::sync::watch::Receiver<u64>) {
    tokio::time::timeout(WAIT, changed.changed())
        .await
        .expect("hub.changed() did not fire")
        .unwrap();
}

#[tokio::test]
async fn list_changed_adds_removes_and_changes_tools() {
    init_tracing();
    let edge = Edge::new();
    let url = serve(edge.clone()).await;
    let hub = McpHub::start(
        vec![ServerConfig::http("edge", &url)],
        CancellationToken::new(),
    );
    hub.wait_ready(WAIT).await.unwrap();
    let mut changed = hub.changed();
    changed.mark_unchanged();
    assert_eq!(
        names(&hub),
        [
            "edge__echo",
            "edge__fail",
            "edge__hang",
            "edge__picture",
            "edge__secret",
            "edge__weather",
            "edge__whoami"
        ]
    );

    edge.set_tools(|tools| {
        tools.push(RTool::new(
            "extra",
            "Added later",
            schema(json!({"n": {"type": "integer"}})),
        ))
    })
    .await;
    next_change(&mut changed).await;
    let extra = tool(&hub, "edge__extra");
    assert_eq!(extra.spec().description, "Added later");
    assert_eq!(
        extra.spec().input_schema["properties"]["n"]["type"],
        "integer"
    );
    assert_eq!(extra.call(json!({}), ctx("x1")).await.unwrap(), json!("ok"));

    edge.set_tools(|tools| tools.retain(|t| t.name != "extra"))
        .await;
    next_change(&mut changed).await;
    assert!(!names(&hub).contains(&"edge__extra".to_owned()));

    // A schema change is a change too.
    edge.set_tools(|tools| {
        tools[0] = RTool::new(
            "echo",
            "Echoes the text, louder",
            schema(json!({"text": {"type": "string"}, "loud": {"type": "boolean"}})),
        )
    })
    .await;
    next_change(&mut changed).await;
    let echo = tool(&hub, "edge__echo").spec();
    assert_eq!(echo.description, "Echoes the text, louder");
    assert_eq!(echo.input_schema["properties"]["loud"]["type"], "boolean");
    hub.shutdown().await;
}

#[tokio::test]
async fn results_errors_structured_content_and_images() {
    init_tracing();
    let url = serve(Edge::new()).await;
    let hub = McpHub::start(
        vec![ServerConfig::http("edge", &url)],
        CancellationToken::new(),
    );
    hub.wait_ready(WAIT).await.unwrap();

    assert_eq!(
        tool(&hub, "edge__echo")
            .call(json!({"text": "hi"}), ctx("r1"))
            .await
            .unwrap(),
        json!("echo: hi")
    );
    let err = tool(&hub, "edge__fail")
        .call(json!({}), ctx("r2"))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "the disk is full");
    assert_eq!(
        tool(&hub, "edge__weather")
            .call(json!({}), ctx("r3"))
            .await
            .unwrap(),
        json!({
            "content": [{"type": "text", "text": "{\"sky\":\"clear\",\"temperature\":21.5}"}],
            "structuredContent": {"temperature": 21.5, "sky": "clear"}
        })
    );
    assert_eq!(
        tool(&hub, "edge__picture")
            .call(Value::Null, ctx("r4"))
            .await
            .unwrap(),
        json!({"content": [
            {"type": "text", "text": "a red pixel:"},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}
        ]})
    );
    let err = tool(&hub, "edge__echo")
        .call(json!("not an object"), ctx("r5"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tool edge__echo takes a JSON object as input"
    );
    hub.shutdown().await;
}

#[tokio::test]
async fn timeout_cancels_the_call_on_the_server() {
    init_tracing();
    let edge = Edge::new();
    let url = serve(edge.clone()).await;
    let config = ServerConfig {
        timeout_seconds: 1,
        ..ServerConfig::http("edge", &url)
    };
    let hub = McpHub::start(vec![config], CancellationToken::new());
    hub.wait_ready(WAIT).await.unwrap();
    let started = edge.0.hang_started.notified();
    let cancelled = edge.0.hang_cancelled.notified();
    let err = tool(&hub, "edge__hang")
        .call(json!({}), ctx("t1"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tool edge__hang timed out after 1 s (the call was cancelled)"
    );
    tokio::time::timeout(WAIT, started).await.unwrap();
    tokio::time::timeout(WAIT, cancelled)
        .await
        .expect("the server never saw notifications/cancelled");
    hub.shutdown().await;
}

#[tokio::test]
async fn allow_list_selection_and_approvals() {
    init_tracing();
    let url = serve(Edge::new()).await;
    let a: ServerConfig = toml::from_str(&format!(
        r#"
        id = "a"
        url = "{url}"
        tools = ["echo", "fail", "not-offered"]
        approval = "always"
        "#
    ))
    .unwrap();
    let b: ServerConfig = toml::from_str(&format!(
        r#"
        id = "b"
        url = "{url}"
        tools = ["echo", "secret"]
        [approval]
        default = "never"
        secret = "always"
        "b__echo" = "never"
        "#
    ))
    .unwrap();
    frogbot_mcp::validate_all(&[a.clone(), b.clone()]).unwrap();
    let hub = McpHub::start(vec![a, b], CancellationToken::new());
    hub.wait_ready(WAIT).await.unwrap();
    assert_eq!(names(&hub), ["a__echo", "a__fail", "b__echo", "b__secret"]);
    let only_b: Vec<String> = hub
        .tools(Some(&["b".to_owned()]))
        .iter()
        .map(|t| t.spec().name)
        .collect();
    assert_eq!(only_b, ["b__echo", "b__secret"]);
    assert!(hub.tools(Some(&[])).is_empty());
    assert!(hub.tools(Some(&["nope".to_owned()])).is_empty());

    assert_eq!(hub.approval("a__echo"), Some(Approval::Always));
    assert_eq!(hub.approval("b__secret"), Some(Approval::Always));
    assert_eq!(hub.approval("b__echo"), Some(Approval::Never));
    assert_eq!(hub.approval("b__anything"), Some(Approval::Never));
    assert_eq!(hub.approval("c__echo"), None);
    assert_eq!(hub.approval("ask"), None);
    assert_eq!(hub.ids(), ["a", "b"]);
    hub.shutdown().await;
}

/// `bearer_token_env` names a variable; its value goes out as `Authorization: Bearer …`. (Tests
/// cannot set variables — `set_var` is unsafe in edition 2024 — so this uses `HOME`.)
#[tokio::test]
async fn bearer_token_from_the_named_variable() {
    init_tracing();
    let url = serve(Edge::new()).await;
    let home = std::env::var("HOME").expect("HOME is set");
    let config = ServerConfig {
        bearer_token_env: Some("HOME".into()),
        ..ServerConfig::http("edge", &url)
    };
    config.validate().unwrap();
    let hub = McpHub::start(vec![config], CancellationToken::new());
    hub.wait_ready(WAIT).await.unwrap();
    assert_eq!(
        tool(&hub, "edge__whoami")
            .call(json!({}), ctx("b1"))
            .await
            .unwrap(),
        json!(format!("Bearer {home}"))
    );
    hub.shutdown().await;

    // Without it, no header.
    let hub = McpHub::start(
        vec![ServerConfig::http("edge", &url)],
        CancellationToken::new(),
    );
    hub.wait_ready(WAIT).await.unwrap();
    assert_eq!(
        tool(&hub, "edge__whoami")
            .call(json!({}), ctx("b2"))
            .await
            .unwrap(),
        json!("none")
    );
    hub.shutdown().await;
}

/// A server that cannot start is retried in the background and offers nothing; the others work.
#[tokio::test]
async fn a_server_that_cannot_start_does_not_hold_up_the_others() {
    init_tracing();
    let url = serve(Edge::new()).await;
    let hub = McpHub::start(
        vec![
            ServerConfig::stdio("ghost", "/nonexistent/frogbot-mcp-test-server", &[]),
            ServerConfig::http("edge", &url),
        ],
        CancellationToken::new(),
    );
    wait_status(&hub, "edge to connect", |s| s[1].connected).await;
    let err = hub
        .wait_ready(std::time::Duration::from_millis(200))
        .await
        .unwrap_err();
    assert_eq!(err.0, ["ghost"]);
    assert_eq!(err.to_string(), "mcp servers not connected: ghost");
    let status = &hub.status()[0];
    assert!(!status.connected && status.connects == 0 && status.tools.is_empty());
    assert!(hub.tools(Some(&["ghost".to_owned()])).is_empty());
    assert_eq!(
        tool(&hub, "edge__echo")
            .call(json!({"text": "fine"}), ctx("g1"))
            .await
            .unwrap(),
        json!("echo: fine")
    );
    hub.shutdown().await;
}

/// A URL-mode request for input is declined (FrogBot asks in the chat, not at a URL), with the
/// reason added to the result for the model; a call that asks twice is asked twice and gets each
/// answer typed.
#[tokio::test]
async fn elicitation_url_mode_is_declined_and_a_call_may_ask_twice() {
    use frogbot_core::agent::{ToolAnswer, ToolStep};
    use frogbot_core::model::{QuestionAnswer, QuestionOutput};
    init_tracing();
    let edge = Edge::new();
    edge.set_tools(|tools| {
        tools.push(RTool::new("ask_url", "Asks at a URL", schema(json!({}))));
        tools.push(RTool::new("ask_twice", "Asks twice", schema(json!({}))));
    })
    .await;
    let url = serve(edge.clone()).await;
    let hub = McpHub::start(
        vec![ServerConfig::http("edge", &url)],
        CancellationToken::new(),
    );
    hub.wait_ready(WAIT).await.unwrap();

    let out = tool(&hub, "edge__ask_url")
        .call_or_ask(json!({}), ctx("u1"))
        .await
        .unwrap();
    let ToolStep::Done(Value::String(text)) = out else {
        panic!("expected a text result, got {out:?}");
    };
    assert!(text.starts_with(r#"{"action":"decline"}"#), "{text}");
    assert!(text.contains("URL-mode elicitation"), "{text}");

    let t = tool(&hub, "edge__ask_twice");
    let answer = |header: &str, pick: &str| {
        ToolAnswer::Answered(QuestionOutput {
            answers: vec![QuestionAnswer {
                header: header.into(),
                selected: vec![pick.into()],
            }],
        })
    };
    let ToolStep::Ask(first) = t.call_or_ask(json!({}), ctx("t1")).await.unwrap() else {
        panic!("the first question");
    };
    assert_eq!(first.questions[0].question, "How many?\n\nn");
    let ToolStep::Ask(second) = t.resume(answer("n", "3"), ctx("t1")).await.unwrap() else {
        panic!("the second question");
    };
    assert_eq!(second.questions[0].header, "sure");
    let ToolStep::Done(out) = t.resume(answer("sure", "on"), ctx("t1")).await.unwrap() else {
        panic!("the result");
    };
    assert_eq!(
        out,
        json!(
            r#"{"action":"accept","content":{"n":3}} then {"action":"accept","content":{"sure":true}}"#
        )
    );
    hub.shutdown().await;
}
