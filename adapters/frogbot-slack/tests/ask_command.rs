//! A person asks another person (issue 40, item 4) on Slack, end to end: FrogBot's engine
//! (SQLite) with the Slack adapter, driven by the fake Slack as a person would use it — the
//! slash command `/frogbot ask @bob …` (signed form POST, and a Socket Mode `slash_commands`
//! envelope) or `!ask @bob …` typed in a thread. What is asserted is what people see: the new
//! thread, the question that mentions bob (the one message that notifies him), carol's click
//! refused, bob's answering, the question reading answered; and the usage text for an `ask`
//! that names nobody.

use std::time::Duration;

use frogbot_channel::{ASK_USAGE_TEXT, Adapter};
use frogbot_core::agent::scripted::demo_model;
use frogbot_core::agent::{Engine, channel_chat_id};
use frogbot_core::model::TurnState;
use frogbot_slack::channel::{NOT_ALLOWED_TEXT, command_help};
use frogbot_slack::questions::DENIED_TEXT;
use frogbot_slack::testing::{
    BOT_NAME, BOT_USER, FakeSlack, SeenMessage, Signature, assert_golden, transcript,
};
use frogbot_testkit::eventually;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);
const ALICE: &str = "U0ALICE";
const BOB: &str = "U0BOB";
const CAROL: &str = "U0CAROL";
const MALLORY: &str = "U0MALLORY";

struct World {
    fake: FakeSlack,
    /// The app's HTTP base (`None` in Socket Mode).
    base: Option<String>,
    engine: Engine,
    _db: frogbot_testkit::TestDb,
}

/// The fake Slack knowing alice, bob, carol and mallory by name, the adapter letting in all but
/// mallory, an engine whose model only says hello (an `ask` never runs it).
async fn world(
    socket: bool,
) -> (
    World,
    Option<(CancellationToken, tokio::task::JoinHandle<()>)>,
) {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("frogbot_slack=info,frogbot_core=info")
        .try_init();
    let fake = FakeSlack::start().await;
    for (id, name) in [
        (ALICE, "alice"),
        (BOB, "bob"),
        (CAROL, "carol"),
        (MALLORY, "mallory"),
    ] {
        fake.set_user_name(id, name);
    }
    let config = if socket {
        fake.socket_config()
    } else {
        fake.http_config()
    }
    .with_allow([ALICE, BOB, CAROL].map(|u| format!("slack:{u}")));
    let slack = frogbot_slack::channel::connect(config).await.unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let engine = frogbot_testkit::engine_with(store, demo_model()).with_channel(slack.channel());
    let mut base = None;
    let mut running = None;
    if socket {
        let shutdown = CancellationToken::new();
        let task = slack
            .start(engine.handle(), shutdown.clone())
            .expect("Socket Mode starts");
        running = Some((shutdown, task));
    } else {
        let app = slack.routes(&engine.handle()).expect("HTTP routes");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        base = Some(format!("http://{}", listener.local_addr().unwrap()));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
    }
    (
        World {
            fake,
            base,
            engine,
            _db: db,
        },
        running,
    )
}

impl World {
    /// `user` types `/frogbot {typed}` in `channel`; Slack's answer to the request: `Null` for
    /// an empty `200`, else its JSON body.
    async fn slash(&self, user: &str, channel: &str, typed: &str) -> Value {
        let cmd = self.fake.slash_command(user, channel, "/frogbot", typed);
        let base = self.base.as_deref().expect("HTTP mode");
        let res = self.fake.post_command(base, &cmd, Signature::Good).await;
        assert_eq!(res.status(), 200);
        let body = res.text().await.unwrap();
        if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&body).unwrap()
        }
    }

    /// The thread the bot started in `channel` with a root reading `text`.
    async fn thread_started(&self, channel: &str, text: &str) -> String {
        eventually(&format!("a thread \"{text}\""), WAIT, async || {
            self.fake
                .channel_messages(channel)
                .iter()
                .any(|m| m.bot && m.text == text)
        })
        .await;
        self.fake
            .channel_messages(channel)
            .into_iter()
            .find(|m| m.bot && m.text == text)
            .unwrap()
            .id()
    }

    /// Waits until `thread` holds a question card the engine knows by its message; returns it.
    async fn question(&self, thread: &str) -> SeenMessage {
        let card = || {
            self.fake
                .person_view(thread)
                .into_iter()
                .find(|m| m.sender == BOT_NAME && !m.controls.is_empty())
        };
        eventually("a question in the thread", WAIT, async || card().is_some()).await;
        let card = card().unwrap();
        eventually("the question known by its message", WAIT, async || {
            self.engine
                .channels()
                .form_target(frogbot_slack::PLATFORM, &card.id)
                .await
                .unwrap()
                .is_some()
        })
        .await;
        card
    }

    async fn click(&self, user: &str, message: &str, label: &str) {
        let payload = self
            .fake
            .click(user, message, label)
            .unwrap_or_else(|| panic!("no {label:?} button on {message}"));
        let base = self.base.as_deref().expect("HTTP mode");
        let res = self
            .fake
            .post_interaction(base, &payload, Signature::Good, None)
            .await;
        assert_eq!(res.status(), 200);
    }

    async fn until_seen(&self, thread: &str, what: &str) {
        eventually(&format!("{what:?} in {thread}"), WAIT, async || {
            self.fake
                .person_view(thread)
                .iter()
                .any(|m| m.text.contains(what))
        })
        .await;
    }
}

