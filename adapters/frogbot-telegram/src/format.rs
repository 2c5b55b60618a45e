//! Turns the model's Markdown into Telegram's HTML (`parse_mode` `HTML`): `<b>`, `<i>`, `<s>`,
//! `<code>`, `<pre><code class="language-x">`, `<a href>` and `<blockquote>`, every other `<`,
//! `>` and `&` escaped; lists as "• " and "1. " lines, headings as bold lines. Tables become a
//! `<pre>` block of aligned columns (Telegram has no tables).
//!
//! Parsing and writing are [`frogbot_channel::markdown`]'s walker (CommonMark with strikethrough,
//! tables and task lists; raw HTML in the model's text shown as text); this module gives it the
//! Telegram HTML dialect. The output keeps Telegram's nesting rules: `<code>` and
//! `<pre>` are never inside another entity (bold, italic, a link… are closed around inline code
//! and opened again after it, a quote around a code block), quotes are not nested.
//!
//! [`messages`] splits a reply with [`frogbot_model::text::split`] first and converts each piece,
//! so every message is self-contained HTML, at most the limit counted as Telegram counts it: on
//! the text left after entity parsing ([`visible_len`]).

use frogbot_channel::markdown::{self, Dialect, Fit, Quote};

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
    // The shown text is the Markdown less its markup, but for tables (padded columns) and
    // links to non-web URLs (" (url)"), which are split finer when they grow past `max`.
    markdown::fit(markdown, max.max(1), |piece| {
        Fit::chars(piece.to_owned(), &visible_text(&to_html(piece)), max)
    })
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
pub use markdown::escape;

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
    markdown::render(&TelegramHtml, markdown)
}

/// Telegram's HTML: tags written before the first text inside them, none around `<code>` or
/// `<pre>`, one `<blockquote>` for nested quotes.
struct TelegramHtml;

impl Dialect for TelegramHtml {
    const QUOTE: Quote = Quote::BLOCKQUOTE;
    const MARKS: [(&'static str, &'static str); 3] =
        [("<b>", "</b>"), ("<i>", "</i>"), ("<s>", "</s>")];

    fn linkable(&self, url: &str) -> bool {
        ["http://", "https://", "tg://", "mailto:"].iter().any(|s| {
            url.len() > s.len()
                && url
                    .get(..s.len())
                    .is_some_and(|p| p.eq_ignore_ascii_case(s))
        })
    }

    fn link(&self, url: &str, _bare: bool) -> (String, String) {
        let href = escape(url).replace('"', "&quot;");
        (format!("<a href=\"{href}\">"), "</a>".to_owned())
    }

    fn code(&self, code: &str) -> String {
        format!("<code>{}</code>", escape(code))
    }

    fn code_block(&self, info: Option<&str>, code: &str) -> String {
        let code = escape(if code.is_empty() { " " } else { code });
        match info.and_then(language) {
            Some(lang) => format!("<pre><code class=\"language-{lang}\">{code}</code></pre>"),
            None => format!("<pre>{code}</pre>"),
        }
    }
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
