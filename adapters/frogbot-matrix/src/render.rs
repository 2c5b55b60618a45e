//! Pure rendering: a FrogBot question → its Matrix message, one per input of the set, in the
//! conversation's thread. Contents are returned as `(event type, JSON content)` so the client
//! layer can send them raw (and encrypted).
//!
//! Each input kind is drawn with what Matrix has:
//! - `choice` with 1 to [`MAX_ANSWERS`] options: an MSC3381 poll start (by default the unstable
//!   `org.matrix.msc3381.poll.start` Element renders, see [`PollEvents`]; disclosed,
//!   `max_selections` from `multiple`, answer ids carrying the revision, see
//!   [`crate::ids::answer_id`]; an answer's text is "label — description") with a plain-text
//!   `body` fallback (also `org.matrix.msc1767.text`) listing numbered options and how to answer by
//!   a reply, which clients that render no poll show (a keycap reaction or a numbered reply
//!   answers too). A multiple-choice poll's selection is sent with a reply [`DONE_REPLY`] or a ✅
//!   reaction (the bot reacts ✅ on it). More than [`MAX_ANSWERS`] options: a message listing them
//!   numbered ([`is_list`], at most [`LIST_CHARS`]), answered by a reply with the number(s). A
//!   choice with only an own answer (`custom`, no options): a plain prompt answered by a thread
//!   reply.
//! - `text_input` and `number_input`: a message ([`card_message`], `body` and an HTML
//!   `formatted_body`) with the question and the one-line [`QuestionItem::reply_hint`]; a thread
//!   reply answers (validated by [`QuestionItem::choice_in_reply`]: a number out of range or a
//!   text too long is refused with the reason, in a notice).
//! - `toggle`: the same message; the bot reacts [`YES_KEY`] and [`NO_KEY`] on it
//!   ([`reaction`]) and a person's reaction with either key answers on / off, as does a reply
//!   yes / no.
//! - `confirm`: the same message (⚠️ before it when `danger`); the bot reacts [`YES_KEY`] and a
//!   person's ✅ reaction, or a reply with the label, `yes` or `ok`, confirms.
//!
//! An optional input says it may be left empty with a reply `-` ([`EMPTY_REPLY`]). While the set
//! has an expiry, every message shows "open until 14:05 UTC" ([`open_line`]) above the last line,
//! which says how to skip ([`SKIP_LINE`]); a poll shows it in its question too. The settled view
//! (poll end + an `m.replace` edit of the poll, or an edit of the message) adds the outcome line
//! ([`outcome_text`]: the answer as typed, the number with its unit, a toggle's label and
//! `on` / `off`, the confirm label) and drops the expiry line. The notices (rejected / denied / stale) mention the person.
//!
//! Markdown in the question and options is plain text in a poll and in `body`
//! ([`crate::format::to_plain`]), HTML in `formatted_body`. In a set of several questions each
//! says "Question i of n" ([`position_text`]). A settled question shows its text without the lines
//! saying how to answer, then the outcome line ([`settled_text`]).
//!
//! Matrix sets no limit on a poll's texts, only on the whole event (65,536 bytes); texts are cut
//! ([`frogbot_model::text::truncate`]) so that even an edit, which carries the poll twice, stays
//! well under it: an answer at [`ANSWER_CHARS`], the poll's question at [`QUESTION_CHARS`], the
//! fallback text at [`FALLBACK_CHARS`] (the question is cut, the lines saying how to answer are
//! kept). At most [`MAX_ANSWERS`] options (MSC3381).

use frogbot_channel::render::{self, Laid, Shown};
use frogbot_model::blocks::{Block, BlockKind, UNKNOWN_BLOCK_TEXT};
use frogbot_model::{
    ApprovalPages, InputKind, QuestionInput, QuestionItem, QuestionOutcome, UiMessage,
};

use crate::format::Formatted;
use matrix_sdk::ruma::events::Mentions;
use matrix_sdk::ruma::events::message::TextContentBlock;
use matrix_sdk::ruma::events::poll::end::PollEndEventContent;
use matrix_sdk::ruma::events::poll::start::{
    PollAnswer, PollAnswers, PollContentBlock, PollKind, PollStartEventContent,
    PollStartEventContentWithoutRelation,
};
use matrix_sdk::ruma::events::poll::unstable_end::UnstablePollEndEventContent;
use matrix_sdk::ruma::events::poll::unstable_start::{
    NewUnstablePollStartEventContent, ReplacementUnstablePollStartEventContent, UnstablePollAnswer,
    UnstablePollAnswers, UnstablePollStartContentBlock,
};
use matrix_sdk::ruma::events::relation::{Replacement, Thread};
use matrix_sdk::ruma::events::room::message::{
    Relation, RelationWithoutReplacement, ReplacementMetadata, RoomMessageEventContent,
    RoomMessageEventContentWithoutRelation,
};
use matrix_sdk::ruma::{EventId, OwnedEventId, OwnedUserId, UInt, UserId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Error;
use crate::ids::{NO_KEY, YES_KEY, answer_id, reaction_keys};
use frogbot_model::text::{split_exact, truncate};

/// Characters of a poll answer's text, "label — description" (cut there; answers are told apart
/// by id).
pub const ANSWER_CHARS: usize = 100;
/// Characters of a poll's question (`header: question`).
pub const QUESTION_CHARS: usize = 500;
/// Characters of the plain-text fallback (question, numbered options, how to answer).
pub const FALLBACK_CHARS: usize = 4_000;
/// The most answers one poll may have (MSC3381).
pub const MAX_ANSWERS: usize = 20;

/// Which poll event types to send. Responses of both kinds are always read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum PollEvents {
    /// `m.poll.start` / `m.poll.end` (MSC3381's stable names): few clients render them yet
    /// (Element does not); the others show the `body` fallback.
    Stable,
    /// `org.matrix.msc3381.poll.start` / `…poll.end`: what Element Web, Desktop, Android and
    /// iOS render as a poll (the default); other clients show the `body` fallback.
    #[default]
    Unstable,
}

