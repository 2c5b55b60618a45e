//! The operator commands and readiness, with the real binary as child processes on a real SQLite
//! file: a `frogbot serve` child fills the database through the HTTP API (the demo model: an
//! idle chat and one waiting on a question), then `frogbot chats`, `show`, `jobs`, `jobs retry`
//! and `purge` run against it (their lines, `--json`, exit codes); dead jobs and an expired
//! question record are made through the store. `frogbot config check` runs offline on a good and
//! a bad configuration, and online against the fake Slack and Telegram (a good token, a bad one),
//! the fake Discord and a model endpoint's `/models` (a good key, a bad one);
//! `/readyz` answers 200 with the channels started and 503 naming the store once its file is gone.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::child::{ServeProcess, config_file, free_port, frogbot, start};
use frogbot_core::model::{ChatId, now_millis};
use frogbot_core::store::{DynStore, NewJob, NewQuestion};
use serde_json::{Value, json};

/// A finished child: its exit code, stdout and stderr.
struct Run {
    code: i32,
    out: String,
    err: String,
}

impl Run {
    fn lines(&self) -> Vec<&str> {
        self.out.lines().collect()
    }

    fn json_lines(&self) -> Vec<Value> {
        self.out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
            .collect()
    }
}

/// Runs `frogbot ARGS --config CONFIG` (with `env`) to its end.
async fn run(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_frogbot"));
    cmd.args(args)
        .arg("--config")
        .arg(config)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the command ends")
        .expect("run frogbot");
    let r = Run {
        code: out.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&out.stdout).into_owned(),
        err: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    eprintln!(
        "$ frogbot {} → {}\n{}{}",
        args.join(" "),
        r.code,
        r.out,
        r.err
    );
    r
}

/// `frogbot serve` on `database` with `rest` appended to its configuration, healthy.
async fn serve(dir: &Path, database: &str, rest: &str, env: &[(&str, &str)]) -> ServeProcess {
    let port = free_port();
    let config = config_file(dir, port, database, rest);
    let mut cmd = frogbot();
    cmd.arg("serve").arg("--config").arg(&config);
    for (k, v) in env {
        cmd.env(k, v);
    }
    start(cmd, port).await
}

