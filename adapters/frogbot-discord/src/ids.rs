//! Ids: the question control codec (the `custom_id` of every button, select and text input this
//! adapter draws, carrying the record revision, the question and the option) and Discord's
//! snowflake ids (a FrogBot thread id is a channel id, a question message id a message id).
//!
//! An agent's conversation with a person in their DM channel (which cannot have threads) is the
//! thread `{dm}~{root}` ([`agent_thread_id`]): `root` is the agent's first message in the DM.
//! The separator `~` never occurs in a snowflake, so the DM channel's own thread (`{dm}`, the
//! person's conversation with the model) and each agent conversation in it are different FrogBot
//! chats; [`channel_id`] reads both as the DM channel.
//!
//! A control's `custom_id` is `fq:{revision}:{question}:{what}`: `what` is an option index (a
//! button; for a toggle 0 = on and 1 = off, for a confirm 0 = its button), `s{k}` (the k-th string
//! select, values = option indices), `o` (the "Other…" button), `f` (the "Answer…" button that opens
//! the form of text and number inputs), `n` (the "No answer" button of an optional input), `k`
//! (the "Skip" button, which dismisses the whole call) or `t` (a text input of a modal: the
//! "Other…" text, or a text or number input of the form). At most 47 characters (two `u64`s),
//! within Discord's 100.
//!
//! [`read_control`] reads a click on any of these controls back into FrogBot's shared control
//! vocabulary, [`frogbot_model::QuestionControl`] (the same for every adapter; the wire format
//! above is this adapter's own and stays as it is, for stored questions and live buttons).

use std::num::NonZeroU64;

use frogbot_model::{ActionEvent, ControlAction, EventControl, QuestionControl};
use serenity::model::id::{ChannelId, MessageId, UserId};

use crate::Error;

const PREFIX: &str = "fq";

/// What a question control is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ControlKind {
    /// A button choosing the option with this index.
    Option(usize),
    /// The k-th string select (its values are option indices).
    Select(usize),
    /// The "Other…" button.
    Other,
    /// The "Answer…" button: opens the form (a modal) of the text and number inputs.
    Form,
    /// The "No answer" button of an optional input: answers it with nothing (`selected: []`).
    Clear,
    /// The "Skip" button: dismisses the whole call.
    Skip,
    /// The text input of the "Other…" modal.
    Text,
}

/// A decoded question control id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Control {
    /// The record revision the control was drawn at.
    pub revision: u64,
    /// The question index in the call's input.
    pub question: usize,
    /// What the control is.
    pub kind: ControlKind,
}

impl Control {
    /// The `custom_id` of control `kind` of question `question` at `revision`.
    pub fn id(revision: u64, question: usize, kind: ControlKind) -> String {
        Control {
            revision,
            question,
            kind,
        }
        .encode()
    }

    /// The control's `custom_id`.
    pub fn encode(&self) -> String {
        let what = match self.kind {
            ControlKind::Option(i) => i.to_string(),
            ControlKind::Select(k) => format!("s{k}"),
            ControlKind::Other => "o".into(),
            ControlKind::Form => "f".into(),
            ControlKind::Clear => "n".into(),
            ControlKind::Skip => "k".into(),
            ControlKind::Text => "t".into(),
        };
        format!("{PREFIX}:{}:{}:{what}", self.revision, self.question)
    }

    /// Decodes a `custom_id`; `None` for anything that is not a question control.
    pub fn decode(custom_id: &str) -> Option<Control> {
        let mut parts = custom_id.split(':');
        if parts.next()? != PREFIX {
            return None;
        }
        let revision = parts.next()?.parse().ok()?;
        let question = parts.next()?.parse().ok()?;
        let what = parts.next()?;
        if parts.next().is_some() {
            return None;
        }
        let kind = match what {
            "o" => ControlKind::Other,
            "f" => ControlKind::Form,
            "n" => ControlKind::Clear,
            "k" => ControlKind::Skip,
            "t" => ControlKind::Text,
            s => match s.strip_prefix('s') {
                Some(k) => ControlKind::Select(k.parse().ok()?),
                None => ControlKind::Option(s.parse().ok()?),
            },
        };
        Some(Control {
            revision,
            question,
            kind,
        })
    }
}

