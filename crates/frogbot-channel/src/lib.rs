//! FrogBot's channel runtime: the machinery every platform adapter shares, so that an adapter
//! holds only what its platform needs. For now that is [`markdown`]: one walker over
//! pulldown-cmark's events with a [`markdown::Dialect`] per platform (Slack's `mrkdwn`,
//! Telegram's HTML…), and [`markdown::fit`], the loop that cuts a reply into messages within a
//! platform's limit. Later: the per-thread executor, the delivery loop, the retry policy.
//!
//! What this crate must not do: name a platform SDK type (slack-morphism, serenity, teloxide,
//! matrix-sdk), hold a platform-specific rule beyond a dialect's own escaping and marks (the
//! dialects themselves live in the adapters), or talk to a store.

pub mod markdown;
