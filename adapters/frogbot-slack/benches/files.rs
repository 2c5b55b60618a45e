//! Files in and out through the Slack adapter (issue 40's benchmark, per platform): time and
//! peak memory of a 1 MB and a 10 MB file against the fake Slack, in this process.
//!
//! - `in`: a person's `file_share` message in the bot's thread (the file on the fake, its
//!   `url_private_download` in the event) converted by `message_from_push_json` and given to an
//!   engine on SQLite whose channel is this adapter: the engine downloads it with the adapter's
//!   `open_file` (the bot token, streamed) into the chat, then runs the turn; timed to the turn's
//!   end. Socket Mode's transport is left out (it carries the event, not the file).
//! - `in/fake`: the same download with the bare guarded client (`Downloads`, chunks counted, not
//!   kept): what the fake itself costs (it answers with a copy of the whole file).
//! - `out`: `ChannelOutbox::deliver_files` of a file already in memory (`OutFile::from_bytes`):
//!   `files.getUploadURLExternal`, the bytes `POST`ed, `files.completeUploadExternal`; timed
//!   until Slack answers the completion, when the fake holds all bytes. The bytes are streamed
//!   to the upload URL from `OutFile::open` (not through slack-morphism, whose upload takes a
//!   `Vec`); the fake (in this process) keeps what it receives.
//! - `out/fake`: the same upload sent to the fake with a bare client (the three calls, the body
//!   a `Vec` moved in): what the fake itself costs.
//! - `out/fake~`: the same, the bytes streamed by the bare guarded client as the adapter streams
//!   them: what the fake costs taking a streamed body (its chunks held apart, then copied
//!   whole); `out` minus it is the adapter's share.
//!
//! Memory: the peak resident set (`VmHWM`, reset before each case by `/proc/self/clear_refs`)
//! over the resident set before it (glibc's mmap threshold fixed: `fixed_mmap_threshold`). What
//! grows from 1 MB to 10 MB is held whole somewhere (the fake's copies too); fixed buffers do not.
//!
//! The last lines judge issue 40's target from the cases: what the adapter holds beyond the fake's
//! own cost may grow by at most 2 MiB from 1 MB to 10 MB (`frogbot_testkit::peak::streamed`). One
//! run (2026-12-07, release, 2 cores), 10 MB: `in` 261 ms, +13.2 MiB (the fake alone: +11.4 MiB);
//! `out` 73 ms, +29.9 MiB (the fake's streamed intake alone: +29.9 MiB). Beyond the fake the
//! adapter holds +1.7 MiB in and +0.0 MiB out at 10 MB, +2.5 and -0.1 at 1 MB: a fixed buffer, not
//! the file.
//!
//! ```text
//! cargo bench -p frogbot-slack --bench files --features engine,testing
//! ```

use futures::StreamExt;

use frogbot_channel::files::{Downloads, FetchPolicy};
use frogbot_channel::{Adapter, ChannelOutbox, Delivery, OutFile};
use frogbot_core::agent::scripted::{ScriptedModel, reply};
use frogbot_core::agent::{ChannelMessageOutcome, ModelRequest, Sent};
use frogbot_model::Thread;
use frogbot_slack::convert::message_from_push_json;
use frogbot_slack::testing::{BOT_TOKEN, BOT_USER, FakeSlack};
use frogbot_slack::{PLATFORM, SlackApi};
use serde_json::json;

const MB: usize = 1024 * 1024;

