//! Questions: records in call order, rendering and its message links, the first outcome wins
//! (fenced by revision, across handles), partial answers, the question lock, and expiry.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::json;

use frogbot_core::model::{Actor, ChatId, QuestionOutcome};
use frogbot_core::store::*;

use crate::Db;
use crate::support::*;

pub async fn question_records_of_a_message_in_call_order(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("qorder").unwrap();
    let rows: Vec<_> = (0..3)
        .rev()
        .map(|i| NewQuestion {
            answer_deadline: Some(T0 + 10),
            ..new_question(&c, &format!("call-{i}"), "a1", i)
        })
        .collect();
    s.insert_questions(&rows, T0).await.unwrap();
    // Existing ids are left alone.
    let again = vec![NewQuestion {
        message_id: "other".into(),
        ..rows[0].clone()
    }];
    s.insert_questions(&again, T0 + 1).await.unwrap();
    let got = s.questions_of_message(&c, "a1", T0).await.unwrap();
    assert_eq!(
        got.iter()
            .map(|q| q.tool_call_id.as_str())
            .collect::<Vec<_>>(),
        ["call-0", "call-1", "call-2"]
    );
    assert_eq!(got[0].input, question_input());
    assert_eq!(got[0].answer_deadline, Some(T0 + 10));
    assert_eq!(
        (got[0].created_at, got[0].expires_at),
        (T0, T0 + QUESTION_TTL_MS)
    );
    assert!(!got[0].rendered && !got[0].posting && !got[0].closed && got[0].outcome.is_none());
    assert!(got[0].record.messages.is_empty());
    assert_eq!(got[0].lock_holder, None);
    assert!(
        s.questions_of_message(&c, "other", T0)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn mark_rendered_saves_records_and_links(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("rendered").unwrap();
    add_question(s, &c, "call-1", T0).await;
    s.insert_questions(&[new_question(&c, "call-2", "a1", 1)], T0)
        .await
        .unwrap();
    let mut r1 = record(&["m1", "m2"], 0);
    r1.state = Some(json!({"page": 1}));
    let calls = [
        RenderedCall {
            tool_call_id: "call-1".into(),
            record: r1.clone(),
        },
        RenderedCall {
            tool_call_id: "call-2".into(),
            record: record(&["m2"], 0),
        },
    ];
    let now = T0 + 1_000;
    s.mark_rendered(&RenderedOp {
        chat: &c,
        platform: "forum",
        calls: &calls,
        now,
    })
    .await
    .unwrap();
    let q = s.get_question(&c, "call-1", now).await.unwrap().unwrap();
    assert!(q.rendered);
    assert_eq!(q.record, r1);
    assert_eq!(q.updated_at, now);
    let calls_of =
        |v: Vec<QuestionRow>| -> Vec<String> { v.into_iter().map(|q| q.tool_call_id).collect() };
    assert_eq!(
        calls_of(
            s.questions_by_platform_message("forum", "m1", now)
                .await
                .unwrap()
        ),
        ["call-1"]
    );
    assert_eq!(
        calls_of(
            s.questions_by_platform_message("forum", "m2", now)
                .await
                .unwrap()
        ),
        ["call-1", "call-2"]
    );
    assert!(
        s.questions_by_platform_message("other", "m1", now)
            .await
            .unwrap()
            .is_empty()
    );
    // An empty record, or a missing call, is refused and changes nothing (not even the calls
    // before it).
    let bad = [RenderedCall {
        tool_call_id: "call-1".into(),
        record: record(&[], 0),
    }];
    let r = s
        .mark_rendered(&RenderedOp {
            chat: &c,
            platform: "forum",
            calls: &bad,
            now,
        })
        .await;
    assert!(matches!(r, Err(StoreError::InvalidInput { .. })), "{r:?}");
    let partial = [
        RenderedCall {
            tool_call_id: "call-1".into(),
            record: record(&["m7"], 0),
        },
        RenderedCall {
            tool_call_id: "call-9".into(),
            record: record(&["m8"], 0),
        },
    ];
    let r = s
        .mark_rendered(&RenderedOp {
            chat: &c,
            platform: "forum",
            calls: &partial,
            now,
        })
        .await;
    assert!(r.is_err(), "a missing call fails the operation");
    assert_eq!(
        s.get_question(&c, "call-1", now)
            .await
            .unwrap()
            .unwrap()
            .record,
        r1
    );
    assert!(
        s.questions_by_platform_message("forum", "m7", now)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn question_message_links_outlive_the_message_list(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("qlink").unwrap();
    add_question(s, &c, "call-1", T0).await;
    s.insert_questions(&[new_question(&c, "call-2", "a1", 1)], T0)
        .await
        .unwrap();
    let calls = [
        RenderedCall {
            tool_call_id: "call-1".into(),
            record: record(&["m1", "m2"], 0),
        },
        RenderedCall {
            tool_call_id: "call-2".into(),
            record: record(&["m2"], 0),
        },
    ];
    s.mark_rendered(&RenderedOp {
        chat: &c,
        platform: "forum",
        calls: &calls,
        now: T0,
    })
    .await
    .unwrap();
    let changed = T0 + 1_000;
    let l = lock(s, &c, "call-1", "w", 1_000, changed).await.unwrap();
    // m1 leaves the record's messages, m3 joins them (linked by the update).
    let row = s
        .update_question(&UpdateQuestionOp {
            lock: &l,
            update: &QuestionUpdate {
                record: Some(record(&["m2", "m3"], 1)),
                ..Default::default()
            },
            link_platform: Some("forum"),
            job: None,
            keep_lock: false,
            now: changed,
        })
        .await
        .unwrap();
    assert_eq!(row.record.revision, 1);
    let calls_of =
        |v: Vec<QuestionRow>| -> Vec<String> { v.into_iter().map(|q| q.tool_call_id).collect() };
    assert_eq!(
        calls_of(
            s.questions_by_platform_message("forum", "m1", changed)
                .await
                .unwrap()
        ),
        ["call-1"],
        "m1 left `messages` but still leads to its call"
    );
    assert_eq!(
        calls_of(
            s.questions_by_platform_message("forum", "m3", changed)
                .await
                .unwrap()
        ),
        ["call-1"]
    );
    assert_eq!(
        s.questions_by_platform_message("forum", "m2", changed)
            .await
            .unwrap()
            .len(),
        2
    );
    // call-2 expires first (no change since T0); call-1 30 days after its change.
    let first = T0 + QUESTION_TTL_MS;
    assert_eq!(
        s.questions_by_platform_message("forum", "m2", first)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(s.purge_expired(first).await.unwrap(), 1);
    assert!(
        s.get_question(&c, "call-2", T0).await.unwrap().is_none(),
        "purged"
    );
    assert_eq!(
        s.questions_by_platform_message("forum", "m1", first)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        s.questions_by_platform_message("forum", "m1", changed + QUESTION_TTL_MS)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(s.purge_expired(changed + QUESTION_TTL_MS).await.unwrap(), 1);
    assert_eq!(s.purge_expired(changed + QUESTION_TTL_MS).await.unwrap(), 0);
}

pub async fn record_outcome_first_wins_and_is_fenced(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("record").unwrap();
    add_question(s, &c, "call-1", T0).await;
    let q = |r: &Recorded| match r {
        Recorded::Won { question, .. }
        | Recorded::Settled { question }
        | Recorded::Changed { question } => question.clone(),
        Recorded::Gone => panic!("gone"),
    };
    // Another revision.
    let r = record_op(s, &c, "call-1", &answer("yes"), Some(1), None, T0 + 1).await;
    assert!(matches!(r, Recorded::Changed { .. }), "{r:?}");
    assert!(q(&r).outcome.is_none());
    // Posting the next question of a partial answer (revision 1, locked by `poster`).
    let Advanced::Done { lock: poster, .. } = s
        .advance_question(&AdvanceOp {
            chat: &c,
            tool_call_id: "call-1",
            expected_revision: 0,
            state: Some(&json!({"step": 1})),
            lock: LockRequest {
                holder: "poster",
                ttl_ms: 1_000,
            },
            now: T0 + 2,
        })
        .await
        .unwrap()
    else {
        panic!("advance")
    };
    let r = record_op(s, &c, "call-1", &answer("yes"), Some(1), None, T0 + 3).await;
    assert!(matches!(r, Recorded::Changed { .. }), "posting: {r:?}");
    // Posted, but still locked by the poster.
    update(
        s,
        &poster,
        &QuestionUpdate {
            posting: Some(false),
            ..Default::default()
        },
        T0 + 4,
    )
    .await
    .unwrap();
    let l = lock(s, &c, "call-1", "other", 1_000, T0 + 5).await.unwrap();
    let r = record_op(s, &c, "call-1", &answer("yes"), Some(1), None, T0 + 6).await;
    assert!(
        matches!(r, Recorded::Changed { .. }),
        "a foreign lock: {r:?}"
    );
    assert_eq!(q(&r).lock_holder.as_deref(), Some("other"));
    // Its time ran out: the lock no longer counts. The outcome is recorded with a lock for
    // closing.
    let at = T0 + 5 + 1_000;
    let r = record_op(
        s,
        &c,
        "call-1",
        &answer("yes"),
        Some(1),
        Some(LockRequest {
            holder: "closer",
            ttl_ms: 5_000,
        }),
        at,
    )
    .await;
    let Recorded::Won {
        question,
        lock: Some(closer),
        ..
    } = r
    else {
        panic!("{r:?}")
    };
    assert_eq!(question.outcome, Some(answer("yes")));
    assert_eq!(question.outcome_at, Some(at));
    assert_eq!(question.expires_at, at + ANSWERED_TTL_MS);
    assert_eq!(question.lock_holder.as_deref(), Some("closer"));
    assert_eq!(question.lock_until, at + 5_000);
    assert!(closer.token > l.token);
    assert!(matches!(
        update(s, &l, &QuestionUpdate::default(), at).await,
        Err(StoreError::Locked { .. })
    ));
    let closed = update(
        s,
        &closer,
        &QuestionUpdate {
            closed: Some(true),
            ..Default::default()
        },
        at + 1,
    )
    .await
    .unwrap();
    assert!(closed.closed);
    // The first outcome stays.
    let r = record_op(
        s,
        &c,
        "call-1",
        &QuestionOutcome::Dismissed,
        None,
        None,
        at + 2,
    )
    .await;
    let Recorded::Settled { question } = r else {
        panic!("{r:?}")
    };
    assert_eq!(question.outcome, Some(answer("yes")));
    assert_eq!(
        record_op(
            s,
            &c,
            "missing",
            &QuestionOutcome::Cancelled,
            None,
            None,
            at
        )
        .await,
        Recorded::Gone
    );
    // Without an expected revision (withdrawal, expiry), any revision and a foreign lock do.
    add_question(s, &c, "call-2", T0).await;
    let l2 = lock(s, &c, "call-2", "busy", 60_000, T0 + 1).await.unwrap();
    let r = record_op(
        s,
        &c,
        "call-2",
        &QuestionOutcome::Cancelled,
        None,
        None,
        T0 + 2,
    )
    .await;
    let Recorded::Won {
        question,
        lock: None,
        ..
    } = r
    else {
        panic!("{r:?}")
    };
    assert_eq!(question.outcome, Some(QuestionOutcome::Cancelled));
    assert_eq!(
        question.lock_holder.as_deref(),
        Some("busy"),
        "no lock asked: the holder keeps it"
    );
    update(
        s,
        &l2,
        &QuestionUpdate {
            closed: Some(true),
            ..Default::default()
        },
        T0 + 3,
    )
    .await
    .unwrap();
}

pub async fn question_first_outcome_wins_across_handles(db: Db) {
    let a = Arc::clone(&db.store);
    let b = db.second_handle().await;
    let c = ChatId::new("qfirst").unwrap();
    add_question(&*a, &c, "call-1", T0).await;
    let mut tasks = Vec::new();
    for i in 0..32 {
        let s = if i % 2 == 0 {
            Arc::clone(&a)
        } else {
            Arc::clone(&b)
        };
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let outcome = match i % 3 {
                0 => answer("yes"),
                1 => answer("no"),
                _ => QuestionOutcome::Dismissed,
            };
            let expected = (i % 2 == 0).then_some(0);
            let holder = format!("h{i}");
            let r = record_op(
                &*s,
                &c,
                "call-1",
                &outcome,
                expected,
                Some(LockRequest {
                    holder: &holder,
                    ttl_ms: 10_000,
                }),
                T0 + 1,
            )
            .await;
            (outcome, r)
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            (outcome, Recorded::Won { lock, .. }) => winners.push((outcome, lock)),
            (_, Recorded::Settled { .. } | Recorded::Changed { .. }) => {}
            (_, Recorded::Gone) => panic!("the question is there"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one outcome is recorded");
    let q = b.get_question(&c, "call-1", T0 + 2).await.unwrap().unwrap();
    assert_eq!(q.outcome.as_ref(), Some(&winners[0].0));
    assert_eq!(
        q.lock_holder,
        winners[0].1.as_ref().map(|l| l.holder.clone())
    );
}

pub async fn advance_question_is_fenced_by_revision(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("advance").unwrap();
    add_question(s, &c, "call-1", T0).await;
    let op = |expected, state, now| AdvanceOp {
        chat: &c,
        tool_call_id: "call-1",
        expected_revision: expected,
        state,
        lock: LockRequest {
            holder: "w",
            ttl_ms: 1_000,
        },
        now,
    };
    let step1 = json!({"step": 1});
    let Advanced::Done { question, lock: l } = s
        .advance_question(&op(0, Some(&step1), T0 + 1))
        .await
        .unwrap()
    else {
        panic!("at revision 0")
    };
    assert_eq!(question.record.revision, 1);
    assert_eq!(question.record.state, Some(step1.clone()));
    assert!(question.posting);
    assert!(question.locked(T0 + 1));
    assert_eq!(question.lock_holder.as_deref(), Some("w"));
    assert_eq!(question.expires_at, T0 + 1 + QUESTION_TTL_MS);
    // Posting and locked: nobody advances it.
    assert!(matches!(
        s.advance_question(&op(1, None, T0 + 2)).await.unwrap(),
        Advanced::Changed { .. }
    ));
    update(
        s,
        &l,
        &QuestionUpdate {
            posting: Some(false),
            ..Default::default()
        },
        T0 + 3,
    )
    .await
    .unwrap();
    let r = s.advance_question(&op(0, None, T0 + 4)).await.unwrap();
    let Advanced::Changed { question } = r else {
        panic!("a stale revision: {r:?}")
    };
    assert_eq!(question.record.revision, 1);
    let Advanced::Done { question, .. } = s.advance_question(&op(1, None, T0 + 5)).await.unwrap()
    else {
        panic!("at revision 1")
    };
    assert_eq!(question.record.revision, 2);
    assert_eq!(
        question.record.state,
        Some(step1.clone()),
        "no new state keeps the state"
    );
    // The revision fences answers too.
    assert!(matches!(
        record_op(s, &c, "call-1", &answer("yes"), Some(1), None, T0 + 5_000).await,
        Recorded::Changed { .. }
    ));
    // Answered: never advanced.
    add_question(s, &c, "call-2", T0).await;
    record_op(s, &c, "call-2", &answer("yes"), Some(0), None, T0 + 1).await;
    let op2 = AdvanceOp {
        tool_call_id: "call-2",
        ..op(0, None, T0 + 2)
    };
    assert!(matches!(
        s.advance_question(&op2).await.unwrap(),
        Advanced::Changed { .. }
    ));
    let op3 = AdvanceOp {
        tool_call_id: "missing",
        ..op(0, None, T0 + 2)
    };
    assert_eq!(s.advance_question(&op3).await.unwrap(), Advanced::Gone);
}

pub async fn update_question_under_lock(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("update").unwrap();
    add_question(s, &c, "call-1", T0).await;
    let (a, row) = s
        .lock_question(&LockQuestionOp {
            chat: &c,
            tool_call_id: "call-1",
            lock: LockRequest {
                holder: "a",
                ttl_ms: 1_000,
            },
            now: T0,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.lock_holder.as_deref(), Some("a"));
    assert_eq!(row.lock_until, T0 + 1_000);
    assert!(
        s.lock_question(&LockQuestionOp {
            chat: &c,
            tool_call_id: "call-1",
            lock: LockRequest {
                holder: "b",
                ttl_ms: 1_000
            },
            now: T0 + 1
        })
        .await
        .unwrap()
        .is_none()
    );
    // Keep the lock, link the messages, schedule a retry: one transaction.
    let retry = job("updated", Some("updated:call-1"), T0 + 50);
    let row = s
        .update_question(&UpdateQuestionOp {
            lock: &a,
            update: &QuestionUpdate {
                record: Some(record(&["m1"], 0)),
                rendered: Some(true),
                ..Default::default()
            },
            link_platform: Some("forum"),
            job: Some(&retry),
            keep_lock: true,
            now: T0 + 10,
        })
        .await
        .unwrap();
    assert!(row.rendered);
    assert_eq!(row.lock_holder.as_deref(), Some("a"), "kept");
    assert_eq!(row.expires_at, T0 + 10 + QUESTION_TTL_MS);
    assert_eq!(
        s.questions_by_platform_message("forum", "m1", T0 + 10)
            .await
            .unwrap()
            .len(),
        1
    );
    let j = s
        .claim_job("w", 1_000, T0 + 50)
        .await
        .unwrap()
        .expect("the job is scheduled");
    assert_eq!(j.key.as_deref(), Some("updated:call-1"));
    // Without keep_lock the update releases it.
    let row = update(
        s,
        &a,
        &QuestionUpdate {
            posting: Some(false),
            ..Default::default()
        },
        T0 + 11,
    )
    .await
    .unwrap();
    assert_eq!(row.lock_holder, None);
    assert!(!row.locked(T0 + 11));
    assert!(matches!(
        update(s, &a, &QuestionUpdate::default(), T0 + 12).await,
        Err(StoreError::Locked { .. })
    ));
    // A lock taken over after its time ran out fences the old holder.
    let old = lock(s, &c, "call-1", "old", 10, T0 + 20).await.unwrap();
    let new = lock(s, &c, "call-1", "new", 1_000, T0 + 30)
        .await
        .expect("expired lock taken over");
    let r = s
        .update_question(&UpdateQuestionOp {
            lock: &old,
            update: &QuestionUpdate {
                closed: Some(true),
                ..Default::default()
            },
            link_platform: Some("forum"),
            job: Some(&job("late", None, T0)),
            keep_lock: false,
            now: T0 + 31,
        })
        .await;
    assert!(matches!(r, Err(StoreError::Locked { .. })), "{r:?}");
    assert!(
        s.claim_job("w", 1_000, T0 + 1_000).await.unwrap().is_none(),
        "the refused update scheduled nothing"
    );
    assert!(
        !s.get_question(&c, "call-1", T0 + 31)
            .await
            .unwrap()
            .unwrap()
            .closed
    );
    // An empty record is refused.
    let r = update(
        s,
        &new,
        &QuestionUpdate {
            record: Some(record(&[], 1)),
            ..Default::default()
        },
        T0 + 32,
    )
    .await;
    assert!(matches!(r, Err(StoreError::InvalidInput { .. })), "{r:?}");
    assert!(
        update(
            s,
            &new,
            &QuestionUpdate {
                closed: Some(true),
                ..Default::default()
            },
            T0 + 33
        )
        .await
        .unwrap()
        .closed
    );
}

pub async fn question_lock_is_exclusive_and_fences_updates(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("qfence").unwrap();
    add_question(s, &c, "call-1", T0).await;
    let a = lock(s, &c, "call-1", "a", 1_000, T0).await.unwrap();
    assert!(lock(s, &c, "call-1", "b", 1_000, T0 + 999).await.is_none());
    let b = lock(s, &c, "call-1", "b", 1_000, T0 + 1_000)
        .await
        .expect("a lock whose holder ran out of time can be taken");
    assert!(b.token > a.token);
    let upd = QuestionUpdate {
        posting: Some(true),
        ..Default::default()
    };
    let keep = |lock| UpdateQuestionOp {
        lock,
        update: &upd,
        link_platform: None,
        job: None,
        keep_lock: true,
        now: T0 + 1_001,
    };
    assert!(matches!(
        s.update_question(&keep(&a)).await,
        Err(StoreError::Locked { .. })
    ));
    assert!(s.update_question(&keep(&b)).await.unwrap().posting);
    s.unlock_question(&a).await.unwrap(); // the old holder's unlock is a no-op
    assert!(
        lock(s, &c, "call-1", "c", 1_000, T0 + 1_002)
            .await
            .is_none()
    );
    s.unlock_question(&b).await.unwrap();
    assert!(
        lock(s, &c, "call-1", "c", 1_000, T0 + 1_002)
            .await
            .is_some()
    );
}

pub async fn question_locked_updates_lose_nothing(db: Db) {
    let a = Arc::clone(&db.store);
    let b = db.second_handle().await;
    let c = ChatId::new("qlock").unwrap();
    add_question(&*a, &c, "call-1", T0).await;
    let mut tasks = Vec::new();
    for i in 0..32 {
        let s = if i % 2 == 0 {
            Arc::clone(&a)
        } else {
            Arc::clone(&b)
        };
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let holder = format!("w{i}");
            let (l, q) = loop {
                if let Some(got) = s
                    .lock_question(&LockQuestionOp {
                        chat: &c,
                        tool_call_id: "call-1",
                        lock: LockRequest {
                            holder: &holder,
                            ttl_ms: 60_000,
                        },
                        now: T0 + 1,
                    })
                    .await
                    .unwrap()
                {
                    break got;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            };
            let mut seen = q.record.state.clone().unwrap_or(json!([]));
            seen.as_array_mut().unwrap().push(json!(i));
            // Give the other tasks every chance to interleave between the read and the write.
            tokio::task::yield_now().await;
            let mut next = record(&[&format!("m{i}")], q.record.revision + 1);
            next.state = Some(seen);
            update(
                &*s,
                &l,
                &QuestionUpdate {
                    record: Some(next),
                    ..Default::default()
                },
                T0 + 2,
            )
            .await
            .unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let q = a.get_question(&c, "call-1", T0 + 3).await.unwrap().unwrap();
    assert_eq!(q.record.revision, 32, "the revision counts every update");
    let seen: HashSet<i64> = q
        .record
        .state
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(seen, (0..32).collect::<HashSet<_>>(), "no update was lost");
    assert_eq!(q.lock_holder, None);
    // The stored revision fences like the record's: the next answer must name revision 32.
    assert!(matches!(
        record_op(&*a, &c, "call-1", &answer("no"), Some(31), None, T0 + 4).await,
        Recorded::Changed { .. }
    ));
    assert!(matches!(
        record_op(&*b, &c, "call-1", &answer("no"), Some(32), None, T0 + 4).await,
        Recorded::Won { .. }
    ));
}

pub async fn question_past_ttl_is_gone(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("qttl").unwrap();
    add_question(s, &c, "call-1", T0).await;
    let q = s.get_question(&c, "call-1", T0).await.unwrap().unwrap();
    assert_eq!(q.expires_at, T0 + QUESTION_TTL_MS);
    assert_eq!(q.record.revision, 0);
    // A change pushes the expiry to 30 days after it.
    let later = T0 + QUESTION_TTL_MS / 2;
    let l = lock(s, &c, "call-1", "w", 1_000, later).await.unwrap();
    update(
        s,
        &l,
        &QuestionUpdate {
            posting: Some(false),
            ..Default::default()
        },
        later,
    )
    .await
    .unwrap();
    assert!(
        s.get_question(&c, "call-1", T0 + QUESTION_TTL_MS)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        s.get_question(&c, "call-1", later + QUESTION_TTL_MS - 1)
            .await
            .unwrap()
            .is_some()
    );
    let gone = later + QUESTION_TTL_MS;
    assert!(
        s.get_question(&c, "call-1", gone).await.unwrap().is_none(),
        "past its TTL a record is gone"
    );
    assert!(
        s.questions_of_message(&c, "a1", gone)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(lock(s, &c, "call-1", "w", 1_000, gone).await.is_none());
    assert_eq!(
        record_op(s, &c, "call-1", &answer("yes"), None, None, gone).await,
        Recorded::Gone
    );
    let adv = AdvanceOp {
        chat: &c,
        tool_call_id: "call-1",
        expected_revision: 0,
        state: None,
        lock: LockRequest {
            holder: "w",
            ttl_ms: 1,
        },
        now: gone,
    };
    assert_eq!(s.advance_question(&adv).await.unwrap(), Advanced::Gone);
    assert_eq!(s.purge_expired(gone - 1).await.unwrap(), 0);
    assert_eq!(s.purge_expired(gone).await.unwrap(), 1);
    assert!(
        s.get_question(&c, "call-1", T0).await.unwrap().is_none(),
        "purged for good"
    );
}

pub async fn question_answered_lives_24_hours(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("qans").unwrap();
    add_question(s, &c, "call-1", T0).await;
    let at = T0 + 5_000;
    let actor = Actor {
        user: Some(user("alice")),
        identity: None,
    };
    let r = s
        .record_outcome(&RecordOp {
            chat: &c,
            tool_call_id: "call-1",
            outcome: &answer("yes"),
            actor: Some(&actor),
            expected_revision: Some(0),
            lock: None,
            resume: None,
            now: at,
        })
        .await
        .unwrap();
    assert!(matches!(r, Recorded::Won { lock: None, .. }), "{r:?}");
    let q = s.get_question(&c, "call-1", at).await.unwrap().unwrap();
    assert_eq!(q.outcome, Some(answer("yes")));
    assert_eq!(q.actor, Some(actor));
    assert_eq!(q.outcome_at, Some(at));
    assert!(!q.closed);
    // A later change (settled's) does not extend the 24 hours.
    let l = lock(s, &c, "call-1", "w", 1_000, at + 1).await.unwrap();
    update(
        s,
        &l,
        &QuestionUpdate {
            closed: Some(true),
            ..Default::default()
        },
        at + 1,
    )
    .await
    .unwrap();
    assert!(
        s.get_question(&c, "call-1", at + ANSWERED_TTL_MS - 1)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        s.get_question(&c, "call-1", at + ANSWERED_TTL_MS)
            .await
            .unwrap()
            .is_none()
    );
}
