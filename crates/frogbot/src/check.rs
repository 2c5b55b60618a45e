//! `frogbot config check [--offline]`: the configuration as `serve` would read it, then — unless
//! offline — every configured channel's credentials against its platform and every model
//! endpoint, one line per check (`ok slack: bot U0BOT in team T1`, `FAIL telegram: getMe: 401
//! Unauthorized`). The exit code is 1 when any check failed.
//!
//! Each check is one read-only request with reqwest (no SDK client is built: connecting would
//! start a session, a gateway or a Matrix device): Slack `auth.test`, Discord `GET /users/@me`,
//! Telegram `getMe` and `getWebhookInfo`, Matrix `whoami` (with an access token; with a password
//! only `/versions`), and `GET {base_url}/models` for each model. Secrets never appear in a line.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

pub use crate::channels::Probe;
use crate::config::Config;
use crate::term::say;

/// How long one check's request may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// One check's result line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckLine {
    /// Whether it passed.
    pub ok: bool,
    /// What was checked (`config`, `slack`, `model main`).
    pub subject: String,
    /// What was found.
    pub detail: String,
}

impl std::fmt::Display for CheckLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mark = if self.ok { "ok" } else { "FAIL" };
        write!(f, "{mark} {}: {}", self.subject, self.detail)
    }
}

fn line(ok: bool, subject: impl Into<String>, detail: impl Into<String>) -> CheckLine {
    CheckLine {
        ok,
        subject: subject.into(),
        detail: detail.into(),
    }
}

/// Runs the checks of the configuration at `path` (as `serve` finds it: `--config`,
/// `$FROGBOT_CONFIG`, `./frogbot.toml`, defaults), printing each line as it is known. Returns
/// whether every check passed.
pub async fn run(path: Option<&Path>, offline: bool) -> bool {
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            say!("{}", line(false, "config", e.to_string()));
            return false;
        }
    };
    let what = match path {
        Some(p) => p.display().to_string(),
        None => std::env::var("FROGBOT_CONFIG").unwrap_or_else(|_| {
            if Path::new("frogbot.toml").exists() {
                "frogbot.toml".into()
            } else {
                "defaults".into()
            }
        }),
    };
    let list = |items: Vec<&str>, none: &str| {
        if items.is_empty() {
            none.to_string()
        } else {
            items.join(", ")
        }
    };
    let models = list(
        config.models.iter().map(|m| m.id.as_str()).collect(),
        "demo",
    );
    let channels = list(config.channels.keys().map(String::as_str).collect(), "none");
    say!(
        "{}",
        line(
            true,
            "config",
            format!(
                "{what} (database {}, models: {models}, channels: {channels})",
                crate::redact(&config.database)
            )
        )
    );
    if offline {
        return true;
    }
    frogbot_openai::install_crypto_provider();
    let http = match reqwest::Client::builder().timeout(CHECK_TIMEOUT).build() {
        Ok(c) => c,
        Err(e) => {
            say!("{}", line(false, "http", e.to_string()));
            return false;
        }
    };
    let mut all_ok = true;
    for (name, value) in &config.channels {
        let lines = match crate::channels::probe(name, value) {
            Ok(probe) => check_channel(&http, name, &probe).await,
            Err(e) => vec![line(false, name.clone(), e.to_string())],
        };
        for l in lines {
            all_ok &= l.ok;
            say!("{l}");
        }
    }
    for m in &config.models {
        let l = check_model(&http, m).await;
        all_ok &= l.ok;
        say!("{l}");
    }
    all_ok
}

