use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{PlatformUser, QuestionOutput};

/// A button or menu event (`interaction.type == "action"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionEvent {
    /// The control's id (Slack `action_id`, Discord `custom_id`, decoded Telegram callback data…).
    pub action_id: String,
    /// The control's value, when it carries one (a select's chosen values are joined by the adapter
    /// into `raw`; `value` holds the first or only one).
    #[serde(default)]
    pub value: Option<String>,
    /// The platform message the control sits on.
    pub message_id: String,
    /// Who clicked.
    pub user: PlatformUser,
    /// The platform's handle for answering this event (Slack trigger id, Discord interaction token,
    /// Telegram callback query id).
    #[serde(default)]
    pub trigger_id: Option<String>,
    /// The platform's payload as it came.
    #[serde(default)]
    pub raw: Value,
}

/// A file a person posted on a platform (a Slack file, a Discord attachment, a Telegram photo or
/// document, a Matrix `m.image` / `m.file`), as the adapter read it from the event.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlatformFile {
    /// The platform's id of the file (Slack's `F…`, Telegram's `file_id`, a Matrix `mxc://`
    /// URI, a Discord attachment id).
    pub id: String,
    /// Where the adapter downloads it from (with the platform's own authentication), or a
    /// platform reference it resolves (Telegram's `file_id`, Matrix's event content).
    pub url: String,
    /// Its media type as the platform reports it (`application/octet-stream` when it does not).
    pub media_type: String,
    /// Its file name (`""` when none).
    pub filename: String,
    /// Its size in bytes, when the platform says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// What else the adapter needs to download it (Matrix: the event's media source, with an
    /// encrypted file's key).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub source: Value,
}

/// A submitted form (`interaction.type == "modalSubmit"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModalSubmitEvent {
    /// The submitted values by input id.
    #[serde(default)]
    pub values: Map<String, Value>,
    /// The form's private metadata (where a piece keeps a form locator).
    #[serde(default)]
    pub private_metadata: Option<String>,
    /// The message the form was opened from, when the platform reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related_message_id: Option<String>,
    /// Who submitted.
    pub user: PlatformUser,
    /// The platform's handle for answering this event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_id: Option<String>,
    /// The platform's payload as it came.
    #[serde(default)]
    pub raw: Value,
}

/// `metadata` of a thread message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadMessageMetadata {
    /// When the platform says the message was sent (RFC 3339).
    pub date_sent: String,
}

/// A reply in the conversation thread (`interaction.type == "message"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadMessage {
    /// The platform's message id.
    #[serde(default)]
    pub id: String,
    /// The text.
    pub text: String,
    /// Who wrote it.
    pub author: PlatformUser,
    /// When it was sent.
    pub metadata: ThreadMessageMetadata,
    /// The message it replies to, when the platform reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// The platform's payload as it came.
    #[serde(default)]
    pub raw: Value,
    /// The files and images posted with it, not yet downloaded: the engine stores them (through
    /// the channel's `ChannelOutbox::open_file`) once the writer is let in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<PlatformFile>,
    /// The people the message names (Slack `<@U…>`, Discord `<@…>`, a Telegram text mention or
    /// the author of the message it replies to, a Matrix user id or pill), in order, with where
    /// each is written in [`ThreadMessage::text`]; never the bot itself. The `ask` command asks
    /// the one named first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<Mention>,
}

/// A person a [`ThreadMessage`] names, and where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mention {
    /// Who.
    pub user: PlatformUser,
    /// The byte range of the mention in the message's text (`start == end`: named without
    /// being written in the text, e.g. the author of the message replied to).
    pub start: usize,
    /// The end of that range (exclusive).
    pub end: usize,
}

impl ThreadMessage {
    /// The person named at the very start of `rest` (a suffix of [`ThreadMessage::text`]: a
    /// command's arguments, trimmed or not), and what follows the mention; with no mention
    /// written there, a mention written nowhere in the text (the author of the message replied
    /// to), and `rest`.
    pub fn named_first<'a>(&'a self, rest: &'a str) -> Option<(&'a PlatformUser, &'a str)> {
        let offset = self
            .text
            .trim_end()
            .len()
            .checked_sub(rest.trim_end().len())?;
        let lead = rest.len() - rest.trim_start().len();
        let at = offset + lead;
        if let Some(m) = self
            .mentions
            .iter()
            .find(|m| m.start == at && m.end > m.start && m.end <= self.text.len())
        {
            return Some((&m.user, self.text.get(m.end..)?));
        }
        self.mentions
            .iter()
            .find(|m| m.start == m.end)
            .map(|m| (&m.user, rest))
    }
}

/// An interaction that may belong to a posted question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Interaction {
    /// A button or menu event.
    Action {
        /// The event.
        event: ActionEvent,
    },
    /// A submitted form.
    ModalSubmit {
        /// The event.
        event: ModalSubmitEvent,
    },
    /// A reply in the conversation thread.
    Message {
        /// The message.
        message: ThreadMessage,
    },
}

