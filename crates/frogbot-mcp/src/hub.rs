//! The hub: one supervisor task per server (connect, list tools, re-list on `list_changed`,
//! restart with backoff), and the tools it offers.

use async_trait::async_trait;
use backon::{BackoffBuilder, ExponentialBuilder};
use frogbot_core::BoxError;
use frogbot_core::agent::{ApprovalPolicy, Tool, ToolContext, ToolSpec};
use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::model::{CallToolRequestParams, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::config::{Approval, SEPARATOR, ServerConfig};
use crate::result::model_output;

/// The longest a connect (spawn or HTTP request, and the `initialize` handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How many times a broken SSE response stream of an HTTP server is resumed before its call
/// fails (250 ms, 500 ms, 1 s, 2 s apart).
const SSE_RESUME_TRIES: usize = 4;
/// The variables of FrogBot's own environment a stdio server inherits (the MCP TypeScript
/// SDK's `DEFAULT_INHERITED_ENV_VARS` on Unix); everything else comes from its `env`.
const INHERITED_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// How long a server waits before it is started again after a failure: exponential from `min`
/// to `max`, with jitter. A connection that lived longer than `max` starts the sequence over.
#[derive(Clone, Copy, Debug)]
pub struct Restart {
    /// The first delay.
    pub min: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Default for Restart {
    fn default() -> Self {
        Restart {
            min: Duration::from_millis(500),
            max: Duration::from_secs(60),
        }
    }
}

impl Restart {
    fn delays(&self) -> impl Iterator<Item = Duration> + use<> {
        ExponentialBuilder::new()
            .with_min_delay(self.min)
            .with_max_delay(self.max)
            .with_jitter()
            .without_max_times()
            .build()
    }
}

/// The MCP servers of one `frogbot serve`, each connected and supervised in the background.
/// Cheap to clone; the servers stop when the token given to [`McpHub::start`] is cancelled or the
/// last clone is dropped (a stdio child is terminated, then killed; never left running).
#[derive(Clone, Debug)]
pub struct McpHub {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    servers: Vec<Arc<Server>>,
    changed: Arc<watch::Sender<u64>>,
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// One server's state, shared by its supervisor and its tools.
#[derive(Debug)]
struct Server {
    config: ServerConfig,
    state: Mutex<State>,
    changed: Arc<watch::Sender<u64>>,
}

#[derive(Debug, Default)]
struct State {
    conn: Option<Conn>,
    /// The allowed tools of the live connection (empty while down).
    tools: Vec<ToolSpec>,
    /// Successful connects so far.
    connects: u64,
}

#[derive(Clone, Debug)]
struct Conn {
    peer: Peer<RoleClient>,
    pid: Option<u32>,
    /// Ends this connection (the supervisor then reconnects).
    stop: CancellationToken,
}

/// A server's state as [`McpHub::status`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerStatus {
    /// The server's id.
    pub id: String,
    /// Whether it is connected now.
    pub connected: bool,
    /// The names (prefixed) of the tools it offers now.
    pub tools: Vec<String>,
    /// The process id of a stdio server's child, while it runs.
    pub pid: Option<u32>,
    /// How many times it has connected (1 after the first start, +1 per restart).
    pub connects: u64,
}

/// [`McpHub::wait_ready`] gave up: these servers are not connected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("mcp servers not connected: {}", .0.join(", "))]
pub struct NotReady(pub Vec<String>);

/// Why one connect failed.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("could not start `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("`bearer_token_env` names {0}, which is not set")]
    Bearer(String),
    #[error("the MCP handshake failed: {0}")]
    Initialize(#[from] Box<rmcp::service::ClientInitializeError>),
    #[error("tools/list failed: {0}")]
    List(#[from] ServiceError),
    #[error("neither `command` nor `url` is set")]
    NoTransport,
    #[error("{0} took longer than {1:?}")]
    Timeout(&'static str, Duration),
}

/// Why one call failed (the model sees the message).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The server is down (starting, restarting or stopped).
    #[error("mcp server {id} is not connected (it is being restarted); try again later")]
    NotConnected {
        /// The server.
        id: String,
    },
    /// The call took longer than the server's `timeout_seconds`; it was cancelled.
    #[error("tool {tool} timed out after {seconds} s (the call was cancelled)")]
    Timeout {
        /// The tool's prefixed name.
        tool: String,
        /// The timeout.
        seconds: u64,
    },
    /// The input was not a JSON object.
    #[error("tool {tool} takes a JSON object as input")]
    Input {
        /// The tool's prefixed name.
        tool: String,
    },
    /// The server answered with `isError: true`.
    #[error("{text}")]
    Tool {
        /// The tool's prefixed name.
        tool: String,
        /// The result's text.
        text: String,
    },
    /// The connection broke during the call (a child that died, an HTTP server gone); the hub
    /// reconnects.
    #[error(
        "tool {tool} failed: the connection to mcp server {id} was lost (it is being restarted)"
    )]
    ConnectionLost {
        /// The tool's prefixed name.
        tool: String,
        /// The server.
        id: String,
    },
    /// The request failed: a protocol error (unknown tool, bad arguments) or a lost connection.
    #[error("tool {tool} failed: {source}")]
    Service {
        /// The tool's prefixed name.
        tool: String,
        /// What failed.
        source: ServiceError,
    },
}

impl McpHub {
    /// Starts every server in the background (configs are expected to be validated, see
    /// [`crate::validate_all`]). Must be called inside a Tokio runtime.
    pub fn start(servers: Vec<ServerConfig>, cancel: CancellationToken) -> McpHub {
        McpHub::start_with(servers, cancel, Restart::default())
    }

    /// [`McpHub::start`] with another restart backoff.
    pub fn start_with(
        servers: Vec<ServerConfig>,
        cancel: CancellationToken,
        restart: Restart,
    ) -> McpHub {
        if servers.iter().any(|s| s.url.is_some()) {
            // reqwest (rustls without a built-in provider) needs a process default; `Err` only
            // means one is installed already, and that one stays.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let (tx, _) = watch::channel(0u64);
        let changed = Arc::new(tx);
        let cancel = cancel.child_token();
        let tasks = TaskTracker::new();
        let servers: Vec<Arc<Server>> = servers
            .into_iter()
            .map(|config| {
                Arc::new(Server {
                    config,
                    state: Mutex::new(State::default()),
                    changed: changed.clone(),
                })
            })
            .collect();
        for server in &servers {
            let span = tracing::info_span!("mcp_server", server = %server.config.id);
            tasks.spawn(supervise(server.clone(), cancel.clone(), restart).instrument(span));
        }
        tasks.close();
        McpHub {
            inner: Arc::new(Inner {
                servers,
                changed,
                cancel,
                tasks,
            }),
        }
    }

    /// The configured server ids, in order.
    pub fn ids(&self) -> Vec<String> {
        self.inner
            .servers
            .iter()
            .map(|s| s.config.id.clone())
            .collect()
    }

    /// Waits until every server is connected, at most `timeout`; else names those that are not.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), NotReady> {
        let mut changed = self.changed();
        let down = || -> Vec<String> {
            self.inner
                .servers
                .iter()
                .filter(|s| s.state.lock().unwrap().conn.is_none())
                .map(|s| s.config.id.clone())
                .collect()
        };
        let wait = async {
            loop {
                if down().is_empty() {
                    return;
                }
                if changed.changed().await.is_err() {
                    return;
                }
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(()) if down().is_empty() => Ok(()),
            _ => Err(NotReady(down())),
        }
    }

    /// The current tools of the selected servers (every server when `None`), named
    /// `{id}__{tool}`, only those their allow-lists let through. A server that is down offers none.
    pub fn tools(&self, selection: Option<&[String]>) -> Vec<Arc<dyn Tool>> {
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for server in &self.inner.servers {
            if selection.is_some_and(|ids| !ids.contains(&server.config.id)) {
                continue;
            }
            let specs = server.state.lock().unwrap().tools.clone();
            for spec in specs {
                tools.push(Arc::new(McpTool {
                    server: server.clone(),
                    bare: spec.name[server.config.id.len() + SEPARATOR.len()..].to_owned(),
                    spec,
                }));
            }
        }
        tools
    }

    /// Whether calls of the tool named `name` (`{id}__{tool}`) wait for approval; `None` when no
    /// configured server has that id (not an MCP tool).
    pub fn approval(&self, name: &str) -> Option<Approval> {
        let (id, tool) = name.split_once(SEPARATOR)?;
        let server = self.inner.servers.iter().find(|s| s.config.id == id)?;
        Some(server.config.approval_for(tool))
    }

    /// Bumped whenever a server's tool list changes: at connect, after a
    /// `notifications/tools/list_changed`, and when a server goes down.
    pub fn changed(&self) -> watch::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    /// Every server's state.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.inner
            .servers
            .iter()
            .map(|server| {
                let state = server.state.lock().unwrap();
                ServerStatus {
                    id: server.config.id.clone(),
                    connected: state.conn.is_some(),
                    tools: state.tools.iter().map(|t| t.name.clone()).collect(),
                    pid: state.conn.as_ref().and_then(|c| c.pid),
                    connects: state.connects,
                }
            })
            .collect()
    }

    /// Stops every server and waits until they have stopped (stdio children exited).
    pub async fn shutdown(&self) {
        self.inner.cancel.cancel();
        self.inner.tasks.wait().await;
    }
}

impl Server {
    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    fn connection(&self) -> Option<Conn> {
        self.state.lock().unwrap().conn.clone()
    }

    /// The allowed tools of a `tools/list`, as the model sees them.
    fn specs(&self, listed: Vec<rmcp::model::Tool>) -> Vec<ToolSpec> {
        let id = &self.config.id;
        let mut specs = Vec::new();
        for tool in listed {
            if !self.config.allows(&tool.name) {
                continue;
            }
            let name = format!("{id}{SEPARATOR}{}", tool.name);
            if !model_name_ok(&name) {
                tracing::warn!(tool = %tool.name, "mcp tool skipped: `{name}` is not a valid tool name for models (letters, digits, `_`, `-`, at most 64)");
                continue;
            }
            specs.push(ToolSpec {
                name,
                description: tool
                    .description
                    .map(|d| d.into_owned())
                    .or(tool.title)
                    .unwrap_or_default(),
                input_schema: Value::Object((*tool.input_schema).clone()),
            });
        }
        if let Some(allowed) = &self.config.tools {
            for name in allowed {
                let full = format!("{id}{SEPARATOR}{name}");
                if !specs.iter().any(|s| s.name == full) {
                    tracing::warn!(tool = %name, "mcp: `tools` lists a tool the server does not offer");
                }
            }
        }
        specs
    }

    fn set_tools(&self, specs: Vec<ToolSpec>) {
        let mut state = self.state.lock().unwrap();
        if state.tools != specs {
            state.tools = specs;
            drop(state);
            self.bump();
        }
    }

    fn set_up(&self, conn: Conn, specs: Vec<ToolSpec>) {
        let mut state = self.state.lock().unwrap();
        state.conn = Some(conn);
        state.tools = specs;
        state.connects += 1;
        drop(state);
        self.bump();
    }

    fn set_down(&self) {
        let mut state = self.state.lock().unwrap();
        if let Some(conn) = state.conn.take() {
            conn.stop.cancel();
            state.tools.clear();
            drop(state);
            self.bump();
        }
    }

    /// One connection, from spawn/connect to its end.
    async fn run_once(&self, cancel: &CancellationToken) -> Result<(), ConnectError> {
        let (tx, mut list_changed) = mpsc::unbounded_channel();
        let handler = Listener { list_changed: tx };
        let stop = cancel.child_token();
        let connect = async {
            match (&self.config.command, &self.config.url) {
                (Some(command), _) => {
                    let config = &self.config;
                    let mut cmd = CommandWrap::with_new(command, |cmd| {
                        cmd.args(&config.args).env_clear();
                        for var in INHERITED_ENV {
                            if let Some(value) = std::env::var_os(var) {
                                cmd.env(var, value);
                            }
                        }
                        cmd.envs(&config.env);
                    });
                    cmd.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
                    let (child, stderr) = TokioChildProcess::builder(cmd)
                        .stderr(Stdio::piped())
                        .spawn()
                        .map_err(|source| ConnectError::Spawn {
                            command: command.clone(),
                            source,
                        })?;
                    let pid = child.id();
                    if let Some(stderr) = stderr {
                        tokio::spawn(log_stderr(stderr).instrument(tracing::Span::current()));
                    }
                    let running = handler
                        .serve_with_ct(child, stop.clone())
                        .await
                        .map_err(Box::new)?;
                    Ok((running, pid))
                }
                (None, Some(url)) => {
                    let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                    // rmcp's default resumes a broken SSE response stream forever, so a call to
                    // a server that died would wait for its whole timeout: give up after a few
                    // seconds instead (the call fails, the hub reconnects).
                    let mut resume = ExponentialBackoff::default();
                    resume.max_times = Some(SSE_RESUME_TRIES);
                    resume.base_duration = Duration::from_millis(250);
                    resume.max_delay = Some(Duration::from_secs(2));
                    config.retry_config = Arc::new(resume);
                    if let Some(var) = &self.config.bearer_token_env {
                        let token = std::env::var(var)
                            .ok()
                            .filter(|t| !t.is_empty())
                            .ok_or_else(|| ConnectError::Bearer(var.clone()))?;
                        config = config.auth_header(token);
                    }
                    let transport = StreamableHttpClientTransport::from_config(config);
                    let running = handler
                        .serve_with_ct(transport, stop.clone())
                        .await
                        .map_err(Box::new)?;
                    Ok((running, None))
                }
                (None, None) => Err(ConnectError::NoTransport),
            }
        };
        let (running, pid): (RunningService<RoleClient, Listener>, _) =
            tokio::time::timeout(CONNECT_TIMEOUT, connect)
                .await
                .map_err(|_| ConnectError::Timeout("connecting", CONNECT_TIMEOUT))??;
        let peer = running.peer().clone();
        let listed = tokio::select! {
            listed = tokio::time::timeout(self.config.timeout(), peer.list_all_tools()) => listed,
            () = stop.cancelled() => {
                // Shutdown: close the transport (a child is asked to exit, then killed).
                let _ = running.cancel().await;
                return Ok(());
            }
        };
        let listed = match listed {
            Ok(Ok(listed)) => listed,
            failed => {
                let _ = running.cancel().await;
                return Err(match failed {
                    Ok(Err(e)) => ConnectError::List(e),
                    _ => ConnectError::Timeout("tools/list", self.config.timeout()),
                });
            }
        };
        let specs = self.specs(listed);
        tracing::info!(tools = specs.len(), ?pid, "mcp server connected");
        self.set_up(
            Conn {
                peer: peer.clone(),
                pid,
                stop: stop.clone(),
            },
            specs,
        );
        let waiting = running.waiting();
        tokio::pin!(waiting);
        loop {
            tokio::select! {
                quit = &mut waiting => {
                    tracing::debug!(?quit, "mcp connection ended");
                    return Ok(());
                }
                Some(()) = list_changed.recv() => {
                    while list_changed.try_recv().is_ok() {}
                    match tokio::time::timeout(self.config.timeout(), peer.list_all_tools()).await {
                        Ok(Ok(listed)) => {
                            let specs = self.specs(listed);
                            tracing::info!(tools = specs.len(), "mcp tools changed");
                            self.set_tools(specs);
                        }
                        Ok(Err(e)) => {
                            tracing::warn!(error = %e, "mcp tools/list failed after list_changed: reconnecting");
                            stop.cancel();
                        }
                        Err(_) => {
                            tracing::warn!("mcp tools/list timed out after list_changed: reconnecting");
                            stop.cancel();
                        }
                    }
                }
            }
        }
    }
}

/// Connects, waits for the connection to end, restarts with backoff; until `cancel`.
async fn supervise(server: Arc<Server>, cancel: CancellationToken, restart: Restart) {
    let mut delays = restart.delays();
    loop {
        let started = Instant::now();
        // `run_once` ends by itself on `cancel`, after closing its transport (a child exited).
        let outcome = server.run_once(&cancel).await;
        server.set_down();
        if cancel.is_cancelled() {
            break;
        }
        if started.elapsed() > restart.max {
            delays = restart.delays();
        }
        let delay = delays.next().unwrap_or(restart.max);
        match outcome {
            Ok(()) => tracing::warn!(?delay, "mcp server disconnected; restarting"),
            Err(e) => tracing::warn!(error = %e, ?delay, "mcp server failed to start; retrying"),
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = cancel.cancelled() => break,
        }
    }
    tracing::info!("mcp server stopped");
}

async fn log_stderr(stderr: tokio::process::ChildStderr) {
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(target: "frogbot_mcp::stderr", "{line}");
    }
}

