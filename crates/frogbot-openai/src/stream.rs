//! Chat Completions server-sent events → `ModelEvent`s.
//!
//! `eventsource-stream` splits the response body into events; each `data:` line is one JSON
//! chunk. The chunk types here are deliberately lenient (unknown `finish_reason` values, missing
//! `index`es, `null`s) because "OpenAI-compatible" servers differ in the details; strict response
//! types would turn such differences into errors.

use std::collections::{BTreeMap, VecDeque};

use eventsource_stream::{EventStreamError, Eventsource};
use frogbot_core::agent::{FinishReason, ModelEvent, ToolCallRequest, Usage};
use frogbot_core::model::{Transient, text};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, error_chain};

/// The chunks of one response, ending at `data: [DONE]` or the end of the body.
pub(crate) type Chunks = BoxStream<'static, Result<Chunk, Error>>;

/// The most characters of a malformed event quoted in its error.
const QUOTE_CHARS: usize = 200;

/// Reads a streaming response's body as chunks.
pub(crate) fn chunks(response: reqwest::Response) -> Chunks {
    response
        .bytes_stream()
        .eventsource()
        .take_while(|item| {
            futures::future::ready(!matches!(item, Ok(event) if event.data.trim() == "[DONE]"))
        })
        .filter_map(|item| {
            futures::future::ready(match item {
                // Comments never get here; keep-alives and empty events carry nothing.
                Ok(event) if event.event == "keepalive" || event.data.trim().is_empty() => None,
                Ok(event) => Some(serde_json::from_str::<Chunk>(&event.data).map_err(|error| {
                    Error::Malformed(format!(
                        "the server sent a chunk that is not valid JSON ({error}): {}",
                        text::truncate(&event.data, QUOTE_CHARS)
                    ))
                })),
                Err(EventStreamError::Transport(error)) => Some(Err(Error::Stream(
                    Transient::from_source(error_chain(&error), error).maybe_done(),
                ))),
                Err(error) => Some(Err(Error::Malformed(format!(
                    "the server sent something that is not server-sent events: {error}"
                )))),
            })
        })
        .boxed()
}

/// One `chat.completion.chunk` object (only the fields FrogBot reads).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Chunk {
    #[serde(default)]
    choices: Option<Vec<ChoiceChunk>>,
    #[serde(default)]
    usage: Option<UsageChunk>,
    /// Some servers (OpenRouter, for one) report failures mid-stream as an `error` object.
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
struct ChoiceChunk {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallChunk>>,
    /// Images an image-making model returns (OpenRouter's `images`: `{"type": "image_url",
    /// "image_url": {"url": "data:image/png;base64,…"}}`).
    #[serde(default)]
    images: Option<Vec<ImageChunk>>,
}

#[derive(Debug, Default, Deserialize)]
struct ImageChunk {
    #[serde(default)]
    image_url: Option<ImageUrl>,
}

#[derive(Debug, Default, Deserialize)]
struct ImageUrl {
    #[serde(default)]
    url: String,
}

/// An image a model returned as a `data:` URL, as a file (`None`: not a base64 `data:` URL —
/// a link to elsewhere is not fetched).
fn image_file(url: &str, n: usize) -> Option<frogbot_core::agent::GeneratedFile> {
    use base64::Engine as _;
    let (head, payload) = url.strip_prefix("data:")?.split_once(',')?;
    let media_type = head.strip_suffix(";base64")?;
    let data = base64::engine::general_purpose::STANDARD
        .decode(payload.trim())
        .ok()?;
    let ext = media_type.split('/').nth(1).unwrap_or("bin");
    Some(frogbot_core::agent::GeneratedFile {
        media_type: media_type.to_owned(),
        filename: format!("image-{n}.{ext}"),
        data,
    })
}

#[derive(Debug, Default, Deserialize)]
struct ToolCallChunk {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionChunk>,
}

