//! Text for a terminal: what the CLI prints of messages, titles, names and errors can come from
//! anyone who wrote to a chat, and a terminal obeys the control sequences in it (ESC `]0;` sets
//! the window title, ESC `[2J` clears the screen, ESC `]52;` writes the clipboard, a CR overwrites
//! the line). Every text output goes through [`escape_controls`]; JSON output needs nothing, as
//! JSON escapes control characters itself.

use std::borrow::Cow;

/// Is `c` a control character a terminal may act on? C0 except `\n` and `\t`, DEL, and C1.
fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || c == '\u{7f}'
}

/// `s` with its control characters (C0 but `\n` and `\t`, DEL, C1) written as Rust escapes:
/// ESC becomes `\u{1b}`, BEL `\u{7}`, CSI (U+009B) `\u{9b}`.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_unsafe(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `println!` with [`escape_controls`] applied to the line.
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", $crate::term::escape_controls(&format!($($arg)*)))
    };
}
pub(crate) use say;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_sequences_come_out_escaped() {
        let clipboard = "copy \x1b]52;c;ZWNobyBwd25lZA==\x07 done";
        assert_eq!(
            escape_controls(clipboard),
            "copy \\u{1b}]52;c;ZWNobyBwd25lZA==\\u{7} done"
        );
        assert_eq!(escape_controls("\x1b[2Jcleared"), "\\u{1b}[2Jcleared");
        assert_eq!(
            escape_controls("a\rb\u{7f}c\u{9b}31m\u{0}"),
            "a\\u{d}b\\u{7f}c\\u{9b}31m\\u{0}"
        );
        // Lines, tabs and text of any script stay as they are, unallocated.
        let plain = "two\nlines\tand ünïcode 🐸";
        assert!(matches!(escape_controls(plain), Cow::Borrowed(p) if p == plain));
    }
}
