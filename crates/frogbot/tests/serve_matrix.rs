//! `[channels.matrix]` in the real `frogbot serve` binary against a real Synapse on loopback
//! (`frogbot_matrix::testing::synapse` starts it; skipped with a message when Synapse is not installed, unless
//! `FROGBOT_REQUIRE_SYNAPSE=1`): serve logs in with the password from the environment variable the
//! configuration names, joins a DM it is invited to, answers "ask" with a native poll in a thread,
//! and takes the poll response as the answer; a person outside `allow` is told so in the thread.

#![recursion_limit = "256"]

mod common;

use common::child::{ServeProcess, config_file, free_port, frogbot, start};
use frogbot_matrix::testing::synapse as support;
use serde_json::{Value, json};
use support::thread_root;

const PASSWORD_VAR: &str = "FROGBOT_TEST_MATRIX_PASSWORD";
const WAIT: u64 = 60;
/// The agent that asks people on Matrix in these tests.
const AGENT: &str = "matrix-asker-token";

struct Serve {
    base: String,
    _process: ServeProcess,
    _dir: tempfile::TempDir,
    _db: frogbot_testkit::TestDb,
}

async fn serve(table: &str, password: &str) -> Serve {
    serve_logging(table, password, None).await
}

/// `serve`, its log (stdout) written to `log` with the default log filter (no `RUST_LOG`), as
/// when run by a service manager.
async fn serve_logging(table: &str, password: &str, log: Option<&std::path::Path>) -> Serve {
    let db = frogbot_testkit::sqlite_db();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let store = dir.path().join("matrix");
    let path = config_file(
        dir.path(),
        port,
        &db.url,
        &format!(
            // The stable poll events this test reads (the default is the unstable form Element renders).
            "[channels.matrix]\n{table}\npoll_events = \"stable\"\nstore_path = \"{}\"\npassword_env = \"{PASSWORD_VAR}\"\n\n\
             [[agents]]\nid = \"asker\"\ntoken = \"{AGENT}\"\ntargets = [\"matrix:*\"]",
            store.display()
        ),
    );
    let mut cmd = frogbot();
    cmd.arg("serve")
        .arg("--config")
        .arg(&path)
        .env(PASSWORD_VAR, password);
    if let Some(log) = log {
        cmd.env_remove("RUST_LOG")
            .stdout(std::fs::File::create(log).unwrap());
    }
    let process = start(cmd, port).await;
    Serve {
        base: process.base.clone(),
        _process: process,
        _dir: dir,
        _db: db,
    }
}

