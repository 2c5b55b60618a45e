//! A person asks another person (`!ask @bob:server Ship today? | yes | no`, typed or with
//! Element's pill) end to end against the fake homeserver: the whole adapter (`channel::connect`,
//! the sync loop, matrix-sdk's client) with FrogBot's engine on SQLite. What the people see: the
//! question in the thread mentioning bob (`m.mentions` with only him, his pill in
//! `formatted_body`), carol's vote refused, bob's vote answering, the question then answered; an
//! `ask` naming nobody answered with the usage text. And the pure drawing of the mention.

#![recursion_limit = "256"]

use std::time::Duration;

use frogbot_channel::{ASK_USAGE_TEXT, Adapter};
use frogbot_core::agent::scripted::{ScriptedModel, reply};
use frogbot_matrix::channel::{Config, Login, MatrixAdapter, connect};
use frogbot_matrix::render::{mention_people, people_asked};
use frogbot_matrix::testing::{BOT_PASSWORD, FakeHomeserver, transcript};
use frogbot_model::{DENIED_TEXT, QuestionInput};
use matrix_sdk::ruma::{OwnedUserId, RoomId, user_id};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: u64 = 30;

struct Bot {
    _adapter: MatrixAdapter,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    worker: tokio::task::JoinHandle<()>,
    _store: tempfile::TempDir,
    _db: frogbot_testkit::TestDb,
}

async fn bot(fake: &FakeHomeserver) -> Bot {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let store = tempfile::tempdir().unwrap();
    let config = Config::new(
        fake.url(),
        fake.bot().to_owned(),
        Login::Password(BOT_PASSWORD.into()),
        store.path(),
    );
    let adapter = connect(config).await.unwrap();
    let db = frogbot_testkit::sqlite_db();
    let model = ScriptedModel::new(|_| reply("the model answers"));
    let engine = frogbot_testkit::engine_with(frogbot_testkit::open_store(&db.url).await, model)
        .with_channel(adapter.channel());
    let shutdown = CancellationToken::new();
    let worker = engine.spawn_worker(Duration::from_millis(100));
    let task = adapter
        .start(engine.handle(), shutdown.clone())
        .expect("a sync loop");
    Bot {
        _adapter: adapter,
        shutdown,
        task,
        worker,
        _store: store,
        _db: db,
    }
}

impl Bot {
    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap();
        self.worker.abort();
    }
}

fn user(id: &str) -> OwnedUserId {
    OwnedUserId::try_from(id).unwrap()
}

fn body(e: &Value) -> &str {
    e["content"]["body"].as_str().unwrap_or("")
}

fn from_bot(fake: &FakeHomeserver, e: &Value) -> bool {
    e["sender"] == fake.bot().as_str()
}

fn threaded(e: &Value, root: &str) -> bool {
    e["content"]["m.relates_to"]["rel_type"] == "m.thread"
        && e["content"]["m.relates_to"]["event_id"] == root
}

fn in_thread(body: &str, root: &str) -> Value {
    json!({"msgtype": "m.text", "body": body,
           "m.relates_to": {"rel_type": "m.thread", "event_id": root, "is_falling_back": true,
                            "m.in_reply_to": {"event_id": root}}})
}

/// A vote in the poll `poll` for answer `answer` (an unstable response, as Element sends it).
fn vote(poll: &str, answer: &str) -> Value {
    json!({"org.matrix.msc3381.poll.response": {"answers": [answer]},
           "m.relates_to": {"rel_type": "m.reference", "event_id": poll}})
}

/// The bot's question (a poll start or a message) in the thread on `root` whose body contains
/// `text`.
async fn question(fake: &FakeHomeserver, room: &RoomId, root: &str, text: &str) -> Value {
    fake.wait_for(room, WAIT, text, |e| {
        from_bot(fake, e)
            && threaded(e, root)
            && e["content"]["m.relates_to"]["rel_type"] != "m.replace"
            && body(e).contains(text)
    })
    .await
}

