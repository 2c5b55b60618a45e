//! The traffic: chat workers (turns, queued and steering messages, questions and racing
//! settles), event stream listeners, the killer; then the end: every chat driven to rest and
//! checked.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use crate::Soak;
use crate::check::{self, Facts, Finding};
use crate::client::{Res, USERS, token};
use crate::fleet::slot_name;
use crate::ledger::{Answer, SettleRec, SettleResult};
use crate::stats::{get, inc};

/// The seeded kill times (from the start) and the process each kills.
pub(crate) fn kill_plan(
    seed: u64,
    traffic_for: Duration,
    min: f64,
    max: f64,
    processes: usize,
) -> Vec<(Duration, usize)> {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x6b69_6c6c);
    let mut t = 0.0;
    let mut plan = Vec::new();
    loop {
        t += min + rng.f64() * (max - min);
        if t >= traffic_for.as_secs_f64() {
            return plan;
        }
        plan.push((Duration::from_secs_f64(t), rng.usize(..processes)));
    }
}

/// Runs the traffic for `traffic_for` (or until Ctrl-C), then the end phase; the exit code.
pub(crate) async fn run(
    s: Arc<Soak>,
    seed: u64,
    traffic_for: Duration,
    plan: Vec<(Duration, usize)>,
    workers: usize,
    listeners: usize,
) -> ExitCode {
    let worker_tasks: Vec<_> = (0..workers)
        .map(|w| {
            let rng = fastrand::Rng::with_seed(seed.wrapping_add(1_000 + w as u64));
            tokio::spawn(worker(s.clone(), w, rng))
        })
        .collect();
    let listener_tasks: Vec<_> = (0..listeners)
        .map(|l| {
            let rng = fastrand::Rng::with_seed(seed.wrapping_add(2_000 + l as u64));
            tokio::spawn(listener(s.clone(), rng))
        })
        .collect();
    let killer = tokio::spawn(killer(s.clone(), plan));
    let reporter = tokio::spawn(crate::traffic::report_every(s.clone(), 10.0));

    // Ctrl-C once stops the traffic early (the end phase still runs); twice quits at once.
    let interrupted = Arc::new(tokio::sync::Notify::new());
    tokio::spawn({
        let interrupted = interrupted.clone();
        async move {
            if tokio::signal::ctrl_c().await.is_err() {
                return;
            }
            println!("interrupted: stopping the traffic early (Ctrl-C again quits at once)");
            interrupted.notify_one();
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("soak: interrupted");
                std::process::exit(130);
            }
        }
    });
    tokio::select! {
        _ = tokio::time::sleep(traffic_for) => {}
        _ = interrupted.notified() => {}
        _ = fatal(&s) => {}
    }
    s.stop.store(true, Ordering::SeqCst);
    println!(
        "[{:>5.0}s] traffic stopped; waiting for the requests in flight",
        s.now()
    );
    let _ = tokio::time::timeout(Duration::from_secs(120), killer).await;
    let bound = s.rest_bound() + Duration::from_secs(150);
    let deadline = tokio::time::Instant::now() + bound;
    let mut stragglers = 0;
    for mut t in worker_tasks {
        if tokio::time::timeout_at(deadline, &mut t).await.is_err() {
            // Stopped, so nothing changes a chat while the end phase reads it.
            t.abort();
            stragglers += 1;
        }
    }
    if stragglers > 0 {
        s.stats.anomaly(format!(
            "{stragglers} worker(s) still waiting after {bound:?}; stopped"
        ));
    }
    for t in listener_tasks {
        t.abort();
    }
    // Every process up for the end.
    for i in 0..s.fleet.len() {
        if s.fleet.base(i).is_none()
            && let Err(e) = s.fleet.restart(i).await
        {
            eprintln!("soak: {e}");
            return ExitCode::from(2);
        }
    }
    if let Some(e) = s.stats.fatal.lock().expect("lock").clone() {
        eprintln!("soak: {e}");
        return ExitCode::from(2);
    }
    let code = finish(&s).await;
    reporter.abort();
    code
}

