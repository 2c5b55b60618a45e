//! The store conformance suite: one set of tests every [`Store`] backend must pass.
//!
//! Each test takes the URL of a fresh, empty database and opens it through [`super::open`] (twice
//! where a test needs two handles, as two processes would). Backends run the whole suite with
//! [`crate::store_conformance_tests!`], the way matrix-sdk's `statestore_integration_tests!` works:
//!
//! ```ignore
//! mod sqlite {
//!     async fn fresh() -> Option<frogbot_testkit::TestDb> { Some(frogbot_testkit::sqlite_db()) }
//!     frogbot_core::store_conformance_tests!(fresh);
//! }
//! ```

#![allow(missing_docs, clippy::missing_panics_doc)]

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::model::{
    ChatId, Delivery, MessageMetadata, MessagePart, QuestionAnswer, QuestionInput, QuestionItem,
    QuestionMessage, QuestionOption, QuestionOutcome, QuestionOutput, QuestionRecord, Role,
    TurnState, UiMessage, UserId,
};

const T0: Millis = 1_800_000_000_000;
const TTL: Millis = 60_000;

async fn handle(url: &str) -> DynStore {
    super::open(url).await.expect("open store")
}

fn chat(id: &str) -> ChatId {
    ChatId::new(id).unwrap()
}

fn user(id: &str) -> UserId {
    UserId::new(id)
}

fn user_msg(id: &str, author: Option<&str>, text: &str) -> UiMessage {
    UiMessage {
        id: id.into(),
        role: Role::User,
        parts: vec![MessagePart::text(text)],
        metadata: MessageMetadata {
            author: author.map(user),
            created_at: crate::model::millis_to_iso(T0),
            ..Default::default()
        },
    }
}

fn assistant_msg(id: &str, text: &str) -> UiMessage {
    UiMessage {
        id: id.into(),
        role: Role::Assistant,
        parts: vec![MessagePart::text(text)],
        metadata: MessageMetadata::default(),
    }
}

fn lease_req(holder: &str, driver: Option<&str>, now: Millis) -> LeaseRequest {
    LeaseRequest {
        holder: holder.into(),
        driver: driver.map(user),
        ttl_ms: TTL,
        now,
    }
}

async fn new_chat(store: &dyn Store, id: &str, owner: Option<&str>) -> ChatId {
    let c = chat(id);
    store
        .create_chat(
            &NewChat {
                chat_id: c.clone(),
                owner: owner.map(user),
                channel: None,
            },
            T0,
        )
        .await
        .unwrap();
    c
}

fn question_input() -> QuestionInput {
    QuestionInput {
        questions: vec![QuestionItem {
            header: "Deploy".into(),
            question: "Ship it?".into(),
            options: vec![
                QuestionOption {
                    label: "yes".into(),
                    description: None,
                },
                QuestionOption {
                    label: "no".into(),
                    description: None,
                },
            ],
            multiple: false,
            custom: false,
            default: None,
        }],
        expires_in_seconds: None,
    }
}

fn answer(label: &str) -> QuestionOutcome {
    QuestionOutcome::Answered(QuestionOutput {
        answers: vec![QuestionAnswer {
            header: "Deploy".into(),
            selected: vec![label.into()],
        }],
    })
}

async fn new_question(store: &dyn Store, c: &ChatId, call: &str, now: Millis) {
    store
        .insert_questions(
            &[NewQuestion {
                tool_call_id: call.into(),
                chat_id: c.clone(),
                message_id: "a1".into(),
                call_index: 0,
                input: question_input(),
                answer_deadline: None,
            }],
            now,
        )
        .await
        .unwrap();
}

fn lost<T>(r: Result<T>) -> bool {
    matches!(r, Err(crate::Error::LeaseLost { .. }))
}

// ---- chats ---------------------------------------------------------------------------------------