/// An event to send: its type and content.
pub type Content = (&'static str, Value);

fn json<T: Serialize>(v: &T) -> Result<Value, Error> {
    serde_json::to_value(v).map_err(render_error)
}

fn render_error(e: impl std::fmt::Display) -> Error {
    Error::Render(e.to_string())
}

/// The last line of every question's text: polls have no buttons, so a reply `skip` in the thread
/// skips (dismisses the call).
pub const SKIP_LINE: &str = "Reply skip to skip this question.";

/// The reply that leaves an optional input empty (`selected: []`).
pub const EMPTY_REPLY: &str = "-";

/// The line an optional input's message shows.
pub const OPTIONAL_LINE: &str = "Optional: reply - to leave it empty.";

/// The expiry line of a set that expires at `expires_at` (RFC 3339) seen at `now` ("open until
/// 14:05 UTC"); `None` without an expiry (or one that does not read).
pub use frogbot_model::open_until as open_line;

/// Whether input `item` is drawn as a poll: a choice with 1 to [`MAX_ANSWERS`] options. A choice
/// with more options is a message listing them numbered, answered by a reply with the number(s)
/// ([`is_list`]).
pub fn has_poll(item: &QuestionItem) -> bool {
    item.kind == InputKind::Choice && !item.options.is_empty() && item.options.len() <= MAX_ANSWERS
}

/// Whether input `item` is a choice with more options than a poll takes (over [`MAX_ANSWERS`]):
/// drawn as a message with the numbered options, answered by replying with the number(s).
pub fn is_list(item: &QuestionItem) -> bool {
    item.kind == InputKind::Choice && item.options.len() > MAX_ANSWERS
}

/// "Question 2 of 4": where question `q` stands in a set of several (`None` for a set of one).
pub fn position_text(input: &QuestionInput, q: usize) -> Option<String> {
    let n = input.questions.len();
    (n > 1).then(|| format!("Question {} of {n}", q + 1))
}

/// The reply that sends the options picked in a multiple-choice poll (a ✅ reaction on the poll
/// does too): clients send the whole selection at every click, so a pick is only taken once the
/// person says they are done.
pub const DONE_REPLY: &str = "done";

/// The line a list question whose options are in messages before it shows instead of them.
fn pages_line(options: usize, pages: usize) -> String {
    let messages = if pages == 1 {
        "the message".to_owned()
    } else {
        format!("the {pages} messages")
    };
    format!("\n(The {options} options are listed, numbered, in {messages} above.)")
}

/// The option lines of a list question ([`is_list`]) too long for its own message (over
/// [`LIST_CHARS`] less room for the rest): every numbered option, packed into messages of at most
/// [`FALLBACK_CHARS`], posted in the thread before the question, which says so. Empty when the
/// options fit in the question's message, or for any other input.
pub fn list_pages(input: &QuestionInput, q: usize) -> Vec<String> {
    let item = &input.questions[q];
    if !is_list(item) {
        return Vec::new();
    }
    let lines = numbered_options(item);
    let total: usize = lines.iter().map(|l| l.chars().count() + 1).sum();
    if total <= LIST_CHARS - 1_500 {
        return Vec::new();
    }
    let n = lines.len();
    // A page takes lines while it stays under FALLBACK_CHARS - 100 characters.
    let cost = |(_, l): &(usize, String), first: bool| l.chars().count() + usize::from(!first);
    let pages =
        frogbot_model::text::pack(lines.into_iter().enumerate(), FALLBACK_CHARS - 101, cost);
    let page = |page: Vec<(usize, String)>| {
        let (from, to) = (page[0].0 + 1, page[page.len() - 1].0 + 1);
        let lines: Vec<String> = page.into_iter().map(|(_, l)| l).collect();
        format!(
            "{}: options {from}–{to} of {n}\n{}",
            item.header,
            lines.join("\n")
        )
    };
    pages.into_iter().map(page).collect()
}

/// Every option of `item` on a line of its own, numbered from 1 ("2. Mill — the old one").
fn numbered_options(item: &QuestionItem) -> Vec<String> {
    let number = |(i, o)| format!("{}. {}", i + 1, option_text(o));
    item.options.iter().enumerate().map(number).collect()
}

/// The most characters of an option's description a list or poll answer shows.
pub const DESCRIPTION_CHARS: usize = 200;

/// The most characters of a list question's text (more than [`FALLBACK_CHARS`]: it carries every
/// option, each line at most [`ANSWER_CHARS`] + [`DESCRIPTION_CHARS`]); its `body` and HTML stay
/// under the event limit even in four-byte characters.
pub const LIST_CHARS: usize = 6_000;

/// `reply_hint` with its first letter in lower case, to follow "React ✅, or …".
fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    let first = c.next();
    first.map_or_else(String::new, |f| f.to_lowercase().chain(c).collect())
}

/// The most characters of an approval's question a poll shows (room is left for its header and
/// expiry): longer, its arguments go in messages before the poll ([`approval_pages`]).
pub const APPROVAL_ROOM: usize = QUESTION_CHARS - 100;

/// How an approval whose question is too long for a poll is shown: its complete arguments over
/// plain messages (of at most [`FALLBACK_CHARS`] less room) posted before the poll, which says
/// so (`None`: it fits, or is no approval).
pub fn approval_pages(item: &QuestionItem) -> Option<ApprovalPages> {
    frogbot_model::approval_pages_sized(item, APPROVAL_ROOM, FALLBACK_CHARS - 200, |s| {
        s.chars().count()
    })
}

