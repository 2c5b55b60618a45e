//! A fake Telegram Bot API for tests (feature `testing`), like matrix-sdk's `MatrixMockServer`:
//! [`FakeBotApi`] is an HTTP server on 127.0.0.1 speaking the Bot API's shapes
//! (`{"ok": true, "result": …}` / `{"ok": false, "error_code", "description"}`) for `getMe`,
//! `getWebhookInfo`, `getUpdates` (a long poll: held until an update is queued or `timeout` passes; `offset`
//! confirms and forgets earlier updates), `setWebhook`, `deleteWebhook`, `sendMessage`,
//! `editMessageText`, `editMessageReplyMarkup`, `answerCallbackQuery`, and for agent messages
//! `sendPhoto` (an http(s) URL; a caption of at most 1,024 characters after entity parsing),
//! `editMessageMedia` (a photo, also onto a text message), `deleteMessage` ("message to delete
//! not found" once gone), `pinChatMessage` / `unpinChatMessage` ([`FakeBotApi::pinned`]); an
//! `editMessageText` of a photo is refused ("there is no text in the message to edit"). It keeps every message
//! it knows (the bot's, with their current keyboards, and the users' it made), records every call
//! with its arrival time, and refuses what Telegram refuses: texts of 0 or more than 4,096
//! characters (counted after entity parsing with `parse_mode` `HTML`), HTML it cannot parse
//! (unknown or unbalanced tags, `code` / `pre` inside another entity, a bare `<`, `>` or `&`:
//! "Bad Request: can't parse entities: …"), callback data of 0 or more than 64 bytes, more than 100 buttons or 8 in a row,
//! a ForceReply whose `force_reply` is not `true` or whose `input_field_placeholder` is not 1–64
//! characters, an edit whose `reply_markup` is no inline keyboard,
//! notices over 200 characters, an edit that changes nothing, a message that does not exist; a
//! token it was told to refuse gets `401 Unauthorized`. The push side: [`FakeBotApi::push`] queues
//! an update for `getUpdates`, [`post_update`] posts one to a bot's webhook with the secret token.
//!
//! Faults ([`FakeBotApi::inject_faults`]): a [`FaultPlan`] decides for each call of the chosen
//! methods whether it fails, as Telegram and the network do: `500` `{"ok": false, "error_code":
//! 500, "description": "Internal Server Error"}` (nothing done); `429` `{"ok": false,
//! "error_code": 429, "description": "Too Many Requests: retry after N", "parameters":
//! {"retry_after": N}}` (whole seconds, at least 1; nothing done); a timeout (the request is held
//! past the client's timeout, then answered `500`; nothing done — see
//! [`FakeBotApi::bot_with_timeout`]); a reset after processing (the call is carried out — a
//! `sendMessage` posts its message — then the answer is cut off: the status line goes out, the
//! body fails and the connection is dropped).
//!
//! What a person sees ([`FakeBotApi::person_view`], [`SeenMessage`], [`transcript`]): the
//! messages of a chat, topic or agent conversation in order after edits and deletions — sender,
//! text as a client renders it, photo, inline keyboard rows, the ForceReply field, the bot's
//! reaction, whether its posting notified (every `sendMessage` / `sendPhoto` does unless it
//! carries `disable_notification`, which Telegram documents as "a notification with no sound";
//! edits never notify) and whether it was edited — and a draft (`sendMessageDraft`, private chats)
//! while one shows: the ephemeral preview of a reply being written, which the messages sent at
//! the end replace.
//!
//! Also here: builders of real update shapes ([`user`], [`private_chat`], [`group_chat`],
//! [`text_update`], [`callback_update`]) and [`ConformanceHarness`], the `ChannelQuestions`
//! conformance harness over the fake.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use frogbot_model::conformance::{Harness, Limits};
use frogbot_model::faults::{Fault, FaultPlan};
use frogbot_model::{
    ChannelQuestions, Interaction, PlatformUser, QuestionCall, QuestionRecord, Thread,
};
use serde_json::{Value, json};
use teloxide::Bot;
use tokio::sync::watch;

use crate::convert::{interaction, parse_update};
use crate::ids::{MAX_CALLBACK_DATA, split_message_id};
use crate::render::{
    MAX_BUTTON_TEXT, MAX_BUTTONS, MAX_CAPTION, MAX_NOTICE, MAX_PLACEHOLDER, MAX_TEXT,
};
use crate::{PLATFORM, TelegramQuestions};

/// The bot's own user id.
pub const BOT_ID: i64 = 999;
/// The bot's username.
pub const BOT_USERNAME: &str = "frogbot";
/// The token [`FakeBotApi::bot`] uses.
pub const TOKEN: &str = "123456:TEST-token";
/// How long [`FakeBotApi::wait_for`] waits for a condition before failing.
pub const WAIT: Duration = Duration::from_secs(20);
/// The most buttons Telegram accepts in one row of an inline keyboard.
pub const MAX_ROW: usize = 8;
/// What Telegram answers an edit that changes nothing.
pub const NOT_MODIFIED: &str = "Bad Request: message is not modified: specified new message \
    content and reply markup are exactly the same as a current content and reply markup of the message";

/// One recorded Bot API call.
#[derive(Clone, Debug)]
pub struct Call {
    /// The method, lower case (`sendmessage`).
    pub method: String,
    /// Its parameters (the JSON body, or the fields of a multipart form).
    pub body: Value,
    /// The `result` the fake answered with (`None` for errors and `getUpdates`).
    pub result: Option<Value>,
    /// When it arrived.
    pub at: Instant,
    /// The fault injected into it, if any (a reset call was carried out: its `result` is set).
    pub fault: Option<Fault>,
}

/// The webhook a bot registered (`setWebhook`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Webhook {
    /// The public URL.
    pub url: String,
    /// The secret token Telegram sends in `X-Telegram-Bot-Api-Secret-Token`.
    pub secret: Option<String>,
}

struct Inner {
    calls: Mutex<Vec<Call>>,
    /// Updates not yet confirmed by an `offset`.
    pending: Mutex<Vec<Value>>,
    /// update_id → when `getUpdates` first returned it.
    served: Mutex<HashMap<i64, Instant>>,
    /// Every message the fake knows, by message id (ids are unique across chats here).
    messages: Mutex<HashMap<i64, Value>>,
    /// The bot's messages posted with `disable_notification`, and those whose text or media was
    /// edited (kept as the message changes, under its lock: what a person sees).
    silent: Mutex<HashSet<i64>>,
    edited: Mutex<HashSet<i64>>,
    /// Callback query id → the user who clicked.
    queries: Mutex<HashMap<String, i64>>,
    /// Callback queries already answered (Telegram takes one answer per query).
    answered: Mutex<HashSet<String>>,
    webhook: Mutex<Option<Webhook>>,
    next_update: AtomicI64,
    next_message: AtomicI64,
    next_query: AtomicI64,
    /// How many `sendMessage` calls carrying an inline keyboard still get a 429.
    throttle_keyboard_sends: AtomicU32,
    refuse_token: AtomicBool,
    /// Set: `sendMessageDraft` is refused with this description.
    refuse_drafts: Mutex<Option<String>>,
    /// The fault plan and the methods it applies to (empty: all but `getUpdates`).
    faults: Mutex<Option<(Arc<FaultPlan>, Vec<String>)>>,
    queued: watch::Sender<u64>,
    recorded: watch::Sender<u64>,
    /// The newest `getUpdates` call's number: an older one still waiting is ended with 409
    /// Conflict, as Telegram does when two pollers share a bot.
    poller: AtomicU64,
    /// How many `getUpdates` calls were ended by a newer one (409 Conflict).
    conflicts: AtomicU64,
}

