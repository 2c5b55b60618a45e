//! Approvals: a tool call that waits for a person's yes before it runs. The call is asked as a
//! question (one choice, [`APPROVE_LABEL`] / [`DENY_LABEL`], own text for a reason to deny), so
//! every channel draws it with its question hooks and every rule of questions holds (first
//! answer wins, `from` access, expiry, restarts). The decision is kept on the call's tool part
//! ([`ToolApproval`], the AI SDK's `approval` object) and in its message's metadata.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::question::{QuestionInput, QuestionItem, QuestionOption, QuestionOutcome};
use crate::text::truncate;

/// The option that approves a call.
pub const APPROVE_LABEL: &str = "Approve";
/// The option that denies a call (own text denies it with that text as the reason).
pub const DENY_LABEL: &str = "Deny";
/// The header of an approval's one question.
pub const APPROVAL_HEADER: &str = "Approval";
/// The longest argument value (in characters) shown whole in an approval's summary.
pub const SUMMARY_VALUE_MAX: usize = 200;
/// The longest argument summary (in characters) an approval shows.
pub const SUMMARY_MAX: usize = 1_500;

/// A call's approval: `{"id", "approved"?, "reason"?, "by"?, "at"?, "descriptor"?}` — the AI SDK's
/// tool part `approval` object, with who decided and when. While it is requested, `descriptor`
/// holds the question put to the approvers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolApproval {
    /// The approval's id (the call's id: the question record is keyed by it).
    pub id: String,
    /// Once decided: whether the call may run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
    /// Why it was denied (the person's text, or expired / withdrawn / skipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who decided: their FrogBot user id, else their `platform:user` identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// When it was decided (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The question put to the approvers (a [`QuestionInput`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptor: Option<Value>,
}

impl ToolApproval {
    /// The question this approval asks, read back from `descriptor`.
    pub fn question(&self) -> Option<QuestionInput> {
        self.descriptor
            .as_ref()
            .and_then(|d| serde_json::from_value(d.clone()).ok())
    }
}

/// The reason given when an approval expired unanswered.
pub const APPROVAL_EXPIRED_REASON: &str = "the approval expired";
/// The reason given when an approval was withdrawn.
pub const APPROVAL_WITHDRAWN_REASON: &str = "the approval was withdrawn";
/// The reason given when an approver skipped the question.
pub const APPROVAL_SKIPPED_REASON: &str = "skipped";

/// The question that asks `approvers` (empty: whoever may answer in the chat) to approve a call
/// of `tool` with `input`, open `expires_in_seconds` when given.
pub fn approval_question(
    tool: &str,
    input: &Value,
    approvers: &[String],
    expires_in_seconds: Option<u64>,
) -> QuestionInput {
    let question = format!(
        "Run `{tool}`?\n```json\n{}\n```\n{APPROVE_LABEL} runs it; {DENY_LABEL} refuses it — or write a reason to refuse it with that reason.",
        summarize_arguments(input)
    );
    QuestionInput {
        questions: vec![QuestionItem {
            header: APPROVAL_HEADER.into(),
            question,
            options: vec![
                QuestionOption {
                    label: APPROVE_LABEL.into(),
                    description: Some(format!("Run {tool} with these arguments")),
                },
                QuestionOption {
                    label: DENY_LABEL.into(),
                    description: Some("Do not run it".into()),
                },
            ],
            custom: true,
            ..QuestionItem::default()
        }],
        expires_in_seconds,
        from: approvers.to_vec(),
    }
}

