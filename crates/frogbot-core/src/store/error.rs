//! What a store can fail with: [`StoreError`].

use crate::model::{BoxError, ChatId};

/// What an id names, in [`StoreError::NotFound`] and [`Error::NotFound`](crate::Error::NotFound).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Item {
    /// A chat.
    Chat,
    /// A message.
    Message,
    /// A tool call (a question call).
    ToolCall,
    /// A durable job.
    Job,
    /// A file.
    File,
}

impl std::fmt::Display for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Item::Chat => "chat",
            Item::Message => "message",
            Item::ToolCall => "tool call",
            Item::Job => "job",
            Item::File => "file",
        })
    }
}

/// Everything a [`super::Store`] method can fail with. A method that returns an error has changed
/// nothing.
///
/// Two kinds: failures of the store itself ([`StoreError::Unavailable`], [`StoreError::Locked`],
/// [`StoreError::LeaseLost`], [`StoreError::Corrupt`], [`StoreError::Migration`],
/// [`StoreError::UnsupportedDatabase`]) and the store's decisions about the operation
/// ([`StoreError::Forbidden`], [`StoreError::ChannelChat`], [`StoreError::NotFound`],
/// [`StoreError::InvalidInput`]), which the engine passes on as its own variants of the same name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database failed: unreachable, locked past its timeout, full, or any error of the
    /// driver. Nothing of the operation was written; the caller may try again later (HTTP answers
    /// 503 with `Retry-After`).
    #[error("database: {message}")]
    Unavailable {
        /// What failed and where, in a sentence (with the driver's words; never a password).
        message: String,
        /// The driver's error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// A question record is locked by another process past the wait.
    #[error("question {question} is locked by another process")]
    Locked {
        /// The question's tool call id.
        question: String,
    },
    /// A write was fenced with a lease that is no longer held (another process took the chat
    /// over).
    #[error("lease lost: chat {chat_id} is held by another turn")]
    LeaseLost {
        /// The chat whose lease was lost.
        chat_id: ChatId,
    },
    /// Stored data could not be read back, or a row the operation relies on is missing.
    #[error("stored data is corrupt: {what}")]
    Corrupt {
        /// What is wrong.
        what: String,
        /// The decoding error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// Applying the store's migrations failed.
    #[error("migration: {message}")]
    Migration {
        /// What failed, in a sentence.
        message: String,
        /// The driver's error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// The database URL names no backend this build has.
    #[error("unsupported database url {url:?}: use sqlite://PATH or postgres://…")]
    UnsupportedDatabase {
        /// The URL (without a password).
        url: String,
    },
    /// The writer may not write this chat: it belongs to another user.
    #[error("forbidden: chat {chat_id} belongs to another user")]
    Forbidden {
        /// The chat.
        chat_id: ChatId,
    },
    /// The chat is bound to an external agent: people's messages go to its inbox
    /// ([`super::AgentStore::post_message`]), and no turn runs in it.
    #[error("agent chat: chat {chat_id} is bound to an agent; messages go to its inbox")]
    AgentChat {
        /// The chat.
        chat_id: ChatId,
    },
    /// A channel chat written from outside its channel, a web chat written from a channel, or
    /// another thread's chat.
    #[error("channel chat: chat {chat_id} {reason}")]
    ChannelChat {
        /// The chat.
        chat_id: ChatId,
        /// Why, as the rest of a sentence (`"is continued only from its channel"`).
        reason: &'static str,
    },
    /// The write met a uniqueness rule of the database another writer got to first (for
    /// example a channel thread that already has a chat under another id). Nothing was written.
    #[error("conflict: {message}")]
    Conflict {
        /// What conflicted, in a sentence.
        message: String,
    },
    /// No such chat, message, question or job.
    #[error("not found: {item} {id}")]
    NotFound {
        /// What is missing.
        item: Item,
        /// Its id.
        id: String,
    },
    /// An operation whose input the store refuses (out of range, inconsistent).
    #[error("invalid input: {reason}")]
    InvalidInput {
        /// Why.
        reason: String,
    },
}

/// `Result` with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

impl StoreError {
    /// [`StoreError::Unavailable`] with a message and the driver's error.
    pub fn unavailable(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Unavailable {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// [`StoreError::Unavailable`] with a message only.
    pub fn unavailable_msg(message: impl Into<String>) -> Self {
        StoreError::Unavailable {
            message: message.into(),
            source: None,
        }
    }

    /// [`StoreError::Corrupt`] with what is wrong and the decoding error.
    pub fn corrupt(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Corrupt {
            what: what.into(),
            source: Some(source.into()),
        }
    }

    /// [`StoreError::Corrupt`] with what is wrong only.
    pub fn corrupt_msg(what: impl Into<String>) -> Self {
        StoreError::Corrupt {
            what: what.into(),
            source: None,
        }
    }

    /// [`StoreError::NotFound`].
    pub fn not_found(item: Item, id: impl Into<String>) -> Self {
        StoreError::NotFound {
            item,
            id: id.into(),
        }
    }

    /// [`StoreError::InvalidInput`].
    pub fn invalid(reason: impl Into<String>) -> Self {
        StoreError::InvalidInput {
            reason: reason.into(),
        }
    }

    /// Whether trying the same operation again later may succeed: the database was unavailable
    /// or a question record was locked.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            StoreError::Unavailable { .. } | StoreError::Locked { .. }
        )
    }
}