pub async fn chat_first_creator_owns_it(url: &str) {
    let s = handle(url).await;
    let c = chat("owned");
    let (row, created) = s
        .create_chat(
            &NewChat {
                chat_id: c.clone(),
                owner: Some(user("alice")),
                channel: None,
            },
            T0,
        )
        .await
        .unwrap();
    assert!(created);
    assert_eq!(row.owner, Some(user("alice")));
    assert_eq!(row.state(T0), TurnState::Idle);
    // Another user does not get in: who writes a chat is decided on the row found.
    let bob = s
        .create_chat(
            &NewChat {
                chat_id: c.clone(),
                owner: Some(user("bob")),
                channel: None,
            },
            T0 + 1,
        )
        .await;
    assert!(matches!(bob, Err(crate::Error::Forbidden(_))), "{bob:?}");
    let (row, created) = s
        .create_chat(
            &NewChat {
                chat_id: c.clone(),
                owner: Some(user("alice")),
                channel: None,
            },
            T0 + 1,
        )
        .await
        .unwrap();
    assert!(!created, "a second create must not replace the chat");
    assert_eq!(row.owner, Some(user("alice")));
    // A channel message never lands in a web chat, nor a web message in a channel chat.
    let thread = Some(crate::model::ChannelRef {
        platform: "telegram".into(),
        thread: "42".into(),
    });
    let mismatch = s
        .create_chat(
            &NewChat {
                chat_id: c.clone(),
                owner: Some(user("alice")),
                channel: thread.clone(),
            },
            T0 + 2,
        )
        .await;
    assert!(
        matches!(mismatch, Err(crate::Error::ChannelChat(_))),
        "{mismatch:?}"
    );
    assert!(s.get_chat(&chat("missing")).await.unwrap().is_none());
}

pub async fn chat_list_is_per_owner_newest_first(url: &str) {
    let s = handle(url).await;
    let a = new_chat(&*s, "a", Some("alice")).await;
    new_chat(&*s, "b", Some("alice")).await;
    new_chat(&*s, "anon", None).await;
    new_chat(&*s, "bobs", Some("bob")).await;
    // Touch `a` so it becomes the newest.
    s.enqueue_message(
        &a,
        &user_msg("m1", Some("alice"), "hi"),
        Delivery::Queue,
        T0 + 10,
    )
    .await
    .unwrap();
    let alice: Vec<_> = s
        .list_chats(Some(&user("alice")), 100)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.chat_id.to_string())
        .collect();
    assert_eq!(alice, ["a", "b"]);
    let anon: Vec<_> = s
        .list_chats(None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.chat_id.to_string())
        .collect();
    assert_eq!(anon, ["anon"]);
}

pub async fn chat_channel_is_kept(url: &str) {
    let s = handle(url).await;
    let c = chat("slack-thread");
    let channel = crate::model::ChannelRef {
        platform: "slack".into(),
        thread: "C1:1.2".into(),
    };
    s.create_chat(
        &NewChat {
            chat_id: c.clone(),
            owner: None,
            channel: Some(channel.clone()),
        },
        T0,
    )
    .await
    .unwrap();
    assert_eq!(
        s.get_chat(&c).await.unwrap().unwrap().channel,
        Some(channel)
    );
}

// ---- turn leases ---------------------------------------------------------------------------------

pub async fn lease_sixteen_contenders_one_wins(url: &str) {
    let s = handle(url).await;
    let c = new_chat(&*s, "race", None).await;
    let mut tasks = Vec::new();
    for i in 0..16 {
        let s = Arc::clone(&s);
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            s.try_start_turn(&c, &lease_req(&format!("p{i}"), None, T0))
                .await
                .unwrap()
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        if let Some(l) = t.await.unwrap() {
            winners.push(l);
        }
    }
    assert_eq!(
        winners.len(),
        1,
        "exactly one of 16 contenders holds the lease"
    );
    let row = s.get_chat(&c).await.unwrap().unwrap();
    assert_eq!(row.state(T0), TurnState::Running);
    assert_eq!(row.lease.unwrap().holder, winners[0].holder);
}

pub async fn lease_past_expiry_is_taken_over(url: &str) {
    let s = handle(url).await;
    let c = new_chat(&*s, "expiry", None).await;
    let first = s
        .try_start_turn(&c, &lease_req("old", Some("alice"), T0))
        .await
        .unwrap()
        .unwrap();
    assert!(
        s.try_start_turn(&c, &lease_req("new", None, T0 + TTL - 1))
            .await
            .unwrap()
            .is_none(),
        "a live lease blocks a second turn"
    );
    let row = s.get_chat(&c).await.unwrap().unwrap();
    assert_eq!(
        row.state(T0 + TTL),
        TurnState::Idle,
        "an expired lease frees the chat"
    );
    let second = s
        .try_start_turn(&c, &lease_req("new", Some("bob"), T0 + TTL))
        .await
        .unwrap()
        .expect("a lease past its expiry can be taken over");
    assert!(
        second.token > first.token,
        "every take raises the fencing token"
    );
    assert_eq!(second.driver, Some(user("bob")));
}