async fn fatal(s: &Soak) {
    loop {
        if s.stats.fatal.lock().expect("lock").is_some() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

// ---- chat workers ------------------------------------------------------------------------------

/// One client: a chat at a time, a few actions each, driven to rest after every action and
/// checked when it is left.
async fn worker(s: Arc<Soak>, w: usize, mut rng: fastrand::Rng) {
    let mut n = 0;
    while !s.stopping() {
        n += 1;
        let chat = format!("{}-w{w}c{n}", s.run_id);
        let owner = rng.usize(..USERS);
        s.ledger.new_chat(&chat, owner);
        let mut next_id = 0;
        let mut replies = 0;
        let mut id = || {
            next_id += 1;
            format!("{chat}-m{next_id}")
        };
        for _ in 0..rng.usize(3..=10) {
            if s.stopping() {
                return;
            }
            let roll = rng.f64();
            if roll < 0.5 {
                let mid = id();
                let extra = if rng.f64() < 0.2 { " slow 0.3" } else { "" };
                let stream = rng.f64() < 0.25;
                let text = format!("soak msg={mid}{extra}");
                send(&s, &chat, owner, &mid, text, None, stream, &mut rng).await;
            } else if roll < 0.8 {
                let first = id();
                let more: Vec<String> = (0..rng.usize(1..=3)).map(|_| id()).collect();
                busy(&s, &chat, owner, first, more, &mut rng).await;
            } else {
                let mid = id();
                question(&s, &chat, owner, &mid, &mut rng).await;
            }
            let deadline = Instant::now() + s.rest_bound();
            if let Some(n) = drive_to_rest(&s, &chat, owner, deadline, &mut rng).await {
                // Turns are counted from the replies stored at rest (queued turns included).
                s.stats
                    .turns
                    .fetch_add(n.saturating_sub(replies) as u64, Ordering::Relaxed);
                replies = replies.max(n);
            } else if !s.stopping() {
                s.stats.anomaly(format!(
                    "chat {chat} did not come to rest within {:?} at {:.0}s (checked again at the end)",
                    s.rest_bound(),
                    s.now()
                ));
            }
            sleep_ms(rng.u64(0..150)).await;
        }
        let deadline = Instant::now() + s.rest_bound();
        if !s.stopping()
            && drive_to_rest(&s, &chat, owner, deadline, &mut rng)
                .await
                .is_some()
        {
            let (findings, _) = check_now(&s, &chat, &mut rng).await;
            for f in &findings {
                println!("[{:>5.0}s] {f}", s.now());
            }
            s.stats.found(findings);
            inc(&s.stats.live_checked);
        }
    }
}

/// A slow turn, and while it runs 1–3 more messages into the chat (steer or queue).
async fn busy(
    s: &Arc<Soak>,
    chat: &str,
    owner: usize,
    first: String,
    more: Vec<String>,
    rng: &mut fastrand::Rng,
) {
    let slow = format!("soak msg={first} slow {:.1}", 0.8 + rng.f64() * 1.5);
    let stream = rng.f64() < 0.25;
    let running = tokio::spawn({
        let (s, chat) = (s.clone(), chat.to_string());
        let mut rng = fastrand::Rng::with_seed(rng.u64(..));
        async move { send(&s, &chat, owner, &first, slow, None, stream, &mut rng).await }
    });
    sleep_ms(rng.u64(50..600)).await;
    for mid in more {
        let delivery = if rng.bool() { "steer" } else { "queue" };
        let ask = if rng.f64() < 0.15 { " ask" } else { "" };
        let text = format!("soak msg={mid}{ask}");
        send(s, chat, owner, &mid, text, Some(delivery), false, rng).await;
    }
    let _ = running.await;
}

/// A turn that asks a question, answered once or by two clients racing at both processes.
async fn question(s: &Arc<Soak>, chat: &str, owner: usize, mid: &str, rng: &mut fastrand::Rng) {
    let text = format!("soak msg={mid} ask");
    let sent = send(s, chat, owner, mid, text, None, false, rng).await;
    if !sent.accepted {
        return;
    }
    let deadline = Instant::now() + s.rest_bound();
    let calls = loop {
        if Instant::now() > deadline || s.stopping() {
            return;
        }
        let Some((_, base)) = s.fleet.pick(rng) else {
            sleep_ms(200).await;
            continue;
        };
        let res = s
            .api
            .get(
                &format!("{base}/api/chats/{chat}/pending"),
                owner,
                Duration::from_secs(10),
            )
            .await;
        match res {
            Res::Http { status: 200, body } => {
                let calls = body["calls"].as_array().cloned().unwrap_or_default();
                if !calls.is_empty() {
                    break calls;
                }
                if body["state"] == "idle" {
                    return; // interrupted before it asked; drive_to_rest sees the rest
                }
                sleep_ms(150).await;
            }
            _ => sleep_ms(200).await,
        }
    };
    for call in calls {
        let race = rng.f64() < 0.5;
        settle_call(s, chat, owner, &call, race, rng).await;
    }
}

/// What a send came to.
#[derive(Debug, Default, Clone, Copy)]
struct Sent {
    /// The API accepted the message.
    accepted: bool,
}

/// Sends one user message under id `mid`, retrying the same id on failures (a kill, a 5xx) until
/// an answer says whether it was accepted.
#[allow(clippy::too_many_arguments)]
async fn send(
    s: &Arc<Soak>,
    chat: &str,
    owner: usize,
    mid: &str,
    text: String,
    delivery: Option<&str>,
    stream: bool,
    rng: &mut fastrand::Rng,
) -> Sent {
    s.ledger.sending(chat, mid);
    let mut body = json!({"id": mid, "parts": [{"type": "text", "text": text}]});
    if let Some(d) = delivery {
        body["delivery"] = json!(d);
    }
    let fast = !text.contains(" slow ") && !text.ends_with(" ask") && !text.contains(" ask ");
    let deadline = Instant::now() + s.rest_bound() + Duration::from_secs(60);
    let mut last_failure = String::new();
    loop {
        if Instant::now() > deadline {
            s.stats.anomaly(format!(
                "send chat {chat} message {mid}: no answer within {:?} (last: {last_failure})",
                s.rest_bound() + Duration::from_secs(60)
            ));
            return Sent::default();
        }
        let Some((slot, base)) = s.fleet.pick(rng) else {
            sleep_ms(200).await;
            continue;
        };
        let attempt = s.ledger.attempt(chat, mid);
        if attempt == 2 {
            inc(&s.stats.retried);
        }
        let via = format!("via {} at {:.1}s", slot_name(slot), s.now());
        let url = format!("{base}/api/chats/{chat}/messages");
        let started = Instant::now();
        let res = if stream {
            match send_streamed(s, &url, owner, &body, chat, mid, &via, fast && attempt == 1).await
            {
                Streamed::Done => return Sent { accepted: true },
                Streamed::Answer(res) => res,
            }
        } else {
            s.api
                .post(&url, owner, &body, Duration::from_secs(120))
                .await
        };
        let code = res.code().to_string();
        match &res {
            Res::Failed(why) => {
                last_failure = why.clone();
                sleep_ms(rng.u64(100..400)).await;
            }
            Res::Http { status: 200, body } => {
                s.ledger.accepted(chat, mid, format!("200 {via}"), true);
                inc(&s.stats.accepted);
                if fast && attempt == 1 && body["state"] == "idle" {
                    let ms = started.elapsed().as_secs_f64() * 1000.0;
                    s.stats.reply_ms.lock().expect("lock").push((s.now(), ms));
                }
                return Sent { accepted: true };
            }
            Res::Http { status: 202, body } => {
                s.ledger.accepted(chat, mid, format!("202 {via}"), false);
                inc(&s.stats.accepted);
                inc(&s.stats.queued);
                if body["delivery"] == "steer" {
                    inc(&s.stats.steered);
                }
                return Sent { accepted: true };
            }
            Res::Http { status: 409, .. } if code == "duplicate-message" => {
                if attempt > 1 {
                    // An earlier request of this id stored it (and was cut off by a kill).
                    s.ledger.accepted(
                        chat,
                        mid,
                        format!("409 duplicate-message on request {attempt} {via}"),
                        false,
                    );
                    inc(&s.stats.accepted);
                    inc(&s.stats.retried_dups);
                    return Sent { accepted: true };
                }
                s.stats.anomaly(format!(
                    "send chat {chat} message {mid} {via}: 409 duplicate-message on the first request"
                ));
                return Sent::default();
            }
            Res::Http { status, .. } if *status >= 500 => {
                last_failure = format!("{status} {code}");
                if *status != 503 {
                    s.stats.anomaly(format!(
                        "send chat {chat} message {mid} {via}: {status} {code} (retried)"
                    ));
                }
                sleep_ms(rng.u64(300..1_000)).await;
            }
            Res::Http { status, .. } => {
                s.stats.anomaly(format!(
                    "send chat {chat} message {mid} {via}: {status} {code}"
                ));
                return Sent::default();
            }
        }
    }
}

enum Streamed {
    /// 200: accepted (recorded), the stream read to its end or cut off.
    Done,
    /// Another answer, or none.
    Answer(Res),
}

/// `POST …/messages` with `Accept: text/event-stream`: a 200 is recorded as accepted at once
/// (the message is stored before the stream starts); then the stream is read to `[DONE]`.
#[allow(clippy::too_many_arguments)]
async fn send_streamed(
    s: &Arc<Soak>,
    url: &str,
    owner: usize,
    body: &Value,
    chat: &str,
    mid: &str,
    via: &str,
    timed: bool,
) -> Streamed {
    let started = Instant::now();
    let sent = s
        .api
        .raw()
        .post(url)
        .bearer_auth(token(owner))
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(body.to_string())
        .timeout(Duration::from_secs(120))
        .send()
        .await;
    let mut r = match sent {
        Ok(r) => r,
        Err(e) => {
            let res = Res::Failed(crate::client::describe(&e));
            s.api.count(&res);
            return Streamed::Answer(res);
        }
    };
    let status = r.status().as_u16();
    if status != 200 {
        let res = match r.bytes().await {
            Ok(b) => Res::Http {
                status,
                body: serde_json::from_slice(&b).unwrap_or(Value::Null),
            },
            Err(e) => Res::Failed(crate::client::describe(&e)),
        };
        s.api.count(&res);
        return Streamed::Answer(res);
    }
    s.api.count(&Res::Http {
        status,
        body: Value::Null,
    });
    s.ledger
        .accepted(chat, mid, format!("200 stream {via}"), false);
    inc(&s.stats.accepted);
    let mut text = String::new();
    while let Ok(Some(bytes)) = r.chunk().await {
        text.push_str(&String::from_utf8_lossy(&bytes));
    }
    if text.contains("\"data-queued\"") {
        inc(&s.stats.queued);
        if text.contains("\"delivery\":\"steer\"") {
            inc(&s.stats.steered);
        }
    } else if text.contains("\"type\":\"start\"") {
        // It started a turn: it opens its turn in the stored order.
        s.ledger
            .accepted(chat, mid, format!("200 stream {via}"), true);
        if text.contains("\"type\":\"finish\"") && timed && !text.contains("tool-input-available") {
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            s.stats.reply_ms.lock().expect("lock").push((s.now(), ms));
        }
    }
    Streamed::Done
}

/// Answers `call` (a `pending` entry): once, or by two clients at once — at both processes —
/// with different answers.
async fn settle_call(
    s: &Arc<Soak>,
    chat: &str,
    owner: usize,
    call: &Value,
    race: bool,
    rng: &mut fastrand::Rng,
) {
    let Some(id) = call["toolCallId"].as_str() else {
        return;
    };
    let q = &call["input"]["questions"][0];
    let header = q["header"].as_str().unwrap_or("?").to_string();
    let labels: Vec<String> = q["options"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["label"].as_str().map(str::to_string))
        .collect();
    if labels.is_empty() {
        s.stats
            .anomaly(format!("chat {chat} call {id}: a question without options"));
        return;
    }
    let first = if rng.f64() < 0.1 {
        Answer::Dismiss
    } else {
        Answer::Pick(labels[rng.usize(..labels.len())].clone())
    };
    if !race {
        let slot = rng.usize(..s.fleet.len());
        settle_once(s, chat, owner, id, &header, first, slot).await;
        return;
    }
    let second = match &first {
        Answer::Dismiss => Answer::Pick(labels[rng.usize(..labels.len())].clone()),
        Answer::Pick(l) => {
            let others: Vec<&String> = labels.iter().filter(|x| *x != l).collect();
            if others.is_empty() || rng.f64() < 0.2 {
                Answer::Dismiss
            } else {
                Answer::Pick(others[rng.usize(..others.len())].clone())
            }
        }
    };
    let other_slot = 1 % s.fleet.len();
    let (a, b) = tokio::join!(
        settle_once(s, chat, owner, id, &header, first, 0),
        settle_once(s, chat, owner, id, &header, second, other_slot)
    );
    inc(&s.stats.races);
    if (a == SettleResult::Accepted) != (b == SettleResult::Accepted) {
        inc(&s.stats.races_one_winner);
    }
}

/// One settle through process `slot` (another when it is down), retried on failures and 5xx;
/// recorded in the ledger.
async fn settle_once(
    s: &Arc<Soak>,
    chat: &str,
    owner: usize,
    call: &str,
    header: &str,
    answer: Answer,
    slot: usize,
) -> SettleResult {
    let body = match &answer {
        Answer::Pick(label) => {
            json!({"toolCallId": call, "output": {"answers": [{"header": header, "selected": [label]}]}})
        }
        Answer::Dismiss => json!({"toolCallId": call, "dismissed": true}),
    };
    let mut rng = fastrand::Rng::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut attempts = 0;
    let result = loop {
        if Instant::now() > deadline {
            break SettleResult::Unknown;
        }
        let (slot, base) = match s.fleet.base(slot) {
            Some(b) => (slot, b),
            None => match s.fleet.pick(&mut rng) {
                Some(p) => p,
                None => {
                    sleep_ms(200).await;
                    continue;
                }
            },
        };
        attempts += 1;
        let via = format!("settle via {} at {:.1}s", slot_name(slot), s.now());
        let started = Instant::now();
        let res = s
            .api
            .post(
                &format!("{base}/api/chats/{chat}/settle"),
                owner,
                &body,
                Duration::from_secs(30),
            )
            .await;
        let code = res.code().to_string();
        let result = match res.status() {
            None => None,
            Some(200) => {
                let expected = match answer {
                    Answer::Dismiss => "dismissed",
                    Answer::Pick(_) => "answered",
                };
                if let Res::Http { body, .. } = &res
                    && body["outcome"] != expected
                {
                    s.stats.anomaly(format!(
                        "settle chat {chat} call {call} ({answer}) {via}: 200 with outcome {}",
                        body["outcome"]
                    ));
                }
                if attempts == 1 {
                    let ms = started.elapsed().as_secs_f64() * 1000.0;
                    s.stats.settle_ms.lock().expect("lock").push((s.now(), ms));
                }
                inc(&s.stats.settles_ok);
                Some(SettleResult::Accepted)
            }
            Some(409) if code == "stale" => {
                inc(&s.stats.settles_stale);
                Some(SettleResult::Stale)
            }
            Some(st) if st >= 500 => None,
            Some(st) => {
                s.stats.anomaly(format!(
                    "settle chat {chat} call {call} ({answer}) {via}: {st} {code}"
                ));
                Some(SettleResult::Other(st))
            }
        };
        match result {
            Some(r) => {
                s.ledger.settled(
                    chat,
                    SettleRec {
                        call: call.to_string(),
                        answer: answer.clone(),
                        result: r.clone(),
                        via,
                    },
                );
                break r;
            }
            None => sleep_ms(rng.u64(100..500)).await,
        }
    };
    if result == SettleResult::Unknown {
        s.ledger.settled(
            chat,
            SettleRec {
                call: call.to_string(),
                answer,
                result: SettleResult::Unknown,
                via: "no answer".into(),
            },
        );
    }
    result
}

/// Waits until the chat is idle with every user message replied to, answering the questions it
/// waits on: the number of replies then stored, or `None` at `deadline`.
async fn drive_to_rest(
    s: &Arc<Soak>,
    chat: &str,
    owner: usize,
    deadline: Instant,
    rng: &mut fastrand::Rng,
) -> Option<usize> {
    loop {
        if Instant::now() > deadline {
            return None;
        }
        let Some((_, base)) = s.fleet.pick(rng) else {
            sleep_ms(200).await;
            continue;
        };
        let res = s
            .api
            .get(
                &format!("{base}/api/chats/{chat}"),
                owner,
                Duration::from_secs(10),
            )
            .await;
        match res {
            Res::Http { status: 200, body } => match body["state"].as_str() {
                Some("idle") if check::unreplied(&body).is_empty() => {
                    let replies = body["messages"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|m| m["role"] == "assistant")
                        .count();
                    return Some(replies);
                }
                Some("awaiting") => {
                    let pending = s
                        .api
                        .get(
                            &format!("{base}/api/chats/{chat}/pending"),
                            owner,
                            Duration::from_secs(10),
                        )
                        .await;
                    if let Res::Http { status: 200, body } = pending {
                        for call in body["calls"].as_array().into_iter().flatten() {
                            settle_call(s, chat, owner, call, false, rng).await;
                        }
                    }
                    sleep_ms(100).await;
                }
                _ => sleep_ms(250).await,
            },
            Res::Http { status: 404, .. } => {
                let accepted = s
                    .ledger
                    .chat(chat)
                    .is_some_and(|c| c.messages.iter().any(|m| m.accepted.is_some()));
                if !accepted {
                    return Some(0); // nothing was ever stored
                }
                sleep_ms(250).await;
            }
            _ => sleep_ms(200).await,
        }
    }
}

/// Reads the chat (retrying failures for 30 s) and checks it against the ledger.
async fn check_now(s: &Arc<Soak>, chat: &str, rng: &mut fastrand::Rng) -> (Vec<Finding>, Facts) {
    let Some(rec) = s.ledger.chat(chat) else {
        return (Vec::new(), Facts::default());
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        if let Some((_, base)) = s.fleet.pick(rng) {
            match s
                .api
                .get(
                    &format!("{base}/api/chats/{chat}"),
                    rec.owner,
                    Duration::from_secs(10),
                )
                .await
            {
                Res::Http { status: 200, body } => break Some(body),
                Res::Http { status: 404, .. } => break None,
                _ => {}
            }
        }
        if Instant::now() > deadline {
            s.stats
                .anomaly(format!("chat {chat}: could not be read for the check"));
            return (Vec::new(), Facts::default());
        }
        sleep_ms(200).await;
    };
    check::check_chat(chat, &rec, body.as_ref())
}

// ---- event stream listeners --------------------------------------------------------------------

/// Opens live event streams on recent chats through either process: following (reads at once),
/// slow (a chunk every few seconds) or idle (never reads), 5–30 s each.
async fn listener(s: Arc<Soak>, mut rng: fastrand::Rng) {
    while !s.stopping() {
        let (Some((chat, owner)), Some((_, base))) =
            (s.ledger.recent(&mut rng), s.fleet.pick(&mut rng))
        else {
            sleep_ms(500).await;
            continue;
        };
        let mode = rng.usize(..3);
        let end = Instant::now() + Duration::from_secs_f64(5.0 + rng.f64() * 25.0);
        let opened = s
            .api
            .raw()
            .get(format!("{base}/api/chats/{chat}/events"))
            .bearer_auth(token(owner))
            .header("accept", "text/event-stream")
            .send()
            .await;
        let mut r = match opened {
            Ok(r) if r.status() == 200 => r,
            Ok(r) => {
                let status = r.status().as_u16();
                s.api.count(&Res::Http {
                    status,
                    body: Value::Null,
                });
                if status == 429 {
                    inc(&s.stats.sse_refused);
                } else {
                    s.stats.anomaly(format!("events of chat {chat}: {status}"));
                }
                sleep_ms(500).await;
                continue;
            }
            Err(e) => {
                s.api.count(&Res::Failed(crate::client::describe(&e)));
                sleep_ms(300).await;
                continue;
            }
        };
        s.api.count(&Res::Http {
            status: 200,
            body: Value::Null,
        });
        s.stats.sse_open.fetch_add(1, Ordering::Relaxed);
        let mut pending = String::new();
        while !s.stopping() && Instant::now() < end {
            let left = end.saturating_duration_since(Instant::now());
            if mode == 2 {
                tokio::time::sleep(left.min(Duration::from_millis(500))).await;
                continue;
            }
            match tokio::time::timeout(left.min(Duration::from_secs(1)), r.chunk()).await {
                Err(_) => {}
                Ok(Ok(Some(bytes))) => {
                    pending.push_str(&String::from_utf8_lossy(&bytes));
                    // Whole lines only: every `data:` line is one JSON event.
                    while let Some(end) = pending.find('\n') {
                        let line: String = pending.drain(..=end).collect();
                        let Some(data) = line.trim_end().strip_prefix("data:") else {
                            continue;
                        };
                        inc(&s.stats.sse_events);
                        if serde_json::from_str::<Value>(data.trim()).is_err() {
                            s.stats.anomaly(format!(
                                "events of chat {chat}: a data line that is not JSON: {data:?}"
                            ));
                        }
                    }
                    if mode == 1 {
                        sleep_ms(rng.u64(1_000..4_000)).await;
                    }
                }
                Ok(_) => {
                    inc(&s.stats.sse_broken);
                    break;
                }
            }
        }
        s.stats.sse_open.fetch_sub(1, Ordering::Relaxed);
    }
}

// ---- kills ---------------------------------------------------------------------------------------

/// SIGKILLs by plan, each process restarted half a second later.
async fn killer(s: Arc<Soak>, plan: Vec<(Duration, usize)>) {
    for (n, (at, slot)) in plan.into_iter().enumerate() {
        loop {
            if s.stopping() {
                return;
            }
            let now = s.started.elapsed();
            if now >= at {
                break;
            }
            tokio::time::sleep((at - now).min(Duration::from_millis(200))).await;
        }
        let t = s.now();
        let Some(pid) = s.fleet.kill(slot).await else {
            continue;
        };
        inc(&s.stats.kills);
        sleep_ms(500).await;
        match s.fleet.restart(slot).await {
            Ok(new) => println!(
                "[{t:>5.0}s] kill #{}: {} (pid {pid}) SIGKILLed; restarted as pid {new} after {:.1}s",
                n + 1,
                slot_name(slot),
                s.now() - t
            ),
            Err(e) => {
                *s.stats.fatal.lock().expect("lock") = Some(format!("restart after a kill: {e}"));
                return;
            }
        }
    }
}

// ---- reports -------------------------------------------------------------------------------------

/// One line of figures every `every` seconds.
async fn report_every(s: Arc<Soak>, every: f64) {
    let mut last = (0.0, 0u64, 0u64);
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + Duration::from_secs_f64(every),
        Duration::from_secs_f64(every),
    );
    loop {
        tick.tick().await;
        let t = s.now();
        let requests = s.api.counters.requests.load(Ordering::Relaxed);
        let turns = get(&s.stats.turns);
        let dt = (t - last.0).max(1e-9);
        let rss: Vec<Option<u64>> = (0..s.fleet.len()).map(|i| s.fleet.rss_kb(i)).collect();
        s.stats.rss.lock().expect("lock").push((t, rss.clone()));
        let (loss, dup) = s.stats.counts();
        println!(
            "[{t:>5.0}s] {:.1} req/s {:.1} turns/s | send→reply {} | settle {} | RSS {} | kills {} | loss {loss} dup {dup} | streams {} open, {} events | no answer {}, 5xx {}, odd {}",
            (requests - last.1) as f64 / dt,
            (turns - last.2) as f64 / dt,
            crate::stats::latency(&s.stats.reply_ms, last.0),
            crate::stats::latency(&s.stats.settle_ms, last.0),
            crate::stats::rss_line(&rss),
            get(&s.stats.kills),
            s.stats.sse_open.load(Ordering::Relaxed),
            get(&s.stats.sse_events),
            s.api.counters.failed.load(Ordering::Relaxed),
            s.api.counters.server_errors.load(Ordering::Relaxed),
            get(&s.stats.anomaly_count),
        );
        last = (t, requests, turns);
    }
}

/// The end: every chat driven to rest (bounded), every chat checked, the summary; the exit code.
async fn finish(s: &Arc<Soak>) -> ExitCode {
    let traffic_secs = s.now();
    let chats = s.ledger.all();
    println!(
        "[{traffic_secs:>5.0}s] driving {} chats to rest (at most {:?})",
        chats.len(),
        s.rest_bound() + Duration::from_secs(30)
    );
    let deadline = Instant::now() + s.rest_bound() + Duration::from_secs(30);
    let not_at_rest: Vec<String> = futures::stream::iter(chats.iter().enumerate())
        .map(|(i, (chat, rec))| {
            let s = s.clone();
            async move {
                let mut rng = fastrand::Rng::with_seed(i as u64);
                drive_to_rest(&s, chat, rec.owner, deadline, &mut rng)
                    .await
                    .is_none()
                    .then(|| chat.clone())
            }
        })
        .buffer_unordered(8)
        .filter_map(|x| async move { x })
        .collect()
        .await;
    let rest_secs = s.now() - traffic_secs;
    let results: Vec<(Vec<Finding>, Facts)> = futures::stream::iter(chats.iter().enumerate())
        .map(|(i, (chat, _))| {
            let s = s.clone();
            async move {
                let mut rng = fastrand::Rng::with_seed(i as u64);
                check_now(&s, chat, &mut rng).await
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let mut findings = Vec::new();
    let mut facts = Facts::default();
    for (f, x) in results {
        findings.extend(f);
        facts.user += x.user;
        facts.replies += x.replies;
        facts.interrupted += x.interrupted;
        facts.failed += x.failed;
        facts.joined += x.joined;
    }
    let st = &s.stats;
    let requests = s.api.counters.requests.load(Ordering::Relaxed);
    println!();
    println!(
        "==== soak: {:.1} min of traffic, {} process(es), {} kills; {} chats driven to rest in {:.0}s",
        traffic_secs / 60.0,
        s.fleet.len(),
        get(&st.kills),
        chats.len() - not_at_rest.len(),
        rest_secs
    );
    println!(
        "throughput: {requests} requests ({:.1}/s); stored: {} user messages, {} replies = turns ({:.1}/s)",
        requests as f64 / traffic_secs,
        facts.user,
        facts.replies,
        facts.replies as f64 / traffic_secs
    );
    println!(
        "send→reply {} | settle {}",
        crate::stats::latency(&st.reply_ms, 0.0),
        crate::stats::latency(&st.settle_ms, 0.0)
    );
    println!(
        "messages: {} accepted ({} queued/steering, {} of them steer), {} needed a retry, {} retries answered 409 duplicate-message; replies interrupted by kills {}, failed otherwise {}, steers joined {}",
        get(&st.accepted),
        get(&st.queued),
        get(&st.steered),
        get(&st.retried),
        get(&st.retried_dups),
        facts.interrupted,
        facts.failed,
        facts.joined
    );
    println!(
        "settles: {} accepted, {} stale; {} races, {} with exactly one winner",
        get(&st.settles_ok),
        get(&st.settles_stale),
        get(&st.races),
        get(&st.races_one_winner)
    );
    println!(
        "event streams: {} data lines, {} refused (429), {} cut off; requests without an answer {}, 5xx {}",
        get(&st.sse_events),
        get(&st.sse_refused),
        get(&st.sse_broken),
        s.api.counters.failed.load(Ordering::Relaxed),
        s.api.counters.server_errors.load(Ordering::Relaxed),
    );
    let rss = st.rss.lock().expect("lock").clone();
    if !rss.is_empty() {
        println!("RSS over time (each minute, and the last sample):");
        let mut shown = 0.0;
        for (i, (t, sample)) in rss.iter().enumerate() {
            if *t >= shown || i + 1 == rss.len() {
                println!("  {t:>6.0}s  {}", crate::stats::rss_line(sample));
                shown = (t / 60.0).floor() * 60.0 + 60.0;
            }
        }
        for p in 0..s.fleet.len() {
            let vals: Vec<u64> = rss.iter().filter_map(|(_, v)| v[p]).collect();
            if let (Some(min), Some(max)) = (vals.iter().min(), vals.iter().max()) {
                println!(
                    "  {}: min {:.1}MB max {:.1}MB",
                    slot_name(p),
                    *min as f64 / 1024.0,
                    *max as f64 / 1024.0
                );
            }
        }
    }
    for (i, (lines, path)) in s.fleet.logged().into_iter().enumerate() {
        if lines > 0 {
            println!(
                "{} logged {lines} warning/error line(s): {}",
                slot_name(i),
                path.display()
            );
        }
    }
    let anomalies = st.anomalies.lock().expect("lock").clone();
    if !anomalies.is_empty() {
        println!(
            "unexpected answers ({}; not losses by themselves):",
            get(&st.anomaly_count)
        );
        for a in &anomalies {
            println!("  {a}");
        }
    }
    if !not_at_rest.is_empty() {
        println!("chats not at rest at the end ({}):", not_at_rest.len());
        for c in not_at_rest.iter().take(20) {
            println!("  {c}");
        }
    }
    // Findings seen while the run went on that the end no longer shows.
    let live = st.findings.lock().expect("lock").clone();
    let gone: Vec<&Finding> = live
        .iter()
        .filter(|l| !findings.iter().any(|f| f.to_string() == l.to_string()))
        .collect();
    if !gone.is_empty() {
        println!(
            "seen during the run, no longer at the end ({}):",
            gone.len()
        );
        for f in gone {
            println!("  {f}");
        }
    }
    let loss = findings
        .iter()
        .filter(|f| f.kind == check::Kind::Loss)
        .count();
    let dup = findings.len() - loss;
    for f in &findings {
        println!("{f}");
    }
    println!(
        "loss {loss}, duplicates {dup} ({} chats checked, {} checked during the run)",
        chats.len(),
        get(&st.live_checked)
    );
    if findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
