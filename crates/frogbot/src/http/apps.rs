//! An app's web view (`GET /apps/{chat}/{message}/{link}`): the page of an agent's html block for
//! whoever holds its address, which `[server] public_url` makes the platforms draw.

use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};

fn set(res: &mut Response, name: HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        res.headers_mut().insert(name, v);
    }
}

/// An app's web view: its own origin-less sandbox (scripts, forms and popups, never this
/// server's origin, so it reaches neither the web chat's token nor the API as anyone), not framed
/// anywhere, its address (a capability) never sent on as a referrer.
const APP_VIEW_POLICY: &str =
    "sandbox allow-scripts allow-forms allow-popups; frame-ancestors 'none'";

/// `GET /apps/{chat}/{message}/{link}`: the app (html block) of an agent message whose
/// capability is `link`, for whoever holds the address (`[server] public_url` draws it on the
/// platforms); 404 for anything else, a deleted message included, saying nothing of which part
/// was wrong.
pub(super) async fn app_view(
    axum::extract::State(state): axum::extract::State<super::AppState>,
    axum::extract::Path((chat, message, link)): axum::extract::Path<(String, String, String)>,
) -> Response {
    let not_found = || {
        super::ApiError::not_found("no such app (the link is wrong, or the message is gone)")
            .into_response()
    };
    if !frogbot_core::model::is_app_link(&link) {
        return not_found();
    }
    let Ok(chat) = frogbot_core::model::ChatId::new(chat) else {
        return not_found();
    };
    let Ok(Some(stored)) = state.engine.chats().message(&chat, &message).await else {
        return not_found();
    };
    if stored.message.metadata.deleted_at.is_some() {
        return not_found();
    }
    let Some((html, _)) = frogbot_core::model::app_page(&stored.message, &link) else {
        return not_found();
    };
    let mut res = Html(html).into_response();
    set(&mut res, header::CONTENT_SECURITY_POLICY, APP_VIEW_POLICY);
    set(&mut res, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(&mut res, header::REFERRER_POLICY, "no-referrer");
    set(&mut res, header::CACHE_CONTROL, "private, no-store");
    set(&mut res, HeaderName::from_static("x-robots-tag"), "noindex");
    res
}
