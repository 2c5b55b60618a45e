//! Issue 18, "crash during delivery": a real `frogbot serve` child serving a Telegram channel
//! (long polling against the fake Bot API of `frogbot_telegram::testing`) and the HTTP API, with a
//! scripted OpenAI-compatible model — both fakes live in this test process, so they survive the
//! child — is killed with SIGKILL at seeded random moments while 200 conversations run, and
//! restarted each time on the same database (SQLite and PostgreSQL).
//!
//! Afterwards (once the state is quiet, found by polling): every user message the child
//! acknowledged (Telegram: its update confirmed by a later `getUpdates` offset; HTTP: answered) is
//! stored; every stored user message has a reply; every piece a stored reply owes its Telegram
//! thread was received there, in order (repeats — Telegram is at least once — are counted and
//! bounded by the number of kills); no question was answered twice or continued twice; every
//! chat is idle or waiting on a question that is shown; no delivery was buried.
//!
//! The seed is printed; `FROGBOT_CRASH_SEED=N` replays a run's plan (the kill moments race the
//! processes, so a replay is close, not identical).

mod common;

use common::crash_support;

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::child::{ServeProcess, config_file, free_port, frogbot, start};
use crash_support::{BotLog, FakeModel, Kind, Process, cover, end_mark, squash, user_text};
use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{self, ScriptEvent, ScriptedModel, reply};
use frogbot_core::agent::{
    AllowAll, Channel, ChannelOutbox, Engine, EngineConfig, ModelEvent, ModelRequest,
    OutboxDelivery, QUEUED_BEHIND_QUESTION_TEXT, QUEUED_TEXT, STOP_REFUSED_TEXT, channel_chat_id,
    failure_text,
};
use frogbot_core::model::{
    Changed, ChannelQuestions, ChatId, HookArgs, NoticeTo, ParseArgs, ParseResult, PlatformUser,
    PrefixedIdentity, QUESTION_TOOL, RenderArgs, RenderedQuestion, Settlement, Thread,
    ThreadMessage, ThreadMessageMetadata, TurnState, UiMessage, now_millis,
};
use frogbot_core::store::DynStore;
use frogbot_telegram::TelegramQuestions;
use frogbot_telegram::channel::{FAILED_TEXT, NOT_ALLOWED_TEXT, TelegramOutbox};
use frogbot_telegram::testing::{FakeBotApi, private_chat, user};
use frogbot_testkit::TestDb;
use serde_json::{Value, json};
use tokio::sync::Notify;

const TOKEN_VAR: &str = "FROGBOT_TEST_TELEGRAM_TOKEN";
/// Conversations in all, and how many of them are web chats (the rest are Telegram chats).
const CONVERSATIONS: usize = 200;
const WEB_CONVERSATIONS: usize = 50;
/// SIGKILLs during the run.
const KILLS: usize = 20;
/// Conversations start within this much of the run's start; the kills fall within it too.
const SPREAD: Duration = Duration::from_secs(22);
/// How long a conversation waits for one step's reply before it goes on without it.
const STEP_WAIT: Duration = Duration::from_secs(15);
/// A question still showing its buttons this long after a click is clicked again (a person who
/// sees nothing happen tries again; the click's update may have been lost with a process).
const RECLICK: Duration = Duration::from_secs(5);
/// How long the state must stay quiet (no message sent or edited) before the audit is final.
const QUIET: Duration = Duration::from_millis(2_500);
/// Repeated reply pieces allowed per kill (each kill may cut several threads' replies at once).
const REPEATS_PER_KILL: usize = 8;
/// The chat id of Telegram conversation `c` (a private chat with user `c`).
const CHAT_BASE: i64 = 10_000;

/// The two backends share two cores: one run at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A conversation: who, what, when.
#[derive(Clone, Debug)]
struct Conv {
    c: usize,
    web: bool,
    steps: Vec<Kind>,
    start: Duration,
}

/// The seeded plan of a run.
#[derive(Debug)]
struct Plan {
    seed: u64,
    convs: Vec<Conv>,
    kills: Vec<Duration>,
}

impl Plan {
    fn new(seed: u64) -> Plan {
        let mut rng = fastrand::Rng::with_seed(seed);
        let convs = (0..CONVERSATIONS)
            .map(|c| {
                let steps = (0..rng.usize(2..=3))
                    .map(|_| match rng.u32(0..100) {
                        0..35 => Kind::Hi,
                        35..65 => Kind::Long,
                        65..85 => Kind::Ask,
                        _ => Kind::Quiz,
                    })
                    .collect();
                Conv {
                    c,
                    web: c % (CONVERSATIONS / WEB_CONVERSATIONS) == 0,
                    steps,
                    start: SPREAD.mul_f64(rng.f64() * 0.9),
                }
            })
            .collect();
        let mut kills: Vec<Duration> = (0..KILLS)
            .map(|_| Duration::from_millis(500) + SPREAD.mul_f64(rng.f64()))
            .collect();
        kills.sort();
        Plan { seed, convs, kills }
    }
}

fn seed() -> u64 {
    std::env::var("FROGBOT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(18, |d| d.as_nanos() as u64)
        })
}

/// The `frogbot serve` child, restarted on the same database, port and configuration.
struct Serve {
    process: Option<ServeProcess>,
    config: std::path::PathBuf,
    port: u16,
    log: std::path::PathBuf,
}

impl Serve {
    async fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut cmd = frogbot();
        cmd.arg("serve")
            .arg("--config")
            .arg(&self.config)
            .env(TOKEN_VAR, "123456:TEST-token")
            // `FROGBOT_CRASH_LOG=<filter>` logs more of the children (to study a failed seed).
            .env(
                "RUST_LOG",
                std::env::var("FROGBOT_CRASH_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        self.process = Some(start(cmd, self.port).await);
    }

    /// SIGKILL, reaped.
    fn kill(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.child.kill().unwrap();
            p.child.wait().unwrap();
        }
    }
}

