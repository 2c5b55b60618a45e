//! Pure drawing of questions: message texts (cut to Telegram's limits with
//! [`frogbot_model::text::truncate`]), inline keyboards with short callback tokens ([`crate::ids`]),
//! the ForceReply prompt for own answers, and the settled text.

use frogbot_model::text::truncate;
use frogbot_model::{Progress, QuestionInput, QuestionOutcome, SKIP_LABEL, skipped_text};
use teloxide::types::{ForceReply, InlineKeyboardButton, InlineKeyboardMarkup};

use crate::ids::{Pick, Token};

/// Telegram's limit on a message's text, in characters (`sendMessage`, `editMessageText`).
pub const MAX_TEXT: usize = 4096;
/// The label of a streamed reply's Stop button.
pub const STOP_LABEL: &str = "⏹ Stop";
/// Telegram's limit on an `answerCallbackQuery` notice, in characters.
pub const MAX_NOTICE: usize = 200;
/// The most buttons Telegram accepts in one inline keyboard.
pub const MAX_BUTTONS: usize = 100;
/// The longest button text this adapter draws, in characters: Telegram documents no maximum, but
/// a longer label cannot be read on a button; it is cut (the question text lists it whole when it
/// has a description).
pub const MAX_BUTTON_TEXT: usize = 64;
/// Room kept in a question message for the outcome line its settled text adds.
const OUTCOME_ROOM: usize = 300;

/// The text of question `q`: header, question, and option descriptions.
/// The text is cut to fit a message with room for the outcome line of [`settled_text`].
pub fn question_text(input: &QuestionInput, q: usize) -> String {
    truncate(&full_question_text(input, q), MAX_TEXT - OUTCOME_ROOM)
}

