//! Approvals in the core: a tool whose calls need a person's approval is asked as a question
//! (first answer wins, access by approver, expiry denies, restarts lose nothing) and runs once
//! after the approval — on SQLite (`sqlite::…`) and PostgreSQL (`postgres::…`).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{
    ApprovalPolicy, Engine, EngineConfig, ManualClock, ModelMessage, ModelRequest, NO_APPROVERS,
    Settle, tool_fn, with_approval,
};
use frogbot_core::model::{
    APPROVAL_EXPIRED_REASON, APPROVAL_HEADER, APPROVE_LABEL, Actor, ChatId, DENY_LABEL,
    MessagePart, QuestionAnswer, QuestionOutput, Role, ToolPart, ToolState, TurnState, UserId,
};
use frogbot_core::store::DynStore;
use frogbot_core::{BoxError, Error};
use frogbot_testkit::{chat, msg, started, wait_quiet};
use serde_json::{Value, json};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Merge {
    pr: u64,
}

/// A model that calls `merge` once, then answers with what the tool result said.
fn model() -> ScriptedModel {
    ScriptedModel::new(|req: &ModelRequest| match req.messages.last() {
        Some(ModelMessage::Tool {
            content, is_error, ..
        }) => reply(&format!("tool said ({is_error}): {content}")),
        _ => call("m1", "merge", json!({"pr": 7})),
    })
}

struct World {
    engine: Engine,
    store: DynStore,
    runs: Arc<AtomicUsize>,
    model: ScriptedModel,
}

fn engine(store: DynStore, policy: ApprovalPolicy, clock: Option<Arc<ManualClock>>) -> World {
    engine_with(store, policy, clock, HashSet::new())
}

/// [`engine`] whose `agents` are agent principals.
fn engine_with(
    store: DynStore,
    policy: ApprovalPolicy,
    clock: Option<Arc<ManualClock>>,
    agents: HashSet<UserId>,
) -> World {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let merge = tool_fn("merge", "Merges a pull request", move |i: Merge, _ctx| {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok::<_, BoxError>(json!({"merged": i.pr}))
        }
    });
    let model = model();
    let offers = vec![frogbot_testkit::offer("a", model.clone())];
    let config = EngineConfig {
        default_model: "a".into(),
        agents,
        ..Default::default()
    };
    let tools = vec![with_approval(merge, policy)];
    let engine = match clock {
        Some(c) => Engine::with_clock(store.clone(), offers, tools, config, c),
        None => Engine::new(store.clone(), offers, tools, config),
    };
    World {
        engine,
        store,
        runs,
        model,
    }
}

fn pick(label: &str) -> QuestionOutput {
    QuestionOutput {
        answers: vec![QuestionAnswer {
            header: APPROVAL_HEADER.into(),
            selected: vec![label.into()],
        }],
    }
}

fn user(id: &str) -> Option<Actor> {
    Some(Actor {
        user: Some(UserId::new(id)),
        identity: None,
    })
}

/// The `merge` call's part in the chat's last reply.
async fn merge_part(store: &DynStore, c: &ChatId) -> ToolPart {
    let messages = store.list_messages(c).await.unwrap();
    let reply = messages
        .iter()
        .rev()
        .find(|m| m.message.role == Role::Assistant)
        .expect("a reply");
    reply
        .message
        .tool_parts()
        .find(|t| t.tool_name == "merge")
        .cloned()
        .expect("the merge call")
}

async fn last_text(store: &DynStore, c: &ChatId) -> String {
    let messages = store.list_messages(c).await.unwrap();
    messages
        .iter()
        .rev()
        .find(|m| m.message.role == Role::Assistant)
        .map(|m| m.message.text())
        .unwrap_or_default()
}

/// Asks in `c` as alice and returns once the approval waits.
async fn ask(w: &World, c: &ChatId) {
    ask_as(w, c, "alice").await;
}

/// Asks in `c` as `driver` and returns once the approval waits.
async fn ask_as(w: &World, c: &ChatId, driver: &str) {
    let out = started(
        w.engine
            .agents()
            .send(msg(c, Some(driver), "merge it"))
            .await
            .unwrap(),
    )
    .done
    .await
    .unwrap()
    .unwrap();
    assert_eq!(out.state, TurnState::Awaiting);
}