/// What the conversations saw and did.
#[derive(Debug, Default)]
struct Seen {
    steps: usize,
    /// Steps that ended with their final text, with an interruption notice, with another notice,
    /// or that waited in vain.
    finished: usize,
    interrupted: usize,
    failed: usize,
    timeouts: Vec<String>,
    clicks: usize,
    reclicks: usize,
    /// Every Telegram message update pushed: (update id, chat, text).
    pushed: Vec<(i64, i64, String)>,
    http_retries: usize,
    http_unexpected: Vec<String>,
    /// Settles answered 200, by tool call id.
    settled: HashMap<String, u32>,
    settles_stale: usize,
}

struct Ctx {
    fake: FakeBotApi,
    log: BotLog,
    http: reqwest::Client,
    base: String,
    seen: Mutex<Seen>,
}

impl Ctx {
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn chat_of(c: usize) -> i64 {
    CHAT_BASE + c as i64
}

fn web_chat(c: usize) -> String {
    format!("web-c{c}")
}

/// The callback data of the button labelled `label` on message `m`, if it shows one.
fn button(m: &Value, label: &str) -> Option<String> {
    m["reply_markup"]["inline_keyboard"]
        .as_array()?
        .iter()
        .filter_map(Value::as_array)
        .flatten()
        .find(|b| b["text"] == label)
        .and_then(|b| b["callback_data"].as_str().map(str::to_owned))
}

/// A Telegram conversation: each step's message, then waiting for its reply (clicking Green on a
/// question) before the next.
async fn telegram_conversation(ctx: Arc<Ctx>, conv: Conv) {
    let chat = chat_of(conv.c);
    let who = user(chat, "Person");
    let mut watch = ctx.log.watch(chat);
    for (s, kind) in conv.steps.iter().copied().enumerate() {
        let text = user_text(kind, conv.c, s);
        let before = ctx.log.sent(chat).len();
        let update = ctx
            .fake
            .user_message(private_chat(chat, "Person"), who.clone(), &text, None);
        let id = ctx.fake.push(update);
        ctx.seen().steps += 1;
        ctx.seen().pushed.push((id, chat, text.clone()));
        let end = end_mark(conv.c, s);
        let deadline = Instant::now() + STEP_WAIT;
        let mut clicked: Option<Instant> = None;
        loop {
            let mut finished = None;
            let mut question = None;
            for id in ctx.log.sent(chat).into_iter().skip(before) {
                let Some(m) = ctx.fake.message(id) else {
                    continue;
                };
                let t = m["text"].as_str().unwrap_or_default();
                if t.contains(&end) {
                    finished = Some(0);
                } else if t.contains(failure_text("interrupted")) {
                    finished = Some(1);
                } else if t.contains("⚠️") || t == FAILED_TEXT {
                    finished = Some(2);
                } else if t.starts_with('❓')
                    && let Some(data) = button(&m, "Green")
                {
                    question = Some((id, data));
                }
            }
            if let Some(how) = finished {
                let mut seen = ctx.seen();
                seen.finished += 1;
                match how {
                    1 => seen.interrupted += 1,
                    2 => seen.failed += 1,
                    _ => {}
                }
                break;
            }
            if let Some((message, data)) = question
                && clicked.is_none_or(|at| at.elapsed() > RECLICK)
            {
                {
                    let mut seen = ctx.seen();
                    seen.clicks += 1;
                    seen.reclicks += usize::from(clicked.is_some());
                }
                let click = ctx.fake.click(&who, message, &data);
                ctx.fake.push(click);
                clicked = Some(Instant::now());
            }
            if Instant::now() > deadline {
                ctx.seen().timeouts.push(text.clone());
                break;
            }
            let _ = tokio::time::timeout(Duration::from_millis(500), watch.changed()).await;
        }
    }
}

/// One HTTP request: `None` when the child did not answer (killed, restarting).
async fn call(req: reqwest::RequestBuilder) -> Option<(u16, Value)> {
    let r = req.send().await.ok()?;
    let status = r.status().as_u16();
    Some((status, r.json().await.unwrap_or(Value::Null)))
}

/// A web conversation over the HTTP API: each step's message (sent again with the same client id
/// until the child acknowledges it), then its reply (answering a question through `settle`).
async fn web_conversation(ctx: Arc<Ctx>, conv: Conv) {
    let chat = web_chat(conv.c);
    let url = format!("{}/api/chats/{chat}", ctx.base);
    for (s, kind) in conv.steps.iter().copied().enumerate() {
        let text = user_text(kind, conv.c, s);
        let id = format!("wc{}s{s}", conv.c);
        ctx.seen().steps += 1;
        let deadline = Instant::now() + STEP_WAIT;
        let body = json!({"id": id, "parts": [{"type": "text", "text": text}]});
        loop {
            match call(ctx.http.post(format!("{url}/messages")).json(&body)).await {
                Some((200 | 202, _)) => break,
                Some((409, b)) if b["error"]["code"] == "duplicate-message" => break,
                Some((503, _)) | None => ctx.seen().http_retries += 1,
                Some((status, b)) => {
                    ctx.seen()
                        .http_unexpected
                        .push(format!("{id}: POST {status} {b}"));
                    break;
                }
            }
            if Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let end = end_mark(conv.c, s);
        loop {
            if let Some((200, c)) = call(ctx.http.get(&url)).await {
                let messages = c["messages"].as_array().cloned().unwrap_or_default();
                let mine = messages.iter().position(|m| m["id"] == id);
                let reply =
                    mine.and_then(|i| messages[i + 1..].iter().find(|m| m["role"] == "assistant"));
                match c["state"].as_str() {
                    Some("awaiting") => {
                        if let Some((200, p)) = call(ctx.http.get(format!("{url}/pending"))).await {
                            for pending in p["calls"].as_array().into_iter().flatten() {
                                let tool = pending["toolCallId"].as_str().unwrap_or_default();
                                let answer = json!({"toolCallId": tool, "output": {"answers": [
                                    {"header": "Colour", "selected": ["Green"]}
                                ]}});
                                match call(ctx.http.post(format!("{url}/settle")).json(&answer))
                                    .await
                                {
                                    Some((200, _)) => {
                                        *ctx.seen().settled.entry(tool.to_owned()).or_default() +=
                                            1;
                                    }
                                    Some((409, _)) => ctx.seen().settles_stale += 1,
                                    _ => ctx.seen().http_retries += 1,
                                }
                            }
                        }
                    }
                    Some("idle") if reply.is_some() => {
                        let reply = reply.unwrap();
                        let text = reply["parts"].to_string();
                        let mut seen = ctx.seen();
                        seen.finished += 1;
                        if text.contains(&end) {
                        } else if reply["metadata"]["error"]["code"] == "interrupted" {
                            seen.interrupted += 1;
                        } else {
                            seen.failed += 1;
                        }
                        break;
                    }
                    _ => {}
                }
            } else {
                ctx.seen().http_retries += 1;
            }
            if Instant::now() > deadline {
                ctx.seen().timeouts.push(format!("{chat}: {text}"));
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// What the store and the fake platform say once the run is over.
#[derive(Debug, Default)]
struct Audit {
    user_messages: usize,
    replies: usize,
    interrupted_replies: usize,
    questions: usize,
    /// Reply segments (text runs and notices) the store says a Telegram thread is owed.
    segments: usize,
    /// Reply pieces (bot messages other than questions and notices) Telegram threads received.
    pieces: usize,
    /// Received pieces no owed segment accounts for (repeats, or pieces of a stream a crash cut).
    surplus: usize,
    /// Owed segments received whole and in order with a repeat of their own text inside (a
    /// draft a kill left with part of its piece): counted as received.
    own_repeats: usize,
    /// Received pieces that repeat an earlier piece of their thread exactly.
    repeats: usize,
    /// Confirmed Telegram updates whose message is not stored.
    losses: Vec<String>,
    /// Updates pushed but not confirmed.
    unconfirmed: usize,
    /// Stored user messages with no reply.
    unanswered: Vec<String>,
    /// Owed segments a thread did not receive (in order).
    missing: Vec<String>,
    /// … of them, segments of interrupted replies (the reply a lease's expiry marked interrupted
    /// is posted by the process that found it, with no delivery job behind it).
    missing_interrupted: Vec<String>,
    /// Owed segments received, but not in order (after a later reply, or with another reply's
    /// pieces between theirs).
    out_of_order: Vec<String>,
    /// Chats still running, or idle with messages queued.
    busy: Vec<String>,
    /// Chats waiting on a question with messages queued behind it.
    queued_behind_questions: usize,
    /// Questions waiting on an answer whose prompt is not shown in the thread.
    unshown: Vec<String>,
    /// A question answered (or continued) twice, a user message stored twice.
    doubled: Vec<String>,
    dead_jobs: usize,
    /// Owed segments not received whose delivery job is still in the store (claimed by a worker
    /// that died: it runs again only when the claim runs out).
    delayed: Vec<String>,
}

/// Which audits fail a run (else they are printed). The suite makes every one strict; a defect
/// found later can be printed while it is fixed, instead of failing every run.
#[derive(Clone, Copy, Debug, Default)]
struct Strict {
    /// A confirmed Telegram update whose message is not stored.
    receive: bool,
    /// A segment of an interrupted reply not received.
    interrupted: bool,
    /// A question waiting unseen.
    prompts: bool,
    /// A thread's replies received out of order.
    order: bool,
}

impl Audit {
    fn settled(&self, strict: Strict) -> bool {
        self.unconfirmed == 0
            && self.unanswered.is_empty()
            && self.missing.is_empty()
            && self.busy.is_empty()
            && (!strict.prompts || self.unshown.is_empty())
            && (!strict.interrupted || self.missing_interrupted.is_empty())
            && (!strict.receive || self.losses.is_empty())
            && (!strict.order || self.out_of_order.is_empty())
    }
}

fn text_of(m: &Value) -> String {
    m["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect()
}

/// The segments `reply` owes its thread: its text runs (the text before a question is posted
/// when the turn stops to wait; what follows once it is answered), then the failure notice; each
/// with whether the reply was interrupted.
fn owed_segments(reply: &Value) -> Vec<(String, bool)> {
    let interrupted = reply["metadata"]["error"]["code"] == "interrupted";
    let mut runs = vec![String::new()];
    for p in reply["parts"].as_array().into_iter().flatten() {
        if p["type"] == "text" {
            runs.last_mut()
                .unwrap()
                .push_str(p["text"].as_str().unwrap_or_default());
        } else if p["type"] == "tool-question" {
            runs.push(String::new());
        }
    }
    if let Some(code) = reply["metadata"]["error"]["code"].as_str() {
        runs.push(failure_text(code).to_owned());
    }
    runs.iter()
        .map(|r| squash(r))
        .filter(|r| !r.is_empty())
        .map(|r| (r, interrupted))
        .collect()
}

/// Whether a bot message is a reply piece (not a question prompt or an engine/adapter notice).
fn is_reply_piece(text: &str) -> bool {
    !(text.starts_with('❓')
        || [
            QUEUED_TEXT,
            QUEUED_BEHIND_QUESTION_TEXT,
            STOP_REFUSED_TEXT,
            FAILED_TEXT,
            NOT_ALLOWED_TEXT,
        ]
        .contains(&text))
}

/// Whether `segment` is made of received `pieces` in order where every piece left out inside it
/// repeats its own text (a draft a kill left with part of its piece, posted again whole after):
/// received, with surplus — no other reply's piece comes in between. The last piece may go on
/// past the segment: an interrupted reply's rest is posted with the mark and the notice after
/// it in one message.
fn received_with_own_repeats(pieces: &[String], segment: &str) -> bool {
    let mut made: std::collections::BTreeSet<usize> = [0].into();
    for p in pieces.iter().filter(|p| !p.is_empty()) {
        let mut next = std::collections::BTreeSet::new();
        for &at in &made {
            if segment[at..].starts_with(p.as_str()) {
                next.insert(at + p.len());
            } else if at > 0 && at < segment.len() && p.starts_with(&segment[at..]) {
                next.insert(segment.len());
            }
            if at == 0 || at == segment.len() || segment.contains(p.as_str()) {
                next.insert(at);
            }
        }
        made = next;
    }
    made.contains(&segment.len())
}

#[test]
fn segments_with_stale_drafts_and_interleaved_replies_are_told_apart() {
    let v = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // A partial draft, then its piece whole: received.
    assert!(received_with_own_repeats(
        &v(&["ab", "cd", "c", "cd", "ef"]),
        "abcdef"
    ));
    assert!(received_with_own_repeats(
        &v(&["x", "ab", "cdef", "y"]),
        "abcdef"
    ));
    // The crash suite's CI seed 1796149065823632417: a piece posted again (its process died
    // before noting it), then the rest of the interrupted reply with the notice in one message.
    assert!(received_with_own_repeats(
        &v(&["ab", "cd", "cd", "ef(interrupted)⚠notice"]),
        "abcdef"
    ));
    assert!(!received_with_own_repeats(
        &v(&["ab", "cd", "cd", "eX(interrupted)"]),
        "abcdef"
    ));
    // Another reply's piece inside: not received in order, but interleaved.
    assert!(!received_with_own_repeats(
        &v(&["ab", "zz", "cdef"]),
        "abcdef"
    ));
    assert!(interleaved(&v(&["ab", "zz", "cdef"]), "abcdef"));
    // The first matching piece is not always the right one.
    assert!(interleaved(&v(&["abc", "ab", "cdef"]), "abcdef"));
    assert!(!interleaved(&v(&["cdef", "ab"]), "abcdef"));
}

/// Whether `segment` is made of received `pieces` in order, other pieces between them (a later
/// reply posted in the middle of an owed one).
/// Any choice of pieces counts (not only the first that fits): a draft a kill left with a
/// prefix of its piece is followed by the piece posted whole.
fn interleaved(pieces: &[String], segment: &str) -> bool {
    // The lengths of the segment's prefixes that chosen pieces make, in order.
    let mut made: std::collections::BTreeSet<usize> = [0].into();
    for p in pieces.iter().filter(|p| !p.is_empty()) {
        let next: Vec<usize> = made
            .iter()
            .filter_map(|&at| {
                if segment[at..].starts_with(p.as_str()) {
                    Some(at + p.len())
                } else {
                    // The last piece may carry what follows the segment (see above).
                    (at > 0 && at < segment.len() && p.starts_with(&segment[at..]))
                        .then_some(segment.len())
                }
            })
            .collect();
        made.extend(next);
    }
    made.contains(&segment.len())
}

async fn audit(ctx: &Ctx, store: &DynStore, plan: &Plan, model: &FakeModel) -> Audit {
    let mut a = Audit::default();
    let now = now_millis();
    let confirmed = ctx.log.confirmed_below();
    let pushed = ctx.seen().pushed.clone();
    a.unconfirmed = pushed.iter().filter(|(id, ..)| *id >= confirmed).count();
    let mut stored_texts: HashMap<i64, HashSet<String>> = HashMap::new();
    let mut answered_calls: HashMap<String, usize> = HashMap::new();
    for conv in &plan.convs {
        let (row, name) = if conv.web {
            let id = ChatId::new(web_chat(conv.c)).unwrap();
            (store.get_chat(&id).await.unwrap(), web_chat(conv.c))
        } else {
            let chat = chat_of(conv.c);
            let row = store
                .get_channel_chat("telegram", &chat.to_string())
                .await
                .unwrap();
            (row, format!("telegram {chat}"))
        };
        let Some(row) = row else { continue };
        if row.state(now) == TurnState::Running {
            a.busy.push(format!("{name}: running"));
        }
        let messages = store.list_messages(&row.chat_id).await.unwrap();
        if messages.iter().any(|m| m.queued) {
            match row.state(now) {
                TurnState::Awaiting => a.queued_behind_questions += 1,
                state => a
                    .busy
                    .push(format!("{name}: {state:?} with messages queued")),
            }
        }
        let json: Vec<(Option<i64>, Value)> = messages
            .iter()
            .map(|m| (m.position, serde_json::to_value(&m.message).unwrap()))
            .collect();
        let mut users_seen = HashSet::new();
        let mut segments = Vec::new();
        for (position, m) in &json {
            let text = text_of(m);
            if m["role"] == "user" {
                a.user_messages += 1;
                if !users_seen.insert(text.clone()) {
                    a.doubled
                        .push(format!("{name}: user message {text:?} stored twice"));
                }
                stored_texts
                    .entry(chat_of(conv.c))
                    .or_default()
                    .insert(text.clone());
                let replied = json
                    .iter()
                    .any(|(p, r)| r["role"] == "assistant" && p == position && position.is_some());
                if !replied && position.is_some() {
                    a.unanswered.push(format!("{name}: {text:?}"));
                }
                continue;
            }
            a.replies += 1;
            if m["metadata"]["error"]["code"] == "interrupted" {
                a.interrupted_replies += 1;
            }
            for p in m["parts"].as_array().into_iter().flatten() {
                if p["type"] == "tool-question" {
                    a.questions += 1;
                    let id = p["toolCallId"].as_str().unwrap_or_default().to_owned();
                    if p["state"] != "input-available" {
                        *answered_calls.entry(id).or_default() += 1;
                    }
                }
            }
            // The text that follows an answer, once per step.
            let chose = text.matches("You chose").count();
            if chose > 1 {
                a.doubled.push(format!(
                    "{name}: a reply continued {chose} times: {}",
                    &text[..text.len().min(120)]
                ));
            }
            segments.extend(owed_segments(m));
        }
        if let Some(waiting) = &row.awaiting_message_id {
            for q in store
                .questions_of_message(&row.chat_id, waiting, now)
                .await
                .unwrap()
            {
                if q.outcome.is_none() && !conv.web && q.record.messages.is_empty() {
                    a.unshown
                        .push(format!("{name}: question {} not shown", q.tool_call_id));
                }
            }
        }
        if conv.web {
            continue;
        }
        let chat = chat_of(conv.c);
        let mut ids = ctx.log.sent(chat);
        ids.sort_unstable();
        let pieces: Vec<String> = ids
            .iter()
            .filter_map(|id| ctx.fake.message(*id))
            .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
            .filter(|t| is_reply_piece(t))
            .map(|t| squash(&t))
            .collect();
        a.segments += segments.len();
        a.pieces += pieces.len();
        let mut distinct = HashSet::new();
        a.repeats += pieces
            .iter()
            .filter(|p| !distinct.insert(p.as_str()))
            .count();
        let texts: Vec<String> = segments.iter().map(|(s, _)| s.clone()).collect();
        let (used, missing) = cover(&pieces, &texts);
        a.surplus += used.iter().filter(|u| !**u).count();
        let all = pieces.concat();
        for i in missing {
            let (s, interrupted) = &segments[i];
            let short = |s: &str| s.chars().take(48).collect::<String>();
            let line = format!(
                "{name}: owed segment {i} of {} not received in order: {:?}…; segments {:?}; received {:?}",
                segments.len(),
                short(s),
                texts.iter().map(|t| short(t)).collect::<Vec<_>>(),
                pieces.iter().map(|t| short(t)).collect::<Vec<_>>(),
            );
            let owed = texts.iter().filter(|t| *t == s).count();
            if received_with_own_repeats(&pieces, s) {
                a.own_repeats += 1;
                continue;
            }
            if all.matches(s.as_str()).count() >= owed || interleaved(&pieces, s) {
                a.out_of_order.push(line);
            } else if *interrupted {
                a.missing_interrupted.push(line);
            } else {
                a.missing.push(line);
            }
        }
    }
    for (call, n) in answered_calls {
        if n > 1 {
            a.doubled
                .push(format!("question {call} answered in {n} stored parts"));
        }
    }
    for (call, n) in model.continued() {
        if n > 1 {
            a.doubled.push(format!(
                "the turn continued {n} times after the answer to {call}"
            ));
        }
    }
    for (call, n) in &ctx.seen().settled {
        if *n > 1 {
            a.doubled
                .push(format!("settle of {call} accepted {n} times"));
        }
    }
    for (id, chat, text) in &pushed {
        if *id < confirmed && !stored_texts.get(chat).is_some_and(|t| t.contains(text)) {
            a.losses.push(format!(
                "update {id} (chat {chat}, {text:?}) confirmed, not stored"
            ));
        }
    }
    a.dead_jobs = store.dead_jobs(100).await.unwrap().len();
    a
}

/// The chat an audit line names (`telegram 10042: …`).
fn chat_of_line(line: &str) -> ChatId {
    let thread = line
        .strip_prefix("telegram ")
        .and_then(|l| l.split(':').next())
        .unwrap_or_default();
    channel_chat_id("telegram", thread)
}

/// The latest claim (ms) of the delivery jobs still owing the threads `audit` found missing
/// something, when a worker holds one of them (`None`: no such job is claimed).
async fn claimed_until(store: &DynStore, audit: &Audit) -> Option<i64> {
    let mut until = None;
    // A question is drawn after the reply pieces before it: one left unshown behind a claimed
    // delivery job is late the same way.
    for line in audit
        .missing
        .iter()
        .chain(&audit.missing_interrupted)
        .chain(&audit.unshown)
    {
        let chat = chat_of_line(line);
        let job = store
            .earlier_job(
                &frogbot_core::agent::jobs::EngineJob::deliver_prefix(&chat),
                "-",
            )
            .await
            .ok()
            .flatten();
        if let Some(c) = job.and_then(|j| j.claim_until) {
            until = until.max(Some(c));
        }
    }
    until
}

/// The chats a delivery job in the store still owes something, each with its jobs as the store
/// has them (key, attempts, due — relative to now —, last error).
async fn owing_chats(store: &DynStore) -> HashMap<String, Vec<String>> {
    let now = now_millis();
    let mut chats = HashMap::<String, Vec<String>>::new();
    for job in store.live_jobs(10_000).await.unwrap() {
        if let Some(chat) = job
            .key
            .as_deref()
            .and_then(|k| k.strip_prefix("deliver:"))
            .and_then(|k| k.split(':').next())
        {
            chats.entry(chat.to_owned()).or_default().push(format!(
                "job {:?}: attempts {}, due {:+} ms, last error {:?}",
                job.key.as_deref().unwrap_or_default(),
                job.attempts,
                job.run_at - now,
                job.last_error,
            ));
        }
    }
    chats
}

/// The whole run on `db`; `strict_receive`: a confirmed update whose message is not stored fails
/// it (else such losses are printed).
async fn crash_during_delivery_on(db: TestDb, strict: Strict) {
    let _one = ONE_AT_A_TIME.lock().await;
    let plan = Plan::new(seed());
    let seed = plan.seed;
    let backend = if db.url.starts_with("postgres") {
        "postgres"
    } else {
        "sqlite"
    };
    println!("crash suite on {backend}: seed {seed} (FROGBOT_CRASH_SEED={seed} to replay)");
    let started = Instant::now();

    let fake = FakeBotApi::start().await;
    let model = FakeModel::start().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = config_file(
        dir.path(),
        port,
        &db.url,
        &format!(
            "turn_lease_seconds = 2\ndelivery_grace_seconds = 2\n\
             [[models]]\nid = \"scripted\"\nprovider = \"openai-compatible\"\nbase_url = \"{}\"\n\n\
             [channels.telegram]\ntoken_env = \"{TOKEN_VAR}\"\napi_url = \"{}\"\nstream_interval_ms = 250\n",
            model.base_url, fake.url
        ),
    );
    let mut serve = Serve {
        process: None,
        config,
        port,
        log: dir.path().join("serve.log"),
    };
    serve.start().await;
    let chats: Vec<i64> = plan
        .convs
        .iter()
        .filter(|c| !c.web)
        .map(|c| chat_of(c.c))
        .collect();
    let ctx = Arc::new(Ctx {
        log: BotLog::follow(&fake, chats),
        fake: fake.clone(),
        http: {
            frogbot_openai::install_crypto_provider();
            reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap()
        },
        base: format!("http://127.0.0.1:{port}"),
        seen: Mutex::default(),
    });

    let t0 = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for conv in plan.convs.clone() {
        let ctx = ctx.clone();
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(t0 + conv.start).await;
            if conv.web {
                web_conversation(ctx, conv).await;
            } else {
                telegram_conversation(ctx, conv).await;
            }
        }));
    }
    for at in &plan.kills {
        tokio::time::sleep_until(t0 + *at).await;
        serve.kill();
        serve.start().await;
    }
    let killed_for = started.elapsed();
    for t in tasks {
        t.await.unwrap();
    }
    let conversations_for = started.elapsed();

    // Quiescence: poll the store and the fake until every check holds and nothing was sent or
    // edited for a while, or the deadline passes (the audit then says what is missing).
    let store = frogbot_testkit::open_store(&db.url).await;
    let mut deadline = Instant::now() + Duration::from_secs(45);
    let mut waited_for_claims = false;
    // With a defect the audit never settles: nothing sent or edited for this long (past the
    // delivery grace and a worker's first retry) ends the wait as well.
    let mut still = Duration::from_secs(12);
    let mut last = (0, Instant::now());
    let mut audit = loop {
        let a = audit(&ctx, &store, &plan, &model).await;
        let activity = ctx.log.activity();
        if activity != last.0 {
            last = (activity, Instant::now());
        }
        let quiet = last.1.elapsed();
        if a.settled(strict) && quiet >= QUIET {
            break a;
        }
        if quiet >= still || Instant::now() > deadline {
            // A delivery job a killed worker had claimed runs again once its claim runs out
            // (the worker claims for 60 s): wait for that instead of calling it lost or
            // delayed — the job's recovery is what is checked.
            match claimed_until(&store, &a).await {
                Some(until) if until > now_millis() && !waited_for_claims => {
                    waited_for_claims = true;
                    let wait = Duration::from_millis((until - now_millis()).unsigned_abs())
                        + Duration::from_secs(6);
                    println!("  waiting {wait:?} for delivery jobs a killed worker claimed");
                    deadline = deadline.max(Instant::now() + wait + QUIET);
                    still = still.max(wait + QUIET);
                    // Quiet from now: the wait counts from here, not from the last activity.
                    last.1 = Instant::now();
                }
                _ => break a,
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    serve.kill();
    // What is still owed by a delivery job (read once the child is gone: nothing changes them)
    // is delayed, not lost.
    let owing = owing_chats(&store).await;
    for list in [&mut audit.missing, &mut audit.missing_interrupted] {
        let (delayed, lost): (Vec<String>, Vec<String>) = std::mem::take(list)
            .into_iter()
            .partition(|line| owing.contains_key(chat_of_line(line).as_str()));
        *list = lost;
        audit.delayed.extend(delayed);
    }
    for line in &audit.delayed {
        if let Some(jobs) = owing.get(chat_of_line(line).as_str()) {
            println!("  {line:.14}…'s delivery jobs: {jobs:?}");
        }
    }
    // A question left unshown: what the store still holds to draw it (every live job of its
    // chat, any kind), so a failure says whether it is late or lost.
    if !audit.unshown.is_empty() {
        let jobs = store.live_jobs(10_000).await.unwrap();
        let now = now_millis();
        for line in &audit.unshown {
            let chat = chat_of_line(line);
            let of_chat: Vec<String> = jobs
                .iter()
                .filter(|j| j.key.as_deref().is_some_and(|k| k.contains(chat.as_str())))
                .map(|j| {
                    format!(
                        "{:?}: attempts {}, due {:+} ms, claimed until {:?}, last error {:?}",
                        j.key.as_deref().unwrap_or_default(),
                        j.attempts,
                        j.run_at - now,
                        j.claim_until.map(|c| c - now),
                        j.last_error,
                    )
                })
                .collect();
            println!("  {line}: the jobs of its chat: {of_chat:?}");
        }
    }
    let log = std::fs::read_to_string(&serve.log).unwrap_or_default();
    let kept = std::env::temp_dir().join(format!("frogbot-crash-{backend}-{seed}.log"));
    let all_strict = Strict {
        receive: true,
        interrupted: true,
        prompts: true,
        order: true,
    };
    if (!audit.settled(all_strict) || !audit.delayed.is_empty())
        && std::fs::copy(&serve.log, &kept).is_ok()
    {
        println!("  the child's log is kept in {}", kept.display());
    }
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    let panics: Vec<&str> = log.lines().filter(|l| l.contains("panicked")).collect();

    let seen = ctx.seen();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "crash suite on {backend}, seed {seed}: {} conversations ({} web, {} Telegram), {} kills \
         in {:.1} s, conversations done at {:.1} s, quiet at {:.1} s",
        plan.convs.len(),
        WEB_CONVERSATIONS,
        plan.convs.len() - WEB_CONVERSATIONS,
        plan.kills.len(),
        killed_for.as_secs_f64(),
        conversations_for.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    let _ = writeln!(
        out,
        "  steps {} (finished {}, of them interrupted {}, failed {}; waited in vain {}), clicks {} \
         (again {}), settles {} (stale {}), HTTP retries {}, model calls {}",
        seen.steps,
        seen.finished,
        seen.interrupted,
        seen.failed,
        seen.timeouts.len(),
        seen.clicks,
        seen.reclicks,
        seen.settled.values().sum::<u32>(),
        seen.settles_stale,
        seen.http_retries,
        model.calls()
    );
    let _ = writeln!(
        out,
        "  stored: {} user messages, {} replies ({} interrupted), {} questions; Telegram: {} \
         updates pushed, {} owed segments, {} reply pieces delivered, {} surplus pieces ({} exact \
         repeats; {} segments with a stale partial draft inside), {} owed segments received out of \
         order, losses {}, unconfirmed {}; {} chats wait \
         on a question with messages queued; dead jobs {}; child ERROR lines {}",
        audit.user_messages,
        audit.replies,
        audit.interrupted_replies,
        audit.questions,
        seen.pushed.len(),
        audit.segments,
        audit.pieces,
        audit.surplus,
        audit.repeats,
        audit.own_repeats,
        audit.out_of_order.len(),
        audit.losses.len(),
        audit.unconfirmed,
        audit.queued_behind_questions,
        audit.dead_jobs,
        errors.len()
    );
    let show = |what: &str, items: &[String]| {
        if !items.is_empty() {
            println!("  {what} ({}):", items.len());
            for i in items.iter().take(15) {
                println!("    {i}");
            }
        }
    };
    drop(out);
    show("losses", &audit.losses);
    show("unanswered", &audit.unanswered);
    show("missing", &audit.missing);
    show("missing of interrupted replies", &audit.missing_interrupted);
    show("out of order", &audit.out_of_order);
    show("delayed (a delivery job still owes them)", &audit.delayed);
    show("busy", &audit.busy);
    show("unshown", &audit.unshown);
    show("doubled", &audit.doubled);
    show("waited in vain", &seen.timeouts);
    show("unexpected HTTP answers", &seen.http_unexpected);
    let errors: Vec<String> = errors.iter().take(10).map(|s| s.to_string()).collect();
    show("child errors (first)", &errors);

    assert!(panics.is_empty(), "the child panicked: {panics:#?}");
    assert!(
        seen.http_unexpected.is_empty(),
        "{:#?}",
        seen.http_unexpected
    );
    assert_eq!(audit.unconfirmed, 0, "every update is confirmed in the end");
    if strict.receive {
        assert!(
            audit.losses.is_empty(),
            "confirmed updates lost: {:#?}",
            audit.losses
        );
    }
    if strict.interrupted {
        assert!(
            audit.missing_interrupted.is_empty(),
            "interrupted replies lost: {:#?}",
            audit.missing_interrupted
        );
    }
    if strict.order {
        assert!(
            audit.delayed.is_empty(),
            "replies still owed by a claimed delivery job: {:#?}",
            audit.delayed
        );
        assert!(
            audit.out_of_order.is_empty(),
            "replies out of order: {:#?}",
            audit.out_of_order
        );
    }
    if strict.prompts {
        assert!(
            audit.unshown.is_empty(),
            "questions waiting unseen: {:#?}",
            audit.unshown
        );
    }
    assert!(
        audit.unanswered.is_empty(),
        "stored user messages without a reply: {:#?}",
        audit.unanswered
    );
    assert!(
        audit.missing.is_empty(),
        "reply pieces lost: {:#?}",
        audit.missing
    );
    assert!(
        audit.busy.is_empty(),
        "chats not idle or waiting: {:#?}",
        audit.busy
    );
    assert!(audit.doubled.is_empty(), "{:#?}", audit.doubled);
    assert_eq!(audit.dead_jobs, 0, "no delivery is given up on");
    assert!(
        audit.surplus <= KILLS * REPEATS_PER_KILL,
        "{} surplus pieces for {KILLS} kills",
        audit.surplus
    );
    // The run did what it says: conversations of both kinds, questions, long replies split.
    assert!(audit.user_messages >= CONVERSATIONS, "{audit:?}");
    assert!(
        audit.questions > 0 && audit.pieces > audit.segments / 2,
        "{audit:?}"
    );
}

/// The suite, with every audit strict: no confirmed update lost, every interrupted reply and
/// every waiting question shown, every thread's replies in order (each was a defect of this
/// issue, fixed: offsets confirmed after handling; a delivery job written with the take-over;
/// the job kept until the questions are drawn; a reply waits for the one owed before it). The
/// confirmed-not-stored updates seen once in CI were the fake's: two updates pushed at once
/// could be served out of id order (fixed in `FakeBotApi::push`, with a regression test).
///
/// The "interrupted reply" audit failed now and then (CI seed 1796149065823632417): the audit's,
/// not the engine's — a piece posted again after a kill (its process died before noting it)
/// sent the check to [`received_with_own_repeats`], which wanted every piece inside the
/// segment, but an interrupted reply's rest comes with its mark and notice in one message. A
/// delivery job a killed worker had claimed ("replies still owed by a claimed delivery job",
/// PostgreSQL seed 1796151641045115043) is now waited for until its claim runs out.
async fn crash_during_delivery(db: TestDb) {
    let strict = Strict {
        receive: true,
        interrupted: true,
        prompts: true,
        order: true,
    };
    crash_during_delivery_on(db, strict).await;
}

// ---- the defects the suite found, each on its own, without timing luck ------------------------

/// The thread (a private chat) and a message in it.
const THREAD: &str = "42";

fn said(text: &str) -> ThreadMessage {
    ThreadMessage {
        id: format!("{THREAD}:7"),
        text: text.into(),
        author: PlatformUser {
            id: THREAD.into(),
            name: Some("Ada".into()),
            is_bot: false,
        },
        metadata: ThreadMessageMetadata {
            date_sent: "2026-12-01T00:00:00Z".into(),
        },
        reply_to: None,
        raw: Value::Null,
        files: Vec::new(),
        mentions: Vec::new(),
    }
}

/// An engine serving the Telegram channel with `questions` and `outbox`; a 1 s turn lease, the
/// least delivery grace.
fn telegram_engine(
    store: DynStore,
    model: ScriptedModel,
    questions: Option<Arc<dyn ChannelQuestions>>,
    outbox: Arc<dyn ChannelOutbox>,
) -> Engine {
    Engine::new(
        store,
        vec![frogbot_testkit::offer("main", model)],
        vec![],
        EngineConfig {
            delivery_grace: Duration::from_secs(2),
            turn_lease_ms: 1_000,
            ..Default::default()
        },
    )
    .with_channel(Channel {
        platform: "telegram".into(),
        questions,
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: Some(outbox),
    })
}

/// A model that asks a question (after some text when `text_before`), then answers.
fn asking(text_before: bool) -> ScriptedModel {
    ScriptedModel::new(move |req: &ModelRequest| {
        if frogbot_testkit::after_tool(req) {
            return reply("Thanks.");
        }
        let mut events = Vec::new();
        if text_before {
            events.push(ScriptEvent::Event(ModelEvent::TextDelta(
                "Let me ask first.".into(),
            )));
        }
        events.extend(scripted::call(
            "q1",
            QUESTION_TOOL,
            frogbot_testkit::ask_input(),
        ));
        events
    })
}

/// Question hooks whose `render` never returns: the process dies while drawing.
struct DiesDrawing<Q> {
    inner: Q,
    entered: Arc<Notify>,
}

#[async_trait::async_trait]
impl<Q: ChannelQuestions> ChannelQuestions for DiesDrawing<Q> {
    async fn render(&self, _args: RenderArgs<'_>) -> Result<Vec<RenderedQuestion>, BoxError> {
        self.entered.notify_one();
        std::future::pending().await
    }

    fn parse(&self, args: ParseArgs<'_>) -> ParseResult {
        self.inner.parse(args)
    }

    async fn settled(&self, args: HookArgs<'_>, how: Settlement<'_>) -> Changed {
        self.inner.settled(args, how).await
    }

    async fn notify(&self, args: HookArgs<'_>, to: NoticeTo<'_>) -> Result<(), BoxError> {
        self.inner.notify(args, to).await
    }
}

/// An outbox whose posts never return: the process dies while posting.
struct DiesPosting(Arc<Notify>);

/// Not a `Draw`: none of the shared delivery loops (the defaults post with `post_reply`).
impl OutboxDelivery for DiesPosting {}

#[async_trait::async_trait]
impl ChannelOutbox for DiesPosting {
    async fn post_reply(&self, _thread: &Thread, _reply: &UiMessage) -> Result<(), BoxError> {
        self.0.notify_one();
        std::future::pending().await
    }
}

/// Waits (12 s at most: the grace is 2 s, the worker polls every 100 ms) for a `sendMessage`
/// whose text contains `needle`.
async fn posted(fake: &FakeBotApi, needle: &'static str) -> bool {
    tokio::time::timeout(
        Duration::from_secs(12),
        fake.wait_for(needle, move |calls| {
            calls
                .iter()
                .any(|c| {
                    c.method == "sendmessage"
                        && c.body["text"].as_str().is_some_and(|t| t.contains(needle))
                })
                .then_some(())
        }),
    )
    .await
    .is_ok()
}

/// A turn stops to wait on a question; its process posts the text before it (and deletes the
/// delivery job) and dies while drawing the question. A healthy process must draw it (the
/// person cannot answer a question they never see; the chat waits on it meanwhile).
async fn a_question_is_drawn_after_its_process_died(db: TestDb, text_before: bool) {
    let fake = FakeBotApi::start().await;
    let drawing = Arc::new(Notify::new());
    let a = Process::start();
    let engine_a = {
        let (url, fake, drawing) = (db.url.clone(), fake.clone(), drawing.clone());
        a.run(async move {
            let store = frogbot_testkit::open_store(&url).await;
            let hooks = DiesDrawing {
                inner: TelegramQuestions::new(fake.bot()),
                entered: drawing,
            };
            let outbox = Arc::new(TelegramOutbox::new(fake.bot()));
            let engine = telegram_engine(store, asking(text_before), Some(Arc::new(hooks)), outbox);
            engine
                .channels()
                .message("telegram", THREAD, said("ask me"))
                .await
                .unwrap();
            engine
        })
        .await
    };
    tokio::time::timeout(WAIT_DEATH, drawing.notified())
        .await
        .expect("the first process draws the question");
    if text_before {
        assert!(
            posted(&fake, "Let me ask first.").await,
            "the text before it is posted"
        );
    }
    a.kill();
    // A dead process's memory is never freed either.
    std::mem::forget(engine_a);

    let store = frogbot_testkit::open_store(&db.url).await;
    let chat = store
        .get_channel_chat("telegram", THREAD)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(chat.state(now_millis()), TurnState::Awaiting);
    let b = telegram_engine(
        store,
        asking(text_before),
        Some(Arc::new(TelegramQuestions::new(fake.bot()))),
        Arc::new(TelegramOutbox::new(fake.bot())),
    );
    let worker = b.spawn_worker(Duration::from_millis(100));
    let shown = posted(&fake, "Go on?").await;
    worker.abort();
    assert!(
        shown,
        "the chat waits on a question its thread never sees (text before it: {text_before})"
    );
}

async fn a_question_after_text_is_drawn_after_its_process_died(db: TestDb) {
    a_question_is_drawn_after_its_process_died(db, true).await;
}

async fn a_question_alone_is_drawn_after_its_process_died(db: TestDb) {
    a_question_is_drawn_after_its_process_died(db, false).await;
}

/// A turn's process dies (its model never answered); a second process finds the lease run out,
/// marks the reply interrupted and dies while posting it. A healthy third process must post it:
/// the person is owed "my reply was interrupted".
async fn an_interrupted_reply_is_posted_after_its_finder_died(db: TestDb) {
    let fake = FakeBotApi::start().await;
    let silent = || {
        ScriptedModel::new(|_: &ModelRequest| vec![ScriptEvent::Pause(Duration::from_secs(3_600))])
    };
    let store = frogbot_testkit::open_store(&db.url).await;

    let a = Process::start();
    let engine_a = {
        let (url, fake) = (db.url.clone(), fake.clone());
        a.run(async move {
            let store = frogbot_testkit::open_store(&url).await;
            let outbox = Arc::new(TelegramOutbox::new(fake.bot()));
            let engine = telegram_engine(store, silent(), None, outbox);
            engine
                .channels()
                .message("telegram", THREAD, said("hello"))
                .await
                .unwrap();
            engine
        })
        .await
    };
    let deadline = Instant::now() + WAIT_DEATH;
    while !store
        .get_channel_chat("telegram", THREAD)
        .await
        .unwrap()
        .is_some_and(|c| c.state(now_millis()) == TurnState::Running)
    {
        assert!(Instant::now() < deadline, "the first process's turn runs");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.kill();
    std::mem::forget(engine_a);

    let posting = Arc::new(Notify::new());
    let b = Process::start();
    let engine_b = {
        let (url, posting) = (db.url.clone(), posting.clone());
        b.run(async move {
            let store = frogbot_testkit::open_store(&url).await;
            let engine = telegram_engine(store, silent(), None, Arc::new(DiesPosting(posting)));
            drop(engine.spawn_worker(Duration::from_millis(100)));
            engine
        })
        .await
    };
    tokio::time::timeout(WAIT_DEATH, posting.notified())
        .await
        .expect("the second process posts the interrupted reply");
    b.kill();
    std::mem::forget(engine_b);

    let c = telegram_engine(
        store,
        silent(),
        None,
        Arc::new(TelegramOutbox::new(fake.bot())),
    );
    let worker = c.spawn_worker(Duration::from_millis(100));
    let told = posted(&fake, "My reply was interrupted").await;
    worker.abort();
    assert!(told, "the interrupted reply never reaches its thread");
}

/// How long a step of the regressions above may take before it fails.
const WAIT_DEATH: Duration = Duration::from_secs(20);

frogbot_testkit::backends!(db:
    crash_during_delivery,
    a_question_after_text_is_drawn_after_its_process_died,
    a_question_alone_is_drawn_after_its_process_died,
    an_interrupted_reply_is_posted_after_its_finder_died,
);
