//! Files (issue 40, item 1), on SQLite (`sqlite::…`) and PostgreSQL (`postgres::…`): an upload is
//! streamed into the store and read back byte for byte; a message names it by its URL and the
//! model is shown it — an image as an image (its bytes as a `data:` URL), a text file as its
//! text, any other file by name; a file too large, of a type not accepted, cut off half way, or
//! of another chat is refused and leaves nothing behind; the same upload twice is one file.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;

use frogbot_core::Error;
use frogbot_core::agent::FileStream;
use frogbot_core::agent::files::file_url;
use frogbot_core::agent::scripted::{ScriptedModel, reply};
use frogbot_core::agent::{
    AllowList, Channel, ChannelMessageOutcome, ChannelOutbox, Engine, EngineConfig, FileContent,
    FileError, FileLimits, ModelFile, ModelMessage, ModelRequest, OutboxDelivery, SendMessage,
    Sent,
};
use frogbot_core::model::{
    ChatId, Delivery, MessagePart, PlatformFile, PlatformUser, PrefixedIdentity, ThreadMessage,
    ThreadMessageMetadata, UserId,
};

/// An engine whose model records the files of every request.
fn world(
    url: &str,
    limits: FileLimits,
) -> impl std::future::Future<Output = (Engine, Arc<Mutex<Vec<Vec<ModelFile>>>>)> {
    let url = url.to_string();
    async move {
        let store = frogbot_testkit::open_store(&url).await;
        let seen: Arc<Mutex<Vec<Vec<ModelFile>>>> = Arc::default();
        let s = seen.clone();
        let model = ScriptedModel::new(move |req: &ModelRequest| {
            let files = req
                .messages
                .iter()
                .filter_map(|m| match m {
                    ModelMessage::File(f) => Some(f.clone()),
                    _ => None,
                })
                .collect();
            s.lock().unwrap().push(files);
            reply(&format!("re: {}", frogbot_testkit::last_user(req)))
        });
        let engine = Engine::new(
            store,
            vec![frogbot_testkit::offer("main", model)],
            vec![],
            EngineConfig {
                files: limits,
                ..EngineConfig::default()
            },
        );
        (engine, seen)
    }
}

fn chunks(
    data: &[u8],
    size: usize,
) -> impl futures::Stream<Item = Result<Bytes, String>> + Send + use<> {
    let pieces: Vec<Result<Bytes, String>> = data
        .chunks(size)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    futures::stream::iter(pieces)
}

async fn read_back(engine: &Engine, chat: &ChatId, id: &str) -> Vec<u8> {
    let row = engine.files().get(chat, id, None).await.unwrap();
    let mut out = Vec::new();
    let mut s = std::pin::pin!(engine.files().bytes(row));
    while let Some(c) = s.next().await {
        out.extend(c.unwrap());
    }
    out
}

async fn send(engine: &Engine, chat: &ChatId, parts: Vec<MessagePart>) -> Result<(), Error> {
    let sent = engine
        .agents()
        .send(SendMessage {
            chat_id: chat.clone(),
            id: None,
            parts,
            author: Some(UserId::new("ann")),
            delivery: Delivery::Queue,
            model: None,
            reasoning: None,
            channel: None,
            speaker: None,
            context: None,
        })
        .await?;
    match sent {
        Sent::Started(h) => {
            h.done.await.unwrap().unwrap();
        }
        Sent::Queued { .. } => panic!("nothing runs here"),
    }
    Ok(())
}

