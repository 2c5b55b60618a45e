//! Discord gateway shards split among replicas (issue 41): real `frogbot serve` processes on one
//! database (PostgreSQL, and a shared SQLite file), a fake Discord recommending 4 shards and
//! routing each guild's events to the session of its shard (`(guild_id >> 22) % total`). Two,
//! then three replicas, one killed (SIGKILL), one more joining: each time the replicas settle,
//! every shard has one live session, every guild's mention reaches one session and is answered
//! once.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::child::{ServeProcess, config_file, free_port, frogbot, start};
use frogbot_discord::testing::{self as fake, FakeDiscord};

const APP: u64 = 600_000_000_000_000_006;
const BOT: u64 = 610_000_000_000_000_006;
const ALICE: u64 = 300_000_000_000_000_003;
const SHARDS: u64 = 4;
const WAIT: Duration = Duration::from_secs(60);
const TOKEN_ENV: &str = "FROGBOT_TEST_DISCORD_TOKEN";

/// A `frogbot serve` of the bot on `db`, its log (INFO) written to `log`; a 2 s shard lease, so
/// a killed replica's shards move within seconds.
async fn replica(fake: &FakeDiscord, db: &str, dir: &Path, name: &str) -> (ServeProcess, PathBuf) {
    let port = free_port();
    let config_dir = dir.join(name);
    std::fs::create_dir_all(&config_dir).unwrap();
    let log = dir.join(format!("{name}.log"));
    let path = config_file(
        &config_dir,
        port,
        db,
        &format!(
            "[channels.discord]\ntoken_env = \"{TOKEN_ENV}\"\napplication_id = \"{APP}\"\n\
             api_url = \"{}\"\nshard_lease_ms = 2000\n",
            fake.api_url
        ),
    );
    let mut cmd = frogbot();
    cmd.arg("serve")
        .arg("--config")
        .arg(&path)
        .env(TOKEN_ENV, "discord-test-token")
        .env("RUST_LOG", "info,sqlx=warn")
        .stdout(std::fs::File::create(&log).unwrap());
    (start(cmd, port).await, log)
}

/// Waits until the last share each log reports is one among `replicas`.
async fn settled(logs: &[&PathBuf], replicas: usize) {
    let want = format!("among {replicas} replicas");
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let last: Vec<Option<String>> = logs
            .iter()
            .map(|log| {
                std::fs::read_to_string(log).ok().and_then(|t| {
                    t.lines()
                        .rev()
                        .find(|l| l.contains("discord shards:"))
                        .map(str::to_owned)
                })
            })
            .collect();
        if last
            .iter()
            .all(|l| l.as_ref().is_some_and(|l| l.contains(&want)))
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the replicas never settled {want}: {last:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until every shard has exactly one live session, and still has after a renewal of the
/// replicas' shares (a shard being handed over is not counted covered by its closing session).
async fn covered(fake: &FakeDiscord) {
    for _ in 0..2 {
        assert!(
            fake.wait_shards_covered(SHARDS, WAIT).await,
            "shards 0-3 once each: {:?}",
            fake.live_shards()
        );
        tokio::time::sleep(Duration::from_millis(800)).await;
    }
    assert!(
        fake.wait_shards_covered(SHARDS, WAIT).await,
        "{:?}",
        fake.live_shards()
    );
}

/// Two guilds on each shard.
fn guilds() -> Vec<u64> {
    (0..2 * SHARDS)
        .map(|n| ((2_000_000 + n) << 22) | 9)
        .collect()
}

/// Mentions the bot once in each guild (message ids `first..`); waits until each is answered in
/// its thread, and checks each guild's mention reached one session.
async fn round(fake: &FakeDiscord, first: u64) {
    let alice = fake::user(ALICE, "alice", false);
    let before: Vec<u64> = guilds().iter().map(|g| fake.deliveries(*g)).collect();
    let ids: Vec<u64> = (first..first + guilds().len() as u64).collect();
    for (g, id) in guilds().into_iter().zip(&ids) {
        let channel = fake.add_text_channel(g);
        fake.dispatch(
            "MESSAGE_CREATE",
            fake::message(
                *id,
                channel,
                Some(g),
                &alice,
                &format!("<@{BOT}> hello {id}"),
                &[fake::user(BOT, "frogbot", true)],
            ),
        );
    }
    for (i, g) in guilds().into_iter().enumerate() {
        assert_eq!(
            fake.deliveries(g),
            before[i] + 1,
            "guild {g} (shard {}) reached one session",
            FakeDiscord::shard_of(g, SHARDS)
        );
    }
    let deadline = std::time::Instant::now() + WAIT;
    while ids.iter().any(|id| answers(fake, *id) == 0) {
        assert!(
            std::time::Instant::now() < deadline,
            "unanswered: {:?}",
            ids.iter()
                .filter(|id| answers(fake, **id) == 0)
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The bot's messages in the thread opened on message `id` (the thread has the message's id).
fn answers(fake: &FakeDiscord, id: u64) -> usize {
    let path = format!("/api/v10/channels/{id}/messages");
    fake.calls()
        .iter()
        .filter(|c| c.method == "POST" && c.path == path && c.status < 300)
        .count()
}

async fn shards_follow_the_replicas(db: frogbot_testkit::TestDb) {
    let fake = FakeDiscord::start(APP, BOT).await;
    fake.set_shards(SHARDS);
    let dir = tempfile::tempdir().unwrap();
    let (mut a, a_log) = replica(&fake, &db.url, dir.path(), "a").await;
    let (_b, b_log) = replica(&fake, &db.url, dir.path(), "b").await;
    settled(&[&a_log, &b_log], 2).await;
    covered(&fake).await;
    round(&fake, 910_000_000_000_000_100).await;

    // A third joins: the shards are split three ways.
    let (_c, c_log) = replica(&fake, &db.url, dir.path(), "c").await;
    settled(&[&a_log, &b_log, &c_log], 3).await;
    covered(&fake).await;
    round(&fake, 910_000_000_000_000_200).await;

    // One dies: its lease runs out and the other two take its shards.
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    settled(&[&b_log, &c_log], 2).await;
    covered(&fake).await;
    round(&fake, 910_000_000_000_000_300).await;

    // Another joins: three again.
    let (_d, d_log) = replica(&fake, &db.url, dir.path(), "d").await;
    settled(&[&b_log, &c_log, &d_log], 3).await;
    covered(&fake).await;
    round(&fake, 910_000_000_000_000_400).await;

    // Every mention was answered once, in one thread.
    for first in [100, 200, 300, 400] {
        for n in 0..2 * SHARDS {
            let id = 910_000_000_000_000_000 + first + n;
            assert_eq!(answers(&fake, id), 1, "message {id} answered once");
            let threads = fake
                .calls()
                .iter()
                .filter(|c| c.path.ends_with(&format!("/messages/{id}/threads")) && c.status < 300)
                .count();
            assert_eq!(threads, 1, "one thread on {id}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_shards_cover_every_guild_once_as_replicas_leave_and_join_on_postgres() {
    let Some(db) = frogbot_testkit::postgres_db() else {
        return;
    };
    shards_follow_the_replicas(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_shards_cover_every_guild_once_as_replicas_leave_and_join_on_one_sqlite_file() {
    shards_follow_the_replicas(frogbot_testkit::sqlite_db()).await;
}
