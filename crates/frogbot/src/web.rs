//! The web chat at `/`: one server-rendered page with a little JavaScript over the HTTP API.
//!
//! The page (`web/index.html`), its style (`web/style.css`) and script (`web/app.js`) are
//! compiled in and served as one document, so the chat needs no build step. Its inline script and
//! style run under a `Content-Security-Policy` that names them by a nonce fresh on every load (no
//! `'unsafe-inline'`), with `X-Frame-Options: DENY`, `X-Content-Type-Options: nosniff` and
//! `Referrer-Policy: no-referrer`.
//!
//! Apps (`data-block-html`) are shown in `<iframe sandbox="allow-scripts">` frames of
//! [`APP_FRAME_PATH`], a page of their own that writes the app's HTML (carried in the frame URL's
//! fragment, which never reaches the server) into itself. A `srcdoc` frame would inherit the
//! page's policy and so could not run the app's inline scripts; this page has its own policy,
//! `sandbox allow-scripts` (an opaque origin even when opened outside a frame, so it can reach
//! neither the chat's origin nor its token) and `frame-ancestors 'self'`.
//!
//! The page has a form control per input kind. Agent messages show a bold title and each
//! `data-block-*` part as the page's own component (table, progress, image, code, fields, an html
//! app in the frame above, any other type as `UNKNOWN_BLOCK_TEXT`), built with DOM APIs so agent
//! data is never HTML; event buttons post `block-events`; pins sit above the thread (newest per
//! key; an unpinned message returns to where it was posted, a pinned app full-size under the
//! header); edits and deletions arrive live from the chat's events (unchanged messages keep their
//! nodes, so an app never reloads); Seen / Working / Done badges show the acks an agent stored,
//! never derived ones.

use std::sync::LazyLock;

use axum::Router;
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

const PAGE: &str = include_str!("web/index.html");
const STYLE: &str = include_str!("web/style.css");
const SCRIPT: &str = include_str!("web/app.js");

/// Where the app frames' page is served.
pub const APP_FRAME_PATH: &str = "/app-frame";

/// The page, `{NONCE}` standing for each load's nonce.
static INDEX: LazyLock<String> = LazyLock::new(|| {
    PAGE.replacen("/*STYLE*/", STYLE, 1)
        .replacen("/*SCRIPT*/", SCRIPT, 1)
});

/// The web chat page's policy; `{NONCE}` is the load's nonce. Images: the image blocks' http(s)
/// URLs and the file parts' `data:` URLs.
const PAGE_POLICY: &str = "default-src 'self'; script-src 'nonce-{NONCE}'; \
    style-src 'nonce-{NONCE}'; img-src 'self' data: blob: https: http:; frame-src 'self'; \
    object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The app frames' page: on load it replaces itself with the HTML in its URL's fragment.
const APP_FRAME: &str = "<!doctype html><meta charset=\"utf-8\"><script>\
addEventListener(\"DOMContentLoaded\", function () {\
var html = \"\";\
try { html = decodeURIComponent(location.hash.slice(1)); } catch (e) {}\
document.open(); document.write(html); document.close();\
});</script>";

/// Its policy: its own sandbox (an opaque origin), framed only by the web chat.
const APP_FRAME_POLICY: &str = "sandbox allow-scripts; frame-ancestors 'self'";

/// The web chat's routes besides `/` (which `http::router` serves): the app frames' page.
pub fn routes() -> Router {
    Router::new().route(APP_FRAME_PATH, get(app_frame))
}

fn nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn set(res: &mut Response, name: HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        res.headers_mut().insert(name, v);
    }
}

/// `GET /`: the page, with its security headers.
pub async fn index() -> Response {
    let nonce = nonce();
    let page = INDEX
        .replacen("<style>", &format!("<style nonce=\"{nonce}\">"), 1)
        .replacen("<script>", &format!("<script nonce=\"{nonce}\">"), 1);
    let mut res = Html(page).into_response();
    set(
        &mut res,
        header::CONTENT_SECURITY_POLICY,
        &PAGE_POLICY.replace("{NONCE}", &nonce),
    );
    set(&mut res, header::X_FRAME_OPTIONS, "DENY");
    set(&mut res, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(&mut res, header::REFERRER_POLICY, "no-referrer");
    set(&mut res, header::CACHE_CONTROL, "no-store");
    res
}

/// `GET /app-frame`: the page an app frame loads.
pub async fn app_frame() -> Response {
    let mut res = Html(APP_FRAME).into_response();
    set(&mut res, header::CONTENT_SECURITY_POLICY, APP_FRAME_POLICY);
    set(&mut res, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(&mut res, header::REFERRER_POLICY, "no-referrer");
    res
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_inlines_its_style_and_script() {
        let page = super::INDEX.as_str();
        assert!(!page.contains("/*STYLE*/") && !page.contains("/*SCRIPT*/"));
        assert!(page.contains("id=\"composer\"") && page.contains("startEvents"));
        // The script must not end its own <script> element early.
        assert!(!super::SCRIPT.contains("</script"));
        // One inline script and one inline style, each given the nonce.
        assert_eq!(page.matches("<script").count(), 1);
        assert_eq!(page.matches("<style").count(), 1);
        assert!(!super::STYLE.contains("</style"));
    }

    #[tokio::test]
    async fn the_page_sends_its_policy_with_a_fresh_nonce() {
        let a = super::index().await;
        let b = super::index().await;
        let csp = |r: &axum::response::Response| {
            r.headers()[axum::http::header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .to_string()
        };
        assert_ne!(csp(&a), csp(&b));
        assert!(!csp(&a).contains("unsafe-inline"), "{}", csp(&a));
        let nonce = csp(&a)
            .split("'nonce-")
            .nth(1)
            .unwrap()
            .split('\'')
            .next()
            .unwrap()
            .to_string();
        let body = axum::body::to_bytes(a.into_body(), usize::MAX)
            .await
            .unwrap();
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert!(body.contains(&format!("<script nonce=\"{nonce}\">")));
        assert!(body.contains(&format!("<style nonce=\"{nonce}\">")));
    }
}
