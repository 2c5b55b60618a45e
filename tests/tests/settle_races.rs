//! An answer that arrives while the turn asking the question is still finishing its step: the
//! question record exists (a client saw the call streamed, or a channel rendered it), but the
//! asking turn has not yet saved its waiting checkpoint, or has not yet released the chat. The
//! answer must be recorded once and the turn must continue — right away, not at some later lease
//! expiry, and not never. A [`PausingStore`] holds the asking turn in each window. On SQLite
//! (`sqlite::…`) and PostgreSQL (`postgres::…`).
//!
//! The asking turn checks, once it has released the chat, whether its questions were already
//! answered, and continues then.

use std::time::Duration;

use frogbot_core::agent::Settle;
use frogbot_core::model::{QuestionOutcome, ToolState, TurnState, now_millis};
use frogbot_core::store;
use frogbot_e2e::{
    PausePoint, PausingStore, QUESTION_CALL, TestModel, answer, backends, chat, engine_over,
    eventually, msg, started,
};

/// A long lease, as in production: a continuation that waits for it is plainly late.
const LEASE_MS: i64 = 60_000;

async fn answer_in_window(url: &str, at: PausePoint) {
    let paused = PausingStore::new(store::open(url).await.unwrap(), at);
    let model = TestModel::new("m");
    let engine = engine_over(paused.clone(), &model, LEASE_MS);
    let c = chat("race");
    let h = started(engine.send(msg(&c, Some("al"), "ask")).await.unwrap());
    paused.reached().await;

    // The question record exists while the asking turn is held: answer it now.
    assert!(
        engine
            .store()
            .get_question(&c, QUESTION_CALL, now_millis())
            .await
            .unwrap()
            .is_some()
    );
    let settled = engine
        .settle(&c, QUESTION_CALL, Settle::Answer(answer("yes")), None)
        .await
        .unwrap();
    assert_eq!(settled.outcome, QuestionOutcome::Answered(answer("yes")));
    paused.resume();
    h.done.await.unwrap().unwrap();

    // The answered turn continues (no job worker runs here, and the lease is a minute long).
    eventually(
        "the answered turn to continue",
        Duration::from_secs(10),
        async || model.calls().len() >= 2,
    )
    .await;
    eventually("the chat to go idle", Duration::from_secs(10), async || {
        engine.state(&c).await.unwrap() == TurnState::Idle
    })
    .await;
    let calls = model.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls[1].after_tool);
    let list = engine.store().list_messages(&c).await.unwrap();
    let reply = &list[1].message;
    assert_eq!(reply.text(), "m continues: ask");
    assert_eq!(
        reply.tool_parts().next().unwrap().state,
        ToolState::OutputAvailable
    );
}

async fn an_answer_recorded_before_the_question_checkpoint_continues_the_turn(url: &str) {
    answer_in_window(url, PausePoint::BeforeQuestionCheckpoint).await;
}

async fn an_answer_recorded_before_the_asking_turn_releases_the_chat_continues_at_once(url: &str) {
    answer_in_window(url, PausePoint::BeforeReleaseAwaiting).await;
}

backends!(
    an_answer_recorded_before_the_question_checkpoint_continues_the_turn,
    an_answer_recorded_before_the_asking_turn_releases_the_chat_continues_at_once,
);
