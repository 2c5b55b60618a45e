//! discord-bot: a FrogBot agent answering on Discord — mentions open a thread, the agent's
//! questions come as buttons, selects and modals — with FrogBot's engine on a local SQLite file.
//! It is what `frogbot serve` does with `[channels.discord]`, spelt out with the library.
//!
//! Run it (see README.md for creating the application and inviting the bot):
//!
//! ```sh
//! DISCORD_TOKEN=… DISCORD_APPLICATION_ID=… cargo run -p discord-bot
//! # optional: an OpenAI-compatible model instead of the offline demo model
//! OPENAI_API_KEY=… OPENAI_MODEL=gpt-4o-mini [OPENAI_BASE_URL=…] DISCORD_TOKEN=… … cargo run -p discord-bot
//! ```

use std::sync::Arc;

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::demo_model;
use frogbot_core::agent::{Engine, EngineConfig, ModelOffer};
use frogbot_discord::channel::{Config, connect};
use tokio_util::sync::CancellationToken;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(env("RUST_LOG").unwrap_or_else(|| "info".into()))
        .init();
    frogbot_openai::install_crypto_provider();
    let token = env("DISCORD_TOKEN").ok_or("set DISCORD_TOKEN to the bot token")?;
    let application_id = env("DISCORD_APPLICATION_ID")
        .ok_or("set DISCORD_APPLICATION_ID")?
        .parse()?;
    // Checks the config and learns the bot's own user id from Discord. Everyone may talk to the
    // agent (`allow` empty); Discord users are `discord:ID` (`users` maps them to FrogBot users).
    let adapter = connect(Config::new(token, application_id)).await?;

    let model: Arc<dyn frogbot_core::agent::Model> = match env("OPENAI_API_KEY") {
        Some(key) => Arc::new(frogbot_openai::OpenAiCompatible::new(
            frogbot_openai::OpenAiConfig {
                base_url: env("OPENAI_BASE_URL")
                    .unwrap_or_else(|| "https://api.openai.com/v1".into()),
                api_key: Some(key),
                model: env("OPENAI_MODEL").unwrap_or_else(|| "gpt-4o-mini".into()),
                ..Default::default()
            },
        )?),
        None => Arc::new(demo_model()),
    };
    let store = std::sync::Arc::new(
        frogbot_sqlite::SqliteStore::open(
            &env("DATABASE_URL").unwrap_or_else(|| "sqlite://discord-bot.db".into()),
        )
        .await?,
    );
    let engine = Engine::new(
        store,
        vec![ModelOffer {
            id: "main".into(),
            model,
            reasoning: vec![],
        }],
        vec![],
        EngineConfig::default(),
    )
    .with_channel(adapter.channel());
    let worker = engine.spawn_worker(std::time::Duration::from_millis(500));

    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    // The gateway client; it ends once `shutdown` is cancelled (Ctrl-C).
    if let Some(gateway) = adapter.start(engine.handle(), shutdown) {
        gateway.await?;
    }
    worker.abort();
    engine.drain(std::time::Duration::from_secs(10)).await;
    Ok(())
}
