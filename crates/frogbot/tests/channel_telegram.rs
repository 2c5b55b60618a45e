//! `[channels.telegram]` in the real `frogbot serve` binary against the fake Bot API of
//! `frogbot_telegram::testing`: a private message is answered by long polling; in webhook mode the
//! route `/channels/telegram/webhook` is merged into serve's router and checks the secret token;
//! and configuration mistakes name their key.

mod common;

use std::process::{Command, Stdio};

use common::child::{ServeProcess, config_file, free_port, frogbot, start};

use frogbot_telegram::testing::{Call, FakeBotApi, private_chat, text_update, user};
use serde_json::{Value, json};

const TOKEN_VAR: &str = "FROGBOT_TEST_TELEGRAM_TOKEN";
const SECRET_VAR: &str = "FROGBOT_TEST_TELEGRAM_SECRET";
const SECRET: &str = "serve-secret_42";

struct Serve {
    _process: ServeProcess,
    base: String,
    _dir: tempfile::TempDir,
    _db: frogbot_testkit::TestDb,
}

fn client() -> reqwest::Client {
    frogbot_openai::install_crypto_provider();
    reqwest::Client::new()
}

/// The agent that asks people on Telegram in these tests.
const ASKER: &str = "telegram-asker-token";

/// Writes a configuration with `channel` as its `[channels.telegram]` table and runs
/// `frogbot serve --config` with the token (and secret) in the environment.
fn command(channel: &str) -> (Command, tempfile::TempDir, frogbot_testkit::TestDb, u16) {
    let db = frogbot_testkit::sqlite_db();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let path = config_file(
        dir.path(),
        port,
        &db.url,
        &format!(
            "[[agents]]\nid = \"asker\"\ntoken = \"{ASKER}\"\ntargets = [\"telegram:*\"]\n\n\
             [channels.telegram]\n{channel}"
        ),
    );
    let mut cmd = frogbot();
    cmd.arg("serve")
        .arg("--config")
        .arg(&path)
        .env(TOKEN_VAR, "123456:TEST-token")
        .env(SECRET_VAR, SECRET);
    (cmd, dir, db, port)
}

async fn serve(channel: &str) -> Serve {
    let (cmd, dir, db, port) = command(channel);
    let process = start(cmd, port).await;
    Serve {
        base: process.base.clone(),
        _process: process,
        _dir: dir,
        _db: db,
    }
}

