//! FrogBot's Model Context Protocol client: the `[[mcp]]` servers of `frogbot serve`, connected
//! with the official Rust SDK (`rmcp`) over child-process stdio or streamable HTTP, and their
//! tools offered to the agent as ordinary [`frogbot_core::agent::Tool`]s named `{id}__{tool}`.
//!
//! - [`ServerConfig`]: one `[[mcp]]` table (transport, `tools` allow-list, per-call
//!   `timeout_seconds`, `approval`), checked by [`ServerConfig::validate`] / [`validate_all`].
//! - [`McpHub`]: connects every server in the background, lists its tools at connect and on
//!   `notifications/tools/list_changed`, restarts a server that fails or dies (exponential backoff
//!   with jitter), and stops them all (children killed) on shutdown. [`McpHub::tools`] gives the
//!   current tools; [`McpHub::changed`] says when they changed.
//! - A call's result becomes the JSON the model sees as described in [`result`]; a tool error, a
//!   timeout or a dead server becomes the call's error (an error result for the model).
//!
//! What this crate must NOT do: know about chats, turns, the store or channels (the engine
//! decides which servers a turn offers and asks for approvals: this crate only reports the
//! `approval` setting); hand a stdio server FrogBot's environment (only `env` and a few basics);
//! outlive its hub (no orphan children).

mod config;
mod hub;
pub mod result;

pub use config::{
    Approval, ApprovalSetting, ConfigError, DEFAULT_TIMEOUT_SECONDS, SEPARATOR, ServerConfig,
    valid_id, validate_all,
};
pub use hub::{CallError, McpHub, NotReady, Restart, ServerStatus};
