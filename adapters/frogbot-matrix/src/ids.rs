//! Ids: the `room_id|event_id` message and thread ids FrogBot keeps, and the control codec — poll
//! answer ids carrying the question set's revision (`r{revision}o{option}`), the action ids of
//! poll responses and reactions, the keycap reactions naming an option, and the ✅ / ❌ reactions
//! answering a toggle or a confirm.
//!
//! [`read_control`] reads a click on any of these controls back into FrogBot's shared control
//! vocabulary, [`frogbot_model::QuestionControl`] (the same for every adapter; the wire format
//! above is this adapter's own and stays as it is, for stored questions and live buttons).

use frogbot_model::{
    ActionEvent, ControlAction, EventControl, InputKind, QuestionControl, QuestionItem, TOGGLE_OFF,
    TOGGLE_ON,
};
use matrix_sdk::ruma::{EventId, OwnedEventId, OwnedRoomId, RoomId};

use crate::Error;

/// The action id of a poll response.
pub const POLL_ACTION: &str = "poll";
/// The action id of a reaction.
pub const REACTION_ACTION: &str = "reaction";

/// Keycaps for reacting to options 1–10.
pub const KEYCAPS: [&str; 10] = [
    "1\u{fe0f}\u{20e3}",
    "2\u{fe0f}\u{20e3}",
    "3\u{fe0f}\u{20e3}",
    "4\u{fe0f}\u{20e3}",
    "5\u{fe0f}\u{20e3}",
    "6\u{fe0f}\u{20e3}",
    "7\u{fe0f}\u{20e3}",
    "8\u{fe0f}\u{20e3}",
    "9\u{fe0f}\u{20e3}",
    "🔟",
];

/// The longest button label an event-button reaction key carries, in characters.
pub const EVENT_KEY_LABEL_CHARS: usize = 40;

/// The annotation key of an agent message's event button: the button's label (cut to
/// [`EVENT_KEY_LABEL_CHARS`]) then ` #{block}.{button}` (the block's index among the message's
/// blocks, the button's index on it). Unique per message (the indexes are), readable, and read
/// back without any state ([`read_event`]), after a restart or an edit alike; never a
/// question's key (a keycap, a plain number, ✅ / ❌).
pub fn event_id(label: &str, control: EventControl) -> String {
    let label = frogbot_model::text::one_line(label, EVENT_KEY_LABEL_CHARS);
    format!("{label}{}", control.write(EVENT_PREFIX, '.'))
}

/// What stands between an event button key's label and its indexes.
pub const EVENT_PREFIX: &str = " #";

/// The block and button indexes an event-button key names (`… #{block}.{button}`); `None` for any
/// other key.
pub fn read_event(key: &str) -> Option<EventControl> {
    let at = key.rfind(EVENT_PREFIX)?;
    EventControl::read(&key[at..], EVENT_PREFIX, '.')
}

/// A message or thread id: `room_id|event_id`.
pub fn message_id(room: &RoomId, event: &EventId) -> String {
    format!("{room}|{event}")
}

/// Splits a `room_id|event_id` id.
pub fn split_message_id(id: &str) -> Result<(OwnedRoomId, OwnedEventId), Error> {
    let bad = || Error::BadId(id.to_owned());
    let (room, event) = id.split_once('|').ok_or_else(bad)?;
    Ok((
        RoomId::parse(room).map_err(|_| bad())?,
        EventId::parse(event).map_err(|_| bad())?,
    ))
}

/// The poll answer id of option `o` drawn at `revision` of the question set: `r{revision}o{o}`.
pub fn answer_id(revision: u64, o: usize) -> String {
    format!("r{revision}o{o}")
}

/// A poll answer id read back: the revision it was drawn at and the option index. Ids of polls
/// drawn before answer ids carried a revision (`o{o}`) read as revision 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnswerId {
    /// The revision of the question set when the poll (or its edit) was sent.
    pub revision: u64,
    /// The option index.
    pub option: usize,
}

/// Parses an answer id made by [`answer_id`] (or an older `o{o}`); `None` for anything else.
pub fn parse_answer_id(id: &str) -> Option<AnswerId> {
    let (revision, option) = match id.strip_prefix('r') {
        Some(rest) => {
            let (revision, option) = rest.split_once('o')?;
            (revision.parse().ok()?, option)
        }
        None => (0, id.strip_prefix('o')?),
    };
    if option.is_empty() || !option.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(AnswerId {
        revision,
        option: option.parse().ok()?,
    })
}

