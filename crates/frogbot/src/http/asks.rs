//! The ask endpoints: any program asks a person and waits for the one answer
//! (`POST /api/asks`, `GET /api/asks/{id}`, `GET /api/asks/{id}/wait`, `DELETE /api/asks/{id}`).
//! An ask is a turn of the built-in ask model in a chat (`frogbot_core::agent::ask`), so the
//! answer comes back through the same settle endpoint, first answer wins, as any question.
//!
//! A `wait` long poll reads the chat once, then only the ask's question record: when this process's
//! chat events wake it, and every second for answers recorded by another process. Each caller holds
//! a bounded number of waits at once (429 `too-many-waits` past it).

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::json;

use frogbot_core::Error as CoreError;
use frogbot_core::agent::ask::{ASK_MODEL, AskId, AskState, AskStatus, ask_parts};
use frogbot_core::agent::views::NewChat;
use frogbot_core::agent::views::QueuedChange;
use frogbot_core::agent::{AskPlace, ChatEvent, SendMessage, Sent, channel_chat_id};
use frogbot_core::model::{ChatId, Delivery, QuestionInput, QuestionItem};

use frogbot_core::agent::views::ChatRow;
use frogbot_core::policy::{Action, AskInto, ChatView, Principal, Target};

use super::access::{Call, decide};
use super::{ApiError, ApiResult, AppState, parse_json};

/// The longest a single `wait` request holds (a client waits longer by asking again).
pub(super) const MAX_WAIT_SECONDS: u64 = 300;
/// How often a waiting request looks at the store when nothing in this process said the chat
/// changed (another process may have recorded the answer).
const WAIT_POLL: Duration = Duration::from_secs(1);
/// … when the store pushes every process's changes (PostgreSQL): only a fallback.
const WAIT_POLL_WITH_PUSH: Duration = Duration::from_secs(10);

/// Where an ask goes.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum AskTarget {
    /// `{"web": "chatId"}`: a web chat (created when new).
    Web {
        web: String,
        /// Refused: an ask goes into the caller's own web chat, never one made for someone.
        user: Option<String>,
    },
    /// `{"channel": "slack", "thread": …}` / `…"user": …}`: a platform.
    Channel {
        channel: String,
        thread: Option<String>,
        user: Option<String>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AskBody {
    to: Option<AskTarget>,
    text: String,
    title: Option<String>,
    #[serde(default)]
    inputs: Vec<QuestionItem>,
    expires_in_seconds: Option<u64>,
    /// Who may answer (FrogBot user ids or `platform:user`); empty: whoever the chat lets.
    #[serde(default)]
    from: Vec<String>,
    /// Display blocks shown with the inputs (a table, code or a diff, an image…).
    #[serde(default)]
    blocks: Vec<serde_json::Value>,
    idempotency_key: Option<String>,
}

/// The question input of an ask: its inputs, a header and the question filled in where an input
/// leaves them out (the title or "Answer", numbered when there are several; the ask's text).
fn input_of(body: &AskBody) -> Result<QuestionInput, ApiError> {
    if body.text.trim().is_empty() {
        return Err(ApiError::invalid("`text` is empty"));
    }
    if body.inputs.is_empty() {
        return Err(ApiError::invalid(
            "`inputs` is empty: give at least one input (choice, text_input, number_input, toggle, confirm)",
        ));
    }
    let base = body
        .title
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or("Answer");
    let several = body.inputs.len() > 1;
    let questions = body
        .inputs
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let mut q = q.clone();
            if q.header.trim().is_empty() {
                q.header = if several {
                    format!("{base} {}", i + 1)
                } else {
                    base.to_owned()
                };
            }
            if q.question.trim().is_empty() {
                q.question = body.text.clone();
            }
            q
        })
        .collect();
    let input = QuestionInput {
        questions,
        expires_in_seconds: body.expires_in_seconds,
        from: body.from.clone(),
        blocks: body.blocks.clone(),
    };
    input.validate().map_err(ApiError::invalid)?;
    Ok(input)
}

