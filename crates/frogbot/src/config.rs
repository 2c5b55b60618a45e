//! `frogbot.toml`: the keys, defaults and environment overrides of the serve contract.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub use crate::config_error::ConfigError;
use crate::config_error::not_built;

/// The 1-based line of byte `offset` of `text`.
fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// A key path (`channels.slack.mode`, `models[0].provider`) as table keys and array indexes.
fn key_segments(key: &str) -> Vec<Result<&str, usize>> {
    let mut out = Vec::new();
    for part in key.split('.') {
        let mut rest = part;
        let name_end = rest.find('[').unwrap_or(rest.len());
        if name_end > 0 {
            out.push(Ok(&rest[..name_end]));
        }
        rest = &rest[name_end..];
        while let Some(inner) = rest.strip_prefix('[') {
            let Some(end) = inner.find(']') else { break };
            if let Ok(i) = inner[..end].parse() {
                out.push(Err(i));
            }
            rest = &inner[end + 1..];
        }
    }
    out
}

/// The line where `key` is set in the TOML `text`, if it is there.
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    let root = toml::de::DeTable::parse(text).ok()?;
    let mut span = root.span();
    let mut value = toml::de::DeValue::Table(root.into_inner());
    for seg in key_segments(key) {
        let next = match seg {
            Ok(name) => value.get(name),
            Err(i) => value.get(i),
        }?;
        span = next.span();
        let inner = next.get_ref().clone();
        value = inner;
    }
    Some(line_at(text, span.start))
}

fn default_listen() -> String {
    "127.0.0.1:8787".into()
}
fn default_database() -> String {
    "sqlite://frogbot.db".into()
}
fn default_lease() -> u64 {
    60
}
fn default_instructions() -> String {
    "You are a helpful assistant.".into()
}
fn default_max_steps() -> u32 {
    20
}
fn default_history_bytes() -> usize {
    400_000
}
fn default_stream_idle_timeout() -> u64 {
    60
}
fn default_delivery_grace() -> u64 {
    120
}

fn default_dead_job_retention() -> u64 {
    7
}

fn default_step_timeout() -> u64 {
    600
}
fn default_max_event_streams() -> usize {
    512
}
fn default_max_event_streams_per_user() -> usize {
    64
}

fn default_max_retries() -> u32 {
    frogbot_openai::DEFAULT_MAX_RETRIES
}

/// `[[models]]`: one model offered.
///
/// ```toml
/// [[models]]
/// id = "main"                       # what clients send as `model`
/// provider = "openai-compatible"
/// base_url = "https://api.openai.com/v1"
/// model = "gpt-4.1-mini"            # the upstream name (default: id)
/// api_key_env = "OPENAI_API_KEY"
/// reasoning = ["low", "high"]
/// max_retries = 2                   # 0 to 10: tries again after a 408/429/5xx, a refused, reset or
///                                   # timed-out connection, a stream broken before its first event
/// fallback = ["local"]              # ids of [[models]] tried in order once those retries are used up
/// ```
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// What clients send as `model`.
    pub id: String,
    /// `openai-compatible`.
    pub provider: String,
    /// The server's base URL.
    pub base_url: Option<String>,
    /// The upstream model name (defaults to `id`).
    pub model: Option<String>,
    /// The environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// The reasoning options offered.
    #[serde(default)]
    pub reasoning: Vec<String>,
    /// How many times a failed request is tried again, 0 to 10 (default 2): after an HTTP 408,
    /// 429 or 5xx, a connection refused, reset or timed out, or a stream that broke off before
    /// its first event — never once the model's answer started. The wait is the server's
    /// `Retry-After` (one over 60 s is not waited: the request fails at once), else an exponential
    /// backoff with jitter (0.5 s, 1 s, 2 s, … 8 s).
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// Ids of other `[[models]]` that answer a step, in this order, when this model fails before
    /// answering once its retries are used up (each fallback's own fallbacks follow it). The
    /// reply's `metadata.fallback` names the one that answered. A reasoning option a fallback
    /// does not offer is left out of its request.
    #[serde(default)]
    pub fallback: Vec<String>,
}

/// `[[users]]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    /// The user id.
    pub id: String,
    /// The bearer token.
    pub token: String,
}

/// `[[agents]]`: a program that talks to people through FrogBot's agent APIs (agent chats,
/// asks to platform targets, the inbox, agent messages, pins, acknowledgements).
///
/// ```toml
/// [[agents]]
/// id = "deploy-bot"                          # in the same space as user ids
/// token = "a-long-secret"                    # or token_env = "DEPLOY_BOT_TOKEN"
/// targets = ["telegram:*", "slack:C0123", "web"]
/// ```
///
/// `targets`: `platform:*` (anyone and anywhere on that platform), `platform:ID` (that channel,
/// person or thread, and threads inside that channel), `web` (web chats of its own),
/// `web:USER` (web chats for that configured user; `web:*` any user).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The agent's id.
    pub id: String,
    /// The bearer token (or `token_env`).
    pub token: Option<String>,
    /// The environment variable holding the bearer token.
    pub token_env: Option<String>,
    /// Where it may open conversations and ask people.
    #[serde(default)]
    pub targets: Vec<String>,
}

impl AgentConfig {
    /// The token: `token`, else the value of `token_env`.
    pub fn token(&self) -> Result<String, String> {
        match (&self.token, &self.token_env) {
            (Some(t), None) => Ok(t.clone()),
            (None, Some(var)) => match std::env::var(var) {
                Ok(t) if !t.trim().is_empty() => Ok(t),
                _ => Err(format!("the variable {var} is unset or empty")),
            },
            _ => Err("give one of `token` and `token_env`".into()),
        }
    }
}

/// `anonymous`: what callers without a token may do.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AnonymousConfig {
    /// Nothing but the public pages (`/`, `/healthz`, `/readyz`).
    None,
    /// The web chat: ownerless chats shared by every anonymous caller (never the agent APIs).
    Chat,
}

fn default_header_read_timeout() -> u64 {
    30
}
fn default_body_read_timeout() -> u64 {
    60
}
fn default_max_connections() -> usize {
    1024
}

