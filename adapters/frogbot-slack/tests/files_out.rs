//! Files out (issue "files out"): a message's files go to Slack with its external upload
//! (`files.getUploadURLExternal`, the bytes `POST`ed to the upload URL,
//! `files.completeUploadExternal` into the reply's thread), each as its own message after the
//! text, driven through the adapter's outbox (`ChannelOutbox::deliver_files`) against the fake
//! Slack: the bytes that arrive, names and types, order, notifications, the size limit, retries
//! after a lost answer (in one process and in another), transient failures, deletions, and the
//! bot token kept from upload hosts that are not Slack's.

use std::sync::Arc;

use frogbot_channel::FileStream;
use frogbot_channel::OutFile;
use frogbot_channel::files::FileSource;
use frogbot_core::agent::{ChannelOutbox, Delivery};
use frogbot_model::faults::Fault;
use frogbot_model::{BoxError, Thread, Transient, UiMessage};
use frogbot_slack::channel::SlackAdapter;
use frogbot_slack::channel::outbox::{FILE_ID_PREFIX, MAX_FILE_BYTES};
use frogbot_slack::client::UPLOAD_STEP;
use frogbot_slack::testing::{BOT_NAME, BOT_TOKEN, BOT_USER, FakeSlack, SeenMessage};
use frogbot_slack::{PLATFORM, SlackApi};
use serde_json::json;

const KEY: &str = "deliver:c:m:0";
const COMPLETE: &str = "files.completeUploadExternal";

fn reply(text: &str) -> UiMessage {
    serde_json::from_value(json!({"id": "r", "role": "assistant",
                                  "parts": [{"type": "text", "text": text}]}))
    .expect("a reply")
}

/// A person's mention starts a thread in `channel`.
fn thread(fake: &FakeSlack, channel: &str) -> Thread {
    let root = fake.user_message(channel, None, "U1", &format!("<@{BOT_USER}> hi"));
    let id = root.id();
    Thread {
        chat_id: format!("chat-{id}"),
        id,
        platform: PLATFORM.into(),
    }
}

async fn connect(fake: &FakeSlack) -> SlackAdapter {
    frogbot_slack::channel::connect(fake.http_config())
        .await
        .expect("connect to the fake")
}

/// 3 MB of random-looking bytes (a xorshift stream), so a chunking or truncation bug shows.
fn payload(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn png() -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    b.extend_from_slice(&[0, 0, 0, 13, b'I', b'H', b'D', b'R', 0, 0, 0, 1, 0, 0, 0, 1]);
    b
}

/// The bot's messages of the thread as a person sees them.
fn bot_messages(fake: &FakeSlack, thread: &Thread) -> Vec<SeenMessage> {
    fake.person_view(&thread.id)
        .into_iter()
        .filter(|m| m.sender == BOT_NAME)
        .collect()
}

/// How many of the bot's messages show a file.
fn file_messages(fake: &FakeSlack, thread: &Thread) -> usize {
    bot_messages(fake, thread)
        .iter()
        .filter(|m| !m.files.is_empty())
        .count()
}

