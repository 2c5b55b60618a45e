//! Asks: a question any program puts to a person (`POST /api/asks`, `frogbot ask`) and waits on.
//!
//! An ask is an ordinary turn, so it keeps every rule of the question engine (first answer wins,
//! access, expiry, restarts, delivery to a channel thread): the asker's message carries the input
//! in a `data-ask` part and selects the built-in model [`ASK_MODEL`], whose one step calls the
//! question tool with that input under the call id [`ask_call_id`]; after the outcome it ends
//! without text. The ask's id is its chat and message ([`AskId`]); its status is read back from
//! the question record while it lives, then from the reply's tool part ([`AskStatus`]).
//!
//! An ask to a platform goes to the thread the channel's `ChannelOutbox::ask_thread` names (by
//! default the thread given), sent as that thread's message, so the channel draws and reads it like
//! any question. An adapter that starts a thread (in a channel, or in a person's direct
//! conversation) posts the ask's text as its root, idempotent on the ask's key (its message id, the
//! same for every retry of one `idempotencyKey`), so a retry after a lost response finds the same
//! thread: Slack opens a user's DM with `conversations.open` and marks the root with `frogbot_ask`
//! message metadata, found again in the channel's recent `conversations.history`; Discord tells
//! threads and DMs (asked as they are) from text channels with `GET /channels/{id}`, posts the root
//! with a nonce from the key (`enforce_nonce`) and starts a public thread on it (`160004` on a
//! retry means it exists), and asks a user in their DM channel; Matrix posts the root with a
//! transaction id from the key and finds or creates a user's direct room; Telegram asks a user in
//! their private chat. A withdrawal (`DELETE`) that loses the race to an answer or another
//! withdrawal is told so (`engine.questions().withdraw` is `false`). The question's deadline is
//! written on the waiting tool part (`expiresAt`) and given to the hooks
//! (`QuestionCall::expires_at`).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::scripted::{ScriptEvent, ScriptedModel, call, finish};
use super::{FinishReason, ModelMessage};
use crate::model::{
    Actor, ChatId, MessagePart, QUESTION_TOOL, QuestionInput, QuestionOutcome, QuestionOutput,
    ToolState, UiMessage,
};
use crate::store::{QUESTION_DISMISSED_TEXT, QUESTION_WITHDRAWN_TEXT};

/// The id of the built-in model that runs asks.
pub const ASK_MODEL: &str = crate::store::ASK_MODEL;

/// The type of the part that carries an ask's input in the asker's message.
pub const ASK_PART: &str = "data-ask";

/// The line that gives the input to the ask model (and tells any other model of the chat what
/// was asked) at the end of the asker's message as models read it.
const ASK_LINE: &str = "\nask-input: ";

/// The question call id of the ask sent as message `message_id`.
pub fn ask_call_id(message_id: &str) -> String {
    format!("ask_{message_id}")
}

/// An ask's id: `{chatId}.{messageId}` (neither contains a dot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AskId {
    /// The chat.
    pub chat: ChatId,
    /// The asker's message.
    pub message: String,
}

impl AskId {
    /// Reads `{chatId}.{messageId}`; `None` for anything else.
    pub fn parse(s: &str) -> Option<AskId> {
        // Both halves follow the chat id rules (message ids share them), so neither has a dot.
        let (chat, message) = s.split_once('.')?;
        ChatId::new(message).ok()?;
        Some(AskId {
            chat: ChatId::new(chat).ok()?,
            message: message.to_owned(),
        })
    }
}

impl std::fmt::Display for AskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.chat, self.message)
    }
}

/// The parts of an asker's message: the text people read, then the input.
pub fn ask_parts(text: &str, input: &QuestionInput, message_id: &str) -> Vec<MessagePart> {
    vec![
        MessagePart::text(text),
        MessagePart::Other(json!({
            "type": ASK_PART,
            "data": {"callId": ask_call_id(message_id), "input": input},
        })),
    ]
}

/// The parts of a model picker's message (`model` alone in a thread that draws questions): an
/// ask whose call id starts with [`crate::model::MODEL_PICK_CALL`], so its answer chooses the
/// chat's model ([`UiMessage::model_choice`]).
pub fn pick_parts(text: &str, input: &QuestionInput, message_id: &str) -> Vec<MessagePart> {
    vec![
        MessagePart::text(text),
        MessagePart::Other(json!({
            "type": ASK_PART,
            "data": {"callId": format!("{}{message_id}", crate::model::MODEL_PICK_CALL), "input": input},
        })),
    ]
}

