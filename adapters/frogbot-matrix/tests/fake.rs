//! The whole adapter against the fake homeserver (`frogbot_matrix::testing::FakeHomeserver`):
//! `channel::connect` logs in, the sync loop receives what people send, FrogBot's engine (on
//! SQLite, with a scripted model) answers through the outbox and the question hooks. Fast; the
//! real-Synapse tests (tests/synapse.rs) cover encryption, gaps and restarts.

#![recursion_limit = "256"]

use std::time::Duration;

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, call, reply};
use frogbot_core::agent::{ModelEvent, ModelMessage, ModelRequest};
use frogbot_matrix::channel::outbox::MESSAGE_CHARS;
use frogbot_matrix::channel::{Config, Login, MatrixAdapter, connect};
use frogbot_matrix::testing::{BOT_PASSWORD, FakeHomeserver};
use matrix_sdk::ruma::{OwnedUserId, RoomId};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: u64 = 30;

fn model() -> ScriptedModel {
    ScriptedModel::new(|req: &ModelRequest| {
        if let Some(ModelMessage::Tool { content, .. }) = req.messages.last() {
            return reply(&format!("got: {content}"));
        }
        let text = req
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                ModelMessage::User { text } => Some(text.clone()),
                _ => None,
            })
            .unwrap_or_default();
        // What the person typed: after the thread's earlier messages and their name.
        let text = text
            .rsplit_once("\n\n")
            .map_or(text.clone(), |(_, t)| t.to_owned());
        let text = text
            .split_once(": ")
            .map_or(text.clone(), |(_, t)| t.to_owned());
        if text.contains("stream") {
            let mut e = Vec::new();
            for i in 0..30 {
                e.push(ScriptEvent::Event(ModelEvent::TextDelta(format!("w{i} "))));
                e.push(ScriptEvent::Pause(Duration::from_millis(50)));
            }
            e.extend(reply("end."));
            return e;
        }
        if text.contains("ask") {
            return call(
                &format!("c{}", req.messages.len()),
                "question",
                json!({"questions": [{"header": "Env", "question": "Where?",
                    "options": [{"label": "staging"}, {"label": "prod"}]}]}),
            );
        }
        if text.contains("long") {
            return reply(&"frog ".repeat(MESSAGE_CHARS / 5 + 100));
        }
        reply(&format!("hello: {text}"))
    })
}

struct Bot {
    model: ScriptedModel,
    engine: frogbot_core::agent::Engine,
    _adapter: MatrixAdapter,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    worker: tokio::task::JoinHandle<()>,
    _store: tempfile::TempDir,
    _db: frogbot_testkit::TestDb,
}

