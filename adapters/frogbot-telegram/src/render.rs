//! Pure drawing of questions: message texts in Telegram's HTML parse mode (cut to Telegram's
//! limits with [`frogbot_model::text::truncate`] on the shown text, then escaped with
//! [`crate::format::escape`]), inline keyboards with short callback tokens ([`crate::ids`]), the
//! ForceReply prompts, the set's card, and the settled texts.
//!
//! Each kind's control:
//! - `choice`: one button per option ("✓ label" once chosen or checked; a `multiple` one ends with
//!   Done); where `custom`, a ForceReply prompt ("Other…") beside it.
//! - `confirm`: one button with its label ("⚠️ label" when `danger`); a tap answers.
//! - `toggle`: alone in its set, two buttons "✓ On" / "✗ Off" (a tap answers); in a set of
//!   several inputs, one switch "✓ label" / "✗ label" that flips with each tap.
//! - `text_input` / `number_input`: a ForceReply prompt, sent at once (the client opens the reply
//!   to it; no extra "✏️ Answer" tap), with the kind's one-line hint
//!   ([`QuestionItem::reply_hint`]) and the placeholder in the input field. A reply that does not
//!   read (too long, not a number, out of range or step) is refused with the reason as a reply,
//!   and the prompt stays open for another reply.
//!
//! Layouts. A set of choices only (and a set of one input) gets one message per question, each
//! with its keyboard, answered once every question has its answer. A set of several inputs with
//! another kind or an optional input is answered together ([`is_card`]): its ForceReply prompts
//! first, then one card message last (FrogBot counts the controls of a call's last message only)
//! listing every input with its answer so far, the buttons of its choice, confirm and toggle
//! inputs, "📨 Send answers" (the toggles as shown, checked options, optional inputs left
//! unanswered as none; a required input still unanswered refuses the send with the reason) and
//! Skip. Every keyboard ends with "Skip" (a prompt says "reply skip").
//!
//! Telegram's limits, never silent (issue 38): a keyboard holds 100 buttons (the Bot API documents
//! no number; Telegram refuses more), callback data 1–64 bytes (the tokens of [`crate::ids`] are
//! at most 44), a text 4,096 characters after entity parsing. A lone choice with more options
//! than its keyboard holds is a numbered list answered by a reply ([`lists_options`]); a card's
//! choice whose options no longer fit the card's keyboard gets a prompt of its own listing them,
//! answered the same way ([`card_lists`]); a question, prompt or list longer than a message
//! continues in messages before the keyboard's or prompt's ([`question_pages`],
//! [`prompt_pages`]); a card whose questions would not fit one message has them written out in
//! full above it and lists each input by its header ([`card_compact`]); a label longer than a
//! button shows ([`MAX_BUTTON_TEXT`]) is written out in full in the text. A set with an expiry shows
//! "⏳ open until 14:05 UTC" ([`expiry_line`]) on its messages; the settled texts drop it for the
//! outcome ("⌛ Expired …" once it passed), the card for every answer.

use frogbot_model::text::{self, truncate};
use frogbot_model::{
    ApprovalPages, InputKind, Progress, QuestionInput, QuestionItem, QuestionOption,
    QuestionOutcome, SKIP_LABEL, TOGGLE_ON, skipped_text,
};
use teloxide::types::{ForceReply, InlineKeyboardButton, InlineKeyboardMarkup};

use frogbot_channel::render::{self, Laid, Shown};
use frogbot_model::UiMessage;
use frogbot_model::blocks::{Block, BlockKind, UNKNOWN_BLOCK_TEXT};

use crate::format::{escape, to_plain, visible_len};
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
/// a longer label cannot be read on a button; it is cut there, and the question text writes it
/// out in full.
pub const MAX_BUTTON_TEXT: usize = 64;
/// Telegram's limit on a ForceReply's `input_field_placeholder`, in characters (1–64).
pub const MAX_PLACEHOLDER: usize = 64;
/// The label of the button that answers a set drawn as a card ([`is_card`]).
pub const SEND_LABEL: &str = "📨 Send answers";
/// Room kept in a question message for the outcome line its settled text adds.
const OUTCOME_ROOM: usize = 300;

/// The line a set with an expiry shows while open: `⏳ open until 14:05 UTC`; `None` without an
/// expiry (or one that does not read as RFC 3339).
pub use frogbot_model::expiry_line;

/// Whether input `item` is drawn as a ForceReply prompt (text and number inputs).
pub fn is_prompt_kind(item: &QuestionItem) -> bool {
    matches!(item.kind, InputKind::TextInput | InputKind::NumberInput)
}

/// Whether question `q`'s own message carries an inline keyboard: a choice with options, a
/// confirm, a toggle.
pub fn has_keyboard(item: &QuestionItem) -> bool {
    match item.kind {
        InputKind::Choice => !item.options.is_empty(),
        InputKind::Confirm | InputKind::Toggle => true,
        _ => false,
    }
}

/// Whether the set is drawn as a card answered with "Send answers": several inputs, one of them
/// not a choice, or optional.
pub fn is_card(input: &QuestionInput) -> bool {
    input.questions.len() > 1
        && input
            .questions
            .iter()
            .any(|q| q.kind != InputKind::Choice || !q.required)
}

/// Whether the toggle `q` shows on: its answer once given, else its default (off without one)
/// switched once per ✓/✗ tap (kept as option 0 checked in [`Progress::checked`]).
pub fn toggle_on(input: &QuestionInput, q: usize, progress: &Progress) -> bool {
    let on = |answer: &[String]| answer.first().map(String::as_str) == Some(TOGGLE_ON);
    if let Some(Some(p)) = progress.picks.get(q) {
        return on(p);
    }
    let initial = input.questions[q].default_answer().is_some_and(|d| on(&d));
    initial != progress.checked(q).contains(&0)
}

/// Joins the open text of a message with its expiry line, cut to fit a message with room for the
/// outcome line, and escapes it for the HTML parse mode.
fn open_html(plain: String, expiry: Option<&str>) -> String {
    let plain = match expiry {
        Some(line) => format!("{plain}\n\n{line}"),
        None => plain,
    };
    escape(&truncate(&plain, MAX_TEXT - OUTCOME_ROOM))
}

/// The text of question `q` (HTML): header, question, option descriptions, what to do, and the
/// expiry line when given. The shown text fits a message with room for the outcome line of
/// [`settled_text`].
pub fn question_text(input: &QuestionInput, q: usize, expiry: Option<&str>) -> String {
    question_pages(input, q, expiry).pop().unwrap_or_default()
}

