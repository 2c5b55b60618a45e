//! What a person sees in a Matrix room (issue 38), against the fake homeserver with FrogBot's
//! engine: a long streamed reply complete within seconds (no `413 M_TOO_LARGE`, no stub left),
//! its first message a sentence, the typing notice off after the reply, and Element's mention
//! pill stripped before commands and the model.

#![recursion_limit = "256"]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, call, reply};
use frogbot_core::agent::{ModelEvent, ModelMessage, ModelRequest};
use frogbot_matrix::channel::{Config, Login, MatrixAdapter, connect};
use frogbot_matrix::testing::{BOT_PASSWORD, FakeHomeserver, assert_golden, transcript};
use matrix_sdk::ruma::{OwnedUserId, RoomId};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: u64 = 30;

/// The 40,000-character reply: "got: ", then sentences, a paragraph break every eight.
fn long_reply() -> String {
    let mut out = String::from("got: ");
    let mut i = 0;
    while out.chars().count() < 40_000 {
        out.push_str(&format!(
            "Sentence {i} of the long reply has a few plain words in it."
        ));
        out.push_str(if i % 8 == 7 { "\n\n" } else { " " });
        i += 1;
    }
    out.trim_end().to_owned()
}

/// `long`: "got: " first, then the long reply in 400-character deltas; `slow`: 200 deltas 100 ms
/// apart; `ask`: a question (then "got: " and its result); anything else: "hello: " and the
/// prompt. Every prompt's last user text is kept.
fn model(prompts: Arc<Mutex<Vec<String>>>) -> ScriptedModel {
    ScriptedModel::new(move |req: &ModelRequest| {
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
        prompts.lock().unwrap().push(text.clone());
        if text.ends_with("long") {
            let mut e = vec![
                ScriptEvent::Event(ModelEvent::TextDelta("got: ".into())),
                ScriptEvent::Pause(Duration::from_millis(300)),
            ];
            let full = long_reply();
            let rest: Vec<char> = full["got: ".len()..].chars().collect();
            for chunk in rest.chunks(400) {
                e.push(ScriptEvent::Event(ModelEvent::TextDelta(
                    chunk.iter().collect(),
                )));
                e.push(ScriptEvent::Pause(Duration::from_millis(5)));
            }
            e.extend(reply(""));
            return e;
        }
        if text.ends_with("slow") {
            let mut e = Vec::new();
            for i in 0..200 {
                e.push(ScriptEvent::Event(ModelEvent::TextDelta(format!("s{i}. "))));
                e.push(ScriptEvent::Pause(Duration::from_millis(100)));
            }
            e.extend(reply("end."));
            return e;
        }
        if text.ends_with("fail") {
            return vec![ScriptEvent::Fail("the provider answered 500".into())];
        }
        if text.ends_with("wait") {
            // A turn that runs a while (a message sent meanwhile is queued).
            let mut e = vec![ScriptEvent::Pause(Duration::from_millis(1500))];
            e.extend(reply("done waiting."));
            return e;
        }
        if text.ends_with("ask") {
            return call(
                &format!("c{}", req.messages.len()),
                "question",
                json!({"questions": [{"header": "Env", "question": "Where?",
                    "options": [{"label": "staging"}, {"label": "prod"}]}]}),
            );
        }
        reply(&format!("hello: {text}"))
    })
}

struct Bot {
    engine: frogbot_core::agent::Engine,
    _adapter: MatrixAdapter,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    worker: tokio::task::JoinHandle<()>,
    _store: tempfile::TempDir,
    _db: frogbot_testkit::TestDb,
}

