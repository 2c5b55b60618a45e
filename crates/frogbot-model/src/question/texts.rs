//! The strings a person reads about a question: button labels, the typed-reply hint of an
//! input, and a card's expiry line.

use super::{InputKind, QuestionItem};

/// A confirm input's button label when it names none.
pub const CONFIRM_LABEL: &str = "Confirm";

/// What a card shows once its question set expired.
pub const EXPIRED_TEXT: &str = "Expired";

/// What a card shows while a question set with an expiry is open: `open until 14:05 UTC`, with
/// the date when it is not `now`'s day.
pub fn open_until_text(
    expires_at: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    if expires_at.date_naive() == now.date_naive() {
        format!("open until {} UTC", expires_at.format("%H:%M"))
    } else {
        format!("open until {} UTC", expires_at.format("%-d %b %H:%M"))
    }
}

impl QuestionItem {
    /// A confirm input's button label ([`CONFIRM_LABEL`] when it names none).
    pub fn confirm_label(&self) -> &str {
        self.label
            .as_deref()
            .filter(|l| !l.trim().is_empty())
            .unwrap_or(CONFIRM_LABEL)
    }

    pub(super) fn range_phrase(&self) -> String {
        match (&self.min, &self.max) {
            (Some(a), Some(b)) => format!(" from {a} to {b}"),
            (Some(a), None) => format!(" of at least {a}"),
            (None, Some(b)) => format!(" of at most {b}"),
            (None, None) => String::new(),
        }
    }

    /// One line telling a person how to answer this input with a typed reply, where the
    /// platform draws no control for it (`None` for a choice: adapters number its options).
    pub fn reply_hint(&self) -> Option<String> {
        match self.kind {
            InputKind::Choice => None,
            InputKind::TextInput => Some(match self.max_length {
                Some(n) => format!("Reply with your answer (at most {n} characters)."),
                None => "Reply with your answer.".into(),
            }),
            InputKind::NumberInput => Some(format!(
                "Reply with a number{}{}.",
                self.range_phrase(),
                self.unit
                    .as_deref()
                    .map(|u| format!(" ({u})"))
                    .unwrap_or_default()
            )),
            InputKind::Toggle => Some(match &self.label {
                Some(l) => format!("Reply yes or no ({l})."),
                None => "Reply yes or no.".into(),
            }),
            InputKind::Confirm => Some(format!("Reply \"{}\" to confirm.", self.confirm_label())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{input, kinds};
    use super::*;

    #[test]
    fn hints_and_expiry_lines() {
        let i = kinds();
        assert_eq!(
            i.questions[0].reply_hint().unwrap(),
            "Reply \"Approve\" to confirm."
        );
        assert_eq!(
            i.questions[2].reply_hint().unwrap(),
            "Reply with a number from 1 to 10 (pods)."
        );
        assert_eq!(input().questions[0].reply_hint(), None);
        let t = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc();
        assert_eq!(
            open_until_text(t("2026-12-01T14:05:00Z"), t("2026-12-01T10:00:00Z")),
            "open until 14:05 UTC"
        );
        assert_eq!(
            open_until_text(t("2026-12-02T14:05:00Z"), t("2026-12-01T10:00:00Z")),
            "open until 2 Dec 14:05 UTC"
        );
    }
}
