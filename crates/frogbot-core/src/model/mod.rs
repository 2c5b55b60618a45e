//! The platform-neutral model: what FrogBot stores, what its HTTP API serves, and what adapters
//! exchange with the engines. JSON field names follow the specification (`serve-contract.md`,
//! the channel-questions page): camelCase on the wire, snake_case in Rust.

mod chat;
mod hooks;
mod interaction;
mod message;
mod question;

pub use chat::*;
pub use hooks::*;
pub use interaction::*;
pub use message::*;
pub use question::*;

/// Milliseconds since the Unix epoch: the one time unit of the store.
pub type Millis = i64;

/// Now, in [`Millis`].
pub fn now_millis() -> Millis {
    chrono::Utc::now().timestamp_millis()
}

/// [`Millis`] as an ISO-8601 / RFC 3339 string (UTC, millisecond precision), as the wire shows times.
pub fn millis_to_iso(ms: Millis) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// An ISO-8601 / RFC 3339 string as [`Millis`]; `None` when it does not parse.
pub fn iso_to_millis(iso: &str) -> Option<Millis> {
    chrono::DateTime::parse_from_rfc3339(iso)
        .ok()
        .map(|t| t.timestamp_millis())
}
