//! The turn engine against `frogbot-turns.md`, one test per sentence with behaviour, on SQLite
//! (`sqlite::…`) and PostgreSQL (`postgres::…`).

use std::sync::Arc;

use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, call, reply};
use frogbot_core::agent::{
    Engine, EngineConfig, ModelMessage, ModelOffer, ModelRequest, SendMessage, Settle, tool_fn,
};
use frogbot_core::model::{
    ChatId, Delivery, MessagePart, QuestionAnswer, QuestionOutput, Role, ToolState, TurnState,
    UserId,
};
use frogbot_core::store::DynStore;
use frogbot_core::{BoxError, Error};
use frogbot_testkit::{chat, last_user, msg, queued, started, texts};
use serde_json::json;
use tokio::sync::{Semaphore, mpsc};

/// A test world: an engine whose models follow a script keyed on the last user text, a gate that
/// holds steps containing `gate`, and a channel announcing each model call.
struct World {
    engine: Engine,
    models: Vec<ScriptedModel>,
    gate: Arc<Semaphore>,
    calls: mpsc::UnboundedReceiver<String>,
    store: DynStore,
}

fn script(
    name: &'static str,
    gate: Arc<Semaphore>,
    calls: mpsc::UnboundedSender<String>,
) -> ScriptedModel {
    ScriptedModel::new(move |req: &ModelRequest| {
        let text = last_user(req);
        let _ = calls.send(format!("{name}:{text}"));
        let after_tool = matches!(req.messages.last(), Some(ModelMessage::Tool { .. }));
        let mut events = Vec::new();
        if text.contains("gate") {
            events.push(ScriptEvent::Gate(gate.clone()));
        }
        if text.contains("ask") && !after_tool {
            events.extend(call(
                "q1",
                "question",
                json!({"questions": [{"header": "Go", "question": "Go on?", "options": [{"label": "yes"}, {"label": "no"}]}]}),
            ));
        } else if text.contains("tools") && !after_tool {
            events.extend(call("t1", "nope", json!({})));
        } else if text.contains("boom") && !after_tool {
            events.extend(call("t2", "explode", json!({})));
        } else if text.contains("loop") {
            events.extend(call(
                &format!("l{}", req.messages.len()),
                "echo",
                json!({"x": 1}),
            ));
        } else if text.contains("fail") {
            events.push(ScriptEvent::Event(
                frogbot_core::agent::ModelEvent::TextDelta("partial".into()),
            ));
            events.push(ScriptEvent::Event(
                frogbot_core::agent::ModelEvent::ToolCall(frogbot_core::agent::ToolCallRequest {
                    id: "u1".into(),
                    name: "echo".into(),
                    input: json!({}),
                }),
            ));
            events.push(ScriptEvent::Fail("connection reset".into()));
        } else {
            events.extend(reply(&format!("{name} says: {text}")));
        }
        events
    })
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Empty {}

async fn world(url: &str, offers: &[&'static str], config: EngineConfig) -> World {
    let store = frogbot_testkit::open_store(url).await;
    let gate = Arc::new(Semaphore::new(0));
    let (tx, calls) = mpsc::unbounded_channel();
    let models: Vec<ScriptedModel> = offers
        .iter()
        .map(|n| script(n, gate.clone(), tx.clone()))
        .collect();
    let offers = offers
        .iter()
        .zip(&models)
        .map(|(n, m)| ModelOffer {
            id: n.to_string(),
            model: Arc::new(m.clone()),
            reasoning: vec!["low".into(), "high".into()],
        })
        .collect();
    let tools = vec![
        tool_fn("echo", "Echoes", |_: Empty, _ctx| async {
            Ok::<_, BoxError>(json!("echoed"))
        }),
        tool_fn("explode", "Fails", |_: Empty, _ctx| async {
            Err::<serde_json::Value, BoxError>("kaboom".into())
        }),
    ];
    let engine = Engine::new(store.clone(), offers, tools, config);
    World {
        engine,
        models,
        gate,
        calls,
        store,
    }
}

fn config() -> EngineConfig {
    EngineConfig {
        default_model: "a".into(),
        ..Default::default()
    }
}

/// A turn started by a "dead process": it took the chat's lease with a user message and never
/// renews or releases it.
async fn dead_turn(
    store: &DynStore,
    c: &ChatId,
    now: frogbot_core::model::Millis,
    ttl_ms: frogbot_core::model::Millis,
) -> frogbot_core::store::Lease {
    let message = frogbot_core::model::UiMessage {
        id: "dead-turn".into(),
        role: Role::User,
        parts: vec![MessagePart::text("dead turn")],
        metadata: frogbot_core::model::MessageMetadata {
            model: Some("a".into()),
            ..Default::default()
        },
    };
    let sent = store
        .send(&frogbot_core::store::SendOp {
            chat: &frogbot_core::store::NewChat {
                chat_id: c.clone(),
                owner: None,
                channel: None,
            },
            message: &message,
            delivery: Delivery::Queue,
            lease: &frogbot_core::store::LeaseRequest {
                holder: "dead".into(),
                driver: None,
                ttl_ms,
                now,
                interrupted: None,
            },
            queue_if_busy: false,
        })
        .await
        .unwrap();
    match sent {
        frogbot_core::store::Sent::Started { lease, .. } => lease,
        other => panic!("the dead turn did not start: {other:?}"),
    }
}

/// Waits until the chat is idle with nothing queued (turns promoted in the background finished).
async fn settle_down(w: &World, c: &ChatId) {
    let mut events = w.engine.chats().subscribe();
    loop {
        let st = w.engine.chats().state(c).await.unwrap();
        if st != TurnState::Running && w.store.queued_messages(c).await.unwrap().is_empty() {
            return;
        }
        if st == TurnState::Awaiting {
            return;
        }
        let _ = tokio::time::timeout(std::time::Duration::from_millis(200), events.recv()).await;
    }
}

fn yes() -> QuestionOutput {
    QuestionOutput {
        answers: vec![QuestionAnswer {
            header: "Go".into(),
            selected: vec!["yes".into()],
        }],
    }
}

// ---- the tests -----------------------------------------------------------------------------------

async fn at_most_one_turn_per_chat_and_generate_rejects_with_turn_in_progress(url: &str) {
    let mut w = world(url, &["a"], config()).await;
    let c = chat("one");
    let h = started(
        w.engine
            .agents()
            .send(msg(&c, None, "gate please"))
            .await
            .unwrap(),
    );
    w.calls.recv().await.unwrap();
    assert_eq!(
        w.engine.chats().state(&c).await.unwrap(),
        TurnState::Running
    );
    let err = w
        .engine
        .agents()
        .generate(&c, vec![MessagePart::text("x")], None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TurnInProgress { .. }), "{err}");
    w.gate.add_permits(1);
    let out = h.done.await.unwrap().unwrap();
    assert_eq!(out.state, TurnState::Idle);
    assert_eq!(out.reply.unwrap().text(), "a says: gate please");
    // Idle again: generate runs.
    let g = w
        .engine
        .agents()
        .generate(&c, vec![MessagePart::text("hi")], None)
        .await
        .unwrap();
    assert_eq!(g.done.await.unwrap().unwrap().state, TurnState::Idle);
}

async fn message_during_a_turn_is_queued_and_not_sent_to_the_model(url: &str) {
    let mut w = world(url, &["a"], config()).await;
    let c = chat("queue");
    let h = started(
        w.engine
            .agents()
            .send(msg(&c, Some("al"), "gate first"))
            .await
            .unwrap(),
    );
    w.calls.recv().await.unwrap();
    let (id, delivery) = queued(
        w.engine
            .agents()
            .send(msg(&c, Some("al"), "second"))
            .await
            .unwrap(),
    );
    assert_eq!(delivery, Delivery::Queue);
    let stored = w.store.get_message(&c, &id).await.unwrap().unwrap();
    assert!(stored.queued, "saved as queued, part of the chat");
    w.gate.add_permits(1);
    h.done.await.unwrap().unwrap();
    // The first step's request never contained the queued message.
    let first = &w.models[0].requests()[0];
    assert!(
        !first
            .messages
            .iter()
            .any(|m| matches!(m, ModelMessage::User { text } if text == "second"))
    );
    // When the turn ended it was promoted and ran.
    assert_eq!(w.calls.recv().await.unwrap(), "a:second");
    settle_down(&w, &c).await;
    let t = texts(&w.store, &c).await;
    assert_eq!(
        t.iter()
            .map(|(r, x, q)| (*r, x.as_str(), *q))
            .collect::<Vec<_>>(),
        [
            (Role::User, "gate first", false),
            (Role::Assistant, "a says: gate first", false),
            (Role::User, "second", false),
            (Role::Assistant, "a says: second", false),
        ]
    );
}

async fn promoted_message_runs_as_its_sender_with_its_model_and_the_next_waits(url: &str) {
    let mut w = world(url, &["a", "b"], config()).await;
    let c = chat("promote");
    let h = started(
        w.engine
            .agents()
            .send(msg(&c, None, "gate one"))
            .await
            .unwrap(),
    );
    w.calls.recv().await.unwrap();
    let mut two = msg(&c, Some("bob"), "gate two");
    two.model = Some("b".into());
    two.reasoning = Some("high".into());
    queued(w.engine.agents().send(two).await.unwrap());
    queued(
        w.engine
            .agents()
            .send(msg(&c, Some("carol"), "three"))
            .await
            .unwrap(),
    );
    w.gate.add_permits(1);
    h.done.await.unwrap().unwrap();
    assert_eq!(
        w.calls.recv().await.unwrap(),
        "b:gate two",
        "run with the model it was sent with"
    );
    // While "two" runs, "three" waits.
    let row = w.store.get_chat(&c).await.unwrap().unwrap();
    assert_eq!(
        row.lease.unwrap().driver,
        Some(UserId::new("bob")),
        "run as the user who sent it"
    );
    assert!(
        w.store
            .queued_messages(&c)
            .await
            .unwrap()
            .iter()
            .any(|m| m.message.text() == "three")
    );
    assert_eq!(w.models[1].requests()[0].reasoning.as_deref(), Some("high"));
    w.gate.add_permits(1);
    assert_eq!(w.calls.recv().await.unwrap(), "a:three");
    settle_down(&w, &c).await;
    assert!(w.store.queued_messages(&c).await.unwrap().is_empty());
}

async fn messages_sent_while_a_question_waits_stay_queued_until_it_is_answered(url: &str) {
    let mut w = world(url, &["a"], config()).await;
    let c = chat("waitq");
    let h = started(
        w.engine
            .agents()
            .send(msg(&c, None, "ask me"))
            .await
            .unwrap(),
    );
    let out = h.done.await.unwrap().unwrap();
    assert_eq!(out.state, TurnState::Awaiting);
    w.calls.recv().await.unwrap();
    let (_, d) = queued(
        w.engine
            .agents()
            .send(msg(&c, None, "meanwhile"))
            .await
            .unwrap(),
    );
    assert_eq!(d, Delivery::Queue);
    assert_eq!(
        w.engine.chats().state(&c).await.unwrap(),
        TurnState::Awaiting
    );
    assert_eq!(
        w.store.queued_messages(&c).await.unwrap().len(),
        1,
        "stays queued while the question waits"
    );
    let s = w
        .engine
        .questions()
        .settle(&c, "q1", Settle::Answer(yes()), None)
        .await
        .unwrap();
    assert_eq!(s.state, TurnState::Running);
    // The answered turn continues, then the queued message runs.
    assert_eq!(w.calls.recv().await.unwrap(), "a:ask me");
    assert_eq!(w.calls.recv().await.unwrap(), "a:meanwhile");
    settle_down(&w, &c).await;
    // A second settle is stale.
    assert!(matches!(
        w.engine
            .questions()
            .settle(&c, "q1", Settle::Answer(yes()), None)
            .await,
        Err(Error::Stale { .. })
    ));
}

async fn a_continued_turn_uses_the_latest_user_messages_model(url: &str) {
    let mut w = world(url, &["a", "b"], config()).await;
    let c = chat("contmodel");
    let mut m = msg(&c, None, "ask with b");
    m.model = Some("b".into());
    started(w.engine.agents().send(m).await.unwrap())
        .done
        .await
        .unwrap()
        .unwrap();
    assert_eq!(w.calls.recv().await.unwrap(), "b:ask with b");
    w.engine
        .questions()
        .settle(&c, "q1", Settle::Answer(yes()), None)
        .await
        .unwrap();
    assert_eq!(
        w.calls.recv().await.unwrap(),
        "b:ask with b",
        "continued with b, not the default a"
    );
    settle_down(&w, &c).await;
}

async fn a_selection_no_longer_offered_fails_the_turn_before_calling_the_model(url: &str) {
    let w = world(url, &["a", "b"], config()).await;
    let c = chat("gone");
    // Refused at send time when not offered.
    let mut bad = msg(&c, None, "x");
    bad.model = Some("zzz".into());
    assert!(matches!(
        w.engine.agents().send(bad).await,
        Err(Error::SelectionUnavailable { .. })
    ));
    let mut bad = msg(&c, None, "x");
    bad.reasoning = Some("extreme".into());
    assert!(matches!(
        w.engine.agents().send(bad).await,
        Err(Error::SelectionUnavailable { .. })
    ));
    // A turn holds the chat (a process that then stops), and a message is queued with model b.
    let now = frogbot_core::model::now_millis();
    let dead = dead_turn(&w.store, &c, now, 200).await;
    let mut m = msg(&c, None, "use b");
    m.model = Some("b".into());
    queued(w.engine.agents().send(m).await.unwrap());
    // The configuration changes: a new engine on the same database offers only "a".
    let mut w2 = world(url, &["a"], config()).await;
    tokio::time::sleep(std::time::Duration::from_millis(
        (dead.expires_at - now + 20) as u64,
    ))
    .await;
    started(
        w2.engine
            .agents()
            .send(msg(&c, None, "next"))
            .await
            .unwrap(),
    )
    .done
    .await
    .unwrap()
    .unwrap();
    settle_down(&w2, &c).await;
    assert_eq!(w2.calls.recv().await.unwrap(), "a:next");
    assert!(
        w2.calls.try_recv().is_err(),
        "the model was not called for the stale selection"
    );
    assert!(w.models[1].requests().is_empty(), "never substituted");
    let list = w.store.list_messages(&c).await.unwrap();
    let last = &list.last().unwrap().message;
    assert_eq!(last.role, Role::Assistant);
    assert_eq!(
        last.metadata.error.as_ref().unwrap().code,
        "selection-unavailable"
    );
    assert!(last.parts.is_empty());
}

/// A message in a channel thread's chat, which everyone in the thread writes (a web chat is
/// written by its owner only).
fn thread_msg(c: &ChatId, who: Option<&str>, text: &str) -> SendMessage {
    SendMessage {
        channel: Some(frogbot_core::model::ChannelRef {
            platform: "test".into(),
            thread: c.to_string(),
        }),
        ..msg(c, who, text)
    }
}

async fn steer_joins_the_running_turn_at_the_next_step_boundary(url: &str) {
    let mut w = world(url, &["a", "b"], config()).await;
    let c = chat("steer");
    let h = started(
        w.engine
            .agents()
            .send(thread_msg(&c, Some("al"), "loop gate"))
            .await
            .unwrap(),
    );
    w.calls.recv().await.unwrap();
    let mut s = thread_msg(&c, Some("al"), "steer now");
    s.delivery = Delivery::Steer;
    s.model = Some("b".into());
    let (id, d) = queued(w.engine.agents().send(s).await.unwrap());
    assert_eq!(d, Delivery::Steer);
    let mut other = thread_msg(&c, Some("eve"), "not the driver");
    other.delivery = Delivery::Steer;
    let (_, d) = queued(w.engine.agents().send(other).await.unwrap());
    assert_eq!(d, Delivery::Queue, "a steer from anyone else is queued");
    w.gate.add_permits(1);
    // The next model call (step 2) sees the steer, and uses the steer's model from that step on.
    let next = w.calls.recv().await.unwrap();
    assert_eq!(next, "b:steer now");
    let req = w.models[1].requests().pop().unwrap();
    assert!(
        req.messages
            .iter()
            .any(|m| matches!(m, ModelMessage::User { text } if text == "steer now"))
    );
    // Stop the loop: max_steps ends it.
    drop(h);
    settle_down(&w, &c).await;
    let list = w.store.list_messages(&c).await.unwrap();
    let pos = |needle: &str| list.iter().position(|m| m.message.id == needle).unwrap();
    let reply = list
        .iter()
        .position(|m| m.message.role == Role::Assistant)
        .unwrap();
    assert_eq!(
        pos(&id) + 1,
        reply,
        "a joined steer is stored just before the turn's reply"
    );
}

async fn a_steer_while_a_question_waits_is_queued_never_an_answer(url: &str) {
    let w = world(url, &["a"], config()).await;
    let c = chat("steerq");
    started(
        w.engine
            .agents()
            .send(msg(&c, Some("al"), "ask"))
            .await
            .unwrap(),
    )
    .done
    .await
    .unwrap()
    .unwrap();
    let mut s = msg(&c, Some("al"), "yes");
    s.delivery = Delivery::Steer;
    let (_, d) = queued(w.engine.agents().send(s).await.unwrap());
    assert_eq!(d, Delivery::Queue);
    let q = w
        .store
        .get_question(&c, "q1", frogbot_core::model::now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(q.outcome.is_none(), "the steer did not answer the question");
}

async fn awaiting_returns_to_running_on_answer_and_idle_on_dismissal_or_deletion(url: &str) {
    let mut w = world(url, &["a"], config()).await;
    let c = chat("states");
    started(w.engine.agents().send(msg(&c, None, "ask")).await.unwrap())
        .done
        .await
        .unwrap()
        .unwrap();
    w.calls.recv().await.unwrap();
    let s = w
        .engine
        .questions()
        .settle(&c, "q1", Settle::Dismiss, None)
        .await
        .unwrap();
    assert_eq!(s.state, TurnState::Idle);
    assert_eq!(w.engine.chats().state(&c).await.unwrap(), TurnState::Idle);
    // Dismissal recorded on the tool part; the model was not called again.
    let list = w.store.list_messages(&c).await.unwrap();
    let reply = &list[1].message;
    let part = reply.tool_parts().next().unwrap();
    assert_eq!(part.state, ToolState::OutputError);
    assert!(w.calls.try_recv().is_err());
    // Deleting the waiting message withdraws the question.
    let c2 = chat("states2");
    let out = started(w.engine.agents().send(msg(&c2, None, "ask")).await.unwrap())
        .done
        .await
        .unwrap()
        .unwrap();
    let reply_id = out.reply.unwrap().id;
    assert!(!w.engine.questions().withdraw(&c2, "not-it").await.unwrap());
    assert!(w.engine.questions().withdraw(&c2, &reply_id).await.unwrap());
    assert_eq!(w.engine.chats().state(&c2).await.unwrap(), TurnState::Idle);
    let q = w
        .store
        .get_question(&c2, "q1", frogbot_core::model::now_millis())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        q.outcome,
        Some(frogbot_core::model::QuestionOutcome::Cancelled)
    );
}

async fn every_step_is_checkpointed_and_tool_failures_reach_the_model(url: &str) {
    let mut w = world(url, &["a"], config()).await;
    let c = chat("steps");
    let out = started(
        w.engine
            .agents()
            .send(msg(&c, None, "tools"))
            .await
            .unwrap(),
    )
    .done
    .await
    .unwrap()
    .unwrap();
    let reply = out.reply.unwrap();
    let part = reply.tool_parts().next().unwrap();
    assert_eq!(part.state, ToolState::OutputError);
    assert!(part.error_text.as_deref().unwrap().contains("unknown tool"));
    // The second step saw the error result.
    let reqs = w.models[0].requests();
    assert_eq!(reqs.len(), 2);
    assert!(matches!(
        reqs[1].messages.last(),
        Some(ModelMessage::Tool { is_error: true, .. })
    ));
    w.calls.recv().await.unwrap();
    let out = started(w.engine.agents().send(msg(&c, None, "boom")).await.unwrap())
        .done
        .await
        .unwrap()
        .unwrap();
    let reply = out.reply.unwrap();
    assert_eq!(
        reply.tool_parts().next().unwrap().error_text.as_deref(),
        Some("kaboom")
    );
}

async fn an_aborted_stream_saves_the_partial_step_with_unfinished_calls_as_errors(url: &str) {
    let w = world(url, &["a"], config()).await;
    let c = chat("abort");
    let out = started(w.engine.agents().send(msg(&c, None, "fail")).await.unwrap())
        .done
        .await
        .unwrap()
        .unwrap();
    let reply = out.reply.unwrap();
    assert_eq!(reply.text(), "partial");
    let part = reply.tool_parts().next().unwrap();
    assert_eq!(part.state, ToolState::OutputError);
    assert_eq!(reply.metadata.error.as_ref().unwrap().code, "model-error");
    let saved = w.store.get_message(&c, &reply.id).await.unwrap().unwrap();
    assert_eq!(saved.message, reply, "the partial step is saved");
    assert_eq!(w.engine.chats().state(&c).await.unwrap(), TurnState::Idle);
}

async fn a_turn_stops_at_max_steps(url: &str) {
    let w = world(
        url,
        &["a"],
        EngineConfig {
            default_model: "a".into(),
            max_steps: 3,
            ..Default::default()
        },
    )
    .await;
    let c = chat("max");
    let out = started(w.engine.agents().send(msg(&c, None, "loop")).await.unwrap())
        .done
        .await
        .unwrap()
        .unwrap();
    assert_eq!(w.models[0].requests().len(), 3);
    assert_eq!(out.reply.unwrap().tool_parts().count(), 3);
}

async fn a_stopped_process_frees_its_chat_after_the_lease_unless_a_question_waits(url: &str) {
    // A "dead process": it took the lease and never renews or releases it.
    let w = world(
        url,
        &["a"],
        EngineConfig {
            default_model: "a".into(),
            turn_lease_ms: 300,
            ..Default::default()
        },
    )
    .await;
    let c = chat("crash");
    let now = frogbot_core::model::now_millis();
    let dead = dead_turn(&w.store, &c, now, 300).await;
    let (_, d) = queued(
        w.engine
            .agents()
            .send(msg(&c, None, "behind the crash"))
            .await
            .unwrap(),
    );
    assert_eq!(d, Delivery::Queue);
    // Wait out the lease (time is the mechanism under test here).
    tokio::time::sleep(std::time::Duration::from_millis(
        (dead.expires_at - now + 20) as u64,
    ))
    .await;
    assert_eq!(w.engine.chats().state(&c).await.unwrap(), TurnState::Idle);
    // The next message starts a new turn; the queued one runs after it ends.
    let h = started(
        w.engine
            .agents()
            .send(msg(&c, None, "after"))
            .await
            .unwrap(),
    );
    h.done.await.unwrap().unwrap();
    settle_down(&w, &c).await;
    let t = texts(&w.store, &c).await;
    let users: Vec<_> = t
        .iter()
        .filter(|(r, _, _)| *r == Role::User)
        .map(|(_, x, q)| (x.as_str(), *q))
        .collect();
    assert_eq!(
        users,
        [
            ("dead turn", false),
            ("after", false),
            ("behind the crash", false)
        ],
        "nothing queued is lost"
    );
    // The turn the dead process never finished says so.
    let replies: Vec<_> = t.iter().filter(|(r, _, _)| *r == Role::Assistant).collect();
    assert_eq!(replies.len(), 3, "{t:?}");
    let stored = w.store.list_messages(&c).await.unwrap();
    assert_eq!(
        stored[1]
            .message
            .metadata
            .error
            .as_ref()
            .map(|e| e.code.as_str()),
        Some("interrupted")
    );
}

/// Issue 14, defect 2: a process that stops with a turn still running past its grace ends that
/// turn's lease at once; any other process's sweep then takes the chat over without waiting for
/// the lease to run out, marks the interrupted reply and runs the queue.
async fn a_drain_out_of_grace_hands_the_chat_on_at_once(url: &str) {
    let a = world(url, &["a"], config()).await;
    let c = chat("drained");
    let h = started(
        a.engine
            .agents()
            .send(msg(&c, None, "gate forever"))
            .await
            .unwrap(),
    );
    let (_, _) = queued(
        a.engine
            .agents()
            .send(msg(&c, None, "after the stop"))
            .await
            .unwrap(),
    );
    a.engine.drain(std::time::Duration::from_millis(50)).await;
    drop(h);
    // Another process: the lease (60 s by default) is already over, so its sweep takes the chat.
    let b = world(url, &["a"], config()).await;
    assert_eq!(b.engine.ops().recover_expired_leases().await.unwrap(), 1);
    settle_down(&b, &c).await;
    let stored = b.store.list_messages(&c).await.unwrap();
    let first_reply = stored
        .iter()
        .find(|m| m.message.role == Role::Assistant)
        .expect("the interrupted turn got a reply");
    assert_eq!(
        first_reply
            .message
            .metadata
            .error
            .as_ref()
            .map(|e| e.code.as_str()),
        Some("interrupted")
    );
    let t = texts(&b.store, &c).await;
    assert_eq!(
        t.last().map(|(r, x, q)| (*r, x.as_str(), *q)),
        Some((Role::Assistant, "a says: after the stop", false)),
        "{t:?}"
    );
    // Nothing else is left to recover.
    assert_eq!(b.engine.ops().recover_expired_leases().await.unwrap(), 0);
}

/// Tools that change while the engine runs: a `ToolSource` is asked at every step, its tools
/// are offered after the engine's own (a name the engine has is not offered twice) and called
/// like them; a tool it drops is no longer offered at the next step.
async fn a_tool_source_is_asked_at_every_step(url: &str) {
    struct Source(
        std::sync::Mutex<Vec<Arc<dyn frogbot_core::agent::Tool>>>,
        std::sync::Mutex<Vec<Option<String>>>,
    );
    impl frogbot_core::agent::ToolSource for Source {
        fn tools(&self, platform: Option<&str>) -> Vec<Arc<dyn frogbot_core::agent::Tool>> {
            self.1.lock().unwrap().push(platform.map(str::to_owned));
            self.0.lock().unwrap().clone()
        }
    }
    let store = frogbot_testkit::open_store(url).await;
    let source = Arc::new(Source(Default::default(), Default::default()));
    let weak = Arc::downgrade(&source);
    let lookup = tool_fn("lookup", "Looks up", move |_: Empty, _ctx| {
        let weak = weak.clone();
        async move {
            // The source's list changes while the call runs (a server's list_changed).
            if let Some(s) = weak.upgrade() {
                let later = tool_fn("later", "Comes later", |_: Empty, _ctx| async {
                    Ok::<_, BoxError>(json!("later"))
                });
                *s.0.lock().unwrap() = vec![later];
            }
            Ok::<_, BoxError>(json!({"found": 42}))
        }
    });
    let shadow = tool_fn("echo", "Not the engine's echo", |_: Empty, _ctx| async {
        Ok::<_, BoxError>(json!("the source's echo"))
    });
    *source.0.lock().unwrap() = vec![lookup, shadow];
    let model = ScriptedModel::new(|req: &ModelRequest| {
        if matches!(req.messages.last(), Some(ModelMessage::Tool { .. })) {
            return reply("done");
        }
        let mut e = call("c1", "lookup", json!({}));
        e.truncate(1);
        e.extend(call("c2", "echo", json!({})));
        e
    });
    let echo = tool_fn("echo", "Echoes", |_: Empty, _ctx| async {
        Ok::<_, BoxError>(json!("echoed"))
    });
    let engine = Engine::new(
        store,
        vec![frogbot_testkit::offer("a", model.clone())],
        vec![echo],
        config(),
    )
    .with_tool_source(source.clone());
    let c = chat("source");
    let out = started(engine.agents().send(msg(&c, None, "go")).await.unwrap())
        .done
        .await
        .unwrap()
        .unwrap();
    let reply = out.reply.unwrap();
    let outputs: Vec<_> = reply.tool_parts().map(|t| t.output.clone()).collect();
    assert_eq!(outputs, [Some(json!({"found": 42})), Some(json!("echoed"))]);
    let names = |i: usize| -> Vec<String> {
        model.requests()[i]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert_eq!(names(0), ["echo", "question", "lookup"]);
    assert_eq!(names(1), ["echo", "question", "later"]);
    // Asked once a step, for a chat of no platform.
    assert_eq!(*source.1.lock().unwrap(), [None, None]);
}

frogbot_testkit::backends!(
    at_most_one_turn_per_chat_and_generate_rejects_with_turn_in_progress,
    message_during_a_turn_is_queued_and_not_sent_to_the_model,
    promoted_message_runs_as_its_sender_with_its_model_and_the_next_waits,
    messages_sent_while_a_question_waits_stay_queued_until_it_is_answered,
    a_continued_turn_uses_the_latest_user_messages_model,
    a_selection_no_longer_offered_fails_the_turn_before_calling_the_model,
    steer_joins_the_running_turn_at_the_next_step_boundary,
    a_steer_while_a_question_waits_is_queued_never_an_answer,
    awaiting_returns_to_running_on_answer_and_idle_on_dismissal_or_deletion,
    every_step_is_checkpointed_and_tool_failures_reach_the_model,
    an_aborted_stream_saves_the_partial_step_with_unfinished_calls_as_errors,
    a_turn_stops_at_max_steps,
    a_stopped_process_frees_its_chat_after_the_lease_unless_a_question_waits,
    a_drain_out_of_grace_hands_the_chat_on_at_once,
    a_tool_source_is_asked_at_every_step,
);
