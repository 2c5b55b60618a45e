//! `[[mcp]]`: one Model Context Protocol server, its transport, allow-list, timeout and approvals.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The per-call timeout when `timeout_seconds` is not set.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 60;

/// What separates a server's id from its tool's name in the name the model sees
/// (`{id}__{tool}`). Ids cannot contain `_`, so the first `__` is always the separator.
pub const SEPARATOR: &str = "__";

/// One `[[mcp]]` table.
///
/// ```toml
/// [[mcp]]
/// id = "files"
/// command = "npx"
/// args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/shared"]
/// env = { LOG_LEVEL = "warn" }
/// tools = ["read_file", "list_directory"]
///
/// [[mcp]]
/// id = "github"
/// url = "https://api.githubcopilot.com/mcp/"
/// bearer_token_env = "GITHUB_MCP_TOKEN"
/// timeout_seconds = 120
/// approval = { default = "never", merge_pull_request = "always" }
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// The server's id: letters, digits and `-`. Its tools are offered as `{id}__{tool}`.
    pub id: String,
    /// The program of a stdio server, started (and restarted) by FrogBot.
    pub command: Option<String>,
    /// The program's arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables for the program. The child gets only these and a few of FrogBot's
    /// own (`HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`, as the MCP SDKs do), never the
    /// rest of FrogBot's environment (its secrets).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The endpoint of a streamable-HTTP server.
    pub url: Option<String>,
    /// The NAME of the environment variable holding the bearer token sent to `url` (read at each
    /// connect).
    pub bearer_token_env: Option<String>,
    /// Only these tools (bare names) are offered; all when absent.
    pub tools: Option<Vec<String>>,
    /// The time one call may take.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
    /// Whether a person must approve a call: `"always"` / `"never"` for every tool, or a table of
    /// tool names (bare or `{id}__{tool}`) with an optional `default`. Default `"never"`.
    #[serde(default)]
    pub approval: ApprovalSetting,
    /// Who may approve this server's calls: FrogBot user ids or `platform:user` identities
    /// (`slack:U123`). Empty (the default): the user driving the turn.
    #[serde(default)]
    pub approvers: Vec<String>,
    /// An approval unanswered this long denies the call (default: it waits, like any question).
    pub approval_expires_seconds: Option<u64>,
    /// A request for input (`elicitation/create`) unanswered this long is cancelled (default:
    /// it waits, like any question; the server may give up sooner by its own timeout).
    pub elicitation_expires_seconds: Option<u64>,
}

/// The longest `approval_expires_seconds` (one year, a question's longest life).
pub const MAX_APPROVAL_EXPIRES_SECONDS: u64 = 365 * 24 * 3600;

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_SECONDS
}

/// Whether a tool's calls wait for a person's approval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Approval {
    /// Every call waits for approval.
    Always,
    /// Calls run without asking.
    #[default]
    Never,
}

impl Approval {
    fn parse(value: &str) -> Option<Approval> {
        match value {
            "always" => Some(Approval::Always),
            "never" => Some(Approval::Never),
            _ => None,
        }
    }
}

/// `approval` as written: kept as strings so that [`ServerConfig::validate`] can name a bad value.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum ApprovalSetting {
    /// One value for every tool of the server.
    All(String),
    /// Per tool (bare or prefixed name), with `default` for the others.
    PerTool(BTreeMap<String, String>),
}

impl Default for ApprovalSetting {
    fn default() -> Self {
        ApprovalSetting::All("never".into())
    }
}

