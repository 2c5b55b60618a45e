//! Readiness (`GET /readyz`), as opposed to liveness (`GET /healthz`, the serve contract's `ok`):
//! whether this process should be sent traffic. Ready when the store answers `ping`, the
//! migrations are applied, every configured channel was started and its receiving task still runs,
//! and the process is not shutting down; otherwise 503 with a JSON body naming each check that
//! failed (`{"ready": false, "notReady": [{"check": "store", "error": "store unreachable"}],
//! "checks": […]}`; the store's own error, which may name files or hosts, goes to the log).
//!
//! What "connected" means per channel: the adapters give no connection signal (the `Adapter`
//! trait has `start`, which spawns the receiving task), so a channel counts as up once `start`
//! ran and for as long as the task it returned has not ended (a gateway, poll, sync or socket
//! loop that gave up ends its task); a channel that receives only through HTTP routes (Slack
//! Events API, Telegram webhook, Discord interactions) counts as up once started. Migrations are
//! applied by opening the store, and `serve` does not start without it, so that check passes in a
//! running server by construction; it is listed so the body names every condition.

use std::sync::Mutex;

use serde_json::{Value, json};
use tokio::task::AbortHandle;

use frogbot_core::agent::Engine;

/// The channels this process started, for [`Readiness::check`].
#[derive(Debug, Default)]
pub struct Readiness {
    channels: Mutex<Vec<(String, Option<AbortHandle>)>>,
}

/// One check of a readiness answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// `store`, `migrations`, `channel:slack`, `shutdown`.
    pub check: String,
    /// What failed, when it did.
    pub error: Option<String>,
}

impl Readiness {
    /// Notes a started channel and its receiving task (`None`: it receives through routes only).
    pub fn channel_started(&self, platform: &str, receiver: Option<AbortHandle>) {
        self.channels
            .lock()
            .expect("not poisoned")
            .push((platform.to_string(), receiver));
    }

    /// Runs every check: the store's `ping`, then the process's own state.
    pub async fn check(&self, engine: &Engine) -> Vec<Check> {
        // The driver's words (file paths, hosts) go to the log; the body says only what failed.
        let store = engine.ops().ping().await.map_err(|e| {
            tracing::warn!(error = %e, "readyz: store unreachable");
            "store unreachable".to_string()
        });
        let mut checks = vec![
            Check {
                check: "store".into(),
                error: store.err(),
            },
            Check {
                check: "migrations".into(),
                error: None,
            },
        ];
        for (platform, receiver) in self.channels.lock().expect("not poisoned").iter() {
            checks.push(Check {
                check: format!("channel:{platform}"),
                error: receiver
                    .as_ref()
                    .filter(|r| r.is_finished())
                    .map(|_| "its receiving task stopped".to_string()),
            });
        }
        checks.push(Check {
            check: "shutdown".into(),
            error: engine
                .is_stopping()
                .then(|| "the process is shutting down".to_string()),
        });
        checks
    }
}

/// The JSON body of a readiness answer, and whether it is ready.
pub fn body(checks: &[Check]) -> (bool, Value) {
    let not_ready: Vec<Value> = checks
        .iter()
        .filter_map(|c| {
            c.error
                .as_ref()
                .map(|e| json!({"check": c.check, "error": e}))
        })
        .collect();
    let all: Vec<Value> = checks
        .iter()
        .map(|c| json!({"check": c.check, "ok": c.error.is_none()}))
        .collect();
    let ready = not_ready.is_empty();
    let mut body = json!({"ready": ready, "checks": all});
    if !ready {
        body["notReady"] = Value::Array(not_ready);
    }
    (ready, body)
}
