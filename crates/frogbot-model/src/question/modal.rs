//! The form locator codec: which thread and message a form a piece opens itself belongs to,
//! written into and read back from the form's private metadata.

use serde::{Deserialize, Serialize};

/// The form locator a piece stores in a form it opens itself: which thread and which message the
/// form was opened from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionModalMetadata {
    /// The conversation thread id.
    pub thread_id: String,
    /// The question message the form was opened from.
    pub message_id: String,
}

const MODAL_METADATA_PREFIX: &str = "fq1:";

/// Encodes a form locator for a form's private metadata (compact: `fq1:` then a JSON pair).
pub fn encode_question_modal_metadata(locator: &QuestionModalMetadata) -> String {
    let pair = serde_json::to_string(&(&locator.thread_id, &locator.message_id))
        .expect("two strings always serialise");
    format!("{MODAL_METADATA_PREFIX}{pair}")
}

/// Decodes a form locator; `None` for metadata that is not one.
pub fn decode_question_modal_metadata(metadata: &str) -> Option<QuestionModalMetadata> {
    let pair = metadata.strip_prefix(MODAL_METADATA_PREFIX)?;
    let (thread_id, message_id): (String, String) = serde_json::from_str(pair).ok()?;
    Some(QuestionModalMetadata {
        thread_id,
        message_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modal_metadata_round_trips() {
        let l = QuestionModalMetadata {
            thread_id: "C1:17.5|x\"y".into(),
            message_id: "m:1".into(),
        };
        let s = encode_question_modal_metadata(&l);
        assert_eq!(decode_question_modal_metadata(&s), Some(l));
        assert_eq!(decode_question_modal_metadata("hello"), None);
        assert_eq!(decode_question_modal_metadata("fq1:[1]"), None);
    }
}