/// The text a question message shows for `item`: its question, or for a paged approval the
/// card's text.
fn shown_question(item: &QuestionItem) -> std::borrow::Cow<'_, str> {
    frogbot_channel::render::shown_question(item, approval_pages)
}

/// The lines of question `q`'s text: the head (header, question, numbered options; cut when
/// long) and the tail (how to answer, optional, expiry, skip; always kept).
fn card_parts(input: &QuestionInput, q: usize, open: Option<&str>) -> (String, Vec<String>) {
    let item = &input.questions[q];
    let danger = if item.kind == InputKind::Confirm && item.danger {
        "⚠️ "
    } else {
        ""
    };
    let position = position_text(input, q).map(|p| format!("{p}\n"));
    let question = crate::format::to_plain(&shown_question(item));
    let mut head = format!(
        "{}{danger}{}: {question}",
        position.unwrap_or_default(),
        item.header
    );
    let mut tail = Vec::new();
    match item.kind {
        InputKind::Choice => {
            let pages = list_pages(input, q);
            if pages.is_empty() {
                head.extend(numbered_options(item).iter().map(|l| format!("\n{l}")));
            } else {
                head.push_str(&pages_line(item.options.len(), pages.len()));
            }
            // How to answer, and how to give an own answer where the question takes one.
            let how = match (item.options.is_empty(), is_list(item), item.multiple) {
                (true, ..) => "Reply in this thread with your answer".to_owned(),
                (_, true, true) => "Reply in this thread with the numbers (e.g. 1 3)".to_owned(),
                (_, true, false) => "Reply in this thread with the number".to_owned(),
                (_, false, true) => format!(
                    "Pick in the poll, then reply {DONE_REPLY} or react {YES_KEY}; or reply in this thread with the numbers (e.g. 1 3)"
                ),
                (_, false, false) => {
                    "Vote in the poll, react with the number, or reply in this thread with it"
                        .to_owned()
                }
            };
            let own = match (item.custom && !item.options.is_empty(), has_poll(item)) {
                (false, _) => "",
                (true, true) if !item.multiple => " or with your own answer",
                (true, _) => " or your own answer",
            };
            tail.push(format!("{how}{own}."));
        }
        _ => {
            if let Some(p) = item.placeholder.as_deref().filter(|p| !p.trim().is_empty()) {
                head.push_str(&format!("\n({p})"));
            }
            let hint = item.reply_hint().unwrap_or_default();
            tail.push(match item.kind {
                InputKind::Toggle => {
                    format!("React {YES_KEY} or {NO_KEY}, or {}", lower_first(&hint))
                }
                InputKind::Confirm => format!("React {YES_KEY}, or {}", lower_first(&hint)),
                _ => hint,
            });
        }
    }
    if !item.required {
        tail.push(OPTIONAL_LINE.into());
    }
    if let Some(open) = open {
        tail.push(open.to_owned());
    }
    tail.push(SKIP_LINE.into());
    (head, tail)
}

/// An option as a text shows it: its label and description ("Option — description"), Markdown
/// as plain text, each cut ([`ANSWER_CHARS`], [`DESCRIPTION_CHARS`]).
pub fn option_text(o: &frogbot_model::QuestionOption) -> String {
    let label = truncate(&crate::format::to_plain(&o.label), ANSWER_CHARS);
    let description = o.description.as_deref().map(crate::format::to_plain);
    match description.filter(|d| !d.is_empty()) {
        Some(d) => format!("{label} — {}", truncate(&d, DESCRIPTION_CHARS)),
        None => label,
    }
}

/// The most characters the text of question `q` takes.
fn text_chars(input: &QuestionInput, q: usize) -> usize {
    if is_list(&input.questions[q]) {
        LIST_CHARS
    } else {
        FALLBACK_CHARS
    }
}

/// `head` cut so that it and the lines of `tail` after it take at most `max` characters, then
/// those lines (always kept).
fn with_tail(head: &str, tail: &[String], max: usize) -> String {
    let tail_chars: usize = tail.iter().map(|l| l.chars().count() + 1).sum();
    let head = truncate(head, max.saturating_sub(tail_chars).max(1));
    [&[head], tail].concat().join("\n")
}

/// The text of question `q` once settled: the question (and its options) without the lines
/// saying how to answer, then `outcome_line`.
pub fn settled_text(input: &QuestionInput, q: usize, outcome_line: &str) -> String {
    let (head, _) = card_parts(input, q, None);
    with_tail(&head, &[outcome_line.to_owned()], text_chars(input, q))
}

/// The plain text of question `q`: header, question, numbered options, how to answer, and last
/// how to skip it ([`SKIP_LINE`], kept when the rest is cut). As [`card_text`] without an
/// expiry line.
pub fn question_text(input: &QuestionInput, q: usize) -> String {
    card_text(input, q, None)
}

/// The plain text of question `q` with the expiry line `open` (see [`open_line`]) above the
/// skip line: at most [`FALLBACK_CHARS`], the question cut first.
pub fn card_text(input: &QuestionInput, q: usize, open: Option<&str>) -> String {
    let (head, tail) = card_parts(input, q, open);
    with_tail(&head, &tail, text_chars(input, q))
}

/// Escapes text for a `formatted_body`.
pub fn escape_html(s: &str) -> String {
    frogbot_channel::markdown::escape(s)
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
        .replace('\n', "<br>")
}

/// Markdown as HTML to show inline: a single paragraph without its `<p>`.
fn inline_html(markdown: &str) -> String {
    let html = crate::format::to_html(markdown);
    let inner = html
        .strip_prefix("<p>")
        .and_then(|h| h.strip_suffix("</p>"));
    inner
        .filter(|h| !h.contains("<p>"))
        .map_or_else(|| html.clone(), str::to_owned)
}

