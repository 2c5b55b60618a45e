//! `ask` on Telegram end to end (issue 40, item 4: "a person may ask another person"): FrogBot's
//! engine on SQLite, the Telegram channel over the fake Bot API (long polling). Alice asks Bob in
//! a group, naming him with a text mention (a person picked from the member list) or by replying
//! to his message; the question's message mentions Bob (`tg://user?id=`, a `text_mention` Telegram
//! notifies him of); Carol's click is refused, Bob's answers, and the question reads answered.
//! `ask` naming nobody is told how to ask.

use frogbot_channel::{ASK_USAGE_TEXT, Adapter};
use frogbot_core::agent::ask::ask_call_id;
use frogbot_core::agent::scripted::{ScriptedModel, reply};
use frogbot_core::agent::{Engine, ModelRequest, channel_chat_id, channel_message_id};
use frogbot_core::model::now_millis;
use frogbot_telegram::PLATFORM;
use frogbot_telegram::channel::{Config, Receive, connect};
use frogbot_telegram::questions::DENIED_TEXT;
use frogbot_telegram::testing::{
    BOT_USERNAME, FakeBotApi, SeenMessage, WAIT, group_chat, transcript, user,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const ALICE: i64 = 42;
const BOB: i64 = 77;
const CAROL: i64 = 88;
const GROUP: i64 = -100900;

struct Setup {
    fake: FakeBotApi,
    model: ScriptedModel,
    engine: Engine,
    shutdown: CancellationToken,
    _db: frogbot_testkit::TestDb,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn setup() -> Setup {
    let fake = FakeBotApi::start().await;
    let mut config = Config::new("123:TEST");
    config.api_url = Some(fake.api_url());
    config.receive = Receive::polling();
    let channel = connect(config).await.unwrap();
    assert_eq!(channel.me().username(), BOT_USERNAME);
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let model = ScriptedModel::new(|_: &ModelRequest| reply("the model"));
    let engine = frogbot_testkit::engine_with(store, model.clone()).with_channel(channel.channel());
    let shutdown = CancellationToken::new();
    channel.start(engine.handle(), shutdown.clone()).unwrap();
    Setup {
        fake,
        model,
        engine,
        shutdown,
        _db: db,
    }
}

fn alice() -> Value {
    user(ALICE, "Alice")
}

fn bob() -> Value {
    user(BOB, "Bob")
}

/// A message in the group, with its `entities` as Telegram sends them.
fn in_group(id: i64, from: Value, text: &str, entities: Value) -> Value {
    let mut m = json!({
        "message_id": id, "date": 1_767_225_600, "chat": group_chat(GROUP, false),
        "from": from, "text": text, "entities": entities
    });
    if m["entities"].as_array().is_some_and(Vec::is_empty)
        && let Some(o) = m.as_object_mut()
    {
        o.remove("entities");
    }
    json!({ "message": m })
}

/// Waits until the engine has recorded the question of the ask in message `asked` as posted
/// with the platform message `shown` (a person can click or reply only once they see it, and
/// only a question recorded as posted takes answers; the test is quicker than a person).
async fn posted(s: &Setup, asked: i64, shown: i64) {
    let chat = channel_chat_id(PLATFORM, &GROUP.to_string());
    let call = ask_call_id(&channel_message_id(PLATFORM, &format!("{GROUP}:{asked}")));
    let linked = format!("{GROUP}:{shown}");
    frogbot_testkit::eventually("the ask recorded as posted", WAIT, async || {
        let q = s
            .engine
            .store_for_tests()
            .get_question(&chat, &call, now_millis())
            .await
            .unwrap();
        q.is_some_and(|q| {
            q.rendered && !q.posting && q.record.messages.iter().any(|m| m.id == linked)
        })
    })
    .await;
}

/// The `/ask@frogbot` command entity (what the command menu sends in a group).
fn command(len: usize) -> Value {
    json!({"type": "bot_command", "offset": 0, "length": len})
}

/// The question's message with its keyboard, once shown with its buttons.
fn keyboard_message(seen: &[SeenMessage]) -> Option<&SeenMessage> {
    seen.iter()
        .find(|m| m.sender == "FrogBot" && m.buttons.iter().flatten().any(|b| b == "yes"))
}

/// The callback data of the button `label` on the bot's message `id`.
fn data_of(fake: &FakeBotApi, id: i64, label: &str) -> String {
    fake.sent(id)["reply_markup"]["inline_keyboard"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap())
        .find(|b| b["text"] == label)
        .and_then(|b| b["callback_data"].as_str())
        .unwrap_or_else(|| panic!("no button {label} on {id}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alice_asks_bob_with_choices_only_bob_answers() {
    let s = setup().await;
    let thread = GROUP.to_string();
    // Bob, picked from the member list (no username): a text mention carrying him.
    s.fake.push(in_group(
        10,
        alice(),
        "/ask@frogbot Bob Ship today? | yes | no",
        json!([command(12), {"type": "text_mention", "offset": 13, "length": 3,
            "user": {"id": BOB, "is_bot": false, "first_name": "Bob"}}]),
    ));
    let seen = s
        .fake
        .wait_view(&thread, "the question with its keyboard", |seen, _| {
            keyboard_message(seen).is_some()
        })
        .await;
    let view = transcript(&seen);
    let question = keyboard_message(&seen).unwrap();
    assert!(
        question
            .text
            .starts_with("❓ For Bob\nAlice asks Bob: Ship today?"),
        "{view}"
    );
    assert_eq!(
        question.buttons,
        [vec!["yes"], vec!["no"], vec!["Skip"]],
        "{view}"
    );
    // The question's message mentions Bob, and it notified: Telegram notifies him.
    assert_eq!(question.mentions, [BOB], "{view}");
    assert!(question.notified, "{view}");
    let sent = s.fake.sent(question.id);
    assert_eq!(
        sent["entities"][0],
        json!({"type": "text_mention", "offset": 2, "length": 7,
            "user": {"id": BOB, "is_bot": false, "first_name": "Bob"}}),
        "{view}"
    );
    // No other message of the bot mentions anyone (the own-answer prompt beside the keyboard is
    // silent and names nobody).
    let others: Vec<&SeenMessage> = seen
        .iter()
        .filter(|m| m.sender == "FrogBot" && m.id != question.id)
        .collect();
    assert!(!others.is_empty(), "the own-answer prompt: {view}");
    assert!(
        others.iter().all(|m| m.mentions.is_empty() && !m.notified),
        "{view}"
    );
    // What Bob was shown: the question's message, mentioning him.
    let to_bob = s.fake.notices(BOB);
    assert_eq!(to_bob.len(), 1, "{to_bob:?}");
    assert!(
        to_bob[0].starts_with(&format!(
            "❓ <a href=\"tg://user?id={BOB}\">For Bob</a>\nAlice asks Bob: Ship today?"
        )),
        "{to_bob:?}"
    );

    posted(&s, 10, question.id).await;
    // Carol clicks yes: refused, with the shared text; nothing answered.
    let yes = data_of(&s.fake, question.id, "yes");
    let carol = s
        .fake
        .click(&user(CAROL, "Carol"), question.id, &yes.clone());
    let carol_query = carol["callback_query"]["id"].as_str().unwrap().to_owned();
    s.fake.push(carol);
    let refused = s
        .fake
        .wait_for("Carol's refusal", |calls| {
            calls
                .iter()
                .find(|c| {
                    c.method == "answercallbackquery"
                        && c.body["callback_query_id"] == carol_query.as_str()
                })
                .map(|c| c.body.clone())
        })
        .await;
    assert_eq!(refused["text"], DENIED_TEXT);
    assert_eq!(s.fake.notices(CAROL), [DENIED_TEXT]);

    // Bob clicks no: answered; the question reads answered, by Bob, without its buttons.
    let no = data_of(&s.fake, question.id, "no");
    s.fake.push(s.fake.click(&bob(), question.id, &no));
    let qid = question.id;
    let seen = s
        .fake
        .wait_view(&thread, "the answered question", |seen, _| {
            seen.iter()
                .any(|m| m.id == qid && m.text.ends_with("✅ Answered by Bob: no"))
        })
        .await;
    let view = transcript(&seen);
    let answered = seen.iter().find(|m| m.id == qid).unwrap();
    assert!(answered.buttons.is_empty(), "{view}");
    assert!(answered.edited, "{view}");
    assert!(
        answered
            .text
            .starts_with("❓ For Bob\nAlice asks Bob: Ship today?"),
        "{view}"
    );
    // Carol's click changed nothing, and the model never ran for the ask.
    assert!(!view.contains("Carol"), "{view}");
    assert!(s.model.requests().is_empty(), "{view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_to_bobs_message_asks_bob_and_naming_nobody_is_told_how() {
    let s = setup().await;
    let thread = GROUP.to_string();
    // Naming nobody: the usage text, as a reply.
    s.fake.push(in_group(
        10,
        alice(),
        "/ask@frogbot Ship today?",
        json!([command(12)]),
    ));
    let seen = s
        .fake
        .wait_view(&thread, "the usage text", |seen, _| {
            seen.iter().any(|m| m.text == ASK_USAGE_TEXT)
        })
        .await;
    let usage = seen.iter().find(|m| m.text == ASK_USAGE_TEXT).unwrap();
    assert_eq!(usage.reply_to, Some(10), "{}", transcript(&seen));
    assert!(usage.mentions.is_empty());

    // Bob says something in the group (not to the bot: ignored, but there to reply to).
    s.fake.push(in_group(11, bob(), "I can ship it", json!([])));
    // Alice replies to it with `/ask`: Bob is asked, with a text input.
    let mut ask = in_group(
        12,
        alice(),
        "/ask@frogbot Ready to ship?",
        json!([command(12)]),
    );
    ask["message"]["reply_to_message"] = s.fake.sent(11);
    s.fake.push(ask);
    let seen = s
        .fake
        .wait_view(&thread, "the question's prompt", |seen, _| {
            seen.iter().any(|m| m.reply_field.is_some())
        })
        .await;
    let view = transcript(&seen);
    let prompt = seen.iter().find(|m| m.reply_field.is_some()).unwrap();
    assert!(
        prompt
            .text
            .starts_with("❓ For Bob\nAlice asks Bob: Ready to ship?"),
        "{view}"
    );
    assert_eq!(prompt.mentions, [BOB], "{view}");
    assert!(prompt.notified, "{view}");

    // Alice's own reply is not taken; Bob's reply to the prompt answers.
    let prompt_id = prompt.id;
    posted(&s, 12, prompt_id).await;
    let by_alice = s
        .fake
        .user_message(group_chat(GROUP, false), alice(), "yes", Some(prompt_id));
    s.fake.push(by_alice);
    s.fake
        .wait_view(&thread, "Alice told she may not answer", |seen, _| {
            seen.iter().any(|m| m.text == DENIED_TEXT)
        })
        .await;
    let by_bob = s.fake.user_message(
        group_chat(GROUP, false),
        bob(),
        "ready now",
        Some(prompt_id),
    );
    s.fake.push(by_bob);
    let seen = s
        .fake
        .wait_view(&thread, "the answered prompt", |seen, _| {
            seen.iter()
                .any(|m| m.id == prompt_id && m.text.contains("✅ Answered by Bob"))
        })
        .await;
    let answered = seen.iter().find(|m| m.id == prompt_id).unwrap();
    assert!(
        answered.text.ends_with("✅ Answered by Bob: ready now"),
        "{}",
        transcript(&seen)
    );
}
