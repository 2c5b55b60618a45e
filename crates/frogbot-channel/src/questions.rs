//! What every adapter's question hooks share beyond drawing: closing each message a question
//! was posted in ([`settle_each`]), and the labels of the options a person checked
//! ([`labels_of`]).

use std::fmt::Display;
use std::future::Future;

use frogbot_model::{BoxError, QuestionItem, QuestionMessage};

/// The labels of `item`'s options at the indices `checked`, in that order (an index out of range
/// is left out): the answer of a multiple choice whose checked options are sent.
pub fn labels_of(item: &QuestionItem, checked: &[usize]) -> Vec<String> {
    let label = |&o: &usize| item.options.get(o).map(|x| x.label.clone());
    checked.iter().filter_map(label).collect()
}

/// Runs `settle` on every message a question was posted in, in order — each one, even after one
/// fails, so the others still lose their controls — logging each failure with the message's id;
/// the first failure comes back (the engine calls the hook again, and settling a message twice
/// leaves it the same).
pub async fn settle_each<'m, E, F, Fut>(
    platform: &str,
    messages: &'m [QuestionMessage],
    mut settle: F,
) -> Result<(), BoxError>
where
    F: FnMut(&'m QuestionMessage) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Into<BoxError> + Display,
{
    let mut first_error = None;
    for message in messages {
        if let Err(e) = settle(message).await {
            tracing::warn!(%platform, message = %message.id, error = %e, "could not settle a question message");
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str) -> QuestionMessage {
        QuestionMessage {
            id: id.into(),
            posted_at: String::new(),
            question: None,
        }
    }

    #[test]
    fn labels_of_checked_options_leave_out_what_is_not_there() {
        let input = frogbot_model::approval_question("t", &Default::default(), &[], None);
        let item = &input.questions[0];
        let labels = labels_of(item, &[1, 7, 0]);
        assert_eq!(
            labels,
            [item.options[1].label.clone(), item.options[0].label.clone()]
        );
    }

    #[tokio::test]
    async fn every_message_is_settled_and_the_first_failure_comes_back() {
        let messages = [message("a"), message("b"), message("c")];
        let mut seen = Vec::new();
        let result = settle_each("test", &messages, |m| {
            seen.push(m.id.clone());
            let id = m.id.clone();
            async move {
                match id.as_str() {
                    "a" => Err(format!("{id} is gone")),
                    "b" => Err(format!("{id} failed too")),
                    _ => Ok(()),
                }
            }
        })
        .await;
        assert_eq!(seen, ["a", "b", "c"], "one failure stops no other message");
        assert_eq!(result.unwrap_err().to_string(), "a is gone");
    }
}
