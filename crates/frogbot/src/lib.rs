//! `frogbot`: the `frogbot serve` binary as a library — configuration, the HTTP API of
//! `serve-contract.md`, the AI SDK UI message stream and the web chat — so tests can start a real
//! server in-process.
//!
//! What it must not do: hold coordination state of its own (turns, queues and questions are the
//! engine's, coordinated through the store), or name platform types (channels come from adapter
//! crates).

pub mod channels;
pub mod config;
pub mod http;
pub mod server;
pub mod stream;
pub mod web;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use frogbot_core::agent::{Engine, EngineConfig, ModelOffer, scripted::demo_model};
use frogbot_core::model::UserId;

pub use config::{Config, ConfigError};

/// Errors of the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is bad (exit code 2).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store or engine failed.
    #[error(transparent)]
    Core(#[from] frogbot_core::Error),
    /// A model provider could not be built.
    #[error("model {0}: {1}")]
    Model(String, String),
    /// Listening failed.
    #[error("listen: {0}")]
    Io(#[from] std::io::Error),
}

/// Builds the engine of a configuration (opening the store and applying migrations).
pub async fn build_engine(config: &Config) -> Result<Engine, Error> {
    frogbot_openai::install_crypto_provider();
    let store = frogbot_core::store::open(&config.database).await?;
    let mut offers = Vec::new();
    if config.models.is_empty() {
        offers.push(ModelOffer {
            id: "demo".into(),
            model: Arc::new(demo_model()),
            reasoning: vec![],
        });
    }
    for m in &config.models {
        let api_key = m.api_key_env.as_ref().and_then(|v| std::env::var(v).ok());
        let model = frogbot_openai::OpenAiCompatible::new(frogbot_openai::OpenAiConfig {
            base_url: m
                .base_url
                .clone()
                .unwrap_or_else(|| "https://api.openai.com/v1".into()),
            api_key,
            model: m.model.clone().unwrap_or_else(|| m.id.clone()),
        })
        .map_err(|e| Error::Model(m.id.clone(), e.to_string()))?;
        offers.push(ModelOffer {
            id: m.id.clone(),
            model: Arc::new(model),
            reasoning: m.reasoning.clone(),
        });
    }
    let engine = Engine::new(
        store,
        offers,
        vec![],
        EngineConfig {
            instructions: config.instructions.clone(),
            max_steps: config.max_steps,
            turn_lease_ms: (config.turn_lease_seconds as i64) * 1000,
            default_model: config.default_model_id(),
            ..Default::default()
        },
    );
    Ok(engine)
}

/// The router for a configuration and engine.
pub fn app(config: &Config, engine: Engine) -> axum::Router {
    let tokens: HashMap<String, UserId> = config
        .users
        .iter()
        .map(|u| (u.token.clone(), UserId::new(u.id.clone())))
        .collect();
    http::router(http::AppState {
        engine,
        tokens: Arc::new(tokens),
    })
}

/// Runs `frogbot serve` until `shutdown` resolves: serves HTTP, runs the job worker, and on
/// shutdown stops accepting requests and lets running turns finish (up to `grace`).
pub async fn serve(
    config: Config,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> Result<(), Error> {
    let channels = channels::open(&config.channels).await?;
    let mut engine = build_engine(&config).await?;
    for ch in &channels {
        engine = engine.with_channel(ch.channel());
    }
    let worker = engine.spawn_worker(Duration::from_millis(500));
    let mut app = app(&config, engine.clone());
    let stop_channels = tokio_util::sync::CancellationToken::new();
    let mut receivers = Vec::new();
    for ch in &channels {
        if let Some(routes) = ch.routes(&engine) {
            app = app.merge(routes);
        }
        receivers.extend(ch.start(engine.clone(), stop_channels.clone()));
        tracing::info!(platform = %ch.channel().platform, "channel started");
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
    server::run(listener, app, &config.server, shutdown, grace).await?;
    stop_channels.cancel();
    for r in receivers {
        let _ = tokio::time::timeout(grace, r).await;
    }
    worker.abort();
    engine.drain(grace).await;
    tracing::info!("stopped");
    Ok(())
}

/// The database URL without its password, for logs.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}
