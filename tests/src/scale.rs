//! `scale`: issue 41's scale-out bench. Question cycles through 1, 2 and 3 `frogbot serve`
//! processes (the binary next to this one, or `--frogbot PATH`) on one PostgreSQL database (a
//! private cluster with durable settings: `fsync`, `synchronous_commit` and `full_page_writes` on),
//! and, for comparison, through one process on a SQLite file.
//!
//! A cycle is the one LangGraph's human-in-the-loop bench times (`../shared/peers`), over HTTP: a
//! new chat, `POST /api/chats/{id}/messages` "ask" (the `demo` model asks a question; the answer
//! comes once the turn waits), `POST /api/chats/{id}/settle` on the *next* process (so with two or
//! more processes every answer crosses processes), then `GET /api/chats/{id}` on that process until
//! the turn the answer continued is idle with its reply. `--concurrency` workers run cycles back to
//! back for `--seconds` after a short warm-up.
//!
//! Per run it prints cycles/s, the p50/p99 of a cycle, and where the CPU went per cycle: the serve
//! processes (their `/proc` user + system time), the PostgreSQL server (the postmaster and every
//! backend), and this client. From those it derives the capacity model ARCHITECTURE.md quotes
//! ("Capacity on PostgreSQL"): cycles per second one PostgreSQL core can serve, and one replica
//! core. The last line is JSON.
//!
//! ```text
//! cargo build --release -p frogbot -p frogbot-e2e
//! target/release/scale                               # 1,2,3 processes on PostgreSQL, then SQLite
//! target/release/scale --processes 1,2 --concurrency 8 --seconds 20 --no-sqlite
//! ```
//!
//! # Measured
//!
//! One run of `target/release/scale` (the defaults: c=8, 4 Slack workers in the mixed runs) on
//! the project's 2-core machine, everything in one box, 2026-12-05 (commit f702d9d; figures swing
//! between days, the shape does not). A Slack worker mentions the bot in a new thread and waits
//! for the reply.
//!
//! | processes | Slack workers | cycles/s | Slack replies/s | serve CPU / op | PostgreSQL CPU / op | client CPU / op |
//! |---|---|---|---|---|---|---|
//! | 1 | 0 | 454 | — | 1.55 ms | 2.31 ms | 0.33 ms |
//! | 2 | 0 | 394 | — | 1.85 ms | 2.67 ms | 0.34 ms |
//! | 3 | 0 | 346 | — | 2.06 ms | 2.97 ms | 0.34 ms |
//! | 1 | 4 | 249 | 171 | 1.60 ms | 2.23 ms | 0.72 ms |
//! | 2 | 4 | 227 | 151 | 1.80 ms | 2.68 ms | 0.59 ms |
//! | 3 | 4 | 213 | 139 | 1.99 ms | 2.92 ms | 0.57 ms |
//! | SQLite, 1 | 0 | 971 | — | 1.25 ms | — | 0.30 ms |
//!
//! The model drawn from it: an operation costs PostgreSQL 2.2–3.0 ms of CPU (≈ 330–450
//! operations/s per PostgreSQL core) and a replica 1.6–2.1 ms (≈ 480–650 per replica core); one
//! PostgreSQL core keeps about 0.7 replica cores busy, so replicas add throughput only while
//! PostgreSQL has cores to spare. Checked against the runs: on this machine the three parts share
//! two cores, 454 cycles/s × (1.55 + 2.31 + 0.33) ms ≈ 1.9 cores, so more processes cannot add
//! throughput here, and each process's share falls (more connections, every notice delivered to
//! every listener: PostgreSQL's CPU per operation rises ~30 % from 1 to 3 processes).
//!
//! Where the time goes (2026-12-05, commit 6ac2d6e): a question cycle is 14.4 store operations (5
//! writes; 5.7 `get_chat`, 2 `messages_since`, 1.7 `list_messages`, 1 `get_question`), about 20
//! statements with the notices, whose execution (`scale --explain`) sums to ~0.65 ms. The rest of
//! PostgreSQL's time (perf, flat) is per statement and per commit: executor start-up and memory
//! contexts (~22 % of its samples), the kernel (disk flushes, wake-ups, loopback TCP: ~29 %), the
//! protocol (~6 %), planning (~5 %), running the plans (~9 %), unresolved symbols (~28 %). A serve
//! process (an unstripped build) spends ~35 % of its samples in the kernel (sockets, wake-ups) and
//! ~10 % in libc; of its own code's, the allocator ~21 %, hyper/axum ~15 %, sqlx ~15 %, tokio
//! ~14 %, serde ~9 %, FrogBot's own functions ~6 %. Round trips, not query work, are the cost: the
//! next gains are fewer reads per operation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{Value, json};

