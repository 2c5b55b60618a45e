//! The operator commands: `frogbot chats`, `show`, `jobs`, `jobs retry` and `purge`. They open the
//! configuration's `database` as `migrate` does and go through the engine's handles
//! (`engine.chats().find`, `engine.ops().jobs` …), so they are safe while servers run on the same
//! database: every command but `jobs retry` and `purge` only reads, and each of those writes is
//! one store operation (`purge`: the housekeeping's two).
//!
//! Output is one line per item on stdout (`--json`: one JSON object per line); a failure is one
//! line on stderr. Exit codes: 0 done, 1 a failure (a store error, `jobs retry` of a live or
//! unknown job), 2 a bad configuration.

use std::path::PathBuf;

use serde_json::{Value, json};

use frogbot_core::agent::views::{ChatFilter, ChatRow, Job, QuestionRow, StoredMessage};
use frogbot_core::agent::{Engine, EngineConfig, Revival};
use frogbot_core::model::{
    ChatId, MessagePart, QuestionOutcome, TurnState, millis_to_iso, text::truncate,
};

use crate::Config;
use crate::term::say;

/// Exit code: a failure (the store, an id that is not what the command needs).
pub const EXIT_FAILED: u8 = 1;

/// How long a message's text may be in `show` (characters).
const SHOWN_TEXT: usize = 100;

/// Errors of an operator command.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpsError {
    /// The configuration is bad (exit code 2).
    #[error(transparent)]
    Config(#[from] crate::ConfigError),
    /// The database could not be opened (exit code 2).
    #[error(transparent)]
    Open(crate::Error),
    /// A SQLite file that does not exist: an operator command never creates one (exit code 2).
    #[error("database {0}: no such file (serve or migrate creates it)")]
    NoDatabase(String),
    /// The store failed.
    #[error("{0}")]
    Engine(#[from] frogbot_core::Error),
    /// What the command was asked about is not there or not in the state it needs.
    #[error("{0}")]
    Refused(String),
}

impl OpsError {
    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            OpsError::Config(_) | OpsError::Open(_) | OpsError::NoDatabase(_) => 2,
            OpsError::Engine(_) | OpsError::Refused(_) => EXIT_FAILED,
        }
    }
}

/// The configuration file, shared by every operator command.
#[derive(Clone, Debug, clap::Args)]
pub struct ConfigArg {
    /// The configuration file (default: ./frogbot.toml when it exists).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// A chat state to list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StateArg {
    /// A turn holds the chat.
    Running,
    /// Questions wait for answers.
    Awaiting,
    /// Neither.
    Idle,
}

/// `frogbot chats`.
#[derive(Clone, Debug, clap::Args)]
pub struct ChatsArgs {
    /// The configuration file.
    #[command(flatten)]
    pub config: ConfigArg,
    /// Only chats in this state.
    #[arg(long, value_enum)]
    pub state: Option<StateArg>,
    /// Only the chats of this channel platform (slack, discord, telegram, matrix).
    #[arg(long)]
    pub channel: Option<String>,
    /// At most this many (newest first).
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
}

/// `frogbot show CHAT`.
#[derive(Clone, Debug, clap::Args)]
pub struct ShowArgs {
    /// The chat id.
    pub chat: String,
    /// The configuration file.
    #[command(flatten)]
    pub config: ConfigArg,
    /// The chat, its messages and question records as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `frogbot jobs [--dead]` and `frogbot jobs retry ID`.
#[derive(Clone, Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct JobsArgs {
    /// `retry ID`, or none: list.
    #[command(subcommand)]
    pub command: Option<JobsCommand>,
    /// The configuration file.
    #[command(flatten)]
    pub config: ConfigArg,
    /// The dead jobs (given up on), oldest first, instead of the live ones.
    #[arg(long)]
    pub dead: bool,
    /// At most this many.
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
}

/// `frogbot jobs …`.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum JobsCommand {
    /// Make a dead job live again, due now (its attempts start over).
    Retry {
        /// The job's id (from `frogbot jobs --dead`).
        id: i64,
        /// The configuration file.
        #[command(flatten)]
        config: ConfigArg,
    },
}

