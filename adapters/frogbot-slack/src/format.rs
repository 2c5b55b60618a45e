//! Turns the model's Markdown into Slack's `mrkdwn`, the format of a message's `text`: `*bold*`,
//! `_italic_`, `~strike~`, `` `code` ``, ```` ``` ```` blocks, `<url|text>` links, "• " and "1. "
//! list lines, `>` quotes, headings as bold lines, and `&`, `<`, `>` escaped as `&amp;`, `&lt;`,
//! `&gt;` everywhere but in a link's URL (so the model cannot write a `<!channel>` ping or a
//! `<@U…>` mention). Tables become a code block of aligned columns (`mrkdwn` has no tables).
//!
//! Parsing and writing are [`frogbot_channel::markdown`]'s walker (CommonMark with strikethrough,
//! tables and task lists; raw HTML in the model's text shown as text); this module gives it the
//! `mrkdwn` dialect. [`messages`] splits a reply with [`frogbot_model::text::split`] first and
//! converts each piece, so every message is self-contained `mrkdwn` (a code block cut in two is
//! closed and reopened) within the limit.
//!
//! Why `mrkdwn` in `text` and not Slack's `markdown` block (which slack-morphism 2.31 has as
//! `SlackMarkdownBlock`): that block takes at most 12,000 characters per message (a third of
//! `text`'s), still needs a `text` fallback for notifications, and leaves how raw HTML, tables
//! and `<…>` sequences in the model's text render to Slack; `mrkdwn` is rendered by every client
//! and the escaping here is ours.

use frogbot_channel::markdown::{self, Dialect, Fit, Quote, no_fence};

/// The model's Markdown `markdown` as the messages of a reply, each at most `max` characters of
/// `mrkdwn`: split with [`frogbot_model::text::split`], each piece converted with [`to_mrkdwn`],
/// and a piece whose conversion grew past `max` split finer. Blank text gives no message.
pub fn messages(markdown: &str, max: usize) -> Vec<String> {
    // Escaping grows `&<>` (4–5 characters for 1): a tenth of the limit is left for it.
    markdown::fit(markdown, (max - max / 10).max(1), |piece| {
        let text = to_mrkdwn(piece);
        Fit::chars(text.clone(), &text, max)
    })
}

/// The Markdown `markdown` as Slack `mrkdwn` (no length limit: see [`messages`]).
pub fn to_mrkdwn(markdown: &str) -> String {
    markdown::render(&Mrkdwn, markdown)
}

/// Escapes `&`, `<` and `>`, the characters Slack reserves for its control sequences.
pub use markdown::escape;

/// A link's URL inside `<url|text>`: the characters that would end or split the sequence
/// (`|`, `<`, `>`, whitespace) and backticks (a run of three would open a code block)
/// percent-encoded.
fn link_url(url: &str) -> String {
    markdown::replace_chars(url, |c| match c {
        '`' => Some("%60"),
        '|' => Some("%7C"),
        '<' => Some("%3C"),
        '>' => Some("%3E"),
        ' ' => Some("%20"),
        c if c.is_whitespace() => Some(""),
        _ => None,
    })
}

/// The Markdown `markdown` as plain text, for the texts that show no formatting (Slack's
/// `plain_text` objects: buttons, options, labels, and a message's notification `text`).
pub use frogbot_model::text::to_plain;

/// Slack's `mrkdwn`: marks written as they open, one `>` per quoted line, `<url|text>` links.
struct Mrkdwn;

impl Dialect for Mrkdwn {
    const QUOTE: Quote = Quote::MARKDOWN;
    const MARKS: [(&'static str, &'static str); 3] = [("*", "*"), ("_", "_"), ("~", "~")];
    const EAGER: bool = true;
    const CODE_IN_MARKS: bool = true;
    const BARE_AUTOLINKS: bool = true;

    /// Escaped, and no ``` left to open a code block (a link's URL written as text, an image's).
    fn escape(&self, text: &str) -> String {
        no_fence(&escape(text))
    }

    /// Only the schemes Slack links (an absolute URL or `mailto:`): a made-up one
    /// (`<ahttps://…>`, an autolink to CommonMark) would reach the reader as a raw `<…>`.
    fn linkable(&self, url: &str) -> bool {
        let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
        lower.starts_with("https://")
            || lower.starts_with("http://")
            || lower.starts_with("mailto:")
    }

    fn link(&self, url: &str, bare: bool) -> (String, String) {
        let bar = if bare { "" } else { "|" };
        (format!("<{}{bar}", link_url(url)), ">".to_owned())
    }

    fn code(&self, code: &str) -> String {
        // Slack has no escape for a backtick inside inline code.
        format!("`{}`", escape(&code.replace('`', "ˋ")))
    }

    fn code_block(&self, _info: Option<&str>, code: &str) -> String {
        let code = no_fence(&escape(code));
        format!("```\n{}\n```", if code.is_empty() { " " } else { &code })
    }

    /// Backticks of two writes never join into a ``` that would open a code block.
    fn glue(&self, out: &str, next: &str) -> Option<char> {
        (next.starts_with('`') && out.ends_with('`')).then_some('\u{200B}')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link Slack does not make (its URL written after the text) cannot open a code block
    /// with the backticks in its URL.
    #[test]
    fn an_unlinkable_url_with_backticks_opens_no_code_block() {
        let out = to_mrkdwn("see [docs](ftp://x/```y) and more");
        assert!(out.contains("docs"), "{out}");
        assert!(!out.contains("```"), "{out}");
    }

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
