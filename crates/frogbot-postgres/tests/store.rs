//! This backend's own scenarios of the Core v2 store operations (beside the shared conformance
//! suite), each run twice: with the one-statement fast paths and with the careful (lock-first)
//! path forced.

mod common;

use common::*;
use frogbot_core::StoreError;
use frogbot_core::model::{
    ChannelRef, Delivery, MessagePart, QuestionMessage, QuestionOutcome, QuestionRecord,
};
use frogbot_core::store::*;
use serde_json::json;

async fn store(careful: bool) -> Option<(DynStore, frogbot_testdb::TestDb)> {
    let db = frogbot_testdb::postgres_db()?;
    Some((open(&db.url, careful).await, db))
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod fast {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(false).await
                }
            )*
        }
        mod careful {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(true).await
                }
            )*
        }
    };
}

both!(
    send_creates_starts_queues_steers_and_refuses,
    steers_join_and_the_queue_runs_in_order,
    an_expired_lease_is_taken_over_and_its_turn_marked_interrupted,
    a_waiting_question_holds_the_chat_until_resumed,
    handing_on_schedules_the_queue,
    queued_messages_are_edited_and_deleted_by_their_author,
    question_outcomes_are_fenced_by_revision_posting_and_lock,
    question_locks_fence_updates_and_links_outlive_messages,
    jobs_are_claimed_retried_buried_and_rescheduled,
);

async fn send_creates_starts_queues_steers_and_refuses(careful: bool) {
    let Some((s, _db)) = store(careful).await else {
        return;
    };
    let c = web_chat("c1", Some("alice"));
    let Sent::Started {
        chat,
        created,
        prior_version,
        lease,
        message,
        interrupted,
    } = send(
        &*s,
        &c,
        &user_msg("u1", Some("alice"), "hi"),
        Delivery::Queue,
        "p1",
        T0,
    )
    .await
    else {
        panic!("an idle chat starts a turn")
    };
    assert!(created);
    assert_eq!(prior_version, 0);
    assert_eq!(chat.version, 1);
    assert_eq!(message.version, 1);
    assert_eq!(message.position, Some(1));
    assert!(!message.queued);
    assert_eq!(lease.driver, Some(user("alice")));
    assert!(!lease.taken_over);
    assert!(interrupted.is_none());
    assert_eq!(chat.owner, Some(user("alice")));
    assert_eq!(chat.live_lease(T0).unwrap().token, lease.token);

    // A repeated delivery changes nothing.
    let again = send(
        &*s,
        &c,
        &user_msg("u1", Some("alice"), "x"),
        Delivery::Queue,
        "p2",
        T0,
    )
    .await;
    assert!(matches!(again, Sent::Duplicate { .. }), "{again:?}");

    // Another user may not write alice's web chat; a channel may not write a web chat.
    let bob = web_chat("c1", Some("bob"));
    let req = lease_req("p3", Some("bob"), T0);
    let refused = s
        .send(&SendOp {
            chat: &bob,
            message: &user_msg("b1", Some("bob"), "mine"),
            delivery: Delivery::Queue,
            lease: &req,
            queue_if_busy: true,
        })
        .await;
    assert!(
        matches!(refused, Err(StoreError::Forbidden { .. })),
        "{refused:?}"
    );
    let thread = NewChat {
        chat_id: chat_id("c1"),
        owner: Some(user("alice")),
        channel: Some(ChannelRef {
            platform: "slack".into(),
            thread: "C1:1".into(),
        }),
    };
    let refused = s
        .send(&SendOp {
            chat: &thread,
            message: &user_msg("t1", Some("alice"), "x"),
            delivery: Delivery::Queue,
            lease: &req,
            queue_if_busy: true,
        })
        .await;
    assert!(
        matches!(refused, Err(StoreError::ChannelChat { .. })),
        "{refused:?}"
    );

    // While the turn runs: the driver's steer is a steer, anything else is queued.
    let Sent::Queued {
        delivery, message, ..
    } = send(
        &*s,
        &c,
        &user_msg("s1", Some("alice"), "faster"),
        Delivery::Steer,
        "p4",
        T0 + 1,
    )
    .await
    else {
        panic!("a busy chat queues")
    };
    assert_eq!(delivery, Delivery::Steer);
    assert!(message.queued);
    assert_eq!(message.message.metadata.delivery, Some(Delivery::Steer));
    let Sent::Queued { delivery, .. } = send(
        &*s,
        &c,
        &user_msg("q1", Some("alice"), "later"),
        Delivery::Queue,
        "p5",
        T0 + 2,
    )
    .await
    else {
        panic!("a busy chat queues")
    };
    assert_eq!(delivery, Delivery::Queue);

    // Not queueing: Busy, nothing saved.
    let req = lease_req("p6", Some("alice"), T0 + 3);
    let busy = s
        .send(&SendOp {
            chat: &c,
            message: &user_msg("g1", Some("alice"), "now"),
            delivery: Delivery::Queue,
            lease: &req,
            queue_if_busy: false,
        })
        .await
        .unwrap();
    assert!(matches!(busy, Sent::Busy { .. }), "{busy:?}");
    assert!(s.get_message(&chat_id("c1"), "g1").await.unwrap().is_none());

    // A channel chat is written by everyone in its thread; another chat id for the same thread
    // is refused.
    let t = NewChat {
        chat_id: chat_id("_slack-1"),
        owner: Some(user("alice")),
        channel: Some(ChannelRef {
            platform: "slack".into(),
            thread: "C1:1".into(),
        }),
    };
    send(
        &*s,
        &t,
        &user_msg("m1", Some("alice"), "hi"),
        Delivery::Queue,
        "p7",
        T0,
    )
    .await;
    let t_bob = NewChat {
        owner: Some(user("bob")),
        ..t.clone()
    };
    let queued = send(
        &*s,
        &t_bob,
        &user_msg("m2", Some("bob"), "me too"),
        Delivery::Queue,
        "p8",
        T0,
    )
    .await;
    assert!(matches!(queued, Sent::Queued { .. }), "{queued:?}");
    let other_id = NewChat {
        chat_id: chat_id("_slack-2"),
        ..t.clone()
    };
    let req = lease_req("p9", Some("alice"), T0);
    let refused = s
        .send(&SendOp {
            chat: &other_id,
            message: &user_msg("m3", Some("alice"), "x"),
            delivery: Delivery::Queue,
            lease: &req,
            queue_if_busy: true,
        })
        .await;
    assert!(
        matches!(refused, Err(StoreError::ChannelChat { .. })),
        "{refused:?}"
    );
    assert_eq!(
        s.get_channel_chat("slack", "C1:1")
            .await
            .unwrap()
            .unwrap()
            .chat_id,
        chat_id("_slack-1")
    );
}