/// A call's arguments as people read them: JSON pretty-printed, string values longer than
/// [`SUMMARY_VALUE_MAX`] characters shortened, the whole cut to [`SUMMARY_MAX`].
pub fn summarize_arguments(input: &Value) -> String {
    fn shorten(v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(truncate(s, SUMMARY_VALUE_MAX)),
            Value::Array(a) => Value::Array(a.iter().map(shorten).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| (truncate(k, SUMMARY_VALUE_MAX), shorten(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    let pretty =
        serde_json::to_string_pretty(&shorten(input)).unwrap_or_else(|_| input.to_string());
    // The summary sits inside a fenced block: a fence in a value must not close it.
    let pretty = pretty.replace("```", "`\u{200b}``");
    truncate(&pretty, SUMMARY_MAX)
}

/// What an approval's outcome decides: `(approved, reason)`. An answer of [`APPROVE_LABEL`]
/// approves; [`DENY_LABEL`] denies; own text denies with it as the reason; a skip, an expiry or
/// a withdrawal denies.
pub fn approval_decision(outcome: &QuestionOutcome) -> (bool, Option<String>) {
    match outcome {
        QuestionOutcome::Answered(output) => {
            let pick = output
                .answers
                .first()
                .and_then(|a| a.selected.first())
                .map(|s| s.trim());
            match pick {
                Some(APPROVE_LABEL) => (true, None),
                Some(DENY_LABEL) | None | Some("") => (false, None),
                Some(text) => (false, Some(text.to_string())),
            }
        }
        QuestionOutcome::Dismissed => (false, Some(APPROVAL_SKIPPED_REASON.into())),
        QuestionOutcome::Expired(_) => (false, Some(APPROVAL_EXPIRED_REASON.into())),
        QuestionOutcome::Cancelled => (false, Some(APPROVAL_WITHDRAWN_REASON.into())),
    }
}

/// How an approval names who decided: their FrogBot user id, else their `platform:user`
/// channel identity.
pub fn decided_by(actor: &crate::Actor) -> Option<String> {
    actor
        .user
        .as_ref()
        .map(|u| u.as_str().to_owned())
        .or_else(|| {
            actor
                .identity
                .as_ref()
                .map(|i| format!("{}:{}", i.platform, i.user.id))
        })
}

/// The error result a denied call gives the model.
pub fn denied_text(approval: &ToolApproval) -> String {
    let mut s = String::from("A person denied this call; it did not run");
    if let Some(by) = &approval.by {
        s.push_str(&format!(" (denied by {by})"));
    }
    match &approval.reason {
        Some(r) => s.push_str(&format!(". Reason: {r}")),
        None => s.push('.'),
    }
    s
}

/// Whether `item` is an approval's question (as [`approval_question`] makes it: the header
/// [`APPROVAL_HEADER`], the options [`APPROVE_LABEL`] and [`DENY_LABEL`], own text allowed).
pub fn is_approval(item: &QuestionItem) -> bool {
    item.header == APPROVAL_HEADER
        && item.custom
        && item.options.len() == 2
        && item.options[0].label == APPROVE_LABEL
        && item.options[1].label == DENY_LABEL
}

/// The most characters of a denial's reason a settled approval shows.
pub const SHOWN_REASON_MAX: usize = 500;

/// How a settled approval reads on every platform, instead of the generic "Answered" line of a
/// question: "✅ Approved by X", "🚫 Denied by X", "🚫 Denied by X: reason" (own text, or
/// "skipped"), "⌛ Expired — not run", "✖️ Withdrawn — not run". `by`: the person as the platform
/// names them. `None` when `item` is not an approval ([`is_approval`]).
pub fn approval_outcome_line(
    item: &QuestionItem,
    outcome: &QuestionOutcome,
    by: Option<&str>,
) -> Option<String> {
    if !is_approval(item) {
        return None;
    }
    let by = by
        .filter(|b| !b.trim().is_empty())
        .map(|b| format!(" by {b}"))
        .unwrap_or_default();
    Some(match outcome {
        QuestionOutcome::Expired(_) => "⌛ Expired — not run".to_owned(),
        QuestionOutcome::Cancelled => "✖️ Withdrawn — not run".to_owned(),
        other => match approval_decision(other) {
            (true, _) => format!("✅ Approved{by}"),
            (false, None) => format!("🚫 Denied{by}"),
            (false, Some(reason)) => {
                format!("🚫 Denied{by}: {}", truncate(&reason, SHOWN_REASON_MAX))
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::{QuestionAnswer, QuestionOutput};
    use serde_json::json;

    fn answered(pick: &str) -> QuestionOutcome {
        QuestionOutcome::Answered(QuestionOutput {
            answers: vec![QuestionAnswer {
                header: APPROVAL_HEADER.into(),
                selected: vec![pick.into()],
            }],
        })
    }

    #[test]
    fn the_question_is_valid_and_shows_the_arguments() {
        let q = approval_question(
            "gh__merge",
            &json!({"pr": 7, "title": "x".repeat(500)}),
            &["alice".into()],
            Some(60),
        );
        q.validate().unwrap();
        let text = &q.questions[0].question;
        assert!(text.contains("gh__merge"), "{text}");
        assert!(text.contains("\"pr\": 7"), "{text}");
        assert!(
            text.contains('…') && !text.contains(&"x".repeat(201)),
            "{text}"
        );
        assert_eq!(q.from, vec!["alice".to_string()]);
        assert_eq!(q.expires_in_seconds, Some(60));
        // Round trip through the descriptor.
        let a = ToolApproval {
            id: "c1".into(),
            descriptor: Some(serde_json::to_value(&q).unwrap()),
            ..Default::default()
        };
        assert_eq!(a.question(), Some(q));
    }

    #[test]
    fn huge_arguments_are_cut_and_fences_cannot_close_the_block() {
        let big: Vec<Value> = (0..10_000).map(|i| json!({"n": i})).collect();
        let s = summarize_arguments(&json!({"items": big, "x": "a```b"}));
        assert!(s.chars().count() <= SUMMARY_MAX);
        assert!(!s.contains("a```b"));
    }

    #[test]
    fn decisions() {
        assert_eq!(approval_decision(&answered("Approve")), (true, None));
        assert_eq!(approval_decision(&answered("Deny")), (false, None));
        assert_eq!(
            approval_decision(&answered("not on a Friday")),
            (false, Some("not on a Friday".into()))
        );
        assert_eq!(
            approval_decision(&QuestionOutcome::Expired(None)),
            (false, Some(APPROVAL_EXPIRED_REASON.into()))
        );
        assert!(!approval_decision(&QuestionOutcome::Dismissed).0);
        assert!(!approval_decision(&QuestionOutcome::Cancelled).0);
    }

    #[test]
    fn a_settled_approval_says_approved_or_denied() {
        let q = approval_question("deploy", &json!({}), &[], None);
        let item = &q.questions[0];
        assert!(is_approval(item));
        let line = |o: &QuestionOutcome, by| approval_outcome_line(item, o, by).unwrap();
        assert_eq!(
            line(&answered("Approve"), Some("<@U1>")),
            "✅ Approved by <@U1>"
        );
        assert_eq!(line(&answered("Deny"), Some("ada")), "🚫 Denied by ada");
        assert_eq!(
            line(&answered("not during the freeze"), Some("ada")),
            "🚫 Denied by ada: not during the freeze"
        );
        assert_eq!(
            line(&QuestionOutcome::Dismissed, None),
            "🚫 Denied: skipped"
        );
        assert_eq!(
            line(&QuestionOutcome::Expired(None), None),
            "⌛ Expired — not run"
        );
        assert_eq!(
            line(&QuestionOutcome::Cancelled, None),
            "✖️ Withdrawn — not run"
        );
        let long = line(&answered(&"x".repeat(5_000)), None);
        assert!(long.chars().count() <= SHOWN_REASON_MAX + 20, "{long}");
        // Any other question, even one headed "Approval", keeps the generic line.
        let mut other = item.clone();
        other.options[1].label = "Later".into();
        assert!(!is_approval(&other));
        assert_eq!(
            approval_outcome_line(&other, &answered("Approve"), None),
            None
        );
    }

    #[test]
    fn denied_text_names_who_and_why() {
        let a = ToolApproval {
            id: "c".into(),
            approved: Some(false),
            reason: Some("too risky".into()),
            by: Some("slack:U1".into()),
            ..Default::default()
        };
        assert_eq!(
            denied_text(&a),
            "A person denied this call; it did not run (denied by slack:U1). Reason: too risky"
        );
    }
}
