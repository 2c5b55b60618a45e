//! `frogbot-testdb`: the databases FrogBot's test suites run on, below every FrogBot crate (it
//! depends on none), so the store crates' own tests can use it without a dependency running back
//! up; frogbot-testkit re-exports all of it for the suites above.
//!
//! - a private, throwaway PostgreSQL cluster ([`PgCluster`]) and a fresh database for every test
//!   ([`sqlite_db`], [`postgres_db`], [`TestDb`]);
//! - ways to break one under a running store ([`lock_sqlite`], [`sqlite_exec`],
//!   [`drop_postgres_db`]).
//!
//! The cluster is started once per test process with Debian's PostgreSQL server binaries (`initdb`,
//! `pg_ctl`) on a temporary directory and a free loopback port, as the unprivileged `postgres`
//! user when the tests run as root (the server refuses root), and stopped when the process exits.
//! Where no PostgreSQL binaries exist, PostgreSQL tests are skipped with a message — unless
//! `FROGBOT_REQUIRE_POSTGRES=1`, where they fail.
//!
//! Not for production code: nothing here is hardened, and it must never be a dependency of a
//! published crate.

#![allow(unsafe_code)] // atexit(3), to stop the cluster when the test process exits

use std::any::Any;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// A fresh database for one test: its URL, and whatever keeps it alive.
pub struct TestDb {
    /// A `sqlite://…` or `postgres://…` URL.
    pub url: String,
    _guard: Box<dyn Any + Send + Sync>,
}

impl std::fmt::Debug for TestDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestDb").field("url", &self.url).finish()
    }
}

/// A fresh SQLite database file in its own temporary directory (removed when the `TestDb` drops).
pub fn sqlite_db() -> TestDb {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("frogbot.db").display());
    TestDb {
        url,
        _guard: Box::new(dir),
    }
}

/// A fresh, empty PostgreSQL database on the shared private cluster, or `None` (with a message on
/// stderr) when PostgreSQL is not installed and `FROGBOT_REQUIRE_POSTGRES` is not `1`.
pub fn postgres_db() -> Option<TestDb> {
    let cluster = PgCluster::shared()?;
    Some(TestDb {
        url: cluster.create_database(),
        _guard: Box::new(()),
    })
}

/// Whether PostgreSQL tests must run (`FROGBOT_REQUIRE_POSTGRES=1`).
pub fn postgres_required() -> bool {
    std::env::var("FROGBOT_REQUIRE_POSTGRES").is_ok_and(|v| v == "1")
}

/// A private PostgreSQL cluster.
#[derive(Debug)]
pub struct PgCluster {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
    counter: AtomicU32,
    durable: bool,
}

static CLUSTER: OnceLock<Option<PgCluster>> = OnceLock::new();

