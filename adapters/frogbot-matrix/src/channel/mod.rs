//! The engine glue `frogbot serve` uses (feature `engine`): [`connect`] logs in (password or
//! access token) or restores the session saved beside matrix-sdk's own SQLite store and returns a
//! [`MatrixAdapter`], which implements FrogBot's [`Adapter`]: [`Adapter::channel`] builds the
//! engine's channel (the question hooks, the identity map and allow list of the [`Config`], the
//! [`outbox`]), [`Adapter::start`] runs the sync loop ([`receive`]). Matrix needs no HTTP routes.
//!
//! Conversations: in a DM (a room of two) every message talks to the bot; in a room a mention or a
//! reply to the bot does, and so does any message in a thread that already is a FrogBot chat. The
//! bot answers in an `m.thread` on the message, so one thread is one chat. Poll responses and
//! reactions go to the question engine, routed by the poll's event id.
//!
//! What it must not do: replay old events, or skip new ones. A fresh login syncs once and handles
//! nothing of it (history is skipped); a restored session resumes from the token of the last
//! handled sync (saved beside the store), so only events sent while the bot was away are
//! delivered. Own events are ignored. It keeps no FrogBot state: the engine and its store decide
//! everything.

pub mod outbox;
pub mod receive;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use frogbot_channel::{AccessCheck, Adapter, AllowList, ChannelOutbox, EngineHandle};
use frogbot_model::MappedIdentity;
use frogbot_model::{ChannelQuestions, IdentityResolver};
use matrix_sdk::authentication::matrix::MatrixSession;
use matrix_sdk::config::SyncSettings;
use matrix_sdk::ruma::{OwnedUserId, UserId};
use matrix_sdk::{Client, SessionMeta, SessionTokens};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span};

use crate::render::PollEvents;
use crate::{Error, MatrixQuestions, PLATFORM};

pub use outbox::MatrixOutbox;

pub use frogbot_model::NOT_ALLOWED_TEXT;

/// How the bot logs in.
#[derive(Clone)]
#[non_exhaustive]
pub enum Login {
    /// `m.login.password` with the user id's localpart.
    Password(String),
    /// An existing access token (its device is learnt with `whoami`).
    AccessToken(String),
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Login::Password(_) => "Password(…)",
            Login::AccessToken(_) => "AccessToken(…)",
        })
    }
}

/// How to connect, and who may talk to the bot.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// The homeserver's base URL.
    pub homeserver: String,
    /// The bot's user id (`@frogbot:example.org`).
    pub user_id: OwnedUserId,
    /// Password or access token.
    pub login: Login,
    /// The folder of matrix-sdk's SQLite store (state, crypto keys, sync token) and the saved
    /// session (`session.json`).
    pub store_path: PathBuf,
    /// Encrypts the SQLite store.
    pub store_passphrase: Option<String>,
    /// Join rooms the bot is invited to.
    pub auto_join: bool,
    /// Which poll event types to send.
    pub poll_events: PollEvents,
    /// How many timeline events one sync returns per room (the sync filter's `timeline.limit`).
    /// More than that between two syncs is fetched with `/messages`, so nothing is skipped; a
    /// larger limit means fewer extra requests after a burst or a restart.
    pub sync_timeline_limit: u32,
    /// Matrix user id → FrogBot user id (anyone else is `matrix:@user:server`).
    pub users: BTreeMap<String, String>,
    /// FrogBot user ids let in (empty: everyone).
    pub allow: Vec<String>,
    /// How image blocks' URLs are fetched before they are uploaded as `m.image`s
    /// ([`crate::client::image_policy`]: public addresses only, 8 MB, 20 s, no proxy). A refused
    /// or failed fetch shows the image as a link.
    pub image_policy: frogbot_net::FetchPolicy,
}

impl Config {
    /// A configuration with the defaults: auto-join on, stable poll events, no store passphrase,
    /// 100 timeline events per sync, no user map, everyone allowed.
    pub fn new(
        homeserver: impl Into<String>,
        user_id: OwnedUserId,
        login: Login,
        store_path: impl Into<PathBuf>,
    ) -> Self {
        Self {
            homeserver: homeserver.into(),
            user_id,
            login,
            store_path: store_path.into(),
            store_passphrase: None,
            auto_join: true,
            poll_events: PollEvents::default(),
            sync_timeline_limit: 100,
            users: BTreeMap::new(),
            allow: Vec::new(),
            image_policy: crate::client::image_policy(),
        }
    }
}

