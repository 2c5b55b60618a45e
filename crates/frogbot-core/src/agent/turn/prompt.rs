//! Prompt building: a chat's history as model messages, kept in memory across turns (read once,
//! then only what is newer), and the question tool as the model sees it.
//!
//! The history cache keeps a chat's messages, each converted to model messages once, across turns;
//! it is refreshed with `messages_since` only when the chat's version moved, and finds a message by
//! id through an index. The transcript of all but the newest message is kept compacted (O(log n)
//! shared chunks, merged like a binary counter), and the model request clones that transcript, so a
//! request costs the same however long the chat is (the `turns` bench of this crate records the
//! measurement). Past `history_bytes` the request keeps the newest whole turns that fit
//! (`Transcript::within`: whole chunks, then the tail of one, starting at a user message; a cost
//! bounded by the budget, not the chat); the instructions and the turn in progress always go. A
//! channel user message carries its speaker's name and, for the first message of a thread the bot
//! joined late, the thread's earlier messages (`metadata.speaker` / `metadata.context`), written
//! into the model's view here.

use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::super::{ModelMessage, ToolCallRequest, ToolSpec, Transcript};
use crate::error::Result;
use crate::model::{ChatId, MessagePart, QUESTION_TOOL, Role, ToolPart, ToolState, UiMessage};
use crate::store::{DynStore, StoredMessage};

/// A chat's history as this process last knew it: its non-queued messages in stored order, up to
/// the chat's `version`, each with its model messages (converted once).
///
/// Nothing here costs in proportion to the chat's length once warm: a message is found by its id
/// through `keys` and a binary search on the order key, and the transcript of every message but the
/// newest is kept compacted (`prefix`, O(log n) chunks), so a request clones a few pointers.
#[derive(Clone, Debug, Default)]
struct ChatHistory {
    version: i64,
    /// Each message's id and place, with its model messages (the stored message itself is not
    /// kept: only what the model sees).
    messages: Vec<(Held, Arc<[ModelMessage]>)>,
    /// The order key of every message in `messages`, by id.
    keys: HashMap<String, OrderKey>,
    /// The model messages of `messages[..prefix_len]`, compacted.
    prefix: Transcript,
    prefix_len: usize,
    /// The speaker of the first user message that named one (channel threads).
    first_speaker: Option<String>,
    /// Whether several people speak in the chat (or it began with a thread's earlier messages):
    /// then the model sees every user message with its speaker's name.
    named: bool,
    /// Where the current conversation starts: the first order key after the turn of the newest
    /// message that starts a new conversation ([`UiMessage::starts_conversation`]). Nothing
    /// before it is history, whatever order messages are read in.
    floor: Option<OrderKey>,
    /// The newest model choice ([`UiMessage::model_choice`]): model and reasoning option, with
    /// its message's order key. A new conversation keeps it.
    choice: Option<(OrderKey, String, Option<String>)>,
    /// The turn positions of commands answered without the model (a model choice): neither the
    /// command nor its reply is history.
    commands: std::collections::HashSet<i64>,
}

type OrderKey = (bool, i64, i64, i64);

/// What the history keeps of a stored message besides its model messages.
#[derive(Clone, Debug)]
struct Held {
    id: String,
    key: OrderKey,
    /// Its model messages with the speaker named (the same as without for a message with none).
    named: Arc<[ModelMessage]>,
}

/// `m`'s model messages without and with its speaker named.
fn converted(m: &StoredMessage) -> (Arc<[ModelMessage]>, Arc<[ModelMessage]>) {
    let mut named = Vec::new();
    convert(&m.message, true, &mut named);
    let named: Arc<[ModelMessage]> = Arc::from(named);
    if m.message.metadata.speaker.is_none() {
        return (named.clone(), named);
    }
    let mut plain = Vec::new();
    convert(&m.message, false, &mut plain);
    (Arc::from(plain), named)
}