async fn bot(fake: &FakeHomeserver, prompts: Arc<Mutex<Vec<String>>>) -> Bot {
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
    let engine =
        frogbot_testkit::engine_with(frogbot_testkit::open_store(&db.url).await, model(prompts))
            .with_channel(adapter.channel());
    let shutdown = CancellationToken::new();
    let worker = engine.spawn_worker(Duration::from_millis(100));
    let task = adapter
        .start(engine.handle(), shutdown.clone())
        .expect("a sync loop");
    Bot {
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

fn from_bot(fake: &FakeHomeserver, e: &Value) -> bool {
    e["sender"] == fake.bot().as_str()
}

fn in_thread(e: &Value, root: &str) -> bool {
    e["content"]["m.relates_to"]["rel_type"] == "m.thread"
        && e["content"]["m.relates_to"]["event_id"] == root
}

/// The bot's messages in the thread on `root` (not edits), in order.
fn thread_messages(fake: &FakeHomeserver, room: &RoomId, root: &str) -> Vec<Value> {
    fake.events(room)
        .into_iter()
        .filter(|e| from_bot(fake, e) && e["type"] == "m.room.message" && in_thread(e, root))
        .collect()
}

/// What each of those messages shows now (after its edits).
fn visible(fake: &FakeHomeserver, room: &RoomId, root: &str) -> Vec<String> {
    thread_messages(fake, room, root)
        .iter()
        .map(|e| fake.shown_text(&format!("{room}|{}", e["event_id"].as_str().unwrap())))
        .collect()
}

fn words(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

/// Element's mention of the bot (display name `FrogBot Helper`) before `text`: the name and `: `
/// in `body`, a pill in `formatted_body`, the bot in `m.mentions`.
fn element_mention(fake: &FakeHomeserver, text: &str) -> Value {
    let bot = fake.bot().as_str();
    json!({
        "msgtype": "m.text",
        "body": format!("FrogBot Helper: {text}"),
        "format": "org.matrix.custom.html",
        "formatted_body": format!("<a href=\"https://matrix.to/#/{bot}\">FrogBot Helper</a>: {text}"),
        "m.mentions": {"user_ids": [bot]},
    })
}

/// The same in the thread on `root` (as Element sends a thread reply).
fn element_mention_in_thread(fake: &FakeHomeserver, text: &str, root: &str) -> Value {
    let mut c = element_mention(fake, text);
    c["m.relates_to"] = json!({"rel_type": "m.thread", "event_id": root,
        "is_falling_back": true, "m.in_reply_to": {"event_id": root}});
    c
}

/// Runs the long reply in a DM and checks what the person sees; returns how long after the
/// model's last delta (about: the start of the turn plus the model's script) the text was whole.
async fn long_reply_is_whole(fake: &FakeHomeserver, golden_name: Option<&str>) {
    let alice = person("alice");
    let room = fake.create_room(&[&alice]);
    let bot = bot(fake, Arc::default()).await;
    let started = Instant::now();
    let hi = fake.inject(
        &room,
        &alice,
        "m.room.message",
        json!({"msgtype": "m.text", "body": "long"}),
    );
    let root = hi.as_str();
    let full = long_reply();
    // Complete within seconds (the model writes for ~1 s): not after the 120 s delivery grace.
    fake.wait_for(&room, 20, "the whole reply visible", |_| {
        words(&visible(fake, &room, root).join("\n")) == words(&full)
    })
    .await;
    eprintln!("whole after {:?}", started.elapsed());
    let shown = visible(fake, &room, root);
    assert!(
        shown.len() >= 2,
        "split in several messages: {}",
        shown.len()
    );
    // No stub: every message but the last is a full part of the reply.
    for (i, s) in shown.iter().enumerate().take(shown.len() - 1) {
        assert!(s.chars().count() > 1_000, "message {i} is a stub: {s:?}");
    }
    // The first message (the one notified) starts with a sentence, not the fragment "got:".
    let first = thread_messages(fake, &room, root)[0]["content"]["body"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        first.starts_with("got: Sentence 0 of the long reply has a few plain words in it."),
        "{first:?}"
    );
    // The reply's end: Done, then the typing notice off.
    let id = format!("{room}|{hi}");
    fake.wait_for(&room, WAIT, "Done", |_| fake.bot_reactions(&id) == ["✅"])
        .await;
    fake.wait_for(&room, WAIT, "typing off", |_| {
        fake.typing(&room)
            .last()
            .is_some_and(|(_, b)| b["typing"] == false)
    })
    .await;
    if let Some(name) = golden_name {
        golden(fake, &room, root, name);
    }
    bot.stop().await;
}

/// A 40,000-character streamed reply: each message sized so its edits fit (Synapse's 65,536
/// bytes), frozen at a clean cut and continued in new messages; whole within seconds, nothing
/// refused, the first message a sentence, typing off at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_40k_streamed_reply_is_whole_within_seconds_with_a_sentence_first_and_typing_off() {
    let fake = FakeHomeserver::start().await;
    long_reply_is_whole(&fake, Some("reply_40k")).await;
    assert_eq!(fake.refused_too_large(), 0, "sized before sending");
}

/// A homeserver refusing smaller events (an encrypted room's ciphertext reaches the limit
/// sooner): the `413 M_TOO_LARGE` is handled by cutting smaller at once, not left to the
/// delivery grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_413_is_handled_by_cutting_smaller_at_once() {
    let fake = FakeHomeserver::start().await;
    fake.set_max_event_bytes(Some(12_000));
    long_reply_is_whole(&fake, None).await;
    assert!(fake.refused_too_large() > 0, "the smaller limit was hit");
}

/// Element's mention pill: the prompt reaches the model without `FrogBot Helper:`, `stop` after
/// the pill stops the running turn, and `skip` after it skips the open question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_element_mention_pill_is_stripped_for_the_model_stop_and_skip() {
    let fake = FakeHomeserver::start().await;
    let (alice, bob) = (person("alice"), person("bob"));
    // A group room: only a mention talks to the bot.
    let room = fake.create_room(&[&alice, &bob]);
    let prompts: Arc<Mutex<Vec<String>>> = Arc::default();
    let bot = bot(&fake, prompts.clone()).await;

    let hi = fake.inject(
        &room,
        &alice,
        "m.room.message",
        element_mention(&fake, "hello there"),
    );
    fake.wait_for(&room, WAIT, "the answer", |e| {
        from_bot(&fake, e) && in_thread(e, hi.as_str())
    })
    .await;
    let prompt = prompts.lock().unwrap()[0].clone();
    assert!(prompt.ends_with("hello there"), "{prompt:?}");
    assert!(!prompt.contains("FrogBot Helper"), "{prompt:?}");

    // stop: the slow turn (20 s of model time) ends at once.
    let slow = fake.inject(
        &room,
        &alice,
        "m.room.message",
        element_mention(&fake, "slow"),
    );
    let slow_root = slow.as_str();
    fake.wait_for(&room, WAIT, "the slow reply", |e| {
        from_bot(&fake, e) && in_thread(e, slow_root)
    })
    .await;
    let asked_stop = Instant::now();
    fake.inject(
        &room,
        &alice,
        "m.room.message",
        element_mention_in_thread(&fake, "stop", slow_root),
    );
    let slow_id = format!("{room}|{slow}");
    fake.wait_for(&room, 10, "the slow turn's end", |_| {
        let r = fake.bot_reactions(&slow_id);
        !r.is_empty() && !r.contains(&"⏳".to_owned()) && !r.contains(&"👀".to_owned())
    })
    .await;
    assert!(asked_stop.elapsed() < Duration::from_secs(10));
    let shown = visible(&fake, &room, slow_root).join("\n");
    assert!(!shown.contains("s199."), "stopped before its end: {shown}");
    assert!(
        prompts.lock().unwrap().iter().all(|p| !p.ends_with("stop")),
        "stop is a command, not a prompt: {:?}",
        prompts.lock().unwrap()
    );

    // skip: the open question is skipped (not answered with the text "FrogBot Helper: skip").
    let ask = fake.inject(
        &room,
        &alice,
        "m.room.message",
        element_mention(&fake, "ask"),
    );
    let ask_root = ask.as_str();
    let poll = fake
        .wait_for(&room, WAIT, "the poll", |e| {
            from_bot(&fake, e) && is_poll_start(e) && in_thread(e, ask_root)
        })
        .await;
    let poll_id = poll["event_id"].clone();
    fake.inject(
        &room,
        &alice,
        "m.room.message",
        element_mention_in_thread(&fake, "skip", ask_root),
    );
    let end = fake
        .wait_for(&room, WAIT, "the question skipped", |e| {
            from_bot(&fake, e)
                && is_poll_end(e)
                && e["content"]["m.relates_to"]["event_id"] == poll_id
        })
        .await;
    let said = end.to_string();
    assert!(said.contains("Skipped by @alice:fake.test"), "{said}");
    assert!(!said.contains("FrogBot Helper"), "{said}");
    bot.stop().await;
}

