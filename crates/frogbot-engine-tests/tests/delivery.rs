//! Nothing a thread is owed is lost (issue 18): a channel reply's delivery is a durable job
//! written with the reply; the turn's process retries transient failures (one delivery key on
//! every attempt), another process's worker posts what a process could not, a delivery failing
//! for good is buried where operators see it, and housekeeping tidies up — on SQLite
//! (`sqlite::…`) and PostgreSQL (`postgres::…`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptedModel, reply};
use frogbot_core::agent::{
    AllowAll, Channel, ChannelMessageOutcome, ChannelOutbox, Clock, Delivery, Engine, EngineConfig,
    ManualClock, ModelRequest, OutboxDelivery, SystemClock,
};
use frogbot_core::model::{
    Ack, PlatformUser, PrefixedIdentity, Thread, ThreadMessage, ThreadMessageMetadata, Transient,
    UiMessage,
};
use frogbot_core::store::DynStore;
use frogbot_testkit::{eventually, last_user};
use serde_json::json;

const PLATFORM: &str = "test";
const THREAD: &str = "T1";
const WAIT: Duration = Duration::from_secs(20);

/// How the next post fails.
#[derive(Clone, Copy, Debug)]
enum Fail {
    /// A 5xx: nothing posted, worth retrying.
    Transient,
    /// The post went through, the answer was lost (a reset): worth retrying, may be done.
    AfterPosting,
    /// Refused for good (e.g. the bot was removed from the channel).
    Permanent,
    /// Never answers.
    Hang,
}

/// A thread that keeps each piece once per delivery key (as Matrix's transaction ids and
/// Discord's nonces do), failing posts as told.
#[derive(Default)]
struct Thread1 {
    /// Texts shown, in order.
    posted: Mutex<Vec<String>>,
    /// Keys already posted.
    keys: Mutex<Vec<String>>,
    /// Each attempt: its key and attempt number.
    attempts: Mutex<Vec<(String, u32)>>,
    /// How the next posts fail (then they succeed) …
    next: Mutex<VecDeque<Fail>>,
    /// … or every post fails like this.
    always: Mutex<Option<Fail>>,
    /// The acknowledgements set: (platform message id, ack).
    acks: Mutex<Vec<(String, Ack)>>,
}

struct Outbox(Arc<Thread1>);

/// Not a `Draw`: none of the shared delivery loops (the defaults post with `post_reply`).
impl OutboxDelivery for Outbox {}

#[async_trait]
impl ChannelOutbox for Outbox {
    async fn ack(&self, _thread: &Thread, message_id: &str, ack: Ack) -> Result<(), BoxError> {
        self.0.acks.lock().unwrap().push((message_id.into(), ack));
        Ok(())
    }

    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        let key = format!("plain:{}", reply.id);
        self.deliver(thread, reply, &Delivery::new(key)).await?;
        Ok(())
    }

    async fn deliver(
        &self,
        _thread: &Thread,
        reply: &UiMessage,
        delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError> {
        let t = &self.0;
        // The platform id of what a key posts.
        let ids = vec![format!("id:{}", delivery.key)];
        let fail = {
            let always = *t.always.lock().unwrap();
            always.or_else(|| t.next.lock().unwrap().pop_front())
        };
        // Counted once its fate is read: a test that waits for an attempt sees it decided.
        t.attempts
            .lock()
            .unwrap()
            .push((delivery.key.clone(), delivery.attempt));
        let post = || {
            let mut keys = t.keys.lock().unwrap();
            if !keys.contains(&delivery.key) {
                keys.push(delivery.key.clone());
                t.posted.lock().unwrap().push(reply.text());
            }
        };
        match fail {
            None => {
                post();
                Ok(ids)
            }
            Some(Fail::Transient) => Err(Box::new(
                Transient::new("HTTP 503").retry_after(Duration::from_millis(20)),
            )),
            Some(Fail::AfterPosting) => {
                post();
                Err(Box::new(Transient::new("connection reset").maybe_done()))
            }
            Some(Fail::Permanent) => Err("channel_not_found".into()),
            Some(Fail::Hang) => std::future::pending().await,
        }
    }
}

fn config(grace: Duration) -> EngineConfig {
    EngineConfig {
        delivery_grace: grace,
        ..Default::default()
    }
}

fn engine(
    store: DynStore,
    thread: Arc<Thread1>,
    config: EngineConfig,
    clock: Arc<ManualClock>,
) -> Engine {
    engine_on(store, thread, config, clock)
}

