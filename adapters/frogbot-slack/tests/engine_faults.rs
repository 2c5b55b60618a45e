//! Nothing owed is lost, end to end (issue 18): FrogBot's engine (SQLite, and PostgreSQL when it
//! is installed) with the Slack adapter in HTTP mode against the fake Slack, which fails 20 % of
//! its write calls (500, 429 with `Retry-After`, no answer until the client times out, the
//! connection reset after the call WAS carried out), the engine's worker running and a short
//! `delivery_grace` (so replies the turn's process cannot post in time are posted by the worker).
//! Many people write at once, each in a thread of their own: a mention, then a reply in the
//! thread once the first is answered; some replies are long enough for several messages.
//!
//! At the end (once every delivery job is gone): each person's messages are stored and answered,
//! and each thread holds every piece of every stored reply exactly once, each reply's pieces in
//! order, and the replies of one thread in the order of their turns (a reply its process left
//! to the worker holds the next one back; its job posts it after).
//!
//! Once every conversation is answered, the engine's clock is moved forward (2 s every 200 ms)
//! so the worker's retries (10 s, 20 s, 40 s … apart) do not make the run long. The fault seed is
//! `FROGBOT_FAULT_SEED` (18 by default); `FROGBOT_FAULT_LOG=1` prints the engine's warnings.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptedModel, reply};
use frogbot_core::agent::{
    ChannelSettings, Clock, Delivery, Engine, EngineConfig, ModelRequest, channel_chat_id,
    channel_message_id,
};
use frogbot_core::model::{ChatId, Role};
use frogbot_core::store::{DynStore, NewJob};
use frogbot_model::faults::FaultPlan;
use frogbot_slack::PLATFORM;
use frogbot_slack::channel::outbox::MAX_REPLY_CHARS;
use frogbot_slack::testing::{BOT_USER, FakeSlack, Signature};
use frogbot_testkit::last_user;
use serde_json::json;

/// Conversations (threads), and how many run at once.
const CONVERSATIONS: usize = 250;
const IN_FLIGHT: usize = 20;
/// The fraction of write calls that fail.
const FAULTS: f64 = 0.2;
const WAIT: Duration = Duration::from_secs(120);

/// The seed of the fault plan: `FROGBOT_FAULT_SEED`, else 18.
fn seed() -> u64 {
    std::env::var("FROGBOT_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(18)
}

/// Log lines (the engine's warnings), to count the deliveries its worker took over.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logs() -> Logs {
    static LOGS: std::sync::OnceLock<Logs> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        let writer = logs.clone();
        tracing_subscriber::fmt()
            .with_env_filter("frogbot_core=warn")
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .init();
        logs
    })
    .clone()
}

impl Logs {
    /// How many lines containing `what` name one of `chats`.
    fn count(&self, what: &str, chats: &HashSet<String>) -> usize {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter(|l| l.contains(what))
            .filter(|l| {
                l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                    .any(|w| chats.contains(w))
            })
            .count()
    }
}

/// The tag of a person's message (`c12m0`: conversation 12, its first message); `long` asks
/// for a reply of several messages.
fn tag(conversation: usize, message: usize) -> String {
    format!("c{conversation}m{message}")
}

/// Answers each message with its tag; a message saying `long` gets three paragraphs of about
/// 35,000 characters (three Slack messages).
fn model() -> ScriptedModel {
    ScriptedModel::new(|req: &ModelRequest| {
        let said = last_user(req);
        let tag = said
            .split_whitespace()
            .find(|w| w.starts_with('c') && w.contains('m'))
            .unwrap_or("?");
        if said.contains("long") {
            let text = (0..3)
                .map(|p| format!("re {tag} piece {p}: {}", "frog ".repeat(7_000)))
                .collect::<Vec<_>>()
                .join("\n\n");
            return reply(&text);
        }
        reply(&format!("re {tag}"))
    })
}

/// One person's thread.
struct Conversation {
    /// `channel:root_ts`.
    thread: String,
    chat: ChatId,
    /// The stored ids of the person's messages, with their tags.
    said: Vec<(String, String)>,
}