/// An image, a text file and a PDF uploaded (in pieces of odd sizes, across the 256 KiB chunk
/// boundary) read back byte for byte; sent in one message, the model sees the image's bytes,
/// the text, and the PDF's name; a later turn shows them again (from the history).
async fn uploads_reach_the_model_as_images_text_and_names(url: &str) {
    let (engine, seen) = world(url, FileLimits::default()).await;
    let chat = ChatId::new("files-1").unwrap();
    let image: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
    let png = engine
        .files()
        .upload(&chat, None, "image/png", "shot.png", chunks(&image, 70_001))
        .await
        .unwrap();
    assert_eq!(png.size, image.len() as u64);
    assert_eq!(png.chunks, 3);
    assert_eq!(read_back(&engine, &chat, &png.id).await, image);
    let notes = engine
        .files()
        .upload(
            &chat,
            None,
            "text/plain; charset=utf-8",
            "../notes.txt",
            chunks(b"milk, eggs", 3),
        )
        .await
        .unwrap();
    assert_eq!(
        (notes.media_type.as_str(), notes.filename.as_str()),
        ("text/plain", "notes.txt")
    );
    let pdf = engine
        .files()
        .upload(
            &chat,
            None,
            "application/pdf",
            "report.pdf",
            chunks(b"%PDF-1.7", 8),
        )
        .await
        .unwrap();
    let parts = vec![
        MessagePart::file("image/png", "shot.png", &file_url(&chat, &png.id)),
        // The type a client claims is replaced by the stored one.
        MessagePart::file("text/html", "x.html", &file_url(&chat, &notes.id)),
        MessagePart::file("application/pdf", "report.pdf", &file_url(&chat, &pdf.id)),
        MessagePart::text("what is in these?"),
    ];
    send(&engine, &chat, parts).await.unwrap();
    let files = seen.lock().unwrap().last().unwrap().clone();
    assert_eq!(files.len(), 3, "{files:?}");
    use base64::Engine as _;
    let want = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&image)
    );
    assert_eq!(
        files[0].content,
        Some(FileContent::Image { data_url: want })
    );
    assert_eq!(
        files[1].content,
        Some(FileContent::Text {
            text: "[notes.txt (text/plain)]\nmilk, eggs".into()
        })
    );
    match &files[2].content {
        Some(FileContent::Named { note }) => {
            assert!(note.contains("report.pdf (application/pdf)"), "{note}")
        }
        other => panic!("{other:?}"),
    }
    send(&engine, &chat, vec![MessagePart::text("and now?")])
        .await
        .unwrap();
    let again = seen.lock().unwrap().last().unwrap().clone();
    assert_eq!(again, files, "the history shows the files again");
}

/// Too large, a type not accepted, a body that fails half way: refused with their error, and
/// nothing readable is left (the unfinished file is purged); a message naming another chat's
/// file, or an unknown one, is refused and saves nothing; the same upload twice is one file.
async fn refused_files_leave_nothing(url: &str) {
    let limits = FileLimits {
        max_bytes: 300_000,
        media_types: vec!["image/*".into(), "text/plain".into()],
        ..FileLimits::default()
    };
    let (engine, _) = world(url, limits).await;
    let chat = ChatId::new("files-2").unwrap();
    let big = vec![1u8; 300_001];
    let e = engine
        .files()
        .upload(&chat, None, "image/png", "big.png", chunks(&big, 65_536))
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::File(FileError::TooLarge { limit: 300_000 })),
        "{e}"
    );
    let e = engine
        .files()
        .upload(&chat, None, "application/zip", "a.zip", chunks(b"PK", 2))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::File(FileError::MediaType { .. })), "{e}");
    let failing = futures::stream::iter(vec![
        Ok(Bytes::from_static(b"abc")),
        Err("connection reset".to_string()),
    ]);
    let e = engine
        .files()
        .upload(&chat, None, "text/plain", "cut.txt", failing)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::File(FileError::Upload { .. })), "{e}");
    let store = engine.store_for_tests().clone();
    let purged = store.purge_files(engine.now() + 1).await.unwrap();
    assert_eq!(
        purged, 2,
        "the too-large and the cut-off uploads were left unfinished"
    );

    let first = engine
        .files()
        .upload(&chat, None, "text/plain", "a.txt", chunks(b"same", 4))
        .await
        .unwrap();
    let again = engine
        .files()
        .upload(&chat, None, "text/plain", "a.txt", chunks(b"same", 1))
        .await
        .unwrap();
    assert_eq!(again.id, first.id, "the same upload twice is one file");

    let other = ChatId::new("files-3").unwrap();
    for url in [
        file_url(&other, &first.id),
        file_url(&chat, "nope"),
        "https://example.org/x.png".into(),
    ] {
        let e = send(
            &engine,
            &other,
            vec![
                MessagePart::file("text/plain", "a.txt", &url),
                MessagePart::text("hi"),
            ],
        )
        .await
        .unwrap_err();
        assert!(
            matches!(e, Error::File(FileError::Unknown { .. })),
            "{url}: {e}"
        );
    }
    assert!(
        engine.chats().get(&other).await.unwrap().is_none(),
        "a refused message creates nothing"
    );
}