async fn approve_runs_the_tool_once_and_the_agent_continues_with_its_result(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let w = engine(store, ApprovalPolicy::default(), None);
    let c = chat("approve");
    ask(&w, &c).await;
    // Waiting: the call has not run; its part asks, with the question in the descriptor.
    assert_eq!(w.runs.load(Ordering::SeqCst), 0);
    let part = merge_part(&w.store, &c).await;
    assert_eq!(part.state, ToolState::ApprovalRequested);
    let approval = part.approval.clone().unwrap();
    assert_eq!(approval.id, "m1");
    let question = approval.question().expect("the question");
    assert_eq!(question.from, ["alice"], "the driver approves by default");
    assert!(question.questions[0].question.contains("\"pr\": 7"));
    // The question record is the approval's: pending in the chat.
    let row = w.store.get_chat(&c).await.unwrap().unwrap();
    let pending = w.engine.questions().pending(&row).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool_call_id, "m1");

    let s = w
        .engine
        .questions()
        .settle(&c, "m1", Settle::Answer(pick(APPROVE_LABEL)), user("alice"))
        .await
        .unwrap();
    assert_eq!(s.state, TurnState::Running);
    wait_quiet(&w.store, &c).await;
    assert_eq!(w.runs.load(Ordering::SeqCst), 1, "ran once");
    let part = merge_part(&w.store, &c).await;
    assert_eq!(part.state, ToolState::OutputAvailable);
    assert_eq!(part.output, Some(json!({"merged": 7})));
    let approval = part.approval.unwrap();
    assert_eq!(approval.approved, Some(true));
    assert_eq!(approval.by.as_deref(), Some("alice"));
    assert!(approval.at.is_some());
    assert!(approval.descriptor.is_none());
    assert_eq!(
        last_text(&w.store, &c).await,
        "tool said (false): {\"merged\":7}"
    );
    // The reply's metadata shows it too.
    let messages = w.store.list_messages(&c).await.unwrap();
    let reply = &messages.last().unwrap().message;
    assert_eq!(reply.metadata.approvals["m1"].approved, Some(true));
    // The model saw the call and its result, once each.
    let last = w.model.requests().last().cloned().unwrap();
    let results = last
        .messages
        .iter()
        .filter(|m| matches!(m, ModelMessage::Tool { .. }))
        .count();
    assert_eq!(results, 1);
    // A second answer is stale and runs nothing.
    assert!(matches!(
        w.engine
            .questions()
            .settle(&c, "m1", Settle::Answer(pick(APPROVE_LABEL)), user("alice"))
            .await,
        Err(Error::Stale { .. })
    ));
    assert_eq!(w.runs.load(Ordering::SeqCst), 1);
}

async fn deny_with_a_reason_never_runs_and_the_model_reads_why(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let w = engine(store, ApprovalPolicy::default(), None);
    let c = chat("deny");
    ask(&w, &c).await;
    w.engine
        .questions()
        .settle(
            &c,
            "m1",
            Settle::Answer(pick("not before the release")),
            user("alice"),
        )
        .await
        .unwrap();
    wait_quiet(&w.store, &c).await;
    assert_eq!(w.runs.load(Ordering::SeqCst), 0);
    let part = merge_part(&w.store, &c).await;
    assert_eq!(part.state, ToolState::OutputDenied);
    let approval = part.approval.unwrap();
    assert_eq!(approval.approved, Some(false));
    assert_eq!(approval.reason.as_deref(), Some("not before the release"));
    let text = last_text(&w.store, &c).await;
    assert!(
        text.starts_with("tool said (true): A person denied this call")
            && text.contains("denied by alice")
            && text.contains("not before the release"),
        "{text}"
    );

    // Plain Deny: no reason.
    let c = chat("deny2");
    ask(&w, &c).await;
    w.engine
        .questions()
        .settle(&c, "m1", Settle::Answer(pick(DENY_LABEL)), user("alice"))
        .await
        .unwrap();
    wait_quiet(&w.store, &c).await;
    let part = merge_part(&w.store, &c).await;
    assert_eq!(part.state, ToolState::OutputDenied);
    assert_eq!(part.approval.unwrap().reason, None);
    assert_eq!(w.runs.load(Ordering::SeqCst), 0);
}

