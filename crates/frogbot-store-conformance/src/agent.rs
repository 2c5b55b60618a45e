//! Agent chats (an external agent's conversation): `bind_agent`, `post_message`,
//! `update_message`, `take_inbox`.

use frogbot_core::model::{Ack, ChatId, Delivery, UserId};
use frogbot_core::store::*;

use crate::Db;
use crate::support::*;

/// A chat is bound to one agent: created bound, bound later, never taken by another agent; the
/// writer rules of `send` hold (a channel chat only from its thread, an owned chat by its owner);
/// `send` starts no turn in a bound chat (`AgentChat`).
pub async fn agent_chats_bind_once_and_keep_the_writer_rules(db: Db) {
    let s = &*db.store;
    let c = web("agent-1", Some("alice"));
    let bind_op = |chat: &NewChat, agent: &str, existing, now| {
        let chat = chat.clone();
        let agent = agent.to_owned();
        async move {
            s.bind_agent(&BindAgentOp {
                chat: &chat,
                agent: &agent,
                existing,
                now,
            })
            .await
        }
    };
    let bind = |chat: &NewChat, agent: &str, now| bind_op(chat, agent, true, now);
    let Bound::Bound(row) = bind(&c, "alice", T0).await.unwrap() else {
        panic!("a new chat is bound")
    };
    assert_eq!(row.agent.as_deref(), Some("alice"));
    assert_eq!(row.owner.as_ref().map(UserId::as_str), Some("alice"));
    assert!(matches!(
        bind(&c, "alice", T0 + 1).await.unwrap(),
        Bound::Bound(_)
    ));
    // bob may not write alice's chat at all.
    let as_bob = web("agent-1", Some("bob"));
    assert!(matches!(
        bind(&as_bob, "bob", T0 + 2).await,
        Err(StoreError::Forbidden { .. })
    ));
    // A chat that had turns is bound later; another agent then finds it taken.
    let t = in_thread("_p-agent", None, "T-agent");
    start(s, &t, "u1", None, T0).await;
    assert_eq!(chat_row(s, &t).await.agent, None);
    // An agent opening a conversation never binds a person's existing chat (`existing: false`).
    assert!(
        matches!(bind_op(&t, "mallory", false, T0 + 3).await.unwrap(), Bound::Other(r) if r.agent.is_none())
    );
    assert_eq!(chat_row(s, &t).await.agent, None);
    // A chat it creates, or one bound to it already, it does.
    let fresh = web("agent-fresh", Some("dora"));
    assert!(matches!(
        bind_op(&fresh, "dora", false, T0 + 3).await.unwrap(),
        Bound::Bound(_)
    ));
    assert!(matches!(
        bind_op(&fresh, "dora", false, T0 + 3).await.unwrap(),
        Bound::Bound(_)
    ));
    assert!(
        matches!(bind(&t, "", T0 + 3).await.unwrap(), Bound::Bound(r) if r.agent.as_deref() == Some(""))
    );
    assert!(
        matches!(bind(&t, "carol", T0 + 4).await.unwrap(), Bound::Other(r) if r.agent.as_deref() == Some(""))
    );
    // A bound chat runs no turn: `send` refuses, whoever writes (its owner, its thread), and
    // changes nothing — a person's message goes to the agent's inbox instead.
    for (chat, author) in [(&c, Some("alice")), (&t, None)] {
        let before = chat_row(s, chat).await;
        let sent = send_as(
            s,
            chat,
            &user_msg("to-a-bound-chat", author, "hi"),
            Delivery::Queue,
            "turn-bound",
            T0 + 5,
        )
        .await;
        assert!(
            matches!(&sent, Err(StoreError::AgentChat { chat_id }) if *chat_id == chat.chat_id),
            "{sent:?}"
        );
        assert_eq!(chat_row(s, chat).await, before);
        assert_eq!(
            s.get_message(&chat.chat_id, "to-a-bound-chat")
                .await
                .unwrap(),
            None
        );
    }
    // …but its agent's asks run there (the ask model's turns).
    let mut ask = user_msg("an-ask", Some("alice"), "deploy?");
    ask.metadata.model = Some(ASK_MODEL.into());
    let sent = send_as(s, &c, &ask, Delivery::Queue, "turn-ask", T0 + 6).await;
    assert!(matches!(sent, Ok(Sent::Started { .. })), "{sent:?}");
    // The thread's chat under another id is refused.
    let wrong = in_thread("_p-agent-2", None, "T-agent");
    assert!(matches!(
        bind(&wrong, "", T0 + 5).await,
        Err(StoreError::ChannelChat { .. })
    ));
    assert_eq!(s.get_chat(&wrong.chat_id).await.unwrap(), None);
}

