//! Delivery under injected faults (issue 18): the fake Slack fails 20 % of its write calls (500,
//! 429 with `Retry-After`, no answer until the client times out, the connection reset after the
//! message WAS posted); replies go through `ChannelOutbox::deliver` with a retry loop like the
//! engine's (same delivery key, `attempt + 1`, waiting the `Transient`'s wait). Every piece must
//! arrive exactly once, in order, in its thread. Also: load shedding in HTTP mode (`503` past
//! `max_pending`), and the stream defects (a failed `chat.stopStream` leaves the stream open; an
//! edit of a still-open stream stops it first).

use std::sync::Arc;
use std::time::{Duration, Instant};

use frogbot_core::agent::{ChannelOutbox, Delivery};

use frogbot_channel::Adapter;
use frogbot_model::faults::FaultPlan;
use frogbot_model::{Thread, Transient, UiMessage};
use frogbot_slack::channel::SlackAdapter;
use frogbot_slack::testing::{BOT_USER, FakeSlack, Signature};
use frogbot_slack::{PLATFORM, SlackApi};
use serde_json::json;

fn reply(text: &str) -> UiMessage {
    serde_json::from_value(json!({"id": "r", "role": "assistant",
                                  "parts": [{"type": "text", "text": text}]}))
    .expect("a reply")
}