impl Interaction {
    /// The platform user behind the interaction.
    pub fn user(&self) -> &PlatformUser {
        match self {
            Interaction::Action { event } => &event.user,
            Interaction::ModalSubmit { event } => &event.user,
            Interaction::Message { message } => &message.author,
        }
    }

    /// The button or menu event, for an [`Interaction::Action`].
    pub fn as_action(&self) -> Option<&ActionEvent> {
        match self {
            Interaction::Action { event } => Some(event),
            _ => None,
        }
    }

    /// The wire name of the kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Interaction::Action { .. } => "action",
            Interaction::ModalSubmit { .. } => "modalSubmit",
            Interaction::Message { .. } => "message",
        }
    }
}

/// What `parse` makes of an interaction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ParseResult {
    /// Not for this question; a thread reply continues as an ordinary message.
    Ignore,
    /// A complete answer: access is checked, the answer recorded, `settled` called, the agent continued.
    Answer {
        /// The answer.
        output: QuestionOutput,
    },
    /// A dismissal: access is checked, recorded, `settled` called, the turn stops.
    Dismiss,
    /// Progress: access is checked, `state` saved (if given) with `revision + 1`, `updated` called.
    Partial {
        /// The new state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<Value>,
    },
    /// A refusal: access is checked, `rejected` called with the reason.
    Rejected {
        /// Shown to the participant.
        reason: String,
    },
    /// Out of date: `stale` is called.
    Stale,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_person_named_first_is_read_from_a_commands_arguments() {
        let bob = PlatformUser {
            id: "U2".into(),
            name: Some("bob".into()),
            is_bot: false,
        };
        let text = "/ask <@U2> Ship today?  ";
        let m = ThreadMessage {
            id: "m".into(),
            text: text.into(),
            author: PlatformUser::default(),
            metadata: ThreadMessageMetadata {
                date_sent: String::new(),
            },
            reply_to: None,
            raw: json!(null),
            files: Vec::new(),
            mentions: vec![Mention {
                user: bob.clone(),
                start: 5,
                end: 10,
            }],
        };
        // The arguments as a command reads them (trimmed), or as written.
        for args in [
            "<@U2> Ship today?",
            "<@U2> Ship today?  ",
            " <@U2> Ship today?",
        ] {
            let (who, rest) = m.named_first(args).expect(args);
            assert_eq!((who, rest.trim()), (&bob, "Ship today?"), "{args:?}");
        }
        // Named later, not first: nobody.
        let later = ThreadMessage {
            text: "/ask is <@U2> in?".into(),
            mentions: vec![Mention {
                user: bob.clone(),
                start: 8,
                end: 13,
            }],
            ..m.clone()
        };
        assert_eq!(later.named_first("is <@U2> in?"), None);
        // Named without being written (the author of the message replied to).
        let replied = ThreadMessage {
            text: "/ask Ship today?".into(),
            mentions: vec![Mention {
                user: bob.clone(),
                start: 0,
                end: 0,
            }],
            ..m
        };
        assert_eq!(
            replied.named_first("Ship today?"),
            Some((&bob, "Ship today?"))
        );
    }

    #[test]
    fn interactions_use_the_spec_shapes() {
        let i: Interaction = serde_json::from_value(json!({
            "type": "action",
            "event": {"actionId": "q:0", "value": "1", "messageId": "m1", "user": {"id": "U1"}, "triggerId": "t", "raw": {}}
        }))
        .unwrap();
        assert_eq!(i.kind(), "action");
        assert_eq!(i.user().id, "U1");
        let m: Interaction = serde_json::from_value(json!({
            "type": "message",
            "message": {"text": "/answer 1", "author": {"id": "U2"}, "metadata": {"dateSent": "2026-01-01T00:00:00Z"}}
        }))
        .unwrap();
        assert_eq!(m.kind(), "message");
        let f: Interaction = serde_json::from_value(json!({
            "type": "modalSubmit",
            "event": {"values": {"a": "b"}, "privateMetadata": "fq1:[\"t\",\"m\"]", "user": {"id": "U3"}, "raw": null}
        }))
        .unwrap();
        assert_eq!(f.kind(), "modalSubmit");
    }

    #[test]
    fn parse_results_are_tagged_by_kind() {
        assert_eq!(
            serde_json::to_value(ParseResult::Ignore).unwrap(),
            json!({"kind": "ignore"})
        );
        assert_eq!(
            serde_json::to_value(ParseResult::Rejected {
                reason: "no".into()
            })
            .unwrap(),
            json!({"kind": "rejected", "reason": "no"})
        );
        let p: ParseResult =
            serde_json::from_value(json!({"kind": "partial", "state": {"step": 1}})).unwrap();
        assert_eq!(
            p,
            ParseResult::Partial {
                state: Some(json!({"step": 1}))
            }
        );
    }
}
