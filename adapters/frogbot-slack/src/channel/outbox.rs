//! The outbox (feature `engine`): posts the agent's replies in their Slack thread as `mrkdwn`
//! ([`crate::format`]), split with [`frogbot_model::text::split`] below Slack's 40,000-character
//! `text` limit.

use async_trait::async_trait;
use frogbot_core::agent::ChannelOutbox;
use frogbot_model::{BoxError, Thread, UiMessage};

use super::SlackAdapter;
use crate::client::SlackApi;
use crate::ids::split_id;

/// Slack truncates a message's `text` beyond 40,000 characters; a reply is split into messages of
/// at most this many (a margin for what Slack counts differently, e.g. escaped `&<>`).
pub const MAX_REPLY_CHARS: usize = 39_000;

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
}
