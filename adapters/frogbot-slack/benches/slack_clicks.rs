//! Signed `block_actions` deliveries per second through the HTTP interactivity endpoint
//! (`frogbot_slack::channel` on axum), each routed to its question and the winning click recorded
//! durably in SQLite; two clicks per question (one wins, one is answered `stale`), at concurrency
//! 1, 8 and 64 on loopback. Reports throughput, ack latency (p50/p99/max: request sent → `200`
//! received) and the process's peak resident memory (`VmHWM`).
//!
//! Run: `cargo bench -p frogbot-slack --features testing --bench slack_clicks`
//! (`SLACK_BENCH_QUESTIONS=N` questions per level; default 1500, 300 at concurrency 1;
//! `SLACK_BENCH_ACK_FIRST=1` acknowledges before processing, to show the ack latency alone.)
//!
//! Everything runs in this one process — the server, the fake Slack (`frogbot_slack::testing`:
//! the Web API the hooks call — `chat.update` for the winner, `chat.postEphemeral` for the stale
//! click, `chat.postMessage` for the agent's follow-up — which records every call and keeps every
//! message) and the load generator — so the memory figure is an upper bound for the server and
//! the throughput shares the machine's cores with the client and the fake.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{
    ChannelMessageOutcome, Engine, EngineConfig, ModelMessage, ModelOffer, ModelRequest, Sent,
    channel_chat_id,
};
use frogbot_core::model::{PlatformUser, ThreadMessage, ThreadMessageMetadata, now_millis};
use frogbot_slack::channel::INTERACTIVITY_PATH;
use frogbot_slack::convert::{form_from_payload, sign};
use frogbot_slack::testing::{FakeSlack, SIGNING_SECRET};
use serde_json::{Value, json};

fn asking_model() -> ScriptedModel {
    ScriptedModel::without_log(|req: &ModelRequest| {
        if let Some(ModelMessage::Tool { .. }) = req.messages.last() {
            return reply("ok");
        }
        call(
            &format!("q{}", req.messages.len()),
            "question",
            json!({"questions": [{"header": "Go", "question": "Ship it?",
                   "options": [{"label": "Yes"}, {"label": "No"}]}]}),
        )
    })
}

/// A posted question: its message and the payload of a click on its first button.
#[derive(Clone)]
struct Question {
    channel: String,
    root: String,
    msg_ts: String,
}

fn vm_hwm_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn click_body(fake: &FakeSlack, q: &Question, user: &str, trigger: &str) -> String {
    let message = format!("{}:{}", q.channel, q.msg_ts);
    let action = fake
        .element(&message, "Yes")
        .expect("the question shows a Yes button");
    form_from_payload(&fake.block_actions(user, &message, action, json!({}), trigger))
}

