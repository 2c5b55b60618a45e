//! The `question` tool's schema: its input ([`QuestionInput`], one [`QuestionItem`] per input,
//! of an [`InputKind`]), its output ([`QuestionOutput`]), their wire constants and serde helpers.
//! The submodules hold the rest, their public items re-exported here: validation and building
//! outputs (`validate`), reading typed replies (`reply`), the texts a person reads (`texts`), the
//! stored record and outcomes (`record`), the form locator codec (`modal`) and what a control
//! means on every platform (`control`).

mod control;
mod modal;
mod record;
mod reply;
mod texts;
mod validate;

pub use control::*;
pub use modal::*;
pub use record::*;
pub use reply::*;
pub use texts::*;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

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

/// What kind of input a question is (rply's input blocks). `choice` is the question tool's
/// original kind and the default, so a question without `kind` is a choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum InputKind {
    /// Options to pick (`multiple` for several, `custom` for the person's own text).
    #[default]
    Choice,
    /// Free text (`placeholder`, `multiline`, `maxLength`).
    TextInput,
    /// A number (`min`, `max`, `step`, `unit`).
    NumberInput,
    /// On or off (`label`); answered `"on"` or `"off"`.
    Toggle,
    /// One button (`label`, e.g. "Approve"; `danger` for a destructive action); answered with
    /// the label.
    Confirm,
}

impl InputKind {
    /// The kind's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            InputKind::Choice => "choice",
            InputKind::TextInput => "text_input",
            InputKind::NumberInput => "number_input",
            InputKind::Toggle => "toggle",
            InputKind::Confirm => "confirm",
        }
    }

    fn is_choice(&self) -> bool {
        *self == InputKind::Choice
    }
}

/// A toggle's answer when on.
pub const TOGGLE_ON: &str = "on";
/// A toggle's answer when off.
pub const TOGGLE_OFF: &str = "off";
/// The longest text a `text_input` accepts when it sets no `maxLength` (Discord's and Slack's
/// own limits are 4,000 and 3,000; an adapter clamps to its platform's).
pub const TEXT_INPUT_MAX: u32 = 4000;

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One question (one input) of a question set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionItem {
    /// A short title; answers name their question by it (required: empty is refused by
    /// [`QuestionInput::validate`]).
    #[serde(default)]
    pub header: String,
    /// The question itself (required, as `header`).
    #[serde(default)]
    pub question: String,
    /// The kind of input; `choice` when absent.
    #[serde(default, skip_serializing_if = "InputKind::is_choice")]
    pub kind: InputKind,
    /// The options to choose from (`choice` only).
    #[serde(default)]
    pub options: Vec<QuestionOption>,
    /// Several options may be selected (`choice` only).
    #[serde(default)]
    pub multiple: bool,
    /// The person may answer with their own text (`choice` only).
    #[serde(default)]
    pub custom: bool,
    /// A hint shown in an empty text field (`text_input`, `number_input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    /// A text field of several lines (`text_input`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub multiline: bool,
    /// The longest answer in characters (`text_input`; at most [`TEXT_INPUT_MAX`]).
    #[serde(default, rename = "maxLength", skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u32>,
    /// The smallest number accepted (`number_input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<serde_json::Number>,
    /// The largest number accepted (`number_input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<serde_json::Number>,
    /// Accepted numbers are `min` (or 0) plus a whole multiple of `step` (`number_input`); a
    /// whole `step` with a whole `min` makes the input whole numbers only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<serde_json::Number>,
    /// The unit shown beside the number (`number_input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// A toggle's label, or a confirm button's label ([`CONFIRM_LABEL`] when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// A confirm button for a destructive action (drawn in the platform's danger style, with a
    /// confirmation dialog where the platform has one).
    #[serde(default, skip_serializing_if = "is_false")]
    pub danger: bool,
    /// Whether the set needs an answer to this input; an optional one may be left empty
    /// (`selected: []`). Default `true`.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub required: bool,
    /// The answer used when the question set expires unanswered: labels (or own text where
    /// `custom`) for a choice, the text, a number, `true`/`false` (or `"on"`/`"off"`) for a
    /// toggle, `true` (or the label) for a confirm. Stored as the answer's `selected` strings.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_default"
    )]
    pub default: Option<Vec<String>>,
}

