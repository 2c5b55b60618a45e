//! `[channels.discord]`: a Discord bot on the gateway (and, with `public_key`, the HTTP
//! interactions endpoint at `POST /channels/discord/interactions`), through `frogbot-discord`'s
//! `channel` module.
//!
//! ```toml
//! [channels.discord]
//! token_env = "DISCORD_TOKEN"            # the variable holding the bot token
//! application_id = "123456789012345678"
//! intents = ["GUILD_MESSAGES", "DIRECT_MESSAGES", "MESSAGE_CONTENT"]   # the default
//! # public_key = "…64 hex digits…"       # serve the interactions endpoint
//! # api_url = "http://127.0.0.1:9000"    # instead of https://discord.com (fakes, proxies)
//! users = { "112233445566778899" = "alice" }
//! allow = ["alice"]
//! ```
//!
//! What it must not do: name serenity types; everything Discord-specific is the adapter's
//! (`frogbot_discord::channel::connect` gives the `Adapter`: hooks, identity, access, receiving).

use std::collections::BTreeMap;

use frogbot_discord::channel::Config;
use serde::Deserialize;

use super::{Adapter, Secret, env_secret, parse_table};
use crate::config_error::ConfigError;

/// The keys of `[channels.discord]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscordConfig {
    /// The environment variable holding the bot token.
    pub token_env: String,
    /// The application id (a snowflake, as a string or an integer).
    pub application_id: Snowflake,
    /// Gateway intent names; empty: guild messages, direct messages and message content.
    #[serde(default)]
    pub intents: Vec<String>,
    /// The application's public key (64 hex digits): serve the HTTP interactions endpoint.
    #[serde(default)]
    pub public_key: Option<String>,
    /// A base URL used instead of `https://discord.com` (a fake, a proxy).
    #[serde(default)]
    pub api_url: Option<String>,
    /// Discord user ids → FrogBot user ids (anyone else is `discord:ID`).
    #[serde(default)]
    pub users: BTreeMap<String, String>,
    /// FrogBot user ids allowed to talk to the agent (empty: everyone).
    #[serde(default)]
    pub allow: Vec<String>,
    /// The token, read from `token_env` by [`parse`].
    #[serde(skip)]
    token: Secret,
}

/// A Discord id in the configuration: a string of digits or an integer.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Snowflake {
    /// `application_id = 123…`
    Number(u64),
    /// `application_id = "123…"`
    Text(String),
}

impl Snowflake {
    fn get(&self) -> Option<u64> {
        match self {
            Snowflake::Number(n) => Some(*n),
            Snowflake::Text(t) => t.trim().parse().ok(),
        }
        .filter(|n| *n > 0)
    }
}

/// Checks the table (and reads the token from its variable).
pub(crate) fn parse(value: &toml::Value) -> Result<DiscordConfig, ConfigError> {
    let mut config: DiscordConfig = parse_table("discord", value)?;
    config.token = Secret(env_secret("discord", "token_env", &config.token_env)?);
    if config.application_id.get().is_none() {
        return Err(ConfigError::key(
            "channels.discord.application_id",
            "not a Discord id (a positive integer)",
        ));
    }
    let checked = config.adapter_config();
    checked
        .gateway_intents()
        .map_err(|e| ConfigError::key("channels.discord.intents", e))?;
    checked
        .verifier()
        .map_err(|e| ConfigError::key("channels.discord.public_key", e))?;
    if let Some(url) = &config.api_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(ConfigError::key(
            "channels.discord.api_url",
            "must start with http:// or https://",
        ));
    }
    Ok(config)
}

impl DiscordConfig {
    /// The adapter's config.
    fn adapter_config(&self) -> Config {
        Config {
            token: self.token.0.clone(),
            application_id: self.application_id.get().unwrap_or_default(),
            intents: self.intents.clone(),
            public_key: self.public_key.clone(),
            api_url: self.api_url.clone(),
            users: self.users.clone(),
            allow: self.allow.clone(),
            ..Config::default()
        }
    }
}

/// What `frogbot config check` asks Discord (`GET /users/@me` with the bot token).
pub(crate) fn probe(value: &toml::Value) -> Result<super::Probe, ConfigError> {
    let c = parse(value)?;
    Ok(super::Probe::Discord {
        api_url: c
            .api_url
            .clone()
            .unwrap_or_else(|| "https://discord.com".into()),
        token: c.token.0,
    })
}

/// Connects the bot (learning its own user id from Discord).
pub(crate) async fn open(config: DiscordConfig) -> Result<Box<dyn Adapter>, crate::Error> {
    let adapter = frogbot_discord::channel::connect(config.adapter_config())
        .await
        .map_err(|e| ConfigError::key("channels.discord", e))?;
    Ok(Box::new(adapter))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Value {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn errors_name_the_key() {
        let err = |text: &str| {
            let e = parse(&table(text)).unwrap_err();
            format!("`{}`: {}", e.key.unwrap_or_default(), e.message)
        };
        assert!(
            err(r#"token_env = "FROGBOT_TEST_UNSET_VARIABLE"
                   application_id = "1""#)
            .starts_with("`channels.discord.token_env`: environment variable")
        );
        // PATH is set in every test environment.
        assert!(
            err(r#"token_env = "PATH"
                   application_id = "x1""#)
            .starts_with("`channels.discord.application_id`")
        );
        assert!(
            err(r#"token_env = "PATH"
                   application_id = 1
                   intents = ["GUILD_MESAGES"]"#)
            .starts_with("`channels.discord.intents`: ")
        );
        assert!(
            err(r#"token_env = "PATH"
                   application_id = 1
                   public_key = "abc""#)
            .starts_with("`channels.discord.public_key`: ")
        );
        assert!(
            err(r#"token_env = "PATH"
                   application_id = 1
                   tokne = "x""#)
            .contains("unknown field `tokne`")
        );
        let ok = parse(&table(
            r#"token_env = "PATH"
               application_id = "123"
               intents = ["guild_messages", "MESSAGE_CONTENT"]
               users = { "42" = "alice" }
               allow = ["alice"]"#,
        ))
        .unwrap();
        assert_eq!(ok.application_id.get(), Some(123));
    }
}
