//! The guarded client: a reqwest client with the address, proxy, scheme, redirect, size and time
//! rules of [`FetchPolicy`].

use std::error::Error as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use url::Url;

use crate::ip::is_forbidden;

/// What a download may do.
#[derive(Clone, Debug)]
pub struct FetchPolicy {
    /// Whether private addresses (see [`is_forbidden`]) may be fetched. Off by default.
    pub allow_private: bool,
    /// The most bytes of a body read (what happens past it: [`Oversize`]).
    pub max_bytes: usize,
    /// The whole download: name resolution, connecting, every redirect, the body.
    pub timeout: Duration,
    /// The most redirects followed.
    pub max_redirects: usize,
    /// The proxy every request goes through (`None`: none, whatever the environment's
    /// `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` say). With one, the target's name is resolved and
    /// checked here before each request, since the proxy resolves it again itself.
    pub proxy: Option<Url>,
    /// The URL schemes fetched: `http` and/or `https` (nothing else can be).
    pub schemes: Vec<String>,
    /// The `User-Agent` header.
    pub user_agent: String,
}

impl Default for FetchPolicy {
    /// Public addresses only, 1 MB, 20 seconds, 5 redirects, no proxy, http and https.
    fn default() -> Self {
        Self {
            allow_private: false,
            max_bytes: 1_000_000,
            timeout: Duration::from_secs(20),
            max_redirects: 5,
            proxy: None,
            schemes: vec!["http".into(), "https".into()],
            user_agent: concat!("FrogBot/", env!("CARGO_PKG_VERSION")).into(),
        }
    }
}

/// Why a download failed or was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The policy cannot be used.
    #[error("the download policy is invalid: {0}")]
    Policy(String),
    /// Not a URL.
    #[error("not a URL: {0}")]
    InvalidUrl(String),
    /// A scheme the policy does not fetch.
    #[error("only {allowed} URLs are fetched, not {scheme} ({url})")]
    Scheme {
        /// The URL.
        url: String,
        /// Its scheme.
        scheme: String,
        /// The schemes fetched, as a phrase (`http and https`).
        allowed: String,
    },
    /// A private address (or a name resolving to one), or a URL with no host.
    #[error("{url} is not fetched: {reason}")]
    Forbidden {
        /// The URL.
        url: String,
        /// Why (`127.0.0.1 is a private address`).
        reason: String,
    },
    /// The name could not be resolved.
    #[error("{host} could not be resolved: {source}")]
    Resolve {
        /// The host name.
        host: String,
        /// The resolver's error.
        source: std::io::Error,
    },
    /// More redirects than the policy follows.
    #[error("{url}: more than {max} redirects")]
    TooManyRedirects {
        /// The URL first asked for.
        url: String,
        /// The policy's limit.
        max: usize,
    },
    /// A body larger than the policy's limit, when the caller refuses those.
    #[error("{url} is larger than {max} bytes")]
    TooLarge {
        /// The URL.
        url: String,
        /// The policy's limit.
        max: usize,
    },
    /// The download took longer than the policy's timeout.
    #[error("{url}: timed out after {after:?}")]
    Timeout {
        /// The URL.
        url: String,
        /// The policy's timeout.
        after: Duration,
    },
    /// An answer that is not a success, when the caller asked for one.
    #[error("{url} answered {status}")]
    Status {
        /// The URL (the last one, after redirects).
        url: String,
        /// The status code.
        status: u16,
    },
    /// Any other HTTP failure (connecting, TLS, a broken body).
    #[error("fetching {url} failed: {message}")]
    Http {
        /// The URL.
        url: String,
        /// The error and its causes.
        message: String,
        /// reqwest's error.
        source: reqwest::Error,
    },
}

/// What to do with a body longer than the policy's `max_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Oversize {
    /// Keep the first `max_bytes` and say it was cut ([`Body::truncated`]).
    Truncate,
    /// Fail with [`FetchError::TooLarge`] (as soon as the length is known to be too much).
    Refuse,
}

/// A body read within the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Body {
    /// The bytes (at most `max_bytes`).
    pub bytes: Vec<u8>,
    /// Whether the rest was cut off ([`Oversize::Truncate`]).
    pub truncated: bool,
}

