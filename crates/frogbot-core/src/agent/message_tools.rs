//! FrogBot's own agent's message tools (`EngineConfig::message_tools`): `send_message` posts a
//! message with a title and blocks, `edit_message` changes one the agent posted so, and
//! `set_status` keeps the chat's `status` pin — the same operations an agent outside FrogBot
//! has through `frogbot send|edit|pin` ([`super::talk`]), shown on the chat's platform by the
//! same durable `sync-message` jobs.
//!
//! `edit_message` also replaces the text of the agent's earlier replies (by default its
//! previous one): their platform messages are kept on them once posted (`metadata.posted`), and
//! edited in place by the same job. The reply being written and one a question waits in are not
//! edited.
//!
//! The tools are made before the channel layer they call ([`super::Engine`] wires them with a
//! weak reference once it exists): a turn calls them, they never call a turn.

use std::sync::{Arc, OnceLock, Weak};

use async_trait::async_trait;
use serde_json::{Value, json};
use tracing::Instrument;

use super::channel::Channels;
use super::talk::{AgentMessage, MessageEdit, is_posted_message, is_reply};
use super::{Tool, ToolContext, ToolSpec};
use crate::BoxError;
use crate::model::{Block, ChatId, UiMessage, blocks_of};

/// The tools' names.
pub const SEND_MESSAGE_TOOL: &str = "send_message";
/// See [`SEND_MESSAGE_TOOL`].
pub const EDIT_MESSAGE_TOOL: &str = "edit_message";
/// See [`SEND_MESSAGE_TOOL`].
pub const SET_STATUS_TOOL: &str = "set_status";
/// The pin key `set_status` keeps.
pub const STATUS_PIN: &str = "status";

/// The channel layer, once the engine made it.
pub(crate) type ChannelsCell = Arc<OnceLock<Weak<Channels>>>;

/// The three tools over `cell`.
pub(crate) fn message_tools(cell: &ChannelsCell) -> Vec<Arc<dyn Tool>> {
    [
        MessageToolKind::Send,
        MessageToolKind::Edit,
        MessageToolKind::Status,
    ]
    .into_iter()
    .map(|kind| {
        Arc::new(MessageTool {
            kind,
            channels: cell.clone(),
        }) as Arc<dyn Tool>
    })
    .collect()
}

#[derive(Clone, Copy, Debug)]
enum MessageToolKind {
    Send,
    Edit,
    Status,
}

struct MessageTool {
    kind: MessageToolKind,
    channels: ChannelsCell,
}

fn blocks_schema() -> Value {
    json!({
        "type": "array",
        "description": "Typed blocks shown under the text with the platform's own means. Each is an object with a \"type\": \
            {\"type\":\"table\",\"columns\":[\"Name\",…],\"rows\":[[\"cell\",…],…]}, \
            {\"type\":\"progress\",\"value\":3,\"max\":10,\"label\":\"…\"}, \
            {\"type\":\"image\",\"url\":\"https://…\",\"alt\":\"…\"}, \
            {\"type\":\"code\",\"code\":\"…\",\"language\":\"rust\"}, \
            {\"type\":\"fields\",\"fields\":[{\"name\":\"…\",\"value\":\"…\"}]}; \
            an optional \"id\" (A-Z a-z 0-9 _ -) lets edit_message replace that block alone. \
            To ask the person something use the question tool, not a block.",
        "items": {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["table", "progress", "image", "code", "fields"]},
                "id": {"type": "string"}
            },
            "required": ["type"]
        }
    })
}

fn content_properties() -> serde_json::Map<String, Value> {
    let mut p = serde_json::Map::new();
    p.insert(
        "title".into(),
        json!({"type": "string", "description": "A one-line title, shown bold."}),
    );
    p.insert(
        "text".into(),
        json!({"type": "string", "description": "Markdown text."}),
    );
    p.insert("blocks".into(), blocks_schema());
    p
}

impl MessageTool {
    fn channels(&self) -> Result<Arc<Channels>, BoxError> {
        self.channels
            .get()
            .and_then(Weak::upgrade)
            .ok_or_else(|| "the engine is shutting down".into())
    }
}

/// The blocks of `input`, if it has any; a bad one is refused with the reason.
fn blocks_in(input: &Value) -> Result<Option<Vec<Block>>, BoxError> {
    match input.get("blocks") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => Block::list_from_json(v).map(Some).map_err(|e| {
            let reason = e.0;
            if reason.contains("is an input") {
                "input blocks are not messages: ask the person with the question tool".into()
            } else {
                format!("invalid blocks: {reason}").into()
            }
        }),
    }
}