/// A plain reply (Element's "Reply", not "Reply in thread") to the bot's message in a group room,
/// without a mention: it continues that message's conversation (the model sees the earlier
/// turn) and the answer goes in the same thread, not in a new thread without context.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_reply_to_the_bot_continues_its_thread() {
    let fake = FakeHomeserver::start().await;
    let (alice, bob) = (person("alice"), person("bob"));
    let room = fake.create_room(&[&alice, &bob]);
    let prompts: Arc<Mutex<Vec<String>>> = Arc::default();
    let bot = bot(&fake, prompts.clone()).await;
    let hi = fake.inject(
        &room,
        &alice,
        "m.room.message",
        element_mention(&fake, "hello there"),
    );
    let answer = fake
        .wait_for(&room, WAIT, "the answer", |e| {
            from_bot(&fake, e) && in_thread(e, hi.as_str()) && e["type"] == "m.room.message"
        })
        .await;
    let answer_id = answer["event_id"].as_str().unwrap();
    let reply = fake.inject(
        &room,
        &alice,
        "m.room.message",
        json!({"msgtype": "m.text", "body": "and then?",
               "m.relates_to": {"m.in_reply_to": {"event_id": answer_id}}}),
    );
    fake.wait_for(&room, WAIT, "the second answer in the first thread", |e| {
        from_bot(&fake, e)
            && in_thread(e, hi.as_str())
            && e["content"]["body"] == "hello: and then?"
    })
    .await;
    // No thread on the reply itself.
    assert!(
        !fake
            .events(&room)
            .iter()
            .any(|e| from_bot(&fake, e) && in_thread(e, reply.as_str())),
        "a new thread on the reply"
    );
    let seen = prompts.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    // One conversation: both turns in the first thread's chat.
    let chat = frogbot_core::agent::channel_chat_id("matrix", &format!("{room}|{hi}"));
    let texts: Vec<String> = bot
        .engine
        .chats()
        .messages(&chat)
        .await
        .unwrap()
        .iter()
        .map(|m| m.message.text())
        .collect();
    assert_eq!(texts.len(), 4, "{texts:?}");
    assert!(texts[2].ends_with("and then?"), "{texts:?}");
    bot.stop().await;
}

