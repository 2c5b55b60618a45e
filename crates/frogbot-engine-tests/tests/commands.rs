//! A person's commands in a channel thread (issue 40, item 4), on SQLite (`sqlite::…`) and
//! PostgreSQL (`postgres::…`): `new` starts a new conversation that the model sees alone (also
//! after a restart), is refused while a reply is written or a question waits (nothing changed),
//! and is refused to someone the channel does not let in; `model` lists the offered models and
//! chooses the thread's (kept across `new` and restarts), refusing one not offered.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, reply};
use frogbot_core::agent::{
    AccessCheck, AllowAll, AllowList, COMMAND_BUSY_TEXT, Channel, ChannelMessageOutcome,
    ChannelOutbox, Engine, EngineConfig, ModelEvent, ModelOffer, ModelRequest,
    NOTHING_TO_SKIP_TEXT, OutboxDelivery, channel_chat_id,
};
use frogbot_core::model::{
    Ack, NEW_CONVERSATION_TEXT, PlatformUser, PrefixedIdentity, Thread, ThreadMessage,
    ThreadMessageMetadata, TurnState, UiMessage, model_choice_text,
};
use frogbot_core::store::DynStore;
use frogbot_testkit::eventually;
use serde_json::json;
use tokio::sync::Semaphore;

const PLATFORM: &str = "test";
const THREAD: &str = "T1";
const WAIT: Duration = Duration::from_secs(20);

#[derive(Default)]
struct Recorder {
    posts: Mutex<Vec<String>>,
    acks: Mutex<Vec<(String, Ack)>>,
    /// The user texts of every model request, in order.
    requests: Mutex<Vec<Vec<String>>>,
}

struct Outbox(Arc<Recorder>);

/// Not a `Draw`: none of the shared delivery loops (the defaults post with `post_reply`).
impl OutboxDelivery for Outbox {}

#[async_trait]
impl ChannelOutbox for Outbox {
    async fn post_reply(&self, _thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        self.0.posts.lock().unwrap().push(reply.text());
        Ok(())
    }

    async fn ack(&self, _thread: &Thread, message_id: &str, ack: Ack) -> Result<(), BoxError> {
        self.0.acks.lock().unwrap().push((message_id.into(), ack));
        Ok(())
    }
}

struct World {
    engine: Engine,
    rec: Arc<Recorder>,
    gate: Arc<Semaphore>,
    store: DynStore,
}

/// An engine over `store` whose model replies `re: <last user text>` (after waiting on the gate
/// when the text says "gate") and records what it was shown.
fn world_on(store: DynStore, access: Arc<dyn AccessCheck>) -> World {
    world_with(store, access, false)
}

/// As [`world_on`], with a second model offered when `alt` (`alt`, reasoning `low` or `high`,
/// replying `alt/<reasoning>: <last user text>`).
fn world_with(store: DynStore, access: Arc<dyn AccessCheck>, alt: bool) -> World {
    let gate = Arc::new(Semaphore::new(0));
    let rec = Arc::new(Recorder::default());
    let (g, r) = (gate.clone(), rec.clone());
    let r2 = rec.clone();
    let other = ScriptedModel::new(move |req: &ModelRequest| {
        let users = frogbot_testkit::user_texts(req);
        r2.requests.lock().unwrap().push(users);
        let last = frogbot_testkit::last_user(req);
        reply(&format!(
            "alt/{}: {last}",
            req.reasoning.as_deref().unwrap_or("-")
        ))
    });
    let model = ScriptedModel::new(move |req: &ModelRequest| {
        let users = frogbot_testkit::user_texts(req);
        let last = users.last().cloned().unwrap_or_default();
        r.requests.lock().unwrap().push(users);
        let mut events = Vec::new();
        if last.contains("gate") {
            events.push(ScriptEvent::Event(ModelEvent::TextDelta("… ".into())));
            events.push(ScriptEvent::Gate(g.clone()));
        }
        events.extend(reply(&format!("re: {last}")));
        events
    });
    let mut offers = vec![frogbot_testkit::offer("main", model)];
    if alt {
        offers.push(ModelOffer {
            reasoning: vec!["low".into(), "high".into()],
            ..frogbot_testkit::offer("alt", other)
        });
    }
    let engine =
        Engine::new(store.clone(), offers, vec![], EngineConfig::default()).with_channel(Channel {
            platform: PLATFORM.into(),
            questions: None,
            identity: Arc::new(PrefixedIdentity),
            access,
            outbox: Some(Arc::new(Outbox(rec.clone()))),
        });
    World {
        engine,
        rec,
        gate,
        store,
    }
}

