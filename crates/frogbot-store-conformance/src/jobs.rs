//! Durable jobs: claimed by one worker, retried at their time, rescheduled and revived by key,
//! kept across reopening, written with a turn's end, deferred, found in key order, dead and purged.

use std::sync::Arc;

use serde_json::json;

use frogbot_core::model::Millis;
use frogbot_core::store::*;

use crate::Db;
use crate::support::*;

pub async fn job_is_claimed_by_one_worker(db: Db) {
    let a = Arc::clone(&db.store);
    let b = db.second_handle().await;
    let id = a.enqueue_job(&job("updated", None, T0)).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..16 {
        let s = if i % 2 == 0 {
            Arc::clone(&a)
        } else {
            Arc::clone(&b)
        };
        tasks.push(tokio::spawn(async move {
            s.claim_job(&format!("w{i}"), 10_000, T0).await.unwrap()
        }));
    }
    let mut claimed = Vec::new();
    for t in tasks {
        if let Some(j) = t.await.unwrap() {
            claimed.push(j);
        }
    }
    assert_eq!(claimed.len(), 1, "one worker claims the job");
    assert_eq!(claimed[0].id, id);
    assert_eq!(claimed[0].attempts, 1);
    assert_eq!(claimed[0].claim_until, Some(T0 + 10_000));
    assert_eq!(claimed[0].payload, json!({"kind": "updated"}));
    assert!(
        a.claim_job("late", 10_000, T0 + 9_999)
            .await
            .unwrap()
            .is_none()
    );
    let again = a
        .claim_job("late", 10_000, T0 + 10_000)
        .await
        .unwrap()
        .expect("a claim that ran out can be taken again");
    assert_eq!(again.attempts, 2, "the claim count is the fencing token");
    assert!(
        !a.complete_job(&claimed[0]).await.unwrap(),
        "the first claim was lost"
    );
    assert!(!a.retry_job(&claimed[0], T0, "x").await.unwrap());
    assert!(!a.bury_job(&claimed[0], "x").await.unwrap());
    assert!(a.complete_job(&again).await.unwrap());
    assert!(a.get_job(id).await.unwrap().is_none());
}

pub async fn job_is_retried_at_its_run_at_time(db: Db) {
    let s = &*db.store;
    assert!(s.claim_job("w", 1_000, T0).await.unwrap().is_none());
    let id = s
        .enqueue_job(&job("updated", None, T0 + 100))
        .await
        .unwrap();
    assert!(
        s.claim_job("w", 1_000, T0 + 99).await.unwrap().is_none(),
        "not before its run-at time"
    );
    let j = s.claim_job("w", 1_000, T0 + 100).await.unwrap().unwrap();
    assert!(s.retry_job(&j, T0 + 5_100, "boom").await.unwrap());
    let stored = s.get_job(id).await.unwrap().unwrap();
    assert_eq!((stored.claimed_by, stored.run_at), (None, T0 + 5_100));
    assert!(s.claim_job("w", 1_000, T0 + 5_099).await.unwrap().is_none());
    let j = s.claim_job("w", 1_000, T0 + 5_100).await.unwrap().unwrap();
    assert_eq!(j.attempts, 2);
    assert_eq!(j.last_error.as_deref(), Some("boom"));
    assert!(s.bury_job(&j, "gave up").await.unwrap());
    assert!(
        s.claim_job("w", 1_000, T0 + 1_000_000)
            .await
            .unwrap()
            .is_none(),
        "a dead job never runs"
    );
    let dead = s.get_job(id).await.unwrap().unwrap();
    assert!(dead.dead);
    assert_eq!(dead.last_error.as_deref(), Some("gave up"));
    // Due jobs are claimed earliest first.
    let late = s.enqueue_job(&job("b", None, T0 + 20)).await.unwrap();
    let early = s.enqueue_job(&job("a", None, T0 + 10)).await.unwrap();
    assert_eq!(
        s.claim_job("w", 1_000, T0 + 30).await.unwrap().unwrap().id,
        early
    );
    assert_eq!(
        s.claim_job("w", 1_000, T0 + 30).await.unwrap().unwrap().id,
        late
    );
}

