//! Every input kind end to end: FrogBot's engine on SQLite (a manual clock, so an expiry passes
//! when the test says), teloxide's `Bot` pointed at the fake Bot API, updates by long polling.
//! Each kind drawn within Telegram's limits (HTML texts with the expiry line, callback data
//! within 64 bytes, ForceReply prompts), answered, a validation failure answered with its reason,
//! and the settled view.

use std::sync::Arc;

use frogbot_channel::Adapter;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{
    Engine, EngineConfig, ManualClock, ModelMessage, ModelRequest, channel_chat_id,
};
use frogbot_core::model::now_millis;
use frogbot_telegram::PLATFORM;
use frogbot_telegram::channel::{Config, Receive, TelegramAdapter, connect};
use frogbot_telegram::ids::MAX_CALLBACK_DATA;
use frogbot_telegram::questions::EMPTY_ANSWER;
use frogbot_telegram::render::{MAX_TEXT, SEND_LABEL};
use frogbot_telegram::testing::{self, Call, FakeBotApi, private_chat, text_update, user};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const ADA: i64 = 42;

/// The person's last message as they typed it.
fn last_user(req: &ModelRequest) -> String {
    let text = req
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            ModelMessage::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default();
    text.strip_prefix("Ada: ")
        .map_or(text.clone(), str::to_owned)
}

/// The agent: "form" asks the four kinds together (open for an hour), "approve" a lone danger
/// confirm, "plan" two choices and a confirm on one card (open for a minute), "notify" a lone toggle, "why" a lone text input, "pods" a lone number input with a
/// default (open for a minute), "pair" two plain choices, "other" a lone choice that takes an own
/// answer; a tool result is reported as `done: …`.
fn model() -> ScriptedModel {
    ScriptedModel::new(|req: &ModelRequest| {
        if let Some(ModelMessage::Tool { content, .. }) = req.messages.last() {
            return reply(&format!("done: {content}"));
        }
        let text = last_user(req);
        let ask = |input: Value| call("c1", "question", input);
        let go = json!({"header": "Go", "question": "Deploy <v1.4> & restart?", "kind": "confirm",
            "label": "Approve", "danger": true});
        let why = json!({"header": "Why", "question": "Reason?", "kind": "text_input",
            "maxLength": 10, "placeholder": "because", "required": false});
        let pods = json!({"header": "Pods", "question": "How many?", "kind": "number_input",
            "min": 1, "max": 10, "step": 1, "unit": "pods"});
        let notify = json!({"header": "Notify", "question": "Tell the team?", "kind": "toggle",
            "label": "Notify", "default": true});
        match text.as_str() {
            "form" => ask(json!({"questions": [go, why, pods, notify], "expiresInSeconds": 3600})),
            "approve" => ask(json!({"questions": [go]})),
            "notify" => ask(json!({"questions": [notify]})),
            "why" => ask(json!({"questions": [why]})),
            "plan" => ask(json!({"questions": [
                {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]},
                {"header": "Checks", "question": "Which?", "options": [{"label": "lint"}, {"label": "test"}],
                    "multiple": true},
                go
            ], "expiresInSeconds": 60})),
            "pair" => ask(json!({"questions": [
                {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]},
                {"header": "Size", "question": "How big?", "options": [{"label": "small"}, {"label": "large"}]}
            ]})),
            "other" => ask(json!({"questions": [
                {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}],
                    "custom": true}
            ]})),
            "pods" => {
                let mut pods = pods;
                pods["default"] = json!(3);
                ask(json!({"questions": [pods], "expiresInSeconds": 60}))
            }
            _ => reply(&format!("echo: {text}")),
        }
    })
}