/// Whether `said` (a stored message id) is stored and followed by a reply naming `tag`.
async fn answered(store: &DynStore, chat: &ChatId, said: &str, tag: &str) -> bool {
    let Ok(messages) = store.list_messages(chat).await else {
        return false;
    };
    let Some(at) = messages.iter().position(|m| m.message.id == said) else {
        return false;
    };
    messages[at + 1..].iter().any(|m| {
        m.message.role == Role::Assistant && m.message.text().starts_with(&format!("re {tag}"))
    })
}

/// Waits (polling) until `said` is stored and answered.
async fn wait_answered(store: &DynStore, chat: &ChatId, said: &str, tag: &str) {
    let deadline = Instant::now() + WAIT;
    while !answered(store, chat, said, tag).await {
        assert!(Instant::now() < deadline, "{tag} not answered in {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The delivery keys of the pieces the stored replies of `chat` owe its thread, in order.
async fn owed(store: &DynStore, chat: &ChatId) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in store
        .list_messages(chat)
        .await
        .expect("the chat's messages")
    {
        let reply = m.message;
        if reply.role != Role::Assistant {
            continue;
        }
        assert!(reply.metadata.error.is_none(), "a failed turn: {reply:?}");
        let d = Delivery::new(format!("deliver:{chat}:{}:0", reply.id));
        for (i, piece) in frogbot_slack::format::messages(&reply.text(), MAX_REPLY_CHARS)
            .into_iter()
            .enumerate()
        {
            out.push((d.piece_key(i), piece));
        }
    }
    out
}

/// The system clock, which the test can move forward: the worker's retries of a delivery wait
/// 10 s, 20 s, 40 s … of the engine's clock; once every conversation is answered the test
/// fast-forwards them (2 s of the engine's clock every 200 ms) to keep its time short.
#[derive(Debug, Default)]
struct FastForward(std::sync::atomic::AtomicI64);

impl FastForward {
    fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for FastForward {
    fn now(&self) -> frogbot_core::model::Millis {
        frogbot_core::model::now_millis() + self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The delivery jobs left in the store among `ids` (`None`: every job id up to a probe job's):
/// their ids and keys.
async fn pending_deliveries(store: &DynStore, ids: Option<Vec<i64>>) -> Vec<(i64, String)> {
    let ids = match ids {
        Some(ids) => ids,
        None => {
            let far = frogbot_core::model::now_millis() + 365 * 24 * 3_600_000;
            let last = store
                .enqueue_job(&NewJob {
                    kind: "engine-faults-probe".into(),
                    key: None,
                    payload: json!({}),
                    run_at: far,
                })
                .await
                .expect("a probe job");
            (1..last).collect()
        }
    };
    let mut left = Vec::new();
    for id in ids {
        if let Some(job) = store.get_job(id).await.expect("a job")
            && !job.dead
            && let Some(key) = job.key.filter(|k| k.starts_with("deliver:"))
        {
            left.push((id, key));
        }
    }
    left
}

/// Posts the Events API delivery of `event` to the app until it is taken (a `503` asks to try
/// again, as Slack would).
async fn push(fake: &FakeSlack, base: &str, event: serde_json::Value) {
    let body = fake.event_callback(event);
    for retry in 0.. {
        let res = fake
            .post_event(base, &body, Signature::Good, (retry > 0).then_some(retry))
            .await;
        if res.status() == 200 {
            return;
        }
        assert_eq!(res.status(), 503, "the app refused a delivery");
        assert!(retry < 50, "the app keeps refusing a delivery");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One person's conversation: a mention in channel `C<n>`, then once it is answered a reply in
/// the thread.
async fn converse(
    prefix: &'static str,
    n: usize,
    fake: FakeSlack,
    base: Arc<str>,
    store: DynStore,
) -> Conversation {
    let channel = format!("{prefix}{n:04}");
    let user = format!("U{n:04}");
    let long = if n.is_multiple_of(10) { " long" } else { "" };
    let first = tag(n, 0);
    let root = fake.user_message(
        &channel,
        None,
        &user,
        &format!("<@{BOT_USER}> {first}{long} please"),
    );
    let thread = root.id();
    let chat = channel_chat_id(PLATFORM, &thread);
    push(&fake, &base, fake.mention_event(&root)).await;
    let said0 = channel_message_id(PLATFORM, &root.id());
    wait_answered(&store, &chat, &said0, &first).await;
    let second = tag(n, 1);
    let more = fake.user_message(&channel, Some(&root.ts), &user, &format!("and {second}"));
    push(&fake, &base, fake.message_event(&more, "channel")).await;
    let said1 = channel_message_id(PLATFORM, &more.id());
    wait_answered(&store, &chat, &said1, &second).await;
    Conversation {
        thread,
        chat,
        said: vec![(said0, first), (said1, second)],
    }
}

/// The run; `thread_order`: also assert that the replies of a thread come in their turns' order.
async fn run(url: &str, thread_order: bool) {
    let logs = logs();
    let backend = url.split(':').next().unwrap_or("?");
    // Channel ids of their own per run (the log is shared by the tests of this process).
    let prefix: &'static str = match (backend, thread_order) {
        ("sqlite", false) => "CS",
        ("sqlite", true) => "CT",
        (_, false) => "CP",
        (_, true) => "CQ",
    };
    let started = Instant::now();
    let fake = FakeSlack::start().await;
    let mut config = fake.http_config();
    config.api_timeout = Duration::from_millis(300);
    let slack = frogbot_slack::channel::connect(config).await.unwrap();
    fake.set_fault_hold(Duration::from_millis(900));
    let store = frogbot_testkit::open_store(url).await;
    let clock = Arc::new(FastForward::default());
    let engine = Engine::with_clock(
        store.clone(),
        vec![frogbot_testkit::offer("main", model())],
        vec![],
        EngineConfig {
            delivery_grace: Duration::from_secs(2),
            ..Default::default()
        },
        clock.clone(),
    )
    .with_channel(slack.channel())
    // Replies posted whole: every piece goes through the durable delivery.
    .with_channel_settings(
        PLATFORM,
        ChannelSettings {
            stream: false,
            ..Default::default()
        },
    )
    .unwrap();
    let worker = engine.spawn_worker(Duration::from_millis(100));
    let app = slack.routes(&engine.handle()).expect("HTTP routes");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base: Arc<str> = format!("http://{}", listener.local_addr().unwrap()).into();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let seed = seed();
    let plan = fake.set_faults(FaultPlan::new(seed, FAULTS));
    let gate = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..CONVERSATIONS {
        let permit = gate.clone().acquire_owned().await.unwrap();
        let (fake, base, store) = (fake.clone(), base.clone(), store.clone());
        tasks.spawn(async move {
            let c = converse(prefix, n, fake, base, store).await;
            drop(permit);
            (n, c)
        });
    }
    let mut conversations: Vec<(usize, Conversation)> = tasks.join_all().await;
    conversations.sort_by_key(|(n, _)| *n);
    let answered_at = started.elapsed();

    // Quiescence: every owed piece is in its thread and no delivery job is left. Every turn
    // has ended: what the replies owe is final.
    let mut owed_all = Vec::new();
    for (_, c) in &conversations {
        owed_all.push(owed(&store, &c.chat).await);
    }
    let deadline = Instant::now() + WAIT;
    let mut polls = 0;
    // The conversations still missing a piece (a piece once posted stays), and the delivery jobs
    // left at the first look (no turn runs: no new one comes).
    let mut missing: Vec<usize> = (0..conversations.len()).collect();
    let mut pending = None;
    let complete = |i: usize| {
        let c = &conversations[i].1;
        let there: HashSet<String> = fake.thread_keys(&c.thread).into_iter().collect();
        owed_all[i].iter().all(|(k, _)| there.contains(k))
    };
    loop {
        polls += 1;
        missing.retain(|&i| !complete(i));
        if missing.is_empty() {
            let left = pending_deliveries(&store, pending.take()).await;
            if left.is_empty() {
                break;
            }
            pending = Some(left.iter().map(|(id, _)| *id).collect());
        }
        if Instant::now() >= deadline {
            if std::env::var_os("FROGBOT_FAULT_LOG").is_some() {
                println!("{}", String::from_utf8_lossy(&logs.0.lock().unwrap()));
            }
            let dead: Vec<(Option<String>, Option<String>)> = store
                .dead_jobs(20)
                .await
                .unwrap()
                .into_iter()
                .map(|j| (j.key, j.last_error))
                .collect();
            panic!(
                "deliveries still owed after {WAIT:?}: conversations {missing:?}, pending \
                 {pending:?}, dead {dead:?}"
            );
        }
        clock.advance(2_000);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let elapsed = started.elapsed();
    let (e500, e429, timeouts, resets) = plan.counts();
    fake.clear_faults();
    worker.abort();

    let (mut pieces, mut duplicates, mut said) = (0, 0, 0);
    let (mut wrong, mut lost_or_wrong) = (Vec::new(), Vec::new());
    for (n, c) in &conversations {
        for (id, tag) in &c.said {
            assert!(
                answered(&store, &c.chat, id, tag).await,
                "conversation {n}: {tag} stored and answered"
            );
            said += 1;
        }
        let want = owed(&store, &c.chat).await;
        pieces += want.len();
        let bot: Vec<(String, String)> = fake
            .thread_messages(&c.thread)
            .into_iter()
            .filter(|m| m.bot)
            .filter_map(|m| {
                let key = m
                    .metadata
                    .as_ref()?
                    .pointer("/event_payload/key")?
                    .as_str()?;
                key.starts_with("deliver:")
                    .then(|| (key.to_owned(), m.text.clone()))
            })
            .collect();
        let distinct: HashSet<&String> = bot.iter().map(|(k, _)| k).collect();
        duplicates += bot.len() - distinct.len();
        // Without the thread's order: the replies one after the other, each reply's pieces in
        // the order they were posted.
        let by_reply = |v: &[(String, String)]| {
            let mut v = v.to_vec();
            v.sort_by_key(|(k, _)| k.rsplit_once(':').map(|(r, _)| r.to_owned()));
            v
        };
        if by_reply(&bot) != by_reply(&want) {
            lost_or_wrong.push(*n);
        }
        if bot != want {
            if thread_order && wrong.is_empty() {
                let short = |v: &[(String, String)]| -> Vec<String> {
                    v.iter().map(|(k, t)| format!("{k} {:.20}", t)).collect()
                };
                println!(
                    "conversation {n}: posted {:#?}\nowed {:#?}",
                    short(&bot),
                    short(&want)
                );
            }
            wrong.push((*n, bot.len(), want.len()));
        }
    }
    let chats: HashSet<String> = conversations
        .iter()
        .map(|(_, c)| c.chat.to_string())
        .collect();
    if std::env::var_os("FROGBOT_FAULT_LOG").is_some() {
        println!("{}", String::from_utf8_lossy(&logs.0.lock().unwrap()));
    }
    let gave_up = logs.count("its delivery job takes over", &chats);
    let worker_retries = logs.count("delivering a reply failed; retrying later", &chats);
    println!(
        "slack engine faults ({backend}): seed {seed}, {CONVERSATIONS} conversations ({said} \
         messages, {IN_FLIGHT} at once), {pieces} reply pieces; faults injected: {} (500: \
         {e500}, 429: {e429}, timeout: {timeouts}, reset after processing: {resets}); {} \
         chat.postMessage carried out; {gave_up} replies left to the worker, {worker_retries} \
         worker attempts failed; duplicates: {duplicates}; threads missing a piece or with a \
         reply's pieces out of order: {}; threads with replies out of turn order: {}; answered \
         in {answered_at:.1?}, all delivered in {elapsed:.1?} ({polls} polls, the engine's clock {} s \
         ahead)",
        plan.injected(),
        fake.calls("chat.postMessage").len(),
        lost_or_wrong.len(),
        wrong.len(),
        clock
            .now()
            .saturating_sub(frogbot_core::model::now_millis())
            / 1000,
    );
    assert_eq!(duplicates, 0, "pieces posted twice");
    assert!(
        lost_or_wrong.is_empty(),
        "threads missing a piece, or with pieces out of order within a reply: {lost_or_wrong:?}"
    );
    if thread_order {
        assert!(
            wrong.is_empty(),
            "threads whose replies are out of turn order (conversation, posted, owed): {wrong:?}"
        );
    }
    let dead = store.dead_jobs(100).await.unwrap();
    assert!(dead.is_empty(), "buried deliveries: {dead:?}");
    assert!(
        e500 > 0 && e429 > 0 && timeouts > 0 && resets > 0,
        "every fault drawn"
    );
}

async fn every_reply_piece_arrives_once_in_thread_order_under_faults(url: &str) {
    run(url, true).await;
}

frogbot_testkit::backends!(every_reply_piece_arrives_once_in_thread_order_under_faults);
