//! Turns the model's Markdown into Telegram's HTML (`parse_mode` `HTML`): `<b>`, `<i>`, `<s>`,
//! `<code>`, `<pre><code class="language-x">`, `<a href>` and `<blockquote>`, every other `<`,
//! `>` and `&` escaped; lists as "• " and "1. " lines, headings as bold lines. Tables become a
//! `<pre>` block of aligned columns (Telegram has no tables).
//!
//! Parsing is pulldown-cmark's (CommonMark with strikethrough, tables and task lists); raw HTML in
//! the model's text is shown as text. The output keeps Telegram's nesting rules: `<code>` and
//! `<pre>` are never inside another entity (bold, italic, a link… are closed around inline code
//! and opened again after it, a quote around a code block), quotes are not nested.
//!
//! [`messages`] splits a reply with [`frogbot_model::text::split`] first and converts each piece,
//! so every message is self-contained HTML, at most the limit counted as Telegram counts it: on
//! the text left after entity parsing ([`visible_len`]).

use pulldown_cmark::{Alignment, CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};

/// The parser options: CommonMark plus strikethrough, tables and task lists.
fn options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS
}

/// The model's Markdown `markdown` as the HTML messages of a reply, each at most `max`
/// characters once Telegram has parsed its entities: split with [`frogbot_model::text::split`],
/// each piece converted with [`to_html`], and a piece that came out longer split finer. Blank
/// text gives no message.
pub fn messages(markdown: &str, max: usize) -> Vec<String> {
    pieces(markdown, max)
        .into_iter()
        .map(|piece| to_html(&piece))
        .collect()
}

/// The Markdown pieces [`messages`] converts: `markdown` split with
/// [`frogbot_model::text::split`] (never inside a code block or an entity), a piece whose HTML
/// shows more than `max` characters split finer, blank pieces left out. A streamed reply is
/// drawn in these pieces, one message each.
pub fn pieces(markdown: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    // The shown text is the Markdown less its markup, but for tables (padded columns) and
    // links to non-web URLs (" (url)"), which are split finer when they grow past `max`.
    fit(markdown, max.max(1), max, &mut out);
    out
}

fn fit(markdown: &str, budget: usize, max: usize, out: &mut Vec<String>) {
    for piece in frogbot_model::text::split(markdown, budget) {
        let html = to_html(&piece);
        let shown = visible_text(&html);
        if shown.trim().is_empty() {
            continue;
        }
        if shown.chars().count() <= max || budget <= 1 {
            out.push(piece);
        } else {
            fit(&piece, budget / 2, max, out);
        }
    }
}

/// The text Telegram shows for `html` (as this module writes it): tags dropped, `&lt;`, `&gt;`,
/// `&amp;` and `&quot;` decoded.
pub fn visible_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(i) = rest.find(['<', '&']) {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        if rest.starts_with('<') {
            rest = rest.find('>').map_or("", |end| &rest[end + 1..]);
        } else {
            let (c, len) = [
                ("&lt;", '<'),
                ("&gt;", '>'),
                ("&amp;", '&'),
                ("&quot;", '"'),
            ]
            .iter()
            .find(|(e, _)| rest.starts_with(e))
            .map_or(('&', 1), |(e, c)| (*c, e.len()));
            out.push(c);
            rest = &rest[len..];
        }
    }
    out.push_str(rest);
    out
}

/// How many characters Telegram counts in `html`: those of [`visible_text`].
pub fn visible_len(html: &str) -> usize {
    visible_text(html).chars().count()
}

/// Escapes `&`, `<` and `>`, the characters Telegram's HTML reserves.
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

/// Escapes an attribute value: [`escape`] and `"`.
fn escape_attr(text: &str) -> String {
    escape(text).replace('"', "&quot;")
}

/// Whether Telegram makes a link of `url`.
fn linkable(url: &str) -> bool {
    ["http://", "https://", "tg://", "mailto:"].iter().any(|s| {
        url.len() > s.len()
            && url
                .get(..s.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(s))
    })
}

/// A code block's language for `class="language-…"`: the info string's first word, when it is
/// made of letters, digits and `+#._-` only.
fn language(info: &str) -> Option<&str> {
    let word = info.split_whitespace().next()?;
    word.chars()
        .all(|c| c.is_ascii_alphanumeric() || "+#._-".contains(c))
        .then_some(word)
}

