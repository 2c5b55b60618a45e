//! The operations part: [`OperationsStore`] for [`SqliteStore`] — its name, its health (`ping`)
//! and what operators read and do.

use async_trait::async_trait;
use rusqlite::{Connection, params};

use frogbot_core::model::{Millis, TurnState};
use frogbot_core::store::*;
use frogbot_core::store::{Result, StoreError};

use crate::ops::*;
use crate::{SqliteStore, file_id};

#[async_trait]
impl OperationsStore for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    /// Also checks that the database file is still the one opened: a file removed or replaced
    /// under a running store would take every later write nowhere.
    async fn ping(&self) -> Result<()> {
        if let Some((path, id)) = &self.inner.file
            && file_id(path) != Some(*id)
        {
            return Err(StoreError::unavailable_msg(format!(
                "the database file {} was removed or replaced",
                path.display()
            )));
        }
        self.read("ping", ping).await
    }

    async fn find_chats(&self, filter: &ChatFilter, now: Millis) -> Result<Vec<ChatRow>> {
        let filter = filter.clone();
        self.read("find_chats", move |c| find_chats(c, &filter, now))
            .await
    }

    async fn live_jobs(&self, limit: u32) -> Result<Vec<Job>> {
        self.read("live_jobs", move |c| live_jobs(c, limit)).await
    }

    async fn revive_job(&self, id: i64, now: Millis) -> Result<Option<Job>> {
        self.write("revive_job", move |c| revive_job(c, id, now))
            .await
    }

    async fn backlog(&self, now: Millis) -> Result<Backlog> {
        self.read("backlog", move |c| backlog(c, now)).await
    }

    async fn purgeable(&self, now: Millis, dead_before: Millis) -> Result<Purgeable> {
        self.read("purgeable", move |c| purgeable(c, now, dead_before))
            .await
    }
}

pub(crate) fn ping(c: &Connection) -> R<()> {
    opt(c, "SELECT 1", [], int)?;
    Ok(())
}

/// The state a chat row is in at `?2` (as `ChatRow::state` derives it), in SQL.
const CHAT_STATE_SQL: &str = "CASE WHEN lease_holder IS NOT NULL AND lease_until > ?2 THEN 'running' \
     WHEN awaiting_message_id IS NOT NULL THEN 'awaiting' ELSE 'idle' END";

pub(crate) fn find_chats(c: &Connection, filter: &ChatFilter, now: Millis) -> R<Vec<ChatRow>> {
    let sql = format!(
        "SELECT {} FROM chats \
         WHERE (?1 IS NULL OR {CHAT_STATE_SQL} = ?1) AND (?3 IS NULL OR channel_platform = ?3) \
         ORDER BY updated_at DESC, chat_id LIMIT ?4",
        chat_cols!()
    );
    all(
        c,
        &sql,
        params![
            filter.state.map(TurnState::as_str),
            now,
            filter.platform.as_deref(),
            i64::from(filter.limit)
        ],
        chat_row,
    )
}

pub(crate) fn live_jobs(c: &Connection, limit: u32) -> R<Vec<Job>> {
    all(
        c,
        concat!(
            "SELECT ",
            job_cols!(),
            " FROM jobs WHERE NOT dead ORDER BY run_at, id LIMIT ?1"
        ),
        [limit],
        job_row,
    )
}

pub(crate) fn revive_job(c: &Connection, id: i64, now: Millis) -> R<Option<Job>> {
    opt(
        c,
        concat!(
            "UPDATE jobs SET dead = FALSE, attempts = 0, run_at = ?2, claimed_by = NULL, \
             claim_until = NULL WHERE id = ?1 AND dead RETURNING ",
            job_cols!()
        ),
        params![id, now],
        job_row,
    )
}

pub(crate) fn backlog(c: &Connection, now: Millis) -> R<Backlog> {
    opt(
        c,
        "SELECT (SELECT COUNT(*) FROM messages WHERE queued = TRUE), \
                (SELECT COUNT(*) FROM jobs WHERE NOT dead AND run_at <= ?1 \
                   AND (claim_until IS NULL OR claim_until <= ?1)), \
                (SELECT COUNT(*) FROM jobs WHERE NOT dead AND claim_until > ?1), \
                (SELECT COUNT(*) FROM jobs WHERE dead)",
        params![now],
        |r| {
            let n = |i: usize| r.get::<_, i64>(i).map(|n| u64::try_from(n).unwrap_or(0));
            Ok(Backlog {
                queued: n(0)?,
                jobs_due: n(1)?,
                jobs_running: n(2)?,
                jobs_dead: n(3)?,
            })
        },
    )
    .map(Option::unwrap_or_default)
}

pub(crate) fn purgeable(c: &Connection, now: Millis, dead_before: Millis) -> R<Purgeable> {
    opt(
        c,
        "SELECT (SELECT COUNT(*) FROM questions WHERE expires_at <= ?1), \
                (SELECT COUNT(*) FROM jobs WHERE dead AND created_at < ?2)",
        params![now, dead_before],
        |r| {
            Ok(Purgeable {
                questions: u64::try_from(r.get::<_, i64>(0)?).unwrap_or(0),
                dead_jobs: u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
            })
        },
    )
    .map(Option::unwrap_or_default)
}