use frogbot_testkit::peak::{fixed_mmap_threshold, line, reset_peak, streamed};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    fixed_mmap_threshold();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeSlack::start().await;
    let slack = frogbot_slack::channel::connect(fake.http_config())
        .await
        .expect("connect to the fake");
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let model = ScriptedModel::new(|_: &ModelRequest| reply("ok"));
    let engine = frogbot_testkit::engine_with(store, model).with_channel(slack.channel());
    let downloads = Downloads::new(FetchPolicy {
        allow_private: true,
        ..FetchPolicy::for_files()
    });
    let (http, client) = (reqwest::Client::new(), fake.client(BOT_TOKEN));
    for (n, size) in [1, 10].into_iter().map(|m| m * MB).enumerate() {
        let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let root = fake.user_message("C42", None, "U1", &format!("<@{BOT_USER}> hi"));
        let file = fake.upload_file("x.bin", "application/octet-stream", bytes.clone());
        let url = file["url_private_download"].as_str().unwrap().to_owned();
        let said = fake.user_message("C42", Some(&root.ts), "U1", "look");
        let mut event = fake.message_event(&said, "channel");
        event["subtype"] = json!("file_share");
        event["files"] = json!([file]);
        let said = message_from_push_json(&fake.event_callback(event), BOT_USER).unwrap();
        let said = said.unwrap();
        let at = reset_peak();
        let out = engine
            .channels()
            .message(PLATFORM, &said.thread, said.message);
        let Ok(ChannelMessageOutcome::Sent(Sent::Started(h))) = out.await else {
            panic!("a turn")
        };
        h.done.await.unwrap().unwrap();
        line("slack", "in", size, at);
        let at = reset_peak();
        let auth = format!("Bearer {BOT_TOKEN}");
        let headers = [("authorization", auth.as_str())];
        let mut body = downloads.open(&url, &headers).await.unwrap();
        let mut read = 0;
        while let Some(c) = body.next().await {
            read += c.unwrap().len();
        }
        line("slack", "in/fake", size, at);
        assert_eq!(read, size, "{url}");
        let th = Thread {
            chat_id: format!("chat-{n}"),
            id: root.id(),
            platform: PLATFORM.into(),
        };
        let file = OutFile::from_bytes("f1", "application/octet-stream", "out.bin", bytes);
        let outbox: &dyn ChannelOutbox = &slack;
        let key = Delivery::new(format!("deliver:c:m{n}:0"));
        let at = reset_peak();
        outbox.deliver_files(&th, &[file], 0, &key).await.unwrap();
        line("slack", "out", size, at);
        assert_eq!(fake.uploads().last().unwrap().length, size as u64);

        // The fake alone taking the same upload: reserve, `POST` the bytes, complete.
        let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let api = fake.api_url();
        let at = reset_peak();
        let reserve = format!("{api}/files.getUploadURLExternal?filename=y.bin&length={size}");
        let got = http.get(reserve).bearer_auth(BOT_TOKEN).send().await;
        let got = got.unwrap().text().await.unwrap();
        let got: serde_json::Value = serde_json::from_str(&got).unwrap();
        let post = http.post(got["upload_url"].as_str().unwrap()).body(bytes);
        let post = post.header("content-type", "application/octet-stream");
        assert!(post.send().await.unwrap().status().is_success());
        let (channel, ts) = th.id.split_once(':').unwrap();
        let id = got["file_id"].as_str().unwrap();
        client.complete_upload(channel, ts, id, "y").await.unwrap();
        line("slack", "out/fake", size, at);

        // The same, the bytes streamed in 64 KiB pieces as the adapter sends them (the bare
        // guarded client): what the fake costs taking a streamed body.
        let file = OutFile::from_bytes("f2", "application/octet-stream", "z.bin", {
            (0..size).map(|i| (i % 251) as u8).collect()
        });
        let at = reset_peak();
        let reserve = format!("{api}/files.getUploadURLExternal?filename=z.bin&length={size}");
        let got = http.get(reserve).bearer_auth(BOT_TOKEN).send().await;
        let got = got.unwrap().text().await.unwrap();
        let got: serde_json::Value = serde_json::from_str(&got).unwrap();
        let sent = downloads.upload(got["upload_url"].as_str().unwrap(), &[], &file);
        assert!(sent.await.unwrap().is_success());
        let id = got["file_id"].as_str().unwrap();
        client.complete_upload(channel, ts, id, "z").await.unwrap();
        line("slack", "out/fake~", size, at);
    }
    // What the adapter holds of a file beyond the fake's own cost: a fixed buffer, not the file.
    streamed("slack", "in", Some("in/fake"));
    streamed("slack", "out", Some("out/fake~"));
}
