//! The operations part: [`OperationsStore`] for [`PostgresStore`] — its name, its health (`ping`),
//! the database server's clock, and what operators read and do.

use async_trait::async_trait;

use frogbot_core::model::{Millis, TurnState};
use frogbot_core::store::Result;
use frogbot_core::store::*;

use crate::PostgresStore;
use crate::ops::*;
use crate::rows::{self, chat_cols, job_cols};

#[async_trait]
impl OperationsStore for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await.db(self)?;
        Ok(())
    }

    async fn find_chats(&self, filter: &ChatFilter, now: Millis) -> Result<Vec<ChatRow>> {
        self.all(
            sqlx::query(concat!(
                "SELECT ",
                chat_cols!("c"),
                " FROM chats c \
              WHERE ($1::text IS NULL OR \
                     CASE WHEN c.lease_holder IS NOT NULL AND c.lease_until > $2 THEN 'running' \
                          WHEN c.awaiting_message_id IS NOT NULL THEN 'awaiting' \
                          ELSE 'idle' END = $1) \
                AND ($3::text IS NULL OR c.channel_platform = $3) \
              ORDER BY c.updated_at DESC, c.chat_id LIMIT $4"
            ))
            .bind(filter.state.map(TurnState::as_str))
            .bind(now)
            .bind(filter.platform.as_deref())
            .bind(i64::from(filter.limit)),
            rows::chat,
        )
        .await
    }

    async fn live_jobs(&self, limit: u32) -> Result<Vec<Job>> {
        self.all(
            sqlx::query(concat!(
                "SELECT ",
                job_cols!(),
                " FROM jobs WHERE NOT dead ORDER BY run_at, id LIMIT $1"
            ))
            .bind(i64::from(limit)),
            rows::job,
        )
        .await
    }

    async fn revive_job(&self, id: i64, now: Millis) -> Result<Option<Job>> {
        let r =
            async {
                self.opt(sqlx::query(concat!(
                "UPDATE jobs SET dead = FALSE, attempts = 0, run_at = $2, claimed_by = NULL, \
                 claim_until = NULL WHERE id = $1 AND dead RETURNING ",
                job_cols!()
            ))
            .bind(id)
            .bind(now), rows::job).await
            }
            .await;
        self.jobs_announced(&[Some(now)], r)
    }

    async fn backlog(&self, now: Millis) -> Result<Backlog> {
        let row = self
            .one(
                sqlx::query(
                    "SELECT (SELECT COUNT(*) FROM messages WHERE queued) AS queued, \
                    (SELECT COUNT(*) FROM jobs WHERE NOT dead AND run_at <= $1 \
                       AND (claim_until IS NULL OR claim_until <= $1)) AS due, \
                    (SELECT COUNT(*) FROM jobs WHERE NOT dead AND claim_until > $1) AS running, \
                    (SELECT COUNT(*) FROM jobs WHERE dead) AS dead",
                )
                .bind(now),
            )
            .await?;
        let count = |name| self.count(&row, name);
        Ok(Backlog {
            queued: count("queued")?,
            jobs_due: count("due")?,
            jobs_running: count("running")?,
            jobs_dead: count("dead")?,
        })
    }

    async fn purgeable(&self, now: Millis, dead_before: Millis) -> Result<Purgeable> {
        let row = self
            .one(
                sqlx::query(
                    "SELECT (SELECT COUNT(*) FROM questions WHERE expires_at <= $1) AS questions, \
                    (SELECT COUNT(*) FROM jobs WHERE dead AND created_at < $2) AS dead_jobs",
                )
                .bind(now)
                .bind(dead_before),
            )
            .await?;
        let count = |name| self.count(&row, name);
        Ok(Purgeable {
            questions: count("questions")?,
            dead_jobs: count("dead_jobs")?,
        })
    }

    async fn database_time(&self) -> Result<Option<Millis>> {
        // `clock_timestamp()`: the time of the read, not of the transaction's start.
        let now: i64 =
            sqlx::query_scalar("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")
                .fetch_one(&self.pool)
                .await
                .db(self)?;
        Ok(Some(now))
    }
}
