//! What a channel thread shows while the engine works (issue 17): acknowledgements in order
//! (Seen → Working → reply → Done, or Failed), the progress sign repeated while a turn runs, one
//! note per queue, visible failures and `max_steps`, and stop from the driving user — on SQLite
//! (`sqlite::…`) and PostgreSQL (`postgres::…`), through a recording outbox.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, call, reply};
use frogbot_core::agent::{
    AllowAll, Channel, ChannelMessageOutcome, ChannelOutbox, ChannelSettings, Engine, EngineConfig,
    MAX_STEPS_TEXT, ModelEvent, ModelRequest, QUEUED_TEXT, STOP_REFUSED_TEXT, STOPPED_TEXT,
    StopOutcome, channel_chat_id, failure_text, tool_fn,
};
use frogbot_core::model::{
    Ack, PlatformUser, PrefixedIdentity, Thread, ThreadMessage, ThreadMessageMetadata, TurnState,
    UiMessage,
};
use frogbot_testkit::{eventually, last_user};
use serde_json::json;
use tokio::sync::Semaphore;

const PLATFORM: &str = "test";
const THREAD: &str = "T1";
const WAIT: Duration = Duration::from_secs(20);

/// What the outbox was asked to do, in order.
#[derive(Clone, Debug, PartialEq)]
enum Shown {
    Ack(String, Ack),
    Post(String),
}

#[derive(Default)]
struct Recorder {
    shown: Mutex<Vec<Shown>>,
    working: Mutex<u32>,
}

struct Outbox(Arc<Recorder>);

#[async_trait]
impl ChannelOutbox for Outbox {
    async fn post_reply(&self, _thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        self.0.shown.lock().unwrap().push(Shown::Post(reply.text()));
        Ok(())
    }

    async fn ack(&self, _thread: &Thread, message_id: &str, ack: Ack) -> Result<(), BoxError> {
        // A platform call takes a moment: orders decided concurrently would show here.
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.0
            .shown
            .lock()
            .unwrap()
            .push(Shown::Ack(message_id.into(), ack));
        Ok(())
    }

    async fn working(&self, _thread: &Thread) -> Result<(), BoxError> {
        *self.0.working.lock().unwrap() += 1;
        Ok(())
    }

    fn working_every(&self) -> Duration {
        Duration::from_millis(20)
    }
}

struct World {
    engine: Engine,
    rec: Arc<Recorder>,
    gate: Arc<Semaphore>,
    _store: frogbot_core::store::DynStore,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Empty {}

async fn world(url: &str, max_steps: u32) -> World {
    let store = frogbot_testkit::open_store(url).await;
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let model = ScriptedModel::new(move |req: &ModelRequest| {
        let text = last_user(req);
        let mut events = Vec::new();
        if text.contains("gate") {
            events.push(ScriptEvent::Event(ModelEvent::TextDelta(
                "thinking… ".into(),
            )));
            events.push(ScriptEvent::Gate(g.clone()));
        }
        if text.contains("fail") {
            events.push(ScriptEvent::Fail(
                "upstream said 500 with secret details".into(),
            ));
        } else if text.contains("loop") {
            events.extend(call(&format!("l{}", req.messages.len()), "echo", json!({})));
        } else {
            events.extend(reply(&format!("re: {text}")));
        }
        events
    });
    let tools = vec![tool_fn("echo", "Echoes", |_: Empty, _ctx| async {
        Ok::<_, BoxError>(json!("echoed"))
    })];
    let rec = Arc::new(Recorder::default());
    let engine = Engine::new(
        store.clone(),
        vec![frogbot_testkit::offer("main", model)],
        tools,
        EngineConfig {
            max_steps,
            ..Default::default()
        },
    )
    .with_channel(Channel {
        platform: PLATFORM.into(),
        questions: None,
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: Some(Arc::new(Outbox(rec.clone()))),
    });
    World {
        engine,
        rec,
        gate,
        _store: store,
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
            date_sent: "2026-11-30T00:00:00Z".into(),
        },
        reply_to: None,
        raw: json!(null),
    }
}