/// A configuration mistake, naming the server and the key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `id` is empty or has characters other than letters, digits and `-`.
    #[error(
        "mcp: `id` {id:?} must be letters, digits and `-` (its tools are named `{{id}}__{{tool}}`)"
    )]
    Id {
        /// The id as written.
        id: String,
    },
    /// Two servers share an id.
    #[error("mcp: `id` {id:?} is used by two servers")]
    DuplicateId {
        /// The id.
        id: String,
    },
    /// Neither or both of `command` and `url`.
    #[error(
        "mcp server {id}: set exactly one of `command` (a stdio server) and `url` (streamable HTTP)"
    )]
    Transport {
        /// The server.
        id: String,
    },
    /// A key of the other transport (`args` / `env` with `url`, `bearer_token_env` with `command`).
    #[error("mcp server {id}: `{key}` only goes with `{with}`")]
    WrongTransportKey {
        /// The server.
        id: String,
        /// The key that does not belong.
        key: &'static str,
        /// The key it goes with.
        with: &'static str,
    },
    /// `command` is empty.
    #[error("mcp server {id}: `command` is empty")]
    EmptyCommand {
        /// The server.
        id: String,
    },
    /// `url` is not an http(s) URL.
    #[error("mcp server {id}: `url` {url:?} is not an http:// or https:// URL")]
    Url {
        /// The server.
        id: String,
        /// The URL as written.
        url: String,
    },
    /// `bearer_token_env` names a variable that is not set (or is empty).
    #[error("mcp server {id}: `bearer_token_env` names {var}, which is not set in the environment")]
    BearerTokenUnset {
        /// The server.
        id: String,
        /// The variable's name.
        var: String,
    },
    /// `timeout_seconds` is 0.
    #[error("mcp server {id}: `timeout_seconds` must be at least 1")]
    Timeout {
        /// The server.
        id: String,
    },
    /// `approval` holds something other than `always` / `never`.
    #[error("mcp server {id}: `approval{key}` is {value:?}; it must be \"always\" or \"never\"")]
    Approval {
        /// The server.
        id: String,
        /// Empty for the whole-server value, else `.tool` (the table key).
        key: String,
        /// The value as written.
        value: String,
    },
    /// `approval_expires_seconds` is 0 or longer than a year.
    #[error(
        "mcp server {id}: `approval_expires_seconds` must be between 1 and {MAX_APPROVAL_EXPIRES_SECONDS}"
    )]
    ApprovalExpires {
        /// The server.
        id: String,
    },
    /// `elicitation_expires_seconds` is 0 or longer than a year.
    #[error(
        "mcp server {id}: `elicitation_expires_seconds` must be between 1 and {MAX_APPROVAL_EXPIRES_SECONDS}"
    )]
    ElicitationExpires {
        /// The server.
        id: String,
    },
    /// An entry of `approvers` is empty.
    #[error("mcp server {id}: `approvers` holds an empty name")]
    Approvers {
        /// The server.
        id: String,
    },
    /// A prefixed key of the `approval` table names another server.
    #[error("mcp server {id}: `approval.{key}` names a tool of another server")]
    ApprovalOtherServer {
        /// The server.
        id: String,
        /// The table key.
        key: String,
    },
}

impl ConfigError {
    /// The configuration key the error is about.
    pub fn key(&self) -> &'static str {
        match self {
            ConfigError::Id { .. } | ConfigError::DuplicateId { .. } => "id",
            ConfigError::Transport { .. } | ConfigError::EmptyCommand { .. } => "command",
            ConfigError::WrongTransportKey { key, .. } => key,
            ConfigError::Url { .. } => "url",
            ConfigError::BearerTokenUnset { .. } => "bearer_token_env",
            ConfigError::Timeout { .. } => "timeout_seconds",
            ConfigError::Approval { .. } | ConfigError::ApprovalOtherServer { .. } => "approval",
            ConfigError::ApprovalExpires { .. } => "approval_expires_seconds",
            ConfigError::ElicitationExpires { .. } => "elicitation_expires_seconds",
            ConfigError::Approvers { .. } => "approvers",
        }
    }
}

/// Whether `id` is a valid server id: letters, digits and `-`, not empty.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

impl ServerConfig {
    /// A stdio server (tests and programmatic use).
    pub fn stdio(id: &str, command: &str, args: &[&str]) -> ServerConfig {
        ServerConfig {
            id: id.into(),
            command: Some(command.into()),
            args: args.iter().map(|a| (*a).into()).collect(),
            env: BTreeMap::new(),
            url: None,
            bearer_token_env: None,
            tools: None,
            timeout_seconds: DEFAULT_TIMEOUT_SECONDS,
            approval: ApprovalSetting::default(),
            approvers: Vec::new(),
            approval_expires_seconds: None,
            elicitation_expires_seconds: None,
        }
    }

