//! `frogbot-sqlite`: FrogBot's embedded store — everything in one SQLite file, for a single server
//! (or a few `frogbot serve` processes on one machine sharing the file).
//!
//! [`SqliteStore`] implements [`frogbot_core::store::Store`], one file per part of the trait, named
//! as core's and the conformance suite's: `chats.rs`, `turns.rs`, `questions.rs`, `jobs.rs`,
//! `agent.rs`, `operations.rs` and `roles.rs`, each holding the part's `impl` (the hand-off of each
//! operation to a thread) and the part's operations as synchronous functions over a connection;
//! what several parts run is in `ops.rs` (errors, row mapping, statement helpers, message writes,
//! leases), the writer and readers in `writer.rs`, migrations in `migrate.rs`. Its design:
//!
//! - **One writer thread** owns the only read-write connection. A write method hands it the whole
//!   operation (a closure over the connection) and waits on a oneshot for the answer. The thread
//!   **group-commits**: it takes every operation already waiting (up to 256), runs them in one
//!   `BEGIN IMMEDIATE` transaction, each in a `SAVEPOINT` of its own (an operation that fails — a
//!   lost lease, a refused writer — is rolled back alone and answers its error), commits once, and
//!   only then answers. An answered operation is durable: WAL with `synchronous = FULL` — except a
//!   batch made only of step checkpoints, which commits with `synchronous = NORMAL` (no fsync: it
//!   survives the process dying, and the next batch with anything else fsyncs the WAL with it).
//! - **Readers beside it**: a few reader threads with read-only connections serve the reads, which
//!   WAL lets run while the writer commits. (`sqlite::memory:` has no second connection: its reads
//!   go to the writer.)
//! - Another process on the same file has its own writer: `BEGIN IMMEDIATE` waits for it up to the
//!   5-second busy timeout, then the batch fails with an error saying the database is locked.
//!
//! Why rusqlite and not sqlx: sqlx's SQLite driver runs each connection on a worker thread of its
//! own and pays a thread hand-off (~100 µs) for every statement, and the old store made ~25 of
//! those round trips per turn. Here an operation is one hand-off, its statements run back to back
//! on the writer thread from cached prepared statements, and one fsync covers a whole batch.
//!
//! What it must not do: decide any rule of its own (the rules are the trait's and the shared
//! functions' in `frogbot_core::store`), block an async task on SQLite (every call is handed to a
//! thread), answer a write before its commit, or panic on a database error (errors are
//! [`frogbot_core::StoreError::Unavailable`], [`frogbot_core::StoreError::Corrupt`] or
//! [`frogbot_core::StoreError::Migration`]).
//!
//! Writes are kept narrow because the writer thread is the bottleneck under load (every page an
//! operation dirties is copied into the statement journal of its savepoint and written to the WAL):
//! a lease fence is a read inside the writer's transaction, a reply rewritten at its place sets
//! only its body, version and time, and messages carry only the indexes something reads (migration
//! 0004). `ping` also checks that the database file is still the one opened (device and inode): a
//! file removed or replaced under a running store fails readiness. The store links the same
//! `libsqlite3-sys` as matrix-sdk's store: one SQLite in the binary.

mod agent;
mod chats;
mod files;
mod jobs;
mod migrate;
mod operations;
mod ops;
mod questions;
mod roles;
mod turns;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use frogbot_core::store::{Result, StoreError};

use ops::R;
use writer::{Counters, Pending, ReadJob, Readers, Task};

/// How long a writer waits for another process's write transaction.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// How many read-only connections (one thread each) serve reads.
const READERS: usize = 4;
/// Prepared statements cached per connection.
const STATEMENT_CACHE: usize = 128;

/// The writer's counters: how many transactions it committed and how many write operations they
/// carried (monotonic, since the store was opened). `operations / commits` is the group-commit
/// factor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Committed write transactions.
    pub commits: u64,
    /// Write operations committed in them.
    pub operations: u64,
}

/// FrogBot's SQLite store: see the [crate documentation](crate). Cloning shares the writer and
/// readers; the threads stop when the last clone is dropped.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    location: String,
    writer: Option<Sender<Box<dyn Pending>>>,
    writer_thread: Option<JoinHandle<()>>,
    readers: Option<Readers>,
    stats: Arc<Counters>,
    /// The database file and its identity when opened: `ping` checks it is still there.
    file: Option<(PathBuf, FileId)>,
}

/// What tells one file from another at a path (device and inode on Unix; elsewhere nothing).
type FileId = (u64, u64);

