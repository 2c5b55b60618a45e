//! Asks to Discord (`ChannelOutbox::ask_thread` of the Discord outbox): to a text channel (a
//! root message and a public thread started on it), to a person (a conversation of its own in
//! their DM channel: a root message there, the thread `{dm}~{root}`), idempotent
//! on the ask's key, and refused with nothing posted for ids Discord does not know. Over
//! serenity's real `Http` and gateway `Client` against the fake Discord, with FrogBot's engine
//! on SQLite running the ask as `POST /api/asks` does; the person's click comes through the
//! adapter's receive path (a gateway `INTERACTION_CREATE`).

use std::time::Duration;

use frogbot_channel::Adapter;
use frogbot_channel::outbox::AskTo;
use frogbot_core::agent::ask::{ASK_MODEL, AskId, AskState, AskStatus, ask_parts};
use frogbot_core::agent::scripted::{ScriptedModel, reply};
use frogbot_core::agent::{AskPlace, Engine, SendMessage, channel_chat_id};
use frogbot_core::model::{ChannelRef, Delivery, QuestionInput};
use frogbot_discord::PLATFORM;
use frogbot_discord::channel::outbox::ask_thread_name;
use frogbot_discord::channel::{self, Config, DiscordAdapter};
use frogbot_discord::ids::ask_nonce;
use frogbot_discord::testing::{self as fake, Call, FakeDiscord};
use frogbot_model::faults::{Fault, FaultPlan};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;
const GUILD: u64 = 100_000_000_000_000_001;
const ALICE: u64 = 300_000_000_000_000_003;
const WAIT: Duration = Duration::from_secs(20);

const TEXT: &str = "**Deploy?**\n\nShip build 42 to production?";

struct Bot {
    fake: FakeDiscord,
    engine: Engine,
    adapter: DiscordAdapter,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    _db: frogbot_testkit::TestDb,
}

impl Drop for Bot {
    fn drop(&mut self) {
        self.shutdown.cancel();
        self.task.abort();
    }
}

async fn start() -> Bot {
    start_with(ScriptedModel::new(|_| reply("ok"))).await
}

async fn start_with(model: ScriptedModel) -> Bot {
    let fake = FakeDiscord::start(APP, BOT).await;
    let adapter = channel::connect(Config {
        users: [(ALICE.to_string(), "alice".to_string())].into(),
        ..fake.config()
    })
    .await
    .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let engine = frogbot_testkit::engine_with(store, model).with_channel(adapter.channel());
    let shutdown = CancellationToken::new();
    let task = adapter
        .start(engine.handle(), shutdown.clone())
        .expect("the gateway task");
    assert!(fake.wait_ready(WAIT).await, "the client identified");
    Bot {
        fake,
        engine,
        adapter,
        shutdown,
        task,
        _db: db,
    }
}

fn alice() -> Value {
    fake::user(ALICE, "alice", false)
}

fn input() -> QuestionInput {
    serde_json::from_value(
        json!({"questions": [{"header": "Env", "question": "Where to?",
        "options": [{"label": "staging"}, {"label": "prod"}]}]}),
    )
    .unwrap()
}

/// The Discord channel of a FrogBot thread id (an agent conversation `{dm}~{root}`: the DM).
fn channel_of(thread: &str) -> &str {
    thread.split('~').next().unwrap_or(thread)
}

/// The calls that post a message or start a thread, from call `from` on.
fn posts(fake: &FakeDiscord, from: usize) -> Vec<Call> {
    fake.calls()
        .into_iter()
        .skip(from)
        .filter(|c| {
            c.method == "POST" && (c.path.ends_with("/messages") || c.path.ends_with("/threads"))
        })
        .collect()
}

