//! The store conformance suite on SQLite (a temporary file per test; the second handle opens the
//! same file, as a second process would), and what only this backend promises: group commit, a
//! failing operation rolled back alone, adoption of sqlx-migrated databases, durability of every
//! answered write through a `kill -9`, and clear errors.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use frogbot_core::StoreError;
use frogbot_core::model::{ChatId, Delivery, MessageMetadata, MessagePart, Role, UiMessage};
use frogbot_core::store::*;
use frogbot_sqlite::SqliteStore;
use frogbot_store_conformance::{Db, Reopen};

async fn fresh() -> Option<Db> {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("frogbot.db");
    let store = SqliteStore::open_path(&path).await.expect("open");
    let reopen: Reopen = Arc::new(move || {
        let path = path.clone();
        Box::pin(async move {
            Arc::new(SqliteStore::open_path(&path).await.expect("reopen")) as DynStore
        })
    });
    Some(Db::new(Arc::new(store), reopen, dir))
}

frogbot_store_conformance::store_conformance_tests!(fresh);

// ---- helpers -------------------------------------------------------------------------------------

const T0: i64 = 1_800_000_000_000;

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("frogbot.db");
    (dir, path)
}

fn web(id: &str) -> NewChat {
    NewChat {
        chat_id: ChatId::new(id).unwrap(),
        owner: None,
        channel: None,
    }
}

fn user_msg(id: &str) -> UiMessage {
    UiMessage {
        id: id.into(),
        role: Role::User,
        parts: vec![MessagePart::text(id)],
        metadata: MessageMetadata::default(),
    }
}

async fn send(
    s: &SqliteStore,
    chat: &str,
    id: &str,
    now: i64,
) -> frogbot_core::store::Result<Sent> {
    let req = LeaseRequest {
        holder: format!("h-{id}"),
        driver: None,
        ttl_ms: 3_600_000,
        now,
        interrupted: None,
    };
    s.send(&SendOp {
        chat: &web(chat),
        message: &user_msg(id),
        delivery: Delivery::Queue,
        lease: &req,
        queue_if_busy: true,
    })
    .await
}

/// Holds SQLite's write lock from outside the store (as another process would) until dropped.
fn take_write_lock(path: &Path) -> frogbot_testdb::SqliteWriteLock {
    frogbot_testdb::lock_sqlite(&format!("sqlite://{}", path.display()))
}