/// The input an asker's message carries, with its call id.
pub fn ask_input(m: &UiMessage) -> Option<(String, QuestionInput)> {
    m.parts.iter().find_map(|p| match p {
        MessagePart::Other(v) if v.get("type").and_then(Value::as_str) == Some(ASK_PART) => {
            let data = v.get("data")?;
            let id = data.get("callId")?.as_str()?.to_owned();
            let input = serde_json::from_value(data.get("input")?.clone()).ok()?;
            Some((id, input))
        }
        _ => None,
    })
}

/// What models read of an asker's message after its text (empty for any other message).
pub(crate) fn ask_line(m: &UiMessage) -> String {
    match ask_input(m) {
        Some((id, input)) => format!("{ASK_LINE}{}", json!({"callId": id, "input": input})),
        None => String::new(),
    }
}

/// The built-in model of asks: its first step calls the question tool with the input of the
/// asker's message; once the call has its outcome it ends without text. A message that is no ask
/// gets a short explanation.
pub fn ask_model() -> ScriptedModel {
    ScriptedModel::without_log(|req| {
        if let Some(ModelMessage::Tool {
            tool_call_id,
            content,
            is_error,
            ..
        }) = req.messages.last()
        {
            // A model picker's answer: said back as `model ID` is.
            let picked = (tool_call_id.starts_with(crate::model::MODEL_PICK_CALL) && !is_error)
                .then(|| serde_json::from_str::<QuestionOutput>(content).ok())
                .flatten()
                .and_then(|o| o.answers.into_iter().next())
                .and_then(|a| a.selected.into_iter().next())
                .and_then(|l| crate::model::parse_model_pick_label(&l));
            return match picked {
                Some((m, r)) => {
                    super::scripted::reply(&crate::model::model_choice_text(&m, r.as_deref()))
                }
                None => vec![finish(FinishReason::Stop)],
            };
        }
        let last = req.messages.iter().rev().find_map(|m| match m {
            ModelMessage::User { text } => Some(text.as_str()),
            _ => None,
        });
        let asked = last
            .and_then(|t| t.rsplit_once(ASK_LINE))
            .and_then(|(_, line)| serde_json::from_str::<Value>(line).ok());
        match asked {
            Some(v) => match (v["callId"].as_str(), v.get("input")) {
                (Some(id), Some(input)) => call(id, QUESTION_TOOL, input.clone()),
                _ => not_an_ask(),
            },
            None => not_an_ask(),
        }
    })
}

fn not_an_ask() -> Vec<ScriptEvent> {
    super::scripted::reply("This model only runs asks (POST /api/asks).")
}

/// Where an ask stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AskState {
    /// Waiting behind another turn of its chat.
    Queued,
    /// Posted, waiting for an answer.
    Open,
    /// Answered.
    Answered,
    /// Expired (with the defaults as its answer, when every required input had one).
    Expired,
    /// Withdrawn by the asker (or the app).
    Cancelled,
    /// Skipped by the person.
    Dismissed,
}

impl AskState {
    /// Whether the ask is over.
    pub fn is_final(self) -> bool {
        !matches!(self, AskState::Queued | AskState::Open)
    }
}

/// An ask as `GET /api/asks/{id}` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AskStatus {
    /// `{chatId}.{messageId}`.
    pub id: String,
    /// The chat it was asked in.
    pub chat_id: String,
    /// Where it stands.
    pub state: AskState,
    /// The inputs.
    pub input: QuestionInput,
    /// When it stops accepting answers (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// The answers (`answered`, or `expired` with defaults).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answers: Option<QuestionOutput>,
    /// The answers as typed values by header (see `QuestionInput::values`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub values: Option<serde_json::Map<String, Value>>,
    /// Whether the answers are the inputs' defaults (it expired).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub defaulted: bool,
    /// Who answered, where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<Actor>,
    /// Who asked (`None`: an anonymous caller).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asked_by: Option<crate::model::UserId>,
    /// The assistant message that holds the question, once posted.
    #[serde(skip)]
    pub reply_id: Option<String>,
}

