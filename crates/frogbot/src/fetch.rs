//! The built-in `fetch_url` tool (`[tools] fetch_url`): an HTTP GET of a web page for the agent,
//! through [`frogbot_net::GuardedClient`]: within a size and a time limit, never to a private
//! address ([`frogbot_net::is_forbidden`]: loopback, private, link-local, CGNAT, documentation,
//! multicast, reserved, and the IPv6 forms carrying one) unless `fetch_private = true`, never
//! through the environment's proxy (only `fetch_proxy`, when set), and at most
//! `fetch_url_max_per_turn` calls in one turn.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use frogbot_core::BoxError;
use frogbot_core::agent::{Tool, ToolContext, ToolSpec};
use frogbot_net::{FetchBudget, FetchPolicy, GuardedClient, Oversize, Url};
use serde_json::{Value, json};

/// The tool's name.
pub const FETCH_URL_TOOL: &str = "fetch_url";

/// How many turns' call counts are kept (the oldest forgotten first): far more than run at once.
const TURNS_KEPT: usize = 1024;

/// `fetch_url`'s limits.
#[derive(Clone, Debug)]
pub struct FetchLimits {
    /// The most bytes of a body read (the rest is cut off, and the result says so).
    pub max_bytes: usize,
    /// The whole request, redirects and body included.
    pub timeout: Duration,
    /// Whether private addresses may be fetched.
    pub allow_private: bool,
    /// The most calls in one turn (one reply of the agent); the next ones are refused.
    pub max_per_turn: usize,
    /// The proxy every fetch goes through (`None`: none; the environment's are never used).
    pub proxy: Option<Url>,
}

impl FetchLimits {
    /// The guarded client's policy for these limits.
    fn policy(&self) -> FetchPolicy {
        FetchPolicy {
            allow_private: self.allow_private,
            max_bytes: self.max_bytes,
            timeout: self.timeout,
            max_redirects: 5,
            proxy: self.proxy.clone(),
            user_agent: concat!("FrogBot/", env!("CARGO_PKG_VERSION"), " (fetch_url)").into(),
            ..FetchPolicy::default()
        }
    }
}

/// A turn: its chat and its reply's message id.
type TurnKey = (String, String);

/// The `fetch_url` tool.
#[derive(Debug)]
pub struct FetchUrl {
    client: GuardedClient,
    limits: FetchLimits,
    /// (chat, reply message id) → the turn's calls, newest turn last.
    turns: Mutex<VecDeque<(TurnKey, Arc<FetchBudget>)>>,
}

impl FetchUrl {
    /// The tool with `limits`.
    pub fn tool(limits: FetchLimits) -> Result<Arc<dyn Tool>, frogbot_net::FetchError> {
        Ok(Arc::new(Self {
            client: GuardedClient::new(limits.policy())?,
            limits,
            turns: Mutex::new(VecDeque::new()),
        }))
    }

    /// The call budget of the turn `ctx` is part of.
    fn budget(&self, ctx: &ToolContext) -> Arc<FetchBudget> {
        let key = (ctx.chat_id.to_string(), ctx.message_id.clone());
        let mut turns = self.turns.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, b)) = turns.iter().find(|(k, _)| *k == key) {
            return b.clone();
        }
        if turns.len() >= TURNS_KEPT {
            turns.pop_front();
        }
        let budget = Arc::new(FetchBudget::new(self.limits.max_per_turn));
        turns.push_back((key, budget.clone()));
        budget
    }

    async fn fetch(&self, url: &str) -> Result<Value, BoxError> {
        let (response, body) = self.client.get_body(url, Oversize::Truncate).await?;
        let text = String::from_utf8_lossy(&body.bytes).into_owned();
        Ok(json!({
            "url": response.url().to_string(),
            "status": response.status(),
            "contentType": response.content_type(),
            "text": text,
            "truncated": body.truncated,
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
        if let Err(e) = self.budget(&ctx).try_take() {
            return Err(format!(
                "{FETCH_URL_TOOL} was called {} times in this turn; the limit is {} (answer with \
                 what was fetched already)",
                e.attempted, e.max
            )
            .into());
        }
        let span = tracing::info_span!("fetch_url", chat_id = %ctx.chat_id, tool_call_id = %ctx.tool_call_id);
        tracing::Instrument::instrument(self.fetch(&url), span).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use frogbot_core::model::ChatId;

    fn limits(max_per_turn: usize) -> FetchLimits {
        FetchLimits {
            max_bytes: 1_000,
            timeout: Duration::from_secs(1),
            allow_private: false,
            max_per_turn,
            proxy: None,
        }
    }

    fn ctx(chat: &str, message: &str) -> ToolContext {
        ToolContext {
            chat_id: ChatId::new(chat).unwrap(),
            driver: None,
            tool_call_id: "c".into(),
            message_id: message.into(),
        }
    }

    #[test]
    fn urls_are_checked_before_any_request() {
        let policy = limits(1).policy();
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(policy.check_url(&u("https://example.com/x")).is_ok());
        assert!(policy.check_url(&u("http://127.0.0.1:8787/")).is_err());
        assert!(policy.check_url(&u("http://[::1]/")).is_err());
        let private = FetchLimits {
            allow_private: true,
            ..limits(1)
        }
        .policy();
        assert!(private.check_url(&u("http://127.0.0.1:8787/")).is_ok());
        assert!(private.check_url(&u("file:///etc/passwd")).is_err());
        assert!(policy.check_url(&u("ftp://example.com/")).is_err());
    }

    #[test]
    fn turns_are_counted_apart_and_forgotten_oldest_first() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let tool = FetchUrl {
            client: GuardedClient::new(limits(2).policy()).unwrap(),
            limits: limits(2),
            turns: Mutex::new(VecDeque::new()),
        };
        let a = tool.budget(&ctx("c1", "m1"));
        assert!(Arc::ptr_eq(&a, &tool.budget(&ctx("c1", "m1"))));
        assert!(!Arc::ptr_eq(&a, &tool.budget(&ctx("c2", "m1"))));
        assert!(!Arc::ptr_eq(&a, &tool.budget(&ctx("c1", "m2"))));
        for i in 0..TURNS_KEPT {
            tool.budget(&ctx("c3", &format!("m{i}")));
        }
        assert_eq!(tool.turns.lock().unwrap().len(), TURNS_KEPT);
        assert!(!Arc::ptr_eq(&a, &tool.budget(&ctx("c1", "m1"))));
    }
}