fn engine_on(
    store: DynStore,
    thread: Arc<Thread1>,
    config: EngineConfig,
    clock: Arc<dyn Clock>,
) -> Engine {
    let model = ScriptedModel::new(|req: &ModelRequest| reply(&format!("re: {}", last_user(req))));
    Engine::with_clock(
        store,
        vec![frogbot_testkit::offer("main", model)],
        vec![],
        config,
        clock,
    )
    .with_channel(Channel {
        platform: PLATFORM.into(),
        questions: None,
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: Some(Arc::new(Outbox(thread))),
    })
}

fn said(id: &str, text: &str) -> ThreadMessage {
    ThreadMessage {
        id: id.into(),
        text: text.into(),
        author: PlatformUser {
            id: "ada".into(),
            name: Some("ada".into()),
            is_bot: false,
        },
        metadata: ThreadMessageMetadata {
            date_sent: "2026-12-01T00:00:00Z".into(),
        },
        reply_to: None,
        raw: json!(null),
        files: Vec::new(),
        mentions: Vec::new(),
    }
}

async fn say(engine: &Engine, id: &str, text: &str) {
    let outcome = engine
        .channels()
        .message(PLATFORM, THREAD, said(id, text))
        .await
        .unwrap();
    assert!(
        matches!(outcome, ChannelMessageOutcome::Sent(_)),
        "{outcome:?}"
    );
}

/// The delivery jobs still in the store (each claimed far in the future, so every one is seen,
/// then released as it was).
async fn deliver_jobs(store: &DynStore, now: i64) -> Vec<String> {
    let mut claimed = Vec::new();
    while let Some(job) = store
        .claim_job("probe", 1_000, now + 365 * 24 * 3_600_000)
        .await
        .unwrap()
    {
        claimed.push(job);
    }
    let mut keys = Vec::new();
    for job in claimed {
        store.defer_job(&job, job.run_at).await.unwrap();
        keys.push(job.key.clone().unwrap_or_default());
    }
    keys.retain(|k| k.starts_with("deliver:"));
    keys.sort();
    keys
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::at_system_time())
}

/// Transient failures (one after the post went through) are retried under one key until the
/// reply is posted — once — and its job is gone.
async fn a_reply_that_fails_to_post_is_retried_and_posted_once(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let thread = Arc::new(Thread1::default());
    thread
        .next
        .lock()
        .unwrap()
        .extend([Fail::Transient, Fail::AfterPosting, Fail::Transient]);
    let clock = clock();
    let e = engine(
        store.clone(),
        thread.clone(),
        config(Duration::from_secs(120)),
        clock.clone(),
    );
    say(&e, "m1", "hello").await;
    eventually("the reply is posted", WAIT, async || {
        thread.posted.lock().unwrap().len() == 1 && thread.next.lock().unwrap().is_empty()
    })
    .await;
    eventually("its job is gone", WAIT, async || {
        deliver_jobs(&store, clock.now()).await.is_empty()
    })
    .await;
    assert_eq!(
        *thread.posted.lock().unwrap(),
        vec!["re: hello".to_string()]
    );
    let attempts = thread.attempts.lock().unwrap().clone();
    assert_eq!(attempts.len(), 4, "{attempts:?}");
    assert!(
        attempts.iter().all(|(k, _)| k == &attempts[0].0),
        "one key on every attempt: {attempts:?}"
    );
    assert_eq!(
        attempts.iter().map(|(_, a)| *a).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    assert!(attempts[0].0.starts_with("deliver:"), "{attempts:?}");
}

/// A reply its process could not post (the platform was down past the process's retries) is
/// posted by a worker — of another process — once the grace is over, under the same key.
async fn a_reply_its_process_could_not_post_is_posted_by_a_worker(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let down = Arc::new(Thread1::default());
    *down.always.lock().unwrap() = Some(Fail::Transient);
    let clock = clock();
    let grace = Duration::from_millis(600);
    let a = engine(store.clone(), down.clone(), config(grace), clock.clone());
    say(&a, "m1", "hello").await;
    // Process A gives up after half the grace; the job stays.
    eventually("process A tried and left it to the job", WAIT, async || {
        !down.attempts.lock().unwrap().is_empty()
            && !deliver_jobs(&store, clock.now()).await.is_empty()
    })
    .await;
    let key = down.attempts.lock().unwrap()[0].0.clone();
    tokio::time::sleep(grace).await; // A's in-process budget is over (it stops retrying).
    let tried_by_a = down.attempts.lock().unwrap().len();
    assert!(down.posted.lock().unwrap().is_empty());
    // Not due before the grace is over.
    let up = Arc::new(Thread1::default());
    let b = engine(store.clone(), up.clone(), config(grace), clock.clone());
    b.ops().run_due_jobs("B").await.unwrap();
    assert!(
        up.attempts.lock().unwrap().is_empty(),
        "ran before its time"
    );
    clock.advance(grace.as_millis() as i64 + 1);
    eventually("process B's worker posts it", WAIT, async || {
        b.ops().run_due_jobs("B").await.unwrap();
        up.posted.lock().unwrap().len() == 1
    })
    .await;
    assert_eq!(*up.posted.lock().unwrap(), vec!["re: hello".to_string()]);
    let attempts = up.attempts.lock().unwrap().clone();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].0, key, "the same key as process A's attempts");
    assert!(
        attempts[0].1 >= 1,
        "a worker's attempt is a retry (look first)"
    );
    assert!(deliver_jobs(&store, clock.now()).await.is_empty());
    assert_eq!(down.attempts.lock().unwrap().len(), tried_by_a, "A stopped");
    assert!(b.ops().housekeep().await.unwrap().dead_jobs == 0);
}

