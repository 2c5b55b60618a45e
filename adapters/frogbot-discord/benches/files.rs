//! Files in and out through the Discord adapter (issue 40's benchmark, per platform): time and
//! peak memory of a 1 MB and a 10 MB file against the fake Discord, in this process.
//!
//! - `in`: a person's message with an attachment in a thread (the file on the fake CDN, the
//!   attachment object in the message as Discord sends it) read as serenity's `Message`,
//!   converted by `convert::thread_message` and given to an engine on SQLite whose channel is
//!   this adapter: the engine downloads the CDN URL with the adapter's `open_file` (streamed)
//!   into the chat, then runs the turn; timed to the turn's end. The gateway's transport is left
//!   out (it carries the message, not the file).
//! - `in/fake`: the same download with the bare guarded client (`Downloads`, read a chunk at a
//!   time, counted, not kept): what the fake itself costs. The fake CDN answers from memory
//!   with a copy of the whole file.
//! - `out`: `ChannelOutbox::deliver_files` of a file already in memory (`OutFile::from_bytes`):
//!   Discord's multipart create message through serenity; timed until the fake answers, when it
//!   holds all bytes. The file part is streamed from `OutFile::open` (not through serenity,
//!   whose attachment is a `Vec`); the fake, in this process too, reads it whole and keeps it.
//! - `out/fake`: the same multipart create message sent to the fake with a bare client (the body
//!   built beforehand): what the fake itself costs.
//! - `out/fake~`: the same, its file part streamed by the bare guarded client as the adapter
//!   streams it: what the fake costs taking a streamed part; `out` minus it is the adapter's
//!   share.
//!
//! Memory: the peak resident set (`VmHWM`, reset before each case by `/proc/self/clear_refs`)
//! over the resident set before it (glibc's mmap threshold fixed: `fixed_mmap_threshold`). What
//! grows from 1 MB to 10 MB is held whole somewhere (the fake's copies too); fixed buffers do not.
//!
//! The last lines judge issue 40's target from the cases: what the adapter holds beyond the fake's
//! own cost may grow by at most 2 MiB from 1 MB to 10 MB (`frogbot_testkit::peak::streamed`). One
//! run (2026-12-07, release, 2 cores), 10 MB: `in` 162–700 ms (shared machine), +13.3 MiB (the fake
//! alone: +11.6 MiB); `out` 44 ms, +21.2 MiB (the fake's streamed intake alone: +20.8 MiB). Beyond
//! the fake the adapter holds +1.6 MiB in and +0.7 MiB out at 10 MB, +3.2 and +0.0 at 1 MB: a fixed
//! buffer, not the file.
//!
//! ```text
//! cargo bench -p frogbot-discord --bench files --features engine,testing
//! ```

use futures::StreamExt;

use frogbot_channel::files::{Downloads, FetchPolicy};
use frogbot_channel::{Adapter, Delivery, OutFile};
use frogbot_core::agent::scripted::{ScriptedModel, reply};
use frogbot_core::agent::{ChannelMessageOutcome, ModelRequest, Sent};
use frogbot_discord::testing::{FakeDiscord, user};
use frogbot_discord::{PLATFORM, convert};
use frogbot_model::Thread;

const MB: usize = 1024 * 1024;
const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;

use frogbot_testkit::peak::{fixed_mmap_threshold, line, reset_peak, streamed};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    fixed_mmap_threshold();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeDiscord::start(APP, BOT).await;
    let discord = frogbot_discord::channel::connect(fake.config())
        .await
        .expect("connect to the fake");
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let model = ScriptedModel::new(|_: &ModelRequest| reply("ok"));
    let engine = frogbot_testkit::engine_with(store, model).with_channel(discord.channel());
    let downloads = Downloads::new(FetchPolicy {
        allow_private: true,
        ..FetchPolicy::for_files()
    });
    let http = reqwest012::Client::new();
    for (n, size) in [1, 10].into_iter().map(|m| m * MB).enumerate() {
        let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let channel = fake.new_id();
        let file = ("x.bin", "application/octet-stream", bytes.clone());
        let alice = user(700_000_000_000_000_007, "alice", false);
        let m = fake.user_message_with_files(channel, Some(1), &alice, "look", &[file]);
        let url = m["attachments"][0]["url"].as_str().unwrap().to_owned();
        let m: serenity::all::Message = serde_json::from_value(m).unwrap();
        let (thread, said) = (convert::thread_id(&m), convert::thread_message(&m));
        let at = reset_peak();
        let out = engine.channels().message(PLATFORM, &thread, said);
        let Ok(ChannelMessageOutcome::Sent(Sent::Started(h))) = out.await else {
            panic!("a turn")
        };
        h.done.await.unwrap().unwrap();
        line("discord", "in", size, at);

        let at = reset_peak();
        let mut body = downloads.open(&url, &[]).await.unwrap();
        let mut read = 0;
        while let Some(c) = body.next().await {
            read += c.unwrap().len();
        }
        line("discord", "in/fake", size, at);
        assert_eq!(read, size, "{url}");

        let th = Thread {
            chat_id: format!("chat-{n}"),
            id: channel.to_string(),
            platform: PLATFORM.into(),
        };
        let file = OutFile::from_bytes("f1", "application/octet-stream", "out.bin", bytes);
        let outbox = discord.outbox();
        let key = Delivery::new(format!("deliver:c:m{n}:0"));
        let at = reset_peak();
        let ids = outbox.deliver_files(&th, &[file], 0, &key).await.unwrap();
        line("discord", "out", size, at);
        assert_eq!(fake.uploads(&ids[0])[0].1.len(), size);

        // The fake alone taking the same upload: the multipart create message, built beforehand.
        let b = "frogbot-bench";
        let mut body = format!(
            "--{b}\r\nContent-Disposition: form-data; name=\"payload_json\"\r\n\r\n{{}}\r\n\
             --{b}\r\nContent-Disposition: form-data; name=\"files[0]\"; filename=\"y.bin\"\r\n\r\n"
        )
        .into_bytes();
        body.extend((0..size).map(|i| (i % 251) as u8));
        body.extend(format!("\r\n--{b}--\r\n").bytes());
        let url = format!("{}/api/v10/channels/{channel}/messages", fake.api_url);
        let post = http
            .post(url)
            .body(body)
            .header("authorization", "Bot fake-token");
        let post = post.header("content-type", format!("multipart/form-data; boundary={b}"));
        let at = reset_peak();
        assert!(post.send().await.unwrap().status().is_success());
        line("discord", "out/fake", size, at);

        // The same, the file part streamed in 64 KiB pieces as the adapter sends it (the bare
        // guarded client): what the fake costs taking a streamed part.
        let file = OutFile::from_bytes("f2", "application/octet-stream", "z.bin", {
            (0..size).map(|i| (i % 251) as u8).collect()
        });
        let url = format!("{}/api/v10/channels/{channel}/messages", fake.api_url);
        let texts = [("payload_json", "application/json", "{}")];
        let auth = [("authorization", "Bot fake-token")];
        let at = reset_peak();
        let sent = downloads.upload_form(&url, &auth, &texts, "files[0]", &file);
        assert!(sent.await.unwrap().is_success());
        line("discord", "out/fake~", size, at);
    }
    // What the adapter holds of a file beyond the fake's own cost: a fixed buffer, not the file.
    streamed("discord", "in", Some("in/fake"));
    streamed("discord", "out", Some("out/fake~"));
}
