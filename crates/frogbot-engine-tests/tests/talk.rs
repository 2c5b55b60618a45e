//! Agents outside FrogBot (issue 20): a chat bound to an external agent gets people's messages
//! and block events in the agent's inbox (no model turn), the agent's messages with blocks are
//! shown on the thread's platform and edited, patched, deleted, pinned and unpinned there, and
//! acknowledgements reach the person's message — on SQLite (`sqlite::…`) and PostgreSQL.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use frogbot_channel::outbox::AskTo;
use frogbot_core::BoxError;
use frogbot_core::agent::message_tools::{EDIT_MESSAGE_TOOL, SEND_MESSAGE_TOOL, SET_STATUS_TOOL};
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{
    AgentMessage, AgentPlace, AllowAll, AskPlace, Channel, ChannelMessageOutcome, ChannelOutbox,
    ChannelTarget, Delivery, Engine, EngineConfig, EventOutcome, ManualClock, MessageEdit,
    ModelMessage, ModelRequest, OutboxDelivery, SendMessage, Sent,
};
use frogbot_core::model::MessageAt;
use frogbot_core::model::{
    Ack, Block, ChatId, EventClick, MessagePart, PlatformUser, PrefixedIdentity, Thread,
    ThreadMessage, ThreadMessageMetadata, Transient, UiMessage, UserId, blocks_of,
};
use frogbot_core::store::DynStore;
use frogbot_testkit::eventually;
use serde_json::json;

const PLATFORM: &str = "test";
const WAIT: Duration = Duration::from_secs(20);

/// What the platform shows: messages by id (their text, title, block types), pins, acks, and
/// every call made.
#[derive(Default)]
struct Platform {
    next_id: AtomicUsize,
    shown: Mutex<Vec<(String, String)>>,
    pins: Mutex<Vec<String>>,
    acks: Mutex<Vec<(String, Ack)>>,
    calls: Mutex<Vec<String>>,
    fail_posts: Mutex<VecDeque<()>>,
    threads: Mutex<Vec<(String, String)>>,
}

impl Platform {
    fn calls(&self, prefix: &str) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.starts_with(prefix))
            .count()
    }
    fn text_of(&self, id: &str) -> Option<String> {
        self.shown
            .lock()
            .unwrap()
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, t)| t.clone())
    }
}

fn draw(m: &UiMessage) -> String {
    let blocks: Vec<String> = blocks_of(m)
        .iter()
        .map(|b| match &b.kind {
            // An app drawn with the address of its web view.
            frogbot_core::model::BlockKind::Html { url: Some(u), .. } => {
                format!("[{} <{u}>]", b.plain_text())
            }
            _ => format!("[{}]", b.plain_text()),
        })
        .collect();
    format!(
        "{}|{}|{}",
        m.metadata.title.clone().unwrap_or_default(),
        m.text(),
        blocks.join("")
    )
}

struct Outbox(Arc<Platform>);

/// Not a `Draw`: none of the shared delivery loops (the defaults post with `post_reply`).
impl OutboxDelivery for Outbox {}

#[async_trait]
impl ChannelOutbox for Outbox {
    async fn ask_thread(&self, ask: AskTo<'_>) -> Result<String, BoxError> {
        let p = &self.0;
        let (AskPlace::Thread(t) | AskPlace::User(t)) = ask.place;
        let mut threads = p.threads.lock().unwrap();
        if let Some((_, id)) = threads.iter().find(|(k, _)| k == ask.key) {
            return Ok(id.clone());
        }
        let id = format!("{t}/root-{}", threads.len() + 1);
        threads.push((ask.key.to_owned(), id.clone()));
        p.calls.lock().unwrap().push(format!("root {}", ask.text));
        Ok(id)
    }

    async fn post_reply(&self, _thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        self.0
            .calls
            .lock()
            .unwrap()
            .push(format!("reply {}", reply.text()));
        Ok(())
    }

    async fn ack(&self, _thread: &Thread, message_id: &str, ack: Ack) -> Result<(), BoxError> {
        self.0.acks.lock().unwrap().push((message_id.into(), ack));
        Ok(())
    }

