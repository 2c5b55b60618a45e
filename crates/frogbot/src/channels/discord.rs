//! `[channels.discord]`: a Discord bot on the gateway (and, with `public_key`, the HTTP
//! interactions endpoint at `POST /channels/discord/interactions`), through `frogbot-discord`'s
//! `channel` module.
//!
//! ```toml
//! [channels.discord]
//! token_env = "DISCORD_TOKEN"            # the variable holding the bot token
//! application_id = "123456789012345678"
//! intents = ["GUILD_MESSAGES", "DIRECT_MESSAGES", "MESSAGE_CONTENT"]   # the default
//! # public_key = "…64 hex digits…"       # serve the interactions endpoint
//! # api_url = "http://127.0.0.1:9000"    # instead of https://discord.com (fakes, proxies)
//! users = { "112233445566778899" = "alice" }
//! allow = ["alice"]
//! # shards = 4                           # gateway shards (default: what Discord recommends)
//! # shard_lease_ms = 10000                # a replica's hold on its shards without renewal
//! # max_upload_bytes = 10485760           # a file the bot sends, at most (a boosted server: more)
//! # command_guilds = ["112233445566778899"]  # register the commands in these servers only
//! ```
//!
//! Replicas: the processes of serve sharing the database split the bot's gateway shards. Each
//! renews its membership of the group `discord:APP_ID:shards` every third of `shard_lease_ms`
//! ([`Ops::members`](frogbot_core::agent::Ops::members)); of the `k` live members (sorted) the
//! `i`-th runs the shards `i*N/k .. (i+1)*N/k` of `N`. A replica that stops renewing (killed, or
//! cut off from the database) drops out when its lease runs out, and the others take its shards
//! over; one that cannot renew stops its own shards before then. A joining replica starts the
//! shards it gains at once while the others drop them at their next renewal (briefly both receive
//! them: a message is still handled once, by its id); a replica stopping leaves the group. Shards
//! are started one at a time, [`IDENTIFY_SPACING`] apart (Discord's identify limit). A single
//! process runs every shard, as the adapter alone does.
//!
//! What it must not do: name serenity types; everything Discord-specific is the adapter's
//! (`frogbot_discord::channel::connect` gives the `Adapter`: hooks, identity, access, receiving).

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use frogbot_channel::EngineHandle;
use frogbot_core::agent::{AccessCheck, ChannelOutbox, Engine};
use frogbot_core::model::{ChannelQuestions, IdentityResolver};
use frogbot_discord::channel::{Config, DiscordAdapter};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::{Adapter, Secret, env_secret, parse_table};
use crate::config_error::ConfigError;

channel_table! {
    /// The keys of `[channels.discord]`.
    pub struct DiscordConfig {
        /// The environment variable holding the bot token.
        pub token_env: String,
        /// The application id (a snowflake, as a string or an integer).
        pub application_id: Snowflake,
        /// Gateway intent names; empty: guild messages, direct messages and message content.
        #[serde(default)]
        pub intents: Vec<String>,
        /// The application's public key (64 hex digits): serve the HTTP interactions endpoint.
        pub public_key: Option<String>,
        /// A base URL used instead of `https://discord.com` (a fake, a proxy).
        pub api_url: Option<String>,
        /// The bot's number of gateway shards (default: what Discord recommends).
        pub shards: Option<u32>,
        /// How long a replica's hold on its share of the shards lasts without renewal, in ms
        /// (renewed every third of it; default [`DEFAULT_SHARD_LEASE`]).
        pub shard_lease_ms: Option<u64>,
        /// The largest file the bot uploads (default 10 MiB, Discord's limit for bots on a server
        /// without boosts); a larger one is named in a text instead.
        pub max_upload_bytes: Option<u64>,
        /// The servers (guild ids) to register the application commands in, at once, instead of
        /// globally (empty, the default: global).
        #[serde(default)]
        pub command_guilds: Vec<Snowflake>,
        /// The token, read from `token_env` by [`parse`].
        #[serde(skip)]
        token: Secret,
    }
}

/// A Discord id in the configuration: a string of digits or an integer.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Snowflake {
    /// `application_id = 123…`
    Number(u64),
    /// `application_id = "123…"`
    Text(String),
}

impl Snowflake {
    fn get(&self) -> Option<u64> {
        match self {
            Snowflake::Number(n) => Some(*n),
            Snowflake::Text(t) => t.trim().parse().ok(),
        }
        .filter(|n| *n > 0)
    }
}

