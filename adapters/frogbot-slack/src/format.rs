//! Turns the model's Markdown into Slack's `mrkdwn`, the format of a message's `text`: `*bold*`,
//! `_italic_`, `~strike~`, `` `code` ``, ```` ``` ```` blocks, `<url|text>` links, "• " and "1. "
//! list lines, `>` quotes, headings as bold lines, and `&`, `<`, `>` escaped as `&amp;`, `&lt;`,
//! `&gt;` everywhere but in a link's URL (so the model cannot write a `<!channel>` ping or a
//! `<@U…>` mention). Tables become a code block of aligned columns (`mrkdwn` has no tables).
//!
//! Parsing is pulldown-cmark's (CommonMark with strikethrough, tables and task lists); raw HTML in
//! the model's text is shown as text. [`messages`] splits a reply with
//! [`frogbot_model::text::split`] first and converts each piece, so every message is
//! self-contained `mrkdwn` (a code block cut in two is closed and reopened) within the limit.
//!
//! Why `mrkdwn` in `text` and not Slack's `markdown` block (which slack-morphism 2.31 has as
//! `SlackMarkdownBlock`): that block takes at most 12,000 characters per message (a third of
//! `text`'s), still needs a `text` fallback for notifications, and leaves how raw HTML, tables
//! and `<…>` sequences in the model's text render to Slack; `mrkdwn` is rendered by every client
//! and the escaping here is ours.

use pulldown_cmark::{Alignment, Event, LinkType, Options, Parser, Tag, TagEnd};

/// The parser options: CommonMark plus strikethrough, tables and task lists.
fn options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS
}

/// The model's Markdown `markdown` as the messages of a reply, each at most `max` characters of
/// `mrkdwn`: split with [`frogbot_model::text::split`], each piece converted with [`to_mrkdwn`],
/// and a piece whose conversion grew past `max` split finer. Blank text gives no message.
pub fn messages(markdown: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    // Escaping grows `&<>` (4–5 characters for 1): a tenth of the limit is left for it.
    fit(markdown, (max - max / 10).max(1), max, &mut out);
    out
}

fn fit(markdown: &str, budget: usize, max: usize, out: &mut Vec<String>) {
    for piece in frogbot_model::text::split(markdown, budget) {
        let text = to_mrkdwn(&piece);
        if text.trim().is_empty() {
            continue;
        }
        if text.chars().count() <= max || budget <= 1 {
            out.push(text);
        } else {
            fit(&piece, budget / 2, max, out);
        }
    }
}

/// Escapes `&`, `<` and `>`, the characters Slack reserves for its control sequences.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` with every run of three backticks broken by a zero-width space: inside a code block
/// it would end the block, in text it would open one.
fn no_fence(text: &str) -> String {
    if !text.contains("```") {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 3);
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            if run == 3 {
                out.push('\u{200B}');
                run = 1;
            }
        } else {
            run = 0;
        }
        out.push(c);
    }
    out
}

