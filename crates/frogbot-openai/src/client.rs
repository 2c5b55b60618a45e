//! The client: configuration, the HTTP request (with its retries), the `Model` implementation
//! and its event stream (opened again after a failure before its first event).
//!
//! The request is sent with `reqwest` directly (not through `async-openai`'s client): the retry
//! decision needs the status and the `Retry-After` header, and `async-openai`'s own retry layer
//! (three retries, any `Retry-After` waited) would have doubled ours. `async-openai` still
//! provides the request body's types.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use frogbot_core::BoxError;
use frogbot_core::agent::{Model, ModelEvent, ModelRequest, ModelStream};
use frogbot_core::model::{Transient, text};
use futures::{Stream, StreamExt};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{Response, StatusCode};
use serde_json::Value;

use crate::error::{Error, error_chain};
use crate::request::build_request;
use crate::retry::{Retry, retry_after};
use crate::stream::{Assembler, Chunks, chunks};
use crate::{DEFAULT_MAX_RETRIES, MAX_RETRIES};

/// How long to wait for a TCP (and TLS) connection before giving up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The most of an error response's body read for its message.
const ERROR_BODY_LIMIT: usize = 16 * 1024;
/// The most characters of a server's error message kept.
const ERROR_MESSAGE_CHARS: usize = 500;

/// Where and how to reach a Chat Completions server.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The API root that `/chat/completions` is appended to, e.g. `https://api.openai.com/v1`,
    /// `http://localhost:11434/v1` (Ollama), `http://localhost:8000/v1` (vLLM),
    /// `http://localhost:1234/v1` (LM Studio) or `https://openrouter.ai/api/v1`.
    pub base_url: String,
    /// The API key, sent as `Authorization: Bearer …`. `None` (or empty) sends no `Authorization`
    /// header, for local servers that need none.
    pub api_key: Option<String>,
    /// The model name the server knows (`gpt-4.1-mini`, `llama3.1:8b`, …).
    pub model: String,
    /// How many times a failed request is tried again (0 to [`MAX_RETRIES`], default
    /// [`DEFAULT_MAX_RETRIES`]): a 408, 429 or 5xx answer, a connection refused, reset or timed
    /// out, or a stream that broke off before its first event. Once an event of the stream was
    /// yielded, nothing is retried.
    pub max_retries: u32,
}

impl Default for OpenAiConfig {
    /// OpenAI's API, no key, no model name, [`DEFAULT_MAX_RETRIES`].
    fn default() -> Self {
        Self {
            base_url: "https://api.openai.com/v1".into(),
            api_key: None,
            model: String::new(),
            max_retries: DEFAULT_MAX_RETRIES,
        }
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("model", &self.model)
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

/// A [`Model`] backed by an OpenAI-compatible Chat Completions server, streaming every step.
#[derive(Clone)]
pub struct OpenAiCompatible {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    endpoint: Endpoint,
    model: String,
    max_retries: u32,
}

impl fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("url", &self.inner.endpoint.url)
            .field("model", &self.inner.model)
            .field("max_retries", &self.inner.max_retries)
            .finish_non_exhaustive()
    }
}

impl OpenAiCompatible {
    /// Creates the client. Fails when the base URL or API key is unusable, `max_retries` is over
    /// [`MAX_RETRIES`], or no rustls crypto provider is installed (see
    /// [`install_crypto_provider`](crate::install_crypto_provider)).
    pub fn new(config: OpenAiConfig) -> Result<Self, Error> {
        let endpoint = Endpoint::new(&config.base_url, config.api_key.as_deref())?;
        if config.max_retries > MAX_RETRIES {
            return Err(Error::TooManyRetries(config.max_retries));
        }
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            return Err(Error::NoCryptoProvider);
        }
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(Error::HttpClient)?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                endpoint,
                model: config.model,
                max_retries: config.max_retries,
            }),
        })
    }

    /// The upstream model name sent with every request.
    pub fn model(&self) -> &str {
        &self.inner.model
    }

    /// How many times a failed request is tried again.
    pub fn max_retries(&self) -> u32 {
        self.inner.max_retries
    }
}

#[async_trait]
impl Model for OpenAiCompatible {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, BoxError> {
        let body = build_request(&self.inner.model, request)?;
        let body = Bytes::from(serde_json::to_vec(&body).map_err(Error::Serialize)?);
        let mut call = Call {
            inner: self.inner.clone(),
            body,
            retry: Retry::new(self.inner.max_retries),
        };
        let first = call.open().await?;
        Ok(events(call, first).boxed())
    }
}

/// One model call: its body and its retry budget, shared by the opening and (until the first
/// event) the stream.
pub(crate) struct Call {
    inner: Arc<Inner>,
    body: Bytes,
    retry: Retry,
}

