//! `[channels.matrix]`: the Matrix channel of `frogbot serve` (frogbot-matrix's `channel` glue:
//! login or a restored session, auto-join, the sync loop, native polls for questions).
//!
//! This module only reads configuration and hands it to the adapter crate; it names no matrix-sdk
//! type.
//!
//! ```toml
//! [channels.matrix]
//! homeserver = "https://matrix.example.org"
//! user_id = "@frogbot:example.org"
//! password_env = "FROGBOT_MATRIX_PASSWORD"   # or access_token_env = "…"
//! store_path = "/var/lib/frogbot/matrix"     # matrix-sdk's store and the saved session
//! # store_passphrase_env = "FROGBOT_MATRIX_STORE_PASSPHRASE"
//! # auto_join = true
//! # poll_events = "unstable"                 # or "stable" (m.poll.*)
//! users = { "@alice:example.org" = "alice" }
//! allow = ["alice"]
//! ```
//!
//! Replicas: a Matrix replica is a device of the account with a store folder of its own.
//! `frogbot_matrix::channel::connect` locks `frogbot.lock` in the folder (`Error::StoreInUse` when
//! another process has it), and this module gives replicas on one host that share `store_path` the
//! first free of it and its `replica-N` folders. A replica that takes the sync over resumes from
//! the handled-sync token it saved itself (in its own store folder, at its login or its last sync),
//! so it reads again what the dead holder had handled; the engine drops what it stored already.

use std::path::PathBuf;

use frogbot_matrix::channel::{Config, Login, connect};
use frogbot_matrix::render::PollEvents;

use super::{Adapter, env_secret, parse_table};
use crate::config_error::ConfigError;

const NAME: &str = "matrix";

channel_table! {
    /// The keys of `[channels.matrix]`.
    pub struct MatrixConfig {
        /// The homeserver's base URL.
        pub homeserver: String,
        /// The bot's user id.
        pub user_id: String,
        /// The environment variable holding the password (this or `access_token_env`).
        #[serde(default)]
        pub password_env: Option<String>,
        /// The environment variable holding an access token (this or `password_env`).
        #[serde(default)]
        pub access_token_env: Option<String>,
        /// The folder of matrix-sdk's store (state, encryption keys, sync token) and the session.
        pub store_path: PathBuf,
        /// The environment variable holding a passphrase that encrypts the store.
        #[serde(default)]
        pub store_passphrase_env: Option<String>,
        /// Join rooms the bot is invited to (default true).
        #[serde(default = "yes")]
        pub auto_join: bool,
        /// `unstable` (`org.matrix.msc3381.poll.*`, the default: what Element Web, Desktop,
        /// Android and iOS render as polls) or `stable` (`m.poll.*`, which Element does not render
        /// yet). Polls always carry a plain-text `body` (question, numbered options, how to answer by
        /// a reply), which clients that render no poll show.
        #[serde(default)]
        pub poll_events: PollEvents,
    }
}

fn yes() -> bool {
    true
}

/// The role of the account's one sync: `matrix:USER_ID:sync`.
pub(crate) fn single_receiver(value: &toml::Value) -> Option<String> {
    let c = parse(value).ok()?;
    Some(format!("matrix:{}:sync", c.user_id))
}

/// Checks the table (and the environment variables it names).
pub(crate) fn parse(value: &toml::Value) -> Result<MatrixConfig, ConfigError> {
    let config: MatrixConfig = parse_table(NAME, value)?;
    let bad = |key: &str, what: &str| ConfigError::key(format!("channels.matrix.{key}"), what);
    if !(config.homeserver.starts_with("http://") || config.homeserver.starts_with("https://")) {
        return Err(bad("homeserver", "must be an http:// or https:// URL"));
    }
    if frogbot_matrix::convert::parse_user_id(&config.user_id).is_none() {
        return Err(bad(
            "user_id",
            "must be a Matrix user id like @frogbot:example.org",
        ));
    }
    match (&config.password_env, &config.access_token_env) {
        (Some(var), None) => {
            env_secret(NAME, "password_env", var)?;
        }
        (None, Some(var)) => {
            env_secret(NAME, "access_token_env", var)?;
        }
        (Some(_), Some(_)) => {
            return Err(bad(
                "password_env",
                "set either password_env or access_token_env, not both",
            ));
        }
        (None, None) => {
            return Err(bad(
                "password_env",
                "set password_env or access_token_env (the name of an environment variable)",
            ));
        }
    }
    if let Some(var) = &config.store_passphrase_env {
        env_secret(NAME, "store_passphrase_env", var)?;
    }
    if config.store_path.as_os_str().is_empty() {
        return Err(bad("store_path", "must not be empty"));
    }
    Ok(config)
}

