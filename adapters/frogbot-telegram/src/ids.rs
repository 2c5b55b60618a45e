//! The ids this adapter makes: the callback-data codec of question buttons
//! (`q{revision}:{question}:{option}`, `q{revision}:{question}:d` for Done,
//! `q{revision}:{question}:s` for Skip, `…:c` for a confirm button, `…:t` for a toggle's ✓/✗
//! switch, `…:y` / `…:n` for a lone toggle's On / Off, `…:a` for "Send answers") and the message and
//! thread ids FrogBot stores (`chat_id:message_id`; `chat_id` or `chat_id:thread_id` for a forum
//! topic; `chat_id~root_id` for an agent's conversation with a person in their private chat).
//!
//! An agent conversation ([`agent_thread_id`]) is FrogBot's thread `{chat}~{root}`: the
//! conversation an agent opened in a private chat (which has no threads) with its first message
//! `root`. The separator `~` never occurs in the other forms (a chat id is an integer, a topic
//! follows a `:`), so the private chat's own thread (`{chat}`, the person's conversation with the
//! model) and each agent conversation in it are different FrogBot chats.
//!
//! [`read_control`] reads a click on any of these controls back into FrogBot's shared control
//! vocabulary, [`frogbot_model::QuestionControl`] (the same for every adapter; the wire format
//! above is this adapter's own and stays as it is, for stored questions and live buttons).

use frogbot_model::{ActionEvent, ControlAction, EventControl, QuestionControl};
use teloxide::types::{ChatId, Message, MessageId, ThreadId};

use crate::Error;

/// Telegram's limit on callback data, in bytes.
pub const MAX_CALLBACK_DATA: usize = 64;

/// The callback data of a streamed reply's Stop button (never a question's token, which starts
/// with `q`).
pub const STOP_DATA: &str = "frogbot-stop";

/// What a button does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// Selects (or, for `multiple`, toggles) option `n`.
    Option(usize),
    /// Finishes a `multiple` selection.
    Done,
    /// Skips: dismisses the whole call.
    Skip,
    /// Presses a `confirm` input's button.
    Confirm,
    /// Switches a `toggle` input between ✓ and ✗ (answered with the set's "Send answers").
    Flip,
    /// Answers a lone `toggle` input on (`true`) or off (`false`).
    Set(bool),
    /// "Send answers": answers the set with what it holds (toggles as shown, optional inputs
    /// left empty as none).
    Send,
}

/// The callback token of a button: `q{revision}:{question}:{option}`, `q{revision}:{question}:d`
/// (Done) or `q{revision}:{question}:s` (Skip).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    /// The record revision the keyboard was drawn for.
    pub revision: u64,
    /// Index into `input.questions`.
    pub question: usize,
    /// What the button does.
    pub pick: Pick,
}

/// The letter that ends the callback data of each button that is no option.
const LETTERS: [(Pick, &str); 7] = [
    (Pick::Done, "d"),
    (Pick::Skip, "s"),
    (Pick::Confirm, "c"),
    (Pick::Flip, "t"),
    (Pick::Set(true), "y"),
    (Pick::Set(false), "n"),
    (Pick::Send, "a"),
];

impl Token {
    /// The callback data (at most 20 + 20 + 20 digits and three more bytes: always ≤ 64 bytes).
    pub fn encode(&self) -> String {
        let pick = match self.pick {
            Pick::Option(o) => o.to_string(),
            pick => LETTERS
                .iter()
                .find(|(p, _)| *p == pick)
                .map_or_else(String::new, |(_, l)| (*l).to_owned()),
        };
        format!("q{}:{}:{pick}", self.revision, self.question)
    }

    /// Reads callback data; `None` when it is not a token of this adapter.
    pub fn decode(data: &str) -> Option<Token> {
        let (revision, rest) = data.strip_prefix('q')?.split_once(':')?;
        let (question, pick) = rest.split_once(':')?;
        let pick = match LETTERS.iter().find(|(_, l)| *l == pick) {
            Some(&(p, _)) => p,
            None => Pick::Option(pick.parse().ok()?),
        };
        Some(Token {
            revision: revision.parse().ok()?,
            question: question.parse().ok()?,
            pick,
        })
    }

    /// Reads an action as [`crate::convert::action`] split it (`action_id`, `value`).
    pub fn from_action(action_id: &str, value: Option<&str>) -> Option<Token> {
        Token::decode(&value.map_or_else(|| action_id.to_owned(), |v| format!("{action_id}:{v}")))
    }
}

