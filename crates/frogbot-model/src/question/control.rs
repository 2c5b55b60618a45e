//! What a question control means, in one vocabulary for every adapter: [`QuestionControl`] (the
//! revision the control was drawn at, the question it belongs to, and its [`ControlAction`]).
//!
//! Each adapter keeps its own wire format for control ids (Discord's `fq:…` custom ids, Slack's
//! `fb1:…` action ids, Telegram's `q…` callback data, Matrix's `r{revision}o{option}` poll answer
//! ids and reaction keys) — stored questions and live buttons keep working — and reads them back
//! into this type with its `ids::read_control`. A bot built on an adapter's pure modules alone
//! (no FrogBot engine) then settles a one-tap question with [`QuestionControl::outcome`] instead
//! of decoding ids by hand.

use serde::{Deserialize, Serialize};

use super::{
    QuestionAnswer, QuestionInput, QuestionItem, QuestionOutcome, QuestionOutput, TOGGLE_OFF,
    TOGGLE_ON,
};
use crate::InputKind;

/// A question control read back from a platform: what the person pressed, picked or typed.
///
/// ```
/// use frogbot_model::{ControlAction, QuestionControl, QuestionInput, QuestionOutcome};
///
/// let input: QuestionInput = serde_json::from_value(serde_json::json!({"questions": [{
///     "header": "Env", "question": "Where?",
///     "options": [{"label": "staging"}, {"label": "prod"}]
/// }]}))
/// .unwrap();
/// // What an adapter's `ids::read_control` gives for a click on "prod", drawn at revision 0.
/// let click = QuestionControl::new(Some(0), Some(0), ControlAction::Option(1));
/// let Some(QuestionOutcome::Answered(output)) = click.outcome(&input, 0) else {
///     panic!("a one-tap answer");
/// };
/// assert_eq!(output.answers[0].selected, ["prod"]);
/// // A control drawn for an older revision settles nothing.
/// assert_eq!(click.outcome(&input, 1), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionControl {
    /// The question record's revision the control was drawn at; `None` when the platform's control
    /// carries none (a Matrix reaction).
    pub revision: Option<u64>,
    /// The index of the question in the call's input; `None` when the control does not name it
    /// (Matrix: the message it sits on does, [`QuestionMessage::question`](crate::QuestionMessage)).
    pub question: Option<usize>,
    /// What the control does.
    pub action: ControlAction,
}

/// What a question control does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ControlAction {
    /// The question's button (or poll answer, or keycap reaction) number `n`, from 0: option `n`
    /// of a choice (in a `multiple` choice it toggles the option, [`ControlAction::Submit`]
    /// answers); of a toggle drawn as two buttons 0 is on and 1 off; of a confirm 0 is its button.
    Option(usize),
    /// Picks these options at once, by index: a select menu or a poll response (empty: the vote
    /// was taken back).
    Options(Vec<usize>),
    /// The options now checked in a `multiple` choice's checkbox group (a change, not an answer:
    /// [`ControlAction::Submit`] answers).
    Check(Vec<usize>),
    /// Answers with what is held: a `multiple` choice's "Done" / "Submit", a set's "Send answers".
    Submit,
    /// "Skip": dismisses the whole call.
    Skip,
    /// Opens a form (a modal): the "Other…" own answer, or "Answer…", the text and number inputs.
    OpenForm,
    /// "No answer": answers an optional input with nothing.
    Clear,
    /// Presses a confirm's button, or turns a toggle on.
    Yes,
    /// Turns a toggle off.
    No,
    /// Switches a toggle shown in a set between on and off ([`ControlAction::Submit`] answers).
    Flip,
    /// A text field of a submitted form (its text comes with the submission).
    Text,
}

impl QuestionControl {
    /// A control drawn at `revision` for `question`, doing `action`.
    pub fn new(revision: Option<u64>, question: Option<usize>, action: ControlAction) -> Self {
        Self {
            revision,
            question,
            action,
        }
    }

    /// Whether the control belongs to revision `revision` of the record (a control that carries
    /// no revision always does).
    pub fn is_current(&self, revision: u64) -> bool {
        self.revision.is_none_or(|r| r == revision)
    }

    /// What this control alone answers `item` with (its `selected` values): an option of a
    /// one-choice question, a select's or poll's options, a toggle's on / off, a confirm's label,
    /// nothing for "No answer" on an optional input. `None` when it is no answer by itself (a
    /// toggle of a `multiple` choice, Submit, Skip, opening a form), or names no option of `item`.
    ///
    /// ```
    /// use frogbot_model::{ControlAction, InputKind, QuestionControl, QuestionItem};
    ///
    /// let toggle = QuestionItem { kind: InputKind::Toggle, ..Default::default() };
    /// let yes = QuestionControl::new(Some(0), Some(0), ControlAction::Yes);
    /// assert_eq!(yes.answer(&toggle), Some(vec!["on".to_string()]));
    /// ```
    pub fn answer(&self, item: &QuestionItem) -> Option<Vec<String>> {
        let label = |i: &usize| item.options.get(*i).map(|o| o.label.clone());
        match (&self.action, item.kind) {
            (ControlAction::Option(i), InputKind::Choice) if !item.multiple => {
                label(i).map(|l| vec![l])
            }
            (ControlAction::Options(picks), InputKind::Choice)
                if !picks.is_empty() && (item.multiple || picks.len() == 1) =>
            {
                picks.iter().map(label).collect()
            }
            (ControlAction::Option(i), InputKind::Toggle) if *i < 2 => {
                Some(vec![[TOGGLE_ON, TOGGLE_OFF][*i].to_owned()])
            }
            (ControlAction::Yes, InputKind::Toggle) => Some(vec![TOGGLE_ON.to_owned()]),
            (ControlAction::No, InputKind::Toggle) => Some(vec![TOGGLE_OFF.to_owned()]),
            (ControlAction::Option(0) | ControlAction::Yes, InputKind::Confirm) => {
                Some(vec![item.confirm_label().to_owned()])
            }
            (ControlAction::Clear, _) if !item.required => Some(Vec::new()),
            _ => None,
        }
    }

