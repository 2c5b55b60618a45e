//! Turns: `send` (start, queue, steer, busy, races), the lease (expiry, renewal, fencing, the
//! take-over and the interrupted reply it marks), `checkpoint`, `await_answers`, `end_turn`,
//! `take_chat`, `resume_turn`, and the queue (order, edit and delete by the author).

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::json;

use frogbot_core::model::{
    ChatId, Delivery, ErrorInfo, MessagePart, MessageStatus, Millis, QUESTION_TOOL,
    QuestionOutcome, Role, ToolPart, ToolState, TurnState, UiMessage,
};
use frogbot_core::store::*;

use crate::Db;
use crate::support::*;

// ---- send ----------------------------------------------------------------------------------------

pub async fn send_duplicate_id_changes_nothing(db: Db) {
    let s = &*db.store;
    let c = web("dup", None);
    start(s, &c, "u1", None, T0).await;
    enqueue(s, &c, "m", None, Delivery::Queue, T0 + 1).await;
    let before = chat_row(s, &c).await;
    for (id, text) in [("m", "again"), ("u1", "again")] {
        let sent = send_as(
            s,
            &c,
            &user_msg(id, None, text),
            Delivery::Queue,
            "p",
            T0 + 2,
        )
        .await
        .unwrap();
        assert!(matches!(sent, Sent::Duplicate { .. }), "{sent:?}");
    }
    assert_eq!(
        s.queued_messages(&c.chat_id).await.unwrap()[0]
            .message
            .text(),
        "m"
    );
    assert_eq!(
        s.get_message(&c.chat_id, "u1")
            .await
            .unwrap()
            .unwrap()
            .message
            .text(),
        "go"
    );
    assert_eq!(
        chat_row(s, &c).await.version,
        before.version,
        "a duplicate writes nothing"
    );
    // A repeated first message of an idle chat is a duplicate too, not a new turn.
    end_next(s, &started_lease(s, &c).await, T0 + 3)
        .await
        .unwrap();
    let sent = send_as(
        s,
        &c,
        &user_msg("u1", None, "x"),
        Delivery::Queue,
        "p",
        T0 + 4,
    )
    .await
    .unwrap();
    assert!(matches!(sent, Sent::Duplicate { .. }), "{sent:?}");
}

/// The lease the chat holds now, as its holder would have it.
async fn started_lease(s: &dyn Store, chat: &NewChat) -> Lease {
    let info = chat_row(s, chat).await.lease.expect("a lease");
    Lease {
        chat_id: chat.chat_id.clone(),
        holder: info.holder,
        token: info.token,
        expires_at: info.expires_at,
        driver: info.driver,
        taken_over: false,
    }
}

pub async fn send_without_queueing_is_busy_and_saves_nothing(db: Db) {
    let s = &*db.store;
    let c = web("busy", None);
    let (lease, first) = start(s, &c, "u1", None, T0).await;
    let req = lease_req("q", None, T0 + 1);
    let m2 = user_msg("u2", None, "no");
    let sent = s
        .send(&SendOp {
            chat: &c,
            message: &m2,
            delivery: Delivery::Steer,
            lease: &req,
            queue_if_busy: false,
        })
        .await
        .unwrap();
    assert!(matches!(sent, Sent::Busy { .. }), "{sent:?}");
    assert!(
        s.get_message(&c.chat_id, "u2").await.unwrap().is_none(),
        "Busy saves nothing"
    );
    assert!(matches!(
        end_next(s, &lease, T0 + 2).await.unwrap(),
        TurnEnded::Released { .. }
    ));
    let req = lease_req("r", None, T0 + 3);
    let m3 = user_msg("u3", None, "again");
    let sent = s
        .send(&SendOp {
            chat: &c,
            message: &m3,
            delivery: Delivery::Queue,
            lease: &req,
            queue_if_busy: false,
        })
        .await
        .unwrap();
    let (_, second) = started(sent);
    assert_eq!(first.position, Some(1));
    assert_eq!(second.position, Some(2), "each turn gets the next position");
}

pub async fn send_steers_only_from_the_driver_while_live(db: Db) {
    let s = &*db.store;
    let c = in_thread("_steer", Some("alice"), "t");
    let (lease, _) = start(s, &c, "u1", Some("alice"), T0).await;
    let (m, d) = enqueue(s, &c, "s1", Some("alice"), Delivery::Steer, T0 + 1).await;
    assert_eq!(d, Delivery::Steer, "the driver steers the live turn");
    assert_eq!(m.delivery, Delivery::Steer);
    assert_eq!(m.message.metadata.status, Some(MessageStatus::Queued));
    assert_eq!(m.message.metadata.delivery, Some(Delivery::Steer));
    let (m, d) = enqueue(s, &c, "s2", Some("bob"), Delivery::Steer, T0 + 1).await;
    assert_eq!(d, Delivery::Queue, "another user's steer is queued");
    assert_eq!(m.message.metadata.delivery, Some(Delivery::Queue));
    let (_, d) = enqueue(s, &c, "q1", Some("alice"), Delivery::Queue, T0 + 1).await;
    assert_eq!(d, Delivery::Queue);
    // No live lease (the chat waits on a question): a steer is queued.
    s.await_answers(&AwaitOp {
        lease: &lease,
        reply: &assistant_msg("a1", "?"),
        position: 1,
        questions: &[new_question(&c.chat_id, "call-1", "a1", 0)],
        job: None,
        now: T0 + 2,
        delivery: None,
    })
    .await
    .unwrap();
    let (_, d) = enqueue(s, &c, "s3", Some("alice"), Delivery::Steer, T0 + 3).await;
    assert_eq!(d, Delivery::Queue, "no turn runs to steer");
}

