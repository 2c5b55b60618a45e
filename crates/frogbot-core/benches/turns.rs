//! Turn engine overhead: a zero-latency scripted model, three steps per turn (a tool call, another
//! tool call, a text reply), every turn a real `Engine::send` → `Sent::Started` → `done`, every
//! write durable. On SQLite (a file in WAL mode, as `SqliteStore` opens it) and PostgreSQL (a
//! private cluster with `fsync`, `synchronous_commit` and `full_page_writes` on).
//!
//! - Scenario A, "one chat": sequential turns on one chat; median / p90 / p99 wall time per turn.
//!   The model costs nothing, so this is the engine's (and the store's) overhead.
//! - Scenario B, "100 chats": one task per chat running turns back to back, all concurrently;
//!   turns per second overall.
//!
//! ```text
//! cargo bench -p frogbot-core --bench turns                 # everything
//! cargo bench -p frogbot-core --bench turns -- sqlite       # one backend (or `postgres`)
//! cargo bench -p frogbot-core --bench turns -- one          # one scenario (or `many`)
//! cargo bench -p frogbot-core --bench turns -- --store-profile   # + per-store-call breakdown
//! ```
//!
//! `--lean-model` plays the same script without `ScriptedModel`'s request log (see `LeanModel`).
//! Sizes: `--warmup=N` (50), `--turns=N` (500, scenario A), `--chats=N` (100), `--chat-turns=N`
//! (20, scenario B). Unknown arguments (such as the `--bench` cargo passes) are ignored.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, call, reply};
use frogbot_core::agent::{
    Engine, EngineConfig, Model, ModelMessage, ModelOffer, ModelRequest, ModelStream, SendMessage,
    Sent, tool_fn,
};
use frogbot_core::model::{
    Actor, ChatId, Delivery, MessagePart, Millis, QuestionOutcome, Role, ToolState, TurnState,
    UiMessage, UserId,
};
use frogbot_core::store::{
    Backend, ChatRow, DynStore, EndTurn, Job, Lease, LeaseRequest, NewChat, NewJob, NewQuestion,
    PostgresStore, QuestionLock, QuestionRow, QuestionUpdate, QueuedChange, QueuedEdit, Slot,
    SqliteStore, Store, StoredMessage, TurnEnd,
};
use frogbot_core::{BoxError, Result};
use frogbot_testkit::{PgCluster, TestDb};
use futures::StreamExt;
use serde_json::json;

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

