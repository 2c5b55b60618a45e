//! Turn engine overhead: a zero-latency scripted model, three steps per turn (a tool call, another
//! tool call, a text reply), every turn a real `engine.agents().send` → `Sent::Started` → `done`,
//! every write durable. On SQLite (`frogbot_sqlite::SqliteStore`: a file in WAL mode with
//! `synchronous=FULL`, one writer thread that group-commits) and PostgreSQL
//! (`frogbot_postgres::PostgresStore` on a private cluster with `fsync`, `synchronous_commit` and
//! `full_page_writes` on).
//!
//! - Scenario A, "one chat": sequential turns on one chat; median / p90 / p99 wall time per turn.
//!   The model costs nothing, so this is the engine's (and the store's) overhead. The warm-up runs
//!   on a chat of its own, so the measured chat starts empty and turn #k has k - 1 turns of
//!   history: the run prints the median (and mean) turn time at turn #10 (turns 1–20) and at turn #1,000
//!   (turns 990–1,010) and the ratio of the medians — the turn's cost against the chat's length;
//!   then 21 turns of a fresh chat interleaved with 21 more of the long one, so both meet the same
//!   disk, and that ratio (the table's `ratio`, marked `p`): a shared machine's fsync latency drifts
//!   more between the two windows than the engine's cost does.
//! - Scenario B, "100 chats": one task per chat running turns back to back, all concurrently;
//!   turns per second overall.
//!
//! Per scenario it also prints, for SQLite, the writer's group commit over the measured turns
//! (`SqliteStore::stats()`: commits/s and operations per commit), and for PostgreSQL the WAL
//! written and the writing transactions per turn. The load average at the start is printed first;
//! one table per backend and, last, one JSON line with every figure.
//!
//! ```text
//! cargo bench -p frogbot-engine-tests --bench turns                 # everything
//! cargo bench -p frogbot-engine-tests --bench turns -- sqlite       # one backend (or `postgres`)
//! cargo bench -p frogbot-engine-tests --bench turns -- one          # one scenario (or `many`)
//! cargo bench -p frogbot-engine-tests --bench turns -- --store-profile   # + per-store-call breakdown
//! ```
//!
//! `--lean-model` plays the same script without `ScriptedModel`'s request log (see `LeanModel`).
//! Sizes: `--warmup=N` (50, on a chat of its own), `--turns=N` (1,010, scenario A; the turn #1,000
//! figure needs at least 1,010), `--chats=N` (100), `--chat-turns=N` (20, scenario B). Unknown
//! arguments (such as the `--bench` cargo passes) are ignored.
//!
//! Measured (2026-11-30, commit f3e2658, with the compacted history of `agent::turn::prompt`): a
//! turn's model request costs the same however long the chat is — measured flat to turn #3,000
//! (scenario A with `--turns=` above 3,000; the exact command was not recorded).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, call, reply};
use frogbot_core::agent::{
    Engine, EngineConfig, Model, ModelMessage, ModelOffer, ModelRequest, ModelStream, SendMessage,
    Sent, tool_fn,
};
use frogbot_core::model::{ChatId, Delivery, MessagePart, ToolState, TurnState, UserId};
use frogbot_core::store::{Call, ChatChanges, DynStore, Result, Store, StoreLayer, StoredMessage};
use frogbot_postgres::PostgresStore;
use frogbot_sqlite::{SqliteStore, WriterStats};
use frogbot_testkit::{PgCluster, TestDb};
use futures::StreamExt;
use serde_json::{Value, json};

// ---- options ----------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Options {
    sqlite: bool,
    postgres: bool,
    one: bool,
    many: bool,
    warmup: usize,
    turns: usize,
    chats: usize,
    chat_turns: usize,
    store_profile: bool,
    lean_model: bool,
}

const USAGE: &str = "cargo bench -p frogbot-engine-tests --bench turns -- [sqlite|postgres] [one|many] \
[--store-profile] [--lean-model] [--warmup=N (50)] [--turns=N (1010)] [--chats=N (100)] \
[--chat-turns=N (20)]";

