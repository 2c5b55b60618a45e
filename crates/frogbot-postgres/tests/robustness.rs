//! Races between processes, a client killed with SIGKILL mid-stream, and a database that goes away.

mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use frogbot_core::StoreError;
use frogbot_core::model::{Delivery, QuestionOutcome};
use frogbot_core::store::*;
use frogbot_postgres::{PostgresStore, StoreOptions};

const RACE_URL: &str = "FROGBOT_PG_RACE_CHILD_URL";

/// Starts this test binary again as a second process running only `test`, which acts because
/// `var` (the database URL) is set; its stdin and stdout are piped to the caller.
fn spawn_self(test: &str, var: &str, url: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(var, url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the second process")
}

/// Fires 16 concurrent `record_outcome` calls on question `call-{trial}` of chat `race`, the
/// `i`-th of them as call `2 * i + parity` of the 32 (mixed outcomes, fences and lock requests);
/// returns how many won. Panics on anything but `Won` / `Settled`.
async fn race_sixteen(s: DynStore, trial: usize, parity: usize) -> usize {
    let c = chat("race");
    let call = format!("call-{trial}");
    let mut tasks = Vec::new();
    for i in (0..32).filter(|i| i % 2 == parity) {
        let (s, c, call) = (s.clone(), c.clone(), call.clone());
        tasks.push(tokio::spawn(async move {
            let holder = format!("h{i}");
            // Some continue the turn in the same transaction (an HTTP settle does).
            let resume = (i % 3 == 1).then(|| LeaseRequest {
                holder: format!("r{i}"),
                driver: None,
                ttl_ms: 5000,
                now: T0 + 1,
                interrupted: None,
            });
            let outcome = if i % 4 == 0 {
                QuestionOutcome::Dismissed
            } else {
                answer("yes")
            };
            s.record_outcome(&RecordOp {
                chat: &c,
                tool_call_id: &call,
                outcome: &outcome,
                actor: None,
                // Some fenced by the revision they read, some not (HTTP settle, expiry).
                expected_revision: (i % 3 != 0).then_some(0),
                lock: (i % 5 == 0).then_some(LockRequest {
                    holder: &holder,
                    ttl_ms: 5000,
                }),
                resume: resume.as_ref(),
                now: T0 + 1,
            })
            .await
            .unwrap()
        }));
    }
    let mut won = 0;
    for t in tasks {
        match t.await.unwrap() {
            Recorded::Won { resumed, .. } => {
                won += 1;
                // No turn waits on this question: nothing to continue.
                assert!(
                    matches!(resumed, None | Some(Resume::NotWaiting)),
                    "{resumed:?}"
                );
            }
            Recorded::Settled { question } => assert!(question.outcome.is_some()),
            other => panic!("trial {trial}: {other:?}"),
        }
    }
    won
}

/// The second process of [`thirty_two_concurrent_outcomes_one_winner_each_trial`]: for each trial
/// number read from stdin, its 16 calls; prints `WON {trial} {count}`. Does nothing unless started
/// by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_child_answers() {
    let Ok(url) = std::env::var(RACE_URL) else {
        return;
    };
    let s = open(&url, false).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<usize>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { return };
            if tx
                .send(line.trim().parse().expect("a trial number"))
                .is_err()
            {
                return;
            }
        }
    });
    while let Some(trial) = rx.recv().await {
        let won = race_sixteen(s.clone(), trial, 1).await;
        let mut out = std::io::stdout().lock();
        writeln!(out, "WON {trial} {won}").unwrap();
        out.flush().unwrap();
    }
}

/// 100 trials: 32 concurrent `record_outcome` calls on one question from two real processes (this
/// test and a child copy of this binary, 16 each, started together per trial): exactly one wins
/// each time, the others see it settled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_concurrent_outcomes_one_winner_each_trial() {
    let Some(db) = frogbot_testdb::postgres_db() else {
        return;
    };
    let a = open(&db.url, false).await; // migrations applied before the child starts
    let mut child = spawn_self("race_child_answers", RACE_URL, &db.url);
    let mut to_child = child.stdin.take().unwrap();
    let mut from_child = BufReader::new(child.stdout.take().unwrap());
    let c = chat("race");
    let mut child_wins = 0;
    for trial in 0..100 {
        let call = format!("call-{trial}");
        a.insert_questions(&[new_question(&c, &call, "a1", 0)], T0)
            .await
            .unwrap();
        writeln!(to_child, "{trial}").unwrap();
        to_child.flush().unwrap();
        let ours = race_sixteen(a.clone(), trial, 0).await;
        // The child's answer for this trial (the harness may print on the same line).
        let theirs = tokio::task::block_in_place(|| {
            let mut line = String::new();
            loop {
                line.clear();
                assert!(
                    from_child.read_line(&mut line).unwrap() > 0,
                    "the second process ended early"
                );
                if let Some(at) = line.find("WON ") {
                    let mut f = line[at + 4..].split_whitespace();
                    let t: usize = f.next().unwrap().parse().unwrap();
                    assert_eq!(t, trial, "the second process answers in order");
                    return f.next().unwrap().parse::<usize>().unwrap();
                }
            }
        });
        child_wins += theirs;
        assert_eq!(ours + theirs, 1, "trial {trial}: exactly one outcome wins");
    }
    drop(to_child);
    let status = child.wait().unwrap();
    assert!(status.success(), "the second process failed: {status:?}");
    // Both processes took part: neither side won every trial by being alone.
    eprintln!("the second process won {child_wins} of 100 trials");
}

