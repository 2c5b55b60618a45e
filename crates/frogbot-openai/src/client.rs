//! The client: configuration, the HTTP endpoint and the `Model` implementation.

use std::fmt;
use std::time::Duration;

use async_openai::config::Config;
use async_trait::async_trait;
use frogbot_core::BoxError;
use frogbot_core::agent::{Model, ModelRequest, ModelStream};
use futures::StreamExt;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use secrecy::SecretString;

use crate::error::Error;
use crate::request::build_request;
use crate::stream::{Chunk, events};

/// How long to wait for a TCP (and TLS) connection before giving up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

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
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("model", &self.model)
            .finish()
    }
}

/// A [`Model`] backed by an OpenAI-compatible Chat Completions server, streaming every step.
#[derive(Clone)]
pub struct OpenAiCompatible {
    client: async_openai::Client<Endpoint>,
    model: String,
}

impl fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("base_url", &self.client.config().api_base)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl OpenAiCompatible {
    /// Creates the client. Fails when the base URL or API key is unusable, or when no rustls
    /// crypto provider is installed (see [`install_crypto_provider`](crate::install_crypto_provider)).
    pub fn new(config: OpenAiConfig) -> Result<Self, Error> {
        let endpoint = Endpoint::new(&config.base_url, config.api_key.as_deref())?;
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            return Err(Error::NoCryptoProvider);
        }
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(Error::HttpClient)?;
        Ok(Self {
            client: async_openai::Client::build(http, endpoint),
            model: config.model,
        })
    }

    /// The upstream model name sent with every request.
    pub fn model(&self) -> &str {
        &self.model
    }
}

#[async_trait]
impl Model for OpenAiCompatible {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, BoxError> {
        let body = build_request(&self.model, request)?;
        let upstream = self
            .client
            .chat()
            .create_stream_byot::<_, Chunk>(body)
            .await
            .map_err(Error::Request)?;
        Ok(events(upstream).boxed())
    }
}

/// The server's address and headers, as `async-openai` asks for them.
///
/// Unlike `async_openai::config::OpenAIConfig` it reads no environment variables and sends no
/// `Authorization` header when there is no key.
#[derive(Clone)]
struct Endpoint {
    api_base: String,
    headers: HeaderMap,
    api_key: SecretString,
}

impl Endpoint {
    fn new(base_url: &str, api_key: Option<&str>) -> Result<Self, Error> {
        let trimmed = base_url.trim().trim_end_matches('/');
        let parsed =
            reqwest::Url::parse(trimmed).map_err(|_| Error::InvalidBaseUrl(base_url.to_owned()))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(Error::InvalidBaseUrl(base_url.to_owned()));
        }
        let api_key = api_key.filter(|key| !key.is_empty());
        let mut headers = HeaderMap::new();
        if let Some(key) = api_key {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| Error::InvalidApiKey)?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        Ok(Self {
            api_base: trimmed.to_owned(),
            headers,
            api_key: SecretString::from(api_key.unwrap_or_default().to_owned()),
        })
    }
}

impl Config for Endpoint {
    fn headers(&self) -> HeaderMap {
        self.headers.clone()
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.api_base, path)
    }

    fn query(&self) -> Vec<(&str, &str)> {
        Vec::new()
    }

    fn api_base(&self) -> &str {
        &self.api_base
    }

    fn api_key(&self) -> &SecretString {
        &self.api_key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_is_validated_and_trimmed() {
        let endpoint = Endpoint::new("http://localhost:11434/v1/", None).unwrap();
        assert_eq!(
            endpoint.url("/chat/completions"),
            "http://localhost:11434/v1/chat/completions"
        );
        assert!(endpoint.headers().get(AUTHORIZATION).is_none());
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
        let value = endpoint.headers().get(AUTHORIZATION).cloned().unwrap();
        assert_eq!(value, "Bearer sk-test");
        assert!(value.is_sensitive());
        assert!(
            Endpoint::new("https://x.test/v1", Some(""))
                .unwrap()
                .headers()
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
            base_url: "https://api.openai.com/v1".into(),
            api_key: Some("sk-secret".into()),
            model: "gpt".into(),
        };
        assert!(!format!("{config:?}").contains("sk-secret"));
    }
}
