//! Several FrogBot processes on one database: two engines, each over its own store handle (its own
//! connection pool and process id), so nothing but the database coordinates them — one turn per
//! chat, the queue, first answer wins. On SQLite (`sqlite::…`: two handles on one file) and
//! PostgreSQL (`postgres::…`).

use std::sync::Arc;
use std::time::Duration;

use frogbot_core::Error;
use frogbot_core::agent::{Engine, Sent, Settle};
use frogbot_core::model::{Delivery, QuestionOutcome, Role, ToolState, TurnState, now_millis};
use frogbot_testkit::{
    Concurrency, QUESTION_CALL, TestModel, answer, backends, chat, msg, queued, started,
    test_engine, texts, wait_quiet,
};

const LEASE_MS: i64 = 60_000;

/// Two engines on `url`, with models `a` and `b` sharing one concurrency probe.
async fn two(url: &str, step_pause: Duration) -> (Engine, TestModel, Engine, TestModel) {
    let probe = Arc::new(Concurrency::default());
    let ma = TestModel::with_probe("a", probe.clone(), step_pause);
    let mb = TestModel::with_probe("b", probe, step_pause);
    let a = test_engine(url, &ma, LEASE_MS).await;
    let b = test_engine(url, &mb, LEASE_MS).await;
    (a, ma, b, mb)
}

async fn two_engines_never_run_two_turns_of_one_chat(url: &str) {
    let (a, ma, b, mb) = two(url, Duration::from_millis(15)).await;
    let c = chat("many");
    let texts_sent: Vec<String> = (0..20).map(|i| format!("m{i:02}")).collect();
    let sends: Vec<_> = texts_sent
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let engine = if i % 2 == 0 { a.clone() } else { b.clone() };
            let m = msg(&c, Some("al"), t);
            tokio::spawn(async move { engine.agents().send(m).await })
        })
        .collect();
    let mut started_turns = 0;
    let mut handles = Vec::new();
    for s in sends {
        match s.await.unwrap().unwrap() {
            Sent::Started(h) => {
                started_turns += 1;
                handles.push(h);
            }
            Sent::Queued { delivery, .. } => assert_eq!(delivery, Delivery::Queue),
        }
    }
    assert!(started_turns >= 1, "the first message starts a turn");
    let mut ends = Vec::new();
    for h in handles {
        ends.push(h.done.await.unwrap());
    }
    // Never two steps of the chat at once (and the probe did see the steps).
    assert_eq!(ma.probe.max(), 1, "two turns of one chat ran at once");
    for end in ends {
        end.unwrap();
    }
    let store = a.store_for_tests().clone();
    wait_quiet(&store, &c).await;
    assert_eq!(ma.probe.max(), 1, "two turns of one chat ran at once");
    assert_eq!(ma.probe.current(), 0);

    // Every message ran exactly once, in one engine or the other.
    let mut ran: Vec<String> = ma
        .calls()
        .into_iter()
        .chain(mb.calls())
        .map(|call| call.text)
        .collect();
    ran.sort();
    assert_eq!(ran, texts_sent, "each message ran exactly once");

    // Each user message is followed by its reply; none is left queued.
    let list = texts(&store, &c).await;
    assert_eq!(list.len(), 40, "{list:?}");
    for pair in list.chunks(2) {
        let [(Role::User, q, false), (Role::Assistant, r, false)] = pair else {
            panic!("expected a user message and its reply: {pair:?}");
        };
        assert!(
            *r == format!("a says: {q}") || *r == format!("b says: {q}"),
            "{q:?} answered with {r:?}"
        );
    }
    assert!(store.queued_messages(&c).await.unwrap().is_empty());
    assert_eq!(a.chats().state(&c).await.unwrap(), TurnState::Idle);
    assert_eq!(b.chats().state(&c).await.unwrap(), TurnState::Idle);
}

