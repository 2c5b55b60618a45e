//! Approval click → tool started: a tool wrapped `with_approval` is asked in a Slack thread (the
//! fake Slack behind slack-morphism's real client), and a signed `block_actions` click on its
//! Approve button is POSTed to the interactivity endpoint (`frogbot_slack::channel` on axum);
//! the time runs from the request being sent to the tool's function being entered (the click
//! routed and checked, the outcome recorded in SQLite, the card settled with `chat.update`, the
//! turn resumed, the decision saved, the call started). Sequential clicks (one at a time) and 8
//! at once, each on its own thread. Target (issue 21): p99 ≤ 20 ms on SQLite.
//!
//! Run: `cargo bench -p frogbot-slack --features testing,engine --bench approvals`
//! (`APPROVAL_BENCH_N=N` approvals per level; default 300.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use frogbot_channel::Adapter;
use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{
    ApprovalPolicy, ChannelMessageOutcome, Engine, EngineConfig, ModelMessage, ModelOffer,
    ModelRequest, Sent, tool_fn, with_approval,
};
use frogbot_core::model::{PlatformUser, ThreadMessage, ThreadMessageMetadata, now_millis};
use frogbot_slack::channel::INTERACTIVITY_PATH;
use frogbot_slack::convert::{form_from_payload, sign};
use frogbot_slack::testing::{FakeSlack, SIGNING_SECRET};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// Per chat, who waits to hear that its tool started.
type Started = Arc<Mutex<HashMap<String, oneshot::Sender<Instant>>>>;

fn model() -> ScriptedModel {
    ScriptedModel::without_log(|req: &ModelRequest| {
        if let Some(ModelMessage::Tool { .. }) = req.messages.last() {
            return reply("done");
        }
        call(
            "deploy_1",
            "deploy",
            json!({"service": "api", "version": "1.4.2"}),
        )
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn level(concurrency: usize, n: usize, run: usize) -> Duration {
    let fake = FakeSlack::start().await;
    let slack = frogbot_slack::channel::connect(fake.http_config())
        .await
        .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let started: Started = Arc::default();
    let hook = started.clone();
    let deploy = with_approval(
        tool_fn("deploy", "Deploys", move |_: Value, ctx| {
            let at = Instant::now();
            let hook = hook.clone();
            async move {
                if let Some(tx) = hook.lock().unwrap().remove(ctx.chat_id.as_str()) {
                    let _ = tx.send(at);
                }
                Ok::<_, BoxError>(json!("deployed"))
            }
        }),
        ApprovalPolicy::default(),
    );
    let engine = Engine::new(
        store.clone(),
        vec![ModelOffer {
            id: "main".into(),
            model: Arc::new(model()),
            reasoning: vec![],
        }],
        vec![deploy],
        EngineConfig::default(),
    )
    .with_channel(slack.channel());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = slack
        .routes(&engine.handle())
        .expect("HTTP mode has routes");
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    // Setup (not timed): one thread per approval, each asked by a turn.
    let channel = format!("C{run}");
    let mut threads = Vec::new();
    for i in 0..n {
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
        let card = fake
            .thread_messages(&thread)
            .into_iter()
            .find(|m| m.bot)
            .expect("the approval card");
        let message = format!("{channel}:{}", card.ts);
        let action = fake
            .element(&message, "Approve")
            .expect("an Approve button");
        let body = form_from_payload(&fake.block_actions(
            "U1",
            &message,
            action,
            json!({}),
            &format!("{run}.{i}"),
        ));
        let chat = frogbot_core::agent::channel_chat_id("slack", &thread);
        threads.push((chat.to_string(), body));
    }

    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()
        .unwrap();
    let url = format!("http://{addr}{INTERACTIVITY_PATH}");
    let work = Arc::new(Mutex::new(threads));
    let begin = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (client, url, work, started) =
            (client.clone(), url.clone(), work.clone(), started.clone());
        workers.spawn(async move {
            let mut lat = Vec::new();
            loop {
                let Some((chat, body)) = work.lock().unwrap().pop() else {
                    break;
                };
                let (tx, rx) = oneshot::channel();
                started.lock().unwrap().insert(chat, tx);
                let ts = (now_millis() / 1000).to_string();
                let sig = sign(SIGNING_SECRET, &ts, body.as_bytes()).unwrap();
                let t0 = Instant::now();
                let res = client
                    .post(&url)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .header("x-slack-request-timestamp", ts)
                    .header("x-slack-signature", sig)
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(res.status(), 200);
                let _ = res.bytes().await;
                let at = tokio::time::timeout(Duration::from_secs(30), rx)
                    .await
                    .expect("the tool started")
                    .unwrap();
                lat.push(at.saturating_duration_since(t0));
            }
            lat
        });
    }
    let mut lat = Vec::new();
    while let Some(r) = workers.join_next().await {
        lat.extend(r.unwrap());
    }
    let total = begin.elapsed();
    lat.sort();
    let p99 = percentile(&lat, 0.99);
    println!(
        "concurrency {concurrency}: {} approvals in {:.2} s | click → tool started p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        lat.len(),
        total.as_secs_f64(),
        percentile(&lat, 0.5).as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        lat.last().unwrap().as_secs_f64() * 1e3,
    );
    p99
}

fn main() {
    install_crypto_provider();
    let n: usize = std::env::var("APPROVAL_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let target = Duration::from_millis(20);
    rt.block_on(async {
        let p99 = level(1, n, 1).await;
        println!(
            "target p99 ≤ 20 ms at concurrency 1: {}",
            if p99 <= target { "met" } else { "MISSED" }
        );
        level(8, n, 8).await;
    });
}

/// rustls has two providers in this tree: pick one before any client is built.
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
