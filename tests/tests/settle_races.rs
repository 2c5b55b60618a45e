//! An answer that arrives while the turn asking the question is still finishing its step. The
//! step that asks is saved by one store operation (`await_answers`: the reply as the waiting
//! message, the question records, the chat released), so there are two windows: before it (a client
//! saw the call streamed; no record exists yet) and after it (the records exist, the asking turn
//! has not finished). The answer must be recorded once and the turn must continue — right away,
//! not at some later lease expiry, and not never. A [`PausingStore`] holds the asking turn in each
//! window. On SQLite (`sqlite::…`) and PostgreSQL (`postgres::…`).

use std::time::Duration;

use frogbot_core::agent::Settle;
use frogbot_core::model::{QuestionOutcome, ToolState, TurnState};
use frogbot_testkit::{
    PausePoint, PausingStore, QUESTION_CALL, TestModel, answer, backends, chat, engine_over,
    eventually, msg, started,
};

/// A long lease, as in production: a continuation that waits for it is plainly late.
const LEASE_MS: i64 = 60_000;

async fn answer_in_window(url: &str, at: PausePoint) {
    let paused = PausingStore::new(frogbot_testkit::open_store(url).await, at);
    let model = TestModel::new("m");
    let engine = engine_over(paused.clone(), &model, LEASE_MS);
    let c = chat("race");
    let h = started(
        engine
            .agents()
            .send(msg(&c, Some("al"), "ask"))
            .await
            .unwrap(),
    );
    paused.reached().await;

    // Answer while the asking turn is held (before its records exist, the settle waits for them).
    let settling = tokio::spawn({
        let engine = engine.clone();
        let c = c.clone();
        async move {
            engine
                .questions()
                .settle(&c, QUESTION_CALL, Settle::Answer(answer("yes")), None)
                .await
        }
    });
    if at == PausePoint::AfterAwaitAnswers {
        let settled = settling.await.unwrap().unwrap();
        assert_eq!(settled.outcome, QuestionOutcome::Answered(answer("yes")));
        paused.resume();
    } else if at == PausePoint::SaveDuringLookUp {
        // The settle's own look-up lets the save through.
        let settled = settling.await.unwrap().unwrap();
        assert_eq!(settled.outcome, QuestionOutcome::Answered(answer("yes")));
    } else {
        paused.resume();
        let settled = settling.await.unwrap().unwrap();
        assert_eq!(settled.outcome, QuestionOutcome::Answered(answer("yes")));
    }
    h.done.await.unwrap().unwrap();

    // The answered turn continues (no job worker runs here, and the lease is a minute long).
    eventually(
        "the answered turn to continue",
        Duration::from_secs(10),
        async || model.calls().len() >= 2,
    )
    .await;
    eventually("the chat to go idle", Duration::from_secs(10), async || {
        engine.chats().state(&c).await.unwrap() == TurnState::Idle
    })
    .await;
    let calls = model.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls[1].after_tool);
    let list = engine.chats().messages(&c).await.unwrap();
    let reply = &list[1].message;
    assert_eq!(reply.text(), "m continues: ask");
    assert_eq!(
        reply.tool_parts().next().unwrap().state,
        ToolState::OutputAvailable
    );
}

async fn an_answer_sent_before_the_question_is_saved_waits_for_it_and_continues_the_turn(
    url: &str,
) {
    answer_in_window(url, PausePoint::BeforeAwaitAnswers).await;
}

/// Regression: the settle looked for the record, then at the chat; a save landing between the
/// two reads (record missing, chat no longer running) was answered "no such tool call".
async fn an_answer_whose_question_is_saved_between_two_reads_finds_it(url: &str) {
    answer_in_window(url, PausePoint::SaveDuringLookUp).await;
}

async fn an_answer_recorded_before_the_asking_turn_finishes_continues_at_once(url: &str) {
    answer_in_window(url, PausePoint::AfterAwaitAnswers).await;
}

backends!(
    an_answer_sent_before_the_question_is_saved_waits_for_it_and_continues_the_turn,
    an_answer_recorded_before_the_asking_turn_finishes_continues_at_once,
    an_answer_whose_question_is_saved_between_two_reads_finds_it,
);