fn body(ev: &Value) -> &str {
    ev["content"]["body"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_a_matrix_dm_with_a_poll_and_takes_the_response() {
    let Some(hs) = support::synapse().await else {
        return;
    };
    let bot = hs.register("servebot").await;
    let alice_account = hs.register("alice").await;
    let bob_account = hs.register("bob").await;
    let _serve = serve(
        &format!(
            "homeserver = \"{}\"\nuser_id = \"{}\"\nusers = {{ \"{}\" = \"alice\" }}\nallow = [\"alice\"]",
            hs.url, bot.user_id, alice_account.user_id
        ),
        &bot.password,
    )
    .await;
    let alice = hs.person(&alice_account).await;
    let bob = hs.person(&bob_account).await;
    let bot_id = bot.user_id.to_string();
    let from_bot = |e: &Value| e["sender"] == bot_id.as_str();

    // A room of three: alice mentions the bot; bob (not allowed) does too.
    let room = alice
        .create_room(&[&bot.user_id, &bob_account.user_id], false)
        .await;
    bob.join(&room).await;
    alice
        .wait_for(&room, WAIT, "the bot to join", |e| {
            e["type"] == "m.room.member"
                && e["state_key"] == bot_id.as_str()
                && e["content"]["membership"] == "join"
        })
        .await;
    let mention = |text: &str| {
        json!({"msgtype": "m.text", "body": format!("{bot_id}: {text}"),
               "m.mentions": {"user_ids": [bot_id]}})
    };
    let ask = alice.send(&room, "m.room.message", mention("ask")).await;
    let poll = alice
        .wait_for(&room, WAIT, "the poll in the thread", |e| {
            from_bot(e) && e["type"] == "m.poll.start" && thread_root(e) == Some(ask.as_str())
        })
        .await;
    let answers = poll["content"]["m.poll"]["answers"].as_array().unwrap();
    assert_eq!(answers.len(), 3, "{poll:#}");
    let green = answers
        .iter()
        .find(|a| a["m.text"][0]["body"] == "Green")
        .unwrap_or_else(|| panic!("no Green in {poll:#}"))["m.id"]
        .clone();
    alice
        .send(
            &room,
            "m.poll.response",
            json!({"m.selections": [green], "m.relates_to": {"rel_type": "m.reference", "event_id": poll["event_id"]}}),
        )
        .await;
    let chose = alice
        .wait_for(&room, WAIT, "the agent's continuation", |e| {
            from_bot(e) && body(e).starts_with("You chose")
        })
        .await;
    assert_eq!(body(&chose), "You chose Colour: Green.");
    assert_eq!(thread_root(&chose), Some(ask.as_str()));
    alice
        .wait_for(&room, WAIT, "the poll's end", |e| {
            from_bot(e) && e["type"] == "m.poll.end"
        })
        .await;

    let hello = bob.send(&room, "m.room.message", mention("hello")).await;
    let notice = bob
        .wait_for(&room, WAIT, "the notice to bob", |e| {
            from_bot(e) && thread_root(e) == Some(hello.as_str())
        })
        .await;
    assert!(body(&notice).contains("not allowed"), "{notice:#}");
    assert!(
        bob.seen(&room, |e| from_bot(e) && body(e).starts_with("You said"))
            .is_empty()
    );
}

/// Issue 42: an agent in an MCP client (the official TypeScript SDK's, over serve's `/mcp`) asks
/// in a Matrix room; a real second client sees the native poll in a new thread, alice's response
/// answers it, and the tool's result carries the typed value and who answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_ask_in_a_room_returns_the_poll_response() {
    let Some(hs) = support::synapse().await else {
        return;
    };
    let bot = hs.register("mcpbot").await;
    let alice_account = hs.register("mcpalice").await;
    let serve = serve(
        &format!(
            "homeserver = \"{}\"\nuser_id = \"{}\"\nusers = {{ \"{}\" = \"alice\" }}\nallow = [\"alice\"]",
            hs.url, bot.user_id, alice_account.user_id
        ),
        &bot.password,
    )
    .await;
    let alice = hs.person(&alice_account).await;
    let bot_id = bot.user_id.to_string();
    let room = alice.create_room(&[&bot.user_id], false).await;
    alice
        .wait_for(&room, WAIT, "the bot to join", |e| {
            e["type"] == "m.room.member"
                && e["state_key"] == bot_id.as_str()
                && e["content"]["membership"] == "join"
        })
        .await;
    let mut mcp = common::mcp::McpClient::http(&format!("{}/mcp", serve.base), Some(AGENT))
        .await
        .expect("connects");
    mcp.call(
        "ask",
        "ask_person",
        json!({"to": format!("matrix:{room}"), "text": "Deploy v1.4?",
               "inputs": [{"header": "Go", "question": "Deploy?",
                           "options": [{"label": "Approve"}, {"label": "Hold"}]}]}),
    )
    .await;
    let poll = alice
        .wait_for(&room, WAIT, "the poll", |e| {
            e["sender"] == bot_id.as_str() && e["type"] == "m.poll.start"
        })
        .await;
    let approve = poll["content"]["m.poll"]["answers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["m.text"][0]["body"] == "Approve")
        .unwrap_or_else(|| panic!("no Approve in {poll:#}"))["m.id"]
        .clone();
    alice
        .send(
            &room,
            "m.poll.response",
            json!({"m.selections": [approve], "m.relates_to": {"rel_type": "m.reference", "event_id": poll["event_id"]}}),
        )
        .await;
    let result = mcp.result_of("ask").await;
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["state"], "answered", "{result}");
    assert_eq!(
        result["structuredContent"]["values"],
        json!({"Go": "Approve"})
    );
    assert_eq!(result["structuredContent"]["by"]["user"], "alice");
    mcp.close().await;
}

/// `frogbot config check` asks Synapse `whoami` with the configured access token: the bot's own
/// token passes naming the bot; a token Synapse does not know fails in one line naming the
/// channel, exit 1. Neither token is ever printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_check_asks_synapse_whoami_with_the_access_token() {
    const TOKEN_VAR: &str = "FROGBOT_TEST_MATRIX_ACCESS_TOKEN";
    let Some(hs) = support::synapse().await else {
        return;
    };
    let bot = hs.register("checkbot").await;
    let db = frogbot_testkit::sqlite_db();
    let dir = tempfile::tempdir().unwrap();
    let path = config_file(
        dir.path(),
        free_port(),
        &db.url,
        &format!(
            "[channels.matrix]\nhomeserver = \"{}\"\nuser_id = \"{}\"\nstore_path = \"{}\"\n\
             access_token_env = \"{TOKEN_VAR}\"",
            hs.url,
            bot.user_id,
            dir.path().join("matrix").display()
        ),
    );
    let check = async |token: &str| {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_frogbot"))
            .args(["config", "check", "--config"])
            .arg(&path)
            .env(TOKEN_VAR, token)
            .env("RUST_LOG", "warn")
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        eprintln!(
            "$ frogbot config check → {:?}\n{stdout}{stderr}",
            out.status
        );
        assert!(
            !stdout.contains(token) && !stderr.contains(token),
            "the token was printed"
        );
        (out.status.code(), stdout)
    };

    let (code, out) = check(&bot.access_token).await;
    assert_eq!(code, Some(0), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("ok config: "), "{out}");
    let ok = format!(
        "ok matrix: {} on {}",
        bot.user_id,
        hs.url.trim_end_matches('/')
    );
    assert!(lines[1].starts_with(&ok), "{out}");

    let unknown = "syt_Y2hlY2tib3Q_notARealTokenAtAll_0aBcDe";
    let (code, out) = check(unknown).await;
    assert_eq!(code, Some(1), "{out}");
    let failed: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(failed.len(), 1, "{out}");
    assert!(
        failed[0].starts_with("FAIL matrix: whoami: 401 Unauthorized"),
        "{out}"
    );
    assert!(failed[0].contains("M_UNKNOWN_TOKEN"), "{out}");
}