async fn level(concurrency: usize, questions: usize, run: usize) {
    let fake = FakeSlack::start().await;
    let mut config = fake.http_config();
    if ack_first() {
        config.ack_deadline = Duration::ZERO;
    }
    let slack = frogbot_slack::channel::connect(config).await.unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let engine = Engine::new(
        store.clone(),
        vec![ModelOffer {
            id: "main".into(),
            model: Arc::new(asking_model()),
            reasoning: vec![],
        }],
        vec![],
        EngineConfig::default(),
    )
    .with_channel(slack.channel());
    let sl = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server_addr = sl.local_addr().unwrap();
    let app = slack
        .routes(&engine.handle())
        .expect("HTTP mode has routes");
    let server_task = tokio::spawn(async move { axum::serve(sl, app).await.unwrap() });

    // Setup (not timed): one thread per question, each asked by a turn and posted to the fake.
    let channel = format!("C{run}");
    let sem = Arc::new(tokio::sync::Semaphore::new(16));
    let mut setup = tokio::task::JoinSet::new();
    for i in 0..questions {
        let (engine, sem, channel) = (engine.clone(), sem.clone(), channel.clone());
        setup.spawn(async move {
            let _p = sem.acquire().await.unwrap();
            let root = format!("1700000000.{i:06}");
            let thread = format!("{channel}:{root}");
            let msg = ThreadMessage {
                id: thread.clone(),
                text: "deploy".into(),
                author: PlatformUser {
                    id: "U1".into(),
                    name: None,
                    is_bot: false,
                },
                metadata: ThreadMessageMetadata {
                    date_sent: "2023-11-14T22:13:20.000Z".into(),
                },
                reply_to: None,
                raw: Value::Null,
                files: Vec::new(),
                mentions: Vec::new(),
            };
            match engine
                .channels()
                .message("slack", &thread, msg)
                .await
                .unwrap()
            {
                ChannelMessageOutcome::Sent(Sent::Started(h)) => {
                    h.done.await.unwrap().unwrap();
                }
                other => panic!("setup: {other:?}"),
            }
        });
    }
    while let Some(r) = setup.join_next().await {
        r.unwrap();
    }
    let qs: Vec<Question> = fake
        .calls("chat.postMessage")
        .into_iter()
        .filter(|c| c.body["blocks"].is_array())
        .map(|c| {
            let channel = c.body["channel"].as_str().unwrap_or_default().to_string();
            let root = c.body["thread_ts"].as_str().unwrap_or_default().to_string();
            let msg_ts = fake
                .thread_messages(&format!("{channel}:{root}"))
                .into_iter()
                .find(|m| m.bot)
                .expect("the posted question")
                .ts;
            Question {
                channel,
                root,
                msg_ts,
            }
        })
        .collect();
    // Two clicks per question, by different people, next to each other in the queue.
    let bodies: Arc<Vec<String>> = Arc::new(
        qs.iter()
            .enumerate()
            .flat_map(|(i, q)| {
                [
                    click_body(&fake, q, "UA", &format!("{run}.{i}.a")),
                    click_body(&fake, q, "UB", &format!("{run}.{i}.b")),
                ]
            })
            .collect(),
    );
    let calls_before = fake.count();

    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()
        .unwrap();
    let url = format!("http://{server_addr}{INTERACTIVITY_PATH}");
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (client, url, next, bodies) =
            (client.clone(), url.clone(), next.clone(), bodies.clone());
        workers.spawn(async move {
            let mut lat = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(body) = bodies.get(i) else { break };
                let ts = (now_millis() / 1000).to_string();
                let sig = sign(SIGNING_SECRET, &ts, body.as_bytes()).unwrap();
                let t0 = Instant::now();
                let res = client
                    .post(&url)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .header("x-slack-request-timestamp", ts)
                    .header("x-slack-signature", sig)
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(res.status(), 200);
                let _ = res.bytes().await;
                lat.push(t0.elapsed());
            }
            lat
        });
    }
    let mut lat: Vec<Duration> = Vec::new();
    while let Some(r) = workers.join_next().await {
        lat.extend(r.unwrap());
    }
    let acked = start.elapsed();
    // Every answer recorded durably: the store says so for every question (in ack-first mode,
    // wait until the background processing has recorded them all).
    let answered_now = || async {
        let mut answered = 0;
        for q in &qs {
            let chat = channel_chat_id("slack", &format!("{}:{}", q.channel, q.root));
            let found = store
                .questions_by_platform_message(
                    "slack",
                    &format!("{}:{}", q.channel, q.msg_ts),
                    now_millis(),
                )
                .await
                .unwrap();
            let row = &found[0];
            assert_eq!(row.chat_id, chat);
            if row.outcome.is_some() {
                answered += 1;
            }
        }
        answered
    };
    let mut answered = answered_now().await;
    let give_up = Instant::now() + Duration::from_secs(300);
    while answered < questions && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(50)).await;
        answered = answered_now().await;
    }
    let recorded = start.elapsed();
    let calls: Vec<String> = fake.all_calls()[calls_before..]
        .iter()
        .map(|c| c.method.clone())
        .collect();
    let stale = calls.iter().filter(|m| *m == "chat.postEphemeral").count();
    let updates = calls.iter().filter(|m| *m == "chat.update").count();
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    let n = bodies.len();
    println!(
        "concurrency {concurrency:>2}: {n} deliveries acked in {:.2} s = {:>6.0}/s, all answers recorded after {:.2} s = {:>6.0} deliveries/s | ack p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms | answered {answered}/{questions}, chat.update {updates}, stale notes {stale} | VmHWM {} MB",
        acked.as_secs_f64(),
        n as f64 / acked.as_secs_f64(),
        recorded.as_secs_f64(),
        n as f64 / recorded.as_secs_f64(),
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        lat[lat.len() - 1].as_secs_f64() * 1e3,
        vm_hwm_kb().unwrap_or(0) / 1024,
    );
    assert_eq!(answered, questions, "every question answered once");
    server_task.abort();
    engine.drain(Duration::from_secs(5)).await;
}

/// `SLACK_BENCH_ACK_FIRST=1`: acknowledge at once and process in the background
/// (`ack_deadline = 0`) instead of waiting for the delivery to be recorded.
fn ack_first() -> bool {
    std::env::var("SLACK_BENCH_ACK_FIRST").is_ok_and(|v| v == "1")
}

const USAGE: &str = "cargo bench -p frogbot-slack --features testing --bench slack_clicks
  env SLACK_BENCH_QUESTIONS=N  questions per level (default 1500; a fifth, at least 50, at concurrency 1)
  env SLACK_BENCH_ACK_FIRST=1  acknowledge first and record in the background (ack_deadline = 0)
Prints, per concurrency level (1, 8, 64): deliveries/s acked and recorded, ack p50/p99/max, and the
process's peak resident memory (VmHWM); the peak again at the end.";

fn main() {
    if std::env::args().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let n: usize = std::env::var("SLACK_BENCH_QUESTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    println!(
        "mode: {}",
        if ack_first() {
            "ack first, record in the background (ack_deadline = 0)"
        } else {
            "record, then ack (ack_deadline = 2.5 s)"
        }
    );
    rt.block_on(async {
        level(1, (n / 5).max(50), 1).await;
        level(8, n, 8).await;
        level(64, n, 64).await;
    });
    println!(
        "peak resident memory of the process (server + fake Slack + load generator): {} MB",
        vm_hwm_kb().unwrap_or(0) / 1024
    );
}
