//! End to end with FrogBot's engine (SQLite): a Slack mention starts a turn, the agent asks, the
//! question is posted as Block Kit to the fake Slack, a button click converted from the
//! `block_actions` payload Slack sends for the posted blocks is recorded, every message is
//! closed, and the agent continues.

use std::sync::Arc;

use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{
    AllowAll, Channel, ChannelMessageOutcome, InteractionOutcome, ModelMessage, ModelRequest, Sent,
    channel_chat_id,
};
use frogbot_core::model::{PrefixedIdentity, TurnState, UserId, now_millis};
use frogbot_slack::PLATFORM;
use frogbot_slack::convert::{interaction_from_payload, message_from_push_json};
use frogbot_slack::testing::{BOT_USER, FakeSlack};
use serde_json::json;

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
    let fake = FakeSlack::start().await;
    let questions = fake.questions();

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
    let engine = frogbot_testkit::engine_with(store.clone(), model.clone()).with_channel(Channel {
        platform: PLATFORM.into(),
        questions: Some(Arc::new(questions)),
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: None,
    });

    // Someone mentions the bot in a channel: the mention starts a thread at its own ts.
    let said = fake.user_message("C42", None, "U123", &format!("<@{BOT_USER}> deploy please"));
    let push = fake.event_callback(fake.mention_event(&said));
    let incoming = message_from_push_json(&push, BOT_USER).unwrap().unwrap();
    assert!(incoming.mentioned);
    assert_eq!(incoming.thread, format!("C42:{}", said.ts));
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
    let posted = fake.all_calls();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0].method, "chat.postMessage");
    assert_eq!(posted[0].body["thread_ts"], said.ts.as_str());
    let question = fake.thread_messages(&incoming.thread).pop().unwrap();
    let button = fake.element(&question.id(), "prod").expect("a prod button");
    assert_eq!(button["text"]["text"], "prod");

    // A click on "prod", as Slack sends it for the blocks it shows.
    let payload = fake.click("U777", &question.id(), "prod").unwrap();
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
    let updates = fake.calls("chat.update");
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].body["ts"], question.ts.as_str());
    assert_eq!(
        updates[0].body["blocks"][1]["elements"][0]["text"],
        "✅ Answered by <@U777>: prod"
    );
    assert_eq!(fake.controls(&question.id()), 0, "no controls left");
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
        fake.notices("U777")
            .iter()
            .any(|t| t == frogbot_slack::questions::STALE_TEXT)
    );
}

#[tokio::test]
async fn a_long_reply_is_split_within_slacks_text_limit() {
    use frogbot_core::agent::Adapter;
    use frogbot_core::model::{Thread, UiMessage};
    let fake = FakeSlack::start().await;
    let slack = frogbot_slack::channel::connect(fake.http_config())
        .await
        .unwrap();
    let outbox = slack.channel().outbox.expect("an outbox");
    let thread = Thread {
        id: "C42:1700000000.000100".into(),
        platform: PLATFORM.into(),
        chat_id: "chat-1".into(),
    };
    let paragraph = format!("{}\n\n", "word ".repeat(2000));
    let reply: UiMessage = serde_json::from_value(json!({
        "id": "m1", "role": "assistant",
        "parts": [{"type": "text", "text": paragraph.repeat(9)}]
    }))
    .unwrap();
    outbox.post_reply(&thread, &reply).await.unwrap();
    let posts = fake.calls("chat.postMessage");
    assert!(posts.len() >= 3, "90,000 characters need three messages");
    for p in &posts {
        assert_eq!(p.body["thread_ts"], "1700000000.000100");
        assert!(p.body["text"].as_str().unwrap().chars().count() <= 39_000);
        assert!(p.body.get("blocks").is_none(), "a plain text reply");
    }
    assert!(fake.violations().is_empty());
    // Blank text posts nothing.
    let blank: UiMessage = serde_json::from_value(json!({
        "id": "m2", "role": "assistant", "parts": [{"type": "text", "text": "  \n"}]
    }))
    .unwrap();
    outbox.post_reply(&thread, &blank).await.unwrap();
    assert_eq!(fake.calls("chat.postMessage").len(), posts.len());
}