/// Who may upload and read: the owner of a chat; not another user (nor anonymous); a file
/// uploaded before its chat's first message is its uploader's alone.
async fn only_who_may_read_the_chat_reads_its_files(url: &str) {
    let (engine, _) = world(url, FileLimits::default()).await;
    let engine = engine.with_policy(
        frogbot_core::policy::Policy::new(frogbot_core::policy::AnonymousAccess::None),
        vec![
            frogbot_core::policy::Principal::User(UserId::new("ann")),
            frogbot_core::policy::Principal::User(UserId::new("bob")),
        ],
    );
    let (ann, bob) = (UserId::new("ann"), UserId::new("bob"));
    let chat = ChatId::new("files-4").unwrap();
    let early = engine
        .files()
        .upload(
            &chat,
            Some(&ann),
            "text/plain",
            "a.txt",
            chunks(b"early", 5),
        )
        .await
        .unwrap();
    assert!(
        engine
            .files()
            .get(&chat, &early.id, Some(&ann))
            .await
            .is_ok()
    );
    let e = engine
        .files()
        .get(&chat, &early.id, Some(&bob))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
    send(&engine, &chat, vec![MessagePart::text("hello")])
        .await
        .unwrap();
    let e = engine
        .files()
        .get(&chat, &early.id, Some(&bob))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Denied(_)), "{e}");
    let e = engine
        .files()
        .upload(&chat, Some(&bob), "text/plain", "b.txt", chunks(b"b", 1))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Denied(_)), "{e}");
    let e = engine
        .files()
        .get(&chat, &early.id, None)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Denied(_)), "{e}");
}

/// A platform whose files are served from memory: `slow.png` never finishes, `gone.png` fails.
struct FileOutbox {
    posts: Mutex<Vec<String>>,
    opened: Mutex<Vec<String>>,
}

/// Not a `Draw`: none of the shared delivery loops (the defaults post with `post_reply`).
impl OutboxDelivery for FileOutbox {}

#[async_trait::async_trait]
impl ChannelOutbox for FileOutbox {
    async fn post_reply(
        &self,
        _thread: &frogbot_core::model::Thread,
        reply: &frogbot_core::model::UiMessage,
    ) -> Result<(), frogbot_core::BoxError> {
        self.posts.lock().unwrap().push(reply.text());
        Ok(())
    }

    async fn open_file(&self, file: &PlatformFile) -> Result<FileStream, frogbot_core::BoxError> {
        self.opened.lock().unwrap().push(file.filename.clone());
        match file.filename.as_str() {
            "gone.png" => Err("404 from the platform".into()),
            "slow.png" => Ok(Box::pin(futures::stream::pending())),
            _ => {
                let bytes = file.url.as_bytes().to_vec();
                Ok(Box::pin(futures::stream::iter(vec![Ok(bytes)])))
            }
        }
    }
}

fn posted(name: &str, media: &str, size: Option<u64>, content: &str) -> PlatformFile {
    PlatformFile {
        id: format!("F-{name}"),
        url: content.into(),
        media_type: media.into(),
        filename: name.into(),
        size,
        source: serde_json::Value::Null,
    }
}

