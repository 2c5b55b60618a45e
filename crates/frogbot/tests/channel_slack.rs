//! `[channels.slack]` in a real `frogbot serve` (in-process, SQLite, the demo model) against the
//! fake Slack (`frogbot_slack::testing`): signed payloads in Slack's documented shapes are posted
//! to the real endpoints, and slack-morphism's client talks to the fake's Web API, which records
//! every call.

mod common;

use std::time::Duration;

use frogbot_core::agent::channel_chat_id;
use frogbot_core::model::now_millis;
use frogbot_core::store::DynStore;
use frogbot_slack::questions::{DENIED_TEXT, STALE_TEXT};
use frogbot_slack::testing::{BOT_TOKEN, FakeSlack, SIGNING_SECRET, Signature as Sig};
use serde_json::{Value, json};

const CHANNEL: &str = "C42";

struct Env {
    fake: FakeSlack,
    base: String,
    http: reqwest::Client,
    store: DynStore,
    _db: frogbot_testkit::TestDb,
    _server: tokio::task::JoinHandle<()>,
}

/// The variables `[channels.slack]` names, set once for the whole test binary.
#[allow(unsafe_code)]
fn set_secrets() -> (&'static str, &'static str) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    const TOKEN_VAR: &str = "FROGBOT_TEST_SLACK_BOT_TOKEN";
    const SECRET_VAR: &str = "FROGBOT_TEST_SLACK_SIGNING_SECRET";
    ONCE.call_once(|| {
        // SAFETY: set once, before any server of this binary reads them; every reader in this
        // process goes through `std::env`, which serialises access to the environment.
        unsafe {
            std::env::set_var(TOKEN_VAR, BOT_TOKEN);
            std::env::set_var(SECRET_VAR, SIGNING_SECRET);
        }
    });
    (TOKEN_VAR, SECRET_VAR)
}

/// Starts the fake Web API and `frogbot serve` with `[channels.slack]` pointing at it.
async fn start(extra: &str) -> Env {
    start_on(frogbot_testkit::sqlite_db(), extra).await
}

/// [`start`] on a given database.
async fn start_on(db: frogbot_testkit::TestDb, extra: &str) -> Env {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_max_level(tracing::Level::INFO)
        .try_init();
    let fake = FakeSlack::start().await;
    let api_url = fake.api_url();

    let (tok, sec) = set_secrets();
    let config = common::config_with(
        &db.url,
        &format!(
            r#"
[channels.slack]
mode = "http"
bot_token_env = "{tok}"
signing_secret_env = "{sec}"
api_url = "{api_url}"
{extra}
"#
        ),
    );
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
    // Answered once serving (after `auth.test` and the migrations).
    let page = http
        .get(format!("{base}/"))
        .send()
        .await
        .expect("server up");
    assert!(page.status().is_success());
    let store = frogbot_testkit::open_store(&db.url).await;
    let env = Env {
        fake,
        base,
        http,
        store,
        _db: db,
        _server: server,
    };
    assert_eq!(env.fake.calls("auth.test").len(), 1);
    env
}

impl Drop for Env {
    fn drop(&mut self) {
        self._server.abort();
    }
}

async fn wait(mut cond: impl FnMut() -> bool, what: &str) {
    let deadline = tokio::time::Instant::now() + common::WAIT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Env {
    /// A fresh Slack `ts` (the fake's clock: later than every `ts` before).
    fn ts(&self) -> String {
        self.fake.next_ts()
    }

    async fn post_raw(
        &self,
        path: &str,
        content_type: &str,
        body: String,
        sig: Sig,
        retry: Option<u32>,
    ) -> reqwest::Response {
        self.fake
            .post_signed(
                &format!("{}{path}", self.base),
                content_type,
                body,
                sig,
                retry,
            )
            .await
    }

    async fn event(&self, event: Value) -> u16 {
        self.event_with(event, &format!("Ev{}", self.ts()), None)
            .await
    }

    async fn event_with(&self, event: Value, event_id: &str, retry: Option<u32>) -> u16 {
        let body = self.fake.event_callback_with_id(event, event_id);
        self.fake
            .post_event(&self.base, &body, Sig::Good, retry)
            .await
            .status()
            .as_u16()
    }

    /// `app_mention` of the bot by `user`; returns the message ts (the thread root).
    async fn mention(&self, user: &str, text: &str) -> String {
        let said = self
            .fake
            .user_message(CHANNEL, None, user, &format!("<@UBOT> {text}"));
        let status = self.event(self.fake.mention_event(&said)).await;
        assert_eq!(status, 200);
        said.ts
    }

    /// A reply in the thread `root`.
    async fn reply(&self, user: &str, root: &str, text: &str) -> u16 {
        let said = self.fake.user_message(CHANNEL, Some(root), user, text);
        self.event(self.fake.message_event(&said, "channel")).await
    }

    async fn interactivity(&self, payload: &Value, sig: Sig, retry: Option<u32>) -> u16 {
        self.fake
            .post_interaction(&self.base, payload, sig, retry)
            .await
            .status()
            .as_u16()
    }

    /// The `k`-th (0-based) message the bot posted in thread `root`, once it is final.
    async fn posted(&self, root: &str, k: usize) -> Value {
        // The bot's messages in the thread as Slack shows them (a reply streams natively, so it
        // is read once its stream is stopped).
        let thread = format!("{CHANNEL}:{root}");
        let in_thread = || -> Vec<frogbot_slack::testing::Message> {
            self.fake
                .thread_messages(&thread)
                .into_iter()
                .filter(|m| m.bot)
                .collect()
        };
        wait(
            || in_thread().get(k).is_some_and(|m| !m.streaming),
            "a message posted in the thread",
        )
        .await;
        let m = in_thread()[k].clone();
        json!({"channel": m.channel, "text": m.text, "blocks": m.blocks, "ts": m.ts, "thread_ts": m.thread_ts})
    }

    /// Waits until the chat of `root` has `n` messages in the store.
    async fn chat_messages(&self, root: &str) -> usize {
        let chat = channel_chat_id("slack", &format!("{CHANNEL}:{root}"));
        self.store.list_messages(&chat).await.unwrap().len()
    }

    /// The Slack `ts` of the question's current message in thread `root`, once FrogBot has
    /// recorded it (the message shows on Slack a moment before its record is saved; a person
    /// clicks only after seeing it, the test is quicker).
    async fn question_ts(&self, root: &str) -> String {
        let chat = channel_chat_id("slack", &format!("{CHANNEL}:{root}"));
        let recorded = || async {
            match self.store.get_chat(&chat).await.unwrap() {
                Some(row) if row.awaiting_message_id.is_some() => self
                    .question(root)
                    .await
                    .record
                    .current()
                    .map(|m| m.id.clone()),
                _ => None,
            }
        };
        frogbot_testkit::eventually("a posted question recorded", common::WAIT, async || {
            recorded().await.is_some()
        })
        .await;
        let id = recorded().await.expect("recorded");
        id.split_once(':').expect("channel:ts").1.to_string()
    }

    /// The channel thread of `chat` (an ask's chat, for one).
    async fn thread_of(&self, chat: &frogbot_core::model::ChatId) -> String {
        let row = self.store.get_chat(chat).await.unwrap().expect("the chat");
        row.channel.expect("a channel chat").thread
    }

    async fn question(&self, root: &str) -> frogbot_core::store::QuestionRow {
        let chat = channel_chat_id("slack", &format!("{CHANNEL}:{root}"));
        let row = self.store.get_chat(&chat).await.unwrap().expect("chat");
        let msg = row.awaiting_message_id.clone();
        let msgs = self.store.list_messages(&chat).await.unwrap();
        let id = msg.unwrap_or_else(|| msgs.last().unwrap().message.id.clone());
        let qs = self
            .store
            .questions_of_message(&chat, &id, now_millis())
            .await
            .unwrap();
        qs.into_iter().next().expect("a question record")
    }
}

/// The element of a Block Kit message whose text is `label`.
fn element(blocks: &Value, label: &str) -> Value {
    blocks
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["elements"].as_array().cloned().unwrap_or_default())
        .find(|e| e["text"]["text"] == label)
        .unwrap_or_else(|| panic!("no element {label:?} in {blocks}"))
}