impl World {
    async fn say(&self, id: &str, who: &str, text: &str) -> ChannelMessageOutcome {
        self.engine
            .channel_message(PLATFORM, THREAD, said(id, who, text))
            .await
            .unwrap()
    }

    fn shown(&self) -> Vec<Shown> {
        self.rec.shown.lock().unwrap().clone()
    }

    fn acks_of(&self, id: &str) -> Vec<Ack> {
        self.shown()
            .into_iter()
            .filter_map(|s| match s {
                Shown::Ack(m, a) if m == id => Some(a),
                _ => None,
            })
            .collect()
    }

    async fn until_ack(&self, id: &str, ack: Ack) {
        eventually(&format!("{id} marked {ack:?}"), WAIT, async || {
            self.acks_of(id).last() == Some(&ack)
        })
        .await;
    }

    async fn idle(&self) {
        let chat = channel_chat_id(PLATFORM, THREAD);
        eventually("the chat idle", WAIT, async || {
            self.engine.state(&chat).await.unwrap() == TurnState::Idle
        })
        .await;
    }
}

async fn a_message_is_seen_worked_on_answered_and_done_in_that_order(url: &str) {
    let w = world(url, 20).await;
    w.say("m1", "ada", "hello").await;
    w.until_ack("m1", Ack::Done).await;
    assert_eq!(
        w.shown(),
        vec![
            Shown::Ack("m1".into(), Ack::Seen),
            Shown::Ack("m1".into(), Ack::Working),
            Shown::Post("re: hello".into()),
            Shown::Ack("m1".into(), Ack::Done),
        ]
    );
    assert!(*w.rec.working.lock().unwrap() >= 1, "progress shown");
}

async fn progress_repeats_while_a_turn_runs(url: &str) {
    let w = world(url, 20).await;
    w.say("m1", "ada", "gate please").await;
    w.until_ack("m1", Ack::Working).await;
    eventually("progress shown again and again", WAIT, async || {
        *w.rec.working.lock().unwrap() >= 3
    })
    .await;
    w.gate.add_permits(1);
    w.until_ack("m1", Ack::Done).await;
}

