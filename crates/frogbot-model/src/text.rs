//! Text to a platform's limits: [`split`] a reply into messages and [`truncate`] a label, both
//! counting characters (never cutting inside a UTF-8 character) and keeping fenced code blocks
//! whole on each side of a cut: a block cut in two is closed at the end of one piece and opened
//! again (with its info string) at the start of the next, so every piece renders as code.
//!
//! Where to cut comes from `text-splitter`'s Markdown splitter (the largest semantic unit that
//! fits: sections, then blocks, then lines, sentences, words, graphemes). [`table_text`] draws a
//! Markdown table as aligned plain lines for platforms without tables.

use pulldown_cmark::Alignment;
use text_splitter::{ChunkConfig, MarkdownSplitter};

/// A fenced code block of the text: where its content starts and ends (byte offsets) and the
/// fences that open and close it.
#[derive(Debug)]
struct Fence {
    /// The opening line, e.g. "```rust".
    open: String,
    /// Byte offset of the opening line.
    open_at: usize,
    /// Byte offset just past the closing line.
    close_end: usize,
    /// The closing marker, e.g. "```".
    close: String,
    /// Byte offset of the content's first line (just after the opening line's newline).
    content: usize,
    /// Byte offset of the closing line (the text's end when the block is never closed).
    end: usize,
}

/// The fenced code blocks of `text` (CommonMark: ``` or ~~~, three or more, indented at most
/// three spaces; closed by the same character at least as long, with nothing after it).
fn fences(text: &str) -> Vec<Fence> {
    let mut out = Vec::new();
    let mut open: Option<(char, usize, String, usize, usize)> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let body = line.trim_end_matches(['\n', '\r']);
        let indent = body.len() - body.trim_start_matches(' ').len();
        if indent > 3 {
            continue;
        }
        let rest = &body[indent..];
        let Some(c) = rest.chars().next().filter(|c| *c == '`' || *c == '~') else {
            continue;
        };
        let n = rest.chars().take_while(|x| *x == c).count();
        if n < 3 {
            continue;
        }
        match &open {
            None => {
                let info = &rest[n..];
                if c == '`' && info.contains('`') {
                    continue;
                }
                open = Some((c, n, body.trim().to_owned(), start, offset));
            }
            Some((oc, on, ..)) if *oc == c && n >= *on && rest[n..].trim().is_empty() => {
                let (c, n, line, open_at, content) = open.take().expect("open fence");
                out.push(Fence {
                    open: line,
                    open_at,
                    close_end: offset,
                    close: std::iter::repeat_n(c, n).collect(),
                    content,
                    end: start,
                });
            }
            Some(_) => {}
        }
    }
    if let Some((c, n, line, open_at, content)) = open {
        out.push(Fence {
            open: line,
            open_at,
            close_end: text.len(),
            close: std::iter::repeat_n(c, n).collect(),
            content,
            end: text.len(),
        });
    }
    out
}

/// The characters after which a streamed reply's first message is posted even without a
/// sentence end ([`reads_as_a_start`]): about the line a notification shows.
pub const FIRST_MESSAGE_CHARS: usize = 80;

/// Whether a streamed reply's text so far is worth its first message (the one a person is
/// notified of: edits do not notify): it has a complete first sentence (`.`, `!`, `?` or `…`
/// followed by a space or a line break), a paragraph break, or [`FIRST_MESSAGE_CHARS`]
/// characters. Until then nothing is posted; the end of the stream posts whatever there is.
pub fn reads_as_a_start(text: &str) -> bool {
    let t = text.trim();
    if t.chars().count() >= FIRST_MESSAGE_CHARS || t.contains("\n\n") {
        return true;
    }
    let chars: Vec<char> = text.chars().collect();
    chars
        .windows(2)
        .any(|w| matches!(w[0], '.' | '!' | '?' | '…') && w[1].is_whitespace())
}

