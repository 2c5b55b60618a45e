//! One model step: stream the model's answer, run its tool calls, collect its questions.

use futures::StreamExt;
use serde_json::json;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::mpsc;

use super::super::{FinishReason, ModelEvent, ModelRequest, ToolCallRequest};
use super::elicit::CallEnd;
use super::{ModelOffer, TurnEvent, Turns};
use crate::error::{Error, Result};
use crate::model::{
    ErrorInfo, MessagePart, QUESTION_TOOL, QuestionInput, ToolApproval, ToolPart, ToolState,
    UiMessage, UserId, approval_question,
};
use crate::store::Lease;
use crate::store::StoreError;

/// The error code of a step whose model went silent past `stream_idle_timeout` or ran past
/// `step_timeout`.
pub(crate) const MODEL_TIMEOUT: &str = "model-timeout";

/// The error a call needing approval gives the model when nobody may approve it: no
/// `approvers` are configured and the turn has no driver (or its driver is the calling agent).
pub const NO_APPROVERS: &str = "this call needs approval and nobody may approve it here \
     (configure `approvers`); it did not run";

/// Who approves a call: the configured `approvers`, else the turn's driver — never the driver
/// when it is an agent principal (an agent does not approve its own calls). Empty: nobody.
pub(crate) fn approvers_of(
    configured: &[String],
    driver: Option<&UserId>,
    agents: &HashSet<UserId>,
) -> Vec<String> {
    let named: Vec<String> = if configured.is_empty() {
        driver.iter().map(|d| d.as_str().to_owned()).collect()
    } else {
        configured.to_vec()
    };
    match driver {
        Some(d) if agents.contains(d) => named.into_iter().filter(|a| a != d.as_str()).collect(),
        _ => named,
    }
}

/// How a step ended.
pub(super) enum StepEnd {
    /// It ran tool calls: another step follows.
    Continue,
    /// A final answer.
    Final,
    /// It asked questions: the turn waits.
    Questions(Vec<(String, QuestionInput)>),
    /// The model failed.
    Failed(ErrorInfo),
    /// The driving user stopped the turn while the model answered; the text so far is kept.
    Stopped,
}

/// Ends a step cut short: its tool calls never run, each is told to the stream and kept as an
/// error saying `why`.
fn end_unrun(
    calls: Vec<ToolCallRequest>,
    why: &str,
    reply: &mut UiMessage,
    tx: &mpsc::UnboundedSender<TurnEvent>,
) {
    for c in calls {
        let error_text = why.to_string();
        let _ = tx.send(TurnEvent::ToolError {
            tool_call_id: c.id.clone(),
            error_text: error_text.clone(),
        });
        reply.parts.push(MessagePart::Tool(ToolPart {
            tool_name: c.name,
            tool_call_id: c.id,
            state: ToolState::OutputError,
            input: c.input,
            output: None,
            error_text: Some(error_text),
            expires_at: None,
            approval: None,
        }));
    }
    let _ = tx.send(TurnEvent::FinishStep);
}

