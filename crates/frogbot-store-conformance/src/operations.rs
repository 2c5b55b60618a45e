//! What operators use (`frogbot chats`, `jobs`, `purge`, the metrics scrape): `find_chats`,
//! `backlog`, `live_jobs`, `revive_job`, `purgeable`.

use frogbot_core::model::{ChatId, Delivery, Millis, TurnState};
use frogbot_core::store::*;

use crate::Db;
use crate::support::*;

/// `find_chats` sees every owner's chats, newest first, filtered by the state derived at `now`
/// (running while a live lease, awaiting while a question waits, else idle) and by platform.
pub async fn operators_find_chats_by_state_and_channel(db: Db) {
    let s = &*db.store;
    // idle: a finished turn (alice's web chat).
    let idle = web("ops-idle", Some("alice"));
    let (l, _) = start(s, &idle, "u1", Some("alice"), T0).await;
    assert!(matches!(
        end_next(s, &l, T0 + 1).await.unwrap(),
        TurnEnded::Released { .. }
    ));
    // running: a live lease (an anonymous web chat).
    let running = web("ops-running", None);
    start(s, &running, "u2", None, T0 + 10).await;
    // awaiting: a channel chat waiting on a question.
    let awaiting = in_thread("_forum-ops", Some("bob"), "T1");
    let (l, u3) = start(s, &awaiting, "u3", Some("bob"), T0 + 20).await;
    s.await_answers(&AwaitOp {
        lease: &l,
        reply: &assistant_msg("a3", "questions"),
        position: u3.position.unwrap(),
        questions: &[new_question(&awaiting.chat_id, "call-ops", "a3", 0)],
        job: None,
        now: T0 + 21,
        delivery: None,
    })
    .await
    .unwrap();
    let find = |state: Option<TurnState>, platform: Option<&str>, now: Millis| {
        let filter = ChatFilter {
            state,
            platform: platform.map(Into::into),
            limit: 10,
        };
        async move {
            s.find_chats(&filter, now)
                .await
                .unwrap()
                .into_iter()
                .map(|c| c.chat_id.to_string())
                .collect::<Vec<_>>()
        }
    };
    let now = T0 + 100;
    assert_eq!(
        find(None, None, now).await,
        ["_forum-ops", "ops-running", "ops-idle"],
        "every owner's chats, newest first"
    );
    assert_eq!(
        find(Some(TurnState::Running), None, now).await,
        ["ops-running"]
    );
    assert_eq!(
        find(Some(TurnState::Awaiting), None, now).await,
        ["_forum-ops"]
    );
    assert_eq!(find(Some(TurnState::Idle), None, now).await, ["ops-idle"]);
    assert_eq!(find(None, Some("forum"), now).await, ["_forum-ops"]);
    assert!(
        find(Some(TurnState::Idle), Some("forum"), now)
            .await
            .is_empty()
    );
    assert!(find(None, Some("slack"), now).await.is_empty());
    // Past the lease's expiry the running chat counts as idle (no question waits there).
    let later = T0 + 10 + TTL + 1;
    assert!(find(Some(TurnState::Running), None, later).await.is_empty());
    assert_eq!(
        find(Some(TurnState::Idle), None, later).await,
        ["ops-running", "ops-idle"]
    );
    let one = ChatFilter {
        limit: 1,
        ..ChatFilter::default()
    };
    assert_eq!(s.find_chats(&one, now).await.unwrap().len(), 1);
}

