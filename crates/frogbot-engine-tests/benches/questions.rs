//! Question engine benchmarks, zero-latency scripted model, every write durable (SQLite through
//! `frogbot_sqlite::SqliteStore`: a file in WAL mode with `synchronous=FULL`, one writer thread
//! that group-commits; PostgreSQL through `frogbot_postgres::PostgresStore` on a private cluster
//! with `fsync` and `synchronous_commit` on).
//!
//! 1. Latency from a channel interaction (a button click) arriving to the agent's next model call
//!    starting: p50 / p99.
//! 2. Full question cycles per second — a new chat, a step that calls `question` (ask), the answer
//!    (an HTTP-style settle), the turn continued, a step that replies (the final reply) — at
//!    concurrency 1 and 8.
//!
//! Per scenario it also prints, for SQLite, the writer's group commit (`SqliteStore::stats()`:
//! commits/s and operations per commit), and for PostgreSQL the writing transactions per cycle.
//! The load average at the start is printed first; one table per backend and, last, one JSON line
//! with every figure.
//!
//! ```text
//! cargo bench -p frogbot-engine-tests --bench questions                # both backends
//! cargo bench -p frogbot-engine-tests --bench questions -- sqlite      # one backend (or `postgres`)
//! ```
//!
//! `--lean-model` plays the same script without `ScriptedModel`'s request log. Sizes:
//! `--clicks=N` (300 measured clicks, after 20 unmeasured), `--cycles=N` (200 cycles at c=1),
//! `--cycles8=N` (60 cycles per task at c=8). Unknown arguments (such as the `--bench` cargo
//! passes) are ignored.

use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{
    AllowAll, Channel, ChannelMessageOutcome, Engine, EngineConfig, InteractionOutcome,
    ModelMessage, ModelOffer, ModelRequest, SendMessage, Sent, Settle, channel_chat_id,
};
use frogbot_core::model::{
    ActionEvent, Changed, ChannelQuestions, ChatId, Delivery, HookArgs, Interaction, MessagePart,
    NoticeTo, ParseArgs, ParseResult, PlatformUser, PrefixedIdentity, QuestionAnswer,
    QuestionMessage, QuestionOutput, RenderArgs, RenderedQuestion, Role, Settlement, ThreadMessage,
    ThreadMessageMetadata, TurnState, millis_to_iso, now_millis,
};
use frogbot_core::store::DynStore;
use frogbot_postgres::PostgresStore;
use frogbot_sqlite::{SqliteStore, WriterStats};
use serde_json::{Value, json};

// ---- options ----------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Options {
    sqlite: bool,
    postgres: bool,
    clicks: usize,
    cycles: usize,
    cycles8: usize,
    lean_model: bool,
}

const USAGE: &str = "cargo bench -p frogbot-engine-tests --bench questions -- [sqlite|postgres] \
[--lean-model] [--clicks=N (300)] [--cycles=N (200, c=1)] [--cycles8=N (60 per task, c=8)]";

