//! The AI SDK UI message stream (protocol v1): SSE `data:` lines carrying `start`, `start-step`,
//! `text-start`, `text-delta`, `text-end`, `tool-input-available`, `tool-output-available`,
//! `tool-output-error`, `finish-step`, `finish` and `error` parts, then `data: [DONE]`.

use axum::body::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use std::convert::Infallible;

use frogbot_core::agent::{TurnEvent, TurnHandle};

struct State {
    _open: crate::metrics::OpenStream,
    events: tokio::sync::mpsc::UnboundedReceiver<TurnEvent>,
    text_open: Option<String>,
    text_n: usize,
    done: bool,
}

fn line(v: &Value) -> String {
    format!("data: {v}\n\n")
}

impl State {
    fn close_text(&mut self, out: &mut String) {
        if let Some(id) = self.text_open.take() {
            out.push_str(&line(&json!({"type": "text-end", "id": id})));
        }
    }

    fn map(&mut self, ev: TurnEvent) -> String {
        let mut out = String::new();
        match ev {
            TurnEvent::Start { message_id } => {
                out.push_str(&line(&json!({"type": "start", "messageId": message_id})))
            }
            TurnEvent::StartStep => out.push_str(&line(&json!({"type": "start-step"}))),
            TurnEvent::TextDelta(delta) => {
                if self.text_open.is_none() {
                    let id = format!("text-{}", self.text_n);
                    self.text_n += 1;
                    out.push_str(&line(&json!({"type": "text-start", "id": id})));
                    self.text_open = Some(id);
                }
                let id = self.text_open.clone().expect("open");
                out.push_str(&line(
                    &json!({"type": "text-delta", "id": id, "delta": delta}),
                ));
            }
            TurnEvent::ToolInput {
                tool_call_id,
                tool_name,
                input,
            } => {
                self.close_text(&mut out);
                out.push_str(&line(&json!({"type": "tool-input-available", "toolCallId": tool_call_id, "toolName": tool_name, "input": input})));
            }
            TurnEvent::ToolOutput {
                tool_call_id,
                output,
            } => {
                out.push_str(&line(&json!({"type": "tool-output-available", "toolCallId": tool_call_id, "output": output})));
            }
            TurnEvent::ToolError {
                tool_call_id,
                error_text,
            } => {
                out.push_str(&line(&json!({"type": "tool-output-error", "toolCallId": tool_call_id, "errorText": error_text})));
            }
            TurnEvent::ToolApprovalRequest {
                tool_call_id,
                approval_id,
            } => {
                out.push_str(&line(&json!({"type": "tool-approval-request", "approvalId": approval_id, "toolCallId": tool_call_id})));
            }
            TurnEvent::ToolOutputDenied { tool_call_id } => {
                out.push_str(&line(
                    &json!({"type": "tool-output-denied", "toolCallId": tool_call_id}),
                ));
            }
            TurnEvent::FinishStep => {
                self.close_text(&mut out);
                out.push_str(&line(&json!({"type": "finish-step"})));
            }
            TurnEvent::Error(info) => {
                self.close_text(&mut out);
                out.push_str(&line(&json!({"type": "error", "errorText": format!("{}: {}", info.code, info.message)})));
            }
            TurnEvent::Finish { .. } => {
                self.close_text(&mut out);
                out.push_str(&line(&json!({"type": "finish"})));
                out.push_str("data: [DONE]\n\n");
                self.done = true;
            }
            _ => {}
        }
        out
    }
}

/// The SSE body for a started turn.
pub fn ui_message_stream(
    handle: TurnHandle,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    let state = State {
        _open: crate::metrics::OpenStream::new("turn"),
        events: handle.events,
        text_open: None,
        text_n: 0,
        done: false,
    };
    futures::stream::unfold(state, |mut s| async move {
        if s.done {
            return None;
        }
        match s.events.recv().await {
            Some(ev) => {
                let out = s.map(ev);
                Some((Ok(Bytes::from(out)), s))
            }
            None => {
                s.done = true;
                let mut out = String::new();
                s.close_text(&mut out);
                out.push_str(&line(&json!({"type": "finish"})));
                out.push_str("data: [DONE]\n\n");
                Some((Ok(Bytes::from(out)), s))
            }
        }
    })
}
