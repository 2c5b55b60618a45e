//! The engine glue (feature `engine`): [`connect`] a bot ([`Config`] → [`TelegramAdapter`]), which
//! implements [`Adapter`]: [`TelegramAdapter::channel`] is the engine's
//! [`Channel`](frogbot_channel::Channel) (question hooks, `users` identities, `allow` list, outbox);
//! [`TelegramAdapter::routes`] is the webhook route (webhook mode; building it registers nothing);
//! [`TelegramAdapter::start`] receives: long polling after `deleteWebhook`, or in webhook mode
//! `setWebhook` (when a public URL is configured) and the route's deliveries until shutdown.
//!
//! Receiving is in [`receive`], replies in [`outbox`].
//!
//! What it must not do: keep conversation state of its own. The only in-process state is which
//! message of a thread the bot should reply to (a hint: without it a reply is posted plainly in
//! the thread). No sqlx here: the engine feature of `frogbot-core` carries none.

pub mod outbox;
pub mod receive;

use frogbot_channel::files::Downloads;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use frogbot_channel::{AccessCheck, Adapter, AllowList, ChannelOutbox, EngineHandle};
use frogbot_model::MappedIdentity;
use frogbot_model::{ChannelQuestions, IdentityResolver};
use teloxide::Bot;
use teloxide::types::Me;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

pub use outbox::TelegramOutbox;
pub use receive::{
    FAILED_TEXT, LOGGED_PREFIX, MAX_UPDATE_BYTES, NOT_ALLOWED_TEXT, SECRET_HEADER, WEBHOOK_PATH,
};

use crate::{Error, PLATFORM, TelegramQuestions};
use receive::Deliveries;

/// How updates arrive.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Receive {
    /// Long polling (`getUpdates`), after `deleteWebhook`.
    Polling {
        /// How long one `getUpdates` call waits for updates.
        timeout: Duration,
    },
    /// Telegram posts updates to [`WEBHOOK_PATH`] with the secret token header.
    Webhook {
        /// The `X-Telegram-Bot-Api-Secret-Token` every request must carry.
        secret: String,
        /// The public URL to register with `setWebhook` at start; `None`: registered elsewhere.
        url: Option<url::Url>,
    },
}

impl Receive {
    /// Long polling with a 10-second `getUpdates` timeout.
    pub fn polling() -> Self {
        Receive::Polling {
            timeout: Duration::from_secs(10),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Receive::Polling { .. } => "polling",
            Receive::Webhook { .. } => "webhook",
        }
    }
}

/// What [`connect`] needs (its `Debug` leaves out the token and the secret).
#[derive(Clone)]
pub struct Config {
    /// The bot token from @BotFather.
    pub token: String,
    /// The Bot API base URL (`None`: `https://api.telegram.org/`); for fakes and local servers.
    pub api_url: Option<url::Url>,
    /// How updates arrive.
    pub receive: Receive,
    /// Telegram user id → FrogBot user id; anyone else is `telegram:<id>`.
    pub users: BTreeMap<String, String>,
    /// FrogBot users let in; empty: everyone.
    pub allow: Vec<String>,
    /// In webhook mode, how long a request body may take to arrive once its header is in; a
    /// slower one is answered `408` (default 30 s). Bounds what a slow client holds.
    pub webhook_body_timeout: Duration,
    /// What people's files are downloaded with (`None`:
    /// [`FetchPolicy::for_files`](frogbot_channel::files::FetchPolicy::for_files): public
    /// addresses only). A file is found with `getFile`, then read from the Bot API's file URL.
    pub file_policy: Option<frogbot_channel::files::FetchPolicy>,
}

impl Config {
    /// A long-polling configuration for `token` that lets everyone in.
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            token: token.into(),
            api_url: None,
            receive: Receive::polling(),
            users: BTreeMap::new(),
            allow: Vec::new(),
            webhook_body_timeout: Duration::from_secs(30),
            file_policy: None,
        }
    }
}

impl Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("api_url", &self.api_url.as_ref().map(|u| u.as_str()))
            .field("receive", &self.receive.kind())
            .field("users", &self.users)
            .field("allow", &self.allow)
            .field("webhook_body_timeout", &self.webhook_body_timeout)
            .finish_non_exhaustive()
    }
}

