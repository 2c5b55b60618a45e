//! `engine.chats()`: the chats and what is in them — chat rows, messages, changes since a
//! version, queued messages' edits and removals, a chat's state, people's messages and event
//! clicks in a web chat bound to an agent, and the change subscriptions (this process's
//! [`ChatEvent`]s, the store's pushed [`Change`](crate::store::Change)s).

use super::*;
use crate::store::{ChatFilter, QueuedOp};

/// The chats: rows, messages, history, queued edits, change subscriptions ([`Engine::chats`]).
#[derive(Clone, Copy, Debug)]
pub struct Chats<'a>(pub(super) &'a Engine);

impl<'a> Chats<'a> {
    /// Live chat changes made by this process.
    pub fn subscribe(self) -> broadcast::Receiver<ChatEvent> {
        self.0.inner.turns.subscribe()
    }

    /// The chat's state now.
    pub async fn state(self, chat: &ChatId) -> Result<TurnState> {
        Ok(self
            .0
            .store()
            .get_chat(chat)
            .await?
            .map(|c| c.state(self.0.now()))
            .unwrap_or(TurnState::Idle))
    }

    /// A person's message in a web chat bound to an agent (`POST /api/chats/{id}/messages`):
    /// its text and file parts (each a file of this chat) wait in the agent's inbox; no model
    /// runs. `None` for a repeated message id.
    pub async fn web_message(
        self,
        chat: &ChatId,
        by: Option<&UserId>,
        id: Option<String>,
        text: &str,
        files: Vec<crate::model::MessagePart>,
    ) -> Result<Option<crate::model::UiMessage>> {
        self.0.authorize_chat(by, chat, ChatAct::Write).await?;
        self.0
            .inner
            .channels
            .web_message(chat, by, id, text, files)
            .await
    }

    /// An event button clicked in the web chat (or over HTTP) by `by`: the event goes to the
    /// chat's agent's inbox.
    pub async fn web_event(
        self,
        chat: &ChatId,
        by: Option<&UserId>,
        message_id: &str,
        block_id: &str,
        value: &str,
    ) -> Result<crate::agent::EventOutcome> {
        self.0.authorize_chat(by, chat, ChatAct::Event).await?;
        self.0
            .inner
            .channels
            .web_event(chat, by, message_id, block_id, value)
            .await
    }

    /// The person `by` unpins `key` in their chat (the web chat's unpin): the message returns
    /// to the thread, as when its agent unpins it. Only in a chat bound to an agent (the only
    /// ones with pins), by whoever may write it (its owner).
    pub async fn unpin(self, chat: &ChatId, by: Option<&UserId>, key: &str) -> Result<()> {
        self.0.authorize_chat(by, chat, ChatAct::Write).await?;
        let bound = self
            .0
            .store()
            .get_chat(chat)
            .await?
            .is_some_and(|c| c.agent.is_some());
        if !bound {
            return Err(Error::NotFound {
                item: crate::error::Item::Chat,
                id: chat.to_string(),
            });
        }
        self.0
            .inner
            .channels
            .pin_agent_message(chat, key, None)
            .await
            .map(|_| ())
    }

    /// The changes any process makes on the database, as the store pushes them
    /// ([`JobStore::changes`](crate::store::JobStore::changes)); `None` when the store pushes
    /// nothing (other processes' changes are then found by polling).
    pub fn changes(self) -> Option<tokio::sync::broadcast::Receiver<crate::store::Change>> {
        self.0.store().changes()
    }

    /// One chat.
    pub async fn get(self, chat: &ChatId) -> Result<Option<ChatRow>> {
        self.0.store().get_chat(chat).await.map_err(Error::from)
    }

    /// The chats owned by `owner` (`None`: the ownerless ones), newest first.
    pub async fn list(self, owner: Option<&UserId>, limit: u32) -> Result<Vec<ChatRow>> {
        self.0
            .store()
            .list_chats(owner, limit)
            .await
            .map_err(Error::from)
    }

    /// One message of a chat by id.
    pub async fn message(self, chat: &ChatId, id: &str) -> Result<Option<StoredMessage>> {
        Ok(self.0.store().get_message(chat, id).await?)
    }

    /// A chat's messages in stored order.
    pub async fn messages(self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
        self.0
            .store()
            .list_messages(chat)
            .await
            .map_err(Error::from)
    }

    /// The messages of a chat written after `version`, with its version now.
    pub async fn changes_since(self, chat: &ChatId, version: i64) -> Result<ChatChanges> {
        self.0
            .store()
            .messages_since(chat, version)
            .await
            .map_err(Error::from)
    }

    /// Changes a queued message (its author only); the queue runs if the chat went idle meanwhile.
    pub async fn edit_queued(
        self,
        chat: &ChatId,
        id: &str,
        by: Option<&UserId>,
        edit: &QueuedEdit,
    ) -> Result<QueuedChange> {
        // Its files, as a sent message's: each one of this chat's, within the limits.
        let mut edit = edit.clone();
        if let Some(parts) = edit.parts.as_mut() {
            crate::agent::files::check_file_parts(
                self.0.store(),
                &self.0.config().files,
                chat,
                parts,
            )
            .await?;
        }
        let change = self
            .0
            .store()
            .edit_queued(&self.queued(chat, id, by), &edit)
            .await?;
        if let QueuedChange::Done(Some(m)) = &change {
            self.0.inner.turns.emit_message(chat, &m.message);
        }
        Ok(change)
    }

    /// Removes a queued message (its author only).
    pub async fn delete_queued(
        self,
        chat: &ChatId,
        id: &str,
        by: Option<&UserId>,
    ) -> Result<QueuedChange> {
        let op = self.queued(chat, id, by);
        self.0.store().delete_queued(&op).await.map_err(Error::from)
    }

    /// The queued message `id` of `chat` as `by` changes it, now.
    fn queued<'q>(&self, chat: &'q ChatId, id: &'q str, by: Option<&'q UserId>) -> QueuedOp<'q> {
        QueuedOp {
            chat,
            id,
            by,
            now: self.0.now(),
        }
    }

    /// Every owner's chats that `filter` lets through, state as of now, newest first.
    pub async fn find(self, filter: &ChatFilter) -> Result<Vec<ChatRow>> {
        self.0
            .store()
            .find_chats(filter, self.0.now())
            .await
            .map_err(Error::from)
    }
}
