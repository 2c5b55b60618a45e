//! The crate's one error enum.

use async_openai::error::OpenAIError;

/// Everything that can go wrong talking to a Chat Completions server.
///
/// [`Model::stream`](frogbot_core::agent::Model::stream) returns these boxed as
/// [`BoxError`](frogbot_core::BoxError); downcast to inspect them.
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
    /// The HTTP client could not be built.
    #[error("building the HTTP client failed: {0}")]
    HttpClient(#[source] reqwest::Error),
    /// The request's reasoning option has no Chat Completions `reasoning_effort` equivalent.
    #[error(
        "unsupported reasoning option {0:?}: expected none, minimal, low, medium, high, xhigh or max"
    )]
    UnsupportedReasoning(String),
    /// The request failed before streaming began (connection, HTTP status, serialisation).
    #[error("chat completions request failed: {0}")]
    Request(#[source] OpenAIError),
    /// The event stream failed part-way (connection lost, a chunk that is not valid JSON, …).
    #[error("chat completions stream failed: {0}")]
    Stream(#[source] OpenAIError),
    /// The server reported an error inside the event stream.
    #[error("the server reported an error in the stream: {0}")]
    Provider(String),
    /// The stream ended before the server sent a `finish_reason`.
    #[error("the chat completions stream ended before the model finished (no finish_reason)")]
    Incomplete,
}