/// Whether `secret` is a valid webhook secret token: 1–256 characters of `A-Z a-z 0-9 _ -`.
pub fn valid_secret(secret: &str) -> bool {
    (1..=256).contains(&secret.len())
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Reads a URL (the Bot API base, or the public webhook URL); a Bot API base gets the trailing
/// `/` teloxide needs to append `bot<token>/<method>`.
pub fn parse_url(text: &str, api_base: bool) -> Result<url::Url, Error> {
    let mut text = text.trim().to_owned();
    if api_base && !text.ends_with('/') {
        text.push('/');
    }
    let url = url::Url::parse(&text).map_err(|e| Error::Config(format!("{text:?}: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Error::Config(format!("{text:?}: not an http(s) URL")));
    }
    Ok(url)
}

/// Whether `token` looks like a bot token from @BotFather (`123456:ABC-DEF…`).
pub fn valid_token(token: &str) -> bool {
    token.split_once(':').is_some_and(|(id, rest)| {
        !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) && !rest.is_empty()
    })
}

/// Checks `config` and learns the bot's own id and username (`getMe`): a refused token is an
/// error here. Nothing is received until [`TelegramAdapter::start`].
pub async fn connect(config: Config) -> Result<TelegramAdapter, Error> {
    if !valid_token(&config.token) {
        return Err(Error::Config(
            "the token is not a bot token (`123456:ABC…` from @BotFather)".into(),
        ));
    }
    if let Receive::Webhook { secret, .. } = &config.receive
        && !valid_secret(secret)
    {
        return Err(Error::Config(
            "the webhook secret must be 1-256 characters of A-Z, a-z, 0-9, _ and -".into(),
        ));
    }
    let mut bot = Bot::new(config.token);
    if let Some(url) = config.api_url {
        bot = bot.set_api_url(url);
    }
    let no_params = serde_json::json!({});
    let me: Me = crate::client::with_retry("getMe", || {
        crate::client::request(&bot, "getMe", &no_params, None)
    })
    .await?;
    if me.user.username.is_none() {
        return Err(Error::Payload(
            "getMe returned a bot without a username".into(),
        ));
    }
    let access: Arc<dyn AccessCheck> = Arc::new(AllowList::new(config.allow));
    Ok(TelegramAdapter {
        questions: Arc::new(TelegramQuestions::new(bot.clone())),
        outbox: Arc::new(
            TelegramOutbox::new(bot.clone())
                .with_downloads(Downloads::for_files(config.file_policy)),
        ),
        bot,
        me,
        receive: config.receive,
        webhook_body_timeout: config.webhook_body_timeout,
        identity: Arc::new(MappedIdentity::new(config.users)),
        access,
        webhook: Mutex::default(),
    })
}

/// A connected Telegram bot: FrogBot's [`Adapter`] for Telegram.
pub struct TelegramAdapter {
    bot: Bot,
    me: Me,
    receive: Receive,
    webhook_body_timeout: Duration,
    questions: Arc<TelegramQuestions<Bot>>,
    outbox: Arc<TelegramOutbox>,
    identity: Arc<MappedIdentity>,
    access: Arc<dyn AccessCheck>,
    /// The deliveries of the webhook route [`Adapter::routes`] built, drained at shutdown.
    webhook: Mutex<Option<Arc<Deliveries>>>,
}

impl Debug for TelegramAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramAdapter")
            .field("bot", &self.me.username())
            .field("receive", &self.receive.kind())
            .finish_non_exhaustive()
    }
}

impl TelegramAdapter {
    /// The bot, as `getMe` described it.
    pub fn me(&self) -> &Me {
        &self.me
    }

    /// The teloxide client the adapter calls the Bot API with.
    pub fn bot(&self) -> &Bot {
        &self.bot
    }

    fn deliveries(&self, engine: EngineHandle) -> Arc<Deliveries> {
        Deliveries::new(receive::Context {
            engine,
            bot: self.bot.clone(),
            me: self.me.clone(),
            outbox: self.outbox.clone(),
        })
    }
}