impl Options {
    fn parse() -> Self {
        let mut o = Options {
            sqlite: false,
            postgres: false,
            one: false,
            many: false,
            warmup: 50,
            turns: 1010,
            chats: 100,
            chat_turns: 20,
            store_profile: false,
            lean_model: false,
        };
        let num = |a: &str, p: &str| -> Option<usize> { a.strip_prefix(p)?.parse().ok() };
        for a in std::env::args().skip(1) {
            match a.as_str() {
                "sqlite" => o.sqlite = true,
                "postgres" | "pg" => o.postgres = true,
                "one" => o.one = true,
                "many" => o.many = true,
                "--store-profile" => o.store_profile = true,
                "--lean-model" => o.lean_model = true,
                "--help" | "-h" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                _ => {
                    if let Some(n) = num(&a, "--warmup=") {
                        o.warmup = n;
                    } else if let Some(n) = num(&a, "--turns=") {
                        o.turns = n.max(1);
                    } else if let Some(n) = num(&a, "--chats=") {
                        o.chats = n.max(1);
                    } else if let Some(n) = num(&a, "--chat-turns=") {
                        o.chat_turns = n.max(1);
                    }
                    // Anything else (`--bench`, libtest flags) is ignored.
                }
            }
        }
        if !o.sqlite && !o.postgres {
            o.sqlite = true;
            o.postgres = true;
        }
        if !o.one && !o.many {
            o.one = true;
            o.many = true;
        }
        o
    }
}

// ---- the agent: a zero-latency model, three steps per turn -----------------------------------

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EchoInput {
    text: String,
}

/// Step 1 and step 2 call `echo`; step 3 replies. The step is the number of tool results since the
/// last user message.
fn three_steps(req: &ModelRequest) -> Vec<ScriptEvent> {
    let results = req
        .messages
        .iter()
        .rev()
        .take_while(|m| !matches!(m, ModelMessage::User { .. }))
        .filter(|m| matches!(m, ModelMessage::Tool { .. }))
        .count();
    if results < 2 {
        call(
            &format!("call_{}", req.messages.len()),
            "echo",
            json!({"text": format!("ping {results}")}),
        )
    } else {
        reply("pong")
    }
}

/// The same script without [`ScriptedModel`]'s log of every request (`--lean-model`): the log
/// keeps every request (the transcript is shared, not copied, but each request and its tool specs
/// are), a cost no real provider has.
#[derive(Debug)]
struct LeanModel;

#[async_trait]
impl Model for LeanModel {
    async fn stream(&self, request: ModelRequest) -> std::result::Result<ModelStream, BoxError> {
        let events = three_steps(&request).into_iter().filter_map(|e| match e {
            ScriptEvent::Event(e) => Some(Ok(e)),
            _ => None,
        });
        Ok(futures::stream::iter(events).boxed())
    }
}

fn engine(store: DynStore, lean: bool) -> Engine {
    let model: Arc<dyn Model> = if lean {
        Arc::new(LeanModel)
    } else {
        Arc::new(ScriptedModel::new(three_steps))
    };
    let offers = vec![ModelOffer {
        id: "main".into(),
        model,
        reasoning: vec![],
    }];
    let tools = vec![tool_fn(
        "echo",
        "Echoes its input",
        |i: EchoInput, _ctx| async move { Ok::<_, BoxError>(json!({ "echo": i.text })) },
    )];
    Engine::new(store, offers, tools, EngineConfig::default())
}

/// One real turn: send, wait for `done`, check it ran three steps. Returns its wall time.
async fn turn(engine: &Engine, chat: &ChatId, n: usize) -> Duration {
    let started = Instant::now();
    let sent = engine
        .agents()
        .send(SendMessage {
            chat_id: chat.clone(),
            id: None,
            parts: vec![MessagePart::text(format!("hello {n}"))],
            author: Some(UserId::new("bench-user")),
            delivery: Delivery::Queue,
            model: None,
            reasoning: None,
            channel: None,
            speaker: None,
            context: None,
        })
        .await
        .expect("send");
    let Sent::Started(handle) = sent else {
        panic!("chat {chat} was busy: the message was queued");
    };
    let outcome = handle.done.await.expect("turn dropped").expect("turn");
    let elapsed = started.elapsed();
    assert_eq!(outcome.state, TurnState::Idle);
    let reply = outcome.reply.expect("a reply");
    let tools: Vec<_> = reply.tool_parts().collect();
    assert_eq!(tools.len(), 2, "two tool calls per turn");
    assert!(tools.iter().all(|t| t.state == ToolState::OutputAvailable));
    assert_eq!(reply.text(), "pong");
    drop(handle.events);
    elapsed
}

