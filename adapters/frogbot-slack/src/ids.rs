//! The control id codec and Slack's message / thread ids.
//!
//! Control ids (`action_id`s) are `fb1:{kind}:{question}:{option}:{revision}` (see [`ActionRef`];
//! the Skip button is `fb1:k:0:-:{revision}`, a confirm input's button `fb1:y:{question}:-:{revision}`),
//! so a click on controls drawn for an older revision of the record is recognisably stale; the
//! modal's inputs are `fb1:m:{question}:pick|text`; an agent message's event buttons are
//! `fb1:e:{block}:{button}` ([`event_action_id`]). A Slack message is `"{channel}:{ts}"`, a
//! thread `"{channel}:{thread_ts}"` (the thread's root ts, or the message's own ts when it starts
//! a thread).

use serde::{Deserialize, Serialize};

use crate::Error;

const PREFIX: &str = "fb1";

/// The modal's callback id.
pub const MODAL_CALLBACK_ID: &str = "fb1:questions";

/// What a control does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ActionKind {
    /// A single-choice button (`option` set).
    Choose,
    /// A single-choice static select (the option comes in the value).
    Select,
    /// A checkbox group or multi-select changed (the options come in the value).
    Toggle,
    /// Submit the checked options of a `multiple` question.
    Submit,
    /// Open the modal ("Other…" / "Answer…").
    Other,
    /// Skip: dismiss the whole call (set-wide: `question` 0, no option).
    Skip,
    /// A `confirm` input's button (answers it with its label).
    Confirm,
}

impl ActionKind {
    fn code(self) -> &'static str {
        match self {
            ActionKind::Choose => "b",
            ActionKind::Select => "s",
            ActionKind::Toggle => "c",
            ActionKind::Submit => "u",
            ActionKind::Other => "o",
            ActionKind::Skip => "k",
            ActionKind::Confirm => "y",
        }
    }

    fn from_code(code: &str) -> Option<Self> {
        Some(match code {
            "b" => ActionKind::Choose,
            "s" => ActionKind::Select,
            "c" => ActionKind::Toggle,
            "u" => ActionKind::Submit,
            "o" => ActionKind::Other,
            "k" => ActionKind::Skip,
            "y" => ActionKind::Confirm,
            _ => return None,
        })
    }
}

/// A decoded control id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionRef {
    /// What the control does.
    pub kind: ActionKind,
    /// The question index (0 for a set-wide control).
    pub question: usize,
    /// The option index, for a button.
    pub option: Option<usize>,
    /// The record revision the control was drawn for.
    pub revision: u64,
}

impl ActionRef {
    /// Encodes the control id (`fb1:{kind}:{question}:{option|-}:{revision}`, well under 255 chars).
    pub fn encode(&self) -> String {
        let opt = self
            .option
            .map_or_else(|| "-".to_string(), |o| o.to_string());
        format!(
            "{PREFIX}:{}:{}:{opt}:{}",
            self.kind.code(),
            self.question,
            self.revision
        )
    }

    /// Decodes a control id; `None` when it is not one of ours.
    pub fn decode(id: &str) -> Option<Self> {
        let mut parts = id.split(':');
        if parts.next()? != PREFIX {
            return None;
        }
        let kind = ActionKind::from_code(parts.next()?)?;
        let question = parts.next()?.parse().ok()?;
        let option = match parts.next()? {
            "-" => None,
            o => Some(o.parse().ok()?),
        };
        let revision = parts.next()?.parse().ok()?;
        if parts.next().is_some() {
            return None;
        }
        Some(ActionRef {
            kind,
            question,
            option,
            revision,
        })
    }
}

/// The input ids of the modal: `fb1:m:{question}:pick` (a choice's options; a toggle's or a
/// confirm's one checkbox) and `fb1:m:{question}:text` (a choice's own text; a `text_input`'s
/// `plain_text_input`; a `number_input`'s `number_input`).
pub fn modal_input_id(question: usize, text: bool) -> String {
    format!(
        "{PREFIX}:m:{question}:{}",
        if text { "text" } else { "pick" }
    )
}

/// The `action_id` of an event button: `fb1:e:{block}:{button}` (the block's index among the
/// agent message's blocks, the button's index on the block). Distinct from every question
/// control (`fb1:{kind}:…` has five parts and no kind `e`) and from the Stop button.
pub fn event_action_id(block: usize, button: usize) -> String {
    format!("{PREFIX}:e:{block}:{button}")
}

/// The block and button indexes of an event button's `action_id`; `None` for any other id.
pub fn decode_event_action_id(id: &str) -> Option<(usize, usize)> {
    let rest = id.strip_prefix(PREFIX)?.strip_prefix(":e:")?;
    let (block, button) = rest.split_once(':')?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 6 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(block) || !digits(button) {
        return None;
    }
    Some((block.parse().ok()?, button.parse().ok()?))
}

