//! A deploy-approval bot for Slack on FrogBot: mention it with `deploy <service> to <env>`, it
//! asks in the thread (Block Kit buttons: Approve / Reject, or "Other…" for a note), and once an
//! approver clicks it runs the `deploy` tool and reports back in the thread.
//!
//! Run (HTTP mode, behind a public HTTPS URL that forwards to port 3000):
//!
//! ```sh
//! SLACK_BOT_TOKEN=xoxb-… SLACK_SIGNING_SECRET=… APPROVERS=U012ABCDEF,U034GHIJKL \
//!   cargo run -p slack-bot
//! ```
//!
//! Socket Mode (no public URL): set `SLACK_APP_TOKEN=xapp-…` instead of `SLACK_SIGNING_SECRET`.
//! `DATABASE_URL` (default `sqlite://slack-bot.db?mode=rwc`) and `LISTEN` (default
//! `0.0.0.0:3000`) are optional. See README.md for the Slack app manifest.
//!
//! The "model" here is scripted so the example runs without an LLM; swap in
//! `frogbot_openai::OpenAiCompatible` (or `frogbot serve` with `[channels.slack]`) for a real one.

use std::sync::Arc;
use std::time::Duration;

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{Engine, EngineConfig, ModelMessage, ModelOffer, ModelRequest, tool_fn};
use frogbot_core::model::QUESTION_TOOL;
use frogbot_slack::channel::{Config, connect};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The `deploy` tool's input.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Deploy {
    service: String,
    env: String,
}

fn last_user(req: &ModelRequest) -> String {
    req.messages
        .iter()
        .rev()
        .find_map(|m| match m {
            ModelMessage::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// `deploy <service> [to <env>]` → (service, env).
fn parse_request(text: &str) -> Option<(String, String)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let i = words
        .iter()
        .position(|w| w.eq_ignore_ascii_case("deploy"))?;
    let service = words.get(i + 1)?.to_string();
    let env = match words.get(i + 2) {
        Some(w) if w.eq_ignore_ascii_case("to") => words.get(i + 3).copied(),
        other => other.copied(),
    }
    .unwrap_or("production");
    Some((service, env.to_string()))
}

/// A scripted agent: asks for approval, deploys when approved, says so in the thread.
fn deploy_agent() -> ScriptedModel {
    ScriptedModel::without_log(|req: &ModelRequest| {
        if let Some(ModelMessage::Tool { name, content, .. }) = req.messages.last() {
            if name == "deploy" {
                let done = serde_json::from_str::<String>(content).unwrap_or(content.clone());
                return reply(&format!("🚀 {done}"));
            }
            let answer: Value = serde_json::from_str(content).unwrap_or(Value::Null);
            let picked = answer["answers"][0]["selected"][0].as_str().unwrap_or("");
            return match (picked, parse_request(&last_user(req))) {
                ("Approve", Some((service, env))) => call(
                    &format!("deploy_{}", uuid::Uuid::new_v4().simple()),
                    "deploy",
                    json!({"service": service, "env": env}),
                ),
                ("Reject", _) => reply("Deployment cancelled."),
                (other, _) => reply(&format!("Not deploying (answer: {other:?}).")),
            };
        }
        match parse_request(&last_user(req)) {
            Some((service, env)) => call(
                &format!("ask_{}", uuid::Uuid::new_v4().simple()),
                QUESTION_TOOL,
                json!({"questions": [{
                    "header": "Deploy",
                    "question": format!("Deploy *{service}* to *{env}*?"),
                    "options": [
                        {"label": "Approve", "description": "Ship it now"},
                        {"label": "Reject", "description": "Do not deploy"}
                    ],
                    "custom": true
                }]}),
            ),
            None => reply("Say `deploy <service> to <env>` and I will ask for approval."),
        }
    })
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let bot_token = env("SLACK_BOT_TOKEN").ok_or("SLACK_BOT_TOKEN is not set")?;
    let config = match (env("SLACK_SIGNING_SECRET"), env("SLACK_APP_TOKEN")) {
        (_, Some(app)) => Config::socket(bot_token, app),
        (Some(secret), None) => Config::http(bot_token, secret),
        (None, None) => return Err("set SLACK_SIGNING_SECRET (HTTP) or SLACK_APP_TOKEN".into()),
    };
    // Approvers: Slack user ids allowed to talk to the bot and answer (empty: everyone); each
    // is FrogBot user `slack:<id>` (no `users` map here).
    let approvers: Vec<String> = env("APPROVERS")
        .map(|a| {
            a.split(',')
                .map(|s| format!("slack:{}", s.trim()))
                .collect()
        })
        .unwrap_or_default();
    let mut config = config.with_allow(approvers);
    if let Some(url) = env("SLACK_API_URL") {
        config = config.with_api_url(url);
    }
    // Checks the tokens and learns the bot's own id (`auth.test`).
    let slack = connect(config).await?;

    let database = env("DATABASE_URL").unwrap_or_else(|| "sqlite://slack-bot.db".into());
    let store = std::sync::Arc::new(frogbot_sqlite::SqliteStore::open(&database).await?);
    let deploy = tool_fn(
        "deploy",
        "Deploys a service to an environment",
        |i: Deploy, _ctx| async move {
            tracing::info!(service = %i.service, env = %i.env, "deploying");
            tokio::time::sleep(Duration::from_millis(500)).await;
            Ok(json!(format!("{} deployed to {}", i.service, i.env)))
        },
    );
    let engine = Engine::new(
        store,
        vec![ModelOffer {
            id: "deploy-agent".into(),
            model: Arc::new(deploy_agent()),
            reasoning: vec![],
        }],
        vec![deploy],
        EngineConfig {
            default_model: "deploy-agent".into(),
            ..Default::default()
        },
    )
    .with_channel(slack.channel());
    let worker = engine.spawn_worker(Duration::from_millis(500));

    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    // HTTP mode: serve the adapter's routes; Socket Mode: it receives on its own.
    match slack.routes(&engine.handle()) {
        Some(routes) => {
            let listen = env("LISTEN").unwrap_or_else(|| "0.0.0.0:3000".into());
            let listener = tokio::net::TcpListener::bind(&listen).await?;
            tracing::info!(%listen, "Slack events at /channels/slack/events, interactivity at /channels/slack/interactivity, the /frogbot command at /channels/slack/commands");
            let stop = shutdown.clone();
            axum::serve(listener, routes)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await?;
        }
        None => {
            if let Some(task) = slack.start(engine.handle(), shutdown.clone()) {
                task.await?;
            }
        }
    }
    worker.abort();
    engine.drain(Duration::from_secs(10)).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_request;

    #[test]
    fn reads_deploy_requests() {
        assert_eq!(
            parse_request("deploy api to staging"),
            Some(("api".into(), "staging".into()))
        );
        assert_eq!(
            parse_request("please deploy web"),
            Some(("web".into(), "production".into()))
        );
        assert_eq!(parse_request("hello"), None);
    }
}
