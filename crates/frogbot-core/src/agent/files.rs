//! Files people post and agents send: the limits a file is checked against, writing one into the
//! store as it streams in (a chunk at a time, hashed on the way), reading it back, the URL a
//! file part names it by (`/api/chats/{chat}/files/{id}`), and what the model is shown of it
//! (an image as an image part for a model that reads images, a text file as text, any other
//! file by its name, type and size).
//!
//! It must not hold a whole file in memory while writing or serving it: only the model's copy
//! of a file it reads (at most [`FileLimits::model_image_bytes`] or
//! [`FileLimits::model_text_bytes`]) is read whole.

use base64::Engine as _;
use futures::{Stream, StreamExt};
use sha2::{Digest, Sha256};

use crate::agent::model::{FileContent, ModelFile, ModelMessage, Transcript};
use crate::model::{ChatId, MessagePart, Millis};
use crate::store::{DynStore, FILE_CHUNK_BYTES, FileRow, FinishFile, NewFile};

/// What files are accepted, and how much of one the model reads (`[files]` in `frogbot.toml`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileLimits {
    /// The largest file, in bytes (20 MiB by default).
    pub max_bytes: u64,
    /// The most files one message carries (10).
    pub max_per_message: usize,
    /// The media types accepted: exact (`application/pdf`) or a whole type (`image/*`); `*/*`
    /// (the default) accepts any.
    pub media_types: Vec<String>,
    /// Whether the models read images (sent as image parts); otherwise an image is named.
    pub images_to_model: bool,
    /// The largest image sent to the model as an image (5 MiB); a larger one is named.
    pub model_image_bytes: u64,
    /// How much of a text file the model reads (100 KB); the rest is cut, and the model told.
    pub model_text_bytes: usize,
    /// How long downloading one file a person posted on a platform may take (60 s).
    pub download_timeout: std::time::Duration,
}

impl Default for FileLimits {
    fn default() -> Self {
        Self {
            max_bytes: 20 * 1024 * 1024,
            max_per_message: 10,
            media_types: vec!["*/*".into()],
            images_to_model: true,
            model_image_bytes: 5 * 1024 * 1024,
            model_text_bytes: 100_000,
            download_timeout: std::time::Duration::from_secs(60),
        }
    }
}

impl FileLimits {
    /// Whether `media_type` (already [`media_type`]-checked) is accepted.
    pub fn accepts(&self, media_type: &str) -> bool {
        let kind = media_type.split('/').next().unwrap_or("");
        self.media_types.iter().any(|allowed| {
            allowed == "*/*"
                || allowed.eq_ignore_ascii_case(media_type)
                || allowed
                    .strip_suffix("/*")
                    .is_some_and(|k| k.eq_ignore_ascii_case(kind))
        })
    }
}

pub use crate::error::FileError;

/// The URL a file part names file `id` of `chat` by (served to those who may read the chat).
pub fn file_url(chat: &ChatId, id: &str) -> String {
    format!("/api/chats/{chat}/files/{id}")
}

/// The chat and file id a file URL names: `None` for any other URL.
pub fn parse_file_url(url: &str) -> Option<(ChatId, &str)> {
    let rest = url.strip_prefix("/api/chats/")?;
    let (chat, id) = rest.split_once("/files/")?;
    let chat = ChatId::new(chat).ok()?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        .then_some((chat, id))
}

