//! Pure rendering of FrogBot questions and agent messages as Slack Block Kit (slack-morphism
//! types). No I/O. Agent messages (a title, Markdown text and typed blocks): [`agent_message`].
//!
//! One message per question call. Per input kind:
//!
//! - **choice**: a section with the question, then an actions block: ≤ 5 options as buttons, more
//!   as a static select (≤ 100 options), `multiple` as checkboxes (a multi-select above 10
//!   options) plus a Submit button, and an "Other…" button where `custom` (it opens the modal of
//!   [`modal_view`]). Past 100 options no select is drawn (none would show only some): every
//!   option is listed, numbered, over as many sections as it needs, and the person replies in the
//!   thread with the number(s) (`N: …` in a set of several, see `questions::parse_reply`).
//! - **confirm**: one button with the confirm label, `primary`; where `danger`, in the `danger`
//!   style with Slack's confirmation dialog (the `confirm` composition object: "Are you sure?",
//!   the question, the label and "Cancel"). One tap answers it.
//! - **text_input**, **number_input**, **toggle**: Slack has no message control that answers them
//!   on a tap, so a set holding one is drawn as a *form card* ([`form_card`]): every question
//!   with a line saying what it takes (its range, unit, limit, default), an "Answer…" button
//!   that opens one modal holding every input of the set, and Skip; a set of one such input also
//!   shows the thread reply hint (`reply_hint`), as a typed reply answers it too.
//!
//! The modal ([`modal_view`], "Send answers") draws a choice as radio buttons / checkboxes /
//! selects (with a text input where `custom`), a `text_input` as a `plain_text_input`
//! (`multiline`, `max_length` ≤ 3,000, placeholder), a `number_input` as a `number_input`
//! (`is_decimal_allowed` unless a whole step from a whole `min`, `min_value`, `max_value`; the
//! range, step and unit as the hint), a toggle as a checkbox group of one option (unchecked is
//! "off"), a confirm as one checkbox with its label; defaults are the initial values.
//!
//! Below the questions, an actions block with a "Skip" button dismisses the whole call. A set that
//! would need more than 25 blocks is drawn compact: one summary section, and an "Answer…" button
//! that opens the modal beside "Skip". A set that expires ends with a context block "⏳ open until
//! 14:05 UTC" ([`expiry_block`]); [`question_card`] is the whole message. The settled view
//! ([`settled_blocks`]) prints each answer by kind: a number with its unit, a toggle "on"/"off",
//! a confirm its label, "—" for an optional input left empty.
//!
//! Control ids come from [`crate::ids`]; texts are cut to Slack's limits with
//! [`frogbot_model::text::truncate`] — never silently (issue 38): what a person must read is
//! written out in full somewhere visible.
//!
//! **Texts.** A question's text is Markdown converted to `mrkdwn` ([`to_mrkdwn`]: `**x**` bold,
//! a code fence without its language); the `plain_text` of buttons, options, labels and the
//! message's notification `text` is Markdown without its marks ([`to_plain`]).
//!
//! **Slack's limits and what a person sees past them** (each tested at the limit and one past
//! it, `tests/limits.rs`):
//!
//! - *Options of a choice* (a select holds 100): in a message, past 100 every option is listed,
//!   numbered, and answered by a typed reply (see above); in the modal, past 100 the options are
//!   listed, numbered, over sections, and the person types the number(s) in a text field
//!   (`listed_modal_blocks`; a number off the list is answered under the field,
//!   `response_action: errors`). Several selects were not chosen: a single choice spread over
//!   selects would let one pick in each.
//! - *Option labels and descriptions* (75 characters in a button, an option's text and its
//!   description): past 75 the control shows the text cut and numbered (`3. Lorem…`), and every
//!   option is written out in full, numbered, under the question (message and modal).
//!   Buttons show no descriptions: a choice drawn as buttons whose options have descriptions
//!   lists them under the question the same way.
//! - *Blocks of a message* (Slack 50; FrogBot keeps a question to 25): a set that needs more is
//!   drawn compact (a summary and "Answer…", which opens the modal).
//! - *Blocks of a modal* (100): a set whose modal would need more has no "Answer…": its card
//!   numbers the questions and says to answer by typed replies in the thread (`2: blue`,
//!   [`TOO_LARGE_FOR_A_FORM`]); a click on an older card's "Answer…" is told so privately.
//! - *A modal's title, submit and close* (24 characters) are FrogBot's own ("Answer", "Send
//!   answers", "Cancel"), whatever the questions; a question's text goes in its input's label
//!   (2,000).
//! - *A section's text* (3,000): a long list or summary continues in further sections.

use frogbot_channel::render;
use frogbot_model::text::{capitalised, truncate};
use frogbot_model::{
    Actor, ApprovalPages, InputKind, Progress, QuestionInput, QuestionItem, QuestionModalMetadata,
    QuestionOutcome, SKIP_LABEL, TOGGLE_ON, approval_pages_within, encode_question_modal_metadata,
};
use serde_json::{Value, json};
use slack_morphism::prelude::*;

use crate::Error;
use crate::format::{escape, to_mrkdwn, to_plain};
use crate::ids::{ActionKind, ActionRef, MODAL_CALLBACK_ID, modal_input_id};

/// Slack: at most 50 blocks per message.
pub const SLACK_MAX_MESSAGE_BLOCKS: usize = 50;
/// FrogBot keeps a question message to 25 blocks (Slack allows 50).
pub const MAX_MESSAGE_BLOCKS: usize = 25;
/// Slack: at most 25 elements in an actions block.
pub const MAX_ACTIONS_ELEMENTS: usize = 25;
/// Slack: at most 100 blocks in a modal.
pub const MAX_MODAL_BLOCKS: usize = 100;
/// Slack: a button's text.
pub const MAX_BUTTON_TEXT: usize = 75;
/// Slack: an option's text.
pub const MAX_OPTION_TEXT: usize = 75;
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
/// Slack: a `plain_text_input`'s `max_length` (and its value).
pub const MAX_TEXT_INPUT: u32 = 3000;
/// Slack: a placeholder's text.
pub const MAX_PLACEHOLDER: usize = 150;
/// Slack: an input block's hint.
pub const MAX_HINT: usize = 2000;
/// Slack: a confirmation dialog's title.
pub const MAX_CONFIRM_TITLE: usize = 100;
/// Slack: a confirmation dialog's text.
pub const MAX_CONFIRM_TEXT: usize = 300;
/// Slack: a confirmation dialog's confirm and deny button texts.
pub const MAX_CONFIRM_BUTTON: usize = 30;

/// A `plain_text` object: `text` without Markdown marks ([`to_plain`]: Slack shows a plain
/// text's `**` as they are), cut to `max`.
fn plain(text: &str, max: usize) -> SlackBlockPlainTextOnly {
    SlackBlockPlainText::new(truncate(&to_plain(text), max)).into()
}

