//! Channels: messages arriving in a platform thread, who sent them, and the outbox that posts the
//! agent's replies back to the thread.
//!
//! The channel layer sits on top: it hands thread replies to the question engine first (a reply
//! may answer a question), sends the rest to the turn engine, and listens to the turn engine's
//! turn ends to post replies and draw questions.

use async_trait::async_trait;
use std::sync::Arc;
use tracing::{debug, error};

use super::questions::{InteractionOutcome, Questions};
use super::registry::{Registry, thread_of};
use super::turn::{SendMessage, SendResult, Sent, TurnListener, Turns};
use crate::error::{Error, Result};
use crate::model::{
    ChannelRef, ChatId, ChatInfo, Interaction, ThreadMessage, TurnState, UiMessage,
};
use crate::store::ChatRow;

/// The chat id a channel thread's chat is created with: stable, so every process maps a thread to
/// the same chat, and in the channel chats' id space (it starts with
/// [`crate::model::CHANNEL_CHAT_PREFIX`]), which the HTTP API never creates, so no web caller can
/// take it first. Chats are looked up by their channel thread, so chats created before this id
/// space existed stay in use.
pub fn channel_chat_id(platform: &str, thread: &str) -> ChatId {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{platform}\u{0}{thread}").as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    let platform: String = platform
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(32)
        .collect();
    ChatId::new(format!(
        "{}{platform}-{hex}",
        crate::model::CHANNEL_CHAT_PREFIX
    ))
    .expect("the prefix, alphanumerics, a dash and hex")
}

/// The stored id of a channel message: the platform's message id, prefixed with the platform.
pub fn channel_message_id(platform: &str, platform_message_id: &str) -> String {
    format!("{platform}-{platform_message_id}")
}

/// What happened to a channel message.
#[derive(Debug)]
#[non_exhaustive]
pub enum ChannelMessageOutcome {
    /// It answered (or was otherwise consumed by) a question.
    Consumed(InteractionOutcome),
    /// The participant failed the access check.
    Denied,
    /// It started a turn or was queued.
    Sent(Sent),
    /// The same platform message was taken before (a repeated delivery); nothing was done.
    Duplicate,
}

/// The channel layer.
pub(crate) struct Channels {
    pub(crate) turns: Arc<Turns>,
    pub(crate) questions: Arc<Questions>,
    pub(crate) registry: Arc<Registry>,
    /// One posting at a time per chat, so a thread's replies are posted in the order their turns
    /// ended (a turn releases its chat before its reply is posted, and the next may end quickly).
    pub(crate) posting:
        std::sync::Mutex<std::collections::HashMap<ChatId, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for Channels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channels").finish_non_exhaustive()
    }
}

impl Channels {
    /// Posts the reply of a channel chat's turn to its thread (when this process runs the
    /// channel). A failed or interrupted turn says so in the thread instead of leaving it silent.
    async fn deliver_reply(&self, chat: &ChatRow, reply: &UiMessage) {
        let Some(thread) = thread_of(chat) else {
            return;
        };
        let Some(outbox) = self
            .registry
            .get(&thread.platform)
            .and_then(|c| c.outbox.clone())
        else {
            return;
        };
        let noted;
        let reply = match &reply.metadata.error {
            Some(error) => {
                let mut copy = reply.clone();
                let sep = if copy.text().trim().is_empty() {
                    ""
                } else {
                    "\n\n"
                };
                copy.parts.push(crate::model::MessagePart::text(format!(
                    "{sep}⚠️ {}",
                    error.message
                )));
                noted = copy;
                &noted
            }
            None => reply,
        };
        if let Err(e) = outbox.post_reply(&thread, reply).await {
            error!(chat_id = %chat.chat_id, error = %e, "posting the reply failed");
        }
    }

    /// Whether a channel thread has a chat (a thread the bot takes part in).
    pub(crate) async fn thread_known(&self, platform: &str, thread: &str) -> Result<bool> {
        Ok(self
            .turns
            .store
            .get_channel_chat(platform, thread)
            .await?
            .is_some())
    }