/// A media type as sent (`Image/PNG; charset=…`) checked and normalised: `type/subtype` in
/// lowercase, without parameters. `None` when it is not one.
pub fn media_type(sent: &str) -> Option<String> {
    let essence = sent.split(';').next()?.trim().to_ascii_lowercase();
    let (kind, sub) = essence.split_once('/')?;
    let token = |s: &str| {
        !s.is_empty()
            && s.len() <= 127
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    (token(kind) && token(sub)).then_some(essence)
}

/// A file name as sent, made safe to keep and show: its last path segment, without control
/// characters, at most 255 characters.
pub fn file_name(sent: &str) -> String {
    let last = sent.rsplit(['/', '\\']).next().unwrap_or("");
    last.chars()
        .filter(|c| !c.is_control())
        .take(255)
        .collect::<String>()
        .trim()
        .to_string()
}

/// Writes a file into `chat` as `body` streams in: chunks of [`FILE_CHUNK_BYTES`], hashed on the
/// way; refused as soon as it passes `limits.max_bytes` (nothing kept). Returns its record —
/// an earlier file of the chat when it holds the same upload.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn write_file<S, B, E>(
    store: &DynStore,
    limits: &FileLimits,
    chat: &ChatId,
    owner: &str,
    media_type_sent: &str,
    filename: &str,
    now: Millis,
    body: S,
) -> crate::Result<FileRow>
where
    S: Stream<Item = Result<B, E>> + Send,
    B: AsRef<[u8]> + Send,
    E: std::fmt::Display,
{
    let media = media_type(media_type_sent).ok_or_else(|| FileError::MediaType {
        media_type: media_type_sent.chars().take(100).collect(),
    })?;
    if !limits.accepts(&media) {
        return Err(FileError::MediaType { media_type: media }.into());
    }
    let id = uuid::Uuid::new_v4().simple().to_string();
    store
        .begin_file(&NewFile {
            id: id.clone(),
            chat: chat.clone(),
            owner: owner.to_string(),
            media_type: media,
            filename: file_name(filename),
            now,
        })
        .await?;
    // The file is unfinished until `finish_file`: a failure below leaves it to the purge.
    let mut hash = Sha256::new();
    let mut buf: Vec<u8> = Vec::with_capacity(FILE_CHUNK_BYTES);
    let (mut size, mut index) = (0u64, 0u32);
    let mut body = std::pin::pin!(body);
    while let Some(piece) = body.next().await {
        let piece = piece.map_err(|e| FileError::Upload {
            message: e.to_string(),
        })?;
        let mut piece = piece.as_ref();
        size += piece.len() as u64;
        if size > limits.max_bytes {
            return Err(FileError::TooLarge {
                limit: limits.max_bytes,
            }
            .into());
        }
        hash.update(piece);
        while !piece.is_empty() {
            let take = (FILE_CHUNK_BYTES - buf.len()).min(piece.len());
            buf.extend_from_slice(&piece[..take]);
            piece = &piece[take..];
            if buf.len() == FILE_CHUNK_BYTES {
                store.put_file_chunk(&id, index, &buf).await?;
                index += 1;
                buf.clear();
            }
        }
    }
    if !buf.is_empty() {
        store.put_file_chunk(&id, index, &buf).await?;
        index += 1;
    }
    let sha: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok(store
        .finish_file(&FinishFile {
            id: &id,
            size,
            sha256: &sha,
            chunks: index,
        })
        .await?)
}

/// Downloads the files a person posted on a platform (through the channel's
/// [`ChannelOutbox::open_file`](crate::agent::ChannelOutbox::open_file)) into `chat`: the file
/// parts of those taken, in order, and a line for each refused (too many, too large, a type not
/// accepted, a download that failed or did not finish in time) to tell the person.
pub(crate) async fn take_platform_files(
    store: &DynStore,
    limits: &FileLimits,
    outbox: Option<&dyn crate::agent::ChannelOutbox>,
    chat: &ChatId,
    owner: &str,
    files: &[crate::model::PlatformFile],
    now: Millis,
) -> (Vec<MessagePart>, Vec<String>) {
    let (mut taken, mut refused) = (Vec::new(), Vec::new());
    for (i, f) in files.iter().enumerate() {
        let name = if f.filename.is_empty() {
            "a file".to_string()
        } else {
            file_name(&f.filename)
        };
        if i >= limits.max_per_message {
            refused.push(format!(
                "{name}: at most {} files are taken from one message",
                limits.max_per_message
            ));
            continue;
        }
        if f.size.is_some_and(|n| n > limits.max_bytes) {
            refused.push(format!(
                "{name}: it is larger than the {} limit",
                size_text(limits.max_bytes)
            ));
            continue;
        }
        let media = media_type(&f.media_type).unwrap_or_else(|| "application/octet-stream".into());
        if !limits.accepts(&media) {
            refused.push(format!(
                "{name}: files of type {media} are not accepted here"
            ));
            continue;
        }
        let Some(outbox) = outbox else {
            refused.push(format!("{name}: this channel does not take files"));
            continue;
        };
        tracing::debug!(chat_id = %chat, file = %f.id, "downloading a posted file");
        let written = tokio::time::timeout(limits.download_timeout, async {
            let stream = outbox.open_file(f).await.map_err(|e| {
                match e.downcast::<frogbot_channel::files::OpenError>() {
                    Ok(refused) => crate::Error::File(FileError::Refused {
                        why: refused.to_string(),
                    }),
                    Err(e) => crate::Error::from(FileError::Upload {
                        message: e.to_string(),
                    }),
                }
            })?;
            write_file(store, limits, chat, owner, &media, &f.filename, now, stream).await
        })
        .await;
        match written {
            Ok(Ok(row)) => taken.push(MessagePart::file(
                &row.media_type,
                &row.filename,
                &file_url(chat, &row.id),
            )),
            Ok(Err(crate::Error::File(FileError::TooLarge { limit }))) => refused.push(format!(
                "{name}: it is larger than the {} limit",
                size_text(limit)
            )),
            Ok(Err(crate::Error::File(FileError::Refused { why }))) => {
                refused.push(format!("{name}: it is {why}"));
            }
            Ok(Err(e)) => {
                tracing::warn!(chat_id = %chat, file = %f.id, error = %e, "a posted file was not taken");
                refused.push(format!("{name}: the download failed"));
            }
            Err(_) => refused.push(format!(
                "{name}: the download did not finish within {}",
                seconds(limits.download_timeout)
            )),
        }
    }
    (taken, refused)
}

