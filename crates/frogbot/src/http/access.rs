//! Who calls, and whether they may call a route at all: the HTTP side of
//! [`frogbot_core::policy`].
//!
//! Every route is registered through [`Api::at`] with its [`Access`]; the registration puts the
//! access on the request, and the [`Caller`] extractor — the only way a handler learns who
//! calls — resolves the bearer token to a [`Principal`] and asks [`Policy::admit`]. A handler
//! then asks [`Policy::decide`] about the resource it loaded (see [`super::decide`]). Handlers
//! take it as [`Call`] (with the state) or, on a chat's route, [`ChatCall`], which also loads the
//! chat for the action asked and names the chat in every answer.
//! `Api`'s `table`, returned by `http::routes()`, is the list of every route with its access: the
//! route × principal test (`tests/authorization.rs`) walks it, so a route added without an entry
//! there fails that test.

use std::collections::HashMap;

use axum::Extension;
use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, header};
use axum::routing::MethodRouter;

use frogbot_core::agent::views::ChatRow;
use frogbot_core::model::{ChatId, UserId};
use frogbot_core::policy::{Access, Action, ChatView, Denied, Policy, Principal};

use super::{ApiError, AppState};

/// One route of the API and who may call it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteInfo {
    /// The method.
    pub method: Method,
    /// The path, as axum writes it (`/api/chats/{chat_id}`).
    pub path: &'static str,
    /// Who may call it at all.
    pub access: Access,
}

/// The API's routes being registered, each with its access.
pub(super) struct Api {
    router: Router<AppState>,
    table: Vec<RouteInfo>,
}

impl Api {
    pub(super) fn new() -> Api {
        Api {
            router: Router::new(),
            table: Vec::new(),
        }
    }

    /// Registers `route` (one method's handler) at `path` for callers `access` admits.
    pub(super) fn at(
        mut self,
        method: Method,
        path: &'static str,
        access: Access,
        route: MethodRouter<AppState>,
    ) -> Api {
        self.table.push(RouteInfo {
            method,
            path,
            access,
        });
        self.router = self
            .router
            .route(path, route.route_layer(Extension(access)));
        self
    }

    /// Registers the MCP endpoint (feature `mcp`) for agents, one entry per method.
    pub(super) fn at_mcp(self) -> Api {
        #[cfg(feature = "mcp")]
        {
            use axum::routing::{delete, get, post};
            const PATH: &str = crate::mcp_server::MCP_PATH;
            self.at(Method::POST, PATH, Access::Agent, post(super::mcp))
                .at(Method::GET, PATH, Access::Agent, get(super::mcp))
                .at(Method::DELETE, PATH, Access::Agent, delete(super::mcp))
        }
        #[cfg(not(feature = "mcp"))]
        self
    }

    pub(super) fn finish(self) -> (Router<AppState>, Vec<RouteInfo>) {
        (self.router, self.table)
    }
}

/// Bearer tokens and the principals they name.
#[derive(Clone, Debug, Default)]
pub struct Principals(HashMap<String, Principal>);

impl Principals {
    /// From `(token, principal)` pairs.
    pub fn new(pairs: impl IntoIterator<Item = (String, Principal)>) -> Principals {
        Principals(pairs.into_iter().collect())
    }

    /// The principals, without their tokens.
    pub fn principals(&self) -> impl Iterator<Item = Principal> + '_ {
        self.0.values().cloned()
    }

    /// Whether `id` is a configured user's id.
    pub(super) fn is_user(&self, id: &str) -> bool {
        self.0
            .values()
            .any(|p| matches!(p, Principal::User(u) if u.as_str() == id))
    }

    /// The principal an `Authorization` header names: none is anonymous; an unknown token, or a
    /// scheme other than Bearer, is refused (401).
    pub(super) fn resolve(&self, parts: &Parts) -> Result<Principal, ApiError> {
        let Some(value) = parts.headers.get(header::AUTHORIZATION) else {
            return Ok(Principal::Anonymous);
        };
        // The scheme is case-insensitive (RFC 7235).
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.trim_start().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        match token.and_then(|t| self.0.get(t)) {
            Some(p) => Ok(p.clone()),
            None => Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "unknown bearer token",
            )),
        }
    }
}

/// The caller of a route, admitted by the policy for the route's [`Access`].
#[derive(Clone, Debug)]
pub(super) struct Caller(pub(super) Principal);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        // A refusal on a chat's route names the chat (`X-FrogBot-Chat-Id`), as every error there.
        let chat = axum::extract::RawPathParams::from_request_parts(parts, state)
            .await
            .ok()
            .and_then(|p| {
                p.iter()
                    .find(|(k, _)| *k == "chat_id")
                    .and_then(|(_, v)| frogbot_core::model::ChatId::new(v).ok())
            });
        let named = |e: ApiError| match &chat {
            Some(c) => e.with_chat(c),
            None => e,
        };
        Self::admit(parts, state).await.map_err(named)
    }
}

