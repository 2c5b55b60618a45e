//! `soak`: issue 18's long run. Two `frogbot serve` processes (the binary next to this one, or
//! `--frogbot PATH`) share one PostgreSQL database (`--database postgres://…`, else a private
//! cluster started the way `frogbot-testkit` starts its own; `--sqlite`: one process on a SQLite
//! file) and take mixed HTTP traffic for `--minutes`: new chats and turns, messages queued into
//! and steering running turns, questions of the offline `demo` model answered through the settle
//! endpoint (sometimes by two clients racing at both processes), live event streams (following,
//! slow and idle readers), and every 20–40 s (seeded, printed) a SIGKILL of one process, which is
//! then restarted.
//!
//! Every 10 s and at the end it prints throughput, send→reply and settle latencies, each process's
//! RSS, the kills so far and the loss / duplicate counts. At the end it drives every chat to rest
//! (questions answered, queues run; a bounded wait) and checks every chat through the HTTP API:
//!
//! - a **loss** is a user message the API accepted (2xx, or 409 `duplicate-message` on a retry of
//!   the same id) that is not stored, a stored user message without a reply, or an accepted
//!   (2xx) settle whose outcome is not recorded;
//! - a **duplicate** is a user message stored twice, or a question with two different outcomes
//!   (two settles accepted with different answers, or a recorded outcome other than the accepted).
//!
//! It exits 1 when it finds any (each printed with its chat and message or call id), 2 when it
//! cannot run.

mod check;
mod ledger;
mod stats;
mod traffic;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use frogbot_e2e::{client, fleet};

use crate::client::Api;
use crate::fleet::Fleet;
use crate::ledger::Ledger;
use crate::stats::Stats;

/// Soak FrogBot: two `frogbot serve` processes on one database, mixed traffic, SIGKILLs; then a
/// check that nothing accepted was lost or duplicated.
#[derive(Parser, Debug)]
#[command(name = "soak")]
struct Args {
    /// How long the traffic runs, in minutes (fractions allowed: 0.5).
    #[arg(long, default_value_t = 30.0)]
    minutes: f64,
    /// Seed of every random choice (kill times, traffic); printed. Default: from the clock.
    #[arg(long)]
    seed: Option<u64>,
    /// The `frogbot` binary. Default: `frogbot` next to this binary.
    #[arg(long)]
    frogbot: Option<PathBuf>,
    /// A PostgreSQL database to use (`postgres://…`). Default: a private cluster.
    #[arg(long, conflicts_with = "sqlite")]
    database: Option<String>,
    /// One process on a SQLite file instead of two on PostgreSQL.
    #[arg(long)]
    sqlite: bool,
    /// Chat clients sending at once.
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// Live event stream listeners.
    #[arg(long, default_value_t = 6)]
    listeners: usize,
    /// Shortest wait between two kills, in seconds.
    #[arg(long, default_value_t = 20.0)]
    kill_min: f64,
    /// Longest wait between two kills, in seconds.
    #[arg(long, default_value_t = 40.0)]
    kill_max: f64,
    /// Kill nothing.
    #[arg(long)]
    no_kills: bool,
    /// The processes' `turn_lease_seconds` (how long a killed process's turn blocks its chat).
    #[arg(long, default_value_t = 10)]
    lease_seconds: u64,
}

/// What every task of the run shares.
#[derive(Debug)]
pub(crate) struct Soak {
    /// The serve processes.
    pub(crate) fleet: Fleet,
    /// The HTTP client.
    pub(crate) api: Api,
    /// What was sent and what the API answered.
    pub(crate) ledger: Ledger,
    /// Counters and latencies.
    pub(crate) stats: Stats,
    /// Prefix of every chat id of this run.
    pub(crate) run_id: String,
    /// When the run started.
    pub(crate) started: Instant,
    /// Set when the traffic stops.
    pub(crate) stop: AtomicBool,
    /// The processes' lease.
    pub(crate) lease: Duration,
}

