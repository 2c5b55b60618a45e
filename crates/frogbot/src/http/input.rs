//! Checks of what a client may put in a message: the parts a person can write, and the ids a
//! client may choose.

use frogbot_core::model::{ChatId, MessagePart};

use super::ApiError;

/// The data parts a person may send. None today: the web chat and the CLI send text (and
/// files); data parts are what agents and the server write — blocks (`data-block-html` renders
/// as an app, `data-block-image` as an image), events (`data-event`, written by
/// `POST /api/chats/{id}/block-events`), asks (`data-ask`) — and a person's message must not
/// pass for one. A data part the API comes to define for people is listed here.
pub(super) const PERSON_DATA_PARTS: &[&str] = &[];

/// The parts a person may send: `text`, `file` and the data parts of [`PERSON_DATA_PARTS`]. Tool
/// calls, `dynamic-tool`, `step-start`, `reasoning`, sources, blocks, events and anything else
/// are the agent's or the server's to create.
pub(super) fn check_user_parts(parts: &[MessagePart]) -> Result<(), ApiError> {
    for part in parts {
        let refused = match part {
            MessagePart::Text { .. } => None,
            MessagePart::Tool(t) => Some(format!("tool-{}", t.tool_name)),
            MessagePart::Other(v) => match v.get("type").and_then(|t| t.as_str()) {
                Some("file") => None,
                Some(t) if PERSON_DATA_PARTS.contains(&t) => None,
                Some(t) => Some(t.to_string()),
                None => Some("(none)".to_string()),
            },
            // `MessagePart` is non-exhaustive: a new kind is refused until it is listed here.
            _ => Some("(unknown)".to_string()),
        };
        if let Some(ty) = refused {
            return Err(ApiError::invalid(format!(
                "a person cannot send a part of type {ty:?}: use text or file parts"
            )));
        }
    }
    Ok(())
}

/// A client-chosen message id follows the chat id rules: 1-128 characters of `A-Z a-z 0-9 _ -`.
pub(super) fn check_message_id(id: &str) -> Result<(), ApiError> {
    ChatId::new(id).map(drop).map_err(|_| {
        ApiError::invalid(format!(
            "bad message id {id:?}: use 1-128 characters of A-Z a-z 0-9 _ -"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parts(v: serde_json::Value) -> Vec<MessagePart> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn only_text_and_file_parts_are_a_persons() {
        let ok = parts(json!([
            {"type": "text", "text": "hi"},
            {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA=="},
        ]));
        assert!(check_user_parts(&ok).is_ok());
        for ty in [
            "data-block-html",
            "data-block-image",
            "data-event",
            "data-ask",
            "data-note",
            "tool-question",
            "dynamic-tool",
            "step-start",
            "reasoning",
            "source-url",
            "source-document",
        ] {
            let p = parts(json!([
                {"type": "text", "text": "hi"},
                {"type": ty, "toolCallId": "c1", "state": "output-available", "input": {}},
            ]));
            let e = check_user_parts(&p).unwrap_err();
            assert!(e.message.contains(ty), "{ty}: {}", e.message);
            assert_eq!(e.code, "invalid-request");
        }
    }

    #[test]
    fn message_ids_follow_the_chat_id_rules() {
        assert!(check_message_id("m_1-A").is_ok());
        assert!(check_message_id(&"a".repeat(128)).is_ok());
        for bad in ["", "../é/\u{0}", "a b", "a/b", &"a".repeat(129)] {
            assert!(check_message_id(bad).is_err(), "{bad:?}");
        }
    }
}
