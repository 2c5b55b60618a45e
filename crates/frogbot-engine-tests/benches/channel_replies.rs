//! Channel reply overhead: a thread message in, the reply posted to the thread's outbox — what a
//! bot on Slack, Discord, Telegram or Matrix pays per message beside the model and the platform.
//! A zero-latency scripted model (one step, a text reply) and an outbox that posts nothing (it
//! records the moment); every write durable (SQLite: WAL, `synchronous=FULL`, one group-committing
//! writer; PostgreSQL: a private cluster with `fsync` and `synchronous_commit` on).
//!
//! Since issue 18 a channel reply also writes its delivery job with the turn's end, looks for a
//! reply owed before it, and removes the job once posted; this bench measures what that costs.
//! It uses only the API both sides of that change have (`ChannelOutbox::post_reply`,
//! `engine.channels().message`), so the same file builds on a commit before it for a side-by-side
//! run (copy it into a worktree of that commit and add the `[[bench]]` entry).
//!
//! - `c=1`: one thread, messages one after the other (each sent once the previous reply was
//!   posted): p50 / p99 of message → reply posted, and replies per second.
//! - `c=8`: eight threads at once, the same each.
//!
//! ```text
//! cargo bench -p frogbot-engine-tests --bench channel_replies                # both backends
//! cargo bench -p frogbot-engine-tests --bench channel_replies -- sqlite      # one (or `postgres`)
//! ```
//!
//! Sizes: `--messages=N` (300 at c=1, after 20 unmeasured), `--messages8=N` (80 per thread at
//! c=8). One JSON line with every figure comes last.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptedModel, reply};
use frogbot_core::agent::{
    AllowAll, Channel, ChannelMessageOutcome, ChannelOutbox, Engine, EngineConfig, ModelOffer,
    ModelRequest, OutboxDelivery,
};
use frogbot_core::model::{
    PlatformUser, PrefixedIdentity, Thread, ThreadMessage, ThreadMessageMetadata, UiMessage,
    millis_to_iso, now_millis,
};
use frogbot_core::store::DynStore;
use frogbot_postgres::PostgresStore;
use frogbot_sqlite::SqliteStore;
use serde_json::{Value, json};
use tokio::sync::mpsc;

#[derive(Clone, Debug)]
struct Options {
    sqlite: bool,
    postgres: bool,
    messages: usize,
    messages8: usize,
}

impl Options {
    fn parse() -> Self {
        let mut o = Options {
            sqlite: false,
            postgres: false,
            messages: 300,
            messages8: 80,
        };
        let num = |a: &str, p: &str| -> Option<usize> { a.strip_prefix(p)?.parse().ok() };
        for a in std::env::args().skip(1) {
            match a.as_str() {
                "sqlite" => o.sqlite = true,
                "postgres" | "pg" => o.postgres = true,
                a => {
                    if let Some(n) = num(a, "--messages=") {
                        o.messages = n;
                    } else if let Some(n) = num(a, "--messages8=") {
                        o.messages8 = n;
                    }
                }
            }
        }
        if !o.sqlite && !o.postgres {
            o.sqlite = true;
            o.postgres = true;
        }
        o
    }
}

/// An outbox that posts nothing: it tells the waiting sender of that thread its reply arrived.
#[derive(Default)]
struct Posted {
    waiting: Mutex<HashMap<String, mpsc::UnboundedSender<Instant>>>,
}

/// Not a `Draw`: none of the shared delivery loops (the defaults post with `post_reply`).
impl OutboxDelivery for Posted {}

#[async_trait]
impl ChannelOutbox for Posted {
    async fn post_reply(&self, thread: &Thread, _reply: &UiMessage) -> Result<(), BoxError> {
        let now = Instant::now();
        if let Some(tx) = self.waiting.lock().unwrap().get(&thread.id) {
            let _ = tx.send(now);
        }
        Ok(())
    }
}

fn engine(store: DynStore, outbox: Arc<Posted>) -> Engine {
    let model = ScriptedModel::without_log(|_req: &ModelRequest| reply("ok"));
    Engine::new(
        store,
        vec![ModelOffer {
            id: "main".into(),
            model: Arc::new(model),
            reasoning: vec![],
        }],
        vec![],
        EngineConfig::default(),
    )
    .with_channel(Channel {
        platform: "bench".into(),
        questions: None,
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: Some(outbox),
    })
}

