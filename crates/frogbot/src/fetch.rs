//! The built-in `fetch_url` tool (`[tools] fetch_url`): an HTTP GET of a web page for the agent,
//! within a size and a time limit, never to a private address (loopback, private, link-local,
//! unique-local, carrier-grade NAT, unspecified, multicast) unless `fetch_private = true` — a
//! host's every resolved address is checked by the client's resolver (so a name that resolves to
//! one is refused at connect, redirects included), and a literal address in the URL before the
//! request and at each redirect.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use frogbot_core::BoxError;
use frogbot_core::agent::{Tool, ToolContext, ToolSpec};
use futures::StreamExt;
use serde_json::{Value, json};

/// The tool's name.
pub const FETCH_URL_TOOL: &str = "fetch_url";

/// `fetch_url`'s limits.
#[derive(Clone, Debug)]
pub struct FetchLimits {
    /// The most bytes of a body read (the rest is cut off, and the result says so).
    pub max_bytes: usize,
    /// The whole request, redirects and body included.
    pub timeout: Duration,
    /// Whether private addresses may be fetched.
    pub allow_private: bool,
}

/// Whether `ip` is one `fetch_url` refuses by default: not a public unicast address.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
                || a == 0
                // Carrier-grade NAT 100.64.0.0/10, and 192.0.0.0/24 (IETF protocol assignments).
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && v4.octets()[2] == 0)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private(IpAddr::V4(v4));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || v6.is_unique_local()
                || v6.is_unicast_link_local()
        }
    }
}

/// A resolver that drops private addresses (all of them gone: the name cannot be fetched).
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| !is_private(a.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(format!("{host} resolves to no public address").into());
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Whether `url` may be fetched as written: http(s), and no literal private address.
fn check_url(url: &reqwest::Url, allow_private: bool) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "only http and https URLs are fetched, not {}",
            url.scheme()
        ));
    }
    let ip = match url.host() {
        Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
        Some(url::Host::Domain(_)) => None,
        None => return Err("the URL has no host".into()),
    };
    if !allow_private && ip.is_some_and(is_private) {
        return Err(format!("{url} is a private address, which is not fetched"));
    }
    Ok(())
}

/// The `fetch_url` tool.
#[derive(Debug)]
pub struct FetchUrl {
    client: reqwest::Client,
    limits: FetchLimits,
}

impl FetchUrl {
    /// The tool with `limits`.
    pub fn tool(limits: FetchLimits) -> Result<Arc<dyn Tool>, reqwest::Error> {
        let allow_private = limits.allow_private;
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= 5 {
                return attempt.error("more than 5 redirects");
            }
            match check_url(attempt.url(), allow_private) {
                Ok(()) => attempt.follow(),
                Err(e) => attempt.error(e),
            }
        });
        let mut builder = reqwest::Client::builder()
            .redirect(redirects)
            .timeout(limits.timeout)
            .user_agent(concat!(
                "FrogBot/",
                env!("CARGO_PKG_VERSION"),
                " (fetch_url)"
            ));
        if !allow_private {
            builder = builder.dns_resolver(Arc::new(PublicOnly));
        }
        Ok(Arc::new(Self {
            client: builder.build()?,
            limits,
        }))
    }

    async fn fetch(&self, url: &str) -> Result<Value, BoxError> {
        let url = reqwest::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
        check_url(&url, self.limits.allow_private)?;
        let response = self.client.get(url.clone()).send().await.map_err(|e| {
            // The cause says why (a refused address, a timeout, a redirect loop).
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text = format!("{text}: {s}");
                source = s.source();
            }
            format!("fetching {url} failed: {text}")
        })?;
        let status = response.status().as_u16();
        let final_url = response.url().to_string();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let mut body = Vec::new();
        let mut truncated = false;
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| format!("reading {url} failed: {e}"))?;
            let room = self.limits.max_bytes - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&body).into_owned();
        Ok(json!({
            "url": final_url,
            "status": status,
            "contentType": content_type,
            "text": text,
            "truncated": truncated,
        }))
    }
}

#[async_trait]
impl Tool for FetchUrl {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: FETCH_URL_TOOL.into(),
            description: format!(
                "Fetches a public web page or file with an HTTP GET and returns its status, content type and \
                 text (at most {} bytes; longer bodies are cut off and marked truncated).",
                self.limits.max_bytes
            ),
            input_schema: json!({
                "type": "object",
                "properties": {"url": {"type": "string", "description": "An http:// or https:// URL."}},
                "required": ["url"],
                "additionalProperties": false
            }),
        }
    }

    async fn call(&self, input: Value, ctx: ToolContext) -> Result<Value, BoxError> {
        let url = input
            .get("url")
            .and_then(Value::as_str)
            .ok_or("url is required")?
            .to_owned();
        let span = tracing::info_span!("fetch_url", chat_id = %ctx.chat_id, tool_call_id = %ctx.tool_call_id);
        tracing::Instrument::instrument(self.fetch(&url), span).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses_are_known() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "1.1.1.1",
            "93.184.216.34",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn urls_are_checked_before_any_request() {
        let u = |s: &str| reqwest::Url::parse(s).unwrap();
        assert!(check_url(&u("https://example.com/x"), false).is_ok());
        assert!(check_url(&u("http://127.0.0.1:8787/"), false).is_err());
        assert!(check_url(&u("http://[::1]/"), false).is_err());
        assert!(check_url(&u("http://127.0.0.1:8787/"), true).is_ok());
        assert!(check_url(&u("file:///etc/passwd"), true).is_err());
        assert!(check_url(&u("ftp://example.com/"), false).is_err());
    }
}