/// The option index a reaction key names: a keycap digit (`1️⃣`…`9️⃣`, `🔟`) or a plain number,
/// counted from 1; `None` otherwise.
pub fn reaction_option(key: &str) -> Option<usize> {
    if key == "🔟" {
        return Some(9);
    }
    let digits: String = key.chars().take_while(|c| c.is_ascii_digit()).collect();
    let rest = &key[digits.len()..];
    let keycap = rest.is_empty() || rest == "\u{fe0f}\u{20e3}" || rest == "\u{20e3}";
    match digits.parse::<usize>() {
        Ok(n) if n >= 1 && keycap => Some(n - 1),
        _ => None,
    }
}

/// The reaction key that turns a toggle on or confirms (the bot reacts with it first).
pub const YES_KEY: &str = "✅";
/// The reaction key that turns a toggle off (the bot reacts with it first).
pub const NO_KEY: &str = "❌";

/// The keys the bot reacts with on an input's message, for people to tap: ✅ for a confirm,
/// ✅ and ❌ for a toggle, none for the other kinds.
pub fn reaction_keys(kind: InputKind) -> &'static [&'static str] {
    match kind {
        InputKind::Confirm => &[YES_KEY],
        InputKind::Toggle => &[YES_KEY, NO_KEY],
        _ => &[],
    }
}

/// What a person's reaction `key` on an input's message answers: for a toggle ✅ (also ✔️, ☑️,
/// 👍) `on` and ❌ (also ✖️, 👎) `off`; for a confirm ✅ (and the same synonyms) its label;
/// `None` for any other key or kind.
pub fn reaction_answer(item: &QuestionItem, key: &str) -> Option<String> {
    match (item.kind, yes_or_no(key)?) {
        (InputKind::Toggle, true) => Some(TOGGLE_ON.into()),
        (InputKind::Toggle, false) => Some(TOGGLE_OFF.into()),
        (InputKind::Confirm, true) => Some(item.confirm_label().into()),
        _ => None,
    }
}

/// Whether a reaction key says yes (✅, ✔️, ☑️, 👍) or no (❌, ✖️, 👎); `None` for any other key.
fn yes_or_no(key: &str) -> Option<bool> {
    let key = key.trim_end_matches('\u{fe0f}');
    if ["✅", "✔", "☑", "👍"].contains(&key) {
        Some(true)
    } else if ["❌", "✖", "👎"].contains(&key) {
        Some(false)
    } else {
        None
    }
}

