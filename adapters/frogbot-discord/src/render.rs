//! Pure rendering: a question → serenity message builders (buttons, string selects, modals); an
//! agent message (title, text, typed blocks, event buttons) → messages of content and embeds
//! ([`agent_message`]).
//!
//! One Discord message shows one step of a call (`QuestionMessage::question` = the index of its
//! first question); a question set is asked step by step (the shared `Progress`). A step is one
//! question, or — for a text or number input — the run of text and number inputs starting at it
//! (at most 5, [`form_run`]), answered together in one modal. Every control's `custom_id` is a
//! [`Control`] (revision, question, option: see [`crate::ids`]) so a click on an older control is
//! recognised as stale. Texts are cut with `frogbot_model::text::truncate`.
//!
//! Layout by input kind (Discord's limits: 5 action rows, 5 buttons a row, 25 options a select,
//! labels 80 (button) / 100 (option) characters, custom ids 100 characters; a modal: title 45,
//! 5 text inputs, labels 45, placeholders 100, values 4,000):
//! - `choice`, single, up to 25 buttons (options, plus "Other…" when `custom`, plus "No answer"
//!   when optional, plus "Skip"): buttons, 5 a row, "Skip" last;
//! - `choice`, `multiple`, or a single choice with more options: string selects (`multiple`: one
//!   select, `max_values` = its option count; single: up to 4 selects of 25), and a last row of
//!   buttons ("Other…" where `custom`, "No answer" where optional, "Skip");
//! - a choice with more options than its selects hold (over 25 for `multiple`, over 100 for a
//!   single choice, [`lists_options`]): no select; the message lists every option, numbered (with
//!   its description), and says to reply with the number (`multiple`: numbers separated by
//!   commas), read by `QuestionItem::choice_in_reply`; the last row of buttons stays;
//! - a label longer than its control shows (80 characters on a button, 100 in a select) is cut
//!   with "…" on the control and written out in full in the message; the answer is always the
//!   full label (controls carry the option's index);
//! - a step whose text is longer than one message (2,000 characters: many options, long
//!   descriptions) is not cut: its beginning is posted in messages just before the question
//!   message ([`step_pages`], [`step_lead_messages`]);
//! - `custom`: an "Other…" button that opens a modal with one text input;
//! - `text_input` and `number_input`: an "Answer…" button that opens one modal ([`form_modal`])
//!   holding the step's text and number inputs: a text input is a short or (`multiline`) paragraph
//!   text input with `max_length` = the input's limit; a number input a short text input
//!   (placeholder: the range and unit, `max_length` 64) read back with `read_number`. An optional
//!   input is a text input that is not `required` (left empty: answered with nothing); a
//!   `default` is the input's pre-filled value;
//! - `toggle`: two buttons, "✓ On" (success) and "✗ Off";
//! - `confirm`: one button with its label, danger-styled where `danger`, else success;
//! - an optional choice, toggle or confirm: a "No answer" button;
//! - every question message: a "Skip" button that dismisses the whole call, and, when the set has
//!   an expiry, a line "⏳ open until 14:05 UTC" (`frogbot_model::open_until_text`);
//! - a question for given people of Discord (`from`: `discord:ID`, a person's `ask`): its first
//!   message begins with their mentions and pings them, and only them ([`asked_users`]); nothing
//!   else the adapter posts pings anybody (empty `allowed_mentions`).
//!
//! The settled view ([`settled_pages`]) shows each question of the message — its header and
//! question, without the options, instructions and range line that served to answer it — and
//! who answered what, as it reads: "✅ Answered by <@id>: staging", a toggle "Notify the team —
//! off", a number with its unit, a confirm its label, an unanswered optional input "—". It is
//! never cut: past 2,000 characters (a long question with a long typed answer) it goes on in
//! replies to the question message, posted silently.
//!
//! A modal's `custom_id` is the form locator of `encode_question_modal_metadata` (thread id and
//! message id). Discord snowflakes have at most 20 digits, so it is at most 51 characters and no
//! stored token is needed; anything longer is refused with [`Error::Malformed`].

use std::borrow::Cow;
use std::ops::Range;

use frogbot_model::{
    Actor, ApprovalPages, InputKind, QuestionCall, QuestionInput, QuestionItem, QuestionMessage,
    QuestionModalMetadata, QuestionOutcome, SKIP_LABEL, encode_question_modal_metadata,
};
use serenity::builder::{
    CreateActionRow, CreateButton, CreateEmbed, CreateInputText, CreateMessage, CreateModal,
    CreateSelectMenu, CreateSelectMenuKind, CreateSelectMenuOption, EditMessage,
};
use serenity::model::application::{ButtonStyle, InputTextStyle};
use serenity::model::channel::MessageFlags;
use serenity::model::id::UserId;

use frogbot_channel::render;
use frogbot_model::text::truncate;

use crate::Error;
use crate::format::reply_message;
use crate::ids::{Control, ControlKind};

/// Discord's limit on the length of one message's content, in characters.
pub const MESSAGE_LIMIT: usize = 2000;
/// Discord's limit on a `custom_id`.
pub const CUSTOM_ID_LIMIT: usize = 100;
/// Discord's limit on action rows per message.
pub const ROW_LIMIT: usize = 5;
/// Discord's limit on buttons per action row.
pub const BUTTONS_PER_ROW: usize = 5;
/// Discord's limit on options per select.
pub const SELECT_OPTION_LIMIT: usize = 25;
const BUTTON_LABEL_LIMIT: usize = 80;
const OPTION_TEXT_LIMIT: usize = 100;
const MODAL_TITLE_LIMIT: usize = 45;
const INPUT_LABEL_LIMIT: usize = 45;
/// Discord's limit on text inputs in one modal.
pub const MODAL_INPUT_LIMIT: usize = 5;
const INPUT_PLACEHOLDER_LIMIT: usize = 100;
/// Discord's limit on a text input's length (`max_length`, `value`).
pub const INPUT_LENGTH_LIMIT: u32 = 4000;
/// The longest answer a number input takes (a number and its unit).
const NUMBER_LENGTH: u16 = 64;
/// The label of the button that opens the form of text and number inputs.
pub const ANSWER_LABEL: &str = "Answer…";
/// The label of the button that leaves an optional input unanswered.
pub const NO_ANSWER_LABEL: &str = "No answer";
/// The labels of a toggle's buttons (on, off).
pub const TOGGLE_LABELS: [&str; 2] = ["✓ On", "✗ Off"];

/// Whether a question is answered in the form (a modal): a text or number input.
pub fn in_form(item: &QuestionItem) -> bool {
    matches!(item.kind, InputKind::TextInput | InputKind::NumberInput)
}

/// The questions the message of step `index` asks: `index` alone, or — for a text or number
/// input — the run of text and number inputs starting there, at most [`MODAL_INPUT_LIMIT`] (one
/// modal holds them).
pub fn form_run(questions: &[QuestionItem], index: usize) -> Range<usize> {
    if !questions.get(index).is_some_and(in_form) {
        return index..index + 1;
    }
    let end = questions[index..]
        .iter()
        .take(MODAL_INPUT_LIMIT)
        .take_while(|q| in_form(q))
        .count();
    index..index + end
}

/// The most characters of an approval's question one message shows (room is left for its header,
/// option lines and expiry line): longer, its arguments go in messages before the card
/// ([`approval_pages`]).
pub const APPROVAL_ROOM: usize = MESSAGE_LIMIT - 400;

/// How an approval whose question is too long for one message is shown: its complete arguments
/// over messages posted before the card, the card saying so (`None`: it fits, or is no approval).
pub fn approval_pages(item: &QuestionItem) -> Option<ApprovalPages> {
    frogbot_model::approval_pages(item, APPROVAL_ROOM)
}

/// The text a card shows for `item`: its question, or for a paged approval the card's text.
fn shown_question(item: &QuestionItem) -> Cow<'_, str> {
    render::shown_question(item, approval_pages)
}

/// `**Header**`, with its place when the set has more than one question (`**Header** (2/3)`).
fn header_line(item: &QuestionItem, index: usize, total: usize) -> String {
    if total > 1 {
        format!("**{}** ({}/{total})", item.header, index + 1)
    } else {
        format!("**{}**", item.header)
    }
}

