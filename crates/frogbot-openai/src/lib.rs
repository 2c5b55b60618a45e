//! `frogbot-openai`: FrogBot's [`Model`](frogbot_core::agent::Model) for any server that speaks
//! OpenAI's **Chat Completions** API — OpenAI itself, Ollama, vLLM, LM Studio, OpenRouter and the
//! like.
//!
//! What it is for: turning one [`ModelRequest`](frogbot_core::agent::ModelRequest) (instructions,
//! conversation, tools, reasoning option) into one streamed `POST {base_url}/chat/completions`
//! call, and the server's server-sent events back into
//! [`ModelEvent`](frogbot_core::agent::ModelEvent)s: text deltas, complete tool calls (assembled
//! from their streamed fragments) and a final `Finish` with the reason and token usage. A stream
//! that breaks off before the server said why it finished yields an error item, never a made-up
//! `Finish`. The request body's types come from `async-openai`, the server-sent events are split
//! by `eventsource-stream`; this crate maps, and retries.
//!
//! Resilience: a failed request is tried again ([`OpenAiConfig::max_retries`], default 2) when
//! the server answered 408, 429 or 5xx, the connection was refused, reset or timed out, or the
//! stream broke off **before any event reached the caller**, after an exponential backoff with
//! jitter or the server's `Retry-After` (a wait over 60 s is not waited: the call fails at once).
//! Once an event was yielded nothing is retried. A retryable failure, also once the retries are
//! used up, carries a [`Transient`](frogbot_core::model::Transient) in its source chain.
//! [`WithFallbacks`] hands a step to other models when a model fails so before answering.
//!
//! What it must not do: know about chats, messages in the store, stores, turns, queues or
//! platforms (Slack, Discord, Telegram, Matrix). It sees one model step at a time and keeps no
//! state between steps; persisting, retrying a turn and running tools belong to `frogbot-core`'s
//! engine, and so do the step's idle and overall timeouts.
//!
//! TLS: the HTTP client uses rustls without choosing a crypto provider by itself (a dependency
//! tree may hold both `ring` and `aws-lc-rs`). Call [`install_crypto_provider`] once at start-up,
//! or install a provider of your own, before [`OpenAiCompatible::new`].

mod client;
mod error;
mod fallback;
mod request;
mod retry;
mod stream;

pub use client::{OpenAiCompatible, OpenAiConfig};
pub use error::Error;
pub use fallback::{AllFailed, WithFallbacks};

// Here, not in `client`: `error` names the limit too, and `client` uses `error`.
/// Retries after a failed attempt when the configuration does not say (openai-python's default).
pub const DEFAULT_MAX_RETRIES: u32 = 2;
/// The most retries a model may be configured with.
pub const MAX_RETRIES: u32 = 10;

/// Installs rustls' `ring` crypto provider as the process default, unless a default is already
/// installed (then it does nothing, so calling it twice, or after the application installed
/// another provider, is fine).
pub fn install_crypto_provider() {
    // `Err` only means "a default is already installed"; that one stays.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