async fn a_turn_ending_in_one_engine_promotes_a_message_queued_through_the_other(url: &str) {
    let (a, ma, b, mb) = two(url, Duration::ZERO).await;
    let c = chat("cross");
    let h = started(
        a.agents()
            .send(msg(&c, Some("al"), "gate first"))
            .await
            .unwrap(),
    );
    ma.wait_calls(1).await;

    // B sees A's turn through the database: its message is queued.
    let (id, delivery) = queued(
        b.agents()
            .send(msg(&c, Some("al"), "from b"))
            .await
            .unwrap(),
    );
    assert_eq!(delivery, Delivery::Queue);
    assert_eq!(b.chats().state(&c).await.unwrap(), TurnState::Running);
    let stored = b
        .store_for_tests()
        .get_message(&c, &id)
        .await
        .unwrap()
        .unwrap();
    assert!(stored.queued);

    // A's turn ends: A promotes B's message and runs it (B has no turn and no worker running).
    ma.gate.add_permits(1);
    let out = h.done.await.unwrap().unwrap();
    assert_eq!(out.reply.unwrap().text(), "a says: gate first");
    let calls = ma.wait_calls(2).await;
    assert_eq!(calls[1].text, "from b");
    let store = a.store_for_tests().clone();
    wait_quiet(&store, &c).await;
    assert!(mb.calls().is_empty(), "B's model never ran");
    assert_eq!(ma.calls().len(), 2);
    let promoted = store.get_message(&c, &id).await.unwrap().unwrap();
    assert!(!promoted.queued);
    assert_eq!(
        texts(&store, &c).await,
        [
            (Role::User, "gate first".to_string(), false),
            (Role::Assistant, "a says: gate first".to_string(), false),
            (Role::User, "from b".to_string(), false),
            (Role::Assistant, "a says: from b".to_string(), false),
        ]
    );
}

async fn concurrent_settles_through_two_engines_record_one_answer(url: &str) {
    let (a, ma, b, mb) = two(url, Duration::ZERO).await;
    let c = chat("settles");
    let out = started(a.agents().send(msg(&c, Some("al"), "ask")).await.unwrap())
        .done
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.state, TurnState::Awaiting);
    assert_eq!(b.chats().state(&c).await.unwrap(), TurnState::Awaiting);

    let start = Arc::new(tokio::sync::Barrier::new(16));
    let settles: Vec<_> = (0..16)
        .map(|i| {
            let engine = if i % 2 == 0 { a.clone() } else { b.clone() };
            let c = c.clone();
            let start = start.clone();
            let label = if i % 3 == 0 { "no" } else { "yes" };
            tokio::spawn(async move {
                start.wait().await;
                let r = engine
                    .questions()
                    .settle(&c, QUESTION_CALL, Settle::Answer(answer(label)), None)
                    .await;
                (label, r)
            })
        })
        .collect();
    let mut ok = Vec::new();
    for s in settles {
        match s.await.unwrap() {
            (label, Ok(settled)) => ok.push((label, settled)),
            (_, Err(Error::Stale { .. })) => {}
            (_, Err(e)) => panic!("a settle failed with {e:?}, not Stale"),
        }
    }
    assert_eq!(ok.len(), 1, "exactly one settle records the answer: {ok:?}");
    let (label, settled) = &ok[0];
    assert_eq!(settled.outcome, QuestionOutcome::Answered(answer(label)));
    assert_eq!(settled.state, TurnState::Running);

    let store = a.store_for_tests().clone();
    wait_quiet(&store, &c).await;
    let q = store
        .get_question(&c, QUESTION_CALL, now_millis())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(q.outcome, Some(QuestionOutcome::Answered(answer(label))));

    // The turn continued once: one more model call in all, after the tool result.
    let calls: Vec<_> = ma.calls().into_iter().chain(mb.calls()).collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        calls.iter().filter(|c| c.after_tool).count(),
        1,
        "{calls:?}"
    );
    let list = store.list_messages(&c).await.unwrap();
    assert_eq!(list.len(), 2, "{list:?}");
    let reply = &list[1].message;
    let part = reply.tool_parts().next().unwrap();
    assert_eq!(part.state, ToolState::OutputAvailable);
    assert_eq!(
        part.output,
        Some(serde_json::to_value(answer(label)).unwrap())
    );
    assert!(
        reply.text() == "a continues: ask" || reply.text() == "b continues: ask",
        "{reply:?}"
    );
    assert_eq!(a.chats().state(&c).await.unwrap(), TurnState::Idle);
}

backends!(
    two_engines_never_run_two_turns_of_one_chat,
    a_turn_ending_in_one_engine_promotes_a_message_queued_through_the_other,
    concurrent_settles_through_two_engines_record_one_answer,
);