struct Setup {
    fake: FakeBotApi,
    engine: Engine,
    clock: ManualClock,
    _channel: TelegramAdapter,
    shutdown: CancellationToken,
    _db: frogbot_testkit::TestDb,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn setup() -> Setup {
    let fake = FakeBotApi::start().await;
    let mut config = Config::new("123:TEST");
    config.api_url = Some(fake.api_url());
    config.receive = Receive::polling();
    config.users = [(ADA.to_string(), "ada".to_string())].into();
    let channel = connect(config).await.unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let clock = ManualClock::at_system_time();
    let engine = Engine::with_clock(
        store,
        vec![frogbot_testkit::offer("main", model())],
        vec![],
        EngineConfig::default(),
        Arc::new(clock.clone()),
    )
    .with_channel(channel.channel());
    let shutdown = CancellationToken::new();
    channel.start(engine.handle(), shutdown.clone()).unwrap();
    Setup {
        fake,
        engine,
        clock,
        _channel: channel,
        shutdown,
        _db: db,
    }
}

/// Ada writes `text` in her private chat (replying to `reply_to` when set): the message id.
fn say(s: &Setup, text: &str, reply_to: Option<i64>) -> i64 {
    let update = s
        .fake
        .user_message(private_chat(ADA, "Ada"), user(ADA, "Ada"), text, reply_to);
    let id = update["message"]["message_id"].as_i64().unwrap();
    s.fake.push(update);
    id
}

/// Ada starts a conversation with `text` (a fresh message id, no reply).
fn start_with(s: &Setup, text: &str) {
    let id = s.fake.next_message_id();
    s.fake.push(text_update(
        id,
        private_chat(ADA, "Ada"),
        user(ADA, "Ada"),
        text,
    ));
}

/// The question messages posted for call `c1`, once FrogBot recorded them all: (message id, its
/// `sendMessage` body), in order.
async fn question_messages(s: &Setup) -> Vec<(i64, Value)> {
    let record = record_at(s, 0).await;
    let calls = s.fake.all_calls();
    record
        .messages
        .iter()
        .map(|m| {
            let id: i64 = m.id.rsplit(':').next().unwrap().parse().unwrap();
            let body = calls
                .iter()
                .find(|c| {
                    c.method == "sendmessage"
                        && c.result.as_ref().is_some_and(|r| r["message_id"] == id)
                })
                .map(|c| c.body.clone())
                .unwrap();
            (id, body)
        })
        .collect()
}

/// Waits until FrogBot's record of call `c1` is at `revision` with its messages drawn (not
/// posting: a click while `updated` redraws is answered as out of date); the record.
async fn record_at(s: &Setup, revision: u64) -> frogbot_model::QuestionRecord {
    let chat = channel_chat_id(PLATFORM, &ADA.to_string());
    let deadline = std::time::Instant::now() + testing::WAIT;
    loop {
        let q = s
            .engine
            .store_for_tests()
            .get_question(&chat, "c1", now_millis())
            .await
            .unwrap();
        if let Some(q) = q.filter(|q| q.rendered && !q.posting && q.record.revision == revision) {
            return q.record;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "question never recorded at revision {revision}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

fn buttons(message: &Value) -> Vec<(String, String)> {
    message["reply_markup"]["inline_keyboard"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .map(|b| {
            (
                b["text"].as_str().unwrap().to_owned(),
                b["callback_data"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Waits until message `id` shows a keyboard drawn at `revision`; its buttons.
async fn keyboard_at(s: &Setup, id: i64, revision: u64) -> Vec<(String, String)> {
    let prefix = format!("q{revision}:");
    s.fake
        .wait_for(&format!("message {id} at revision {revision}"), |_| {
            let b = buttons(&s.fake.sent(id));
            b.iter().all(|(_, d)| d.starts_with(&prefix)).then_some(b)
        })
        .await
}

/// Ada presses the button labelled `text` on message `id` as the fake shows it now; the
/// callback query's id.
fn press(s: &Setup, id: i64, text: &str) -> String {
    let data = buttons(&s.fake.sent(id))
        .into_iter()
        .find(|(t, _)| t == text)
        .unwrap_or_else(|| panic!("message {id} shows no button {text:?}: {}", s.fake.sent(id)))
        .1;
    let update = s.fake.click(&user(ADA, "Ada"), id, &data);
    let query = update["callback_query"]["id"].as_str().unwrap().to_owned();
    s.fake.push(update);
    query
}

async fn callback_answer(s: &Setup, query: &str) -> Value {
    s.fake
        .wait_for("the callback answer", |c| {
            c.iter()
                .find(|c| c.method == "answercallbackquery" && c.body["callback_query_id"] == query)
                .map(|c| c.body.clone())
        })
        .await
}

/// The bot's reply to Ada's message `id` (a rejection's reason).
async fn reply_to(s: &Setup, id: i64) -> String {
    s.fake
        .wait_for("the reply", |c| {
            c.iter()
                .find(|c| {
                    c.method == "sendmessage" && c.body["reply_parameters"]["message_id"] == id
                })
                .and_then(|c| c.body["text"].as_str().map(str::to_owned))
        })
        .await
}

/// The settled text of message `id` (as the fake shows it after `editMessageText`).
async fn settled(s: &Setup, id: i64) -> String {
    s.fake
        .wait_for("the settled edit", |c| {
            c.iter()
                .find(|c| c.method == "editmessagetext" && c.body["message_id"] == id)
                .map(|_| ())
        })
        .await;
    s.fake.sent(id)["text"].as_str().unwrap().to_owned()
}

async fn done(s: &Setup) -> Value {
    let text = s
        .fake
        .wait_for("the agent's next reply", |c| {
            c.iter().find_map(|c| {
                let t = c.body["text"].as_str()?;
                (c.method == "sendmessage" && t.starts_with("done: ")).then(|| t.to_owned())
            })
        })
        .await;
    serde_json::from_str(text.strip_prefix("done: ").unwrap()).unwrap()
}

fn calls_of(calls: &[Call], method: &str, id: i64) -> usize {
    calls
        .iter()
        .filter(|c| c.method == method && c.body["message_id"] == id)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_kinds_are_drawn_validated_answered_with_send_answers_and_settled() {
    let s = setup().await;
    start_with(&s, "form");
    let msgs = question_messages(&s).await;
    assert_eq!(msgs.len(), 3, "the two prompts, then the card");
    let [(why, why_body), (pods, pods_body), (card, card_body)] = <[_; 3]>::try_from(msgs).unwrap();

    // Every message: HTML parse mode, escaped, within Telegram's limits.
    for body in [&why_body, &pods_body, &card_body] {
        assert_eq!(body["parse_mode"], "HTML", "{body}");
        for (_, data) in buttons(body) {
            assert!(data.len() <= MAX_CALLBACK_DATA);
        }
    }
    // The card: every input, the expiry line last, the question text escaped.
    let shown = s.fake.sent(card)["text"].as_str().unwrap().to_owned();
    assert!(shown.chars().count() <= MAX_TEXT);
    assert!(shown.contains("❓ Go\nDeploy <v1.4> & restart?"), "{shown}");
    assert!(
        card_body["text"]
            .as_str()
            .unwrap()
            .contains("Deploy &lt;v1.4&gt; &amp; restart?")
    );
    assert!(shown.contains("❓ Why (optional)\nReason?\n✎ Reply to its message above."));
    assert!(shown.contains("❓ Notify\nTell the team?\n(Tap ✓/✗ to switch it.)"));
    let last = shown.lines().last().unwrap();
    assert!(
        last.starts_with("⏳ open until ") && last.ends_with(" UTC"),
        "{shown}"
    );
    // Its buttons: the confirm with its label (⚠️ for danger), the toggle's ✓/✗ switch showing its
    // default (on), Send answers, Skip.
    assert_eq!(
        buttons(&card_body),
        [
            ("⚠️ Approve".to_owned(), "q0:0:c".to_owned()),
            ("✓ Notify".to_owned(), "q0:3:t".to_owned()),
            (SEND_LABEL.to_owned(), "q0:0:a".to_owned()),
            ("Skip".to_owned(), "q0:0:s".to_owned())
        ]
    );
    // Text and number: ForceReply prompts with the placeholder and the one-line hint.
    assert_eq!(
        why_body["reply_markup"],
        json!({"force_reply": true, "input_field_placeholder": "because"})
    );
    let why_text = why_body["text"].as_str().unwrap();
    assert!(why_text.starts_with("❓ Why (optional)"));
    assert!(why_text.contains("Reply to this message with your answer (at most 10 characters)."));
    assert_eq!(pods_body["reply_markup"]["force_reply"], json!(true));
    assert_eq!(
        pods_body["reply_markup"]["input_field_placeholder"],
        "A number"
    );
    assert!(
        pods_body["text"]
            .as_str()
            .unwrap()
            .contains("Reply to this message with a number from 1 to 10 (pods).")
    );
    // A Message's `reply_markup` is an inline keyboard only: the prompt sent shows none, and a
    // reply to it carries it without one.
    let result = s
        .fake
        .all_calls()
        .into_iter()
        .find(|c| c.method == "sendmessage" && c.body == pods_body)
        .and_then(|c| c.result)
        .unwrap();
    assert_eq!(result["message_id"], pods);
    assert!(result.get("reply_markup").is_none(), "{result}");

    // A number out of range: the reason as a reply; the prompt stays open.
    let bad = say(&s, "11", Some(pods));
    let update = s.fake.message(bad).unwrap();
    assert_eq!(update["reply_to_message"]["message_id"], pods);
    assert!(update["reply_to_message"].get("reply_markup").is_none());
    assert_eq!(reply_to(&s, bad).await, "Enter a number from 1 to 10.");
    let bad = say(&s, "2.5 pods", Some(pods));
    assert_eq!(
        reply_to(&s, bad).await,
        "Enter a number from 1 to 10 in steps of 1."
    );
    let bad = say(&s, "lots", Some(pods));
    assert_eq!(
        reply_to(&s, bad).await,
        "Reply with a number from 1 to 10 (pods)."
    );
    // Text too long: the reason.
    let bad = say(&s, "far too long an answer", Some(why));
    assert_eq!(
        reply_to(&s, bad).await,
        "The text is longer than 10 characters."
    );
    // Send answers before the required confirm and number: refused with the reason.
    let q = press(&s, card, SEND_LABEL);
    assert_eq!(callback_answer(&s, &q).await["text"], "Answer “Go” first.");
    assert_eq!(record_at(&s, 0).await.revision, 0);

    // Now the answers: the number (unit allowed), shown on the card; the confirm; the toggle
    // switched off.
    say(&s, "4 pods", Some(pods));
    record_at(&s, 1).await;
    keyboard_at(&s, card, 1).await;
    let shown = s.fake.sent(card)["text"].as_str().unwrap().to_owned();
    assert!(shown.contains("❓ Pods\nHow many?\n✅ 4 pods"), "{shown}");
    assert!(shown.contains("⏳ open until "), "{shown}");
    press(&s, card, "⚠️ Approve");
    record_at(&s, 2).await;
    assert_eq!(keyboard_at(&s, card, 2).await[0].0, "✓ Approve");
    press(&s, card, "✓ Notify");
    record_at(&s, 3).await;
    assert_eq!(keyboard_at(&s, card, 3).await[1].0, "✗ Notify");
    press(&s, card, SEND_LABEL);

    // The optional text left empty; the rest as answered.
    let result = done(&s).await;
    assert_eq!(
        result["answers"],
        json!([
            {"header": "Go", "selected": ["Approve"]},
            {"header": "Why", "selected": []},
            {"header": "Pods", "selected": ["4"]},
            {"header": "Notify", "selected": ["off"]}
        ]),
        "{result}"
    );
    // The settled view: each prompt ends with its answer, the card lists them all; no expiry
    // line, no buttons.
    assert!(settled(&s, why).await.ends_with("✅ Answered by Ada: —"));
    assert!(
        settled(&s, pods)
            .await
            .ends_with("✅ Answered by Ada: 4 pods")
    );
    assert_eq!(
        settled(&s, card).await,
        "✅ Answers sent:\n• Go: Approve\n• Why: —\n• Pods: 4 pods\n• Notify: off"
    );
    for id in [why, pods, card] {
        assert_eq!(s.fake.buttons(id), 0);
        let text = s.fake.sent(id)["text"].as_str().unwrap().to_owned();
        assert!(!text.contains("open until"), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_confirm_answers_on_one_tap() {
    let s = setup().await;
    start_with(&s, "approve");
    let msgs = question_messages(&s).await;
    assert_eq!(msgs.len(), 1, "no Send answers for one simple input");
    let (go, body) = &msgs[0];
    assert!(!body["text"].as_str().unwrap().contains("open until"));
    press(&s, *go, "⚠️ Approve");
    assert_eq!(
        done(&s).await["answers"],
        json!([{"header": "Go", "selected": ["Approve"]}])
    );
    assert!(
        settled(&s, *go)
            .await
            .ends_with("✅ Answered by Ada: Approve")
    );
    assert_eq!(s.fake.buttons(*go), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_toggle_is_two_buttons_on_and_off() {
    let s = setup().await;
    start_with(&s, "notify");
    let msgs = question_messages(&s).await;
    assert_eq!(msgs.len(), 1);
    let (id, body) = &msgs[0];
    assert_eq!(
        buttons(body),
        [
            ("✓ On".to_owned(), "q0:0:y".to_owned()),
            ("✗ Off".to_owned(), "q0:0:n".to_owned()),
            ("Skip".to_owned(), "q0:0:s".to_owned())
        ]
    );
    // On and Off share a row.
    assert_eq!(
        body["reply_markup"]["inline_keyboard"][0]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    press(&s, *id, "✗ Off");
    assert_eq!(
        done(&s).await["answers"],
        json!([{"header": "Notify", "selected": ["off"]}])
    );
    assert!(
        settled(&s, *id)
            .await
            .ends_with("✅ Answered by Ada: Notify — off")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_text_input_is_a_force_reply_validated_then_answered() {
    let s = setup().await;
    start_with(&s, "why");
    let msgs = question_messages(&s).await;
    assert_eq!(msgs.len(), 1);
    let (prompt, body) = &msgs[0];
    assert_eq!(body["reply_markup"]["force_reply"], json!(true));
    // An empty-looking reply and a too long one: the reasons; the prompt stays open.
    let bad = say(&s, "   ", Some(*prompt));
    assert_eq!(reply_to(&s, bad).await, EMPTY_ANSWER);
    let bad = say(&s, "eleven chars", Some(*prompt));
    assert_eq!(
        reply_to(&s, bad).await,
        "The text is longer than 10 characters."
    );
    assert_eq!(calls_of(&s.fake.all_calls(), "editmessagetext", *prompt), 0);
    say(&s, "  canary ok ", Some(*prompt));
    assert_eq!(
        done(&s).await["answers"],
        json!([{"header": "Why", "selected": ["canary ok"]}])
    );
    assert!(
        settled(&s, *prompt)
            .await
            .ends_with("✅ Answered by Ada: canary ok")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_number_input_shows_its_default() {
    let s = setup().await;
    start_with(&s, "pods");
    let msgs = question_messages(&s).await;
    let (prompt, body) = &msgs[0];
    let text = body["text"].as_str().unwrap();
    assert!(text.contains("⏳ open until "), "{text}");
    // The minute passes: the set expires with its default.
    s.clock.advance(61_000);
    let chat = channel_chat_id(PLATFORM, &ADA.to_string());
    let row = s
        .engine
        .store_for_tests()
        .get_question(&chat, "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    s.engine
        .questions()
        .expire(&chat, &row.message_id)
        .await
        .unwrap();
    let text = settled(&s, *prompt).await;
    assert!(text.ends_with("⌛ Expired — default: 3 pods"), "{text}");
    assert!(!text.contains("open until"), "{text}");
    // A late reply is no answer of the question any more.
    let result = done(&s).await;
    assert!(result.to_string().contains("3"), "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn choices_on_a_card_are_picked_and_sent_together() {
    let s = setup().await;
    start_with(&s, "plan");
    let msgs = question_messages(&s).await;
    assert_eq!(msgs.len(), 1, "no prompts: the card alone");
    let (card, body) = &msgs[0];
    let texts: Vec<_> = buttons(body).into_iter().map(|(t, _)| t).collect();
    assert_eq!(
        texts,
        [
            "Env: staging",
            "Env: prod",
            "Checks: lint",
            "Checks: test",
            "⚠️ Approve",
            SEND_LABEL,
            "Skip"
        ]
    );
    press(&s, *card, "Env: prod");
    record_at(&s, 1).await;
    keyboard_at(&s, *card, 1).await;
    press(&s, *card, "Checks: test");
    record_at(&s, 2).await;
    keyboard_at(&s, *card, 2).await;
    press(&s, *card, "⚠️ Approve");
    record_at(&s, 3).await;
    let kb: Vec<_> = keyboard_at(&s, *card, 3)
        .await
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert_eq!(
        kb[..5],
        [
            "Env: staging",
            "✓ Env: prod",
            "Checks: lint",
            "✓ Checks: test",
            "✓ Approve"
        ]
    );
    // The set waits for Send answers (checked options count without a Done).
    press(&s, *card, SEND_LABEL);
    assert_eq!(
        done(&s).await["answers"],
        json!([
            {"header": "Env", "selected": ["prod"]},
            {"header": "Checks", "selected": ["test"]},
            {"header": "Go", "selected": ["Approve"]}
        ])
    );
    assert_eq!(
        settled(&s, *card).await,
        "✅ Answers sent:\n• Env: prod\n• Checks: test\n• Go: Approve"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_expires_without_an_answer_and_a_skip_reply_on_a_prompt_skips() {
    let s = setup().await;
    start_with(&s, "plan");
    let (card, _) = question_messages(&s).await.remove(0);
    // The minute passes: the required confirm has no default, so no answer.
    s.clock.advance(61_000);
    let chat = channel_chat_id(PLATFORM, &ADA.to_string());
    let row = s
        .engine
        .store_for_tests()
        .get_question(&chat, "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    s.engine
        .questions()
        .expire(&chat, &row.message_id)
        .await
        .unwrap();
    assert_eq!(settled(&s, card).await, "⌛ Expired.");
    assert_eq!(s.fake.buttons(card), 0);

    // A new set: the form; `skip` replied to a prompt dismisses the whole set.
    let s = setup().await;
    start_with(&s, "form");
    let msgs = question_messages(&s).await;
    let (why, card) = (msgs[0].0, msgs[2].0);
    say(&s, "skip", Some(why));
    let text = settled(&s, card).await;
    assert_eq!(text, "⏭️ Skipped by Ada");
    assert!(settled(&s, why).await.ends_with("⏭️ Skipped by Ada"));
}

/// The message ids of a record, in order.
fn ids_of(record: &frogbot_model::QuestionRecord) -> Vec<i64> {
    record
        .messages
        .iter()
        .map(|m| m.id.rsplit(':').next().unwrap().parse().unwrap())
        .collect()
}

/// Regression: a set of plain choices used to be posted all at once, so a tap on the first
/// question's keyboard (not the record's last message, its current one) was refused as stale.
/// Now one question at a time: the first, then the next once it is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_plain_choices_come_one_at_a_time_and_the_first_tap_counts() {
    let s = setup().await;
    start_with(&s, "pair");
    let msgs = question_messages(&s).await;
    let (env, body) = &msgs[0];
    assert!(body["text"].as_str().unwrap().contains("Where?"), "{body}");
    // The first question's button first: taken (it was refused as stale).
    press(&s, *env, "prod");
    // The step is taken: the second question is posted, the record's current message.
    let record = record_at(&s, 1).await;
    assert_eq!(msgs.len(), 1, "the first question alone");
    let ids = ids_of(&record);
    assert_eq!(ids.len(), 2, "{record:?}");
    assert_eq!(ids[0], *env);
    assert_eq!(record.messages[1].question, Some(1));
    let size = ids[1];
    assert!(
        s.fake.sent(size)["text"]
            .as_str()
            .unwrap()
            .contains("How big?")
    );
    keyboard_at(&s, size, 1).await;
    press(&s, size, "large");
    assert_eq!(
        done(&s).await["answers"],
        json!([
            {"header": "Env", "selected": ["prod"]},
            {"header": "Size", "selected": ["large"]}
        ])
    );
    settled(&s, size).await;
    assert_eq!(s.fake.buttons(*env), 0);
    assert_eq!(s.fake.buttons(size), 0);
}

/// Regression: a lone choice with `custom` used to post its own-answer prompt after the keyboard,
/// so the prompt was the current message and a tap on an option was refused as stale. The prompt
/// now comes first and the keyboard's message last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_custom_choice_is_answered_by_a_tap() {
    let s = setup().await;
    start_with(&s, "other");
    let msgs = question_messages(&s).await;
    let (kb, kb_body) = msgs
        .iter()
        .find(|(_, b)| !buttons(b).is_empty())
        .cloned()
        .unwrap();
    assert!(
        kb_body["text"].as_str().unwrap().contains("Where?"),
        "{kb_body}"
    );
    // A tap on an option: taken (it was refused as stale).
    press(&s, kb, "staging");
    assert_eq!(
        done(&s).await["answers"],
        json!([{"header": "Env", "selected": ["staging"]}])
    );
    // The own-answer prompt comes first, the keyboard's message last (the current one).
    assert_eq!(msgs.len(), 2, "the own-answer prompt, then the keyboard");
    let (prompt, prompt_body) = &msgs[0];
    let prompt = *prompt;
    assert_eq!(msgs[1].0, kb);
    assert!(
        prompt_body["reply_markup"]["force_reply"] == true,
        "{prompt_body}"
    );
    settled(&s, kb).await;
    settled(&s, prompt).await;
    assert_eq!(s.fake.buttons(kb), 0);
}