impl Default for QuestionItem {
    fn default() -> Self {
        QuestionItem {
            header: String::new(),
            question: String::new(),
            kind: InputKind::Choice,
            options: Vec::new(),
            multiple: false,
            custom: false,
            placeholder: None,
            multiline: false,
            max_length: None,
            min: None,
            max: None,
            step: None,
            unit: None,
            label: None,
            danger: false,
            required: true,
            default: None,
        }
    }
}

/// A default given as a string, a number, a bool or an array of strings: each is kept as the
/// answer's strings (`true` → `"on"`, `false` → `"off"`; a confirm's `"on"` is read as its label
/// by [`QuestionInput::validate`]'s normalising).
fn lenient_default<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    use serde::de::Error as _;
    let v = Option::<Value>::deserialize(d)?;
    let one = |v: &Value| -> Result<String, D::Error> {
        match v {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            Value::Bool(true) => Ok(TOGGLE_ON.into()),
            Value::Bool(false) => Ok(TOGGLE_OFF.into()),
            _ => Err(D::Error::custom(
                "`default` is a string, a number, a boolean or an array of strings",
            )),
        }
    };
    Ok(match v {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(items.iter().map(one).collect::<Result<_, _>>()?),
        Some(v) => Some(vec![one(&v)?]),
    })
}

impl QuestionItem {
    /// The longest text a `text_input` accepts, in characters.
    pub fn text_limit(&self) -> u32 {
        self.max_length
            .unwrap_or(TEXT_INPUT_MAX)
            .min(TEXT_INPUT_MAX)
    }

    /// Whether one tap answers this input (a choice without `multiple`, or a confirm).
    pub fn is_simple(&self) -> bool {
        match self.kind {
            InputKind::Choice => !self.multiple,
            InputKind::Confirm => true,
            _ => false,
        }
    }
}

/// The longest `expiresInSeconds` a question set may have: one year (365 days). Longer is refused
/// by [`QuestionInput::validate`] (a huge value would overflow the deadline's time).
pub const MAX_EXPIRES_IN_SECONDS: u64 = 365 * 24 * 60 * 60;