impl Options {
    fn parse() -> Self {
        let mut o = Options {
            sqlite: false,
            postgres: false,
            clicks: 300,
            cycles: 200,
            cycles8: 60,
            lean_model: false,
        };
        let num = |a: &str, p: &str| -> Option<usize> { a.strip_prefix(p)?.parse().ok() };
        for a in std::env::args().skip(1) {
            match a.as_str() {
                "sqlite" => o.sqlite = true,
                "postgres" | "pg" => o.postgres = true,
                "--lean-model" => o.lean_model = true,
                "--help" | "-h" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                _ => {
                    if let Some(n) = num(&a, "--clicks=") {
                        o.clicks = n.max(1);
                    } else if let Some(n) = num(&a, "--cycles=") {
                        o.cycles = n.max(1);
                    } else if let Some(n) = num(&a, "--cycles8=") {
                        o.cycles8 = n.max(1);
                    }
                    // Anything else (`--bench`, libtest flags) is ignored.
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

// ---- the channel and the agent ----------------------------------------------------------------

/// A piece whose platform is free: `render` returns a fresh message id, clicks answer.
struct Buttons {
    next: std::sync::atomic::AtomicU64,
}

#[async_trait]
impl ChannelQuestions for Buttons {
    async fn render(&self, args: RenderArgs<'_>) -> Result<Vec<RenderedQuestion>, BoxError> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(vec![RenderedQuestion {
            calls: args.calls.iter().map(|c| c.tool_call_id.clone()).collect(),
            messages: vec![QuestionMessage {
                id: format!("m{n}"),
                posted_at: millis_to_iso(now_millis()),
                question: None,
            }],
            state: None,
        }])
    }
    fn parse(&self, args: ParseArgs<'_>) -> ParseResult {
        let Interaction::Action { event } = args.interaction else {
            return ParseResult::Ignore;
        };
        let q = &args.call.input.questions[0];
        ParseResult::Answer {
            output: QuestionOutput {
                answers: vec![QuestionAnswer {
                    header: q.header.clone(),
                    selected: vec![event.value.clone().unwrap_or_default()],
                }],
            },
        }
    }
    async fn settled(&self, _a: HookArgs<'_>, _how: Settlement<'_>) -> Changed {
        Ok(None)
    }
    async fn notify(&self, _a: HookArgs<'_>, _to: NoticeTo<'_>) -> Result<(), BoxError> {
        Ok(())
    }
}

type Stamps = Arc<Mutex<Vec<Instant>>>;

fn engine(store: DynStore, stamps: Stamps, lean: bool) -> Engine {
    let script = move |req: &ModelRequest| {
        if let Some(ModelMessage::Tool { .. }) = req.messages.last() {
            stamps.lock().unwrap().push(Instant::now());
            return reply("thanks");
        }
        call(
            &format!("q{}", req.messages.len()),
            "question",
            json!({"questions": [{"header": "Ship", "question": "Ship it?", "options": [{"label": "yes"}, {"label": "no"}]}]}),
        )
    };
    let model = if lean {
        ScriptedModel::without_log(script)
    } else {
        ScriptedModel::new(script)
    };
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
        questions: Some(Arc::new(Buttons {
            next: Default::default(),
        })),
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: None,
    })
}

