use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::{Delivery, ToolApproval, UserId};

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A person (or a channel participant).
    User,
    /// The agent.
    Assistant,
}

impl Role {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// A message's status in `metadata.status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum MessageStatus {
    /// Saved while a turn ran or a question waited; not yet sent to the model.
    Queued,
}

/// How far the agent is with a user's message (the rply acknowledgements): shown on the platform
/// as a reaction on the message (replaced, never piled up) and over HTTP as `metadata.ack`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ack {
    /// Stored: the agent will read it (also while it waits in the queue).
    Seen,
    /// Its turn is running.
    Working,
    /// Its reply is posted.
    Done,
    /// Its turn failed (or it could not be taken).
    Failed,
}

impl Ack {
    /// The reaction that shows it: 👀, ⏳, ✅, ❌.
    pub fn emoji(self) -> &'static str {
        match self {
            Ack::Seen => "👀",
            Ack::Working => "⏳",
            Ack::Done => "✅",
            Ack::Failed => "❌",
        }
    }

    /// Every state, in order.
    pub const ALL: [Ack; 4] = [Ack::Seen, Ack::Working, Ack::Done, Ack::Failed];
}

/// `{"code", "message"}`: the error of a failed turn, and of every HTTP error body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// A stable machine-readable code such as `selection-unavailable`.
    pub code: String,
    /// A sentence for people.
    pub message: String,
}

/// The `metadata` of a [`UiMessage`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageMetadata {
    /// The FrogBot user who sent a user message (`None`: anonymous or the agent).
    #[serde(default)]
    pub author: Option<UserId>,
    /// `queued` while the message waits for promotion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<MessageStatus>,
    /// The model id the message was sent with (user) or answered by (assistant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// On an assistant message: the configured fallback model that answered (a step of) it
    /// because `model` failed before answering (the last one, when several steps fell back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// The reasoning option the message was sent with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// When the message was first saved, RFC 3339.
    #[serde(default)]
    pub created_at: String,
    /// Set on the assistant message of a failed turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// How a queued message asked to be delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Delivery>,
    /// On a user message read over HTTP: how far the agent is with it (derived from the chat,
    /// never stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack: Option<Ack>,
    /// On a user message from a channel thread: the speaker's display name, which the model sees
    /// before the text (several people may talk in one thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
    /// On the first user message of a channel thread the bot joined late: the thread's earlier
    /// messages (`name: text` lines, oldest first), which the model sees before this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// On an assistant message a channel streamed: the platform ids of the messages it was drawn
    /// in, so a stream a crash cut off is found and marked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drafts: Vec<String>,
    /// On an agent message: its title (shown bold above the text, or as the platform's header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// On an agent message: the key it is pinned under (`status` by convention); a pinned message
    /// floats above the thread until unpinned, then shows at the position it was first posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<String>,
    /// On an agent message posted to a channel: the platform ids of the messages it was drawn
    /// in, in order, so an edit, a deletion, a pin or an event click finds them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub posted: Vec<String>,
    /// On an agent message: when its content was last edited, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_at: Option<String>,
    /// On an agent message that was deleted, RFC 3339: it stays as a tombstone without parts
    /// (so every view and its platform copy learn of it), shown by no app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<String>,
    /// On an agent message in a channel chat: what its platform copy shows, so the engine
    /// brings it up to date after an edit, a deletion or a pin change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncState>,
    /// On an assistant message: the decided approvals of its tool calls by call id (whether
    /// approved, who decided, when, why not), as their parts' `approval` holds them.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub approvals: std::collections::BTreeMap<String, ToolApproval>,
    /// On an assistant message: the elicitations of its tool calls by call id (an MCP server
    /// asking the driving person for input during a call): the question while it waits, its
    /// outcome until the call continued with it.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub elicitations: std::collections::BTreeMap<String, crate::ToolElicitation>,
}

/// How far a channel's copy of an agent message is (see [`MessageMetadata::sync`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncState {
    /// The content's revision: one higher with every edit.
    pub revision: u64,
    /// The revision the platform shows (`None`: not posted yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shown: Option<u64>,
    /// Whether the platform shows it pinned.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
}

/// A chat message in the AI SDK `UIMessage` shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UiMessage {
    /// The message id (client-chosen for user messages, or generated).
    pub id: String,
    /// Who wrote it.
    pub role: Role,
    /// Its content.
    pub parts: Vec<MessagePart>,
    /// Author, status, model, times, error.
    #[serde(default)]
    pub metadata: MessageMetadata,
}

impl UiMessage {
    /// The concatenated text of the message's text parts.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                MessagePart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("")
    }

    /// The tool parts of the message.
    pub fn tool_parts(&self) -> impl Iterator<Item = &ToolPart> {
        self.parts.iter().filter_map(|p| match p {
            MessagePart::Tool(t) => Some(t),
            _ => None,
        })
    }
}

