//! `[channels.telegram]`: the keys, their checks, and the adapter `frogbot serve` runs from them
//! (`frogbot_telegram::channel::connect`: long polling by default, or the webhook route
//! `POST /channels/telegram/webhook`).
//!
//! What it must not do: name teloxide's types; everything Telegram-specific lives in the adapter.
//!
//! ```toml
//! [channels.telegram]
//! token_env = "TELEGRAM_BOT_TOKEN"        # the variable holding @BotFather's token
//! mode = "polling"                        # or "webhook"
//! # webhook_secret_env = "TELEGRAM_WEBHOOK_SECRET"  # required for mode = "webhook"
//! # webhook_url = "https://bot.example.com/channels/telegram/webhook"  # setWebhook at start
//! # api_url = "http://127.0.0.1:8081/"    # a local Bot API server or a fake
//! allow = ["alice"]                       # FrogBot users let in (empty: everyone)
//!
//! [channels.telegram.users]
//! "123456789" = "alice"                   # Telegram user id → FrogBot user
//! ```

use frogbot_telegram::channel::{Config, Receive, connect, parse_url, valid_secret, valid_token};
use serde::Deserialize;

use super::{Adapter, Secret, env_secret, parse_table};
use crate::config_error::ConfigError;

/// How updates arrive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum TelegramMode {
    /// `getUpdates` long polling (no public URL needed).
    #[default]
    Polling,
    /// Telegram posts to `POST /channels/telegram/webhook`.
    Webhook,
}

channel_table! {
    /// The keys of `[channels.telegram]` (its `Debug` leaves out the token and the secret).
    pub struct TelegramConfig {
        /// The environment variable holding the bot token.
        pub token_env: String,
        /// `polling` (default) or `webhook`.
        #[serde(default)]
        pub mode: TelegramMode,
        /// The environment variable holding the webhook secret token (required for `webhook`).
        pub webhook_secret_env: Option<String>,
        /// The public URL of the webhook route; when set, serve registers it (`setWebhook`) at start.
        pub webhook_url: Option<String>,
        /// The Bot API base URL (default `https://api.telegram.org/`).
        pub api_url: Option<String>,
        /// The token read from `token_env`.
        #[serde(skip)]
        token: Secret,
        /// The secret read from `webhook_secret_env`.
        #[serde(skip)]
        secret: Option<Secret>,
    }
}

fn key_error(key: &str, what: impl std::fmt::Display) -> ConfigError {
    ConfigError::key(format!("channels.telegram.{key}"), what)
}

/// In polling mode, the role of the bot's one poller: `telegram:BOT_ID:polling` (the bot id is
/// the token's part before `:`, not secret).
pub(crate) fn single_receiver(value: &toml::Value) -> Option<String> {
    let c = parse(value).ok()?;
    if c.mode != TelegramMode::Polling {
        return None;
    }
    let bot = c.token.0.split(':').next().unwrap_or_default().to_owned();
    Some(format!("telegram:{bot}:polling"))
}

/// Checks the table (and reads the environment variables it names).
pub(crate) fn parse(value: &toml::Value) -> Result<TelegramConfig, ConfigError> {
    let mut c: TelegramConfig = parse_table("telegram", value)?;
    c.token = Secret(env_secret("telegram", "token_env", &c.token_env)?);
    if !valid_token(&c.token.0) {
        return Err(key_error(
            "token_env",
            format!(
                "{} does not hold a bot token (`123456:ABC…` from @BotFather)",
                c.token_env
            ),
        ));
    }
    match c.mode {
        TelegramMode::Webhook => {
            let var = c.webhook_secret_env.as_deref().ok_or_else(|| {
                key_error("webhook_secret_env", "required when mode = \"webhook\"")
            })?;
            let secret = env_secret("telegram", "webhook_secret_env", var)?;
            if !valid_secret(&secret) {
                return Err(key_error(
                    "webhook_secret_env",
                    format!("{var} must be 1-256 characters of A-Z, a-z, 0-9, _ and -"),
                ));
            }
            c.secret = Some(Secret(secret));
        }
        TelegramMode::Polling => {
            for (key, set) in [
                ("webhook_secret_env", c.webhook_secret_env.is_some()),
                ("webhook_url", c.webhook_url.is_some()),
            ] {
                if set {
                    return Err(key_error(key, "only used with mode = \"webhook\""));
                }
            }
        }
    }
    if let Some(u) = &c.webhook_url {
        parse_url(u, false).map_err(|e| key_error("webhook_url", e))?;
    }
    if let Some(u) = &c.api_url {
        parse_url(u, true).map_err(|e| key_error("api_url", e))?;
    }
    if let Some(id) = c.users.keys().find(|id| id.parse::<u64>().is_err()) {
        return Err(key_error(
            "users",
            format!("{id:?} is not a Telegram user id (a number)"),
        ));
    }
    Ok(c)
}

/// What `frogbot config check` asks Telegram (`getMe`, `getWebhookInfo`).
pub(crate) fn probe(value: &toml::Value) -> Result<super::Probe, ConfigError> {
    let c = parse(value)?;
    Ok(super::Probe::Telegram {
        api_url: c
            .api_url
            .unwrap_or_else(|| "https://api.telegram.org/".into()),
        token: c.token.0,
        webhook_url: match c.mode {
            TelegramMode::Webhook => Some(c.webhook_url.unwrap_or_default()),
            TelegramMode::Polling => None,
        },
    })
}

/// Builds the channel: asks Telegram who the bot is (`getMe`), so a wrong token stops serve.
pub(crate) async fn open(config: TelegramConfig) -> Result<Box<dyn Adapter>, crate::Error> {
    let receive = match (config.mode, config.secret) {
        (TelegramMode::Webhook, Some(secret)) => Receive::Webhook {
            secret: secret.0,
            url: match &config.webhook_url {
                Some(u) => Some(parse_url(u, false).map_err(|e| key_error("webhook_url", e))?),
                None => None,
            },
        },
        _ => Receive::polling(),
    };
    let api_url = match &config.api_url {
        Some(u) => Some(parse_url(u, true).map_err(|e| key_error("api_url", e))?),
        None => None,
    };
    let token = config.token.0;
    let adapter = connect(Config {
        api_url,
        receive,
        users: config.users,
        allow: config.allow,
        ..Config::new(token.clone())
    })
    .await
    // A failed request's URL holds the token (`/bot<token>/getMe`).
    .map_err(|e| ConfigError::key("channels.telegram", e.to_string().replace(&token, "***")))?;
    tracing::info!(bot = adapter.me().username(), "Telegram bot connected");
    Ok(Box::new(adapter))
}
