//! The store's operations part, [`OperationsStore`]: the backend's name, its health, its clock,
//! and what operators read (`frogbot chats`, `jobs`, `purge`, the metrics scrape).

use async_trait::async_trait;

use super::*;
use crate::model::Millis;

/// The operations part of [`Store`]: the backend itself, and what operators read and do.
#[async_trait]
pub trait OperationsStore: Send + Sync {
    /// The backend's name (`sqlite`, `postgres`, …), for logs and benchmarks.
    fn backend(&self) -> &'static str;

    /// Whether the database answers (for `/healthz`).
    async fn ping(&self) -> Result<()>;

    /// Every owner's chats that `filter` lets through (state as at `now`), most recently updated
    /// first.
    async fn find_chats(&self, filter: &ChatFilter, now: Millis) -> Result<Vec<ChatRow>>;

    /// The live (not dead) jobs, the soonest due first, at most `limit`.
    async fn live_jobs(&self, limit: u32) -> Result<Vec<Job>>;

    /// Makes the dead job `id` live again: due at `now`, its attempts reset, unclaimed (its last
    /// error kept). `None` when no dead job has that id (a live job is left as it is).
    async fn revive_job(&self, id: i64, now: Millis) -> Result<Option<Job>>;

    /// Counts what [`QuestionStore::purge_expired`] at `now` and [`JobStore::purge_dead_jobs`] of
    /// `dead_before` would remove, removing nothing.
    async fn purgeable(&self, now: Millis, dead_before: Millis) -> Result<Purgeable>;

    /// Counts, at `now`, the queued messages of every chat and the jobs due (unclaimed or their
    /// claim ended, `run_at <= now`), running (claimed, the claim live) and dead — one read, for
    /// a metrics scrape.
    async fn backlog(&self, now: Millis) -> Result<Backlog>;

    /// The database server's clock now, in milliseconds since the epoch, where processes on
    /// several hosts share this database (PostgreSQL); `None` (the default) where only this
    /// host's processes do (SQLite). Leases are compared against the time their writers pass in,
    /// so replicas read the time from one clock: the engine corrects this host's clock to it
    /// ([`crate::agent::DatabaseClock`]).
    async fn database_time(&self) -> Result<Option<Millis>> {
        Ok(None)
    }
}
