//! Turns the model's Markdown into Matrix's formatted messages: `format`
//! `org.matrix.custom.html` with `formatted_body` the HTML pulldown-cmark writes (CommonMark with
//! strikethrough, tables and task lists), and `body` the Markdown itself as the plain fallback.
//!
//! The HTML keeps to what Matrix clients show: raw HTML in the model's text is escaped (shown as
//! text, never passed through), line breaks within a paragraph are `<br />` (as the model meant
//! them), images become links (Matrix shows only `mxc://` images), task list markers are ☑ / ☐,
//! and a link whose scheme is not one the spec allows (`http`, `https`, `ftp`, `mailto`,
//! `magnet`) is its text followed by the URL. Tables stay tables (`<table>` is in the spec's
//! list).
//!
//! [`messages`] splits a reply with [`frogbot_model::text::split`] first and converts each piece,
//! so every message is self-contained HTML within the limits: at most the given characters of
//! `body`, and [`MAX_TEXT_BYTES`] of `body` and `formatted_body` together.

use frogbot_channel::markdown::{self, Fit};
use pulldown_cmark::{CowStr, Event, Parser, Tag, TagEnd};

/// The `format` of a message whose `formatted_body` is HTML.
pub const HTML_FORMAT: &str = "org.matrix.custom.html";

/// The most bytes of `body` and `formatted_body` together (as JSON strings) in one message. An
/// event is at most 65,536 bytes; in an encrypted room its content is encrypted and base64-coded
/// (a third more), so the two texts keep to 40,000.
pub const MAX_TEXT_BYTES: usize = 40_000;

/// The most bytes of an event's `content` (as JSON) the adapter sends. Synapse refuses an event
/// over 65,536 bytes of canonical JSON (`413 M_TOO_LARGE`), counting its envelope (ids, hashes,
/// signatures, auth and previous events: about 1 kB); in an encrypted room the content is sent
/// as base64 ciphertext, a third larger. 46,000 bytes of content stay under the limit both ways
/// (46,000 × 4/3 + the envelope < 65,536). Every event is measured against it before it is sent.
pub const MAX_CONTENT_BYTES: usize = 46_000;

/// The most bytes of `body` and `formatted_body` together in a message that will be edited (a
/// streamed one): an `m.replace` edit carries the texts twice (`m.new_content` and the `* `
/// fallback), so a streamed message keeps to half of [`MAX_CONTENT_BYTES`], less room for the
/// rest of the edit's content.
pub const EDITABLE_TEXT_BYTES: usize = (MAX_CONTENT_BYTES - 1_000) / 2;

/// One message of a reply: the Markdown `body` and its HTML `html`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Formatted {
    /// The plain-text fallback: the Markdown as the model wrote it.
    pub body: String,
    /// The `formatted_body`.
    pub html: String,
}

impl Formatted {
    /// The Markdown `markdown` formatted (no limit: see [`messages`]).
    pub fn new(markdown: &str) -> Self {
        Formatted {
            body: markdown.to_owned(),
            html: to_html(markdown),
        }
    }

    /// The bytes `body` and `formatted_body` take in the event's JSON.
    pub fn json_bytes(&self) -> usize {
        let len = |s: &str| serde_json::to_string(s).map_or(usize::MAX / 2, |j| j.len());
        len(&self.body) + len(&self.html)
    }

    /// Adds `format` and `formatted_body` to a message's `content`.
    pub fn add_to(&self, content: &mut serde_json::Value) {
        content["format"] = HTML_FORMAT.into();
        content["formatted_body"] = self.html.clone().into();
    }
}

/// The model's Markdown `markdown` as the messages of a reply: split with
/// [`frogbot_model::text::split`], each piece formatted, and a piece over the limits (more than
/// `max_chars` characters of `body`, or [`MAX_TEXT_BYTES`] with its HTML) split finer. Blank text
/// gives no message.
pub fn messages(markdown: &str, max_chars: usize) -> Vec<Formatted> {
    messages_within(markdown, max_chars, MAX_TEXT_BYTES)
}

/// [`messages`] with `max_bytes` of `body` and `formatted_body` together instead of
/// [`MAX_TEXT_BYTES`] (a streamed message keeps to [`EDITABLE_TEXT_BYTES`]).
pub fn messages_within(markdown: &str, max_chars: usize, max_bytes: usize) -> Vec<Formatted> {
    // The HTML is about as long as the Markdown: the Markdown is cut at a bit less than half of
    // the bytes both may take.
    let budget = max_chars.clamp(1, (max_bytes * 9 / 20).max(1));
    markdown::fit(markdown, budget, |piece| {
        let f = Formatted::new(piece);
        if f.body.chars().count() <= max_chars && f.json_bytes() <= max_bytes {
            Fit::Within(f)
        } else {
            Fit::Over(f)
        }
    })
}

