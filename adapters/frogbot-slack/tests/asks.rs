//! Asks to a Slack user (their DM) and to a channel (a new thread), through the adapter's outbox
//! (`ChannelOutbox::ask_thread`) against the fake Slack and slack-morphism's real client: the
//! first message is posted once per key (message metadata, found again in
//! `conversations.history`), a bad target is refused before anything is posted, and a click on
//! the ask's card in the new thread reaches the ask through the adapter's HTTP routes.

use std::time::Duration;

use frogbot_channel::Adapter;
use frogbot_channel::outbox::AskTo;
use frogbot_core::agent::ask::{ASK_MODEL, AskId, AskState, ask_parts};
use frogbot_core::agent::scripted::{ScriptedModel, reply};
use frogbot_core::agent::{
    AskPlace, ChannelOutbox, Engine, ModelRequest, SendMessage, Sent, channel_chat_id,
};
use frogbot_core::model::{ChannelRef, Delivery, QuestionInput};
use frogbot_model::faults::{Fault, FaultPlan};
use frogbot_slack::PLATFORM;
use frogbot_slack::channel::SlackAdapter;
use frogbot_slack::testing::{FakeSlack, Signature};
use frogbot_testkit::eventually;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

struct World {
    fake: FakeSlack,
    slack: SlackAdapter,
    base: String,
    engine: Engine,
    _db: frogbot_testkit::TestDb,
}

async fn world() -> World {
    world_with(ScriptedModel::new(|_: &ModelRequest| reply("unused"))).await
}

async fn world_with(model: ScriptedModel) -> World {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("frogbot_slack=debug,frogbot_core=info")
        .try_init();
    let fake = FakeSlack::start().await;
    let slack = frogbot_slack::channel::connect(fake.http_config())
        .await
        .unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let engine = frogbot_testkit::engine_with(store, model).with_channel(slack.channel());
    let app = slack.routes(&engine.handle()).expect("HTTP routes");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    World {
        fake,
        slack,
        base,
        engine,
        _db: db,
    }
}

/// The keys (`event_payload.key`) of the `frogbot_ask` roots of `channel`.
fn ask_keys(fake: &FakeSlack, channel: &str) -> Vec<String> {
    fake.channel_messages(channel)
        .iter()
        .filter_map(|m| {
            let meta = m.metadata.as_ref()?;
            (meta["event_type"] == "frogbot_ask")
                .then(|| meta["event_payload"]["key"].as_str().map(str::to_owned))
                .flatten()
        })
        .collect()
}

/// An ask to a user: their DM is opened, the ask's text starts a thread there (carrying the key),
/// the engine's ask posts its card in that thread, and the person's click on it — delivered to
/// the adapter's interactivity route as Slack sends it — answers the ask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_to_a_user_starts_a_thread_in_their_dm_and_a_click_there_answers_it() {
    let w = world().await;
    let text = "Deploy v1.4 to production?";
    let thread = w
        .slack
        .ask_thread(AskTo::new(AskPlace::User("U0123ABCD"), text, "msg1"))
        .await
        .unwrap();

    let dm = w.fake.dm_channel("U0123ABCD").expect("a DM opened");
    assert!(dm.starts_with('D'), "{dm}");
    let opened = w.fake.calls("conversations.open");
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0].body["users"], "U0123ABCD");
    let roots = w.fake.channel_messages(&dm);
    assert_eq!(roots.len(), 1, "one root in the DM");
    assert_eq!(thread, format!("{dm}:{}", roots[0].ts));
    assert_eq!(roots[0].text, text);
    assert_eq!(ask_keys(&w.fake, &dm), ["msg1"]);
    // The history was read (with metadata) before posting.
    let read = w.fake.calls("conversations.history");
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].body["channel"], dm.as_str());
    assert_eq!(read[0].body["include_all_metadata"], "true");
    assert_eq!(read[0].body["limit"], "100");
    // The window: the last 24 hours.
    let oldest: f64 = read[0].body["oldest"].as_str().unwrap().parse().unwrap();
    let day_ago = (frogbot_model::now_millis() / 1000 - 24 * 3600) as f64;
    assert!((oldest - day_ago).abs() < 60.0, "{oldest} vs {day_ago}");

    // The ask, as `POST /api/asks` sends it to the thread's chat.
    let chat = channel_chat_id(PLATFORM, &thread);
    let input: QuestionInput = serde_json::from_value(json!({"questions": [
        {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]}
    ]}))
    .unwrap();
    let sent = w
        .engine
        .agents()
        .send(SendMessage {
            chat_id: chat.clone(),
            id: Some("msg1".into()),
            parts: ask_parts(text, &input, "msg1"),
            author: None,
            delivery: Delivery::Queue,
            model: Some(ASK_MODEL.into()),
            reasoning: None,
            channel: Some(ChannelRef {
                platform: PLATFORM.into(),
                thread: thread.clone(),
            }),
            speaker: None,
            context: None,
        })
        .await
        .unwrap();
    let Sent::Started(handle) = sent else {
        panic!("the ask starts a turn")
    };
    let _ = handle.done.await;
    let id = AskId {
        chat: chat.clone(),
        message: "msg1".into(),
    };
    assert_eq!(
        w.engine
            .questions()
            .ask_status(&id)
            .await
            .unwrap()
            .unwrap()
            .state,
        AskState::Open
    );

    // The card is a reply in the DM thread.
    let card = w
        .fake
        .thread_messages(&thread)
        .into_iter()
        .find(|m| m.bot && w.fake.element(&m.id(), "prod").is_some())
        .expect("the ask's card in the DM thread");
    assert_eq!(card.channel, dm);
    assert_eq!(card.thread_ts.as_deref(), Some(roots[0].ts.as_str()));

    // The person clicks "prod" there; Slack posts the click to the app.
    let payload = w.fake.click("U0123ABCD", &card.id(), "prod").unwrap();
    assert_eq!(payload["container"]["channel_id"], dm.as_str());
    let res = w
        .fake
        .post_interaction(&w.base, &payload, Signature::Good, None)
        .await;
    assert_eq!(res.status(), 200);
    eventually("the ask answered", WAIT, async || {
        w.engine
            .questions()
            .ask_status(&id)
            .await
            .unwrap()
            .is_some_and(|s| s.state == AskState::Answered)
    })
    .await;
    let status = w.engine.questions().ask_status(&id).await.unwrap().unwrap();
    assert_eq!(status.answers.unwrap().answers[0].selected, ["prod"]);
    assert_eq!(w.fake.controls(&card.id()), 0, "the card is closed");
}

