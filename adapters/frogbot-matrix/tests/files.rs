//! Files through the fake homeserver's media repository (issue 40), at the outbox: a person's
//! file streamed back with the bot's token, an encrypted one decrypted as it arrives (and one
//! whose bytes were changed refused), the bot's files uploaded and shown, and a file over the
//! homeserver's upload limit turned into a note without its bytes ever being read whole.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use serde_json::{Value, json};

use frogbot_channel::OutFile;
use frogbot_channel::files::{FileSource, FileStream};
use frogbot_core::agent::{ChannelOutbox, Delivery};
use frogbot_matrix::channel::MatrixOutbox;
use frogbot_matrix::testing::{FakeHomeserver, MAX_UPLOAD_BYTES};
use frogbot_model::BoxError;
use frogbot_model::{PlatformFile, Thread};
use matrix_sdk::ruma::OwnedUserId;

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

fn person_file(source: Value) -> PlatformFile {
    PlatformFile {
        id: "f1".into(),
        url: String::new(),
        media_type: "application/octet-stream".into(),
        filename: "x.bin".into(),
        size: None,
        source,
    }
}

/// The file's bytes through `open_file`, or the error its stream ended with.
async fn read(outbox: &dyn ChannelOutbox, source: Value) -> Result<Vec<u8>, String> {
    let mut body = outbox
        .open_file(&person_file(source))
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(piece) = body.next().await {
        out.extend_from_slice(&piece.map_err(|e| e.to_string())?);
    }
    Ok(out)
}

async fn setup() -> (FakeHomeserver, MatrixOutbox<matrix_sdk::Client>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeHomeserver::start().await;
    let outbox = MatrixOutbox::new(fake.client().await);
    (fake, outbox)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_file_streams_back_exact_with_the_bots_token() {
    let (fake, outbox) = setup().await;
    let bytes = pattern(300_000);
    let mxc = fake.put_media("application/pdf", bytes.clone());
    assert_eq!(read(&outbox, json!({ "url": mxc })).await.unwrap(), bytes);
    assert_eq!(fake.downloads(), (1, 0), "one download, with the token");

    let missing = format!("{mxc}0");
    let e = read(&outbox, json!({ "url": missing })).await.unwrap_err();
    assert!(e.contains("404"), "{e}");
    // An mxc URI that is not one is refused before any request.
    let e = read(&outbox, json!({ "url": "mxc://fake.test" }))
        .await
        .unwrap_err();
    assert!(e.contains("media"), "{e}");
    assert_eq!(fake.downloads(), (1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encrypted_file_is_decrypted_as_it_arrives_and_a_changed_one_is_refused() {
    let (fake, outbox) = setup().await;
    let plain = pattern(200_000);
    let mut cursor = std::io::Cursor::new(plain.clone());
    let mut encryptor = matrix_sdk_crypto::AttachmentEncryptor::new(&mut cursor);
    let mut cipher = Vec::new();
    encryptor.read_to_end(&mut cipher).unwrap();
    let keys = encryptor.finish();
    assert_ne!(cipher, plain);
    let source = |mxc: String| {
        let file = matrix_sdk::ruma::events::room::EncryptedFile::new(
            mxc.as_str().into(),
            keys.encryption_info.clone(),
            keys.hashes.clone(),
        );
        json!({ "file": file })
    };
    let mxc = fake.put_media("application/octet-stream", cipher.clone());
    assert_eq!(read(&outbox, source(mxc)).await.unwrap(), plain);

    // One byte changed on the server: the hash does not match, and the read ends in an error
    // (never a file that reads as complete).
    let mut changed = cipher.clone();
    changed[1000] ^= 1;
    let mxc = fake.put_media("application/octet-stream", changed);
    let e = read(&outbox, source(mxc)).await.unwrap_err();
    assert!(e.to_lowercase().contains("hash"), "{e}");
}

/// `size` bytes made as they are read, counting the pieces made.
struct Lazy {
    size: usize,
    made: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl FileSource for Lazy {
    async fn open(&self) -> Result<FileStream, BoxError> {
        let (size, made) = (self.size, self.made.clone());
        const PIECE: usize = 64 * 1024;
        Ok(futures::stream::iter((0..size).step_by(PIECE))
            .map(move |at| {
                made.fetch_add(1, Ordering::SeqCst);
                Ok(vec![7u8; PIECE.min(size - at)])
            })
            .boxed())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bots_files_are_uploaded_whole_and_one_over_the_limit_becomes_a_note() {
    let (fake, outbox) = setup().await;
    let alice = OwnedUserId::try_from("@alice:fake.test").unwrap();
    let room = fake.create_room(&[&alice]);
    let outbox = {
        drop(outbox);
        MatrixOutbox::new(fake.client().await)
    };
    let root = fake.inject(
        &room,
        &alice,
        "m.room.message",
        json!({"msgtype": "m.text", "body": "files please"}),
    );
    let th = Thread {
        chat_id: "c1".into(),
        id: format!("{room}|{root}"),
        platform: "matrix".into(),
    };
    let bytes = pattern(700_000);
    let made = Arc::new(AtomicUsize::new(0));
    let big = OutFile::new(
        "big",
        "application/zip",
        "big.zip",
        (MAX_UPLOAD_BYTES + 1) as u64,
        Arc::new(Lazy {
            size: MAX_UPLOAD_BYTES + 1,
            made: made.clone(),
        }),
    );
    let files = [
        OutFile::from_bytes("f1", "application/pdf", "report.pdf", bytes.clone()),
        big,
    ];
    outbox
        .deliver_files(&th, &files, 0, &Delivery::new("deliver:c1:m1:0"))
        .await
        .unwrap();
    let shown: Vec<Value> = fake
        .events(&room)
        .into_iter()
        .filter(|e| e["sender"] == fake.bot().as_str() && e["type"] == "m.room.message")
        .map(|e| e["content"].clone())
        .collect();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert_eq!(shown[0]["msgtype"], "m.file");
    assert_eq!(shown[0]["filename"], "report.pdf");
    assert_eq!(shown[0]["info"]["size"], 700_000);
    let mxc = shown[0]["url"].as_str().expect("a plain room: a url");
    assert_eq!(fake.media(mxc), Some(bytes), "the exact bytes");
    assert_eq!(
        fake.uploads().last().map(|u| u.1.clone()).as_deref(),
        Some("application/pdf")
    );
    assert_eq!(
        shown[1]["body"],
        "📎 big.zip (50 MB) could not be sent here: larger than the homeserver's upload limit.",
        "a platform limit is never silent"
    );
    assert_eq!(
        fake.uploads().len(),
        1,
        "the large file was refused, not stored"
    );
    assert_eq!(
        fake.upload_attempts(),
        1,
        "refused before its upload: past the homeserver's media config limit"
    );
    assert!(
        made.load(Ordering::SeqCst) < 100,
        "refused by its length, not read whole: {} pieces made",
        made.load(Ordering::SeqCst)
    );

    // The same delivery again (a retry after its answer was lost, another process's attempt):
    // the events go under the transaction ids of their keys, so the thread shows each file once;
    // the upload is repeated (the media repository has no idempotency key), a copy unused.
    outbox
        .deliver_files(&th, &files[..1], 0, &Delivery::new("deliver:c1:m1:0"))
        .await
        .unwrap();
    let again = fake
        .events(&room)
        .into_iter()
        .filter(|e| e["sender"] == fake.bot().as_str() && e["type"] == "m.room.message")
        .count();
    assert_eq!(again, 2, "no second report.pdf in the thread");
    assert_eq!(fake.uploads().len(), 2, "its bytes uploaded again, unused");
}