/// The text of a question message: header (with the step of a set), question, option descriptions.
pub fn question_content(item: &QuestionItem, index: usize, total: usize) -> String {
    let header = header_line(item, index, total);
    let mut text = format!("{header}\n{}", shown_question(item));
    if lists_options(item) {
        // More options than the controls hold: every option, numbered, answered by reply.
        for (i, option) in item.options.iter().enumerate() {
            text.push_str(&format!("\n{}. {}", i + 1, option.label));
            if let Some(description) = &option.description {
                text.push_str(&format!(" — {description}"));
            }
        }
        let how = render::choice_how(item.multiple);
        text.push_str(&format!("\n_Reply in this thread with {how}._"));
    } else {
        // A description, or a label longer than its control shows, is written out in full.
        let room = if uses_buttons(item) {
            BUTTON_LABEL_LIMIT
        } else {
            OPTION_TEXT_LIMIT
        };
        for option in &item.options {
            if let Some(description) = &option.description {
                text.push_str(&format!("\n• **{}**: {description}", option.label));
            } else if option.label.chars().count() > room {
                text.push_str(&format!("\n• **{}**", option.label));
            }
        }
    }
    if let Some(detail) = kind_detail(item) {
        text.push_str(&format!("\n_{detail}_"));
    }
    text
}

/// Whether a choice has more options than its controls hold — one select of 25 for `multiple` (a
/// select's choices are submitted together), four selects of 25 for a single choice (the fifth
/// row keeps the buttons): its message then lists every option, numbered, and the person answers
/// with a reply in the thread (the number, or numbers separated by commas); no select is drawn,
/// so none shows only some.
pub fn lists_options(item: &QuestionItem) -> bool {
    let selects = if item.multiple { 1 } else { ROW_LIMIT - 1 };
    item.kind == InputKind::Choice && item.options.len() > selects * SELECT_OPTION_LIMIT
}

/// What the message says about an input beyond its question: a number's range and unit, a text's
/// limit, that an input is optional.
fn kind_detail(item: &QuestionItem) -> Option<String> {
    let mut parts = Vec::new();
    match item.kind {
        InputKind::NumberInput => parts.push(render::number_phrase(item, "")),
        InputKind::TextInput => {
            if let Some(n) = item.max_length {
                parts.push(format!("at most {n} characters"));
            }
        }
        _ => {}
    }
    if !item.required {
        parts.push("optional".into());
    }
    (!parts.is_empty()).then(|| capitalised(&parts.join(", ")))
}

/// `text` with its first letter upper-case.
pub(crate) use frogbot_model::text::capitalised;

/// The text of step `index` of `questions` — each question of [`form_run`], and the expiry line
/// when the set has one (`expires_at`, RFC 3339; `now` is the clock) — over as many messages as
/// it needs (each at most [`MESSAGE_LIMIT`], `reserve` characters of it kept free): nothing is
/// cut. The last is the question message's content (with the expiry line); the others — a long
/// list of options — are posted just before it, in order.
pub fn step_pages(
    questions: &[QuestionItem],
    index: usize,
    expires_at: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
    reserve: usize,
) -> Vec<String> {
    let line = expiry_line(expires_at, now);
    let room = MESSAGE_LIMIT - reserve - line.as_ref().map_or(0, |l| l.chars().count() + 2);
    let total = questions.len();
    let run = form_run(questions, index);
    let questions = run.filter_map(|q| Some(question_content(questions.get(q)?, q, total)));
    let text = questions.collect::<Vec<_>>().join("\n\n");
    let mut pages = frogbot_model::text::split(&text, room);
    if pages.is_empty() {
        pages.push(String::new());
    }
    if let (Some(line), Some(last)) = (line, pages.last_mut()) {
        *last = format!("{last}\n\n{line}");
    }
    pages
}

/// The most people a question message mentions ([`asked_users`]): their mentions (at most 24
/// characters each) fit beside a full approval page ([`APPROVAL_ROOM`]) in one message.
pub const MAX_ASKED_MENTIONS: usize = 10;

/// The people of Discord a question is for: its `from` entries naming this platform's users
/// (`discord:ID`, e.g. a person's `ask`), in order, once each, at most [`MAX_ASKED_MENTIONS`].
/// Its first message begins with their mentions (`<@ID>`), and only they may be pinged by it.
pub fn asked_users(input: &QuestionInput) -> Vec<UserId> {
    let mut users = render::people_asked(input, crate::PLATFORM, |id| crate::ids::user_id(id).ok());
    users.truncate(MAX_ASKED_MENTIONS);
    users
}

/// The pages of step `index` of `call` as they are posted ([`step_pages`]): the first begins
/// with a mention of each of [`asked_users`] (room kept for it), and only it may ping them.
fn posted_pages(
    call: &QuestionCall,
    index: usize,
    now: chrono::DateTime<chrono::Utc>,
) -> (Vec<String>, Vec<UserId>) {
    // A paged approval mentions them in its first page instead ([`approval_lead_messages`]).
    let users = match paged_approval(call) {
        Some(_) => Vec::new(),
        None => asked_users(&call.input),
    };
    let lead = mentions_lead(&users);
    let mut pages = step_pages(
        &call.input.questions,
        index,
        call.expires_at.as_deref(),
        now,
        lead.chars().count(),
    );
    if let Some(first) = pages.first_mut() {
        first.insert_str(0, &lead);
    }
    (pages, users)
}

/// `<@A> <@B> `: the mentions a question's first message begins with.
fn mentions_lead(users: &[UserId]) -> String {
    users.iter().map(|u| format!("<@{u}> ")).collect()
}

/// The pages of `call` when it is an approval too long for its card ([`approval_pages`]).
fn paged_approval(call: &QuestionCall) -> Option<ApprovalPages> {
    match call.input.questions.as_slice() {
        [item] => approval_pages(item),
        _ => None,
    }
}

/// The messages posted before the card of an approval too long for it ([`approval_pages`]): its
/// complete arguments, in order. The first begins with the mentions of [`asked_users`] (the
/// approvers of Discord) and pings only them; the others are silent (`SUPPRESS_NOTIFICATIONS`)
/// and ping nobody. None for any other call.
pub fn approval_lead_messages(call: &QuestionCall) -> Vec<CreateMessage> {
    let Some(pages) = paged_approval(call) else {
        return Vec::new();
    };
    let users = asked_users(&call.input);
    let mut before = pages.before;
    if let Some(first) = before.first_mut() {
        first.insert_str(0, &mentions_lead(&users));
    }
    lead_messages(&before, &users, true)
}

/// Messages posted before a question's message: the first (beginning with the mentions of
/// `users`) pings only them, the others nobody (and, `silent`, without a notification).
fn lead_messages(pages: &[String], users: &[UserId], silent: bool) -> Vec<CreateMessage> {
    let message = |(i, page): (usize, &String)| match i {
        0 => reply_message(page).allowed_mentions(crate::format::only_users(users)),
        _ if silent => reply_message(page).flags(MessageFlags::SUPPRESS_NOTIFICATIONS),
        _ => reply_message(page),
    };
    pages.iter().enumerate().map(message).collect()
}

/// "⏳ open until 14:05 UTC", while the set has an expiry that reads.
pub use frogbot_model::expiry_line;

/// Whether a choice is drawn with buttons (else with string selects): its options, "Other…"
/// where `custom`, "No answer" where optional, and "Skip" fit 5 rows of 5.
pub fn uses_buttons(item: &QuestionItem) -> bool {
    !item.multiple
        && item.options.len() + usize::from(item.custom) + usize::from(!item.required)
            < ROW_LIMIT * BUTTONS_PER_ROW
}

