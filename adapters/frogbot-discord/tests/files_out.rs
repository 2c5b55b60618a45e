//! Files out ("files out"): a message's files, posted by `ChannelOutbox::deliver_files` after its
//! text, through serenity's real `Http` and the fake Discord. Each file is its own message,
//! uploaded as Discord's multipart create message (`payload_json` + `files[0]`), in the thread's
//! place, under the nonce of its key with `enforce_nonce`; the bytes that arrive are the file's,
//! its name and media type are kept, only a message's first piece notifies, a file past the
//! upload limit is a text naming it, a retry after a lost response posts nothing twice, a 5xx
//! comes back transient, and deleting the message's pieces deletes its files.

use std::time::Duration;

use frogbot_channel::{Delivery, OutFile};
use frogbot_discord::channel::{Config, DiscordAdapter};
use frogbot_discord::ids::delivery_nonce;
use frogbot_discord::testing::{FakeDiscord, SeenFile};
use frogbot_model::faults::{Fault, FaultPlan};
use frogbot_model::{Thread, Transient, UiMessage};
use serde_json::{Value, json};

const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;
const MIB: usize = 1024 * 1024;

fn thread(id: impl Into<String>) -> Thread {
    Thread {
        id: id.into(),
        platform: frogbot_discord::PLATFORM.into(),
        chat_id: "chat-files".into(),
    }
}

fn reply(text: &str) -> UiMessage {
    serde_json::from_value(json!({"id": "r", "role": "assistant",
                                  "parts": [{"type": "text", "text": text}]}))
    .expect("a reply")
}

/// `len` bytes no chunking bug passes unnoticed (xorshift: no period a chunk size divides).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

async fn connect(config: Config) -> DiscordAdapter {
    // The file part goes through the guarded client (rustls, no provider of its own).
    let _ = rustls::crypto::ring::default_provider().install_default();
    frogbot_discord::channel::connect(Config {
        api_timeout: Duration::from_secs(10),
        ..config
    })
    .await
    .expect("connect to the fake")
}

/// The create-message calls answered so far that carried files.
fn uploads_sent(fake: &FakeDiscord) -> Vec<frogbot_discord::testing::Call> {
    fake.calls()
        .into_iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/messages") && !c.files.is_empty())
        .collect()
}

fn id_of(m: &Value) -> String {
    m["id"].as_str().expect("a message id").to_owned()
}

#[tokio::test]
async fn files_follow_the_text_with_their_bytes_names_and_types_and_only_the_first_notifies() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let outbox = connect(fake.config()).await.outbox();
    let channel = fake.new_id();
    let thread = thread(channel.to_string());
    let delivery = Delivery::new("deliver:c:m:0");
    let chart = noise(3 * MIB + 12_345, 7);
    let report = b"%PDF-1.7 a small report".to_vec();
    let files = [
        OutFile::from_bytes("f1", "image/png", "chart.png", chart.clone()),
        OutFile::from_bytes("f2", "application/pdf", "report.pdf", report.clone()),
    ];

    let text = outbox
        .deliver(
            &thread,
            &reply("Here is the chart and the report."),
            &delivery,
        )
        .await
        .expect("the text");
    let ids = outbox
        .deliver_files(&thread, &files, text.len(), &delivery)
        .await
        .expect("the files");

    // Order: the text, then the files in order; the ids are the file messages'.
    let posted = fake.channel_messages(channel);
    assert_eq!(posted.len(), 3);
    assert_eq!(posted[0]["content"], "Here is the chart and the report.");
    assert_eq!(ids, [id_of(&posted[1]), id_of(&posted[2])]);
    // The bytes that arrived are the file's; name and media type kept.
    for (id, (file, bytes)) in ids.iter().zip(files.iter().zip([&chart, &report])) {
        let got = fake.uploads(id);
        assert_eq!(got.len(), 1, "one file a message");
        let (attachment, data) = &got[0];
        assert!(data == bytes, "{}: the bytes are the file's", file.filename);
        assert_eq!(attachment["filename"], file.filename.as_str());
        assert_eq!(attachment["content_type"], file.media_type.as_str());
        assert_eq!(attachment["size"], file.size);
        let url = attachment["url"].as_str().unwrap();
        assert!(url.starts_with(&format!("{}/attachments/{channel}/", fake.api_url)));
    }
    // Sent as Discord's multipart create: payload_json naming files[0], the nonce of its key.
    let sent = uploads_sent(&fake);
    assert_eq!(sent.len(), 2);
    for (i, call) in sent.iter().enumerate() {
        assert_eq!(call.files.len(), 1);
        assert_eq!(call.files[0]["name"], "files[0]");
        assert_eq!(call.files[0]["filename"], files[i].filename.as_str());
        assert_eq!(call.body["attachments"][0]["id"], 0);
        assert_eq!(
            call.body["attachments"][0]["filename"],
            files[i].filename.as_str()
        );
        assert_eq!(call.body["nonce"], delivery_nonce(&delivery.file_key(i)));
        assert_eq!(call.body["enforce_nonce"], true);
        assert_eq!(call.body["allowed_mentions"]["parse"], json!([]));
    }
    // What a person sees: one notification for the message, the files after the text.
    let seen = fake.person_view(&thread.id);
    assert_eq!(
        seen.iter().map(|m| m.notified).collect::<Vec<_>>(),
        [true, false, false]
    );
    assert_eq!(
        seen[1].files,
        [SeenFile {
            filename: "chart.png".into(),
            media_type: "image/png".into(),
            size: chart.len() as u64,
        }]
    );
    assert_eq!(seen[1].text, "📎 chart.png (image/png, 3 MB)");
    assert_eq!(seen[2].text, "📎 report.pdf (application/pdf, 23 bytes)");
}

