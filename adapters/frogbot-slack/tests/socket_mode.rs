//! Socket Mode through slack-morphism's real listener: a fake Web API answers `auth.test` and
//! `apps.connections.open` with a `ws://` URL of a local WebSocket server that speaks Slack's
//! envelopes (`hello`, `events_api`, `interactive`) and reads the acknowledgements. Deliveries go
//! into the same handling as HTTP mode (engine on SQLite, the demo model).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::post;
use frogbot_core::agent::scripted::demo_model;
use frogbot_core::agent::{AllowAll, Engine, EngineConfig, ModelOffer};
use frogbot_core::model::PrefixedIdentity;
use frogbot_slack::channel::{SlackChannel, SlackChannelConfig};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

type Calls = Arc<Mutex<Vec<(String, Value, String)>>>;

#[derive(Clone)]
struct FakeApi {
    calls: Calls,
    ws_url: String,
}

async fn api(
    State(fake): State<FakeApi>,
    Path(method): Path<String>,
    headers: axum::http::HeaderMap,
    body: String,
) -> axum::Json<Value> {
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let n = {
        let mut c = fake.calls.lock().unwrap();
        c.push((method.clone(), body.clone(), auth));
        c.len()
    };
    let now = frogbot_core::model::now_millis() / 1000;
    axum::Json(match method.as_str() {
        "auth.test" => json!({
            "ok": true, "url": "https://frogs.slack.com/", "team": "Frogs", "user": "frogbot",
            "team_id": "T1", "user_id": "UBOT", "bot_id": "B1"
        }),
        "apps.connections.open" => json!({"ok": true, "url": fake.ws_url}),
        "chat.postMessage" => {
            let ts = format!("{now}.{n:06}");
            json!({"ok": true, "channel": body["channel"], "ts": ts, "message": {"ts": ts, "text": body["text"]}})
        }
        "chat.update" => {
            json!({"ok": true, "channel": body["channel"], "ts": body["ts"], "message": {"text": body["text"]}})
        }
        "chat.postEphemeral" => json!({"ok": true, "message_ts": format!("{now}.{n:06}")}),
        _ => json!({"ok": false, "error": "unknown_method"}),
    })
}

/// One accepted Socket Mode connection: frames to send, and frames the client sent.
struct Conn {
    send: mpsc::UnboundedSender<String>,
    recv: mpsc::UnboundedReceiver<String>,
}

impl Conn {
    async fn ack(&mut self) -> Value {
        let frame = tokio::time::timeout(Duration::from_secs(20), self.recv.recv())
            .await
            .expect("an acknowledgement in time")
            .expect("socket open");
        serde_json::from_str(&frame).unwrap()
    }
}

async fn ws_server(listener: tokio::net::TcpListener, conns: mpsc::UnboundedSender<Conn>) {
    while let Ok((tcp, _)) = listener.accept().await {
        let conns = conns.clone();
        tokio::spawn(async move {
            let Ok(ws) = tokio_tungstenite::accept_async(tcp).await else {
                return;
            };
            let (mut sink, mut stream) = ws.split();
            let (to_client, mut outbox) = mpsc::unbounded_channel::<String>();
            let (from_client, inbox) = mpsc::unbounded_channel::<String>();
            let hello = json!({
                "type": "hello", "num_connections": 1,
                "debug_info": {"host": "applink-fake", "approximate_connection_time": 18060},
                "connection_info": {"app_id": "A1"}
            });
            if sink.send(Message::text(hello.to_string())).await.is_err() {
                return;
            }
            let _ = conns.send(Conn {
                send: to_client,
                recv: inbox,
            });
            loop {
                tokio::select! {
                    out = outbox.recv() => match out {
                        Some(f) => if sink.send(Message::text(f)).await.is_err() { return },
                        None => return,
                    },
                    msg = stream.next() => match msg {
                        Some(Ok(Message::Text(t))) => { let _ = from_client.send(t.to_string()); }
                        Some(Ok(Message::Ping(p))) => { let _ = sink.send(Message::Pong(p)).await; }
                        Some(Ok(_)) => {}
                        _ => return,
                    },
                }
            }
        });
    }
}