    /// Handles a message in a channel thread: a reply that answers a question is consumed; else,
    /// after the identity and access checks, it starts or continues the thread's chat (queued while
    /// a turn runs or a question waits). Questions whose render failed are posted again first.
    pub(crate) async fn channel_message(
        &self,
        platform: &str,
        thread: &str,
        message: ThreadMessage,
    ) -> Result<ChannelMessageOutcome> {
        let interaction = Interaction::Message {
            message: message.clone(),
        };
        let handled = self
            .questions
            .handle_interaction(platform, Some(thread), &interaction)
            .await?;
        if handled.consumed() {
            return Ok(ChannelMessageOutcome::Consumed(handled));
        }
        let Some(channel) = self.registry.get(platform) else {
            return Err(Error::invalid(format!(
                "no channel {platform:?} in this process"
            )));
        };
        let channel_ref = ChannelRef {
            platform: platform.into(),
            thread: thread.into(),
        };
        // The thread's chat is found by its channel, never by an id a web caller could have taken.
        let existing = self.turns.store.get_channel_chat(platform, thread).await?;
        let chat_id = existing
            .as_ref()
            .map(|c| c.chat_id.clone())
            .unwrap_or_else(|| channel_chat_id(platform, thread));
        let info = existing.as_ref().map(ChatRow::info).unwrap_or(ChatInfo {
            chat_id: chat_id.clone(),
            owner: None,
            channel: Some(channel_ref.clone()),
        });
        let (actor, allowed) = self
            .questions
            .identify(&channel, &info, &message.author)
            .await;
        if !allowed {
            return Ok(ChannelMessageOutcome::Denied);
        }
        // Posted again with the next message: questions whose render failed or whose record expired.
        if existing
            .as_ref()
            .is_some_and(|c| c.awaiting_message_id.is_some())
        {
            self.questions.render_pending(&chat_id).await?;
        }
        // The platform's message id names the stored message, so a delivery the platform repeats
        // (a retry reaching this or another process) is recognised by the store, not run twice.
        let message_id =
            (!message.id.is_empty()).then(|| channel_message_id(platform, &message.id));
        let sent = self
            .turns
            .send(
                SendMessage {
                    chat_id,
                    id: message_id,
                    parts: vec![crate::model::MessagePart::text(message.text)],
                    author: actor.user,
                    delivery: crate::model::Delivery::Queue,
                    model: None,
                    reasoning: None,
                    channel: Some(channel_ref),
                },
                true,
            )
            .await?;
        Ok(match sent {
            SendResult::Started(h) => ChannelMessageOutcome::Sent(Sent::Started(h)),
            SendResult::Queued {
                message_id,
                delivery,
            } => ChannelMessageOutcome::Sent(Sent::Queued {
                message_id,
                delivery,
            }),
            SendResult::Duplicate => {
                debug!(thread, "repeated channel message; already taken");
                ChannelMessageOutcome::Duplicate
            }
        })
    }
}

#[async_trait]
impl TurnListener for Channels {
    async fn offers_questions(&self, chat: &ChatRow) -> bool {
        self.questions.offered_in(chat).await
    }

    async fn turn_ended(&self, chat: &ChatRow, reply: &UiMessage, state: TurnState) {
        if chat.channel.is_none() {
            return;
        }
        let order = self
            .posting
            .lock()
            .expect("posting")
            .entry(chat.chat_id.clone())
            .or_default()
            .clone();
        {
            let _turn = order.lock().await;
            self.deliver_reply(chat, reply).await;
        }
        {
            let mut posting = self.posting.lock().expect("posting");
            if Arc::strong_count(&order) == 2 {
                posting.remove(&chat.chat_id);
            }
        }
        if state == TurnState::Awaiting
            && let Err(e) = self.questions.render_pending(&chat.chat_id).await
        {
            error!(chat_id = %chat.chat_id, error = %e, "rendering the questions failed");
        }
    }
}