// ---- what a run reads around the measured turns -----------------------------------------------

/// The counters read before and after the measured turns (after the warm-up).
#[derive(Clone, Copy, Debug, Default)]
struct Snapshot {
    /// SQLite's writer counters.
    sqlite: Option<WriterStats>,
    /// PostgreSQL's WAL position and next transaction id.
    pg: Option<(i64, i64)>,
}

/// What the scenarios read from the backend, and the store profile to reset after the warm-up.
struct Probe {
    sqlite: Option<SqliteStore>,
    pg: Option<sqlx::PgPool>,
    profile: Arc<Profile>,
}

impl Probe {
    /// Reads the counters; with `reset`, drops the profile's calls so far (the warm-up's).
    async fn snapshot(&self, reset: bool) -> Snapshot {
        if reset {
            self.profile.take();
        }
        Snapshot {
            sqlite: self.sqlite.as_ref().map(SqliteStore::stats),
            pg: wal_lsn(&self.pg).await,
        }
    }
}

// ---- scenarios --------------------------------------------------------------------------------

/// Mean turn time over a window of turns (1-based, inclusive) of scenario A.
#[derive(Clone, Debug)]
struct Window {
    label: String,
    first: usize,
    last: usize,
    mean: Duration,
    /// The window's median: the ratio is taken on it, so one slow fsync (or a WAL checkpoint that
    /// happens to land in 21 turns) does not pass for a cost that grows with the chat.
    median: Duration,
}