/// Files posted in a channel thread: the writer's files are downloaded through the channel
/// and reach the model before the text; a file too large (by its declared size: never
/// downloaded), of a type not accepted, whose download fails or never ends, is named to the
/// person in one notice while the rest of the message goes on; a message of files alone, all
/// refused, starts no turn; someone the channel does not let in gets nothing downloaded.
async fn files_posted_on_a_platform_are_taken_or_named(url: &str) {
    let limits = FileLimits {
        max_bytes: 1_000,
        media_types: vec!["image/*".into(), "text/*".into()],
        download_timeout: std::time::Duration::from_millis(300),
        ..FileLimits::default()
    };
    let (engine, seen) = world(url, limits).await;
    let outbox = Arc::new(FileOutbox {
        posts: Mutex::default(),
        opened: Mutex::default(),
    });
    let engine = engine.with_channel(Channel {
        platform: "test".into(),
        questions: None,
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowList::new(["test:ada".to_string()])),
        outbox: Some(outbox.clone()),
    });
    let said = |id: &str, who: &str, text: &str, files: Vec<PlatformFile>| ThreadMessage {
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
        raw: serde_json::Value::Null,
        files,
        mentions: Vec::new(),
    };
    let files = vec![
        posted("notes.txt", "text/plain", Some(10), "milk, eggs"),
        posted("huge.png", "image/png", Some(5_000), "x"),
        posted("a.zip", "application/zip", Some(2), "PK"),
        posted("gone.png", "image/png", None, ""),
        posted("slow.png", "image/png", None, ""),
    ];
    let out = engine
        .channels()
        .message("test", "T1", said("m1", "ada", "read these", files))
        .await
        .unwrap();
    let ChannelMessageOutcome::Sent(Sent::Started(h)) = out else {
        panic!("{out:?}");
    };
    h.done.await.unwrap().unwrap();
    let shown = seen.lock().unwrap().last().unwrap().clone();
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(
        shown[0].content,
        Some(FileContent::Text {
            text: "[notes.txt (text/plain)]\nmilk, eggs".into()
        })
    );
    assert_eq!(
        *outbox.opened.lock().unwrap(),
        ["notes.txt", "gone.png", "slow.png"],
        "nothing too large or of a refused type is downloaded"
    );
    frogbot_testkit::eventually(
        "the notice",
        std::time::Duration::from_secs(20),
        async || {
            outbox
                .posts
                .lock()
                .unwrap()
                .iter()
                .any(|p| p.starts_with("📎"))
        },
    )
    .await;
    let notice = outbox
        .posts
        .lock()
        .unwrap()
        .iter()
        .find(|p| p.starts_with("📎"))
        .cloned()
        .unwrap();
    assert_eq!(
        notice,
        "📎 I could not take huge.png: it is larger than the 1000 bytes limit; a.zip: files of \
         type application/zip are not accepted here; gone.png: the download failed; slow.png: \
         the download did not finish within 0.3 s."
    );
    let chat = frogbot_core::agent::channel_chat_id("test", "T1");
    let stored = engine.chats().messages(&chat).await.unwrap();
    let first = &stored[0].message;
    assert!(first.parts[0].as_file().is_some(), "{:?}", first.parts);
    assert_eq!(first.parts[1], MessagePart::text("read these"));

    // The platform delivers m1 again (a retried webhook, a replay after a restart): taken once,
    // nothing downloaded again, no second notice, no second turn.
    let (opened, posts, turns) = (
        outbox.opened.lock().unwrap().len(),
        outbox.posts.lock().unwrap().len(),
        seen.lock().unwrap().len(),
    );
    let again = vec![
        posted("notes.txt", "text/plain", Some(10), "milk, eggs"),
        posted("huge.png", "image/png", Some(5_000), "x"),
        posted("gone.png", "image/png", None, ""),
    ];
    let out = engine
        .channels()
        .message("test", "T1", said("m1", "ada", "read these", again))
        .await
        .unwrap();
    assert!(matches!(out, ChannelMessageOutcome::Duplicate), "{out:?}");
    assert_eq!(
        outbox.opened.lock().unwrap().len(),
        opened,
        "nothing downloaded again"
    );
    assert_eq!(
        outbox.posts.lock().unwrap().len(),
        posts,
        "no second notice"
    );
    assert_eq!(seen.lock().unwrap().len(), turns, "no second turn");
    assert_eq!(
        engine.chats().messages(&chat).await.unwrap().len(),
        stored.len()
    );

    // Files alone, all refused: no turn, no message.
    let turns = seen.lock().unwrap().len();
    let out = engine
        .channels()
        .message(
            "test",
            "T1",
            said(
                "m2",
                "ada",
                "",
                vec![posted("a.zip", "application/zip", None, "PK")],
            ),
        )
        .await
        .unwrap();
    assert!(matches!(out, ChannelMessageOutcome::Told), "{out:?}");
    assert_eq!(
        engine.chats().messages(&chat).await.unwrap().len(),
        stored.len()
    );
    assert_eq!(seen.lock().unwrap().len(), turns);

    // Someone not let in: nothing downloaded.
    let opened = outbox.opened.lock().unwrap().len();
    let out = engine
        .channels()
        .message(
            "test",
            "T1",
            said(
                "m3",
                "eve",
                "mine",
                vec![posted("e.txt", "text/plain", None, "x")],
            ),
        )
        .await
        .unwrap();
    assert!(matches!(out, ChannelMessageOutcome::Denied), "{out:?}");
    assert_eq!(outbox.opened.lock().unwrap().len(), opened);
}

