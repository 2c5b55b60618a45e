//! The channels `frogbot serve` runs: each `[channels.NAME]` table is parsed by the module of its
//! adapter here into the adapter crate's config, and the adapter's [`Adapter`] (its `engine`
//! feature) does the work (receiving, replies,
//! question hooks). These modules name FrogBot types and the adapter crates' own API only, never a
//! platform SDK's types.
//!
//! Keys every channel table shares: `users` (a table mapping platform user ids to FrogBot user
//! ids; anyone else becomes `platform:id`), `allow` (FrogBot user ids let in; empty: everyone),
//! `model` / `reasoning` (the model and reasoning option of that platform's chats; default: the
//! server's default model), `acks` (`"reactions"`, the default, or `"none"`), `stream` (replies
//! shown as they are written; default `true`), `stream_interval_ms` (the least time between two
//! updates of a streamed message, ≥ 200, default 1000), `context_messages` (how many earlier
//! messages of a thread are read when the bot is first mentioned in it, default 50, 0: none) and
//! `context_chars` (their budget in characters, default 8000). All but `users` and `allow` are
//! read here ([`settings`]); the adapter's parser never sees them.

pub mod discord;
pub mod matrix;
pub mod slack;
pub mod telegram;

use std::collections::BTreeMap;

pub use frogbot_core::agent::{Adapter, ChannelSettings};

use crate::config::ConfigError;

/// The keys every channel table may carry that FrogBot reads itself, not the adapter.
const SHARED_KEYS: [&str; 8] = [
    "mcp",
    "model",
    "reasoning",
    "acks",
    "stream",
    "stream_interval_ms",
    "context_messages",
    "context_chars",
];

/// The least `stream_interval_ms` (platforms rate-limit edits; Slack and Discord near one per
/// second per message).
pub const MIN_STREAM_INTERVAL_MS: i64 = 200;

