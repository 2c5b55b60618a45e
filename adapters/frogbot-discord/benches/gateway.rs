//! Component clicks through the real gateway `Client` against the fake Discord, into FrogBot's
//! engine on SQLite: clicks per second from dispatch to the recorded answer (the `settled` edit
//! reaching the fake, which happens after the outcome is recorded), and the time from dispatch to
//! the deferred ack (`type 6` callback) reaching the fake. Target: p99 ack ≤ 50 ms.
//!
//! Run: `cargo bench -p frogbot-discord --bench gateway` (`BENCH_CLICKS=N` to change the count).

use std::sync::Arc;
use std::time::{Duration, Instant};

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{
    Engine, EngineConfig, ModelMessage, ModelOffer, ModelRequest, channel_chat_id,
};
use frogbot_core::model::now_millis;
use frogbot_discord::PLATFORM;
use frogbot_discord::channel;
use frogbot_discord::testing::{self as fake, FakeDiscord};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;
const GUILD: u64 = 100_000_000_000_000_001;
const CHANNEL: u64 = 700_000_000_000_000_007;
const WAIT: Duration = Duration::from_secs(120);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn report(name: &str, mut acks: Vec<Duration>) {
    acks.sort();
    println!(
        "{name}: ack p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} clicks)",
        percentile(&acks, 0.5).as_secs_f64() * 1e3,
        percentile(&acks, 0.99).as_secs_f64() * 1e3,
        acks.last().unwrap().as_secs_f64() * 1e3,
        acks.len()
    );
}

async fn setup() -> (
    FakeDiscord,
    Engine,
    CancellationToken,
    frogbot_testkit::TestDb,
) {
    let fake = FakeDiscord::start(APP, BOT).await;
    let adapter = channel::connect(fake.config()).await.unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let model = ScriptedModel::new(|req: &ModelRequest| {
        if let Some(ModelMessage::Tool { content, .. }) = req.messages.last() {
            return reply(&format!("got: {content}"));
        }
        call(
            "c1",
            "question",
            json!({"questions": [{"header": "Colour", "question": "Which colour?",
                "options": [{"label": "red"}, {"label": "green"}]}]}),
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
    .with_channel(adapter.channel());
    let shutdown = CancellationToken::new();
    adapter.start(engine.handle(), shutdown.clone());
    assert!(fake.wait_ready(WAIT).await);
    (fake, engine, shutdown, db)
}

/// Opens `n` threads, each with a question waiting; returns (thread, question message) pairs.
async fn questions(fake: &FakeDiscord, engine: &Engine, n: u64, base: u64) -> Vec<(u64, u64)> {
    let alice = fake::user(300_000_000_000_000_003, "alice", false);
    let from = fake.calls().len();
    for i in 0..n {
        fake.dispatch(
            "MESSAGE_CREATE",
            fake::message(
                base + i,
                CHANNEL,
                Some(GUILD),
                &alice,
                &format!("<@{BOT}> ask {i}"),
                &[fake::user(BOT, "frogbot", true)],
            ),
        );
    }
    let posted = |calls: &[fake::Call]| -> Vec<(u64, u64)> {
        calls
            .iter()
            .filter(|c| c.method == "POST" && c.body["components"].is_array())
            .filter(|c| !c.body["components"].as_array().unwrap().is_empty())
            .map(|c| {
                let thread = c.path.split('/').nth(4).unwrap().parse().unwrap();
                (thread, c.response["id"].as_str().unwrap().parse().unwrap())
            })
            .collect()
    };
    let deadline = Instant::now() + WAIT;
    loop {
        let found = posted(&fake.calls()[from..]);
        if found.len() as u64 == n {
            // …and saved by the engine (so a click finds its record).
            let mut saved = 0;
            for (thread, _) in &found {
                let chat = channel_chat_id(PLATFORM, &thread.to_string());
                if engine
                    .store_for_tests()
                    .get_question(&chat, "c1", now_millis())
                    .await
                    .unwrap()
                    .is_some_and(|q| q.rendered)
                {
                    saved += 1;
                }
            }
            if saved == found.len() {
                return found;
            }
        }
        assert!(Instant::now() < deadline, "questions posted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn click_all(
    fake: &FakeDiscord,
    targets: &[(u64, u64)],
    base: u64,
    burst: bool,
) -> (Vec<Duration>, Duration) {
    let alice = fake::user(300_000_000_000_000_003, "alice", false);
    let from = fake.calls().len();
    let start = Instant::now();
    let mut sent = Vec::new();
    for (i, (thread, message)) in targets.iter().enumerate() {
        let id = base + i as u64;
        let at = fake.dispatch(
            "INTERACTION_CREATE",
            fake::component_interaction(
                id,
                APP,
                *thread,
                *message,
                &alice,
                "fq:0:0:1",
                None,
                &format!("tok-{id}"),
            ),
        );
        sent.push((id, at));
        if !burst {
            let path = format!("/api/v10/interactions/{id}/tok-{id}/callback");
            fake.wait_for(from, WAIT, |c| c.path == path)
                .await
                .expect("ack");
        }
    }
    // Every answer recorded: one settled edit per question.
    let edits = fake
        .wait_for(from, WAIT, |_| {
            fake.calls()[from..]
                .iter()
                .filter(|c| c.method == "PATCH")
                .count()
                == targets.len()
        })
        .await;
    assert!(edits.is_some(), "every click recorded");
    let elapsed = start.elapsed();
    let calls = fake.calls();
    let acks = sent
        .iter()
        .map(|(id, at)| {
            let path = format!("/api/v10/interactions/{id}/tok-{id}/callback");
            let ack = calls[from..]
                .iter()
                .find(|c| c.path == path)
                .expect("acked");
            assert_eq!(ack.body["type"], 6);
            ack.at.duration_since(*at)
        })
        .collect();
    (acks, elapsed)
}

fn main() {
    let n: u64 = std::env::var("BENCH_CLICKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (fake, engine, shutdown, _db) = setup().await;

        // One click at a time: the ack latency of an idle bot.
        let targets = questions(&fake, &engine, n, 910_000_000_000_000_000).await;
        let (acks, elapsed) = click_all(&fake, &targets, 500_000_000_000_000_000, false).await;
        report("sequential", acks);
        println!(
            "sequential: {n} clicks dispatch→recorded in {:.2} s ({:.0} clicks/s)",
            elapsed.as_secs_f64(),
            n as f64 / elapsed.as_secs_f64()
        );

        // A burst: every click dispatched at once.
        let targets = questions(&fake, &engine, n, 920_000_000_000_000_000).await;
        let (acks, elapsed) = click_all(&fake, &targets, 510_000_000_000_000_000, true).await;
        report("burst", acks);
        println!(
            "burst: {n} clicks dispatch→recorded in {:.2} s ({:.0} clicks/s)",
            elapsed.as_secs_f64(),
            n as f64 / elapsed.as_secs_f64()
        );
        shutdown.cancel();
    });
}
