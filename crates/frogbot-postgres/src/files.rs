//! The files part: [`FileStore`] for [`PostgresStore`] — files' records and their bytes in chunks
//! of at most 256 KiB (`bytea` rows), shared by every process on the database.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;

use frogbot_core::model::{ChatId, Millis};
use frogbot_core::store::Result;
use frogbot_core::store::*;

use crate::PostgresStore;
use crate::ops::*;

macro_rules! file_cols {
    () => {
        "id, chat_id, owner, media_type, filename, size, sha256, chunks, created_at"
    };
}

#[async_trait]
impl FileStore for PostgresStore {
    async fn begin_file(&self, file: &NewFile) -> Result<()> {
        let added = sqlx::query(
            "INSERT INTO files (id, chat_id, owner, media_type, filename, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING",
        )
        .bind(&file.id)
        .bind(file.chat.as_str())
        .bind(&file.owner)
        .bind(&file.media_type)
        .bind(&file.filename)
        .bind(file.now)
        .execute(&self.pool)
        .await
        .db(self)?
        .rows_affected();
        if added == 0 {
            return Err(conflict(format!("file {} exists", file.id)));
        }
        Ok(())
    }

    async fn put_file_chunk(&self, id: &str, index: u32, data: &[u8]) -> Result<()> {
        // One statement: the chunk is written only while its file is unfinished.
        let written = sqlx::query(
            "INSERT INTO file_chunks (file_id, idx, data) \
             SELECT id, $2, $3 FROM files WHERE id = $1 AND NOT finished \
             ON CONFLICT (file_id, idx) DO UPDATE SET data = excluded.data",
        )
        .bind(id)
        .bind(index as i32)
        .bind(data)
        .execute(&self.pool)
        .await
        .db(self)?
        .rows_affected();
        if written == 0 {
            return Err(conflict(format!("file {id} is unknown or finished")));
        }
        Ok(())
    }

    async fn finish_file(&self, op: &FinishFile<'_>) -> Result<FileRow> {
        let mut tx = self.pool.begin().await.db(self)?;
        let this = sqlx::query(concat!(
            "SELECT ",
            file_cols!(),
            " FROM files WHERE id = $1 AND NOT finished FOR UPDATE"
        ))
        .bind(op.id)
        .fetch_optional(&mut *tx)
        .await
        .db(self)?;
        let Some(this) = this else {
            return Err(conflict(format!("file {} is unknown or finished", op.id)));
        };
        let this = file_row(&this)?;
        // Two uploads of the same bytes finishing together: one waits for the other here.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(format!("frogbot-file:{}:{}", this.chat, op.sha256))
            .execute(&mut *tx)
            .await
            .db(self)?;
        sqlx::query("DELETE FROM file_chunks WHERE file_id = $1 AND idx >= $2")
            .bind(op.id)
            .bind(op.chunks as i32)
            .execute(&mut *tx)
            .await
            .db(self)?;
        let same = sqlx::query(concat!(
            "SELECT ",
            file_cols!(),
            " FROM files WHERE finished AND chat_id = $1 AND sha256 = $2 \
             AND size = $3 AND media_type = $4 AND filename = $5 ORDER BY created_at, id LIMIT 1"
        ))
        .bind(this.chat.as_str())
        .bind(op.sha256)
        .bind(op.size as i64)
        .bind(&this.media_type)
        .bind(&this.filename)
        .fetch_optional(&mut *tx)
        .await
        .db(self)?;
        let row = if let Some(same) = same {
            sqlx::query("DELETE FROM file_chunks WHERE file_id = $1")
                .bind(op.id)
                .execute(&mut *tx)
                .await
                .db(self)?;
            sqlx::query("DELETE FROM files WHERE id = $1")
                .bind(op.id)
                .execute(&mut *tx)
                .await
                .db(self)?;
            file_row(&same)?
        } else {
            let done = sqlx::query(concat!(
                "UPDATE files SET size = $2, sha256 = $3, chunks = $4, finished = TRUE \
                 WHERE id = $1 RETURNING ",
                file_cols!()
            ))
            .bind(op.id)
            .bind(op.size as i64)
            .bind(op.sha256)
            .bind(op.chunks as i32)
            .fetch_one(&mut *tx)
            .await
            .db(self)?;
            file_row(&done)?
        };
        tx.commit().await.db(self)?;
        Ok(row)
    }

    async fn get_file(&self, chat: &ChatId, id: &str) -> Result<Option<FileRow>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            file_cols!(),
            " FROM files WHERE id = $1 AND chat_id = $2 AND finished"
        ))
        .bind(id)
        .bind(chat.as_str())
        .fetch_optional(&self.pool)
        .await
        .db(self)?;
        row.as_ref().map(file_row).transpose()
    }

    async fn file_chunk(&self, id: &str, index: u32) -> Result<Option<Vec<u8>>> {
        sqlx::query_scalar("SELECT data FROM file_chunks WHERE file_id = $1 AND idx = $2")
            .bind(id)
            .bind(index as i32)
            .fetch_optional(&self.pool)
            .await
            .db(self)
    }

    async fn purge_files(&self, before: Millis) -> Result<u64> {
        let n = sqlx::query(
            "WITH gone AS (DELETE FROM files WHERE NOT finished AND created_at < $1 RETURNING id), \
             chunks AS (DELETE FROM file_chunks WHERE file_id IN (SELECT id FROM gone)) \
             SELECT count(*) FROM gone",
        )
        .bind(before)
        .fetch_one(&self.pool)
        .await
        .db(self)?
        .get::<i64, _>(0);
        Ok(n.max(0) as u64)
    }
}

fn file_row(r: &PgRow) -> Result<FileRow> {
    let corrupt = |e: sqlx::Error| StoreError::corrupt_msg(format!("a file's record: {e}"));
    let chat: String = r.try_get("chat_id").map_err(corrupt)?;
    Ok(FileRow {
        id: r.try_get("id").map_err(corrupt)?,
        chat: ChatId::new(chat).map_err(|e| StoreError::corrupt_msg(e.to_string()))?,
        owner: r.try_get("owner").map_err(corrupt)?,
        media_type: r.try_get("media_type").map_err(corrupt)?,
        filename: r.try_get("filename").map_err(corrupt)?,
        size: r.try_get::<i64, _>("size").map_err(corrupt)?.max(0) as u64,
        sha256: r.try_get("sha256").map_err(corrupt)?,
        chunks: r.try_get::<i32, _>("chunks").map_err(corrupt)?.max(0) as u32,
        created_at: r.try_get("created_at").map_err(corrupt)?,
    })
}

fn conflict(message: String) -> StoreError {
    StoreError::Conflict { message }
}