impl From<Control> for QuestionControl {
    /// The shared vocabulary's name for a control: an option button is
    /// [`ControlAction::Option`], "Other…" and "Answer…" are [`ControlAction::OpenForm`], a
    /// modal's text input [`ControlAction::Text`]. A select's picks come with the click, not in
    /// its id: read one with [`read_control`] (from the id alone it is an empty
    /// [`ControlAction::Options`]).
    fn from(c: Control) -> Self {
        let action = match c.kind {
            ControlKind::Option(i) => ControlAction::Option(i),
            ControlKind::Select(_) => ControlAction::Options(Vec::new()),
            ControlKind::Other | ControlKind::Form => ControlAction::OpenForm,
            ControlKind::Clear => ControlAction::Clear,
            ControlKind::Skip => ControlAction::Skip,
            ControlKind::Text => ControlAction::Text,
        };
        QuestionControl::new(Some(c.revision), Some(c.question), action)
    }
}

/// Reads a click on a question control ([`crate::convert::action`]'s event: a button's or a
/// string select's `custom_id`, a select's chosen option indices from `raw.data.values`) back
/// into FrogBot's shared [`QuestionControl`]; `None` for any other component (an event button,
/// Stop, another bot's) or a select value that is not an option index.
///
/// ```
/// use frogbot_discord::{ids, render};
/// use frogbot_model::{ActionEvent, ControlAction, PlatformUser, QuestionCall, QuestionOutcome};
///
/// let call: QuestionCall = serde_json::from_value(serde_json::json!({"toolCallId": "c1",
///     "input": {"questions": [{"header": "Pond", "question": "Which pond?",
///         "options": [{"label": "Lily"}, {"label": "Mill"}]}]}}))
/// .unwrap();
/// // The buttons `render` draws carry `custom_id`s; a click on "Mill" sends its id back.
/// let message = serde_json::to_value(render::question_message(&call, 0, 0)).unwrap();
/// let mill = message.pointer("/components/0/components/1/custom_id").unwrap();
/// let click = ActionEvent {
///     action_id: mill.as_str().unwrap().to_owned(),
///     value: None,
///     message_id: "1".into(),
///     user: PlatformUser { id: "7".into(), ..Default::default() },
///     trigger_id: None,
///     raw: serde_json::Value::Null,
/// };
/// let control = ids::read_control(&click).unwrap();
/// assert_eq!(control.action, ControlAction::Option(1));
/// assert!(matches!(control.outcome(&call.input, 0), Some(QuestionOutcome::Answered(_))));
/// ```
pub fn read_control(event: &ActionEvent) -> Option<QuestionControl> {
    let control = Control::decode(&event.action_id)?;
    let mut read = QuestionControl::from(control);
    if let ControlKind::Select(_) = control.kind {
        let values: Vec<&str> = match event.raw.pointer("/data/values") {
            Some(serde_json::Value::Array(values)) => values
                .iter()
                .filter_map(serde_json::Value::as_str)
                .collect(),
            _ => event.value.as_deref().into_iter().collect(),
        };
        let picks = values
            .iter()
            .map(|v| v.parse().ok())
            .collect::<Option<Vec<usize>>>()?;
        read.action = ControlAction::Options(picks);
    }
    Some(read)
}

/// Whether a component `custom_id` is an "Other…" button (open the modal instead of acknowledging).
pub fn is_other(custom_id: &str) -> bool {
    Control::decode(custom_id).is_some_and(|c| c.kind == ControlKind::Other)
}

/// Whether a component `custom_id` opens a modal ("Other…" or "Answer…"): the modal is the
/// click's response, instead of an acknowledgement.
pub fn opens_modal(custom_id: &str) -> bool {
    Control::decode(custom_id)
        .is_some_and(|c| matches!(c.kind, ControlKind::Other | ControlKind::Form))
}

