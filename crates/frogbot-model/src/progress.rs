//! The multi-step progress of a question set answered one question at a time, as every adapter
//! keeps it in the record's `state`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{QuestionInput, QuestionOutput, QuestionRecord};

/// How far a participant got through a question set: the answer of each question once given, the
/// options checked (not yet submitted) on `multiple` questions, and prompt messages an adapter
/// posted for the set. Kept as JSON in [`QuestionRecord::state`]; a missing or unreadable state
/// reads as the start.
///
/// Older states read too: `toggled` is read as `checked`, and a `step` field is ignored (the step
/// is the first unanswered question).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Per question: the chosen labels (or the person's own text), once given.
    #[serde(default)]
    pub picks: Vec<Option<Vec<String>>>,
    /// Per question: the option indices checked so far on a `multiple` question.
    #[serde(default, alias = "toggled")]
    pub checked: Vec<Vec<usize>>,
    /// Ids of prompt messages the adapter posted for the set (e.g. a reply prompt without
    /// controls), so a later hook can find or close them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<String>,
    /// Per question (its index as a string): the revision of the set its controls were last
    /// drawn at, where an adapter keeps controls drawn at an earlier revision (Matrix keeps a
    /// multiple-choice poll with a selection as it is across steps, so the selection the
    /// person's client shows is not lost, and takes its answers at that revision).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub drawn: std::collections::BTreeMap<String, u64>,
}

impl Progress {
    /// The progress in `state`, sized for `input`'s questions.
    pub fn from_state(input: &QuestionInput, state: Option<&Value>) -> Progress {
        let mut p: Progress = state
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .unwrap_or_default();
        let n = input.questions.len();
        p.picks.resize(n, None);
        p.checked.resize(n, Vec::new());
        p
    }

    /// The progress kept in `record`, sized for `input`.
    pub fn of(input: &QuestionInput, record: &QuestionRecord) -> Progress {
        Progress::from_state(input, record.state.as_ref())
    }

    /// As the record's state.
    pub fn to_state(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The question being asked: the first without an answer (`None` once all have one).
    pub fn step(&self) -> Option<usize> {
        self.picks.iter().position(Option::is_none)
    }

    /// Records the answer of question `q` (ignored when `q` is out of range).
    pub fn pick(&mut self, q: usize, selected: Vec<String>) {
        if let Some(p) = self.picks.get_mut(q) {
            *p = Some(selected);
        }
    }

    /// Checks option `o` of question `q`, or unchecks it when checked (kept sorted).
    pub fn toggle(&mut self, q: usize, o: usize) {
        let Some(t) = self.checked.get_mut(q) else {
            return;
        };
        if let Some(i) = t.iter().position(|&x| x == o) {
            t.remove(i);
        } else {
            t.push(o);
            t.sort_unstable();
        }
    }

    /// The options checked on question `q`.
    pub fn checked(&self, q: usize) -> &[usize] {
        self.checked.get(q).map_or(&[], Vec::as_slice)
    }

    /// The set's answer once every question has one.
    pub fn output(&self, input: &QuestionInput) -> Option<QuestionOutput> {
        input.output_from_picks(&self.picks)
    }

    /// What `parse` returns after a step: the answer once every question has one, else a partial
    /// answer that saves this progress.
    pub fn parse_result(&self, input: &QuestionInput) -> crate::ParseResult {
        match self.output(input) {
            Some(output) => crate::ParseResult::Answer { output },
            None => crate::ParseResult::Partial {
                state: Some(self.to_state()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(n: usize) -> QuestionInput {
        serde_json::from_value(json!({
            "questions": (0..n).map(|i| json!({
                "header": format!("H{i}"), "question": "?",
                "options": [{"label": "a"}, {"label": "b"}], "multiple": true
            })).collect::<Vec<_>>()
        }))
        .unwrap()
    }

    #[test]
    fn a_fresh_progress_starts_at_the_first_question() {
        let p = Progress::from_state(&input(3), None);
        assert_eq!(p.step(), Some(0));
        assert_eq!(p.picks.len(), 3);
        assert!(p.output(&input(3)).is_none());
    }

    #[test]
    fn picks_move_the_step_and_complete_the_set() {
        let i = input(2);
        let mut p = Progress::from_state(&i, None);
        p.pick(0, vec!["a".into()]);
        assert_eq!(p.step(), Some(1));
        p.toggle(1, 1);
        p.toggle(1, 0);
        assert_eq!(p.checked(1), &[0, 1]);
        p.toggle(1, 1);
        assert_eq!(p.checked(1), &[0]);
        p.pick(1, vec!["a".into()]);
        assert_eq!(p.step(), None);
        let out = p.output(&i).unwrap();
        assert_eq!(out.answers[1].header, "H1");
        // Round trip through the record's state.
        let back = Progress::from_state(&i, Some(&p.to_state()));
        assert_eq!(back, p);
    }

    #[test]
    fn older_adapter_states_still_read() {
        let i = input(3);
        // Discord's `{step, picks}` and Telegram's `toggled`.
        let d = Progress::from_state(&i, Some(&json!({"step": 1, "picks": [["b"]]})));
        assert_eq!(d.step(), Some(1));
        assert_eq!(d.picks[0], Some(vec!["b".to_owned()]));
        let t = Progress::from_state(
            &i,
            Some(&json!({"picks": [null], "toggled": [[1]], "prompts": ["m"]})),
        );
        assert_eq!(t.checked(0), &[1]);
        assert_eq!(t.prompts, vec!["m"]);
        // Garbage reads as the start.
        assert_eq!(Progress::from_state(&i, Some(&json!(42))).step(), Some(0));
    }

    #[test]
    fn out_of_range_indices_change_nothing() {
        let mut p = Progress::from_state(&input(1), None);
        p.pick(5, vec![]);
        p.toggle(5, 0);
        assert_eq!(p, Progress::from_state(&input(1), None));
    }
}