use frogbot_channel::files::size_text;

/// The notice telling a person which of their files were not taken.
pub(crate) fn refused_text(refused: &[String]) -> String {
    let mut out = String::from("📎 I could not take ");
    out.push_str(&refused.join("; "));
    out.push('.');
    out
}

/// A stored file's bytes, a chunk at a time.
pub(crate) fn file_chunks(
    store: DynStore,
    row: FileRow,
) -> impl Stream<Item = crate::Result<Vec<u8>>> + Send + 'static {
    futures::stream::try_unfold(0u32, move |index| {
        let (store, id, chunks) = (store.clone(), row.id.clone(), row.chunks);
        async move {
            if index >= chunks {
                return Ok(None);
            }
            match store.file_chunk(&id, index).await? {
                Some(c) => Ok(Some((c, index + 1))),
                None => Err(crate::Error::Internal(format!(
                    "file {id} lost its chunk {index}"
                ))),
            }
        }
    })
}

/// Checks the file parts of a message sent to `chat`: at most `limits.max_per_message`; each
/// names a file of this chat (its media type and name then taken from the record) or is a
/// `data:` URL of an accepted type within the size limit.
pub(crate) async fn check_file_parts(
    store: &DynStore,
    limits: &FileLimits,
    chat: &ChatId,
    parts: &mut [MessagePart],
) -> crate::Result<()> {
    let files = parts.iter().filter(|p| p.as_file().is_some()).count();
    if files > limits.max_per_message {
        return Err(FileError::TooMany {
            limit: limits.max_per_message,
        }
        .into());
    }
    for part in parts.iter_mut() {
        let Some(file) = part.as_file() else {
            // A `file` part without a URL is no file at all.
            if let MessagePart::Other(v) = part
                && v.get("type").and_then(|t| t.as_str()) == Some("file")
            {
                return Err(FileError::Unknown { url: String::new() }.into());
            }
            continue;
        };
        if let Some(data) = file.url.strip_prefix("data:") {
            let (head, payload) = data.split_once(',').unwrap_or((data, ""));
            let media = media_type(head.trim_end_matches(";base64")).unwrap_or_default();
            if !limits.accepts(&media) {
                return Err(FileError::MediaType { media_type: media }.into());
            }
            if payload.len() as u64 / 4 * 3 > limits.max_bytes {
                return Err(FileError::TooLarge {
                    limit: limits.max_bytes,
                }
                .into());
            }
            continue;
        }
        let url = file.url.to_string();
        let row = match parse_file_url(&url) {
            Some((of, id)) if &of == chat => store.get_file(chat, id).await?,
            _ => None,
        };
        let Some(row) = row else {
            return Err(FileError::Unknown { url }.into());
        };
        *part = MessagePart::file(&row.media_type, &row.filename, &url);
    }
    Ok(())
}

