//! Elicitations in the core: a tool that asks the person driving the turn for input while it
//! runs ([`ToolStep::Ask`]) is suspended like an approval — its question is a record of the
//! waiting reply (who may answer: the driver), and when the turn continues the call gets what
//! became of it ([`Tool::resume`]): answered, dismissed (declined: the turn goes on), expired or
//! withdrawn (cancelled); it may ask again. An agent-driven turn asks nobody: declined at once.
//! On SQLite (`sqlite::…`) and PostgreSQL (`postgres::…`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{
    ApprovalPolicy, ELICITATION_STOPPED_TEXT, Engine, EngineConfig, ManualClock, ModelMessage,
    ModelRequest, Settle, Tool, ToolAnswer, ToolContext, ToolSpec, ToolStep, with_approval,
};
use frogbot_core::model::{
    APPROVAL_HEADER, APPROVE_LABEL, Actor, ChatId, InputKind, QuestionAnswer, QuestionInput,
    QuestionItem, QuestionOutput, Role, ToolPart, ToolState, TurnState, UiMessage, UserId,
};
use frogbot_core::store::DynStore;
use frogbot_core::{BoxError, Error};
use frogbot_testkit::{chat, eventually, msg, started, wait_quiet};
use serde_json::{Value, json};

/// A tool that asks for a name (`times` questions in a row), then returns what it got.
struct Asker {
    times: u32,
    expires_in_seconds: Option<u64>,
    /// Per call: the answers so far.
    calls: Mutex<HashMap<String, Vec<ToolAnswer>>>,
    /// Every answer, in order.
    got: Arc<Mutex<Vec<ToolAnswer>>>,
}

fn question(n: u32, expires_in_seconds: Option<u64>) -> QuestionInput {
    QuestionInput {
        questions: vec![QuestionItem {
            header: "Name".into(),
            question: format!("Your name? ({n})"),
            kind: InputKind::TextInput,
            ..QuestionItem::default()
        }],
        expires_in_seconds,
        from: vec!["someone-the-engine-replaces".into()],
        blocks: Vec::new(),
    }
}

#[async_trait]
impl Tool for Asker {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "form".into(),
            description: "Asks for a name".into(),
            input_schema: json!({"type": "object"}),
        }
    }

    async fn call(&self, _input: Value, _ctx: ToolContext) -> Result<Value, BoxError> {
        Err("a plain call cannot ask".into())
    }

    async fn call_or_ask(&self, _input: Value, ctx: ToolContext) -> Result<ToolStep, BoxError> {
        self.calls
            .lock()
            .unwrap()
            .insert(ctx.tool_call_id.clone(), Vec::new());
        Ok(ToolStep::Ask(question(1, self.expires_in_seconds)))
    }

    async fn resume(&self, answer: ToolAnswer, ctx: ToolContext) -> Result<ToolStep, BoxError> {
        self.got.lock().unwrap().push(answer.clone());
        let mut calls = self.calls.lock().unwrap();
        let Some(so_far) = calls.get_mut(&ctx.tool_call_id) else {
            return Err("the call is gone".into());
        };
        so_far.push(answer);
        let n = so_far.len() as u32;
        if n < self.times && matches!(so_far.last(), Some(ToolAnswer::Answered(_))) {
            return Ok(ToolStep::Ask(question(n + 1, self.expires_in_seconds)));
        }
        let so_far = calls.remove(&ctx.tool_call_id).unwrap();
        Ok(ToolStep::Done(json!({
            "got": so_far.iter().map(|a| match a {
                ToolAnswer::Answered(o) => json!(o.answers[0].selected),
                ToolAnswer::Declined { reason } => json!({"declined": reason}),
                ToolAnswer::Cancelled { reason } => json!({"cancelled": reason}),
            }).collect::<Vec<_>>()
        })))
    }
}

/// A model that calls `form` once, then answers with what the tool result said.
fn model() -> ScriptedModel {
    ScriptedModel::new(|req: &ModelRequest| match req.messages.last() {
        Some(ModelMessage::Tool {
            content, is_error, ..
        }) => reply(&format!("tool said ({is_error}): {content}")),
        _ => call("m1", "form", json!({})),
    })
}