/// A `send` racing the `end_turn` of the running turn (and each other) never leaves a message
/// queued behind a released lease: either the turn's end promotes it, or the send finds the chat
/// idle and starts its own turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_racing_end_turn_never_strands_a_queued_message() {
    let Some(db) = frogbot_testdb::postgres_db() else {
        return;
    };
    let a = open(&db.url, false).await;
    let b = open(&db.url, false).await;
    let mut promoted = 0;
    let mut started = 0;
    for trial in 0..150 {
        let nc = web_chat(&format!("r{trial}"), None);
        let Sent::Started { lease, .. } = send(
            &*a,
            &nc,
            &user_msg("u0", None, "go"),
            Delivery::Queue,
            "p0",
            T0,
        )
        .await
        else {
            panic!()
        };
        let mut tasks = Vec::new();
        for i in 0..3 {
            let (b, nc) = (b.clone(), nc.clone());
            tasks.push(tokio::spawn(async move {
                let m = user_msg(&format!("m{i}"), None, "more");
                matches!(
                    send(
                        &*b,
                        &nc,
                        &m,
                        Delivery::Queue,
                        &format!("p{}", i + 1),
                        T0 + 1
                    )
                    .await,
                    Sent::Started { .. }
                )
            }));
        }
        let ender = {
            let a = a.clone();
            tokio::spawn(async move {
                a.end_turn(&EndTurnOp {
                    lease: &lease,
                    reply: Some((&assistant_msg("a0", "done"), 1)),
                    mode: EndMode::Next,
                    now: T0 + 1,
                    delivery: None,
                })
                .await
                .unwrap()
            })
        };
        for t in tasks {
            started += usize::from(t.await.unwrap());
        }
        if matches!(ender.await.unwrap(), TurnEnded::Promoted { .. }) {
            promoted += 1;
        }
        let row = a.get_chat(&nc.chat_id).await.unwrap().unwrap();
        let queued = a.queued_messages(&nc.chat_id).await.unwrap();
        assert!(
            row.lease.is_some() || queued.is_empty(),
            "trial {trial}: {} message(s) queued behind a released lease",
            queued.len()
        );
        let order: Vec<_> = a
            .list_messages(&nc.chat_id)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|m| m.position)
            .collect();
        let mut sorted = order.clone();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            order.len() - 1,
            "trial {trial}: one turn per position: {order:?}"
        );
    }
    eprintln!(
        "{promoted} turn ends promoted a racing message, {started} racing sends started a turn"
    );
}

const KILL_URL: &str = "FROGBOT_PG_KILL_CHILD_URL";

