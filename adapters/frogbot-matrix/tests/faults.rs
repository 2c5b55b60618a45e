//! Replies delivered through a homeserver that fails a seeded fraction of sends
//! (`frogbot_model::faults`): each piece goes under a transaction id made from its delivery key,
//! so the homeserver deduplicates what a retry sends again; 200 replies through 20 % faults show
//! every piece once, in order.

#![recursion_limit = "256"]

use std::sync::Arc;
use std::time::Duration;

use frogbot_core::agent::{ChannelOutbox, Delivery};
use frogbot_core::model::Thread;
use frogbot_matrix::channel::MatrixOutbox;
use frogbot_matrix::channel::outbox::MESSAGE_CHARS;
use frogbot_matrix::testing::FakeHomeserver;
use frogbot_model::faults::{Fault, FaultPlan};
use frogbot_model::{BoxError, Transient, UiMessage};
use matrix_sdk::ruma::{OwnedRoomId, OwnedUserId};
use serde_json::{Value, json};

fn reply(text: &str) -> UiMessage {
    serde_json::from_value(json!({
        "id": "m1", "role": "assistant", "parts": [{"type": "text", "text": text}]
    }))
    .expect("a reply")
}

fn person(name: &str) -> OwnedUserId {
    OwnedUserId::try_from(format!("@{name}:fake.test")).unwrap()
}

/// A DM with a person's message: its thread.
fn thread(fake: &FakeHomeserver, name: &str) -> (OwnedRoomId, String, Thread) {
    let who = person(name);
    let room = fake.create_room(&[&who]);
    let root = fake.inject(
        &room,
        &who,
        "m.room.message",
        json!({"msgtype": "m.text", "body": "hi"}),
    );
    let thread = Thread {
        id: format!("{room}|{root}"),
        platform: "matrix".into(),
        chat_id: format!("chat-{name}"),
    };
    (room, root.to_string(), thread)
}

/// The bot's messages in the thread on `root`, in order.
fn shown(fake: &FakeHomeserver, room: &OwnedRoomId, root: &str) -> Vec<Value> {
    fake.events(room)
        .into_iter()
        .filter(|e| {
            e["sender"] == fake.bot().as_str()
                && e["type"] == "m.room.message"
                && e["content"]["m.relates_to"]["event_id"] == root
        })
        .collect()
}

fn transient(e: &BoxError) -> &Transient {
    Transient::find(e.as_ref()).unwrap_or_else(|| panic!("not transient: {e}"))
}

