//! EngineHandle glue (feature `engine`): [`connect`] a bot from its [`Config`] and get a
//! [`DiscordAdapter`], the `frogbot_channel::Adapter` a host runs — its engine `Channel`
//! (question hooks, identity from the `users` map, access from the `allow` list, the outbox), the
//! HTTP interactions endpoint as routes (when a public key is configured), and the gateway: every
//! shard of the bot ([`Adapter::start`]), or a range of them that may change while the adapter
//! lives ([`DiscordAdapter::run_shards`]: how `frogbot serve` splits the shards among its
//! replicas).
//!
//! What it does:
//! - a mention in a guild channel opens a thread on the message and starts that thread's chat (one
//!   FrogBot chat per thread); messages in a thread the bot has a chat for continue it; a DM
//!   channel is its own thread. The bot's own messages are ignored.
//! - every component click is acknowledged first (deferred update, `type 6`) and then handed to the
//!   engine; an "Other…" or "Answer…" click on a live question opens the modal instead (that is its response);
//!   a modal submission is acknowledged the same way. Discord's 3 s window is never at the mercy
//!   of the engine's speed. Deliveries of one thread reach the engine in arrival order, threads in
//!   parallel ([`receive`]).
//! - replies longer than 2,000 characters are split ([`outbox`]); a message's files are uploaded
//!   after its text, each in a message of its own, up to [`Config::max_upload_bytes`] (a larger
//!   one is named in a text instead).
//!
//! What it must not do: keep conversation state in memory (the engine and its store decide what a
//! thread is; the only in-process state is the bot's own user id), or name sqlx.

pub mod outbox;
pub mod receive;

use frogbot_channel::files::Downloads;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use frogbot_channel::{AccessCheck, Adapter, AllowList, ChannelOutbox, EngineHandle};
use frogbot_model::MappedIdentity;
use frogbot_model::{ChannelQuestions, IdentityResolver};
use serenity::all::{GatewayIntents, UserId};
use serenity::http::{Http, HttpBuilder};
use serenity::model::id::ApplicationId;
use tokio_util::sync::CancellationToken;

pub use crate::PLATFORM;
use crate::client::DiscordApi;
use crate::convert::EndpointVerifier;
use crate::{DiscordQuestions, Error};
pub use outbox::DEFAULT_MAX_UPLOAD_BYTES;
pub use receive::{
    COMMAND_WHERE_TEXT, INTERACTIONS_PATH, NOT_ALLOWED_TEXT, UNKNOWN_COMMAND_TEXT,
    application_commands, command_message, command_text,
};

/// The intents used when none are configured: guild messages, DMs and message content.
pub const DEFAULT_INTENTS: &[&str] = &["GUILD_MESSAGES", "DIRECT_MESSAGES", "MESSAGE_CONTENT"];

/// Gateway intents from their names (`GUILD_MESSAGES`, `direct_messages`, …; case-insensitive).
pub fn intents_from_names<S: AsRef<str>>(names: &[S]) -> Result<GatewayIntents, Error> {
    let mut intents = GatewayIntents::empty();
    for name in names {
        let upper = name.as_ref().trim().to_ascii_uppercase();
        let flag = GatewayIntents::from_name(&upper).ok_or_else(|| {
            Error::Malformed(format!("unknown gateway intent {:?}", name.as_ref()))
        })?;
        intents |= flag;
    }
    Ok(intents)
}

/// What a Discord bot needs (`[channels.discord]` in `frogbot serve`).
#[derive(Clone)]
pub struct Config {
    /// The bot token.
    pub token: String,
    /// The application id (followups and modal responses need it).
    pub application_id: u64,
    /// Gateway intent names ([`DEFAULT_INTENTS`] when empty).
    pub intents: Vec<String>,
    /// The application's public key (64 hex digits): serve the HTTP interactions endpoint.
    pub public_key: Option<String>,
    /// A base URL replacing `https://discord.com` (a fake or a proxy); the gateway URL comes from
    /// `GET /api/v10/gateway` there.
    pub api_url: Option<String>,
    /// Discord user ids → FrogBot user ids (anyone else is `discord:ID`).
    pub users: BTreeMap<String, String>,
    /// FrogBot user ids allowed to talk to the agent (empty: everyone).
    pub allow: Vec<String>,
    /// How long an API call waits for Discord's answer (`Duration::ZERO`: [`DEFAULT_TIMEOUT`]).
    pub api_timeout: Duration,
    /// The bot's number of gateway shards (`None`: what Discord recommends, `GET /gateway/bot`).
    /// [`Adapter::start`] runs them all; [`DiscordAdapter::run_shards`] runs a range of them.
    pub shards: Option<u32>,
    /// What people's attachments are downloaded with (`None`:
    /// [`FetchPolicy::for_files`](frogbot_channel::files::FetchPolicy::for_files), Discord's CDN
    /// on public addresses).
    pub file_policy: Option<frogbot_channel::files::FetchPolicy>,
    /// The largest file the bot uploads, in bytes ([`DEFAULT_MAX_UPLOAD_BYTES`], 10 MiB:
    /// Discord's limit for a bot in a server without boosts). A boosted server takes more (its
    /// boost tier's limit): raise it there. A larger file is not uploaded: a text naming it is
    /// posted in its place (so is one Discord refuses as too large, `413`).
    pub max_upload_bytes: u64,
    /// The servers (guild ids) to register the application commands in, each at once, instead
    /// of globally (empty, the default: global commands, in every server and DM). Guild commands
    /// suit a bot for a few servers and development.
    pub command_guilds: Vec<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            token: String::new(),
            application_id: 0,
            intents: Vec::new(),
            public_key: None,
            api_url: None,
            users: BTreeMap::new(),
            allow: Vec::new(),
            api_timeout: Duration::ZERO,
            shards: None,
            file_policy: None,
            max_upload_bytes: DEFAULT_MAX_UPLOAD_BYTES,
            command_guilds: Vec::new(),
        }
    }
}