/// Whether question `q` is a choice with more options than its keyboard holds (99 buttons with
/// Skip, 98 with Done): its message then lists every option, numbered, to answer by a reply with
/// the number (numbers separated by commas for `multiple`), and draws no option buttons (none
/// showing only some). Sets drawn as a card are not listed.
pub fn lists_options(input: &QuestionInput, q: usize) -> bool {
    input.questions.get(q).is_some_and(|item| {
        !is_card(input)
            && item.kind == InputKind::Choice
            && item.options.len() > MAX_BUTTONS - 1 - usize::from(item.multiple)
    })
}

/// Whether choice `q` of a set drawn as a card ([`is_card`]) is answered by a reply instead of
/// buttons, because the card's keyboard cannot hold its options: the card holds
/// [`MAX_BUTTONS`] − 2 buttons (Send answers and Skip take two), one for each confirm and toggle
/// input; the choices get the rest in order, each all of its options or none (no keyboard
/// showing only some). A choice left without buttons gets a prompt of its own listing every
/// option, numbered, answered by a reply with the number (numbers separated by commas for
/// `multiple`); the card says so.
pub fn card_lists(input: &QuestionInput, q: usize) -> bool {
    let is_choice = |i: &QuestionItem| i.kind == InputKind::Choice && !i.options.is_empty();
    if !is_card(input) || !input.questions.get(q).is_some_and(is_choice) {
        return false;
    }
    let fixed = input
        .questions
        .iter()
        .filter(|i| matches!(i.kind, InputKind::Confirm | InputKind::Toggle))
        .count();
    let mut room = (MAX_BUTTONS - 2).saturating_sub(fixed);
    for (i, item) in input.questions.iter().enumerate() {
        if !is_choice(item) {
            continue;
        }
        let fits = item.options.len() <= room;
        if i == q {
            return !fits;
        }
        if fits {
            room -= item.options.len();
        }
    }
    false
}

/// Whether question `q` is answered by a reply to a prompt of its own (a ForceReply message): a
/// text or number input, a choice that takes an own answer (`custom`), a choice of a card whose
/// keyboard cannot hold its options ([`card_lists`]).
pub fn has_prompt(input: &QuestionInput, q: usize) -> bool {
    input.questions.get(q).is_some_and(|item| {
        is_prompt_kind(item)
            || (item.kind == InputKind::Choice && item.custom)
            || card_lists(input, q)
    })
}

/// The text of question `q` over as many messages as it needs (HTML, each within a message with
/// room for the outcome line): nothing is cut. The last is the message with the keyboard (and
/// the expiry line); the others — a long list of options — are posted just before it.
pub fn question_pages(input: &QuestionInput, q: usize, expiry: Option<&str>) -> Vec<String> {
    pages(input, q, &question_plain(input, q), expiry)
}

/// The Telegram users `input.from` names (`telegram:ID`), in order, each once: the people asked,
/// who alone may answer.
pub fn asked_people(input: &QuestionInput) -> Vec<i64> {
    render::people_asked(input, crate::PLATFORM, |id| {
        id.parse().ok().filter(|&id: &i64| id > 0)
    })
}

/// A text mention of Telegram user `id` showing `text` (HTML): Telegram notifies them
/// (`tg://user?id=` in an inline link, the Bot API's "mention a user by their identifier").
fn text_mention(id: i64, text: &str) -> String {
    format!("<a href=\"tg://user?id={id}\">{}</a>", escape(text))
}

/// `html` made to notify the people asked ([`asked_people`]): when it begins with question `q`'s
/// header (`❓ header`), the header becomes a text mention of the first, and a mention "👤" of
/// each other one follows it. Nothing else of the text is a mention: everything else stays
/// escaped.
fn mention_header(input: &QuestionInput, q: usize, html: String) -> String {
    let people = asked_people(input);
    let (Some((first, more)), Some(item)) = (people.split_first(), input.questions.get(q)) else {
        return html;
    };
    let Some(rest) = html.strip_prefix(&format!("❓ {}", escape(&item.header))) else {
        return html;
    };
    let more: String = more
        .iter()
        .map(|id| format!(" {}", text_mention(*id, "👤")))
        .collect();
    format!("❓ {}{more}{rest}", text_mention(*first, &item.header))
}

/// The most characters of a page of a question or prompt: room is kept for the outcome line and
/// the expiry line whether the question has one or not, so the settled view cuts the text into
/// the same pages and edits the last one in place ([`settled_text`]).
const PAGE_ROOM: usize = MAX_TEXT - OUTCOME_ROOM - EXPIRY_ROOM;

/// `plain` (question `q`'s) over pages as HTML: the last with the expiry line, the first
/// mentioning the people asked ([`mention_header`]).
fn pages(input: &QuestionInput, q: usize, plain: &str, expiry: Option<&str>) -> Vec<String> {
    let mut pages = text::split(plain, PAGE_ROOM);
    let last = pages.pop().unwrap_or_default();
    let mut html: Vec<String> = pages.iter().map(|p| escape(p)).collect();
    html.push(open_html(last, expiry));
    html[0] = mention_header(input, q, std::mem::take(&mut html[0]));
    html
}

/// The whole plain text of question `q`'s message (see [`question_pages`]).
fn question_plain(input: &QuestionInput, q: usize) -> String {
    let item = &input.questions[q];
    let text = full_question_text(input, q);
    if !lists_options(input, q) {
        // A label longer than its button shows is written out in full.
        return text + &long_labels(item, 0);
    }
    let how = render::choice_how(item.multiple);
    format!(
        "{text}{}\n\nReply to this message with {how}.",
        numbered(item)
    )
}

/// Every option of `item`, numbered, a line each.
fn numbered(item: &QuestionItem) -> String {
    let line = |(i, o): (usize, &QuestionOption)| format!("\n{}. {}", i + 1, shown_label(&o.label));
    item.options.iter().enumerate().map(line).collect()
}

/// A "• label" line for each label of `item` (of an option without a description) longer than
/// its button shows after `prefix` characters.
fn long_labels(item: &QuestionItem, prefix: usize) -> String {
    item.options
        .iter()
        .filter(|o| o.description.is_none())
        .map(|o| shown_label(&o.label))
        .filter(|label| prefix + label.chars().count() > MAX_BUTTON_TEXT)
        .map(|label| format!("\n• {label}"))
        .collect()
}

