//! Receiving (feature `engine`): the sync loop whose events feed FrogBot's engine, the auto-join
//! of invites, and the per-thread ordering of deliveries.
//!
//! More events than one sync returns (a burst, or a restart after a while) are fetched with
//! `/messages`, so none is skipped. Deliveries are ordered per thread: one queue and one worker
//! task per thread (messages) or per poll (its responses and reactions, which name the poll and
//! not its thread), handed to the engine in arrival order; different threads and polls
//! concurrently, while the next sync runs. A worker ends when its queue is idle.
//!
//! Whether a message talks to the bot: a mention, a reply to the bot, or any message in a room of
//! two (a DM). When the room's members cannot be listed (`/members` failed
//! [`MEMBERS_ATTEMPTS`] times), a room that the sync summary does not show as a group (more than
//! two joined) counts as a DM: a person's message is never dropped because a call failed.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use frogbot_channel::receive::{Recent, logged};
use frogbot_channel::{EngineHandle, MessageOutcome, RetryPolicy, ThreadExecutor, channel_chat_id};
use matrix_sdk::config::SyncSettings;
use matrix_sdk::deserialized_responses::TimelineEvent;
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
use matrix_sdk::{Client, Room, RoomMemberships};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use super::{NOT_ALLOWED_TEXT, read_token, save_token};
use crate::PLATFORM;
use crate::client::MatrixApi;
use crate::convert::{Incoming, IncomingMessage, classify};
use crate::ids::split_message_id;
use crate::render::mention_notice;
use frogbot_model::blocks::EventClick;

/// What the sync loop needs of a connected adapter.
#[derive(Clone, Debug)]
pub struct Receiver {
    /// The logged-in client.
    pub client: Client,
    /// The bot's user id (its own events are ignored).
    pub bot: OwnedUserId,
    /// Join rooms the bot is invited to.
    pub auto_join: bool,
    /// Where the token of the last handled sync is kept.
    pub token_file: PathBuf,
    /// Timeline events per room and sync.
    pub timeline_limit: u32,
}

/// The sync filter: `limit` timeline events per room.
pub(super) fn sync_filter(limit: u32) -> Filter {
    let mut def = FilterDefinition::default();
    def.room.timeline.limit = Some(UInt::from(limit.max(1)));
    Filter::FilterDefinition(def)
}

/// How many times `/members` is asked before a room's size counts as unknown.
pub const MEMBERS_ATTEMPTS: u32 = 3;
/// The wait after the first failed `/members` (then twice that, …).
pub const MEMBERS_BACKOFF: Duration = Duration::from_millis(200);

/// At most this many `/messages` pages (of `GAP_PAGE` events) fill one gap.
const GAP_PAGES: usize = 50;
const GAP_PAGE: u32 = 100;