/// Posted messages go at the chat's end whatever the turn state, raise the version, carry their
/// job, and a repeated id changes nothing.
pub async fn agent_messages_append_outside_turns_and_dedup(db: Db) {
    let s = &*db.store;
    let c = web("agent-post", Some("alice"));
    // A running turn (its lease held) is left alone.
    let (lease, _) = start(s, &c, "u1", Some("alice"), T0).await;
    let before = chat_row(s, &c).await;
    let msg = assistant_msg("a-post", "hello from outside");
    let job = job("sync", Some("sync:agent-post:a-post"), T0 + 1_000);
    let op = PostMessageOp {
        chat: &c.chat_id,
        message: &msg,
        inbox: false,
        job: Some(&job),
        now: T0 + 1,
    };
    let PostedMessage::New(saved) = s.post_message(&op).await.unwrap() else {
        panic!("new")
    };
    assert!(saved.version > before.version);
    assert_eq!(saved.message.text(), "hello from outside");
    let after = chat_row(s, &c).await;
    assert_eq!(
        after.lease.as_ref().map(|l| l.token),
        before.lease.as_ref().map(|l| l.token)
    );
    assert!(matches!(
        s.post_message(&op).await.unwrap(),
        PostedMessage::Duplicate(m) if m.seq == saved.seq
    ));
    assert_eq!(
        s.live_jobs(10).await.unwrap().len(),
        1,
        "one job, written once"
    );
    // The turn still ends, and its reply stays before the posted message.
    let (_, u1) = (0, s.get_message(&c.chat_id, "u1").await.unwrap().unwrap());
    checkpoint(
        s,
        &lease,
        &assistant_msg("r1", "reply"),
        u1.position.unwrap(),
        false,
        T0 + 2,
    )
    .await
    .unwrap();
    end_next(s, &lease, T0 + 3).await.unwrap();
    let all = s.list_messages(&c.chat_id).await.unwrap();
    assert_eq!(ids(&all), ["u1", "r1", "a-post"]);
    // No chat: not found, nothing written.
    let ghost = ChatId::new("agent-ghost").unwrap();
    let op = PostMessageOp {
        chat: &ghost,
        message: &msg,
        inbox: false,
        job: None,
        now: T0,
    };
    assert!(matches!(
        s.post_message(&op).await,
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(s.get_chat(&ghost).await.unwrap(), None);
}

/// An update lands only on the version read; the loser is told what is there now.
pub async fn agent_message_updates_are_fenced_by_version(db: Db) {
    let s = &*db.store;
    let c = web("agent-edit", Some("alice"));
    s.bind_agent(&BindAgentOp {
        chat: &c,
        agent: "alice",
        existing: false,
        now: T0,
    })
    .await
    .unwrap();
    let msg = assistant_msg("a1", "v1");
    let PostedMessage::New(v1) = s
        .post_message(&PostMessageOp {
            chat: &c.chat_id,
            message: &msg,
            inbox: false,
            job: None,
            now: T0,
        })
        .await
        .unwrap()
    else {
        panic!("new")
    };
    let edit = |text: &str| assistant_msg("a1", text);
    let (e2, e3) = (edit("v2"), edit("v3"));
    let op2 = UpdateMessageOp {
        chat: &c.chat_id,
        message: &e2,
        expected_version: v1.version,
        job: None,
        now: T0 + 1,
    };
    let op3 = UpdateMessageOp {
        message: &e3,
        ..op2.clone()
    };
    let (a, b) = tokio::join!(s.update_message(&op2), s.update_message(&op3));
    let (a, b) = (a.unwrap(), b.unwrap());
    let won: Vec<_> = [&a, &b]
        .into_iter()
        .filter_map(|r| match r {
            MessageUpdate::Done(m) => Some(m.message.text()),
            MessageUpdate::Moved(_) => None,
        })
        .collect();
    assert_eq!(
        won.len(),
        1,
        "exactly one of two racing edits lands: {a:?} {b:?}"
    );
    let now = s.get_message(&c.chat_id, "a1").await.unwrap().unwrap();
    assert_eq!(now.message.text(), won[0]);
    assert!(now.version > v1.version);
    // The loser sees the message as it is now.
    let lost_one = if matches!(a, MessageUpdate::Moved(_)) {
        a
    } else {
        b
    };
    assert!(matches!(lost_one, MessageUpdate::Moved(Some(m)) if m.version == now.version));
    // A message that is not there: moved, nothing written.
    let ghost = assistant_msg("nope", "x");
    assert!(matches!(
        s.update_message(&UpdateMessageOp {
            chat: &c.chat_id,
            message: &ghost,
            expected_version: now.version,
            job: None,
            now: T0 + 2,
        })
        .await
        .unwrap(),
        MessageUpdate::Moved(None)
    ));
    assert!(s.get_message(&c.chat_id, "nope").await.unwrap().is_none());
}

/// The inbox holds a bound chat's inbox messages for its agent only; taking them marks them
/// Seen, raises the chat's version, and two racing readers never both get one.
pub async fn inbox_is_taken_once_marked_seen_per_agent(db: Db) {
    let s = &*db.store;
    let mut chats = Vec::new();
    for (id, agent) in [
        ("agent-in-a", "alice"),
        ("agent-in-b", "alice"),
        ("agent-in-c", "bob"),
    ] {
        let c = web(id, Some(agent));
        s.bind_agent(&BindAgentOp {
            chat: &c,
            agent,
            existing: false,
            now: T0,
        })
        .await
        .unwrap();
        chats.push(c);
    }
    let mut n = 0;
    for round in 0..5 {
        for c in &chats {
            n += 1;
            let m = user_msg(&format!("p{n}"), None, &format!("hi {round}"));
            s.post_message(&PostMessageOp {
                chat: &c.chat_id,
                message: &m,
                inbox: true,
                job: None,
                now: T0 + n,
            })
            .await
            .unwrap();
        }
    }
    // The agent's own messages are not in its inbox.
    s.post_message(&PostMessageOp {
        chat: &chats[0].chat_id,
        message: &assistant_msg("mine", "x"),
        inbox: false,
        job: None,
        now: T0 + 100,
    })
    .await
    .unwrap();
    let version_before = chat_row(s, &chats[0]).await.version;
    let take = |agent: &'static str, chat: Option<ChatId>, limit: u32| async move {
        s.take_inbox(&InboxOp {
            agent,
            chat: chat.as_ref(),
            limit,
            now: T0 + 200,
        })
        .await
        .unwrap()
    };
    let only_b = take("alice", Some(chats[1].chat_id.clone()), 2).await;
    assert_eq!(
        ids(&only_b),
        ["p2", "p5"],
        "oldest first, one chat, the limit"
    );
    assert!(
        only_b
            .iter()
            .all(|m| m.message.metadata.ack == Some(Ack::Seen))
    );
    let other = db.second_handle().await;
    let (x, y) = tokio::join!(
        other.take_inbox(&InboxOp {
            agent: "alice",
            chat: None,
            limit: 100,
            now: T0 + 201
        }),
        take("alice", None, 100)
    );
    let mut got: Vec<String> = ids(&x.unwrap());
    got.extend(ids(&y));
    got.sort();
    let mut want: Vec<String> = (1..=15)
        .filter(|i| i % 3 != 0 && ![2, 5].contains(i))
        .map(|i| format!("p{i}"))
        .collect();
    want.sort();
    assert_eq!(
        got, want,
        "alice's messages, each taken once, none of bob's"
    );
    assert!(take("alice", None, 100).await.is_empty());
    assert_eq!(take("bob", None, 100).await.len(), 5);
    let stored = s
        .get_message(&chats[0].chat_id, "p1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.message.metadata.ack,
        Some(Ack::Seen),
        "Seen is stored"
    );
    assert!(chat_row(s, &chats[0]).await.version > version_before);
}
