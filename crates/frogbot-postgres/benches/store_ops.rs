//! `send` + `end_turn` pairs against a durable private cluster (fsync and synchronous_commit on),
//! at concurrency 1, 8 and 64: each worker starts a turn on its own chat with a `send` and ends it
//! with its reply (`end_turn`, nothing queued: released). Prints pairs/s, operations/s and the mean
//! latency of a pair and of an operation — then again with every operation forced down the
//! lock-first path (`BEGIN`, `SELECT … FOR UPDATE`, statements, `COMMIT`) that a lost
//! compare-and-swap falls back to, to show what the one-statement forms save.
//!
//! `cargo bench -p frogbot-postgres --bench store_ops` (`FROGBOT_BENCH_SECS` per level, default 5).

use std::sync::Arc;
use std::time::{Duration, Instant};

use frogbot_core::model::{Delivery, MessageMetadata, MessagePart, Role, UiMessage, UserId};
use frogbot_core::store::prelude::*;
use frogbot_core::store::{EndMode, EndTurnOp, LeaseRequest, NewChat, SendOp, Sent, TurnEnded};
use frogbot_postgres::{PostgresStore, StoreOptions};

fn message(id: String, role: Role, author: Option<&UserId>) -> UiMessage {
    UiMessage {
        id,
        role,
        parts: vec![MessagePart::text("a short message of the size people type")],
        metadata: MessageMetadata {
            author: author.cloned(),
            model: Some("demo".into()),
            ..Default::default()
        },
    }
}

/// One worker: pairs on its own chat until `until`; returns (pairs, total pair latency).
async fn worker(store: Arc<PostgresStore>, chat: String, until: Instant) -> (u64, Duration) {
    let author = UserId::new(format!("user-{chat}"));
    let new = NewChat {
        chat_id: frogbot_core::model::ChatId::new(chat.clone()).unwrap(),
        owner: Some(author.clone()),
        channel: None,
    };
    let (mut pairs, mut total) = (0u64, Duration::ZERO);
    let mut now = 1_800_000_000_000i64;
    while Instant::now() < until {
        now += 1;
        let t = Instant::now();
        let user = message(format!("u{pairs}"), Role::User, Some(&author));
        let req = LeaseRequest {
            holder: format!("{chat}/{pairs}"),
            driver: Some(author.clone()),
            ttl_ms: 60_000,
            now,
            interrupted: None,
        };
        let sent = store
            .send(&SendOp {
                chat: &new,
                message: &user,
                delivery: Delivery::Queue,
                lease: &req,
                queue_if_busy: true,
            })
            .await
            .expect("send");
        let Sent::Started { lease, message, .. } = sent else {
            panic!("the worker's chat is idle: {sent:?}")
        };
        let reply = message_reply(pairs);
        let ended = store
            .end_turn(&EndTurnOp {
                lease: &lease,
                reply: Some((&reply, message.position.unwrap())),
                mode: EndMode::Next,
                now,
                delivery: None,
            })
            .await
            .expect("end_turn");
        assert!(matches!(ended, TurnEnded::Released { .. }), "{ended:?}");
        total += t.elapsed();
        pairs += 1;
    }
    (pairs, total)
}

fn message_reply(n: u64) -> UiMessage {
    message(format!("a{n}"), Role::Assistant, None)
}

fn main() {
    let secs: u64 = std::env::var("FROGBOT_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let Some(cluster) = frogbot_testdb::PgCluster::shared_durable() else {
        eprintln!("no PostgreSQL server binaries: nothing to measure");
        return;
    };
    assert!(
        cluster.is_durable(),
        "the benchmark needs a durable cluster"
    );
    let url = cluster.create_database();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = Arc::new(
            PostgresStore::open_with(
                &url,
                StoreOptions {
                    max_connections: 64,
                    ..StoreOptions::default()
                },
            )
            .await
            .expect("open"),
        );
        let careful = Arc::new((*store).clone().careful_only());
        for (path, store) in [("one statement each", store), ("lock-first path forced", careful)] {
        println!(
            "postgres send+end_turn pairs ({path}), durable cluster (fsync, synchronous_commit on), \
             {secs} s per level"
        );
        for concurrency in [1usize, 8, 64] {
            // Warm up: connections opened, statements prepared.
            let warm = Instant::now() + Duration::from_millis(500);
            let mut tasks = Vec::new();
            for w in 0..concurrency {
                tasks.push(tokio::spawn(worker(
                    store.clone(),
                    format!("w{concurrency}-{w}-{}", path.len()),
                    warm,
                )));
            }
            for t in tasks {
                t.await.unwrap();
            }
            let start = Instant::now();
            let until = start + Duration::from_secs(secs);
            let mut tasks = Vec::new();
            for w in 0..concurrency {
                tasks.push(tokio::spawn(worker(
                    store.clone(),
                    format!("c{concurrency}-{w}-{}", path.len()),
                    until,
                )));
            }
            let (mut pairs, mut total) = (0u64, Duration::ZERO);
            for t in tasks {
                let (p, d) = t.await.unwrap();
                pairs += p;
                total += d;
            }
            let elapsed = start.elapsed().as_secs_f64();
            let mean_pair = total.as_secs_f64() * 1000.0 / pairs.max(1) as f64;
            println!(
                "concurrency {concurrency:>2}: {:>8.0} pairs/s {:>8.0} ops/s   mean pair {mean_pair:.2} ms, \
                 mean op {:.2} ms   ({pairs} pairs)",
                pairs as f64 / elapsed,
                2.0 * pairs as f64 / elapsed,
                mean_pair / 2.0,
            );
        }
        }
    });
}
