//! FrogBot's Model Context Protocol client: the `[[mcp]]` servers of `frogbot serve`, connected
//! with the official Rust SDK (`rmcp`) over child-process stdio or streamable HTTP, and their
//! tools offered to the agent as ordinary [`frogbot_core::agent::Tool`]s named `{id}__{tool}`.
//!
//! - [`ServerConfig`]: one `[[mcp]]` table (transport, `tools` allow-list, per-call
//!   `timeout_seconds`, `approval`, `elicitation_expires_seconds`), checked by
//!   [`ServerConfig::validate`] / [`validate_all`].
//! - [`McpHub`]: connects every server in the background, lists its tools at connect and on
//!   `notifications/tools/list_changed`, restarts a server that fails or dies (exponential backoff
//!   with jitter), and stops them all (children killed) on shutdown. [`McpHub::tools`] gives the
//!   current tools; [`McpHub::changed`] says when they changed.
//! - A call's result becomes the JSON the model sees as described in [`result`]; a tool error, a
//!   timeout or a dead server becomes the call's error (an error result for the model).
//! - Elicitation (form mode, declared at connect): a server's `elicitation/create` during a call
//!   made with [`frogbot_core::agent::Tool::call_or_ask`] suspends it — the call returns
//!   `ToolStep::Ask(question)`, the question [`elicit::Form`] makes of the requested schema (one
//!   input per property), while its `tools/call` goes on in a task and the request waits on a
//!   oneshot, both kept by chat and call id. [`frogbot_core::agent::Tool::resume`] answers it
//!   (answered → `accept` with the typed content, declined → `decline`, cancelled → `cancel`) and
//!   waits for the call again; `timeout_seconds` counts each wait, not the person's answering.
//!   Declined at once, with the reason logged and added to the result for the model: URL mode, a
//!   schema [`elicit::Form::new`] refuses, a plain [`frogbot_core::agent::Tool::call`], a request
//!   while no call or several calls of the server run (the protocol does not say which asks).
//!   `elicitation_expires_seconds` is the question's expiry. A call held by another process (or
//!   before a restart) is gone: `resume` fails with [`CallError::Gone`].
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
//! decides which servers a turn offers, asks for approvals and puts elicitations to people: this
//! crate only reports the `approval` setting and turns a request into a question and back); hand a stdio server FrogBot's environment (only `env` and a few basics);
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
