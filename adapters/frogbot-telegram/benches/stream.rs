//! Streamed replies against the fake Bot API: FrogBot's engine on SQLite, the Telegram channel
//! (long polling), a scripted model, `stream_interval` at its default (1 s).
//!
//! Run: `cargo bench -p frogbot-telegram --features engine,testing --bench stream`
//! (`TURNS=n` sets the turns of the latency part, default 200; `LONG=n` the 1,000-token replies,
//! default 5: each takes ~2.5 s of model time).
//!
//! Prints the time from the model emitting its first delta to the fake first holding a message
//! with that text (p50 / p99; target ≤ 300 ms), and the Bot API calls one 1,000-token reply
//! costs (all calls for its chat: reactions, typing, sends, edits).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, reply};
use frogbot_core::agent::{Adapter, ModelEvent, ModelMessage, ModelRequest};
use frogbot_telegram::channel::{Config, connect};
use frogbot_telegram::testing::{Call, FakeBotApi, private_chat, text_update, user};
use tokio_util::sync::CancellationToken;

/// Chat (and user) ids start here.
const FIRST: i64 = 1_000;

type Starts = Arc<Mutex<std::collections::HashMap<String, Instant>>>;

/// `turn N` → "tN " then 4 short deltas; `long N` → "tN " then 999 deltas "tok " 2 ms apart. The
/// time the first delta is emitted is recorded under "tN".
fn model(starts: Starts) -> ScriptedModel {
    ScriptedModel::new(move |req: &ModelRequest| {
        let text = req
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                ModelMessage::User { text } => Some(text.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let n: String = text
            .rsplit(' ')
            .next()
            .unwrap_or_default()
            .chars()
            .filter(char::is_ascii_digit)
            .collect();
        let tag = format!("t{n}");
        let deltas = if text.contains("long") { 999 } else { 4 };
        let mut events = vec![ScriptEvent::Event(ModelEvent::TextDelta(format!("{tag} ")))];
        for _ in 0..deltas {
            events.push(ScriptEvent::Pause(Duration::from_millis(2)));
            events.push(ScriptEvent::Event(ModelEvent::TextDelta("tok ".into())));
        }
        events.extend(reply(""));
        starts.lock().unwrap().insert(tag, Instant::now());
        events
    })
}

fn done(calls: &[Call], chat: i64) -> bool {
    calls.iter().any(|c| {
        c.method == "setmessagereaction"
            && c.body["chat_id"] == chat
            && c.body["reaction"][0]["emoji"] == "👌"
    })
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run(env("TURNS", 200), env("LONG", 5)));
}

async fn run(turns: usize, long: usize) {
    let fake = FakeBotApi::start().await;
    let mut config = Config::new("123:BENCH");
    config.api_url = Some(fake.api_url());
    let channel = connect(config).await.unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let starts: Starts = Arc::default();
    let engine =
        frogbot_testkit::engine_with(store, model(starts.clone())).with_channel(channel.channel());
    let shutdown = CancellationToken::new();
    channel.start(engine.clone(), shutdown.clone()).unwrap();

    let mut latencies = Vec::new();
    for i in 0..turns {
        let chat = FIRST + i as i64;
        fake.push(text_update(
            1,
            private_chat(chat, "P"),
            user(chat, "P"),
            &format!("turn {i}"),
        ));
        let tag = format!("t{i} ");
        let shown = fake
            .wait_for("the first text", |calls| {
                calls
                    .iter()
                    .find(|c| {
                        c.result.as_ref().is_some_and(|r| {
                            r["chat"]["id"] == chat
                                && r["text"].as_str().is_some_and(|t| t.starts_with(&tag))
                        })
                    })
                    .map(|c| c.at)
            })
            .await;
        let start = starts.lock().unwrap()[tag.trim_end()];
        latencies.push(shown.saturating_duration_since(start));
        fake.wait_for("Done", |c| done(c, chat).then_some(())).await;
    }
    latencies.sort();
    let pct = |p: f64| {
        let i = ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1;
        latencies[i].as_secs_f64() * 1000.0
    };
    println!(
        "telegram first-token→first-visible: p50 {:.1} ms, p99 {:.1} ms (n={})",
        pct(0.50),
        pct(0.99),
        latencies.len()
    );

    let (mut all, mut edits) = (0usize, 0usize);
    for i in 0..long {
        let chat = FIRST + 100_000 + i as i64;
        let before = fake.all_calls().len();
        fake.push(text_update(
            1,
            private_chat(chat, "P"),
            user(chat, "P"),
            &format!("long {}", 100_000 + i),
        ));
        fake.wait_for("Done", |c| done(c, chat).then_some(())).await;
        let calls: Vec<Call> = fake.all_calls().split_off(before);
        let mine: Vec<&Call> = calls
            .iter()
            .filter(|c| c.method != "getupdates" && c.body["chat_id"] == chat)
            .collect();
        all += mine.len();
        edits += mine
            .iter()
            .filter(|c| c.method == "editmessagetext")
            .count();
    }
    let long = long.max(1);
    println!(
        "telegram API calls per 1,000-token reply: {} (of which edits/appends: {}) (mean of {long} replies)",
        all / long,
        edits / long
    );
    shutdown.cancel();
}