/// The error a resolver gives for a name with a forbidden address (found again in reqwest's
/// error's causes).
#[derive(Debug, thiserror::Error)]
#[error("{host} resolves to a private address ({ip})")]
struct ForbiddenName {
    host: String,
    ip: IpAddr,
}

/// A resolver that refuses a name if any of its addresses is forbidden (a name with a public and
/// a private address is refused whole: the connection could take either).
#[derive(Debug)]
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs = resolve_public(&host, 0).await.map_err(|e| match e {
                Resolved::Forbidden(f) => Box::new(f) as Box<dyn std::error::Error + Send + Sync>,
                Resolved::Io(e) => Box::new(e),
            })?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

enum Resolved {
    Forbidden(ForbiddenName),
    Io(std::io::Error),
}

/// `host`'s addresses, all public (else the first forbidden one).
async fn resolve_public(host: &str, port: u16) -> Result<Vec<SocketAddr>, Resolved> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(Resolved::Io)?
        .collect();
    if let Some(bad) = addrs.iter().find(|a| is_forbidden(a.ip())) {
        return Err(Resolved::Forbidden(ForbiddenName {
            host: host.to_owned(),
            ip: bad.ip(),
        }));
    }
    if addrs.is_empty() {
        return Err(Resolved::Io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no address",
        )));
    }
    Ok(addrs)
}

impl FetchPolicy {
    /// The policy a channel downloads the files people post with: public addresses only (a
    /// platform's CDN), up to 2 GiB and 10 minutes (the engine's `[files]` limits stop it
    /// sooner), no proxy.
    pub fn for_files() -> Self {
        Self {
            max_bytes: 2 * 1024 * 1024 * 1024,
            timeout: Duration::from_secs(600),
            ..Self::default()
        }
    }

    fn schemes_phrase(&self) -> String {
        self.schemes.join(" and ")
    }

    /// The checks needing no name resolution, for the first URL and every redirect's: an allowed
    /// scheme, a host, and no literal forbidden address (unless private ones are allowed).
    pub fn check_url(&self, url: &Url) -> Result<(), FetchError> {
        if !self.schemes.iter().any(|s| s == url.scheme()) {
            return Err(FetchError::Scheme {
                url: url.to_string(),
                scheme: url.scheme().to_owned(),
                allowed: self.schemes_phrase(),
            });
        }
        let ip = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            Some(url::Host::Domain(_)) => None,
            None => {
                return Err(FetchError::Forbidden {
                    url: url.to_string(),
                    reason: "the URL has no host".into(),
                });
            }
        };
        if let Some(ip) = ip
            && !self.allow_private
            && is_forbidden(ip)
        {
            return Err(FetchError::Forbidden {
                url: url.to_string(),
                reason: format!("{ip} is a private address"),
            });
        }
        Ok(())
    }

    /// The URL a redirect from `from` to `location` leads to, once checked with
    /// [`check_url`](Self::check_url), when `followed` redirects were followed before it (the
    /// policy's `max_redirects` is the most).
    pub fn redirect_target(
        &self,
        first: &Url,
        from: &Url,
        location: &str,
        followed: usize,
    ) -> Result<Url, FetchError> {
        if followed >= self.max_redirects {
            return Err(FetchError::TooManyRedirects {
                url: first.to_string(),
                max: self.max_redirects,
            });
        }
        let next = from
            .join(location)
            .map_err(|e| FetchError::InvalidUrl(format!("redirect to {location:?}: {e}")))?;
        self.check_url(&next)?;
        Ok(next)
    }
}

/// The one HTTP client for server-side downloads of URLs that come from a model, a person or a
/// message (see the crate's documentation). Cheap to clone.
#[derive(Clone, Debug)]
pub struct GuardedClient {
    http: reqwest::Client,
    policy: Arc<FetchPolicy>,
}