// ---- group commit --------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_batches_concurrent_operations() {
    let (_dir, path) = temp_db();
    let store = SqliteStore::open_path(&path).await.unwrap();
    let before = store.stats();
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let s = store.clone();
            tokio::spawn(async move { send(&s, &format!("c{i}"), "m", T0).await.unwrap() })
        })
        .collect();
    for t in tasks {
        assert!(matches!(t.await.unwrap(), Sent::Started { .. }));
    }
    let after = store.stats();
    let (commits, operations) = (
        after.commits - before.commits,
        after.operations - before.operations,
    );
    assert_eq!(operations, 64, "every operation is counted once");
    assert!(
        commits < operations,
        "64 concurrent operations share commits: {commits} commits"
    );
    // Reads do not go through the writer.
    store.list_chats(None, 100).await.unwrap();
    assert_eq!(store.stats(), after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_operation_is_rolled_back_alone() {
    let (_dir, path) = temp_db();
    let store = SqliteStore::open_path(&path).await.unwrap();
    // Setup: a running turn (its lease is then taken over) and a question.
    let Sent::Started { lease: old, .. } = send(&store, "fenced", "u1", T0).await.unwrap() else {
        panic!()
    };
    store.expire_lease(&old, T0).await.unwrap();
    send(&store, "fenced", "u2", T0 + 1).await.unwrap();
    let chat = ChatId::new("q").unwrap();
    store
        .insert_questions(
            &[NewQuestion {
                tool_call_id: "call-1".into(),
                chat_id: chat.clone(),
                message_id: "a1".into(),
                call_index: 0,
                input: frogbot_core::model::QuestionInput {
                    questions: vec![],
                    expires_in_seconds: None,
                    from: Vec::new(),
                    blocks: Vec::new(),
                },
                answer_deadline: None,
            }],
            T0,
        )
        .await
        .unwrap();

    // Another process holds the write lock: the writer blocks in BEGIN IMMEDIATE with a first
    // operation, and everything sent meanwhile waits for the next batch.
    let lock = take_write_lock(&path);
    let blocker = {
        let s = store.clone();
        tokio::spawn(async move { send(&s, "blocker", "b1", T0).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = store.stats();
    let mut oks = Vec::new();
    for i in 0..8 {
        let s = store.clone();
        oks.push(tokio::spawn(async move {
            send(&s, &format!("ok{i}"), "m", T0).await
        }));
    }
    // Writes the first call, then fails on the missing second one.
    let partial = {
        let (s, chat) = (store.clone(), chat.clone());
        tokio::spawn(async move {
            let calls = [
                RenderedCall {
                    tool_call_id: "call-1".into(),
                    record: frogbot_core::model::QuestionRecord {
                        messages: vec![frogbot_core::model::QuestionMessage {
                            id: "m1".into(),
                            posted_at: String::new(),
                            question: None,
                        }],
                        revision: 0,
                        state: None,
                    },
                },
                RenderedCall {
                    tool_call_id: "call-9".into(),
                    record: frogbot_core::model::QuestionRecord {
                        messages: vec![frogbot_core::model::QuestionMessage {
                            id: "m9".into(),
                            posted_at: String::new(),
                            question: None,
                        }],
                        revision: 0,
                        state: None,
                    },
                },
            ];
            s.mark_rendered(&RenderedOp {
                chat: &chat,
                platform: "forum",
                calls: &calls,
                now: T0 + 1,
            })
            .await
        })
    };
    // Fenced by a lease that was taken over.
    let fenced = {
        let (s, old) = (store.clone(), old.clone());
        tokio::spawn(async move {
            s.end_turn(&EndTurnOp {
                lease: &old,
                reply: Some((&user_msg("late"), 1)),
                mode: EndMode::Next,
                now: T0 + 2,
                delivery: None,
            })
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(lock);
    assert!(blocker.await.unwrap().is_ok());
    for t in oks {
        assert!(matches!(t.await.unwrap(), Ok(Sent::Started { .. })));
    }
    assert!(matches!(
        partial.await.unwrap(),
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        fenced.await.unwrap(),
        Err(StoreError::LeaseLost { .. })
    ));
    let after = store.stats();
    assert_eq!(
        (
            after.commits - before.commits,
            after.operations - before.operations
        ),
        (2, 11),
        "two batches: the blocker's, then the ten operations (the two that failed among them) \
         in one commit"
    );
    for i in 0..8 {
        let chat = ChatId::new(format!("ok{i}")).unwrap();
        assert!(store.get_message(&chat, "m").await.unwrap().is_some());
    }
    let q = store
        .get_question(&chat, "call-1", T0 + 1)
        .await
        .unwrap()
        .unwrap();
    assert!(
        !q.rendered,
        "the failing operation's first write was rolled back"
    );
    assert!(
        store
            .questions_by_platform_message("forum", "m1", T0 + 1)
            .await
            .unwrap()
            .is_empty()
    );
    let fenced_chat = ChatId::new("fenced").unwrap();
    assert!(
        store
            .get_message(&fenced_chat, "late")
            .await
            .unwrap()
            .is_none()
    );
}

// ---- opening -------------------------------------------------------------------------------------

/// The sqlx store's bookkeeping table, as sqlx creates it.
const SQLX_TABLE: &str = "CREATE TABLE _sqlx_migrations (
    version BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    success BOOLEAN NOT NULL,
    checksum BLOB NOT NULL,
    execution_time BIGINT NOT NULL
)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_migrated_by_sqlx_is_adopted() {
    let (_dir, path) = temp_db();
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("PRAGMA journal_mode = WAL").unwrap();
        c.execute_batch(SQLX_TABLE).unwrap();
        c.execute_batch(include_str!("../migrations/0001_init.sql"))
            .unwrap();
        c.execute_batch(include_str!("../migrations/0002_sweeps.sql"))
            .unwrap();
        c.execute_batch(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (1, 'init', TRUE, x'00', 1), (2, 'sweeps', TRUE, x'00', 1);
             INSERT INTO chats (chat_id, owner, created_at, updated_at)
             VALUES ('old', NULL, 1, 2);
             INSERT INTO messages (chat_id, id, role, author, queued, delivery, position, sub, body,
                                   created_at, updated_at)
             VALUES ('old', 'u1', 'user', 'alice', FALSE, 'queue', 1, 0,
                     '{\"id\":\"u1\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"hello\"}],\"metadata\":{\"author\":\"alice\",\"createdAt\":\"\"}}', 1, 1),
                    ('old', 'q1', 'user', 'alice', TRUE, 'queue', NULL, 0,
                     '{\"id\":\"q1\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"later\"}],\"metadata\":{\"author\":\"alice\",\"createdAt\":\"\"}}', 2, 2);
             INSERT INTO questions (chat_id, tool_call_id, message_id, call_index, input, record,
                                    created_at, updated_at, expires_at)
             VALUES ('old', 'call-1', 'a1', 0, '{\"questions\":[]}',
                     '{\"messages\":[{\"id\":\"m1\",\"postedAt\":\"\"}],\"revision\":2}', 1, 1, 9000000000000);",
        )
        .unwrap();
        let v: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, 0, "sqlx leaves user_version alone");
    }
    let store = SqliteStore::open_path(&path).await.expect("adopt");
    let chat = ChatId::new("old").unwrap();
    let row = store
        .get_chat(&chat)
        .await
        .unwrap()
        .expect("the chat is kept");
    assert_eq!((row.owner, row.created_at, row.updated_at), (None, 1, 2));
    assert_eq!(row.version, 0, "0003 added the version");
    let messages = store.list_messages(&chat).await.unwrap();
    assert_eq!(
        messages
            .iter()
            .map(|m| m.message.text())
            .collect::<Vec<_>>(),
        ["hello", "later"]
    );
    assert!(messages[1].queued);
    let q = store
        .get_question(&chat, "call-1", T0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(q.record.revision, 2);
    // The store works on it: a new message gets the next version.
    // The old chat has no lease: a message starts a turn at position 2.
    let Sent::Started {
        message,
        chat: after,
        ..
    } = send(&store, "old", "u2", T0).await.unwrap()
    else {
        panic!("an idle chat")
    };
    assert_eq!(message.position, Some(2));
    assert_eq!((message.version, after.version), (1, 1));
    let Sent::Queued {
        message,
        chat: after,
        ..
    } = send(&store, "old", "u3", T0 + 1).await.unwrap()
    else {
        panic!("a turn runs")
    };
    assert_eq!((message.version, after.version), (2, 2));
    drop(store);
    let c = rusqlite::Connection::open(&path).unwrap();
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 7, "only 0003 to 0007 ran");
    let revision: i64 = c
        .query_row("SELECT revision FROM questions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(revision, 2, "0003 copied the record's revision");
    // Reopening applies nothing more.
    drop(c);
    let store = SqliteStore::open_path(&path).await.expect("reopen");
    assert_eq!(store.list_messages(&chat).await.unwrap().len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_database_is_migrated_in_wal_mode() {
    let (_dir, path) = temp_db();
    let store = SqliteStore::open(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    assert_eq!(store.backend(), "sqlite");
    store.ping().await.unwrap();
    let c = rusqlite::Connection::open(&path).unwrap();
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 7);
    // 0004: the queue index holds only queued messages; the updated_at index is gone. 0005: the
    // inbox index holds only what waits in an agent's inbox.
    let indexes: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'messages' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        indexes,
        [
            "messages_by_version",
            "messages_inbox",
            "messages_order",
            "messages_queued"
        ]
    );
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let sqlx: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE name = '_sqlx_migrations'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(sqlx, 0);
    // `sqlite:PATH` names the same file.
    let again = SqliteStore::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    send(&store, "c", "m", T0).await.unwrap();
    assert!(
        again
            .get_chat(&ChatId::new("c").unwrap())
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_memory_store_works() {
    let store = SqliteStore::open("sqlite::memory:").await.unwrap();
    assert!(matches!(
        send(&store, "c", "m1", T0).await.unwrap(),
        Sent::Started { .. }
    ));
    assert!(matches!(
        send(&store, "c", "m2", T0).await.unwrap(),
        Sent::Queued { .. }
    ));
    let chat = ChatId::new("c").unwrap();
    assert_eq!(store.list_messages(&chat).await.unwrap().len(), 2);
    let changes = store.messages_since(&chat, 1).await.unwrap();
    assert_eq!(changes.version, 2);
    assert_eq!(changes.messages.len(), 1);
    assert_eq!(store.stats().operations, 2, "reads are not counted");
    // Each in-memory store is its own database.
    let other = SqliteStore::open("sqlite::memory:").await.unwrap();
    assert!(other.get_chat(&chat).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_errors_name_the_path() {
    let err = SqliteStore::open_path("/nonexistent-frogbot-dir/sub/frogbot.db")
        .await
        .unwrap_err();
    let StoreError::Unavailable { message, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(
        message.contains("/nonexistent-frogbot-dir/sub/frogbot.db"),
        "{message}"
    );
    assert!(matches!(
        SqliteStore::open("postgres://x").await,
        Err(StoreError::UnsupportedDatabase { .. })
    ));
    // A file that is no database.
    let (_dir, path) = temp_db();
    std::fs::write(
        &path,
        b"this is not a database, just some text that is long enough to fail",
    )
    .unwrap();
    let err = SqliteStore::open_path(&path).await.unwrap_err();
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_json_is_reported_as_corrupt() {
    let (_dir, path) = temp_db();
    let store = SqliteStore::open_path(&path).await.unwrap();
    send(&store, "c", "m1", T0).await.unwrap();
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute("UPDATE messages SET body = '{not json' WHERE id = 'm1'", [])
        .unwrap();
    drop(c);
    let chat = ChatId::new("c").unwrap();
    let err = store.list_messages(&chat).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    // The store goes on.
    assert!(store.get_chat(&chat).await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_held_by_another_process_fails_clearly_after_the_busy_timeout() {
    let (_dir, path) = temp_db();
    let store = SqliteStore::open_path(&path).await.unwrap();
    let lock = take_write_lock(&path);
    let started = std::time::Instant::now();
    let err = send(&store, "c", "m1", T0).await.unwrap_err();
    assert!(started.elapsed() >= Duration::from_secs(4), "it waited");
    let StoreError::Unavailable { message, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("locked"), "{message}");
    drop(lock);
    // Nothing was written, and the writer goes on.
    assert!(matches!(
        send(&store, "c", "m1", T0).await.unwrap(),
        Sent::Started { .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_goes_away_does_not_stop_the_writer() {
    let (_dir, path) = temp_db();
    let store = SqliteStore::open_path(&path).await.unwrap();
    for i in 0..50 {
        let s = store.clone();
        let t = tokio::spawn(async move { send(&s, &format!("c{i}"), "m", T0).await });
        if i % 2 == 0 {
            t.abort();
        }
        let _ = tokio::time::timeout(
            Duration::from_micros(10),
            send(&store, "x", &format!("y{i}"), T0),
        )
        .await;
    }
    // The writer still answers, and every operation was whole or nothing.
    send(&store, "after", "m", T0).await.unwrap();
    for chat in store.list_chats(None, 100).await.unwrap() {
        assert!(!store.list_messages(&chat.chat_id).await.unwrap().is_empty());
    }
}

// ---- durability ----------------------------------------------------------------------------------

const KILL_CHILD: &str = "FROGBOT_SQLITE_KILL_CHILD";
const KILL_TEST: &str = "kill_minus_9_loses_no_acknowledged_send";

/// The child: sends from many tasks and prints every acknowledged message as soon as its call
/// returns, until it is killed (or gives up after a while).
fn kill_child(path: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = SqliteStore::open_path(path).await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let tasks: Vec<_> = (0..32)
            .map(|t| {
                let s = store.clone();
                tokio::spawn(async move {
                    for i in 0.. {
                        if std::time::Instant::now() > deadline {
                            break;
                        }
                        let (chat, id) = (format!("k{t}"), format!("k{t}-{i}"));
                        send(&s, &chat, &id, T0 + i).await.unwrap();
                        let mut out = std::io::stdout().lock();
                        writeln!(out, "ACK {chat} {id}").unwrap();
                        out.flush().unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            let _ = t.await;
        }
    });
}

#[test]
fn kill_minus_9_loses_no_acknowledged_send() {
    if let Ok(path) = std::env::var(KILL_CHILD) {
        kill_child(&path);
        return;
    }
    let (_dir, path) = temp_db();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([KILL_TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(KILL_CHILD, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked: Vec<(String, String)> = Vec::new();
    let mut killed = false;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("ACK ") {
            let (chat, id) = rest.split_once(' ').unwrap();
            acked.push((chat.into(), id.into()));
            if acked.len() == 400 {
                child.kill().unwrap(); // SIGKILL
                killed = true;
                break;
            }
        }
    }
    // What the child printed before it died was acknowledged too.
    for line in lines {
        let Ok(line) = line else { break };
        if let Some(rest) = line.strip_prefix("ACK ") {
            let (chat, id) = rest.split_once(' ').unwrap();
            acked.push((chat.into(), id.into()));
        }
    }
    let status = child.wait().unwrap();
    assert!(
        killed,
        "the child printed {} acknowledgements and ended: {status}",
        acked.len()
    );
    assert!(!status.success());

    let c = rusqlite::Connection::open(&path).unwrap();
    let check: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    drop(c);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = SqliteStore::open_path(&path)
            .await
            .expect("reopens cleanly");
        let mut missing = Vec::new();
        for (chat, id) in &acked {
            let chat = ChatId::new(chat.clone()).unwrap();
            if store.get_message(&chat, id).await.unwrap().is_none() {
                missing.push(id.clone());
            }
        }
        assert!(
            missing.is_empty(),
            "{} of {} acknowledged sends are lost: {missing:?}",
            missing.len(),
            acked.len()
        );
        // And the store still works on the file.
        send(&store, "after", "m", T0).await.unwrap();
    });
}

/// SQLite is shared only by one host's processes: it has no clock of its own, and the engine
/// keeps the system clock.
#[tokio::test]
async fn sqlite_has_no_database_clock() {
    use frogbot_core::agent::{DatabaseClock, SystemClock};
    let dir = tempfile::tempdir().unwrap();
    let store: DynStore = Arc::new(
        SqliteStore::open_path(&dir.path().join("frogbot.db"))
            .await
            .unwrap(),
    );
    assert_eq!(store.database_time().await.unwrap(), None);
    assert!(
        DatabaseClock::sync(&store, Arc::new(SystemClock))
            .await
            .unwrap()
            .is_none()
    );
}

/// A file's first 1 MiB lives in the database, the rest next to it (`frogbot.db.files/{id}/`),
/// one file per chunk: read back after a restart; the folder of a second copy of the same upload
/// and of an upload cut off half way is removed with it, and a folder the database does not know
/// (left by a crash) is swept by the purge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_files_chunks_past_the_first_mib_live_next_to_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("frogbot.db");
    let store = SqliteStore::open_path(&path).await.unwrap();
    let folder = store.files_dir().expect("a file database has a folder");
    assert_eq!(folder, dir.path().join("frogbot.db.files"));
    let chunk = |i: u32| vec![i as u8; FILE_CHUNK_BYTES];
    let new = |id: &str, now: i64| NewFile {
        id: id.into(),
        chat: ChatId::new("chat-f").unwrap(),
        owner: "ann".into(),
        media_type: "application/octet-stream".into(),
        filename: "big.bin".into(),
        now,
    };
    let write = async |id: &str, n: u32, finish: bool| {
        store.begin_file(&new(id, 1_000)).await.unwrap();
        for i in 0..n {
            store.put_file_chunk(id, i, &chunk(i)).await.unwrap();
        }
        if finish {
            Some(
                store
                    .finish_file(&FinishFile {
                        id,
                        size: u64::from(n) * FILE_CHUNK_BYTES as u64,
                        sha256: "same",
                        chunks: n,
                    })
                    .await
                    .unwrap(),
            )
        } else {
            None
        }
    };
    let names = |id: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(folder.join(id))
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let row = write("f1", 6, true).await.unwrap();
    assert_eq!(names("f1"), ["4", "5"], "the chunks past the first MiB");
    let inside: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM file_chunks WHERE file_id = 'f1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(inside, 4, "the first MiB in the database");

    // The same upload again: one file, the copy's folder gone.
    assert_eq!(write("f2", 6, true).await.unwrap(), row);
    assert!(!folder.join("f2").exists(), "{:?}", names("f2"));
    // Cut off half way, and a folder no file owns: both gone with the purge.
    write("cut", 6, false).await;
    assert_eq!(names("cut"), ["4", "5"]);
    std::fs::create_dir_all(folder.join("orphan")).unwrap();
    std::fs::write(folder.join("orphan").join("4"), b"x").unwrap();
    assert_eq!(store.purge_files(2_000).await.unwrap(), 1);
    assert!(!folder.join("cut").exists());
    assert!(!folder.join("orphan").exists());
    assert_eq!(names("f1"), ["4", "5"], "a finished file is left whole");

    drop(store);
    let store = SqliteStore::open_path(&path).await.unwrap();
    for i in 0..6 {
        let got = store.file_chunk("f1", i).await.unwrap();
        assert!(got == Some(chunk(i)), "chunk {i} after a restart");
    }
}