impl Adapter for TelegramAdapter {
    fn platform(&self) -> &'static str {
        PLATFORM
    }

    fn questions(&self) -> Arc<dyn ChannelQuestions> {
        self.questions.clone()
    }

    fn identity(&self) -> Arc<dyn IdentityResolver> {
        self.identity.clone()
    }

    fn access(&self) -> Arc<dyn AccessCheck> {
        self.access.clone()
    }

    fn outbox(&self) -> Arc<dyn ChannelOutbox> {
        self.outbox.clone()
    }

    /// In webhook mode, the route `POST` [`WEBHOOK_PATH`] delivering into `engine`; `None` when
    /// polling. Nothing is registered with Telegram here (that is [`Adapter::start`]).
    fn routes(&self, engine: &EngineHandle) -> Option<axum::Router> {
        let Receive::Webhook { secret, .. } = &self.receive else {
            return None;
        };
        let deliveries = self.deliveries(engine.clone());
        *self.webhook.lock().expect("not poisoned") = Some(deliveries.clone());
        Some(receive::webhook_router(
            secret,
            self.webhook_body_timeout,
            deliveries,
        ))
    }

    /// Starts receiving: long polling (after `deleteWebhook`); or, in webhook mode, registers the
    /// webhook (`setWebhook` with the secret, when a public URL is configured) and hands the
    /// route's deliveries to the engine until `shutdown`. The task ends once `shutdown` is
    /// cancelled and the running handlers finish.
    fn start(
        &self,
        engine: EngineHandle,
        shutdown: CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let bot = self.bot.clone();
        tokio::spawn(register_commands(bot.clone()));
        match &self.receive {
            Receive::Polling { timeout } => {
                let deliveries = self.deliveries(engine);
                Some(tokio::spawn(receive::poll(
                    bot, *timeout, deliveries, shutdown,
                )))
            }
            Receive::Webhook { secret, url } => {
                let deliveries = self.webhook.lock().expect("not poisoned").clone();
                if deliveries.is_none() {
                    warn!("Telegram webhook mode: start() before routes(); nothing receives");
                }
                let register = url.clone().map(|u| (u, secret.clone()));
                Some(tokio::spawn(async move {
                    if let Some((url, secret)) = register {
                        let body = serde_json::json!({"url": url, "secret_token": secret});
                        let set = crate::client::with_retry("setWebhook", || {
                            crate::client::request::<bool>(&bot, "setWebhook", &body, None)
                        });
                        match set.await {
                            Ok(_) => info!(url = %url, "Telegram webhook registered"),
                            Err(e) => {
                                warn!(url = %url, error = %e, "setWebhook failed; updates may not arrive")
                            }
                        }
                    }
                    shutdown.cancelled().await;
                    if let Some(d) = deliveries {
                        d.close().await;
                    }
                }))
            }
        }
    }
}

/// The commands a person can type (`frogbot_channel::Command::ALL`) as the body of Telegram's
/// `setMyCommands`: the command menu (the `/` button) lists them in every chat with the bot.
pub fn commands_body() -> serde_json::Value {
    let commands: Vec<serde_json::Value> = frogbot_channel::Command::ALL
        .iter()
        .map(|(_, name, about)| serde_json::json!({"command": name, "description": about}))
        .collect();
    serde_json::json!({ "commands": commands })
}

/// Registers the command menu at start (`setMyCommands`, retried like every call). A failure is
/// logged: the commands still work when typed.
async fn register_commands(bot: Bot) {
    let body = commands_body();
    let set = crate::client::with_retry("setMyCommands", || {
        crate::client::request::<bool>(&bot, "setMyCommands", &body, None)
    });
    match set.await {
        Ok(_) => info!("Telegram command menu registered"),
        Err(e) => warn!(error = %e, "setMyCommands failed; commands still work when typed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_tokens_are_checked() {
        assert!(valid_secret("abc-DEF_123"));
        assert!(!valid_secret(""));
        assert!(!valid_secret("has space"));
        assert!(!valid_secret(&"a".repeat(257)));
        assert!(valid_token("123456:ABC-def"));
        assert!(!valid_token("ABC"));
        assert!(!valid_token("x1:abc"));
        assert_eq!(
            parse_url("http://127.0.0.1:8081", true).unwrap().as_str(),
            "http://127.0.0.1:8081/"
        );
        assert!(parse_url("ftp://x/", true).is_err());
    }

    #[test]
    fn the_config_never_prints_the_token() {
        let mut c = Config::new("123:very-secret");
        c.receive = Receive::Webhook {
            secret: "hook-secret".into(),
            url: None,
        };
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("very-secret") && !shown.contains("hook-secret"),
            "{shown}"
        );
    }
}
