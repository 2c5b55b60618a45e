//! Pure drawing of questions: message texts, inline keyboards with short callback tokens, the
//! ForceReply prompt for own answers, the settled text, and the piece's progress state.

use frogbot_model::{QuestionInput, QuestionOutcome};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use teloxide::types::{ForceReply, InlineKeyboardButton, InlineKeyboardMarkup};

/// Telegram's limit on callback data, in bytes.
pub const MAX_CALLBACK_DATA: usize = 64;

/// What a button does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// Selects (or, for `multiple`, toggles) option `n`.
    Option(usize),
    /// Finishes a `multiple` selection.
    Done,
}

/// The callback token of a button: `q{revision}:{question}:{option}` or `q{revision}:{question}:d`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    /// The record revision the keyboard was drawn for.
    pub revision: u64,
    /// Index into `input.questions`.
    pub question: usize,
    /// What the button does.
    pub pick: Pick,
}

impl Token {
    /// The callback data (at most 20 + 20 + 20 digits and three more bytes: always ≤ 64 bytes).
    pub fn encode(&self) -> String {
        match self.pick {
            Pick::Option(o) => format!("q{}:{}:{o}", self.revision, self.question),
            Pick::Done => format!("q{}:{}:d", self.revision, self.question),
        }
    }

    /// Reads callback data; `None` when it is not a token of this adapter.
    pub fn decode(data: &str) -> Option<Token> {
        let rest = data.strip_prefix('q')?;
        let mut parts = rest.split(':');
        let revision = parts.next()?.parse().ok()?;
        let question = parts.next()?.parse().ok()?;
        let pick = match parts.next()? {
            "d" => Pick::Done,
            o => Pick::Option(o.parse().ok()?),
        };
        if parts.next().is_some() {
            return None;
        }
        Some(Token {
            revision,
            question,
            pick,
        })
    }

    /// Reads an action as [`crate::convert::action`] split it (`action_id`, `value`).
    pub fn from_action(action_id: &str, value: Option<&str>) -> Option<Token> {
        match value {
            Some(v) => Token::decode(&format!("{action_id}:{v}")),
            None => Token::decode(action_id),
        }
    }
}

/// The piece's progress, kept in the record's `state`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Per question: the final selection, once made.
    #[serde(default)]
    pub picks: Vec<Option<Vec<String>>>,
    /// Per question: the options toggled on so far (for `multiple`).
    #[serde(default)]
    pub toggled: Vec<Vec<usize>>,
    /// Ids of the ForceReply prompt messages (they carry no keyboard).
    #[serde(default)]
    pub prompts: Vec<String>,
}

impl Progress {
    /// The progress in `state`, sized for `input` (fresh when absent or unreadable).
    pub fn from_state(input: &QuestionInput, state: Option<&Value>) -> Progress {
        let mut p: Progress = state
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .unwrap_or_default();
        let n = input.questions.len();
        p.picks.resize(n, None);
        p.toggled.resize(n, Vec::new());
        p
    }

    /// As JSON for the record.
    pub fn to_state(&self) -> Value {
        serde_json::to_value(self).expect("progress always serialises")
    }

    /// Toggles option `o` of question `q`.
    pub fn toggle(&mut self, q: usize, o: usize) {
        let t = &mut self.toggled[q];
        if let Some(i) = t.iter().position(|&x| x == o) {
            t.remove(i);
        } else {
            t.push(o);
            t.sort_unstable();
        }
    }
}

/// The text of question `q`: header, question, and option descriptions.
pub fn question_text(input: &QuestionInput, q: usize) -> String {
    let item = &input.questions[q];
    let mut text = format!("❓ {}\n{}", item.header, item.question);
    for o in &item.options {
        if let Some(d) = &o.description {
            text.push_str(&format!("\n• {} — {d}", o.label));
        }
    }
    if item.multiple {
        text.push_str("\n(Select any, then press Done.)");
    }
    text
}

/// The keyboard of question `q` at `revision`: one button per option ("✓ label" when selected),
/// plus "Done" for `multiple`.
pub fn keyboard(
    input: &QuestionInput,
    q: usize,
    revision: u64,
    progress: &Progress,
) -> InlineKeyboardMarkup {
    let item = &input.questions[q];
    let picked = progress.picks.get(q).and_then(|p| p.as_ref());
    let toggled = progress.toggled.get(q);
    let mut rows: Vec<Vec<InlineKeyboardButton>> = item
        .options
        .iter()
        .enumerate()
        .map(|(o, opt)| {
            let on = if item.multiple {
                toggled.is_some_and(|t| t.contains(&o))
            } else {
                picked.is_some_and(|p| p.contains(&opt.label))
            };
            let text = if on {
                format!("✓ {}", opt.label)
            } else {
                opt.label.clone()
            };
            let token = Token {
                revision,
                question: q,
                pick: Pick::Option(o),
            };
            vec![InlineKeyboardButton::callback(text, token.encode())]
        })
        .collect();
    if item.multiple {
        let token = Token {
            revision,
            question: q,
            pick: Pick::Done,
        };
        rows.push(vec![InlineKeyboardButton::callback("Done", token.encode())]);
    }
    InlineKeyboardMarkup::new(rows)
}

