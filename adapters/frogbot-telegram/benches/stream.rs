//! Streamed replies against the fake Bot API: FrogBot's engine on SQLite, the Telegram channel
//! (long polling), a scripted model, `stream_interval` at its default (1 s).
//!
//! Run: `cargo bench -p frogbot-telegram --features engine,testing --bench stream`
//! (`TURNS=n` sets the turns of the latency part, default 200; `LONG=n` the 1,000-token replies,
//! default 5: each takes ~2.5 s of model time; `BIG=n` the 40,000-character replies, default 3
//! in a private chat (message drafts) and 3 in a group (post and edit)).
//!
//! Prints the time from the model emitting its first delta to the fake first holding a message
//! with that text (p50 / p99; target ≤ 300 ms), the Bot API calls one 1,000-token reply
//! costs (all calls for its chat: reactions, typing, sends, edits), and for a 40,000-character
//! streamed reply (issue 38) the time from the model's last delta until what a person sees
//! ([`FakeBotApi::person_view`]) shows the complete text (target: within 3 s plus the stream
//! interval, never the 120 s delivery grace).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, reply};
use frogbot_core::agent::{ModelEvent, ModelMessage, ModelRequest};
use frogbot_telegram::channel::{Config, connect};
use frogbot_telegram::testing::{Call, FakeBotApi, group_chat, private_chat, text_update, user};
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
        if text.contains("big") {
            // 40,000 characters in 200 deltas of 200, 5 ms apart (1 s of writing); the time of
            // the last delta is recorded under "tN".
            let mut events = Vec::new();
            for chunk in big_text().chars().collect::<Vec<_>>().chunks(200) {
                events.push(ScriptEvent::Event(ModelEvent::TextDelta(
                    chunk.iter().collect(),
                )));
                events.push(ScriptEvent::Pause(Duration::from_millis(5)));
            }
            events.extend(reply(""));
            starts
                .lock()
                .unwrap()
                .insert(tag, Instant::now() + Duration::from_millis(5 * 200));
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

/// The 40,000-character reply: numbered lines of words.
fn big_text() -> String {
    let mut text = String::new();
    let mut i = 0;
    while text.len() < 40_000 {
        i += 1;
        text.push_str(&format!(
            "line {i:05} of the long reply, written word by word.\n"
        ));
    }
    text.truncate(40_000);
    text
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
    rt.block_on(run(env("TURNS", 200), env("LONG", 5), env("BIG", 3)));
}

async fn run(turns: usize, long: usize, big: usize) {
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
    channel.start(engine.handle(), shutdown.clone()).unwrap();

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

    // A 40,000-character reply: from the model's last delta until the person sees it whole.
    let want: Vec<String> = big_text().split_whitespace().map(str::to_owned).collect();
    for (place, group) in [
        ("private chat, drafts", false),
        ("group, post and edit", true),
    ] {
        let mut waits = Vec::new();
        for i in 0..big {
            let n = 200_000 + i + usize::from(group) * 1_000;
            let id = -(2_000_000 + n as i64);
            let (chat, thread) = if group {
                (group_chat(id, false), id)
            } else {
                (private_chat(FIRST + n as i64, "P"), FIRST + n as i64)
            };
            let mut update = text_update(1, chat, user(FIRST + n as i64, "P"), &format!("big {n}"));
            if group {
                update["message"]["text"] = format!("/big {n}").into();
                update["message"]["entities"] =
                    serde_json::json!([{"type": "bot_command", "offset": 0, "length": 4}]);
            }
            fake.push(update);
            let seen = fake
                .wait_view(&thread.to_string(), "the whole reply", |seen, _| {
                    let words: Vec<&str> = seen
                        .iter()
                        .filter(|m| m.sender == "FrogBot" && !m.draft)
                        .flat_map(|m| m.text.split_whitespace())
                        .collect();
                    words.len() == want.len() && words.iter().zip(&want).all(|(a, b)| a == b)
                })
                .await;
            let at = Instant::now();
            let end = starts.lock().unwrap()[&format!("t{n}")];
            waits.push(at.saturating_duration_since(end));
            let messages = seen.iter().filter(|m| m.sender == "FrogBot").count();
            assert!(
                seen.iter()
                    .filter(|m| m.sender == "FrogBot" && m.notified)
                    .count()
                    == 1,
                "one notification: {}",
                frogbot_telegram::testing::transcript(&seen)
                    .lines()
                    .filter(|l| l.starts_with('['))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            fake.wait_for("Done", |c| done(c, thread).then_some(()))
                .await;
            if i == 0 {
                println!("telegram 40,000-character reply ({place}): {messages} messages");
            }
        }
        waits.sort();
        if let (Some(min), Some(max)) = (waits.first(), waits.last()) {
            println!(
                "telegram 40,000-character reply ({place}): last delta → whole text seen: min {:.0} ms, max {:.0} ms (n={}; stream interval 1 s, target ≤ 4 s)",
                min.as_secs_f64() * 1000.0,
                max.as_secs_f64() * 1000.0,
                waits.len()
            );
        }
    }
    shutdown.cancel();
}
