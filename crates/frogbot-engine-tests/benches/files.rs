//! Files in and out (issue 40's benchmark): time and peak memory of a file through the engine,
//! on SQLite and PostgreSQL, at 1, 10 and 50 MB.
//!
//! - `upload`: `engine.files().upload` from a body produced 64 KiB at a time (as an HTTP upload
//!   arrives), then `engine.files().bytes` read back whole, counted, not kept.
//! - `platform`: a person's file posted on a platform: the engine downloads it through
//!   `frogbot_channel::files::Downloads` (the guarded client every adapter's `open_file` uses)
//!   from a local HTTP server producing the bytes as they are read, into the thread's chat,
//!   before the message's turn.
//! - `agent out`: a file the bot sends (issue 40, item 2): an agent message naming a stored file,
//!   in a thread of a channel whose outbox reads the file as the adapters' uploads do
//!   (`OutFile::open`, a chunk at a time from the store), timed from the post to the last byte
//!   read. The adapters whose SDK takes an upload whole (serenity, teloxide's `InputFile::memory`,
//!   matrix-sdk) hold the file once in memory on top of this.
//!
//! Memory is the process's peak resident set (`VmHWM`), reset before each case
//! (`/proc/self/clear_refs`): the growth over the resident set before the case. It must not grow
//! with the file's size beyond fixed buffers (a 256 KiB chunk being written, one read back).
//!
//! ```text
//! cargo bench -p frogbot-engine-tests --bench files              # both stores
//! cargo bench -p frogbot-engine-tests --bench files -- sqlite    # one (or `postgres`)
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;

use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptedModel, reply};
use frogbot_core::agent::{AgentMessage, AgentPlace, ChannelTarget, Delivery, OutFile};
use frogbot_core::agent::{
    AllowAll, Channel, ChannelMessageOutcome, ChannelOutbox, Engine, EngineConfig, FileLimits,
    FileStream, ModelRequest, OutboxDelivery, Sent,
};
use frogbot_core::model::{
    ChatId, PlatformFile, PlatformUser, PrefixedIdentity, Thread, ThreadMessage,
    ThreadMessageMetadata, UiMessage,
};
use frogbot_core::model::{MessagePart, UserId};

const MB: usize = 1024 * 1024;
const PIECE: usize = 64 * 1024;

fn rss_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// Resets the peak resident set to the current one; returns the current one (KiB).
fn reset_peak() -> u64 {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    rss_kb("VmRSS:")
}

fn body(size: usize) -> impl futures::Stream<Item = Result<Vec<u8>, String>> + Send + 'static {
    futures::stream::iter((0..size.div_ceil(PIECE)).map(move |i| {
        let n = PIECE.min(size - i * PIECE);
        Ok(vec![(i % 251) as u8; n])
    }))
}

struct Outbox(
    Arc<frogbot_channel::files::Downloads>,
    tokio::sync::mpsc::UnboundedSender<usize>,
);

/// Not a `Draw`: none of the shared delivery loops (the defaults post with `post_reply`).
impl OutboxDelivery for Outbox {}

