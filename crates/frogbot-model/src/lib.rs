//! `frogbot-model`: FrogBot's platform-neutral model, shared by the engines and every channel
//! adapter. JSON field names follow the specification (`serve-contract.md`, the channel-questions
//! page): camelCase on the wire, snake_case in Rust.
//!
//! What it is for: chats, messages and their parts, users and channel identities, turn state,
//! queued messages and delivery, the `question` tool's input and output and their validation,
//! question records and changes, the three interaction kinds, parse results and outcomes, the
//! [`ChannelQuestions`] and [`IdentityResolver`] hook traits every adapter implements, approvals
//! (a tool call asked as a question: [`approval_question`], [`ToolApproval`]), the
//! multi-step question [`Progress`] adapters keep in a record's state, and [`text`]: splitting and
//! truncating text to a platform's limits (UTF-8 and code-block aware), and [`Transient`]: the
//! mark a failed platform or model call carries when it is worth retrying.
//!
//! What it must not do: depend on an async runtime, a database or a platform SDK. The engines
//! (`frogbot-core`) and the adapters (`adapters/*`) depend on it, never the other way; the compiler
//! keeps that boundary (this crate's dependency list is the whole of what an adapter's model
//! needs). With the feature `testing`, [`conformance`] holds the `ChannelQuestions` conformance
//! suite every adapter runs against its fake platform, [`faults`] the seeded fault plans the
//! fakes inject, and [`fuzz`] the proptest strategies (arbitrary and mutated real-shaped JSON)
//! every reader of platform or HTTP input is fuzzed with.

mod approval;
pub mod blocks;
mod chat;
mod elicitation;
mod hooks;
mod interaction;
mod message;
mod progress;
mod question;
mod retry;
pub mod text;

#[cfg(feature = "testing")]
pub mod conformance;
#[cfg(feature = "testing")]
pub mod faults;
#[cfg(feature = "testing")]
pub mod fuzz;

pub use approval::*;
pub use blocks::{
    Block, BlockEvent, BlockKind, EventButton, EventClick, EventControl, INPUT_BLOCK_TYPES,
    app_page, blocks_of, has_blocks, is_app_link, stamp_app_link, stamp_app_links_in,
    with_app_urls, with_app_urls_of,
};
pub use chat::*;
pub use elicitation::*;
pub use hooks::*;
pub use interaction::*;
pub use message::*;
pub use progress::Progress;
pub use question::*;
pub use retry::Transient;

/// A boxed error returned by user code (hooks, tools) that FrogBot logs or reports.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What the model refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A chat id that is not 1–128 characters of `A-Z a-z 0-9 _ -`.
    #[error("invalid chat id {0:?}: use 1-128 characters of A-Z a-z 0-9 _ -")]
    InvalidChatId(String),
}

/// Milliseconds since the Unix epoch: the one time unit of the store.
pub type Millis = i64;

/// Now, in [`Millis`].
pub fn now_millis() -> Millis {
    chrono::Utc::now().timestamp_millis()
}

/// The earliest time [`millis_to_iso`] writes: `0000-01-01T00:00:00.000Z`.
pub const MIN_ISO_MILLIS: Millis = -62_167_219_200_000;

/// The latest time [`millis_to_iso`] writes: `9999-12-31T23:59:59.999Z`.
pub const MAX_ISO_MILLIS: Millis = 253_402_300_799_999;

/// [`Millis`] as an ISO-8601 / RFC 3339 string (UTC, millisecond precision), as the wire shows times.
///
/// RFC 3339 has four-digit years: a time before year 0 or after year 9999 (a platform's garbage
/// timestamp) is clamped to [`MIN_ISO_MILLIS`] / [`MAX_ISO_MILLIS`], so the string always parses
/// back ([`iso_to_millis`]) and keeps the order of times.
pub fn millis_to_iso(ms: Millis) -> String {
    let ms = ms.clamp(MIN_ISO_MILLIS, MAX_ISO_MILLIS);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_outside_rfc3339_years_are_clamped() {
        assert_eq!(millis_to_iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(millis_to_iso(MAX_ISO_MILLIS), "9999-12-31T23:59:59.999Z");
        assert_eq!(millis_to_iso(MIN_ISO_MILLIS), "0000-01-01T00:00:00.000Z");
        // Past year 9999 (was "+10000-…", or the epoch past chrono's range).
        for ms in [MAX_ISO_MILLIS + 1, 253_402_300_800_000 * 3, i64::MAX] {
            assert_eq!(millis_to_iso(ms), "9999-12-31T23:59:59.999Z", "{ms}");
        }
        // Before year 0 (was "-0001-…", or the epoch).
        for ms in [MIN_ISO_MILLIS - 1, i64::MIN] {
            assert_eq!(millis_to_iso(ms), "0000-01-01T00:00:00.000Z", "{ms}");
        }
        for ms in [MIN_ISO_MILLIS, -1, 0, 1_700_000_000_123, MAX_ISO_MILLIS] {
            assert_eq!(iso_to_millis(&millis_to_iso(ms)), Some(ms));
        }
    }
}