async fn a_non_approver_is_refused_and_the_approval_stays_open(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let policy = ApprovalPolicy {
        approvers: vec!["carol".into(), "slack:U9".into()],
        expires_in_seconds: None,
    };
    let w = engine(store, policy, None);
    let c = chat("nonapprover");
    ask(&w, &c).await;
    // The driver is not among the approvers; nor is an anonymous caller.
    for who in [user("alice"), None, user("bob")] {
        assert!(matches!(
            w.engine
                .questions()
                .settle(&c, "m1", Settle::Answer(pick(APPROVE_LABEL)), who)
                .await,
            Err(Error::Forbidden { .. })
        ));
    }
    assert_eq!(
        w.engine.chats().state(&c).await.unwrap(),
        TurnState::Awaiting
    );
    assert_eq!(
        merge_part(&w.store, &c).await.state,
        ToolState::ApprovalRequested
    );
    // An approver by channel identity.
    let identity = Actor {
        user: None,
        identity: Some(frogbot_core::model::ChannelIdentity {
            platform: "slack".into(),
            user: frogbot_core::model::PlatformUser {
                id: "U9".into(),
                ..Default::default()
            },
        }),
    };
    w.engine
        .questions()
        .settle(
            &c,
            "m1",
            Settle::Answer(pick(APPROVE_LABEL)),
            Some(identity),
        )
        .await
        .unwrap();
    wait_quiet(&w.store, &c).await;
    assert_eq!(w.runs.load(Ordering::SeqCst), 1);
    let approval = merge_part(&w.store, &c).await.approval.unwrap();
    assert_eq!(approval.by.as_deref(), Some("slack:U9"));
}

async fn an_expired_approval_denies(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let clock = Arc::new(ManualClock::new(frogbot_core::model::now_millis()));
    let policy = ApprovalPolicy {
        approvers: vec![],
        expires_in_seconds: Some(60),
    };
    let w = engine(store, policy, Some(clock.clone()));
    let c = chat("expire");
    ask(&w, &c).await;
    let part = merge_part(&w.store, &c).await;
    assert!(part.expires_at.is_some(), "the deadline is on the part");
    let reply_id = w.store.get_chat(&c).await.unwrap().unwrap();
    let reply_id = reply_id.awaiting_message_id.clone().unwrap();
    // Not yet: nothing happens.
    w.engine.questions().expire(&c, &reply_id).await.unwrap();
    assert_eq!(
        w.engine.chats().state(&c).await.unwrap(),
        TurnState::Awaiting
    );
    clock.advance(61_000);
    // Past the deadline, an answer is stale, and the expiry denies.
    assert!(matches!(
        w.engine
            .questions()
            .settle(&c, "m1", Settle::Answer(pick(APPROVE_LABEL)), user("alice"))
            .await,
        Err(Error::Stale { .. })
    ));
    wait_quiet(&w.store, &c).await;
    assert_eq!(w.runs.load(Ordering::SeqCst), 0);
    let part = merge_part(&w.store, &c).await;
    assert_eq!(part.state, ToolState::OutputDenied);
    assert_eq!(
        part.approval.unwrap().reason.as_deref(),
        Some(APPROVAL_EXPIRED_REASON)
    );
    assert!(last_text(&w.store, &c).await.contains("expired"));
}

async fn thirty_two_racing_answers_give_one_outcome_and_at_most_one_run(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let w = Arc::new(engine(store, ApprovalPolicy::default(), None));
    for round in 0..3 {
        let c = chat(&format!("race{round}"));
        ask(&w, &c).await;
        let before = w.runs.load(Ordering::SeqCst);
        let mut tasks = Vec::new();
        for i in 0..32 {
            let w = w.clone();
            let c = c.clone();
            tasks.push(tokio::spawn(async move {
                let label = if i % 2 == 0 {
                    APPROVE_LABEL
                } else {
                    DENY_LABEL
                };
                let r = w
                    .engine
                    .questions()
                    .settle(&c, "m1", Settle::Answer(pick(label)), user("alice"))
                    .await;
                (label, r.is_ok())
            }));
        }
        let mut winners = Vec::new();
        for t in tasks {
            let (label, ok) = t.await.unwrap();
            if ok {
                winners.push(label);
            }
        }
        assert_eq!(winners.len(), 1, "one answer wins: {winners:?}");
        wait_quiet(&w.store, &c).await;
        let ran = w.runs.load(Ordering::SeqCst) - before;
        let part = merge_part(&w.store, &c).await;
        if winners[0] == APPROVE_LABEL {
            assert_eq!(ran, 1);
            assert_eq!(part.state, ToolState::OutputAvailable);
        } else {
            assert_eq!(ran, 0);
            assert_eq!(part.state, ToolState::OutputDenied);
        }
    }
}