/// The state of a tool call part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolState {
    /// The call was made and waits for its output (a waiting question, or a call in progress).
    InputAvailable,
    /// The call has its output.
    OutputAvailable,
    /// The call failed; `errorText` says why.
    OutputError,
    /// The call waits for a person's approval before it runs (`approval` holds the question).
    ApprovalRequested,
    /// The call was approved and runs (`approval.approved` is `true`).
    ApprovalResponded,
    /// A person denied the call (or its approval expired): it never ran.
    OutputDenied,
}

/// A tool call inside a message: `{"type": "tool-NAME", "toolCallId", "state", "input", "output"?, "errorText"?}`.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolPart {
    /// The tool's name (the part's type is `tool-` followed by it).
    pub tool_name: String,
    /// The call's id.
    pub tool_call_id: String,
    /// Where the call stands.
    pub state: ToolState,
    /// The call's input.
    pub input: Value,
    /// The output, once available.
    pub output: Option<Value>,
    /// Why the call failed.
    pub error_text: Option<String>,
    /// For a question with an expiry: when it stops accepting answers (RFC 3339,
    /// `expiresAt`), set when the turn starts waiting on it.
    pub expires_at: Option<String>,
    /// For a call that needs a person's approval: the approval (`approval`).
    pub approval: Option<Box<ToolApproval>>,
}

/// One part of a [`UiMessage`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum MessagePart {
    /// `{"type": "text", "text"}`.
    Text {
        /// The text.
        text: String,
    },
    /// `{"type": "tool-NAME", …}`.
    Tool(ToolPart),
    /// Any other part (`step-start`, `reasoning`, `data-*`, …), kept as it came.
    Other(Value),
}

impl MessagePart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        MessagePart::Text { text: text.into() }
    }

    /// The part that makes a user message start a new conversation
    /// (`{"type": "data-new-conversation"}`, [`NEW_CONVERSATION_PART`]).
    pub fn new_conversation() -> Self {
        MessagePart::Other(serde_json::json!({ "type": NEW_CONVERSATION_PART }))
    }

    /// The part that chooses the model (and reasoning option) of the chat's later messages
    /// (`{"type": "data-model-choice", "data": {"model", "reasoning"?}}`, [`MODEL_CHOICE_PART`]).
    pub fn model_choice(model: &str, reasoning: Option<&str>) -> Self {
        let mut data = serde_json::json!({ "model": model });
        if let Some(r) = reasoning {
            data["reasoning"] = r.into();
        }
        MessagePart::Other(serde_json::json!({ "type": MODEL_CHOICE_PART, "data": data }))
    }

    /// A file part (the AI SDK's `{"type": "file", "mediaType", "filename"?, "url"}`).
    pub fn file(media_type: &str, filename: &str, url: &str) -> Self {
        let mut part = serde_json::json!({ "type": "file", "mediaType": media_type, "url": url });
        if !filename.is_empty() {
            part["filename"] = filename.into();
        }
        MessagePart::Other(part)
    }

    /// This part as a file: `None` when it is not a `file` part with a `url`.
    pub fn as_file(&self) -> Option<FileRef<'_>> {
        let MessagePart::Other(v) = self else {
            return None;
        };
        if v.get("type").and_then(Value::as_str) != Some("file") {
            return None;
        }
        Some(FileRef {
            media_type: v
                .get("mediaType")
                .and_then(Value::as_str)
                .unwrap_or("application/octet-stream"),
            filename: v.get("filename").and_then(Value::as_str).unwrap_or(""),
            url: v.get("url").and_then(Value::as_str)?,
        })
    }

    /// Whether this is [`MessagePart::new_conversation`].
    pub fn is_new_conversation(&self) -> bool {
        matches!(self, MessagePart::Other(v)
            if v.get("type").and_then(Value::as_str) == Some(NEW_CONVERSATION_PART))
    }
}

/// A `file` part read ([`MessagePart::as_file`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileRef<'a> {
    /// Its media type (`application/octet-stream` when the part names none).
    pub media_type: &'a str,
    /// Its file name (`""` when none).
    pub filename: &'a str,
    /// Where it is: the server's `/api/chats/{chat}/files/{id}`, or a `data:` URL.
    pub url: &'a str,
}

/// The type of the data part a person's `/new` command is saved with: the user message carrying
/// it starts a new conversation in its chat. The chat keeps every message (the web chat and the
/// HTTP API show them all), but the model sees none of those before it; the message itself is
/// not shown to the model either.
pub const NEW_CONVERSATION_PART: &str = "data-new-conversation";

