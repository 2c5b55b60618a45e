//! The store's chats part, [`ChatStore`]: reading chats and their messages.

use async_trait::async_trait;

use super::*;
use crate::model::{ChatId, UserId};

/// The chats part of [`Store`]: chats and their messages, read.
#[async_trait]
pub trait ChatStore: Send + Sync {
    /// One chat.
    async fn get_chat(&self, chat: &ChatId) -> Result<Option<ChatRow>>;

    /// The chat of a channel thread, if one was created.
    async fn get_channel_chat(&self, platform: &str, thread: &str) -> Result<Option<ChatRow>>;

    /// The chats owned by `owner` (`None`: the ownerless ones), most recently updated first.
    async fn list_chats(&self, owner: Option<&UserId>, limit: u32) -> Result<Vec<ChatRow>>;

    /// One message.
    async fn get_message(&self, chat: &ChatId, id: &str) -> Result<Option<StoredMessage>>;

    /// A chat's messages in stored order: turns in order (each turn's user message, the steers that
    /// joined it, its reply), then the queued messages oldest first.
    async fn list_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>>;

    /// The messages of a chat written after `version` (see [`ChatRow::version`]), queued ones
    /// included, in stored order, with the chat's version now. What live views and the history
    /// cache read instead of the whole chat.
    async fn messages_since(&self, chat: &ChatId, version: i64) -> Result<ChatChanges>;

    /// The chat's queued messages, oldest first.
    async fn queued_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>>;
}
