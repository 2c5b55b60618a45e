//! What a channel thread shows while the engine works (issue 17): acknowledgements in order
//! (Seen → Working → reply → Done, or Failed), the progress sign repeated while a turn runs, one
//! note per queue, visible failures and `max_steps`, and stop from the driving user — on SQLite
//! (`sqlite::…`) and PostgreSQL (`postgres::…`), through a recording outbox.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use frogbot_channel::outbox::History;
use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptEvent, ScriptedModel, call, reply};
use frogbot_core::agent::{
    AllowAll, ChangeOutcome, Channel, ChannelMessageOutcome, ChannelOutbox, ChannelSettings,
    DraftMessages, EditStream, Engine, EngineConfig, INTERRUPTED_MARK, MAX_STEPS_TEXT, ModelEvent,
    ModelMessage, ModelRequest, OutboxDelivery, QUEUED_TEXT, ReplyStream, STOP_REFUSED_TEXT,
    STOPPED_TEXT, StopOutcome, channel_chat_id, failure_text, tool_fn,
};
use frogbot_core::model::MessageAt;
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
    /// A streamed reply's message posted: id, text, Stop control.
    Draft(String, String, bool),
    /// One edited: id, text, Stop control.
    Edit(String, String, bool),
}

#[derive(Default)]
struct Recorder {
    shown: Mutex<Vec<Shown>>,
    working: Mutex<u32>,
    /// When each draft post or edit was made, by message id.
    edits_at: Mutex<Vec<(String, tokio::time::Instant)>>,
    /// What `thread_history` answers, and how often it was asked.
    history: Mutex<Vec<ThreadMessage>>,
    history_reads: Mutex<u32>,
    /// How many of the next recovery edits (`edit_message`) fail with a transient error.
    failing_edits: Mutex<u32>,
    /// How long each progress sign takes (a slow platform call keeps the show queue busy).
    working_takes: Mutex<Duration>,
}

/// The most characters of one streamed message (so a long reply spans several).
const PIECE: usize = 40;

/// An outbox that streams replies by post and edit ([`EditStream`]) and reads thread history.
struct Streaming(Arc<Recorder>);

#[async_trait]
impl DraftMessages for Streaming {
    async fn post(&self, text: &str, stop: bool) -> Result<String, BoxError> {
        let mut shown = self.0.shown.lock().unwrap();
        let id = format!("d{}", shown.len());
        shown.push(Shown::Draft(id.clone(), text.into(), stop));
        self.0
            .edits_at
            .lock()
            .unwrap()
            .push((id.clone(), tokio::time::Instant::now()));
        Ok(id)
    }

    async fn edit(&self, id: &str, text: &str, stop: bool) -> Result<(), BoxError> {
        self.0
            .shown
            .lock()
            .unwrap()
            .push(Shown::Edit(id.into(), text.into(), stop));
        self.0
            .edits_at
            .lock()
            .unwrap()
            .push((id.into(), tokio::time::Instant::now()));
        Ok(())
    }

    fn pieces(&self, text: &str) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        chars.chunks(PIECE).map(|c| c.iter().collect()).collect()
    }
}

/// Not a `Draw`: none of the shared delivery loops (the defaults post with `post_reply`).
impl OutboxDelivery for Streaming {}