/// The ask's message id: `ask-` and a fresh id, or — for an idempotency key — `ask-KEY` for an
/// anonymous caller and `ask-HASH-KEY` for anyone else, `HASH` naming the caller: keys are the
/// caller's own, so nobody can take another caller's key first.
fn message_id_of(key: Option<&str>, who: &Principal) -> Result<String, ApiError> {
    let Some(key) = key else {
        return Ok(format!("ask-{}", uuid::Uuid::new_v4().simple()));
    };
    let id = match who.user_id() {
        None => format!("ask-{key}"),
        Some(u) => format!("ask-{}-{key}", caller_hash(u.as_str())),
    };
    // The message id follows the message id rules (those of chat ids).
    ChatId::new(id.as_str())
        .map(|_| id)
        .map_err(|_| ApiError::invalid("`idempotencyKey` is 1–100 characters of A-Z a-z 0-9 _ -"))
}

/// 12 hex digits naming a caller in its asks' ids (FNV-1a, 48 bits: ids, not secrets).
fn caller_hash(id: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:012x}", h & 0xffff_ffff_ffff)
}

/// `POST /api/asks`: 201 with the ask's status (`open`, or `queued` behind another turn of
/// the chat); a repeated `idempotencyKey` answers 200 with the same ask.
pub(super) async fn create(Call { state, who }: Call, body: Bytes) -> ApiResult {
    let user = who.user_id().cloned();
    let body: AskBody = parse_json(&body)?;
    let input = input_of(&body)?;
    let message = message_id_of(body.idempotency_key.as_deref(), &who)?;
    let text = match body
        .title
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        Some(title) => format!("**{title}**\n\n{}", body.text),
        None => body.text.clone(),
    };
    let (chat, channel) = match &body.to {
        // A new web chat, named after the ask (so a repeated key finds the same one).
        None => {
            decide(&state.policy, &who, Action::CreateAsk(AskInto::Web(None)))?;
            (
                ChatId::new(message.clone()).map_err(|e| ApiError::invalid(e.to_string()))?,
                None,
            )
        }
        Some(AskTarget::Web {
            web,
            user: for_user,
        }) => {
            if for_user.is_some() {
                return Err(ApiError::invalid(
                    "an ask goes into a web chat of your own: `to` is {\"web\": CHAT}",
                ));
            }
            let chat = ChatId::new(web.as_str()).map_err(|e| ApiError::invalid(e.to_string()))?;
            if chat.is_channel_space() {
                return Err(ApiError::invalid(format!("bad chat id {chat}")));
            }
            // Only into a chat the caller owns, or a new one (which it then owns).
            let row = state.engine.chats().get(&chat).await?;
            let view = row.as_ref().map(ChatView::of);
            decide(
                &state.policy,
                &who,
                Action::CreateAsk(AskInto::Web(view.as_ref())),
            )
            .map_err(|e| e.with_chat(&chat))?;
            (chat, None)
        }
        Some(AskTarget::Channel {
            channel,
            thread,
            user: person,
        }) => {
            let place = match (thread.as_deref(), person.as_deref()) {
                (Some(t), None) if !t.is_empty() => AskPlace::Thread(t),
                (None, Some(u)) if !u.is_empty() => AskPlace::User(u),
                _ => {
                    return Err(ApiError::invalid(
                        "a channel target names one `thread` or one `user`",
                    ));
                }
            };
            // Decided before anything is posted: only an agent allowed the target asks there.
            let id = match place {
                AskPlace::Thread(t) | AskPlace::User(t) => t,
            };
            decide(
                &state.policy,
                &who,
                Action::CreateAsk(AskInto::Platform(Target::Platform {
                    platform: channel,
                    id,
                })),
            )?;
            let channel_ref = state
                .engine
                .channels()
                .ask_thread(channel, place, &text, &message)
                .await?;
            (
                channel_chat_id(&channel_ref.platform, &channel_ref.thread),
                Some(channel_ref),
            )
        }
    };
    let id = AskId {
        chat: chat.clone(),
        message: message.clone(),
    };
    let channel_of_ask = channel.clone();
    let sent = state
        .engine
        .agents()
        .send(SendMessage {
            chat_id: chat.clone(),
            id: Some(message.clone()),
            parts: ask_parts(&text, &input, &message),
            author: user.clone(),
            delivery: Delivery::Queue,
            model: Some(ASK_MODEL.into()),
            reasoning: None,
            channel: channel.clone(),
            speaker: None,
            context: None,
        })
        .await;
    let created = match sent {
        Ok(Sent::Started(handle)) => {
            // The ask model's one step: the call is saved and the chat waits once this is done.
            let _ = handle.done.await;
            true
        }
        Ok(Sent::Queued { .. }) => true,
        Err(CoreError::DuplicateMessage { .. }) => false,
        Err(e) => return Err(ApiError::from(e).with_chat(&chat)),
    };
    // The asker is the chat's agent: people's later messages in it reach the asker's inbox.
    let new_chat = NewChat {
        chat_id: chat.clone(),
        owner: if channel_of_ask.is_some() {
            None
        } else {
            user.clone()
        },
        channel: channel_of_ask,
    };
    state
        .engine
        .agents()
        .bind_ask_chat(&new_chat, user.as_ref())
        .await;
    let status = read(&state, &id, &who).await?;
    let code = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(super::with_chat(&chat, (code, axum::Json(status))))
}

