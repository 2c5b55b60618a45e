//! Crash recovery with real processes (`frogbot-turns.md`, "Crash recovery"): a FrogBot process
//! (`frogbot-crash-child`) is SIGKILLed mid-step or while its question waits, and this process —
//! its own engine on the same database — carries on. On SQLite (`sqlite::…`) and PostgreSQL
//! (`postgres::…`).

use std::time::Duration;

use frogbot_core::Error;
use frogbot_core::agent::{Settle, Settled};
use frogbot_core::model::{
    Delivery, QuestionOutcome, Role, ToolState, TurnState, UserId, now_millis,
};
use frogbot_core::store::LeaseInfo;
use frogbot_e2e::{AWAITING, CrashChild, PARTIAL_TEXT, STEP_STARTED};
use frogbot_testkit::{
    QUESTION_CALL, TestModel, answer, backends, chat, msg, queued, started, test_engine, texts,
    wait_quiet,
};

const CHILD: &str = env!("CARGO_BIN_EXE_frogbot-crash-child");

/// The turn lease of the child and of this process. Long enough that a live child on a loaded
/// machine renews it in time (every third of it), short enough to wait out.
const LEASE_MS: i64 = 2_000;

/// How long the child may take to start, open the database and reach its point.
const CHILD_READY: Duration = Duration::from_secs(60);

fn row(role: Role, text: &str, queued: bool) -> (Role, String, bool) {
    (role, text.to_string(), queued)
}

async fn killed_mid_step_keeps_partial_text_frees_chat_after_lease_and_loses_no_queued_message(
    url: &str,
) {
    let c = chat("crash-mid-step");
    let mut child = CrashChild::spawn(CHILD, url, &c, LEASE_MS, "hang on");
    child.expect_line(STEP_STARTED, CHILD_READY).await;

    let model = TestModel::new("parent");
    let engine = test_engine(url, &model, LEASE_MS).await;
    let store = engine.store_for_tests().clone();
    assert_eq!(engine.chats().state(&c).await.unwrap(), TurnState::Running);

    // The child's turn holds the chat: a message from this process is queued, not run.
    let (second_id, delivery) = queued(
        engine
            .agents()
            .send(msg(&c, Some("child-user"), "second"))
            .await
            .unwrap(),
    );
    assert_eq!(delivery, Delivery::Queue);
    assert!(
        store
            .get_message(&c, &second_id)
            .await
            .unwrap()
            .unwrap()
            .queued
    );

    child.kill();
    let killed_at = now_millis();

    // The text streamed before the kill is kept in the chat's assistant message.
    let list = store.list_messages(&c).await.unwrap();
    let replies: Vec<_> = list
        .iter()
        .filter(|m| m.message.role == Role::Assistant)
        .collect();
    assert_eq!(replies.len(), 1, "{list:?}");
    assert_eq!(replies[0].message.text(), PARTIAL_TEXT.concat());
    assert!(!replies[0].queued);

    // The dead process's lease blocks the chat until it runs out, and nobody renews it.
    let row_now = store.get_chat(&c).await.unwrap().unwrap();
    assert_eq!(
        row_now.state(now_millis()),
        TurnState::Running,
        "the chat stays running until the dead turn's lease expires"
    );
    let dead: LeaseInfo = row_now.lease.clone().unwrap();
    assert_eq!(
        dead.driver,
        Some(UserId::new("child-user")),
        "held by the child's turn"
    );
    let mut running_seen = 0;
    loop {
        let now = now_millis();
        let row = store.get_chat(&c).await.unwrap().unwrap();
        let state = row.state(now);
        let lease = row.lease.clone();
        if state == TurnState::Idle {
            // Idle only once the lease last seen has run out.
            assert!(
                now >= dead.expires_at,
                "idle at {now}, before the lease's expiry {}",
                dead.expires_at
            );
            break;
        }
        assert_eq!(state, TurnState::Running);
        let lease = lease.unwrap();
        assert_eq!(
            (&lease.holder, lease.token),
            (&dead.holder, dead.token),
            "the chat is still held by the dead turn"
        );
        // A renewal that was in flight at the kill may still land; nothing renews after that.
        assert!(
            lease.expires_at <= killed_at + LEASE_MS,
            "the lease was renewed after the kill: {} > {}",
            lease.expires_at,
            killed_at + LEASE_MS
        );
        running_seen += 1;
        let wait = (lease.expires_at - now).clamp(1, 50);
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    }
    assert!(running_seen >= 1);
    assert_eq!(engine.chats().state(&c).await.unwrap(), TurnState::Idle);
    assert!(
        model.calls().is_empty(),
        "the queued message waits for the next turn to end"
    );
    assert_eq!(store.queued_messages(&c).await.unwrap().len(), 1);

    // The next message starts a new turn; when it ends, the queued one is promoted and runs.
    let h = started(
        engine
            .agents()
            .send(msg(&c, Some("child-user"), "third"))
            .await
            .unwrap(),
    );
    let out = h.done.await.unwrap().unwrap();
    assert_eq!(out.reply.unwrap().text(), "parent says: third");
    wait_quiet(&store, &c).await;
    let calls: Vec<_> = model.calls().into_iter().map(|c| c.text).collect();
    assert_eq!(calls, ["third", "second"], "the crashed step is not re-run");
    assert_eq!(
        texts(&store, &c).await,
        [
            row(Role::User, "hang on", false),
            row(Role::Assistant, &PARTIAL_TEXT.concat(), false),
            row(Role::User, "third", false),
            row(Role::Assistant, "parent says: third", false),
            row(Role::User, "second", false),
            row(Role::Assistant, "parent says: second", false),
        ],
        "every user message is there, none queued, each with its reply"
    );
    assert_eq!(engine.chats().state(&c).await.unwrap(), TurnState::Idle);
}