/// The most characters of an approval's question one message shows (room is left for its header,
/// option lines, expiry line and outcome line): longer, its arguments go in messages before the
/// card ([`approval_pages`]).
pub const APPROVAL_ROOM: usize = MAX_TEXT - OUTCOME_ROOM - 500;

/// How an approval whose question is too long for one message is shown: its complete arguments
/// over messages posted before the card, the card saying so (`None`: it fits, or is no approval).
/// Telegram counts a message's length after its HTML is parsed: plain characters.
pub fn approval_pages(item: &QuestionItem) -> Option<ApprovalPages> {
    frogbot_model::approval_pages(item, APPROVAL_ROOM)
}

/// A message of an approval's arguments (HTML; one of [`ApprovalPages::before`]).
/// Its head ("Arguments (1/3):") shows as text, the piece of arguments as a code block, exactly
/// as written (a piece may end inside a line: nothing of it is trimmed), never as fenced
/// Markdown.
pub fn approval_page_html(page: &str) -> String {
    const OPEN: &str = "\n```json\n";
    match page.split_once(OPEN) {
        Some((head, rest)) => {
            let args = rest.strip_suffix("\n```").unwrap_or(rest);
            format!(
                "{}\n<pre><code class=\"language-json\">{}</code></pre>",
                escape(head),
                escape(args)
            )
        }
        None => escape(&to_plain(page)),
    }
}

/// An option's label as its button and texts show it: without Markdown ([`to_plain`]), or as
/// written when nothing would be left of it.
pub fn shown_label(label: &str) -> String {
    let plain = to_plain(label);
    if plain.trim().is_empty() {
        label.to_owned()
    } else {
        plain
    }
}

fn full_question_text(input: &QuestionInput, q: usize) -> String {
    let mut text = question_body(input, q, true);
    let item = &input.questions[q];
    if item.multiple && is_card(input) {
        text.push_str("\n(Select any.)");
    } else if item.multiple {
        text.push_str("\n(Select any, then press Done.)");
    }
    if item.kind == InputKind::Toggle && input.questions.len() > 1 {
        text.push_str("\n(Tap ✓/✗ to switch it.)");
    }
    text
}

/// Question `q`'s header and text, plain, with its options' descriptions. Settled (`!open`), what
/// says how to answer goes: an approval's "Approve runs it; Deny refuses it…" sentence and its
/// buttons' descriptions (the outcome line says what was decided).
fn question_body(input: &QuestionInput, q: usize, open: bool) -> String {
    let item = &input.questions[q];
    let optional = if item.required { "" } else { " (optional)" };
    let shown = render::shown_question(item, approval_pages);
    let shown = match open {
        true => to_plain(&shown),
        false => to_plain(render::settled_question(item, &shown)),
    };
    let approval = frogbot_model::is_approval(item);
    let mut text = format!("❓ {}{optional}\n{shown}", item.header);
    for o in item.options.iter().filter(|_| open || !approval) {
        if let Some(d) = &o.description {
            text.push_str(&format!("\n• {} — {}", shown_label(&o.label), to_plain(d)));
        }
    }
    text
}

fn button(text: &str, revision: u64, question: usize, pick: Pick) -> InlineKeyboardButton {
    let token = Token {
        revision,
        question,
        pick,
    };
    InlineKeyboardButton::callback(truncate(text, MAX_BUTTON_TEXT), token.encode())
}

/// The keyboard of question `q` at `revision`, by kind (see the module), last "Skip", which
/// dismisses the whole call. A choice has one button per option ("✓ label" when selected, cut to
/// [`MAX_BUTTON_TEXT`]), plus "Done" for `multiple`; a choice with more options than fit
/// [`MAX_BUTTONS`] gets Skip alone, its options listed in the text ([`lists_options`]). Its
/// buttons' callback data read back with [`crate::ids::read_control`].
///
/// ```
/// use frogbot_model::{Progress, QuestionInput};
/// use frogbot_telegram::render;
///
/// let input: QuestionInput = serde_json::from_value(serde_json::json!({"questions": [{
///     "header": "Pond", "question": "Which pond?", "options": [{"label": "Lily"}, {"label": "Mill"}]
/// }]}))
/// .unwrap();
/// let keyboard = render::keyboard(&input, 0, 0, &Progress::from_state(&input, None));
/// let keyboard = serde_json::to_value(keyboard).unwrap();
/// // One row per option, then Skip; callback data `q{revision}:{question}:{option}`.
/// assert_eq!(keyboard["inline_keyboard"][1][0]["text"], "Mill");
/// assert_eq!(keyboard["inline_keyboard"][1][0]["callback_data"], "q0:0:1");
/// ```
pub fn keyboard(
    input: &QuestionInput,
    q: usize,
    revision: u64,
    progress: &Progress,
) -> InlineKeyboardMarkup {
    let item = &input.questions[q];
    let skip = vec![button(SKIP_LABEL, revision, q, Pick::Skip)];
    if lists_options(input, q) {
        // Every option is listed in the text and answered by reply: no button shows only some.
        return InlineKeyboardMarkup::new([skip]);
    }
    // Skip takes one button, Done another.
    let room = MAX_BUTTONS - 1 - usize::from(item.multiple);
    let mut rows = input_rows(input, q, revision, progress, room, false);
    if item.multiple {
        rows.push(vec![button("Done", revision, q, Pick::Done)]);
    }
    rows.push(skip);
    InlineKeyboardMarkup::new(rows)
}

