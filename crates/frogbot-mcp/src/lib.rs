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
//! What fails how ([`CallError`] for calls):
//!
//! | what | the call | the server |
//! |---|---|---|
//! | `isError: true` | `Err(text of the result)` | untouched |
//! | JSON-RPC error (unknown tool, bad arguments) | `Err("tool X failed: Mcp error: …")` | untouched |
//! | longer than `timeout_seconds` | `Err("tool X timed out after N s …")`; `notifications/cancelled` sent | untouched |
//! | the child dies / the HTTP server goes away mid-call | `Err("… connection to mcp server ID was lost …")` (HTTP: after ~4 s of SSE resume tries) | reconnected with backoff |
//! | the server is down (starting, restarting) | `Err("mcp server ID is not connected …")`; its tools are absent from [`McpHub::tools`] | retried with backoff (0.5 s doubling to 60 s, jitter) |
//! | it cannot start (bad command, refused, handshake or `tools/list` failing) | — | logged with its id, retried with backoff |
//! | shutdown (token cancelled, [`McpHub::shutdown`], last clone dropped) | — | stdin closed, SIGTERM to its process group, then SIGKILL |
//!
//! What this crate must NOT do: know about chats, turns, the store or channels (the engine
//! decides which servers a turn offers and asks for approvals: this crate only reports the
//! `approval` setting); hand a stdio server FrogBot's environment (only `env` and a few basics);
//! outlive its hub (no orphan children).

mod config;
pub mod elicit;
mod hub;
pub mod result;

pub use config::{
    Approval, ApprovalSetting, ConfigError, DEFAULT_TIMEOUT_SECONDS, MAX_APPROVAL_EXPIRES_SECONDS,
    SEPARATOR, ServerConfig, valid_id, validate_all,
};
pub use hub::{CallError, McpHub, NotReady, Restart, ServerStatus};
