//! `frogbot-sqlite`: FrogBot's embedded store — everything in one SQLite file, for a single server
//! (or a few `frogbot serve` processes on one machine sharing the file).
//!
//! [`SqliteStore`] implements [`frogbot_core::store::Store`]. Its design:
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

mod migrate;
mod ops;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use frogbot_core::model::{ChatId, Millis, UserId};
use frogbot_core::store::*;
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

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    /// Also checks that the database file is still the one opened: a file removed or replaced
    /// under a running store would take every later write nowhere.
    async fn ping(&self) -> Result<()> {
        if let Some((path, id)) = &self.inner.file
            && file_id(path) != Some(*id)
        {
            return Err(StoreError::unavailable_msg(format!(
                "the database file {} was removed or replaced",
                path.display()
            )));
        }
        self.read("ping", ops::ping).await
    }

    async fn get_chat(&self, chat: &ChatId) -> Result<Option<ChatRow>> {
        let chat = chat.clone();
        self.read("get_chat", move |c| ops::get_chat(c, &chat))
            .await
    }

    async fn get_channel_chat(&self, platform: &str, thread: &str) -> Result<Option<ChatRow>> {
        let (platform, thread) = (platform.to_string(), thread.to_string());
        self.read("get_channel_chat", move |c| {
            ops::get_channel_chat(c, &platform, &thread)
        })
        .await
    }

    async fn list_chats(&self, owner: Option<&UserId>, limit: u32) -> Result<Vec<ChatRow>> {
        let owner = owner.cloned();
        self.read("list_chats", move |c| {
            ops::list_chats(c, owner.as_ref(), limit)
        })
        .await
    }

    async fn get_message(&self, chat: &ChatId, id: &str) -> Result<Option<StoredMessage>> {
        let (chat, id) = (chat.clone(), id.to_string());
        self.read("get_message", move |c| ops::get_message(c, &chat, &id))
            .await
    }

    async fn list_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
        let chat = chat.clone();
        self.read("list_messages", move |c| ops::list_messages(c, &chat))
            .await
    }

    async fn messages_since(&self, chat: &ChatId, version: i64) -> Result<ChatChanges> {
        let chat = chat.clone();
        self.read("messages_since", move |c| {
            ops::messages_since(c, &chat, version)
        })
        .await
    }

    async fn queued_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
        let chat = chat.clone();
        self.read("queued_messages", move |c| ops::queued_messages(c, &chat))
            .await
    }

    async fn expired_leases(&self, now: Millis, limit: u32) -> Result<Vec<ChatId>> {
        self.read("expired_leases", move |c| {
            ops::expired_leases(c, now, limit)
        })
        .await
    }

    async fn get_question(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        now: Millis,
    ) -> Result<Option<QuestionRow>> {
        let (chat, call) = (chat.clone(), tool_call_id.to_string());
        self.read("get_question", move |c| {
            ops::get_question(c, &chat, &call, now)
        })
        .await
    }

    async fn questions_of_message(
        &self,
        chat: &ChatId,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<QuestionRow>> {
        let (chat, id) = (chat.clone(), message_id.to_string());
        self.read("questions_of_message", move |c| {
            ops::questions_of_message(c, &chat, &id, now)
        })
        .await
    }

    async fn questions_by_platform_message(
        &self,
        platform: &str,
        message_id: &str,
        now: Millis,
    ) -> Result<Vec<QuestionRow>> {
        let (platform, id) = (platform.to_string(), message_id.to_string());
        self.read("questions_by_platform_message", move |c| {
            ops::questions_by_platform_message(c, &platform, &id, now)
        })
        .await
    }

    async fn get_job(&self, id: i64) -> Result<Option<Job>> {
        self.read("get_job", move |c| ops::get_job(c, id)).await
    }

    // ---- turns -----------------------------------------------------------------------------------

    async fn send(&self, op: &SendOp<'_>) -> Result<Sent> {
        let body = ops::message_body(op.message)?;
        let (chat, message, lease) = (op.chat.clone(), op.message.clone(), op.lease.clone());
        let (delivery, queue_if_busy) = (op.delivery, op.queue_if_busy);
        self.write("send", move |c| {
            let op = SendOp {
                chat: &chat,
                message: &message,
                delivery,
                lease: &lease,
                queue_if_busy,
            };
            ops::send(c, &op, &body)
        })
        .await
    }

    async fn checkpoint(&self, op: &CheckpointOp<'_>) -> Result<Checkpointed> {
        let body = ops::message_body(op.reply)?;
        let (lease, reply) = (op.lease.clone(), op.reply.clone());
        let (position, join_steers, now) = (op.position, op.join_steers, op.now);
        self.write_relaxed("checkpoint", move |c| {
            let op = CheckpointOp {
                lease: &lease,
                reply: &reply,
                position,
                join_steers,
                now,
            };
            ops::checkpoint(c, &op, &body)
        })
        .await
    }

    async fn await_answers(&self, op: &AwaitOp<'_>) -> Result<StoredMessage> {
        let body = ops::message_body(op.reply)?;
        let (lease, reply) = (op.lease.clone(), op.reply.clone());
        let (questions, job) = (op.questions.to_vec(), op.job.cloned());
        let delivery = op.delivery.cloned();
        let (position, now) = (op.position, op.now);
        self.write("await_answers", move |c| {
            let op = AwaitOp {
                lease: &lease,
                reply: &reply,
                position,
                questions: &questions,
                job: job.as_ref(),
                now,
                delivery: delivery.as_ref(),
            };
            ops::await_answers(c, &op, &body)
        })
        .await
    }

    async fn end_turn(&self, op: &EndTurnOp<'_>) -> Result<TurnEnded> {
        let body = op.reply.map(|(m, _)| ops::message_body(m)).transpose()?;
        let lease = op.lease.clone();
        let reply = op.reply.map(|(m, p)| (m.clone(), p));
        let job = match op.mode {
            EndMode::Next => None,
            EndMode::Handoff(job) => Some(job.clone()),
        };
        let now = op.now;
        let delivery = op.delivery.cloned();
        self.write("end_turn", move |c| {
            let op = EndTurnOp {
                lease: &lease,
                reply: reply.as_ref().map(|(m, p)| (m, *p)),
                mode: match &job {
                    None => EndMode::Next,
                    Some(job) => EndMode::Handoff(job),
                },
                now,
                delivery: delivery.as_ref(),
            };
            ops::end_turn(c, &op, body.as_deref())
        })
        .await
    }

    async fn take_chat(&self, chat: &ChatId, req: &LeaseRequest) -> Result<Option<Taken>> {
        let (chat, req) = (chat.clone(), req.clone());
        self.write("take_chat", move |c| ops::take_chat(c, &chat, &req))
            .await
    }

    async fn resume_turn(
        &self,
        chat: &ChatId,
        message_id: &str,
        req: &LeaseRequest,
    ) -> Result<Resume> {
        let (chat, id, req) = (chat.clone(), message_id.to_string(), req.clone());
        self.write("resume_turn", move |c| {
            ops::resume_turn(c, &chat, &id, &req)
        })
        .await
    }

    async fn renew_lease(&self, lease: &mut Lease, ttl_ms: Millis, now: Millis) -> Result<()> {
        let held = lease.clone();
        let expires_at = self
            .write("renew_lease", move |c| {
                ops::renew_lease(c, &held, ttl_ms, now)
            })
            .await?;
        lease.expires_at = expires_at;
        Ok(())
    }

    async fn expire_lease(&self, lease: &Lease, now: Millis) -> Result<()> {
        let lease = lease.clone();
        self.write("expire_lease", move |c| ops::expire_lease(c, &lease, now))
            .await
    }

    async fn edit_queued(
        &self,
        chat: &ChatId,
        id: &str,
        by: Option<&UserId>,
        edit: &QueuedEdit,
        now: Millis,
    ) -> Result<QueuedChange> {
        let (chat, id, by, edit) = (chat.clone(), id.to_string(), by.cloned(), edit.clone());
        self.write("edit_queued", move |c| {
            ops::edit_queued(c, &chat, &id, by.as_ref(), &edit, now)
        })
        .await
    }

    async fn delete_queued(
        &self,
        chat: &ChatId,
        id: &str,
        by: Option<&UserId>,
        now: Millis,
    ) -> Result<QueuedChange> {
        let (chat, id, by) = (chat.clone(), id.to_string(), by.cloned());
        self.write("delete_queued", move |c| {
            ops::delete_queued(c, &chat, &id, by.as_ref(), now)
        })
        .await
    }

    // ---- questions -------------------------------------------------------------------------------

    async fn insert_questions(&self, rows: &[NewQuestion], now: Millis) -> Result<()> {
        let rows = rows.to_vec();
        self.write("insert_questions", move |c| {
            ops::insert_questions(c, &rows, now)
        })
        .await
    }

    async fn mark_rendered(&self, op: &RenderedOp<'_>) -> Result<()> {
        let (chat, platform, calls) = (op.chat.clone(), op.platform.to_string(), op.calls.to_vec());
        let now = op.now;
        self.write("mark_rendered", move |c| {
            let op = RenderedOp {
                chat: &chat,
                platform: &platform,
                calls: &calls,
                now,
            };
            ops::mark_rendered(c, &op)
        })
        .await
    }

    async fn record_outcome(&self, op: &RecordOp<'_>) -> Result<Recorded> {
        let (chat, call, outcome) = (
            op.chat.clone(),
            op.tool_call_id.to_string(),
            op.outcome.clone(),
        );
        let actor = op.actor.cloned();
        let lock = op.lock.map(|l| (l.holder.to_string(), l.ttl_ms));
        let resume = op.resume.cloned();
        let (expected_revision, now) = (op.expected_revision, op.now);
        self.write("record_outcome", move |c| {
            let op = RecordOp {
                chat: &chat,
                tool_call_id: &call,
                outcome: &outcome,
                actor: actor.as_ref(),
                expected_revision,
                lock: lock.as_ref().map(|(holder, ttl_ms)| LockRequest {
                    holder,
                    ttl_ms: *ttl_ms,
                }),
                resume: resume.as_ref(),
                now,
            };
            ops::record_outcome(c, &op)
        })
        .await
    }

    async fn advance_question(&self, op: &AdvanceOp<'_>) -> Result<Advanced> {
        let (chat, call, state) = (
            op.chat.clone(),
            op.tool_call_id.to_string(),
            op.state.cloned(),
        );
        let (holder, ttl_ms) = (op.lock.holder.to_string(), op.lock.ttl_ms);
        let (expected_revision, now) = (op.expected_revision, op.now);
        self.write("advance_question", move |c| {
            let op = AdvanceOp {
                chat: &chat,
                tool_call_id: &call,
                expected_revision,
                state: state.as_ref(),
                lock: LockRequest {
                    holder: &holder,
                    ttl_ms,
                },
                now,
            };
            ops::advance_question(c, &op)
        })
        .await
    }

    async fn lock_question(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        holder: &str,
        ttl_ms: Millis,
        now: Millis,
    ) -> Result<Option<(QuestionLock, QuestionRow)>> {
        let (chat, call, holder) = (chat.clone(), tool_call_id.to_string(), holder.to_string());
        self.write("lock_question", move |c| {
            ops::lock_question(c, &chat, &call, &holder, ttl_ms, now)
        })
        .await
    }

    async fn update_question(&self, op: &UpdateQuestionOp<'_>) -> Result<QuestionRow> {
        let (lock, update) = (op.lock.clone(), op.update.clone());
        let (platform, job) = (op.link_platform.map(str::to_string), op.job.cloned());
        let (keep_lock, now) = (op.keep_lock, op.now);
        self.write("update_question", move |c| {
            let op = UpdateQuestionOp {
                lock: &lock,
                update: &update,
                link_platform: platform.as_deref(),
                job: job.as_ref(),
                keep_lock,
                now,
            };
            ops::update_question(c, &op)
        })
        .await
    }

    async fn unlock_question(&self, lock: &QuestionLock) -> Result<()> {
        let lock = lock.clone();
        self.write("unlock_question", move |c| ops::unlock_question(c, &lock))
            .await
    }

    async fn purge_expired(&self, now: Millis) -> Result<u64> {
        self.write("purge_expired", move |c| ops::purge_expired(c, now))
            .await
    }

    // ---- durable jobs ----------------------------------------------------------------------------

    async fn enqueue_job(&self, job: &NewJob) -> Result<i64> {
        let job = job.clone();
        self.write("enqueue_job", move |c| ops::enqueue_job(c, &job))
            .await
    }

    async fn claim_job(&self, worker: &str, claim_ms: Millis, now: Millis) -> Result<Option<Job>> {
        let worker = worker.to_string();
        self.write("claim_job", move |c| {
            ops::claim_job(c, &worker, claim_ms, now)
        })
        .await
    }

    async fn complete_job(&self, job: &Job) -> Result<bool> {
        let job = job.clone();
        self.write("complete_job", move |c| ops::complete_job(c, &job))
            .await
    }

    async fn retry_job(&self, job: &Job, run_at: Millis, error: &str) -> Result<bool> {
        let (job, error) = (job.clone(), error.to_string());
        self.write("retry_job", move |c| {
            ops::retry_job(c, &job, run_at, &error)
        })
        .await
    }

    async fn bury_job(&self, job: &Job, error: &str) -> Result<bool> {
        let (job, error) = (job.clone(), error.to_string());
        self.write("bury_job", move |c| ops::bury_job(c, &job, &error))
            .await
    }

    async fn delete_job(&self, key: &str) -> Result<bool> {
        let key = key.to_string();
        self.write("delete_job", move |c| ops::delete_job(c, &key))
            .await
    }

    async fn earlier_job(&self, key_prefix: &str, key: &str) -> Result<Option<Job>> {
        let (prefix, key) = (key_prefix.to_string(), key.to_string());
        self.read("earlier_job", move |c| ops::earlier_job(c, &prefix, &key))
            .await
    }

    async fn defer_job(&self, job: &Job, run_at: Millis) -> Result<bool> {
        let job = job.clone();
        self.write("defer_job", move |c| ops::defer_job(c, &job, run_at))
            .await
    }

    async fn dead_jobs(&self, limit: u32) -> Result<Vec<Job>> {
        self.read("dead_jobs", move |c| ops::dead_jobs(c, limit))
            .await
    }

    async fn purge_dead_jobs(&self, before: Millis) -> Result<u64> {
        self.write("purge_dead_jobs", move |c| ops::purge_dead_jobs(c, before))
            .await
    }

    // ---- operators ---------------------------------------------------------------------------

    async fn find_chats(&self, filter: &ChatFilter, now: Millis) -> Result<Vec<ChatRow>> {
        let filter = filter.clone();
        self.read("find_chats", move |c| ops::find_chats(c, &filter, now))
            .await
    }

    async fn live_jobs(&self, limit: u32) -> Result<Vec<Job>> {
        self.read("live_jobs", move |c| ops::live_jobs(c, limit))
            .await
    }

    async fn revive_job(&self, id: i64, now: Millis) -> Result<Option<Job>> {
        self.write("revive_job", move |c| ops::revive_job(c, id, now))
            .await
    }

    async fn backlog(&self, now: Millis) -> Result<Backlog> {
        self.read("backlog", move |c| ops::backlog(c, now)).await
    }

    async fn purgeable(&self, now: Millis, dead_before: Millis) -> Result<Purgeable> {
        self.read("purgeable", move |c| ops::purgeable(c, now, dead_before))
            .await
    }

    async fn bind_agent(&self, op: &BindAgentOp<'_>) -> Result<Bound> {
        let (chat, agent, now) = (op.chat.clone(), op.agent.to_owned(), op.now);
        let existing = op.existing;
        self.write("bind_agent", move |c| {
            ops::bind_agent(
                c,
                &BindAgentOp {
                    chat: &chat,
                    agent: &agent,
                    existing,
                    now,
                },
            )
        })
        .await
    }

    async fn post_message(&self, op: &PostMessageOp<'_>) -> Result<PostedMessage> {
        let body = ops::message_body(op.message)?;
        let (chat, message, job) = (op.chat.clone(), op.message.clone(), op.job.cloned());
        let (inbox, now) = (op.inbox, op.now);
        self.write("post_message", move |c| {
            let op = PostMessageOp {
                chat: &chat,
                message: &message,
                inbox,
                job: job.as_ref(),
                now,
            };
            ops::post_message(c, &op, &body)
        })
        .await
    }

    async fn update_message(&self, op: &UpdateMessageOp<'_>) -> Result<MessageUpdate> {
        let body = ops::message_body(op.message)?;
        let (chat, message, job) = (op.chat.clone(), op.message.clone(), op.job.cloned());
        let (expected_version, now) = (op.expected_version, op.now);
        self.write("update_message", move |c| {
            let op = UpdateMessageOp {
                chat: &chat,
                message: &message,
                expected_version,
                job: job.as_ref(),
                now,
            };
            ops::update_message(c, &op, &body)
        })
        .await
    }

    async fn take_inbox(&self, op: &InboxOp<'_>) -> Result<Vec<StoredMessage>> {
        let (agent, chat) = (op.agent.to_owned(), op.chat.cloned());
        let (limit, now) = (op.limit, op.now);
        self.write("take_inbox", move |c| {
            ops::take_inbox(
                c,
                &InboxOp {
                    agent: &agent,
                    chat: chat.as_ref(),
                    limit,
                    now,
                },
            )
        })
        .await
    }

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

    async fn members(
        &self,
        group: &str,
        member: &str,
        ttl_ms: Millis,
        now: Millis,
    ) -> Result<Vec<String>> {
        let (group, member) = (group.to_owned(), member.to_owned());
        self.write("members", move |c| {
            ops::members(c, &group, &member, ttl_ms, now)
        })
        .await
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
