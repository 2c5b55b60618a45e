//! `frogbot-net`: the one guarded outbound HTTP client for every server-side download of a URL
//! that came from a model, a person or a message (the `fetch_url` tool, the Matrix adapter's
//! image uploads).
//!
//! What it is for: [`is_forbidden`] (the addresses never reached by default: loopback, private,
//! link-local, CGNAT, documentation, multicast, reserved, and the IPv6 forms that carry one of
//! them), [`GuardedClient`] (a reqwest client under a [`FetchPolicy`]: http(s) only; the
//! environment's `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` ignored, only the policy's proxy used;
//! every resolved address of a name checked, a name with any forbidden address refused; literal
//! addresses checked before the request and at every redirect, redirects counted; the body read
//! in chunks up to a cap, never buffered past it; the whole download within one deadline), its
//! typed [`FetchError`], and [`FetchBudget`], the per-turn cap on downloads callers keep.
//!
//! What it must not do: know about FrogBot's engine, chats or platforms (callers map errors to
//! their own), talk to a platform's own API (the adapters' SDK clients do that, to their
//! configured servers), or ever build a client that follows the environment's proxy settings.
//! A name is checked when it is resolved for the connection itself (no second lookup to race),
//! except through a proxy, where the proxy resolves it again after this crate's check.

mod budget;
mod client;
mod ip;

pub use budget::{BudgetExceeded, FetchBudget};
pub use client::{
    Body, FetchError, FetchPolicy, FilePart, GuardedClient, Oversize, Response, retry_after,
};
pub use ip::is_forbidden;
pub use url::Url;
