//! `engine.ops()`: what operators and the process's worker do — the store's ping, the backlog
//! (metrics), roles held and group members, jobs (listed, revived, run when due), the
//! housekeeping purge (counted, done) and the expired leases' recovery. The operator commands
//! (`frogbot chats`, `show`, `jobs`, `jobs retry`, `purge`) go through it like every other
//! caller: each write is one store operation.

use super::*;
use crate::store::Purgeable;

/// What [`Ops::housekeep`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Housekeeping {
    /// Expired question records removed.
    pub questions_purged: u64,
    /// Dead jobs past their retention removed.
    pub dead_jobs_purged: u64,
    /// Dead jobs kept (at most 100 counted).
    pub dead_jobs: usize,
    /// Uploads cut off more than an hour ago (unfinished files) removed.
    pub uploads_purged: u64,
}

/// What [`Ops::revive_job`] did.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Revival {
    /// The dead job is live again, due now.
    Revived(Job),
    /// The job is live (due, or running): left as it is.
    Live(Job),
    /// No job has that id.
    Unknown,
}

/// Operations: jobs, purge, backlog, roles, the store's health ([`Engine::ops`]).
#[derive(Clone, Copy, Debug)]
pub struct Ops<'a>(pub(super) &'a Engine);

impl<'a> Ops<'a> {
    /// Whether the store answers.
    pub async fn ping(self) -> Result<()> {
        self.0.store().ping().await.map_err(Error::from)
    }

    /// Reads the backlog (queued messages; jobs due, running and dead, on the engine's clock) and
    /// sets the backlog gauges of [`crate::metrics`] to it: what a metrics scrape calls.
    pub async fn refresh_backlog(self) -> Result<crate::store::Backlog> {
        crate::metrics::refresh_backlog(self.0.store().as_ref(), self.0.now())
            .await
            .map_err(Error::from)
    }

    /// Takes the role `key` when no process sharing this database holds it (`None` when one
    /// does): for a receiver the platform allows only once, such as a bot's Telegram poller or
    /// a Matrix account's sync. Released when the returned hold is dropped or this process
    /// dies; [`Held::lost`](crate::store::Held::lost) says when it was lost otherwise.
    pub async fn try_hold(self, key: &str) -> Result<Option<Box<dyn crate::store::Held>>> {
        self.0.store().try_hold(key).await.map_err(Error::from)
    }

