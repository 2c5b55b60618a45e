//! Turns the model's Markdown into Discord's: Discord renders Markdown itself, so the text passes
//! through as it is, but for tables (which Discord does not render: a top-level table becomes a
//! code block of aligned columns). What Discord would also act on is neutralised instead: every
//! reply is sent with empty `allowed_mentions` ([`reply_message`]), so a model's `@everyone`,
//! `<@&role>` or `<@user>` shows as text and pings no one.
//!
//! [`messages`] splits a reply with [`frogbot_model::text::split`] first and converts each piece,
//! so a code block cut in two is closed and reopened and every message is within the limit.

use pulldown_cmark::{Alignment, Event, Options, Parser, Tag, TagEnd};
use serenity::builder::{CreateAllowedMentions, CreateMessage};

/// A message of the reply: `content` with no mention allowed to ping (`allowed_mentions` empty).
pub fn reply_message(content: impl Into<String>) -> CreateMessage {
    CreateMessage::new()
        .content(content)
        .allowed_mentions(no_mentions())
}

/// `allowed_mentions` that allow nothing: no `@everyone` / `@here`, no role, no user (not even
/// the author of a replied-to message).
pub fn no_mentions() -> CreateAllowedMentions {
    CreateAllowedMentions::new()
}

/// The model's Markdown `markdown` as the messages of a reply, each at most `max` characters:
/// split with [`frogbot_model::text::split`], each piece converted with [`to_discord`], and a
/// piece that grew past `max` (a table's padding) split finer. Blank text gives no message.
pub fn messages(markdown: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    fit(markdown, max.max(1), max, &mut out);
    out
}

fn fit(markdown: &str, budget: usize, max: usize, out: &mut Vec<String>) {
    for piece in frogbot_model::text::split(markdown, budget) {
        let text = to_discord(&piece);
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

/// The Markdown `markdown` as Discord shows it well: unchanged but for top-level tables, which
/// become code blocks of aligned columns.
pub fn to_discord(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut copied = 0;
    // Containers (quotes, lists) around the event: a table inside one is left as it is (its
    // lines carry the container's markers).
    let mut depth = 0usize;
    let mut table: Option<(Vec<Alignment>, Vec<Vec<String>>, usize)> = None;
    for (event, range) in Parser::new_ext(markdown, Options::ENABLE_TABLES).into_offset_iter() {
        if let Some((align, rows, start)) = &mut table {
            match event {
                Event::Start(Tag::TableHead | Tag::TableRow) => rows.push(Vec::new()),
                Event::Start(Tag::TableCell) => {
                    if let Some(row) = rows.last_mut() {
                        row.push(String::new());
                    }
                }
                Event::Text(t) | Event::Code(t) | Event::InlineHtml(t) => {
                    if let Some(cell) = rows.last_mut().and_then(|r| r.last_mut()) {
                        cell.push_str(&t);
                    }
                }
                Event::End(TagEnd::Table) => {
                    out.push_str(&markdown[copied..*start]);
                    out.push_str("```\n");
                    out.push_str(&no_fence(&frogbot_model::text::table_text(align, rows)));
                    out.push_str("\n```");
                    copied = range.end;
                    table = None;
                }
                _ => {}
            }
            continue;
        }
        match event {
            Event::Start(Tag::BlockQuote(_) | Tag::List(_)) => depth += 1,
            Event::End(TagEnd::BlockQuote(_) | TagEnd::List(_)) => depth -= 1,
            Event::Start(Tag::Table(align)) if depth == 0 => {
                table = Some((align, Vec::new(), range.start));
            }
            _ => {}
        }
    }
    out.push_str(&markdown[copied..]);
    out
}

/// `text` with every run of three backticks broken by a zero-width space (it would end the
/// code block).
pub(crate) fn no_fence(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_passes_through_but_tables() {
        let same = [
            "plain text",
            "**bold** *italic* ~~strike~~ `code` ***both*** **bold _and italic_**",
            "```rust\nfn main() {}\n```",
            "[the docs](https://example.com/a?b=1&c=2) <https://x.io>",
            "- one\n- two\n  - nested\n\n1. first\n2. second",
            "# Title\n\n> quoted\n> more",
            "a < b && c > d <b>raw</b> <script>x</script>",
            "@everyone @here <@123> <@&456> <#789>",
            "> | a | b |\n> |---|---|\n> | 1 | 2 |",
        ];
        for markdown in same {
            assert_eq!(to_discord(markdown), markdown);
        }
        assert_eq!(
            to_discord(
                "Ages:\n\n| Name | Age |\n|:-----|----:|\n| Alice | 30 |\n| Bob | 4 |\n\nDone."
            ),
            "Ages:\n\n```\nName  | Age\n------+----\nAlice |  30\nBob   |   4\n```\nDone."
        );
    }

    #[test]
    fn replies_allow_no_mention() {
        let body = serde_json::to_value(reply_message("@everyone hi <@&1>")).unwrap();
        assert_eq!(body["content"], "@everyone hi <@&1>");
        assert_eq!(
            body["allowed_mentions"],
            serde_json::json!({"parse": [], "users": [], "roles": []})
        );
    }

    #[test]
    fn a_long_reply_with_a_code_block_across_the_limit_is_split_into_valid_messages() {
        let prose = "Some **words** about frogs & toads. ".repeat(100);
        let code: String = (0..300).map(|i| format!("let x{i} = {i};\n")).collect();
        let markdown = format!("{prose}\n\n```rust\n{code}```\n\n{prose}");
        assert!(markdown.chars().count() >= 10_000);
        let out = messages(&markdown, 2_000);
        assert!(out.len() >= 5, "{} messages", out.len());
        for m in &out {
            assert!(m.chars().count() <= 2_000);
            assert_eq!(m.matches("```").count() % 2, 0, "unbalanced fences: {m}");
        }
        let code_lines: usize = out
            .iter()
            .map(|m| m.lines().filter(|l| l.starts_with("let x")).count())
            .sum();
        assert_eq!(code_lines, 300);
        assert!(messages(" \n", 2_000).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn any_input_converts_within_the_limit(
            markdown in "([a-z <>&*_~`#>|\\[\\]()-]|\n|```|\\*\\*|\\|---){0,400}"
        ) {
            for m in messages(&markdown, 200) {
                proptest::prop_assert!(m.chars().count() <= 200);
            }
        }
    }
}