async fn say(http: &reqwest::Client, base: &str, chat: &str, text: &str) -> Value {
    let r = http
        .post(format!("{base}/api/chats/{chat}/messages"))
        .json(&json!({"parts": [{"type": "text", "text": text}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{chat}: {text}");
    r.json().await.unwrap()
}

fn job(key: &str, run_at: i64) -> NewJob {
    NewJob {
        kind: "deliver".into(),
        key: Some(key.into()),
        payload: json!({"test": key}),
        run_at,
    }
}

/// Enqueues a job due at `at`, claims it then and buries it: a dead job created at `at`.
async fn dead_job(store: &DynStore, key: &str, at: i64) -> i64 {
    let id = store.enqueue_job(&job(key, at)).await.unwrap();
    let claimed = store
        .claim_job("ops-test", 1_000, at)
        .await
        .unwrap()
        .expect("due");
    assert_eq!(claimed.id, id, "the only job due then");
    assert!(store.bury_job(&claimed, "channel_not_found").await.unwrap());
    id
}

const DAY_MS: i64 = 24 * 3_600 * 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_commands_read_and_repair_a_filled_database() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("ops.db").display());
    let server = serve(dir.path(), &database, "", &[]).await;
    let config = dir.path().join("frogbot.toml");
    let http = common::client();
    let hello = say(&http, &server.base, "hello", "hello there").await;
    assert_eq!(hello["state"], "idle");
    let asked = say(&http, &server.base, "asking", "please ask me").await;
    assert_eq!(asked["state"], "awaiting");

    // While the server runs: every chat, newest first, one line each.
    let r = run(&config, &["chats"], &[]).await;
    assert_eq!(r.code, 0, "{}", r.err);
    let lines = r.lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let cells: Vec<Vec<&str>> = lines
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(cells[0][..3], ["asking", "awaiting", "web"]);
    assert_eq!(cells[1][..3], ["hello", "idle", "web"]);
    assert_eq!(cells[0][4], "-", "anonymous: no owner");
    let r = run(&config, &["chats", "--state", "awaiting"], &[]).await;
    assert_eq!(r.lines().len(), 1);
    assert!(r.out.starts_with("asking "), "{}", r.out);
    let r = run(&config, &["chats", "--channel", "slack"], &[]).await;
    assert_eq!((r.code, r.out.as_str()), (0, ""));
    let r = run(&config, &["chats", "--json", "--limit", "1"], &[]).await;
    let rows = r.json_lines();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["chatId"], "asking");
    assert_eq!(rows[0]["state"], "awaiting");
    assert_eq!(rows[0]["channel"], Value::Null);
    let r = run(&config, &["chats", "--state", "sleeping"], &[]).await;
    assert_eq!(r.code, 1, "a bad flag exits 1");
    assert_eq!(r.err.lines().count(), 1, "{}", r.err);

    // show: the row, the messages (text shortened), the question record and its outcome.
    let r = run(&config, &["show", "asking"], &[]).await;
    assert_eq!(r.code, 0, "{}", r.err);
    let lines = r.lines();
    assert!(
        lines[0].starts_with("chat asking  awaiting  web"),
        "{lines:?}"
    );
    assert!(lines[1].contains(" user - ") && lines[1].ends_with(": please ask me"));
    assert!(lines[2].contains(" assistant ") && lines[2].contains("[tool question"));
    let question = lines.last().unwrap();
    assert!(
        question.starts_with("question ") && question.ends_with(": open"),
        "{question}"
    );
    let r = run(&config, &["show", "asking", "--json"], &[]).await;
    let shown = &r.json_lines()[0];
    assert_eq!(shown["chat"]["state"], "awaiting");
    assert_eq!(shown["messages"].as_array().unwrap().len(), 2);
    assert_eq!(shown["questions"][0]["outcome"], Value::Null);
    let call = shown["questions"][0]["toolCallId"]
        .as_str()
        .unwrap()
        .to_string();
    // Answered over HTTP: show names the outcome and who gave it.
    let input = &shown["questions"][0]["input"]["questions"][0];
    let label = input["options"][0]["label"].as_str().unwrap();
    let settled = http
        .post(format!("{}/api/chats/asking/settle", server.base))
        .json(&json!({"toolCallId": call, "output": {"answers": [
            {"header": input["header"], "selected": [label]}
        ]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(settled.status(), 200);
    frogbot_testkit::eventually("the turn to end", common::WAIT, async || {
        let r = run(&config, &["chats", "--state", "idle", "--json"], &[]).await;
        r.json_lines().len() == 2
    })
    .await;
    let r = run(&config, &["show", "asking"], &[]).await;
    let question = r
        .lines()
        .into_iter()
        .find(|l| l.starts_with("question "))
        .unwrap()
        .to_string();
    assert!(
        question.contains(": answered by anonymous at ") && question.contains(label),
        "{question}"
    );
    let r = run(&config, &["show", "nowhere"], &[]).await;
    assert_eq!((r.code, r.err.trim()), (1, "frogbot: no chat nowhere"));
    // A message with terminal sequences (clipboard write, clear screen) is shown escaped.
    say(
        &http,
        &server.base,
        "escapes",
        "copy \u{1b}]52;c;cm0gLXJmIH4=\u{7} then \u{1b}[2J",
    )
    .await;
    let r = run(&config, &["show", "escapes"], &[]).await;
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(
        !r.out.contains('\u{1b}') && !r.out.contains('\u{7}'),
        "{:?}",
        r.out
    );
    assert!(
        r.out
            .contains("copy \\u{1b}]52;c;cm0gLXJmIH4=\\u{7} then \\u{1b}[2J"),
        "{}",
        r.out
    );
    drop(server);

    // Jobs through the store: a dead one past the retention (7 days), a fresh dead one, a live one.
    let store = frogbot_testkit::open_store(&database).await;
    let now = now_millis();
    let old = dead_job(&store, "ops:old", now - 10 * DAY_MS).await;
    let fresh = dead_job(&store, "ops:fresh", now - 1_000).await;
    let later = store
        .enqueue_job(&job("ops:later", now + 3_600_000))
        .await
        .unwrap();
    // An expired question record (30 days after its last change).
    let expired_input = serde_json::from_value(json!({"questions": [{
        "header": "Old", "question": "Still there?",
        "options": [{"label": "yes"}, {"label": "no"}]
    }]}))
    .unwrap();
    store
        .insert_questions(
            &[NewQuestion {
                tool_call_id: "call-expired".into(),
                chat_id: ChatId::new("hello").unwrap(),
                message_id: "gone".into(),
                call_index: 0,
                input: expired_input,
                answer_deadline: None,
            }],
            now - 31 * DAY_MS,
        )
        .await
        .unwrap();
    drop(store);

    let r = run(&config, &["jobs"], &[]).await;
    assert_eq!(r.code, 0, "{}", r.err);
    let line = r
        .lines()
        .into_iter()
        .find(|l| l.contains("ops:later"))
        .expect("the live job");
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        cells[..5],
        [
            later.to_string().as_str(),
            "deliver",
            "ops:later",
            "attempts",
            "0"
        ]
    );
    assert!(
        !r.out.contains("ops:old") && !r.out.contains("ops:fresh"),
        "{}",
        r.out
    );
    let r = run(&config, &["jobs", "--dead"], &[]).await;
    let lines = r.lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with(&format!("{old} ")) && lines[0].contains("ops:old"));
    assert!(lines[1].starts_with(&format!("{fresh} ")) && lines[1].contains("ops:fresh"));
    assert!(
        lines
            .iter()
            .all(|l| l.ends_with("channel_not_found") && l.contains("attempts 1"))
    );
    let r = run(&config, &["jobs", "--dead", "--json"], &[]).await;
    let dead = r.json_lines();
    assert_eq!(dead[0]["id"], old);
    assert_eq!(dead[0]["dead"], true);
    assert_eq!(dead[0]["lastError"], "channel_not_found");
    assert_eq!(dead[1]["key"], "ops:fresh");

    // retry: the dead job is live again, due now; a live one and an unknown id exit 1.
    let r = run(&config, &["jobs", "retry", &fresh.to_string()], &[]).await;
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(
        r.out.trim(),
        format!("job {fresh} (ops:fresh) is live again, due now")
    );
    let r = run(&config, &["jobs", "--json"], &[]).await;
    let revived = r
        .json_lines()
        .into_iter()
        .find(|j| j["id"] == fresh)
        .expect("listed live");
    assert_eq!(
        (revived["dead"].clone(), revived["attempts"].clone()),
        (json!(false), json!(0))
    );
    let r = run(&config, &["jobs", "retry", &later.to_string()], &[]).await;
    assert_eq!(r.code, 1);
    assert_eq!(r.err.lines().count(), 1, "{}", r.err);
    assert!(
        r.err
            .starts_with(&format!("frogbot: job {later} is not dead")),
        "{}",
        r.err
    );
    let r = run(&config, &["jobs", "retry", "987654"], &[]).await;
    assert_eq!((r.code, r.err.trim()), (1, "frogbot: no job 987654"));
    let r = run(&config, &["jobs", "retry", "x"], &[]).await;
    assert_eq!(r.code, 1, "not an id");

    // purge: the dry run counts and changes nothing; the purge removes exactly that.
    let r = run(&config, &["purge", "--dry-run"], &[]).await;
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(
        r.out.trim(),
        "would remove 1 expired question record and 1 dead job older than 7 days \
         (dry run: nothing removed)"
    );
    let r = run(&config, &["jobs", "--dead", "--json"], &[]).await;
    assert_eq!(r.json_lines().len(), 1, "the dry run removed nothing");
    let r = run(&config, &["purge"], &[]).await;
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(
        r.out.trim(),
        "removed 1 expired question record and 1 dead job older than 7 days; 0 dead jobs kept"
    );
    let r = run(&config, &["jobs", "--dead"], &[]).await;
    assert_eq!((r.code, r.out.as_str()), (0, ""));
    let r = run(&config, &["purge", "--dry-run"], &[]).await;
    assert!(
        r.out
            .starts_with("would remove 0 expired question records and 0 dead jobs")
    );
    let store = frogbot_testkit::open_store(&database).await;
    assert!(store.get_job(old).await.unwrap().is_none());
    assert!(
        store.get_job(later).await.unwrap().is_some(),
        "live jobs stay"
    );
}

#[tokio::test]
async fn an_operator_command_never_creates_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("missing.db");
    let database = format!("sqlite://{}", file.display());
    let config = config_file(dir.path(), free_port(), &database, "");
    let r = run(&config, &["chats"], &[]).await;
    assert_eq!(r.code, 2);
    assert_eq!(r.err.lines().count(), 1, "{}", r.err);
    assert!(r.err.contains("no such file"), "{}", r.err);
    assert!(!file.exists());
}

#[tokio::test]
async fn config_check_offline_reads_and_validates() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("c.db").display());
    let good = config_file(dir.path(), free_port(), &database, "max_steps = 5");
    let r = run(&good, &["config", "check", "--offline"], &[]).await;
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(
        r.out.trim(),
        format!(
            "ok config: {} (database {database}, models: demo, channels: none)",
            good.display()
        )
    );
    let bad = config_file(dir.path(), free_port(), &database, "\nmax_steps = 0");
    let r = run(&bad, &["config", "check", "--offline"], &[]).await;
    assert_eq!(r.code, 1);
    assert_eq!(r.lines().len(), 1, "{}", r.out);
    assert_eq!(
        r.out.trim(),
        format!(
            "FAIL config: {} line 5: `max_steps`: must be at least 1",
            bad.display()
        )
    );
    // A channel's missing variable is named too, before any network.
    let bad = config_file(
        dir.path(),
        free_port(),
        &database,
        "[channels.slack]\nbot_token_env = \"FROGBOT_TEST_SURELY_UNSET\"\nsigning_secret_env = \"PATH\"",
    );
    let r = run(&bad, &["config", "check", "--offline"], &[]).await;
    assert_eq!(r.code, 1);
    assert_eq!(r.lines().len(), 1, "{}", r.out);
    // A build without the `slack` feature refuses the table itself, naming the feature.
    let expected = if cfg!(feature = "slack") {
        "`channels.slack.bot_token_env`"
    } else {
        "`channels.slack`: this frogbot was built without the `slack` feature (rebuild with --features slack)"
    };
    assert!(
        r.out.starts_with("FAIL config: ") && r.out.contains(expected),
        "{}",
        r.out
    );
}