    /// A turn's reply, shown as one message whose id is returned.
    async fn deliver(
        &self,
        _thread: &Thread,
        reply: &UiMessage,
        _delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError> {
        let p = &self.0;
        p.calls
            .lock()
            .unwrap()
            .push(format!("reply {}", reply.text()));
        let id = format!("r{}", p.next_id.fetch_add(1, Ordering::SeqCst));
        p.shown.lock().unwrap().push((id.clone(), draw(reply)));
        Ok(vec![id])
    }

    async fn post_message(
        &self,
        _thread: &Thread,
        message: &UiMessage,
        _delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError> {
        let p = &self.0;
        p.calls.lock().unwrap().push("post".into());
        if p.fail_posts.lock().unwrap().pop_front().is_some() {
            return Err(Box::new(Transient::new("HTTP 503")));
        }
        let id = format!("p{}", p.next_id.fetch_add(1, Ordering::SeqCst));
        p.shown.lock().unwrap().push((id.clone(), draw(message)));
        Ok(vec![id])
    }

    async fn edit_posted(
        &self,
        _thread: &Thread,
        posted: &[String],
        message: &UiMessage,
    ) -> Result<Vec<String>, BoxError> {
        let p = &self.0;
        p.calls
            .lock()
            .unwrap()
            .push(format!("edit {}", posted.join(",")));
        let mut shown = p.shown.lock().unwrap();
        for (id, text) in shown.iter_mut() {
            if posted.first() == Some(id) {
                *text = draw(message);
            }
        }
        Ok(posted.to_vec())
    }

    async fn delete_posted(&self, _thread: &Thread, posted: &[String]) -> Result<(), BoxError> {
        let p = &self.0;
        p.calls
            .lock()
            .unwrap()
            .push(format!("delete {}", posted.join(",")));
        p.shown
            .lock()
            .unwrap()
            .retain(|(id, _)| !posted.contains(id));
        Ok(())
    }

    async fn pin_posted(&self, at: MessageAt<'_>, pinned: bool) -> Result<(), BoxError> {
        let id = at.id;
        let p = &self.0;
        p.calls.lock().unwrap().push(format!("pin {id} {pinned}"));
        let mut pins = p.pins.lock().unwrap();
        pins.retain(|x| x != id);
        if pinned {
            pins.push(id.to_owned());
        }
        Ok(())
    }
}

struct World {
    engine: Engine,
    clock: Arc<ManualClock>,
    platform: Arc<Platform>,
    model_calls: Arc<AtomicUsize>,
    store: DynStore,
}

async fn world(url: &str) -> World {
    world_over(frogbot_testkit::open_store(url).await)
}

fn world_over(store: DynStore) -> World {
    world_configured(store, EngineConfig::default())
}

fn world_configured(store: DynStore, config: EngineConfig) -> World {
    let platform = Arc::new(Platform::default());
    let model_calls = Arc::new(AtomicUsize::new(0));
    let calls = model_calls.clone();
    let model = ScriptedModel::new(move |_req| {
        calls.fetch_add(1, Ordering::SeqCst);
        reply("a model answered")
    });
    let clock = Arc::new(ManualClock::at_system_time());
    let engine = Engine::with_clock(
        store.clone(),
        vec![frogbot_testkit::offer("main", model)],
        vec![],
        config,
        clock.clone(),
    )
    .with_channel(Channel {
        platform: PLATFORM.into(),
        questions: None,
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: Some(Arc::new(Outbox(platform.clone()))),
    });
    World {
        engine,
        clock,
        platform,
        model_calls,
        store,
    }
}

fn person(id: &str, text: &str) -> ThreadMessage {
    ThreadMessage {
        id: id.into(),
        text: text.into(),
        author: PlatformUser {
            id: "ada".into(),
            name: Some("Ada".into()),
            is_bot: false,
        },
        metadata: ThreadMessageMetadata {
            date_sent: "2026-12-01T00:00:00Z".into(),
        },
        reply_to: None,
        raw: json!(null),
        files: Vec::new(),
        mentions: Vec::new(),
    }
}

fn blocks(v: serde_json::Value) -> Vec<Block> {
    Block::list_from_json(&v).unwrap()
}

fn alice() -> UserId {
    UserId::new("alice")
}

/// An app (html block) an agent posts in a platform thread (issue 40, item 5): with a
/// `public_url`, the platform draws it with the address of its web view, made from a capability
/// the engine gives when the message is posted (122 random bits, never the agent's: one it sends
/// is refused unless well formed, and an address it sends is dropped); an edit of the text keeps
/// the capability, a new app gets a new one. Without a `public_url` the app has no address.
async fn an_app_on_a_platform_links_to_its_web_view(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let w = world_configured(
        store.clone(),
        EngineConfig {
            public_url: Some("https://bot.example.com/fb".into()),
            ..EngineConfig::default()
        },
    );
    let e = &w.engine;
    let me = Some(alice());
    let me = me.as_ref();
    let place = AgentPlace::Channel {
        platform: PLATFORM.into(),
        place: ChannelTarget::Thread("C1".into()),
    };
    let chat = e
        .agents()
        .open_chat(me, place, "Report", "k1")
        .await
        .unwrap();
    let c = &chat.chat_id;
    let app = |extra: serde_json::Value| {
        let mut b = json!({"type": "html", "title": "Chart", "html": "<p>chart</p>"});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        Block::list_from_json(&json!([b]))
    };
    assert!(
        app(json!({"link": "guessable"})).is_err(),
        "a link that is not 32 hex digits is refused"
    );
    let sent = e
        .agents()
        .post(
            c,
            me,
            AgentMessage {
                id: Some("m1".into()),
                text: Some("Numbers".into()),
                blocks: app(json!({"url": "https://evil.example/phish"})).unwrap(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let link_of = |m: &UiMessage| match &blocks_of(m)[0].kind {
        frogbot_core::model::BlockKind::Html { link, url, .. } => {
            assert_eq!(url, &None, "an address is never stored");
            link.clone().expect("a capability")
        }
        other => panic!("{other:?}"),
    };
    let link = link_of(&sent);
    assert!(frogbot_core::model::is_app_link(&link), "{link}");
    let address = format!("https://bot.example.com/fb/apps/{c}/m1/{link}");
    eventually("the message is shown", WAIT, async || {
        w.platform.text_of("p0").is_some()
    })
    .await;
    assert_eq!(
        w.platform.text_of("p0").unwrap(),
        format!("|Numbers|[App: Chart <{address}>]")
    );
    assert_eq!(
        frogbot_core::model::app_page(&sent, &link),
        Some(("<p>chart</p>".into(), Some("Chart".into())))
    );
    assert_eq!(frogbot_core::model::app_page(&sent, &"0".repeat(32)), None);

    // A new text keeps the app and its address.
    let edited = e
        .agents()
        .edit(
            c,
            me,
            "m1",
            MessageEdit::Replace {
                title: None,
                text: Some("Numbers, again".into()),
                blocks: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(link_of(&edited), link);
    eventually("the edit is shown", WAIT, async || {
        w.platform.text_of("p0").unwrap().contains("again")
    })
    .await;
    assert!(w.platform.text_of("p0").unwrap().contains(&address));
    // A new app gets a new capability.
    let other = e
        .agents()
        .post(
            c,
            me,
            AgentMessage {
                id: Some("m2".into()),
                blocks: app(json!({})).unwrap(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_ne!(link_of(&other), link);

    // Without a public_url: no address.
    let plain = world_over(store);
    let chat = plain
        .engine
        .agents()
        .open_chat(
            me,
            AgentPlace::Channel {
                platform: PLATFORM.into(),
                place: ChannelTarget::Thread("C2".into()),
            },
            "Report",
            "k2",
        )
        .await
        .unwrap();
    plain
        .engine
        .agents()
        .post(
            &chat.chat_id,
            me,
            AgentMessage {
                id: Some("m3".into()),
                blocks: app(json!({})).unwrap(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    eventually("the app is shown", WAIT, async || {
        plain.platform.text_of("p0").is_some()
    })
    .await;
    assert_eq!(plain.platform.text_of("p0").unwrap(), "||[App: Chart]");
}

/// The whole conversation of an agent outside FrogBot with a person in a platform thread.
async fn an_external_agent_talks_with_a_person_in_a_thread(url: &str) {
    let w = world(url).await;
    let e = &w.engine;
    let me = Some(alice());
    let me = me.as_ref();
    let place = || AgentPlace::Channel {
        platform: PLATFORM.into(),
        place: ChannelTarget::Thread("C1".into()),
    };
    let chat = e
        .agents()
        .open_chat(me, place(), "Deploy of v2", "k1")
        .await
        .unwrap();
    // The same key again: the same thread, one root.
    let again = e
        .agents()
        .open_chat(me, place(), "Deploy of v2", "k1")
        .await
        .unwrap();
    assert_eq!(again.chat_id, chat.chat_id);
    assert_eq!(w.platform.calls("root"), 1);
    let thread = chat.channel.clone().unwrap().thread;
    let c = &chat.chat_id;

    // The agent posts a message with blocks and an event button.
    let sent = e
        .agents().post(
            c,
            me,
            AgentMessage {
                id: Some("m1".into()),
                title: Some("Deploy".into()),
                text: Some("Starting **now**".into()),
                blocks: blocks(json!([
                    {"type": "progress", "id": "bar", "value": 1, "max": 4, "label": "Steps"},
                    {"type": "fields", "id": "actions", "fields": [{"key": "Branch", "value": "main"}],
                     "events": [{"label": "Retry", "value": "retry"}, {"label": "Show logs"}]}
                ])),
                pin: None,
                files: Vec::new(),
            },
        )
        .await
        .unwrap();
    assert_eq!(blocks_of(&sent).len(), 2);
    eventually("the message is shown", WAIT, async || {
        w.platform.text_of("p0").is_some()
    })
    .await;
    assert_eq!(
        w.platform.text_of("p0").unwrap(),
        "Deploy|Starting **now**|[Steps: 25%][Branch: main]"
    );
    eventually("its platform id is kept", WAIT, async || {
        let m = w.store.get_message(c, "m1").await.unwrap().unwrap();
        m.message.metadata.posted == ["p0"]
    })
    .await;
    // The same id again posts nothing new.
    let dup = e
        .agents()
        .post(
            c,
            me,
            AgentMessage {
                id: Some("m1".into()),
                text: Some("other".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(dup.text(), "Starting **now**");

    // A person replies in the thread: it waits in the inbox, no model runs.
    let out = e
        .channels()
        .message(PLATFORM, &thread, person("u1", "looks good"))
        .await
        .unwrap();
    assert!(matches!(out, ChannelMessageOutcome::Inbox), "{out:?}");
    let repeat = e
        .channels()
        .message(PLATFORM, &thread, person("u1", "looks good"))
        .await
        .unwrap();
    assert!(
        matches!(repeat, ChannelMessageOutcome::Duplicate),
        "{repeat:?}"
    );
    let items = e.agents().inbox(me, None, 10).await.unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].message.text(), "looks good");
    assert_eq!(items[0].speaker.as_deref(), Some("Ada"));
    assert_eq!(items[0].ack, Ack::Seen);
    assert!(items[0].event.is_none());
    assert!(
        e.agents().inbox(me, None, 10).await.unwrap().is_empty(),
        "returned once"
    );
    eventually("Seen is shown on the person's message", WAIT, async || {
        w.platform
            .acks
            .lock()
            .unwrap()
            .contains(&("u1".into(), Ack::Seen))
    })
    .await;
    // Another agent's inbox is empty.
    assert!(
        e.agents()
            .inbox(Some(&UserId::new("bob")), None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let person_msg = items[0].message.id.clone();
    e.agents().ack(c, me, &person_msg, Ack::Done).await.unwrap();
    eventually("Done is shown", WAIT, async || {
        w.platform
            .acks
            .lock()
            .unwrap()
            .contains(&("u1".into(), Ack::Done))
    })
    .await;
    let stored = w.store.get_message(c, &person_msg).await.unwrap().unwrap();
    assert_eq!(stored.message.metadata.ack, Some(Ack::Done));

    // Three clicks on "Retry": three events, nothing answered.
    let click = |button| EventClick {
        message_id: "p0".into(),
        block: 1,
        button,
        user: PlatformUser {
            id: "ada".into(),
            name: Some("Ada".into()),
            is_bot: false,
        },
    };
    for _ in 0..3 {
        let o = e
            .channels()
            .event(PLATFORM, &thread, click(0))
            .await
            .unwrap();
        assert_eq!(o, EventOutcome::Sent);
    }
    assert_eq!(
        e.channels()
            .event(PLATFORM, &thread, click(7))
            .await
            .unwrap(),
        EventOutcome::Stale
    );
    let stale_block = EventClick {
        block: 0,
        ..click(0)
    };
    assert_eq!(
        e.channels()
            .event(PLATFORM, &thread, stale_block)
            .await
            .unwrap(),
        EventOutcome::Stale
    );
    let events = e.agents().inbox(me, Some(c), 10).await.unwrap();
    assert_eq!(events.len(), 3);
    for ev in &events {
        let ev = ev.event.as_ref().expect("an event");
        assert_eq!(
            (
                ev.message_id.as_str(),
                ev.block_id.as_str(),
                ev.value.as_str()
            ),
            ("m1", "actions", "retry")
        );
    }

    // Edit the text, then patch the progress block: one edit each, in place.
    e.agents()
        .edit(
            c,
            me,
            "m1",
            MessageEdit::Replace {
                title: None,
                text: Some("Half way".into()),
                blocks: None,
            },
        )
        .await
        .unwrap();
    eventually("the edit is shown", WAIT, async || {
        w.platform
            .text_of("p0")
            .is_some_and(|t| t.starts_with("Deploy|Half way|"))
    })
    .await;
    let bar =
        Block::from_json(&json!({"type": "progress", "value": 3, "max": 4, "label": "Steps"}))
            .unwrap();
    e.agents()
        .edit(
            c,
            me,
            "m1",
            MessageEdit::Patch {
                block_id: "bar".into(),
                block: bar,
            },
        )
        .await
        .unwrap();
    eventually("the patch is shown", WAIT, async || {
        w.platform.text_of("p0").unwrap() == "Deploy|Half way|[Steps: 75%][Branch: main]"
    })
    .await;
    assert_eq!(
        w.platform.calls("edit"),
        2,
        "{:?}",
        w.platform.calls.lock().unwrap()
    );
    assert_eq!(w.platform.calls("post"), 1, "no new message");
    let missing = Block::from_json(&json!({"type": "code", "code": "x"})).unwrap();
    assert!(
        e.agents()
            .edit(
                c,
                me,
                "m1",
                MessageEdit::Patch {
                    block_id: "nope".into(),
                    block: missing
                }
            )
            .await
            .is_err()
    );

    // Pins: status on m1, then on a new message m2 (m1 unpinned), then unpinned.
    e.agents().pin(c, me, "status", Some("m1")).await.unwrap();
    eventually("m1 is pinned", WAIT, async || {
        *w.platform.pins.lock().unwrap() == ["p0"]
    })
    .await;
    e.agents()
        .post(
            c,
            me,
            AgentMessage {
                id: Some("m2".into()),
                text: Some("All green".into()),
                pin: Some("status".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    eventually("the status pin moved to m2", WAIT, async || {
        *w.platform.pins.lock().unwrap() == ["p1"]
    })
    .await;
    let m1 = w.store.get_message(c, "m1").await.unwrap().unwrap();
    assert_eq!(m1.message.metadata.pin, None);
    e.agents().pin(c, me, "status", None).await.unwrap();
    eventually("unpinned", WAIT, async || {
        w.platform.pins.lock().unwrap().is_empty()
    })
    .await;

    // Delete: gone on the platform, a tombstone in the chat, no more events from it.
    e.agents().delete(c, me, "m1").await.unwrap();
    eventually("deleted on the platform", WAIT, async || {
        w.platform.text_of("p0").is_none()
    })
    .await;
    let m1 = w.store.get_message(c, "m1").await.unwrap().unwrap();
    assert!(m1.message.parts.is_empty() && m1.message.metadata.deleted_at.is_some());
    assert_eq!(
        e.channels()
            .event(PLATFORM, &thread, click(0))
            .await
            .unwrap(),
        EventOutcome::Stale
    );
    assert!(
        e.agents()
            .edit(
                c,
                me,
                "m1",
                MessageEdit::Replace {
                    title: None,
                    text: Some("x".into()),
                    blocks: None
                }
            )
            .await
            .is_err()
    );
    assert_eq!(
        w.model_calls.load(Ordering::SeqCst),
        0,
        "no model ran in an agent chat"
    );
}

/// Only the chat's agent may post, edit or read it; bad input changes nothing.
async fn an_agent_chat_refuses_others_and_bad_input(url: &str) {
    let w = world(url).await;
    let e = &w.engine;
    let me = Some(alice());
    let me = me.as_ref();
    let c = ChatId::new("agent-web-1").unwrap();
    e.agents()
        .open_chat(
            me,
            AgentPlace::Web {
                chat: c.clone(),
                owner: None,
            },
            "",
            "k",
        )
        .await
        .unwrap();
    let bob = UserId::new("bob");
    let hi = || AgentMessage {
        text: Some("hi".into()),
        ..Default::default()
    };
    assert!(
        e.agents().post(&c, Some(&bob), hi()).await.is_err(),
        "another agent"
    );
    assert!(
        e.agents().post(&c, None, hi()).await.is_err(),
        "an anonymous caller"
    );
    // The chat is the agent's own (owned by it), never an ownerless chat others read.
    let row = w.store.get_chat(&c).await.unwrap().unwrap();
    assert_eq!(row.owner.as_ref(), me);
    // A person's existing chat with the model is never bound by an agent opening it.
    let theirs = ChatId::new("someone-elses").unwrap();
    e.agents()
        .send(SendMessage {
            chat_id: theirs.clone(),
            id: Some("u1".into()),
            parts: vec![MessagePart::Text {
                text: "hello model".into(),
            }],
            author: None,
            delivery: frogbot_core::model::Delivery::Queue,
            model: None,
            reasoning: None,
            channel: None,
            speaker: None,
            context: None,
        })
        .await
        .unwrap();
    let taken = e
        .agents()
        .open_chat(
            me,
            AgentPlace::Web {
                chat: theirs.clone(),
                owner: None,
            },
            "",
            "k2",
        )
        .await;
    assert!(taken.is_err(), "{taken:?}");
    assert_eq!(
        w.store.get_chat(&theirs).await.unwrap().unwrap().agent,
        None
    );
    assert!(
        e.agents()
            .open_chat(
                Some(&bob),
                AgentPlace::Web {
                    chat: c.clone(),
                    owner: None,
                },
                "",
                "k"
            )
            .await
            .is_err()
    );
    for bad in [
        AgentMessage::default(),
        AgentMessage {
            title: Some("two\nlines".into()),
            ..hi()
        },
        AgentMessage {
            pin: Some("no spaces".into()),
            ..hi()
        },
        AgentMessage {
            id: Some("bad id".into()),
            ..hi()
        },
        AgentMessage {
            text: Some("x".repeat(70_000)),
            ..Default::default()
        },
    ] {
        assert!(e.agents().post(&c, me, bad).await.is_err());
    }
    assert!(
        w.store.list_messages(&c).await.unwrap().is_empty(),
        "nothing saved"
    );
    assert!(e.agents().ack(&c, me, "nope", Ack::Done).await.is_err());
    assert!(
        e.agents()
            .open_chat(
                me,
                AgentPlace::Web {
                    chat: ChatId::new("_test-x").unwrap(),
                    owner: None,
                },
                "",
                "k"
            )
            .await
            .is_err()
    );
    // A web event on a message without that button is stale; on a real one it reaches the inbox.
    e.agents()
        .post(
            &c,
            me,
            AgentMessage {
                id: Some("w1".into()),
                blocks: blocks(
                    json!([{"type": "code", "id": "b", "code": "x", "events": [{"label": "Go"}]}]),
                ),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        e.chats()
            .web_event(&c, me, "w1", "b", "Nope")
            .await
            .unwrap(),
        EventOutcome::Stale
    );
    assert_eq!(
        e.chats().web_event(&c, me, "w1", "b", "Go").await.unwrap(),
        EventOutcome::Sent
    );
    // The web chat is the agent's own (owned by it): nobody else clicks in it.
    assert!(
        e.chats()
            .web_event(&c, Some(&bob), "w1", "b", "Go")
            .await
            .is_err()
    );
    assert!(
        e.chats()
            .web_event(&c, None, "w1", "b", "Go")
            .await
            .is_err()
    );
    let got = e.agents().inbox(me, Some(&c), 5).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].event.as_ref().unwrap().value, "Go");
    assert_eq!(got[0].by.as_ref(), me);
}

/// A post the platform refused is retried by the message's job until it is shown, once.
async fn a_failed_post_is_shown_by_its_job(url: &str) {
    let w = world(url).await;
    let e = &w.engine;
    let me = Some(alice());
    let me = me.as_ref();
    w.platform.fail_posts.lock().unwrap().push_back(());
    let chat = e
        .agents()
        .open_chat(
            me,
            AgentPlace::Channel {
                platform: PLATFORM.into(),
                place: ChannelTarget::User("ada".into()),
            },
            "hello",
            "k2",
        )
        .await
        .unwrap();
    e.agents()
        .post(
            &chat.chat_id,
            me,
            AgentMessage {
                id: Some("m1".into()),
                text: Some("once".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    eventually("the first post was tried", WAIT, async || {
        w.platform.calls("post") == 1
    })
    .await;
    assert!(w.platform.text_of("p0").is_none());
    // Its job runs later (the clock moved past the grace) and shows it.
    w.clock.advance(31_000);
    eventually("the job shows it", WAIT, async || {
        e.ops().run_due_jobs("w").await.unwrap();
        w.platform.shown.lock().unwrap().len() == 1
    })
    .await;
    w.clock.advance(60_000);
    e.ops().run_due_jobs("w").await.unwrap();
    assert_eq!(w.platform.shown.lock().unwrap().len(), 1, "shown once");
}

/// `inbox_wait` returns as soon as a message arrives.
async fn a_waiting_inbox_wakes_on_arrival(url: &str) {
    let w = world(url).await;
    let e = w.engine.clone();
    let me = alice();
    let chat = e
        .agents()
        .open_chat(
            Some(&me),
            AgentPlace::Channel {
                platform: PLATFORM.into(),
                place: ChannelTarget::Thread("C9".into()),
            },
            "t",
            "k3",
        )
        .await
        .unwrap();
    let thread = chat.channel.unwrap().thread;
    let waiter = {
        let e = e.clone();
        let me = me.clone();
        tokio::spawn(async move {
            e.agents()
                .inbox_wait(Some(&me), None, 10, Duration::from_secs(60))
                .await
        })
    };
    tokio::task::yield_now().await;
    e.channels()
        .message(PLATFORM, &thread, person("x1", "ping"))
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken")
        .unwrap()
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].message.text(), "ping");
}

/// The tool results the model got in the turn in progress, by tool name: (name, content, error).
fn results(req: &ModelRequest) -> Vec<(String, serde_json::Value, bool)> {
    let all: Vec<&ModelMessage> = req.messages.iter().collect();
    let since = all
        .iter()
        .rposition(|m| matches!(m, ModelMessage::User { .. }))
        .unwrap_or(0);
    all[since..]
        .iter()
        .filter_map(|m| match *m {
            ModelMessage::Tool {
                name,
                content,
                is_error,
                ..
            } => Some((
                name.clone(),
                serde_json::from_str(content).unwrap_or(json!(content)),
                *is_error,
            )),
            _ => None,
        })
        .collect()
}

/// FrogBot's own agent with the message tools, in a platform thread: `set_status` posts the
/// status pinned and then edits it in place; `send_message` posts a table the agent patches
/// with `edit_message`; its own reply cannot be edited (an error result) and input blocks are
/// refused with a pointer to the question tool — nothing of it posted twice.
async fn frogbots_own_agent_keeps_a_status_pin_and_edits_what_it_posted(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let platform = Arc::new(Platform::default());
    let model = ScriptedModel::new(|req: &ModelRequest| {
        let said = frogbot_testkit::last_user(req);
        let got = results(req);
        let id = |i: usize| got[i].1["messageId"].as_str().unwrap_or("?").to_owned();
        if said.ends_with(": go") || said == "go" {
            return match got.len() {
                0 => {
                    let mut e = call(
                        "s1",
                        SET_STATUS_TOOL,
                        json!({"title": "Deploying", "blocks": [
                            {"type": "progress", "value": 1, "max": 3, "label": "Steps"}]}),
                    );
                    e.truncate(1);
                    e.extend(call(
                        "m1",
                        SEND_MESSAGE_TOOL,
                        json!({"title": "Checks", "text": "So far:", "blocks": [
                            {"type": "table", "id": "t", "columns": ["Check", "Result"],
                             "rows": [["lint", "running"]]}]}),
                    ));
                    e
                }
                2 => {
                    let mut e = call(
                        "s2",
                        SET_STATUS_TOOL,
                        json!({"title": "Deployed", "blocks": [
                            {"type": "progress", "value": 3, "max": 3, "label": "Steps"}]}),
                    );
                    e.truncate(1);
                    e.extend(call(
                        "e1",
                        EDIT_MESSAGE_TOOL,
                        json!({"message_id": id(1), "block_id": "t", "blocks": [
                            {"type": "table", "columns": ["Check", "Result"],
                             "rows": [["lint", "ok"]]}]}),
                    ));
                    e
                }
                _ => reply("deployed"),
            };
        }
        // The second turn: edit the first turn's reply (its previous one), post an input block
        // (refused), edit a message that is not its own (refused).
        match got.len() {
            0 => {
                let mut e = call(
                    "x1",
                    EDIT_MESSAGE_TOOL,
                    json!({"text": "deployed to **prod**"}),
                );
                e.truncate(1);
                let mut x2 = call(
                    "x2",
                    SEND_MESSAGE_TOOL,
                    json!({"blocks": [{"type": "choice", "options": ["a"]}]}),
                );
                x2.truncate(1);
                e.extend(x2);
                e.extend(call(
                    "x3",
                    EDIT_MESSAGE_TOOL,
                    json!({"message_id": said.rsplit(' ').next().unwrap_or_default(), "text": "mine now"}),
                ));
                e
            }
            _ => reply("noted"),
        }
    });
    let clock = Arc::new(ManualClock::at_system_time());
    let engine = Engine::with_clock(
        store.clone(),
        vec![frogbot_testkit::offer("main", model)],
        vec![],
        EngineConfig {
            message_tools: true,
            ..Default::default()
        },
        clock.clone(),
    )
    .with_channel(Channel {
        platform: PLATFORM.into(),
        questions: None,
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: Some(Arc::new(Outbox(platform.clone()))),
    });
    let out = engine
        .channels()
        .message(PLATFORM, "T1", person("u1", "go"))
        .await
        .unwrap();
    let ChannelMessageOutcome::Sent(Sent::Started(turn)) = out else {
        panic!("{out:?}")
    };
    turn.done.await.unwrap().unwrap();
    let chat = frogbot_core::agent::channel_chat_id(PLATFORM, "T1");
    // Shown as they are now (a change made before the post was shown is drawn with the post,
    // so the edits are at most one each), pinned once, and nothing posted twice.
    eventually(
        "the status and the table are shown as edited",
        WAIT,
        async || {
            platform.text_of("p0").as_deref() == Some("Deployed||[Steps: 100%]")
                && platform.text_of("p1").as_deref()
                    == Some("Checks|So far:|[Check | Result\nlint | ok]")
                && *platform.pins.lock().unwrap() == ["p0"]
        },
    )
    .await;
    assert_eq!(
        platform.calls("post"),
        2,
        "{:?}",
        platform.calls.lock().unwrap()
    );
    assert!(
        platform.calls("edit") <= 2,
        "{:?}",
        platform.calls.lock().unwrap()
    );
    assert_eq!(
        platform.calls("pin"),
        1,
        "{:?}",
        platform.calls.lock().unwrap()
    );
    let messages = store.list_messages(&chat).await.unwrap();
    let status: Vec<&UiMessage> = messages
        .iter()
        .map(|m| &m.message)
        .filter(|m| m.metadata.pin.as_deref() == Some("status"))
        .collect();
    assert_eq!(status.len(), 1, "one status pin");
    assert_eq!(status[0].id, "msg-s1");
    let reply_id = messages
        .iter()
        .rev()
        .find(|m| m.message.text() == "deployed")
        .unwrap()
        .message
        .id
        .clone();

    // The first reply was posted as one platform message whose id it keeps.
    eventually("the reply's platform id is kept", WAIT, async || {
        let m = store.get_message(&chat, &reply_id).await.unwrap().unwrap();
        m.message.metadata.posted.len() == 1
    })
    .await;
    let reply_shown = store
        .get_message(&chat, &reply_id)
        .await
        .unwrap()
        .unwrap()
        .message
        .metadata
        .posted[0]
        .clone();
    assert_eq!(platform.text_of(&reply_shown).unwrap(), "|deployed|");

    // The second turn edits that reply, tries an input block and someone else's message (the
    // person's own, by its id).
    let person_message = frogbot_core::agent::channel_message_id(PLATFORM, "u1");
    let out = engine
        .channels()
        .message(
            PLATFORM,
            "T1",
            person("u2", &format!("fix it {person_message}")),
        )
        .await
        .unwrap();
    let ChannelMessageOutcome::Sent(Sent::Started(turn)) = out else {
        panic!("{out:?}")
    };
    turn.done.await.unwrap().unwrap();
    let stored = store.get_message(&chat, &reply_id).await.unwrap().unwrap();
    assert_eq!(stored.message.text(), "deployed to **prod**");
    assert!(stored.message.metadata.edited_at.is_some());
    assert!(
        stored.message.tool_parts().count() >= 4,
        "its tool calls stay: {:?}",
        stored.message.parts
    );
    eventually(
        "the reply is edited in place on the platform",
        WAIT,
        async || platform.text_of(&reply_shown).as_deref() == Some("|deployed to **prod**|"),
    )
    .await;
    let last = store.list_messages(&chat).await.unwrap();
    let tools: Vec<_> = last
        .iter()
        .flat_map(|m| m.message.tool_parts().cloned().collect::<Vec<_>>())
        .filter(|t| ["x1", "x2", "x3"].contains(&t.tool_call_id.as_str()))
        .collect();
    assert_eq!(tools.len(), 3);
    assert!(tools[0].error_text.is_none(), "{tools:?}");
    assert!(
        tools[1]
            .error_text
            .as_deref()
            .unwrap()
            .contains("question tool"),
        "{tools:?}"
    );
    assert!(
        tools[2].error_text.as_deref().unwrap().contains("of yours"),
        "{tools:?}"
    );
    let person = store
        .get_message(&chat, &person_message)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        person.message.text(),
        "go",
        "a person's message is never edited"
    );
    // Two agent messages and two replies posted, nothing twice.
    assert_eq!(
        platform.calls("post"),
        2,
        "{:?}",
        platform.calls.lock().unwrap()
    );
    assert_eq!(
        platform.calls("reply"),
        2,
        "{:?}",
        platform.calls.lock().unwrap()
    );
}

/// A person's message in a thread whose chat gets bound to an agent between the engine's look-up
/// of the thread and its `send` (an ask's chat bound to its asker as it ends): the store refuses
/// a turn in the bound chat, and the engine takes the message to the agent's inbox instead — no
/// model runs, nothing is lost.
async fn a_message_racing_the_binding_of_its_thread_goes_to_the_inbox(url: &str) {
    use frogbot_core::model::ChannelRef;
    use frogbot_core::store::NewChat;
    use frogbot_testkit::{PausePoint, PausingStore};
    let paused = PausingStore::new(
        frogbot_testkit::open_store(url).await,
        PausePoint::BeforeSend,
    );
    let w = world_over(paused.clone());
    let thread = "T-race";
    let receiving = tokio::spawn({
        let e = w.engine.clone();
        async move {
            e.channels()
                .message(PLATFORM, thread, person("u-race", "are we done?"))
                .await
        }
    });
    paused.reached().await;
    let chat_id = frogbot_core::agent::channel_chat_id(PLATFORM, thread);
    w.engine
        .agents()
        .bind_ask_chat(
            &NewChat {
                chat_id: chat_id.clone(),
                owner: None,
                channel: Some(ChannelRef {
                    platform: PLATFORM.into(),
                    thread: thread.into(),
                }),
            },
            Some(&alice()),
        )
        .await;
    assert!(
        w.store
            .get_chat(&chat_id)
            .await
            .unwrap()
            .unwrap()
            .agent
            .is_some()
    );
    paused.resume();
    let out = receiving.await.unwrap().unwrap();
    assert!(matches!(out, ChannelMessageOutcome::Inbox), "{out:?}");
    assert_eq!(w.model_calls.load(Ordering::SeqCst), 0, "no turn ran");
    let inbox = w
        .engine
        .agents()
        .inbox(Some(&alice()), None, 10)
        .await
        .unwrap();
    assert_eq!(
        inbox.iter().map(|i| i.message.text()).collect::<Vec<_>>(),
        ["are we done?"]
    );
}

frogbot_testkit::backends!(
    an_app_on_a_platform_links_to_its_web_view,
    a_message_racing_the_binding_of_its_thread_goes_to_the_inbox,
    an_external_agent_talks_with_a_person_in_a_thread,
    frogbots_own_agent_keeps_a_status_pin_and_edits_what_it_posted,
    an_agent_chat_refuses_others_and_bad_input,
    a_failed_post_is_shown_by_its_job,
    a_waiting_inbox_wakes_on_arrival,
);
