//! The jobs part: [`JobStore`] for [`SqliteStore`], and the durable jobs' reads and writes.

use async_trait::async_trait;
use rusqlite::{Connection, Params, params};

use frogbot_core::model::Millis;
use frogbot_core::store::Result;
use frogbot_core::store::*;

use crate::SqliteStore;
use crate::ops::{self, *};

#[async_trait]
impl JobStore for SqliteStore {
    async fn get_job(&self, id: i64) -> Result<Option<Job>> {
        self.read("get_job", move |c| get_job(c, id)).await
    }

    async fn enqueue_job(&self, job: &NewJob) -> Result<i64> {
        let job = job.clone();
        self.write("enqueue_job", move |c| ops::enqueue_job(c, &job))
            .await
    }

    async fn claim_job(&self, worker: &str, claim_ms: Millis, now: Millis) -> Result<Option<Job>> {
        let worker = worker.to_string();
        self.write("claim_job", move |c| claim_job(c, &worker, claim_ms, now))
            .await
    }

    async fn complete_job(&self, job: &Job) -> Result<bool> {
        let job = job.clone();
        self.write("complete_job", move |c| complete_job(c, &job))
            .await
    }

    async fn retry_job(&self, job: &Job, run_at: Millis, error: &str) -> Result<bool> {
        let (job, error) = (job.clone(), error.to_string());
        self.write("retry_job", move |c| retry_job(c, &job, run_at, &error))
            .await
    }

    async fn bury_job(&self, job: &Job, error: &str) -> Result<bool> {
        let (job, error) = (job.clone(), error.to_string());
        self.write("bury_job", move |c| bury_job(c, &job, &error))
            .await
    }

    async fn delete_job(&self, key: &str) -> Result<bool> {
        let key = key.to_string();
        self.write("delete_job", move |c| delete_job(c, &key)).await
    }

    async fn earlier_job(&self, key_prefix: &str, key: &str) -> Result<Option<Job>> {
        let (prefix, key) = (key_prefix.to_string(), key.to_string());
        self.read("earlier_job", move |c| earlier_job(c, &prefix, &key))
            .await
    }

    async fn defer_job(&self, job: &Job, run_at: Millis) -> Result<bool> {
        let job = job.clone();
        self.write("defer_job", move |c| defer_job(c, &job, run_at))
            .await
    }

    async fn dead_jobs(&self, limit: u32) -> Result<Vec<Job>> {
        self.read("dead_jobs", move |c| dead_jobs(c, limit)).await
    }

    async fn purge_dead_jobs(&self, before: Millis) -> Result<u64> {
        self.write("purge_dead_jobs", move |c| purge_dead_jobs(c, before))
            .await
    }
}

pub(crate) fn get_job(c: &Connection, id: i64) -> R<Option<Job>> {
    opt(
        c,
        concat!("SELECT ", job_cols!(), " FROM jobs WHERE id = ?1"),
        [id],
        job_row,
    )
}

pub(crate) fn claim_job(
    c: &Connection,
    worker: &str,
    claim_ms: Millis,
    now: Millis,
) -> R<Option<Job>> {
    opt(
        c,
        concat!(
            "UPDATE jobs SET claimed_by = ?1, claim_until = ?2, attempts = attempts + 1 \
             WHERE id = (SELECT id FROM jobs WHERE NOT dead AND run_at <= ?3 \
                         AND (claim_until IS NULL OR claim_until <= ?3) ORDER BY run_at, id LIMIT 1) \
             RETURNING ",
            job_cols!()
        ),
        params![worker, now + claim_ms, now],
        job_row,
    )
}

/// The parameters of a statement on the claim `job` holds: ?1 id, ?2 worker, ?3 attempts,
/// ?4 generation, then the others from ?5.
macro_rules! on_claim {
    ($job:ident $(, $more:expr)*) => {
        params![
            $job.id,
            $job.claimed_by.as_deref(),
            $job.attempts,
            $job.generation
            $(, $more)*
        ]
    };
}

