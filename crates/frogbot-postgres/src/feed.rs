//! Pushed changes: every handle announces the chats its operations changed and the jobs they
//! scheduled, and one connection per handle (and its clones), listening on `frogbot_chats` and
//! `frogbot_jobs`, fans the notices out to every [`JobStore::changes`] receiver.
//!
//! Announcing is out of band: after an operation commits, its chat id (or its job's run-at time)
//! goes to a task that sends `pg_notify` on the `synchronous_commit = off` pool, many ids per
//! notice when operations come fast, and one job notice per batch (the earliest run-at time: a
//! worker woken by it reads the next due job from the store). Not from a trigger inside the operation's transaction: PostgreSQL serialises the commits
//! of transactions that notify (a database-wide lock held until after the commit is flushed),
//! which would queue every chat write behind every other one's disk flush. An announcement lost
//! with a process that dies right after its commit costs a listener only the fallback poll.
//!
//! The listening task starts with the first subscriber and stops with the last handle. When its
//! connection is lost it reconnects (sqlx's `PgListener`, with backoff here when the server is
//! down) and sends [`Change::Resync`], since notices sent meanwhile are gone: receivers read what
//! they watch again, as they would have by polling.
//!
//! [`JobStore::changes`]: frogbot_core::store::JobStore::changes

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use frogbot_core::model::{ChatId, Millis};
use frogbot_core::store::Change;
use sqlx::postgres::{PgListener, PgPool};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::{CancellationToken, DropGuard};

/// The channel chat announcements go to.
pub(crate) const CHANNEL: &str = "frogbot_chats";

/// The channel job announcements go to (the payload: the earliest run-at time, in ms).
pub(crate) const JOBS_CHANNEL: &str = "frogbot_jobs";

/// The most bytes of chat ids in one notice (PostgreSQL's limit is 8,000).
const PAYLOAD_MAX: usize = 7_000;

/// Notices a receiver may fall behind by before it sees `Lagged` (and reads everything again).
const CAPACITY: usize = 4096;

/// The longest wait between two attempts to listen while the server is unreachable.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// A store handle's feed: the sender, once listening started, the announcer, and the tasks'
/// stop.
#[derive(Default)]
pub(crate) struct Feed {
    tx: OnceLock<broadcast::Sender<Change>>,
    announce: OnceLock<mpsc::UnboundedSender<Notice>>,
    /// Cancels the tasks when the last handle (clone) of the store is dropped.
    stop: Mutex<Vec<DropGuard>>,
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("listening", &self.tx.get().is_some())
            .finish()
    }
}

impl Feed {
    /// A receiver of the pushed changes, starting the listening task on `pool` the first time
    /// (on the current tokio runtime).
    pub(crate) fn subscribe(&self, pool: &PgPool) -> broadcast::Receiver<Change> {
        // The first receiver exists before the listening task starts, so it cannot miss the
        // task's first `Resync` (regression: on a loaded machine the task connected and sent it
        // before `subscribe` returned, and a test waiting for it hung).
        let mut first = None;
        let tx = self.tx.get_or_init(|| {
            let (tx, rx) = broadcast::channel(CAPACITY);
            first = Some(rx);
            let stop = CancellationToken::new();
            tokio::spawn(listen(pool.clone(), tx.clone(), stop.clone()));
            self.stop.lock().expect("feed").push(stop.drop_guard());
            tx
        });
        first.unwrap_or_else(|| tx.subscribe())
    }

    /// Tells every listening process that `chat` changed (soon, with others, on `pool`). Outside
    /// a tokio runtime, nothing is announced.
    pub(crate) fn announce(&self, pool: &PgPool, chat: &ChatId) {
        self.send(pool, Notice::Chat(chat.clone()));
    }

    /// Tells every listening process that a job is due at `run_at` (soon, with others, on
    /// `pool`). Outside a tokio runtime, nothing is announced.
    pub(crate) fn announce_job(&self, pool: &PgPool, run_at: Millis) {
        self.send(pool, Notice::Job(run_at));
    }

    fn send(&self, pool: &PgPool, notice: Notice) {
        let tx = self.announce.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            if tokio::runtime::Handle::try_current().is_ok() {
                let stop = CancellationToken::new();
                tokio::spawn(announcer(pool.clone(), rx, stop.clone()));
                self.stop.lock().expect("feed").push(stop.drop_guard());
            }
            tx
        });
        let _ = tx.send(notice);
    }
}

/// What an operation announces.
enum Notice {
    Chat(ChatId),
    Job(Millis),
}

/// How long the announcer gathers announcements after the first before it notifies: under load
/// many operations' chats go out in one notice (one transaction, one wake-up of each listening
/// backend) instead of one each; alone, an announcement waits only this long.
const GATHER: Duration = Duration::from_millis(2);

/// The least time between the starts of two notices. A notice is a transaction of its own (a
/// transaction id, a commit, a wake-up of every listening backend and process): one every
/// [`GATHER`] under a steady stream of writes cost a sequential chat's turns 10–15 % on a
/// 2-core machine (`cargo bench -p frogbot-engine-tests --bench turns -- postgres`). Spaced, a
/// steady stream costs one notice per 10 ms, and a listener hears of a change at most this
/// much later; an isolated change still goes out after [`GATHER`].
const SPACING: Duration = Duration::from_millis(10);