/// What every ask to bob shows: a question that starts by mentioning bob, and is the only
/// message of the bot's in the thread whose posting notified anyone by name; carol's click is refused
/// privately and changes nothing; bob's answers, and the question then reads answered.
async fn only_bob_answers(w: &World, thread: &str, asks: &str) {
    let card = w.question(thread).await;
    assert!(card.text.starts_with("@bob "), "{card:#?}");
    assert!(
        card.text.contains(&format!("{asks}: Ship today?")),
        "{card:#?}"
    );
    assert_eq!(card.controls, ["[yes] [no] [Other…]", "[Skip]"]);
    assert!(card.notified);
    assert!(
        card.notification.as_deref().unwrap().starts_with("@bob "),
        "what the notification shows: {card:#?}"
    );
    let mentioning: Vec<(String, Vec<String>)> = w
        .fake
        .person_view(thread)
        .into_iter()
        .filter(|m| m.sender == BOT_NAME && !m.mentioned.is_empty())
        .map(|m| (m.id, m.mentioned))
        .collect();
    assert_eq!(mentioning, [(card.id.clone(), vec!["bob".to_owned()])]);
    let chat = channel_chat_id(frogbot_slack::PLATFORM, thread);
    assert_eq!(
        w.engine.chats().state(&chat).await.unwrap(),
        TurnState::Awaiting
    );

    // carol clicks "yes": told privately, the question stays open.
    let controls = w.fake.controls(&card.id);
    w.click(CAROL, &card.id, "yes").await;
    eventually("carol told she may not answer", WAIT, async || {
        w.fake.notices(CAROL).iter().any(|t| t == DENIED_TEXT)
    })
    .await;
    let still = w.fake.message(&card.id).unwrap();
    assert!(!still.edited, "carol's click changed the question");
    assert_eq!(w.fake.controls(&card.id), controls);

    // bob clicks "yes": answered, the card says by whom, no controls left.
    w.click(BOB, &card.id, "yes").await;
    w.until_seen(thread, "Answered by @bob: yes").await;
    assert_eq!(w.fake.controls(&card.id), 0);
    eventually("the thread idle again", WAIT, async || {
        w.engine.chats().state(&chat).await.unwrap() == TurnState::Idle
    })
    .await;
    assert!(w.fake.notices(BOB).iter().all(|t| t != DENIED_TEXT));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_command_ask_starts_a_thread_where_only_bob_answers() {
    let (w, _) = world(false).await;
    let answer = w
        .slash(ALICE, "C42", "ask @bob Ship today? | yes | no")
        .await;
    assert_eq!(answer, Value::Null, "an empty 200 once asked");
    let thread = w.thread_started("C42", "alice asks bob").await;
    // The root names who asks whom and notifies nobody by name: the question does.
    let root = w.fake.message(&thread).unwrap();
    assert!(root.mentioned.is_empty());
    only_bob_answers(&w, &thread, "alice asks bob").await;
    // The turn is idle before its last ack settles: ✅ is added, then ⏳ removed.
    eventually("only ✅ on the root", WAIT, async || {
        w.fake
            .message(&thread)
            .is_some_and(|m| m.bot_reactions() == ["white_check_mark"])
    })
    .await;
    // The whole thread as people see it (the expiry's clock time made stable).
    let seen: String = transcript(&w.fake.person_view(&thread))
        .lines()
        .map(|l| match l.contains("open until") {
            true => l.replace(|c: char| c.is_ascii_digit(), "#"),
            false => l.to_owned(),
        })
        .map(|l| l + "\n")
        .collect();
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/person_view/slash_command_ask.txt");
    assert_golden(&golden, &seen);

    // The same invocation again (a repeat of one trigger_id) asks nothing more.
    let cmd = w
        .fake
        .slash_command(ALICE, "C42", "/frogbot", "ask @bob Again? | yes | no");
    let base = w.base.clone().unwrap();
    let first = w.fake.post_command(&base, &cmd, Signature::Good).await;
    assert_eq!(first.status(), 200);
    let again = w.fake.post_command(&base, &cmd, Signature::Good).await;
    assert_eq!(again.status(), 200);
    w.thread_started("C42", "alice asks bob").await;
    eventually("the second ask's question", WAIT, async || {
        w.fake
            .calls("chat.postMessage")
            .iter()
            .filter(|c| {
                c.body["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("Again?"))
            })
            .count()
            == 1
    })
    .await;
    let roots = w
        .fake
        .channel_messages("C42")
        .iter()
        .filter(|m| m.bot && m.text == "alice asks bob")
        .count();
    assert_eq!(roots, 2, "one thread per invocation");

    // A slash command is signed like every request.
    let forged = w.fake.post_command(&base, &cmd, Signature::Wrong).await;
    assert_eq!(forged.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_typed_in_a_thread_asks_the_person_it_names_first() {
    let (w, _) = world(false).await;
    // As Slack's client sends it: `@frogbot !ask @bob …` is `<@UBOT> !ask <@U0BOB> …`.
    let said = w.fake.user_message(
        "C42",
        None,
        ALICE,
        &format!("<@{BOT_USER}> !ask <@{BOB}> Ship today? | yes | no"),
    );
    let body = w.fake.event_callback(w.fake.mention_event(&said));
    let res = w
        .fake
        .post_event(w.base.as_deref().unwrap(), &body, Signature::Good, None)
        .await;
    assert_eq!(res.status(), 200);
    // Slack's message event carries no names: the question says the ids Slack wrote.
    only_bob_answers(&w, &said.id(), &format!("{ALICE} asks {BOB}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_naming_nobody_gets_the_usage_text() {
    let (w, _) = world(false).await;
    // The slash command: answered privately, nothing posted.
    for typed in ["ask Ship today?", "ask @bob", "ask is @bob in?"] {
        let answer = w.slash(ALICE, "C42", typed).await;
        assert_eq!(
            answer,
            json!({"response_type": "ephemeral", "text": ASK_USAGE_TEXT}),
            "{typed}"
        );
    }
    assert!(w.fake.calls("chat.postMessage").is_empty());
    // Anything else: the thread commands, privately.
    for typed in ["", "help", "new", "stop"] {
        let answer = w.slash(ALICE, "C42", typed).await;
        assert_eq!(answer["response_type"], "ephemeral", "{typed}");
        assert_eq!(answer["text"], command_help("/frogbot"), "{typed}");
    }
    let help = command_help("/frogbot");
    for typed in [
        "`!new`",
        "`!model`",
        "`stop`",
        "`!skip`",
        "`/frogbot ask @person",
    ] {
        assert!(help.contains(typed), "{typed} in {help}");
    }
    // Someone the channel does not let in starts no thread.
    let answer = w
        .slash(MALLORY, "C42", "ask @bob Ship today? | yes | no")
        .await;
    assert_eq!(
        answer,
        json!({"response_type": "ephemeral", "text": NOT_ALLOWED_TEXT})
    );
    assert!(w.fake.calls("chat.postMessage").is_empty());
    // Nor is a thread started to ask someone who may not answer.
    let answer = w
        .slash(ALICE, "C42", "ask @mallory Ship today? | yes | no")
        .await;
    assert_eq!(
        answer["text"],
        "mallory is not let in to answer here, so nothing was asked."
    );
    assert!(w.fake.calls("chat.postMessage").is_empty());

    // Typed in a thread: the engine's answer, in the thread.
    let said = w.fake.user_message(
        "C42",
        None,
        ALICE,
        &format!("<@{BOT_USER}> !ask Ship today?"),
    );
    let body = w.fake.event_callback(w.fake.mention_event(&said));
    let res = w
        .fake
        .post_event(w.base.as_deref().unwrap(), &body, Signature::Good, None)
        .await;
    assert_eq!(res.status(), 200);
    w.until_seen(&said.id(), ASK_USAGE_TEXT).await;
    assert!(
        w.fake
            .person_view(&said.id())
            .iter()
            .all(|m| m.controls.is_empty()),
        "nothing asked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_command_over_socket_mode_asks_and_is_acknowledged() {
    let (w, running) = world(true).await;
    let (shutdown, task) = running.unwrap();
    let mut conn = w.fake.socket().await;
    // `help`: the acknowledgement carries the private answer.
    let help = w.fake.slash_command(ALICE, "C42", "/frogbot", "help");
    let id = conn.send("slash_commands", help);
    let ack = conn.ack().await;
    assert_eq!(ack["envelope_id"], id.as_str());
    assert_eq!(ack["payload"]["response_type"], "ephemeral");
    assert_eq!(ack["payload"]["text"], command_help("/frogbot"));
    // `ask`: acknowledged empty, the thread started, bob's question posted.
    let ask = w
        .fake
        .slash_command(ALICE, "C42", "/frogbot", "ask @bob Ship today? | yes | no");
    let id = conn.send("slash_commands", ask);
    assert_eq!(conn.ack().await, json!({"envelope_id": id}));
    let thread = w.thread_started("C42", "alice asks bob").await;
    let card = w.question(&thread).await;
    assert!(card.text.starts_with("@bob "), "{card:#?}");
    assert_eq!(card.mentioned, ["bob"]);
    // bob answers over Socket Mode too.
    let click = w.fake.click(BOB, &card.id, "no").unwrap();
    let id = conn.send("interactive", click);
    assert_eq!(conn.ack().await, json!({"envelope_id": id}));
    w.until_seen(&thread, "Answered by @bob: no").await;

    shutdown.cancel();
    tokio::time::timeout(WAIT, task)
        .await
        .expect("socket mode stops")
        .unwrap();
}
