//! The hub: one supervisor task per server (connect, list tools, re-list on `list_changed`,
//! restart with backoff), and the tools it offers.

use async_trait::async_trait;
use frogbot_core::BoxError;
use frogbot_core::agent::{ApprovalPolicy, Tool, ToolAnswer, ToolContext, ToolSpec, ToolStep};
use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, FormElicitationCapability, Implementation,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::config::{Approval, SEPARATOR, ServerConfig};
use crate::elicit::Form;
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
    /// The waits between restarts: frogbot-channel's one retry policy, without a bound.
    fn delays(&self) -> impl Iterator<Item = Duration> + use<> {
        frogbot_channel::RetryPolicy {
            attempts: u32::MAX,
            min_delay: self.min,
            max_delay: self.max,
            max_wait: self.max,
            jitter: true,
        }
        .backoff()
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
    /// The calls in flight, each with where the server's requests for input go.
    calls: Arc<Mutex<Slots>>,
    /// Calls that wait for a person's input, by chat and call id.
    suspended: Mutex<HashMap<(String, String), Suspended>>,
}

/// The calls of a server in flight: an `elicitation/create` goes to the one call running (the
/// protocol does not say which call asks; with several running it is declined).
#[derive(Debug, Default)]
struct Slots {
    next: u64,
    open: HashMap<u64, mpsc::UnboundedSender<Elicitation>>,
}

/// A server's request for input, and where its result goes.
#[derive(Debug)]
struct Elicitation {
    request: ElicitRequestParams,
    reply: oneshot::Sender<ElicitResult>,
}

/// A call in flight: its request runs in a task (so it outlives a suspended `Tool::call_or_ask`);
/// dropped, the request is cancelled (`notifications/cancelled`) and its slot freed.
#[derive(Debug)]
struct Running {
    task: tokio::task::JoinHandle<Result<CallToolResult, ServiceError>>,
    asks: mpsc::UnboundedReceiver<Elicitation>,
    slot: u64,
    slots: Arc<Mutex<Slots>>,
    conn: Conn,
    /// Requests for input FrogBot declined by itself, told to the model with the result.
    notes: Vec<String>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.slots.lock().unwrap().open.remove(&self.slot);
        self.task.abort();
    }
}

