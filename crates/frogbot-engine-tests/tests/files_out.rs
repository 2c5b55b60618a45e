//! Files the bot sends (issue 40, item 2), on SQLite (`sqlite::…`) and PostgreSQL
//! (`postgres::…`): a file a model makes is kept in the chat as a `file` part after the reply's
//! text and sent on the thread's platform after the text, byte for byte, each under its own
//! delivery key — once, even when the first attempt fails; an agent message's files (uploaded
//! first) are sent after the message, stay through an edit and go with a deletion; a message
//! naming another chat's file is refused and posts nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use frogbot_core::BoxError;
use frogbot_core::Error;
use frogbot_core::agent::scripted::{ScriptedModel, reply_with_files};
use frogbot_core::agent::{
    AgentMessage, AgentPlace, AllowAll, Channel, ChannelMessageOutcome, ChannelOutbox,
    ChannelTarget, Delivery, Engine, EngineConfig, GeneratedFile, MessageEdit, OutFile,
    OutboxDelivery, Sent,
};
use frogbot_core::model::{
    MessagePart, PlatformUser, PrefixedIdentity, Thread, ThreadMessage, ThreadMessageMetadata,
    Transient, UiMessage, UserId,
};
use frogbot_testkit::eventually;

const WAIT: Duration = Duration::from_secs(20);

/// A platform that shows messages by id: each delivery key posts once (as platforms with an
/// idempotency key do), files are kept with their bytes, and the first `fail_files` file
/// deliveries fail as a 503 before posting anything.
#[derive(Default)]
struct Platform {
    next: AtomicUsize,
    /// (id, what a person sees) in the order posted.
    shown: Mutex<Vec<(String, String)>>,
    /// (key, id) of everything posted.
    keys: Mutex<Vec<(String, String)>>,
    /// The bytes of each file shown, by id.
    bytes: Mutex<Vec<(String, Vec<u8>)>>,
    fail_files: AtomicUsize,
    calls: Mutex<Vec<String>>,
}

impl Platform {
    fn post(&self, key: &str, seen: String) -> String {
        let mut keys = self.keys.lock().unwrap();
        if let Some((_, id)) = keys.iter().find(|(k, _)| k == key) {
            return id.clone();
        }
        let id = format!("p{}", self.next.fetch_add(1, Ordering::SeqCst));
        keys.push((key.to_owned(), id.clone()));
        self.shown.lock().unwrap().push((id.clone(), seen));
        id
    }
    fn seen(&self) -> Vec<String> {
        self.shown
            .lock()
            .unwrap()
            .iter()
            .map(|(_, s)| s.clone())
            .collect()
    }
}

struct Outbox(Arc<Platform>);

/// Not a `Draw`: none of the shared delivery loops (the defaults post with `post_reply`).
impl OutboxDelivery for Outbox {}

#[async_trait]
impl ChannelOutbox for Outbox {
    async fn post_reply(&self, _thread: &Thread, _reply: &UiMessage) -> Result<(), BoxError> {
        Ok(())
    }