/// What every route's handler starts from: the state, and the caller [`Caller`] admitted.
pub(super) struct Call {
    pub(super) state: AppState,
    pub(super) who: Principal,
}

impl FromRequestParts<AppState> for Call {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Caller(who) = Caller::from_request_parts(parts, state).await?;
        let state = state.clone();
        Ok(Call { state, who })
    }
}

/// A [`Call`] on a route of a chat: `raw` is its path's `{chat_id}` (checked by
/// [`ChatCall::run`]), `item` the path's other parameter (a message id, a pin's key, a file id)
/// or empty.
pub(super) struct ChatCall {
    pub(super) state: AppState,
    pub(super) who: Principal,
    raw: String,
    pub(super) item: String,
}

impl FromRequestParts<AppState> for ChatCall {
    type Rejection = axum::response::Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        use axum::response::IntoResponse;
        let Call { state, who } = Call::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let axum::extract::Path(params) =
            axum::extract::Path::<Vec<(String, String)>>::from_request_parts(parts, &state)
                .await
                .map_err(IntoResponse::into_response)?;
        let (mut raw, mut item) = (String::new(), String::new());
        for (key, value) in params {
            *(if key == "chat_id" {
                &mut raw
            } else {
                &mut item
            }) = value;
        }
        Ok(ChatCall {
            state,
            who,
            raw,
            item,
        })
    }
}

impl ChatCall {
    /// `run` with the chat and the caller's user: its answer and every error but a bad chat
    /// id's name the chat.
    pub(super) async fn run<R: axum::response::IntoResponse>(
        &self,
        run: impl AsyncFnOnce(&ChatId, Option<&UserId>) -> Result<R, ApiError>,
    ) -> super::ApiResult {
        let chat = super::chat_id(&self.raw)?;
        match run(&chat, self.who.user_id()).await {
            Ok(res) => Ok(super::with_chat(&chat, res)),
            Err(e) => Err(e.with_chat(&chat)),
        }
    }

    /// The chat, when the policy lets the caller do `action` on it (404 `{absent} {chat}` when
    /// there is none).
    pub(super) async fn load(
        &self,
        chat: &ChatId,
        absent: &str,
        action: for<'a> fn(&'a ChatView<'a>) -> Action<'a>,
    ) -> Result<ChatRow, ApiError> {
        let row = self.state.engine.chats().get(chat).await?;
        let row = row.ok_or_else(|| ApiError::not_found(format!("{absent} {chat}")))?;
        decide(&self.state.policy, &self.who, action(&ChatView::of(&row)))?;
        Ok(row)
    }

    /// The chat, when the caller may read it (404 when there is none, 403 when it is not theirs).
    pub(super) async fn readable(&self, chat: &ChatId) -> Result<ChatRow, ApiError> {
        self.load(chat, "no chat", |v| Action::ReadChat(v)).await
    }

    /// The chat, when the caller may write it from the web: a channel chat they may read is 409
    /// `channel-chat` (it is continued from its thread).
    pub(super) async fn writable(&self, chat: &ChatId) -> Result<ChatRow, ApiError> {
        let row = self.readable(chat).await?;
        if row.channel.is_some() {
            return Err(ApiError::channel_chat());
        }
        decide(
            &self.state.policy,
            &self.who,
            Action::WriteChat(&ChatView::of(&row)),
        )?;
        Ok(row)
    }
}

impl Caller {
    async fn admit(parts: &Parts, state: &AppState) -> Result<Caller, ApiError> {
        let who = state.principals.resolve(parts)?;
        // A route registered without its access is a bug: refused, and the route test fails.
        let Some(access) = parts.extensions.get::<Access>().copied() else {
            tracing::error!(path = %parts.uri.path(), "a route without a policy entry");
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "this route has no policy entry",
            ));
        };
        state.policy.admit(&who, access).map_err(ApiError::denied)?;
        Ok(Caller(who))
    }
}

impl ApiError {
    /// The policy's refusal as an HTTP answer: 401 `unauthorized`, 403 `forbidden`, or 404
    /// `not-found` for what is hidden from the caller.
    pub(super) fn denied(d: Denied) -> ApiError {
        match d {
            Denied::Unauthenticated(m) => {
                ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", m)
            }
            Denied::Forbidden(m) => ApiError::new(StatusCode::FORBIDDEN, "forbidden", m),
            Denied::Hidden(m) => ApiError::not_found(m),
        }
    }
}

/// Asks the policy: `Ok`, or the refusal as an [`ApiError`].
pub(super) fn decide(
    policy: &Policy,
    who: &Principal,
    action: frogbot_core::policy::Action<'_>,
) -> Result<(), ApiError> {
    policy.decide(who, action).map_err(ApiError::denied)
}