/// A room with alice, bob and carol (not a DM: alice mentions the bot to start), the bot running.
async fn setup() -> (FakeHomeserver, matrix_sdk::ruma::OwnedRoomId, Bot) {
    let fake = FakeHomeserver::start().await;
    let (alice, bob, carol) = (
        user("@alice:fake.test"),
        user("@bob:fake.test"),
        user("@carol:fake.test"),
    );
    let room = fake.create_room(&[&alice, &bob, &carol]);
    let bot = bot(&fake).await;
    (fake, room, bot)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alice_asks_bob_with_choices_only_bob_answers() {
    let (fake, room, bot) = setup().await;
    let (alice, bob, carol) = (
        user("@alice:fake.test"),
        user("@bob:fake.test"),
        user("@carol:fake.test"),
    );
    // Element: the bot's pill first, then the typed command naming bob by his id.
    let ask = fake.inject(
        &room,
        &alice,
        "m.room.message",
        json!({"msgtype": "m.text",
               "body": "frogbot: !ask @bob:fake.test Ship today? | yes | no",
               "format": "org.matrix.custom.html",
               "formatted_body": "<a href=\"https://matrix.to/#/@frogbot:fake.test\">frogbot</a>: \
                   !ask @bob:fake.test Ship today? | yes | no",
               "m.mentions": {"user_ids": ["@frogbot:fake.test"]}}),
    );
    let root = ask.as_str();
    let poll = question(&fake, &room, root, "asks @bob:fake.test: Ship today?").await;
    assert_eq!(poll["type"], "org.matrix.msc3381.poll.start", "{poll}");
    // Bob, and only bob, is mentioned: his client notifies him.
    assert_eq!(
        poll["content"]["m.mentions"],
        json!({"user_ids": ["@bob:fake.test"]})
    );
    let html = poll["content"]["formatted_body"].as_str().unwrap();
    assert!(
        html.contains(
            "<a href=\"https://matrix.to/#/@bob:fake.test\">@bob:fake.test</a>: \
             @alice:fake.test asks <a href=\"https://matrix.to/#/@bob:fake.test\">@bob:fake.test</a>: Ship today?"
        ),
        "{html}"
    );
    assert!(
        !html.contains("matrix.to/#/@alice"),
        "alice is not pinged: {html}"
    );
    let poll_id = poll["event_id"].as_str().unwrap();
    let message = format!("{room}|{poll_id}");
    let answers = fake.open_answers(&message);
    assert_eq!(
        answers.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(),
        ["yes", "no"]
    );

    // Carol's vote is refused (a notice mentioning her); the poll stays open.
    fake.inject(
        &room,
        &carol,
        "org.matrix.msc3381.poll.response",
        vote(poll_id, &answers[1].0),
    );
    let denied = fake
        .wait_for(&room, WAIT, "carol told she may not answer", |e| {
            from_bot(&fake, e)
                && e["content"]["m.mentions"]["user_ids"] == json!(["@carol:fake.test"])
                && body(e).contains(DENIED_TEXT)
        })
        .await;
    assert_eq!(denied["content"]["msgtype"], "m.notice");
    assert_eq!(fake.open_answers(&message).len(), 2, "still open");

    // Bob's vote answers: the poll ends and reads answered by him.
    fake.inject(
        &room,
        &bob,
        "org.matrix.msc3381.poll.response",
        vote(poll_id, &answers[0].0),
    );
    fake.wait_for(&room, WAIT, "the poll ended", |e| {
        from_bot(&fake, e)
            && e["type"] == "org.matrix.msc3381.poll.end"
            && e["content"]["m.relates_to"]["event_id"] == poll_id
    })
    .await;
    assert!(fake.open_answers(&message).is_empty(), "closed");
    fake.wait_for(&room, WAIT, "the poll reading answered", |e| {
        from_bot(&fake, e)
            && e["content"]["m.relates_to"]["rel_type"] == "m.replace"
            && e["content"]["m.relates_to"]["event_id"] == poll_id
    })
    .await;
    let shown = fake.shown_text(&message);
    assert!(shown.contains("Answered by @bob:fake.test: yes"), "{shown}");

    // What each person sees of the thread: the question mentions bob only, carol's notice
    // mentions her only.
    let seen = transcript(
        &fake.person_view(&format!("{room}|{root}")),
        fake.bot().as_str(),
    );
    let asked = seen
        .split("\n[")
        .find(|block| block.contains("poll (pick up to 1)"))
        .unwrap_or_else(|| panic!("{seen}"));
    assert!(asked.contains("  mentions @bob\n"), "{seen}");
    assert!(asked.contains("vote @bob: yes"), "{seen}");
    assert!(asked.contains("ended: "), "{seen}");
    bot.stop().await;
}

/// With Element's pill (the display name in `body`, the link in `formatted_body`) and no options:
/// a question answered by bob's reply in the thread. An `ask` naming nobody is told how to ask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pill_names_the_person_asked_and_naming_nobody_gets_the_usage() {
    let (fake, room, bot) = setup().await;
    let (alice, bob) = (user("@alice:fake.test"), user("@bob:fake.test"));
    fake.set_display_name(&room, &bob, "Bob");
    let start = fake.inject(
        &room,
        &alice,
        "m.room.message",
        json!({"msgtype": "m.text", "body": "frogbot: hello",
               "m.mentions": {"user_ids": ["@frogbot:fake.test"]}}),
    );
    let root = start.as_str();
    fake.wait_for(&room, WAIT, "the model's reply", |e| {
        from_bot(&fake, e) && threaded(e, root) && body(e).contains("the model answers")
    })
    .await;

    // Naming nobody: the usage text, nothing asked.
    fake.inject(
        &room,
        &alice,
        "m.room.message",
        in_thread("!ask Ship today?", root),
    );
    let usage = fake
        .wait_for(&room, WAIT, "the usage text", |e| {
            from_bot(&fake, e) && threaded(e, root) && body(e).contains("Name the person first")
        })
        .await;
    assert!(body(&usage).contains(ASK_USAGE_TEXT), "{usage}");

    let mut pill = in_thread("!ask Bob When do we ship?", root);
    pill["format"] = "org.matrix.custom.html".into();
    pill["formatted_body"] =
        "!ask <a href=\"https://matrix.to/#/@bob:fake.test\">Bob</a> When do we ship?".into();
    pill["m.mentions"] = json!({"user_ids": ["@bob:fake.test"]});
    fake.inject(&room, &alice, "m.room.message", pill);
    let q = question(&fake, &room, root, "asks @bob:fake.test: When do we ship?").await;
    assert_eq!(q["type"], "m.room.message");
    assert_eq!(
        q["content"]["m.mentions"],
        json!({"user_ids": ["@bob:fake.test"]})
    );
    assert!(
        q["content"]["formatted_body"]
            .as_str()
            .unwrap()
            .contains("<a href=\"https://matrix.to/#/@bob:fake.test\">@bob:fake.test</a>"),
        "{q}"
    );
    let q_id = q["event_id"].as_str().unwrap();
    fake.inject(&room, &bob, "m.room.message", in_thread("Friday", root));
    let done = fake
        .wait_for(&room, WAIT, "the question answered", |e| {
            from_bot(&fake, e)
                && e["content"]["m.relates_to"]["rel_type"] == "m.replace"
                && e["content"]["m.relates_to"]["event_id"] == q_id
                && e["content"]["m.new_content"]["body"]
                    .as_str()
                    .is_some_and(|b| b.contains("✅ Answered by Bob: Friday"))
        })
        .await;
    assert!(
        done["content"]["m.mentions"].is_null(),
        "an edit pings nobody again: {done}"
    );
    bot.stop().await;
}