impl GuardedClient {
    /// A client for `policy`.
    pub fn new(policy: FetchPolicy) -> Result<Self, FetchError> {
        if policy.schemes.is_empty()
            || policy
                .schemes
                .iter()
                .any(|s| !matches!(s.as_str(), "http" | "https"))
        {
            return Err(FetchError::Policy(format!(
                "schemes must be http and/or https, not {:?}",
                policy.schemes
            )));
        }
        // reqwest (without a provider of its own) panics building a client with none installed.
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            return Err(FetchError::Policy(
                "no TLS crypto provider is installed (rustls::crypto::ring::default_provider().install_default())".into(),
            ));
        }
        let mut builder = reqwest::Client::builder()
            // Redirects are followed by `get`, each one checked.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(policy.timeout)
            .connect_timeout(policy.timeout)
            .user_agent(policy.user_agent.clone());
        builder = match &policy.proxy {
            Some(proxy) => builder.proxy(
                reqwest::Proxy::all(proxy.as_str())
                    .map_err(|e| FetchError::Policy(format!("proxy {proxy}: {e}")))?,
            ),
            None => builder.no_proxy(),
        };
        // With a proxy, the resolver only ever resolves the proxy's own name (which may well be
        // a private address): the targets are checked in `check_target` instead.
        if !policy.allow_private && policy.proxy.is_none() {
            builder = builder.dns_resolver(Arc::new(PublicOnly));
        }
        let http = builder
            .build()
            .map_err(|e| FetchError::Policy(format!("the HTTP client: {e}")))?;
        Ok(Self {
            http,
            policy: Arc::new(policy),
        })
    }

    /// The client's policy.
    pub fn policy(&self) -> &FetchPolicy {
        &self.policy
    }

    /// Every check a request to `url` needs before it is sent: [`FetchPolicy::check_url`], and
    /// with a proxy, the host name resolved and every address checked (without one, the
    /// client's resolver checks them when connecting).
    pub async fn check_target(&self, url: &Url) -> Result<(), FetchError> {
        self.policy.check_url(url)?;
        if self.policy.allow_private || self.policy.proxy.is_none() {
            return Ok(());
        }
        if let Some(url::Host::Domain(host)) = url.host() {
            let port = url.port_or_known_default().unwrap_or(0);
            resolve_public(host, port).await.map_err(|e| match e {
                Resolved::Forbidden(f) => FetchError::Forbidden {
                    url: url.to_string(),
                    reason: f.to_string(),
                },
                Resolved::Io(source) => FetchError::Resolve {
                    host: host.to_owned(),
                    source,
                },
            })?;
        }
        Ok(())
    }

    /// A GET of `url`, redirects followed (each checked), up to the response's headers; read
    /// the body with [`Response::read_body`]. Any status is an answer
    /// ([`Response::error_for_status`] makes the others errors).
    pub async fn get(&self, url: &str) -> Result<Response, FetchError> {
        self.get_with_headers(url, &[]).await
    }

    /// [`get`](Self::get) with `headers` (a platform's `Authorization`), sent to the first URL's
    /// origin only: a redirect to another origin (a CDN's signed URL) goes without them.
    pub async fn get_with_headers(
        &self,
        url: &str,
        headers: &[(&str, &str)],
    ) -> Result<Response, FetchError> {
        let first = Url::parse(url).map_err(|e| FetchError::InvalidUrl(format!("{url:?}: {e}")))?;
        let deadline = Instant::now() + self.policy.timeout;
        let timeout = |url: &Url| FetchError::Timeout {
            url: url.to_string(),
            after: self.policy.timeout,
        };
        let mut current = first.clone();
        let mut followed = 0;
        loop {
            tokio::time::timeout_at(deadline, self.check_target(&current))
                .await
                .map_err(|_| timeout(&current))??;
            let mut request = self.http.get(current.clone());
            if current.origin() == first.origin() {
                for (name, value) in headers {
                    request = request.header(*name, *value);
                }
            }
            let response = tokio::time::timeout_at(deadline, request.send())
                .await
                .map_err(|_| timeout(&current))?
                .map_err(|e| self.http_error(&current, e))?;
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok());
            match location {
                Some(location) if response.status().is_redirection() => {
                    current = self
                        .policy
                        .redirect_target(&first, &current, location, followed)?;
                    followed += 1;
                }
                _ => {
                    return Ok(Response {
                        inner: response,
                        url: current,
                        deadline,
                        policy: self.policy.clone(),
                    });
                }
            }
        }
    }

    /// A POST of `body` (`length` bytes of `content_type`, sent as they are read: never held
    /// whole) to `url` with `headers`, up to the answer's headers. The URL is checked like a
    /// GET's; no redirect is followed (a body read once cannot be sent again): a 3xx is an
    /// answer like any other. The policy's timeout covers sending the body and the answer's
    /// headers. A platform's upload URL (Slack's `upload_url`) is posted to this way.
    pub async fn post_stream<S, E>(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        content_type: &str,
        length: u64,
        body: S,
    ) -> Result<Response, FetchError>
    where
        S: futures::Stream<Item = Result<Vec<u8>, E>> + Send + 'static,
        E: Into<Box<dyn std::error::Error + Send + Sync>> + 'static,
    {
        // The length is sent as `Content-Length` (not chunked): upload URLs reserve it.
        self.post(url, headers, |request| {
            request
                .header(reqwest::header::CONTENT_TYPE, sendable_type(content_type))
                .header(reqwest::header::CONTENT_LENGTH, length)
                .body(reqwest::Body::wrap_stream(body))
        })
        .await
    }

    /// A `multipart/form-data` POST to `url` with `headers`: the text parts `texts` (name,
    /// content type, value), then one file part `file` whose body is sent as it is read (its
    /// length known, so the request has a `Content-Length`). Checked and answered as
    /// [`post_stream`](Self::post_stream) (no redirect followed). Discord's message with an
    /// attachment is posted this way.
    pub async fn post_multipart<S, E>(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        texts: &[(&str, &str, &str)],
        file: FilePart<S>,
    ) -> Result<Response, FetchError>
    where
        S: futures::Stream<Item = Result<Vec<u8>, E>> + Send + 'static,
        E: Into<Box<dyn std::error::Error + Send + Sync>> + 'static,
    {
        let typed = |part: reqwest::multipart::Part, content_type: &str| {
            let content_type = sendable_type(content_type);
            part.mime_str(content_type)
                .expect("a media type checked by sendable_type")
        };
        let mut form = reqwest::multipart::Form::new();
        for (name, content_type, value) in texts {
            let part = reqwest::multipart::Part::text(value.to_string());
            form = form.part(name.to_string(), typed(part, content_type));
        }
        let body = reqwest::Body::wrap_stream(file.body);
        let part = reqwest::multipart::Part::stream_with_length(body, file.length)
            .file_name(file.filename);
        form = form.part(file.name, typed(part, &file.content_type));
        self.post(url, headers, |request| request.multipart(form))
            .await
    }

    /// A POST to `url` (checked like a GET's, within the policy's time) with `headers`, its body
    /// set by `body`, up to the answer's headers; no redirect followed.
    async fn post(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<Response, FetchError> {
        let url = Url::parse(url).map_err(|e| FetchError::InvalidUrl(format!("{url:?}: {e}")))?;
        let deadline = Instant::now() + self.policy.timeout;
        let timeout = || FetchError::Timeout {
            url: url.to_string(),
            after: self.policy.timeout,
        };
        tokio::time::timeout_at(deadline, self.check_target(&url))
            .await
            .map_err(|_| timeout())??;
        let mut request = body(self.http.post(url.clone()));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = tokio::time::timeout_at(deadline, request.send())
            .await
            .map_err(|_| timeout())?
            .map_err(|e| self.http_error(&url, e))?;
        Ok(Response {
            inner: response,
            url,
            deadline,
            policy: self.policy.clone(),
        })
    }

    /// [`get`](Self::get) and [`Response::read_body`].
    pub async fn get_body(
        &self,
        url: &str,
        oversize: Oversize,
    ) -> Result<(Response, Body), FetchError> {
        let mut response = self.get(url).await?;
        let body = response.read_body(oversize).await?;
        Ok((response, body))
    }

    fn http_error(&self, url: &Url, e: reqwest::Error) -> FetchError {
        http_error(url, e, self.policy.timeout)
    }
}

