//! The `Model` trait: one streaming model step, provider-neutral.

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::BoxError;

/// A tool as the model sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON schema of its input (an object schema).
    pub input_schema: Value,
}

/// A tool call the model made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    /// The call id (echoed back with the result).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The parsed arguments (`{}` when the model sent none; a string when they were not JSON).
    pub input: Value,
}

/// One message of the conversation sent to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ModelMessage {
    /// A user message.
    User {
        /// Its text.
        text: String,
    },
    /// An assistant step: its text and the tool calls it made.
    Assistant {
        /// Its text.
        text: String,
        /// Its tool calls.
        tool_calls: Vec<ToolCallRequest>,
    },
    /// A file a person sent with the user message before it (an image, a document): its
    /// content as the model may read it once the engine has read its bytes.
    File(ModelFile),
    /// The result of a tool call.
    Tool {
        /// The call it answers.
        tool_call_id: String,
        /// The tool's name.
        name: String,
        /// The result as JSON text (or the error text).
        content: String,
        /// Whether the call failed.
        is_error: bool,
    },
}

/// A file of a user message, as sent to the model ([`ModelMessage::File`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelFile {
    /// Its media type (`image/png`).
    pub media_type: String,
    /// Its name as sent (`""` when none).
    pub filename: String,
    /// Where the engine reads it: `/api/chats/{chat}/files/{id}` or a `data:` URL.
    pub url: String,
    /// What the model is shown: `None` until the engine has read the file for a request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<FileContent>,
}

/// What a model is shown of a file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum FileContent {
    /// An image, for a model that reads images: a `data:` URL of its bytes.
    Image {
        /// `data:{media type};base64,…`
        data_url: String,
    },
    /// A text file's text (cut at the configured size, which the text then says).
    Text {
        /// The text.
        text: String,
    },
    /// Only the file's name, type and size: the model cannot read it (another kind of file, an
    /// image for a model without vision, a file too large or no longer stored).
    Named {
        /// What the model is told instead (`report.pdf (application/pdf, 1.2 MB): …`).
        note: String,
    },
}

impl ModelFile {
    /// Its size for the context budget: a text's bytes; an image or a name counts as 1,000.
    fn size_for_budget(&self) -> usize {
        match &self.content {
            Some(FileContent::Text { text }) => text.len(),
            _ => 1_000,
        }
    }
}

/// The conversation sent to the model, shared rather than copied: earlier turns are kept as
/// immutable chunks that every step's request points to, so building a request costs the same
/// however long the chat is. Read it like a slice (`iter`, `last`, `len`).
#[derive(Clone, Debug, Default)]
pub struct Transcript {
    chunks: Vec<std::sync::Arc<[ModelMessage]>>,
    /// The size of each chunk ([`ModelMessage::size`] summed).
    chunk_sizes: Vec<usize>,
    len: usize,
}

impl ModelMessage {
    /// Its size for the context budget: the bytes of its text, tool inputs and results.
    pub fn size(&self) -> usize {
        match self {
            ModelMessage::User { text } => text.len(),
            ModelMessage::Assistant { text, tool_calls } => {
                text.len()
                    + tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.input.to_string().len())
                        .sum::<usize>()
            }
            ModelMessage::Tool { content, name, .. } => content.len() + name.len(),
            ModelMessage::File(f) => f.size_for_budget(),
        }
    }
}

impl Transcript {
    /// An empty transcript.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a chunk of messages (shared, not copied).
    pub fn push_chunk(&mut self, chunk: std::sync::Arc<[ModelMessage]>) {
        if chunk.is_empty() {
            return;
        }
        self.len += chunk.len();
        self.chunk_sizes
            .push(chunk.iter().map(ModelMessage::size).sum());
        self.chunks.push(chunk);
    }

    /// The size of all messages ([`ModelMessage::size`]).
    pub fn size(&self) -> usize {
        self.chunk_sizes.iter().sum()
    }

    /// The newest messages within `budget` (sizes as [`ModelMessage::size`]): the oldest turns
    /// are left out first, and what is kept starts at a user message (a tool result is never
    /// separated from its call). The newest user message and what follows it are always kept,
    /// whatever their size. Costs the kept part's size at most, never the whole chat's.
    pub fn within(&self, budget: usize) -> Transcript {
        if self.size() <= budget {
            return self.clone();
        }
        // Whole chunks that fit, newest first.
        let mut used = 0;
        let mut first_whole = self.chunks.len();
        while first_whole > 0 && used + self.chunk_sizes[first_whole - 1] <= budget {
            first_whole -= 1;
            used += self.chunk_sizes[first_whole];
        }
        // The newest messages of the chunk before them that still fit.
        let mut head: Vec<ModelMessage> = Vec::new();
        if first_whole > 0 {
            let chunk = &self.chunks[first_whole - 1];
            let mut from = chunk.len();
            while from > 0 && used + chunk[from - 1].size() <= budget {
                from -= 1;
                used += chunk[from].size();
            }
            head = chunk[from..].to_vec();
        }
        let is_user =
            |m: &ModelMessage| matches!(m, ModelMessage::User { .. } | ModelMessage::File(_));
        let mut out = Transcript::new();
        if let Some(start) = head.iter().position(is_user) {
            out.extend(head.split_off(start));
            for c in &self.chunks[first_whole..] {
                out.push_chunk(c.clone());
            }
            return out;
        }
        // Start at the first user message of the whole chunks kept.
        for (k, c) in self.chunks.iter().enumerate().skip(first_whole) {
            if let Some(start) = c.iter().position(is_user) {
                if start == 0 {
                    out.push_chunk(c.clone());
                } else {
                    out.extend(c[start..].to_vec());
                }
                for rest in &self.chunks[k + 1..] {
                    out.push_chunk(rest.clone());
                }
                return out;
            }
        }
        // Nothing fits from a user message on: the newest user message and what follows.
        for (k, c) in self.chunks.iter().enumerate().rev() {
            if let Some(start) = c.iter().rposition(is_user) {
                out.extend(c[start..].to_vec());
                for rest in &self.chunks[k + 1..] {
                    out.push_chunk(rest.clone());
                }
                return out;
            }
        }
        self.clone()
    }