#[derive(Debug, Default, Deserialize)]
struct FunctionChunk {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct UsageChunk {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

/// A tool call whose fragments are still arriving.
#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Accumulates one step's chunks.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    /// Tool calls being assembled, by their `index`.
    calls: BTreeMap<u32, PartialCall>,
    /// The slot the last fragment went to (for servers that send no `index`).
    last_slot: Option<u32>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    /// How many images the step returned so far (their file names count up).
    images: usize,
}

impl Assembler {
    pub(crate) fn push(
        &mut self,
        chunk: Chunk,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), Error> {
        if let Some(error) = chunk.error {
            return Err(provider_error(&error));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage {
                input_tokens: usage.prompt_tokens.unwrap_or(0),
                output_tokens: usage.completion_tokens.unwrap_or(0),
            });
        }
        // FrogBot asks for one choice (`n` unset); any other choice is ignored.
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                for text in [delta.content, delta.refusal].into_iter().flatten() {
                    if !text.is_empty() {
                        out.push_back(ModelEvent::TextDelta(text));
                    }
                }
                for fragment in delta.tool_calls.unwrap_or_default() {
                    self.add_fragment(fragment);
                }
                for image in delta.images.unwrap_or_default() {
                    let url = image.image_url.map(|u| u.url).unwrap_or_default();
                    self.images += 1;
                    match image_file(&url, self.images) {
                        Some(f) => out.push_back(ModelEvent::File(f)),
                        None => tracing::warn!(
                            "the model returned an image that is not a base64 data: URL; left out"
                        ),
                    }
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish = Some(finish_reason(&reason));
                self.flush_calls(out);
            }
        }
        Ok(())
    }

    /// The upstream stream ended (`[DONE]` or end of body).
    pub(crate) fn end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), Error> {
        let Some(reason) = self.finish.take() else {
            return Err(Error::Incomplete(
                Transient::new("the stream ended before the model finished").maybe_done(),
            ));
        };
        self.flush_calls(out);
        out.push_back(ModelEvent::Finish {
            reason,
            usage: self.usage,
        });
        Ok(())
    }

    fn add_fragment(&mut self, fragment: ToolCallChunk) {
        let id = fragment.id.filter(|id| !id.is_empty());
        let slot = match fragment.index {
            Some(index) => index,
            // No index: a fragment with a new id starts a call, one without continues the last.
            None => match &id {
                Some(id) => self
                    .calls
                    .iter()
                    .find(|(_, call)| call.id.as_ref() == Some(id))
                    .map(|(slot, _)| *slot)
                    .unwrap_or_else(|| self.calls.keys().next_back().map_or(0, |last| last + 1)),
                None => self.last_slot.unwrap_or(0),
            },
        };
        self.last_slot = Some(slot);
        let call = self.calls.entry(slot).or_default();
        if call.id.is_none() {
            call.id = id;
        }
        if let Some(function) = fragment.function {
            if let Some(name) = function.name.filter(|name| !name.is_empty())
                && call.name.is_empty()
            {
                call.name = name;
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    /// Emits every assembled tool call, in `index` order.
    fn flush_calls(&mut self, out: &mut VecDeque<ModelEvent>) {
        self.last_slot = None;
        for (_, call) in std::mem::take(&mut self.calls) {
            out.push_back(ModelEvent::ToolCall(ToolCallRequest {
                // A server that sends no id still needs one echoed back with the result.
                id: call
                    .id
                    .unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple())),
                name: call.name,
                input: parse_arguments(call.arguments),
            }));
        }
    }
}

/// Parses a tool call's arguments: nothing → `{}`, JSON → that value, anything else → the raw
/// text as a JSON string.
fn parse_arguments(raw: String) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(&raw).unwrap_or(Value::String(raw))
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "tool_calls" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// An `error` object in the stream; a 429 or 5xx `code` (a number or a numeric string) makes it
/// transient.
fn provider_error(error: &Value) -> Error {
    let message = match error.get("message").and_then(Value::as_str) {
        Some(message) => match error.get("code") {
            Some(code) if !code.is_null() => format!("{message} (code {code})"),
            _ => message.to_owned(),
        },
        None => error.to_string(),
    };
    let code = error.get("code").and_then(|code| match code {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    });
    let transient = code
        .filter(|code| *code == 429 || (500..600).contains(code))
        .map(|code| Transient::new(format!("the server reported error {code} in the stream")));
    Error::Provider {
        message: text::truncate(&message, QUOTE_CHARS * 2),
        transient,
    }
}

#[cfg(test)]
mod tests {

    use serde_json::json;

    use super::*;

