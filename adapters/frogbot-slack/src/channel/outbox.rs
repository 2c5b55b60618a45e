//! The outbox (feature `engine`): posts the agent's replies in their Slack thread as `mrkdwn`
//! ([`crate::format`]), split with [`frogbot_model::text::split`] below Slack's 40,000-character
//! `text` limit, and marks the person's messages with the acknowledgement reactions.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use frogbot_core::agent::ChannelOutbox;
use frogbot_model::{Ack, BoxError, Thread, UiMessage};

use super::SlackAdapter;
use crate::client::SlackApi;
use crate::ids::split_id;

/// Slack truncates a message's `text` beyond 40,000 characters; a reply is split into messages of
/// at most this many (a margin for what Slack counts differently, e.g. escaped `&<>`).
pub const MAX_REPLY_CHARS: usize = 39_000;

/// How many messages [`AckMarks`] remembers before it forgets them all (a message whose turn
/// never ended, e.g. a crash, is not kept forever).
const MAX_MARKED: usize = 10_000;

/// The Slack emoji name (for `reactions.add`, no colons) that shows `ack`: `eyes` 👀,
/// `hourglass_flowing_sand` ⏳, `white_check_mark` ✅, `x` ❌.
pub fn reaction_name(ack: Ack) -> &'static str {
    match ack {
        Ack::Seen => "eyes",
        Ack::Working => "hourglass_flowing_sand",
        Ack::Done => "white_check_mark",
        Ack::Failed => "x",
    }
}

/// The ack reaction each message shows now (`channel:ts` → ack), until its last (Done or
/// Failed), so the next one replaces it.
#[derive(Debug, Default)]
pub struct AckMarks {
    shown: Mutex<HashMap<String, Ack>>,
}

impl AckMarks {
    /// Marks the message `message_id` (`channel:ts`) with `ack` over `api`: adds its reaction,
    /// then removes the one it replaces. A failed removal is logged, not returned: the new state
    /// shows either way.
    pub async fn mark<A: SlackApi + ?Sized>(
        &self,
        api: &A,
        message_id: &str,
        ack: Ack,
    ) -> Result<(), BoxError> {
        let (channel, ts) = split_id(message_id)?;
        api.add_reaction(channel, ts, reaction_name(ack)).await?;
        let before = {
            let mut shown = self.shown.lock().unwrap_or_else(|p| p.into_inner());
            let before = match ack {
                Ack::Done | Ack::Failed => shown.remove(message_id),
                Ack::Seen | Ack::Working => shown.insert(message_id.to_owned(), ack),
            };
            if shown.len() > MAX_MARKED {
                shown.clear();
            }
            before
        };
        if let Some(before) = before.filter(|b| *b != ack)
            && let Err(e) = api
                .remove_reaction(channel, ts, reaction_name(before))
                .await
        {
            tracing::debug!(message = %message_id, error = %e, "removing the previous ack reaction failed");
        }
        Ok(())
    }
}

#[async_trait]
impl ChannelOutbox for SlackAdapter {
    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        let pieces = crate::format::messages(&reply.text(), MAX_REPLY_CHARS);
        if pieces.is_empty() {
            return Ok(());
        }
        let (channel, thread_ts) = split_id(&thread.id)?;
        let api = self.inner.questions.api();
        for piece in pieces {
            api.post_message(channel, Some(thread_ts), Vec::new(), &piece)
                .await?;
        }
        Ok(())
    }

    /// `reactions.add` with the new state's emoji, then `reactions.remove` of the one before
    /// (see [`AckMarks`]).
    async fn ack(&self, _thread: &Thread, message_id: &str, ack: Ack) -> Result<(), BoxError> {
        self.inner
            .acks
            .mark(self.inner.questions.api(), message_id, ack)
            .await
    }

    /// Nothing: the ⏳ reaction shows the turn running. (`assistant.threads.setStatus` would
    /// need to know which threads are assistant threads, which the adapter does not track.)
    async fn working(&self, _thread: &Thread) -> Result<(), BoxError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{RecordingSlack, SlackCall};

    fn reactions(calls: &[SlackCall]) -> Vec<(bool, String)> {
        calls
            .iter()
            .filter_map(|c| match c {
                SlackCall::AddReaction { channel, ts, name } => {
                    assert_eq!((channel.as_str(), ts.as_str()), ("C1", "1.5"));
                    Some((true, name.clone()))
                }
                SlackCall::RemoveReaction { channel, ts, name } => {
                    assert_eq!((channel.as_str(), ts.as_str()), ("C1", "1.5"));
                    Some((false, name.clone()))
                }
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn each_ack_adds_its_reaction_and_removes_the_one_before() {
        let api = RecordingSlack::new();
        let marks = AckMarks::default();
        for ack in [Ack::Seen, Ack::Working, Ack::Failed] {
            marks.mark(&api, "C1:1.5", ack).await.unwrap();
        }
        let r = |add: bool, name: &str| (add, name.to_owned());
        assert_eq!(
            reactions(&api.calls()),
            [
                r(true, "eyes"),
                r(true, "hourglass_flowing_sand"),
                r(false, "eyes"),
                r(true, "x"),
                r(false, "hourglass_flowing_sand"),
            ]
        );
        // Its last ack forgets the message.
        assert!(marks.shown.lock().unwrap().is_empty());
        assert!(marks.mark(&api, "no-colon", Ack::Seen).await.is_err());
    }
}