    /// Appends a chunk and keeps the chunk count logarithmic in the length: while the newest
    /// chunk is at least as long as the one before it, the two are merged (copied once into one),
    /// like a binary counter. A transcript built this way is cloned in O(log n); every message is
    /// copied O(log n) times over the transcript's life. Used for the long-lived history a
    /// process keeps per chat; a request's own additions use [`Transcript::push_chunk`].
    pub(crate) fn push_compacting(&mut self, chunk: std::sync::Arc<[ModelMessage]>) {
        if chunk.is_empty() {
            return;
        }
        self.push_chunk(chunk);
        while let [.., older, newer] = self.chunks.as_slice()
            && older.len() <= newer.len()
        {
            let merged: std::sync::Arc<[ModelMessage]> =
                older.iter().chain(newer.iter()).cloned().collect();
            self.chunks.truncate(self.chunks.len() - 2);
            self.chunks.push(merged);
            let newer = self.chunk_sizes.pop().unwrap_or(0);
            let older = self.chunk_sizes.pop().unwrap_or(0);
            self.chunk_sizes.push(older + newer);
        }
    }

    /// How many chunks (for tests of the compaction).
    #[cfg(test)]
    pub(crate) fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// Appends one message.
    pub fn push(&mut self, message: ModelMessage) {
        self.push_chunk(std::sync::Arc::from(vec![message]));
    }

    /// Appends messages.
    pub fn extend(&mut self, messages: Vec<ModelMessage>) {
        self.push_chunk(std::sync::Arc::from(messages));
    }

    /// The messages, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &ModelMessage> + Clone {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// The newest message.
    pub fn last(&self) -> Option<&ModelMessage> {
        self.chunks.last().and_then(|c| c.last())
    }

    /// The first message.
    pub fn first(&self) -> Option<&ModelMessage> {
        self.chunks.first().and_then(|c| c.first())
    }

    /// How many messages.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The messages as a vector (copied).
    pub fn to_vec(&self) -> Vec<ModelMessage> {
        self.iter().cloned().collect()
    }
}

impl PartialEq for Transcript {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl From<Vec<ModelMessage>> for Transcript {
    fn from(messages: Vec<ModelMessage>) -> Self {
        let mut t = Self::new();
        t.extend(messages);
        t
    }
}

impl<'a> IntoIterator for &'a Transcript {
    type Item = &'a ModelMessage;
    type IntoIter = Box<dyn DoubleEndedIterator<Item = &'a ModelMessage> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl Serialize for Transcript {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Transcript {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Vec::<ModelMessage>::deserialize(d)?.into())
    }
}

/// One model call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The system instructions.
    pub instructions: String,
    /// The conversation so far.
    pub messages: Transcript,
    /// The tools offered for this step (shared between requests).
    pub tools: std::sync::Arc<[ToolSpec]>,
    /// The reasoning option chosen (`low`, `medium`, `high`, …), if any.
    pub reasoning: Option<String>,
}

/// Why a step finished.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum FinishReason {
    /// A final answer.
    Stop,
    /// The model wants its tool calls run.
    ToolCalls,
    /// The output hit its length limit.
    Length,
    /// Something else the provider reported.
    Other(String),
}

/// Token usage of a step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

/// What a streaming step yields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ModelEvent {
    /// A piece of the reply text.
    TextDelta(String),
    /// A complete tool call (providers assemble streamed argument fragments first).
    ToolCall(ToolCallRequest),
    /// A file the model made (an image a model draws): kept in the chat as a `file` part of the
    /// reply, after the step's text, and sent to the person with it.
    File(GeneratedFile),
    /// A fallback model answers this step (the one asked for failed before answering): its
    /// configured id. Comes before the step's other events.
    Fallback {
        /// The id of the model that answers.
        model: String,
    },
    /// The step is over.
    Finish {
        /// Why.
        reason: FinishReason,
        /// Token usage, when reported.
        usage: Option<Usage>,
    },
}

/// A file a model made ([`ModelEvent::File`]).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeneratedFile {
    /// Its media type, e.g. `image/png`.
    pub media_type: String,
    /// Its file name (`""`: one is made from the type).
    pub filename: String,
    /// Its bytes.
    pub data: Vec<u8>,
}

impl std::fmt::Debug for GeneratedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneratedFile")
            .field("media_type", &self.media_type)
            .field("filename", &self.filename)
            .field("bytes", &self.data.len())
            .finish()
    }
}

/// A stream of step events.
pub type ModelStream = BoxStream<'static, Result<ModelEvent, BoxError>>;

/// A language model: one streaming step per call.
#[async_trait]
pub trait Model: Send + Sync + std::fmt::Debug {
    /// Starts one step. The stream ends after `Finish` (or an error).
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, BoxError>;
}