/// A delivery refused for good is buried (an error log and a dead job operators see) — after
/// the process's attempt and one worker attempt; a platform that stays down is given up on
/// after the bounded attempts. Housekeeping reports dead jobs and purges them after their
/// retention.
async fn a_delivery_that_keeps_failing_is_buried_and_purged_later(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let thread = Arc::new(Thread1::default());
    *thread.always.lock().unwrap() = Some(Fail::Permanent);
    let clock = clock();
    let grace = Duration::from_millis(200);
    let e = engine(store.clone(), thread.clone(), config(grace), clock.clone());
    say(&e, "m1", "hello").await;
    eventually("the process tried once", WAIT, async || {
        thread.attempts.lock().unwrap().len() == 1
    })
    .await;
    clock.advance(1_000);
    eventually("a worker tries once more and buries it", WAIT, async || {
        e.ops().run_due_jobs("w").await.unwrap();
        e.ops().housekeep().await.unwrap().dead_jobs == 1
    })
    .await;
    assert_eq!(thread.attempts.lock().unwrap().len(), 2);
    let dead = store.dead_jobs(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert!(dead[0].key.as_deref().unwrap().starts_with("deliver:"));
    assert_eq!(dead[0].last_error.as_deref(), Some("channel_not_found"));

    // A platform that stays down: retried with backoff, then buried.
    *thread.always.lock().unwrap() = Some(Fail::Transient);
    say(&e, "m2", "again").await;
    eventually("the second reply's job exists", WAIT, async || {
        deliver_jobs(&store, clock.now()).await.len() == 1
    })
    .await;
    tokio::time::sleep(grace).await;
    let mut rounds = 0;
    while e.ops().housekeep().await.unwrap().dead_jobs < 2 {
        clock.advance(10 * 60_000);
        e.ops().run_due_jobs("w").await.unwrap();
        rounds += 1;
        assert!(rounds < 40, "never given up on");
    }
    assert!((10..=14).contains(&rounds), "bounded attempts: {rounds}");
    assert!(thread.posted.lock().unwrap().is_empty());

    // Past their retention, dead jobs go.
    clock.advance(8 * 24 * 3_600_000);
    let h = e.ops().housekeep().await.unwrap();
    assert_eq!(h.dead_jobs_purged, 2);
    assert_eq!(h.dead_jobs, 0);
}

/// A post that never answers is cut off at the process's budget (so it cannot overlap the
/// worker's attempt), and the worker posts the reply.
async fn a_hanging_post_is_cut_off_and_left_to_the_job(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let hung = Arc::new(Thread1::default());
    *hung.always.lock().unwrap() = Some(Fail::Hang);
    let clock = clock();
    let grace = Duration::from_millis(600);
    let a = engine(store.clone(), hung.clone(), config(grace), clock.clone());
    say(&a, "m1", "hello").await;
    eventually("the post is tried", WAIT, async || {
        !hung.attempts.lock().unwrap().is_empty()
    })
    .await;
    let up = Arc::new(Thread1::default());
    let b = engine(store.clone(), up.clone(), config(grace), clock.clone());
    clock.advance(grace.as_millis() as i64 + 1);
    eventually("the worker posts it", WAIT, async || {
        b.ops().run_due_jobs("B").await.unwrap();
        up.posted.lock().unwrap().len() == 1
    })
    .await;
    assert_eq!(
        hung.attempts.lock().unwrap().len(),
        1,
        "one cut-off attempt"
    );
    assert!(deliver_jobs(&store, clock.now()).await.is_empty());
}

/// Replies of one thread stay in order when the first one needs retries.
async fn replies_keep_their_order_through_retries(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let thread = Arc::new(Thread1::default());
    thread
        .next
        .lock()
        .unwrap()
        .extend([Fail::Transient, Fail::Transient]);
    let clock = clock();
    let e = engine(
        store.clone(),
        thread.clone(),
        config(Duration::from_secs(120)),
        clock,
    );
    say(&e, "m1", "one").await;
    say(&e, "m2", "two").await;
    // (A "queued" note may come between them: the second message can arrive mid-turn.)
    let replies = || {
        let posted = thread.posted.lock().unwrap().clone();
        posted
            .into_iter()
            .filter(|p| p.starts_with("re: "))
            .collect::<Vec<_>>()
    };
    eventually("both replies are posted", WAIT, async || {
        replies().len() == 2
    })
    .await;
    assert_eq!(
        replies(),
        vec!["re: one".to_string(), "re: two".to_string()]
    );
}

/// A reply given up to its job (the post hung past the process's budget) holds the thread's
/// next reply back: the next is not posted before it — its job posts it after, in order — and a
/// waiting job does not spend its attempts.
async fn a_reply_waits_for_the_one_owed_before_it(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let thread = Arc::new(Thread1::default());
    *thread.always.lock().unwrap() = Some(Fail::Hang);
    let clock = clock();
    let grace = Duration::from_millis(400);
    let e = engine(store.clone(), thread.clone(), config(grace), clock.clone());
    let done = |id: &'static str| {
        let thread = thread.clone();
        move || {
            thread
                .acks
                .lock()
                .unwrap()
                .iter()
                .any(|(m, a)| m == id && *a == Ack::Done)
        }
    };
    say(&e, "m1", "one").await;
    eventually("the first reply is given up to its job", WAIT, async || {
        done("m1")()
    })
    .await;
    say(&e, "m2", "two").await;
    eventually("the second turn is done", WAIT, async || done("m2")()).await;
    assert_eq!(
        thread.attempts.lock().unwrap().len(),
        1,
        "the second reply is not tried while the first is owed"
    );
    assert_eq!(deliver_jobs(&store, clock.now()).await.len(), 2);
    // The platform is back; the second job comes due first (a worker that finds it before the
    // first defers it, without counting an attempt).
    *thread.always.lock().unwrap() = None;
    clock.advance(grace.as_millis() as i64 + 1);
    let replies = || thread.posted.lock().unwrap().clone();
    eventually("a worker posts both", WAIT, async || {
        e.ops().run_due_jobs("w").await.unwrap();
        replies().len() == 2
    })
    .await;
    assert_eq!(replies(), ["re: one", "re: two"]);
    assert!(deliver_jobs(&store, clock.now()).await.is_empty());
    assert_eq!(store.dead_jobs(10).await.unwrap().len(), 0);
}