/// `[server]`: the limits of the HTTP server.
///
/// ```toml
/// [server]
/// header_read_timeout_seconds = 30  # a request's header must arrive within this; also how long
///                                   # an idle keep-alive connection stays open
/// body_read_timeout_seconds = 60    # a request's body must arrive within this once its header did
/// max_connections = 1024            # open connections (event streams included); more get 503
/// max_event_streams = 512           # live event streams open at once; more get 429
/// max_event_streams_per_user = 64   # … per caller (anonymous callers: per client address)
/// event_poll_seconds = 1            # how often a watched chat is read for other processes'
///                                   # changes; with PostgreSQL, which pushes them, default 30
/// allowed_origins = []              # other origins whose pages may call the API, e.g.
///                                   # ["https://chat.example.com"]
/// public_url = "https://bot.example.com"  # optional: where people reach this server; an app
///                                   # an agent posts on a platform links to its web view there
/// ```
///
/// Browser rules (see `README.md`'s Security section): a state-changing request (POST, PUT,
/// PATCH, DELETE) to the API with a body must say `Content-Type: application/json` (415
/// `unsupported-media-type`), and one with an `Origin` header must come from the server's own
/// origin (the request's `Host`) or one of `allowed_origins` (403 `forbidden-origin`). A server
/// listening on a loopback address answers only `Host: localhost`, `127.0.0.1`, `[::1]` (any
/// port) and the hosts of `allowed_origins` (421 `misdirected-request`; DNS rebinding).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Seconds a client has to send a request's whole header, counted from when its connection
    /// opened or its previous response ended; so it also closes idle keep-alive connections
    /// (default 30).
    #[serde(default = "default_header_read_timeout")]
    pub header_read_timeout_seconds: u64,
    /// Seconds a client has to send a request's whole body, counted from the end of its header;
    /// later, the request is answered 408 and the connection closed (default 60).
    #[serde(default = "default_body_read_timeout")]
    pub body_read_timeout_seconds: u64,
    /// Connections served at once, long-lived event streams included; one more is answered 503
    /// and closed at once (default 1024). Keep it below the open-file limit, which `frogbot serve`
    /// raises to its hard limit at start.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Live event streams (`GET /api/chats/{id}/events`) open at once, in total; one more gets 429
    /// `too-many-streams` (default 512, so streams leave room for other requests).
    #[serde(default = "default_max_event_streams")]
    pub max_event_streams: usize,
    /// Live event streams open at once per caller (default 64); anonymous callers are counted
    /// per client address.
    #[serde(default = "default_max_event_streams_per_user")]
    pub max_event_streams_per_user: usize,
    /// Seconds between two reads of a watched chat for changes made by other processes (live
    /// event streams). Default: 1 on SQLite; on PostgreSQL, whose changes are pushed at commit
    /// (`LISTEN`/`NOTIFY`), 30, a fallback for notices lost with a connection.
    pub event_poll_seconds: Option<u64>,
    /// Origins (`scheme://host[:port]`) besides the server's own whose web pages may send
    /// state-changing requests to the API; their hosts are also accepted in `Host` by a server
    /// listening on loopback (default none).
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Where people reach this server (`https://bot.example.com`, a path allowed): an app (an
    /// html block) an agent posts on a platform is drawn as a link to its web view,
    /// `{public_url}/apps/{chat}/{message}/{capability}`, which anyone holding the link may open
    /// (the capability is 122 random bits given when the message is posted). Unset: platforms
    /// show the app's name and point to the web chat.
    pub public_url: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            header_read_timeout_seconds: default_header_read_timeout(),
            body_read_timeout_seconds: default_body_read_timeout(),
            max_connections: default_max_connections(),
            max_event_streams: default_max_event_streams(),
            max_event_streams_per_user: default_max_event_streams_per_user(),
            event_poll_seconds: None,
            allowed_origins: Vec::new(),
            public_url: None,
        }
    }
}

fn default_metrics_enabled() -> bool {
    true
}

/// `[metrics]`: `GET /metrics`, the server's metrics in the Prometheus text format.
///
/// ```toml
/// [metrics]
/// enabled = true                    # false: no /metrics route (404), nothing recorded
/// token_env = "FROGBOT_METRICS_TOKEN"  # optional: the variable holding the bearer token a scrape
///                                   # must send (`Authorization: Bearer …`; else 401)
/// ```
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Whether `GET /metrics` is served and the server records metrics (default true).
    #[serde(default = "default_metrics_enabled")]
    pub enabled: bool,
    /// The environment variable holding the bearer token `GET /metrics` requires; without it the
    /// route is open to whoever reaches the listen address. A variable that is unset or empty
    /// stops the start.
    pub token_env: Option<String>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            enabled: default_metrics_enabled(),
            token_env: None,
        }
    }
}

impl MetricsConfig {
    /// The bearer token `GET /metrics` requires, read from `token_env` (`None` without one).
    pub fn token(&self) -> Result<Option<String>, ConfigError> {
        let Some(var) = self.token_env.as_deref().filter(|_| self.enabled) else {
            return Ok(None);
        };
        match std::env::var(var) {
            Ok(t) if !t.trim().is_empty() => Ok(Some(t)),
            _ => Err(ConfigError::key(
                "metrics.token_env",
                format!("the variable {var} is unset or empty"),
            )),
        }
    }
}

/// The whole file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where to listen.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// The database URL.
    #[serde(default = "default_database")]
    pub database: String,
    /// How long a turn of a stopped process blocks its chat.
    #[serde(default = "default_lease")]
    pub turn_lease_seconds: u64,
    /// The agent's instructions.
    #[serde(default = "default_instructions")]
    pub instructions: String,
    /// Model steps per turn.
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
    /// The most of a chat's earlier conversation sent to the model, in bytes of text: the oldest
    /// turns are left out first (instructions and the turn in progress always go).
    #[serde(default = "default_history_bytes")]
    pub history_bytes: usize,
    /// How long a model's stream may send nothing before the step is aborted and the turn fails
    /// visibly (`model-timeout`), keeping what it produced.
    #[serde(default = "default_stream_idle_timeout")]
    pub stream_idle_timeout_seconds: u64,
    /// How long one model step may take in all.
    #[serde(default = "default_step_timeout")]
    pub step_timeout_seconds: u64,
    /// How long a channel reply's delivery is left to the process whose turn wrote it (it retries
    /// failed posts for half of it) before any process's worker takes it over.
    #[serde(default = "default_delivery_grace")]
    pub delivery_grace_seconds: u64,
    /// How long a dead job (a reply or update given up on) is kept for operators.
    #[serde(default = "default_dead_job_retention")]
    pub dead_job_retention_days: u64,
    /// The default model id.
    pub default_model: Option<String>,
    /// Models offered.
    #[serde(default)]
    pub models: Vec<ModelConfig>,
    /// Users and their tokens.
    #[serde(default)]
    pub users: Vec<UserConfig>,
    /// Agents, their tokens and targets.
    #[serde(default)]
    pub agents: Vec<AgentConfig>,
    /// What anonymous callers may do: `"chat"` or `"none"`. Default: `"chat"` when no user and
    /// no agent is configured (the embedded default), else `"none"`.
    pub anonymous: Option<AnonymousConfig>,
    /// The HTTP server's timeouts and connection limit.
    #[serde(default)]
    pub server: ServerConfig,
    /// `GET /metrics` (on by default) and its bearer token.
    #[serde(default)]
    pub metrics: MetricsConfig,
    /// One table per channel adapter.
    #[serde(default)]
    pub channels: BTreeMap<String, toml::Value>,
    /// `[telemetry]`: trace export over OTLP (feature `otlp`); absent: none.
    pub telemetry: Option<crate::telemetry::TelemetryConfig>,
    /// The built-in tools offered to the model besides `question`.
    #[serde(default)]
    pub tools: ToolsConfig,
    /// Model Context Protocol servers whose tools the agent gets (`[[mcp]]`).
    #[serde(default)]
    pub mcp: Vec<McpServerConfig>,
    /// `[files]`: what files people may send and how much of one the model reads.
    #[serde(default)]
    pub files: FilesConfig,
}