fn said(id: &str, who: &str, text: &str) -> ThreadMessage {
    ThreadMessage {
        id: id.into(),
        text: text.into(),
        author: PlatformUser {
            id: who.into(),
            name: Some(who.into()),
            is_bot: false,
        },
        metadata: ThreadMessageMetadata {
            date_sent: "2026-12-06T00:00:00Z".into(),
        },
        reply_to: None,
        raw: json!(null),
        files: Vec::new(),
        mentions: Vec::new(),
    }
}

impl World {
    async fn say(&self, id: &str, who: &str, text: &str) -> ChannelMessageOutcome {
        self.engine
            .channels()
            .message(PLATFORM, THREAD, said(id, who, text))
            .await
            .unwrap()
    }

    async fn until_ack(&self, id: &str, ack: Ack) {
        eventually(&format!("{id} marked {ack:?}"), WAIT, async || {
            self.rec
                .acks
                .lock()
                .unwrap()
                .iter()
                .rev()
                .find(|(m, _)| m == id)
                .map(|(_, a)| *a)
                == Some(ack)
        })
        .await;
    }

    async fn idle(&self) {
        let chat = channel_chat_id(PLATFORM, THREAD);
        eventually("the chat idle", WAIT, async || {
            self.engine.chats().state(&chat).await.unwrap() == TurnState::Idle
        })
        .await;
    }

    fn posts(&self) -> Vec<String> {
        self.rec.posts.lock().unwrap().clone()
    }

    fn last_request(&self) -> Vec<String> {
        self.rec
            .requests
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("a model request")
    }

    fn requests(&self) -> usize {
        self.rec.requests.lock().unwrap().len()
    }

    async fn stored_ids(&self) -> Vec<String> {
        self.engine
            .chats()
            .messages(&channel_chat_id(PLATFORM, THREAD))
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.message.id)
            .collect()
    }
}

async fn new_starts_a_conversation_the_model_sees_alone(url: &str) {
    let w = world_on(frogbot_testkit::open_store(url).await, Arc::new(AllowAll));
    w.say("m1", "ada", "the codeword is kiwi").await;
    w.until_ack("m1", Ack::Done).await;
    assert_eq!(w.last_request(), ["the codeword is kiwi"]);
    let asked = w.requests();

    // `/new` is answered without the model, in the thread, and acknowledged like a message.
    assert!(matches!(
        w.say("m2", "ada", " /NEW ").await,
        ChannelMessageOutcome::Sent(_)
    ));
    w.until_ack("m2", Ack::Done).await;
    assert_eq!(
        w.posts(),
        ["re: the codeword is kiwi", NEW_CONVERSATION_TEXT]
    );
    assert_eq!(w.requests(), asked, "the model was not called for /new");

    // The next message: the model sees it alone (not m1, its reply, /new or the bot's answer).
    w.say("m3", "ada", "what is the codeword?").await;
    w.until_ack("m3", Ack::Done).await;
    assert_eq!(w.last_request(), ["what is the codeword?"]);
    // The chat keeps everything: the web chat and the HTTP API show the whole thread.
    let ids = w.stored_ids().await;
    assert_eq!(ids.len(), 6, "{ids:?}");
    assert!(ids.contains(&"test-m1".to_owned()) && ids.contains(&"test-m2".to_owned()));

    // A restarted process (a fresh engine, nothing cached) reads the conversation the same way;
    // `!new` works too, and the second start wins.
    let again = world_on(w.store.clone(), Arc::new(AllowAll));
    again.say("m4", "ada", "and now?").await;
    again.until_ack("m4", Ack::Done).await;
    assert_eq!(again.last_request(), ["what is the codeword?", "and now?"]);
    again.say("m5", "ada", "!new").await;
    again.until_ack("m5", Ack::Done).await;
    again.say("m6", "ada", "fresh").await;
    again.until_ack("m6", Ack::Done).await;
    assert_eq!(again.last_request(), ["fresh"]);
}

