//! Every input kind end to end against the fake homeserver (`frogbot_matrix::testing::FakeHomeserver`):
//! the whole adapter (`channel::connect`, the sync loop, matrix-sdk's client) with FrogBot's engine
//! on SQLite and a scripted model asking questions of each kind. What the bot draws (a message
//! with the question and its one-line hint, `body` and HTML, ✅ / ❌ reactions for a toggle and a
//! confirm, the expiry line), how people answer (reactions, thread replies, replies to one
//! input's message), a validation failure told back with its reason, and the settled view.

#![recursion_limit = "256"]

use std::time::Duration;

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{ModelMessage, ModelRequest};
use frogbot_matrix::channel::{Config, Login, MatrixAdapter, connect};
use frogbot_matrix::testing::{BOT_PASSWORD, FakeHomeserver};
use matrix_sdk::ruma::{OwnedUserId, RoomId};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: u64 = 30;

/// The questions the scripted model asks, by the word the person typed.
fn questions(text: &str) -> Option<Value> {
    let confirm = json!({"header": "Go", "question": "Deploy v1.4?", "kind": "confirm",
        "label": "Approve", "danger": true});
    let toggle = json!({"header": "Notify", "question": "Tell the team?", "kind": "toggle",
        "label": "Notify"});
    let number = json!({"header": "Pods", "question": "How many?", "kind": "number_input",
        "min": 1, "max": 10, "step": 1, "unit": "pods"});
    let text_input = json!({"header": "Why", "question": "Reason?", "kind": "text_input",
        "maxLength": 10, "placeholder": "because"});
    Some(match text {
        "confirm" => json!({"questions": [confirm]}),
        "toggle" => json!({"questions": [toggle]}),
        "number" => json!({"questions": [number]}),
        "text" => json!({"questions": [text_input]}),
        "several" => {
            let mut why = text_input;
            why["required"] = json!(false);
            json!({"questions": [
                confirm, why, number, toggle,
                {"header": "Env", "question": "Where?",
                 "options": [{"label": "staging"}, {"label": "prod"}]}
            ], "expiresInSeconds": 3600})
        }
        "multi" => json!({"questions": [{"header": "Regions", "question": "Which **ones**?",
            "multiple": true, "options": [{"label": "eu"}, {"label": "us"}, {"label": "asia"}]}]}),
        "expire" => {
            let mut pods = number;
            pods["default"] = json!(3);
            json!({"questions": [pods], "expiresInSeconds": 1})
        }
        _ => return None,
    })
}

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
        let text = text
            .rsplit_once("\n\n")
            .map_or(text.clone(), |(_, t)| t.to_owned());
        let text = text
            .split_once(": ")
            .map_or(text.clone(), |(_, t)| t.to_owned());
        match questions(text.trim()) {
            Some(input) => call(&format!("c{}", req.messages.len()), "question", input),
            None => reply(&format!("hello: {text}")),
        }
    })
}

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
    let engine = frogbot_testkit::engine_with(frogbot_testkit::open_store(&db.url).await, model())
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

/// A fake homeserver, a DM with alice, the bot running.
async fn setup() -> (
    FakeHomeserver,
    OwnedUserId,
    matrix_sdk::ruma::OwnedRoomId,
    Bot,
) {
    let fake = FakeHomeserver::start().await;
    let alice = OwnedUserId::try_from("@alice:fake.test").unwrap();
    let room = fake.create_room(&[&alice]);
    let bot = bot(&fake).await;
    (fake, alice, room, bot)
}

fn text(body: &str) -> Value {
    json!({"msgtype": "m.text", "body": body})
}

/// A message in the thread on `root` (not addressed to any message of it).
fn in_thread(body: &str, root: &str) -> Value {
    json!({"msgtype": "m.text", "body": body,
           "m.relates_to": {"rel_type": "m.thread", "event_id": root, "is_falling_back": true,
                            "m.in_reply_to": {"event_id": root}}})
}

/// A reply in the thread on `root` to the message `to`.
fn reply_to(body: &str, root: &str, to: &str) -> Value {
    json!({"msgtype": "m.text", "body": body,
           "m.relates_to": {"rel_type": "m.thread", "event_id": root, "is_falling_back": false,
                            "m.in_reply_to": {"event_id": to}}})
}

/// A reaction with `key` on `to` (MSC2677 / the spec's `m.annotation`).
fn reaction(to: &str, key: &str) -> Value {
    json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": to, "key": key}})
}