impl Call {
    /// Sends the request, again after each retryable failure, until a response streams or the
    /// retries are over.
    pub(crate) async fn open(&mut self) -> Result<Chunks, Error> {
        loop {
            match self.inner.send(&self.body).await {
                Ok(response) => return Ok(chunks(response)),
                Err(error) => self.retry.wait_or_fail(error).await?,
            }
        }
    }

    /// After `error` broke the stream before any event came out of it: waits and opens again
    /// when the failure is retryable and retries are left, else returns the error to report.
    pub(crate) async fn reopen(&mut self, error: Error) -> Result<Chunks, Error> {
        self.retry.wait_or_fail(error).await?;
        self.open().await
    }
}

/// Turns the chunks into model events: text deltas as they come, complete tool calls once the
/// server sends a `finish_reason`, and `Finish` when the stream ends. Stops after the first
/// error. A retryable failure before any event came out (the connection reset or closed early,
/// an error object with a 429 or 5xx code) opens the call again within its retry budget; after
/// the first event, every failure is the stream's last item.
fn events(
    call: Call,
    first: Chunks,
) -> impl Stream<Item = Result<ModelEvent, BoxError>> + Send + 'static {
    struct State {
        call: Call,
        chunks: Option<Chunks>,
        assembler: Assembler,
        pending: VecDeque<ModelEvent>,
        /// Whether an event was yielded (from then on nothing is retried).
        yielded: bool,
    }

    let state = State {
        call,
        chunks: Some(first),
        assembler: Assembler::default(),
        pending: VecDeque::new(),
        yielded: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.pending.pop_front() {
                state.yielded = true;
                return Some((Ok(event), state));
            }
            // `None` here means the stream is over (ended, or failed and reported).
            let next = state.chunks.as_mut()?.next().await;
            let result = match next {
                Some(Ok(chunk)) => state.assembler.push(chunk, &mut state.pending),
                Some(Err(error)) => Err(error),
                None => {
                    state.chunks = None;
                    state.assembler.end(&mut state.pending)
                }
            };
            let Err(error) = result else { continue };
            // Drop the connection; nothing of it follows an error.
            state.chunks = None;
            state.pending.clear();
            if state.yielded {
                return Some((Err(error.into()), state));
            }
            // Nothing reached the caller yet: the call may start over.
            match state.call.reopen(error).await {
                Ok(chunks) => {
                    state.chunks = Some(chunks);
                    state.assembler = Assembler::default();
                }
                Err(error) => return Some((Err(error.into()), state)),
            }
        }
    })
}

impl Inner {
    /// One attempt: `Ok` once the server answered 2xx (its events follow in the body).
    async fn send(&self, body: &Bytes) -> Result<Response, Error> {
        let sent = self
            .http
            .post(&self.endpoint.url)
            .headers(self.endpoint.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(body.clone())
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() && is_json(&response) => {
                Err(not_a_stream(response).await)
            }
            Ok(response) if response.status().is_success() => Ok(response),
            Ok(response) => Err(status_error(response).await),
            Err(error) => Err(connection_error(error)),
        }
    }
}

/// A request that got no answer. Builder and redirect errors are permanent, anything else (a
/// refused connection, a reset, a timeout) is transient; once the request may have reached the
/// server (anything but a failed connect) it may have been carried out.
fn connection_error(error: reqwest::Error) -> Error {
    if error.is_builder() || error.is_redirect() {
        return Error::Request(error);
    }
    let connect = error.is_connect();
    let mut transient = Transient::from_source(error_chain(&error), error);
    if !connect {
        transient = transient.maybe_done();
    }
    Error::Connection(transient)
}

/// Whether a response says its body is JSON (not an event stream).
fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().starts_with("application/json"))
}

/// A 2xx answer in JSON where an event stream was asked for: a server that does not stream (or
/// reports an error so). Permanent: asking again gets the same.
async fn not_a_stream(response: Response) -> Error {
    let (text, json) = read_error_body(response).await;
    let message = json
        .as_ref()
        .and_then(api_error_message)
        .unwrap_or_else(|| text::truncate(text.trim(), ERROR_MESSAGE_CHARS));
    Error::Malformed(format!(
        "the server answered JSON instead of an event stream (does it support `stream: true`?): {message}"
    ))
}

/// The start of an error answer's body, and its JSON when it is JSON.
async fn read_error_body(mut response: Response) -> (String, Option<Value>) {
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_LIMIT {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            // A body cut short still leaves the status to report.
            Ok(None) | Err(_) => break,
        }
    }
    body.truncate(ERROR_BODY_LIMIT);
    let text = String::from_utf8_lossy(&body).into_owned();
    let json = serde_json::from_str(&text).ok();
    (text, json)
}