use frogbot_e2e::{client, fleet};
use frogbot_slack::testing::{BOT_TOKEN, FakeSlack, SIGNING_SECRET, Signature};

use crate::client::{Api, Res};
use crate::fleet::Fleet;

/// Question cycles through 1, 2, 3 `frogbot serve` processes on one PostgreSQL (and one on SQLite).
#[derive(Parser, Debug)]
#[command(name = "scale")]
struct Args {
    /// How many processes share the PostgreSQL database, one run per entry.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    processes: Vec<usize>,
    /// Cycles in flight at once (workers).
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// How long each run measures, after a 3 s warm-up.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Leave out the one-process SQLite run.
    #[arg(long)]
    no_sqlite: bool,
    /// Leave out the PostgreSQL runs.
    #[arg(long)]
    no_postgres: bool,
    /// The `frogbot` binary. Default: `frogbot` next to this binary.
    #[arg(long)]
    frogbot: Option<PathBuf>,
    /// Also print `EXPLAIN (ANALYZE, BUFFERS)` of every statement FrogBot sends during a few
    /// cycles (one process, `auto_explain` on a database of its own), before the runs.
    #[arg(long)]
    explain: bool,
    /// A PostgreSQL setting for the bench's databases (`ALTER DATABASE … SET NAME = VALUE`), to
    /// try a server setting without rebuilding; repeatable.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    settings: Vec<String>,
    /// Channel traffic: for each process count, a second run that adds this many workers
    /// mentioning the bot in new Slack threads (signed Events API requests from Slack's fake,
    /// spread over the processes) and waiting for its reply in the thread; 0: no mixed runs.
    #[arg(long, default_value_t = 4)]
    slack_workers: usize,
}

/// What one run measured.
#[derive(Debug, Default, Clone)]
struct Figures {
    backend: &'static str,
    processes: usize,
    /// Slack workers in the run (0: HTTP only).
    slack_workers: usize,
    cycles: u64,
    /// Slack thread replies in the window, and the p50/p99 from the mention to the reply.
    replies: u64,
    reply_p50_ms: f64,
    reply_p99_ms: f64,
    seconds: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// CPU seconds over the measured window.
    serve_cpu: f64,
    postgres_cpu: f64,
    client_cpu: f64,
    /// `GET /api/chats/{id}` calls per cycle until the continued turn was idle.
    polls_per_cycle: f64,
    /// Store operations per cycle, by operation, over all processes (their `/metrics`).
    store_ops: std::collections::BTreeMap<String, f64>,
}