#[async_trait]
impl ChannelOutbox for Streaming {
    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        Outbox(self.0.clone()).post_reply(thread, reply).await
    }

    async fn ack(&self, thread: &Thread, message_id: &str, ack: Ack) -> Result<(), BoxError> {
        Outbox(self.0.clone()).ack(thread, message_id, ack).await
    }

    async fn start_stream(
        &self,
        _thread: &Thread,
    ) -> Result<Option<Box<dyn ReplyStream>>, BoxError> {
        Ok(Some(Box::new(EditStream::new(Streaming(self.0.clone())))))
    }

    fn pieces(&self, text: &str) -> Vec<String> {
        DraftMessages::pieces(self, text)
    }

    async fn edit_message(&self, at: MessageAt<'_>, text: &str) -> Result<(), BoxError> {
        {
            let mut failing = self.0.failing_edits.lock().unwrap();
            if *failing > 0 {
                *failing -= 1;
                return Err(Box::new(frogbot_model::Transient::new("503 from the fake")));
            }
        }
        self.edit(at.id, text, false).await
    }

    async fn thread_history(&self, history: History<'_>) -> Result<Vec<ThreadMessage>, BoxError> {
        let History { before, limit, .. } = history;
        *self.0.history_reads.lock().unwrap() += 1;
        let all = self.0.history.lock().unwrap().clone();
        let earlier: Vec<ThreadMessage> = all.into_iter().take_while(|m| m.id != before).collect();
        Ok(earlier[earlier.len().saturating_sub(limit)..].to_vec())
    }
}

struct Outbox(Arc<Recorder>);

/// Not a `Draw`: none of the shared delivery loops (the defaults post with `post_reply`).
impl OutboxDelivery for Outbox {}

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
        let takes = *self.0.working_takes.lock().unwrap();
        tokio::time::sleep(takes).await;
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
            self.engine.chats().state(&chat).await.unwrap() == TurnState::Idle
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
        // Once a second person speaks, the model sees every speaker's name.
        ["thinking… re: gate first", "re: second", "re: bob: third"]
    );
}

