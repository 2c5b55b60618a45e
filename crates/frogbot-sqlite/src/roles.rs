//! The roles part: [`RoleStore`] for [`SqliteStore`] — a role held by a lock on a file beside the
//! database, and groups' memberships.

use std::path::PathBuf;

use async_trait::async_trait;
use rusqlite::{Connection, params};

use frogbot_core::store::*;
use frogbot_core::store::{Result, StoreError};

use crate::SqliteStore;
use crate::ops::*;

#[async_trait]
impl RoleStore for SqliteStore {
    async fn try_hold(&self, key: &str) -> Result<Option<Box<dyn Held>>> {
        // The processes sharing a database file share its directory: a lock on a file beside
        // it, which the operating system releases when the process dies.
        let Some((path, _)) = &self.inner.file else {
            // An in-memory database has one process.
            return Ok(Some(Box::new(HeldForever)));
        };
        let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".hold-{hex}.lock"));
        let lock_path = PathBuf::from(name);
        let unavailable = |e: std::io::Error| StoreError::Unavailable {
            message: format!("holding role {key:?} ({}): {e}", lock_path.display()),
            source: Some(Box::new(e)),
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(unavailable)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Box::new(FileHeld(file)))),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(unavailable(e)),
        }
    }

    async fn members(&self, op: &MembersOp<'_>) -> Result<Vec<String>> {
        moved!(self.write("members"), op => MembersOp { r group, r member, v ttl_ms, v now },
            |c, op| members(c, &op))
    }
}

/// Renews (or, with `ttl_ms <= 0`, ends) `member`'s membership of `group` and lists the live
/// members, sorted; memberships expired long ago are deleted.
pub(crate) fn members(c: &Connection, op: &MembersOp<'_>) -> R<Vec<String>> {
    let (group, member, ttl_ms, now) = (op.group, op.member, op.ttl_ms, op.now);
    c.execute(
        "INSERT INTO members (grp, member, expires_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (grp, member) DO UPDATE SET expires_at = excluded.expires_at",
        params![group, member, now.saturating_add(ttl_ms.max(0))],
    )?;
    c.execute(
        "DELETE FROM members WHERE grp = ?1 AND expires_at < ?2",
        params![group, now.saturating_sub(MEMBERS_SWEPT_AFTER_MS)],
    )?;
    let mut stmt = c.prepare_cached(
        "SELECT member FROM members WHERE grp = ?1 AND expires_at > ?2 ORDER BY member",
    )?;
    let rows = stmt.query_map(params![group, now], |r| r.get::<_, String>(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A role held by an exclusive lock on a file beside the database (released with the file, or
/// by the operating system when the process dies). Never lost otherwise.
#[derive(Debug)]
struct FileHeld(#[allow(dead_code)] std::fs::File);

#[async_trait]
impl Held for FileHeld {
    async fn lost(&self) {
        std::future::pending::<()>().await;
    }
}