#[tokio::test]
async fn a_message_of_files_alone_notifies_once_and_replies_to_its_conversation_root() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let outbox = connect(fake.config()).await.outbox();
    // An agent's conversation in a DM: `{dm}~{root}`, everything replies to the root.
    let dm = fake.new_id();
    let root = fake.new_id();
    let thread = thread(format!("{dm}~{root}"));
    let files = [
        OutFile::from_bytes("f1", "text/csv", "data.csv", b"a,b\n1,2\n".to_vec()),
        OutFile::from_bytes("f2", "image/jpeg", "photo.jpg", noise(40_000, 3)),
    ];
    let ids = outbox
        .deliver_files(&thread, &files, 0, &Delivery::new("deliver:c:m2:0"))
        .await
        .expect("the files");
    assert_eq!(ids.len(), 2);
    let seen = fake.person_view(&thread.id);
    assert_eq!(
        seen.iter()
            .map(|m| (m.notified, m.text.as_str()))
            .collect::<Vec<_>>(),
        [
            (true, "📎 data.csv (text/csv, 8 bytes)"),
            (false, "📎 photo.jpg (image/jpeg, 39 KB)"),
        ],
        "the first file is the message's first piece"
    );
    for call in uploads_sent(&fake) {
        assert_eq!(
            call.body["message_reference"]["message_id"],
            root.to_string()
        );
        assert_eq!(call.body["message_reference"]["fail_if_not_exists"], false);
    }
}

#[tokio::test]
async fn a_file_past_the_upload_limit_is_named_in_a_text_instead() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let big = OutFile::from_bytes("big", "video/mp4", "talk.mp4", noise(11 * MIB, 5));

    // The default limit (Discord's 10 MiB for bots): not uploaded at all.
    let outbox = connect(fake.config()).await.outbox();
    let channel = fake.new_id();
    let ids = outbox
        .deliver_files(
            &thread(channel.to_string()),
            std::slice::from_ref(&big),
            1,
            &Delivery::new("deliver:c:big:0"),
        )
        .await
        .expect("a text in its place");
    assert!(uploads_sent(&fake).is_empty(), "nothing uploaded");
    let posted = fake.channel_messages(channel);
    assert_eq!(ids, [id_of(&posted[0])]);
    assert_eq!(
        posted[0]["content"],
        "📎 talk.mp4 (11 MB) could not be sent here: larger than Discord's 10 MB limit for bots."
    );
    assert_eq!(
        posted[0]["flags"], 4096,
        "silent: a later piece of its message"
    );

    // Configured higher than the server takes: Discord refuses it (413, 40005), a text instead.
    let raised = Config {
        max_upload_bytes: 20 * MIB as u64,
        ..fake.config()
    };
    let outbox = connect(raised.clone()).await.outbox();
    let channel = fake.new_id();
    outbox
        .deliver_files(
            &thread(channel.to_string()),
            std::slice::from_ref(&big),
            0,
            &Delivery::new("deliver:c:big:1"),
        )
        .await
        .expect("a text in its place");
    let refused = uploads_sent(&fake);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].status, 413);
    assert_eq!(refused[0].response["code"], 40005);
    let posted = fake.channel_messages(channel);
    assert_eq!(posted.len(), 1);
    assert_eq!(
        posted[0]["content"],
        "📎 talk.mp4 (11 MB) could not be sent here: larger than this Discord server's upload \
         limit for bots."
    );
    assert!(fake.uploads(&id_of(&posted[0])).is_empty());

    // A boosted server (its limit 25 MiB) with the limit raised: uploaded.
    fake.set_upload_limit(25 * MIB as u64);
    let channel = fake.new_id();
    let ids = outbox
        .deliver_files(
            &thread(channel.to_string()),
            std::slice::from_ref(&big),
            0,
            &Delivery::new("deliver:c:big:2"),
        )
        .await
        .expect("uploaded");
    let got = fake.uploads(&ids[0]);
    assert_eq!(got[0].1.len(), 11 * MIB);
    assert!(got[0].1 == big.bytes().await.unwrap());
}