/// A logged-in bot: FrogBot's [`Adapter`] for Matrix.
#[derive(Clone, Debug)]
pub struct MatrixAdapter {
    client: Client,
    bot: OwnedUserId,
    auto_join: bool,
    questions: Arc<MatrixQuestions<Client>>,
    token_file: PathBuf,
    timeline_limit: u32,
    users: BTreeMap<String, String>,
    allow: Vec<String>,
    image_policy: frogbot_net::FetchPolicy,
    /// The lock on the store folder, held as long as a clone of the adapter lives.
    _store_lock: Arc<std::fs::File>,
}

/// The file whose exclusive lock says which process has a store folder open.
fn lock_file(store: &Path) -> PathBuf {
    store.join("frogbot.lock")
}

/// Takes the store folder for this process: an exclusive lock on its `frogbot.lock`, released
/// when the returned file is closed or the process dies. [`Error::StoreInUse`] when another
/// process (or another adapter of this one) has it.
fn claim_store(store: &Path) -> Result<std::fs::File, Error> {
    let path = lock_file(store);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::Login(format!("cannot open {}: {e}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::StoreInUse(store.to_path_buf())),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(Error::Login(format!("cannot lock {}: {e}", path.display())))
        }
    }
}

fn session_file(store: &Path) -> PathBuf {
    store.join("session.json")
}

/// The sync token up to which every event has been handled (matrix-sdk's own token is saved as
/// soon as a response is read, before it is handled).
fn token_file(store: &Path) -> PathBuf {
    store.join("handled-sync-token")
}

fn read_token(file: &Path) -> Option<String> {
    std::fs::read_to_string(file)
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
}

fn save_token(file: &Path, token: &str) -> std::io::Result<()> {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, token)?;
    std::fs::rename(&tmp, file)
}

fn login_err(e: impl std::fmt::Display) -> Error {
    Error::Login(e.to_string())
}