    async fn deliver(
        &self,
        _thread: &Thread,
        reply: &UiMessage,
        delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError> {
        let id = self.0.post(&delivery.piece_key(0), reply.text());
        Ok(vec![id])
    }

    async fn post_message(
        &self,
        _thread: &Thread,
        message: &UiMessage,
        delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError> {
        self.0.calls.lock().unwrap().push("post".into());
        assert!(
            message.parts.iter().all(|p| p.as_file().is_none()),
            "a drawn message carries no file parts: {:?}",
            message.parts
        );
        Ok(vec![self.0.post(&delivery.piece_key(0), message.text())])
    }

    async fn deliver_files(
        &self,
        _thread: &Thread,
        files: &[OutFile],
        after: usize,
        delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError> {
        self.0
            .calls
            .lock()
            .unwrap()
            .push(format!("files {} after {after}", files.len()));
        if self
            .0
            .fail_files
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(Box::new(Transient::new("HTTP 503")));
        }
        let mut ids = Vec::new();
        for (i, f) in files.iter().enumerate() {
            let bytes = f.bytes().await?;
            let id = self.0.post(
                &delivery.file_key(i),
                format!("[{} {} {}]", f.filename, f.media_type, bytes.len()),
            );
            self.0.bytes.lock().unwrap().push((id.clone(), bytes));
            ids.push(id);
        }
        Ok(ids)
    }

    async fn edit_posted(
        &self,
        _thread: &Thread,
        posted: &[String],
        message: &UiMessage,
    ) -> Result<Vec<String>, BoxError> {
        self.0
            .calls
            .lock()
            .unwrap()
            .push(format!("edit {}", posted.join(",")));
        let mut shown = self.0.shown.lock().unwrap();
        for (id, seen) in shown.iter_mut() {
            if posted.first() == Some(id) {
                *seen = message.text();
            }
        }
        Ok(posted.to_vec())
    }

    async fn delete_posted(&self, _thread: &Thread, posted: &[String]) -> Result<(), BoxError> {
        self.0
            .calls
            .lock()
            .unwrap()
            .push(format!("delete {}", posted.join(",")));
        self.0
            .shown
            .lock()
            .unwrap()
            .retain(|(id, _)| !posted.contains(id));
        Ok(())
    }
}

/// 300 KB that are not all alike (a chunking fault shows).
fn picture() -> Vec<u8> {
    (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect()
}

fn world(store: frogbot_core::store::DynStore, platform: Arc<Platform>) -> Engine {
    let model = ScriptedModel::new(|_req| {
        reply_with_files(
            "Here is the chart",
            [
                GeneratedFile {
                    media_type: "image/png".into(),
                    filename: "chart.png".into(),
                    data: picture(),
                },
                GeneratedFile {
                    media_type: "text/csv".into(),
                    filename: String::new(),
                    data: b"a,b\n1,2\n".to_vec(),
                },
            ],
        )
    });
    Engine::new(
        store,
        vec![frogbot_testkit::offer("main", model)],
        vec![],
        EngineConfig::default(),
    )
    .with_channel(Channel {
        platform: "test".into(),
        questions: None,
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: Some(Arc::new(Outbox(platform))),
    })
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
            date_sent: "2026-12-06T00:00:00Z".into(),
        },
        reply_to: None,
        raw: serde_json::Value::Null,
        files: Vec::new(),
        mentions: Vec::new(),
    }
}

/// A model's files: kept after the reply's text, sent after it byte for byte, each once — the
/// first attempt at the files fails (a 503) and the retry posts nothing twice.
async fn files_a_model_makes_are_kept_and_sent_after_its_text_once(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let platform = Arc::new(Platform::default());
    platform.fail_files.store(1, Ordering::SeqCst);
    let engine = world(store, platform.clone());
    let out = engine
        .channels()
        .message("test", "T1", person("m1", "draw me a chart"))
        .await
        .unwrap();
    let ChannelMessageOutcome::Sent(Sent::Started(h)) = out else {
        panic!("{out:?}");
    };
    h.done.await.unwrap().unwrap();
    eventually("the reply and its files are shown", WAIT, async || {
        platform.seen().len() == 3
    })
    .await;
    assert_eq!(
        platform.seen(),
        [
            "Here is the chart",
            "[chart.png image/png 300000]",
            "[file.csv text/csv 8]"
        ],
        "text first, then the files in order, each once"
    );
    assert!(
        platform
            .calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.starts_with("files"))
            .all(|c| c == "files 2 after 1"),
        "{:?}",
        platform.calls.lock().unwrap()
    );
    let sent = platform.bytes.lock().unwrap().clone();
    assert_eq!(sent[0].1, picture(), "the picture's bytes, exactly");
    assert_eq!(sent[1].1, b"a,b\n1,2\n");
    let keys = platform.keys.lock().unwrap().clone();
    let (text_key, file_key) = (&keys[0].0, &keys[1].0);
    assert_eq!(
        format!("{}:file:0", text_key.strip_suffix(":0").unwrap()),
        *file_key,
        "the files' keys are the delivery's"
    );