/// `frogbot purge`.
#[derive(Clone, Debug, clap::Args)]
pub struct PurgeArgs {
    /// The configuration file.
    #[command(flatten)]
    pub config: ConfigArg,
    /// Count what would go; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Opens the configuration's database as an engine with no model (operators only read and
/// repair; nothing runs a turn).
async fn engine(config: &ConfigArg) -> Result<(Config, Engine), OpsError> {
    // An operator command needs no channel secret nor model key.
    let config = Config::load_for_ops(config.config.as_deref())?;
    if let Some(path) = sqlite_file(&config.database)
        && !std::path::Path::new(&path).exists()
    {
        return Err(OpsError::NoDatabase(path));
    }
    let store = crate::open_store(&config.database)
        .await
        .map_err(OpsError::Open)?;
    let clock = crate::database_clock(&store)
        .await
        .map_err(OpsError::Open)?;
    let engine = Engine::with_clock(
        store,
        vec![],
        vec![],
        EngineConfig {
            dead_job_retention: std::time::Duration::from_secs(
                config.dead_job_retention_days * 24 * 3_600,
            ),
            ..Default::default()
        },
        clock,
    );
    Ok((config, engine))
}

/// The file of a `sqlite:` URL (`None` for another database or an in-memory one).
fn sqlite_file(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or_default();
    (!path.is_empty() && !path.starts_with(":memory:")).then(|| path.to_string())
}

fn print_json(v: &Value) {
    println!("{v}"); // JSON escapes control characters
}

fn channel_text(row: &ChatRow) -> String {
    match &row.channel {
        Some(c) => format!("{}:{}", c.platform, c.thread),
        None => "web".into(),
    }
}

fn chat_json(row: &ChatRow, now: i64) -> Value {
    json!({
        "chatId": row.chat_id,
        "state": row.state(now),
        "channel": row.channel,
        "owner": row.owner,
        "createdAt": millis_to_iso(row.created_at),
        "updatedAt": millis_to_iso(row.updated_at),
        "awaitingMessageId": row.awaiting_message_id,
    })
}

/// `frogbot chats`: one line per chat, newest first —
/// `ID  STATE  CHANNEL  UPDATED  OWNER` (`web` for a web chat, `-` for no owner).
pub async fn chats(args: ChatsArgs) -> Result<(), OpsError> {
    let (_, engine) = engine(&args.config).await?;
    let filter = ChatFilter {
        state: args.state.map(|s| match s {
            StateArg::Running => TurnState::Running,
            StateArg::Awaiting => TurnState::Awaiting,
            StateArg::Idle => TurnState::Idle,
        }),
        platform: args.channel.clone(),
        limit: args.limit,
    };
    let rows = engine.chats().find(&filter).await?;
    let now = engine.now();
    if args.json {
        for row in &rows {
            print_json(&chat_json(row, now));
        }
        return Ok(());
    }
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|row| {
            [
                row.chat_id.to_string(),
                row.state(now).as_str().to_string(),
                channel_text(row),
                millis_to_iso(row.updated_at),
                row.owner
                    .as_ref()
                    .map_or_else(|| "-".into(), |o| o.as_str().to_string()),
            ]
        })
        .collect();
    print_table(&cells);
    Ok(())
}

/// Prints rows with every column but the last padded to its widest cell.
fn print_table<const N: usize>(rows: &[[String; N]]) {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == N {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        say!("{}", line.trim_end());
    }
}

