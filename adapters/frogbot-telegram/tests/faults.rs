//! Replies delivered through a Bot API that fails a seeded fraction of calls
//! (`frogbot_model::faults`): each failure is classified (`Transient` with Telegram's
//! `retry_after`, `maybe_done` after a reset), and a retry loop like the engine's delivers every
//! piece of 200 replies in order per chat, with no more duplicates than resets after processing
//! (Telegram has no idempotency key: at least once).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use frogbot_core::agent::{ChannelOutbox, Delivery};
use frogbot_model::faults::{Fault, FaultPlan};
use frogbot_model::{BoxError, Thread, Transient, UiMessage};
use frogbot_telegram::TelegramApi;
use frogbot_telegram::channel::TelegramOutbox;
use frogbot_telegram::client::{MAX_WAIT, SendTo, send_html_once};
use frogbot_telegram::testing::FakeBotApi;
use teloxide::types::ChatId;

/// How long the client waits for an answer in these tests (an injected timeout ends there).
const CLIENT_TIMEOUT: Duration = Duration::from_millis(400);

fn reply(text: &str) -> UiMessage {
    serde_json::from_value(serde_json::json!({
        "id": "m1", "role": "assistant", "parts": [{"type": "text", "text": text}]
    }))
    .expect("a reply")
}

fn thread(chat: i64) -> Thread {
    Thread {
        id: chat.to_string(),
        platform: "telegram".into(),
        chat_id: format!("telegram-{chat}"),
    }
}

