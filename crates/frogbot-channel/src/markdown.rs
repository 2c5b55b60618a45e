//! One Markdown walker for the platforms with a line-based format of their own (Slack's `mrkdwn`,
//! Telegram's HTML; Matrix's block HTML is pulldown-cmark's own writer, and Discord's Markdown
//! passes through but for [`Table`]s): [`render`] reads the model's Markdown with pulldown-cmark
//! (CommonMark with strikethrough, tables and task lists) and writes it in a [`Dialect`], which
//! gives the platform's marks (bold, italic, strike, inline code), links and when a URL is
//! linkable, code blocks, quotes and escaping. The walker does the rest once: the blank line
//! between blocks, list markers ("• ", "1. ") and indentation, headings as bold lines, nesting (a
//! mark opened twice is written once; a link in a link is not linked), task list markers (☑ / ☐),
//! rules, raw HTML shown as text, tables collected and drawn as a code block of aligned columns
//! ([`Table`]).
//!
//! [`fit`] cuts a reply into the pieces of its messages with [`frogbot_model::text::split`] (the
//! one splitter), a piece whose rendering is over the platform's limit cut finer: every adapter's
//! replies go through it.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};

/// The parser options: CommonMark plus strikethrough, tables and task lists.
pub fn options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS
}

/// Escapes `&`, `<` and `>` (the characters HTML and Slack's `mrkdwn` reserve).
pub fn escape(text: &str) -> String {
    replace_chars(text, |c| match c {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        _ => None,
    })
}

/// `text` with each character for which `with` gives a replacement replaced by it (an escape, a
/// percent-encoding, or nothing), the others kept.
pub fn replace_chars(text: &str, with: impl Fn(char) -> Option<&'static str>) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match with(c) {
            Some(r) => out.push_str(r),
            None => out.push(c),
        }
    }
    out
}

/// `text` with every run of three backticks broken by a zero-width space: inside a code block
/// it would end the block, in text it would open one.
pub fn no_fence(text: &str) -> String {
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

/// An inline style with a mark of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// `**bold**`, and headings.
    Strong,
    /// `*italic*`.
    Emphasis,
    /// `~~strike~~`.
    Strikethrough,
}

/// How a dialect marks a block quote (one level for any depth: no platform here nests them).
#[derive(Clone, Copy, Debug)]
pub enum Quote {
    /// Each line starts with `prefix`, a blank line inside the quote is `blank` (Slack's `> `).
    Lines {
        /// Starts a quoted line.
        prefix: &'static str,
        /// A blank line between two quoted paragraphs.
        blank: &'static str,
    },
    /// The quote is one element from `open` to `close` (Telegram's `<blockquote>`), closed
    /// around a code block.
    Element {
        /// Opens the quote.
        open: &'static str,
        /// Closes it.
        close: &'static str,
    },
}

impl Quote {
    /// Markdown's own: `> ` before each quoted line, `>` alone on a blank one (Slack's).
    pub const MARKDOWN: Quote = Quote::Lines {
        prefix: "> ",
        blank: ">",
    };
    /// HTML's `<blockquote>` element (Telegram's).
    pub const BLOCKQUOTE: Quote = Quote::Element {
        open: "<blockquote>",
        close: "</blockquote>",
    };
}

/// A platform's way of writing Markdown: what [`render`] asks of it.
pub trait Dialect {
    /// How a quote is marked.
    const QUOTE: Quote;
    /// Marks are written where they open, even around nothing (Slack's `*`, `_`), rather than
    /// just before the first text inside them (by default, as tags: an empty one is never
    /// written).
    const EAGER: bool = false;
    /// Inline code may be inside other marks; if not (by default), the open ones are closed
    /// before it and opened again after it (Telegram: no entity around `<code>`).
    const CODE_IN_MARKS: bool = false;
    /// An autolink (`<https://…>`) is its URL alone: linked, [`Dialect::link`]'s mark shows
    /// it (the text is left out); not linked, its text, with no " (url)" after it. By default,
    /// an autolink is a link like any other.
    const BARE_AUTOLINKS: bool = false;

