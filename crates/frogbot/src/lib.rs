//! `frogbot`: the `frogbot serve` binary as a library — configuration, the HTTP API of
//! `serve-contract.md`, the AI SDK UI message stream and the web chat — so tests can start a real
//! server in-process.
//!
//! What it must not do: hold coordination state of its own (turns, queues and questions are the
//! engine's, coordinated through the store), or name platform types (channels come from adapter
//! crates).
//!
//! [`open_store`] picks the backend crate by URL; it is the only code of this crate that names
//! `frogbot_sqlite` / `frogbot_postgres` (`scripts/check-invariants.sh`). The store handle goes to
//! the engine, to `DatabaseClock` (replicas read leases on the database's time) and to `metrics`
//! (the backlog read per scrape); the rest of the crate goes through the `Engine`.
//!
//! TLS: the process installs rustls' `ring` provider at start
//! (`frogbot_openai::install_crypto_provider`). `aws-lc-rs` is in the tree only with `matrix`
//! (matrix-sdk turns on reqwest's `rustls`), and `ring` is required by serenity (rustls through
//! tokio-tungstenite) and teloxide (reqwest `rustls-tls`), so the provider must be chosen
//! explicitly. The cargo features (one per channel, `postgres`, `mcp`, `jemalloc`, `otlp`) are
//! described in `Cargo.toml`; every refusal of a configuration needing a feature left out is one
//! line from `config_error::not_built`.

pub mod ask;
pub mod browser;
pub mod channels;
pub mod check;
pub mod config;
mod config_error;
pub mod events;
pub mod fetch;
pub mod http;
#[cfg(feature = "mcp")]
mod mcp;
#[cfg(feature = "mcp")]
pub mod mcp_server;
pub mod metrics;
pub mod ops;
pub mod ready;
pub mod server;
pub mod stream;
pub mod talk;
pub mod telemetry;
pub mod term;
pub mod web;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use frogbot_core::agent::{Engine, EngineConfig, ModelOffer, scripted::demo_model};
use frogbot_core::model::UserId;

pub use config::{Config, ConfigError};

/// Errors of the server. [`Error::exit_code`] tells a start-up problem (2) from a failure of a
/// running server (1).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is bad, or a channel could not start with it (exit code 2).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The database could not be opened at start (exit code 2); `url` has no password.
    #[error("database {url}: {}", database_message(source))]
    Database {
        /// The database URL, redacted.
        url: String,
        /// What failed.
        source: frogbot_core::StoreError,
    },
    /// The listen address could not be bound (exit code 2).
    #[error("listen {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// What failed.
        source: std::io::Error,
    },
    /// A model provider could not be built (exit code 2).
    #[error("models: {0}: {1}")]
    Model(String, String),
    /// The store or engine failed.
    #[error(transparent)]
    Core(#[from] frogbot_core::Error),
    /// Serving failed.
    #[error("serve: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// The process exit code for this error: 2 for a configuration or start-up problem, else 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Config(_) | Error::Database { .. } | Error::Listen { .. } | Error::Model(..) => {
                2
            }
            Error::Core(_) | Error::Io(_) => 1,
        }
    }
}

