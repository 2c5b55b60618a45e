//! Drawing pieces every adapter's `render.rs` shares beyond the Markdown walker: platform-neutral
//! layout rules (which a platform's own module turns into its controls), never a platform type.
//!
//! - Agent messages: [`title`] and [`put_title`] (a title before the text), [`layout`] (the text,
//!   then each block's chunks packed into messages, an image a message of its own, a block's event
//!   buttons on the message its drawing ends in), [`grid`] (a table's cells), [`progress`] (a
//!   progress bar's line), and [`last_with_room`] for a platform that packs its own way.
//! - Questions: [`choice_how`] (a listed choice's typed answer) and [`number_phrase`] (what a
//!   number input takes), [`people_asked`] (whom a question is for), [`shown_question`] (the
//!   text a question shows), [`settled_question`] (that text once settled) and [`answer_lines`]
//!   (a settled set's answers).

use frogbot_model::blocks::{Block, BlockKind, blocks_of, progress_bar};
use std::borrow::Cow;

use frogbot_model::{ApprovalPages, QuestionItem, QuestionOutput, UiMessage, is_approval};

/// The longest title of an agent message drawn, in characters.
pub const MAX_TITLE: usize = 256;
/// How many cells a progress bar has (where the platform gives it the room).
pub const PROGRESS_WIDTH: usize = 20;

/// An agent message's title, when it has one that is not blank.
pub fn title(message: &UiMessage) -> Option<&str> {
    message
        .metadata
        .title
        .as_deref()
        .filter(|t| !t.trim().is_empty())
}

/// Puts `title` before the first of `texts` where `join` gives both as one message (they fit),
/// else as a message of its own before them.
pub fn put_title<T>(texts: &mut Vec<T>, title: T, join: impl FnOnce(&T, &T) -> Option<T>) {
    match texts.first_mut() {
        Some(first) if let Some(both) = join(&title, first) => *first = both,
        _ => texts.insert(0, title),
    }
}

/// What one message of an agent message shows ([`layout`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Shown<T> {
    /// Text as the platform draws it: the message's own text, and blocks drawn as text.
    Text(T),
    /// An image block, a message of its own.
    Image {
        /// The image's http(s) URL.
        url: String,
        /// Its alt text.
        alt: String,
    },
}

/// One message of an agent message as [`layout`] packs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Laid<T, C> {
    /// What it shows.
    pub piece: Shown<T>,
    /// The controls (event buttons) of the blocks whose drawing ends in it, in order.
    pub controls: Vec<C>,
}

/// An agent message laid out in messages: `texts` (its title and text as the platform drew them),
/// then each block of `message` — an image a message of its own, any other block the chunks `draw`
/// gives, each added to the last message while it is a text and `join` gives both as one (they
/// fit), else a message of its own. Block `i`'s `controls(i, block)` go on the message its drawing
/// ends in (a block drawn in no chunk after an image: on the next text message).
pub fn layout<T, C>(
    texts: Vec<T>,
    message: &UiMessage,
    draw: impl Fn(&Block) -> Vec<T>,
    controls: impl Fn(usize, &Block) -> Vec<C>,
    join: impl Fn(&T, &T) -> Option<T>,
) -> Vec<Laid<T, C>> {
    let text = |t: T| Laid {
        piece: Shown::Text(t),
        controls: Vec::new(),
    };
    let mut out: Vec<Laid<T, C>> = texts.into_iter().map(text).collect();
    let mut pending: Vec<C> = Vec::new();
    for (i, block) in blocks_of(message).iter().enumerate() {
        let mut controls = controls(i, block);
        if let BlockKind::Image { url, alt } = &block.kind {
            let (url, alt) = (url.clone(), alt.clone());
            let piece = Shown::Image { url, alt };
            out.push(Laid { piece, controls });
            continue;
        }
        for chunk in draw(block) {
            match out.last_mut() {
                Some(Laid {
                    piece: Shown::Text(t),
                    ..
                }) if let Some(both) = join(t, &chunk) => *t = both,
                _ => out.push(Laid {
                    controls: std::mem::take(&mut pending),
                    ..text(chunk)
                }),
            }
        }
        match out.last_mut() {
            Some(last) if matches!(last.piece, Shown::Text(_)) => {
                last.controls.append(&mut controls)
            }
            _ => pending.append(&mut controls),
        }
    }
    out
}