/// Whether a Matrix client links `url` (the schemes the spec allows in `href`).
fn linkable(url: &str) -> bool {
    let Some((scheme, _)) = url.split_once(':') else {
        return false;
    };
    ["http", "https", "ftp", "mailto", "magnet"]
        .iter()
        .any(|s| scheme.eq_ignore_ascii_case(s))
}

/// The Markdown `markdown` as the HTML of `formatted_body`.
pub fn to_html(markdown: &str) -> String {
    let mut events: Vec<Event<'_>> = Vec::new();
    // Per open link or image: the URL to write after its text when it is not linked (a link in
    // a link is not linked either).
    let mut links: Vec<Option<CowStr<'_>>> = Vec::new();
    // Raw HTML block lines, shown as one paragraph of text.
    let mut html_block: Option<Vec<CowStr<'_>>> = None;
    for event in Parser::new_ext(markdown, markdown::options()) {
        match event {
            Event::Start(Tag::HtmlBlock) => html_block = Some(Vec::new()),
            Event::Html(line) if html_block.is_some() => {
                html_block.as_mut().expect("html block").push(line);
            }
            Event::End(TagEnd::HtmlBlock) => {
                let lines = html_block.take().unwrap_or_default();
                events.push(Event::Start(Tag::Paragraph));
                for (i, line) in lines.iter().enumerate() {
                    if i > 0 {
                        events.push(Event::HardBreak);
                    }
                    let line = line.trim_end_matches('\n').to_owned();
                    events.push(Event::Text(line.into()));
                }
                events.push(Event::End(TagEnd::Paragraph));
            }
            Event::Html(raw) | Event::InlineHtml(raw) => events.push(Event::Text(raw)),
            Event::SoftBreak => events.push(Event::HardBreak),
            Event::TaskListMarker(done) => {
                events.push(Event::Text(if done { "☑ " } else { "☐ " }.into()));
            }
            Event::Start(
                Tag::Link {
                    link_type,
                    dest_url,
                    title,
                    id,
                }
                | Tag::Image {
                    link_type,
                    dest_url,
                    title,
                    id,
                },
            ) => {
                let email = link_type == pulldown_cmark::LinkType::Email;
                if (linkable(&dest_url) || email) && links.is_empty() {
                    links.push(None);
                    events.push(Event::Start(Tag::Link {
                        link_type,
                        dest_url,
                        title,
                        id,
                    }));
                } else {
                    links.push(Some(dest_url));
                }
            }
            Event::End(TagEnd::Link | TagEnd::Image) => match links.pop().flatten() {
                None => events.push(Event::End(TagEnd::Link)),
                Some(url) if url.is_empty() => {}
                Some(url) => events.push(Event::Text(format!(" ({url})").into())),
            },
            other => events.push(other),
        }
    }
    let mut html = String::with_capacity(markdown.len() * 5 / 4);
    pulldown_cmark::html::push_html(&mut html, events.into_iter());
    html.trim_end().to_owned()
}

