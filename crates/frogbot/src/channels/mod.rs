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
//! read here (`settings`); the adapter's parser never sees them.
//!
//! Each channel is a cargo feature of this crate (`slack`, `discord`, `telegram`, `matrix`, all
//! on by default); a table naming a channel whose feature was left out is refused
//! (`check_compiled`) before anything else is read of it.
//!
//! serve holds every configured channel as a `Box<dyn frogbot_channel::Adapter>`: it registers
//! `channel()` with the engine, mounts `routes()` under `/channels/<platform>/…` and calls
//! `start()`. A channel whose platform serves one receiver at a time (`single_receiver`: Telegram
//! polling, a Matrix account's sync) is started only while this process holds its role
//! (`engine.ops().try_hold` → `RoleStore::try_hold`: a PostgreSQL session advisory lock on a
//! connection of its own, or a lock file beside the SQLite file); a standby replica retries every
//! `HOLD_RETRY`, and a lost hold stops the receiver at once. The engine takes each platform message
//! once by its id (`Duplicate`), so a replica that takes a receiver over and reads again what the
//! dead holder handled loses nothing and answers nothing twice (`tests/serve_matrix.rs`,
//! `two_replicas_sync_one_at_a_time_and_take_over_without_loss`; `tests/channel_telegram.rs`,
//! `two_replicas_*`). Discord's gateway is split among replicas instead ([`discord`],
//! `tests/discord_shards.rs`).

/// Declares the struct of a `[channels.NAME]` table: the channel's own keys, then the keys every
/// adapter reads, `users` (platform user id → FrogBot user id; anyone else is `platform:id`) and
/// `allow` (FrogBot user ids let in; empty: everyone). Unknown keys are refused. Written out, not
/// `#[serde(flatten)]`ed from a shared struct: flattening turns `deny_unknown_fields` off and loses
/// the key's path in errors (`channels.telegram.token: unknown field`).
#[cfg(any(
    feature = "slack",
    feature = "discord",
    feature = "telegram",
    feature = "matrix"
))]
macro_rules! channel_table {
    ($(#[$meta:meta])* pub struct $name:ident { $($fields:tt)* }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($fields)*
            /// Platform user id → FrogBot user id (anyone else is `platform:id`).
            #[serde(default)]
            pub users: std::collections::BTreeMap<String, String>,
            /// FrogBot user ids let in (empty: everyone).
            #[serde(default)]
            pub allow: Vec<String>,
        }
    };
}

#[cfg(feature = "discord")]
pub mod discord;
#[cfg(feature = "matrix")]
pub mod matrix;
#[cfg(feature = "slack")]
pub mod slack;
#[cfg(feature = "telegram")]
pub mod telegram;

use std::collections::BTreeMap;

pub use frogbot_channel::Adapter;
pub use frogbot_core::agent::ChannelSettings;

use crate::config_error::ConfigError;

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

/// The channels a `[channels.NAME]` table may name; each is the cargo feature that builds it.
pub const KNOWN: [&str; 4] = ["slack", "discord", "telegram", "matrix"];

/// The channels this binary was built with (their cargo features), in [`KNOWN`]'s order.
pub fn compiled() -> Vec<&'static str> {
    let built = [
        cfg!(feature = "slack"),
        cfg!(feature = "discord"),
        cfg!(feature = "telegram"),
        cfg!(feature = "matrix"),
    ];
    KNOWN
        .into_iter()
        .zip(built)
        .filter_map(|(channel, built)| built.then_some(channel))
        .collect()
}

/// Refuses `[channels.NAME]` when NAME is a channel left out of this build (`compiled`: the
/// channels built in, [`compiled`] but for tests), in one line naming the feature to build with.
pub(crate) fn check_compiled(name: &str, compiled: &[&str]) -> Result<(), ConfigError> {
    if KNOWN.contains(&name) && !compiled.contains(&name) {
        return Err(ConfigError::key(
            format!("channels.{name}"),
            crate::config_error::not_built(name),
        ));
    }
    Ok(())
}

fn unknown(name: &str) -> ConfigError {
    ConfigError::key(
        format!("channels.{name}"),
        "unknown channel (slack, discord, telegram or matrix)",
    )
}

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

/// Checks the table `[channels.NAME]` (environment variables it names included): [`probe`]'s
/// checks, which call nothing.
pub(crate) fn validate(name: &str, value: &toml::Value) -> Result<(), ConfigError> {
    probe(name, value).map(drop)
}

/// Builds the configured channels (this may call the platform, e.g. to learn the bot's own id).
pub async fn open(
    channels: &BTreeMap<String, toml::Value>,
) -> Result<Vec<Box<dyn Adapter>>, crate::Error> {
    let mut out: Vec<Box<dyn Adapter>> = Vec::new();
    for (name, value) in channels {
        check_compiled(name, &compiled())?;
        let value = &adapter_table(value);
        let ch: Option<Box<dyn Adapter>> = match name.as_str() {
            #[cfg(feature = "slack")]
            "slack" => Some(slack::open(slack::parse(value)?).await?),
            #[cfg(feature = "discord")]
            "discord" => Some(discord::open(discord::parse(value)?).await?),
            #[cfg(feature = "telegram")]
            "telegram" => Some(telegram::open(telegram::parse(value)?).await?),
            #[cfg(feature = "matrix")]
            "matrix" => Some(matrix::open(matrix::parse(value)?).await?),
            _ => {
                validate(name, value)?;
                None
            }
        };
        out.extend(ch);
    }
    Ok(out)
}

