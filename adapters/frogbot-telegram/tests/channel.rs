//! The receiving channel end to end: FrogBot's engine on SQLite, teloxide's `Bot` pointed at a
//! fake Bot API (`frogbot_telegram::testing`), updates delivered by long polling (`getUpdates`) or
//! posted to the webhook route; replies, questions with inline keyboards, callback queries,
//! ForceReply answers, per-thread order.

use std::sync::{Arc, Mutex, OnceLock};

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{Engine, ModelMessage, ModelRequest, channel_chat_id};
use frogbot_core::model::{UserId, now_millis};
use frogbot_telegram::PLATFORM;
use frogbot_telegram::channel::{
    Config, MAX_UPDATE_BYTES, NOT_ALLOWED_TEXT, Receive, TelegramAdapter, WEBHOOK_PATH, connect,
};
use frogbot_telegram::questions::{DENIED_TEXT, STALE_TEXT};
use frogbot_telegram::testing::{
    self, BOT_USERNAME, Call, FakeBotApi, callback_update, group_chat, post_update, private_chat,
    text_update, user,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const ADA: i64 = 42;
const BOB: i64 = 77;

/// The person's last message as they typed it (the model sees it after their name: `Ada: …`).
fn last_user(req: &ModelRequest) -> String {
    let text = req
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            ModelMessage::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default();
    ["Ada: ", "Bob: "]
        .iter()
        .find_map(|name| text.strip_prefix(name))
        .map_or(text.clone(), str::to_owned)
}

/// The agent: asks a question for "deploy" (single), "checks" (multiple) and "note" (own text
/// only), replies at length for "long", echoes anything else, and reports a tool result.
fn model() -> ScriptedModel {
    ScriptedModel::new(|req: &ModelRequest| {
        if let Some(ModelMessage::Tool { content, .. }) = req.messages.last() {
            return reply(&format!("done: {content}"));
        }
        let text = last_user(req);
        let ask = |input: Value| call("c1", "question", input);
        if text.contains("deploy") {
            return ask(json!({"questions": [{"header": "Env", "question": "Where?",
                "options": [{"label": "staging"}, {"label": "prod"}]}]}));
        }
        if text.contains("checks") {
            return ask(
                json!({"questions": [{"header": "Checks", "question": "Which?",
                "options": [{"label": "lint"}, {"label": "test"}, {"label": "bench"}], "multiple": true}]}),
            );
        }
        if text.contains("note") {
            return ask(
                json!({"questions": [{"header": "Note", "question": "Anything else?",
                "custom": true}]}),
            );
        }
        if text.contains("long") {
            return reply(&"word ".repeat(1000));
        }
        reply(&format!("echo: {text}"))
    })
}

struct Setup {
    fake: FakeBotApi,
    engine: Engine,
    model: ScriptedModel,
    channel: TelegramAdapter,
    shutdown: CancellationToken,
    _db: frogbot_testkit::TestDb,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Who may talk to the bot: everyone, or only the FrogBot user `ada` (Telegram user 42).
const EVERYONE: &[&str] = &[];
const ONLY_ADA: &[&str] = &["ada"];

async fn setup_with(allow: &[&str], receive: Receive) -> Setup {
    // Files are downloaded over rustls (as every program using the adapter installs one).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeBotApi::start().await;
    let mut config = Config::new("123:TEST");
    config.api_url = Some(fake.api_url());
    config.receive = receive;
    config.users = [(ADA.to_string(), "ada".to_string())].into();
    config.allow = allow.iter().map(|s| s.to_string()).collect();
    // Short, so the slow-body test does not wait the default 30 s; local posts are far faster.
    config.webhook_body_timeout = std::time::Duration::from_millis(800);
    // Files are downloaded from the fake, on 127.0.0.1.
    config.file_policy = Some(frogbot_channel::files::FetchPolicy {
        allow_private: true,
        ..frogbot_channel::files::FetchPolicy::for_files()
    });
    let channel = connect(config).await.unwrap();
    assert_eq!(channel.me().username(), BOT_USERNAME);
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let model = model();
    let engine = frogbot_testkit::engine_with(store, model.clone()).with_channel(channel.channel());
    let shutdown = CancellationToken::new();
    Setup {
        fake,
        engine,
        model,
        channel,
        shutdown,
        _db: db,
    }
}

/// A channel receiving by long polling.
async fn setup(allow: &[&str]) -> Setup {
    let s = setup_with(allow, Receive::polling()).await;
    assert!(s.channel.routes(&s.engine.handle()).is_none());
    s.channel
        .start(s.engine.handle(), s.shutdown.clone())
        .unwrap();
    s
}

fn private_text(from: i64, message_id: i64, text: &str) -> Value {
    let name = if from == ADA { "Ada" } else { "Bob" };
    text_update(message_id, private_chat(from, name), user(from, name), text)
}

fn click(fake: &FakeBotApi, query: &str, from: i64, message_id: i64, data: &str) -> i64 {
    let name = if from == ADA { "Ada" } else { "Bob" };
    fake.push(callback_update(
        query,
        user(from, name),
        fake.sent(message_id),
        data,
    ))
}

/// The bot's messages that carry an inline keyboard or a ForceReply, in order (every try), but
/// for a streamed reply's Stop button.
fn questions_sent(calls: &[Call]) -> Vec<&Call> {
    calls
        .iter()
        .filter(|c| {
            c.method == "sendmessage"
                && !c.body["reply_markup"].is_null()
                && c.body["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
                    != "frogbot-stop"
        })
        .collect()
}

/// The `n`-th question message the fake accepted: (message id, its `sendMessage` body), once
/// FrogBot has recorded it for question `c1` of `thread` (a person can only click or reply after
/// seeing it; the tests are quicker).
async fn question_message(s: &Setup, thread: &str, n: usize) -> (i64, Value) {
    let (id, body) = s
        .fake
        .wait_for("a question message", |calls| {
            questions_sent(calls)
                .into_iter()
                .filter_map(|c| Some((c.result.as_ref()?["message_id"].as_i64()?, c.body.clone())))
                .nth(n - 1)
        })
        .await;
    let chat = channel_chat_id(PLATFORM, thread);
    let linked = format!("{}:{id}", body["chat_id"]);
    let deadline = std::time::Instant::now() + testing::WAIT;
    loop {
        let q = s
            .engine
            .store_for_tests()
            .get_question(&chat, "c1", now_millis())
            .await
            .unwrap();
        if q.is_some_and(|q| {
            q.rendered && !q.posting && q.record.messages.iter().any(|m| m.id == linked)
        }) {
            return (id, body);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "question never recorded as posted"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

fn answered(calls: &[Call], query: &str) -> Option<Value> {
    calls
        .iter()
        .find(|c| c.method == "answercallbackquery" && c.body["callback_query_id"] == query)
        .map(|c| c.body.clone())
}

fn sent_text(calls: &[Call], prefix: &str) -> Option<Value> {
    calls
        .iter()
        .find(|c| {
            c.method == "sendmessage"
                && c.body["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with(prefix))
        })
        .map(|c| c.body.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_message_is_answered_as_a_reply() {
    let s = setup(EVERYONE).await;
    s.fake.push(private_text(ADA, 5, "hello there"));
    let sent = s
        .fake
        .wait_for("the reply", |c| sent_text(c, "echo:"))
        .await;
    assert_eq!(sent["text"], "echo: hello there");
    assert_eq!(sent["chat_id"], json!(ADA));
    assert_eq!(sent["reply_parameters"]["message_id"], 5);
    // Polling began by removing any webhook.
    let calls = s.fake.all_calls();
    let first_delete = calls.iter().position(|c| c.method == "deletewebhook");
    let first_poll = calls.iter().position(|c| c.method == "getupdates");
    assert!(first_delete.unwrap() < first_poll.unwrap());
    // Only the update kinds the channel handles are asked for.
    assert_eq!(
        calls[first_poll.unwrap()].body["allowed_updates"],
        json!(["message", "edited_message", "callback_query"])
    );

    // A long reply is split at 4,096 characters, each piece in the chat.
    s.fake.push(private_text(ADA, 6, "something long"));
    let parts = s
        .fake
        .wait_for("two pieces", |c| {
            let p: Vec<_> = c
                .iter()
                .filter(|c| {
                    c.method == "sendmessage"
                        && c.body["text"]
                            .as_str()
                            .is_some_and(|t| t.starts_with("word"))
                })
                .map(|c| c.body["text"].as_str().unwrap().to_owned())
                .collect();
            (p.len() == 2).then_some(p)
        })
        .await;
    assert!(parts.iter().all(|p| p.chars().count() <= 4096));
    assert_eq!(parts.join(" ").split_whitespace().count(), 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_menu_is_registered_and_new_starts_a_fresh_conversation() {
    let s = setup(EVERYONE).await;
    // At start: `setMyCommands` with every command a person can type (the fake checks
    // Telegram's rules for a BotCommand).
    let menu = s
        .fake
        .wait_for("the command menu", |c| {
            c.iter()
                .find(|c| c.method == "setmycommands" && c.result.is_some())
                .map(|c| c.body["commands"].clone())
        })
        .await;
    let names: Vec<&str> = menu
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["command"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["stop", "skip", "new", "model", "ask"]);
    assert_eq!(s.fake.commands().len(), 5);

    // In a group topic, `/new@FrogBot` (what the menu sends there) starts a new conversation:
    // the bot says so, and the model no longer sees what came before.
    let forum = group_chat(-100300, true);
    let in_topic = |id: i64, text: &str, entities: Value| {
        json!({"message": {
            "message_id": id, "message_thread_id": 7, "is_topic_message": true,
            "date": 1_767_225_600, "chat": forum, "from": user(ADA, "Ada"), "text": text,
            "entities": entities
        }})
    };
    let mention = json!([{"type": "mention", "offset": 0, "length": 8}]);
    s.fake.push(in_topic(
        10,
        "@FrogBot the codeword is kiwi",
        mention.clone(),
    ));
    s.fake
        .wait_for("the first reply", |c| sent_text(c, "echo: the codeword"))
        .await;
    s.fake.push(in_topic(
        11,
        "/new@FrogBot",
        json!([{"type": "bot_command", "offset": 0, "length": 12}]),
    ));
    let said = s
        .fake
        .wait_for("the new conversation", |c| {
            sent_text(c, frogbot_core::model::NEW_CONVERSATION_TEXT)
        })
        .await;
    assert_eq!(said["message_thread_id"], 7);
    assert_eq!(
        s.model.requests().len(),
        1,
        "/new is answered without the model"
    );
    s.fake
        .push(in_topic(12, "@FrogBot what is the codeword?", mention));
    s.fake
        .wait_for("the third reply", |c| sent_text(c, "echo: what is"))
        .await;
    let requests = s.model.requests();
    let seen = frogbot_testkit::user_texts(&requests[1]);
    assert_eq!(seen.len(), 1, "only the new conversation: {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_answer_mentions_and_replies_in_the_same_topic() {
    let s = setup(EVERYONE).await;
    let forum = group_chat(-100300, true);
    let in_topic = |id: i64, text: &str, entities: Value| {
        json!({"message": {
            "message_id": id, "message_thread_id": 7, "is_topic_message": true,
            "date": 1_767_225_600, "chat": forum, "from": user(ADA, "Ada"), "text": text,
            "entities": entities
        }})
    };
    // Not addressed to the bot: ignored.
    s.fake.push(in_topic(10, "just chatting", json!([])));
    // A mention: answered, without the mention, in the topic, as a reply.
    s.fake.push(in_topic(
        11,
        "@FrogBot status?",
        json!([{"type": "mention", "offset": 0, "length": 8}]),
    ));
    let sent = s
        .fake
        .wait_for("the reply", |c| sent_text(c, "echo:"))
        .await;
    assert_eq!(sent["text"], "echo: status?");
    assert_eq!(sent["chat_id"], json!(-100300));
    assert_eq!(sent["message_thread_id"], 7);
    assert_eq!(sent["reply_parameters"]["message_id"], 11);
    // The ignored message never reached the agent; the topic is its own chat.
    let requests = s.model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(last_user(&requests[0]), "status?");
    let chat = channel_chat_id(PLATFORM, "-100300:7");
    assert!(
        s.engine
            .store_for_tests()
            .get_chat(&chat)
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_asked_clicked_answered_and_the_agent_continues() {
    let s = setup(EVERYONE).await;
    s.fake.push(private_text(ADA, 5, "deploy please"));
    let (qid, body) = question_message(&s, &ADA.to_string(), 1).await;
    let kb = &body["reply_markup"]["inline_keyboard"];
    assert_eq!(kb[1][0]["text"], "prod");
    let data = kb[1][0]["callback_data"].as_str().unwrap().to_owned();
    assert!(data.len() <= 64);

    click(&s.fake, "cbq-1", ADA, qid, &data);
    let ack = s
        .fake
        .wait_for("the callback answer", |c| answered(c, "cbq-1"))
        .await;
    assert!(
        ack.get("text").is_none(),
        "an answer needs no notice: {ack}"
    );
    let edit = s
        .fake
        .wait_for("the settled edit", |c| {
            c.iter()
                .find(|c| c.method == "editmessagetext" && c.body["message_id"] == qid)
                .map(|c| c.body.clone())
        })
        .await;
    assert!(
        edit["text"]
            .as_str()
            .unwrap()
            .ends_with("✅ Answered by Ada: prod")
    );
    assert_eq!(edit["reply_markup"]["inline_keyboard"], json!([]));
    let done = s
        .fake
        .wait_for("the agent's next reply", |c| sent_text(c, "done:"))
        .await;
    assert!(done["text"].as_str().unwrap().contains("prod"));

    // Recorded once, by the mapped FrogBot user.
    let chat = channel_chat_id(PLATFORM, &ADA.to_string());
    let q = s
        .engine
        .store_for_tests()
        .get_question(&chat, "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(q.closed);
    assert_eq!(q.actor.unwrap().user, Some(UserId::new("ada")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_on_an_inaccessible_question_message_in_a_forum_topic_answers() {
    let s = setup(EVERYONE).await;
    let forum = group_chat(-100400, true);
    s.fake.push(json!({"message": {
        "message_id": 20, "message_thread_id": 9, "is_topic_message": true,
        "date": 1_767_225_600, "chat": forum, "from": user(ADA, "Ada"),
        "text": "@FrogBot deploy please",
        "entities": [{"type": "mention", "offset": 0, "length": 8}]
    }}));
    let (qid, body) = question_message(&s, "-100400:9", 1).await;
    assert_eq!(body["message_thread_id"], 9);
    let data = body["reply_markup"]["inline_keyboard"][1][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_owned();
    // Telegram reports the message as inaccessible (date 0): only its chat and id remain, not
    // the topic.
    s.fake.push(callback_update(
        "cbq-topic",
        user(ADA, "Ada"),
        json!({"message_id": qid, "date": 0, "chat": forum}),
        &data,
    ));
    let ack = s
        .fake
        .wait_for("the callback answer", |c| answered(c, "cbq-topic"))
        .await;
    assert!(ack.get("text").is_none(), "not stale: {ack}");
    let done = s
        .fake
        .wait_for("the agent's next reply", |c| sent_text(c, "done:"))
        .await;
    assert!(done["text"].as_str().unwrap().contains("prod"), "{done}");
    assert_eq!(done["message_thread_id"], 9);
    let chat = channel_chat_id(PLATFORM, "-100400:9");
    let q = s
        .engine
        .store_for_tests()
        .get_question(&chat, "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(q.outcome.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_click_after_the_answer_is_stale() {
    let s = setup(EVERYONE).await;
    s.fake.push(private_text(ADA, 5, "deploy"));
    let (qid, body) = question_message(&s, &ADA.to_string(), 1).await;
    let staging = body["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_owned();
    let prod = body["reply_markup"]["inline_keyboard"][1][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_owned();
    click(&s.fake, "cbq-1", ADA, qid, &staging);
    s.fake
        .wait_for("the agent's next reply", |c| sent_text(c, "done:"))
        .await;
    // The same keyboard, clicked again (a client that had not redrawn yet).
    click(&s.fake, "cbq-2", ADA, qid, &prod);
    let ack = s
        .fake
        .wait_for("the second callback answer", |c| answered(c, "cbq-2"))
        .await;
    assert_eq!(ack["text"], STALE_TEXT);
    let chat = channel_chat_id(PLATFORM, &ADA.to_string());
    let q = s
        .engine
        .store_for_tests()
        .get_question(&chat, "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    let out = q.outcome.unwrap();
    assert_eq!(out.output().unwrap().answers[0].selected, ["staging"]);
    // The agent continued once.
    let continued = s
        .model
        .requests()
        .iter()
        .filter(|r| matches!(r.messages.last(), Some(ModelMessage::Tool { .. })))
        .count();
    assert_eq!(continued, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multiple_choice_toggles_then_done_and_old_keyboards_are_stale() {
    let s = setup(EVERYONE).await;
    s.fake.push(private_text(ADA, 5, "run checks"));
    let (qid, body) = question_message(&s, &ADA.to_string(), 1).await;
    let kb = &body["reply_markup"]["inline_keyboard"];
    let texts: Vec<_> = kb
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[0]["text"].clone())
        .collect();
    assert_eq!(texts, ["lint", "test", "bench", "Done", "Skip"]);
    let lint0 = kb[0][0]["callback_data"].as_str().unwrap().to_owned();

    // Toggle lint: the keyboard is redrawn with ✓ and the next revision's tokens.
    click(&s.fake, "cbq-1", ADA, qid, &lint0);
    s.fake.wait_for("answer 1", |c| answered(c, "cbq-1")).await;
    let redraw = s.fake.nth("editmessagereplymarkup", 1).await;
    let kb1 = redraw["reply_markup"]["inline_keyboard"].clone();
    assert_eq!(kb1[0][0]["text"], "✓ lint");
    assert_ne!(kb1[0][0]["callback_data"], json!(lint0));

    // A click on the old keyboard is stale and changes nothing.
    let old_test = kb[1][0]["callback_data"].as_str().unwrap().to_owned();
    click(&s.fake, "cbq-old", ADA, qid, &old_test);
    let ack = s
        .fake
        .wait_for("stale answer", |c| answered(c, "cbq-old"))
        .await;
    assert_eq!(ack["text"], STALE_TEXT);

    // Toggle bench on the current keyboard, then Done.
    click(
        &s.fake,
        "cbq-2",
        ADA,
        qid,
        kb1[2][0]["callback_data"].as_str().unwrap(),
    );
    let redraw = s.fake.nth("editmessagereplymarkup", 2).await;
    let kb2 = redraw["reply_markup"]["inline_keyboard"].clone();
    assert_eq!(kb2[0][0]["text"], "✓ lint");
    assert_eq!(kb2[2][0]["text"], "✓ bench");
    assert_eq!(kb2[1][0]["text"], "test");
    click(
        &s.fake,
        "cbq-3",
        ADA,
        qid,
        kb2[3][0]["callback_data"].as_str().unwrap(),
    );
    let edit = s
        .fake
        .wait_for("the settled edit", |c| {
            c.iter()
                .find(|c| c.method == "editmessagetext" && c.body["message_id"] == qid)
                .map(|c| c.body.clone())
        })
        .await;
    assert!(
        edit["text"]
            .as_str()
            .unwrap()
            .ends_with("✅ Answered by Ada: lint, bench"),
        "{edit}"
    );
    let done = s
        .fake
        .wait_for("the agent's next reply", |c| sent_text(c, "done:"))
        .await;
    let text = done["text"].as_str().unwrap();
    assert!(text.contains("lint") && text.contains("bench") && !text.contains("test"));
    for q in ["cbq-1", "cbq-2", "cbq-3"] {
        let ack = answered(&s.fake.all_calls(), q).unwrap();
        assert!(ack.get("text").is_none(), "{q}: {ack}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_own_answer_comes_as_a_reply_to_the_force_reply_prompt() {
    let s = setup(EVERYONE).await;
    s.fake.push(private_text(ADA, 5, "note"));
    let (prompt, body) = question_message(&s, &ADA.to_string(), 1).await;
    assert_eq!(body["reply_markup"]["force_reply"], json!(true));
    // Ada replies to the prompt.
    let mut answer = private_text(ADA, 6, "ship it friday");
    answer["message"]["reply_to_message"] = s.fake.sent(prompt);
    s.fake.push(answer);
    let done = s
        .fake
        .wait_for("the agent's next reply", |c| sent_text(c, "done:"))
        .await;
    assert!(done["text"].as_str().unwrap().contains("ship it friday"));
    let edit = s
        .fake
        .wait_for("the settled prompt", |c| {
            c.iter()
                .find(|c| c.method == "editmessagetext" && c.body["message_id"] == prompt)
                .map(|c| c.body.clone())
        })
        .await;
    assert!(
        edit["text"]
            .as_str()
            .unwrap()
            .ends_with("✅ Answered by Ada: ship it friday")
    );
    // The reply answered the question: it never reached the agent as a message.
    assert!(
        s.model
            .requests()
            .iter()
            .all(|r| !last_user(r).contains("ship it friday"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_user_is_told_and_changes_nothing() {
    let s = setup(ONLY_ADA).await;
    // Bob (telegram:77) writes to the bot: refused, no turn.
    s.fake.push(private_text(BOB, 5, "hello"));
    let sent = s
        .fake
        .wait_for("the refusal", |c| sent_text(c, NOT_ALLOWED_TEXT))
        .await;
    assert_eq!(sent["chat_id"], json!(BOB));
    assert!(s.model.requests().is_empty());

    // Ada asks in a group; Bob clicks: denied with a notice, the question stays open.
    let group = group_chat(-100200, false);
    s.fake.push(json!({"message": {
        "message_id": 20, "date": 1, "chat": group, "from": user(ADA, "Ada"),
        "text": "/deploy@frogbot", "entities": [{"type": "bot_command", "offset": 0, "length": 15}]
    }}));
    let (qid, body) = question_message(&s, "-100200", 1).await;
    let data = body["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_owned();
    click(&s.fake, "cbq-bob", BOB, qid, &data);
    let ack = s
        .fake
        .wait_for("Bob's answer", |c| answered(c, "cbq-bob"))
        .await;
    assert_eq!(ack["text"], DENIED_TEXT);
    let chat = channel_chat_id(PLATFORM, "-100200");
    let q = s
        .engine
        .store_for_tests()
        .get_question(&chat, "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(q.outcome.is_none());
    // Ada's click still counts.
    click(&s.fake, "cbq-ada", ADA, qid, &data);
    s.fake
        .wait_for("the agent's next reply", |c| sent_text(c, "done:"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_on_the_question_prompt_is_waited_out() {
    let s = setup(EVERYONE).await;
    s.fake.throttle_keyboard_sends(1);
    s.fake.push(private_text(ADA, 5, "deploy"));
    let (qid, _) = question_message(&s, &ADA.to_string(), 1).await;
    let calls = s.fake.all_calls();
    let tries = questions_sent(&calls);
    assert_eq!(tries.len(), 2, "the throttled prompt was sent again");
    assert!(tries[0].result.is_none(), "the first try got the 429");
    assert_eq!(tries[0].body, tries[1].body);
    assert!(tries[1].at - tries[0].at >= std::time::Duration::from_millis(900));
    // The delivered prompt is the one the question record knows.
    let chat = channel_chat_id(PLATFORM, &ADA.to_string());
    let q = s
        .engine
        .store_for_tests()
        .get_question(&chat, "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(q.record.messages[0].id, format!("{ADA}:{qid}"));
}

/// Log lines, for the test that checks what is said about malformed updates.
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf: Arc<Mutex<Vec<u8>>> = Arc::default();
        let writer = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .with_writer(move || LogWriter(writer.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        buf
    })
    .clone()
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_updates_are_dropped_with_a_log_line_and_polling_moves_on() {
    let logs = logs();
    let s = setup(EVERYONE).await;
    // A message without a chat (unreadable), and a callback query without data (unusable).
    s.fake
        .push(json!({"update_id": 500, "message": {"message_id": 1, "text": "no chat"}}));
    s.fake.push(json!({"update_id": 501, "callback_query": {
        "id": "cbq-nodata", "from": user(ADA, "Ada"), "chat_instance": "c",
        "message": {"message_id": 3, "date": 1, "chat": private_chat(ADA, "Ada"), "text": "x"}
    }}));
    s.fake.push(json!({"update_id": 502, "message": {
        "message_id": 9, "date": 1, "chat": private_chat(ADA, "Ada"), "from": user(ADA, "Ada"),
        "text": "still here"
    }}));
    s.fake
        .wait_for("the reply to the good update", |c| {
            sent_text(c, "echo: still here")
        })
        .await;
    // The unusable click was still answered, so the button stops spinning.
    let ack = s
        .fake
        .wait_for("the unusable click's answer", |c| answered(c, "cbq-nodata"))
        .await;
    assert_eq!(ack["text"], STALE_TEXT);
    // The offset moved past all three.
    s.fake
        .wait_for("a poll confirming 502", |c| {
            c.iter()
                .any(|c| c.method == "getupdates" && c.body["offset"].as_i64() >= Some(503))
                .then_some(())
        })
        .await;
    let text = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("malformed Telegram update dropped"))
        .unwrap_or_else(|| panic!("no log line in {text}"));
    assert!(line.contains("update_id=500"), "{line}");
    assert!(text.contains("Telegram callback query dropped"), "{text}");
    assert_eq!(s.model.requests().len(), 1);
}

/// A channel receiving by webhook (with `secret`), its route served on a local port: the setup
/// and the webhook's URL.
async fn webhook_setup(secret: &str) -> (Setup, String) {
    let s = setup_with(
        EVERYONE,
        Receive::Webhook {
            secret: secret.into(),
            url: Some(url::Url::parse("https://bot.example/channels/telegram/webhook").unwrap()),
        },
    )
    .await;
    let router = s.channel.routes(&s.engine.handle()).unwrap();
    // Building the route registers nothing with Telegram; start does.
    assert!(s.fake.calls("setwebhook").is_empty());
    s.channel
        .start(s.engine.handle(), s.shutdown.clone())
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (s, format!("http://{addr}{WEBHOOK_PATH}"))
}

async fn wait_for_log(logs: &Arc<Mutex<Vec<u8>>>, what: &str, found: impl Fn(&str) -> bool) {
    let deadline = std::time::Instant::now() + testing::WAIT;
    while !String::from_utf8_lossy(&logs.lock().unwrap())
        .lines()
        .any(&found)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no log line for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_refuses_requests_without_the_secret() {
    let logs = logs();
    let secret = "s3cret-Token_1";
    let (s, url) = webhook_setup(secret).await;
    // The webhook is registered with the secret.
    let set = s.fake.nth("setwebhook", 1).await;
    assert_eq!(set["url"], "https://bot.example/channels/telegram/webhook");
    assert_eq!(set["secret_token"], secret);
    let registered = s.fake.webhook().unwrap();
    assert_eq!(registered.secret.as_deref(), Some(secret));

    let update = serde_json::to_string(&{
        let mut u = private_text(ADA, 5, "via webhook");
        u["update_id"] = json!(1);
        u
    })
    .unwrap();
    let post = |header: Option<&str>| post_update(&url, header, &update);
    // Missing, wrong, a prefix or an extension of the secret, or characters a secret cannot
    // have: all 401, and the update reaches nothing.
    let longer = format!("{secret}x");
    for wrong in [
        None,
        Some("wrong"),
        Some(&secret[..5]),
        Some(longer.as_str()),
        Some("not the secret!"),
    ] {
        assert_eq!(post(wrong).await, 401, "{wrong:?}");
    }
    assert!(s.model.requests().is_empty());
    assert_eq!(post(Some(secret)).await, 200);
    let sent = s
        .fake
        .wait_for("the reply", |c| sent_text(c, "echo:"))
        .await;
    assert_eq!(sent["text"], "echo: via webhook");
    // A malformed update with the right secret is acknowledged (Telegram would resend it
    // forever otherwise) and dropped with a log line.
    let malformed = post_update(
        &url,
        Some(secret),
        r#"{"update_id": 777, "message": {"text": "no chat"}}"#,
    )
    .await;
    assert_eq!(malformed, 200);
    wait_for_log(&logs, "update 777", |l| {
        l.contains("malformed Telegram update dropped") && l.contains("update_id=777")
    })
    .await;
    assert_eq!(s.model.requests().len(), 1);
    assert!(
        s.fake.calls("getupdates").is_empty(),
        "no polling in webhook mode"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_webhook_body_is_dropped_with_a_bounded_warning() {
    let logs = logs();
    let secret = "s3cret-Token_2";
    let (s, url) = webhook_setup(secret).await;
    // No update at all (no `update_id`), large: acknowledged, not handled, and logged at WARN
    // with a short prefix only.
    let filler = "Z".repeat(20_000);
    let body = format!(r#"{{"marker-unreadable": "{filler}"}}"#);
    assert_eq!(post_update(&url, Some(secret), &body).await, 200);
    wait_for_log(&logs, "the unreadable body", |l| {
        l.contains("unreadable Telegram update dropped") && l.contains("marker-unreadable")
    })
    .await;
    let text = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
    let line = text
        .lines()
        .find(|l| l.contains("marker-unreadable"))
        .unwrap();
    assert!(line.contains("WARN"), "{line}");
    assert!(line.len() < 1_000, "a bounded line: {} bytes", line.len());
    assert!(
        !text.contains(&"Z".repeat(300)),
        "the body is not logged whole"
    );
    // Nothing reached the engine; a good update after it still does.
    assert!(s.model.requests().is_empty());
    let mut u = private_text(ADA, 6, "after the junk");
    u["update_id"] = json!(2);
    assert_eq!(post_update(&url, Some(secret), &u.to_string()).await, 200);
    s.fake
        .wait_for("the reply", |c| sent_text(c, "echo: after the junk"))
        .await;
}

/// Opens a connection to the webhook at `url` and sends a POST header with `secret` (when set)
/// and `framing` (`Content-Length: n` or `Transfer-Encoding: chunked`).
async fn webhook_head(url: &str, secret: Option<&str>, framing: &str) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let url = url::Url::parse(url).unwrap();
    let addr = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap());
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let secret = secret
        .map(|s| format!("X-Telegram-Bot-Api-Secret-Token: {s}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: bot.example\r\nContent-Type: application/json\r\n{secret}{framing}\r\n\r\n",
        url.path()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn
}

/// The status code of the response on `conn` (its first line), waited for up to [`testing::WAIT`].
async fn response_status(conn: &mut tokio::net::tcp::OwnedReadHalf) -> u16 {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let read = async {
        while !got.windows(2).any(|w| w == b"\r\n") {
            let n = conn.read(&mut buf).await.unwrap();
            assert!(n > 0, "the connection closed without a response");
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(testing::WAIT, read)
        .await
        .expect("a response while the body is still unfinished");
    let line = String::from_utf8_lossy(&got).into_owned();
    line.split(' ').nth(1).unwrap().parse().unwrap()
}

/// Writes `chunk` to `conn` until the peer stops taking it (an endless body).
fn write_forever(mut conn: tokio::net::tcp::OwnedWriteHalf, chunk: Vec<u8>) {
    use tokio::io::AsyncWriteExt;
    tokio::spawn(async move { while conn.write_all(&chunk).await.is_ok() {} });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_bounds_huge_endless_and_slow_bodies() {
    let secret = "s3cret-Token_3";
    let (s, url) = webhook_setup(secret).await;

    // A wrong secret with a body that claims 100 MB and never stops: 401 at once, unread.
    let (mut rd, wr) = webhook_head(&url, Some("wrong"), "Content-Length: 104857600")
        .await
        .into_split();
    write_forever(wr, vec![b'{'; 16 * 1024]);
    assert_eq!(response_status(&mut rd).await, 401);

    // The right secret and a declared length over the limit: 413 before any of it is sent.
    let over = format!("Content-Length: {}", MAX_UPDATE_BYTES + 1);
    let (mut rd, _wr) = webhook_head(&url, Some(secret), &over).await.into_split();
    assert_eq!(response_status(&mut rd).await, 413);

    // The right secret and an endless chunked body: 413 once past the limit, while the sender
    // is still sending.
    let (mut rd, wr) = webhook_head(&url, Some(secret), "Transfer-Encoding: chunked")
        .await
        .into_split();
    let mut chunk = format!("{:x}\r\n", 16 * 1024).into_bytes();
    chunk.extend(std::iter::repeat_n(b' ', 16 * 1024));
    chunk.extend_from_slice(b"\r\n");
    write_forever(wr, chunk);
    assert_eq!(response_status(&mut rd).await, 413);

    // The right secret and a body that stops arriving: 408 after the body timeout.
    let (mut rd, mut wr) = webhook_head(&url, Some(secret), "Content-Length: 1000")
        .await
        .into_split();
    tokio::io::AsyncWriteExt::write_all(&mut wr, br#"{"update_id": 9"#)
        .await
        .unwrap();
    assert_eq!(response_status(&mut rd).await, 408);

    // None of it reached the engine; a good update afterwards still does.
    assert!(s.model.requests().is_empty());
    let update = serde_json::to_string(&{
        let mut u = private_text(ADA, 6, "after the junk");
        u["update_id"] = json!(2);
        u
    })
    .unwrap();
    assert_eq!(post_update(&url, Some(secret), &update).await, 200);
    let sent = s
        .fake
        .wait_for("the reply", |c| sent_text(c, "echo: after the junk"))
        .await;
    assert_eq!(sent["text"], "echo: after the junk");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_is_marked_seen_working_and_done_and_typing_is_shown() {
    let s = setup(EVERYONE).await;
    s.fake.push(private_text(ADA, 7, "react please"));
    let reactions = |calls: &[Call]| -> Vec<String> {
        calls
            .iter()
            .filter(|c| c.method == "setmessagereaction" && c.result.is_some())
            .map(|c| {
                assert_eq!(c.body["message_id"], 7);
                assert_eq!(
                    c.body["reaction"].as_array().map(Vec::len),
                    Some(1),
                    "one at a time"
                );
                c.body["reaction"][0]["emoji"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    let calls = s
        .fake
        .wait_for("done", |c| {
            (reactions(c).last().map(String::as_str) == Some("👌")).then(|| c.to_vec())
        })
        .await;
    assert_eq!(reactions(&calls), ["👀", "✍", "👌"]);
    // The reply is posted before Done, and typing was shown in the chat while the turn ran.
    let reply = calls
        .iter()
        .position(|c| c.method == "sendmessage" && c.body["text"] == "echo: react please")
        .expect("the reply");
    let done = calls
        .iter()
        .rposition(|c| c.method == "setmessagereaction")
        .unwrap();
    assert!(reply < done, "the reply before Done");
    assert!(
        calls.iter().any(|c| c.method == "sendchataction"
            && c.body["action"] == "typing"
            && c.body["chat_id"] == json!(ADA)),
        "typing shown"
    );
    // Every reaction the bot used is one Telegram accepts (the fake refuses others).
    assert!(
        calls
            .iter()
            .filter(|c| c.method == "setmessagereaction")
            .all(|c| c.result.is_some())
    );
}

/// The fake's updates become visible in id order even when pushed from many threads at once (an
/// id was assigned before its update was queued, so a higher one could be served first and a
/// bot's confirmation of it dropped the lower one: the crash suite counted it as a loss).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fakes_updates_are_served_in_id_order_when_pushed_at_once() {
    let fake = Arc::new(FakeBotApi::start().await);
    let pushers: Vec<_> = (0..8)
        .map(|t| {
            let fake = fake.clone();
            std::thread::spawn(move || {
                for i in 0..300 {
                    fake.push(json!({"message": {"message_id": t * 1_000 + i, "text": "x"}}));
                }
            })
        })
        .collect();
    // A bot polling meanwhile, confirming each batch with the next offset.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let url = format!(
        "{}bot{}/getUpdates",
        fake.api_url(),
        frogbot_telegram::testing::TOKEN
    );
    let (mut offset, mut seen) = (0_i64, Vec::new());
    loop {
        let done = pushers.iter().all(std::thread::JoinHandle::is_finished);
        let body = client
            .post(&url)
            .header("content-type", "application/json")
            .body(json!({"offset": offset, "limit": 100, "timeout": 0}).to_string())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let body: Value = serde_json::from_str(&body).unwrap();
        let batch = body["result"].as_array().cloned().unwrap_or_default();
        for u in &batch {
            let id = u["update_id"].as_i64().unwrap();
            seen.push(id);
            offset = offset.max(id + 1);
        }
        if done && batch.is_empty() {
            break;
        }
    }
    for p in pushers {
        p.join().unwrap();
    }
    assert_eq!(
        seen.len(),
        8 * 300,
        "every update served once, none confirmed unseen"
    );
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "in id order");
}

/// An agent outside FrogBot in Ada's private chat: its message with an event button is posted
/// through the outbox (an inline keyboard with `e{block}:{button}`), Ada taps the button three
/// times, and the agent's inbox holds three events — nothing is answered in the chat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_taps_on_an_event_button_are_three_events_in_the_agents_inbox() {
    use frogbot_core::agent::{AgentMessage, AgentPlace, ChannelTarget};
    let s = setup(EVERYONE).await;
    let agent = UserId::new("ada");
    let chat = s
        .engine
        .agents()
        .open_chat(
            Some(&agent),
            AgentPlace::Channel {
                platform: PLATFORM.into(),
                place: ChannelTarget::Thread(ADA.to_string()),
            },
            "Deploy",
            "k1",
        )
        .await
        .unwrap();
    let blocks = frogbot_model::blocks::Block::list_from_json(&json!([
        {"type": "progress", "id": "bar", "value": 1, "max": 4, "label": "Steps"},
        {"type": "fields", "id": "actions", "fields": [{"key": "Branch", "value": "main"}],
         "events": [{"label": "Retry", "value": "retry"}, {"label": "Show logs"}]}
    ]))
    .unwrap();
    s.engine
        .agents()
        .post(
            &chat.chat_id,
            Some(&agent),
            AgentMessage {
                id: Some("m1".into()),
                title: Some("Deploy".into()),
                text: Some("Starting **now**".into()),
                blocks,
                pin: None,
                files: Vec::new(),
            },
        )
        .await
        .unwrap();
    let (id, body) = s
        .fake
        .wait_for("the agent's message", |calls| {
            calls.iter().find_map(|c| {
                let r = c.result.as_ref()?;
                (c.method == "sendmessage" && !c.body["reply_markup"].is_null())
                    .then(|| (r["message_id"].as_i64().unwrap(), c.body.clone()))
            })
        })
        .await;
    assert_eq!(
        body["reply_markup"]["inline_keyboard"][0][0]["callback_data"],
        "e1:0"
    );
    // The engine keeps the platform id before a click can find it.
    let deadline = std::time::Instant::now() + testing::WAIT;
    loop {
        let m = s
            .engine
            .store_for_tests()
            .get_message(&chat.chat_id, "m1")
            .await
            .unwrap();
        if m.is_some_and(|m| !m.message.metadata.posted.is_empty()) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the posted id was never kept"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let sends = s.fake.calls("sendmessage").len();
    for n in 0..3 {
        click(&s.fake, &format!("tap{n}"), ADA, id, "e1:0");
    }
    s.fake
        .wait_for("three answered taps", |calls| {
            (0..3)
                .all(|n| answered(calls, &format!("tap{n}")).is_some())
                .then_some(())
        })
        .await;
    for n in 0..3 {
        let a = answered(&s.fake.all_calls(), &format!("tap{n}")).unwrap();
        assert!(a.get("text").is_none(), "no notice: {a}");
    }
    let items = s
        .engine
        .agents()
        .inbox(Some(&agent), Some(&chat.chat_id), 10)
        .await
        .unwrap();
    assert_eq!(items.len(), 3, "{items:#?}");
    for item in &items {
        let ev = item.event.as_ref().expect("an event");
        assert_eq!(ev.block_id, "actions");
        assert_eq!(ev.value, "retry");
        assert_eq!(ev.message_id, "m1");
    }
    assert_eq!(s.fake.calls("sendmessage").len(), sends, "nothing answered");
}

/// The `sendMessage` the fake accepted whose text is `text`: (message id, its body).
fn sent_exactly(calls: &[Call], text: &str) -> Option<(i64, Value)> {
    calls.iter().find_map(|c| {
        let id = c.result.as_ref()?["message_id"].as_i64()?;
        (c.method == "sendmessage" && c.body["text"] == text).then(|| (id, c.body.clone()))
    })
}

/// Issue 37: an agent's conversation with a person is a thread of its own in their private chat
/// (`{chat}~{root}`), never the private chat's own thread where the person talks with the model.
/// The person's plain messages still go to the model; their replies to the agent's messages go to
/// the agent's inbox; the agent's messages reach them as replies to its first message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_conversation_with_a_person_never_takes_over_their_chat_with_the_model() {
    use frogbot_core::agent::{AgentMessage, AgentPlace, ChannelTarget};
    let s = setup(EVERYONE).await;
    // Ada writes in her private chat (replying to message `reply_to`).
    let say = |text: &str, reply_to: Option<i64>| {
        let m = s
            .fake
            .user_message(private_chat(ADA, "Ada"), user(ADA, "Ada"), text, reply_to);
        s.fake.push(m);
    };
    // Ada already talks with the model in her private chat.
    say("hello there", None);
    s.fake
        .wait_for("the model's reply", |c| sent_text(c, "echo: hello there"))
        .await;
    let model_chat = channel_chat_id(PLATFORM, &ADA.to_string());

    // An agent opens a conversation with Ada: its first message is posted in her private chat and
    // the conversation is a thread of its own.
    let agent = UserId::new("deployer");
    let chat = s
        .engine
        .agents()
        .open_chat(
            Some(&agent),
            AgentPlace::Channel {
                platform: PLATFORM.into(),
                place: ChannelTarget::User(ADA.to_string()),
            },
            "Deploy **v2** today?",
            "k1",
        )
        .await
        .unwrap();
    let (root, body) = sent_exactly(&s.fake.all_calls(), "Deploy <b>v2</b> today?")
        .expect("the conversation's first message");
    assert_eq!(body["chat_id"], json!(ADA));
    let thread = chat.channel.as_ref().unwrap().thread.clone();
    assert_eq!(thread, format!("{ADA}~{root}"));
    assert_ne!(chat.chat_id, model_chat);
    // Asked again with the same key (a retry): the same conversation, nothing posted again.
    let again = s
        .engine
        .agents()
        .open_chat(
            Some(&agent),
            AgentPlace::Channel {
                platform: PLATFORM.into(),
                place: ChannelTarget::User(ADA.to_string()),
            },
            "Deploy **v2** today?",
            "k1",
        )
        .await
        .unwrap();
    assert_eq!(again.chat_id, chat.chat_id);
    let firsts = s
        .fake
        .calls("sendmessage")
        .iter()
        .filter(|b| b["text"] == "Deploy <b>v2</b> today?")
        .count();
    assert_eq!(firsts, 1);

    // (c) The agent's message reaches Ada in her private chat, as a reply to the first one.
    s.engine
        .agents()
        .post(
            &chat.chat_id,
            Some(&agent),
            AgentMessage {
                id: Some("m1".into()),
                text: Some("Shall I go ahead?".into()),
                ..AgentMessage::default()
            },
        )
        .await
        .unwrap();
    let (asked, body) = s
        .fake
        .wait_for("the agent's message", |c| {
            sent_exactly(c, "Shall I go ahead?")
        })
        .await;
    assert_eq!(body["chat_id"], json!(ADA));
    assert_eq!(body["reply_parameters"]["message_id"], json!(root));
    assert_eq!(s.fake.sent(asked)["reply_to_message"]["message_id"], root);

    // (a) Ada's plain message in her private chat still goes to the model.
    say("how are frogs", None);
    s.fake
        .wait_for("the model's reply", |c| sent_text(c, "echo: how are frogs"))
        .await;

    // (b) Her reply to the agent's message, and one to its first message, go to the agent.
    say("yes, go", Some(asked));
    say("and v3 too", Some(root));
    let mut inbox = Vec::new();
    while inbox.len() < 2 {
        let items = s
            .engine
            .agents()
            .inbox_wait(Some(&agent), None, 50, testing::WAIT)
            .await
            .unwrap();
        assert!(
            !items.is_empty(),
            "the agent's inbox stayed empty: {inbox:?}"
        );
        inbox.extend(items);
    }
    // Then a plain message: handled after the replies (one queue per private chat), by the model.
    say("ping", None);
    s.fake
        .wait_for("the model's reply", |c| sent_text(c, "echo: ping"))
        .await;
    inbox.extend(
        s.engine
            .agents()
            .inbox(Some(&agent), None, 50)
            .await
            .unwrap(),
    );
    let texts: Vec<String> = inbox.iter().map(|i| i.message.text()).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts[0].contains("yes, go"), "{texts:?}");
    assert!(texts[1].contains("and v3 too"), "{texts:?}");
    assert!(inbox.iter().all(|i| i.chat_id == chat.chat_id));
    // The model saw Ada's plain messages only, and answered nothing in the agent's conversation.
    let seen: Vec<String> = s.model.requests().iter().map(last_user).collect();
    assert!(seen.iter().any(|t| t == "how are frogs"), "{seen:?}");
    assert!(
        seen.iter()
            .all(|t| !t.contains("yes, go") && !t.contains("v3")),
        "{seen:?}"
    );
    let calls = s.fake.all_calls();
    assert!(sent_text(&calls, "echo: yes").is_none());
    assert!(sent_text(&calls, "echo: and v3").is_none());
    let model_chat_row = s.engine.chats().get(&model_chat).await.unwrap().unwrap();
    assert!(
        model_chat_row.agent.is_none(),
        "Ada's chat with the model stays hers"
    );

    // A tap on an event button of the agent's message (a reply to the first one) is an event in
    // the agent's conversation, not a stale click in Ada's chat with the model.
    let blocks = frogbot_model::blocks::Block::list_from_json(&json!([
        {"type": "fields", "id": "actions", "fields": [{"key": "Branch", "value": "main"}],
         "events": [{"label": "Retry", "value": "retry"}]}
    ]))
    .unwrap();
    s.engine
        .agents()
        .post(
            &chat.chat_id,
            Some(&agent),
            AgentMessage {
                id: Some("m2".into()),
                text: Some("Deploying".into()),
                blocks,
                ..AgentMessage::default()
            },
        )
        .await
        .unwrap();
    let (buttons, body) = s
        .fake
        .wait_for("the agent's message with a button", |calls| {
            calls.iter().find_map(|c| {
                let r = c.result.as_ref()?;
                (c.method == "sendmessage" && !c.body["reply_markup"].is_null())
                    .then(|| (r["message_id"].as_i64().unwrap(), c.body.clone()))
            })
        })
        .await;
    assert_eq!(body["reply_parameters"]["message_id"], json!(root));
    // The engine keeps the platform id before a tap can find it.
    let deadline = std::time::Instant::now() + testing::WAIT;
    while s
        .engine
        .chats()
        .message(&chat.chat_id, "m2")
        .await
        .unwrap()
        .is_none_or(|m| m.message.metadata.posted.is_empty())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the posted id was never kept"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    click(&s.fake, "tap", ADA, buttons, "e0:0");
    s.fake
        .wait_for("the answered tap", |c| answered(c, "tap"))
        .await;
    let a = answered(&s.fake.all_calls(), "tap").unwrap();
    assert!(a.get("text").is_none(), "no notice: {a}");
    let items = s
        .engine
        .agents()
        .inbox(Some(&agent), Some(&chat.chat_id), 10)
        .await
        .unwrap();
    assert_eq!(items.len(), 1, "{items:#?}");
    assert_eq!(items[0].event.as_ref().expect("an event").value, "retry");
}

/// Files (issue 40, item 1): a photo with a caption (Telegram's sizes of it: the largest is
/// taken, found with `getFile` and read from the Bot API's file URL) and a document without a
/// caption reach the model; a document over the Bot API's 20 MB download limit (sent without
/// its optional `file_size`, so only `getFile` refuses it) is named in a notice, and its
/// caption still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn photos_and_documents_reach_the_model() {
    let s = setup(EVERYONE).await;
    let jpeg: Vec<u8> = (0..50_000u32).map(|i| (i % 239) as u8).collect();
    let big = s.fake.store_file("photos/file_0.jpg", vec![1; 90]);
    let small = s.fake.store_file("photos/file_1.jpg", jpeg.clone());
    let chat = private_chat(ADA, "Ada");
    s.fake.push(json!({"message": {
        "message_id": 40, "date": 1_767_225_600, "chat": chat, "from": user(ADA, "Ada"),
        "caption": "what is this?",
        "photo": [
            {"file_id": big, "file_unique_id": "AQADs", "file_size": 90, "width": 90, "height": 51},
            {"file_id": small, "file_unique_id": "AQADm", "file_size": jpeg.len(), "width": 1280, "height": 720}
        ]
    }}));
    s.fake
        .wait_for("the reply to the photo", |c| {
            sent_text(c, "echo: what is this?")
        })
        .await;
    let req = s.model.requests().last().cloned().unwrap();
    let files: Vec<_> = req
        .messages
        .iter()
        .filter_map(|m| match m {
            ModelMessage::File(f) => Some(f.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        files.len(),
        1,
        "{:#?}",
        (s.fake.calls("getfile"), s.fake.calls("sendmessage"))
    );
    assert_eq!(files[0].filename, "photo-AQADm.jpg", "the largest size");
    use base64::Engine as _;
    assert_eq!(
        files[0].content,
        Some(frogbot_core::agent::FileContent::Image {
            data_url: format!(
                "data:image/jpeg;base64,{}",
                base64::engine::general_purpose::STANDARD.encode(&jpeg)
            )
        })
    );

    // A document alone, and one over the Bot API's 20 MB limit.
    let notes = s
        .fake
        .store_file("documents/file_2.txt", b"milk, eggs".to_vec());
    let huge = s
        .fake
        .store_file("documents/file_3.bin", vec![0; 20 * 1024 * 1024 + 1]);
    s.fake.push(json!({"message": {
        "message_id": 41, "date": 1_767_225_601, "chat": chat, "from": user(ADA, "Ada"),
        "document": {"file_id": notes, "file_unique_id": "AgADn", "file_name": "notes.txt",
                     "mime_type": "text/plain", "file_size": 10}
    }}));
    s.fake
        .wait_for("the reply to the document", |c| {
            c.iter()
                .filter(|c| c.method == "sendmessage")
                .nth(1)
                .map(|_| ())
        })
        .await;
    let req = s.model.requests().last().cloned().unwrap();
    let text = req.messages.iter().find_map(|m| match m {
        ModelMessage::File(f) if f.filename == "notes.txt" => f.content.clone(),
        _ => None,
    });
    assert_eq!(
        text,
        Some(frogbot_core::agent::FileContent::Text {
            text: "[notes.txt (text/plain)]\nmilk, eggs".into()
        })
    );
    s.fake.push(json!({"message": {
        "message_id": 42, "date": 1_767_225_602, "chat": chat, "from": user(ADA, "Ada"),
        "caption": "and this",
        "document": {"file_id": huge, "file_unique_id": "AgADh", "file_name": "dump.bin",
                     "mime_type": "application/octet-stream"}
    }}));
    let told = s.fake.wait_for("the notice", |c| sent_text(c, "📎")).await;
    assert_eq!(
        told["text"],
        "📎 I could not take dump.bin: it is larger than the 20 MB Telegram lets a bot download."
    );
    s.fake
        .wait_for("the caption still runs", |c| sent_text(c, "echo: and this"))
        .await;
    // Known too large from its file_size: not even asked for (here the configured limit, 20 MB
    // by default, refuses it before the Bot API's would).
    s.fake.push(json!({"message": {
        "message_id": 43, "date": 1_767_225_603, "chat": chat, "from": user(ADA, "Ada"),
        "caption": "and that",
        "document": {"file_id": "BQACAgQAAxkBAAIBig", "file_unique_id": "AgADv",
                     "file_name": "video.mkv", "mime_type": "video/x-matroska",
                     "file_size": 31_457_280}
    }}));
    s.fake
        .wait_for("the second notice", |c| {
            sent_text(
                c,
                "📎 I could not take video.mkv: it is larger than the 20 MB limit.",
            )
        })
        .await;
    s.fake
        .wait_for("that caption runs too", |c| sent_text(c, "echo: and that"))
        .await;
    assert!(
        !s.fake
            .calls("getfile")
            .iter()
            .any(|c| c["file_id"] == "BQACAgQAAxkBAAIBig"),
        "a file known too large is not asked for"
    );
}