    /// Renews this process's membership `member` of `group` for `ttl` and returns the group's
    /// live members, sorted ([`RoleStore::members`](crate::store::RoleStore::members)): how the
    /// replicas sharing this database split a piece of work, such as a Discord bot's gateway
    /// shards. `ttl` zero leaves the group.
    pub async fn members(
        self,
        group: &str,
        member: &str,
        ttl: std::time::Duration,
    ) -> Result<Vec<String>> {
        let op = crate::store::MembersOp {
            group,
            member,
            ttl_ms: i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX),
            now: self.0.now(),
        };
        self.0.store().members(&op).await.map_err(Error::from)
    }

    /// Runs due durable jobs (continuing turns a dead process left waiting, runs of handed-on
    /// queues, `updated` retries, expiries). Returns how many ran.
    pub async fn run_due_jobs(self, worker: &str) -> Result<usize> {
        let store = self.0.store();
        let mut ran = 0;
        while let Some(job) = store.claim_job(worker, 60_000, self.0.now()).await? {
            ran += 1;
            let Some(typed) = EngineJob::from_job(&job) else {
                store
                    .bury_job(&job, "no engine job of this kind and payload")
                    .await?;
                continue;
            };
            if let EngineJob::Deliver { .. } = &typed {
                self.finish_delivery_job(&job, &typed).await?;
                continue;
            }
            let result = match &typed {
                EngineJob::ResumeChat {
                    chat,
                    message,
                    driver,
                } => self
                    .0
                    .inner
                    .turns
                    .resume(chat, message, driver.clone())
                    .await
                    .map(|_| true),
                EngineJob::RunQueue { chat } => {
                    self.0.inner.turns.run_queue(chat).await.map(|_| true)
                }
                EngineJob::QuestionUpdated {
                    chat,
                    call,
                    revision,
                } => {
                    self.0
                        .inner
                        .questions
                        .run_updated_job(chat, call, *revision)
                        .await
                }
                EngineJob::QuestionExpire { chat, message } => self
                    .0
                    .inner
                    .questions
                    .expire(chat, message)
                    .await
                    .map(|_| true),
                EngineJob::Deliver { .. } => Ok(true),
                EngineJob::SyncMessage { chat, message } => {
                    self.0.inner.channels.sync_message(chat, message).await
                }
            };
            let retry_at = |attempts: i64| self.0.now() + updated_backoff_ms(attempts);
            match result {
                Ok(true) => {
                    store.complete_job(&job).await?;
                }
                Ok(false) if job.attempts >= UPDATED_MAX_RUNS => {
                    store.bury_job(&job, "updated kept failing").await?;
                }
                Ok(false) => {
                    store
                        .retry_job(&job, retry_at(job.attempts), "updated failed")
                        .await?;
                }
                Err(e) => {
                    let at = match typed {
                        EngineJob::QuestionUpdated { .. } => retry_at(job.attempts),
                        _ => self.0.now() + 5_000,
                    };
                    store.retry_job(&job, at, &e.to_string()).await?;
                }
            }
        }
        Ok(ran)
    }

    /// A worker's attempt at a reply's delivery its process did not finish: done, retried with
    /// backoff (at least the platform's wait), or buried after [`DELIVERY_MAX_ATTEMPTS`] or a
    /// permanent failure (an error log; the dead job stays for operators).
    async fn finish_delivery_job(self, job: &Job, typed: &EngineJob) -> Result<()> {
        let store = self.0.store();
        let key = job.key.as_deref().unwrap_or_default();
        // A thread's replies in order: one owed before this one goes first (this claim does
        // not count as an attempt).
        if let EngineJob::Deliver { chat, .. } = typed
            && let Some(earlier) = store
                .earlier_job(&EngineJob::deliver_prefix(chat), key)
                .await?
        {
            let after = earlier.run_at.max(earlier.claim_until.unwrap_or(0));
            let at = after.max(self.0.now()) + DELIVERY_ORDER_WAIT_MS;
            debug!(key, earlier = ?earlier.key, "a reply owed before this one goes first");
            store.defer_job(job, at).await?;
            return Ok(());
        }
        let attempt = u32::try_from(job.attempts).unwrap_or(u32::MAX);
        let run = self.0.inner.channels.run_delivery_job(typed, attempt).await;
        let (why, transient) = match run {
            DeliveryRun::Done => {
                store.complete_job(job).await?;
                return Ok(());
            }
            DeliveryRun::NotHere => (
                "no channel for this thread in this process".to_string(),
                true,
            ),
            DeliveryRun::Failed(e, transient) => (e.to_string(), transient),
        };
        if transient && job.attempts < DELIVERY_MAX_ATTEMPTS {
            warn!(key, attempt = job.attempts, error = %why, "delivering a reply failed; retrying later");
            let at = self.0.now() + job_backoff_ms(job.attempts);
            store.retry_job(job, at, &why).await?;
        } else {
            error!(key, attempts = job.attempts, error = %why, "giving up on delivering a reply: the thread misses it (dead job kept)");
            store.bury_job(job, &why).await?;
        }
        Ok(())
    }

    /// Housekeeping: removes expired question records, uploads cut off (unfinished an hour
    /// after they began), and the dead jobs older than
    /// [`EngineConfig::dead_job_retention`], and warns about the dead jobs kept (the replies or
    /// updates given up on).
    pub async fn housekeep(self) -> Result<Housekeeping> {
        let store = self.0.store();
        let now = self.0.now();
        let questions = store.purge_expired(now).await?;
        let dead_jobs_purged = store
            .purge_dead_jobs(now.saturating_sub(self.0.dead_job_retention_ms()))
            .await?;
        // An upload still unfinished after an hour was cut off.
        let uploads_purged = store
            .purge_files(now.saturating_sub(60 * 60 * 1000))
            .await?;
        let dead = store.dead_jobs(HOUSEKEEPING_DEAD_REPORT).await?;
        if !dead.is_empty() {
            let kinds: Vec<String> = dead
                .iter()
                .map(|j| j.key.clone().unwrap_or_else(|| j.kind.clone()))
                .collect();
            warn!(count = dead.len(), jobs = ?kinds, "dead jobs are kept for inspection");
        }
        Ok(Housekeeping {
            questions_purged: questions,
            dead_jobs_purged,
            dead_jobs: dead.len(),
            uploads_purged,
        })
    }

    /// Recovers chats whose turn lease ran out without being released: marks each one's
    /// interrupted turn and runs its queue. Returns how many were taken.
    pub async fn recover_expired_leases(self) -> Result<usize> {
        self.0.inner.turns.recover_expired_leases().await
    }

    /// The live jobs (soonest due first), or with `dead` the dead ones (oldest first).
    pub async fn jobs(self, dead: bool, limit: u32) -> Result<Vec<Job>> {
        let store = self.0.store();
        if dead {
            store.dead_jobs(limit).await
        } else {
            store.live_jobs(limit).await
        }
        .map_err(Error::from)
    }

    /// Makes the dead job `id` live again, due now, its attempts reset (one store operation; a
    /// live or unknown id is then only read, to say which it is).
    pub async fn revive_job(self, id: i64) -> Result<Revival> {
        let store = self.0.store();
        if let Some(job) = store.revive_job(id, self.0.now()).await? {
            self.0.job_scheduled(job.run_at);
            return Ok(Revival::Revived(job));
        }
        Ok(match store.get_job(id).await? {
            Some(job) => Revival::Live(job),
            None => Revival::Unknown,
        })
    }

    /// What [`Ops::housekeep`] would remove now, counted: expired question records and dead jobs
    /// older than the retention.
    pub async fn purgeable(self) -> Result<Purgeable> {
        let now = self.0.now();
        self.0
            .store()
            .purgeable(now, now.saturating_sub(self.0.dead_job_retention_ms()))
            .await
            .map_err(Error::from)
    }
}