impl Bot {
    /// Sends the ask `key` into `place`'s thread as `POST /api/asks` does; the ask's card as the
    /// fake keeps it (posted in the thread).
    async fn ask(&self, place: &ChannelRef, key: &str) -> Value {
        let from = self.fake.calls().len();
        self.engine
            .agents()
            .send(SendMessage {
                chat_id: channel_chat_id(PLATFORM, &place.thread),
                id: Some(key.to_owned()),
                parts: ask_parts(TEXT, &input(), key),
                author: None,
                delivery: Delivery::Queue,
                model: Some(ASK_MODEL.into()),
                reasoning: None,
                channel: Some(place.clone()),
                speaker: None,
                context: None,
            })
            .await
            .unwrap();
        let path = format!("/api/v10/channels/{}/messages", channel_of(&place.thread));
        let card = self
            .fake
            .wait_for(from, WAIT, |c| c.method == "POST" && c.path == path)
            .await
            .unwrap_or_else(|| panic!("the ask's card in its thread: {:#?}", self.fake.calls()));
        assert_eq!(card.status, 200);
        // A person clicks once the card shows, which is after the engine recorded it: wait for
        // that (a click racing the record is the engine's known posted-but-not-recorded window).
        let id = card.response["id"].as_str().unwrap().to_owned();
        let chat = channel_chat_id(PLATFORM, &place.thread);
        frogbot_testkit::eventually("the card recorded", WAIT, async || {
            self.engine
                .questions()
                .of_chat(&chat)
                .await
                .unwrap()
                .iter()
                .any(|q| q.rendered && q.record.messages.iter().any(|m| m.id == id))
        })
        .await;
        self.fake.message(&id).expect("the fake keeps the card")
    }

    /// Clicks the card's button `label` as alice (in `guild`, or in a DM).
    fn click(&self, n: u64, card: &Value, guild: Option<u64>, label: &str) {
        let custom_id = card["components"][0]["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["label"] == label)
            .and_then(|b| b["custom_id"].as_str())
            .unwrap_or_else(|| panic!("a {label} button on {card:#}"))
            .to_owned();
        self.fake.dispatch(
            "INTERACTION_CREATE",
            fake::component_on(
                500_000_000_000_000_000 + n,
                APP,
                card,
                guild,
                &alice(),
                &custom_id,
                None,
                &format!("tok-{n}"),
            ),
        );
    }

    /// The ask `key` in `thread`'s chat once it is over.
    async fn finished(&self, thread: &str, key: &str) -> AskStatus {
        let id = AskId {
            chat: channel_chat_id(PLATFORM, thread),
            message: key.to_owned(),
        };
        let mut events = self.engine.chats().subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(status) = self.engine.questions().ask_status(&id).await.unwrap()
                && status.state.is_final()
            {
                return status;
            }
            assert!(tokio::time::Instant::now() < deadline, "the ask {id} ended");
            let _ = tokio::time::timeout(Duration::from_millis(100), events.recv()).await;
        }
    }

