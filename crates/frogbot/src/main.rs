//! `frogbot`: run FrogBot.
//!
//!     frogbot serve [--config PATH]   # the HTTP API, the web chat and the configured channels
//!     frogbot migrate [--config PATH] # apply the store's migrations and exit
//!     frogbot ask TEXT [--confirm LABEL | --choice A --choice B | --text | --number | --toggle]
//!                 [--to web:CHAT|slack:CHANNEL] [--expires 2h] [--wait [--timeout 10m]]
//!     frogbot wait ID [--timeout T]      # exit 0 answered, 2 expired or timed out, 3 cancelled
//!     frogbot cancel ID
//!     frogbot chats [--state running|awaiting|idle] [--channel slack] [--limit N] [--json]
//!     frogbot show CHAT [--json]
//!     frogbot jobs [--dead] [--json] | frogbot jobs retry ID
//!     frogbot purge [--dry-run]
//!     frogbot config check [--offline]
//!     frogbot mcp [--server URL] [--token T]  # an MCP server on stdio for agents (feature `mcp`)

use clap::{Parser, Subcommand, ValueEnum};

/// An allocator that returns freed memory to the system, so memory taken by a burst of
/// connections or streams is given back when they close. Without the `jemalloc` feature, the
/// system's allocator.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "frogbot",
    version,
    about = "FrogBot: AI agents and bots in chats, over HTTP and the web"
)]
struct Cli {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Human, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Human,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the HTTP API, the web chat and the configured channels.
    Serve {
        /// The configuration file (default: ./frogbot.toml when it exists).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Apply the store's migrations and exit.
    Migrate {
        /// The configuration file (default: ./frogbot.toml when it exists).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Ask a person through a running server; with --wait, print the answer and exit 0 answered,
    /// 2 expired without a default or timed out, 3 cancelled (1: any other failure).
    Ask(Box<frogbot::ask::ClientArgs<frogbot::ask::AskArgs>>),
    /// Wait for an ask's answer (exit codes as for ask --wait).
    Wait(frogbot::ask::ClientArgs<frogbot::ask::WaitArgs>),
    /// Cancel an open ask.
    Cancel(frogbot::ask::ClientArgs<frogbot::ask::CancelArgs>),
    /// Post an agent message (text, title, blocks) in an agent's chat (--to opens one).
    Send(Box<frogbot::ask::ClientArgs<frogbot::talk::SendArgs>>),
    /// Read the agent's inbox: people's messages and block events (each once, marked Seen).
    Inbox(frogbot::ask::ClientArgs<frogbot::talk::InboxArgs>),
    /// Acknowledge a person's message: working or done.
    Ack(frogbot::ask::ClientArgs<frogbot::talk::AckArgs>),
    /// Edit an agent message (its text, title, blocks, or one block by id).
    Edit(frogbot::ask::ClientArgs<frogbot::talk::EditArgs>),
    /// Delete an agent message (an ask's open question is withdrawn).
    Delete(frogbot::ask::ClientArgs<frogbot::talk::DeleteArgs>),
    /// Pin an agent message under a key (status by default).
    Pin(frogbot::ask::ClientArgs<frogbot::talk::PinArgs>),
    /// Unpin a chat's key.
    Unpin(frogbot::ask::ClientArgs<frogbot::talk::UnpinArgs>),
    /// List the database's chats, newest first (safe while servers run).
    Chats(frogbot::ops::ChatsArgs),
    /// Show a chat: its row, messages and question records.
    Show(frogbot::ops::ShowArgs),
    /// List the live jobs (or --dead ones); `jobs retry ID` makes a dead job live again.
    Jobs(frogbot::ops::JobsArgs),
    /// Remove expired question records and dead jobs past their retention (--dry-run: count).
    Purge(frogbot::ops::PurgeArgs),
    /// Serve FrogBot's tools (ask_person, send_message, read_inbox, wait_for_event) to an MCP
    /// client over stdio, calling a running server with an agent token.
    #[cfg(feature = "mcp")]
    Mcp(frogbot::mcp_server::McpArgs),
    /// Check the configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Validate the configuration, then check every channel's credentials and every model's
    /// endpoint (one line per check; exit 1 when one fails).
    Check {
        /// The configuration file (default: ./frogbot.toml when it exists).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Only read and validate the configuration; call nothing.
        #[arg(long)]
        offline: bool,
    },
}

/// The client and operator commands: failures (a bad flag too) exit 1 with one line.
const CLIENT_COMMANDS: [&str; 9] = [
    "ask", "wait", "cancel", "chats", "show", "jobs", "purge", "config", "mcp",
];

/// The log levels without `RUST_LOG`: INFO, but sqlx and matrix-sdk at WARN (matrix-sdk's INFO
/// span around each sync prints its whole settings, 1.5 kB a line); matrix-sdk's recovery state
/// (secret storage the bot never uses) and its HTTP client's own log off (it logs every failed
/// request as an ERROR, expected 404s included — reading account data never set, an event
/// looked up; the adapter logs the failures that matter to it); the key-backup warnings (the
/// bot keeps no backup: one warning per room key) only as errors.
const DEFAULT_LOG_FILTER: &str = "info,sqlx=warn,matrix_sdk=warn,matrix_sdk_base=warn,\
    matrix_sdk_crypto=warn,matrix_sdk_sqlite=warn,matrix_sdk_common=warn,\
    matrix_sdk::encryption::recovery=off,matrix_sdk::http_client=off,\
    matrix_sdk_crypto::backups=error";

/// The logs on stdout and, with `[telemetry] otlp_endpoint`, the spans' export (its handle
/// returned, to be shut down when serving ends).
fn init_logs(
    format: LogFormat,
    telemetry: Option<&frogbot::telemetry::TelemetryConfig>,
    runtime: &tokio::runtime::Handle,
) -> Result<frogbot::telemetry::TraceExport, frogbot::ConfigError> {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let (export_layer, export) = frogbot::telemetry::layer(telemetry, runtime)?;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    // The filter is global: it decides the spans the export sees as well as the log lines.
    let subscriber = tracing_subscriber::registry()
        .with(export_layer)
        .with(filter);
    // Colours only on a terminal: a log written to a file or a pipe gets no escape codes.
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    match format {
        LogFormat::Human => subscriber.with(fmt).init(),
        LogFormat::Json => subscriber.with(fmt.json()).init(),
    }
    Ok(export)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down: no new requests; running steps checkpoint");
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e)
            if !e.use_stderr()
                || !std::env::args()
                    .nth(1)
                    .is_some_and(|c| CLIENT_COMMANDS.contains(&c.as_str())) =>
        {
            e.exit()
        }
        Err(e) => {
            let text = e.to_string();
            let line = text.lines().next().unwrap_or("bad arguments");
            eprintln!(
                "frogbot: {}",
                frogbot::term::escape_controls(line.trim_start_matches("error: "))
            );
            return ExitCode::from(frogbot::ask::EXIT_FAILED);
        }
    };
    let (config, migrate) = match cli.command {
        Command::Ask(a) => return run_client(frogbot::ask::run_ask(*a)),
        Command::Wait(a) => return run_client(frogbot::ask::run_wait(a)),
        Command::Cancel(a) => return run_client(frogbot::ask::run_cancel(a)),
        Command::Send(a) => return run_client(frogbot::talk::run_send(*a)),
        Command::Inbox(a) => return run_client(frogbot::talk::run_inbox(a)),
        Command::Ack(a) => return run_client(frogbot::talk::run_ack(a)),
        Command::Edit(a) => return run_client(frogbot::talk::run_edit(a)),
        Command::Delete(a) => return run_client(frogbot::talk::run_delete(a)),
        Command::Pin(a) => return run_client(frogbot::talk::run_pin(a)),
        Command::Unpin(a) => return run_client(frogbot::talk::run_unpin(a)),
        #[cfg(feature = "mcp")]
        Command::Mcp(a) => return run_mcp(a),
        Command::Chats(a) => return run_ops(frogbot::ops::chats(a)),
        Command::Show(a) => return run_ops(frogbot::ops::show(a)),
        Command::Jobs(a) => return run_ops(frogbot::ops::jobs(a)),
        Command::Purge(a) => return run_ops(frogbot::ops::purge(a)),
        Command::Config {
            command: ConfigCommand::Check { config, offline },
        } => return run_check(config, offline),
        Command::Serve { config } => (config, false),
        Command::Migrate { config } => (config, true),
    };
    let config = match frogbot::Config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(&frogbot::Error::Config(e)),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let export = match init_logs(cli.log_format, config.telemetry.as_ref(), rt.handle()) {
        Ok(export) => export,
        Err(e) => return fail(&frogbot::Error::Config(e)),
    };
    raise_open_file_limit();
    let result = rt.block_on(async {
        if migrate {
            frogbot::open_store(&config.database).await?;
            println!(
                "migrations applied to {}",
                frogbot::redact(&config.database)
            );
            return Ok(());
        }
        let listener = tokio::net::TcpListener::bind(&config.listen)
            .await
            .map_err(|source| frogbot::Error::Listen {
                addr: config.listen.clone(),
                source,
            })?;
        frogbot::serve(config, listener, shutdown_signal(), Duration::from_secs(20)).await
    });
    // The spans not sent yet, over the runtime (still running its workers).
    export.shutdown();
    drop(rt);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// Runs a client command (no logs: stdout is the answer) and returns its exit code.
fn run_client(
    command: impl std::future::Future<Output = Result<u8, frogbot::ask::AskError>>,
) -> ExitCode {
    match current_thread().block_on(command) {
        Ok(code) => ExitCode::from(code),
        Err(e) => fail_line(&e, frogbot::ask::EXIT_FAILED),
    }
}

/// `frogbot mcp`: stdout is the protocol, so logs (WARN and up, or `RUST_LOG`) go to stderr.
#[cfg(feature = "mcp")]
fn run_mcp(args: frogbot::mcp_server::McpArgs) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let rt = current_thread();
    match rt.block_on(frogbot::mcp_server::run_stdio(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "frogbot: {}",
                frogbot::term::escape_controls(&e.to_string())
            );
            ExitCode::from(frogbot::ask::EXIT_FAILED)
        }
    }
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Runs an operator command (no logs: stdout is the answer): exit 0, or one line on stderr and
/// the error's exit code.
fn run_ops(
    command: impl std::future::Future<Output = Result<(), frogbot::ops::OpsError>>,
) -> ExitCode {
    match current_thread().block_on(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail_line(&e, e.exit_code()),
    }
}

/// `frogbot config check`: exit 0 when every check passed, else 1.
fn run_check(config: Option<PathBuf>, offline: bool) -> ExitCode {
    if current_thread().block_on(frogbot::check::run(config.as_deref(), offline)) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(frogbot::ops::EXIT_FAILED)
    }
}

/// Prints `e` as one line and returns its exit code (2 for configuration and start-up problems).
fn fail(e: &frogbot::Error) -> ExitCode {
    fail_line(e, e.exit_code())
}

/// Prints `e` on stderr as one line (its white space folded, control characters escaped) and
/// returns `code`.
fn fail_line(e: &dyn std::fmt::Display, code: u8) -> ExitCode {
    let line = e
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    eprintln!("frogbot: {}", frogbot::term::escape_controls(&line));
    ExitCode::from(code)
}

/// Raises the soft limit of open files to the hard limit: every connection is a file descriptor.
fn raise_open_file_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::debug!(limit, "open file limit"),
        Err(e) => tracing::warn!(error = %e, "could not raise the open file limit"),
    }
}