/// The HTML of question `q` (the `formatted_body` of [`card_text`]): "Question i of n" in
/// italics, the header in bold, the question's Markdown as HTML, the options, the lines saying
/// how to answer (the expiry line in italics); settled (`extra`: the outcome line, in bold), the
/// lines saying how to answer are left out.
pub fn card_html(
    input: &QuestionInput,
    q: usize,
    open: Option<&str>,
    extra: Option<&str>,
) -> String {
    let item = &input.questions[q];
    let (_, tail) = card_parts(input, q, open);
    let position = position_text(input, q).map(|p| format!("<i>{}</i><br>", escape_html(&p)));
    let mut html = position.unwrap_or_default();
    if item.kind == InputKind::Confirm && item.danger {
        html.push_str("⚠️ ");
    }
    let question = truncate(&shown_question(item), text_chars(input, q));
    html.push_str(&format!(
        "<b>{}</b>: {}",
        escape_html(&item.header),
        inline_html(&question)
    ));
    let pages = list_pages(input, q);
    if !pages.is_empty() {
        html.push_str(&escape_html(&pages_line(item.options.len(), pages.len())));
    } else if item.kind == InputKind::Choice && !item.options.is_empty() {
        // As in `body`, the options are cut where the text would grow past its limit.
        let options = truncate(&numbered_options(item).join("\n"), text_chars(input, q));
        html.push_str("<br>");
        html.push_str(&escape_html(&options));
    }
    match extra {
        Some(extra) => html.push_str(&format!("<br><b>{}</b>", escape_html(extra))),
        None => {
            for line in &tail {
                let line_html = escape_html(line);
                match open {
                    Some(open) if open == line => html.push_str(&format!("<br><i>{line_html}</i>")),
                    _ => html.push_str(&format!("<br>{line_html}")),
                }
            }
        }
    }
    html
}

/// The message of an input drawn without a poll (text, number, toggle, confirm, or a choice of
/// only an own answer) in the thread on `root`: `body` [`card_text`] and its HTML.
pub fn card_message(
    input: &QuestionInput,
    q: usize,
    open: Option<&str>,
    root: &EventId,
) -> Result<Content, Error> {
    let c = RoomMessageEventContent::text_html(
        card_text(input, q, open),
        card_html(input, q, open, None),
    );
    message_in(c, thread(root))
}

/// The settled view of such a message: an edit (`m.replace`) of `message` to its text without
/// the expiry line, then `outcome_line`.
pub fn card_replacement(
    input: &QuestionInput,
    q: usize,
    message: &EventId,
    outcome_line: &str,
) -> Result<Content, Error> {
    let c = RoomMessageEventContentWithoutRelation::text_html(
        settled_text(input, q, outcome_line),
        card_html(input, q, None, Some(outcome_line)),
    )
    .make_replacement(ReplacementMetadata::new(message.to_owned(), None));
    Ok(("m.room.message", json(&c)?))
}

/// The reactions the bot puts on input `q`'s message for people to tap (a confirm's ✅, a
/// toggle's ✅ and ❌): `m.reaction` annotations of `message`.
pub fn reactions(input: &QuestionInput, q: usize, message: &EventId) -> Vec<Content> {
    let item = &input.questions[q];
    // A multiple-choice poll: ✅ sends what is picked.
    let keys: &[&str] = if has_poll(item) && item.multiple {
        &[YES_KEY]
    } else {
        reaction_keys(item.kind)
    };
    keys.iter().map(|key| reaction(message, key)).collect()
}

/// An `m.reaction` with `key` on `message` (`rel_type` `m.annotation`).
pub fn reaction(message: &EventId, key: &str) -> Content {
    (
        "m.reaction",
        serde_json::json!({"m.relates_to": {
            "rel_type": "m.annotation", "event_id": message, "key": key
        }}),
    )
}

fn poll_question(input: &QuestionInput, q: usize, open: Option<&str>) -> String {
    let item = &input.questions[q];
    let question = format!(
        "{}{}: {}",
        position_text(input, q)
            .map(|p| format!("{p} — "))
            .unwrap_or_default(),
        item.header,
        crate::format::to_plain(&shown_question(item))
    );
    let open = open.map(|o| format!(" ({o})")).unwrap_or_default();
    let question = truncate(&question, QUESTION_CHARS - open.chars().count());
    format!("{question}{open}")
}

/// A poll answer's text: the option's label, and its description when it has one, as plain
/// text, at most [`ANSWER_CHARS`] (the `body` fallback shows the description whole, up to
/// [`DESCRIPTION_CHARS`]).
fn answer_text(item: &QuestionItem, o: &frogbot_model::QuestionOption) -> String {
    // An approval's answers are Approve and Deny: their descriptions only restate the question
    // (the `body` keeps them).
    if frogbot_model::is_approval(item) {
        return truncate(&crate::format::to_plain(&o.label), ANSWER_CHARS);
    }
    truncate(&option_text(o), ANSWER_CHARS)
}

fn thread(root: &EventId) -> Thread {
    Thread::plain(root.to_owned(), root.to_owned())
}

/// The message `c` in the thread `t`: an `m.room.message` to send.
fn message_in(mut c: RoomMessageEventContent, t: Thread) -> Result<Content, Error> {
    c.relates_to = Some(Relation::Thread(t));
    Ok(("m.room.message", json(&c)?))
}

/// What a poll of question `q` shows, in either event type: its question, its answers (id and
/// text, the ids drawn at `revision`) and its `max_selections`.
struct PollParts {
    question: String,
    answers: Vec<(String, String)>,
    max_selections: UInt,
}

