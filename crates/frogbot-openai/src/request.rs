//! `ModelRequest` → Chat Completions request body.

use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestToolMessage,
    ChatCompletionRequestToolMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionStreamOptions, ChatCompletionTool,
    ChatCompletionTools, CreateChatCompletionRequest, FunctionCall, FunctionObject,
    ReasoningEffort,
};
use async_openai::types::chat::{
    ChatCompletionRequestMessageContentPartImage, ChatCompletionRequestMessageContentPartText,
    ChatCompletionRequestUserMessageContentPart, ImageUrl,
};
use frogbot_core::agent::{FileContent, ModelMessage, ModelRequest, ToolCallRequest, ToolSpec};
use serde_json::Value;

use crate::error::Error;

/// Builds the streaming request body for `model` (the upstream model name).
pub(crate) fn build_request(
    model: &str,
    request: ModelRequest,
) -> Result<CreateChatCompletionRequest, Error> {
    let ModelRequest {
        instructions,
        messages,
        tools,
        reasoning,
    } = request;
    let reasoning_effort = reasoning
        .as_deref()
        .map(reasoning_effort)
        .transpose()?
        .flatten();

    let mut chat = Vec::with_capacity(messages.len() + 1);
    if !instructions.is_empty() {
        chat.push(ChatCompletionRequestMessage::System(
            ChatCompletionRequestSystemMessage {
                content: ChatCompletionRequestSystemMessageContent::Text(instructions),
                name: None,
            },
        ));
    }
    chat.extend(messages.iter().cloned().map(message));

    let tools: Vec<ChatCompletionTools> = tools.iter().cloned().map(tool).collect();

    Ok(CreateChatCompletionRequest {
        model: model.to_owned(),
        messages: chat,
        // Some servers reject an empty `tools` array; leave it out instead.
        tools: (!tools.is_empty()).then_some(tools),
        reasoning_effort,
        stream: Some(true),
        stream_options: Some(ChatCompletionStreamOptions {
            include_usage: Some(true),
            include_obfuscation: None,
        }),
        ..Default::default()
    })
}

/// Maps FrogBot's reasoning option onto `reasoning_effort`. A blank option means "not set".
fn reasoning_effort(option: &str) -> Result<Option<ReasoningEffort>, Error> {
    let effort = match option.trim().to_ascii_lowercase().as_str() {
        "" => return Ok(None),
        "none" => ReasoningEffort::None,
        "minimal" => ReasoningEffort::Minimal,
        "low" => ReasoningEffort::Low,
        "medium" => ReasoningEffort::Medium,
        "high" => ReasoningEffort::High,
        "xhigh" => ReasoningEffort::Xhigh,
        "max" => ReasoningEffort::Max,
        _ => return Err(Error::UnsupportedReasoning(option.to_owned())),
    };
    Ok(Some(effort))
}

fn message(message: ModelMessage) -> ChatCompletionRequestMessage {
    match message {
        ModelMessage::User { text } => {
            ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
                content: ChatCompletionRequestUserMessageContent::Text(text),
                name: None,
            })
        }
        ModelMessage::Assistant { text, tool_calls } => {
            // `content` may be left out only when there are tool calls.
            let content = (!text.is_empty() || tool_calls.is_empty())
                .then_some(ChatCompletionRequestAssistantMessageContent::Text(text));
            let tool_calls = (!tool_calls.is_empty())
                .then(|| tool_calls.into_iter().map(assistant_tool_call).collect());
            ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
                content,
                tool_calls,
                ..Default::default()
            })
        }
        // A person's file: an image as an image part (its `data:` URL), any other as the text
        // the engine wrote (the file's text, or its name when the model cannot read it).
        ModelMessage::File(file) => {
            let text = |text: String| {
                ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
                    content: ChatCompletionRequestUserMessageContent::Text(text),
                    name: None,
                })
            };
            match file.content {
                Some(FileContent::Image { data_url }) => {
                    let name = if file.filename.is_empty() {
                        format!("[an image ({})]", file.media_type)
                    } else {
                        format!("[{} ({})]", file.filename, file.media_type)
                    };
                    ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
                        content: ChatCompletionRequestUserMessageContent::Array(vec![
                            ChatCompletionRequestUserMessageContentPart::Text(
                                ChatCompletionRequestMessageContentPartText {
                                    text: name,
                                    prompt_cache_breakpoint: None,
                                },
                            ),
                            ChatCompletionRequestUserMessageContentPart::ImageUrl(
                                ChatCompletionRequestMessageContentPartImage {
                                    image_url: ImageUrl {
                                        url: data_url,
                                        detail: None,
                                    },
                                    prompt_cache_breakpoint: None,
                                },
                            ),
                        ]),
                        name: None,
                    })
                }
                Some(FileContent::Text { text: t }) => text(t),
                Some(FileContent::Named { note }) => text(note),
                // Not read by the engine (a request built outside a turn): named.
                _ => text(format!("[{} ({})]", file.filename, file.media_type)),
            }
        }
        // Chat Completions has no error flag on tool results; the content already says what went
        // wrong, and the tool name is implied by the call id.
        ModelMessage::Tool {
            tool_call_id,
            content,
            ..
        } => ChatCompletionRequestMessage::Tool(ChatCompletionRequestToolMessage {
            content: ChatCompletionRequestToolMessageContent::Text(content),
            tool_call_id,
        }),
    }
}

