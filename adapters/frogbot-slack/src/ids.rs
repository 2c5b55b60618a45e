//! The control id codec and Slack's message / thread ids.
//!
//! Control ids (`action_id`s) are `fb1:{kind}:{question}:{option}:{revision}` (see [`ActionRef`];
//! the Skip button is `fb1:k:0:-:{revision}`, a confirm input's button `fb1:y:{question}:-:{revision}`),
//! so a click on controls drawn for an older revision of the record is recognisably stale; the
//! modal's inputs are `fb1:m:{question}:pick|text`; an agent message's event buttons are
//! `fb1:e:{block}:{button}` ([`event_id`]). A Slack message is `"{channel}:{ts}"`, a
//! thread `"{channel}:{thread_ts}"` (the thread's root ts, or the message's own ts when it starts
//! a thread).
//!
//! [`read_control`] reads a click on any of these controls back into FrogBot's shared control
//! vocabulary, [`frogbot_model::QuestionControl`] (the same for every adapter; the wire format
//! above is this adapter's own and stays as it is, for stored questions and live buttons).

use frogbot_model::{ActionEvent, ControlAction, EventControl, QuestionControl};
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

/// Each kind's code in a control id, in the order of [`ActionKind`]'s variants.
const CODES: [(ActionKind, &str); 7] = [
    (ActionKind::Choose, "b"),
    (ActionKind::Select, "s"),
    (ActionKind::Toggle, "c"),
    (ActionKind::Submit, "u"),
    (ActionKind::Other, "o"),
    (ActionKind::Skip, "k"),
    (ActionKind::Confirm, "y"),
];

impl ActionKind {
    fn code(self) -> &'static str {
        CODES[self as usize].1
    }

    fn from_code(code: &str) -> Option<Self> {
        CODES.iter().find(|(_, c)| *c == code).map(|&(k, _)| k)
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
    /// The control of `kind` for `question` (`option`: a button's) drawn at `revision`.
    pub fn new(kind: ActionKind, question: usize, option: Option<usize>, revision: u64) -> Self {
        Self {
            kind,
            question,
            option,
            revision,
        }
    }

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
        Some(ActionRef::new(kind, question, option, revision))
    }
}