impl Figures {
    fn rate(&self) -> f64 {
        self.cycles as f64 / self.seconds
    }
    fn reply_rate(&self) -> f64 {
        self.replies as f64 / self.seconds
    }
    /// CPU per operation: a question cycle or a channel reply.
    fn per_cycle_ms(&self, cpu: f64) -> f64 {
        let ops = self.cycles + self.replies;
        if ops == 0 {
            return 0.0;
        }
        cpu * 1000.0 / ops as f64
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.concurrency == 0 || args.processes.contains(&0) || args.seconds <= 0.0 {
        eprintln!("scale: --concurrency, --processes and --seconds must be positive");
        return ExitCode::from(2);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(run(args))
}

async fn run(args: Args) -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let frogbot = match fleet::frogbot_binary(args.frogbot.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("scale: {e}");
            return ExitCode::from(2);
        }
    };
    let dir = std::env::temp_dir().join(format!("frogbot-scale-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("scale: create {}: {e}", dir.display());
        return ExitCode::from(2);
    }
    println!(
        "scale: {} workers, {} s per run, load average at start {}",
        args.concurrency,
        args.seconds,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut all = Vec::new();
    if !args.no_postgres {
        let Some(cluster) = frogbot_testkit::PgCluster::shared_durable() else {
            eprintln!("scale: no PostgreSQL server binaries for a private cluster");
            return ExitCode::from(2);
        };
        if args.explain
            && let Err(e) = explain(&frogbot, &dir, cluster).await
        {
            eprintln!("scale: explain: {e}");
            return ExitCode::from(1);
        }
        // HTTP only, then (with Slack workers) mixed traffic, for each process count.
        let passes = [(0, ""), (args.slack_workers, " and Slack")];
        for (workers, what) in passes
            .into_iter()
            .filter(|(w, what)| *w > 0 || what.is_empty())
        {
            for &n in &args.processes {
                let url = cluster.create_database();
                if let Err(e) = apply_settings(cluster, &url, &args.settings) {
                    eprintln!("scale: --set: {e}");
                    return ExitCode::from(2);
                }
                let run_dir = dir.join(format!("pg{n}-{workers}"));
                let _ = std::fs::create_dir_all(&run_dir);
                let pid = cluster.server_pid();
                match one_run(&args, &frogbot, run_dir, url.clone(), n, pid, workers).await {
                    Ok(f) => {
                        print_hot(cluster, &url);
                        all.push(f)
                    }
                    Err(e) => {
                        eprintln!("scale: PostgreSQL with {n} process(es){what}: {e}");
                        return ExitCode::from(1);
                    }
                }
            }
        }
    }
    if !args.no_sqlite {
        let run_dir = dir.join("sqlite");
        let _ = std::fs::create_dir_all(&run_dir);
        let url = format!("sqlite://{}", run_dir.join("scale.db").display());
        match one_run(&args, &frogbot, run_dir, url, 1, None, 0).await {
            Ok(f) => all.push(f),
            Err(e) => {
                eprintln!("scale: SQLite: {e}");
                return ExitCode::from(1);
            }
        }
    }
    report(&all, args.concurrency);
    let _ = std::fs::remove_dir_all(&dir);
    ExitCode::SUCCESS
}

/// `ALTER DATABASE … SET` each `NAME=VALUE` of `settings` on `url`'s database.
fn apply_settings(
    cluster: &frogbot_testkit::PgCluster,
    url: &str,
    settings: &[String],
) -> Result<(), String> {
    let name = url.rsplit('/').next().unwrap_or_default();
    for s in settings {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?} is not NAME=VALUE"))?;
        cluster.psql(
            url,
            &format!("ALTER DATABASE {name} SET {} = {}", k.trim(), v.trim()),
        )?;
    }
    Ok(())
}

/// Updates per table and how many were HOT (no index entry written), from
/// `pg_stat_user_tables`.
fn print_hot(cluster: &frogbot_testkit::PgCluster, url: &str) {
    // Backends report their counters at most once a second.
    std::thread::sleep(Duration::from_millis(1200));
    match cluster.psql(
        url,
        "SELECT relname || ': ' || n_tup_ins || ' inserts, ' || n_tup_upd || ' updates, ' || \
         n_tup_hot_upd || ' HOT, ' || n_tup_del || ' deletes' FROM pg_stat_user_tables \
         WHERE n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY relname",
    ) {
        Ok(text) => {
            for line in text.lines() {
                eprintln!("scale:   {line}");
            }
        }
        Err(e) => eprintln!("scale: table statistics: {e}"),
    }
}

/// Runs 20 cycles through one process on a database whose sessions load `auto_explain` (every
/// statement, analyzed, with buffers), then prints one plan per distinct statement from the
/// server's log.
async fn explain(
    frogbot: &std::path::Path,
    dir: &std::path::Path,
    cluster: &frogbot_testkit::PgCluster,
) -> Result<(), String> {
    let url = cluster.create_database();
    let settings = [
        "session_preload_libraries = 'auto_explain'",
        "auto_explain.log_min_duration = 0",
        "auto_explain.log_analyze = on",
        "auto_explain.log_buffers = on",
        "auto_explain.log_timing = on",
        "auto_explain.log_nested_statements = on",
    ]
    .map(String::from);
    apply_settings(cluster, &url, &settings)?;
    let log = cluster.server_log();
    let from = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let run_dir = dir.join("explain");
    let _ = std::fs::create_dir_all(&run_dir);
    let api = Api::new();
    let fleet = Fleet::start(
        &api,
        frogbot.to_path_buf(),
        run_dir,
        url,
        1,
        Duration::from_secs(30),
    )
    .await?;
    let polls = AtomicU64::new(0);
    for k in 0..20 {
        cycle(&api, &fleet, 0, 0, &format!("explain-{k}"), &polls).await?;
    }
    fleet.stop_all().await;
    let text = std::fs::read(&log).map_err(|e| format!("read {}: {e}", log.display()))?;
    let text = String::from_utf8_lossy(&text[from as usize..]).into_owned();
    // Entries start at a log line prefix; a plan is "duration: … ms  plan:\n Query Text: …".
    // Per statement: every execution's duration, and the last execution's plan.
    let mut seen = std::collections::BTreeMap::<String, (Vec<f64>, String)>::new();
    for entry in text.split("LOG:  duration: ").skip(1) {
        let Some(q) = entry.split("Query Text: ").nth(1) else {
            continue;
        };
        let key: String = q.split_whitespace().take(12).collect::<Vec<_>>().join(" ");
        let ms: f64 = entry
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        let plan: String = entry.lines().collect::<Vec<_>>().join("\n");
        let slot = seen.entry(key).or_insert((Vec::new(), String::new()));
        slot.0.push(ms);
        slot.1 = plan;
    }
    println!("explain: {} distinct statements over 20 cycles", seen.len());
    for (key, (times, plan)) in &mut seen {
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        println!(
            "\n---- {}× median {median:.3} ms: {key}\n{plan}",
            times.len()
        );
    }
    Ok(())
}

/// One measured run of `n` processes on `url`.
async fn one_run(
    args: &Args,
    frogbot: &std::path::Path,
    dir: PathBuf,
    url: String,
    n: usize,
    postgres: Option<u32>,
    slack_workers: usize,
) -> Result<Figures, String> {
    let backend = if postgres.is_some() {
        "postgres"
    } else {
        "sqlite"
    };
    let api = Api::new();
    let slack = if slack_workers > 0 {
        Some(Arc::new(FakeSlack::start().await))
    } else {
        None
    };
    let (extra, env) = match &slack {
        Some(fake) => (
            format!(
                "\n[channels.slack]\nmode = \"http\"\nbot_token_env = \"SCALE_SLACK_TOKEN\"\n\
                 signing_secret_env = \"SCALE_SLACK_SECRET\"\napi_url = \"{}\"\n",
                fake.api_url()
            ),
            vec![
                ("SCALE_SLACK_TOKEN".to_string(), BOT_TOKEN.to_string()),
                ("SCALE_SLACK_SECRET".to_string(), SIGNING_SECRET.to_string()),
            ],
        ),
        None => (String::new(), Vec::new()),
    };
    let fleet = Arc::new(
        Fleet::start_with(
            &api,
            frogbot.to_path_buf(),
            dir,
            url,
            n,
            Duration::from_secs(30),
            extra,
            env,
        )
        .await?,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let polls = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for w in 0..args.concurrency {
        let (api, fleet, stop, measuring, polls) = (
            api.clone(),
            fleet.clone(),
            stop.clone(),
            measuring.clone(),
            polls.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut times = Vec::new();
            let mut failed = 0u64;
            let mut k = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let slot = (w + k) % fleet.len();
                let next = (slot + 1) % fleet.len();
                k += 1;
                let chat = format!("scale-{w}-{k}-{}", fastrand::u64(..));
                let start = Instant::now();
                let counted = measuring.load(Ordering::Relaxed);
                match cycle(&api, &fleet, slot, next, &chat, &polls).await {
                    Ok(()) if counted && measuring.load(Ordering::Relaxed) => {
                        times.push(start.elapsed())
                    }
                    Ok(()) => {}
                    Err(e) => {
                        failed += 1;
                        if failed <= 3 {
                            eprintln!("scale: a cycle failed: {e}");
                        }
                    }
                }
            }
            (times, failed)
        }));
    }
    let mut slackers = Vec::new();
    if let Some(fake) = &slack {
        for w in 0..slack_workers {
            let (fake, fleet, stop, measuring) =
                (fake.clone(), fleet.clone(), stop.clone(), measuring.clone());
            slackers.push(tokio::spawn(async move {
                let mut times = Vec::new();
                let mut failed = 0u64;
                let mut k = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let slot = (w + k) % fleet.len();
                    k += 1;
                    let start = Instant::now();
                    let counted = measuring.load(Ordering::Relaxed);
                    match slack_reply(&fake, &fleet, slot, &format!("{w}-{k}")).await {
                        Ok(()) if counted && measuring.load(Ordering::Relaxed) => {
                            times.push(start.elapsed())
                        }
                        Ok(()) => {}
                        Err(e) => {
                            failed += 1;
                            if failed <= 3 {
                                eprintln!("scale: a Slack reply failed: {e}");
                            }
                        }
                    }
                }
                (times, failed)
            }));
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pids: Vec<u32> = (0..fleet.len()).map(|i| fleet.pid(i)).collect();
    let ops_before = store_ops(&api, &fleet).await;
    let before = Cpu::read(&pids, postgres);
    let polls_before = polls.load(Ordering::Relaxed);
    let started = Instant::now();
    measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs_f64(args.seconds)).await;
    measuring.store(false, Ordering::Relaxed);
    let seconds = started.elapsed().as_secs_f64();
    let after = Cpu::read(&pids, postgres);
    let polled = polls.load(Ordering::Relaxed) - polls_before;
    let ops_after = store_ops(&api, &fleet).await;
    stop.store(true, Ordering::Relaxed);
    let mut times = Vec::new();
    let mut failed = 0;
    for w in workers {
        let (t, f) = w.await.map_err(|e| format!("a worker panicked: {e}"))?;
        times.extend(t);
        failed += f;
    }
    let mut reply_times = Vec::new();
    for w in slackers {
        let (t, f) = w
            .await
            .map_err(|e| format!("a Slack worker panicked: {e}"))?;
        reply_times.extend(t);
        failed += f;
    }
    fleet.stop_all().await;
    reply_times.sort();
    let replies = reply_times.len() as u64;
    let (reply_p50_ms, reply_p99_ms) = (
        percentile_ms(&reply_times, 0.5),
        percentile_ms(&reply_times, 0.99),
    );
    times.sort();
    let cycles = times.len() as u64;
    let f = Figures {
        backend,
        processes: n,
        slack_workers,
        cycles,
        replies,
        reply_p50_ms,
        reply_p99_ms,
        seconds,
        p50_ms: percentile_ms(&times, 0.5),
        p99_ms: percentile_ms(&times, 0.99),
        serve_cpu: after.serve - before.serve,
        postgres_cpu: after.postgres - before.postgres,
        client_cpu: after.client - before.client,
        polls_per_cycle: if cycles == 0 {
            0.0
        } else {
            polled as f64 / cycles as f64
        },
        // The window's operations include those of cycles in flight at its ends (a few in
        // thousands).
        store_ops: ops_after
            .iter()
            .map(|(op, n)| {
                let d = n - ops_before.get(op).copied().unwrap_or(0.0);
                (op.clone(), d / ((cycles + replies).max(1) as f64))
            })
            .filter(|(_, per)| *per > 0.0)
            .collect(),
    };
    eprintln!(
        "scale: {backend} × {n}: {:.1} cycles/s (p50 {:.1} ms, p99 {:.1} ms), {:.1} Slack \
         replies/s (p50 {:.1} ms, p99 {:.1} ms), {failed} failed",
        f.rate(),
        f.p50_ms,
        f.p99_ms,
        f.reply_rate(),
        f.reply_p50_ms,
        f.reply_p99_ms
    );
    if failed > 0 {
        return Err(format!("{failed} cycles failed"));
    }
    Ok(f)
}

