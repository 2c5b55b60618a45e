//! [`ThreadExecutor`]: one ordered queue per thread, the way every adapter hands a platform's
//! deliveries to the engine — a thread's events in the order they arrived, threads in parallel.
//!
//! A queue is a tokio task that exists while its thread has work (and `idle` after it), so a
//! thousand quiet threads cost nothing. Each job runs to its end before the next starts; a job
//! that panics is logged and reported through its [`Done`], and the queue goes on.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tokio_util::task::TaskTracker;
use tracing::Instrument;

type Job = (BoxFuture<'static, ()>, oneshot::Sender<bool>);
type Queues = Mutex<HashMap<String, mpsc::UnboundedSender<Job>>>;

/// Runs jobs in order per key (a thread, or whatever a platform orders by), keys in parallel.
/// Cheap to clone: clones share the queues.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use frogbot_channel::ThreadExecutor;
///
/// let queues = ThreadExecutor::new(Duration::from_secs(30));
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let mut done = Vec::new();
/// for i in 0..3 {
///     let seen = seen.clone();
///     done.push(queues.push("thread-1", async move { seen.lock().unwrap().push(i) }).unwrap());
/// }
/// for d in done {
///     assert!(d.await.ran());
/// }
/// assert_eq!(*seen.lock().unwrap(), [0, 1, 2]);
/// # }
/// ```
#[derive(Clone)]
pub struct ThreadExecutor {
    inner: Arc<Inner>,
}

struct Inner {
    queues: Queues,
    idle: Duration,
    tasks: TaskTracker,
    closed: AtomicBool,
}

impl std::fmt::Debug for ThreadExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadExecutor")
            .field("queues", &self.len())
            .field("idle", &self.inner.idle)
            .finish()
    }
}

/// Resolves when a pushed job has run, with how it went. Dropping it changes nothing for the job.
#[derive(Debug)]
pub struct Done(oneshot::Receiver<bool>);

/// How a pushed job went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It ran to its end.
    Ran,
    /// It panicked (logged; its queue went on).
    Panicked,
    /// It never ran: its queue's task was dropped (the runtime shut down).
    Dropped,
}

impl Outcome {
    /// Whether the job ran to its end.
    pub fn ran(self) -> bool {
        self == Outcome::Ran
    }
}

impl Future for Done {
    type Output = Outcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        Pin::new(&mut self.0).poll(cx).map(|r| match r {
            Ok(true) => Outcome::Ran,
            Ok(false) => Outcome::Panicked,
            Err(_) => Outcome::Dropped,
        })
    }
}

