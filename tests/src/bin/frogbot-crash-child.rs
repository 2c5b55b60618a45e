//! A FrogBot process for the crash tests: `frogbot-crash-child DB_URL CHAT_ID TURN_LEASE_MS TEXT`.
//!
//! It opens the store at `DB_URL`, builds an [`Engine`] with a scripted model (partial checkpoints
//! every 10 ms, turn leases of `TURN_LEASE_MS`), sends `TEXT` to `CHAT_ID`, and then behaves by
//! script:
//! - `TEXT` containing `hang`: the step streams [`PARTIAL_TEXT`] in two deltas (a pause longer than
//!   the checkpoint interval between them, so the second one checkpoints the text) and then waits
//!   on a gate that never opens. Once the streamed text is in the store the child prints
//!   `STEP-STARTED` and hangs mid-step, renewing its lease, until it is killed.
//! - `TEXT` containing `ask`: the step calls the `question` tool, the turn ends awaiting, the child
//!   prints `AWAITING` and sleeps until it is killed.
//!
//! Whatever happens, it exits when its stdin closes (the test that started it is gone) or after
//! five minutes, so no child outlives a broken test run.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, call, reply};
use frogbot_core::agent::{
    Engine, EngineConfig, ModelEvent, ModelOffer, ModelRequest, Sent, TurnEvent,
};
use frogbot_core::model::{QUESTION_TOOL, TurnState};
use frogbot_e2e::{AWAITING, PARTIAL_TEXT, STEP_STARTED};
use frogbot_testkit::{QUESTION_CALL, after_tool, ask_input, chat, last_user, msg};

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").expect("write stdout");
    out.flush().expect("flush stdout");
}

fn fail(why: &str) -> ! {
    eprintln!("frogbot-crash-child: {why}");
    std::process::exit(1);
}

fn model() -> ScriptedModel {
    // Never opened: the hanging step waits here until the process dies.
    let never = Arc::new(tokio::sync::Semaphore::new(0));
    ScriptedModel::new(move |req: &ModelRequest| {
        let text = last_user(req);
        if after_tool(req) {
            reply(&format!("child continues: {text}"))
        } else if text.contains("hang") {
            vec![
                ScriptEvent::Event(ModelEvent::TextDelta(PARTIAL_TEXT[0].into())),
                ScriptEvent::Pause(Duration::from_millis(60)),
                ScriptEvent::Event(ModelEvent::TextDelta(PARTIAL_TEXT[1].into())),
                ScriptEvent::Gate(never.clone()),
                ScriptEvent::Event(ModelEvent::TextDelta(" and done".into())),
                frogbot_core::agent::scripted::finish(frogbot_core::agent::FinishReason::Stop),
            ]
        } else if text.contains("ask") {
            call(QUESTION_CALL, QUESTION_TOOL, ask_input())
        } else {
            reply(&format!("child says: {text}"))
        }
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, chat_id, lease_ms, text] = args.as_slice() else {
        fail("usage: frogbot-crash-child DB_URL CHAT_ID TURN_LEASE_MS TEXT");
    };
    // Leave with the parent: its end closes our stdin.
    std::thread::spawn(|| {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        std::process::exit(2);
    });
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(300));
        std::process::exit(3);
    });

    let turn_lease_ms: i64 = lease_ms
        .parse()
        .unwrap_or_else(|_| fail("TURN_LEASE_MS must be an integer"));
    let store = frogbot_testkit::open_store(url).await;
    let engine = Engine::new(
        store.clone(),
        vec![ModelOffer {
            id: "main".into(),
            model: Arc::new(model()),
            reasoning: vec![],
        }],
        vec![],
        EngineConfig {
            default_model: "main".into(),
            turn_lease_ms,
            partial_checkpoint: Duration::from_millis(10),
            ..Default::default()
        },
    );
    let c = chat(chat_id);
    let mut handle = match engine
        .agents()
        .send(msg(&c, Some("child-user"), text))
        .await
    {
        Ok(Sent::Started(h)) => h,
        Ok(Sent::Queued { .. }) => fail("the message was queued, not started"),
        Err(e) => fail(&format!("send: {e}")),
    };

    if text.contains("hang") {
        let full: String = PARTIAL_TEXT.concat();
        let mut reply_id = None;
        let mut streamed = String::new();
        while streamed != full {
            match handle.events.recv().await {
                Some(TurnEvent::Start { message_id }) => reply_id = Some(message_id),
                Some(TurnEvent::TextDelta(d)) => streamed.push_str(&d),
                Some(TurnEvent::Error(e)) => fail(&format!("the turn failed: {e:?}")),
                Some(_) => {}
                None => fail("the turn ended before streaming its text"),
            }
        }
        let reply_id = reply_id.unwrap_or_else(|| fail("no reply message id"));
        // The engine checkpoints the step's text while it streams: wait until it is stored.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let saved = store
                .get_message(&c, &reply_id)
                .await
                .unwrap_or_else(|e| fail(&format!("read the reply: {e}")));
            if saved.is_some_and(|m| m.message.text() == full) {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                fail("the streamed text was never checkpointed");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        say(STEP_STARTED);
    } else if text.contains("ask") {
        match (&mut handle.done).await {
            Ok(Ok(outcome)) if outcome.state == TurnState::Awaiting => say(AWAITING),
            other => fail(&format!(
                "expected the turn to wait on a question: {other:?}"
            )),
        }
    } else {
        match (&mut handle.done).await {
            Ok(Ok(_)) => say("DONE"),
            other => fail(&format!("the turn failed: {other:?}")),
        }
    }
    // Stay alive (holding whatever the engine holds) until killed.
    std::future::pending::<()>().await;
}