async fn wait(mut cond: impl FnMut() -> bool, what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_mode_events_and_clicks_reach_the_engine_and_are_acknowledged() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("frogbot_slack=debug")
        .try_init();
    let ws_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ws_addr = ws_listener.local_addr().unwrap();
    let (conn_tx, mut conn_rx) = mpsc::unbounded_channel();
    tokio::spawn(ws_server(ws_listener, conn_tx));

    let calls: Calls = Arc::default();
    let fake = FakeApi {
        calls: calls.clone(),
        ws_url: format!("ws://{ws_addr}/link/?ticket=abc&app_id=A1"),
    };
    let app = Router::new()
        .route("/api/{method}", post(api).get(api))
        .with_state(fake);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api_addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let slack = SlackChannel::connect(
        SlackChannelConfig::socket("xoxb-bot", "xapp-app")
            .with_api_url(format!("http://{api_addr}/api")),
    )
    .await
    .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let engine = Engine::new(
        store,
        vec![ModelOffer {
            id: "demo".into(),
            model: Arc::new(demo_model()),
            reasoning: vec![],
        }],
        vec![],
        EngineConfig {
            default_model: "demo".into(),
            ..Default::default()
        },
    )
    .with_channel(slack.channel(Arc::new(PrefixedIdentity), Arc::new(AllowAll)));
    let shutdown = CancellationToken::new();
    let task = slack
        .spawn_socket_mode(engine.clone(), shutdown.clone())
        .unwrap();

    let mut conn = tokio::time::timeout(Duration::from_secs(20), conn_rx.recv())
        .await
        .expect("the listener connects")
        .unwrap();
    let opened: Vec<_> = calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _, _)| m == "apps.connections.open")
        .cloned()
        .collect();
    assert!(!opened.is_empty());
    assert!(
        opened[0].2.contains("xapp-app"),
        "opened with the app token"
    );

    // A mention, as an `events_api` envelope.
    let now = frogbot_core::model::now_millis() / 1000;
    let root = format!("{now}.900001");
    let push = |event_id: &str, text: &str, ts: &str| {
        json!({
            "token": "legacy", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
            "event_id": event_id, "event_time": now,
            "event": {"type": "app_mention", "user": "U1", "text": text, "ts": ts,
                      "channel": "C42", "event_ts": ts}
        })
    };
    let envelope = |id: &str, kind: &str, payload: Value| {
        json!({"envelope_id": id, "type": kind, "accepts_response_payload": false,
               "retry_attempt": 0, "retry_reason": "", "payload": payload})
        .to_string()
    };
    conn.send
        .send(envelope(
            "env-1",
            "events_api",
            push("Ev1", "<@UBOT> ask me", &root),
        ))
        .unwrap();
    assert_eq!(conn.ack().await, json!({"envelope_id": "env-1"}));
    // Slack redelivers the same event in a new envelope: acknowledged, processed once.
    conn.send
        .send(envelope(
            "env-2",
            "events_api",
            push("Ev1", "<@UBOT> ask me", &root),
        ))
        .unwrap();
    assert_eq!(conn.ack().await, json!({"envelope_id": "env-2"}));

    let posts = || -> Vec<Value> {
        calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, b, _)| m == "chat.postMessage" && b["thread_ts"] == root.as_str())
            .map(|(_, b, _)| b.clone())
            .collect()
    };
    wait(|| !posts().is_empty(), "the question posted").await;
    let question = posts()[0].clone();
    let green = question["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["elements"].as_array().cloned().unwrap_or_default())
        .find(|e| e["text"]["text"] == "Green")
        .expect("a Green button");
    // The question message, from the store.
    let chat = frogbot_core::agent::channel_chat_id("slack", &format!("C42:{root}"));
    let row = engine
        .store_for_tests()
        .get_chat(&chat)
        .await
        .unwrap()
        .unwrap();
    let q = engine
        .store_for_tests()
        .questions_of_message(
            &chat,
            row.awaiting_message_id.as_deref().unwrap(),
            frogbot_core::model::now_millis(),
        )
        .await
        .unwrap()
        .remove(0);
    let current = q.record.current().unwrap().id.clone();
    let (_, ts) = current.split_once(':').unwrap();

    // The click's conversation is its container's thread, as over HTTP: one that claims another
    // thread (`container.thread_ts`) is not an answer to this question. (slack-morphism's typed
    // payload has no `container.thread_ts`: read through it, the click carried no thread and
    // answered.)
    let elsewhere = json!({
        "type": "block_actions",
        "user": {"id": "U7", "username": "bob", "team_id": "T1"},
        "api_app_id": "A1", "team": {"id": "T1", "domain": "frogs"},
        "container": {"type": "message", "message_ts": ts, "channel_id": "C42", "thread_ts": format!("{now}.111111")},
        "trigger_id": "1.2.9", "channel": {"id": "C42", "name": "ops"},
        "actions": [{"type": "button", "action_id": green["action_id"], "value": green["value"],
                     "action_ts": format!("{now}.4")}]
    });
    conn.send
        .send(envelope("env-9", "interactive", elsewhere))
        .unwrap();
    assert_eq!(conn.ack().await, json!({"envelope_id": "env-9"}));
    let q = engine
        .store_for_tests()
        .get_question(&chat, &q.tool_call_id, frogbot_core::model::now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(
        q.outcome.is_none(),
        "a click from another thread answered: {:?}",
        q.outcome
    );

    let click = json!({
        "type": "block_actions",
        "user": {"id": "U7", "username": "bob", "team_id": "T1"},
        "api_app_id": "A1", "team": {"id": "T1", "domain": "frogs"},
        "container": {"type": "message", "message_ts": ts, "channel_id": "C42", "thread_ts": root},
        "trigger_id": "1.2.3", "channel": {"id": "C42", "name": "ops"},
        "actions": [{"type": "button", "action_id": green["action_id"], "value": green["value"],
                     "action_ts": format!("{now}.5")}]
    });
    conn.send
        .send(envelope("env-3", "interactive", click))
        .unwrap();
    assert_eq!(conn.ack().await, json!({"envelope_id": "env-3"}));
    wait(|| posts().len() >= 2, "the agent's reply after the answer").await;
    assert_eq!(posts()[1]["text"], "You chose Colour: Green.");
    let updates = calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _, _)| m == "chat.update")
        .count();
    assert_eq!(updates, 1);
    // The redelivered mention never became a second message.
    let users = engine
        .store_for_tests()
        .list_messages(&chat)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.message.text().contains("ask me"))
        .count();
    assert_eq!(users, 1);

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("socket mode stops")
        .unwrap();
}