/// A snowflake (a positive 64-bit integer written in decimal).
pub fn snowflake(id: &str) -> Result<NonZeroU64, Error> {
    id.parse::<NonZeroU64>()
        .map_err(|_| Error::BadId(id.to_owned()))
}

/// Parses a FrogBot thread id as a Discord channel id (an agent conversation `{dm}~{root}`: the
/// DM channel).
pub fn channel_id(id: &str) -> Result<ChannelId, Error> {
    if let Some((channel, root)) = id.split_once(AGENT_SEP) {
        snowflake(root)?;
        return snowflake(channel).map(ChannelId::from);
    }
    snowflake(id).map(ChannelId::from)
}

/// The separator of an agent conversation's thread id (`{dm}~{root}`).
pub const AGENT_SEP: char = '~';

/// The thread id of the agent conversation started with message `root` in DM channel `dm`.
pub fn agent_thread_id(dm: ChannelId, root: MessageId) -> String {
    format!("{dm}{AGENT_SEP}{root}")
}

/// The root message of an agent conversation's thread id (`{dm}~{root}`); `None` for a channel
/// or thread id.
pub fn thread_root(id: &str) -> Option<MessageId> {
    let (_, root) = id.split_once(AGENT_SEP)?;
    snowflake(root).ok().map(MessageId::from)
}

/// Parses a question message id as a Discord message id.
pub fn message_id(id: &str) -> Result<MessageId, Error> {
    snowflake(id).map(MessageId::from)
}