fn chat_id(id: &str) -> frogbot_core::model::ChatId {
    chat(id)
}

async fn steers_join_and_the_queue_runs_in_order(careful: bool) {
    let Some((s, db)) = store(careful).await else {
        return;
    };
    let other = open(&db.url, careful).await;
    let c = web_chat("order", None);
    let Sent::Started { lease, message, .. } = send(
        &*s,
        &c,
        &user_msg("u1", Some("alice"), "go"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await
    else {
        panic!()
    };
    let p1 = message.position.unwrap();
    let cp = s
        .checkpoint(&CheckpointOp {
            lease: &lease,
            reply: &assistant_msg("a1", "step 1"),
            position: p1,
            join_steers: true,
            now: T0,
        })
        .await
        .unwrap();
    assert!(cp.steers.is_empty());
    let v_after_step1 = cp.reply.version;
    // From a second process: the driver's steer, bob's steer, a queued message.
    send(
        &*other,
        &c,
        &user_msg("s1", Some("alice"), "faster"),
        Delivery::Steer,
        "x",
        T0 + 1,
    )
    .await;
    send(
        &*other,
        &c,
        &user_msg("s2", Some("bob"), "mine"),
        Delivery::Steer,
        "x",
        T0 + 2,
    )
    .await;
    send(
        &*other,
        &c,
        &user_msg("q1", Some("alice"), "later"),
        Delivery::Queue,
        "x",
        T0 + 3,
    )
    .await;
    let cp = s
        .checkpoint(&CheckpointOp {
            lease: &lease,
            reply: &assistant_msg("a1", "step 2"),
            position: p1,
            join_steers: true,
            now: T0 + 4,
        })
        .await
        .unwrap();
    let ids: Vec<_> = cp.steers.iter().map(|m| m.message.id.as_str()).collect();
    assert_eq!(ids, ["s1"], "only the driver's steers join");
    assert_eq!(cp.steers[0].sub, cp.steers[0].seq);
    assert_eq!(cp.reply.sub, REPLY_SUB);
    let order: Vec<_> = s
        .list_messages(&chat("order"))
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.message.id, m.queued))
        .collect();
    assert_eq!(
        order,
        [
            ("u1".to_string(), false),
            ("s1".to_string(), false),
            ("a1".to_string(), false),
            ("s2".to_string(), true),
            ("q1".to_string(), true),
        ]
    );
    // What changed since step 1: the three sends and the checkpoint's writes.
    let since = s
        .messages_since(&chat("order"), v_after_step1)
        .await
        .unwrap();
    let ids: Vec<_> = since
        .messages
        .iter()
        .map(|m| m.message.id.as_str())
        .collect();
    assert_eq!(ids, ["s1", "a1", "s2", "q1"]);
    assert_eq!(since.version, cp.reply.version);
    assert!(
        s.messages_since(&chat("order"), since.version)
            .await
            .unwrap()
            .messages
            .is_empty()
    );
    assert_eq!(
        s.messages_since(&chat("nope"), 0).await.unwrap(),
        ChatChanges {
            version: 0,
            messages: vec![]
        }
    );

    // The turn ends with a reply: the oldest queued message starts the next turn, driven by bob.
    let ended = s
        .end_turn(&EndTurnOp {
            lease: &lease,
            reply: Some((&assistant_msg("a1", "done"), p1)),
            mode: EndMode::Next,
            now: T0 + 5,
            delivery: None,
        })
        .await
        .unwrap();
    let TurnEnded::Promoted { reply, lease, next } = ended else {
        panic!("{ended:?}")
    };
    assert_eq!(reply.unwrap().message.text(), "done");
    assert_eq!(next.message.id, "s2");
    assert!(!next.queued);
    assert_eq!(next.position, Some(p1 + 1));
    assert_eq!(lease.driver, Some(user("bob")));
    assert_eq!(
        s.get_chat(&chat("order"))
            .await
            .unwrap()
            .unwrap()
            .lease
            .unwrap()
            .driver,
        Some(user("bob"))
    );
    let TurnEnded::Promoted { next, lease, .. } = s
        .end_turn(&EndTurnOp {
            lease: &lease,
            reply: None,
            mode: EndMode::Next,
            now: T0 + 6,
            delivery: None,
        })
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(next.message.id, "q1");
    assert_eq!(next.position, Some(p1 + 2));
    let ended = s
        .end_turn(&EndTurnOp {
            lease: &lease,
            reply: Some((&assistant_msg("a3", "ok"), p1 + 2)),
            mode: EndMode::Next,
            now: T0 + 7,
            delivery: None,
        })
        .await
        .unwrap();
    assert!(
        matches!(ended, TurnEnded::Released { reply: Some(_) }),
        "{ended:?}"
    );
    let row = s.get_chat(&chat("order")).await.unwrap().unwrap();
    assert!(row.lease.is_none());
    assert_eq!(row.state(T0 + 7), frogbot_core::model::TurnState::Idle);
    // The lease is gone: fenced writes are refused.
    let lost = s
        .end_turn(&EndTurnOp {
            lease: &lease,
            reply: None,
            mode: EndMode::Next,
            now: T0 + 8,
            delivery: None,
        })
        .await;
    assert!(
        matches!(lost, Err(StoreError::LeaseLost { .. })),
        "{lost:?}"
    );
    let lost = s
        .checkpoint(&CheckpointOp {
            lease: &lease,
            reply: &assistant_msg("a3", "late"),
            position: p1 + 2,
            join_steers: false,
            now: T0 + 8,
        })
        .await;
    assert!(
        matches!(lost, Err(StoreError::LeaseLost { .. })),
        "{lost:?}"
    );
    assert_eq!(
        s.get_message(&chat("order"), "a3")
            .await
            .unwrap()
            .unwrap()
            .message
            .text(),
        "ok"
    );
}