/// A stored file's bytes, as a channel reads them to send it.
struct StoredFile {
    store: DynStore,
    row: FileRow,
}

#[async_trait::async_trait]
impl frogbot_channel::files::FileSource for StoredFile {
    async fn open(&self) -> Result<frogbot_channel::FileStream, crate::BoxError> {
        Ok(file_chunks(self.store.clone(), self.row.clone())
            .map(|r| r.map_err(crate::BoxError::from))
            .boxed())
    }
}

/// The files `parts` name, as a channel sends them ([`frogbot_channel::OutFile`]): each a file
/// of `chat` read from the store a chunk at a time, or a `data:` URL's bytes. A part naming no
/// file of `chat` (checked when the message was taken, so only a file purged since) is left out
/// and logged.
pub(crate) async fn out_files(
    store: &DynStore,
    chat: &ChatId,
    parts: &[MessagePart],
) -> crate::Result<Vec<frogbot_channel::OutFile>> {
    let mut out = Vec::new();
    for (i, f) in parts.iter().filter_map(MessagePart::as_file).enumerate() {
        if let Some(data) = f.url.strip_prefix("data:") {
            let (_, payload) = data.split_once(',').unwrap_or((data, ""));
            match base64::engine::general_purpose::STANDARD.decode(payload) {
                Ok(bytes) => out.push(frogbot_channel::OutFile::from_bytes(
                    format!("data{i}"),
                    f.media_type,
                    f.filename,
                    bytes,
                )),
                Err(e) => {
                    tracing::warn!(chat_id = %chat, error = %e, "a data: URL file part is not base64; not sent");
                }
            }
            continue;
        }
        let row = match parse_file_url(f.url) {
            Some((of, id)) if &of == chat => store.get_file(chat, id).await?,
            _ => None,
        };
        match row {
            Some(row) => out.push(frogbot_channel::OutFile::new(
                row.id.clone(),
                row.media_type.clone(),
                row.filename.clone(),
                row.size,
                std::sync::Arc::new(StoredFile {
                    store: store.clone(),
                    row,
                }),
            )),
            None => {
                tracing::warn!(chat_id = %chat, url = f.url, "a message names a file that is gone; not sent");
            }
        }
    }
    Ok(out)
}

/// The model messages of a user message's files (before its text).
pub(crate) fn model_files(parts: &[MessagePart], out: &mut Vec<ModelMessage>) {
    for f in parts.iter().filter_map(MessagePart::as_file) {
        out.push(ModelMessage::File(ModelFile {
            media_type: f.media_type.to_string(),
            filename: f.filename.to_string(),
            url: f.url.to_string(),
            content: None,
        }));
    }
}

/// `messages` with every file's content read for the model (a transcript without files is
/// returned as it is, shared).
pub(crate) async fn read_for_model(
    store: &DynStore,
    limits: &FileLimits,
    chat: &ChatId,
    messages: Transcript,
) -> Transcript {
    let unread = |m: &ModelMessage| matches!(m, ModelMessage::File(f) if f.content.is_none());
    if !messages.iter().any(unread) {
        return messages;
    }
    let mut out = Vec::with_capacity(messages.len());
    for m in messages.iter() {
        match m {
            ModelMessage::File(f) if f.content.is_none() => {
                let mut f = f.clone();
                f.content = Some(content(store, limits, chat, &f).await);
                out.push(ModelMessage::File(f));
            }
            m => out.push(m.clone()),
        }
    }
    out.into()
}