struct World {
    engine: Engine,
    store: DynStore,
    got: Arc<Mutex<Vec<ToolAnswer>>>,
}

struct Setup {
    times: u32,
    expires_in_seconds: Option<u64>,
    clock: Option<Arc<ManualClock>>,
    agents: HashSet<UserId>,
    approval: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            times: 1,
            expires_in_seconds: None,
            clock: None,
            agents: HashSet::new(),
            approval: false,
        }
    }
}

fn engine(store: DynStore, s: Setup) -> World {
    let got = Arc::new(Mutex::new(Vec::new()));
    let asker: Arc<dyn Tool> = Arc::new(Asker {
        times: s.times,
        expires_in_seconds: s.expires_in_seconds,
        calls: Mutex::default(),
        got: got.clone(),
    });
    let tool = if s.approval {
        with_approval(asker, ApprovalPolicy::default())
    } else {
        asker
    };
    let offers = vec![frogbot_testkit::offer("a", model())];
    let config = EngineConfig {
        default_model: "a".into(),
        agents: s.agents,
        ..Default::default()
    };
    let engine = match s.clock {
        Some(c) => Engine::with_clock(store.clone(), offers, vec![tool], config, c),
        None => Engine::new(store.clone(), offers, vec![tool], config),
    };
    World { engine, store, got }
}

fn name(n: &str) -> QuestionOutput {
    QuestionOutput {
        answers: vec![QuestionAnswer {
            header: "Name".into(),
            selected: vec![n.into()],
        }],
    }
}

fn user(id: &str) -> Option<Actor> {
    Some(Actor {
        user: Some(UserId::new(id)),
        identity: None,
    })
}

async fn last_reply(store: &DynStore, c: &ChatId) -> UiMessage {
    let messages = store.list_messages(c).await.unwrap();
    messages
        .iter()
        .rev()
        .find(|m| m.message.role == Role::Assistant)
        .expect("a reply")
        .message
        .clone()
}

async fn form_part(store: &DynStore, c: &ChatId) -> ToolPart {
    last_reply(store, c)
        .await
        .tool_parts()
        .find(|t| t.tool_name == "form")
        .cloned()
        .expect("the form call")
}

/// Sends as `driver`; returns the turn's state once it waits or ends.
async fn send_as(w: &World, c: &ChatId, driver: &str) -> TurnState {
    started(
        w.engine
            .agents()
            .send(msg(c, Some(driver), "fill it"))
            .await
            .unwrap(),
    )
    .done
    .await
    .unwrap()
    .unwrap()
    .state
}

async fn answered_the_call_continues_with_the_answer(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let w = engine(store, Setup::default());
    let c = chat("answered");
    assert_eq!(send_as(&w, &c, "alice").await, TurnState::Awaiting);
    // The call waits: its part `input-available`, the question recorded under its own id,
    // asked of the driver.
    let part = form_part(&w.store, &c).await;
    assert_eq!(part.state, ToolState::InputAvailable);
    let reply = last_reply(&w.store, &c).await;
    let e = &reply.metadata.elicitations["m1"];
    assert_eq!((e.id.as_str(), e.asked), ("m1~1", 1));
    assert!(e.waiting());
    let row = w.store.get_chat(&c).await.unwrap().unwrap();
    let pending = w.engine.questions().pending(&row).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool_call_id, "m1~1");
    assert_eq!(pending[0].input.from, ["alice"], "the driver answers");
    assert_eq!(pending[0].input.questions[0].question, "Your name? (1)");
    // Only the driver.
    assert!(matches!(
        w.engine
            .questions()
            .settle(&c, "m1~1", Settle::Answer(name("Bob")), user("bob"))
            .await,
        Err(Error::Forbidden { .. })
    ));
    let s = w
        .engine
        .questions()
        .settle(&c, "m1~1", Settle::Answer(name("Ada")), user("alice"))
        .await
        .unwrap();
    assert_eq!(s.state, TurnState::Running);
    wait_quiet(&w.store, &c).await;
    assert_eq!(w.engine.chats().state(&c).await.unwrap(), TurnState::Idle);
    assert_eq!(*w.got.lock().unwrap(), [ToolAnswer::Answered(name("Ada"))]);
    let part = form_part(&w.store, &c).await;
    assert_eq!(part.state, ToolState::OutputAvailable);
    assert_eq!(part.output, Some(json!({"got": [["Ada"]]})));
    let reply = last_reply(&w.store, &c).await;
    assert!(!reply.metadata.elicitations["m1"].waiting());
    assert_eq!(reply.text(), "tool said (false): {\"got\":[[\"Ada\"]]}");
    // A second answer is stale.
    assert!(matches!(
        w.engine
            .questions()
            .settle(&c, "m1~1", Settle::Answer(name("Ada")), user("alice"))
            .await,
        Err(Error::Stale { .. })
    ));
}

