//! The engine's error, [`Error`]; the store's is [`crate::store::StoreError`].

pub use frogbot_model::BoxError;

use crate::model::ChatId;
pub use crate::store::Item;
use crate::store::StoreError;

/// Why a question call can no longer be settled ([`Error::Stale`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StaleReason {
    /// It is already answered, dismissed or cancelled.
    Settled,
    /// It has expired.
    Expired,
}

impl std::fmt::Display for StaleReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StaleReason::Settled => "is already settled",
            StaleReason::Expired => "has expired",
        })
    }
}

/// Everything the engines (turns, questions, channels) can fail with.
///
/// The store's decisions ([`StoreError::Forbidden`], [`StoreError::ChannelChat`],
/// [`StoreError::NotFound`], [`StoreError::InvalidInput`]) arrive as the variants of the same
/// name here (see the `From<StoreError>` impl); [`Error::Store`] carries only failures of the
/// store itself (unavailable, locked, lease lost, corrupt, migration).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The authorization policy refused the caller ([`crate::policy`]).
    #[error("{0}")]
    Denied(crate::policy::Denied),
    /// A chat id that is not 1–128 characters of `A-Z a-z 0-9 _ -`.
    #[error("invalid chat id {0:?}: use 1-128 characters of A-Z a-z 0-9 _ -")]
    InvalidChatId(String),
    /// Input that does not fit its schema, with the reason.
    #[error("invalid input: {reason}")]
    InvalidInput {
        /// Why.
        reason: String,
    },
    /// A client message id the chat has already (HTTP answers 409).
    #[error("chat {chat_id} already has a message {message_id:?}")]
    DuplicateMessage {
        /// The chat.
        chat_id: ChatId,
        /// The message id sent again.
        message_id: String,
    },
    /// A turn is already running or a question is waiting in this chat (local `generate` calls
    /// do not queue).
    #[error("turn in progress in chat {chat_id}")]
    TurnInProgress {
        /// The chat.
        chat_id: ChatId,
    },
    /// The chosen model or reasoning option is not offered.
    #[error("selection unavailable: {}", selection_message(model, reasoning.as_deref()))]
    SelectionUnavailable {
        /// The model id asked for (or the default).
        model: String,
        /// The reasoning option asked for, when it is the one not offered for `model`.
        reasoning: Option<String>,
    },
    /// The caller is not the chat's owner (a web chat is written by its owner only).
    #[error("forbidden: chat {chat_id} belongs to another user")]
    Forbidden {
        /// The chat.
        chat_id: ChatId,
    },
    /// A message sent to start or queue a turn in a chat bound to an external agent (no turn runs
    /// there: a person's message goes to the agent's inbox, `engine.chats().web_message`).
    #[error("agent chat: chat {chat_id} is bound to an agent; messages go to its inbox")]
    AgentChat {
        /// The chat.
        chat_id: ChatId,
    },
    /// A channel chat written from outside its channel, or a channel-space chat id used by a web
    /// or HTTP caller.
    #[error("channel chat: chat {chat_id} {reason}")]
    ChannelChat {
        /// The chat.
        chat_id: ChatId,
        /// Why, as the rest of a sentence (`"is continued only from its channel"`).
        reason: &'static str,
    },
    /// No such chat, message or tool call.
    #[error("not found: {item} {id}")]
    NotFound {
        /// What is missing.
        item: Item,
        /// Its id.
        id: String,
    },
    /// The question call is already answered, dismissed, expired or cancelled.
    #[error("stale: {tool_call_id} {reason}")]
    Stale {
        /// The question's tool call id.
        tool_call_id: String,
        /// Why it cannot be settled.
        reason: StaleReason,
    },
    /// An answer that does not fit the question's input.
    #[error("invalid answer: {reason}")]
    InvalidAnswer {
        /// Why.
        reason: String,
    },
    /// A channel's platform refused or failed a call made for the caller (opening an ask's
    /// thread): HTTP answers 502.
    #[error("{platform}: {reason}")]
    Channel {
        /// The platform.
        platform: String,
        /// What failed.
        reason: String,
    },
    /// A file refused: too large, a media type not allowed, too many in one message, an upload
    /// cut off, a file part naming no file of the chat.
    #[error(transparent)]
    File(#[from] FileError),
    /// The engine is stopping and takes no new work.
    #[error("stopping")]
    Stopping,
    /// The store failed (see [`StoreError`]); [`Error::is_transient`] tells whether trying again
    /// later may help.
    #[error(transparent)]
    Store(StoreError),
    /// An internal invariant does not hold: a bug, not the caller's fault (HTTP answers 500).
    #[error("internal error: {0}")]
    Internal(String),
}

fn selection_message(model: &str, reasoning: Option<&str>) -> String {
    match reasoning {
        Some(r) => format!("reasoning option {r:?} is not offered for model {model:?}"),
        None => format!("model {model:?} is not offered"),
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// [`Error::InvalidInput`].
    pub fn invalid(reason: impl Into<String>) -> Self {
        Error::InvalidInput {
            reason: reason.into(),
        }
    }

    /// Whether trying the same operation again later may succeed: the store was unavailable or
    /// a question record was locked ([`StoreError::is_transient`]). Channel adapters answer such
    /// failures with a retry.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Store(e) if e.is_transient())
    }

    /// The store's error, when this is one.
    pub fn as_store(&self) -> Option<&StoreError> {
        match self {
            Error::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Forbidden { chat_id } => Error::Forbidden { chat_id },
            StoreError::AgentChat { chat_id } => Error::AgentChat { chat_id },
            StoreError::ChannelChat { chat_id, reason } => Error::ChannelChat { chat_id, reason },
            StoreError::NotFound { item, id } => Error::NotFound { item, id },
            StoreError::InvalidInput { reason } => Error::InvalidInput { reason },
            other => Error::Store(other),
        }
    }
}

impl From<frogbot_model::Error> for Error {
    fn from(e: frogbot_model::Error) -> Self {
        match e {
            frogbot_model::Error::InvalidChatId(id) => Error::InvalidChatId(id),
            other => Error::invalid(other.to_string()),
        }
    }
}

/// Why a file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// Larger than `FileLimits::max_bytes`.
    #[error("file too large: the limit is {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: u64,
    },
    /// A media type `FileLimits::media_types` does not accept, or not a media type at all.
    #[error("media type {media_type:?} is not accepted")]
    MediaType {
        /// The media type sent.
        media_type: String,
    },
    /// More files in one message than `FileLimits::max_per_message`.
    #[error("too many files in one message: the limit is {limit}")]
    TooMany {
        /// The limit.
        limit: usize,
    },
    /// The platform will not give the file (e.g. larger than its bots may download): `why`
    /// completes "it is …".
    #[error("the platform refused the file: it is {why}")]
    Refused {
        /// Why, as a person reads it.
        why: String,
    },
    /// The upload failed or was cut off before its end: nothing was kept.
    #[error("the upload failed: {message}")]
    Upload {
        /// What failed.
        message: String,
    },
    /// A file part whose URL names no file of this chat (upload the file to the chat first, or
    /// send it as a `data:` URL).
    #[error("no file {url:?} in this chat: upload it to the chat first")]
    Unknown {
        /// The URL.
        url: String,
    },
}