#[cfg(feature = "slack")]
const SLACK_TOKEN_VAR: &str = "FROGBOT_TEST_SLACK_BOT_TOKEN";
#[cfg(feature = "slack")]
const SLACK_SECRET_VAR: &str = "FROGBOT_TEST_SLACK_SIGNING_SECRET";
#[cfg(feature = "telegram")]
const TG_TOKEN_VAR: &str = "FROGBOT_TEST_TELEGRAM_TOKEN";

#[cfg(all(feature = "slack", feature = "telegram"))]
#[tokio::test]
async fn config_check_asks_slack_and_telegram() {
    use frogbot_slack::testing::{BOT_TOKEN, BOT_USER, FakeSlack, SIGNING_SECRET, TEAM};
    use frogbot_telegram::testing::{BOT_ID, BOT_USERNAME, FakeBotApi, TOKEN};
    let slack = FakeSlack::start().await;
    let telegram = FakeBotApi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("c.db").display());
    let config = config_file(
        dir.path(),
        free_port(),
        &database,
        &format!(
            "[channels.slack]\nbot_token_env = \"{SLACK_TOKEN_VAR}\"\n\
             signing_secret_env = \"{SLACK_SECRET_VAR}\"\napi_url = \"{}\"\n\n\
             [channels.telegram]\ntoken_env = \"{TG_TOKEN_VAR}\"\napi_url = \"{}\"\n",
            slack.api_url(),
            telegram.url
        ),
    );
    let env = |slack_token: &'static str, tg_token: &'static str| {
        [
            (SLACK_TOKEN_VAR, slack_token),
            (SLACK_SECRET_VAR, SIGNING_SECRET),
            (TG_TOKEN_VAR, tg_token),
        ]
    };
    let r = run(&config, &["config", "check"], &env(BOT_TOKEN, TOKEN)).await;
    assert_eq!(r.code, 0, "{}{}", r.out, r.err);
    assert_eq!(
        r.lines()[1..],
        [
            format!("ok slack: bot {BOT_USER} in team {TEAM}").as_str(),
            format!("ok telegram: bot @{BOT_USERNAME} ({BOT_ID}); no webhook (polling), 0 pending")
                .as_str(),
        ]
    );
    assert_eq!(slack.calls("auth.test").len(), 1);
    assert_eq!(telegram.calls("getme").len(), 1);
    assert_eq!(telegram.calls("getwebhookinfo").len(), 1);

    // A token Slack does not know: one line naming the channel, exit 1; Telegram still checked.
    let r = run(&config, &["config", "check"], &env("xoxb-revoked", TOKEN)).await;
    assert_eq!(r.code, 1);
    assert_eq!(r.lines()[1], "FAIL slack: auth.test: invalid_auth");
    assert!(r.lines()[2].starts_with("ok telegram: "), "{}", r.out);
    assert!(!r.out.contains("xoxb-revoked"));

    // Telegram refusing the token (as it refuses a revoked one): 401, the token never printed.
    telegram.refuse_token();
    let revoked = "123456:REVOKEDtokenREVOKEDtoken";
    let r = run(&config, &["config", "check"], &env(BOT_TOKEN, revoked)).await;
    assert_eq!(r.code, 1);
    assert_eq!(
        r.lines()[1..],
        [
            "ok slack: bot UBOT in team T1",
            "FAIL telegram: getMe: 401 Unauthorized"
        ]
    );
    assert!(!r.out.contains("REVOKED") && !r.err.contains("REVOKED"));
    // Offline: no call at all.
    let calls = slack.calls("auth.test").len();
    let r = run(
        &config,
        &["config", "check", "--offline"],
        &env(BOT_TOKEN, TOKEN),
    )
    .await;
    assert_eq!((r.code, r.lines().len()), (0, 1));
    assert_eq!(slack.calls("auth.test").len(), calls);
}