/// A person edits or deletes their message on the platform while it waits in the queue: it runs
/// with the new text, or never; an edit of a message that already ran, or of one FrogBot never
/// took, changes nothing.
async fn platform_edits_and_deletions_change_the_queue(url: &str) {
    let w = world(url, 20).await;
    w.say("m1", "ada", "gate first").await;
    w.until_ack("m1", Ack::Working).await;
    w.say("m2", "ada", "secnod").await;
    w.say("m3", "ada", "third").await;
    w.until_ack("m3", Ack::Seen).await;
    let e = &w.engine;
    assert_eq!(
        e.channels()
            .message_changed(PLATFORM, THREAD, "m2", Some("second".into()))
            .await
            .unwrap(),
        ChangeOutcome::Edited
    );
    assert_eq!(
        e.channels()
            .message_changed(PLATFORM, THREAD, "m3", None)
            .await
            .unwrap(),
        ChangeOutcome::Deleted
    );
    assert_eq!(
        e.channels()
            .message_changed(PLATFORM, THREAD, "m1", Some("gate changed".into()))
            .await
            .unwrap(),
        ChangeOutcome::AlreadyRan
    );
    assert_eq!(
        e.channels()
            .message_changed(PLATFORM, "another-thread", "m2", None)
            .await
            .unwrap(),
        ChangeOutcome::Unknown
    );
    assert_eq!(
        e.channels()
            .message_changed(PLATFORM, THREAD, "never-taken", Some("x".into()))
            .await
            .unwrap(),
        ChangeOutcome::Unknown
    );
    w.gate.add_permits(1);
    w.until_ack("m2", Ack::Done).await;
    w.idle().await;
    let posts: Vec<String> = w
        .shown()
        .into_iter()
        .filter_map(|s| match s {
            Shown::Post(t) if t != QUEUED_TEXT => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(posts, ["thinking… re: gate first", "re: second"]);
    assert!(
        w.acks_of("m3").iter().all(|a| *a == Ack::Seen),
        "the deleted message never ran"
    );
}

/// A platform edit racing the promotion of the message it edits (the turn before it ending at
/// that moment): exactly one text runs, the one the outcome names (`Edited`: the new text;
/// `AlreadyRan`: the old one, which the person is told ran as sent).
async fn an_edit_racing_the_promotion_runs_exactly_one_text(url: &str) {
    let w = world(url, 20).await;
    let mut outcomes = Vec::new();
    for i in 0..8 {
        let (gate, queued) = (format!("g{i}"), format!("q{i}"));
        w.say(&gate, "ada", &format!("gate {i}")).await;
        w.until_ack(&gate, Ack::Working).await;
        w.say(&queued, "ada", &format!("old {i}")).await;
        w.until_ack(&queued, Ack::Seen).await;
        let edit = w.engine.channels().message_changed(
            PLATFORM,
            THREAD,
            &queued,
            Some(format!("new {i}")),
        );
        let (outcome, ()) = tokio::join!(edit, async { w.gate.add_permits(1) });
        let outcome = outcome.unwrap();
        w.until_ack(&queued, Ack::Done).await;
        w.idle().await;
        let posts: Vec<String> = w
            .shown()
            .into_iter()
            .filter_map(|s| match s {
                Shown::Post(t) => Some(t),
                _ => None,
            })
            .collect();
        let (old, new) = (format!("re: old {i}"), format!("re: new {i}"));
        let ran = (posts.contains(&old), posts.contains(&new));
        match outcome {
            ChangeOutcome::Edited => assert_eq!(ran, (false, true), "{i}: {posts:?}"),
            ChangeOutcome::AlreadyRan => assert_eq!(ran, (true, false), "{i}: {posts:?}"),
            other => panic!("{i}: {other:?}"),
        }
        outcomes.push(outcome);
    }
    assert_eq!(outcomes.len(), 8);
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
        w.engine.agents().stop(&chat, None),
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
    assert_eq!(
        w.engine.chats().state(&chat).await.unwrap(),
        TurnState::Running
    );
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
        .channels()
        .message(PLATFORM, THREAD, said("m1", "ada", "hi"))
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

/// A world whose outbox streams, with `settings` and a model playing `script`.
async fn streaming_world(
    url: &str,
    settings: ChannelSettings,
    config: EngineConfig,
    model: ScriptedModel,
) -> World {
    let store = frogbot_testkit::open_store(url).await;
    let rec = Arc::new(Recorder::default());
    let engine = Engine::new(
        store.clone(),
        vec![frogbot_testkit::offer("main", model)],
        vec![],
        config,
    )
    .with_channel(Channel {
        platform: PLATFORM.into(),
        questions: None,
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: Some(Arc::new(Streaming(rec.clone()))),
    })
    .with_channel_settings(PLATFORM, settings)
    .unwrap();
    World {
        engine,
        rec,
        gate: Arc::new(Semaphore::new(0)),
        _store: store,
    }
}

fn words(n: usize, pause: Duration) -> Vec<ScriptEvent> {
    let mut events = Vec::new();
    for i in 0..n {
        events.push(ScriptEvent::Event(ModelEvent::TextDelta(format!("w{i} "))));
        events.push(ScriptEvent::Pause(pause));
    }
    events.extend(reply("end."));
    events
}

/// Text appears as the model writes it: after Seen and Working, a first message with a Stop
/// control, edits no more often than the interval, more messages past the platform's limit, and a
/// final state of the complete reply without the control — then Done. Nothing is posted whole.
async fn a_streamed_reply_shows_text_as_it_comes_and_ends_complete(url: &str) {
    let interval = Duration::from_millis(150);
    let model = ScriptedModel::new(|_req: &ModelRequest| words(40, Duration::from_millis(10)));
    let w = streaming_world(
        url,
        ChannelSettings {
            stream_interval: interval,
            ..Default::default()
        },
        EngineConfig::default(),
        model,
    )
    .await;
    w.say("m1", "ada", "talk").await;
    w.until_ack("m1", Ack::Done).await;
    let shown = w.shown();
    let full: String = (0..40).map(|i| format!("w{i} ")).collect::<String>() + "end.";
    // Seen, Working, then the stream; Done last.
    assert_eq!(shown[0], Shown::Ack("m1".into(), Ack::Seen), "{shown:?}");
    assert_eq!(shown[1], Shown::Ack("m1".into(), Ack::Working), "{shown:?}");
    // The first message waits for a start a notification can show (here 80 characters), then
    // shows the text in pieces, the last with Stop.
    assert!(
        matches!(&shown[2], Shown::Draft(id, text, _) if id == "d2" && full.starts_with(text.as_str())),
        "the first text: {shown:?}"
    );
    assert!(
        shown
            .iter()
            .any(|s| matches!(s, Shown::Draft(_, _, true) | Shown::Edit(_, _, true))),
        "a Stop control while streaming: {shown:?}"
    );
    assert_eq!(shown.last(), Some(&Shown::Ack("m1".into(), Ack::Done)));
    assert!(
        !shown.iter().any(|s| matches!(s, Shown::Post(_))),
        "streamed, not posted whole: {shown:?}"
    );
    // The final state: each message holds its piece of the complete reply, no Stop control.
    let mut last_text: std::collections::BTreeMap<String, (String, bool)> = Default::default();
    let mut order = Vec::new();
    for s in &shown {
        if let Shown::Draft(id, t, stop) | Shown::Edit(id, t, stop) = s {
            if !order.contains(id) {
                order.push(id.clone());
            }
            last_text.insert(id.clone(), (t.clone(), *stop));
        }
    }
    let finals: Vec<(String, bool)> = order.iter().map(|id| last_text[id].clone()).collect();
    let pieces: Vec<(String, bool)> = full
        .chars()
        .collect::<Vec<_>>()
        .chunks(PIECE)
        .map(|c| (c.iter().collect(), false))
        .collect();
    assert_eq!(finals, pieces, "split at the limit, complete");
    // Throttled: one message is updated at most once per interval (the final state aside).
    let at = w.rec.edits_at.lock().unwrap().clone();
    for id in &order {
        let times: Vec<_> = at
            .iter()
            .filter(|(i, _)| i == id)
            .map(|(_, t)| *t)
            .collect();
        for pair in times.windows(2).take(times.len().saturating_sub(2)) {
            assert!(
                pair[1] - pair[0] >= interval - Duration::from_millis(5),
                "{id} updated twice within the interval"
            );
        }
    }
    // 40 words over ≥ 400 ms at 150 ms: a handful of updates, not one per word.
    assert!(at.len() < 20, "{} updates", at.len());
}

/// `stream = false`: the reply is posted whole at the end, as before.
async fn stream_off_posts_the_reply_whole(url: &str) {
    let model = ScriptedModel::new(|_req: &ModelRequest| words(3, Duration::from_millis(5)));
    let w = streaming_world(
        url,
        ChannelSettings {
            stream: false,
            ..Default::default()
        },
        EngineConfig::default(),
        model,
    )
    .await;
    w.say("m1", "ada", "talk").await;
    w.until_ack("m1", Ack::Done).await;
    assert_eq!(
        w.shown(),
        vec![
            Shown::Ack("m1".into(), Ack::Seen),
            Shown::Ack("m1".into(), Ack::Working),
            Shown::Post("w0 w1 w2 end.".into()),
            Shown::Ack("m1".into(), Ack::Done),
        ]
    );
}

/// The Stop control: the driving user stops the turn; anyone else is refused and it runs on.
async fn the_stop_control_works_for_the_driver_only(url: &str) {
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let model = ScriptedModel::new(move |_req: &ModelRequest| {
        let mut e = vec![ScriptEvent::Event(ModelEvent::TextDelta("partial ".into()))];
        e.push(ScriptEvent::Gate(g.clone()));
        e.extend(reply("never"));
        e
    });
    let w = streaming_world(url, Default::default(), EngineConfig::default(), model).await;
    let chat = channel_chat_id(PLATFORM, THREAD);
    let user = |id: &str| PlatformUser {
        id: id.into(),
        name: None,
        is_bot: false,
    };
    assert_eq!(
        w.engine
            .channels()
            .stop(PLATFORM, THREAD, &user("ada"))
            .await
            .unwrap(),
        StopOutcome::NotRunning
    );
    w.say("m1", "ada", "go").await;
    eventually("the first text shown", WAIT, async || {
        w.shown().iter().any(|s| matches!(s, Shown::Draft(..)))
    })
    .await;
    assert_eq!(
        w.engine
            .channels()
            .stop(PLATFORM, THREAD, &user("bob"))
            .await
            .unwrap(),
        StopOutcome::NotDriver
    );
    assert_eq!(
        w.engine.chats().state(&chat).await.unwrap(),
        TurnState::Running
    );
    assert_eq!(
        w.engine
            .channels()
            .stop(PLATFORM, THREAD, &user("ada"))
            .await
            .unwrap(),
        StopOutcome::Stopping
    );
    w.until_ack("m1", Ack::Done).await;
    let last_edit = w
        .shown()
        .into_iter()
        .rev()
        .find_map(|s| match s {
            Shown::Edit(_, t, stop) | Shown::Draft(_, t, stop) => Some((t, stop)),
            _ => None,
        })
        .unwrap();
    assert!(last_edit.0.starts_with("partial"), "{last_edit:?}");
    assert!(last_edit.0.contains(STOPPED_TEXT), "{last_edit:?}");
    assert!(!last_edit.1, "the Stop control is gone");
    assert_eq!(gate.available_permits(), 0, "cut off, not waited for");
}

/// A mention in a thread the bot has not seen: the model's request holds the thread's earlier
/// messages with their speakers' names (within the budget, newest kept), read once.
async fn a_mention_mid_thread_reads_the_earlier_messages_with_names(url: &str) {
    let model = ScriptedModel::new(|_req: &ModelRequest| reply("ok"));
    let requests = model.clone();
    let w = streaming_world(
        url,
        ChannelSettings {
            context_messages: 3,
            stream: false,
            ..Default::default()
        },
        EngineConfig::default(),
        model,
    )
    .await;
    *w.rec.history.lock().unwrap() = vec![
        said("h0", "zed", "too old to be read"),
        said("h1", "alice", "the build is red"),
        said("h2", "bob", "since the last merge"),
        said("h3", "alice", "who can look?"),
        said("m1", "carol", "@bot what broke?"),
    ];
    w.say("m1", "carol", "@bot what broke?").await;
    w.until_ack("m1", Ack::Done).await;
    w.say("m2", "alice", "thanks").await;
    w.until_ack("m2", Ack::Done).await;
    assert_eq!(
        *w.rec.history_reads.lock().unwrap(),
        1,
        "read once, for the first message"
    );
    let reqs = requests.requests();
    let first = last_user(&reqs[0]);
    assert_eq!(
        first,
        "[Earlier messages in this thread]\nalice: the build is red\nbob: since the last merge\nalice: who can look?\n[End of earlier messages]\n\ncarol: @bot what broke?"
    );
    assert_eq!(
        last_user(&reqs[1]),
        "alice: thanks",
        "every speaker is named"
    );
}

/// One person in a thread: the model sees the text as written; a second person names everyone,
/// the first person's earlier messages included.
async fn speakers_are_named_once_a_second_person_speaks(url: &str) {
    let model = ScriptedModel::new(|_req: &ModelRequest| reply("ok"));
    let requests = model.clone();
    let w = streaming_world(
        url,
        ChannelSettings {
            stream: false,
            ..Default::default()
        },
        EngineConfig::default(),
        model,
    )
    .await;
    w.say("m1", "ada", "first").await;
    w.until_ack("m1", Ack::Done).await;
    w.say("m2", "ada", "second").await;
    w.until_ack("m2", Ack::Done).await;
    w.say("m3", "bob", "third").await;
    w.until_ack("m3", Ack::Done).await;
    let reqs = requests.requests();
    assert_eq!(last_user(&reqs[1]), "second");
    let users: Vec<String> = reqs[2]
        .messages
        .iter()
        .filter_map(|m| match m {
            ModelMessage::User { text } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(users, ["ada: first", "ada: second", "bob: third"]);
}

/// The thread context stays within its character budget, keeping the newest messages.
async fn the_thread_context_keeps_to_its_budget(url: &str) {
    let model = ScriptedModel::new(|_req: &ModelRequest| reply("ok"));
    let requests = model.clone();
    let w = streaming_world(
        url,
        ChannelSettings {
            context_chars: 30,
            stream: false,
            ..Default::default()
        },
        EngineConfig::default(),
        model,
    )
    .await;
    *w.rec.history.lock().unwrap() = vec![
        said("h1", "alice", "a long message that does not fit"),
        said("h2", "bob", "short one"),
        said("m1", "carol", "hi"),
    ];
    w.say("m1", "carol", "hi").await;
    w.until_ack("m1", Ack::Done).await;
    let first = last_user(&requests.requests()[0]);
    assert!(first.contains("bob: short one"), "{first}");
    assert!(!first.contains("alice"), "{first}");
}

/// A process dies mid-turn, and before any sweep finds it the person's next message reaches
/// another process, whose send takes the ended lease over and finds the turn interrupted. That
/// message's Seen waits in the thread's queue until its send returns, so the send may not wait
/// for the interrupted notice queued behind it (regression: it did, and the chat hung for good —
/// then the job worker, sweeping the same chat, and with it every job of the process).
async fn a_message_that_takes_an_ended_lease_over_is_answered(url: &str) {
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let model = ScriptedModel::new(move |req: &ModelRequest| {
        if last_user(req).contains("go") {
            vec![
                ScriptEvent::Event(ModelEvent::TextDelta("half an ".into())),
                ScriptEvent::Gate(g.clone()),
            ]
        } else {
            reply("here again")
        }
    });
    let calls = model.clone();
    let a = streaming_world(url, Default::default(), Default::default(), model.clone()).await;
    a.say("m1", "ada", "go").await;
    eventually("the first turn runs", WAIT, async || {
        !calls.requests().is_empty()
    })
    .await;
    // The process stops past its grace: the turn is cut off, its lease ended.
    a.engine.drain(Duration::from_millis(20)).await;
    let b = streaming_world(url, Default::default(), Default::default(), model).await;
    let sent = tokio::time::timeout(WAIT, b.say("m2", "ada", "and now?")).await;
    assert!(
        sent.is_ok(),
        "the message's send waited behind its own Seen"
    );
    b.until_ack("m2", Ack::Done).await;
    let shown = b.shown();
    let notice = Shown::Post(failure_text("interrupted").into());
    let at = |s: &Shown| shown.iter().position(|x| x == s);
    assert!(at(&notice).is_some(), "{shown:?}");
    assert!(
        shown
            .iter()
            .any(|s| matches!(s, Shown::Post(t) | Shown::Draft(_, t, _) | Shown::Edit(_, t, _) if t.contains("here again"))),
        "{shown:?}"
    );
    assert_eq!(b.acks_of("m2").first(), Some(&Ack::Seen), "{shown:?}");
}

/// A process dies while a reply streams; the process that finds the turn interrupted leaves the
/// streamed message with its partial text and the mark, and says what happened.
async fn a_stream_cut_off_by_a_crash_is_marked_interrupted(url: &str) {
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let model = ScriptedModel::new(move |_req: &ModelRequest| {
        vec![
            ScriptEvent::Event(ModelEvent::TextDelta("half an ".into())),
            ScriptEvent::Pause(Duration::from_millis(300)),
            ScriptEvent::Event(ModelEvent::TextDelta("answer".into())),
            ScriptEvent::Gate(g.clone()),
        ]
    });
    let config = EngineConfig {
        partial_checkpoint: Duration::ZERO,
        ..Default::default()
    };
    let a = streaming_world(url, Default::default(), config.clone(), model.clone()).await;
    a.say("m1", "ada", "go").await;
    eventually(
        "the stream started and was checkpointed",
        WAIT,
        async || {
            let chat = channel_chat_id(PLATFORM, THREAD);
            let stored = a.engine.chats().messages(&chat).await.unwrap();
            stored.iter().any(|m| !m.message.metadata.drafts.is_empty())
        },
    )
    .await;
    // The process stops past its grace: the turn is cut off, its lease ended.
    a.engine.drain(Duration::from_millis(20)).await;
    let b = streaming_world(url, Default::default(), config, model).await;
    assert_eq!(b.engine.ops().recover_expired_leases().await.unwrap(), 1);
    eventually("the mark and the notice", WAIT, async || {
        let shown = b.shown();
        shown.contains(&Shown::Edit(
            "d2".into(),
            format!("half an answer {INTERRUPTED_MARK}"),
            false,
        )) && shown.contains(&Shown::Post(failure_text("interrupted").into()))
    })
    .await;
}

/// The process that finds a cut-off stream cannot edit its messages at first (a transient
/// failure): the edit is tried again, never skipped (it was, and the piece was lost).
async fn a_cut_off_streams_edit_that_fails_is_retried(url: &str) {
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let model = ScriptedModel::new(move |_req: &ModelRequest| {
        vec![
            ScriptEvent::Event(ModelEvent::TextDelta("half an ".into())),
            ScriptEvent::Pause(Duration::from_millis(300)),
            ScriptEvent::Event(ModelEvent::TextDelta("answer".into())),
            ScriptEvent::Gate(g.clone()),
        ]
    });
    let config = EngineConfig {
        partial_checkpoint: Duration::ZERO,
        ..Default::default()
    };
    let a = streaming_world(url, Default::default(), config.clone(), model.clone()).await;
    a.say("m1", "ada", "go").await;
    eventually("the stream was checkpointed", WAIT, async || {
        let chat = channel_chat_id(PLATFORM, THREAD);
        let stored = a.engine.chats().messages(&chat).await.unwrap();
        stored.iter().any(|m| !m.message.metadata.drafts.is_empty())
    })
    .await;
    a.engine.drain(Duration::from_millis(20)).await;
    let b = streaming_world(url, Default::default(), config, model).await;
    *b.rec.failing_edits.lock().unwrap() = 2;
    assert_eq!(b.engine.ops().recover_expired_leases().await.unwrap(), 1);
    eventually("the mark, after the failed edits", WAIT, async || {
        b.shown().contains(&Shown::Edit(
            "d2".into(),
            format!("half an answer {INTERRUPTED_MARK}"),
            false,
        ))
    })
    .await;
    assert_eq!(*b.rec.failing_edits.lock().unwrap(), 0);
    let posted: Vec<Shown> = b
        .shown()
        .into_iter()
        .filter(|s| matches!(s, Shown::Post(t) if t.contains("answer")))
        .collect();
    assert!(
        posted.is_empty(),
        "the text is drawn in its message, not posted again: {posted:?}"
    );
}

/// A reply whose turn ended before its first text reached the show queue (a fast model behind a
/// slow progress sign): its own delivery job, already written, is no reply owed before it — it
/// is still streamed (it was posted whole: Slack's engine test caught it).
async fn a_fast_reply_behind_a_busy_queue_still_streams(url: &str) {
    let model = ScriptedModel::new(|_req: &ModelRequest| reply("quick answer"));
    let w = streaming_world(url, Default::default(), EngineConfig::default(), model).await;
    *w.rec.working_takes.lock().unwrap() = Duration::from_millis(300);
    w.say("m1", "ada", "go").await;
    w.until_ack("m1", Ack::Done).await;
    let shown = w.shown();
    assert!(
        shown
            .iter()
            .any(|s| matches!(s, Shown::Draft(_, t, _) if t == "quick answer")),
        "streamed: {shown:?}"
    );
    assert!(
        !shown.iter().any(|s| matches!(s, Shown::Post(_))),
        "not posted whole: {shown:?}"
    );
}

/// A model that goes silent mid-answer: its step is aborted after `stream_idle_timeout`, the text
/// it sent is kept, the thread is told the reply failed, and the chat is free again.
async fn a_silent_model_times_out_and_the_thread_is_told(url: &str) {
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let model = ScriptedModel::new(move |_req: &ModelRequest| {
        vec![
            ScriptEvent::Event(ModelEvent::TextDelta("half an ".into())),
            ScriptEvent::Gate(g.clone()),
        ]
    });
    let w = streaming_world(
        url,
        Default::default(),
        EngineConfig {
            stream_idle_timeout: Duration::from_millis(200),
            ..Default::default()
        },
        model,
    )
    .await;
    w.say("m1", "ada", "go").await;
    w.until_ack("m1", Ack::Failed).await;
    w.idle().await;
    // The streamed messages end as the partial text and the notice (over several pieces).
    let mut finals: Vec<(String, String)> = Vec::new();
    for s in w.shown() {
        if let Shown::Draft(id, t, _) | Shown::Edit(id, t, _) = s {
            match finals.iter_mut().find(|(i, _)| *i == id) {
                Some(f) => f.1 = t,
                None => finals.push((id, t)),
            }
        }
    }
    let shown: String = finals.into_iter().map(|(_, t)| t).collect();
    assert_eq!(
        shown,
        format!("half an \n\n{}", failure_text("model-timeout"))
    );
    let chat = channel_chat_id(PLATFORM, THREAD);
    let stored = w.engine.chats().messages(&chat).await.unwrap();
    let reply = stored.last().unwrap();
    assert_eq!(
        reply
            .message
            .metadata
            .error
            .as_ref()
            .map(|e| e.code.as_str()),
        Some("model-timeout")
    );
    assert_eq!(reply.message.text(), "half an ", "the partial step is kept");
    assert_eq!(gate.available_permits(), 0);
}

/// A model that keeps trickling text never goes idle, but its step still ends at `step_timeout`.
async fn a_step_that_runs_too_long_times_out(url: &str) {
    let model = ScriptedModel::new(|_req: &ModelRequest| {
        let mut e = Vec::new();
        for _ in 0..1_000 {
            e.push(ScriptEvent::Event(ModelEvent::TextDelta("x".into())));
            e.push(ScriptEvent::Pause(Duration::from_millis(20)));
        }
        e
    });
    let w = streaming_world(
        url,
        ChannelSettings {
            stream: false,
            ..Default::default()
        },
        EngineConfig {
            stream_idle_timeout: Duration::from_secs(10),
            step_timeout: Duration::from_millis(400),
            ..Default::default()
        },
        model,
    )
    .await;
    let started = tokio::time::Instant::now();
    w.say("m1", "ada", "go").await;
    w.until_ack("m1", Ack::Failed).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "not the idle timeout"
    );
    let posted = w
        .shown()
        .into_iter()
        .find_map(|s| match s {
            Shown::Post(t) => Some(t),
            _ => None,
        })
        .unwrap();
    assert!(posted.starts_with('x'), "{posted}");
    assert!(posted.ends_with(failure_text("model-timeout")), "{posted}");
}

frogbot_testkit::backends!(
    a_message_is_seen_worked_on_answered_and_done_in_that_order,
    progress_repeats_while_a_turn_runs,
    queued_messages_keep_seen_and_get_one_note_per_queue,
    platform_edits_and_deletions_change_the_queue,
    an_edit_racing_the_promotion_runs_exactly_one_text,
    a_failing_model_posts_a_short_notice_and_failed,
    running_out_of_steps_says_so,
    the_driver_stops_a_turn_and_others_cannot,
    a_channels_settings_choose_its_model_and_can_turn_acks_off,
    a_streamed_reply_shows_text_as_it_comes_and_ends_complete,
    stream_off_posts_the_reply_whole,
    the_stop_control_works_for_the_driver_only,
    a_mention_mid_thread_reads_the_earlier_messages_with_names,
    speakers_are_named_once_a_second_person_speaks,
    the_thread_context_keeps_to_its_budget,
    a_stream_cut_off_by_a_crash_is_marked_interrupted,
    a_message_that_takes_an_ended_lease_over_is_answered,
    a_cut_off_streams_edit_that_fails_is_retried,
    a_fast_reply_behind_a_busy_queue_still_streams,
    a_silent_model_times_out_and_the_thread_is_told,
    a_step_that_runs_too_long_times_out,
);
