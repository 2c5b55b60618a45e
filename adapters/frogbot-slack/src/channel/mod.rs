//! The engine glue (feature `engine`): [`connect`] a Slack app from a [`Config`] and get a
//! [`SlackAdapter`], FrogBot's [`Adapter`] for Slack: its [`Channel`](frogbot_channel::Channel)
//! (question hooks, identity from the `users` map, access from the `allow` list, the outbox), the
//! Events API and interactivity routes in HTTP mode ([`receive`]), Socket Mode in socket mode.
//!
//! What it must not do: keep conversation state (chats, questions and answers are the engine's, in
//! the store), or acknowledge an unverified HTTP request.

pub mod outbox;
pub mod receive;

use frogbot_channel::files::Downloads;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use frogbot_channel::{AccessCheck, Adapter, AllowList, ChannelOutbox, EngineHandle};
use frogbot_model::MappedIdentity;
use frogbot_model::{ChannelQuestions, IdentityResolver};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use slack_morphism::prelude::*;
use tokio_util::sync::CancellationToken;
use tracing::info;

pub use receive::{
    COMMAND_BUSY_TEXT, COMMANDS_PATH, EVENTS_PATH, INTERACTIVITY_PATH, NOT_ALLOWED_TEXT, Pending,
    RETRY_HEADER, Seen, command_help,
};

use crate::{BotIdentity, Error, PLATFORM, SlackQuestions, SlackWebApi};

/// The slack-morphism connector the channel uses: HTTPS with the system's roots, and plain HTTP
/// for an `api_url` override (a local fake, a proxy).
pub type Connector = SlackClientHyperConnector<HttpsConnector<HttpConnector>>;

/// How the channel receives deliveries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// Events API and interactivity requests to this server (needs the signing secret).
    Http,
    /// Socket Mode (needs the app-level token `xapp-…`).
    Socket,
}

/// Settings of the Slack channel.
#[derive(Clone)]
pub struct Config {
    /// How deliveries arrive.
    pub mode: Mode,
    /// The bot token (`xoxb-…`).
    pub bot_token: String,
    /// The app's signing secret (HTTP mode).
    pub signing_secret: Option<String>,
    /// The app-level token (`xapp-…`, Socket Mode).
    pub app_token: Option<String>,
    /// The Web API base (default `https://slack.com/api`).
    pub api_url: Option<String>,
    /// Slack user id → FrogBot user id (anyone else is `slack:<id>`).
    pub users: BTreeMap<String, String>,
    /// FrogBot user ids let in (empty: everyone).
    pub allow: Vec<String>,
    /// How long a request waits for its delivery to be processed before it is acknowledged anyway
    /// (Slack wants the acknowledgement within 3 s).
    pub ack_deadline: Duration,
    /// How many delivery keys the duplicate filter remembers.
    pub dedup_capacity: usize,
    /// How many deliveries (HTTP mode and Socket Mode alike) may wait or run at once; past it a
    /// delivery is refused (`503` in HTTP mode, no acknowledgement in Socket Mode) so Slack
    /// sends it again later, instead of it waiting past Slack's 3-second acknowledgement
    /// window. [`DEFAULT_MAX_PENDING`] by default.
    pub max_pending: usize,
    /// How long a Web API call waits for Slack's answer (30 s by default); see
    /// [`SlackWebApi`] for its retries.
    pub api_timeout: Duration,
    /// What people's files are downloaded with (`None`:
    /// [`FetchPolicy::for_files`](frogbot_channel::files::FetchPolicy::for_files): public
    /// addresses only). The bot token goes only to Slack's hosts and to `api_url`'s.
    pub file_policy: Option<frogbot_channel::files::FetchPolicy>,
}

/// How many deliveries wait or run at once by default ([`Config::max_pending`]).
pub const DEFAULT_MAX_PENDING: usize = 1024;

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("mode", &self.mode)
            .field("api_url", &self.api_url)
            .field("users", &self.users)
            .field("allow", &self.allow)
            .field("ack_deadline", &self.ack_deadline)
            .field("max_pending", &self.max_pending)
            .field("api_timeout", &self.api_timeout)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// HTTP mode with a bot token and signing secret, other settings at their defaults.
    pub fn http(bot_token: impl Into<String>, signing_secret: impl Into<String>) -> Self {
        Self {
            mode: Mode::Http,
            bot_token: bot_token.into(),
            signing_secret: Some(signing_secret.into()),
            app_token: None,
            api_url: None,
            users: BTreeMap::new(),
            allow: Vec::new(),
            ack_deadline: Duration::from_millis(2500),
            dedup_capacity: 100_000,
            max_pending: DEFAULT_MAX_PENDING,
            api_timeout: crate::client::DEFAULT_TIMEOUT,
            file_policy: None,
        }
    }

    /// Socket Mode with a bot token and an app-level token.
    pub fn socket(bot_token: impl Into<String>, app_token: impl Into<String>) -> Self {
        Self {
            mode: Mode::Socket,
            signing_secret: None,
            app_token: Some(app_token.into()),
            ..Self::http(bot_token, "")
        }
    }

    /// With a Web API base URL (e.g. `http://127.0.0.1:9000/api` for a fake).
    pub fn with_api_url(mut self, url: impl Into<String>) -> Self {
        self.api_url = Some(url.into());
        self
    }

    /// Downloading people's files under `policy`.
    pub fn with_file_policy(mut self, policy: frogbot_channel::files::FetchPolicy) -> Self {
        self.file_policy = Some(policy);
        self
    }

    /// With the identity map (Slack user id → FrogBot user id).
    pub fn with_users<I, K, V>(mut self, users: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.users = users
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        self
    }

    /// With the allow list (FrogBot user ids; empty: everyone).
    pub fn with_allow<I: IntoIterator<Item = S>, S: Into<String>>(mut self, allow: I) -> Self {
        self.allow = allow.into_iter().map(Into::into).collect();
        self
    }
}