impl ThreadExecutor {
    /// Queues whose task ends once its thread has had no work for `idle` (`Duration::ZERO`: as
    /// soon as its queue is empty).
    pub fn new(idle: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                queues: Mutex::default(),
                idle,
                tasks: TaskTracker::new(),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// Appends `job` to `key`'s queue (starting its task when it has none); `None` after
    /// [`ThreadExecutor::close`] (the job is dropped, not run).
    pub fn push(&self, key: &str, job: impl Future<Output = ()> + Send + 'static) -> Option<Done> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        let job: Job = (Box::pin(job), tx);
        // Sending under the lock: a task ending (which removes itself under the lock, once its
        // queue is empty) never drops a job sent to it.
        let mut queues = self.inner.queues.lock().unwrap_or_else(|p| p.into_inner());
        let job = match queues.get(key) {
            Some(queue) => match queue.send(job) {
                Ok(()) => return Some(Done(rx)),
                Err(mpsc::error::SendError(job)) => job,
            },
            None => job,
        };
        let (queue, jobs) = mpsc::unbounded_channel();
        let _ = queue.send(job);
        queues.insert(key.to_owned(), queue);
        drop(queues);
        let inner = self.inner.clone();
        self.inner
            .tasks
            .spawn(run(inner, key.to_owned(), jobs).in_current_span());
        Some(Done(rx))
    }

    /// How many keys have a queue task now.
    pub fn len(&self) -> usize {
        self.inner
            .queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// Whether no key has a queue task now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether [`ThreadExecutor::close`] was called (it takes no more jobs).
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Takes no more jobs and waits until every queued one has run.
    pub async fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner
            .queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
    }
}

/// One key's queue: its jobs one after the other, until it has been idle for `idle`.
async fn run(inner: Arc<Inner>, key: String, mut jobs: mpsc::UnboundedReceiver<Job>) {
    loop {
        let next = if inner.idle.is_zero() {
            jobs.try_recv().ok()
        } else {
            match tokio::time::timeout(inner.idle, jobs.recv()).await {
                Ok(Some(job)) => Some(job),
                Ok(None) => return,
                Err(_) => None,
            }
        };
        let (job, done) = match next {
            Some(job) => job,
            None => {
                // Idle: end, unless a job slipped in (pushes send under this lock).
                let mut queues = inner.queues.lock().unwrap_or_else(|p| p.into_inner());
                match jobs.try_recv() {
                    Ok(job) => job,
                    Err(_) => {
                        queues.remove(&key);
                        return;
                    }
                }
            }
        };
        let ran = AssertUnwindSafe(job).catch_unwind().await.is_ok();
        if !ran {
            tracing::error!(queue = %key, "a job of a thread's queue panicked");
        }
        let _ = done.send(ran);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_threads_jobs_run_in_order_and_threads_in_parallel() {
        let queues = ThreadExecutor::new(Duration::from_secs(30));
        let (gate_tx, gate_rx) = oneshot::channel::<()>();
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        // Thread a's first job waits for the gate; its second must wait behind it.
        let a1 = queues
            .push("a", async move {
                gate_rx.await.unwrap();
                l.lock().unwrap().push("a1");
            })
            .unwrap();
        let l = log.clone();
        let a2 = queues
            .push("a", async move { l.lock().unwrap().push("a2") })
            .unwrap();
        let l = log.clone();
        // Thread b runs meanwhile.
        assert!(
            queues
                .push("b", async move { l.lock().unwrap().push("b1") })
                .unwrap()
                .await
                .ran()
        );
        assert_eq!(*log.lock().unwrap(), ["b1"]);
        gate_tx.send(()).unwrap();
        assert!(a1.await.ran() && a2.await.ran());
        assert_eq!(*log.lock().unwrap(), ["b1", "a1", "a2"]);
    }

    #[tokio::test]
    async fn a_panicking_job_is_reported_and_its_queue_goes_on() {
        let queues = ThreadExecutor::new(Duration::from_secs(30));
        let bad = queues.push("t", async { panic!("boom") }).unwrap();
        let good = queues.push("t", async {}).unwrap();
        assert_eq!(bad.await, Outcome::Panicked);
        assert!(good.await.ran());
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_queue_ends_and_a_new_job_starts_another() {
        let queues = ThreadExecutor::new(Duration::from_secs(30));
        assert!(queues.push("t", async {}).unwrap().await.ran());
        assert_eq!(queues.len(), 1);
        tokio::time::sleep(Duration::from_secs(31)).await;
        // The task noticed its idle time (paused time auto-advances while all tasks wait).
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(queues.len(), 0);
        assert!(queues.push("t", async {}).unwrap().await.ran());
    }

    #[tokio::test]
    async fn with_no_idle_time_a_queue_ends_when_empty() {
        let queues = ThreadExecutor::new(Duration::ZERO);
        assert!(queues.push("t", async {}).unwrap().await.ran());
        // The queue's task removes itself right after reporting the job done.
        for _ in 0..100 {
            if queues.is_empty() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(queues.is_empty());
    }

    #[tokio::test]
    async fn close_runs_what_was_queued_and_takes_nothing_more() {
        let queues = ThreadExecutor::new(Duration::from_secs(30));
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let done = queues
            .push("t", async move {
                tokio::task::yield_now().await;
                r.store(true, Ordering::SeqCst);
            })
            .unwrap();
        queues.close().await;
        assert!(ran.load(Ordering::SeqCst));
        assert!(done.await.ran());
        assert!(queues.push("t", async {}).is_none());
    }
}