/// The role the receiver of `[channels.NAME]` must hold alone among the processes sharing the
/// database, when the platform serves one receiver at a time: a bot's Telegram long polling
/// (`getUpdates` answers one poller; a second gets 409 Conflict) and a Matrix account's sync (each
/// replica would receive every event). `None`: every replica receives (Slack, Telegram webhooks),
/// or the replicas split the receiving among themselves (Discord's gateway shards: `discord`).
pub(crate) fn single_receiver(name: &str, value: &toml::Value) -> Option<String> {
    #[cfg_attr(
        not(any(feature = "telegram", feature = "matrix")),
        expect(unused_variables)
    )]
    let value = &adapter_table(value);
    match name {
        #[cfg(feature = "telegram")]
        "telegram" => telegram::single_receiver(value),
        #[cfg(feature = "matrix")]
        "matrix" => matrix::single_receiver(value),
        _ => None,
    }
}

/// What one configured channel is checked with by `frogbot config check` (built by `probe`).
#[derive(Clone)]
#[non_exhaustive]
pub enum Probe {
    /// `auth.test` at `api_url`.
    Slack {
        /// The Web API base (`https://slack.com/api`).
        api_url: String,
        /// The bot token.
        token: String,
    },
    /// `GET /api/v10/users/@me` at `api_url`.
    Discord {
        /// `https://discord.com` or a fake.
        api_url: String,
        /// The bot token.
        token: String,
    },
    /// `getMe` and `getWebhookInfo` at `api_url`.
    Telegram {
        /// `https://api.telegram.org/` or a local Bot API server.
        api_url: String,
        /// The bot token.
        token: String,
        /// In webhook mode, the configured public URL (empty: none).
        webhook_url: Option<String>,
    },
    /// `whoami` at `homeserver`.
    Matrix {
        /// The homeserver's base URL.
        homeserver: String,
        /// The configured user id.
        user_id: String,
        /// The access token, when one is configured.
        access_token: Option<String>,
    },
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets.
        f.write_str(match self {
            Probe::Slack { .. } => "Probe::Slack",
            Probe::Discord { .. } => "Probe::Discord",
            Probe::Telegram { .. } => "Probe::Telegram",
            Probe::Matrix { .. } => "Probe::Matrix",
        })
    }
}

/// What `frogbot config check` asks the platform of `[channels.NAME]` (its table checked first).
pub(crate) fn probe(name: &str, value: &toml::Value) -> Result<Probe, ConfigError> {
    check_compiled(name, &compiled())?;
    settings(name, value)?;
    #[cfg_attr(
        not(any(
            feature = "slack",
            feature = "discord",
            feature = "telegram",
            feature = "matrix"
        )),
        expect(unused_variables)
    )]
    let value = &adapter_table(value);
    match name {
        #[cfg(feature = "slack")]
        "slack" => slack::probe(value),
        #[cfg(feature = "discord")]
        "discord" => discord::probe(value),
        #[cfg(feature = "telegram")]
        "telegram" => telegram::probe(value),
        #[cfg(feature = "matrix")]
        "matrix" => matrix::probe(value),
        other => Err(unknown(other)),
    }
}

/// Parses a channel table into its config struct, naming the channel in errors.
#[cfg(any(
    feature = "slack",
    feature = "discord",
    feature = "telegram",
    feature = "matrix"
))]
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
#[cfg(any(feature = "slack", feature = "discord", feature = "telegram"))]
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Secret(pub(crate) String);

#[cfg(any(feature = "slack", feature = "discord", feature = "telegram"))]
impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// The value of the environment variable named by the key `channels.NAME.KEY`.
#[cfg(any(
    feature = "slack",
    feature = "discord",
    feature = "telegram",
    feature = "matrix"
))]
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
    use super::{KNOWN, check_compiled};

    #[cfg(any(feature = "slack", feature = "discord", feature = "telegram"))]
    #[test]
    fn a_secret_is_never_printed() {
        let s = super::Secret("xoxb-very-secret".into());
        assert!(!format!("{s:?} {:?}", Some(&s)).contains("very-secret"));
    }

    #[test]
    fn a_channel_left_out_of_the_build_is_refused_naming_its_feature() {
        // A build with Discord only: the other three are refused, each naming its own feature.
        for name in ["slack", "telegram", "matrix"] {
            let e = check_compiled(name, &["discord"]).unwrap_err().to_string();
            assert_eq!(
                e,
                format!(
                    "configuration: `channels.{name}`: this frogbot was built without the \
                     `{name}` feature (rebuild with --features {name})"
                )
            );
        }
        assert!(check_compiled("discord", &["discord"]).is_ok());
        // The web-only build refuses every channel; an unknown name is left to the parsers.
        for name in KNOWN {
            assert!(check_compiled(name, &[]).is_err(), "{name}");
        }
        assert!(check_compiled("irc", &[]).is_ok());
    }

    #[test]
    fn compiled_lists_exactly_the_enabled_features() {
        let c = super::compiled();
        assert_eq!(c.contains(&"slack"), cfg!(feature = "slack"));
        assert_eq!(c.contains(&"discord"), cfg!(feature = "discord"));
        assert_eq!(c.contains(&"telegram"), cfg!(feature = "telegram"));
        assert_eq!(c.contains(&"matrix"), cfg!(feature = "matrix"));
    }

    /// In a build without a channel, its table is refused by the configuration itself (what
    /// `serve` and `frogbot config check --offline` read).
    #[cfg(not(feature = "slack"))]
    #[test]
    fn a_config_naming_a_channel_not_built_is_refused() {
        let e = crate::Config::parse("[channels.slack]\nbot_token_env = \"PATH\"\n")
            .and_then(|c| c.validate().map(|()| c))
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("built without the `slack` feature (rebuild with --features slack)"),
            "{e}"
        );
    }
}
