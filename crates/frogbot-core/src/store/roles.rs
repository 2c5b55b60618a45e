//! The store's roles part, [`RoleStore`]: single roles (one process of all that share the
//! database) and groups (the processes that do one thing together).

use async_trait::async_trait;

use super::*;
use crate::model::Millis;

/// The roles part of [`Store`]: single roles and groups of the processes sharing the database.
#[async_trait]
pub trait RoleStore: Send + Sync {
    /// Takes the role `key` (e.g. the one Telegram poller of a bot, the one sync of a Matrix
    /// account) when no holder in any process on this database has it: `None` when one does.
    /// The role is released when the returned [`Held`] is dropped, and when this process dies
    /// (PostgreSQL: a session advisory lock, gone with its connection; SQLite: a lock on a file
    /// beside the database, gone with the process).
    async fn try_hold(&self, key: &str) -> Result<Option<Box<dyn Held>>>;

    /// Renews `member`'s membership of `group` until `now + ttl_ms` ([`MembersOp`]) and returns
    /// the group's live members (their membership lasting past `now`), sorted, in one step: how
    /// replicas learn who shares a piece of work (e.g. a Discord bot's gateway shards). A member
    /// that stops renewing drops out once its `ttl_ms` has passed; `ttl_ms <= 0` leaves the group at once (`member`
    /// is then not among those returned). Memberships long expired may be deleted.
    async fn members(&self, op: &MembersOp<'_>) -> Result<Vec<String>>;
}

/// [`RoleStore::members`]: `member` renews its membership of `group`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MembersOp<'a> {
    /// The group.
    pub group: &'a str,
    /// The member renewing.
    pub member: &'a str,
    /// How long the membership lasts from `now` (`<= 0`: it ends now).
    pub ttl_ms: Millis,
    /// Now.
    pub now: Millis,
}

/// How long after its expiry a membership row is deleted (by the next renewal in its group).
pub const MEMBERS_SWEPT_AFTER_MS: Millis = 60 * 60 * 1000;

/// A role held through [`RoleStore::try_hold`]: released when dropped.
#[async_trait]
pub trait Held: Send + Sync + std::fmt::Debug {
    /// Resolves when the hold was lost without being dropped (the connection that kept it
    /// broke): the role must stop at once, since another process may take it.
    async fn lost(&self);
}

/// A hold that is never lost (a store only this process uses).
#[derive(Debug, Default)]
pub struct HeldForever;

#[async_trait]
impl Held for HeldForever {
    async fn lost(&self) {
        std::future::pending::<()>().await;
    }
}
