//! Downloads of the files people post: one lazily built guarded client per channel
//! ([`frogbot_net::GuardedClient`], public addresses only unless the policy says otherwise), a
//! GET with the platform's own authentication (kept to the first URL's origin), and the body as
//! a [`FileStream`]. Every adapter's `ChannelOutbox::open_file` goes through it. The same client
//! posts a file the bot sends to an upload URL a platform answered ([`Downloads::upload`]), its
//! bytes streamed from [`OutFile::open`], never held whole.

use std::sync::OnceLock;

use futures::StreamExt;

use frogbot_model::BoxError;
use frogbot_net::GuardedClient;

/// A file's bytes as they arrive ([`ChannelOutbox::open_file`](crate::ChannelOutbox::open_file),
/// [`OutFile::open`]).
pub type FileStream = futures::stream::BoxStream<'static, Result<Vec<u8>, BoxError>>;

pub use frogbot_net::FetchPolicy;

/// A channel's downloads ([`Downloads::open`]).
#[derive(Debug)]
pub struct Downloads {
    policy: FetchPolicy,
    client: OnceLock<Result<GuardedClient, String>>,
}

impl Downloads {
    /// Downloads under `policy` ([`FetchPolicy::for_files`] for a platform's CDN).
    pub fn new(policy: FetchPolicy) -> Self {
        Self {
            policy,
            client: OnceLock::new(),
        }
    }

    /// Downloads of people's files under a channel's configured policy (`None`:
    /// [`FetchPolicy::for_files`], public addresses only).
    pub fn for_files(policy: Option<FetchPolicy>) -> Self {
        Self::new(policy.unwrap_or_else(FetchPolicy::for_files))
    }

    /// The bytes at `url`, fetched with `headers` (e.g. `Authorization`), as they arrive: a
    /// status other than 2xx, a refused address, a body past the policy's size or time is an
    /// error.
    pub async fn open(&self, url: &str, headers: &[(&str, &str)]) -> Result<FileStream, BoxError> {
        self.open_expecting(url, headers, None).await
    }

    /// [`Downloads::open`] of a file of `media_type`: a web page answered in its place (Slack
    /// answers a sign-in page, `200 text/html`, to a request its token may not make) is an
    /// error, not the file.
    pub async fn open_expecting(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        media_type: Option<&str>,
    ) -> Result<FileStream, BoxError> {
        let response = self
            .client()?
            .get_with_headers(url, headers)
            .await?
            .error_for_status()?;
        let page = response.content_type().starts_with("text/html");
        if page && media_type.is_some_and(|m| !m.starts_with("text/html")) {
            return Err(format!(
                "{url} answered with a web page instead of the file (is the token allowed to read files?)"
            )
            .into());
        }
        Ok(response
            .into_stream()
            .map(|r| r.map_err(BoxError::from))
            .boxed())
    }
}

impl Downloads {
    /// The policy its requests are made under.
    pub fn policy(&self) -> &FetchPolicy {
        &self.policy
    }

    fn client(&self) -> Result<&GuardedClient, BoxError> {
        self.client
            .get_or_init(|| GuardedClient::new(self.policy.clone()).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| BoxError::from(e.clone()))
    }

    /// `file`'s bytes `POST`ed to `url` (a platform's upload URL) with `headers`, streamed from
    /// [`OutFile::open`] with `Content-Length` = [`OutFile::size`]: memory stays one piece
    /// whatever the file's size. Returns the answer, any status (the caller reads the platform's
    /// way of refusing).
    pub async fn upload(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        file: &OutFile,
    ) -> Result<UploadAnswer, UploadError> {
        let body = file.open().await.map_err(UploadError::Source)?;
        self.upload_stream(url, headers, &file.media_type, file.size, body)
            .await
    }

    /// `size` bytes of `media_type` from `body` `POST`ed to `url` with `headers`, as they are
    /// read ([`Downloads::upload`] of a stream: an encrypted copy made as it is sent). A body
    /// yielding more than `size` bytes is cut there, one yielding fewer ends the request
    /// short: the platform never takes a file of another length than it was told.
    pub async fn upload_stream(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        media_type: &str,
        size: u64,
        body: FileStream,
    ) -> Result<UploadAnswer, UploadError> {
        let client = self.client().map_err(UploadError::Source)?;
        let body = at_most(body, size);
        let response = client
            .post_stream(url, headers, media_type, size, body)
            .await
            .map_err(UploadError::Fetch)?;
        answer_of(response).await
    }