#[tokio::test]
async fn files_follow_the_text_in_order_with_their_exact_bytes_names_and_types() {
    let fake = FakeSlack::start().await;
    let slack = connect(&fake).await;
    let outbox: &dyn ChannelOutbox = &slack;
    let th = thread(&fake, "C1");
    let big = payload(3 * 1024 * 1024 + 17);
    let files = [
        OutFile::from_bytes("f1", "image/png", "chart.png", png()),
        OutFile::from_bytes("f2", "application/x-ndjson", "rows.ndjson", big.clone()),
    ];
    let delivery = Delivery::new(KEY);
    let text_ids = outbox
        .deliver(&th, &reply("Here are the results."), &delivery)
        .await
        .unwrap();
    let ids = outbox
        .deliver_files(&th, &files, text_ids.len(), &delivery)
        .await
        .unwrap();
    assert_eq!(ids.len(), 2);
    assert!(
        ids.iter().all(|id| id.starts_with(FILE_ID_PREFIX)),
        "{ids:?}"
    );

    // What arrived: exactly the files' bytes, names and media types, in order.
    let uploads = fake.uploads();
    assert_eq!(uploads.len(), 2);
    assert_eq!(uploads[0].filename, "chart.png");
    assert_eq!(uploads[0].bytes.as_deref(), Some(png().as_slice()));
    assert_eq!(uploads[0].media_type.as_deref(), Some("image/png"));
    assert_eq!(
        uploads[0].alt_txt.as_deref(),
        Some("chart.png"),
        "an image is described for screen readers"
    );
    assert_eq!(uploads[1].filename, "rows.ndjson");
    assert_eq!(uploads[1].length, big.len() as u64);
    assert!(
        uploads[1].bytes.as_deref() == Some(big.as_slice()),
        "the 3 MB file arrives byte for byte"
    );
    assert_eq!(
        uploads[1].media_type.as_deref(),
        Some("application/x-ndjson")
    );
    assert_eq!(uploads[1].alt_txt, None);
    for (u, id) in uploads.iter().zip(&ids) {
        assert_eq!(*id, format!("{FILE_ID_PREFIX}{}", u.id));
        assert!(u.completed);
        assert_eq!(
            u.shared_in,
            Some((
                "C1".to_owned(),
                Some(th.id.split_once(':').unwrap().1.to_owned())
            )),
            "shared into the reply's thread"
        );
        assert_eq!(
            u.upload_auth,
            format!("Bearer {BOT_TOKEN}"),
            "the fake is the configured API's host: the token may go there"
        );
    }

    // What a person sees: the text, then each file as its own message, in order.
    let seen = bot_messages(&fake, &th);
    assert_eq!(seen.len(), 3, "{seen:#?}");
    assert_eq!(seen[0].text, "Here are the results.");
    assert!(seen[0].files.is_empty());
    let shown: Vec<(String, String, u64)> = seen[1..]
        .iter()
        .map(|m| {
            assert_eq!(m.files.len(), 1);
            let f = &m.files[0];
            (f.name.clone(), f.media_type.clone(), f.size)
        })
        .collect();
    assert_eq!(
        shown,
        [
            (
                "chart.png".to_owned(),
                "image/png".to_owned(),
                png().len() as u64
            ),
            (
                "rows.ndjson".to_owned(),
                "application/x-ndjson".to_owned(),
                big.len() as u64
            ),
        ]
    );
    // Slack has no silent post: every message of the thread notifies (as a reply's later text
    // pieces do); what the file's notification shows is its title.
    assert!(seen.iter().all(|m| m.notified));
    assert_eq!(seen[1].notification.as_deref(), Some("chart.png"));

    // The file's link gives the same bytes back (to the bot token).
    let message = fake
        .thread_messages(&th.id)
        .into_iter()
        .find(|m| !m.files.is_empty() && m.files[0]["name"] == "rows.ndjson")
        .expect("the file's message");
    let url = message.files[0]["url_private_download"].as_str().unwrap();
    let body = reqwest::Client::new()
        .get(url)
        .bearer_auth(BOT_TOKEN)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert!(body.as_ref() == big.as_slice());
}

#[tokio::test]
async fn a_message_of_files_alone_posts_them_in_order() {
    let fake = FakeSlack::start().await;
    let slack = connect(&fake).await;
    let outbox: &dyn ChannelOutbox = &slack;
    let th = thread(&fake, "C2");
    let files: Vec<OutFile> = (0..3)
        .map(|i| {
            OutFile::from_bytes(
                format!("f{i}"),
                "text/plain",
                format!("{i}.txt"),
                vec![b'a' + i as u8; 10],
            )
        })
        .collect();
    outbox
        .deliver_files(&th, &files, 0, &Delivery::new(KEY))
        .await
        .unwrap();
    let names: Vec<String> = bot_messages(&fake, &th)
        .iter()
        .map(|m| m.files[0].name.clone())
        .collect();
    assert_eq!(names, ["0.txt", "1.txt", "2.txt"]);
}

/// A file whose bytes are never read: it claims a size over Slack's limit.
struct Huge;

#[async_trait::async_trait]
impl FileSource for Huge {
    async fn open(&self) -> Result<FileStream, BoxError> {
        panic!("a file over the limit is not read");
    }
}

