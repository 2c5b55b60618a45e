//! End to end against a real Synapse on loopback (`frogbot_matrix::testing::synapse`): the bot is
//! `channel::connect`'s adapter on
//! matrix-sdk with FrogBot's engine on SQLite and a scripted model; people are second matrix-sdk
//! clients. Skipped with a message when Synapse is not installed (`bash scripts/synapse.sh`),
//! unless `FROGBOT_REQUIRE_SYNAPSE=1`.

#![recursion_limit = "256"]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use frogbot_channel::Adapter;
use frogbot_channel::outbox::AskTo;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, call, reply};
use frogbot_core::agent::{ModelEvent, ModelMessage, ModelRequest};
use frogbot_matrix::channel::{Config, Login, MatrixAdapter, connect};
use frogbot_matrix::testing::synapse;
use matrix_sdk::ruma::{OwnedRoomId, RoomId};
use serde_json::{Value, json};
use synapse::{Account, Person, Synapse, thread_root};
use tokio_util::sync::CancellationToken;

const WAIT: u64 = 60;

/// What the person last typed (the model sees it after the thread's earlier messages and their
/// name: `@alice:localhost: …`).
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
    let text = text
        .rsplit_once("\n\n")
        .map_or(text.clone(), |(_, t)| t.to_owned());
    text.split_once(": ")
        .map_or(text.clone(), |(_, t)| t.to_owned())
}

/// `kinds` → a confirm, a number, a toggle and a text (expiring in an hour); `ask` → one single-choice
/// question; `multi` → several allowed; `custom` → own answer allowed;
/// after a tool result → `got: …`; anything else → `hello: …`.
fn model() -> ScriptedModel {
    ScriptedModel::new(|req: &ModelRequest| {
        if let Some(ModelMessage::Tool { content, .. }) = req.messages.last() {
            return reply(&format!("got: {content}"));
        }
        let text = last_user(req);
        let n = req.messages.len();
        if text.contains("send files") {
            return frogbot_core::agent::scripted::reply_with_files(
                "Here you go",
                [
                    frogbot_core::agent::GeneratedFile {
                        media_type: "image/png".into(),
                        filename: "chart.png".into(),
                        data: chart(),
                    },
                    frogbot_core::agent::GeneratedFile {
                        media_type: "text/plain".into(),
                        filename: "notes.txt".into(),
                        data: b"milk, eggs".to_vec(),
                    },
                ],
            );
        }
        if text.contains("files?") {
            // What the model was shown of the files sent since its last answer.
            let since = req
                .messages
                .iter()
                .collect::<Vec<_>>()
                .iter()
                .rposition(|m| matches!(m, ModelMessage::Assistant { .. }))
                .map_or(0, |i| i + 1);
            let shown: Vec<String> = req
                .messages
                .iter()
                .skip(since)
                .filter_map(|m| match m {
                    ModelMessage::File(f) => Some(match &f.content {
                        Some(frogbot_core::agent::FileContent::Image { data_url }) => {
                            format!("{} image {}", f.filename, data_url.len())
                        }
                        Some(frogbot_core::agent::FileContent::Text { text }) => {
                            format!(
                                "{} text {:?}",
                                f.filename,
                                text.lines().last().unwrap_or("")
                            )
                        }
                        other => format!("{} {other:?}", f.filename),
                    }),
                    _ => None,
                })
                .collect();
            return reply(&format!("files: {}", shown.join("; ")));
        }
        let question = |q: Value| call(&format!("c{n}"), "question", json!({"questions": [q]}));
        if text.contains("kinds") {
            return call(
                &format!("c{n}"),
                "question",
                json!({"questions": [
                    {"header": "Go", "question": "Deploy?", "kind": "confirm", "label": "Approve"},
                    {"header": "Pods", "question": "How many?", "kind": "number_input",
                     "min": 1, "max": 10, "unit": "pods"},
                    {"header": "Notify", "question": "Tell the team?", "kind": "toggle"},
                    {"header": "Why", "question": "Reason?", "kind": "text_input",
                     "maxLength": 10}
                ], "expiresInSeconds": 3600}),
            );
        }
        if text.contains("ask") {
            return question(json!({"header": "Env", "question": "Where?",
                "options": [{"label": "staging"}, {"label": "prod", "description": "careful"}]}));
        }
        if text.contains("multi") {
            return question(
                json!({"header": "Regions", "question": "Which?", "multiple": true,
                "options": [{"label": "eu"}, {"label": "us"}, {"label": "asia"}]}),
            );
        }
        if text.contains("custom") {
            return question(
                json!({"header": "Name", "question": "What name?", "custom": true,
                "options": [{"label": "frog"}, {"label": "toad"}]}),
            );
        }
        if text.contains("huge") {
            // 40,000 characters of sentences in 100 deltas 5 ms apart.
            let chars: Vec<char> = huge_reply().chars().collect();
            let mut e = Vec::new();
            for chunk in chars.chunks(400) {
                e.push(ScriptEvent::Event(ModelEvent::TextDelta(
                    chunk.iter().collect(),
                )));
                e.push(ScriptEvent::Pause(Duration::from_millis(5)));
            }
            e.extend(reply(""));
            return e;
        }
        if text.contains("stream") {
            let mut e = Vec::new();
            for i in 0..40 {
                e.push(ScriptEvent::Event(ModelEvent::TextDelta(format!("w{i} "))));
                e.push(ScriptEvent::Pause(Duration::from_millis(100)));
            }
            e.extend(reply("end."));
            return e;
        }
        reply(&format!("hello: {text}"))
    })
}

/// The 40,000-character reply of `huge`: sentences, a paragraph break every eight.
fn huge_reply() -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < 40_000 {
        out.push_str(&format!(
            "Sentence {i} of the long reply has a few plain words in it."
        ));
        out.push_str(if i % 8 == 7 { "\n\n" } else { " " });
        i += 1;
    }
    out.trim_end().to_owned()
}

struct Bot {
    channel: MatrixAdapter,
    engine: frogbot_core::agent::Engine,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    worker: tokio::task::JoinHandle<()>,
}

impl Bot {
    /// A bot on `store_dir` and `db`, `timeline_limit` events per room and sync.
    async fn start_with(
        hs: &Synapse,
        account: &Account,
        store_dir: &Path,
        db: &frogbot_core::store::DynStore,
        allow: Vec<String>,
        timeline_limit: u32,
        events: frogbot_matrix::render::PollEvents,
    ) -> Bot {
        let mut config = Config::new(
            hs.url.clone(),
            account.user_id.clone(),
            Login::Password(account.password.clone()),
            store_dir,
        );
        config.sync_timeline_limit = timeline_limit;
        config.allow = allow;
        // Most tests read the stable poll events (the default is the unstable ones Element
        // renders; both carry the same plain `body`).
        config.poll_events = events;
        // The test image host (a fake homeserver) is on loopback.
        config.image_policy.allow_private = true;
        let channel = connect(config).await.unwrap();
        let engine =
            frogbot_testkit::engine_with(db.clone(), model()).with_channel(channel.channel());
        let shutdown = CancellationToken::new();
        let worker = engine.spawn_worker(Duration::from_millis(200));
        let task = channel
            .start(engine.handle(), shutdown.clone())
            .expect("the sync loop");
        Bot {
            channel,
            engine,
            shutdown,
            task,
            worker,
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap();
        self.worker.abort();
    }
}

struct Setup {
    hs: Arc<Synapse>,
    bot_account: Account,
    _store_dir: tempfile::TempDir,
    _db: frogbot_testkit::TestDb,
    db: frogbot_core::store::DynStore,
    bot: Bot,
}

async fn setup(access: Option<Vec<String>>) -> Option<Setup> {
    setup_with(access, 100).await
}

async fn setup_with(access: Option<Vec<String>>, timeline_limit: u32) -> Option<Setup> {
    setup_full(
        access,
        timeline_limit,
        frogbot_matrix::render::PollEvents::Stable,
    )
    .await
}

/// A bot sending `events` (the others send the stable ones).
async fn setup_with_events(events: frogbot_matrix::render::PollEvents) -> Option<Setup> {
    setup_full(None, 100, events).await
}

async fn setup_full(
    access: Option<Vec<String>>,
    timeline_limit: u32,
    events: frogbot_matrix::render::PollEvents,
) -> Option<Setup> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let hs = synapse::synapse().await?;
    let bot_account = hs.register("frogbot").await;
    let store_dir = tempfile::tempdir().unwrap();
    let test_db = frogbot_testkit::sqlite_db();
    let db = frogbot_testkit::open_store(&test_db.url).await;
    let access = access.unwrap_or_default();
    let bot = Bot::start_with(
        &hs,
        &bot_account,
        store_dir.path(),
        &db,
        access,
        timeline_limit,
        events,
    )
    .await;
    Some(Setup {
        hs,
        bot_account,
        _store_dir: store_dir,
        _db: test_db,
        db,
        bot,
    })
}

impl Setup {
    /// Stops the bot, runs `meanwhile`, and starts the bot again on the same store and database
    /// (everyone allowed, `timeline_limit` events per sync).
    async fn restart(self, timeline_limit: u32, meanwhile: impl Future<Output = ()>) -> Setup {
        let Setup {
            hs,
            bot_account,
            _store_dir,
            _db,
            db,
            bot,
        } = self;
        bot.stop().await;
        meanwhile.await;
        let bot = Bot::start_with(
            &hs,
            &bot_account,
            _store_dir.path(),
            &db,
            Vec::new(),
            timeline_limit,
            frogbot_matrix::render::PollEvents::Stable,
        )
        .await;
        Setup {
            hs,
            bot_account,
            _store_dir,
            _db,
            db,
            bot,
        }
    }
}

fn text(body: &str) -> Value {
    json!({"msgtype": "m.text", "body": body})
}