/// One message of a chat as a person sees it in a Telegram client ([`FakeBotApi::person_view`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenMessage {
    /// Its message id (not in [`transcript`]: ids vary from run to run).
    pub id: i64,
    /// Who sent it: the sender's first and last name (the bot is `FrogBot`).
    pub sender: String,
    /// Its text after edits, as shown (HTML parsed: what a client renders, without the tags); a
    /// photo's caption; a draft's text.
    pub text: String,
    /// The URL of the photo it shows, for a photo.
    pub photo: Option<String>,
    /// Its inline keyboard now: each row's button texts.
    pub buttons: Vec<Vec<String>>,
    /// Its ForceReply, when it asks for a reply: the client opens a reply to it with this
    /// placeholder in the input field (`""` without one).
    pub reply_field: Option<String>,
    /// The message it replies to (a client shows it quoted above).
    pub reply_to: Option<i64>,
    /// Its reactions: each emoji with who reacted (the fake knows only the bot's own).
    pub reactions: Vec<(String, Vec<String>)>,
    /// Whether its posting notified: every `sendMessage` / `sendPhoto` does unless it carries
    /// `disable_notification` ("silent": Telegram then notifies with no sound); edits never
    /// notify; a draft never does.
    pub notified: bool,
    /// Whether it was edited (`editMessageText`, `editMessageMedia`: the client marks it
    /// "edited"; a keyboard-only edit is not marked).
    pub edited: bool,
    /// A message draft (`sendMessageDraft`, private chats only) still showing: the ephemeral
    /// preview of a reply being written, which the message the bot sends next replaces (then it
    /// is gone from the view). Only a draft no message followed is shown.
    pub draft: bool,
}

/// The view as stable plain text for golden files: one block per message, `[n] sender
/// (notified|silent)(, edited)(, draft)`, `↪ [k]` when it replies to message `k` of the view, the
/// text indented, then a `photo:` line, one `buttons:` line per keyboard row, a `reply field:`
/// line and a `reactions:` line. No ids or times.
pub fn transcript(seen: &[SeenMessage]) -> String {
    let mut out = String::new();
    for (n, m) in seen.iter().enumerate() {
        let mut head = format!(
            "[{}] {} ({}",
            n + 1,
            m.sender,
            if m.notified { "notified" } else { "silent" }
        );
        if m.edited {
            head.push_str(", edited");
        }
        if m.draft {
            head.push_str(", draft");
        }
        head.push(')');
        if let Some(r) = m.reply_to {
            match seen.iter().position(|x| x.id == r) {
                Some(k) => head.push_str(&format!(" ↪ [{}]", k + 1)),
                None => head.push_str(" ↪ a message not in view"),
            }
        }
        out.push_str(&head);
        out.push('\n');
        for line in m.text.lines() {
            if line.is_empty() {
                out.push('\n');
            } else {
                out.push_str(&format!("    {line}\n"));
            }
        }
        if let Some(url) = &m.photo {
            out.push_str(&format!("    photo: {url}\n"));
        }
        for row in &m.buttons {
            let row: Vec<String> = row.iter().map(|b| format!("[ {b} ]")).collect();
            out.push_str(&format!("    buttons: {}\n", row.join(" ")));
        }
        if let Some(p) = &m.reply_field {
            out.push_str(&format!("    reply field: «{p}»\n"));
        }
        if !m.reactions.is_empty() {
            let r: Vec<String> = m
                .reactions
                .iter()
                .map(|(e, by)| format!("{e} by {}", by.join(", ")))
                .collect();
            out.push_str(&format!("    reactions: {}\n", r.join("; ")));
        }
    }
    out
}

/// The running fake Bot API (cheap to clone; the server runs until the runtime ends).
#[derive(Clone)]
pub struct FakeBotApi {
    inner: Arc<Inner>,
    /// Its base URL (`http://127.0.0.1:port/`), for `Bot::set_api_url` / `api_url`.
    pub url: String,
}