fn reply_to(calls: &[Call], text: &str) -> Option<Value> {
    calls
        .iter()
        .find(|c| c.method == "sendmessage" && c.body["text"] == text)
        .map(|c| c.body.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_a_private_telegram_message_by_polling() {
    let fake = FakeBotApi::start().await;
    let _serve = serve(&format!(
        "token_env = \"{TOKEN_VAR}\"\napi_url = \"{}\"\n\n[channels.telegram.users]\n\"42\" = \"ada\"",
        fake.url
    ))
    .await;
    fake.push(text_update(
        7,
        private_chat(42, "Ada"),
        user(42, "Ada"),
        "hello frog",
    ));
    let sent = fake
        .wait_for("the reply", |c| reply_to(c, "You said: hello frog"))
        .await;
    assert_eq!(sent["chat_id"], json!(42));
    assert_eq!(sent["reply_parameters"]["message_id"], 7);
    assert!(!fake.calls("deletewebhook").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_mounts_the_webhook_route_and_checks_the_secret() {
    let fake = FakeBotApi::start().await;
    let serve = serve(&format!(
        "token_env = \"{TOKEN_VAR}\"\nmode = \"webhook\"\nwebhook_secret_env = \"{SECRET_VAR}\"\napi_url = \"{}\"",
        fake.url
    ))
    .await;
    let update = {
        let mut u = text_update(8, private_chat(42, "Ada"), user(42, "Ada"), "over the hook");
        u["update_id"] = json!(1);
        u
    };
    let url = format!("{}/channels/telegram/webhook", serve.base);
    let post = |secret: Option<&str>| {
        let mut req = client().post(&url).json(&update);
        if let Some(s) = secret {
            req = req.header("X-Telegram-Bot-Api-Secret-Token", s);
        }
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(post(None).await, 401);
    assert_eq!(post(Some("not-the-secret")).await, 401);
    assert_eq!(post(Some(SECRET)).await, 200);
    fake.wait_for("the reply", |c| reply_to(c, "You said: over the hook"))
        .await;
    assert!(
        fake.calls("getupdates").is_empty(),
        "no polling in webhook mode"
    );
}

#[test]
fn configuration_mistakes_name_their_key() {
    let check = |table: &str| {
        let text = format!("[channels.telegram]\n{table}\n");
        match frogbot::Config::parse(&text).and_then(|c| c.validate()) {
            Ok(()) => panic!("accepted: {table}"),
            Err(e) => e.to_string(),
        }
    };
    assert!(
        check("token_env = \"FROGBOT_TEST_SURELY_UNSET\"")
            .contains("`channels.telegram.token_env`")
    );
    // The unknown key itself is named.
    assert!(check("token = \"123:abc\"").contains("`channels.telegram.token`: unknown field"));

    // With the token set (in the child's environment): webhook mode needs its secret.
    let (mut cmd, _dir, _db, _) =
        command(&format!("token_env = \"{TOKEN_VAR}\"\nmode = \"webhook\""));
    let out = cmd.stderr(Stdio::piped()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`channels.telegram.webhook_secret_env`: required"),
        "{stderr}"
    );
    let (mut cmd, _dir, _db, _) = command(&format!(
        "token_env = \"{TOKEN_VAR}\"\nmode = \"sometimes\""
    ));
    let out = cmd.stderr(Stdio::piped()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`channels.telegram.mode`"));
}

/// Issue 14, defect 1: a web caller who computes a Telegram private chat's chat id (the thread is
/// the user's id) cannot take the conversation over. Creating the id over HTTP is refused, and
/// a chat a caller made under the id scheme of older versions is never delivered into: the
/// person's message and the bot's reply stay out of the caller's reach and the person is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_caller_cannot_take_over_a_telegram_conversation() {
    use frogbot_core::agent::channel_chat_id;
    let fake = FakeBotApi::start().await;
    let db = frogbot_testkit::sqlite_db();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let path = config_file(
        dir.path(),
        port,
        &db.url,
        &format!(
            "anonymous = \"chat\"\n\n[[users]]\nid = \"mallory\"\ntoken = \"mallory-token\"\n\n\
             [channels.telegram]\ntoken_env = \"{TOKEN_VAR}\"\napi_url = \"{}\"",
            fake.url
        ),
    );
    let mut cmd = frogbot();
    cmd.arg("serve")
        .arg("--config")
        .arg(&path)
        .env(TOKEN_VAR, "123456:TEST-token");
    let serve = start(cmd, port).await;
    let http = client();
    let post = |chat: String, token: Option<&'static str>| {
        let mut req = http
            .post(format!("{}/api/chats/{chat}/messages", serve.base))
            .json(&json!({"parts": [{"type": "text", "text": "waiting for the victim"}]}));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move {
            let r = req.send().await.unwrap();
            (
                r.status().as_u16(),
                r.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let read = |chat: String, token: Option<&'static str>| {
        let mut req = http.get(format!("{}/api/chats/{chat}", serve.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move { req.send().await.unwrap().text().await.unwrap() }
    };

    // Two victims: 42 against a signed-in attacker, 43 against an anonymous one.
    for (victim, token) in [(42_i64, Some("mallory-token")), (43, None)] {
        let id = channel_chat_id("telegram", &victim.to_string());
        // The thread's own chat id cannot be created from the web.
        let (status, body) = post(id.to_string(), token).await;
        assert_eq!(status, 409, "{body}");
        assert_eq!(body["error"]["code"], "channel-chat", "{body}");
        // The same hash without the channel prefix (the id older versions used) is a web chat like
        // any other: the caller may create it, and nothing of the thread ever lands in it.
        let legacy = id.as_str().trim_start_matches('_').to_string();
        let (status, body) = post(legacy.clone(), token).await;
        assert_eq!(status, 200, "{body}");

        let secret = format!("my pin is 47{victim}");
        fake.push(text_update(
            100 + victim,
            private_chat(victim, "Victim"),
            user(victim, "Victim"),
            &secret,
        ));
        let reply = format!("You said: {secret}");
        let sent = fake
            .wait_for("the victim's reply", |c| reply_to(c, &reply))
            .await;
        assert_eq!(sent["chat_id"], json!(victim), "the victim is answered");

        for chat in [id.to_string(), legacy] {
            let seen = read(chat.clone(), token).await;
            assert!(
                !seen.contains(&secret),
                "the caller read the victim's message in {chat}: {seen}"
            );
        }
    }
}

/// `POST /api/asks` to a Telegram user (`{"channel": "telegram", "user": "42"}`): the ask's text
/// starts a conversation of its own in their private chat (issue 37: the thread `42~{root}`, not
/// the chat they talk with the model in), the question comes there as an inline keyboard replying
/// to that first message, a tap answers it, and the asker reads the answer back from the real
/// `frogbot serve`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_to_a_telegram_user_is_answered_by_a_tap() {
    let fake = FakeBotApi::start().await;
    let serve = serve(&format!(
        "token_env = \"{TOKEN_VAR}\"\napi_url = \"{}\"\n\n[channels.telegram.users]\n\"42\" = \"ada\"",
        fake.url
    ))
    .await;
    let http = client();
    let r = http
        .post(format!("{}/api/asks", serve.base))
        .bearer_auth(ASKER)
        .json(
            &json!({"to": {"channel": "telegram", "user": "42"}, "text": "Restart the queue?",
                      "inputs": [{"kind": "confirm", "label": "Restart"}], "from": ["ada"]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let created: Value = r.json().await.unwrap();
    assert_eq!(created["state"], "open", "{created}");
    let card = fake
        .wait_for("the question", |c| {
            c.iter()
                .find(|c| {
                    c.method == "sendmessage"
                        && !c.body["reply_markup"].is_null()
                        && c.body["text"]
                            .as_str()
                            .is_some_and(|t| t.contains("Restart the queue?"))
                })
                .map(|c| c.body.clone())
        })
        .await;
    assert_eq!(card["chat_id"], json!(42));
    // The ask's first message, which the card replies to.
    let root = card["reply_parameters"]["message_id"]
        .as_i64()
        .expect("the card replies to the ask's first message");
    assert!(
        fake.message(root).unwrap()["text"]
            .as_str()
            .unwrap()
            .contains("Restart the queue?")
    );
    let thread = format!("42~{root}");
    let chat = frogbot_core::agent::channel_chat_id("telegram", &thread);
    assert_eq!(created["chatId"], chat.as_str(), "{created}");
    let button = card["reply_markup"]["inline_keyboard"][0][0].clone();
    assert!(
        button["text"].as_str().unwrap().contains("Restart"),
        "{button}"
    );
    // The card's message id, as the fake assigned it.
    let message_id = (1..fake.next_message_id())
        .rev()
        .find(|id| {
            fake.message(*id).is_some_and(|m| {
                m["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("Restart the queue?"))
            })
        })
        .expect("the card");
    let data = button["callback_data"].as_str().unwrap();
    fake.push(fake.click(&user(42, "Ada"), message_id, data));
    let id = created["id"].as_str().unwrap();
    let done: Value = http
        .get(format!("{}/api/asks/{id}/wait?timeout=20", serve.base))
        .bearer_auth(ASKER)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(done["state"], "answered", "{done}");
    assert_eq!(done["values"], json!({"Answer": true}));
    assert_eq!(done["by"]["user"], "ada");
    // A user id that is no number is refused by the channel, and nothing is sent.
    let before = fake.calls("sendmessage").len();
    let r = http
        .post(format!("{}/api/asks", serve.base))
        .bearer_auth(ASKER)
        .json(
            &json!({"to": {"channel": "telegram", "user": "ada"}, "text": "x",
                      "inputs": [{"kind": "confirm"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 502);
    assert_eq!(fake.calls("sendmessage").len(), before);
}

/// Issue 42: an agent in an MCP client (the official TypeScript SDK's, through `frogbot mcp` over
/// stdio) asks a Telegram user; the card is drawn with Telegram's buttons, the person's tap
/// answers it, and the tool's result carries the typed value and who answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_ask_to_a_telegram_user_returns_the_tap() {
    let fake = FakeBotApi::start().await;
    let serve = serve(&format!(
        "token_env = \"{TOKEN_VAR}\"\napi_url = \"{}\"\n\n[channels.telegram.users]\n\"42\" = \"ada\"",
        fake.url
    ))
    .await;
    let mut mcp = common::mcp::McpClient::stdio(&serve.base, ASKER)
        .await
        .expect("frogbot mcp starts");
    mcp.call(
        "ask",
        "ask_person",
        json!({"to": "telegram:@42", "text": "Restart the queue?",
               "inputs": [{"header": "Restart", "question": "Restart the queue?",
                           "options": [{"label": "Now"}, {"label": "Tonight"}]}]}),
    )
    .await;
    let card = fake
        .wait_for("the question", |c| {
            c.iter()
                .find(|c| {
                    c.method == "sendmessage"
                        && !c.body["reply_markup"].is_null()
                        && c.body["text"]
                            .as_str()
                            .is_some_and(|t| t.contains("Restart the queue?"))
                })
                .map(|c| c.body.clone())
        })
        .await;
    let buttons = &card["reply_markup"]["inline_keyboard"];
    let tonight = buttons
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap().iter())
        .find(|b| b["text"].as_str().is_some_and(|t| t.contains("Tonight")))
        .expect("a Tonight button")
        .clone();
    let message_id = (1..fake.next_message_id())
        .rev()
        .find(|id| {
            fake.message(*id)
                .is_some_and(|m| !m["reply_markup"].is_null())
        })
        .expect("the card");
    fake.push(fake.click(
        &user(42, "Ada"),
        message_id,
        tonight["callback_data"].as_str().unwrap(),
    ));
    let result = mcp.result_of("ask").await;
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["state"], "answered", "{result}");
    assert_eq!(
        result["structuredContent"]["values"],
        json!({"Restart": "Tonight"})
    );
    assert_eq!(result["structuredContent"]["by"]["user"], "ada");
    mcp.close().await;
}

/// A `frogbot serve` of the polling bot on `db`, its log (INFO) written to `log`.
async fn replica(
    fake: &FakeBotApi,
    db: &str,
    dir: &std::path::Path,
    log: &std::path::Path,
) -> ServeProcess {
    let port = free_port();
    let config_dir = dir.join(format!("r{port}"));
    std::fs::create_dir_all(&config_dir).unwrap();
    let path = config_file(
        &config_dir,
        port,
        db,
        &format!(
            "[channels.telegram]\ntoken_env = \"{TOKEN_VAR}\"\napi_url = \"{}\"",
            fake.url
        ),
    );
    let mut cmd = frogbot();
    cmd.arg("serve")
        .arg("--config")
        .arg(&path)
        .env(TOKEN_VAR, "123456:TEST-token")
        .env("RUST_LOG", "info,sqlx=warn")
        .stdout(std::fs::File::create(log).unwrap());
    start(cmd, port).await
}

/// Waits until the log file `log` has a line containing `what`.
async fn logged(log: &std::path::Path, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
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

/// Two replicas of a polling bot on one database: one polls (Telegram answers one poller), the
/// other stands by; killed, the poller's role moves to the other within seconds, and every update
/// is answered exactly once.
async fn two_replicas_poll_one_at_a_time_and_take_over(db: frogbot_testkit::TestDb) {
    let fake = FakeBotApi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (a_log, b_log) = (dir.path().join("a.log"), dir.path().join("b.log"));
    let mut a = replica(&fake, &db.url, dir.path(), &a_log).await;
    logged(&a_log, "this process receives for the channel").await;
    let _b = replica(&fake, &db.url, dir.path(), &b_log).await;
    logged(
        &b_log,
        "another process receives for this channel; standing by",
    )
    .await;

    fake.push(text_update(
        1,
        private_chat(42, "Ada"),
        user(42, "Ada"),
        "one",
    ));
    fake.wait_for("the first reply", |c| reply_to(c, "You said: one"))
        .await;

    // One poller all along: Telegram ends a poll with 409 Conflict when another bot instance
    // polls (the fake too), and none was ended.
    assert_eq!(fake.conflicts(), 0, "two replicas polled at once");
    // Done (👌) comes after the reply's delivery job is removed: nothing of A's is owed.
    fake.wait_for("Done on the first message", |c| {
        c.iter()
            .any(|c| c.method == "setmessagereaction" && c.body["reaction"][0]["emoji"] == "👌")
            .then_some(())
    })
    .await;
    // The poller dies (SIGKILL): its database session ends, the other replica takes over.
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    logged(&b_log, "this process receives for the channel").await;
    fake.push(text_update(
        2,
        private_chat(42, "Ada"),
        user(42, "Ada"),
        "two",
    ));
    fake.wait_for("the second reply, from the other replica", |c| {
        reply_to(c, "You said: two")
    })
    .await;
    let replies = |text: &str| {
        fake.calls("sendmessage")
            .iter()
            .filter(|c| c["text"] == text)
            .count()
    };
    assert_eq!(replies("You said: one"), 1);
    assert_eq!(replies("You said: two"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_postgres_poll_one_at_a_time_and_take_over() {
    let Some(db) = frogbot_testkit::postgres_db() else {
        return;
    };
    two_replicas_poll_one_at_a_time_and_take_over(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_sqlite_file_poll_one_at_a_time_and_take_over() {
    two_replicas_poll_one_at_a_time_and_take_over(frogbot_testkit::sqlite_db()).await;
}
