//! Single roles (`try_hold`): a receiver the platform allows once (a bot's Telegram poller, a
//! Matrix account's sync) runs in one process of all that share the database.

use std::time::Duration;

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
