//! Whether a question input and its answers are valid, and building outputs:
//! [`QuestionInput::validate`], [`QuestionInput::check_output`], defaults on expiry, typed values,
//! and who may answer.

use std::collections::HashSet;

use serde_json::Value;

use super::{
    InputKind, MAX_EXPIRES_IN_SECONDS, QuestionAnswer, QuestionInput, QuestionItem, QuestionOutput,
    TEXT_INPUT_MAX, TOGGLE_OFF, TOGGLE_ON,
};

impl QuestionItem {
    pub(super) fn check_text(&self, text: &str) -> Result<(), String> {
        if text.trim().is_empty() {
            return Err("the answer text is empty".into());
        }
        let limit = self.text_limit();
        if text.chars().count() > limit as usize {
            return Err(format!("the text is longer than {limit} characters"));
        }
        Ok(())
    }

    /// The default as an answer's `selected`, normalised for the kind (a number as
    /// [`Self::read_number`] writes it, `true` of a confirm as its label); as given where it does
    /// not read, so [`QuestionInput::validate`] reports it.
    pub fn default_answer(&self) -> Option<Vec<String>> {
        let d = self.default.clone()?;
        Some(match (self.kind, d.as_slice()) {
            (InputKind::NumberInput, [n]) => {
                vec![self.read_number(n).unwrap_or_else(|_| n.clone())]
            }
            (InputKind::Toggle, [t]) => {
                vec![self.read_toggle(t).map_or_else(|| t.clone(), str::to_owned)]
            }
            (InputKind::Confirm, [t])
                if ["on", "true", "yes"]
                    .iter()
                    .any(|w| t.eq_ignore_ascii_case(w)) =>
            {
                vec![self.confirm_label().to_owned()]
            }
            _ => d,
        })
    }

    /// The answer as a typed JSON value: a choice's label (an array where `multiple`), the text,
    /// the number, `true`/`false` for a toggle, `true` for a confirm; `null` when unanswered.
    pub fn value_of(&self, selected: &[String]) -> Value {
        let Some(first) = selected.first() else {
            return Value::Null;
        };
        match self.kind {
            InputKind::Choice if self.multiple => {
                Value::Array(selected.iter().cloned().map(Value::String).collect())
            }
            InputKind::Choice | InputKind::TextInput => Value::String(first.clone()),
            InputKind::NumberInput => first
                .parse::<i64>()
                .map(Value::from)
                .or_else(|_| first.parse::<f64>().map(Value::from))
                .unwrap_or_else(|_| Value::String(first.clone())),
            InputKind::Toggle => Value::Bool(first == TOGGLE_ON),
            InputKind::Confirm => Value::Bool(true),
        }
    }
}