/// A message's text on one line, shortened: its text parts, then `[tool NAME state]` for tool
/// calls.
fn message_text(m: &StoredMessage) -> String {
    let mut pieces = Vec::new();
    for p in &m.message.parts {
        match p {
            MessagePart::Text { text } if !text.trim().is_empty() => {
                pieces.push(text.split_whitespace().collect::<Vec<_>>().join(" "));
            }
            MessagePart::Tool(t) => pieces.push(format!(
                "[tool {} {}]",
                t.tool_name,
                serde_json::to_value(t.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            )),
            _ => {}
        }
    }
    truncate(&pieces.join(" "), SHOWN_TEXT)
}

fn outcome_text(q: &QuestionRow) -> String {
    let by = q
        .actor
        .as_ref()
        .map(|a| {
            a.user
                .as_ref()
                .map(|u| u.as_str().to_string())
                .or_else(|| {
                    a.identity
                        .as_ref()
                        .map(|i| format!("{}:{}", i.platform, i.user.id))
                })
                .unwrap_or_else(|| "anonymous".into())
        })
        .map(|who| format!(" by {who}"))
        .unwrap_or_default();
    let at = q
        .outcome_at
        .map(|t| format!(" at {}", millis_to_iso(t)))
        .unwrap_or_default();
    let answers = |o: &frogbot_core::model::QuestionOutput| {
        o.answers
            .iter()
            .map(|a| format!("{}={}", a.header, a.selected.join("+")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match &q.outcome {
        None => "open".into(),
        Some(QuestionOutcome::Answered(o)) => format!("answered{by}{at}: {}", answers(o)),
        Some(QuestionOutcome::Dismissed) => format!("dismissed{by}{at}"),
        Some(QuestionOutcome::Expired(Some(o))) => format!("expired{at}, defaults: {}", answers(o)),
        Some(QuestionOutcome::Expired(None)) => format!("expired{at}"),
        Some(QuestionOutcome::Cancelled) => format!("cancelled{at}"),
        Some(_) => "recorded".into(),
    }
}

/// `frogbot show CHAT`: the chat's row, then one line per message
/// (`#SEQ ROLE AUTHOR TIME [queued]: text`), then one line per question record
/// (`question CALL on MESSAGE: outcome`).
pub async fn show(args: ShowArgs) -> Result<(), OpsError> {
    let chat = ChatId::new(&args.chat)
        .map_err(|_| OpsError::Refused(format!("{:?} is not a chat id", args.chat)))?;
    let (_, engine) = engine(&args.config).await?;
    let Some(row) = engine.chats().get(&chat).await? else {
        return Err(OpsError::Refused(format!("no chat {chat}")));
    };
    let messages = engine.chats().messages(&chat).await?;
    let questions = engine.questions().of_chat(&chat).await?;
    let now = engine.now();
    if args.json {
        let questions: Vec<Value> = questions
            .iter()
            .map(|q| {
                json!({
                    "toolCallId": q.tool_call_id,
                    "messageId": q.message_id,
                    "input": q.input,
                    "outcome": q.outcome,
                    "actor": q.actor,
                    "outcomeAt": q.outcome_at.map(millis_to_iso),
                    "closed": q.closed,
                    "expiresAt": millis_to_iso(q.expires_at),
                })
            })
            .collect();
        let messages: Vec<&frogbot_core::model::UiMessage> =
            messages.iter().map(|m| &m.message).collect();
        print_json(&json!({
            "chat": chat_json(&row, now),
            "messages": messages,
            "questions": questions,
        }));
        return Ok(());
    }
    say!(
        "chat {}  {}  {}  owner {}  created {}  updated {}",
        row.chat_id,
        row.state(now).as_str(),
        channel_text(&row),
        row.owner.as_ref().map_or("-", |o| o.as_str()),
        millis_to_iso(row.created_at),
        millis_to_iso(row.updated_at),
    );
    for m in &messages {
        let role = serde_json::to_value(m.message.role)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        say!(
            "#{} {} {} {}{}: {}",
            m.seq,
            role,
            m.author().map_or("-", |a| a.as_str()),
            m.message.metadata.created_at,
            if m.queued { " queued" } else { "" },
            message_text(m),
        );
    }
    for q in &questions {
        say!(
            "question {} on {}: {}",
            q.tool_call_id,
            q.message_id,
            outcome_text(q)
        );
    }
    Ok(())
}

fn job_json(j: &Job) -> Value {
    json!({
        "id": j.id,
        "kind": j.kind,
        "key": j.key,
        "attempts": j.attempts,
        "runAt": millis_to_iso(j.run_at),
        "dead": j.dead,
        "claimedBy": j.claimed_by,
        "lastError": j.last_error,
    })
}

/// `frogbot jobs [--dead]`: one line per job — `ID  KIND  KEY  ATTEMPTS  DUE  LAST ERROR`; or
/// `frogbot jobs retry ID`.
pub async fn jobs(args: JobsArgs) -> Result<(), OpsError> {
    if let Some(JobsCommand::Retry { id, config }) = args.command {
        return retry(id, &config).await;
    }
    let (_, engine) = engine(&args.config).await?;
    let jobs = engine.ops().jobs(args.dead, args.limit).await?;
    if args.json {
        for j in &jobs {
            print_json(&job_json(j));
        }
        return Ok(());
    }
    let cells: Vec<[String; 6]> = jobs
        .iter()
        .map(|j| {
            [
                j.id.to_string(),
                j.kind.clone(),
                j.key.clone().unwrap_or_else(|| "-".into()),
                format!("attempts {}", j.attempts),
                format!("due {}", millis_to_iso(j.run_at)),
                j.last_error
                    .as_deref()
                    .map_or_else(|| "-".into(), |e| truncate(e, SHOWN_TEXT)),
            ]
        })
        .collect();
    print_table(&cells);
    Ok(())
}

/// `frogbot jobs retry ID`: `job ID (KEY) is live again, due now`; a live or unknown id is a
/// failure (exit 1) with one line.
async fn retry(id: i64, config: &ConfigArg) -> Result<(), OpsError> {
    let (_, engine) = engine(config).await?;
    match engine.ops().revive_job(id).await? {
        Revival::Revived(j) => {
            say!(
                "job {} ({}) is live again, due now",
                j.id,
                j.key.as_deref().unwrap_or(&j.kind)
            );
            Ok(())
        }
        Revival::Live(j) => Err(OpsError::Refused(format!(
            "job {id} is not dead (attempts {}, due {}): nothing to retry",
            j.attempts,
            millis_to_iso(j.run_at)
        ))),
        Revival::Unknown => Err(OpsError::Refused(format!("no job {id}"))),
        _ => Err(OpsError::Refused(format!("job {id}: not retried"))),
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `frogbot purge [--dry-run]`: removes what housekeeping removes (expired question records, dead
/// jobs older than `dead_job_retention_days`) and says how many; `--dry-run` counts only.
pub async fn purge(args: PurgeArgs) -> Result<(), OpsError> {
    let (config, engine) = engine(&args.config).await?;
    let days = plural(config.dead_job_retention_days, "day", "days");
    if args.dry_run {
        let p = engine.ops().purgeable().await?;
        say!(
            "would remove {} and {} older than {days} (dry run: nothing removed)",
            plural(
                p.questions,
                "expired question record",
                "expired question records"
            ),
            plural(p.dead_jobs, "dead job", "dead jobs"),
        );
        return Ok(());
    }
    let done = engine.ops().housekeep().await?;
    say!(
        "removed {} and {} older than {days}; {} kept",
        plural(
            done.questions_purged,
            "expired question record",
            "expired question records"
        ),
        plural(done.dead_jobs_purged, "dead job", "dead jobs"),
        plural(done.dead_jobs as u64, "dead job", "dead jobs"),
    );
    Ok(())
}