/// The question tool's input (`QuestionInput`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionInput {
    /// The questions, answered together.
    pub questions: Vec<QuestionItem>,
    /// After this many seconds the set accepts no answers; defaults are used where given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in_seconds: Option<u64>,
    /// Who may answer (an ask's `--from`): FrogBot user ids, or `platform:user` channel
    /// identities (`slack:U123`); empty: whoever the chat lets answer. Checked on top of the
    /// channel's access check and the chat's ownership ([`QuestionInput::allows`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<String>,
    /// Display blocks shown with the questions, before their inputs (a table, a code block or a
    /// diff, an image…: [`crate::blocks::Block`] as agents write them), on every platform and the
    /// web. No inputs and no event buttons among them ([`QuestionInput::validate`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<serde_json::Value>,
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
    /// The question set a tool call's `descriptor` holds (an approval's or an elicitation's),
    /// read back; `None` without one.
    pub(crate) fn of_descriptor(descriptor: Option<&serde_json::Value>) -> Option<Self> {
        descriptor.and_then(|d| serde_json::from_value(d.clone()).ok())
    }

    /// Whether one tap answers the set: exactly one input, and a simple one (a choice without
    /// `multiple`, or a confirm). Otherwise a form or a "Send answers" control collects them.
    pub fn submits_on_tap(&self) -> bool {
        matches!(self.questions.as_slice(), [q] if q.is_simple())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(super) fn input() -> QuestionInput {
        serde_json::from_value(json!({"questions": [
            {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]},
            {"header": "Checks", "question": "Which?", "options": [{"label": "a"}, {"label": "b"}], "multiple": true},
            {"header": "Note", "question": "Anything?", "options": [{"label": "none"}], "custom": true}
        ]}))
        .unwrap()
    }

    pub(super) fn out(sel: [&[&str]; 3]) -> QuestionOutput {
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

    pub(super) fn kinds() -> QuestionInput {
        serde_json::from_value(json!({"questions": [
            {"header": "Go", "question": "Deploy?", "kind": "confirm", "label": "Approve", "danger": true},
            {"header": "Why", "question": "Reason?", "kind": "text_input", "maxLength": 10, "placeholder": "because", "required": false},
            {"header": "Pods", "question": "How many?", "kind": "number_input", "min": 1, "max": 10, "step": 1, "unit": "pods", "default": 3},
            {"header": "Notify", "question": "Tell the team?", "kind": "toggle", "label": "Notify", "default": true}
        ], "expiresInSeconds": 60}))
        .unwrap()
    }

    #[test]
    fn every_input_kind_reads_validates_and_round_trips() {
        let i = kinds();
        i.validate().unwrap();
        let (go, why, pods, notify) = (
            &i.questions[0],
            &i.questions[1],
            &i.questions[2],
            &i.questions[3],
        );
        assert_eq!(go.kind, InputKind::Confirm);
        assert!(!why.required && pods.required);
        assert_eq!(pods.default.as_deref(), Some(&["3".to_string()][..]));
        assert_eq!(notify.default.as_deref(), Some(&["on".to_string()][..]));
        // The wire shape keeps what was given (a choice stays without `kind`).
        let back: QuestionInput =
            serde_json::from_value(serde_json::to_value(&i).unwrap()).unwrap();
        assert_eq!(back, i);
        let choice = serde_json::to_value(&input().questions[0]).unwrap();
        assert!(
            choice.get("kind").is_none() && choice.get("required").is_none(),
            "{choice}"
        );

        let opts = |l: &[&str]| ReplyChoice::Options(l.iter().map(|s| s.to_string()).collect());
        assert_eq!(go.choice_in_reply("approve"), opts(&["Approve"]));
        assert_eq!(go.choice_in_reply("yes"), opts(&["Approve"]));
        assert_eq!(go.choice_in_reply("what is this?"), ReplyChoice::Text);
        assert_eq!(why.choice_in_reply(" short "), opts(&["short"]));
        assert_eq!(
            why.choice_in_reply("far too long an answer"),
            ReplyChoice::Invalid("the text is longer than 10 characters.".into())
        );
        assert_eq!(pods.choice_in_reply("4"), opts(&["4"]));
        assert_eq!(pods.choice_in_reply("4 pods"), opts(&["4"]));
        assert_eq!(pods.choice_in_reply("4.0"), opts(&["4"]));
        assert_eq!(
            pods.choice_in_reply("11"),
            ReplyChoice::Invalid("enter a number from 1 to 10.".into())
        );
        assert_eq!(
            pods.choice_in_reply("2.5"),
            ReplyChoice::Invalid("enter a number from 1 to 10 in steps of 1.".into())
        );
        assert_eq!(pods.choice_in_reply("lots"), ReplyChoice::Text);
        assert_eq!(notify.choice_in_reply("No"), opts(&["off"]));
        assert_eq!(notify.choice_in_reply("notify"), opts(&["on"]));
        assert_eq!(notify.choice_in_reply("maybe"), ReplyChoice::Text);

        let answer = |sel: [&[&str]; 4]| QuestionOutput {
            answers: ["Go", "Why", "Pods", "Notify"]
                .iter()
                .zip(sel)
                .map(|(h, s)| QuestionAnswer {
                    header: h.to_string(),
                    selected: s.iter().map(|x| x.to_string()).collect(),
                })
                .collect(),
        };
        let ok = answer([&["Approve"], &[], &["7"], &["off"]]);
        i.check_output(&ok).unwrap();
        assert_eq!(
            serde_json::Value::Object(i.values(&ok)),
            json!({"Go": true, "Why": null, "Pods": 7, "Notify": false})
        );
        for (bad, why) in [
            (answer([&["Deny"], &[], &["7"], &["off"]]), "label"),
            (
                answer([&["Approve"], &["x"; 2], &["7"], &["off"]]),
                "one answer",
            ),
            (
                answer([&["Approve"], &[], &["70"], &["off"]]),
                "from 1 to 10",
            ),
            (answer([&["Approve"], &[], &["7"], &["maybe"]]), "\"on\""),
            (
                answer([&["Approve"], &["elevenchars"], &["7"], &["on"]]),
                "longer than 10",
            ),
            (answer([&[], &[], &["7"], &["on"]]), "nothing selected"),
        ] {
            let e = i.check_output(&bad).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn one_simple_input_submits_on_tap() {
        let one = |q: serde_json::Value| {
            serde_json::from_value::<QuestionInput>(json!({"questions": [q]}))
                .unwrap()
                .submits_on_tap()
        };
        assert!(one(
            json!({"header": "a", "question": "b", "options": [{"label": "x"}]})
        ));
        assert!(one(
            json!({"header": "a", "question": "b", "kind": "confirm"})
        ));
        assert!(!one(
            json!({"header": "a", "question": "b", "options": [{"label": "x"}], "multiple": true})
        ));
        assert!(!one(
            json!({"header": "a", "question": "b", "kind": "text_input"})
        ));
        assert!(!kinds().submits_on_tap());
    }
}