#[async_trait::async_trait]
impl ChannelOutbox for Outbox {
    async fn post_reply(&self, _thread: &Thread, _reply: &UiMessage) -> Result<(), BoxError> {
        Ok(())
    }
    async fn post_message(
        &self,
        _thread: &Thread,
        _message: &UiMessage,
        _delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError> {
        Ok(Vec::new())
    }
    /// Reads each file as an adapter's upload does, a chunk at a time, and reports its size.
    async fn deliver_files(
        &self,
        _thread: &Thread,
        files: &[OutFile],
        _after: usize,
        _delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError> {
        for f in files {
            let mut read = 0;
            let mut s = f.open().await?;
            while let Some(c) = s.next().await {
                read += c?.len();
            }
            let _ = self.1.send(read);
        }
        Ok(files.iter().map(|f| f.id.clone()).collect())
    }
    async fn open_file(&self, file: &PlatformFile) -> Result<FileStream, BoxError> {
        self.0.open(&file.url, &[]).await
    }
}

/// A local server answering `/bytes/{n}` with `n` bytes produced as they are read.
async fn server() -> String {
    let app = axum::Router::new().route(
        "/bytes/{n}",
        axum::routing::get(
            |axum::extract::Path(n): axum::extract::Path<usize>| async move {
                axum::body::Body::from_stream(body(n).map(|r| r.map_err(std::io::Error::other)))
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

async fn run(backend: &str, url: &str, base: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let model = ScriptedModel::new(|_: &ModelRequest| reply("ok"));
    let limits = FileLimits {
        max_bytes: 100 * MB as u64,
        download_timeout: Duration::from_secs(300),
        ..FileLimits::default()
    };
    let downloads = Arc::new(frogbot_channel::files::Downloads::new(
        frogbot_channel::files::FetchPolicy {
            allow_private: true,
            ..frogbot_channel::files::FetchPolicy::for_files()
        },
    ));
    let (sent_tx, mut sent_rx) = tokio::sync::mpsc::unbounded_channel();
    let engine = Engine::new(
        store,
        vec![frogbot_testkit::offer("main", model)],
        vec![],
        EngineConfig {
            files: limits,
            ..EngineConfig::default()
        },
    )
    .with_channel(Channel {
        platform: "bench".into(),
        questions: None,
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: Some(Arc::new(Outbox(downloads, sent_tx))),
    });
    println!("{backend}:");
    println!(
        "  {:<9} {:>6} {:>9} {:>9} {:>9} {:>13}",
        "case", "MB", "in ms", "MB/s", "out ms", "peak +MiB"
    );
    for (n, size) in [1, 10, 50].into_iter().map(|m| m * MB).enumerate() {
        let chat = ChatId::new(format!("bench-{n}")).unwrap();
        let before = reset_peak();
        let t = Instant::now();
        let row = engine
            .files()
            .upload(&chat, None, "application/octet-stream", "x.bin", body(size))
            .await
            .unwrap();
        let upload = t.elapsed();
        let t = Instant::now();
        let mut read = 0;
        let mut chunks = std::pin::pin!(engine.files().bytes(row));
        while let Some(c) = chunks.next().await {
            read += c.unwrap().len();
        }
        let back = t.elapsed();
        assert_eq!(read, size);
        let peak = rss_kb("VmHWM:").saturating_sub(before);
        println!(
            "  {:<9} {:>6} {:>9.1} {:>9.1} {:>9.1} {:>13.1}",
            "upload",
            size / MB,
            upload.as_secs_f64() * 1e3,
            size as f64 / MB as f64 / upload.as_secs_f64(),
            back.as_secs_f64() * 1e3,
            peak as f64 / 1024.0
        );
    }
    for (n, size) in [1, 10, 50].into_iter().map(|m| m * MB).enumerate() {
        let before = reset_peak();
        let t = Instant::now();
        let said = ThreadMessage {
            id: format!("m{n}"),
            text: "look".into(),
            author: PlatformUser {
                id: "ada".into(),
                name: None,
                is_bot: false,
            },
            metadata: ThreadMessageMetadata {
                date_sent: String::new(),
            },
            reply_to: None,
            raw: serde_json::Value::Null,
            files: vec![PlatformFile {
                id: format!("f{n}"),
                url: format!("{base}/bytes/{size}"),
                media_type: "application/octet-stream".into(),
                filename: "x.bin".into(),
                size: Some(size as u64),
                source: serde_json::Value::Null,
            }],
            mentions: Vec::new(),
        };
        let out = engine
            .channels()
            .message("bench", &format!("T{n}"), said)
            .await
            .unwrap();
        let ChannelMessageOutcome::Sent(Sent::Started(h)) = out else {
            panic!("{out:?}")
        };
        h.done.await.unwrap().unwrap();
        let took = t.elapsed();
        let peak = rss_kb("VmHWM:").saturating_sub(before);
        println!(
            "  {:<9} {:>6} {:>9.1} {:>9.1} {:>9} {:>13.1}",
            "platform",
            size / MB,
            took.as_secs_f64() * 1e3,
            size as f64 / MB as f64 / took.as_secs_f64(),
            "-",
            peak as f64 / 1024.0
        );
    }
    let agent = UserId::new("bench-agent");
    for (n, size) in [1, 10, 50].into_iter().map(|m| m * MB).enumerate() {
        let chat = engine
            .agents()
            .open_chat(
                Some(&agent),
                AgentPlace::Channel {
                    platform: "bench".into(),
                    place: ChannelTarget::Thread(format!("A{n}")),
                },
                "files out",
                &format!("k{n}"),
            )
            .await
            .unwrap()
            .chat_id;
        let row = engine
            .files()
            .upload(
                &chat,
                Some(&agent),
                "application/octet-stream",
                "x.bin",
                body(size),
            )
            .await
            .unwrap();
        let part = MessagePart::file(
            "application/octet-stream",
            "x.bin",
            &frogbot_core::agent::files::file_url(&chat, &row.id),
        );
        let before = reset_peak();
        let t = Instant::now();
        engine
            .agents()
            .post(
                &chat,
                Some(&agent),
                AgentMessage {
                    text: Some("here".into()),
                    files: vec![part],
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let read = sent_rx.recv().await.unwrap();
        let took = t.elapsed();
        assert_eq!(read, size);
        let peak = rss_kb("VmHWM:").saturating_sub(before);
        println!(
            "  {:<9} {:>6} {:>9} {:>9.1} {:>9.1} {:>13.1}",
            "agent out",
            size / MB,
            "-",
            size as f64 / MB as f64 / took.as_secs_f64(),
            took.as_secs_f64() * 1e3,
            peak as f64 / 1024.0
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let only = |b: &str| {
        !args.iter().any(|a| a == "sqlite" || a == "postgres") || args.iter().any(|a| a == b)
    };
    let base = server().await;
    if only("sqlite") {
        let db = frogbot_testkit::sqlite_db();
        run("sqlite", &db.url, &base).await;
    }
    if only("postgres") {
        match frogbot_testkit::postgres_db() {
            Some(db) => run("postgres", &db.url, &base).await,
            None => println!("postgres: skipped (no PostgreSQL server)"),
        }
    }
}