/// Logs in, or restores the session saved by an earlier start (no new login, no replay).
///
/// The store folder is this adapter's alone while it lives (an exclusive lock on
/// `frogbot.lock` in it): a second `connect` on the same folder, in this process or another,
/// fails with [`Error::StoreInUse`] instead of sharing one device's keys and sync token.
pub async fn connect(config: Config) -> Result<MatrixAdapter, Error> {
    let span = info_span!("matrix_connect", user = %config.user_id);
    async move {
        std::fs::create_dir_all(&config.store_path).map_err(login_err)?;
        let store_lock = claim_store(&config.store_path)?;
        let client = Client::builder()
            .homeserver_url(&config.homeserver)
            .request_config(crate::client::request_config())
            .sqlite_store(&config.store_path, config.store_passphrase.as_deref())
            .build()
            .await
            .map_err(login_err)?;
        let file = session_file(&config.store_path);
        let saved: Option<MatrixSession> = match std::fs::read(&file) {
            Ok(bytes) => Some(serde_json::from_slice(&bytes).map_err(|e| {
                Error::Login(format!("unreadable saved session {}: {e}", file.display()))
            })?),
            Err(_) => None,
        };
        let fresh = match saved {
            Some(session) => {
                if session.meta.user_id != config.user_id {
                    return Err(Error::Login(format!(
                        "the store at {} belongs to {}, not {}",
                        config.store_path.display(),
                        session.meta.user_id,
                        config.user_id
                    )));
                }
                client.restore_session(session).await.map_err(login_err)?;
                info!("restored the saved Matrix session");
                false
            }
            None => {
                match &config.login {
                    Login::Password(password) => {
                        client
                            .matrix_auth()
                            .login_username(&config.user_id, password)
                            .initial_device_display_name("FrogBot")
                            .await
                            .map_err(login_err)?;
                    }
                    Login::AccessToken(token) => {
                        let session = MatrixSession {
                            meta: SessionMeta {
                                user_id: config.user_id.clone(),
                                device_id: "UNKNOWN".into(),
                            },
                            tokens: SessionTokens {
                                access_token: token.clone(),
                                refresh_token: None,
                            },
                        };
                        // whoami needs a token: ask with a throwaway client.
                        let probe = Client::builder()
                            .homeserver_url(&config.homeserver)
                            .request_config(crate::client::request_config())
                            .build()
                            .await
                            .map_err(login_err)?;
                        probe
                            .restore_session(session.clone())
                            .await
                            .map_err(login_err)?;
                        let who = probe.whoami().await.map_err(login_err)?;
                        if who.user_id != config.user_id {
                            return Err(Error::Login(format!(
                                "the access token belongs to {}, not {}",
                                who.user_id, config.user_id
                            )));
                        }
                        let device = who
                            .device_id
                            .ok_or_else(|| Error::Login("the access token has no device".into()))?;
                        client
                            .restore_session(MatrixSession {
                                meta: SessionMeta {
                                    user_id: config.user_id.clone(),
                                    device_id: device,
                                },
                                ..session
                            })
                            .await
                            .map_err(login_err)?;
                    }
                }
                let session = client
                    .matrix_auth()
                    .session()
                    .ok_or_else(|| Error::Login("no session after login".into()))?;
                std::fs::write(&file, serde_json::to_vec(&session).map_err(login_err)?)
                    .map_err(login_err)?;
                info!("logged in to Matrix; session saved");
                true
            }
        };
        let tokens = token_file(&config.store_path);
        if fresh {
            // Skip history: one sync before anything is handled.
            let first = client
                .sync_once(SyncSettings::default().filter(receive::sync_filter(1)))
                .await
                .map_err(|e| crate::client::call_error("sync", e))?;
            save_token(&tokens, &first.next_batch).map_err(login_err)?;
        }
        let questions =
            Arc::new(MatrixQuestions::new(client.clone()).with_poll_events(config.poll_events));
        Ok(MatrixAdapter {
            client,
            bot: config.user_id,
            auto_join: config.auto_join,
            questions,
            token_file: tokens,
            timeline_limit: config.sync_timeline_limit,
            users: config.users,
            allow: config.allow,
            image_policy: config.image_policy,
            _store_lock: Arc::new(store_lock),
        })
    }
    .instrument(span)
    .await
}

impl MatrixAdapter {
    /// The matrix-sdk client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The bot's user id.
    pub fn user_id(&self) -> &UserId {
        &self.bot
    }
}

impl Adapter for MatrixAdapter {
    fn platform(&self) -> &'static str {
        PLATFORM
    }

    /// The question hooks (native polls).
    fn questions(&self) -> Arc<dyn ChannelQuestions> {
        self.questions.clone()
    }

    fn identity(&self) -> Arc<dyn IdentityResolver> {
        Arc::new(MappedIdentity::new(self.users.clone()))
    }

    fn access(&self) -> Arc<dyn AccessCheck> {
        Arc::new(AllowList::new(self.allow.iter().cloned()))
    }

    /// The outbox: replies in the thread.
    fn outbox(&self) -> Arc<dyn ChannelOutbox> {
        Arc::new(
            MatrixOutbox::new(self.client.clone()).with_image_policy(self.image_policy.clone()),
        )
    }

    /// Starts the sync loop ([`receive::start`]); it ends soon after `shutdown` is cancelled.
    fn start(
        &self,
        engine: EngineHandle,
        shutdown: CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        Some(receive::start(
            receive::Receiver {
                client: self.client.clone(),
                bot: self.bot.clone(),
                auto_join: self.auto_join,
                token_file: self.token_file.clone(),
                timeline_limit: self.timeline_limit,
            },
            engine,
            shutdown,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One store folder, one holder: a second claim (here, or from another process) is refused
    /// until the first holder lets go.
    #[test]
    fn a_store_folder_has_one_holder_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let first = claim_store(dir.path()).unwrap();
        match claim_store(dir.path()) {
            Err(Error::StoreInUse(path)) => assert_eq!(path, dir.path()),
            other => panic!("a second claim: {other:?}"),
        }
        drop(first);
        claim_store(dir.path()).expect("free again once the holder closed it");
    }
}
