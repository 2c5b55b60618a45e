//! Socket Mode through slack-morphism's real listener: the fake Slack answers `auth.test` and
//! `apps.connections.open` with the `ws://` URL of its WebSocket server, which speaks Slack's
//! envelopes (`hello`, `events_api`, `interactive`) and reads the acknowledgements. Deliveries go
//! into the same handling as HTTP mode (engine on SQLite, the demo model).

use std::time::Duration;

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::demo_model;
use frogbot_slack::testing::{APP_TOKEN, BOT_USER, FakeSlack};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

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
    let fake = FakeSlack::start().await;
    let slack = frogbot_slack::channel::connect(fake.socket_config())
        .await
        .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let engine = frogbot_testkit::engine_with(store, demo_model()).with_channel(slack.channel());
    assert!(
        slack.routes(&engine.handle()).is_none(),
        "no HTTP routes in Socket Mode"
    );
    let shutdown = CancellationToken::new();
    let task = slack
        .start(engine.handle(), shutdown.clone())
        .expect("Socket Mode starts");

    let mut conn = fake.socket().await;
    let opened = fake.calls("apps.connections.open");
    assert!(!opened.is_empty());
    assert!(
        opened[0].auth.contains(APP_TOKEN),
        "opened with the app token"
    );

    // A mention, as an `events_api` envelope.
    let said = fake.user_message("C42", None, "U1", &format!("<@{BOT_USER}> ask me"));
    let root = said.ts.clone();
    let push = fake.event_callback_with_id(fake.mention_event(&said), "Ev1");
    conn.send_envelope("env-1", "events_api", push.clone());
    assert_eq!(conn.ack().await, json!({"envelope_id": "env-1"}));
    // Slack redelivers the same event in a new envelope: acknowledged, processed once.
    conn.send_envelope("env-2", "events_api", push);
    assert_eq!(conn.ack().await, json!({"envelope_id": "env-2"}));

    let posts = || -> Vec<Value> {
        fake.calls("chat.postMessage")
            .into_iter()
            .filter(|c| c.body["thread_ts"] == root.as_str())
            .map(|c| c.body)
            .collect()
    };
    wait(|| !posts().is_empty(), "the question posted").await;
    // The question message, from the store, once FrogBot has recorded it (it shows on Slack a
    // moment before its record is saved).
    let chat = frogbot_core::agent::channel_chat_id("slack", &format!("C42:{root}"));
    let recorded = || async {
        let row = engine.store_for_tests().get_chat(&chat).await.unwrap()?;
        let waiting = row.awaiting_message_id?;
        let q = engine
            .store_for_tests()
            .questions_of_message(&chat, &waiting, frogbot_core::model::now_millis())
            .await
            .unwrap()
            .into_iter()
            .next()?;
        Some((q.tool_call_id.clone(), q.record.current()?.id.clone()))
    };
    frogbot_testkit::eventually(
        "the question recorded",
        Duration::from_secs(20),
        async || recorded().await.is_some(),
    )
    .await;
    let (call_id, current) = recorded().await.expect("recorded");

    // The click's conversation is its container's thread, as over HTTP: one that claims another
    // thread (`container.thread_ts`) is not an answer to this question. (slack-morphism's typed
    // payload has no `container.thread_ts`: read through it, the click carried no thread and
    // answered.)
    let mut elsewhere = fake.click("U7", &current, "Green").expect("a Green button");
    elsewhere["container"]["thread_ts"] = json!(fake.next_ts());
    conn.send_envelope("env-9", "interactive", elsewhere);
    assert_eq!(conn.ack().await, json!({"envelope_id": "env-9"}));
    let q = engine
        .store_for_tests()
        .get_question(&chat, &call_id, frogbot_core::model::now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(
        q.outcome.is_none(),
        "a click from another thread answered: {:?}",
        q.outcome
    );

    let click = fake.click("U7", &current, "Green").unwrap();
    assert_eq!(click["container"]["thread_ts"], root.as_str());
    conn.send_envelope("env-3", "interactive", click);
    assert_eq!(conn.ack().await, json!({"envelope_id": "env-3"}));
    // The agent's reply after the answer streams in the thread (`chat.startStream`).
    let streamed = || -> Vec<Value> {
        fake.calls("chat.startStream")
            .into_iter()
            .filter(|c| c.body["thread_ts"] == root.as_str())
            .map(|c| c.body)
            .collect()
    };
    wait(
        || !streamed().is_empty(),
        "the agent's reply after the answer",
    )
    .await;
    assert_eq!(streamed()[0]["markdown_text"], "You chose Colour: Green.");
    assert_eq!(posts().len(), 1, "only the question was posted");
    assert_eq!(fake.calls("chat.update").len(), 1);
    assert_eq!(fake.controls(&current), 0);
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