fn assistant_tool_call(call: ToolCallRequest) -> ChatCompletionMessageToolCalls {
    let arguments = match call.input {
        // Arguments that were not JSON came back as the raw text; send that text again.
        Value::String(raw) => raw,
        input => input.to_string(),
    };
    ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
        id: call.id,
        function: FunctionCall {
            name: call.name,
            arguments,
        },
    })
}

fn tool(spec: ToolSpec) -> ChatCompletionTools {
    ChatCompletionTools::Function(ChatCompletionTool {
        function: FunctionObject {
            name: spec.name,
            description: (!spec.description.is_empty()).then_some(spec.description),
            parameters: Some(spec.input_schema),
            strict: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_options_map_onto_reasoning_effort() {
        assert_eq!(reasoning_effort("low").unwrap(), Some(ReasoningEffort::Low));
        assert_eq!(
            reasoning_effort(" High ").unwrap(),
            Some(ReasoningEffort::High)
        );
        assert_eq!(
            reasoning_effort("minimal").unwrap(),
            Some(ReasoningEffort::Minimal)
        );
        assert_eq!(
            reasoning_effort("medium").unwrap(),
            Some(ReasoningEffort::Medium)
        );
        assert_eq!(reasoning_effort("").unwrap(), None);
        assert!(matches!(
            reasoning_effort("turbo"),
            Err(Error::UnsupportedReasoning(option)) if option == "turbo"
        ));
    }

    #[test]
    fn files_become_image_parts_or_text() {
        use frogbot_core::agent::ModelFile;
        let file = |content| {
            ModelMessage::File(ModelFile {
                media_type: "image/png".into(),
                filename: "cat.png".into(),
                url: "/api/chats/c/files/f".into(),
                content,
            })
        };
        let image = serde_json::to_value(message(file(Some(FileContent::Image {
            data_url: "data:image/png;base64,AAAA".into(),
        }))))
        .unwrap();
        assert_eq!(
            image,
            serde_json::json!({"role": "user", "content": [
                {"type": "text", "text": "[cat.png (image/png)]"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
            ]})
        );
        let named = serde_json::to_value(message(file(Some(FileContent::Named {
            note: "[cat.png (image/png): too large]".into(),
        }))))
        .unwrap();
        assert_eq!(
            named,
            serde_json::json!({"role": "user", "content": "[cat.png (image/png): too large]"})
        );
    }

    #[test]
    fn assistant_without_text_or_calls_keeps_empty_content() {
        let body = build_request(
            "m",
            ModelRequest {
                instructions: String::new(),
                messages: vec![ModelMessage::Assistant {
                    text: String::new(),
                    tool_calls: vec![],
                }]
                .into(),
                tools: vec![].into(),
                reasoning: None,
            },
        )
        .unwrap();
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(
            json["messages"],
            serde_json::json!([{ "role": "assistant", "content": "" }])
        );
        assert!(json.get("tools").is_none());
        assert!(json.get("reasoning_effort").is_none());
    }
}
