//! Turns the model's Markdown into Discord's: Discord renders Markdown itself, so the text passes
//! through as it is, but for tables (which Discord does not render: a top-level table becomes a
//! code block of aligned columns). What Discord would also act on is neutralised instead: every
//! reply is sent with empty `allowed_mentions` ([`reply_message`]), so a model's `@everyone`,
//! `<@&role>` or `<@user>` shows as text and pings no one.
//!
//! [`messages`] splits a reply with [`frogbot_model::text::split`] first and converts each piece,
//! so a code block cut in two is closed and reopened and every message is within the limit.

use frogbot_channel::markdown::{self, Fit, Table};
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use serenity::builder::{CreateAllowedMentions, CreateMessage};
use serenity::model::id::UserId;

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

/// `allowed_mentions` that let exactly `users` be pinged (by their `<@ID>` in the content): no
/// `@everyone` / `@here`, no role, nobody else (`{"parse": [], "users": [...]}`; [`no_mentions`]
/// when `users` is empty).
pub fn only_users(users: &[UserId]) -> CreateAllowedMentions {
    no_mentions().users(users.iter().copied())
}

/// The model's Markdown `markdown` as the messages of a reply, each at most `max` characters:
/// split with [`frogbot_model::text::split`], each piece converted with [`to_discord`], and a
/// piece that grew past `max` (a table's padding) split finer. Blank text gives no message.
pub fn messages(markdown: &str, max: usize) -> Vec<String> {
    markdown::fit(markdown, max.max(1), |piece| {
        let text = to_discord(piece);
        Fit::chars(text.clone(), &text, max)
    })
}

/// The Markdown `markdown` as Discord shows it well: unchanged but for top-level tables, which
/// become code blocks of aligned columns.
pub fn to_discord(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut copied = 0;
    // Containers (quotes, lists) around the event: a table inside one is left as it is (its
    // lines carry the container's markers).
    let mut depth = 0usize;
    // A top-level table being collected, and where it starts in `markdown`.
    let mut table: Option<(Table, usize)> = None;
    for (event, range) in Parser::new_ext(markdown, Options::ENABLE_TABLES).into_offset_iter() {
        if let Some((rows, start)) = &mut table {
            if rows.event(&event) {
                out.push_str(&markdown[copied..*start]);
                out.push_str(&code_block(&rows.text(), ""));
                copied = range.end;
                table = None;
            }
            continue;
        }
        match event {
            Event::Start(Tag::BlockQuote(_) | Tag::List(_)) => depth += 1,
            Event::End(TagEnd::BlockQuote(_) | TagEnd::List(_)) => depth -= 1,
            Event::Start(Tag::Table(align)) if depth == 0 => {
                table = Some((Table::new(align), range.start));
            }
            _ => {}
        }
    }
    out.push_str(&markdown[copied..]);
    out
}

/// `text` with every run of three backticks broken by a zero-width space (it would end the
/// code block).
pub(crate) use markdown::no_fence;

/// A code block holding `body` (its fences made harmless), with `language` for highlighting.
pub(crate) fn code_block(body: &str, language: &str) -> String {
    format!("```{language}\n{}\n```", no_fence(body))
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