/// What serve logs on a real Synapse at its default level (INFO) into a file: no line of
/// matrix-sdk's per-sync span (1.5 kB each, every sync), no ERROR for what is expected at start
/// (a new device's missing backup and key storage answer 404), and no colour codes in a file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_logs_on_synapse_are_short_plain_and_free_of_expected_errors() {
    let Some(hs) = support::synapse().await else {
        return;
    };
    let bot = hs.register("logbot").await;
    let alice_account = hs.register("alice").await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let serve = serve_logging(
        &format!("homeserver = \"{}\"\nuser_id = \"{}\"", hs.url, bot.user_id),
        &bot.password,
        Some(&log),
    )
    .await;
    let alice = hs.person(&alice_account).await;
    let bot_id = bot.user_id.to_string();
    let room = alice.create_room(&[&bot.user_id], false).await;
    alice
        .wait_for(&room, WAIT, "the bot to join", |e| {
            e["type"] == "m.room.member"
                && e["state_key"] == bot_id.as_str()
                && e["content"]["membership"] == "join"
        })
        .await;
    let hello = alice
        .send(
            &room,
            "m.room.message",
            json!({"msgtype": "m.text", "body": "hello"}),
        )
        .await;
    alice
        .wait_for(&room, WAIT, "the answer", |e| {
            e["sender"] == bot_id.as_str() && thread_root(e) == Some(hello.as_str())
        })
        .await;
    // A few more syncs go by (each would have logged its span).
    for i in 0..3 {
        let said = alice
            .send(
                &room,
                "m.room.message",
                json!({"msgtype": "m.text", "body": format!("again {i}")}),
            )
            .await;
        alice
            .wait_for(&room, WAIT, "the answer", |e| {
                e["sender"] == bot_id.as_str() && thread_root(e) == Some(said.as_str())
            })
            .await;
    }
    drop(serve);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("INFO"), "logged at INFO: {text}");
    for line in text.lines() {
        assert!(line.len() < 1_000, "a {}-byte log line: {line}", line.len());
        assert!(!line.contains('\u{1b}'), "colour codes in a file: {line:?}");
        assert!(
            !line.contains("ERROR"),
            "an error logged: {line}\n--- the log\n{text}"
        );
    }
}