struct Row {
    backend: &'static str,
    scenario: String,
    turns: usize,
    median: Duration,
    p90: Duration,
    p99: Duration,
    per_sec: f64,
    wall: Duration,
    note: String,
    /// Scenario A: early and late windows.
    history: Option<(Window, Window)>,
    /// Scenario A: a fresh chat's turns #1–#21 interleaved with 21 more turns of the long chat,
    /// so both meet the same disk (its fsync latency drifts minute to minute on shared machines).
    paired: Option<(Window, Window)>,
    before: Snapshot,
    after: Snapshot,
    /// `--store-profile`: (name, calls per turn, mean per call, write?) for the JSON line.
    profile: Vec<(&'static str, f64, Duration, bool)>,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn mean(d: &[Duration]) -> Duration {
    if d.is_empty() {
        return Duration::ZERO;
    }
    d.iter().sum::<Duration>() / d.len() as u32
}

/// The mean and median over turns `first..=last` (1-based) of `times`.
fn window(times: &[Duration], label: String, first: usize, last: usize) -> Window {
    let (first, last) = (first.max(1), last.min(times.len()));
    let mut sorted = times[first - 1..last].to_vec();
    sorted.sort();
    Window {
        label,
        first,
        last,
        mean: mean(&times[first - 1..last]),
        median: percentile(&sorted, 50.0),
    }
}

/// Scenario A: `warmup` turns on a chat of their own, then `turns` sequential turns on a new chat.
async fn one_chat(backend: &'static str, engine: &Engine, o: &Options, probe: &Probe) -> Row {
    let warm = ChatId::new("bench-warm").expect("chat id");
    for n in 0..o.warmup {
        turn(engine, &warm, n).await;
    }
    let chat = ChatId::new("bench-one").expect("chat id");
    let before = probe.snapshot(true).await;
    let t0 = Instant::now();
    let mut times = Vec::with_capacity(o.turns);
    for n in 0..o.turns {
        times.push(turn(engine, &chat, n).await);
    }
    let wall = t0.elapsed();
    let after = probe.snapshot(false).await;
    let fresh = ChatId::new("bench-fresh").expect("chat id");
    let (mut young, mut old) = (Vec::new(), Vec::new());
    for n in 0..21 {
        young.push(turn(engine, &fresh, n).await);
        old.push(turn(engine, &chat, o.turns + n).await);
    }
    let paired = (
        window(&young, "#11".into(), 1, 21),
        window(&old, format!("#{}", o.turns + 11), 1, 21),
    );
    // Turn #10: turns 1–20; turn #1,000: turns 990–1,010 (or the last 21 turns of a shorter run,
    // labelled by their middle turn).
    let early = window(&times, "#10".into(), 1, 20);
    let late_last = o.turns;
    let late_first = late_last.saturating_sub(20).max(1);
    let late = window(
        &times,
        format!("#{}", (late_first + late_last) / 2),
        late_first,
        late_last,
    );
    let mut sorted = times.clone();
    sorted.sort();
    Row {
        backend,
        scenario: format!("A: one chat, {} sequential", o.turns),
        turns: o.turns,
        median: percentile(&sorted, 50.0),
        p90: percentile(&sorted, 90.0),
        p99: percentile(&sorted, 99.0),
        per_sec: o.turns as f64 / wall.as_secs_f64(),
        wall,
        note: format!(
            "turn {} (turns {}–{}): median {}, mean {}; turn {} (turns {}–{}): median {}, mean {}; \
             ratio of medians {:.2}, of means {:.2} (warm-up: {} turns on another chat)",
            early.label,
            early.first,
            early.last,
            fmt_ms(early.median),
            fmt_ms(early.mean),
            late.label,
            late.first,
            late.last,
            fmt_ms(late.median),
            fmt_ms(late.mean),
            late.median.as_secs_f64() / early.median.as_secs_f64().max(1e-12),
            late.mean.as_secs_f64() / early.mean.as_secs_f64().max(1e-12),
            o.warmup,
        ) + &format!(
            "; interleaved with a fresh chat: its turn {} median {}, the long chat's turn {} median {}, \
             ratio {:.2}",
            paired.0.label,
            fmt_ms(paired.0.median),
            paired.1.label,
            fmt_ms(paired.1.median),
            paired.1.median.as_secs_f64() / paired.0.median.as_secs_f64().max(1e-12),
        ),
        history: Some((early, late)),
        paired: Some(paired),
        before,
        after,
        profile: Vec::new(),
    }
}

/// Scenario B: `chats` tasks, each running `chat_turns` turns back to back on its own chat.
async fn many_chats(backend: &'static str, engine: &Engine, o: &Options, probe: &Probe) -> Row {
    let chats: Vec<ChatId> = (0..o.chats)
        .map(|i| ChatId::new(format!("bench-many-{i}")).expect("chat id"))
        .collect();
    // Warm-up: one turn per chat (creates the chats, fills the pools).
    let mut tasks = Vec::new();
    for c in &chats {
        let (engine, c) = (engine.clone(), c.clone());
        tasks.push(tokio::spawn(async move { turn(&engine, &c, 0).await }));
    }
    for t in tasks {
        t.await.expect("warm-up task");
    }
    let before = probe.snapshot(true).await;
    let start = Arc::new(tokio::sync::Barrier::new(o.chats + 1));
    let mut tasks = Vec::new();
    for c in &chats {
        let (engine, c, start, n) = (engine.clone(), c.clone(), start.clone(), o.chat_turns);
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let mut times = Vec::with_capacity(n);
            for i in 0..n {
                times.push(turn(&engine, &c, 1 + i).await);
            }
            times
        }));
    }
    start.wait().await;
    let t0 = Instant::now();
    let mut times = Vec::new();
    for t in tasks {
        times.extend(t.await.expect("chat task"));
    }
    let wall = t0.elapsed();
    let after = probe.snapshot(false).await;
    times.sort();
    let total = o.chats * o.chat_turns;
    Row {
        backend,
        scenario: format!("B: {} chats x {} turns", o.chats, o.chat_turns),
        turns: total,
        median: percentile(&times, 50.0),
        p90: percentile(&times, 90.0),
        p99: percentile(&times, 99.0),
        per_sec: total as f64 / wall.as_secs_f64(),
        wall,
        note: format!(
            "wall {:.2} s; latencies are per turn under load",
            wall.as_secs_f64()
        ),
        history: None,
        paired: None,
        before,
        after,
        profile: Vec::new(),
    }
}

// ---- backends ---------------------------------------------------------------------------------

struct Db {
    store: DynStore,
    sqlite: Option<SqliteStore>,
    pg: Option<sqlx::PgPool>,
    _keep: Option<TestDb>,
}

async fn sqlite_store() -> (Db, String) {
    let db = frogbot_testkit::sqlite_db();
    let store = SqliteStore::open(&db.url).await.expect("open sqlite");
    // SqliteStore sets `journal_mode=WAL` (refusing to open otherwise) and `synchronous=FULL` on
    // its writer connection; the WAL file beside the database shows the mode from outside.
    let wal = std::path::PathBuf::from(format!("{}-wal", store.location()));
    assert!(
        wal.exists(),
        "SQLite must be in WAL mode: {} is missing",
        wal.display()
    );
    let settings = format!(
        "SQLite {}: journal_mode=wal, synchronous=FULL (SqliteStore: one writer thread that \
         group-commits, 4 reader threads)",
        store.location()
    );
    (
        Db {
            store: Arc::new(store.clone()),
            sqlite: Some(store),
            pg: None,
            _keep: Some(db),
        },
        settings,
    )
}

