//! The crate's one error enum.

use frogbot_core::model::Transient;

/// Everything that can go wrong talking to a Chat Completions server.
///
/// [`Model::stream`](frogbot_core::agent::Model::stream) returns these boxed as
/// [`BoxError`](frogbot_core::BoxError); downcast to inspect them. A failure worth retrying (a
/// 429, a 5xx, a connection refused, reset or timed out, a stream that broke off) carries a
/// [`Transient`] in its source chain (`Transient::find`), also once the client's own retries are
/// used up ([`Error::GaveUp`], [`Error::WaitTooLong`]), so a caller can tell it from a permanent
/// failure (a 400, a 401, a malformed stream).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No rustls crypto provider is installed for the process.
    #[error(
        "no rustls crypto provider is installed: call frogbot_openai::install_crypto_provider() \
         (or install one yourself) before creating the client"
    )]
    NoCryptoProvider,
    /// The base URL is not an absolute `http` or `https` URL.
    #[error(
        "invalid base URL {0:?}: expected an absolute http(s) URL such as http://localhost:11434/v1"
    )]
    InvalidBaseUrl(String),
    /// The API key contains characters that cannot be sent in an HTTP header.
    #[error("the API key cannot be sent in an HTTP header (it contains invalid characters)")]
    InvalidApiKey,
    /// `max_retries` is over [`MAX_RETRIES`](crate::MAX_RETRIES).
    #[error("max_retries {0} is over the limit of {limit}", limit = crate::MAX_RETRIES)]
    TooManyRetries(u32),
    /// The HTTP client could not be built.
    #[error("building the HTTP client failed: {0}")]
    HttpClient(#[source] reqwest::Error),
    /// The request's reasoning option has no Chat Completions `reasoning_effort` equivalent.
    #[error(
        "unsupported reasoning option {0:?}: expected none, minimal, low, medium, high, xhigh or max"
    )]
    UnsupportedReasoning(String),
    /// The request body could not be serialised.
    #[error("the chat completions request could not be serialised: {0}")]
    Serialize(#[source] serde_json::Error),
    /// The request could not be sent (it could not be built, or a redirect failed).
    #[error("chat completions request failed: {0}")]
    Request(#[source] reqwest::Error),
    /// The server answered with an HTTP error status. A 408, 429 (except `insufficient_quota`)
    /// or 5xx carries a [`Transient`] (with the server's `Retry-After`, if it sent one).
    #[error("chat completions request failed: HTTP {status}: {message}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The server's error message (or the start of its body).
        message: String,
        /// Set when the status is worth retrying.
        #[source]
        transient: Option<Transient>,
    },
    /// No answer came: the connection was refused, reset or timed out before the response
    /// headers arrived (always transient).
    #[error("chat completions request failed: {0}")]
    Connection(#[source] Transient),
    /// The event stream's connection failed part-way (reset, timed out; always transient).
    #[error("chat completions stream failed: {0}")]
    Stream(#[source] Transient),
    /// The server sent an event that is not a valid chunk (not JSON, not server-sent events).
    #[error("chat completions stream failed: {0}")]
    Malformed(String),
    /// The server reported an error inside the event stream. With a 429 or 5xx `code` it carries
    /// a [`Transient`].
    #[error("the server reported an error in the stream: {message}")]
    Provider {
        /// The server's message (and code).
        message: String,
        /// Set when the error's code is worth retrying.
        #[source]
        transient: Option<Transient>,
    },
    /// The stream ended before the server sent a `finish_reason` (the connection closed early;
    /// transient).
    #[error("the chat completions stream ended before the model finished (no finish_reason)")]
    Incomplete(#[source] Transient),
    /// A retryable failure that happened on every attempt: `last` is the last one.
    #[error("{last} (gave up after {attempts} attempts)")]
    GaveUp {
        /// Requests made.
        attempts: u32,
        /// The last attempt's error (its source chain holds the [`Transient`]).
        #[source]
        last: Box<Error>,
    },
    /// The server asked to wait longer than the client waits (60 s) before trying again, so it
    /// did not: `last` is the failure that asked (its [`Transient`] has the wait).
    #[error(
        "{last} (the server asked to wait {seconds} s before retrying, over the 60 s FrogBot waits)"
    )]
    WaitTooLong {
        /// The wait the server asked for, in seconds (rounded up).
        seconds: u64,
        /// The failure that asked for it.
        #[source]
        last: Box<Error>,
    },
}

impl Error {
    /// The [`Transient`] this error carries, if it is worth retrying.
    pub fn transient(&self) -> Option<&Transient> {
        Transient::find(self)
    }
}

/// `error` and its sources, `: `-separated (reqwest's own message leaves out the cause).
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        next = cause.source();
    }
    text
}