/// The same key twice (the second as if the first answer had been lost) gives the same thread
/// and one root, in a channel and in a DM; another key starts another thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_key_returns_the_same_thread_with_one_root() {
    let w = world().await;
    for place in [AskPlace::Thread("C0OPS"), AskPlace::User("W0123ABCD")] {
        let first = w
            .slack
            .ask_thread(AskTo::new(place, "Ship it?", "msg2"))
            .await
            .unwrap();
        let again = w
            .slack
            .ask_thread(AskTo::new(place, "Ship it?", "msg2"))
            .await
            .unwrap();
        assert_eq!(first, again, "{place:?}");
        let channel = first.split_once(':').unwrap().0.to_owned();
        assert_eq!(ask_keys(&w.fake, &channel), ["msg2"], "{place:?}");
        // Another key: another thread.
        let other = w
            .slack
            .ask_thread(AskTo::new(place, "Ship it?", "msg3"))
            .await
            .unwrap();
        assert_ne!(other, first);
        assert_eq!(ask_keys(&w.fake, &channel), ["msg2", "msg3"], "{place:?}");
        assert_eq!(
            w.slack
                .ask_thread(AskTo::new(place, "Ship it?", "msg2"))
                .await
                .unwrap(),
            first
        );
    }
    assert_eq!(w.fake.calls("chat.postMessage").len(), 4);
    assert_eq!(w.fake.dm_channel("W0123ABCD").as_deref(), Some("D0123ABCD"));
}

/// The first post is carried out but its answer is lost (the connection drops): the ask fails,
/// and its retry finds the root in the channel's history instead of posting a second one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_lost_answer_finds_the_root_posted() {
    let w = world().await;
    w.fake
        .set_faults(FaultPlan::new(7, 1.0).only(&[Fault::ResetAfterProcessing]));
    let lost = w
        .slack
        .ask_thread(AskTo::new(
            AskPlace::User("U0LOST"),
            "Rotate the keys?",
            "msg4",
        ))
        .await;
    assert!(lost.is_err(), "{lost:?}");
    w.fake.clear_faults();
    let dm = w.fake.dm_channel("U0LOST").unwrap();
    let roots = w.fake.channel_messages(&dm);
    assert_eq!(roots.len(), 1, "the first attempt posted");
    let thread = w
        .slack
        .ask_thread(AskTo::new(
            AskPlace::User("U0LOST"),
            "Rotate the keys?",
            "msg4",
        ))
        .await
        .unwrap();
    assert_eq!(thread, format!("{dm}:{}", roots[0].ts));
    assert_eq!(w.fake.channel_messages(&dm).len(), 1, "no second root");
}