/// Compares what a person sees of the thread on `root` with `tests/golden/person_view/NAME.txt`.
fn golden(fake: &FakeHomeserver, room: &RoomId, root: &str, name: &str) {
    let view = fake.person_view(&format!("{room}|{root}"));
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/person_view")
        .join(format!("{name}.txt"));
    assert_golden(&path, &transcript(&view, fake.bot().as_str()));
}

/// Waits until the person's message `root` shows `ack` alone.
async fn until_ack(fake: &FakeHomeserver, room: &RoomId, root: &str, ack: &str) {
    let id = format!("{room}|{root}");
    fake.wait_for(room, WAIT, ack, |_| fake.bot_reactions(&id) == [ack])
        .await;
}

/// Person views (goldens): a short reply, a failed model, a message queued behind a running turn,
/// and `stop` / `skip` written after Element's mention pill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn person_views_of_a_reply_a_failure_a_queued_message_stop_and_skip() {
    let fake = FakeHomeserver::start().await;
    let (alice, bob) = (person("alice"), person("bob"));
    let room = fake.create_room(&[&alice, &bob]);
    let bot = bot(&fake, Arc::default()).await;

    // A short reply.
    let hi = fake.inject(
        &room,
        &alice,
        "m.room.message",
        element_mention(&fake, "hello there"),
    );
    until_ack(&fake, &room, hi.as_str(), "✅").await;
    golden(&fake, &room, hi.as_str(), "short_reply");

    // A failed model.
    let fail = fake.inject(
        &room,
        &alice,
        "m.room.message",
        element_mention(&fake, "please fail"),
    );
    until_ack(&fake, &room, fail.as_str(), "❌").await;
    golden(&fake, &room, fail.as_str(), "failed_model");

    // A message queued while a turn runs: 👀 until its turn, then its own answer.
    let busy = fake.inject(
        &room,
        &alice,
        "m.room.message",
        element_mention(&fake, "please wait"),
    );
    until_ack(&fake, &room, busy.as_str(), "⏳").await;
    let queued = fake.inject(
        &room,
        &alice,
        "m.room.message",
        element_mention_in_thread(&fake, "and this too", busy.as_str()),
    );
    fake.wait_for(&room, WAIT, "the queued message's answer", |e| {
        from_bot(&fake, e) && e["content"]["body"] == "hello: and this too"
    })
    .await;
    until_ack(&fake, &room, busy.as_str(), "✅").await;
    until_ack(&fake, &room, queued.as_str(), "✅").await;
    golden(&fake, &room, busy.as_str(), "queued_message");

    // stop after a mention.
    let slow = fake.inject(
        &room,
        &alice,
        "m.room.message",
        element_mention(&fake, "slow"),
    );
    fake.wait_for(&room, WAIT, "the slow reply", |e| {
        from_bot(&fake, e) && in_thread(e, slow.as_str())
    })
    .await;
    fake.inject(
        &room,
        &alice,
        "m.room.message",
        element_mention_in_thread(&fake, "stop", slow.as_str()),
    );
    until_ack(&fake, &room, slow.as_str(), "✅").await;
    let view = fake.person_view(&format!("{room}|{slow}"));
    let stopped = view
        .iter()
        .filter(|m| m.sender == fake.bot().as_str())
        .filter_map(|m| m.fallback.clone())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(stopped.contains("(stopped)"), "{stopped}");
    // The streamed text before the stop varies with timing: the golden holds the rest.
    let kept: Vec<_> = view
        .into_iter()
        .map(|mut m| {
            if m.sender == fake.bot().as_str() {
                m.fallback = m.fallback.map(|b| match b.find("(stopped)") {
                    Some(at) => format!("[streamed text] {}", &b[at..]),
                    None => b,
                });
            }
            m
        })
        .collect();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/person_view/stop_after_mention.txt");
    assert_golden(&path, &transcript(&kept, fake.bot().as_str()));

    // skip after a mention.
    let ask = fake.inject(
        &room,
        &alice,
        "m.room.message",
        element_mention(&fake, "ask"),
    );
    fake.wait_for(&room, WAIT, "the poll", |e| {
        from_bot(&fake, e) && is_poll_start(e) && in_thread(e, ask.as_str())
    })
    .await;
    fake.inject(
        &room,
        &alice,
        "m.room.message",
        element_mention_in_thread(&fake, "skip", ask.as_str()),
    );
    // Skipped: the poll ends, the turn ends (✅ once it has, not while the question waited).
    fake.wait_for(&room, WAIT, "the poll's end", |e| {
        from_bot(&fake, e) && is_poll_end(e)
    })
    .await;
    until_ack(&fake, &room, ask.as_str(), "✅").await;
    golden(&fake, &room, ask.as_str(), "skip_after_mention");
    bot.stop().await;
}

