//! The store's files part, [`FileStore`]: the bytes of files people post and agents send, kept
//! in chunks of at most [`FILE_CHUNK_BYTES`] so that neither a write nor a read ever holds a whole
//! file, and their records (which chat a file belongs to, its media type, name, size and SHA-256).
//!
//! A file is written in three steps — [`FileStore::begin_file`], [`FileStore::put_file_chunk`]
//! for each chunk in order, [`FileStore::finish_file`] — and is invisible to readers until it is
//! finished: an upload cut off half way leaves an unfinished record that
//! [`FileStore::purge_files`] removes with its chunks. An S3-compatible store can implement the
//! same steps later (a multipart upload: begin, parts, complete).

use async_trait::async_trait;

use super::*;
use crate::model::{ChatId, Millis};

/// The most bytes one chunk holds (256 KiB): a file's bytes are written and read a chunk at a
/// time.
pub const FILE_CHUNK_BYTES: usize = 256 * 1024;

/// The files part of [`Store`]: files' bytes in chunks and their records.
#[async_trait]
pub trait FileStore: Send + Sync {
    /// Starts a file: its record, unfinished and invisible to [`FileStore::get_file`]. A known
    /// id is a [`StoreError::Conflict`].
    async fn begin_file(&self, file: &NewFile) -> Result<()>;

    /// Writes chunk `index` (0, 1, …, each at most [`FILE_CHUNK_BYTES`]) of the unfinished file
    /// `id`; writing one index again replaces it. [`StoreError::Conflict`] when `id` is unknown
    /// or already finished.
    async fn put_file_chunk(&self, id: &str, index: u32, data: &[u8]) -> Result<()>;

    /// Finishes file `id` with its `size`, `sha256` (lowercase hex) and number of chunks, and
    /// returns its record. When the same chat already holds a finished file of the same bytes,
    /// media type and name (the same upload delivered twice), that file is returned instead and
    /// this one removed. [`StoreError::Conflict`] when `id` is unknown or already finished.
    async fn finish_file(&self, op: &FinishFile<'_>) -> Result<FileRow>;

    /// The finished file `id` of `chat`: `None` when there is none (unknown, unfinished, or
    /// another chat's).
    async fn get_file(&self, chat: &ChatId, id: &str) -> Result<Option<FileRow>>;

    /// Chunk `index` of file `id`, or `None` past its last chunk.
    async fn file_chunk(&self, id: &str, index: u32) -> Result<Option<Vec<u8>>>;

    /// Removes the unfinished files begun before `before` with their chunks (uploads cut off
    /// half way): how many.
    async fn purge_files(&self, before: Millis) -> Result<u64>;
}

/// [`FileStore::begin_file`]: a file's record before its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewFile {
    /// Its id (the engine's: random, unguessable).
    pub id: String,
    /// The chat it belongs to: who may read the chat may read the file.
    pub chat: ChatId,
    /// Who sent it: a user id, a platform user, an agent; `""` for none.
    pub owner: String,
    /// Its media type (`image/png`).
    pub media_type: String,
    /// Its file name as sent (`""` when none was given).
    pub filename: String,
    /// When it was begun.
    pub now: Millis,
}

/// [`FileStore::finish_file`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishFile<'a> {
    /// The file.
    pub id: &'a str,
    /// Its size in bytes.
    pub size: u64,
    /// The SHA-256 of its bytes, lowercase hex.
    pub sha256: &'a str,
    /// How many chunks were written (0 for an empty file).
    pub chunks: u32,
}

/// A finished file's record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRow {
    /// Its id.
    pub id: String,
    /// The chat it belongs to.
    pub chat: ChatId,
    /// Who sent it (`""` for none).
    pub owner: String,
    /// Its media type.
    pub media_type: String,
    /// Its file name (`""` when none was given).
    pub filename: String,
    /// Its size in bytes.
    pub size: u64,
    /// The SHA-256 of its bytes, lowercase hex.
    pub sha256: String,
    /// How many chunks hold it.
    pub chunks: u32,
    /// When it was begun.
    pub created_at: Millis,
}