    /// Checks the click `n` on `card` in `thread` was acknowledged and settled the card there.
    async fn settled(&self, from: usize, n: u64, thread: &str, card: &Value) {
        let callback = format!(
            "/api/v10/interactions/{}/tok-{n}/callback",
            500_000_000_000_000_000 + n
        );
        let ack = self
            .fake
            .wait_for(from, WAIT, |c| c.path == callback)
            .await
            .expect("the click was acknowledged");
        assert_eq!(ack.body["type"], 6, "DEFERRED_UPDATE_MESSAGE");
        let edit = format!(
            "/api/v10/channels/{}/messages/{}",
            channel_of(thread),
            card["id"].as_str().unwrap()
        );
        let edited = self
            .fake
            .wait_for(from, WAIT, |c| c.method == "PATCH" && c.path == edit)
            .await
            .expect("the card in the ask's thread settled");
        assert_eq!(edited.body["components"], json!([]));
        assert!(edited.body["content"].as_str().unwrap().contains("prod"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_to_a_text_channel_starts_a_thread_on_one_root_and_a_click_there_answers() {
    let bot = start().await;
    let channel = bot.fake.add_text_channel(GUILD);
    let from = bot.fake.calls().len();
    let place = bot
        .engine
        .channels()
        .ask_thread(PLATFORM, AskPlace::Thread(&channel.to_string()), TEXT, "m1")
        .await
        .unwrap();
    assert_eq!(place.platform, PLATFORM);

    // One root in the channel, with the ask's text and the nonce of its key; the thread started
    // on it has its id.
    let roots = bot.fake.channel_messages(channel);
    assert_eq!(roots.len(), 1, "{roots:#?}");
    assert_eq!(roots[0]["content"], TEXT);
    assert_eq!(roots[0]["nonce"], ask_nonce("m1"));
    assert_eq!(place.thread, roots[0]["id"].as_str().unwrap());
    let posted = posts(&bot.fake, from);
    assert_eq!(posted.len(), 2, "{posted:#?}");
    assert_eq!(posted[0].body["enforce_nonce"], true);
    assert_eq!(
        posted[1].path,
        format!(
            "/api/v10/channels/{channel}/messages/{}/threads",
            place.thread
        )
    );
    assert_eq!(posted[1].status, 201);
    assert_eq!(posted[1].body["name"], "Deploy?");
    assert_eq!(posted[1].response["type"], 11);
    assert_eq!(posted[1].response["parent_id"], channel.to_string());

    // The ask's card goes in the thread; alice's click there answers it, in the thread's chat.
    let card = bot.ask(&place, "m1").await;
    assert_eq!(card["channel_id"], place.thread.as_str());
    let from = bot.fake.calls().len();
    bot.click(1, &card, Some(GUILD), "prod");
    bot.settled(from, 1, &place.thread, &card).await;
    let status = bot.finished(&place.thread, "m1").await;
    assert_eq!(status.state, AskState::Answered);
    assert_eq!(
        status.chat_id,
        channel_chat_id(PLATFORM, &place.thread).to_string()
    );
    assert_eq!(
        serde_json::to_value(&status.values).unwrap(),
        json!({"Env": "prod"})
    );
    // Nothing more in the parent channel than the root.
    assert_eq!(bot.fake.channel_messages(channel).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_to_a_person_starts_a_conversation_of_its_own_in_their_dm_channel() {
    let bot = start().await;
    bot.fake.add_user(&alice());
    let from = bot.fake.calls().len();
    let place = bot
        .engine
        .channels()
        .ask_thread(PLATFORM, AskPlace::User(&ALICE.to_string()), TEXT, "m1")
        .await
        .unwrap();
    let dm = bot.fake.dm_of(&ALICE.to_string()).expect("a DM channel");
    // The ask's text is the conversation's root in the DM; the thread is `{dm}~{root}`, never
    // the DM channel itself (the person's conversation with the model).
    let posted = posts(&bot.fake, from);
    assert_eq!(posted.len(), 1, "{posted:#?}");
    assert_eq!(posted[0].path, format!("/api/v10/channels/{dm}/messages"));
    assert_eq!(posted[0].body["nonce"], ask_nonce("m1"));
    assert_eq!(posted[0].body["enforce_nonce"], true);
    let root = posted[0].response["id"].as_str().unwrap().to_owned();
    assert_eq!(place.thread, format!("{dm}~{root}"));
    assert_ne!(place.thread, dm.to_string());
    let opened: Vec<Call> = bot
        .fake
        .calls()
        .into_iter()
        .skip(from)
        .filter(|c| c.path == "/api/v10/users/@me/channels")
        .collect();
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0].body, json!({"recipient_id": ALICE.to_string()}));
    assert_eq!(opened[0].response["type"], 1);
    assert_eq!(opened[0].response["recipients"][0]["id"], ALICE.to_string());

    // Asked again (a retry of the same key): the nonce gets the same root back, the same thread.
    let again = bot
        .engine
        .channels()
        .ask_thread(PLATFORM, AskPlace::User(&ALICE.to_string()), TEXT, "m1")
        .await
        .unwrap();
    assert_eq!(again, place);
    assert_eq!(bot.fake.channel_messages(dm).len(), 1, "one root");

    // The card in the DM, as a reply to the root; alice's click there (a DM interaction) answers
    // it in the ask's conversation.
    let card = bot.ask(&place, "m1").await;
    assert_eq!(card["channel_id"], dm.to_string().as_str());
    assert_eq!(card["message_reference"]["message_id"], root.as_str());
    let from = bot.fake.calls().len();
    bot.click(1, &card, None, "prod");
    bot.settled(from, 1, &place.thread, &card).await;
    let status = bot.finished(&place.thread, "m1").await;
    assert_eq!(status.state, AskState::Answered);

    // A DM channel given as the thread is asked in as it is.
    let from = bot.fake.calls().len();
    let direct = bot
        .engine
        .channels()
        .ask_thread(PLATFORM, AskPlace::Thread(&dm.to_string()), TEXT, "m2")
        .await
        .unwrap();
    assert_eq!(direct.thread, dm.to_string());
    assert!(posts(&bot.fake, from).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_key_finds_the_same_thread_on_one_root() {
    let bot = start().await;
    let outbox = bot.adapter.outbox();
    let channel = bot.fake.add_text_channel(GUILD);
    let id = channel.to_string();

    // The root is posted but its answer is lost (the connection drops after Discord did it).
    bot.fake
        .set_faults(FaultPlan::new(7, 1.0).only(&[Fault::ResetAfterProcessing]));
    let lost = outbox
        .ask_thread(AskTo::new(AskPlace::Thread(&id), TEXT, "m1"))
        .await;
    bot.fake.clear_faults();
    assert!(lost.is_err(), "the first attempt saw no answer");
    assert_eq!(bot.fake.channel_messages(channel).len(), 1);

    // The retry: Discord answers the root of the nonce (not a second one) and the thread starts.
    let first = outbox
        .ask_thread(AskTo::new(AskPlace::Thread(&id), TEXT, "m1"))
        .await
        .unwrap();
    let roots = bot.fake.channel_messages(channel);
    assert_eq!(roots.len(), 1, "{roots:#?}");
    assert_eq!(first, roots[0]["id"].as_str().unwrap());

    // Again, as if that answer were lost too: the thread exists (160004), so it is the one.
    let from = bot.fake.calls().len();
    let second = outbox
        .ask_thread(AskTo::new(AskPlace::Thread(&id), TEXT, "m1"))
        .await
        .unwrap();
    assert_eq!(second, first);
    assert_eq!(bot.fake.channel_messages(channel).len(), 1);
    let started = posts(&bot.fake, from);
    assert_eq!(started.len(), 2);
    assert_eq!(started[0].response["id"], first.as_str(), "the same root");
    assert_eq!(started[1].status, 400);
    assert_eq!(started[1].response["code"], 160004);

    // The thread given as the place: asked there as it is, nothing posted.
    let from = bot.fake.calls().len();
    let inside = outbox
        .ask_thread(AskTo::new(AskPlace::Thread(&first), TEXT, "m2"))
        .await
        .unwrap();
    assert_eq!(inside, first);
    assert!(posts(&bot.fake, from).is_empty());

    // Another key: another root, another thread.
    let other = outbox
        .ask_thread(AskTo::new(AskPlace::Thread(&id), TEXT, "m3"))
        .await
        .unwrap();
    assert_ne!(other, first);
    assert_eq!(bot.fake.channel_messages(channel).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_ids_are_refused_with_nothing_posted() {
    let bot = start().await;
    let outbox = bot.adapter.outbox();
    let from = bot.fake.calls().len();
    let unknown = bot.fake.new_id().to_string();
    let cases = [
        (AskPlace::User("alice"), "a Discord user id is a number"),
        (
            AskPlace::Thread("general"),
            "a Discord channel or thread id is a number",
        ),
        (AskPlace::Thread(&unknown), "Unknown Channel"),
        (AskPlace::User(&unknown), "Invalid Recipient"),
    ];
    for (place, why) in cases {
        let err = outbox
            .ask_thread(AskTo::new(place, TEXT, "m1"))
            .await
            .expect_err("refused")
            .to_string();
        assert!(err.contains(why), "{place:?}: {err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }
    assert!(posts(&bot.fake, from).is_empty(), "nothing posted");
    // Through the engine, a channel error (what `POST /api/asks` answers 502 with).
    let err = bot
        .engine
        .channels()
        .ask_thread(PLATFORM, AskPlace::Thread(&unknown), TEXT, "m1")
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("Unknown Channel"), "{err}");
}

#[test]
fn thread_names_come_from_the_first_line() {
    assert_eq!(ask_thread_name(TEXT), "Deploy?");
    assert_eq!(ask_thread_name("\n\n  ## Pick one  \nmore"), "Pick one");
    assert_eq!(ask_thread_name("***"), "FrogBot ask");
    let long = ask_thread_name(&"frog ".repeat(40));
    assert!(long.chars().count() <= 100, "{long}");
}

/// The person's last message as the model sees it.
fn last_user(req: &frogbot_core::agent::ModelRequest) -> String {
    req.messages
        .iter()
        .rev()
        .find_map(|m| match m {
            frogbot_core::agent::ModelMessage::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Issue 37 on Discord: a DM cannot have threads, so an agent's conversation with a person is a
/// thread of its own, `{dm}~{root}`, in their DM. The person's plain DM messages still go to the
/// model; their replies to the agent's messages go to the agent's inbox (no model reply); the
/// agent's messages reach them as replies to its first message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_conversation_with_a_person_never_takes_over_their_dm_with_the_model() {
    use frogbot_core::agent::{AgentMessage, AgentPlace, ChannelTarget};
    use frogbot_core::model::UserId;
    use frogbot_discord::client::DiscordApi;
    let model = ScriptedModel::new(|req: &frogbot_core::agent::ModelRequest| {
        reply(&format!("echo: {}", last_user(req)))
    });
    let bot = start_with(model.clone()).await;
    bot.fake.add_user(&alice());
    let dm = DiscordApi::dm_channel(bot.fake.http().as_ref(), serenity::all::UserId::new(ALICE))
        .await
        .unwrap()
        .get();
    let dm_path = format!("/api/v10/channels/{dm}/messages");
    // Alice writes in her DM (replying to message `reply_to`); returns the message's id.
    let say = |text: &str, reply_to: Option<&str>| {
        let mut m = bot.fake.user_message(dm, None, &alice(), text);
        if let Some(r) = reply_to {
            m["message_reference"] = json!({"message_id": r, "channel_id": dm.to_string()});
            m["referenced_message"] = bot.fake.message(r).expect("the message replied to");
            m["type"] = json!(19);
        }
        let id = m["id"].as_str().unwrap().to_owned();
        bot.fake.dispatch("MESSAGE_CREATE", m);
        id
    };
    let model_reply = async |from: usize, text: &str| {
        let want = format!("echo: {text}");
        bot.fake
            .wait_for(from, WAIT, |c| {
                c.method == "POST" && c.path == dm_path && c.body["content"] == want.as_str()
            })
            .await
            .unwrap_or_else(|| panic!("the model's reply {want:?}: {:#?}", bot.fake.calls()))
    };

    // Alice already talks with the model in her DM.
    let from = bot.fake.calls().len();
    say("hello there", None);
    model_reply(from, "hello there").await;

    // An agent opens a conversation with her: its first message in the DM, a thread of its own.
    let agent = UserId::new("deployer");
    let from = bot.fake.calls().len();
    let chat = bot
        .engine
        .agents()
        .open_chat(
            Some(&agent),
            AgentPlace::Channel {
                platform: PLATFORM.into(),
                place: ChannelTarget::User(ALICE.to_string()),
            },
            "Deploy v2 today?",
            "k1",
        )
        .await
        .unwrap();
    let posted = posts(&bot.fake, from);
    assert_eq!(posted.len(), 1, "{posted:#?}");
    assert_eq!(posted[0].path, dm_path);
    let root = posted[0].response["id"].as_str().unwrap().to_owned();
    let thread = chat.channel.as_ref().unwrap().thread.clone();
    assert_eq!(thread, format!("{dm}~{root}"));
    assert_ne!(chat.chat_id, channel_chat_id(PLATFORM, &dm.to_string()));

    // (c) The agent's message reaches her in the DM as a reply to its first message.
    let from = bot.fake.calls().len();
    bot.engine
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
    let asked = bot
        .fake
        .wait_for(from, WAIT, |c| c.method == "POST" && c.path == dm_path)
        .await
        .expect("the agent's message in the DM");
    assert!(
        asked.body["content"]
            .as_str()
            .unwrap_or_default()
            .contains("Shall I go ahead?"),
        "{:#}",
        asked.body
    );
    assert_eq!(asked.body["message_reference"]["message_id"], root.as_str());
    let asked = asked.response["id"].as_str().unwrap().to_owned();

    // (a) A plain DM message still goes to the model.
    let from = bot.fake.calls().len();
    say("how are frogs", None);
    model_reply(from, "how are frogs").await;

    // (b) Her reply to the agent's message, and one to its first message, go to the agent.
    say("yes, go", Some(&asked));
    say("and v3 too", Some(&root));
    let mut inbox = Vec::new();
    while inbox.len() < 2 {
        let items = bot
            .engine
            .agents()
            .inbox_wait(Some(&agent), None, 50, WAIT)
            .await
            .unwrap();
        assert!(
            !items.is_empty(),
            "the agent's inbox stayed empty: {inbox:?}"
        );
        inbox.extend(items);
    }
    // Then a plain message: handled after the replies (one queue per DM), by the model.
    let from = bot.fake.calls().len();
    say("ping", None);
    model_reply(from, "ping").await;
    inbox.extend(
        bot.engine
            .agents()
            .inbox(Some(&agent), None, 50)
            .await
            .unwrap(),
    );
    // (The two replies were dispatched at once: serenity may hand them over in either order.)
    let mut texts: Vec<String> = inbox.iter().map(|i| i.message.text()).collect();
    texts.sort();
    assert_eq!(texts, ["and v3 too", "yes, go"]);
    assert!(inbox.iter().all(|i| i.chat_id == chat.chat_id));
    let seen: Vec<String> = model.requests().iter().map(last_user).collect();
    assert!(
        seen.iter()
            .all(|t| !t.contains("yes, go") && !t.contains("v3")),
        "{seen:?}"
    );
    let dm_chat = bot
        .engine
        .chats()
        .get(&channel_chat_id(PLATFORM, &dm.to_string()))
        .await
        .unwrap()
        .expect("her chat with the model");
    assert!(
        dm_chat.agent.is_none(),
        "her chat with the model stays hers"
    );
}