/// The Markdown `markdown` as Telegram HTML (no length limit: see [`messages`]).
pub fn to_html(markdown: &str) -> String {
    let mut w = Writer::default();
    for event in Parser::new_ext(markdown, options()) {
        w.event(event);
    }
    w.close_quote();
    w.out.trim_end().to_owned()
}

/// A link being written.
#[derive(Debug)]
struct Link {
    url: String,
    /// An `<a>` was opened; else the text is followed by ` (url)`.
    native: bool,
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
    /// Blockquote depth (one `<blockquote>` for any depth: Telegram does not nest them).
    quote: usize,
    /// A `<blockquote>` is open in the output.
    quote_open: bool,
    /// The open lists: the next number of an ordered one.
    lists: Vec<Option<u64>>,
    /// An item's marker still to write at the start of its first line.
    marker: bool,
    bold: usize,
    italic: usize,
    strike: usize,
    /// The open inline tags, outermost first, as their opening tags (`b`, `a href="…"`).
    tags: Vec<String>,
    /// How many of `tags` are open in the output (the rest are written before the next text).
    written: usize,
    links: Vec<Link>,
    /// A code block being collected: its language and text.
    code: Option<(Option<String>, String)>,
    table: Option<Table>,
    /// Inside an HTML block, past its first line.
    html_line: bool,
}

impl Writer {
    fn event(&mut self, event: Event<'_>) {
        if self.code.is_some() {
            match event {
                Event::Text(t) => self.code.as_mut().expect("code").1.push_str(&t),
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
                // `<code>` is never inside another entity: the open ones are closed before it
                // (and opened again before the next text).
                let mut s: String = self.tags[..self.written]
                    .iter()
                    .rev()
                    .map(|t| close_tag(t))
                    .collect();
                self.written = 0;
                s.push_str(&format!("<code>{}</code>", escape(&c)));
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
        if self.marker {
            return;
        }
        self.pending = self.pending.max(2);
    }

    /// Opens the inline tag `tag` (written before the next text).
    fn open(&mut self, tag: String) {
        self.tags.push(tag);
    }

    /// Closes the innermost inline tag (if it was written: an empty one never is).
    fn close(&mut self) {
        if let Some(tag) = self.tags.pop()
            && self.written > self.tags.len()
        {
            self.out.push_str(&close_tag(&tag));
            self.written = self.tags.len();
        }
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
            Tag::CodeBlock(kind) => {
                self.block();
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => language(&info).map(str::to_owned),
                    CodeBlockKind::Indented => None,
                };
                self.code = Some((lang, String::new()));
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
                    self.open("i".into());
                }
                self.italic += 1;
            }
            Tag::Strong => self.open_bold(),
            Tag::Strikethrough => {
                if self.strike == 0 {
                    self.open("s".into());
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
                if native {
                    self.open(format!("a href=\"{}\"", escape_attr(&url)));
                }
                self.links.push(Link { url, native });
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
            TagEnd::Emphasis => {
                self.italic -= 1;
                if self.italic == 0 {
                    self.close();
                }
            }
            TagEnd::Strong => self.close_bold(),
            TagEnd::Strikethrough => {
                self.strike -= 1;
                if self.strike == 0 {
                    self.close();
                }
            }
            TagEnd::Link | TagEnd::Image => {
                if let Some(link) = self.links.pop() {
                    if link.native {
                        self.close();
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
            self.open("b".into());
        }
        self.bold += 1;
    }

    fn close_bold(&mut self) {
        self.bold -= 1;
        if self.bold == 0 {
            self.close();
        }
    }

    fn close_quote(&mut self) {
        if self.quote_open {
            self.out.push_str("</blockquote>");
            self.quote_open = false;
        }
    }

    /// Text of the document, escaped; its newlines break the line.
    fn text(&mut self, text: &str) {
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                self.line_break();
            }
            self.write(&escape(line));
        }
    }

    fn line_break(&mut self) {
        self.pending = self.pending.max(1);
    }

    /// Writes `s` (already HTML) as [`Writer::write_raw`] does, inside the open inline tags.
    fn write(&mut self, s: &str) {
        self.write_raw("");
        for tag in &self.tags[self.written..] {
            self.out.push('<');
            self.out.push_str(tag);
            self.out.push('>');
        }
        self.written = self.tags.len();
        self.out.push_str(s);
    }

    /// Writes `s` (already HTML) after the line breaks owed, opening the quote if one is due and
    /// starting each new line with the list indentation.
    fn write_raw(&mut self, s: &str) {
        if self.out.is_empty() {
            self.pending = 0;
        }
        let at_start = self.out.is_empty() || self.pending > 0;
        for _ in 0..self.pending {
            self.out.push('\n');
        }
        self.pending = 0;
        if self.quote > 0 && !self.quote_open {
            self.out.push_str("<blockquote>");
            self.quote_open = true;
        }
        if at_start {
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
        self.out.push_str(s);
    }

    fn end_code(&mut self) {
        let (lang, code) = self.code.take().unwrap_or_default();
        self.pre(lang.as_deref(), code.trim_end_matches('\n'));
        self.pending = 2;
    }

    /// A `<pre>` block of `code` (not escaped yet), outside any quote (Telegram nests no
    /// entity around `pre`).
    fn pre(&mut self, lang: Option<&str>, code: &str) {
        self.close_quote();
        let quote = std::mem::take(&mut self.quote);
        let lists = std::mem::take(&mut self.lists);
        let code = if code.is_empty() { " " } else { code };
        match lang {
            Some(lang) => self.write(&format!(
                "<pre><code class=\"language-{lang}\">{}</code></pre>",
                escape(code)
            )),
            None => self.write(&format!("<pre>{}</pre>", escape(code))),
        }
        self.lists = lists;
        self.quote = quote;
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
                self.pre(
                    None,
                    &frogbot_model::text::table_text(&table.align, &table.rows),
                );
                self.pending = 2;
            }
            _ => {}
        }
    }
}

/// The closing tag of the opening tag `tag` (`a href="…"` → `</a>`).
fn close_tag(tag: &str) -> String {
    format!("</{}>", tag.split(' ').next().unwrap_or(tag))
}

pub use frogbot_model::text::to_plain;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_plain_text_for_questions() {
        for (markdown, want) in [
            ("Release **v1.4** now?", "Release v1.4 now?"),
            ("Run `rm -rf x`?", "Run rm -rf x?"),
            ("Args:\n```json\n{\"a\": 1}\n```", "Args:\n{\"a\": 1}"),
            ("- one\n- *two*", "• one\n• two"),
            ("see [docs](https://x.test)", "see docs (https://x.test)"),
            ("Deploy <v1.4> & restart?", "Deploy <v1.4> & restart?"),
            ("plain", "plain"),
        ] {
            assert_eq!(to_plain(markdown), want, "{markdown:?}");
        }
    }