/// Checks the table (and reads the token from its variable).
pub(crate) fn parse(value: &toml::Value) -> Result<DiscordConfig, ConfigError> {
    let mut config: DiscordConfig = parse_table("discord", value)?;
    config.token = Secret(env_secret("discord", "token_env", &config.token_env)?);
    if config.application_id.get().is_none() {
        return Err(ConfigError::key(
            "channels.discord.application_id",
            "not a Discord id (a positive integer)",
        ));
    }
    let checked = config.adapter_config();
    checked
        .gateway_intents()
        .map_err(|e| ConfigError::key("channels.discord.intents", e))?;
    checked
        .verifier()
        .map_err(|e| ConfigError::key("channels.discord.public_key", e))?;
    if let Some(url) = &config.api_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(ConfigError::key(
            "channels.discord.api_url",
            "must start with http:// or https://",
        ));
    }
    if config
        .shards
        .is_some_and(|n| !(1..=MAX_SHARDS).contains(&n))
    {
        return Err(ConfigError::key(
            "channels.discord.shards",
            format!("must be a whole number from 1 to {MAX_SHARDS}"),
        ));
    }
    if config
        .shard_lease_ms
        .is_some_and(|ms| !(MIN_SHARD_LEASE_MS..=MAX_SHARD_LEASE_MS).contains(&ms))
    {
        return Err(ConfigError::key(
            "channels.discord.shard_lease_ms",
            format!("must be a whole number from {MIN_SHARD_LEASE_MS} to {MAX_SHARD_LEASE_MS}"),
        ));
    }
    if config.max_upload_bytes == Some(0) {
        return Err(ConfigError::key(
            "channels.discord.max_upload_bytes",
            "must be a whole number above 0",
        ));
    }
    if config
        .command_guilds
        .iter()
        .any(|g| g.get().is_none_or(|id| id == 0))
    {
        return Err(ConfigError::key(
            "channels.discord.command_guilds",
            "must be server (guild) ids: strings of digits",
        ));
    }
    Ok(config)
}

impl DiscordConfig {
    /// The adapter's config.
    fn adapter_config(&self) -> Config {
        Config {
            token: self.token.0.clone(),
            application_id: self.application_id.get().unwrap_or_default(),
            intents: self.intents.clone(),
            public_key: self.public_key.clone(),
            api_url: self.api_url.clone(),
            users: self.users.clone(),
            allow: self.allow.clone(),
            shards: self.shards,
            max_upload_bytes: self
                .max_upload_bytes
                .unwrap_or(Config::default().max_upload_bytes),
            command_guilds: self
                .command_guilds
                .iter()
                .filter_map(Snowflake::get)
                .collect(),
            ..Config::default()
        }
    }
}

/// What `frogbot config check` asks Discord (`GET /users/@me` with the bot token).
pub(crate) fn probe(value: &toml::Value) -> Result<super::Probe, ConfigError> {
    let c = parse(value)?;
    Ok(super::Probe::Discord {
        api_url: c.api_url.unwrap_or_else(|| "https://discord.com".into()),
        token: c.token.0,
    })
}

/// Connects the bot (learning its own user id from Discord); its gateway shards are split among
/// the replicas sharing the database ([`Sharded`]).
pub(crate) async fn open(config: DiscordConfig) -> Result<Box<dyn Adapter>, crate::Error> {
    let adapter = frogbot_discord::channel::connect(config.adapter_config())
        .await
        .map_err(|e| ConfigError::key("channels.discord", e))?;
    let lease = Duration::from_millis(
        config
            .shard_lease_ms
            .unwrap_or(DEFAULT_SHARD_LEASE.as_millis() as u64),
    );
    Ok(Box::new(Sharded {
        adapter,
        group: format!(
            "discord:{}:shards",
            config.application_id.get().unwrap_or_default()
        ),
        lease,
    }))
}

/// The most shards `shards` may name.
const MAX_SHARDS: u32 = 10_000;
/// The shortest and longest `shard_lease_ms`.
const MIN_SHARD_LEASE_MS: u64 = 1_000;
const MAX_SHARD_LEASE_MS: u64 = 600_000;
/// How long a replica's hold on its shards lasts without renewal, by default.
pub const DEFAULT_SHARD_LEASE: Duration = Duration::from_secs(10);
/// The least time between two shards started by one replica (Discord allows one identify per
/// 5 s to a bot whose `max_concurrency` is 1).
pub const IDENTIFY_SPACING: Duration = Duration::from_secs(5);

/// The Discord adapter with its gateway shards split among the replicas: everything but
/// [`Adapter::start`] is the adapter's own; `start` runs [`share_shards`].
struct Sharded {
    adapter: DiscordAdapter,
    /// The membership group of the bot's replicas.
    group: String,
    lease: Duration,
}

