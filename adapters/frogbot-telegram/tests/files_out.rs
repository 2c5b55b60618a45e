//! The files a bot's message carries, posted by the outbox against the fake Bot API
//! (`deliver_files`, the shared loop over `PostPieces<OutFile>`): `sendPhoto` for a picture,
//! `sendDocument` for anything else, as multipart/form-data uploads whose bytes arrive whole, in
//! the chat, topic and reply the message's text went to, after it, silently; a file over the
//! Bot API's 50 MB named in a text; a picture Telegram refuses as a photo sent as a document; a
//! `5xx` or `429` a `Transient`; a retry posting only what is missing in-process, and (Telegram
//! has no idempotency key) a file whose answer was lost, or a retry in another process, posted
//! again: at least once.

use std::sync::Arc;

use async_trait::async_trait;
use frogbot_channel::files::FileSource;
use frogbot_channel::{FileStream, OutFile};
use frogbot_core::agent::{ChannelOutbox, Delivery};
use frogbot_model::faults::{Fault, FaultPlan};
use frogbot_model::{Ack, BoxError, Thread, Transient, UiMessage};
use frogbot_telegram::TelegramApi;
use frogbot_telegram::channel::TelegramOutbox;
use frogbot_telegram::client::{MAX_UPLOAD, SendTo, Upload, UploadKind};
use frogbot_telegram::testing::{
    ApiCall, FakeBotApi, RecordingTelegram, SeenMessage, TOKEN, private_chat, transcript, user,
};
use teloxide::prelude::Requester;
use teloxide::types::{ChatId, MessageId, ThreadId};

const KEY: &str = "deliver:c:m:0";

fn thread(id: &str) -> Thread {
    Thread {
        id: id.to_owned(),
        platform: "telegram".into(),
        chat_id: format!("telegram-{id}"),
    }
}

fn reply(text: &str) -> UiMessage {
    serde_json::from_value(serde_json::json!({
        "id": "m1", "role": "assistant", "parts": [{"type": "text", "text": text}]
    }))
    .expect("a reply")
}

/// `n` bytes that do not repeat in any short period (xorshift), so a chunk lost, doubled or
/// reordered on the way shows.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A PNG of `width` × `height` as far as its header says (the fake reads the size from `IHDR`),
/// followed by `tail` bytes of noise.
fn png(width: u32, height: u32, tail: usize) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    b.extend_from_slice(&width.to_be_bytes());
    b.extend_from_slice(&height.to_be_bytes());
    b.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    b.extend(noise(tail, u64::from(width) * 31 + u64::from(height)));
    b
}

fn transient(e: &BoxError) -> &Transient {
    Transient::find(e.as_ref()).unwrap_or_else(|| panic!("not transient: {e}"))
}

/// The message id of a `chat:id` platform id.
fn message_id(id: &str) -> i64 {
    id.rsplit_once(':')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or_else(|| panic!("not a message id: {id}"))
}

/// The bot's messages of the view.
fn bots(seen: &[SeenMessage]) -> Vec<&SeenMessage> {
    seen.iter().filter(|m| m.sender == "FrogBot").collect()
}

/// Fetches a file back as a bot would: `getFile` (teloxide's call), then the file URL
/// `{api}/file/bot<token>/<file_path>` (with the bot's HTTP client).
async fn fetch_back(fake: &FakeBotApi, file_id: &str) -> Vec<u8> {
    let bot = fake.bot();
    let file = bot
        .get_file(file_id.to_owned().into())
        .await
        .expect("getFile");
    let url = format!("{}file/bot{TOKEN}/{}", fake.url, file.path);
    let response = bot.client().get(url).send().await.expect("the file URL");
    assert!(response.status().is_success(), "{}", response.status());
    response.bytes().await.expect("the file's bytes").to_vec()
}

/// A file whose bytes must never be read (a file over the limit is not uploaded).
struct NeverRead;

#[async_trait]
impl FileSource for NeverRead {
    async fn open(&self) -> Result<FileStream, BoxError> {
        panic!("a file over the limit was read for an upload")
    }
}