/// A message queued behind a running turn, then edited (Element's `m.replace`) or redacted by its
/// author: the edited one runs with its new text, the redacted one never runs; an edit by
/// someone else is ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_message_edited_or_redacted_in_element_runs_new_or_not_at_all() {
    let fake = FakeHomeserver::start().await;
    let (alice, bob) = (person("alice"), person("bob"));
    let room = fake.create_room(&[&alice]);
    let prompts: Arc<Mutex<Vec<String>>> = Arc::default();
    let bot = bot(&fake, prompts.clone()).await;
    let busy = fake.inject(
        &room,
        &alice,
        "m.room.message",
        json!({"msgtype": "m.text", "body": "please wait"}),
    );
    until_ack(&fake, &room, busy.as_str(), "⏳").await;
    let in_busy = |body: &str| {
        json!({"msgtype": "m.text", "body": body,
               "m.relates_to": {"rel_type": "m.thread", "event_id": busy.as_str(),
                                "is_falling_back": true, "m.in_reply_to": {"event_id": busy.as_str()}}})
    };
    let typo = fake.inject(&room, &alice, "m.room.message", in_busy("secnod"));
    let gone = fake.inject(&room, &alice, "m.room.message", in_busy("third"));
    until_ack(&fake, &room, gone.as_str(), "👀").await;
    // bob's edit of alice's message is not hers: ignored.
    let edit = |who: &OwnedUserId, body: &str| {
        fake.inject(
            &room,
            who,
            "m.room.message",
            json!({"msgtype": "m.text", "body": format!("* {body}"),
                   "m.new_content": {"msgtype": "m.text", "body": body},
                   "m.relates_to": {"rel_type": "m.replace", "event_id": typo.as_str()}}),
        )
    };
    edit(&bob, "hijacked");
    edit(&alice, "second");
    fake.inject(
        &room,
        &alice,
        "m.room.redaction",
        json!({"redacts": gone.as_str()}),
    );
    fake.wait_for(&room, WAIT, "the edited message's answer", |e| {
        from_bot(&fake, e) && e["content"]["body"] == "hello: second"
    })
    .await;
    until_ack(&fake, &room, typo.as_str(), "✅").await;
    bot.engine.drain(Duration::from_secs(5)).await;
    let seen = prompts.lock().unwrap().clone();
    assert!(
        !seen
            .iter()
            .any(|p| p.ends_with("third") || p.ends_with("hijacked") || p.ends_with("secnod")),
        "{seen:?}"
    );
    bot.stop().await;
}