fn said(id: String) -> ThreadMessage {
    ThreadMessage {
        id,
        text: "hi".into(),
        author: PlatformUser {
            id: "u1".into(),
            name: None,
            is_bot: false,
        },
        metadata: ThreadMessageMetadata {
            date_sent: millis_to_iso(now_millis()),
        },
        reply_to: None,
        raw: json!(null),
        files: Vec::new(),
        mentions: Vec::new(),
    }
}

/// One thread: `n` messages, each sent once the reply to the one before was posted. Returns the
/// message → posted latencies.
async fn thread_run(engine: &Engine, outbox: &Posted, thread: String, n: usize) -> Vec<Duration> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    outbox.waiting.lock().unwrap().insert(thread.clone(), tx);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let sent = Instant::now();
        let outcome = engine
            .channels()
            .message("bench", &thread, said(format!("{thread}-{i}")))
            .await
            .unwrap();
        assert!(
            matches!(outcome, ChannelMessageOutcome::Sent(_)),
            "{outcome:?}"
        );
        let posted = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("the reply is posted")
            .unwrap();
        out.push(posted - sent);
    }
    out
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

async fn run(backend: &str, store: DynStore, o: &Options) -> Value {
    let outbox = Arc::new(Posted::default());
    let e = engine(store, outbox.clone());
    let stamp = now_millis();
    // Warm-up, then c=1.
    thread_run(&e, &outbox, format!("warm-{stamp}"), 20).await;
    let started = Instant::now();
    let mut c1 = thread_run(&e, &outbox, format!("one-{stamp}"), o.messages).await;
    let c1_rate = c1.len() as f64 / started.elapsed().as_secs_f64();
    c1.sort();
    // c=8.
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..8 {
        let (e, outbox, n) = (e.clone(), outbox.clone(), o.messages8);
        tasks.push(tokio::spawn(async move {
            thread_run(&e, &outbox, format!("eight-{stamp}-{t}"), n).await
        }));
    }
    let mut c8 = Vec::new();
    for t in tasks {
        c8.extend(t.await.unwrap());
    }
    let c8_rate = c8.len() as f64 / started.elapsed().as_secs_f64();
    c8.sort();
    println!(
        "{backend:<9} | c=1: p50 {:.2} ms, p99 {:.2} ms, {:.0} replies/s | c=8: p50 {:.2} ms, p99 {:.2} ms, {:.0} replies/s",
        ms(pct(&c1, 0.5)),
        ms(pct(&c1, 0.99)),
        c1_rate,
        ms(pct(&c8, 0.5)),
        ms(pct(&c8, 0.99)),
        c8_rate
    );
    json!({
        "backend": backend,
        "c1": {"p50_ms": ms(pct(&c1, 0.5)), "p99_ms": ms(pct(&c1, 0.99)), "per_s": c1_rate},
        "c8": {"p50_ms": ms(pct(&c8, 0.5)), "p99_ms": ms(pct(&c8, 0.99)), "per_s": c8_rate},
    })
}

fn main() {
    let o = Options::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "channel reply benchmark: zero-latency model, no-op outbox, release={}",
        !cfg!(debug_assertions)
    );
    let mut results = Vec::new();
    rt.block_on(async {
        if o.sqlite {
            let db = frogbot_testkit::sqlite_db();
            let store = SqliteStore::open(&db.url).await.unwrap();
            results.push(run("sqlite", Arc::new(store), &o).await);
        }
        if o.postgres {
            match frogbot_testkit::PgCluster::shared_durable() {
                Some(c) => {
                    let url = c.create_database();
                    let store = PostgresStore::open(&url).await.unwrap();
                    results.push(run("postgres", Arc::new(store), &o).await);
                }
                None => println!("postgres  | skipped: no PostgreSQL server binaries"),
            }
        }
    });
    println!(
        "{}",
        json!({"bench": "channel_replies", "release": !cfg!(debug_assertions), "results": results})
    );
}