/// A call waiting for a person's answer to its server's request.
#[derive(Debug)]
struct Suspended {
    form: Form,
    reply: oneshot::Sender<ElicitResult>,
    run: Running,
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
    /// The call waited for a person's input, and this process no longer holds it (FrogBot
    /// restarted, or another process continued the turn).
    #[error(
        "tool {tool}: the call that asked for input is no longer running here (FrogBot restarted, or another process continued the turn); it may or may not have done its work"
    )]
    Gone {
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
                    calls: Arc::default(),
                    suspended: Mutex::default(),
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
        let handler = Listener {
            list_changed: tx,
            calls: self.calls.clone(),
        };
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

/// The client side's handler: passes `tools/list_changed` to the supervisor and a request for
/// input to the call that runs.
#[derive(Debug)]
struct Listener {
    list_changed: mpsc::UnboundedSender<()>,
    calls: Arc<Mutex<Slots>>,
}

fn elicit_result(action: ElicitationAction) -> ElicitResult {
    ElicitResult::new(action)
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.list_changed.send(());
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let target = {
            let calls = self.calls.lock().unwrap();
            match calls.open.len() {
                1 => Ok(calls.open.values().next().cloned()),
                0 => Err("no call of this server is running, so there is nobody to ask".into()),
                n => Err(format!(
                    "{n} calls of this server are running, so FrogBot cannot tell which turn asks"
                )),
            }
        };
        let decline = |reason: &str| {
            tracing::warn!(%reason, "mcp request for input declined");
            Ok(elicit_result(ElicitationAction::Decline))
        };
        let tx = match target {
            Ok(Some(tx)) => tx,
            Ok(None) => return decline("no call is running"),
            Err(reason) => return decline(&reason),
        };
        let (reply, answer) = oneshot::channel();
        if tx.send(Elicitation { request, reply }).is_err() {
            return decline("the call that would ask has ended");
        }
        tokio::select! {
            answer = answer => Ok(answer.unwrap_or_else(|_| elicit_result(ElicitationAction::Cancel))),
            // The server gave up on its request (`notifications/cancelled`).
            () = context.ct.cancelled() => Ok(elicit_result(ElicitationAction::Cancel)),
        }
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.client_info = Implementation::new("frogbot", env!("CARGO_PKG_VERSION"));
        // Form mode: FrogBot asks in the chat. URL mode is not declared (servers do not send it).
        info.capabilities.elicitation =
            Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
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

    /// Runs the call; a request for input from the server is declined (nobody can be asked
    /// here: see [`Tool::call_or_ask`]).
    async fn call(&self, input: Value, ctx: ToolContext) -> Result<Value, BoxError> {
        let span = self.span(&ctx);
        async {
            let step = match self.start(input) {
                Ok(run) => self.drive(run, None).await,
                Err(e) => Err(e),
            };
            match step {
                Ok(ToolStep::Done(v)) => Ok(v),
                Ok(ToolStep::Ask(_)) => {
                    Err("the call asked for input where none can be given".into())
                }
                Err(e) => {
                    tracing::info!(error = %e, "mcp call failed");
                    Err(e.into())
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Runs the call; a request for input from the server suspends it: the question is asked in
    /// the chat and the call continues in [`Tool::resume`].
    async fn call_or_ask(&self, input: Value, ctx: ToolContext) -> Result<ToolStep, BoxError> {
        let span = self.span(&ctx);
        async {
            let step = match self.start(input) {
                Ok(run) => self.drive(run, Some(&ctx)).await,
                Err(e) => Err(e),
            };
            step.map_err(|e| {
                tracing::info!(error = %e, "mcp call failed");
                e.into()
            })
        }
        .instrument(span)
        .await
    }

    /// Answers the server's request with what became of the question (answered → `accept` with
    /// the typed content; declined → `decline`; expired, withdrawn, stopped → `cancel`) and
    /// waits for the call again.
    async fn resume(&self, answer: ToolAnswer, ctx: ToolContext) -> Result<ToolStep, BoxError> {
        let span = self.span(&ctx);
        async {
            let key = (ctx.chat_id.to_string(), ctx.tool_call_id.clone());
            let Some(suspended) = self.server.suspended.lock().unwrap().remove(&key) else {
                tracing::info!("mcp call to continue is gone");
                return Err(CallError::Gone {
                    tool: self.spec.name.clone(),
                }
                .into());
            };
            let Suspended {
                form,
                reply,
                mut run,
            } = suspended;
            let result = match answer {
                ToolAnswer::Answered(output) => match form.content(&output) {
                    Ok(content) => elicit_result(ElicitationAction::Accept).with_content(content),
                    Err(e) => {
                        let reason =
                            format!("the answer did not fit the request ({e}); it was declined");
                        tracing::warn!(%reason, "mcp request for input declined");
                        run.notes.push(reason);
                        elicit_result(ElicitationAction::Decline)
                    }
                },
                ToolAnswer::Declined { reason } => {
                    if let Some(reason) = reason {
                        run.notes.push(reason);
                    }
                    elicit_result(ElicitationAction::Decline)
                }
                ToolAnswer::Cancelled { reason } => {
                    tracing::info!(%reason, "mcp request for input cancelled");
                    elicit_result(ElicitationAction::Cancel)
                }
            };
            tracing::info!(action = ?result.action, "mcp request for input answered");
            if reply.send(result).is_err() {
                tracing::info!("the server no longer waits for the input");
            }
            self.drive(run, Some(&ctx)).await.map_err(|e| {
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

/// What a call's wait ended with.
enum Waited {
    Joined(Result<Result<CallToolResult, ServiceError>, tokio::task::JoinError>),
    Asked(Elicitation),
    TimedOut,
}

impl McpTool {
    fn span(&self, ctx: &ToolContext) -> tracing::Span {
        tracing::info_span!(
            "mcp_call",
            server = %self.server.config.id,
            tool = %self.bare,
            chat_id = %ctx.chat_id,
            tool_call_id = %ctx.tool_call_id,
        )
    }

    /// Sends the call (its request runs in a task).
    fn start(&self, input: Value) -> Result<Running, CallError> {
        let arguments = match input {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            _ => {
                return Err(CallError::Input {
                    tool: self.spec.name.clone(),
                });
            }
        };
        let conn = self
            .server
            .connection()
            .ok_or_else(|| CallError::NotConnected {
                id: self.server.config.id.clone(),
            })?;
        let (tx, asks) = mpsc::unbounded_channel();
        let slot = {
            let mut slots = self.server.calls.lock().unwrap();
            slots.next += 1;
            let slot = slots.next;
            slots.open.insert(slot, tx);
            slot
        };
        let peer = conn.peer.clone();
        let params = CallToolRequestParams::new(self.bare.clone()).with_arguments(arguments);
        // Aborting the task drops the request, which sends `notifications/cancelled` (rmcp's
        // cancel-on-drop guard).
        let task = tokio::spawn(async move { peer.call_tool(params).await }.in_current_span());
        Ok(Running {
            task,
            asks,
            slot,
            slots: self.server.calls.clone(),
            conn,
            notes: Vec::new(),
        })
    }

    /// Waits for the call (at most `timeout_seconds`, counted again after each answer): its
    /// result, or — where `ask` gives the call's context — the server's request for input, which
    /// suspends it. A request that cannot be drawn (or cannot be asked here) is declined.
    async fn drive(
        &self,
        mut run: Running,
        ask: Option<&ToolContext>,
    ) -> Result<ToolStep, CallError> {
        let deadline = tokio::time::Instant::now() + self.server.config.timeout();
        loop {
            let waited = tokio::select! {
                joined = &mut run.task => Waited::Joined(joined),
                Some(e) = run.asks.recv() => Waited::Asked(e),
                () = tokio::time::sleep_until(deadline) => Waited::TimedOut,
            };
            match waited {
                Waited::TimedOut => {
                    // Dropping `run` cancels the request.
                    return Err(CallError::Timeout {
                        tool: self.spec.name.clone(),
                        seconds: self.server.config.timeout_seconds,
                    });
                }
                Waited::Joined(joined) => {
                    let result = joined.map_err(|e| CallError::Tool {
                        tool: self.spec.name.clone(),
                        text: format!("the call failed: {e}"),
                    })?;
                    let output = self.finish(&run.conn, result)?;
                    return Ok(ToolStep::Done(with_notes(output, &run.notes)));
                }
                Waited::Asked(e) => {
                    let form = match &e.request {
                        ElicitRequestParams::FormElicitationParams {
                            message,
                            requested_schema,
                            ..
                        } => Form::new(
                            message,
                            requested_schema,
                            self.server.config.elicitation_expires_seconds,
                        ),
                        _ => Err("the server asked for input at a URL (URL-mode elicitation), which FrogBot does not open".into()),
                    };
                    let refused = match (form, ask) {
                        (Ok(form), Some(ctx)) => {
                            let question = form.question().clone();
                            tracing::info!(
                                fields = question.questions.len(),
                                "mcp call asks for input"
                            );
                            let key = (ctx.chat_id.to_string(), ctx.tool_call_id.clone());
                            self.server.suspended.lock().unwrap().insert(
                                key,
                                Suspended {
                                    form,
                                    reply: e.reply,
                                    run,
                                },
                            );
                            return Ok(ToolStep::Ask(question));
                        }
                        (Ok(_), None) => {
                            "the server asked for input where nobody can be asked".to_owned()
                        }
                        (Err(reason), _) => reason,
                    };
                    tracing::warn!(reason = %refused, "mcp request for input declined");
                    let _ = e.reply.send(elicit_result(ElicitationAction::Decline));
                    run.notes.push(refused);
                }
            }
        }
    }

    /// The output of a finished call, or its error.
    fn finish(
        &self,
        conn: &Conn,
        result: Result<CallToolResult, ServiceError>,
    ) -> Result<Value, CallError> {
        let tool = || self.spec.name.clone();
        let result = match result {
            Err(source) => {
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
            Ok(result) => result,
        };
        let wire = serde_json::to_value(&result).unwrap_or(Value::Null);
        model_output(&wire).map_err(|text| CallError::Tool { tool: tool(), text })
    }
}

/// The output with the requests for input FrogBot declined by itself told after it.
fn with_notes(output: Value, notes: &[String]) -> Value {
    if notes.is_empty() {
        return output;
    }
    let note = format!(
        "(FrogBot declined the server's request for input: {})",
        notes.join("; ")
    );
    match output {
        Value::String(text) => Value::String(format!("{text}\n\n{note}")),
        Value::Object(mut map) => {
            if let Some(Value::Array(content)) = map.get_mut("content") {
                content.push(serde_json::json!({"type": "text", "text": note}));
            } else {
                map.insert("note".into(), Value::String(note));
            }
            Value::Object(map)
        }
        other => serde_json::json!({"result": other, "note": note}),
    }
}
