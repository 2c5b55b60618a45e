//! `[channels.slack]`: a Slack app, receiving over HTTP (the Events API and interactivity routes
//! under `/channels/slack/…`) or Socket Mode. The work is `frogbot_slack::channel`'s; this module
//! only reads the table and the environment variables it names.
//!
//! ```toml
//! [channels.slack]
//! mode = "http"                          # or "socket"
//! bot_token_env = "SLACK_BOT_TOKEN"      # xoxb-…
//! signing_secret_env = "SLACK_SIGNING_SECRET"  # required for mode = "http"
//! # app_token_env = "SLACK_APP_TOKEN"    # xapp-…, required for mode = "socket"
//! # api_url = "http://127.0.0.1:9000/api"   # a fake or proxy of the Web API
//! users = { U012ABCDEF = "alice" }
//! allow = ["alice"]
//! ```

use frogbot_slack::channel::Config;
use serde::Deserialize;

use super::{Adapter, Secret, env_secret, parse_table};
use crate::config_error::ConfigError;

const NAME: &str = "slack";

/// How Slack delivers to this server.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SlackMode {
    /// Events API and interactivity requests (needs a public URL and the signing secret).
    #[default]
    Http,
    /// Socket Mode (needs an app-level token).
    Socket,
}

channel_table! {
    /// The keys of `[channels.slack]`.
    pub struct SlackConfig {
        /// `http` (default) or `socket`.
        #[serde(default)]
        pub mode: SlackMode,
        /// The variable holding the bot token.
        pub bot_token_env: String,
        /// The variable holding the signing secret (mode `http`).
        pub signing_secret_env: Option<String>,
        /// The variable holding the app-level token (mode `socket`).
        pub app_token_env: Option<String>,
        /// The Web API base URL (default Slack's).
        pub api_url: Option<String>,
        /// The secrets, read at parse time.
        #[serde(skip)]
        secrets: Secrets,
    }
}

#[derive(Clone, Debug, Default)]
struct Secrets {
    bot_token: Secret,
    signing_secret: Option<Secret>,
    app_token: Option<Secret>,
}

/// Checks the table and reads the secrets it names.
pub(crate) fn parse(value: &toml::Value) -> Result<SlackConfig, ConfigError> {
    let mut c: SlackConfig = parse_table(NAME, value)?;
    c.secrets.bot_token = Secret(env_secret(NAME, "bot_token_env", &c.bot_token_env)?);
    // The secret the mode needs: its key must name a variable that is set.
    let required = |key: &str, var: Option<&str>, mode: &str| match var {
        Some(var) => env_secret(NAME, key, var).map(|v| Some(Secret(v))),
        None => Err(ConfigError::key(
            format!("channels.{NAME}.{key}"),
            format!("required when mode = \"{mode}\""),
        )),
    };
    match c.mode {
        SlackMode::Http => {
            c.secrets.signing_secret = required(
                "signing_secret_env",
                c.signing_secret_env.as_deref(),
                "http",
            )?;
        }
        SlackMode::Socket => {
            c.secrets.app_token = required("app_token_env", c.app_token_env.as_deref(), "socket")?;
        }
    }
    if let Some(url) = &c.api_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(ConfigError::key(
            "channels.slack.api_url",
            format!("{:?} is not an http(s) URL", crate::redact(url)),
        ));
    }
    Ok(c)
}

/// What `frogbot config check` asks Slack (`auth.test` with the bot token).
pub(crate) fn probe(value: &toml::Value) -> Result<super::Probe, ConfigError> {
    let c = parse(value)?;
    Ok(super::Probe::Slack {
        api_url: c.api_url.unwrap_or_else(|| "https://slack.com/api".into()),
        token: c.secrets.bot_token.0,
    })
}

/// Connects the Slack app (calls `auth.test` to learn the bot's user id).
pub(crate) async fn open(config: SlackConfig) -> Result<Box<dyn Adapter>, crate::Error> {
    let s = config.secrets;
    let mut c = match config.mode {
        SlackMode::Http => Config::http(s.bot_token.0, s.signing_secret.unwrap_or_default().0),
        SlackMode::Socket => Config::socket(s.bot_token.0, s.app_token.unwrap_or_default().0),
    }
    .with_users(config.users)
    .with_allow(config.allow);
    if let Some(url) = config.api_url {
        c = c.with_api_url(url);
    }
    let adapter = frogbot_slack::channel::connect(c)
        .await
        .map_err(|e| ConfigError::key("channels.slack", e))?;
    Ok(Box::new(adapter))
}
