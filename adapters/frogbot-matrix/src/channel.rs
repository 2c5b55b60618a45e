//! The engine glue `frogbot serve` uses (feature `engine`): logs in (password or access token) or
//! restores the session saved beside matrix-sdk's own SQLite store, joins rooms it is invited to
//! (configurable), and runs the sync loop whose event handlers feed FrogBot's engine.
//!
//! Conversations: in a DM (a room of two) every message talks to the bot; in a room a mention or a
//! reply to the bot does, and so does any message in a thread that already is a FrogBot chat. The
//! bot answers in an `m.thread` on the message, so one thread is one chat. Poll responses and
//! reactions go to the question engine, routed by the poll's event id.
//!
//! More events than one sync returns (a burst, or a restart after a while) are fetched with
//! `/messages`, so none is skipped. Messages of one thread, and responses on one poll, are handled
//! in order by one worker; different threads and polls concurrently, while the next sync runs.
//!
//! What it must not do: replay old events, or skip new ones. A fresh login syncs once and handles
//! nothing of it (history is skipped); a restored session resumes from the token of the last
//! handled sync (saved beside the store), so only events sent while the bot was away are
//! delivered. Own events are ignored. It keeps no FrogBot state: the engine and its store decide
//! everything.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use frogbot_model::BoxError;
use frogbot_core::agent::{
    AccessCheck, Channel, ChannelMessageOutcome, ChannelOutbox, Engine, channel_chat_id,
};
use frogbot_model::{ChannelQuestions, IdentityResolver, Thread, UiMessage};
use matrix_sdk::authentication::matrix::MatrixSession;
use matrix_sdk::config::SyncSettings;
use matrix_sdk::event_handler::EventHandlerHandle;
use matrix_sdk::room::MessagesOptions;
use matrix_sdk::ruma::UInt;
use matrix_sdk::ruma::api::client::filter::FilterDefinition;
use matrix_sdk::ruma::api::client::sync::sync_events::v3::Filter;
use matrix_sdk::ruma::events::AnySyncTimelineEvent;
use matrix_sdk::ruma::events::room::member::{MembershipState, StrippedRoomMemberEvent};
use matrix_sdk::ruma::serde::Raw;
use matrix_sdk::ruma::{OwnedEventId, OwnedRoomId, OwnedUserId, UserId};
use matrix_sdk::sync::JoinedRoomUpdate;
use matrix_sdk::{Client, Room, RoomMemberships, SessionMeta, SessionTokens};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::client::MatrixApi;
use crate::convert::{Incoming, IncomingMessage, classify, split_message_id};
use crate::render::{PollEvents, mention_notice, thread_message};
use crate::{Error, MatrixQuestions, PLATFORM};

/// What a person who fails the access check is told.
pub const NOT_ALLOWED_TEXT: &str = "you are not allowed to talk to this bot.";

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

/// How to connect.
#[derive(Clone, Debug)]
pub struct MatrixSettings {
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
}

impl MatrixSettings {
    /// Settings with the defaults: auto-join on, stable poll events, no store passphrase.
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
            poll_events: PollEvents::Stable,
            sync_timeline_limit: 100,
        }
    }
}

