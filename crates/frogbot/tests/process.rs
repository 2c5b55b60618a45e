//! The real `frogbot` binary as separate processes: SIGTERM stops accepting requests, lets the
//! running turn finish and releases its lease; two `frogbot serve` processes on one database serve
//! the same chats.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::child::{ServeProcess, free_port, frogbot, start};

use frogbot_core::model::{ChatId, TurnState, now_millis};
use serde_json::{Value, json};

async fn serve(database: &str) -> ServeProcess {
    let port = free_port();
    let mut cmd = frogbot();
    cmd.arg("serve")
        .env("FROGBOT_DATABASE", database)
        .env("FROGBOT_LISTEN", format!("127.0.0.1:{port}"))
        .env("FROGBOT_CONFIG", "/dev/null");
    start(cmd, port).await
}

fn client() -> reqwest::Client {
    frogbot_openai::install_crypto_provider();
    reqwest::Client::new()
}

async fn post(base: &str, chat: &str, text: &str) -> (u16, Value) {
    let r = client()
        .post(format!("{base}/api/chats/{chat}/messages"))
        .json(&json!({"parts": [{"type": "text", "text": text}]}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn chat(base: &str, chat: &str) -> Value {
    client()
        .get(format!("{base}/api/chats/{chat}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn wait_for(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn sigterm_lets_the_running_turn_finish_and_releases_its_lease() {
    let db = frogbot_testkit::sqlite_db();
    let mut server = serve(&db.url).await;
    let base = server.base.clone();
    let turn = tokio::spawn({
        let base = base.clone();
        async move { post(&base, "term", "slow 1").await }
    });
    wait_for("the turn to run", async || {
        chat(&base, "term").await["state"] == "running"
    })
    .await;
    let pid = server.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    // The request in flight is answered, the process exits cleanly.
    let (status, body) = turn.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"]["parts"][1]["text"], "You said: slow 1");
    let exit = server.child.wait().unwrap();
    assert!(exit.success(), "exit status {exit:?}");
    // The turn's lease was released: the chat is idle right away, not after the lease time.
    let store = frogbot_testkit::open_store(&db.url).await;
    let row = store
        .get_chat(&ChatId::new("term").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.state(now_millis()), TurnState::Idle);
    assert!(row.lease.is_none());
}

async fn two_processes_share_chats(database: &str) {
    let a = serve(database).await;
    let b = serve(database).await;
    let running = tokio::spawn({
        let base = a.base.clone();
        async move { post(&base, "shared", "slow 1").await }
    });
    wait_for("A's turn to run", async || {
        chat(&b.base, "shared").await["state"] == "running"
    })
    .await;
    let (status, queued) = post(&b.base, "shared", "queued through b").await;
    assert_eq!(status, 202, "{queued}");
    assert_eq!(queued["delivery"], "queue");
    assert_eq!(running.await.unwrap().0, 200);
    // A's turn ended and promoted the message queued through B.
    wait_for("the queued message to be answered", async || {
        let c = chat(&a.base, "shared").await;
        c["state"] == "idle"
            && c["messages"].as_array().is_some_and(|m| {
                m.len() == 4 && m[3]["parts"][1]["text"] == "You said: queued through b"
            })
    })
    .await;
}

#[tokio::test]
async fn two_serve_processes_on_one_sqlite_file_share_chats() {
    let db = frogbot_testkit::sqlite_db();
    two_processes_share_chats(&db.url).await;
}

#[tokio::test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
async fn two_serve_processes_on_one_postgres_database_share_chats() {
    let Some(db) = frogbot_testkit::postgres_db() else {
        return;
    };
    two_processes_share_chats(&db.url).await;
}

/// A `frogbot serve` on `database` with a `lease`-second turn lease.
async fn serve_with_lease(database: &str, lease: u64, dir: &std::path::Path) -> ServeProcess {
    let port = free_port();
    let path = common::child::config_file(
        dir,
        port,
        database,
        &format!("turn_lease_seconds = {lease}"),
    );
    let mut cmd = frogbot();
    cmd.arg("serve").arg("--config").arg(&path);
    start(cmd, port).await
}

/// Sends `slow {slow}` to `chat` (the request is left running) and queues `n` messages behind it.
async fn slow_turn_and_queue(base: &str, chat: &str, slow: u32, n: usize) -> Vec<String> {
    tokio::spawn({
        let (base, chat) = (base.to_string(), chat.to_string());
        async move { post(&base, &chat, &format!("slow {slow}")).await }
    });
    wait_for("the turn to run", async || {
        chat_state(base, chat).await == "running"
    })
    .await;
    let mut texts = Vec::new();
    for i in 0..n {
        let text = format!("queued {i}");
        let (status, body) = post(base, chat, &text).await;
        assert_eq!(status, 202, "{body}");
        texts.push(text);
    }
    texts
}

async fn chat_state(base: &str, id: &str) -> String {
    chat(base, id).await["state"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Waits (at most `within`) until every queued text has its reply, then checks the chat: each ran
/// exactly once, in the order sent, and nothing is queued.
async fn assert_queue_ran_in_order(base: &str, id: &str, texts: &[String], within: Duration) {
    let deadline = Instant::now() + within;
    let messages = loop {
        let c = chat(base, id).await;
        let messages = c["messages"].as_array().cloned().unwrap_or_default();
        let answered = texts.iter().all(|t| {
            messages
                .iter()
                .any(|m| m["parts"].to_string().contains(&format!("You said: {t}")))
        });
        if answered && c["state"] == "idle" {
            break messages;
        }
        assert!(
            Instant::now() < deadline,
            "the queue did not run within {within:?}: {}",
            serde_json::to_string_pretty(&c).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        messages.iter().all(|m| m["metadata"]["status"] != "queued"),
        "nothing left queued"
    );
    // In stored order: each queued text, then its one reply, in the order they were sent.
    let mut order = Vec::new();
    for m in &messages {
        let text: String = m["parts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["text"].as_str())
            .collect();
        order.push((m["role"].as_str().unwrap_or("").to_string(), text));
    }
    let mut expected = Vec::new();
    for t in texts {
        expected.push(("user".to_string(), t.clone()));
        expected.push(("assistant".to_string(), format!("You said: {t}")));
    }
    let tail = &order[order.len() - expected.len()..];
    assert_eq!(
        tail,
        expected.as_slice(),
        "every queued message ran once, in order"
    );
}

/// Issue 14, defect 2: after `kill -9` in the middle of a queue, the chat's queue runs again on its
/// own once the lease runs out — every queued message once, in order, within the lease + 15 s,
/// with no new message sent — and the interrupted turn's reply says it was interrupted.
async fn after_kill_9_the_queue_runs_on_its_own_once_the_lease_runs_out(database: &str) {
    let dir = tempfile::tempdir().unwrap();
    let lease = 3;
    let mut first = serve_with_lease(database, lease, dir.path()).await;
    let texts = slow_turn_and_queue(&first.base.clone(), "killed", 60, 12).await;
    first.child.kill().unwrap(); // SIGKILL
    first.child.wait().unwrap();
    let killed_at = Instant::now();
    let second = serve_with_lease(database, lease, dir.path()).await;
    assert_queue_ran_in_order(
        &second.base,
        "killed",
        &texts,
        Duration::from_secs(lease + 15).saturating_sub(killed_at.elapsed()),
    )
    .await;
    let c = chat(&second.base, "killed").await;
    let interrupted = c["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("the interrupted turn has a reply");
    assert_eq!(
        interrupted["metadata"]["error"]["code"], "interrupted",
        "{interrupted}"
    );
}

/// Issue 14, defect 2: SIGTERM with messages queued lets the running turn finish, releases the
/// chat and hands the queue on: the next process runs it at once (long before the 60 s lease).
async fn sigterm_hands_the_queue_on_and_a_restart_runs_it_at_once(database: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut first = serve_with_lease(database, 60, dir.path()).await;
    let texts = slow_turn_and_queue(&first.base.clone(), "termq", 2, 12).await;
    let pid = first.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let exit = first.child.wait().unwrap();
    assert!(exit.success(), "exit status {exit:?}");
    let stopped_at = Instant::now();
    // The stopped process finished its turn and left the queue for the next one, released.
    let store = frogbot_testkit::open_store(database).await;
    let row = store
        .get_chat(&ChatId::new("termq").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(row.lease.is_none(), "the lease was released: {row:?}");
    let second = serve_with_lease(database, 60, dir.path()).await;
    assert_queue_ran_in_order(
        &second.base,
        "termq",
        &texts,
        Duration::from_secs(15).saturating_sub(stopped_at.elapsed()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_queue_on_sqlite() {
    let db = frogbot_testkit::sqlite_db();
    after_kill_9_the_queue_runs_on_its_own_once_the_lease_runs_out(&db.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
async fn kill_9_mid_queue_on_postgres() {
    let Some(db) = frogbot_testkit::postgres_db() else {
        return;
    };
    after_kill_9_the_queue_runs_on_its_own_once_the_lease_runs_out(&db.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_queue_on_sqlite() {
    let db = frogbot_testkit::sqlite_db();
    sigterm_hands_the_queue_on_and_a_restart_runs_it_at_once(&db.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
async fn sigterm_mid_queue_on_postgres() {
    let Some(db) = frogbot_testkit::postgres_db() else {
        return;
    };
    sigterm_hands_the_queue_on_and_a_restart_runs_it_at_once(&db.url).await;
}

/// Runs `frogbot serve` that must fail to start: its exit code and its stderr.
async fn failed_start(mut cmd: Command) -> (Option<i32>, String) {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("run frogbot"))
        .await
        .expect("join");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `frogbot serve` with `database` and `config` (a file's text) in a fresh directory.
fn serve_cmd(dir: &std::path::Path, database: &str, config: &str) -> Command {
    let path = dir.join("frogbot.toml");
    std::fs::write(&path, config).unwrap();
    let mut cmd = frogbot();
    cmd.arg("serve")
        .arg("--config")
        .arg(&path)
        .env("FROGBOT_DATABASE", database)
        .env("FROGBOT_LISTEN", format!("127.0.0.1:{}", free_port()))
        .env_remove("FROGBOT_CONFIG");
    cmd
}

/// Exit code 2 and exactly one line on stderr, containing every one of `names`.
#[track_caller]
fn assert_one_line(result: &(Option<i32>, String), names: &[&str]) {
    let (code, stderr) = result;
    assert_eq!(*code, Some(2), "exit code; stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    assert!(lines[0].starts_with("frogbot: "), "{stderr}");
    for name in names {
        assert!(lines[0].contains(name), "{name:?} in {stderr}");
    }
}

#[tokio::test]
async fn configuration_errors_exit_2_naming_key_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("x.db").display());
    let r = failed_start(serve_cmd(
        dir.path(),
        &db,
        "instructions = \"hi\"\n\nmax_steps = \"x\"\n",
    ))
    .await;
    assert_one_line(
        &r,
        &[
            "frogbot.toml line 3",
            "`max_steps`",
            "invalid type: string \"x\", expected u32",
        ],
    );
    let r = failed_start(serve_cmd(
        dir.path(),
        &db,
        "[channels.slack]\nbot_token_env = \"PATH\"\nmode = 7\n",
    ))
    .await;
    if cfg!(feature = "slack") {
        assert_one_line(&r, &["frogbot.toml line 3", "`channels.slack.mode`"]);
    } else {
        // A build without the `slack` feature refuses the table, naming the feature.
        assert_one_line(
            &r,
            &[
                "frogbot.toml line",
                "`channels.slack`: this frogbot was built without the `slack` feature (rebuild with --features slack)",
            ],
        );
    }
    let r = failed_start(serve_cmd(dir.path(), &db, "max_steps = = 3\n")).await;
    assert_one_line(&r, &["frogbot.toml line 1"]);
    // The database URL is never printed with its password.
    let r = failed_start(serve_cmd(dir.path(), "mysql://u:s3cret@db.local/x", "")).await;
    assert_one_line(&r, &["FROGBOT_DATABASE", "`database`", "u:***@db.local"]);
    assert!(!r.1.contains("s3cret"), "{}", r.1);
}

#[tokio::test]
async fn start_up_problems_exit_2_naming_what_and_where() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("x.db").display());
    // An SQLite file that cannot be opened.
    let r = failed_start(serve_cmd(dir.path(), "sqlite:///nonexistent/dir/x.db", "")).await;
    assert_one_line(
        &r,
        &["database sqlite:///nonexistent/dir/x.db", "unable to open"],
    );
    // A listen address in use.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mut cmd = serve_cmd(dir.path(), &db, "");
    cmd.env("FROGBOT_LISTEN", &addr);
    let r = failed_start(cmd).await;
    assert_one_line(&r, &[&format!("listen {addr}")]);
    // A PostgreSQL server that is not there: named, without the password (in a build without
    // PostgreSQL: the feature named).
    let port = free_port();
    let r = failed_start(serve_cmd(
        dir.path(),
        &format!("postgres://u:s3cret@127.0.0.1:{port}/db"),
        "",
    ))
    .await;
    if cfg!(feature = "postgres") {
        assert_one_line(
            &r,
            &[&format!("database postgres://u:***@127.0.0.1:{port}/db")],
        );
    } else {
        assert_one_line(&r, &["`database`", "--features postgres"]);
    }
    assert!(!r.1.contains("s3cret"), "{}", r.1);
}

#[cfg(feature = "telegram")]
#[tokio::test]
async fn a_platform_refusing_the_token_exits_2() {
    // The fake Bot API, refusing the token as Telegram refuses a revoked one.
    let fake = frogbot_telegram::testing::FakeBotApi::start().await;
    fake.refuse_token();
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("x.db").display());
    let mut cmd = serve_cmd(
        dir.path(),
        &db,
        &format!(
            "[channels.telegram]\ntoken_env = \"FROGBOT_TEST_TG_TOKEN\"\napi_url = \"{}\"\n",
            fake.url
        ),
    );
    cmd.env(
        "FROGBOT_TEST_TG_TOKEN",
        "123456:ABCdefGHIjklMNOpqrSTUvwxYZ012345678",
    );
    let r = failed_start(cmd).await;
    assert_one_line(&r, &["`channels.telegram`"]);
    assert!(!r.1.contains("ABCdef"), "{}", r.1);
    assert_eq!(fake.calls("getme").len(), 1, "serve asked who the bot is");
}