    /// Escapes plain text: a link's URL shown after its text (by default `&<>`, [`escape`]).
    fn escape(&self, text: &str) -> String {
        escape(text)
    }
    /// Escapes a line of the document's text (by default as [`Dialect::escape`]).
    fn text(&self, line: &str) -> String {
        self.escape(line)
    }
    /// Whether the platform makes a link of `url` (else the text is followed by " (url)").
    fn linkable(&self, url: &str) -> bool;
    /// The opening and closing marks of bold, italic and strikethrough, in the order of
    /// [`Style`] (by default Markdown's own).
    const MARKS: [(&'static str, &'static str); 3] = [("**", "**"), ("*", "*"), ("~~", "~~")];
    /// The opening and closing marks of `style` (by default from [`Dialect::MARKS`]).
    fn mark(&self, style: Style) -> (&'static str, &'static str) {
        Self::MARKS[style as usize]
    }
    /// The opening and closing marks of a link to `url` (linkable); `bare`: an autolink of a
    /// [`Dialect::BARE_AUTOLINKS`] dialect, its text left out.
    fn link(&self, url: &str, bare: bool) -> (String, String);
    /// Inline code `code` (not escaped yet).
    fn code(&self, code: &str) -> String;
    /// A code block of `code` (not escaped yet, no trailing newline); `info` is a fenced block's
    /// info string. Its lines are written as lines of the document (inside a [`Quote::Lines`]
    /// quote, outside a list's indentation).
    fn code_block(&self, info: Option<&str>, code: &str) -> String;
    /// A character written between the output so far and `next` where the two would join into
    /// a mark (Slack: a zero-width space between backticks, which would open a code block).
    fn glue(&self, _out: &str, _next: &str) -> Option<char> {
        None
    }
}

/// The Markdown `markdown` in `dialect` (no length limit: see [`fit`]).
pub fn render<D: Dialect>(dialect: &D, markdown: &str) -> String {
    let mut w = Walker::new(dialect);
    for event in Parser::new_ext(markdown, options()) {
        w.event(event);
    }
    w.close_quote();
    w.out.truncate(w.out.trim_end().len());
    w.out
}

/// A table being collected: rows of cells' plain text, drawn as aligned columns by
/// [`frogbot_model::text::table_text`].
#[derive(Debug, Default)]
pub struct Table {
    align: Vec<Alignment>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table whose columns are aligned as `align` (from `Tag::Table`).
    pub fn new(align: Vec<Alignment>) -> Self {
        Table {
            align,
            rows: Vec::new(),
        }
    }

    /// Takes an event inside the table: true at its end.
    pub fn event(&mut self, event: &Event<'_>) -> bool {
        match event {
            Event::Start(Tag::TableHead | Tag::TableRow) => self.rows.push(Vec::new()),
            Event::Start(Tag::TableCell) => {
                if let Some(row) = self.rows.last_mut() {
                    row.push(String::new());
                }
            }
            Event::Text(t) | Event::Code(t) | Event::InlineHtml(t) => {
                if let Some(cell) = self.rows.last_mut().and_then(|r| r.last_mut()) {
                    cell.push_str(t);
                }
            }
            Event::End(TagEnd::Table) => return true,
            _ => {}
        }
        false
    }

    /// The table as aligned columns of text.
    pub fn text(&self) -> String {
        frogbot_model::text::table_text(&self.align, &self.rows)
    }
}

/// A link being written.
#[derive(Debug)]
struct Link {
    /// The URL written after the text when the link is not linked (empty: nothing written).
    url: String,
    /// Linked: its marks are open.
    native: bool,
    /// A bare autolink: its text is left out.
    bare: bool,
}

struct Walker<'d, D> {
    dialect: &'d D,
    out: String,
    /// Line breaks owed before the next text (1: a new line, 2: a blank line between blocks).
    pending: usize,
    /// Blockquote depth (one quote is marked for any depth).
    quote: usize,
    /// A [`Quote::Element`] is open in the output.
    quote_open: bool,
    /// The line being written is inside a [`Quote::Lines`] quote.
    line_quoted: bool,
    /// The open lists: the next number of an ordered one.
    lists: Vec<Option<u64>>,
    /// An item's marker still to write at the start of its first line.
    marker: bool,
    /// How many of each [`Style`] are open (a nested one is not marked again).
    depth: [usize; 3],
    /// The open marks, outermost first: opening and closing.
    marks: Vec<(String, String)>,
    /// How many of `marks` are open in the output (the rest are written before the next text).
    written: usize,
    links: Vec<Link>,
    /// A code block being collected: its info string and text.
    code: Option<(Option<String>, String)>,
    table: Option<Table>,
    /// Inside an HTML block, past its first line.
    html_line: bool,
}