/// The text of the ForceReply prompt for question `q`'s own answer.
pub fn prompt_text(input: &QuestionInput, q: usize) -> String {
    let item = &input.questions[q];
    if item.options.is_empty() {
        format!(
            "{}\n\n✎ Reply to this message with your answer.",
            question_text(input, q)
        )
    } else {
        format!(
            "✎ {}: reply to this message to answer in your own words.",
            item.header
        )
    }
}

/// The ForceReply markup of a prompt.
pub fn force_reply() -> ForceReply {
    ForceReply::new().input_field_placeholder(Some("Your answer".to_owned()))
}

/// The line that says how question `q` ended.
pub fn outcome_line(input: &QuestionInput, q: usize, outcome: &QuestionOutcome) -> String {
    let header = &input.questions[q].header;
    let answer = outcome
        .output()
        .and_then(|o| o.answers.iter().find(|a| &a.header == header))
        .map(|a| a.selected.join(", "));
    match (outcome, answer) {
        (QuestionOutcome::Expired(_), Some(a)) => format!("⌛ Expired — default: {a}"),
        (QuestionOutcome::Expired(_), None) => "⌛ Expired.".into(),
        (QuestionOutcome::Dismissed, _) => "✖ Dismissed.".into(),
        (QuestionOutcome::Cancelled, _) => "✖ Cancelled.".into(),
        (_, Some(a)) => format!("✅ {a}"),
        (_, None) => "✅ Answered.".into(),
    }
}

/// The settled text of a message of question `q`: its text and the outcome.
pub fn settled_text(
    input: &QuestionInput,
    q: usize,
    prompt: bool,
    outcome: &QuestionOutcome,
) -> String {
    let body = if prompt {
        prompt_text(input, q)
    } else {
        question_text(input, q)
    };
    format!("{body}\n\n{}", outcome_line(input, q, outcome))
}

/// An empty keyboard: sent with an edit, it removes the buttons.
pub fn no_keyboard() -> InlineKeyboardMarkup {
    InlineKeyboardMarkup::new(Vec::<Vec<InlineKeyboardButton>>::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use teloxide::types::InlineKeyboardButtonKind;

    fn input() -> QuestionInput {
        serde_json::from_value(json!({"questions": [
            {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod".repeat(40)}]},
            {"header": "Checks", "question": "Which?", "options": [{"label": "a"}, {"label": "b"}], "multiple": true}
        ]}))
        .unwrap()
    }

    fn data(b: &InlineKeyboardButton) -> &str {
        match &b.kind {
            InlineKeyboardButtonKind::CallbackData(d) => d,
            other => panic!("not a callback button: {other:?}"),
        }
    }

    #[test]
    fn callback_data_fits_64_bytes() {
        let worst = Token {
            revision: u64::MAX,
            question: usize::MAX,
            pick: Pick::Option(usize::MAX),
        };
        assert!(worst.encode().len() <= MAX_CALLBACK_DATA);
        let kb = keyboard(&input(), 0, u64::MAX, &Progress::default());
        for b in kb.inline_keyboard.iter().flatten() {
            assert!(data(b).len() <= MAX_CALLBACK_DATA, "{}", data(b));
            assert!(
                !data(b).contains("prod"),
                "labels never travel in callback data"
            );
        }
        assert_eq!(Token::decode(&worst.encode()), Some(worst));
        assert_eq!(Token::decode("q1:2:d").unwrap().pick, Pick::Done);
        assert_eq!(Token::decode("x1:2:3"), None);
        assert_eq!(Token::decode("q1:2:3:4"), None);
        assert_eq!(
            Token::from_action("q1:2", Some("3")),
            Token::decode("q1:2:3")
        );
    }

    #[test]
    fn toggles_mark_buttons_and_done_is_last() {
        let i = input();
        let mut p = Progress::from_state(&i, None);
        p.toggle(1, 1);
        let kb = keyboard(&i, 1, 3, &p);
        let texts: Vec<_> = kb
            .inline_keyboard
            .iter()
            .flatten()
            .map(|b| b.text.clone())
            .collect();
        assert_eq!(texts, ["a", "✓ b", "Done"]);
        assert_eq!(data(&kb.inline_keyboard[2][0]), "q3:1:d");
        p.toggle(1, 1);
        assert!(p.toggled[1].is_empty());
        let back = Progress::from_state(&i, Some(&p.to_state()));
        assert_eq!(back, p);
    }

    #[test]
    fn settled_text_names_the_outcome() {
        let i = input();
        assert!(settled_text(&i, 0, false, &QuestionOutcome::Dismissed).ends_with("✖ Dismissed."));
        assert!(no_keyboard().inline_keyboard.is_empty());
    }
}
