//! Elicitations: a tool call that asks the person driving the turn for input while it runs (an
//! MCP server's `elicitation/create`). The request is asked as a question (so every channel
//! draws it with its question hooks and every rule of questions holds: first answer wins, `from`
//! access, expiry, stale clicks); the call waits, its part `input-available`, and continues with
//! the outcome when the turn does. Its state is kept in its message's metadata
//! ([`crate::MessageMetadata::elicitations`], by call id).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::question::{QuestionInput, QuestionOutcome};

/// A call's elicitation: the question it asked (while it waits) and its outcome (until the call
/// continued with it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolElicitation {
    /// The question record's id, `{call}~{n}` for the call's n-th question ([`elicitation_id`]).
    pub id: String,
    /// How many questions the call has asked so far (1 for the first).
    pub asked: u32,
    /// While it waits: the question put to the person (a [`QuestionInput`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptor: Option<Value>,
    /// Once settled: its outcome, until the call has continued with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<QuestionOutcome>,
}

impl ToolElicitation {
    /// The question this elicitation asks, read back from `descriptor`.
    pub fn question(&self) -> Option<QuestionInput> {
        QuestionInput::of_descriptor(self.descriptor.as_ref())
    }

    /// Whether it still waits for an answer.
    pub fn waiting(&self) -> bool {
        self.descriptor.is_some()
    }
}

/// The question record id of the `n`-th question (from 1) a call asks. Question records are keyed
/// by id per chat: the call's own id may hold its approval's record, and a call that asks again
/// needs a fresh one.
pub fn elicitation_id(call_id: &str, n: u32) -> String {
    format!("{call_id}~{n}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_and_names_its_records() {
        let e = ToolElicitation {
            id: elicitation_id("c1", 2),
            asked: 2,
            descriptor: Some(
                json!({"questions": [{"header": "a", "question": "b", "kind": "text_input"}]}),
            ),
            outcome: None,
        };
        assert_eq!(e.id, "c1~2");
        assert_eq!(elicitation_id("c1", 1), "c1~1");
        assert!(e.waiting());
        assert_eq!(e.question().unwrap().questions[0].header, "a");
        let back: ToolElicitation =
            serde_json::from_value(serde_json::to_value(&e).unwrap()).unwrap();
        assert_eq!(back, e);
        let done = ToolElicitation {
            descriptor: None,
            outcome: Some(QuestionOutcome::Dismissed),
            ..e
        };
        assert_eq!(
            serde_json::to_value(&done).unwrap(),
            json!({"id": "c1~2", "asked": 2, "outcome": {"dismissed": true}})
        );
    }
}
