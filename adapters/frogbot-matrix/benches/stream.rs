//! Streamed replies against the fake homeserver (`frogbot_matrix::testing::FakeHomeserver`):
//! FrogBot's engine on SQLite, the Matrix channel's sync loop, a scripted model,
//! `stream_interval` at its default (1 s).
//!
//! Run: `cargo bench -p frogbot-matrix --features engine,testing --bench stream` (`TURNS=n` sets
//! the turns of the latency part, default 200; `LONG=n` the 1,000-token replies, default 3: each
//! takes ~2.5 s of model time; `HUGE=n` the 40,000-character replies, default 3).
//!
//! The 40,000-character part prints the time from the model's last delta to the fake first
//! showing the whole reply (the visible text of the thread's messages, after their edits, word
//! for word; target ≤ 3 s + the stream interval: nothing waits for the 120 s delivery grace).
//!
//! With Synapse installed (`bash scripts/synapse.sh`; `SYNAPSE=0` skips it) the same
//! 40,000-character reply runs once more against a real Synapse, in an encrypted DM, and the time
//! is read from a second real client (the person's), as they would see it.
//!
//! Prints the time from the model emitting its first delta to the fake first holding a message
//! with that text (p50 / p99; target ≤ 300 ms; the fake is watched for the event, so the time
//! includes the watcher's wake-up), and the client-server calls one 1,000-token reply costs (the
//! events the bot sent in the room: reactions, redactions, the message, its edits).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, reply};
use frogbot_core::agent::{ModelEvent, ModelMessage, ModelRequest};
use frogbot_matrix::channel::{Config, Login, connect};
use frogbot_matrix::testing::{BOT_PASSWORD, FakeHomeserver};
use matrix_sdk::ruma::OwnedUserId;
use serde_json::json;
use tokio_util::sync::CancellationToken;

type Starts = Arc<Mutex<std::collections::HashMap<String, Instant>>>;

/// `turn N` → "tN " then 4 short deltas; `long N` → "tN " then 999 deltas "tok " 2 ms apart.
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
        if text.contains("huge") {
            // "tN " then 40,000 characters of sentences in 100 deltas 5 ms apart; the stream's
            // end is noted as `end-tN`, after the last pause.
            let huge = huge_text(&tag);
            let chars: Vec<char> = huge.chars().collect();
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
            starts.lock().unwrap().insert(format!("end-{tag}"), end);
            return events;
        }
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

/// The 40,000-character reply of turn `tag`.
fn huge_text(tag: &str) -> String {
    let mut out = format!("{tag} ");
    let mut i = 0;
    while out.len() < 40_000 {
        out.push_str(&format!(
            "Sentence {i} of a long reply has some words in it."
        ));
        out.push_str(if i % 8 == 7 { "\n\n" } else { " " });
        i += 1;
    }
    out.trim_end().to_owned()
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
    rt.block_on(run(env("TURNS", 200), env("LONG", 3), env("HUGE", 3)));
    if env("SYNAPSE", 1) == 1 {
        rt.block_on(huge_on_synapse());
    }
}

/// The 40,000-character reply in an encrypted DM on a real Synapse, timed from the model's last
/// delta to the person's client showing the whole text (the thread's messages after their
/// edits, word for word).
async fn huge_on_synapse() {
    use frogbot_matrix::testing::synapse;
    let Some(hs) = synapse::synapse().await else {
        println!("matrix on Synapse: skipped (Synapse is not installed: bash scripts/synapse.sh)");
        return;
    };
    let account = hs.register("frogbot").await;
    let store = tempfile::tempdir().unwrap();
    let channel = connect(Config::new(
        hs.url.clone(),
        account.user_id.clone(),
        Login::Password(account.password.clone()),
        store.path(),
    ))
    .await
    .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let starts: Starts = Arc::default();
    let engine = frogbot_testkit::engine_with(
        frogbot_testkit::open_store(&db.url).await,
        model(starts.clone()),
    )
    .with_channel(channel.channel());
    let shutdown = CancellationToken::new();
    let task = channel.start(engine.handle(), shutdown.clone()).unwrap();
    let alice = hs.person(&hs.register("alice").await).await;
    let bot = account.user_id.clone();
    let room = alice.create_room(&[&bot], true).await;
    alice
        .wait_for(&room, 60, "the bot to join", |e| {
            e["type"] == "m.room.member"
                && e["state_key"] == bot.as_str()
                && e["content"]["membership"] == "join"
        })
        .await;
    let tag = "t300000";
    let asked = alice
        .send(
            &room,
            "m.room.message",
            json!({"msgtype": "m.text", "body": "huge 300000"}),
        )
        .await;
    let want: Vec<String> = huge_text(tag)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let visible = || -> Vec<String> {
        let seen = alice.seen(&room, |_| true);
        let mut out = Vec::new();
        for m in seen.iter().filter(|e| {
            e["sender"] == bot.as_str()
                && e["type"] == "m.room.message"
                && synapse::thread_root(e) == Some(asked.as_str())
                && e["content"]["m.relates_to"]["rel_type"] != "m.replace"
        }) {
            let id = m["event_id"].as_str().unwrap_or_default();
            let latest = seen.iter().rev().find(|e| {
                e["content"]["m.relates_to"]["rel_type"] == "m.replace"
                    && e["content"]["m.relates_to"]["event_id"] == id
            });
            let shown = match latest {
                Some(e) => e["content"]["m.new_content"]["body"].as_str(),
                None => m["content"]["body"].as_str(),
            };
            out.extend(
                shown
                    .unwrap_or_default()
                    .split_whitespace()
                    .map(str::to_owned),
            );
        }
        out
    };
    alice
        .wait_for(&room, 200, "the whole reply", |_| visible() == want)
        .await;
    let seen = Instant::now();
    let end = starts.lock().unwrap()[&format!("end-{tag}")];
    println!(
        "matrix on Synapse (encrypted DM, read by the person's client): 40,000-char reply, end of stream→whole text visible: {:.0} ms (target ≤ 3 s + the 1 s stream interval)",
        seen.saturating_duration_since(end).as_secs_f64() * 1000.0
    );
    shutdown.cancel();
    let _ = task.await;
}