impl Turns {
    /// Keeps a file the model made in `chat` (within the file limits): its `file` part, or the
    /// line telling the person it could not be kept.
    async fn keep_generated(
        &self,
        chat: &crate::model::ChatId,
        f: super::super::GeneratedFile,
    ) -> std::result::Result<MessagePart, String> {
        let name = if f.filename.trim().is_empty() {
            let ext = f
                .media_type
                .split('/')
                .nth(1)
                .and_then(|s| s.split(['+', ';']).next())
                .filter(|s| !s.is_empty() && s.len() <= 10)
                .unwrap_or("bin");
            format!("file.{ext}")
        } else {
            f.filename.clone()
        };
        let body = futures::stream::iter([Ok::<_, std::convert::Infallible>(f.data)]);
        match crate::agent::files::write_file(
            &self.store,
            &self.config.files,
            chat,
            "",
            &f.media_type,
            &name,
            self.now(),
            body,
        )
        .await
        {
            Ok(row) => Ok(MessagePart::file(
                &row.media_type,
                &row.filename,
                &crate::agent::files::file_url(chat, &row.id),
            )),
            Err(e) => {
                tracing::warn!(chat_id = %chat, file = %name, error = %e, "a file the model made could not be kept");
                Err(format!("📎 {name} could not be kept: {e}."))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_step(
        &self,
        lease: &Lease,
        reply: &mut UiMessage,
        position: i64,
        offer: &ModelOffer,
        request: ModelRequest,
        tx: &mpsc::UnboundedSender<TurnEvent>,
        lost: &AtomicBool,
        halt: &tokio_util::sync::CancellationToken,
        watch: Option<&super::TurnWatch>,
        extra: &[(
            std::sync::Arc<dyn crate::agent::Tool>,
            super::super::ToolSpec,
        )],
        can_ask: bool,
    ) -> Result<StepEnd> {
        let _timer = crate::metrics::step_timer(&offer.id);
        reply
            .parts
            .push(MessagePart::Other(json!({"type": "step-start"})));
        let _ = tx.send(TurnEvent::StartStep);
        // The whole step (opening the stream included) has `step_timeout`; the stream may be
        // silent for `stream_idle_timeout` at most.
        let step_deadline = tokio::time::Instant::now() + self.config.step_timeout;
        let opened = tokio::time::timeout_at(step_deadline, offer.model.stream(request)).await;
        let mut stream = match opened {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return Ok(StepEnd::Failed(ErrorInfo {
                    code: "model-error".into(),
                    message: e.to_string(),
                }));
            }
            Err(_) => {
                return Ok(StepEnd::Failed(ErrorInfo {
                    code: MODEL_TIMEOUT.into(),
                    message: format!(
                        "the model did not answer within the step timeout ({:?})",
                        self.config.step_timeout
                    ),
                }));
            }
        };
        let text_index = reply.parts.len();
        let mut text = String::new();
        let mut calls: Vec<ToolCallRequest> = Vec::new();
        let mut made: Vec<super::super::GeneratedFile> = Vec::new();
        let mut finish: Option<FinishReason> = None;
        let mut last_checkpoint = tokio::time::Instant::now();
        // How many streamed messages the last checkpoint noted: a new one is noted at the next
        // text, not only at the interval (a process killed meanwhile left it unknown, and its
        // partial text stood beside the recovered reply).
        let drafts_now = || watch.map_or(0, |w| w.drafts.lock().expect("drafts").len());
        let mut drafts_noted = drafts_now();
        let mut failure: Option<String> = None;
        let mut timed_out = false;
        let mut halted = false;
        loop {
            let idle_deadline =
                (tokio::time::Instant::now() + self.config.stream_idle_timeout).min(step_deadline);
            let event = tokio::select! {
                biased;
                () = halt.cancelled() => {
                    halted = true;
                    break;
                }
                () = tokio::time::sleep_until(idle_deadline) => {
                    timed_out = true;
                    failure = Some(if idle_deadline == step_deadline {
                        format!("the step ran past its timeout ({:?})", self.config.step_timeout)
                    } else {
                        format!(
                            "the model sent nothing for {:?}",
                            self.config.stream_idle_timeout
                        )
                    });
                    break;
                }
                // A streamed message posted while the model sends nothing: noted at once.
                () = async {
                    match watch {
                        Some(w) => w.posted.notified().await,
                        None => std::future::pending().await,
                    }
                } => None,
                event = stream.next() => match event {
                    Some(e) => Some(e),
                    None => break,
                },
            };
            let event = match event {
                Some(e) => e,
                None if drafts_now() != drafts_noted => Ok(ModelEvent::TextDelta(String::new())),
                None => continue,
            };
            match event {
                Ok(ModelEvent::TextDelta(d)) => {
                    text.push_str(&d);
                    if !d.is_empty() {
                        if let Some(w) = watch {
                            let _ = w.text.send(d.clone());
                        }
                        let _ = tx.send(TurnEvent::TextDelta(d));
                    }
                    let drafts = drafts_now();
                    if last_checkpoint.elapsed() >= self.config.partial_checkpoint
                        || drafts != drafts_noted
                    {
                        drafts_noted = drafts;
                        // Keep the text streamed so far, so a process that dies mid-step leaves it.
                        let mut partial = reply.clone();
                        if let Some(w) = watch {
                            w.mark(&mut partial);
                        }
                        partial.parts.push(MessagePart::text(text.clone()));
                        self.checkpoint_as_is(lease, &partial, position).await?;
                        last_checkpoint = tokio::time::Instant::now();
                    }
                }
                Ok(ModelEvent::ToolCall(c)) => calls.push(c),
                Ok(ModelEvent::File(f)) => made.push(f),
                Ok(ModelEvent::Fallback { model }) => reply.metadata.fallback = Some(model),
                Ok(ModelEvent::Finish { reason, .. }) => {
                    finish = Some(reason);
                    break;
                }
                Err(e) => {
                    failure = Some(e.to_string());
                    break;
                }
            }
            if lost.load(Ordering::SeqCst) {
                return Err(Error::Store(StoreError::LeaseLost {
                    chat_id: lease.chat_id.clone(),
                }));
            }
        }
        if finish.is_none() && failure.is_none() && !halted {
            failure = Some("the model stream ended before the step finished".into());
        }
        // The files the model made: kept in the chat, after the step's text (a file that cannot
        // be kept is named in the text instead).
        let mut kept = Vec::new();
        for f in made {
            match self.keep_generated(&lease.chat_id, f).await {
                Ok(part) => kept.push(part),
                Err(line) => {
                    if !text.is_empty() {
                        text.push_str("\n\n");
                    }
                    text.push_str(&line);
                }
            }
        }
        if !text.is_empty() {
            reply.parts.insert(text_index, MessagePart::text(text));
        }
        let at = (text_index + 1).min(reply.parts.len());
        for (i, part) in kept.into_iter().enumerate() {
            reply.parts.insert(at + i, part);
        }
        if halted {
            // The model's answer is cut off: its tool calls never run.
            end_unrun(
                calls,
                "the turn was stopped before this call ran",
                reply,
                tx,
            );
            return Ok(StepEnd::Stopped);
        }
        if let Some(message) = failure {
            // Save the partial step: unfinished tool calls are marked as errors.
            end_unrun(
                calls,
                "the step was interrupted before this call ran",
                reply,
                tx,
            );
            return Ok(StepEnd::Failed(ErrorInfo {
                code: if timed_out {
                    MODEL_TIMEOUT
                } else {
                    "model-error"
                }
                .into(),
                message,
            }));
        }
        let had_calls = !calls.is_empty();
        let mut questions = Vec::new();
        for c in calls {
            let mut c = self.unique_call_id(reply, c);
            let _ = tx.send(TurnEvent::ToolInput {
                tool_call_id: c.id.clone(),
                tool_name: c.name.clone(),
                input: c.input.clone(),
            });
            let mut approval = None;
            let (state, output, error_text) = if c.name == QUESTION_TOOL {
                match serde_json::from_value::<QuestionInput>(c.input.clone())
                    .map_err(|e| e.to_string())
                    .and_then(|i| i.validate().map(|_| i))
                {
                    Ok(mut input) => {
                        // Its apps get their capabilities here, once, in the call kept with the
                        // reply and in the record alike (their web view reads the call).
                        if !input.blocks.is_empty() {
                            crate::model::stamp_app_links_in(
                                &mut input.blocks,
                                super::fresh_app_link,
                            );
                            if let Some(o) = c.input.as_object_mut() {
                                o.insert("blocks".into(), input.blocks.clone().into());
                            }
                        }
                        questions.push((c.id.clone(), input));
                        (ToolState::InputAvailable, None, None)
                    }
                    Err(e) => (
                        ToolState::OutputError,
                        None,
                        Some(format!("invalid question input: {e}")),
                    ),
                }
            } else if let Some(tool) = self.find_tool(&c.name, extra) {
                if let Some(policy) = tool.approval() {
                    // Asked first: the call runs once a person approves it (`resumed`). Every
                    // approval names who may approve; with nobody, the call is refused.
                    let approvers = approvers_of(
                        &policy.approvers,
                        lease.driver.as_ref(),
                        &self.config.agents,
                    );
                    if approvers.is_empty() {
                        (ToolState::OutputError, None, Some(NO_APPROVERS.to_owned()))
                    } else {
                        let question = approval_question(
                            &c.name,
                            &c.input,
                            &approvers,
                            policy.expires_in_seconds,
                        );
                        approval = Some(Box::new(ToolApproval {
                            id: c.id.clone(),
                            descriptor: serde_json::to_value(&question).ok(),
                            ..Default::default()
                        }));
                        let _ = tx.send(TurnEvent::ToolApprovalRequest {
                            tool_call_id: c.id.clone(),
                            approval_id: c.id.clone(),
                        });
                        questions.push((c.id.clone(), question));
                        (ToolState::ApprovalRequested, None, None)
                    }
                } else {
                    let ctx = super::call_context(lease, &reply.id, &c.id);
                    let first = tool.call_or_ask(c.input.clone(), ctx.clone()).await;
                    match self.drive_call(tool, lease, &ctx, first, 0, can_ask).await {
                        CallEnd::Done(v) => (ToolState::OutputAvailable, Some(v), None),
                        CallEnd::Failed(e) => (ToolState::OutputError, None, Some(e)),
                        CallEnd::Asks(e, question) => {
                            // The call waits (its part `input-available`) on the question.
                            questions.push((e.id.clone(), question));
                            reply.metadata.elicitations.insert(c.id.clone(), e);
                            (ToolState::InputAvailable, None, None)
                        }
                    }
                }
            } else {
                (
                    ToolState::OutputError,
                    None,
                    Some(format!("unknown tool {:?}", c.name)),
                )
            };
            match (&output, &error_text) {
                (Some(o), _) => {
                    let _ = tx.send(TurnEvent::ToolOutput {
                        tool_call_id: c.id.clone(),
                        output: o.clone(),
                    });
                }
                (None, Some(e)) => {
                    let _ = tx.send(TurnEvent::ToolError {
                        tool_call_id: c.id.clone(),
                        error_text: e.clone(),
                    });
                }
                _ => {}
            }
            reply.parts.push(MessagePart::Tool(ToolPart {
                tool_name: c.name,
                tool_call_id: c.id,
                state,
                input: c.input,
                output,
                error_text,
                expires_at: None,
                approval,
            }));
        }
        let _ = tx.send(TurnEvent::FinishStep);
        if !questions.is_empty() {
            return Ok(StepEnd::Questions(questions));
        }
        // The caller checkpoints a step that continues, and saves the final one with the turn's end.
        Ok(if had_calls {
            StepEnd::Continue
        } else {
            StepEnd::Final
        })
    }

    /// Tool call ids key question records per chat: a model that repeats an id gets a fresh one.
    fn unique_call_id(&self, reply: &UiMessage, mut call: ToolCallRequest) -> ToolCallRequest {
        if call.id.is_empty() || reply.tool_parts().any(|t| t.tool_call_id == call.id) {
            call.id = format!("call_{}", uuid::Uuid::new_v4().simple());
        }
        call
    }
}