#[tokio::test]
async fn a_photo_and_a_document_follow_the_text_with_their_bytes_names_and_types() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let t = thread("42");
    let said = fake.user_message(private_chat(42, "Ada"), user(42, "Ada"), "a chart?", None);
    let asked = said["message"]["message_id"].as_i64().unwrap();
    outbox
        .ack(&t, &format!("42:{asked}"), Ack::Working)
        .await
        .unwrap();
    let delivery = Delivery::new(KEY);
    let mut ids = outbox
        .deliver(&t, &reply("Here is the chart and the data."), &delivery)
        .await
        .unwrap();
    // The turn ends before its files go out: they still reply where the text did.
    outbox
        .ack(&t, &format!("42:{asked}"), Ack::Done)
        .await
        .unwrap();

    let chart = png(1200, 800, 200_000);
    let data = noise(3 * 1024 * 1024 + 17, 7);
    let files = [
        OutFile::from_bytes("f1", "image/png", "chart.png", chart.clone()),
        OutFile::from_bytes("f2", "application/pdf", "data report.pdf", data.clone()),
    ];
    let file_ids = outbox
        .deliver_files(&t, &files, ids.len(), &delivery)
        .await
        .unwrap();
    assert_eq!(file_ids.len(), 2);
    ids.extend(file_ids.clone());

    // What the person sees: the text, then the picture, then the document, in that order; one
    // notification (the text's); everything replying to the person's message.
    let seen = fake.person_view("42");
    let bot = bots(&seen);
    assert_eq!(bot.len(), 3, "{}", transcript(&seen));
    assert_eq!(bot[0].text, "Here is the chart and the data.");
    let photo = bot[1].file.as_ref().expect("a photo");
    assert_eq!(
        (
            photo.kind.as_str(),
            photo.name.as_str(),
            photo.media_type.as_str()
        ),
        ("photo", "chart.png", "image/png")
    );
    assert_eq!(photo.size, chart.len() as u64);
    let doc = bot[2].file.as_ref().expect("a document");
    assert_eq!(
        (
            doc.kind.as_str(),
            doc.name.as_str(),
            doc.media_type.as_str()
        ),
        ("document", "data report.pdf", "application/pdf")
    );
    assert_eq!(doc.size, data.len() as u64);
    assert_eq!(
        bot.iter().map(|m| m.notified).collect::<Vec<_>>(),
        [true, false, false]
    );
    assert!(bot.iter().all(|m| m.reply_to == Some(asked)), "{seen:#?}");
    assert_eq!(
        bot.iter().map(|m| m.id).collect::<Vec<_>>(),
        ids.iter().map(|i| message_id(i)).collect::<Vec<_>>(),
        "the ids returned are the messages that show them"
    );
    let shown = transcript(&seen);
    assert!(
        shown.contains("📎 photo: chart.png (image/png, 195 KB)"),
        "{shown}"
    );
    assert!(
        shown.contains("📎 document: data report.pdf (application/pdf, 3 MB)"),
        "{shown}"
    );

    // The bytes that arrived are the files' bytes, kept under their file ids and fetched back
    // with getFile and the file URL.
    assert_eq!(fake.file_bytes(&photo.file_id).unwrap(), chart);
    assert_eq!(fake.file_bytes(&doc.file_id).unwrap(), data);
    assert_eq!(fetch_back(&fake, &doc.file_id).await, data);
    assert_eq!(fetch_back(&fake, &photo.file_id).await, chart);

    // The uploads were multipart forms as the Bot API reads them, answered with the documented
    // Message objects.
    let calls = fake.all_calls();
    let upload = |method: &str| {
        calls
            .iter()
            .find(|c| c.method == method)
            .unwrap_or_else(|| panic!("no {method}"))
    };
    let sent_photo = upload("sendphoto");
    assert_eq!(sent_photo.body["chat_id"], 42);
    assert_eq!(sent_photo.body["disable_notification"], true);
    assert_eq!(sent_photo.body["reply_parameters"]["message_id"], asked);
    assert_eq!(sent_photo.body["photo"]["file_name"], "chart.png");
    assert_eq!(sent_photo.body["photo"]["mime_type"], "image/png");
    let sizes = sent_photo.result.as_ref().unwrap()["photo"]
        .as_array()
        .unwrap()
        .clone();
    for size in &sizes {
        for field in ["file_id", "file_unique_id", "width", "height", "file_size"] {
            assert!(!size[field].is_null(), "PhotoSize without {field}: {size}");
        }
    }
    let largest = sizes.last().unwrap();
    assert_eq!(
        (largest["width"].as_u64(), largest["height"].as_u64()),
        (Some(1200), Some(800))
    );
    assert_eq!(largest["file_id"], photo.file_id.as_str());
    let sent_doc = upload("senddocument");
    assert_eq!(sent_doc.body["document"]["file_size"], data.len());
    let document = &sent_doc.result.as_ref().unwrap()["document"];
    assert_eq!(document["file_name"], "data report.pdf");
    assert_eq!(document["mime_type"], "application/pdf");
    assert_eq!(document["file_size"], data.len());
    assert_eq!(document["file_id"], doc.file_id.as_str());
    assert!(document["file_unique_id"].is_string());

    // Deleting the message deletes its file messages too.
    outbox.delete_posted(&t, &ids).await.unwrap();
    let left = fake.person_view("42");
    assert!(bots(&left).is_empty(), "{}", transcript(&left));
}