#[cfg(feature = "telegram")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_names_the_store_when_its_file_is_gone() {
    use frogbot_telegram::testing::{FakeBotApi, TOKEN};
    let telegram = FakeBotApi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ready.db");
    let database = format!("sqlite://{}", file.display());
    let server = serve(
        dir.path(),
        &database,
        &format!(
            "[channels.telegram]\ntoken_env = \"{TG_TOKEN_VAR}\"\napi_url = \"{}\"\n",
            telegram.url
        ),
        &[(TG_TOKEN_VAR, TOKEN)],
    )
    .await;
    let http = common::client();
    let get = |path: &'static str| {
        let (http, base) = (http.clone(), server.base.clone());
        async move {
            let r = http.get(format!("{base}{path}")).send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.text().await.unwrap())
        }
    };
    let (status, body) = get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["ready"], true);
    let checks: Vec<&str> = body["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(
        checks,
        ["store", "migrations", "channel:telegram", "shutdown"]
    );
    assert!(body.get("notReady").is_none());
    assert_eq!(
        get("/healthz").await,
        (200, "ok".into()),
        "the contract's liveness"
    );

    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
    let (status, body) = get("/readyz").await;
    assert_eq!(status, 503, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["ready"], false);
    let not_ready = body["notReady"].as_array().unwrap();
    assert_eq!(not_ready.len(), 1, "{body}");
    assert_eq!(not_ready[0]["check"], "store");
    // The store's error (it names the file) goes to the log, not to the caller.
    assert_eq!(not_ready[0]["error"], "store unreachable", "{body}");
    assert!(
        !body.to_string().contains(&*file.to_string_lossy()),
        "{body}"
    );
    // healthz the same: no file name, no driver words.
    assert_eq!(
        get("/healthz").await,
        (503, "store unreachable".into()),
        "the contract's liveness"
    );
}