/// A table as one grid: its header and each row, `width` cells each (a short row filled with empty
/// cells), every cell through `cell`.
pub fn grid<T>(
    columns: &[String],
    rows: &[Vec<String>],
    width: usize,
    cell: impl Fn(&str) -> T,
) -> (Vec<T>, Vec<Vec<T>>) {
    let row = |r: &[String]| {
        let cells = (0..width).map(|i| cell(r.get(i).map_or("", String::as_str)));
        cells.collect::<Vec<T>>()
    };
    (row(columns), rows.iter().map(|r| row(r)).collect())
}

/// A progress block's line: its bar of `width` cells between `fence`s, and the percentage
/// (`` `███░░` 60% ``).
pub fn progress(value: f64, max: f64, width: usize, fence: &str) -> String {
    let pct = (value / max * 100.0).round();
    format!("{fence}{}{fence} {pct}%", progress_bar(value, max, width))
}

/// How a choice whose options are listed, numbered, is answered by a typed reply: "the number of
/// your choice", or for `multiple` "the numbers of your choices, separated by commas".
pub fn choice_how(multiple: bool) -> &'static str {
    if multiple {
        "the numbers of your choices, separated by commas"
    } else {
        "the number of your choice"
    }
}

/// What a number input takes: "a number from 1 to 10, in steps of 2 (pods)" — its range
/// ([`QuestionItem::range_phrase`]), its step after `sep` (`","`, or nothing) and its unit.
pub fn number_phrase(item: &QuestionItem, sep: &str) -> String {
    let step = item.step.as_ref();
    let step = step.map_or(String::new(), |s| format!("{sep} in steps of {s}"));
    let unit = item.unit.as_deref().filter(|u| !u.trim().is_empty());
    let unit = unit.map_or(String::new(), |u| format!(" ({u})"));
    format!("a number{}{step}{unit}", item.range_phrase())
}

/// The text a question shows for `item`: its question, or, for an approval too long for its
/// message (`paged`: the platform's `approval_pages` of it), the card's text.
pub fn shown_question(
    item: &QuestionItem,
    paged: impl FnOnce(&QuestionItem) -> Option<ApprovalPages>,
) -> Cow<'_, str> {
    paged(item).map_or(Cow::Borrowed(&item.question), |p| Cow::Owned(p.card))
}

/// `shown` (what question `item` shows, [`shown_question`]) once settled: an approval's text
/// ends with how to answer it ("Approve runs it; Deny refuses it — or write a reason…", after its
/// arguments' block or, paged, after the line saying where they are), which goes (the outcome
/// says who decided); any other text is unchanged.
pub fn settled_question<'a>(item: &QuestionItem, shown: &'a str) -> &'a str {
    let close = item.question.rfind("\n```\n").filter(|_| is_approval(item));
    let foot = close.map_or("", |close| item.question[close + 5..].trim());
    match shown.trim_end().strip_suffix(foot) {
        Some(kept) if !foot.is_empty() => kept.trim_end(),
        _ => shown,
    }
}

/// A settled set's answers to `questions`, a line each: "• header: answer" (the answer as
/// [`QuestionItem::answer_after_header`] reads it, found in `output` by the question's header;
/// none when missing), the header through `header` (the platform's bold, or as it is).
pub fn answer_lines(
    questions: &[QuestionItem],
    output: &QuestionOutput,
    header: impl Fn(&str) -> String,
) -> Vec<String> {
    let line = |item: &QuestionItem| {
        let answer = output.answers.iter().find(|a| a.header == item.header);
        let selected = answer.map_or(&[][..], |a| a.selected.as_slice());
        let answer = item.answer_after_header(selected);
        format!("• {}: {answer}", header(&item.header))
    };
    questions.iter().map(line).collect()
}

/// The people of this platform a question is for: the entries of its
/// [`from`](frogbot_model::QuestionInput::from) written `{platform}:ID` whose ID `user` reads (a
/// valid user id of the platform), in order, each once. Only they may answer; its first message
/// mentions them.
pub fn people_asked<T: PartialEq>(
    input: &frogbot_model::QuestionInput,
    platform: &str,
    user: impl Fn(&str) -> Option<T>,
) -> Vec<T> {
    let mut people = Vec::new();
    let ids = input.from.iter().filter_map(|f| {
        let id = f.strip_prefix(platform)?.strip_prefix(':')?;
        user(id)
    });
    for id in ids {
        if !people.contains(&id) {
            people.push(id);
        }
    }
    people
}