/// The Markdown `markdown` as plain text, for the texts that show no formatting (a poll's
/// question and answers, the plain `body` of a question): emphasis and code marks dropped, a code
/// block's lines kept as they are, list items on lines of their own ("• item", "1. item"), a link
/// as its text then its URL in brackets. Raw HTML is kept as text.
pub fn to_plain(markdown: &str) -> String {
    let options = pulldown_cmark::Options::ENABLE_STRIKETHROUGH
        | pulldown_cmark::Options::ENABLE_TABLES
        | pulldown_cmark::Options::ENABLE_TASKLISTS;
    let mut out = String::with_capacity(markdown.len());
    // Per open list: the next item's number (`None` for a bullet list).
    let mut lists: Vec<Option<u64>> = Vec::new();
    let mut links: Vec<pulldown_cmark::CowStr<'_>> = Vec::new();
    let newline = |out: &mut String| {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
    };
    for event in pulldown_cmark::Parser::new_ext(markdown, options) {
        match event {
            pulldown_cmark::Event::Text(t)
            | pulldown_cmark::Event::Code(t)
            | pulldown_cmark::Event::Html(t)
            | pulldown_cmark::Event::InlineHtml(t) => out.push_str(&t),
            pulldown_cmark::Event::InlineMath(t) | pulldown_cmark::Event::DisplayMath(t) => {
                out.push_str(&t)
            }
            pulldown_cmark::Event::SoftBreak | pulldown_cmark::Event::HardBreak => out.push('\n'),
            pulldown_cmark::Event::Rule => {
                newline(&mut out);
                out.push_str("———");
            }
            pulldown_cmark::Event::TaskListMarker(done) => {
                out.push_str(if done { "☑ " } else { "☐ " })
            }
            pulldown_cmark::Event::FootnoteReference(r) => out.push_str(&format!("[{r}]")),
            pulldown_cmark::Event::Start(pulldown_cmark::Tag::List(first)) => {
                newline(&mut out);
                lists.push(first);
            }
            pulldown_cmark::Event::End(pulldown_cmark::TagEnd::List(_)) => {
                lists.pop();
            }
            pulldown_cmark::Event::Start(pulldown_cmark::Tag::Item) => {
                newline(&mut out);
                let depth = lists.len().saturating_sub(1);
                out.push_str(&"  ".repeat(depth));
                match lists.last_mut() {
                    Some(Some(n)) => {
                        out.push_str(&format!("{n}. "));
                        *n += 1;
                    }
                    _ => out.push_str("• "),
                }
            }
            pulldown_cmark::Event::Start(
                pulldown_cmark::Tag::Link { dest_url, .. }
                | pulldown_cmark::Tag::Image { dest_url, .. },
            ) => links.push(dest_url),
            pulldown_cmark::Event::End(
                pulldown_cmark::TagEnd::Link | pulldown_cmark::TagEnd::Image,
            ) => {
                if let Some(url) = links
                    .pop()
                    .filter(|u| !u.is_empty() && !out.ends_with(&**u))
                {
                    out.push_str(&format!(" ({url})"));
                }
            }
            pulldown_cmark::Event::End(pulldown_cmark::TagEnd::TableCell) => out.push_str(" | "),
            pulldown_cmark::Event::End(
                pulldown_cmark::TagEnd::TableHead | pulldown_cmark::TagEnd::TableRow,
            ) => end_line(&mut out, " | "),
            pulldown_cmark::Event::End(
                pulldown_cmark::TagEnd::Paragraph
                | pulldown_cmark::TagEnd::Heading(_)
                | pulldown_cmark::TagEnd::CodeBlock
                | pulldown_cmark::TagEnd::BlockQuote(_),
            ) => end_line(&mut out, "\n"),
            pulldown_cmark::Event::Start(
                pulldown_cmark::Tag::Paragraph
                | pulldown_cmark::Tag::Heading { .. }
                | pulldown_cmark::Tag::CodeBlock(_),
            ) => {
                if !lists.is_empty() && out.ends_with(". ") || out.ends_with("• ") {
                    continue;
                }
                newline(&mut out);
            }
            _ => {}
        }
    }
    out.trim().to_owned()
}

/// Ends a line of [`to_plain`]'s output: what it ends with (`trailing`, repeated) cut off, then
/// a newline.
fn end_line(out: &mut String, trailing: &str) {
    let trimmed = out.trim_end_matches(trailing).len();
    out.truncate(trimmed);
    out.push('\n');
}