/// Delivers `reply` the way the engine does: again after a transient failure, with the same
/// key, the next attempt, after the server's wait (or a short backoff).
async fn deliver<A>(
    outbox: &MatrixOutbox<A>,
    thread: &Thread,
    reply: &UiMessage,
    key: String,
) -> u32
where
    A: frogbot_matrix::MatrixApi + Clone + 'static,
{
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
async fn a_rate_limit_past_the_clients_retries_is_transient_with_the_servers_wait() {
    let fake = FakeHomeserver::start().await;
    let (room, root, thread) = thread(&fake, "alice");
    // The client's first sync shows it the room.
    let outbox = MatrixOutbox::new(fake.client().await);
    let wait = Duration::from_millis(20);
    fake.inject_faults(Arc::new(
        FaultPlan::new(1, 1.0)
            .only(&[Fault::RateLimited(wait)])
            .rate_limit_wait(wait),
    ));
    let e = outbox
        .deliver(&thread, &reply("hello"), &Delivery::new("deliver:k:1:a"))
        .await
        .expect_err("every try limited");
    assert_eq!(transient(&e).wait(), Some(wait), "{e}");
    assert!(shown(&fake, &room, &root).is_empty());
    // A 500 every time: transient, no wait given.
    fake.inject_faults(Arc::new(FaultPlan::new(1, 1.0).only(&[Fault::ServerError])));
    let e = outbox
        .deliver(&thread, &reply("hello"), &Delivery::new("deliver:k:1:a"))
        .await
        .expect_err("every try fails");
    assert_eq!(transient(&e).wait(), None, "{e}");
    // A refusal is permanent: an unknown room.
    fake.inject_faults(Arc::new(FaultPlan::none()));
    let elsewhere = Thread {
        id: "!nowhere:fake.test|$root".into(),
        ..thread.clone()
    };
    let e = outbox
        .deliver(&elsewhere, &reply("hello"), &Delivery::new("deliver:k:2:a"))
        .await
        .expect_err("no such room");
    assert!(!Transient::is_transient(e.as_ref()), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_delivery_posts_nothing_twice() {
    let fake = FakeHomeserver::start().await;
    let (room, root, thread) = thread(&fake, "alice");
    // The client's first sync shows it the room.
    let outbox = MatrixOutbox::new(fake.client().await);
    // Several pieces; every send is carried out and its answer lost, so each try of matrix-sdk
    // and of the engine sends again under the same transaction id.
    let long = "frog ".repeat(MESSAGE_CHARS / 5 * 2 + 100);
    fake.inject_faults(Arc::new(
        FaultPlan::new(1, 1.0).only(&[Fault::ResetAfterProcessing]),
    ));
    let mut delivery = Delivery::new("deliver:k:9:a");
    for _ in 0..3 {
        let e = outbox
            .deliver(&thread, &reply(&long), &delivery)
            .await
            .expect_err("no answer");
        assert!(transient(&e).may_be_done(), "{e}");
        delivery.attempt += 1;
    }
    assert_eq!(shown(&fake, &room, &root).len(), 1, "the first piece, once");
    fake.inject_faults(Arc::new(FaultPlan::none()));
    outbox
        .deliver(&thread, &reply(&long), &delivery)
        .await
        .unwrap();
    let shown = shown(&fake, &room, &root);
    let pieces = outbox.pieces(&long).len();
    assert!(pieces >= 3, "{pieces}");
    assert_eq!(shown.len(), pieces, "every piece, once");
    let words: usize = shown
        .iter()
        .map(|e| {
            e["content"]["body"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .count()
        })
        .sum();
    assert_eq!(words, MESSAGE_CHARS / 5 * 2 + 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_replies_through_20_percent_faults_arrive_once_in_order() {
    const ROOMS: usize = 10;
    const REPLIES: usize = 200;
    let fake = FakeHomeserver::start().await;
    let threads: Vec<_> = (0..ROOMS)
        .map(|i| thread(&fake, &format!("p{i}")))
        .collect();
    let outbox = Arc::new(MatrixOutbox::new(fake.client().await));
    let plan = Arc::new(FaultPlan::new(18, 0.2));
    fake.inject_faults(plan.clone());
    // Reply n goes to room n % ROOMS; every 7th is long (two messages).
    let text = |n: usize| -> String {
        if n.is_multiple_of(7) {
            (0..MESSAGE_CHARS / 8 + 10)
                .map(|i| format!("r{n}w{i} "))
                .collect()
        } else {
            (0..5).map(|i| format!("r{n}w{i} ")).collect()
        }
    };
    let mut tasks = Vec::new();
    for (i, (_, _, thread)) in threads.iter().cloned().enumerate() {
        let outbox = outbox.clone();
        tasks.push(tokio::spawn(async move {
            let mut retries = 0;
            for n in (0..REPLIES).filter(|n| n % ROOMS == i) {
                let key = format!("deliver:{i}:{n}:a");
                retries += deliver(&outbox, &thread, &reply(&text(n)), key).await;
            }
            retries
        }));
    }
    let mut retries = 0;
    for t in tasks {
        retries += t.await.expect("a room's deliveries");
    }
    let mut messages = 0;
    let mut long = 0;
    for (i, (room, root, _)) in threads.iter().enumerate() {
        let shown = shown(&fake, room, root);
        messages += shown.len();
        let got: Vec<String> = shown
            .iter()
            .flat_map(|e| {
                e["content"]["body"]
                    .as_str()
                    .unwrap()
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        let expected: Vec<String> = (0..REPLIES)
            .filter(|n| n % ROOMS == i)
            .flat_map(|n| {
                long += usize::from(n.is_multiple_of(7));
                text(n)
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(got, expected, "room {i}: every piece once, in order");
    }
    let (errors, limited, timeouts, resets) = plan.counts();
    println!(
        "matrix: {REPLIES} replies ({long} long), {messages} messages, {} faults (500: {errors}, \
         429: {limited}, timeouts: {timeouts}, resets: {resets}), {retries} engine retries, \
         0 duplicates",
        plan.injected()
    );
    assert!(plan.injected() >= 20, "faults were injected");
    assert!(resets > 0, "resets after processing were injected");
}
