//! Single roles (`try_hold`): a receiver the platform allows once (a bot's Telegram poller, a
//! Matrix account's sync) runs in one process of all that share the database; groups
//! (`members`): the processes that split a piece of work (a Discord bot's gateway shards) learn
//! who is live.

use std::time::Duration;

use frogbot_core::store::MembersOp;

use crate::Db;

/// A role is held by one holder at a time, in one process or across two; another role is
/// free meanwhile; a released role is taken again (within a few seconds: a backend may release
/// in the background); a hold is not lost while its holder keeps it.
pub async fn a_role_is_held_once_and_taken_again_once_released(db: Db) {
    let other = db.second_handle().await;
    let held = db
        .store
        .try_hold("telegram:poller")
        .await
        .unwrap()
        .expect("a free role is taken");
    assert!(
        other.try_hold("telegram:poller").await.unwrap().is_none(),
        "another process does not take a held role"
    );
    assert!(
        db.store
            .try_hold("telegram:poller")
            .await
            .unwrap()
            .is_none(),
        "nor does the same process twice"
    );
    let matrix = other
        .try_hold("matrix:@bot:example.org")
        .await
        .unwrap()
        .expect("another role is free");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), matrix.lost())
            .await
            .is_err(),
        "a kept hold is not lost"
    );
    drop(held);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let again = loop {
        if let Some(h) = other.try_hold("telegram:poller").await.unwrap() {
            break h;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a released role is taken again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    drop(again);
    drop(matrix);
}

/// Groups (`members`): two processes renewing a membership see each other, sorted, and a
/// member that stops renewing drops out once its time has passed; one that leaves (`ttl 0`)
/// drops out at once; groups do not mix.
pub async fn group_members_see_each_other_and_the_expired_drop_out(db: Db) {
    const GROUP: &str = "discord:1:shards";
    const T0: i64 = 1_700_000_000_000;
    let other = db.second_handle().await;
    let store = &db.store;
    let a = |now| async move {
        let op = MembersOp {
            group: GROUP,
            member: "b-replica",
            ttl_ms: 10_000,
            now,
        };
        store.members(&op).await
    };
    assert_eq!(a(T0).await.unwrap(), ["b-replica"], "a lone member");
    let b = other
        .members(&MembersOp {
            group: GROUP,
            member: "a-replica",
            ttl_ms: 3_000,
            now: T0 + 1_000,
        })
        .await
        .unwrap();
    assert_eq!(b, ["a-replica", "b-replica"], "both, sorted");
    assert_eq!(
        a(T0 + 2_000).await.unwrap(),
        ["a-replica", "b-replica"],
        "the other process's member too"
    );
    assert_eq!(
        other
            .members(&MembersOp {
                group: "discord:2:shards",
                member: "c-replica",
                ttl_ms: 10_000,
                now: T0 + 2_000
            })
            .await
            .unwrap(),
        ["c-replica"],
        "another group is apart"
    );
    // "a-replica" renewed last at T0 + 1 s for 3 s: gone after T0 + 4 s.
    assert_eq!(
        a(T0 + 4_000).await.unwrap(),
        ["b-replica"],
        "an expired member drops out"
    );
    // It comes back when it renews.
    assert_eq!(
        other
            .members(&MembersOp {
                group: GROUP,
                member: "a-replica",
                ttl_ms: 3_000,
                now: T0 + 5_000
            })
            .await
            .unwrap(),
        ["a-replica", "b-replica"]
    );
    // Leaving: gone at once, for itself and for the others.
    assert_eq!(
        other
            .members(&MembersOp {
                group: GROUP,
                member: "a-replica",
                ttl_ms: 0,
                now: T0 + 5_500
            })
            .await
            .unwrap(),
        ["b-replica"]
    );
    assert_eq!(a(T0 + 5_600).await.unwrap(), ["b-replica"]);
}