/// A model endpoint's `GET /v1/models` (OpenAI's list shape) that takes one key, else 401.
#[cfg(feature = "discord")]
async fn models_endpoint() -> String {
    use axum::http::{HeaderMap, StatusCode};
    async fn models(headers: HeaderMap) -> (StatusCode, axum::Json<Value>) {
        if headers.get("authorization").and_then(|v| v.to_str().ok()) == Some("Bearer sk-good") {
            let list = json!({"object": "list", "data": [
                {"id": "llama3.2", "object": "model", "created": 0, "owned_by": "library"}
            ]});
            (StatusCode::OK, axum::Json(list))
        } else {
            let refused = json!({"error": {"message": "Incorrect API key provided",
                "type": "invalid_request_error", "code": "invalid_api_key"}});
            (StatusCode::UNAUTHORIZED, axum::Json(refused))
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route("/v1/models", axum::routing::get(models));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

#[cfg(feature = "discord")]
#[tokio::test]
async fn config_check_asks_discord_and_every_model() {
    use frogbot_discord::testing::FakeDiscord;
    let discord = FakeDiscord::start(4242, 777).await;
    let base = models_endpoint().await;
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("c.db").display());
    let config = config_file(
        dir.path(),
        free_port(),
        &database,
        &format!(
            "[[models]]\nid = \"main\"\nprovider = \"openai-compatible\"\nbase_url = \"{base}\"\n\
             model = \"llama3.2\"\napi_key_env = \"FROGBOT_TEST_MODEL_KEY\"\n\n\
             [channels.discord]\ntoken_env = \"FROGBOT_TEST_DISCORD_TOKEN\"\n\
             application_id = \"4242\"\napi_url = \"{}\"\n",
            discord.api_url
        ),
    );
    let env = |key: &'static str| {
        [
            ("FROGBOT_TEST_MODEL_KEY", key),
            ("FROGBOT_TEST_DISCORD_TOKEN", "discord-test-token"),
        ]
    };
    let r = run(&config, &["config", "check"], &env("sk-good")).await;
    assert_eq!(r.code, 0, "{}{}", r.out, r.err);
    assert_eq!(
        r.lines()[1..],
        [
            "ok discord: bot frogbot (777), Message Content intent on".to_string(),
            format!("ok model main: {base}/models answers (llama3.2 listed)"),
        ]
    );
    let r = run(&config, &["config", "check"], &env("sk-bad")).await;
    assert_eq!(r.code, 1);
    assert_eq!(
        r.lines()[2],
        format!("FAIL model main: {base}/models: 401 Unauthorized: Incorrect API key provided")
    );
    assert!(!r.out.contains("sk-bad"));

    // A token Discord refuses: one line naming the channel, exit 1, the token never printed.
    discord.require_token("the-real-token");
    let r = run(&config, &["config", "check"], &env("sk-good")).await;
    assert_eq!(r.code, 1, "{}{}", r.out, r.err);
    assert_eq!(
        r.lines()[1],
        "FAIL discord: GET /users/@me: 401 Unauthorized: 401: Unauthorized"
    );
    assert!(!r.out.contains("discord-test-token"));
    // The right token, but the Message Content intent off.
    let real = [
        ("FROGBOT_TEST_MODEL_KEY", "sk-good"),
        ("FROGBOT_TEST_DISCORD_TOKEN", "the-real-token"),
    ];
    discord.set_application_flags(1 << 23);
    let r = run(&config, &["config", "check"], &real).await;
    assert_eq!(r.code, 1, "{}{}", r.out, r.err);
    assert!(
        r.lines()[1]
            .starts_with("FAIL discord: bot frogbot (777): the Message Content intent is off"),
        "{}",
        r.out
    );
    discord.set_application_flags(1 << 18);
    let r = run(&config, &["config", "check"], &real).await;
    assert_eq!(r.code, 0, "{}{}", r.out, r.err);
}