/// A `block_actions` payload for a click on `button` (an element of the posted blocks) of the
/// message `message_ts` in thread `root`, as Slack sends it.
fn click(
    env: &Env,
    user: &str,
    message_ts: &str,
    root: &str,
    button: &Value,
    trigger: &str,
) -> Value {
    let mut payload = env.fake.block_actions(
        user,
        &format!("{CHANNEL}:{message_ts}"),
        button.clone(),
        json!({}),
        trigger,
    );
    payload["container"]["thread_ts"] = json!(root);
    payload
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_is_answered_in_its_thread_and_own_messages_are_ignored() {
    let env = start("").await;
    // url_verification (the handshake when the events URL is saved).
    let res = env
        .post_raw(
            "/channels/slack/events",
            "application/json",
            json!({"token": "t", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"}).to_string(),
            Sig::Good,
            None,
        )
        .await;
    assert_eq!(res.status(), 200);
    let v: Value = res.json().await.unwrap();
    assert_eq!(
        v["challenge"],
        "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    );

    let root = env.mention("U1", "hello frog").await;
    let reply = env.posted(&root, 0).await;
    assert_eq!(reply["channel"], CHANNEL);
    assert_eq!(reply["text"], "You said: hello frog");
    // Streamed natively, with the bot token.
    assert!(
        env.fake.calls("chat.startStream")[0]
            .auth
            .contains("xoxb-test-token")
    );

    // The same message also arrives as `message.channels`: handled once.
    let status = env
        .event(json!({
            "type": "message", "channel": CHANNEL, "user": "U1", "text": "<@UBOT> hello frog",
            "ts": root, "event_ts": root, "channel_type": "channel"
        }))
        .await;
    assert_eq!(status, 200);
    // The bot's own reply echoed back by Slack is ignored; a person's reply continues the chat.
    let own = env.ts();
    assert_eq!(
        env.event(json!({
            "type": "message", "subtype": "bot_message", "channel": CHANNEL, "bot_id": "B1",
            "text": "You said: hello frog", "ts": own, "thread_ts": root, "event_ts": own,
            "channel_type": "channel"
        }))
        .await,
        200
    );
    assert_eq!(
        env.event(json!({
            "type": "message", "channel": CHANNEL, "user": "UBOT", "text": "me again",
            "ts": env.ts(), "thread_ts": root, "channel_type": "channel"
        }))
        .await,
        200
    );
    assert_eq!(env.reply("U1", &root, "and more").await, 200);
    let second = env.posted(&root, 1).await;
    assert_eq!(second["text"], "You said: and more");
    // Two user messages and two replies: the duplicate and the bot's own never reached the chat.
    assert_eq!(env.chat_messages(&root).await, 4);

    // A message in another thread the bot is not part of is ignored.
    let other = env.ts();
    assert_eq!(env.reply("U1", &other, "chatter").await, 200);
    let chat = channel_chat_id("slack", &format!("{CHANNEL}:{other}"));
    assert!(env.store.get_chat(&chat).await.unwrap().is_none());

    // A DM starts a chat without a mention.
    let dm = env.ts();
    assert_eq!(
        env.event(json!({
            "type": "message", "channel": "D9", "user": "U1", "text": "hi in private",
            "ts": dm, "event_ts": dm, "channel_type": "im"
        }))
        .await,
        200
    );
    wait(
        || {
            env.fake
                .thread_messages(&format!("D9:{dm}"))
                .iter()
                .any(|m| m.bot && !m.streaming && m.text == "You said: hi in private")
        },
        "a DM reply",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_clicked_settled_and_the_agent_continues() {
    let env = start("").await;
    let root = env.mention("U1", "ask me").await;
    let question = env.posted(&root, 0).await;
    let blocks = question["blocks"].clone();
    assert!(blocks.is_array(), "Block Kit posted: {question}");
    // Once FrogBot has recorded the posted question.
    let msg_ts = env.question_ts(&root).await;
    let q = env.question(&root).await;
    let msg_id = q.record.current().unwrap().id.clone();
    assert_eq!(msg_id.split_once(':').unwrap().1, msg_ts);

    let green = element(&blocks, "Green");
    assert_eq!(
        env.interactivity(
            &click(&env, "U7", &msg_ts, &root, &green, "111.222.aaa"),
            Sig::Good,
            None
        )
        .await,
        200
    );
    // Recorded before the ack (the delivery is processed within the ack deadline).
    let q = env.question(&root).await;
    assert!(q.outcome.is_some(), "answer recorded");
    assert_eq!(
        q.actor.as_ref().unwrap().user.as_ref().unwrap().as_str(),
        "slack:U7"
    );
    let reply = env.posted(&root, 1).await;
    assert_eq!(reply["text"], "You chose Colour: Green.");
    let updates = env.fake.calls("chat.update");
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].body["ts"], msg_ts.as_str());
    assert!(
        updates[0].body["text"]
            .as_str()
            .unwrap()
            .contains("Answered by <@U7>"),
        "{}",
        updates[0].body
    );

    // A second click after the answer: a private note to that person, nothing recorded.
    let red = element(&blocks, "Red");
    assert_eq!(
        env.interactivity(
            &click(&env, "U8", &msg_ts, &root, &red, "111.222.bbb"),
            Sig::Good,
            None
        )
        .await,
        200
    );
    wait(
        || {
            env.fake
                .calls("chat.postEphemeral")
                .iter()
                .any(|c| c.body["user"] == "U8" && c.body["text"] == STALE_TEXT)
        },
        "the stale note",
    )
    .await;
    let q = env.question(&root).await;
    assert_eq!(
        q.actor.as_ref().unwrap().user.as_ref().unwrap().as_str(),
        "slack:U7"
    );

    // Ask again in the thread; a click on the old message is stale and the new question stays open.
    assert_eq!(env.reply("U1", &root, "ask again").await, 200);
    let second = env.posted(&root, 2).await;
    assert!(second["blocks"].is_array());
    // Once FrogBot has recorded the second question (it shows on the fake a moment before).
    frogbot_testkit::eventually("the second question recorded", common::WAIT, async || {
        env.question_ts(&root).await != msg_ts
    })
    .await;
    assert_eq!(
        env.interactivity(
            &click(&env, "U9", &msg_ts, &root, &red, "111.222.ccc"),
            Sig::Good,
            None
        )
        .await,
        200
    );
    wait(
        || {
            env.fake
                .calls("chat.postEphemeral")
                .iter()
                .any(|c| c.body["user"] == "U9" && c.body["text"] == STALE_TEXT)
        },
        "the stale note on the old message",
    )
    .await;
    let q2 = env.question(&root).await;
    assert_ne!(q2.record.current().unwrap().id, msg_id);
    assert!(q2.outcome.is_none());
    assert_eq!(env.fake.calls("chat.update").len(), 1);
}

/// The store fails under a running channel (its PostgreSQL database is dropped): a thread reply,
/// a new mention and a click are each answered with a non-200 (500), so Slack retries the events
/// (and shows the clicker that it failed) instead of taking an acknowledgement for a delivery that
/// was not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
async fn a_store_failure_is_not_acknowledged_so_slack_retries() {
    let Some(db) = frogbot_testkit::postgres_db() else {
        return;
    };
    let url = db.url.clone();
    let env = start_on(db, "").await;
    let root = env.mention("U1", "ask me").await;
    let question = env.posted(&root, 0).await;
    let msg_ts = env.question_ts(&root).await;
    let green = element(&question["blocks"], "Green");

    frogbot_testkit::drop_postgres_db(&url).await;
    // Connections the server cut fail first, then every operation finds the database gone; each
    // delivery is refused either way.
    for k in 0..3 {
        assert_eq!(
            env.reply("U1", &root, "still there?").await,
            500,
            "reply {k}"
        );
        let ts = env.ts();
        let status = env
            .event(json!({
                "type": "app_mention", "user": "U2", "text": "<@UBOT> hello",
                "ts": ts, "channel": CHANNEL, "event_ts": ts
            }))
            .await;
        assert_eq!(status, 500, "mention {k}");
        let click = click(&env, "U7", &msg_ts, &root, &green, &format!("111.222.{k}"));
        assert_eq!(
            env.interactivity(&click, Sig::Good, None).await,
            500,
            "click {k}"
        );
    }
    // Nothing was acknowledged, so nothing was answered either.
    assert_eq!(env.fake.calls("chat.update").len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_button_opens_a_modal_whose_submission_answers() {
    let env = start("").await;
    let root = env.mention("U1", "ask me").await;
    let question = env.posted(&root, 0).await;
    let msg_ts = env.question_ts(&root).await;
    let other = element(&question["blocks"], "Other…");
    assert_eq!(
        env.interactivity(
            &click(&env, "U1", &msg_ts, &root, &other, "333.444.modal"),
            Sig::Good,
            None
        )
        .await,
        200
    );
    let opened = env.fake.calls("views.open");
    assert_eq!(opened.len(), 1, "views.open before the ack");
    assert_eq!(opened[0].body["trigger_id"], "333.444.modal");
    let mut view = opened[0].body["view"].clone();
    let metadata = view["private_metadata"].as_str().unwrap().to_string();
    let locator = frogbot_core::model::decode_question_modal_metadata(&metadata).unwrap();
    assert_eq!(locator.thread_id, format!("{CHANNEL}:{root}"));
    assert!(env.question(&root).await.outcome.is_none());

    // The person types their own answer and submits: Slack's view_submission.
    view["id"] = json!("V1");
    view["team_id"] = json!("T1");
    view["hash"] = json!("1700000600.abc");
    view["state"] = json!({"values": {
        "q0": {"fb1:m:0:pick": {"type": "radio_buttons", "selected_option": null}},
        "q0t": {"fb1:m:0:text": {"type": "plain_text_input", "value": "Purple"}}
    }});
    let submission = json!({
        "type": "view_submission",
        "team": {"id": "T1", "domain": "frogs"},
        "user": {"id": "U1", "username": "alice", "name": "alice", "team_id": "T1"},
        "api_app_id": "A1", "token": "legacy", "trigger_id": "555.666.sub",
        "view": view
    });
    assert_eq!(env.interactivity(&submission, Sig::Good, None).await, 200);
    let reply = env.posted(&root, 1).await;
    assert_eq!(reply["text"], "You chose Colour: Purple.");
    assert_eq!(env.fake.calls("chat.update").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_reply_answers_the_question() {
    let env = start("").await;
    let root = env.mention("U1", "please ask").await;
    env.posted(&root, 0).await;
    // A person answers once the question shows; FrogBot records it a moment after posting it.
    env.question_ts(&root).await;
    assert_eq!(env.reply("U2", &root, "blue").await, 200);
    let reply = env.posted(&root, 1).await;
    assert_eq!(reply["text"], "You chose Colour: Blue.");
    let q = env.question(&root).await;
    assert_eq!(
        q.actor.as_ref().unwrap().user.as_ref().unwrap().as_str(),
        "slack:U2"
    );
    // The reply was consumed: it never became a message of the chat.
    let chat = channel_chat_id("slack", &format!("{CHANNEL}:{root}"));
    let msgs = env.store.list_messages(&chat).await.unwrap();
    assert!(msgs.iter().all(|m| !m.message.text().contains("blue")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_outside_the_allow_list_is_denied() {
    let env = start("users = { U1 = \"alice\" }\nallow = [\"alice\"]").await;
    let root = env.mention("U2", "hello").await;
    wait(
        || !env.fake.calls("chat.postEphemeral").is_empty(),
        "the not-allowed note",
    )
    .await;
    let note = &env.fake.calls("chat.postEphemeral")[0].body;
    assert_eq!(note["user"], "U2");
    assert_eq!(note["text"], frogbot_slack::channel::NOT_ALLOWED_TEXT);
    let chat = channel_chat_id("slack", &format!("{CHANNEL}:{root}"));
    assert!(env.store.list_messages(&chat).await.unwrap().is_empty());

    // Alice asks; Bob's click is denied and nothing is recorded.
    let root = env.mention("U1", "ask").await;
    let question = env.posted(&root, 0).await;
    let msg_ts = env.question_ts(&root).await;
    let red = element(&question["blocks"], "Red");
    assert_eq!(
        env.interactivity(
            &click(&env, "U2", &msg_ts, &root, &red, "777.1.x"),
            Sig::Good,
            None
        )
        .await,
        200
    );
    wait(
        || {
            env.fake
                .calls("chat.postEphemeral")
                .iter()
                .any(|c| c.body["text"] == DENIED_TEXT && c.body["user"] == "U2")
        },
        "the denied note",
    )
    .await;
    assert!(env.question(&root).await.outcome.is_none());
    assert!(env.fake.calls("chat.update").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_or_ignored_and_nothing_is_recorded() {
    let env = start("").await;
    let root = env.mention("U1", "ask").await;
    let question = env.posted(&root, 0).await;
    let msg_ts = env.question_ts(&root).await;
    let green = element(&question["blocks"], "Green");
    let good_click = click(&env, "U1", &msg_ts, &root, &green, "900.1.a");
    let calls_before = env.fake.count();
    let messages_before = env.chat_messages(&root).await;

    // Wrong signature and a stale timestamp: 401, nothing read.
    assert_eq!(env.interactivity(&good_click, Sig::Wrong, None).await, 401);
    assert_eq!(env.interactivity(&good_click, Sig::Stale, None).await, 401);
    let mention = json!({"type": "app_mention", "user": "U1", "text": "<@UBOT> hi", "ts": env.ts(), "channel": CHANNEL});
    let body = json!({"type": "event_callback", "event_id": "EvX", "team_id": "T1", "api_app_id": "A1", "event": mention}).to_string();
    assert_eq!(
        env.post_raw(
            "/channels/slack/events",
            "application/json",
            body.clone(),
            Sig::Wrong,
            None
        )
        .await
        .status(),
        401
    );
    let unsigned = env
        .http
        .post(format!("{}/channels/slack/events", env.base))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), 401);

    // Malformed JSON: 400.
    assert_eq!(
        env.post_raw(
            "/channels/slack/events",
            "application/json",
            "{\"type\": \"event_cal".into(),
            Sig::Good,
            None
        )
        .await
        .status(),
        400
    );
    assert_eq!(
        env.post_raw(
            "/channels/slack/interactivity",
            "application/x-www-form-urlencoded",
            "payload=%7B%22type%22%3A".into(),
            Sig::Good,
            None
        )
        .await
        .status(),
        400
    );

    // Unknown action ids (someone else's control; ours on a message FrogBot never posted).
    let mut foreign = good_click.clone();
    foreign["actions"][0]["action_id"] = json!("approve_deploy");
    foreign["trigger_id"] = json!("900.1.b");
    assert_eq!(env.interactivity(&foreign, Sig::Good, None).await, 200);
    let nowhere = click(&env, "U1", "1111111111.000001", &root, &green, "900.1.c");
    assert_eq!(env.interactivity(&nowhere, Sig::Good, None).await, 200);

    assert_eq!(env.fake.count(), calls_before, "no Slack call was made");
    assert!(
        env.question(&root).await.outcome.is_none(),
        "nothing recorded"
    );
    assert_eq!(env.chat_messages(&root).await, messages_before);

    // A replayed click (Slack's retry of the same delivery) is processed once: one update and no
    // "stale" note for the replay.
    assert_eq!(env.interactivity(&good_click, Sig::Good, None).await, 200);
    assert_eq!(
        env.interactivity(&good_click, Sig::Good, Some(1)).await,
        200
    );
    env.posted(&root, 1).await;
    assert_eq!(env.fake.calls("chat.update").len(), 1);
    assert!(env.fake.calls("chat.postEphemeral").is_empty());

    // A replayed event (same event_id, X-Slack-Retry-Num) is processed once.
    let ts = env.ts();
    let event = json!({"type": "message", "channel": CHANNEL, "user": "U1", "text": "once", "ts": ts, "thread_ts": root, "channel_type": "channel"});
    assert_eq!(env.event_with(event.clone(), "EvReplay", None).await, 200);
    assert_eq!(env.event_with(event, "EvReplay", Some(1)).await, 200);
    env.posted(&root, 2).await;
    let chat = channel_chat_id("slack", &format!("{CHANNEL}:{root}"));
    let onces = env
        .store
        .list_messages(&chat)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.message.text() == "once")
        .count();
    assert_eq!(onces, 1);
}

#[test]
fn the_slack_table_is_checked_and_errors_name_the_key() {
    let (tok, sec) = set_secrets();
    let check = |table: &str| -> Result<(), String> {
        let text = format!("database = \"sqlite::memory:\"\n[channels.slack]\n{table}");
        let config = frogbot::Config::parse(&text).map_err(|e| e.to_string())?;
        config.validate().map_err(|e| e.to_string())
    };
    check(&format!(
        "bot_token_env = \"{tok}\"\nsigning_secret_env = \"{sec}\""
    ))
    .expect("http mode with both secrets");
    let e = check(&format!("bot_token_env = \"{tok}\"")).unwrap_err();
    assert!(e.contains("`channels.slack.signing_secret_env`"), "{e}");
    let e = check(&format!("mode = \"socket\"\nbot_token_env = \"{tok}\"")).unwrap_err();
    assert!(e.contains("`channels.slack.app_token_env`"), "{e}");
    let e = check(&format!(
        "bot_token_env = \"{tok}\"\nsigning_secret_env = \"FROGBOT_TEST_SLACK_UNSET\""
    ))
    .unwrap_err();
    assert!(
        e.contains("`channels.slack.signing_secret_env`") && e.contains("not set"),
        "{e}"
    );
    let e = check(&format!(
        "bot_token_env = \"{tok}\"\nsigning_secret_env = \"{sec}\"\nmode = \"webhook\""
    ))
    .unwrap_err();
    assert!(e.contains("channels.slack"), "{e}");
    let e = check(&format!(
        "bot_token_env = \"{tok}\"\nsigning_secret_env = \"{sec}\"\nsigning_secret = \"inline\""
    ))
    .unwrap_err();
    assert!(e.contains("signing_secret"), "{e}");
    let e = check(&format!(
        "bot_token_env = \"{tok}\"\nsigning_secret_env = \"{sec}\"\napi_url = \"slack.local\""
    ))
    .unwrap_err();
    assert!(e.contains("`channels.slack.api_url`"), "{e}");
}

/// `POST /api/asks` to a Slack channel: the ask's text starts a thread there, the question is
/// drawn in it with Slack's controls, a click answers it, and the asker reads the answer back
/// (`GET /api/asks/{id}`), the same as any question (first answer wins).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_to_a_channel_starts_a_thread_and_a_click_answers_it() {
    let env = start("").await;
    let ask = |body: Value| {
        let http = env.http.clone();
        let url = format!("{}/api/asks", env.base);
        async move {
            let r = http
                .post(url)
                .bearer_auth(common::AGENT)
                .json(&body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (status, created) = ask(json!({
        "to": {"channel": "slack", "thread": CHANNEL},
        "title": "Release",
        "text": "Deploy v1.4 to production?",
        "inputs": [{"header": "Go", "options": [{"label": "Approve"}, {"label": "Hold"}]}],
        "expiresInSeconds": 3600,
        "from": ["slack:U7"]
    }))
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["state"], "open");
    // The thread's root: the ask's text, posted by the bot in the channel.
    let root = env
        .fake
        .calls("chat.postMessage")
        .first()
        .map(|c| c.body.clone())
        .expect("the root posted");
    assert_eq!(root["channel"], CHANNEL);
    assert!(root.get("thread_ts").is_none_or(Value::is_null), "{root}");
    assert!(
        root["text"]
            .as_str()
            .unwrap()
            .contains("Deploy v1.4 to production?"),
        "{root}"
    );
    let chat = frogbot_core::model::ChatId::new(created["chatId"].as_str().unwrap()).unwrap();
    let thread = env.thread_of(&chat).await;
    let root_ts = thread
        .strip_prefix(&format!("{CHANNEL}:"))
        .unwrap()
        .to_owned();
    assert_eq!(
        env.fake.thread_messages(&thread)[0].text,
        root["text"].as_str().unwrap()
    );
    let msg_ts = env.question_ts(&root_ts).await;
    let card = env
        .fake
        .message(&format!("{CHANNEL}:{msg_ts}"))
        .expect("the question card");
    let approve = element(&json!(card.blocks), "Approve");
    // Someone the ask's `from` does not name: told so privately, nothing recorded.
    assert_eq!(
        env.interactivity(
            &click(&env, "U8", &msg_ts, &root_ts, &approve, "1.2.other"),
            Sig::Good,
            None
        )
        .await,
        200
    );
    wait(
        || {
            env.fake
                .calls("chat.postEphemeral")
                .iter()
                .any(|c| c.body["user"] == "U8" && c.body["text"] == DENIED_TEXT)
        },
        "the denied note",
    )
    .await;
    assert!(env.question(&root_ts).await.outcome.is_none());
    assert_eq!(
        env.interactivity(
            &click(&env, "U7", &msg_ts, &root_ts, &approve, "1.2.ask"),
            Sig::Good,
            None
        )
        .await,
        200
    );
    let id = created["id"].as_str().unwrap().to_owned();
    let done = env
        .http
        .get(format!("{}/api/asks/{id}/wait?timeout=20", env.base))
        .bearer_auth(common::AGENT)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(done["state"], "answered", "{done}");
    assert_eq!(done["values"], json!({"Go": "Approve"}));
    assert_eq!(done["by"]["user"], "slack:U7");
    // A thread target that is no Slack thread id, and an unknown platform: refused, nothing posted.
    let posts = env.fake.calls("chat.postMessage").len();
    let (status, body) = ask(
        json!({"to": {"channel": "discord", "thread": "1"}, "text": "x",
        "inputs": [{"kind": "confirm"}]}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid-request")),
        "{body}"
    );
    let (status, body) = ask(
        json!({"to": {"channel": "slack", "user": "@ana"}, "text": "x",
        "inputs": [{"kind": "confirm"}]}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (502, Some("channel-error")),
        "{body}"
    );
    assert_eq!(env.fake.calls("chat.postMessage").len(), posts);
    // A person: their DM with the bot, a thread started there; the same idempotency key again
    // (a retry) finds the same ask and posts no second root.
    let dm_ask = json!({"to": {"channel": "slack", "user": "U7"}, "text": "Ship it?",
        "inputs": [{"kind": "confirm", "label": "Ship"}], "idempotencyKey": "ship-1"});
    let (status, first) = ask(dm_ask.clone()).await;
    assert_eq!(status, 201, "{first}");
    let (status, again) = ask(dm_ask).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(first["id"], again["id"]);
    let dm = env.fake.dm_channel("U7").expect("the DM opened");
    let roots: Vec<_> = env
        .fake
        .calls("chat.postMessage")
        .into_iter()
        .filter(|c| c.body["channel"] == dm.as_str() && c.body.get("thread_ts").is_none())
        .collect();
    assert_eq!(roots.len(), 1, "{roots:?}");
    let chat = frogbot_core::model::ChatId::new(first["chatId"].as_str().unwrap()).unwrap();
    let thread = env.thread_of(&chat).await;
    assert!(thread.starts_with(&format!("{dm}:")), "{thread}");
}

/// Issue 42: an agent in an MCP client (the official TypeScript SDK's, over serve's streamable
/// HTTP `/mcp` with its agent token) asks in a Slack channel; the question is drawn with Slack's
/// buttons in a new thread, a person's click answers it, and the tool's result carries the typed
/// value and who answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_ask_in_a_channel_returns_the_persons_click() {
    let env = start("").await;
    let mut mcp = common::mcp::McpClient::http(&format!("{}/mcp", env.base), Some(common::AGENT))
        .await
        .expect("connects");
    mcp.call(
        "ask",
        "ask_person",
        json!({"to": format!("slack:{CHANNEL}"), "title": "Release",
               "text": "Deploy v1.4 to production?",
               "inputs": [{"header": "Go", "question": "Deploy?", "options": [{"label": "Approve"}, {"label": "Hold"}]}]}),
    )
    .await;
    // The first progress report names the ask (CHAT.MESSAGE); its chat is the new thread.
    let progress = mcp
        .next(|v| v["op"] == "progress" && v["id"] == "ask")
        .await;
    let message = progress["message"].as_str().unwrap();
    let id = message
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(id, _)| id)
        .expect("the ask's id in the progress message");
    let chat = frogbot_core::model::ChatId::new(id.split_once('.').unwrap().0).unwrap();
    let thread = env.thread_of(&chat).await;
    let root_ts = thread
        .strip_prefix(&format!("{CHANNEL}:"))
        .unwrap()
        .to_owned();
    let msg_ts = env.question_ts(&root_ts).await;
    let card = env
        .fake
        .message(&format!("{CHANNEL}:{msg_ts}"))
        .expect("the question card");
    let approve = element(&json!(card.blocks), "Approve");
    assert_eq!(
        env.interactivity(
            &click(&env, "U7", &msg_ts, &root_ts, &approve, "1.2.mcp"),
            Sig::Good,
            None
        )
        .await,
        200
    );
    let result = mcp.result_of("ask").await;
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["state"], "answered", "{result}");
    assert_eq!(
        result["structuredContent"]["values"],
        json!({"Go": "Approve"})
    );
    assert_eq!(result["structuredContent"]["by"]["user"], "slack:U7");
    mcp.close().await;
}

/// Issue 19: 32 answers from mixed sources race on one ask in a Slack thread — button clicks of
/// both options by different people, typed thread replies and `DELETE /api/asks/{id}` — while
/// four `frogbot wait` processes (the real binary) wait on it: one outcome is recorded, the card
/// shows it, every late click is told it is stale, and every waiting CLI prints that outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_answers_from_clicks_replies_and_cancels_record_one_outcome() {
    let env = start("").await;
    let created: Value = env
        .http
        .post(format!("{}/api/asks", env.base))
        .bearer_auth(common::AGENT)
        .json(&json!({
            "to": {"channel": "slack", "thread": CHANNEL},
            "text": "Deploy v1.4?",
            "inputs": [{"header": "Go", "options": [{"label": "Approve"}, {"label": "Hold"}]}]
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().expect("an ask id").to_owned();
    let chat = frogbot_core::model::ChatId::new(created["chatId"].as_str().unwrap()).unwrap();
    let thread = env.thread_of(&chat).await;
    let root = thread
        .strip_prefix(&format!("{CHANNEL}:"))
        .unwrap()
        .to_owned();
    let msg_ts = env.question_ts(&root).await;
    let card = env
        .fake
        .message(&format!("{CHANNEL}:{msg_ts}"))
        .expect("the question card");
    let buttons = [
        element(&json!(card.blocks), "Approve"),
        element(&json!(card.blocks), "Hold"),
    ];
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_frogbot"));
            cmd.args(["wait", &id, "--timeout", "60s"])
                .env("FROGBOT_URL", &env.base)
                // The asker's token: only the asker waits on its ask.
                .env("FROGBOT_TOKEN", common::AGENT)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            tokio::task::spawn_blocking(move || cmd.output().expect("run frogbot wait"))
        })
        .collect();
    // 32 sources: 24 clicks (both buttons, 24 people), 6 typed replies, 2 cancels.
    let mut racing = Vec::new();
    for i in 0..32 {
        let (base, http) = (env.base.clone(), env.http.clone());
        let user = format!("U{}", 100 + i);
        let source = match i % 16 {
            0 => "cancel",
            1..=3 => "reply",
            _ => "click",
        };
        let payload = click(
            &env,
            &user,
            &msg_ts,
            &root,
            &buttons[i % 2],
            &format!("1.{i}.race"),
        );
        let said = env
            .fake
            .user_message(CHANNEL, Some(&root), &user, ["approve", "hold"][i % 2]);
        let event = env.fake.event_callback_with_id(
            env.fake.message_event(&said, "channel"),
            &format!("Ev{}", env.ts()),
        );
        let fake = env.fake.clone();
        let id = id.clone();
        racing.push(tokio::spawn(async move {
            let status = match source {
                "cancel" => http
                    .delete(format!("{base}/api/asks/{id}"))
                    .bearer_auth(common::AGENT)
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16(),
                "reply" => fake
                    .post_event(&base, &event, Sig::Good, None)
                    .await
                    .status()
                    .as_u16(),
                _ => fake
                    .post_interaction(&base, &payload, Sig::Good, None)
                    .await
                    .status()
                    .as_u16(),
            };
            (source, user, status)
        }));
    }
    let mut clickers = Vec::new();
    let mut cancels_won = 0;
    for r in racing {
        let (source, user, status) = r.await.unwrap();
        match source {
            // A cancel either withdraws the ask or finds it over already.
            "cancel" => {
                assert!(status == 200 || status == 409, "cancel answered {status}");
                cancels_won += usize::from(status == 200);
            }
            _ => assert_eq!(status, 200, "{source} by {user}"),
        }
        if source == "click" {
            clickers.push(user);
        }
    }
    assert!(cancels_won <= 1, "{cancels_won} cancels won");
    // One outcome, recorded once.
    let status: Value = env
        .http
        .get(format!("{}/api/asks/{id}/wait?timeout=20", env.base))
        .bearer_auth(common::AGENT)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let state = status["state"].as_str().unwrap().to_owned();
    assert!(state == "answered" || state == "cancelled", "{status}");
    assert_eq!(cancels_won == 1, state == "cancelled", "{status}");
    let call = frogbot_core::agent::ask::ask_call_id(id.split_once('.').unwrap().1);
    let q = env
        .store
        .get_question(&chat, &call, now_millis())
        .await
        .unwrap()
        .expect("the ask's question record");
    assert!(q.outcome.is_some(), "{q:?}");
    assert_eq!(
        q.outcome
            .as_ref()
            .map(|o| o == &frogbot_core::model::QuestionOutcome::Cancelled),
        Some(state == "cancelled"),
        "{q:?}"
    );
    // Every click that did not win was told it came too late (privately); the winner was not.
    let winner = status["by"]["user"]
        .as_str()
        .and_then(|u| u.strip_prefix("slack:"))
        .map(str::to_owned);
    let told = |u: &str| {
        env.fake
            .calls("chat.postEphemeral")
            .iter()
            .any(|c| c.body["user"] == u && c.body["text"] == STALE_TEXT)
    };
    for u in &clickers {
        if winner.as_deref() != Some(u.as_str()) {
            wait(|| told(u), "a late click told it is stale").await;
        }
    }
    if let Some(w) = &winner {
        assert!(!told(w), "the winner {w} was told stale");
    }
    // The card shows the outcome.
    wait(
        || {
            env.fake
                .message(&format!("{CHANNEL}:{msg_ts}"))
                .is_some_and(|m| {
                    m.blocks
                        .as_array()
                        .is_some_and(|b| b.iter().all(|b| b["type"] != "actions"))
                })
        },
        "the settled card, without buttons",
    )
    .await;
    // Every waiting CLI prints the same outcome, with its exit code.
    let code = if state == "answered" { 0 } else { 3 };
    for w in waiters {
        let out = w.await.unwrap();
        assert_eq!(
            out.status.code(),
            Some(code),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let printed: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
        assert_eq!(printed["state"], status["state"]);
        assert_eq!(printed["values"], status["values"]);
        assert_eq!(printed["by"], status["by"]);
    }
}

/// Runs `frogbot ARGS --server BASE` (the real binary, a child process) to the end.
fn frogbot_cli(base: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_frogbot"))
        .args(args)
        .env("FROGBOT_URL", base)
        // The agent's token (agent APIs need an agent principal).
        .env("FROGBOT_TOKEN", common::AGENT)
        .output()
        .expect("run frogbot")
}

fn cli_json(o: &std::process::Output) -> Vec<Value> {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Issue 20: an agent outside FrogBot holds a whole conversation with a person in a Slack thread
/// through the CLI (`frogbot send|inbox|ack|edit|delete|pin|unpin` as child processes): its
/// message with blocks is posted once, the person's reply reaches the inbox and shows Seen, the
/// agent's Done shows, three clicks on an event button are three events and answer nothing, an
/// edit and a block patch each edit the Slack message once in place, delete removes it, and the
/// status pin follows pin / unpin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_agent_holds_a_conversation_through_the_cli() {
    let env = start("").await;
    let base = env.base.clone();
    let run = |args: Vec<String>| {
        let base = base.clone();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            frogbot_cli(&base, &args)
        })
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let blocks = json!([
        {"type": "progress", "id": "bar", "value": 1, "max": 4, "label": "Deploy"},
        {"type": "fields", "id": "act", "fields": [{"key": "Branch", "value": "main"}],
         "events": [{"label": "Retry", "value": "retry"}, {"label": "Show logs"}]}
    ])
    .to_string();
    let sent = cli_json(
        &run(args(&[
            "send",
            "Starting the deploy",
            "--to",
            "slack:C42",
            "--title",
            "Deploy v2",
            "--blocks",
            &blocks,
            "--id",
            "m1",
        ]))
        .await
        .unwrap(),
    );
    let chat = sent[0]["chatId"].as_str().unwrap().to_owned();
    let reference = sent[0]["ref"].as_str().unwrap().to_owned();
    assert_eq!(reference, format!("{chat}.m1"));
    let chat_id = frogbot_core::model::ChatId::new(chat.as_str()).unwrap();
    let thread = env.thread_of(&chat_id).await;
    let root_ts = thread.strip_prefix("C42:").unwrap().to_owned();
    // The agent's message: one Block Kit message in the thread with the blocks and the button.
    wait(
        || {
            env.fake
                .thread_messages(&thread)
                .iter()
                .filter(|m| m.bot)
                .count()
                == 2
        },
        "the root and the agent's message",
    )
    .await;
    let posted = env.fake.thread_messages(&thread)[1].clone();
    let retry = element(&posted.blocks, "Retry");
    assert!(posted.text.contains("Deploy v2"), "{}", posted.text);
    // Sending the same id again posts nothing.
    let again = cli_json(
        &run(args(&["send", "other", "--chat", &chat, "--id", "m1"]))
            .await
            .unwrap(),
    );
    assert_eq!(again[0]["ref"], reference.as_str());
    let posts = env.fake.calls("chat.postMessage").len();

    // The person replies in the thread: no model turn, it waits in the inbox.
    assert_eq!(env.reply("U7", &root_ts, "go ahead").await, 200);
    let inbox = cli_json(
        &run(args(&["inbox", "--wait", "--timeout", "20s"]))
            .await
            .unwrap(),
    );
    assert_eq!(inbox.len(), 1, "{inbox:?}");
    assert_eq!(inbox[0]["text"], "go ahead");
    assert_eq!(inbox[0]["ack"], "seen");
    let person_ref = inbox[0]["ref"].as_str().unwrap().to_owned();
    let person_ts = person_ref.rsplit(':').next().unwrap().to_owned();
    let person_msg = || {
        env.fake
            .message(&format!("C42:{person_ts}"))
            .expect("the person's message")
    };
    wait(
        || person_msg().bot_reactions() == ["eyes"],
        "Seen on the message",
    )
    .await;
    assert!(
        cli_json(&run(args(&["inbox"])).await.unwrap()).is_empty(),
        "returned once"
    );
    cli_json(&run(args(&["ack", &person_ref, "done"])).await.unwrap());
    wait(
        || person_msg().bot_reactions() == ["white_check_mark"],
        "Done replaces Seen",
    )
    .await;

    // Three clicks on Retry: three events, nothing answered, nothing posted.
    for i in 0..3 {
        let mut payload = env.fake.block_actions(
            "U7",
            &format!("C42:{}", posted.ts),
            retry.clone(),
            json!({}),
            &format!("1.2.ev{i}"),
        );
        payload["container"]["thread_ts"] = json!(root_ts);
        assert_eq!(env.interactivity(&payload, Sig::Good, None).await, 200);
    }
    let mut events = Vec::new();
    while events.len() < 3 {
        let got = cli_json(
            &run(args(&[
                "inbox",
                "--wait",
                "--timeout",
                "20s",
                "--chat",
                &chat,
            ]))
            .await
            .unwrap(),
        );
        assert!(!got.is_empty(), "the events arrive");
        events.extend(got);
    }
    assert_eq!(events.len(), 3, "{events:?}");
    for e in &events {
        assert_eq!(
            e["event"],
            json!({"messageId": "m1", "blockId": "act", "value": "retry"})
        );
    }
    assert_eq!(
        env.fake.calls("chat.postMessage").len(),
        posts,
        "a click posts nothing"
    );

    // An edit of the text, then a patch of the progress block: one chat.update each.
    let edited = cli_json(
        &run(args(&["edit", &reference, "--text", "Half way there"]))
            .await
            .unwrap(),
    );
    assert_eq!(edited[0]["ref"], reference.as_str());
    wait(|| env.fake.calls("chat.update").len() == 1, "one edit").await;
    wait(
        || {
            env.fake
                .message(&posted.id())
                .is_some_and(|m| m.text.contains("Half way there"))
        },
        "the edit shown in place",
    )
    .await;
    cli_json(
        &run(args(&[
            "edit",
            &reference,
            "--block",
            r#"bar={"type":"progress","value":3,"max":4,"label":"Deploy"}"#,
        ]))
        .await
        .unwrap(),
    );
    wait(|| env.fake.calls("chat.update").len() == 2, "one patch").await;
    wait(
        || {
            env.fake
                .message(&posted.id())
                .is_some_and(|m| m.blocks.to_string().contains("75%"))
        },
        "the patched bar",
    )
    .await;
    assert_eq!(
        env.fake.calls("chat.postMessage").len(),
        posts,
        "edits post nothing new"
    );

    // The status pin, then unpinned.
    cli_json(
        &run(args(&["pin", &reference, "--key", "status"]))
            .await
            .unwrap(),
    );
    wait(|| env.fake.pins("C42") == [posted.ts.clone()], "pinned").await;
    cli_json(
        &run(args(&["unpin", &chat, "--key", "status"]))
            .await
            .unwrap(),
    );
    wait(|| env.fake.pins("C42").is_empty(), "unpinned").await;

    // Delete: removed on Slack; a click on it now is stale.
    cli_json(&run(args(&["delete", &reference])).await.unwrap());
    wait(
        || env.fake.message(&posted.id()).is_none(),
        "deleted on Slack",
    )
    .await;
    let o = run(args(&["edit", &reference, "--text", "again"]))
        .await
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "a deleted message cannot be edited"
    );
    // A bad reference and an unknown state: exit 1 with one line.
    let o = run(args(&["ack", "nodot", "done"])).await.unwrap();
    assert_eq!(o.status.code(), Some(1));
    let o = run(args(&["ack", &person_ref, "finished"])).await.unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("working"),
        "{o:?}"
    );
    // No model ran in the agent's thread.
    let msgs = env.store.list_messages(&chat_id).await.unwrap();
    assert!(
        msgs.iter().all(|m| m.message.metadata.model.is_none()),
        "{msgs:?}"
    );
}