impl std::fmt::Debug for FakeBotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeBotApi")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl FakeBotApi {
    /// Starts the fake on a free local port.
    pub async fn start() -> FakeBotApi {
        let inner = Arc::new(Inner {
            calls: Mutex::default(),
            pending: Mutex::default(),
            served: Mutex::default(),
            messages: Mutex::default(),
            silent: Mutex::default(),
            edited: Mutex::default(),
            queries: Mutex::default(),
            answered: Mutex::default(),
            webhook: Mutex::default(),
            next_update: AtomicI64::new(1),
            next_message: AtomicI64::new(100),
            next_query: AtomicI64::new(1),
            throttle_keyboard_sends: AtomicU32::new(0),
            refuse_token: AtomicBool::new(false),
            refuse_drafts: Mutex::new(None),
            faults: Mutex::new(None),
            queued: watch::channel(0).0,
            recorded: watch::channel(0).0,
            poller: AtomicU64::new(0),
            conflicts: AtomicU64::new(0),
        });
        let app = Router::new().fallback(api).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free local port");
        let addr = listener.local_addr().expect("a bound address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeBotApi {
            inner,
            url: format!("http://{addr}/"),
        }
    }

    /// The base URL, parsed.
    pub fn api_url(&self) -> url::Url {
        url::Url::parse(&self.url).expect("the fake's URL is valid")
    }

    /// A teloxide client pointed at the fake.
    pub fn bot(&self) -> Bot {
        Bot::new(TOKEN).set_api_url(self.api_url())
    }

    /// A teloxide client pointed at the fake that gives up on a call after `timeout` (what an
    /// injected [`Fault::Timeout`] needs to end soon).
    pub fn bot_with_timeout(&self, timeout: Duration) -> Bot {
        let client = teloxide::net::default_reqwest_settings()
            .timeout(timeout)
            .build()
            .expect("a reqwest client");
        Bot::with_client(TOKEN, client).set_api_url(self.api_url())
    }

    /// From now on each call of `methods` (lower case, e.g. `sendmessage`; empty: every method
    /// but `getUpdates`) asks `plan` whether to fail (see the module for how each fault looks).
    pub fn inject_faults(&self, plan: Arc<FaultPlan>, methods: &[&str]) {
        let methods = methods.iter().map(|m| m.to_lowercase()).collect();
        *self.inner.faults.lock().expect("not poisoned") = Some((plan, methods));
    }

    /// The emojis of the bot's reactions on the message `message_id` now (`setMessageReaction`
    /// replaces them).
    pub fn bot_reactions(&self, message_id: i64) -> Vec<String> {
        let messages = self.inner.messages.lock().expect("not poisoned");
        messages
            .get(&message_id)
            .and_then(|m| m["bot_reactions"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|r| r["emoji"].as_str().map(str::to_owned))
            .collect()
    }

    /// From now on `sendMessageDraft` is refused with `description` (`None`: drafts work again), as
    /// Telegram refuses bots that may not draft.
    pub fn refuse_drafts(&self, description: Option<&str>) {
        *self.inner.refuse_drafts.lock().expect("not poisoned") = description.map(str::to_owned);
    }

    /// From now on every call gets `401 Unauthorized`, as Telegram answers a revoked token.
    pub fn refuse_token(&self) {
        self.inner.refuse_token.store(true, Ordering::SeqCst);
    }

    /// Queues an update (`{"message": …}` etc.) for `getUpdates`; its `update_id` is assigned
    /// unless given. Returns the `update_id`. The id is assigned and the update queued under one
    /// lock, so updates are visible in id order, as Telegram's are (two pushes racing queued a
    /// higher id first; a bot confirming it then lost the lower one — a loss of the fake's making
    /// that the crash suite reported).
    pub fn push(&self, mut update: Value) -> i64 {
        let mut pending = self.inner.pending.lock().expect("not poisoned");
        let id = match update["update_id"].as_i64() {
            Some(id) => {
                self.inner.next_update.fetch_max(id + 1, Ordering::SeqCst);
                id
            }
            None => {
                let id = self.inner.next_update.fetch_add(1, Ordering::SeqCst);
                update["update_id"] = json!(id);
                id
            }
        };
        self.note_query(&update);
        // A message a person sends is one the bot may react to later.
        if let Some(id) = update["message"]["message_id"].as_i64() {
            self.inner
                .messages
                .lock()
                .expect("not poisoned")
                .entry(id)
                .or_insert_with(|| update["message"].clone());
        }
        pending.push(update);
        drop(pending);
        self.inner.queued.send_modify(|n| *n += 1);
        id
    }

    fn note_query(&self, update: &Value) {
        let q = &update["callback_query"];
        if let (Some(id), Some(from)) = (q["id"].as_str(), q["from"]["id"].as_i64()) {
            self.inner
                .queries
                .lock()
                .expect("not poisoned")
                .insert(id.to_owned(), from);
        }
    }

    /// A `callback_query` update: `from` clicked the button with `data` under message
    /// `message_id` as the fake shows it now (the query id is made up and remembered).
    pub fn click(&self, from: &Value, message_id: i64, data: &str) -> Value {
        let n = self.inner.next_query.fetch_add(1, Ordering::SeqCst);
        let update = callback_update(
            &format!("fake-cbq-{n}"),
            from.clone(),
            self.sent(message_id),
            data,
        );
        self.note_query(&update);
        update
    }

    /// A message `from` writes in `chat` (replying to message `reply_to` when set), as a
    /// `message` update; the fake keeps the message. Not queued: [`Self::push`] it, post it, or
    /// convert it.
    pub fn user_message(
        &self,
        chat: Value,
        from: Value,
        text: &str,
        reply_to: Option<i64>,
    ) -> Value {
        let id = self.inner.next_message.fetch_add(1, Ordering::SeqCst);
        let mut m = json!({
            "message_id": id, "date": now(), "chat": chat, "from": from, "text": text
        });
        if let Some(r) = reply_to {
            m["reply_to_message"] = as_reply_to(&self.sent(r));
        }
        self.inner
            .messages
            .lock()
            .expect("not poisoned")
            .insert(id, m.clone());
        json!({"message": m})
    }

    /// A fresh message id (for [`text_update`] and the like).
    pub fn next_message_id(&self) -> i64 {
        self.inner.next_message.fetch_add(1, Ordering::SeqCst)
    }

    /// Makes the next `n` `sendMessage` calls that carry an inline keyboard fail with `429`.
    pub fn throttle_keyboard_sends(&self, n: u32) {
        self.inner
            .throttle_keyboard_sends
            .store(n, Ordering::SeqCst);
    }

    /// Every call so far.
    pub fn all_calls(&self) -> Vec<Call> {
        self.inner.calls.lock().expect("not poisoned").clone()
    }

    /// How many `getUpdates` calls a newer one ended with 409 Conflict (two pollers of one bot).
    pub fn conflicts(&self) -> u64 {
        self.inner.conflicts.load(Ordering::SeqCst)
    }

    /// The parameters of the calls of `method` (lower case).
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.inner
            .calls
            .lock()
            .expect("not poisoned")
            .iter()
            .filter(|c| c.method == method)
            .map(|c| c.body.clone())
            .collect()
    }

    /// When `getUpdates` first returned update `id`.
    pub fn served_at(&self, id: i64) -> Option<Instant> {
        self.inner
            .served
            .lock()
            .expect("not poisoned")
            .get(&id)
            .copied()
    }

    /// A message as the fake shows it now (text, keyboard); panics when it knows none.
    pub fn sent(&self, message_id: i64) -> Value {
        self.message(message_id)
            .unwrap_or_else(|| panic!("the fake knows no message {message_id}"))
    }

    /// The ids of the messages pinned in chat `chat` now, in id order.
    pub fn pinned(&self, chat: i64) -> Vec<i64> {
        let messages = self.inner.messages.lock().expect("not poisoned");
        let mut ids: Vec<i64> = messages
            .iter()
            .filter(|(_, m)| m["chat"]["id"] == chat && m["pinned"] == true)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// The ids of the bot's messages in chat `chat` the fake still shows (not deleted), in order.
    pub fn bot_messages(&self, chat: i64) -> Vec<i64> {
        let messages = self.inner.messages.lock().expect("not poisoned");
        let mut ids: Vec<i64> = messages
            .iter()
            .filter(|(_, m)| m["chat"]["id"] == chat && m["from"]["id"] == BOT_ID)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// A message as the fake shows it now, if it knows it.
    pub fn message(&self, message_id: i64) -> Option<Value> {
        self.inner
            .messages
            .lock()
            .expect("not poisoned")
            .get(&message_id)
            .cloned()
    }

    /// The webhook registered by the last `setWebhook` (`None` before, or after `deleteWebhook`).
    pub fn webhook(&self) -> Option<Webhook> {
        self.inner.webhook.lock().expect("not poisoned").clone()
    }

    /// How many buttons message `message_id` shows now.
    pub fn buttons(&self, message_id: i64) -> usize {
        self.message(message_id).map_or(0, |m| {
            m["reply_markup"]["inline_keyboard"]
                .as_array()
                .map_or(0, |rows| {
                    rows.iter().filter_map(Value::as_array).map(Vec::len).sum()
                })
        })
    }

    /// The latest message of the bot in `chat` asking for a reply (ForceReply) that no message
    /// of the fake replies to yet: a Telegram client opens the reply to it.
    pub fn open_force_reply(&self, chat: i64) -> Option<i64> {
        let messages = self.inner.messages.lock().expect("not poisoned");
        let answered: Vec<i64> = messages
            .values()
            .filter_map(|m| m["reply_to_message"]["message_id"].as_i64())
            .collect();
        messages
            .iter()
            .filter(|(id, m)| {
                m["chat"]["id"] == chat
                    && m["reply_markup"]["force_reply"] == true
                    && !answered.contains(id)
            })
            .map(|(id, _)| *id)
            .max()
    }

    /// Every text the bot showed user `user_id`: notices on their callback queries, and messages
    /// replying to one of theirs or mentioning them.
    pub fn notices(&self, user_id: i64) -> Vec<String> {
        let queries = self.inner.queries.lock().expect("not poisoned").clone();
        let messages = self.inner.messages.lock().expect("not poisoned").clone();
        let authored = |id: Option<i64>| {
            id.and_then(|id| messages.get(&id))
                .is_some_and(|m| m["from"]["id"] == user_id)
        };
        self.all_calls()
            .into_iter()
            .filter(|c| c.result.is_some())
            .filter_map(|c| match c.method.as_str() {
                "answercallbackquery" => {
                    let from = c.body["callback_query_id"]
                        .as_str()
                        .and_then(|q| queries.get(q));
                    (from == Some(&user_id))
                        .then(|| c.body["text"].as_str().map(str::to_owned))
                        .flatten()
                }
                "sendmessage" => {
                    let text = c.body["text"].as_str()?.to_owned();
                    let replies = authored(c.body["reply_parameters"]["message_id"].as_i64());
                    let mentions = c.body["entities"]
                        .as_array()
                        .is_some_and(|e| e.iter().any(|e| e["user"]["id"] == user_id));
                    (replies || mentions).then_some(text)
                }
                _ => None,
            })
            .collect()
    }

    /// What a person sees of the thread `thread_id` in a Telegram client, in order: a chat
    /// (`chat_id`: every message in it), a forum topic (`chat_id:topic`: the messages in the
    /// topic) or an agent conversation (`chat~root`: the root and the messages replying to it).
    /// Each message the fake still shows (deleted ones are gone) after its edits — the person's
    /// and the bot's — with its keyboard, its ForceReply, the bot's reaction, whether its posting
    /// notified and whether it was edited; last, a draft (`sendMessageDraft`) still showing,
    /// when one came after the bot's last message in the chat (a draft is an ephemeral preview
    /// of the reply being written, replaced by the message sent after it: a reply streamed with
    /// drafts shows as its final messages only). Ordered by message id (the fake numbers the
    /// messages it makes in order).
    pub fn person_view(&self, thread_id: &str) -> Vec<SeenMessage> {
        self.person_view_with(thread_id, &self.all_calls())
    }

    /// Waits until `ready` holds over what a person sees of `thread_id`
    /// ([`Self::person_view`]) and the calls so far (failing after [`WAIT`]); returns the view.
    pub async fn wait_view(
        &self,
        thread_id: &str,
        what: &str,
        ready: impl Fn(&[SeenMessage], &[Call]) -> bool,
    ) -> Vec<SeenMessage> {
        let mut rx = self.inner.recorded.subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let calls = self.all_calls();
            let seen = self.person_view_with(thread_id, &calls);
            if ready(&seen, &calls) {
                return seen;
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                panic!(
                    "timed out waiting for {what}; the person sees:\n{}",
                    transcript(&seen)
                );
            }
        }
    }

    fn person_view_with(&self, thread_id: &str, calls: &[Call]) -> Vec<SeenMessage> {
        let Ok((chat, topic)) = crate::ids::split_thread_id(thread_id) else {
            return Vec::new();
        };
        let root = crate::ids::thread_root(thread_id).map(|r| i64::from(r.0));
        let messages = self.inner.messages.lock().expect("not poisoned").clone();
        let mut ids: Vec<i64> = messages
            .iter()
            .filter(|(id, m)| {
                m["chat"]["id"] == chat.0
                    && topic.is_none_or(|t| m["message_thread_id"] == t.0.0)
                    && root.is_none_or(|r| **id == r || m["reply_to_message"]["message_id"] == r)
            })
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        // Read under the messages' lock's order (messages, then these), as the fake writes them.
        let silent = self.inner.silent.lock().expect("not poisoned").clone();
        let edited_ids = self.inner.edited.lock().expect("not poisoned").clone();
        let mut seen: Vec<SeenMessage> = ids
            .into_iter()
            .map(|id| {
                let m = &messages[&id];
                let from = &m["from"];
                let sender = [from["first_name"].as_str(), from["last_name"].as_str()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(" ");
                let is_bot = from["id"] == BOT_ID;
                let notified = !silent.contains(&id);
                let edited = edited_ids.contains(&id);
                let buttons = m["reply_markup"]["inline_keyboard"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|row| {
                        row.as_array()
                            .into_iter()
                            .flatten()
                            .map(|b| b["text"].as_str().unwrap_or_default().to_owned())
                            .collect()
                    })
                    .collect();
                let reply_field = (m["reply_markup"]["force_reply"] == true).then(|| {
                    m["reply_markup"]["input_field_placeholder"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                });
                let photo = m["photo"][0]["file_id"].as_str().map(|f| {
                    f.strip_prefix("photo:")
                        .and_then(|f| f.strip_suffix(":s"))
                        .unwrap_or(f)
                        .to_owned()
                });
                let text = m["text"]
                    .as_str()
                    .or_else(|| m["caption"].as_str())
                    .unwrap_or_default()
                    .to_owned();
                let reactions = m["bot_reactions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r["emoji"].as_str())
                    .map(|e| (e.to_owned(), vec!["FrogBot".to_owned()]))
                    .collect();
                SeenMessage {
                    id,
                    sender: if is_bot { "FrogBot".to_owned() } else { sender },
                    text,
                    photo,
                    buttons,
                    reply_field,
                    reply_to: m["reply_to_message"]["message_id"].as_i64(),
                    reactions,
                    notified,
                    edited,
                    draft: false,
                }
            })
            .collect();
        // A draft still showing: the chat's last draft, after the bot's last message there.
        let in_chat: Vec<&Call> = calls
            .iter()
            .filter(|c| c.result.is_some() && c.body["chat_id"] == chat.0)
            .collect();
        let last_draft = in_chat.iter().rposition(|c| c.method == "sendmessagedraft");
        let last_message = in_chat
            .iter()
            .rposition(|c| matches!(c.method.as_str(), "sendmessage" | "sendphoto"));
        if root.is_none()
            && topic.is_none()
            && let Some(d) = last_draft
            && last_message.is_none_or(|m| m < d)
        {
            let c = in_chat[d];
            seen.push(SeenMessage {
                id: i64::MAX,
                sender: "FrogBot".to_owned(),
                text: shown_text(&c.body).unwrap_or_default(),
                photo: None,
                buttons: Vec::new(),
                reply_field: None,
                reply_to: None,
                reactions: Vec::new(),
                notified: false,
                edited: false,
                draft: true,
            });
        }
        seen
    }

    /// Waits until `ready` holds over the recorded calls (failing after [`WAIT`]); returns what
    /// `ready` returned.
    pub async fn wait_for<T>(&self, what: &str, ready: impl Fn(&[Call]) -> Option<T>) -> T {
        let mut rx = self.inner.recorded.subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(v) = ready(&self.inner.calls.lock().expect("not poisoned")) {
                return v;
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                let calls: Vec<_> = self
                    .all_calls()
                    .into_iter()
                    .map(|c| (c.method, c.body))
                    .collect();
                panic!("timed out waiting for {what}; calls: {calls:#?}");
            }
        }
    }

    /// Waits for the `n`-th (1-based) call of `method` and returns its parameters.
    pub async fn nth(&self, method: &str, n: usize) -> Value {
        self.wait_for(&format!("{method} #{n}"), |calls| {
            calls
                .iter()
                .filter(|c| c.method == method)
                .nth(n - 1)
                .map(|c| c.body.clone())
        })
        .await
    }
}

/// Posts `body` to a bot's webhook at `url` as Telegram does (JSON, with the secret token header
/// when given); the future gives the HTTP status.
pub fn post_update(
    url: &str,
    secret: Option<&str>,
    body: &str,
) -> impl Future<Output = u16> + Send + use<> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut req = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(s) = secret {
        req = req.header("x-telegram-bot-api-secret-token", s);
    }
    let url = url.to_owned();
    async move {
        req.send()
            .await
            .map(|r| r.status().as_u16())
            .unwrap_or_else(|e| panic!("posting to the webhook {url} failed: {e}"))
    }
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A user.
pub fn user(id: i64, name: &str) -> Value {
    json!({"id": id, "is_bot": false, "first_name": name, "username": name.to_lowercase()})
}

/// A private chat with user `id`.
pub fn private_chat(id: i64, name: &str) -> Value {
    json!({"id": id, "type": "private", "first_name": name})
}

/// A supergroup (a forum when `forum`).
pub fn group_chat(id: i64, forum: bool) -> Value {
    json!({"id": id, "type": "supergroup", "title": "Ops", "is_forum": forum})
}

/// A `message` update with text from `from` in `chat`.
pub fn text_update(message_id: i64, chat: Value, from: Value, text: &str) -> Value {
    json!({"message": {
        "message_id": message_id, "date": 1_767_225_600, "chat": chat, "from": from, "text": text
    }})
}

/// A `callback_query` update: `from` pressed the button with `data` on the bot's `message`.
pub fn callback_update(query_id: &str, from: Value, message: Value, data: &str) -> Value {
    json!({"callback_query": {
        "id": query_id, "from": from, "message": message,
        "chat_instance": "-4242", "data": data
    }})
}

/// A message as an update's `reply_to_message` shows it: without its own `reply_to_message`
/// ("will not contain further reply_to_message fields even if it itself is a reply") and with a
/// `reply_markup` only when it is an inline keyboard (a Message's `reply_markup` is one; a
/// ForceReply a bot sent is not shown).
fn as_reply_to(message: &Value) -> Value {
    let mut m = message.clone();
    if let Some(o) = m.as_object_mut() {
        o.remove("reply_to_message");
        if o.get("reply_markup")
            .is_some_and(|k| k["inline_keyboard"].is_null())
        {
            o.remove("reply_markup");
        }
    }
    m
}

fn bot_user() -> Value {
    json!({"id": BOT_ID, "is_bot": true, "first_name": "FrogBot", "username": BOT_USERNAME})
}

fn chat_of(id: &Value) -> Value {
    match id.as_i64() {
        Some(n) if n > 0 => private_chat(n, "Someone"),
        _ => group_chat(id.as_i64().unwrap_or(0), true),
    }
}

fn ok(result: Value) -> Response {
    axum::Json(json!({"ok": true, "result": result})).into_response()
}

fn error(status: StatusCode, description: &str, parameters: Option<Value>) -> Response {
    let mut body = json!({"ok": false, "error_code": status.as_u16(), "description": description});
    if let Some(p) = parameters {
        body["parameters"] = p;
    }
    (status, axum::Json(body)).into_response()
}

/// The request's parameters: its JSON body, or the fields of a multipart form (teloxide sends
/// `setWebhook` as one) as a JSON object of strings.
async fn params(req: Request) -> Value {
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = Bytes::from_request(req, &()).await.unwrap_or_default();
    if content_type.starts_with("multipart/form-data") {
        let Ok(boundary) = multer::parse_boundary(&content_type) else {
            return Value::Null;
        };
        let stream = futures::stream::once(async move { Ok::<_, std::io::Error>(body) });
        let mut form = multer::Multipart::new(stream, boundary);
        let mut out = serde_json::Map::new();
        while let Ok(Some(field)) = form.next_field().await {
            let name = field.name().unwrap_or_default().to_owned();
            let text = field.text().await.unwrap_or_default();
            out.insert(name, Value::String(text));
        }
        return Value::Object(out);
    }
    serde_json::from_slice(&body).unwrap_or(Value::Null)
}

async fn api(State(fake): State<Arc<Inner>>, uri: Uri, req: Request) -> Response {
    let method = uri
        .path()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_lowercase();
    let body = params(req).await;
    let at = Instant::now();
    if fake.refuse_token.load(Ordering::SeqCst) {
        record(&fake, &method, &body, None, at, None);
        return error(StatusCode::UNAUTHORIZED, "Unauthorized", None);
    }
    let fault = fake.fault(&method);
    match fault {
        None => {}
        Some(Fault::ServerError) => {
            record(&fake, &method, &body, None, at, fault);
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error",
                None,
            );
        }
        Some(Fault::RateLimited(wait)) => {
            record(&fake, &method, &body, None, at, fault);
            // Telegram's retry_after is whole seconds.
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            let seconds = seconds.max(1);
            return error(
                StatusCode::TOO_MANY_REQUESTS,
                &format!("Too Many Requests: retry after {seconds}"),
                Some(json!({ "retry_after": seconds })),
            );
        }
        Some(Fault::Timeout) => {
            record(&fake, &method, &body, None, at, fault);
            tokio::time::sleep(HOLD).await;
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error",
                None,
            );
        }
        Some(Fault::ResetAfterProcessing) => {
            let result = if method == "getupdates" {
                // Served, and lost on the way.
                let _ = get_updates(&fake, &body).await;
                None
            } else {
                respond(&fake, &method, &body).1
            };
            record(&fake, &method, &body, result, at, fault);
            return reset();
        }
    }
    if method == "getupdates" {
        record(&fake, &method, &body, None, at, None);
        return get_updates(&fake, &body).await;
    }
    let (response, result) = respond(&fake, &method, &body);
    record(&fake, &method, &body, result, at, None);
    response
}