async fn an_approval_waiting_across_a_restart_runs_once_after_it(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let c = chat("restart");
    {
        let w = engine(store.clone(), ApprovalPolicy::default(), None);
        ask(&w, &c).await;
        w.engine.drain(std::time::Duration::from_millis(10)).await;
    }
    // A new process: the same database, a new engine.
    let w = engine(store, ApprovalPolicy::default(), None);
    w.engine
        .questions()
        .settle(&c, "m1", Settle::Answer(pick(APPROVE_LABEL)), user("alice"))
        .await
        .unwrap();
    wait_quiet(&w.store, &c).await;
    assert_eq!(w.runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        merge_part(&w.store, &c).await.output,
        Some(json!({"merged": 7}))
    );
}

async fn a_step_mixing_an_approval_and_a_plain_call_runs_the_plain_one_at_once(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let merge = with_approval(
        tool_fn("merge", "Merges", move |_: Merge, _ctx| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok::<_, BoxError>(json!("merged"))
            }
        }),
        ApprovalPolicy::default(),
    );
    let look = tool_fn("look", "Looks", |_: Value, _ctx| async {
        Ok::<_, BoxError>(json!("looked"))
    });
    let model = ScriptedModel::new(|req: &ModelRequest| {
        if matches!(req.messages.last(), Some(ModelMessage::Tool { .. })) {
            return reply("done");
        }
        let mut e = call("m1", "merge", json!({"pr": 1}));
        e.truncate(1);
        e.extend(call("l1", "look", json!({})));
        e
    });
    let engine = Engine::new(
        store.clone(),
        vec![frogbot_testkit::offer("a", model)],
        vec![merge, look],
        EngineConfig {
            default_model: "a".into(),
            ..Default::default()
        },
    );
    let c = chat("mixed");
    started(
        engine
            .agents()
            .send(msg(&c, Some("alice"), "go"))
            .await
            .unwrap(),
    )
    .done
    .await
    .unwrap()
    .unwrap();
    let messages = store.list_messages(&c).await.unwrap();
    let reply = &messages.last().unwrap().message;
    let states: Vec<_> = reply
        .tool_parts()
        .map(|t| (t.tool_name.clone(), t.state))
        .collect();
    assert_eq!(
        states,
        [
            ("merge".to_string(), ToolState::ApprovalRequested),
            ("look".to_string(), ToolState::OutputAvailable)
        ]
    );
    // The driver approves.
    engine
        .questions()
        .settle(&c, "m1", Settle::Answer(pick(APPROVE_LABEL)), user("alice"))
        .await
        .unwrap();
    wait_quiet(&store, &c).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let messages = store.list_messages(&c).await.unwrap();
    let reply = &messages.last().unwrap().message;
    assert_eq!(reply.text(), "done");
    assert!(
        reply
            .parts
            .iter()
            .all(|p| !matches!(p, MessagePart::Tool(t) if t.state != ToolState::OutputAvailable))
    );
}