/// The events of a gap in `room`'s timeline: those before `from` (a limited sync's `prev_batch`)
/// back to `to` (the token of the previous sync), oldest first.
async fn fill_gap(room: &Room, from: String, to: &str) -> Vec<Raw<AnySyncTimelineEvent>> {
    let mut out = Vec::new();
    let mut from = Some(from);
    for _ in 0..GAP_PAGES {
        let mut options = MessagesOptions::backward();
        options.from = from.take();
        options.to = Some(to.to_owned());
        options.limit = UInt::from(GAP_PAGE);
        match room.messages(options).await {
            Ok(messages) => {
                let done = messages.chunk.is_empty() || messages.end.is_none();
                out.extend(messages.chunk.into_iter().map(|e| e.into_raw()));
                from = messages.end;
                if !done {
                    continue;
                }
            }
            Err(e) => {
                warn!(room = %room.room_id(), error = %e, "could not fetch a Matrix timeline gap")
            }
        }
        out.reverse();
        return out;
    }
    warn!(room = %room.room_id(), events = out.len(), "Matrix timeline gap too long: older events skipped");
    out.reverse();
    out
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
    receiver: Receiver,
    engine: EngineHandle,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let client = receiver.client.clone();
    let mut handles: Vec<EventHandlerHandle> = Vec::new();
    let ctx = Arc::new(Ctx {
        engine,
        bot: receiver.bot.clone(),
        recent: Recent::new(RECENT_MESSAGES),
    });
    if receiver.auto_join {
        let bot = receiver.bot.clone();
        handles.push(
            client.add_event_handler(move |ev: StrippedRoomMemberEvent, room: Room| {
                let bot = bot.clone();
                async move {
                    if ev.state_key == bot && ev.content.membership == MembershipState::Invite {
                        tokio::spawn(join(room));
                    }
                }
            }),
        );
        for room in client.invited_rooms() {
            tokio::spawn(join(room));
        }
    }
    let token_file = receiver.token_file.clone();
    let filter = sync_filter(receiver.timeline_limit);
    tokio::spawn(async move {
        let mut since = read_token(&token_file);
        let workers = Workers {
            ctx,
            queues: ThreadExecutor::new(Duration::ZERO),
        };
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
            let pause = match result {
                Ok(response) => {
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
                    if !idle {
                        continue;
                    }
                    // A server that ignores the long-poll timeout is not hammered.
                    began + Duration::from_millis(500)
                }
                Err(e) => {
                    warn!(error = %e, "Matrix sync failed; retrying in 2 s");
                    tokio::time::Instant::now() + Duration::from_secs(2)
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep_until(pause) => {}
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

/// How many received syncs may be waiting for their events to be handled before the sync loop
/// waits too (bounds what is held in memory when handling falls behind).
const BATCHES_IN_FLIGHT: usize = 8;

/// The per-thread ordering: one queue, and one worker task, per order key
/// ([`Incoming::order_key`]: a message's thread; for a poll response or reaction, the poll it
/// answers). A key's events are handed to the engine in the order received, across syncs;
/// different keys concurrently. A worker ends when its queue is empty.
struct Workers {
    ctx: Arc<Ctx>,
    queues: ThreadExecutor,
}

impl Workers {
    /// Fills the gaps of one sync's joined rooms and hands their events to the workers.
    async fn dispatch_sync(
        &self,
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
                    Ok(Some(incoming)) => {
                        let (ctx, room, batch) = (self.ctx.clone(), room.clone(), batch.clone());
                        let key = incoming.order_key().to_owned();
                        self.queues.push(&key, async move {
                            ctx.on_incoming(incoming, &room).await;
                            drop(batch); // this sync's "handled" guard
                        });
                    }
                    Ok(None) => {}
                    Err(e) => warn!(room = %room_id, error = %e, "unreadable Matrix event ignored"),
                }
            }
        }
    }
}

/// The `m.thread` root of the event `e` (its `m.relates_to`), if it is in a thread.
fn thread_root(e: &TimelineEvent) -> Option<OwnedEventId> {
    let content = e.raw().get_field::<serde_json::Value>("content").ok()??;
    let rel = &content["m.relates_to"];
    (rel["rel_type"] == "m.thread")
        .then(|| OwnedEventId::try_from(rel["event_id"].as_str()?).ok())
        .flatten()
}

/// Joins a room the bot was invited to; Synapse may refuse a join that races the invite, so it
/// tries a few times (200 ms, then twice as long, … apart).
async fn join(room: Room) {
    let policy = RetryPolicy {
        attempts: 5,
        min_delay: Duration::from_millis(200),
        ..RetryPolicy::default()
    };
    let joined = policy.run_any(
        || room.join(),
        |e, _| {
            warn!(room = %room.room_id(), error = %e, "could not join Matrix room; trying again");
        },
    );
    match joined.await {
        Ok(()) => info!(room = %room.room_id(), "joined Matrix room"),
        Err(e) => warn!(room = %room.room_id(), error = %e, "could not join Matrix room"),
    }
}

struct Ctx {
    engine: EngineHandle,
    bot: OwnedUserId,
    /// The messages recently handed to the engine: their thread and author, so an edit or a
    /// redaction (which name only the message) reaches the right chat, from its author.
    recent: Recent<(String, String)>,
}

/// The most messages [`Ctx::recent`] remembers (a queued message is a recent one).
const RECENT_MESSAGES: usize = 10_000;

impl Ctx {
    async fn on_incoming(&self, incoming: Incoming, room: &Room) {
        match incoming {
            Incoming::Action(interaction) => {
                let span = info_span!("matrix_action", room = %room.room_id());
                let result = self.engine.interaction(PLATFORM, None, interaction);
                logged(
                    PLATFORM,
                    "poll response or reaction",
                    result.instrument(span).await,
                );
            }
            Incoming::Message(m) => self.on_message(m, room).await,
            Incoming::Event(click) => self.on_event(click, room).await,
            Incoming::Changed {
                message_id,
                sender,
                text,
            } => self.on_changed(message_id, sender, text).await,
        }
    }

    /// A person's edit (`text: Some`) or a redaction of a message: a message still queued is
    /// edited or removed. An edit counts only from the message's author (Matrix clients show
    /// only those too); a redaction from anyone the homeserver let redact it.
    async fn on_changed(&self, message_id: String, sender: String, text: Option<String>) {
        let Some((thread, author)) = self.recent.get(&message_id) else {
            return;
        };
        if text.is_some() && sender != author {
            debug!(message = %message_id, %sender, "an edit by someone other than the author ignored");
            return;
        }
        let span = info_span!("matrix_changed", message = %message_id);
        let result = self.engine.changed(PLATFORM, &thread, &message_id, text);
        logged(PLATFORM, "edit or redaction", result.instrument(span).await);
    }

    /// A person's event-button reaction on an agent message: the event goes to the agent's
    /// inbox (any number of times). The thread is the message's `m.thread` root, read from the
    /// message itself (the reaction names only the message).
    async fn on_event(&self, click: EventClick, room: &Room) {
        let Ok((_, target)) = split_message_id(&click.message_id) else {
            return;
        };
        let root = match room.event(&target, None).await {
            Ok(e) => thread_root(&e),
            Err(e) => {
                debug!(error = %e, "reading the message of an event click failed");
                None
            }
        };
        let thread = match root {
            Some(root) => crate::ids::message_id(room.room_id(), &root),
            None => click.message_id.clone(),
        };
        let span = info_span!("matrix_event_click", room = %room.room_id());
        let result = self.engine.event(PLATFORM, &thread, click);
        logged(
            PLATFORM,
            "event button click",
            result.instrument(span).await,
        );
    }

    /// How many members `room` has joined (`/members`, tried [`MEMBERS_ATTEMPTS`] times), or
    /// `None` when it cannot be read.
    async fn joined_members(&self, room: &Room) -> Option<usize> {
        let policy = RetryPolicy {
            attempts: MEMBERS_ATTEMPTS,
            min_delay: MEMBERS_BACKOFF,
            ..RetryPolicy::default()
        };
        let members = policy.run_any(
            || room.members(RoomMemberships::JOIN),
            |e, _| {
                debug!(room = %room.room_id(), error = %e, "listing room members failed");
            },
        );
        let members = members.await.inspect_err(|e| {
            debug!(room = %room.room_id(), error = %e, "listing room members failed: size unknown");
        });
        members.ok().map(|m| m.len())
    }

    async fn talks_to_bot(&self, m: &IncomingMessage, room: &Room) -> bool {
        if m.mentions_bot {
            return true;
        }
        // A room of two is a DM (the summary's counts may lag: ask for the members, cached after
        // the first call; tried again when the call fails).
        let members = match self.joined_members(room).await {
            Some(n) => n as u64,
            None => {
                // Not known: a room the summary does not show as a group is taken as a DM, so a
                // person's message is never dropped because a call failed.
                let summary = room.joined_members_count();
                warn!(room = %room.room_id(), summary, "could not list room members");
                summary
            }
        };
        members <= 2
            || room.is_direct().await.unwrap_or(false)
            || self.bot_event_replied_to(m, room).await.is_some()
    }

    /// The event `m` replies to, when the bot sent it.
    async fn bot_event_replied_to(
        &self,
        m: &IncomingMessage,
        room: &Room,
    ) -> Option<TimelineEvent> {
        let ev = room
            .load_or_fetch_event(m.reply_to.as_ref()?, None)
            .await
            .ok()?;
        let sender = ev.raw().get_field::<OwnedUserId>("sender").ok()??;
        (sender == self.bot).then_some(ev)
    }

    /// The thread of the bot's message a plain (non-thread) reply answers: its `m.thread` root,
    /// or the message itself when it is a root. `None` when `m` is in a thread, replies to
    /// nothing, or replies to someone else.
    async fn bot_thread_replied_to(&self, m: &IncomingMessage, room: &Room) -> Option<String> {
        if m.in_thread {
            return None;
        }
        let ev = self.bot_event_replied_to(m, room).await?;
        let root = thread_root(&ev).or_else(|| m.reply_to.clone())?;
        Some(crate::ids::message_id(room.room_id(), &root))
    }

    async fn on_message(&self, mut m: IncomingMessage, room: &Room) {
        // A plain reply to one of the bot's messages (Element's "Reply", not "Reply in thread")
        // continues the conversation that message belongs to, with its context; the answer
        // goes in that thread.
        let replied_to_bot = match self.bot_thread_replied_to(&m, room).await {
            Some(thread) => {
                m.thread = thread;
                m.in_thread = true;
                true
            }
            None => false,
        };
        let chat = channel_chat_id(PLATFORM, &m.thread);
        let span = info_span!("matrix_message", chat = %chat, message = %m.message.id);
        async {
            let known = m.in_thread
                && matches!(
                    self.engine.thread_known(PLATFORM, &m.thread).await,
                    Ok(true)
                );
            if !known && !replied_to_bot && !self.talks_to_bot(&m, room).await {
                return;
            }
            let author = m.message.author.id.clone();
            let noted = (m.thread.clone(), author.clone());
            self.recent.note(&m.message.id, noted);
            let message_event = split_message_id(&m.message.id).ok().map(|(_, e)| e);
            let result = self.engine.message(PLATFORM, &m.thread, m.message).await;
            if logged(PLATFORM, "message", result) == Some(MessageOutcome::Denied) {
                info!("message from a person without access");
                if let (Ok((room_id, root)), Ok(user)) =
                    (split_message_id(&m.thread), UserId::parse(author.as_str()))
                    && let Ok(c) = mention_notice(&user, NOT_ALLOWED_TEXT, &root, message_event)
                    && let Err(e) = MatrixApi::send(&room.client(), &room_id, c.0, c.1).await
                {
                    warn!(error = %e, "could not tell a person they have no access");
                }
            }
        }
        .instrument(span)
        .await
    }
}