pub async fn lease_renewal_keeps_the_chat(url: &str) {
    let s = handle(url).await;
    let c = new_chat(&*s, "renew", None).await;
    let mut l = s
        .try_start_turn(&c, &lease_req("p", None, T0))
        .await
        .unwrap()
        .unwrap();
    s.renew_lease(&mut l, TTL, T0 + TTL - 10).await.unwrap();
    assert_eq!(l.expires_at, T0 + 2 * TTL - 10);
    assert!(
        s.try_start_turn(&c, &lease_req("q", None, T0 + TTL + 5))
            .await
            .unwrap()
            .is_none(),
        "a renewed lease is still live past the first expiry"
    );
    assert_eq!(
        s.end_turn(&l, TurnEnd::Idle, T0 + TTL).await.unwrap(),
        EndTurn::Released
    );
    assert!(
        s.try_start_turn(&c, &lease_req("q", None, T0 + TTL + 5))
            .await
            .unwrap()
            .is_some()
    );
}

pub async fn lease_fenced_writes_refused_after_takeover(url: &str) {
    let s = handle(url).await;
    let c = new_chat(&*s, "fence", None).await;
    let mut old = s
        .try_start_turn(&c, &lease_req("old", None, T0))
        .await
        .unwrap()
        .unwrap();
    let start = s
        .save_turn_message(&old, &user_msg("u1", None, "hi"), Slot::TurnStart, None, T0)
        .await
        .unwrap();
    let position = start.position.unwrap();
    let new = s
        .try_start_turn(&c, &lease_req("new", None, T0 + TTL))
        .await
        .unwrap()
        .unwrap();
    assert!(lost(
        s.save_turn_message(
            &old,
            &assistant_msg("a1", "late"),
            Slot::Reply { position },
            None,
            T0 + TTL + 1
        )
        .await
    ));
    assert!(lost(s.renew_lease(&mut old, TTL, T0 + TTL + 1).await));
    assert!(lost(s.promote_next(&old, T0 + TTL + 1).await));
    assert!(lost(s.end_turn(&old, TurnEnd::Idle, T0 + TTL + 1).await));
    assert!(
        s.get_message(&c, "a1").await.unwrap().is_none(),
        "the fenced write changed nothing"
    );
    // The new holder writes fine.
    s.save_turn_message(
        &new,
        &assistant_msg("a1", "ok"),
        Slot::Reply { position },
        None,
        T0 + TTL + 1,
    )
    .await
    .unwrap();
    assert_eq!(
        s.get_chat(&c).await.unwrap().unwrap().lease.unwrap().holder,
        "new"
    );
}

pub async fn turn_start_with_message_is_all_or_nothing(url: &str) {
    let s = handle(url).await;
    let c = new_chat(&*s, "startwith", None).await;
    let (lease, first) = s
        .start_turn_with(
            &c,
            &lease_req("p", Some("alice"), T0),
            &user_msg("u1", Some("alice"), "go"),
        )
        .await
        .unwrap()
        .expect("an idle chat starts a turn");
    assert_eq!(first.position, Some(1));
    assert!(!first.queued);
    assert_eq!(lease.driver, Some(user("alice")));
    assert!(
        s.start_turn_with(
            &c,
            &lease_req("q", None, T0 + 1),
            &user_msg("u2", None, "no")
        )
        .await
        .unwrap()
        .is_none(),
        "a running chat starts nothing"
    );
    assert!(
        s.get_message(&c, "u2").await.unwrap().is_none(),
        "and saves nothing"
    );
    s.end_turn(&lease, TurnEnd::Idle, T0 + 2).await.unwrap();
    let (_, second) = s
        .start_turn_with(
            &c,
            &lease_req("r", None, T0 + 3),
            &user_msg("u3", None, "again"),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.position, Some(2), "each turn gets the next position");
}

