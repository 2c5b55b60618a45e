//! `frogbot-postgres`: FrogBot's PostgreSQL store, [`PostgresStore`], an implementation of
//! [`frogbot_core::store::Store`] over sqlx.
//!
//! What it is for: many FrogBot processes, on many machines, sharing the same chats. Every rule
//! that two processes must agree on — one turn per chat (the lease and its fencing token), who may
//! write a chat, the queue and steers, the first outcome of a question, one worker per job — is
//! decided inside the database, in the operation's own transaction, at PostgreSQL's default
//! isolation (READ COMMITTED).
//!
//! What it must not do: read a clock (time comes from the caller), keep state of its own between
//! calls beyond the connection pool, leave an operation half done (each write method is one
//! transaction: a method that returns an error changed nothing), let a statement's snapshot decide
//! something that a concurrent commit changed (see below), or put the URL's password in an error.
//!
//! How operations keep their round trips down:
//! - Every operation is one statement where one statement can do it: data-modifying CTEs and
//!   `RETURNING` create or open the chat, take the lease and insert the message of a `send`
//!   together; fence, save the reply and release or promote in an `end_turn`; record an outcome
//!   and return the record either way; claim a job with `FOR UPDATE SKIP LOCKED`. Statements are
//!   prepared once per connection, and a pooled connection is not pinged before use (only one idle
//!   for 10 s), so such a call is one network round trip.
//! - A statement sees one snapshot, taken when it starts, and a row it locks may have changed
//!   since. Where a decision rests on more than the locked row (is anything queued, the next turn
//!   position, the messages of the turn to mark interrupted), the statement is a compare-and-swap:
//!   it writes the chat only if the chat row it locks still has the version (and lease) its snapshot
//!   read. Every write of a message raises the chat's version under the chat row's lock, so an
//!   unchanged version proves the snapshot's messages current. When the swap fails (a concurrent
//!   write got in) the operation runs again the careful way: one transaction that locks the chat row
//!   first (`SELECT … FOR UPDATE`), then reads and writes in later statements whose snapshots see
//!   every commit made before the lock. A `send` racing an `end_turn` can therefore never leave a
//!   message queued behind a released lease.
//! - Rare paths (taking over an expired lease, which marks the interrupted turn with
//!   [`frogbot_core::store::interrupted_reply`]; refusals) take the careful way directly, and apply
//!   the shared rules ([`frogbot_core::store::check_writer`],
//!   [`frogbot_core::store::steer_or_queue`]) in Rust on the locked row.
//!
//! In round trips: every read, `send` (create, start, queue or steer), `checkpoint`,
//! `await_answers`, `end_turn`, `take_chat` of a free lease, `resume_turn`, `renew_lease`,
//! `expire_lease`, `edit_queued`, `delete_queued` and every question and job operation take one.
//! The careful way takes `BEGIN`, the lock, one to five statements and `COMMIT`; `record_outcome`
//! and `advance_question` read the record once more when they lost a race, `complete_job` releases
//! the claim in a second statement when the job was re-enqueued while the statement ran.
//!
//! The files are SQLite's: one per part of the trait, named as core's and the conformance
//! suite's (`chats.rs`, `turns.rs`, `questions.rs`, `jobs.rs`, `agent.rs`, `operations.rs`,
//! `roles.rs`), each holding the part's `impl`, its statements and its careful paths; what several
//! parts run is in `ops.rs` (locking or creating a chat, saving a message, enqueueing a job,
//! `resume_turn`'s statement, the announcements), row mapping in `rows.rs`, the change feed in
//! `feed.rs`.

mod agent;
mod chats;
mod feed;
mod files;
mod jobs;
mod operations;
mod ops;
mod questions;
mod roles;
mod rows;
mod turns;

use std::time::Duration;

use frogbot_core::store::{Result, StoreError};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

/// A pooled connection idle this long is pinged before use (a dead one is replaced).
const IDLE_CHECK_AFTER: Duration = Duration::from_secs(10);

