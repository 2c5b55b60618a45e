//! The strings a person reads about a question: button labels, the typed-reply hint of an
//! input, a card's expiry line, and how a settled question reads (its answer and outcome line),
//! the same words on every platform.

use super::{
    InputKind, QuestionInput, QuestionItem, QuestionOutcome, QuestionOutput, TOGGLE_OFF, TOGGLE_ON,
};
use crate::text::to_plain;

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

/// What a settled view shows for an input left empty.
pub const NO_ANSWER_TEXT: &str = "—";

/// The outcome line of a settled question, the same words on every platform: "✅ Answered by X:
/// staging", "⏭️ Skipped by X", "⌛ Expired — default: 3 pods", "⌛ Expired.", "✖️ Cancelled.";
/// a settled approval reads as [`approval_outcome_line`](crate::approval_outcome_line) says.
///
/// `q`: the question the line is under, or `None` for the whole set (its one question's line
/// when it has one; else "header: answer" pairs joined by " · "). `by`: the person as the
/// platform names them (a mention, a display name), put in as given. `escape`: applied to every
/// header and answer (what a person typed or an option's label), so a platform's markup in them
/// shows as text. Nothing is cut: each platform cuts the line to its own limit.
pub fn outcome_line(
    input: &QuestionInput,
    q: Option<usize>,
    outcome: &QuestionOutcome,
    by: Option<&str>,
    escape: fn(&str) -> String,
) -> String {
    let one = q.or((input.questions.len() == 1).then_some(0));
    let item = one.and_then(|q| input.questions.get(q));
    if let Some(line) = item.and_then(|item| crate::approval_outcome_line(item, outcome, by)) {
        return line;
    }
    let answers = |output: &QuestionOutput| match item {
        Some(item) => output
            .answers
            .iter()
            .find(|a| a.header == item.header)
            .or_else(|| one.and_then(|q| output.answers.get(q)))
            .map(|a| escape(&item.answer_text(&a.selected))),
        None => Some(
            output
                .answers
                .iter()
                .map(|a| {
                    let shown = match input.questions.iter().find(|q| q.header == a.header) {
                        Some(item) => item.answer_after_header(&a.selected),
                        None => a.selected.join(", "),
                    };
                    format!("{}: {}", escape(&a.header), escape(&shown))
                })
                .collect::<Vec<_>>()
                .join(" · "),
        ),
    };
    let by_text = by
        .filter(|b| !b.trim().is_empty())
        .map(|b| format!(" by {b}"))
        .unwrap_or_default();
    match (outcome, outcome.output().and_then(answers)) {
        (QuestionOutcome::Answered(_), Some(a)) => format!("✅ Answered{by_text}: {a}"),
        (QuestionOutcome::Answered(_), None) => format!("✅ Answered{by_text}."),
        (QuestionOutcome::Dismissed, _) => format!("⏭️ {}", crate::skipped_text(by)),
        (QuestionOutcome::Expired(_), Some(a)) if item.is_some() => {
            format!("⌛ Expired — default: {a}")
        }
        (QuestionOutcome::Expired(_), Some(a)) => format!("⌛ Expired — defaults used: {a}"),
        (QuestionOutcome::Expired(_), None) => "⌛ Expired.".into(),
        (QuestionOutcome::Cancelled, _) => "✖️ Cancelled.".into(),
    }
}

/// [`open_until_text`] of a set that expires at `expires_at` (RFC 3339) seen at `now`; `None`
/// without an expiry or with one that does not read.
pub fn open_until(expires_at: Option<&str>, now: chrono::DateTime<chrono::Utc>) -> Option<String> {
    let at = chrono::DateTime::parse_from_rfc3339(expires_at?).ok()?;
    Some(open_until_text(at.to_utc(), now))
}

/// The expiry line a card shows while its set is open: "⏳ open until 14:05 UTC"
/// ([`open_until`]).
pub fn expiry_line(expires_at: Option<&str>, now: chrono::DateTime<chrono::Utc>) -> Option<String> {
    open_until(expires_at, now).map(|t| format!("⏳ {t}"))
}