/// The action rows of question `index` at `revision`.
pub fn question_components(
    item: &QuestionItem,
    revision: u64,
    index: usize,
) -> Vec<CreateActionRow> {
    let button = |kind, label: &str, style| {
        CreateButton::new(Control::id(revision, index, kind))
            .label(label)
            .style(style)
    };
    let skip = button(ControlKind::Skip, SKIP_LABEL, ButtonStyle::Secondary);
    let mut rows = Vec::new();
    // The buttons before "Other…", "No answer" and "Skip", and whether "Other…" is drawn.
    let (mut buttons, other) = match item.kind {
        InputKind::TextInput | InputKind::NumberInput => {
            let answer = button(ControlKind::Form, ANSWER_LABEL, ButtonStyle::Primary);
            return vec![CreateActionRow::Buttons(vec![answer, skip])];
        }
        InputKind::Toggle => {
            let on = button(
                ControlKind::Option(0),
                TOGGLE_LABELS[0],
                ButtonStyle::Success,
            );
            let off = button(
                ControlKind::Option(1),
                TOGGLE_LABELS[1],
                ButtonStyle::Secondary,
            );
            (vec![on, off], false)
        }
        InputKind::Confirm => {
            let style = if item.danger {
                ButtonStyle::Danger
            } else {
                ButtonStyle::Success
            };
            let label = truncate(item.confirm_label(), BUTTON_LABEL_LIMIT);
            (vec![button(ControlKind::Option(0), &label, style)], false)
        }
        _ if uses_buttons(item) => {
            let options = item.options.iter().enumerate().map(|(i, option)| {
                let label = truncate(&option.label, BUTTON_LABEL_LIMIT);
                button(ControlKind::Option(i), &label, ButtonStyle::Primary)
            });
            (options.collect(), item.custom)
        }
        _ => {
            rows = select_rows(item, revision, index);
            (Vec::new(), item.custom)
        }
    };
    if other {
        buttons.push(button(ControlKind::Other, "Other…", ButtonStyle::Secondary));
    }
    if !item.required {
        buttons.push(button(
            ControlKind::Clear,
            NO_ANSWER_LABEL,
            ButtonStyle::Secondary,
        ));
    }
    buttons.push(skip);
    let buttons = buttons.chunks(BUTTONS_PER_ROW);
    rows.extend(buttons.map(|row| CreateActionRow::Buttons(row.to_vec())));
    rows
}

/// The string selects of a choice not drawn with buttons: one for `multiple`, else up to four
/// (the last row is kept for the buttons, "Other…", "Skip"). Past what the selects hold, the
/// options are listed in the message and answered by reply: no select.
fn select_rows(item: &QuestionItem, revision: u64, index: usize) -> Vec<CreateActionRow> {
    let selects = match (lists_options(item), item.multiple) {
        (true, _) => 0,
        (false, true) => 1,
        (false, false) => ROW_LIMIT - 1,
    };
    let select = |(k, chunk): (usize, &[frogbot_model::QuestionOption])| {
        let first = k * SELECT_OPTION_LIMIT;
        let options: Vec<_> = chunk
            .iter()
            .zip(first..)
            .map(|(option, i)| {
                let label = truncate(&option.label, OPTION_TEXT_LIMIT);
                let o = CreateSelectMenuOption::new(label, i.to_string());
                match &option.description {
                    Some(d) => o.description(truncate(d, OPTION_TEXT_LIMIT)),
                    None => o,
                }
            })
            .collect();
        let count = u8::try_from(options.len()).unwrap_or(25);
        // Several selects (a single choice of 26 to 100 options): each says which options it
        // holds, so none reads as the whole list.
        let range = if item.options.len() > SELECT_OPTION_LIMIT {
            format!(" (options {}–{})", first + 1, first + chunk.len())
        } else {
            String::new()
        };
        let (max, choose) = if item.multiple {
            (count, "Choose one or more…")
        } else {
            (1, "Choose one…")
        };
        let kind = CreateSelectMenuKind::String { options };
        let menu =
            CreateSelectMenu::new(Control::id(revision, index, ControlKind::Select(k)), kind);
        CreateActionRow::SelectMenu(
            menu.min_values(1)
                .max_values(max)
                .placeholder(format!("{choose}{range}")),
        )
    };
    let chunks = item.options.chunks(SELECT_OPTION_LIMIT).take(selects);
    chunks.enumerate().map(select).collect()
}

/// The messages posted before the message asking step `index` of `call`: the beginning of a step
/// too long for one message ([`step_pages`]; nothing pings but the first's mention of the people
/// the question is for, [`asked_users`]). Usually none.
pub fn step_lead_messages(call: &QuestionCall, index: usize) -> Vec<CreateMessage> {
    let (mut pages, users) = posted_pages(call, index, chrono::Utc::now());
    pages.pop();
    lead_messages(&pages, &users, false)
}

/// The message asking step `index` of `call` at `revision` (with the expiry line as of now; a step
/// too long for one message ends it, [`step_lead_messages`] before it). Its controls' `custom_id`s
/// read back with [`crate::ids::read_control`]. Nothing in it pings anybody, but when it is the
/// step's first message, the people the question is for ([`asked_users`]): it begins with their
/// mentions, and `allowed_mentions` names only them.
///
/// ```
/// use frogbot_discord::render;
/// use frogbot_model::QuestionCall;
///
/// let call: QuestionCall = serde_json::from_value(serde_json::json!({"toolCallId": "c1",
///     "input": {"questions": [{"header": "Pond", "question": "Which pond?",
///         "options": [{"label": "Lily"}, {"label": "Mill"}]}]}}))
/// .unwrap();
/// let message = serde_json::to_value(render::question_message(&call, 0, 0)).unwrap();
/// // One button per option (then "Skip"), each `custom_id` carrying revision, question, option.
/// assert_eq!(message["components"][0]["components"][1]["label"], "Mill");
/// assert_eq!(message["components"][0]["components"][1]["custom_id"], "fq:0:0:1");
/// ```
pub fn question_message(call: &QuestionCall, revision: u64, index: usize) -> CreateMessage {
    match call.input.questions.get(index) {
        Some(item) => {
            let (mut pages, users) = posted_pages(call, index, chrono::Utc::now());
            let allowed = match pages.len() {
                1 => crate::format::only_users(&users),
                _ => crate::format::no_mentions(),
            };
            reply_message(pages.pop().unwrap_or_default())
                .allowed_mentions(allowed)
                .components(question_components(item, revision, index))
        }
        None => reply_message("(no such question)"),
    }
}

/// The form of step `index` at `revision`, opened from message `locator` (the "Answer…"
/// button): one text input per question of [`form_run`], each with the control id
/// `fq:{rev}:{q}:t` of its question; the modal's `custom_id` is the form locator.
pub fn form_modal(
    locator: &QuestionModalMetadata,
    questions: &[QuestionItem],
    revision: u64,
    index: usize,
) -> Result<CreateModal, Error> {
    let custom_id = modal_custom_id(locator)?;
    let run = form_run(questions, index);
    let Some(first) = questions.get(index).filter(|q| in_form(q)) else {
        return Err(Error::Malformed(format!(
            "question {index} is not a text or number input"
        )));
    };
    let inputs: Vec<CreateActionRow> = run
        .clone()
        .map(|q| CreateActionRow::InputText(form_input(&questions[q], revision, q)))
        .collect();
    let title = if run.len() == 1 {
        truncate(&first.header, MODAL_TITLE_LIMIT)
    } else {
        format!("{} questions", run.len())
    };
    Ok(CreateModal::new(custom_id, title).components(inputs))
}

/// The text input of a text or number input.
fn form_input(item: &QuestionItem, revision: u64, q: usize) -> CreateInputText {
    let id = Control::id(revision, q, ControlKind::Text);
    let label = if item.question.chars().count() <= INPUT_LABEL_LIMIT {
        &item.question
    } else {
        &item.header
    };
    let number = item.kind == InputKind::NumberInput;
    let style = if item.multiline && !number {
        InputTextStyle::Paragraph
    } else {
        InputTextStyle::Short
    };
    let placeholder = item
        .placeholder
        .clone()
        .or_else(|| number.then(|| capitalised(&render::number_phrase(item, ""))));
    let limit = if number {
        NUMBER_LENGTH
    } else {
        u16::try_from(item.text_limit().min(INPUT_LENGTH_LIMIT)).unwrap_or(4000)
    };
    let mut input = CreateInputText::new(style, truncate(label, INPUT_LABEL_LIMIT), id)
        .required(item.required)
        .max_length(limit);
    if let Some(p) = placeholder.filter(|p| !p.trim().is_empty()) {
        input = input.placeholder(truncate(&p, INPUT_PLACEHOLDER_LIMIT));
    }
    if let Some(value) = item
        .default_answer()
        .and_then(|d| d.into_iter().next())
        .filter(|v| v.chars().count() <= usize::from(limit))
    {
        input = input.value(value);
    }
    input
}

