//! Models that need no network: a scripted model for tests and benchmarks, and the `demo` model of
//! `frogbot serve`.

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

use super::{
    FinishReason, Model, ModelEvent, ModelMessage, ModelRequest, ModelStream, ToolCallRequest,
    Usage,
};
use crate::BoxError;
use crate::model::QUESTION_TOOL;

/// The script of a [`ScriptedModel`]: given the request, the events of the step.
pub type Script = Arc<dyn Fn(&ModelRequest) -> Vec<ScriptEvent> + Send + Sync>;

/// One scripted event: a model event, a pause, or a failure.
#[derive(Clone, Debug)]
pub enum ScriptEvent {
    /// Yield this event.
    Event(ModelEvent),
    /// Wait this long before the next event.
    Pause(Duration),
    /// Fail the stream here with this message.
    Fail(String),
    /// Wait for a permit of this semaphore (tests open the gate when they want the step to go on).
    Gate(Arc<tokio::sync::Semaphore>),
}

/// A model that plays a script, for tests and benchmarks.
#[derive(Clone)]
pub struct ScriptedModel {
    script: Script,
    requests: Arc<std::sync::Mutex<Vec<ModelRequest>>>,
    record: bool,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel").finish_non_exhaustive()
    }
}

impl ScriptedModel {
    /// A model that runs `script` for every step and keeps every request it receives (for tests:
    /// see [`ScriptedModel::requests`]).
    pub fn new(script: impl Fn(&ModelRequest) -> Vec<ScriptEvent> + Send + Sync + 'static) -> Self {
        Self {
            script: Arc::new(script),
            requests: Arc::default(),
            record: true,
        }
    }

    /// A model that runs `script` and keeps nothing (for long-running use, such as `demo`).
    pub fn without_log(
        script: impl Fn(&ModelRequest) -> Vec<ScriptEvent> + Send + Sync + 'static,
    ) -> Self {
        Self {
            record: false,
            ..Self::new(script)
        }
    }

    /// Every request this model received, oldest first.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().expect("requests lock").clone()
    }
}

/// A text reply followed by `Finish { Stop }`.
pub fn reply(text: &str) -> Vec<ScriptEvent> {
    vec![
        ScriptEvent::Event(ModelEvent::TextDelta(text.into())),
        finish(FinishReason::Stop),
    ]
}

/// A text reply with files the model made ([`ModelEvent::File`]), then `Finish { Stop }`.
pub fn reply_with_files(
    text: &str,
    files: impl IntoIterator<Item = crate::agent::GeneratedFile>,
) -> Vec<ScriptEvent> {
    let mut events = vec![ScriptEvent::Event(ModelEvent::TextDelta(text.into()))];
    events.extend(
        files
            .into_iter()
            .map(|f| ScriptEvent::Event(ModelEvent::File(f))),
    );
    events.push(finish(FinishReason::Stop));
    events
}

/// A tool call followed by `Finish { ToolCalls }`.
pub fn call(id: &str, name: &str, input: serde_json::Value) -> Vec<ScriptEvent> {
    vec![
        ScriptEvent::Event(ModelEvent::ToolCall(ToolCallRequest {
            id: id.into(),
            name: name.into(),
            input,
        })),
        finish(FinishReason::ToolCalls),
    ]
}

/// `Finish` with no usage.
pub fn finish(reason: FinishReason) -> ScriptEvent {
    ScriptEvent::Event(ModelEvent::Finish {
        reason,
        usage: Some(Usage::default()),
    })
}

#[async_trait]
impl Model for ScriptedModel {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, BoxError> {
        if self.record {
            self.requests
                .lock()
                .expect("requests lock")
                .push(request.clone());
        }
        let events = (self.script)(&request);
        let stream = futures::stream::iter(events).then(|e| async move {
            match e {
                ScriptEvent::Event(e) => Some(Ok(e)),
                ScriptEvent::Pause(d) => {
                    tokio::time::sleep(d).await;
                    None
                }
                ScriptEvent::Fail(m) => Some(Err(BoxError::from(m))),
                ScriptEvent::Gate(g) => {
                    if let Ok(p) = g.acquire().await {
                        p.forget();
                    }
                    None
                }
            }
        });
        Ok(stream.filter_map(|e| async move { e }).boxed())
    }
}

/// The built-in `demo` model of `frogbot serve`: when the last user message contains the word `ask`
/// it asks a question with the question tool; when it contains `slow N` it waits N seconds before
/// replying; otherwise it echoes. After a question is answered it says what was chosen.
pub fn demo_model() -> ScriptedModel {
    ScriptedModel::without_log(|req: &ModelRequest| {
        // After a tool result: report it.
        if let Some(ModelMessage::Tool {
            content, is_error, ..
        }) = req.messages.last()
        {
            let text = if *is_error {
                format!("The question was not answered ({content}).")
            } else {
                let picked = serde_json::from_str::<serde_json::Value>(content)
                    .ok()
                    .and_then(|v| {
                        v["answers"].as_array().map(|a| {
                            a.iter()
                                .map(|x| {
                                    let sel: Vec<_> = x["selected"]
                                        .as_array()
                                        .into_iter()
                                        .flatten()
                                        .filter_map(|s| s.as_str())
                                        .collect();
                                    format!(
                                        "{}: {}",
                                        x["header"].as_str().unwrap_or("?"),
                                        sel.join(", ")
                                    )
                                })
                                .collect::<Vec<_>>()
                                .join("; ")
                        })
                    })
                    .unwrap_or_else(|| content.clone());
                format!("You chose {picked}.")
            };
            return reply(&text);
        }
        let last = req
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                ModelMessage::User { text } => Some(text.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let words: Vec<&str> = last.split_whitespace().collect();
        let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
        if lower
            .iter()
            .any(|w| w.trim_matches(|c: char| !c.is_alphanumeric()) == "ask")
        {
            let id = format!("call_{}", uuid::Uuid::new_v4().simple());
            return call(
                &id,
                QUESTION_TOOL,
                json!({"questions": [{
                    "header": "Colour",
                    "question": "Which colour do you like best?",
                    "options": [{"label": "Red"}, {"label": "Green"}, {"label": "Blue"}],
                    "custom": true
                }]}),
            );
        }
        let mut events = Vec::new();
        if let Some(i) = lower.iter().position(|w| w == "slow")
            && let Some(n) = lower.get(i + 1).and_then(|n| n.parse::<f64>().ok())
            && n.is_finite()
            && n >= 0.0
        {
            events.push(ScriptEvent::Pause(Duration::from_secs_f64(n.min(3600.0))));
        }
        events.extend(reply(&format!("You said: {last}")));
        events
    })
}