/// Store operations so far by operation, summed over the processes' `GET /metrics`
/// (`frogbot_store_operation_seconds_count{op=…}`).
async fn store_ops(api: &Api, fleet: &Fleet) -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    for i in 0..fleet.len() {
        let Some(base) = fleet.base(i) else { continue };
        let Ok(res) = api
            .raw()
            .get(format!("{base}/metrics"))
            .timeout(Duration::from_secs(10))
            .send()
            .await
        else {
            continue;
        };
        let text = res.text().await.unwrap_or_default();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("frogbot_store_operation_seconds_count{") else {
                continue;
            };
            let Some(op) = rest.split("op=\"").nth(1).and_then(|r| r.split('"').next()) else {
                continue;
            };
            let n: f64 = rest
                .rsplit(' ')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            *out.entry(op.to_string()).or_insert(0.0) += n;
        }
    }
    out
}

/// The `p` percentile of sorted `v`, in milliseconds (0 for none).
fn percentile_ms(v: &[Duration], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    v[i].as_secs_f64() * 1000.0
}

/// One question cycle on a new chat: ask through `slot`, answer through `next`, wait there until
/// the continued turn is idle with its reply.
async fn cycle(
    api: &Api,
    fleet: &Fleet,
    slot: usize,
    next: usize,
    chat: &str,
    polls: &AtomicU64,
) -> Result<(), String> {
    let a = fleet.base(slot).ok_or("a process is down")?;
    let b = fleet.base(next).ok_or("a process is down")?;
    let long = Duration::from_secs(30);
    let sent = api
        .post(
            &format!("{a}/api/chats/{chat}/messages"),
            0,
            &json!({"parts": [{"type": "text", "text": "ask"}]}),
            long,
        )
        .await;
    let body = ok(sent, "send")?;
    if body["state"] != "awaiting" {
        return Err(format!("send: the turn did not wait on a question: {body}"));
    }
    let call = body["reply"]["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|p| p["toolCallId"].as_str())
        .ok_or_else(|| format!("send: no tool call in the reply: {body}"))?
        .to_string();
    let settled = api
        .post(
            &format!("{b}/api/chats/{chat}/settle"),
            0,
            &json!({"toolCallId": call, "output": {"answers": [{"header": "Colour", "selected": ["Red"]}]}}),
            long,
        )
        .await;
    let body = ok(settled, "settle")?;
    if body["outcome"] != "answered" {
        return Err(format!("settle: not answered: {body}"));
    }
    let deadline = Instant::now() + long;
    loop {
        polls.fetch_add(1, Ordering::Relaxed);
        let read = api
            .get(&format!("{b}/api/chats/{chat}"), 0, Duration::from_secs(10))
            .await;
        let body = ok(read, "read")?;
        let done = body["state"] == "idle"
            && body["messages"]
                .as_array()
                .and_then(|m| m.last())
                .map(|m| m.to_string().contains("You chose Colour: Red"))
                .unwrap_or(false);
        if done {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("the answered turn did not end within 30 s: {body}"));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The Slack channel the bench's threads are in.
const SLACK_CHANNEL: &str = "C42";

/// One Slack reply: a person mentions the bot in a new thread (the signed `app_mention` event to
/// process `slot`), then the bot's reply stands finished in the thread (Slack's fake records it).
async fn slack_reply(fake: &FakeSlack, fleet: &Fleet, slot: usize, n: &str) -> Result<(), String> {
    let base = fleet.base(slot).ok_or("a process is down")?;
    let said = fake.user_message(
        SLACK_CHANNEL,
        None,
        "UPERSON",
        &format!("<@UBOT> hello {n}"),
    );
    let body = fake.event_callback(fake.mention_event(&said));
    let res = fake.post_event(&base, &body, Signature::Good, None).await;
    if res.status() != 200 {
        return Err(format!("the Events API request got HTTP {}", res.status()));
    }
    let thread = format!("{SLACK_CHANNEL}:{}", said.ts);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let replied = fake
            .thread_messages(&thread)
            .iter()
            .any(|m| m.bot && !m.streaming && m.text.contains("hello"));
        if replied {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("no reply in {thread} within 30 s"));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn ok(res: Res, what: &str) -> Result<Value, String> {
    match res {
        Res::Http { status: 200, body } => Ok(body),
        Res::Http { status, body } => Err(format!("{what}: HTTP {status}: {body}")),
        Res::Failed(e) => Err(format!("{what}: {e}")),
    }
}

/// CPU seconds (user + system) so far of the serve processes, the PostgreSQL server and this
/// process.
#[derive(Debug, Default, Clone, Copy)]
struct Cpu {
    serve: f64,
    postgres: f64,
    client: f64,
}

impl Cpu {
    fn read(serve: &[u32], postmaster: Option<u32>) -> Cpu {
        let serve = serve.iter().map(|&p| cpu_of(p, false)).sum();
        let postgres = postmaster
            .map(|pm| {
                // The postmaster (with its reaped children) and every live child: the backends
                // of the pools, the WAL writer, the checkpointer.
                let children: f64 = children_of(pm).into_iter().map(|c| cpu_of(c, false)).sum();
                cpu_of(pm, true) + children
            })
            .unwrap_or(0.0);
        Cpu {
            serve,
            postgres,
            client: cpu_of(std::process::id(), false),
        }
    }
}

/// User + system seconds of `pid` (and of its reaped children with `reaped`), from
/// `/proc/PID/stat`; 0 when it is gone.
fn cpu_of(pid: u32, reaped: bool) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command (which may hold spaces) in parentheses.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state): utime is field 14, stime 15, cutime 16, cstime 17.
    let at = |field: usize| -> f64 {
        fields
            .get(field - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let ticks = clock_ticks();
    let own = at(14) + at(15);
    let kids = if reaped { at(16) + at(17) } else { 0.0 };
    (own + kids) / ticks
}

#[allow(unsafe_code)] // sysconf(3) has no safe wrapper in libc
fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// The live children of `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = &s[s.rfind(')')? + 2..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

fn report(all: &[Figures], concurrency: usize) {
    println!();
    println!(
        "| backend | processes | Slack workers | cycles/s | p50 ms | p99 ms | Slack replies/s | p50 ms | p99 ms | serve CPU ms/op | PostgreSQL CPU ms/op | client CPU ms/op | reads/cycle |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for f in all {
        println!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} |",
            f.backend,
            f.processes,
            f.slack_workers,
            f.rate(),
            f.p50_ms,
            f.p99_ms,
            f.reply_rate(),
            f.reply_p50_ms,
            f.reply_p99_ms,
            f.per_cycle_ms(f.serve_cpu),
            f.per_cycle_ms(f.postgres_cpu),
            f.per_cycle_ms(f.client_cpu),
            f.polls_per_cycle
        );
    }
    for f in all {
        let total: f64 = f.store_ops.values().sum();
        let ops: Vec<String> = f
            .store_ops
            .iter()
            .map(|(op, n)| format!("{op} {n:.2}"))
            .collect();
        println!(
            "store operations per operation, {} × {} (Slack workers {}): {total:.1} ({})",
            f.backend,
            f.processes,
            f.slack_workers,
            ops.join(", ")
        );
    }
    // The capacity model: what one core of each part serves, from the PostgreSQL runs.
    let pg: Vec<&Figures> = all
        .iter()
        .filter(|f| f.backend == "postgres" && f.slack_workers == 0)
        .collect();
    if !pg.is_empty() {
        let pg_ms: f64 = pg
            .iter()
            .map(|f| f.per_cycle_ms(f.postgres_cpu))
            .sum::<f64>()
            / pg.len() as f64;
        let serve_ms: f64 =
            pg.iter().map(|f| f.per_cycle_ms(f.serve_cpu)).sum::<f64>() / pg.len() as f64;
        println!();
        println!(
            "capacity model (mean over the PostgreSQL runs): one PostgreSQL core ≈ {:.0} cycles/s \
             ({pg_ms:.2} ms CPU per cycle), one replica core ≈ {:.0} cycles/s ({serve_ms:.2} ms): \
             {:.1} replica cores per PostgreSQL core",
            1000.0 / pg_ms.max(1e-9),
            1000.0 / serve_ms.max(1e-9),
            serve_ms / pg_ms.max(1e-9)
        );
    }
    let runs: Vec<Value> = all
        .iter()
        .map(|f| {
            json!({
                "backend": f.backend, "processes": f.processes, "concurrency": concurrency,
                "slack_workers": f.slack_workers,
                "cycles_per_s": f.rate(), "p50_ms": f.p50_ms, "p99_ms": f.p99_ms,
                "slack_replies_per_s": f.reply_rate(), "reply_p50_ms": f.reply_p50_ms,
                "reply_p99_ms": f.reply_p99_ms,
                "serve_cpu_ms_per_op": f.per_cycle_ms(f.serve_cpu),
                "postgres_cpu_ms_per_op": f.per_cycle_ms(f.postgres_cpu),
                "client_cpu_ms_per_op": f.per_cycle_ms(f.client_cpu),
                "reads_per_cycle": f.polls_per_cycle,
                "store_ops_per_op": f.store_ops,
            })
        })
        .collect();
    println!("{}", json!({"bench": "scale", "runs": runs}));
}