/// `[files]`: the limits files are checked against (uploads to the web chat and the API, files
/// posted on the platforms) and what the model is shown of them.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesConfig {
    /// The largest file, in bytes (20 MiB).
    #[serde(default = "default_file_max_bytes")]
    pub max_bytes: u64,
    /// The most files one message carries (10).
    #[serde(default = "default_files_per_message")]
    pub max_per_message: usize,
    /// The media types accepted: exact (`application/pdf`) or a whole type (`image/*`);
    /// `["*/*"]` (the default) accepts any.
    #[serde(default = "default_media_types")]
    pub media_types: Vec<String>,
    /// Whether the models read images (sent to them as image parts); off: an image is named.
    #[serde(default = "yes")]
    pub images_to_model: bool,
    /// How much of a text file the model reads, in bytes (100 000).
    #[serde(default = "default_model_text_bytes")]
    pub model_text_bytes: usize,
}

impl Default for FilesConfig {
    fn default() -> Self {
        Self {
            max_bytes: default_file_max_bytes(),
            max_per_message: default_files_per_message(),
            media_types: default_media_types(),
            images_to_model: true,
            model_text_bytes: default_model_text_bytes(),
        }
    }
}

impl FilesConfig {
    /// The engine's limits.
    pub fn limits(&self) -> frogbot_core::agent::FileLimits {
        frogbot_core::agent::FileLimits {
            max_bytes: self.max_bytes,
            max_per_message: self.max_per_message,
            media_types: self.media_types.clone(),
            images_to_model: self.images_to_model,
            model_text_bytes: self.model_text_bytes,
            ..frogbot_core::agent::FileLimits::default()
        }
    }
}

fn default_file_max_bytes() -> u64 {
    20 * 1024 * 1024
}
fn default_files_per_message() -> usize {
    10
}
fn default_media_types() -> Vec<String> {
    vec!["*/*".into()]
}
fn default_model_text_bytes() -> usize {
    100_000
}

/// One `[[mcp]]` server: `frogbot_mcp`'s configuration.
#[cfg(feature = "mcp")]
pub type McpServerConfig = frogbot_mcp::ServerConfig;
/// One `[[mcp]]` server, as written: this build has no MCP client (feature `mcp`), so
/// [`Config::validate`] refuses any.
#[cfg(not(feature = "mcp"))]
pub type McpServerConfig = toml::Table;

/// `[tools]`: the built-in tools, each of which can be turned off.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// `send_message`, `edit_message` and `set_status`: messages with titles and blocks, edited
    /// in place, and the chat's status pin (on by default).
    #[serde(default = "yes")]
    pub messages: bool,
    /// `fetch_url`: an HTTP GET of a public page (on by default).
    #[serde(default = "yes")]
    pub fetch_url: bool,
    /// The most bytes of a body `fetch_url` returns.
    #[serde(default = "default_fetch_max_bytes")]
    pub fetch_max_bytes: usize,
    /// How long one `fetch_url` call may take.
    #[serde(default = "default_fetch_timeout")]
    pub fetch_timeout_seconds: u64,
    /// Whether `fetch_url` may reach private addresses (loopback, LAN, link-local: cloud metadata
    /// endpoints among them; the whole list is `frogbot_net::is_forbidden`'s). Off by default.
    #[serde(default)]
    pub fetch_private: bool,
    /// The most `fetch_url` calls in one turn (one reply of the agent): the next ones are
    /// refused with an error result the model reads, and a new turn starts again from none.
    /// 10 by default; 1 to 1000.
    #[serde(default = "default_fetch_url_max_per_turn")]
    pub fetch_url_max_per_turn: usize,
    /// An http(s) proxy every `fetch_url` request goes through (`http://proxy.internal:3128`).
    /// Unset by default: no proxy at all, whatever `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` say.
    /// With one, the target's name is still resolved and checked here first (the proxy resolves
    /// it again).
    pub fetch_proxy: Option<String>,
}

fn default_fetch_url_max_per_turn() -> usize {
    10
}

fn default_fetch_max_bytes() -> usize {
    200_000
}

fn default_fetch_timeout() -> u64 {
    20
}

impl Default for ToolsConfig {
    fn default() -> Self {
        toml::from_str("").expect("every key has a default")
    }
}

fn yes() -> bool {
    true
}

impl Default for Config {
    fn default() -> Self {
        toml::from_str("").expect("every key has a default")
    }
}

impl Config {
    /// What anonymous callers may do: `anonymous`, else `chat` when no user and no agent is
    /// configured, else nothing.
    pub fn anonymous_access(&self) -> frogbot_core::policy::AnonymousAccess {
        use frogbot_core::policy::AnonymousAccess;
        match self.anonymous {
            Some(AnonymousConfig::Chat) => AnonymousAccess::Chat,
            Some(AnonymousConfig::None) => AnonymousAccess::None,
            None if self.users.is_empty() && self.agents.is_empty() => AnonymousAccess::Chat,
            None => AnonymousAccess::None,
        }
    }