    /// The outcome this control settles `input` with by itself, the record being at `revision`:
    /// [`QuestionOutcome::Dismissed`] for Skip, [`QuestionOutcome::Answered`] for an
    /// [`answer`](Self::answer) to a set of one question. `None` for a control of another
    /// revision, and for anything that needs the progress FrogBot's question engine keeps (a set
    /// of several questions, a `multiple` choice's toggles, a form).
    pub fn outcome(&self, input: &QuestionInput, revision: u64) -> Option<QuestionOutcome> {
        if !self.is_current(revision) {
            return None;
        }
        if self.action == ControlAction::Skip {
            return Some(QuestionOutcome::Dismissed);
        }
        let [item] = input.questions.as_slice() else {
            return None;
        };
        if self.question.is_some_and(|q| q != 0) {
            return None;
        }
        let selected = self.answer(item)?;
        Some(QuestionOutcome::Answered(QuestionOutput {
            answers: vec![QuestionAnswer {
                header: item.header.clone(),
                selected,
            }],
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(item: serde_json::Value) -> QuestionInput {
        serde_json::from_value(json!({ "questions": [item] })).unwrap()
    }

    fn at(action: ControlAction) -> QuestionControl {
        QuestionControl::new(Some(2), Some(0), action)
    }

    fn selected(o: Option<QuestionOutcome>) -> Option<Vec<String>> {
        match o? {
            QuestionOutcome::Answered(out) => Some(out.answers[0].selected.clone()),
            _ => None,
        }
    }

    #[test]
    fn one_tap_controls_settle_a_one_question_set() {
        let choice = one(json!({"header": "E", "question": "?",
            "options": [{"label": "a"}, {"label": "b"}]}));
        assert_eq!(
            selected(at(ControlAction::Option(1)).outcome(&choice, 2)),
            Some(vec!["b".into()])
        );
        assert_eq!(
            selected(at(ControlAction::Options(vec![0])).outcome(&choice, 2)),
            Some(vec!["a".into()])
        );
        assert_eq!(
            at(ControlAction::Options(vec![0, 1])).outcome(&choice, 2),
            None
        );
        assert_eq!(at(ControlAction::Option(2)).outcome(&choice, 2), None);
        assert_eq!(at(ControlAction::Option(1)).outcome(&choice, 3), None);
        assert_eq!(
            at(ControlAction::Skip).outcome(&choice, 2),
            Some(QuestionOutcome::Dismissed)
        );
        assert_eq!(at(ControlAction::Skip).outcome(&choice, 1), None);
        // No revision (a Matrix reaction): current at any revision.
        let reaction = QuestionControl::new(None, None, ControlAction::Option(0));
        assert_eq!(
            selected(reaction.outcome(&choice, 9)),
            Some(vec!["a".into()])
        );
        let multiple = one(json!({"header": "E", "question": "?", "multiple": true,
            "options": [{"label": "a"}, {"label": "b"}]}));
        assert_eq!(at(ControlAction::Option(1)).outcome(&multiple, 2), None);
        assert_eq!(
            at(ControlAction::Check(vec![0, 1])).outcome(&multiple, 2),
            None
        );
        assert_eq!(at(ControlAction::Submit).outcome(&multiple, 2), None);
        assert_eq!(
            selected(at(ControlAction::Options(vec![1, 0])).outcome(&multiple, 2)),
            Some(vec!["b".into(), "a".into()])
        );
    }

    #[test]
    fn toggles_confirms_and_optional_inputs() {
        let toggle = one(json!({"header": "T", "question": "?", "kind": "toggle"}));
        for (action, want) in [
            (ControlAction::Option(0), "on"),
            (ControlAction::Option(1), "off"),
            (ControlAction::Yes, "on"),
            (ControlAction::No, "off"),
        ] {
            assert_eq!(
                selected(at(action).outcome(&toggle, 2)),
                Some(vec![want.into()])
            );
        }
        let confirm =
            one(json!({"header": "C", "question": "?", "kind": "confirm", "label": "Go"}));
        assert_eq!(
            selected(at(ControlAction::Yes).outcome(&confirm, 2)),
            Some(vec!["Go".into()])
        );
        assert_eq!(at(ControlAction::No).outcome(&confirm, 2), None);
        let text = one(json!({"header": "W", "question": "?", "kind": "text_input",
            "required": false}));
        assert_eq!(
            selected(at(ControlAction::Clear).outcome(&text, 2)),
            Some(vec![])
        );
        assert_eq!(at(ControlAction::OpenForm).outcome(&text, 2), None);
        let two: QuestionInput = serde_json::from_value(json!({"questions": [
            {"header": "A", "question": "?", "options": [{"label": "a"}]},
            {"header": "B", "question": "?", "options": [{"label": "b"}]}
        ]}))
        .unwrap();
        assert_eq!(at(ControlAction::Option(0)).outcome(&two, 2), None);
        assert_eq!(
            at(ControlAction::Option(0)).answer(&two.questions[1]),
            Some(vec!["b".into()])
        );
    }

    #[test]
    fn serde_names() {
        let c = at(ControlAction::Options(vec![1]));
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(
            v,
            json!({"revision": 2, "question": 0, "action": {"options": [1]}})
        );
        assert_eq!(serde_json::from_value::<QuestionControl>(v).unwrap(), c);
    }
}