pub use frogbot_model::text::to_plain;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_plain_text_for_polls() {
        for (markdown, want) in [
            ("Release **v1.4** now?", "Release v1.4 now?"),
            ("Run `rm -rf x`?", "Run rm -rf x?"),
            ("Args:\n```json\n{\"a\": 1}\n```", "Args:\n{\"a\": 1}"),
            ("- one\n- *two*", "• one\n• two"),
            ("1. a\n2. b", "1. a\n2. b"),
            ("see [docs](https://x.test)", "see docs (https://x.test)"),
            ("<b>raw</b>", "<b>raw</b>"),
            ("plain", "plain"),
        ] {
            assert_eq!(to_plain(markdown), want, "{markdown:?}");
        }
    }

    #[test]
    fn markdown_becomes_matrix_html() {
        let cases: &[(&str, &str)] = &[
            ("plain text", "<p>plain text</p>"),
            (
                "**bold** *italic* ~~gone~~",
                "<p><strong>bold</strong> <em>italic</em> <del>gone</del></p>",
            ),
            ("`a<b>&c`", "<p><code>a&lt;b&gt;&amp;c</code></p>"),
            (
                "```rust\nfn main() { a < b }\n```",
                "<pre><code class=\"language-rust\">fn main() { a &lt; b }\n</code></pre>",
            ),
            (
                "[the docs](https://example.com/a?b=1&c=2)",
                "<p><a href=\"https://example.com/a?b=1&amp;c=2\">the docs</a></p>",
            ),
            (
                "[js](javascript:alert(1)) [rel](docs/a.md)",
                "<p>js (javascript:alert(1)) rel (docs/a.md)</p>",
            ),
            (
                "![a frog](https://x.io/f.png)",
                "<p><a href=\"https://x.io/f.png\">a frog</a></p>",
            ),
            (
                "- one\n- two\n  - nested",
                "<ul>\n<li>one</li>\n<li>two\n<ul>\n<li>nested</li>\n</ul>\n</li>\n</ul>",
            ),
            (
                "3. three\n4. four",
                "<ol start=\"3\">\n<li>three</li>\n<li>four</li>\n</ol>",
            ),
            ("- [x] done", "<ul>\n<li>☑ done</li>\n</ul>"),
            ("# Title", "<h1>Title</h1>"),
            (
                "> quoted\n> more",
                "<blockquote>\n<p>quoted<br />\nmore</p>\n</blockquote>",
            ),
            ("a < b && c > d", "<p>a &lt; b &amp;&amp; c &gt; d</p>"),
            (
                "hi <b>raw</b> <img src=x onerror=alert(1)>",
                "<p>hi &lt;b&gt;raw&lt;/b&gt; &lt;img src=x onerror=alert(1)&gt;</p>",
            ),
            (
                "<script>\nalert(1)\n</script>",
                "<p>&lt;script&gt;<br />\nalert(1)<br />\n&lt;/script&gt;</p>",
            ),
            (
                "***both*** **bold _and italic_**",
                "<p><em><strong>both</strong></em> <strong>bold <em>and italic</em></strong></p>",
            ),
            (
                "| a | b |\n|---|--:|\n| 1 | 2 |",
                "<table><thead><tr><th>a</th><th style=\"text-align: right\">b</th></tr></thead><tbody>\n<tr><td>1</td><td style=\"text-align: right\">2</td></tr>\n</tbody></table>",
            ),
        ];
        for (markdown, want) in cases {
            assert_eq!(to_html(markdown), *want, "{markdown:?}");
        }
    }

    #[test]
    fn a_long_reply_with_a_code_block_across_the_limit_is_split_into_valid_messages() {
        let prose = "Some **words** about frogs & <toads>. ".repeat(100);
        let code: String = (0..300)
            .map(|i| format!("let x{i} = \"<{i}>\";\n"))
            .collect();
        let markdown = format!("{prose}\n\n```rust\n{code}```\n\n{prose}");
        assert!(markdown.chars().count() >= 10_000);
        let out = messages(&markdown, 3_000);
        assert!(out.len() >= 4, "{} messages", out.len());
        for m in &out {
            assert!(m.body.chars().count() <= 3_000);
            assert!(m.json_bytes() <= MAX_TEXT_BYTES);
            assert_eq!(m.body.matches("```").count() % 2, 0);
            assert_eq!(
                m.html.matches("<pre>").count(),
                m.html.matches("</pre>").count()
            );
            assert!(!m.html.contains("<toads>"));
        }
        assert!(messages(" \n ", 100).is_empty());
    }

    #[test]
    fn a_reply_over_the_event_size_is_split_by_bytes() {
        // 30,000 characters of 4-byte emoji: within the characters, far over the bytes.
        let out = messages(&"🐸 ".repeat(15_000), 32_000);
        assert!(out.len() >= 4, "{} messages", out.len());
        assert!(out.iter().all(|m| m.json_bytes() <= MAX_TEXT_BYTES));
    }

    /// Whether the tags of `html` are balanced (void `<br />` / `<hr />` aside).
    fn balanced(html: &str) -> bool {
        let mut open: Vec<&str> = Vec::new();
        let mut rest = html;
        while let Some(i) = rest.find('<') {
            let Some(end) = rest[i..].find('>') else {
                return false;
            };
            let tag = &rest[i + 1..i + end];
            rest = &rest[i + end + 1..];
            if tag.ends_with('/') {
                continue;
            }
            match tag.strip_prefix('/') {
                Some(name) => {
                    if open.pop() != Some(name) {
                        return false;
                    }
                }
                None => open.push(tag.split(' ').next().unwrap_or_default()),
            }
        }
        open.is_empty()
    }

    proptest::proptest! {
        #[test]
        fn any_input_converts_to_balanced_html_within_the_limit(
            markdown in "([a-z <>&*_~`#>|\\[\\]()\"-]|\n|```|\\*\\*|https://x\\.io){0,400}"
        ) {
            for m in messages(&markdown, 200) {
                proptest::prop_assert!(m.body.chars().count() <= 200);
                proptest::prop_assert!(balanced(&m.html), "{}", m.html);
            }
        }
    }
}