    /// Reads the configuration: `--config PATH`, else `$FROGBOT_CONFIG`, else `./frogbot.toml` when
    /// it exists, else defaults; then `FROGBOT_LISTEN` and `FROGBOT_DATABASE` override.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_with(path, true)
    }

    /// [`Config::load`] for an operator command (`frogbot jobs`, `chats`, …) that serves no
    /// channel and calls no model: the variables holding channel secrets and model API keys need
    /// not be set.
    pub fn load_for_ops(path: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_with(path, false)
    }

    fn load_with(path: Option<&Path>, secrets: bool) -> Result<Self, ConfigError> {
        let path: Option<PathBuf> = path
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("FROGBOT_CONFIG").map(PathBuf::from))
            .or_else(|| {
                let p = PathBuf::from("frogbot.toml");
                p.exists().then_some(p)
            });
        let (mut config, text) = match &path {
            Some(p) => {
                let in_file = |mut e: ConfigError| {
                    e.file = Some(p.clone());
                    e
                };
                let text = std::fs::read_to_string(p).map_err(|e| in_file(ConfigError::new(e)))?;
                (Self::parse(&text).map_err(in_file)?, text)
            }
            None => (Self::default(), String::new()),
        };
        let mut from_env = Vec::new();
        if let Ok(v) = std::env::var("FROGBOT_LISTEN") {
            config.listen = v;
            from_env.push(("listen", "FROGBOT_LISTEN"));
        }
        if let Ok(v) = std::env::var("FROGBOT_DATABASE") {
            config.database = v;
            from_env.push(("database", "FROGBOT_DATABASE"));
        }
        config.validate_with(secrets).map_err(|mut e| {
            let key = e.key.as_deref().unwrap_or_default();
            if let Some((_, var)) = from_env.iter().find(|(k, _)| *k == key) {
                e.env = Some(var);
            } else if let Some(p) = &path {
                e.line = line_of_key(&text, key);
                e.file = Some(p.clone());
            }
            e
        })?;
        Ok(config)
    }

    /// Parses TOML text (without environment overrides or validation). Errors name the key and
    /// the line.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let de = toml::Deserializer::parse(text).map_err(|e| ConfigError {
            line: e.span().map(|s| line_at(text, s.start)),
            ..ConfigError::new(e.message())
        })?;
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.inner();
            ConfigError {
                key: (path != ".").then_some(path),
                line: inner.span().map(|s| line_at(text, s.start)),
                ..ConfigError::new(inner.message())
            }
        })
    }

    /// Checks every key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_with(true)
    }

    /// Checks every key; without `secrets`, not whether the variables naming channel secrets and
    /// model API keys are set.
    #[allow(clippy::too_many_lines)]
    fn validate_with(&self, secrets: bool) -> Result<(), ConfigError> {
        let bad = |key: &str, what: String| Err(ConfigError::key(key, what));
        if self.listen.parse::<SocketAddr>().is_err() {
            return bad(
                "listen",
                format!("{:?} is not an address like 127.0.0.1:8787", self.listen),
            );
        }
        if !(self.database.starts_with("sqlite:")
            || self.database.starts_with("postgres://")
            || self.database.starts_with("postgresql://"))
        {
            return bad(
                "database",
                format!(
                    "{:?} is not sqlite://PATH or postgres://…",
                    crate::redact(&self.database)
                ),
            );
        }
        if !cfg!(feature = "postgres") && self.database.starts_with("postgres") {
            return bad("database", not_built("postgres"));
        }
        if self.turn_lease_seconds == 0 {
            return bad("turn_lease_seconds", "must be at least 1".into());
        }
        if !(1..=3_600).contains(&self.stream_idle_timeout_seconds) {
            return bad(
                "stream_idle_timeout_seconds",
                "must be from 1 to 3600".into(),
            );
        }
        if !(1..=86_400).contains(&self.step_timeout_seconds) {
            return bad("step_timeout_seconds", "must be from 1 to 86400".into());
        }
        if !(2..=3_600).contains(&self.delivery_grace_seconds) {
            return bad("delivery_grace_seconds", "must be from 2 to 3600".into());
        }
        if !(1..=3_650).contains(&self.dead_job_retention_days) {
            return bad("dead_job_retention_days", "must be from 1 to 3650".into());
        }
        if self.history_bytes < 1_000 {
            return bad("history_bytes", "must be at least 1000".into());
        }
        if self.max_steps == 0 {
            return bad("max_steps", "must be at least 1".into());
        }
        if !(1..=2_000_000_000).contains(&self.files.max_bytes) {
            return bad("files.max_bytes", "must be from 1 to 2000000000".into());
        }
        if !(1..=100).contains(&self.files.max_per_message) {
            return bad("files.max_per_message", "must be from 1 to 100".into());
        }
        let media = frogbot_core::agent::files::media_type;
        if let Some(t) = self
            .files
            .media_types
            .iter()
            .find(|t| match t.strip_suffix("/*") {
                Some("*") => false,
                Some(kind) => media(&format!("{kind}/x")).is_none(),
                None => media(t).is_none(),
            })
        {
            return bad(
                "files.media_types",
                format!("{t:?} is not a media type: write `image/png`, `image/*` or `*/*`"),
            );
        }
        if !(1..=50_000_000).contains(&self.tools.fetch_max_bytes) {
            return bad("tools.fetch_max_bytes", "must be from 1 to 50000000".into());
        }
        if !(1..=600).contains(&self.tools.fetch_timeout_seconds) {
            return bad(
                "tools.fetch_timeout_seconds",
                "must be from 1 to 600".into(),
            );
        }
        if !(1..=1_000).contains(&self.tools.fetch_url_max_per_turn) {
            return bad(
                "tools.fetch_url_max_per_turn",
                "must be from 1 to 1000".into(),
            );
        }
        if let Some(proxy) = &self.tools.fetch_proxy {
            match url::Url::parse(proxy) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                Ok(_) => return bad("tools.fetch_proxy", "must be an http(s) URL".into()),
                Err(e) => return bad("tools.fetch_proxy", format!("not a URL: {e}")),
            }
        }
        self.validate_mcp()?;
        for (key, value) in [
            (
                "server.header_read_timeout_seconds",
                self.server.header_read_timeout_seconds,
            ),
            (
                "server.body_read_timeout_seconds",
                self.server.body_read_timeout_seconds,
            ),
            ("server.max_connections", self.server.max_connections as u64),
            (
                "server.max_event_streams",
                self.server.max_event_streams as u64,
            ),
            (
                "server.max_event_streams_per_user",
                self.server.max_event_streams_per_user as u64,
            ),
            (
                "server.event_poll_seconds",
                self.server.event_poll_seconds.unwrap_or(1),
            ),
        ] {
            if value == 0 {
                return bad(key, "must be at least 1".into());
            }
        }
        for (i, origin) in self.server.allowed_origins.iter().enumerate() {
            if crate::browser::parse_origin(origin).is_none() {
                return bad(
                    &format!("server.allowed_origins[{i}]"),
                    format!("{origin:?} is not an origin: use scheme://host[:port]"),
                );
            }
        }
        if let Some(url) = &self.server.public_url {
            let base = url.trim_end_matches('/');
            let origin_end = base
                .find("://")
                .map(|i| base[i + 3..].find('/').map_or(base.len(), |j| i + 3 + j));
            let ok = origin_end.is_some_and(|end| {
                crate::browser::parse_origin(&base[..end]).is_some()
                    && !base.contains(['?', '#', ' ', '"', '<', '>', '\''])
            });
            if !ok {
                return bad(
                    "server.public_url",
                    format!("{url:?} is not an http(s) address: use https://host[:port][/path]"),
                );
            }
        }
        let mut ids = std::collections::HashSet::new();
        for (i, m) in self.models.iter().enumerate() {
            let key = format!("models[{i}]");
            if m.id.trim().is_empty() {
                return bad(&format!("{key}.id"), "is empty".into());
            }
            if !ids.insert(m.id.as_str()) {
                return bad(&format!("{key}.id"), format!("{:?} is used twice", m.id));
            }
            if m.provider != "openai-compatible" {
                return bad(
                    &format!("{key}.provider"),
                    format!(
                        "{:?} is not a provider (use \"openai-compatible\")",
                        m.provider
                    ),
                );
            }
            if let Some(var) = &m.api_key_env
                && secrets
                && std::env::var(var).is_err()
            {
                return bad(
                    &format!("{key}.api_key_env"),
                    format!("the variable {var} is not set"),
                );
            }
            if let Some(url) = &m.base_url
                && !(url.starts_with("http://") || url.starts_with("https://"))
            {
                return bad(
                    &format!("{key}.base_url"),
                    format!("{:?} is not an http(s) URL", crate::redact(url)),
                );
            }
            if m.max_retries > frogbot_openai::MAX_RETRIES {
                return bad(
                    &format!("{key}.max_retries"),
                    format!("must be from 0 to {}", frogbot_openai::MAX_RETRIES),
                );
            }
        }
        self.validate_fallbacks()?;
        if let Some(d) = &self.default_model {
            let offered = if self.models.is_empty() {
                d == "demo"
            } else {
                ids.contains(d.as_str())
            };
            if !offered {
                return bad(
                    "default_model",
                    format!("{d:?} is not the id of one of [[models]]"),
                );
            }
        }
        let mut users = std::collections::HashSet::new();
        let mut tokens: std::collections::HashSet<String> = std::collections::HashSet::new();
        for (i, u) in self.users.iter().enumerate() {
            if u.id.trim().is_empty() {
                return bad(&format!("users[{i}].id"), "is empty".into());
            }
            if !users.insert(u.id.as_str()) {
                return bad(
                    &format!("users[{i}].id"),
                    format!("{:?} is used twice", u.id),
                );
            }
            if u.token.len() < 8 {
                return bad(
                    &format!("users[{i}].token"),
                    "must be at least 8 characters".into(),
                );
            }
            if !tokens.insert(u.token.clone()) {
                return bad(
                    &format!("users[{i}].token"),
                    "is used by another user".into(),
                );
            }
        }
        for (i, a) in self.agents.iter().enumerate() {
            if a.id.trim().is_empty() {
                return bad(&format!("agents[{i}].id"), "is empty".into());
            }
            if !users.insert(a.id.as_str()) {
                return bad(
                    &format!("agents[{i}].id"),
                    format!(
                        "{:?} is used twice (user and agent ids share one space)",
                        a.id
                    ),
                );
            }
            let token = a
                .token()
                .map_err(|e| ConfigError::key(format!("agents[{i}].token"), e))?;
            if token.len() < 8 {
                return bad(
                    &format!("agents[{i}].token"),
                    "must be at least 8 characters".into(),
                );
            }
            if !tokens.insert(token) {
                return bad(
                    &format!("agents[{i}].token"),
                    "is used by another user or agent".into(),
                );
            }
            if let Err(e) = frogbot_core::policy::Targets::parse(a.targets.iter().cloned()) {
                return bad(&format!("agents[{i}].targets"), e.to_string());
            }
        }
        for (name, value) in &self.channels {
            if secrets {
                crate::channels::validate(name, value)?;
            }
            let crate::channels::ChannelSettings {
                model, reasoning, ..
            } = crate::channels::settings(name, value)?;
            let model_id = model.clone().unwrap_or_else(|| self.default_model_id());
            if let Some(m) = &model {
                let offered = if self.models.is_empty() {
                    m == "demo"
                } else {
                    ids.contains(m.as_str())
                };
                if !offered {
                    return bad(
                        &format!("channels.{name}.model"),
                        format!("{m:?} is not the id of one of [[models]]"),
                    );
                }
            }
            if let Some(r) = &reasoning {
                let options = self
                    .models
                    .iter()
                    .find(|m| m.id == model_id)
                    .map(|m| m.reasoning.clone())
                    .unwrap_or_default();
                if !options.contains(r) {
                    return bad(
                        &format!("channels.{name}.reasoning"),
                        format!("{r:?} is not a reasoning option of model {model_id:?}"),
                    );
                }
            }
        }
        self.metrics.token()?;
        crate::telemetry::validate(self.telemetry.as_ref(), cfg!(feature = "otlp"))?;
        Ok(())
    }

    /// `[[mcp]]` and each channel's `mcp = […]` selection.
    fn validate_mcp(&self) -> Result<(), ConfigError> {
        let ids = self.validate_mcp_servers()?;
        for name in self.channels.keys() {
            let Some(selection) = crate::channels::mcp_selection(name, &self.channels[name])?
            else {
                continue;
            };
            for id in selection {
                if !ids.contains(&id.as_str()) {
                    return Err(ConfigError::key(
                        format!("channels.{name}.mcp"),
                        format!("{id:?} is no [[mcp]] server's id"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks each `[[mcp]]` server and the set of them; their ids.
    #[cfg(feature = "mcp")]
    fn validate_mcp_servers(&self) -> Result<Vec<&str>, ConfigError> {
        for (i, server) in self.mcp.iter().enumerate() {
            if let Err(e) = server.validate() {
                return Err(ConfigError::key(format!("mcp[{i}].{}", e.key()), e));
            }
        }
        if let Err(e) = frogbot_mcp::validate_all(&self.mcp) {
            return Err(ConfigError::key(format!("mcp.{}", e.key()), e));
        }
        Ok(self.mcp.iter().map(|m| m.id.as_str()).collect())
    }

    /// Without the `mcp` feature, any `[[mcp]]` server is refused.
    #[cfg(not(feature = "mcp"))]
    fn validate_mcp_servers(&self) -> Result<Vec<&str>, ConfigError> {
        if self.mcp.is_empty() {
            Ok(Vec::new())
        } else {
            Err(ConfigError::key("mcp", not_built("mcp")))
        }
    }

    /// Checks every `[[models]].fallback`: ids of other models, each once, without a cycle.
    fn validate_fallbacks(&self) -> Result<(), ConfigError> {
        let index: std::collections::HashMap<&str, usize> = self
            .models
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id.as_str(), i))
            .collect();
        for (i, m) in self.models.iter().enumerate() {
            let key = format!("models[{i}].fallback");
            let mut seen = std::collections::HashSet::new();
            for f in &m.fallback {
                if *f == m.id {
                    return Err(ConfigError::key(key, format!("{f:?} is this model itself")));
                }
                if !index.contains_key(f.as_str()) {
                    return Err(ConfigError::key(
                        key,
                        format!("{f:?} is not the id of one of [[models]]"),
                    ));
                }
                if !seen.insert(f.as_str()) {
                    return Err(ConfigError::key(key, format!("{f:?} is listed twice")));
                }
            }
        }
        // A cycle (a → b → a) would hand a failing step around forever: depth-first search, with
        // the path so far to name it.
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            OnPath,
            Done,
        }
        fn visit<'a>(
            models: &'a [ModelConfig],
            index: &std::collections::HashMap<&str, usize>,
            marks: &mut [Mark],
            path: &mut Vec<&'a str>,
            at: usize,
        ) -> Result<(), Vec<&'a str>> {
            marks[at] = Mark::OnPath;
            path.push(&models[at].id);
            for f in &models[at].fallback {
                let next = index[f.as_str()];
                match marks[next] {
                    Mark::OnPath => {
                        let start = path.iter().position(|id| *id == f).unwrap_or(0);
                        let mut cycle = path[start..].to_vec();
                        cycle.push(f);
                        return Err(cycle);
                    }
                    Mark::New => visit(models, index, marks, path, next)?,
                    Mark::Done => {}
                }
            }
            path.pop();
            marks[at] = Mark::Done;
            Ok(())
        }
        let mut marks = vec![Mark::New; self.models.len()];
        for start in 0..self.models.len() {
            if marks[start] == Mark::New
                && let Err(cycle) = visit(&self.models, &index, &mut marks, &mut Vec::new(), start)
            {
                let at = index[cycle[0]];
                return Err(ConfigError::key(
                    format!("models[{at}].fallback"),
                    format!("the fallbacks go round in a cycle: {}", cycle.join(" → ")),
                ));
            }
        }
        Ok(())
    }

    /// The models that answer for `id` when it fails, in the order they are tried: its
    /// `fallback` list, each one followed by its own fallbacks (depth first), each model once,
    /// never `id` itself. Empty for an unknown id. Assumes a validated configuration (no cycle).
    pub fn fallback_chain(&self, id: &str) -> Vec<&ModelConfig> {
        fn walk<'a>(config: &'a Config, id: &str, root: &str, out: &mut Vec<&'a ModelConfig>) {
            let Some(model) = config.models.iter().find(|m| m.id == id) else {
                return;
            };
            for f in &model.fallback {
                if f == root || out.iter().any(|m| m.id == *f) {
                    continue;
                }
                if let Some(fm) = config.models.iter().find(|m| m.id == *f) {
                    out.push(fm);
                    walk(config, &fm.id, root, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(self, id, id, &mut out);
        out
    }

    /// The default model id: the configured one, the first of `[[models]]`, or `demo`.
    pub fn default_model_id(&self) -> String {
        self.default_model
            .clone()
            .or_else(|| self.models.first().map(|m| m.id.clone()))
            .unwrap_or_else(|| "demo".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `postgres://` database and `[[mcp]]` servers are taken in a build with their features
    /// and refused in one without, in a line naming the feature (`.ci/run` runs these unit tests
    /// in the web-only build too).
    #[test]
    fn public_url_is_an_http_address() {
        for ok in [
            "https://bot.example.com",
            "https://bot.example.com/",
            "http://127.0.0.1:8787/frogbot",
        ] {
            let c = Config::parse(&format!("[server]\npublic_url = \"{ok}\"")).unwrap();
            assert!(c.validate().is_ok(), "{ok}");
        }
        for bad in [
            "bot.example.com",
            "ftp://bot.example.com",
            "https://bot.example.com/?x=1",
            "https://",
        ] {
            let e = Config::parse(&format!("[server]\npublic_url = \"{bad}\""))
                .unwrap()
                .validate()
                .unwrap_err()
                .to_string();
            assert!(e.contains("server.public_url"), "{bad}: {e}");
        }
    }

    #[test]
    fn allowed_origins_must_be_origins() {
        let ok = Config::parse(
            "[server]\nallowed_origins = [\"https://chat.example.com\", \"http://127.0.0.1:8787\"]",
        )
        .unwrap();
        assert!(ok.validate().is_ok());
        assert_eq!(ok.server.allowed_origins.len(), 2);
        for bad in [
            "chat.example.com",
            "https://chat.example.com/path",
            "null",
            "*",
        ] {
            let e = Config::parse(&format!("[server]\nallowed_origins = [\"{bad}\"]"))
                .unwrap()
                .validate()
                .unwrap_err()
                .to_string();
            assert!(e.contains("server.allowed_origins[0]"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_database_or_mcp_server_of_a_feature_left_out_is_refused() {
        let pg = Config::parse("database = \"postgres://u:secret@db.internal/frogbot\"")
            .unwrap()
            .validate();
        let mcp = Config::parse("[[mcp]]\nid = \"files\"\ncommand = \"mcp-files\"\n")
            .unwrap()
            .validate();
        for (feature, built, result) in [
            ("postgres", cfg!(feature = "postgres"), pg),
            ("mcp", cfg!(feature = "mcp"), mcp),
        ] {
            if built {
                assert!(result.is_ok(), "{feature}: {result:?}");
            } else {
                let e = result.unwrap_err().to_string();
                assert!(e.contains(&format!("--features {feature}")), "{e}");
                assert!(!e.contains("secret"), "{e}");
            }
        }
        let e = Config::parse("[channels.slack]\nmcp = [\"files\"]\n")
            .unwrap()
            .validate_mcp()
            .unwrap_err()
            .to_string();
        assert!(e.contains("`channels.slack.mcp`"), "{e}");
    }

    #[cfg(feature = "mcp")]
    #[test]
    fn mcp_servers_and_channel_selections_are_checked() {
        let ok = Config::parse(
            "[[mcp]]\nid = \"files\"\ncommand = \"mcp-files\"\n\
             [channels.slack]\nmode = \"http\"\nmcp = [\"files\"]\n",
        )
        .unwrap();
        assert_eq!(ok.mcp.len(), 1);
        let e = |text: &str| {
            Config::parse(text)
                .unwrap()
                .validate_mcp()
                .unwrap_err()
                .to_string()
        };
        let both = e("[[mcp]]\nid = \"x\"\ncommand = \"a\"\nurl = \"http://h/mcp\"\n");
        assert!(both.contains("`mcp[0].command`"), "{both}");
        let twice =
            e("[[mcp]]\nid = \"x\"\ncommand = \"a\"\n[[mcp]]\nid = \"x\"\ncommand = \"b\"\n");
        assert!(twice.contains("used by two servers"), "{twice}");
        let approval = e(
            "[[mcp]]\nid = \"gh\"\nurl = \"http://h/mcp\"\n[mcp.approval]\nmerge = \"sometimes\"\n",
        );
        assert!(approval.contains("`mcp[0].approval`"), "{approval}");
        let expires =
            e("[[mcp]]\nid = \"gh\"\nurl = \"http://h/mcp\"\napproval_expires_seconds = 0\n");
        assert!(
            expires.contains("`mcp[0].approval_expires_seconds`"),
            "{expires}"
        );
        let unknown =
            e("[[mcp]]\nid = \"files\"\ncommand = \"a\"\n[channels.slack]\nmcp = [\"nope\"]\n");
        assert!(
            unknown.contains("`channels.slack.mcp`") && unknown.contains("nope"),
            "{unknown}"
        );
        let bad = e("[channels.slack]\nmcp = \"files\"\n");
        assert!(bad.contains("`channels.slack.mcp`"), "{bad}");
    }

    #[test]
    fn the_message_tools_are_on_unless_turned_off() {
        assert!(Config::parse("").unwrap().tools.messages);
        assert!(
            !Config::parse("[tools]\nmessages = false")
                .unwrap()
                .tools
                .messages
        );
        let e = Config::parse("[tools]\nfetch = true")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `fetch`"), "{e}");
    }

    #[test]
    fn fetch_url_cap_and_proxy_are_checked() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.tools.fetch_url_max_per_turn, 10);
        assert!(c.tools.fetch_proxy.is_none());
        let ok = Config::parse(
            "[tools]\nfetch_url_max_per_turn = 3\nfetch_proxy = \"http://127.0.0.1:3128\"",
        )
        .unwrap();
        ok.validate().unwrap();
        assert_eq!(ok.tools.fetch_url_max_per_turn, 3);
        for (text, key) in [
            ("fetch_url_max_per_turn = 0", "tools.fetch_url_max_per_turn"),
            (
                "fetch_proxy = \"socks5://127.0.0.1:1080\"",
                "tools.fetch_proxy",
            ),
            ("fetch_proxy = \"not a url\"", "tools.fetch_proxy"),
        ] {
            let e = Config::parse(&format!("[tools]\n{text}"))
                .unwrap()
                .validate()
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }

    #[test]
    fn empty_file_takes_every_default() {
        let c = Config::parse("").unwrap();
        c.validate().unwrap();
        assert_eq!(c.listen, "127.0.0.1:8787");
        assert_eq!(c.database, "sqlite://frogbot.db");
        assert_eq!(c.turn_lease_seconds, 60);
        assert_eq!(c.max_steps, 20);
        assert_eq!(c.default_model_id(), "demo");
    }

    #[test]
    fn agents_and_anonymous_access() {
        use frogbot_core::policy::AnonymousAccess;
        let ok = Config::parse(
            "[[users]]\nid = \"alice\"\ntoken = \"alice-secret\"\n\n\
             [[agents]]\nid = \"bot\"\ntoken = \"bot-secret-1\"\ntargets = [\"telegram:*\", \"slack:C1\", \"web:alice\"]\n",
        )
        .unwrap();
        ok.validate().unwrap();
        // Users or agents configured: anonymous callers get nothing unless told otherwise.
        assert_eq!(ok.anonymous_access(), AnonymousAccess::None);
        assert_eq!(
            Config::parse("").unwrap().anonymous_access(),
            AnonymousAccess::Chat
        );
        let open = Config::parse(
            "anonymous = \"chat\"\n[[users]]\nid = \"alice\"\ntoken = \"alice-secret\"\n",
        )
        .unwrap();
        assert_eq!(open.anonymous_access(), AnonymousAccess::Chat);
        assert!(Config::parse("anonymous = \"everything\"").is_err());
        let refused = |text: &str, key: &str| {
            let e = Config::parse(text)
                .unwrap()
                .validate()
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{e}");
        };
        refused(
            "[[agents]]\nid = \"bot\"\ntoken = \"bot-secret-1\"\ntargets = [\"telegram\"]\n",
            "agents[0].targets",
        );
        refused(
            "[[users]]\nid = \"bot\"\ntoken = \"user-secret\"\n[[agents]]\nid = \"bot\"\ntoken = \"bot-secret-1\"\n",
            "agents[0].id",
        );
        refused(
            "[[users]]\nid = \"u\"\ntoken = \"same-secret\"\n[[agents]]\nid = \"bot\"\ntoken = \"same-secret\"\n",
            "agents[0].token",
        );
        refused(
            "[[agents]]\nid = \"bot\"\ntoken_env = \"FROGBOT_TEST_SURELY_UNSET_AGENT\"\n",
            "agents[0].token",
        );
        refused(
            "[[agents]]\nid = \"bot\"\ntoken = \"short\"\n",
            "agents[0].token",
        );
    }

    #[test]
    fn bad_keys_are_named() {
        let e = Config::parse("listen = 5").unwrap_err().to_string();
        assert!(e.contains("listen") || e.contains("invalid type"), "{e}");
        let e = Config::parse("lisen = \"x\"").unwrap_err().to_string();
        assert!(e.contains("lisen"), "{e}");
        let c = Config::parse("max_steps = 0").unwrap();
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("`max_steps`")
        );
        let c = Config::parse(
            "default_model = \"x\"\n[[models]]\nid = \"main\"\nprovider = \"openai-compatible\"",
        )
        .unwrap();
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("`default_model`")
        );
        let c = Config::parse("[[models]]\nid = \"main\"\nprovider = \"magic\"").unwrap();
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("models[0].provider")
        );
        let c = Config::parse("database = \"mysql://x\"").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("`database`"));
    }

    #[cfg(feature = "matrix")] // Its tables are [channels.matrix].
    #[test]
    fn a_channels_model_and_reasoning_are_checked_against_the_offers() {
        // PATH is set in every environment: it stands in for the password variable.
        let base = "[[models]]\nid = \"main\"\nprovider = \"openai-compatible\"\nreasoning = [\"low\"]\n\
                    [[models]]\nid = \"small\"\nprovider = \"openai-compatible\"\n\
                    [channels.matrix]\nhomeserver = \"https://matrix.example.org\"\n\
                    user_id = \"@frogbot:example.org\"\npassword_env = \"PATH\"\n\
                    store_path = \"/tmp/frogbot-config-test\"\n";
        let ok = Config::parse(&format!("{base}model = \"small\"\n")).unwrap();
        ok.validate().unwrap();
        let settings = crate::channels::settings("matrix", &ok.channels["matrix"]).unwrap();
        assert_eq!(settings.model.as_deref(), Some("small"));
        assert!(settings.acks, "reactions by default");
        let off = Config::parse(&format!("{base}acks = \"none\"\n")).unwrap();
        off.validate().unwrap();
        assert!(
            !crate::channels::settings("matrix", &off.channels["matrix"])
                .unwrap()
                .acks
        );
        let e = Config::parse(&format!("{base}acks = \"emoji\"\n"))
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("`channels.matrix.acks`"), "{e}");
        let e = Config::parse(&format!("{base}model = \"big\"\n"))
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("`channels.matrix.model`"), "{e}");
        // The default model's reasoning options, or the chosen model's.
        Config::parse(&format!("{base}reasoning = \"low\"\n"))
            .unwrap()
            .validate()
            .unwrap();
        let e = Config::parse(&format!("{base}model = \"small\"\nreasoning = \"low\"\n"))
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("`channels.matrix.reasoning`"), "{e}");
        let e = Config::parse(&format!("{base}model = 3\n"))
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("`channels.matrix.model`"), "{e}");
    }

    #[test]
    fn the_model_timeouts_are_read_and_checked() {
        let c = Config::parse("").unwrap();
        assert_eq!(
            (c.stream_idle_timeout_seconds, c.step_timeout_seconds),
            (60, 600)
        );
        let c =
            Config::parse("stream_idle_timeout_seconds = 5\nstep_timeout_seconds = 30").unwrap();
        c.validate().unwrap();
        assert_eq!(
            (c.stream_idle_timeout_seconds, c.step_timeout_seconds),
            (5, 30)
        );
        for (bad, key) in [
            (
                "stream_idle_timeout_seconds = 0",
                "stream_idle_timeout_seconds",
            ),
            ("step_timeout_seconds = 0", "step_timeout_seconds"),
        ] {
            let e = Config::parse(bad).unwrap().validate().unwrap_err();
            assert!(e.to_string().contains(&format!("`{key}`")), "{e}");
        }
    }

    #[test]
    fn the_history_budget_is_read_and_checked() {
        assert_eq!(Config::parse("").unwrap().history_bytes, 400_000);
        let c = Config::parse("history_bytes = 50000").unwrap();
        c.validate().unwrap();
        assert_eq!(c.history_bytes, 50_000);
        let e = Config::parse("history_bytes = 10")
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("`history_bytes`"), "{e}");
    }

    #[cfg(feature = "matrix")] // Its tables are [channels.matrix].
    #[test]
    fn a_channels_streaming_and_context_keys_are_read_and_checked() {
        let base = "[channels.matrix]\nhomeserver = \"https://matrix.example.org\"\n\
                    user_id = \"@frogbot:example.org\"\npassword_env = \"PATH\"\n\
                    store_path = \"/tmp/frogbot-config-test\"\n";
        let read = |extra: &str| {
            let c = Config::parse(&format!("{base}{extra}")).unwrap();
            c.validate()?;
            crate::channels::settings("matrix", &c.channels["matrix"])
        };
        let d = read("").unwrap();
        assert!(d.stream);
        assert_eq!(d.stream_interval, std::time::Duration::from_secs(1));
        assert_eq!((d.context_messages, d.context_chars), (50, 8_000));
        let s = read(
            "stream = false\nstream_interval_ms = 1500\ncontext_messages = 0\ncontext_chars = 100\n",
        )
        .unwrap();
        assert!(!s.stream);
        assert_eq!(s.stream_interval, std::time::Duration::from_millis(1500));
        assert_eq!((s.context_messages, s.context_chars), (0, 100));
        for (bad, key) in [
            ("stream = \"yes\"\n", "stream"),
            ("stream_interval_ms = 50\n", "stream_interval_ms"),
            ("stream_interval_ms = 1.5\n", "stream_interval_ms"),
            ("context_messages = -1\n", "context_messages"),
            ("context_chars = \"lots\"\n", "context_chars"),
        ] {
            let e = read(bad).unwrap_err().to_string();
            assert!(
                e.contains(&format!("`channels.matrix.{key}`")),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn type_and_syntax_errors_keep_the_key_and_line() {
        let e = Config::parse("listen = \"127.0.0.1:1\"\n\nmax_steps = \"x\"\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 3: `max_steps`: invalid type: string \"x\", expected u32"
        );
        let e = Config::parse("[[models]]\nid = \"m\"\nprovider = 5\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("models[0].provider"), "{e}");
        assert_eq!(e.line, Some(3), "{e}");
        let e = Config::parse("max_steps = 3\nlisten = \n").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        let e = Config::parse("max_steps = 3\nlisen = \"x\"\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("line 2: `lisen`: unknown field `lisen`"),
            "{e}"
        );
    }

    #[test]
    fn a_files_errors_name_file_line_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("frogbot.toml");
        let load = |text: &str| {
            std::fs::write(&path, text).unwrap();
            Config::load(Some(&path)).unwrap_err().to_string()
        };
        let file = path.display().to_string();
        assert_eq!(
            load("instructions = \"x\"\nmax_steps = 0\n"),
            format!("{file} line 2: `max_steps`: must be at least 1")
        );
        let e = load("max_steps = 3\n\n[channels.slack]\nbot_token_env = \"PATH\"\nmode = 7\n");
        let slack = if cfg!(feature = "slack") {
            "line 5: `channels.slack.mode`: invalid type"
        } else {
            "line 3: `channels.slack`: this frogbot was built without the `slack` feature"
        };
        assert!(e.starts_with(&format!("{file} {slack}")), "{e}");
        let e = load(
            "[[models]]\nid = \"m\"\nprovider = \"openai-compatible\"\nbase_url = \"ftp://u:s3cret@x\"\n",
        );
        assert!(
            e.starts_with(&format!("{file} line 4: `models[0].base_url`")),
            "{e}"
        );
        assert!(!e.contains("s3cret"), "{e}");
        let e = load("[server]\nmax_connections = 0\n");
        assert_eq!(
            e,
            format!("{file} line 2: `server.max_connections`: must be at least 1")
        );
    }

    #[test]
    fn max_retries_and_fallbacks_are_read_and_checked() {
        let model = |id: &str, extra: &str| {
            format!("[[models]]\nid = \"{id}\"\nprovider = \"openai-compatible\"\n{extra}\n")
        };
        let c = Config::parse(&model("main", "")).unwrap();
        c.validate().unwrap();
        assert_eq!(c.models[0].max_retries, 2, "openai-python's default");
        assert!(c.models[0].fallback.is_empty());
        let text = [
            model("a", "max_retries = 0\nfallback = [\"b\", \"c\"]"),
            model("b", "max_retries = 10\nfallback = [\"d\", \"c\"]"),
            model("c", "fallback = [\"d\"]"),
            model("d", ""),
        ]
        .concat();
        let c = Config::parse(&text).unwrap();
        c.validate().unwrap();
        assert_eq!((c.models[0].max_retries, c.models[1].max_retries), (0, 10));
        let chain = |id: &str| -> Vec<String> {
            c.fallback_chain(id).iter().map(|m| m.id.clone()).collect()
        };
        // Depth first, each model once: b's own fallbacks (d, c) come before a's next one.
        assert_eq!(chain("a"), ["b", "d", "c"]);
        assert_eq!(chain("b"), ["d", "c"]);
        assert_eq!(chain("d"), Vec::<String>::new());

        let check = |text: String| {
            Config::parse(&text)
                .unwrap()
                .validate()
                .unwrap_err()
                .to_string()
        };
        let e = check(model("a", "max_retries = 11"));
        assert!(
            e.contains("`models[0].max_retries`: must be from 0 to 10"),
            "{e}"
        );
        let e = Config::parse(&model("a", "max_retries = -1")).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("models[0].max_retries"), "{e}");
        let e = Config::parse(&model("a", "fallback = \"b\"")).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("models[0].fallback"), "{e}");
        let e = check(model("a", "fallback = [\"a\"]"));
        assert!(
            e.contains("`models[0].fallback`: \"a\" is this model itself"),
            "{e}"
        );
        let e = check(model("a", "fallback = [\"nope\"]"));
        assert!(
            e.contains("`models[0].fallback`: \"nope\" is not the id"),
            "{e}"
        );
        let e = check([model("a", "fallback = [\"b\", \"b\"]"), model("b", "")].concat());
        assert!(e.contains("listed twice"), "{e}");
        let e = check(
            [
                model("a", "fallback = [\"b\"]"),
                model("b", "fallback = [\"c\"]"),
                model("c", "fallback = [\"a\"]"),
            ]
            .concat(),
        );
        assert!(
            e.contains("`models[0].fallback`: the fallbacks go round in a cycle: a → b → c → a"),
            "{e}"
        );
        let e = check(
            [
                model("a", "fallback = [\"b\"]"),
                model("b", "fallback = [\"c\"]"),
                model("c", "fallback = [\"b\"]"),
            ]
            .concat(),
        );
        assert!(e.contains("cycle: b → c → b"), "{e}");
        // The error names the file's line.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("frogbot.toml");
        std::fs::write(
            &path,
            [model("a", ""), model("b", "fallback = [\"x\"]")].concat(),
        )
        .unwrap();
        let e = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(e.contains("line 8: `models[1].fallback`"), "{e}");
    }

    /// `frogbot jobs` and the other operator commands load the configuration without the
    /// channel secrets and model keys: a password variable that is not set refuses `serve`, not
    /// them.
    #[cfg(feature = "matrix")] // Its tables are [channels.matrix].
    #[test]
    fn operator_commands_need_no_channel_secret_nor_model_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("frogbot.toml");
        std::fs::write(
            &path,
            "[[models]]\nid = \"main\"\nprovider = \"openai-compatible\"\n\
             api_key_env = \"FROGBOT_TEST_UNSET_KEY\"\n\
             [channels.matrix]\nhomeserver = \"https://matrix.example.org\"\n\
             user_id = \"@frogbot:example.org\"\npassword_env = \"FROGBOT_TEST_UNSET_PASSWORD\"\n\
             store_path = \"/tmp/frogbot-config-test\"\n",
        )
        .unwrap();
        let e = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(e.contains("FROGBOT_TEST_UNSET"), "{e}");
        let c = Config::load_for_ops(Some(&path)).unwrap();
        assert!(c.channels.contains_key("matrix"));
    }

    #[test]
    fn server_limits_have_defaults() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.server.header_read_timeout_seconds, 30);
        assert_eq!(c.server.body_read_timeout_seconds, 60);
        assert_eq!(c.server.max_connections, 1024);
        let c = Config::parse("[server]\nmax_connections = 4").unwrap();
        assert_eq!(c.server.max_connections, 4);
        assert_eq!(c.server.header_read_timeout_seconds, 30);
    }
}