impl ChatHistory {
    /// Where the message `id` is in `messages`.
    fn index_of(&self, id: &str) -> Option<usize> {
        let key = *self.keys.get(id)?;
        let i = self.messages.partition_point(|(x, _)| x.key < key);
        (i < self.messages.len() && self.messages[i].0.id == id).then_some(i)
    }

    /// `messages[i]` changed: the compacted prefix no longer holds if it covered it.
    fn touched(&mut self, i: usize) {
        if i < self.prefix_len {
            self.prefix = Transcript::new();
            self.prefix_len = 0;
        }
    }

    /// Notes `m`'s speaker: a second person (or a thread's earlier messages) names every
    /// speaker from then on, the messages converted before included (once per chat).
    fn note_speaker(&mut self, m: &StoredMessage) {
        if self.named || m.queued {
            return;
        }
        let md = &m.message.metadata;
        let second = match (&self.first_speaker, &md.speaker) {
            (_, None) => false,
            (None, Some(s)) => {
                self.first_speaker = Some(s.clone());
                false
            }
            (Some(first), Some(s)) => first != s,
        };
        if second || md.context.is_some() {
            self.named = true;
            for (held, current) in &mut self.messages {
                *current = held.named.clone();
            }
            self.prefix = Transcript::new();
            self.prefix_len = 0;
        }
    }

    /// Puts `m` in its place (replacing an older version of it); queued messages are not history,
    /// nor is anything before the current conversation's start.
    fn apply(&mut self, m: &StoredMessage) {
        self.version = self.version.max(m.version);
        if !m.queued
            && let Some((model, reasoning)) = m.message.model_choice()
        {
            if self
                .choice
                .as_ref()
                .is_none_or(|(k, _, _)| *k <= m.order_key())
            {
                self.choice = Some((m.order_key(), model, reasoning));
            }
            // The command and its reply (at its position) are not for the model.
            if let Some(position) = m.position
                && self.commands.insert(position)
            {
                self.messages
                    .retain(|(held, _)| held.key.0 || held.key.1 != position);
                self.keys.retain(|_, key| key.0 || key.1 != position);
                self.prefix = Transcript::new();
                self.prefix_len = 0;
            }
            return;
        }
        if !m.queued && m.position.is_some_and(|p| self.commands.contains(&p)) {
            return;
        }
        if let (false, Some(position)) = (m.queued, m.position)
            && m.message.starts_conversation()
        {
            // The conversation starts after this message's turn (its reply is not history either).
            let floor = (false, position + 1, i64::MIN, i64::MIN);
            if self.floor.is_none_or(|f| f < floor) {
                self.floor = Some(floor);
                self.messages.retain(|(held, _)| held.key >= floor);
                self.keys.retain(|_, key| *key >= floor);
                self.prefix = Transcript::new();
                self.prefix_len = 0;
            }
            return;
        }
        if self.floor.is_some_and(|f| m.order_key() < f) {
            return;
        }
        self.note_speaker(m);
        let (plain, named) = converted(m);
        let current = if self.named { named.clone() } else { plain };
        if let Some(i) = self.index_of(&m.message.id) {
            if !m.queued && self.messages[i].0.key == m.order_key() {
                self.messages[i] = (
                    Held {
                        id: m.message.id.clone(),
                        key: m.order_key(),
                        named,
                    },
                    current,
                );
                self.touched(i);
                return;
            }
            self.messages.remove(i);
            self.keys.remove(&m.message.id);
            self.touched(i);
        }
        if m.queued {
            return;
        }
        let key = m.order_key();
        let at = self.messages.partition_point(|(x, _)| x.key <= key);
        let held = Held {
            id: m.message.id.clone(),
            key,
            named,
        };
        self.messages.insert(at, (held, current));
        self.keys.insert(m.message.id.clone(), key);
        self.touched(at);
    }