/// Whether a tool name is one every model API takes (OpenAI's `^[a-zA-Z0-9_-]{1,64}$`).
fn model_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The client side's handler: passes `tools/list_changed` to the supervisor.
#[derive(Debug)]
struct Listener {
    list_changed: mpsc::UnboundedSender<()>,
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.list_changed.send(());
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.client_info = Implementation::new("frogbot", env!("CARGO_PKG_VERSION"));
        info
    }
}

/// One MCP tool as the agent sees it.
struct McpTool {
    server: Arc<Server>,
    /// The server's name for it.
    bare: String,
    spec: ToolSpec,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.spec.name)
            .finish()
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    async fn call(&self, input: Value, ctx: ToolContext) -> Result<Value, BoxError> {
        let span = tracing::info_span!(
            "mcp_call",
            server = %self.server.config.id,
            tool = %self.bare,
            chat_id = %ctx.chat_id,
            tool_call_id = %ctx.tool_call_id,
        );
        async {
            self.call_inner(input).await.map_err(|e| {
                tracing::info!(error = %e, "mcp call failed");
                e.into()
            })
        }
        .instrument(span)
        .await
    }

    /// The server's `approval` for this tool: `always` asks its `approvers` first.
    fn approval(&self) -> Option<ApprovalPolicy> {
        let config = &self.server.config;
        (config.approval_for(&self.bare) == Approval::Always).then(|| ApprovalPolicy {
            approvers: config.approvers.clone(),
            expires_in_seconds: config.approval_expires_seconds,
        })
    }
}