/// Housekeeping runs on a store with nothing to do (and the system clock) without error.
async fn housekeeping_on_an_empty_store_does_nothing(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let e = Engine::with_clock(
        store,
        vec![],
        vec![],
        EngineConfig::default(),
        Arc::new(SystemClock),
    );
    let h = e.ops().housekeep().await.unwrap();
    assert_eq!(
        (h.questions_purged, h.dead_jobs_purged, h.dead_jobs),
        (0, 0, 0)
    );
}

/// Jobs are pushed, not polled (issue 41): a reply's delivery job wakes an idle worker whose
/// poll is an hour away, at the job's run-at time — on PostgreSQL a worker of another process (a
/// second store handle: the notice goes through `LISTEN`/`NOTIFY`), on SQLite the worker of the
/// process that wrote it (its own wake-up). Twice: the second job is written while the worker
/// waits, so only a wake-up can run it in time.
async fn a_delivery_job_wakes_an_idle_worker_at_its_time(url: &str) {
    let pushes = url.starts_with("postgres");
    let store = frogbot_testkit::open_store(url).await;
    let thread = Arc::new(Thread1::default());
    let grace = Duration::from_millis(800);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let a = engine_on(store.clone(), thread.clone(), config(grace), clock.clone());
    let w = if pushes {
        let other = frogbot_testkit::open_store(url).await;
        engine_on(other, thread.clone(), config(grace), clock.clone())
    } else {
        a.clone()
    };
    let worker = w.spawn_worker(Duration::from_secs(3600));
    for (n, text) in ["hello", "again"].into_iter().enumerate() {
        // The turn's process cannot post it (its post hangs until cut off): its job is due
        // after the grace.
        *thread.always.lock().unwrap() = Some(Fail::Hang);
        let tried = thread.attempts.lock().unwrap().len();
        say(&a, &format!("m{n}"), text).await;
        eventually("the post is tried", WAIT, async || {
            thread.attempts.lock().unwrap().len() > tried
        })
        .await;
        *thread.always.lock().unwrap() = None;
        eventually("the worker posts it, woken", WAIT, async || {
            thread.posted.lock().unwrap().len() == n + 1
        })
        .await;
        assert_eq!(thread.posted.lock().unwrap()[n], format!("re: {text}"));
        // Its job is gone (else the next reply would wait for it).
        eventually("its job is done", WAIT, async || {
            store.live_jobs(10).await.unwrap().is_empty()
        })
        .await;
    }
    worker.abort();
    assert_eq!(thread.posted.lock().unwrap().len(), 2, "each posted once");
}

