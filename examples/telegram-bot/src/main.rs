//! How to run (see README.md for the BotFather steps):
//!
//! ```sh
//! TELEGRAM_BOT_TOKEN=123456:ABC… cargo run -p telegram-bot
//! ```
//!
//! Then write to your bot in Telegram: it answers "You said: …", and "ask me something" makes it
//! ask a question with buttons (and a "reply to answer" prompt for your own words).
//!
//! A FrogBot agent with the offline demo model, its chats in a SQLite file (`DATABASE`, default
//! `sqlite://telegram-bot.db`), talking to Telegram through `frogbot_telegram::channel::connect`
//! (the adapter: `channel()` for the engine, `routes()` for the webhook, `start()` to receive):
//! long polling by default; with `TELEGRAM_WEBHOOK_SECRET` set, a webhook served on
//! `LISTEN` (default `127.0.0.1:8787`) at `/channels/telegram/webhook`, registered with Telegram
//! when `TELEGRAM_WEBHOOK_URL` is set. `frogbot serve` with `[channels.telegram]` does the same
//! with real models; this example shows the pieces.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::demo_model;
use frogbot_core::agent::{Engine, EngineConfig, ModelOffer};
use frogbot_telegram::channel::{Config, Receive, connect, parse_url};
use tokio_util::sync::CancellationToken;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    // Both ring and aws-lc-rs are in the tree: pick one before any TLS client is built.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let token = env("TELEGRAM_BOT_TOKEN").ok_or("set TELEGRAM_BOT_TOKEN (see README.md)")?;
    let receive = match env("TELEGRAM_WEBHOOK_SECRET") {
        Some(secret) => Receive::Webhook {
            secret,
            url: env("TELEGRAM_WEBHOOK_URL")
                .map(|u| parse_url(&u, false))
                .transpose()?,
        },
        None => Receive::polling(),
    };
    // No `users` map: Telegram user 42 becomes FrogBot user `telegram:42`; an empty `allow` list
    // lets everyone in.
    let mut config = Config::new(token);
    config.api_url = env("TELEGRAM_API_URL")
        .map(|u| parse_url(&u, true))
        .transpose()?;
    config.receive = receive;
    let channel = connect(config).await?;
    tracing::info!(bot = channel.me().username(), "connected to Telegram");

    let database = env("DATABASE").unwrap_or_else(|| "sqlite://telegram-bot.db".into());
    let store = std::sync::Arc::new(frogbot_sqlite::SqliteStore::open(&database).await?);
    let engine = Engine::new(
        store,
        vec![ModelOffer {
            id: "demo".into(),
            model: Arc::new(demo_model()),
            reasoning: vec![],
        }],
        vec![],
        EngineConfig::default(),
    )
    .with_channel(channel.channel());
    let worker = engine.spawn_worker(Duration::from_millis(500));

    let shutdown = CancellationToken::new();
    let server = match channel.routes(&engine.handle()) {
        Some(router) => {
            let listen = env("LISTEN").unwrap_or_else(|| "127.0.0.1:8787".into());
            let listener = tokio::net::TcpListener::bind(&listen).await?;
            tracing::info!(%listen, "webhook route: POST /channels/telegram/webhook");
            let stop = shutdown.clone();
            Some(tokio::spawn(async move {
                let _ = axum::serve(listener, router)
                    .with_graceful_shutdown(async move { stop.cancelled().await })
                    .await;
            }))
        }
        None => None,
    };
    let receiving = channel.start(engine.handle(), shutdown.clone());

    tokio::signal::ctrl_c().await?;
    tracing::info!("stopping");
    shutdown.cancel();
    if let Some(r) = receiving {
        let _ = tokio::time::timeout(Duration::from_secs(15), r).await;
    }
    if let Some(s) = server {
        let _ = s.await;
    }
    worker.abort();
    engine.drain(Duration::from_secs(15)).await;
    Ok(())
}