    // The reply keeps them as file parts after its text, readable in the chat.
    let chat = frogbot_core::agent::channel_chat_id("test", "T1");
    let chat_messages = engine.chats().messages(&chat).await.unwrap();
    let reply = &chat_messages.last().unwrap().message;
    let at = reply
        .parts
        .iter()
        .position(|p| *p == MessagePart::text("Here is the chart"))
        .expect("the text");
    assert!(
        reply.parts[at + 1].as_file().is_some() && reply.parts[at + 2].as_file().is_some(),
        "the files follow the text: {:?}",
        reply.parts
    );
    let files: Vec<_> = reply
        .parts
        .iter()
        .filter_map(MessagePart::as_file)
        .collect();
    assert_eq!(files.len(), 2, "{:?}", reply.parts);
    assert_eq!(
        (files[0].media_type, files[0].filename),
        ("image/png", "chart.png")
    );
    let (_, id) = frogbot_core::agent::files::parse_file_url(files[0].url).unwrap();
    let row = engine.files().get(&chat, id, None).await.unwrap();
    assert_eq!(row.size, 300_000);
    // Its platform ids: the text's, then the files'.
    eventually("the reply's platform ids are kept", WAIT, async || {
        let m = engine.chats().messages(&chat).await.unwrap();
        m.last().unwrap().message.metadata.posted == ["p0", "p1", "p2"]
    })
    .await;
}