/// Splits `text` into messages of at most `max` characters each. Whitespace-only text gives no
/// message (platforms refuse empty ones); text that fits is one message, unchanged. Longer text is
/// cut at the largest Markdown unit that fits (a section, a paragraph, a line, a sentence, a
/// word), and a fenced code block cut in two is closed and reopened so each piece renders as code.
/// Pieces are trimmed at the cut.
pub fn split(text: &str, max: usize) -> Vec<String> {
    let max = max.max(1);
    if text.trim().is_empty() {
        return Vec::new();
    }
    if text.chars().count() <= max {
        return vec![text.to_owned()];
    }
    let blocks = fences(text);
    // Room for the fences a piece may gain: the longest opening line and closing marker, plus
    // two newlines. Never more than half the limit.
    let reserve = blocks
        .iter()
        .map(|f| f.open.chars().count() + f.close.chars().count() + 2)
        .max()
        .unwrap_or(0)
        .min(max / 2);
    let size = (max - reserve).max(1);
    let splitter = MarkdownSplitter::new(ChunkConfig::new(size).with_trim(true));
    let inside = |at: usize| blocks.iter().find(|f| f.content < at && at < f.end);
    let starts_inside = |at: usize| blocks.iter().find(|f| f.content <= at && at < f.end);
    splitter
        .chunk_indices(text)
        .filter_map(|(mut start, piece)| {
            let mut end = start + piece.len();
            // A piece ending on a block's opening line leaves that line to the next piece (which
            // opens the block itself); one starting on a closing line drops it (the piece before
            // closed the block already).
            if let Some(f) = blocks.iter().find(|f| f.open_at < end && end <= f.content) {
                end = f.open_at.max(start);
            }
            if let Some(f) = blocks
                .iter()
                .find(|f| f.end <= start && start < f.close_end)
            {
                start = f.close_end.min(end);
            }
            let slice = &text[start..end];
            let start = start + (slice.len() - slice.trim_start().len());
            let end = end - (slice.len() - slice.trim_end().len());
            if start >= end {
                return None;
            }
            let piece = &text[start..end];
            let (open, close) = (starts_inside(start), inside(end).map(|f| f.close.as_str()));
            // The block's own opening line; when that does not fit (a long info string, a tiny
            // limit), the bare fence; when no fence fits, the piece alone: never past `max`.
            let full = wrap(piece, open.map(|f| f.open.as_str()), close);
            if full.chars().count() <= max {
                return Some(full);
            }
            let bare = wrap(piece, open.map(|f| f.close.as_str()), close);
            if bare.chars().count() <= max {
                return Some(bare);
            }
            Some(piece.to_owned())
        })
        .collect()
}

/// `piece` with `open` (an opening fence line) before it and `close` (a closing fence) after it.
fn wrap(piece: &str, open: Option<&str>, close: Option<&str>) -> String {
    let mut out = String::with_capacity(piece.len() + 16);
    if let Some(open) = open {
        out.push_str(open);
        out.push('\n');
    }
    out.push_str(piece);
    if let Some(close) = close {
        out.push('\n');
        out.push_str(close);
    }
    out
}

/// Splits `text` (code, a field's value: text that must come back exactly) into pieces of at most
/// `max` characters whose concatenation is `text`, each cut at a line end where one is in its
/// second half, else at `max` characters. Empty text is one empty piece. For Markdown a person
/// reads, [`split`].
pub fn split_exact(text: &str, max: usize) -> Vec<String> {
    let max = max.max(1);
    let mut out = Vec::new();
    let mut rest: &str = text;
    while rest.chars().count() > max {
        let cut = rest.char_indices().nth(max).map_or(rest.len(), |(i, _)| i);
        let at = rest[..cut]
            .rfind('\n')
            .filter(|&i| i >= cut / 2)
            .map_or(cut, |i| i + 1);
        out.push(rest[..at].to_owned());
        rest = &rest[at..];
    }
    if !rest.is_empty() || out.is_empty() {
        out.push(rest.to_owned());
    }
    out
}

/// Groups `items`, in order, greedily into runs whose summed cost stays within `budget`:
/// `cost(item, first)` is what the item adds to its run (`first`: it opens the run — no
/// separator before it). An item over the budget alone is a run of its own. How a drawing packs
/// whole lines (a table's rows) into the platform's messages; cutting text itself is [`split`]'s
/// and [`split_exact`]'s.
pub fn pack<T>(
    items: impl IntoIterator<Item = T>,
    budget: usize,
    mut cost: impl FnMut(&T, bool) -> usize,
) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    let mut run: Vec<T> = Vec::new();
    let mut used = 0;
    for item in items {
        let add = cost(&item, run.is_empty());
        if !run.is_empty() && used + add > budget {
            out.push(std::mem::take(&mut run));
            used = cost(&item, true);
        } else {
            used += add;
        }
        run.push(item);
    }
    if !run.is_empty() {
        out.push(run);
    }
    out
}