/// How long an injected timeout holds a request (longer than any client waits in tests).
const HOLD: Duration = Duration::from_secs(60);

/// An answer cut off after its status line: the body fails, the connection is dropped.
fn reset() -> Response {
    let cut = futures::stream::once(async {
        Err::<Bytes, _>(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "connection reset after processing",
        ))
    });
    let mut response = Response::new(axum::body::Body::from_stream(cut));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, "application/json".parse().expect("a header"));
    response
}

impl Inner {
    /// The fault injected into this call of `method`, if any.
    fn fault(&self, method: &str) -> Option<Fault> {
        let faults = self.faults.lock().expect("not poisoned");
        let (plan, methods) = faults.as_ref()?;
        let applies = if methods.is_empty() {
            method != "getupdates"
        } else {
            methods.iter().any(|m| m == method)
        };
        if applies { plan.next() } else { None }
    }
}

fn record(
    fake: &Inner,
    method: &str,
    body: &Value,
    result: Option<Value>,
    at: Instant,
    fault: Option<Fault>,
) {
    fake.calls.lock().expect("not poisoned").push(Call {
        method: method.to_owned(),
        body: body.clone(),
        result,
        at,
        fault,
    });
    fake.recorded.send_modify(|n| *n += 1);
}

/// Why Telegram would refuse the message text of `body` (its `text`, parsed as HTML when its
/// `parse_mode` is `HTML`).
fn refuse_text(body: &Value) -> Option<String> {
    let text = match shown_text(body) {
        Ok(text) => text,
        Err(why) => return Some(format!("Bad Request: can't parse entities: {why}")),
    };
    if text.trim().is_empty() {
        Some("Bad Request: message text is empty".into())
    } else if text.chars().count() > MAX_TEXT {
        Some("Bad Request: message is too long".into())
    } else {
        None
    }
}