pub async fn turn_awaiting_blocks_new_turns_until_resumed(url: &str) {
    let s = handle(url).await;
    let c = new_chat(&*s, "await", None).await;
    let l = s
        .try_start_turn(&c, &lease_req("p", Some("alice"), T0))
        .await
        .unwrap()
        .unwrap();
    let u = s
        .save_turn_message(
            &l,
            &user_msg("u1", Some("alice"), "ask"),
            Slot::TurnStart,
            None,
            T0,
        )
        .await
        .unwrap();
    // The checkpoint that asks a question marks the chat as waiting, atomically.
    s.save_turn_message(
        &l,
        &assistant_msg("a1", "?"),
        Slot::Reply {
            position: u.position.unwrap(),
        },
        Some("a1"),
        T0,
    )
    .await
    .unwrap();
    // Even if the process dies now, once the lease runs out the chat is awaiting, not idle.
    let row = s.get_chat(&c).await.unwrap().unwrap();
    assert_eq!(row.state(T0 + 1), TurnState::Running);
    assert_eq!(row.state(T0 + TTL), TurnState::Awaiting);
    assert!(
        s.try_start_turn(&c, &lease_req("q", None, T0 + TTL))
            .await
            .unwrap()
            .is_none(),
        "a waiting question blocks a new turn"
    );
    assert!(
        s.try_resume_turn(&c, "other", &lease_req("q", None, T0 + TTL))
            .await
            .unwrap()
            .is_none()
    );
    let r = s
        .try_resume_turn(&c, "a1", &lease_req("q", Some("bob"), T0 + TTL))
        .await
        .unwrap()
        .expect("resume the waiting turn");
    let row = s.get_chat(&c).await.unwrap().unwrap();
    assert_eq!(row.awaiting_message_id, None);
    assert_eq!(row.state(T0 + TTL), TurnState::Running);
    assert_eq!(
        s.end_turn(&r, TurnEnd::Awaiting("a1"), T0 + TTL)
            .await
            .unwrap(),
        EndTurn::Released
    );
    assert_eq!(
        s.get_chat(&c).await.unwrap().unwrap().state(T0 + TTL),
        TurnState::Awaiting
    );
    assert!(s.clear_awaiting(&c, "a1", T0 + TTL).await.unwrap());
    assert_eq!(
        s.get_chat(&c).await.unwrap().unwrap().state(T0 + TTL),
        TurnState::Idle
    );
}

// ---- messages and the queue ----------------------------------------------------------------------

pub async fn queue_is_oldest_first_across_two_handles(url: &str) {
    let a = handle(url).await;
    let b = handle(url).await;
    let c = new_chat(&*a, "queue", None).await;
    for i in 0..10 {
        let s = if i % 2 == 0 { &a } else { &b };
        s.enqueue_message(
            &c,
            &user_msg(&format!("q{i}"), None, "x"),
            Delivery::Queue,
            T0 + i,
        )
        .await
        .unwrap();
    }
    for s in [&a, &b] {
        let ids: Vec<_> = s
            .queued_messages(&c)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.message.id)
            .collect();
        assert_eq!(ids, (0..10).map(|i| format!("q{i}")).collect::<Vec<_>>());
    }
    // Promotion through either handle takes them oldest first.
    let l = b
        .try_start_turn(&c, &lease_req("p", None, T0 + 100))
        .await
        .unwrap()
        .unwrap();
    for i in 0..10 {
        let s = if i % 2 == 0 { &b } else { &a };
        let m = s.promote_next(&l, T0 + 100).await.unwrap().unwrap();
        assert_eq!(m.message.id, format!("q{i}"));
        assert!(!m.queued);
        assert_eq!(m.message.metadata.status, None);
    }
    assert!(a.promote_next(&l, T0 + 100).await.unwrap().is_none());
}

pub async fn queue_duplicate_message_id_is_refused(url: &str) {
    let s = handle(url).await;
    let c = new_chat(&*s, "dup", None).await;
    s.enqueue_message(&c, &user_msg("m", None, "x"), Delivery::Queue, T0)
        .await
        .unwrap();
    assert!(matches!(
        s.enqueue_message(&c, &user_msg("m", None, "y"), Delivery::Queue, T0)
            .await,
        Err(crate::Error::InvalidInput(_))
    ));
    assert_eq!(s.queued_messages(&c).await.unwrap()[0].message.text(), "x");
}

