//! The `ChannelOutbox`: the agent's replies posted in the thread, split with
//! `frogbot_model::text::split` at Discord's 2,000 characters; Markdown as the model wrote it
//! ([`crate::format`]), sent with empty `allowed_mentions` so a reply pings no one.

use std::sync::Arc;

use async_trait::async_trait;
use frogbot_core::agent::ChannelOutbox;
use std::collections::HashMap;
use std::sync::Mutex;

use frogbot_model::{Ack, BoxError, Thread, UiMessage};
use serenity::model::id::MessageId;

use crate::client::DiscordApi;
use crate::format;
use crate::ids::{channel_id, message_id as message_id_of};
use crate::render::MESSAGE_LIMIT;

/// Posts the agent's replies, split at Discord's 2,000 characters (nothing for an empty reply).
pub struct DiscordOutbox<A: DiscordApi> {
    api: Arc<A>,
    /// The ack reaction each message shows now, until its last (Done or Failed).
    shown: Mutex<HashMap<MessageId, Ack>>,
}

impl<A: DiscordApi> DiscordOutbox<A> {
    /// Over `api`.
    pub fn new(api: Arc<A>) -> Self {
        DiscordOutbox {
            api,
            shown: Mutex::default(),
        }
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
        for piece in format::messages(&reply.text(), MESSAGE_LIMIT) {
            self.api
                .send_message(channel, &format::reply_message(piece))
                .await?;
        }
        Ok(())
    }

    /// Adds `ack`'s emoji as the bot's reaction, then takes the bot's previous ack reaction off
    /// (a failure there is logged: the new state shows either way).
    async fn ack(&self, thread: &Thread, message_id: &str, ack: Ack) -> Result<(), BoxError> {
        let channel = channel_id(&thread.id)?;
        let message = message_id_of(message_id)?;
        self.api.react(channel, message, ack.emoji()).await?;
        let before = {
            let mut shown = self.shown.lock().expect("not poisoned");
            let before = match ack {
                Ack::Done | Ack::Failed => shown.remove(&message),
                _ => shown.insert(message, ack),
            };
            // A message whose turn never ended (a crash) is forgotten rather than kept forever.
            if shown.len() > 10_000 {
                shown.clear();
            }
            before
        };
        if let Some(before) = before.filter(|b| *b != ack)
            && let Err(e) = self.api.unreact(channel, message, before.emoji()).await
        {
            tracing::debug!(message = %message, error = %e, "removing the previous ack reaction failed");
        }
        Ok(())
    }

    /// "Typing…" in the thread, which Discord shows for 10 seconds.
    async fn working(&self, thread: &Thread) -> Result<(), BoxError> {
        self.api.typing(channel_id(&thread.id)?).await?;
        Ok(())
    }

    fn working_every(&self) -> std::time::Duration {
        std::time::Duration::from_secs(8)
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
            && c.body["content"].as_str().unwrap().chars().count() <= 2000
            && c.body["allowed_mentions"]["parse"] == serde_json::json!([])));
        let empty: UiMessage = serde_json::from_value(serde_json::json!({
            "id": "m", "role": "assistant", "parts": [{"type": "text", "text": "  "}]
        }))
        .unwrap();
        outbox.post_reply(&thread, &empty).await.unwrap();
        assert_eq!(api.calls().len(), 3);
    }

    /// Over serenity's HTTP client and the fake Discord: one ack reaction at a time.
    #[tokio::test]
    async fn acks_replace_each_other_as_one_reaction_and_working_types() {
        let fake = crate::testing::FakeDiscord::start(1, 2).await;
        let outbox = DiscordOutbox::new(fake.http());
        let channel = fake.new_id();
        let thread = Thread {
            id: channel.to_string(),
            platform: "discord".into(),
            chat_id: "c".into(),
        };
        let alice = crate::testing::user(fake.new_id(), "alice", false);
        let said = fake.user_message(channel, None, &alice, "hi");
        let id = said["id"].as_str().unwrap().to_owned();
        for ack in [Ack::Seen, Ack::Working, Ack::Done] {
            outbox.ack(&thread, &id, ack).await.unwrap();
            assert_eq!(fake.own_reactions(&id), [ack.emoji()], "{ack:?}");
        }
        outbox.working(&thread).await.unwrap();
        let calls: Vec<(String, String)> = fake
            .calls()
            .into_iter()
            .map(|c| (c.method, c.path))
            .collect();
        let on = format!("/api/v10/channels/{channel}/messages/{id}/reactions");
        let call = |m: &str, emoji: &str| (m.to_owned(), format!("{on}/{emoji}/@me"));
        assert_eq!(
            calls,
            [
                call("PUT", "%F0%9F%91%80"),
                call("PUT", "%E2%8F%B3"),
                call("DELETE", "%F0%9F%91%80"),
                call("PUT", "%E2%9C%85"),
                call("DELETE", "%E2%8F%B3"),
                (
                    "POST".to_owned(),
                    format!("/api/v10/channels/{channel}/typing")
                ),
            ]
        );
        assert_eq!(outbox.working_every(), std::time::Duration::from_secs(8));

        // A failed turn; a refused removal does not fail the ack (the old reaction stays).
        let other = fake.user_message(channel, None, &alice, "again");
        let other = other["id"].as_str().unwrap().to_owned();
        outbox.ack(&thread, &other, Ack::Seen).await.unwrap();
        fake.refuse_reaction_removals(true);
        outbox.ack(&thread, &other, Ack::Working).await.unwrap();
        assert_eq!(fake.own_reactions(&other), ["👀", "⏳"]);
        fake.refuse_reaction_removals(false);
        outbox.ack(&thread, &other, Ack::Failed).await.unwrap();
        assert_eq!(fake.own_reactions(&other), ["👀", "❌"]);
        // A message Discord does not know: the ack fails (the engine logs it).
        assert!(
            outbox
                .ack(&thread, "700000000000000099", Ack::Seen)
                .await
                .is_err()
        );
    }

    /// Over serenity's HTTP client and the fake Discord: what is sent is what Discord gets.
    #[tokio::test]
    async fn replies_go_out_with_empty_allowed_mentions() {
        let fake = crate::testing::FakeDiscord::start(1, 2).await;
        let outbox = DiscordOutbox::new(fake.http());
        let thread = Thread {
            id: "700000000000000007".into(),
            platform: "discord".into(),
            chat_id: "c".into(),
        };
        let text = "@everyone look: <@&42> and <@7>\n\n| a | b |\n|---|---|\n| 1 | 2 |";
        let reply: UiMessage = serde_json::from_value(serde_json::json!({
            "id": "m", "role": "assistant", "parts": [{"type": "text", "text": text}]
        }))
        .unwrap();
        outbox.post_reply(&thread, &reply).await.unwrap();
        let posts: Vec<_> = fake
            .calls()
            .into_iter()
            .filter(|c| {
                c.method == "POST" && c.path.ends_with("/channels/700000000000000007/messages")
            })
            .collect();
        assert_eq!(posts.len(), 1);
        assert_eq!(posts[0].status, 200);
        assert_eq!(
            posts[0].body["allowed_mentions"],
            serde_json::json!({"parse": [], "users": [], "roles": []})
        );
        assert_eq!(
            posts[0].body["content"],
            "@everyone look: <@&42> and <@7>\n\n```\na | b\n--+--\n1 | 2\n```"
        );
    }
}
