//! Files in and out through the Telegram adapter (issue 40's benchmark, per platform): time and
//! peak memory of a 1 MB and a 10 MB file against the fake Bot API, in this process.
//!
//! - `in`: a person's document in a private chat (the file on the fake under a `file_id`) read
//!   as teloxide's `Message`, converted by `convert::thread_message`, given to an engine on
//!   SQLite whose channel is this adapter: it downloads the file with the adapter's `open_file`
//!   (`getFile`, then `/file/bot<token>/<path>`, streamed) into the chat and runs the turn; timed
//!   to the turn's end. Polling is left out (it carries the update, not the file). The Bot API
//!   refuses `getFile` over 20 MB; 10 MB is within it.
//! - `in/fake`: the same file URL read with the bare guarded client (`Downloads`, counted, not
//!   kept): what the fake itself costs (it answers with a copy of the whole file).
//! - `out`: `ChannelOutbox::deliver_files` of a file in memory (`OutFile::from_bytes`):
//!   `sendDocument` as multipart/form-data, the bytes streamed; timed until the fake answers,
//!   holding all bytes (it reads the part whole and keeps it, in this process).
//! - `out/fake`: the same `sendDocument` sent to the fake with a bare client (the part streamed
//!   as the adapter does): what the fake itself costs; `out` minus it is the adapter's share.
//!
//! Memory: the peak resident set (`VmHWM`, reset before each case by `/proc/self/clear_refs`)
//! over the resident set before it (glibc's mmap threshold fixed: `fixed_mmap_threshold`). What
//! grows from 1 MB to 10 MB is held whole somewhere (the fake's copies too); fixed buffers do not.
//!
//! The last lines judge issue 40's target from the cases: what the adapter holds beyond the fake's
//! own cost may grow by at most 2 MiB from 1 MB to 10 MB (`frogbot_testkit::peak::streamed`). One
//! run (2026-12-07, release, 2 cores), 10 MB: `in` 302 ms, +13.2 MiB (the fake alone: +11.4 MiB);
//! `out` 50 ms, +21.0 MiB (the fake alone: +21.1 MiB). Beyond the fake the adapter holds +1.8 MiB
//! in and +0.2 MiB out at 10 MB, +3.1 and -0.3 at 1 MB: a fixed buffer, not the file.
//!
//! ```text
//! cargo bench -p frogbot-telegram --bench files --features engine,testing
//! ```

use futures::StreamExt;

use frogbot_channel::files::{Downloads, FetchPolicy};
use frogbot_channel::{Adapter, Delivery, OutFile};
use frogbot_core::agent::scripted::{ScriptedModel, reply};
use frogbot_core::agent::{ChannelMessageOutcome, ModelRequest, Sent};
use frogbot_model::{Interaction, Thread};
use frogbot_telegram::channel::Config;
use frogbot_telegram::testing::{FakeBotApi, TOKEN, private_chat, user};
use frogbot_telegram::{PLATFORM, convert};
use serde_json::json;

const MB: usize = 1024 * 1024;

use frogbot_testkit::peak::{fixed_mmap_threshold, line, reset_peak, streamed};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    fixed_mmap_threshold();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeBotApi::start().await;
    let policy = FetchPolicy {
        allow_private: true,
        ..FetchPolicy::for_files()
    };
    let mut config = Config::new(TOKEN);
    config.api_url = Some(fake.api_url());
    config.file_policy = Some(policy.clone());
    let telegram = frogbot_telegram::channel::connect(config).await.unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let model = ScriptedModel::new(|_: &ModelRequest| reply("ok"));
    let engine = frogbot_testkit::engine_with(store, model).with_channel(telegram.channel());
    let downloads = Downloads::new(policy);
    let http = reqwest012::Client::new();
    for (n, size) in [1, 10].into_iter().map(|m| m * MB).enumerate() {
        let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let path = format!("documents/file_{n}.bin");
        let file_id = fake.store_file(&path, bytes.clone());
        let chat = 4200 + n as i64;
        let said = fake.user_message(private_chat(chat, "Ada"), user(chat, "Ada"), "look", None);
        let mut m = said["message"].clone();
        m["document"] = json!({"file_id": file_id, "file_unique_id": format!("AgAD{n}"),
                               "file_name": "x.bin", "mime_type": "application/octet-stream"});
        let m: teloxide::types::Message = serde_json::from_value(m).unwrap();
        let Ok(Interaction::Message { message }) = convert::thread_message(&m) else {
            panic!("a message")
        };
        let thread = chat.to_string();
        let at = reset_peak();
        let out = engine.channels().message(PLATFORM, &thread, message);
        let Ok(ChannelMessageOutcome::Sent(Sent::Started(h))) = out.await else {
            panic!("a turn")
        };
        h.done.await.unwrap().unwrap();
        line("telegram", "in", size, at);

        let url = fake.api_url().join(&format!("file/bot{TOKEN}/{path}"));
        let at = reset_peak();
        let mut body = downloads.open(url.unwrap().as_str(), &[]).await.unwrap();
        let mut read = 0;
        while let Some(c) = body.next().await {
            read += c.unwrap().len();
        }
        line("telegram", "in/fake", size, at);
        assert_eq!(read, size);
        let th = Thread {
            chat_id: format!("chat-{n}"),
            id: chat.to_string(),
            platform: PLATFORM.into(),
        };
        let file = OutFile::from_bytes("f1", "application/octet-stream", "out.bin", bytes);
        let outbox = telegram.channel().outbox.unwrap();
        let key = Delivery::new(format!("deliver:c:m{n}:0"));
        let sent = fake.calls("senddocument").len();
        let at = reset_peak();
        outbox.deliver_files(&th, &[file], 0, &key).await.unwrap();
        line("telegram", "out", size, at);
        assert_eq!(fake.calls("senddocument").len(), sent + 1);
        // The fake alone taking the same upload: `sendDocument`, the part streamed as the
        // adapter streams it (its length given), 64 KiB pieces made as they are read.
        let piece =
            move |i: usize| Ok::<_, std::io::Error>(vec![(i % 251) as u8; (size - i).min(1 << 16)]);
        let body = futures::stream::iter((0..size).step_by(1 << 16).map(piece));
        let body = reqwest012::Body::wrap_stream(body);
        let part = reqwest012::multipart::Part::stream_with_length(body, size as u64);
        let part = part.file_name("y.bin");
        let form = reqwest012::multipart::Form::new().text("chat_id", chat.to_string());
        let url = format!("{}bot{TOKEN}/sendDocument", fake.api_url());
        let at = reset_peak();
        let post = http.post(url).multipart(form.part("document", part));
        assert!(post.send().await.unwrap().status().is_success());
        line("telegram", "out/fake", size, at);
    }
    // What the adapter holds of a file beyond the fake's own cost: a fixed buffer, not the file.
    streamed("telegram", "in", Some("in/fake"));
    streamed("telegram", "out", Some("out/fake"));
}