/// Waits until the log file `log` has a line containing `what`.
async fn logged(log: &std::path::Path, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(WAIT);
    loop {
        if std::fs::read_to_string(log).is_ok_and(|t| t.contains(what)) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} never logged {what:?}: {}",
            log.display(),
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// One replica of `frogbot serve` for the Matrix account `table` describes, on the database
/// `db`, with its configuration under `dir`, logging to `dir/log`, and `store_path = store`
/// (replicas on one host may share it: each is a device of its own in a folder of its own).
async fn replica(
    dir: &std::path::Path,
    db: &str,
    table: &str,
    password: &str,
    store: &std::path::Path,
) -> ServeProcess {
    std::fs::create_dir_all(dir).unwrap();
    let port = free_port();
    let path = config_file(
        dir,
        port,
        db,
        &format!(
            // A turn cut off by the kill blocks its chat 3 s, not a minute; a reply it saved
            // but did not post is any worker's after 2 s, not 2 minutes.
            "turn_lease_seconds = 3\ndelivery_grace_seconds = 2\n\n\
             [channels.matrix]\n{table}\nstore_path = \"{}\"\npassword_env = \"{PASSWORD_VAR}\"",
            store.display()
        ),
    );
    let mut cmd = frogbot();
    cmd.arg("serve")
        .arg("--config")
        .arg(&path)
        .env(PASSWORD_VAR, password)
        .env("RUST_LOG", "info,sqlx=warn,matrix_sdk=warn")
        .stdout(std::fs::File::create(dir.join("log")).unwrap());
    start(cmd, port).await
}

/// Issue 41: two replicas of `frogbot serve` on one PostgreSQL database with the same Matrix
/// account and the same configured `store_path` (the second finds it in use and makes its own
/// device in `replica-2` inside it): one holds the account's sync (role
/// `matrix:USER_ID:sync`), the other stands by. The holder is killed (SIGKILL) — right after a
/// message it may or may not have taken — and more messages come while nobody syncs: the other
/// replica takes the sync over within the hold's retry, and every message the person sent is
/// answered exactly once, as the person's own client sees the room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_sync_one_at_a_time_and_take_over_without_loss() {
    let Some(hs) = support::synapse().await else {
        return;
    };
    let Some(db) = frogbot_testkit::postgres_db() else {
        return;
    };
    let bot = hs.register("replicabot").await;
    let ada_account = hs.register("ada").await;
    let table = format!(
        "homeserver = \"{}\"\nuser_id = \"{}\"\nusers = {{ \"{}\" = \"ada\" }}\nallow = [\"ada\"]",
        hs.url, bot.user_id, ada_account.user_id
    );
    let dir = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    let store = dir.path().join("matrix");
    let mut a = replica(&a_dir, &db.url, &table, &bot.password, &store).await;
    logged(&a_dir.join("log"), "this process receives for the channel").await;
    let _b = replica(&b_dir, &db.url, &table, &bot.password, &store).await;
    logged(
        &b_dir.join("log"),
        "another process receives for this channel; standing by",
    )
    .await;
    logged(
        &b_dir.join("log"),
        "is in use by another process on this host",
    )
    .await;
    assert!(
        store.join("replica-2").join("session.json").exists(),
        "the second replica's device is saved in its own folder"
    );

    let ada = hs.person(&ada_account).await;
    let bot_id = bot.user_id.to_string();
    let room = ada.create_room(&[&bot.user_id], false).await;
    ada.wait_for(&room, WAIT, "the bot to join", |e| {
        e["type"] == "m.room.member"
            && e["state_key"] == bot_id.as_str()
            && e["content"]["membership"] == "join"
    })
    .await;
    // The bot's answers in the thread of a message (each message of a DM is its own thread).
    let answers = |id: &str| {
        ada.seen(&room, |e| {
            e["sender"] == bot_id.as_str()
                && e["type"] == "m.room.message"
                && thread_root(e) == Some(id)
        })
    };
    let say = |text: &'static str| {
        ada.send(
            &room,
            "m.room.message",
            json!({"msgtype": "m.text", "body": text}),
        )
    };

    let mut sent = Vec::new();
    for text in ["one", "two"] {
        let id = say(text).await;
        ada.wait_for(&room, WAIT, "the answer from the syncing replica", |e| {
            e["sender"] == bot_id.as_str() && thread_root(e) == Some(id.as_str())
        })
        .await;
        sent.push(id);
    }
    // The syncing replica dies right after a message (it may have taken it, or not).
    sent.push(say("three").await);
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let killed = std::time::Instant::now();
    // More come while nobody syncs.
    for text in ["four", "five"] {
        sent.push(say(text).await);
    }
    logged(&b_dir.join("log"), "this process receives for the channel").await;
    // Its database session ended with it: the other replica's next try (every 2 s) takes the
    // role.
    assert!(
        killed.elapsed() < std::time::Duration::from_secs(10),
        "the sync moved after {:?}",
        killed.elapsed()
    );
    sent.push(say("six").await);
    for id in &sent {
        ada.wait_for(&room, WAIT, "an answer to every message", |e| {
            e["sender"] == bot_id.as_str()
                && e["type"] == "m.room.message"
                && thread_root(e) == Some(id.as_str())
        })
        .await;
    }
    // Nothing answered twice: the replica that took over read, through its own sync, what the
    // first had answered already. A last message, answered, shows the room is quiet.
    let last = say("seven").await;
    ada.wait_for(&room, WAIT, "the last answer", |e| {
        e["sender"] == bot_id.as_str() && thread_root(e) == Some(last.as_str())
    })
    .await;
    for id in &sent {
        let got = answers(id);
        assert_eq!(got.len(), 1, "answers to {id}: {got:#?}");
    }
}
