//! Pure rendering of FrogBot questions as Slack Block Kit (slack-morphism types). No I/O.
//!
//! One message per question call. Per question: a section with the question, then an actions
//! block: ≤ 5 options as buttons, more as a static select (≤ 100 options), `multiple` as checkboxes
//! (a multi-select above 10 options) plus a Submit button, and an "Other…" button where `custom`
//! (it opens the modal of [`modal_view`]). Below the questions, an actions block with a "Skip"
//! button dismisses the whole call. A set that would need more than 25 blocks is drawn compact:
//! one summary section, and an "Answer…" button that opens the modal beside "Skip".
//!
//! Control ids come from [`crate::ids`]; texts are cut to Slack's limits with
//! [`frogbot_model::text::truncate`].

use frogbot_model::text::truncate;
use frogbot_model::{
    Actor, Progress, QuestionInput, QuestionItem, QuestionModalMetadata, QuestionOutcome,
    QuestionOutput, SKIP_LABEL, encode_question_modal_metadata, skipped_text,
};
use slack_morphism::prelude::*;

use crate::Error;
use crate::ids::{ActionKind, ActionRef, MODAL_CALLBACK_ID, modal_input_id};

/// Slack: at most 50 blocks per message.
pub const SLACK_MAX_MESSAGE_BLOCKS: usize = 50;
/// FrogBot keeps a question message to 25 blocks (Slack allows 50).
pub const MAX_MESSAGE_BLOCKS: usize = 25;
/// Slack: at most 25 elements in an actions block.
pub const MAX_ACTIONS_ELEMENTS: usize = 25;
/// Slack: a message's `text` (longer text is truncated by Slack).
pub const MAX_MESSAGE_TEXT: usize = 40_000;
/// Slack: an `action_id`.
pub const MAX_ACTION_ID: usize = 255;
/// Slack: at most 100 blocks in a modal.
pub const MAX_MODAL_BLOCKS: usize = 100;
/// Slack: a button's text.
pub const MAX_BUTTON_TEXT: usize = 75;
/// Slack: an option's text.
pub const MAX_OPTION_TEXT: usize = 75;
/// Slack: an option's value.
pub const MAX_OPTION_VALUE: usize = 150;
/// Slack: a section's text.
pub const MAX_SECTION_TEXT: usize = 3000;
/// Slack: an input block's label.
pub const MAX_LABEL_TEXT: usize = 2000;
/// Slack: a modal's title.
pub const MAX_MODAL_TITLE: usize = 24;
/// Slack: a static select's options.
pub const MAX_SELECT_OPTIONS: usize = 100;
/// Slack: a checkbox group's / radio group's options.
pub const MAX_CHECKBOX_OPTIONS: usize = 10;
/// Single choices with at most this many options are drawn as buttons.
pub const MAX_BUTTONS: usize = 5;
/// Slack: a modal's private metadata.
pub const MAX_PRIVATE_METADATA: usize = 3000;

fn plain(text: &str, max: usize) -> SlackBlockPlainTextOnly {
    SlackBlockPlainText::new(truncate(text, max)).into()
}

