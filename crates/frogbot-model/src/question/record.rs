//! A question call as stored and as the hooks see it: how it ended ([`QuestionOutcome`], with
//! its wire shape), its platform messages and progress ([`QuestionRecord`]), changes to them, and
//! the call itself ([`QuestionCall`]).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::{QuestionInput, QuestionOutput};

/// How a question call ended: `{output}` for an answer, `{dismissed: true}`, `{expired: true, output?}`
/// (the defaults, when every question had one), `{cancelled: true}`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuestionOutcome {
    /// Answered.
    Answered(QuestionOutput),
    /// Dismissed by a participant: the turn stops.
    Dismissed,
    /// The question set expired; `Some` carries the default answers.
    Expired(Option<QuestionOutput>),
    /// Withdrawn by the agent or the app.
    Cancelled,
}

impl QuestionOutcome {
    /// The output the agent continues with, if the outcome carries one.
    pub fn output(&self) -> Option<&QuestionOutput> {
        match self {
            QuestionOutcome::Answered(o) | QuestionOutcome::Expired(Some(o)) => Some(o),
            _ => None,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct OutcomeWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    output: Option<QuestionOutput>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    dismissed: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    expired: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    cancelled: bool,
}

impl Serialize for QuestionOutcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut w = OutcomeWire {
            output: None,
            dismissed: false,
            expired: false,
            cancelled: false,
        };
        match self {
            QuestionOutcome::Answered(o) => w.output = Some(o.clone()),
            QuestionOutcome::Dismissed => w.dismissed = true,
            QuestionOutcome::Expired(o) => {
                w.expired = true;
                w.output = o.clone();
            }
            QuestionOutcome::Cancelled => w.cancelled = true,
        }
        w.serialize(s)
    }
}

impl<'de> Deserialize<'de> for QuestionOutcome {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = OutcomeWire::deserialize(d)?;
        Ok(match (w.dismissed, w.expired, w.cancelled, w.output) {
            (true, false, false, None) => QuestionOutcome::Dismissed,
            (false, true, false, o) => QuestionOutcome::Expired(o),
            (false, false, true, None) => QuestionOutcome::Cancelled,
            (false, false, false, Some(o)) => QuestionOutcome::Answered(o),
            _ => {
                return Err(serde::de::Error::custom(
                    "an outcome is {output}, {dismissed: true}, {expired: true, output?} or {cancelled: true}",
                ));
            }
        })
    }
}

/// One platform message that belongs to a question call.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionMessage {
    /// The platform's message id.
    pub id: String,
    /// When the platform posted it (RFC 3339), or `""` when the platform does not say: FrogBot then
    /// fills in the time it saved the message.
    #[serde(default)]
    pub posted_at: String,
    /// Index into `input.questions`, for a platform that posts one message per question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<usize>,
}

/// What every hook after `render` sees of a question call. `messages` is never empty; its last entry
/// is the current message, the one whose controls count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuestionRecord {
    /// Every platform message of the call, oldest first.
    pub messages: Vec<QuestionMessage>,
    /// 0 when posted, one higher each time `parse` returns `partial`.
    pub revision: u64,
    /// The piece's own progress (JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
}

impl QuestionRecord {
    /// The current message (the last one).
    pub fn current(&self) -> Option<&QuestionMessage> {
        self.messages.last()
    }
}

/// A change returned by `updated` or `settled`: `messages` replaces the whole list, `state` replaces
/// the stored state; an absent field keeps what is stored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QuestionChange {
    /// The new message list (must not be empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<QuestionMessage>>,
    /// The new state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
}

/// A question call as the hooks see it: its id and validated input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionCall {
    /// The tool call id.
    pub tool_call_id: String,
    /// The validated input.
    pub input: QuestionInput,
    /// When the set stops accepting answers (RFC 3339), for a set with `expiresInSeconds`: a
    /// card shows it ([`open_until_text`](super::open_until_text)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::super::tests::out;
    use super::*;
    use serde_json::json;

    #[test]
    fn outcomes_have_the_wire_shapes() {
        let o = QuestionOutcome::Answered(out([&["prod"], &["a"], &["none"]]));
        let v = serde_json::to_value(&o).unwrap();
        assert!(v.get("output").is_some());
        assert_eq!(
            serde_json::to_value(QuestionOutcome::Dismissed).unwrap(),
            json!({"dismissed": true})
        );
        assert_eq!(
            serde_json::to_value(QuestionOutcome::Cancelled).unwrap(),
            json!({"cancelled": true})
        );
        for o in [
            o,
            QuestionOutcome::Dismissed,
            QuestionOutcome::Cancelled,
            QuestionOutcome::Expired(None),
        ] {
            let back: QuestionOutcome =
                serde_json::from_value(serde_json::to_value(&o).unwrap()).unwrap();
            assert_eq!(back, o);
        }
        assert!(
            serde_json::from_value::<QuestionOutcome>(
                json!({"dismissed": true, "cancelled": true})
            )
            .is_err()
        );
    }
}