pub async fn queue_edit_and_delete_only_by_author_before_promotion(url: &str) {
    let s = handle(url).await;
    let c = new_chat(&*s, "edit", None).await;
    let m = s
        .enqueue_message(
            &c,
            &user_msg("m1", Some("alice"), "first"),
            Delivery::Queue,
            T0,
        )
        .await
        .unwrap();
    assert_eq!(
        m.message.metadata.status,
        Some(crate::model::MessageStatus::Queued)
    );
    s.enqueue_message(
        &c,
        &user_msg("m2", Some("alice"), "second"),
        Delivery::Queue,
        T0,
    )
    .await
    .unwrap();
    let edit = QueuedEdit {
        parts: Some(vec![MessagePart::text("edited")]),
        delivery: Some(Delivery::Steer),
    };
    assert_eq!(
        s.edit_queued(&c, "m1", Some(&user("bob")), &edit, T0)
            .await
            .unwrap(),
        QueuedChange::Forbidden
    );
    assert_eq!(
        s.edit_queued(&c, "m1", None, &edit, T0).await.unwrap(),
        QueuedChange::Forbidden
    );
    assert_eq!(
        s.edit_queued(&c, "nope", Some(&user("alice")), &edit, T0)
            .await
            .unwrap(),
        QueuedChange::NotFound
    );
    let QueuedChange::Done(Some(edited)) = s
        .edit_queued(&c, "m1", Some(&user("alice")), &edit, T0 + 1)
        .await
        .unwrap()
    else {
        panic!("the author may edit")
    };
    assert_eq!(edited.message.text(), "edited");
    assert_eq!(edited.delivery, Delivery::Steer);
    assert_eq!(
        s.delete_queued(&c, "m2", Some(&user("bob"))).await.unwrap(),
        QueuedChange::Forbidden
    );
    assert_eq!(
        s.delete_queued(&c, "m2", Some(&user("alice")))
            .await
            .unwrap(),
        QueuedChange::Done(None)
    );
    assert!(s.get_message(&c, "m2").await.unwrap().is_none());
    let l = s
        .try_start_turn(&c, &lease_req("p", Some("alice"), T0))
        .await
        .unwrap()
        .unwrap();
    s.promote_next(&l, T0).await.unwrap().unwrap();
    assert_eq!(
        s.edit_queued(&c, "m1", Some(&user("alice")), &edit, T0)
            .await
            .unwrap(),
        QueuedChange::NotQueued
    );
    assert_eq!(
        s.delete_queued(&c, "m1", Some(&user("alice")))
            .await
            .unwrap(),
        QueuedChange::NotQueued
    );
}

pub async fn messages_keep_turn_order_with_steers_and_queue(url: &str) {
    let s = handle(url).await;
    let c = new_chat(&*s, "order", None).await;
    let l = s
        .try_start_turn(&c, &lease_req("p", Some("alice"), T0))
        .await
        .unwrap()
        .unwrap();
    let u1 = s
        .save_turn_message(
            &l,
            &user_msg("u1", Some("alice"), "go"),
            Slot::TurnStart,
            None,
            T0,
        )
        .await
        .unwrap();
    let p1 = u1.position.unwrap();
    s.save_turn_message(
        &l,
        &assistant_msg("a1", "step 1"),
        Slot::Reply { position: p1 },
        None,
        T0,
    )
    .await
    .unwrap();
    // Arriving during the turn: a steer from the driver, a steer from someone else, a queued one.
    s.enqueue_message(
        &c,
        &user_msg("s1", Some("alice"), "faster"),
        Delivery::Steer,
        T0 + 1,
    )
    .await
    .unwrap();
    s.enqueue_message(
        &c,
        &user_msg("s2", Some("bob"), "mine"),
        Delivery::Steer,
        T0 + 2,
    )
    .await
    .unwrap();
    s.enqueue_message(
        &c,
        &user_msg("q1", Some("alice"), "later"),
        Delivery::Queue,
        T0 + 3,
    )
    .await
    .unwrap();
    let steers = s
        .take_steers(&l, Some(&user("alice")), p1, T0 + 4)
        .await
        .unwrap();
    assert_eq!(
        steers
            .iter()
            .map(|m| m.message.id.as_str())
            .collect::<Vec<_>>(),
        ["s1"],
        "only the driver's steers join"
    );
    s.save_turn_message(
        &l,
        &assistant_msg("a1", "step 2"),
        Slot::Reply { position: p1 },
        None,
        T0 + 5,
    )
    .await
    .unwrap();
    let ids: Vec<_> = s
        .list_messages(&c)
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.message.id, m.queued))
        .collect();
    assert_eq!(
        ids,
        [
            ("u1".to_string(), false),
            ("s1".to_string(), false),
            ("a1".to_string(), false),
            ("s2".to_string(), true),
            ("q1".to_string(), true),
        ],
        "a joined steer stands just before the reply; queued messages come last"
    );
    assert_eq!(
        s.get_message(&c, "a1")
            .await
            .unwrap()
            .unwrap()
            .message
            .text(),
        "step 2"
    );
    // Ending the turn with messages queued keeps the lease for the next turn.
    assert_eq!(
        s.end_turn(&l, TurnEnd::Idle, T0 + 6).await.unwrap(),
        EndTurn::QueuedPending
    );
    let next = s.promote_next(&l, T0 + 6).await.unwrap().unwrap();
    assert_eq!(
        next.message.id, "s2",
        "a steer that did not join runs as an ordinary queued message"
    );
    assert!(next.position.unwrap() > p1);
}

// ---- question records ----------------------------------------------------------------------------

