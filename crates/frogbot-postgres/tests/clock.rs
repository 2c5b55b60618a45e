//! One time for every replica: `OperationsStore::database_time` reads PostgreSQL's clock, and
//! `DatabaseClock` corrects a host's clock to it, so two hosts whose clocks are three minutes
//! apart read a lease one of them wrote on the same time (the other does not take it early).

mod common;

use std::sync::Arc;

use common::*;
use frogbot_core::agent::{Clock, DatabaseClock, ManualClock};
use frogbot_core::model::now_millis;
use frogbot_core::store::MembersOp;

/// How far apart two synced clocks may read (loopback round trips on a loaded machine).
const AGREE_MS: i64 = 500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_with_clocks_minutes_apart_read_leases_on_the_database_time() {
    let Some(db) = frogbot_testdb::postgres_db() else {
        return;
    };
    let store = open(&db.url, false).await;
    let db_now = store
        .database_time()
        .await
        .unwrap()
        .expect("PostgreSQL has a clock");
    assert!(
        (db_now - now_millis()).abs() < 5_000,
        "the test's server runs on this host"
    );

    // Host A's clock is 90 s behind, host B's 90 s ahead.
    let behind = ManualClock::new(now_millis() - 90_000);
    let ahead = ManualClock::new(now_millis() + 90_000);
    let a = DatabaseClock::sync(&store, Arc::new(behind.clone()))
        .await
        .unwrap()
        .expect("a database clock");
    let b = DatabaseClock::sync(&store, Arc::new(ahead.clone()))
        .await
        .unwrap()
        .expect("a database clock");
    assert!((a.offset() - 90_000).abs() < AGREE_MS, "{}", a.offset());
    assert!((b.offset() + 90_000).abs() < AGREE_MS, "{}", b.offset());
    assert!((a.now() - b.now()).abs() < AGREE_MS);

    // On their own clocks, B reads A's fresh 10 s membership as long expired…
    let ttl = 10_000;
    store
        .members(&MembersOp {
            group: "raw",
            member: "a",
            ttl_ms: ttl,
            now: behind.now(),
        })
        .await
        .unwrap();
    assert_eq!(
        store
            .members(&MembersOp {
                group: "raw",
                member: "b",
                ttl_ms: ttl,
                now: ahead.now()
            })
            .await
            .unwrap(),
        ["b"],
        "the skew this test corrects is real"
    );
    // …on the database's time, both are live, as they are.
    store
        .members(&MembersOp {
            group: "synced",
            member: "a",
            ttl_ms: ttl,
            now: a.now(),
        })
        .await
        .unwrap();
    assert_eq!(
        store
            .members(&MembersOp {
                group: "synced",
                member: "b",
                ttl_ms: ttl,
                now: b.now()
            })
            .await
            .unwrap(),
        ["a", "b"]
    );

    // A host clock that jumps (an NTP step) is corrected at the next measurement.
    a.keep_in_sync(&store, std::time::Duration::from_millis(50));
    behind.advance(30_000);
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while (a.now() - b.now()).abs() >= AGREE_MS {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the offset is measured again");
    assert!((a.offset() - 60_000).abs() < AGREE_MS, "{}", a.offset());
}
