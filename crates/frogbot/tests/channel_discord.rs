//! `frogbot serve` with `[channels.discord]` pointing at a fake Discord (HTTP API + gateway
//! websocket from `frogbot_discord::testing`): the real server connects to the gateway, a mention is
//! answered in a thread the bot opens, and with `public_key` the interactions endpoint is mounted
//! and refuses a forged signature.

use std::time::Duration;

use frogbot_discord::testing::{self as fake, FakeDiscord};

const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;
const CHANNEL: u64 = 700_000_000_000_000_007;
const GUILD: u64 = 100_000_000_000_000_001;
const WAIT: Duration = Duration::from_secs(20);
const TOKEN_ENV: &str = "FROGBOT_TEST_DISCORD_TOKEN";

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

    let _ = stop.send(());
    tokio::time::timeout(WAIT, server)
        .await
        .expect("serve stops")
        .unwrap()
        .unwrap();
}
