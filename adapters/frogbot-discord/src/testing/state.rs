//! The fake Discord's state, shared by its HTTP API and its gateway: the recorded calls, the
//! messages, channels and interactions it keeps, the gateway sessions, and [`FakeDiscord`], the
//! handle tests hold.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use frogbot_model::faults::FaultPlan;
use serde_json::Value;
use tokio::sync::{Notify, mpsc};

/// One recorded HTTP call.
#[derive(Clone, Debug)]
pub struct Call {
    /// `GET`, `POST`, `PATCH`, …
    pub method: String,
    /// The path, e.g. `/api/v10/channels/1/messages`.
    pub path: String,
    /// The JSON body (`null` when there was none); of a `multipart/form-data` request, its
    /// `payload_json` part.
    pub body: Value,
    /// The file parts of a `multipart/form-data` request, in order: `{"name": "files[0]",
    /// "filename", "content_type", "size"}` (the bytes are kept with the message posted:
    /// [`FakeDiscord::uploads`]).
    pub files: Vec<Value>,
    /// The HTTP status the fake answered.
    pub status: u16,
    /// What the fake answered (`null` for an empty response).
    pub response: Value,
    /// When it arrived.
    pub at: Instant,
}

/// An identified gateway session: the shard it identified as (`[id, total]`) and where its
/// dispatches go.
#[derive(Debug)]
pub(super) struct Session {
    pub(super) number: u64,
    pub(super) shard: (u64, u64),
    pub(super) tx: mpsc::UnboundedSender<String>,
}

impl Session {
    /// Whether Discord sends this session a dispatch of `guild` (`None`: a DM, shard 0 only):
    /// `(guild_id >> 22) % total == id`.
    pub(super) fn receives(&self, guild: Option<u64>) -> bool {
        let (id, total) = self.shard;
        match guild {
            Some(g) => (g >> 22) % total.max(1) == id,
            None => id == 0,
        }
    }
}

/// An interaction the fake delivered (or was told about): whose it is and whether it was answered.
#[derive(Clone, Debug)]
pub(super) struct Issued {
    pub(super) id: String,
    pub(super) user: String,
    /// The channel it came from (where its responses show).
    pub(super) channel: String,
    pub(super) responded: bool,
}

#[derive(Debug, Default)]
pub(super) struct Inner {
    pub(super) calls: Mutex<Vec<Call>>,
    /// The global application commands (`PUT /applications/{app}/commands`).
    pub(super) commands: Mutex<Vec<Value>>,
    /// Each guild's application commands (`PUT /applications/{app}/guilds/{guild}/commands`).
    pub(super) guild_commands: Mutex<std::collections::BTreeMap<String, Vec<Value>>>,
    pub(super) changed: Notify,
    pub(super) next_id: AtomicU64,
    pub(super) seq: AtomicU64,
    pub(super) sessions: Mutex<Vec<Session>>,
    /// The number of shards `GET /gateway/bot` recommends (0: 1).
    pub(super) shards: AtomicU64,
    /// How many sessions each guild's dispatches were handed to, by guild id.
    pub(super) deliveries: Mutex<HashMap<u64, u64>>,
    pub(super) identifies: Mutex<Vec<Value>>,
    pub(super) heartbeats: AtomicU64,
    pub(super) readies: AtomicU64,
    pub(super) app_id: u64,
    pub(super) bot_id: u64,
    pub(super) gateway_url: Mutex<String>,
    pub(super) heartbeat_ms: u64,
    /// Messages by id (what the bot posted and what users said through the fake).
    pub(super) messages: Mutex<HashMap<String, Value>>,
    /// Interactions by token.
    pub(super) interactions: Mutex<HashMap<String, Issued>>,
    /// Whether removing the bot's reactions is refused (`403 Missing Access`).
    pub(super) refuse_unreact: std::sync::atomic::AtomicBool,
    /// Channels that are threads (no thread can be started on their messages).
    pub(super) threads: Mutex<std::collections::HashSet<String>>,
    /// Messages a thread was started from (a second start is refused, `160004`).
    pub(super) started: Mutex<std::collections::HashSet<String>>,
    /// The bot's message nonces (with `enforce_nonce`): nonce → (message id, when).
    pub(super) nonces: Mutex<HashMap<String, (String, Instant)>>,
    /// Channel objects by id (`GET /channels/{id}`): text channels, threads, DM channels.
    pub(super) channels: Mutex<HashMap<String, Value>>,
    /// The users the bot can open a DM with, by id.
    pub(super) users: Mutex<HashMap<String, Value>>,
    /// The DM channel of each user (one each, as Discord keeps it).
    pub(super) dms: Mutex<HashMap<String, String>>,
    /// Injected faults on the write endpoints.
    pub(super) faults: Mutex<Option<Arc<FaultPlan>>>,
    /// The pinned messages: (channel, message) in the order they were pinned.
    pub(super) pins: Mutex<Vec<(String, String)>>,
    /// The messages deleted, as they were.
    pub(super) deleted: Mutex<Vec<Value>>,
    /// What only one person sees: ephemeral interaction responses and followups, and the modals
    /// opened, each a message object with an id in snowflake order, its `channel_id` and
    /// `only_for` (the user id); a modal has `modal` (its `data`).
    pub(super) ephemerals: Mutex<Vec<Value>>,
    /// How long a [`Fault::Timeout`] holds its request (`None`: [`DEFAULT_FAULT_HOLD`]).
    pub(super) fault_hold: Mutex<Option<Duration>>,
    /// The bot token `GET /users/@me` and `GET /applications/@me` accept (any when `None`):
    /// another gets Discord's `401: Unauthorized`.
    pub(super) token: Mutex<Option<String>>,
    /// The application's `flags` (`GET /applications/@me`); `None`: the Message Content intent
    /// on for an app in under 100 servers (`GATEWAY_MESSAGE_CONTENT_LIMITED`, `1 << 19`).
    pub(super) app_flags: Mutex<Option<u64>>,
    /// Attachments on the fake CDN (`/attachments/{channel}/{id}/{name}`), people's and the
    /// bot's uploads: path → (media type, bytes).
    pub(super) attachments: Mutex<HashMap<String, (String, Vec<u8>)>>,
    /// The HTTP base URL (`http://127.0.0.1:PORT`): the CDN's too.
    pub(super) api_url: Mutex<String>,
    /// The upload limit of one request's files together (`None`:
    /// [`DEFAULT_UPLOAD_LIMIT`](super::DEFAULT_UPLOAD_LIMIT)).
    pub(super) upload_limit: Mutex<Option<u64>>,
}

/// A running fake Discord (its servers live as long as the Tokio runtime).
#[derive(Clone, Debug)]
pub struct FakeDiscord {
    pub(super) inner: Arc<Inner>,
    /// The HTTP base URL to give `HttpBuilder::proxy` (`http://127.0.0.1:PORT`).
    pub api_url: String,
    /// The gateway URL (`ws://127.0.0.1:PORT`).
    pub gateway_url: String,
}