fn from_bot(fake: &FakeHomeserver, e: &Value) -> bool {
    e["sender"] == fake.bot().as_str()
}

fn body(e: &Value) -> &str {
    e["content"]["body"].as_str().unwrap_or("")
}

fn html(e: &Value) -> &str {
    e["content"]["formatted_body"].as_str().unwrap_or("")
}

fn threaded(e: &Value, root: &str) -> bool {
    e["content"]["m.relates_to"]["rel_type"] == "m.thread"
        && e["content"]["m.relates_to"]["event_id"] == root
}

/// The bot's question messages (polls and messages, not notices or replies) in the thread on
/// `root`, once there are `n`.
async fn questions_in(fake: &FakeHomeserver, room: &RoomId, root: &str, n: usize) -> Vec<Value> {
    let asked = |e: &Value| {
        from_bot(fake, e)
            && threaded(e, root)
            && (e["type"] == "m.poll.start"
                || e["type"] == "org.matrix.msc3381.poll.start"
                || (e["content"]["msgtype"] == "m.text" && !body(e).starts_with("got:")))
    };
    fake.wait_for(room, WAIT, "the questions", |_| {
        fake.events(room).iter().filter(|e| asked(e)).count() >= n
    })
    .await;
    fake.events(room).into_iter().filter(|e| asked(e)).collect()
}

async fn got(fake: &FakeHomeserver, room: &RoomId, root: &str) -> Value {
    fake.wait_for(room, WAIT, "the answer reaching the model", |e| {
        from_bot(fake, e) && threaded(e, root) && body(e).starts_with("got:")
    })
    .await
}

/// The bot's notice to `user` containing `wanted`.
async fn notice(fake: &FakeHomeserver, room: &RoomId, user: &OwnedUserId, wanted: &str) -> Value {
    fake.wait_for(room, WAIT, wanted, |e| {
        from_bot(fake, e)
            && e["content"]["msgtype"] == "m.notice"
            && e["content"]["m.mentions"]["user_ids"][0] == user.as_str()
            && body(e).contains(wanted)
    })
    .await
}

/// The settled edit of the message `id`.
async fn settled(fake: &FakeHomeserver, room: &RoomId, id: &str) -> Value {
    fake.wait_for(room, WAIT, "the settled view", |e| {
        from_bot(fake, e)
            && e["content"]["m.relates_to"]["rel_type"] == "m.replace"
            && e["content"]["m.relates_to"]["event_id"] == id
            && {
                let new = &e["content"]["m.new_content"];
                let text = new["body"]
                    .as_str()
                    .or_else(|| new["m.text"][0]["body"].as_str())
                    .unwrap_or("");
                text.contains("Answered") || text.contains("Expired")
            }
    })
    .await
}