impl AskStatus {
    /// Reads an ask from its chat's messages (in stored order) and, while it lives, its question
    /// record's outcome; `None` when the chat has no such asker's message.
    pub(crate) fn read(
        id: &AskId,
        messages: &[UiMessage],
        record: Option<(Option<QuestionOutcome>, Option<Actor>)>,
    ) -> Option<AskStatus> {
        let at = messages.iter().position(|m| m.id == id.message)?;
        let (call_id, input) = ask_input(&messages[at])?;
        let queued = messages[at].metadata.status.is_some();
        let reply = messages[at + 1..]
            .iter()
            .find(|m| m.tool_parts().any(|t| t.tool_call_id == call_id));
        let part = reply.and_then(|m| m.tool_parts().find(|t| t.tool_call_id == call_id));
        let mut status = AskStatus {
            id: id.to_string(),
            chat_id: id.chat.to_string(),
            state: if queued || part.is_none() {
                AskState::Queued
            } else {
                AskState::Open
            },
            input,
            expires_at: part.and_then(|p| p.expires_at.clone()),
            answers: None,
            values: None,
            defaulted: false,
            by: None,
            asked_by: messages[at].metadata.author.clone(),
            reply_id: reply.map(|m| m.id.clone()),
        };
        let outcome = match record {
            Some((Some(outcome), actor)) => {
                status.by = actor.filter(|a| a.user.is_some() || a.identity.is_some());
                Some(outcome)
            }
            Some((None, _)) => None,
            // The record is gone (24 hours after its outcome): the tool part says how it ended.
            None => part.and_then(|p| match p.state {
                ToolState::InputAvailable
                | ToolState::ApprovalRequested
                | ToolState::ApprovalResponded
                | ToolState::OutputDenied => None,
                ToolState::OutputAvailable => p
                    .output
                    .clone()
                    .and_then(|o| serde_json::from_value(o).ok())
                    .map(QuestionOutcome::Answered),
                // The texts `fill_question_part` wrote.
                ToolState::OutputError => Some(match p.error_text.as_deref() {
                    Some(QUESTION_DISMISSED_TEXT) => QuestionOutcome::Dismissed,
                    Some(QUESTION_WITHDRAWN_TEXT) => QuestionOutcome::Cancelled,
                    _ => QuestionOutcome::Expired(None),
                }),
            }),
        };
        if let Some(outcome) = outcome {
            status.state = match &outcome {
                QuestionOutcome::Answered(_) => AskState::Answered,
                QuestionOutcome::Expired(_) => AskState::Expired,
                QuestionOutcome::Dismissed => AskState::Dismissed,
                _ => AskState::Cancelled,
            };
            status.defaulted = matches!(outcome, QuestionOutcome::Expired(Some(_)));
            if let Some(o) = outcome.output() {
                status.values = Some(status.input.values(o));
                status.answers = Some(o.clone());
            }
        }
        Some(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ask_ids_round_trip_and_refuse_junk() {
        let id = AskId::parse("chat-1.ask_x").unwrap();
        assert_eq!(id.chat.as_str(), "chat-1");
        assert_eq!(id.to_string(), "chat-1.ask_x");
        for bad in ["", ".", "a.", ".b", "a.b.c", "a b.c", "a/b.c", "a"] {
            assert_eq!(AskId::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_ask_model_calls_the_question_tool_with_the_input() {
        let input: QuestionInput = serde_json::from_value(json!({"questions": [
            {"header": "Go", "question": "Deploy?", "kind": "confirm"}]}))
        .unwrap();
        let m = UiMessage {
            id: "m1".into(),
            role: crate::model::Role::User,
            parts: ask_parts("Deploy?", &input, "m1"),
            metadata: Default::default(),
        };
        assert_eq!(ask_input(&m), Some(("ask_m1".into(), input.clone())));
        let line = ask_line(&m);
        assert!(line.starts_with(ASK_LINE), "{line}");
        let got: Value = serde_json::from_str(line.trim_start_matches(ASK_LINE)).unwrap();
        assert_eq!(got["callId"], "ask_m1");
        assert_eq!(
            serde_json::from_value::<QuestionInput>(got["input"].clone()).unwrap(),
            input
        );
    }
}