/// The last of `groups`, or a new one when there is none or `full` says the last has no room.
pub fn last_with_room<G: Default>(groups: &mut Vec<G>, full: impl FnOnce(&G) -> bool) -> &mut G {
    if groups.last().is_none_or(full) {
        groups.push(G::default());
    }
    groups.last_mut().expect("a group")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(kind: BlockKind, events: &[&str]) -> frogbot_model::MessagePart {
        let events = events.iter().map(|l| frogbot_model::blocks::EventButton {
            label: (*l).to_owned(),
            value: None,
        });
        let events = events.collect();
        let id = Some("b".to_owned());
        Block { id, kind, events }.to_part()
    }

    #[test]
    fn layout_packs_chunks_and_puts_controls_where_a_block_ends() {
        let progress = |value| BlockKind::Progress {
            value,
            max: 2.0,
            label: None,
        };
        let (url, alt) = ("https://example.org/a.png".to_owned(), "A frog".to_owned());
        let m = UiMessage {
            id: "m".into(),
            role: frogbot_model::Role::Assistant,
            parts: vec![
                block(progress(1.0), &["Go"]),
                block(BlockKind::Image { url, alt }, &[]),
                block(progress(2.0), &[]),
            ],
            metadata: Default::default(),
        };
        let join = |a: &String, b: &String| (a.len() + b.len() < 30).then(|| format!("{a}+{b}"));
        let draw = |_: &Block| vec!["block".to_owned()];
        let controls = |i: usize, b: &Block| b.events.iter().map(|_| i).collect();
        let laid = layout(vec!["text".to_owned()], &m, draw, controls, join);
        assert_eq!(laid.len(), 3, "{laid:?}");
        assert_eq!(laid[0].piece, Shown::Text("text+block".into()));
        assert_eq!(laid[0].controls, vec![0]);
        assert!(matches!(&laid[1].piece, Shown::Image { alt, .. } if alt == "A frog"));
        assert_eq!(laid[2].piece, Shown::Text("block".into()));
        let mut texts = vec!["text".to_owned()];
        put_title(&mut texts, "Title".to_owned(), |_, _| None);
        assert_eq!(texts, ["Title", "text"]);
    }

    #[test]
    fn a_grid_has_the_width_asked_and_progress_its_percentage() {
        let (head, body) = grid(&["a".into(), "b".into()], &[vec!["1".into()]], 2, str::len);
        assert_eq!((head, body), (vec![1, 1], vec![vec![1, 0]]));
        assert_eq!(progress(1.0, 4.0, 4, "`"), "`▓░░░` 25%");
    }

    #[test]
    fn a_settled_approval_drops_how_to_answer() {
        let input = frogbot_model::approval_question("deploy", &Default::default(), &[], None);
        let item = &input.questions[0];
        let shown = shown_question(item, |_| None);
        assert!(shown.contains("runs it"), "{shown}");
        let settled = settled_question(item, &shown);
        assert!(
            settled.starts_with("Run `deploy`?") && settled.ends_with("```"),
            "{settled}"
        );
        let other = QuestionItem {
            options: Vec::new(),
            ..item.clone()
        };
        assert_eq!(settled_question(&other, &other.question), other.question);
    }

    #[test]
    fn answer_lines_name_each_question_and_its_answer() {
        let input = frogbot_model::approval_question("t", &Default::default(), &[], None);
        let item = &input.questions[0];
        let answer = frogbot_model::QuestionAnswer {
            header: item.header.clone(),
            selected: vec![item.options[0].label.clone()],
        };
        let output = QuestionOutput {
            answers: vec![answer],
        };
        let lines = answer_lines(&input.questions, &output, |h| format!("*{h}*"));
        let want = item.answer_after_header(&output.answers[0].selected);
        assert_eq!(lines, [format!("• *{}*: {want}", item.header)]);
    }

    #[test]
    fn the_people_asked_are_this_platforms_valid_ids_each_once() {
        let from = ["chat:7", "chat:x", "other:8", "chat:9", "chat:7", "chat"];
        let input = frogbot_model::QuestionInput {
            from: from.iter().map(|f| (*f).to_owned()).collect(),
            ..Default::default()
        };
        let asked = people_asked(&input, "chat", |id| id.parse::<u32>().ok());
        assert_eq!(asked, [7, 9]);
    }
}