/// What the model is shown of one file.
async fn content(
    store: &DynStore,
    limits: &FileLimits,
    chat: &ChatId,
    f: &ModelFile,
) -> FileContent {
    let name = if f.filename.is_empty() {
        "a file".to_string()
    } else {
        f.filename.clone()
    };
    let named = |size: Option<u64>, why: &str| FileContent::Named {
        note: match size {
            Some(s) => format!("[{name} ({}, {s} bytes): {why}]", f.media_type),
            None => format!("[{name} ({}): {why}]", f.media_type),
        },
    };
    let is_image = f.media_type.starts_with("image/") && f.media_type != "image/svg+xml";
    let is_text = f.media_type.starts_with("text/")
        || matches!(
            f.media_type.as_str(),
            "application/json" | "application/xml" | "application/x-yaml" | "image/svg+xml"
        );
    if !(is_text || is_image && limits.images_to_model) {
        return named(None, "a file you cannot read; only its name is known");
    }
    let cap = if is_image {
        limits.model_image_bytes
    } else {
        limits.model_text_bytes as u64
    };
    let bytes: Option<(Vec<u8>, u64)> = if let Some(data) = f.url.strip_prefix("data:") {
        let payload = data.split_once(',').map_or("", |(_, p)| p);
        base64::engine::general_purpose::STANDARD
            .decode(payload)
            .ok()
            .map(|b| {
                let n = b.len() as u64;
                (b, n)
            })
    } else {
        read_up_to(store, chat, &f.url, cap).await
    };
    let Some((bytes, size)) = bytes else {
        return named(None, "no longer stored");
    };
    if is_image {
        if size > cap {
            return named(Some(size), "an image too large to be shown to you");
        }
        let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
        return FileContent::Image {
            data_url: format!("data:{};base64,{b64}", f.media_type),
        };
    }
    let shown = &bytes[..bytes.len().min(limits.model_text_bytes)];
    let mut text = format!("[{name} ({})]\n", f.media_type);
    text.push_str(&String::from_utf8_lossy(shown));
    if size > shown.len() as u64 {
        text.push_str(&format!(
            "\n[… cut: the first {} of {size} bytes shown]",
            shown.len()
        ));
    }
    FileContent::Text { text }
}

/// The first `cap` bytes (a chunk more at most) of the stored file `url` names, with its size.
async fn read_up_to(
    store: &DynStore,
    chat: &ChatId,
    url: &str,
    cap: u64,
) -> Option<(Vec<u8>, u64)> {
    let (of, id) = parse_file_url(url)?;
    if &of != chat {
        return None;
    }
    let row = store.get_file(chat, id).await.ok()??;
    if row.size > cap && row.media_type.starts_with("image/") {
        return Some((Vec::new(), row.size));
    }
    let mut out = Vec::new();
    let mut index = 0;
    while index < row.chunks && (out.len() as u64) < cap {
        out.extend(store.file_chunk(&row.id, index).await.ok()??);
        index += 1;
    }
    Some((out, row.size))
}

/// A time limit as a person reads it: `30 s`, `0.3 s` (not `0 s` for less than a second).
fn seconds(d: std::time::Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_and_names_are_checked_and_made_safe() {
        assert_eq!(media_type("Image/PNG; x=1").as_deref(), Some("image/png"));
        for bad in ["", "png", "image/", "/png", "image/p ng", "a/b/c"] {
            assert_eq!(media_type(bad), None, "{bad:?}");
        }
        assert_eq!(file_name("../../etc/passwd"), "passwd");
        assert_eq!(file_name("C:\\Users\\me\\shot\u{0}.png"), "shot.png");
        assert_eq!(file_name(&"a".repeat(1000)).len(), 255);
        let limits = FileLimits {
            media_types: vec!["image/*".into(), "application/pdf".into()],
            ..FileLimits::default()
        };
        assert!(limits.accepts("image/png"));
        assert!(limits.accepts("application/pdf"));
        assert!(!limits.accepts("application/zip"));
        assert!(!limits.accepts("text/html"));
        assert!(FileLimits::default().accepts("application/zip"));
    }

    #[test]
    fn file_urls_name_a_chat_and_an_id() {
        let chat = ChatId::new("c-1").unwrap();
        let url = file_url(&chat, "abc123");
        assert_eq!(url, "/api/chats/c-1/files/abc123");
        assert_eq!(parse_file_url(&url), Some((chat, "abc123")));
        for bad in [
            "https://x/api/chats/c/files/a",
            "/api/chats/c/files/",
            "/api/chats/../files/a",
            "/api/chats/c/files/a/../b",
        ] {
            assert_eq!(parse_file_url(bad), None, "{bad}");
        }
    }

    #[test]
    fn time_limits_read_as_seconds() {
        use std::time::Duration;
        assert_eq!(seconds(Duration::from_secs(30)), "30 s");
        assert_eq!(seconds(Duration::from_millis(300)), "0.3 s");
        assert_eq!(seconds(Duration::from_millis(2500)), "2.5 s");
    }
}
