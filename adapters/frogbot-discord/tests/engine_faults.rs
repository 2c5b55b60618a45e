//! Nothing owed is lost, end to end (issue 18): FrogBot's engine (SQLite, and PostgreSQL when it
//! is installed) with the Discord adapter — serenity's gateway client and `Http` — against the
//! fake Discord, which fails 20 % of its write calls (500, 429 with Discord's headers and body,
//! no answer until the client times out, the connection reset after the call WAS carried out),
//! the engine's worker running and a short `delivery_grace` (so replies the turn's process cannot
//! post in time are posted by the worker). Many people write at once, each in a channel of their
//! own: a mention (the bot opens a thread on it, or answers in the channel when it cannot), then
//! a message in that thread once the first is answered; some replies are long enough for several
//! messages.
//!
//! At the end (once every delivery job is gone): each person's messages are stored and answered,
//! and each thread holds every piece of every stored reply exactly once (its nonce), each
//! reply's pieces in order, and the replies of one thread in the order of their turns (a reply
//! its process left to the worker holds the next one back; its job posts it after).
//!
//! Once every conversation is answered, the engine's clock is moved forward (2 s every 200 ms,
//! or straight to the next delivery job's due time when none is running) so the worker's
//! retries (10 s, 20 s, 40 s … 5 min apart) do not make the run long. The fault seed is
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
use frogbot_discord::PLATFORM;
use frogbot_discord::ids::delivery_nonce;
use frogbot_discord::render::MESSAGE_LIMIT;
use frogbot_discord::testing::{self as fake, FakeDiscord};
use frogbot_model::faults::FaultPlan;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;
const GUILD: u64 = 100_000_000_000_000_001;

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
/// 1,500 characters (three Discord messages).
fn model() -> ScriptedModel {
    ScriptedModel::new(|req: &ModelRequest| {
        let said = frogbot_testkit::last_user(req);
        let tag = said
            .split_whitespace()
            .find(|w| w.starts_with('c') && w.contains('m'))
            .unwrap_or("?");
        if said.contains("long") {
            let text = (0..3)
                .map(|p| format!("re {tag} piece {p}: {}", "frog ".repeat(300)))
                .collect::<Vec<_>>()
                .join("\n\n");
            return reply(&text);
        }
        reply(&format!("re {tag}"))
    })
}