/// The database's own words for a store error (without the store's "database:" prefix).
fn database_message(e: &frogbot_core::StoreError) -> String {
    match e {
        frogbot_core::StoreError::Unavailable { message, .. }
        | frogbot_core::StoreError::Migration { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// How long a PostgreSQL server may take to accept a connection at start.
#[cfg(feature = "postgres")]
const POSTGRES_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens the store of `url` (applying migrations): `sqlite://PATH` (the embedded store, created
/// when missing) or `postgres://…`. An unreachable PostgreSQL server fails within
/// `POSTGRES_CONNECT_TIMEOUT`, naming the host.
pub async fn open_store(url: &str) -> Result<frogbot_core::store::DynStore, Error> {
    let failed = |source| Error::Database {
        url: redact(url),
        source,
    };
    #[cfg(not(feature = "postgres"))]
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Err(Error::Config(ConfigError::key(
            "database",
            config_error::not_built("postgres"),
        )));
    }
    #[cfg(feature = "postgres")]
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let store = tokio::time::timeout(
            POSTGRES_CONNECT_TIMEOUT,
            frogbot_postgres::PostgresStore::open(url),
        )
        .await
        .map_err(|_| {
            failed(frogbot_core::StoreError::unavailable_msg(format!(
                "no connection within {} s",
                POSTGRES_CONNECT_TIMEOUT.as_secs()
            )))
        })?
        .map_err(failed)?;
        return Ok(std::sync::Arc::new(store));
    }
    if url.starts_with("sqlite:") {
        let store = frogbot_sqlite::SqliteStore::open(url)
            .await
            .map_err(failed)?;
        return Ok(std::sync::Arc::new(store));
    }
    Err(failed(frogbot_core::StoreError::UnsupportedDatabase {
        url: redact(url),
    }))
}

/// Builds the engine of a configuration (opening the store and applying migrations; with
/// `[metrics]` enabled, every store operation timed: `frogbot_core::metrics::metered`).
pub async fn build_engine(config: &Config) -> Result<Engine, Error> {
    frogbot_openai::install_crypto_provider();
    let mut store = open_store(&config.database).await?;
    if config.metrics.enabled {
        store = frogbot_core::metrics::metered(store);
    }
    let mut offers = Vec::new();
    if config.models.is_empty() {
        offers.push(ModelOffer {
            id: "demo".into(),
            model: Arc::new(demo_model()),
            reasoning: vec![],
        });
    }
    // Each model's own client first, then every offer with its fallbacks (when it has some).
    let mut clients: HashMap<&str, Arc<dyn frogbot_core::agent::Model>> = HashMap::new();
    for m in &config.models {
        let api_key = m.api_key_env.as_ref().and_then(|v| std::env::var(v).ok());
        let model = frogbot_openai::OpenAiCompatible::new(frogbot_openai::OpenAiConfig {
            base_url: m
                .base_url
                .clone()
                .unwrap_or_else(|| "https://api.openai.com/v1".into()),
            api_key,
            model: m.model.clone().unwrap_or_else(|| m.id.clone()),
            max_retries: m.max_retries,
        })
        .map_err(|e| Error::Model(m.id.clone(), e.to_string()))?;
        clients.insert(&m.id, Arc::new(model));
    }
    for m in &config.models {
        let chain = config.fallback_chain(&m.id);
        let model = if chain.is_empty() {
            clients[m.id.as_str()].clone()
        } else {
            let mut with =
                frogbot_openai::WithFallbacks::new(&m.id, clients[m.id.as_str()].clone());
            for f in chain {
                with = with.fallback(&f.id, clients[f.id.as_str()].clone(), f.reasoning.clone());
            }
            Arc::new(with)
        };
        offers.push(ModelOffer {
            id: m.id.clone(),
            model,
            reasoning: m.reasoning.clone(),
        });
    }
    let mut tools = Vec::new();
    if config.tools.fetch_url {
        tools.push(
            fetch::FetchUrl::tool(fetch::FetchLimits {
                max_bytes: config.tools.fetch_max_bytes,
                timeout: std::time::Duration::from_secs(config.tools.fetch_timeout_seconds),
                allow_private: config.tools.fetch_private,
                max_per_turn: config.tools.fetch_url_max_per_turn,
                // Checked in `Config::validate`.
                proxy: config
                    .tools
                    .fetch_proxy
                    .as_deref()
                    .and_then(|p| url::Url::parse(p).ok()),
            })
            .map_err(|e| Error::Config(crate::config::ConfigError::key("tools.fetch_url", e)))?,
        );
    }
    let clock = database_clock(&store).await?;
    let engine = Engine::with_clock(
        store,
        offers,
        tools,
        EngineConfig {
            instructions: config.instructions.clone(),
            max_steps: config.max_steps,
            history_bytes: config.history_bytes,
            files: config.files.limits(),
            stream_idle_timeout: std::time::Duration::from_secs(config.stream_idle_timeout_seconds),
            step_timeout: std::time::Duration::from_secs(config.step_timeout_seconds),
            delivery_grace: std::time::Duration::from_secs(config.delivery_grace_seconds),
            dead_job_retention: std::time::Duration::from_secs(
                config.dead_job_retention_days * 24 * 3_600,
            ),
            turn_lease_ms: (config.turn_lease_seconds as i64) * 1000,
            default_model: config.default_model_id(),
            message_tools: config.tools.messages,
            public_url: config
                .server
                .public_url
                .as_deref()
                .map(|u| u.trim_end_matches('/').to_owned()),
            // Agent principals never approve a call of a turn they drove.
            agents: config
                .agents
                .iter()
                .map(|a| UserId::new(a.id.clone()))
                .collect(),
            ..Default::default()
        },
        clock,
    )
    // The engine asks the same policy as the HTTP API at its agent and web entries.
    .with_policy(
        frogbot_core::policy::Policy::new(config.anonymous_access()),
        principals(config).principals(),
    );
    Ok(engine)
}

/// How often a process reading the database's clock measures its offset again.
const CLOCK_RESYNC: std::time::Duration = std::time::Duration::from_secs(60);

/// The engine's clock: on a database many hosts share (PostgreSQL), this host's clock corrected
/// to the database server's and kept so, so that replicas read every lease on one time whatever
/// their hosts' clocks say; else the system clock.
pub(crate) async fn database_clock(
    store: &frogbot_core::store::DynStore,
) -> Result<Arc<dyn frogbot_core::agent::Clock>, Error> {
    use frogbot_core::agent::{DatabaseClock, SystemClock};
    Ok(
        match DatabaseClock::sync(store, Arc::new(SystemClock))
            .await
            .map_err(|e| Error::Core(e.into()))?
        {
            Some(clock) => {
                clock.keep_in_sync(store, CLOCK_RESYNC);
                Arc::new(clock)
            }
            None => Arc::new(SystemClock),
        },
    )
}

/// How many `GET /api/asks/{id}/wait` one caller holds open at once.
const MAX_WAITS_PER_CALLER: usize = 64;

/// The principals the configuration's tokens name: `[[users]]` and `[[agents]]` (a validated
/// configuration: an agent whose token cannot be read is left out).
pub fn principals(config: &Config) -> http::Principals {
    use frogbot_core::policy::{Agent, Principal, Targets};
    let users = config
        .users
        .iter()
        .map(|u| (u.token.clone(), Principal::User(UserId::new(u.id.clone()))));
    let agents = config.agents.iter().filter_map(|a| {
        let token = a.token().ok()?;
        let targets = Targets::parse(a.targets.iter().cloned()).ok()?;
        Some((
            token,
            Principal::Agent(Agent {
                id: UserId::new(a.id.clone()),
                targets,
            }),
        ))
    });
    http::Principals::new(users.chain(agents))
}

/// The router for a configuration and engine (no channels for `/readyz` to check).
pub fn app(config: &Config, engine: Engine) -> axum::Router {
    app_with_readiness(config, engine, Arc::default())
}

/// The router, with `/readyz` checking the channels `readiness` is told of.
pub fn app_with_readiness(
    config: &Config,
    engine: Engine,
    readiness: Arc<ready::Readiness>,
) -> axum::Router {
    let principals = principals(config);
    let watchers = events::ChatWatchers::new(
        engine.clone(),
        events::StreamLimits {
            total: config.server.max_event_streams,
            per_user: config.server.max_event_streams_per_user,
            poll: config.server.event_poll_seconds.map(Duration::from_secs),
        },
    );
    let api = http::router(http::AppState {
        engine,
        principals: Arc::new(principals),
        policy: frogbot_core::policy::Policy::new(config.anonymous_access()),
        waiters: Arc::new(http::Waiters::new(MAX_WAITS_PER_CALLER)),
        watchers,
        readiness,
        #[cfg(feature = "mcp")]
        mcp: Arc::new(mcp_server::Endpoint::new()),
    })
    .merge(web::routes());
    // The API's routes only: the channels' webhooks are merged after this.
    browser::protect(api, &config.server.allowed_origins)
}

/// Runs `frogbot serve` until `shutdown` resolves: serves HTTP, runs the job worker, and on
/// shutdown stops accepting requests and lets running turns finish (up to `grace`).
pub async fn serve(
    config: Config,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> Result<(), Error> {
    let metrics_token = config.metrics.token()?;
    if config.metrics.enabled {
        // Installed before anything records, so the first turn's metrics are kept.
        metrics::handle();
    }
    let channels = channels::open(&config.channels).await?;
    let mut engine = build_engine(&config).await?;
    for ch in &channels {
        let channel = ch.channel();
        let platform = channel.platform.clone();
        let settings = config
            .channels
            .get(&platform)
            .map(|v| channels::settings(&platform, v))
            .transpose()?
            .unwrap_or_default();
        // Checked against the offers in `Config::validate` already.
        engine = engine
            .with_channel(channel)
            .with_channel_settings(&platform, settings)?;
    }
    #[cfg(feature = "mcp")]
    let (engine, mcp) = mcp::McpTools::attach(&config, engine).await?;
    let worker = engine.spawn_worker(Duration::from_millis(500));
    let readiness = Arc::new(ready::Readiness::default());
    let mut app = app_with_readiness(&config, engine.clone(), readiness.clone());
    let stop_channels = tokio_util::sync::CancellationToken::new();
    let mut receivers = Vec::new();
    for ch in channels {
        if let Some(routes) = ch.routes(&engine.handle()) {
            app = app.merge(routes);
        }
        let platform = ch.channel().platform;
        let single = config
            .channels
            .get(&platform)
            .and_then(|v| channels::single_receiver(&platform, v));
        let receiver = match single {
            None => ch.start(engine.handle(), stop_channels.clone()),
            Some(role) => Some(tokio::spawn(receive_alone(
                Arc::from(ch),
                engine.clone(),
                stop_channels.clone(),
                role,
            ))),
        };
        readiness.channel_started(
            &platform,
            receiver.as_ref().map(tokio::task::JoinHandle::abort_handle),
        );
        receivers.extend(receiver);
        tracing::info!(%platform, "channel started");
    }
    if config.metrics.enabled {
        // After the channels' routes, so their webhooks are counted too.
        app = metrics::install(app, engine.clone(), metrics_token);
    }
    if let Ok((files, _)) = rlimit::getrlimit(rlimit::Resource::NOFILE)
        && config.server.max_connections as u64 + 64 > files
    {
        tracing::warn!(
            max_connections = config.server.max_connections,
            open_file_limit = files,
            "server.max_connections is near the open file limit; connections may fail"
        );
    }
    tracing::info!(addr = %listener.local_addr()?, database = %redact(&config.database), "frogbot serve listening");
    // From the stop signal on, a turn that ends hands its chat's queue on (to the next process or
    // this one restarted) instead of promoting it here.
    let stopping = engine.clone();
    let shutdown = async move {
        shutdown.await;
        stopping.begin_shutdown();
    };
    server::run(listener, app, &config.server, shutdown, grace).await?;
    stop_channels.cancel();
    for r in receivers {
        let _ = tokio::time::timeout(grace, r).await;
    }
    worker.abort();
    engine.drain(grace).await;
    #[cfg(feature = "mcp")]
    if let Some(tools) = &mcp {
        tools.shutdown().await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// How often a standby replica tries to take a channel's single receiver role (so the role moves
/// within this long after its holder dies).
pub const HOLD_RETRY: Duration = Duration::from_secs(2);

/// Runs `channel`'s receiver only while this process holds `role` among all sharing the
/// database ([`Ops::try_hold`](frogbot_core::agent::Ops::try_hold)): a standby replica tries again
/// every [`HOLD_RETRY`] and takes over when the holder dies; a hold that is lost stops the receiver
/// at once. Ends once `stop` is cancelled and the receiver has stopped.
async fn receive_alone(
    channel: Arc<dyn frogbot_channel::Adapter>,
    engine: Engine,
    stop: tokio_util::sync::CancellationToken,
    role: String,
) {
    let platform = channel.platform();
    let mut standing_by = false;
    loop {
        let held = match engine.ops().try_hold(&role).await {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(%platform, %role, error = %e, "could not ask the database who receives for the channel");
                None
            }
        };
        let Some(held) = held else {
            if !standing_by {
                tracing::info!(%platform, %role, "another process receives for this channel; standing by");
                standing_by = true;
            }
            tokio::select! {
                () = tokio::time::sleep(HOLD_RETRY) => continue,
                () = stop.cancelled() => return,
            }
        };
        standing_by = false;
        tracing::info!(%platform, %role, "this process receives for the channel");
        let mine = stop.child_token();
        let Some(mut task) = channel.start(engine.handle(), mine.clone()) else {
            return;
        };
        tokio::select! {
            () = held.lost() => {
                tracing::warn!(%platform, %role, "the channel's receiver role was lost; receiving stops here");
                mine.cancel();
                let _ = (&mut task).await;
            }
            _ = &mut task => {}
        }
        drop(held);
        // Stopped, or the receiver ended on its own: tried again after a pause, not in a loop.
        tokio::select! {
            () = tokio::time::sleep(HOLD_RETRY) => {}
            () = stop.cancelled() => return,
        }
    }
}

/// A URL as it may be printed: the password of its user info and the value of any `password`
/// query parameter become `***` (database URLs, model base URLs, Matrix homeservers).
pub fn redact(url: &str) -> String {
    let mut parsed = match url::Url::parse(url) {
        Ok(u) if !u.cannot_be_a_base() => u,
        _ => return redact_unparsed(url),
    };
    let mut changed = false;
    if parsed.password().is_some() {
        changed |= parsed.set_password(Some("***")).is_ok();
    }
    let secret = |k: &str| k.eq_ignore_ascii_case("password");
    if parsed.query_pairs().any(|(k, _)| secret(&k)) {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(k, v)| {
                let v = if secret(&k) {
                    "***".into()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
        changed = true;
    }
    if changed {
        // `***` stays readable rather than percent-encoded.
        parsed.to_string().replace("%2A%2A%2A", "***")
    } else {
        url.to_string()
    }
}

/// [`redact`] of what does not parse as a URL with an authority: what stands between the user name and the last `@`
/// (after `://`, if any), and any `password=` value.
fn redact_unparsed(url: &str) -> String {
    let mut out = url.to_string();
    let s = out.find("://").map_or(0, |s| s + 3);
    if let Some(at) = out[s..].rfind('@').map(|at| at + s)
        && let Some(colon) = out[s..at].find(':').map(|c| c + s)
    {
        out.replace_range(colon + 1..at, "***");
    }
    let lower = out.to_ascii_lowercase();
    if let Some(p) = lower.find("password=") {
        let start = p + "password=".len();
        let end = out[start..].find('&').map_or(out.len(), |e| e + start);
        out.replace_range(start..end, "***");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn redaction_hides_every_password() {
        assert_eq!(
            redact("postgres://u:s3cret@10.0.0.1:5432/db"),
            "postgres://u:***@10.0.0.1:5432/db"
        );
        assert_eq!(
            redact("postgres://u@db.local/app?password=s3cret&sslmode=require"),
            "postgres://u@db.local/app?password=***&sslmode=require"
        );
        assert_eq!(
            redact("https://bot:s3cret@matrix.example.org"),
            "https://bot:***@matrix.example.org/"
        );
        assert_eq!(redact("sqlite://frogbot.db"), "sqlite://frogbot.db");
        assert_eq!(
            redact("http://127.0.0.1:11434/v1"),
            "http://127.0.0.1:11434/v1"
        );
        for odd in [
            "mysql://u:s3cret@h/db",
            "x://u:s3cret@@h",
            "u:s3cret@h?Password=s3cret",
            "postgres://u:s3cr@t@h/db",
        ] {
            assert!(!redact(odd).contains("s3cr"), "{odd} → {}", redact(odd));
        }
    }
}
