//! End to end with FrogBot's engine (SQLite): a Slack mention starts a turn, the agent asks, the
//! question is posted as Block Kit to a fake Slack Web API, a button click converted from a real
//! `block_actions` payload is recorded, every message is closed, and the agent continues.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::post;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{
    AllowAll, Channel, ChannelMessageOutcome, Engine, EngineConfig, InteractionOutcome,
    ModelMessage, ModelOffer, ModelRequest, Sent, channel_chat_id,
};
use frogbot_core::model::{PrefixedIdentity, TurnState, UserId, now_millis};
use frogbot_slack::convert::{interaction_from_payload, message_from_push_json};
use frogbot_slack::{PLATFORM, SlackQuestions, SlackWebApi};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use slack_morphism::prelude::*;

type Calls = Arc<Mutex<Vec<(String, Value)>>>;

async fn api(
    State(calls): State<Calls>,
    Path(method): Path<String>,
    body: String,
) -> axum::Json<Value> {
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let n = {
        let mut c = calls.lock().unwrap();
        c.push((method.clone(), body.clone()));
        c.len()
    };
    let channel = body["channel"].clone();
    axum::Json(match method.as_str() {
        "chat.postMessage" => {
            let ts = format!("1700000100.{n:06}");
            json!({"ok": true, "channel": channel, "ts": ts, "message": {"ts": ts, "text": body["text"]}})
        }
        "chat.update" => {
            json!({"ok": true, "channel": channel, "ts": body["ts"], "message": {"text": body["text"]}})
        }
        "chat.postEphemeral" => json!({"ok": true, "message_ts": "1700000500.000001"}),
        _ => json!({"ok": false, "error": "unknown_method"}),
    })
}

fn last_user(req: &ModelRequest) -> String {
    req.messages
        .iter()
        .rev()
        .find_map(|m| match m {
            ModelMessage::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slack_click_is_recorded_and_the_agent_continues() {
    let calls: Calls = Arc::default();
    let app = Router::new()
        .route("/api/{method}", post(api))
        .with_state(calls.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let connector = SlackClientHyperConnector::with_connector(HttpConnector::new())
        .with_slack_api_url(&format!("http://{addr}/api"));
    let questions = SlackQuestions::new(SlackWebApi::new(connector, "xoxb-test"));

    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let model = ScriptedModel::new(|req: &ModelRequest| {
        if let Some(ModelMessage::Tool { content, .. }) = req.messages.last() {
            return reply(&format!("deploying: {content}"));
        }
        if req.tools.iter().any(|t| t.name == "question") && last_user(req).contains("deploy") {
            return call(
                "c1",
                "question",
                json!({"questions": [{"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]}]}),
            );
        }
        reply("hello")
    });
    let engine = Engine::new(
        store.clone(),
        vec![ModelOffer {
            id: "main".into(),
            model: Arc::new(model.clone()),
            reasoning: vec![],
        }],
        vec![],
        EngineConfig::default(),
    )
    .with_channel(Channel {
        platform: PLATFORM.into(),
        questions: Some(Arc::new(questions)),
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: None,
    });

    // Someone mentions the bot in a channel: the mention starts a thread at its own ts.
    let push = json!({
        "token": "t", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
        "event_id": "Ev1", "event_time": 1700000000,
        "event": {"type": "app_mention", "user": "U123", "text": "<@UBOT> deploy please",
                  "ts": "1700000000.000100", "channel": "C42", "event_ts": "1700000000.000100"}
    });
    let incoming = message_from_push_json(&push, "UBOT").unwrap().unwrap();
    assert!(incoming.mentioned);
    assert_eq!(incoming.thread, "C42:1700000000.000100");
    match engine
        .channel_message(PLATFORM, &incoming.thread, incoming.message)
        .await
        .unwrap()
    {
        ChannelMessageOutcome::Sent(Sent::Started(h)) => {
            h.done.await.unwrap().unwrap();
        }
        other => panic!("expected a turn, got {other:?}"),
    }
    let chat = channel_chat_id(PLATFORM, &incoming.thread);
    assert_eq!(engine.state(&chat).await.unwrap(), TurnState::Awaiting);
    let posted = calls.lock().unwrap().clone();
    assert_eq!(posted.len(), 1);
    assert_eq!(posted[0].0, "chat.postMessage");
    assert_eq!(posted[0].1["thread_ts"], "1700000000.000100");
    let button = &posted[0].1["blocks"][1]["elements"][1];
    assert_eq!(button["text"]["text"], "prod");

    // A click on "prod", as Slack sends it.
    let payload = json!({
        "type": "block_actions",
        "user": {"id": "U777", "username": "bob", "team_id": "T1"},
        "api_app_id": "A1", "team": {"id": "T1", "domain": "frogs"},
        "container": {"type": "message", "message_ts": "1700000100.000001", "channel_id": "C42"},
        "trigger_id": "1.2.3", "channel": {"id": "C42", "name": "ops"},
        "actions": [{"type": "button", "action_id": button["action_id"], "value": button["value"], "action_ts": "1700000150.1"}]
    });
    let click = interaction_from_payload(&payload).unwrap().unwrap();
    let out = engine
        .handle_interaction(PLATFORM, Some(&incoming.thread), &click)
        .await
        .unwrap();
    assert_eq!(out, InteractionOutcome::Answered);

    let mut events = engine.subscribe();
    while engine.state(&chat).await.unwrap() != TurnState::Idle {
        let _ = tokio::time::timeout(std::time::Duration::from_millis(100), events.recv()).await;
    }
    let q = store
        .get_question(&chat, "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(q.closed);
    assert_eq!(q.actor.unwrap().user, Some(UserId::new("slack:U777")));
    // settled closed the message.
    let updates: Vec<_> = calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _)| m == "chat.update")
        .cloned()
        .collect();
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].1["ts"], "1700000100.000001");
    assert_eq!(
        updates[0].1["blocks"][1]["elements"][0]["text"],
        "✅ Answered by <@U777>: prod"
    );
    // The agent continued with the answer.
    let last = model.requests().pop().unwrap();
    assert!(
        matches!(last.messages.last(), Some(ModelMessage::Tool { content, .. }) if content.contains("prod"))
    );

    // A late click on the closed question gets a private "stale" note.
    let late = engine
        .handle_interaction(PLATFORM, Some(&incoming.thread), &click)
        .await
        .unwrap();
    assert_eq!(late, InteractionOutcome::Stale);
    assert!(
        calls
            .lock()
            .unwrap()
            .iter()
            .any(|(m, b)| m == "chat.postEphemeral" && b["user"] == "U777")
    );
}