pub async fn job_key_reschedules_and_revives(db: Db) {
    let s = &*db.store;
    let id = s
        .enqueue_job(&job("updated", Some("q:1"), T0 + 500))
        .await
        .unwrap();
    let same = s
        .enqueue_job(&job("updated", Some("q:1"), T0 + 100))
        .await
        .unwrap();
    assert_eq!(id, same, "one job per key");
    assert_eq!(
        s.get_job(id).await.unwrap().unwrap().run_at,
        T0 + 100,
        "the earlier time wins"
    );
    s.enqueue_job(&job("updated", Some("q:1"), T0 + 900))
        .await
        .unwrap();
    let j = s.get_job(id).await.unwrap().unwrap();
    assert_eq!(j.run_at, T0 + 100);
    assert_eq!(j.generation, 2);
    // Re-enqueued while running: completing that run keeps the job scheduled.
    let j = s.claim_job("w", 1_000, T0 + 100).await.unwrap().unwrap();
    s.enqueue_job(&job("updated", Some("q:1"), T0 + 200))
        .await
        .unwrap();
    assert!(s.complete_job(&j).await.unwrap());
    let kept = s.get_job(id).await.unwrap().expect("kept");
    assert_eq!(kept.claimed_by, None);
    let j = s
        .claim_job("w", 1_000, T0 + 200)
        .await
        .unwrap()
        .expect("still scheduled");
    assert!(s.bury_job(&j, "out of retries").await.unwrap());
    assert!(s.get_job(id).await.unwrap().unwrap().dead);
    // Enqueued again by key, a dead job comes back with its attempts reset, at the new time.
    s.enqueue_job(&job("updated", Some("q:1"), T0 + 300))
        .await
        .unwrap();
    let j = s
        .claim_job("w", 1_000, T0 + 300)
        .await
        .unwrap()
        .expect("revived");
    assert_eq!(j.id, id);
    assert_eq!(j.attempts, 1);
    assert!(!j.dead);
    // Jobs without a key are never merged.
    let x = s.enqueue_job(&job("x", None, T0)).await.unwrap();
    let y = s.enqueue_job(&job("x", None, T0)).await.unwrap();
    assert_ne!(x, y);
}

pub async fn job_survives_reopening_the_store(db: Db) {
    let id = {
        let s = db.second_handle().await;
        let id = s
            .enqueue_job(&job("updated", Some("k"), T0 + 5_000))
            .await
            .unwrap();
        let j = s.claim_job("w", 1_000, T0 + 5_000).await.unwrap().unwrap();
        s.retry_job(&j, T0 + 10_000, "later").await.unwrap();
        id
    };
    let s = db.second_handle().await;
    let j = s
        .get_job(id)
        .await
        .unwrap()
        .expect("the job survives reopening");
    assert_eq!(j.run_at, T0 + 10_000);
    assert!(s.claim_job("w", 1_000, T0 + 9_999).await.unwrap().is_none());
    let j = s.claim_job("w", 1_000, T0 + 10_000).await.unwrap().unwrap();
    assert_eq!(j.attempts, 2);
}