fn input(from: &[&str]) -> QuestionInput {
    serde_json::from_value(json!({"questions": [{"header": "For @bob:example.org",
        "question": "@alice:example.org asks @bob:example.org: Ship `@bob:example.org` today?",
        "options": [{"label": "yes"}, {"label": "no"}]}], "from": from}))
    .unwrap()
}

/// Only `matrix:` people of `from` are mentioned; each written id becomes a pill (not in code),
/// an unwritten one is put first; without them the content is left as it was.
#[test]
fn the_people_asked_are_mentioned_with_pills() {
    let asked = input(&["matrix:@bob:example.org", "slack:U1", "alice", "matrix:bob"]);
    assert_eq!(people_asked(&asked), [user_id!("@bob:example.org")]);
    assert!(people_asked(&input(&[])).is_empty());

    let root = matrix_sdk::ruma::EventId::parse("$root").unwrap();
    let (_, card) = frogbot_matrix::render::card_message(&asked, 0, None, &root).unwrap();
    let plain = card.clone();
    assert_eq!(
        mention_people(card.clone(), &[]),
        plain,
        "unchanged without people"
    );
    let pill = r#"<a href="https://matrix.to/#/@bob:example.org">@bob:example.org</a>"#;
    let c = mention_people(card, &people_asked(&asked));
    assert_eq!(c["m.mentions"], json!({"user_ids": ["@bob:example.org"]}));
    assert_eq!(
        c["body"], plain["body"],
        "the id is written: body unchanged"
    );
    let html = c["formatted_body"].as_str().unwrap();
    assert!(
        html.starts_with(&format!(
            "<b>For {pill}</b>: @alice:example.org asks {pill}: Ship <code>@bob:example.org</code> today?"
        )),
        "{html}"
    );

    // A poll has no HTML of its own: its fallback gets it; someone the text does not write is
    // put first.
    let (_, poll) = frogbot_matrix::render::poll_start(
        &asked,
        0,
        &root,
        frogbot_matrix::render::PollEvents::Unstable,
        0,
        None,
    )
    .unwrap();
    let carol = user("@carol:example.org");
    let c = mention_people(poll.clone(), &[carol]);
    assert_eq!(c["m.mentions"], json!({"user_ids": ["@carol:example.org"]}));
    assert_eq!(
        c["body"].as_str().unwrap(),
        format!("@carol:example.org: {}", poll["body"].as_str().unwrap())
    );
    assert!(
        c["formatted_body"].as_str().unwrap().starts_with(
            r#"<a href="https://matrix.to/#/@carol:example.org">@carol:example.org</a>: For @bob:example.org"#
        ),
        "{c}"
    );
    assert_eq!(c["format"], "org.matrix.custom.html");
}