/// The identity of the file at `path`, `None` when there is none.
fn file_id(path: &Path) -> Option<FileId> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        Some((0, 0))
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("location", &self.inner.location)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the queues ends the threads once they have answered what was queued.
        self.writer.take();
        if let Some(readers) = &mut self.readers {
            readers.tx.take();
            for t in readers.threads.drain(..) {
                let _ = t.join();
            }
        }
        if let Some(t) = self.writer_thread.take() {
            let _ = t.join();
        }
    }
}

/// Where a URL points.
enum Target {
    Memory,
    File(PathBuf),
}

fn parse_url(url: &str) -> Result<Target> {
    let Some(rest) = url.strip_prefix("sqlite:") else {
        return Err(StoreError::UnsupportedDatabase {
            url: url.to_string(),
        });
    };
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, query),
        None => (rest, ""),
    };
    if path == ":memory:" || query.split('&').any(|p| p == "mode=memory") {
        return Ok(Target::Memory);
    }
    if path.is_empty() {
        return Err(StoreError::UnsupportedDatabase {
            url: url.to_string(),
        });
    }
    Ok(Target::File(PathBuf::from(path)))
}

fn open_writer(target: &Target, location: &str) -> Result<Connection> {
    let fail = |what: &str, e: rusqlite::Error| {
        StoreError::unavailable(format!("{location}: {what}: {e}"), e)
    };
    let mut conn = match target {
        Target::Memory => Connection::open_in_memory().map_err(|e| fail("open", e))?,
        Target::File(path) => Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| fail("open", e))?,
    };
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| fail("set the busy timeout", e))?;
    if matches!(target, Target::File(_)) {
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(|e| fail("switch to WAL", e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::unavailable_msg(format!(
                "{location}: the database stays in journal mode {mode:?}, not WAL"
            )));
        }
    }
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
        .map_err(|e| fail("set the pragmas", e))?;
    migrate::migrate(&mut conn, location)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

fn open_reader(path: &Path, location: &str) -> Result<Connection> {
    let fail = |what: &str, e: rusqlite::Error| {
        StoreError::unavailable(format!("{location}: {what}: {e}"), e)
    };
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| fail("open a reader", e))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| fail("set the busy timeout", e))?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

