//! Prompt building: a chat's history as model messages, kept in memory across turns (read once,
//! then only what is newer), and the question tool as the model sees it.

use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::super::{ModelMessage, ToolCallRequest, ToolSpec, Transcript};
use crate::error::Result;
use crate::model::{ChatId, MessagePart, QUESTION_TOOL, Role, ToolPart, ToolState, UiMessage};
use crate::store::{DynStore, StoredMessage};

/// A chat's history as this process last knew it: its non-queued messages in stored order, up to
/// the chat's `version`, each with its model messages (converted once).
#[derive(Clone, Debug, Default)]
struct ChatHistory {
    version: i64,
    messages: Vec<(StoredMessage, Arc<[ModelMessage]>)>,
    used: u64,
}

fn converted(m: &StoredMessage) -> Arc<[ModelMessage]> {
    let mut out = Vec::new();
    to_model_messages(&m.message, &mut out);
    Arc::from(out)
}

impl ChatHistory {
    /// Puts `m` in its place (replacing an older version of it); queued messages are not history.
    fn apply(&mut self, m: &StoredMessage) {
        self.version = self.version.max(m.version);
        // Most writes touch the latest turn: look from the end.
        if let Some(i) = self
            .messages
            .iter()
            .rposition(|(x, _)| x.message.id == m.message.id)
        {
            if !m.queued && self.messages[i].0.order_key() == m.order_key() {
                self.messages[i] = (m.clone(), converted(m));
                return;
            }
            self.messages.remove(i);
        }
        if m.queued {
            return;
        }
        let key = m.order_key();
        let at = self.messages.partition_point(|(x, _)| x.order_key() <= key);
        self.messages.insert(at, (m.clone(), converted(m)));
    }
}

/// The histories of recently used chats, bounded by a total number of messages.
#[derive(Debug)]
pub(crate) struct HistoryCache {
    chats: Mutex<HashMap<ChatId, ChatHistory>>,
    limit: usize,
    tick: std::sync::atomic::AtomicU64,
}

impl HistoryCache {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            chats: Mutex::new(HashMap::new()),
            limit,
            tick: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Records messages this process just wrote (or read) for `chat`.
    pub(crate) fn note(&self, chat: &ChatId, written: &[&StoredMessage]) {
        let mut chats = self.chats.lock().expect("history cache");
        if let Some(h) = chats.get_mut(chat) {
            for m in written {
                h.apply(m);
            }
        }
    }

    /// The chat's history up to now, as model messages, leaving out `except` (the reply being
    /// written). Reads from the store only what is newer than the cached version, unless the
    /// caller knows the cache is current (`current_as_of`: the chat's version before the caller's
    /// own writes, which it has noted). The transcript shares the cached messages: its cost does
    /// not grow with the chat's length beyond one pointer per message.
    pub(crate) async fn history(
        &self,
        store: &DynStore,
        chat: &ChatId,
        current_as_of: Option<i64>,
        except: &str,
    ) -> Result<Transcript> {
        let cached = {
            let chats = self.chats.lock().expect("history cache");
            chats.get(chat).map(|h| h.version)
        };
        let fresh = match (cached, current_as_of) {
            (Some(v), Some(known)) if known <= v => None,
            (v, _) => Some(store.messages_since(chat, v.unwrap_or(0)).await?),
        };
        let tick = self.tick.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut chats = self.chats.lock().expect("history cache");
        let entry = chats.entry(chat.clone()).or_default();
        if let Some(changes) = fresh {
            for m in &changes.messages {
                entry.apply(m);
            }
            entry.version = entry.version.max(changes.version);
        }
        entry.used = tick;
        let mut out = Transcript::new();
        for (m, chunk) in &entry.messages {
            if m.message.id != except {
                out.push_chunk(chunk.clone());
            }
        }
        self.evict(&mut chats);
        Ok(out)
    }

    fn evict(&self, chats: &mut HashMap<ChatId, ChatHistory>) {
        let mut total: usize = chats.values().map(|h| h.messages.len()).sum();
        if total <= self.limit {
            return;
        }
        while total > self.limit && chats.len() > 1 {
            let Some(oldest) = chats
                .iter()
                .min_by_key(|(_, h)| h.used)
                .map(|(c, _)| c.clone())
            else {
                break;
            };
            total -= chats.remove(&oldest).map(|h| h.messages.len()).unwrap_or(0);
        }
    }
}

pub(crate) fn is_step_start(p: &MessagePart) -> bool {
    matches!(p, MessagePart::Other(v) if v.get("type").and_then(Value::as_str) == Some("step-start"))
}

/// The question tool as the model sees it.
pub fn question_tool_spec() -> ToolSpec {
    ToolSpec {
        name: QUESTION_TOOL.into(),
        description: "Ask the user one or more multiple-choice questions and wait for the answer."
            .into(),
        input_schema: json!({
            "type": "object",
            "required": ["questions"],
            "properties": {
                "questions": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["header", "question", "options"],
                        "properties": {
                            "header": {"type": "string", "description": "A short title"},
                            "question": {"type": "string"},
                            "options": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["label"],
                                    "properties": {
                                        "label": {"type": "string"},
                                        "description": {"type": "string"}
                                    }
                                }
                            },
                            "multiple": {"type": "boolean"},
                            "custom": {"type": "boolean"}
                        }
                    }
                }
            }
        }),
    }
}

/// Converts a stored message into model messages: a user message into one; an assistant message
/// into one assistant message per step followed by its tool results.
pub fn to_model_messages(m: &UiMessage, out: &mut Vec<ModelMessage>) {
    match m.role {
        Role::User => out.push(ModelMessage::User { text: m.text() }),
        Role::Assistant => {
            let mut steps: Vec<Vec<&MessagePart>> = vec![vec![]];
            for p in &m.parts {
                if is_step_start(p) {
                    if !steps.last().is_some_and(Vec::is_empty) {
                        steps.push(vec![]);
                    }
                } else {
                    steps.last_mut().expect("one step").push(p);
                }
            }
            for step in steps.into_iter().filter(|s| !s.is_empty()) {
                let text: String = step
                    .iter()
                    .filter_map(|p| match p {
                        MessagePart::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                let tools: Vec<&ToolPart> = step
                    .iter()
                    .filter_map(|p| match p {
                        MessagePart::Tool(t) => Some(t),
                        _ => None,
                    })
                    .collect();
                out.push(ModelMessage::Assistant {
                    text,
                    tool_calls: tools
                        .iter()
                        .map(|t| ToolCallRequest {
                            id: t.tool_call_id.clone(),
                            name: t.tool_name.clone(),
                            input: t.input.clone(),
                        })
                        .collect(),
                });
                for t in tools {
                    let (content, is_error) = match t.state {
                        ToolState::OutputAvailable => (
                            t.output.as_ref().map(Value::to_string).unwrap_or_default(),
                            false,
                        ),
                        ToolState::OutputError => (t.error_text.clone().unwrap_or_default(), true),
                        ToolState::InputAvailable => ("no result".into(), true),
                    };
                    out.push(ModelMessage::Tool {
                        tool_call_id: t.tool_call_id.clone(),
                        name: t.tool_name.clone(),
                        content,
                        is_error,
                    });
                }
            }
        }
    }
}