fn transient(e: &BoxError) -> &Transient {
    Transient::find(e.as_ref()).unwrap_or_else(|| panic!("not transient: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fault_is_a_transient_failure_and_a_reset_message_was_posted() {
    let fake = FakeBotApi::start().await;
    let bot = fake.bot_with_timeout(CLIENT_TIMEOUT);
    for (fault, wait, maybe_done, posted) in [
        (Fault::ServerError, None, false, false),
        (
            Fault::RateLimited(Duration::from_millis(50)),
            Some(Duration::from_secs(1)),
            false,
            false,
        ),
        (Fault::Timeout, None, true, false),
        (Fault::ResetAfterProcessing, None, true, true),
    ] {
        fake.inject_faults(
            Arc::new(FaultPlan::new(1, 1.0).only(&[fault])),
            &["sendmessage"],
        );
        let before = fake.calls("sendmessage").len();
        let e: BoxError = send_html_once(&bot, SendTo::new(ChatId(5), None), "<b>hi</b>")
            .await
            .expect_err("fails")
            .into();
        let t = transient(&e);
        assert_eq!(t.wait(), wait, "{fault:?}: {e}");
        assert_eq!(t.may_be_done(), maybe_done, "{fault:?}: {e}");
        let calls = fake.all_calls();
        let last = calls.last().expect("recorded");
        assert_eq!(fake.calls("sendmessage").len(), before + 1);
        assert_eq!(last.fault, Some(fault));
        assert_eq!(last.result.is_some(), posted, "{fault:?}");
    }
    // A permanent refusal carries no Transient.
    fake.inject_faults(Arc::new(FaultPlan::none()), &[]);
    let e: BoxError = send_html_once(&bot, SendTo::new(ChatId(5), None), "<b>open")
        .await
        .expect_err("bad HTML")
        .into();
    assert!(!Transient::is_transient(e.as_ref()), "{e}");
    assert!(e.to_string().contains("can't parse entities"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adapters_own_retries_wait_out_429s_and_give_up_past_the_cap() {
    let fake = FakeBotApi::start().await;
    let bot = fake.bot_with_timeout(CLIENT_TIMEOUT);
    let said = fake.user_message(
        frogbot_telegram::testing::private_chat(5, "Ada"),
        frogbot_telegram::testing::user(5, "Ada"),
        "hi",
        None,
    );
    let id = teloxide::types::MessageId(said["message"]["message_id"].as_i64().unwrap() as i32);
    // Every call but one in four fails with one of the four faults: the reaction (an ack) and
    // the answer get through within their attempts.
    let plan = Arc::new(FaultPlan::new(3, 0.5));
    fake.inject_faults(plan.clone(), &["setmessagereaction"]);
    for _ in 0..5 {
        TelegramApi::set_reaction(&bot, ChatId(5), id, "👀")
            .await
            .expect("retried until it got through");
    }
    assert!(plan.injected() > 0);
    // A retry_after over the cap is not waited in-process: the call fails with it.
    let long = MAX_WAIT + Duration::from_secs(1);
    fake.inject_faults(
        Arc::new(
            FaultPlan::new(1, 1.0)
                .only(&[Fault::RateLimited(long)])
                .rate_limit_wait(long),
        ),
        &["setmessagereaction"],
    );
    let e: BoxError = TelegramApi::set_reaction(&bot, ChatId(5), id, "👀")
        .await
        .expect_err("not waited")
        .into();
    assert_eq!(transient(&e).wait(), Some(long));
    assert_eq!(
        fake.calls("setmessagereaction").len(),
        5 + plan.injected() as usize + 1
    );
}

/// Delivers `reply` the way the engine does: again after a transient failure, with the same
/// key, the next attempt, after the platform's wait (or a short backoff).
async fn deliver(outbox: &TelegramOutbox, thread: &Thread, reply: &UiMessage, key: String) -> u32 {
    let mut delivery = Delivery::new(key);
    loop {
        match outbox.deliver(thread, reply, &delivery).await {
            Ok(_) => return delivery.attempt,
            Err(e) => {
                let wait = transient(&e).wait().unwrap_or(Duration::from_millis(10));
                tokio::time::sleep(wait).await;
                delivery.attempt += 1;
                assert!(
                    delivery.attempt < 100,
                    "delivery {} never got through",
                    delivery.key
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_replies_through_20_percent_faults_arrive_in_order() {
    const CHATS: i64 = 10;
    const REPLIES: usize = 200;
    let fake = FakeBotApi::start().await;
    let outbox = Arc::new(TelegramOutbox::new(fake.bot_with_timeout(CLIENT_TIMEOUT)));
    let plan = Arc::new(FaultPlan::new(18, 0.2));
    fake.inject_faults(plan.clone(), &["sendmessage"]);
    // Reply n goes to chat n % CHATS; every 7th is long (three messages or more).
    let text = |n: usize| -> String {
        let words = if n.is_multiple_of(7) { 1_500 } else { 5 };
        (0..words).map(|i| format!("r{n}w{i} ")).collect()
    };
    let mut tasks = Vec::new();
    for chat in 1..=CHATS {
        let outbox = outbox.clone();
        tasks.push(tokio::spawn(async move {
            let mut retries = 0;
            for n in (0..REPLIES).filter(|n| (*n as i64) % CHATS == chat - 1) {
                let key = format!("deliver:{chat}:{n}:0");
                retries += deliver(&outbox, &thread(chat), &reply(&text(n)), key).await;
            }
            retries
        }));
    }
    let mut retries = 0;
    for t in tasks {
        retries += t.await.expect("a chat's deliveries");
    }
    // What each chat shows: the messages Telegram posted, in order.
    let mut shown: HashMap<i64, Vec<String>> = HashMap::new();
    let mut pieces = 0;
    for c in fake.all_calls() {
        if c.method != "sendmessage" {
            continue;
        }
        if let Some(result) = c.result {
            pieces += 1;
            let chat = result["chat"]["id"].as_i64().expect("a chat");
            let text = result["text"].as_str().expect("a text").to_owned();
            shown.entry(chat).or_default().push(text);
        }
    }
    let mut duplicates = 0;
    let mut long = 0;
    for chat in 1..=CHATS {
        let mut messages = shown.remove(&chat).unwrap_or_default();
        let before = messages.len();
        // A duplicate is a piece posted again right after itself (a reset, then the retry).
        messages.dedup();
        duplicates += before - messages.len();
        let expected: Vec<String> = (0..REPLIES)
            .filter(|n| (*n as i64) % CHATS == chat - 1)
            .flat_map(|n| {
                long += usize::from(text(n).len() > 4_096);
                text(n)
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        let got: Vec<String> = messages
            .iter()
            .flat_map(|m| m.split_whitespace().map(str::to_owned))
            .collect();
        assert_eq!(got, expected, "chat {chat}: every piece once, in order");
    }
    let (errors, limited, timeouts, resets) = plan.counts();
    println!(
        "telegram: {REPLIES} replies ({long} long), {pieces} messages posted, {} faults \
         (500: {errors}, 429: {limited}, timeouts: {timeouts}, resets: {resets}), \
         {retries} retries, {duplicates} duplicates",
        plan.injected()
    );
    assert!(plan.injected() >= 20, "faults were injected");
    assert!(long > 0);
    assert!(
        duplicates as u64 <= resets,
        "{duplicates} duplicates, {resets} resets"
    );
}