/// A question's text as `mrkdwn` (Markdown converted: `**x**` bold, code fences without their
/// language, `&<>` escaped).
fn question_mrkdwn(q: &QuestionItem) -> String {
    to_mrkdwn(&shown_question(q))
}

fn mrkdwn(text: &str) -> SlackBlockText {
    SlackBlockMarkDownText::new(truncate(text, MAX_SECTION_TEXT)).into()
}

/// The most characters (escaped) of an approval's question one section shows: longer, its
/// arguments go in messages before the card ([`approval_pages`]).
pub const APPROVAL_ROOM: usize = MAX_SECTION_TEXT - 300;

/// How an approval whose question is too long for one section is shown: its complete arguments
/// over messages posted before the card, the card saying so (`None`: it fits, or is no approval).
pub fn approval_pages(q: &QuestionItem) -> Option<ApprovalPages> {
    approval_pages_within(q, APPROVAL_ROOM, |s| escape(s).chars().count())
}

/// The text a card shows for `q`: its question, or for a paged approval the card's text.
fn shown_question(q: &QuestionItem) -> std::borrow::Cow<'_, str> {
    frogbot_channel::render::shown_question(q, approval_pages)
}

/// A message of an approval's arguments (one of [`ApprovalPages::before`]).
pub fn approval_page_blocks(page: &str) -> Vec<SlackBlock> {
    // `mrkdwn`: the fence without its language (Slack would show "json" as a line of code).
    vec![
        SlackSectionBlock::new()
            .with_text(mrkdwn(&to_mrkdwn(page)))
            .into(),
    ]
}

/// An actions block of `elements`.
fn actions(elements: Vec<SlackActionBlockElement>) -> SlackBlock {
    SlackActionsBlock::new(elements).into()
}

/// A context block of one plain text.
fn context(text: String) -> SlackBlock {
    SlackContextBlock::new(vec![SlackBlockPlainText::new(text).into()]).into()
}

/// A context block of one `mrkdwn` text.
fn mrkdwn_context(text: String) -> SlackBlock {
    SlackContextBlock::new(vec![SlackBlockMarkDownText::new(text).into()]).into()
}

const PRIMARY: SlackBlockButtonStyle = SlackBlockButtonStyle::Primary;

fn button(text: &str, action: ActionRef, value: Option<String>) -> SlackBlockButtonElement {
    SlackBlockButtonElement::new(plain(text, MAX_BUTTON_TEXT))
        .with_action_id(SlackActionId(action.encode()))
        .opt_value(value)
}

/// Option `i`'s label as its control shows it: plain text, numbered where the options are
/// also listed in full in the question's text ([`options_in_full`]).
fn option_text(q: &QuestionItem, i: usize) -> String {
    let label = q
        .options
        .get(i)
        .map(|o| to_plain(&o.label))
        .unwrap_or_default();
    if labels_cut(q) {
        format!("{}. {label}", i + 1)
    } else {
        label
    }
}

/// Whether a control would cut one of `q`'s option labels or descriptions (Slack: 75
/// characters for a button's text, an option's text and its description).
fn labels_cut(q: &QuestionItem) -> bool {
    q.options.iter().any(|o| {
        to_plain(&o.label).chars().count() > MAX_OPTION_TEXT.min(MAX_BUTTON_TEXT)
            || o.description
                .as_deref()
                .is_some_and(|d| to_plain(d).chars().count() > MAX_OPTION_TEXT)
    })
}

/// The options of a choice written out in full under its question, numbered (`1. label —
/// description`), when its controls cannot show them whole: a label or description longer
/// than Slack's 75 characters (the control then shows it cut, numbered alike), or
/// descriptions on buttons (a button has none). `None` when the controls show everything.
fn options_in_full(q: &QuestionItem, as_buttons: bool) -> Option<String> {
    let described = q.options.iter().any(|o| o.description.is_some());
    if !(labels_cut(q) || (as_buttons && described)) {
        return None;
    }
    Some(numbered_options(q, to_mrkdwn))
}

