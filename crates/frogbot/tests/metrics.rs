//! `GET /metrics` of a real `frogbot serve` (in-process, SQLite): a scenario — two turns, a failed
//! model call, an ask to the fake Slack answered by a click, a rate-limited Slack call — then the
//! page parsed by `prometheus-parse` (as Prometheus reads it), each series present with the right
//! counts and labels; the bearer token (401 without, 200 with); `enabled = false` → 404.
//!
//! The recorder is one per process, so the tests of this binary share it: only the scenario runs
//! turns and counts requests; the other test's server records nothing.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::Response;
use frogbot_slack::testing::{BOT_TOKEN, FakeSlack, SIGNING_SECRET, Signature as Sig};
use prometheus_parse::{Sample, Scrape, Value as PromValue};
use serde_json::{Value, json};

use common::{ALICE, WAIT};

const CHANNEL: &str = "C42";
const TOKEN_VAR: &str = "FROGBOT_TEST_METRICS_TOKEN";
const METRICS_TOKEN: &str = "scrape-s3cret";

/// The variables the configuration names, set once for the whole test binary.
#[allow(unsafe_code)]
fn set_secrets() -> (&'static str, &'static str) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    const BOT_VAR: &str = "FROGBOT_TEST_METRICS_SLACK_BOT_TOKEN";
    const SECRET_VAR: &str = "FROGBOT_TEST_METRICS_SLACK_SIGNING_SECRET";
    ONCE.call_once(|| {
        // SAFETY: set once, before any server of this binary reads them; every reader in this
        // process goes through `std::env`, which serialises access to the environment.
        unsafe {
            std::env::set_var(BOT_VAR, BOT_TOKEN);
            std::env::set_var(SECRET_VAR, SIGNING_SECRET);
            std::env::set_var(TOKEN_VAR, METRICS_TOKEN);
        }
    });
    (BOT_VAR, SECRET_VAR)
}

/// A fake Chat Completions server: model `ok` streams a short reply, model `broken` answers 500.
async fn start_fake_model() -> String {
    async fn completions(State(()): State<()>, body: Bytes) -> Response {
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let model = body["model"].as_str().unwrap_or_default().to_owned();
        if model != "ok" {
            return Response::builder()
                .status(StatusCode::INTERNAL_SERVER_ERROR)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(r#"{"error":{"message":"the fake is broken"}}"#))
                .unwrap();
        }
        let event = |delta: Value, finish: Option<&str>| {
            let chunk = json!({
                "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000,
                "model": model, "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
            });
            format!("data: {chunk}\n\n")
        };
        let text = [
            event(json!({"role": "assistant", "content": "Hello."}), None),
            event(json!({}), Some("stop")),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat();
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from(text))
            .unwrap()
    }
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("fake model server");
    });
    format!("http://{addr}/v1")
}

struct Env {
    base: String,
    http: reqwest::Client,
    _db: frogbot_testkit::TestDb,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The agent that asks on Slack.
const ASKER: &str = "metrics-asker-token";

/// Starts `frogbot serve` with `extra` TOML (top-level keys first, then tables, user alice);
/// answers once serving.
async fn serve(db: frogbot_testkit::TestDb, extra: &str) -> Env {
    let text = format!(
        "listen = \"127.0.0.1:0\"\ndatabase = \"{}\"\n{extra}\n[[users]]\nid = \"alice\"\ntoken = \"{ALICE}\"\n\n\
         [[agents]]\nid = \"asker\"\ntoken = \"{ASKER}\"\ntargets = [\"slack:*\"]\n",
        db.url
    );
    let config = frogbot::Config::parse(&text).expect("test config parses");
    config.validate().expect("test config is valid");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        frogbot::serve(
            config,
            listener,
            std::future::pending(),
            Duration::from_secs(1),
        )
        .await
        .expect("serve");
    });
    let base = format!("http://{addr}");
    let http = common::client();
    frogbot_testkit::eventually("the server answers", WAIT, async || {
        http.get(format!("{base}/healthz")).send().await.is_ok()
    })
    .await;
    Env {
        base,
        http,
        _db: db,
        server,
    }
}

