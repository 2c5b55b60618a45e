//! Files in and out through the Matrix adapter (issue 40's benchmark, per platform): time and
//! peak memory of a 1 MB and a 10 MB file, in this process.
//!
//! - `in`: `ChannelOutbox::open_file` of a person's file (its `mxc://` media source, as
//!   `convert` keeps it) read to the end, counted, not kept. The fake homeserver keeps the media
//!   it serves whole, which would hide what the adapter holds, so this runs against a media
//!   server of this bench (`/versions` and the
//!   unauthenticated `/_matrix/media/v3/download`, producing the bytes as they are read: a fixed
//!   cost) through a plain matrix-sdk client; not through the engine, nor Synapse. `open_file`
//!   streams the download itself (matrix-sdk's `get_media_content` would read it whole).
//! - `out`: `ChannelOutbox::deliver_files` of a file in memory (`OutFile::from_bytes`) against
//!   the fake homeserver: the media upload, then an `m.file` event in the thread; timed until
//!   the event is sent. The upload is streamed from `OutFile::open` (matrix-sdk's own takes a
//!   `Vec`); the fake (in this process) reads the body whole and keeps it.
//! - `out/fake`: the same media upload sent to the fake with a bare client (the body a `Vec`
//!   moved in): what the fake itself costs; `out` minus it is the adapter's share.
//!
//! Memory: the peak resident set (`VmHWM`, reset before each case by `/proc/self/clear_refs`)
//! over the resident set before it (glibc's mmap threshold fixed: `fixed_mmap_threshold`). What
//! grows from 1 MB to 10 MB is held whole somewhere (the fake's copies too); fixed buffers do not.
//!
//! The last lines judge issue 40's target from the cases: what the adapter holds beyond the fake's
//! own cost may grow by at most 2 MiB from 1 MB to 10 MB (`frogbot_testkit::peak::streamed`). One
//! run (2026-12-07, release, 2 cores), 10 MB: `in` 29 ms, +1.1 MiB (nothing held: the media server
//! makes the bytes as they are read); `out` 65 ms, +20.3 MiB (the fake alone: +20.3 MiB). The
//! adapter holds +0.8 MiB in and +0.1 MiB out at 10 MB, +1.4 and +0.1 at 1 MB: a fixed buffer, not
//! the file.
//!
//! ```text
//! cargo bench -p frogbot-matrix --bench files --features engine,testing
//! ```

use futures::StreamExt;

use frogbot_core::agent::{ChannelOutbox, Delivery};
use frogbot_matrix::channel::MatrixOutbox;
use frogbot_model::{PlatformFile, Thread};
use matrix_sdk::Client;
use matrix_sdk::ruma::OwnedUserId;
use serde_json::json;

const MB: usize = 1024 * 1024;
const PIECE: usize = 64 * 1024;

use frogbot_testkit::peak::{fixed_mmap_threshold, line, reset_peak, streamed};

/// A media server answering a download of `mxc://bench.test/{n}` with `n` bytes as they are read.
async fn media_server() -> String {
    use axum::extract::Path;
    use axum::routing::get;
    let download = |Path((_, n)): Path<(String, usize)>| async move {
        let piece =
            move |i: usize| Ok::<_, std::io::Error>(vec![(i % 251) as u8; PIECE.min(n - i)]);
        axum::body::Body::from_stream(futures::stream::iter((0..n).step_by(PIECE).map(piece)))
    };
    let versions = || async { axum::Json(json!({"versions": ["v1.1"]})) };
    let app = axum::Router::new()
        .route("/_matrix/client/versions", get(versions))
        .route("/_matrix/media/v3/download/{s}/{n}", get(download));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    fixed_mmap_threshold();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let media = Client::new(media_server().await.parse().unwrap())
        .await
        .unwrap();
    let reader = MatrixOutbox::new(media);
    let fake = frogbot_matrix::testing::FakeHomeserver::start().await;
    let alice = OwnedUserId::try_from("@alice:fake.test").unwrap();
    // Before the bot's client, whose first sync then knows the room.
    let room = fake.create_room(&[&alice]);
    let outbox = MatrixOutbox::new(fake.client().await);
    let http = reqwest::Client::new();
    for (n, size) in [1, 10].into_iter().map(|m| m * MB).enumerate() {
        let file = PlatformFile {
            id: format!("f{n}"),
            url: String::new(),
            media_type: "application/octet-stream".into(),
            filename: "x.bin".into(),
            size: Some(size as u64),
            source: json!({"url": format!("mxc://bench.test/{size}")}),
        };
        let at = reset_peak();
        let mut body = reader.open_file(&file).await.unwrap();
        let mut read = 0;
        while let Some(c) = body.next().await {
            read += c.unwrap().len();
        }
        line("matrix", "in", size, at);
        assert_eq!(read, size);
        let body = json!({"msgtype": "m.text", "body": "files please"});
        let root = fake.inject(&room, &alice, "m.room.message", body);
        let th = Thread {
            chat_id: format!("chat-{n}"),
            id: format!("{room}|{root}"),
            platform: "matrix".into(),
        };
        let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let file = frogbot_channel::OutFile::from_bytes(
            "f1",
            "application/octet-stream",
            "out.bin",
            bytes,
        );
        let key = Delivery::new(format!("deliver:c:m{n}:0"));
        let at = reset_peak();
        outbox.deliver_files(&th, &[file], 0, &key).await.unwrap();
        line("matrix", "out", size, at);
        assert_eq!(fake.uploads().last().unwrap().2, size);
        // The fake alone taking the same upload: the media upload, the body a `Vec` moved in.
        let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let url = format!("{}/_matrix/media/v3/upload", fake.url());
        let post = http.post(url).body(bytes).bearer_auth("fake-access-token");
        let at = reset_peak();
        let post = post
            .header("content-type", "application/octet-stream")
            .send()
            .await;
        assert!(post.unwrap().status().is_success());
        line("matrix", "out/fake", size, at);
    }
    // What the adapter holds of a file beyond the fake's own cost: a fixed buffer, not the file.
    streamed("matrix", "in", None);
    streamed("matrix", "out", Some("out/fake"));
}