impl Options {
    fn parse() -> Self {
        let mut o = Options {
            sqlite: false,
            postgres: false,
            one: false,
            many: false,
            warmup: 50,
            turns: 500,
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
/// clones each request — the whole history — and keeps it, a cost no real provider has.
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
        .send(SendMessage {
            chat_id: chat.clone(),
            id: None,
            parts: vec![MessagePart::text(format!("hello {n}"))],
            author: Some(UserId::new("bench-user")),
            delivery: Delivery::Queue,
            model: None,
            reasoning: None,
            channel: None,
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

// ---- scenarios --------------------------------------------------------------------------------

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
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn median(d: &[Duration]) -> Duration {
    let mut d = d.to_vec();
    d.sort();
    percentile(&d, 50.0)
}

/// Scenario A: `warmup` + `turns` sequential turns on one chat.
async fn one_chat(backend: &'static str, engine: &Engine, o: &Options, warm: &Profile) -> Row {
    let chat = ChatId::new("bench-one").expect("chat id");
    for n in 0..o.warmup {
        turn(engine, &chat, n).await;
    }
    warm.take();
    let t0 = Instant::now();
    let mut times = Vec::with_capacity(o.turns);
    for n in 0..o.turns {
        times.push(turn(engine, &chat, o.warmup + n).await);
    }
    let wall = t0.elapsed();
    let k = (o.turns / 5).max(1);
    let first = median(&times[..k.min(times.len())]);
    let last = median(&times[times.len().saturating_sub(k)..]);
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
            "median of first {k}: {}, of last {k}: {} (history {} -> {} turns)",
            fmt_ms(first),
            fmt_ms(last),
            o.warmup,
            o.warmup + o.turns
        ),
    }
}

/// Scenario B: `chats` tasks, each running `chat_turns` turns back to back on its own chat.
async fn many_chats(backend: &'static str, engine: &Engine, o: &Options, warm: &Profile) -> Row {
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
    warm.take();
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
    }
}

// ---- backends ---------------------------------------------------------------------------------

struct Db {
    store: DynStore,
    _keep: Option<TestDb>,
    pg: Option<sqlx::PgPool>,
}

async fn sqlite_store() -> (Db, String) {
    let db = frogbot_testkit::sqlite_db();
    let store = SqliteStore::open(&db.url).await.expect("open sqlite");
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(store.pool())
        .await
        .expect("journal_mode");
    let sync: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(store.pool())
        .await
        .expect("synchronous");
    let sync = match sync {
        0 => "OFF",
        1 => "NORMAL",
        2 => "FULL",
        3 => "EXTRA",
        _ => "?",
    };
    assert_eq!(mode.to_lowercase(), "wal", "SQLite must be in WAL mode");
    let settings = format!(
        "SQLite {}: journal_mode={mode}, synchronous={sync} (pool of 8 connections)",
        db.url
    );
    (
        Db {
            store: Arc::new(store),
            _keep: Some(db),
            pg: None,
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
            _keep: None,
            pg: Some(pg),
        },
        settings,
    ))
}

/// PostgreSQL's WAL position and next transaction id: their growth over a run is the WAL written
/// and the number of writing transactions (each one a WAL flush at commit, with
/// `synchronous_commit=on`).
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

/// The median time of a trivial statement through the store's pool (`Store::ping`, `SELECT 1`):
/// the floor under every store call.
async fn round_trip(store: &DynStore) -> Duration {
    let mut t = Vec::with_capacity(500);
    for _ in 0..500 {
        let s = Instant::now();
        store.ping().await.expect("ping");
        t.push(s.elapsed());
    }
    median(&t)
}

// ---- a store wrapper that counts and times every call (`--store-profile`) --------------------

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

#[derive(Debug)]
struct Timed {
    inner: DynStore,
    profile: Arc<Profile>,
}

macro_rules! timed {
    ($self:ident, $name:expr, $call:expr) => {{
        let t = Instant::now();
        let r = $call.await;
        $self.profile.record($name, t.elapsed(), 0);
        r
    }};
}

#[async_trait]
impl Store for Timed {
    fn backend(&self) -> Backend {
        self.inner.backend()
    }
    async fn ping(&self) -> Result<()> {
        timed!(self, "ping", self.inner.ping())
    }
    async fn create_chat(&self, chat: &NewChat, now: Millis) -> Result<(ChatRow, bool)> {
        timed!(self, "create_chat", self.inner.create_chat(chat, now))
    }
    async fn get_chat(&self, chat: &ChatId) -> Result<Option<ChatRow>> {
        timed!(self, "get_chat", self.inner.get_chat(chat))
    }
    async fn get_channel_chat(&self, platform: &str, thread: &str) -> Result<Option<ChatRow>> {
        timed!(
            self,
            "get_channel_chat",
            self.inner.get_channel_chat(platform, thread)
        )
    }
    async fn expired_leases(&self, now: Millis, limit: u32) -> Result<Vec<ChatId>> {
        timed!(
            self,
            "expired_leases",
            self.inner.expired_leases(now, limit)
        )
    }
    async fn expire_lease(&self, lease: &Lease, now: Millis) -> Result<()> {
        timed!(self, "expire_lease", self.inner.expire_lease(lease, now))
    }
    async fn list_chats(&self, owner: Option<&UserId>, limit: u32) -> Result<Vec<ChatRow>> {
        timed!(self, "list_chats", self.inner.list_chats(owner, limit))
    }
    async fn get_message(&self, chat: &ChatId, id: &str) -> Result<Option<StoredMessage>> {
        timed!(self, "get_message", self.inner.get_message(chat, id))
    }
    async fn list_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
        let t = Instant::now();
        let r = self.inner.list_messages(chat).await;
        let rows = r.as_ref().map(|v| v.len() as u64).unwrap_or(0);
        self.profile.record("list_messages", t.elapsed(), rows);
        r
    }
    async fn messages_since(&self, chat: &ChatId, since: Millis) -> Result<Vec<StoredMessage>> {
        timed!(
            self,
            "messages_since",
            self.inner.messages_since(chat, since)
        )
    }
    async fn enqueue_message(
        &self,
        chat: &ChatId,
        message: &UiMessage,
        delivery: Delivery,
        now: Millis,
    ) -> Result<StoredMessage> {
        timed!(
            self,
            "enqueue_message",
            self.inner.enqueue_message(chat, message, delivery, now)
        )
    }
    async fn queued_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
        timed!(self, "queued_messages", self.inner.queued_messages(chat))
    }
    async fn edit_queued(
        &self,
        chat: &ChatId,
        id: &str,
        by: Option<&UserId>,
        edit: &QueuedEdit,
        now: Millis,
    ) -> Result<QueuedChange> {
        timed!(
            self,
            "edit_queued",
            self.inner.edit_queued(chat, id, by, edit, now)
        )
    }
    async fn delete_queued(
        &self,
        chat: &ChatId,
        id: &str,
        by: Option<&UserId>,
    ) -> Result<QueuedChange> {
        timed!(
            self,
            "delete_queued",
            self.inner.delete_queued(chat, id, by)
        )
    }
    async fn try_start_turn(&self, chat: &ChatId, req: &LeaseRequest) -> Result<Option<Lease>> {
        timed!(self, "try_start_turn", self.inner.try_start_turn(chat, req))
    }
    async fn try_resume_turn(
        &self,
        chat: &ChatId,
        awaiting_message_id: &str,
        req: &LeaseRequest,
    ) -> Result<Option<Lease>> {
        timed!(
            self,
            "try_resume_turn",
            self.inner.try_resume_turn(chat, awaiting_message_id, req)
        )
    }
    async fn clear_awaiting(
        &self,
        chat: &ChatId,
        awaiting_message_id: &str,
        now: Millis,
    ) -> Result<bool> {
        timed!(
            self,
            "clear_awaiting",
            self.inner.clear_awaiting(chat, awaiting_message_id, now)
        )
    }
    async fn renew_lease(&self, lease: &mut Lease, ttl_ms: Millis, now: Millis) -> Result<()> {
        timed!(
            self,
            "renew_lease",
            self.inner.renew_lease(lease, ttl_ms, now)
        )
    }
    async fn set_driver(&self, lease: &mut Lease, driver: Option<&UserId>) -> Result<()> {
        timed!(self, "set_driver", self.inner.set_driver(lease, driver))
    }
    async fn save_turn_message(
        &self,
        lease: &Lease,
        message: &UiMessage,
        slot: Slot,
        awaiting: Option<&str>,
        now: Millis,
    ) -> Result<StoredMessage> {
        let name = match (slot, message.role) {
            (Slot::TurnStart, _) => "save_turn_message (user, TurnStart)",
            (Slot::Reply { .. }, Role::Assistant) => "save_turn_message (reply checkpoint)",
            (Slot::Reply { .. }, _) => "save_turn_message (other)",
        };
        timed!(
            self,
            name,
            self.inner
                .save_turn_message(lease, message, slot, awaiting, now)
        )
    }
    async fn promote_next(&self, lease: &Lease, now: Millis) -> Result<Option<StoredMessage>> {
        timed!(self, "promote_next", self.inner.promote_next(lease, now))
    }
    async fn take_steers(
        &self,
        lease: &Lease,
        driver: Option<&UserId>,
        position: i64,
        now: Millis,
    ) -> Result<Vec<StoredMessage>> {
        timed!(
            self,
            "take_steers",
            self.inner.take_steers(lease, driver, position, now)
        )
    }
    async fn end_turn(&self, lease: &Lease, end: TurnEnd<'_>, now: Millis) -> Result<EndTurn> {
        timed!(self, "end_turn", self.inner.end_turn(lease, end, now))
    }
    async fn insert_questions(&self, rows: &[NewQuestion], now: Millis) -> Result<()> {
        timed!(
            self,
            "insert_questions",
            self.inner.insert_questions(rows, now)
        )
    }
    async fn get_question(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        now: Millis,
    ) -> Result<Option<QuestionRow>> {
        timed!(
            self,
            "get_question",
            self.inner.get_question(chat, tool_call_id, now)
        )
    }
    async fn questions_of_message(
        &self,
        chat: &ChatId,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<QuestionRow>> {
        timed!(
            self,
            "questions_of_message",
            self.inner.questions_of_message(chat, message_id, now)
        )
    }
    async fn try_lock_question(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        holder: &str,
        ttl_ms: Millis,
        now: Millis,
    ) -> Result<Option<QuestionLock>> {
        timed!(
            self,
            "try_lock_question",
            self.inner
                .try_lock_question(chat, tool_call_id, holder, ttl_ms, now)
        )
    }
    async fn unlock_question(&self, lock: &QuestionLock) -> Result<()> {
        timed!(self, "unlock_question", self.inner.unlock_question(lock))
    }
    async fn update_question(
        &self,
        lock: &QuestionLock,
        update: &QuestionUpdate,
        now: Millis,
    ) -> Result<QuestionRow> {
        timed!(
            self,
            "update_question",
            self.inner.update_question(lock, update, now)
        )
    }
    async fn record_outcome(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        outcome: &QuestionOutcome,
        actor: Option<&Actor>,
        now: Millis,
    ) -> Result<bool> {
        timed!(
            self,
            "record_outcome",
            self.inner
                .record_outcome(chat, tool_call_id, outcome, actor, now)
        )
    }
    async fn link_question_message(
        &self,
        platform: &str,
        message_id: &str,
        chat: &ChatId,
        tool_call_id: &str,
    ) -> Result<()> {
        timed!(
            self,
            "link_question_message",
            self.inner
                .link_question_message(platform, message_id, chat, tool_call_id)
        )
    }
    async fn find_questions_by_message(
        &self,
        platform: &str,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<(ChatId, String)>> {
        timed!(
            self,
            "find_questions_by_message",
            self.inner
                .find_questions_by_message(platform, message_id, now)
        )
    }
    async fn purge_expired(&self, now: Millis) -> Result<u64> {
        timed!(self, "purge_expired", self.inner.purge_expired(now))
    }
    async fn enqueue_job(&self, job: &NewJob) -> Result<i64> {
        timed!(self, "enqueue_job", self.inner.enqueue_job(job))
    }
    async fn claim_job(&self, worker: &str, claim_ms: Millis, now: Millis) -> Result<Option<Job>> {
        timed!(
            self,
            "claim_job",
            self.inner.claim_job(worker, claim_ms, now)
        )
    }
    async fn complete_job(&self, job: &Job) -> Result<bool> {
        timed!(self, "complete_job", self.inner.complete_job(job))
    }
    async fn retry_job(&self, job: &Job, run_at: Millis, error: &str) -> Result<bool> {
        timed!(self, "retry_job", self.inner.retry_job(job, run_at, error))
    }
    async fn bury_job(&self, job: &Job, error: &str) -> Result<bool> {
        timed!(self, "bury_job", self.inner.bury_job(job, error))
    }
    async fn get_job(&self, id: i64) -> Result<Option<Job>> {
        timed!(self, "get_job", self.inner.get_job(id))
    }
}

/// SQL round trips (statements incl. BEGIN/COMMIT) and write transactions (commits) per call, as
/// the SQL in `store/sql.rs` issues them on the path a plain turn takes (read off the code; keep in
/// step with it — on PostgreSQL the run also counts writing transactions from the server).
fn statements(name: &str) -> (u32, u32) {
    match name {
        // INSERT … ON CONFLICT DO NOTHING (autocommit; writes nothing once the chat exists) +
        // get_chat
        "create_chat" => (2, 0),
        "get_message" | "get_chat" | "list_messages" | "queued_messages" => (1, 0),
        "try_start_turn" | "end_turn" | "set_driver" | "renew_lease" => (1, 1),
        // BEGIN, fence UPDATE, UPDATE awaiting, SELECT MAX(position), INSERT … RETURNING, COMMIT
        "save_turn_message (user, TurnStart)" => (6, 1),
        // BEGIN, fence UPDATE, UPDATE awaiting, INSERT … ON CONFLICT DO UPDATE RETURNING, COMMIT
        "save_turn_message (reply checkpoint)" => (5, 1),
        // A probe read; only when a steer waits: BEGIN, fence UPDATE, UPDATE … RETURNING, COMMIT
        "take_steers" => (1, 0),
        _ => (0, 0),
    }
}

fn print_profile(title: &str, turns: usize, turn_time: Duration, p: &Profile) {
    let calls = p.take();
    let total_store: Duration = calls.values().map(|c| c.1).sum();
    println!("\n  store calls per turn — {title} ({turns} turns):");
    println!(
        "  {:<38} {:>9} {:>10} {:>12} {:>8} {:>6} {:>6}",
        "call", "per turn", "mean", "per turn", "share", "stmts", "commits"
    );
    let mut rows: Vec<_> = calls.iter().collect();
    rows.sort_by_key(|(_, c)| std::cmp::Reverse(c.1));
    let (mut stmts, mut commits) = (0.0, 0.0);
    for (name, (n, d, r)) in rows {
        let per_turn = *n as f64 / turns as f64;
        let (s, c) = statements(name);
        stmts += per_turn * f64::from(s);
        commits += per_turn * f64::from(c);
        let extra = if *r > 0 {
            format!("  ({:.0} rows/call)", *r as f64 / *n as f64)
        } else {
            String::new()
        };
        println!(
            "  {:<38} {:>9.2} {:>10} {:>12} {:>7.1}% {:>6} {:>6}{extra}",
            name,
            per_turn,
            fmt_us(*d / (*n).max(1) as u32),
            fmt_us(d.div_f64(turns as f64)),
            100.0 * d.as_secs_f64() / turn_time.as_secs_f64(),
            s,
            c,
        );
    }
    let per_turn_store = total_store.div_f64(turns as f64);
    let per_turn = turn_time.div_f64(turns as f64);
    println!(
        "  total: {:.0} SQL round trips and {:.0} write commits per turn; store time {} of {} \
         per turn (sum of turn wall times; the rest is engine CPU, task hand-offs and, under \
         concurrency, waiting for the runtime)",
        stmts,
        commits,
        fmt_us(per_turn_store),
        fmt_us(per_turn),
    );
}

// ---- main -------------------------------------------------------------------------------------

fn fmt_ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn fmt_us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
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
            "[{name}] one round trip (SELECT 1 through the pool): median {}",
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
        let engine = engine(store, o.lean_model);
        let lsn0 = wal_lsn(&db.pg).await;
        let row = if scenario == "one" {
            one_chat(name, &engine, o, &profile).await
        } else {
            many_chats(name, &engine, o, &profile).await
        };
        let lsn1 = wal_lsn(&db.pg).await;
        println!(
            "[{name}] {}: median {}, p90 {}, p99 {}, {:.0} turns/s — {}",
            row.scenario,
            fmt_ms(row.median),
            fmt_ms(row.p90),
            fmt_ms(row.p99),
            row.per_sec,
            row.note
        );
        let all_turns = if scenario == "one" {
            o.warmup + o.turns
        } else {
            o.chats * (o.chat_turns + 1)
        };
        if let (Some((a, xa)), Some((b, xb))) = (lsn0, lsn1) {
            println!(
                "[{name}] per turn (warm-up included): {:.1} KiB of WAL, {:.2} writing transactions \
                 (= WAL flushes at commit)",
                (b - a) as f64 / 1024.0 / all_turns as f64,
                (xb - xa) as f64 / all_turns as f64
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
            print_profile(
                &format!("{name}, {}", row.scenario),
                row.turns,
                summed,
                &profile,
            );
        }
        rows.push(row);
    }
}

fn main() {
    let o = Options::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!(
        "turn engine benchmark: zero-latency {} model, 3 steps per turn (echo tool, echo \
         tool, text), tokio multi-thread runtime with {} workers, release={}",
        if o.lean_model {
            "lean (no request log)"
        } else {
            "ScriptedModel"
        },
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        !cfg!(debug_assertions)
    );
    let mut rows = Vec::new();
    rt.block_on(async {
        if o.sqlite {
            run_backend("sqlite", async || Some(sqlite_store().await), &o, &mut rows).await;
        }
        if o.postgres {
            run_backend("postgres", async || postgres_store().await, &o, &mut rows).await;
        }
    });
    println!();
    println!(
        "{:<9} {:<28} {:>6} {:>10} {:>10} {:>10} {:>10}",
        "backend", "scenario", "turns", "median", "p90", "p99", "turns/s"
    );
    for r in &rows {
        println!(
            "{:<9} {:<28} {:>6} {:>10} {:>10} {:>10} {:>10.0}",
            r.backend,
            r.scenario,
            r.turns,
            fmt_ms(r.median),
            fmt_ms(r.p90),
            fmt_ms(r.p99),
            r.per_sec
        );
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
}