/// One person's thread.
struct Conversation {
    /// The thread's channel id.
    thread: u64,
    chat: ChatId,
    /// The stored ids of the person's messages, with their tags.
    said: Vec<(String, String)>,
    /// The bot answered in the channel (it could not open a thread).
    in_channel: bool,
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

/// Waits (polling) until `said` is stored and answered in one of `chats`; returns which.
async fn wait_answered(store: &DynStore, chats: &[ChatId], said: &str, tag: &str) -> usize {
    let deadline = Instant::now() + WAIT;
    loop {
        for (i, chat) in chats.iter().enumerate() {
            if answered(store, chat, said, tag).await {
                return i;
            }
        }
        assert!(Instant::now() < deadline, "{tag} not answered in {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The nonces and texts of the pieces the stored replies of `chat` owe its thread, in order,
/// with their reply's id.
async fn owed(store: &DynStore, chat: &ChatId) -> Vec<(String, String, String)> {
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
        for (i, piece) in frogbot_discord::format::messages(&reply.text(), MESSAGE_LIMIT)
            .into_iter()
            .enumerate()
        {
            out.push((delivery_nonce(&d.piece_key(i)), piece, reply.id.clone()));
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

/// How far to move the engine's clock at one poll: 2 s, or, when no delivery job is being run
/// and the next one is due later than that, straight to when it is due — a job that met the
/// fake's faults many times in a row waits minutes between attempts (the backoff grows to 5
/// min), longer than 2 s every 200 ms covers in the test's window. A claimed job is never
/// jumped past its claim, so no attempt is started twice.
async fn fast_forward(store: &DynStore, now: frogbot_core::model::Millis) -> i64 {
    const STEP: i64 = 2_000;
    let jobs = store.live_jobs(1_000).await.expect("the live jobs");
    let deliveries: Vec<_> = jobs
        .iter()
        .filter(|j| j.key.as_deref().is_some_and(|k| k.starts_with("deliver:")))
        .collect();
    if deliveries
        .iter()
        .any(|j| j.claim_until.is_some_and(|until| until > now))
    {
        return STEP;
    }
    match deliveries.iter().map(|j| j.run_at).min() {
        Some(due) if due > now + STEP => due - now,
        _ => STEP,
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

/// The bot's messages in `thread` that carry one of `nonces`: (nonce, content), oldest first.
fn posted(fake: &FakeDiscord, thread: u64, nonces: &HashSet<&str>) -> Vec<(String, String)> {
    fake.channel_messages(thread)
        .into_iter()
        .filter(|m| m["author"]["id"] == BOT.to_string().as_str())
        .filter_map(|m| {
            let nonce = m["nonce"].as_str()?;
            nonces.contains(nonce).then(|| {
                (
                    nonce.to_owned(),
                    m["content"].as_str().unwrap_or_default().to_owned(),
                )
            })
        })
        .collect()
}

/// One person's conversation: a mention in a channel of its own, then once it is answered a
/// message in the thread the bot opened (or the channel, when it could not).
async fn converse(n: usize, fake: FakeDiscord, store: DynStore) -> Conversation {
    let channel = fake.new_id();
    let person = fake::user(300_000_000_000_000_000 + n as u64, &format!("p{n}"), false);
    let long = if n.is_multiple_of(10) { " long" } else { "" };
    let first = tag(n, 0);
    let mention = fake.new_id();
    fake.dispatch(
        "MESSAGE_CREATE",
        fake::message(
            mention,
            channel,
            Some(GUILD),
            &person,
            &format!("<@{BOT}> {first}{long} please"),
            &[fake::user(BOT, "frogbot", true)],
        ),
    );
    // A thread started on a message has its id.
    let candidates = [mention, channel];
    let chats = candidates.map(|c| channel_chat_id(PLATFORM, &c.to_string()));
    let said0 = channel_message_id(PLATFORM, &mention.to_string());
    let at = wait_answered(&store, &chats, &said0, &first).await;
    let (thread, chat) = (candidates[at], chats[at].clone());
    let second = tag(n, 1);
    let more = fake.new_id();
    fake.dispatch(
        "MESSAGE_CREATE",
        fake::message(
            more,
            thread,
            Some(GUILD),
            &person,
            &format!("and {second}"),
            &[],
        ),
    );
    let said1 = channel_message_id(PLATFORM, &more.to_string());
    wait_answered(&store, std::slice::from_ref(&chat), &said1, &second).await;
    Conversation {
        thread,
        chat,
        said: vec![(said0, first), (said1, second)],
        in_channel: at == 1,
    }
}

/// The run; `thread_order`: also assert that the replies of a thread come in their turns' order.
async fn run(url: &str, thread_order: bool) {
    let logs = logs();
    let backend = url.split(':').next().unwrap_or("?");
    let started = Instant::now();
    let fake = FakeDiscord::start(APP, BOT).await;
    let mut config = fake.config();
    config.api_timeout = Duration::from_millis(300);
    let adapter = frogbot_discord::channel::connect(config).await.unwrap();
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
    .with_channel(adapter.channel())
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
    let shutdown = CancellationToken::new();
    let gateway = adapter
        .start(engine.handle(), shutdown.clone())
        .expect("the gateway task");
    assert!(
        fake.wait_ready(Duration::from_secs(20)).await,
        "the client identified"
    );

    let seed = seed();
    let plan = fake.set_faults(FaultPlan::new(seed, FAULTS));
    let gate = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..CONVERSATIONS {
        let permit = gate.clone().acquire_owned().await.unwrap();
        let (fake, store) = (fake.clone(), store.clone());
        tasks.spawn(async move {
            let c = converse(n, fake, store).await;
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
        let want = &owed_all[i];
        let nonces: HashSet<&str> = want.iter().map(|(n, ..)| n.as_str()).collect();
        let there: HashSet<String> = posted(&fake, c.thread, &nonces)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        want.iter().all(|(n, ..)| there.contains(n))
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
            // What each missing conversation lacks, where its pieces went, the jobs left and
            // the engine's warnings about its chat: enough to study a failed run.
            let live: Vec<(Option<String>, i64, i64, Option<String>)> = store
                .live_jobs(100)
                .await
                .unwrap()
                .into_iter()
                .map(|j| (j.key, j.attempts, j.run_at, j.last_error))
                .collect();
            let log = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
            for &i in &missing {
                let c = &conversations[i].1;
                let want = &owed_all[i];
                let nonces: HashSet<&str> = want.iter().map(|(n, ..)| n.as_str()).collect();
                let there: HashSet<String> = posted(&fake, c.thread, &nonces)
                    .into_iter()
                    .map(|(n, _)| n)
                    .collect();
                let lacking: Vec<(&str, &str)> = want
                    .iter()
                    .filter(|(n, ..)| !there.contains(n))
                    .map(|(n, _, reply)| (n.as_str(), reply.as_str()))
                    .collect();
                println!(
                    "conversation {i} (chat {}, thread {}, in channel {}): lacks {lacking:?}; the \
                     thread holds {:?}",
                    c.chat,
                    c.thread,
                    c.in_channel,
                    fake.channel_messages(c.thread)
                        .iter()
                        .map(|m| (
                            m["nonce"].clone(),
                            m["content"]
                                .as_str()
                                .map(|t| t.chars().take(30).collect::<String>())
                        ))
                        .collect::<Vec<_>>()
                );
                for line in log.lines().filter(|l| l.contains(c.chat.as_str())) {
                    println!("  {line}");
                }
            }
            panic!(
                "deliveries still owed after {WAIT:?}: conversations {missing:?}, pending \
                 {pending:?}, dead {dead:?}, live jobs {live:?}"
            );
        }
        clock.advance(fast_forward(&store, clock.now()).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let elapsed = started.elapsed();
    let (e500, e429, timeouts, resets) = plan.counts();
    fake.clear_faults();
    worker.abort();
    shutdown.cancel();
    gateway.abort();

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
        let nonces: HashSet<&str> = want.iter().map(|(n, ..)| n.as_str()).collect();
        let bot = posted(&fake, c.thread, &nonces);
        let distinct: HashSet<&String> = bot.iter().map(|(k, _)| k).collect();
        duplicates += bot.len() - distinct.len();
        // Without the thread's order: the replies one after the other, each reply's pieces in
        // the order they were posted.
        let reply_of: std::collections::HashMap<&str, &str> = want
            .iter()
            .map(|(nonce, _, reply)| (nonce.as_str(), reply.as_str()))
            .collect();
        let by_reply = |v: &[(String, String)]| {
            let mut v = v.to_vec();
            v.sort_by_key(|(nonce, _)| reply_of.get(nonce.as_str()).copied());
            v
        };
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(n, t, _)| (n.clone(), t.clone()))
            .collect();
        if by_reply(&bot) != by_reply(&want) {
            lost_or_wrong.push(*n);
        }
        if bot != want {
            wrong.push((*n, bot.len(), want.len()));
        }
    }
    let chats: HashSet<String> = conversations
        .iter()
        .map(|(_, c)| c.chat.to_string())
        .collect();
    let in_channel = conversations.iter().filter(|(_, c)| c.in_channel).count();
    if std::env::var_os("FROGBOT_FAULT_LOG").is_some() {
        println!("{}", String::from_utf8_lossy(&logs.0.lock().unwrap()));
    }
    let gave_up = logs.count("its delivery job takes over", &chats);
    let worker_retries = logs.count("delivering a reply failed; retrying later", &chats);
    let creates = fake
        .calls()
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/messages") && c.status < 300)
        .count();
    println!(
        "discord engine faults ({backend}): seed {seed}, {CONVERSATIONS} conversations ({said} \
         messages, {IN_FLIGHT} at once; {in_channel} answered in the channel, no thread opened), \
         {pieces} reply pieces; faults injected: {} (500: {e500}, 429: {e429}, timeout: \
         {timeouts}, reset after processing: {resets}); {creates} create-message calls answered; \
         {gave_up} replies left to the worker, {worker_retries} worker attempts failed; \
         duplicates: {duplicates}; threads missing a piece or with a reply's pieces out of order: \
         {}; threads with replies out of turn order: {}; answered in {answered_at:.1?}, all \
         delivered in {elapsed:.1?} ({polls} polls, the engine's clock {} s ahead)",
        plan.injected(),
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