async fn postgres_store() -> Option<(Db, String)> {
    let cluster = PgCluster::shared_durable()?;
    assert!(
        cluster.is_durable(),
        "the PostgreSQL cluster was started without durable settings"
    );
    let url = cluster.create_database();
    let store = PostgresStore::open(&url).await.expect("open postgres");
    let mut shown = Vec::new();
    for setting in [
        "fsync",
        "synchronous_commit",
        "full_page_writes",
        "wal_sync_method",
        "server_version",
    ] {
        let v: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SHOW {setting}")))
            .fetch_one(store.pool())
            .await
            .expect("SHOW");
        if matches!(setting, "fsync" | "synchronous_commit" | "full_page_writes") {
            assert_eq!(v, "on", "{setting} must be on for a durable benchmark");
        }
        shown.push(format!("{setting}={v}"));
    }
    let settings = format!(
        "PostgreSQL {url}: {} (pool of 16 connections)",
        shown.join(", ")
    );
    let pg = store.pool().clone();
    Some((
        Db {
            store: Arc::new(store),
            sqlite: None,
            pg: Some(pg),
            _keep: None,
        },
        settings,
    ))
}

/// PostgreSQL's WAL position and next transaction id: their growth over a run is the WAL written
/// and the number of transactions given an id — the writing ones (each a WAL flush at commit,
/// with `synchronous_commit=on`) and the pushed-change announcements: a `pg_notify` transaction
/// takes an id too, but commits on the store's `synchronous_commit = off` pool, without a flush
/// (frogbot-postgres `feed.rs`; scenario A counted 4.71 ids a turn, 4.00 before announcements).
async fn wal_lsn(pg: &Option<sqlx::PgPool>) -> Option<(i64, i64)> {
    let pg = pg.as_ref()?;
    sqlx::query_as(
        "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint, \
                pg_snapshot_xmax(pg_current_snapshot())::text::bigint",
    )
    .fetch_one(pg)
    .await
    .ok()
}

/// The median time of `OperationsStore::ping` (SQLite: a hand-off to a reader thread and back;
/// PostgreSQL: `SELECT 1` through the pool): the floor under every store call.
async fn round_trip(store: &DynStore) -> Duration {
    let mut t = Vec::with_capacity(500);
    for _ in 0..500 {
        let s = Instant::now();
        store.ping().await.expect("ping");
        t.push(s.elapsed());
    }
    t.sort();
    percentile(&t, 50.0)
}

// ---- a store wrapper that counts and times every call (`--store-profile`) --------------------

/// Per method: calls, total time, messages returned (the message reads).
#[derive(Default, Debug)]
struct Profile {
    calls: Mutex<BTreeMap<&'static str, (u64, Duration, u64)>>,
}

impl Profile {
    fn record(&self, name: &'static str, d: Duration, rows: u64) {
        let mut m = self.calls.lock().expect("profile lock");
        let e = m.entry(name).or_default();
        e.0 += 1;
        e.1 += d;
        e.2 += rows;
    }

    fn take(&self) -> BTreeMap<&'static str, (u64, Duration, u64)> {
        std::mem::take(&mut *self.calls.lock().expect("profile lock"))
    }
}

/// A [`Store`] that forwards every method to `inner` and records its time under its name.
#[derive(Debug)]
struct Timed {
    inner: DynStore,
    profile: Arc<Profile>,
}

/// The methods that write (one transaction each); the rest read.
const WRITES: &[&str] = &[
    "send",
    "checkpoint",
    "await_answers",
    "end_turn",
    "take_chat",
    "resume_turn",
    "renew_lease",
    "expire_lease",
    "edit_queued",
    "delete_queued",
    "insert_questions",
    "mark_rendered",
    "record_outcome",
    "advance_question",
    "lock_question",
    "update_question",
    "unlock_question",
    "purge_expired",
    "enqueue_job",
    "claim_job",
    "complete_job",
    "retry_job",
    "bury_job",
];