/// An agent message's files: sent after the message; an edit redraws the message and leaves
/// them; a deletion takes them too; a message of files alone posts only the files; a file of
/// another chat, or a part that is not a file, is refused and nothing is posted.
async fn an_agent_messages_files_are_sent_kept_by_edits_and_deleted_with_it(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let platform = Arc::new(Platform::default());
    let engine = world(store, platform.clone());
    let alice = UserId::new("alice");
    let me = Some(&alice);
    let place = |t: &str| AgentPlace::Channel {
        platform: "test".into(),
        place: ChannelTarget::Thread(t.into()),
    };
    let chat = engine
        .agents()
        .open_chat(me, place("C1"), "Report", "k1")
        .await
        .unwrap()
        .chat_id;
    let body = futures::stream::iter([Ok::<_, String>(Bytes::from_static(b"%PDF-1.7 report"))]);
    let row = engine
        .files()
        .upload(&chat, me, "application/pdf", "report.pdf", body)
        .await
        .unwrap();
    let part = MessagePart::file(
        "application/pdf",
        "report.pdf",
        &frogbot_core::agent::files::file_url(&chat, &row.id),
    );
    engine
        .agents()
        .post(
            &chat,
            me,
            AgentMessage {
                id: Some("m1".into()),
                text: Some("The weekly report".into()),
                files: vec![part.clone()],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    eventually("the message and its file are shown", WAIT, async || {
        platform.seen().len() == 2
    })
    .await;
    assert_eq!(
        platform.seen(),
        ["The weekly report", "[report.pdf application/pdf 15]"]
    );
    let posted = async |id: &str| {
        engine
            .chats()
            .messages(&chat)
            .await
            .unwrap()
            .into_iter()
            .find(|m| m.message.id == id)
            .map(|m| m.message)
            .unwrap()
    };
    eventually("its ids are kept", WAIT, async || {
        posted("m1").await.metadata.posted == ["p0", "p1"]
    })
    .await;

    // An edit: the message redrawn in its own message, the file left as it is.
    engine
        .agents()
        .edit(
            &chat,
            me,
            "m1",
            MessageEdit::Replace {
                title: None,
                text: Some("The weekly report (fixed)".into()),
                blocks: None,
            },
        )
        .await
        .unwrap();
    eventually("the edit is shown", WAIT, async || {
        platform.seen()[0] == "The weekly report (fixed)"
    })
    .await;
    assert!(
        platform
            .calls
            .lock()
            .unwrap()
            .contains(&"edit p0".to_owned()),
        "only the drawn message is redrawn: {:?}",
        platform.calls.lock().unwrap()
    );
    let m1 = posted("m1").await;
    assert_eq!(
        m1.parts.last(),
        Some(&part),
        "the file stays: {:?}",
        m1.parts
    );
    eventually("the ids stay", WAIT, async || {
        posted("m1").await.metadata.posted == ["p0", "p1"]
    })
    .await;

    // Files alone: only the files are posted.
    engine
        .agents()
        .post(
            &chat,
            me,
            AgentMessage {
                id: Some("m2".into()),
                files: vec![part.clone()],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    eventually("the file alone is shown", WAIT, async || {
        platform.seen().len() == 3
    })
    .await;
    assert_eq!(platform.seen()[2], "[report.pdf application/pdf 15]");
    assert_eq!(
        platform
            .calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| *c == "post")
            .count(),
        1,
        "no empty message before the file"
    );

    // Text added to the files-alone message: posted as a message of its own, the file kept.
    engine
        .agents()
        .edit(
            &chat,
            me,
            "m2",
            MessageEdit::Replace {
                title: None,
                text: Some("The same report, again".into()),
                blocks: None,
            },
        )
        .await
        .unwrap();
    eventually("the added text is shown", WAIT, async || {
        platform.seen().len() == 4
    })
    .await;
    assert_eq!(platform.seen()[3], "The same report, again");
    eventually("m2's ids: the text, then its file", WAIT, async || {
        posted("m2").await.metadata.posted == ["p3", "p2"]
    })
    .await;

    // Deleting m1 takes its file too.
    engine.agents().delete(&chat, me, "m1").await.unwrap();
    eventually("m1 and its file are gone", WAIT, async || {
        platform
            .calls
            .lock()
            .unwrap()
            .contains(&"delete p0,p1".to_owned())
    })
    .await;

    // Another chat's file, or a part that is not a file: refused, nothing posted.
    let other = engine
        .agents()
        .open_chat(me, place("C2"), "Other", "k2")
        .await
        .unwrap()
        .chat_id;
    let before = platform.keys.lock().unwrap().len();
    for files in [vec![part.clone()], vec![MessagePart::text("not a file")]] {
        let e = engine
            .agents()
            .post(
                &other,
                me,
                AgentMessage {
                    text: Some("stolen".into()),
                    files,
                    ..Default::default()
                },
            )
            .await
            .unwrap_err();
        assert!(
            matches!(e, Error::InvalidInput { .. } | Error::File(_)),
            "{e:?}"
        );
    }
    tokio::task::yield_now().await;
    assert_eq!(platform.keys.lock().unwrap().len(), before);
}

/// A model's file past the file limit (or of a type not accepted) is not kept: the reply names
/// it in its text, and nothing but that text is sent.
async fn a_model_file_past_the_limits_is_named_not_kept(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let platform = Arc::new(Platform::default());
    let model = ScriptedModel::new(|_req| {
        reply_with_files(
            "Done",
            [
                GeneratedFile {
                    media_type: "image/png".into(),
                    filename: "huge.png".into(),
                    data: vec![1; 2_000],
                },
                GeneratedFile {
                    media_type: "application/x-msdownload".into(),
                    filename: "tool.exe".into(),
                    data: vec![2; 10],
                },
            ],
        )
    });
    let engine = Engine::new(
        store,
        vec![frogbot_testkit::offer("main", model)],
        vec![],
        EngineConfig {
            files: frogbot_core::agent::FileLimits {
                max_bytes: 1_000,
                media_types: vec!["image/*".into()],
                ..Default::default()
            },
            ..EngineConfig::default()
        },
    )
    .with_channel(Channel {
        platform: "test".into(),
        questions: None,
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: Some(Arc::new(Outbox(platform.clone()))),
    });
    let out = engine
        .channels()
        .message("test", "T2", person("m1", "make files"))
        .await
        .unwrap();
    let ChannelMessageOutcome::Sent(Sent::Started(h)) = out else {
        panic!("{out:?}");
    };
    h.done.await.unwrap().unwrap();
    eventually("the reply is shown", WAIT, async || {
        !platform.seen().is_empty()
    })
    .await;
    let seen = platform.seen();
    assert_eq!(seen.len(), 1, "no file is sent: {seen:?}");
    assert!(
        seen[0].starts_with("Done\n\n📎 huge.png could not be kept")
            && seen[0].contains("📎 tool.exe could not be kept"),
        "{seen:?}"
    );
    let chat = frogbot_core::agent::channel_chat_id("test", "T2");
    let m = engine.chats().messages(&chat).await.unwrap();
    assert!(
        m.last()
            .unwrap()
            .message
            .parts
            .iter()
            .all(|p| p.as_file().is_none()),
        "no file part"
    );
}

frogbot_testkit::backends!(
    a_model_file_past_the_limits_is_named_not_kept,
    files_a_model_makes_are_kept_and_sent_after_its_text_once,
    an_agent_messages_files_are_sent_kept_by_edits_and_deleted_with_it,
);