fn id(e: &Value) -> &str {
    e["event_id"].as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_is_a_message_with_a_check_reaction_that_answers_with_its_label() {
    let (fake, alice, room, bot) = setup().await;
    let ask = fake.inject(&room, &alice, "m.room.message", text("confirm"));
    let root = ask.as_str();
    let q = questions_in(&fake, &room, root, 1).await.remove(0);
    assert_eq!(q["type"], "m.room.message");
    assert_eq!(
        body(&q),
        "⚠️ Go: Deploy v1.4?\nReact ✅, or reply \"Approve\" to confirm.\nReply skip to skip this question."
    );
    assert_eq!(q["content"]["format"], "org.matrix.custom.html");
    assert!(
        html(&q)
            .starts_with("⚠️ <b>Go</b>: Deploy v1.4?<br>React ✅, or reply &quot;Approve&quot;"),
        "{q}"
    );
    let message = format!("{room}|{}", id(&q));
    fake.wait_for(&room, WAIT, "the bot's ✅", |_| {
        fake.bot_reactions(&message) == ["✅"]
    })
    .await;
    // Another key is no answer; ✅ confirms.
    fake.inject(&room, &alice, "m.reaction", reaction(id(&q), "😂"));
    fake.inject(&room, &alice, "m.reaction", reaction(id(&q), "✅"));
    let answer = got(&fake, &room, root).await;
    assert!(body(&answer).contains("Approve"), "{answer}");
    let done = settled(&fake, &room, id(&q)).await;
    let new = &done["content"]["m.new_content"];
    assert!(
        new["body"]
            .as_str()
            .unwrap()
            .ends_with("\n✅ Answered by @alice:fake.test: Approve"),
        "{done}"
    );
    assert!(
        new["formatted_body"]
            .as_str()
            .unwrap()
            .ends_with("<br><b>✅ Answered by @alice:fake.test: Approve</b>"),
        "{done}"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toggle_is_answered_by_a_cross_reaction_or_a_reply() {
    let (fake, alice, room, bot) = setup().await;
    let ask = fake.inject(&room, &alice, "m.room.message", text("toggle"));
    let root = ask.as_str();
    let q = questions_in(&fake, &room, root, 1).await.remove(0);
    assert!(
        body(&q).contains("\nReact ✅ or ❌, or reply yes or no (Notify).\n"),
        "{q}"
    );
    let message = format!("{room}|{}", id(&q));
    fake.wait_for(&room, WAIT, "the bot's ✅ ❌", |_| {
        fake.bot_reactions(&message) == ["✅", "❌"]
    })
    .await;
    fake.inject(&room, &alice, "m.reaction", reaction(id(&q), "❌"));
    let answer = got(&fake, &room, root).await;
    assert!(body(&answer).contains(r#"["off"]"#), "{answer}");
    let done = settled(&fake, &room, id(&q)).await;
    assert!(
        done["content"]["m.new_content"]["body"]
            .as_str()
            .unwrap()
            .ends_with(": Notify — off"),
        "{done}"
    );

    // A reply "yes" in the thread turns the next one on.
    let ask = fake.inject(&room, &alice, "m.room.message", text("toggle"));
    let root = ask.as_str();
    let q = questions_in(&fake, &room, root, 1).await.remove(0);
    fake.inject(&room, &alice, "m.room.message", in_thread("Yes", root));
    let answer = got(&fake, &room, root).await;
    assert!(body(&answer).contains(r#"["on"]"#), "{answer}");
    let done = settled(&fake, &room, id(&q)).await;
    assert!(
        done["content"]["m.new_content"]["body"]
            .as_str()
            .unwrap()
            .ends_with(": Notify — on"),
        "{done}"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_number_out_of_range_is_refused_with_the_reason_and_a_valid_one_answers() {
    let (fake, alice, room, bot) = setup().await;
    let ask = fake.inject(&room, &alice, "m.room.message", text("number"));
    let root = ask.as_str();
    let q = questions_in(&fake, &room, root, 1).await.remove(0);
    assert_eq!(
        body(&q),
        "Pods: How many?\nReply with a number from 1 to 10 (pods).\nReply skip to skip this question."
    );
    // No reactions on a number's message.
    assert!(fake.bot_reactions(&format!("{room}|{}", id(&q))).is_empty());

    let eleven = fake.inject(&room, &alice, "m.room.message", in_thread("11", root));
    let told = notice(&fake, &room, &alice, "enter a number from 1 to 10.").await;
    assert_eq!(
        body(&told),
        "@alice:fake.test: That answer was not taken: enter a number from 1 to 10."
    );
    assert_eq!(
        told["content"]["m.relates_to"]["m.in_reply_to"]["event_id"],
        eleven.as_str()
    );
    fake.inject(&room, &alice, "m.room.message", in_thread("2.5", root));
    notice(&fake, &room, &alice, "in steps of 1.").await;
    // Text addressed to the question's message is told what is wanted; in the thread it is
    // the conversation going on.
    fake.inject(
        &room,
        &alice,
        "m.room.message",
        reply_to("lots", root, id(&q)),
    );
    let lots = fake
        .wait_for(&room, WAIT, "the notice to lots", |e| {
            from_bot(&fake, e)
                && e["content"]["msgtype"] == "m.notice"
                && body(e).ends_with("not taken: enter a number from 1 to 10.")
                && e["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] != eleven.as_str()
        })
        .await;
    assert!(body(&lots).starts_with("@alice:fake.test: "), "{lots}");

    fake.inject(&room, &alice, "m.room.message", in_thread("4 pods", root));
    let answer = got(&fake, &room, root).await;
    assert!(body(&answer).contains(r#"["4"]"#), "{answer}");
    let done = settled(&fake, &room, id(&q)).await;
    assert!(
        done["content"]["m.new_content"]["body"]
            .as_str()
            .unwrap()
            .ends_with(": 4 pods"),
        "{done}"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_too_long_is_refused_with_the_reason_and_a_short_one_answers() {
    let (fake, alice, room, bot) = setup().await;
    let ask = fake.inject(&room, &alice, "m.room.message", text("text"));
    let root = ask.as_str();
    let q = questions_in(&fake, &room, root, 1).await.remove(0);
    assert_eq!(
        body(&q),
        "Why: Reason?\n(because)\nReply with your answer (at most 10 characters).\nReply skip to skip this question."
    );
    fake.inject(
        &room,
        &alice,
        "m.room.message",
        reply_to("far too long an answer", root, id(&q)),
    );
    notice(
        &fake,
        &room,
        &alice,
        "That answer was not taken: the text is longer than 10 characters.",
    )
    .await;
    fake.inject(&room, &alice, "m.room.message", in_thread("<short>", root));
    let answer = got(&fake, &room, root).await;
    assert!(body(&answer).contains("<short>"), "{answer}");
    let done = settled(&fake, &room, id(&q)).await;
    let new = &done["content"]["m.new_content"];
    assert!(
        new["body"].as_str().unwrap().ends_with(": <short>"),
        "{done}"
    );
    // The person's text is escaped in the HTML.
    assert!(
        new["formatted_body"]
            .as_str()
            .unwrap()
            .ends_with(": &lt;short&gt;</b>"),
        "{done}"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_inputs_are_answered_one_after_another_and_show_the_expiry_line() {
    let (fake, alice, room, bot) = setup().await;
    let ask = fake.inject(&room, &alice, "m.room.message", text("several"));
    let root = ask.as_str();
    // The inputs are asked one after another: each step posts the next input's message, with its
    // own hint and the expiry line (in `body` and in the HTML).
    let open_line = |q: &Value| {
        let lines: Vec<&str> = body(q).lines().collect();
        let n = lines.len();
        let line = lines[n - 2].to_owned();
        assert!(
            line.starts_with("open until ") && line.ends_with(" UTC"),
            "{q}"
        );
        assert!(html(q).contains(&format!("<br><i>{line}</i><br>")), "{q}");
        line
    };
    let go = questions_in(&fake, &room, root, 1).await.remove(0);
    let open = open_line(&go);
    let go_message = format!("{room}|{}", id(&go));
    fake.wait_for(&room, WAIT, "the bot's ✅", |_| {
        fake.bot_reactions(&go_message) == ["✅"]
    })
    .await;
    fake.inject(&room, &alice, "m.reaction", reaction(id(&go), "✅"));

    let why = questions_in(&fake, &room, root, 2).await.remove(1);
    assert_eq!(open_line(&why), open);
    assert!(
        body(&why).contains("\nOptional: reply - to leave it empty.\n"),
        "{why}"
    );
    fake.inject(&room, &alice, "m.room.message", in_thread("-", root));

    let pods = questions_in(&fake, &room, root, 3).await.remove(2);
    assert_eq!(open_line(&pods), open);
    // A number out of range is refused; the set stays where it is.
    fake.inject(&room, &alice, "m.room.message", in_thread("70", root));
    notice(&fake, &room, &alice, "enter a number from 1 to 10.").await;
    fake.inject(&room, &alice, "m.room.message", in_thread("7", root));

    let notify = questions_in(&fake, &room, root, 4).await.remove(3);
    assert_eq!(open_line(&notify), open);
    fake.inject(&room, &alice, "m.room.message", in_thread("no", root));

    let env = questions_in(&fake, &room, root, 5).await.remove(4);
    // The default poll events: the unstable ones Element renders, with a plain `body` too.
    assert_eq!(env["type"], "org.matrix.msc3381.poll.start");
    let asked =
        env["content"]["org.matrix.msc3381.poll.start"]["question"]["org.matrix.msc1767.text"]
            .as_str()
            .unwrap();
    assert_eq!(asked, format!("Question 5 of 5 — Env: Where? ({open})"));
    let fallback = env["content"]["org.matrix.msc1767.text"].as_str().unwrap();
    assert!(fallback.contains(&format!("\n{open}\n")), "{fallback}");
    assert_eq!(body(&env), fallback);
    // Drawn at the set's fourth revision: a response to it is of that revision.
    let shown = fake.open_answers(&format!("{room}|{}", id(&env)));
    assert_eq!(shown[1].0, "r4o1");
    fake.inject(
        &room,
        &alice,
        "org.matrix.msc3381.poll.response",
        json!({"org.matrix.msc3381.poll.response": {"answers": [shown[1].0]},
               "m.relates_to": {"rel_type": "m.reference", "event_id": id(&env)}}),
    );
    let answer = got(&fake, &room, root).await;
    for part in [
        r#"["prod"]"#,
        r#"["Approve"]"#,
        r#""selected":[]"#,
        r#"["7"]"#,
        r#"["off"]"#,
    ] {
        assert!(body(&answer).contains(part), "{part} in {answer}");
    }
    for (q, end) in [
        (&go, ": Approve"),
        (&why, ": —"),
        (&pods, ": 7 pods"),
        (&notify, ": Notify — off"),
    ] {
        let done = settled(&fake, &room, id(q)).await;
        let new = done["content"]["m.new_content"]["body"].as_str().unwrap();
        assert!(new.ends_with(end), "{new}");
        assert!(!new.contains("open until"), "{new}");
    }
    let done = settled(&fake, &room, id(&env)).await;
    let question = done["content"]["m.new_content"]["org.matrix.msc3381.poll.start"]["question"]
        ["org.matrix.msc1767.text"]
        .as_str()
        .unwrap();
    assert_eq!(question, "Question 5 of 5 — Env: Where?");
    // The settled poll's text says how it ended, not how to vote.
    let text = done["content"]["m.new_content"]["body"].as_str().unwrap();
    assert!(
        text.ends_with("\n✅ Answered by @alice:fake.test: prod"),
        "{text}"
    );
    assert!(!text.contains("Vote in the poll"), "{text}");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_input_shows_expired_with_its_default() {
    let (fake, alice, room, bot) = setup().await;
    let ask = fake.inject(&room, &alice, "m.room.message", text("expire"));
    let root = ask.as_str();
    let q = questions_in(&fake, &room, root, 1).await.remove(0);
    assert!(body(&q).contains("\nopen until "), "{q}");
    let done = settled(&fake, &room, id(&q)).await;
    let new = done["content"]["m.new_content"]["body"].as_str().unwrap();
    assert!(new.ends_with("\n⌛ Expired — default: 3 pods"), "{new}");
    assert!(!new.contains("open until"), "{new}");
    let answer = got(&fake, &room, root).await;
    assert!(body(&answer).contains(r#"["3"]"#), "{answer}");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multiple_choice_poll_takes_clicks_as_element_sends_them_and_answers_on_done() {
    let (fake, alice, room, bot) = setup().await;
    let ask = fake.inject(&room, &alice, "m.room.message", text("multi"));
    let root = ask.as_str();
    let q = questions_in(&fake, &room, root, 1).await.remove(0);
    assert_eq!(q["type"], "org.matrix.msc3381.poll.start");
    let message = format!("{room}|{}", id(&q));
    fake.wait_for(&room, WAIT, "the bot's ✅", |_| {
        fake.bot_reactions(&message) == ["✅"]
    })
    .await;
    let shown = fake.open_answers(&message);
    // Element sends the whole selection at every click: [eu], then [eu, asia].
    for picked in [vec![0], vec![0, 2]] {
        let ids: Vec<&str> = picked.iter().map(|&i| shown[i].0.as_str()).collect();
        fake.inject(
            &room,
            &alice,
            "org.matrix.msc3381.poll.response",
            json!({"org.matrix.msc3381.poll.response": {"answers": ids},
                   "m.relates_to": {"rel_type": "m.reference", "event_id": id(&q)}}),
        );
    }
    // ✅ on the poll sends the selection (handled in order with the poll's responses; a reply
    // `done` is a thread message, handled in the thread's own queue, see tests/questions.rs).
    fake.inject(&room, &alice, "m.reaction", reaction(id(&q), "✅"));
    let answer = got(&fake, &room, root).await;
    assert!(body(&answer).contains(r#"["eu","asia"]"#), "{answer}");
    let done = settled(&fake, &room, id(&q)).await;
    // The poll was never redrawn while picking (that would clear Element's selection): its one
    // edit is the settled view.
    let edits = fake
        .events(&room)
        .into_iter()
        .filter(|e| {
            e["content"]["m.relates_to"]["rel_type"] == "m.replace"
                && e["content"]["m.relates_to"]["event_id"] == id(&q)
        })
        .count();
    assert_eq!(edits, 1, "{done}");
    let seen = fake.person_view(&format!("{room}|{root}"));
    let poll = seen
        .iter()
        .find(|m| m.id == id(&q))
        .and_then(|m| m.poll.clone())
        .unwrap();
    assert_eq!(poll.question, "Regions: Which ones?");
    assert_eq!(
        poll.votes,
        [(alice.to_string(), vec!["eu".to_owned(), "asia".to_owned()])]
    );
    assert_eq!(
        poll.ended.as_deref(),
        Some("✅ Answered by @alice:fake.test: eu, asia")
    );
    bot.stop().await;
}