#[tokio::test]
async fn a_file_over_slacks_limit_is_not_uploaded_and_a_text_says_so_once() {
    let fake = FakeSlack::start().await;
    let slack = connect(&fake).await;
    let outbox: &dyn ChannelOutbox = &slack;
    let th = thread(&fake, "C3");
    let huge = OutFile::new(
        "f1",
        "video/mp4",
        "film.mp4",
        MAX_FILE_BYTES + 1,
        Arc::new(Huge),
    );
    let mut delivery = Delivery::new(KEY);
    outbox
        .deliver(&th, &reply("The film:"), &delivery)
        .await
        .unwrap();
    let ids = outbox
        .deliver_files(&th, std::slice::from_ref(&huge), 1, &delivery)
        .await
        .unwrap();
    assert!(fake.uploads().is_empty(), "nothing uploaded");
    let expected =
        "📎 film.mp4 (1024 MB) could not be sent here: larger than Slack's 1024 MB limit for bots.";
    let texts: Vec<String> = bot_messages(&fake, &th)
        .iter()
        .map(|m| m.text.clone())
        .collect();
    assert_eq!(texts, ["The film:", expected]);
    assert!(!ids[0].starts_with(FILE_ID_PREFIX), "a message id: {ids:?}");
    // A retry finds the text by its key (message metadata), across processes too.
    delivery.attempt = 1;
    let other = connect(&fake).await;
    let again = ChannelOutbox::deliver_files(&other, &th, &[huge], 1, &delivery)
        .await
        .unwrap();
    assert_eq!(again, ids);
    assert_eq!(bot_messages(&fake, &th).len(), 2, "not posted twice");
}

#[tokio::test]
async fn a_retry_after_a_lost_completion_answer_does_not_share_the_file_twice() {
    let fake = FakeSlack::start().await;
    let slack = connect(&fake).await;
    let outbox: &dyn ChannelOutbox = &slack;
    let th = thread(&fake, "C4");
    let file = OutFile::from_bytes("f1", "application/pdf", "report.pdf", payload(4096));
    let mut delivery = Delivery::new(KEY);
    outbox
        .deliver(&th, &reply("Report:"), &delivery)
        .await
        .unwrap();
    // Slack shares the file, then the connection drops before its answer.
    fake.fail_next(COMPLETE, Fault::ResetAfterProcessing, 1);
    let err = outbox
        .deliver_files(&th, std::slice::from_ref(&file), 1, &delivery)
        .await
        .expect_err("the answer was lost");
    let t = Transient::find(err.as_ref()).expect("a lost answer is worth retrying");
    assert!(t.may_be_done(), "the share may have happened: {t:?}");
    assert_eq!(file_messages(&fake, &th), 1, "Slack did share it");

    delivery.attempt = 1;
    let ids = outbox
        .deliver_files(&th, std::slice::from_ref(&file), 1, &delivery)
        .await
        .unwrap();
    assert_eq!(file_messages(&fake, &th), 1, "not shared twice");
    assert_eq!(fake.uploads().len(), 1, "not uploaded twice");
    assert_eq!(ids, [format!("{FILE_ID_PREFIX}{}", fake.uploads()[0].id)]);
    // A third attempt (say the text's delivery failed after) remembers it without a look.
    delivery.attempt = 2;
    let again = outbox
        .deliver_files(&th, std::slice::from_ref(&file), 1, &delivery)
        .await
        .unwrap();
    assert_eq!(again, ids);
    assert_eq!(file_messages(&fake, &th), 1);
}

#[tokio::test]
async fn across_processes_a_file_is_posted_at_least_once() {
    let fake = FakeSlack::start().await;
    let first = connect(&fake).await;
    let th = thread(&fake, "C5");
    let file = OutFile::from_bytes("f1", "text/csv", "a.csv", b"x,y\n1,2\n".to_vec());
    let mut delivery = Delivery::new(KEY);
    fake.fail_next(COMPLETE, Fault::ResetAfterProcessing, 1);
    ChannelOutbox::deliver_files(&first, &th, std::slice::from_ref(&file), 0, &delivery)
        .await
        .expect_err("the answer was lost");
    // The process is gone; another retries the delivery. A file's message carries no message
    // metadata, so nothing tells it the file was shared: Slack shows it twice. At least once.
    let second = connect(&fake).await;
    delivery.attempt = 1;
    ChannelOutbox::deliver_files(&second, &th, std::slice::from_ref(&file), 0, &delivery)
        .await
        .unwrap();
    assert_eq!(
        file_messages(&fake, &th),
        2,
        "at least once across processes"
    );
}

