//! Chats and who writes them: a chat is created by its first message and owned by its sender,
//! listed per owner, found by its channel thread; `send` checks the writer on the row it created
//! or found; a chat's messages read back in stored order, and by version.

use frogbot_core::model::{ChatId, Delivery, MessagePart, TurnState};
use frogbot_core::store::*;

use crate::Db;
use crate::support::*;

// ---- chats and who writes them -------------------------------------------------------------------

pub async fn chat_created_by_first_send_and_owned_by_its_sender(db: Db) {
    let s = &*db.store;
    let c = web("owned", Some("alice"));
    assert!(s.get_chat(&c.chat_id).await.unwrap().is_none());
    let sent = send_as(
        s,
        &c,
        &user_msg("u1", Some("alice"), "hi"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await
    .unwrap();
    let Sent::Started {
        chat,
        created,
        prior_version,
        lease,
        message,
        interrupted,
    } = sent
    else {
        panic!("the first message starts a turn: {sent:?}")
    };
    assert!(created);
    assert_eq!(prior_version, 0);
    assert_eq!(chat.owner, Some(user("alice")));
    assert_eq!(chat.created_at, T0);
    assert_eq!(chat.state(T0), TurnState::Running);
    assert_eq!(lease.driver, Some(user("alice")));
    assert!(!lease.taken_over);
    assert!(interrupted.is_none());
    assert_eq!(message.position, Some(1));
    assert_eq!(message.sub, 0);
    assert!(!message.queued);
    assert_eq!(message.message.metadata.status, None);
    // Sending again does not create it again, and keeps its owner.
    let (m, _) = enqueue(s, &c, "u2", Some("alice"), Delivery::Queue, T0 + 1).await;
    assert!(m.queued);
    let row = chat_row(s, &c).await;
    assert_eq!(row.owner, Some(user("alice")));
    assert_eq!(row.created_at, T0);
    assert!(
        s.get_chat(&ChatId::new("missing").unwrap())
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn chat_list_is_per_owner_newest_first(db: Db) {
    let s = &*db.store;
    let a = web("a", Some("alice"));
    start(s, &a, "a1", Some("alice"), T0).await;
    start(s, &web("b", Some("alice")), "b1", Some("alice"), T0 + 1).await;
    start(s, &web("anon", None), "n1", None, T0 + 2).await;
    start(s, &web("bobs", Some("bob")), "o1", Some("bob"), T0 + 3).await;
    // A message for `a` makes it the newest.
    enqueue(s, &a, "a2", Some("alice"), Delivery::Queue, T0 + 10).await;
    let names = |rows: Vec<ChatRow>| -> Vec<String> {
        rows.into_iter().map(|c| c.chat_id.to_string()).collect()
    };
    assert_eq!(
        names(s.list_chats(Some(&user("alice")), 100).await.unwrap()),
        ["a", "b"]
    );
    assert_eq!(
        names(s.list_chats(Some(&user("alice")), 1).await.unwrap()),
        ["a"]
    );
    assert_eq!(names(s.list_chats(None, 100).await.unwrap()), ["anon"]);
}

pub async fn chat_channel_is_kept_and_found_by_thread(db: Db) {
    let s = &*db.store;
    let c = in_thread("_slack-thread", Some("alice"), "C1:1.2");
    start(s, &c, "u1", Some("alice"), T0).await;
    let row = chat_row(s, &c).await;
    assert_eq!(row.channel, Some(thread_ref("C1:1.2")));
    assert_eq!(
        s.get_channel_chat("forum", "C1:1.2")
            .await
            .unwrap()
            .map(|r| r.chat_id),
        Some(c.chat_id.clone())
    );
    assert!(
        s.get_channel_chat("forum", "C1:9.9")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        s.get_channel_chat("other", "C1:1.2")
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn send_checks_who_writes_a_chat(db: Db) {
    let s = &*db.store;
    let msg = |id: &str, author: &str| user_msg(id, Some(author), "x");
    // An owned web chat: its owner only.
    let owned = web("owned", Some("alice"));
    start(s, &owned, "o1", Some("alice"), T0).await;
    let r = send_as(
        s,
        &web("owned", Some("bob")),
        &msg("o2", "bob"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await;
    assert!(matches!(r, Err(StoreError::Forbidden { .. })), "{r:?}");
    let r = send_as(
        s,
        &web("owned", None),
        &user_msg("o3", None, "x"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await;
    assert!(
        matches!(r, Err(StoreError::Forbidden { .. })),
        "an anonymous writer: {r:?}"
    );
    // A web chat written from a channel, and the other way round, and another thread.
    let r = send_as(
        s,
        &in_thread("owned", Some("alice"), "t1"),
        &msg("o4", "alice"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await;
    assert!(matches!(r, Err(StoreError::ChannelChat { .. })), "{r:?}");
    let chan = in_thread("_chan", Some("alice"), "t1");
    start(s, &chan, "c1", Some("alice"), T0).await;
    let r = send_as(
        s,
        &web("_chan", Some("alice")),
        &msg("c2", "alice"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await;
    assert!(matches!(r, Err(StoreError::ChannelChat { .. })), "{r:?}");
    let r = send_as(
        s,
        &in_thread("_chan", Some("alice"), "t2"),
        &msg("c3", "alice"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await;
    assert!(matches!(r, Err(StoreError::ChannelChat { .. })), "{r:?}");
    // Refused sends saved nothing.
    for (chat, id) in [
        (&owned, "o2"),
        (&owned, "o3"),
        (&owned, "o4"),
        (&chan, "c2"),
        (&chan, "c3"),
    ] {
        assert!(
            s.get_message(&chat.chat_id, id).await.unwrap().is_none(),
            "{id} was saved"
        );
    }
    assert_eq!(s.list_messages(&owned.chat_id).await.unwrap().len(), 1);
    // A channel chat is written by everyone in its thread.
    let (m, _) = enqueue(
        s,
        &in_thread("_chan", Some("bob"), "t1"),
        "c4",
        Some("bob"),
        Delivery::Queue,
        T0,
    )
    .await;
    assert_eq!(m.author(), Some(&user("bob")));
    assert_eq!(chat_row(s, &chan).await.owner, Some(user("alice")));
    // An ownerless web chat by anyone.
    let anon = web("anon", None);
    start(s, &anon, "n1", None, T0).await;
    enqueue(
        s,
        &web("anon", Some("bob")),
        "n2",
        Some("bob"),
        Delivery::Queue,
        T0,
    )
    .await;
    enqueue(
        s,
        &web("anon", Some("carol")),
        "n3",
        Some("carol"),
        Delivery::Queue,
        T0,
    )
    .await;
    assert_eq!(s.queued_messages(&anon.chat_id).await.unwrap().len(), 2);
    assert_eq!(chat_row(s, &anon).await.owner, None);
}

// ---- messages ------------------------------------------------------------------------------------

pub async fn messages_keep_turn_order_with_steers_and_queue(db: Db) {
    let s = &*db.store;
    let c = in_thread("_order", Some("alice"), "t");
    let (l, u1) = start(s, &c, "u1", Some("alice"), T0).await;
    let p1 = u1.position.unwrap();
    checkpoint(s, &l, &assistant_msg("a1", "step 1"), p1, false, T0)
        .await
        .unwrap();
    // Arriving during the turn: a steer from the driver, a steer from someone else, a queued one.
    enqueue(s, &c, "s1", Some("alice"), Delivery::Steer, T0 + 1).await;
    enqueue(s, &c, "s2", Some("bob"), Delivery::Steer, T0 + 2).await;
    enqueue(s, &c, "q1", Some("alice"), Delivery::Queue, T0 + 3).await;
    let done = checkpoint(s, &l, &assistant_msg("a1", "step 2"), p1, true, T0 + 4)
        .await
        .unwrap();
    assert_eq!(ids(&done.steers), ["s1"], "only the driver's steers join");
    let listed: Vec<_> = s
        .list_messages(&c.chat_id)
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.message.id, m.queued))
        .collect();
    assert_eq!(
        listed,
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
        s.get_message(&c.chat_id, "a1")
            .await
            .unwrap()
            .unwrap()
            .message
            .text(),
        "step 2"
    );
    let TurnEnded::Promoted { next, .. } = end_next(s, &l, T0 + 6).await.unwrap() else {
        panic!("messages are queued")
    };
    assert_eq!(
        next.message.id, "s2",
        "a steer that did not join runs as an ordinary queued message"
    );
    assert!(next.position.unwrap() > p1);
    let sorted = {
        let mut v = s.list_messages(&c.chat_id).await.unwrap();
        v.sort_by_key(StoredMessage::order_key);
        ids(&v)
    };
    assert_eq!(
        ids(&s.list_messages(&c.chat_id).await.unwrap()),
        sorted,
        "listed in order_key order"
    );
}

pub async fn messages_since_follows_versions(db: Db) {
    let s = &*db.store;
    let c = web("since", None);
    let empty = s.messages_since(&c.chat_id, 0).await.unwrap();
    assert_eq!(
        (empty.version, empty.messages.len()),
        (0, 0),
        "no chat: version 0"
    );
    let sent = send_as(s, &c, &user_msg("u1", None, "x"), Delivery::Queue, "p", T0)
        .await
        .unwrap();
    let Sent::Started {
        chat,
        prior_version,
        lease,
        message,
        ..
    } = sent
    else {
        panic!()
    };
    assert_eq!(prior_version, 0);
    assert!(chat.version > 0);
    assert_eq!(
        message.version, chat.version,
        "a message keeps the version of its write"
    );
    let v1 = chat.version;
    let all = s.messages_since(&c.chat_id, 0).await.unwrap();
    assert_eq!(
        (all.version, ids(&all.messages)),
        (v1, vec!["u1".to_string()])
    );
    assert!(
        s.messages_since(&c.chat_id, v1)
            .await
            .unwrap()
            .messages
            .is_empty()
    );
    // A checkpoint: only the reply is new.
    let done = checkpoint(s, &lease, &assistant_msg("a1", "one"), 1, false, T0 + 1)
        .await
        .unwrap();
    let ch = s.messages_since(&c.chat_id, v1).await.unwrap();
    assert!(ch.version > v1);
    assert_eq!(ids(&ch.messages), ["a1"]);
    assert_eq!(done.reply.version, ch.version);
    let v2 = ch.version;
    // Rewriting the reply moves it past the version again.
    checkpoint(s, &lease, &assistant_msg("a1", "two"), 1, false, T0 + 2)
        .await
        .unwrap();
    let ch = s.messages_since(&c.chat_id, v2).await.unwrap();
    assert_eq!(
        (ids(&ch.messages), ch.messages[0].message.text()),
        (vec!["a1".to_string()], "two".to_string())
    );
    let v3 = ch.version;
    // Queued, edited, deleted.
    let (q1, _) = enqueue(s, &c, "q1", None, Delivery::Queue, T0 + 3).await;
    assert!(q1.version > v3);
    let ch = s.messages_since(&c.chat_id, v3).await.unwrap();
    assert_eq!(ids(&ch.messages), ["q1"]);
    assert!(ch.messages[0].queued);
    let v4 = ch.version;
    s.edit_queued(
        &QueuedOp {
            chat: &c.chat_id,
            id: "q1",
            by: None,
            now: T0 + 4,
        },
        &QueuedEdit {
            parts: Some(vec![MessagePart::text("e")]),
            delivery: None,
        },
    )
    .await
    .unwrap();
    let ch = s.messages_since(&c.chat_id, v4).await.unwrap();
    assert_eq!(ids(&ch.messages), ["q1"]);
    assert_eq!(ch.messages[0].message.text(), "e");
    let v5 = ch.version;
    enqueue(s, &c, "q2", None, Delivery::Queue, T0 + 5).await;
    let v6 = s.messages_since(&c.chat_id, v5).await.unwrap().version;
    assert_eq!(
        s.delete_queued(&QueuedOp {
            chat: &c.chat_id,
            id: "q2",
            by: None,
            now: T0 + 6
        })
        .await
        .unwrap(),
        QueuedChange::Done(None)
    );
    let ch = s.messages_since(&c.chat_id, v6).await.unwrap();
    assert!(ch.version > v6, "a delete raises the chat's version");
    assert!(ch.messages.is_empty());
    let v7 = ch.version;
    // A promotion and a steer join are writes too.
    let TurnEnded::Promoted { lease, next, .. } = end_next(s, &lease, T0 + 7).await.unwrap() else {
        panic!()
    };
    let ch = s.messages_since(&c.chat_id, v7).await.unwrap();
    assert_eq!(ids(&ch.messages), ["q1"]);
    assert!(!ch.messages[0].queued);
    assert_eq!(ch.messages[0].version, ch.version);
    let v8 = ch.version;
    enqueue(s, &c, "s1", None, Delivery::Steer, T0 + 8).await;
    let done = checkpoint(
        s,
        &lease,
        &assistant_msg("a2", "x"),
        next.position.unwrap(),
        true,
        T0 + 9,
    )
    .await
    .unwrap();
    assert_eq!(ids(&done.steers), ["s1"]);
    let ch = s.messages_since(&c.chat_id, v8).await.unwrap();
    assert_eq!(
        ids(&ch.messages),
        ["s1", "a2"],
        "the joined steer and the reply, in stored order"
    );
    assert_eq!(chat_row(s, &c).await.version, ch.version);
    // Versions are per chat.
    start(s, &web("other", None), "o1", None, T0).await;
    assert_eq!(
        s.messages_since(&c.chat_id, ch.version)
            .await
            .unwrap()
            .messages
            .len(),
        0
    );
}