impl<'d, D: Dialect> Walker<'d, D> {
    fn new(dialect: &'d D) -> Self {
        Walker {
            dialect,
            out: String::new(),
            pending: 0,
            quote: 0,
            quote_open: false,
            line_quoted: false,
            lists: Vec::new(),
            marker: false,
            depth: [0; 3],
            marks: Vec::new(),
            written: 0,
            links: Vec::new(),
            code: None,
            table: None,
            html_line: false,
        }
    }

    fn event(&mut self, event: Event<'_>) {
        if let Some((_, code)) = &mut self.code {
            match event {
                Event::Text(t) => code.push_str(&t),
                Event::End(TagEnd::CodeBlock) => {
                    let (info, code) = self.code.take().unwrap_or_default();
                    self.code_block(info.as_deref(), code.trim_end_matches('\n'));
                }
                _ => {}
            }
            return;
        }
        if let Some(table) = &mut self.table {
            if table.event(&event) {
                let text = table.text();
                self.table = None;
                self.code_block(None, &text);
            }
            return;
        }
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.text(&t),
            Event::Code(c) => {
                let mut s = String::new();
                if !D::CODE_IN_MARKS {
                    for (_, close) in self.marks[..self.written].iter().rev() {
                        s.push_str(close);
                    }
                    self.written = 0;
                }
                s.push_str(&self.dialect.code(&c));
                self.write_raw(&s);
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
        if !self.marker {
            self.pending = self.pending.max(2);
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.block(),
            Tag::Heading { .. } => {
                self.block();
                self.open_style(Style::Strong);
            }
            Tag::BlockQuote(_) => {
                self.block();
                self.quote += 1;
            }
            Tag::CodeBlock(kind) => {
                self.block();
                let info = match kind {
                    CodeBlockKind::Fenced(info) => Some(info.to_string()),
                    CodeBlockKind::Indented => None,
                };
                self.code = Some((info, String::new()));
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
                self.table = Some(Table::new(align));
            }
            Tag::Emphasis => self.open_style(Style::Emphasis),
            Tag::Strong => self.open_style(Style::Strong),
            Tag::Strikethrough => self.open_style(Style::Strikethrough),
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
                let mut url = if link_type == LinkType::Email && !dest_url.starts_with("mailto:") {
                    format!("mailto:{dest_url}")
                } else {
                    dest_url.to_string()
                };
                let native = self.dialect.linkable(&url) && self.links.is_empty();
                let bare = D::BARE_AUTOLINKS && link_type == LinkType::Autolink;
                if bare && !native {
                    // Its text is its URL: not written twice.
                    url.clear();
                }
                if native {
                    let (open, close) = self.dialect.link(&url, bare);
                    self.open_mark(open, close);
                }
                self.links.push(Link {
                    url,
                    native,
                    bare: bare && native,
                });
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::HtmlBlock => self.pending = 2,
            TagEnd::Heading(_) => {
                self.close_style(Style::Strong);
                self.pending = 2;
            }
            TagEnd::BlockQuote(_) => {
                self.quote -= 1;
                if self.quote == 0 {
                    self.close_quote();
                }
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
            TagEnd::Emphasis => self.close_style(Style::Emphasis),
            TagEnd::Strong => self.close_style(Style::Strong),
            TagEnd::Strikethrough => self.close_style(Style::Strikethrough),
            TagEnd::Link | TagEnd::Image => {
                if let Some(link) = self.links.pop() {
                    if link.native {
                        self.close_mark();
                    } else if !link.url.is_empty() {
                        self.write(&format!(" ({})", self.dialect.escape(&link.url)));
                    }
                }
            }
            _ => {}
        }
    }

    fn open_style(&mut self, style: Style) {
        if self.depth[style as usize] == 0 {
            let (open, close) = self.dialect.mark(style);
            self.open_mark(open.to_owned(), close.to_owned());
        }
        self.depth[style as usize] += 1;
    }

    fn close_style(&mut self, style: Style) {
        self.depth[style as usize] -= 1;
        if self.depth[style as usize] == 0 {
            self.close_mark();
        }
    }

    /// Opens a mark: written now ([`Dialect::EAGER`]) or before the next text.
    fn open_mark(&mut self, open: String, close: String) {
        self.marks.push((open, close));
        if D::EAGER {
            self.write("");
        }
    }

    /// Closes the innermost mark (if it was written: an empty one never is).
    fn close_mark(&mut self) {
        let Some((_, close)) = self.marks.pop() else {
            return;
        };
        if self.written > self.marks.len() {
            self.written = self.marks.len();
            if D::EAGER {
                self.write_raw(&close);
            } else {
                self.out.push_str(&close);
            }
        }
    }

    fn close_quote(&mut self) {
        if let Quote::Element { close, .. } = D::QUOTE
            && self.quote_open
        {
            self.out.push_str(close);
            self.quote_open = false;
        }
    }

    /// Text of the document, escaped; its newlines break the line.
    fn text(&mut self, text: &str) {
        if self.links.last().is_some_and(|l| l.bare) {
            return;
        }
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                self.line_break();
            }
            self.write(&self.dialect.text(line));
        }
    }