pub async fn delivery_job_is_written_with_the_turns_end(db: Db) {
    let s = &*db.store;
    let c = web("delivery", None);
    let (l, u1) = start(s, &c, "u1", None, T0).await;
    let d1 = job("deliver", Some("deliver:a1"), T0 + 100);
    s.end_turn(&EndTurnOp {
        lease: &l,
        reply: Some((&assistant_msg("a1", "hi"), u1.position.unwrap())),
        mode: EndMode::Next,
        now: T0 + 1,
        delivery: Some(&d1),
    })
    .await
    .unwrap();
    assert!(
        s.claim_job("w", 1_000, T0 + 99).await.unwrap().is_none(),
        "due at its run-at time"
    );
    let j = s
        .claim_job("w", 1_000, T0 + 100)
        .await
        .unwrap()
        .expect("the delivery is scheduled with the reply");
    assert_eq!(
        (j.kind.as_str(), j.key.as_deref()),
        ("deliver", Some("deliver:a1"))
    );
    // Removed by key whoever holds it (the posting process finished first).
    assert!(s.delete_job("deliver:a1").await.unwrap());
    assert!(!s.delete_job("deliver:a1").await.unwrap());
    assert!(
        !s.complete_job(&j).await.unwrap(),
        "the claim is gone with it"
    );

    // Waiting on questions: the text before them is owed too.
    let (l, u2) = start(s, &c, "u2", None, T0 + 200).await;
    s.await_answers(&AwaitOp {
        lease: &l,
        reply: &assistant_msg("a2", "let me ask"),
        position: u2.position.unwrap(),
        questions: &[new_question(&c.chat_id, "call-d", "a2", 0)],
        job: None,
        now: T0 + 201,
        delivery: Some(&job("deliver", Some("deliver:a2"), T0 + 300)),
    })
    .await
    .unwrap();
    let j = s
        .claim_job("w", 1_000, T0 + 300)
        .await
        .unwrap()
        .expect("scheduled with the waiting reply");
    assert_eq!(j.key.as_deref(), Some("deliver:a2"));
    assert!(s.complete_job(&j).await.unwrap());
}

pub async fn dead_jobs_are_listed_and_purged(db: Db) {
    let s = &*db.store;
    assert!(s.dead_jobs(10).await.unwrap().is_empty());
    s.enqueue_job(&job("deliver", Some("deliver:x"), T0))
        .await
        .unwrap();
    s.enqueue_job(&job("deliver", Some("deliver:y"), T0 + 10))
        .await
        .unwrap();
    let x = s.claim_job("w", 1_000, T0).await.unwrap().unwrap();
    assert!(s.bury_job(&x, "channel_not_found").await.unwrap());
    let dead = s.dead_jobs(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].key.as_deref(), Some("deliver:x"));
    assert_eq!(dead[0].last_error.as_deref(), Some("channel_not_found"));
    assert!(dead[0].dead);
    // Not yet past the retention: kept. The live job is never purged.
    assert_eq!(s.purge_dead_jobs(T0).await.unwrap(), 0);
    assert_eq!(s.purge_dead_jobs(T0 + 1_000).await.unwrap(), 1);
    assert!(s.dead_jobs(10).await.unwrap().is_empty());
    let y = s.claim_job("w", 1_000, T0 + 10).await.unwrap();
    assert_eq!(y.unwrap().key.as_deref(), Some("deliver:y"));
}

fn keyed_job(key: &str, run_at: Millis) -> NewJob {
    NewJob {
        kind: "deliver".into(),
        key: Some(key.into()),
        payload: json!({}),
        run_at,
    }
}

/// `earlier_job`: the oldest live job of a key prefix enqueued before a key (the engine keeps a
/// thread's replies in order with it); other prefixes, later jobs and dead jobs do not count,
/// and the prefix is literal (`_` and `%` are no wildcards).
pub async fn earlier_jobs_are_found_by_key_prefix_in_order(db: Db) {
    let s = &*db.store;
    for key in ["d:a_1:m1", "d:a%1:m1", "d:ab1:m1", "d:a_1:m2", "d:a_1:m3"] {
        s.enqueue_job(&keyed_job(key, T0)).await.unwrap();
    }
    let earlier = |key: &'static str| async move {
        s.earlier_job("d:a_1:", key)
            .await
            .unwrap()
            .and_then(|j| j.key)
    };
    assert_eq!(earlier("d:a_1:m1").await, None, "the first has none");
    assert_eq!(earlier("d:a_1:m2").await.as_deref(), Some("d:a_1:m1"));
    assert_eq!(earlier("d:a_1:m3").await.as_deref(), Some("d:a_1:m1"));
    // A key without a job: any job of the prefix but itself.
    assert_eq!(earlier("d:a_1:zz").await.as_deref(), Some("d:a_1:m1"));
    // The first done (removed): the second is the earliest.
    s.delete_job("d:a_1:m1").await.unwrap();
    assert_eq!(earlier("d:a_1:m3").await.as_deref(), Some("d:a_1:m2"));
    assert_eq!(earlier("d:a_1:m2").await, None);
    // A dead job is given up on: it holds nothing back.
    for other in ["d:a%1:m1", "d:ab1:m1"] {
        let job = s.claim_job("w", 1_000, T0).await.unwrap().unwrap();
        assert_eq!(job.key.as_deref(), Some(other), "claimed in order");
        s.complete_job(&job).await.unwrap();
    }
    let job2 = s.claim_job("w", 1_000, T0).await.unwrap().unwrap();
    assert_eq!(job2.key.as_deref(), Some("d:a_1:m2"));
    s.bury_job(&job2, "gone").await.unwrap();
    assert_eq!(earlier("d:a_1:m3").await, None);
}