/// Why Telegram would refuse the caption `caption` (parsed as HTML when `parse_mode` is `HTML`),
/// else the caption shown.
fn read_caption(caption: &Value, parse_mode: &Value) -> Result<Option<String>, String> {
    let Some(text) = caption.as_str() else {
        return Ok(None);
    };
    let shown = shown_text(&json!({"text": text, "parse_mode": parse_mode}))
        .map_err(|why| format!("Bad Request: can't parse entities: {why}"))?;
    if shown.chars().count() > MAX_CAPTION {
        return Err("Bad Request: message caption is too long".into());
    }
    Ok(Some(shown).filter(|s| !s.is_empty()))
}

/// The `photo` sizes of a message showing the image at `url` (Telegram fetches an http(s) URL; a
/// file id is not supported by this fake).
fn photo_sizes(url: &Value) -> Result<Value, &'static str> {
    let url = url.as_str().unwrap_or_default();
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err("Bad Request: wrong file identifier/HTTP URL specified");
    }
    Ok(json!([
        {"file_id": format!("photo:{url}:s"), "file_unique_id": format!("s{}", url.len()),
         "width": 90, "height": 60, "file_size": 1200},
        {"file_id": format!("photo:{url}:m"), "file_unique_id": format!("m{}", url.len()),
         "width": 800, "height": 533, "file_size": 48000}
    ]))
}

/// The text a message of `body` shows: its `text`, or with `parse_mode` `HTML` what is left of it
/// after entity parsing (what Telegram returns as the message's `text`).
fn shown_text(body: &Value) -> Result<String, String> {
    let text = body["text"].as_str().unwrap_or_default();
    match body["parse_mode"].as_str() {
        Some(mode) if mode.eq_ignore_ascii_case("html") => parse_html(text),
        Some(mode) => Err(format!("unsupported parse_mode {mode:?} in this fake")),
        None => Ok(text.to_owned()),
    }
}

/// The tags Telegram's HTML parse mode knows.
const HTML_TAGS: &str =
    "b strong i em u ins s strike del span tg-spoiler a code pre blockquote tg-emoji";

/// Decodes the HTML entity at the start of `s` (which starts with `&`): the character and the
/// entity's length. Telegram knows `&lt;`, `&gt;`, `&amp;`, `&quot;` and numeric entities.
fn html_entity(s: &str) -> Option<(char, usize)> {
    let end = s.find(';')?;
    let name = &s[1..end];
    let c = match name {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        _ => {
            let n = name.strip_prefix('#')?;
            let code = match n.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => n.parse().ok()?,
            };
            char::from_u32(code)?
        }
    };
    Some((c, end + 1))
}

/// Parses `html` as Telegram's HTML parse mode does: the text left after entity parsing, or why
/// it cannot be parsed (as Telegram words it after "can't parse entities: ").
fn parse_html(html: &str) -> Result<String, String> {
    let mut shown = String::new();
    let mut open: Vec<&str> = Vec::new();
    let mut at = 0;
    while at < html.len() {
        let rest = &html[at..];
        let c = rest.chars().next().expect("not at the end");
        match c {
            '&' => {
                let (c, len) = html_entity(rest).ok_or_else(|| {
                    format!("Character '&' is reserved and must be escaped as \"&amp;\" at byte offset {at}")
                })?;
                shown.push(c);
                at += len;
            }
            '>' => {
                return Err(format!(
                    "Character '>' is reserved and must be escaped as \"&gt;\" at byte offset {at}"
                ));
            }
            '<' => {
                let end = rest
                    .find('>')
                    .filter(|&e| !rest[1..e].contains('<'))
                    .ok_or_else(|| format!("Unexpected end of name token at byte offset {at}"))?;
                let inner = &rest[1..end];
                if let Some(name) = inner.strip_prefix('/') {
                    let name = name.trim();
                    match open.pop() {
                        Some(top) if top == name => {}
                        Some(top) => {
                            return Err(format!(
                                "Unmatched end tag at byte offset {at}, expected \"</{top}>\", found \"</{name}>\""
                            ));
                        }
                        None => return Err(format!("Unexpected end tag at byte offset {at}")),
                    }
                } else {
                    let name = inner
                        .split(|c: char| c.is_whitespace())
                        .next()
                        .unwrap_or_default();
                    let Some(name) = HTML_TAGS.split(' ').find(|t| *t == name) else {
                        return Err(format!(
                            "Unsupported start tag \"{name}\" at byte offset {at}"
                        ));
                    };
                    let attrs = &inner[name.len()..];
                    let has = |attr: &str| attrs.contains(&format!("{attr}="));
                    let inside = |names: &[&str]| open.iter().any(|o| names.contains(o));
                    let refused = if name == "a" && !has("href") {
                        Some("Tag \"a\" must have an href".to_owned())
                    } else if name == "span" && !attrs.contains("tg-spoiler") {
                        Some("Tag \"span\" must have class \"tg-spoiler\"".to_owned())
                    } else if inside(&["code"]) || (inside(&["pre"]) && name != "code") {
                        Some(format!(
                            "Entity \"{name}\" can't be inside \"code\" or \"pre\""
                        ))
                    } else if name == "pre" && !open.is_empty() {
                        // Documented: pre and code entities can't be part of any other entity.
                        Some("Entity \"pre\" can't be inside another entity".to_owned())
                    } else if name == "code"
                        && open.iter().any(|o| !["pre", "blockquote"].contains(o))
                    {
                        Some("Entity \"code\" can't be inside another entity".to_owned())
                    } else if name == "blockquote" && inside(&["blockquote"]) {
                        Some("Entity \"blockquote\" can't be nested".to_owned())
                    } else if name == "a" && inside(&["a"]) {
                        Some("Entity \"a\" can't be nested".to_owned())
                    } else {
                        None
                    };
                    if let Some(why) = refused {
                        return Err(format!("{why} at byte offset {at}"));
                    }
                    open.push(name);
                }
                at += end + 1;
            }
            c => {
                shown.push(c);
                at += c.len_utf8();
            }
        }
    }
    match open.last() {
        Some(name) => Err(format!(
            "Can't find end tag corresponding to start tag \"{name}\""
        )),
        None => Ok(shown),
    }
}

