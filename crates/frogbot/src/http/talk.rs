//! The endpoints of agents outside FrogBot (the rply messages model): open a chat bound to the
//! calling agent, post messages of text, a title and blocks, edit, patch, delete and pin them,
//! read the inbox of people's messages and block events, and acknowledge messages. The caller's
//! bearer token names the agent; a chat bound to another agent reads as absent (404).

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

use frogbot_core::agent::{AgentMessage, AgentPlace, ChannelTarget, EventOutcome, MessageEdit};
use frogbot_core::model::{Ack, Block, ChatId, UserId};

use frogbot_core::policy::{Action, Principal};

use super::access::{Call, ChatCall, decide};
use super::{ApiError, ApiResult, chat_id, parse_json, with_chat};

impl ChatCall {
    /// [`ChatCall::run`], when the calling agent holds the chat (404 when it is not its, as if
    /// absent).
    async fn agent<R: IntoResponse>(
        &self,
        run: impl AsyncFnOnce(&ChatId, Option<&UserId>) -> Result<R, ApiError>,
    ) -> ApiResult {
        self.run(async |chat, user| {
            self.load(chat, "no agent chat", |v| Action::AgentWrite(v))
                .await?;
            run(chat, user).await
        })
        .await
    }
}

/// The longest one inbox request waits.
const MAX_INBOX_WAIT_SECONDS: u64 = 300;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct OpenBody {
    to: Option<Value>,
    text: Option<String>,
    idempotency_key: Option<String>,
}

fn blocks_of(v: Option<&Value>) -> Result<Option<Vec<Block>>, ApiError> {
    v.map(|v| Block::list_from_json(v).map_err(|e| ApiError::invalid(e.0)))
        .transpose()
}