fn ask_id(raw: &str) -> Result<AskId, ApiError> {
    AskId::parse(raw).ok_or_else(|| ApiError::not_found(format!("no ask {raw}")))
}

/// The ask, for its asker only (an anonymous caller's asks: anonymous callers, who share them).
async fn read(state: &AppState, id: &AskId, who: &Principal) -> Result<AskStatus, ApiError> {
    read_with_chat(state, id, who)
        .await
        .map(|(_, status)| status)
}

/// [`read`], with the chat row it read.
async fn read_with_chat(
    state: &AppState,
    id: &AskId,
    who: &Principal,
) -> Result<(ChatRow, AskStatus), ApiError> {
    let err = |e: ApiError| e.with_chat(&id.chat);
    let row = state
        .engine
        .chats()
        .get(&id.chat)
        .await
        .map_err(|e| err(e.into()))?
        .ok_or_else(|| err(ApiError::not_found(format!("no ask {id}"))))?;
    let status = state
        .engine
        .questions()
        .ask_status(id)
        .await
        .map_err(|e| err(e.into()))?
        .ok_or_else(|| err(ApiError::not_found(format!("no ask {id}"))))?;
    decide(
        &state.policy,
        who,
        Action::ReadAsk {
            asker: status.asked_by.as_ref(),
        },
    )
    .map_err(err)?;
    Ok((row, status))
}

/// `GET /api/asks/{id}`.
pub(super) async fn get(Call { state, who }: Call, Path(raw): Path<String>) -> ApiResult {
    let id = ask_id(&raw)?;
    let status = read(&state, &id, &who).await?;
    Ok(super::with_chat(&id.chat, axum::Json(status)))
}

#[derive(Deserialize)]
pub(super) struct WaitQuery {
    timeout: Option<f64>,
}

/// `GET /api/asks/{id}/wait?timeout=SECONDS` (default 30, at most [`MAX_WAIT_SECONDS`]): the
/// status once the ask is over, or as it stands when the time is up.
pub(super) async fn wait(
    Call { state, who }: Call,
    Path(raw): Path<String>,
    Query(q): Query<WaitQuery>,
) -> ApiResult {
    let id = ask_id(&raw)?;
    let timeout = match q.timeout {
        None => 30.0,
        Some(t) if t.is_finite() && t >= 0.0 => t.min(MAX_WAIT_SECONDS as f64),
        Some(_) => return Err(ApiError::invalid("`timeout` is a number of seconds")),
    };
    let _slot = state.waiters.enter(&who).ok_or_else(|| {
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too-many-waits",
            format!(
                "{} waits on asks at once already; wait for one to return",
                state.waiters.per_caller
            ),
        )
        .with_chat(&id.chat)
    })?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(timeout);
    // Subscribed before the first read, so a change between the read and the wait is seen.
    let mut events = state.engine.chats().subscribe();
    // Changes other processes make, when the store pushes them (the answer recorded there).
    let mut pushed = state.engine.chats().changes();
    let poll = if pushed.is_some() {
        WAIT_POLL_WITH_PUSH
    } else {
        WAIT_POLL
    };
    // One full read (access, and the status as it stands); then only the question record is
    // looked at until it says the ask is over — never the whole chat on every wake-up.
    let mut status = read(&state, &id, &who).await?;
    loop {
        if status.state.is_final() || tokio::time::Instant::now() >= deadline {
            return Ok(super::with_chat(&id.chat, axum::Json(status)));
        }
        let changed = async {
            loop {
                match events.recv().await {
                    Ok(ChatEvent::State { chat_id, .. } | ChatEvent::Message { chat_id, .. })
                        if chat_id == id.chat =>
                    {
                        return;
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        std::future::pending::<()>().await
                    }
                }
            }
        };
        let elsewhere = async {
            loop {
                match crate::events::pushed(&mut pushed).await {
                    Ok(frogbot_core::agent::views::Change::Chat(c)) if c == id.chat => return,
                    Ok(
                        frogbot_core::agent::views::Change::Chat(_)
                        | frogbot_core::agent::views::Change::Job { .. },
                    ) => {}
                    // Notices may have been lost: read.
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        std::future::pending::<()>().await
                    }
                }
            }
        };
        tokio::select! {
            _ = changed => {}
            _ = elsewhere => {}
            _ = tokio::time::sleep(poll) => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
        let open = status.state == AskState::Open
            && state
                .engine
                .questions()
                .ask_waits(&id)
                .await
                .map_err(|e| ApiError::from(e).with_chat(&id.chat))?
                == Some(true);
        if !open || tokio::time::Instant::now() >= deadline {
            status = read(&state, &id, &who).await?;
        }
    }
}