fn in_thread(body: &str, root: &str) -> Value {
    json!({"msgtype": "m.text", "body": body,
           "m.relates_to": {"rel_type": "m.thread", "event_id": root, "is_falling_back": true,
                            "m.in_reply_to": {"event_id": root}}})
}

/// The picture the model sends (200 KB, not all alike).
fn chart() -> Vec<u8> {
    (0..200_000u32).map(|i| (i * 13 % 241) as u8).collect()
}

fn from(ev: &Value, user: &str) -> bool {
    ev["sender"] == user
}

fn body(ev: &Value) -> &str {
    ev["content"]["body"].as_str().unwrap_or("")
}

/// Waits until the bot has joined `room` (as seen by `person`).
async fn bot_joined(person: &Person, room: &RoomId, bot: &str) {
    person
        .wait_for(room, WAIT, "the bot to join", |e| {
            e["type"] == "m.room.member"
                && e["state_key"] == bot
                && e["content"]["membership"] == "join"
        })
        .await;
}

/// A DM (the person and the bot) with the bot joined.
async fn dm(s: &Setup, person: &Person) -> OwnedRoomId {
    let room = person.create_room(&[&s.bot_account.user_id], false).await;
    bot_joined(person, &room, s.bot_account.user_id.as_str()).await;
    room
}

async fn poll_in(person: &Person, room: &RoomId, bot: &str, root: &str, n: usize) -> Value {
    let polls = |p: &Person| {
        p.seen(room, |e| {
            from(e, bot) && (e["type"] == "m.poll.start") && thread_root(e) == Some(root)
        })
    };
    person
        .wait_for(room, WAIT, "a poll", |_| polls(person).len() >= n)
        .await;
    polls(person)[n - 1].clone()
}