#[tokio::test]
async fn a_retry_after_a_lost_response_does_not_post_the_file_twice() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let outbox = connect(fake.config()).await.outbox();
    let channel = fake.new_id();
    let thread = thread(channel.to_string());
    let file = OutFile::from_bytes("f1", "image/png", "chart.png", noise(3 * MIB, 11));
    let mut delivery = Delivery::new("deliver:c:lost:0");

    // Discord creates the message, the connection drops before its answer.
    fake.set_faults(FaultPlan::new(1, 1.0).only(&[Fault::ResetAfterProcessing]));
    let lost = outbox
        .deliver_files(&thread, std::slice::from_ref(&file), 1, &delivery)
        .await
        .expect_err("the answer was lost");
    let t = Transient::find(lost.as_ref()).expect("a lost answer is worth retrying");
    assert!(t.may_be_done(), "the upload may have been carried out");
    fake.clear_faults();
    assert_eq!(fake.channel_messages(channel).len(), 1, "it was posted");

    // The engine's retry, same key: Discord answers the first message (its nonce).
    delivery.attempt = 1;
    let ids = outbox
        .deliver_files(&thread, std::slice::from_ref(&file), 1, &delivery)
        .await
        .expect("the retry");
    let posted = fake.channel_messages(channel);
    assert_eq!(posted.len(), 1, "not posted twice");
    assert_eq!(ids, [id_of(&posted[0])]);
    assert!(fake.uploads(&ids[0])[0].1 == file.bytes().await.unwrap());
    let sent = uploads_sent(&fake);
    assert_eq!(sent.len(), 2, "uploaded twice, created once");
    assert_eq!(sent[0].body["nonce"], sent[1].body["nonce"]);
}

#[tokio::test]
async fn a_server_error_comes_back_transient_and_the_retry_posts_once() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let outbox = connect(fake.config()).await.outbox();
    let channel = fake.new_id();
    let thread = thread(channel.to_string());
    let file = OutFile::from_bytes("f1", "application/zip", "logs.zip", noise(70_000, 13));
    let mut delivery = Delivery::new("deliver:c:5xx:0");

    fake.set_faults(FaultPlan::new(2, 1.0).only(&[Fault::ServerError]));
    let failed = outbox
        .deliver_files(&thread, std::slice::from_ref(&file), 0, &delivery)
        .await
        .expect_err("a 500");
    assert!(
        Transient::is_transient(failed.as_ref()),
        "a 5xx is worth retrying: {failed}"
    );
    fake.clear_faults();
    assert!(fake.channel_messages(channel).is_empty(), "nothing posted");

    delivery.attempt = 1;
    let ids = outbox
        .deliver_files(&thread, std::slice::from_ref(&file), 0, &delivery)
        .await
        .expect("the retry");
    assert_eq!(fake.channel_messages(channel).len(), 1);
    assert_eq!(fake.uploads(&ids[0])[0].0["filename"], "logs.zip");
}

#[tokio::test]
async fn deleting_a_message_deletes_its_file_messages() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let outbox = connect(fake.config()).await.outbox();
    let channel = fake.new_id();
    let thread = thread(channel.to_string());
    let delivery = Delivery::new("deliver:c:del:0");
    let text = outbox
        .deliver(&thread, &reply("With a file."), &delivery)
        .await
        .unwrap();
    let files = outbox
        .deliver_files(
            &thread,
            &[OutFile::from_bytes(
                "f1",
                "text/plain",
                "notes.txt",
                b"notes".to_vec(),
            )],
            text.len(),
            &delivery,
        )
        .await
        .unwrap();
    assert_eq!(fake.channel_messages(channel).len(), 2);
    let all: Vec<String> = text.into_iter().chain(files).collect();
    outbox.delete_posted(&thread, &all).await.unwrap();
    assert!(fake.channel_messages(channel).is_empty());
    assert_eq!(fake.deleted().len(), 2);
}

