//! The `ChannelOutbox`: the agent's replies posted in the thread, split with
//! `frogbot_model::text::split` at Discord's 2,000 characters.

use std::sync::Arc;

use async_trait::async_trait;
use frogbot_core::agent::ChannelOutbox;
use frogbot_model::{BoxError, Thread, UiMessage};
use serenity::builder::CreateMessage;

use crate::client::DiscordApi;
use crate::ids::channel_id;
use crate::render::MESSAGE_LIMIT;

/// Posts the agent's replies, split at Discord's 2,000 characters (nothing for an empty reply).
pub struct DiscordOutbox<A: DiscordApi> {
    api: Arc<A>,
}

impl<A: DiscordApi> DiscordOutbox<A> {
    /// Over `api`.
    pub fn new(api: Arc<A>) -> Self {
        DiscordOutbox { api }
    }
}

impl<A: DiscordApi> std::fmt::Debug for DiscordOutbox<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordOutbox").finish_non_exhaustive()
    }
}

#[async_trait]
impl<A: DiscordApi> ChannelOutbox for DiscordOutbox<A> {
    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        let channel = channel_id(&thread.id)?;
        for piece in frogbot_model::text::split(&reply.text(), MESSAGE_LIMIT) {
            self.api
                .send_message(channel, &CreateMessage::new().content(piece))
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RecordingDiscord;

    #[tokio::test]
    async fn long_replies_are_split_and_empty_ones_post_nothing() {
        let api = Arc::new(RecordingDiscord::new());
        let outbox = DiscordOutbox::new(api.clone());
        let thread = Thread {
            id: "700000000000000007".into(),
            platform: "discord".into(),
            chat_id: "c".into(),
        };
        let reply: UiMessage = serde_json::from_value(serde_json::json!({
            "id": "m", "role": "assistant", "parts": [{"type": "text", "text": "frog ".repeat(900)}]
        }))
        .unwrap();
        outbox.post_reply(&thread, &reply).await.unwrap();
        let calls = api.calls();
        assert_eq!(calls.len(), 3);
        assert!(calls.iter().all(|c| c.method == "send_message"
            && c.body["content"].as_str().unwrap().chars().count() <= 2000));
        let empty: UiMessage = serde_json::from_value(serde_json::json!({
            "id": "m", "role": "assistant", "parts": [{"type": "text", "text": "  "}]
        }))
        .unwrap();
        outbox.post_reply(&thread, &empty).await.unwrap();
        assert_eq!(api.calls().len(), 3);
    }
}