fn poll_parts(
    input: &QuestionInput,
    q: usize,
    revision: u64,
    open: Option<&str>,
) -> Result<PollParts, Error> {
    let item = &input.questions[q];
    let n = item.options.len();
    if n > MAX_ANSWERS {
        return Err(Error::Render(format!(
            "a poll has at most {MAX_ANSWERS} answers, question {} has {n} options",
            q + 1
        )));
    }
    let answer = |(i, o)| (answer_id(revision, i), answer_text(item, o));
    let n = if item.multiple { n } else { 1 };
    Ok(PollParts {
        question: poll_question(input, q, open),
        answers: item.options.iter().enumerate().map(answer).collect(),
        max_selections: UInt::try_from(n.max(1)).unwrap_or(UInt::MIN),
    })
}

impl PollParts {
    /// The poll as `m.poll.start`'s content block (disclosed).
    fn stable(self) -> Result<PollContentBlock, Error> {
        let answer = |(id, text)| PollAnswer::new(id, TextContentBlock::plain(text));
        let answers: Vec<PollAnswer> = self.answers.into_iter().map(answer).collect();
        let answers = PollAnswers::try_from(answers).map_err(render_error)?;
        let mut block = PollContentBlock::new(TextContentBlock::plain(self.question), answers);
        block.kind = PollKind::Disclosed;
        block.max_selections = self.max_selections;
        Ok(block)
    }

    /// The poll as `org.matrix.msc3381.poll.start`'s content block (disclosed).
    fn unstable(self) -> Result<UnstablePollStartContentBlock, Error> {
        let answer = |(id, text)| UnstablePollAnswer::new(id, text);
        let answers: Vec<UnstablePollAnswer> = self.answers.into_iter().map(answer).collect();
        let answers = UnstablePollAnswers::try_from(answers).map_err(render_error)?;
        let mut block = UnstablePollStartContentBlock::new(self.question, answers);
        block.kind = PollKind::Disclosed;
        block.max_selections = self.max_selections;
        Ok(block)
    }
}

/// `content` with a plain `body`: what a client that renders no poll
/// shows — the question, the numbered options and how to answer by a reply. An edit gets it in
/// `m.new_content` too (`* ` before it outside, as edits of messages have).
fn with_body(mut content: Value, text: &str) -> Value {
    if let Some(new) = content
        .get_mut("m.new_content")
        .and_then(Value::as_object_mut)
    {
        new.insert("body".into(), text.into());
        content["body"] = format!("* {text}").into();
    } else {
        content["body"] = text.into();
    }
    content
}

/// The poll start of question `q` (which must have options) in the thread on `root`, its answer
/// ids drawn at `revision` of the question set, the expiry line `open` in its question and text:
/// the event type and content to send (`Room::send_raw`). A poll response names its answer ids,
/// read back with [`crate::ids::read_control`].
///
/// ```
/// use frogbot_matrix::render::{self, PollEvents};
/// use frogbot_model::QuestionInput;
/// use matrix_sdk::ruma::EventId;
///
/// let input: QuestionInput = serde_json::from_value(serde_json::json!({"questions": [{
///     "header": "Pond", "question": "Which pond?", "options": [{"label": "Lily"}, {"label": "Mill"}]
/// }]}))
/// .unwrap();
/// let root = EventId::parse("$root").unwrap();
/// let (kind, poll) = render::poll_start(&input, 0, &root, PollEvents::Stable, 3, None).unwrap();
/// assert_eq!(kind, "m.poll.start");
/// // Answer ids `r{revision}o{option}`.
/// assert_eq!(poll["m.poll"]["answers"][1]["m.id"], "r3o1");
/// ```
pub fn poll_start(
    input: &QuestionInput,
    q: usize,
    root: &EventId,
    events: PollEvents,
    revision: u64,
    open: Option<&str>,
) -> Result<Content, Error> {
    let text = card_text(input, q, open);
    poll_event(
        text,
        poll_parts(input, q, revision, open)?,
        events,
        root,
        false,
    )
}

/// A poll start drawing `text` and `parts` as `events` says: in the thread on `on`, or (with
/// `replaces`) an edit of the poll start `on` (`* ` before the outer text, as edits have).
fn poll_event(
    text: String,
    parts: PollParts,
    events: PollEvents,
    on: &EventId,
    replaces: bool,
) -> Result<Content, Error> {
    let (kind, content) = match events {
        PollEvents::Stable => {
            let block = parts.stable()?;
            let mut c = PollStartEventContent::with_plain_text(text.clone(), block.clone());
            if replaces {
                let new = PollStartEventContentWithoutRelation::from(c);
                c = PollStartEventContent::with_plain_text(format!("* {text}"), block);
                c.relates_to = Some(Relation::Replacement(Replacement::new(on.to_owned(), new)));
            } else {
                c.relates_to = Some(Relation::Thread(thread(on)));
            }
            (STABLE_START, json(&c)?)
        }
        PollEvents::Unstable if replaces => {
            let (text, block) = (text.clone(), parts.unstable()?);
            let c =
                ReplacementUnstablePollStartEventContent::plain_text(text, block, on.to_owned());
            (UNSTABLE_START, json(&c)?)
        }
        PollEvents::Unstable => {
            let mut c =
                NewUnstablePollStartEventContent::plain_text(text.clone(), parts.unstable()?);
            c.relates_to = Some(RelationWithoutReplacement::Thread(thread(on)));
            (UNSTABLE_START, json(&c)?)
        }
    };
    Ok((kind, with_body(content, &text)))
}

/// The event type of a poll start, stable and unstable (MSC3381).
const STABLE_START: &str = "m.poll.start";
const UNSTABLE_START: &str = "org.matrix.msc3381.poll.start";

/// A message in the thread on `root` (an approval's page of arguments): `body` the Markdown
/// `text`, `formatted_body` its HTML (so a fenced block shows as code, not as backticks).
pub fn markdown_message(text: &str, root: &EventId) -> Result<Content, Error> {
    let c = RoomMessageEventContent::text_html(text, crate::format::to_html(text));
    message_in(c, thread(root))
}