async fn run(turns: usize, long: usize, huge: usize) {
    let fake = FakeHomeserver::start().await;
    let store = tempfile::tempdir().unwrap();
    let channel = connect(Config::new(
        fake.url(),
        fake.bot().to_owned(),
        Login::Password(BOT_PASSWORD.into()),
        store.path(),
    ))
    .await
    .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let starts: Starts = Arc::default();
    let engine = frogbot_testkit::engine_with(
        frogbot_testkit::open_store(&db.url).await,
        model(starts.clone()),
    )
    .with_channel(channel.channel());
    let shutdown = CancellationToken::new();
    let _task = channel.start(engine.handle(), shutdown.clone()).unwrap();
    let alice = OwnedUserId::try_from("@alice:fake.test").unwrap();
    let room = fake.create_room(&[&alice]);
    let bot = fake.bot().to_string();
    let text = |body: String| json!({"msgtype": "m.text", "body": body});

    let mut latencies = Vec::new();
    for i in 0..turns {
        let said = fake.inject(&room, &alice, "m.room.message", text(format!("turn {i}")));
        let tag = format!("t{i} ");
        fake.wait_for(&room, 60, "the first text", |e| {
            e["sender"] == bot.as_str()
                && e["type"] == "m.room.message"
                && e["content"]["body"]
                    .as_str()
                    .is_some_and(|b| b.starts_with(&tag))
        })
        .await;
        let shown = Instant::now();
        let start = starts.lock().unwrap()[tag.trim_end()];
        latencies.push(shown.saturating_duration_since(start));
        let id = format!("{room}|{said}");
        fake.wait_for(&room, 60, "Done", |_| fake.bot_reactions(&id) == ["✅"])
            .await;
    }
    latencies.sort();
    let pct = |p: f64| {
        let i = ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1;
        latencies[i].as_secs_f64() * 1000.0
    };
    println!(
        "matrix first-token→first-visible: p50 {:.1} ms, p99 {:.1} ms (n={})",
        pct(0.50),
        pct(0.99),
        latencies.len()
    );

    let (mut all, mut edits) = (0usize, 0usize);
    for i in 0..long {
        let before = fake.events(&room).len();
        let typed = fake.typing(&room).len();
        let said = fake.inject(
            &room,
            &alice,
            "m.room.message",
            text(format!("long {}", 100_000 + i)),
        );
        let id = format!("{room}|{said}");
        fake.wait_for(&room, 60, "Done", |_| fake.bot_reactions(&id) == ["✅"])
            .await;
        let events = fake.events(&room).split_off(before);
        let mine: Vec<_> = events
            .iter()
            .filter(|e| e["sender"] == bot.as_str() && e["type"] != "m.room.member")
            .collect();
        all += mine.len() + fake.typing(&room).len() - typed;
        edits += mine
            .iter()
            .filter(|e| e["content"]["m.relates_to"]["rel_type"] == "m.replace")
            .count();
    }
    let long = long.max(1);
    println!(
        "matrix API calls per 1,000-token reply: {} (of which edits/appends: {}) (mean of {long} replies)",
        all / long,
        edits / long
    );

    let mut whole = Vec::new();
    for i in 0..huge {
        let n = 200_000 + i;
        let said = fake.inject(&room, &alice, "m.room.message", text(format!("huge {n}")));
        let tag = format!("t{n}");
        let want: Vec<String> = huge_text(&tag)
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        let root = said.to_string();
        let visible = || -> Vec<String> {
            fake.events(&room)
                .iter()
                .filter(|e| {
                    e["sender"] == bot.as_str()
                        && e["type"] == "m.room.message"
                        && e["content"]["m.relates_to"]["rel_type"] == "m.thread"
                        && e["content"]["m.relates_to"]["event_id"] == root.as_str()
                })
                .flat_map(|e| {
                    let t = fake.shown_text(&format!("{room}|{}", e["event_id"].as_str().unwrap()));
                    t.split_whitespace().map(str::to_owned).collect::<Vec<_>>()
                })
                .collect()
        };
        fake.wait_for(&room, 200, "the whole reply", |_| visible() == want)
            .await;
        let seen = Instant::now();
        let end = starts.lock().unwrap()[&format!("end-{tag}")];
        whole.push(seen.saturating_duration_since(end));
        let id = format!("{room}|{said}");
        fake.wait_for(&room, 60, "Done", |_| fake.bot_reactions(&id) == ["✅"])
            .await;
    }
    if !whole.is_empty() {
        whole.sort();
        println!(
            "matrix 40,000-char reply, end of stream→whole text visible: median {:.0} ms, max {:.0} ms (n={}; target ≤ 3 s + the 1 s stream interval)",
            whole[whole.len() / 2].as_secs_f64() * 1000.0,
            whole[whole.len() - 1].as_secs_f64() * 1000.0,
            whole.len()
        );
    }
    shutdown.cancel();
}
