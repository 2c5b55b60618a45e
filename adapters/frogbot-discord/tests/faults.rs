//! Delivery under injected faults (issue 18): the fake Discord fails 20 % of its write calls (500,
//! 429 with `Retry-After` and Discord's body, no answer until the client times out, the
//! connection reset after the message WAS created); replies go through `ChannelOutbox::deliver`
//! (a nonce per piece, `enforce_nonce`) with a retry loop like the engine's. Every piece must
//! arrive exactly once, in order, in its channel. Also: how each fault surfaces, and opening a
//! thread under faults.

use std::sync::Arc;
use std::time::{Duration, Instant};

use frogbot_core::agent::{ChannelOutbox, Delivery};
use frogbot_discord::DiscordApi;
use frogbot_discord::ids::delivery_nonce;
use frogbot_discord::testing::{self as fake, FakeDiscord};
use frogbot_model::faults::{Fault, FaultPlan};
use frogbot_model::{Thread, Transient, UiMessage};
use serde_json::{Value, json};
use serenity::model::id::{ChannelId, UserId};

const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;
const GUILD: u64 = 100_000_000_000_000_001;

fn reply(text: &str) -> UiMessage {
    serde_json::from_value(json!({"id": "r", "role": "assistant",
                                  "parts": [{"type": "text", "text": text}]}))
    .expect("a reply")
}

fn thread(channel: u64) -> Thread {
    Thread {
        id: channel.to_string(),
        platform: frogbot_discord::PLATFORM.into(),
        chat_id: format!("chat-{channel}"),
    }
}

/// The engine's loop: deliver, and while the failure is transient wait (its wait, else a small
/// backoff) and try again with the same key. Returns the attempts made.
async fn deliver(outbox: &dyn ChannelOutbox, thread: &Thread, reply: &UiMessage, key: &str) -> u32 {
    let mut delivery = Delivery::new(key);
    loop {
        match outbox.deliver(thread, reply, &delivery).await {
            Ok(_) => return delivery.attempt + 1,
            Err(e) => {
                let t = Transient::find(e.as_ref())
                    .unwrap_or_else(|| panic!("a permanent failure under injected faults: {e}"));
                tokio::time::sleep(t.wait().unwrap_or(Duration::from_millis(20))).await;
                delivery.attempt += 1;
                assert!(delivery.attempt < 100, "{key}: no end of retries");
            }
        }
    }
}

/// Reply `r` of a channel: every fourth is three pieces (Discord takes 2,000 characters).
fn text_of(t: usize, r: usize) -> String {
    if r % 4 == 3 {
        (0..3)
            .map(|p| format!("t{t} r{r} piece {p}: {}", "frog ".repeat(300)))
            .collect::<Vec<_>>()
            .join("\n\n")
    } else {
        format!("channel {t}, reply {r}")
    }
}

async fn connect(fake: &FakeDiscord) -> frogbot_discord::channel::DiscordAdapter {
    let mut config = fake.config();
    config.api_timeout = Duration::from_millis(300);
    frogbot_discord::channel::connect(config).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_piece_arrives_exactly_once_in_order_under_faults() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let adapter = connect(&fake).await;
    fake.set_fault_hold(Duration::from_millis(900));
    let plan = fake.set_faults(FaultPlan::new(18, 0.2));
    const CHANNELS: usize = 20;
    const REPLIES: usize = 10;
    let channels: Vec<u64> = (0..CHANNELS).map(|_| fake.new_id()).collect();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (t, &channel) in channels.iter().enumerate() {
        let outbox: Arc<dyn ChannelOutbox> = adapter.outbox();
        tasks.push(tokio::spawn(async move {
            let mut attempts = 0;
            for r in 0..REPLIES {
                let key = format!("deliver:chat-{channel}:m{r}:0");
                attempts += deliver(
                    outbox.as_ref(),
                    &thread(channel),
                    &reply(&text_of(t, r)),
                    &key,
                )
                .await;
            }
            attempts
        }));
    }
    let mut attempts = 0;
    for task in tasks {
        attempts += task.await.unwrap();
    }
    let elapsed = started.elapsed();
    fake.clear_faults();
    let mut pieces = 0;
    for (t, &channel) in channels.iter().enumerate() {
        let mut nonces = Vec::new();
        let mut texts = Vec::new();
        for r in 0..REPLIES {
            let d = Delivery::new(format!("deliver:chat-{channel}:m{r}:0"));
            let split = frogbot_discord::format::messages(&text_of(t, r), 2000);
            assert_eq!(
                split.len(),
                if r % 4 == 3 { 3 } else { 1 },
                "reply {r}'s pieces"
            );
            nonces.extend((0..split.len()).map(|i| delivery_nonce(&d.piece_key(i))));
            texts.extend(split);
        }
        pieces += nonces.len();
        let posted = fake.channel_messages(channel);
        let got: Vec<&str> = posted
            .iter()
            .map(|m| m["nonce"].as_str().unwrap_or("?"))
            .collect();
        assert_eq!(got, nonces, "channel {t}: every piece once, in order");
        let got: Vec<&str> = posted
            .iter()
            .map(|m| m["content"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(got, texts, "channel {t}: the texts");
    }
    let (e500, e429, timeouts, resets) = plan.counts();
    let creates = fake
        .calls()
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/messages"))
        .count();
    println!(
        "discord faults: {} replies, {pieces} pieces in {CHANNELS} channels; {} faults injected \
         (500: {e500}, 429: {e429}, timeout: {timeouts}, reset after creating: {resets}); \
         {attempts} deliver attempts; {creates} create-message calls answered; {:.1?}",
        CHANNELS * REPLIES,
        plan.injected(),
        elapsed
    );
    assert!(
        resets > 0 && timeouts > 0 && e429 > 0 && e500 > 0,
        "every fault drawn"
    );
    assert!(
        attempts as usize > CHANNELS * REPLIES,
        "some deliveries were retried"
    );
}

#[tokio::test]
async fn a_repeated_delivery_is_deduplicated_by_its_nonces() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let adapter = connect(&fake).await;
    let outbox = adapter.outbox();
    let channel = fake.new_id();
    let d = Delivery::new("deliver:chat-1:m1:0");
    let text = text_of(0, 3);
    let ids = outbox
        .deliver(&thread(channel), &reply(&text), &d)
        .await
        .unwrap();
    let again = Delivery {
        attempt: 1,
        ..d.clone()
    };
    let ids_again = outbox
        .deliver(&thread(channel), &reply(&text), &again)
        .await
        .unwrap();
    let posted = fake.channel_messages(channel);
    assert_eq!(posted.len(), 3, "one message per piece");
    // Both attempts name the same three messages: what an edit needs.
    let there: Vec<String> = posted
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, there);
    assert_eq!(ids_again, there);
    let sent: Vec<Value> = fake
        .calls()
        .into_iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/messages"))
        .map(|c| c.body)
        .collect();
    assert_eq!(sent.len(), 6, "each piece sent twice");
    assert!(sent.iter().all(|b| b["enforce_nonce"] == true));
    assert!(
        sent.iter()
            .all(|b| b["nonce"].as_str().is_some_and(|n| n.len() <= 25))
    );
}

