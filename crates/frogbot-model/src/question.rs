use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use std::collections::HashSet;

/// The name of the question tool.
pub const QUESTION_TOOL: &str = "question";

/// One option of a question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionOption {
    /// The exact text an answer selects.
    pub label: String,
    /// A longer explanation shown beside the label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One question of a question set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionItem {
    /// A short title; answers name their question by it.
    pub header: String,
    /// The question itself.
    pub question: String,
    /// The options to choose from.
    #[serde(default)]
    pub options: Vec<QuestionOption>,
    /// Several options may be selected.
    #[serde(default)]
    pub multiple: bool,
    /// The person may answer with their own text.
    #[serde(default)]
    pub custom: bool,
    /// The answer used when the question set expires unanswered (labels, or text where `custom`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Vec<String>>,
}

/// What a typed reply (a thread reply on Slack, Discord or Matrix) says about one question: see
/// [`QuestionItem::choice_in_reply`]. Every adapter reads replies with it, so the same text means
/// the same on every platform.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplyChoice {
    /// The options it names (their labels, in the order given, each once).
    Options(Vec<String>),
    /// It names options wrongly (a number that is no option, several for a one-choice question):
    /// rejected with this reason.
    Invalid(String),
    /// It names no option: the person's own text (an answer where the question is `custom`).
    Text,
}

impl QuestionItem {
    /// Reads a typed reply as a choice of this question's options. The whole text may be an
    /// option's label (any case) or its number counting from 1; for several options, labels or
    /// numbers separated by commas (numbers also by spaces: `1 3`, `1, 3`, `1. 3.`). A number out
    /// of range, or several options for a one-choice question, is [`ReplyChoice::Invalid`];
    /// anything else that is not all options is [`ReplyChoice::Text`].
    pub fn choice_in_reply(&self, text: &str) -> ReplyChoice {
        let text = text.trim();
        if text.is_empty() || self.options.is_empty() {
            return ReplyChoice::Text;
        }
        let label_of = |word: &str| {
            self.options
                .iter()
                .position(|o| o.label.eq_ignore_ascii_case(word))
        };
        if let Some(i) = label_of(text) {
            return ReplyChoice::Options(vec![self.options[i].label.clone()]);
        }
        let number = |word: &str| word.trim_end_matches('.').parse::<usize>().ok();
        let mut parts: Vec<&str> = text
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect();
        let spaced: Vec<&str> = text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|p| !p.is_empty())
            .collect();
        if spaced.iter().all(|w| number(w).is_some()) {
            parts = spaced;
        }
        let n = self.options.len();
        let mut chosen: Vec<usize> = Vec::new();
        for part in parts {
            let i = match (label_of(part), number(part)) {
                (Some(i), _) => i,
                (None, Some(k)) if (1..=n).contains(&k) => k - 1,
                (None, Some(_)) => {
                    return ReplyChoice::Invalid(format!("pick a number from 1 to {n}."));
                }
                (None, None) => return ReplyChoice::Text,
            };
            if !chosen.contains(&i) {
                chosen.push(i);
            }
        }
        if chosen.len() > 1 && !self.multiple {
            return ReplyChoice::Invalid("pick only one option.".into());
        }
        if chosen.is_empty() {
            // Only separators (`,`, `, ,`): no option named.
            return ReplyChoice::Text;
        }
        ReplyChoice::Options(
            chosen
                .into_iter()
                .map(|i| self.options[i].label.clone())
                .collect(),
        )
    }

    /// Whether a typed reply addressed to this question asks to skip it ([`is_skip_reply`]): the
    /// adapter's `parse` then returns `ParseResult::Dismiss`. The word `skip` alone means skip
    /// also on a `custom` question (it is not taken as an own answer); only an option labelled
    /// `skip` (any case) takes the bare word as its choice, while `/skip` skips always.
    pub fn skip_in_reply(&self, text: &str) -> bool {
        let text = text.trim();
        is_skip_reply(text)
            && !(text.eq_ignore_ascii_case(SKIP_WORD)
                && self
                    .options
                    .iter()
                    .any(|o| o.label.trim().eq_ignore_ascii_case(SKIP_WORD)))
    }
}