/// `[channels.NAME]`'s shared keys: model, reasoning, acks, streaming and thread context.
pub(crate) fn settings(name: &str, value: &toml::Value) -> Result<ChannelSettings, ConfigError> {
    let get = |key: &str| match value.get(key) {
        None => Ok(None),
        Some(toml::Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
        Some(_) => Err(ConfigError::key(
            format!("channels.{name}.{key}"),
            "must be a non-empty string",
        )),
    };
    let acks = match get("acks")?.as_deref() {
        None | Some("reactions") => true,
        Some("none") => false,
        Some(other) => {
            return Err(ConfigError::key(
                format!("channels.{name}.acks"),
                format!("{other:?}: use \"reactions\" or \"none\""),
            ));
        }
    };
    let key = |k: &str| format!("channels.{name}.{k}");
    let defaults = ChannelSettings::default();
    let stream = match value.get("stream") {
        None => defaults.stream,
        Some(toml::Value::Boolean(b)) => *b,
        Some(_) => return Err(ConfigError::key(key("stream"), "must be true or false")),
    };
    let int = |k: &str, min: i64, max: i64| match value.get(k) {
        None => Ok(None),
        Some(toml::Value::Integer(n)) if (min..=max).contains(n) => Ok(Some(*n)),
        Some(_) => Err(ConfigError::key(
            key(k),
            format!("must be a whole number from {min} to {max}"),
        )),
    };
    let stream_interval = int("stream_interval_ms", MIN_STREAM_INTERVAL_MS, 60_000)?
        .map_or(defaults.stream_interval, |ms| {
            std::time::Duration::from_millis(ms as u64)
        });
    let context_messages =
        int("context_messages", 0, 1_000)?.map_or(defaults.context_messages, |n| n as usize);
    let context_chars =
        int("context_chars", 0, 1_000_000)?.map_or(defaults.context_chars, |n| n as usize);
    Ok(ChannelSettings {
        model: get("model")?,
        reasoning: get("reasoning")?,
        acks,
        stream,
        stream_interval,
        context_messages,
        context_chars,
    })
}

/// `[channels.NAME] mcp = ["id", …]`: the `[[mcp]]` servers whose tools the channel's turns
/// get (`None`: every server's).
pub(crate) fn mcp_selection(
    name: &str,
    value: &toml::Value,
) -> Result<Option<Vec<String>>, ConfigError> {
    match value.get("mcp") {
        None => Ok(None),
        Some(toml::Value::Array(ids)) => ids
            .iter()
            .map(|v| match v {
                toml::Value::String(s) => Ok(s.clone()),
                _ => Err(ConfigError::key(
                    format!("channels.{name}.mcp"),
                    "must be a list of [[mcp]] server ids",
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(ConfigError::key(
            format!("channels.{name}.mcp"),
            "must be a list of [[mcp]] server ids",
        )),
    }
}

/// The table without [`SHARED_KEYS`], for the adapter's own parser.
fn adapter_table(value: &toml::Value) -> toml::Value {
    let mut value = value.clone();
    if let Some(t) = value.as_table_mut() {
        for k in SHARED_KEYS {
            t.remove(k);
        }
    }
    value
}

/// Checks the table `[channels.NAME]` (environment variables it names included).
pub(crate) fn validate(name: &str, value: &toml::Value) -> Result<(), ConfigError> {
    settings(name, value)?;
    let value = &adapter_table(value);
    match name {
        "slack" => slack::parse(value).map(drop),
        "discord" => discord::parse(value).map(drop),
        "telegram" => telegram::parse(value).map(drop),
        "matrix" => matrix::parse(value).map(drop),
        other => Err(ConfigError::key(
            format!("channels.{other}"),
            "unknown channel (slack, discord, telegram or matrix)",
        )),
    }
}

/// Builds the configured channels (this may call the platform, e.g. to learn the bot's own id).
pub async fn open(
    channels: &BTreeMap<String, toml::Value>,
) -> Result<Vec<Box<dyn Adapter>>, crate::Error> {
    let mut out: Vec<Box<dyn Adapter>> = Vec::new();
    for (name, value) in channels {
        let value = &adapter_table(value);
        let ch = match name.as_str() {
            "slack" => slack::open(slack::parse(value)?).await?,
            "discord" => discord::open(discord::parse(value)?).await?,
            "telegram" => telegram::open(telegram::parse(value)?).await?,
            "matrix" => matrix::open(matrix::parse(value)?).await?,
            _ => {
                validate(name, value)?;
                continue;
            }
        };
        out.push(ch);
    }
    Ok(out)
}

/// What `frogbot config check` asks the platform of `[channels.NAME]` (its table checked first).
pub(crate) fn probe(name: &str, value: &toml::Value) -> Result<crate::check::Probe, ConfigError> {
    settings(name, value)?;
    let value = &adapter_table(value);
    match name {
        "slack" => slack::probe(value),
        "discord" => discord::probe(value),
        "telegram" => telegram::probe(value),
        "matrix" => matrix::probe(value),
        other => Err(ConfigError::key(
            format!("channels.{other}"),
            "unknown channel (slack, discord, telegram or matrix)",
        )),
    }
}

/// Parses a channel table into its config struct, naming the channel in errors.
pub(crate) fn parse_table<T: serde::de::DeserializeOwned>(
    name: &str,
    value: &toml::Value,
) -> Result<T, ConfigError> {
    // The path inside the table names the key (`channels.slack.mode`), not just the table.
    serde_path_to_error::deserialize(value.clone()).map_err(|e| {
        let key = match e.path().to_string() {
            p if p == "." => format!("channels.{name}"),
            p => format!("channels.{name}.{p}"),
        };
        ConfigError::key(key, e.inner().message())
    })
}

/// A secret read from the environment; its `Debug` never prints it.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Secret(pub(crate) String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// The value of the environment variable named by the key `channels.NAME.KEY`.
pub(crate) fn env_secret(name: &str, key: &str, var: &str) -> Result<String, ConfigError> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Ok(v),
        _ => Err(ConfigError::key(
            format!("channels.{name}.{key}"),
            format!("environment variable {var} is not set"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn a_secret_is_never_printed() {
        let s = Secret("xoxb-very-secret".into());
        assert!(!format!("{s:?} {:?}", Some(&s)).contains("very-secret"));
    }
}