/// `q`'s options numbered, one a line (`1. label — description`), their texts through `show`.
fn numbered_options(q: &QuestionItem, show: fn(&str) -> String) -> String {
    q.options
        .iter()
        .enumerate()
        .map(|(i, o)| match &o.description {
            Some(d) => format!("{}. {} — {}", i + 1, show(&o.label), show(d)),
            None => format!("{}. {}", i + 1, show(&o.label)),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The options `picked` as a control's initial ones (`None`: no `initial_options`).
fn initial<T>(picked: &[usize], item: impl Fn(usize) -> T) -> Option<Vec<T>> {
    (!picked.is_empty()).then(|| picked.iter().map(|&i| item(i)).collect())
}

fn select_item(q: &QuestionItem, i: usize) -> SlackBlockChoiceItem<SlackBlockPlainTextOnly> {
    SlackBlockChoiceItem::new(plain(&option_text(q, i), MAX_OPTION_TEXT), i.to_string())
        .opt_description(option_description(q, i))
}

fn check_item(q: &QuestionItem, i: usize) -> SlackBlockChoiceItem<SlackBlockText> {
    let text: SlackBlockText =
        SlackBlockPlainText::new(truncate(&option_text(q, i), MAX_OPTION_TEXT)).into();
    SlackBlockChoiceItem::new(text, i.to_string()).opt_description(option_description(q, i))
}

/// Option `i`'s description as its control shows it.
fn option_description(q: &QuestionItem, i: usize) -> Option<SlackBlockPlainTextOnly> {
    let d = q.options.get(i)?.description.as_deref()?;
    Some(plain(d, MAX_OPTION_TEXT))
}

fn question_text(q: &QuestionItem, picked: Option<&[String]>) -> String {
    let mut text = format!("*{}*\n{}", escape(&q.header), question_mrkdwn(q));
    if let Some(p) = picked {
        text.push_str(&format!("\n_Selected: {}_", escape(&p.join(", "))));
    }
    text
}

fn question_blocks(
    index: usize,
    several: bool,
    q: &QuestionItem,
    progress: &Progress,
    revision: u64,
) -> Vec<SlackBlock> {
    let picked = progress.picks.get(index).and_then(|p| p.as_deref());
    let section = SlackSectionBlock::new().with_text(mrkdwn(&question_text(q, picked)));
    let aref = |kind, option| ActionRef::new(kind, index, option, revision);
    let single = match q.kind {
        InputKind::Choice => None,
        InputKind::Confirm => Some(confirm_button(q, aref(ActionKind::Confirm, None))),
        // Text, number and toggle are answered in the modal (a set holding one is drawn as a
        // form card, see `form_card`); should one get here, its "Answer…" opens that modal.
        _ => Some(button("Answer…", aref(ActionKind::Other, None), None).with_style(PRIMARY)),
    };
    if let Some(b) = single {
        return vec![section.into(), actions(vec![b.into()])];
    }
    if q.options.len() > MAX_SELECT_OPTIONS {
        return listed_blocks(section, index, several, q, aref(ActionKind::Other, None));
    }
    let n = q.options.len();
    let as_buttons = !q.multiple && n <= MAX_BUTTONS;
    let mut sections = match options_in_full(q, as_buttons) {
        None => vec![section],
        // The question, then the options in full (over more sections past 3,000 characters).
        Some(list) => {
            let text = format!("{}\n{list}", question_text(q, picked));
            let pages = frogbot_model::text::split(&text, MAX_SECTION_TEXT).into_iter();
            pages.map(mrkdwn_section).collect()
        }
    };
    let mut elements: Vec<SlackActionBlockElement> = Vec::new();
    if q.multiple && n > 0 {
        let checked = progress.checked.get(index).into_iter().flatten().copied();
        let checked: Vec<usize> = checked.filter(|&i| i < n).collect();
        if n <= MAX_CHECKBOX_OPTIONS {
            let el = SlackBlockCheckboxesElement::new((0..n).map(|i| check_item(q, i)).collect())
                .with_action_id(SlackActionId(aref(ActionKind::Toggle, None).encode()))
                .opt_initial_options(initial(&checked, |i| check_item(q, i)));
            elements.push(el.into());
        } else {
            let el = SlackBlockMultiStaticSelectElement::new()
                .with_action_id(SlackActionId(aref(ActionKind::Toggle, None).encode()))
                .with_placeholder(plain("Choose options", MAX_OPTION_TEXT))
                .with_options((0..n).map(|i| select_item(q, i)).collect())
                .opt_initial_options(initial(&checked, |i| select_item(q, i)));
            // Slack allows a multi-select in a section (as its accessory), not in an actions block.
            sections[0].accessory = Some(SlackSectionBlockElement::MultiStaticSelect(el));
        }
        let submit = button("Submit", aref(ActionKind::Submit, None), None);
        elements.push(submit.with_style(PRIMARY).into());
    } else if n > 0 && n <= MAX_BUTTONS {
        for i in 0..n {
            let action = aref(ActionKind::Choose, Some(i));
            let picked = picked.is_some_and(|p| p.contains(&q.options[i].label));
            let b = button(&option_text(q, i), action, Some(i.to_string()));
            elements.push(b.opt_style(picked.then_some(PRIMARY)).into());
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
    let mut blocks: Vec<SlackBlock> = sections.into_iter().map(Into::into).collect();
    blocks.push(actions(elements));
    blocks
}

/// A choice with more options than a select holds (100): no select showing only some; every
/// option numbered over as many sections as it needs (3,000 characters each), the reply hint
/// (the number, or numbers separated by commas; `N: …` in a set of several), and "Other…" where
/// `custom`.
fn listed_blocks(
    section: SlackSectionBlock,
    index: usize,
    several: bool,
    q: &QuestionItem,
    other: ActionRef,
) -> Vec<SlackBlock> {
    let mut blocks: Vec<SlackBlock> = vec![section.into()];
    blocks.extend(mrkdwn_sections(&numbered_options(q, escape)));
    let what = render::choice_how(q.multiple);
    let start = if several {
        format!(
            ", starting with the question's number: \"{}: …\"",
            index + 1
        )
    } else {
        String::new()
    };
    blocks.push(context(format!("Reply in this thread with {what}{start}.")));
    if q.custom {
        blocks.push(actions(vec![button("Other…", other, None).into()]));
    }
    blocks
}

/// A `confirm` input's button: its label, in Slack's `danger` style with a confirmation dialog
/// (the `confirm` composition object: Slack asks "Are you sure?" before it sends the click) when
/// the input is `danger`, else `primary` and sent on the tap.
fn confirm_button(q: &QuestionItem, action: ActionRef) -> SlackBlockButtonElement {
    let label = q.confirm_label();
    let b = button(label, action, None);
    if !q.danger {
        return b.with_style(PRIMARY);
    }
    let dialog = SlackBlockConfirmItem::new(
        plain("Are you sure?", MAX_CONFIRM_TITLE),
        SlackBlockPlainText::new(truncate(&q.question, MAX_CONFIRM_TEXT)).into(),
        plain(label, MAX_CONFIRM_BUTTON),
        plain("Cancel", MAX_CONFIRM_BUTTON),
    )
    .with_style("danger".to_string());
    b.with_style(SlackBlockButtonStyle::Danger)
        .with_confirm(dialog)
}

/// Whether the set holds an input only the modal answers (text, number, toggle): its message is
/// then a form card ([`form_card`]).
pub fn needs_form(input: &QuestionInput) -> bool {
    input.questions.iter().any(|q| {
        matches!(
            q.kind,
            InputKind::TextInput | InputKind::NumberInput | InputKind::Toggle
        )
    })
}

/// One line describing what an input takes, for the form card and the modal's hints.
pub fn input_description(q: &QuestionItem) -> String {
    match q.kind {
        InputKind::TextInput => match q.max_length {
            Some(n) => format!("Text, at most {n} characters"),
            None => "Text".to_string(),
        },
        InputKind::NumberInput => capitalised(&render::number_phrase(q, ",")),
        InputKind::Toggle => match q.label.as_deref() {
            Some(l) => format!("On or off: {l}"),
            None => "On or off".to_string(),
        },
        // "Confirm: Approve"; without a label of its own, not "Confirm: Confirm".
        InputKind::Confirm => match q.label.as_deref().filter(|l| !l.trim().is_empty()) {
            Some(l) => format!("Confirm: {}", to_plain(l)),
            None => "A confirmation".to_string(),
        },
        _ => {
            let mut t = q
                .options
                .iter()
                .map(|o| o.label.as_str())
                .collect::<Vec<_>>()
                .join(" · ");
            if q.multiple {
                t = format!("Several of: {t}");
            }
            if q.custom {
                t = if t.is_empty() {
                    "Your own answer".to_string()
                } else {
                    format!("{t} · or your own answer")
                };
            }
            t
        }
    }
}

/// The form card of a set with an input only the modal answers: every question with what it
/// takes (and its default), a hint for a typed thread reply where the set is one question, and
/// an actions block with "Answer…" (opens the modal holding every input) and "Skip".
pub fn form_card(input: &QuestionInput, revision: u64) -> Vec<SlackBlock> {
    let fits = modal_fits(input);
    let summary = input
        .questions
        .iter()
        .enumerate()
        .map(|(i, q)| {
            // Numbered where the set is answered by typed replies (`2: blue`).
            let n = if fits {
                String::new()
            } else {
                format!("{}. ", i + 1)
            };
            let mut line = format!(
                "{n}*{}* {}\n_{}_",
                escape(&q.header),
                question_mrkdwn(q),
                escape(&input_description(q))
            );
            if let Some(d) = q.default_answer().filter(|d| !d.is_empty()) {
                line.push_str(&format!(" · default: {}", escape(&d.join(", "))));
            }
            if !q.required {
                line.push_str(" · optional");
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut blocks = mrkdwn_sections(&summary);
    if let [q] = input.questions.as_slice()
        && let Some(hint) = q.reply_hint()
    {
        let hint = format!("Or in this thread: {hint}");
        blocks.push(context(truncate(&hint, MAX_SECTION_TEXT)));
    }
    blocks.extend(form_controls(input, revision));
    blocks
}

/// `mrkdwn` text (a summary, a list of options) as sections of at most 3,000 characters (never
/// cut).
fn mrkdwn_sections(text: &str) -> Vec<SlackBlock> {
    frogbot_model::text::split(text, MAX_SECTION_TEXT)
        .into_iter()
        .map(|page| mrkdwn_section(page).into())
        .collect()
}

/// A section of `page`, `mrkdwn` already within 3,000 characters.
fn mrkdwn_section(page: String) -> SlackSectionBlock {
    SlackSectionBlock::new().with_text(SlackBlockMarkDownText::new(page).into())
}

/// "Answer…" (opens the modal) and "Skip"; where the modal would not fit Slack's 100 blocks,
/// the line saying to answer by typed replies ([`TOO_LARGE_FOR_A_FORM`]) and "Skip".
fn form_controls(input: &QuestionInput, revision: u64) -> Vec<SlackBlock> {
    let skip = skip_button(revision).into();
    if !modal_fits(input) {
        return vec![context(TOO_LARGE_FOR_A_FORM.into()), actions(vec![skip])];
    }
    let open = ActionRef::new(ActionKind::Other, 0, None, revision);
    let open = button("Answer…", open, None).with_style(PRIMARY);
    vec![actions(vec![open.into(), skip])]
}

/// The context line of a set that expires: "⏳ open until 14:05 UTC" (`expires_at` is RFC 3339;
/// `None` when absent or unreadable).
pub fn expiry_block(
    expires_at: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<SlackBlock> {
    let line = frogbot_model::expiry_line(expires_at, now)?;
    Some(mrkdwn_context(line))
}

/// The message of a question call: [`question_blocks_for`], or the [`form_card`] where the set
/// holds a text, number or toggle input, with the expiry line ([`expiry_block`]) last. A question
/// for people of Slack ([`QuestionInput::from`]: `slack:U…`, e.g. a person's `ask`) starts with
/// their mentions ([`asked_mentions`]), so Slack notifies them.
pub fn question_card(
    input: &QuestionInput,
    revision: u64,
    progress: &Progress,
    expires_at: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<SlackBlock> {
    let expiry = expiry_block(expires_at, now);
    let mut blocks = question_card_body(input, revision, progress, expiry.is_some());
    if let Some(line) = asked_mentions(input) {
        mention_first(&mut blocks, &line);
    }
    blocks.extend(expiry);
    blocks
}

/// The people a question is for on Slack (the `slack:U…` entries of its
/// [`from`](QuestionInput::from), valid user ids only, each once) as raw mentions, `<@U1> <@U2>`:
/// what makes Slack notify them. `None` when it names none. Nothing else a question shows is a
/// mention: its texts stay escaped, so a model cannot ping anyone.
pub fn asked_mentions(input: &QuestionInput) -> Option<String> {
    let ids = frogbot_channel::render::people_asked(input, crate::PLATFORM, |id| {
        crate::ids::check_user_id(id)
            .is_ok()
            .then(|| format!("<@{id}>"))
    });
    (!ids.is_empty()).then(|| ids.join(" "))
}

/// Puts the mentions `line` at the start of the first section's `mrkdwn` text, or in a section of
/// their own before the blocks when that would pass Slack's 3,000 characters.
fn mention_first(blocks: &mut Vec<SlackBlock>, line: &str) {
    if let Some(SlackBlock::Section(section)) = blocks.first_mut()
        && let Some(SlackBlockText::MarkDown(text)) = &mut section.text
        && text.text.chars().count() + line.chars().count() < MAX_SECTION_TEXT
    {
        text.text = format!("{line} {}", text.text);
        return;
    }
    blocks.insert(0, SlackSectionBlock::new().with_text(mrkdwn(line)).into());
}

/// [`question_card`] without its expiry line and mentions.
fn question_card_body(
    input: &QuestionInput,
    revision: u64,
    progress: &Progress,
    expires: bool,
) -> Vec<SlackBlock> {
    if needs_form(input) {
        return form_card(input, revision);
    }
    let b = question_blocks_for(input, revision, progress);
    if expires && b.len() >= MAX_MESSAGE_BLOCKS {
        return compact_blocks(input, revision);
    }
    b
}

/// The "Skip" button of a question set at `revision`: it dismisses the whole call.
fn skip_button(revision: u64) -> SlackBlockButtonElement {
    let skip = ActionRef::new(ActionKind::Skip, 0, None, revision);
    button(SKIP_LABEL, skip, None)
}

/// The blocks of the message for a question set, at `revision` with `progress`: each
/// question's section and controls, then the "Skip" button in an actions block of its own. Its
/// controls' `action_id`s read back with [`crate::ids::read_control`].
///
/// ```
/// use frogbot_model::{Progress, QuestionInput};
/// use frogbot_slack::render;
///
/// let input: QuestionInput = serde_json::from_value(serde_json::json!({"questions": [{
///     "header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]
/// }]}))
/// .unwrap();
/// let progress = Progress::from_state(&input, None);
/// let blocks = serde_json::to_value(render::question_blocks_for(&input, 0, &progress)).unwrap();
/// // The question's section, its buttons, then Skip.
/// assert_eq!(blocks[1]["elements"][1]["text"]["text"], "prod");
/// assert_eq!(blocks[1]["elements"][1]["action_id"], "fb1:b:0:1:0");
/// ```
pub fn question_blocks_for(
    input: &QuestionInput,
    revision: u64,
    progress: &Progress,
) -> Vec<SlackBlock> {
    let mut blocks: Vec<SlackBlock> = input
        .questions
        .iter()
        .enumerate()
        .flat_map(|(i, q)| question_blocks(i, input.questions.len() > 1, q, progress, revision))
        .collect();
    if blocks.len() < MAX_MESSAGE_BLOCKS {
        blocks.push(actions(vec![skip_button(revision).into()]));
        return blocks;
    }
    compact_blocks(input, revision)
}

/// The compact message for a set too large for one message: a summary, an "Answer…" button and
/// "Skip".
pub fn compact_blocks(input: &QuestionInput, revision: u64) -> Vec<SlackBlock> {
    if !modal_fits(input) {
        // Answered by typed replies: the card says what each question takes (its options).
        return form_card(input, revision);
    }
    let summary = input
        .questions
        .iter()
        .enumerate()
        .map(|(i, q)| format!("{}. *{}* {}", i + 1, escape(&q.header), question_mrkdwn(q)))
        .collect::<Vec<_>>()
        .join("\n");
    let mut blocks = mrkdwn_sections(&summary);
    blocks.extend(form_controls(input, revision));
    blocks
}

/// The notification text of a question message (shown where blocks are not).
pub fn fallback_text(input: &QuestionInput) -> String {
    let first = input
        .questions
        .first()
        .map(shown_question)
        .unwrap_or(std::borrow::Cow::Borrowed("A question"));
    // What the notification shows: plain text (no `**` or fences), `&<>` escaped; the people
    // the question is for mentioned first, so the notification is theirs.
    let text = escape(&to_plain(&first));
    match asked_mentions(input) {
        Some(line) => truncate(&format!("{line} {text}"), MAX_SECTION_TEXT),
        None => truncate(&text, MAX_SECTION_TEXT),
    }
}

/// The modal (`views.open` payload) for a whole question set, one input block per input: a
/// choice as a radio group / checkbox group (a select above 10 options) with a text input where
/// `custom`; a `text_input` as a `plain_text_input` (`multiline`, `max_length`, placeholder); a
/// `number_input` as a `number_input` (`is_decimal_allowed`, `min_value`, `max_value`; the
/// range, step and unit in the hint); a `toggle` as a checkbox group of one option; a `confirm`
/// as a checkbox group of one option labelled with the confirm label. Defaults are the initial
/// values; an input is optional where it is not `required` (a toggle always: unchecked is "off").
/// `private_metadata` carries the form locator. Slack itself refuses a submission with a
/// required input empty, a number out of `min`/`max` or with decimals where none are allowed,
/// or text over `max_length`; what remains (a `step`) is checked when the submission is read.
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
    let questions = input.questions.iter().enumerate();
    let blocks: Vec<SlackBlock> = questions.flat_map(|(i, q)| modal_blocks(i, q)).collect();
    if blocks.len() > MAX_MODAL_BLOCKS {
        return Err(Error::TooLarge(format!(
            "the form needs {} blocks, Slack allows {MAX_MODAL_BLOCKS}",
            blocks.len()
        )));
    }
    Ok(SlackView::Modal(
        SlackModalView::new(plain("Answer", MAX_MODAL_TITLE), blocks)
            .with_submit(plain("Send answers", MAX_MODAL_TITLE))
            .with_close(plain("Cancel", MAX_MODAL_TITLE))
            .with_callback_id(SlackCallbackId(MODAL_CALLBACK_ID.to_string()))
            .with_private_metadata(metadata),
    ))
}

/// A checkbox group of one option (value `"0"`), checked when `on`: a toggle's or a confirm's.
fn one_checkbox(text: &str, id: SlackActionId, on: bool) -> SlackInputBlockElement {
    let item = SlackBlockChoiceItem::new(
        SlackBlockText::from(SlackBlockPlainText::new(truncate(text, MAX_OPTION_TEXT))),
        "0".to_string(),
    );
    SlackBlockCheckboxesElement::new(vec![item.clone()])
        .with_action_id(id)
        .opt_initial_options(on.then(|| vec![item]))
        .into()
}

/// Whether the number input takes whole numbers only: a whole `step` from a whole `min` (or 0).
fn whole_numbers(q: &QuestionItem) -> bool {
    let whole = |n: &serde_json::Number| n.is_i64() || n.is_u64();
    q.step.as_ref().is_some_and(whole) && q.min.as_ref().is_none_or(whole)
}

fn modal_blocks(i: usize, q: &QuestionItem) -> Vec<SlackBlock> {
    let label = plain(
        &format!("{}: {}", q.header, shown_question(q)),
        MAX_LABEL_TEXT,
    );
    let default = q.default_answer().unwrap_or_default();
    let first_default = default.first().cloned();
    let pick = SlackActionId(modal_input_id(i, false));
    let text = SlackActionId(modal_input_id(i, true));
    let placeholder = || {
        let p = q.placeholder.as_deref().filter(|p| !p.trim().is_empty())?;
        Some(plain(p, MAX_PLACEHOLDER))
    };
    // (the input, whether it is optional, its hint)
    let (element, optional, hint): (SlackInputBlockElement, _, _) = match q.kind {
        InputKind::TextInput => {
            let limit = q.text_limit().min(MAX_TEXT_INPUT);
            let el = SlackBlockPlainTextInputElement::new()
                .with_action_id(text)
                .with_multiline(q.multiline)
                .with_max_length(u64::from(limit))
                .opt_placeholder(placeholder())
                .opt_initial_value(first_default.map(|d| d.chars().take(limit as usize).collect()));
            let hint = q.max_length.map(|_| input_description(q));
            (el.into(), !q.required, hint)
        }
        InputKind::NumberInput => {
            let el = SlackBlockNumberInputElement::new(!whole_numbers(q))
                .with_action_id(text)
                .opt_min_value(q.min.as_ref().map(ToString::to_string))
                .opt_max_value(q.max.as_ref().map(ToString::to_string))
                .opt_placeholder(placeholder())
                .opt_initial_value(first_default);
            (el.into(), !q.required, Some(input_description(q)))
        }
        InputKind::Toggle => {
            let text = q.label.as_deref().unwrap_or("On");
            let on = first_default.as_deref() == Some(TOGGLE_ON);
            // Always optional: unchecked is an answer ("off").
            (one_checkbox(text, pick, on), true, None)
        }
        InputKind::Confirm => {
            let on = first_default.is_some();
            let hint = Some("Check to confirm.".to_owned());
            (one_checkbox(q.confirm_label(), pick, on), !q.required, hint)
        }
        _ => return choice_modal_blocks(i, q, label, &default),
    };
    let hint = hint.map(|h| plain(&h, MAX_HINT));
    vec![
        input_block(i, label, element, optional)
            .opt_hint(hint)
            .into(),
    ]
}

fn choice_modal_blocks(
    i: usize,
    q: &QuestionItem,
    label: SlackBlockPlainTextOnly,
    default: &[String],
) -> Vec<SlackBlock> {
    let mut blocks: Vec<SlackBlock> = Vec::new();
    if q.options.len() > MAX_SELECT_OPTIONS {
        return listed_modal_blocks(i, q, label);
    }
    if let Some(list) = options_in_full(q, false) {
        // A label or description past 75 characters: its control shows it cut (numbered); the
        // options are written out in full above it.
        blocks.extend(mrkdwn_sections(&list));
    }
    let n = q.options.len();
    let picked: Vec<usize> = (0..n)
        .filter(|&o| default.contains(&q.options[o].label))
        .collect();
    if n > 0 {
        let id = SlackActionId(modal_input_id(i, false));
        let element: SlackInputBlockElement = match (q.multiple, n <= MAX_CHECKBOX_OPTIONS) {
            (true, true) => {
                SlackBlockCheckboxesElement::new((0..n).map(|o| check_item(q, o)).collect())
                    .with_action_id(id)
                    .opt_initial_options(initial(&picked, |o| check_item(q, o)))
                    .into()
            }
            (false, true) => {
                SlackBlockRadioButtonsElement::new((0..n).map(|o| check_item(q, o)).collect())
                    .with_action_id(id)
                    .opt_initial_option(picked.first().map(|&o| check_item(q, o)))
                    .into()
            }
            (true, false) => SlackInputBlockElement::MultiStaticSelect(
                SlackBlockMultiStaticSelectElement::new()
                    .with_action_id(id)
                    .with_options((0..n).map(|o| select_item(q, o)).collect())
                    .opt_initial_options(initial(&picked, |o| select_item(q, o))),
            ),
            (false, false) => SlackBlockStaticSelectElement::new()
                .with_action_id(id)
                .with_options((0..n).map(|o| select_item(q, o)).collect())
                .opt_initial_option(picked.first().map(|&o| select_item(q, o)))
                .into(),
        };
        blocks.push(input_block(i, label.clone(), element, q.custom || !q.required).into());
    }
    if q.custom {
        let text_label = if n > 0 { other_label(q) } else { label };
        blocks.push(other_input(i, text_label, n > 0 || !q.required));
    }
    blocks
}

/// Question `i`'s input block (`q{i}`) in the modal.
fn input_block(
    i: usize,
    label: SlackBlockPlainTextOnly,
    element: SlackInputBlockElement,
    optional: bool,
) -> SlackInputBlock {
    SlackInputBlock::new(label, element)
        .with_block_id(SlackBlockId(format!("q{i}")))
        .with_optional(optional)
}

/// The label of a choice's own-answer input.
fn other_label(q: &QuestionItem) -> SlackBlockPlainTextOnly {
    plain(&format!("{}: other answer", q.header), MAX_LABEL_TEXT)
}

/// Question `i`'s own-answer input in the modal: a `plain_text_input` (block `q{i}t`, the
/// question's text input id).
fn other_input(i: usize, label: SlackBlockPlainTextOnly, optional: bool) -> SlackBlock {
    let element = SlackBlockPlainTextInputElement::new()
        .with_action_id(SlackActionId(modal_input_id(i, true)));
    SlackInputBlock::new(label, element.into())
        .with_block_id(SlackBlockId(format!("q{i}t")))
        .with_optional(optional)
        .into()
}

/// A choice with more options than a select holds (100), in the modal: no select showing only
/// some; every option numbered over as many sections as it needs, then a `plain_text_input`
/// (block `q{i}`, the choice's own input id) where the person types the number of their choice
/// (the numbers, separated by commas, where `multiple`), read by
/// [`crate::questions::output_from_modal`]; and the own-answer input where `custom`.
fn listed_modal_blocks(
    i: usize,
    q: &QuestionItem,
    label: SlackBlockPlainTextOnly,
) -> Vec<SlackBlock> {
    let mut blocks = mrkdwn_sections(&numbered_options(q, to_mrkdwn));
    let what = capitalised(render::choice_how(q.multiple));
    let placeholder = if q.multiple { "e.g. 3, 17" } else { "e.g. 17" };
    let element = SlackBlockPlainTextInputElement::new()
        .with_action_id(SlackActionId(modal_input_id(i, false)))
        .with_placeholder(plain(placeholder, MAX_PLACEHOLDER));
    let hint = format!("{what}, from the list above (1 to {}).", q.options.len());
    blocks.push(
        input_block(i, label, element.into(), q.custom || !q.required)
            .with_hint(plain(&hint, MAX_HINT))
            .into(),
    );
    if q.custom {
        blocks.push(other_input(i, other_label(q), true));
    }
    blocks
}

/// The blocks the set's modal needs ([`modal_view`] refuses more than Slack's 100).
pub fn modal_block_count(input: &QuestionInput) -> usize {
    input
        .questions
        .iter()
        .enumerate()
        .map(|(i, q)| modal_blocks(i, q).len())
        .sum()
}

/// Whether the set's modal fits Slack's 100 blocks. A set that does not is answered by typed
/// replies in the thread (`2: blue`): its card shows how instead of an "Answer…" button.
pub fn modal_fits(input: &QuestionInput) -> bool {
    modal_block_count(input) <= MAX_MODAL_BLOCKS
}

/// The line a card shows instead of "Answer…" when the set's modal would not fit.
pub const TOO_LARGE_FOR_A_FORM: &str = "Too many questions for one Slack form: reply in this thread, one answer per reply, starting with the question's number (\"2: blue\"); \"skip\" skips them all.";

/// The actor as a Slack mention (`<@U…>`), which Slack shows as their name.
fn mention(actor: Option<&Actor>) -> Option<String> {
    actor
        .and_then(|a| a.identity.as_ref())
        .map(|id| format!("<@{}>", id.user.id))
}

/// The outcome line of a settled question ([`frogbot_model::outcome_line`]: "✅ Answered by
/// <@U…>: Label", "⏭️ Skipped by <@U…>" for a dismissal, expired, cancelled), within a section.
pub fn outcome_text(
    input: &QuestionInput,
    outcome: &QuestionOutcome,
    actor: Option<&Actor>,
) -> String {
    let line = frogbot_model::outcome_line(input, None, outcome, mention(actor).as_deref(), escape);
    truncate(&line, MAX_SECTION_TEXT)
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
        .map(|q| {
            format!(
                "*{}* {}",
                escape(&q.header),
                to_mrkdwn(frogbot_channel::render::settled_question(
                    q,
                    &shown_question(q)
                ))
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    vec![
        SlackSectionBlock::new().with_text(mrkdwn(&summary)).into(),
        mrkdwn_context(outcome_text(input, outcome, actor)),
    ]
}

// ---------------------------------------------------------------------------------------------
// Agent messages: a title, Markdown text and typed blocks (frogbot_model::blocks).
// ---------------------------------------------------------------------------------------------

/// Slack: a header block's text.
pub const MAX_HEADER_TEXT: usize = 150;
/// Slack: the text of one of a section's `fields`.
pub const MAX_FIELD_TEXT: usize = 2000;
/// Slack: a section's `fields`.
pub const MAX_SECTION_FIELDS: usize = 10;
/// Slack: a `table` block's rows (the header row included).
pub const MAX_TABLE_ROWS: usize = 100;
/// Slack: cells in a `table` row (and `column_settings`).
pub const MAX_TABLE_CELLS: usize = 20;
/// Slack: an `image` block's `alt_text`.
pub const MAX_ALT_TEXT: usize = 2000;
/// Slack: an `image` block's `image_url`.
pub const MAX_IMAGE_URL: usize = 3000;
/// The most characters of code in one `rich_text_preformatted` block (Slack documents no limit
/// for rich text; FrogBot keeps to a section's 3,000).
pub const MAX_CODE_CHARS: usize = 3000;
/// The most characters of one table cell drawn (a longer one is cut with "…").
pub const MAX_TABLE_CELL_CHARS: usize = 500;
/// The most characters of text (all the blocks' strings) one Slack message of an agent message
/// carries: Slack's limit on a message's `text`, taken as the size of a message (Slack documents
/// no limit on a request's size; a few megabytes are refused).
pub const MAX_MESSAGE_CHARS: usize = 40_000;
/// The longest notification `text` of an agent message's Slack message (Slack asks for at most
/// 4,000; the blocks carry the content).
pub const MAX_AGENT_FALLBACK: usize = 3000;

/// One Slack message an agent message is drawn in: its blocks (at most
/// [`SLACK_MAX_MESSAGE_BLOCKS`], at most one `table`) and its notification `text` (plain).
#[derive(Clone, Debug, PartialEq)]
pub struct AgentPiece {
    /// The blocks.
    pub blocks: Vec<SlackBlock>,
    /// The notification text.
    pub text: String,
}

/// One Slack block drawn for an agent message, with what it adds to the notification text.
struct Drawn {
    block: Value,
    text: Option<String>,
}

fn drawn(block: Value, text: impl Into<Option<String>>) -> Drawn {
    Drawn {
        block,
        text: text.into(),
    }
}

fn section(text: &str) -> Value {
    json!({"type": "section", "text": {"type": "mrkdwn", "text": truncate(text, MAX_SECTION_TEXT)}})
}

/// A table cell as Slack takes it: `raw_text`, never empty.
fn cell(text: &str) -> Value {
    let t = truncate(text, MAX_TABLE_CELL_CHARS);
    json!({"type": "raw_text", "text": if t.is_empty() { " ".to_owned() } else { t }})
}

/// How one FrogBot block is drawn in Slack blocks (without its event buttons).
fn block_body(block: &frogbot_model::blocks::Block) -> Vec<Drawn> {
    use frogbot_model::blocks::{BlockKind, UNKNOWN_BLOCK_TEXT};
    // The notification text is `mrkdwn` too: `&<>` escaped.
    let plain_text = escape(&block.plain_text());
    match &block.kind {
        BlockKind::Table { columns, rows } => {
            // One `table` per message and 100 rows with its header: a longer table continues
            // in another table (another message), its header repeated.
            let width = columns.len().min(MAX_TABLE_CELLS);
            let (header, body) = render::grid(columns, rows, width, cell);
            let row_size = |r: &[Value]| -> usize {
                r.iter()
                    .map(|c| c["text"].as_str().map_or(0, |t| t.chars().count()))
                    .sum()
            };
            let room = MAX_MESSAGE_CHARS - row_size(&header) - 1000;
            let mut parts: Vec<Drawn> = Vec::new();
            let mut rest = body.as_slice();
            loop {
                // The rows up to 99 and the message's room (a first row always).
                let mut size = 0;
                let n = (rest.iter().take(MAX_TABLE_ROWS - 1).enumerate())
                    .take_while(|(i, r)| {
                        size += row_size(r);
                        *i == 0 || size <= room
                    })
                    .count();
                let (these, after) = rest.split_at(n);
                let rows: Vec<_> = std::iter::once(&header).chain(these).cloned().collect();
                let text = parts.is_empty().then(|| plain_text.clone());
                parts.push(drawn(json!({"type": "table", "rows": rows}), text));
                rest = after;
                if rest.is_empty() {
                    break parts;
                }
            }
        }
        BlockKind::Progress { value, max, label } => {
            let bar = render::progress(*value, *max, render::PROGRESS_WIDTH, "`");
            let text = match label {
                Some(l) => format!("*{}*\n{bar}", escape(l)),
                None => bar,
            };
            vec![drawn(section(&text), plain_text)]
        }
        BlockKind::Image { url, alt } => {
            let alt = if alt.trim().is_empty() { "image" } else { alt };
            if url.chars().count() > MAX_IMAGE_URL {
                return vec![drawn(section(&plain_text), plain_text)];
            }
            vec![drawn(
                json!({"type": "image", "image_url": url, "alt_text": truncate(alt, MAX_ALT_TEXT)}),
                plain_text,
            )]
        }
        BlockKind::Code { code, language } => frogbot_model::text::split_exact(code, MAX_CODE_CHARS)
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let mut pre = json!({"type": "rich_text_preformatted",
                    "elements": [{"type": "text", "text": if c.is_empty() { " ".to_owned() } else { c }}]});
                if let Some(l) = language {
                    pre["language"] = l.clone().into();
                }
                let text = (i == 0).then(|| truncate(&plain_text, MAX_SECTION_TEXT));
                drawn(
                    json!({"type": "rich_text", "elements": [pre]}),
                    text,
                )
            })
            .collect(),
        BlockKind::Fields { fields } => fields
            .chunks(MAX_SECTION_FIELDS)
            .enumerate()
            .map(|(i, group)| {
                let texts: Vec<_> = group
                    .iter()
                    .map(|f| {
                        let key = truncate(&escape(&f.key), MAX_FIELD_TEXT / 4);
                        let room = MAX_FIELD_TEXT - key.chars().count() - 3;
                        let value = if f.value.is_empty() { "—".to_owned() } else { escape(&f.value) };
                        json!({"type": "mrkdwn",
                            "text": format!("*{key}*\n{}", truncate(&value, room))})
                    })
                    .collect();
                let text = (i == 0).then(|| truncate(&plain_text, MAX_SECTION_TEXT));
                drawn(json!({"type": "section", "fields": texts}), text)
            })
            .collect(),
        BlockKind::Html { title, url, .. } => {
            let name = title.as_deref().unwrap_or("App");
            // With the server's public_url, a link to the app's web view.
            let open = match url {
                Some(u) => format!("<{}|Open the app>", escape(u)),
                None => "An app: open it in the web chat.".to_owned(),
            };
            vec![drawn(
                section(&format!("🧩 *{}*\n{open}", escape(name))),
                plain_text,
            )]
        }
        _ => vec![drawn(section(UNKNOWN_BLOCK_TEXT), UNKNOWN_BLOCK_TEXT.to_owned())],
    }
}

/// The characters of every string in `v`.
fn text_size(v: &Value) -> usize {
    match v {
        Value::String(s) => s.chars().count(),
        Value::Array(a) => a.iter().map(text_size).sum(),
        Value::Object(o) => o.values().map(text_size).sum(),
        _ => 0,
    }
}

/// The actions block of a block's event buttons (block `index` of the message).
fn event_buttons(index: usize, block: &frogbot_model::blocks::Block) -> Option<Drawn> {
    if block.events.is_empty() {
        return None;
    }
    let elements: Vec<_> = block
        .events
        .iter()
        .take(MAX_ACTIONS_ELEMENTS)
        .enumerate()
        .map(|(j, e)| {
            json!({"type": "button",
                "action_id": crate::ids::event_id(frogbot_model::EventControl::new(index, j)),
                "text": {"type": "plain_text", "text": truncate(&e.label, MAX_BUTTON_TEXT)}})
        })
        .collect();
    Some(drawn(
        json!({"type": "actions", "elements": elements}),
        None,
    ))
}

/// An agent message drawn as Slack messages, in order: its title as a `header` block, its
/// Markdown text as `mrkdwn` sections (≤ 3,000 characters each), then each block: a `table` as
/// Slack's table block (`raw_text` cells; at most 100 rows with the header, so a longer table
/// continues in another message: one table per message), a progress as a section with a text
/// bar, an image as an `image` block, code as `rich_text_preformatted` (with its language), the
/// key/value pairs as a section's `fields` (≤ 10 per section, 2,000 characters each), an app
/// (`html`) as a section naming it and pointing to the web chat, an unknown type as
/// [`frogbot_model::blocks::UNKNOWN_BLOCK_TEXT`]; each block's event buttons as an `actions` block
/// below it (`action_id` [`crate::ids::event_id`]). The blocks are packed into messages of
/// at most [`SLACK_MAX_MESSAGE_BLOCKS`] blocks and one table; each message's `text` is the plain
/// text of what it shows (at most [`MAX_AGENT_FALLBACK`] characters). An empty message gives none.
pub fn agent_message(message: &frogbot_model::UiMessage) -> Vec<AgentPiece> {
    let mut all: Vec<Drawn> = Vec::new();
    if let Some(title) = render::title(message) {
        all.push(drawn(
            json!({"type": "header", "text": {"type": "plain_text", "text": truncate(title, MAX_HEADER_TEXT), "emoji": true}}),
            escape(title),
        ));
    }
    for piece in crate::format::messages(&message.text(), MAX_SECTION_TEXT) {
        all.push(drawn(section(&piece), piece));
    }
    for (i, block) in frogbot_model::blocks::blocks_of(message).iter().enumerate() {
        all.extend(block_body(block));
        all.extend(event_buttons(i, block));
    }
    let mut pieces: Vec<(Vec<Value>, Vec<String>, usize)> = Vec::new();
    for d in all {
        let table = d.block["type"] == "table";
        let size = text_size(&d.block);
        let (blocks, texts, chars) = render::last_with_room(&mut pieces, |(blocks, _, chars)| {
            blocks.len() >= SLACK_MAX_MESSAGE_BLOCKS
                || (table && blocks.iter().any(|b| b["type"] == "table"))
                || chars + size > MAX_MESSAGE_CHARS
        });
        blocks.push(d.block);
        texts.extend(d.text);
        *chars += size;
    }
    pieces
        .into_iter()
        .map(|(blocks, texts, _)| {
            let text = truncate(&texts.join("\n"), MAX_AGENT_FALLBACK);
            AgentPiece {
                blocks: serde_json::from_value(Value::Array(blocks)).unwrap_or_default(),
                text: if text.trim().is_empty() {
                    "…".to_owned()
                } else {
                    text
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use frogbot_model::{
        ChannelIdentity, PlatformUser, QuestionAnswer, QuestionOption, QuestionOutput,
    };
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
            from: Vec::new(),
            blocks: Vec::new(),
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
    fn more_than_five_options_are_a_static_select_up_to_100_then_listed() {
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
            &input(vec![item("Env", MAX_SELECT_OPTIONS, false, false)]),
            0,
            &Progress::default(),
        ));
        assert_eq!(
            elements(&b, 1)[0]["options"].as_array().unwrap().len(),
            MAX_SELECT_OPTIONS
        );
        // Past 100 (issue 38): no select showing only 100; all 150 listed, numbered.
        let b = json(&question_blocks_for(
            &input(vec![item("Env", 150, false, false)]),
            0,
            &Progress::default(),
        ));
        let all = b.to_string();
        assert!(!all.contains("static_select"), "{all}");
        for i in 1..=150 {
            assert!(all.contains(&format!("{i}. ")), "option {i} listed");
        }
    }

    #[test]
    fn long_texts_are_cut_to_slack_limits_and_written_out_in_full() {
        let mut q = item("Env", 3, false, false);
        q.options[0].label = "x".repeat(200);
        q.question = "y".repeat(5000);
        let b = json(&question_blocks_for(
            &input(vec![q.clone()]),
            0,
            &Progress::default(),
        ));
        let blocks = b.as_array().unwrap();
        let sections: Vec<&str> = blocks
            .iter()
            .filter(|b| b["type"] == "section")
            .map(|b| b["text"]["text"].as_str().unwrap())
            .collect();
        for s in &sections {
            assert!(s.chars().count() <= MAX_SECTION_TEXT);
        }
        // The 200-character label is written out in full, numbered like its cut button.
        assert!(
            sections
                .concat()
                .contains(&format!("1. {}", "x".repeat(200)))
        );
        let actions = blocks.iter().position(|b| b["type"] == "actions").unwrap();
        let button = elements(&b, actions)[0]["text"]["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(button.chars().count(), MAX_BUTTON_TEXT);
        assert!(
            button.starts_with("1. xxx") && button.ends_with('…'),
            "{button}"
        );
        let mut q6 = q.clone();
        q6.question = "Which?".into();
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
        assert!(
            b[0]["text"]["text"]
                .as_str()
                .unwrap()
                .contains(&format!("8. 7{}", "z".repeat(100)))
        );
    }

    #[test]
    fn multiple_is_checkboxes_and_submit_custom_adds_other() {
        let b = json(&question_blocks_for(
            &input(vec![item("Checks", 3, true, true)]),
            1,
            &Progress {
                picks: vec![None],
                checked: vec![vec![1]],
                ..Progress::default()
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
            "⌛ Expired."
        );
        assert_eq!(
            outcome_text(&i, &QuestionOutcome::Cancelled, None),
            "✖️ Cancelled."
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