async fn dismissed_declines_and_the_turn_goes_on(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let w = engine(store, Setup::default());
    let c = chat("dismissed");
    assert_eq!(send_as(&w, &c, "alice").await, TurnState::Awaiting);
    w.engine
        .questions()
        .settle(&c, "m1~1", Settle::Dismiss, user("alice"))
        .await
        .unwrap();
    wait_quiet(&w.store, &c).await;
    assert_eq!(
        *w.got.lock().unwrap(),
        [ToolAnswer::Declined { reason: None }]
    );
    let part = form_part(&w.store, &c).await;
    assert_eq!(part.state, ToolState::OutputAvailable, "{part:?}");
    assert!(
        last_reply(&w.store, &c)
            .await
            .text()
            .starts_with("tool said (false)")
    );
}

async fn expired_cancels(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let clock = Arc::new(ManualClock::new(frogbot_core::model::now_millis()));
    let w = engine(
        store,
        Setup {
            expires_in_seconds: Some(60),
            clock: Some(clock.clone()),
            ..Setup::default()
        },
    );
    let c = chat("expired");
    assert_eq!(send_as(&w, &c, "alice").await, TurnState::Awaiting);
    assert!(form_part(&w.store, &c).await.expires_at.is_some());
    let reply_id = w
        .store
        .get_chat(&c)
        .await
        .unwrap()
        .unwrap()
        .awaiting_message_id
        .unwrap();
    clock.advance(61_000);
    w.engine.questions().expire(&c, &reply_id).await.unwrap();
    wait_quiet(&w.store, &c).await;
    assert_eq!(
        *w.got.lock().unwrap(),
        [ToolAnswer::Cancelled {
            reason: "nobody answered in time".into()
        }]
    );
    assert_eq!(
        form_part(&w.store, &c).await.state,
        ToolState::OutputAvailable
    );
}

async fn withdrawn_cancels_and_the_turn_ends(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let w = engine(store, Setup::default());
    let c = chat("withdrawn");
    assert_eq!(send_as(&w, &c, "alice").await, TurnState::Awaiting);
    let reply_id = w
        .store
        .get_chat(&c)
        .await
        .unwrap()
        .unwrap()
        .awaiting_message_id
        .unwrap();
    assert!(w.engine.questions().withdraw(&c, &reply_id).await.unwrap());
    wait_quiet(&w.store, &c).await;
    assert_eq!(w.engine.chats().state(&c).await.unwrap(), TurnState::Idle);
    let part = form_part(&w.store, &c).await;
    assert_eq!(part.state, ToolState::OutputError);
    assert_eq!(part.error_text.as_deref(), Some(ELICITATION_STOPPED_TEXT));
    // The call is told (in the background).
    let got = w.got.clone();
    eventually(
        "the call to be cancelled",
        std::time::Duration::from_secs(10),
        async || !got.lock().unwrap().is_empty(),
    )
    .await;
    assert!(matches!(
        w.got.lock().unwrap()[0],
        ToolAnswer::Cancelled { .. }
    ));
}

