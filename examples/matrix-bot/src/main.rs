//! A Matrix bot on FrogBot in one file: frogbot-matrix's channel (login or restored session,
//! auto-join, sync) with FrogBot's engine on SQLite and the offline `demo` model (it echoes, and
//! asks a question — drawn as a native poll — when a message contains "ask").
//!
//! Run (see README.md for creating the bot account):
//!
//! ```sh
//! MATRIX_HOMESERVER=https://matrix.example.org MATRIX_USER_ID=@frogbot:example.org \
//! MATRIX_PASSWORD=… cargo run -p matrix-bot
//! ```
//!
//! Optional: `MATRIX_STORE` (default `./matrix-bot-store`: matrix-sdk's store and the saved
//! session), `MATRIX_ACCESS_TOKEN` instead of the password, `MATRIX_POLLS=unstable` for clients that
//! only render `org.matrix.msc3381.poll.*`, `FROGBOT_DATABASE` (default
//! `sqlite://matrix-bot.db`), `RUST_LOG`.

#![recursion_limit = "256"]

use std::sync::Arc;
use std::time::Duration;

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::demo_model;
use frogbot_core::agent::{Engine, EngineConfig, ModelOffer};
use frogbot_matrix::channel::{Config, Login, connect};
use frogbot_matrix::convert::parse_user_id;
use frogbot_matrix::render::PollEvents;
use tokio_util::sync::CancellationToken;

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let _ = rustls::crypto::ring::default_provider().install_default();

    let homeserver = var("MATRIX_HOMESERVER").ok_or("set MATRIX_HOMESERVER")?;
    let user_id = var("MATRIX_USER_ID")
        .and_then(|u| parse_user_id(&u))
        .ok_or("set MATRIX_USER_ID to the bot's user id (@name:server)")?;
    let login = match (var("MATRIX_PASSWORD"), var("MATRIX_ACCESS_TOKEN")) {
        (Some(p), _) => Login::Password(p),
        (None, Some(t)) => Login::AccessToken(t),
        (None, None) => return Err("set MATRIX_PASSWORD or MATRIX_ACCESS_TOKEN".into()),
    };
    let store = var("MATRIX_STORE").unwrap_or_else(|| "matrix-bot-store".into());
    let mut config = Config::new(homeserver, user_id, login, store);
    if var("MATRIX_POLLS").as_deref() == Some("unstable") {
        config.poll_events = PollEvents::Unstable;
    }

    // Everyone may talk to the bot (set `config.allow` to FrogBot user ids such as
    // `matrix:@alice:example.org` to restrict it, `config.users` to map Matrix users).
    let adapter = connect(config).await?;
    println!("logged in as {}", adapter.user_id());

    let database = var("FROGBOT_DATABASE").unwrap_or_else(|| "sqlite://matrix-bot.db".into());
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
    .with_channel(adapter.channel());

    let shutdown = CancellationToken::new();
    let worker = engine.spawn_worker(Duration::from_secs(1));
    let sync = adapter
        .start(engine.handle(), shutdown.clone())
        .ok_or("the Matrix adapter has no sync loop")?;
    println!("syncing; invite the bot to a room or DM it (Ctrl-C stops)");
    tokio::signal::ctrl_c().await?;
    shutdown.cancel();
    sync.await?;
    worker.abort();
    engine.drain(Duration::from_secs(10)).await;
    Ok(())
}