impl PgCluster {
    /// The process's cluster, started on first use.
    pub fn shared() -> Option<&'static PgCluster> {
        CLUSTER
            .get_or_init(|| match find_bin_dir() {
                Some(bin) => Some(PgCluster::start(bin)),
                None if postgres_required() => {
                    panic!(
                        "FROGBOT_REQUIRE_POSTGRES=1 but no PostgreSQL server binaries were found"
                    )
                }
                None => {
                    eprintln!(
                        "PostgreSQL server binaries not found: PostgreSQL tests are skipped \
                         (set FROGBOT_REQUIRE_POSTGRES=1 to make this an error)"
                    );
                    None
                }
            })
            .as_ref()
    }

    /// The process's cluster started with durable settings — `fsync`, `synchronous_commit` and
    /// `full_page_writes` on (PostgreSQL's defaults), an `initdb` that syncs — for benchmarks that
    /// must measure real commits. It is the same cluster [`PgCluster::shared`] returns: whichever
    /// is called first decides how it starts; see [`PgCluster::is_durable`].
    pub fn shared_durable() -> Option<&'static PgCluster> {
        CLUSTER
            .get_or_init(|| match find_bin_dir() {
                Some(bin) => Some(PgCluster::start_with(bin, true)),
                None if postgres_required() => {
                    panic!(
                        "FROGBOT_REQUIRE_POSTGRES=1 but no PostgreSQL server binaries were found"
                    )
                }
                None => {
                    eprintln!("PostgreSQL server binaries not found");
                    None
                }
            })
            .as_ref()
    }

    /// Whether the cluster runs with durable settings (see [`PgCluster::shared_durable`]).
    pub fn is_durable(&self) -> bool {
        self.durable
    }

    fn start(bin: PathBuf) -> PgCluster {
        Self::start_with(bin, false)
    }

    fn start_with(bin: PathBuf, durable: bool) -> PgCluster {
        let as_postgres = is_root();
        let base = std::env::temp_dir().join(format!(
            "frogbot-pg-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        ));
        std::fs::create_dir_all(&base).expect("create cluster dir");
        if as_postgres {
            let (uid, gid) = postgres_ids();
            std::os::unix::fs::chown(&base, Some(uid), Some(gid)).expect("chown cluster dir");
        }
        let data = base.join("data");
        let port = free_port();
        let cluster = PgCluster {
            dir: base.clone(),
            bin,
            port,
            as_postgres,
            counter: AtomicU32::new(0),
            durable,
        };
        let mut initdb = vec![
            "-D",
            path_str(&data),
            "-U",
            "frogbot",
            "-A",
            "trust",
            "-E",
            "UTF8",
        ];
        if !durable {
            initdb.push("--no-sync");
        }
        cluster.run_server_tool("initdb", &initdb);
        let sync = if durable {
            "-c fsync=on -c synchronous_commit=on -c full_page_writes=on"
        } else {
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        };
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 {sync} \
             -c max_connections=300 -c shared_buffers=128MB",
            path_str(&base)
        );
        cluster.run_server_tool(
            "pg_ctl",
            &[
                "-D",
                path_str(&data),
                "-l",
                path_str(&base.join("server.log")),
                "-o",
                &opts,
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
        // Stop the cluster when the test process exits (statics are never dropped).
        STOP.set(StopInfo {
            pg_ctl: cluster.bin.join("pg_ctl"),
            data,
            base,
            as_postgres,
        })
        .ok();
        unsafe extern "C" {
            fn atexit(cb: extern "C" fn()) -> i32;
        }
        // SAFETY: registering a plain `extern "C" fn()` with the C runtime.
        unsafe {
            atexit(stop_cluster);
        }
        cluster
    }

    fn run_server_tool(&self, tool: &str, args: &[&str]) {
        let program = self.bin.join(tool);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program);
            c
        } else {
            Command::new(&program)
        };
        cmd.args(args).current_dir(&self.dir);
        let out = cmd.output().unwrap_or_else(|e| panic!("run {tool}: {e}"));
        assert!(
            out.status.success(),
            "{tool} failed: {}\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The server's (postmaster's) process id, read from `postmaster.pid`: benches sum the CPU
    /// time of it and its children to report what the PostgreSQL server spent.
    pub fn server_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.dir.join("data").join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    /// The server's log file (benches read `auto_explain`'s plans from it).
    pub fn server_log(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// Runs `sql` with `psql` on database URL `url` and returns its unaligned, tuples-only output.
    pub fn psql(&self, url: &str, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-At", "-v", "ON_ERROR_STOP=1", url, "-c", sql])
            .output()
            .map_err(|e| format!("run psql: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "psql failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The loopback port the cluster listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for database `name`.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://frogbot@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates a new empty database and returns its URL.
    pub fn create_database(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::SeqCst);
        let name = format!("t{}_{n}", std::process::id());
        let out = Command::new(self.bin.join("createdb"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "frogbot",
                &name,
            ])
            .output()
            .expect("run createdb");
        assert!(
            out.status.success(),
            "createdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.url(&name)
    }
}

struct StopInfo {
    pg_ctl: PathBuf,
    data: PathBuf,
    base: PathBuf,
    as_postgres: bool,
}

static STOP: OnceLock<StopInfo> = OnceLock::new();

extern "C" fn stop_cluster() {
    let Some(s) = STOP.get() else { return };
    let mut cmd = if s.as_postgres {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&s.pg_ctl);
        c
    } else {
        Command::new(&s.pg_ctl)
    };
    let _ = cmd
        .args(["-D", path_str(&s.data), "-m", "immediate", "-w", "stop"])
        .output();
    let _ = std::fs::remove_dir_all(&s.base);
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn postgres_ids() -> (u32, u32) {
    let id = |flag: &str| -> u32 {
        let out = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .expect("run id");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("the postgres system user exists (it comes with the postgresql package)")
    };
    (id("-u"), id("-g"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Finds the PostgreSQL server binaries: `$FROGBOT_PG_BIN`, the newest `/usr/lib/postgresql/*/bin`,
/// or the directory of `pg_ctl` on `PATH`.
fn find_bin_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("FROGBOT_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .find(|p| p.join("pg_ctl").exists() && p.join("initdb").exists())
    })
}

/// A write lock on a SQLite test database held by a second connection, as another process would
/// hold it (`BEGIN IMMEDIATE`): the store's writes wait for their busy timeout, then fail. Released
/// when dropped.
pub struct SqliteWriteLock {
    conn: Option<rusqlite::Connection>,
}

impl std::fmt::Debug for SqliteWriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteWriteLock").finish_non_exhaustive()
    }
}

/// Takes the write lock of the SQLite database at `url` (`sqlite://PATH`).
///
/// # Panics
/// When the database cannot be opened or locked.
pub fn lock_sqlite(url: &str) -> SqliteWriteLock {
    let path = url.trim_start_matches("sqlite://");
    let conn = rusqlite::Connection::open(path).expect("open the SQLite database");
    conn.execute_batch("BEGIN IMMEDIATE")
        .expect("take the SQLite write lock");
    SqliteWriteLock { conn: Some(conn) }
}

impl Drop for SqliteWriteLock {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            let _ = conn.execute_batch("ROLLBACK");
        }
    }
}

/// Runs `sql` on the SQLite test database at `url` (`sqlite://PATH`) from a second connection, as
/// another process (or a disk fault) would: for tests that need stored data the store itself
/// never writes, such as a document that no longer parses.
///
/// # Panics
/// When the database cannot be opened or the SQL fails.
pub fn sqlite_exec(url: &str, sql: &str) {
    let path = url.trim_start_matches("sqlite://");
    let conn = rusqlite::Connection::open(path).expect("open the SQLite database");
    conn.execute_batch(sql).expect("run the SQL");
}

/// Drops the PostgreSQL test database at `url` under whoever uses it (`WITH (FORCE)` cuts their
/// connections): every later operation of a store on it fails.
///
/// # Panics
/// When the server cannot be reached or the database not dropped.
pub async fn drop_postgres_db(url: &str) {
    use sqlx::Connection as _;
    let (base, name) = url.rsplit_once('/').expect("a database URL");
    let mut admin = sqlx::PgConnection::connect(&format!("{base}/postgres"))
        .await
        .expect("connect to the cluster");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE \"{name}\" WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await
    .expect("drop the test database");
}