#[tokio::test]
async fn a_message_of_files_alone_notifies_once_with_its_first_file() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let t = thread("42");
    let files = [
        OutFile::from_bytes("f1", "text/csv", "a.csv", b"a,b\n1,2\n".to_vec()),
        OutFile::from_bytes("f2", "image/png", "b.png", png(64, 64, 100)),
    ];
    outbox
        .deliver_files(&t, &files, 0, &Delivery::new(KEY))
        .await
        .unwrap();
    let seen = fake.person_view("42");
    let notified: Vec<(String, bool)> = seen
        .iter()
        .map(|m| (m.file.as_ref().unwrap().name.clone(), m.notified))
        .collect();
    assert_eq!(
        notified,
        [("a.csv".to_owned(), true), ("b.png".to_owned(), false)]
    );
    let photo = fake
        .all_calls()
        .into_iter()
        .find(|c| c.method == "sendphoto")
        .unwrap();
    assert_eq!(photo.body["disable_notification"], true);
    // A picture of at most 90 px has one size: itself.
    assert_eq!(photo.result.unwrap()["photo"].as_array().unwrap().len(), 1);
    assert!(
        fake.calls("senddocument")[0]
            .get("disable_notification")
            .is_none()
    );
}

#[tokio::test]
async fn files_go_to_the_forum_topic_and_an_agent_conversation_as_its_text_does() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let topic = thread("-100777:9");
    let file = OutFile::from_bytes("f1", "text/plain", "notes.txt", b"notes".to_vec());
    outbox
        .deliver_files(&topic, std::slice::from_ref(&file), 1, &Delivery::new(KEY))
        .await
        .unwrap();
    let sent = &fake.calls("senddocument")[0];
    assert_eq!(sent["chat_id"], -100_777);
    assert_eq!(sent["message_thread_id"], 9);
    let seen = fake.person_view("-100777:9");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].file.as_ref().unwrap().name, "notes.txt");

    // An agent conversation with a person (`{chat}~{root}`): every message replies to its root.
    let root = fake.user_message(private_chat(42, "Ada"), user(42, "Ada"), "root", None);
    let root = root["message"]["message_id"].as_i64().unwrap();
    let conversation = thread(&format!("42~{root}"));
    outbox
        .deliver_files(&conversation, &[file], 0, &Delivery::new("deliver:c:m2:0"))
        .await
        .unwrap();
    let seen = fake.person_view(&conversation.id);
    assert_eq!(seen.len(), 2, "{}", transcript(&seen));
    assert_eq!(seen[1].reply_to, Some(root));
    assert!(seen[1].file.is_some());
}

#[tokio::test]
async fn a_file_over_the_limit_for_bots_is_named_in_a_text_instead() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let t = thread("42");
    let huge = OutFile::new(
        "f1",
        "video/mp4",
        "talk.mp4",
        MAX_UPLOAD + 1,
        Arc::new(NeverRead),
    );
    let small = OutFile::from_bytes("f2", "text/plain", "<notes> & more.txt", b"hi".to_vec());
    let ids = outbox
        .deliver_files(&t, &[huge, small], 1, &Delivery::new(KEY))
        .await
        .unwrap();
    assert_eq!(ids.len(), 2);
    let seen = fake.person_view("42");
    assert_eq!(
        seen[0].text,
        "📎 talk.mp4 (50 MB) could not be sent here: larger than Telegram's 50 MB limit for bots."
    );
    assert!(seen[0].file.is_none());
    assert!(!seen[0].notified, "a later piece of its message");
    assert_eq!(seen[1].file.as_ref().unwrap().name, "<notes> & more.txt");
    assert!(fake.calls("senddocument").len() == 1 && fake.calls("sendphoto").is_empty());

    // A limit of one's own (a local Bot API server takes more; lower here): the name, escaped
    // for Telegram's HTML, shows as it is.
    let outbox = TelegramOutbox::new(fake.bot()).with_max_upload(1024);
    let bigger = OutFile::from_bytes("f3", "text/plain", "<notes> & more.txt", vec![b'x'; 2048]);
    outbox
        .deliver_files(&t, &[bigger], 0, &Delivery::new("deliver:c:m2:0"))
        .await
        .unwrap();
    let last = fake.person_view("42").pop().unwrap();
    assert_eq!(
        last.text,
        "📎 <notes> & more.txt (2 KB) could not be sent here: larger than Telegram's 1 KB limit for bots."
    );
    assert!(last.notified, "the first message of its message");
}