#[tokio::test]
async fn a_5xx_comes_back_transient_and_the_retry_shares_the_file_once() {
    let fake = FakeSlack::start().await;
    let slack = connect(&fake).await;
    let outbox: &dyn ChannelOutbox = &slack;
    let th = thread(&fake, "C6");
    let file = OutFile::from_bytes("f1", "image/jpeg", "cat.jpg", payload(2048));
    let mut delivery = Delivery::new(KEY);
    // Every call the client makes by itself (3) answers 500, nothing done.
    fake.fail_next(COMPLETE, Fault::ServerError, 3);
    let err = outbox
        .deliver_files(&th, std::slice::from_ref(&file), 0, &delivery)
        .await
        .expect_err("Slack is down");
    let t = Transient::find(err.as_ref()).expect("a 5xx is worth retrying");
    assert!(!t.may_be_done(), "a 500 did nothing: {t:?}");
    assert_eq!(file_messages(&fake, &th), 0);

    delivery.attempt = 1;
    outbox
        .deliver_files(&th, std::slice::from_ref(&file), 0, &delivery)
        .await
        .unwrap();
    assert_eq!(file_messages(&fake, &th), 1);
    assert_eq!(
        fake.calls(COMPLETE).len(),
        1,
        "the 500s did nothing (and are not recorded)"
    );
    let uploads = fake.uploads();
    assert_eq!(uploads.len(), 2, "uploaded anew");
    assert!(
        uploads[0].deleted && !uploads[0].completed,
        "the first upload, never shared, is deleted so it can never show late"
    );
    assert!(uploads[1].completed && !uploads[1].deleted);

    // The upload step's 5xx is transient too.
    let th2 = thread(&fake, "C7");
    fake.fail_next(UPLOAD_STEP, Fault::ServerError, 3);
    let err = outbox
        .deliver_files(
            &th2,
            std::slice::from_ref(&file),
            0,
            &Delivery::new("deliver:c:m2:0"),
        )
        .await
        .expect_err("the upload service is down");
    assert!(Transient::find(err.as_ref()).is_some(), "{err}");
    assert_eq!(file_messages(&fake, &th2), 0);
}

#[tokio::test]
async fn the_upload_streams_with_its_length_and_waits_out_a_429() {
    let fake = FakeSlack::start().await;
    let slack = connect(&fake).await;
    let outbox: &dyn ChannelOutbox = &slack;
    let th = thread(&fake, "C8");
    let bytes = payload(300_000);
    let file = OutFile::from_bytes("f1", "application/pdf", "report.pdf", bytes.clone());
    // The upload URL answers 429 with `Retry-After: 1` once; the client waits and sends the
    // bytes again, read anew from the file.
    fake.fail_next(
        UPLOAD_STEP,
        Fault::RateLimited(std::time::Duration::from_secs(1)),
        1,
    );
    outbox
        .deliver_files(&th, std::slice::from_ref(&file), 0, &Delivery::new(KEY))
        .await
        .unwrap();
    assert_eq!(file_messages(&fake, &th), 1);
    let uploads = fake.uploads();
    assert_eq!(uploads.len(), 1, "one reservation, its bytes sent twice");
    assert_eq!(uploads[0].bytes.as_deref(), Some(&bytes[..]));
    let sent = fake.calls(UPLOAD_STEP);
    assert_eq!(sent.len(), 1, "the 429 is not recorded; the retry is");
    assert_eq!(
        sent[0].body["content_length"], 300_000,
        "sent with its length, not chunked: {}",
        sent[0].body
    );
}

#[tokio::test]
async fn deleting_the_message_deletes_its_files_too() {
    let fake = FakeSlack::start().await;
    let slack = connect(&fake).await;
    let outbox: &dyn ChannelOutbox = &slack;
    let th = thread(&fake, "C8");
    let delivery = Delivery::new(KEY);
    let mut ids = outbox
        .deliver(&th, &reply("Two files:"), &delivery)
        .await
        .unwrap();
    let files = [
        OutFile::from_bytes("f1", "text/plain", "a.txt", b"a".to_vec()),
        OutFile::from_bytes("f2", "image/gif", "b.gif", b"GIF89a".to_vec()),
    ];
    ids.extend(
        outbox
            .deliver_files(&th, &files, 1, &delivery)
            .await
            .unwrap(),
    );
    assert_eq!(bot_messages(&fake, &th).len(), 3);
    outbox.delete_posted(&th, &ids).await.unwrap();
    assert!(
        bot_messages(&fake, &th).is_empty(),
        "{:#?}",
        fake.person_view(&th.id)
    );
    assert!(fake.uploads().iter().all(|u| u.deleted));
    // Deleting again is no failure (already gone).
    outbox.delete_posted(&th, &ids).await.unwrap();
}

