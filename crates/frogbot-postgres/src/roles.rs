//! The roles part: [`RoleStore`] for [`PostgresStore`] — a role held by a session advisory lock on
//! a connection of its own, and groups' memberships.

use async_trait::async_trait;
use sqlx::postgres::PgConnection;

use frogbot_core::store::Result;
use frogbot_core::store::*;

use crate::PostgresStore;
use crate::ops::*;

#[async_trait]
impl RoleStore for PostgresStore {
    async fn try_hold(&self, key: &str) -> Result<Option<Box<dyn Held>>> {
        // A session advisory lock on a connection of its own, taken out of the pool: PostgreSQL
        // releases it when that session ends, so a process that dies gives the role up at once.
        let mut conn = self.pool.acquire().await.db(self)?.detach();
        let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtextextended($1, 0))")
            .bind(hold_key(key))
            .fetch_one(&mut conn)
            .await
            .db(self)?;
        if !got {
            let _ = sqlx::Connection::close(conn).await;
            return Ok(None);
        }
        Ok(Some(Box::new(PgHeld::start(conn, hold_key(key)))))
    }

    async fn members(&self, op: &MembersOp<'_>) -> Result<Vec<String>> {
        let (group, member, ttl_ms, now) = (op.group, op.member, op.ttl_ms, op.now);
        // One statement: the renewal (or the leave), the sweep of memberships expired a while
        // ago, and the live members. The outer SELECT reads the snapshot from before the
        // statement, so this member's own row is taken from the renewal's RETURNING.
        let members: Vec<String> = sqlx::query_scalar(
            "WITH renewed AS ( \
                 INSERT INTO members (grp, member, expires_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (grp, member) DO UPDATE SET expires_at = EXCLUDED.expires_at \
                 RETURNING member, expires_at), \
             swept AS ( \
                 DELETE FROM members WHERE grp = $1 AND member <> $2 AND expires_at < $5) \
             SELECT member FROM members WHERE grp = $1 AND member <> $2 AND expires_at > $4 \
             UNION SELECT member FROM renewed WHERE expires_at > $4 \
             ORDER BY 1",
        )
        .bind(group)
        .bind(member)
        .bind(now.saturating_add(ttl_ms.max(0)))
        .bind(now)
        .bind(now.saturating_sub(MEMBERS_SWEPT_AFTER_MS))
        .fetch_all(&self.pool)
        .await
        .db(self)?;
        Ok(members)
    }
}

/// The text an advisory lock of role `key` is hashed from (its own namespace).
fn hold_key(key: &str) -> String {
    format!("frogbot-hold:{key}")
}

/// How often a held role's connection is checked (a broken one loses the role).
const HOLD_CHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// A role held by a session advisory lock on a connection of its own: a task keeps the
/// connection, checks it every [`HOLD_CHECK`], and unlocks and closes it when the hold is
/// dropped.
#[derive(Debug)]
struct PgHeld {
    lost: tokio::sync::watch::Receiver<bool>,
    release: Option<tokio::sync::oneshot::Sender<()>>,
}

impl PgHeld {
    fn start(mut conn: PgConnection, key: String) -> Self {
        let (gone, lost) = tokio::sync::watch::channel(false);
        let (release, mut released) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut released => {
                        let _ = sqlx::query("SELECT pg_advisory_unlock(hashtextextended($1, 0))")
                            .bind(&key)
                            .execute(&mut conn)
                            .await;
                        let _ = sqlx::Connection::close(conn).await;
                        return;
                    }
                    () = tokio::time::sleep(HOLD_CHECK) => {
                        if let Err(e) = sqlx::query("SELECT 1").execute(&mut conn).await {
                            tracing::warn!(role = %key, error = %e, "the connection holding a role broke; the role is lost");
                            let _ = gone.send(true);
                            return;
                        }
                    }
                }
            }
        });
        Self {
            lost,
            release: Some(release),
        }
    }
}

impl Drop for PgHeld {
    fn drop(&mut self) {
        if let Some(r) = self.release.take() {
            let _ = r.send(());
        }
    }
}

#[async_trait]
impl Held for PgHeld {
    async fn lost(&self) {
        let mut lost = self.lost.clone();
        // A closed channel without `true` means the hold was released, never lost.
        if lost.wait_for(|l| *l).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