fn mrkdwn(text: &str) -> SlackBlockText {
    SlackBlockMarkDownText::new(truncate(text, MAX_SECTION_TEXT)).into()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn button(text: &str, action: ActionRef, value: Option<String>) -> SlackBlockButtonElement {
    let b = SlackBlockButtonElement::new(plain(text, MAX_BUTTON_TEXT))
        .with_action_id(SlackActionId(action.encode()));
    match value {
        Some(v) => b.with_value(v),
        None => b,
    }
}

fn option_text(q: &QuestionItem, i: usize) -> String {
    q.options
        .get(i)
        .map(|o| o.label.clone())
        .unwrap_or_default()
}

fn select_item(q: &QuestionItem, i: usize) -> SlackBlockChoiceItem<SlackBlockPlainTextOnly> {
    let item = SlackBlockChoiceItem::new(plain(&option_text(q, i), MAX_OPTION_TEXT), i.to_string());
    match q.options.get(i).and_then(|o| o.description.as_deref()) {
        Some(d) => item.with_description(plain(d, MAX_OPTION_TEXT)),
        None => item,
    }
}

fn check_item(q: &QuestionItem, i: usize) -> SlackBlockChoiceItem<SlackBlockText> {
    let text: SlackBlockText =
        SlackBlockPlainText::new(truncate(&option_text(q, i), MAX_OPTION_TEXT)).into();
    let item = SlackBlockChoiceItem::new(text, i.to_string());
    match q.options.get(i).and_then(|o| o.description.as_deref()) {
        Some(d) => item.with_description(plain(d, MAX_OPTION_TEXT)),
        None => item,
    }
}

fn question_text(q: &QuestionItem, picked: Option<&[String]>) -> String {
    let mut text = format!("*{}*\n{}", escape(&q.header), escape(&q.question));
    if let Some(p) = picked {
        text.push_str(&format!("\n_Selected: {}_", escape(&p.join(", "))));
    }
    text
}

fn question_blocks(
    index: usize,
    q: &QuestionItem,
    progress: &Progress,
    revision: u64,
) -> Vec<SlackBlock> {
    let picked = progress.picks.get(index).and_then(|p| p.as_deref());
    let section = SlackSectionBlock::new().with_text(mrkdwn(&question_text(q, picked)));
    let aref = |kind, option| ActionRef {
        kind,
        question: index,
        option,
        revision,
    };
    let n = q.options.len().min(MAX_SELECT_OPTIONS);
    let mut elements: Vec<SlackActionBlockElement> = Vec::new();
    // Slack allows a multi-select in a section (as its accessory), not in an actions block.
    let mut accessory: Option<SlackSectionBlockElement> = None;
    if q.multiple && n > 0 {
        let checked: Vec<usize> = progress
            .checked
            .get(index)
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|i| *i < n)
            .collect();
        if n <= MAX_CHECKBOX_OPTIONS {
            let mut el =
                SlackBlockCheckboxesElement::new((0..n).map(|i| check_item(q, i)).collect())
                    .with_action_id(SlackActionId(aref(ActionKind::Toggle, None).encode()));
            if !checked.is_empty() {
                el = el.with_initial_options(checked.iter().map(|i| check_item(q, *i)).collect());
            }
            elements.push(el.into());
        } else {
            let mut el = SlackBlockMultiStaticSelectElement::new()
                .with_action_id(SlackActionId(aref(ActionKind::Toggle, None).encode()))
                .with_placeholder(plain("Choose options", MAX_OPTION_TEXT))
                .with_options((0..n).map(|i| select_item(q, i)).collect());
            if !checked.is_empty() {
                el = el.with_initial_options(checked.iter().map(|i| select_item(q, *i)).collect());
            }
            accessory = Some(SlackSectionBlockElement::MultiStaticSelect(el));
        }
        elements.push(
            button("Submit", aref(ActionKind::Submit, None), None)
                .with_style(SlackBlockButtonStyle::Primary)
                .into(),
        );
    } else if n > 0 && n <= MAX_BUTTONS {
        for i in 0..n {
            let mut b = button(
                &option_text(q, i),
                aref(ActionKind::Choose, Some(i)),
                Some(i.to_string()),
            );
            if picked.is_some_and(|p| p.contains(&q.options[i].label)) {
                b = b.with_style(SlackBlockButtonStyle::Primary);
            }
            elements.push(b.into());
        }
    } else if n > 0 {
        let el = SlackBlockStaticSelectElement::new()
            .with_action_id(SlackActionId(aref(ActionKind::Select, None).encode()))
            .with_placeholder(plain("Choose an option", MAX_OPTION_TEXT))
            .with_options((0..n).map(|i| select_item(q, i)).collect());
        elements.push(el.into());
    }
    if q.custom {
        let text = if n == 0 { "Answer…" } else { "Other…" };
        elements.push(button(text, aref(ActionKind::Other, None), None).into());
    }
    let section = match accessory {
        Some(a) => section.with_accessory(a),
        None => section,
    };
    vec![section.into(), SlackActionsBlock::new(elements).into()]
}

/// The "Skip" button of a question set at `revision`: it dismisses the whole call.
fn skip_button(revision: u64) -> SlackBlockButtonElement {
    let skip = ActionRef {
        kind: ActionKind::Skip,
        question: 0,
        option: None,
        revision,
    };
    button(SKIP_LABEL, skip, None)
}