    fn chunk(value: Value) -> Chunk {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn images_a_model_returns_become_files() {
        use base64::Engine as _;
        let png = base64::engine::general_purpose::STANDARD.encode([137u8, 80, 78, 71]);
        let mut asm = Assembler::default();
        let mut out = VecDeque::new();
        let chunk: Chunk = serde_json::from_value(json!({"choices": [{"index": 0, "delta": {
        "content": "Here it is",
        "images": [
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{png}")}},
            {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}
        ]}}]}))
        .unwrap();
        asm.push(chunk, &mut out).unwrap();
        let files: Vec<_> = out
            .iter()
            .filter_map(|e| match e {
                ModelEvent::File(f) => Some(f.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(files.len(), 1, "a link is not fetched: {out:?}");
        assert_eq!(files[0].media_type, "image/png");
        assert_eq!(files[0].filename, "image-1.png");
        assert_eq!(files[0].data, [137u8, 80, 78, 71]);
    }

    #[test]
    fn arguments_parse_to_json_empty_object_or_raw_string() {
        assert_eq!(parse_arguments(String::new()), json!({}));
        assert_eq!(parse_arguments("  ".into()), json!({}));
        assert_eq!(parse_arguments(r#"{"a":1}"#.into()), json!({"a": 1}));
        assert_eq!(parse_arguments("{broken".into()), json!("{broken"));
    }

    #[test]
    fn finish_reasons_map_and_unknown_ones_pass_through() {
        assert_eq!(finish_reason("stop"), FinishReason::Stop);
        assert_eq!(finish_reason("tool_calls"), FinishReason::ToolCalls);
        assert_eq!(finish_reason("length"), FinishReason::Length);
        assert_eq!(
            finish_reason("content_filter"),
            FinishReason::Other("content_filter".into())
        );
    }

    #[test]
    fn fragments_without_index_are_assembled_by_id() {
        let mut assembler = Assembler::default();
        let mut out = VecDeque::new();
        for value in [
            json!({"choices": [{"delta": {"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{\"x\""}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"function": {"arguments": ":1}"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": ""}}]}}]}),
            json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
        ] {
            assembler.push(chunk(value), &mut out).unwrap();
        }
        assembler.end(&mut out).unwrap();
        let out: Vec<_> = out.into_iter().collect();
        assert_eq!(
            out,
            vec![
                ModelEvent::ToolCall(ToolCallRequest {
                    id: "a".into(),
                    name: "f".into(),
                    input: json!({"x": 1})
                }),
                ModelEvent::ToolCall(ToolCallRequest {
                    id: "b".into(),
                    name: "g".into(),
                    input: json!({})
                }),
                ModelEvent::Finish {
                    reason: FinishReason::ToolCalls,
                    usage: None
                },
            ]
        );
    }

    #[test]
    fn missing_ids_are_generated_and_unique() {
        let mut assembler = Assembler::default();
        let mut out = VecDeque::new();
        assembler
            .push(
                chunk(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                    {"index": 0, "function": {"name": "f", "arguments": "{}"}},
                    {"index": 1, "function": {"name": "f", "arguments": "{}"}}
                ]}, "finish_reason": "tool_calls"}]})),
                &mut out,
            )
            .unwrap();
        let ids: Vec<String> = out
            .iter()
            .map(|event| match event {
                ModelEvent::ToolCall(call) => call.id.clone(),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(ids.len(), 2);
        assert!(ids.iter().all(|id| id.starts_with("call_")));
        assert_ne!(ids[0], ids[1]);
    }

    #[test]
    fn error_object_in_the_stream_is_an_error() {
        let mut assembler = Assembler::default();
        let error = assembler
            .push(
                chunk(json!({"error": {"message": "upstream overloaded", "code": 502}})),
                &mut VecDeque::new(),
            )
            .unwrap_err();
        assert!(
            matches!(&error, Error::Provider { message, .. } if message == "upstream overloaded (code 502)")
        );
        assert!(error.transient().is_some(), "a 502 is worth retrying");
        for (code, transient) in [
            (json!(429), true),
            (json!("503"), true),
            (json!(400), false),
            (json!("invalid_request"), false),
            (Value::Null, false),
        ] {
            let error = provider_error(&json!({"message": "x", "code": code}));
            assert_eq!(error.transient().is_some(), transient, "{code}");
        }
    }

    #[test]
    fn a_stream_that_ends_without_finish_reason_is_transient() {
        let error = Assembler::default().end(&mut VecDeque::new()).unwrap_err();
        assert!(matches!(error, Error::Incomplete(_)), "{error:?}");
        assert!(error.transient().is_some_and(|t| t.may_be_done()));
    }
}
