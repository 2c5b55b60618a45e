//! Store throughput on a SQLite file (WAL, `synchronous = FULL`: every commit is durable).
//!
//! - Writes: `send` (starts a turn) + `end_turn` (saves the reply, releases) pairs, each task on
//!   its own chat, at concurrency 1, 8 and 64: operations/s, commits/s and operations per commit
//!   (the group-commit factor, from [`SqliteStore::stats`]).
//! - Reads: `get_chat` one after another — the reader threads' hand-off — next to the same query
//!   through `spawn_blocking` and a mutex-guarded connection, the alternative hand-off.
//!
//! ```text
//! cargo bench -p frogbot-sqlite --bench store_ops
//! cargo bench -p frogbot-sqlite --bench store_ops -- --pairs=2000 --reads=20000
//! ```
//!
//! `--pairs=N`: pairs per concurrency level (default 2000); `--reads=N` (default 20000).
//!
//! Measured (this project's 2-core machine, 2026-11-30, commit 87ae013): an operation handed to
//! the group-committing writer costs ~100 µs alone and a few µs each at concurrency 64 — against
//! ~100 µs per *statement* through sqlx's SQLite driver, whose per-connection worker thread the old
//! store paid ~25 times a turn (why this store is on rusqlite).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use frogbot_core::model::{ChatId, Delivery, MessageMetadata, MessagePart, Role, UiMessage};
use frogbot_core::store::*;
use frogbot_sqlite::SqliteStore;

const T0: i64 = 1_800_000_000_000;

fn arg(name: &str, default: usize) -> usize {
    std::env::args()
        .find_map(|a| a.strip_prefix(&format!("--{name}="))?.parse().ok())
        .unwrap_or(default)
}

fn message(id: String, role: Role, text: &str) -> UiMessage {
    UiMessage {
        id,
        role,
        parts: vec![MessagePart::text(text)],
        metadata: MessageMetadata::default(),
    }
}

/// One turn: `send` starts it, `end_turn` saves the reply and releases the chat.
async fn turn(store: &SqliteStore, chat: &NewChat, i: usize) {
    let req = LeaseRequest {
        holder: format!("{}-{i}", chat.chat_id),
        driver: None,
        ttl_ms: 60_000,
        now: T0 + i as i64,
        interrupted: None,
    };
    let user = message(format!("u{i}"), Role::User, "hello, how are you?");
    let sent = store
        .send(&SendOp {
            chat,
            message: &user,
            delivery: Delivery::Queue,
            lease: &req,
            queue_if_busy: true,
        })
        .await
        .unwrap();
    let Sent::Started {
        lease, message: m, ..
    } = sent
    else {
        panic!("the chat is idle: {sent:?}")
    };
    let reply = message(
        format!("a{i}"),
        Role::Assistant,
        "Fine, thanks. Here is a reply of a realistic size for a short answer.",
    );
    let ended = store
        .end_turn(&EndTurnOp {
            lease: &lease,
            reply: Some((&reply, m.position.unwrap())),
            mode: EndMode::Next,
            now: T0 + i as i64,
            delivery: None,
        })
        .await
        .unwrap();
    assert!(matches!(ended, TurnEnded::Released { .. }));
}

async fn writes(concurrency: usize, pairs: usize) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_path(dir.path().join("bench.db"))
        .await
        .unwrap();
    let per_task = pairs.div_ceil(concurrency);
    let before = store.stats();
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                let chat = NewChat {
                    chat_id: ChatId::new(format!("c{t}")).unwrap(),
                    owner: None,
                    channel: None,
                };
                for i in 0..per_task {
                    turn(&store, &chat, i).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    let after = store.stats();
    let (ops, commits) = (
        after.operations - before.operations,
        after.commits - before.commits,
    );
    println!(
        "writes  concurrency {concurrency:>3}: {pairs:>6} send+end_turn pairs in {secs:6.2} s — \
         {:>8.0} ops/s, {:>7.0} commits/s, {:>6.2} ops/commit",
        ops as f64 / secs,
        commits as f64 / secs,
        ops as f64 / commits.max(1) as f64,
        pairs = per_task * concurrency,
    );
}

async fn reads(n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.db");
    let store = SqliteStore::open_path(&path).await.unwrap();
    let chat = NewChat {
        chat_id: ChatId::new("r").unwrap(),
        owner: None,
        channel: None,
    };
    turn(&store, &chat, 0).await;
    let id = chat.chat_id.clone();
    for _ in 0..1000 {
        store.get_chat(&id).await.unwrap();
    }
    let started = Instant::now();
    for _ in 0..n {
        store.get_chat(&id).await.unwrap().unwrap();
    }
    let threads = started.elapsed().as_secs_f64() / n as f64 * 1e6;

    // The alternative: spawn_blocking over a pooled read-only connection, same query.
    let conn = rusqlite::Connection::open_with_flags(
        &path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .unwrap();
    let pool = Arc::new(Mutex::new(vec![conn]));
    let read = |pool: Arc<Mutex<Vec<rusqlite::Connection>>>| async move {
        tokio::task::spawn_blocking(move || {
            let c = pool.lock().unwrap().pop().unwrap();
            let row: i64 = c
                .prepare_cached(
                    "SELECT chat_id, owner, channel_platform, channel_thread, created_at, \
                     updated_at, awaiting_message_id, lease_holder, lease_token, lease_until, \
                     driver, version FROM chats WHERE chat_id = ?1",
                )
                .unwrap()
                .query_row(["r"], |r| r.get(4))
                .unwrap();
            pool.lock().unwrap().push(c);
            row
        })
        .await
        .unwrap()
    };
    for _ in 0..1000 {
        read(Arc::clone(&pool)).await;
    }
    let started = Instant::now();
    for _ in 0..n {
        read(Arc::clone(&pool)).await;
    }
    let blocking = started.elapsed().as_secs_f64() / n as f64 * 1e6;
    println!(
        "reads   get_chat one after another ({n}): reader threads {threads:.1} µs/read, \
         spawn_blocking + pool {blocking:.1} µs/read"
    );
}

fn main() {
    let pairs = arg("pairs", 2000);
    let n = arg("reads", 20_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for concurrency in [1, 8, 64] {
            writes(concurrency, pairs).await;
        }
        reads(n).await;
    });
}