#[tokio::test]
async fn a_picture_telegram_will_not_take_as_a_photo_goes_as_a_document() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let t = thread("42");
    let not_a_picture = noise(5_000, 3);
    let too_wide = png(12_000, 100, 10);
    let too_big = png(2_000, 1_000, 11 * 1024 * 1024);
    let svg = b"<svg xmlns='http://www.w3.org/2000/svg'/>".to_vec();
    let files = [
        OutFile::from_bytes("f1", "image/png", "broken.png", not_a_picture.clone()),
        OutFile::from_bytes("f2", "image/png", "banner.png", too_wide.clone()),
        OutFile::from_bytes("f3", "image/png", "poster.png", too_big.clone()),
        OutFile::from_bytes("f4", "image/svg+xml", "logo.svg", svg.clone()),
    ];
    outbox
        .deliver_files(&t, &files, 1, &Delivery::new(KEY))
        .await
        .unwrap();
    let seen = fake.person_view("42");
    let shown: Vec<(&str, &str, &str)> = seen
        .iter()
        .map(|m| {
            let f = m.file.as_ref().unwrap();
            (f.kind.as_str(), f.name.as_str(), f.media_type.as_str())
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("document", "broken.png", "image/png"),
            ("document", "banner.png", "image/png"),
            ("document", "poster.png", "image/png"),
            ("document", "logo.svg", "image/svg+xml"),
        ]
    );
    for (m, bytes) in seen.iter().zip([&not_a_picture, &too_wide, &too_big, &svg]) {
        assert_eq!(
            &fake.file_bytes(&m.file.as_ref().unwrap().file_id).unwrap(),
            bytes
        );
    }
    // The first two were refused as photos (nothing posted), the poster (over 10 MB) and the SVG
    // (no picture to Telegram) never tried as one.
    let refused: Vec<String> = fake
        .all_calls()
        .iter()
        .filter(|c| c.method == "sendphoto")
        .map(|c| {
            assert!(c.result.is_none());
            c.body["photo"]["file_name"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(refused, ["broken.png", "banner.png"]);
}

#[tokio::test]
async fn a_server_error_or_a_rate_limit_is_transient_and_the_retry_posts_only_what_is_missing() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let t = thread("42");
    let files = [
        OutFile::from_bytes("f1", "image/png", "a.png", png(300, 200, 1_000)),
        OutFile::from_bytes("f2", "text/plain", "b.txt", b"bee".to_vec()),
    ];
    let mut delivery = Delivery::new(KEY);
    fake.inject_faults(
        Arc::new(FaultPlan::new(1, 1.0).only(&[Fault::ServerError])),
        &["senddocument"],
    );
    let e = outbox
        .deliver_files(&t, &files, 1, &delivery)
        .await
        .expect_err("a 500");
    assert!(!transient(&e).may_be_done(), "a 500 did nothing: {e}");
    fake.inject_faults(
        Arc::new(
            FaultPlan::new(1, 1.0)
                .only(&[Fault::RateLimited(std::time::Duration::from_secs(3))])
                .rate_limit_wait(std::time::Duration::from_secs(3)),
        ),
        &["senddocument"],
    );
    delivery.attempt = 1;
    let e = outbox
        .deliver_files(&t, &files, 1, &delivery)
        .await
        .expect_err("a 429");
    assert_eq!(
        transient(&e).wait(),
        Some(std::time::Duration::from_secs(3))
    );
    fake.inject_faults(Arc::new(FaultPlan::none()), &[]);
    delivery.attempt = 2;
    let ids = outbox
        .deliver_files(&t, &files, 1, &delivery)
        .await
        .unwrap();
    let seen = fake.person_view("42");
    assert_eq!(
        seen.len(),
        2,
        "the photo posted once: {}",
        transcript(&seen)
    );
    assert_eq!(
        ids,
        seen.iter()
            .map(|m| format!("42:{}", m.id))
            .collect::<Vec<_>>()
    );
    assert_eq!(fake.calls("sendphoto").len(), 1, "not uploaded again");
    // The same delivery once more (an engine retry after a failure later on): nothing new.
    delivery.attempt = 3;
    assert_eq!(
        outbox
            .deliver_files(&t, &files, 1, &delivery)
            .await
            .unwrap(),
        ids
    );
    assert_eq!(fake.person_view("42").len(), 2);
}

/// Telegram has no idempotency key: a file whose answer was lost after Telegram posted it is
/// posted again by the retry, and so is every file when the retry runs in another process
/// (the outbox remembers in-process only). At least once, as the text pieces.
#[tokio::test]
async fn a_lost_answer_or_another_process_posts_the_file_again_at_least_once() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot());
    let t = thread("42");
    let file = [OutFile::from_bytes(
        "f1",
        "text/plain",
        "a.txt",
        b"once?".to_vec(),
    )];
    let mut delivery = Delivery::new(KEY);
    fake.inject_faults(
        Arc::new(FaultPlan::new(1, 1.0).only(&[Fault::ResetAfterProcessing])),
        &["senddocument"],
    );
    let e = outbox
        .deliver_files(&t, &file, 1, &delivery)
        .await
        .expect_err("the answer is lost");
    assert!(transient(&e).may_be_done(), "{e}");
    assert_eq!(fake.person_view("42").len(), 1, "Telegram posted it");
    fake.inject_faults(Arc::new(FaultPlan::none()), &[]);
    delivery.attempt = 1;
    outbox.deliver_files(&t, &file, 1, &delivery).await.unwrap();
    assert_eq!(
        fake.person_view("42").len(),
        2,
        "posted again: at least once"
    );

    // Another process (a fresh outbox) retrying the same delivery posts it again too.
    let other = TelegramOutbox::new(fake.bot());
    delivery.attempt = 2;
    other.deliver_files(&t, &file, 1, &delivery).await.unwrap();
    assert_eq!(fake.person_view("42").len(), 3);
    // This process's outbox remembers what it posted: a retry here posts nothing.
    delivery.attempt = 3;
    outbox.deliver_files(&t, &file, 1, &delivery).await.unwrap();
    assert_eq!(fake.person_view("42").len(), 3);
}

