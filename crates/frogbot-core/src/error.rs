//! The crate's one error enum.

pub use frogbot_model::BoxError;

/// Everything that can go wrong inside `frogbot-core`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A chat id that is not 1–128 characters of `A-Z a-z 0-9 _ -`.
    #[error("invalid chat id {0:?}: use 1-128 characters of A-Z a-z 0-9 _ -")]
    InvalidChatId(String),
    /// Input that does not fit its schema, with the reason.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The store's database failed: unreachable, locked past its timeout, full, or any error of
    /// the driver. Nothing of the operation was written; the caller may try again later (HTTP
    /// answers 503).
    #[error("database: {0}")]
    Storage(String),
    /// Applying the store's migrations failed.
    #[error("migration: {0}")]
    Migration(String),
    /// A stored JSON document could not be read back.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// JSON (de)serialisation failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// A write was fenced with a lease that is no longer held (another process took the chat over).
    #[error("lease lost: chat {chat_id} is held by another turn")]
    LeaseLost {
        /// The chat whose lease was lost.
        chat_id: String,
    },
    /// A lock on a question record could not be taken in time.
    #[error("question {0} is locked by another process")]
    Locked(String),
    /// A turn is already running or a question is waiting in this chat (local `generate` calls do not queue).
    #[error("turn in progress in chat {0}")]
    TurnInProgress(String),
    /// The chosen model or reasoning option is not offered.
    #[error("selection unavailable: {0}")]
    SelectionUnavailable(String),
    /// The caller is not the chat's owner (a web chat is written by its owner only).
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// A channel chat written from outside its channel, or a channel-space chat id used by a web
    /// or HTTP caller.
    #[error("channel chat: {0}")]
    ChannelChat(String),
    /// No such chat, message or tool call.
    #[error("not found: {0}")]
    NotFound(String),
    /// The question call is already answered, dismissed, expired or cancelled.
    #[error("stale: {0}")]
    Stale(String),
    /// An answer that does not fit the question's input.
    #[error("invalid answer: {0}")]
    InvalidAnswer(String),
    /// The database URL names no backend this build has.
    #[error("unsupported database url {0:?}: use sqlite://PATH or postgres://…")]
    UnsupportedDatabase(String),
    /// The engine is stopping and takes no new work.
    #[error("stopping")]
    Stopping,
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<frogbot_model::Error> for Error {
    fn from(e: frogbot_model::Error) -> Self {
        match e {
            frogbot_model::Error::InvalidChatId(id) => Error::InvalidChatId(id),
            other => Error::InvalidInput(other.to_string()),
        }
    }
}
