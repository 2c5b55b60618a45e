//! The writer thread (group commit) and the reader threads.
//!
//! The writer owns the one read-write connection. It blocks for the first operation, drains what
//! else is already waiting (at most [`MAX_BATCH`]), and runs the batch in one `BEGIN IMMEDIATE`
//! transaction, each operation inside a `SAVEPOINT` of its own: an operation that fails is rolled
//! back to its savepoint alone. After the one `COMMIT` every caller is answered; when the commit
//! fails, every operation of the batch answers the error. So an answered operation is committed
//! (and, with `synchronous = FULL`, on disk).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use rusqlite::Connection;
use tokio::sync::oneshot;

use frogbot_core::store::{Result, StoreError};

use crate::ops::{R, storage_message};

/// At most this many operations share one transaction.
pub(crate) const MAX_BATCH: usize = 256;

/// The writer's counters (monotonic).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) commits: AtomicU64,
    pub(crate) operations: AtomicU64,
}

/// An operation waiting for the writer: run it, maybe fail it afterwards, then answer.
pub(crate) trait Pending: Send {
    /// Runs the operation; `true` when it succeeded (its savepoint is kept).
    fn run(&mut self, c: &Connection) -> bool;
    /// The batch was not committed: the answer becomes this error (an error answer stays).
    fn fail(&mut self, why: &str);
    /// Sends the answer (a caller that went away is ignored).
    fn answer(self: Box<Self>);
    /// Whether it is a write (counted in the stats).
    fn is_write(&self) -> bool;
    /// Whether the operation may commit without waiting for the disk (a step checkpoint).
    fn relaxed(&self) -> bool;
}

pub(crate) struct Task<T, F> {
    what: &'static str,
    f: Option<F>,
    out: Option<Result<T>>,
    tx: oneshot::Sender<Result<T>>,
    write: bool,
    relaxed: bool,
}

impl<T, F> Task<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> R<T> + Send + 'static,
{
    pub(crate) fn boxed(
        what: &'static str,
        write: bool,
        relaxed: bool,
        f: F,
    ) -> (Box<dyn Pending>, oneshot::Receiver<Result<T>>) {
        let (tx, rx) = oneshot::channel();
        let task = Task {
            what,
            f: Some(f),
            out: None,
            tx,
            write,
            relaxed,
        };
        (Box::new(task), rx)
    }
}

/// Runs an operation's closure, turning a panic into an error instead of killing the thread.
pub(crate) fn run_guarded<T>(
    what: &'static str,
    c: &Connection,
    f: impl FnOnce(&Connection) -> R<T>,
) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(|| f(c))) {
        Ok(r) => r.map_err(|e| e.into_error(what)),
        Err(_) => Err(StoreError::unavailable_msg(format!(
            "{what}: the operation panicked"
        ))),
    }
}

impl<T, F> Pending for Task<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> R<T> + Send + 'static,
{
    fn run(&mut self, c: &Connection) -> bool {
        let out = match self.f.take() {
            Some(f) => run_guarded(self.what, c, f),
            None => Err(StoreError::unavailable_msg(format!(
                "{}: run twice",
                self.what
            ))),
        };
        let ok = out.is_ok();
        self.out = Some(out);
        ok
    }

    fn fail(&mut self, why: &str) {
        if !matches!(self.out, Some(Err(_))) {
            self.out = Some(Err(StoreError::unavailable_msg(format!(
                "{}: {why}",
                self.what
            ))));
        }
    }

    fn answer(self: Box<Self>) {
        let this = *self;
        let out = this.out.unwrap_or_else(|| {
            Err(StoreError::unavailable_msg(format!(
                "{}: never ran",
                this.what
            )))
        });
        let _ = this.tx.send(out);
    }

    fn is_write(&self) -> bool {
        self.write
    }

    fn relaxed(&self) -> bool {
        self.relaxed
    }
}