/// How long an API call waits for Discord's answer by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("application_id", &self.application_id)
            .field("intents", &self.intents)
            .field("endpoint", &self.public_key.is_some())
            .field("api_url", &self.api_url)
            .field("users", &self.users)
            .field("allow", &self.allow)
            .field("api_timeout", &self.api_timeout)
            .field("shards", &self.shards)
            .field("max_upload_bytes", &self.max_upload_bytes)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// A config with the token and application id, everything else default.
    pub fn new(token: impl Into<String>, application_id: u64) -> Self {
        Config {
            token: token.into(),
            application_id,
            ..Config::default()
        }
    }

    /// The gateway intents (checked names; [`DEFAULT_INTENTS`] when none are configured).
    pub fn gateway_intents(&self) -> Result<GatewayIntents, Error> {
        if self.intents.is_empty() {
            intents_from_names(DEFAULT_INTENTS)
        } else {
            intents_from_names(&self.intents)
        }
    }

    /// The endpoint verifier of the public key, when one is configured.
    pub fn verifier(&self) -> Result<Option<EndpointVerifier>, Error> {
        self.public_key
            .as_deref()
            .map(EndpointVerifier::new)
            .transpose()
    }

    /// Checks what can be checked without Discord: the application id, intents, public key, API
    /// URL, shard count and upload limit.
    pub fn check(&self) -> Result<(), Error> {
        if self.application_id == 0 {
            return Err(Error::BadId(self.application_id.to_string()));
        }
        self.gateway_intents()?;
        self.verifier()?;
        if let Some(url) = &self.api_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(Error::Malformed(
                "api_url must start with http:// or https://".into(),
            ));
        }
        if self.shards == Some(0) {
            return Err(Error::Malformed("shards must be at least 1".into()));
        }
        if self.max_upload_bytes == 0 {
            return Err(Error::Malformed(
                "max_upload_bytes must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// serenity's HTTP client for this config (application id set; requests time out after
    /// [`Config::api_timeout`]; pointed at `api_url`, rate limiter off, when given: serenity's
    /// proxy setting requires it). `connect` builds the bot's one `Http` from it.
    pub fn http(&self) -> Result<Http, Error> {
        let application_id = std::num::NonZeroU64::new(self.application_id)
            .ok_or_else(|| Error::BadId(self.application_id.to_string()))?;
        let timeout = if self.api_timeout.is_zero() {
            DEFAULT_TIMEOUT
        } else {
            self.api_timeout
        };
        let client = reqwest012::Client::builder()
            .use_rustls_tls()
            .timeout(timeout)
            .build()
            .map_err(|e| Error::Malformed(format!("the HTTP client could not be built: {e}")))?;
        let mut builder = HttpBuilder::new(&self.token)
            .client(client)
            .application_id(ApplicationId::from(application_id));
        if let Some(url) = &self.api_url {
            builder = builder
                .proxy(url.trim_end_matches('/'))
                .ratelimiter_disabled(true);
        }
        Ok(builder.build())
    }
}

/// Checks `config`, builds the client and learns the bot's own user id (`GET /users/@me`).
pub async fn connect(config: Config) -> Result<DiscordAdapter, Error> {
    config.check()?;
    let intents = config.gateway_intents()?;
    let verifier = config.verifier()?;
    // One `Http` per bot, shared by the hooks, the outbox and every run of gateway shards, so
    // serenity's rate limiter sees every call.
    let http = Arc::new(config.http()?);
    let me: UserId = http.current_user().await?;
    let gateway = receive::Gateway::new(&http, intents, config.shards).await;
    let identity: Arc<dyn IdentityResolver> = Arc::new(MappedIdentity::new(config.users.clone()));
    let access: Arc<dyn AccessCheck> = Arc::new(AllowList::new(config.allow.iter().cloned()));
    let questions = Arc::new(DiscordQuestions::new(http.clone()));
    let downloads = Arc::new(Downloads::for_files(config.file_policy.clone()));
    Ok(DiscordAdapter {
        shared: Arc::new(receive::Shared::new(
            http, questions, gateway, verifier, me, identity, access,
        )),
        downloads,
        max_upload: config.max_upload_bytes,
        command_guilds: config.command_guilds.clone(),
    })
}

/// A connected Discord bot (cheap to clone): see [`Adapter`].
#[derive(Clone)]
pub struct DiscordAdapter {
    shared: Arc<receive::Shared>,
    downloads: Arc<frogbot_channel::files::Downloads>,
    /// [`Config::max_upload_bytes`].
    max_upload: u64,
    /// [`Config::command_guilds`].
    command_guilds: Vec<u64>,
}

impl std::fmt::Debug for DiscordAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordAdapter")
            .field("me", &self.shared.me)
            .field("endpoint", &self.shared.verifier.is_some())
            .finish_non_exhaustive()
    }
}