    /// The model messages of the history without the message `except` (the reply being written).
    fn transcript(&mut self, except: &str) -> Transcript {
        // Every message but the newest is settled enough to compact (the newest is usually the
        // reply being rewritten at each step).
        let settled = self.messages.len().saturating_sub(1);
        while self.prefix_len < settled {
            self.prefix
                .push_compacting(self.messages[self.prefix_len].1.clone());
            self.prefix_len += 1;
        }
        match self.index_of(except) {
            // Rare: the excepted message is not among the newest; build without it.
            Some(skip) if skip < self.prefix_len => {
                let mut out = Transcript::new();
                for (i, (_, chunk)) in self.messages.iter().enumerate() {
                    if i != skip {
                        out.push_chunk(chunk.clone());
                    }
                }
                out
            }
            _ => {
                let mut out = self.prefix.clone();
                for (m, chunk) in &self.messages[self.prefix_len..] {
                    if m.id != except {
                        out.push_chunk(chunk.clone());
                    }
                }
                out
            }
        }
    }
}

/// The histories of recently used chats, bounded by a total number of messages: least recently
/// used chats are dropped first (a linked hash map keeps the order; nothing here scans every chat).
#[derive(Debug)]
pub(crate) struct HistoryCache {
    inner: Mutex<Cached>,
    limit: usize,
}

#[derive(Debug, Default)]
struct Cached {
    /// Least recently used first.
    chats: hashlink::LinkedHashMap<ChatId, ChatHistory>,
    /// Messages held across all chats.
    total: usize,
}

impl Cached {
    /// Applies `f` to the chat's history (when held), keeping `total` right.
    fn with<R>(&mut self, chat: &ChatId, f: impl FnOnce(&mut ChatHistory) -> R) -> Option<R> {
        let h = self.chats.get_mut(chat)?;
        let before = h.messages.len();
        let out = f(h);
        let after = h.messages.len();
        self.total = self.total + after - before;
        Some(out)
    }
}

impl Cached {
    /// Drops least recently used chats while more than `limit` messages are held (never the most
    /// recent one).
    fn evict(&mut self, limit: usize) {
        while self.total > limit && self.chats.len() > 1 {
            let Some((_, dropped)) = self.chats.pop_front() else {
                break;
            };
            self.total -= dropped.messages.len();
        }
    }
}

impl HistoryCache {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            inner: Mutex::new(Cached::default()),
            limit,
        }
    }

    /// Records messages this process just wrote (or read) for `chat`.
    pub(crate) fn note(&self, chat: &ChatId, written: &[&StoredMessage]) {
        let mut inner = self.inner.lock().expect("history cache");
        inner.with(chat, |h| {
            for m in written {
                h.apply(m);
            }
        });
    }

    /// The chat's history up to now, as model messages, leaving out `except` (the reply being
    /// written). Reads from the store only what is newer than the cached version, unless the
    /// caller knows the cache is current (`current_as_of`: the chat's version before the caller's
    /// own writes, which it has noted). The transcript shares the cached messages: its cost does
    /// not grow with the chat's length.
    pub(crate) async fn history(
        &self,
        store: &DynStore,
        chat: &ChatId,
        current_as_of: Option<i64>,
        except: &str,
    ) -> Result<Transcript> {
        self.read(store, chat, current_as_of, |entry| entry.transcript(except))
            .await
    }

    /// The chat's model choice ([`UiMessage::model_choice`]) as of `version` (the chat row's):
    /// read from the store only when the cache is older.
    pub(crate) async fn choice(
        &self,
        store: &DynStore,
        chat: &ChatId,
        version: i64,
    ) -> Result<Option<(String, Option<String>)>> {
        self.read(store, chat, Some(version), |entry| {
            entry
                .choice
                .as_ref()
                .map(|(_, m, r)| (m.clone(), r.clone()))
        })
        .await
    }

    /// `f` over the chat's history brought up to date (see [`HistoryCache::history`]).
    async fn read<R>(
        &self,
        store: &DynStore,
        chat: &ChatId,
        current_as_of: Option<i64>,
        f: impl FnOnce(&mut ChatHistory) -> R,
    ) -> Result<R> {
        let cached = {
            let inner = self.inner.lock().expect("history cache");
            inner.chats.get(chat).map(|h| h.version)
        };
        let fresh = match (cached, current_as_of) {
            (Some(v), Some(known)) if known <= v => None,
            (v, _) => Some(store.messages_since(chat, v.unwrap_or(0)).await?),
        };
        let mut inner = self.inner.lock().expect("history cache");
        // Most recently used last.
        if inner.chats.to_back(chat).is_none() {
            inner.chats.insert(chat.clone(), ChatHistory::default());
        }
        let out = inner
            .with(chat, |entry| {
                if let Some(changes) = fresh {
                    for m in &changes.messages {
                        entry.apply(m);
                    }
                    entry.version = entry.version.max(changes.version);
                }
                f(entry)
            })
            .expect("just inserted");
        inner.evict(self.limit);
        Ok(out)
    }
}