/// The person's message keeps ⏳ while the question its turn asked waits (✅ would say the bot is
/// done with it), and gets ✅ when the turn continued after the answer ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_keeps_the_hourglass_while_its_question_waits() {
    let fake = FakeHomeserver::start().await;
    let alice = person("alice");
    let room = fake.create_room(&[&alice]);
    let bot = bot(&fake, Arc::default()).await;
    let ask = fake.inject(
        &room,
        &alice,
        "m.room.message",
        json!({"msgtype": "m.text", "body": "please ask"}),
    );
    let poll = fake
        .wait_for(&room, WAIT, "the poll", |e| {
            from_bot(&fake, e) && is_poll_start(e) && in_thread(e, ask.as_str())
        })
        .await;
    let asked = format!("{room}|{ask}");
    // The turn's end is shown before its poll is drawn: still waiting, so no ✅.
    assert_eq!(fake.bot_reactions(&asked), ["⏳"]);
    let poll_id = poll["event_id"].as_str().unwrap().to_owned();
    let answers = fake.open_answers(&format!("{room}|{poll_id}"));
    fake.inject(
        &room,
        &alice,
        "org.matrix.msc3381.poll.response",
        json!({"org.matrix.msc3381.poll.response": {"answers": [answers[1].0]},
               "m.relates_to": {"rel_type": "m.reference", "event_id": poll_id}}),
    );
    fake.wait_for(&room, WAIT, "the continued turn's reply", |e| {
        from_bot(&fake, e)
            && in_thread(e, ask.as_str())
            && e["content"]["body"]
                .as_str()
                .is_some_and(|b| b.starts_with("got: "))
    })
    .await;
    fake.wait_for(&room, WAIT, "✅ once the continued turn ends", |_| {
        fake.bot_reactions(&asked) == ["✅"]
    })
    .await;
    bot.stop().await;
}

/// An ask (`POST /api/asks` to a Matrix room, as the HTTP layer sends it): its root message and
/// poll are posted, and no typing notice is shown (the bot writes nothing for the person).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_shows_no_typing_notice() {
    use frogbot_core::agent::ask::{ASK_MODEL, ask_parts};
    use frogbot_core::agent::{AskPlace, SendMessage, Sent, channel_chat_id};
    use frogbot_core::model::{Delivery, QuestionInput};
    let fake = FakeHomeserver::start().await;
    let alice = person("alice");
    let room = fake.create_room(&[&alice]);
    let bot = bot(&fake, Arc::default()).await;
    let (message, text) = ("ask-typing-1", "Deploy where?");
    let channel = bot
        .engine
        .channels()
        .ask_thread("matrix", AskPlace::Thread(room.as_str()), text, message)
        .await
        .unwrap();
    let input: QuestionInput = serde_json::from_value(json!({"questions": [{"header": "Env",
        "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]}]}))
    .unwrap();
    let sent = bot
        .engine
        .agents()
        .send(SendMessage {
            chat_id: channel_chat_id(&channel.platform, &channel.thread),
            id: Some(message.into()),
            parts: ask_parts(text, &input, message),
            author: None,
            delivery: Delivery::Queue,
            model: Some(ASK_MODEL.into()),
            reasoning: None,
            channel: Some(channel.clone()),
            speaker: None,
            context: None,
        })
        .await
        .unwrap();
    if let Sent::Started(handle) = sent {
        let _ = handle.done.await;
    }
    fake.wait_for(&room, WAIT, "the ask's poll", |e| {
        from_bot(&fake, e) && is_poll_start(e)
    })
    .await;
    let typing = fake.typing(&room);
    assert!(
        typing.iter().all(|(_, b)| b["typing"] != true),
        "no typing for an ask: {typing:?}"
    );
    bot.stop().await;
}

/// A poll's start, in either form (the unstable MSC3381 form is the default).
fn is_poll_start(e: &serde_json::Value) -> bool {
    e["type"] == "m.poll.start" || e["type"] == "org.matrix.msc3381.poll.start"
}

/// A poll's end, in either form.
fn is_poll_end(e: &serde_json::Value) -> bool {
    e["type"] == "m.poll.end" || e["type"] == "org.matrix.msc3381.poll.end"
}