impl McpTool {
    async fn call_inner(&self, input: Value) -> Result<Value, CallError> {
        let tool = || self.spec.name.clone();
        let arguments = match input {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            _ => return Err(CallError::Input { tool: tool() }),
        };
        let conn = self
            .server
            .connection()
            .ok_or_else(|| CallError::NotConnected {
                id: self.server.config.id.clone(),
            })?;
        let timeout = self.server.config.timeout();
        let call = conn
            .peer
            .call_tool(CallToolRequestParams::new(self.bare.clone()).with_arguments(arguments));
        // Dropping the request on timeout sends `notifications/cancelled` (rmcp's
        // cancel-on-drop guard).
        let result = match tokio::time::timeout(timeout, call).await {
            Err(_) => {
                return Err(CallError::Timeout {
                    tool: tool(),
                    seconds: self.server.config.timeout_seconds,
                });
            }
            Ok(Err(source)) => {
                if matches!(
                    source,
                    ServiceError::TransportClosed | ServiceError::TransportSend(_)
                ) {
                    // The connection is lost (a dead child, an HTTP server gone): reconnect.
                    tracing::warn!(error = %source, "mcp connection lost during a call");
                    conn.stop.cancel();
                    return Err(CallError::ConnectionLost {
                        tool: tool(),
                        id: self.server.config.id.clone(),
                    });
                }
                return Err(CallError::Service {
                    tool: tool(),
                    source,
                });
            }
            Ok(Ok(result)) => result,
        };
        let wire = serde_json::to_value(&result).unwrap_or(Value::Null);
        model_output(&wire).map_err(|text| CallError::Tool { tool: tool(), text })
    }
}