/// Defect 1: with no configured approvers and no driver, nobody is asked: the call is refused,
/// nothing runs, and the model reads why.
async fn a_call_nobody_may_approve_is_refused_not_asked(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let w = engine(store, ApprovalPolicy::default(), None);
    let c = chat("nobody");
    let out = started(
        w.engine
            .agents()
            .send(msg(&c, None, "merge it"))
            .await
            .unwrap(),
    )
    .done
    .await
    .unwrap()
    .unwrap();
    assert_eq!(out.state, TurnState::Idle, "nothing waits for an answer");
    assert_eq!(w.runs.load(Ordering::SeqCst), 0);
    let part = merge_part(&w.store, &c).await;
    assert_eq!(part.state, ToolState::OutputError);
    assert_eq!(part.error_text.as_deref(), Some(NO_APPROVERS));
    assert!(part.approval.is_none());
    let row = w.store.get_chat(&c).await.unwrap().unwrap();
    assert!(w.engine.questions().pending(&row).await.unwrap().is_empty());
    // Nobody can approve it: not an anonymous caller, not a user.
    for who in [None, user("alice")] {
        assert!(
            w.engine
                .questions()
                .settle(&c, "m1", Settle::Answer(pick(APPROVE_LABEL)), who)
                .await
                .is_err()
        );
    }
    assert_eq!(w.runs.load(Ordering::SeqCst), 0);
    let text = last_text(&w.store, &c).await;
    assert!(
        text.starts_with("tool said (true): this call needs approval and nobody may approve it"),
        "{text}"
    );
}

/// Defect 2: an agent principal never approves a call of a turn it drove — it is left out of
/// the approvers, and refused when it answers — while a listed human approves.
async fn an_agent_cannot_approve_its_own_call_but_a_listed_human_can(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let agents: HashSet<UserId> = [UserId::new("bot")].into();
    let policy = ApprovalPolicy {
        approvers: vec!["bot".into(), "carol".into(), "slack:U9".into()],
        expires_in_seconds: None,
    };
    let w = engine_with(store.clone(), policy, None, agents.clone());
    let c = chat("agent");
    ask_as(&w, &c, "bot").await;
    let question = merge_part(&w.store, &c)
        .await
        .approval
        .unwrap()
        .question()
        .unwrap();
    assert_eq!(
        question.from,
        ["carol", "slack:U9"],
        "the calling agent is left out"
    );
    // The agent, by its user id or with a listed channel identity, is refused.
    let bot_on_slack = Actor {
        user: Some(UserId::new("bot")),
        identity: Some(frogbot_core::model::ChannelIdentity {
            platform: "slack".into(),
            user: frogbot_core::model::PlatformUser {
                id: "U9".into(),
                ..Default::default()
            },
        }),
    };
    for who in [user("bot"), Some(bot_on_slack)] {
        assert!(matches!(
            w.engine
                .questions()
                .settle(&c, "m1", Settle::Answer(pick(APPROVE_LABEL)), who)
                .await,
            Err(Error::Forbidden { .. })
        ));
    }
    assert_eq!(
        w.engine.chats().state(&c).await.unwrap(),
        TurnState::Awaiting
    );
    assert_eq!(w.runs.load(Ordering::SeqCst), 0);
    w.engine
        .questions()
        .settle(&c, "m1", Settle::Answer(pick(APPROVE_LABEL)), user("carol"))
        .await
        .unwrap();
    wait_quiet(&w.store, &c).await;
    assert_eq!(w.runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        merge_part(&w.store, &c)
            .await
            .approval
            .unwrap()
            .by
            .as_deref(),
        Some("carol")
    );

    // With no approvers configured, an agent's call has nobody to ask: refused, not run.
    let w = engine_with(store, ApprovalPolicy::default(), None, agents);
    let c = chat("agent-alone");
    started(
        w.engine
            .agents()
            .send(msg(&c, Some("bot"), "merge it"))
            .await
            .unwrap(),
    )
    .done
    .await
    .unwrap()
    .unwrap();
    let part = merge_part(&w.store, &c).await;
    assert_eq!(part.state, ToolState::OutputError);
    assert_eq!(part.error_text.as_deref(), Some(NO_APPROVERS));
    assert_eq!(w.runs.load(Ordering::SeqCst), 0);
}

frogbot_testkit::backends!(
    a_call_nobody_may_approve_is_refused_not_asked,
    an_agent_cannot_approve_its_own_call_but_a_listed_human_can,
    approve_runs_the_tool_once_and_the_agent_continues_with_its_result,
    deny_with_a_reason_never_runs_and_the_model_reads_why,
    a_non_approver_is_refused_and_the_approval_stays_open,
    an_expired_approval_denies,
    thirty_two_racing_answers_give_one_outcome_and_at_most_one_run,
    an_approval_waiting_across_a_restart_runs_once_after_it,
    a_step_mixing_an_approval_and_a_plain_call_runs_the_plain_one_at_once,
);