async fn an_expired_lease_is_taken_over_and_its_turn_marked_interrupted(careful: bool) {
    let Some((s, db)) = store(careful).await else {
        return;
    };
    let other = open(&db.url, careful).await;
    let c = web_chat("crash", None);
    let Sent::Started { lease, message, .. } = send(
        &*s,
        &c,
        &user_msg("u1", Some("alice"), "go"),
        Delivery::Queue,
        "dead",
        T0,
    )
    .await
    else {
        panic!()
    };
    s.checkpoint(&CheckpointOp {
        lease: &lease,
        reply: &assistant_msg("a1", "half"),
        position: message.position.unwrap(),
        join_steers: false,
        now: T0,
    })
    .await
    .unwrap();
    // The holder dies; after the lease runs out another process's send takes the chat.
    let later = T0 + TTL + 1;
    assert_eq!(s.expired_leases(later, 10).await.unwrap(), [chat("crash")]);
    let Sent::Started {
        lease: taken,
        interrupted,
        message,
        ..
    } = send(
        &*other,
        &c,
        &user_msg("u2", Some("bob"), "again"),
        Delivery::Queue,
        "p2",
        later,
    )
    .await
    else {
        panic!("an expired lease is taken")
    };
    assert!(taken.taken_over);
    assert!(taken.token > lease.token);
    assert_eq!(message.position, Some(2));
    let interrupted = interrupted.expect("the interrupted reply");
    assert_eq!(interrupted.message.id, "a1");
    assert_eq!(interrupted.message.text(), "half");
    assert_eq!(
        interrupted.message.metadata.error.as_ref().unwrap().code,
        INTERRUPTED
    );
    assert_eq!(interrupted.position, Some(1));
    // The old holder is fenced out.
    let mut old = lease.clone();
    assert!(matches!(
        s.renew_lease(&mut old, TTL, later).await,
        Err(StoreError::LeaseLost { .. })
    ));

    // A turn with no reply saved: take_chat makes an empty interrupted reply, then runs the queue.
    send(
        &*other,
        &c,
        &user_msg("q1", Some("carol"), "queued"),
        Delivery::Queue,
        "x",
        later + 1,
    )
    .await;
    other.expire_lease(&taken, later + 2).await.unwrap();
    let t = s
        .take_chat(&chat("crash"), &lease_req("sweeper", None, later + 2))
        .await
        .unwrap()
        .expect("an expired lease is taken");
    let reply = t.interrupted.expect("an empty interrupted reply");
    assert!(reply.message.parts.is_empty());
    assert_eq!(reply.position, Some(2));
    assert_eq!(reply.sub, REPLY_SUB);
    assert_eq!(reply.message.metadata.model.as_deref(), Some("demo"));
    let (lease3, next) = t.next.expect("the queue runs");
    assert_eq!(next.message.id, "q1");
    assert_eq!(next.position, Some(3));
    assert_eq!(lease3.driver, Some(user("carol")));
    assert!(lease3.taken_over);
    // Taking a live chat: nothing.
    assert!(
        s.take_chat(&chat("crash"), &lease_req("x", None, later + 3))
            .await
            .unwrap()
            .is_none()
    );
    // Expired again with nothing queued: the turn is marked, the chat released.
    s.expire_lease(&lease3, later + 4).await.unwrap();
    let t = s
        .take_chat(&chat("crash"), &lease_req("sweeper", None, later + 4))
        .await
        .unwrap()
        .unwrap();
    assert!(t.interrupted.is_some());
    assert!(t.next.is_none());
    let row = s.get_chat(&chat("crash")).await.unwrap().unwrap();
    assert!(row.lease.is_none());
    assert!(s.expired_leases(later + 5, 10).await.unwrap().is_empty());
    // Idle and empty: taken and released, nothing to say.
    let t = s
        .take_chat(&chat("crash"), &lease_req("sweeper", None, later + 5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        t,
        Taken {
            interrupted: None,
            next: None
        }
    );
    assert!(
        s.take_chat(&chat("none"), &lease_req("x", None, later))
            .await
            .unwrap()
            .is_none()
    );
}

async fn a_waiting_question_holds_the_chat_until_resumed(careful: bool) {
    let Some((s, db)) = store(careful).await else {
        return;
    };
    let other = open(&db.url, careful).await;
    let c = web_chat("ask", None);
    let id = chat("ask");
    let Sent::Started { lease, message, .. } = send(
        &*s,
        &c,
        &user_msg("u1", Some("alice"), "go"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await
    else {
        panic!()
    };
    let job = NewJob {
        kind: "expire-questions".into(),
        key: Some("expire:ask:a1".into()),
        payload: json!({"chat": "ask"}),
        run_at: T0 + 1000,
    };
    let reply = s
        .await_answers(&AwaitOp {
            lease: &lease,
            reply: &assistant_msg("a1", "which?"),
            position: message.position.unwrap(),
            questions: &[
                new_question(&id, "call-1", "a1", 0),
                new_question(&id, "call-2", "a1", 1),
            ],
            job: Some(&job),
            now: T0,
            delivery: None,
        })
        .await
        .unwrap();
    assert_eq!(reply.sub, REPLY_SUB);
    let row = s.get_chat(&id).await.unwrap().unwrap();
    assert_eq!(row.awaiting_message_id.as_deref(), Some("a1"));
    assert!(row.lease.is_none());
    assert_eq!(row.state(T0), frogbot_core::model::TurnState::Awaiting);
    let qs = s.questions_of_message(&id, "a1", T0).await.unwrap();
    assert_eq!(qs.len(), 2);
    assert_eq!(qs[0].record.revision, 0);
    assert_eq!(qs[0].expires_at, T0 + QUESTION_TTL_MS);
    let claimed = s.claim_job("w", 1000, T0 + 1000).await.unwrap().unwrap();
    assert_eq!(claimed.kind, "expire-questions");

    // Messages wait while a question does; nothing takes the chat.
    let queued = send(
        &*other,
        &c,
        &user_msg("q1", Some("alice"), "x"),
        Delivery::Steer,
        "x",
        T0 + 1,
    )
    .await;
    assert!(
        matches!(
            queued,
            Sent::Queued {
                delivery: Delivery::Queue,
                ..
            }
        ),
        "{queued:?}"
    );
    assert!(
        s.take_chat(&id, &lease_req("x", None, T0 + 1))
            .await
            .unwrap()
            .is_none()
    );
    let req = lease_req("r", Some("bob"), T0 + 2);
    assert_eq!(s.resume_turn(&id, "a1", &req).await.unwrap(), Resume::Open);
    let won = s
        .record_outcome(&RecordOp {
            chat: &id,
            tool_call_id: "call-1",
            outcome: &answer("yes"),
            actor: None,
            expected_revision: None,
            lock: None,
            resume: None,
            now: T0 + 2,
        })
        .await
        .unwrap();
    assert!(matches!(won, Recorded::Won { lock: None, .. }), "{won:?}");
    assert_eq!(s.resume_turn(&id, "a1", &req).await.unwrap(), Resume::Open);
    other
        .record_outcome(&RecordOp {
            chat: &id,
            tool_call_id: "call-2",
            outcome: &QuestionOutcome::Dismissed,
            actor: None,
            expected_revision: Some(0),
            lock: None,
            resume: None,
            now: T0 + 2,
        })
        .await
        .unwrap();
    assert_eq!(
        s.resume_turn(&id, "other", &req).await.unwrap(),
        Resume::NotWaiting
    );
    let Resume::Taken {
        lease,
        reply,
        questions,
        model,
        reasoning,
    } = s.resume_turn(&id, "a1", &req).await.unwrap()
    else {
        panic!("every question has an outcome")
    };
    assert_eq!(reply.message.id, "a1");
    assert_eq!(
        questions
            .iter()
            .map(|q| q.tool_call_id.as_str())
            .collect::<Vec<_>>(),
        ["call-1", "call-2"]
    );
    assert_eq!(model.as_deref(), Some("demo"));
    assert_eq!(reasoning.as_deref(), Some("low"));
    assert_eq!(lease.driver, Some(user("bob")));
    assert!(!lease.taken_over);
    let row = s.get_chat(&id).await.unwrap().unwrap();
    assert!(row.awaiting_message_id.is_none());
    assert_eq!(row.live_lease(T0 + 2).unwrap().holder, "r");
    assert_eq!(
        s.resume_turn(&id, "a1", &req).await.unwrap(),
        Resume::Busy {
            until: lease.expires_at
        },
        "a live lease holds the chat"
    );
    // The continued turn ends: the message queued meanwhile runs.
    let ended = s
        .end_turn(&EndTurnOp {
            lease: &lease,
            reply: Some((&assistant_msg("a1", "shipped"), 1)),
            mode: EndMode::Next,
            now: T0 + 3,
            delivery: None,
        })
        .await
        .unwrap();
    let TurnEnded::Promoted { next, .. } = ended else {
        panic!("{ended:?}")
    };
    assert_eq!(next.message.id, "q1");
    assert_eq!(next.position, Some(2));
}

async fn handing_on_schedules_the_queue(careful: bool) {
    let Some((s, _db)) = store(careful).await else {
        return;
    };
    let c = web_chat("stop", None);
    let id = chat("stop");
    let Sent::Started { lease, .. } = send(
        &*s,
        &c,
        &user_msg("u1", None, "go"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await
    else {
        panic!()
    };
    let job = NewJob {
        kind: "run-queue".into(),
        key: Some("run-queue:stop".into()),
        payload: json!({"chat": "stop"}),
        run_at: T0,
    };
    // Nothing queued: released, no job.
    let ended = s
        .end_turn(&EndTurnOp {
            lease: &lease,
            reply: None,
            mode: EndMode::Handoff(&job),
            now: T0 + 1,
            delivery: None,
        })
        .await
        .unwrap();
    assert_eq!(
        ended,
        TurnEnded::HandedOn {
            reply: None,
            queued: false
        }
    );
    assert!(s.claim_job("w", 1000, T0 + 10).await.unwrap().is_none());
    let Sent::Started { lease, .. } = send(
        &*s,
        &c,
        &user_msg("u2", None, "go"),
        Delivery::Queue,
        "p",
        T0 + 2,
    )
    .await
    else {
        panic!()
    };
    send(
        &*s,
        &c,
        &user_msg("q1", None, "next"),
        Delivery::Queue,
        "p",
        T0 + 3,
    )
    .await;
    let ended = s
        .end_turn(&EndTurnOp {
            lease: &lease,
            reply: Some((&assistant_msg("a2", "partial"), 2)),
            mode: EndMode::Handoff(&job),
            now: T0 + 4,
            delivery: None,
        })
        .await
        .unwrap();
    let TurnEnded::HandedOn {
        reply: Some(_),
        queued: true,
    } = ended
    else {
        panic!("{ended:?}")
    };
    let row = s.get_chat(&id).await.unwrap().unwrap();
    assert!(row.lease.is_none());
    let job = s
        .claim_job("w", 1000, T0 + 10)
        .await
        .unwrap()
        .expect("the run-queue job");
    assert_eq!(job.kind, "run-queue");
    let t = s
        .take_chat(&id, &lease_req("w", None, T0 + 10))
        .await
        .unwrap()
        .unwrap();
    assert!(t.interrupted.is_none());
    assert_eq!(t.next.unwrap().1.message.id, "q1");
    assert!(s.complete_job(&job).await.unwrap());
}

async fn queued_messages_are_edited_and_deleted_by_their_author(careful: bool) {
    let Some((s, _db)) = store(careful).await else {
        return;
    };
    let c = web_chat("edit", None);
    let id = chat("edit");
    let Sent::Started { lease, .. } = send(
        &*s,
        &c,
        &user_msg("u1", Some("alice"), "go"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await
    else {
        panic!()
    };
    send(
        &*s,
        &c,
        &user_msg("m1", Some("alice"), "first"),
        Delivery::Queue,
        "x",
        T0,
    )
    .await;
    send(
        &*s,
        &c,
        &user_msg("m2", Some("alice"), "second"),
        Delivery::Queue,
        "x",
        T0,
    )
    .await;
    let edit = QueuedEdit {
        parts: Some(vec![MessagePart::text("edited")]),
        delivery: Some(Delivery::Steer),
    };
    assert_eq!(
        s.edit_queued(
            &QueuedOp {
                chat: &id,
                id: "m1",
                by: Some(&user("bob")),
                now: T0
            },
            &edit
        )
        .await
        .unwrap(),
        QueuedChange::Forbidden
    );
    assert_eq!(
        s.edit_queued(
            &QueuedOp {
                chat: &id,
                id: "m1",
                by: None,
                now: T0
            },
            &edit
        )
        .await
        .unwrap(),
        QueuedChange::Forbidden
    );
    assert_eq!(
        s.edit_queued(
            &QueuedOp {
                chat: &id,
                id: "nope",
                by: Some(&user("alice")),
                now: T0
            },
            &edit
        )
        .await
        .unwrap(),
        QueuedChange::NotFound
    );
    let before = s.get_chat(&id).await.unwrap().unwrap().version;
    let QueuedChange::Done(Some(edited)) = s
        .edit_queued(
            &QueuedOp {
                chat: &id,
                id: "m1",
                by: Some(&user("alice")),
                now: T0 + 1,
            },
            &edit,
        )
        .await
        .unwrap()
    else {
        panic!("the author edits")
    };
    assert_eq!(edited.message.text(), "edited");
    assert_eq!(edited.delivery, Delivery::Steer);
    assert_eq!(edited.message.metadata.delivery, Some(Delivery::Steer));
    assert_eq!(edited.message.metadata.author, Some(user("alice")));
    assert!(edited.version > before);
    let only_delivery = QueuedEdit {
        parts: None,
        delivery: Some(Delivery::Queue),
    };
    let QueuedChange::Done(Some(edited)) = s
        .edit_queued(
            &QueuedOp {
                chat: &id,
                id: "m1",
                by: Some(&user("alice")),
                now: T0 + 1,
            },
            &only_delivery,
        )
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(edited.message.text(), "edited");
    assert_eq!(
        s.delete_queued(&QueuedOp {
            chat: &id,
            id: "m2",
            by: Some(&user("bob")),
            now: T0
        })
        .await
        .unwrap(),
        QueuedChange::Forbidden
    );
    assert_eq!(
        s.delete_queued(&QueuedOp {
            chat: &id,
            id: "m2",
            by: Some(&user("alice")),
            now: T0
        })
        .await
        .unwrap(),
        QueuedChange::Done(None)
    );
    assert!(s.get_message(&id, "m2").await.unwrap().is_none());
    assert_eq!(
        s.delete_queued(&QueuedOp {
            chat: &id,
            id: "m2",
            by: Some(&user("alice")),
            now: T0
        })
        .await
        .unwrap(),
        QueuedChange::NotFound
    );
    // Promoted: no longer queued.
    s.end_turn(&EndTurnOp {
        lease: &lease,
        reply: None,
        mode: EndMode::Next,
        now: T0 + 2,
        delivery: None,
    })
    .await
    .unwrap();
    assert_eq!(
        s.edit_queued(
            &QueuedOp {
                chat: &id,
                id: "m1",
                by: Some(&user("alice")),
                now: T0 + 3
            },
            &edit
        )
        .await
        .unwrap(),
        QueuedChange::NotQueued
    );
    assert_eq!(
        s.delete_queued(&QueuedOp {
            chat: &id,
            id: "m1",
            by: Some(&user("alice")),
            now: T0 + 3
        })
        .await
        .unwrap(),
        QueuedChange::NotQueued
    );
    assert_eq!(
        s.delete_queued(&QueuedOp {
            chat: &id,
            id: "u1",
            by: Some(&user("bob")),
            now: T0 + 3
        })
        .await
        .unwrap(),
        QueuedChange::NotQueued
    );
}

fn record(ids: &[&str], revision: u64) -> QuestionRecord {
    QuestionRecord {
        messages: ids
            .iter()
            .map(|id| QuestionMessage {
                id: (*id).into(),
                posted_at: String::new(),
                question: None,
            })
            .collect(),
        revision,
        state: Some(json!({"step": revision})),
    }
}

async fn question_outcomes_are_fenced_by_revision_posting_and_lock(careful: bool) {
    let Some((s, _db)) = store(careful).await else {
        return;
    };
    let id = chat("q");
    s.insert_questions(
        &[
            new_question(&id, "c1", "a1", 0),
            new_question(&id, "c2", "a1", 1),
        ],
        T0,
    )
    .await
    .unwrap();
    s.mark_rendered(&RenderedOp {
        chat: &id,
        platform: "slack",
        calls: &[RenderedCall {
            tool_call_id: "c1".into(),
            record: record(&["ts1"], 0),
        }],
        now: T0,
    })
    .await
    .unwrap();
    let q = s.get_question(&id, "c1", T0).await.unwrap().unwrap();
    assert!(q.rendered);
    assert_eq!(q.record, record(&["ts1"], 0));
    assert_eq!(
        s.questions_by_platform_message("slack", "ts1", T0)
            .await
            .unwrap()[0]
            .tool_call_id,
        "c1"
    );
    // A partial answer moves the record on: revision 1, posting, locked.
    let advanced = s
        .advance_question(&AdvanceOp {
            chat: &id,
            tool_call_id: "c1",
            expected_revision: 0,
            state: Some(&json!({"picked": ["yes"]})),
            lock: LockRequest {
                holder: "h1",
                ttl_ms: 5000,
            },
            now: T0 + 1,
        })
        .await
        .unwrap();
    let Advanced::Done { question, lock } = advanced else {
        panic!("{advanced:?}")
    };
    assert_eq!(question.record.revision, 1);
    assert_eq!(question.record.state, Some(json!({"picked": ["yes"]})));
    assert_eq!(question.record.messages, record(&["ts1"], 0).messages);
    assert!(question.posting && question.locked(T0 + 1));
    let again = s
        .advance_question(&AdvanceOp {
            chat: &id,
            tool_call_id: "c1",
            expected_revision: 1,
            state: None,
            lock: LockRequest {
                holder: "h2",
                ttl_ms: 5000,
            },
            now: T0 + 2,
        })
        .await
        .unwrap();
    assert!(
        matches!(again, Advanced::Changed { .. }),
        "posting: {again:?}"
    );
    let op = |rev: Option<u64>, now| RecordOp {
        chat: &id,
        tool_call_id: "c1",
        outcome: &QuestionOutcome::Dismissed,
        actor: None,
        expected_revision: rev,
        lock: Some(LockRequest {
            holder: "closer",
            ttl_ms: 5000,
        }),
        resume: None,
        now,
    };
    // Stale revision, still posting, locked: Changed.
    assert!(matches!(
        s.record_outcome(&op(Some(0), T0 + 2)).await.unwrap(),
        Recorded::Changed { .. }
    ));
    assert!(matches!(
        s.record_outcome(&op(Some(1), T0 + 2)).await.unwrap(),
        Recorded::Changed { .. }
    ));
    // `updated` posted the next question: the record and its link, posting cleared, unlocked.
    let q = s
        .update_question(&UpdateQuestionOp {
            lock: &lock,
            update: &QuestionUpdate {
                record: Some(QuestionRecord {
                    state: Some(json!({"picked": ["yes"]})),
                    ..record(&["ts1", "ts2"], 1)
                }),
                posting: Some(false),
                ..Default::default()
            },
            link_platform: Some("slack"),
            job: None,
            keep_lock: false,
            now: T0 + 3,
        })
        .await
        .unwrap();
    assert!(!q.posting && !q.locked(T0 + 3));
    assert_eq!(q.record.messages.len(), 2);
    assert_eq!(
        s.questions_by_platform_message("slack", "ts2", T0 + 3)
            .await
            .unwrap()
            .len(),
        1
    );
    let won = s.record_outcome(&op(Some(1), T0 + 4)).await.unwrap();
    let Recorded::Won {
        question,
        lock: Some(close),
        ..
    } = won
    else {
        panic!("{won:?}")
    };
    assert_eq!(question.outcome, Some(QuestionOutcome::Dismissed));
    assert_eq!(question.expires_at, T0 + 4 + ANSWERED_TTL_MS);
    assert_eq!(question.lock_holder.as_deref(), Some("closer"));
    let settled = s.record_outcome(&op(None, T0 + 5)).await.unwrap();
    assert!(matches!(settled, Recorded::Settled { .. }), "{settled:?}");
    let q = s
        .update_question(&UpdateQuestionOp {
            lock: &close,
            update: &QuestionUpdate {
                closed: Some(true),
                ..Default::default()
            },
            link_platform: None,
            job: None,
            keep_lock: false,
            now: T0 + 6,
        })
        .await
        .unwrap();
    assert!(q.closed);
    assert_eq!(
        q.expires_at,
        T0 + 4 + ANSWERED_TTL_MS,
        "unchanged once answered"
    );
    // Gone: absent, or past its expiry.
    let gone = RecordOp {
        tool_call_id: "nope",
        ..op(None, T0)
    };
    assert_eq!(s.record_outcome(&gone).await.unwrap(), Recorded::Gone);
    assert_eq!(s.purge_expired(T0 + 5 + ANSWERED_TTL_MS).await.unwrap(), 1);
    assert!(s.get_question(&id, "c1", T0).await.unwrap().is_none());
    assert!(
        s.questions_by_platform_message("slack", "ts1", T0)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(s.get_question(&id, "c2", T0 + 10).await.unwrap().is_some());
    assert!(
        s.get_question(&id, "c2", T0 + QUESTION_TTL_MS)
            .await
            .unwrap()
            .is_none()
    );
}

async fn question_locks_fence_updates_and_links_outlive_messages(careful: bool) {
    let Some((s, db)) = store(careful).await else {
        return;
    };
    let other = open(&db.url, careful).await;
    let id = chat("ql");
    s.insert_questions(&[new_question(&id, "c1", "a1", 0)], T0)
        .await
        .unwrap();
    // A record whose id exists is left as it is.
    let mut changed = new_question(&id, "c1", "zzz", 5);
    changed.answer_deadline = Some(1);
    s.insert_questions(&[changed], T0).await.unwrap();
    assert_eq!(
        s.get_question(&id, "c1", T0)
            .await
            .unwrap()
            .unwrap()
            .message_id,
        "a1"
    );
    let (lock, row) = s
        .lock_question(&LockQuestionOp {
            chat: &id,
            tool_call_id: "c1",
            lock: LockRequest {
                holder: "h1",
                ttl_ms: 1000,
            },
            now: T0,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.lock_holder.as_deref(), Some("h1"));
    assert!(
        other
            .lock_question(&LockQuestionOp {
                chat: &id,
                tool_call_id: "c1",
                lock: LockRequest {
                    holder: "h2",
                    ttl_ms: 1000
                },
                now: T0 + 1
            })
            .await
            .unwrap()
            .is_none()
    );
    // Past its time another holder takes it; the first one's update is refused.
    let (lock2, _) = other
        .lock_question(&LockQuestionOp {
            chat: &id,
            tool_call_id: "c1",
            lock: LockRequest {
                holder: "h2",
                ttl_ms: 1000,
            },
            now: T0 + 1000,
        })
        .await
        .unwrap()
        .unwrap();
    assert!(lock2.token > lock.token);
    let refused = s
        .update_question(&UpdateQuestionOp {
            lock: &lock,
            update: &QuestionUpdate {
                rendered: Some(true),
                ..Default::default()
            },
            link_platform: None,
            job: None,
            keep_lock: false,
            now: T0 + 1001,
        })
        .await;
    assert!(
        matches!(refused, Err(StoreError::Locked { .. })),
        "{refused:?}"
    );
    let job = NewJob {
        kind: "updated-retry".into(),
        key: None,
        payload: json!({}),
        run_at: T0,
    };
    let q = other
        .update_question(&UpdateQuestionOp {
            lock: &lock2,
            update: &QuestionUpdate {
                record: Some(record(&["m1", "m2"], 0)),
                rendered: Some(true),
                ..Default::default()
            },
            link_platform: Some("discord"),
            job: Some(&job),
            keep_lock: true,
            now: T0 + 1001,
        })
        .await
        .unwrap();
    assert_eq!(q.lock_holder.as_deref(), Some("h2"), "kept");
    assert_eq!(q.expires_at, T0 + 1001 + QUESTION_TTL_MS);
    assert!(s.claim_job("w", 10, T0 + 1001).await.unwrap().is_some());
    // The record's list moves on; the old message still finds the call.
    other
        .update_question(&UpdateQuestionOp {
            lock: &lock2,
            update: &QuestionUpdate {
                record: Some(record(&["m3"], 0)),
                ..Default::default()
            },
            link_platform: Some("discord"),
            job: None,
            keep_lock: false,
            now: T0 + 1002,
        })
        .await
        .unwrap();
    for m in ["m1", "m2", "m3"] {
        assert_eq!(
            s.questions_by_platform_message("discord", m, T0 + 1002)
                .await
                .unwrap()
                .len(),
            1,
            "{m}"
        );
    }
    let empty = other
        .update_question(&UpdateQuestionOp {
            lock: &lock2,
            update: &QuestionUpdate {
                record: Some(record(&[], 0)),
                ..Default::default()
            },
            link_platform: None,
            job: None,
            keep_lock: false,
            now: T0 + 1002,
        })
        .await;
    assert!(
        matches!(empty, Err(StoreError::InvalidInput { .. })),
        "{empty:?}"
    );
    // Released: a new holder takes it at once; unlocking a lost lock is a no-op.
    let (lock3, _) = s
        .lock_question(&LockQuestionOp {
            chat: &id,
            tool_call_id: "c1",
            lock: LockRequest {
                holder: "h3",
                ttl_ms: 1000,
            },
            now: T0 + 1003,
        })
        .await
        .unwrap()
        .unwrap();
    other.unlock_question(&lock2).await.unwrap();
    assert!(
        s.get_question(&id, "c1", T0 + 1003)
            .await
            .unwrap()
            .unwrap()
            .locked(T0 + 1003)
    );
    s.unlock_question(&lock3).await.unwrap();
    assert!(
        !s.get_question(&id, "c1", T0 + 1003)
            .await
            .unwrap()
            .unwrap()
            .locked(T0 + 1003)
    );
}

async fn jobs_are_claimed_retried_buried_and_rescheduled(careful: bool) {
    let Some((s, db)) = store(careful).await else {
        return;
    };
    let other = open(&db.url, careful).await;
    let job = |key: Option<&str>, run_at| NewJob {
        kind: "k".into(),
        key: key.map(String::from),
        payload: json!({"n": 1}),
        run_at,
    };
    let a = s.enqueue_job(&job(Some("a"), T0 + 10)).await.unwrap();
    let b = s.enqueue_job(&job(None, T0 + 5)).await.unwrap();
    assert!(
        s.claim_job("w1", 100, T0).await.unwrap().is_none(),
        "not due"
    );
    let first = s.claim_job("w1", 100, T0 + 10).await.unwrap().unwrap();
    assert_eq!(first.id, b, "earliest first");
    let second = other.claim_job("w2", 100, T0 + 10).await.unwrap().unwrap();
    assert_eq!(second.id, a);
    assert!(s.claim_job("w3", 100, T0 + 10).await.unwrap().is_none());
    // A claim whose time ran out is taken again; the first claimant has lost it.
    let again = other.claim_job("w3", 100, T0 + 200).await.unwrap().unwrap();
    assert_eq!(again.id, b);
    assert_eq!(again.attempts, 2);
    assert!(!s.complete_job(&first).await.unwrap());
    assert!(s.retry_job(&again, T0 + 500, "boom").await.unwrap());
    let j = s.get_job(b).await.unwrap().unwrap();
    assert_eq!(j.last_error.as_deref(), Some("boom"));
    assert_eq!(j.run_at, T0 + 500);
    assert!(j.claimed_by.is_none());
    // Re-enqueued by key while it runs: completing keeps it, scheduled.
    assert_eq!(s.enqueue_job(&job(Some("a"), T0 + 300)).await.unwrap(), a);
    assert!(other.complete_job(&second).await.unwrap());
    let j = s.get_job(a).await.unwrap().unwrap();
    assert_eq!(j.run_at, T0 + 10, "the earlier time stays");
    assert!(j.claimed_by.is_none());
    let c = s.claim_job("w1", 100, T0 + 400).await.unwrap().unwrap();
    assert_eq!(c.id, a);
    assert!(s.bury_job(&c, "gave up").await.unwrap());
    assert!(s.get_job(a).await.unwrap().unwrap().dead);
    let bj = s.claim_job("w1", 100, T0 + 10_000).await.unwrap().unwrap();
    assert_eq!(bj.id, b);
    assert!(s.complete_job(&bj).await.unwrap());
    // Re-enqueueing revives a dead job, attempts reset.
    s.enqueue_job(&job(Some("a"), T0 + 20_000)).await.unwrap();
    let j = s.get_job(a).await.unwrap().unwrap();
    assert!(!j.dead);
    assert_eq!(j.attempts, 0);
    assert_eq!(j.run_at, T0 + 20_000);
    let c = s.claim_job("w1", 100, T0 + 20_000).await.unwrap().unwrap();
    assert!(s.complete_job(&c).await.unwrap());
    assert!(s.get_job(a).await.unwrap().is_none());
}