fn http_error(url: &Url, e: reqwest::Error, after: Duration) -> FetchError {
    let mut source = e.source();
    let mut message = e.to_string();
    while let Some(s) = source {
        if let Some(f) = s.downcast_ref::<ForbiddenName>() {
            return FetchError::Forbidden {
                url: url.to_string(),
                reason: f.to_string(),
            };
        }
        message = format!("{message}: {s}");
        source = s.source();
    }
    if e.is_timeout() {
        return FetchError::Timeout {
            url: url.to_string(),
            after,
        };
    }
    FetchError::Http {
        url: url.to_string(),
        message,
        source: e,
    }
}

/// `content_type` if it can be sent as one (a media type reqwest reads, a valid header value),
/// else `application/octet-stream`: a file's odd type never fails its upload.
fn sendable_type(content_type: &str) -> &str {
    let readable = reqwest::multipart::Part::text("")
        .mime_str(content_type)
        .is_ok()
        && reqwest::header::HeaderValue::from_str(content_type).is_ok();
    if readable {
        content_type
    } else {
        "application/octet-stream"
    }
}

/// The wait a response asks for: `retry-after-ms` (milliseconds, OpenAI's), else `Retry-After` as
/// seconds (a decimal number) or an HTTP date (a date already past is no wait). `None` when
/// there is none or it cannot be read.
pub fn retry_after(
    headers: &reqwest::header::HeaderMap,
    now: std::time::SystemTime,
) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
    };
    let seconds = |text: &str, scale: f64| {
        text.parse::<f64>()
            .ok()
            .filter(|n| *n >= 0.0)
            // A wait too long for a `Duration` is as good as forever.
            .map(|n| Duration::try_from_secs_f64(n * scale).unwrap_or(Duration::MAX))
    };
    if let Some(wait) = header("retry-after-ms").and_then(|ms| seconds(ms, 0.001)) {
        return Some(wait);
    }
    let value = header(reqwest::header::RETRY_AFTER.as_str())?;
    if let Some(wait) = seconds(value, 1.0) {
        return Some(wait);
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The file part of [`GuardedClient::post_multipart`].
#[derive(Debug)]
pub struct FilePart<S> {
    /// The part's name (`files[0]`).
    pub name: String,
    /// The file name it carries.
    pub filename: String,
    /// Its content type.
    pub content_type: String,
    /// Its length in bytes (what `body` yields in all).
    pub length: u64,
    /// Its bytes, as they are read.
    pub body: S,
}

/// An answer's status and headers, its body not read yet.
#[derive(Debug)]
pub struct Response {
    inner: reqwest::Response,
    url: Url,
    deadline: Instant,
    policy: Arc<FetchPolicy>,
}

impl Response {
    /// The status code.
    pub fn status(&self) -> u16 {
        self.inner.status().as_u16()
    }

    /// The URL answered (the last redirect's).
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The `Content-Type` header, as sent (empty when missing).
    pub fn content_type(&self) -> &str {
        self.inner
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// The wait the answer asks for ([`retry_after`] of its headers, now).
    pub fn retry_after(&self) -> Option<Duration> {
        retry_after(self.inner.headers(), std::time::SystemTime::now())
    }

    /// The `Content-Length` header, when sent.
    pub fn content_length(&self) -> Option<u64> {
        self.inner.content_length()
    }

    /// Itself if the status is a success (2xx), else [`FetchError::Status`].
    pub fn error_for_status(self) -> Result<Self, FetchError> {
        if self.inner.status().is_success() {
            Ok(self)
        } else {
            Err(FetchError::Status {
                url: self.url.to_string(),
                status: self.status(),
            })
        }
    }

    /// The body as it arrives, chunk by chunk, within what is left of the policy's timeout;
    /// past the policy's `max_bytes` it ends with [`FetchError::TooLarge`] (nothing more read).
    pub fn into_stream(
        self,
    ) -> impl futures::Stream<Item = Result<Vec<u8>, FetchError>> + Send + 'static {
        if self
            .content_length()
            .is_some_and(|n| n > self.policy.max_bytes as u64)
        {
            let too_large = FetchError::TooLarge {
                url: self.url.to_string(),
                max: self.policy.max_bytes,
            };
            return futures::future::Either::Left(futures::stream::once(
                async move { Err(too_large) },
            ));
        }
        futures::future::Either::Right(futures::stream::try_unfold(
            (self, 0usize),
            |(mut this, read)| async move {
                let chunk = tokio::time::timeout_at(this.deadline, this.inner.chunk())
                    .await
                    .map_err(|_| FetchError::Timeout {
                        url: this.url.to_string(),
                        after: this.policy.timeout,
                    })?
                    .map_err(|e| http_error(&this.url, e, this.policy.timeout))?;
                let Some(chunk) = chunk else {
                    return Ok(None);
                };
                let read = read + chunk.len();
                if read > this.policy.max_bytes {
                    return Err(FetchError::TooLarge {
                        url: this.url.to_string(),
                        max: this.policy.max_bytes,
                    });
                }
                Ok(Some((chunk.to_vec(), (this, read))))
            },
        ))
    }

    /// Reads the body, at most the policy's `max_bytes` of it (never more held), within what is
    /// left of the policy's timeout. Past the limit: cut, or refused (`oversize`).
    pub async fn read_body(&mut self, oversize: Oversize) -> Result<Body, FetchError> {
        let max = self.policy.max_bytes;
        let too_large = || FetchError::TooLarge {
            url: self.url.to_string(),
            max,
        };
        if oversize == Oversize::Refuse && self.content_length().is_some_and(|n| n > max as u64) {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        loop {
            let chunk = tokio::time::timeout_at(self.deadline, self.inner.chunk())
                .await
                .map_err(|_| FetchError::Timeout {
                    url: self.url.to_string(),
                    after: self.policy.timeout,
                })?
                .map_err(|e| http_error(&self.url, e, self.policy.timeout))?;
            let Some(chunk) = chunk else {
                return Ok(Body {
                    bytes,
                    truncated: false,
                });
            };
            let room = max - bytes.len();
            if chunk.len() > room {
                if oversize == Oversize::Refuse {
                    return Err(too_large());
                }
                bytes.extend_from_slice(&chunk[..room]);
                return Ok(Body {
                    bytes,
                    truncated: true,
                });
            }
            bytes.extend_from_slice(&chunk);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn urls_are_checked_before_any_request() {
        let public = FetchPolicy::default();
        let private = FetchPolicy {
            allow_private: true,
            ..FetchPolicy::default()
        };
        assert!(public.check_url(&u("https://example.com/x")).is_ok());
        for bad in [
            "http://127.0.0.1:8787/",
            "http://[::1]/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::127.0.0.1]/",
            "http://[64:ff9b::7f00:1]/",
            "http://[2002:7f00:1::]/",
            "http://[fec0::1]/",
            "http://169.254.169.254/latest/meta-data/",
            "http://0.0.0.0/",
        ] {
            assert!(
                matches!(public.check_url(&u(bad)), Err(FetchError::Forbidden { .. })),
                "{bad}"
            );
            assert!(private.check_url(&u(bad)).is_ok(), "{bad}");
        }
        for scheme in ["file:///etc/passwd", "ftp://example.com/", "gopher://x/"] {
            assert!(
                matches!(
                    private.check_url(&u(scheme)),
                    Err(FetchError::Scheme { .. })
                ),
                "{scheme}"
            );
        }
        let https_only = FetchPolicy {
            schemes: vec!["https".into()],
            ..FetchPolicy::default()
        };
        assert!(https_only.check_url(&u("http://example.com/")).is_err());
    }

    #[test]
    fn every_redirect_is_checked_and_counted() {
        let policy = FetchPolicy::default();
        let first = u("https://example.com/a");
        let next = policy.redirect_target(&first, &first, "/b", 0).unwrap();
        assert_eq!(next.as_str(), "https://example.com/b");
        for location in [
            "http://127.0.0.1:8080/secret",
            "http://[::1]/",
            "http://10.0.0.1/",
            "http://[::ffff:169.254.169.254]/",
        ] {
            assert!(
                matches!(
                    policy.redirect_target(&first, &first, location, 0),
                    Err(FetchError::Forbidden { .. })
                ),
                "{location}"
            );
        }
        assert!(matches!(
            policy.redirect_target(&first, &first, "file:///etc/passwd", 0),
            Err(FetchError::Scheme { .. })
        ));
        assert!(matches!(
            policy.redirect_target(&first, &first, "/c", 5),
            Err(FetchError::TooManyRedirects { max: 5, .. })
        ));
    }

    #[test]
    fn a_policy_with_another_scheme_is_refused() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let bad = FetchPolicy {
            schemes: vec!["file".into()],
            ..FetchPolicy::default()
        };
        assert!(matches!(
            GuardedClient::new(bad),
            Err(FetchError::Policy(_))
        ));
    }
}