/// What `frogbot config check` asks the homeserver (`whoami` with an access token; with a
/// password only whether it answers, since logging in would make a new device).
pub(crate) fn probe(value: &toml::Value) -> Result<super::Probe, ConfigError> {
    let c = parse(value)?;
    let access_token = match &c.access_token_env {
        Some(var) => Some(env_secret(NAME, "access_token_env", var)?),
        None => None,
    };
    Ok(super::Probe::Matrix {
        homeserver: c.homeserver,
        user_id: c.user_id,
        access_token,
    })
}

/// Logs in (or restores the saved session): the adapter builds its channel and runs its sync
/// loop.
pub(crate) async fn open(config: MatrixConfig) -> Result<Box<dyn Adapter>, crate::Error> {
    let login = match (&config.password_env, &config.access_token_env) {
        (Some(var), _) => Login::Password(env_secret(NAME, "password_env", var)?),
        (None, Some(var)) => Login::AccessToken(env_secret(NAME, "access_token_env", var)?),
        (None, None) => unreachable!("parse checked"),
    };
    let user_id = frogbot_matrix::convert::parse_user_id(&config.user_id)
        .ok_or_else(|| ConfigError::key("channels.matrix.user_id", "not a Matrix user id"))?;
    let base = config.store_path.clone();
    let mut c = Config::new(config.homeserver, user_id, login, config.store_path);
    c.auto_join = config.auto_join;
    c.poll_events = config.poll_events;
    c.users = config.users;
    c.allow = config.allow;
    if let Some(var) = &config.store_passphrase_env {
        c.store_passphrase = Some(env_secret(NAME, "store_passphrase_env", var)?);
    }
    // Replicas on one host sharing a configuration share `store_path`: the first takes it, each
    // other the first free `replica-N` folder in it (a device of the account of its own, the
    // same one at each restart in the same order).
    for slot in 1..=MAX_REPLICAS_PER_HOST {
        c.store_path = replica_store(&base, slot);
        match connect(c.clone()).await {
            Ok(adapter) => {
                if slot > 1 {
                    tracing::info!(
                        store = %c.store_path.display(),
                        "the Matrix store {} is in use by another process on this host; this \
                         replica uses {}",
                        base.display(),
                        c.store_path.display()
                    );
                }
                return Ok(Box::new(adapter));
            }
            Err(frogbot_matrix::Error::StoreInUse(_)) => continue,
            Err(e) => return Err(ConfigError::key("channels.matrix", e).into()),
        }
    }
    Err(ConfigError::key(
        "channels.matrix.store_path",
        format!(
            "{} and its replica folders are all in use by other processes (at most \
             {MAX_REPLICAS_PER_HOST} processes of one host share a store_path)",
            base.display()
        ),
    )
    .into())
}

/// How many processes on one host may share one `store_path` (each in a folder of its own).
const MAX_REPLICAS_PER_HOST: u32 = 32;

/// The store folder of the `slot`-th process on this host sharing `base`: `base` itself for the
/// first, `base/replica-N` for the others.
fn replica_store(base: &std::path::Path, slot: u32) -> PathBuf {
    if slot <= 1 {
        base.to_path_buf()
    } else {
        base.join(format!("replica-{slot}"))
    }
}
