//! Browser rules for the API router (not the channels' webhooks, which are merged after them):
//!
//! - A state-changing request (POST, PUT, PATCH, DELETE) with a body must say
//!   `Content-Type: application/json` (parameters such as `; charset=utf-8` allowed), else 415
//!   `unsupported-media-type`. A web page on another origin can send `text/plain` or form bodies
//!   without asking the server first (no CORS preflight), so this is what keeps it from driving
//!   the API (CSRF); `application/json` from another origin needs a preflight, which is never
//!   granted.
//! - A state-changing request with an `Origin` header (body or not) must come from the server's
//!   own origin (the `Host` of the request, http or https) or one of `[server] allowed_origins`,
//!   else 403 `forbidden-origin`. No `Origin` (curl, the CLI, the channels' platforms) is fine.
//! - A server listening on a loopback address answers only requests whose `Host` is `localhost`,
//!   `127.0.0.1` or `[::1]` (any port) or the host of one of `allowed_origins`, else 421
//!   `misdirected-request`: a foreign name resolving to 127.0.0.1 (DNS rebinding) cannot make a
//!   page of its own origin out of the server.
//!
//! [`Connection`] is what `server::run` tells each request of its connection: the listen address
//! (for the loopback rule) and the client's address (for the anonymous event-stream budget).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The connection a request came on, set as a request extension by `server::run`.
#[derive(Clone, Copy, Debug)]
pub struct Connection {
    /// The client's address.
    pub peer: SocketAddr,
    /// The address the server listens on.
    pub listen: SocketAddr,
}

/// The client's IP address, when the server knows it ([`Connection`], or axum's `ConnectInfo`).
#[derive(Clone, Copy, Debug)]
pub struct ClientAddr(pub Option<IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let ip = parts
            .extensions
            .get::<Connection>()
            .map(|c| c.peer.ip())
            .or_else(|| {
                parts
                    .extensions
                    .get::<axum::extract::ConnectInfo<SocketAddr>>()
                    .map(|c| c.0.ip())
            });
        Ok(Self(ip))
    }
}

