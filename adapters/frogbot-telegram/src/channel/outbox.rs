//! [`TelegramOutbox`]: the engine's [`ChannelOutbox`] for Telegram. Posts the agent's replies in
//! the thread (forum topic), as a reply to the last message that talked to the bot there, split
//! with [`frogbot_model::text::split`] at Telegram's 4,096 characters.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use frogbot_core::agent::ChannelOutbox;
use frogbot_model::text::split;
use frogbot_model::{BoxError, Thread, UiMessage};
use teloxide::Bot;
use teloxide::types::MessageId;
use tracing::warn;

use crate::client::TelegramApi;
use crate::ids::split_thread_id;
use crate::render::MAX_TEXT;

/// Posts the agent's replies to Telegram.
#[derive(Debug)]
pub struct TelegramOutbox {
    api: Bot,
    /// Thread id → the last message addressed to the bot there (a hint for `reply_parameters`).
    reply_to: Mutex<HashMap<String, MessageId>>,
}

impl TelegramOutbox {
    /// An outbox posting with `api`.
    pub fn new(api: Bot) -> Self {
        Self {
            api,
            reply_to: Mutex::default(),
        }
    }

    /// Remembers `id` as the message of `thread` replies answer.
    pub(crate) fn remember(&self, thread: &str, id: MessageId) {
        self.reply_to
            .lock()
            .expect("not poisoned")
            .insert(thread.to_owned(), id);
    }

    /// Posts a notice (a refusal, a failure) in `thread`; a failure is logged.
    pub(crate) async fn say(&self, thread: &str, text: &str, reply_to: Option<MessageId>) {
        let Ok((chat, topic)) = split_thread_id(thread) else {
            return;
        };
        if let Err(e) =
            TelegramApi::send_message(&self.api, chat, topic, text, None, reply_to).await
        {
            warn!(thread, error = %e, "could not post a notice to Telegram");
        }
    }
}

#[async_trait]
impl ChannelOutbox for TelegramOutbox {
    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        let parts = split(&reply.text(), MAX_TEXT);
        if parts.is_empty() {
            return Ok(());
        }
        let (chat, topic) = split_thread_id(&thread.id)?;
        let reply_to = self
            .reply_to
            .lock()
            .expect("not poisoned")
            .get(&thread.id)
            .copied();
        for part in parts {
            TelegramApi::send_message(&self.api, chat, topic, &part, None, reply_to).await?;
        }
        Ok(())
    }
}
