//! Helpers of `tests/crash.rs` (the "crash during delivery" suite): a scripted OpenAI-compatible
//! model server that lives in the test process (so it survives the `frogbot serve` child being
//! killed), the scripts of the conversations, and a log of what the fake Telegram Bot API was
//! sent, per chat, that the conversations wait on.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::Response;
use frogbot_telegram::testing::{Call, FakeBotApi};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::watch;

/// What a user message of a conversation asks the scripted model for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// A short reply.
    Hi,
    /// A reply long enough to be split into several Telegram messages (about 9,000 characters).
    Long,
    /// Some text, then a question (the `question` tool); after the answer, a long reply.
    Ask,
    /// A question with no text before it; after the answer, a short reply.
    Quiz,
}

impl Kind {
    pub(crate) const ALL: [Kind; 4] = [Kind::Hi, Kind::Long, Kind::Ask, Kind::Quiz];

    pub(crate) fn word(self) -> &'static str {
        match self {
            Kind::Hi => "hi",
            Kind::Long => "long",
            Kind::Ask => "ask",
            Kind::Quiz => "quiz",
        }
    }

    fn from_word(w: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.word() == w)
    }

    /// Whether the model asks a question on this kind.
    pub(crate) fn asks(self) -> bool {
        matches!(self, Kind::Ask | Kind::Quiz)
    }
}

/// The text a user sends for step `s` of conversation `c`.
pub(crate) fn user_text(kind: Kind, c: usize, s: usize) -> String {
    format!("{} c{c} s{s}", kind.word())
}

/// The token the model's final text of step `s` of conversation `c` ends with.
pub(crate) fn end_mark(c: usize, s: usize) -> String {
    format!("DONEc{c}s{s}Z")
}

/// The words of a long reply: distinct per conversation, step and part, plain letters and digits
/// (nothing Markdown or HTML would change).
fn long_words(c: usize, s: usize, part: &str, chars: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < chars {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&format!("{part}{c}x{s}y{i}"));
        i += 1;
    }
    out
}

/// Reads `kind cN sM` out of a user message's text (a channel may prefix it).
fn parse_tag(text: &str) -> Option<(Kind, usize, usize)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words.windows(3).find_map(|w| {
        let kind = Kind::from_word(w[0].trim_start_matches('@'))?;
        let c = w[1].strip_prefix('c')?.parse().ok()?;
        let s = w[2].strip_prefix('s')?.parse().ok()?;
        Some((kind, c, s))
    })
}