/// A table cell on one line: control characters (newlines, tabs) as spaces, trimmed, at most
/// `max` characters ([`truncate`]).
pub fn one_line(cell: &str, max: usize) -> String {
    let line: String = cell
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    truncate(line.trim(), max)
}

/// `text` cut to at most `max` characters, an ellipsis marking a cut. A cut inside a fenced code
/// block closes the block (within the limit) so the rest of the message still renders.
pub fn truncate(text: &str, max: usize) -> String {
    if max == 0 {
        return String::new();
    }
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let keep = |n: usize| -> (String, usize) {
        let cut: String = text.chars().take(n).collect();
        let bytes = cut.len();
        (cut, bytes)
    };
    let (mut cut, bytes) = keep(max.saturating_sub(1));
    if let Some(f) = fences(text)
        .into_iter()
        .find(|f| f.content <= bytes && bytes < f.end)
    {
        let tail = f.close.chars().count() + 2;
        if max > tail + 1 {
            (cut, _) = keep(max - 1 - tail);
            cut.push('…');
            cut.push('\n');
            cut.push_str(&f.close);
            return cut;
        }
    }
    cut.push('…');
    cut
}

/// A Markdown table (pulldown-cmark's column alignments and the cells' text, header row first)
/// as plain lines of aligned columns: the header, a rule, the rows — for platforms that draw no
/// tables (set in a code block there).
pub fn table_text(align: &[Alignment], rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = |c: usize| {
        rows.iter()
            .filter_map(|r| r.get(c))
            .map(|s| s.chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..columns).map(width).collect();
    let mut lines = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = (0..columns)
            .map(|c| {
                let s = row.get(c).map_or("", String::as_str);
                let pad = widths[c] - s.chars().count();
                match align.get(c) {
                    Some(Alignment::Right) => format!("{}{s}", " ".repeat(pad)),
                    Some(Alignment::Center) => {
                        format!("{}{s}{}", " ".repeat(pad / 2), " ".repeat(pad - pad / 2))
                    }
                    _ => format!("{s}{}", " ".repeat(pad)),
                }
            })
            .collect();
        lines.push(cells.join(" | ").trim_end().to_owned());
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat((*w).max(1))).collect();
            lines.push(rule.join("-+-"));
        }
    }
    lines.join("\n")
}

