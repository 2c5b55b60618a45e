//! `frogbot serve` with `[channels.discord]` pointing at a fake Discord (HTTP API + gateway
//! websocket from `frogbot_discord::testing`): the real server connects to the gateway, a mention is
//! answered in a thread the bot opens, and with `public_key` the interactions endpoint is mounted
//! and refuses a forged signature.

mod common;

use std::time::Duration;

use frogbot_discord::testing::{self as fake, FakeDiscord};

const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;
const CHANNEL: u64 = 700_000_000_000_000_007;
const GUILD: u64 = 100_000_000_000_000_001;
const WAIT: Duration = Duration::from_secs(20);
const TOKEN_ENV: &str = "FROGBOT_TEST_DISCORD_TOKEN";
const AGENT: &str = "discord-agent-token";

#[test]
#[allow(unsafe_code)]
fn serve_answers_a_discord_mention_in_a_thread() {
    // SAFETY: this is the only test of this binary and no runtime is running yet, so no other
    // thread reads the environment while it changes.
    unsafe { std::env::set_var(TOKEN_ENV, "discord-test-token") };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run());
}

async fn run() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let db = frogbot_testkit::sqlite_db();
    // The Ed25519 public key of the secret key [5; 32] (any valid key: only forgeries are sent).
    let public_key = "6e7a1cdd29b0b78fd13af4c5598feff4ef2a97166e3ca6f2e4fbfccd80505bf1";
    let text = format!(
        r#"
listen = "127.0.0.1:0"
database = "{}"

[channels.discord]
token_env = "{TOKEN_ENV}"
application_id = "{APP}"
api_url = "{}"
public_key = "{public_key}"
users = {{ "300000000000000003" = "alice" }}
allow = ["alice"]

[[agents]]
id = "deployer"
token = "{AGENT}"
targets = ["discord:*"]
"#,
        db.url, fake.api_url
    );
    let config = frogbot::Config::parse(&text).expect("config parses");
    config.validate().expect("config is valid");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(frogbot::serve(
        config,
        listener,
        async move {
            let _ = stopped.await;
        },
        Duration::from_secs(5),
    ));

    assert!(
        fake.wait_ready(WAIT).await,
        "serve connected to the gateway"
    );
    assert_eq!(fake.identifies()[0]["token"], "Bot discord-test-token");
    let alice = fake::user(300_000_000_000_000_003, "alice", false);
    fake.dispatch(
        "MESSAGE_CREATE",
        fake::message(
            910_000_000_000_000_001,
            CHANNEL,
            Some(GUILD),
            &alice,
            &format!("<@{BOT}> hello there"),
            &[fake::user(BOT, "frogbot", true)],
        ),
    );
    let opened = fake
        .wait_for(0, WAIT, |c| c.path.ends_with("/threads"))
        .await
        .expect("a thread opened on the mention");
    let thread = opened.response["id"].as_str().unwrap().to_owned();
    let answer = fake
        .wait_for(0, WAIT, |c| {
            c.method == "POST" && c.path == format!("/api/v10/channels/{thread}/messages")
        })
        .await
        .expect("the answer in the thread");
    assert!(
        !answer.body["content"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{answer:?}"
    );

    // The interactions endpoint is mounted and refuses a forged signature.
    let client = reqwest::Client::new();
    let response = client
        .post(format!("http://{addr}/channels/discord/interactions"))
        .header("x-signature-ed25519", "00".repeat(64))
        .header("x-signature-timestamp", "1700000000")
        .body(r#"{"type":1}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);

    // Issue 42: an agent in an MCP client (the official TypeScript SDK's, over `/mcp`) asks in
    // the channel; the card is drawn with Discord's buttons in a new thread, alice's click
    // answers it, and the tool's result carries the typed value and who answered.
    let mut mcp = common::mcp::McpClient::http(&format!("http://{addr}/mcp"), Some(AGENT))
        .await
        .expect("connects");
    let channel = fake.add_text_channel(GUILD);
    let from = fake.calls().len();
    mcp.call(
        "ask",
        "ask_person",
        serde_json::json!({"to": format!("discord:{channel}"), "text": "Deploy v1.4?",
               "inputs": [{"header": "Go", "question": "Deploy?",
                           "options": [{"label": "Approve"}, {"label": "Hold"}]}]}),
    )
    .await;
    let posted = fake
        .wait_for(from, WAIT, |c| {
            c.method == "POST"
                && c.path.ends_with("/messages")
                && c.body["components"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty())
        })
        .await;
    let Some(posted) = posted else {
        let end = tokio::time::timeout(Duration::from_secs(1), mcp.end_of("ask")).await;
        panic!(
            "no card; the call: {end:?}; calls: {:#?}",
            &fake.calls()[from..]
        );
    };
    let card = fake
        .message(posted.response["id"].as_str().unwrap())
        .expect("the fake keeps the card");
    let approve = card["components"][0]["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["label"] == "Approve")
        .and_then(|b| b["custom_id"].as_str())
        .expect("an Approve button")
        .to_owned();
    fake.dispatch(
        "INTERACTION_CREATE",
        fake::component_on(
            500_000_000_000_000_042,
            APP,
            &card,
            Some(GUILD),
            &alice,
            &approve,
            None,
            "tok-mcp",
        ),
    );
    let result = mcp.result_of("ask").await;
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["state"], "answered", "{result}");
    assert_eq!(
        result["structuredContent"]["values"],
        serde_json::json!({"Go": "Approve"})
    );
    assert_eq!(result["structuredContent"]["by"]["user"], "alice");
    mcp.close().await;

    let _ = stop.send(());
    tokio::time::timeout(WAIT, server)
        .await
        .expect("serve stops")
        .unwrap()
        .unwrap();
}