#[async_trait]
impl StoreLayer for Timed {
    fn inner(&self) -> &dyn Store {
        self.inner.as_ref()
    }

    async fn around<T: Send + 'static>(&self, op: &'static str, call: Call<'_, T>) -> Result<T> {
        let t = Instant::now();
        let r = call.await;
        // The message reads also count the messages they return.
        let rows = r.as_ref().map_or(0, |v| {
            let v = v as &dyn std::any::Any;
            v.downcast_ref::<Vec<StoredMessage>>()
                .map(Vec::len)
                .or_else(|| v.downcast_ref::<ChatChanges>().map(|c| c.messages.len()))
                .unwrap_or(0)
        });
        self.profile.record(op, t.elapsed(), rows as u64);
        r
    }
}

/// Prints calls per turn and mean time per call for every method called during the measured turns;
/// returns (name, calls per turn, mean per call, write?) for the JSON line.
fn print_profile(
    title: &str,
    turns: usize,
    turn_time: Duration,
    p: &Profile,
) -> Vec<(&'static str, f64, Duration, bool)> {
    let calls = p.take();
    let total_store: Duration = calls.values().map(|c| c.1).sum();
    println!("\n  store calls per turn — {title} ({turns} turns):");
    println!(
        "  {:<30} {:>5} {:>9} {:>10} {:>12} {:>8}",
        "call", "kind", "per turn", "mean", "per turn", "share"
    );
    let mut rows: Vec<_> = calls.iter().collect();
    rows.sort_by_key(|(_, c)| std::cmp::Reverse(c.1));
    let (mut all, mut writes) = (0.0, 0.0);
    let mut out = Vec::new();
    for (name, (n, d, r)) in rows {
        let per_turn = *n as f64 / turns as f64;
        let write = WRITES.contains(name);
        all += per_turn;
        if write {
            writes += per_turn;
        }
        let extra = if *r > 0 {
            format!("  ({:.1} messages/call)", *r as f64 / *n as f64)
        } else {
            String::new()
        };
        let mean_call = *d / (*n).max(1) as u32;
        println!(
            "  {:<30} {:>5} {:>9.2} {:>10} {:>12} {:>7.1}%{extra}",
            name,
            if write { "write" } else { "read" },
            per_turn,
            fmt_us(mean_call),
            fmt_us(d.div_f64(turns as f64)),
            100.0 * d.as_secs_f64() / turn_time.as_secs_f64(),
        );
        out.push((*name, per_turn, mean_call, write));
    }
    let per_turn_store = total_store.div_f64(turns as f64);
    let per_turn = turn_time.div_f64(turns as f64);
    println!(
        "  total: {all:.2} store calls per turn ({writes:.2} writes — one transaction each — and \
         {:.2} reads); store time {} of {} per turn (sum of turn wall times; the rest is engine \
         CPU, task hand-offs and, under concurrency, waiting for the runtime)",
        all - writes,
        fmt_us(per_turn_store),
        fmt_us(per_turn),
    );
    out
}

// ---- main -------------------------------------------------------------------------------------

fn fmt_ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn fmt_us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The 1-, 5- and 15-minute load averages (`/proc/loadavg`).
fn load_average() -> Option<[f64; 3]> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = s.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// Group commit over the measured turns: (commits, operations, commits/s, operations per commit).
fn group_commit(r: &Row) -> Option<(u64, u64, f64, f64)> {
    let (a, b) = (r.before.sqlite?, r.after.sqlite?);
    let commits = b.commits - a.commits;
    let ops = b.operations - a.operations;
    Some((
        commits,
        ops,
        commits as f64 / r.wall.as_secs_f64(),
        ops as f64 / (commits.max(1)) as f64,
    ))
}

/// PostgreSQL over the measured turns: (KiB of WAL per turn, writing transactions per turn).
fn pg_per_turn(r: &Row) -> Option<(f64, f64)> {
    let ((a, xa), (b, xb)) = (r.before.pg?, r.after.pg?);
    Some((
        (b - a) as f64 / 1024.0 / r.turns as f64,
        (xb - xa) as f64 / r.turns as f64,
    ))
}