/// How [`PostgresStore::open_with`] sizes and waits on its connection pool.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// The most connections this handle opens (default 16).
    pub max_connections: u32,
    /// How long an operation waits for a connection before failing with
    /// [`StoreError::Unavailable`] (default 10 s).
    pub acquire_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(10),
        }
    }
}

/// The PostgreSQL store: a connection pool on one database that many processes share.
#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// Connections with `synchronous_commit = off`, for step checkpoints: such a commit survives
    /// the FrogBot process dying (the server has it) without waiting for the server's disk; the
    /// next synchronous commit (the turn's end) flushes it with everything before it.
    relaxed: PgPool,
    /// `host:port/database`, for error messages (never the password).
    target: String,
    /// The URL's password, scrubbed from any error message that might echo it.
    password: Option<String>,
    acquire_timeout: Duration,
    /// Tests only: every operation takes the careful (lock-first) way.
    careful_only: bool,
    /// The pushed changes (`LISTEN frogbot_chats`), started by the first [`JobStore::changes`].
    ///
    /// [`JobStore::changes`]: frogbot_core::store::JobStore::changes
    feed: std::sync::Arc<feed::Feed>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to `postgres://…` with [`StoreOptions::default`] and applies the migrations.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the URL is malformed or the server cannot be reached,
    /// [`StoreError::Migration`] when a migration fails.
    pub async fn open(url: &str) -> Result<Self> {
        Self::open_with(url, StoreOptions::default()).await
    }

    /// Connects with the given pool options and applies the migrations.
    ///
    /// # Errors
    /// As [`PostgresStore::open`].
    pub async fn open_with(url: &str, options: StoreOptions) -> Result<Self> {
        let password = url_password(url);
        let scrub = |msg: String| scrub(msg, password.as_deref());
        let connect: PgConnectOptions = url.parse().map_err(|e: sqlx::Error| {
            StoreError::unavailable_msg(scrub(format!("bad PostgreSQL URL: {e}")))
        })?;
        let target = format!(
            "{}:{}/{}",
            connect.get_host(),
            connect.get_port(),
            connect.get_database().unwrap_or("")
        );
        let pool = pool_options(options.max_connections, options.acquire_timeout)
            .connect_lazy_with(connect.clone());
        let relaxed = pool_options(
            options.max_connections.div_ceil(2).max(1),
            options.acquire_timeout,
        )
        .connect_lazy_with(connect.options([("synchronous_commit", "off")]));
        let store = Self {
            pool,
            relaxed,
            target,
            password,
            acquire_timeout: options.acquire_timeout,
            careful_only: false,
            feed: Default::default(),
        };
        sqlx::migrate!("./migrations")
            .run(&store.pool)
            .await
            .map_err(|e| match e {
                // Reaching the server, not a migration, failed.
                sqlx::migrate::MigrateError::Execute(e) if is_connection_error(&e) => {
                    store.storage(e)
                }
                e => StoreError::Migration {
                    message: store.scrub(e.to_string()),
                    source: None,
                },
            })?;
        Ok(store)
    }

    /// The connection pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes the pool's connections (the handle answers [`StoreError::Unavailable`] afterwards).
    pub async fn close(&self) {
        self.pool.close().await;
        self.relaxed.close().await;
    }

    /// Tests only: a handle whose every operation takes the careful, lock-first way, so that path
    /// runs the conformance suite too.
    #[doc(hidden)]
    pub fn careful_only(mut self) -> Self {
        self.careful_only = true;
        self
    }

    fn scrub(&self, msg: String) -> String {
        scrub(msg, self.password.as_deref())
    }

    /// A driver error as the store reports it: [`StoreError::Unavailable`] with a sentence naming what
    /// failed and where, or [`StoreError::Corrupt`] for a value that does not decode.
    pub(crate) fn storage(&self, e: sqlx::Error) -> StoreError {
        let t = &self.target;
        let msg = match &e {
            sqlx::Error::Io(e) => format!("cannot talk to the PostgreSQL server at {t}: {e}"),
            sqlx::Error::PoolTimedOut => format!(
                "no connection to the PostgreSQL server at {t} within {} s (is it running and \
                 reachable, or are all connections busy?)",
                self.acquire_timeout.as_secs_f32()
            ),
            sqlx::Error::PoolClosed => format!("the connection pool for {t} is closed"),
            sqlx::Error::Tls(e) => format!("TLS with the PostgreSQL server at {t} failed: {e}"),
            sqlx::Error::Protocol(e) => {
                format!("the connection to the PostgreSQL server at {t} broke: {e}")
            }
            sqlx::Error::Database(e) if e.constraint() == Some("chats_by_channel") => {
                return StoreError::Conflict {
                    message: "this channel thread already has a chat under another id".into(),
                };
            }
            sqlx::Error::Database(e) => {
                let code = e.code().map(|c| c.to_string()).unwrap_or_default();
                match code.as_str() {
                    // admin_shutdown (also a terminated backend), crash_shutdown
                    "57P01" | "57P02" => format!(
                        "the PostgreSQL server at {t} closed the connection: {}",
                        e.message()
                    ),
                    // cannot_connect_now
                    "57P03" => format!(
                        "the PostgreSQL server at {t} is starting or stopping: {}",
                        e.message()
                    ),
                    // invalid_catalog_name
                    "3D000" => format!("the PostgreSQL database at {t} is gone: {}", e.message()),
                    "28P01" | "28000" => {
                        format!("PostgreSQL at {t} refused the login: {}", e.message())
                    }
                    _ => format!(
                        "PostgreSQL at {t} failed the operation: {} (SQLSTATE {code})",
                        e.message()
                    ),
                }
            }
            sqlx::Error::ColumnDecode { index, source } => {
                let what = format!("column {index}: {source}");
                return StoreError::corrupt(what, e);
            }
            sqlx::Error::Decode(d) => {
                let what = d.to_string();
                return StoreError::corrupt(what, e);
            }
            e => format!("PostgreSQL at {t}: {e}"),
        };
        // The driver's error is kept as the source, except a configuration error (it may
        // quote the URL, password and all).
        match e {
            sqlx::Error::Configuration(_) => StoreError::unavailable_msg(self.scrub(msg)),
            e => StoreError::unavailable(self.scrub(msg), e),
        }
    }
}