    #[test]
    fn markdown_becomes_telegram_html() {
        let cases: &[(&str, &str)] = &[
            ("plain text", "plain text"),
            ("**bold** and __bold__", "<b>bold</b> and <b>bold</b>"),
            ("*italic* and _italic_", "<i>italic</i> and <i>italic</i>"),
            ("~~gone~~", "<s>gone</s>"),
            ("`a<b>&c`", "<code>a&lt;b&gt;&amp;c</code>"),
            ("**run `ls` now**", "<b>run </b><code>ls</code><b> now</b>"),
            ("**`ls`**", "<code>ls</code>"),
            (
                "```rust\nfn main() { a < b }\n```",
                "<pre><code class=\"language-rust\">fn main() { a &lt; b }</code></pre>",
            ),
            ("```\nplain\n```", "<pre>plain</pre>"),
            ("```x\"><b>\ny\n```", "<pre>y</pre>"),
            (
                "[the docs](https://example.com/a?b=1&c=\"2\")",
                "<a href=\"https://example.com/a?b=1&amp;c=&quot;2&quot;\">the docs</a>",
            ),
            (
                "[**bold** link](https://x.io)",
                "<a href=\"https://x.io\"><b>bold</b> link</a>",
            ),
            (
                "<https://x.io>",
                "<a href=\"https://x.io\">https://x.io</a>",
            ),
            ("[relative](docs/a.md)", "relative (docs/a.md)"),
            ("[js](javascript:alert(1))", "js (javascript:alert(1))"),
            ("- one\n- two\n  - nested", "• one\n• two\n    • nested"),
            ("1. one\n2. two", "1. one\n2. two"),
            ("# Title\n\nBody", "<b>Title</b>\n\nBody"),
            ("## **Bold** title", "<b>Bold title</b>"),
            (
                "> quoted\n> more\n\nafter",
                "<blockquote>quoted\nmore</blockquote>\n\nafter",
            ),
            (
                "> > nested\n\n> again",
                "<blockquote>nested</blockquote>\n\n<blockquote>again</blockquote>",
            ),
            (
                "> see\n> ```\n> code\n> ```",
                "<blockquote>see</blockquote>\n\n<pre>code</pre>",
            ),
            ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
            (
                "MarkdownV2's reserved _ * [ ] ( ) ~ ` # + - = | { } . ! stay",
                "MarkdownV2's reserved _ * [ ] ( ) ~ ` # + - = | { } . ! stay",
            ),
            (
                "<b>raw</b> <a href=\"x\">y</a>",
                "&lt;b&gt;raw&lt;/b&gt; &lt;a href=\"x\"&gt;y&lt;/a&gt;",
            ),
            ("***both***", "<i><b>both</b></i>"),
            ("**bold _and italic_**", "<b>bold <i>and italic</i></b>"),
            (
                "| Name | Age |\n|:-----|----:|\n| Alice | 30 |\n| Bob | 4 |",
                "<pre>Name  | Age\n------+----\nAlice |  30\nBob   |   4</pre>",
            ),
        ];
        for (markdown, want) in cases {
            assert_eq!(to_html(markdown), *want, "{markdown:?}");
        }
    }