/// The file part is streamed by the adapter itself (not through serenity): it still carries the
/// bot's token, and a `429` on it comes back as worth retrying with Discord's `retry_after`, the
/// retry posting the file once.
#[tokio::test]
async fn a_streamed_file_carries_the_token_and_a_429_comes_back_with_its_wait() {
    let fake = FakeDiscord::start(APP, BOT).await;
    fake.require_token("fake-token");
    let outbox = connect(fake.config()).await.outbox();
    let channel = fake.new_id();
    let th = thread(channel.to_string());
    let bytes = noise(300_000, 17);
    let file = OutFile::from_bytes("f1", "application/pdf", "report.pdf", bytes.clone());
    let mut delivery = Delivery::new("deliver:c:429:0");

    fake.set_faults(
        FaultPlan::new(3, 1.0).only(&[Fault::RateLimited(Duration::from_millis(1500))]),
    );
    let failed = outbox
        .deliver_files(&th, std::slice::from_ref(&file), 0, &delivery)
        .await
        .expect_err("a 429");
    let t = Transient::find(failed.as_ref()).expect("a 429 is worth retrying");
    assert_eq!(t.wait(), Some(Duration::from_millis(1500)), "{t:?}");
    assert!(!t.may_be_done(), "a 429 did nothing: {t:?}");
    fake.clear_faults();
    assert!(fake.channel_messages(channel).is_empty(), "nothing posted");

    delivery.attempt = 1;
    let ids = outbox
        .deliver_files(&th, std::slice::from_ref(&file), 0, &delivery)
        .await
        .expect("the retry");
    assert_eq!(fake.channel_messages(channel).len(), 1);
    let uploads = fake.uploads(&ids[0]);
    assert_eq!(uploads.len(), 1);
    assert_eq!(uploads[0].0["filename"], "report.pdf");
    assert_eq!(uploads[0].1, bytes, "the exact bytes");

    // Another token: Discord's 401, not worth retrying, nothing posted.
    fake.require_token("another-token");
    let other = fake.new_id();
    let failed = outbox
        .deliver_files(
            &thread(other.to_string()),
            std::slice::from_ref(&file),
            0,
            &Delivery::new("deliver:c:401:0"),
        )
        .await
        .expect_err("a 401");
    assert!(!Transient::is_transient(failed.as_ref()), "{failed}");
    assert!(fake.channel_messages(other).is_empty());
}

/// `pieces` pieces of 64 KiB, each made `gap` after the last (a slow disk, a slow store).
struct Slow {
    pieces: usize,
    gap: Duration,
}

#[async_trait::async_trait]
impl frogbot_channel::files::FileSource for Slow {
    async fn open(&self) -> Result<frogbot_channel::FileStream, frogbot_model::BoxError> {
        use futures::StreamExt;
        let gap = self.gap;
        Ok(futures::stream::iter(0..self.pieces)
            .then(move |i| async move {
                tokio::time::sleep(gap).await;
                Ok(vec![(i % 251) as u8; 64 * 1024])
            })
            .boxed())
    }
}

/// A file's bytes take as long as they need (the transfer limit), not an API call's
/// `api_timeout`: an upload slower than it still arrives, once.
#[tokio::test]
async fn an_upload_slower_than_an_api_call_may_take_still_arrives() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let outbox = frogbot_discord::channel::connect(Config {
        api_timeout: Duration::from_millis(300),
        ..fake.config()
    })
    .await
    .expect("connect to the fake")
    .outbox();
    let channel = fake.new_id();
    let th = thread(channel.to_string());
    let file = OutFile::new(
        "f1",
        "application/octet-stream",
        "slow.bin",
        8 * 64 * 1024,
        std::sync::Arc::new(Slow {
            pieces: 8,
            gap: Duration::from_millis(100),
        }),
    );
    let ids = outbox
        .deliver_files(
            &th,
            std::slice::from_ref(&file),
            0,
            &Delivery::new("deliver:c:slow:0"),
        )
        .await
        .expect("the slow upload");
    assert_eq!(fake.channel_messages(channel).len(), 1, "posted once");
    assert_eq!(fake.uploads(&ids[0])[0].1.len(), 8 * 64 * 1024);
}