async fn run_backend(
    name: &'static str,
    open: impl AsyncFn() -> Option<(Db, String)>,
    o: &Options,
    rows: &mut Vec<Row>,
) {
    for (scenario, enabled) in [("one", o.one), ("many", o.many)] {
        if !enabled {
            continue;
        }
        let Some((db, settings)) = open().await else {
            eprintln!("{name}: not available, skipped");
            return;
        };
        println!("[{name}] {settings}");
        println!(
            "[{name}] one store round trip (OperationsStore::ping): median {}",
            fmt_us(round_trip(&db.store).await)
        );
        let profile = Arc::new(Profile::default());
        let store: DynStore = if o.store_profile {
            Arc::new(Timed {
                inner: db.store.clone(),
                profile: profile.clone(),
            })
        } else {
            db.store.clone()
        };
        let probe = Probe {
            sqlite: db.sqlite.clone(),
            pg: db.pg.clone(),
            profile: profile.clone(),
        };
        let engine = engine(store, o.lean_model);
        let mut row = if scenario == "one" {
            one_chat(name, &engine, o, &probe).await
        } else {
            many_chats(name, &engine, o, &probe).await
        };
        println!(
            "[{name}] {}: median {}, p90 {}, p99 {}, {:.0} turns/s — {}",
            row.scenario,
            fmt_ms(row.median),
            fmt_ms(row.p90),
            fmt_ms(row.p99),
            row.per_sec,
            row.note
        );
        if let Some((commits, ops, per_s, per_commit)) = group_commit(&row) {
            println!(
                "[{name}] group commit (measured turns): {commits} commits = {per_s:.0} commits/s, \
                 {ops} write operations, {per_commit:.2} operations per commit; per turn {:.2} \
                 commits, {:.2} operations",
                commits as f64 / row.turns as f64,
                ops as f64 / row.turns as f64,
            );
        }
        if let Some((wal, xacts)) = pg_per_turn(&row) {
            println!(
                "[{name}] per turn (measured turns): {wal:.1} KiB of WAL, {xacts:.2} transaction \
                 ids (writes, each a WAL flush at commit, and pg_notify announcements, which \
                 commit without one)"
            );
        }
        if o.store_profile {
            // Measured turns only (the warm-up was dropped); for B the wall time covers all chats
            // at once, so shares are of the summed per-turn latencies.
            let summed = if scenario == "one" {
                row.wall
            } else {
                row.wall.mul_f64(o.chats as f64)
            };
            row.profile = print_profile(
                &format!("{name}, {}", row.scenario),
                row.turns,
                summed,
                &profile,
            );
        }
        drop(engine);
        rows.push(row);
    }
}