/// Runs a statement that changes one job: whether it did.
fn changed_one(c: &Connection, sql: &str, p: impl Params) -> R<bool> {
    Ok(exec(c, sql, p)? == 1)
}

pub(crate) fn complete_job(c: &Connection, job: &Job) -> R<bool> {
    let deleted = changed_one(
        c,
        "DELETE FROM jobs WHERE id = ?1 AND claimed_by = ?2 AND attempts = ?3 AND generation = ?4",
        on_claim!(job),
    )?;
    if deleted {
        return Ok(true);
    }
    // Re-enqueued while it ran: keep it, scheduled, and release the claim.
    changed_one(
        c,
        "UPDATE jobs SET claimed_by = NULL, claim_until = NULL \
         WHERE id = ?1 AND claimed_by = ?2 AND attempts = ?3",
        params![job.id, job.claimed_by.as_deref(), job.attempts],
    )
}

pub(crate) fn retry_job(c: &Connection, job: &Job, run_at: Millis, error: &str) -> R<bool> {
    changed_one(
        c,
        "UPDATE jobs SET claimed_by = NULL, claim_until = NULL, last_error = ?5, \
                run_at = CASE WHEN generation <> ?4 AND run_at < ?6 THEN run_at ELSE ?6 END \
         WHERE id = ?1 AND claimed_by = ?2 AND attempts = ?3",
        on_claim!(job, error, run_at),
    )
}

pub(crate) fn bury_job(c: &Connection, job: &Job, error: &str) -> R<bool> {
    changed_one(
        c,
        "UPDATE jobs SET claimed_by = NULL, claim_until = NULL, last_error = ?5, \
                dead = (generation = ?4) \
         WHERE id = ?1 AND claimed_by = ?2 AND attempts = ?3",
        on_claim!(job, error),
    )
}

pub(crate) fn delete_job(c: &Connection, key: &str) -> R<bool> {
    changed_one(c, "DELETE FROM jobs WHERE key = ?1", [key])
}

/// `key_prefix` with the `LIKE` wildcards escaped (`\\`), then `%`.
fn like_prefix(key_prefix: &str) -> String {
    let mut p = String::with_capacity(key_prefix.len() + 1);
    for ch in key_prefix.chars() {
        if matches!(ch, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(ch);
    }
    p.push('%');
    p
}

pub(crate) fn earlier_job(c: &Connection, key_prefix: &str, key: &str) -> R<Option<Job>> {
    opt(
        c,
        concat!(
            "SELECT ",
            job_cols!(),
            " FROM jobs WHERE NOT dead AND key LIKE ?1 ESCAPE '\\' AND key <> ?2 \
               AND id < COALESCE((SELECT id FROM jobs WHERE key = ?2), 9223372036854775807) \
             ORDER BY id LIMIT 1"
        ),
        params![like_prefix(key_prefix), key],
        job_row,
    )
}

pub(crate) fn defer_job(c: &Connection, job: &Job, run_at: Millis) -> R<bool> {
    changed_one(
        c,
        "UPDATE jobs SET claimed_by = NULL, claim_until = NULL, attempts = MAX(attempts - 1, 0), \
                run_at = CASE WHEN generation <> ?4 AND run_at < ?5 THEN run_at ELSE ?5 END \
         WHERE id = ?1 AND claimed_by = ?2 AND attempts = ?3",
        on_claim!(job, run_at),
    )
}

pub(crate) fn dead_jobs(c: &Connection, limit: u32) -> R<Vec<Job>> {
    all(
        c,
        concat!(
            "SELECT ",
            job_cols!(),
            " FROM jobs WHERE dead ORDER BY created_at, id LIMIT ?1"
        ),
        [limit],
        job_row,
    )
}

pub(crate) fn purge_dead_jobs(c: &Connection, before: Millis) -> R<u64> {
    Ok(exec(
        c,
        "DELETE FROM jobs WHERE dead AND created_at < ?1",
        [before],
    )? as u64)
}