impl SqliteStore {
    /// Opens `sqlite://PATH` or `sqlite:PATH` (the file is created when missing; its directory
    /// must exist), or `sqlite::memory:` (a private in-memory database), and applies the
    /// migrations. A database that the earlier sqlx store migrated is adopted.
    pub async fn open(url: &str) -> Result<Self> {
        let target = parse_url(url)?;
        let location = match &target {
            Target::Memory => "sqlite::memory:".to_string(),
            Target::File(path) => path.display().to_string(),
        };
        let stats = Arc::new(Counters::default());
        let (tx, rx) = mpsc::channel::<Box<dyn Pending>>();
        let (ready_tx, ready_rx) = oneshot::channel();
        let writer_thread = {
            let (loc, stats) = (location.clone(), Arc::clone(&stats));
            let target = match &target {
                Target::Memory => Target::Memory,
                Target::File(p) => Target::File(p.clone()),
            };
            std::thread::Builder::new()
                .name("frogbot-sqlite-writer".into())
                .spawn(move || match open_writer(&target, &loc) {
                    Ok(conn) => {
                        let _ = ready_tx.send(Ok(()));
                        writer::writer_loop(conn, rx, stats);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                })
                .map_err(|e| {
                    StoreError::unavailable_msg(format!("{location}: start the writer thread: {e}"))
                })?
        };
        let mut inner = Inner {
            location: location.clone(),
            writer: Some(tx),
            writer_thread: Some(writer_thread),
            readers: None,
            stats,
            file: None,
        };
        ready_rx.await.map_err(|_| {
            StoreError::unavailable_msg(format!(
                "{location}: the writer thread stopped while opening"
            ))
        })??;
        if let Target::File(path) = &target {
            inner.file = file_id(path).map(|id| (path.clone(), id));
            let (tx, rx) = mpsc::channel::<ReadJob>();
            let rx = Arc::new(Mutex::new(rx));
            let mut readers = Readers {
                tx: Some(tx),
                threads: Vec::new(),
            };
            let mut waits = Vec::new();
            for i in 0..READERS {
                let (ready_tx, ready_rx) = oneshot::channel::<Result<()>>();
                let (path, loc, rx) = (path.clone(), location.clone(), Arc::clone(&rx));
                let t = std::thread::Builder::new()
                    .name(format!("frogbot-sqlite-reader-{i}"))
                    .spawn(move || match open_reader(&path, &loc) {
                        Ok(conn) => {
                            let _ = ready_tx.send(Ok(()));
                            writer::reader_loop(conn, rx);
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    })
                    .map_err(|e| {
                        StoreError::unavailable_msg(format!(
                            "{location}: start a reader thread: {e}"
                        ))
                    })?;
                readers.threads.push(t);
                waits.push(ready_rx);
            }
            inner.readers = Some(readers);
            for ready in waits {
                ready.await.map_err(|_| {
                    StoreError::unavailable_msg(format!(
                        "{location}: a reader thread stopped while opening"
                    ))
                })??;
            }
        }
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// Opens (creating when missing) the SQLite file at `path`.
    pub async fn open_path(path: impl AsRef<Path>) -> Result<Self> {
        Self::open(&format!("sqlite://{}", path.as_ref().display())).await
    }

    /// The writer's counters, for benchmarks and tests.
    pub fn stats(&self) -> WriterStats {
        WriterStats {
            commits: self.inner.stats.commits.load(Ordering::Relaxed),
            operations: self.inner.stats.operations.load(Ordering::Relaxed),
        }
    }

    /// The file the store keeps (or `sqlite::memory:`).
    pub fn location(&self) -> &str {
        &self.inner.location
    }

    /// The folder next to the database where larger files' chunks go (`{database}.files`);
    /// `None` for an in-memory database.
    pub fn files_dir(&self) -> Option<PathBuf> {
        self.inner.file.as_ref().map(|(path, _)| {
            let mut name = path.as_os_str().to_owned();
            name.push(".files");
            PathBuf::from(name)
        })
    }

    fn stopped(&self, what: &str) -> StoreError {
        StoreError::unavailable_msg(format!(
            "{what}: the SQLite store of {} is shut down",
            self.inner.location
        ))
    }

    /// Hands an operation to the writer thread and waits for its commit.
    async fn write<T, F>(&self, what: &'static str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> R<T> + Send + 'static,
    {
        self.on_writer(what, true, false, f).await
    }

    /// [`Self::write`] for an operation that may commit without waiting for the disk (a step
    /// checkpoint): see the writer loop.
    async fn write_relaxed<T, F>(&self, what: &'static str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> R<T> + Send + 'static,
    {
        self.on_writer(what, true, true, f).await
    }

    async fn on_writer<T, F>(
        &self,
        what: &'static str,
        write: bool,
        relaxed: bool,
        f: F,
    ) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> R<T> + Send + 'static,
    {
        let (task, rx) = Task::boxed(what, write, relaxed, f);
        let Some(tx) = &self.inner.writer else {
            return Err(self.stopped(what));
        };
        tx.send(task).map_err(|_| self.stopped(what))?;
        rx.await.map_err(|_| self.stopped(what))?
    }

    /// Runs a read on a reader thread (on the writer for an in-memory database).
    async fn read<T, F>(&self, what: &'static str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> R<T> + Send + 'static,
    {
        let Some(readers) = &self.inner.readers else {
            return self.on_writer(what, false, false, f).await;
        };
        let (tx, rx) = oneshot::channel();
        let job: ReadJob = Box::new(move |c: &Connection| {
            let _ = tx.send(writer::run_guarded(what, c, f));
        });
        let Some(queue) = &readers.tx else {
            return Err(self.stopped(what));
        };
        queue.send(job).map_err(|_| self.stopped(what))?;
        rx.await.map_err(|_| self.stopped(what))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_file_or_memory() {
        assert!(matches!(parse_url("sqlite::memory:"), Ok(Target::Memory)));
        assert!(matches!(
            parse_url("sqlite://x.db?mode=memory"),
            Ok(Target::Memory)
        ));
        for (url, path) in [
            ("sqlite:///tmp/a.db", "/tmp/a.db"),
            ("sqlite://data/a.db", "data/a.db"),
            ("sqlite:data/a.db", "data/a.db"),
            ("sqlite://data/a.db?mode=rwc", "data/a.db"),
        ] {
            match parse_url(url) {
                Ok(Target::File(p)) => assert_eq!(p, PathBuf::from(path), "{url}"),
                _ => panic!("{url} names a file"),
            }
        }
        assert!(matches!(
            parse_url("postgres://x"),
            Err(StoreError::UnsupportedDatabase { .. })
        ));
        assert!(matches!(
            parse_url("sqlite://"),
            Err(StoreError::UnsupportedDatabase { .. })
        ));
    }
}