/// The blocks of the message for a question set, at `revision` with `progress`: each
/// question's section and controls, then the "Skip" button in an actions block of its own.
pub fn question_blocks_for(
    input: &QuestionInput,
    revision: u64,
    progress: &Progress,
) -> Vec<SlackBlock> {
    let mut blocks: Vec<SlackBlock> = input
        .questions
        .iter()
        .enumerate()
        .flat_map(|(i, q)| question_blocks(i, q, progress, revision))
        .collect();
    if blocks.len() < MAX_MESSAGE_BLOCKS {
        blocks.push(SlackActionsBlock::new(vec![skip_button(revision).into()]).into());
        return blocks;
    }
    compact_blocks(input, revision)
}

/// The compact message for a set too large for one message: a summary, an "Answer…" button and
/// "Skip".
pub fn compact_blocks(input: &QuestionInput, revision: u64) -> Vec<SlackBlock> {
    let summary = input
        .questions
        .iter()
        .enumerate()
        .map(|(i, q)| format!("{}. *{}* {}", i + 1, escape(&q.header), escape(&q.question)))
        .collect::<Vec<_>>()
        .join("\n");
    let open = ActionRef {
        kind: ActionKind::Other,
        question: 0,
        option: None,
        revision,
    };
    vec![
        SlackSectionBlock::new().with_text(mrkdwn(&summary)).into(),
        SlackActionsBlock::new(vec![
            button("Answer…", open, None)
                .with_style(SlackBlockButtonStyle::Primary)
                .into(),
            skip_button(revision).into(),
        ])
        .into(),
    ]
}

/// The notification text of a question message (shown where blocks are not).
pub fn fallback_text(input: &QuestionInput) -> String {
    let first = input
        .questions
        .first()
        .map(|q| q.question.as_str())
        .unwrap_or("A question");
    truncate(first, MAX_SECTION_TEXT)
}

/// The modal (`views.open` payload) for a whole question set: a radio group / checkbox group
/// (a select above 10 options) per question with options, and a text input where `custom`;
/// `private_metadata` carries the form locator.
pub fn modal_view(
    input: &QuestionInput,
    locator: &QuestionModalMetadata,
) -> Result<SlackView, Error> {
    let metadata = encode_question_modal_metadata(locator);
    if metadata.chars().count() > MAX_PRIVATE_METADATA {
        return Err(Error::TooLarge(
            "the form locator exceeds 3000 characters".into(),
        ));
    }
    let mut blocks: Vec<SlackBlock> = Vec::new();
    for (i, q) in input.questions.iter().enumerate() {
        let label = plain(&format!("{}: {}", q.header, q.question), MAX_LABEL_TEXT);
        let n = q.options.len().min(MAX_SELECT_OPTIONS);
        if n > 0 {
            let id = SlackActionId(modal_input_id(i, false));
            let element: SlackInputBlockElement = match (q.multiple, n <= MAX_CHECKBOX_OPTIONS) {
                (true, true) => {
                    SlackBlockCheckboxesElement::new((0..n).map(|o| check_item(q, o)).collect())
                        .with_action_id(id)
                        .into()
                }
                (false, true) => {
                    SlackBlockRadioButtonsElement::new((0..n).map(|o| check_item(q, o)).collect())
                        .with_action_id(id)
                        .into()
                }
                (true, false) => SlackInputBlockElement::MultiStaticSelect(
                    SlackBlockMultiStaticSelectElement::new()
                        .with_action_id(id)
                        .with_options((0..n).map(|o| select_item(q, o)).collect()),
                ),
                (false, false) => SlackBlockStaticSelectElement::new()
                    .with_action_id(id)
                    .with_options((0..n).map(|o| select_item(q, o)).collect())
                    .into(),
            };
            blocks.push(
                SlackInputBlock::new(label.clone(), element)
                    .with_block_id(SlackBlockId(format!("q{i}")))
                    .with_optional(q.custom)
                    .into(),
            );
        }
        if q.custom {
            let text_label = if n > 0 {
                plain(&format!("{}: other answer", q.header), MAX_LABEL_TEXT)
            } else {
                label
            };
            blocks.push(
                SlackInputBlock::new(
                    text_label,
                    SlackBlockPlainTextInputElement::new()
                        .with_action_id(SlackActionId(modal_input_id(i, true)))
                        .into(),
                )
                .with_block_id(SlackBlockId(format!("q{i}t")))
                .with_optional(n > 0)
                .into(),
            );
        }
    }
    if blocks.len() > MAX_MODAL_BLOCKS {
        return Err(Error::TooLarge(format!(
            "the form needs {} blocks, Slack allows {MAX_MODAL_BLOCKS}",
            blocks.len()
        )));
    }
    Ok(SlackView::Modal(
        SlackModalView::new(plain("Answer", MAX_MODAL_TITLE), blocks)
            .with_submit(plain("Submit", MAX_MODAL_TITLE))
            .with_close(plain("Cancel", MAX_MODAL_TITLE))
            .with_callback_id(SlackCallbackId(MODAL_CALLBACK_ID.to_string()))
            .with_private_metadata(metadata),
    ))
}

