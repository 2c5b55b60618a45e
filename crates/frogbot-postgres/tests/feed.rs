//! Pushed changes (`JobStore::changes`, `LISTEN frogbot_chats`): a write through one handle (a
//! second process, as far as the database knows) is pushed to another handle's receivers; when
//! the listening connection is killed, the receivers get a `Resync` and the notices resume.

mod common;

use std::time::Duration;

use common::*;
use frogbot_core::model::Delivery;
use frogbot_core::store::prelude::*;
use frogbot_core::store::{Change, NewJob};
use tokio::sync::broadcast;

const WAIT: Duration = Duration::from_secs(20);

/// The next change `rx` receives that `wanted` accepts.
async fn next(rx: &mut broadcast::Receiver<Change>, wanted: impl Fn(&Change) -> bool) -> Change {
    tokio::time::timeout(WAIT, async {
        loop {
            let c = rx.recv().await.expect("the feed stays open");
            if wanted(&c) {
                return c;
            }
        }
    })
    .await
    .expect("a change in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_anywhere_are_pushed_and_a_lost_listener_resyncs() {
    let Some(db) = frogbot_testdb::postgres_db() else {
        return;
    };
    let writer = open(&db.url, false).await;
    let watcher = frogbot_postgres::PostgresStore::open(&db.url)
        .await
        .unwrap();
    let mut rx = watcher.changes().expect("PostgreSQL pushes changes");
    // Listening has started once the first resync arrives.
    next(&mut rx, |c| *c == Change::Resync).await;

    let c = web_chat("feed-1", Some("alice"));
    send(
        writer.as_ref(),
        &c,
        &user_msg("m1", Some("alice"), "hi"),
        Delivery::Queue,
        "writer",
        T0,
    )
    .await;
    assert_eq!(
        next(&mut rx, |c| matches!(c, Change::Chat(_))).await,
        Change::Chat(chat("feed-1"))
    );

    // The listening connection dies (a failover, an idle-connection reaper): a resync, then
    // notices again.
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND query ILIKE 'LISTEN%'",
    )
    .fetch_all(watcher.pool())
    .await
    .unwrap();
    assert_eq!(killed, [true], "one listening connection");
    next(&mut rx, |c| *c == Change::Resync).await;
    let c2 = web_chat("feed-2", Some("alice"));
    send(
        writer.as_ref(),
        &c2,
        &user_msg("m2", Some("alice"), "again"),
        Delivery::Queue,
        "writer",
        T0 + 1,
    )
    .await;
    assert_eq!(
        next(&mut rx, |c| matches!(c, Change::Chat(_))).await,
        Change::Chat(chat("feed-2"))
    );
}

/// A job scheduled through one handle (enqueued, retried, deferred) is pushed to another's
/// receivers with its run-at time, so an idle worker of another process wakes for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_scheduled_anywhere_are_pushed_with_their_time() {
    let Some(db) = frogbot_testdb::postgres_db() else {
        return;
    };
    let writer = open(&db.url, false).await;
    let watcher = open(&db.url, false).await;
    let mut rx = watcher.changes().expect("PostgreSQL pushes changes");
    next(&mut rx, |c| *c == Change::Resync).await;
    let is_job = |c: &Change| matches!(c, Change::Job { .. });

    let job = NewJob {
        kind: "test".into(),
        key: Some("k1".into()),
        payload: serde_json::json!({}),
        run_at: T0 + 5_000,
    };
    writer.enqueue_job(&job).await.unwrap();
    assert_eq!(
        next(&mut rx, is_job).await,
        Change::Job { run_at: T0 + 5_000 }
    );

    let claimed = writer
        .claim_job("w", TTL, T0 + 5_000)
        .await
        .unwrap()
        .expect("due");
    assert!(
        writer
            .retry_job(&claimed, T0 + 9_000, "boom")
            .await
            .unwrap()
    );
    assert_eq!(
        next(&mut rx, is_job).await,
        Change::Job { run_at: T0 + 9_000 }
    );

    let claimed = writer
        .claim_job("w", TTL, T0 + 9_000)
        .await
        .unwrap()
        .expect("due");
    assert!(writer.defer_job(&claimed, T0 + 12_000).await.unwrap());
    assert_eq!(
        next(&mut rx, is_job).await,
        Change::Job {
            run_at: T0 + 12_000
        }
    );
}

/// A notice naming many chats (the announcer batches the ids of operations that came together)
/// is pushed as one change per chat (regression: the comma-separated payload was read as one
/// malformed id and dropped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_naming_many_chats_pushes_each() {
    let Some(db) = frogbot_testdb::postgres_db() else {
        return;
    };
    let watcher = frogbot_postgres::PostgresStore::open(&db.url)
        .await
        .unwrap();
    let mut rx = watcher.changes().expect("PostgreSQL pushes changes");
    next(&mut rx, |c| *c == Change::Resync).await;
    sqlx::query("SELECT pg_notify('frogbot_chats', 'batch-1,batch-2')")
        .execute(watcher.pool())
        .await
        .unwrap();
    let is_chat = |c: &Change| matches!(c, Change::Chat(_));
    assert_eq!(next(&mut rx, is_chat).await, Change::Chat(chat("batch-1")));
    assert_eq!(next(&mut rx, is_chat).await, Change::Chat(chat("batch-2")));
}

/// A steady stream of writes is announced in spaced notices, not one per write (each notice is a
/// transaction and a wake-up of every listener: one every 2 ms cost sequential turns 10–15 %),
/// and the last write is still announced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_stream_of_writes_is_announced_in_spaced_notices() {
    let Some(db) = frogbot_testdb::postgres_db() else {
        return;
    };
    let writer = open(&db.url, false).await;
    let mut listener = sqlx::postgres::PgListener::connect(&db.url).await.unwrap();
    listener.listen("frogbot_chats").await.unwrap();
    let c = web_chat("steady", Some("alice"));
    let start = std::time::Instant::now();
    for i in 0..60 {
        send(
            writer.as_ref(),
            &c,
            &user_msg(&format!("m{i}"), Some("alice"), "hi"),
            Delivery::Queue,
            "writer",
            T0 + i,
        )
        .await;
    }
    let writing = start.elapsed();
    // Every notice up to the one sent after the last write (at most 10 ms after it, plus the
    // time to reach us).
    let mut notices = 0u32;
    while let Ok(n) = tokio::time::timeout(Duration::from_millis(500), listener.recv()).await {
        assert_eq!(n.unwrap().payload(), "steady");
        notices += 1;
    }
    assert!(notices >= 1, "the writes are announced");
    // One notice at most every 10 ms while the writes went on, and one after them.
    let most = (writing.as_millis() / 10) as u32 + 2;
    assert!(
        notices <= most,
        "{notices} notices for 60 writes in {writing:?}: more than one per 10 ms"
    );
}