/// The child of [`sigkill_mid_stream_loses_no_acknowledged_send`]: concurrent sends, each
/// acknowledged message printed the moment its call returns. Does nothing unless started by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_child_sends() {
    let Ok(url) = std::env::var(KILL_URL) else {
        return;
    };
    let s = open(&url, false).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut tasks = Vec::new();
    for t in 0..24 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            // Eight chats: some sends start turns, most queue behind them.
            let nc = web_chat(&format!("k{}", t % 8), None);
            for i in 0..100_000 {
                if Instant::now() > deadline {
                    return;
                }
                let id = format!("t{t}-{i}");
                let sent = send(
                    &*s,
                    &nc,
                    &user_msg(&id, None, "x"),
                    Delivery::Queue,
                    &id,
                    T0 + i,
                )
                .await;
                assert!(matches!(sent, Sent::Started { .. } | Sent::Queued { .. }));
                let mut out = std::io::stdout().lock();
                writeln!(out, "ACK {} {id}", nc.chat_id).unwrap();
                out.flush().unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// A client process is SIGKILLed while it sends: every message it acknowledged is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_stream_loses_no_acknowledged_send() {
    let Some(db) = frogbot_testdb::postgres_db() else {
        return;
    };
    let s = open(&db.url, false).await; // migrations applied before the child starts
    let mut child = spawn_self("sigkill_child_sends", KILL_URL, &db.url);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut acked = Vec::new();
    let mut line = String::new();
    let started = Instant::now();
    let mut killed = false;
    loop {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        // Only whole lines: the acknowledgement was printed in full.
        // (The test harness prints its own words too, sometimes on the same line.)
        if let Some(l) = line.strip_suffix('\n')
            && let Some(at) = l.find("ACK ")
            && let Some((c, id)) = l[at + 4..].split_once(' ')
        {
            acked.push((c.to_string(), id.to_string()));
        }
        if !killed && (acked.len() >= 1500 || started.elapsed() > Duration::from_secs(45)) {
            child.kill().unwrap(); // SIGKILL
            killed = true;
        }
    }
    let status = child.wait().unwrap();
    assert!(killed, "the child ended before it was killed: {status:?}");
    assert!(!status.success(), "killed: {status:?}");
    assert!(
        acked.len() >= 100,
        "only {} sends acknowledged",
        acked.len()
    );
    let mut missing = Vec::new();
    let mut seen = HashSet::new();
    for (c, id) in &acked {
        assert!(seen.insert(id.clone()), "acknowledged twice: {id}");
        if s.get_message(&chat(c), id).await.unwrap().is_none() {
            missing.push(id.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged sends are missing: {missing:?}",
        missing.len(),
        acked.len()
    );
    // Every chat is consistent: each turn position holds one user message.
    for k in 0..8 {
        let msgs = s.list_messages(&chat(&format!("k{k}"))).await.unwrap();
        let mut positions: Vec<_> = msgs.iter().filter_map(|m| m.position).collect();
        let n = positions.len();
        positions.dedup();
        assert_eq!(positions.len(), n, "k{k}: one message per turn position");
    }
    eprintln!("{} acknowledged sends, all stored", acked.len());
}

/// A database dropped under a live store: operations fail with `StoreError::Unavailable` saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_database_is_a_storage_error() {
    let Some(db) = frogbot_testdb::postgres_db() else {
        return;
    };
    let options = StoreOptions {
        max_connections: 4,
        acquire_timeout: Duration::from_secs(3),
    };
    let s = open_with(&db.url, false, options).await;
    let nc = web_chat("gone", None);
    send(
        &*s,
        &nc,
        &user_msg("u1", None, "hi"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await;
    frogbot_testdb::drop_postgres_db(&db.url).await;
    // Connections the server cut fail once each (closed by the server); then every operation
    // says the database is gone.
    let mut messages = Vec::new();
    for _ in 0..6 {
        let got = s.get_chat(&chat("gone")).await;
        let Err(StoreError::Unavailable { message: msg, .. }) = got else {
            panic!("expected a storage error, got {got:?}")
        };
        assert!(msg.contains("127.0.0.1"), "{msg}");
        messages.push(msg);
    }
    let req = lease_req("p2", None, T0);
    let got = s
        .send(&SendOp {
            chat: &nc,
            message: &user_msg("u2", None, "again"),
            delivery: Delivery::Queue,
            lease: &req,
            queue_if_busy: true,
        })
        .await;
    let Err(StoreError::Unavailable { message: msg, .. }) = got else {
        panic!("expected a storage error, got {got:?}")
    };
    assert!(
        msg.contains("is gone") && msg.contains("does not exist"),
        "the message says the database is gone: {msg}"
    );
    for m in &messages {
        assert!(
            m.contains("closed the connection") || m.contains("is gone"),
            "a clear message: {m}"
        );
    }
    eprintln!("{messages:#?}\n{msg}");
}

/// No server at the address: `open` fails with `StoreError::Unavailable`, naming the address, never the
/// password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_a_storage_error_without_the_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://frogbot:hunter2-s3cret@127.0.0.1:{port}/frogbot");
    let options = StoreOptions {
        max_connections: 2,
        acquire_timeout: Duration::from_millis(800),
    };
    let got = PostgresStore::open_with(&url, options).await;
    let Err(StoreError::Unavailable { message: msg, .. }) = got else {
        panic!("expected a storage error, got {got:?}")
    };
    assert!(!msg.contains("hunter2"), "{msg}");
    assert!(msg.contains(&format!("127.0.0.1:{port}")), "{msg}");
    eprintln!("{msg}");
    let bad = PostgresStore::open("postgres://frogbot:hunter2@127.0.0.1:notaport/x").await;
    let Err(StoreError::Unavailable { message: msg, .. }) = bad else {
        panic!("expected a storage error, got {bad:?}")
    };
    assert!(!msg.contains("hunter2"), "{msg}");
}

/// A stored document that no longer parses is `StoreError::Corrupt`, not a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_json_is_reported_as_corrupt() {
    let Some(db) = frogbot_testdb::postgres_db() else {
        return;
    };
    let raw = PostgresStore::open(&db.url).await.unwrap();
    let s: DynStore = Arc::new(raw.clone());
    let nc = web_chat("bad", None);
    send(
        &*s,
        &nc,
        &user_msg("u1", None, "hi"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await;
    sqlx::query("UPDATE messages SET body = '{not json' WHERE id = 'u1'")
        .execute(raw.pool())
        .await
        .unwrap();
    let got = s.get_message(&chat("bad"), "u1").await;
    assert!(matches!(got, Err(StoreError::Corrupt { .. })), "{got:?}");
    let got = s.list_messages(&chat("bad")).await;
    assert!(matches!(got, Err(StoreError::Corrupt { .. })), "{got:?}");
}

/// A database made by the old store (migrations 0001 and 0002 in sqlx's table) upgrades with 0003
/// when opened: versions start at 0, a question's revision column takes its record's revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_database_upgrades_with_0003() {
    let Some(db) = frogbot_testdb::postgres_db() else {
        return;
    };
    let old = std::env::temp_dir().join(format!("frogbot-pg-old-{}", std::process::id()));
    std::fs::create_dir_all(&old).unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    for f in ["0001_init.sql", "0002_sweeps.sql"] {
        std::fs::copy(dir.join(f), old.join(f)).unwrap();
    }
    let pool = sqlx::postgres::PgPool::connect(&db.url).await.unwrap();
    sqlx::migrate::Migrator::new(old.as_path())
        .await
        .unwrap()
        .run(&pool)
        .await
        .unwrap();
    std::fs::remove_dir_all(&old).ok();
    sqlx::raw_sql(
        "INSERT INTO chats (chat_id, created_at, updated_at) VALUES ('old', 1, 1); \
         INSERT INTO questions (chat_id, tool_call_id, message_id, call_index, input, record, \
            created_at, updated_at, expires_at) \
         VALUES ('old', 'c1', 'a1', 0, '{\"questions\":[]}', \
            '{\"messages\":[{\"id\":\"m1\",\"postedAt\":\"\"}],\"revision\":3}', 1, 1, 9e15)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let s = open(&db.url, false).await;
    assert_eq!(s.get_chat(&chat("old")).await.unwrap().unwrap().version, 0);
    let q = s
        .get_question(&chat("old"), "c1", T0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(q.record.revision, 3);
    let rev: i64 = sqlx::query_scalar("SELECT revision FROM questions WHERE tool_call_id = 'c1'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rev, 3);
    // Fenced by it: an answer read at revision 3 wins.
    let won = s
        .record_outcome(&RecordOp {
            chat: &chat("old"),
            tool_call_id: "c1",
            outcome: &answer("yes"),
            actor: None,
            expected_revision: Some(3),
            lock: None,
            resume: None,
            now: T0,
        })
        .await
        .unwrap();
    assert!(matches!(won, Recorded::Won { .. }), "{won:?}");
}

/// Sixteen first messages racing on a new channel chat (one id, one thread): the channel thread's
/// unique index is no second arbiter of errors — every send gets in, one starts the turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_first_messages_of_a_channel_chat_all_get_in() {
    let Some(db) = frogbot_testdb::postgres_db() else {
        return;
    };
    let a = open(&db.url, false).await;
    let b = open(&db.url, false).await;
    for trial in 0..40 {
        let mut tasks = Vec::new();
        for i in 0..16 {
            let s = if i % 2 == 0 { a.clone() } else { b.clone() };
            let nc = NewChat {
                chat_id: chat(&format!("_t{trial}")),
                owner: Some(user(&format!("u{i}"))),
                channel: Some(frogbot_core::model::ChannelRef {
                    platform: "slack".into(),
                    thread: format!("C:{trial}"),
                }),
            };
            tasks.push(tokio::spawn(async move {
                let m = user_msg(&format!("m{i}"), Some(&format!("u{i}")), "x");
                let req = lease_req(&format!("p{i}"), Some(&format!("u{i}")), T0);
                s.send(&SendOp {
                    chat: &nc,
                    message: &m,
                    delivery: Delivery::Queue,
                    lease: &req,
                    queue_if_busy: true,
                })
                .await
            }));
        }
        let mut started = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(Sent::Started { .. }) => started += 1,
                Ok(Sent::Queued { .. }) => {}
                other => panic!("trial {trial}: {other:?}"),
            }
        }
        assert_eq!(started, 1, "trial {trial}");
    }
}