fn thread(fake: &FakeSlack, channel: &str) -> Thread {
    let root = fake.user_message(channel, None, "U1", &format!("<@{BOT_USER}> hi"));
    let id = root.id();
    Thread {
        chat_id: format!("chat-{id}"),
        id,
        platform: PLATFORM.into(),
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

/// Reply `r` of a thread: every fourth is long enough for three pieces.
fn text_of(t: usize, r: usize) -> String {
    if r % 4 == 3 {
        (0..3)
            .map(|p| format!("t{t} r{r} piece {p}: {}", "frog ".repeat(7_000)))
            .collect::<Vec<_>>()
            .join("\n\n")
    } else {
        format!("thread {t}, reply {r}")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_piece_arrives_exactly_once_in_order_under_faults() {
    let fake = FakeSlack::start().await;
    let mut config = fake.http_config();
    config.api_timeout = Duration::from_millis(300);
    let slack = frogbot_slack::channel::connect(config).await.unwrap();
    fake.set_fault_hold(Duration::from_millis(900));
    let plan = fake.set_faults(FaultPlan::new(18, 0.2));
    const THREADS: usize = 20;
    const REPLIES: usize = 10;
    let threads: Vec<Thread> = (0..THREADS)
        .map(|t| thread(&fake, &format!("C{t:03}")))
        .collect();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (t, th) in threads.iter().cloned().enumerate() {
        let outbox: Arc<dyn ChannelOutbox> = Arc::new(slack.clone());
        tasks.push(tokio::spawn(async move {
            let mut attempts = 0;
            for r in 0..REPLIES {
                let key = format!("deliver:{}:m{r}:0", th.chat_id.replace([':', '.'], "-"));
                attempts += deliver(outbox.as_ref(), &th, &reply(&text_of(t, r)), &key).await;
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

    let outbox: &dyn ChannelOutbox = &slack;
    let mut pieces = 0;
    for (t, th) in threads.iter().enumerate() {
        let mut expected = Vec::new();
        for r in 0..REPLIES {
            let d = Delivery::new(format!(
                "deliver:{}:m{r}:0",
                th.chat_id.replace([':', '.'], "-")
            ));
            let n = frogbot_slack::format::messages(&text_of(t, r), 39_000).len();
            assert_eq!(n, if r % 4 == 3 { 3 } else { 1 }, "reply {r}'s pieces");
            expected.extend((0..n).map(|i| d.piece_key(i)));
        }
        pieces += expected.len();
        assert_eq!(
            fake.thread_keys(&th.id),
            expected,
            "thread {t}: every piece once, in order"
        );
        // The texts too: each posted message is the piece its key names.
        let texts: Vec<String> = fake
            .thread_messages(&th.id)
            .into_iter()
            .filter(|m| m.bot)
            .map(|m| m.text)
            .collect();
        let want: Vec<String> = (0..REPLIES)
            .flat_map(|r| frogbot_slack::format::messages(&text_of(t, r), 39_000))
            .collect();
        assert_eq!(texts, want, "thread {t}: the texts");
    }
    let _ = outbox;
    let (e500, e429, timeouts, resets) = plan.counts();
    println!(
        "slack faults: {} replies, {pieces} pieces in {THREADS} threads; {} faults injected \
         (500: {e500}, 429: {e429}, timeout: {timeouts}, reset after posting: {resets}); \
         {attempts} deliver attempts; {} chat.postMessage carried out; {:.1?}",
        THREADS * REPLIES,
        plan.injected(),
        fake.calls("chat.postMessage").len(),
        elapsed
    );
    assert!(
        resets > 0 && timeouts > 0 && e429 > 0 && e500 > 0,
        "every fault drawn"
    );
    assert!(
        attempts as usize > THREADS * REPLIES,
        "some deliveries were retried"
    );
}

#[tokio::test]
async fn a_retry_skips_the_pieces_an_earlier_attempt_posted() {
    let fake = FakeSlack::start().await;
    let slack = frogbot_slack::channel::connect(fake.http_config())
        .await
        .unwrap();
    let th = thread(&fake, "C1");
    let text = text_of(0, 3);
    let key = "deliver:chat-1:m1:0";
    // The first attempt posted piece 0 only (then failed).
    let d = Delivery::new(key);
    let first = &frogbot_slack::format::messages(&text, 39_000)[0];
    let api = fake.client(frogbot_slack::testing::BOT_TOKEN);
    let (channel, root) = th.id.split_once(':').unwrap();
    let first_ts = api
        .post_keyed(channel, root, first, "frogbot_delivery", &d.piece_key(0))
        .await
        .unwrap();
    let retry = Delivery {
        attempt: 1,
        ..d.clone()
    };
    let ids = slack.deliver(&th, &reply(&text), &retry).await.unwrap();
    assert_eq!(
        fake.thread_keys(&th.id),
        [d.piece_key(0), d.piece_key(1), d.piece_key(2)]
    );
    // The ids of all three pieces, the one posted before included: what an edit needs.
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert_eq!(ids[0], format!("{channel}:{first_ts}"));
    assert!(ids.iter().all(|id| id.starts_with(&format!("{channel}:"))));
    let reads = fake.calls("conversations.replies");
    assert_eq!(reads.len(), 1);
    assert_eq!(reads[0].body["include_all_metadata"], "true");
    // A first attempt does not read the thread.
    slack
        .deliver(&th, &reply("again"), &Delivery::new("deliver:chat-1:m2:0"))
        .await
        .unwrap();
    assert_eq!(fake.calls("conversations.replies").len(), 1);
}

#[tokio::test]
async fn a_429_is_transient_with_slacks_retry_after_and_a_reset_may_be_done() {
    let fake = FakeSlack::start().await;
    let api = fake
        .client(frogbot_slack::testing::BOT_TOKEN)
        .with_retry(frogbot_slack::RetryPolicy {
            attempts: 1,
            ..Default::default()
        })
        .with_timeout(Duration::from_millis(200));
    let th = thread(&fake, "C1");
    let (channel, root) = th.id.split_once(':').unwrap();
    use frogbot_model::faults::Fault;
    let cases = [
        (
            Fault::RateLimited(Duration::from_millis(1500)),
            Some(Duration::from_secs(2)),
            false,
            0,
        ),
        (Fault::ServerError, None, false, 0),
        (Fault::Timeout, None, true, 0),
        (Fault::ResetAfterProcessing, None, true, 1),
    ];
    for (fault, wait, maybe_done, posted) in cases {
        fake.set_fault_hold(Duration::from_millis(600));
        fake.set_faults(FaultPlan::new(1, 1.0).only(&[fault]));
        let before = fake.calls("chat.postMessage").len();
        let err = api
            .post_message(channel, Some(root), vec![], "hello")
            .await
            .expect_err("a fault");
        fake.clear_faults();
        let t = Transient::find(&err).unwrap_or_else(|| panic!("{fault:?}: not transient: {err}"));
        assert_eq!(t.wait(), wait, "{fault:?}");
        assert_eq!(t.may_be_done(), maybe_done, "{fault:?}");
        assert_eq!(
            fake.calls("chat.postMessage").len() - before,
            posted,
            "{fault:?}"
        );
    }
    // A permanent error stays permanent.
    fake.fail_method("chat.postMessage", Some("channel_not_found"));
    let err = api
        .post_message(channel, Some(root), vec![], "hello")
        .await
        .expect_err("refused");
    assert!(!Transient::is_transient(&err), "{err}");
}

/// A plan failing its first call (a 429 asking to wait 1 s) and not its second.
fn first_call_rate_limited() -> impl Fn() -> FaultPlan {
    use frogbot_model::faults::Fault;
    let plan =
        |seed| FaultPlan::new(seed, 0.5).only(&[Fault::RateLimited(Duration::from_millis(1000))]);
    let seed = (0..1000)
        .find(|&seed| {
            let p = plan(seed);
            p.next().is_some() && p.next().is_none()
        })
        .expect("a seed");
    move || plan(seed)
}

#[tokio::test]
async fn updates_are_retried_by_the_client_waiting_retry_after() {
    let fake = FakeSlack::start().await;
    let api = fake.client(frogbot_slack::testing::BOT_TOKEN);
    let th = thread(&fake, "C1");
    let (channel, root) = th.id.split_once(':').unwrap();
    let ts = api
        .post_message(channel, Some(root), vec![], "v1")
        .await
        .unwrap();
    let plan = fake.set_faults(first_call_rate_limited()());
    api.update_message(channel, &ts, vec![], "v2")
        .await
        .expect("the client waited Retry-After and retried the update");
    assert_eq!(plan.counts().1, 1, "one 429");
    let updates = fake.calls("chat.update");
    assert_eq!(updates.len(), 1, "the retry carried it out");
    assert_eq!(fake.message(&format!("{channel}:{ts}")).unwrap().text, "v2");
    // A post is retried the same way: the 429 said nothing was done.
    let plan = fake.set_faults(first_call_rate_limited()());
    api.post_message(channel, Some(root), vec![], "once")
        .await
        .unwrap();
    assert_eq!(plan.counts().1, 1);
    let once: Vec<_> = fake
        .thread_messages(&th.id)
        .into_iter()
        .filter(|m| m.text == "once")
        .collect();
    assert_eq!(once.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_mode_answers_503_past_max_pending_and_slacks_retry_is_processed() {
    let fake = FakeSlack::start().await;
    let mut config = fake.http_config().with_allow(["someone-else"]);
    config.max_pending = 2;
    config.ack_deadline = Duration::from_millis(200);
    let slack = frogbot_slack::channel::connect(config).await.unwrap();
    let db = frogbot_testkit::sqlite_db();
    let store = frogbot_testkit::open_store(&db.url).await;
    let engine = frogbot_testkit::engine_with(
        store,
        frogbot_core::agent::scripted::ScriptedModel::new(
            |_: &frogbot_core::agent::ModelRequest| frogbot_core::agent::scripted::reply("hi"),
        ),
    )
    .with_channel(slack.channel());
    let app = slack.routes(&engine.handle()).expect("HTTP routes");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    // A denied author is told so (`chat.postEphemeral`): held, the handler blocks there.
    fake.hold("chat.postEphemeral");
    let mention = |channel: &str| {
        let m = fake.user_message(channel, None, "U9", &format!("<@{BOT_USER}> hello"));
        fake.event_callback(fake.mention_event(&m))
    };
    for c in ["C1", "C2"] {
        let res = fake
            .post_event(&base, &mention(c), Signature::Good, None)
            .await;
        // Acknowledged at the deadline, still pending.
        assert_eq!(res.status(), 200);
    }
    let third = mention("C3");
    let res = fake.post_event(&base, &third, Signature::Good, None).await;
    assert_eq!(
        res.status(),
        503,
        "past max_pending the delivery is refused"
    );
    fake.release("chat.postEphemeral");
    frogbot_testkit::eventually(
        "the held deliveries end",
        Duration::from_secs(20),
        async || fake.ephemerals().len() == 2,
    )
    .await;
    // Slack's retry of the refused delivery (same event_id) is processed, not taken for a
    // duplicate.
    frogbot_testkit::eventually("the retry is taken", Duration::from_secs(20), async || {
        fake.post_event(&base, &third, Signature::Good, Some(1))
            .await
            .status()
            == 200
    })
    .await;
    frogbot_testkit::eventually(
        "the retry is processed",
        Duration::from_secs(20),
        async || fake.ephemerals().iter().any(|e| e.channel == "C3"),
    )
    .await;
}

async fn stream_world() -> (FakeSlack, SlackAdapter, Thread) {
    let fake = FakeSlack::start().await;
    let slack = frogbot_slack::channel::connect(fake.http_config())
        .await
        .unwrap();
    let th = thread(&fake, "C1");
    (fake, slack, th)
}

#[tokio::test]
async fn a_failed_stop_leaves_the_stream_open_and_a_retry_stops_it() {
    let (fake, slack, th) = stream_world().await;
    let mut stream = slack.start_stream(&th).await.unwrap().expect("a stream");
    stream.show("Partial. More").await.unwrap();
    let id = stream.message_ids()[0].clone();
    fake.fail_method("chat.stopStream", Some("invalid_arguments"));
    assert!(stream.finish("Partial. More answer").await.is_err());
    assert!(fake.message(&id).unwrap().streaming);
    fake.fail_method("chat.stopStream", None);
    stream.finish("Partial. More answer").await.unwrap();
    let m = fake.message(&id).unwrap();
    assert!(!m.streaming, "the retried finish stopped the stream");
    assert_eq!(m.text, "Partial. More answer");
}

/// The first streamed message is the one a person is notified of: a fragment ("got:") is held
/// until the text reads as a start (a sentence here), then the stream starts with all of it.
#[tokio::test]
async fn a_streamed_replys_first_message_waits_for_a_start() {
    let (fake, slack, th) = stream_world().await;
    let mut stream = slack.start_stream(&th).await.unwrap().expect("a stream");
    stream.show("got:").await.unwrap();
    assert!(stream.message_ids().is_empty() && !stream.visible());
    assert!(fake.calls("chat.startStream").is_empty());
    stream.show("got: the answer. And").await.unwrap();
    assert!(stream.visible());
    let starts = fake.calls("chat.startStream");
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0].body["markdown_text"], "got: the answer. And");
    // A reply that never reads as a start is posted at its end.
    let mut short = slack.start_stream(&th).await.unwrap().expect("a stream");
    short.show("ok").await.unwrap();
    assert!(short.message_ids().is_empty());
    short.finish("ok").await.unwrap();
    assert_eq!(fake.message(&short.message_ids()[0]).unwrap().text, "ok");
}

#[tokio::test]
async fn editing_a_still_open_stream_stops_it_first() {
    let (fake, slack, th) = stream_world().await;
    let mut stream = slack.start_stream(&th).await.unwrap().expect("a stream");
    stream.show("Cut off. Then").await.unwrap();
    let id = stream.message_ids()[0].clone();
    assert!(fake.message(&id).unwrap().streaming);
    // The process that streamed it is gone; the engine leaves the text with a mark.
    slack
        .edit_message(th.message(&id), "Cut off. Then _(interrupted)_")
        .await
        .expect("the edit of an open stream");
    let m = fake.message(&id).unwrap();
    assert!(!m.streaming);
    assert_eq!(m.blocks[0]["text"], "Cut off. Then _(interrupted)_");
    // A message that never streamed is edited too.
    slack
        .edit_message(th.message(&id), "edited again")
        .await
        .expect("the edit of a stopped message");
}
