//! Calls that ask the person driving the turn for input while they run (an MCP server's
//! elicitation, [`crate::agent::ToolStep::Ask`]).
//!
//! The call is suspended like an approval: the step records its question through the usual wait
//! (`await_answers`: drawn by every channel, expiry job, first answer wins, stale clicks), the
//! call's part stays `input-available` and its state is kept in the reply's
//! `metadata.elicitations`. When the turn continues, [`Turns::run_elicited`] hands each call its
//! outcome ([`crate::agent::Tool::resume`]); the call finishes, fails, or asks again. The tool
//! holds the live call in memory: a turn continued by another process (or after a restart) finds
//! it gone, and the model gets the tool's error.

use std::sync::Arc;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::super::{Tool, ToolAnswer, ToolContext, ToolSpec, ToolStep};
use super::{TurnEvent, Turns};
use crate::BoxError;
use crate::error::Result;
use crate::model::{
    MessagePart, QuestionInput, ToolElicitation, ToolState, UiMessage, elicitation_id,
};
use crate::store::Lease;

/// How often in a row a call may ask what nobody may answer (each declined at once) before it
/// is failed.
const MAX_REFUSED: u32 = 8;

/// The error text of a call whose turn stopped (a question of its step dismissed or withdrawn)
/// while it waited for input: the server's request is cancelled.
pub const ELICITATION_STOPPED_TEXT: &str =
    "The turn stopped while this call waited for input; its request for input was cancelled.";

/// How a call that may ask ended for now.
pub(super) enum CallEnd {
    /// It finished.
    Done(serde_json::Value),
    /// It failed (the text is what the model sees).
    Failed(String),
    /// It waits for the answer to a question (the record `elicitation.id`).
    Asks(ToolElicitation, QuestionInput),
}

impl CallEnd {
    /// A call whose tool is gone by the time the turn continues it.
    pub(super) fn no_longer_offered(tool: &str) -> CallEnd {
        CallEnd::Failed(format!("unknown tool {tool:?} (it is no longer offered)"))
    }
}

impl Turns {
    /// Who may answer a call's question, and whether it can be asked at all: the person driving
    /// the turn (whoever the chat lets answer when none drives it); never an agent principal
    /// (nobody is asked: the call is declined).
    fn elicitation_question(
        &self,
        lease: &Lease,
        mut question: QuestionInput,
        can_ask: bool,
    ) -> std::result::Result<QuestionInput, String> {
        if !can_ask {
            return Err(
                "this chat cannot show questions, so nobody can be asked for the input".into(),
            );
        }
        question.from = match &lease.driver {
            Some(d) if self.config.agents.contains(d) => {
                return Err(
                    "an agent drives this turn, so no person can be asked for the input".into(),
                );
            }
            Some(d) => vec![d.as_str().to_owned()],
            None => Vec::new(),
        };
        question
            .validate()
            .map_err(|e| format!("the request for input cannot be asked: {e}"))?;
        Ok(question)
    }

    /// Takes a call's step (`step`, after it asked `asked` questions) to its end for now: its
    /// output, its error, or the question it waits on. A question nobody may answer (or one asked
    /// where the chat cannot show questions: `can_ask` false) is declined at once (the reason
    /// logged and passed to the tool) and the call goes on.
    pub(super) async fn drive_call(
        &self,
        tool: &Arc<dyn Tool>,
        lease: &Lease,
        ctx: &ToolContext,
        mut step: std::result::Result<ToolStep, BoxError>,
        mut asked: u32,
        can_ask: bool,
    ) -> CallEnd {
        for _ in 0..MAX_REFUSED {
            match step {
                Ok(ToolStep::Done(v)) => return CallEnd::Done(v),
                Err(e) => return CallEnd::Failed(e.to_string()),
                Ok(ToolStep::Ask(question)) => {
                    asked += 1;
                    match self.elicitation_question(lease, question, can_ask) {
                        Ok(question) => {
                            debug!(call = %ctx.tool_call_id, "a call asks for input");
                            let e = ToolElicitation {
                                id: elicitation_id(&ctx.tool_call_id, asked),
                                asked,
                                descriptor: serde_json::to_value(&question).ok(),
                                outcome: None,
                            };
                            return CallEnd::Asks(e, question);
                        }
                        Err(reason) => {
                            warn!(call = %ctx.tool_call_id, %reason, "a call's request for input declined");
                            step = tool
                                .resume(
                                    ToolAnswer::Declined {
                                        reason: Some(reason),
                                    },
                                    ctx.clone(),
                                )
                                .await;
                        }
                    }
                }
            }
        }
        let reason = "the call kept asking for input nobody may give";
        let _ = tool
            .resume(
                ToolAnswer::Cancelled {
                    reason: reason.into(),
                },
                ctx.clone(),
            )
            .await;
        CallEnd::Failed(format!("{reason}; it was stopped"))
    }