fn string_in(input: &Value, key: &str) -> Result<Option<String>, BoxError> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("{key} must be a string").into()),
    }
}

/// A message id made from the tool call's: a step that runs again after a crash posts nothing
/// twice.
fn message_id_for(call: &str) -> String {
    let clean: String = call
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    format!("msg-{clean}")
}

fn result_of(m: &UiMessage) -> Value {
    let mut out = json!({"messageId": m.id});
    if let Some(pin) = &m.metadata.pin {
        out["pinned"] = json!(pin);
    }
    out
}

#[async_trait]
impl Tool for MessageTool {
    fn spec(&self) -> ToolSpec {
        let mut props = content_properties();
        let (name, description, required): (&str, &str, Vec<&str>) = match self.kind {
            MessageToolKind::Send => (
                SEND_MESSAGE_TOOL,
                "Posts a message in this chat now, while you keep working: a title, Markdown text and typed \
                 blocks (tables, progress bars, images, code, key/value fields), drawn with the platform's own \
                 controls. Returns its messageId, which edit_message takes. Your final answer is still your \
                 reply; use this for results that read better as a table or for progress.",
                vec![],
            ),
            MessageToolKind::Edit => {
                props.insert(
                    "message_id".into(),
                    json!({"type": "string", "description": "The messageId send_message or set_status returned; absent: your previous reply in this chat."}),
                );
                props.insert(
                    "block_id".into(),
                    json!({"type": "string", "description": "Replace only this block (by its id) with blocks[0]."}),
                );
                (
                    EDIT_MESSAGE_TOOL,
                    "Changes one of your earlier messages in this chat, in place on the platform (no new \
                     notification): without message_id your previous reply, whose text is replaced by text; with \
                     the messageId of a message you posted with send_message or set_status, the title, text and \
                     blocks given replace the old ones, and with block_id only that block is replaced by blocks[0].",
                    vec![],
                )
            }
            MessageToolKind::Status => {
                props.insert(
                    "clear".into(),
                    json!({"type": "boolean", "description": "Take the status pin down (the message stays in the chat)."}),
                );
                (
                    SET_STATUS_TOOL,
                    "Sets this chat's status: one message pinned above the conversation (e.g. a progress bar and \
                     what you are doing), edited in place each time you call this again.",
                    vec![],
                )
            }
        };
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema: json!({
                "type": "object",
                "properties": props,
                "required": required,
                "additionalProperties": false
            }),
        }
    }

    async fn call(&self, input: Value, ctx: ToolContext) -> Result<Value, BoxError> {
        let span = tracing::info_span!("message_tool", tool = ?self.kind, chat_id = %ctx.chat_id, tool_call_id = %ctx.tool_call_id);
        self.run(input, ctx).instrument(span).await
    }
}

