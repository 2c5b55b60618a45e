//! The Discord channel end to end: serenity's real gateway `Client` and `Http` against the fake
//! Discord (`frogbot_discord::testing`: HTTP API + gateway websocket), connected with
//! `channel::connect` and run as a `frogbot_channel::Adapter`; FrogBot's engine on SQLite, a
//! scripted model.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{Engine, ModelMessage, ModelRequest, channel_chat_id};
use frogbot_core::model::{TurnState, UserId, now_millis};
use frogbot_discord::PLATFORM;
use frogbot_discord::channel::{self, Config, DiscordAdapter};
use frogbot_discord::questions::{DENIED_TEXT, STALE_TEXT};
use frogbot_discord::testing::{self as fake, Call, FakeDiscord};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;
const GUILD: u64 = 100_000_000_000_000_001;
const CHANNEL: u64 = 700_000_000_000_000_007;
const ALICE: u64 = 300_000_000_000_000_003;
const MALLORY: u64 = 300_000_000_000_000_004;
const WAIT: Duration = Duration::from_secs(20);

/// Log lines, for the malformed-dispatch test.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logs() -> Logs {
    static LOGS: std::sync::OnceLock<Logs> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        let writer = logs.clone();
        tracing_subscriber::fmt()
            .with_env_filter("warn,frogbot_discord=debug")
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .init();
        logs
    })
    .clone()
}

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
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

fn model() -> ScriptedModel {
    ScriptedModel::new(|req: &ModelRequest| {
        if let Some(ModelMessage::Tool { content, .. }) = req.messages.last() {
            return reply(&format!("got: {content}"));
        }
        // The model sees channel speakers by name (`alice: hello`).
        let said = last_user(req);
        let text = said
            .split_once(": ")
            .map_or(said.as_str(), |(_, t)| t)
            .to_owned();
        if text.contains("ask") {
            return call(
                "c1",
                "question",
                json!({"questions": [{"header": "Colour", "question": "Which colour?",
                    "options": [{"label": "red"}, {"label": "green"}], "custom": true}]}),
            );
        }
        if text.contains("pick") {
            return call(
                "c1",
                "question",
                json!({"questions": [{"header": "Colours", "question": "Which colours?",
                    "options": [{"label": "red"}, {"label": "green"}, {"label": "blue"}],
                    "multiple": true}]}),
            );
        }
        if text.contains("kinds") {
            return call(
                "c1",
                "question",
                json!({"questions": [
                    {"header": "Pods", "question": "How many pods?", "kind": "number_input", "min": 1, "max": 10, "unit": "pods"},
                    {"header": "Why", "question": "Reason?", "kind": "text_input", "maxLength": 10},
                    {"header": "Notify", "question": "Tell the team?", "kind": "toggle"}
                ], "expiresInSeconds": 3600}),
            );
        }
        if text.contains("long") {
            return reply(&"frog ".repeat(900));
        }
        reply(&format!("you said: {text}"))
    })
}

struct Bot {
    fake: FakeDiscord,
    engine: Engine,
    model: ScriptedModel,
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

async fn start(allow: &[&str], public_key: Option<String>) -> Bot {
    let _ = logs();
    // Attachments are downloaded over rustls (as every program using the adapter installs one).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeDiscord::start(APP, BOT).await;
    let adapter = channel::connect(Config {
        public_key,
        users: [(ALICE.to_string(), "alice".to_string())].into(),
        allow: allow.iter().map(|a| a.to_string()).collect(),
        ..fake.config()
    })
    .await
    .unwrap();
    assert_eq!(adapter.bot_user().get(), BOT, "connect learnt the bot's id");
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let model = model();
    let engine = frogbot_testkit::engine_with(store, model.clone()).with_channel(adapter.channel());
    let shutdown = CancellationToken::new();
    let task = adapter
        .start(engine.handle(), shutdown.clone())
        .expect("the gateway task");
    assert!(fake.wait_ready(WAIT).await, "the client identified");
    Bot {
        fake,
        engine,
        model,
        adapter,
        shutdown,
        task,
        _db: db,
    }
}

fn alice() -> Value {
    fake::user(ALICE, "alice", false)
}

fn bot_user() -> Value {
    fake::user(BOT, "frogbot", true)
}

impl Bot {
    /// Mentions the bot in the guild channel; returns the thread it opened.
    async fn mention(&self, id: u64, author: &Value, text: &str) -> u64 {
        let from = self.fake.calls().len();
        self.fake.dispatch(
            "MESSAGE_CREATE",
            fake::message(
                id,
                CHANNEL,
                Some(GUILD),
                author,
                &format!("<@{BOT}> {text}"),
                &[bot_user()],
            ),
        );
        let opened = self
            .fake
            .wait_for(from, WAIT, |c| c.path.ends_with("/threads"))
            .await
            .expect("a thread opened");
        assert_eq!(
            opened.path,
            format!("/api/v10/channels/{CHANNEL}/messages/{id}/threads")
        );
        opened.response["id"].as_str().unwrap().parse().unwrap()
    }

    fn say(&self, id: u64, channel: u64, guild: Option<u64>, author: &Value, text: &str) {
        self.fake.dispatch(
            "MESSAGE_CREATE",
            fake::message(id, channel, guild, author, text, &[]),
        );
    }

    async fn posted_in(&self, from: usize, channel: u64) -> Call {
        let path = format!("/api/v10/channels/{channel}/messages");
        self.fake
            .wait_for(from, WAIT, |c| c.method == "POST" && c.path == path)
            .await
            .unwrap_or_else(|| panic!("a message in {channel}: {:#?}", self.fake.calls()))
    }

    async fn idle(&self, thread: u64) {
        let chat = channel_chat_id(PLATFORM, &thread.to_string());
        let mut events = self.engine.chats().subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        while self.engine.chats().state(&chat).await.unwrap() != TurnState::Idle {
            assert!(tokio::time::Instant::now() < deadline, "chat idle");
            let _ = tokio::time::timeout(Duration::from_millis(100), events.recv()).await;
        }
    }

    fn click(&self, n: u64, thread: u64, message: u64, user: &Value, custom_id: &str) -> String {
        let token = format!("tok-{n}");
        self.fake.dispatch(
            "INTERACTION_CREATE",
            fake::component_interaction(
                500_000_000_000_000_000 + n,
                APP,
                thread,
                message,
                user,
                custom_id,
                None,
                &token,
            ),
        );
        token
    }

    async fn callback(&self, from: usize, n: u64) -> Call {
        let path = format!(
            "/api/v10/interactions/{}/tok-{n}/callback",
            500_000_000_000_000_000 + n
        );
        self.fake
            .wait_for(from, WAIT, |c| c.path == path)
            .await
            .expect("the interaction was answered")
    }

    async fn followup(&self, from: usize, token: &str) -> Call {
        let path = format!("/api/v10/webhooks/{APP}/{token}");
        self.fake
            .wait_for(from, WAIT, |c| c.path == path)
            .await
            .expect("an ephemeral followup")
    }

