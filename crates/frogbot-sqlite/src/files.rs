//! The files part: [`FileStore`] for [`SqliteStore`] — files' records and their bytes in chunks
//! of at most 256 KiB. A file's first [`INLINE_CHUNKS`] chunks (1 MiB) live in the database; the
//! rest of a larger file lives next to it, one file per chunk in `{database}.files/{id}/{index}`,
//! so the database (and its WAL) stays small. A chunk file is written under a temporary name and
//! renamed into place (rewriting an index replaces it whole); a file's chunk files are synced to
//! disk before the commit that finishes it, so a finished file's bytes are as durable as its
//! record. The chunk files of files removed (cut-off uploads, a second copy of the same upload)
//! go after the commit that removed them; a folder left by a crash between the two is swept by
//! [`FileStore::purge_files`]. An in-memory database keeps every chunk in itself.

use async_trait::async_trait;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, Row, params};

use frogbot_core::model::{ChatId, Millis};
use frogbot_core::store::*;
use frogbot_core::store::{Result, StoreError};

use crate::SqliteStore;
use crate::ops::*;

/// How many of a file's first chunks live in the database (1 MiB); the rest go next to it.
pub(crate) const INLINE_CHUNKS: u32 = 4;

/// Where file `id`'s chunks past [`INLINE_CHUNKS`] go: `{dir}/{id}`, for an id that is a safe
/// path segment (the engine's are hex digits; any other stays in the database).
fn chunk_dir(dir: &Path, id: &str) -> Option<PathBuf> {
    let safe = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    safe.then(|| dir.join(id))
}

fn io(what: &str, e: std::io::Error) -> E {
    E::Core(StoreError::unavailable_msg(format!("{what}: {e}")))
}

/// Removes the chunk folders of `ids` (files already gone from the database), off the async
/// task.
async fn remove_chunks(dir: Option<PathBuf>, ids: Vec<String>) {
    let (Some(dir), false) = (dir, ids.is_empty()) else {
        return;
    };
    let removed = tokio::task::spawn_blocking(move || {
        for id in ids {
            if let Some(d) = chunk_dir(&dir, &id)
                && let Err(e) = std::fs::remove_dir_all(&d)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(file = %id, error = %e, "removing a file's chunks failed");
            }
        }
    })
    .await;
    if let Err(e) = removed {
        tracing::warn!(error = %e, "removing files' chunks failed");
    }
}

/// The names in the chunk folder (file ids), read off the async task.
async fn chunk_folders(dir: Option<PathBuf>) -> Vec<String> {
    let Some(dir) = dir else { return Vec::new() };
    tokio::task::spawn_blocking(move || {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default()
    })
    .await
    .unwrap_or_default()
}

impl SqliteStore {
    /// The folder of file `id`'s chunks next to the database (`None`: in-memory, or an id that
    /// is not a safe path segment).
    fn chunk_folder(&self, id: &str) -> Option<PathBuf> {
        chunk_dir(&self.files_dir()?, id)
    }

    /// Where chunk `index` of file `id` goes next to the database: `None` for the first
    /// [`INLINE_CHUNKS`], which stay in it.
    fn chunk_folder_for(&self, id: &str, index: u32) -> Option<PathBuf> {
        (index >= INLINE_CHUNKS)
            .then(|| self.chunk_folder(id))
            .flatten()
    }
}

#[async_trait]
impl FileStore for SqliteStore {
    async fn begin_file(&self, file: &NewFile) -> Result<()> {
        let file = file.clone();
        self.write("begin_file", move |c| {
            let added = c.execute(
                "INSERT INTO files (id, chat_id, owner, media_type, filename, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO NOTHING",
                params![
                    file.id,
                    file.chat.as_str(),
                    file.owner,
                    file.media_type,
                    file.filename,
                    file.now
                ],
            )?;
            if added == 0 {
                return Err(conflict(format!("file {} exists", file.id)));
            }
            Ok(())
        })
        .await
    }