impl From<Token> for QuestionControl {
    /// The shared vocabulary's name for a button: an option is [`ControlAction::Option`], Done and
    /// "Send answers" [`ControlAction::Submit`], a confirm's button and a lone toggle's On
    /// [`ControlAction::Yes`], its Off [`ControlAction::No`], a set's ✓/✗ switch
    /// [`ControlAction::Flip`], Skip [`ControlAction::Skip`].
    fn from(t: Token) -> Self {
        let action = match t.pick {
            Pick::Option(o) => ControlAction::Option(o),
            Pick::Done | Pick::Send => ControlAction::Submit,
            Pick::Skip => ControlAction::Skip,
            Pick::Confirm | Pick::Set(true) => ControlAction::Yes,
            Pick::Set(false) => ControlAction::No,
            Pick::Flip => ControlAction::Flip,
        };
        QuestionControl::new(Some(t.revision), Some(t.question), action)
    }
}

/// Reads a click on a question button ([`crate::convert::action`]'s event: the callback data
/// split into `action_id` and `value`, or whole in `action_id`) back into FrogBot's shared
/// [`QuestionControl`]; `None` for any other callback data (an event button, Stop, another
/// bot's).
///
/// ```
/// use frogbot_model::{ActionEvent, ControlAction, Progress, QuestionInput, QuestionOutcome};
/// use frogbot_telegram::{ids, render};
///
/// let input: QuestionInput = serde_json::from_value(serde_json::json!({"questions": [{
///     "header": "Pond", "question": "Which pond?", "options": [{"label": "Lily"}, {"label": "Mill"}]
/// }]}))
/// .unwrap();
/// let keyboard = render::keyboard(&input, 0, 0, &Progress::from_state(&input, None));
/// let keyboard = serde_json::to_value(&keyboard).unwrap();
/// // The callback data of the "Mill" button, as Telegram sends it back.
/// let data = keyboard.pointer("/inline_keyboard/1/0/callback_data").unwrap().as_str().unwrap();
/// let click = ActionEvent {
///     action_id: data.to_owned(),
///     value: None,
///     message_id: "-100:5".into(),
///     user: Default::default(),
///     trigger_id: None,
///     raw: serde_json::Value::Null,
/// };
/// let control = ids::read_control(&click).unwrap();
/// assert_eq!(control.action, ControlAction::Option(1));
/// assert!(matches!(control.outcome(&input, 0), Some(QuestionOutcome::Answered(_))));
/// ```
pub fn read_control(event: &ActionEvent) -> Option<QuestionControl> {
    Token::from_action(&event.action_id, event.value.as_deref()).map(QuestionControl::from)
}

/// What the callback data of an agent message's event button starts with: `e{block}:{button}`
/// ([`EventControl`]: the block's index among the message's blocks, the button's index on the
/// block). It never reads as a question's token (`q…`) nor as [`STOP_DATA`], and it fits
/// Telegram's 64 bytes at any index (at most 1 + 20 + 1 + 20 bytes).
pub const EVENT_PREFIX: &str = "e";

/// The callback data of an event button ([`EVENT_PREFIX`]).
pub fn event_id(control: EventControl) -> String {
    control.write(EVENT_PREFIX, ':')
}

/// The event button callback data names; `None` for any other data.
pub fn read_event(data: &str) -> Option<EventControl> {
    EventControl::read(data, EVENT_PREFIX, ':')
}

/// A message id: `chat_id:message_id`.
pub fn message_id(chat: ChatId, id: MessageId) -> String {
    format!("{}:{}", chat.0, id.0)
}

/// Splits a `chat_id:message_id` id.
pub fn split_message_id(id: &str) -> Result<(ChatId, MessageId), Error> {
    let (chat, msg) = id
        .split_once(':')
        .ok_or_else(|| Error::BadId(id.to_owned()))?;
    Ok((ChatId(number(id, chat)?), MessageId(number(id, msg)?)))
}

/// Part `part` of id `id` read as a number.
fn number<T: std::str::FromStr>(id: &str, part: &str) -> Result<T, Error> {
    part.parse().map_err(|_| Error::BadId(id.to_owned()))
}

/// The thread id of a message: its chat, or `chat_id:thread_id` for a forum topic message.
pub fn thread_id(message: &Message) -> String {
    let topic = message.thread_id.filter(|_| message.is_topic_message);
    join_thread_id(message.chat.id, topic)
}

/// A thread id from its chat and, for a forum topic, the topic.
pub fn join_thread_id(chat: ChatId, topic: Option<ThreadId>) -> String {
    match topic {
        Some(t) => format!("{}:{}", chat.0, t.0.0),
        None => chat.0.to_string(),
    }
}

/// The separator of an agent conversation's thread id (`{chat}~{root}`).
pub const AGENT_SEP: char = '~';

/// The thread id of the agent conversation started with message `root` in `chat`:
/// `{chat}~{root}`.
pub fn agent_thread_id(chat: ChatId, root: MessageId) -> String {
    format!("{}{AGENT_SEP}{}", chat.0, root.0)
}