async fn new_while_a_reply_is_written_is_refused_and_changes_nothing(url: &str) {
    let w = world_on(frogbot_testkit::open_store(url).await, Arc::new(AllowAll));
    w.say("m1", "ada", "gate: the codeword is kiwi").await;
    w.until_ack("m1", Ack::Working).await;
    for (id, who, text) in [
        ("m2", "ada", "/new"),
        ("m3", "bob", "!new"),
        ("m5", "ada", "/model main"),
    ] {
        assert!(matches!(
            w.say(id, who, text).await,
            ChannelMessageOutcome::Told
        ));
    }
    eventually("the refusal shown", WAIT, async || {
        w.posts().iter().filter(|p| *p == COMMAND_BUSY_TEXT).count() == 3
    })
    .await;
    w.gate.add_permits(1);
    w.until_ack("m1", Ack::Done).await;
    w.idle().await;
    // Nothing of the refused commands was saved, queued or run.
    assert_eq!(w.stored_ids().await.len(), 2);
    w.say("m4", "ada", "what is the codeword?").await;
    w.until_ack("m4", Ack::Done).await;
    assert_eq!(
        w.last_request(),
        ["gate: the codeword is kiwi", "what is the codeword?"],
        "the conversation goes on"
    );
}

async fn new_from_someone_not_let_in_is_denied(url: &str) {
    let w = world_on(
        frogbot_testkit::open_store(url).await,
        Arc::new(AllowList::new(["test:ada"])),
    );
    w.say("m1", "ada", "the codeword is kiwi").await;
    w.until_ack("m1", Ack::Done).await;
    assert!(matches!(
        w.say("m2", "mallory", "/new").await,
        ChannelMessageOutcome::Denied
    ));
    w.say("m3", "ada", "what is the codeword?").await;
    w.until_ack("m3", Ack::Done).await;
    assert_eq!(
        w.last_request(),
        ["the codeword is kiwi", "what is the codeword?"]
    );
    // `skip` with no question waiting: told so, nothing saved.
    let n = w.stored_ids().await.len();
    assert!(matches!(
        w.say("m4", "ada", "!skip").await,
        ChannelMessageOutcome::Told
    ));
    assert_eq!(told_at(&w, 3).await, NOTHING_TO_SKIP_TEXT);
    assert_eq!(w.stored_ids().await.len(), n);
}

/// The thread's `n`-th post, once there (a notice is shown on the thread's own task).
async fn told_at(w: &World, n: usize) -> String {
    eventually("the notice", WAIT, async || w.posts().len() == n).await;
    w.posts().last().unwrap().clone()
}