/// A platform edit of a queued message with files changes its text and keeps its files; an
/// upload to a channel thread's chat id that does not exist is refused (that id space is the
/// channels').
async fn an_edit_of_a_queued_message_keeps_its_files(url: &str) {
    use frogbot_core::agent::scripted::ScriptEvent;
    let store = frogbot_testkit::open_store(url).await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let g = gate.clone();
    let model = ScriptedModel::new(move |req: &ModelRequest| {
        let last = frogbot_testkit::last_user(req);
        let mut events = Vec::new();
        if last.contains("wait") {
            events.push(ScriptEvent::Gate(g.clone()));
        }
        events.extend(reply(&format!("re: {last}")));
        events
    });
    let outbox = Arc::new(FileOutbox {
        posts: Mutex::default(),
        opened: Mutex::default(),
    });
    let engine = Engine::new(
        store,
        vec![frogbot_testkit::offer("main", model)],
        vec![],
        EngineConfig::default(),
    )
    .with_channel(Channel {
        platform: "test".into(),
        questions: None,
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowList::new(["test:ada".to_string()])),
        outbox: Some(outbox.clone()),
    });
    let said = |id: &str, text: &str, files: Vec<PlatformFile>| ThreadMessage {
        id: id.into(),
        text: text.into(),
        author: PlatformUser {
            id: "ada".into(),
            name: Some("ada".into()),
            is_bot: false,
        },
        metadata: ThreadMessageMetadata {
            date_sent: "2026-12-06T00:00:00Z".into(),
        },
        reply_to: None,
        raw: serde_json::Value::Null,
        files,
        mentions: Vec::new(),
    };
    let out = engine
        .channels()
        .message("test", "T1", said("m1", "wait", vec![]))
        .await
        .unwrap();
    assert!(
        matches!(out, ChannelMessageOutcome::Sent(Sent::Started(_))),
        "{out:?}"
    );
    let out = engine
        .channels()
        .message(
            "test",
            "T1",
            said(
                "m2",
                "typo",
                vec![posted("notes.txt", "text/plain", None, "milk")],
            ),
        )
        .await
        .unwrap();
    assert!(
        matches!(out, ChannelMessageOutcome::Sent(Sent::Queued { .. })),
        "{out:?}"
    );
    engine
        .channels()
        .message_changed("test", "T1", "m2", Some("fixed".into()))
        .await
        .unwrap();
    let chat = frogbot_core::agent::channel_chat_id("test", "T1");
    let queued = engine.chats().messages(&chat).await.unwrap();
    let m2 = queued
        .iter()
        .find(|m| m.message.text() == "fixed")
        .expect("the edited message");
    assert!(
        m2.message.parts.iter().any(|p| p.as_file().is_some()),
        "the file stays: {:?}",
        m2.message.parts
    );
    gate.add_permits(1);
    let e = engine
        .files()
        .upload(
            &ChatId::new("_test-nothread").unwrap(),
            None,
            "text/plain",
            "a.txt",
            chunks(b"x", 1),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::ChannelChat { .. }), "{e}");
}

/// The limits a configuration sets on what a message carries and what the model reads: more
/// files than `max_per_message` is refused and saves nothing; with `images_to_model = false` an
/// image is named, not shown; a text file is cut at `model_text_bytes`, and the model told.
async fn the_configured_limits_hold(url: &str) {
    let limits = FileLimits {
        max_per_message: 2,
        images_to_model: false,
        model_text_bytes: 5,
        ..FileLimits::default()
    };
    let (engine, seen) = world(url, limits).await;
    let chat = ChatId::new("files-limits").unwrap();
    let up = async |media: &str, name: &str, data: &[u8]| {
        let f = engine
            .files()
            .upload(&chat, None, media, name, chunks(data, 4))
            .await
            .unwrap();
        MessagePart::file(media, name, &file_url(&chat, &f.id))
    };
    let png = up("image/png", "shot.png", &[137, 80, 78, 71]).await;
    let notes = up("text/plain", "notes.txt", b"milk, eggs, bread").await;
    let more = up("text/plain", "more.txt", b"more").await;

    let e = send(
        &engine,
        &chat,
        vec![png.clone(), notes.clone(), more, MessagePart::text("three")],
    )
    .await
    .unwrap_err();
    assert!(
        matches!(e, Error::File(FileError::TooMany { limit: 2 })),
        "{e}"
    );
    assert!(
        engine.chats().get(&chat).await.unwrap().is_none(),
        "a refused message saves nothing"
    );
    assert!(seen.lock().unwrap().is_empty(), "and runs nothing");

    send(&engine, &chat, vec![png, notes, MessagePart::text("two")])
        .await
        .unwrap();
    let files = seen.lock().unwrap().last().unwrap().clone();
    assert_eq!(files.len(), 2, "{files:?}");
    match &files[0].content {
        Some(FileContent::Named { note }) => assert!(
            note.contains("shot.png (image/png)") && note.contains("only its name is known"),
            "{note}"
        ),
        other => panic!("an image is named when models do not read images: {other:?}"),
    }
    assert_eq!(
        files[1].content,
        Some(FileContent::Text {
            text: "[notes.txt (text/plain)]\nmilk,\n[… cut: the first 5 of 17 bytes shown]".into()
        })
    );
}

frogbot_testkit::backends!(
    the_configured_limits_hold,
    an_edit_of_a_queued_message_keeps_its_files,
    files_posted_on_a_platform_are_taken_or_named,
    uploads_reach_the_model_as_images_text_and_names,
    refused_files_leave_nothing,
    only_who_may_read_the_chat_reads_its_files,
);
