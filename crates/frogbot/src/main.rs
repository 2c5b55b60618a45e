//! `frogbot`: run FrogBot.
//!
//!     frogbot serve [--config PATH]   # the HTTP API, the web chat and the configured channels
//!     frogbot migrate [--config PATH] # apply the store's migrations and exit

use clap::{Parser, Subcommand, ValueEnum};

/// An allocator that returns freed memory to the system, so memory taken by a burst of
/// connections or streams is given back when they close.
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
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
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
    let cli = Cli::parse();
    init_logs(cli.log_format);
    let (Command::Serve { config } | Command::Migrate { config }) = &cli.command;
    let config = match frogbot::Config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(&frogbot::Error::Config(e)),
    };
    raise_open_file_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = rt.block_on(async {
        match cli.command {
            Command::Migrate { .. } => {
                frogbot::open_store(&config.database).await?;
                println!(
                    "migrations applied to {}",
                    frogbot::redact(&config.database)
                );
                Ok(())
            }
            Command::Serve { .. } => {
                let listener = tokio::net::TcpListener::bind(&config.listen)
                    .await
                    .map_err(|source| frogbot::Error::Listen {
                        addr: config.listen.clone(),
                        source,
                    })?;
                frogbot::serve(config, listener, shutdown_signal(), Duration::from_secs(20)).await
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// Prints `e` as one line and returns its exit code (2 for configuration and start-up problems).
fn fail(e: &frogbot::Error) -> ExitCode {
    let line = e
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    eprintln!("frogbot: {line}");
    ExitCode::from(e.exit_code())
}

/// Raises the soft limit of open files to the hard limit: every connection is a file descriptor.
fn raise_open_file_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::debug!(limit, "open file limit"),
        Err(e) => tracing::warn!(error = %e, "could not raise the open file limit"),
    }
}
