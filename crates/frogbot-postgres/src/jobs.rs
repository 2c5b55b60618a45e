//! The jobs part: [`JobStore`] for [`PostgresStore`], the durable jobs' statements, and the changes
//! pushed as they commit (from `feed.rs`).

use async_trait::async_trait;
use sqlx::Row;

use frogbot_core::model::Millis;
use frogbot_core::store::Result;
use frogbot_core::store::*;

use crate::PostgresStore;
use crate::ops::*;
use crate::rows::{self, job_cols, to_json};

const CLAIM_JOB: &str = concat!(
    "UPDATE jobs SET claimed_by = $1, claim_until = $2, attempts = attempts + 1 \
     WHERE id = (SELECT id FROM jobs WHERE NOT dead AND run_at <= $3 \
                 AND (claim_until IS NULL OR claim_until <= $3) ORDER BY run_at, id LIMIT 1 \
                 FOR UPDATE SKIP LOCKED) \
       AND NOT dead AND run_at <= $3 AND (claim_until IS NULL OR claim_until <= $3) \
     RETURNING ",
    job_cols!()
);

/// Removes the finished job, or — when it was re-enqueued while it ran (another generation) —
/// keeps it scheduled and releases the claim. $1 id, $2 worker, $3 attempts, $4 generation.
const COMPLETE_JOB: &str = "WITH del AS ( \
        DELETE FROM jobs WHERE id = $1 AND claimed_by = $2 AND attempts = $3 AND generation = $4 \
        RETURNING 1 \
     ), rel AS ( \
        UPDATE jobs SET claimed_by = NULL, claim_until = NULL \
        WHERE id = $1 AND claimed_by = $2 AND attempts = $3 AND generation <> $4 RETURNING 1 \
     ) SELECT (SELECT count(*) FROM del) + (SELECT count(*) FROM rel) AS done";

const RELEASE_JOB: &str = "UPDATE jobs SET claimed_by = NULL, claim_until = NULL \
     WHERE id = $1 AND claimed_by = $2 AND attempts = $3";

/// `sql` on the claim `job` holds, its first parameters bound: $1 id, $2 worker, $3 attempts,
/// $4 generation.
fn claimed<'q>(sql: &'static str, job: &'q Job) -> PgQuery<'q> {
    sqlx::query(sql)
        .bind(job.id)
        .bind(job.claimed_by.as_deref())
        .bind(job.attempts)
        .bind(job.generation)
}

#[async_trait]
impl JobStore for PostgresStore {
    async fn get_job(&self, id: i64) -> Result<Option<Job>> {
        self.opt(
            sqlx::query(concat!("SELECT ", job_cols!(), " FROM jobs WHERE id = $1")).bind(id),
            rows::job,
        )
        .await
    }

    async fn enqueue_job(&self, job: &NewJob) -> Result<i64> {
        let r = async {
            let row = self
                .one(
                    sqlx::query(ENQUEUE_JOB)
                        .bind(&job.kind)
                        .bind(job.key.as_deref())
                        .bind(to_json(&job.payload)?)
                        .bind(job.run_at),
                )
                .await?;
            row.try_get("id").db(self)
        }
        .await;
        self.jobs_announced(&[Some(job.run_at)], r)
    }

    async fn claim_job(&self, worker: &str, claim_ms: Millis, now: Millis) -> Result<Option<Job>> {
        self.opt(
            sqlx::query(CLAIM_JOB)
                .bind(worker)
                .bind(now + claim_ms)
                .bind(now),
            rows::job,
        )
        .await
    }

    async fn complete_job(&self, job: &Job) -> Result<bool> {
        let row = self.one(claimed(COMPLETE_JOB, job)).await?;
        if row.try_get::<i64, _>("done").db(self)? > 0 {
            return Ok(true);
        }
        // Re-enqueued between the statement's snapshot and its delete: the job stays; release
        // the claim.
        self.changed_one(
            sqlx::query(RELEASE_JOB)
                .bind(job.id)
                .bind(job.claimed_by.as_deref())
                .bind(job.attempts),
        )
        .await
    }

    async fn retry_job(&self, job: &Job, run_at: Millis, error: &str) -> Result<bool> {
        let r = self
            .changed_one(
                claimed(
                    "UPDATE jobs SET claimed_by = NULL, claim_until = NULL, last_error = $5, \
                        run_at = CASE WHEN generation <> $4 AND run_at < $6 THEN run_at ELSE $6 END \
                     WHERE id = $1 AND claimed_by = $2 AND attempts = $3",
                    job,
                )
                .bind(error)
                .bind(run_at),
            )
            .await;
        self.jobs_announced(&[Some(run_at)], r)
    }

    async fn delete_job(&self, key: &str) -> Result<bool> {
        self.changed_one(sqlx::query("DELETE FROM jobs WHERE key = $1").bind(key))
            .await
    }

    async fn earlier_job(&self, key_prefix: &str, key: &str) -> Result<Option<Job>> {
        self.opt(
            sqlx::query(concat!(
                "SELECT ",
                job_cols!(),
                " FROM jobs WHERE NOT dead AND starts_with(key, $1) AND key <> $2 \
                   AND id < COALESCE((SELECT id FROM jobs WHERE key = $2), 9223372036854775807) \
                 ORDER BY id LIMIT 1"
            ))
            .bind(key_prefix)
            .bind(key),
            rows::job,
        )
        .await
    }

    async fn defer_job(&self, job: &Job, run_at: Millis) -> Result<bool> {
        let r = self
            .changed_one(
                claimed(
                    "UPDATE jobs SET claimed_by = NULL, claim_until = NULL, \
                        attempts = GREATEST(attempts - 1, 0), \
                        run_at = CASE WHEN generation <> $4 AND run_at < $5 THEN run_at ELSE $5 END \
                     WHERE id = $1 AND claimed_by = $2 AND attempts = $3",
                    job,
                )
                .bind(run_at),
            )
            .await;
        self.jobs_announced(&[Some(run_at)], r)
    }

    async fn dead_jobs(&self, limit: u32) -> Result<Vec<Job>> {
        self.all(
            sqlx::query(concat!(
                "SELECT ",
                job_cols!(),
                " FROM jobs WHERE dead ORDER BY created_at, id LIMIT $1"
            ))
            .bind(i64::from(limit)),
            rows::job,
        )
        .await
    }

    async fn purge_dead_jobs(&self, before: Millis) -> Result<u64> {
        let done = sqlx::query("DELETE FROM jobs WHERE dead AND created_at < $1")
            .bind(before)
            .execute(&self.pool)
            .await
            .db(self)?;
        Ok(done.rows_affected())
    }

    async fn bury_job(&self, job: &Job, error: &str) -> Result<bool> {
        self.changed_one(
            claimed(
                "UPDATE jobs SET claimed_by = NULL, claim_until = NULL, last_error = $5, \
                    dead = (generation = $4) \
                 WHERE id = $1 AND claimed_by = $2 AND attempts = $3",
                job,
            )
            .bind(error),
        )
        .await
    }

    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<frogbot_core::store::Change>> {
        Some(self.feed.subscribe(&self.pool))
    }
}