/// When the announcer sends the notice whose first announcement came at `first`, the previous
/// notice having started at `last`: [`GATHER`] after the first, and not before [`SPACING`] after
/// the previous.
fn send_at(
    first: tokio::time::Instant,
    last: Option<tokio::time::Instant>,
) -> tokio::time::Instant {
    let gathered = first + GATHER;
    last.map_or(gathered, |last| gathered.max(last + SPACING))
}

/// Sends the announced chat ids, as many (distinct) per notice as have queued up until
/// [`send_at`], and the earliest of the announced job times, in one statement.
async fn announcer(pool: PgPool, mut rx: mpsc::UnboundedReceiver<Notice>, stop: CancellationToken) {
    let mut batch: Vec<ChatId> = Vec::new();
    let mut last: Option<tokio::time::Instant> = None;
    loop {
        let first = tokio::select! {
            () = stop.cancelled() => return,
            c = rx.recv() => match c {
                Some(c) => c,
                None => return,
            },
        };
        let mut job: Option<Millis> = None;
        let mut add = |n: Notice, batch: &mut Vec<ChatId>| match n {
            Notice::Chat(c) => {
                if !batch.contains(&c) {
                    batch.push(c);
                }
            }
            Notice::Job(at) => job = Some(job.map_or(at, |j| j.min(at))),
        };
        add(first, &mut batch);
        let at = send_at(tokio::time::Instant::now(), last);
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep_until(at) => {}
        }
        last = Some(tokio::time::Instant::now());
        while let Ok(c) = rx.try_recv() {
            add(c, &mut batch);
            if batch.len() >= 256 {
                break;
            }
        }
        let mut payloads: Vec<String> = Vec::new();
        let mut payload = String::new();
        for chat in batch.drain(..) {
            if !payload.is_empty() && payload.len() + chat.as_str().len() + 1 > PAYLOAD_MAX {
                payloads.push(std::mem::take(&mut payload));
            }
            if !payload.is_empty() {
                payload.push(',');
            }
            payload.push_str(chat.as_str());
        }
        if !payload.is_empty() {
            payloads.push(payload);
        }
        notify(&pool, job, &payloads).await;
    }
}

/// One statement (one transaction) with the job notice, if any, and the chat notices.
async fn notify(pool: &PgPool, job: Option<Millis>, chats: &[String]) {
    if job.is_none() && chats.is_empty() {
        return;
    }
    let result = sqlx::query(
        "SELECT pg_notify($1, j::text) FROM unnest($2::bigint[]) AS j \
         UNION ALL SELECT pg_notify($3, c) FROM unnest($4::text[]) AS c",
    )
    .bind(JOBS_CHANNEL)
    .bind(job.into_iter().collect::<Vec<_>>())
    .bind(CHANNEL)
    .bind(chats)
    .execute(pool)
    .await;
    if let Err(e) = result {
        // Listeners fall back to polling for what they miss.
        tracing::debug!(error = %e, "a change notice was not sent");
    }
}

/// Listens until `stop`: each chat notice a [`Change::Chat`], each job notice a [`Change::Job`],
/// each reconnection a [`Change::Resync`].
async fn listen(pool: PgPool, tx: broadcast::Sender<Change>, stop: CancellationToken) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let attempt = async {
            let mut listener = PgListener::connect_with(&pool).await?;
            listener.listen_all([CHANNEL, JOBS_CHANNEL]).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        let listener = tokio::select! {
            () = stop.cancelled() => return,
            l = attempt => l,
        };
        let mut listener = match listener {
            Ok(l) => l,
            Err(e) => {
                if pool.is_closed() {
                    return;
                }
                tracing::warn!(error = %e, "cannot listen for chat changes; retrying");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_millis(100);
        // Whatever changed before this connection listened is read again.
        let _ = tx.send(Change::Resync);
        loop {
            let next = tokio::select! {
                () = stop.cancelled() => return,
                n = listener.try_recv() => n,
            };
            match next {
                Ok(Some(n)) if n.channel() == JOBS_CHANNEL => match n.payload().parse() {
                    Ok(run_at) => {
                        let _ = tx.send(Change::Job { run_at });
                    }
                    Err(_) => {
                        tracing::warn!(payload = n.payload(), "a job notice without a time")
                    }
                },
                // Many chat ids per notice, comma-separated.
                Ok(Some(n)) => {
                    for id in n.payload().split(',') {
                        match ChatId::new(id) {
                            Ok(chat) => {
                                let _ = tx.send(Change::Chat(chat));
                            }
                            Err(_) => {
                                tracing::warn!(payload = id, "a chat notice without a chat id")
                            }
                        }
                    }
                }
                // The connection was lost and is back: notices may be missing.
                Ok(None) => {
                    let _ = tx.send(Change::Resync);
                }
                Err(e) => {
                    if pool.is_closed() {
                        return;
                    }
                    tracing::warn!(error = %e, "the chat-change listener failed; reconnecting");
                    break;
                }
            }
        }
    }
}