    /// A streamable-HTTP server (tests and programmatic use).
    pub fn http(id: &str, url: &str) -> ServerConfig {
        ServerConfig {
            command: None,
            args: Vec::new(),
            url: Some(url.into()),
            ..ServerConfig::stdio(id, "", &[])
        }
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds)
    }

    /// Checks the server's settings; the error names the key. The bearer token's variable is
    /// checked here (start-up) and read again at every connect.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let id = || self.id.clone();
        if !valid_id(&self.id) {
            return Err(ConfigError::Id { id: id() });
        }
        match (&self.command, &self.url) {
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(ConfigError::EmptyCommand { id: id() });
                }
                if self.bearer_token_env.is_some() {
                    return Err(ConfigError::WrongTransportKey {
                        id: id(),
                        key: "bearer_token_env",
                        with: "url",
                    });
                }
            }
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(ConfigError::Url {
                        id: id(),
                        url: url.clone(),
                    });
                }
                if !self.args.is_empty() {
                    return Err(ConfigError::WrongTransportKey {
                        id: id(),
                        key: "args",
                        with: "command",
                    });
                }
                if !self.env.is_empty() {
                    return Err(ConfigError::WrongTransportKey {
                        id: id(),
                        key: "env",
                        with: "command",
                    });
                }
                if let Some(var) = &self.bearer_token_env
                    && std::env::var(var).map_or(true, |v| v.is_empty())
                {
                    return Err(ConfigError::BearerTokenUnset {
                        id: id(),
                        var: var.clone(),
                    });
                }
            }
            _ => return Err(ConfigError::Transport { id: id() }),
        }
        if self.timeout_seconds == 0 {
            return Err(ConfigError::Timeout { id: id() });
        }
        if self
            .approval_expires_seconds
            .is_some_and(|s| s == 0 || s > MAX_APPROVAL_EXPIRES_SECONDS)
        {
            return Err(ConfigError::ApprovalExpires { id: id() });
        }
        if self
            .elicitation_expires_seconds
            .is_some_and(|s| s == 0 || s > MAX_APPROVAL_EXPIRES_SECONDS)
        {
            return Err(ConfigError::ElicitationExpires { id: id() });
        }
        if self.approvers.iter().any(|a| a.trim().is_empty()) {
            return Err(ConfigError::Approvers { id: id() });
        }
        match &self.approval {
            ApprovalSetting::All(value) => {
                if Approval::parse(value).is_none() {
                    return Err(ConfigError::Approval {
                        id: id(),
                        key: String::new(),
                        value: value.clone(),
                    });
                }
            }
            ApprovalSetting::PerTool(table) => {
                for (key, value) in table {
                    if Approval::parse(value).is_none() {
                        return Err(ConfigError::Approval {
                            id: id(),
                            key: format!(".{key}"),
                            value: value.clone(),
                        });
                    }
                    if let Some((server, _)) = key.split_once(SEPARATOR)
                        && server != self.id
                    {
                        return Err(ConfigError::ApprovalOtherServer {
                            id: id(),
                            key: key.clone(),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether calls of `tool` (bare, or `{id}__{tool}`) wait for approval: the table's entry for
    /// the tool (prefixed name first), else its `default`, else `never`. A value that
    /// [`validate`](Self::validate) would refuse counts as `always`.
    pub fn approval_for(&self, tool: &str) -> Approval {
        let bare = tool
            .strip_prefix(self.id.as_str())
            .and_then(|rest| rest.strip_prefix(SEPARATOR))
            .unwrap_or(tool);
        let parse = |value: &String| Approval::parse(value).unwrap_or(Approval::Always);
        match &self.approval {
            ApprovalSetting::All(value) => parse(value),
            ApprovalSetting::PerTool(table) => table
                .get(&format!("{}{SEPARATOR}{bare}", self.id))
                .or_else(|| table.get(bare))
                .or_else(|| table.get("default"))
                .map_or(Approval::Never, parse),
        }
    }

    /// Whether any of the server's tools is set to `always` (or to a value that reads as it).
    pub fn asks_approval(&self) -> bool {
        let always =
            |v: &String| Approval::parse(v).unwrap_or(Approval::Always) == Approval::Always;
        match &self.approval {
            ApprovalSetting::All(value) => always(value),
            ApprovalSetting::PerTool(table) => table.values().any(always),
        }
    }

    /// Whether the allow-list lets `tool` (bare name) through.
    pub fn allows(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t == tool))
    }
}

/// Checks every server and that ids are unique.
pub fn validate_all(servers: &[ServerConfig]) -> Result<(), ConfigError> {
    let mut seen = std::collections::BTreeSet::new();
    for server in servers {
        server.validate()?;
        if !seen.insert(server.id.as_str()) {
            return Err(ConfigError::DuplicateId {
                id: server.id.clone(),
            });
        }
    }
    Ok(())
}