/// Reads a click on a question control ([`crate::convert::interaction_from_payload`]'s
/// `block_actions` event: its `action_id`, and its `value` — a select's chosen option, a checkbox
/// group's checked options joined by `,`) back into FrogBot's shared [`QuestionControl`]: a
/// button is [`ControlAction::Option`], a single select too (its option comes in the value), a
/// checkbox group's change [`ControlAction::Check`], Submit [`ControlAction::Submit`], "Other…" /
/// "Answer…" [`ControlAction::OpenForm`], a confirm's button [`ControlAction::Yes`], Skip
/// [`ControlAction::Skip`] (set-wide: question 0). `None` for any other action id (an event
/// button, Stop, another app's) or a value that is not an option index.
///
/// ```
/// use frogbot_model::{ActionEvent, ControlAction, Progress, QuestionInput, QuestionOutcome};
/// use frogbot_slack::{ids, render};
///
/// let input: QuestionInput = serde_json::from_value(serde_json::json!({"questions": [{
///     "header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]
/// }]}))
/// .unwrap();
/// let blocks = render::question_blocks_for(&input, 0, &Progress::from_state(&input, None));
/// // The second button of the question's actions block: "prod".
/// let blocks = serde_json::to_value(&blocks).unwrap();
/// let prod = blocks.pointer("/1/elements/1/action_id").unwrap().as_str().unwrap();
/// let click = ActionEvent {
///     action_id: prod.to_owned(),
///     value: Some("1".into()),
///     message_id: "C1:1.2".into(),
///     user: Default::default(),
///     trigger_id: None,
///     raw: serde_json::Value::Null,
/// };
/// let control = ids::read_control(&click).unwrap();
/// assert_eq!(control.action, ControlAction::Option(1));
/// assert!(matches!(control.outcome(&input, 0), Some(QuestionOutcome::Answered(_))));
/// ```
pub fn read_control(event: &ActionEvent) -> Option<QuestionControl> {
    let a = ActionRef::decode(&event.action_id)?;
    let value = event.value.as_deref();
    let action = match a.kind {
        ActionKind::Choose | ActionKind::Select => {
            ControlAction::Option(a.option.or_else(|| value?.parse().ok())?)
        }
        ActionKind::Toggle => ControlAction::Check(match value {
            None | Some("") => Vec::new(),
            Some(v) => v
                .split(',')
                .map(|s| s.trim().parse().ok())
                .collect::<Option<_>>()?,
        }),
        ActionKind::Submit => ControlAction::Submit,
        ActionKind::Other => ControlAction::OpenForm,
        ActionKind::Skip => ControlAction::Skip,
        ActionKind::Confirm => ControlAction::Yes,
    };
    Some(QuestionControl::new(
        Some(a.revision),
        Some(a.question),
        action,
    ))
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

/// What an event button's `action_id` starts with: `fb1:e:{block}:{button}` ([`EventControl`]:
/// the block's index among the agent message's blocks, the button's index on the block).
/// Distinct from every question control (`fb1:{kind}:…` has five parts and no kind `e`) and from
/// the Stop button.
pub const EVENT_PREFIX: &str = "fb1:e:";

/// The `action_id` of an event button ([`EVENT_PREFIX`]).
pub fn event_id(control: EventControl) -> String {
    control.write(EVENT_PREFIX, ':')
}

/// The event button an `action_id` names; `None` for any other id.
pub fn read_event(id: &str) -> Option<EventControl> {
    EventControl::read(id, EVENT_PREFIX, ':')
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
        let id = event_id(EventControl::new(6, 4));
        assert_eq!(id, "fb1:e:6:4");
        assert_eq!(read_event(&id), Some(EventControl::new(6, 4)));
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
            assert_eq!(read_event(bad), None, "{bad}");
        }
        assert!(event_id(EventControl::new(usize::MAX, usize::MAX)).len() <= 255);
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

#[cfg(test)]
mod read_back_tests {
    use frogbot_model::{
        ActionEvent, ControlAction, Progress, QuestionControl, QuestionInput, QuestionOutcome,
    };
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::{ActionKind, ActionRef, read_control};
    use crate::render;

    fn input(items: Value) -> QuestionInput {
        serde_json::from_value(json!({ "questions": items })).unwrap()
    }

    fn click(action_id: &str, value: Option<&str>) -> ActionEvent {
        ActionEvent {
            action_id: action_id.to_owned(),
            value: value.map(str::to_owned),
            message_id: "C1:1.2".into(),
            user: Default::default(),
            trigger_id: None,
            raw: Value::Null,
        }
    }

    /// Every (action_id, value) of the rendered blocks, in order.
    fn controls(v: &Value, out: &mut Vec<(String, Option<String>)>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(id)) = m.get("action_id") {
                    out.push((
                        id.clone(),
                        m.get("value").and_then(Value::as_str).map(str::to_owned),
                    ));
                }
                m.values().for_each(|v| controls(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| controls(v, out)),
            _ => {}
        }
    }

    fn drawn(input: &QuestionInput, revision: u64) -> Vec<QuestionControl> {
        let blocks =
            render::question_blocks_for(input, revision, &Progress::from_state(input, None));
        let mut found = Vec::new();
        controls(&serde_json::to_value(&blocks).unwrap(), &mut found);
        found
            .iter()
            .map(|(id, value)| read_control(&click(id, value.as_deref())).expect(id))
            .collect()
    }

    #[test]
    fn rendered_controls_read_back_and_settle() {
        let choice = input(json!([{"header": "Env", "question": "?",
            "options": [{"label": "staging"}, {"label": "prod"}]}]));
        let read = drawn(&choice, 3);
        let actions: Vec<_> = read.iter().map(|c| c.action.clone()).collect();
        assert_eq!(
            actions,
            [
                ControlAction::Option(0),
                ControlAction::Option(1),
                ControlAction::Skip
            ]
        );
        assert!(read.iter().all(|c| c.revision == Some(3)));
        let Some(QuestionOutcome::Answered(out)) = read[1].outcome(&choice, 3) else {
            panic!("an answer");
        };
        assert_eq!(out.answers[0].selected, ["prod"]);
        assert_eq!(
            read[2].outcome(&choice, 3),
            Some(QuestionOutcome::Dismissed)
        );

        let confirm = input(json!([{"header": "Go", "question": "?", "kind": "confirm",
            "label": "Ship"}]));
        let read = drawn(&confirm, 0);
        assert_eq!(read[0].action, ControlAction::Yes);
        let Some(QuestionOutcome::Answered(out)) = read[0].outcome(&confirm, 0) else {
            panic!("an answer");
        };
        assert_eq!(out.answers[0].selected, ["Ship"]);
    }

    #[test]
    fn checkboxes_and_selects_read_their_values() {
        let multiple = input(json!([{"header": "M", "question": "?", "multiple": true,
            "options": [{"label": "a"}, {"label": "b"}]}]));
        let read = drawn(&multiple, 1);
        assert!(
            read.iter().any(|c| c.action == ControlAction::Submit),
            "{read:?}"
        );
        let toggle = ActionRef {
            kind: ActionKind::Toggle,
            question: 0,
            option: None,
            revision: 1,
        };
        assert_eq!(
            read_control(&click(&toggle.encode(), Some("0,1")))
                .unwrap()
                .action,
            ControlAction::Check(vec![0, 1])
        );
        assert_eq!(read_control(&click(&toggle.encode(), Some("x"))), None);
        let select = ActionRef {
            kind: ActionKind::Select,
            question: 0,
            option: None,
            revision: 1,
        };
        assert_eq!(
            read_control(&click(&select.encode(), Some("1")))
                .unwrap()
                .action,
            ControlAction::Option(1)
        );
        assert_eq!(read_control(&click(&select.encode(), None)), None);
        assert_eq!(read_control(&click("fb1:e:1:2", None)), None);
    }

    fn kind() -> impl Strategy<Value = ActionKind> {
        prop_oneof![
            Just(ActionKind::Choose),
            Just(ActionKind::Submit),
            Just(ActionKind::Other),
            Just(ActionKind::Skip),
            Just(ActionKind::Confirm),
        ]
    }

    proptest! {
        #[test]
        fn every_action_id_reads_back(
            revision in any::<u64>(), question in any::<usize>(), option in any::<usize>(), kind in kind()
        ) {
            let option = (kind == ActionKind::Choose).then_some(option);
            let a = ActionRef { kind, question, option, revision };
            let read = read_control(&click(&a.encode(), None)).unwrap();
            prop_assert_eq!(read.revision, Some(revision));
            prop_assert_eq!(read.question, Some(question));
            if let Some(o) = option {
                prop_assert_eq!(read.action, ControlAction::Option(o));
            }
        }
    }
}
