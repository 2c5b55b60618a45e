//! Streamed replies on Discord: FrogBot's engine (SQLite in a temp dir), the Discord adapter
//! (serenity's gateway client and `Http`) against the fake Discord, a scripted model,
//! `stream_interval` at its default (1 s).
//!
//! - first-token→first-visible: a DM per turn (its own channel), the model's first delta timed
//!   (an `Instant` taken when the scripted model starts its answer) to the fake first holding a
//!   bot message with that text (create message). 200 turns (`DISCORD_BENCH_TURNS`) of a short
//!   reply (5 deltas, 2 ms apart), one after the other.
//! - API calls per 1,000-token reply: 1,000 deltas of `"tok "` 2 ms apart (≥ 2 s a reply: 3
//!   replies, `DISCORD_BENCH_LONG`), counting the reply's message creates and edits (acks,
//!   typing and the history read not counted).
//! - 40,000-character reply, end of stream→whole text visible (issue 38): 40,000 characters of
//!   sentences in 100 deltas of 400, 5 ms apart (3 replies, `DISCORD_BENCH_HUGE`), each in a DM of
//!   its own; the time from the model's last delta to the fake first showing the whole text in
//!   the bot's messages after their edits, word for word (what a person sees). Target: ≤ 3 s +
//!   the stream interval (1 s); never the 120 s delivery grace.
//!
//! Run: `cargo bench -p frogbot-discord --bench stream`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, reply};
use frogbot_core::agent::{ModelEvent, ModelRequest};
use frogbot_discord::channel;
use frogbot_discord::testing::{self as fake, FakeDiscord};
use tokio_util::sync::CancellationToken;