impl QuestionItem {
    /// How an answer reads under this question once settled: a choice's labels (plain text), the
    /// text as typed, a number with its unit ("3 pods"), a toggle its label (else its header) and
    /// the state ("Notify the team — off": words, never a bare mark after "✅"), a confirm its
    /// label; [`NO_ANSWER_TEXT`] for an optional input left empty. Whole: a platform that must
    /// cut the line it goes in cuts it to its own limit.
    pub fn answer_text(&self, selected: &[String]) -> String {
        match (self.kind, selected) {
            (_, []) => NO_ANSWER_TEXT.into(),
            (InputKind::Toggle, [v]) if v == TOGGLE_ON || v == TOGGLE_OFF => {
                let label = self
                    .label
                    .as_deref()
                    .filter(|l| !l.trim().is_empty())
                    .unwrap_or(&self.header);
                format!("{} — {v}", to_plain(label))
            }
            (InputKind::NumberInput, [n]) => {
                match self.unit.as_deref().filter(|u| !u.trim().is_empty()) {
                    Some(unit) => format!("{n} {unit}"),
                    None => n.clone(),
                }
            }
            (InputKind::Choice, _) => selected
                .iter()
                .map(|label| {
                    let plain = to_plain(label);
                    if plain.trim().is_empty() {
                        label.clone()
                    } else {
                        plain
                    }
                })
                .collect::<Vec<_>>()
                .join(", "),
            _ => selected.join(", "),
        }
    }

    /// [`answer_text`](Self::answer_text) as it reads after the question's header ("Notify:
    /// off", not "Notify: Notify — off"): a toggle whose label is its header (or that has none)
    /// shows only its state.
    pub fn answer_after_header(&self, selected: &[String]) -> String {
        let text = self.answer_text(selected);
        match text.strip_prefix(&format!("{} — ", to_plain(&self.header))) {
            Some(state) if self.kind == InputKind::Toggle => state.to_owned(),
            _ => text,
        }
    }

    /// A confirm input's button label ([`CONFIRM_LABEL`] when it names none).
    pub fn confirm_label(&self) -> &str {
        self.label
            .as_deref()
            .filter(|l| !l.trim().is_empty())
            .unwrap_or(CONFIRM_LABEL)
    }

    /// A number input's range as a phrase: " from 1 to 10", " of at least 1", " of at most 10".
    pub fn range_phrase(&self) -> String {
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
    use super::super::tests::{input, kinds, out};
    use super::*;

    #[test]
    fn settled_answers_and_outcome_lines_read_the_same_everywhere() {
        let i = kinds();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(i.questions[2].answer_text(&s(&["4"])), "4 pods");
        assert_eq!(i.questions[3].answer_text(&s(&["off"])), "Notify — off");
        assert_eq!(i.questions[1].answer_text(&[]), NO_ANSWER_TEXT);
        let c = input();
        assert_eq!(c.questions[0].answer_text(&s(&["**prod**"])), "prod");

        let plain = |t: &str| t.to_owned();
        let answered = QuestionOutcome::Answered(out([&["staging"], &["a", "b"], &[]]));
        assert_eq!(
            outcome_line(&c, Some(1), &answered, Some("<@U1>"), plain),
            "✅ Answered by <@U1>: a, b"
        );
        assert_eq!(
            outcome_line(&c, None, &answered, None, |t| format!("[{t}]")),
            "✅ Answered: [Env]: [staging] · [Checks]: [a, b] · [Note]: [—]"
        );
        assert_eq!(i.questions[3].answer_after_header(&s(&["on"])), "on");
        let mut labelled = i.questions[3].clone();
        labelled.label = Some("Tell the team".into());
        assert_eq!(
            labelled.answer_after_header(&s(&["on"])),
            "Tell the team — on"
        );
        let expired = QuestionOutcome::Expired(Some(out([&["prod"], &[], &[]])));
        assert_eq!(
            outcome_line(&c, Some(0), &expired, None, plain),
            "⌛ Expired — default: prod"
        );
        assert!(
            outcome_line(&c, None, &expired, None, plain)
                .starts_with("⌛ Expired — defaults used: Env: prod · ")
        );
        let one = |o: &QuestionOutcome, by| outcome_line(&c, Some(0), o, by, plain);
        assert_eq!(one(&QuestionOutcome::Expired(None), None), "⌛ Expired.");
        assert_eq!(
            one(&QuestionOutcome::Dismissed, Some("Ada")),
            "⏭️ Skipped by Ada"
        );
        assert_eq!(one(&QuestionOutcome::Dismissed, None), "⏭️ Skipped.");
        assert_eq!(one(&QuestionOutcome::Cancelled, None), "✖️ Cancelled.");
    }

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
        let now = t("2026-12-01T10:00:00Z");
        assert_eq!(
            expiry_line(Some("2026-12-01T14:05:00+00:00"), now).as_deref(),
            Some("⏳ open until 14:05 UTC")
        );
        assert_eq!(expiry_line(Some("soon"), now), None);
        assert_eq!(open_until(None, now), None);
    }
}