/// The root message of an agent conversation's thread id (`{chat}~{root}`); `None` for a chat's
/// or a forum topic's id.
pub fn thread_root(id: &str) -> Option<MessageId> {
    let (_, root) = id.split_once(AGENT_SEP)?;
    root.parse().ok().map(MessageId)
}

/// Splits a thread id into the chat and, for a forum topic, the topic. An agent conversation
/// (`{chat}~{root}`) is in its chat, no topic ([`thread_root`] gives its root).
pub fn split_thread_id(id: &str) -> Result<(ChatId, Option<ThreadId>), Error> {
    if let Some((chat, root)) = id.split_once(AGENT_SEP) {
        number::<i32>(id, root)?;
        return Ok((ChatId(number(id, chat)?), None));
    }
    let (chat, topic) = id.split_once(':').map_or((id, None), |(c, t)| (c, Some(t)));
    let topic = topic.map(|t| number(id, t)).transpose()?;
    Ok((
        ChatId(number(id, chat)?),
        topic.map(|t| ThreadId(MessageId(t))),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_data_fits_64_bytes_and_round_trips() {
        let worst = Token {
            revision: u64::MAX,
            question: usize::MAX,
            pick: Pick::Option(usize::MAX),
        };
        assert!(worst.encode().len() <= MAX_CALLBACK_DATA);
        assert_eq!(Token::decode(&worst.encode()), Some(worst));
        assert_eq!(Token::decode("q1:2:d").unwrap().pick, Pick::Done);
        assert_eq!(Token::decode("x1:2:3"), None);
        assert_eq!(Token::decode("q1:2:3:4"), None);
        assert_eq!(
            Token::from_action("q1:2", Some("3")),
            Token::decode("q1:2:3")
        );
    }

    #[test]
    fn the_skip_token_carries_the_revision() {
        let skip = Token {
            revision: 5,
            question: 1,
            pick: Pick::Skip,
        };
        assert_eq!(skip.encode(), "q5:1:s");
        assert_eq!(Token::decode("q5:1:s"), Some(skip));
        // As a callback query arrives: `q5:1` and the value `s`.
        assert_eq!(Token::from_action("q5:1", Some("s")), Some(skip));
        let worst = Token {
            revision: u64::MAX,
            question: usize::MAX,
            pick: Pick::Skip,
        };
        assert!(worst.encode().len() <= MAX_CALLBACK_DATA);
    }

    #[test]
    fn event_tokens_fit_and_never_collide_with_questions_or_stop() {
        let worst = EventControl::new(usize::MAX, usize::MAX);
        assert!(event_id(worst).len() <= MAX_CALLBACK_DATA);
        assert_eq!(read_event(&event_id(worst)), Some(worst));
        let t = EventControl::new(4, 1);
        assert_eq!(event_id(t), "e4:1");
        assert_eq!(read_event("e4:1"), Some(t));
        // Not a question's token, not the stop button's, and neither of those reads as an event.
        assert_eq!(Token::decode(&event_id(t)), None);
        assert_ne!(event_id(t), STOP_DATA);
        for other in [
            STOP_DATA, "q1:2:3", "q1:2:d", "e1", "e1:", "e:1", "e1:2:3", "e-1:2", "e+1:2",
        ] {
            assert_eq!(read_event(other), None, "{other}");
        }
    }

    #[test]
    fn ids_round_trip() {
        let id = message_id(ChatId(-100123), MessageId(42));
        assert_eq!(id, "-100123:42");
        assert_eq!(
            split_message_id(&id).unwrap(),
            (ChatId(-100123), MessageId(42))
        );
        assert!(split_message_id("x").is_err());
        assert_eq!(split_thread_id("-5").unwrap(), (ChatId(-5), None));
        assert_eq!(
            split_thread_id("-5:7").unwrap(),
            (ChatId(-5), Some(ThreadId(MessageId(7))))
        );
        assert_eq!(
            join_thread_id(ChatId(-5), Some(ThreadId(MessageId(7)))),
            "-5:7"
        );
        // An agent conversation in a private chat: its own thread, in the chat, no topic.
        let agent = agent_thread_id(ChatId(777), MessageId(12));
        assert_eq!(agent, "777~12");
        assert_ne!(agent, join_thread_id(ChatId(777), None));
        assert_eq!(split_thread_id(&agent).unwrap(), (ChatId(777), None));
        assert_eq!(thread_root(&agent), Some(MessageId(12)));
        assert_eq!(thread_root("777"), None);
        assert_eq!(thread_root("-5:7"), None);
        for bad in ["777~", "~12", "777~x", "777~12~3", "777:1~2"] {
            assert!(split_thread_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn input_kind_tokens_round_trip_within_64_bytes() {
        for pick in [
            Pick::Confirm,
            Pick::Flip,
            Pick::Set(true),
            Pick::Set(false),
            Pick::Send,
        ] {
            let t = Token {
                revision: u64::MAX,
                question: usize::MAX,
                pick,
            };
            assert!(t.encode().len() <= MAX_CALLBACK_DATA);
            assert_eq!(Token::decode(&t.encode()), Some(t));
        }
        assert_eq!(Token::decode("q2:0:y").unwrap().pick, Pick::Set(true));
        assert_eq!(Token::decode("q2:0:a").unwrap().pick, Pick::Send);
    }
}

#[cfg(test)]
mod read_back_tests {
    use frogbot_model::{
        ActionEvent, ControlAction, Progress, QuestionControl, QuestionInput, QuestionOutcome,
    };
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::{Pick, Token, read_control};
    use crate::render;

    fn input(items: Value) -> QuestionInput {
        serde_json::from_value(json!({ "questions": items })).unwrap()
    }

    /// A click as `convert::action` splits callback data: `a:b` and the value `c`.
    fn click(data: &str) -> ActionEvent {
        let (action_id, value) = match data.rsplit_once(':') {
            Some((a, v)) => (a.to_owned(), Some(v.to_owned())),
            None => (data.to_owned(), None),
        };
        ActionEvent {
            action_id,
            value,
            message_id: "-100:5".into(),
            user: Default::default(),
            trigger_id: None,
            raw: Value::Null,
        }
    }

    fn drawn(input: &QuestionInput, q: usize, revision: u64) -> Vec<QuestionControl> {
        let keyboard = render::keyboard(input, q, revision, &Progress::from_state(input, None));
        serde_json::to_value(&keyboard).unwrap()["inline_keyboard"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|row| row.as_array().unwrap().clone())
            .filter_map(|b| {
                b["callback_data"]
                    .as_str()
                    .map(|d| read_control(&click(d)).expect(d))
            })
            .collect()
    }

    #[test]
    fn rendered_buttons_read_back_and_settle() {
        let choice = input(json!([{"header": "Pond", "question": "?",
            "options": [{"label": "a"}, {"label": "b"}]}]));
        let read = drawn(&choice, 0, 7);
        let actions: Vec<_> = read.iter().map(|c| c.action.clone()).collect();
        assert_eq!(
            actions,
            [
                ControlAction::Option(0),
                ControlAction::Option(1),
                ControlAction::Skip
            ]
        );
        assert!(
            read.iter()
                .all(|c| c.revision == Some(7) && c.question == Some(0))
        );
        let Some(QuestionOutcome::Answered(out)) = read[1].outcome(&choice, 7) else {
            panic!("an answer");
        };
        assert_eq!(out.answers[0].selected, ["b"]);
        assert_eq!(
            read[2].outcome(&choice, 7),
            Some(QuestionOutcome::Dismissed)
        );
        assert_eq!(read[1].outcome(&choice, 8), None);

        let toggle = input(json!([{"header": "T", "question": "?", "kind": "toggle"}]));
        let read = drawn(&toggle, 0, 0);
        assert!(
            read.iter().any(|c| c.action == ControlAction::Yes),
            "{read:?}"
        );
        let on = read
            .iter()
            .find(|c| c.action == ControlAction::Yes)
            .unwrap();
        let Some(QuestionOutcome::Answered(out)) = on.outcome(&toggle, 0) else {
            panic!("an answer");
        };
        assert_eq!(out.answers[0].selected, ["on"]);

        let multiple = input(json!([{"header": "M", "question": "?", "multiple": true,
            "options": [{"label": "a"}, {"label": "b"}]}]));
        let read = drawn(&multiple, 0, 1);
        assert!(
            read.iter().any(|c| c.action == ControlAction::Submit),
            "{read:?}"
        );
        assert_eq!(read[0].outcome(&multiple, 1), None);
        assert_eq!(read_control(&click(super::STOP_DATA)), None);
        assert_eq!(read_control(&click("e1:2")), None);
    }

    fn pick() -> impl Strategy<Value = Pick> {
        prop_oneof![
            any::<usize>().prop_map(Pick::Option),
            Just(Pick::Done),
            Just(Pick::Skip),
            Just(Pick::Confirm),
            Just(Pick::Flip),
            any::<bool>().prop_map(Pick::Set),
            Just(Pick::Send),
        ]
    }

    proptest! {
        #[test]
        fn every_token_reads_back(revision in any::<u64>(), question in any::<usize>(), pick in pick()) {
            let token = Token { revision, question, pick };
            let read = read_control(&click(&token.encode())).unwrap();
            prop_assert_eq!(read.revision, Some(revision));
            prop_assert_eq!(read.question, Some(question));
            prop_assert_eq!(read, QuestionControl::from(token));
        }
    }
}
