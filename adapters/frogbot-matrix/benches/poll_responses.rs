//! Benchmark (a plain binary, `harness = false`): poll responses per second from Synapse's sync to
//! the recorded answer, and the latency until the poll is ended (`m.poll.end` seen by the person).
//!
//! Run: `bash scripts/synapse.sh && cargo bench -p frogbot-matrix --features engine,testing --bench poll_responses`
//! (`FROGBOT_BENCH_POLLS=N` changes the number of questions, default 40;
//! `FROGBOT_BENCH_CONCURRENCY=C` the responses in flight at once, default 8). It starts its own
//! Synapse on loopback (`frogbot_matrix::testing::synapse`), a bot (the adapter + the engine on SQLite + a scripted model) and one
//! person; the person opens N threads in a DM, each asking a question, then answers all N polls,
//! C at a time.
//! Figures: Synapse's start time; answers/s = N / (last `outcome_at` − first response sent);
//! p50/p99 of (poll end seen − response sent), and of (answer recorded − response sent).

#![recursion_limit = "256"]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{Engine, EngineConfig, ModelMessage, ModelOffer, channel_chat_id};
use frogbot_core::model::now_millis;
use frogbot_matrix::PLATFORM;
use frogbot_matrix::channel::{Config, Login, connect};
use frogbot_matrix::testing::synapse as support;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("FROGBOT_BENCH_POLLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .try_init();
    let Some(hs) = support::synapse().await else {
        eprintln!("no Synapse: run `bash scripts/synapse.sh` first");
        return;
    };
    println!("Synapse start time: {:.2?}", hs.start_time);
    let bot_account = hs.register("benchbot").await;
    let store_dir = tempfile::tempdir().unwrap();
    let test_db = frogbot_testkit::sqlite_db();
    let db = frogbot_testkit::open_store(&test_db.url).await;
    let model = ScriptedModel::new(|req| {
        if let Some(ModelMessage::Tool { .. }) = req.messages.last() {
            return reply("ok");
        }
        call(
            "c1",
            "question",
            json!({"questions": [{"header": "Env", "question": "Where?",
            "options": [{"label": "staging"}, {"label": "prod"}]}]}),
        )
    });
    let channel = connect(Config::new(
        hs.url.clone(),
        bot_account.user_id.clone(),
        Login::Password(bot_account.password.clone()),
        store_dir.path(),
    ))
    .await
    .unwrap();
    let engine = Engine::new(
        db.clone(),
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
    let task = channel
        .start(engine.handle(), shutdown.clone())
        .expect("the sync loop");

    let alice = hs.person(&hs.register("benchalice").await).await;
    let bot = bot_account.user_id.to_string();
    let room = alice.create_room(&[&bot_account.user_id], false).await;
    alice
        .wait_for(&room, 60, "the bot to join", |e| {
            e["type"] == "m.room.member"
                && e["state_key"] == bot.as_str()
                && e["content"]["membership"] == "join"
        })
        .await;

    // N threads, each with a poll.
    let mut roots = Vec::new();
    for i in 0..n {
        let id = alice
            .send(
                &room,
                "m.room.message",
                json!({"msgtype": "m.text", "body": format!("ask {i}")}),
            )
            .await;
        roots.push(id);
    }
    let polls_of = |roots: &[String]| -> HashMap<String, String> {
        alice
            .seen(&room, |e| {
                e["sender"] == bot.as_str() && e["type"] == "m.poll.start"
            })
            .into_iter()
            .filter_map(|e| {
                let root = support::thread_root(&e)?.to_owned();
                roots
                    .contains(&root)
                    .then(|| (root, e["event_id"].as_str().unwrap().to_owned()))
            })
            .collect()
    };
    alice
        .wait_for(&room, 300, "every poll", |_| polls_of(&roots).len() >= n)
        .await;
    let polls = polls_of(&roots);

    // Answer them, `FROGBOT_BENCH_CONCURRENCY` (default 8) responses in flight at once.
    let concurrency: usize = std::env::var("FROGBOT_BENCH_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let permits = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let first = Instant::now();
    let first_ms = now_millis();
    let mut sends = tokio::task::JoinSet::new();
    for root in &roots {
        let poll = polls[root].clone();
        let room = alice.room(&room);
        let permits = permits.clone();
        sends.spawn(async move {
            let _permit = permits.acquire_owned().await.unwrap();
            let t = (Instant::now(), now_millis());
            room.send_raw(
                "m.poll.response",
                json!({"m.selections": ["r0o1"], "m.relates_to": {"rel_type": "m.reference", "event_id": poll}}),
            )
            .await
            .unwrap();
            (poll, t)
        });
    }
    let mut sent_at: HashMap<String, (Instant, i64)> = HashMap::new();
    while let Some(r) = sends.join_next().await {
        let (poll, t) = r.unwrap();
        sent_at.insert(poll, t);
    }
    let send_time = first.elapsed();

    // Recorded answers (the store's outcome_at) and the ends seen by the person.
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut recorded: HashMap<String, i64> = HashMap::new();
    while recorded.len() < n && Instant::now() < deadline {
        for root in &roots {
            if recorded.contains_key(root) {
                continue;
            }
            let chat = channel_chat_id(PLATFORM, &format!("{room}|{root}"));
            if let Ok(Some(q)) = db.get_question(&chat, "c1", now_millis()).await
                && let Some(at) = q.outcome_at
            {
                recorded.insert(root.clone(), at);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ends_seen = |alice: &support::Person| {
        alice
            .seen(&room, |e| {
                e["sender"] == bot.as_str() && e["type"] == "m.poll.end"
            })
            .len()
    };
    alice
        .wait_for(&room, 300, "every poll end", |_| ends_seen(&alice) >= n)
        .await;
    let seen_end: HashMap<String, Instant> = {
        // The person's recorder has no timestamps of arrival: take origin_server_ts of the end
        // (Synapse's clock = this machine's) against the response's send time.
        alice
            .seen(&room, |e| {
                e["sender"] == bot.as_str() && e["type"] == "m.poll.end"
            })
            .into_iter()
            .filter_map(|e| {
                let poll = e["content"]["m.relates_to"]["event_id"]
                    .as_str()?
                    .to_owned();
                let ts = e["origin_server_ts"].as_i64()?;
                let (sent, sent_ms) = sent_at.get(&poll)?;
                Some((
                    poll,
                    *sent + Duration::from_millis((ts - sent_ms).max(0) as u64),
                ))
            })
            .collect()
    };
    let mut end_lat: Vec<f64> = seen_end
        .iter()
        .map(|(poll, at)| (*at - sent_at[poll].0).as_secs_f64() * 1000.0)
        .collect();
    end_lat.sort_by(f64::total_cmp);
    let mut rec_lat: Vec<f64> = roots
        .iter()
        .filter_map(|r| Some((recorded.get(r)? - sent_at[&polls[r]].1) as f64))
        .collect();
    rec_lat.sort_by(f64::total_cmp);
    let last = recorded.values().max().copied().unwrap_or(first_ms);
    let span = (last - first_ms).max(1) as f64 / 1000.0;
    println!(
        "polls answered: {} of {n} (responses sent in {send_time:.2?})",
        recorded.len()
    );
    println!(
        "answers recorded per second (first response sent → last recorded): {:.1}",
        recorded.len() as f64 / span
    );
    println!(
        "response sent → answer recorded: p50 {:.0} ms, p99 {:.0} ms",
        pct(&rec_lat, 0.5),
        pct(&rec_lat, 0.99)
    );
    println!(
        "response sent → poll ended (m.poll.end's server timestamp): p50 {:.0} ms, p99 {:.0} ms",
        pct(&end_lat, 0.5),
        pct(&end_lat, 0.99)
    );
    shutdown.cancel();
    let _ = task.await;
}