impl QuestionInput {
    /// The output once every question has its pick (`picks[i]`: the labels or own text chosen for
    /// question `i`); `None` while one is still unanswered.
    pub fn output_from_picks(&self, picks: &[Option<Vec<String>>]) -> Option<QuestionOutput> {
        if picks.len() < self.questions.len() {
            return None;
        }
        let answers = self
            .questions
            .iter()
            .zip(picks)
            .map(|(q, p)| {
                p.clone().map(|selected| QuestionAnswer {
                    header: q.header.clone(),
                    selected,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(QuestionOutput { answers })
    }

    /// Checks the input before anything is posted. The reason names the offending question.
    pub fn validate(&self) -> Result<(), String> {
        if self.questions.is_empty() {
            return Err("`questions` must hold at least one question".into());
        }
        let mut headers = HashSet::new();
        for (i, q) in self.questions.iter().enumerate() {
            let n = i + 1;
            if q.header.trim().is_empty() {
                return Err(format!("question {n}: `header` is empty"));
            }
            if !headers.insert(q.header.as_str()) {
                return Err(format!("question {n}: header {:?} is used twice", q.header));
            }
            if q.question.trim().is_empty() {
                return Err(format!("question {n}: `question` is empty"));
            }
            match q.kind {
                InputKind::Choice => {
                    if q.options.is_empty() && !q.custom {
                        return Err(format!("question {n}: give `options` or set `custom`"));
                    }
                }
                kind => {
                    if !q.options.is_empty() || q.multiple || q.custom {
                        return Err(format!(
                            "question {n}: `options`, `multiple` and `custom` are for choice inputs, not {}",
                            kind.as_str()
                        ));
                    }
                }
            }
            match q.kind {
                InputKind::TextInput => match q.max_length {
                    Some(0) => return Err(format!("question {n}: `maxLength` must be positive")),
                    Some(m) if m > TEXT_INPUT_MAX => {
                        return Err(format!(
                            "question {n}: `maxLength` must be at most {TEXT_INPUT_MAX}"
                        ));
                    }
                    _ => {}
                },
                InputKind::NumberInput => {
                    let f = |x: &Option<serde_json::Number>| x.as_ref().and_then(|v| v.as_f64());
                    if let (Some(a), Some(b)) = (f(&q.min), f(&q.max))
                        && a > b
                    {
                        return Err(format!("question {n}: `min` is above `max`"));
                    }
                    if f(&q.step).is_some_and(|s| s <= 0.0) {
                        return Err(format!("question {n}: `step` must be positive"));
                    }
                }
                InputKind::Confirm if q.label.as_deref().is_some_and(|l| l.trim().is_empty()) => {
                    return Err(format!("question {n}: `label` is empty"));
                }
                _ => {}
            }
            let mut labels = HashSet::new();
            for o in &q.options {
                if o.label.trim().is_empty() {
                    return Err(format!("question {n}: an option has an empty label"));
                }
                if !labels.insert(o.label.as_str()) {
                    return Err(format!(
                        "question {n}: option {:?} is listed twice",
                        o.label
                    ));
                }
            }
            if let Some(default) = q.default_answer() {
                check_selection(q, &default).map_err(|e| format!("question {n}: default: {e}"))?;
            }
        }
        if !self.blocks.is_empty() {
            let blocks = crate::blocks::Block::list_from_json(&Value::Array(self.blocks.clone()))
                .map_err(|e| format!("`blocks`: {e}"))?;
            if blocks.iter().any(|b| !b.events.is_empty()) {
                return Err(
                    "`blocks`: a question's blocks carry no event buttons (its inputs are what a person answers)"
                        .into(),
                );
            }
        }
        match self.expires_in_seconds {
            Some(0) => return Err("`expiresInSeconds` must be positive".into()),
            Some(s) if s > MAX_EXPIRES_IN_SECONDS => {
                return Err(format!(
                    "`expiresInSeconds` must be at most {MAX_EXPIRES_IN_SECONDS} (one year)"
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// Checks that an output answers this input: one answer per question, in order, by header;
    /// labels that exist; one label unless `multiple`; own text only where `custom`.
    pub fn check_output(&self, output: &QuestionOutput) -> Result<(), String> {
        if output.answers.len() != self.questions.len() {
            return Err(format!(
                "expected {} answer(s), one per question, got {}",
                self.questions.len(),
                output.answers.len()
            ));
        }
        for (q, a) in self.questions.iter().zip(&output.answers) {
            if q.header != a.header {
                return Err(format!(
                    "answer for {:?} given where {:?} was asked",
                    a.header, q.header
                ));
            }
            check_selection(q, &a.selected).map_err(|e| format!("{:?}: {e}", q.header))?;
        }
        Ok(())
    }

    /// The answer on expiry, input by input: each input's default; an optional input without
    /// one answers nothing (`selected: []`). `None` (expired without an answer) when a required
    /// input has no default, or when no input has one.
    pub fn default_output(&self) -> Option<QuestionOutput> {
        let answers = self
            .questions
            .iter()
            .map(|q| match q.default_answer() {
                Some(selected) => Some(QuestionAnswer {
                    header: q.header.clone(),
                    selected,
                }),
                None if !q.required => Some(QuestionAnswer {
                    header: q.header.clone(),
                    selected: Vec::new(),
                }),
                None => None,
            })
            .collect::<Option<Vec<_>>>()?;
        if answers.iter().all(|a| a.selected.is_empty()) {
            return None;
        }
        Some(QuestionOutput { answers })
    }

    /// Whether `actor` may answer: `from` is empty, or names the actor's FrogBot user or its
    /// channel identity (`platform:user`).
    pub fn allows(&self, actor: Option<&crate::Actor>) -> bool {
        if self.from.is_empty() {
            return true;
        }
        let Some(actor) = actor else { return false };
        let user = actor.user.as_ref().map(|u| u.as_str().to_owned());
        let identity = actor
            .identity
            .as_ref()
            .map(|i| format!("{}:{}", i.platform, i.user.id));
        self.from
            .iter()
            .any(|f| Some(f) == user.as_ref() || Some(f) == identity.as_ref())
    }

    /// The answers as typed values by header (see [`QuestionItem::value_of`]).
    pub fn values(&self, output: &QuestionOutput) -> serde_json::Map<String, Value> {
        self.questions
            .iter()
            .zip(&output.answers)
            .map(|(q, a)| (q.header.clone(), q.value_of(&a.selected)))
            .collect()
    }
}

fn check_selection(q: &QuestionItem, selected: &[String]) -> Result<(), String> {
    if selected.is_empty() {
        return if q.required {
            Err("nothing selected".into())
        } else {
            Ok(())
        };
    }
    let one = || match selected {
        [s] => Ok(s.as_str()),
        _ => Err(format!("a {} input has one answer", q.kind.as_str())),
    };
    match q.kind {
        InputKind::Choice => {}
        InputKind::TextInput => return q.check_text(one()?),
        InputKind::NumberInput => return q.read_number(one()?).map(drop),
        InputKind::Toggle => {
            return match one()? {
                TOGGLE_ON | TOGGLE_OFF => Ok(()),
                other => Err(format!("{other:?} is not \"on\" or \"off\"")),
            };
        }
        InputKind::Confirm => {
            let label = q.confirm_label();
            return if one()? == label {
                Ok(())
            } else {
                Err(format!(
                    "a confirm input is answered with its label {label:?}"
                ))
            };
        }
    }
    if selected.len() > 1 && !q.multiple {
        return Err("only one option may be selected".into());
    }
    let mut seen = HashSet::new();
    for s in selected {
        if !seen.insert(s.as_str()) {
            return Err(format!("{s:?} is selected twice"));
        }
        let is_label = q.options.iter().any(|o| &o.label == s);
        if !is_label {
            if !q.custom {
                return Err(format!("{s:?} is not one of the options"));
            }
            if s.trim().is_empty() {
                return Err("the answer text is empty".into());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{input, kinds, out};
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_per_input() {
        let mut i = kinds();
        // The required confirm has no default: the set expires without an answer.
        assert_eq!(i.default_output(), None);
        i.questions[0].default = Some(vec!["true".into()]);
        let out = i.default_output().unwrap();
        assert_eq!(
            serde_json::Value::Object(i.values(&out)),
            json!({"Go": true, "Why": null, "Pods": 3, "Notify": true})
        );
        i.check_output(&out).unwrap();
        // A set of optional inputs none of which has a default expires without an answer.
        let lone: QuestionInput = serde_json::from_value(json!({"questions": [
            {"header": "Why", "question": "Reason?", "kind": "text_input", "required": false}
        ]}))
        .unwrap();
        assert_eq!(lone.default_output(), None);
        // A default that does not fit its input is refused with the reason.
        let mut bad = kinds();
        bad.questions[2].default = Some(vec!["12".into()]);
        assert!(
            bad.validate()
                .unwrap_err()
                .contains("default: enter a number from 1 to 10")
        );
    }

    #[test]
    fn kinds_refuse_what_is_not_theirs() {
        for (q, why) in [
            (
                json!({"header": "a", "question": "b", "kind": "toggle", "options": [{"label": "x"}]}),
                "choice inputs",
            ),
            (
                json!({"header": "a", "question": "b", "kind": "number_input", "min": 5, "max": 1}),
                "above",
            ),
            (
                json!({"header": "a", "question": "b", "kind": "number_input", "step": 0}),
                "positive",
            ),
            (
                json!({"header": "a", "question": "b", "kind": "text_input", "maxLength": 0}),
                "positive",
            ),
            (
                json!({"header": "a", "question": "b", "kind": "confirm", "label": " "}),
                "empty",
            ),
        ] {
            let i: QuestionInput = serde_json::from_value(json!({"questions": [q]})).unwrap();
            let e = i.validate().unwrap_err();
            assert!(e.contains(why), "{e}");
        }
        assert!(
            serde_json::from_value::<QuestionInput>(json!({"questions": [
            {"header": "a", "question": "b", "kind": "slider"}]}))
            .is_err()
        );
    }

    #[test]
    fn from_names_users_or_channel_identities() {
        let mut i = kinds();
        let actor = |user: Option<&str>, id: Option<&str>| crate::Actor {
            user: user.map(crate::UserId::new),
            identity: id.map(|id| crate::ChannelIdentity {
                platform: "slack".into(),
                user: crate::PlatformUser {
                    id: id.into(),
                    name: None,
                    is_bot: false,
                },
            }),
        };
        assert!(i.allows(None) && i.allows(Some(&actor(Some("bob"), None))));
        i.from = vec!["alice".into(), "slack:U7".into()];
        assert!(i.allows(Some(&actor(Some("alice"), None))));
        assert!(i.allows(Some(&actor(Some("slack:U9"), Some("U7")))));
        assert!(!i.allows(Some(&actor(Some("bob"), Some("U8")))));
        assert!(!i.allows(Some(&actor(None, None))) && !i.allows(None));
    }

    #[test]
    fn expiry_is_positive_and_at_most_a_year() {
        let mut i = input();
        for (s, ok) in [
            (Some(1), true),
            (None, true),
            (Some(MAX_EXPIRES_IN_SECONDS), true),
            (Some(0), false),
            (Some(MAX_EXPIRES_IN_SECONDS + 1), false),
            (Some(u64::MAX), false),
            (Some(i64::MAX as u64 / 1000 + 1), false),
        ] {
            i.expires_in_seconds = s;
            assert_eq!(i.validate().is_ok(), ok, "{s:?}: {:?}", i.validate());
        }
        let huge: QuestionInput = serde_json::from_value(json!({
            "questions": [{"header": "h", "question": "q", "custom": true}],
            "expiresInSeconds": u64::MAX
        }))
        .unwrap();
        assert!(huge.validate().unwrap_err().contains("expiresInSeconds"));
    }

    #[test]
    fn display_blocks_are_read_like_an_agents_and_carry_no_inputs_or_events() {
        let with = |blocks: serde_json::Value| {
            let mut i = super::super::tests::input();
            i.blocks = blocks.as_array().cloned().unwrap_or_default();
            i.validate()
        };
        assert!(
            with(serde_json::json!([
                {"type": "table", "columns": ["file", "+", "-"], "rows": [["a.rs", 3, 1]]},
                {"type": "code", "language": "diff", "code": "- old\n+ new"}
            ]))
            .is_ok()
        );
        let e = with(serde_json::json!([{"type": "choice", "options": []}])).unwrap_err();
        assert!(e.contains("input"), "{e}");
        let e = with(serde_json::json!([{"type": "table", "columns": 3}])).unwrap_err();
        assert!(e.starts_with("`blocks`"), "{e}");
        let e = with(serde_json::json!([
            {"type": "fields", "id": "f", "fields": [{"key": "a", "value": "b"}],
             "events": [{"label": "Retry"}]}
        ]))
        .unwrap_err();
        assert!(e.contains("event buttons"), "{e}");
    }

    #[test]
    fn input_defaults_and_validation() {
        let i = input();
        assert!(!i.questions[0].multiple && !i.questions[0].custom);
        i.validate().unwrap();
        let mut bad = i.clone();
        bad.questions[1].header = "Env".into();
        assert!(bad.validate().unwrap_err().contains("used twice"));
        let mut bad = i.clone();
        bad.questions[0].options.clear();
        assert!(bad.validate().is_err());
        let empty = QuestionInput {
            questions: vec![],
            expires_in_seconds: None,
            from: Vec::new(),
            blocks: Vec::new(),
        };
        assert!(empty.validate().is_err());
        let empty = QuestionInput {
            questions: vec![],
            ..Default::default()
        };
        assert!(empty.validate().is_err());
    }

    #[test]
    fn answers_must_fit_the_input() {
        let i = input();
        i.check_output(&out([&["prod"], &["a", "b"], &["my own words"]]))
            .unwrap();
        let e = i
            .check_output(&out([&["moon"], &["a"], &["none"]]))
            .unwrap_err();
        assert!(e.contains("not one of the options"), "{e}");
        let e = i
            .check_output(&out([&["prod", "staging"], &["a"], &["none"]]))
            .unwrap_err();
        assert!(e.contains("only one"), "{e}");
        let mut o = out([&["prod"], &["a"], &["none"]]);
        o.answers.pop();
        assert!(i.check_output(&o).is_err());
    }
}