pub async fn send_sixteen_racing_one_starts_the_rest_run_in_order(db: Db) {
    let c = in_thread("_race", None, "t");
    let mut tasks = Vec::new();
    for i in 0..16 {
        let s = Arc::clone(&db.store);
        let c = in_thread("_race", Some(&format!("u{i}")), "t");
        tasks.push(tokio::spawn(async move {
            let m = user_msg(&format!("m{i}"), Some(&format!("u{i}")), "x");
            send_as(&*s, &c, &m, Delivery::Queue, &format!("p{i}"), T0)
                .await
                .unwrap()
        }));
    }
    let mut lease = None;
    let mut first = String::new();
    let (mut created, mut queued_count) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            Sent::Started {
                lease: l,
                message,
                created: cr,
                ..
            } => {
                assert!(lease.is_none(), "two sends started a turn");
                lease = Some(l);
                first = message.message.id;
                created += usize::from(cr);
            }
            Sent::Queued { created: cr, .. } => {
                queued_count += 1;
                created += usize::from(cr);
            }
            other => panic!("{other:?}"),
        }
    }
    let mut lease = lease.expect("one send started the turn");
    assert_eq!(queued_count, 15);
    assert_eq!(created, 1, "one send created the chat");
    let s = &*db.store;
    let waiting = ids(&s.queued_messages(&c.chat_id).await.unwrap());
    assert_eq!(waiting.len(), 15);
    let mut ran = vec![first];
    let mut position = 1;
    for step in 0.. {
        match end_next(s, &lease, T0 + 1 + step).await.unwrap() {
            TurnEnded::Promoted { lease: l, next, .. } => {
                assert_eq!(
                    l.driver.as_ref(),
                    next.author(),
                    "the promoted sender drives"
                );
                assert!(next.position.unwrap() > position);
                position = next.position.unwrap();
                ran.push(next.message.id);
                lease = l;
            }
            TurnEnded::Released { .. } => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(ran[1..], waiting[..], "queued messages run oldest first");
    let all: HashSet<_> = ran.iter().cloned().collect();
    assert_eq!(all.len(), 16, "every message ran once");
    assert_eq!(chat_row(s, &c).await.state(T0 + 100), TurnState::Idle);
}

pub async fn send_racing_end_turn_never_strands_a_queued_message(db: Db) {
    let a = Arc::clone(&db.store);
    let b = db.second_handle().await;
    let c = web("strand", None);
    let mut now = T0;
    let (mut lease, _) = start(&*a, &c, "t0", None, now).await;
    for i in 0..40 {
        now += 10;
        let (s1, s2, c1, l2) = (Arc::clone(&a), Arc::clone(&b), c.clone(), lease.clone());
        let send = tokio::spawn(async move {
            let m = user_msg(&format!("m{i}"), None, "x");
            send_as(&*s1, &c1, &m, Delivery::Queue, &format!("h{i}"), now)
                .await
                .unwrap()
        });
        let end = tokio::spawn(async move { end_next(&*s2, &l2, now).await.unwrap() });
        let (sent, ended) = (send.await.unwrap(), end.await.unwrap());
        let row = chat_row(&*a, &c).await;
        let waiting = a.queued_messages(&c.chat_id).await.unwrap();
        assert!(
            row.lease.is_some() || waiting.is_empty(),
            "round {i}: {} queued with the lease released ({sent:?} / {ended:?})",
            waiting.len()
        );
        lease = match (sent, ended) {
            // The send came first: the end promoted it.
            (Sent::Queued { message, .. }, TurnEnded::Promoted { lease, next, .. }) => {
                assert_eq!(next.message.id, message.message.id);
                lease
            }
            // The end came first: the send found the chat idle.
            (Sent::Started { lease, .. }, TurnEnded::Released { .. }) => lease,
            other => panic!("round {i}: {other:?}"),
        };
    }
    assert!(matches!(
        end_next(&*a, &lease, now + 1).await.unwrap(),
        TurnEnded::Released { .. }
    ));
    assert!(a.queued_messages(&c.chat_id).await.unwrap().is_empty());
    assert_eq!(a.list_messages(&c.chat_id).await.unwrap().len(), 41);
}

// ---- leases --------------------------------------------------------------------------------------

pub async fn lease_past_expiry_is_taken_over(db: Db) {
    let s = &*db.store;
    let c = web("expiry", None);
    let (first, _) = start(s, &c, "u1", Some("alice"), T0).await;
    let (_, d) = enqueue(s, &c, "u2", Some("bob"), Delivery::Queue, T0 + TTL - 1).await;
    assert_eq!(d, Delivery::Queue, "a live lease blocks a second turn");
    assert!(
        s.take_chat(&c.chat_id, &lease_req("new", None, T0 + TTL - 1))
            .await
            .unwrap()
            .is_none()
    );
    let row = chat_row(s, &c).await;
    assert_eq!(row.state(T0 + TTL - 1), TurnState::Running);
    assert_eq!(
        row.state(T0 + TTL),
        TurnState::Idle,
        "an expired lease frees the chat"
    );
    let sent = send_as(
        s,
        &c,
        &user_msg("u3", Some("carol"), "x"),
        Delivery::Queue,
        "new",
        T0 + TTL,
    )
    .await
    .unwrap();
    let (second, m) = started(sent);
    assert!(second.taken_over, "the lease was taken over");
    assert!(
        second.token > first.token,
        "every take raises the fencing token"
    );
    assert_eq!(second.driver, Some(user("carol")));
    assert_eq!(second.expires_at, T0 + 2 * TTL);
    assert_eq!(m.position, Some(2));
    let info = chat_row(s, &c).await.lease.unwrap();
    assert_eq!((info.holder.as_str(), info.token), ("new", second.token));
}

pub async fn lease_renewal_keeps_the_chat(db: Db) {
    let s = &*db.store;
    let c = web("renew", None);
    let (mut l, _) = start(s, &c, "u1", None, T0).await;
    s.renew_lease(&mut l, TTL, T0 + TTL - 10).await.unwrap();
    assert_eq!(l.expires_at, T0 + 2 * TTL - 10);
    assert_eq!(
        chat_row(s, &c).await.lease.unwrap().expires_at,
        l.expires_at
    );
    assert!(
        s.take_chat(&c.chat_id, &lease_req("q", None, T0 + TTL + 5))
            .await
            .unwrap()
            .is_none(),
        "a renewed lease is still live past the first expiry"
    );
    let (_, d) = enqueue(s, &c, "u2", None, Delivery::Queue, T0 + TTL + 5).await;
    assert_eq!(d, Delivery::Queue);
    assert!(matches!(
        end_next(s, &l, T0 + TTL + 6).await.unwrap(),
        TurnEnded::Promoted { .. }
    ));
}

pub async fn lease_fenced_writes_refused_after_takeover(db: Db) {
    let s = &*db.store;
    let c = web("fence", None);
    let (mut old, start_msg) = start(s, &c, "u1", None, T0).await;
    let position = start_msg.position.unwrap();
    let (new, _) = started(
        send_as(
            s,
            &c,
            &user_msg("u2", None, "x"),
            Delivery::Queue,
            "new",
            T0 + TTL,
        )
        .await
        .unwrap(),
    );
    let version = chat_row(s, &c).await.version;
    let late = T0 + TTL + 1;
    assert!(lost(
        checkpoint(s, &old, &assistant_msg("a1", "late"), position, true, late).await
    ));
    assert!(lost(s.renew_lease(&mut old, TTL, late).await));
    assert_eq!(
        old.expires_at,
        T0 + TTL,
        "a refused renewal leaves the lease as it was"
    );
    assert!(lost(s.expire_lease(&old, late).await));
    assert!(lost(end_next(s, &old, late).await));
    assert!(lost(
        s.end_turn(&EndTurnOp {
            lease: &old,
            reply: Some((&assistant_msg("a1", "late"), position)),
            mode: EndMode::Handoff(&job("run-queue", None, late)),
            now: late,
            delivery: Some(&job("deliver", Some("deliver:late-end"), late)),
        })
        .await
    ));
    assert!(lost(
        s.await_answers(&AwaitOp {
            lease: &old,
            reply: &assistant_msg("a1", "late"),
            position,
            questions: &[new_question(&c.chat_id, "call-1", "a1", 0)],
            job: Some(&job("expire", None, late)),
            now: late,
            delivery: Some(&job("deliver", Some("deliver:late-await"), late)),
        })
        .await
    ));
    assert!(
        s.get_message(&c.chat_id, "a1").await.unwrap().is_none(),
        "the fenced writes changed nothing"
    );
    assert!(
        s.get_question(&c.chat_id, "call-1", late)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        s.claim_job("w", 1_000, late + 1_000)
            .await
            .unwrap()
            .is_none()
    );
    let row = chat_row(s, &c).await;
    assert_eq!(row.version, version);
    assert_eq!(row.awaiting_message_id, None);
    assert_eq!(row.lease.unwrap().holder, "new");
    // The new holder writes fine.
    let done = checkpoint(s, &new, &assistant_msg("a2", "ok"), 2, false, late)
        .await
        .unwrap();
    assert_eq!(done.reply.position, Some(2));
}

pub async fn takeover_marks_the_interrupted_turn(db: Db) {
    let s = &*db.store;
    // A turn that saved a reply: the reply gets the error.
    let c = web("saved", None);
    let (l, _) = start(s, &c, "u1", Some("alice"), T0).await;
    checkpoint(s, &l, &assistant_msg("a1", "partial"), 1, false, T0 + 1)
        .await
        .unwrap();
    let sent = send_as(
        s,
        &c,
        &user_msg("u2", Some("alice"), "x"),
        Delivery::Queue,
        "new",
        T0 + TTL,
    )
    .await
    .unwrap();
    let Sent::Started {
        interrupted: Some(reply),
        lease,
        message,
        ..
    } = sent
    else {
        panic!("a take-over reports the interrupted reply: {sent:?}")
    };
    assert!(lease.taken_over);
    assert_eq!(reply.message.id, "a1");
    assert_eq!(
        reply.message.text(),
        "partial",
        "the saved reply keeps its parts"
    );
    assert_eq!(
        reply.message.metadata.error.as_ref().unwrap().code,
        INTERRUPTED
    );
    assert_eq!((reply.position, reply.sub), (Some(1), REPLY_SUB));
    assert_eq!(
        s.get_message(&c.chat_id, "a1")
            .await
            .unwrap()
            .unwrap()
            .message
            .metadata
            .error,
        reply.message.metadata.error,
        "saved in the same transaction"
    );
    assert_eq!(message.position, Some(2));

    // A turn that saved nothing: an empty reply with the error is created.
    let c = web("unsaved", None);
    let mut user = user_msg("u1", Some("alice"), "x");
    user.metadata.model = Some("model-a".into());
    started(
        send_as(s, &c, &user, Delivery::Queue, "old", T0)
            .await
            .unwrap(),
    );
    let taken = s
        .take_chat(&c.chat_id, &lease_req("sweeper", None, T0 + TTL))
        .await
        .unwrap()
        .expect("an expired lease is taken");
    let reply = taken.interrupted.expect("an empty reply is created");
    assert_eq!(reply.message.role, Role::Assistant);
    assert!(reply.message.parts.is_empty());
    assert_ne!(reply.message.id, "u1");
    assert_eq!(reply.message.metadata.model.as_deref(), Some("model-a"));
    assert_eq!(
        reply.message.metadata.error.as_ref().unwrap().code,
        INTERRUPTED
    );
    assert_eq!((reply.position, reply.sub), (Some(1), REPLY_SUB));
    assert_eq!(
        ids(&s.list_messages(&c.chat_id).await.unwrap()),
        ["u1".to_string(), reply.message.id.clone()]
    );

    // A turn whose reply already says it failed is left alone.
    let c = web("failed", None);
    let (l, _) = start(s, &c, "u1", None, T0).await;
    let mut failed = assistant_msg("a1", "boom");
    failed.metadata.error = Some(ErrorInfo {
        code: "model-error".into(),
        message: "the model failed".into(),
    });
    checkpoint(s, &l, &failed, 1, false, T0 + 1).await.unwrap();
    let version = chat_row(s, &c).await.version;
    let sent = send_as(
        s,
        &c,
        &user_msg("u2", None, "x"),
        Delivery::Queue,
        "new",
        T0 + TTL,
    )
    .await
    .unwrap();
    let Sent::Started {
        interrupted,
        lease,
        chat,
        ..
    } = sent
    else {
        panic!("{sent:?}")
    };
    assert!(lease.taken_over);
    assert!(interrupted.is_none(), "a failed reply is not marked again");
    assert_eq!(
        chat.version,
        version + 1,
        "only the new message was written"
    );
    assert_eq!(
        s.get_message(&c.chat_id, "a1")
            .await
            .unwrap()
            .unwrap()
            .message
            .metadata
            .error
            .unwrap()
            .code,
        "model-error"
    );
}

/// An answer settled just before the continued turn's process died (it had taken the lease,
/// not yet saved a step) is kept in the interrupted reply, not only in its record (issue 18: the
/// soak lost such answers).
pub async fn takeover_keeps_settled_answers_in_the_interrupted_reply(db: Db) {
    let s = &*db.store;
    let c = web("settled-then-died", None);
    let u1 = user_msg("u1", Some("alice"), "ask");
    let (l, _) = started(send_as(s, &c, &u1, Delivery::Queue, "p", T0).await.unwrap());
    let mut reply = assistant_msg("a1", "Let me ask. ");
    // The text before the questions was streamed into two messages.
    reply.metadata.drafts = vec!["m-1".into(), "m-2".into()];
    for call in ["call-1", "call-2"] {
        reply.parts.push(MessagePart::Tool(ToolPart {
            tool_name: QUESTION_TOOL.into(),
            tool_call_id: call.into(),
            state: ToolState::InputAvailable,
            input: json!({}),
            output: None,
            error_text: None,
            expires_at: None,
            approval: None,
        }));
    }
    s.await_answers(&AwaitOp {
        lease: &l,
        reply: &reply,
        position: 1,
        questions: &[
            new_question(&c.chat_id, "call-1", "a1", 0),
            new_question(&c.chat_id, "call-2", "a1", 1),
        ],
        job: None,
        now: T0 + 1,
        delivery: None,
    })
    .await
    .unwrap();
    let yes = answer("yes");
    record_op(s, &c.chat_id, "call-1", &yes, None, None, T0 + 2).await;
    record_op(
        s,
        &c.chat_id,
        "call-2",
        &QuestionOutcome::Expired(None),
        None,
        None,
        T0 + 2,
    )
    .await;
    // The continued turn's process takes the chat, then dies before its first checkpoint.
    let resumed = s
        .resume_turn(&c.chat_id, "a1", &lease_req("resumer", None, T0 + 3))
        .await
        .unwrap();
    assert!(matches!(resumed, Resume::Taken { .. }), "{resumed:?}");
    let taken = s
        .take_chat(&c.chat_id, &lease_req("sweeper", None, T0 + 3 + TTL))
        .await
        .unwrap()
        .expect("the expired lease is taken over");
    let marked = taken.interrupted.expect("the reply is marked interrupted");
    let stored = s.get_message(&c.chat_id, "a1").await.unwrap().unwrap();
    for m in [&marked.message, &stored.message] {
        let tools: Vec<&ToolPart> = m
            .parts
            .iter()
            .filter_map(|p| match p {
                MessagePart::Tool(t) => Some(t),
                _ => None,
            })
            .collect();
        assert_eq!(tools.len(), 2);
        assert_eq!(tools[0].state, ToolState::OutputAvailable, "{m:?}");
        assert_eq!(
            tools[0].output,
            Some(serde_json::to_value(yes.output().unwrap()).unwrap())
        );
        assert_eq!(tools[1].state, ToolState::OutputError);
        assert_eq!(m.metadata.error.as_ref().unwrap().code, INTERRUPTED);
        // Those messages show the text before the questions: the continuation's is never
        // drawn over them (the crash suite lost first segments so).
        assert!(m.metadata.drafts.is_empty(), "{:?}", m.metadata.drafts);
    }
}

/// The job `InterruptedDelivery` asks for in the conformance test: one per reply.
fn owed_test_job(chat: &ChatRow, reply: &UiMessage) -> Option<NewJob> {
    Some(NewJob {
        kind: "owed".into(),
        key: Some(format!("owed:{}:{}", chat.chat_id, reply.id)),
        payload: json!({"error": reply.metadata.error.as_ref().map(|e| e.code.clone())}),
        run_at: 0,
    })
}

/// A take-over that marks a reply interrupted writes what it owes in the same transaction (a
/// process killed right after it lost the notice when the engine wrote the job after), on both
/// ways in: a new message (`send`) and the queue sweep (`take_chat`); a take-over that
/// interrupts nothing writes none.
pub async fn takeover_writes_what_the_interrupted_reply_owes(db: Db) {
    let s = &*db.store;
    let owed = |run_at| {
        Some(InterruptedDelivery {
            job: owed_test_job,
            run_at,
        })
    };
    // By send.
    let c = web("owed-by-send", None);
    let (l, _) = start(s, &c, "u1", Some("alice"), T0).await;
    checkpoint(s, &l, &assistant_msg("a1", "partial"), 1, false, T0 + 1)
        .await
        .unwrap();
    let req = LeaseRequest {
        interrupted: owed(T0 + TTL + 500),
        ..lease_req("new", Some("alice"), T0 + TTL)
    };
    let sent = s
        .send(&SendOp {
            chat: &c,
            message: &user_msg("u2", Some("alice"), "x"),
            delivery: Delivery::Queue,
            lease: &req,
            queue_if_busy: true,
        })
        .await
        .unwrap();
    assert!(
        matches!(
            sent,
            Sent::Started {
                interrupted: Some(_),
                ..
            }
        ),
        "{sent:?}"
    );
    assert!(
        s.claim_job("w", 1_000, T0 + TTL + 499)
            .await
            .unwrap()
            .is_none(),
        "due at the run_at asked for"
    );
    let job = s
        .claim_job("w", 1_000, T0 + TTL + 500)
        .await
        .unwrap()
        .expect("the job is written with the take-over");
    assert_eq!(job.key.as_deref(), Some("owed:owed-by-send:a1"));
    assert_eq!(job.payload["error"], INTERRUPTED);
    s.complete_job(&job).await.unwrap();
    // By the queue sweep, on a turn that saved nothing yet: its new reply is owed.
    let c = web("owed-by-sweep", None);
    start(s, &c, "u1", Some("alice"), T0).await;
    let req = LeaseRequest {
        interrupted: owed(T0 + TTL),
        ..lease_req("sweeper", None, T0 + TTL)
    };
    let taken = s.take_chat(&c.chat_id, &req).await.unwrap().unwrap();
    let reply = taken.interrupted.expect("marked");
    let job = s
        .claim_job("w", 1_000, T0 + TTL)
        .await
        .unwrap()
        .expect("the job is written with the take-over");
    assert_eq!(
        job.key,
        Some(format!("owed:owed-by-sweep:{}", reply.message.id))
    );
    s.complete_job(&job).await.unwrap();
    // Nothing interrupted: no job.
    let c = web("owed-nothing", None);
    let req = LeaseRequest {
        interrupted: owed(T0),
        ..lease_req("first", Some("alice"), T0)
    };
    s.send(&SendOp {
        chat: &c,
        message: &user_msg("u1", Some("alice"), "x"),
        delivery: Delivery::Queue,
        lease: &req,
        queue_if_busy: true,
    })
    .await
    .unwrap();
    assert!(
        s.claim_job("w", 1_000, T0 + TTL * 10)
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn expired_leases_and_expire_lease(db: Db) {
    let s = &*db.store;
    let (a, b, c, d) = (
        web("a", None),
        web("b", None),
        web("c", None),
        web("d", None),
    );
    start(s, &a, "a1", None, T0).await;
    start(s, &b, "b1", None, T0 + 10).await;
    let (lc, _) = start(s, &c, "c1", None, T0 + 20).await;
    let (ld, _) = start(s, &d, "d1", None, T0).await;
    s.await_answers(&AwaitOp {
        lease: &ld,
        reply: &assistant_msg("d2", "?"),
        position: 1,
        questions: &[new_question(&d.chat_id, "call-d", "d2", 0)],
        job: None,
        now: T0 + 1,
        delivery: None,
    })
    .await
    .unwrap();
    let names = |v: Vec<ChatId>| -> Vec<String> { v.into_iter().map(|c| c.to_string()).collect() };
    assert!(s.expired_leases(T0 + TTL - 1, 10).await.unwrap().is_empty());
    assert_eq!(
        names(s.expired_leases(T0 + TTL + 15, 10).await.unwrap()),
        ["a", "b"]
    );
    assert_eq!(
        names(s.expired_leases(T0 + TTL + 15, 1).await.unwrap()),
        ["a"]
    );
    // A process that stops ends its lease now: the chat is swept first.
    s.expire_lease(&lc, T0 + 30).await.unwrap();
    assert_eq!(chat_row(s, &c).await.state(T0 + 30), TurnState::Idle);
    assert_eq!(names(s.expired_leases(T0 + 30, 10).await.unwrap()), ["c"]);
    assert_eq!(
        names(s.expired_leases(T0 + TTL + 15, 10).await.unwrap()),
        ["c", "a", "b"]
    );
    let stale = Lease {
        token: lc.token + 1,
        ..lc.clone()
    };
    assert!(lost(s.expire_lease(&stale, T0 + 31).await));
    // The next taker treats the turn as interrupted.
    let sent = send_as(
        s,
        &c,
        &user_msg("c2", None, "x"),
        Delivery::Queue,
        "next",
        T0 + 31,
    )
    .await
    .unwrap();
    let Sent::Started {
        lease, interrupted, ..
    } = sent
    else {
        panic!("{sent:?}")
    };
    assert!(lease.taken_over);
    assert!(interrupted.is_some());
    assert_eq!(
        names(s.expired_leases(T0 + 40, 10).await.unwrap()),
        Vec::<String>::new()
    );
}

// ---- turns ---------------------------------------------------------------------------------------

pub async fn checkpoint_joins_the_drivers_steers_in_order(db: Db) {
    let s = &*db.store;
    let c = in_thread("_join", Some("alice"), "t");
    let (l, u1) = start(s, &c, "u1", Some("alice"), T0).await;
    let p = u1.position.unwrap();
    enqueue(s, &c, "s1", Some("alice"), Delivery::Steer, T0 + 1).await;
    enqueue(s, &c, "s2", Some("bob"), Delivery::Steer, T0 + 2).await;
    enqueue(s, &c, "s3", Some("alice"), Delivery::Steer, T0 + 3).await;
    enqueue(s, &c, "q1", Some("alice"), Delivery::Queue, T0 + 4).await;
    // Without joining, the steers wait.
    let done = checkpoint(s, &l, &assistant_msg("a1", "step 1"), p, false, T0 + 5)
        .await
        .unwrap();
    assert!(done.steers.is_empty());
    assert_eq!((done.reply.position, done.reply.sub), (Some(p), REPLY_SUB));
    assert_eq!(s.queued_messages(&c.chat_id).await.unwrap().len(), 4);
    let done = checkpoint(s, &l, &assistant_msg("a1", "step 2"), p, true, T0 + 6)
        .await
        .unwrap();
    assert_eq!(
        ids(&done.steers),
        ["s1", "s3"],
        "the driver's steers, oldest first"
    );
    for m in &done.steers {
        assert!(!m.queued);
        assert_eq!(m.position, Some(p));
        assert_eq!(m.sub, m.seq);
        assert_eq!(m.message.metadata.status, None);
    }
    assert_eq!(done.reply.message.text(), "step 2");
    assert_eq!(
        ids(&s.list_messages(&c.chat_id).await.unwrap()),
        ["u1", "s1", "s3", "a1", "s2", "q1"],
        "joined steers stand between the user message and the reply; queued ones come last"
    );
    assert_eq!(
        ids(&s.queued_messages(&c.chat_id).await.unwrap()),
        ["s2", "q1"]
    );
}

pub async fn await_answers_saves_questions_and_releases(db: Db) {
    let s = &*db.store;
    let c = web("await", None);
    let (l, u1) = start(s, &c, "u1", Some("alice"), T0).await;
    let p = u1.position.unwrap();
    let questions = [
        new_question(&c.chat_id, "call-1", "a1", 0),
        new_question(&c.chat_id, "call-2", "a1", 1),
    ];
    let reply = s
        .await_answers(&AwaitOp {
            lease: &l,
            reply: &assistant_msg("a1", "questions"),
            position: p,
            questions: &questions,
            job: Some(&job("expire", Some("expire:a1"), T0 + 500)),
            now: T0 + 1,
            delivery: None,
        })
        .await
        .unwrap();
    assert_eq!((reply.position, reply.sub), (Some(p), REPLY_SUB));
    let row = chat_row(s, &c).await;
    assert_eq!(row.awaiting_message_id.as_deref(), Some("a1"));
    assert!(row.lease.is_none(), "the lease is released");
    assert_eq!(row.state(T0 + 1), TurnState::Awaiting);
    let got = s
        .questions_of_message(&c.chat_id, "a1", T0 + 1)
        .await
        .unwrap();
    assert_eq!(
        got.iter()
            .map(|q| q.tool_call_id.as_str())
            .collect::<Vec<_>>(),
        ["call-1", "call-2"]
    );
    assert!(
        got.iter()
            .all(|q| q.outcome.is_none() && !q.rendered && q.record.revision == 0)
    );
    assert!(s.claim_job("w", 1_000, T0 + 499).await.unwrap().is_none());
    let j = s
        .claim_job("w", 1_000, T0 + 500)
        .await
        .unwrap()
        .expect("the job is scheduled");
    assert_eq!(j.kind, "expire");
    assert_eq!(j.key.as_deref(), Some("expire:a1"));
    // The turn is over for its lease, and a new message waits.
    assert!(lost(
        checkpoint(s, &l, &assistant_msg("a1", "x"), p, false, T0 + 2).await
    ));
    let (_, d) = enqueue(s, &c, "u2", Some("alice"), Delivery::Steer, T0 + 2).await;
    assert_eq!(d, Delivery::Queue);
    assert!(
        s.take_chat(&c.chat_id, &lease_req("sweeper", None, T0 + 3))
            .await
            .unwrap()
            .is_none(),
        "a waiting question keeps the chat"
    );
}

pub async fn end_turn_next_releases_or_promotes(db: Db) {
    let s = &*db.store;
    let c = in_thread("_next", Some("alice"), "t");
    let (l, u1) = start(s, &c, "u1", Some("alice"), T0).await;
    let ended = s
        .end_turn(&EndTurnOp {
            lease: &l,
            reply: Some((&assistant_msg("a1", "done"), u1.position.unwrap())),
            mode: EndMode::Next,
            now: T0 + 1,
            delivery: None,
        })
        .await
        .unwrap();
    let TurnEnded::Released { reply: Some(reply) } = ended else {
        panic!("{ended:?}")
    };
    assert_eq!((reply.message.id.as_str(), reply.sub), ("a1", REPLY_SUB));
    let row = chat_row(s, &c).await;
    assert!(row.lease.is_none());
    assert_eq!(row.state(T0 + 1), TurnState::Idle);
    assert!(
        lost(end_next(s, &l, T0 + 2).await),
        "a released lease fences nothing more"
    );

    let (l, u2) = start(s, &c, "u2", Some("alice"), T0 + 3).await;
    enqueue(s, &c, "q1", Some("bob"), Delivery::Queue, T0 + 4).await;
    enqueue(s, &c, "q2", Some("carol"), Delivery::Queue, T0 + 5).await;
    let TurnEnded::Promoted { reply, lease, next } = end_next(s, &l, T0 + 6).await.unwrap() else {
        panic!("something is queued")
    };
    assert!(reply.is_none());
    assert_eq!(next.message.id, "q1");
    assert!(!next.queued);
    assert_eq!(next.message.metadata.status, None);
    assert_eq!(next.position, Some(u2.position.unwrap() + 1));
    assert_eq!(next.sub, 0);
    assert_eq!(
        (lease.holder.as_str(), lease.token),
        (l.holder.as_str(), l.token)
    );
    assert_eq!(lease.driver, Some(user("bob")));
    let info = chat_row(s, &c).await.lease.unwrap();
    assert_eq!((info.token, info.driver), (l.token, Some(user("bob"))));
    let TurnEnded::Promoted { lease, next, .. } = end_next(s, &lease, T0 + 7).await.unwrap() else {
        panic!("q2 waits")
    };
    assert_eq!(
        (next.message.id.as_str(), lease.driver.clone()),
        ("q2", Some(user("carol")))
    );
    assert!(matches!(
        end_next(s, &lease, T0 + 8).await.unwrap(),
        TurnEnded::Released { reply: None }
    ));
    assert!(chat_row(s, &c).await.lease.is_none());
}

pub async fn end_turn_handoff_releases_and_schedules(db: Db) {
    let s = &*db.store;
    let c = web("handoff", None);
    let run_queue = job("run-queue", Some("queue:handoff"), T0 + 10);
    let (l, _) = start(s, &c, "u1", None, T0).await;
    let ended = s
        .end_turn(&EndTurnOp {
            lease: &l,
            reply: None,
            mode: EndMode::Handoff(&run_queue),
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
    assert!(chat_row(s, &c).await.lease.is_none());
    assert!(
        s.claim_job("w", 1_000, T0 + 1_000).await.unwrap().is_none(),
        "nothing queued, no job"
    );

    let (l, u2) = start(s, &c, "u2", None, T0 + 2).await;
    enqueue(s, &c, "q1", None, Delivery::Queue, T0 + 3).await;
    let ended = s
        .end_turn(&EndTurnOp {
            lease: &l,
            reply: Some((&assistant_msg("a2", "bye"), u2.position.unwrap())),
            mode: EndMode::Handoff(&run_queue),
            now: T0 + 4,
            delivery: None,
        })
        .await
        .unwrap();
    let TurnEnded::HandedOn {
        reply: Some(reply),
        queued: true,
    } = ended
    else {
        panic!("{ended:?}")
    };
    assert_eq!(reply.message.id, "a2");
    let row = chat_row(s, &c).await;
    assert!(row.lease.is_none(), "released whatever is queued");
    assert_eq!(ids(&s.queued_messages(&c.chat_id).await.unwrap()), ["q1"]);
    let j = s
        .claim_job("w", 1_000, T0 + 10)
        .await
        .unwrap()
        .expect("the queue's job is scheduled");
    assert_eq!(j.kind, "run-queue");
    assert_eq!(j.payload, json!({"kind": "run-queue"}));
}

pub async fn take_chat_runs_the_queue_of_an_idle_chat(db: Db) {
    let s = &*db.store;
    let req = |now| lease_req("sweeper", None, now);
    assert!(
        s.take_chat(&ChatId::new("none").unwrap(), &req(T0))
            .await
            .unwrap()
            .is_none()
    );
    // Free, nothing queued: taken and left free.
    let c = web("take", None);
    let (l, _) = start(s, &c, "u1", None, T0).await;
    assert!(
        s.take_chat(&c.chat_id, &req(T0 + 1))
            .await
            .unwrap()
            .is_none(),
        "a live turn holds it"
    );
    end_next(s, &l, T0 + 2).await.unwrap();
    let version = chat_row(s, &c).await.version;
    assert_eq!(
        s.take_chat(&c.chat_id, &req(T0 + 3)).await.unwrap(),
        Some(Taken {
            interrupted: None,
            next: None
        })
    );
    let row = chat_row(s, &c).await;
    assert!(row.lease.is_none());
    assert_eq!(row.version, version);
    // Free with a queue (handed on): promotes under a new lease driven by the sender.
    let (l, _) = start(s, &c, "u2", None, T0 + 4).await;
    enqueue(s, &c, "q1", Some("bob"), Delivery::Queue, T0 + 5).await;
    s.end_turn(&EndTurnOp {
        lease: &l,
        reply: None,
        mode: EndMode::Handoff(&job("run", None, T0)),
        now: T0 + 6,
        delivery: None,
    })
    .await
    .unwrap();
    let taken = s
        .take_chat(&c.chat_id, &req(T0 + 7))
        .await
        .unwrap()
        .unwrap();
    assert!(taken.interrupted.is_none());
    let (lease, next) = taken.next.expect("q1 is promoted");
    assert!(!lease.taken_over);
    assert!(lease.token > l.token);
    assert_eq!(lease.holder, "sweeper");
    assert_eq!(lease.driver, Some(user("bob")));
    assert_eq!((next.message.id.as_str(), next.queued), ("q1", false));
    assert_eq!(
        chat_row(s, &c).await.lease.unwrap().driver,
        Some(user("bob"))
    );
    // Expired with a queue: the turn is marked interrupted, the queue runs on.
    enqueue(s, &c, "q2", Some("carol"), Delivery::Queue, T0 + 8).await;
    let taken = s
        .take_chat(&c.chat_id, &req(T0 + 7 + TTL))
        .await
        .unwrap()
        .unwrap();
    let interrupted = taken.interrupted.expect("the stopped turn is marked");
    assert_eq!(interrupted.position, next.position);
    let (lease, next2) = taken.next.unwrap();
    assert!(lease.taken_over);
    assert_eq!(
        (next2.message.id.as_str(), lease.driver),
        ("q2", Some(user("carol")))
    );
    assert!(next2.position > next.position);
    // Expired, nothing queued: marked, and released.
    let taken = s
        .take_chat(&c.chat_id, &req(T0 + 7 + 2 * TTL))
        .await
        .unwrap()
        .unwrap();
    assert!(taken.interrupted.is_some());
    assert!(taken.next.is_none());
    let row = chat_row(s, &c).await;
    assert!(row.lease.is_none(), "released again when nothing is queued");
    assert!(
        s.expired_leases(T0 + 10 * TTL, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // A waiting question keeps it.
    let (l, u3) = start(s, &c, "u3", None, T0 + 3 * TTL).await;
    s.await_answers(&AwaitOp {
        lease: &l,
        reply: &assistant_msg("a3", "?"),
        position: u3.position.unwrap(),
        questions: &[],
        job: None,
        now: T0 + 3 * TTL,
        delivery: None,
    })
    .await
    .unwrap();
    enqueue(s, &c, "q3", None, Delivery::Queue, T0 + 3 * TTL + 1).await;
    assert!(
        s.take_chat(&c.chat_id, &req(T0 + 5 * TTL))
            .await
            .unwrap()
            .is_none()
    );
}

/// Alice's message (model `model-a`, reasoning `high`) starts a turn whose reply `a1` waits on
/// two questions, `call-1` and `call-2`; the chat is released. Returns the turn's lease.
async fn waiting_on_two_questions(s: &dyn Store, c: &NewChat) -> Lease {
    let mut u1 = user_msg("u1", Some("alice"), "ask");
    u1.metadata.model = Some("model-a".into());
    u1.metadata.reasoning = Some("high".into());
    let (l, _) = started(send_as(s, c, &u1, Delivery::Queue, "p", T0).await.unwrap());
    s.await_answers(&AwaitOp {
        lease: &l,
        reply: &assistant_msg("a1", "?"),
        position: 1,
        questions: &[
            new_question(&c.chat_id, "call-1", "a1", 0),
            new_question(&c.chat_id, "call-2", "a1", 1),
        ],
        job: None,
        now: T0 + 1,
        delivery: None,
    })
    .await
    .unwrap();
    l
}

pub async fn resume_turn_each_answer(db: Db) {
    let s = &*db.store;
    let c = web("resume", None);
    let l = waiting_on_two_questions(s, &c).await;
    let req = |now| lease_req("resumer", Some("bob"), now);
    assert_eq!(
        s.resume_turn(&c.chat_id, "a1", &req(T0 + 2)).await.unwrap(),
        Resume::Open
    );
    record_op(s, &c.chat_id, "call-1", &answer("yes"), None, None, T0 + 2).await;
    assert_eq!(
        s.resume_turn(&c.chat_id, "a1", &req(T0 + 3)).await.unwrap(),
        Resume::Open
    );
    record_op(
        s,
        &c.chat_id,
        "call-2",
        &QuestionOutcome::Dismissed,
        None,
        None,
        T0 + 3,
    )
    .await;
    assert_eq!(
        s.resume_turn(&c.chat_id, "other", &req(T0 + 4))
            .await
            .unwrap(),
        Resume::NotWaiting
    );
    let Resume::Taken {
        lease,
        reply,
        questions,
        model,
        reasoning,
    } = s.resume_turn(&c.chat_id, "a1", &req(T0 + 4)).await.unwrap()
    else {
        panic!("every question has an outcome")
    };
    assert_eq!(
        lease.driver,
        Some(user("bob")),
        "the request's driver drives"
    );
    assert_eq!(lease.holder, "resumer");
    assert!(lease.token > l.token);
    assert_eq!(lease.expires_at, T0 + 4 + TTL);
    assert_eq!(reply.message.id, "a1");
    assert_eq!(
        questions
            .iter()
            .map(|q| (q.tool_call_id.as_str(), q.outcome.clone()))
            .collect::<Vec<_>>(),
        [
            ("call-1", Some(answer("yes"))),
            ("call-2", Some(QuestionOutcome::Dismissed))
        ]
    );
    assert_eq!(
        (model.as_deref(), reasoning.as_deref()),
        (Some("model-a"), Some("high"))
    );
    let row = chat_row(s, &c).await;
    assert_eq!(row.awaiting_message_id, None);
    assert_eq!(row.state(T0 + 4), TurnState::Running);
    assert_eq!(row.lease.unwrap().driver, Some(user("bob")));
    assert_eq!(
        s.resume_turn(&c.chat_id, "a1", &req(T0 + 5)).await.unwrap(),
        Resume::Busy {
            until: lease.expires_at
        },
        "a live lease holds the chat"
    );
    end_next(s, &lease, T0 + 6).await.unwrap();
    assert_eq!(
        s.resume_turn(&c.chat_id, "a1", &req(T0 + 7)).await.unwrap(),
        Resume::NotWaiting,
        "continued already"
    );
    assert_eq!(
        s.resume_turn(&ChatId::new("none").unwrap(), "a1", &req(T0 + 7))
            .await
            .unwrap(),
        Resume::NotWaiting
    );
}

/// `record_outcome` with `resume`: the winning outcome continues the turn in the same operation,
/// exactly as `resume_turn` would (open while a question waits, taken once all have outcomes); an
/// outcome that does not win continues nothing.
pub async fn record_outcome_continues_the_turn_when_asked(db: Db) {
    let s = &*db.store;
    let c = web("rec-resume", None);
    let l = waiting_on_two_questions(s, &c).await;
    let req = |now| lease_req("resumer", Some("bob"), now);
    let chat = &c.chat_id;
    let record = |call: &'static str, outcome: QuestionOutcome, now: Millis| {
        let r = req(now);
        async move {
            s.record_outcome(&RecordOp {
                chat,
                tool_call_id: call,
                outcome: &outcome,
                actor: None,
                expected_revision: None,
                lock: None,
                resume: Some(&r),
                now,
            })
            .await
            .unwrap()
        }
    };
    // The first of two: recorded, the turn still waits.
    let Recorded::Won { resumed, .. } = record("call-1", answer("yes"), T0 + 2).await else {
        panic!("the first outcome wins")
    };
    assert_eq!(resumed, Some(Resume::Open));
    assert_eq!(
        chat_row(s, &c).await.awaiting_message_id.as_deref(),
        Some("a1")
    );
    // The same call again: not won, nothing continued.
    assert!(matches!(
        record("call-1", answer("no"), T0 + 3).await,
        Recorded::Settled { .. }
    ));
    assert_eq!(chat_row(s, &c).await.state(T0 + 3), TurnState::Awaiting);
    // The last: recorded and the turn taken, in one operation.
    let Recorded::Won {
        question, resumed, ..
    } = record("call-2", QuestionOutcome::Dismissed, T0 + 4).await
    else {
        panic!("the second outcome wins")
    };
    assert_eq!(question.outcome, Some(QuestionOutcome::Dismissed));
    let Some(Resume::Taken {
        lease,
        reply,
        questions,
        model,
        ..
    }) = resumed
    else {
        panic!("every question has an outcome: {resumed:?}")
    };
    assert_eq!(
        (lease.holder.as_str(), lease.driver.clone()),
        ("resumer", Some(user("bob")))
    );
    assert!(lease.token > l.token);
    assert_eq!(reply.message.id, "a1");
    assert_eq!(questions.len(), 2);
    assert!(questions.iter().all(|q| q.outcome.is_some()));
    assert_eq!(model.as_deref(), Some("model-a"));
    let row = chat_row(s, &c).await;
    assert_eq!(row.awaiting_message_id, None);
    assert_eq!(row.state(T0 + 4), TurnState::Running);
    assert_eq!(
        s.resume_turn(&c.chat_id, "a1", &req(T0 + 5)).await.unwrap(),
        Resume::Busy {
            until: lease.expires_at
        },
        "the lease the record took holds the chat"
    );
}

pub async fn turn_awaiting_blocks_new_turns_until_resumed(db: Db) {
    let a = Arc::clone(&db.store);
    let b = db.second_handle().await;
    let c = web("await2", None);
    let (l, _) = start(&*a, &c, "u1", Some("alice"), T0).await;
    a.await_answers(&AwaitOp {
        lease: &l,
        reply: &assistant_msg("a1", "?"),
        position: 1,
        questions: &[new_question(&c.chat_id, "call-1", "a1", 0)],
        job: None,
        now: T0,
        delivery: None,
    })
    .await
    .unwrap();
    // Another process sees the wait: messages queue, the sweeper leaves it.
    let (_, d) = enqueue(&*b, &c, "u2", Some("alice"), Delivery::Queue, T0 + TTL).await;
    assert_eq!(d, Delivery::Queue);
    assert_eq!(chat_row(&*b, &c).await.state(T0 + TTL), TurnState::Awaiting);
    assert!(
        b.take_chat(&c.chat_id, &lease_req("q", None, T0 + TTL))
            .await
            .unwrap()
            .is_none()
    );
    record_op(
        &*b,
        &c.chat_id,
        "call-1",
        &answer("no"),
        Some(0),
        None,
        T0 + TTL,
    )
    .await;
    let Resume::Taken { lease, .. } = b
        .resume_turn(&c.chat_id, "a1", &lease_req("r", Some("alice"), T0 + TTL))
        .await
        .unwrap()
    else {
        panic!("resumable")
    };
    // The resumed turn ends by running the queue.
    let TurnEnded::Promoted { next, .. } = end_next(&*a, &lease, T0 + TTL + 1).await.unwrap()
    else {
        panic!("u2 waits")
    };
    assert_eq!(next.message.id, "u2");
    assert!(next.position.unwrap() > 1);
}

// ---- the queue -----------------------------------------------------------------------------------

pub async fn queue_is_oldest_first_across_two_handles(db: Db) {
    let a = Arc::clone(&db.store);
    let b = db.second_handle().await;
    let c = web("queue", None);
    let (mut l, _) = start(&*a, &c, "u0", None, T0).await;
    for i in 0..10 {
        let s = if i % 2 == 0 { &a } else { &b };
        enqueue(&**s, &c, &format!("q{i}"), None, Delivery::Queue, T0 + i).await;
    }
    let expected: Vec<String> = (0..10).map(|i| format!("q{i}")).collect();
    for s in [&a, &b] {
        assert_eq!(ids(&s.queued_messages(&c.chat_id).await.unwrap()), expected);
    }
    // Promotion through either handle takes them oldest first.
    for (i, id) in expected.iter().enumerate() {
        let s = if i % 2 == 0 { &b } else { &a };
        let TurnEnded::Promoted { lease, next, .. } = end_next(&**s, &l, T0 + 100).await.unwrap()
        else {
            panic!("{id} waits")
        };
        assert_eq!(&next.message.id, id);
        assert!(!next.queued);
        assert_eq!(next.message.metadata.status, None);
        assert_eq!(next.position, Some(i as i64 + 2));
        l = lease;
    }
    assert!(matches!(
        end_next(&*a, &l, T0 + 100).await.unwrap(),
        TurnEnded::Released { .. }
    ));
}

pub async fn queue_edit_and_delete_only_by_author_before_promotion(db: Db) {
    let s = &*db.store;
    let c = in_thread("_edit", Some("alice"), "t");
    let (l, _) = start(s, &c, "u0", Some("alice"), T0).await;
    let (m, _) = enqueue(s, &c, "m1", Some("alice"), Delivery::Queue, T0).await;
    assert_eq!(m.message.metadata.status, Some(MessageStatus::Queued));
    enqueue(s, &c, "m2", Some("alice"), Delivery::Queue, T0).await;
    let edit = QueuedEdit {
        parts: Some(vec![MessagePart::text("edited")]),
        delivery: Some(Delivery::Steer),
    };
    let id = &c.chat_id;
    assert_eq!(
        s.edit_queued(
            &QueuedOp {
                chat: id,
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
                chat: id,
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
                chat: id,
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
    assert_eq!(
        s.get_message(id, "m1")
            .await
            .unwrap()
            .unwrap()
            .message
            .text(),
        "m1",
        "refused edits change nothing"
    );
    let QueuedChange::Done(Some(edited)) = s
        .edit_queued(
            &QueuedOp {
                chat: id,
                id: "m1",
                by: Some(&user("alice")),
                now: T0 + 1,
            },
            &edit,
        )
        .await
        .unwrap()
    else {
        panic!("the author may edit")
    };
    assert_eq!(edited.message.text(), "edited");
    assert_eq!(edited.delivery, Delivery::Steer);
    assert_eq!(edited.message.metadata.delivery, Some(Delivery::Steer));
    assert!(edited.queued);
    let stored = s.get_message(id, "m1").await.unwrap().unwrap();
    assert_eq!(stored, *edited, "the edit is stored as returned");
    // Only the parts: the delivery stays.
    let parts_only = QueuedEdit {
        parts: Some(vec![MessagePart::text("again")]),
        delivery: None,
    };
    let QueuedChange::Done(Some(edited)) = s
        .edit_queued(
            &QueuedOp {
                chat: id,
                id: "m1",
                by: Some(&user("alice")),
                now: T0 + 2,
            },
            &parts_only,
        )
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (edited.message.text().as_str(), edited.delivery),
        ("again", Delivery::Steer)
    );
    assert_eq!(
        s.delete_queued(&QueuedOp {
            chat: id,
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
            chat: id,
            id: "m9",
            by: Some(&user("alice")),
            now: T0
        })
        .await
        .unwrap(),
        QueuedChange::NotFound
    );
    assert!(s.get_message(id, "m2").await.unwrap().is_some());
    assert_eq!(
        s.delete_queued(&QueuedOp {
            chat: id,
            id: "m2",
            by: Some(&user("alice")),
            now: T0
        })
        .await
        .unwrap(),
        QueuedChange::Done(None)
    );
    assert!(s.get_message(id, "m2").await.unwrap().is_none());
    // Once promoted, neither.
    let TurnEnded::Promoted { next, .. } = end_next(s, &l, T0 + 3).await.unwrap() else {
        panic!()
    };
    assert_eq!(next.message.id, "m1");
    assert_eq!(next.message.text(), "again");
    assert_eq!(
        s.edit_queued(
            &QueuedOp {
                chat: id,
                id: "m1",
                by: Some(&user("alice")),
                now: T0
            },
            &edit
        )
        .await
        .unwrap(),
        QueuedChange::NotQueued
    );
    assert_eq!(
        s.delete_queued(&QueuedOp {
            chat: id,
            id: "m1",
            by: Some(&user("alice")),
            now: T0
        })
        .await
        .unwrap(),
        QueuedChange::NotQueued
    );
    assert_eq!(
        s.edit_queued(
            &QueuedOp {
                chat: id,
                id: "u0",
                by: Some(&user("alice")),
                now: T0
            },
            &edit
        )
        .await
        .unwrap(),
        QueuedChange::NotQueued
    );
}