/// Parses a user id.
pub fn user_id(id: &str) -> Result<UserId, Error> {
    snowflake(id).map(UserId::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_ids_round_trip() {
        for kind in [
            ControlKind::Option(3),
            ControlKind::Select(1),
            ControlKind::Other,
            ControlKind::Form,
            ControlKind::Clear,
            ControlKind::Skip,
            ControlKind::Text,
        ] {
            let c = Control {
                revision: 12,
                question: 2,
                kind,
            };
            assert_eq!(Control::decode(&c.encode()), Some(c));
        }
        assert_eq!(
            Control::encode(&Control {
                revision: 1,
                question: 0,
                kind: ControlKind::Option(4)
            }),
            "fq:1:0:4"
        );
        assert_eq!(
            Control {
                revision: 3,
                question: 1,
                kind: ControlKind::Skip
            }
            .encode(),
            "fq:3:1:k"
        );
        assert_eq!(
            Control::decode("fq:3:1:k").map(|c| (c.kind, c.revision)),
            Some((ControlKind::Skip, 3))
        );
        assert!(!is_other("fq:3:1:k"));
        assert_eq!(Control::decode("other:1:0:4"), None);
        assert_eq!(Control::decode("fq:1:0"), None);
        assert_eq!(Control::decode("fq:x:0:1"), None);
        assert_eq!(Control::decode("fq:1:0:1:9"), None);
        let longest = Control {
            revision: u64::MAX,
            question: usize::MAX,
            kind: ControlKind::Select(usize::MAX),
        };
        assert!(longest.encode().len() <= 100);
    }

    #[test]
    fn ids_are_snowflakes() {
        assert!(is_other("fq:0:0:o") && !is_other("fq:0:0:1"));
        assert!(opens_modal("fq:0:0:o") && opens_modal("fq:0:0:f"));
        assert!(!opens_modal("fq:0:0:n") && !opens_modal("fq:0:0:k") && !is_other("fq:0:0:f"));
        assert!(matches!(channel_id("0"), Err(Error::BadId(_))));
        assert!(matches!(message_id("x"), Err(Error::BadId(_))));
        assert_eq!(channel_id("42").unwrap().get(), 42);
        assert_eq!(user_id("7").unwrap().get(), 7);
        // An agent conversation in a DM: the DM channel, with its root.
        let agent = agent_thread_id(ChannelId::new(42), MessageId::new(9));
        assert_eq!(agent, "42~9");
        assert_eq!(channel_id(&agent).unwrap().get(), 42);
        assert_eq!(thread_root(&agent), Some(MessageId::new(9)));
        assert_eq!(thread_root("42"), None);
        for bad in ["42~", "~9", "42~x", "42~9~1", "42~0"] {
            assert!(channel_id(bad).is_err(), "{bad}");
        }
    }
}

/// The `nonce` a reply's piece is posted with (`enforce_nonce`: Discord creates one message per
/// nonce and author within a few minutes, a repeat gets the first message back): `fb` and 23 hex
/// digits of the SHA-256 of its piece key (Discord takes at most
/// 25 characters), the same in every process.
pub fn delivery_nonce(piece_key: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(piece_key.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("fb{}", &hex[..23])
}

/// The `nonce` an ask's first message (the root of the thread it starts) is posted with: the
/// [`delivery_nonce`] of `ask:{key}`, `key` being the ask's message id (the same for every retry
/// of one idempotency key), so a retry gets the root an earlier attempt posted.
pub fn ask_nonce(key: &str) -> String {
    delivery_nonce(&format!("ask:{key}"))
}

/// What an event button's `custom_id` starts with: `fe:{block}:{button}` ([`EventControl`]: the
/// block's index among the message's blocks, the button's index on the block; far within
/// Discord's 100 characters). Apart from the question controls (`fq:…`) and the Stop button.
pub const EVENT_PREFIX: &str = "fe:";

/// The `custom_id` of an agent message's event button ([`EVENT_PREFIX`]).
pub fn event_id(control: EventControl) -> String {
    control.write(EVENT_PREFIX, ':')
}

/// The event button a `custom_id` names; `None` for any other id.
pub fn read_event(id: &str) -> Option<EventControl> {
    EventControl::read(id, EVENT_PREFIX, ':')
}

#[cfg(test)]
mod event_tests {
    use super::*;

    #[test]
    fn event_ids_round_trip_and_stay_apart_from_question_controls() {
        let id = event_id(EventControl::new(6, 4));
        assert_eq!(id, "fe:6:4");
        assert_eq!(read_event(&id), Some(EventControl::new(6, 4)));
        assert_eq!(Control::decode(&id), None);
        for bad in [
            "",
            "frogbot-stop",
            "fe:1",
            "fe:1:",
            "fe:x:1",
            "fe:1:2:3",
            "fq:1:2:3",
            "fe:-1:2",
        ] {
            assert_eq!(read_event(bad), None, "{bad}");
        }
        assert!(event_id(EventControl::new(usize::MAX, usize::MAX)).len() <= 100);
    }
}

#[cfg(test)]
mod nonce_tests {
    use super::{ask_nonce, delivery_nonce};

    #[test]
    fn an_ask_nonce_is_stable_and_apart_from_delivery_nonces() {
        assert_eq!(ask_nonce("m1"), ask_nonce("m1"));
        assert_eq!(ask_nonce("m1").len(), 25);
        assert_ne!(ask_nonce("m1"), ask_nonce("m2"));
        assert_ne!(ask_nonce("m1"), delivery_nonce("m1"));
    }

    #[test]
    fn a_delivery_nonce_is_stable_short_and_distinct() {
        let a = delivery_nonce("deliver:chat:m1:0:0");
        assert_eq!(a, delivery_nonce("deliver:chat:m1:0:0"));
        assert_eq!(a.len(), 25);
        assert_ne!(a, delivery_nonce("deliver:chat:m1:0:1"));
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
    }
}

#[cfg(test)]
mod read_back_tests {
    use frogbot_model::{
        ActionEvent, ControlAction, QuestionCall, QuestionControl, QuestionOutcome,
    };
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::{Control, ControlKind, read_control};
    use crate::render;

    fn call(items: Value) -> QuestionCall {
        serde_json::from_value(json!({"toolCallId": "c", "input": {"questions": items}})).unwrap()
    }

    fn click(custom_id: &str, raw: Value) -> ActionEvent {
        ActionEvent {
            action_id: custom_id.to_owned(),
            value: None,
            message_id: "1".into(),
            user: Default::default(),
            trigger_id: None,
            raw,
        }
    }

    /// Every `custom_id` of a rendered message, in order.
    fn custom_ids(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(id)) = m.get("custom_id") {
                    out.push(id.clone());
                }
                m.values().for_each(|v| custom_ids(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| custom_ids(v, out)),
            _ => {}
        }
    }

    fn drawn(call: &QuestionCall, revision: u64) -> Vec<QuestionControl> {
        let message = serde_json::to_value(render::question_message(call, revision, 0)).unwrap();
        let mut ids = Vec::new();
        custom_ids(&message, &mut ids);
        ids.iter()
            .map(|id| read_control(&click(id, Value::Null)).expect(id))
            .collect()
    }

    #[test]
    fn rendered_buttons_read_back_and_settle() {
        let choice = call(json!([{"header": "Pond", "question": "?",
            "options": [{"label": "a"}, {"label": "b"}]}]));
        let controls = drawn(&choice, 4);
        let actions: Vec<_> = controls.iter().map(|c| c.action.clone()).collect();
        assert!(actions.starts_with(&[ControlAction::Option(0), ControlAction::Option(1)]));
        assert!(actions.contains(&ControlAction::Skip), "{actions:?}");
        assert!(
            controls
                .iter()
                .all(|c| c.revision == Some(4) && c.question == Some(0))
        );
        let Some(QuestionOutcome::Answered(out)) = controls[1].outcome(&choice.input, 4) else {
            panic!("an answer");
        };
        assert_eq!(out.answers[0].selected, ["b"]);

        let toggle = call(json!([{"header": "T", "question": "?", "kind": "toggle"}]));
        let controls = drawn(&toggle, 0);
        let on = controls[0].outcome(&toggle.input, 0);
        assert!(
            matches!(&on, Some(QuestionOutcome::Answered(o)) if o.answers[0].selected == ["on"]),
            "{on:?}"
        );
    }

    #[test]
    fn a_select_reads_its_picks_from_the_click() {
        let multiple = call(json!([{"header": "M", "question": "?", "multiple": true,
            "options": [{"label": "a"}, {"label": "b"}, {"label": "c"}]}]));
        let message = serde_json::to_value(render::question_message(&multiple, 2, 0)).unwrap();
        let mut ids = Vec::new();
        custom_ids(&message, &mut ids);
        let select = ids
            .iter()
            .find(|id| matches!(Control::decode(id), Some(c) if matches!(c.kind, ControlKind::Select(_))))
            .expect("a select");
        let picked = read_control(&click(select, json!({"data": {"values": ["2", "0"]}}))).unwrap();
        assert_eq!(picked.action, ControlAction::Options(vec![2, 0]));
        let Some(QuestionOutcome::Answered(out)) = picked.outcome(&multiple.input, 2) else {
            panic!("an answer");
        };
        assert_eq!(out.answers[0].selected, ["c", "a"]);
        assert_eq!(
            read_control(&click(select, json!({"data": {"values": ["x"]}}))),
            None
        );
        assert_eq!(read_control(&click("fe:1:2", Value::Null)), None);
    }

    fn kind() -> impl Strategy<Value = ControlKind> {
        prop_oneof![
            any::<usize>().prop_map(ControlKind::Option),
            any::<usize>().prop_map(ControlKind::Select),
            Just(ControlKind::Other),
            Just(ControlKind::Form),
            Just(ControlKind::Clear),
            Just(ControlKind::Skip),
            Just(ControlKind::Text),
        ]
    }

    proptest! {
        #[test]
        fn every_control_id_reads_back(revision in any::<u64>(), question in any::<usize>(), kind in kind()) {
            let control = Control { revision, question, kind };
            let read = read_control(&click(&control.encode(), json!({"data": {"values": []}}))).unwrap();
            prop_assert_eq!(read.revision, Some(revision));
            prop_assert_eq!(read.question, Some(question));
            prop_assert_eq!(read, QuestionControl::from(control));
        }
    }
}