/// A logged-in bot, ready to be started with an engine.
#[derive(Clone, Debug)]
pub struct MatrixChannel {
    client: Client,
    bot: OwnedUserId,
    auto_join: bool,
    questions: Arc<MatrixQuestions<Client>>,
    token_file: PathBuf,
    timeline_limit: u32,
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

/// The sync filter: `limit` timeline events per room.
fn sync_filter(limit: u32) -> Filter {
    let mut def = FilterDefinition::default();
    def.room.timeline.limit = Some(UInt::from(limit.max(1)));
    Filter::FilterDefinition(def)
}

/// At most this many `/messages` pages (of [`GAP_PAGE`] events) fill one gap.
const GAP_PAGES: usize = 50;
const GAP_PAGE: u32 = 100;

/// The events of a gap in `room`'s timeline: those before `from` (a limited sync's `prev_batch`)
/// back to `to` (the token of the previous sync), oldest first.
async fn fill_gap(room: &Room, from: String, to: &str) -> Vec<Raw<AnySyncTimelineEvent>> {
    let mut out = Vec::new();
    let mut from = Some(from);
    for page in 0.. {
        if page == GAP_PAGES {
            warn!(room = %room.room_id(), events = out.len(), "Matrix timeline gap too long: older events skipped");
            break;
        }
        let mut options = MessagesOptions::backward();
        options.from = from.take();
        options.to = Some(to.to_owned());
        options.limit = UInt::from(GAP_PAGE);
        match room.messages(options).await {
            Ok(messages) => {
                let done = messages.chunk.is_empty() || messages.end.is_none();
                out.extend(messages.chunk.into_iter().map(|e| e.into_raw()));
                if done {
                    break;
                }
                from = messages.end;
            }
            Err(e) => {
                warn!(room = %room.room_id(), error = %e, "could not fetch a Matrix timeline gap");
                break;
            }
        }
    }
    out.reverse();
    out
}

fn login_err(e: impl std::fmt::Display) -> Error {
    Error::Login(e.to_string())
}

impl MatrixChannel {
    /// Logs in, or restores the session saved by an earlier start (no new login, no replay).
    pub async fn connect(settings: MatrixSettings) -> Result<Self, Error> {
        let span = info_span!("matrix_connect", user = %settings.user_id);
        async move {
            std::fs::create_dir_all(&settings.store_path).map_err(login_err)?;
            let client = Client::builder()
                .homeserver_url(&settings.homeserver)
                .sqlite_store(&settings.store_path, settings.store_passphrase.as_deref())
                .build()
                .await
                .map_err(login_err)?;
            let file = session_file(&settings.store_path);
            let saved: Option<MatrixSession> = match std::fs::read(&file) {
                Ok(bytes) => Some(serde_json::from_slice(&bytes).map_err(|e| {
                    Error::Login(format!("unreadable saved session {}: {e}", file.display()))
                })?),
                Err(_) => None,
            };
            let fresh = match saved {
                Some(session) => {
                    if session.meta.user_id != settings.user_id {
                        return Err(Error::Login(format!(
                            "the store at {} belongs to {}, not {}",
                            settings.store_path.display(),
                            session.meta.user_id,
                            settings.user_id
                        )));
                    }
                    client.restore_session(session).await.map_err(login_err)?;
                    info!("restored the saved Matrix session");
                    false
                }
                None => {
                    match &settings.login {
                        Login::Password(password) => {
                            client
                                .matrix_auth()
                                .login_username(&settings.user_id, password)
                                .initial_device_display_name("FrogBot")
                                .await
                                .map_err(login_err)?;
                        }
                        Login::AccessToken(token) => {
                            let session = MatrixSession {
                                meta: SessionMeta {
                                    user_id: settings.user_id.clone(),
                                    device_id: "UNKNOWN".into(),
                                },
                                tokens: SessionTokens {
                                    access_token: token.clone(),
                                    refresh_token: None,
                                },
                            };
                            // whoami needs a token: ask with a throwaway client.
                            let probe = Client::builder()
                                .homeserver_url(&settings.homeserver)
                                .build()
                                .await
                                .map_err(login_err)?;
                            probe
                                .restore_session(session.clone())
                                .await
                                .map_err(login_err)?;
                            let who = probe.whoami().await.map_err(login_err)?;
                            if who.user_id != settings.user_id {
                                return Err(Error::Login(format!(
                                    "the access token belongs to {}, not {}",
                                    who.user_id, settings.user_id
                                )));
                            }
                            let device = who.device_id.ok_or_else(|| {
                                Error::Login("the access token has no device".into())
                            })?;
                            client
                                .restore_session(MatrixSession {
                                    meta: SessionMeta {
                                        user_id: settings.user_id.clone(),
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
            let tokens = token_file(&settings.store_path);
            if fresh {
                // Skip history: one sync before anything is handled.
                let first = client
                    .sync_once(SyncSettings::default().filter(sync_filter(1)))
                    .await
                    .map_err(|e| Error::Api {
                        call: "sync",
                        message: e.to_string(),
                    })?;
                save_token(&tokens, &first.next_batch).map_err(login_err)?;
            }
            let questions = Arc::new(
                MatrixQuestions::new(client.clone()).with_poll_events(settings.poll_events),
            );
            Ok(Self {
                client,
                bot: settings.user_id,
                auto_join: settings.auto_join,
                questions,
                token_file: tokens,
                timeline_limit: settings.sync_timeline_limit,
            })
        }
        .instrument(span)
        .await
    }

    /// The matrix-sdk client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The bot's user id.
    pub fn user_id(&self) -> &UserId {
        &self.bot
    }

    /// The question hooks (native polls).
    pub fn questions(&self) -> Arc<dyn ChannelQuestions> {
        self.questions.clone()
    }

    /// The outbox: replies in the thread.
    pub fn outbox(&self) -> Arc<dyn ChannelOutbox> {
        Arc::new(MatrixOutbox {
            client: self.client.clone(),
        })
    }

    /// What the engine needs for this channel.
    pub fn channel(
        &self,
        identity: Arc<dyn IdentityResolver>,
        access: Arc<dyn AccessCheck>,
    ) -> Channel {
        Channel {
            platform: PLATFORM.into(),
            questions: Some(self.questions()),
            identity,
            access,
            outbox: Some(self.outbox()),
        }
    }

    /// Starts the sync loop; it ends soon after `shutdown` is cancelled (and its handlers are
    /// removed).
    ///
    /// A sync's gap (more events than its timeline limit) is first filled from `/messages`; then
    /// its events go to one worker per thread (messages) or per target event (poll responses,
    /// reactions): a key's events in order, across syncs, different keys concurrently, and the next
    /// sync starts at once (at most 8 syncs wait to be handled). The token of a sync whose events,
    /// and every earlier sync's, are handled is saved beside the store, and the next start resumes
    /// from it, so a crash while handling delivers those events again (the engine takes a repeated
    /// message once). On shutdown the events already received are handled first.
    pub fn start(
        &self,
        engine: Engine,
        shutdown: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let client = self.client.clone();
        let mut handles: Vec<EventHandlerHandle> = Vec::new();
        let ctx = Arc::new(Ctx {
            engine,
            bot: self.bot.clone(),
        });
        if self.auto_join {
            let bot = self.bot.clone();
            handles.push(client.add_event_handler(
                move |ev: StrippedRoomMemberEvent, room: Room| {
                    let bot = bot.clone();
                    async move {
                        if ev.state_key == bot && ev.content.membership == MembershipState::Invite {
                            tokio::spawn(join(room));
                        }
                    }
                },
            ));
            for room in client.invited_rooms() {
                tokio::spawn(join(room));
            }
        }
        let token_file = self.token_file.clone();
        let filter = sync_filter(self.timeline_limit);
        tokio::spawn(async move {
            let mut since = read_token(&token_file);
            let workers = Arc::new(Workers {
                ctx,
                queues: Mutex::new(HashMap::new()),
            });
            // Saves each sync's token once its events, and every earlier sync's, are handled; at
            // most BATCHES_IN_FLIGHT syncs wait for that (then the sync loop waits too).
            let (commit, mut pending) =
                mpsc::channel::<(String, mpsc::Receiver<()>)>(BATCHES_IN_FLIGHT);
            let committer = tokio::spawn(async move {
                while let Some((token, mut handled)) = pending.recv().await {
                    let _ = handled.recv().await; // None once every event of the batch is done
                    if let Err(e) = save_token(&token_file, &token) {
                        warn!(error = %e, file = %token_file.display(), "could not save the Matrix sync token");
                    }
                }
            });
            loop {
                let mut settings = SyncSettings::default()
                    .timeout(Duration::from_secs(30))
                    .filter(filter.clone());
                if let Some(t) = &since {
                    settings = settings.token(t.clone());
                }
                let began = tokio::time::Instant::now();
                let result = tokio::select! {
                    _ = shutdown.cancelled() => break,
                    r = client.sync_once(settings) => r,
                };
                match result {
                    Ok(response) => {
                        // A server that ignores the long-poll timeout is not hammered.
                        let idle = response.rooms.is_empty();
                        let (batch, handled) = mpsc::channel::<()>(1);
                        workers
                            .dispatch_sync(&client, response.rooms.joined, since.as_deref(), &batch)
                            .await;
                        drop(batch);
                        if commit
                            .send((response.next_batch.clone(), handled))
                            .await
                            .is_err()
                        {
                            break;
                        }
                        since = Some(response.next_batch);
                        if idle {
                            tokio::select! {
                                _ = shutdown.cancelled() => break,
                                _ = tokio::time::sleep_until(began + Duration::from_millis(500)) => {}
                            }
                        }
                    }
                    Err(e) => {
                        warn!(error = %e, "Matrix sync failed; retrying in 2 s");
                        tokio::select! {
                            _ = shutdown.cancelled() => break,
                            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                        }
                    }
                }
            }
            // Let the events already received finish (and their tokens be saved).
            drop(commit);
            let _ = committer.await;
            for h in handles {
                client.remove_event_handler(h);
            }
            info!("Matrix sync stopped");
        })
    }
}

/// How many received syncs may be waiting for their events to be handled before the sync loop
/// waits too (bounds what is held in memory when handling falls behind).
const BATCHES_IN_FLIGHT: usize = 8;

/// One job of a [`Workers`] queue: an event, and its sync's "handled" guard (dropped when done).
struct Job {
    incoming: Incoming,
    room: Room,
    _batch: mpsc::Sender<()>,
}

/// One worker task per order key ([`Incoming::order_key`]): a key's events are handled in the
/// order received, across syncs; different keys concurrently. A worker ends when its queue is
/// empty.
struct Workers {
    ctx: Arc<Ctx>,
    queues: Mutex<HashMap<String, mpsc::UnboundedSender<Job>>>,
}

impl Workers {
    /// Fills the gaps of one sync's joined rooms and hands their events to the workers.
    async fn dispatch_sync(
        self: &Arc<Self>,
        client: &Client,
        joined: BTreeMap<OwnedRoomId, JoinedRoomUpdate>,
        since: Option<&str>,
        batch: &mpsc::Sender<()>,
    ) {
        for (room_id, update) in joined {
            let Some(room) = client.get_room(&room_id) else {
                continue;
            };
            let mut events = match (update.timeline.limited, update.timeline.prev_batch, since) {
                (true, Some(from), Some(to)) => fill_gap(&room, from, to).await,
                _ => Vec::new(),
            };
            events.extend(update.timeline.events.into_iter().map(|e| e.into_raw()));
            let mut seen = HashSet::new();
            for raw in events {
                if let Ok(Some(id)) = raw.get_field::<OwnedEventId>("event_id")
                    && !seen.insert(id)
                {
                    continue;
                }
                match classify(&raw, &room_id, &self.ctx.bot) {
                    Ok(Some(incoming)) => self.dispatch(Job {
                        incoming,
                        room: room.clone(),
                        _batch: batch.clone(),
                    }),
                    Ok(None) => {}
                    Err(e) => warn!(room = %room_id, error = %e, "unreadable Matrix event ignored"),
                }
            }
        }
    }

    fn dispatch(self: &Arc<Self>, job: Job) {
        let key = job.incoming.order_key().to_owned();
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let job = match queues.get(&key) {
            Some(queue) => match queue.send(job) {
                Ok(()) => return,
                Err(mpsc::error::SendError(job)) => job,
            },
            None => job,
        };
        let (queue, jobs) = mpsc::unbounded_channel();
        let _ = queue.send(job);
        queues.insert(key.clone(), queue);
        drop(queues);
        tokio::spawn(self.clone().run(key, jobs).in_current_span());
    }

    async fn run(self: Arc<Self>, key: String, mut jobs: mpsc::UnboundedReceiver<Job>) {
        loop {
            while let Ok(job) = jobs.try_recv() {
                self.ctx.on_incoming(job.incoming, &job.room).await;
            }
            // Leave only with an empty queue, deciding under the lock `dispatch` sends under.
            let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            if jobs.is_empty() {
                queues.remove(&key);
                return;
            }
        }
    }
}

/// Joins a room the bot was invited to; Synapse may refuse a join that races the invite, so it
/// tries a few times.
async fn join(room: Room) {
    let mut delay = Duration::from_millis(200);
    for attempt in 1..=5 {
        match room.join().await {
            Ok(()) => {
                info!(room = %room.room_id(), "joined Matrix room");
                return;
            }
            Err(e) => {
                warn!(room = %room.room_id(), attempt, error = %e, "could not join Matrix room");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
        }
    }
}

struct Ctx {
    engine: Engine,
    bot: OwnedUserId,
}

impl Ctx {
    async fn on_incoming(&self, incoming: Incoming, room: &Room) {
        match incoming {
            Incoming::Action(interaction) => {
                let span = info_span!("matrix_action", room = %room.room_id());
                match self
                    .engine
                    .handle_interaction(PLATFORM, None, &interaction)
                    .instrument(span)
                    .await
                {
                    Ok(outcome) => debug!(?outcome, "Matrix poll response or reaction handled"),
                    Err(e) => warn!(error = %e, "Matrix interaction failed"),
                }
            }
            Incoming::Message(m) => self.on_message(m, room).await,
        }
    }

    async fn talks_to_bot(&self, m: &IncomingMessage, room: &Room) -> bool {
        if m.mentions_bot {
            return true;
        }
        // A room of two is a DM (the summary's counts may lag: ask for the members, cached after
        // the first call).
        match room.members(RoomMemberships::JOIN).await {
            Ok(members) if members.len() <= 2 => return true,
            Ok(_) => {}
            Err(e) => warn!(room = %room.room_id(), error = %e, "could not list room members"),
        }
        if room.is_direct().await.unwrap_or(false) {
            return true;
        }
        if let Some(reply_to) = &m.reply_to
            && let Ok(ev) = room.load_or_fetch_event(reply_to, None).await
            && let Ok(sender) = ev.raw().get_field::<OwnedUserId>("sender")
        {
            return sender.as_deref() == Some(self.bot.as_ref());
        }
        false
    }

    async fn on_message(&self, m: IncomingMessage, room: &Room) {
        let chat = channel_chat_id(PLATFORM, &m.thread);
        let span = info_span!("matrix_message", chat = %chat, message = %m.message.id);
        async {
            let known = m.in_thread
                && matches!(
                    self.engine.channel_thread_known(PLATFORM, &m.thread).await,
                    Ok(true)
                );
            if !known && !self.talks_to_bot(&m, room).await {
                return;
            }
            let author = m.message.author.id.clone();
            let message_event = split_message_id(&m.message.id).ok().map(|(_, e)| e);
            match self
                .engine
                .channel_message(PLATFORM, &m.thread, m.message)
                .await
            {
                Ok(ChannelMessageOutcome::Denied) => {
                    info!("message from a person without access");
                    if let (Ok((room_id, root)), Ok(user)) =
                        (split_message_id(&m.thread), UserId::parse(author.as_str()))
                        && let Ok(c) = mention_notice(&user, NOT_ALLOWED_TEXT, &root, message_event)
                        && let Err(e) = MatrixApi::send(&room.client(), &room_id, c.0, c.1).await
                    {
                        warn!(error = %e, "could not tell a person they have no access");
                    }
                }
                Ok(outcome) => debug!(?outcome, "Matrix message handled"),
                Err(e) => warn!(error = %e, "Matrix message could not be handled"),
            }
        }
        .instrument(span)
        .await
    }
}

/// Posts the agent's replies in the thread.
#[derive(Debug)]
struct MatrixOutbox {
    client: Client,
}

#[async_trait]
impl ChannelOutbox for MatrixOutbox {
    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        let text = reply.text();
        if text.trim().is_empty() {
            return Ok(());
        }
        let (room, root) = split_message_id(&thread.id)?;
        let c = thread_message(&text, &root)?;
        MatrixApi::send(&self.client, &room, c.0, c.1).await?;
        Ok(())
    }
}