pub async fn question_locked_updates_lose_nothing(url: &str) {
    let s = handle(url).await;
    let c = new_chat(&*s, "qlock", None).await;
    let now = crate::model::now_millis();
    new_question(&*s, &c, "call-1", now).await;
    let mut tasks = Vec::new();
    for i in 0..32 {
        let s = Arc::clone(&s);
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let lock = lock_question(&*s, &c, "call-1", &format!("w{i}"), 30_000, 30_000)
                .await
                .unwrap();
            let q = s
                .get_question(&c, "call-1", crate::model::now_millis())
                .await
                .unwrap()
                .unwrap();
            let mut seen = q.record.state.clone().unwrap_or(json!([]));
            seen.as_array_mut().unwrap().push(json!(i));
            // Give the other tasks every chance to interleave between the read and the write.
            tokio::task::yield_now().await;
            let record = QuestionRecord {
                messages: vec![QuestionMessage {
                    id: format!("m{i}"),
                    posted_at: String::new(),
                    question: None,
                }],
                revision: q.record.revision + 1,
                state: Some(seen),
            };
            s.update_question(
                &lock,
                &QuestionUpdate {
                    record: Some(record),
                    ..Default::default()
                },
                crate::model::now_millis(),
            )
            .await
            .unwrap();
            s.unlock_question(&lock).await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let q = s
        .get_question(&c, "call-1", crate::model::now_millis())
        .await
        .unwrap()
        .unwrap();
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
}

pub async fn question_lock_is_exclusive_and_fences_updates(url: &str) {
    let s = handle(url).await;
    let c = new_chat(&*s, "qfence", None).await;
    new_question(&*s, &c, "call-1", T0).await;
    let a = s
        .try_lock_question(&c, "call-1", "a", 1_000, T0)
        .await
        .unwrap()
        .unwrap();
    assert!(
        s.try_lock_question(&c, "call-1", "b", 1_000, T0 + 999)
            .await
            .unwrap()
            .is_none()
    );
    let b = s
        .try_lock_question(&c, "call-1", "b", 1_000, T0 + 1_000)
        .await
        .unwrap()
        .expect("a lock whose holder ran out of time can be taken");
    let upd = QuestionUpdate {
        posting: Some(true),
        ..Default::default()
    };
    assert!(matches!(
        s.update_question(&a, &upd, T0 + 1_001).await,
        Err(crate::Error::Locked(_))
    ));
    assert!(
        s.update_question(&b, &upd, T0 + 1_001)
            .await
            .unwrap()
            .posting
    );
    s.unlock_question(&a).await.unwrap(); // the old holder's unlock is a no-op
    assert!(
        s.try_lock_question(&c, "call-1", "c", 1_000, T0 + 1_002)
            .await
            .unwrap()
            .is_none()
    );
    s.unlock_question(&b).await.unwrap();
    assert!(
        s.try_lock_question(&c, "call-1", "c", 1_000, T0 + 1_002)
            .await
            .unwrap()
            .is_some()
    );
}

pub async fn question_past_ttl_is_gone(url: &str) {
    let s = handle(url).await;
    let c = new_chat(&*s, "qttl", None).await;
    new_question(&*s, &c, "call-1", T0).await;
    let q = s.get_question(&c, "call-1", T0).await.unwrap().unwrap();
    assert_eq!(q.expires_at, T0 + QUESTION_TTL_MS);
    assert_eq!(q.record.revision, 0);
    // A change pushes the expiry to 30 days after it.
    let later = T0 + QUESTION_TTL_MS / 2;
    let lock = s
        .try_lock_question(&c, "call-1", "w", 1_000, later)
        .await
        .unwrap()
        .unwrap();
    s.update_question(
        &lock,
        &QuestionUpdate {
            posting: Some(false),
            ..Default::default()
        },
        later,
    )
    .await
    .unwrap();
    s.unlock_question(&lock).await.unwrap();
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
    assert!(
        s.try_lock_question(&c, "call-1", "w", 1_000, gone)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        !s.record_outcome(&c, "call-1", &answer("yes"), None, gone)
            .await
            .unwrap()
    );
    assert_eq!(s.purge_expired(gone).await.unwrap(), 1);
}

pub async fn question_answered_lives_24_hours(url: &str) {
    let s = handle(url).await;
    let c = new_chat(&*s, "qans", None).await;
    new_question(&*s, &c, "call-1", T0).await;
    let at = T0 + 5_000;
    let actor = crate::model::Actor {
        user: Some(user("alice")),
        identity: None,
    };
    assert!(
        s.record_outcome(&c, "call-1", &answer("yes"), Some(&actor), at)
            .await
            .unwrap()
    );
    let q = s.get_question(&c, "call-1", at).await.unwrap().unwrap();
    assert_eq!(q.outcome, Some(answer("yes")));
    assert_eq!(q.actor, Some(actor));
    assert_eq!(q.outcome_at, Some(at));
    assert!(!q.closed);
    // A later change (settled's) does not extend the 24 hours.
    let lock = s
        .try_lock_question(&c, "call-1", "w", 1_000, at + 1)
        .await
        .unwrap()
        .unwrap();
    s.update_question(
        &lock,
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

pub async fn question_first_outcome_wins(url: &str) {
    let a = handle(url).await;
    let b = handle(url).await;
    let c = new_chat(&*a, "qfirst", None).await;
    new_question(&*a, &c, "call-1", T0).await;
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
            let won = s
                .record_outcome(&c, "call-1", &outcome, None, T0 + 1)
                .await
                .unwrap();
            won.then_some(outcome)
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        if let Some(o) = t.await.unwrap() {
            winners.push(o);
        }
    }
    assert_eq!(winners.len(), 1, "exactly one outcome is recorded");
    let q = b.get_question(&c, "call-1", T0 + 2).await.unwrap().unwrap();
    assert_eq!(q.outcome.as_ref(), Some(&winners[0]));
}

pub async fn question_message_links_outlive_the_message_list(url: &str) {
    let s = handle(url).await;
    let c = new_chat(&*s, "qlink", None).await;
    new_question(&*s, &c, "call-1", T0).await;
    new_question(&*s, &c, "call-2", T0).await;
    for m in ["m1", "m2"] {
        s.link_question_message("forum", m, &c, "call-1")
            .await
            .unwrap();
    }
    s.link_question_message("forum", "m2", &c, "call-2")
        .await
        .unwrap();
    s.link_question_message("forum", "m2", &c, "call-2")
        .await
        .unwrap(); // idempotent
    let changed = T0 + 1_000;
    let lock = s
        .try_lock_question(&c, "call-1", "w", 1_000, changed)
        .await
        .unwrap()
        .unwrap();
    // An empty message list is refused.
    let empty = QuestionRecord {
        messages: vec![],
        revision: 1,
        state: None,
    };
    assert!(matches!(
        s.update_question(
            &lock,
            &QuestionUpdate {
                record: Some(empty),
                ..Default::default()
            },
            changed
        )
        .await,
        Err(crate::Error::InvalidInput(_))
    ));
    // m1 leaves the record's messages.
    let record = QuestionRecord {
        messages: vec![QuestionMessage {
            id: "m2".into(),
            posted_at: String::new(),
            question: None,
        }],
        revision: 1,
        state: None,
    };
    s.update_question(
        &lock,
        &QuestionUpdate {
            record: Some(record),
            rendered: Some(true),
            ..Default::default()
        },
        changed,
    )
    .await
    .unwrap();
    let found = s
        .find_questions_by_message("forum", "m1", changed)
        .await
        .unwrap();
    assert_eq!(
        found,
        [(c.clone(), "call-1".to_string())],
        "m1 left `messages` but still leads to its call"
    );
    let found = s
        .find_questions_by_message("forum", "m2", changed)
        .await
        .unwrap();
    assert_eq!(found.len(), 2);
    assert!(
        s.find_questions_by_message("other", "m1", changed)
            .await
            .unwrap()
            .is_empty()
    );
    // call-2 expires first (no change since T0); call-1 30 days after its change.
    let first = T0 + QUESTION_TTL_MS;
    assert_eq!(
        s.find_questions_by_message("forum", "m2", first)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(s.purge_expired(first).await.unwrap(), 1);
    assert_eq!(
        s.find_questions_by_message("forum", "m1", first)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        s.find_questions_by_message("forum", "m1", changed + QUESTION_TTL_MS)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn question_records_of_a_message_in_call_order(url: &str) {
    let s = handle(url).await;
    let c = new_chat(&*s, "qorder", None).await;
    let rows: Vec<_> = (0..3)
        .rev()
        .map(|i| NewQuestion {
            tool_call_id: format!("call-{i}"),
            chat_id: c.clone(),
            message_id: "a1".into(),
            call_index: i,
            input: question_input(),
            answer_deadline: Some(T0 + 10),
        })
        .collect();
    s.insert_questions(&rows, T0).await.unwrap();
    s.insert_questions(&rows, T0).await.unwrap(); // existing ids are left alone
    let got = s.questions_of_message(&c, "a1", T0).await.unwrap();
    assert_eq!(
        got.iter()
            .map(|q| q.tool_call_id.as_str())
            .collect::<Vec<_>>(),
        ["call-0", "call-1", "call-2"]
    );
    assert_eq!(got[0].input, question_input());
    assert_eq!(got[0].answer_deadline, Some(T0 + 10));
    assert!(!got[0].rendered && !got[0].posting && got[0].outcome.is_none());
}

// ---- durable jobs --------------------------------------------------------------------------------

fn job(kind: &str, key: Option<&str>, run_at: Millis) -> NewJob {
    NewJob {
        kind: kind.into(),
        key: key.map(Into::into),
        payload: json!({"kind": kind}),
        run_at,
    }
}

pub async fn job_is_claimed_by_one_worker(url: &str) {
    let a = handle(url).await;
    let b = handle(url).await;
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
    assert_eq!(again.attempts, 2);
    assert!(
        !a.complete_job(&claimed[0]).await.unwrap(),
        "the first claim was lost"
    );
    assert!(a.complete_job(&again).await.unwrap());
    assert!(a.get_job(id).await.unwrap().is_none());
}

pub async fn job_is_retried_at_its_run_at_time(url: &str) {
    let s = handle(url).await;
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
    assert!(s.get_job(id).await.unwrap().unwrap().dead);
}

pub async fn job_key_reschedules_and_revives(url: &str) {
    let s = handle(url).await;
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
    assert_eq!(s.get_job(id).await.unwrap().unwrap().run_at, T0 + 100);
    // Re-enqueued while running: completing that run keeps the job scheduled.
    let j = s.claim_job("w", 1_000, T0 + 100).await.unwrap().unwrap();
    s.enqueue_job(&job("updated", Some("q:1"), T0 + 200))
        .await
        .unwrap();
    assert!(s.complete_job(&j).await.unwrap());
    let j = s
        .claim_job("w", 1_000, T0 + 200)
        .await
        .unwrap()
        .expect("still scheduled");
    assert!(s.bury_job(&j, "out of retries").await.unwrap());
    assert!(s.get_job(id).await.unwrap().unwrap().dead);
    // Enqueued again by key, a dead job comes back with its attempts reset.
    s.enqueue_job(&job("updated", Some("q:1"), T0 + 300))
        .await
        .unwrap();
    let j = s
        .claim_job("w", 1_000, T0 + 300)
        .await
        .unwrap()
        .expect("revived");
    assert_eq!(j.attempts, 1);
}

pub async fn job_survives_reopening_the_store(url: &str) {
    let id = {
        let s = handle(url).await;
        let id = s
            .enqueue_job(&job("updated", Some("k"), T0 + 5_000))
            .await
            .unwrap();
        let j = s.claim_job("w", 1_000, T0 + 5_000).await.unwrap().unwrap();
        s.retry_job(&j, T0 + 10_000, "later").await.unwrap();
        id
    };
    let s = handle(url).await;
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

/// Runs the whole conformance suite as `#[tokio::test]`s, one per rule, against the databases the
/// given `async fn() -> Option<frogbot_testkit::TestDb>` hands out (`None`: skip).
#[macro_export]
macro_rules! store_conformance_tests {
    ($fresh:path) => {
        $crate::store_conformance_tests!(@tests $fresh;
            chat_first_creator_owns_it,
            chat_list_is_per_owner_newest_first,
            chat_channel_is_kept,
            lease_sixteen_contenders_one_wins,
            lease_past_expiry_is_taken_over,
            lease_renewal_keeps_the_chat,
            lease_fenced_writes_refused_after_takeover,
            turn_awaiting_blocks_new_turns_until_resumed,
            turn_start_with_message_is_all_or_nothing,
            queue_is_oldest_first_across_two_handles,
            queue_duplicate_message_id_is_refused,
            queue_edit_and_delete_only_by_author_before_promotion,
            messages_keep_turn_order_with_steers_and_queue,
            question_locked_updates_lose_nothing,
            question_lock_is_exclusive_and_fences_updates,
            question_past_ttl_is_gone,
            question_answered_lives_24_hours,
            question_first_outcome_wins,
            question_message_links_outlive_the_message_list,
            question_records_of_a_message_in_call_order,
            job_is_claimed_by_one_worker,
            job_is_retried_at_its_run_at_time,
            job_key_reschedules_and_revives,
            job_survives_reopening_the_store,
        );
    };
    (@tests $fresh:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let Some(db) = $fresh().await else { return };
                $crate::store::conformance::$name(&db.url).await;
            }
        )*
    };
}