/// A failed request in one line, without its URL (a Telegram URL holds the token).
fn request_error(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

/// `GET`/`POST` `url` and its status and JSON body (`Null` when it is not JSON).
async fn fetch(request: reqwest::RequestBuilder) -> Result<(u16, Value), String> {
    let response = request.send().await.map_err(request_error)?;
    let status = response.status().as_u16();
    let body = response.text().await.map_err(request_error)?;
    Ok((status, serde_json::from_str(&body).unwrap_or(Value::Null)))
}

fn status_text(status: u16) -> String {
    let reason = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    format!("{status} {reason}").trim_end().to_string()
}

fn text(v: &Value, key: &str) -> String {
    match &v[key] {
        Value::String(s) => s.clone(),
        Value::Null => "?".into(),
        other => other.to_string(),
    }
}

async fn check_channel(http: &reqwest::Client, name: &str, probe: &Probe) -> Vec<CheckLine> {
    match probe {
        Probe::Slack { api_url, token } => {
            let url = format!("{}/auth.test", api_url.trim_end_matches('/'));
            vec![match fetch(http.post(url).bearer_auth(token)).await {
                Ok((200, body)) if body["ok"] == true => line(
                    true,
                    name,
                    format!(
                        "bot {} in team {}",
                        text(&body, "user_id"),
                        text(&body, "team_id")
                    ),
                ),
                Ok((200, body)) => {
                    line(false, name, format!("auth.test: {}", text(&body, "error")))
                }
                Ok((status, _)) => line(false, name, format!("auth.test: {}", status_text(status))),
                Err(e) => line(false, name, format!("auth.test: {e}")),
            }]
        }
        Probe::Discord { api_url, token } => {
            let url = format!("{}/api/v10/users/@me", api_url.trim_end_matches('/'));
            let request = http
                .get(url)
                .header("Authorization", format!("Bot {token}"));
            let failed = |what: &str, status: u16, body: &Value| {
                let mut detail = format!("GET {what}: {}", status_text(status));
                if let Some(m) = body["message"].as_str() {
                    detail = format!("{detail}: {m}");
                }
                line(false, name, detail)
            };
            let who = match fetch(request).await {
                Ok((200, body)) => {
                    format!("bot {} ({})", text(&body, "username"), text(&body, "id"))
                }
                Ok((status, body)) => return vec![failed("/users/@me", status, &body)],
                Err(e) => return vec![line(false, name, format!("GET /users/@me: {e}"))],
            };
            // The Message Content intent (privileged): without it the gateway sends thread
            // messages with empty content.
            let app = http
                .get(format!(
                    "{}/api/v10/applications/@me",
                    api_url.trim_end_matches('/')
                ))
                .header("Authorization", format!("Bot {token}"));
            vec![match fetch(app).await {
                Ok((200, body)) => {
                    const MESSAGE_CONTENT: u64 = 1 << 18;
                    const MESSAGE_CONTENT_LIMITED: u64 = 1 << 19;
                    let flags = body["flags"].as_u64().unwrap_or(0);
                    if flags & (MESSAGE_CONTENT | MESSAGE_CONTENT_LIMITED) == 0 {
                        line(
                            false,
                            name,
                            format!(
                                "{who}: the Message Content intent is off (Developer Portal → Bot → \
                                 Privileged Gateway Intents); without it FrogBot cannot read thread messages"
                            ),
                        )
                    } else {
                        line(true, name, format!("{who}, Message Content intent on"))
                    }
                }
                Ok((status, body)) => failed("/applications/@me", status, &body),
                Err(e) => line(false, name, format!("GET /applications/@me: {e}")),
            }]
        }
        Probe::Telegram {
            api_url,
            token,
            webhook_url,
        } => {
            let base = format!("{}/bot{token}", api_url.trim_end_matches('/'));
            let call = |method: &str| {
                let request = http.get(format!("{base}/{method}"));
                async move {
                    match fetch(request).await {
                        Ok((_, body)) if body["ok"] == true => Ok(body["result"].clone()),
                        // Telegram's own words: `401 Unauthorized`, `404 Not Found`.
                        Ok((status, body)) => Err(match body["description"].as_str() {
                            Some(d) => format!("{status} {d}"),
                            None => status_text(status),
                        }),
                        Err(e) => Err(e),
                    }
                }
            };
            let me = match call("getMe").await {
                Ok(me) => me,
                Err(e) => return vec![line(false, name, format!("getMe: {e}"))],
            };
            let who = format!("bot @{} ({})", text(&me, "username"), text(&me, "id"));
            let hook = match call("getWebhookInfo").await {
                Ok(info) => info,
                Err(e) => return vec![line(false, name, format!("{who}; getWebhookInfo: {e}"))],
            };
            let set = hook["url"].as_str().unwrap_or_default().to_string();
            let pending = hook["pending_update_count"].as_i64().unwrap_or(0);
            let mut detail = match (&set[..], webhook_url) {
                ("", None) => format!("{who}; no webhook (polling)"),
                (url, None) => format!("{who}; webhook {url} set: polling will remove it"),
                ("", Some(_)) => format!("{who}; no webhook yet (set at start)"),
                (url, Some(want)) if !want.is_empty() && url != want => {
                    format!("{who}; webhook {url} (start sets {want})")
                }
                (url, Some(_)) => format!("{who}; webhook {url}"),
            };
            detail = format!("{detail}, {pending} pending");
            if let Some(e) = hook["last_error_message"].as_str() {
                detail = format!("{detail}, last delivery error: {e}");
            }
            vec![line(true, name, detail)]
        }
        Probe::Matrix {
            homeserver,
            user_id,
            access_token,
        } => {
            let base = homeserver.trim_end_matches('/');
            let host = crate::redact(homeserver);
            vec![match access_token {
                Some(token) => {
                    let url = format!("{base}/_matrix/client/v3/account/whoami");
                    match fetch(http.get(url).bearer_auth(token)).await {
                        Ok((200, body)) if body["user_id"] == user_id.as_str() => {
                            line(true, name, format!("{user_id} on {host}"))
                        }
                        Ok((200, body)) => line(
                            false,
                            name,
                            format!(
                                "whoami: the token is {}'s, not {user_id}'s",
                                text(&body, "user_id")
                            ),
                        ),
                        Ok((status, body)) => line(
                            false,
                            name,
                            format!(
                                "whoami: {} {}",
                                status_text(status),
                                body["errcode"].as_str().unwrap_or_default()
                            )
                            .trim_end()
                            .to_string(),
                        ),
                        Err(e) => line(false, name, format!("whoami: {e}")),
                    }
                }
                None => {
                    let url = format!("{base}/_matrix/client/versions");
                    match fetch(http.get(url)).await {
                        Ok((200, _)) => line(
                            true,
                            name,
                            format!(
                                "{host} answers; password not tried (a login makes a new device)"
                            ),
                        ),
                        Ok((status, _)) => line(
                            false,
                            name,
                            format!("{host}/_matrix/client/versions: {}", status_text(status)),
                        ),
                        Err(e) => line(false, name, format!("{host}: {e}")),
                    }
                }
            }]
        }
    }
}

async fn check_model(http: &reqwest::Client, m: &crate::config::ModelConfig) -> CheckLine {
    let subject = format!("model {}", m.id);
    let base = m
        .base_url
        .clone()
        .unwrap_or_else(|| "https://api.openai.com/v1".into());
    let url = format!("{}/models", base.trim_end_matches('/'));
    let shown = crate::redact(&url);
    let mut request = http.get(&url);
    if let Some(key) = m.api_key_env.as_ref().and_then(|v| std::env::var(v).ok()) {
        request = request.bearer_auth(key);
    }
    let upstream = m.model.clone().unwrap_or_else(|| m.id.clone());
    match fetch(request).await {
        Ok((200, body)) => {
            let listed = body["data"].as_array().map(|models| {
                models
                    .iter()
                    .any(|x| x["id"].as_str() == Some(upstream.as_str()))
            });
            let note = match listed {
                Some(true) => format!("{upstream} listed"),
                Some(false) => format!("{upstream} not in its list"),
                None => "no model list".into(),
            };
            line(true, subject, format!("{shown} answers ({note})"))
        }
        Ok((status, body)) => {
            let mut detail = format!("{shown}: {}", status_text(status));
            if let Some(msg) = body["error"]["message"].as_str() {
                detail = format!("{detail}: {msg}");
            }
            line(false, subject, detail)
        }
        Err(e) => line(false, subject, format!("{shown}: {e}")),
    }
}