/// The buttons of input `q` (at most `room`; a choice's labels after "header: " when `named`).
fn input_rows(
    input: &QuestionInput,
    q: usize,
    revision: u64,
    progress: &Progress,
    room: usize,
    named: bool,
) -> Vec<Vec<InlineKeyboardButton>> {
    let item = &input.questions[q];
    let picked = progress.picks.get(q).and_then(|p| p.as_ref());
    let button = |text: &str, pick| button(text, revision, q, pick);
    if room == 0 {
        return Vec::new();
    }
    match item.kind {
        InputKind::Confirm => {
            let label = item.confirm_label();
            let text = match (picked.is_some(), item.danger) {
                (true, _) => format!("✓ {label}"),
                (false, true) => format!("⚠️ {label}"),
                (false, false) => label.to_owned(),
            };
            vec![vec![button(&text, Pick::Confirm)]]
        }
        InputKind::Toggle if input.questions.len() == 1 && room >= 2 => vec![vec![
            button("✓ On", Pick::Set(true)),
            button("✗ Off", Pick::Set(false)),
        ]],
        InputKind::Toggle => {
            let label = item
                .label
                .as_deref()
                .filter(|l| !l.trim().is_empty())
                .unwrap_or(&item.header);
            let mark = if toggle_on(input, q, progress) {
                "✓"
            } else {
                "✗"
            };
            vec![vec![button(&format!("{mark} {label}"), Pick::Flip)]]
        }
        InputKind::Choice => {
            let checked = progress.checked(q);
            let row = |(o, opt): (usize, &QuestionOption)| {
                let on = picked.map_or_else(
                    || item.multiple && checked.contains(&o),
                    |p| p.contains(&opt.label),
                );
                let label = shown_label(&opt.label);
                let label = if named {
                    format!("{}: {label}", item.header)
                } else {
                    label
                };
                let text = if on { format!("✓ {label}") } else { label };
                vec![button(&text, Pick::Option(o))]
            };
            item.options
                .iter()
                .enumerate()
                .take(room)
                .map(row)
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The prompt of question `q` over as many messages as it needs (HTML, each within a message with
/// room for the outcome line), nothing cut: a question text or a list of options longer than one
/// message continues in messages posted before the prompt, which is the last. A prompt that shows
/// its question (not an own answer's, beside its keyboard) mentions the people asked.
pub fn prompt_pages(input: &QuestionInput, q: usize, expiry: Option<&str>) -> Vec<String> {
    pages(input, q, &prompt_plain(input, q), expiry)
}

fn prompt_plain(input: &QuestionInput, q: usize) -> String {
    let item = &input.questions[q];
    if is_prompt_kind(item) {
        let hint = item
            .reply_hint()
            .unwrap_or_else(|| "Reply with your answer.".into());
        let hint = hint
            .strip_prefix("Reply")
            .map_or(hint.clone(), |rest| format!("Reply to this message{rest}"));
        let optional = if item.required || !is_card(input) {
            ""
        } else {
            " Optional: you may leave it and press Send answers."
        };
        format!(
            "{}\n\n✎ {hint}{optional} (Reply skip to skip.)",
            full_question_text(input, q)
        )
    } else if card_lists(input, q) {
        let own = if item.custom {
            ", or in your own words"
        } else {
            ""
        };
        let (text, list, how) = (
            full_question_text(input, q),
            numbered(item),
            render::choice_how(item.multiple),
        );
        format!("{text}{list}\n\n✎ Reply to this message with {how}{own}. (Reply skip to skip.)")
    } else if item.options.is_empty() {
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
    }
}

/// The ForceReply markup of question `q`'s prompt: the input field shows the input's
/// `placeholder` (cut to [`MAX_PLACEHOLDER`]), else "Your answer" ("A number" for a number).
pub fn force_reply_for(item: &QuestionItem) -> ForceReply {
    let given = item
        .placeholder
        .as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty() && is_prompt_kind(item));
    let default = if item.kind == InputKind::NumberInput {
        "A number"
    } else {
        "Your answer"
    };
    placeholder(&truncate(given.unwrap_or(default), MAX_PLACEHOLDER))
}

/// The ForceReply markup of the prompt of question `q` ([`has_prompt`]): a text or number
/// input's ([`force_reply_for`]), a listed choice's ("The number of your choice"), an own
/// answer's ([`force_reply`]).
pub fn prompt_markup(input: &QuestionInput, q: usize) -> ForceReply {
    let item = &input.questions[q];
    if is_prompt_kind(item) {
        force_reply_for(item)
    } else if card_lists(input, q) && item.multiple {
        placeholder("The numbers of your choices")
    } else if card_lists(input, q) {
        placeholder("The number of your choice")
    } else {
        force_reply()
    }
}

/// The ForceReply markup of an own-answer prompt.
pub fn force_reply() -> ForceReply {
    placeholder("Your answer")
}

/// A ForceReply whose input field shows `text`.
fn placeholder(text: &str) -> ForceReply {
    ForceReply::new().input_field_placeholder(Some(text.to_owned()))
}

/// The most characters of an answer a card echoes ("✅ …"); the answer itself is kept whole.
pub const CARD_ANSWER_ECHO: usize = 200;

/// Room kept in a card for its expiry line.
const EXPIRY_ROOM: usize = 40;

/// Whether the card of `input` is drawn compact: when its questions written out in full (with
/// every answer echoed at its longest) would not fit one message, the questions are posted in
/// full in messages before the card ([`card_question_pages`]) and the card lists each input by
/// its header with its answer so far.
pub fn card_compact(input: &QuestionInput) -> bool {
    let full = card_plain(input, &Progress::from_state(input, None), false);
    let answers = input.questions.len() * (CARD_ANSWER_ECHO + 4);
    full.chars().count() + answers > MAX_TEXT - OUTCOME_ROOM - EXPIRY_ROOM
}

/// The questions of a compact card ([`card_compact`]) written out in full, over as many messages
/// as they need (HTML), posted before the card's prompts and the card; empty for a card that is
/// not compact.
pub fn card_question_pages(input: &QuestionInput) -> Vec<String> {
    if !card_compact(input) {
        return Vec::new();
    }
    let text = (0..input.questions.len())
        .map(|q| card_question_text(input, q))
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut pages: Vec<String> = text::split(&text, MAX_TEXT - OUTCOME_ROOM)
        .iter()
        .map(|p| escape(p))
        .collect();
    if let Some(first) = pages.first_mut() {
        *first = mention_header(input, 0, std::mem::take(first));
    }
    pages
}

/// Question `q` of a card written out in full: its text, and each label longer than its button
/// shows ("header: label", cut at [`MAX_BUTTON_TEXT`]) in full.
fn card_question_text(input: &QuestionInput, q: usize) -> String {
    let item = &input.questions[q];
    let long = if card_lists(input, q) {
        String::new()
    } else {
        long_labels(item, item.header.chars().count() + 2)
    };
    full_question_text(input, q) + &long
}

fn card_plain(input: &QuestionInput, progress: &Progress, compact: bool) -> String {
    let mut text = "📋 Answer below, then press Send answers.".to_owned();
    if compact {
        text.push_str(" The questions are written out in full above.");
    }
    for (q, item) in input.questions.iter().enumerate() {
        text.push_str("\n\n");
        if compact {
            let optional = if item.required { "" } else { " (optional)" };
            text.push_str(&format!("❓ {}{optional}", item.header));
        } else {
            text.push_str(&card_question_text(input, q));
        }
        let picked = progress.picks.get(q).and_then(|p| p.as_ref());
        match (picked, item.kind) {
            (Some(p), _) => text.push_str(&format!(
                "\n✅ {}",
                truncate(&item.answer_after_header(p), CARD_ANSWER_ECHO)
            )),
            (None, InputKind::TextInput | InputKind::NumberInput) => {
                text.push_str("\n✎ Reply to its message above.");
            }
            (None, InputKind::Choice) if card_lists(input, q) => {
                text.push_str(
                    "\n✎ Too many options for buttons: reply to its message above with the number.",
                );
            }
            (None, InputKind::Choice) if item.custom => {
                text.push_str("\n✎ Or reply to its message above in your own words.");
            }
            _ => {}
        }
    }
    text
}

/// The text of a set's card (HTML): every input with its answer so far (a prompt's input says to
/// reply to its prompt), and the expiry line when given; compact ([`card_compact`]) when the
/// questions in full would not fit: each input's header and answer, the questions being
/// written out above. Nothing is cut but an answer's echo ([`CARD_ANSWER_ECHO`]).
pub fn card_text(input: &QuestionInput, progress: &Progress, expiry: Option<&str>) -> String {
    let compact = card_compact(input);
    let html = open_html(card_plain(input, progress, compact), expiry);
    if compact {
        // The questions written out above mention the people asked.
        return html;
    }
    // The card notifies: its first question's header mentions the people asked.
    match html.split_once("\n\n") {
        Some((head, rest)) => format!("{head}\n\n{}", mention_header(input, 0, rest.to_owned())),
        None => html,
    }
}

/// The keyboard of a set's card at `revision`: the buttons of every choice, confirm and toggle
/// input (a choice's labels after its header; a choice whose options do not fit [`MAX_BUTTONS`]
/// has none: [`card_lists`]), then Send answers, then Skip.
pub fn card_keyboard(
    input: &QuestionInput,
    revision: u64,
    progress: &Progress,
) -> InlineKeyboardMarkup {
    let mut rows: Vec<Vec<InlineKeyboardButton>> = Vec::new();
    let mut room = MAX_BUTTONS - 2;
    for q in 0..input.questions.len() {
        if card_lists(input, q) {
            // Answered by a reply to its own prompt, which lists every option.
            continue;
        }
        let more = input_rows(input, q, revision, progress, room, true);
        room -= more.iter().map(Vec::len).sum::<usize>();
        rows.extend(more);
    }
    rows.push(vec![button(SEND_LABEL, revision, 0, Pick::Send)]);
    rows.push(vec![button(SKIP_LABEL, revision, 0, Pick::Skip)]);
    InlineKeyboardMarkup::new(rows)
}

/// The settled text (HTML) of a message of question `q`: its question (without the expiry line
/// or how to answer) and the outcome, by `by` (within [`MAX_TEXT`]).
pub fn settled_text(
    input: &QuestionInput,
    q: usize,
    prompt: bool,
    outcome: &QuestionOutcome,
    by: Option<&str>,
) -> String {
    // Settled, a message no longer says how to answer: a prompt shows its question (an
    // own-answer prompt beside a keyboard, which shows the question, only its header).
    let item = &input.questions[q];
    let whole = if prompt {
        prompt_plain(input, q)
    } else {
        question_plain(input, q)
    };
    let mut pages = frogbot_model::text::split(&whole, PAGE_ROOM);
    let body = if pages.len() > 1 {
        // Paged: the earlier pages stay above; this message keeps its own page (nothing of the
        // text is lost), without how to answer.
        let last = pages.pop().unwrap_or_default();
        let how = ["✎ ", "Reply to this message", "(Select any", "(Tap ✓/✗"];
        last.lines()
            .filter(|l| !how.iter().any(|h| l.starts_with(h)))
            .collect::<Vec<_>>()
            .join("\n")
            .trim_end()
            .to_owned()
    } else if prompt && !is_prompt_kind(item) && !item.options.is_empty() {
        format!("✎ {}", item.header)
    } else {
        question_body(input, q, false)
    };
    let body = truncate(&body, MAX_TEXT - OUTCOME_ROOM);
    // How the question ended ([`frogbot_model::outcome_line`]); a dismissal names who skipped it.
    let line = frogbot_model::outcome_line(input, Some(q), outcome, by, str::to_owned);
    let line = truncate(&line, OUTCOME_ROOM - 2);
    escape(&format!("{body}\n\n{line}"))
}

/// The settled text (HTML) of a set's card: the set's outcome, with every answer
/// ("header: answer") once it has one (within [`MAX_TEXT`]).
pub fn settled_card_text(
    input: &QuestionInput,
    outcome: &QuestionOutcome,
    by: Option<&str>,
) -> String {
    let mut text = match outcome {
        QuestionOutcome::Expired(Some(_)) => "⌛ Expired — defaults used:".to_owned(),
        QuestionOutcome::Expired(None) => "⌛ Expired.".to_owned(),
        QuestionOutcome::Dismissed => format!("⏭️ {}", skipped_text(by)),
        QuestionOutcome::Cancelled => "✖️ Cancelled.".to_owned(),
        _ => "✅ Answers sent:".to_owned(),
    };
    if let Some(output) = outcome.output() {
        for line in render::answer_lines(&input.questions, output, str::to_owned) {
            text.push_str(&format!("\n{line}"));
        }
    }
    escape(&truncate(&text, MAX_TEXT))
}

/// An empty keyboard: sent with an edit, it removes the buttons.
pub fn no_keyboard() -> InlineKeyboardMarkup {
    InlineKeyboardMarkup::default()
}

/// The inline keyboard of a reply being streamed: one Stop button (callback data
/// [`STOP_DATA`](crate::ids::STOP_DATA)).
pub fn stop_keyboard() -> InlineKeyboardMarkup {
    InlineKeyboardMarkup::new([[InlineKeyboardButton::callback(
        STOP_LABEL,
        crate::ids::STOP_DATA,
    )]])
}

// ---------------------------------------------------------------------------------------------
// Agent messages: title, Markdown text and blocks.
// ---------------------------------------------------------------------------------------------

/// Telegram's limit on a photo's caption, in characters after entity parsing (`sendPhoto`,
/// `editMessageCaption`, an `InputMediaPhoto`'s `caption`).
pub const MAX_CAPTION: usize = 1024;
/// The widest a table cell is drawn in a `<pre>` table, in characters (longer ones are cut with
/// `…`: a phone shows about 40 monospace characters a line).
pub const MAX_TABLE_CELL: usize = 32;
/// How many cells a progress bar has.
pub const PROGRESS_WIDTH: usize = 16;

/// One Telegram message an agent message is drawn in.
#[derive(Clone, Debug, PartialEq)]
pub enum AgentPiece {
    /// A text message (`sendMessage` / `editMessageText`, `parse_mode` `HTML`).
    Text {
        /// Its HTML: at most [`MAX_TEXT`] characters shown.
        html: String,
        /// The event buttons of the blocks it ends (one row a block), if any.
        keyboard: Option<InlineKeyboardMarkup>,
    },
    /// An image block (`sendPhoto` / `editMessageMedia`): Telegram fetches `url` itself.
    Photo {
        /// The image's http(s) URL.
        url: String,
        /// Its caption (the alt text) as HTML, at most [`MAX_CAPTION`] characters shown.
        caption: String,
        /// The image block's event buttons, if any.
        keyboard: Option<InlineKeyboardMarkup>,
    },
}

impl AgentPiece {
    /// Its inline keyboard.
    pub fn keyboard(&self) -> Option<&InlineKeyboardMarkup> {
        match self {
            AgentPiece::Text { keyboard, .. } | AgentPiece::Photo { keyboard, .. } => {
                keyboard.as_ref()
            }
        }
    }
}

/// The row of event buttons of block `index` (callback data [`crate::ids::event_id`]).
pub fn event_row(index: usize, block: &Block) -> Vec<InlineKeyboardButton> {
    block
        .events
        .iter()
        .enumerate()
        .map(|(b, e)| {
            let data = crate::ids::event_id(frogbot_model::EventControl::new(index, b));
            InlineKeyboardButton::callback(truncate(&e.label, MAX_BUTTON_TEXT), data)
        })
        .collect()
}

/// Plain lines grouped into chunks of at most `budget` characters (lines joined with `\n`); a
/// longer line is cut into pieces of `budget` characters.
fn chunk_lines(lines: &[String], budget: usize) -> Vec<Vec<String>> {
    let budget = budget.max(1);
    let pieces = lines.iter().flat_map(|l| text::split_exact(l, budget));
    text::pack(pieces, budget, |line, first| {
        line.chars().count() + usize::from(!first)
    })
}

/// A table as `<pre>` chunks of aligned columns, each with the header and at most [`MAX_TEXT`]
/// characters shown.
fn table_chunks(columns: &[String], rows: &[Vec<String>]) -> Vec<String> {
    // The header and every row, each cell on one line of at most MAX_TABLE_CELL characters.
    let cell = |c: &str| text::one_line(c, MAX_TABLE_CELL);
    let (header, body) = render::grid(columns, rows, columns.len(), cell);
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| {
            body.iter()
                .chain([&header])
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect::<Vec<_>>()
            .join(" │ ")
            .trim_end()
            .to_owned()
    };
    let rule: String = widths
        .iter()
        .map(|w| "─".repeat(*w))
        .collect::<Vec<_>>()
        .join("─┼─");
    let top = format!("{}\n{rule}", line(&header));
    let lines: Vec<String> = body.iter().map(|r| line(r)).collect();
    if lines.is_empty() {
        return vec![format!("<pre>{}</pre>", escape(&top))];
    }
    let budget = MAX_TEXT - top.chars().count() - 1;
    chunk_lines(&lines, budget)
        .into_iter()
        .map(|c| format!("<pre>{}\n{}</pre>", escape(&top), escape(&c.join("\n"))))
        .collect()
}

/// The HTML chunks a (non-image) block is drawn in, each at most [`MAX_TEXT`] characters shown.
pub fn block_chunks(block: &Block) -> Vec<String> {
    match &block.kind {
        BlockKind::Table { columns, rows } => table_chunks(columns, rows),
        BlockKind::Progress { value, max, label } => {
            let bar = render::progress(*value, *max, PROGRESS_WIDTH, "");
            let label = label
                .as_deref()
                .map(|l| format!("<b>{}</b>\n", escape(&truncate(l, MAX_TEXT - 100))))
                .unwrap_or_default();
            vec![format!("{label}{bar}")]
        }
        BlockKind::Code { code, language } => {
            let (open, close) = match language {
                Some(l) => (
                    format!("<pre><code class=\"language-{}\">", escape(l)),
                    "</code></pre>",
                ),
                None => ("<pre>".to_owned(), "</pre>"),
            };
            let code = code.trim_end();
            let lines: Vec<String> = match code {
                "" => vec![" ".to_owned()],
                code => code.lines().map(str::to_owned).collect(),
            };
            chunk_lines(&lines, MAX_TEXT)
                .into_iter()
                .map(|c| format!("{open}{}{close}", escape(&c.join("\n"))))
                .collect()
        }
        BlockKind::Fields { fields } => {
            // One line a field, never cut (a key and a value are at most 2,000 characters each).
            let lines = fields.iter().map(|f| {
                let key = truncate(&f.key, MAX_TEXT / 2 - 2);
                let value = truncate(&f.value, MAX_TEXT / 2 - 2);
                let shown = key.chars().count() + 2 + value.chars().count();
                (
                    shown,
                    format!("<b>{}:</b> {}", escape(&key), escape(&value)),
                )
            });
            text::pack(lines, MAX_TEXT, |(shown, _), first| {
                shown + usize::from(!first)
            })
            .into_iter()
            .map(|run| {
                run.into_iter()
                    .map(|(_, l)| l)
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .collect()
        }
        BlockKind::Html { title, url, .. } => vec![format!(
            "🧩 <b>{}</b>\n{}",
            escape(&truncate(
                title.as_deref().unwrap_or("App"),
                render::MAX_TITLE
            )),
            // With the server's public_url, a link to the app's web view.
            match url {
                Some(u) => format!("<a href=\"{}\">Open the app</a>", escape(u)),
                None => "<i>An app: open it in the web chat.</i>".to_owned(),
            }
        )],
        BlockKind::Image { url, alt } => vec![escape(&truncate(
            &if alt.is_empty() {
                url.clone()
            } else {
                format!("{alt} ({url})")
            },
            MAX_TEXT,
        ))],
        _ => vec![escape(UNKNOWN_BLOCK_TEXT)],
    }
}

/// An image's caption: its alt text, at most [`MAX_CAPTION`] characters shown.
pub fn caption(alt: &str) -> String {
    escape(&truncate(alt, MAX_CAPTION))
}

/// Draws an agent message: its title (bold) and Markdown text ([`crate::format::messages`]), then
/// its blocks — tables as aligned `<pre>` text, progress as a bar, code as `<pre><code
/// class="language-x">`, fields as `<b>key:</b> value` lines, an app as its name and "open it in
/// the web chat", an unknown type as [`UNKNOWN_BLOCK_TEXT`] — packed into as few messages as fit
/// [`MAX_TEXT`], an image as a photo message of its own (the alt as its caption). A block's event
/// buttons are one row of the inline keyboard of the message its drawing ends in. An empty
/// message gives no piece.
pub fn agent_message(message: &UiMessage) -> Vec<AgentPiece> {
    let mut texts = crate::format::messages(&message.text(), MAX_TEXT);
    if let Some(title) = render::title(message) {
        let title = format!(
            "<b>{}</b>",
            escape(&truncate(title.trim(), render::MAX_TITLE))
        );
        render::put_title(&mut texts, title, join);
    }
    // A block's buttons: a row of the keyboard of the message its drawing ends in.
    let row = |i, block: &Block| Some(event_row(i, block)).filter(|r| !r.is_empty());
    let rows = |i, block: &Block| row(i, block).into_iter().collect();
    let keyboard = |rows: Vec<_>| (!rows.is_empty()).then(|| InlineKeyboardMarkup::new(rows));
    let laid = render::layout(texts, message, block_chunks, rows, join);
    let piece = |Laid { piece, controls }| match piece {
        Shown::Text(html) => AgentPiece::Text {
            html,
            keyboard: keyboard(controls),
        },
        Shown::Image { url, alt } => AgentPiece::Photo {
            url,
            caption: caption(&alt),
            keyboard: keyboard(controls),
        },
    };
    laid.into_iter().map(piece).collect()
}

/// Two HTML texts as one message, if it stays within [`MAX_TEXT`] characters shown.
fn join(a: &String, b: &String) -> Option<String> {
    (visible_len(a) + 2 + visible_len(b) <= MAX_TEXT).then(|| format!("{a}\n\n{b}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::MAX_CALLBACK_DATA;
    use serde_json::json;
    use teloxide::types::InlineKeyboardButtonKind;

    fn prompt_text(input: &QuestionInput, q: usize, expiry: Option<&str>) -> String {
        prompt_pages(input, q, expiry).pop().unwrap_or_default()
    }

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
        assert!(question_text(&i, 0, None).chars().count() <= MAX_TEXT);
        let outcome: QuestionOutcome = serde_json::from_value(
            json!({"output": {"answers": [{"header": "Env", "selected": ["x".repeat(5000)]}]}}),
        )
        .unwrap();
        assert!(settled_text(&i, 0, false, &outcome, None).chars().count() <= MAX_TEXT);
        // 150 options are more than a keyboard holds (issue 38): Skip alone, and every option
        // listed, numbered, to answer by reply — no keyboard showing only some.
        let kb = keyboard(&i, 1, 0, &Progress::from_state(&i, None));
        assert_eq!(kb.inline_keyboard.iter().flatten().count(), 1);
        assert_eq!(kb.inline_keyboard[0][0].text, "Skip");
        let pages = question_pages(&i, 1, None).join("\n");
        for n in 0..150 {
            assert!(
                pages.contains(&format!("{}. o{n}\n", n + 1))
                    || pages.contains(&format!("{}. o{n}", n + 1))
            );
        }
        // 98 options and Done and Skip: a full keyboard.
        i.questions[1].options.truncate(98);
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

    /// A question longer than a message: settled, its last message keeps its own page (the end
    /// of the list stays in the chat) without how to answer, with the outcome; with or without an
    /// expiry line the pages are the same.
    #[test]
    fn a_paged_question_settles_its_last_page_in_place() {
        let i: QuestionInput = serde_json::from_value(json!({"questions": [
            {"header": "Pick", "question": "Which?", "options": (1..=150)
                .map(|n| json!({"label": format!("option {n} {}", "y".repeat(70))}))
                .collect::<Vec<_>>()}
        ]}))
        .unwrap();
        let open = question_pages(&i, 0, None);
        assert!(open.len() > 1);
        assert_eq!(
            open.len(),
            question_pages(&i, 0, Some("⏳ open until 14:05 UTC")).len()
        );
        let outcome = QuestionOutcome::Answered(frogbot_model::QuestionOutput {
            answers: vec![frogbot_model::QuestionAnswer {
                header: "Pick".into(),
                selected: vec![format!("option 150 {}", "y".repeat(70))],
            }],
        });
        let settled = crate::format::visible_text(&settled_text(&i, 0, false, &outcome, None));
        assert!(settled.chars().count() <= MAX_TEXT);
        let last = crate::format::visible_text(open.last().unwrap());
        let kept = last.lines().filter(|l| l.starts_with("150. ")).count();
        assert_eq!(kept, 1, "the end of the list was on the last page");
        assert!(settled.contains(&format!("150. option 150 {}", "y".repeat(70))));
        assert!(!settled.contains("Reply to this message"), "{settled}");
        assert!(settled.ends_with(&format!("✅ Answered: option 150 {}", "y".repeat(70))));
    }

    #[test]
    fn settled_text_names_the_outcome() {
        let i = input();
        let skipped = |by| settled_text(&i, 0, false, &QuestionOutcome::Dismissed, by);
        assert!(skipped(None).ends_with("⏭️ Skipped."));
        assert!(skipped(Some("Ada")).ends_with("⏭️ Skipped by Ada"));
        assert!(no_keyboard().inline_keyboard.is_empty());
    }

    /// The people `from` names on Telegram are mentioned by the question's first message, on its
    /// header (`tg://user?id=`); everything else stays escaped, and nobody else is mentioned.
    #[test]
    fn the_people_asked_are_mentioned_on_the_header() {
        let asked = |from: &[&str], header: &str| -> QuestionInput {
            let mut i: QuestionInput = serde_json::from_value(json!({"questions": [
                {"header": header, "question": "Ship <today>?", "kind": "text_input"}]}))
            .unwrap();
            i.from = from.iter().map(|f| f.to_string()).collect();
            i
        };
        let i = asked(
            &["telegram:77", "slack:U1", "ada", "telegram:x"],
            "For <Bob>",
        );
        assert_eq!(asked_people(&i), [77]);
        let page = &question_pages(&i, 0, None)[0];
        assert!(
            page.starts_with(
                "❓ <a href=\"tg://user?id=77\">For &lt;Bob&gt;</a>\nShip &lt;today&gt;?"
            ),
            "{page}"
        );
        assert!(prompt_text(&i, 0, None).starts_with("❓ <a href=\"tg://user?id=77\">"));
        // Two people: the header for the first, "👤" for the second.
        let two = asked(&["telegram:77", "telegram:88"], "Deploy");
        assert!(question_pages(&two, 0, None)[0].starts_with(
            "❓ <a href=\"tg://user?id=77\">Deploy</a> <a href=\"tg://user?id=88\">👤</a>\n"
        ));
        // Nobody named on Telegram: no link at all; the settled text has none either.
        for i in [asked(&[], "Deploy"), asked(&["slack:U1"], "Deploy")] {
            assert!(!question_pages(&i, 0, None)[0].contains("<a "));
        }
        let settled = settled_text(&i, 0, true, &QuestionOutcome::Dismissed, None);
        assert!(!settled.contains("<a "), "{settled}");
    }

    fn mixed() -> QuestionInput {
        serde_json::from_value(json!({"questions": [
            {"header": "Env", "question": "Where?", "options": (0..70)
                .map(|n| json!({"label": format!("<o{n}> & {}", "x".repeat(80))}))
                .collect::<Vec<_>>()},
            {"header": "Checks", "question": "Which?", "options": (0..40)
                .map(|n| json!({"label": format!("c{n}")}))
                .collect::<Vec<_>>(), "multiple": true},
            {"header": "Go", "question": "Deploy?", "kind": "confirm", "label": "Approve", "danger": true},
            {"header": "Notify", "question": "Tell?", "kind": "toggle"},
            {"header": "Pods", "question": "How many? <&>".repeat(500), "kind": "number_input", "unit": "pods",
                "placeholder": "p".repeat(100)}
        ]}))
        .unwrap()
    }

    #[test]
    fn a_card_fits_one_keyboard_and_one_message() {
        let i = mixed();
        assert!(is_card(&i));
        let p = Progress::from_state(&i, None);
        let kb = card_keyboard(&i, u64::MAX, &p);
        let all: Vec<_> = kb.inline_keyboard.iter().flatten().collect();
        // 70 + 40 options, a confirm and a toggle do not fit 100 buttons: Env's 70 are buttons,
        // Checks (which no longer fits) has none — it is listed in a prompt of its own, no
        // keyboard showing only some of its options.
        assert!(!card_lists(&i, 0) && card_lists(&i, 1));
        assert!(has_prompt(&i, 1) && !has_prompt(&i, 0));
        assert_eq!(all.len(), 70 + 2 + 2);
        for b in &all {
            assert!(data(b).len() <= MAX_CALLBACK_DATA);
            assert!(b.text.chars().count() <= MAX_BUTTON_TEXT);
        }
        let texts: Vec<_> = all.iter().map(|b| b.text.as_str()).collect();
        assert_eq!(&texts[texts.len() - 2..], [SEND_LABEL, "Skip"]);
        assert!(texts[0].starts_with("Env: <o0> & "));
        assert!(!texts.iter().any(|t| t.starts_with("Checks: ")));
        let listed = crate::format::visible_text(&prompt_text(&i, 1, None));
        assert!(
            listed.contains("\n1. c0\n") && listed.contains("\n40. c39\n"),
            "{listed}"
        );
        // The text fits a message as Telegram counts it (the shown text) and is escaped: Pods'
        // question is too long for the card, which is compact, the questions written out above.
        assert!(card_compact(&i));
        let html = card_text(&i, &p, Some("⏳ open until 14:05 UTC"));
        let shown = crate::format::visible_text(&html);
        assert!(shown.chars().count() <= MAX_TEXT - OUTCOME_ROOM);
        assert!(!html.contains("<&>") && html.contains("❓ Pods"));
        let above = card_question_pages(&i).join("");
        assert!(!above.contains("<&>") && above.contains("How many? &lt;&amp;&gt;"));
        assert_eq!(
            above.matches("How many?").count(),
            500,
            "written out in full"
        );
        let prompt = prompt_text(&i, 4, None);
        assert!(crate::format::visible_text(&prompt).chars().count() <= MAX_TEXT);
        // The placeholder is cut to Telegram's 64 characters.
        let fr = force_reply_for(&i.questions[4]);
        assert_eq!(
            fr.input_field_placeholder.unwrap().chars().count(),
            MAX_PLACEHOLDER
        );
    }

    /// A card's button shows "header: label" cut to [`MAX_BUTTON_TEXT`]: at the limit the label
    /// is whole on its button; one past it, the card writes it out in full.
    #[test]
    fn a_cards_label_longer_than_its_button_is_written_out() {
        let at = "y".repeat(MAX_BUTTON_TEXT - "Env: ".len());
        let past = format!("{at}z");
        let i: QuestionInput = serde_json::from_value(json!({"questions": [
            {"header": "Env", "question": "Where?", "options": [{"label": at}, {"label": past}]},
            {"header": "Go", "question": "Ready?", "kind": "confirm"}
        ]}))
        .unwrap();
        let p = Progress::from_state(&i, None);
        let kb = card_keyboard(&i, 0, &p);
        let texts: Vec<&str> = kb
            .inline_keyboard
            .iter()
            .flatten()
            .map(|b| b.text.as_str())
            .collect();
        assert_eq!(texts[0], format!("Env: {at}"));
        assert!(texts[1].chars().count() <= MAX_BUTTON_TEXT);
        let shown = crate::format::visible_text(&card_text(&i, &p, None));
        assert!(shown.contains(&format!("\n• {past}")), "{shown}");
        assert!(!shown.contains(&format!("\n• {at}\n")), "{shown}");
    }

    #[test]
    fn toggles_switch_from_their_default_and_answers_print_per_kind() {
        let mut i = mixed();
        let mut p = Progress::from_state(&i, None);
        assert!(!toggle_on(&i, 3, &p));
        p.toggle(3, 0);
        assert!(toggle_on(&i, 3, &p));
        i.questions[3].default = Some(vec!["on".into()]);
        assert!(!toggle_on(&i, 3, &p));
        let t = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc();
        assert_eq!(
            expiry_line(Some("2026-12-01T14:05:00Z"), t("2026-12-01T10:00:00Z")).as_deref(),
            Some("⏳ open until 14:05 UTC")
        );
        assert_eq!(expiry_line(Some("soon"), t("2026-12-01T10:00:00Z")), None);
        assert_eq!(expiry_line(None, t("2026-12-01T10:00:00Z")), None);
    }
}