impl Env {
    async fn scrape(&self, token: Option<&str>) -> reqwest::Response {
        let mut req = self.http.get(format!("{}/metrics", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().await.expect("GET /metrics")
    }

    /// `GET /metrics` with the token, parsed.
    async fn metrics(&self) -> Metrics {
        let res = self.scrape(Some(METRICS_TOKEN)).await;
        assert_eq!(res.status(), 200);
        assert_eq!(
            res.headers()[header::CONTENT_TYPE],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        let text = res.text().await.unwrap();
        let lines = text.lines().map(|l| Ok(l.to_owned()));
        Metrics {
            scrape: Scrape::parse(lines).expect("the Prometheus text format parses"),
            text,
        }
    }

    /// A message to chat `chat` with `model`, as JSON: the answer once the turn ended.
    async fn send(&self, chat: &str, model: &str) -> Value {
        let res = self
            .http
            .post(format!("{}/api/chats/{chat}/messages", self.base))
            .bearer_auth(ALICE)
            .json(&json!({"parts": [{"type": "text", "text": "hi"}], "model": model}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        res.json().await.unwrap()
    }
}

/// A parsed page, with its text for failure messages.
struct Metrics {
    scrape: Scrape,
    text: String,
}

impl Metrics {
    /// The samples of `name` whose labels include `labels`.
    fn samples<'a>(&'a self, name: &'a str, labels: &'a [(&str, &str)]) -> Vec<&'a Sample> {
        self.scrape
            .samples
            .iter()
            .filter(|s| s.metric == name)
            .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .collect()
    }

    /// The value of the one series `name{labels}` (a counter, a gauge or a histogram's count).
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let found = self.samples(name, labels);
        assert_eq!(
            found.len(),
            1,
            "one series {name}{labels:?}, found {}:\n{}",
            found.len(),
            self.text
        );
        match &found[0].value {
            PromValue::Counter(v) | PromValue::Gauge(v) | PromValue::Untyped(v) => *v,
            PromValue::Histogram(_) | PromValue::Summary(_) => {
                panic!("{name} is a histogram: use count")
            }
        }
    }

    /// The count of the histogram `name{labels}`.
    fn count(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let found = self.samples(name, labels);
        assert_eq!(
            found.len(),
            1,
            "one histogram {name}{labels:?}:\n{}",
            self.text
        );
        match &found[0].value {
            PromValue::Histogram(buckets) => buckets
                .last()
                .map(|b| b.count as u64)
                .expect("a +Inf bucket"),
            other => panic!("{name} is no histogram: {other:?}"),
        }
    }

    /// The sum of `name` over every series whose labels include `labels`.
    fn total(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples(name, labels)
            .iter()
            .map(|s| match &s.value {
                PromValue::Counter(v) | PromValue::Gauge(v) | PromValue::Untyped(v) => *v,
                _ => 0.0,
            })
            .sum()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_shows_in_every_series() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_max_level(tracing::Level::INFO)
        .try_init();
    let (bot_var, secret_var) = set_secrets();
    let fake = FakeSlack::start().await;
    let model_url = start_fake_model().await;
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let env = serve(
        db,
        &format!(
            r#"
default_model = "ok"

[[models]]
id = "ok"
provider = "openai-compatible"
base_url = "{model_url}"
max_retries = 0

[[models]]
id = "broken"
provider = "openai-compatible"
base_url = "{model_url}"
max_retries = 0

[channels.slack]
mode = "http"
bot_token_env = "{bot_var}"
signing_secret_env = "{secret_var}"
api_url = "{api_url}"

[metrics]
token_env = "{TOKEN_VAR}"
"#,
            api_url = fake.api_url()
        ),
    )
    .await;

    // Two turns (the second streamed as SSE), and one whose model call fails.
    let first = env.send("metrics-one", "ok").await;
    assert_eq!(first["state"], "idle", "{first}");
    let streamed = env
        .http
        .post(format!("{}/api/chats/metrics-two/messages", env.base))
        .bearer_auth(ALICE)
        .header("accept", "text/event-stream")
        .json(&json!({"parts": [{"type": "text", "text": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status(), 200);
    let body = streamed.text().await.unwrap();
    assert!(body.contains("[DONE]"), "{body}");
    let failed = env.send("metrics-three", "broken").await;
    assert_eq!(
        failed["reply"]["metadata"]["error"]["code"], "model-error",
        "{failed}"
    );

    // An ask to the Slack channel, answered by a click on the fake.
    let created: Value = env
        .http
        .post(format!("{}/api/asks", env.base))
        .bearer_auth(ASKER)
        .json(&json!({
            "to": {"channel": "slack", "thread": CHANNEL},
            "text": "Deploy?",
            "inputs": [{"header": "Go", "options": [{"label": "Approve"}, {"label": "Hold"}]}],
            "from": ["slack:U7"]
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(created["state"], "open", "{created}");
    let chat = frogbot_core::model::ChatId::new(created["chatId"].as_str().unwrap()).unwrap();
    // The card, once FrogBot has recorded where it posted it.
    let card = || async {
        let row = store.get_chat(&chat).await.unwrap()?;
        let waiting = row.awaiting_message_id?;
        let now = frogbot_core::model::now_millis();
        let qs = store
            .questions_of_message(&chat, &waiting, now)
            .await
            .unwrap();
        qs.first()?.record.current().map(|m| m.id.clone())
    };
    frogbot_testkit::eventually("the question card recorded", WAIT, async || {
        card().await.is_some()
    })
    .await;
    let card = card().await.unwrap();
    let approve = fake
        .click("U7", &card, "Approve")
        .expect("the Approve button");
    // A late click on the card as it was (its buttons are gone once answered).
    let late = fake.click("U8", &card, "Hold").expect("the Hold button");
    let status = fake
        .post_interaction(&env.base, &approve, Sig::Good, None)
        .await
        .status();
    assert_eq!(status, 200);
    let id = created["id"].as_str().unwrap();
    let done: Value = env
        .http
        .get(format!("{}/api/asks/{id}/wait?timeout=20", env.base))
        .bearer_auth(ASKER)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(done["state"], "answered", "{done}");

    // A late click whose private note Slack rate-limits: retried after waiting, then given up.
    fake.fail_method("chat.postEphemeral", Some("ratelimited"));
    let status = fake
        .post_interaction(&env.base, &late, Sig::Good, None)
        .await
        .status();
    assert_eq!(status, 200);
    frogbot_testkit::eventually("the rate-limited note given up on", WAIT, async || {
        fake.calls("chat.postEphemeral").len() >= 2
    })
    .await;

    // The token: 401 without it or with another, 200 with it.
    assert_eq!(env.scrape(None).await.status(), 401);
    assert_eq!(env.scrape(Some("wrong")).await.status(), 401);

    // Every turn has ended, every stream closed: scraped until the gauges settle.
    frogbot_testkit::eventually("the streams closed", WAIT, async || {
        let m = env.metrics().await;
        m.total("frogbot_sse_streams_open", &[]) == 0.0
            && m.total("frogbot_turns_finished_total", &[("model", "frogbot-ask")]) == 2.0
    })
    .await;
    let m = env.metrics().await;

    // Turns: by model and outcome, the failure by its code; durations as histograms.
    let started = "frogbot_turns_started_total";
    let finished = "frogbot_turns_finished_total";
    assert_eq!(m.value(started, &[("model", "ok")]), 2.0);
    assert_eq!(m.value(started, &[("model", "broken")]), 1.0);
    // The ask's turn: asked (awaiting), then resumed with the answer (done).
    assert_eq!(m.value(started, &[("model", "frogbot-ask")]), 2.0);
    assert_eq!(
        m.value(finished, &[("model", "ok"), ("outcome", "done")]),
        2.0
    );
    assert_eq!(
        m.value(finished, &[("model", "broken"), ("outcome", "failed")]),
        1.0
    );
    assert_eq!(
        m.value(
            finished,
            &[("model", "frogbot-ask"), ("outcome", "awaiting")]
        ),
        1.0
    );
    assert_eq!(
        m.value(finished, &[("model", "frogbot-ask"), ("outcome", "done")]),
        1.0
    );
    assert_eq!(
        m.value(
            "frogbot_turns_failed_total",
            &[("model", "broken"), ("reason", "model-error")]
        ),
        1.0
    );
    assert_eq!(m.total("frogbot_turns_failed_total", &[]), 1.0);
    let turn = "frogbot_turn_duration_seconds";
    assert_eq!(m.count(turn, &[("model", "ok"), ("outcome", "done")]), 2);
    assert_eq!(
        m.count(turn, &[("model", "broken"), ("outcome", "failed")]),
        1
    );
    assert_eq!(
        m.count("frogbot_step_duration_seconds", &[("model", "ok")]),
        2
    );
    assert_eq!(
        m.count("frogbot_step_duration_seconds", &[("model", "broken")]),
        1
    );

    // Questions on Slack: asked once, answered once (and its latency).
    let questions = "frogbot_questions_total";
    assert_eq!(
        m.value(questions, &[("platform", "slack"), ("event", "asked")]),
        1.0
    );
    assert_eq!(
        m.value(questions, &[("platform", "slack"), ("event", "answered")]),
        1.0
    );
    assert_eq!(
        m.count("frogbot_answer_latency_seconds", &[("platform", "slack")]),
        1
    );

    // Slack's Web API calls by method and status (what the fake recorded), and the waits.
    let calls = "frogbot_platform_api_calls_total";
    let posted = fake.calls("chat.postMessage").len() as f64;
    assert!(posted >= 2.0, "the ask's root and its card");
    assert_eq!(
        m.value(
            calls,
            &[
                ("platform", "slack"),
                ("method", "chat.postMessage"),
                ("status", "200")
            ]
        ),
        posted
    );
    let ephemerals = fake.calls("chat.postEphemeral").len() as f64;
    assert_eq!(
        m.value(
            calls,
            &[
                ("platform", "slack"),
                ("method", "chat.postEphemeral"),
                ("status", "ratelimited")
            ]
        ),
        ephemerals
    );
    assert_eq!(
        m.value(
            "frogbot_platform_rate_limit_waits_total",
            &[("platform", "slack")]
        ),
        ephemerals - 1.0,
        "a wait before every try but the first"
    );

    // The store's backlog (read at the scrape) and its operations' latency.
    assert_eq!(m.value("frogbot_queue_depth", &[]), 0.0);
    for state in ["due", "running", "dead"] {
        m.value("frogbot_jobs", &[("state", state)]);
    }
    assert_eq!(m.value("frogbot_jobs", &[("state", "dead")]), 0.0);
    let sends = m.count("frogbot_store_operation_seconds", &[("op", "send")]);
    assert!(sends >= 3, "three messages sent: {sends}");
    assert!(
        m.count(
            "frogbot_store_operation_seconds",
            &[("op", "record_outcome")]
        ) >= 1
    );

    // HTTP requests by route template (no chat id in a label) and status.
    let http = "frogbot_http_requests_total";
    let messages = "/api/chats/:chat_id/messages";
    assert_eq!(
        m.value(
            http,
            &[("route", messages), ("method", "POST"), ("status", "200")]
        ),
        3.0
    );
    assert_eq!(
        m.value(
            http,
            &[
                ("route", "/api/asks"),
                ("method", "POST"),
                ("status", "201")
            ]
        ),
        1.0
    );
    assert_eq!(
        m.value(
            http,
            &[("route", "/metrics"), ("method", "GET"), ("status", "401")]
        ),
        2.0
    );
    assert!(
        !m.text.contains("metrics-one"),
        "no chat id in a label:\n{}",
        m.text
    );
    assert!(
        m.total(http, &[("route", "/api/asks/:id/wait"), ("status", "200")]) == 1.0,
        "{}",
        m.text
    );
    let interactivity: f64 = m
        .samples(http, &[("method", "POST"), ("status", "200")])
        .iter()
        .filter(|s| s.labels.get("route").is_some_and(|r| r.contains("slack")))
        .map(|s| match s.value {
            PromValue::Counter(v) => v,
            _ => 0.0,
        })
        .sum();
    assert_eq!(interactivity, 2.0, "the two clicks:\n{}", m.text);
    // The SSE gauge exists for both kinds of stream once one was opened.
    assert_eq!(
        m.value("frogbot_sse_streams_open", &[("stream", "turn")]),
        0.0
    );
    // Help lines are there for Prometheus.
    assert!(
        m.text.contains("# HELP frogbot_turns_started_total"),
        "{}",
        m.text
    );
    let docs: HashMap<&String, &String> = m.scrape.docs.iter().collect();
    assert!(docs.contains_key(&"frogbot_questions_total".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_can_be_turned_off() {
    set_secrets();
    let env = serve(frogbot_testkit::sqlite_db(), "[metrics]\nenabled = false\n").await;
    let res = env.scrape(Some(METRICS_TOKEN)).await;
    assert_eq!(res.status(), 404);
}

#[test]
fn a_token_variable_that_is_unset_stops_the_start() {
    let config = frogbot::Config::parse(
        "[metrics]\ntoken_env = \"FROGBOT_TEST_METRICS_NO_SUCH_VARIABLE\"\n",
    )
    .unwrap();
    let err = config.validate().expect_err("refused");
    assert_eq!(err.key.as_deref(), Some("metrics.token_env"), "{err}");
    assert!(
        err.to_string()
            .contains("FROGBOT_TEST_METRICS_NO_SUCH_VARIABLE"),
        "{err}"
    );
}