const SKIP_WORD: &str = "skip";

/// Whether a typed reply is a request to skip a question: `skip` or `/skip`, trimmed, in any
/// case. Adapters ask [`QuestionItem::skip_in_reply`] for the question a reply is addressed to.
pub fn is_skip_reply(text: &str) -> bool {
    let text = text.trim();
    let word = text.strip_prefix('/').unwrap_or(text);
    word.eq_ignore_ascii_case(SKIP_WORD)
}

/// The longest `expiresInSeconds` a question set may have: one year (365 days). Longer is refused
/// by [`QuestionInput::validate`] (a huge value would overflow the deadline's time).
pub const MAX_EXPIRES_IN_SECONDS: u64 = 365 * 24 * 60 * 60;

/// The question tool's input (`QuestionInput`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionInput {
    /// The questions, answered together.
    pub questions: Vec<QuestionItem>,
    /// After this many seconds the set accepts no answers; defaults are used where given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in_seconds: Option<u64>,
}

/// One answer of a [`QuestionOutput`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionAnswer {
    /// The header of the question answered.
    pub header: String,
    /// Exact option labels (one unless `multiple`), or the person's own text where `custom`.
    pub selected: Vec<String>,
}

/// The question tool's output (`QuestionOutput`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionOutput {
    /// One entry per question, in order.
    pub answers: Vec<QuestionAnswer>,
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
            if q.options.is_empty() && !q.custom {
                return Err(format!("question {n}: give `options` or set `custom`"));
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
            if let Some(default) = &q.default {
                check_selection(q, default).map_err(|e| format!("question {n}: default: {e}"))?;
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

    /// The output made of every question's default, if every question has one.
    pub fn default_output(&self) -> Option<QuestionOutput> {
        let answers = self
            .questions
            .iter()
            .map(|q| {
                q.default.clone().map(|selected| QuestionAnswer {
                    header: q.header.clone(),
                    selected,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(QuestionOutput { answers })
    }
}

fn check_selection(q: &QuestionItem, selected: &[String]) -> Result<(), String> {
    if selected.is_empty() {
        return Err("nothing selected".into());
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
}

/// The form locator a piece stores in a form it opens itself: which thread and which message the
/// form was opened from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionModalMetadata {
    /// The conversation thread id.
    pub thread_id: String,
    /// The question message the form was opened from.
    pub message_id: String,
}

const MODAL_METADATA_PREFIX: &str = "fq1:";

/// Encodes a form locator for a form's private metadata (compact: `fq1:` then a JSON pair).
pub fn encode_question_modal_metadata(locator: &QuestionModalMetadata) -> String {
    let pair = serde_json::to_string(&(&locator.thread_id, &locator.message_id))
        .expect("two strings always serialise");
    format!("{MODAL_METADATA_PREFIX}{pair}")
}

/// Decodes a form locator; `None` for metadata that is not one.
pub fn decode_question_modal_metadata(metadata: &str) -> Option<QuestionModalMetadata> {
    let pair = metadata.strip_prefix(MODAL_METADATA_PREFIX)?;
    let (thread_id, message_id): (String, String) = serde_json::from_str(pair).ok()?;
    Some(QuestionModalMetadata {
        thread_id,
        message_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input() -> QuestionInput {
        serde_json::from_value(json!({"questions": [
            {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]},
            {"header": "Checks", "question": "Which?", "options": [{"label": "a"}, {"label": "b"}], "multiple": true},
            {"header": "Note", "question": "Anything?", "options": [{"label": "none"}], "custom": true}
        ]}))
        .unwrap()
    }

    fn out(sel: [&[&str]; 3]) -> QuestionOutput {
        QuestionOutput {
            answers: ["Env", "Checks", "Note"]
                .iter()
                .zip(sel)
                .map(|(h, s)| QuestionAnswer {
                    header: h.to_string(),
                    selected: s.iter().map(|x| x.to_string()).collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn skip_and_slash_skip_skip_a_question() {
        let i = input();
        for text in ["skip", " Skip ", "SKIP", "/skip", "/Skip\n"] {
            assert!(is_skip_reply(text), "{text:?}");
            assert!(i.questions[0].skip_in_reply(text), "{text:?}");
            // On a `custom` question too: the word alone is no own answer.
            assert!(i.questions[2].skip_in_reply(text), "{text:?}");
        }
        for text in ["skip it", "skipping", "/ skip", "//skip", "", "please skip"] {
            assert!(!is_skip_reply(text), "{text:?}");
            assert!(!i.questions[2].skip_in_reply(text), "{text:?}");
        }
        // An option labelled "Skip" takes the bare word; `/skip` still skips.
        let mut labelled = i.questions[0].clone();
        labelled.options[1].label = "Skip".into();
        assert!(!labelled.skip_in_reply("skip"));
        assert!(labelled.skip_in_reply("/skip"));
    }

    #[test]
    fn replies_name_options_by_label_or_number() {
        let i = input();
        let (one, many, own) = (&i.questions[0], &i.questions[1], &i.questions[2]);
        let opts = |l: &[&str]| ReplyChoice::Options(l.iter().map(|s| s.to_string()).collect());
        assert_eq!(one.choice_in_reply(" PROD "), opts(&["prod"]));
        assert_eq!(one.choice_in_reply("1"), opts(&["staging"]));
        assert_eq!(one.choice_in_reply("2."), opts(&["prod"]));
        assert_eq!(one.choice_in_reply("prod, prod"), opts(&["prod"]));
        assert_eq!(
            one.choice_in_reply("1, 2"),
            ReplyChoice::Invalid("pick only one option.".into())
        );
        assert_eq!(
            one.choice_in_reply("3"),
            ReplyChoice::Invalid("pick a number from 1 to 2.".into())
        );
        assert_eq!(
            one.choice_in_reply("0"),
            ReplyChoice::Invalid("pick a number from 1 to 2.".into())
        );
        assert_eq!(one.choice_in_reply("somewhere else"), ReplyChoice::Text);
        assert_eq!(one.choice_in_reply("2 apples"), ReplyChoice::Text);
        assert_eq!(one.choice_in_reply("  "), ReplyChoice::Text);
        assert_eq!(many.choice_in_reply("b, A"), opts(&["b", "a"]));
        assert_eq!(many.choice_in_reply("2 1 2"), opts(&["b", "a"]));
        assert_eq!(many.choice_in_reply("1. 2."), opts(&["a", "b"]));
        assert_eq!(many.choice_in_reply("a, c"), ReplyChoice::Text);
        assert_eq!(own.choice_in_reply("none"), opts(&["none"]));
        assert_eq!(own.choice_in_reply("none at all"), ReplyChoice::Text);
        // A label with a comma in it is still one option.
        let mut odd = one.clone();
        odd.options[0].label = "eu, west".into();
        assert_eq!(odd.choice_in_reply("EU, West"), opts(&["eu, west"]));
    }

    #[test]
    fn a_reply_of_only_commas_names_no_option() {
        let i = input();
        for text in [",", ", ,", " , ", ",,,", ". ,"] {
            for q in &i.questions {
                assert_ne!(
                    q.choice_in_reply(text),
                    ReplyChoice::Options(vec![]),
                    "{text:?}"
                );
            }
            assert_eq!(
                i.questions[1].choice_in_reply(text),
                ReplyChoice::Text,
                "{text:?}"
            );
        }
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

    #[test]
    fn modal_metadata_round_trips() {
        let l = QuestionModalMetadata {
            thread_id: "C1:17.5|x\"y".into(),
            message_id: "m:1".into(),
        };
        let s = encode_question_modal_metadata(&l);
        assert_eq!(decode_question_modal_metadata(&s), Some(l));
        assert_eq!(decode_question_modal_metadata("hello"), None);
        assert_eq!(decode_question_modal_metadata("fq1:[1]"), None);
    }
}
