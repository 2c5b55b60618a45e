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
        .channels()
        .message(PLATFORM, &incoming.thread, incoming.message)
        .await
        .unwrap()
    {
        ChannelMessageOutcome::Sent(Sent::Started(h)) => {
            h.done.await.unwrap().unwrap();
        }
        other => panic!("expected a turn, got {other:?}"),
    }
    let chat = channel_chat_id(PLATFORM, &incoming.thread);
    assert_eq!(
        engine.chats().state(&chat).await.unwrap(),
        TurnState::Awaiting
    );
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
        .channels()
        .interaction(PLATFORM, Some(&incoming.thread), &click)
        .await
        .unwrap();
    assert_eq!(out, InteractionOutcome::Answered);

    let mut events = engine.chats().subscribe();
    while engine.chats().state(&chat).await.unwrap() != TurnState::Idle {
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
        .channels()
        .interaction(PLATFORM, Some(&incoming.thread), &click)
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
    use frogbot_channel::Adapter;
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

fn thread_of(id: &str) -> frogbot_core::model::Thread {
    frogbot_core::model::Thread {
        id: id.into(),
        platform: PLATFORM.into(),
        chat_id: "chat-1".into(),
    }
}

#[tokio::test]
async fn acks_replace_each_other_as_one_reaction() {
    use frogbot_channel::Adapter;
    use frogbot_core::model::Ack;
    let fake = FakeSlack::start().await;
    let slack = frogbot_slack::channel::connect(fake.http_config())
        .await
        .unwrap();
    let outbox = slack.channel().outbox.expect("an outbox");
    let root = fake.user_message("C42", None, "U123", "hello");
    let said = fake.user_message("C42", Some(&root.ts), "U123", "and more");
    let thread = thread_of(&root.id());
    let from = fake.count();
    for (ack, shown) in [
        (Ack::Seen, "eyes"),
        (Ack::Working, "hourglass_flowing_sand"),
        (Ack::Done, "white_check_mark"),
    ] {
        outbox.ack(&thread, &said.id(), ack).await.unwrap();
        assert_eq!(fake.message(&said.id()).unwrap().bot_reactions(), [shown]);
    }
    // The calls: channel + timestamp + name, each new reaction added before the old one goes.
    let calls: Vec<(String, String)> = fake.all_calls()[from..]
        .iter()
        .map(|c| {
            assert_eq!(c.body["channel"], "C42");
            assert_eq!(c.body["timestamp"], said.ts.as_str());
            (
                c.method.clone(),
                c.body["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let call = |m: &str, n: &str| (m.to_owned(), n.to_owned());
    assert_eq!(
        calls,
        [
            call("reactions.add", "eyes"),
            call("reactions.add", "hourglass_flowing_sand"),
            call("reactions.remove", "eyes"),
            call("reactions.add", "white_check_mark"),
            call("reactions.remove", "hourglass_flowing_sand"),
        ]
    );
    // Slack shows them in the message (conversations.replies).
    let shown = fake.message(&said.id()).unwrap();
    assert_eq!(
        shown.reactions,
        [("white_check_mark".to_owned(), BOT_USER.to_owned())]
    );
    // `working` makes no call on Slack: the ⏳ reaction shows the turn running.
    let before = fake.count();
    outbox.working(&thread).await.unwrap();
    assert_eq!(fake.count(), before);

    // A failed turn: ❌ replaces ⏳.
    let other = fake.user_message("C42", Some(&root.ts), "U123", "fail please");
    for ack in [Ack::Seen, Ack::Working, Ack::Failed] {
        outbox.ack(&thread, &other.id(), ack).await.unwrap();
    }
    assert_eq!(fake.message(&other.id()).unwrap().bot_reactions(), ["x"]);
    // Reacting twice with the same emoji (`already_reacted`) is no failure.
    outbox.ack(&thread, &other.id(), Ack::Seen).await.unwrap();
    outbox.ack(&thread, &other.id(), Ack::Seen).await.unwrap();
    assert!(
        fake.calls("reactions.add")
            .iter()
            .any(|c| c.body["name"] == "eyes" && c.body["timestamp"] == other.ts.as_str()),
    );
    // A message Slack does not know: the ack fails (the engine logs it).
    assert!(
        outbox
            .ack(&thread, "C42:1.000001", Ack::Seen)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_failed_removal_does_not_fail_the_ack() {
    use frogbot_channel::Adapter;
    use frogbot_core::model::Ack;
    let fake = FakeSlack::start().await;
    let slack = frogbot_slack::channel::connect(fake.http_config())
        .await
        .unwrap();
    let outbox = slack.channel().outbox.expect("an outbox");
    let said = fake.user_message("C42", None, "U123", "hello");
    let thread = thread_of(&said.id());
    outbox.ack(&thread, &said.id(), Ack::Seen).await.unwrap();
    fake.fail_method("reactions.remove", Some("ratelimited"));
    outbox.ack(&thread, &said.id(), Ack::Working).await.unwrap();
    // The new state shows; the old reaction stayed, as Slack refused to remove it.
    assert_eq!(
        fake.message(&said.id()).unwrap().bot_reactions(),
        ["eyes", "hourglass_flowing_sand"]
    );
    fake.fail_method("reactions.remove", None);
    outbox.ack(&thread, &said.id(), Ack::Done).await.unwrap();
    assert_eq!(
        fake.message(&said.id()).unwrap().bot_reactions(),
        ["eyes", "white_check_mark"]
    );
    // Failing to add the new one fails the ack.
    fake.fail_method("reactions.add", Some("ratelimited"));
    assert!(outbox.ack(&thread, &said.id(), Ack::Seen).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_marks_a_message_seen_working_then_done_after_the_reply() {
    use frogbot_channel::Adapter;
    let fake = FakeSlack::start().await;
    let slack = frogbot_slack::channel::connect(fake.http_config())
        .await
        .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let model = ScriptedModel::new(|_: &ModelRequest| reply("hello there"));
    let engine = frogbot_testkit::engine_with(store, model).with_channel(slack.channel());
    let said = fake.user_message("C42", None, "U123", &format!("<@{BOT_USER}> hi"));
    let push = fake.event_callback(fake.mention_event(&said));
    let incoming = message_from_push_json(&push, BOT_USER).unwrap().unwrap();
    let from = fake.count();
    match engine
        .channels()
        .message(PLATFORM, &incoming.thread, incoming.message)
        .await
        .unwrap()
    {
        ChannelMessageOutcome::Sent(Sent::Started(h)) => {
            h.done.await.unwrap().unwrap();
        }
        other => panic!("expected a turn, got {other:?}"),
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while fake.message(&said.id()).unwrap().bot_reactions() != ["white_check_mark"] {
        assert!(
            std::time::Instant::now() < deadline,
            "{:#?}",
            fake.all_calls()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let calls: Vec<String> = fake.all_calls()[from..]
        .iter()
        .map(|c| match c.body["name"].as_str() {
            Some(name) => format!("{} {name}", c.method),
            None => c.method.clone(),
        })
        .collect();
    assert_eq!(
        calls,
        [
            "reactions.add eyes",
            "reactions.add hourglass_flowing_sand",
            "reactions.remove eyes",
            "chat.startStream",
            "chat.stopStream",
            "reactions.add white_check_mark",
            "reactions.remove hourglass_flowing_sand",
        ]
    );
    // The reply streams natively: its text in `chat.startStream`, finalised by `chat.stopStream`.
    assert_eq!(
        fake.calls("chat.startStream")[0].body["markdown_text"],
        "hello there"
    );
}

/// A typed `!new` in a Slack thread (Slack's composer takes a leading `/` for its own slash
/// commands, which cannot be used in threads): the bot starts a new conversation there, without
/// the model, and the model then sees only what follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_bang_new_starts_a_new_conversation_in_the_thread() {
    use frogbot_channel::Adapter;
    let fake = FakeSlack::start().await;
    let slack = frogbot_slack::channel::connect(fake.http_config())
        .await
        .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let model = ScriptedModel::new(|req: &ModelRequest| {
        let users = frogbot_testkit::user_texts(req).len();
        reply(&format!("{users} said, last: {}", last_user(req)))
    });
    let engine = frogbot_testkit::engine_with(store, model.clone()).with_channel(slack.channel());
    let deliver = async |said: &frogbot_slack::testing::Message, mention: bool| {
        let push = if mention {
            fake.event_callback(fake.mention_event(said))
        } else {
            fake.event_callback(fake.message_event(said, "channel"))
        };
        let incoming = message_from_push_json(&push, BOT_USER).unwrap().unwrap();
        match engine
            .channels()
            .message(PLATFORM, &incoming.thread, incoming.message)
            .await
            .unwrap()
        {
            ChannelMessageOutcome::Sent(Sent::Started(h)) => h.done.await.unwrap().unwrap(),
            other => panic!("expected a turn, got {other:?}"),
        }
    };
    let hi = fake.user_message("C42", None, "U123", &format!("<@{BOT_USER}> kiwi"));
    deliver(&hi, true).await;
    let root = hi.ts.clone();
    deliver(
        &fake.user_message("C42", Some(&root), "U123", "!new"),
        false,
    )
    .await;
    assert_eq!(
        model.requests().len(),
        1,
        "!new is answered without the model"
    );
    let shown =
        serde_json::to_string(&fake.all_calls().iter().map(|c| &c.body).collect::<Vec<_>>())
            .unwrap();
    assert!(
        shown.contains(frogbot_core::model::NEW_CONVERSATION_TEXT),
        "the thread is told"
    );
    deliver(
        &fake.user_message("C42", Some(&root), "U123", "what was it?"),
        false,
    )
    .await;
    let requests = model.requests();
    assert_eq!(last_user(requests.last().unwrap()), "what was it?");
    let users = frogbot_testkit::user_texts(requests.last().unwrap()).len();
    assert_eq!(users, 1, "only the new conversation");
}

/// Files (issue 40, item 1): a person's message with files (a `file_share` event with Slack's
/// file objects) in the bot's thread: each is downloaded from its `url_private_download` with
/// the bot token into the chat, and the model sees the image and the text; a link the token may
/// not go to (another host) gets Slack's sign-in page, which is not taken for the file, and the
/// person is told in the thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_shared_in_a_thread_reach_the_model() {
    use frogbot_channel::Adapter;
    let fake = FakeSlack::start().await;
    let slack = frogbot_slack::channel::connect(fake.http_config())
        .await
        .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let model = ScriptedModel::new(|req: &ModelRequest| reply(&format!("re: {}", last_user(req))));
    let engine = frogbot_testkit::engine_with(store, model.clone()).with_channel(slack.channel());
    let hi = fake.user_message("C42", None, "U123", &format!("<@{BOT_USER}> hello"));
    let push = fake.event_callback(fake.mention_event(&hi));
    let incoming = message_from_push_json(&push, BOT_USER).unwrap().unwrap();
    let ChannelMessageOutcome::Sent(Sent::Started(h)) = engine
        .channels()
        .message(PLATFORM, &incoming.thread, incoming.message)
        .await
        .unwrap()
    else {
        panic!("a turn");
    };
    h.done.await.unwrap().unwrap();

    let png: Vec<u8> = (0..70_000u32).map(|i| (i % 241) as u8).collect();
    let image = fake.upload_file("shot.png", "image/png", png.clone());
    let notes = fake.upload_file("notes.txt", "text/plain", b"milk, eggs".to_vec());
    let mut elsewhere = fake.upload_file("other.png", "image/png", vec![1, 2, 3]);
    let moved = elsewhere["url_private_download"]
        .as_str()
        .unwrap()
        .replace("127.0.0.1", "localhost");
    elsewhere["url_private_download"] = json!(moved);
    let said = fake.user_message("C42", Some(&hi.ts), "U123", "look");
    let mut event = fake.message_event(&said, "channel");
    event["subtype"] = json!("file_share");
    event["files"] = json!([image, notes, elsewhere]);
    event["upload"] = json!(false);
    let push = fake.event_callback(event);
    let incoming = message_from_push_json(&push, BOT_USER).unwrap().unwrap();
    assert_eq!(incoming.message.files.len(), 3);
    let ChannelMessageOutcome::Sent(Sent::Started(h)) = engine
        .channels()
        .message(PLATFORM, &incoming.thread, incoming.message)
        .await
        .unwrap()
    else {
        panic!("a turn");
    };
    h.done.await.unwrap().unwrap();
    let req = model.requests().last().cloned().unwrap();
    let files: Vec<_> = req
        .messages
        .iter()
        .filter_map(|m| match m {
            ModelMessage::File(f) => Some(f.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    use base64::Engine as _;
    assert_eq!(
        files[0].content,
        Some(frogbot_core::agent::FileContent::Image {
            data_url: format!(
                "data:image/png;base64,{}",
                base64::engine::general_purpose::STANDARD.encode(&png)
            )
        })
    );
    assert_eq!(
        files[1].content,
        Some(frogbot_core::agent::FileContent::Text {
            text: "[notes.txt (text/plain)]\nmilk, eggs".into()
        })
    );
    assert_eq!(last_user(&req), "look");
    // The person is told which file was not taken, in the thread.
    let notice = || {
        fake.all_calls().into_iter().find(|c| {
            c.method == "chat.postMessage"
                && c.body["text"].as_str().is_some_and(|t| t.contains("📎"))
        })
    };
    frogbot_testkit::eventually(
        "the notice",
        std::time::Duration::from_secs(20),
        async || notice().is_some(),
    )
    .await;
    let told = notice().unwrap();
    assert_eq!(told.body["thread_ts"], hi.ts.as_str());
    assert!(
        told.body["text"]
            .as_str()
            .unwrap()
            .contains("other.png: the download failed"),
        "{}",
        told.body
    );
}

#[test]
fn the_bot_token_goes_to_slacks_hosts_only() {
    use frogbot_slack::convert::slack_file_host;
    assert!(slack_file_host(
        "https://files.slack.com/files-pri/T1-F1/download/a.png",
        None
    ));
    for elsewhere in [
        "https://files.slack.com.evil.example/x",
        "http://files.slack.com/x",
        "https://evil.example/files-pri/x",
        "file:///etc/passwd",
        "not a url",
    ] {
        assert!(!slack_file_host(elsewhere, None), "{elsewhere}");
    }
    let api = Some("http://127.0.0.1:9000/api");
    assert!(slack_file_host("http://127.0.0.1:9000/files-pri/x", api));
    assert!(!slack_file_host("http://localhost:9000/files-pri/x", api));
}