fn print_table(rows: &[&Row]) {
    println!(
        "{:<9} {:<28} {:>6} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11} {:>7} {:>10}",
        "backend",
        "scenario",
        "turns",
        "median",
        "p90",
        "p99",
        "turns/s",
        "turn #10",
        "turn #late",
        "ratio",
        "ops/commit"
    );
    for r in rows {
        let (early, late, ratio) = match &r.history {
            Some((e, l)) => (
                fmt_ms(e.median),
                format!("{} {}", l.label, fmt_ms(l.median)),
                match &r.paired {
                    // The ratio with the disk's drift taken out (see `Row::paired`).
                    Some((y, o)) => format!(
                        "{:.2}p",
                        o.median.as_secs_f64() / y.median.as_secs_f64().max(1e-12)
                    ),
                    None => format!(
                        "{:.2}",
                        l.median.as_secs_f64() / e.median.as_secs_f64().max(1e-12)
                    ),
                },
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let per_commit = group_commit(r).map_or("-".into(), |g| format!("{:.2}", g.3));
        println!(
            "{:<9} {:<28} {:>6} {:>10} {:>10} {:>10} {:>10.0} {:>11} {:>11} {:>7} {:>10}",
            r.backend,
            r.scenario,
            r.turns,
            fmt_ms(r.median),
            fmt_ms(r.p90),
            fmt_ms(r.p99),
            r.per_sec,
            early,
            late,
            ratio,
            per_commit,
        );
    }
}

fn row_json(r: &Row) -> Value {
    let mut v = json!({
        "backend": r.backend,
        "scenario": r.scenario,
        "turns": r.turns,
        "median_ms": ms(r.median),
        "p90_ms": ms(r.p90),
        "p99_ms": ms(r.p99),
        "turns_per_s": (r.per_sec * 10.0).round() / 10.0,
        "wall_s": (r.wall.as_secs_f64() * 1e3).round() / 1e3,
    });
    if let Some((e, l)) = &r.history {
        v["history"] = json!({
            "early": {"label": e.label, "turns": [e.first, e.last], "mean_ms": ms(e.mean), "median_ms": ms(e.median)},
            "late": {"label": l.label, "turns": [l.first, l.last], "mean_ms": ms(l.mean), "median_ms": ms(l.median)},
            "ratio": ((l.median.as_secs_f64() / e.median.as_secs_f64().max(1e-12)) * 100.0).round()
                / 100.0,
            "ratio_of_means": ((l.mean.as_secs_f64() / e.mean.as_secs_f64().max(1e-12)) * 100.0).round()
                / 100.0,
            "paired": r.paired.as_ref().map(|(y, o)| json!({
                "fresh": {"label": y.label, "median_ms": ms(y.median)},
                "long": {"label": o.label, "median_ms": ms(o.median)},
                "ratio": ((o.median.as_secs_f64() / y.median.as_secs_f64().max(1e-12)) * 100.0).round() / 100.0,
            })),
        });
    }
    if let Some((commits, ops, per_s, per_commit)) = group_commit(r) {
        v["group_commit"] = json!({
            "commits": commits,
            "operations": ops,
            "commits_per_s": per_s.round(),
            "operations_per_commit": (per_commit * 100.0).round() / 100.0,
        });
    }
    if let Some((wal, xacts)) = pg_per_turn(r) {
        v["postgres_per_turn"] = json!({
            "wal_kib": (wal * 10.0).round() / 10.0,
            "writing_transactions": (xacts * 100.0).round() / 100.0,
        });
    }
    if !r.profile.is_empty() {
        let total: f64 = r.profile.iter().map(|p| p.1).sum();
        let writes: f64 = r.profile.iter().filter(|p| p.3).map(|p| p.1).sum();
        let calls: serde_json::Map<String, Value> = r
            .profile
            .iter()
            .map(|(name, per_turn, mean, _)| {
                (
                    (*name).to_string(),
                    json!({
                        "per_turn": (per_turn * 100.0).round() / 100.0,
                        "mean_us": (mean.as_secs_f64() * 1e7).round() / 10.0,
                    }),
                )
            })
            .collect();
        v["store_calls_per_turn"] = json!((total * 100.0).round() / 100.0);
        v["store_writes_per_turn"] = json!((writes * 100.0).round() / 100.0);
        v["store_profile"] = Value::Object(calls);
    }
    v
}

fn main() {
    let o = Options::parse();
    let load = load_average();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let workers = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "turn engine benchmark: zero-latency {} model, 3 steps per turn (echo tool, echo \
         tool, text), tokio multi-thread runtime with {workers} workers, release={}",
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
    let mut rows = Vec::new();
    rt.block_on(async {
        if o.sqlite {
            run_backend("sqlite", async || Some(sqlite_store().await), &o, &mut rows).await;
        }
        if o.postgres {
            run_backend("postgres", async || postgres_store().await, &o, &mut rows).await;
        }
    });
    for backend in ["sqlite", "postgres"] {
        let of: Vec<&Row> = rows.iter().filter(|r| r.backend == backend).collect();
        if of.is_empty() {
            continue;
        }
        println!();
        print_table(&of);
    }
    println!();
    println!(
        "targets (2-core machine): median <= 2 ms per turn on SQLite (A); >= 1,000 turns/s (B)"
    );
    for r in &rows {
        let (target, met) = if r.scenario.starts_with("A:") {
            if r.backend != "sqlite" {
                continue;
            }
            ("median <= 2 ms", r.median <= Duration::from_millis(2))
        } else {
            (">= 1,000 turns/s", r.per_sec >= 1000.0)
        };
        println!(
            "  {:<9} {:<28} {:<18} {}",
            r.backend,
            r.scenario,
            target,
            if met { "MET" } else { "MISSED" }
        );
    }
    let summary = json!({
        "bench": "turns",
        "model": if o.lean_model { "lean" } else { "scripted" },
        "store_profile": o.store_profile,
        "workers": workers,
        "release": !cfg!(debug_assertions),
        "load_average_start": load.map(|l| l.to_vec()),
        "load_average_end": load_average().map(|l| l.to_vec()),
        "sizes": {
            "warmup": o.warmup, "turns": o.turns, "chats": o.chats, "chat_turns": o.chat_turns,
        },
        "results": rows.iter().map(row_json).collect::<Vec<_>>(),
    });
    println!();
    println!("{summary}");
}