/// A job's due time is read on the engine's clock at every wake-up of the worker, not only as
/// the instant computed when its wait began: when the clock moves on by more than the time slept
/// (a stepped host clock, a new offset from the database's clock, a test's injected clock), the
/// job runs within the worker's `poll`, not at its 30 s fallback look (PostgreSQL, where jobs are
/// pushed). Found by the Discord adapter's fault test, whose fast-forwarded clock left delivery
/// retries waiting up to 30 s each.
async fn a_job_falls_due_when_the_engine_clock_moves_on(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let thread = Arc::new(Thread1::default());
    // A grace far longer than the test may wait: only the clock's jump makes the job due.
    let grace = Duration::from_secs(600);
    let clock = Arc::new(ManualClock::at_system_time());
    let engine = engine_on(store.clone(), thread.clone(), config(grace), clock.clone());
    let worker = engine.spawn_worker(Duration::from_millis(100));
    // The turn's process cannot post the reply (refused, for now): its job owes it.
    *thread.always.lock().unwrap() = Some(Fail::Permanent);
    say(&engine, "m0", "hello").await;
    // The turn's own attempt refused (not only its job written: under load the attempt can
    // come after the failure is lifted, and then posts the reply itself).
    eventually("its delivery job is left to retry", WAIT, async || {
        !thread.attempts.lock().unwrap().is_empty()
            && store
                .live_jobs(10)
                .await
                .unwrap()
                .iter()
                .any(|j| j.run_at > clock.now() + 5_000)
    })
    .await;
    *thread.always.lock().unwrap() = None;
    // Nothing runs while the job's time is ahead on the clock.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(thread.posted.lock().unwrap().is_empty());
    // The worker is waiting for the job's time, far away on its clock; the clock jumps.
    let due = store
        .live_jobs(10)
        .await
        .unwrap()
        .iter()
        .map(|j| j.run_at)
        .max()
        .unwrap();
    clock.set(due + 1_000);
    let jumped = std::time::Instant::now();
    eventually("the worker posts it", WAIT, async || {
        thread.posted.lock().unwrap().len() == 1
    })
    .await;
    assert!(
        jumped.elapsed() < Duration::from_secs(10),
        "posted {:?} after the clock moved on",
        jumped.elapsed()
    );
    assert_eq!(thread.posted.lock().unwrap()[0], "re: hello");
    worker.abort();
}

frogbot_testkit::backends!(
    a_job_falls_due_when_the_engine_clock_moves_on,
    a_reply_that_fails_to_post_is_retried_and_posted_once,
    a_delivery_job_wakes_an_idle_worker_at_its_time,
    a_reply_its_process_could_not_post_is_posted_by_a_worker,
    a_delivery_that_keeps_failing_is_buried_and_purged_later,
    replies_keep_their_order_through_retries,
    a_reply_waits_for_the_one_owed_before_it,
    a_hanging_post_is_cut_off_and_left_to_the_job,
    housekeeping_on_an_empty_store_does_nothing,
);