/// A user id that is not Slack's (`U…` / `W…`), or a channel given by name, is refused with its
/// reason before any call; a user Slack does not know is refused by `conversations.open`.
/// Nothing is posted either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_target_errs_with_nothing_posted() {
    let w = world().await;
    let before = w.fake.count();
    for place in [
        AskPlace::User("@ana"),
        AskPlace::User("u0123abcd"),
        AskPlace::User("C0123ABCD"),
        AskPlace::Thread("#general"),
    ] {
        let e = w
            .slack
            .ask_thread(AskTo::new(place, "Hello?", "msg5"))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("not a Slack"), "{e}");
        assert!(!e.contains('\n'), "one line: {e}");
    }
    assert_eq!(w.fake.count(), before, "no call at all");

    w.fake
        .fail_method("conversations.open", Some("user_not_found"));
    let e = w
        .slack
        .ask_thread(AskTo::new(AskPlace::User("U0GONE"), "Hello?", "msg5"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("user_not_found"), "{e}");
    assert!(w.fake.calls("chat.postMessage").is_empty());
    assert!(w.fake.calls("conversations.history").is_empty());
}

/// The person's last message as the model sees it.
fn last_user(req: &ModelRequest) -> String {
    req.messages
        .iter()
        .rev()
        .find_map(|m| match m {
            frogbot_core::agent::ModelMessage::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Issue 37 on Slack: an agent's conversation with a person is a thread the agent started in
/// their DM (on a root message of its own). The person's top-level DM messages — each its own
/// thread, as before — go to the model; their replies in the agent's thread go to the agent's
/// inbox and get no model reply; the agent's messages appear in its thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_conversation_in_a_dm_is_its_own_thread_beside_the_persons_chat_with_the_model() {
    use frogbot_core::agent::{AgentMessage, AgentPlace, ChannelTarget};
    use frogbot_core::model::UserId;
    let model =
        ScriptedModel::new(|req: &ModelRequest| reply(&format!("echo: {}", last_user(req))));
    let w = world_with(model.clone()).await;
    let person = "U0123ABCD";
    let dm = format!("D{}", &person[1..]); // the fake's DM with the person
    let say = async |thread_ts: Option<&str>, text: &str| {
        let m = w.fake.user_message(&dm, thread_ts, person, text);
        let body = w.fake.event_callback(w.fake.message_event(&m, "im"));
        let res = w
            .fake
            .post_event(&w.base, &body, Signature::Good, None)
            .await;
        assert!(res.status().is_success(), "{}", res.status());
        m
    };
    let model_saw = |text: &str| model.requests().iter().any(|r| last_user(r).contains(text));

    // The person already talks with the model in their DM.
    let hello = say(None, "hello there").await;
    eventually("the model's answer", WAIT, async || {
        model_saw("hello there")
    })
    .await;

    // An agent opens a conversation with them: a root message of its own in the DM.
    let agent = UserId::new("deployer");
    let chat = w
        .engine
        .agents()
        .open_chat(
            Some(&agent),
            AgentPlace::Channel {
                platform: PLATFORM.into(),
                place: ChannelTarget::User(person.into()),
            },
            "Deploy v2 today?",
            "k1",
        )
        .await
        .unwrap();
    let thread = chat.channel.as_ref().unwrap().thread.clone();
    let root = thread
        .strip_prefix(&format!("{dm}:"))
        .expect("a thread in the DM")
        .to_owned();
    assert_ne!(
        root, hello.ts,
        "not the person's conversation with the model"
    );
    assert_ne!(
        chat.chat_id,
        channel_chat_id(PLATFORM, &format!("{dm}:{}", hello.ts))
    );

    // (c) The agent's message appears in its thread.
    w.engine
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
    eventually("the agent's message in its thread", WAIT, async || {
        w.fake
            .thread_messages(&thread)
            .iter()
            .filter(|m| m.bot)
            .count()
            == 2
    })
    .await;

    // (a) A plain DM message (top level) goes to the model, not to the agent.
    say(None, "how are frogs").await;
    eventually("the model's answer", WAIT, async || {
        model_saw("how are frogs")
    })
    .await;
    // (b) A reply in the agent's thread goes to the agent, not to the model.
    say(Some(&root), "yes, go").await;
    let items = w
        .engine
        .agents()
        .inbox_wait(Some(&agent), None, 50, WAIT)
        .await
        .unwrap();
    let texts: Vec<String> = items.iter().map(|i| i.message.text()).collect();
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert!(texts[0].contains("yes, go"), "{texts:?}");
    assert_eq!(items[0].chat_id, chat.chat_id);
    // Another reply in the person's own thread still goes to the model (its chat is theirs).
    say(Some(&hello.ts), "and toads?").await;
    eventually("the model's answer", WAIT, async || model_saw("and toads?")).await;
    assert!(
        w.engine
            .agents()
            .inbox(Some(&agent), None, 50)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!model_saw("yes, go"));
    let in_agent_thread: Vec<String> = w
        .fake
        .thread_messages(&thread)
        .iter()
        .filter(|m| m.bot)
        .map(|m| m.text.clone())
        .collect();
    assert!(
        in_agent_thread.iter().all(|t| !t.contains("echo")),
        "no model reply in the agent's thread: {in_agent_thread:?}"
    );
}

/// Issue 38: a modal submission that does not validate is answered within the acknowledgement
/// with `response_action: errors` naming its field, so the modal stays open with what was typed;
/// nothing is recorded, and the corrected submission answers the question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modal_answer_that_does_not_validate_keeps_the_modal_open_with_the_fields_error() {
    let w = world().await;
    let thread = w
        .slack
        .ask_thread(AskTo::new(
            AskPlace::Thread("C0FORMS"),
            "Scale the pods?",
            "msg2",
        ))
        .await
        .unwrap();
    let chat = channel_chat_id(PLATFORM, &thread);
    let input: QuestionInput = serde_json::from_value(json!({"questions": [
        {"header": "Pods", "question": "How many?", "kind": "number_input",
         "min": 0, "max": 50, "step": 5},
        {"header": "Note", "question": "Why?", "kind": "text_input"}
    ]}))
    .unwrap();
    let sent = w
        .engine
        .agents()
        .send(SendMessage {
            chat_id: chat.clone(),
            id: Some("msg2".into()),
            parts: ask_parts("Scale the pods?", &input, "msg2"),
            author: None,
            delivery: Delivery::Queue,
            model: Some(ASK_MODEL.into()),
            reasoning: None,
            channel: Some(ChannelRef {
                platform: PLATFORM.into(),
                thread: thread.clone(),
            }),
            speaker: None,
            context: None,
        })
        .await
        .unwrap();
    let Sent::Started(handle) = sent else {
        panic!("the ask starts a turn")
    };
    let _ = handle.done.await;
    let id = AskId {
        chat: chat.clone(),
        message: "msg2".into(),
    };
    let card = w
        .fake
        .thread_messages(&thread)
        .into_iter()
        .find(|m| m.bot && w.fake.element(&m.id(), "Answer…").is_some())
        .expect("the form card");
    // "Answer…" opens the modal (the receiver's views.open).
    let payload = w.fake.click("U0123ABCD", &card.id(), "Answer…").unwrap();
    let res = w
        .fake
        .post_interaction(&w.base, &payload, Signature::Good, None)
        .await;
    assert_eq!(res.status(), 200);
    let view = w.fake.views().pop().expect("the modal opened");
    let view_id = view["id"].as_str().unwrap().to_owned();
    let submit = async |fill: &[(&str, serde_json::Value)], edit: Option<&str>| {
        let mut payload = w.fake.submit_view("U0123ABCD", &view_id, fill).unwrap();
        if let Some(n) = edit {
            // What Slack's client would not let through (over `max_value`), sent anyway.
            payload["view"]["state"]["values"]["q0"]["fb1:m:0:text"]["value"] = json!(n);
        }
        let res = w
            .fake
            .post_interaction(&w.base, &payload, Signature::Good, None)
            .await;
        assert_eq!(res.status(), 200);
        res.text().await.unwrap()
    };
    let note = ("fb1:m:1:text", json!("traffic"));
    // 7 passes Slack's client (min and max) but not the step of 5; 60 is over the maximum.
    for (typed, edit) in [("7", None), ("45", Some("60"))] {
        let body = submit(&[("fb1:m:0:text", json!(typed)), note.clone()], edit).await;
        let body: serde_json::Value = serde_json::from_str(&body).expect("a JSON body");
        assert_eq!(body["response_action"], "errors", "{body}");
        let errors = body["errors"].as_object().unwrap();
        assert_eq!(errors.len(), 1, "{body}");
        let why = errors["q0"].as_str().expect("the number's block");
        assert!(why.contains("from 0 to 50"), "{why}");
        assert!(
            w.fake.views().iter().any(|v| v["id"] == view_id.as_str()),
            "the modal is still there"
        );
        assert_eq!(
            w.engine
                .questions()
                .ask_status(&id)
                .await
                .unwrap()
                .unwrap()
                .state,
            AskState::Open,
            "nothing recorded"
        );
    }
    assert!(
        w.fake.notices("U0123ABCD").is_empty(),
        "no notice beside it"
    );
    // Corrected: an empty acknowledgement closes the modal, and the ask is answered.
    let body = submit(&[("fb1:m:0:text", json!("45")), note.clone()], None).await;
    assert_eq!(body, "", "an empty 200 closes the modal");
    eventually("the ask answered", WAIT, async || {
        w.engine
            .questions()
            .ask_status(&id)
            .await
            .unwrap()
            .is_some_and(|s| s.state == AskState::Answered)
    })
    .await;
    let answers = w
        .engine
        .questions()
        .ask_status(&id)
        .await
        .unwrap()
        .unwrap()
        .answers;
    assert_eq!(answers.unwrap().answers[0].selected, ["45"]);
}
