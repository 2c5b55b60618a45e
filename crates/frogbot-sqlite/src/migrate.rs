//! The schema: `rusqlite_migration` over the SQL files, counting in `PRAGMA user_version`.
//!
//! Databases made by the earlier sqlx store kept their progress in the table `_sqlx_migrations`
//! and left `user_version` at 0; they are adopted: their count of applied migrations becomes
//! `user_version`, so only the newer migrations run.

use rusqlite::Connection;
use rusqlite_migration::{M, Migrations};

use frogbot_core::store::{Result, StoreError};

const STEPS: &[M<'static>] = &[
    M::up(include_str!("../migrations/0001_init.sql")),
    M::up(include_str!("../migrations/0002_sweeps.sql")),
    M::up(include_str!("../migrations/0003_versions.sql")),
    M::up(include_str!("../migrations/0004_lean_writes.sql")),
    M::up(include_str!("../migrations/0005_agent_chats.sql")),
    M::up(include_str!("../migrations/0006_members.sql")),
    M::up(include_str!("../migrations/0007_files.sql")),
];

/// Brings the database to the latest schema.
pub(crate) fn migrate(conn: &mut Connection, location: &str) -> Result<()> {
    let fail = |what: &str, e: &dyn std::fmt::Display| StoreError::Migration {
        message: format!("{location}: {what}: {e}"),
        source: None,
    };
    adopt_sqlx(conn).map_err(|e| fail("adopt the sqlx migrations", &e))?;
    Migrations::from_slice(STEPS)
        .to_latest(conn)
        .map_err(|e| fail("migrate", &e))
}

/// Sets `user_version` from `_sqlx_migrations` on a database that sqlx migrated.
fn adopt_sqlx(conn: &Connection) -> rusqlite::Result<()> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version != 0 {
        return Ok(());
    }
    let sqlx: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations')",
        [],
        |r| r.get(0),
    )?;
    if !sqlx {
        return Ok(());
    }
    let applied: i64 = conn.query_row(
        "SELECT COUNT(*) FROM _sqlx_migrations WHERE success",
        [],
        |r| r.get(0),
    )?;
    if applied > 0 {
        tracing::info!(
            applied,
            "adopting a database migrated by sqlx: its migrations count as applied"
        );
        conn.pragma_update(None, "user_version", applied)?;
    }
    Ok(())
}