impl DiscordAdapter {
    /// Where the agent's replies go.
    pub fn outbox(&self) -> Arc<dyn ChannelOutbox> {
        Arc::new(
            outbox::DiscordOutbox::new(self.shared.http.clone())
                .with_downloads(self.downloads.clone())
                .with_max_upload(self.max_upload),
        )
    }

    /// The bot's own user id.
    pub fn bot_user(&self) -> UserId {
        self.shared.me
    }

    /// The gateway event handler delivering into `engine`, for a serenity `Client` you build
    /// yourself ([`Adapter::start`] and [`DiscordAdapter::run_shards`] connect their own).
    pub fn handler(&self, engine: EngineHandle) -> impl serenity::all::EventHandler + 'static {
        receive::Handler::new(self.shared.clone(), engine)
    }

    /// The bot's number of gateway shards: [`Config::shards`], else what Discord recommends
    /// (`GET /gateway/bot`).
    pub async fn shard_count(&self) -> Result<u32, Error> {
        receive::shard_count(&self.shared).await
    }

    /// Connects the gateway shards `shards` (ids, end excluded) of `total` and delivers their
    /// events into `engine` until `shutdown` is cancelled; then their connections close, and
    /// from that moment none of their events reaches the engine. May be called again, with
    /// another range, once the last call ended (or at once: the ranges of two calls running
    /// together must not overlap), so the shards a process runs can move between processes
    /// (`frogbot serve` splits them among its replicas). An empty range connects nothing and
    /// waits for `shutdown`. Guild events go to shard `(guild_id >> 22) % total`, DMs to
    /// shard 0. Ends with an error when the range is past `total` or Discord refuses the bot
    /// (a bad token, gateway intents not allowed: no use running them again).
    pub async fn run_shards(
        &self,
        engine: EngineHandle,
        shards: std::ops::Range<u32>,
        total: u32,
        shutdown: CancellationToken,
    ) -> Result<(), Error> {
        receive::run_shards(self.shared.clone(), engine, shards, total, shutdown).await
    }
}

impl Adapter for DiscordAdapter {
    fn platform(&self) -> &'static str {
        PLATFORM
    }

    fn questions(&self) -> Arc<dyn ChannelQuestions> {
        self.shared.questions.clone()
    }

    fn identity(&self) -> Arc<dyn IdentityResolver> {
        self.shared.identity.clone()
    }

    fn access(&self) -> Arc<dyn AccessCheck> {
        self.shared.access.clone()
    }

    /// [`DiscordAdapter::outbox`].
    fn outbox(&self) -> Arc<dyn ChannelOutbox> {
        DiscordAdapter::outbox(self)
    }

    fn routes(&self, engine: &EngineHandle) -> Option<axum::Router> {
        receive::router(self.shared.clone(), engine.clone())
    }

    fn start(
        &self,
        engine: EngineHandle,
        shutdown: CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        // Every shard: one process receives for the whole bot.
        let adapter = self.clone();
        Some(tokio::spawn(async move {
            // Registered beside the gateway: a slow answer holds nothing back.
            let (http, models) = (adapter.shared.http.clone(), engine.models());
            let guilds = adapter.command_guilds.clone();
            tokio::spawn(async move { receive::register_commands(&http, &models, &guilds).await });
            let total = match adapter.shard_count().await {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(error = %e, "discord: asking for the shard count failed; one shard");
                    1
                }
            };
            if let Err(e) = adapter.run_shards(engine, 0..total, total, shutdown).await {
                tracing::error!(error = %e, "discord: the gateway connection ended");
            }
        }))
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_shard_count_is_configured_or_discords() {
        let fake =
            crate::testing::FakeDiscord::start(600_000_000_000_000_006, 610_000_000_000_000_006)
                .await;
        let adapter = connect(fake.config()).await.unwrap();
        assert_eq!(
            adapter.shard_count().await.unwrap(),
            1,
            "the fake's default"
        );
        fake.set_shards(4);
        assert_eq!(adapter.shard_count().await.unwrap(), 4, "GET /gateway/bot");
        let adapter = connect(Config {
            shards: Some(3),
            ..fake.config()
        })
        .await
        .unwrap();
        assert_eq!(adapter.shard_count().await.unwrap(), 3, "configured");
        assert!(
            connect(Config {
                shards: Some(0),
                ..fake.config()
            })
            .await
            .is_err()
        );
    }
}