impl Adapter for Sharded {
    fn platform(&self) -> &'static str {
        self.adapter.platform()
    }

    fn questions(&self) -> Arc<dyn ChannelQuestions> {
        self.adapter.questions()
    }

    fn identity(&self) -> Arc<dyn IdentityResolver> {
        self.adapter.identity()
    }

    fn access(&self) -> Arc<dyn AccessCheck> {
        self.adapter.access()
    }

    fn outbox(&self) -> Arc<dyn ChannelOutbox> {
        Adapter::outbox(&self.adapter)
    }

    fn routes(&self, engine: &EngineHandle) -> Option<axum::Router> {
        self.adapter.routes(engine)
    }

    /// Shares the shards out through FrogBot's engine; on any other engine, runs them all.
    fn start(
        &self,
        handle: EngineHandle,
        shutdown: CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let Some(engine) = handle.downcast_ref::<Engine>().cloned() else {
            return self.adapter.start(handle, shutdown);
        };
        Some(tokio::spawn(share_shards(
            self.adapter.clone(),
            engine,
            self.group.clone(),
            self.lease,
            shutdown,
        )))
    }
}

/// The shards (ids, end excluded) that the `index`-th of `members` replicas runs of `total`:
/// contiguous ranges, together every shard once.
pub fn share(index: usize, members: usize, total: u32) -> Range<u32> {
    let (i, k, n) = (index as u64, members.max(1) as u64, u64::from(total));
    let at = |i: u64| (i * n / k) as u32;
    at(i)..at(i + 1)
}

/// One shard this replica runs: its stop and its task.
struct Running {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), frogbot_discord::Error>>,
}

/// Runs this replica's share of the bot's shards until `shutdown`: renews its membership of
/// `group` every third of `lease`, runs the shards its place among the live members gives it
/// (one `run_shards` each, started [`IDENTIFY_SPACING`] apart), stops those it no longer has at
/// once, and all of them when its membership could not be renewed for two thirds of `lease`
/// (before the others take them over). Leaves the group when stopped, and when Discord refuses
/// the bot (a bad token, intents not allowed: `run_shards` ends with an error only then), which
/// ends the task as the adapter's own gateway task ends.
async fn share_shards(
    adapter: DiscordAdapter,
    engine: Engine,
    group: String,
    lease: Duration,
    shutdown: CancellationToken,
) {
    let me = format!("{}-{}", std::process::id(), uuid::Uuid::new_v4().simple());
    let renew = lease / 3;
    let total = loop {
        match adapter.shard_count().await {
            Ok(n) => break n,
            Err(e) => {
                tracing::warn!(error = %e, "discord: asking Discord for the shard count failed; trying again");
                tokio::select! {
                    () = tokio::time::sleep(renew) => {}
                    () = shutdown.cancelled() => return,
                }
            }
        }
    };
    let mut running: BTreeMap<u32, Running> = BTreeMap::new();
    let mut renewed = tokio::time::Instant::now();
    let mut last_start: Option<tokio::time::Instant> = None;
    let mut mine: Range<u32> = 0..0;
    // How many replicas `mine` was computed among (0: none yet, or unknown since a failed renewal).
    let mut replicas = 0;
    let mut next_renewal = tokio::time::Instant::now();
    loop {
        let now = tokio::time::Instant::now();
        if now >= next_renewal {
            next_renewal = now + renew;
            // Bounded: a renewal that hangs counts as failed.
            match tokio::time::timeout(renew, engine.ops().members(&group, &me, lease)).await {
                Ok(Ok(members)) => {
                    renewed = now;
                    let index = members.iter().position(|m| *m == me).unwrap_or(0);
                    let share = share(index, members.len(), total);
                    if (&share, members.len()) != (&mine, replicas) {
                        tracing::info!(
                            "discord shards: this replica runs {} of {total} among {} replicas",
                            describe(&share),
                            members.len()
                        );
                        (mine, replicas) = (share, members.len());
                    }
                }
                failed => {
                    let error = match failed {
                        Ok(Err(e)) => e.to_string(),
                        _ => "no answer in time".to_owned(),
                    };
                    tracing::warn!(%error, "discord: renewing this replica's share of the shards failed");
                    if now.duration_since(renewed) >= lease * 2 / 3 && !mine.is_empty() {
                        tracing::warn!(
                            "discord shards: this replica runs none until it can renew (the others take its shards)"
                        );
                        (mine, replicas) = (0..0, 0);
                    }
                }
            }
        }
        // A shard that ended is started again, unless Discord refused the bot.
        let ended: Vec<u32> = running
            .iter()
            .filter(|(_, r)| r.task.is_finished())
            .map(|(shard, _)| *shard)
            .collect();
        let mut refused = false;
        for shard in ended {
            if let Some(r) = running.remove(&shard)
                && let Ok(Err(e)) = r.task.await
            {
                tracing::error!(shard, error = %e, "discord: the gateway refused the bot; receiving stops");
                refused = true;
            }
        }
        if refused {
            break;
        }
        // Shards no longer ours stop at once.
        running.retain(|shard, r| {
            let keep = mine.contains(shard);
            if !keep {
                r.stop.cancel();
            }
            keep
        });
        // One missing shard starts, when the spacing allows.
        let mut wake = next_renewal;
        if let Some(shard) = mine.clone().find(|s| !running.contains_key(s)) {
            let allowed = last_start.map_or(now, |t| t + IDENTIFY_SPACING);
            if allowed <= now {
                let stop = shutdown.child_token();
                let (adapter, engine, token) = (adapter.clone(), engine.clone(), stop.clone());
                let task = tokio::spawn(async move {
                    adapter
                        .run_shards(engine.handle(), shard..shard + 1, total, token)
                        .await
                });
                running.insert(shard, Running { stop, task });
                last_start = Some(now);
                if mine.clone().any(|s| !running.contains_key(&s)) {
                    wake = wake.min(now + IDENTIFY_SPACING);
                }
            } else {
                wake = wake.min(allowed);
            }
        }
        tokio::select! {
            () = tokio::time::sleep_until(wake) => {}
            () = shutdown.cancelled() => break,
        }
    }
    for r in running.values() {
        r.stop.cancel();
    }
    for (_, r) in running {
        let _ = r.task.await;
    }
    // Leaving: the others take the shards over at their next renewal, not when the lease ends.
    if let Err(e) = engine.ops().members(&group, &me, Duration::ZERO).await {
        tracing::warn!(error = %e, "discord: leaving the replicas' group failed");
    }
}