    async fn put_file_chunk(&self, id: &str, index: u32, data: &[u8]) -> Result<()> {
        let (id, data) = (id.to_owned(), data.to_vec());
        let outside = self.chunk_folder_for(&id, index);
        // Relaxed: the chunks are durable once `finish_file` (a full commit, later in the same
        // log, after the chunk files are synced) is; a file not finished is purged anyway.
        self.write_relaxed("put_file_chunk", move |c| {
            if !unfinished(c, &id)? {
                return Err(conflict(format!("file {id} is unknown or finished")));
            }
            if let Some(dir) = outside {
                std::fs::create_dir_all(&dir).map_err(|e| io("a file's chunk folder", e))?;
                let tmp = dir.join(format!("{index}.part"));
                std::fs::write(&tmp, &data).map_err(|e| io("a file's chunk", e))?;
                std::fs::rename(&tmp, dir.join(index.to_string()))
                    .map_err(|e| io("a file's chunk", e))?;
                return Ok(());
            }
            c.execute(
                "INSERT INTO file_chunks (file_id, idx, data) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (file_id, idx) DO UPDATE SET data = excluded.data",
                params![id, index, data],
            )?;
            Ok(())
        })
        .await
    }

    async fn finish_file(&self, op: &FinishFile<'_>) -> Result<FileRow> {
        let (id, sha) = (op.id.to_owned(), op.sha256.to_owned());
        let (size, chunks) = (op.size, op.chunks);
        let outside = self.chunk_folder(&id);
        let (row, gone) = self
            .write("finish_file", move |c| {
                if !unfinished(c, &id)? {
                    return Err(conflict(format!("file {id} is unknown or finished")));
                }
                // Chunks past the count (an index written by mistake) are not part of the file.
                c.execute(
                    "DELETE FROM file_chunks WHERE file_id = ?1 AND idx >= ?2",
                    params![id, chunks],
                )?;
                // The chunks next to the database: those past the count removed, the others synced
                // (and their folder) before the commit that makes the file readable.
                if let Some(dir) = outside.as_ref().filter(|d| d.is_dir()) {
                    let entries = std::fs::read_dir(dir).map_err(|e| io("a file's chunks", e))?;
                    for entry in entries {
                        let path = entry.map_err(|e| io("a file's chunks", e))?.path();
                        let index = path
                            .file_name()
                            .and_then(|n| n.to_str())
                            .and_then(|n| n.parse::<u32>().ok());
                        match index {
                            Some(i) if i < chunks => std::fs::File::open(&path)
                                .and_then(|f| f.sync_all())
                                .map_err(|e| io("syncing a file's chunk", e))?,
                            _ => {
                                std::fs::remove_file(&path).map_err(|e| io("a file's chunks", e))?
                            }
                        }
                    }
                    // The folder's entries (the renames), and the folder's own entry in its parent.
                    for d in [Some(dir.as_path()), dir.parent()].into_iter().flatten() {
                        std::fs::File::open(d)
                            .and_then(|d| d.sync_all())
                            .map_err(|e| io("syncing a file's chunk folder", e))?;
                    }
                }
                let same: Option<FileRow> = c
                    .query_row(
                        &format!(
                            "SELECT {COLUMNS} FROM files f WHERE finished = 1 \
                         AND chat_id = (SELECT chat_id FROM files WHERE id = ?1) \
                         AND sha256 = ?2 AND size = ?3 \
                         AND media_type = (SELECT media_type FROM files WHERE id = ?1) \
                         AND filename = (SELECT filename FROM files WHERE id = ?1) \
                         ORDER BY created_at, id LIMIT 1"
                        ),
                        params![id, sha, size as i64],
                        file_row,
                    )
                    .optional()?;
                if let Some(same) = same {
                    c.execute("DELETE FROM file_chunks WHERE file_id = ?1", params![id])?;
                    c.execute("DELETE FROM files WHERE id = ?1", params![id])?;
                    return Ok((same, Some(id)));
                }
                c.execute(
                "UPDATE files SET size = ?2, sha256 = ?3, chunks = ?4, finished = 1 WHERE id = ?1",
                params![id, size as i64, sha, chunks],
            )?;
                let row = c.query_row(
                    &format!("SELECT {COLUMNS} FROM files f WHERE id = ?1"),
                    params![id],
                    file_row,
                )?;
                Ok((row, None))
            })
            .await?;
        // The second copy's chunks, once the commit that removed it is done.
        remove_chunks(self.files_dir(), gone.into_iter().collect()).await;
        Ok(row)
    }