fn full_question_text(input: &QuestionInput, q: usize) -> String {
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

/// The keyboard of question `q` at `revision`: one button per option ("✓ label" when selected,
/// cut to [`MAX_BUTTON_TEXT`]), plus "Done" for `multiple`, and last "Skip", which dismisses the
/// whole call; at most [`MAX_BUTTONS`] buttons (later options can still be answered by a reply
/// naming them).
pub fn keyboard(
    input: &QuestionInput,
    q: usize,
    revision: u64,
    progress: &Progress,
) -> InlineKeyboardMarkup {
    let item = &input.questions[q];
    let picked = progress.picks.get(q).and_then(|p| p.as_ref());
    let checked = progress.checked(q);
    // Skip takes one button, Done another.
    let room = MAX_BUTTONS - 1 - usize::from(item.multiple);
    let mut rows: Vec<Vec<InlineKeyboardButton>> = item
        .options
        .iter()
        .enumerate()
        .take(room)
        .map(|(o, opt)| {
            let on = if item.multiple {
                checked.contains(&o)
            } else {
                picked.is_some_and(|p| p.contains(&opt.label))
            };
            let text = if on {
                truncate(&format!("✓ {}", opt.label), MAX_BUTTON_TEXT)
            } else {
                truncate(&opt.label, MAX_BUTTON_TEXT)
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
    let skip = Token {
        revision,
        question: q,
        pick: Pick::Skip,
    };
    rows.push(vec![InlineKeyboardButton::callback(
        SKIP_LABEL,
        skip.encode(),
    )]);
    InlineKeyboardMarkup::new(rows)
}

/// The text of the ForceReply prompt for question `q`'s own answer (cut like [`question_text`]).
pub fn prompt_text(input: &QuestionInput, q: usize) -> String {
    let item = &input.questions[q];
    let text = if item.options.is_empty() {
        // No keyboard to carry a Skip button: a reply `skip` skips.
        format!(
            "{}\n\n✎ Reply to this message with your answer, or with skip to skip it.",
            full_question_text(input, q)
        )
    } else {
        format!(
            "✎ {}: reply to this message to answer in your own words.",
            item.header
        )
    };
    truncate(&text, MAX_TEXT - OUTCOME_ROOM)
}

/// The ForceReply markup of a prompt.
pub fn force_reply() -> ForceReply {
    ForceReply::new().input_field_placeholder(Some("Your answer".to_owned()))
}

/// The line that says how question `q` ended; a dismissal names who skipped it (`by`).
pub fn outcome_line(
    input: &QuestionInput,
    q: usize,
    outcome: &QuestionOutcome,
    by: Option<&str>,
) -> String {
    let header = &input.questions[q].header;
    let answer = outcome
        .output()
        .and_then(|o| o.answers.iter().find(|a| &a.header == header))
        .map(|a| a.selected.join(", "));
    match (outcome, answer) {
        (QuestionOutcome::Expired(_), Some(a)) => format!("⌛ Expired — default: {a}"),
        (QuestionOutcome::Expired(_), None) => "⌛ Expired.".into(),
        (QuestionOutcome::Dismissed, _) => format!("⏭ {}", skipped_text(by)),
        (QuestionOutcome::Cancelled, _) => "✖ Cancelled.".into(),
        (_, Some(a)) => format!("✅ {a}"),
        (_, None) => "✅ Answered.".into(),
    }
}

/// The settled text of a message of question `q`: its text and the outcome, by `by` (within
/// [`MAX_TEXT`]).
pub fn settled_text(
    input: &QuestionInput,
    q: usize,
    prompt: bool,
    outcome: &QuestionOutcome,
    by: Option<&str>,
) -> String {
    let body = if prompt {
        prompt_text(input, q)
    } else {
        question_text(input, q)
    };
    let line = truncate(&outcome_line(input, q, outcome, by), OUTCOME_ROOM - 2);
    format!("{body}\n\n{line}")
}

/// An empty keyboard: sent with an edit, it removes the buttons.
pub fn no_keyboard() -> InlineKeyboardMarkup {
    InlineKeyboardMarkup::new(Vec::<Vec<InlineKeyboardButton>>::new())
}

/// The inline keyboard of a reply being streamed: one Stop button (callback data
/// [`STOP_DATA`](crate::ids::STOP_DATA)).
pub fn stop_keyboard() -> InlineKeyboardMarkup {
    InlineKeyboardMarkup::new([[InlineKeyboardButton::callback(
        STOP_LABEL,
        crate::ids::STOP_DATA,
    )]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::MAX_CALLBACK_DATA;
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
    fn callback_data_fits_64_bytes_and_labels_never_travel() {
        let kb = keyboard(&input(), 0, u64::MAX, &Progress::default());
        for b in kb.inline_keyboard.iter().flatten() {
            assert!(data(b).len() <= MAX_CALLBACK_DATA, "{}", data(b));
            assert!(
                !data(b).contains("prod"),
                "labels never travel in callback data"
            );
            assert!(b.text.chars().count() <= MAX_BUTTON_TEXT);
        }
    }

    #[test]
    fn long_texts_fit_a_message_and_many_options_a_keyboard() {
        let mut i = input();
        i.questions[0].question = "why? ".repeat(2000);
        i.questions[1].options = (0..150)
            .map(|n| serde_json::from_value(json!({"label": format!("o{n}")})).unwrap())
            .collect();
        assert!(question_text(&i, 0).chars().count() <= MAX_TEXT);
        let outcome: QuestionOutcome = serde_json::from_value(
            json!({"output": {"answers": [{"header": "Env", "selected": ["x".repeat(5000)]}]}}),
        )
        .unwrap();
        assert!(settled_text(&i, 0, false, &outcome, None).chars().count() <= MAX_TEXT);
        let kb = keyboard(&i, 1, 0, &Progress::from_state(&i, None));
        assert_eq!(kb.inline_keyboard.iter().flatten().count(), MAX_BUTTONS);
        let n = kb.inline_keyboard.len();
        assert_eq!(kb.inline_keyboard[n - 2][0].text, "Done");
        assert_eq!(kb.inline_keyboard[n - 1][0].text, "Skip");
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
        assert_eq!(texts, ["a", "✓ b", "Done", "Skip"]);
        assert_eq!(data(&kb.inline_keyboard[2][0]), "q3:1:d");
        assert_eq!(data(&kb.inline_keyboard[3][0]), "q3:1:s");
        p.toggle(1, 1);
        assert!(p.checked(1).is_empty());
        let back = Progress::from_state(&i, Some(&p.to_state()));
        assert_eq!(back, p);
    }

    #[test]
    fn settled_text_names_the_outcome() {
        let i = input();
        let skipped = |by| settled_text(&i, 0, false, &QuestionOutcome::Dismissed, by);
        assert!(skipped(None).ends_with("⏭ Skipped."));
        assert!(skipped(Some("Ada")).ends_with("⏭ Skipped by Ada"));
        assert!(no_keyboard().inline_keyboard.is_empty());
    }
}