/// The connector for `api_url` (`None`: slack.com), on rustls with `ring` and the system's roots.
pub fn connector(api_url: Option<&str>) -> Result<Connector, Error> {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        // An explicit provider: the build has both ring and aws-lc-rs, so no process default.
        .with_provider_and_native_roots(rustls::crypto::ring::default_provider())
        .map_err(|e| Error::Api {
            method: "connect",
            message: format!("no TLS root certificates: {e}"),
        })?
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .build();
    let c = SlackClientHyperConnector::with_connector(https);
    Ok(match api_url {
        Some(u) => c.with_slack_api_url(u.trim_end_matches('/')),
        None => c,
    })
}

/// Checks `config`, builds the client and learns who the bot is (`auth.test`).
pub async fn connect(config: Config) -> Result<SlackAdapter, Error> {
    match config.mode {
        Mode::Http if config.signing_secret.as_deref().is_none_or(str::is_empty) => {
            return Err(Error::EmptySecret);
        }
        Mode::Socket if config.app_token.as_deref().is_none_or(str::is_empty) => {
            return Err(Error::Api {
                method: "apps.connections.open",
                message: "Socket Mode needs an app-level token".into(),
            });
        }
        _ => {}
    }
    let client = Arc::new(SlackClient::new(connector(config.api_url.as_deref())?));
    let downloads = Arc::new(Downloads::for_files(config.file_policy.clone()));
    let api = SlackWebApi::with_client(client.clone(), &config.bot_token)
        .with_timeout(config.api_timeout)
        .with_api_url(config.api_url.as_deref())
        .with_files(downloads.clone());
    let bot = api.bot_identity().await?;
    info!(bot_user = %bot.user_id, team = %bot.team_id, "Slack bot identified (auth.test)");
    Ok(SlackAdapter {
        inner: Arc::new(Inner {
            seen: Seen::new(config.dedup_capacity),
            queues: frogbot_channel::ThreadExecutor::new(receive::QUEUE_IDLE),
            pending: receive::Pending::new(config.max_pending),
            config,
            client,
            questions: Arc::new(SlackQuestions::new(api)),
            bot,
            acks: outbox::AckMarks::default(),
            threads: outbox::ThreadFacts::default(),
            uploads: outbox::Uploads::default(),
            downloads,
        }),
    })
}

/// A connected Slack app: FrogBot's [`Adapter`] for Slack.
#[derive(Clone)]
pub struct SlackAdapter {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    client: Arc<SlackClient<Connector>>,
    questions: Arc<SlackQuestions<SlackWebApi<Connector>>>,
    bot: BotIdentity,
    seen: Seen,
    queues: frogbot_channel::ThreadExecutor,
    pending: receive::Pending,
    acks: outbox::AckMarks,
    threads: outbox::ThreadFacts,
    /// The files this process uploaded, by piece key (what makes a retried upload not post the
    /// file twice).
    uploads: outbox::Uploads,
    /// People's files are downloaded through it.
    downloads: Arc<frogbot_channel::files::Downloads>,
}

impl std::fmt::Debug for SlackAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackAdapter")
            .field("bot", &self.inner.bot)
            .field("config", &self.inner.config)
            .finish()
    }
}

impl Inner {
    /// The Web API client (the question hooks' own).
    fn api(&self) -> &SlackWebApi<Connector> {
        self.questions.api()
    }
}

/// `m`'s data, also after a panic while it was held (a poisoned lock): the adapter's memories
/// (deliveries seen, uploads, threads) stay good whatever a panicking holder left undone.
fn locked<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SlackAdapter {
    /// Who the bot is.
    pub fn bot(&self) -> &BotIdentity {
        &self.inner.bot
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.inner.config.mode
    }
}

impl Adapter for SlackAdapter {
    fn platform(&self) -> &'static str {
        PLATFORM
    }

    fn questions(&self) -> Arc<dyn ChannelQuestions> {
        self.inner.questions.clone()
    }

    fn identity(&self) -> Arc<dyn IdentityResolver> {
        Arc::new(MappedIdentity::new(self.inner.config.users.clone()))
    }

    fn access(&self) -> Arc<dyn AccessCheck> {
        Arc::new(AllowList::new(self.inner.config.allow.iter().cloned()))
    }

    /// The adapter itself: its outbox posts with its Web API client.
    fn outbox(&self) -> Arc<dyn ChannelOutbox> {
        Arc::new(self.clone())
    }

    /// `POST /channels/slack/events`, `POST /channels/slack/interactivity` and
    /// `POST /channels/slack/commands` (slash commands) in HTTP mode.
    fn routes(&self, engine: &EngineHandle) -> Option<axum::Router> {
        (self.mode() == Mode::Http).then(|| receive::router(self.clone(), engine.clone()))
    }

    /// Socket Mode (`apps.connections.open`, then the WebSocket) in socket mode.
    fn start(
        &self,
        engine: EngineHandle,
        shutdown: CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        if self.mode() != Mode::Socket {
            return None;
        }
        match receive::spawn_socket_mode(self.clone(), engine, shutdown) {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::error!(error = %e, "Slack Socket Mode not started");
                None
            }
        }
    }
}