async fn queued_messages_keep_seen_and_get_one_note_per_queue(url: &str) {
    let w = world(url, 20).await;
    w.say("m1", "ada", "gate first").await;
    w.until_ack("m1", Ack::Working).await;
    w.say("m2", "ada", "second").await;
    w.say("m3", "bob", "third").await;
    // Shown in order on the thread's own task: once m3 is Seen, m2 and the note are shown too.
    w.until_ack("m3", Ack::Seen).await;
    assert_eq!(w.acks_of("m2"), vec![Ack::Seen]);
    assert_eq!(w.acks_of("m3"), vec![Ack::Seen]);
    let notes = |w: &World| {
        w.shown()
            .into_iter()
            .filter(|s| *s == Shown::Post(QUEUED_TEXT.into()))
            .count()
    };
    assert_eq!(notes(&w), 1, "one note for the queue: {:?}", w.shown());
    w.gate.add_permits(1);
    w.until_ack("m3", Ack::Done).await;
    assert_eq!(
        w.acks_of("m2"),
        vec![Ack::Seen, Ack::Working, Ack::Done],
        "the promoted message is worked on in turn"
    );
    assert_eq!(w.acks_of("m1"), vec![Ack::Seen, Ack::Working, Ack::Done]);
    // The replies in order, each before its Done.
    let posts: Vec<String> = w
        .shown()
        .into_iter()
        .filter_map(|s| match s {
            Shown::Post(t) if t != QUEUED_TEXT => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(
        posts,
        ["thinking… re: gate first", "re: second", "re: third"]
    );
}

async fn a_failing_model_posts_a_short_notice_and_failed(url: &str) {
    let w = world(url, 20).await;
    w.say("m1", "ada", "fail now").await;
    w.until_ack("m1", Ack::Failed).await;
    let posted: Vec<String> = w
        .shown()
        .into_iter()
        .filter_map(|s| match s {
            Shown::Post(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(posted, [failure_text("model-error")]);
    assert!(
        !posted[0].contains("secret details"),
        "details stay in the logs"
    );
}

async fn running_out_of_steps_says_so(url: &str) {
    let w = world(url, 2).await;
    w.say("m1", "ada", "loop forever").await;
    w.until_ack("m1", Ack::Done).await;
    assert!(
        w.shown()
            .iter()
            .any(|s| matches!(s, Shown::Post(t) if t.contains(MAX_STEPS_TEXT))),
        "{:?}",
        w.shown()
    );
}

async fn the_driver_stops_a_turn_and_others_cannot(url: &str) {
    let w = world(url, 20).await;
    let chat = channel_chat_id(PLATFORM, THREAD);
    assert_eq!(
        w.engine.stop(&chat, None),
        StopOutcome::NotRunning,
        "nothing runs yet"
    );
    w.say("m1", "ada", "gate long one").await;
    w.until_ack("m1", Ack::Working).await;
    // Someone else: refused with a notice; the turn goes on.
    assert!(matches!(
        w.say("m2", "bob", "stop").await,
        ChannelMessageOutcome::StopRefused
    ));
    assert!(w.shown().contains(&Shown::Post(STOP_REFUSED_TEXT.into())));
    assert_eq!(w.engine.state(&chat).await.unwrap(), TurnState::Running);
    // The driver: the streaming answer is cut off, what it produced is kept and marked.
    assert!(matches!(
        w.say("m3", "ada", " /STOP ").await,
        ChannelMessageOutcome::Stopped
    ));
    w.until_ack("m1", Ack::Done).await;
    w.idle().await;
    let reply = w
        .shown()
        .into_iter()
        .find_map(|s| match s {
            Shown::Post(t) if t.contains(STOPPED_TEXT) => Some(t),
            _ => None,
        })
        .expect("the stopped reply");
    assert!(reply.starts_with("thinking…"), "{reply}");
    // The gate was never opened: the model was cut off, not waited for.
    assert_eq!(w.gate.available_permits(), 0);
    // A stop with nothing running is an ordinary message.
    assert!(matches!(
        w.say("m4", "ada", "stop").await,
        ChannelMessageOutcome::Sent(_)
    ));
    w.until_ack("m4", Ack::Done).await;
}

async fn a_channels_settings_choose_its_model_and_can_turn_acks_off(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let main = ScriptedModel::new(|_req: &ModelRequest| reply("from main"));
    let alt = ScriptedModel::new(|_req: &ModelRequest| reply("from alt"));
    let rec = Arc::new(Recorder::default());
    let engine = Engine::new(
        store,
        vec![
            frogbot_testkit::offer("main", main),
            frogbot_testkit::offer("alt", alt),
        ],
        vec![],
        EngineConfig::default(),
    )
    .with_channel(Channel {
        platform: PLATFORM.into(),
        questions: None,
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: Some(Arc::new(Outbox(rec.clone()))),
    });
    assert!(
        engine
            .clone()
            .with_channel_settings(
                PLATFORM,
                ChannelSettings {
                    model: Some("nope".into()),
                    ..Default::default()
                }
            )
            .is_err(),
        "a model that is not offered is refused up front"
    );
    let engine = engine
        .with_channel_settings(
            PLATFORM,
            ChannelSettings {
                model: Some("alt".into()),
                acks: false,
                ..Default::default()
            },
        )
        .unwrap();
    engine
        .channel_message(PLATFORM, THREAD, said("m1", "ada", "hi"))
        .await
        .unwrap();
    eventually("the reply", WAIT, async || {
        rec.shown
            .lock()
            .unwrap()
            .contains(&Shown::Post("from alt".into()))
    })
    .await;
}

frogbot_testkit::backends!(
    a_message_is_seen_worked_on_answered_and_done_in_that_order,
    progress_repeats_while_a_turn_runs,
    queued_messages_keep_seen_and_get_one_note_per_queue,
    a_failing_model_posts_a_short_notice_and_failed,
    running_out_of_steps_says_so,
    the_driver_stops_a_turn_and_others_cannot,
    a_channels_settings_choose_its_model_and_can_turn_acks_off,
);