/// The writer thread's loop: until every sender is gone.
pub(crate) fn writer_loop(conn: Connection, rx: Receiver<Box<dyn Pending>>, stats: Arc<Counters>) {
    let mut batch: Vec<Box<dyn Pending>> = Vec::with_capacity(MAX_BATCH);
    // The connection starts with `synchronous = FULL`.
    let mut full = true;
    while let Ok(first) = rx.recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        // A batch of step checkpoints only commits without an fsync (`synchronous = NORMAL`):
        // it survives the process dying, and the next batch with anything else (a user's message,
        // a turn's end, an answer) fsyncs the WAL with it. Every other batch waits for the disk.
        let want_full = batch.iter().any(|op| !op.relaxed());
        if want_full != full {
            let pragma = if want_full {
                "PRAGMA synchronous = FULL"
            } else {
                "PRAGMA synchronous = NORMAL"
            };
            match conn.execute_batch(pragma) {
                Ok(()) => full = want_full,
                Err(e) => tracing::warn!(error = %e, "could not switch SQLite's synchronous mode"),
            }
        }
        run_batch(&conn, &mut batch, &stats);
        for op in batch.drain(..) {
            op.answer();
        }
    }
    tracing::debug!("sqlite writer thread stops");
}

fn fail_all(batch: &mut [Box<dyn Pending>], why: &str) {
    for op in batch.iter_mut() {
        op.fail(why);
    }
}

/// Runs a cached statement that returns no rows (BEGIN, SAVEPOINT, RELEASE, COMMIT): parsed once
/// per connection.
fn control(c: &Connection, sql: &str) -> rusqlite::Result<()> {
    c.prepare_cached(sql)?.execute([]).map(drop)
}

fn run_batch(c: &Connection, batch: &mut [Box<dyn Pending>], stats: &Counters) {
    if let Err(e) = control(c, "BEGIN IMMEDIATE") {
        let why = storage_message("begin a write transaction", &e);
        fail_all(batch, &why);
        return;
    }
    // One operation alone needs no savepoint: if it fails, the transaction is rolled back.
    let alone = batch.len() == 1;
    for i in 0..batch.len() {
        if !alone && let Err(e) = control(c, "SAVEPOINT op") {
            rollback(c);
            fail_all(batch, &storage_message("open a savepoint", &e));
            return;
        }
        let ok = batch[i].run(c);
        if c.is_autocommit() {
            // SQLite rolled the whole transaction back (an I/O error, a full disk): nothing of the
            // batch is written.
            fail_all(
                batch,
                "SQLite rolled the write transaction back (see the first error of the batch)",
            );
            return;
        }
        if alone {
            if !ok {
                rollback(c);
                return;
            }
            continue;
        }
        let end = if ok {
            control(c, "RELEASE op")
        } else {
            control(c, "ROLLBACK TO op").and_then(|()| control(c, "RELEASE op"))
        };
        if let Err(e) = end {
            rollback(c);
            fail_all(batch, &storage_message("end a savepoint", &e));
            return;
        }
    }
    match control(c, "COMMIT") {
        Ok(()) => {
            let writes = batch.iter().filter(|op| op.is_write()).count() as u64;
            if writes > 0 {
                stats.commits.fetch_add(1, Ordering::Relaxed);
                stats.operations.fetch_add(writes, Ordering::Relaxed);
            }
        }
        Err(e) => {
            rollback(c);
            fail_all(batch, &storage_message("commit", &e));
        }
    }
}

fn rollback(c: &Connection) {
    if !c.is_autocommit()
        && let Err(e) = c.execute_batch("ROLLBACK")
    {
        tracing::error!(error = %e, "sqlite writer: rollback failed");
    }
}

// ---- readers -------------------------------------------------------------------------------------

pub(crate) type ReadJob = Box<dyn FnOnce(&Connection) + Send>;

/// Reader threads, each with a read-only connection, taking jobs from one queue.
#[derive(Debug)]
pub(crate) struct Readers {
    pub(crate) tx: Option<Sender<ReadJob>>,
    pub(crate) threads: Vec<JoinHandle<()>>,
}

pub(crate) fn reader_loop(conn: Connection, rx: Arc<Mutex<Receiver<ReadJob>>>) {
    loop {
        let job = {
            let rx = rx.lock().unwrap_or_else(PoisonError::into_inner);
            rx.recv()
        };
        match job {
            Ok(job) => job(&conn),
            Err(_) => break,
        }
    }
}