    /// `file` posted to `url` with `headers` as the part `part` of a `multipart/form-data`
    /// request after the text parts `texts` (name, content type, value), streamed from
    /// [`OutFile::open`] like [`Downloads::upload`] (Discord's message with an attachment).
    pub async fn upload_form(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        texts: &[(&str, &str, &str)],
        part: &str,
        file: &OutFile,
    ) -> Result<UploadAnswer, UploadError> {
        let client = self.client().map_err(UploadError::Source)?;
        let body = file.open().await.map_err(UploadError::Source)?;
        let file = frogbot_net::FilePart {
            name: part.to_owned(),
            filename: file.filename.clone(),
            content_type: file.media_type.clone(),
            length: file.size,
            body: at_most(body, file.size),
        };
        let response = client
            .post_multipart(url, headers, texts, file)
            .await
            .map_err(UploadError::Fetch)?;
        answer_of(response).await
    }
}

/// `body`, ended by an error once past `size` bytes.
fn at_most(body: FileStream, size: u64) -> impl futures::Stream<Item = Result<Vec<u8>, BoxError>> {
    futures::stream::unfold((body, 0u64), move |(mut body, sent)| async move {
        let piece = match body.next().await? {
            Ok(piece) => piece,
            Err(e) => return Some((Err(e), (body, sent))),
        };
        let sent = sent + piece.len() as u64;
        if sent > size {
            let e: BoxError = format!("the file has more than its {size} bytes").into();
            return Some((Err(e), (body, sent)));
        }
        Some((Ok(piece), (body, sent)))
    })
}