/// The reply to a message that starts a new conversation (written without the model).
pub const NEW_CONVERSATION_TEXT: &str =
    "🆕 New conversation: I no longer see the earlier messages here.";

/// The reply to a message that chooses a model ([`MessagePart::model_choice`]).
pub fn model_choice_text(model: &str, reasoning: Option<&str>) -> String {
    match reasoning {
        Some(r) => format!("🧠 From now on this thread is answered by {model}, reasoning {r}."),
        None => format!("🧠 From now on this thread is answered by {model}."),
    }
}

/// The call id prefix of a model picker's question (`model` alone, where the thread draws
/// questions): its answer chooses the chat's model ([`UiMessage::model_choice`]).
pub const MODEL_PICK_CALL: &str = "pick_";

/// The option label a model picker shows for a model and reasoning option: `alt`, `alt · high`.
pub fn model_pick_label(model: &str, reasoning: Option<&str>) -> String {
    match reasoning {
        Some(r) => format!("{model} · {r}"),
        None => model.to_owned(),
    }
}

/// The model and reasoning option of a [`model_pick_label`].
pub fn parse_model_pick_label(label: &str) -> Option<(String, Option<String>)> {
    let (model, reasoning) = match label.split_once(" · ") {
        Some((m, r)) => (m.trim(), Some(r.trim().to_owned())),
        None => (label.trim(), None),
    };
    (!model.is_empty() && !model.contains(char::is_whitespace))
        .then(|| (model.to_owned(), reasoning))
}

/// The type of the data part a person's `/model` command is saved with
/// ([`MessagePart::model_choice`]): the chat's later messages are sent with that model and
/// reasoning option, until another choice.
pub const MODEL_CHOICE_PART: &str = "data-model-choice";

impl UiMessage {
    /// Whether this user message starts a new conversation ([`NEW_CONVERSATION_PART`]).
    pub fn starts_conversation(&self) -> bool {
        self.role == Role::User && self.parts.iter().any(MessagePart::is_new_conversation)
    }

    /// The model and reasoning option this message chooses for its chat, if it does: a user
    /// message's [`MODEL_CHOICE_PART`] (`model ID`), or a reply whose model picker (`model` alone,
    /// a question whose call id starts with [`MODEL_PICK_CALL`]) was answered with an offer's
    /// label ([`model_pick_label`]).
    pub fn model_choice(&self) -> Option<(String, Option<String>)> {
        if self.role == Role::Assistant {
            return self.parts.iter().find_map(|p| match p {
                MessagePart::Tool(t)
                    if t.tool_name == super::QUESTION_TOOL
                        && t.tool_call_id.starts_with(MODEL_PICK_CALL)
                        && t.state == super::ToolState::OutputAvailable =>
                {
                    let out: super::QuestionOutput =
                        serde_json::from_value(t.output.clone()?).ok()?;
                    let [answer] = out.answers.as_slice() else {
                        return None;
                    };
                    let [label] = answer.selected.as_slice() else {
                        return None;
                    };
                    parse_model_pick_label(label)
                }
                _ => None,
            });
        }
        if self.role != Role::User {
            return None;
        }
        self.parts.iter().find_map(|p| match p {
            MessagePart::Other(v)
                if v.get("type").and_then(Value::as_str) == Some(MODEL_CHOICE_PART) =>
            {
                let data = v.get("data")?;
                let model = data.get("model")?.as_str()?.to_owned();
                let reasoning = data
                    .get("reasoning")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                Some((model, reasoning))
            }
            _ => None,
        })
    }
}