impl Soak {
    /// Seconds since the start.
    pub(crate) fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
    /// Whether the traffic is stopping.
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
    /// How long a chat may take to come to rest: a killed holder's lease, the sweeper, the turns
    /// queued behind it.
    pub(crate) fn rest_bound(&self) -> Duration {
        self.lease * 3 + Duration::from_secs(45)
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(e) = validate(&args) {
        eprintln!("soak: {e}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("soak: tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let code = runtime.block_on(run(args));
    // The runtime's tasks hold the fleet: stop them before the cluster's atexit hook runs.
    runtime.shutdown_timeout(Duration::from_secs(5));
    code
}

fn validate(args: &Args) -> Result<(), String> {
    if !(args.minutes.is_finite() && args.minutes > 0.0) {
        return Err(format!(
            "--minutes must be a positive number, not {}",
            args.minutes
        ));
    }
    if !(args.kill_min.is_finite() && args.kill_min > 0.0 && args.kill_max >= args.kill_min) {
        return Err(format!(
            "--kill-min/--kill-max must be positive with min <= max (got {} and {})",
            args.kill_min, args.kill_max
        ));
    }
    if args.workers == 0 {
        return Err("--workers must be at least 1".into());
    }
    if args.lease_seconds == 0 {
        return Err("--lease-seconds must be at least 1".into());
    }
    if let Some(db) = &args.database
        && !db.starts_with("postgres://")
        && !db.starts_with("postgresql://")
    {
        return Err(format!(
            "--database must be a postgres:// URL (use --sqlite for SQLite), not {db:?}"
        ));
    }
    Ok(())
}

/// The database and how many processes share it.
fn database(args: &Args, dir: &std::path::Path) -> Result<(String, usize, String), String> {
    if args.sqlite {
        let url = format!("sqlite://{}", dir.join("soak.db").display());
        return Ok((url.clone(), 1, url));
    }
    if let Some(url) = &args.database {
        return Ok((url.clone(), 2, redact(url)));
    }
    match frogbot_testkit::PgCluster::shared() {
        Some(cluster) => {
            let url = cluster.create_database();
            Ok((url.clone(), 2, format!("{url} (private cluster)")))
        }
        None => Err(
            "no PostgreSQL server binaries found for a private cluster: install PostgreSQL, pass \
             --database postgres://…, or run one process on SQLite with --sqlite"
                .into(),
        ),
    }
}

fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => match url[s + 3..at].split_once(':') {
            Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
            None => url.to_string(),
        },
        _ => url.to_string(),
    }
}

async fn run(args: Args) -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            % 1_000_000_007
    });
    let frogbot = match fleet::frogbot_binary(args.frogbot.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("soak: {e}");
            return ExitCode::from(2);
        }
    };
    let dir = std::env::temp_dir().join(format!("frogbot-soak-{}-{seed}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("soak: create {}: {e}", dir.display());
        return ExitCode::from(2);
    }
    let (url, processes, shown) = match database(&args, &dir) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("soak: {e}");
            return ExitCode::from(2);
        }
    };
    let api = Api::new();
    let lease = Duration::from_secs(args.lease_seconds);
    let fleet = match Fleet::start(&api, frogbot.clone(), dir.clone(), url, processes, lease).await
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("soak: {e}");
            return ExitCode::from(2);
        }
    };
    let run_id = format!("soak{seed:x}-{:x}", std::process::id());
    println!(
        "soak: seed {seed}, {} min of traffic, {processes} process(es) of {} on {shown}, lease {} s, \
         {} workers, {} listeners; logs in {}",
        args.minutes,
        frogbot.display(),
        args.lease_seconds,
        args.workers,
        args.listeners,
        dir.display()
    );
    let soak = Arc::new(Soak {
        fleet,
        api,
        ledger: Ledger::default(),
        stats: Stats::default(),
        run_id,
        started: Instant::now(),
        stop: AtomicBool::new(false),
        lease,
    });
    let traffic_for = Duration::from_secs_f64(args.minutes * 60.0);
    let plan = if args.no_kills {
        Vec::new()
    } else {
        traffic::kill_plan(
            seed,
            traffic_for,
            args.kill_min,
            args.kill_max,
            soak.fleet.len(),
        )
    };
    if !plan.is_empty() {
        let shown: Vec<String> = plan
            .iter()
            .map(|(t, slot)| format!("{:.1}s {}", t.as_secs_f64(), fleet::slot_name(*slot)))
            .collect();
        println!("kill plan: {}", shown.join(", "));
    }
    let code = traffic::run(
        soak.clone(),
        seed,
        traffic_for,
        plan,
        args.workers,
        args.listeners,
    )
    .await;
    soak.fleet.stop_all().await;
    println!("logs of the serve processes: {}", dir.display());
    code
}