fn modal_custom_id(locator: &QuestionModalMetadata) -> Result<String, Error> {
    let custom_id = encode_question_modal_metadata(locator);
    if custom_id.chars().count() > CUSTOM_ID_LIMIT {
        return Err(Error::Malformed(format!(
            "form locator longer than {CUSTOM_ID_LIMIT} characters"
        )));
    }
    Ok(custom_id)
}

/// The "Other…" modal of question `item` at `revision`, opened from message `locator`: its
/// `custom_id` is the form locator, its one text input's id the control id `fq:{rev}:{qi}:t`.
pub fn other_modal(
    locator: &QuestionModalMetadata,
    item: &QuestionItem,
    revision: u64,
    index: usize,
) -> Result<CreateModal, Error> {
    let custom_id = modal_custom_id(locator)?;
    let label = truncate(&item.question, INPUT_LABEL_LIMIT);
    let id = Control::id(revision, index, ControlKind::Text);
    let input = CreateInputText::new(InputTextStyle::Paragraph, label, id)
        .required(true)
        .max_length(4000);
    Ok(
        CreateModal::new(custom_id, truncate(&item.header, MODAL_TITLE_LIMIT))
            .components(vec![CreateActionRow::InputText(input)]),
    )
}

/// The actor as Discord shows them: a mention (`<@id>`, shown as their name) when the id is a
/// snowflake, else their name.
fn actor_name(actor: Option<&Actor>) -> Option<String> {
    let user = &actor?.identity.as_ref()?.user;
    match user.id.parse::<u64>() {
        Ok(_) => Some(format!("<@{}>", user.id)),
        Err(_) => Some(user.name.clone().unwrap_or_else(|| user.id.clone())),
    }
}

/// How the outcome reads under question `q` of `input` ([`frogbot_model::outcome_line`]), with
/// who answered ("✅ Answered by <@id>: staging"; a dismissal "⏭️ Skipped by <@id>"; an approval
/// "✅ Approved by <@id>"). The answer is complete: nothing of it is cut ([`settled_pages`]
/// continues a long one in messages after).
pub fn outcome_text(
    input: &QuestionInput,
    q: Option<usize>,
    outcome: &QuestionOutcome,
    actor: Option<&Actor>,
) -> String {
    let by = actor_name(actor);
    frogbot_model::outcome_line(input, q, outcome, by.as_deref(), str::to_owned)
}