/// Why Telegram would refuse `markup` (an inline keyboard; other markups pass).
fn refuse_markup(markup: &Value) -> Option<&'static str> {
    if let Some(force) = markup.get("force_reply") {
        // ForceReply: `force_reply` is `true`; `input_field_placeholder` 1–64 characters.
        if force != &json!(true) {
            return Some("Bad Request: can't parse reply keyboard markup JSON object");
        }
        if let Some(p) = markup.get("input_field_placeholder") {
            let n = p.as_str().map_or(0, |p| p.chars().count());
            if !(1..=MAX_PLACEHOLDER).contains(&n) {
                return Some("Bad Request: can't parse reply keyboard markup JSON object");
            }
        }
        return None;
    }
    let rows = markup.get("inline_keyboard")?;
    let Some(rows) = rows.as_array() else {
        return Some(
            "Bad Request: can't parse inline keyboard button: field \"inline_keyboard\" must be an Array",
        );
    };
    let buttons: Vec<&Value> = rows.iter().filter_map(Value::as_array).flatten().collect();
    if buttons.len() > MAX_BUTTONS {
        return Some("Bad Request: reply markup is too long");
    }
    if rows
        .iter()
        .any(|r| r.as_array().is_some_and(|r| r.len() > MAX_ROW))
    {
        return Some("Bad Request: too many buttons in a row");
    }
    for b in buttons {
        let text = b["text"].as_str().unwrap_or_default();
        if text.is_empty() || text.chars().count() > MAX_BUTTON_TEXT {
            return Some("Bad Request: BUTTON_TEXT_INVALID");
        }
        if let Some(data) = b.get("callback_data") {
            let len = data.as_str().map_or(0, str::len);
            if !(1..=MAX_CALLBACK_DATA).contains(&len) {
                return Some("Bad Request: BUTTON_DATA_INVALID");
            }
        }
    }
    None
}

/// The emojis a bot may react with (the Bot API's `ReactionTypeEmoji` list).
const REACTION_EMOJIS: &[&str] = &[
    "👍",
    "👎",
    "❤",
    "🔥",
    "🥰",
    "👏",
    "😁",
    "🤔",
    "🤯",
    "😱",
    "🤬",
    "😢",
    "🎉",
    "🤩",
    "🤮",
    "💩",
    "🙏",
    "👌",
    "🕊",
    "🤡",
    "🥱",
    "🥴",
    "😍",
    "🐳",
    "❤\u{200d}🔥",
    "🌚",
    "🌭",
    "💯",
    "🤣",
    "⚡",
    "🍌",
    "🏆",
    "💔",
    "🤨",
    "😐",
    "🍓",
    "🍾",
    "💋",
    "🖕",
    "😈",
    "😴",
    "😭",
    "🤓",
    "👻",
    "👨\u{200d}💻",
    "👀",
    "🎃",
    "🙈",
    "😇",
    "😨",
    "🤝",
    "✍",
    "🤗",
    "🫡",
    "🎅",
    "🎄",
    "☃",
    "💅",
    "🤪",
    "🗿",
    "🆒",
    "💘",
    "🙉",
    "🦄",
    "😘",
    "💊",
    "🙊",
    "😎",
    "👾",
    "🤷\u{200d}♂",
    "🤷",
    "🤷\u{200d}♀",
    "😡",
];