/// An HTTP error answer: its message, and whether it is worth retrying (408, 429 unless the
/// account's quota is used up, 5xx) with the wait the server asked for.
async fn status_error(response: Response) -> Error {
    let status = response.status();
    let wait = retry_after(response.headers(), SystemTime::now());
    let (text, json) = read_error_body(response).await;
    let message = json
        .as_ref()
        .and_then(api_error_message)
        .unwrap_or_else(|| text.trim().to_owned());
    let message = if message.is_empty() {
        status.canonical_reason().unwrap_or("no message").to_owned()
    } else {
        text::truncate(&message, ERROR_MESSAGE_CHARS)
    };
    let quota = json.as_ref().is_some_and(|json| {
        let error = &json["error"];
        error["type"] == "insufficient_quota" || error["code"] == "insufficient_quota"
    });
    let retryable = status == StatusCode::REQUEST_TIMEOUT
        || (status == StatusCode::TOO_MANY_REQUESTS && !quota)
        || status.is_server_error();
    let transient = retryable.then(|| {
        let transient = Transient::new(format!("HTTP {status}"));
        match wait {
            Some(wait) => transient.retry_after(wait),
            None => transient,
        }
    });
    Error::Status {
        status: status.as_u16(),
        message,
        transient,
    }
}

/// The message of an error body: OpenAI's `{"error": {"message"}}`, Ollama's `{"error": "…"}`,
/// or a bare `message` / `detail` (vLLM).
fn api_error_message(json: &Value) -> Option<String> {
    let error = &json["error"];
    let text = error["message"]
        .as_str()
        .or_else(|| error.as_str())
        .or_else(|| json["message"].as_str())
        .or_else(|| json["detail"].as_str())?;
    Some(text.to_owned())
}

/// The server's address and headers.
#[derive(Clone)]
struct Endpoint {
    /// `{base_url}/chat/completions`.
    url: String,
    headers: HeaderMap,
}

impl Endpoint {
    fn new(base_url: &str, api_key: Option<&str>) -> Result<Self, Error> {
        let trimmed = base_url.trim().trim_end_matches('/');
        let parsed =
            reqwest::Url::parse(trimmed).map_err(|_| Error::InvalidBaseUrl(base_url.to_owned()))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(Error::InvalidBaseUrl(base_url.to_owned()));
        }
        let mut headers = HeaderMap::new();
        if let Some(key) = api_key.filter(|key| !key.is_empty()) {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| Error::InvalidApiKey)?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        Ok(Self {
            url: format!("{trimmed}/chat/completions"),
            headers,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn base_url_is_validated_and_trimmed() {
        let endpoint = Endpoint::new("http://localhost:11434/v1/", None).unwrap();
        assert_eq!(endpoint.url, "http://localhost:11434/v1/chat/completions");
        assert!(endpoint.headers.get(AUTHORIZATION).is_none());
        assert!(matches!(
            Endpoint::new("localhost:11434", None),
            Err(Error::InvalidBaseUrl(_))
        ));
        assert!(matches!(
            Endpoint::new("ftp://example.com/v1", None),
            Err(Error::InvalidBaseUrl(_))
        ));
    }

    #[test]
    fn api_key_becomes_a_sensitive_bearer_header() {
        let endpoint = Endpoint::new("https://api.openai.com/v1", Some("sk-test")).unwrap();
        let value = endpoint.headers.get(AUTHORIZATION).cloned().unwrap();
        assert_eq!(value, "Bearer sk-test");
        assert!(value.is_sensitive());
        assert!(
            Endpoint::new("https://x.test/v1", Some(""))
                .unwrap()
                .headers
                .is_empty()
        );
        assert!(matches!(
            Endpoint::new("https://x.test/v1", Some("bad\nkey")),
            Err(Error::InvalidApiKey)
        ));
    }

    #[test]
    fn debug_output_hides_the_api_key() {
        let config = OpenAiConfig {
            api_key: Some("sk-secret".into()),
            model: "gpt".into(),
            ..OpenAiConfig::default()
        };
        assert!(!format!("{config:?}").contains("sk-secret"));
    }

    #[test]
    fn max_retries_defaults_to_two_and_is_bounded() {
        assert_eq!(OpenAiConfig::default().max_retries, 2);
        crate::install_crypto_provider();
        let config = OpenAiConfig {
            max_retries: MAX_RETRIES + 1,
            ..OpenAiConfig::default()
        };
        assert!(matches!(
            OpenAiCompatible::new(config),
            Err(Error::TooManyRetries(11))
        ));
    }

    #[test]
    fn error_messages_are_read_from_the_usual_shapes() {
        let read = |v: Value| api_error_message(&v);
        assert_eq!(
            read(json!({"error": {"message": "Rate limit reached", "type": "requests"}})),
            Some("Rate limit reached".into())
        );
        assert_eq!(
            read(json!({"error": "model not found"})),
            Some("model not found".into())
        );
        assert_eq!(
            read(json!({"detail": "overloaded"})),
            Some("overloaded".into())
        );
        assert_eq!(read(json!({"message": "busy"})), Some("busy".into()));
        assert_eq!(read(json!({"other": 1})), None);
        assert_eq!(read(json!([1, 2])), None);
    }
}