async fn bot(fake: &FakeHomeserver, allow: Vec<String>) -> Bot {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let store = tempfile::tempdir().unwrap();
    let mut config = Config::new(
        fake.url(),
        fake.bot().to_owned(),
        Login::Password(BOT_PASSWORD.into()),
        store.path(),
    );
    config.allow = allow;
    let adapter = connect(config).await.unwrap();
    let db = frogbot_testkit::sqlite_db();
    let model = model();
    let engine =
        frogbot_testkit::engine_with(frogbot_testkit::open_store(&db.url).await, model.clone())
            .with_channel(adapter.channel());
    let shutdown = CancellationToken::new();
    let worker = engine.spawn_worker(Duration::from_millis(100));
    let task = adapter
        .start(engine.handle(), shutdown.clone())
        .expect("a sync loop");
    Bot {
        model,
        engine,
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

fn person(name: &str) -> OwnedUserId {
    OwnedUserId::try_from(format!("@{name}:fake.test")).unwrap()
}

fn text(body: &str) -> Value {
    json!({"msgtype": "m.text", "body": body})
}

fn from_bot(fake: &FakeHomeserver, e: &Value) -> bool {
    e["sender"] == fake.bot().as_str()
}

fn body(e: &Value) -> &str {
    e["content"]["body"].as_str().unwrap_or("")
}

fn in_thread(e: &Value, root: &str) -> bool {
    e["content"]["m.relates_to"]["rel_type"] == "m.thread"
        && e["content"]["m.relates_to"]["event_id"] == root
}

async fn wait_reply(fake: &FakeHomeserver, room: &RoomId, root: &str, starts: &str) -> Value {
    fake.wait_for(room, WAIT, starts, |e| {
        from_bot(fake, e) && in_thread(e, root) && body(e).starts_with(starts)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_is_answered_in_a_thread_and_a_poll_response_answers_the_question() {
    let fake = FakeHomeserver::start().await;
    let alice = person("alice");
    let room = fake.create_room(&[&alice]);
    let bot = bot(&fake, Vec::new()).await;

    let hi = fake.inject(&room, &alice, "m.room.message", text("hi there"));
    let answer = wait_reply(&fake, &room, hi.as_str(), "hello:").await;
    assert_eq!(body(&answer), "hello: hi there");

    let ask = fake.inject(&room, &alice, "m.room.message", text("ask"));
    let poll = fake
        .wait_for(&room, WAIT, "the poll", |e| {
            // The default: the unstable events Element renders.
            from_bot(&fake, e)
                && e["type"] == "org.matrix.msc3381.poll.start"
                && in_thread(e, ask.as_str())
        })
        .await;
    let poll_id = poll["event_id"].as_str().unwrap();
    let shown = fake.open_answers(&format!("{room}|{poll_id}"));
    assert_eq!(shown[1].1, "prod");
    fake.inject(
        &room,
        &alice,
        "org.matrix.msc3381.poll.response",
        json!({"org.matrix.msc3381.poll.response": {"answers": [shown[1].0]},
               "m.relates_to": {"rel_type": "m.reference", "event_id": poll_id}}),
    );
    let got = wait_reply(&fake, &room, ask.as_str(), "got:").await;
    assert!(body(&got).contains("prod"), "{got}");
    fake.wait_for(&room, WAIT, "the poll's end", |e| {
        from_bot(&fake, e) && e["type"] == "org.matrix.msc3381.poll.end"
    })
    .await;
    assert!(fake.open_answers(&format!("{room}|{poll_id}")).is_empty());
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bang_commands_start_a_new_conversation_and_choose_the_model_in_a_thread() {
    let fake = FakeHomeserver::start().await;
    let alice = person("alice");
    let room = fake.create_room(&[&alice]);
    let bot = bot(&fake, Vec::new()).await;
    let hi = fake.inject(
        &room,
        &alice,
        "m.room.message",
        text("the codeword is kiwi"),
    );
    wait_reply(&fake, &room, hi.as_str(), "hello:").await;
    let in_the_thread = |body: &str| {
        json!({"msgtype": "m.text", "body": body,
               "m.relates_to": {"rel_type": "m.thread", "event_id": hi.as_str(),
                                "is_falling_back": true,
                                "m.in_reply_to": {"event_id": hi.as_str()}}})
    };
    // Element takes a leading `/` for its own commands: `!new` is the command on Matrix.
    fake.inject(&room, &alice, "m.room.message", in_the_thread("!new"));
    wait_reply(
        &fake,
        &room,
        hi.as_str(),
        frogbot_core::model::NEW_CONVERSATION_TEXT,
    )
    .await;
    let asked = bot.model.requests().len();
    assert_eq!(asked, 1, "!new is answered without the model");
    fake.inject(&room, &alice, "m.room.message", in_the_thread("!model"));
    let listed = wait_reply(&fake, &room, hi.as_str(), "Models offered:").await;
    assert!(body(&listed).contains("This thread: main."), "{listed}");
    fake.inject(
        &room,
        &alice,
        "m.room.message",
        in_the_thread("what was it?"),
    );
    wait_reply(&fake, &room, hi.as_str(), "hello: what was it?").await;
    let requests = bot.model.requests();
    let users = frogbot_testkit::user_texts(requests.last().unwrap()).len();
    assert_eq!(users, 1, "only the new conversation");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_reply_is_split_and_a_person_without_access_is_told_so() {
    let fake = FakeHomeserver::start().await;
    let alice = person("alice");
    let mallory = person("mallory");
    let room = fake.create_room(&[&alice]);
    let bot = bot(&fake, vec![format!("matrix:{alice}")]).await;

    let long = fake.inject(&room, &alice, "m.room.message", text("long please"));
    fake.wait_for(&room, WAIT, "two parts", |_| {
        fake.events(&room)
            .iter()
            .filter(|e| from_bot(&fake, e) && in_thread(e, long.as_str()))
            .count()
            >= 2
    })
    .await;
    for part in fake
        .events(&room)
        .iter()
        .filter(|e| from_bot(&fake, e) && in_thread(e, long.as_str()))
    {
        assert!(body(part).chars().count() <= MESSAGE_CHARS);
    }

    let dm = fake.create_room(&[&mallory]);
    let hello = fake.inject(&dm, &mallory, "m.room.message", text("hello"));
    let notice = fake
        .wait_for(&dm, WAIT, "the notice", |e| {
            from_bot(&fake, e) && in_thread(e, hello.as_str())
        })
        .await;
    assert_eq!(
        body(&notice),
        format!("{mallory}: {}", frogbot_matrix::channel::NOT_ALLOWED_TEXT)
    );
    assert_eq!(
        notice["content"]["m.mentions"]["user_ids"][0],
        mallory.as_str()
    );
    bot.stop().await;
}

/// Per-thread ordering: many threads at once are each answered once, in their own thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_threads_at_once_are_each_answered_once() {
    let fake = FakeHomeserver::start().await;
    let alice = person("alice");
    let room = fake.create_room(&[&alice]);
    let bot = bot(&fake, Vec::new()).await;
    let roots: Vec<_> = (0..10)
        .map(|i| fake.inject(&room, &alice, "m.room.message", text(&format!("burst {i}"))))
        .collect();
    for (i, root) in roots.iter().enumerate() {
        let r = wait_reply(&fake, &room, root.as_str(), "hello:").await;
        assert_eq!(body(&r), format!("hello: burst {i}"));
    }
    for root in &roots {
        let n = fake
            .events(&room)
            .iter()
            .filter(|e| from_bot(&fake, e) && in_thread(e, root.as_str()))
            .count();
        assert_eq!(n, 1);
    }
    bot.stop().await;
}

fn reactions_and_redactions(fake: &FakeHomeserver, room: &RoomId, target: &str) -> Vec<String> {
    // Each reaction as `react KEY`, each redaction as `redact KEY` (of the reaction it removes).
    let events = fake.events(room);
    let key_of = |id: &Value| {
        events
            .iter()
            .find(|e| &e["event_id"] == id)
            .and_then(|e| e["content"]["m.relates_to"]["key"].as_str())
            .unwrap_or("?")
            .to_owned()
    };
    events
        .iter()
        .filter(|e| from_bot(fake, e))
        .filter_map(|e| match e["type"].as_str()? {
            "m.reaction" if e["content"]["m.relates_to"]["event_id"] == target => {
                Some(format!("react {}", key_of(&e["event_id"])))
            }
            "m.room.redaction" => Some(format!("redact {}", key_of(&e["redacts"]))),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_replace_each_other_as_one_reaction_and_working_sends_typing() {
    use frogbot_core::agent::ChannelOutbox;
    use frogbot_core::model::{Ack, Thread};
    use frogbot_matrix::channel::MatrixOutbox;
    let fake = FakeHomeserver::start().await;
    let alice = person("alice");
    let room = fake.create_room(&[&alice]);
    let outbox = MatrixOutbox::new(fake.client().await);
    let said = fake.inject(&room, &alice, "m.room.message", text("hi"));
    let id = format!("{room}|{said}");
    let thread = Thread {
        id: id.clone(),
        platform: "matrix".into(),
        chat_id: "chat-1".into(),
    };
    for ack in [Ack::Seen, Ack::Working, Ack::Done] {
        outbox.ack(&thread, &id, ack).await.unwrap();
        assert_eq!(fake.bot_reactions(&id), [ack.emoji()], "{ack:?}");
    }
    assert_eq!(
        reactions_and_redactions(&fake, &room, said.as_str()),
        ["react 👀", "react ⏳", "redact 👀", "react ✅", "redact ⏳"]
    );
    outbox.working(&thread).await.unwrap();
    let typing = fake.typing(&room);
    assert_eq!(typing.len(), 1);
    assert_eq!(typing[0].1, json!({"typing": true, "timeout": 4000}));

    // A failed turn; a refused redaction does not fail the ack (the old reaction stays).
    let other = fake.inject(&room, &alice, "m.room.message", text("again"));
    let other_id = format!("{room}|{other}");
    outbox.ack(&thread, &other_id, Ack::Seen).await.unwrap();
    fake.refuse_redactions(true);
    outbox.ack(&thread, &other_id, Ack::Working).await.unwrap();
    assert_eq!(fake.bot_reactions(&other_id), ["👀", "⏳"]);
    fake.refuse_redactions(false);
    outbox.ack(&thread, &other_id, Ack::Failed).await.unwrap();
    assert_eq!(fake.bot_reactions(&other_id), ["👀", "❌"]);
    // A reaction to an event the room does not have is refused, and the ack fails.
    assert!(
        outbox
            .ack(&thread, &format!("{room}|$nowhere"), Ack::Seen)
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_marks_a_message_seen_working_then_done_after_the_reply() {
    let fake = FakeHomeserver::start().await;
    let alice = person("alice");
    let room = fake.create_room(&[&alice]);
    let bot = bot(&fake, Vec::new()).await;
    let hi = fake.inject(&room, &alice, "m.room.message", text("hi there"));
    let id = format!("{room}|{hi}");
    let answer = wait_reply(&fake, &room, hi.as_str(), "hello:").await;
    fake.wait_for(&room, WAIT, "Done", |_| fake.bot_reactions(&id) == ["✅"])
        .await;
    let events = fake.events(&room);
    let at = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred).unwrap();
    let hi_id = hi.as_str();
    let reaction = |key: &'static str| {
        move |e: &Value| {
            e["type"] == "m.reaction"
                && e["content"]["m.relates_to"]["event_id"] == hi_id
                && e["content"]["m.relates_to"]["key"] == key
        }
    };
    let (seen, working, done) = (
        at(&reaction("👀")),
        at(&reaction("⏳")),
        at(&reaction("✅")),
    );
    let reply = at(&|e: &Value| e["event_id"] == answer["event_id"]);
    assert!(
        seen < working && working < reply && reply < done,
        "{events:#?}"
    );
    assert_eq!(
        reactions_and_redactions(&fake, &room, hi.as_str()),
        ["react 👀", "react ⏳", "redact 👀", "react ✅", "redact ⏳"]
    );
    // Typing was shown while the turn ran (before the reply).
    let typing = fake.typing(&room);
    assert!(
        typing
            .iter()
            .any(|(before, body)| *before <= reply && body["typing"] == true),
        "{typing:?}"
    );
    bot.stop().await;
}

fn edits_of<'a>(events: &'a [Value], id: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| {
            e["content"]["m.relates_to"]["rel_type"] == "m.replace"
                && e["content"]["m.relates_to"]["event_id"] == id
        })
        .collect()
}

/// A streamed reply: one message in the thread as soon as the model writes, then `m.replace`
/// edits (whole new content, `* ` fallback) ending with the complete reply; Done after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_reply_is_a_message_then_replace_edits_ending_complete() {
    let fake = FakeHomeserver::start().await;
    let alice = person("alice");
    let room = fake.create_room(&[&alice]);
    let bot = bot(&fake, Vec::new()).await;
    let hi = fake.inject(&room, &alice, "m.room.message", text("stream please"));
    let id = format!("{room}|{hi}");
    fake.wait_for(&room, WAIT, "Done", |_| fake.bot_reactions(&id) == ["✅"])
        .await;
    let events = fake.events(&room);
    let posted: Vec<&Value> = events
        .iter()
        .filter(|e| from_bot(&fake, e) && in_thread(e, hi.as_str()))
        .collect();
    assert_eq!(posted.len(), 1, "one message: {posted:#?}");
    let first = posted[0];
    assert!(body(first).starts_with("w0"), "{first}");
    assert_eq!(first["content"]["format"], "org.matrix.custom.html");
    let first_id = first["event_id"].as_str().unwrap();
    let edits = edits_of(&events, first_id);
    assert!(
        !edits.is_empty() && edits.len() < 10,
        "{} edits",
        edits.len()
    );
    let full: String = (0..30).map(|i| format!("w{i} ")).collect::<String>() + "end.";
    let last = edits.last().unwrap();
    assert_eq!(last["content"]["m.new_content"]["body"], full);
    assert_eq!(
        last["content"]["m.new_content"]["formatted_body"],
        format!("<p>{full}</p>")
    );
    assert_eq!(last["content"]["body"], format!("* {full}"));
    assert!(last["content"]["m.new_content"]["m.relates_to"].is_null());
    // Ordered: the message, its edits, then Done.
    let at = |e: &Value| {
        events
            .iter()
            .position(|x| x["event_id"] == e["event_id"])
            .unwrap()
    };
    let done = events
        .iter()
        .position(|e| e["type"] == "m.reaction" && e["content"]["m.relates_to"]["key"] == "✅")
        .unwrap();
    assert!(at(first) < at(edits[0]) && at(last) < done);
    bot.stop().await;
}

/// A mention in the middle of a thread the bot has not seen: the model gets the thread's earlier
/// messages, with the senders' display names (their user id when they have none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_mid_thread_gives_the_model_the_earlier_messages_with_names() {
    let fake = FakeHomeserver::start().await;
    let alice = person("alice");
    let bob = person("bob");
    let room = fake.create_room(&[&alice, &bob]);
    fake.set_display_name(&room, &bob, "Bob Builder");
    let bot = bot(&fake, Vec::new()).await;
    let root = fake.inject(&room, &alice, "m.room.message", text("where should we go?"));
    let in_root = |body: &str| {
        json!({"msgtype": "m.text", "body": body,
            "m.relates_to": {"rel_type": "m.thread", "event_id": root}})
    };
    fake.inject(&room, &bob, "m.room.message", in_root("Lisbon, surely"));
    let mut mention = in_root(&format!("{} what do you think?", fake.bot()));
    mention["m.mentions"] = json!({"user_ids": [fake.bot()]});
    fake.inject(&room, &alice, "m.room.message", mention);
    wait_reply(&fake, &room, root.as_str(), "hello:").await;
    let requests = bot.model.requests();
    let seen = format!("{:?}", requests[0].messages);
    assert!(
        seen.contains("@alice:fake.test: where should we go?"),
        "{seen}"
    );
    assert!(seen.contains("Bob Builder: Lisbon, surely"), "{seen}");
    assert!(
        seen.find("Lisbon").unwrap() < seen.find("what do you think").unwrap(),
        "{seen}"
    );
    bot.stop().await;
}

/// Regression: a DM whose `/members` call failed dropped the person's message (the room's size
/// was not known, it was not marked direct, the message mentioned no one). Now `/members` is
/// tried again, and a room not known to be a group counts as a DM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_whose_members_cannot_be_listed_is_still_answered() {
    let fake = FakeHomeserver::start().await;
    let alice = person("alice");
    let room = fake.create_room(&[&alice]);
    fake.fail_members(&room, true);
    let bot = bot(&fake, Vec::new()).await;
    let hi = fake.inject(&room, &alice, "m.room.message", text("hi there"));
    let answer = wait_reply(&fake, &room, hi.as_str(), "hello:").await;
    assert_eq!(body(&answer), "hello: hi there");
    bot.stop().await;
}

/// Issue 37 on Matrix: an agent's conversation with a person is a thread the agent started in
/// their DM room (on a root event of its own). The person's top-level messages there — each its
/// own thread, as before — go to the model; their replies in the agent's thread go to the agent's
/// inbox and get no model reply; the agent's messages appear in its thread. (The fake has no
/// `m.direct`, so the DM room is given as the room; the person form, which finds that room and
/// posts the same root, is covered against Synapse in tests/synapse.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_conversation_in_a_dm_is_its_own_thread_beside_the_persons_chat_with_the_model() {
    use frogbot_core::agent::{AgentMessage, AgentPlace, ChannelTarget};
    use frogbot_core::model::UserId;
    let fake = FakeHomeserver::start().await;
    let alice = person("alice");
    let dm = fake.create_room(&[&alice]);
    let bot = bot(&fake, Vec::new()).await;
    let model_saw = |t: &str| {
        bot.model.requests().iter().any(|r| {
            r.messages
                .iter()
                .any(|m| matches!(m, ModelMessage::User { text } if text.contains(t)))
        })
    };

    // Alice already talks with the model in her DM room: her top-level message is a thread.
    let hi = fake.inject(&dm, &alice, "m.room.message", text("hi there"));
    let answer = wait_reply(&fake, &dm, hi.as_str(), "hello:").await;
    assert_eq!(body(&answer), "hello: hi there");

    // An agent opens a conversation with alice: a root event of its own in her DM room.
    let agent = UserId::new("deployer");
    let chat = bot
        .engine
        .agents()
        .open_chat(
            Some(&agent),
            AgentPlace::Channel {
                platform: frogbot_matrix::PLATFORM.into(),
                place: ChannelTarget::Thread(dm.to_string()),
            },
            "Deploy v2 today?",
            "k1",
        )
        .await
        .unwrap();
    let thread = chat.channel.as_ref().unwrap().thread.clone();
    let (room, root) = thread.split_once('|').expect("a thread in a room");
    assert_eq!(room, dm.as_str());
    let room = dm.clone();
    let root = root.to_owned();
    let root_event = fake.event(&root).expect("the root event");
    assert_eq!(root_event["sender"], fake.bot().as_str());
    assert_eq!(body(&root_event), "Deploy v2 today?");
    assert_ne!(
        root,
        hi.as_str(),
        "not the person's conversation with the model"
    );

    // (c) The agent's message appears in its thread.
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
    fake.wait_for(&room, WAIT, "the agent's message", |e| {
        from_bot(&fake, e) && in_thread(e, &root) && body(e).contains("Shall I go ahead?")
    })
    .await;

    // (b) A reply in the agent's thread goes to the agent's inbox.
    let reply = json!({"msgtype": "m.text", "body": "yes, go",
        "m.relates_to": {"rel_type": "m.thread", "event_id": root,
                         "is_falling_back": true, "m.in_reply_to": {"event_id": root}}});
    fake.inject(&room, &alice, "m.room.message", reply);
    let items = bot
        .engine
        .agents()
        .inbox_wait(Some(&agent), None, 50, Duration::from_secs(WAIT))
        .await
        .unwrap();
    let texts: Vec<String> = items.iter().map(|i| i.message.text()).collect();
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert!(texts[0].contains("yes, go"), "{texts:?}");
    assert_eq!(items[0].chat_id, chat.chat_id);

    // (a) Another top-level message goes to the model, not to the agent; the reply above got no
    // model turn and no model reply in the agent's thread.
    let more = fake.inject(&room, &alice, "m.room.message", text("how are frogs"));
    wait_reply(&fake, &room, more.as_str(), "hello:").await;
    assert!(model_saw("how are frogs"));
    assert!(!model_saw("yes, go"));
    assert!(
        bot.engine
            .agents()
            .inbox(Some(&agent), None, 50)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        !fake
            .events(&room)
            .iter()
            .any(|e| from_bot(&fake, e) && in_thread(e, &root) && body(e).starts_with("hello:")),
        "no model reply in the agent's thread"
    );
    bot.stop().await;
}