/// The FrogBot id of a Slack message: `channel:ts`.
pub fn message_id(channel: &str, ts: &str) -> String {
    format!("{channel}:{ts}")
}

/// The FrogBot thread id of a Slack thread: `channel:thread_ts`.
pub fn thread_id(channel: &str, thread_ts: &str) -> String {
    format!("{channel}:{thread_ts}")
}

/// Splits a `channel:ts` id (message or thread) into its parts.
pub fn split_id(id: &str) -> Result<(&str, &str), Error> {
    match id.split_once(':') {
        Some((c, t)) if !c.is_empty() && !t.is_empty() => Ok((c, t)),
        _ => Err(Error::BadId(id.to_string())),
    }
}

/// Whether `id` looks like a Slack id with one of the `prefixes`: the prefix letter, then
/// upper-case letters and digits (`U0123ABCD`), at most 32 characters in all.
fn slack_id(id: &str, prefixes: &[char]) -> bool {
    let mut chars = id.chars();
    chars.next().is_some_and(|c| prefixes.contains(&c))
        && (2..=32).contains(&id.len())
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// Checks that `user` is a Slack user id (`U…`, or `W…` in an Enterprise Grid).
pub fn check_user_id(user: &str) -> Result<(), Error> {
    if slack_id(user, &['U', 'W']) {
        Ok(())
    } else {
        Err(Error::BadTarget(format!(
            "not a Slack user id: {user:?} (a user id is U… or W…, e.g. U0123ABCD)"
        )))
    }
}

/// Checks that `channel` is a Slack conversation id (`C…`, `G…` or `D…`; not a `#name`).
pub fn check_channel_id(channel: &str) -> Result<(), Error> {
    if slack_id(channel, &['C', 'G', 'D']) {
        Ok(())
    } else {
        Err(Error::BadTarget(format!(
            "not a Slack channel id: {channel:?} (a channel id is C…, G… or D…, e.g. C0123ABCD)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert_eq!(message_id("C1", "1.2"), "C1:1.2");
        assert_eq!(split_id("C1:17.5").unwrap(), ("C1", "17.5"));
        assert!(split_id("nocolon").is_err());
        for ok in ["U0123ABCD", "W0123ABCD", "U1A", "U7"] {
            check_user_id(ok).unwrap();
        }
        for bad in [
            "",
            "U",
            "u0123abcd",
            "C0123ABCD",
            "@ana",
            "U01 23",
            "U0123:AB",
        ] {
            assert!(check_user_id(bad).is_err(), "{bad}");
        }
        for ok in ["C0123ABCD", "G0123ABCD", "D0123ABCD"] {
            check_channel_id(ok).unwrap();
        }
        for bad in ["", "#general", "general", "U0123ABCD", "C0123abcd"] {
            assert!(check_channel_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn action_ids_round_trip_and_reject_foreign_ids() {
        let a = ActionRef {
            kind: ActionKind::Choose,
            question: 3,
            option: Some(4),
            revision: 17,
        };
        assert_eq!(a.encode(), "fb1:b:3:4:17");
        assert_eq!(ActionRef::decode(&a.encode()), Some(a));
        let s = ActionRef {
            kind: ActionKind::Submit,
            question: 0,
            option: None,
            revision: 0,
        };
        assert_eq!(ActionRef::decode(&s.encode()), Some(s));
        for bad in [
            "",
            "approve",
            "fb1:x:0:-:0",
            "fb1:b:0:-",
            "fb1:b:0:-:0:9",
            "fb2:b:0:1:0",
        ] {
            assert_eq!(ActionRef::decode(bad), None, "{bad}");
        }
        assert!(a.encode().len() <= 255);
    }

    #[test]
    fn event_button_ids_round_trip_and_stay_apart_from_question_controls() {
        let id = event_action_id(6, 4);
        assert_eq!(id, "fb1:e:6:4");
        assert_eq!(decode_event_action_id(&id), Some((6, 4)));
        assert_eq!(ActionRef::decode(&id), None);
        for bad in [
            "",
            "frogbot-stop",
            "fb1:e:1",
            "fb1:e:1:",
            "fb1:e:x:1",
            "fb1:e:1:2:3",
            "fb1:b:3:4:17",
            "fb2:e:1:2",
            "fb1:e:-1:2",
        ] {
            assert_eq!(decode_event_action_id(bad), None, "{bad}");
        }
        assert!(event_action_id(19, 4).len() <= 255);
    }

    #[test]
    fn the_skip_id_carries_the_revision() {
        let skip = ActionRef {
            kind: ActionKind::Skip,
            question: 0,
            option: None,
            revision: 4,
        };
        assert_eq!(skip.encode(), "fb1:k:0:-:4");
        assert_eq!(ActionRef::decode("fb1:k:0:-:4"), Some(skip));
        assert_eq!(ActionRef::decode("fb1:k:0:-"), None);
        let worst = ActionRef {
            revision: u64::MAX,
            ..skip
        };
        assert!(worst.encode().len() <= 255);
    }
}