impl MessageTool {
    async fn run(&self, input: Value, ctx: ToolContext) -> Result<Value, BoxError> {
        if !input.is_object() {
            return Err("the input must be an object".into());
        }
        let channels = self.channels()?;
        let chat = &ctx.chat_id;
        let title = string_in(&input, "title")?;
        let text = string_in(&input, "text")?;
        let blocks = blocks_in(&input)?;
        match self.kind {
            MessageToolKind::Send => {
                let m = post(
                    &channels,
                    chat,
                    &ctx.tool_call_id,
                    title,
                    text,
                    blocks,
                    None,
                )
                .await?;
                Ok(result_of(&m))
            }
            MessageToolKind::Edit => {
                let id = match string_in(&input, "message_id")? {
                    Some(id) => id,
                    None => previous_reply(&channels, chat, &ctx.message_id)
                        .await?
                        .ok_or("you have no earlier reply in this chat")?,
                };
                if id == ctx.message_id {
                    return Err(
                        "that is the reply you are writing now: write it as it should be".into(),
                    );
                }
                let current = channels.turns.store.get_message(chat, &id).await?;
                let current = current.map(|m| m.message);
                match current {
                    Some(m) if is_posted_message(&m) => {}
                    Some(m) if is_reply(&m) => {
                        if title.is_some() || blocks.is_some() || input.get("block_id").is_some() {
                            return Err(
                                "a reply's text is what can be edited: give text only".into()
                            );
                        }
                        let text = text.ok_or("give the reply's new text")?;
                        let row = chat_row(&channels, chat).await?;
                        let m = channels.edit_reply(&row, &id, &text).await?;
                        return Ok(result_of(&m));
                    }
                    _ => {
                        return Err(format!(
                            "no message {id:?} of yours in this chat (a reply, or one posted with send_message or set_status)"
                        )
                        .into());
                    }
                }
                let edit = match string_in(&input, "block_id")? {
                    Some(block_id) => {
                        let block = blocks
                            .and_then(|b| b.into_iter().next())
                            .ok_or("block_id needs the new block as blocks[0]")?;
                        MessageEdit::Patch { block_id, block }
                    }
                    None => {
                        if title.is_none() && text.is_none() && blocks.is_none() {
                            return Err("give a title, text or blocks to change".into());
                        }
                        MessageEdit::Replace {
                            title,
                            text,
                            blocks,
                        }
                    }
                };
                let m = channels.edit_agent_message(chat, &id, edit).await?;
                Ok(result_of(&m))
            }
            MessageToolKind::Status => {
                let current = status_message(&channels, chat).await?;
                if input.get("clear").and_then(Value::as_bool) == Some(true) {
                    channels.pin_agent_message(chat, STATUS_PIN, None).await?;
                    return Ok(json!({"cleared": current.is_some()}));
                }
                if title.is_none() && text.is_none() && blocks.is_none() {
                    return Err(
                        "give the status as a title, text or blocks (or clear: true)".into(),
                    );
                }
                let m = match current {
                    Some(m) => {
                        // The status is the new content whole: what is not given goes.
                        let unchanged = m.metadata.title == title
                            && text.as_deref().unwrap_or_default() == m.text()
                            && blocks.as_deref().unwrap_or_default() == blocks_of(&m).as_slice();
                        if unchanged {
                            m
                        } else {
                            channels
                                .edit_agent_message(
                                    chat,
                                    &m.id,
                                    MessageEdit::Replace {
                                        title: Some(title.unwrap_or_default()),
                                        text: Some(text.unwrap_or_default()),
                                        blocks: Some(blocks.unwrap_or_default()),
                                    },
                                )
                                .await?
                        }
                    }
                    None => {
                        let pin = Some(STATUS_PIN.into());
                        post(&channels, chat, &ctx.tool_call_id, title, text, blocks, pin).await?
                    }
                };
                Ok(result_of(&m))
            }
        }
    }
}

async fn chat_row(channels: &Channels, chat: &ChatId) -> Result<crate::store::ChatRow, BoxError> {
    channels
        .turns
        .store
        .get_chat(chat)
        .await?
        .ok_or_else(|| format!("no chat {chat}").into())
}

/// Posts the agent's message in `chat` (pinned under `pin`), its id made from the tool call's.
async fn post(
    channels: &Channels,
    chat: &ChatId,
    call: &str,
    title: Option<String>,
    text: Option<String>,
    blocks: Option<Vec<Block>>,
    pin: Option<String>,
) -> Result<UiMessage, BoxError> {
    let row = chat_row(channels, chat).await?;
    let message = AgentMessage {
        id: Some(message_id_for(call)),
        title,
        text,
        blocks: blocks.unwrap_or_default(),
        pin,
        files: Vec::new(),
    };
    Ok(channels.post_agent_message(&row, None, message).await?)
}

/// The chat's newest message that `which` takes, if any.
async fn newest(
    channels: &Channels,
    chat: &ChatId,
    which: impl Fn(&UiMessage) -> bool,
) -> Result<Option<UiMessage>, BoxError> {
    Ok(channels
        .turns
        .store
        .list_messages(chat)
        .await?
        .into_iter()
        .rev()
        .map(|m| m.message)
        .find(|m| which(m)))
}

/// The latest reply of the chat's before the one in progress (`current`).
async fn previous_reply(
    channels: &Channels,
    chat: &ChatId,
    current: &str,
) -> Result<Option<String>, BoxError> {
    let reply = newest(channels, chat, |m| m.id != current && is_reply(m)).await?;
    Ok(reply.map(|m| m.id))
}

/// The chat's live `status` pin the agent posted, if any.
async fn status_message(channels: &Channels, chat: &ChatId) -> Result<Option<UiMessage>, BoxError> {
    newest(channels, chat, |m| {
        m.metadata.pin.as_deref() == Some(STATUS_PIN) && is_posted_message(m)
    })
    .await
}