/// A plain message in the thread on `root` (the prompt of a question with only an own answer).
pub fn thread_message(text: &str, root: &EventId) -> Result<Content, Error> {
    message_in(RoomMessageEventContent::text_plain(text), thread(root))
}

/// The `msgtype` a file of `media_type` is sent as: `m.image` (not SVG, which clients do not
/// draw as a picture), `m.video`, `m.audio`, else `m.file`.
pub fn file_msgtype(media_type: &str) -> &'static str {
    match media_type.split('/').next().unwrap_or("") {
        "image" if !media_type.starts_with("image/svg") => "m.image",
        "video" => "m.video",
        "audio" => "m.audio",
        _ => "m.file",
    }
}

/// A notice in the thread on `root` that mentions `user` (and replies to `reply_to` if given).
pub fn mention_notice(
    user: &UserId,
    text: &str,
    root: &EventId,
    reply_to: Option<OwnedEventId>,
) -> Result<Content, Error> {
    let c =
        RoomMessageEventContent::notice_plain(truncate(&format!("{user}: {text}"), FALLBACK_CHARS))
            .add_mentions(Mentions::with_user_ids([user.to_owned()]));
    let t = match reply_to {
        Some(r) => Thread::reply(root.to_owned(), r),
        None => thread(root),
    };
    message_in(c, t)
}

/// The Matrix people a question is for: the `matrix:@user:server` entries of its `from` (only
/// they may answer; an `ask` names the person asked there), in order, each once.
pub fn people_asked(input: &QuestionInput) -> Vec<OwnedUserId> {
    frogbot_channel::render::people_asked(input, crate::PLATFORM, |id| UserId::parse(id).ok())
}

/// A question's event `content` (a message or a poll start) mentioning `people` the Matrix way,
/// so their clients notify them: `m.mentions` `{"user_ids": people}` (nobody else: no `@room`,
/// and no name in the text pings anyone), and a pill
/// (`<a href="https://matrix.to/#/@bob:server">@bob:server</a>`) for each where its id is
/// written in the text (outside links and code) of `formatted_body` (made from `body` when the
/// content has none, as a poll's fallback). Someone whose id the text does not write is put
/// before it, `@bob:server: ` in `body` and a pill in `formatted_body`. Unchanged without
/// `people`.
pub fn mention_people(mut content: Value, people: &[OwnedUserId]) -> Value {
    if people.is_empty() {
        return content;
    }
    let mut body = content["body"].as_str().unwrap_or_default().to_owned();
    let mut html = content["formatted_body"]
        .as_str()
        .map_or_else(|| escape_html(&body), str::to_owned);
    let unwritten: Vec<&str> = people
        .iter()
        .map(|p| p.as_str())
        .filter(|p| find_id(&body, p, 0).is_none())
        .collect();
    if !unwritten.is_empty() {
        let names = unwritten.join(", ");
        body = format!("{names}: {body}");
        html = format!("{}: {html}", escape_html(&names));
    }
    for p in people {
        html = pill_ids(&html, p);
    }
    content["body"] = body.into();
    content["format"] = "org.matrix.custom.html".into();
    content["formatted_body"] = html.into();
    content["m.mentions"] = serde_json::json!({ "user_ids": people });
    content
}

/// The first place at or after `from` where `text` writes the user id `id` (not inside a longer
/// id or word).
fn find_id(text: &str, id: &str, from: usize) -> Option<usize> {
    crate::convert::find_where(text, id, from, |before, after| {
        let mut next = after.chars();
        let after_ok = match next.next() {
            None => true,
            Some(c) if c.is_alphanumeric() || c == '-' => false,
            // `.` or `:` ends a sentence or a label unless the id goes on (`.org`, `:8448`).
            Some('.' | ':') => !next.next().is_some_and(|c| c.is_ascii_alphanumeric()),
            Some(_) => true,
        };
        !before.is_some_and(|c| c.is_alphanumeric() || c == '@') && after_ok
    })
}