/// An origin: scheme, lower-case host (IPv6 in brackets) and port (the scheme's default if none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// `host[:port]` → (lower-case host, port). IPv6 literals keep their brackets.
fn split_authority(authority: &str) -> Option<(String, Option<u16>)> {
    let authority = authority.trim();
    if authority.is_empty() || authority.contains(['/', '@', ' ', '?', '#']) {
        return None;
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (inner, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (format!("[{inner}]"), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    if host.is_empty() || host == "[]" {
        return None;
    }
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((host.to_ascii_lowercase(), port))
}

/// Parses `scheme://host[:port]` (an `Origin` header's or a config's value; a trailing `/` is
/// allowed). `None` for anything else, `null` included.
pub fn parse_origin(s: &str) -> Option<Origin> {
    let (scheme, rest) = s.trim().split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default = default_port(&scheme)?;
    let (host, port) = split_authority(rest.strip_suffix('/').unwrap_or(rest))?;
    Some(Origin {
        scheme,
        host,
        port: port.unwrap_or(default),
    })
}

/// The rules, built from `[server] allowed_origins`.
#[derive(Debug, Default)]
pub struct BrowserRules {
    allowed: Vec<Origin>,
}

impl BrowserRules {
    /// Rules allowing `allowed_origins` (entries that are not origins are skipped: `Config`
    /// refuses them).
    pub fn new(allowed_origins: &[String]) -> Self {
        Self {
            allowed: allowed_origins
                .iter()
                .filter_map(|o| parse_origin(o))
                .collect(),
        }
    }

    /// May a request with this `Origin` header and this `Host` change something?
    fn origin_allowed(&self, origin: &str, host: Option<&str>) -> bool {
        let Some(origin) = parse_origin(origin) else {
            return false; // `null` (a sandboxed frame, a file), or garbage
        };
        if self.allowed.contains(&origin) {
            return true;
        }
        // Same origin: the Host the browser sent, whichever of http or https it was reached by
        // (a TLS proxy in front of the server says https).
        host.and_then(split_authority).is_some_and(|(host, port)| {
            host == origin.host && port.or(default_port(&origin.scheme)) == Some(origin.port)
        })
    }

    /// May a server listening on loopback answer this `Host`?
    fn loopback_host_allowed(&self, host: &str) -> bool {
        let Some((name, _)) = split_authority(host) else {
            return false;
        };
        matches!(name.as_str(), "localhost" | "127.0.0.1" | "[::1]")
            || self.allowed.iter().any(|o| o.host == name)
    }
}

/// Adds the browser rules to `router` (the API's routes so far).
pub fn protect(router: Router, allowed_origins: &[String]) -> Router {
    router.layer(axum::middleware::from_fn_with_state(
        Arc::new(BrowserRules::new(allowed_origins)),
        enforce,
    ))
}

fn refuse(status: StatusCode, code: &'static str, message: String) -> Response {
    let body = serde_json::json!({"error": {"code": code, "message": message}});
    (status, axum::Json(body)).into_response()
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Does the request carry a body? (`Content-Length` over 0, or a chunked body.)
fn has_body(headers: &HeaderMap) -> bool {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        return true;
    }
    header_str(headers, header::CONTENT_LENGTH)
        .is_some_and(|n| n.trim().parse::<u64>().map_or(true, |n| n > 0))
}

/// Is this `Content-Type` `application/json`, with or without parameters?
pub fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// Checks a request against [`BrowserRules`]; see the module's documentation.
pub async fn enforce(State(rules): State<Arc<BrowserRules>>, req: Request, next: Next) -> Response {
    if let Some(refused) = check(&rules, &req) {
        return refused;
    }
    next.run(req).await
}

fn check(rules: &BrowserRules, req: &Request) -> Option<Response> {
    let headers = req.headers();
    let host = header_str(headers, header::HOST);
    let loopback = req
        .extensions()
        .get::<Connection>()
        .is_some_and(|c| c.listen.ip().is_loopback());
    if loopback
        && let Some(host) = host
        && !rules.loopback_host_allowed(host)
    {
        return Some(refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected-request",
            format!(
                "this server listens on loopback and answers only Host localhost, 127.0.0.1, [::1] \
                 or a host of server.allowed_origins, not {:?}",
                excerpt(host)
            ),
        ));
    }
    let changes = matches!(
        *req.method(),
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    if !changes {
        return None;
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let allowed = origin.to_str().is_ok_and(|o| rules.origin_allowed(o, host));
        if !allowed {
            return Some(refuse(
                StatusCode::FORBIDDEN,
                "forbidden-origin",
                format!(
                    "requests from origin {:?} may not change anything here: only the server's \
                     own origin and server.allowed_origins may",
                    excerpt(&String::from_utf8_lossy(origin.as_bytes()))
                ),
            ));
        }
    }
    // An upload's body is the file, of any type: instead of JSON it carries `X-FrogBot-Upload`,
    // a header no page of another origin may send without a preflight this server never grants.
    if is_upload(req) {
        if headers.contains_key(UPLOAD_HEADER) {
            return None;
        }
        return Some(refuse(
            StatusCode::BAD_REQUEST,
            "invalid-request",
            "an upload must carry the header X-FrogBot-Upload: 1".into(),
        ));
    }
    if has_body(headers) && !header_str(headers, header::CONTENT_TYPE).is_some_and(is_json) {
        return Some(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "a request body must be sent with Content-Type: application/json".into(),
        ));
    }
    None
}

/// The header an upload (`POST /api/chats/{id}/files`) carries instead of a JSON body.
pub const UPLOAD_HEADER: &str = "x-frogbot-upload";

fn is_upload(req: &Request) -> bool {
    req.method() == Method::POST
        && req
            .uri()
            .path()
            .strip_prefix("/api/chats/")
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(_, tail)| tail == "files")
}

fn excerpt(s: &str) -> String {
    s.chars().take(100).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_parse_with_default_ports() {
        let o = parse_origin("HTTPS://Chat.Example.com/").unwrap();
        assert_eq!(o, parse_origin("https://chat.example.com:443").unwrap());
        assert_eq!(parse_origin("http://[::1]:8787").unwrap().host, "[::1]");
        for bad in [
            "null",
            "",
            "chat.example.com",
            "ftp://x",
            "https://",
            "https://a/b",
        ] {
            assert!(parse_origin(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn same_origin_and_allowed_origins() {
        let rules = BrowserRules::new(&["https://chat.example.com".into()]);
        assert!(rules.origin_allowed("http://127.0.0.1:8787", Some("127.0.0.1:8787")));
        assert!(rules.origin_allowed("https://proxy.example", Some("proxy.example")));
        assert!(rules.origin_allowed("https://chat.example.com", Some("127.0.0.1:8787")));
        assert!(!rules.origin_allowed("http://127.0.0.1:9999", Some("127.0.0.1:8787")));
        assert!(!rules.origin_allowed("https://evil.example", Some("127.0.0.1:8787")));
        assert!(!rules.origin_allowed("null", Some("127.0.0.1:8787")));
        assert!(!rules.origin_allowed("http://127.0.0.1:8787", None));
    }

    #[test]
    fn loopback_hosts() {
        let rules = BrowserRules::new(&["https://chat.example.com".into()]);
        for ok in [
            "localhost",
            "localhost:8787",
            "127.0.0.1:1",
            "[::1]:8787",
            "[::1]",
        ] {
            assert!(rules.loopback_host_allowed(ok), "{ok}");
        }
        assert!(rules.loopback_host_allowed("CHAT.example.com:8787"));
        for bad in [
            "evil.example",
            "evil.example:8787",
            "localhost.evil.example",
            "",
        ] {
            assert!(!rules.loopback_host_allowed(bad), "{bad}");
        }
    }

    #[test]
    fn json_content_types() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "application/jsonx",
            "",
        ] {
            assert!(!is_json(bad), "{bad}");
        }
    }
}