#[tokio::test]
async fn each_fault_surfaces_as_discord_would_have_it() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let mut config = fake.config();
    config.api_timeout = Duration::from_millis(200);
    let http = config.http().unwrap();
    let channel = ChannelId::new(fake.new_id());
    let cases = [
        (Fault::RateLimited(Duration::from_millis(50)), false, 0),
        (Fault::ServerError, false, 0),
        (Fault::Timeout, true, 0),
        (Fault::ResetAfterProcessing, true, 1),
    ];
    fake.set_fault_hold(Duration::from_millis(600));
    for (fault, maybe_done, created) in cases {
        fake.set_faults(FaultPlan::new(1, 1.0).only(&[fault]));
        let before = fake.channel_messages(channel.get()).len();
        let err = DiscordApi::send_message(
            &http,
            channel,
            &frogbot_discord::format::reply_message("hi"),
        )
        .await
        .expect_err("a fault");
        fake.clear_faults();
        let t = Transient::find(&err).unwrap_or_else(|| panic!("{fault:?}: not transient: {err}"));
        assert_eq!(t.may_be_done(), maybe_done, "{fault:?}");
        assert_eq!(
            fake.channel_messages(channel.get()).len() - before,
            created,
            "{fault:?}"
        );
    }
    // A refused call stays permanent: editing a message that does not exist.
    let err = DiscordApi::edit_message(
        &http,
        channel,
        serenity::model::id::MessageId::new(42),
        &serenity::builder::EditMessage::new().content("x"),
    )
    .await
    .expect_err("unknown message");
    assert!(!Transient::is_transient(&err), "{err}");
    assert_eq!(err.discord_code(), Some(10008));
}

/// A plan failing its first call with `fault` and not its second.
fn first_call(fault: Fault) -> FaultPlan {
    let plan = |seed| FaultPlan::new(seed, 0.5).only(&[fault]);
    let seed = (0..1000)
        .find(|&seed| {
            let p = plan(seed);
            p.next().is_some() && p.next().is_none()
        })
        .expect("a seed");
    plan(seed)
}

#[tokio::test]
async fn opening_a_thread_is_retried_and_finds_the_one_an_earlier_attempt_opened() {
    let fake = FakeDiscord::start(APP, BOT).await;
    let mut config = fake.config();
    config.api_timeout = Duration::from_millis(300);
    let http = config.http().unwrap();
    let parent = fake.new_id();
    let alice = fake::user(300_000_000_000_000_003, "alice", false);
    for fault in [Fault::ServerError, Fault::ResetAfterProcessing] {
        let said = fake.user_message(parent, Some(GUILD), &alice, &format!("<@{BOT}> hello"));
        let message: serenity::model::channel::Message = serde_json::from_value(said).unwrap();
        fake.set_faults(first_call(fault));
        let thread =
            frogbot_discord::channel::receive::open_thread_with(&http, UserId::new(BOT), &message)
                .await
                .unwrap_or_else(|e| panic!("{fault:?}: {e}"));
        fake.clear_faults();
        // A thread started from a message has its id.
        assert_eq!(thread, message.id.to_string(), "{fault:?}");
    }
    // A permanent refusal is not retried.
    let said = fake.user_message(parent, Some(GUILD), &alice, "x");
    let message: serenity::model::channel::Message = serde_json::from_value(said).unwrap();
    fake.mark_thread(parent);
    let before = fake.calls().len();
    assert!(
        frogbot_discord::channel::receive::open_thread_with(&http, UserId::new(BOT), &message)
            .await
            .is_err()
    );
    assert_eq!(fake.calls().len() - before, 1);
}