async fn killed_while_awaiting_keeps_the_question_which_can_be_answered(url: &str) {
    let c = chat("crash-awaiting");
    let mut child = CrashChild::spawn(CHILD, url, &c, LEASE_MS, "ask gate");
    child.expect_line(AWAITING, CHILD_READY).await;
    child.kill();

    let model = TestModel::new("parent");
    let engine = test_engine(url, &model, LEASE_MS).await;
    let store = engine.store_for_tests().clone();
    assert_eq!(engine.chats().state(&c).await.unwrap(), TurnState::Awaiting);
    // Still waiting once the dead process's lease time has passed: nothing expires a question.
    tokio::time::sleep(Duration::from_millis(LEASE_MS as u64 + 200)).await;
    assert_eq!(engine.chats().state(&c).await.unwrap(), TurnState::Awaiting);
    let q = store
        .get_question(&c, QUESTION_CALL, now_millis())
        .await
        .unwrap()
        .expect("the question record survived the crash");
    assert!(q.outcome.is_none());

    // A new message queues behind the waiting question and is not run.
    let (_, delivery) = queued(
        engine
            .agents()
            .send(msg(&c, Some("child-user"), "meanwhile"))
            .await
            .unwrap(),
    );
    assert_eq!(delivery, Delivery::Queue);
    assert_eq!(engine.chats().state(&c).await.unwrap(), TurnState::Awaiting);
    assert!(model.calls().is_empty());

    // Answering from this process continues the dead process's turn here.
    let settled = engine
        .questions()
        .settle(&c, QUESTION_CALL, Settle::Answer(answer("yes")), None)
        .await
        .unwrap();
    assert_eq!(
        settled,
        Settled {
            outcome: QuestionOutcome::Answered(answer("yes")),
            state: TurnState::Running,
        }
    );
    let calls = model.wait_calls(1).await;
    assert!(calls[0].after_tool, "{calls:?}");
    assert_eq!(calls[0].text, "ask gate");
    assert_eq!(engine.chats().state(&c).await.unwrap(), TurnState::Running);
    assert_eq!(
        store.queued_messages(&c).await.unwrap().len(),
        1,
        "the queued message waits for the continued turn"
    );
    model.gate.add_permits(1);
    wait_quiet(&store, &c).await;

    let calls = model.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[1].text, "meanwhile");
    let list = store.list_messages(&c).await.unwrap();
    let got: Vec<_> = list
        .iter()
        .map(|m| (m.message.role, m.message.text(), m.queued))
        .collect();
    assert_eq!(
        got,
        [
            row(Role::User, "ask gate", false),
            row(Role::Assistant, "parent continues: ask gate", false),
            row(Role::User, "meanwhile", false),
            row(Role::Assistant, "parent says: meanwhile", false),
        ]
    );
    let part = list[1].message.tool_parts().next().unwrap();
    assert_eq!(part.tool_call_id, QUESTION_CALL);
    assert_eq!(part.state, ToolState::OutputAvailable);
    assert_eq!(
        part.output,
        Some(serde_json::to_value(answer("yes")).unwrap())
    );
    assert_eq!(engine.chats().state(&c).await.unwrap(), TurnState::Idle);

    // The question was answered once: a second answer is stale.
    let again = engine
        .questions()
        .settle(&c, QUESTION_CALL, Settle::Answer(answer("no")), None)
        .await;
    assert!(matches!(again, Err(Error::Stale { .. })), "{again:?}");
}

backends!(
    killed_mid_step_keeps_partial_text_frees_chat_after_lease_and_loses_no_queued_message,
    killed_while_awaiting_keeps_the_question_which_can_be_answered,
);