pub(crate) fn is_step_start(p: &MessagePart) -> bool {
    matches!(p, MessagePart::Other(v) if v.get("type").and_then(Value::as_str) == Some("step-start"))
}

/// The question tool as the model sees it: every input kind, a default per input and the set's
/// expiry (`frogbot_model::QuestionInput`).
pub fn question_tool_spec() -> ToolSpec {
    let number = json!({"type": "number"});
    ToolSpec {
        name: QUESTION_TOOL.into(),
        description: "Ask the user one or more questions and wait for the answer. Each question \
            is one input: `choice` (options; `multiple` for several, `custom` to allow own text), \
            `text_input`, `number_input`, `toggle` (on/off) or `confirm` (one button, e.g. \
            \"Approve\"). All questions of a call are answered together. Give \
            `expiresInSeconds` to stop waiting after a while; an input's `default` is its answer \
            then (without one, a required input leaves the call expired without an answer). Give \
            `blocks` to show what the answer is about (a diff, a table, an image) beside the inputs."
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
                        "required": ["header", "question"],
                        "properties": {
                            "header": {"type": "string", "description": "A short title, unique in the call; answers name their question by it"},
                            "question": {"type": "string"},
                            "kind": {
                                "type": "string",
                                "enum": ["choice", "text_input", "number_input", "toggle", "confirm"],
                                "description": "The input; choice when absent"
                            },
                            "options": {
                                "type": "array",
                                "description": "choice: the options",
                                "items": {
                                    "type": "object",
                                    "required": ["label"],
                                    "properties": {
                                        "label": {"type": "string"},
                                        "description": {"type": "string"}
                                    }
                                }
                            },
                            "multiple": {"type": "boolean", "description": "choice: several options may be selected"},
                            "custom": {"type": "boolean", "description": "choice: the user may answer with own text"},
                            "placeholder": {"type": "string", "description": "text_input, number_input: a hint in the empty field"},
                            "multiline": {"type": "boolean", "description": "text_input: several lines"},
                            "maxLength": {"type": "integer", "minimum": 1, "maximum": crate::model::TEXT_INPUT_MAX, "description": "text_input: the longest answer"},
                            "min": number.clone(),
                            "max": number.clone(),
                            "step": {"type": "number", "exclusiveMinimum": 0},
                            "unit": {"type": "string", "description": "number_input: shown beside the number"},
                            "label": {"type": "string", "description": "toggle: its label; confirm: the button's label"},
                            "danger": {"type": "boolean", "description": "confirm: a destructive action"},
                            "required": {"type": "boolean", "description": "false: the input may be left empty (default true)"},
                            "default": {
                                "description": "The answer used when the call expires: option label(s), text, a number, true/false for a toggle, true for a confirm",
                                "anyOf": [
                                    {"type": "string"},
                                    number,
                                    {"type": "boolean"},
                                    {"type": "array", "items": {"type": "string"}}
                                ]
                            }
                        }
                    }
                },
                "expiresInSeconds": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": crate::model::MAX_EXPIRES_IN_SECONDS,
                    "description": "Stop accepting answers after this many seconds"
                },
                "blocks": {
                    "type": "array",
                    "description": "What the user should see to answer, shown before the inputs: {\"type\": \"table\", \"columns\": [...], \"rows\": [[...]]}, {\"type\": \"code\", \"code\": \"...\", \"language\": \"diff\"}, {\"type\": \"image\", \"url\": \"https://...\", \"alt\": \"...\"}",
                    "items": {
                        "type": "object",
                        "required": ["type"],
                        "properties": {"type": {"type": "string", "enum": ["table", "code", "image", "fields", "progress"]}}
                    }
                }
            }
        }),
    }
}