const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;
const ALICE: u64 = 300_000_000_000_000_003;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The 40,000-character reply.
fn huge_text() -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.chars().count() < 40_000 {
        out.push_str(&format!(
            "Sentence {i} of the huge reply has a few plain words in it."
        ));
        out.push_str(if i % 8 == 7 { "\n\n" } else { " " });
        i += 1;
    }
    out.trim_end().to_owned()
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let turns = env("DISCORD_BENCH_TURNS", 200);
    let long = env("DISCORD_BENCH_LONG", 3);
    let huge = env("DISCORD_BENCH_HUGE", 3);
    let fake = FakeDiscord::start(APP, BOT).await;
    let adapter = channel::connect(fake.config()).await.expect("connect");
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let firsts: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let seen = firsts.clone();
    // When each huge reply's stream ends (after its last pause), by the text of its prompt.
    let ends: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let ended = ends.clone();
    let model = ScriptedModel::without_log(move |req: &ModelRequest| {
        let said = format!("{:?}", req.messages);
        if let Some(at) = said.find("huge reply ") {
            let tag: String = said[at..]
                .chars()
                .take_while(|c| *c != '"' && *c != '\\')
                .collect();
            let chars: Vec<char> = huge_text().chars().collect();
            let mut events = Vec::new();
            for chunk in chars.chunks(400) {
                events.push(ScriptEvent::Event(ModelEvent::TextDelta(
                    chunk.iter().collect(),
                )));
                events.push(ScriptEvent::Pause(Duration::from_millis(5)));
            }
            events.extend(reply(""));
            let n = chars.len().div_ceil(400) as u32;
            let end = Instant::now() + Duration::from_millis(5) * n;
            ended.lock().unwrap().insert(tag, end);
            return events;
        }
        let n = if format!("{:?}", req.messages).contains("long reply") {
            1000
        } else {
            5
        };
        seen.lock().unwrap().push(Instant::now());
        let mut events = Vec::new();
        for i in 0..n {
            if i > 0 {
                events.push(ScriptEvent::Pause(Duration::from_millis(2)));
            }
            events.push(ScriptEvent::Event(ModelEvent::TextDelta("tok ".into())));
        }
        events.extend(reply(""));
        events
    });
    let engine = frogbot_testkit::engine_with(store, model).with_channel(adapter.channel());
    let shutdown = CancellationToken::new();
    let _task = adapter
        .start(engine.handle(), shutdown.clone())
        .expect("the gateway task");
    assert!(fake.wait_ready(Duration::from_secs(20)).await);
    let alice = fake::user(ALICE, "alice", false);
    let bot = BOT.to_string();

    let turn = async |text: &str| -> (u64, Duration) {
        let dm = fake.new_id();
        let m = fake.user_message(dm, None, &alice, text);
        let id = m["id"].as_str().unwrap().to_owned();
        let before = firsts.lock().unwrap().len();
        fake.dispatch("MESSAGE_CREATE", m);
        let deadline = Instant::now() + Duration::from_secs(30);
        let visible = loop {
            let shown = fake.channel_messages(dm).iter().any(|m| {
                m["author"]["id"] == bot.as_str()
                    && m["content"].as_str().is_some_and(|c| c.starts_with("tok"))
            });
            if shown {
                break Instant::now();
            }
            assert!(Instant::now() < deadline, "no text shown");
            tokio::time::sleep(Duration::from_micros(200)).await;
        };
        let first = firsts.lock().unwrap()[before];
        let done = format!("/api/v10/channels/{dm}/messages/{id}/reactions/%E2%9C%85/@me");
        fake.wait_for(0, Duration::from_secs(60), |c| c.path == done)
            .await
            .expect("Done");
        (dm, visible.saturating_duration_since(first))
    };

    let mut lat = Vec::with_capacity(turns);
    for _ in 0..turns {
        lat.push(turn("short reply").await.1);
    }
    lat.sort();
    println!(
        "discord first-token→first-visible: p50 {:.1} ms, p99 {:.1} ms (n={turns})",
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    );

    let (mut calls, mut edits) = (0usize, 0usize);
    for _ in 0..long {
        let (dm, _) = turn("long reply").await;
        let on = format!("/api/v10/channels/{dm}/messages");
        for c in fake.calls() {
            if c.method == "POST" && c.path == on {
                calls += 1;
            } else if c.method == "PATCH" && c.path.starts_with(&on) {
                calls += 1;
                edits += 1;
            }
        }
    }
    println!(
        "discord API calls per 1,000-token reply: {} (of which edits/appends: {}) (mean of {long} replies, acks and typing not counted)",
        calls / long.max(1),
        edits / long.max(1)
    );

    let want: Vec<String> = huge_text().split_whitespace().map(str::to_owned).collect();
    let mut whole = Vec::new();
    for i in 0..huge {
        let dm = fake.new_id();
        let tag = format!("huge reply {i}");
        let m = fake.user_message(dm, None, &alice, &tag);
        let id = m["id"].as_str().unwrap().to_owned();
        fake.dispatch("MESSAGE_CREATE", m);
        let deadline = Instant::now() + Duration::from_secs(130);
        let seen = loop {
            let shown: Vec<String> = fake
                .person_view(&dm.to_string())
                .iter()
                .filter(|m| m.sender == "frogbot")
                .flat_map(|m| {
                    m.text
                        .split_whitespace()
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .collect();
            if shown == want {
                break Instant::now();
            }
            assert!(Instant::now() < deadline, "the whole reply never showed");
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        let end = ends.lock().unwrap()[&tag];
        whole.push(seen.saturating_duration_since(end));
        let done = format!("/api/v10/channels/{dm}/messages/{id}/reactions/%E2%9C%85/@me");
        fake.wait_for(0, Duration::from_secs(60), |c| c.path == done)
            .await
            .expect("Done");
    }
    if !whole.is_empty() {
        whole.sort();
        println!(
            "discord 40,000-char reply, end of stream→whole text visible: median {:.0} ms, max {:.0} ms (n={}; target ≤ 3 s + the 1 s stream interval)",
            whole[whole.len() / 2].as_secs_f64() * 1000.0,
            whole[whole.len() - 1].as_secs_f64() * 1000.0,
            whole.len()
        );
    }
    shutdown.cancel();
}