/// How many ask waits each caller holds open at once (anonymous callers count as one).
#[derive(Debug)]
pub struct Waiters {
    /// The most per caller.
    pub per_caller: usize,
    open: std::sync::Mutex<std::collections::HashMap<String, usize>>,
}

impl Waiters {
    /// At most `per_caller` waits per caller.
    pub fn new(per_caller: usize) -> Waiters {
        Waiters {
            per_caller,
            open: Default::default(),
        }
    }

    /// A slot for one more wait of `who`, freed when dropped; `None` when it holds them all.
    fn enter<'a>(&'a self, who: &Principal) -> Option<WaitSlot<'a>> {
        let key = who.describe();
        let mut open = self.open.lock().expect("waiters");
        let n = open.entry(key.clone()).or_default();
        if *n >= self.per_caller {
            return None;
        }
        *n += 1;
        Some(WaitSlot { waiters: self, key })
    }
}

struct WaitSlot<'a> {
    waiters: &'a Waiters,
    key: String,
}

impl Drop for WaitSlot<'_> {
    fn drop(&mut self) {
        let mut open = self.waiters.open.lock().expect("waiters");
        if let Some(n) = open.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// `DELETE /api/asks/{id}`: withdraws an open ask (the card shows it was cancelled) or removes
/// a queued one; 200 with the status. An ask that is over: 409 `stale`.
pub(super) async fn cancel(Call { state, who }: Call, Path(raw): Path<String>) -> ApiResult {
    let id = ask_id(&raw)?;
    let user = who.user_id().cloned();
    let err = |e: ApiError| e.with_chat(&id.chat);
    // Who may read the ask may cancel it: a web chat's readers are its writers, and in a
    // channel chat only its asker.
    let (row, mut status) = read_with_chat(&state, &id, &who).await?;
    match status.state {
        AskState::Open => {
            let waiting = status.reply_id.clone().unwrap_or_default();
            if row.awaiting_message_id.as_deref() != Some(waiting.as_str())
                || !state
                    .engine
                    .questions()
                    .withdraw(&id.chat, &waiting)
                    .await
                    .map_err(|e| err(e.into()))?
            {
                return Err(err(ApiError::conflict(
                    "stale",
                    "the ask is no longer open",
                )));
            }
            status = read(&state, &id, &who).await?;
        }
        AskState::Queued => {
            match state
                .engine
                .chats()
                .delete_queued(&id.chat, &id.message, user.as_ref())
                .await
                .map_err(|e| err(e.into()))?
            {
                QueuedChange::Done(_) => status.state = AskState::Cancelled,
                QueuedChange::Forbidden => return Err(err(ApiError::forbidden())),
                // Promoted meanwhile: it is being posted; cancel it once it is open.
                _ => {
                    return Err(err(ApiError::conflict(
                        "not-queued",
                        "the ask is being posted; cancel it again",
                    )));
                }
            }
        }
        _ => {
            return Err(err(ApiError::conflict(
                "stale",
                format!(
                    "the ask is already {}",
                    json!(status.state).as_str().unwrap_or("over")
                ),
            )));
        }
    }
    Ok(super::with_chat(
        &id.chat,
        axum::Json(status).into_response(),
    ))
}