/// A user message as the model reads it: the thread's earlier messages it was sent with, then
/// (when `named`: several people speak in the thread) the speaker's name before the text.
fn user_text(m: &UiMessage, named: bool) -> String {
    let text = m.text() + &super::super::ask::ask_line(m);
    let md = &m.metadata;
    if md.context.is_none() && (md.speaker.is_none() || !named) {
        return text;
    }
    let mut out = String::new();
    if let Some(context) = &md.context {
        out.push_str("[Earlier messages in this thread]\n");
        out.push_str(context);
        out.push_str("\n[End of earlier messages]\n\n");
    }
    if let Some(speaker) = md.speaker.as_ref().filter(|_| named) {
        out.push_str(speaker);
        out.push_str(": ");
    }
    out.push_str(&text);
    out
}

/// Converts a stored message into model messages: a user message into one; an assistant message
/// into one assistant message per step followed by its tool results.
/// A user message's speaker is named.
pub fn to_model_messages(m: &UiMessage, out: &mut Vec<ModelMessage>) {
    convert(m, true, out);
}

fn convert(m: &UiMessage, named: bool, out: &mut Vec<ModelMessage>) {
    match m.role {
        Role::User => {
            crate::agent::files::model_files(&m.parts, out);
            out.push(ModelMessage::User {
                text: user_text(m, named),
            });
        }
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
                        ToolState::InputAvailable | ToolState::ApprovalRequested => {
                            ("no result".into(), true)
                        }
                        ToolState::ApprovalResponded => {
                            ("approved, but no result was saved".into(), true)
                        }
                        ToolState::OutputDenied => (
                            t.approval
                                .as_ref()
                                .map(|a| crate::model::denied_text(a))
                                .unwrap_or_else(|| "the call was denied".into()),
                            true,
                        ),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Delivery, InputKind, MessageMetadata, QuestionInput, QuestionItem};
    use crate::store::REPLY_SUB;

    #[test]
    fn the_question_tool_offers_every_kind_default_and_expiry() {
        let schema = question_tool_spec().input_schema;
        let item = &schema["properties"]["questions"]["items"];
        let kinds: Vec<&str> = item["properties"]["kind"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        let all = [
            InputKind::Choice,
            InputKind::TextInput,
            InputKind::NumberInput,
            InputKind::Toggle,
            InputKind::Confirm,
        ];
        assert_eq!(kinds, all.map(InputKind::as_str));
        for k in all {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        // Every field an input can carry is described to the model.
        let full = QuestionItem {
            header: "h".into(),
            question: "q".into(),
            kind: InputKind::NumberInput,
            options: vec![crate::model::QuestionOption {
                label: "x".into(),
                description: Some("d".into()),
            }],
            multiple: true,
            custom: true,
            placeholder: Some("p".into()),
            multiline: true,
            max_length: Some(3),
            min: Some(1.into()),
            max: Some(2.into()),
            step: Some(1.into()),
            unit: Some("u".into()),
            label: Some("l".into()),
            danger: true,
            required: false,
            default: Some(vec!["1".into()]),
        };
        let wire = serde_json::to_value(&full).unwrap();
        for key in wire.as_object().unwrap().keys() {
            assert!(
                item["properties"].get(key).is_some(),
                "{key} is not in the schema"
            );
        }
        assert_eq!(item["required"], json!(["header", "question"]));
        let expiry = &schema["properties"]["expiresInSeconds"];
        assert_eq!(expiry["maximum"], crate::model::MAX_EXPIRES_IN_SECONDS);
        let input = serde_json::to_value(QuestionInput {
            questions: vec![full],
            expires_in_seconds: Some(5),
            from: Vec::new(),
            blocks: Vec::new(),
        })
        .unwrap();
        for key in input.as_object().unwrap().keys() {
            assert!(schema["properties"].get(key).is_some(), "{key}");
        }
    }

    fn stored(
        id: &str,
        role: Role,
        text: &str,
        position: Option<i64>,
        sub: i64,
        seq: i64,
    ) -> StoredMessage {
        StoredMessage {
            chat_id: ChatId::new("c").unwrap(),
            message: UiMessage {
                id: id.into(),
                role,
                parts: vec![MessagePart::text(text)],
                metadata: MessageMetadata::default(),
            },
            seq,
            position,
            sub,
            queued: position.is_none(),
            delivery: Delivery::Queue,
            version: seq,
        }
    }

    /// What the history must be: the non-queued messages in order, converted, minus `except`.
    fn naive(all: &HashMap<String, StoredMessage>, except: &str) -> Vec<ModelMessage> {
        let mut ms: Vec<&StoredMessage> = all.values().filter(|m| !m.queued).collect();
        ms.sort_by_key(|m| m.order_key());
        let mut out = Vec::new();
        for m in ms.into_iter().filter(|m| m.message.id != except) {
            to_model_messages(&m.message, &mut out);
        }
        out
    }

    /// `new` and a model choice (commands answered without the model) leave the same history
    /// whatever order their messages are read in (a cold read, another process's writes): only
    /// what follows the last `new`, without the choice's turn; the choice itself is the newest.
    #[test]
    fn commands_leave_the_same_history_in_any_order() {
        let with = |m: StoredMessage, part: MessagePart| {
            let mut m = m;
            m.message.parts.push(part);
            m
        };
        let all = vec![
            stored("u1", Role::User, "old", Some(1), 0, 1),
            stored("a1", Role::Assistant, "old reply", Some(1), REPLY_SUB, 2),
            with(
                stored("u2", Role::User, "!model alt", Some(2), 0, 3),
                MessagePart::model_choice("alt", None),
            ),
            stored("a2", Role::Assistant, "now alt", Some(2), REPLY_SUB, 4),
            with(
                stored("u3", Role::User, "/new", Some(3), 0, 5),
                MessagePart::new_conversation(),
            ),
            stored(
                "a3",
                Role::Assistant,
                "new conversation",
                Some(3),
                REPLY_SUB,
                6,
            ),
            stored("u4", Role::User, "fresh", Some(4), 0, 7),
            with(
                stored("u5", Role::User, "/model main high", Some(5), 0, 8),
                MessagePart::model_choice("main", Some("high")),
            ),
            stored("a5", Role::Assistant, "now main", Some(5), REPLY_SUB, 9),
            stored("u6", Role::User, "still fresh", Some(6), 0, 10),
        ];
        let want = vec![
            ModelMessage::User {
                text: "fresh".into(),
            },
            ModelMessage::User {
                text: "still fresh".into(),
            },
        ];
        // Every rotation and its reverse: commands before and after what they govern.
        for start in 0..all.len() {
            for reverse in [false, true] {
                let mut order: Vec<&StoredMessage> =
                    all[start..].iter().chain(&all[..start]).collect();
                if reverse {
                    order.reverse();
                }
                let mut h = ChatHistory::default();
                for m in order {
                    h.apply(m);
                }
                assert_eq!(
                    h.transcript("none").to_vec(),
                    want,
                    "from {start}, {reverse}"
                );
                let choice = h
                    .choice
                    .as_ref()
                    .map(|(_, m, r)| (m.as_str(), r.as_deref()));
                assert_eq!(
                    choice,
                    Some(("main", Some("high"))),
                    "from {start}, {reverse}"
                );
            }
        }
    }

    /// A long sequence of turns, rewritten replies, steers, queued messages promoted or deleted
    /// and rewrites of old messages: the kept history always equals the history rebuilt from
    /// scratch, and its compacted transcript stays a few chunks long.
    #[test]
    fn the_kept_history_equals_a_rebuild_and_stays_compact() {
        let mut h = ChatHistory::default();
        let mut all: HashMap<String, StoredMessage> = HashMap::new();
        let mut seq = 0;
        let mut rng: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let put =
            |h: &mut ChatHistory, all: &mut HashMap<String, StoredMessage>, m: StoredMessage| {
                h.apply(&m);
                all.insert(m.message.id.clone(), m);
            };
        for pos in 1..=400i64 {
            seq += 1;
            put(
                &mut h,
                &mut all,
                stored(&format!("u{pos}"), Role::User, "hi", Some(pos), 0, seq),
            );
            let reply = format!("a{pos}");
            for step in 0..3 {
                seq += 1;
                put(
                    &mut h,
                    &mut all,
                    stored(
                        &reply,
                        Role::Assistant,
                        &format!("step {step}"),
                        Some(pos),
                        REPLY_SUB,
                        seq,
                    ),
                );
                let got = h.transcript(&reply);
                assert_eq!(got.to_vec(), naive(&all, &reply), "turn {pos} step {step}");
            }
            match next(6) {
                // A steer that joins the turn.
                0 => {
                    seq += 1;
                    put(
                        &mut h,
                        &mut all,
                        stored(&format!("s{pos}"), Role::User, "steer", Some(pos), seq, seq),
                    );
                }
                // A queued message (not history), then the same message promoted into a turn
                // of its own (history, at its new place).
                1 => {
                    seq += 1;
                    let mut q = stored(&format!("q{pos}"), Role::User, "queued", None, 0, seq);
                    put(&mut h, &mut all, q.clone());
                    assert_eq!(h.transcript("none").to_vec(), naive(&all, "none"));
                    seq += 1;
                    q.position = Some(pos);
                    q.sub = seq;
                    q.queued = false;
                    q.version = seq;
                    put(&mut h, &mut all, q);
                }
                // An old message rewritten in place (an answered question's reply).
                2 if pos > 5 => {
                    let old = format!("a{}", next(pos as u64 - 1) + 1);
                    let mut m = all[&old].clone();
                    seq += 1;
                    m.message.parts = vec![MessagePart::text(format!("answered {seq}"))];
                    m.version = seq;
                    put(&mut h, &mut all, m);
                }
                _ => {}
            }
            let got = h.transcript("none");
            assert_eq!(got.to_vec(), naive(&all, "none"), "after turn {pos}");
            // Excepting an old message works too.
            if pos > 3 {
                let old = format!("u{}", next(pos as u64 - 1) + 1);
                assert_eq!(h.transcript(&old).to_vec(), naive(&all, &old));
            }
            assert!(
                h.prefix.chunk_count()
                    <= 2 * (64 - (h.prefix_len as u64).leading_zeros() as usize) + 2,
                "{} chunks for {} messages",
                h.prefix.chunk_count(),
                h.prefix_len
            );
        }
    }

    /// The least recently used chats go first, the total stays counted, a used chat stays.
    #[test]
    fn the_cache_drops_least_recently_used_chats_past_its_limit() {
        let mut c = Cached::default();
        let chat = |s: &str| ChatId::new(s).unwrap();
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            c.chats.insert(chat(name), ChatHistory::default());
            c.with(&chat(name), |h| {
                for k in 0..3 {
                    let seq = (i * 10 + k) as i64 + 1;
                    h.apply(&stored(
                        &format!("{name}{k}"),
                        Role::User,
                        "x",
                        Some(k as i64 + 1),
                        0,
                        seq,
                    ));
                }
            });
        }
        assert_eq!(c.total, 9);
        // "a" used again: "b" is now the least recently used.
        c.chats.to_back(&chat("a"));
        c.evict(6);
        assert_eq!(c.total, 6);
        assert!(c.chats.get(&chat("b")).is_none());
        assert!(c.chats.get(&chat("a")).is_some() && c.chats.get(&chat("c")).is_some());
        // A message removed from a chat (promoted elsewhere) is counted out.
        c.with(&chat("a"), |h| {
            let mut m = stored("a0", Role::User, "x", None, 0, 100);
            m.version = 100;
            h.apply(&m);
        });
        assert_eq!(c.total, 5);
        c.evict(0);
        assert_eq!(c.chats.len(), 1, "the most recent chat stays");
        assert!(c.chats.get(&chat("a")).is_some());
        assert_eq!(c.total, 2);
    }

    /// A chat of `turns` turns, each a user message, a tool call, its result and an answer,
    /// built the way the history cache builds it (one chunk per turn, compacting).
    fn chat_of(turns: usize, sizes: &[usize]) -> Transcript {
        let mut t = Transcript::new();
        for i in 0..turns {
            let n = sizes[i % sizes.len()];
            t.push_compacting(Arc::from(vec![
                ModelMessage::User {
                    text: format!("{i}:{}", "u".repeat(n)),
                },
                ModelMessage::Assistant {
                    text: String::new(),
                    tool_calls: vec![ToolCallRequest {
                        id: format!("c{i}"),
                        name: "echo".into(),
                        input: serde_json::json!({}),
                    }],
                },
                ModelMessage::Tool {
                    tool_call_id: format!("c{i}"),
                    name: "echo".into(),
                    content: "x".repeat(n),
                    is_error: false,
                },
                ModelMessage::Assistant {
                    text: "a".repeat(n),
                    tool_calls: vec![],
                },
            ]));
        }
        t
    }

    proptest::proptest! {
        /// Within a budget: a suffix of the chat that starts at a user message, fits the budget
        /// (or is the newest turn alone), and leaves out only what did not fit.
        #[test]
        fn a_long_chat_keeps_its_newest_whole_turns_within_the_budget(
            turns in 1usize..60,
            sizes in proptest::collection::vec(0usize..300, 1..5),
            budget in 0usize..20_000,
        ) {
            let t = chat_of(turns, &sizes);
            let kept = t.within(budget);
            let all = t.to_vec();
            let kept_v = kept.to_vec();
            proptest::prop_assert!(kept_v.len() <= all.len());
            proptest::prop_assert_eq!(&all[all.len() - kept_v.len()..], &kept_v[..], "a suffix");
            let starts_at_user = matches!(kept_v.first(), Some(ModelMessage::User { .. }));
            proptest::prop_assert!(starts_at_user);
            let newest_turn = 4;
            proptest::prop_assert!(kept.size() <= budget || kept_v.len() == newest_turn);
            if t.size() <= budget {
                proptest::prop_assert_eq!(kept_v.len(), all.len());
            } else {
                // One more turn would not have fitted.
                let bigger = all.len() - kept_v.len();
                if bigger >= newest_turn {
                    let with_one_more: usize = all[bigger - newest_turn..].iter().map(ModelMessage::size).sum();
                    proptest::prop_assert!(with_one_more > budget);
                }
            }
        }
    }

    #[test]
    fn compaction_keeps_order_and_a_logarithmic_chunk_count() {
        let mut t = Transcript::new();
        for i in 0..1000 {
            t.push_compacting(Arc::from(vec![ModelMessage::User {
                text: i.to_string(),
            }]));
        }
        assert_eq!(t.len(), 1000);
        assert!(t.chunk_count() <= 10, "{}", t.chunk_count());
        let texts: Vec<String> = t
            .iter()
            .map(|m| match m {
                ModelMessage::User { text } => text.clone(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(texts, (0..1000).map(|i| i.to_string()).collect::<Vec<_>>());
    }
}