/// Whether an error is about reaching the server rather than about a statement.
fn is_connection_error(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::Configuration(_) => true,
        sqlx::Error::Database(e) => e
            .code()
            .is_some_and(|c| ["08", "28", "3D", "57"].iter().any(|p| c.starts_with(p))),
        _ => false,
    }
}

/// The password of a `postgres://user:password@host/…` URL, percent-decoded as the driver uses it.
fn url_password(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    let userinfo = authority.rsplit_once('@')?.0;
    let raw = userinfo.split_once(':')?.1;
    if raw.is_empty() {
        return None;
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && bytes[i + 1].is_ascii_hexdigit()
            && bytes[i + 2].is_ascii_hexdigit()
            && let Ok(b) = u8::from_str_radix(&raw[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

fn scrub(msg: String, password: Option<&str>) -> String {
    match password {
        Some(p) if !p.is_empty() => msg.replace(p, "***"),
        _ => msg,
    }
}

/// The options of both pools. sqlx's default pings every connection it hands out: a round trip
/// before every operation. Only a connection idle long enough to have been cut is checked.
fn pool_options(max_connections: u32, acquire_timeout: Duration) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for < IDLE_CHECK_AFTER {
                    return Ok(true);
                }
                Ok(sqlx::Connection::ping(conn).await.is_ok())
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_found_and_scrubbed() {
        assert_eq!(
            url_password("postgres://u:s3cr%40t@h:5432/db").as_deref(),
            Some("s3cr@t")
        );
        assert_eq!(url_password("postgres://u@h/db"), None);
        assert_eq!(url_password("postgres://h/db"), None);
        assert_eq!(
            scrub("x s3cr@t y".into(), Some("s3cr@t")),
            "x *** y".to_string()
        );
    }
}