/// `text` with its first letter upper-case.
pub fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_fills_each_run_up_to_the_budget_in_order() {
        let lines = ["aaaa", "bb", "cc", "dddddddddd", "e"];
        // A line costs its length, plus one for the newline before it in its run.
        let runs = pack(lines, 8, |l, first| l.len() + usize::from(!first));
        assert_eq!(
            runs,
            [
                vec!["aaaa", "bb"],
                vec!["cc"],
                vec!["dddddddddd"],
                vec!["e"]
            ],
            "aaaa\nbb is 7; +cc would be 10; a line over the budget is a run alone"
        );
        assert!(pack(Vec::<&str>::new(), 8, |l, _| l.len()).is_empty());
        assert_eq!(one_line(" a\tb\nc ", 10), "a b c");
    }

    #[test]
    fn split_exact_gives_the_text_back_in_pieces_within_the_limit() {
        let code = "fn a() {}\n".repeat(30) + &"x".repeat(95);
        let pieces = split_exact(&code, 40);
        assert_eq!(pieces.concat(), code);
        assert!(pieces.iter().all(|p| p.chars().count() <= 40));
        // Cut at line ends where one is near.
        assert!(pieces[0].ends_with('\n'));
        assert_eq!(split_exact("", 10), [""]);
    }

    #[test]
    fn a_start_is_a_sentence_a_paragraph_or_enough_characters() {
        assert!(!reads_as_a_start("got:"));
        assert!(!reads_as_a_start("Version 1.2 is"));
        assert!(reads_as_a_start("Sure. Here"));
        assert!(reads_as_a_start("Sure!\nHere"));
        assert!(reads_as_a_start("A list\n\n- one"));
        assert!(reads_as_a_start(&"word ".repeat(40)));
    }

    #[test]
    fn a_table_becomes_aligned_lines() {
        let rows = vec![
            vec!["name".to_owned(), "n".to_owned(), "mid".to_owned()],
            vec!["ada".to_owned(), "12".to_owned(), "x".to_owned()],
            vec!["bo".to_owned(), "3".to_owned()],
        ];
        let align = [Alignment::None, Alignment::Right, Alignment::Center];
        assert_eq!(
            table_text(&align, &rows),
            "name |  n | mid\n-----+----+----\nada  | 12 |  x\nbo   |  3 |"
        );
        assert_eq!(table_text(&[], &[]), "");
    }

    fn chars(s: &str) -> usize {
        s.chars().count()
    }

    #[test]
    fn text_that_fits_is_one_message_unchanged() {
        assert_eq!(split("  hello\n", 10), vec!["  hello\n"]);
        assert_eq!(split("abc", 3), vec!["abc"]);
    }

    #[test]
    fn empty_or_blank_text_gives_no_message() {
        assert!(split("", 10).is_empty());
        assert!(split(" \n\t ", 10).is_empty());
    }

    #[test]
    fn long_text_is_cut_between_words_within_the_limit() {
        let text = "alpha beta gamma delta epsilon zeta eta theta";
        let parts = split(text, 12);
        assert!(parts.len() > 1);
        assert!(parts.iter().all(|p| chars(p) <= 12), "{parts:?}");
        assert_eq!(parts.join(" "), text);
    }

    #[test]
    fn paragraphs_are_preferred_to_words() {
        let text = format!("{}\n\n{}", "a ".repeat(20).trim(), "b ".repeat(20).trim());
        let parts = split(&text, 50);
        assert_eq!(parts.len(), 2, "{parts:?}");
        assert!(parts[0].starts_with('a') && parts[1].starts_with('b'));
    }

    #[test]
    fn multibyte_text_is_never_cut_inside_a_character() {
        let text = "é".repeat(10_000);
        let parts = split(&text, 2000);
        assert!(parts.iter().all(|p| chars(p) <= 2000));
        assert_eq!(parts.concat(), text);
        let emoji = "🐸".repeat(301);
        let parts = split(&emoji, 100);
        assert_eq!(parts.concat(), emoji);
    }

    #[test]
    fn a_code_block_cut_in_two_is_closed_and_reopened() {
        let code: String = (0..60).map(|i| format!("let x{i} = {i};\n")).collect();
        let text = format!("Here it is:\n\n```rust\n{code}```\n\nDone.");
        let parts = split(&text, 300);
        assert!(parts.len() > 2, "{parts:?}");
        for p in &parts {
            assert!(chars(p) <= 300, "{} > 300: {p:?}", chars(p));
            let fences = p
                .lines()
                .filter(|l| l.trim_start().starts_with("```"))
                .count();
            assert_eq!(fences % 2, 0, "unbalanced fences in {p:?}");
        }
        let middle = &parts[1];
        assert!(middle.starts_with("```rust\n"), "{middle:?}");
        // Every line of code survives, in order.
        let joined = parts.join("\n");
        let mut at = 0;
        for i in 0..60 {
            let line = format!("let x{i} = {i};");
            at += joined[at..].find(&line).expect("line kept") + line.len();
        }
    }

    #[test]
    fn fences_that_do_not_fit_the_limit_are_shortened_or_left_out() {
        // Found by fuzzing: a piece of a code block grew past a tiny limit with its fences.
        for p in split("```\n🐸\n", 1) {
            assert!(chars(&p) <= 1, "{p:?}");
        }
        // An info string longer than half the limit: the reopened block gets the bare fence.
        let text = format!("```{}\n{}```\n", "i".repeat(30), "code line\n".repeat(10));
        let parts = split(&text, 40);
        assert!(parts.len() > 1, "{parts:?}");
        for p in &parts {
            assert!(chars(p) <= 40, "{} > 40: {p:?}", chars(p));
        }
        assert!(parts[1].starts_with("```\n"), "{parts:?}");
    }

    #[test]
    fn a_word_longer_than_the_limit_is_cut() {
        let parts = split(&"x".repeat(25), 10);
        assert_eq!(parts, vec!["x".repeat(10), "x".repeat(10), "x".repeat(5)]);
    }

    #[test]
    fn truncate_marks_the_cut_and_keeps_the_limit() {
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("ééééé", 3), "éé…");
        assert_eq!(truncate("abc", 0), "");
        assert_eq!(truncate("abc", 1), "…");
    }

    #[test]
    fn truncate_inside_a_code_block_closes_it() {
        let text = format!("```\n{}\n```", "y".repeat(100));
        let out = truncate(&text, 40);
        assert!(chars(&out) <= 40, "{out:?}");
        assert!(out.ends_with("…\n```"), "{out:?}");
    }
}