    async fn get_file(&self, chat: &ChatId, id: &str) -> Result<Option<FileRow>> {
        let (chat, id) = (chat.clone(), id.to_owned());
        self.read("get_file", move |c| {
            Ok(c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM files f WHERE id = ?1 AND chat_id = ?2 AND finished = 1"
            ))?
            .query_row(params![id, chat.as_str()], file_row)
            .optional()?)
        })
        .await
    }

    async fn file_chunk(&self, id: &str, index: u32) -> Result<Option<Vec<u8>>> {
        let id = id.to_owned();
        let outside = self.chunk_folder_for(&id, index);
        self.read("file_chunk", move |c| {
            let inside = c
                .prepare_cached("SELECT data FROM file_chunks WHERE file_id = ?1 AND idx = ?2")?
                .query_row(params![id, index], |r| r.get::<_, Vec<u8>>(0))
                .optional()?;
            if inside.is_some() {
                return Ok(inside);
            }
            // Next to the database, for a finished file only (an unfinished one's may be half
            // written).
            let Some(dir) = outside else { return Ok(None) };
            let finished = c
                .prepare_cached("SELECT chunks FROM files WHERE id = ?1 AND finished = 1")?
                .query_row(params![id], |r| r.get::<_, u32>(0))
                .optional()?;
            if finished.is_none_or(|n| index >= n) {
                return Ok(None);
            }
            match std::fs::read(dir.join(index.to_string())) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(io("reading a file's chunk", e)),
            }
        })
        .await
    }

    async fn purge_files(&self, before: Millis) -> Result<u64> {
        let dir = self.files_dir();
        let folders = chunk_folders(dir.clone()).await;
        let gone = self
            .write("purge_files", move |c| {
                let mut gone: Vec<String> = c
                    .prepare("SELECT id FROM files WHERE finished = 0 AND created_at < ?1")?
                    .query_map(params![before], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?;
                c.execute(
                    "DELETE FROM file_chunks WHERE file_id IN \
                     (SELECT id FROM files WHERE finished = 0 AND created_at < ?1)",
                    params![before],
                )?;
                c.execute(
                    "DELETE FROM files WHERE finished = 0 AND created_at < ?1",
                    params![before],
                )?;
                let n = gone.len();
                // Folders of files the database no longer knows (a crash between a removal's
                // commit and its folder's).
                let mut known = c.prepare_cached("SELECT 1 FROM files WHERE id = ?1")?;
                for f in folders {
                    if !gone.contains(&f) && !known.exists(params![f])? {
                        gone.push(f);
                    }
                }
                Ok((n as u64, gone))
            })
            .await?;
        remove_chunks(dir, gone.1).await;
        Ok(gone.0)
    }
}

const COLUMNS: &str =
    "f.id, f.chat_id, f.owner, f.media_type, f.filename, f.size, f.sha256, f.chunks, f.created_at";

fn file_row(r: &Row<'_>) -> rusqlite::Result<FileRow> {
    let chat: String = r.get(1)?;
    Ok(FileRow {
        id: r.get(0)?,
        chat: ChatId::new(&chat).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Text, e.into())
        })?,
        owner: r.get(2)?,
        media_type: r.get(3)?,
        filename: r.get(4)?,
        size: r.get::<_, i64>(5)?.max(0) as u64,
        sha256: r.get(6)?,
        chunks: r.get(7)?,
        created_at: r.get(8)?,
    })
}

fn unfinished(c: &Connection, id: &str) -> R<bool> {
    Ok(
        c.prepare_cached("SELECT 1 FROM files WHERE id = ?1 AND finished = 0")?
            .query_row(params![id], |_| Ok(()))
            .optional()?
            .is_some(),
    )
}

fn conflict(message: String) -> E {
    E::Core(StoreError::Conflict { message })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_safe_id_names_a_chunk_folder() {
        let dir = Path::new("/data/frogbot.db.files");
        assert_eq!(chunk_dir(dir, "0123abcdef"), Some(dir.join("0123abcdef")));
        for hostile in [
            "",
            "..",
            "../x",
            "a/b",
            "a\\b",
            "/etc",
            "a b",
            "é",
            &"a".repeat(129),
        ] {
            assert_eq!(chunk_dir(dir, hostile), None, "{hostile:?}");
        }
    }
}
