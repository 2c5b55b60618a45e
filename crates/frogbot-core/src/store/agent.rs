//! The store's agent part, [`AgentStore`]: chats bound to an external agent, messages posted
//! outside turns, and the agent's inbox.

use async_trait::async_trait;

use super::*;

/// The agent part of [`Store`]: an external agent's conversation.
#[async_trait]
pub trait AgentStore: Send + Sync {
    /// Binds a chat to an external agent, creating it as `send` would when it is missing (the
    /// same writer rules: a channel chat only by its thread, an owned chat only by its owner).
    /// A chat bound to another agent is left as it is ([`Bound::Other`]).
    async fn bind_agent(&self, op: &BindAgentOp<'_>) -> Result<Bound>;

    /// Appends a message outside any turn at the chat's end (a new turn position), with
    /// `op.job`; a known message id → [`PostedMessage::Duplicate`] and nothing written. The
    /// lease, the wait and the queue are left alone. [`StoreError::NotFound`] for no chat.
    async fn post_message(&self, op: &PostMessageOp<'_>) -> Result<PostedMessage>;

    /// Replaces a stored (not queued) message's parts and metadata, when its version is still
    /// `op.expected_version`, with `op.job`; else nothing changes ([`MessageUpdate::Moved`]).
    async fn update_message(&self, op: &UpdateMessageOp<'_>) -> Result<MessageUpdate>;

    /// The oldest messages waiting in `op.agent`'s inbox (of the chats bound to it), at most
    /// `op.limit`: each leaves the inbox and is marked Seen (`metadata.ack`) in the same
    /// transaction, so two readers never get the same message.
    async fn take_inbox(&self, op: &InboxOp<'_>) -> Result<Vec<StoredMessage>>;
}