/// `html` with every written `user` id outside tags, links, and code made a pill.
fn pill_ids(html: &str, user: &UserId) -> String {
    let id = user.as_str();
    let pill = format!(r#"<a href="https://matrix.to/#/{id}">{id}</a>"#);
    let mut out = String::with_capacity(html.len() + pill.len());
    let mut skip = 0usize;
    let mut rest = html;
    while !rest.is_empty() {
        if rest.starts_with('<') {
            let end = rest.find('>').map_or(rest.len(), |i| i + 1);
            let tag = rest[1..end].trim_start_matches('/').to_ascii_lowercase();
            let name = tag
                .split(|c: char| !c.is_ascii_alphanumeric())
                .next()
                .unwrap_or_default();
            if matches!(name, "a" | "code" | "pre") {
                if rest.starts_with("</") {
                    skip = skip.saturating_sub(1);
                } else {
                    skip += 1;
                }
            }
            out.push_str(&rest[..end]);
            rest = &rest[end..];
            continue;
        }
        let end = rest.find('<').unwrap_or(rest.len());
        let text = &rest[..end];
        if skip > 0 {
            out.push_str(text);
        } else {
            let mut from = 0;
            while let Some(at) = find_id(text, id, from) {
                out.push_str(&text[from..at]);
                out.push_str(&pill);
                from = at + id.len();
            }
            out.push_str(&text[from..]);
        }
        rest = &rest[end..];
    }
    out
}

/// The outcome line shown on a settled question ([`frogbot_model::outcome_line`]: "⏭️ Skipped
/// by @user:server" for a dismissal), its answer cut at [`SHOWN_ANSWER_CHARS`].
pub fn outcome_text(
    input: &QuestionInput,
    q: usize,
    outcome: &QuestionOutcome,
    by: Option<&str>,
) -> String {
    frogbot_model::outcome_line(input, Some(q), outcome, by, |t| {
        truncate(t, SHOWN_ANSWER_CHARS)
    })
}

/// The characters of a typed answer a settled view shows.
pub const SHOWN_ANSWER_CHARS: usize = 500;

/// Ends the poll `poll` with `text`.
pub fn poll_end(poll: &EventId, text: &str, events: PollEvents) -> Result<Content, Error> {
    let (kind, content) = match events {
        PollEvents::Stable => (
            "m.poll.end",
            json(&PollEndEventContent::with_plain_text(text, poll.to_owned()))?,
        ),
        PollEvents::Unstable => (
            "org.matrix.msc3381.poll.end",
            json(&UnstablePollEndEventContent::new(text, poll.to_owned()))?,
        ),
    };
    Ok((kind, with_body(content, text)))
}

/// An edit (`m.replace`) of the poll start `poll` of question `q`, its answer ids drawn at
/// `revision`: redrawn after a step of the set (`outcome_line` `None`, the expiry line `open`
/// shown), or showing the outcome (without the expiry line).
pub fn poll_replacement(
    input: &QuestionInput,
    q: usize,
    poll: &EventId,
    outcome_line: Option<&str>,
    events: PollEvents,
    revision: u64,
    open: Option<&str>,
) -> Result<Content, Error> {
    let open = if outcome_line.is_some() { None } else { open };
    let text = match outcome_line {
        Some(line) => settled_text(input, q, line),
        None => card_text(input, q, open),
    };
    poll_event(
        text,
        poll_parts(input, q, revision, open)?,
        events,
        poll,
        true,
    )
}

// ---------------------------------------------------------------------------------------------
// Agent messages: title, Markdown text and blocks.
// ---------------------------------------------------------------------------------------------

/// The most characters of `body` in one agent-message text piece (as replies).
pub const AGENT_MESSAGE_CHARS: usize = 32_000;
/// The longest table cell drawn, in characters (a row of 20 such cells, in `body` and HTML,
/// stays far under the event limit).
pub const MAX_TABLE_CELL: usize = 500;

/// One Matrix message an agent message is drawn in: an `m.text` message ([`Shown::Text`]: `body`
/// and its HTML `formatted_body`, at most [`MAX_TEXT_BYTES`](crate::format::MAX_TEXT_BYTES) of
/// both), or an image block ([`Shown::Image`]: an `m.image` once the image is uploaded to the media
/// repository).
pub type AgentPiece = Shown<Formatted>;

/// A piece and the event-button reaction keys the bot places on it ([`crate::ids::event_id`]):
/// the buttons of the blocks whose drawing ends in it.
#[derive(Clone, Debug, PartialEq)]
pub struct DrawnPiece {
    /// What the message shows.
    pub piece: AgentPiece,
    /// The annotation keys, in order.
    pub keys: Vec<String>,
}

/// Escapes text for HTML, keeping newlines (for `<pre>`).
fn escape_pre(s: &str) -> String {
    escape_html(s).replace("<br>", "\n")
}

/// The bytes a string takes as a JSON string.
fn json_len(s: &str) -> usize {
    serde_json::to_string(s).map_or(usize::MAX / 4, |j| j.len())
}

/// Groups `items` (a `body` line and its HTML each) greedily into chunks whose `body` and HTML
/// fit the event budget less `overhead`; an item alone over the budget is its own chunk (the
/// callers keep items small).
fn pack_items(items: Vec<(String, String)>, overhead: usize) -> Vec<Vec<(String, String)>> {
    let budget = crate::format::MAX_TEXT_BYTES.saturating_sub(overhead + 200);
    frogbot_model::text::pack(items, budget, |(body, html), _| {
        json_len(body) + json_len(html)
    })
}

/// Each group of [`pack_items`] drawn by `draw` from its `body` lines and their HTML.
fn draw_groups(
    groups: Vec<Vec<(String, String)>>,
    draw: impl Fn(&[&str], &[&str]) -> Formatted,
) -> Vec<Formatted> {
    let draw_one = |g: Vec<(String, String)>| {
        let (body, html): (Vec<&str>, Vec<&str>) =
            g.iter().map(|(b, h)| (b.as_str(), h.as_str())).unzip();
        draw(&body, &html)
    };
    groups.into_iter().map(draw_one).collect()
}

/// The `body` / HTML chunks a (non-image) block is drawn in, each within the event budget.
pub fn block_chunks(block: &Block) -> Vec<Formatted> {
    match &block.kind {
        BlockKind::Table { columns, rows } => {
            // A row's `body` line and its cells' HTML.
            let row = |cells: Vec<String>, tag: &str| {
                let html: String = cells
                    .iter()
                    .map(|c| format!("<{tag}>{}</{tag}>", escape_html(c)))
                    .collect();
                (cells.join(" | "), html)
            };
            let cell = |s: &str| frogbot_model::text::one_line(s, MAX_TABLE_CELL);
            let (header, body) = render::grid(columns, rows, columns.len(), cell);
            let (head_body, head_html) = row(header, "th");
            let items: Vec<(String, String)> = body
                .into_iter()
                .map(|cells| {
                    let (body, html) = row(cells, "td");
                    (body, format!("<tr>{html}</tr>"))
                })
                .collect();
            let overhead = json_len(&head_body) + json_len(&head_html) + 100;
            let mut groups = pack_items(items, overhead);
            if groups.is_empty() {
                groups.push(Vec::new());
            }
            draw_groups(groups, |body, html| Formatted {
                body: [&[head_body.as_str()], body].concat().join("\n"),
                html: format!(
                    "<table><thead><tr>{head_html}</tr></thead><tbody>{}</tbody></table>",
                    html.concat()
                ),
            })
        }
        BlockKind::Progress { value, max, label } => {
            let bar = render::progress(*value, *max, render::PROGRESS_WIDTH, "");
            let (body, html) = match label {
                Some(l) => (
                    format!("{l}: {bar}"),
                    format!("<p><strong>{}</strong><br>{bar}</p>", escape_html(l)),
                ),
                None => (bar.clone(), format!("<p>{bar}</p>")),
            };
            vec![Formatted { body, html }]
        }
        BlockKind::Code { code, language } => {
            let lang = language.as_deref().unwrap_or("");
            let open = match language {
                Some(l) => format!("<pre><code class=\"language-{}\">", escape_html(l)),
                None => "<pre><code>".to_owned(),
            };
            // Lines longer than a chunk are cut (a minified file, say).
            let pieces = code.trim_end().lines().flat_map(|l| split_exact(l, 4_000));
            let items = pieces.map(|p| (p.clone(), escape_pre(&p))).collect();
            draw_groups(pack_items(items, 100), |body, html| Formatted {
                body: format!("```{lang}\n{}\n```", body.join("\n")),
                html: format!("{open}{}</code></pre>", html.join("\n")),
            })
        }
        BlockKind::Fields { fields } => {
            let items: Vec<(String, String)> = fields
                .iter()
                .map(|f| {
                    (
                        format!("{}: {}", f.key, f.value),
                        format!(
                            "<strong>{}:</strong> {}",
                            escape_html(&f.key),
                            escape_html(&f.value)
                        ),
                    )
                })
                .collect();
            draw_groups(pack_items(items, 50), |body, html| Formatted {
                body: body.join("\n"),
                html: format!("<p>{}</p>", html.join("<br>")),
            })
        }
        BlockKind::Html { title, url, .. } => {
            let title = truncate(title.as_deref().unwrap_or("App"), render::MAX_TITLE);
            let head = format!("<p>🧩 <strong>{}</strong><br>", escape_html(&title));
            // With the server's public_url, a link to the app's web view.
            let (body, link) = match url {
                Some(u) => (
                    format!("🧩 {title} — an app: {u}"),
                    format!("<a href=\"{}\">Open the app</a>", escape_html(u)),
                ),
                None => (
                    format!("🧩 {title} — an app: open it in the web chat."),
                    "<em>An app: open it in the web chat.</em>".to_owned(),
                ),
            };
            vec![Formatted {
                body,
                html: format!("{head}{link}</p>"),
            }]
        }
        BlockKind::Image { url, alt } => vec![image_link(url, alt, false)],
        _ => vec![Formatted {
            body: UNKNOWN_BLOCK_TEXT.to_owned(),
            html: format!("<p>{}</p>", escape_html(UNKNOWN_BLOCK_TEXT)),
        }],
    }
}

/// What an image that could not be uploaded shows instead: its alt text and a link to it, and,
/// when `failed`, that it could not be shown here.
pub fn image_link(url: &str, alt: &str, failed: bool) -> Formatted {
    let alt = truncate(alt, MAX_TABLE_CELL * 4);
    let name = Some(alt.as_str())
        .filter(|a| !a.is_empty())
        .unwrap_or("Image");
    let note = if failed {
        " (the image could not be shown here: open the link)"
    } else {
        ""
    };
    Formatted {
        body: format!("🖼 {name}: {url}{note}"),
        html: format!(
            "<p>🖼 <a href=\"{}\">{}</a>{}</p>",
            escape_html(url),
            escape_html(name),
            escape_html(note)
        ),
    }
}

/// Two chunks as one message, if it stays within [`MAX_TEXT_BYTES`](crate::format::MAX_TEXT_BYTES).
fn join(a: &Formatted, b: &Formatted) -> Option<Formatted> {
    let both = Formatted {
        body: format!("{}\n\n{}", a.body, b.body),
        html: format!("{}\n{}", a.html, b.html),
    };
    (both.json_bytes() <= crate::format::MAX_TEXT_BYTES).then_some(both)
}

/// Draws an agent message: its title (bold) and Markdown text ([`crate::format::messages`]), then
/// its blocks — tables as HTML `<table>`s (`body`: `a | b` rows), progress as a text bar, code as
/// `<pre><code class="language-x">` (`body`: a fenced block), fields as `<strong>key:</strong>
/// value` lines, an app as its name and "open it in the web chat", an unknown type as
/// [`UNKNOWN_BLOCK_TEXT`] — packed into as few `m.text` messages as the event limit allows, each
/// image as an `m.image` of its own. A block's event buttons become reaction keys
/// ([`crate::ids::event_id`]) on the message its drawing ends in. An empty message gives no
/// piece.
pub fn agent_message(message: &UiMessage) -> Vec<DrawnPiece> {
    let mut texts = crate::format::messages(&message.text(), AGENT_MESSAGE_CHARS);
    if let Some(title) = render::title(message) {
        let title = truncate(title.trim(), render::MAX_TITLE);
        let title = Formatted {
            body: format!("**{title}**"),
            html: format!("<p><strong>{}</strong></p>", escape_html(&title)),
        };
        render::put_title(&mut texts, title, join);
    }
    let keys = |i, block: &Block| {
        let key = |(b, e): (usize, &frogbot_model::blocks::EventButton)| {
            crate::ids::event_id(&e.label, frogbot_model::EventControl::new(i, b))
        };
        block.events.iter().enumerate().map(key).collect()
    };
    let laid = render::layout(texts, message, block_chunks, keys, join);
    let drawn = |Laid { piece, controls }| DrawnPiece {
        piece,
        keys: controls,
    };
    laid.into_iter().map(drawn).collect()
}
