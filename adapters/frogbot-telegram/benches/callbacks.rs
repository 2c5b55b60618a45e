//! Callback queries against the fake Bot API (`frogbot_telegram::testing`), end to end through
//! teloxide's polling listener, the adapter's per-thread queues, FrogBot's engine on SQLite, and the
//! question hooks.
//!
//! Run: `cargo bench -p frogbot-telegram --features engine,testing --bench callbacks`
//! (`CHATS=n` sets how many chats, each with one open question; default 200).
//!
//! Measures, per callback query, the time from `getUpdates` serving its update to the fake
//! receiving its `answerCallbackQuery` (the answer is recorded before that call is made):
//! - throughput: every chat's click queued at once; callback queries per second from the first
//!   update served to the last answer;
//! - latency: clicks one after another, each pushed once the previous one was answered (a chat
//!   whose question waits, as a person clicks); p50 / p99 / max. Target: p99 ≤ 50 ms.

use std::sync::Arc;
use std::time::{Duration, Instant};

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{Engine, EngineConfig, ModelMessage, ModelOffer, channel_chat_id};
use frogbot_core::model::now_millis;
use frogbot_telegram::PLATFORM;
use frogbot_telegram::channel::{Config, connect};
use frogbot_telegram::testing::{
    Call, FakeBotApi, callback_update, private_chat, text_update, user,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Chat (and user) ids start here.
const FIRST: i64 = 1_000;

fn answered_at(calls: &[Call], query: &str) -> Option<Instant> {
    calls
        .iter()
        .find(|c| c.method == "answercallbackquery" && c.body["callback_query_id"] == query)
        .map(|c| c.at)
}

/// Asks one question per chat and waits until every one is posted and recorded; returns each
/// chat's question message (as the fake holds it) and the callback data of its first button.
async fn ask_everyone(
    fake: &FakeBotApi,
    engine: &Engine,
    chats: &[i64],
    round: usize,
) -> Vec<(i64, Value, String)> {
    for &c in chats {
        fake.push(text_update(
            round as i64,
            private_chat(c, "User"),
            user(c, "User"),
            &format!("deploy round {round}"),
        ));
    }
    let mut out = Vec::new();
    for &c in chats {
        let thread = c.to_string();
        let chat = channel_chat_id(PLATFORM, &thread);
        let tool_call = format!("r{round}");
        let deadline = Instant::now() + Duration::from_secs(60);
        let linked = loop {
            let q = engine
                .store_for_tests()
                .get_question(&chat, &tool_call, now_millis())
                .await
                .unwrap();
            if let Some(q) = q.filter(|q| q.rendered && !q.posting)
                && let Some(m) = q.record.messages.first()
            {
                break m.id.clone();
            }
            assert!(
                Instant::now() < deadline,
                "question of chat {c} never posted"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let id: i64 = linked.rsplit(':').next().unwrap().parse().unwrap();
        let message = fake.sent(id);
        let data = message["reply_markup"]["inline_keyboard"][1][0]["callback_data"]
            .as_str()
            .unwrap()
            .to_owned();
        out.push((c, message, data));
    }
    out
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let n: usize = std::env::var("CHATS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run(n));
}

async fn run(n: usize) {
    let fake = FakeBotApi::start().await;
    let mut config = Config::new("123:BENCH");
    config.api_url = Some(fake.api_url());
    let channel = connect(config).await.unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    // Asks "Env" with the round as the tool call id; reports the answer.
    let model = ScriptedModel::without_log(|req| {
        if let Some(ModelMessage::Tool { content, .. }) = req.messages.last() {
            return reply(&format!("done: {content}"));
        }
        let round = req
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                ModelMessage::User { text } => text.rsplit(' ').next().map(str::to_owned),
                _ => None,
            })
            .unwrap_or_default();
        call(
            &format!("r{round}"),
            "question",
            json!({"questions": [{"header": "Env", "question": "Where?",
                "options": [{"label": "staging"}, {"label": "prod"}]}]}),
        )
    });
    let engine = Engine::new(
        store,
        vec![ModelOffer {
            id: "main".into(),
            model: Arc::new(model),
            reasoning: vec![],
        }],
        vec![],
        EngineConfig::default(),
    )
    .with_channel(channel.channel());
    let shutdown = CancellationToken::new();
    channel.start(engine.handle(), shutdown.clone()).unwrap();

    let chats: Vec<i64> = (0..n as i64).map(|i| FIRST + i).collect();

    // Throughput: every chat's click at once.
    let questions = ask_everyone(&fake, &engine, &chats, 1).await;
    let mut ids = Vec::new();
    for (c, message, data) in &questions {
        let q = format!("burst-{c}");
        let update = fake.push(callback_update(&q, user(*c, "User"), message.clone(), data));
        ids.push((update, q));
    }
    let last = fake
        .wait_for("every burst answer", |calls| {
            ids.iter()
                .map(|(_, q)| answered_at(calls, q))
                .collect::<Option<Vec<_>>>()
                .map(|v| v.into_iter().max().unwrap())
        })
        .await;
    let first_served = ids
        .iter()
        .filter_map(|(u, _)| fake.served_at(*u))
        .min()
        .unwrap();
    let burst = last - first_served;
    let per_second = n as f64 / burst.as_secs_f64();

    // Latency: one click at a time.
    let questions = ask_everyone(&fake, &engine, &chats, 2).await;
    let mut latencies = Vec::new();
    for (c, message, data) in &questions {
        let q = format!("one-{c}");
        let update = fake.push(callback_update(&q, user(*c, "User"), message.clone(), data));
        let answered = fake
            .wait_for("the answer", |calls| answered_at(calls, &q))
            .await;
        latencies.push(answered - fake.served_at(update).unwrap());
    }
    latencies.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("telegram callbacks, {n} chats, SQLite, fake Bot API over loopback HTTP");
    println!(
        "burst:      {n} callback queries in {:.1} ms = {per_second:.0} callback queries/s (getUpdates → answerCallbackQuery)",
        ms(burst)
    );
    println!(
        "one by one: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (getUpdates served → answerCallbackQuery received; target p99 ≤ 50 ms)",
        ms(percentile(&latencies, 0.50)),
        ms(percentile(&latencies, 0.99)),
        ms(*latencies.last().unwrap())
    );
    shutdown.cancel();
}