/// `POST /api/agent-chats`: 201 `{"chatId", "channel"?}` — a chat bound to the caller (`to`:
/// `{"web": CHAT}` or none for a new web chat; `{"channel", "thread"}` or `{"channel", "user"}`
/// for a platform thread, started with `text` where the target is a channel or a person).
pub(super) async fn open(Call { state, who }: Call, body: Bytes) -> ApiResult {
    let user = who.user_id().cloned();
    let body: OpenBody = parse_json(&body)?;
    let key = match &body.idempotency_key {
        Some(k) => {
            ChatId::new(k.as_str()).map_err(|_| {
                ApiError::invalid("`idempotencyKey` is 1-128 characters of A-Z a-z 0-9 _ -")
            })?;
            format!("agent-{k}")
        }
        None => format!("agent-{}", uuid::Uuid::new_v4().simple()),
    };
    let text = body.text.clone().unwrap_or_default();
    let place = match &body.to {
        None => AgentPlace::Web {
            chat: ChatId::new(key.as_str()).map_err(|e| ApiError::invalid(e.to_string()))?,
            owner: None,
        },
        Some(to) => match (to.get("web"), to.get("channel")) {
            (Some(Value::String(web)), None) => {
                let owner = match to.get("user") {
                    None => None,
                    Some(Value::String(u)) if state.principals.is_user(u) => {
                        Some(frogbot_core::model::UserId::new(u.as_str()))
                    }
                    Some(_) => {
                        return Err(ApiError::invalid(
                            "`user` of a web target is the id of one of [[users]]",
                        ));
                    }
                };
                AgentPlace::Web {
                    chat: chat_id(web)?,
                    owner,
                }
            }
            (None, Some(Value::String(platform))) => {
                let place = match (to.get("thread"), to.get("user")) {
                    (Some(Value::String(t)), None) if !t.is_empty() => {
                        ChannelTarget::Thread(t.clone())
                    }
                    (None, Some(Value::String(u))) if !u.is_empty() => {
                        ChannelTarget::User(u.clone())
                    }
                    _ => {
                        return Err(ApiError::invalid(
                            "a channel target names one `thread` or one `user`",
                        ));
                    }
                };
                if text.trim().is_empty() && matches!(place, ChannelTarget::User(_)) {
                    return Err(ApiError::invalid(
                        "`text` is the first message a direct conversation starts with",
                    ));
                }
                AgentPlace::Channel {
                    platform: platform.clone(),
                    place,
                }
            }
            _ => {
                return Err(ApiError::invalid(
                    "`to` is {\"web\": CHAT, \"user\"?: USER} or {\"channel\": P, \"thread\"|\"user\": …}",
                ));
            }
        },
    };
    decide(&state.policy, &who, Action::OpenAgentChat(place.target()))?;
    let row = state
        .engine
        .agents()
        .open_chat(user.as_ref(), place, &text, &key)
        .await?;
    Ok(with_chat(
        &row.chat_id,
        (
            StatusCode::CREATED,
            axum::Json(json!({"chatId": row.chat_id, "channel": row.channel})),
        ),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SendBody {
    id: Option<String>,
    title: Option<String>,
    text: Option<String>,
    blocks: Option<Value>,
    pin: Option<String>,
    /// File parts (`{"type": "file", "url": "/api/chats/{chat}/files/{id}", …}`: what an upload
    /// answered).
    #[serde(default)]
    files: Vec<Value>,
}

/// `POST /api/chats/{id}/agent-messages`: 201 with the message (`id` makes it idempotent).
pub(super) async fn send(c: ChatCall, body: Bytes) -> ApiResult {
    c.agent(async |chat, user| {
        let body: SendBody = parse_json(&body)?;
        let blocks = blocks_of(body.blocks.as_ref())?.unwrap_or_default();
        let message = AgentMessage {
            id: body.id,
            title: body.title,
            text: body.text,
            blocks,
            pin: body.pin,
            files: body
                .files
                .into_iter()
                .map(frogbot_core::model::MessagePart::Other)
                .collect(),
        };
        let m = c.state.engine.agents().post(chat, user, message).await?;
        Ok((StatusCode::CREATED, axum::Json(m)))
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EditBody {
    title: Option<String>,
    text: Option<String>,
    blocks: Option<Value>,
    /// One block (with its `id`) replacing the block of that id.
    block: Option<Value>,
}

/// `PATCH /api/chats/{id}/agent-messages/{message}`: new content, or `{"block": {"id", …}}`.
pub(super) async fn edit(c: ChatCall, body: Bytes) -> ApiResult {
    c.agent(async |chat, user| {
        let body: EditBody = parse_json(&body)?;
        let edit = match body.block {
            Some(block) => {
                if body.title.is_some() || body.text.is_some() || body.blocks.is_some() {
                    return Err(ApiError::invalid(
                        "patch one `block`, or replace `title` / `text` / `blocks`, not both",
                    ));
                }
                let b = Block::from_json(&block).map_err(|e| ApiError::invalid(e.0))?;
                let id =
                    b.id.clone()
                        .ok_or_else(|| ApiError::invalid("the patched `block` needs its `id`"))?;
                MessageEdit::Patch {
                    block_id: id,
                    block: b,
                }
            }
            None => {
                if body.title.is_none() && body.text.is_none() && body.blocks.is_none() {
                    return Err(ApiError::invalid(
                        "give `title`, `text`, `blocks` or one `block`",
                    ));
                }
                MessageEdit::Replace {
                    title: body.title,
                    text: body.text,
                    blocks: blocks_of(body.blocks.as_ref())?,
                }
            }
        };
        let m = c.state.engine.agents().edit(chat, user, &c.item, edit);
        Ok(axum::Json(m.await?))
    })
    .await
}

/// `DELETE /api/chats/{id}/agent-messages/{message}`: 204 (an ask's waiting question is
/// withdrawn).
pub(super) async fn delete(c: ChatCall) -> ApiResult {
    c.agent(async |chat, user| {
        c.state.engine.agents().delete(chat, user, &c.item).await?;
        Ok(StatusCode::NO_CONTENT)
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PinBody {
    message_id: String,
}

/// `PUT /api/chats/{id}/pins/{key}` `{"messageId"}`: the message pinned under the key.
pub(super) async fn pin(c: ChatCall, body: Bytes) -> ApiResult {
    c.agent(async |chat, user| {
        let body: PinBody = parse_json(&body)?;
        let pinned = Some(body.message_id.as_str());
        let m = c.state.engine.agents().pin(chat, user, &c.item, pinned);
        Ok(axum::Json(m.await?))
    })
    .await
}

/// `DELETE /api/chats/{id}/pins/{key}`: 204; the message returns to the thread. The chat's
/// agent unpins (as `AgentWrite`); so does the person whose chat it is, in the web chat (as
/// `WriteChat`: the chat's owner).
pub(super) async fn unpin(c: ChatCall) -> ApiResult {
    let (engine, key) = (&c.state.engine, &c.item);
    c.run(async |chat, user| {
        if matches!(c.who, Principal::Agent(_)) {
            c.load(chat, "no agent chat", |v| Action::AgentWrite(v))
                .await?;
            engine.agents().pin(chat, user, key, None).await?;
        } else {
            c.load(chat, "no chat", |v| Action::WriteChat(v)).await?;
            engine.chats().unpin(chat, user, key).await?;
        }
        Ok(StatusCode::NO_CONTENT)
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct InboxQuery {
    chat_id: Option<String>,
    wait: Option<u64>,
    limit: Option<u32>,
}

/// `GET /api/inbox?chatId=&wait=SECONDS&limit=`: `{"items": [...]}` — the caller's people's
/// messages and block events, oldest first, each returned once and marked Seen.
pub(super) async fn inbox(Call { state, who }: Call, Query(q): Query<InboxQuery>) -> ApiResult {
    decide(&state.policy, &who, Action::ReadInbox)?;
    let user = who.user_id().cloned();
    let chat = q.chat_id.as_deref().map(chat_id).transpose()?;
    let wait = Duration::from_secs(q.wait.unwrap_or(0).min(MAX_INBOX_WAIT_SECONDS));
    let limit = q.limit.unwrap_or(50).clamp(1, 500);
    let items = state
        .engine
        .agents()
        .inbox_wait(user.as_ref(), chat.as_ref(), limit, wait)
        .await?;
    Ok(axum::Json(json!({"items": items})).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AckBody {
    state: String,
}

/// `POST /api/chats/{id}/messages/{message}/ack` `{"state": "working" | "done"}`: 204.
pub(super) async fn ack(c: ChatCall, body: Bytes) -> ApiResult {
    c.agent(async |chat, user| {
        let body: AckBody = parse_json(&body)?;
        let ack = match body.state.as_str() {
            "working" => Ack::Working,
            "done" => Ack::Done,
            other => {
                return Err(ApiError::invalid(format!(
                    "unknown state {other:?}: use \"working\" or \"done\""
                )));
            }
        };
        c.state
            .engine
            .agents()
            .ack(chat, user, &c.item, ack)
            .await?;
        Ok(StatusCode::NO_CONTENT)
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct EventBody {
    message_id: String,
    block_id: String,
    value: String,
}

/// `POST /api/chats/{id}/block-events` `{"messageId", "blockId", "value"}`: 202 when the event
/// reached the agent's inbox, 409 `stale` when the message, block or button is gone.
pub(super) async fn event(c: ChatCall, body: Bytes) -> ApiResult {
    c.run(async |chat, user| {
        c.load(chat, "no chat", |v| Action::BlockEvent(v)).await?;
        let body: EventBody = parse_json(&body)?;
        match c
            .state
            .engine
            .chats()
            .web_event(chat, user, &body.message_id, &body.block_id, &body.value)
            .await?
        {
            EventOutcome::Sent => Ok((StatusCode::ACCEPTED, axum::Json(json!({"sent": true})))),
            _ => Err(ApiError::conflict(
                "stale",
                "that message, block or button is gone",
            )),
        }
    })
    .await
}