/// `backlog` counts the queued messages of every chat, and the jobs due (unclaimed or their claim
/// ended), running (the claim live) and dead at the time given; a job scheduled later is in none.
pub async fn operators_count_the_backlog(db: Db) {
    let s = &*db.store;
    assert_eq!(s.backlog(T0).await.unwrap(), Backlog::default());
    let a = web("backlog-a", Some("alice"));
    let b = web("backlog-b", Some("bob"));
    start(s, &a, "a1", Some("alice"), T0).await;
    enqueue(s, &a, "a2", Some("alice"), Delivery::Queue, T0).await;
    enqueue(s, &a, "a3", Some("alice"), Delivery::Queue, T0).await;
    start(s, &b, "b1", Some("bob"), T0).await;
    enqueue(s, &b, "b2", Some("bob"), Delivery::Queue, T0).await;
    for (key, run_at) in [
        ("backlog:dead", T0 - 10),
        ("backlog:running", T0 - 5),
        ("backlog:due", T0),
        ("backlog:later", T0 + 10_000),
    ] {
        s.enqueue_job(&job("deliver", Some(key), run_at))
            .await
            .unwrap();
    }
    let doomed = s.claim_job("w", 1_000, T0).await.unwrap().unwrap();
    assert_eq!(doomed.key.as_deref(), Some("backlog:dead"));
    assert!(s.bury_job(&doomed, "gone").await.unwrap());
    let running = s.claim_job("w", 1_000, T0).await.unwrap().unwrap();
    assert_eq!(running.key.as_deref(), Some("backlog:running"));
    assert_eq!(
        s.backlog(T0).await.unwrap(),
        Backlog {
            queued: 3,
            jobs_due: 1,
            jobs_running: 1,
            jobs_dead: 1,
        }
    );
    // Once the claim has ended, the claimed job is due again; the later one is not due yet.
    assert_eq!(
        s.backlog(T0 + 2_000).await.unwrap(),
        Backlog {
            queued: 3,
            jobs_due: 2,
            jobs_running: 0,
            jobs_dead: 1,
        }
    );
}

/// `live_jobs` lists what is not dead, soonest due first; `revive_job` makes a dead job due now
/// with its attempts reset (and nothing else); `purgeable` counts what the purges would remove and
/// removes nothing.
pub async fn operators_list_revive_and_count_jobs(db: Db) {
    let s = &*db.store;
    let later = s
        .enqueue_job(&job("deliver", Some("deliver:later"), T0 + 500))
        .await
        .unwrap();
    let soon = s
        .enqueue_job(&job("deliver", Some("deliver:soon"), T0 + 5))
        .await
        .unwrap();
    let doomed = s
        .enqueue_job(&job("deliver", Some("deliver:doomed"), T0))
        .await
        .unwrap();
    let j = s.claim_job("w", 1_000, T0).await.unwrap().unwrap();
    assert_eq!(j.id, doomed);
    assert!(s.bury_job(&j, "channel_not_found").await.unwrap());
    let live: Vec<i64> = s
        .live_jobs(10)
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(
        live,
        [soon, later],
        "soonest due first, the dead one left out"
    );
    assert_eq!(s.live_jobs(1).await.unwrap().len(), 1);

    // Counting removes nothing: an expired question record and the dead job.
    add_question(s, &ChatId::new("ops-q").unwrap(), "call-old", T0).await;
    let expired_at = T0 + QUESTION_TTL_MS;
    let counted = s.purgeable(expired_at, T0 + 1).await.unwrap();
    assert_eq!(
        counted,
        Purgeable {
            questions: 1,
            dead_jobs: 1
        }
    );
    assert_eq!(
        s.purgeable(expired_at - 1, T0).await.unwrap(),
        Purgeable::default(),
        "nothing expired yet, the dead job within the retention"
    );
    assert_eq!(s.purgeable(expired_at, T0 + 1).await.unwrap(), counted);
    assert_eq!(s.dead_jobs(10).await.unwrap().len(), 1);

    // A live job and an unknown id are not revived, and left as they were.
    assert!(s.revive_job(soon, T0 + 50).await.unwrap().is_none());
    assert_eq!(s.get_job(soon).await.unwrap().unwrap().run_at, T0 + 5);
    assert!(s.revive_job(999_999, T0 + 50).await.unwrap().is_none());

    let revived = s
        .revive_job(doomed, T0 + 50)
        .await
        .unwrap()
        .expect("revived");
    assert_eq!(revived.id, doomed);
    assert!(!revived.dead);
    assert_eq!((revived.attempts, revived.run_at), (0, T0 + 50));
    assert!(revived.claimed_by.is_none());
    assert_eq!(revived.last_error.as_deref(), Some("channel_not_found"));
    assert!(s.dead_jobs(10).await.unwrap().is_empty());
    assert!(
        s.revive_job(doomed, T0 + 60).await.unwrap().is_none(),
        "live again: a second revival does nothing"
    );
    // It runs again: due now, claimed like any job (after `soon`, due before it).
    let first = s.claim_job("w2", 1_000, T0 + 50).await.unwrap().unwrap();
    assert_eq!(first.id, soon);
    assert!(s.complete_job(&first).await.unwrap());
    let again = s.claim_job("w2", 1_000, T0 + 50).await.unwrap().unwrap();
    assert_eq!((again.id, again.attempts), (doomed, 1));
    assert!(s.complete_job(&again).await.unwrap());
}