fn content_text(m: &Value) -> String {
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// What the scripted model answers one request with.
#[derive(Debug)]
enum Answer {
    /// Text, streamed in pieces, then `stop`.
    Text(String),
    /// Optional text, then a `question` tool call.
    Question(String, Value),
}

/// The script: the latest user message names the kind, conversation and step; a tool result
/// (the answer to the question) gets the text that follows it.
fn answer(messages: &[Value], call_no: u64) -> Answer {
    let last_user = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(content_text)
        .unwrap_or_default();
    let Some((kind, c, s)) = parse_tag(&last_user) else {
        return Answer::Text(format!("I did not understand {last_user:?}."));
    };
    let end = end_mark(c, s);
    if let Some(tool) = messages.last().filter(|m| m["role"] == "tool") {
        let result = content_text(tool);
        let picked = serde_json::from_str::<Value>(&result)
            .ok()
            .and_then(|v| v["answers"][0]["selected"][0].as_str().map(str::to_owned))
            .unwrap_or_else(|| "nothing".into());
        let text = match kind {
            Kind::Ask => format!(
                "You chose {picked} for c{c} s{s}. {} {end}",
                long_words(c, s, "a", 6_000)
            ),
            _ => format!("You chose {picked} for c{c} s{s}. {end}"),
        };
        return Answer::Text(text);
    }
    let question = json!({"questions": [{
        "header": "Colour",
        "question": format!("Which colour for c{c} s{s}?"),
        "options": [{"label": "Red"}, {"label": "Green"}, {"label": "Blue"}]
    }]});
    match kind {
        Kind::Hi => Answer::Text(format!("Hello, this answers c{c} s{s}. {end}")),
        Kind::Long => Answer::Text(format!(
            "Here is a long one for c{c} s{s}. {} {end}",
            long_words(c, s, "w", 9_000)
        )),
        Kind::Ask => Answer::Question(
            format!("Let me ask you about c{c} s{s} first. Call {call_no}."),
            question,
        ),
        Kind::Quiz => Answer::Question(String::new(), question),
    }
}

/// The scripted OpenAI-compatible Chat Completions server (`POST /v1/chat/completions`,
/// streamed), running in the test process.
#[derive(Clone, Debug)]
pub(crate) struct FakeModel {
    /// `http://127.0.0.1:PORT/v1`.
    pub(crate) base_url: String,
    shared: Arc<ModelShared>,
}

#[derive(Debug, Default)]
struct ModelShared {
    calls: std::sync::atomic::AtomicU64,
    /// Tool call id → how many requests continued after its result.
    continued: Mutex<HashMap<String, u32>>,
}

impl FakeModel {
    /// Starts the server on a free loopback port.
    pub(crate) async fn start() -> FakeModel {
        let shared = Arc::new(ModelShared::default());
        let app = axum::Router::new()
            .fallback(completions)
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeModel {
            base_url: format!("http://{addr}/v1"),
            shared,
        }
    }

    /// How many completions were requested.
    pub(crate) fn calls(&self) -> u64 {
        self.shared.calls.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Tool call id → how many model requests carried its result.
    pub(crate) fn continued(&self) -> HashMap<String, u32> {
        self.shared.continued.lock().unwrap().clone()
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> Bytes {
    let c = json!({
        "id": "chatcmpl-crash", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "scripted", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    });
    Bytes::from(format!("data: {c}\n\n"))
}

async fn completions(State(shared): State<Arc<ModelShared>>, body: Bytes) -> Response {
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some(messages) = req["messages"].as_array() else {
        return Response::builder()
            .status(StatusCode::BAD_REQUEST)
            .body(Body::from(r#"{"error":{"message":"no messages"}}"#))
            .unwrap();
    };
    let n = shared
        .calls
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    if let Some(id) = messages
        .last()
        .filter(|m| m["role"] == "tool")
        .and_then(|m| m["tool_call_id"].as_str())
    {
        *shared
            .continued
            .lock()
            .unwrap()
            .entry(id.to_owned())
            .or_default() += 1;
    }
    let mut pieces = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    let (text, call) = match answer(messages, n) {
        Answer::Text(t) => (t, None),
        Answer::Question(t, q) => (t, Some(q)),
    };
    // About 300 characters every 30 ms: a 9,000-character reply streams for about a second.
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(300) {
        let piece: String = piece.iter().collect();
        pieces.push(chunk(json!({"content": piece}), None));
    }
    match call {
        Some(q) => {
            pieces.push(chunk(
                json!({"tool_calls": [{
                    "index": 0, "id": format!("call_{n}_{}", uuid::Uuid::new_v4().simple()),
                    "type": "function",
                    "function": {"name": "question", "arguments": q.to_string()}
                }]}),
                None,
            ));
            pieces.push(chunk(json!({}), Some("tool_calls")));
        }
        None => pieces.push(chunk(json!({}), Some("stop"))),
    }
    pieces.push(Bytes::from_static(b"data: [DONE]\n\n"));
    let body = futures::stream::iter(pieces.into_iter().enumerate()).then(|(i, b)| async move {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        Ok::<_, std::io::Error>(b)
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .unwrap()
}

/// What the fake Bot API was sent, per chat: the bot's messages in the order they were sent, and
/// a watch per chat bumped on every message or edit there; plus the highest `getUpdates` offset
/// (every update below it is confirmed).
#[derive(Clone, Debug)]
pub(crate) struct BotLog {
    chats: Arc<Mutex<HashMap<i64, Vec<i64>>>>,
    watches: Arc<HashMap<i64, watch::Sender<u64>>>,
    offset: Arc<std::sync::atomic::AtomicI64>,
    /// Messages sent or edited so far, in every chat.
    activity: Arc<std::sync::atomic::AtomicU64>,
}

impl BotLog {
    /// Follows `fake`'s calls (a task of the test's runtime) for the chats `chats`.
    pub(crate) fn follow(fake: &FakeBotApi, chats: impl IntoIterator<Item = i64>) -> BotLog {
        let watches: HashMap<i64, watch::Sender<u64>> = chats
            .into_iter()
            .map(|c| (c, watch::channel(0).0))
            .collect();
        let log = BotLog {
            chats: Arc::default(),
            watches: Arc::new(watches),
            offset: Arc::default(),
            activity: Arc::default(),
        };
        let (fake, me) = (fake.clone(), log.clone());
        tokio::spawn(async move {
            let mut cursor = 0;
            loop {
                // `wait_for` fails after its own 20 s; this gives up sooner and waits again.
                let seen = tokio::time::timeout(
                    Duration::from_secs(5),
                    fake.wait_for("more Bot API calls", move |calls: &[Call]| {
                        (calls.len() > cursor).then(|| (calls.len(), events(&calls[cursor..])))
                    }),
                )
                .await;
                let Ok((len, events)) = seen else { continue };
                cursor = len;
                me.apply(events);
            }
        });
        log
    }

    fn apply(&self, events: Vec<Event>) {
        let mut touched = Vec::new();
        {
            let mut chats = self.chats.lock().unwrap();
            for e in events {
                match e {
                    Event::Sent(chat, id) => {
                        chats.entry(chat).or_default().push(id);
                        touched.push(chat);
                    }
                    Event::Edited(chat) => touched.push(chat),
                    Event::Offset(o) => {
                        self.offset
                            .fetch_max(o, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            }
        }
        self.activity
            .fetch_add(touched.len() as u64, std::sync::atomic::Ordering::SeqCst);
        touched.sort_unstable();
        touched.dedup();
        for chat in touched {
            if let Some(w) = self.watches.get(&chat) {
                w.send_modify(|n| *n += 1);
            }
        }
    }

    /// The bot's messages in `chat`, in the order they were sent.
    pub(crate) fn sent(&self, chat: i64) -> Vec<i64> {
        self.chats
            .lock()
            .unwrap()
            .get(&chat)
            .cloned()
            .unwrap_or_default()
    }

    /// A watch bumped whenever the bot sends or edits a message in `chat`.
    pub(crate) fn watch(&self, chat: i64) -> watch::Receiver<u64> {
        self.watches
            .get(&chat)
            .map(watch::Sender::subscribe)
            .expect("a followed chat")
    }

    /// How many messages were sent or edited so far, in every chat.
    pub(crate) fn activity(&self) -> u64 {
        self.activity.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The highest `offset` a `getUpdates` call carried: every update below it is confirmed.
    pub(crate) fn confirmed_below(&self) -> i64 {
        self.offset.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[derive(Debug)]
enum Event {
    Sent(i64, i64),
    Edited(i64),
    Offset(i64),
}

fn events(calls: &[Call]) -> Vec<Event> {
    calls
        .iter()
        .filter_map(|c| match c.method.as_str() {
            "sendmessage" => {
                let r = c.result.as_ref()?;
                Some(Event::Sent(
                    r["chat"]["id"].as_i64()?,
                    r["message_id"].as_i64()?,
                ))
            }
            "editmessagetext" | "editmessagereplymarkup" => {
                let r = c.result.as_ref()?;
                Some(Event::Edited(r["chat"]["id"].as_i64()?))
            }
            "getupdates" => Some(Event::Offset(c.body["offset"].as_i64()?)),
            _ => None,
        })
        .collect()
}

/// `text` without any whitespace (Telegram pieces are cut at whitespace and trimmed; a notice is
/// joined with blank lines).
pub(crate) fn squash(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Where each of `segments` (whitespace squashed) is found, in order, in the concatenation of
/// `pieces` (squashed): which pieces the found segments cover, and the indexes of the segments
/// not found after the previous one found (the search goes on after them).
pub(crate) fn cover(pieces: &[String], segments: &[String]) -> (Vec<bool>, Vec<usize>) {
    let mut all = String::new();
    let mut bounds = Vec::new();
    for p in pieces {
        let start = all.len();
        all.push_str(p);
        bounds.push((start, all.len()));
    }
    let mut used = vec![false; pieces.len()];
    let mut missing = Vec::new();
    let mut at = 0;
    for (i, seg) in segments.iter().enumerate() {
        if seg.is_empty() {
            continue;
        }
        let Some(found) = all[at..].find(seg.as_str()) else {
            missing.push(i);
            continue;
        };
        let (start, end) = (at + found, at + found + seg.len());
        for (j, &(s, e)) in bounds.iter().enumerate() {
            if s < end && start < e {
                used[j] = true;
            }
        }
        at = end;
    }
    (used, missing)
}

#[test]
fn tags_are_read_and_segments_found_in_order() {
    assert_eq!(parse_tag("Ada: long c12 s3"), Some((Kind::Long, 12, 3)));
    assert_eq!(parse_tag("hello"), None);
    let pieces: Vec<String> = ["ab", "cd", "ab", "cdef", "x"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    // A repeated piece is left unused; order matters.
    assert_eq!(
        cover(&pieces, &["abcd".into(), "ef".into()]),
        (vec![true, true, false, true, false], vec![])
    );
    assert_eq!(
        cover(&pieces, &["x".into(), "ab".into(), "zz".into()]),
        (vec![false, false, false, false, true], vec![1, 2])
    );
}

/// A "process" in the test: a runtime of its own on its own thread. [`Process::kill`] drops every
/// task it runs at once, where they stand — as SIGKILL would (what it wrote stays in the store).
#[derive(Debug)]
pub(crate) struct Process {
    handle: tokio::runtime::Handle,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Process {
    pub(crate) fn start() -> Process {
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            handle_tx.send(rt.handle().clone()).unwrap();
            let _ = stopped.recv();
            rt.shutdown_background();
        });
        Process {
            handle: handle_rx.recv().unwrap(),
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Runs `work` in the process and waits for its result.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> T {
        self.handle.spawn(work).await.expect("the process ran it")
    }

    /// Starts `work` in the process.
    pub(crate) fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        drop(self.handle.spawn(work));
    }

    /// Drops everything the process runs.
    pub(crate) fn kill(mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}