    #[test]
    fn the_visible_text_drops_tags_and_decodes_entities() {
        let html = to_html("**a** < `b&c` [link](https://x.io)");
        assert_eq!(visible_text(&html), "a < b&c link");
        assert_eq!(visible_len(&html), 12);
    }

    #[test]
    fn a_long_reply_with_a_code_block_across_the_limit_is_split_into_valid_messages() {
        let prose = "Some **words** about frogs & toads. ".repeat(100);
        let code: String = (0..300)
            .map(|i| format!("let x{i} = \"<{i}>\";\n"))
            .collect();
        let markdown = format!("{prose}\n\n```rust\n{code}```\n\n{prose}");
        assert!(markdown.chars().count() >= 10_000);
        let out = messages(&markdown, 4096);
        assert!(out.len() >= 3, "{} messages", out.len());
        for m in &out {
            assert!(visible_len(m) <= 4096, "{} chars", visible_len(m));
            assert_eq!(m.matches("<pre>").count(), m.matches("</pre>").count());
            assert_eq!(m.matches("<b>").count(), m.matches("</b>").count());
        }
        let code_lines = out
            .iter()
            .flat_map(|m| {
                visible_text(m)
                    .lines()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .filter(|l| l.starts_with("let x"))
            .count();
        assert_eq!(code_lines, 300);
    }

    #[test]
    fn blank_text_gives_no_message() {
        assert!(messages("", 100).is_empty());
        assert!(messages(" \n ", 100).is_empty());
    }

    /// Whether `html` nests its tags as Telegram requires: balanced, `code` / `pre` inside no
    /// other entity (but `code` right in `pre`), no quote in a quote.
    fn balanced(html: &str) -> bool {
        let mut open: Vec<String> = Vec::new();
        let mut rest = html;
        while let Some(i) = rest.find('<') {
            let Some(end) = rest[i..].find('>') else {
                return false;
            };
            let tag = &rest[i + 1..i + end];
            rest = &rest[i + end + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                if open.pop().as_deref() != Some(name) {
                    return false;
                }
                continue;
            }
            let name = tag.split(' ').next().unwrap_or_default().to_owned();
            let inside = |n: &str| open.iter().any(|o| o == n);
            let ok = match name.as_str() {
                "pre" => open.is_empty(),
                "code" => open.is_empty() || open == ["blockquote"] || open == ["pre"],
                "blockquote" => open.is_empty(),
                "a" => !inside("a") && !inside("code") && !inside("pre"),
                "b" | "i" | "s" => !inside("code") && !inside("pre"),
                _ => false,
            };
            if !ok {
                return false;
            }
            open.push(name);
        }
        open.is_empty()
    }

    proptest::proptest! {
        #[test]
        fn any_input_converts_to_balanced_html_within_the_limit(
            markdown in "([a-z <>&*_~`#>|\\[\\]()\"-]|\n|```|\\*\\*|https://x\\.io){0,400}"
        ) {
            for m in messages(&markdown, 200) {
                proptest::prop_assert!(visible_len(&m) <= 200);
                proptest::prop_assert!(balanced(&m), "{}", m);
            }
        }
    }
}