async fn wait_idle(engine: &Engine, chat: &ChatId) {
    let mut ev = engine.chats().subscribe();
    loop {
        if engine.chats().state(chat).await.unwrap() == TurnState::Idle {
            return;
        }
        let _ = tokio::time::timeout(Duration::from_millis(50), ev.recv()).await;
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Scenario 1: click → next model call. `n` measured clicks after 20 unmeasured.
async fn latency(engine: &Engine, stamps: &Stamps, n: usize) -> (Duration, Duration) {
    let mut samples = Vec::with_capacity(n);
    for i in 0..n + 20 {
        let thread = format!("lat-{i}-{}", now_millis());
        let msg = ThreadMessage {
            id: String::new(),
            text: "go".into(),
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
        };
        let ChannelMessageOutcome::Sent(Sent::Started(h)) = engine
            .channels()
            .message("bench", &thread, msg)
            .await
            .unwrap()
        else {
            panic!("turn")
        };
        h.done.await.unwrap().unwrap();
        let chat = channel_chat_id("bench", &thread);
        // The posted question's platform message (through the engine's reads: the chat's open
        // questions), once the channel has rendered it.
        let deadline = Instant::now() + Duration::from_secs(10);
        let message_id = loop {
            let row = engine.chats().get(&chat).await.unwrap().expect("the chat");
            let pending = engine.questions().pending(&row).await.unwrap();
            if let Some(m) = pending
                .first()
                .filter(|q| q.rendered)
                .and_then(|q| q.record.messages.first())
            {
                break m.id.clone();
            }
            assert!(Instant::now() < deadline, "the question was never posted");
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        let click = Interaction::Action {
            event: ActionEvent {
                action_id: "ship".into(),
                value: Some("yes".into()),
                message_id,
                user: PlatformUser {
                    id: "u2".into(),
                    name: None,
                    is_bot: false,
                },
                trigger_id: None,
                raw: json!({}),
            },
        };
        stamps.lock().unwrap().clear();
        let t0 = Instant::now();
        let r = engine
            .channels()
            .interaction("bench", Some(&thread), &click)
            .await
            .unwrap();
        assert_eq!(r, InteractionOutcome::Answered);
        wait_idle(engine, &chat).await;
        let t1 = stamps
            .lock()
            .unwrap()
            .first()
            .copied()
            .expect("the model was called");
        if i >= 20 {
            samples.push(t1 - t0);
        }
    }
    samples.sort();
    (pct(&samples, 0.5), pct(&samples, 0.99))
}

/// Scenario 2: full cycles (HTTP-style settle) at a concurrency. Returns cycles/s; afterwards
/// (not timed) checks that every chat ended with the final reply.
async fn cycles(engine: &Engine, concurrency: usize, per_task: usize) -> f64 {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..concurrency {
        let engine = engine.clone();
        tasks.push(tokio::spawn(async move {
            let mut chats = Vec::with_capacity(per_task);
            for i in 0..per_task {
                let chat = ChatId::new(format!("cyc-{t}-{i}-{}", now_millis())).unwrap();
                let sent = engine
                    .agents()
                    .send(SendMessage {
                        chat_id: chat.clone(),
                        id: None,
                        parts: vec![MessagePart::text("ask")],
                        author: None,
                        delivery: Delivery::Queue,
                        model: None,
                        reasoning: None,
                        channel: None,
                        speaker: None,
                        context: None,
                    })
                    .await
                    .unwrap();
                let Sent::Started(h) = sent else {
                    panic!("turn")
                };
                let out = h.done.await.unwrap().unwrap();
                assert_eq!(out.state, TurnState::Awaiting);
                let call_id = out
                    .reply
                    .unwrap()
                    .tool_parts()
                    .next()
                    .unwrap()
                    .tool_call_id
                    .clone();
                let answer = QuestionOutput {
                    answers: vec![QuestionAnswer {
                        header: "Ship".into(),
                        selected: vec!["yes".into()],
                    }],
                };
                engine
                    .questions()
                    .settle(&chat, &call_id, Settle::Answer(answer), None)
                    .await
                    .unwrap();
                wait_idle(&engine, &chat).await;
                chats.push(chat);
            }
            chats
        }));
    }
    let mut chats = Vec::new();
    for t in tasks {
        chats.extend(t.await.unwrap());
    }
    let per_sec = (concurrency * per_task) as f64 / started.elapsed().as_secs_f64();
    for chat in &chats {
        let messages = engine.chats().messages(chat).await.unwrap();
        let last = messages.last().expect("messages");
        assert_eq!(last.message.role, Role::Assistant);
        assert!(
            last.message.text().ends_with("thanks"),
            "chat {chat} ended without the final reply: {:?}",
            last.message.text()
        );
    }
    per_sec
}

// ---- backends and counters --------------------------------------------------------------------

/// The counters read around a scenario.
#[derive(Clone, Copy, Debug, Default)]
struct Snapshot {
    sqlite: Option<WriterStats>,
    /// PostgreSQL's next transaction id.
    pg_xid: Option<i64>,
    at: Option<Instant>,
}

struct Db {
    store: DynStore,
    sqlite: Option<SqliteStore>,
    pg: Option<sqlx::PgPool>,
}

impl Db {
    async fn snapshot(&self) -> Snapshot {
        let pg_xid = match &self.pg {
            Some(pool) => sqlx::query_scalar::<_, i64>(
                "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint",
            )
            .fetch_one(pool)
            .await
            .ok(),
            None => None,
        };
        Snapshot {
            sqlite: self.sqlite.as_ref().map(SqliteStore::stats),
            pg_xid,
            at: Some(Instant::now()),
        }
    }
}

/// One scenario's result, with what the store did meanwhile.
struct Measure {
    scenario: &'static str,
    /// Cycles (or clicks) measured, for per-cycle figures.
    units: usize,
    before: Snapshot,
    after: Snapshot,
}

impl Measure {
    fn secs(&self) -> f64 {
        match (self.before.at, self.after.at) {
            (Some(a), Some(b)) => (b - a).as_secs_f64(),
            _ => 0.0,
        }
    }

    /// (commits, operations, commits/s, operations per commit).
    fn group_commit(&self) -> Option<(u64, u64, f64, f64)> {
        let (a, b) = (self.before.sqlite?, self.after.sqlite?);
        let commits = b.commits - a.commits;
        let ops = b.operations - a.operations;
        Some((
            commits,
            ops,
            commits as f64 / self.secs().max(1e-9),
            ops as f64 / commits.max(1) as f64,
        ))
    }

    /// Writing transactions per unit (PostgreSQL).
    fn pg_xacts(&self) -> Option<f64> {
        Some((self.after.pg_xid? - self.before.pg_xid?) as f64 / self.units as f64)
    }

    fn print(&self, name: &str) {
        if let Some((commits, ops, per_s, per_commit)) = self.group_commit() {
            println!(
                "{name:<10} |   {:<22} group commit: {commits} commits = {per_s:.0} commits/s, \
                 {ops} operations, {per_commit:.2} operations per commit, {:.2} commits per cycle",
                self.scenario,
                commits as f64 / self.units as f64,
            );
        }
        if let Some(x) = self.pg_xacts() {
            println!(
                "{name:<10} |   {:<22} {x:.2} writing transactions per cycle",
                self.scenario
            );
        }
    }

    fn json(&self) -> Value {
        let mut v = json!({"units": self.units, "secs": (self.secs() * 1e3).round() / 1e3});
        if let Some((commits, ops, per_s, per_commit)) = self.group_commit() {
            v["group_commit"] = json!({
                "commits": commits,
                "operations": ops,
                "commits_per_s": per_s.round(),
                "operations_per_commit": (per_commit * 100.0).round() / 100.0,
            });
        }
        if let Some(x) = self.pg_xacts() {
            v["postgres_writing_transactions_per_unit"] = json!((x * 100.0).round() / 100.0);
        }
        v
    }
}

async fn run(name: &'static str, db: Db, o: &Options) -> Value {
    let stamps: Stamps = Arc::default();
    let engine = engine(db.store.clone(), stamps.clone(), o.lean_model);
    let s0 = db.snapshot().await;
    let (p50, p99) = latency(&engine, &stamps, o.clicks).await;
    let s1 = db.snapshot().await;
    let c1 = cycles(&engine, 1, o.cycles).await;
    let s2 = db.snapshot().await;
    let c8 = cycles(&engine, 8, o.cycles8).await;
    let s3 = db.snapshot().await;
    println!(
        "{name:<10} | click→next model call p50 {:>7.2} ms  p99 {:>7.2} ms | cycles/s c=1 {:>7.0}  c=8 {:>7.0}",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        c1,
        c8
    );
    let measures = [
        Measure {
            scenario: "clicks (incl. setup)",
            units: o.clicks + 20,
            before: s0,
            after: s1,
        },
        Measure {
            scenario: "cycles c=1",
            units: o.cycles,
            before: s1,
            after: s2,
        },
        Measure {
            scenario: "cycles c=8",
            units: 8 * o.cycles8,
            before: s2,
            after: s3,
        },
    ];
    for m in &measures {
        m.print(name);
    }
    drop(engine);
    json!({
        "backend": name,
        "click_to_next_model_call_ms": {
            "p50": (p50.as_secs_f64() * 1e6).round() / 1e3,
            "p99": (p99.as_secs_f64() * 1e6).round() / 1e3,
        },
        "cycles_per_s": {"c1": (c1 * 10.0).round() / 10.0, "c8": (c8 * 10.0).round() / 10.0},
        "clicks": measures[0].json(),
        "cycles_c1": measures[1].json(),
        "cycles_c8": measures[2].json(),
    })
}

/// The 1-, 5- and 15-minute load averages (`/proc/loadavg`).
fn load_average() -> Option<[f64; 3]> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = s.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

fn main() {
    let o = Options::parse();
    let load = load_average();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "question engine benchmark: zero-latency {} model, release={}",
        if o.lean_model {
            "lean (no request log)"
        } else {
            "ScriptedModel"
        },
        !cfg!(debug_assertions)
    );
    match load {
        Some([a, b, c]) => println!("load average at start: {a:.2} {b:.2} {c:.2} (1, 5, 15 min)"),
        None => println!("load average at start: unknown (no /proc/loadavg)"),
    }
    let mut results = Vec::new();
    rt.block_on(async {
        if o.sqlite {
            let test_db = frogbot_testkit::sqlite_db();
            let store = SqliteStore::open(&test_db.url).await.unwrap();
            println!(
                "sqlite     | {} (WAL, synchronous=FULL, one group-committing writer)",
                store.location()
            );
            let db = Db {
                store: Arc::new(store.clone()),
                sqlite: Some(store),
                pg: None,
            };
            results.push(run("sqlite", db, &o).await);
        }
        if o.postgres {
            match frogbot_testkit::PgCluster::shared_durable() {
                Some(c) => {
                    assert!(c.is_durable(), "the cluster must run with durable settings");
                    let url = c.create_database();
                    let store = PostgresStore::open(&url).await.unwrap();
                    println!("postgres   | {url} (fsync, synchronous_commit on)");
                    let db = Db {
                        pg: Some(store.pool().clone()),
                        store: Arc::new(store),
                        sqlite: None,
                    };
                    results.push(run("postgres", db, &o).await);
                }
                None => println!("postgres   | skipped: no PostgreSQL server binaries"),
            }
        }
    });
    let summary = json!({
        "bench": "questions",
        "model": if o.lean_model { "lean" } else { "scripted" },
        "release": !cfg!(debug_assertions),
        "load_average_start": load.map(|l| l.to_vec()),
        "load_average_end": load_average().map(|l| l.to_vec()),
        "sizes": {"clicks": o.clicks, "cycles_c1": o.cycles, "cycles_c8_per_task": o.cycles8},
        "results": results,
    });
    println!();
    println!("{summary}");
}