/// `shards 2-3`, `shard 0` or `no shard`.
fn describe(shards: &Range<u32>) -> String {
    match shards.len() {
        0 => "no shard".into(),
        1 => format!("shard {}", shards.start),
        _ => format!("shards {}-{}", shards.start, shards.end - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Value {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn errors_name_the_key() {
        let err = |text: &str| {
            let e = parse(&table(text)).unwrap_err();
            format!("`{}`: {}", e.key.unwrap_or_default(), e.message)
        };
        assert!(
            err(r#"token_env = "FROGBOT_TEST_UNSET_VARIABLE"
                   application_id = "1""#)
            .starts_with("`channels.discord.token_env`: environment variable")
        );
        // PATH is set in every test environment.
        assert!(
            err(r#"token_env = "PATH"
                   application_id = "x1""#)
            .starts_with("`channels.discord.application_id`")
        );
        assert!(
            err(r#"token_env = "PATH"
                   application_id = 1
                   intents = ["GUILD_MESAGES"]"#)
            .starts_with("`channels.discord.intents`: ")
        );
        assert!(
            err(r#"token_env = "PATH"
                   application_id = 1
                   public_key = "abc""#)
            .starts_with("`channels.discord.public_key`: ")
        );
        assert!(
            err(r#"token_env = "PATH"
                   application_id = 1
                   tokne = "x""#)
            .contains("unknown field `tokne`")
        );
        let ok = parse(&table(
            r#"token_env = "PATH"
               application_id = "123"
               intents = ["guild_messages", "MESSAGE_CONTENT"]
               users = { "42" = "alice" }
               allow = ["alice"]"#,
        ))
        .unwrap();
        assert_eq!(ok.application_id.get(), Some(123));
        let guilds = parse(&table(
            "token_env = \"PATH\"\napplication_id = 1\ncommand_guilds = [\"42\", 43]",
        ))
        .unwrap();
        assert_eq!(guilds.adapter_config().command_guilds, [42, 43]);
        for bad in [
            "shards = 0",
            "shard_lease_ms = 10",
            "max_upload_bytes = 0",
            "command_guilds = [\"general\"]",
        ] {
            let e = err(&format!("token_env = \"PATH\"\napplication_id = 1\n{bad}"));
            assert!(e.contains(bad.split(' ').next().unwrap()), "{e}");
        }
    }

    #[test]
    fn every_shard_is_shared_once_in_ranges() {
        for total in 1..=9u32 {
            for members in 1..=5usize {
                let mut all: Vec<u32> = (0..members)
                    .flat_map(|i| share(i, members, total))
                    .collect();
                all.sort_unstable();
                assert_eq!(
                    all,
                    (0..total).collect::<Vec<_>>(),
                    "{total} among {members}"
                );
            }
        }
        assert_eq!(share(0, 1, 4), 0..4);
        assert_eq!(share(1, 2, 4), 2..4);
        assert_eq!(
            (0..3).map(|i| share(i, 3, 4)).collect::<Vec<_>>(),
            [0..1, 1..2, 2..4]
        );
    }
}