#[tokio::test]
async fn the_recording_client_records_an_upload_with_its_bytes() {
    let api = RecordingTelegram::new();
    let bytes = noise(100_000, 9);
    let upload = Upload {
        kind: UploadKind::Document,
        filename: "x.bin".into(),
        media_type: "application/octet-stream".into(),
        size: bytes.len() as u64,
        bytes: frogbot_channel::files::from_bytes(bytes.clone()),
    };
    let sent = api
        .send_file(
            SendTo::new(ChatId(42), Some(ThreadId(MessageId(3))))
                .replying(Some(MessageId(7)))
                .silent(true),
            upload,
        )
        .await
        .unwrap();
    assert_eq!(sent.id, MessageId(100));
    let calls = api.calls();
    let ApiCall::SendFile {
        kind,
        filename,
        bytes: recorded,
        reply_to,
        silent,
        topic,
        ..
    } = &calls[0]
    else {
        panic!("{calls:?}")
    };
    assert_eq!(
        (*kind, filename.as_str(), *reply_to, *silent, *topic),
        (
            UploadKind::Document,
            "x.bin",
            Some(MessageId(7)),
            true,
            Some(ThreadId(MessageId(3)))
        )
    );
    assert_eq!(recorded, &bytes);
}

/// `pieces` pieces of 64 KiB, each made `gap` after the last (a slow disk, a slow store).
struct Slow {
    pieces: usize,
    gap: std::time::Duration,
}

#[async_trait]
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

/// A file's bytes take as long as they need, not the bot client's timeout for an API call
/// (teloxide's default is 17 seconds): an upload slower than it still arrives, once.
#[tokio::test]
async fn an_upload_slower_than_an_api_call_may_take_still_arrives() {
    let fake = FakeBotApi::start().await;
    let outbox = TelegramOutbox::new(fake.bot_with_timeout(std::time::Duration::from_millis(300)));
    let t = thread("42");
    fake.user_message(private_chat(42, "Ada"), user(42, "Ada"), "the logs?", None);
    let file = OutFile::new(
        "f1",
        "application/octet-stream",
        "slow.bin",
        8 * 64 * 1024,
        Arc::new(Slow {
            pieces: 8,
            gap: std::time::Duration::from_millis(100),
        }),
    );
    let ids = outbox
        .deliver_files(&t, std::slice::from_ref(&file), 0, &Delivery::new(KEY))
        .await
        .expect("the slow upload");
    assert_eq!(ids.len(), 1);
    let seen = fake.person_view("42");
    let bot = bots(&seen);
    assert_eq!(bot.len(), 1, "{}", transcript(&seen));
    let got = bot[0].file.as_ref().expect("a document");
    assert_eq!((got.name.as_str(), got.size), ("slow.bin", 8 * 64 * 1024));
}
