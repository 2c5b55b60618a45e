//! The store's jobs part, [`JobStore`]: durable jobs, and the changes pushed to other processes.

use async_trait::async_trait;

use super::*;
use crate::model::Millis;

/// The jobs part of [`Store`]: durable jobs, and the changes pushed as they commit.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// One job by id.
    async fn get_job(&self, id: i64) -> Result<Option<Job>>;

    /// Schedules a job. With a `key`, an existing job of that key is rescheduled instead (to the
    /// earlier run-at time; a dead one is revived with its attempts reset).
    async fn enqueue_job(&self, job: &NewJob) -> Result<i64>;

    /// Claims the due job with the earliest run-at time for `worker`, for `claim_ms`. A job is
    /// claimed by one worker at a time; a claim whose time ran out can be taken again.
    async fn claim_job(&self, worker: &str, claim_ms: Millis, now: Millis) -> Result<Option<Job>>;

    /// Removes a finished job. `false` when the claim was lost.
    async fn complete_job(&self, job: &Job) -> Result<bool>;

    /// Releases a claimed job to run again at `run_at`, noting the error.
    async fn retry_job(&self, job: &Job, run_at: Millis, error: &str) -> Result<bool>;

    /// Marks a claimed job dead (kept for inspection, never run again unless re-enqueued by key).
    async fn bury_job(&self, job: &Job, error: &str) -> Result<bool>;

    /// Removes the job of `key` whoever holds it, dead or not (its work was done elsewhere: a
    /// reply its turn's process posted). `false` when there was none.
    async fn delete_job(&self, key: &str) -> Result<bool>;

    /// The oldest live (not dead) job whose key starts with `key_prefix`, enqueued before the
    /// job of `key` (a lower id; when `key` has no job, any such job but `key`). The engine keeps
    /// a thread's replies in order with it: a reply waits for the replies owed before it.
    async fn earlier_job(&self, key_prefix: &str, key: &str) -> Result<Option<Job>>;

    /// Releases a claimed job to run at `run_at` without counting the claim as an attempt (it
    /// waited for another; it did not fail). `false` when the claim was lost.
    async fn defer_job(&self, job: &Job, run_at: Millis) -> Result<bool>;

    /// The dead jobs, oldest first, at most `limit` (for operators and the housekeeping report).
    async fn dead_jobs(&self, limit: u32) -> Result<Vec<Job>>;

    /// Removes the dead jobs created before `before`. Returns how many.
    async fn purge_dead_jobs(&self, before: Millis) -> Result<u64>;

    /// The changes any process makes on this database — chats changed, jobs scheduled — pushed
    /// as they commit (PostgreSQL: `LISTEN`/`NOTIFY`); `None` (the default) when the backend
    /// pushes nothing and other processes' changes are found by polling. A receiver that lags, or
    /// a [`Change::Resync`], means notices were lost: read what is watched again.
    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<Change>> {
        None
    }
}