impl Serialize for MessagePart {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MessagePart::Text { text } => {
                let mut m = Map::new();
                m.insert("type".into(), "text".into());
                m.insert("text".into(), text.clone().into());
                m.serialize(s)
            }
            MessagePart::Tool(t) => {
                let mut m = Map::new();
                m.insert("type".into(), format!("tool-{}", t.tool_name).into());
                m.insert("toolCallId".into(), t.tool_call_id.clone().into());
                m.insert(
                    "state".into(),
                    serde_json::to_value(t.state).map_err(serde::ser::Error::custom)?,
                );
                m.insert("input".into(), t.input.clone());
                if let Some(o) = &t.output {
                    m.insert("output".into(), o.clone());
                }
                if let Some(e) = &t.error_text {
                    m.insert("errorText".into(), e.clone().into());
                }
                if let Some(e) = &t.expires_at {
                    m.insert("expiresAt".into(), e.clone().into());
                }
                if let Some(a) = &t.approval {
                    m.insert(
                        "approval".into(),
                        serde_json::to_value(a).map_err(serde::ser::Error::custom)?,
                    );
                }
                m.serialize(s)
            }
            MessagePart::Other(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for MessagePart {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let v = Value::deserialize(d)?;
        let ty = v
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| D::Error::custom("a message part needs a string \"type\""))?;
        if ty == "text" {
            let text = v
                .get("text")
                .and_then(Value::as_str)
                .ok_or_else(|| D::Error::custom("a text part needs a string \"text\""))?;
            return Ok(MessagePart::Text { text: text.into() });
        }
        if let Some(name) = ty.strip_prefix("tool-") {
            let tool_call_id = v
                .get("toolCallId")
                .and_then(Value::as_str)
                .ok_or_else(|| D::Error::custom("a tool part needs a string \"toolCallId\""))?;
            let state = serde_json::from_value(v.get("state").cloned().unwrap_or(Value::Null))
                .map_err(D::Error::custom)?;
            return Ok(MessagePart::Tool(ToolPart {
                tool_name: name.into(),
                tool_call_id: tool_call_id.into(),
                state,
                input: v.get("input").cloned().unwrap_or(Value::Null),
                output: v.get("output").cloned(),
                error_text: v.get("errorText").and_then(Value::as_str).map(Into::into),
                expires_at: v.get("expiresAt").and_then(Value::as_str).map(Into::into),
                approval: match v.get("approval") {
                    Some(a) if !a.is_null() => {
                        Some(serde_json::from_value(a.clone()).map_err(D::Error::custom)?)
                    }
                    _ => None,
                },
            }));
        }
        Ok(MessagePart::Other(v))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_pickers_answer_chooses_and_nothing_else_does() {
        for (model, reasoning) in [("alt", Some("high")), ("main", None)] {
            let label = model_pick_label(model, reasoning);
            assert_eq!(
                parse_model_pick_label(&label),
                Some((model.to_owned(), reasoning.map(str::to_owned)))
            );
        }
        assert_eq!(parse_model_pick_label("two words"), None);
        let reply = |call: &str, tool: &str, selected: &[&str]| {
            let m: UiMessage = serde_json::from_value(serde_json::json!({
                "id": "r", "role": "assistant", "parts": [{
                    "type": format!("tool-{tool}"), "toolCallId": call, "state": "output-available",
                    "input": {}, "output": {"answers": [{"header": "Model", "selected": selected}]}
                }]
            }))
            .unwrap();
            m.model_choice()
        };
        assert_eq!(
            reply("pick_m1", "question", &["alt · high"]),
            Some(("alt".into(), Some("high".into())))
        );
        // Another question's answer, another tool, or no single pick: no choice.
        assert_eq!(reply("ask_m1", "question", &["alt · high"]), None);
        assert_eq!(reply("pick_m1", "other", &["alt"]), None);
        assert_eq!(reply("pick_m1", "question", &["alt", "main"]), None);
    }
    use super::*;
    use serde_json::json;

    #[test]
    fn parts_round_trip_in_the_ai_sdk_shape() {
        let wire = json!([
            {"type": "text", "text": "hi"},
            {"type": "tool-question", "toolCallId": "c1", "state": "input-available", "input": {"questions": []}, "expiresAt": "2026-12-01T14:05:00.000Z"},
            {"type": "tool-search", "toolCallId": "c2", "state": "output-error", "input": {}, "errorText": "boom"},
            {"type": "tool-gh__merge", "toolCallId": "c3", "state": "output-denied", "input": {"pr": 1}, "approval": {"id": "c3", "approved": false, "reason": "no", "by": "alice", "at": "2026-12-01T14:05:00.000Z"}},
            {"type": "step-start"}
        ]);
        let parts: Vec<MessagePart> = serde_json::from_value(wire.clone()).unwrap();
        assert!(
            matches!(&parts[1], MessagePart::Tool(t) if t.tool_name == "question" && t.state == ToolState::InputAvailable)
        );
        assert!(
            matches!(&parts[3], MessagePart::Tool(t) if t.state == ToolState::OutputDenied && t.approval.as_ref().is_some_and(|a| a.approved == Some(false)))
        );
        assert!(matches!(&parts[4], MessagePart::Other(_)));
        assert_eq!(serde_json::to_value(&parts).unwrap(), wire);
    }

    #[test]
    fn a_part_without_type_is_refused() {
        assert!(serde_json::from_value::<MessagePart>(json!({"text": "x"})).is_err());
        assert!(serde_json::from_value::<MessagePart>(json!({"type": "text"})).is_err());
    }

    #[test]
    fn metadata_uses_camel_case() {
        let m = MessageMetadata {
            author: Some(UserId::new("alice")),
            status: Some(MessageStatus::Queued),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            ..Default::default()
        };
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["status"], "queued");
        assert_eq!(v["createdAt"], "2026-01-01T00:00:00.000Z");
        assert_eq!(v["author"], "alice");
    }
}