    fn line_break(&mut self) {
        self.pending = self.pending.max(1);
    }

    /// Writes `s` (already in the dialect) as [`Walker::write_raw`] does, inside the open marks.
    fn write(&mut self, s: &str) {
        self.line_start();
        for (open, _) in &self.marks[self.written..] {
            self.out.push_str(open);
        }
        self.written = self.marks.len();
        self.push(s);
    }

    /// Writes `s` (already in the dialect) after the line breaks owed, opening the quote if one
    /// is due and starting each new line with the quote's prefix and the list's indentation.
    fn write_raw(&mut self, s: &str) {
        self.line_start();
        self.push(s);
    }

    fn line_start(&mut self) {
        if self.out.is_empty() {
            self.pending = 0;
        }
        let at_start = self.out.is_empty() || self.pending > 0;
        for i in 0..self.pending {
            if let Quote::Lines { blank, .. } = D::QUOTE
                && i > 0
                && self.quote > 0
                && self.line_quoted
            {
                self.out.push_str(blank);
            }
            self.out.push('\n');
        }
        self.pending = 0;
        if let Quote::Element { open, .. } = D::QUOTE
            && self.quote > 0
            && !self.quote_open
        {
            self.out.push_str(open);
            self.quote_open = true;
        }
        if !at_start {
            return;
        }
        if let Quote::Lines { prefix, .. } = D::QUOTE {
            self.line_quoted = self.quote > 0;
            if self.quote > 0 {
                self.out.push_str(prefix);
            }
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

    fn push(&mut self, s: &str) {
        if let Some(c) = self.dialect.glue(&self.out, s) {
            self.out.push(c);
        }
        self.out.push_str(s);
    }

    /// A code block (or a table drawn as one), line by line, outside the lists' indentation and
    /// outside a [`Quote::Element`] quote.
    fn code_block(&mut self, info: Option<&str>, code: &str) {
        let block = self.dialect.code_block(info, code);
        self.close_quote();
        let quote = match D::QUOTE {
            Quote::Element { .. } => std::mem::take(&mut self.quote),
            Quote::Lines { .. } => self.quote,
        };
        let lists = std::mem::take(&mut self.lists);
        for (i, line) in block.split('\n').enumerate() {
            if i > 0 {
                self.pending = 1;
            }
            self.write(line);
        }
        self.lists = lists;
        self.quote = quote;
        self.pending = 2;
    }
}

/// What [`fit`]'s `render` made of a piece.
#[derive(Debug)]
pub enum Fit<T> {
    /// Nothing to send: the piece is left out.
    Blank,
    /// Within the platform's limit.
    Within(T),
    /// Over it: the piece is cut finer (kept as it is once it cannot be).
    Over(T),
}

impl<T> Fit<T> {
    /// `value`, whose text as the platform shows it is `shown`: blank, or within `max`
    /// characters, or over.
    pub fn chars(value: T, shown: &str, max: usize) -> Self {
        if shown.trim().is_empty() {
            Fit::Blank
        } else if shown.chars().count() <= max {
            Fit::Within(value)
        } else {
            Fit::Over(value)
        }
    }
}

/// `markdown` cut into the pieces of a reply's messages: split with
/// [`frogbot_model::text::split`] at `budget` characters, each piece rendered by `render`, and a
/// piece it finds over the limit split again at half the budget (down to one character).
pub fn fit<T>(markdown: &str, budget: usize, render: impl Fn(&str) -> Fit<T>) -> Vec<T> {
    fn fit_into<T>(
        markdown: &str,
        budget: usize,
        render: &impl Fn(&str) -> Fit<T>,
        out: &mut Vec<T>,
    ) {
        for piece in frogbot_model::text::split(markdown, budget) {
            match render(&piece) {
                Fit::Blank => {}
                Fit::Within(t) => out.push(t),
                Fit::Over(t) if budget <= 1 => out.push(t),
                Fit::Over(_) => fit_into(&piece, budget / 2, render, out),
            }
        }
    }
    let mut out = Vec::new();
    fit_into(markdown, budget, &render, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dialect of text marks written as they open, quotes as line prefixes.
    struct Marks;

    impl Dialect for Marks {
        const QUOTE: Quote = Quote::Lines {
            prefix: "| ",
            blank: "|",
        };
        const EAGER: bool = true;
        const CODE_IN_MARKS: bool = true;
        const BARE_AUTOLINKS: bool = true;

        fn escape(&self, text: &str) -> String {
            text.replace('$', "\\$")
        }

        fn linkable(&self, url: &str) -> bool {
            url.starts_with("https://") || url.starts_with("mailto:")
        }

        fn mark(&self, style: Style) -> (&'static str, &'static str) {
            match style {
                Style::Strong => ("*", "*"),
                Style::Emphasis => ("_", "_"),
                Style::Strikethrough => ("~", "~"),
            }
        }

        fn link(&self, url: &str, bare: bool) -> (String, String) {
            (format!("[{url}{}", if bare { "" } else { " " }), "]".into())
        }

        fn code(&self, code: &str) -> String {
            format!("'{code}'")
        }

        fn code_block(&self, info: Option<&str>, code: &str) -> String {
            format!("--- {}\n{code}\n---", info.unwrap_or("-"))
        }
    }

    /// A dialect of tags written before the first text inside them, none around code.
    struct Tags;

    impl Dialect for Tags {
        const QUOTE: Quote = Quote::Element {
            open: "<q>",
            close: "</q>",
        };
        const EAGER: bool = false;
        const CODE_IN_MARKS: bool = false;
        const BARE_AUTOLINKS: bool = false;

        fn escape(&self, text: &str) -> String {
            escape(text)
        }

        fn linkable(&self, url: &str) -> bool {
            url.starts_with("https://")
        }

        fn mark(&self, style: Style) -> (&'static str, &'static str) {
            match style {
                Style::Strong => ("<b>", "</b>"),
                Style::Emphasis => ("<i>", "</i>"),
                Style::Strikethrough => ("<s>", "</s>"),
            }
        }

        fn link(&self, url: &str, _bare: bool) -> (String, String) {
            (format!("<a {url}>"), "</a>".into())
        }

        fn code(&self, code: &str) -> String {
            format!("<c>{}</c>", escape(code))
        }

        fn code_block(&self, _info: Option<&str>, code: &str) -> String {
            format!("<pre>{}</pre>", escape(code))
        }
    }

    #[track_caller]
    fn check(dialect: &impl Dialect, cases: &[(&str, &str)]) {
        for (markdown, want) in cases {
            assert_eq!(render(dialect, markdown), *want, "{markdown:?}");
        }
    }

    #[test]
    fn marks_nest_once_and_headings_are_bold() {
        check(
            &Marks,
            &[
                ("***both***", "_*both*_"),
                ("**a **b** c**", "*a b c*"),
                (
                    "**bold _and ~~struck~~ italic_**",
                    "*bold _and ~struck~ italic_*",
                ),
                ("# **Bold** title\n\nbody", "*Bold title*\n\nbody"),
                ("**run `ls` now**", "*run 'ls' now*"),
            ],
        );
        check(
            &Tags,
            &[
                ("**run `ls` now**", "<b>run </b><c>ls</c><b> now</b>"),
                ("**`ls`**", "<c>ls</c>"),
                ("*a* <b>", "<i>a</i> &lt;b&gt;"),
            ],
        );
    }

    #[test]
    fn lists_are_numbered_and_indented() {
        check(
            &Marks,
            &[
                ("- one\n- two\n  - nested", "• one\n• two\n    • nested"),
                (
                    "3. three\n4. four\n   1. in",
                    "3. three\n4. four\n    1. in",
                ),
                ("- [x] done\n- [ ] todo", "• ☑ done\n• ☐ todo"),
                ("-\n- b", "• \n• b"),
                ("text\n\n- a\n\nafter", "text\n\n• a\n\nafter"),
            ],
        );
    }

    #[test]
    fn code_blocks_and_tables_are_blocks_of_lines() {
        check(
            &Marks,
            &[
                ("```rust x\nfn f() {}\n\n```", "--- rust x\nfn f() {}\n---"),
                ("    indented", "--- -\nindented\n---"),
                ("> see\n> ```\n> a\n> ```", "| see\n|\n| --- \n| a\n| ---"),
                ("- item\n\n  ```\n  ls\n  ```", "• item\n\n--- \nls\n---"),
                (
                    "| Name | Age |\n|:-----|----:|\n| Al | 3 |",
                    "--- -\nName | Age\n-----+----\nAl   |   3\n---",
                ),
            ],
        );
        check(
            &Tags,
            &[
                (
                    "> see\n> ```\n> a<\n> ```",
                    "<q>see</q>\n\n<pre>a&lt;</pre>",
                ),
                ("> a\n>\n> > b\n\nc", "<q>a\n\nb</q>\n\nc"),
            ],
        );
    }

    #[test]
    fn links_are_linked_when_the_dialect_can() {
        check(
            &Marks,
            &[
                ("[docs](https://x.io)", "[https://x.io docs]"),
                ("<https://x.io>", "[https://x.io]"),
                ("<me@x.io>", "[mailto:me@x.io me@x.io]"),
                ("[rel](a/b$)", "rel (a/b\\$)"),
                ("<ahttps://x.io>", "ahttps://x.io"),
                (
                    "[![img](https://x.io/i)](https://x.io)",
                    "[https://x.io img (https://x.io/i)]",
                ),
                ("[nowhere]()", "nowhere"),
                ("[]($)", " (\\$)"),
            ],
        );
        check(
            &Tags,
            &[
                ("[**a**](https://x.io)", "<a https://x.io><b>a</b></a>"),
                ("[](https://x.io) b", " b"),
                ("<ahttps://x.io>", "ahttps://x.io (ahttps://x.io)"),
            ],
        );
    }

    #[test]
    fn text_is_escaped_by_the_dialect_and_raw_html_is_text() {
        check(
            &Marks,
            &[
                ("costs $5", "costs \\$5"),
                ("<div>\n$\n</div>", "<div>\n\\$\n</div>"),
                ("a\nb  \nc\n\n---\n\nd", "a\nb\nc\n\n──────────\n\nd"),
                ("> one\n>\n> two", "| one\n|\n| two"),
            ],
        );
    }

    #[test]
    fn a_mark_around_nothing_is_written_only_by_eager_dialects() {
        assert_eq!(render(&Marks, "[](https://x.io)"), "[https://x.io ]");
        assert_eq!(render(&Tags, "[](https://x.io)"), "");
    }

    #[test]
    fn fit_leaves_out_blank_pieces_and_cuts_finer_what_is_over() {
        let render = |piece: &str| Fit::chars(piece.to_owned(), piece, 10);
        assert!(fit(" \n ", 100, render).is_empty());
        let pieces = fit("word ".repeat(40).trim(), 100, render);
        assert!(pieces.iter().all(|p| p.chars().count() <= 10), "{pieces:?}");
        assert_eq!(pieces.concat().matches("word").count(), 40);
        // What cannot be cut finer is kept as it is.
        let over = fit("a", 1, |piece: &str| Fit::Over(piece.repeat(3)));
        assert_eq!(over, ["aaa"]);
    }

    proptest::proptest! {
        #[test]
        fn every_piece_fit_returns_is_within_the_limit(
            markdown in "([a-z <>&*_~`#>|\\[\\]()-]|\n|```|\\*\\*|https://x\\.io){0,400}",
            max in 8usize..300,
        ) {
            let pieces = fit(&markdown, max, |piece| {
                let text = render(&Tags, piece);
                Fit::chars(text.clone(), &text, max)
            });
            for p in pieces {
                proptest::prop_assert!(p.chars().count() <= max, "{} > {}: {}", p.chars().count(), max, p);
            }
        }
    }
}