/// An answer's status, `Retry-After` and the start of its body.
async fn answer_of(response: frogbot_net::Response) -> Result<UploadAnswer, UploadError> {
    let status = response.status();
    let retry_after = response.retry_after();
    // The answer's start is enough to read (a platform's refusal, a message's id); the rest
    // is not read.
    let mut body = Vec::new();
    let mut stream = std::pin::pin!(response.into_stream());
    while body.len() < UploadAnswer::BODY_START {
        match stream.next().await {
            Some(Ok(piece)) => body.extend_from_slice(&piece),
            _ => break,
        }
    }
    body.truncate(UploadAnswer::BODY_START);
    Ok(UploadAnswer {
        status,
        retry_after,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// An upload URL's answer ([`Downloads::upload`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The wait it asks for ([`frogbot_net::retry_after`]), when it asks for one.
    pub retry_after: Option<std::time::Duration>,
    /// The body's first [`UploadAnswer::BODY_START`] bytes, as text.
    pub body: String,
}

impl UploadAnswer {
    /// How much of an answer's body is read (a message's JSON fits).
    pub const BODY_START: usize = 64 * 1024;

    /// Whether the platform took the file (a 2xx).
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Why [`Downloads::upload`] sent no answerable request.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The client or the file's bytes could not be had.
    #[error("the file could not be read: {0}")]
    Source(BoxError),
    /// The request failed: refused address, network, timeout.
    #[error(transparent)]
    Fetch(frogbot_net::FetchError),
}

/// Why an adapter's [`ChannelOutbox::open_file`](crate::ChannelOutbox::open_file) will not
/// download a file, when the person should be told more than that it failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Larger than the platform lets a bot download (Telegram's Bot API: 20 MB), whatever the
    /// configured limit.
    #[error("larger than the {} {platform} lets a bot download", size_text(*limit))]
    TooLarge {
        /// The platform's limit, in bytes.
        limit: u64,
        /// The platform, as a person names it.
        platform: &'static str,
    },
}

/// A file already in memory (a test's, a client's that only reads media whole), handed on in
/// 64 KiB pieces as any download, each copied as it is read.
pub fn from_bytes(bytes: Vec<u8>) -> FileStream {
    pieces_of(std::sync::Arc::new(bytes))
}

/// The size of the pieces a file in memory is handed on in.
const PIECE: usize = 64 * 1024;

/// `bytes` in [`PIECE`]s, each copied as it is asked for (never a second copy of the whole).
fn pieces_of(bytes: std::sync::Arc<Vec<u8>>) -> FileStream {
    futures::stream::unfold(0, move |at| {
        let bytes = bytes.clone();
        async move {
            let end = bytes.len().min(at + PIECE);
            (at < end).then(|| (Ok(bytes[at..end].to_vec()), end))
        }
    })
    .boxed()
}

impl Default for Downloads {
    fn default() -> Self {
        Self::new(FetchPolicy::for_files())
    }
}

/// Where the bytes of a file the bot sends come from (the engine's store; bytes in memory).
#[async_trait::async_trait]
pub trait FileSource: Send + Sync {
    /// The file's bytes from the start, as they are read.
    async fn open(&self) -> Result<FileStream, BoxError>;
}

struct InMemory(std::sync::Arc<Vec<u8>>);

#[async_trait::async_trait]
impl FileSource for InMemory {
    async fn open(&self) -> Result<FileStream, BoxError> {
        Ok(pieces_of(self.0.clone()))
    }
}

/// A file the bot sends with a message (a model reply's or an agent message's `file` part),
/// posted by [`ChannelOutbox::deliver_files`](crate::ChannelOutbox::deliver_files) as the
/// platform's own upload, each as its own message after the message's text.
#[derive(Clone)]
pub struct OutFile {
    /// Its id (the store's; stable across attempts).
    pub id: String,
    /// Its media type, e.g. `image/png`.
    pub media_type: String,
    /// Its file name (never empty: `file` when none was given).
    pub filename: String,
    /// Its size in bytes.
    pub size: u64,
    source: std::sync::Arc<dyn FileSource>,
}

impl OutFile {
    /// A file read from `source`.
    pub fn new(
        id: impl Into<String>,
        media_type: impl Into<String>,
        filename: impl Into<String>,
        size: u64,
        source: std::sync::Arc<dyn FileSource>,
    ) -> Self {
        let filename = filename.into();
        Self {
            id: id.into(),
            media_type: media_type.into(),
            filename: if filename.is_empty() {
                "file".to_owned()
            } else {
                filename
            },
            size,
            source,
        }
    }

    /// A file whose bytes are in memory (tests, a reuse of an adapter without the engine).
    pub fn from_bytes(
        id: impl Into<String>,
        media_type: impl Into<String>,
        filename: impl Into<String>,
        bytes: Vec<u8>,
    ) -> Self {
        let size = bytes.len() as u64;
        Self::new(
            id,
            media_type,
            filename,
            size,
            std::sync::Arc::new(InMemory(bytes.into())),
        )
    }

    /// Whether a platform shows it as a picture (an image other than SVG).
    pub fn is_image(&self) -> bool {
        self.media_type.starts_with("image/") && !self.media_type.starts_with("image/svg")
    }

    /// Its bytes, as they are read (a platform call that streams its upload).
    pub async fn open(&self) -> Result<FileStream, BoxError> {
        self.source.open().await
    }

    /// Its bytes, whole (for a platform client that takes an upload whole). A source that
    /// yields more or fewer than [`OutFile::size`] bytes is an error.
    pub async fn bytes(&self) -> Result<Vec<u8>, BoxError> {
        let mut stream = self.open().await?;
        let mut out = Vec::with_capacity(usize::try_from(self.size).unwrap_or(0));
        while let Some(piece) = stream.next().await {
            out.extend_from_slice(&piece?);
            if out.len() as u64 > self.size {
                break;
            }
        }
        if out.len() as u64 != self.size {
            return Err(format!(
                "file {} has {} bytes, not the {} recorded",
                self.id,
                out.len(),
                self.size
            )
            .into());
        }
        Ok(out)
    }

    /// What a person is shown in the file's place when the platform cannot take it: its name,
    /// its size and why (a platform limit is never silent).
    pub fn refused_text(&self, why: &str) -> String {
        format!(
            "📎 {} ({}) could not be sent here: {why}.",
            self.filename,
            size_text(self.size)
        )
    }
}

/// `bytes` for a person: `20 MB`, `512 KB`, `300 bytes` (MB and KB of 1024).
pub fn size_text(bytes: u64) -> String {
    match bytes {
        n if n >= 1024 * 1024 => format!("{} MB", n / (1024 * 1024)),
        n if n >= 1024 => format!("{} KB", n / 1024),
        n => format!("{n} bytes"),
    }
}

impl std::fmt::Debug for OutFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutFile")
            .field("id", &self.id)
            .field("media_type", &self.media_type)
            .field("filename", &self.filename)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl PartialEq for OutFile {
    fn eq(&self, other: &Self) -> bool {
        (&self.id, &self.media_type, &self.filename, self.size)
            == (&other.id, &other.media_type, &other.filename, other.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_out_file_reads_whole_and_names_itself() {
        let f = OutFile::from_bytes("f1", "image/png", "", vec![7; 70_000]);
        assert_eq!(f.filename, "file");
        assert!(f.is_image());
        assert_eq!(f.bytes().await.unwrap().len(), 70_000);
        assert_eq!(
            f.refused_text("larger than Discord's 10 MB limit for bots"),
            "📎 file (68 KB) could not be sent here: larger than Discord's 10 MB limit for bots."
        );
        assert!(!OutFile::from_bytes("s", "image/svg+xml", "a.svg", vec![]).is_image());
    }

    #[tokio::test]
    async fn a_source_shorter_than_its_record_is_an_error() {
        let mut f = OutFile::from_bytes("f1", "text/plain", "a.txt", b"abc".to_vec());
        f.size = 4;
        assert!(f.bytes().await.is_err());
    }
}
