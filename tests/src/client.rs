//! The soak's HTTP client: JSON requests whose outcome is either an HTTP answer or a failure (the
//! connection refused, reset by a kill, timed out), counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;

/// The bearer tokens of the run's users (`soak-user-N`).
pub const USERS: usize = 3;

/// The token of user `n`.
pub fn token(n: usize) -> String {
    format!("soak-token-{n}")
}

/// An HTTP answer, or why there was none.
#[derive(Debug)]
pub enum Res {
    /// The server answered.
    Http {
        /// Its status.
        status: u16,
        /// Its body as JSON (`Null` when it is not JSON).
        body: Value,
    },
    /// No answer: refused, reset, timed out, or the body broke off.
    Failed(String),
}

impl Res {
    /// The status, when the server answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Res::Http { status, .. } => Some(*status),
            Res::Failed(_) => None,
        }
    }
    /// The error code of an error body.
    pub fn code(&self) -> &str {
        match self {
            Res::Http { body, .. } => body["error"]["code"].as_str().unwrap_or(""),
            Res::Failed(_) => "",
        }
    }
}

/// Request counters.
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests made (answered or not).
    pub requests: AtomicU64,
    /// Requests without an answer.
    pub failed: AtomicU64,
    /// 5xx answers.
    pub server_errors: AtomicU64,
}

/// The client (cheap to clone).
#[derive(Debug, Clone)]
pub struct Api {
    client: reqwest::Client,
    /// Counters of every request.
    pub counters: Arc<Counters>,
}

impl Default for Api {
    fn default() -> Self {
        Self::new()
    }
}

impl Api {
    /// A client with a short connect timeout (a killed process refuses at once).
    pub fn new() -> Api {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .pool_idle_timeout(Duration::from_secs(10))
            .build()
            .expect("an HTTP client");
        Api {
            client,
            counters: Arc::default(),
        }
    }

    /// The underlying client (event streams read their responses themselves).
    pub fn raw(&self) -> &reqwest::Client {
        &self.client
    }

    /// Counts one request and its outcome.
    pub fn count(&self, res: &Res) {
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        match res {
            Res::Failed(_) => {
                self.counters.failed.fetch_add(1, Ordering::Relaxed);
            }
            Res::Http { status, .. } if *status >= 500 => {
                self.counters.server_errors.fetch_add(1, Ordering::Relaxed);
            }
            Res::Http { .. } => {}
        }
    }

    /// `GET url` as user `user`.
    pub async fn get(&self, url: &str, user: usize, timeout: Duration) -> Res {
        let req = self
            .client
            .get(url)
            .bearer_auth(token(user))
            .timeout(timeout);
        self.finish(req).await
    }

    /// `POST url` with a JSON body as user `user`.
    pub async fn post(&self, url: &str, user: usize, body: &Value, timeout: Duration) -> Res {
        let req = self
            .client
            .post(url)
            .bearer_auth(token(user))
            .header("content-type", "application/json")
            .body(body.to_string())
            .timeout(timeout);
        self.finish(req).await
    }

    async fn finish(&self, req: reqwest::RequestBuilder) -> Res {
        let res = match req.send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                match r.bytes().await {
                    Ok(bytes) => Res::Http {
                        status,
                        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                    },
                    Err(e) => Res::Failed(format!("body after {status}: {e}")),
                }
            }
            Err(e) => Res::Failed(describe(&e)),
        };
        self.count(&res);
        res
    }

    /// Whether `base` answers `/healthz` with 200.
    pub async fn healthy(&self, base: &str) -> bool {
        matches!(
            self.client
                .get(format!("{base}/healthz"))
                .timeout(Duration::from_secs(2))
                .send()
                .await,
            Ok(r) if r.status() == 200
        )
    }
}

/// A client error in a few words (its source chain).
pub fn describe(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}