    /// Asks a question in a new thread; returns (thread, question message id, its components).
    async fn ask(&self, id: u64) -> (u64, u64, Value) {
        let from = self.fake.calls().len();
        let thread = self.mention(id, &alice(), "ask me").await;
        let posted = self.posted_in(from, thread).await;
        let message: u64 = posted.response["id"].as_str().unwrap().parse().unwrap();
        self.idle_or_awaiting(thread).await;
        (thread, message, posted.body["components"].clone())
    }

    async fn idle_or_awaiting(&self, thread: u64) {
        let chat = channel_chat_id(PLATFORM, &thread.to_string());
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let rendered = self
                .engine
                .store_for_tests()
                .get_question(&chat, "c1", now_millis())
                .await
                .unwrap()
                .is_some_and(|q| q.rendered && !q.record.messages.is_empty());
            if rendered && self.engine.chats().state(&chat).await.unwrap() == TurnState::Awaiting {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "question posted and saved"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_opens_a_thread_and_the_thread_continues_the_chat() {
    let bot = start(&[], None).await;
    // Identify carried the default intents: GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT.
    assert_eq!(
        bot.fake.identifies()[0]["intents"],
        (1 << 9) | (1 << 12) | (1 << 15)
    );
    assert_eq!(bot.fake.identifies()[0]["token"], "Bot fake-token");

    let from = bot.fake.calls().len();
    let thread = bot
        .mention(910_000_000_000_000_001, &alice(), "hello")
        .await;
    let answer = bot.posted_in(from, thread).await;
    assert_eq!(answer.body["content"], "you said: hello");
    bot.idle(thread).await;

    // A message in the thread (no mention) continues the same chat; the bot's own message there
    // is ignored (the reply to the second message is the only thing posted).
    let from = bot.fake.calls().len();
    bot.say(
        910_000_000_000_000_002,
        thread,
        Some(GUILD),
        &bot_user(),
        "my own words",
    );
    bot.say(
        910_000_000_000_000_003,
        thread,
        Some(GUILD),
        &alice(),
        "and more",
    );
    let answer = bot.posted_in(from, thread).await;
    assert_eq!(answer.body["content"], "you said: and more");
    bot.idle(thread).await;
    // Acknowledgement reactions and typing aside (a test of their own), only the answer.
    let after: Vec<Call> = bot
        .fake
        .calls()
        .into_iter()
        .skip(from)
        .filter(|c| !c.path.contains("/reactions/") && !c.path.ends_with("/typing"))
        .collect();
    // The answer streams: posted with a Stop button, then edited to its final state (no
    // components).
    let (posts, edits): (Vec<&Call>, Vec<&Call>) = after.iter().partition(|c| c.method == "POST");
    assert_eq!(posts.len(), 1, "only the answer: {after:#?}");
    assert!(edits.iter().all(|c| c.method == "PATCH" && c.status == 200));
    let answer_id = posts[0].response["id"].as_str().unwrap();
    frogbot_testkit::eventually("the answer's final state", WAIT, async || {
        bot.fake.message(answer_id).unwrap()["components"] == json!([])
    })
    .await;
    let chat = channel_chat_id(PLATFORM, &thread.to_string());
    let messages = bot
        .engine
        .store_for_tests()
        .list_messages(&chat)
        .await
        .unwrap();
    assert_eq!(messages.len(), 4, "two user messages, two replies");
    assert_eq!(bot.model.requests().len(), 2);
    assert_eq!(
        messages[0].author(),
        Some(&UserId::new("alice")),
        "the users map names Alice"
    );

    // A message in another channel without a mention is not for the bot.
    let from = bot.fake.calls().len();
    bot.say(
        910_000_000_000_000_004,
        CHANNEL,
        Some(GUILD),
        &alice(),
        "chatter",
    );
    // A DM is its own thread.
    const DM: u64 = 720_000_000_000_000_001;
    bot.say(910_000_000_000_000_005, DM, None, &alice(), "long please");
    let first = bot.posted_in(from, DM).await;
    bot.idle(DM).await;
    // The reply is posted once the turn has ended: wait for its last piece.
    let dm_posts = |calls: Vec<Call>| -> Vec<Call> {
        calls
            .into_iter()
            .skip(from)
            .filter(|c| c.method == "POST" && c.path == format!("/api/v10/channels/{DM}/messages"))
            .collect()
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    while dm_posts(bot.fake.calls()).len() < 3 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let pieces = dm_posts(bot.fake.calls());
    assert_eq!(pieces[0].body, first.body);
    assert_eq!(pieces.len(), 3, "4,500 characters in three messages");
    let mut joined = String::new();
    for piece in &pieces {
        let text = piece.body["content"].as_str().unwrap();
        assert!(text.chars().count() <= 2000);
        joined.push_str(text);
        joined.push(' ');
    }
    assert_eq!(joined.split_whitespace().count(), 900);
    assert!(
        bot.fake
            .calls()
            .iter()
            .skip(from)
            .all(|c| !c.path.ends_with("/threads")),
        "no thread for chatter or a DM"
    );

    // Heartbeats are acknowledged (the fake's interval is 1 s).
    let deadline = tokio::time::Instant::now() + WAIT;
    while bot.fake.heartbeats() == 0 {
        assert!(tokio::time::Instant::now() < deadline, "a heartbeat");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Bot {
    /// Alice (or `user`) uses the application command `name` with `options` in `channel`;
    /// returns the interaction's callback.
    async fn command(
        &self,
        n: u64,
        channel: u64,
        guild: Option<u64>,
        user: &Value,
        name: &str,
        options: &[(&str, &str)],
    ) -> Call {
        let from = self.fake.calls().len();
        let id = self
            .fake
            .commands()
            .iter()
            .find(|c| c["name"] == name)
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .expect("the command is registered");
        self.fake.dispatch(
            "INTERACTION_CREATE",
            fake::command_interaction(
                500_000_000_000_000_000 + n,
                APP,
                &id,
                channel,
                guild,
                user,
                name,
                options,
                &format!("tok-{n}"),
            ),
        );
        self.callback(from, n).await
    }
}

/// With `command_guilds`, the commands are registered in each of those servers (at once, where
/// global ones reach every server), and not globally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_go_to_the_configured_servers_instead_of_everywhere() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeDiscord::start(APP, BOT).await;
    let adapter = channel::connect(Config {
        command_guilds: vec![GUILD, 424_242],
        ..fake.config()
    })
    .await
    .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let engine = frogbot_testkit::engine_with(store, model()).with_channel(adapter.channel());
    let shutdown = CancellationToken::new();
    let task = adapter
        .start(engine.handle(), shutdown.clone())
        .expect("the gateway task");
    frogbot_testkit::eventually("the commands in both servers", WAIT, async || {
        fake.guild_commands(&GUILD.to_string()).len() == 5
            && fake.guild_commands("424242").len() == 5
    })
    .await;
    let names: Vec<String> = fake
        .guild_commands("424242")
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["stop", "skip", "new", "model", "ask"]);
    assert!(fake.commands().is_empty(), "nothing registered globally");
    shutdown.cancel();
    let _ = task.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn application_commands_are_registered_and_new_and_model_work_in_a_thread() {
    let bot = start(&["alice"], None).await;
    // At start: the global commands, one per command, `model` with its choices.
    frogbot_testkit::eventually("the commands registered", WAIT, async || {
        bot.fake.commands().len() == 5
    })
    .await;
    let commands = bot.fake.commands();
    let names: Vec<&str> = commands
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["stop", "skip", "new", "model", "ask"]);
    let model = commands.iter().find(|c| c["name"] == "model").unwrap();
    assert_eq!(model["options"][0]["name"], "model");
    assert_eq!(
        model["options"][0]["choices"],
        json!([{"name": "main", "value": "main"}])
    );

    let from = bot.fake.calls().len();
    let thread = bot
        .mention(930_000_000_000_000_001, &alice(), "the codeword is kiwi")
        .await;
    bot.posted_in(from, thread).await;
    bot.idle(thread).await;

    // `/new` in the thread: answered privately at once (the command as read), then the bot's
    // answer in the thread; the model sees nothing said before.
    let from = bot.fake.calls().len();
    let answered = bot
        .command(1, thread, Some(GUILD), &alice(), "new", &[])
        .await;
    assert_eq!(answered.body["type"], 4, "CHANNEL_MESSAGE_WITH_SOURCE");
    assert_eq!(answered.body["data"]["content"], "/new");
    assert_eq!(answered.body["data"]["flags"], 64, "ephemeral");
    let said = bot.posted_in(from, thread).await;
    assert_eq!(
        said.body["content"],
        frogbot_core::model::NEW_CONVERSATION_TEXT
    );
    bot.idle(thread).await;
    let from = bot.fake.calls().len();
    bot.say(
        930_000_000_000_000_002,
        thread,
        Some(GUILD),
        &alice(),
        "what was it?",
    );
    bot.posted_in(from, thread).await;
    let requests = bot.model.requests();
    let last = requests.last().unwrap();
    let users = frogbot_testkit::user_texts(last).len();
    assert_eq!(users, 1, "only the new conversation: {:?}", last.messages);
    bot.idle(thread).await;

    // `/model` with a model that is offered: confirmed in the thread.
    let from = bot.fake.calls().len();
    let answered = bot
        .command(
            2,
            thread,
            Some(GUILD),
            &alice(),
            "model",
            &[("model", "main")],
        )
        .await;
    assert_eq!(answered.body["data"]["content"], "/model main");
    let said = bot.posted_in(from, thread).await;
    assert_eq!(
        said.body["content"],
        frogbot_core::model::model_choice_text("main", None)
    );
    bot.idle(thread).await;

    // Someone the bot does not let in: told privately, nothing changed.
    let mallory = fake::user(MALLORY, "mallory", false);
    let from = bot.fake.calls().len();
    bot.command(3, thread, Some(GUILD), &mallory, "new", &[])
        .await;
    let note = bot.followup(from, "tok-3").await;
    assert_eq!(note.body["flags"], 64);
    assert_eq!(
        note.body["content"],
        frogbot_discord::channel::NOT_ALLOWED_TEXT
    );

    // A guild channel that is not one of the bot's threads: told where to use it.
    let answered = bot
        .command(4, CHANNEL, Some(GUILD), &alice(), "new", &[])
        .await;
    assert_eq!(
        answered.body["data"]["content"],
        frogbot_discord::channel::COMMAND_WHERE_TEXT
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_is_acknowledged_recorded_settled_and_the_agent_continues() {
    let bot = start(&[], None).await;
    let (thread, message, components) = bot.ask(920_000_000_000_000_001).await;
    let buttons = components[0]["components"].as_array().unwrap();
    assert_eq!(buttons.len(), 4, "red, green, Other…, Skip");
    let green = buttons[1]["custom_id"].as_str().unwrap().to_owned();
    assert_eq!(buttons[1]["label"], "green");
    assert_eq!(buttons[2]["label"], "Other…");
    assert_eq!(buttons[3]["label"], "Skip");

    // An old control (another revision) on the current message is stale: acked, told privately.
    let from = bot.fake.calls().len();
    let token = bot.click(1, thread, message, &alice(), "fq:9:0:1");
    assert_eq!(bot.callback(from, 1).await.body["type"], 6);
    let note = bot.followup(from, &token).await;
    assert_eq!(note.body["content"], STALE_TEXT);
    assert_eq!(note.body["flags"], 64);

    // The click on "green": deferred ack first, then the edit, then the agent's reply.
    let from = bot.fake.calls().len();
    bot.click(2, thread, message, &alice(), &green);
    let ack = bot.callback(from, 2).await;
    assert_eq!(ack.body["type"], 6, "DEFERRED_UPDATE_MESSAGE");
    let edit_path = format!("/api/v10/channels/{thread}/messages/{message}");
    let edit = bot
        .fake
        .wait_for(from, WAIT, |c| c.method == "PATCH" && c.path == edit_path)
        .await
        .expect("settled edits the question");
    assert_eq!(edit.body["components"], json!([]));
    assert!(edit.body["content"].as_str().unwrap().contains("green"));
    assert!(ack.at <= edit.at);
    let answer = bot.posted_in(from, thread).await;
    assert!(
        answer.body["content"]
            .as_str()
            .unwrap()
            .starts_with("got: ")
    );
    assert!(answer.body["content"].as_str().unwrap().contains("green"));
    bot.idle(thread).await;
    let chat = channel_chat_id(PLATFORM, &thread.to_string());
    let q = bot
        .engine
        .store_for_tests()
        .get_question(&chat, "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(q.closed);
    assert_eq!(q.actor.unwrap().user, Some(UserId::new("alice")));

    // A second click after the answer: acked, and a private stale notice.
    let from = bot.fake.calls().len();
    let token = bot.click(3, thread, message, &alice(), &green);
    assert_eq!(bot.callback(from, 3).await.body["type"], 6);
    assert_eq!(bot.followup(from, &token).await.body["content"], STALE_TEXT);
}

/// A gateway click naming nobody (serenity reads it as user 1) is ignored: never credited with
/// an answer (issue 18 fuzzing found it; the interactions endpoint refuses it already).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_naming_nobody_is_not_credited() {
    let bot = start(&[], None).await;
    let (thread, message, components) = bot.ask(920_000_000_000_000_011).await;
    let green = components[0]["components"][1]["custom_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut nobody = fake::component_interaction(
        500_000_000_000_000_040,
        APP,
        thread,
        message,
        &alice(),
        &green,
        None,
        "tok-40",
    );
    nobody.as_object_mut().unwrap().remove("user");
    nobody.as_object_mut().unwrap().remove("member");
    let from = bot.fake.calls().len();
    bot.fake.dispatch("INTERACTION_CREATE", nobody);
    // Then alice's own click: hers is the answer, and the nameless one got no callback.
    bot.click(41, thread, message, &alice(), &green);
    bot.callback(from, 41).await;
    bot.idle(thread).await;
    let chat = channel_chat_id(PLATFORM, &thread.to_string());
    let q = bot
        .engine
        .store_for_tests()
        .get_question(&chat, "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(q.actor.unwrap().user, Some(UserId::new("alice")));
    assert!(
        !bot.fake
            .calls()
            .iter()
            .any(|c| c.path.contains("/tok-40/callback")),
        "the nameless click was not handled"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_opens_a_modal_whose_submission_answers() {
    let bot = start(&[], None).await;
    let (thread, message, components) = bot.ask(930_000_000_000_000_001).await;
    let other = components[0]["components"][2]["custom_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let from = bot.fake.calls().len();
    bot.click(1, thread, message, &alice(), &other);
    let opened = bot.callback(from, 1).await;
    assert_eq!(opened.body["type"], 9, "MODAL is the click's only response");
    let modal = &opened.body["data"];
    let locator = modal["custom_id"].as_str().unwrap().to_owned();
    assert_eq!(locator, format!("fq1:[\"{thread}\",\"{message}\"]"));
    let input = modal["components"][0]["components"][0]["custom_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let from = bot.fake.calls().len();
    bot.fake.dispatch(
        "INTERACTION_CREATE",
        fake::modal_submit_interaction(
            500_000_000_000_000_002,
            APP,
            thread,
            &alice(),
            &locator,
            &[(&input, "chartreuse")],
            "tok-2",
        ),
    );
    assert_eq!(bot.callback(from, 2).await.body["type"], 6);
    let answer = bot.posted_in(from, thread).await;
    assert!(
        answer.body["content"]
            .as_str()
            .unwrap()
            .contains("chartreuse"),
        "{answer:?}"
    );
    let edits = bot
        .fake
        .calls()
        .into_iter()
        .skip(from)
        .filter(|c| c.method == "PATCH")
        .count();
    assert_eq!(edits, 1);
    // Exactly one response per interaction: the modal was not also acked.
    let responses = bot
        .fake
        .calls()
        .iter()
        .filter(|c| c.path.contains("500000000000000001/tok-1/callback"))
        .count();
    assert_eq!(responses, 1);
}

/// Posts `body` to the interactions endpoint of `router`, signed by `key` now: (status, body).
async fn post_signed(
    router: &axum::Router,
    key: &ed25519_dalek::SigningKey,
    body: &Value,
) -> (u16, Value) {
    use ed25519_dalek::Signer;
    use tower::ServiceExt;
    let body = body.to_string();
    let ts = (now_millis() / 1000).to_string();
    let signature: String = key
        .sign(format!("{ts}{body}").as_bytes())
        .to_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let request = axum::http::Request::post("/channels/discord/interactions")
        .header("content-type", "application/json")
        .header("x-signature-ed25519", signature)
        .header("x-signature-timestamp", ts)
        .body(axum::body::Body::from(body))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_through_the_interactions_endpoint_is_answered_in_its_response() {
    let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let public: String = key
        .verifying_key()
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let bot = start(&[], Some(public)).await;
    let router = bot.adapter.routes(&bot.engine.handle()).unwrap();
    // `/model` (no option) in a DM: the HTTP response is the private answer; the list of
    // models follows in the DM.
    let dm = 720_000_000_000_000_001;
    let command = fake::command_interaction(
        500_000_000_000_000_021,
        APP,
        "800000000000000001",
        dm,
        None,
        &alice(),
        "model",
        &[],
        "tok-c1",
    );
    let from = bot.fake.calls().len();
    let (status, response) = post_signed(&router, &key, &command).await;
    assert_eq!((status, response["type"].as_u64()), (200, Some(4)));
    assert_eq!(response["data"]["content"], "/model");
    assert_eq!(response["data"]["flags"], 64);
    let listed = bot.posted_in(from, dm).await;
    let text = listed.body["content"].as_str().unwrap();
    assert!(
        text.starts_with("Models offered: main (default).") && text.contains("This thread: main."),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modal_built_from_labels_answers_through_the_interactions_endpoint() {
    let key = ed25519_dalek::SigningKey::from_bytes(&[8; 32]);
    let public: String = key
        .verifying_key()
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let bot = start(&[], Some(public)).await;
    let router = bot.adapter.routes(&bot.engine.handle()).unwrap();
    let (thread, message, components) = bot.ask(935_000_000_000_000_001).await;
    let other = components[0]["components"][2]["custom_id"]
        .as_str()
        .unwrap();
    // The "Other…" click: the HTTP response is the modal.
    let click = fake::component_interaction(
        500_000_000_000_000_011,
        APP,
        thread,
        message,
        &alice(),
        other,
        None,
        "tok-l1",
    );
    let (status, modal) = post_signed(&router, &key, &click).await;
    assert_eq!((status, modal["type"].as_u64()), (200, Some(9)));
    let locator = modal["data"]["custom_id"].as_str().unwrap();
    let input = modal["data"]["components"][0]["components"][0]["custom_id"]
        .as_str()
        .unwrap();
    // Submitted in the Label shape: the typed text is the answer.
    let from = bot.fake.calls().len();
    let submit = fake::modal_submit_in_labels(
        500_000_000_000_000_012,
        APP,
        thread,
        &alice(),
        locator,
        &[(input, "vermilion")],
        &[],
        "tok-l2",
    );
    let (status, ack) = post_signed(&router, &key, &submit).await;
    assert_eq!((status, ack["type"].as_u64()), (200, Some(6)));
    let answer = bot.posted_in(from, thread).await;
    assert!(
        answer.body["content"]
            .as_str()
            .unwrap()
            .contains("vermilion"),
        "{answer:?}"
    );
}

/// On the interactions endpoint "Answer…" is answered with the form in the HTTP response, and a
/// submission in the Label shape answers its several inputs together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_form_opens_and_answers_through_the_interactions_endpoint() {
    let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let public: String = key
        .verifying_key()
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let bot = start(&[], Some(public)).await;
    let router = bot.adapter.routes(&bot.engine.handle()).unwrap();
    let from = bot.fake.calls().len();
    let thread = bot
        .mention(938_000_000_000_000_001, &alice(), "kinds again")
        .await;
    let posted = bot.posted_in(from, thread).await;
    let message: u64 = posted.response["id"].as_str().unwrap().parse().unwrap();
    bot.idle_or_awaiting(thread).await;
    let click = fake::component_interaction(
        500_000_000_000_000_021,
        APP,
        thread,
        message,
        &alice(),
        "fq:0:0:f",
        None,
        "tok-f1",
    );
    let (status, modal) = post_signed(&router, &key, &click).await;
    assert_eq!((status, modal["type"].as_u64()), (200, Some(9)));
    let rows = modal["data"]["components"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["components"][0]["type"], 4);
    let locator = modal["data"]["custom_id"].as_str().unwrap();
    let submit = |n: u64, pods: &str| {
        fake::modal_submit_in_labels(
            500_000_000_000_000_000 + n,
            APP,
            thread,
            &alice(),
            locator,
            &[("fq:0:0:t", pods), ("fq:0:1:t", "why not")],
            &[],
            &format!("tok-f{n}"),
        )
    };
    // Invalid: the ack, then the reason privately.
    let from = bot.fake.calls().len();
    let (status, ack) = post_signed(&router, &key, &submit(22, "0")).await;
    assert_eq!((status, ack["type"].as_u64()), (200, Some(6)));
    let note = bot.followup(from, "tok-f22").await;
    assert_eq!(note.body["content"], "Pods: enter a number from 1 to 10.");
    // Valid: both recorded at once, the toggle step posted.
    let from = bot.fake.calls().len();
    let (status, _) = post_signed(&router, &key, &submit(23, "10")).await;
    assert_eq!(status, 200);
    let next = bot.posted_in(from, thread).await;
    assert!(
        next.body["content"]
            .as_str()
            .unwrap()
            .starts_with("**Notify** (3/3)"),
        "{next:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modal_built_from_labels_through_the_gateway_is_not_dropped_silently() {
    let logs = logs();
    let bot = start(&[], None).await;
    let (thread, message, _) = bot.ask(936_000_000_000_000_001).await;
    let locator = format!("fq1:[\"{thread}\",\"{message}\"]");
    bot.fake.dispatch(
        "INTERACTION_CREATE",
        fake::modal_submit_in_labels(
            500_000_000_000_000_013,
            APP,
            thread,
            &alice(),
            &locator,
            &[("fq:0:0:t", "vermilion")],
            &[],
            "tok-13",
        ),
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    while !logs
        .text()
        .contains("components serenity cannot read (Labels)")
    {
        assert!(tokio::time::Instant::now() < deadline, "no warning logged");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Text and number inputs are answered together in one modal ("Answer…" opens it), a submission
/// that does not validate is refused privately with its reason, a toggle is a button, and the
/// card shows the expiry line until it is settled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_inputs_are_answered_together_in_one_modal() {
    let bot = start(&[], None).await;
    let from = bot.fake.calls().len();
    let thread = bot
        .mention(937_000_000_000_000_001, &alice(), "kinds please")
        .await;
    let posted = bot.posted_in(from, thread).await;
    let message: u64 = posted.response["id"].as_str().unwrap().parse().unwrap();
    bot.idle_or_awaiting(thread).await;
    let content = posted.body["content"].as_str().unwrap();
    assert!(
        content.contains("**Pods** (1/3)") && content.contains("**Why** (2/3)"),
        "{content}"
    );
    assert!(content.contains("⏳ open until "), "{content}");
    let buttons = &posted.body["components"][0]["components"];
    assert_eq!(buttons[0]["label"], "Answer…");
    assert_eq!(buttons[0]["custom_id"], "fq:0:0:f");
    assert_eq!(buttons[1]["label"], "Skip");

    // "Answer…": the modal is the click's only response; it holds both inputs.
    let from = bot.fake.calls().len();
    bot.click(1, thread, message, &alice(), "fq:0:0:f");
    let opened = bot.callback(from, 1).await;
    assert_eq!(
        (opened.status, opened.body["type"].as_u64()),
        (204, Some(9))
    );
    let modal = &opened.body["data"];
    let locator = modal["custom_id"].as_str().unwrap().to_owned();
    assert_eq!(locator, format!("fq1:[\"{thread}\",\"{message}\"]"));
    let ids: Vec<&str> = modal["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["components"][0]["custom_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["fq:0:0:t", "fq:0:1:t"]);

    // Out of range: acknowledged, refused privately with the reason, nothing recorded.
    let submit = |n: u64, pods: &str, why: &str| {
        bot.fake.dispatch(
            "INTERACTION_CREATE",
            fake::modal_submit_interaction(
                500_000_000_000_000_000 + n,
                APP,
                thread,
                &alice(),
                &locator,
                &[("fq:0:0:t", pods), ("fq:0:1:t", why)],
                &format!("tok-{n}"),
            ),
        );
    };
    let from = bot.fake.calls().len();
    submit(2, "42", "because");
    assert_eq!(bot.callback(from, 2).await.body["type"], 6);
    let note = bot.followup(from, "tok-2").await;
    assert_eq!(note.body["content"], "Pods: enter a number from 1 to 10.");
    assert_eq!(note.body["flags"], 64);

    // Both answered in one submission: the next step (the toggle) is posted.
    let from = bot.fake.calls().len();
    submit(3, "4 pods", "because");
    assert_eq!(bot.callback(from, 3).await.body["type"], 6);
    let toggle = bot.posted_in(from, thread).await;
    let toggle_id: u64 = toggle.response["id"].as_str().unwrap().parse().unwrap();
    let on = &toggle.body["components"][0]["components"][0];
    assert_eq!(
        (on["label"].as_str(), on["style"].as_u64()),
        (Some("✓ On"), Some(3))
    );
    let on = on["custom_id"].as_str().unwrap().to_owned();

    // The toggle answers the set: both messages settled, the agent gets the answers.
    let from = bot.fake.calls().len();
    bot.click(4, thread, toggle_id, &alice(), &on);
    assert_eq!(bot.callback(from, 4).await.body["type"], 6);
    let answer = bot.posted_in(from, thread).await;
    let said = answer.body["content"].as_str().unwrap();
    assert!(said.starts_with("got: "), "{said}");
    for part in ["\"4\"", "because", "\"on\""] {
        assert!(said.contains(part), "{part} in {said}");
    }
    let edits: Vec<Call> = bot
        .fake
        .calls()
        .into_iter()
        .skip(from)
        .filter(|c| c.method == "PATCH")
        .collect();
    assert_eq!(edits.len(), 2);
    let first = edits
        .iter()
        .find(|c| c.path.ends_with(&message.to_string()))
        .expect("the form's message settled");
    let settled = first.body["content"].as_str().unwrap();
    assert!(
        settled.ends_with(&format!(
            "✅ Answered by <@{ALICE}>:\n• **Pods**: 4 pods\n• **Why**: because"
        )),
        "{settled}"
    );
    assert!(!settled.contains("open until"), "{settled}");
}

/// A command typed while a question taking its own text waits is no answer: refused with a
/// notice, the question still open; the answer after it is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_is_never_a_questions_answer() {
    let bot = start(&[], None).await;
    let (thread, message, _) = bot.ask(945_000_000_000_000_001).await;
    let from = bot.fake.calls().len();
    bot.say(message + 1, thread, Some(GUILD), &alice(), "/model main");
    let told = bot.posted_in(from, thread).await;
    assert_eq!(told.body["content"], frogbot_channel::COMMAND_BUSY_TEXT);
    let chat = channel_chat_id(PLATFORM, &thread.to_string());
    let q = bot
        .engine
        .store_for_tests()
        .get_question(&chat, "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(!q.closed, "the question still waits");
    let from = bot.fake.calls().len();
    bot.say(message + 2, thread, Some(GUILD), &alice(), "green");
    let answer = bot.posted_in(from, thread).await;
    assert!(answer.body["content"].as_str().unwrap().contains("green"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_in_the_thread_answers_the_question() {
    let bot = start(&[], None).await;
    let (thread, message, _) = bot.ask(940_000_000_000_000_001).await;
    let from = bot.fake.calls().len();
    // Ids after the question message's (snowflakes order by time).
    bot.say(message + 1, thread, Some(GUILD), &alice(), "Green");
    let edit = bot
        .fake
        .wait_for(from, WAIT, |c| c.method == "PATCH")
        .await
        .unwrap_or_else(|| panic!("settled: {:#?}\n{}", bot.fake.calls(), logs().text()));
    assert!(edit.body["content"].as_str().unwrap().contains("green"));
    let answer = bot.posted_in(from, thread).await;
    assert!(answer.body["content"].as_str().unwrap().contains("green"));
    bot.idle(thread).await;
    // The reply was consumed: the model saw the answer as the tool result, not a user message.
    let users: Vec<String> = bot.model.requests().iter().map(last_user).collect();
    assert!(users.iter().all(|u| u != "Green"), "{users:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_without_access_are_refused() {
    let bot = start(&["alice"], None).await;
    let mallory = fake::user(MALLORY, "mallory", false);
    // Mallory's mention opens no thread and starts nothing; Alice's does.
    let from = bot.fake.calls().len();
    bot.fake.dispatch(
        "MESSAGE_CREATE",
        fake::message(
            950_000_000_000_000_001,
            CHANNEL,
            Some(GUILD),
            &mallory,
            &format!("<@{BOT}> ask"),
            &[bot_user()],
        ),
    );
    let (thread, message, components) = bot.ask(950_000_000_000_000_002).await;
    let calls: Vec<Call> = bot.fake.calls().into_iter().skip(from).collect();
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.path.ends_with("/threads"))
            .count(),
        1,
        "only Alice's mention opened a thread"
    );
    // Mallory's click on Alice's question: acked, denied privately, nothing recorded.
    let green = components[0]["components"][1]["custom_id"]
        .as_str()
        .unwrap();
    let from = bot.fake.calls().len();
    let token = bot.click(1, thread, message, &mallory, green);
    assert_eq!(bot.callback(from, 1).await.body["type"], 6);
    assert_eq!(
        bot.followup(from, &token).await.body["content"],
        DENIED_TEXT
    );
    let chat = channel_chat_id(PLATFORM, &thread.to_string());
    assert_eq!(
        bot.engine.chats().state(&chat).await.unwrap(),
        TurnState::Awaiting
    );
    let q = bot
        .engine
        .store_for_tests()
        .get_question(&chat, "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(q.outcome.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_dispatches_are_ignored_with_a_log_line() {
    let logs = logs();
    let bot = start(&[], None).await;
    // Not JSON; an INTERACTION_CREATE without the fields of an interaction; an application
    // command FrogBot does not know; a click on a control that is not FrogBot's.
    bot.fake.send_raw("{not json");
    bot.fake
        .dispatch("INTERACTION_CREATE", json!({"type": 3, "data": 7}));
    bot.fake.dispatch(
        "INTERACTION_CREATE",
        json!({"id": "500000000000000009", "application_id": APP.to_string(), "type": 2,
               "data": {"id": "1", "name": "hello", "type": 1}, "channel_id": CHANNEL.to_string(),
               "user": alice(), "token": "tok-9", "version": 1, "locale": "en-US",
               "entitlements": [], "attachment_size_limit": 26214400}),
    );
    bot.click(8, CHANNEL, 990_000_000_000_000_001, &alice(), "not-ours");
    // The connection survives: a later mention is answered.
    let from = bot.fake.calls().len();
    let thread = bot
        .mention(960_000_000_000_000_001, &alice(), "still there?")
        .await;
    let answer = bot.posted_in(from, thread).await;
    assert_eq!(answer.body["content"], "you said: still there?");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let text = logs.text();
        if text.contains("Err deserializing text")
            && text.contains("an application command FrogBot does not know ignored")
            && text.contains("a click on no FrogBot question ignored")
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "log lines: {text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Nothing was sent for the malformed ones (the stray click was only acknowledged; the
    // unknown command only told, privately, that it is not offered).
    let calls = bot.fake.calls();
    let told: Vec<&Call> = calls.iter().filter(|c| c.path.contains("tok-9")).collect();
    assert_eq!(told.len(), 1, "{told:#?}");
    assert_eq!(
        told[0].body["data"]["content"],
        frogbot_discord::channel::UNKNOWN_COMMAND_TEXT
    );
    assert_eq!(told[0].body["data"]["flags"], 64);
    assert!(calls.iter().all(|c| !c.path.contains("/webhooks/")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_interactions_endpoint_refuses_forged_signatures() {
    use ed25519_dalek::{Signer, SigningKey};
    let key = SigningKey::from_bytes(&[5; 32]);
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let bot = start(&[], Some(hex(key.verifying_key().as_bytes()))).await;
    let (thread, message, components) = bot.ask(970_000_000_000_000_001).await;
    let router = bot.adapter.routes(&bot.engine.handle()).unwrap();
    let green = components[0]["components"][1]["custom_id"]
        .as_str()
        .unwrap();
    let body = fake::component_interaction(
        500_000_000_000_000_001,
        APP,
        thread,
        message,
        &alice(),
        green,
        None,
        "tok-e",
    )
    .to_string();
    let post = |signature: String, timestamp: String, body: String| {
        let router = router.clone();
        async move {
            use tower::ServiceExt;
            let request = axum::http::Request::post("/channels/discord/interactions")
                .header("content-type", "application/json")
                .header("x-signature-ed25519", signature)
                .header("x-signature-timestamp", timestamp)
                .body(axum::body::Body::from(body))
                .unwrap();
            let response = router.oneshot(request).await.unwrap();
            let status = response.status().as_u16();
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
                .await
                .unwrap();
            (status, String::from_utf8_lossy(&bytes).into_owned())
        }
    };
    let now = (now_millis() / 1000).to_string();
    let sign = |key: &SigningKey, ts: &str, body: &str| {
        hex(&key.sign(format!("{ts}{body}").as_bytes()).to_bytes())
    };
    // Forged: signed by another key, or the body changed after signing.
    let other = SigningKey::from_bytes(&[6; 32]);
    let forged = sign(&other, &now, &body);
    assert_eq!(post(forged, now.clone(), body.clone()).await.0, 401);
    let signed = sign(&key, &now, &body);
    let changed = body.replace("tok-e", "tok-x");
    assert_eq!(post(signed.clone(), now.clone(), changed).await.0, 401);
    assert_eq!(post(String::new(), now.clone(), body.clone()).await.0, 401);
    // Signed correctly but old (a replay): refused the same way, and nothing is recorded.
    let old = (now_millis() / 1000 - 301).to_string();
    let (status, _) = post(sign(&key, &old, &body), old, body.clone()).await;
    assert_eq!(status, 401);
    let chat = channel_chat_id(PLATFORM, &thread.to_string());
    assert_eq!(
        bot.engine.chats().state(&chat).await.unwrap(),
        TurnState::Awaiting
    );
    // Signed correctly: the HTTP response is the deferred update and the click is recorded.
    let from = bot.fake.calls().len();
    let (status, response) = post(signed, now.clone(), body).await;
    assert_eq!(status, 200);
    assert_eq!(serde_json::from_str::<Value>(&response).unwrap()["type"], 6);
    bot.posted_in(from, thread).await;
    bot.idle(thread).await;
    // A PING is answered with a PONG.
    let ping = json!({"id": "1", "application_id": APP.to_string(), "type": 1, "token": "t", "version": 1}).to_string();
    let (status, response) = post(sign(&key, &now, &ping), now.clone(), ping).await;
    assert_eq!((status, response.as_str()), (200, r#"{"type":1}"#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_string_select_answers_with_every_value() {
    let bot = start(&[], None).await;
    let from = bot.fake.calls().len();
    let thread = bot
        .mention(980_000_000_000_000_001, &alice(), "pick some")
        .await;
    let posted = bot.posted_in(from, thread).await;
    let message: u64 = posted.response["id"].as_str().unwrap().parse().unwrap();
    let select = &posted.body["components"][0]["components"][0];
    assert_eq!(select["type"], 3, "a string select");
    assert_eq!(select["max_values"], 3);
    let custom_id = select["custom_id"].as_str().unwrap().to_owned();
    bot.idle_or_awaiting(thread).await;

    let from = bot.fake.calls().len();
    bot.fake.dispatch(
        "INTERACTION_CREATE",
        fake::component_interaction(
            500_000_000_000_000_001,
            APP,
            thread,
            message,
            &alice(),
            &custom_id,
            Some(&["0", "2"]),
            "tok-1",
        ),
    );
    assert_eq!(bot.callback(from, 1).await.body["type"], 6);
    let answer = bot.posted_in(from, thread).await;
    let text = answer.body["content"].as_str().unwrap();
    assert!(
        text.contains("red") && text.contains("blue") && !text.contains("green"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_message_is_marked_seen_working_and_done_with_typing_shown() {
    let bot = start(&[], None).await;
    // Older than the fake's ids, so the thread and the message in it come after it.
    let start = bot.fake.calls().len();
    let thread = bot
        .mention(790_000_000_000_000_001, &alice(), "hello")
        .await;
    // The thread is the bot's once its first answer is posted there.
    bot.posted_in(start, thread).await;
    bot.idle(thread).await;
    let from = bot.fake.calls().len();
    // A message in the thread (stored by the fake, as Discord keeps it).
    let m = bot
        .fake
        .user_message(thread, Some(GUILD), &alice(), "and now?");
    let id = m["id"].as_str().unwrap().to_owned();
    bot.fake.dispatch("MESSAGE_CREATE", m);
    let on_it = format!("/api/v10/channels/{thread}/messages/{id}/reactions/");
    let done = format!("{on_it}%E2%9C%85/@me");
    // The last step: Working's reaction taken off once Done shows.
    let working_off = format!("{on_it}%E2%8F%B3/@me");
    bot.fake
        .wait_for(from, WAIT, |c| {
            c.method == "DELETE" && c.path == working_off
        })
        .await
        .unwrap_or_else(|| panic!("Done shown: {:#?}", bot.fake.calls()));
    let calls: Vec<Call> = bot.fake.calls().into_iter().skip(from).collect();
    let reactions: Vec<(String, String)> = calls
        .iter()
        .filter_map(|c| {
            let emoji = c.path.strip_prefix(&on_it)?.strip_suffix("/@me")?;
            Some((c.method.clone(), emoji.to_owned()))
        })
        .collect();
    let eyes = "%F0%9F%91%80";
    let hourglass = "%E2%8F%B3";
    let check = "%E2%9C%85";
    assert_eq!(
        reactions,
        [
            ("PUT".to_owned(), eyes.to_owned()),
            ("PUT".to_owned(), hourglass.to_owned()),
            ("DELETE".to_owned(), eyes.to_owned()),
            ("PUT".to_owned(), check.to_owned()),
            ("DELETE".to_owned(), hourglass.to_owned()),
        ],
        "one ack reaction at a time"
    );
    assert!(
        calls
            .iter()
            .filter(|c| c.path.starts_with(&on_it))
            .all(|c| c.status == 204)
    );
    // The reply is posted before Done; typing was shown in the thread.
    let reply = calls
        .iter()
        .position(|c| {
            c.method == "POST" && c.path == format!("/api/v10/channels/{thread}/messages")
        })
        .expect("the reply");
    let done_at = calls
        .iter()
        .position(|c| c.method == "PUT" && c.path == done)
        .unwrap();
    assert!(reply < done_at);
    assert!(
        calls
            .iter()
            .any(|c| c.method == "POST" && c.path == format!("/api/v10/channels/{thread}/typing"))
    );
}

/// A guild whose events go to shard `shard` of 4 (`(guild_id >> 22) % 4`), `n` telling guilds of
/// one shard apart.
fn guild_on(shard: u64, n: u64) -> u64 {
    ((1_000_000 + 4 * n + shard) << 22) | 7
}

/// Mentions the bot in a channel of each guild on `fake`; waits until each mention opened its
/// thread and returns how many threads each opened.
async fn mention_in_every_guild(fake: &FakeDiscord, guilds: &[u64], first_id: u64) -> Vec<usize> {
    let from = fake.calls().len();
    for (i, g) in guilds.iter().enumerate() {
        let channel = fake.add_text_channel(*g);
        fake.dispatch(
            "MESSAGE_CREATE",
            fake::message(
                first_id + i as u64,
                channel,
                Some(*g),
                &alice(),
                &format!("<@{BOT}> hello"),
                &[bot_user()],
            ),
        );
    }
    let opened = |id: u64| {
        let suffix = format!("/messages/{id}/threads");
        fake.calls()
            .iter()
            .skip(from)
            .filter(|c| c.path.ends_with(&suffix))
            .count()
    };
    let ids: Vec<u64> = (0..guilds.len() as u64).map(|i| first_id + i).collect();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !ids.iter().all(|id| opened(*id) > 0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "every mention answered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ids.iter().map(|id| opened(*id)).collect()
}

/// `run_shards`: two runs of one adapter split the 4 shards Discord recommends (each guild's
/// events reach one session and are handled once); a run stopped closes its shards and hands
/// nothing more to the engine, and the same adapter runs them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_ranges_split_the_guilds_and_can_be_run_again() {
    let fake = FakeDiscord::start(APP, BOT).await;
    fake.set_shards(4);
    let adapter = channel::connect(fake.config()).await.unwrap();
    assert_eq!(adapter.shard_count().await.unwrap(), 4);
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let engine = frogbot_testkit::engine_with(store, model()).with_channel(adapter.channel());
    let run = |range: std::ops::Range<u32>, stop: &CancellationToken| {
        let (adapter, engine, stop) = (adapter.clone(), engine.clone(), stop.clone());
        tokio::spawn(async move { adapter.run_shards(engine.handle(), range, 4, stop).await })
    };
    let (low, high) = (CancellationToken::new(), CancellationToken::new());
    let low_task = run(0..2, &low);
    let high_task = run(2..4, &high);
    assert!(
        fake.wait_shards_covered(4, WAIT).await,
        "shards 0-3 once each: {:?}",
        fake.live_shards()
    );
    let guilds: Vec<u64> = (0..8).map(|n| guild_on(n % 4, n / 4)).collect();
    let opened = mention_in_every_guild(&fake, &guilds, 920_000_000_000_000_000).await;
    assert_eq!(opened, vec![1; 8], "one thread per mention");
    for g in &guilds {
        assert_eq!(fake.deliveries(*g), 1, "guild {g} reached one session");
    }

    // The upper half stops: its sessions close, and a guild of shard 3 reaches no one.
    high.cancel();
    high_task.await.unwrap().unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while fake.live_shards() != [(0, 4), (1, 4)] {
        assert!(
            tokio::time::Instant::now() < deadline,
            "shards 2 and 3 closed: {:?}",
            fake.live_shards()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Run again by the same adapter: every guild is covered once more.
    let again = CancellationToken::new();
    let again_task = run(2..4, &again);
    assert!(
        fake.wait_shards_covered(4, WAIT).await,
        "{:?}",
        fake.live_shards()
    );
    let opened = mention_in_every_guild(&fake, &guilds, 930_000_000_000_000_000).await;
    assert_eq!(opened, vec![1; 8]);
    for g in &guilds {
        assert_eq!(fake.deliveries(*g), 2, "guild {g}: once per round");
    }
    assert!(
        adapter
            .run_shards(engine.handle(), 3..5, 4, CancellationToken::new())
            .await
            .is_err(),
        "a range past the last shard"
    );
    low.cancel();
    again.cancel();
    low_task.await.unwrap().unwrap();
    again_task.await.unwrap().unwrap();
}

/// A token Discord refuses at Identify (close code 4004): `run_shards` ends with the error (no
/// use running the shards again) instead of retrying.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_ends_run_shards_with_an_error() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let adapter = channel::connect(fake.config()).await.unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let engine = frogbot_testkit::engine_with(store, model()).with_channel(adapter.channel());
    fake.require_token("another-token");
    let ended = tokio::time::timeout(
        WAIT,
        adapter.run_shards(engine.handle(), 0..1, 1, CancellationToken::new()),
    )
    .await
    .expect("run_shards ends");
    assert!(ended.is_err(), "{ended:?}");
    assert_eq!(fake.identifies().len(), 1, "identified once, not again");
}

/// Attachments (issue 40, item 1): an image and a text file posted in the bot's thread are
/// downloaded from the CDN (the fake's, with the attachment objects Discord sends) into the
/// chat and shown to the model before the text; an attachment larger than the limit (by its
/// declared `size`: never downloaded) and one whose CDN link is gone are named in one notice in
/// the thread, while the message still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_reach_the_model_and_refused_ones_are_named() {
    let bot = start(&[], None).await;
    let from = bot.fake.calls().len();
    let thread = bot
        .mention(955_000_000_000_000_001, &alice(), "hello")
        .await;
    // The thread's chat exists once its first reply is posted.
    bot.posted_in(from, thread).await;
    bot.idle(thread).await;
    let png: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    let mut m = bot.fake.user_message_with_files(
        thread,
        Some(GUILD),
        &alice(),
        "what is in these?",
        &[
            ("cat.png", "image/png", png.clone()),
            (
                "notes.txt",
                "text/plain; charset=utf-8",
                b"milk, eggs".to_vec(),
            ),
            ("movie.mp4", "video/mp4", vec![0; 10]),
            ("gone.pdf", "application/pdf", vec![1; 10]),
        ],
    );
    // After the thread's messages (snowflakes order by time).
    m["id"] = json!("955000000000000100");
    // The movie says it is 30 MB (over the 20 MiB default); the PDF's link has expired.
    m["attachments"][2]["size"] = json!(30_000_000);
    let gone = m["attachments"][3]["url"]
        .as_str()
        .unwrap()
        .replace("gone.pdf", "other.pdf");
    m["attachments"][3]["url"] = json!(gone);
    let from = bot.fake.calls().len();
    bot.fake.dispatch("MESSAGE_CREATE", m);
    let notice = bot
        .fake
        .wait_for(from, WAIT, |c| {
            c.method == "POST"
                && c.body["content"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("📎"))
        })
        .await
        .unwrap_or_else(|| {
            let calls: Vec<String> = bot.fake.calls()[from..]
                .iter()
                .map(|c| format!("{} {} {}", c.method, c.path, c.status))
                .collect();
            let lines: Vec<String> = logs()
                .text()
                .lines()
                .filter(|l| l.contains("955000000000000") || l.contains("file"))
                .map(str::to_owned)
                .collect();
            panic!("a notice: {calls:#?}\n{}", lines.join("\n"))
        });
    assert_eq!(
        notice.body["content"],
        "📎 I could not take movie.mp4: it is larger than the 20 MB limit; gone.pdf: the \
         download failed."
    );
    let reply = bot
        .fake
        .wait_for(from, WAIT, |c| {
            c.method == "POST"
                && c.body["content"]
                    .as_str()
                    .is_some_and(|t| t.contains("you said: what is in these?"))
        })
        .await
        .expect("the reply");
    assert_eq!(reply.path, format!("/api/v10/channels/{thread}/messages"));
    let req = bot.model.requests().last().cloned().unwrap();
    let files: Vec<_> = req
        .messages
        .iter()
        .filter_map(|m| match m {
            ModelMessage::File(f) => Some(f.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(files[0].filename, "cat.png");
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
    // The message keeps its files, in the chat the web and the API read.
    let chat = channel_chat_id(PLATFORM, &thread.to_string());
    let stored = bot.engine.chats().messages(&chat).await.unwrap();
    let with_files = stored
        .iter()
        .find(|m| m.message.parts.iter().any(|p| p.as_file().is_some()))
        .expect("the message with its files");
    assert_eq!(
        with_files.message.text(),
        "what is in these?",
        "{:?}",
        with_files.message.parts
    );
}