/// What a settled message says of the questions of step `index`: each one's header (with its
/// place in a set) and question, without what only served to answer it — the option list and
/// descriptions, the reply instructions, the input's range line, an approval's "Approve runs it;
/// …" sentence, the expiry line.
pub fn settled_head(questions: &[QuestionItem], index: usize) -> String {
    let total = questions.len();
    form_run(questions, index)
        .filter_map(|q| {
            let item = questions.get(q)?;
            let shown = shown_question(item);
            let question = render::settled_question(item, &shown).trim_end();
            Some(format!("{}\n{question}", header_line(item, q, total)))
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The settled view of one message of `call`: its questions ([`settled_head`]) and the outcome
/// (by `actor`), complete — over as many messages of at most [`MESSAGE_LIMIT`] characters as it
/// takes (a long question with a long typed answer): the first is the question message's edit,
/// the others are posted after it ([`DiscordQuestions`](crate::DiscordQuestions) posts them as
/// replies to it, silently). Nothing is cut.
pub fn settled_pages(
    call: &QuestionCall,
    message: &QuestionMessage,
    outcome: &QuestionOutcome,
    actor: Option<&Actor>,
) -> Vec<String> {
    let questions = &call.input.questions;
    let index = message.question.unwrap_or(0);
    let item = questions.get(index);
    let head = item.map_or_else(String::new, |_| {
        format!("{}\n\n", settled_head(questions, index))
    });
    let run = form_run(questions, index);
    let body = match (outcome, outcome.output()) {
        (QuestionOutcome::Answered(_) | QuestionOutcome::Expired(Some(_)), Some(output))
            if run.len() > 1 =>
        {
            let prefix = if matches!(outcome, QuestionOutcome::Answered(_)) {
                let by = actor_name(actor).map(|n| format!(" by {n}"));
                format!("✅ Answered{}", by.unwrap_or_default())
            } else {
                "⌛ Expired — defaults used".into()
            };
            let lines = render::answer_lines(&questions[run], output, |h| format!("**{h}**"));
            format!("{prefix}:\n{}", lines.join("\n"))
        }
        _ => outcome_text(&call.input, item.map(|_| index), outcome, actor),
    };
    let whole = format!("{head}{body}");
    if whole.chars().count() <= MESSAGE_LIMIT {
        return vec![whole];
    }
    // Too long for one message: the questions, then the outcome from a message of its own (its
    // line whole: never a mention cut in two).
    let mut pages = frogbot_model::text::split(&head, MESSAGE_LIMIT);
    pages.extend(word_pages(&body, MESSAGE_LIMIT));
    pages
}

/// `text` (an outcome line: a person's typed answer, read as words) over pieces of at most `max`
/// characters, cut between words (a word longer than `max` is cut where it must); nothing is
/// lost but the whitespace at the cuts. (Not `frogbot_model::text::split`: its Markdown splitter
/// takes `<@id>` for inline HTML and may cut the mention in two.)
fn word_pages(text: &str, max: usize) -> Vec<String> {
    let mut pages: Vec<String> = Vec::new();
    let mut page = String::new();
    for word in text.split_inclusive(char::is_whitespace) {
        let n = word.trim_end().chars().count();
        if !page.is_empty() && page.chars().count() + n > max {
            pages.push(std::mem::take(&mut page).trim_end().to_owned());
        }
        if n > max {
            let chars: Vec<char> = word.chars().collect();
            let mut chunks: Vec<String> = chars.chunks(max).map(String::from_iter).collect();
            page = chunks.pop().unwrap_or_default();
            pages.extend(chunks);
        } else {
            page.push_str(word);
        }
    }
    if !page.trim().is_empty() {
        pages.push(page.trim_end().to_owned());
    }
    pages
}

/// The settled edit of one message of `call`: the first of [`settled_pages`], and no components.
pub fn settled_edit(
    call: &QuestionCall,
    message: &QuestionMessage,
    outcome: &QuestionOutcome,
    actor: Option<&Actor>,
) -> EditMessage {
    let first = settled_pages(call, message, outcome, actor)
        .into_iter()
        .next()
        .unwrap_or_default();
    EditMessage::new().content(first).components(vec![])
}

// ---------------------------------------------------------------------------------------------
// Agent messages: a title, Markdown text and typed blocks (frogbot_model::blocks).
// ---------------------------------------------------------------------------------------------

/// Discord: embeds in one message.
pub const EMBEDS_PER_MESSAGE: usize = 10;
/// Discord: the characters of all the embeds of one message (titles, descriptions, field names
/// and values, footers, author names).
pub const EMBED_TOTAL_LIMIT: usize = 6000;
/// Discord: an embed's title.
pub const EMBED_TITLE_LIMIT: usize = 256;
/// Discord: an embed's description.
pub const EMBED_DESCRIPTION_LIMIT: usize = 4096;
/// Discord: fields in one embed.
pub const EMBED_FIELDS_LIMIT: usize = 25;
/// Discord: a field's name.
pub const FIELD_NAME_LIMIT: usize = 256;
/// Discord: a field's value.
pub const FIELD_VALUE_LIMIT: usize = 1024;
/// The colour of an agent message's embeds.
pub const AGENT_EMBED_COLOUR: u32 = 0x3B_A5_5C;
/// The most characters of a table cell drawn in a table's code block (a longer one is cut with
/// "…", so that the columns stay readable).
pub const TABLE_CELL_CHARS: usize = 60;

/// An embed as drawn, before serenity's builder: what counts toward Discord's limits is known.
#[derive(Clone, Debug, Default, PartialEq)]
struct Embed {
    title: Option<String>,
    description: Option<String>,
    fields: Vec<(String, String)>,
    image: Option<String>,
    /// Where the title links to.
    url: Option<String>,
}

impl Embed {
    /// The characters Discord counts toward [`EMBED_TOTAL_LIMIT`].
    fn size(&self) -> usize {
        let n = |s: &Option<String>| s.as_deref().map_or(0, |s| s.chars().count());
        n(&self.title)
            + n(&self.description)
            + self
                .fields
                .iter()
                .map(|(k, v)| k.chars().count() + v.chars().count())
                .sum::<usize>()
    }

    fn build(&self) -> CreateEmbed {
        let e = CreateEmbed::new().colour(AGENT_EMBED_COLOUR);
        let e = self.title.iter().fold(e, CreateEmbed::title);
        let e = self.description.iter().fold(e, CreateEmbed::description);
        let e = self.image.iter().fold(e, CreateEmbed::image);
        let e = self.url.iter().fold(e, CreateEmbed::url);
        self.fields.iter().fold(e, |e, (k, v)| e.field(k, v, true))
    }
}

fn described(text: &str) -> Embed {
    Embed {
        description: Some(truncate(text, EMBED_DESCRIPTION_LIMIT)),
        ..Embed::default()
    }
}

/// A table as code blocks of aligned columns, each within an embed's description (the header
/// repeated at the top of each).
fn table_embeds(columns: &[String], rows: &[Vec<String>]) -> Vec<Embed> {
    let cut = |s: &str| truncate(&s.replace(['\n', '\r'], " "), TABLE_CELL_CHARS);
    let (header, body) = render::grid(columns, rows, columns.len(), cut);
    let align = vec![pulldown_cmark::Alignment::None; header.len()];
    let draw = |chunk: &[Vec<String>]| {
        let all: Vec<Vec<String>> = std::iter::once(&header).chain(chunk).cloned().collect();
        crate::format::code_block(&frogbot_model::text::table_text(&align, &all), "")
    };
    let fits = |rows: &[Vec<String>]| draw(rows).chars().count() <= EMBED_DESCRIPTION_LIMIT;
    let mut out = Vec::new();
    let mut rest = &body[..];
    loop {
        // At least one row: a row too wide alone is cut by the description's limit.
        let n = (1..=rest.len()).take_while(|&n| fits(&rest[..n])).last();
        let n = n.unwrap_or(1).min(rest.len());
        out.push(described(&draw(&rest[..n])));
        rest = &rest[n..];
        if rest.is_empty() {
            break out;
        }
    }
}

/// How one block is drawn: embeds (its event buttons apart).
fn block_embeds(block: &frogbot_model::blocks::Block) -> Vec<Embed> {
    use frogbot_model::blocks::{BlockKind, UNKNOWN_BLOCK_TEXT};
    match &block.kind {
        BlockKind::Table { columns, rows } => table_embeds(columns, rows),
        BlockKind::Progress { value, max, label } => {
            vec![Embed {
                title: label.as_deref().map(|l| truncate(l, EMBED_TITLE_LIMIT)),
                description: Some(render::progress(*value, *max, render::PROGRESS_WIDTH, "`")),
                ..Embed::default()
            }]
        }
        BlockKind::Image { url, alt } => vec![Embed {
            description: (!alt.trim().is_empty()).then(|| truncate(alt, EMBED_DESCRIPTION_LIMIT)),
            image: Some(url.clone()),
            ..Embed::default()
        }],
        BlockKind::Code { code, language } => {
            let language = language.as_deref().unwrap_or("");
            let room = EMBED_DESCRIPTION_LIMIT - language.len() - 16;
            // `no_fence` may add a character per three backticks: cut the escaped text (the
            // block's own escaping finds nothing more to do).
            frogbot_model::text::split_exact(&crate::format::no_fence(code), room)
                .into_iter()
                .map(|c| described(&crate::format::code_block(&c, language)))
                .collect()
        }
        BlockKind::Fields { fields } => {
            // Each pair a field (a long value continues in the next field, named with a
            // zero-width space); embeds of at most 25 fields and a third of the message's total.
            let or = |text: String, blank: &str| match text.trim() {
                "" => blank.to_owned(),
                _ => text,
            };
            let mut out: Vec<Embed> = Vec::new();
            for f in fields {
                let value = or(f.value.clone(), "—");
                let pieces = frogbot_model::text::split_exact(&value, FIELD_VALUE_LIMIT);
                for (i, v) in pieces.into_iter().enumerate() {
                    let name = if i == 0 {
                        truncate(&f.key, FIELD_NAME_LIMIT)
                    } else {
                        "\u{200B}".to_owned()
                    };
                    let v = or(v, "\u{200B}");
                    let size = name.chars().count() + v.chars().count();
                    let e = render::last_with_room(&mut out, |e: &Embed| {
                        e.fields.len() >= EMBED_FIELDS_LIMIT
                            || e.size() + size > EMBED_TOTAL_LIMIT / 2
                    });
                    e.fields.push((name, v));
                }
            }
            out
        }
        BlockKind::Html { title, url, .. } => vec![Embed {
            title: Some(truncate(
                title.as_deref().unwrap_or("App"),
                EMBED_TITLE_LIMIT,
            )),
            // With the server's public_url, the title links to the app's web view.
            description: Some(match url {
                Some(_) => "🧩 An app: open it with its title.".to_owned(),
                None => "🧩 An app: open it in the web chat.".to_owned(),
            }),
            url: url.clone(),
            ..Embed::default()
        }],
        _ => vec![described(UNKNOWN_BLOCK_TEXT)],
    }
}

/// One Discord message an agent message is drawn in.
#[derive(Clone, Debug)]
pub struct AgentPiece {
    /// Its content (Markdown, at most [`MESSAGE_LIMIT`]), if any.
    pub content: Option<String>,
    /// Its embeds (at most [`EMBEDS_PER_MESSAGE`], [`EMBED_TOTAL_LIMIT`] characters in all).
    pub embeds: Vec<CreateEmbed>,
    /// Its rows of event buttons (at most [`ROW_LIMIT`], one per block).
    pub rows: Vec<CreateActionRow>,
}

impl AgentPiece {
    /// The message to post (`allowed_mentions` empty: nothing pings).
    pub fn create(&self) -> CreateMessage {
        reply_message(self.content.clone().unwrap_or_default())
            .embeds(self.embeds.clone())
            .components(self.rows.clone())
    }

    /// The edit that draws this piece over a message (every part replaced).
    pub fn edit(&self) -> EditMessage {
        EditMessage::new()
            .content(self.content.clone().unwrap_or_default())
            .embeds(self.embeds.clone())
            .components(self.rows.clone())
            .allowed_mentions(crate::format::no_mentions())
    }
}

/// An agent message drawn as Discord messages, in order: its title as a `## ` heading and its
/// Markdown text as content (split at [`MESSAGE_LIMIT`]), then each block as embeds (colour
/// [`AGENT_EMBED_COLOUR`]): a table as code blocks of aligned columns in descriptions (the header
/// repeated in each), a progress as a text bar with its label as the title, an image as the
/// embed's `image.url` with its alt text as the description, code as a ```` ```lang ```` block
/// (split at the description's 4,096), the key/value pairs as inline fields (names 256, values
/// 1,024 — a longer value continues in the next field — at most 25 an embed), an app (`html`) as
/// its title and a pointer to the web chat, an unknown type as
/// [`frogbot_model::blocks::UNKNOWN_BLOCK_TEXT`]; a block's event buttons as an action row of
/// buttons (`custom_id` [`crate::ids::event_id`]) on the message holding its last embed.
/// The embeds are packed into messages of at most [`EMBEDS_PER_MESSAGE`] embeds,
/// [`EMBED_TOTAL_LIMIT`] characters and [`ROW_LIMIT`] rows; the first ones go with the last text
/// message. An empty message gives none.
pub fn agent_message(message: &frogbot_model::UiMessage) -> Vec<AgentPiece> {
    #[derive(Default)]
    struct Draft {
        content: Option<String>,
        embeds: Vec<Embed>,
        rows: Vec<CreateActionRow>,
    }
    let mut texts = crate::format::messages(&message.text(), MESSAGE_LIMIT);
    if let Some(title) = render::title(message) {
        let title = format!(
            "## {}",
            truncate(&title.replace(['\n', '\r'], " "), EMBED_TITLE_LIMIT)
        );
        render::put_title(&mut texts, title, |title, first| {
            let fits = first.chars().count() + title.chars().count() < MESSAGE_LIMIT;
            fits.then(|| format!("{title}\n{first}"))
        });
    }
    let mut drafts: Vec<Draft> = texts
        .into_iter()
        .map(|t| Draft {
            content: Some(t),
            ..Draft::default()
        })
        .collect();
    for (i, block) in frogbot_model::blocks::blocks_of(message).iter().enumerate() {
        let embeds = block_embeds(block);
        let last = embeds.len() - 1;
        for (j, embed) in embeds.into_iter().enumerate() {
            let row = (j == last && !block.events.is_empty()).then(|| {
                let button = |(k, e): (usize, &frogbot_model::blocks::EventButton)| {
                    CreateButton::new(crate::ids::event_id(frogbot_model::EventControl::new(i, k)))
                        .label(truncate(&e.label, BUTTON_LABEL_LIMIT))
                        .style(ButtonStyle::Secondary)
                };
                let buttons = block.events.iter().take(BUTTONS_PER_ROW).enumerate();
                CreateActionRow::Buttons(buttons.map(button).collect())
            });
            let size = embed.size();
            let d = render::last_with_room(&mut drafts, |d: &Draft| {
                d.embeds.len() >= EMBEDS_PER_MESSAGE
                    || d.embeds.iter().map(Embed::size).sum::<usize>() + size > EMBED_TOTAL_LIMIT
                    || (row.is_some() && d.rows.len() >= ROW_LIMIT)
            });
            d.embeds.push(embed);
            d.rows.extend(row);
        }
    }
    drafts
        .into_iter()
        .map(|d| AgentPiece {
            content: d.content,
            embeds: d.embeds.iter().map(Embed::build).collect(),
            rows: d.rows,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use frogbot_model::{QuestionAnswer, QuestionInput, QuestionOutput};
    use serde_json::{Value, json};

    fn item(n: usize, multiple: bool, custom: bool) -> QuestionItem {
        serde_json::from_value(json!({
            "header": "Colour",
            "question": "Which colour?",
            "options": (0..n).map(|i| json!({"label": format!("option {i} {}", "x".repeat(150))})).collect::<Vec<_>>(),
            "multiple": multiple,
            "custom": custom
        }))
        .unwrap()
    }

    fn rows(item: &QuestionItem) -> Vec<Value> {
        serde_json::to_value(question_components(item, 7, 0))
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    fn custom_ids(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(id)) = map.get("custom_id") {
                    out.push(id.clone());
                }
                map.values().for_each(|v| custom_ids(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| custom_ids(v, out)),
            _ => {}
        }
    }

    #[test]
    fn few_single_choice_options_are_buttons_in_one_row() {
        let rows = rows(&item(3, false, false));
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0]["type"], 1);
        let buttons = rows[0]["components"].as_array().unwrap();
        assert_eq!(buttons.len(), 4, "three options and Skip");
        assert_eq!(buttons[3]["label"], "Skip");
        assert_eq!(buttons[3]["custom_id"], "fq:7:0:k");
        assert_eq!(buttons[3]["style"], 2);
        assert_eq!(buttons[0]["type"], 2);
        assert_eq!(buttons[0]["style"], 1);
        assert_eq!(buttons[0]["custom_id"], "fq:7:0:0");
        assert_eq!(buttons[2]["custom_id"], "fq:7:0:2");
        assert!(buttons[0]["label"].as_str().unwrap().chars().count() <= 80);
    }

    #[test]
    fn up_to_25_buttons_fill_five_rows_with_other_and_skip_last() {
        let rows = rows(&item(23, false, true));
        assert_eq!(rows.len(), 5);
        assert!(
            rows.iter()
                .all(|r| r["components"].as_array().unwrap().len() <= 5)
        );
        let last = rows[4]["components"].as_array().unwrap();
        assert_eq!(last[3]["custom_id"], "fq:7:0:o");
        assert_eq!(last[3]["label"], "Other…");
        assert_eq!(last[4]["custom_id"], "fq:7:0:k");
        assert_eq!(last[4]["label"], "Skip");
        // One more option does not fit 25 buttons with Skip: string selects.
        assert_eq!(
            self::rows(&item(24, false, true))[0]["components"][0]["type"],
            3
        );
    }

    #[test]
    fn many_options_become_string_selects() {
        let rows = rows(&item(60, false, true));
        // 3 selects (25 + 25 + 10) and the "Other…" row.
        assert_eq!(rows.len(), 4);
        let select = &rows[0]["components"][0];
        assert_eq!(select["type"], 3);
        assert_eq!(select["custom_id"], "fq:7:0:s0");
        assert_eq!(select["max_values"], 1);
        assert_eq!(select["options"].as_array().unwrap().len(), 25);
        assert_eq!(rows[2]["components"][0]["options"][9]["value"], "59");
        assert_eq!(rows[3]["components"][0]["custom_id"], "fq:7:0:o");
        assert_eq!(rows[3]["components"][1]["custom_id"], "fq:7:0:k");
        // Without "Other…", four selects (100 options) and the Skip row.
        let rows = self::rows(&item(100, false, false));
        assert_eq!(rows.len(), 5);
        assert_eq!(rows[3]["components"][0]["options"][24]["value"], "99");
        assert_eq!(rows[4]["components"][0]["label"], "Skip");
        // Past 100 (issue 38): no select showing only some; every option listed to reply with.
        let many = item(130, false, false);
        let rows = self::rows(&many);
        assert_eq!(rows.len(), 1, "the Skip row alone");
        assert_eq!(rows[0]["components"][0]["label"], "Skip");
        let pages =
            step_pages(std::slice::from_ref(&many), 0, None, chrono::Utc::now(), 0).join("\n");
        for option in &many.options {
            assert!(pages.contains(&option.label), "{} listed", option.label);
        }
        for option in select["options"].as_array().unwrap() {
            assert!(option["label"].as_str().unwrap().chars().count() <= 100);
        }
    }

    #[test]
    fn multiple_choice_is_one_select_with_max_values() {
        let rows = rows(&item(4, true, false));
        assert_eq!(rows.len(), 2, "the select and Skip");
        assert_eq!(rows[1]["components"][0]["custom_id"], "fq:7:0:k");
        let select = &rows[0]["components"][0];
        assert_eq!(select["type"], 3);
        assert_eq!(select["min_values"], 1);
        assert_eq!(select["max_values"], 4);
        let rows = self::rows(&item(25, true, false));
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["components"][0]["max_values"], 25);
        assert_eq!(
            rows[0]["components"][0]["options"]
                .as_array()
                .unwrap()
                .len(),
            25
        );
        // Past 25 (issue 38): no select showing only 25; every option listed to reply with.
        let many = item(40, true, false);
        let rows = self::rows(&many);
        assert_eq!(rows.len(), 1, "the Skip row alone");
        let pages =
            step_pages(std::slice::from_ref(&many), 0, None, chrono::Utc::now(), 0).join("\n");
        for option in &many.options {
            assert!(pages.contains(&option.label), "{} listed", option.label);
        }
    }

    #[test]
    fn every_custom_id_fits_and_rows_stay_within_limits() {
        for (n, multiple, custom) in [
            (1, false, true),
            (5, false, false),
            (25, false, false),
            (130, false, true),
            (130, true, true),
        ] {
            let json = serde_json::to_value(question_components(
                &item(n, multiple, custom),
                u64::MAX,
                usize::MAX,
            ))
            .unwrap();
            assert!(json.as_array().unwrap().len() <= ROW_LIMIT);
            let mut ids = Vec::new();
            custom_ids(&json, &mut ids);
            assert!(!ids.is_empty());
            assert!(ids.iter().all(|id| id.len() <= CUSTOM_ID_LIMIT), "{ids:?}");
        }
    }

    #[test]
    fn question_message_payload() {
        let input: QuestionInput = serde_json::from_value(json!({"questions": [
            {"header": "A", "question": "First?", "options": [{"label": "yes"}, {"label": "no", "description": "not at all"}]},
            {"header": "B", "question": "Second?", "options": [{"label": "x"}]}
        ]})).unwrap();
        let call = QuestionCall {
            tool_call_id: "c1".into(),
            input,
            expires_at: None,
        };
        let json = serde_json::to_value(question_message(&call, 0, 0)).unwrap();
        assert_eq!(json["content"], "**A** (1/2)\nFirst?\n• **no**: not at all");
        assert_eq!(json["components"].as_array().unwrap().len(), 1);
        // Nothing in it pings anybody (a model's `@everyone` or `<@id>` stays text).
        assert_eq!(
            json["allowed_mentions"],
            json!({"parse": [], "users": [], "roles": []})
        );
    }

    #[test]
    fn a_question_for_people_of_discord_mentions_and_pings_only_them() {
        let mut call: QuestionCall = serde_json::from_value(json!({"toolCallId": "c1",
            "input": {"questions": [{"header": "For bob", "question": "alice asks bob: Ship? <@9> @everyone",
                "options": [{"label": "yes"}, {"label": "no"}]}],
                "from": ["discord:300000000000000004", "alice", "slack:U1",
                         "discord:300000000000000004", "discord:bob", "discord:0", "discord:5"]}}))
        .unwrap();
        assert_eq!(
            asked_users(&call.input),
            [UserId::new(300000000000000004), UserId::new(5)],
            "this platform's people, once each, in order"
        );
        let json = serde_json::to_value(question_message(&call, 0, 0)).unwrap();
        assert_eq!(
            json["content"],
            "<@300000000000000004> <@5> **For bob**\nalice asks bob: Ship? <@9> @everyone"
        );
        assert_eq!(
            json["allowed_mentions"],
            json!({"parse": [], "users": ["300000000000000004", "5"], "roles": []}),
            "only they may be pinged"
        );
        // A step too long for one message: its first message mentions them, nothing else pings.
        call.input.questions[0].question = "word ".repeat(900);
        let leads: Vec<Value> = step_lead_messages(&call, 0)
            .iter()
            .map(|m| serde_json::to_value(m).unwrap())
            .collect();
        let last = serde_json::to_value(question_message(&call, 0, 0)).unwrap();
        assert!(!leads.is_empty(), "{last:#?}");
        assert!(
            leads[0]["content"]
                .as_str()
                .unwrap()
                .starts_with("<@300000000000000004> <@5> **For bob**")
        );
        assert_eq!(
            leads[0]["allowed_mentions"]["users"],
            json!(["300000000000000004", "5"])
        );
        for m in leads[1..].iter().chain([&last]) {
            assert_eq!(m["allowed_mentions"]["users"], json!([]));
            assert!(!m["content"].as_str().unwrap().contains("<@5>"));
        }
        for m in leads.iter().chain([&last]) {
            assert!(m["content"].as_str().unwrap().chars().count() <= MESSAGE_LIMIT);
        }
        // Ten at most.
        call.input.from = (1..=30)
            .map(|i| format!("discord:{}", u64::MAX - i))
            .collect();
        assert_eq!(asked_users(&call.input).len(), MAX_ASKED_MENTIONS);
    }

    #[test]
    fn other_modal_carries_the_locator() {
        let locator = QuestionModalMetadata {
            thread_id: "18446744073709551615".into(),
            message_id: "18446744073709551615".into(),
        };
        let modal = other_modal(&locator, &item(2, false, true), 3, 1).unwrap();
        let json = serde_json::to_value(&modal).unwrap();
        let id = json["custom_id"].as_str().unwrap();
        assert!(id.len() <= CUSTOM_ID_LIMIT, "{id}");
        assert_eq!(
            frogbot_model::decode_question_modal_metadata(id),
            Some(locator)
        );
        let input = &json["components"][0]["components"][0];
        assert_eq!(input["type"], 4);
        assert_eq!(input["custom_id"], "fq:3:1:t");
        assert_eq!(input["style"], 2);
        assert!(json["title"].as_str().unwrap().chars().count() <= 45);
    }

    #[test]
    fn settled_edit_shows_the_outcome_and_removes_components() {
        let input: QuestionInput = serde_json::from_value(json!({"questions": [
            {"header": "A", "question": "First?", "options": [{"label": "yes"}]}
        ]}))
        .unwrap();
        let call = QuestionCall {
            tool_call_id: "c1".into(),
            input,
            expires_at: None,
        };
        let message = QuestionMessage {
            id: "1".into(),
            posted_at: String::new(),
            question: Some(0),
        };
        let outcome = QuestionOutcome::Answered(QuestionOutput {
            answers: vec![QuestionAnswer {
                header: "A".into(),
                selected: vec!["yes".into()],
            }],
        });
        let json = serde_json::to_value(settled_edit(&call, &message, &outcome, None)).unwrap();
        assert_eq!(json["content"], "**A**\nFirst?\n\n✅ Answered: yes");
        assert_eq!(json["components"], json!([]));
        let skipped = |actor: Option<&Actor>| {
            let edit = settled_edit(&call, &message, &QuestionOutcome::Dismissed, actor);
            serde_json::to_value(edit).unwrap()
        };
        let json = skipped(None);
        assert_eq!(json["content"], "**A**\nFirst?\n\n⏭️ Skipped.");
        assert_eq!(json["components"], json!([]));
        let actor = |id: &str| Actor {
            user: None,
            identity: Some(frogbot_model::ChannelIdentity {
                platform: "discord".into(),
                user: frogbot_model::PlatformUser {
                    id: id.into(),
                    name: Some("Ada".into()),
                    is_bot: false,
                },
            }),
        };
        assert_eq!(
            skipped(Some(&actor("42")))["content"],
            "**A**\nFirst?\n\n⏭️ Skipped by <@42>"
        );
        assert_eq!(
            skipped(Some(&actor("not-a-snowflake")))["content"],
            "**A**\nFirst?\n\n⏭️ Skipped by Ada"
        );
    }

    fn kind(v: Value) -> QuestionItem {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn form_runs_hold_consecutive_text_and_number_inputs_up_to_five() {
        let text = |h: &str| kind(json!({"header": h, "question": "?", "kind": "text_input"}));
        let toggle = kind(json!({"header": "t", "question": "?", "kind": "toggle"}));
        let mut qs: Vec<QuestionItem> = (0..7).map(|i| text(&format!("q{i}"))).collect();
        assert_eq!(form_run(&qs, 0), 0..5);
        assert_eq!(form_run(&qs, 5), 5..7);
        qs[2] = toggle;
        assert_eq!(form_run(&qs, 0), 0..2);
        assert_eq!(form_run(&qs, 2), 2..3, "a toggle is a step of its own");
        assert_eq!(form_run(&qs, 9), 9..10);
    }

    #[test]
    fn toggle_and_confirm_are_buttons_and_optional_inputs_get_no_answer() {
        let toggle =
            kind(json!({"header": "t", "question": "?", "kind": "toggle", "required": false}));
        let rows = serde_json::to_value(question_components(&toggle, 2, 1)).unwrap();
        let b = &rows[0]["components"];
        assert_eq!(
            (
                b[0]["label"].clone(),
                b[0]["style"].clone(),
                b[0]["custom_id"].clone()
            ),
            (json!("✓ On"), json!(3), json!("fq:2:1:0"))
        );
        assert_eq!(
            (b[1]["label"].clone(), b[1]["custom_id"].clone()),
            (json!("✗ Off"), json!("fq:2:1:1"))
        );
        assert_eq!(
            (b[2]["label"].clone(), b[2]["custom_id"].clone()),
            (json!("No answer"), json!("fq:2:1:n"))
        );
        assert_eq!(b[3]["label"], "Skip");
        let confirm = |danger: bool| {
            let item = kind(
                json!({"header": "c", "question": "?", "kind": "confirm", "label": "x".repeat(90), "danger": danger}),
            );
            serde_json::to_value(question_components(&item, 0, 0)).unwrap()[0]["components"].clone()
        };
        assert_eq!(confirm(true)[0]["style"], 4);
        assert_eq!(confirm(false)[0]["style"], 3);
        assert_eq!(
            confirm(true)[0]["label"].as_str().unwrap().chars().count(),
            80
        );
        assert_eq!(
            confirm(true).as_array().unwrap().len(),
            2,
            "the confirm and Skip"
        );
        // An optional choice: "No answer" before Skip; it counts towards the 25 buttons.
        let mut choice = item(23, false, true);
        choice.required = false;
        let rows = self::rows(&choice);
        assert_eq!(
            rows[0]["components"][0]["type"], 3,
            "24 options + Other… + No answer + Skip: selects"
        );
        let last = rows.last().unwrap()["components"].as_array().unwrap();
        let labels: Vec<&str> = last.iter().map(|b| b["label"].as_str().unwrap()).collect();
        assert_eq!(labels, ["Other…", "No answer", "Skip"]);
    }

    #[test]
    fn the_expiry_line_and_answers_as_they_read() {
        let t = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc();
        let now = t("2026-12-01T10:00:00Z");
        assert_eq!(
            expiry_line(Some("2026-12-01T14:05:00Z"), now).unwrap(),
            "⏳ open until 14:05 UTC"
        );
        assert_eq!(expiry_line(Some("not a time"), now), None);
        assert_eq!(expiry_line(None, now), None);
        let q =
            kind(json!({"header": "h", "question": "Q?", "kind": "number_input", "unit": "pods"}));
        let pages = step_pages(
            std::slice::from_ref(&q),
            0,
            Some("2026-12-02T09:00:00Z"),
            now,
            0,
        );
        assert_eq!(
            pages,
            ["**h**\nQ?\n_A number (pods)_\n\n⏳ open until 2 Dec 09:00 UTC"]
        );
        // A long question set still fits with its expiry line.
        let long = kind(json!({"header": "h", "question": "x".repeat(3000), "kind": "text_input"}));
        let pages = step_pages(
            std::slice::from_ref(&long),
            0,
            Some("2026-12-01T14:05:00Z"),
            now,
            0,
        );
        assert!(pages.iter().all(|p| p.chars().count() <= MESSAGE_LIMIT));
        assert!(pages.last().unwrap().ends_with("open until 14:05 UTC"));
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(q.answer_text(&s(&["4"])), "4 pods");
        assert_eq!(q.answer_text(&[]), "—");
        let toggle = kind(json!({"header": "t", "question": "?", "kind": "toggle"}));
        assert_eq!(toggle.answer_text(&s(&["on"])), "t — on");
        assert_eq!(toggle.answer_text(&s(&["off"])), "t — off");
        let toggle = kind(
            json!({"header": "t", "question": "?", "kind": "toggle", "label": "Notify the team"}),
        );
        assert_eq!(toggle.answer_text(&s(&["off"])), "Notify the team — off");
    }

    fn answered(header: &str, selected: &str) -> QuestionOutcome {
        QuestionOutcome::Answered(QuestionOutput {
            answers: vec![QuestionAnswer {
                header: header.into(),
                selected: vec![selected.into()],
            }],
        })
    }

    fn one_call(item: Value) -> (QuestionCall, QuestionMessage) {
        let call = QuestionCall {
            tool_call_id: "c1".into(),
            input: serde_json::from_value(json!({"questions": [item]})).unwrap(),
            expires_at: None,
        };
        let message = QuestionMessage {
            id: "1".into(),
            posted_at: String::new(),
            question: Some(0),
        };
        (call, message)
    }

    fn ada() -> Actor {
        Actor {
            user: None,
            identity: Some(frogbot_model::ChannelIdentity {
                platform: "discord".into(),
                user: frogbot_model::PlatformUser {
                    id: "42".into(),
                    name: Some("Ada".into()),
                    is_bot: false,
                },
            }),
        }
    }

    #[test]
    fn a_settled_question_drops_how_to_answer_and_says_who() {
        let options: Vec<Value> = (1..=120)
            .map(|i| json!({"label": format!("o{i}")}))
            .collect();
        let (call, message) =
            one_call(json!({"header": "Pick", "question": "Which?", "options": options}));
        assert!(lists_options(&call.input.questions[0]));
        let pages = settled_pages(&call, &message, &answered("Pick", "o7"), Some(&ada()));
        assert_eq!(pages, ["**Pick**\nWhich?\n\n✅ Answered by <@42>: o7"]);
        let (call, message) = one_call(
            json!({"header": "Pods", "question": "How many?", "kind": "number_input", "min": 1}),
        );
        let pages = settled_pages(&call, &message, &answered("Pods", "3"), None);
        assert_eq!(pages, ["**Pods**\nHow many?\n\n✅ Answered: 3"]);
        let input = frogbot_model::approval_question("merge", &json!({"pr": 7}), &[], None);
        let call = QuestionCall {
            tool_call_id: "c1".into(),
            input,
            expires_at: None,
        };
        let outcome = answered(frogbot_model::APPROVAL_HEADER, frogbot_model::APPROVE_LABEL);
        let pages = settled_pages(&call, &message, &outcome, Some(&ada()));
        assert_eq!(pages.len(), 1);
        assert!(!pages[0].contains("runs it"), "{}", pages[0]);
        assert!(!pages[0].contains("Do not run it"), "{}", pages[0]);
        assert!(pages[0].contains("\"pr\": 7"), "{}", pages[0]);
        assert!(pages[0].ends_with("✅ Approved by <@42>"), "{}", pages[0]);
        // Its arguments over messages before the card: the settled card says where they are,
        // not how to answer.
        let input = frogbot_model::approval_question(
            "merge",
            &json!({"command": "a ".repeat(3000)}),
            &[],
            None,
        );
        assert!(approval_pages(&input.questions[0]).is_some());
        let call = QuestionCall {
            tool_call_id: "c1".into(),
            input,
            expires_at: None,
        };
        let pages = settled_pages(&call, &message, &outcome, Some(&ada()));
        assert_eq!(pages.len(), 1);
        assert!(!pages[0].contains("runs it"), "{}", pages[0]);
        assert!(pages[0].contains("messages above"), "{}", pages[0]);
    }

    #[test]
    fn word_pages_cut_between_words_and_lose_nothing() {
        assert_eq!(word_pages("ab cd ef", 5), ["ab cd", "ef"]);
        assert_eq!(word_pages("abcdefgh ij", 3), ["abc", "def", "gh", "ij"]);
        assert_eq!(word_pages("✅ by <@42>: x", 100), ["✅ by <@42>: x"]);
    }

    /// A question and a typed answer of 2,000 characters together are one message; one more
    /// character and the view goes on in a second message, the answer whole across them.
    #[test]
    fn a_settled_view_at_the_message_limit_and_one_past_it() {
        let (call, message) = one_call(
            json!({"header": "Why", "question": "Q?", "kind": "text_input", "max_length": 4000}),
        );
        let fixed = "**Why**\nQ?\n\n✅ Answered by <@42>: ".chars().count();
        // (The longest answer a text input takes, 4,000 characters: three messages or more.)
        for (n, want) in [
            (MESSAGE_LIMIT, 1..2),
            (MESSAGE_LIMIT + 1, 2..3),
            (4000 + fixed, 3..9),
        ] {
            let answer: String = (0..n - fixed)
                .map(|i| if i % 10 == 9 { ' ' } else { 'a' })
                .collect();
            let pages = settled_pages(&call, &message, &answered("Why", &answer), Some(&ada()));
            assert!(
                want.contains(&pages.len()),
                "{n} characters: {} pages",
                pages.len()
            );
            assert!(pages.iter().all(|p| p.chars().count() <= MESSAGE_LIMIT));
            let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
            let whole = pages.join(" ");
            assert_eq!(
                words(&whole),
                words(&format!("**Why**\nQ?\n\n✅ Answered by <@42>: {answer}")),
                "nothing cut at {n}"
            );
            let edit = serde_json::to_value(settled_edit(
                &call,
                &message,
                &answered("Why", &answer),
                Some(&ada()),
            ))
            .unwrap();
            assert_eq!(edit["content"], pages[0].as_str());
        }
    }
}