#[tokio::test]
async fn the_bot_token_never_goes_to_an_upload_host_that_is_not_slacks() {
    let fake = FakeSlack::start().await;
    let slack = connect(&fake).await;
    let outbox: &dyn ChannelOutbox = &slack;
    let th = thread(&fake, "C9");
    // Upload URLs on another origin than the configured API's (the same fake behind it).
    let port = fake.base_url().rsplit(':').next().unwrap().to_owned();
    fake.set_upload_base(Some(&format!("http://localhost:{port}")));
    let file = OutFile::from_bytes("f1", "text/plain", "n.txt", b"no token".to_vec());
    outbox
        .deliver_files(&th, &[file], 0, &Delivery::new(KEY))
        .await
        .unwrap();
    let uploads = fake.uploads();
    assert_eq!(uploads[0].bytes.as_deref(), Some(&b"no token"[..]));
    assert_eq!(uploads[0].upload_auth, "", "no Authorization header");
    assert_eq!(file_messages(&fake, &th), 1);
}

#[tokio::test]
async fn the_fake_refuses_to_complete_a_file_whose_bytes_never_arrived() {
    let fake = FakeSlack::start().await;
    let client = fake.client(BOT_TOKEN);
    let th = thread(&fake, "C10");
    let (channel, ts) = th.id.split_once(':').unwrap();
    // Reserve an upload URL, never send the bytes, then complete: Slack refuses.
    let http = reqwest::Client::new();
    let reserved: serde_json::Value = serde_json::from_str(
        &http
            .get(format!(
                "{}/files.getUploadURLExternal?filename=a.txt&length=3",
                fake.api_url()
            ))
            .bearer_auth(BOT_TOKEN)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    let file_id = reserved["file_id"].as_str().unwrap();
    assert!(
        reserved["upload_url"]
            .as_str()
            .unwrap()
            .starts_with(&fake.base_url())
    );
    let err = client
        .complete_upload(channel, ts, file_id, "a.txt")
        .await
        .expect_err("no bytes were uploaded");
    assert!(err.to_string().contains("file_not_found"), "{err}");
    assert_eq!(file_messages(&fake, &th), 0);

    // The bytes as multipart form data (`-F filename=@a.txt`), as Slack also takes them.
    let boundary = "frogbot-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(b"abc");
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let status = http
        .post(reserved["upload_url"].as_str().unwrap())
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);
    client
        .complete_upload(channel, ts, file_id, "A")
        .await
        .unwrap();
    let seen = bot_messages(&fake, &th);
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (
            seen[0].files[0].title.as_str(),
            seen[0].files[0].media_type.as_str()
        ),
        ("A", "text/plain")
    );
    // Slack takes a completion once.
    assert!(
        client
            .complete_upload(channel, ts, file_id, "A")
            .await
            .is_err()
    );
    assert_eq!(
        client
            .find_file_message(channel, ts, file_id)
            .await
            .unwrap(),
        Some(fake.thread_messages(&th.id)[1].ts.clone())
    );
}

/// `pieces` pieces of 64 KiB, each made `gap` after the last (a slow disk, a slow store).
struct Slow {
    pieces: usize,
    gap: std::time::Duration,
}

#[async_trait::async_trait]
impl FileSource for Slow {
    async fn open(&self) -> Result<FileStream, BoxError> {
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

/// A file's bytes take as long as they need (the transfer policy's limit), not an API call's
/// timeout: an upload slower than `api_timeout` still arrives whole, once.
#[tokio::test]
async fn an_upload_slower_than_an_api_call_may_take_still_arrives() {
    let fake = FakeSlack::start().await;
    let mut config = fake.http_config();
    config.api_timeout = std::time::Duration::from_millis(300);
    let slack = frogbot_slack::channel::connect(config).await.unwrap();
    let outbox: &dyn ChannelOutbox = &slack;
    let th = thread(&fake, "C9");
    let source = Slow {
        pieces: 8,
        gap: std::time::Duration::from_millis(100),
    };
    let file = OutFile::new(
        "f1",
        "application/octet-stream",
        "slow.bin",
        8 * 64 * 1024,
        Arc::new(source),
    );
    outbox
        .deliver_files(&th, std::slice::from_ref(&file), 0, &Delivery::new(KEY))
        .await
        .expect("the slow upload");
    assert_eq!(file_messages(&fake, &th), 1);
    let uploads = fake.uploads();
    assert_eq!(uploads.len(), 1, "sent once, not cut and retried");
    assert_eq!(uploads[0].bytes.as_ref().map(Vec::len), Some(8 * 64 * 1024));
}
