//! The files part: [`FileStore`] for [`SqliteStore`] — files' records and their bytes in chunks,
//! in the database itself (one file to back up; no chunk is larger than 256 KiB).

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};

use frogbot_core::model::{ChatId, Millis};
use frogbot_core::store::*;
use frogbot_core::store::{Result, StoreError};

use crate::SqliteStore;
use crate::ops::*;

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
        // Relaxed: the chunks are durable once `finish_file` (a full commit, later in the same
        // log) is; a file not finished is purged anyway.
        self.write_relaxed("put_file_chunk", move |c| {
            if !unfinished(c, &id)? {
                return Err(conflict(format!("file {id} is unknown or finished")));
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
        self.write("finish_file", move |c| {
            if !unfinished(c, &id)? {
                return Err(conflict(format!("file {id} is unknown or finished")));
            }
            // Chunks past the count (an index written by mistake) are not part of the file.
            c.execute(
                "DELETE FROM file_chunks WHERE file_id = ?1 AND idx >= ?2",
                params![id, chunks],
            )?;
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
                return Ok(same);
            }
            c.execute(
                "UPDATE files SET size = ?2, sha256 = ?3, chunks = ?4, finished = 1 WHERE id = ?1",
                params![id, size as i64, sha, chunks],
            )?;
            Ok(c.query_row(
                &format!("SELECT {COLUMNS} FROM files f WHERE id = ?1"),
                params![id],
                file_row,
            )?)
        })
        .await
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
        self.read("file_chunk", move |c| {
            Ok(
                c.prepare_cached("SELECT data FROM file_chunks WHERE file_id = ?1 AND idx = ?2")?
                    .query_row(params![id, index], |r| r.get::<_, Vec<u8>>(0))
                    .optional()?,
            )
        })
        .await
    }

    async fn purge_files(&self, before: Millis) -> Result<u64> {
        self.write("purge_files", move |c| {
            c.execute(
                "DELETE FROM file_chunks WHERE file_id IN \
                 (SELECT id FROM files WHERE finished = 0 AND created_at < ?1)",
                params![before],
            )?;
            let n = c.execute(
                "DELETE FROM files WHERE finished = 0 AND created_at < ?1",
                params![before],
            )?;
            Ok(n as u64)
        })
        .await
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