/// Reads a person's answer on a question message ([`crate::convert`]'s action event: a poll
/// response, [`POLL_ACTION`] with its answer ids joined by `,`; or a reaction, [`REACTION_ACTION`]
/// with its key) back into FrogBot's shared [`QuestionControl`]:
/// - a poll response is [`ControlAction::Options`], the revision its answer ids were drawn at
///   (an empty response — the vote taken back — names none); FrogBot's engine keeps a
///   `multiple` poll's response as the checked options until ✅, a one-choice poll's first
///   answer counts;
/// - a keycap (or plain number) reaction is [`ControlAction::Option`], ✅ (✔️, ☑️, 👍)
///   [`ControlAction::Yes`] and ❌ (✖️, 👎) [`ControlAction::No`], with no revision.
///
/// Matrix controls do not name their question: the message they are on does (FrogBot posts one
/// message per question, its index in [`frogbot_model::QuestionMessage::question`]), so
/// `question` is `None`. `None` for any other action, an answer id not made by [`answer_id`], or
/// another reaction (an event button's key, an emoji).
///
/// ```
/// use frogbot_matrix::{ids, render};
/// use frogbot_model::{ActionEvent, ControlAction, QuestionInput, QuestionOutcome};
/// use matrix_sdk::ruma::EventId;
///
/// let input: QuestionInput = serde_json::from_value(serde_json::json!({"questions": [{
///     "header": "Pond", "question": "Which pond?", "options": [{"label": "Lily"}, {"label": "Mill"}]
/// }]}))
/// .unwrap();
/// let root = EventId::parse("$root").unwrap();
/// let (_, poll) = render::poll_start(&input, 0, &root, render::PollEvents::Stable, 0, None).unwrap();
/// // The answer id of "Mill", as a poll response sends it back.
/// let mill = poll.pointer("/m.poll/answers/1/m.id").unwrap().as_str().unwrap();
/// let vote = ActionEvent {
///     action_id: ids::POLL_ACTION.into(),
///     value: Some(mill.to_owned()),
///     message_id: "!r:example.org|$poll".into(),
///     user: Default::default(),
///     trigger_id: None,
///     raw: serde_json::Value::Null,
/// };
/// let control = ids::read_control(&vote).unwrap();
/// assert_eq!(control.action, ControlAction::Options(vec![1]));
/// assert!(matches!(control.outcome(&input, 0), Some(QuestionOutcome::Answered(_))));
/// ```
pub fn read_control(event: &ActionEvent) -> Option<QuestionControl> {
    let value = event.value.as_deref().unwrap_or_default();
    match event.action_id.as_str() {
        POLL_ACTION => {
            let answers = value
                .split(',')
                .filter(|s| !s.is_empty())
                .map(parse_answer_id)
                .collect::<Option<Vec<_>>>()?;
            let revision = answers.first().map(|a| a.revision);
            let picks = answers.iter().map(|a| a.option).collect();
            Some(QuestionControl::new(
                revision,
                None,
                ControlAction::Options(picks),
            ))
        }
        REACTION_ACTION => {
            let action = match reaction_option(value) {
                Some(o) => ControlAction::Option(o),
                None if yes_or_no(value)? => ControlAction::Yes,
                None => ControlAction::No,
            };
            Some(QuestionControl::new(None, None, action))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_ids_carry_the_revision_and_old_ids_read_as_revision_0() {
        assert_eq!(answer_id(3, 12), "r3o12");
        assert_eq!(
            parse_answer_id("r3o12"),
            Some(AnswerId {
                revision: 3,
                option: 12
            })
        );
        assert_eq!(
            parse_answer_id("o1"),
            Some(AnswerId {
                revision: 0,
                option: 1
            })
        );
        for bad in ["", "o", "r1", "r1o", "rxo1", "o-1", "x1", "r1o1x"] {
            assert_eq!(parse_answer_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn message_ids_round_trip() {
        let room = RoomId::parse("!r:localhost").unwrap();
        let ev = EventId::parse("$e").unwrap();
        let id = message_id(&room, &ev);
        assert_eq!(id, "!r:localhost|$e");
        assert_eq!(split_message_id(&id).unwrap(), (room, ev));
        assert!(split_message_id("nope").is_err());
    }

    #[test]
    fn keycaps_name_options() {
        for (i, k) in KEYCAPS.iter().enumerate() {
            assert_eq!(reaction_option(k), Some(i));
        }
        assert_eq!(reaction_option("3"), Some(2));
        assert_eq!(reaction_option("0"), None);
        assert_eq!(reaction_option("👍"), None);
    }

    #[test]
    fn event_keys_read_back_and_never_read_as_question_keys() {
        let k = event_id("Show logs", EventControl::new(4, 1));
        assert_eq!(k, "Show logs #4.1");
        assert_eq!(read_event(&k), Some(EventControl::new(4, 1)));
        let long = event_id(&"x".repeat(100), EventControl::new(19, 4));
        assert!(long.chars().count() <= EVENT_KEY_LABEL_CHARS + 6);
        assert_eq!(read_event(&long), Some(EventControl::new(19, 4)));
        // A label that looks like a key itself still reads as the last suffix.
        assert_eq!(
            read_event(&event_id("a #1.2", EventControl::new(3, 0))),
            Some(EventControl::new(3, 0))
        );
        for other in [
            KEYCAPS[0], "3", YES_KEY, NO_KEY, "👍", "#1.2", "x #1", "x #a.b", "x #1.2.3",
        ] {
            assert_eq!(read_event(other), None, "{other}");
            assert!(reaction_option(&k).is_none());
        }
    }

    #[test]
    fn check_and_cross_reactions_answer_toggles_and_confirms() {
        let item = |kind: InputKind| QuestionItem {
            header: "h".into(),
            question: "q".into(),
            kind,
            label: Some("Approve".into()),
            ..Default::default()
        };
        let toggle = item(InputKind::Toggle);
        assert_eq!(reaction_answer(&toggle, YES_KEY).as_deref(), Some("on"));
        assert_eq!(reaction_answer(&toggle, "✔\u{fe0f}").as_deref(), Some("on"));
        assert_eq!(reaction_answer(&toggle, NO_KEY).as_deref(), Some("off"));
        assert_eq!(reaction_answer(&toggle, "👎").as_deref(), Some("off"));
        assert_eq!(reaction_answer(&toggle, "😂"), None);
        let confirm = item(InputKind::Confirm);
        assert_eq!(
            reaction_answer(&confirm, YES_KEY).as_deref(),
            Some("Approve")
        );
        assert_eq!(reaction_answer(&confirm, NO_KEY), None);
        assert_eq!(
            reaction_answer(&item(InputKind::NumberInput), YES_KEY),
            None
        );
        assert_eq!(reaction_keys(InputKind::Toggle), &[YES_KEY, NO_KEY]);
        assert_eq!(reaction_keys(InputKind::Confirm), &[YES_KEY]);
        assert!(reaction_keys(InputKind::Choice).is_empty());
    }
}

#[cfg(test)]
mod read_back_tests {
    use frogbot_model::{
        ActionEvent, ControlAction, EventControl, QuestionControl, QuestionInput, QuestionOutcome,
    };
    use matrix_sdk::ruma::EventId;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::{
        KEYCAPS, NO_KEY, POLL_ACTION, REACTION_ACTION, YES_KEY, answer_id, event_id, read_control,
    };
    use crate::render::{PollEvents, poll_start};

    fn event(action: &str, value: &str) -> ActionEvent {
        ActionEvent {
            action_id: action.to_owned(),
            value: Some(value.to_owned()),
            message_id: "!r:x|$p".into(),
            user: Default::default(),
            trigger_id: None,
            raw: Value::Null,
        }
    }

    /// Every poll answer id (`m.id` / `id`) of a poll start's content.
    fn answer_ids(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for key in ["m.id", "id"] {
                    if let Some(Value::String(id)) = m.get(key) {
                        out.push(id.clone());
                    }
                }
                m.values().for_each(|v| answer_ids(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| answer_ids(v, out)),
            _ => {}
        }
    }

    #[test]
    fn poll_answers_read_back_and_settle() {
        let input: QuestionInput = serde_json::from_value(json!({"questions": [{
            "header": "Pond", "question": "?", "options": [{"label": "a"}, {"label": "b"}]
        }]}))
        .unwrap();
        let root = EventId::parse("$root").unwrap();
        for events in [PollEvents::Stable, PollEvents::Unstable] {
            let (_, content) = poll_start(&input, 0, &root, events, 5, None).unwrap();
            let mut ids = Vec::new();
            answer_ids(&content, &mut ids);
            assert_eq!(ids, [answer_id(5, 0), answer_id(5, 1)], "{content}");
            let read: Vec<QuestionControl> = ids
                .iter()
                .map(|id| read_control(&event(POLL_ACTION, id)).unwrap())
                .collect();
            assert_eq!(read[1].action, ControlAction::Options(vec![1]));
            assert_eq!(read[1].revision, Some(5));
            let Some(QuestionOutcome::Answered(out)) = read[1].outcome(&input, 5) else {
                panic!("an answer");
            };
            assert_eq!(out.answers[0].selected, ["b"]);
            assert_eq!(read[1].outcome(&input, 6), None);
        }
        let both = read_control(&event(POLL_ACTION, "r2o0,r2o1")).unwrap();
        assert_eq!(both.action, ControlAction::Options(vec![0, 1]));
        let none = read_control(&event(POLL_ACTION, "")).unwrap();
        assert_eq!(
            (none.revision, none.action),
            (None, ControlAction::Options(vec![]))
        );
        assert_eq!(read_control(&event(POLL_ACTION, "r2o0,x")), None);
    }

    #[test]
    fn reactions_read_back() {
        for (i, key) in KEYCAPS.iter().enumerate() {
            let read = read_control(&event(REACTION_ACTION, key)).unwrap();
            assert_eq!(
                (read.revision, read.action),
                (None, ControlAction::Option(i))
            );
        }
        assert_eq!(
            read_control(&event(REACTION_ACTION, YES_KEY))
                .unwrap()
                .action,
            ControlAction::Yes
        );
        assert_eq!(
            read_control(&event(REACTION_ACTION, "👍")).unwrap().action,
            ControlAction::Yes
        );
        assert_eq!(
            read_control(&event(REACTION_ACTION, NO_KEY))
                .unwrap()
                .action,
            ControlAction::No
        );
        assert_eq!(read_control(&event(REACTION_ACTION, "😂")), None);
        assert_eq!(
            read_control(&event(
                REACTION_ACTION,
                &event_id("Retry", EventControl::new(1, 0))
            )),
            None
        );
        assert_eq!(read_control(&event("other", "r0o1")), None);
    }

    proptest! {
        #[test]
        fn every_answer_id_reads_back(revision in any::<u64>(), option in any::<usize>()) {
            let read = read_control(&event(POLL_ACTION, &answer_id(revision, option))).unwrap();
            prop_assert_eq!(read.revision, Some(revision));
            prop_assert_eq!(read.action, ControlAction::Options(vec![option]));
        }
    }
}