fn respond(fake: &Inner, method: &str, body: &Value) -> (Response, Option<Value>) {
    let ok = |result: Value| (ok(result.clone()), Some(result));
    let bad = |description: &str| (error(StatusCode::BAD_REQUEST, description, None), None);
    match method {
        "getme" => ok(json!({
            "id": BOT_ID, "is_bot": true, "first_name": "FrogBot", "username": BOT_USERNAME,
            "can_join_groups": true, "can_read_all_group_messages": false,
            "supports_inline_queries": false, "can_connect_to_business": false,
            "has_main_web_app": false
        })),
        "setwebhook" => {
            let url = body["url"].as_str().unwrap_or_default();
            if !url.starts_with("https://") {
                return bad("Bad Request: bad webhook: An HTTPS URL must be provided for webhook");
            }
            *fake.webhook.lock().expect("not poisoned") = Some(Webhook {
                url: url.to_owned(),
                secret: body["secret_token"].as_str().map(str::to_owned),
            });
            ok(json!(true))
        }
        "deletewebhook" => {
            *fake.webhook.lock().expect("not poisoned") = None;
            ok(json!(true))
        }
        // WebhookInfo: `url` empty when none is set; updates not yet confirmed are pending.
        "getwebhookinfo" => {
            let url = fake
                .webhook
                .lock()
                .expect("not poisoned")
                .as_ref()
                .map(|w| w.url.clone())
                .unwrap_or_default();
            let pending = fake.pending.lock().expect("not poisoned").len();
            ok(json!({
                "url": url, "has_custom_certificate": false, "pending_update_count": pending
            }))
        }
        "setmessagereaction" => {
            // A bot sets at most one reaction, from Telegram's list; the message must exist.
            let reactions = body["reaction"].as_array().cloned().unwrap_or_default();
            if reactions.len() > 1 {
                return bad("Bad Request: REACTIONS_TOO_MANY");
            }
            let allowed = reactions.iter().all(|r| {
                r["type"] == "emoji"
                    && r["emoji"]
                        .as_str()
                        .is_some_and(|e| REACTION_EMOJIS.contains(&e))
            });
            if !allowed {
                return bad("Bad Request: REACTION_INVALID");
            }
            let id = body["message_id"].as_i64().unwrap_or_default();
            let mut messages = fake.messages.lock().expect("not poisoned");
            let Some(m) = messages.get_mut(&id) else {
                return bad("Bad Request: message to react not found");
            };
            // The bot's reactions now: the call replaces them all.
            m["bot_reactions"] = json!(reactions);
            ok(json!(true))
        }
        "sendmessagedraft" => {
            // Bot API 9.3: private chats only, a non-zero draft id, 1–4,096 characters of text.
            if let Some(why) = fake.refuse_drafts.lock().expect("not poisoned").clone() {
                return bad(&why);
            }
            if body["chat_id"].as_i64().is_none_or(|c| c <= 0) {
                return bad("Bad Request: chat not found");
            }
            if body["draft_id"].as_i64().is_none_or(|d| d == 0) {
                return bad("Bad Request: DRAFT_ID_INVALID");
            }
            if let Some(why) = refuse_text(body) {
                return bad(&why);
            }
            ok(json!(true))
        }
        "sendchataction" => {
            if body["action"].as_str().is_none() {
                return bad("Bad Request: wrong parameter action in request");
            }
            ok(json!(true))
        }
        "answercallbackquery" => {
            let text = body["text"].as_str().unwrap_or_default();
            if text.chars().count() > MAX_NOTICE {
                return bad("Bad Request: MESSAGE_TOO_LONG");
            }
            // A query the fake never sent, or one already answered, is refused as Telegram does.
            let id = body["callback_query_id"].as_str().unwrap_or_default();
            let known = fake.queries.lock().expect("not poisoned").contains_key(id);
            if !known
                || !fake
                    .answered
                    .lock()
                    .expect("not poisoned")
                    .insert(id.to_owned())
            {
                return bad(
                    "Bad Request: query is too old and response timeout expired or query ID is invalid",
                );
            }
            ok(json!(true))
        }
        "sendmessage" => {
            if let Some(why) =
                refuse_text(body).or_else(|| refuse_markup(&body["reply_markup"]).map(Into::into))
            {
                return bad(&why);
            }
            let has_keyboard = body["reply_markup"]["inline_keyboard"].is_array();
            let throttled = has_keyboard
                && fake
                    .throttle_keyboard_sends
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
            if throttled {
                return (
                    error(
                        StatusCode::TOO_MANY_REQUESTS,
                        "Too Many Requests: retry after 1",
                        Some(json!({"retry_after": 1})),
                    ),
                    None,
                );
            }
            let id = fake.next_message.fetch_add(1, Ordering::SeqCst);
            let mut m = json!({
                "message_id": id, "date": now(), "chat": chat_of(&body["chat_id"]),
                "from": bot_user(), "text": shown_text(body).unwrap_or_default()
            });
            if let Some(t) = body["message_thread_id"].as_i64() {
                m["message_thread_id"] = json!(t);
                m["is_topic_message"] = json!(true);
            }
            if !body["reply_markup"].is_null() {
                m["reply_markup"] = body["reply_markup"].clone();
            }
            let mut messages = fake.messages.lock().expect("not poisoned");
            if let Some(r) = body["reply_parameters"]["message_id"].as_i64()
                && let Some(original) = messages.get(&r)
            {
                m["reply_to_message"] = as_reply_to(original);
            }
            if body["disable_notification"] == true {
                fake.silent.lock().expect("not poisoned").insert(id);
            }
            messages.insert(id, m.clone());
            // What a client shows: ForceReply is no keyboard of the message.
            let mut shown = m.clone();
            if shown["reply_markup"]["inline_keyboard"].is_null()
                && let Some(o) = shown.as_object_mut()
            {
                o.remove("reply_markup");
            }
            ok(shown)
        }
        "sendphoto" => {
            let sizes = match photo_sizes(&body["photo"]) {
                Ok(s) => s,
                Err(why) => return bad(why),
            };
            let caption = match read_caption(&body["caption"], &body["parse_mode"]) {
                Ok(c) => c,
                Err(why) => return bad(&why),
            };
            if let Some(why) = refuse_markup(&body["reply_markup"]) {
                return bad(why);
            }
            let id = fake.next_message.fetch_add(1, Ordering::SeqCst);
            let mut m = json!({
                "message_id": id, "date": now(), "chat": chat_of(&body["chat_id"]),
                "from": bot_user(), "photo": sizes
            });
            if let Some(c) = caption {
                m["caption"] = json!(c);
            }
            if let Some(t) = body["message_thread_id"].as_i64() {
                m["message_thread_id"] = json!(t);
                m["is_topic_message"] = json!(true);
            }
            if body["reply_markup"]["inline_keyboard"].is_array() {
                m["reply_markup"] = body["reply_markup"].clone();
            }
            let mut messages = fake.messages.lock().expect("not poisoned");
            if let Some(r) = body["reply_parameters"]["message_id"].as_i64()
                && let Some(original) = messages.get(&r)
            {
                m["reply_to_message"] = as_reply_to(original);
            }
            if body["disable_notification"] == true {
                fake.silent.lock().expect("not poisoned").insert(id);
            }
            messages.insert(id, m.clone());
            ok(m)
        }
        "editmessagemedia" => {
            // The new media replaces the message's (a text message gets it added: Bot API 7.x+
            // "or to add media to text messages"); the caption is the media's.
            let media = &body["media"];
            if media["type"] != "photo" {
                return bad("Bad Request: this fake edits photos only");
            }
            let sizes = match photo_sizes(&media["media"]) {
                Ok(s) => s,
                Err(why) => return bad(why),
            };
            let caption = match read_caption(&media["caption"], &media["parse_mode"]) {
                Ok(c) => c,
                Err(why) => return bad(&why),
            };
            if let Some(why) = refuse_markup(&body["reply_markup"]) {
                return bad(why);
            }
            let id = body["message_id"].as_i64().unwrap_or(0);
            let mut messages = fake.messages.lock().expect("not poisoned");
            let Some(m) = messages
                .get_mut(&id)
                .filter(|m| m["chat"]["id"] == body["chat_id"] && m["from"]["id"] == BOT_ID)
            else {
                return bad("Bad Request: message to edit not found");
            };
            let mut edited = m.clone();
            if let Some(o) = edited.as_object_mut() {
                o.remove("text");
                o.remove("caption");
                o.remove("reply_markup");
            }
            edited["photo"] = sizes;
            if let Some(c) = caption {
                edited["caption"] = json!(c);
            }
            if body["reply_markup"]["inline_keyboard"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
            {
                edited["reply_markup"] = body["reply_markup"].clone();
            }
            if edited == *m {
                return bad(NOT_MODIFIED);
            }
            edited["edit_date"] = json!(now());
            fake.edited.lock().expect("not poisoned").insert(id);
            *m = edited.clone();
            ok(edited)
        }
        "deletemessage" => {
            let id = body["message_id"].as_i64().unwrap_or(0);
            let mut messages = fake.messages.lock().expect("not poisoned");
            if !messages
                .get(&id)
                .is_some_and(|m| m["chat"]["id"] == body["chat_id"])
            {
                return bad("Bad Request: message to delete not found");
            }
            messages.remove(&id);
            ok(json!(true))
        }
        "pinchatmessage" | "unpinchatmessage" => {
            let id = body["message_id"].as_i64().unwrap_or(0);
            let mut messages = fake.messages.lock().expect("not poisoned");
            let Some(m) = messages
                .get_mut(&id)
                .filter(|m| m["chat"]["id"] == body["chat_id"])
            else {
                return bad("Bad Request: message not found");
            };
            // Pinning a pinned message (or unpinning one that is not) is accepted as done.
            m["pinned"] = json!(method == "pinchatmessage");
            ok(json!(true))
        }
        "editmessagetext" | "editmessagereplymarkup" => {
            if method == "editmessagetext"
                && let Some(why) = refuse_text(body)
            {
                return bad(&why);
            }
            if let Some(why) = refuse_markup(&body["reply_markup"]) {
                return bad(why);
            }
            // An edit takes an inline keyboard only (no ForceReply).
            if !body["reply_markup"].is_null() && body["reply_markup"]["inline_keyboard"].is_null()
            {
                return bad("Bad Request: inline keyboard expected");
            }
            let id = body["message_id"].as_i64().unwrap_or(0);
            let mut messages = fake.messages.lock().expect("not poisoned");
            let Some(m) = messages
                .get_mut(&id)
                .filter(|m| m["chat"]["id"] == body["chat_id"] && m["from"]["id"] == BOT_ID)
            else {
                return bad("Bad Request: message to edit not found");
            };
            if method == "editmessagetext" && m.get("photo").is_some() {
                return bad("Bad Request: there is no text in the message to edit");
            }
            let mut edited = m.clone();
            if body.get("text").is_some() {
                edited["text"] = json!(shown_text(body).unwrap_or_default());
            }
            match body.get("reply_markup") {
                Some(k)
                    if k["inline_keyboard"]
                        .as_array()
                        .is_some_and(|r| !r.is_empty()) =>
                {
                    edited["reply_markup"] = k.clone();
                }
                _ => {
                    if let Some(o) = edited.as_object_mut() {
                        o.remove("reply_markup");
                    }
                }
            }
            if edited == *m {
                return bad(NOT_MODIFIED);
            }
            if method == "editmessagetext" {
                fake.edited.lock().expect("not poisoned").insert(id);
            }
            *m = edited.clone();
            ok(edited)
        }
        _ => (error(StatusCode::NOT_FOUND, "Not Found", None), None),
    }
}

async fn get_updates(fake: &Inner, body: &Value) -> Response {
    // The newest poller wins: one still waiting learns it was terminated (and wakes up).
    let me = fake.poller.fetch_add(1, Ordering::SeqCst) + 1;
    fake.queued.send_modify(|n| *n += 1);
    let offset = body["offset"].as_i64().unwrap_or(0);
    let limit = body["limit"].as_u64().unwrap_or(100).clamp(1, 100) as usize;
    let timeout = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
    let deadline = tokio::time::Instant::now() + timeout;
    let mut rx = fake.queued.subscribe();
    loop {
        if fake.poller.load(Ordering::SeqCst) != me {
            fake.conflicts.fetch_add(1, Ordering::SeqCst);
            return error(
                StatusCode::CONFLICT,
                "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                None,
            );
        }
        let batch: Vec<Value> = {
            let mut pending = fake.pending.lock().expect("not poisoned");
            // An offset confirms every update before it: they are forgotten.
            pending.retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
            pending.iter().take(limit).cloned().collect()
        };
        if !batch.is_empty() {
            let now = Instant::now();
            let mut served = fake.served.lock().expect("not poisoned");
            for u in &batch {
                served
                    .entry(u["update_id"].as_i64().unwrap_or(0))
                    .or_insert(now);
            }
            return ok(Value::Array(batch));
        }
        if tokio::time::timeout_at(deadline, rx.changed())
            .await
            .is_err()
        {
            return ok(json!([]));
        }
    }
}

/// The `ChannelQuestions` conformance harness over [`FakeBotApi`]: the hooks under test are
/// [`TelegramQuestions`] over teloxide's `Bot` pointed at the fake; every interaction is a real
/// update shape (built from what the fake shows) read back through [`crate::convert`].
#[derive(Debug)]
pub struct ConformanceHarness {
    /// The fake the hooks talk to.
    pub fake: FakeBotApi,
    hooks: TelegramQuestions<Bot>,
    /// FrogBot participant id → Telegram user id.
    users: Mutex<HashMap<String, i64>>,
    next_thread: AtomicI64,
}

impl ConformanceHarness {
    /// A harness over a fresh fake.
    pub async fn start() -> Self {
        let fake = FakeBotApi::start().await;
        let hooks = TelegramQuestions::new(fake.bot());
        Self {
            fake,
            hooks,
            users: Mutex::default(),
            next_thread: AtomicI64::new(1),
        }
    }

    /// The Telegram user id standing for `user` (numeric ids are used as they are).
    fn user_id(&self, user: &PlatformUser) -> i64 {
        if let Ok(id) = user.id.parse() {
            return id;
        }
        let mut users = self.users.lock().expect("not poisoned");
        let next = 4_200 + users.len() as i64;
        *users.entry(user.id.clone()).or_insert(next)
    }

    fn user_json(&self, user: &PlatformUser) -> Value {
        json!({
            "id": self.user_id(user), "is_bot": user.is_bot,
            "first_name": user.name.clone().unwrap_or_else(|| "Someone".into())
        })
    }

    /// The message of question `q` that shows its keyboard.
    fn keyboard_message(&self, record: &QuestionRecord, q: usize) -> Option<i64> {
        record
            .messages
            .iter()
            .filter(|m| m.question == Some(q))
            .filter_map(|m| split_message_id(&m.id).ok())
            .map(|(_, id)| i64::from(id.0))
            .find(|&id| self.fake.buttons(id) > 0)
    }

    /// The click on the `index`-th button of message `id` (or the button with text `text`).
    fn click(&self, user: &PlatformUser, id: i64, button: Button<'_>) -> Interaction {
        let message = self.fake.sent(id);
        let buttons: Vec<Value> = message["reply_markup"]["inline_keyboard"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_array)
            .flatten()
            .cloned()
            .collect();
        let found = match button {
            Button::Nth(n) => buttons.get(n),
            Button::Text(t) => buttons.iter().find(|b| b["text"] == t),
        }
        .unwrap_or_else(|| panic!("message {id} shows no such button: {message}"));
        let data = found["callback_data"].as_str().expect("a callback button");
        let update = self
            .fake
            .push_free(self.fake.click(&self.user_json(user), id, data));
        let update = parse_update(update.to_string().as_bytes()).expect("a readable update");
        interaction(&update)
            .expect("a usable callback query")
            .expect("an interaction")
    }
}

enum Button<'a> {
    Nth(usize),
    Text(&'a str),
}

impl FakeBotApi {
    /// Gives `update` an `update_id` without queueing it.
    fn push_free(&self, mut update: Value) -> Value {
        update["update_id"] = json!(self.inner.next_update.fetch_add(1, Ordering::SeqCst));
        update
    }
}

#[async_trait]
impl Harness for ConformanceHarness {
    fn hooks(&self) -> &dyn ChannelQuestions {
        &self.hooks
    }

    async fn thread(&self) -> Thread {
        // A private chat with the participant is where a person answers the bot; each thread of
        // the suite gets its own FrogBot chat.
        let n = self.next_thread.fetch_add(1, Ordering::SeqCst);
        let chat = self.user_id(&frogbot_model::conformance::participant());
        Thread {
            id: chat.to_string(),
            platform: PLATFORM.into(),
            chat_id: format!("conformance-{n}"),
        }
    }

    fn limits(&self) -> Limits {
        // One message per question (no limit but patience), a keyboard of at most 100 buttons
        // (one is Skip; on a `multiple` question one more is Done, so it shows one option
        // fewer), button texts cut to 64 characters.
        Limits {
            questions: 10,
            options: MAX_BUTTONS - 1,
            label: MAX_BUTTON_TEXT,
        }
    }

    async fn choose(
        &self,
        _thread: &Thread,
        call: &QuestionCall,
        record: &QuestionRecord,
        q: usize,
        options: &[usize],
        user: &PlatformUser,
    ) -> Vec<Interaction> {
        let Some(id) = self.keyboard_message(record, q) else {
            return Vec::new();
        };
        if !call.input.questions[q].multiple {
            return options
                .iter()
                .map(|&o| self.click(user, id, Button::Nth(o)))
                .collect();
        }
        // Each check redraws the keyboard (a new revision in its callback data): press the first
        // chosen option the keyboard does not show checked ("✓ label"), or Done once all are.
        let message = self.fake.sent(id);
        let texts: Vec<String> = message["reply_markup"]["inline_keyboard"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|b| b["text"].as_str().map(String::from))
            .collect();
        let next = options
            .iter()
            .copied()
            .find(|&o| texts.get(o).is_some_and(|t| !t.starts_with("✓ ")));
        vec![match next {
            Some(o) => self.click(user, id, Button::Nth(o)),
            None => self.click(user, id, Button::Text("Done")),
        }]
    }

    async fn reply(&self, thread: &Thread, text: &str, user: &PlatformUser) -> Interaction {
        let chat: i64 = thread.id.parse().expect("a private chat's thread id");
        let from = self.user_json(user);
        // A client shows an open ForceReply prompt's reply field: the message replies to it.
        let reply_to = self.fake.open_force_reply(chat);
        let chat_json = private_chat(chat, from["first_name"].as_str().unwrap_or("Someone"));
        let update = self
            .fake
            .push_free(self.fake.user_message(chat_json, from, text, reply_to));
        let update = parse_update(update.to_string().as_bytes()).expect("a readable update");
        interaction(&update)
            .expect("a usable message")
            .expect("an interaction")
    }

    async fn skip(
        &self,
        _thread: &Thread,
        _call: &QuestionCall,
        record: &QuestionRecord,
        user: &PlatformUser,
    ) -> Interaction {
        // The latest message of the call whose keyboard shows Skip.
        let id = record
            .messages
            .iter()
            .rev()
            .filter_map(|m| split_message_id(&m.id).ok())
            .map(|(_, id)| i64::from(id.0))
            .find(|&id| {
                self.fake.message(id).is_some_and(|m| {
                    m["reply_markup"]["inline_keyboard"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_array)
                        .flatten()
                        .any(|b| b["text"] == "Skip")
                })
            })
            .unwrap_or_else(|| panic!("no message of the call shows Skip: {record:?}"));
        self.click(user, id, Button::Text("Skip"))
    }

    async fn controls(&self, message_id: &str) -> usize {
        split_message_id(message_id).map_or(0, |(_, id)| self.fake.buttons(i64::from(id.0)))
    }

    async fn shown_text(&self, message_id: &str) -> String {
        split_message_id(message_id)
            .ok()
            .and_then(|(_, id)| self.fake.message(i64::from(id.0)))
            .map_or_else(String::new, |m| {
                m["text"].as_str().unwrap_or_default().to_owned()
            })
    }

    async fn notices(&self, user: &PlatformUser) -> Vec<String> {
        self.fake.notices(self.user_id(user))
    }
}