/// `defer_job`: the claim is released and the job runs again at the time asked for, its
/// attempts as before the claim; a lost claim defers nothing.
pub async fn a_deferred_job_keeps_its_attempts(db: Db) {
    let s = &*db.store;
    s.enqueue_job(&keyed_job("d:x:1", T0)).await.unwrap();
    let job = s.claim_job("w", 1_000, T0).await.unwrap().unwrap();
    assert_eq!(job.attempts, 1);
    assert!(s.defer_job(&job, T0 + 5_000).await.unwrap());
    assert!(s.claim_job("w", 1_000, T0 + 4_999).await.unwrap().is_none());
    let again = s.claim_job("w2", 1_000, T0 + 5_000).await.unwrap().unwrap();
    assert_eq!(again.attempts, 1, "the deferred claim is not counted");
    assert!(
        !s.defer_job(&job, T0 + 9_000).await.unwrap(),
        "another worker's old claim defers nothing"
    );
    assert!(s.retry_job(&again, T0 + 6_000, "failed").await.unwrap());
    let third = s.claim_job("w", 1_000, T0 + 6_000).await.unwrap().unwrap();
    assert_eq!(third.attempts, 2, "a failed attempt counts");
}

/// A store that pushes changes ([`JobStore::changes`]) announces every job it schedules — enqueued,
/// retried, deferred, revived — with its run-at time, to every handle (the worker of another
/// process wakes for it). A store that pushes nothing is not asked.
pub async fn scheduled_jobs_are_pushed_to_other_handles(db: Db) {
    let a = Arc::clone(&db.store);
    let b = db.second_handle().await;
    let Some(mut rx) = b.changes() else { return };
    let wait = std::time::Duration::from_secs(20);
    let mut next = async |want: &dyn Fn(&Change) -> bool| -> Change {
        tokio::time::timeout(wait, async {
            loop {
                let c = rx.recv().await.expect("the feed stays open");
                if want(&c) {
                    return c;
                }
            }
        })
        .await
        .expect("a change in time")
    };
    // Listening: the first resync.
    next(&|c| *c == Change::Resync).await;
    let is_job = |c: &Change| matches!(c, Change::Job { .. });
    a.enqueue_job(&job("a", Some("pushed"), T0 + 500))
        .await
        .unwrap();
    assert_eq!(next(&is_job).await, Change::Job { run_at: T0 + 500 });
    let j = a.claim_job("w", 1_000, T0 + 500).await.unwrap().unwrap();
    assert!(a.retry_job(&j, T0 + 5_000, "boom").await.unwrap());
    assert_eq!(next(&is_job).await, Change::Job { run_at: T0 + 5_000 });
    let j = a.claim_job("w", 1_000, T0 + 5_000).await.unwrap().unwrap();
    assert!(a.defer_job(&j, T0 + 6_000).await.unwrap());
    assert_eq!(next(&is_job).await, Change::Job { run_at: T0 + 6_000 });
    let j = a.claim_job("w", 1_000, T0 + 6_000).await.unwrap().unwrap();
    assert!(a.bury_job(&j, "gave up").await.unwrap());
    a.revive_job(j.id, T0 + 7_000).await.unwrap().expect("dead");
    assert_eq!(next(&is_job).await, Change::Job { run_at: T0 + 7_000 });
}
