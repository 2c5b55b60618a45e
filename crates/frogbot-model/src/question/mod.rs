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
/// A confirm input's button label when it names none.
pub const CONFIRM_LABEL: &str = "Confirm";
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
    ///
    /// For the other kinds the reply is the answer itself: a `text_input` takes the text (too long
    /// is invalid), a `number_input` a number within its bounds (text with a digit that is no
    /// valid number is invalid with the reason; text without one is [`ReplyChoice::Text`]), a
    /// `toggle` yes/no/on/off or its label, a `confirm` its label, `yes` or `ok`.
    pub fn choice_in_reply(&self, text: &str) -> ReplyChoice {
        let text = text.trim();
        match self.kind {
            InputKind::Choice => {}
            InputKind::TextInput => {
                if text.is_empty() {
                    return ReplyChoice::Text;
                }
                return match self.check_text(text) {
                    Ok(()) => ReplyChoice::Options(vec![text.to_owned()]),
                    Err(reason) => ReplyChoice::Invalid(format!("{reason}.")),
                };
            }
            InputKind::NumberInput => {
                return match self.read_number(text) {
                    Ok(n) => ReplyChoice::Options(vec![n]),
                    Err(reason) if text.chars().any(|c| c.is_ascii_digit()) => {
                        ReplyChoice::Invalid(format!("{reason}."))
                    }
                    Err(_) => ReplyChoice::Text,
                };
            }
            InputKind::Toggle => {
                return match self.read_toggle(text) {
                    Some(v) => ReplyChoice::Options(vec![v.to_owned()]),
                    None => ReplyChoice::Text,
                };
            }
            InputKind::Confirm => {
                let label = self.confirm_label();
                let yes = ["yes", "y", "ok", "confirm"];
                return if text.eq_ignore_ascii_case(label)
                    || yes.iter().any(|w| text.eq_ignore_ascii_case(w))
                {
                    ReplyChoice::Options(vec![label.to_owned()])
                } else {
                    ReplyChoice::Text
                };
            }
        }
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

impl QuestionItem {
    /// A confirm input's button label ([`CONFIRM_LABEL`] when it names none).
    pub fn confirm_label(&self) -> &str {
        self.label
            .as_deref()
            .filter(|l| !l.trim().is_empty())
            .unwrap_or(CONFIRM_LABEL)
    }

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

    fn check_text(&self, text: &str) -> Result<(), String> {
        if text.trim().is_empty() {
            return Err("the answer text is empty".into());
        }
        let limit = self.text_limit();
        if text.chars().count() > limit as usize {
            return Err(format!("the text is longer than {limit} characters"));
        }
        Ok(())
    }

    /// Reads a number for a `number_input` (the `unit` may follow it) and checks it against
    /// `min`, `max` and `step`: the number as the answer stores it (`3`, `2.5`), or why not.
    pub fn read_number(&self, text: &str) -> Result<String, String> {
        let mut t = text.trim();
        if let Some(unit) = self
            .unit
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
            && t.len() > unit.len()
            && t.is_char_boundary(t.len() - unit.len())
            && t[t.len() - unit.len()..].eq_ignore_ascii_case(unit)
        {
            t = t[..t.len() - unit.len()].trim_end();
        }
        let wanted = || format!("enter a number{}", self.range_phrase());
        let v: f64 = match t.parse::<f64>() {
            Ok(v) if v.is_finite() && !t.starts_with('+') && !t.ends_with('.') => v,
            _ => return Err(wanted()),
        };
        let min = self.min.as_ref().and_then(serde_json::Number::as_f64);
        let max = self.max.as_ref().and_then(serde_json::Number::as_f64);
        if min.is_some_and(|m| v < m) || max.is_some_and(|m| v > m) {
            return Err(wanted());
        }
        if let Some(step) = self.step.as_ref().and_then(serde_json::Number::as_f64) {
            let k = (v - min.unwrap_or(0.0)) / step;
            if (k - k.round()).abs() > 1e-9 * k.abs().max(1.0) {
                return Err(format!(
                    "{} in steps of {}",
                    wanted(),
                    self.step
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default()
                ));
            }
        }
        Ok(if v.fract() == 0.0 && v.abs() < 1e15 {
            format!("{}", v as i64)
        } else {
            format!("{v}")
        })
    }

    fn range_phrase(&self) -> String {
        match (&self.min, &self.max) {
            (Some(a), Some(b)) => format!(" from {a} to {b}"),
            (Some(a), None) => format!(" of at least {a}"),
            (None, Some(b)) => format!(" of at most {b}"),
            (None, None) => String::new(),
        }
    }

    /// Reads a toggle's answer: yes / no, on / off, true / false (any case), ✓ or the label for on.
    pub fn read_toggle(&self, text: &str) -> Option<&'static str> {
        let t = text.trim();
        let any = |words: &[&str]| words.iter().any(|w| t.eq_ignore_ascii_case(w));
        if any(&["on", "yes", "y", "true", "✓", "✅"])
            || self
                .label
                .as_deref()
                .is_some_and(|l| t.eq_ignore_ascii_case(l.trim()))
        {
            Some(TOGGLE_ON)
        } else if any(&["off", "no", "n", "false", "✗"]) {
            Some(TOGGLE_OFF)
        } else {
            None
        }
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

    /// One line telling a person how to answer this input with a typed reply, where the
    /// platform draws no control for it (`None` for a choice: adapters number its options).
    pub fn reply_hint(&self) -> Option<String> {
        match self.kind {
            InputKind::Choice => None,
            InputKind::TextInput => Some(match self.max_length {
                Some(n) => format!("Reply with your answer (at most {n} characters)."),
                None => "Reply with your answer.".into(),
            }),
            InputKind::NumberInput => Some(format!(
                "Reply with a number{}{}.",
                self.range_phrase(),
                self.unit
                    .as_deref()
                    .map(|u| format!(" ({u})"))
                    .unwrap_or_default()
            )),
            InputKind::Toggle => Some(match &self.label {
                Some(l) => format!("Reply yes or no ({l})."),
                None => "Reply yes or no.".into(),
            }),
            InputKind::Confirm => Some(format!("Reply \"{}\" to confirm.", self.confirm_label())),
        }
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

/// What a card shows while a question set with an expiry is open: `open until 14:05 UTC`, with
/// the date when it is not `now`'s day.
pub fn open_until_text(
    expires_at: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    if expires_at.date_naive() == now.date_naive() {
        format!("open until {} UTC", expires_at.format("%H:%M"))
    } else {
        format!("open until {} UTC", expires_at.format("%-d %b %H:%M"))
    }
}

/// What a card shows once its question set expired.
pub const EXPIRED_TEXT: &str = "Expired";

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

    /// Whether one tap answers the set: exactly one input, and a simple one (a choice without
    /// `multiple`, or a confirm). Otherwise a form or a "Send answers" control collects them.
    pub fn submits_on_tap(&self) -> bool {
        matches!(self.questions.as_slice(), [q] if q.is_simple())
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
    /// When the set stops accepting answers (RFC 3339), for a set with `expiresInSeconds`: a
    /// card shows it ([`open_until_text`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
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

    fn kinds() -> QuestionInput {
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

    #[test]
    fn hints_and_expiry_lines() {
        let i = kinds();
        assert_eq!(
            i.questions[0].reply_hint().unwrap(),
            "Reply \"Approve\" to confirm."
        );
        assert_eq!(
            i.questions[2].reply_hint().unwrap(),
            "Reply with a number from 1 to 10 (pods)."
        );
        assert_eq!(input().questions[0].reply_hint(), None);
        let t = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc();
        assert_eq!(
            open_until_text(t("2026-12-01T14:05:00Z"), t("2026-12-01T10:00:00Z")),
            "open until 14:05 UTC"
        );
        assert_eq!(
            open_until_text(t("2026-12-02T14:05:00Z"), t("2026-12-01T10:00:00Z")),
            "open until 2 Dec 14:05 UTC"
        );
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
            from: Vec::new(),
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