fn poll_response(poll: &str, answers: &[&str]) -> Value {
    json!({"m.selections": answers, "m.relates_to": {"rel_type": "m.reference", "event_id": poll}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_in_a_room_gets_a_threaded_reply_and_other_messages_are_ignored() {
    let Some(s) = setup(None).await else { return };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bob_account = s.hs.register("bob").await;
    let bob = s.hs.person(&bob_account).await;
    let bot = s.bot_account.user_id.as_str();
    let room = alice
        .create_room(&[&s.bot_account.user_id, &bob_account.user_id], false)
        .await;
    bob.join(&room).await;
    bot_joined(&alice, &room, bot).await;

    let ignored = alice
        .send(&room, "m.room.message", text("just chatting"))
        .await;
    let mention = alice
        .send(
            &room,
            "m.room.message",
            json!({"msgtype": "m.text", "body": format!("{bot}: how are you"),
                   "m.mentions": {"user_ids": [bot]}}),
        )
        .await;
    let reply = alice
        .wait_for(&room, WAIT, "the bot's reply", |e| {
            from(e, bot) && e["type"] == "m.room.message"
        })
        .await;
    assert_eq!(thread_root(&reply), Some(mention.as_str()));
    assert_eq!(body(&reply), "hello: how are you");

    // A follow-up in the thread needs no mention: the thread is the bot's chat.
    alice
        .send(&room, "m.room.message", in_thread("and you?", &mention))
        .await;
    alice
        .wait_for(&room, WAIT, "the follow-up reply", |e| {
            from(e, bot) && body(e) == "hello: and you?"
        })
        .await;
    // The unaddressed message got nothing.
    assert!(
        alice
            .seen(&room, |e| from(e, bot)
                && thread_root(e) == Some(ignored.as_str()))
            .is_empty()
    );
    s.bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_response_answers_and_late_or_old_responses_are_stale() {
    let Some(s) = setup(None).await else { return };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bot = s.bot_account.user_id.as_str();
    let room = dm(&s, &alice).await;

    let ask = alice
        .send(&room, "m.room.message", text("ask please"))
        .await;
    let poll = poll_in(&alice, &room, bot, &ask, 1).await;
    let c = &poll["content"];
    assert_eq!(c["m.poll"]["kind"], "m.disclosed");
    // `max_selections` 1 is the default, left out on the wire.
    assert_eq!(c["m.poll"]["max_selections"].as_u64().unwrap_or(1), 1);
    // Answer ids carry the question set's revision (0 when posted).
    assert_eq!(c["m.poll"]["answers"][1]["m.id"], "r0o1");
    let fallback = c["m.text"][0]["body"].as_str().unwrap();
    assert!(
        fallback.contains("1. staging\n2. prod — careful"),
        "{fallback}"
    );
    let poll_id = poll["event_id"].as_str().unwrap().to_owned();

    alice
        .send(&room, "m.poll.response", poll_response(&poll_id, &["r0o1"]))
        .await;
    let got = alice
        .wait_for(&room, WAIT, "the agent to continue", |e| {
            from(e, bot) && body(e).starts_with("got:")
        })
        .await;
    assert!(body(&got).contains("prod"), "{got}");
    assert_eq!(thread_root(&got), Some(ask.as_str()));
    // settled: the poll is ended and its message edited to show the outcome.
    let end = alice
        .wait_for(&room, WAIT, "the poll end", |e| {
            from(e, bot) && e["type"] == "m.poll.end"
        })
        .await;
    assert_eq!(end["content"]["m.relates_to"]["event_id"], poll_id.as_str());
    let edit = alice
        .wait_for(&room, WAIT, "the poll edit", |e| {
            from(e, bot) && e["content"]["m.relates_to"]["rel_type"] == "m.replace"
        })
        .await;
    let edited = edit["content"]["m.new_content"]["m.text"][0]["body"]
        .as_str()
        .unwrap();
    assert!(edited.contains("✅ Answered by"), "{edited}");
    assert!(edited.contains(": prod"), "{edited}");

    // A second response after the answer: stale, told in the thread with a mention.
    alice
        .send(&room, "m.poll.response", poll_response(&poll_id, &["r0o0"]))
        .await;
    let stale = alice
        .wait_for(&room, WAIT, "the stale notice", |e| {
            from(e, bot) && body(e).contains(frogbot_matrix::questions::STALE_TEXT)
        })
        .await;
    assert_eq!(thread_root(&stale), Some(ask.as_str()));
    assert_eq!(
        stale["content"]["m.mentions"]["user_ids"][0],
        alice.user_id().as_str()
    );

    // A new question in the same thread; a response to the old poll is stale, the new one counts.
    alice
        .send(&room, "m.room.message", in_thread("ask again", &ask))
        .await;
    let poll2 = poll_in(&alice, &room, bot, &ask, 2).await;
    let poll2_id = poll2["event_id"].as_str().unwrap();
    assert_ne!(poll2_id, poll_id);
    alice
        .send(&room, "m.poll.response", poll_response(&poll_id, &["r0o1"]))
        .await;
    alice
        .wait_for(&room, WAIT, "a second stale notice", |_| {
            alice
                .seen(&room, |e| {
                    from(e, bot) && body(e).contains(frogbot_matrix::questions::STALE_TEXT)
                })
                .len()
                >= 2
        })
        .await;
    alice
        .send(
            &room,
            "org.matrix.msc3381.poll.response",
            json!({"org.matrix.msc3381.poll.response": {"answers": ["r0o0"]},
                   "m.relates_to": {"rel_type": "m.reference", "event_id": poll2_id}}),
        )
        .await;
    alice
        .wait_for(&room, WAIT, "the second answer", |e| {
            from(e, bot) && body(e).starts_with("got:") && body(e).contains("staging")
        })
        .await;
    s.bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbered_replies_reactions_multiple_choice_and_own_answers() {
    let Some(s) = setup(None).await else { return };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bot = s.bot_account.user_id.as_str();
    let room = dm(&s, &alice).await;

    // A number in the thread picks that option.
    let ask = alice.send(&room, "m.room.message", text("ask")).await;
    poll_in(&alice, &room, bot, &ask, 1).await;
    alice
        .send(&room, "m.room.message", in_thread("2", &ask))
        .await;
    let got = alice
        .wait_for(&room, WAIT, "answer by number", |e| {
            from(e, bot) && body(e).starts_with("got:") && thread_root(e) == Some(ask.as_str())
        })
        .await;
    assert!(body(&got).contains("prod"), "{got}");

    // A keycap reaction on the poll picks that option.
    let ask2 = alice
        .send(&room, "m.room.message", text("ask by reaction"))
        .await;
    let poll = poll_in(&alice, &room, bot, &ask2, 1).await;
    alice
        .send(
            &room,
            "m.reaction",
            json!({"m.relates_to": {"rel_type": "m.annotation",
                   "event_id": poll["event_id"], "key": "1\u{fe0f}\u{20e3}"}}),
        )
        .await;
    let got = alice
        .wait_for(&room, WAIT, "answer by reaction", |e| {
            from(e, bot) && body(e).starts_with("got:") && thread_root(e) == Some(ask2.as_str())
        })
        .await;
    assert!(body(&got).contains("staging"), "{got}");

    // Multiple choice: max_selections is the number of options; `1 3` picks two.
    let multi = alice.send(&room, "m.room.message", text("multi")).await;
    let poll = poll_in(&alice, &room, bot, &multi, 1).await;
    assert_eq!(poll["content"]["m.poll"]["max_selections"], 3);
    alice
        .send(&room, "m.room.message", in_thread("7", &multi))
        .await;
    alice
        .wait_for(&room, WAIT, "the out-of-range rejection", |e| {
            from(e, bot) && body(e).contains("pick a number from 1 to 3")
        })
        .await;
    alice
        .send(&room, "m.room.message", in_thread("1, 3", &multi))
        .await;
    let got = alice
        .wait_for(&room, WAIT, "multiple answer", |e| {
            from(e, bot) && body(e).starts_with("got:") && thread_root(e) == Some(multi.as_str())
        })
        .await;
    assert!(
        body(&got).contains("eu") && body(&got).contains("asia"),
        "{got}"
    );
    assert!(!body(&got).contains("us\""), "{got}");

    // An own answer, as a thread reply.
    let custom = alice.send(&room, "m.room.message", text("custom")).await;
    poll_in(&alice, &room, bot, &custom, 1).await;
    alice
        .send(&room, "m.room.message", in_thread("newt", &custom))
        .await;
    let got = alice
        .wait_for(&room, WAIT, "own answer", |e| {
            from(e, bot) && body(e).starts_with("got:") && thread_root(e) == Some(custom.as_str())
        })
        .await;
    assert!(body(&got).contains("newt"), "{got}");
    s.bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_without_access_is_denied_and_the_question_stays_open() {
    let Some(hs) = synapse::synapse().await else {
        return;
    };
    let alice_account = hs.register("alice").await;
    let Some(s) = setup(Some(vec![format!("matrix:{}", alice_account.user_id)])).await else {
        return;
    };
    let alice = hs.person(&alice_account).await;
    let mallory_account = hs.register("mallory").await;
    let mallory = hs.person(&mallory_account).await;
    let bot = s.bot_account.user_id.as_str();
    let room = alice
        .create_room(&[&s.bot_account.user_id, &mallory_account.user_id], false)
        .await;
    mallory.join(&room).await;
    bot_joined(&alice, &room, bot).await;

    let ask = alice
        .send(
            &room,
            "m.room.message",
            json!({"msgtype": "m.text", "body": format!("{bot} ask"), "m.mentions": {"user_ids": [bot]}}),
        )
        .await;
    let poll = poll_in(&alice, &room, bot, &ask, 1).await;
    let poll_id = poll["event_id"].as_str().unwrap();
    mallory
        .send(&room, "m.poll.response", poll_response(poll_id, &["r0o1"]))
        .await;
    let denied = alice
        .wait_for(&room, WAIT, "the denied notice", |e| {
            from(e, bot) && body(e).contains(frogbot_matrix::questions::DENIED_TEXT)
        })
        .await;
    assert_eq!(
        denied["content"]["m.mentions"]["user_ids"][0],
        mallory_account.user_id.as_str()
    );
    // Mallory's own mention is refused too.
    mallory
        .send(
            &room,
            "m.room.message",
            json!({"msgtype": "m.text", "body": format!("{bot} hi"), "m.mentions": {"user_ids": [bot]}}),
        )
        .await;
    alice
        .wait_for(&room, WAIT, "the not-allowed notice", |e| {
            from(e, bot) && body(e).contains("not allowed")
        })
        .await;
    // The question is still open: Alice answers it.
    alice
        .send(&room, "m.poll.response", poll_response(poll_id, &["r0o0"]))
        .await;
    let got = alice
        .wait_for(&room, WAIT, "Alice's answer", |e| {
            from(e, bot) && body(e).starts_with("got:")
        })
        .await;
    assert!(body(&got).contains("staging"), "{got}");
    s.bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_while_a_question_waits_resumes_without_replay() {
    let Some(s) = setup(None).await else { return };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bot_id = s.bot_account.user_id.to_string();
    let bot = bot_id.as_str();
    let room = dm(&s, &alice).await;
    let ask = alice.send(&room, "m.room.message", text("ask")).await;
    let poll = poll_in(&alice, &room, bot, &ask, 1).await;
    let device = s.bot.channel.client().device_id().unwrap().to_owned();

    // Stop the bot, start it again on the same store and database.
    let s = s.restart(100, async {}).await;
    let restarted = &s.bot;
    assert_eq!(
        restarted.channel.client().device_id().unwrap(),
        device,
        "the session was restored, not a new login"
    );
    alice
        .send(
            &room,
            "m.poll.response",
            poll_response(poll["event_id"].as_str().unwrap(), &["r0o1"]),
        )
        .await;
    let got = alice
        .wait_for(&room, WAIT, "the answer after the restart", |e| {
            from(e, bot) && body(e).starts_with("got:")
        })
        .await;
    assert!(body(&got).contains("prod"), "{got}");
    // No replay: the first message was not answered again (one poll only).
    alice.send(&room, "m.room.message", text("hi")).await;
    alice
        .wait_for(&room, WAIT, "a later reply", |e| {
            from(e, bot) && body(e) == "hello: hi"
        })
        .await;
    assert_eq!(
        alice
            .seen(&room, |e| from(e, bot)
                && e["type"] == "m.poll.start"
                && e["content"]["m.relates_to"]["rel_type"] == "m.thread")
            .len(),
        1
    );
    s.bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encrypted_dm_works() {
    let Some(s) = setup(None).await else { return };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bot = s.bot_account.user_id.as_str();
    let room = alice.create_room(&[&s.bot_account.user_id], true).await;
    bot_joined(&alice, &room, bot).await;
    let hello = alice
        .send(&room, "m.room.message", text("secret hello"))
        .await;
    let reply = alice
        .wait_for(&room, WAIT, "the decrypted reply", |e| {
            from(e, bot) && e["type"] == "m.room.message"
        })
        .await;
    assert_eq!(body(&reply), "hello: secret hello");
    assert_eq!(thread_root(&reply), Some(hello.as_str()));
    s.bot.stop().await;
}

/// More events than one sync returns (limit 3 here): a burst while running, and messages sent while
/// the bot was stopped, are each answered once in their own thread; nothing skipped, nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_beyond_one_sync_are_each_taken_once_while_running_and_after_a_restart() {
    let Some(s) = setup_with(None, 3).await else {
        return;
    };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bot_id = s.bot_account.user_id.to_string();
    let bot = bot_id.as_str();
    let room = dm(&s, &alice).await;
    let answered = |alice: &Person, roots: &[(String, String)]| {
        roots
            .iter()
            .filter(|(root, text)| {
                !alice
                    .seen(&room, |e| {
                        from(e, bot)
                            && thread_root(e) == Some(root.as_str())
                            && body(e) == format!("hello: {text}")
                    })
                    .is_empty()
            })
            .count()
    };
    let mut roots = Vec::new();
    for i in 0..8 {
        let t = format!("burst {i}");
        roots.push((alice.send(&room, "m.room.message", text(&t)).await, t));
    }
    alice
        .wait_for(&room, WAIT, "a reply to every message of the burst", |_| {
            answered(&alice, &roots) == roots.len()
        })
        .await;

    // Stopped: eight more messages arrive, then the bot starts again on the same store.
    let s = s
        .restart(3, async {
            for i in 0..8 {
                let t = format!("away {i}");
                roots.push((alice.send(&room, "m.room.message", text(&t)).await, t));
            }
        })
        .await;
    alice
        .wait_for(
            &room,
            WAIT,
            "a reply to every message sent while away",
            |_| answered(&alice, &roots) == roots.len(),
        )
        .await;
    // Once each: one reply per thread, no replay of the burst after the restart.
    alice.send(&room, "m.room.message", text("last")).await;
    alice
        .wait_for(&room, WAIT, "the reply to a last message", |e| {
            from(e, bot) && body(e) == "hello: last"
        })
        .await;
    for (root, t) in &roots {
        let replies = alice.seen(&room, |e| {
            from(e, bot) && thread_root(e) == Some(root.as_str())
        });
        assert_eq!(replies.len(), 1, "{t}: {replies:#?}");
    }
    s.bot.stop().await;
}

/// A streamed reply on Synapse: the person's client gets one message in the thread, then
/// `m.replace` edits whose last holds the complete reply; and sees the bot typing meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_reply_arrives_as_replace_edits_and_the_bot_is_seen_typing() {
    use matrix_sdk::ruma::events::typing::SyncTypingEvent;
    let Some(s) = setup(None).await else { return };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bot = s.bot_account.user_id.clone();
    let typing: Arc<std::sync::Mutex<bool>> = Arc::default();
    let t = typing.clone();
    let b = bot.clone();
    alice.client.add_event_handler(move |ev: SyncTypingEvent| {
        let (t, b) = (t.clone(), b.clone());
        async move {
            if ev.content.user_ids.contains(&b) {
                *t.lock().unwrap() = true;
            }
        }
    });
    let room = dm(&s, &alice).await;
    let asked = alice
        .send(&room, "m.room.message", text("stream please"))
        .await;
    let full: String = (0..40).map(|i| format!("w{i} ")).collect::<String>() + "end.";
    let first = alice
        .wait_for(&room, WAIT, "the first text", |e| {
            from(e, bot.as_str())
                && e["type"] == "m.room.message"
                && thread_root(e) == Some(asked.as_str())
        })
        .await;
    assert!(body(&first).starts_with("w0"), "{first}");
    let first_id = first["event_id"].as_str().unwrap().to_owned();
    let last = alice
        .wait_for(&room, WAIT, "the complete reply", |e| {
            e["content"]["m.relates_to"]["rel_type"] == "m.replace"
                && e["content"]["m.relates_to"]["event_id"] == first_id.as_str()
                && e["content"]["m.new_content"]["body"] == full.as_str()
        })
        .await;
    assert_eq!(last["content"]["body"], format!("* {full}"));
    assert_eq!(
        last["content"]["m.new_content"]["format"],
        "org.matrix.custom.html"
    );
    let edits = alice.seen(&room, |e| {
        e["content"]["m.relates_to"]["rel_type"] == "m.replace"
            && e["content"]["m.relates_to"]["event_id"] == first_id.as_str()
    });
    // 40 words over 4 s, at most one edit a second.
    assert!(
        (2..=8).contains(&edits.len()),
        "{} edits: {edits:#?}",
        edits.len()
    );
    assert!(
        *typing.lock().unwrap(),
        "the bot's typing notice reached alice"
    );
    s.bot.stop().await;
}

/// A 40,000-character streamed reply in an encrypted DM (the ciphertext a third larger than the
/// text): Synapse accepts every event (none over its 65,536 bytes), and the person sees the whole
/// reply — the thread's messages after their edits, word for word — within seconds, not after the
/// 120 s delivery grace; the typing notice ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_40k_streamed_reply_in_an_encrypted_dm_is_whole_within_seconds() {
    use matrix_sdk::ruma::events::typing::SyncTypingEvent;
    let Some(s) = setup(None).await else { return };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bot = s.bot_account.user_id.clone();
    let typing: Arc<std::sync::Mutex<Vec<bool>>> = Arc::default();
    let (t, b) = (typing.clone(), bot.clone());
    alice.client.add_event_handler(move |ev: SyncTypingEvent| {
        let (t, b) = (t.clone(), b.clone());
        async move {
            t.lock().unwrap().push(ev.content.user_ids.contains(&b));
        }
    });
    let room = alice.create_room(&[&bot], true).await;
    bot_joined(&alice, &room, bot.as_str()).await;
    let asked = alice.send(&room, "m.room.message", text("huge")).await;
    let started = std::time::Instant::now();
    let want: Vec<String> = huge_reply().split_whitespace().map(str::to_owned).collect();
    let visible = || -> Vec<String> {
        let seen = alice.seen(&room, |_| true);
        let mut out = Vec::new();
        for m in seen.iter().filter(|e| {
            from(e, bot.as_str())
                && e["type"] == "m.room.message"
                && thread_root(e) == Some(asked.as_str())
                && e["content"]["m.relates_to"]["rel_type"] != "m.replace"
        }) {
            let id = m["event_id"].as_str().unwrap_or_default();
            let latest = seen.iter().rev().find(|e| {
                e["content"]["m.relates_to"]["rel_type"] == "m.replace"
                    && e["content"]["m.relates_to"]["event_id"] == id
            });
            let shown = match latest {
                Some(e) => e["content"]["m.new_content"]["body"].as_str(),
                None => m["content"]["body"].as_str(),
            };
            out.extend(
                shown
                    .unwrap_or_default()
                    .split_whitespace()
                    .map(str::to_owned),
            );
        }
        out
    };
    alice
        .wait_for(&room, 30, "the whole reply", |_| visible() == want)
        .await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "whole after {took:?}");
    alice
        .wait_for(&room, WAIT, "typing off", |_| {
            typing.lock().unwrap().last() == Some(&false)
        })
        .await;
    s.bot.stop().await;
}

/// The question records the bot's event `event` in `room` belongs to, read from the store.
async fn records_of(
    db: &frogbot_core::store::DynStore,
    room: &RoomId,
    event: &str,
) -> Vec<frogbot_core::store::QuestionRow> {
    let event = matrix_sdk::ruma::EventId::parse(event).unwrap();
    db.questions_by_platform_message(
        frogbot_matrix::PLATFORM,
        &frogbot_matrix::ids::message_id(room, &event),
        frogbot_core::model::now_millis(),
    )
    .await
    .unwrap()
}

/// A poll question skipped by a `skip` reply in its thread: the record is dismissed once (by the
/// person), the poll is ended and its message edited to "Skipped by …", the turn ends; a second
/// `skip` is plain conversation and changes nothing about the question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skip_reply_dismisses_a_poll_question_once() {
    use frogbot_core::model::QuestionOutcome;
    let Some(s) = setup(None).await else { return };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bot_id = s.bot_account.user_id.to_string();
    let bot = bot_id.as_str();
    let alice_id = alice.user_id().to_string();
    let room = dm(&s, &alice).await;

    let ask = alice.send(&room, "m.room.message", text("ask")).await;
    let poll = poll_in(&alice, &room, bot, &ask, 1).await;
    let poll_id = poll["event_id"].as_str().unwrap().to_owned();
    let fallback = poll["content"]["m.text"][0]["body"].as_str().unwrap();
    assert!(
        fallback.ends_with(&format!("\n{}", frogbot_matrix::render::SKIP_LINE)),
        "{fallback}"
    );
    let open = records_of(&s.db, &room, &poll_id).await;
    assert_eq!(open.len(), 1, "{open:#?}");
    assert_eq!(open[0].outcome, None);
    let thread = frogbot_matrix::ids::message_id(
        &room,
        &matrix_sdk::ruma::EventId::parse(ask.as_str()).unwrap(),
    );
    let chat = |s: &Setup| {
        let (db, thread) = (s.db.clone(), thread.clone());
        async move {
            db.get_channel_chat(frogbot_matrix::PLATFORM, &thread)
                .await
                .unwrap()
                .expect("the thread's chat")
        }
    };
    assert!(chat(&s).await.awaiting_message_id.is_some());

    let settled =
        |e: &Value| from(e, bot) && e["content"]["m.relates_to"]["event_id"] == poll_id.as_str();
    let ends = |p: &Person| p.seen(&room, |e| settled(e) && e["type"] == "m.poll.end");
    let edits = |p: &Person| {
        p.seen(&room, |e| {
            settled(e) && e["content"]["m.relates_to"]["rel_type"] == "m.replace"
        })
    };

    alice
        .send(&room, "m.room.message", in_thread("skip", &ask))
        .await;
    let end = alice
        .wait_for(&room, WAIT, "the poll end", |e| {
            settled(e) && e["type"] == "m.poll.end"
        })
        .await;
    // "Skipped by" the member's display name (Synapse's default: the localpart).
    let skipped = format!("Skipped by {}", alice.user_id().localpart());
    let end_text = end["content"]["m.text"][0]["body"].as_str().unwrap_or("");
    assert!(end_text.contains(&skipped), "{end:#}");
    let edit = alice
        .wait_for(&room, WAIT, "the poll edit", |e| {
            settled(e) && e["content"]["m.relates_to"]["rel_type"] == "m.replace"
        })
        .await;
    let edited = edit["content"]["m.new_content"]["m.text"][0]["body"]
        .as_str()
        .unwrap();
    assert!(edited.ends_with(&format!("\n⏭️ {skipped}")), "{edited}");
    assert!(edited.starts_with("Env: Where?\n1. staging"), "{edited}");

    // The record: dismissed, by Alice; the turn ended without asking the model again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(WAIT);
    let dismissed = loop {
        let rows = records_of(&s.db, &room, &poll_id).await;
        if rows.iter().all(|r| r.outcome.is_some() && r.closed) {
            break rows;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the record to be dismissed and closed: {rows:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(dismissed.len(), 1, "{dismissed:#?}");
    let row = &dismissed[0];
    assert_eq!(row.outcome, Some(QuestionOutcome::Dismissed), "{row:#?}");
    let actor = row.actor.as_ref().and_then(|a| a.identity.as_ref());
    assert_eq!(actor.map(|i| i.user.id.as_str()), Some(alice_id.as_str()));
    assert_eq!(chat(&s).await.awaiting_message_id, None);
    assert!(
        alice
            .seen(&room, |e| from(e, bot) && body(e).starts_with("got:"))
            .is_empty(),
        "a dismissal gives the model no answer"
    );

    // A second skip: the question is settled, so it is conversation (the model answers it) and
    // neither the record nor the settled view changes.
    alice
        .send(&room, "m.room.message", in_thread("skip", &ask))
        .await;
    let reply = alice
        .wait_for(&room, WAIT, "the reply to the second skip", |e| {
            from(e, bot) && body(e) == "hello: skip"
        })
        .await;
    assert_eq!(thread_root(&reply), Some(ask.as_str()));
    let after = records_of(&s.db, &room, &poll_id).await;
    assert_eq!(after.len(), 1, "{after:#?}");
    assert_eq!(after[0].outcome, row.outcome);
    assert_eq!(after[0].outcome_at, row.outcome_at);
    assert_eq!(after[0].actor, row.actor);
    assert_eq!(after[0].record.revision, row.record.revision);
    assert_eq!(ends(&alice).len(), 1, "{:#?}", ends(&alice));
    assert_eq!(edits(&alice).len(), 1, "{:#?}", edits(&alice));
    assert!(
        alice
            .seen(&room, |e| from(e, bot)
                && (body(e).contains(frogbot_matrix::questions::STALE_TEXT)
                    || body(e)
                        .contains(frogbot_matrix::questions::REJECTED_TEXT)))
            .is_empty()
    );
    assert_eq!(
        alice
            .seen(&room, |e| from(e, bot)
                && e["type"] == "m.poll.start"
                && thread_root(e) == Some(ask.as_str()))
            .len(),
        1,
        "no new question"
    );
    s.bot.stop().await;
}

/// A delivery retried with the same key (the engine after a lost answer, in this process or
/// another) posts nothing twice: Synapse answers each piece's transaction id with the event it
/// made the first time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_delivery_is_deduplicated_by_its_transaction_ids() {
    use frogbot_core::agent::Delivery;
    use frogbot_core::model::Thread;
    use frogbot_matrix::channel::outbox::MESSAGE_CHARS;

    let Some(s) = setup(None).await else { return };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bot = s.bot_account.user_id.as_str();
    let room = dm(&s, &alice).await;
    let root = alice.send(&room, "m.room.message", text("hi")).await;
    alice
        .wait_for(&room, WAIT, "the bot's reply", |e| {
            from(e, bot) && body(e) == "hello: hi"
        })
        .await;
    let thread = Thread {
        id: format!("{room}|{root}"),
        platform: "matrix".into(),
        chat_id: "chat-dedup".into(),
    };
    let words = MESSAGE_CHARS / 8 + 10;
    let text: String = (0..words).map(|i| format!("once{i} ")).collect();
    let reply: frogbot_core::model::UiMessage = serde_json::from_value(json!({
        "id": "m1", "role": "assistant", "parts": [{"type": "text", "text": text}]
    }))
    .unwrap();
    let outbox = s.bot.channel.outbox();
    let pieces = outbox.pieces(&text).len();
    assert!(pieces >= 2, "{pieces}");
    let mut delivery = Delivery::new("deliver:dedup:1:a");
    outbox.deliver(&thread, &reply, &delivery).await.unwrap();
    delivery.attempt = 1;
    outbox.deliver(&thread, &reply, &delivery).await.unwrap();
    // A marker after both: once it shows, everything before it does.
    let marker = reply_text("marker");
    outbox
        .deliver(&thread, &marker, &Delivery::new("deliver:dedup:2:a"))
        .await
        .unwrap();
    alice
        .wait_for(&room, WAIT, "the marker", |e| {
            from(e, bot) && body(e) == "marker"
        })
        .await;
    let shown = alice.seen(&room, |e| from(e, bot) && body(e).starts_with("once0 "));
    assert_eq!(shown.len(), 1, "the first piece once: {shown:#?}");
    let all = alice.seen(&room, |e| {
        from(e, bot) && e["type"] == "m.room.message" && body(e).contains("once")
    });
    assert_eq!(all.len(), pieces, "every piece once");
    s.bot.stop().await;
}

fn reply_text(text: &str) -> frogbot_core::model::UiMessage {
    serde_json::from_value(json!({
        "id": "m2", "role": "assistant", "parts": [{"type": "text", "text": text}]
    }))
    .unwrap()
}

/// The bot's question message in the thread on `root` whose body starts with `head`.
async fn input_in(person: &Person, room: &RoomId, bot: &str, root: &str, head: &str) -> Value {
    person
        .wait_for(room, WAIT, head, |e| {
            from(e, bot)
                && e["type"] == "m.room.message"
                && thread_root(e) == Some(root)
                && body(e).starts_with(head)
        })
        .await
}

/// Waits until the bot's reactions on `event` (as `person` sees them) have the keys `keys`.
async fn bot_reacted(person: &Person, room: &RoomId, bot: &str, event: &str, keys: &[&str]) {
    person
        .wait_for(room, WAIT, &format!("the bot's {keys:?}"), |_| {
            let mut seen: Vec<String> = person
                .seen(room, |e| {
                    from(e, bot)
                        && e["type"] == "m.reaction"
                        && e["content"]["m.relates_to"]["event_id"] == event
                })
                .iter()
                .filter_map(|e| {
                    e["content"]["m.relates_to"]["key"]
                        .as_str()
                        .map(str::to_owned)
                })
                .collect();
            seen.sort();
            let mut want: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
            want.sort();
            seen == want
        })
        .await;
}

fn react(event: &str, key: &str) -> Value {
    json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": event, "key": key}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_a_number_a_toggle_and_a_text_are_answered_one_after_another() {
    let Some(s) = setup(None).await else { return };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bot = s.bot_account.user_id.as_str();
    let room = dm(&s, &alice).await;

    let ask = alice.send(&room, "m.room.message", text("kinds")).await;
    // The confirm: a message with its hint and the expiry line (plain and HTML), and the bot's ✅.
    let go = input_in(&alice, &room, bot, &ask, "Question 1 of 4\nGo: Deploy?").await;
    assert!(
        body(&go).contains("\nReact ✅, or reply \"Approve\" to confirm.\nopen until "),
        "{go}"
    );
    assert_eq!(go["content"]["format"], "org.matrix.custom.html");
    assert!(
        go["content"]["formatted_body"]
            .as_str()
            .unwrap()
            .contains("<br><i>open until "),
        "{go}"
    );
    let go_id = go["event_id"].as_str().unwrap().to_owned();
    bot_reacted(&alice, &room, bot, &go_id, &["✅"]).await;
    alice.send(&room, "m.reaction", react(&go_id, "✅")).await;

    // The number comes next: out of range is refused with the reason, then answered.
    let pods = input_in(&alice, &room, bot, &ask, "Question 2 of 4\nPods: How many?").await;
    assert!(
        body(&pods).contains("\nReply with a number from 1 to 10 (pods).\n"),
        "{pods}"
    );
    alice
        .send(&room, "m.room.message", in_thread("11", &ask))
        .await;
    let told = alice
        .wait_for(&room, WAIT, "the out-of-range notice", |e| {
            from(e, bot)
                && e["content"]["msgtype"] == "m.notice"
                && body(e).contains("That answer was not taken: enter a number from 1 to 10.")
        })
        .await;
    assert_eq!(
        told["content"]["m.mentions"]["user_ids"][0],
        alice.user_id().as_str()
    );
    alice
        .send(&room, "m.room.message", in_thread("4", &ask))
        .await;

    // The toggle: ✅ and ❌ from the bot, ❌ from alice.
    let notify = input_in(
        &alice,
        &room,
        bot,
        &ask,
        "Question 3 of 4\nNotify: Tell the team?",
    )
    .await;
    let notify_id = notify["event_id"].as_str().unwrap().to_owned();
    bot_reacted(&alice, &room, bot, &notify_id, &["✅", "❌"]).await;
    alice
        .send(&room, "m.reaction", react(&notify_id, "❌"))
        .await;

    // The text: a thread reply answers it; one longer than `maxLength` is refused with the reason.
    let why = input_in(&alice, &room, bot, &ask, "Question 4 of 4\nWhy: Reason?").await;
    assert!(
        body(&why).contains("\nReply with your answer (at most 10 characters).\n"),
        "{why}"
    );
    alice
        .send(
            &room,
            "m.room.message",
            in_thread("far too long an answer", &ask),
        )
        .await;
    let told = alice
        .wait_for(&room, WAIT, "the too-long notice", |e| {
            from(e, bot)
                && e["content"]["msgtype"] == "m.notice"
                && body(e)
                    .contains("That answer was not taken: the text is longer than 10 characters.")
        })
        .await;
    assert_eq!(thread_root(&told), Some(ask.as_str()));
    alice
        .send(&room, "m.room.message", in_thread("<short>", &ask))
        .await;

    let got = alice
        .wait_for(&room, WAIT, "the answers", |e| {
            from(e, bot) && body(e).starts_with("got:") && thread_root(e) == Some(ask.as_str())
        })
        .await;
    for part in [r#"["Approve"]"#, r#"["4"]"#, r#"["off"]"#, r#"["<short>"]"#] {
        assert!(body(&got).contains(part), "{part} in {got}");
    }
    assert!(!body(&got).contains("far too long"), "{got}");
    // The text's settled view: its answer (escaped in the HTML), no expiry line.
    let why_id = why["event_id"].as_str().unwrap().to_owned();
    let edit = alice
        .wait_for(&room, WAIT, "the text's settled view", |e| {
            from(e, bot)
                && e["content"]["m.relates_to"]["rel_type"] == "m.replace"
                && e["content"]["m.relates_to"]["event_id"] == why_id.as_str()
        })
        .await;
    let new = &edit["content"]["m.new_content"];
    let new_body = new["body"].as_str().unwrap();
    assert!(new_body.ends_with(": <short>"), "{new_body}");
    assert!(new_body.contains("Answered by"), "{new_body}");
    assert!(!new_body.contains("open until"), "{new_body}");
    assert!(
        new["formatted_body"]
            .as_str()
            .unwrap()
            .contains(": &lt;short&gt;"),
        "{edit}"
    );
    // The settled view: each message edited with its answer, without the expiry line.
    let pods_id = pods["event_id"].as_str().unwrap().to_owned();
    let edit = alice
        .wait_for(&room, WAIT, "the number's settled view", |e| {
            from(e, bot)
                && e["content"]["m.relates_to"]["rel_type"] == "m.replace"
                && e["content"]["m.relates_to"]["event_id"] == pods_id.as_str()
        })
        .await;
    let new = edit["content"]["m.new_content"]["body"].as_str().unwrap();
    assert!(new.ends_with(": 4 pods"), "{new}");
    assert!(new.contains("Answered by"), "{new}");
    assert!(!new.contains("open until"), "{new}");
    s.bot.stop().await;
}

/// Sends the ask `key` (its text `text`, one single-choice question: staging / prod) into the
/// channel thread `thread`, as `POST /api/asks` does after `ask_thread`.
async fn send_ask(s: &Setup, thread: &str, key: &str, text: &str) {
    use frogbot_core::agent::ask::{ASK_MODEL, ask_parts};
    use frogbot_core::agent::{SendMessage, channel_chat_id};
    use frogbot_core::model::{ChannelRef, Delivery, QuestionInput, UserId};
    let input: QuestionInput = serde_json::from_value(json!({"questions": [
        {"header": "Env", "question": "Where?",
         "options": [{"label": "staging"}, {"label": "prod"}]}
    ]}))
    .unwrap();
    s.bot
        .engine
        .agents()
        .send(SendMessage {
            chat_id: channel_chat_id(frogbot_matrix::PLATFORM, thread),
            id: Some(key.to_owned()),
            parts: ask_parts(text, &input, key),
            author: Some(UserId::new("asker")),
            delivery: Delivery::Queue,
            model: Some(ASK_MODEL.into()),
            reasoning: None,
            channel: Some(ChannelRef {
                platform: frogbot_matrix::PLATFORM.into(),
                thread: thread.to_owned(),
            }),
            speaker: None,
            context: None,
        })
        .await
        .unwrap();
}

/// The bot's root messages (not in a thread) in `room` with the body `text`, as `person` saw them.
fn roots(person: &Person, room: &RoomId, bot: &str, text: &str) -> Vec<Value> {
    person.seen(room, |e| {
        from(e, bot)
            && e["type"] == "m.room.message"
            && body(e) == text
            && e["content"].get("m.relates_to").is_none()
    })
}

/// Waits for the bot's edit of `poll` showing it answered with `answer`.
async fn answered(person: &Person, room: &RoomId, bot: &str, poll: &str, answer: &str) -> String {
    let edit = person
        .wait_for(room, WAIT, "the poll's settled view", |e| {
            from(e, bot)
                && e["content"]["m.relates_to"]["rel_type"] == "m.replace"
                && e["content"]["m.relates_to"]["event_id"] == poll
        })
        .await;
    let edited = edit["content"]["m.new_content"]["m.text"][0]["body"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(edited.contains("✅ Answered by"), "{edited}");
    assert!(edited.contains(&format!(": {answer}")), "{edited}");
    edited
}

/// An ask to a room (by id, or by an alias) starts a thread on a new root message with the ask's
/// text; the question is asked in that thread and a reaction from another member answers it (its
/// routing reaches the `room|root` thread); a retry with the same key returns the same thread and
/// posts one root; a room the bot is not in is refused and nothing is posted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_to_a_room_starts_a_thread_there_once_and_is_answered_in_it() {
    use frogbot_core::agent::AskPlace;
    let Some(s) = setup(None).await else { return };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bob_account = s.hs.register("bob").await;
    let bob = s.hs.person(&bob_account).await;
    let bot = s.bot_account.user_id.as_str();
    let room = alice
        .create_room(&[&s.bot_account.user_id, &bob_account.user_id], false)
        .await;
    bob.join(&room).await;
    bot_joined(&alice, &room, bot).await;
    let engine = &s.bot.engine;
    let matrix = frogbot_matrix::PLATFORM;

    let text = "Where should v2 go?";
    let thread = engine
        .channels()
        .ask_thread(matrix, AskPlace::Thread(room.as_str()), text, "ask-room-1")
        .await
        .unwrap()
        .thread;
    let (in_room, root) = frogbot_matrix::ids::split_message_id(&thread).unwrap();
    assert_eq!(in_room, room);
    // The response was "lost": the retry finds the same root.
    let again = engine
        .channels()
        .ask_thread(matrix, AskPlace::Thread(room.as_str()), text, "ask-room-1")
        .await
        .unwrap()
        .thread;
    assert_eq!(again, thread);
    // A thread is taken as it is.
    let as_is = engine
        .channels()
        .ask_thread(matrix, AskPlace::Thread(&thread), "unused", "ask-room-x")
        .await
        .unwrap()
        .thread;
    assert_eq!(as_is, thread);

    send_ask(&s, &thread, "ask-room-1", text).await;
    let poll = poll_in(&bob, &room, bot, root.as_str(), 1).await;
    let poll_id = poll["event_id"].as_str().unwrap().to_owned();
    bob.send(&room, "m.reaction", react(&poll_id, "2\u{fe0f}\u{20e3}"))
        .await;
    let edited = answered(&alice, &room, bot, &poll_id, "prod").await;
    // Answered by bob's display name (Synapse's default: the localpart).
    assert!(
        edited.contains(&format!(
            "✅ Answered by {}: prod",
            bob_account.user_id.localpart()
        )),
        "{edited}"
    );
    let root_events = roots(&alice, &room, bot, text);
    assert_eq!(root_events.len(), 1, "one root: {root_events:#?}");
    assert_eq!(root_events[0]["event_id"], root.as_str());

    // By alias: a new thread (another key) in the same room.
    let alias = matrix_sdk::ruma::OwnedRoomAliasId::try_from(format!(
        "#asks{}:{}",
        std::process::id(),
        s.hs.server_name
    ))
    .unwrap();
    alice.client.create_room_alias(&alias, &room).await.unwrap();
    let by_alias = engine
        .channels()
        .ask_thread(
            matrix,
            AskPlace::Thread(alias.as_str()),
            "By alias?",
            "ask-room-2",
        )
        .await
        .unwrap()
        .thread;
    let (alias_room, alias_root) = frogbot_matrix::ids::split_message_id(&by_alias).unwrap();
    assert_eq!(alias_room, room);
    assert_ne!(alias_root, root);
    alice
        .wait_for(&room, WAIT, "the root posted by alias", |e| {
            e["event_id"] == alias_root.as_str() && body(e) == "By alias?"
        })
        .await;

    // A room the bot is not in: refused, nothing posted there.
    let elsewhere = alice.create_room(&[&bob_account.user_id], false).await;
    let e = engine
        .channels()
        .ask_thread(
            matrix,
            AskPlace::Thread(elsewhere.as_str()),
            text,
            "ask-room-3",
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("the bot is not in the Matrix room"), "{e}");
    let unknown = format!("#nothing-here:{}", s.hs.server_name);
    let e = engine
        .channels()
        .ask_thread(matrix, AskPlace::Thread(&unknown), text, "ask-room-4")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown Matrix room"), "{e}");
    s.bot.stop().await;
}

/// An ask to a person: the bot makes a DM room inviting them (marked direct), posts the ask's
/// text as its root once (a retry with the same key returns the same thread; another ask to them
/// finds the same room), the person accepts the invite and answers with a thread reply. A bad or
/// unknown user id is refused with no room made and nothing posted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_to_a_person_opens_a_dm_they_join_and_answer_in() {
    use frogbot_core::agent::AskPlace;
    use matrix_sdk::ruma::events::room::member::StrippedRoomMemberEvent;
    let Some(s) = setup(None).await else { return };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let alice_id = alice.user_id().to_owned();
    let bot = s.bot_account.user_id.to_string();
    let bot = bot.as_str();
    let engine = s.bot.engine.clone();
    let matrix = frogbot_matrix::PLATFORM;
    let client = s.bot.channel.client().clone();
    let rooms_before = client.joined_rooms().len();

    // Bad input first: nothing made, nothing posted.
    let e = engine
        .channels()
        .ask_thread(matrix, AskPlace::User("alice"), "Hi?", "ask-dm-0")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a Matrix user id (@name:server)"), "{e}");
    let nobody = format!("@nobody-{}:{}", std::process::id(), s.hs.server_name);
    let e = engine
        .channels()
        .ask_thread(matrix, AskPlace::User(&nobody), "Hi?", "ask-dm-0")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown Matrix user"), "{e}");
    assert_eq!(client.joined_rooms().len(), rooms_before, "no room made");

    let (invites_tx, mut invites) = tokio::sync::mpsc::unbounded_channel();
    let me = alice_id.clone();
    alice
        .client
        .add_event_handler(move |ev: StrippedRoomMemberEvent, room: matrix_sdk::Room| {
            let tx = invites_tx.clone();
            let me = me.clone();
            async move {
                if ev.state_key == me {
                    let _ = tx.send((room.room_id().to_owned(), ev.content.is_direct));
                }
            }
        });

    // The asks are made while the bot's sync loop is stopped (so its client has not seen the
    // new room's `m.direct` when the retry comes): the retry and a second ask find the room in
    // the server's `m.direct`; Synapse answers the repeated transaction with the first root.
    let text = "Where should v3 go?";
    let outbox = s.bot.channel.outbox();
    let made = Arc::new(std::sync::Mutex::new(None));
    let (made_in, to) = (made.clone(), alice_id.to_string());
    let old = client;
    let s = s
        .restart(100, async move {
            let ask = |key: &'static str, text: &'static str| {
                outbox.ask_thread(AskTo::new(AskPlace::User(&to), text, key))
            };
            let first = ask("ask-dm-1", text).await.unwrap();
            let retry = ask("ask-dm-1", text).await.unwrap();
            let other = ask("ask-dm-2", "And v4?").await.unwrap();
            *made_in.lock().unwrap() = Some((first, retry, other, old.joined_rooms().len()));
        })
        .await;
    let (thread, retry, other, rooms_after) = made.lock().unwrap().take().unwrap();
    assert_eq!(retry, thread, "a retry");
    let (room, root) = frogbot_matrix::ids::split_message_id(&thread).unwrap();
    let (other_room, other_root) = frogbot_matrix::ids::split_message_id(&other).unwrap();
    assert_eq!(other_room, room, "another ask to her: the same DM room");
    assert_ne!(other_root, root);
    assert_eq!(rooms_after, rooms_before + 1, "one room made");

    // Alice is invited (a direct invite) and joins.
    let (invited, is_direct) = tokio::time::timeout(Duration::from_secs(WAIT), invites.recv())
        .await
        .expect("the invite")
        .unwrap();
    assert_eq!(invited, room);
    assert_eq!(is_direct, Some(true));
    alice.join(&room).await;

    send_ask(&s, &thread, "ask-dm-1", text).await;
    let poll = poll_in(&alice, &room, bot, root.as_str(), 1).await;
    let poll_id = poll["event_id"].as_str().unwrap().to_owned();
    alice
        .send(&room, "m.room.message", in_thread("1", root.as_str()))
        .await;
    answered(&alice, &room, bot, &poll_id, "staging").await;
    // The root (decrypted: the DM is encrypted), once.
    let root_events = roots(&alice, &room, bot, text);
    assert_eq!(root_events.len(), 1, "one root: {root_events:#?}");
    assert_eq!(root_events[0]["event_id"], root.as_str());
    s.bot.stop().await;
}

/// An agent message on the real Synapse: a table (an HTML `<table>` in `formatted_body`), an
/// image (uploaded to Synapse's media repository as an `m.image`) and a block with event buttons
/// (the bot's reactions, one key per button); then an `m.replace` edit, a pin in
/// `m.room.pinned_events` (read back by the person's client) and an unpin, a person's reaction with
/// a button's key read as the click on that button, and a deletion (redactions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_message_with_a_table_is_edited_pinned_and_clicked() {
    use frogbot_core::agent::Delivery;
    use frogbot_core::model::Thread;
    use frogbot_matrix::convert::{Incoming, classify};
    use matrix_sdk::ruma::events::AnySyncTimelineEvent;
    use matrix_sdk::ruma::serde::Raw;

    let Some(s) = setup(None).await else { return };
    let images = frogbot_matrix::testing::FakeHomeserver::start().await;
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bot = s.bot_account.user_id.as_str();
    let room = dm(&s, &alice).await;
    let root = alice.send(&room, "m.room.message", text("status")).await;
    alice
        .wait_for(&room, WAIT, "the bot's reply", |e| {
            from(e, bot) && body(e) == "hello: status"
        })
        .await;
    let thread = Thread {
        id: format!("{room}|{root}"),
        platform: "matrix".into(),
        chat_id: "chat-blocks".into(),
    };
    let agent_message = |title: &str, state: &str| -> frogbot_core::model::UiMessage {
        let blocks = frogbot_model::blocks::Block::list_from_json(&json!([
            {"type": "table", "id": "jobs", "columns": ["Job", "State"],
             "rows": [["build", state], ["test", "ok"]]},
            {"type": "image", "url": images.image_url("chart.png"), "alt": "chart"},
            {"type": "fields", "id": "summary", "fields": [{"key": "Branch", "value": "main"}],
             "events": [{"label": "Retry", "value": "retry"}, {"label": "Show logs"}]}
        ]))
        .unwrap();
        let mut parts = vec![json!({"type": "text", "text": "Nightly **build**"})];
        parts.extend(
            blocks
                .iter()
                .map(|b| serde_json::to_value(b.to_part()).unwrap()),
        );
        serde_json::from_value(json!({"id": "am1", "role": "assistant", "parts": parts,
            "metadata": {"title": title}}))
        .unwrap()
    };
    let outbox = s.bot.channel.outbox();
    let ids = outbox
        .post_message(
            &thread,
            &agent_message("Build", "running"),
            &Delivery::new("deliver:blocks:1"),
        )
        .await
        .unwrap();
    assert_eq!(ids.len(), 3, "{ids:?}");
    let event = |id: &String| id.split_once('|').unwrap().1.to_owned();
    let table = alice
        .wait_for(&room, WAIT, "the table", |e| {
            from(e, bot) && e["event_id"] == event(&ids[0]).as_str()
        })
        .await;
    let html = table["content"]["formatted_body"].as_str().unwrap();
    assert!(
        html.contains("<table><thead><tr><th>Job</th><th>State</th></tr></thead>"),
        "{html}"
    );
    assert!(html.contains("<td>running</td>"), "{html}");
    assert_eq!(thread_root(&table), Some(root.as_str()));
    let image = alice
        .wait_for(&room, WAIT, "the image", |e| {
            from(e, bot) && e["event_id"] == event(&ids[1]).as_str()
        })
        .await;
    assert_eq!(image["content"]["msgtype"], "m.image");
    let mxc = image["content"]["url"].as_str().unwrap();
    assert!(mxc.starts_with("mxc://localhost/"), "{mxc}");
    bot_reacted(
        &alice,
        &room,
        bot,
        &event(&ids[2]),
        &["Retry #2.0", "Show logs #2.1"],
    )
    .await;

    // The edit: m.replace of each message, the table's new state in m.new_content.
    let edited = outbox
        .edit_posted(&thread, &ids, &agent_message("Build", "passed"))
        .await
        .unwrap();
    assert_eq!(edited, ids);
    let edit = alice
        .wait_for(&room, WAIT, "the table's edit", |e| {
            from(e, bot)
                && e["content"]["m.relates_to"]["rel_type"] == "m.replace"
                && e["content"]["m.relates_to"]["event_id"] == event(&ids[0]).as_str()
        })
        .await;
    assert!(
        edit["content"]["m.new_content"]["formatted_body"]
            .as_str()
            .unwrap()
            .contains("<td>passed</td>")
    );
    // The buttons did not change: their reactions stay as they were (none redacted; the only
    // redactions are the acks' on alice's message).
    let buttons: Vec<String> = alice
        .seen(&room, |e| {
            from(e, bot)
                && e["type"] == "m.reaction"
                && e["content"]["m.relates_to"]["event_id"] == event(&ids[2]).as_str()
        })
        .iter()
        .filter_map(|e| e["event_id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(buttons.len(), 2);
    let redacted = alice.seen(&room, |e| {
        from(e, bot)
            && e["type"] == "m.room.redaction"
            && buttons.iter().any(|b| e["redacts"] == b.as_str())
    });
    assert!(redacted.is_empty(), "{redacted:#?}");

    // The pin, as the person's client reads the room's state from Synapse. In a room alice made
    // the bot has power level 0, below the 50 that room state needs: refused with the reason,
    // until alice makes it a moderator.
    let refused = outbox
        .pin_posted(thread.message(&ids[0]), true)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("may not pin"), "{refused}");
    let bot_id = matrix_sdk::ruma::UserId::parse(bot).unwrap();
    alice
        .room(&room)
        .update_power_levels(vec![(&bot_id, matrix_sdk::ruma::Int::from(50))])
        .await
        .unwrap();
    outbox
        .pin_posted(thread.message(&ids[0]), true)
        .await
        .unwrap();
    let pinned = alice
        .room(&room)
        .load_pinned_events()
        .await
        .unwrap()
        .unwrap_or_default();
    assert_eq!(
        pinned.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        [event(&ids[0])]
    );
    outbox
        .pin_posted(thread.message(&ids[0]), true)
        .await
        .unwrap();
    outbox
        .pin_posted(thread.message(&ids[0]), false)
        .await
        .unwrap();
    let pinned = alice
        .room(&room)
        .load_pinned_events()
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(pinned.is_empty(), "{pinned:?}");

    // Alice taps "Show logs": her reaction, as the bot's sync delivers it, is that button's click.
    let click = alice
        .send(
            &room,
            "m.reaction",
            react(&event(&ids[2]), "Show logs #2.1"),
        )
        .await;
    let seen = alice
        .wait_for(&room, WAIT, "alice's reaction", |e| {
            e["event_id"] == click.as_str()
        })
        .await;
    let raw: Raw<AnySyncTimelineEvent> =
        Raw::from_json(serde_json::value::to_raw_value(&seen).unwrap());
    match classify(&raw, &room, &bot_id).unwrap() {
        Some(Incoming::Event(c)) => {
            assert_eq!(c.message_id, ids[2]);
            assert_eq!((c.block, c.button), (2, 1));
            assert_eq!(c.user.id, alice.user_id().as_str());
        }
        other => panic!("not an event click: {other:?}"),
    }

    // Deleted: every piece redacted; again is no failure.
    outbox.delete_posted(&thread, &ids).await.unwrap();
    for id in &ids {
        alice
            .wait_for(&room, WAIT, "a redaction", |e| {
                from(e, bot)
                    && e["type"] == "m.room.redaction"
                    && e["redacts"] == event(id).as_str()
            })
            .await;
    }
    outbox.delete_posted(&thread, &ids).await.unwrap();
    s.bot.stop().await;
}

/// An agent outside FrogBot in a thread on the real Synapse: its message with event buttons is
/// posted through the outbox with the bot's reactions, alice taps "Retry" three times (reacts,
/// takes her reaction back, reacts again: Synapse keeps one reaction per person and key), and the
/// agent's inbox holds three events — nothing is answered in the room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_taps_on_an_event_button_reach_the_agents_inbox() {
    use frogbot_core::agent::{AgentMessage, AgentPlace, ChannelTarget};
    use frogbot_core::model::UserId;

    let Some(s) = setup(None).await else { return };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bot = s.bot_account.user_id.as_str();
    let room = dm(&s, &alice).await;
    let root = alice.send(&room, "m.room.message", text("status")).await;
    alice
        .wait_for(&room, WAIT, "the bot's reply", |e| {
            from(e, bot) && body(e) == "hello: status"
        })
        .await;
    let agent = UserId::new("agent");
    let engine = &s.bot.engine;
    // The person's thread with the model is never the agent's (issue 37): refused.
    assert!(
        engine
            .agents()
            .open_chat(
                Some(&agent),
                AgentPlace::Channel {
                    platform: "matrix".into(),
                    place: ChannelTarget::Thread(format!("{room}|{root}")),
                },
                "Deploy",
                "k0",
            )
            .await
            .is_err()
    );
    // A thread of its own in the room, started with its first message.
    let chat = engine
        .agents()
        .open_chat(
            Some(&agent),
            AgentPlace::Channel {
                platform: "matrix".into(),
                place: ChannelTarget::Thread(room.to_string()),
            },
            "Deploy",
            "k1",
        )
        .await
        .unwrap();
    let agent_root = chat
        .channel
        .as_ref()
        .and_then(|c| c.thread.split_once('|'))
        .map(|(_, r)| r.to_owned())
        .expect("a thread id room|root");
    let blocks = frogbot_model::blocks::Block::list_from_json(&json!([
        {"type": "table", "id": "jobs", "columns": ["Job", "State"], "rows": [["build", "ok"]]},
        {"type": "fields", "id": "actions", "fields": [{"key": "Branch", "value": "main"}],
         "events": [{"label": "Retry", "value": "retry"}, {"label": "Show logs"}]}
    ]))
    .unwrap();
    engine
        .agents()
        .post(
            &chat.chat_id,
            Some(&agent),
            AgentMessage {
                id: Some("m1".into()),
                title: Some("Deploy".into()),
                text: Some("Starting".into()),
                blocks,
                pin: None,
                files: Vec::new(),
            },
        )
        .await
        .unwrap();
    let message = alice
        .wait_for(&room, WAIT, "the agent's message", |e| {
            from(e, bot)
                && e["type"] == "m.room.message"
                && body(e).starts_with("**Deploy**")
                && thread_root(e) == Some(agent_root.as_str())
        })
        .await;
    let target = message["event_id"].as_str().unwrap().to_owned();
    bot_reacted(
        &alice,
        &room,
        bot,
        &target,
        &["Retry #1.0", "Show logs #1.1"],
    )
    .await;
    let sent_before = alice
        .seen(&room, |e| from(e, bot) && e["type"] == "m.room.message")
        .len();
    let mut items = Vec::new();
    for n in 0..3 {
        let tap = alice
            .send(&room, "m.reaction", react(&target, "Retry #1.0"))
            .await;
        // Wait for the event before taking the reaction back for the next tap.
        let deadline = std::time::Instant::now() + Duration::from_secs(WAIT);
        while items.len() <= n {
            items.extend(
                engine
                    .agents()
                    .inbox(Some(&agent), Some(&chat.chat_id), 10)
                    .await
                    .unwrap(),
            );
            assert!(
                std::time::Instant::now() < deadline,
                "tap {n} never arrived"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let tap = matrix_sdk::ruma::EventId::parse(&tap).unwrap();
        alice.room(&room).redact(&tap, None, None).await.unwrap();
    }
    assert_eq!(items.len(), 3, "{items:#?}");
    for item in &items {
        let ev = item.event.as_ref().expect("an event");
        assert_eq!(
            (ev.block_id.as_str(), ev.value.as_str()),
            ("actions", "retry")
        );
        assert_eq!(ev.message_id, "m1");
    }
    let sent_after = alice
        .seen(&room, |e| from(e, bot) && e["type"] == "m.room.message")
        .len();
    assert_eq!(sent_after, sent_before, "nothing answered");
    s.bot.stop().await;
}

/// A multiple choice on a real Synapse, as a second client sees it (`person_view_of` over the
/// events Alice's client received): the unstable poll Element renders with its plain `body`, the
/// clicks sent as Element sends them (the whole selection each time), ✅ to send them, and the
/// settled poll keeping Alice's votes counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multiple_choice_is_sent_with_a_check_and_alice_sees_her_votes_kept() {
    use frogbot_matrix::testing::person_view_of;
    let Some(s) = setup_with_events(frogbot_matrix::render::PollEvents::Unstable).await else {
        return;
    };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bot = s.bot_account.user_id.as_str();
    let room = dm(&s, &alice).await;
    let multi = alice.send(&room, "m.room.message", text("multi")).await;
    let poll = alice
        .wait_for(&room, WAIT, "the unstable poll", |e| {
            from(e, bot)
                && e["type"] == "org.matrix.msc3381.poll.start"
                && thread_root(e) == Some(multi.as_str())
        })
        .await;
    let poll_id = poll["event_id"].as_str().unwrap().to_owned();
    bot_reacted(&alice, &room, bot, &poll_id, &["✅"]).await;
    let ids: Vec<String> = poll["content"]["org.matrix.msc3381.poll.start"]["answers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_owned())
        .collect();
    for picked in [vec![0], vec![0, 2]] {
        let answers: Vec<&str> = picked.iter().map(|&i| ids[i].as_str()).collect();
        alice
            .send(
                &room,
                "org.matrix.msc3381.poll.response",
                json!({"org.matrix.msc3381.poll.response": {"answers": answers},
                       "m.relates_to": {"rel_type": "m.reference", "event_id": poll_id}}),
            )
            .await;
    }
    alice.send(&room, "m.reaction", react(&poll_id, "✅")).await;
    let got = alice
        .wait_for(&room, WAIT, "the answer reaching the model", |e| {
            from(e, bot) && body(e).starts_with("got:") && thread_root(e) == Some(multi.as_str())
        })
        .await;
    assert!(body(&got).contains(r#"["eu","asia"]"#), "{got}");
    alice
        .wait_for(&room, WAIT, "the poll end", |e| {
            from(e, bot) && e["type"] == "org.matrix.msc3381.poll.end"
        })
        .await;
    alice
        .wait_for(&room, WAIT, "the settled edit", |e| {
            from(e, bot)
                && e["content"]["m.relates_to"]["rel_type"] == "m.replace"
                && e["content"]["m.relates_to"]["event_id"] == poll_id.as_str()
        })
        .await;
    let seen = person_view_of(&alice.seen(&room, |_| true), multi.as_str());
    let q = seen.iter().find(|m| m.id == poll_id).expect("the poll");
    let shown = q.poll.as_ref().unwrap();
    assert_eq!(shown.question, "Regions: Which?");
    assert_eq!(
        shown.votes,
        [(
            alice.user_id().to_string(),
            vec!["eu".to_owned(), "asia".to_owned()]
        )]
    );
    let by = alice.user_id().localpart();
    assert_eq!(
        shown.ended.as_deref(),
        Some(format!("✅ Answered by {by}: eu, asia").as_str())
    );
    let body = q.fallback.as_deref().unwrap();
    assert!(
        body.starts_with("Regions: Which?\n1. eu\n2. us\n3. asia\n"),
        "{body}"
    );
    assert!(
        body.ends_with(&format!("\n✅ Answered by {by}: eu, asia")),
        "{body}"
    );
    assert!(q.notified && q.edited);
}

/// Files (issue 40, item 1) from a second real client: an image and a text file sent with
/// matrix-sdk's `send_attachment` (uploaded to Synapse's media repository; in the encrypted DM,
/// encrypted, their keys in the events) reach the model — the image's bytes whole, the text as
/// text — and the person sees the bot's answer naming them, in the plain room and the encrypted
/// one alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_and_files_sent_by_a_person_reach_the_model_plain_and_encrypted() {
    use matrix_sdk::attachment::AttachmentConfig;
    let Some(s) = setup(None).await else { return };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bot = s.bot_account.user_id.as_str();
    let png: Vec<u8> = (0..40_000u32).map(|i| (i % 233) as u8).collect();
    let b64 = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&png).len()
    };
    let caption =
        |t: &str| Some(matrix_sdk::ruma::events::room::message::TextMessageEventContent::plain(t));
    for encrypted in [false, true] {
        let room = alice
            .create_room(&[&s.bot_account.user_id], encrypted)
            .await;
        bot_joined(&alice, &room, bot).await;
        let joined = alice.client.get_room(&room).unwrap();
        joined
            .send_attachment(
                "dot.png",
                &"image/png".parse().unwrap(),
                png.clone(),
                AttachmentConfig::new().caption(caption("files? one")),
            )
            .await
            .unwrap();
        let answer = alice
            .wait_for(&room, WAIT, "the answer naming the image", |e| {
                from(e, bot) && body(e).starts_with("files:")
            })
            .await;
        assert_eq!(
            body(&answer),
            format!(
                "files: dot.png image {}",
                "data:image/png;base64,".len() + b64
            ),
            "encrypted: {encrypted}"
        );
        joined
            .send_attachment(
                "notes.txt",
                &"text/plain".parse().unwrap(),
                b"milk, eggs".to_vec(),
                AttachmentConfig::new().caption(caption("files? two")),
            )
            .await
            .unwrap();
        let answer = alice
            .wait_for(&room, WAIT, "the answer naming the text file", |e| {
                from(e, bot) && body(e).starts_with("files: notes")
            })
            .await;
        assert_eq!(
            body(&answer),
            "files: notes.txt text \"milk, eggs\"",
            "encrypted: {encrypted}"
        );
    }
    s.bot.stop().await;
}

/// Files the bot sends (issue 40, item 2), through a second real client: a model's reply with a
/// picture and a text file is its text, then an `m.image` and an `m.file` in the thread, in
/// order, named and typed; the person downloads each (decrypting it in the encrypted room: the
/// event carries `file`, not `url`) and gets exactly the bytes the model made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_the_bot_sends_arrive_plain_and_encrypted() {
    use matrix_sdk::ruma::events::room::message::{MessageType, RoomMessageEventContent};
    let Some(s) = setup(None).await else { return };
    let alice = s.hs.person(&s.hs.register("alice").await).await;
    let bot = s.bot_account.user_id.as_str();
    for encrypted in [false, true] {
        let room = alice
            .create_room(&[&s.bot_account.user_id], encrypted)
            .await;
        bot_joined(&alice, &room, bot).await;
        alice
            .send(&room, "m.room.message", text("send files please"))
            .await;
        let said = alice
            .wait_for(&room, WAIT, "the reply's text", |e| {
                from(e, bot) && body(e) == "Here you go"
            })
            .await;
        let image = alice
            .wait_for(&room, WAIT, "the picture", |e| {
                from(e, bot) && e["content"]["msgtype"] == "m.image"
            })
            .await;
        let file = alice
            .wait_for(&room, WAIT, "the text file", |e| {
                from(e, bot) && e["content"]["msgtype"] == "m.file"
            })
            .await;
        let order: Vec<String> = alice
            .seen(&room, |e| from(e, bot) && e["type"] == "m.room.message")
            .iter()
            .map(|e| e["event_id"].as_str().unwrap_or("").to_owned())
            .collect();
        let at = |e: &Value| order.iter().position(|id| e["event_id"] == id.as_str());
        assert!(
            at(&said) < at(&image) && at(&image) < at(&file),
            "text, then the picture, then the file"
        );
        for (ev, name, mime, bytes) in [
            (&image, "chart.png", "image/png", chart()),
            (&file, "notes.txt", "text/plain", b"milk, eggs".to_vec()),
        ] {
            let c = &ev["content"];
            assert_eq!(c["body"], name);
            assert_eq!(c["filename"], name);
            assert_eq!(c["info"]["mimetype"], mime);
            assert_eq!(c["info"]["size"], bytes.len());
            assert_eq!(
                c["m.relates_to"], said["content"]["m.relates_to"],
                "where the text is: {c}"
            );
            assert_eq!(
                c.get("file").is_some(),
                encrypted,
                "encrypted media in an encrypted room, plain in a plain one: {c}"
            );
            assert_eq!(c.get("url").is_some(), !encrypted, "{c}");
            let content: RoomMessageEventContent =
                serde_json::from_value(c.clone()).expect("a room message");
            let got = match &content.msgtype {
                MessageType::Image(i) => alice.client.media().get_file(i, false).await,
                MessageType::File(f) => alice.client.media().get_file(f, false).await,
                other => panic!("{other:?}"),
            }
            .expect("the download")
            .expect("a file");
            assert_eq!(
                got, bytes,
                "{name}: the bytes the model made (encrypted: {encrypted})"
            );
        }
    }
    s.bot.stop().await;
}
