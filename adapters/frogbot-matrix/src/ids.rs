//! Ids: the `room_id|event_id` message and thread ids FrogBot keeps, and the control codec — poll
//! answer ids carrying the question set's revision (`r{revision}o{option}`), the action ids of
//! poll responses and reactions, the keycap reactions naming an option, and the ✅ / ❌ reactions
//! answering a toggle or a confirm.

use frogbot_model::{InputKind, QuestionItem, TOGGLE_OFF, TOGGLE_ON};
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
/// back without any state ([`event_key_indexes`]), after a restart or an edit alike; never a
/// question's key (a keycap, a plain number, ✅ / ❌).
pub fn event_key(label: &str, block: usize, button: usize) -> String {
    let label: String = label
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let label = frogbot_model::text::truncate(label.trim(), EVENT_KEY_LABEL_CHARS);
    format!("{label} #{block}.{button}")
}

/// The block and button indexes an event-button key names (`… #{block}.{button}`); `None` for any
/// other key.
pub fn event_key_indexes(key: &str) -> Option<(usize, usize)> {
    let (_, tail) = key.rsplit_once(" #")?;
    let (block, button) = tail.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(block) || !digits(button) {
        return None;
    }
    Some((block.parse().ok()?, button.parse().ok()?))
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
    let key = key.trim_end_matches('\u{fe0f}');
    let yes = ["✅", "✔", "☑", "👍"].contains(&key);
    let no = ["❌", "✖", "👎"].contains(&key);
    match item.kind {
        InputKind::Toggle if yes => Some(TOGGLE_ON.into()),
        InputKind::Toggle if no => Some(TOGGLE_OFF.into()),
        InputKind::Confirm if yes => Some(item.confirm_label().into()),
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
        let k = event_key("Show logs", 4, 1);
        assert_eq!(k, "Show logs #4.1");
        assert_eq!(event_key_indexes(&k), Some((4, 1)));
        let long = event_key(&"x".repeat(100), 19, 4);
        assert!(long.chars().count() <= EVENT_KEY_LABEL_CHARS + 6);
        assert_eq!(event_key_indexes(&long), Some((19, 4)));
        // A label that looks like a key itself still reads as the last suffix.
        assert_eq!(event_key_indexes(&event_key("a #1.2", 3, 0)), Some((3, 0)));
        for other in [
            KEYCAPS[0], "3", YES_KEY, NO_KEY, "👍", "#1.2", "x #1", "x #a.b", "x #1.2.3",
        ] {
            assert_eq!(event_key_indexes(other), None, "{other}");
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