/// A link's URL inside `<url|text>`: the characters that would end or split the sequence
/// (`|`, `<`, `>`, whitespace) and backticks (a run of three would open a code block)
/// percent-encoded.
fn link_url(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    for c in url.chars() {
        match c {
            '`' => out.push_str("%60"),
            '|' => out.push_str("%7C"),
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            ' ' => out.push_str("%20"),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

/// Whether Slack makes a link of `url` (an absolute URL or `mailto:`).
fn linkable(url: &str) -> bool {
    // Only the schemes Slack links: a made-up one (`<ahttps://…>`, an autolink to CommonMark)
    // would reach the reader as a raw `<…>`.
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://") || lower.starts_with("mailto:")
}

/// The Markdown `markdown` as Slack `mrkdwn` (no length limit: see [`messages`]).
pub fn to_mrkdwn(markdown: &str) -> String {
    let mut w = Writer::default();
    for event in Parser::new_ext(markdown, options()) {
        w.event(event);
    }
    w.out.trim_end().to_owned()
}

/// The Markdown `markdown` as plain text, for the texts that show no formatting (Slack's
/// `plain_text` objects: buttons, options, labels, and a message's notification `text`): emphasis and code marks dropped, a code
/// block's lines kept as they are, list items on lines of their own ("• item", "1. item"), a link
/// as its text then its URL in brackets. Raw HTML is kept as text.
pub fn to_plain(markdown: &str) -> String {
    let options =
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    let mut out = String::with_capacity(markdown.len());
    // Per open list: the next item's number (`None` for a bullet list).
    let mut lists: Vec<Option<u64>> = Vec::new();
    let mut links: Vec<pulldown_cmark::CowStr<'_>> = Vec::new();
    let newline = |out: &mut String| {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
    };
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Text(t) | Event::Code(t) | Event::Html(t) | Event::InlineHtml(t) => {
                out.push_str(&t)
            }
            Event::InlineMath(t) | Event::DisplayMath(t) => out.push_str(&t),
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::Rule => {
                newline(&mut out);
                out.push_str("———");
            }
            Event::TaskListMarker(done) => out.push_str(if done { "☑ " } else { "☐ " }),
            Event::FootnoteReference(r) => out.push_str(&format!("[{r}]")),
            Event::Start(Tag::List(first)) => {
                newline(&mut out);
                lists.push(first);
            }
            Event::End(TagEnd::List(_)) => {
                lists.pop();
            }
            Event::Start(Tag::Item) => {
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
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                links.push(dest_url)
            }
            Event::End(TagEnd::Link | TagEnd::Image) => {
                if let Some(url) = links
                    .pop()
                    .filter(|u| !u.is_empty() && !out.ends_with(&**u))
                {
                    out.push_str(&format!(" ({url})"));
                }
            }
            Event::End(TagEnd::TableCell) => out.push_str(" | "),
            Event::End(TagEnd::TableHead | TagEnd::TableRow) => {
                let trimmed = out.trim_end_matches(" | ").len();
                out.truncate(trimmed);
                out.push('\n');
            }
            Event::End(
                TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::CodeBlock | TagEnd::BlockQuote(_),
            ) => {
                let trimmed = out.trim_end_matches('\n').len();
                out.truncate(trimmed);
                out.push('\n');
            }
            Event::Start(Tag::Paragraph | Tag::Heading { .. } | Tag::CodeBlock(_)) => {
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

/// A link being written: its URL and whether the text is written at all (an autolink's text is
/// its URL, written by the link itself).
#[derive(Debug)]
struct Link {
    url: String,
    /// The URL is linkable: `<url|text>`; else `text (url)`.
    native: bool,
    /// An autolink (`<https://…>`): `<url>`, its text skipped.
    auto: bool,
}

/// A table being collected: rows of cells' plain text.
#[derive(Debug, Default)]
struct Table {
    align: Vec<Alignment>,
    rows: Vec<Vec<String>>,
}

#[derive(Debug, Default)]
struct Writer {
    out: String,
    /// Line breaks owed before the next text (1: a new line, 2: a blank line between blocks).
    pending: usize,
    /// Blockquote depth (one `>` marks any depth: Slack does not nest quotes).
    quote: usize,
    /// The open lists: the next number of an ordered one.
    lists: Vec<Option<u64>>,
    /// An item's marker still to write at the start of its first line.
    marker: bool,
    bold: usize,
    italic: usize,
    strike: usize,
    links: Vec<Link>,
    /// A fenced or indented code block being collected.
    code: Option<String>,
    table: Option<Table>,
    /// Inside an HTML block, past its first line.
    html_line: bool,
    /// The line being written is inside a quote.
    line_quoted: bool,
}

impl Writer {
    fn event(&mut self, event: Event<'_>) {
        if self.code.is_some() {
            match event {
                Event::Text(t) => self.code.as_mut().expect("code").push_str(&t),
                Event::End(TagEnd::CodeBlock) => self.end_code(),
                _ => {}
            }
            return;
        }
        if self.table.is_some() {
            self.table_event(event);
            return;
        }
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.text(&t),
            Event::Code(c) => {
                // Slack has no escape for a backtick inside inline code.
                let c = escape(&c.replace('`', "ˋ"));
                self.write(&format!("`{c}`"));
            }
            Event::Html(h) => {
                if self.html_line {
                    self.line_break();
                }
                self.html_line = true;
                self.text(h.trim_end_matches('\n'));
            }
            Event::InlineHtml(h) => self.text(&h),
            Event::SoftBreak | Event::HardBreak => self.line_break(),
            Event::Rule => {
                self.block();
                self.write("──────────");
                self.pending = 2;
            }
            Event::TaskListMarker(done) => self.write(if done { "☑ " } else { "☐ " }),
            Event::InlineMath(t) | Event::DisplayMath(t) | Event::FootnoteReference(t) => {
                self.text(&t);
            }
        }
    }

    /// Starts a block: a blank line after the one before.
    fn block(&mut self) {
        if self.marker {
            return;
        }
        self.pending = self.pending.max(2);
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.block(),
            Tag::Heading { .. } => {
                self.block();
                self.open_bold();
            }
            Tag::BlockQuote(_) => {
                self.block();
                self.quote += 1;
            }
            Tag::CodeBlock(_) => {
                self.block();
                self.code = Some(String::new());
            }
            Tag::HtmlBlock => {
                self.block();
                self.html_line = false;
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.block();
                } else {
                    self.line_break();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.pending = self.pending.max(1);
                self.marker = true;
            }
            Tag::Table(align) => {
                self.block();
                self.table = Some(Table {
                    align,
                    rows: Vec::new(),
                });
            }
            Tag::Emphasis => {
                if self.italic == 0 {
                    self.write("_");
                }
                self.italic += 1;
            }
            Tag::Strong => self.open_bold(),
            Tag::Strikethrough => {
                if self.strike == 0 {
                    self.write("~");
                }
                self.strike += 1;
            }
            Tag::Link {
                link_type,
                dest_url,
                ..
            }
            | Tag::Image {
                link_type,
                dest_url,
                ..
            } => {
                let url = if link_type == LinkType::Email && !dest_url.starts_with("mailto:") {
                    format!("mailto:{dest_url}")
                } else {
                    dest_url.to_string()
                };
                let native = linkable(&url) && self.links.is_empty();
                let auto = native && link_type == LinkType::Autolink;
                // An autolink's text is its URL: not written twice when it is not linked.
                let url = if link_type == LinkType::Autolink && !native {
                    String::new()
                } else {
                    url
                };
                if native {
                    self.write(&format!("<{}", link_url(&url)));
                    if !auto {
                        self.write("|");
                    }
                }
                self.links.push(Link { url, native, auto });
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::HtmlBlock => self.pending = 2,
            TagEnd::Heading(_) => {
                self.close_bold();
                self.pending = 2;
            }
            TagEnd::BlockQuote(_) => {
                self.quote -= 1;
                self.pending = 2;
            }
            TagEnd::List(_) => {
                self.lists.pop();
                self.pending = if self.lists.is_empty() { 2 } else { 1 };
            }
            TagEnd::Item => {
                // An empty item still shows its marker.
                if self.marker {
                    self.write("");
                }
                self.pending = self.pending.max(1);
                if let Some(Some(n)) = self.lists.last_mut() {
                    *n += 1;
                }
            }
            TagEnd::Emphasis => {
                self.italic -= 1;
                if self.italic == 0 {
                    self.write("_");
                }
            }
            TagEnd::Strong => self.close_bold(),
            TagEnd::Strikethrough => {
                self.strike -= 1;
                if self.strike == 0 {
                    self.write("~");
                }
            }
            TagEnd::Link | TagEnd::Image => {
                if let Some(link) = self.links.pop() {
                    if link.native {
                        self.write(">");
                    } else if !link.url.is_empty() {
                        self.write(&format!(" ({})", escape(&link.url)));
                    }
                }
            }
            _ => {}
        }
    }

    fn open_bold(&mut self) {
        if self.bold == 0 {
            self.write("*");
        }
        self.bold += 1;
    }

    fn close_bold(&mut self) {
        self.bold -= 1;
        if self.bold == 0 {
            self.write("*");
        }
    }

    /// Text of the document, escaped; its newlines break the line.
    fn text(&mut self, text: &str) {
        if self.links.last().is_some_and(|l| l.auto) {
            return;
        }
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                self.line_break();
            }
            self.write(&no_fence(&escape(line)));
        }
    }

    fn line_break(&mut self) {
        self.pending = self.pending.max(1);
    }

    /// Writes `s` (already `mrkdwn`) after the line breaks owed, each new line starting with the
    /// quote marker and the list indentation.
    fn write(&mut self, s: &str) {
        if self.out.is_empty() {
            self.pending = 0;
        }
        let at_start = self.out.is_empty() || self.pending > 0;
        for i in 0..self.pending {
            if i > 0 && self.quote > 0 && self.line_quoted {
                self.out.push('>');
            }
            self.out.push('\n');
        }
        self.pending = 0;
        if at_start {
            self.line_quoted = self.quote > 0;
            if self.quote > 0 {
                self.out.push_str("> ");
            }
            let depth = self.lists.len();
            if self.marker {
                self.out.push_str(&"    ".repeat(depth.saturating_sub(1)));
                match self.lists.last() {
                    Some(Some(n)) => self.out.push_str(&format!("{n}. ")),
                    _ => self.out.push_str("• "),
                }
                self.marker = false;
            } else {
                self.out.push_str(&"    ".repeat(depth));
            }
        }
        // Backticks of two writes never join into a ``` that would open a code block.
        if s.starts_with('`') && self.out.ends_with('`') {
            self.out.push('\u{200B}');
        }
        self.out.push_str(s);
    }

    fn end_code(&mut self) {
        let code = self.code.take().unwrap_or_default();
        let code = no_fence(&escape(code.trim_end_matches('\n')));
        self.code_block(if code.is_empty() { " " } else { &code });
        self.pending = 2;
    }

    /// A code block of `code` (escaped), its lines inside the quote if any.
    fn code_block(&mut self, code: &str) {
        let lists = std::mem::take(&mut self.lists);
        self.write("```");
        self.pending = 1;
        for (i, line) in code.split('\n').enumerate() {
            if i > 0 {
                self.pending = 1;
            }
            self.write(line);
        }
        self.pending = 1;
        self.write("```");
        self.lists = lists;
    }

    /// An event inside a table: cells collect their plain text.
    fn table_event(&mut self, event: Event<'_>) {
        let table = self.table.as_mut().expect("table");
        match event {
            Event::Start(Tag::TableHead | Tag::TableRow) => table.rows.push(Vec::new()),
            Event::Start(Tag::TableCell) => {
                if let Some(row) = table.rows.last_mut() {
                    row.push(String::new());
                }
            }
            Event::Text(t) | Event::Code(t) | Event::InlineHtml(t) => {
                if let Some(cell) = table.rows.last_mut().and_then(|r| r.last_mut()) {
                    cell.push_str(&t);
                }
            }
            Event::End(TagEnd::Table) => {
                let table = self.table.take().expect("table");
                let text = frogbot_model::text::table_text(&table.align, &table.rows);
                self.code_block(&no_fence(&escape(&text)));
                self.pending = 2;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_mrkdwn() {
        let cases: &[(&str, &str)] = &[
            ("plain text", "plain text"),
            ("**bold** and __bold__", "*bold* and *bold*"),
            ("*italic* and _italic_", "_italic_ and _italic_"),
            ("~~gone~~", "~gone~"),
            ("`let x = 1;`", "`let x = 1;`"),
            ("`a<b>&c`", "`a&lt;b&gt;&amp;c`"),
            ("```rust\nfn main() {}\n```", "```\nfn main() {}\n```"),
            (
                "[the docs](https://example.com/a?b=1&c=2)",
                "<https://example.com/a?b=1&c=2|the docs>",
            ),
            ("<https://example.com>", "<https://example.com>"),
            ("<me@x.io>", "<mailto:me@x.io|me@x.io>"),
            ("[nowhere]()", "nowhere"),
            ("```a` x", "``\u{200B}`a` x"),
            ("``a`` b", "`a` b"),
            ("[a | b](https://x.io/p|q)", "<https://x.io/p%7Cq|a | b>"),
            ("[relative](docs/a.md)", "relative (docs/a.md)"),
            (
                "![a frog](https://x.io/f.png)",
                "<https://x.io/f.png|a frog>",
            ),
            ("- one\n- two\n  - nested", "• one\n• two\n    • nested"),
            ("3. three\n4. four", "3. three\n4. four"),
            ("- [x] done\n- [ ] todo", "• ☑ done\n• ☐ todo"),
            ("# Title\n\nBody", "*Title*\n\nBody"),
            ("## **Bold** title", "*Bold title*"),
            ("> quoted\n> more", "> quoted\n> more"),
            ("> one\n>\n> two", "> one\n>\n> two"),
            ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
            ("<!channel> hi <@U123>", "&lt;!channel&gt; hi &lt;@U123&gt;"),
            (
                "<b>raw</b> <script>x</script>",
                "&lt;b&gt;raw&lt;/b&gt; &lt;script&gt;x&lt;/script&gt;",
            ),
            ("<div>\nblock\n</div>", "&lt;div&gt;\nblock\n&lt;/div&gt;"),
            ("***both***", "_*both*_"),
            ("**bold _and italic_**", "*bold _and italic_*"),
            ("line one\nline two", "line one\nline two"),
            ("a\n\n---\n\nb", "a\n\n──────────\n\nb"),
            (
                "| Name | Age |\n|:-----|----:|\n| Alice | 30 |\n| Bob | 4 |",
                "```\nName  | Age\n------+----\nAlice |  30\nBob   |   4\n```",
            ),
            ("- item\n\n  ```sh\n  ls\n  ```", "• item\n\n```\nls\n```"),
        ];
        for (markdown, want) in cases {
            assert_eq!(to_mrkdwn(markdown), *want, "{markdown:?}");
        }
    }

    #[test]
    fn a_long_reply_with_a_code_block_across_the_limit_is_split_into_valid_messages() {
        let prose = "Some words about frogs & toads. ".repeat(100);
        let code: String = (0..300)
            .map(|i| format!("let x{i} = \"<{i}>\";\n"))
            .collect();
        let markdown = format!("{prose}\n\n```rust\n{code}```\n\n{prose}");
        assert!(markdown.chars().count() >= 10_000);
        let max = 3_000;
        let out = messages(&markdown, max);
        assert!(out.len() >= 4, "{} messages", out.len());
        for m in &out {
            assert!(m.chars().count() <= max, "{} chars", m.chars().count());
            assert_eq!(m.matches("```").count() % 2, 0, "unbalanced fences: {m}");
            assert!(!m.contains('<'), "an unescaped < in {m}");
        }
        let code_lines = out
            .iter()
            .flat_map(|m| m.lines())
            .filter(|l| l.starts_with("let x"))
            .count();
        assert_eq!(code_lines, 300);
    }

    #[test]
    fn blank_text_gives_no_message() {
        assert!(messages("", 100).is_empty());
        assert!(messages(" \n ", 100).is_empty());
    }

    #[test]
    fn escaping_growth_is_split_finer() {
        let out = messages(&"&".repeat(1_000), 1_000);
        assert!(out.len() >= 5);
        assert!(out.iter().all(|m| m.chars().count() <= 1_000));
        assert_eq!(out.concat(), "&amp;".repeat(1_000));
    }

    #[test]
    fn backticks_in_a_link_url_open_no_code_block() {
        // Found by the property below: an autolink whose URL holds three backticks.
        let out = messages("**\n```]**[```&-``````<https://x.io```><\na( ", 200);
        for m in &out {
            assert_eq!(m.matches("```").count() % 2, 0, "{m}");
        }
        assert!(out.concat().contains("<https://x.io%60%60%60>"), "{out:?}");
    }

    /// Found by the property below: `<ahttps://x.io>` is an autolink to CommonMark (any scheme of
    /// letters), and was written as a raw Slack link with a scheme Slack does not know.
    #[test]
    fn an_autolink_with_an_unknown_scheme_is_plain_text() {
        let out = to_mrkdwn("[&~((-``````[<ahttps://x.io>a&");
        assert!(!out.contains('<'), "{out:?}");
        assert_eq!(out.matches("ahttps://x.io").count(), 1, "{out:?}");
        assert_eq!(to_mrkdwn("<HTTPS://x.io>"), "<HTTPS://x.io>");
    }

    proptest::proptest! {
        #[test]
        fn any_input_converts_to_balanced_mrkdwn_within_the_limit(
            markdown in "([a-z <>&*_~`#>|\\[\\]()-]|\n|```|\\*\\*|https://x\\.io){0,400}"
        ) {
            for m in messages(&markdown, 200) {
                proptest::prop_assert!(m.chars().count() <= 200);
                proptest::prop_assert_eq!(m.matches("```").count() % 2, 0);
                // No `<` but a link's: every `<` opens a `<http…>` sequence.
                for (i, _) in m.match_indices('<') {
                    proptest::prop_assert!(m[i..].starts_with("<https://"), "{}", m);
                }
            }
        }
    }
}