async fn model_lists_and_chooses_the_threads_model(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let w = world_with(store.clone(), Arc::new(AllowAll), true);
    w.say("m1", "ada", "hi").await;
    w.until_ack("m1", Ack::Done).await;
    assert_eq!(w.posts().last().unwrap(), "re: hi");

    // `model` alone lists what is offered and the thread's; nothing is saved.
    assert!(matches!(
        w.say("m2", "ada", "/model").await,
        ChannelMessageOutcome::Told
    ));
    let list = told_at(&w, 2).await;
    assert!(
        list.starts_with("Models offered: main (default); alt — reasoning low, high.")
            && list.contains("This thread: main.")
            && list.contains("/model alt low"),
        "{list}"
    );
    // A model or reasoning option not offered: refused, nothing changed.
    for (text, what) in [
        ("/model gpt-9", "gpt-9 is not offered"),
        (
            "/model alt extreme",
            "alt with reasoning extreme is not offered",
        ),
        (
            "/model main high",
            "main with reasoning high is not offered",
        ),
        ("/model alt high now", "Models offered:"),
        ("/model frogbot-ask", "frogbot-ask is not offered"),
    ] {
        let n = w.posts().len();
        assert!(matches!(
            w.say("mx", "ada", text).await,
            ChannelMessageOutcome::Told
        ));
        let said = told_at(&w, n + 1).await;
        assert!(said.starts_with(what), "{text}: {said}");
    }
    assert_eq!(w.stored_ids().await.len(), 2, "nothing saved");

    // `!model alt high`: answered without a model, and the thread's later messages go to alt.
    let asked = w.requests();
    w.say("m3", "ada", "!model alt high").await;
    w.until_ack("m3", Ack::Done).await;
    assert_eq!(
        w.posts().last().unwrap(),
        &model_choice_text("alt", Some("high"))
    );
    assert_eq!(w.requests(), asked);
    w.say("m4", "ada", "hello").await;
    w.until_ack("m4", Ack::Done).await;
    assert_eq!(w.posts().last().unwrap(), "alt/high: hello");
    // The command and its confirmation are not part of the conversation the model sees.
    assert_eq!(w.last_request(), ["hi", "hello"]);
    let m4 = w
        .engine
        .chats()
        .message(&channel_chat_id(PLATFORM, THREAD), "test-m4")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m4.message.metadata.model.as_deref(), Some("alt"));
    assert_eq!(m4.message.metadata.reasoning.as_deref(), Some("high"));

    // A new conversation keeps the choice, and so does a restarted process.
    w.say("m5", "ada", "/new").await;
    w.until_ack("m5", Ack::Done).await;
    let again = world_with(store.clone(), Arc::new(AllowAll), true);
    again.say("m6", "ada", "still you?").await;
    again.until_ack("m6", Ack::Done).await;
    assert_eq!(again.posts().last().unwrap(), "alt/high: still you?");
    assert_eq!(
        again.last_request(),
        ["still you?"],
        "read back after a restart too"
    );
    assert!(matches!(
        again.say("m7", "ada", "/model").await,
        ChannelMessageOutcome::Told
    ));
    assert!(
        told_at(&again, 2)
            .await
            .contains("This thread: alt, reasoning high.")
    );

    // The configuration no longer offers alt: the thread is told, never answered by another
    // model; choosing again works.
    let main_only = world_with(store, Arc::new(AllowAll), false);
    assert!(matches!(
        main_only.say("m8", "ada", "hello?").await,
        ChannelMessageOutcome::Told
    ));
    let said = told_at(&main_only, 1).await;
    assert!(
        said.starts_with("The model chosen for this thread (alt) is no longer offered."),
        "{said}"
    );
    main_only.say("m9", "ada", "/model main").await;
    main_only.until_ack("m9", Ack::Done).await;
    main_only.say("m10", "ada", "hello?").await;
    main_only.until_ack("m10", Ack::Done).await;
    assert_eq!(main_only.posts().last().unwrap(), "re: hello?");
    // The first process, its cache warm with alt, reads the newer choice too.
    w.say("m11", "ada", "and you?").await;
    w.until_ack("m11", Ack::Done).await;
    assert_eq!(w.posts().last().unwrap(), "re: and you?");
}

frogbot_testkit::backends!(
    model_lists_and_chooses_the_threads_model,
    new_starts_a_conversation_the_model_sees_alone,
    new_while_a_reply_is_written_is_refused_and_changes_nothing,
    new_from_someone_not_let_in_is_denied,
);