    /// Puts a call's end on its part (and the reply's elicitations); a question to ask is
    /// returned as `(record id, question)`.
    pub(super) fn place_call_end(
        reply: &mut UiMessage,
        index: usize,
        end: CallEnd,
        tx: &mpsc::UnboundedSender<TurnEvent>,
    ) -> Option<(String, QuestionInput)> {
        let UiMessage {
            parts, metadata, ..
        } = reply;
        let MessagePart::Tool(t) = &mut parts[index] else {
            return None;
        };
        match end {
            CallEnd::Done(v) => {
                let _ = tx.send(TurnEvent::ToolOutput {
                    tool_call_id: t.tool_call_id.clone(),
                    output: v.clone(),
                });
                t.state = ToolState::OutputAvailable;
                t.output = Some(v);
                t.expires_at = None;
                None
            }
            CallEnd::Failed(e) => {
                let _ = tx.send(TurnEvent::ToolError {
                    tool_call_id: t.tool_call_id.clone(),
                    error_text: e.clone(),
                });
                t.state = ToolState::OutputError;
                t.error_text = Some(e);
                t.expires_at = None;
                None
            }
            CallEnd::Asks(e, question) => {
                t.state = ToolState::InputAvailable;
                let asked = (e.id.clone(), question);
                metadata.elicitations.insert(t.tool_call_id.clone(), e);
                Some(asked)
            }
        }
    }

    /// A continued turn hands the calls that waited for input their outcome (saved first, so a
    /// process that dies meanwhile leaves it recorded), then saves what they did. Returns the
    /// questions calls ask anew: the turn waits again.
    pub(super) async fn run_elicited(
        &self,
        lease: &Lease,
        reply: &mut UiMessage,
        position: i64,
        tx: &mpsc::UnboundedSender<TurnEvent>,
        extra: &[(Arc<dyn Tool>, ToolSpec)],
        can_ask: bool,
    ) -> Result<Vec<(String, QuestionInput)>> {
        let answered: Vec<(usize, String, ToolAnswer, u32)> = reply
            .parts
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let MessagePart::Tool(t) = p else { return None };
                if t.state != ToolState::InputAvailable {
                    return None;
                }
                let e = reply.metadata.elicitations.get(&t.tool_call_id)?;
                let outcome = e.outcome.as_ref()?;
                Some((i, t.tool_call_id.clone(), ToolAnswer::of(outcome), e.asked))
            })
            .collect();
        if answered.is_empty() {
            return Ok(Vec::new());
        }
        self.checkpoint_as_is(lease, reply, position).await?;
        let mut asked = Vec::new();
        for (i, call_id, answer, n) in answered {
            if let Some(e) = reply.metadata.elicitations.get_mut(&call_id) {
                e.outcome = None;
            }
            let MessagePart::Tool(t) = &reply.parts[i] else {
                continue;
            };
            let ctx = super::call_context(lease, &reply.id, &call_id);
            let end = match self.find_tool(&t.tool_name, extra).cloned() {
                Some(tool) => {
                    debug!(tool = %t.tool_name, call = %call_id, "continuing a call with its input");
                    let step = tool.resume(answer, ctx.clone()).await;
                    self.drive_call(&tool, lease, &ctx, step, n, can_ask).await
                }
                None => CallEnd::no_longer_offered(&t.tool_name),
            };
            asked.extend(Self::place_call_end(reply, i, end, tx));
        }
        if asked.is_empty() {
            self.save_and_show(lease, reply, position).await?;
        }
        Ok(asked)
    }

    /// A turn that stops while calls wait for input (a question of the step dismissed or
    /// withdrawn): each call's request is cancelled (in the background: the call then ends) and
    /// its part says so.
    pub(super) fn cancel_elicited(
        &self,
        reply: &mut UiMessage,
        lease: &Lease,
        platform: Option<&str>,
    ) {
        let extra = self.step_tools(platform);
        let UiMessage {
            parts,
            metadata,
            id,
            ..
        } = reply;
        for part in parts.iter_mut() {
            let MessagePart::Tool(t) = part else { continue };
            if t.state != ToolState::InputAvailable {
                continue;
            }
            let Some(e) = metadata.elicitations.get_mut(&t.tool_call_id) else {
                continue;
            };
            e.descriptor = None;
            e.outcome = None;
            t.state = ToolState::OutputError;
            t.error_text = Some(ELICITATION_STOPPED_TEXT.into());
            if let Some(tool) = self.find_tool(&t.tool_name, &extra).cloned() {
                let ctx = super::call_context(lease, id, &t.tool_call_id);
                tokio::spawn(async move {
                    let answer = ToolAnswer::Cancelled {
                        reason: "the turn stopped".into(),
                    };
                    // A call that asks again is cancelled again, until it ends.
                    for _ in 0..MAX_REFUSED {
                        match tool.resume(answer.clone(), ctx.clone()).await {
                            Ok(ToolStep::Ask(_)) => continue,
                            Ok(ToolStep::Done(_)) => break,
                            Err(e) => {
                                debug!(error = %e, "a cancelled call that waited for input ended");
                                break;
                            }
                        }
                    }
                });
            }
        }
    }
}