fn answers_text(output: &QuestionOutput, single: bool) -> String {
    if single && let Some(a) = output.answers.first() {
        return escape(&a.selected.join(", "));
    }
    output
        .answers
        .iter()
        .map(|a| format!("{}: {}", escape(&a.header), escape(&a.selected.join(", "))))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The actor as a Slack mention (`<@U…>`), which Slack shows as their name.
fn mention(actor: Option<&Actor>) -> Option<String> {
    actor
        .and_then(|a| a.identity.as_ref())
        .map(|id| format!("<@{}>", id.user.id))
}

fn by(actor: Option<&Actor>) -> String {
    mention(actor)
        .map(|m| format!(" by {m}"))
        .unwrap_or_default()
}

/// The outcome line of a settled question ("✅ Answered by <@U…>: Label", "⏭️ Skipped by <@U…>"
/// for a dismissal, expired, cancelled).
pub fn outcome_text(
    input: &QuestionInput,
    outcome: &QuestionOutcome,
    actor: Option<&Actor>,
) -> String {
    let single = input.questions.len() == 1;
    let text = match outcome {
        QuestionOutcome::Answered(o) => {
            format!("✅ Answered{}: {}", by(actor), answers_text(o, single))
        }
        QuestionOutcome::Dismissed => format!("⏭️ {}", skipped_text(mention(actor).as_deref())),
        QuestionOutcome::Expired(Some(o)) => {
            format!("⌛ Expired — defaults used: {}", answers_text(o, single))
        }
        QuestionOutcome::Expired(None) => "⌛ Expired".to_string(),
        QuestionOutcome::Cancelled => "✖️ Cancelled".to_string(),
        _ => "Closed".to_string(),
    };
    truncate(&text, MAX_SECTION_TEXT)
}

/// The blocks of a settled question: the questions (no controls) and a context line with the outcome.
pub fn settled_blocks(
    input: &QuestionInput,
    outcome: &QuestionOutcome,
    actor: Option<&Actor>,
) -> Vec<SlackBlock> {
    let summary = input
        .questions
        .iter()
        .map(|q| format!("*{}* {}", escape(&q.header), escape(&q.question)))
        .collect::<Vec<_>>()
        .join("\n");
    vec![
        SlackSectionBlock::new().with_text(mrkdwn(&summary)).into(),
        SlackContextBlock::new(vec![
            SlackBlockMarkDownText::new(outcome_text(input, outcome, actor)).into(),
        ])
        .into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use frogbot_model::{ChannelIdentity, PlatformUser, QuestionAnswer, QuestionOption};
    use serde_json::{Value, json};

    fn item(header: &str, n: usize, multiple: bool, custom: bool) -> QuestionItem {
        QuestionItem {
            header: header.into(),
            question: format!("Pick for {header}?"),
            options: (0..n)
                .map(|i| QuestionOption {
                    label: format!("option {i}"),
                    description: None,
                })
                .collect(),
            multiple,
            custom,
            default: None,
            ..Default::default()
        }
    }

    fn input(items: Vec<QuestionItem>) -> QuestionInput {
        QuestionInput {
            questions: items,
            expires_in_seconds: None,
        }
    }

    fn json(blocks: &[SlackBlock]) -> Value {
        serde_json::to_value(blocks).unwrap()
    }

    fn elements(blocks: &Value, i: usize) -> Vec<Value> {
        blocks[i]["elements"].as_array().unwrap().clone()
    }

    #[test]
    fn up_to_five_options_are_buttons_carrying_the_option_index() {
        let b = json(&question_blocks_for(
            &input(vec![item("Env", 5, false, false)]),
            2,
            &Progress::default(),
        ));
        assert_eq!(b.as_array().unwrap().len(), 3);
        assert_eq!(b[0]["type"], "section");
        let els = elements(&b, 1);
        assert_eq!(els.len(), 5);
        assert!(els.iter().all(|e| e["type"] == "button"));
        assert_eq!(els[3]["value"], "3");
        assert_eq!(els[3]["action_id"], "fb1:b:0:3:2");
        // Skip, below the questions, carries the revision and no value.
        let skip = elements(&b, 2);
        assert_eq!(skip.len(), 1);
        assert_eq!(skip[0]["text"]["text"], "Skip");
        assert_eq!(skip[0]["action_id"], "fb1:k:0:-:2");
        assert!(skip[0].get("value").is_none());
    }

    #[test]
    fn more_than_five_options_are_a_static_select_capped_at_100() {
        let b = json(&question_blocks_for(
            &input(vec![item("Env", 6, false, false)]),
            0,
            &Progress::default(),
        ));
        let els = elements(&b, 1);
        assert_eq!(els.len(), 1);
        assert_eq!(els[0]["type"], "static_select");
        assert_eq!(els[0]["options"].as_array().unwrap().len(), 6);
        let b = json(&question_blocks_for(
            &input(vec![item("Env", 150, false, false)]),
            0,
            &Progress::default(),
        ));
        assert_eq!(
            elements(&b, 1)[0]["options"].as_array().unwrap().len(),
            MAX_SELECT_OPTIONS
        );
    }

    #[test]
    fn long_texts_are_truncated_to_slack_limits() {
        let mut q = item("Env", 3, false, false);
        q.options[0].label = "x".repeat(200);
        q.question = "y".repeat(5000);
        let b = json(&question_blocks_for(
            &input(vec![q.clone()]),
            0,
            &Progress::default(),
        ));
        let section = b[0]["text"]["text"].as_str().unwrap();
        assert_eq!(section.chars().count(), MAX_SECTION_TEXT);
        let button = elements(&b, 1)[0]["text"]["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(button.chars().count(), MAX_BUTTON_TEXT);
        assert!(button.ends_with('…'));
        let mut q6 = q.clone();
        q6.options = (0..8)
            .map(|i| QuestionOption {
                label: format!("{i}{}", "z".repeat(100)),
                description: None,
            })
            .collect();
        let b = json(&question_blocks_for(
            &input(vec![q6]),
            0,
            &Progress::default(),
        ));
        for o in elements(&b, 1)[0]["options"].as_array().unwrap() {
            assert!(o["text"]["text"].as_str().unwrap().chars().count() <= MAX_OPTION_TEXT);
        }
    }

    #[test]
    fn multiple_is_checkboxes_and_submit_custom_adds_other() {
        let b = json(&question_blocks_for(
            &input(vec![item("Checks", 3, true, true)]),
            1,
            &Progress {
                picks: vec![None],
                checked: vec![vec![1]],
                prompts: vec![],
            },
        ));
        let els = elements(&b, 1);
        assert_eq!(els[0]["type"], "checkboxes");
        assert_eq!(els[0]["action_id"], "fb1:c:0:-:1");
        assert_eq!(els[0]["initial_options"][0]["value"], "1");
        assert_eq!(els[1]["text"]["text"], "Submit");
        assert_eq!(els[1]["action_id"], "fb1:u:0:-:1");
        assert_eq!(els[2]["text"]["text"], "Other…");
        assert_eq!(els[2]["action_id"], "fb1:o:0:-:1");
        // More than 10 options: a multi-select as the section's accessory.
        let b = json(&question_blocks_for(
            &input(vec![item("Checks", 11, true, false)]),
            0,
            &Progress::default(),
        ));
        assert_eq!(b[0]["accessory"]["type"], "multi_static_select");
        assert_eq!(elements(&b, 1).len(), 1);
    }

    #[test]
    fn at_most_25_blocks_large_sets_are_compact() {
        let twelve: Vec<_> = (0..12)
            .map(|i| item(&format!("Q{i}"), 2, false, false))
            .collect();
        // Twelve questions of two blocks each, and Skip's actions block.
        assert_eq!(
            question_blocks_for(&input(twelve), 0, &Progress::default()).len(),
            25
        );
        let thirteen: Vec<_> = (0..13)
            .map(|i| item(&format!("Q{i}"), 2, false, false))
            .collect();
        let b = json(&question_blocks_for(
            &input(thirteen),
            4,
            &Progress::default(),
        ));
        assert_eq!(b.as_array().unwrap().len(), 2);
        assert_eq!(elements(&b, 1)[0]["action_id"], "fb1:o:0:-:4");
        assert_eq!(elements(&b, 1)[1]["text"]["text"], "Skip");
        assert_eq!(elements(&b, 1)[1]["action_id"], "fb1:k:0:-:4");
    }

    #[test]
    fn modal_has_inputs_per_question_and_the_locator() {
        let i = input(vec![
            item("Env", 3, false, false),
            item("Checks", 3, true, false),
            item("Note", 0, false, true),
            item("Big", 20, false, true),
        ]);
        let loc = QuestionModalMetadata {
            thread_id: "C1:1.0".into(),
            message_id: "C1:2.0".into(),
        };
        let v = serde_json::to_value(modal_view(&i, &loc).unwrap()).unwrap();
        assert_eq!(v["type"], "modal");
        assert_eq!(
            v["private_metadata"].as_str().unwrap(),
            encode_question_modal_metadata(&loc)
        );
        assert!(v["title"]["text"].as_str().unwrap().chars().count() <= MAX_MODAL_TITLE);
        let blocks = v["blocks"].as_array().unwrap();
        let kinds: Vec<_> = blocks
            .iter()
            .map(|b| b["element"]["type"].clone())
            .collect();
        assert_eq!(
            kinds,
            vec![
                json!("radio_buttons"),
                json!("checkboxes"),
                json!("plain_text_input"),
                json!("static_select"),
                json!("plain_text_input")
            ]
        );
        assert_eq!(blocks[0]["element"]["action_id"], modal_input_id(0, false));
        assert_eq!(blocks[2]["element"]["action_id"], modal_input_id(2, true));
        // More than 100 blocks does not fit a modal.
        let many: Vec<_> = (0..51)
            .map(|n| item(&format!("Q{n}"), 2, false, true))
            .collect();
        assert!(matches!(
            modal_view(&input(many), &loc),
            Err(Error::TooLarge(_))
        ));
        // A locator above 3000 characters does not fit private_metadata.
        let long = QuestionModalMetadata {
            thread_id: "C".repeat(3000),
            message_id: "m".into(),
        };
        assert!(matches!(modal_view(&i, &long), Err(Error::TooLarge(_))));
    }

    #[test]
    fn settled_shows_the_outcome_without_controls() {
        let i = input(vec![item("Env", 2, false, false)]);
        let actor = Actor {
            user: None,
            identity: Some(ChannelIdentity {
                platform: "slack".into(),
                user: PlatformUser {
                    id: "U42".into(),
                    name: None,
                    is_bot: false,
                },
            }),
        };
        let out = QuestionOutcome::Answered(QuestionOutput {
            answers: vec![QuestionAnswer {
                header: "Env".into(),
                selected: vec!["option 1".into()],
            }],
        });
        let b = json(&settled_blocks(&i, &out, Some(&actor)));
        assert_eq!(b[1]["type"], "context");
        assert_eq!(
            b[1]["elements"][0]["text"],
            "✅ Answered by <@U42>: option 1"
        );
        assert!(!b.to_string().contains("\"actions\""));
        assert_eq!(
            outcome_text(&i, &QuestionOutcome::Dismissed, Some(&actor)),
            "⏭️ Skipped by <@U42>"
        );
        assert_eq!(
            outcome_text(&i, &QuestionOutcome::Dismissed, None),
            "⏭️ Skipped."
        );
        assert_eq!(
            outcome_text(&i, &QuestionOutcome::Expired(None), None),
            "⌛ Expired"
        );
        assert_eq!(
            outcome_text(&i, &QuestionOutcome::Cancelled, None),
            "✖️ Cancelled"
        );
        let two = input(vec![item("A", 2, false, false), item("B", 2, true, false)]);
        let out = QuestionOutcome::Answered(QuestionOutput {
            answers: vec![
                QuestionAnswer {
                    header: "A".into(),
                    selected: vec!["option 0".into()],
                },
                QuestionAnswer {
                    header: "B".into(),
                    selected: vec!["option 0".into(), "option 1".into()],
                },
            ],
        });
        assert_eq!(
            outcome_text(&two, &out, None),
            "✅ Answered: A: option 0 · B: option 0, option 1"
        );
    }
}