async fn a_call_may_ask_again(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let w = engine(
        store,
        Setup {
            times: 2,
            ..Setup::default()
        },
    );
    let c = chat("twice");
    assert_eq!(send_as(&w, &c, "alice").await, TurnState::Awaiting);
    w.engine
        .questions()
        .settle(&c, "m1~1", Settle::Answer(name("Ada")), user("alice"))
        .await
        .unwrap();
    // Asked again, under a fresh record.
    eventually(
        "the second question",
        std::time::Duration::from_secs(10),
        async || {
            last_reply(&w.store, &c).await.metadata.elicitations["m1"].asked == 2
                && w.engine.chats().state(&c).await.unwrap() == TurnState::Awaiting
        },
    )
    .await;
    let row = w.store.get_chat(&c).await.unwrap().unwrap();
    let pending = w.engine.questions().pending(&row).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool_call_id, "m1~2");
    assert_eq!(pending[0].input.questions[0].question, "Your name? (2)");
    assert_eq!(
        form_part(&w.store, &c).await.state,
        ToolState::InputAvailable
    );
    w.engine
        .questions()
        .settle(&c, "m1~2", Settle::Answer(name("Lovelace")), user("alice"))
        .await
        .unwrap();
    wait_quiet(&w.store, &c).await;
    assert_eq!(w.engine.chats().state(&c).await.unwrap(), TurnState::Idle);
    assert_eq!(
        form_part(&w.store, &c).await.output,
        Some(json!({"got": [["Ada"], ["Lovelace"]]}))
    );
}

async fn an_agent_driven_turn_asks_nobody(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let w = engine(
        store,
        Setup {
            agents: HashSet::from([UserId::new("bot")]),
            ..Setup::default()
        },
    );
    let c = chat("agent");
    assert_eq!(send_as(&w, &c, "bot").await, TurnState::Idle);
    let got = w.got.lock().unwrap().clone();
    assert!(
        matches!(&got[..], [ToolAnswer::Declined { reason: Some(r) }] if r.contains("agent drives")),
        "{got:?}"
    );
    assert_eq!(
        form_part(&w.store, &c).await.state,
        ToolState::OutputAvailable
    );
    let row = w.store.get_chat(&c).await.unwrap().unwrap();
    assert!(w.engine.questions().pending(&row).await.unwrap().is_empty());
}

async fn an_approved_call_may_ask_too(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let w = engine(
        store,
        Setup {
            approval: true,
            ..Setup::default()
        },
    );
    let c = chat("approved");
    assert_eq!(send_as(&w, &c, "alice").await, TurnState::Awaiting);
    let approve = QuestionOutput {
        answers: vec![QuestionAnswer {
            header: APPROVAL_HEADER.into(),
            selected: vec![APPROVE_LABEL.into()],
        }],
    };
    w.engine
        .questions()
        .settle(&c, "m1", Settle::Answer(approve), user("alice"))
        .await
        .unwrap();
    // Approved, it runs and asks: the turn waits again, on the elicitation's record.
    eventually(
        "the call's question",
        std::time::Duration::from_secs(10),
        async || {
            let row = w.store.get_chat(&c).await.unwrap().unwrap();
            w.engine
                .questions()
                .pending(&row)
                .await
                .unwrap()
                .iter()
                .any(|q| q.tool_call_id == "m1~1")
        },
    )
    .await;
    w.engine
        .questions()
        .settle(&c, "m1~1", Settle::Answer(name("Ada")), user("alice"))
        .await
        .unwrap();
    wait_quiet(&w.store, &c).await;
    let part = form_part(&w.store, &c).await;
    assert_eq!(part.state, ToolState::OutputAvailable, "{part:?}");
    assert_eq!(part.approval.unwrap().approved, Some(true));
    assert_eq!(part.output, Some(json!({"got": [["Ada"]]})));
}

frogbot_testkit::backends!(
    answered_the_call_continues_with_the_answer,
    dismissed_declines_and_the_turn_goes_on,
    expired_cancels,
    withdrawn_cancels_and_the_turn_ends,
    a_call_may_ask_again,
    an_agent_driven_turn_asks_nobody,
    an_approved_call_may_ask_too,
);
