//! The fake homeserver's state, shared by its routes and `/sync`: the rooms and their events in
//! stream order, and [`FakeHomeserver`], the handle tests hold.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use frogbot_model::faults::FaultPlan;
use matrix_sdk::ruma::{OwnedRoomId, OwnedUserId};
use serde_json::Value;
use tokio::sync::Notify;

/// One event in the fake's rooms, in stream order.
#[derive(Clone, Debug)]
pub(super) struct Stored {
    pub(super) room: OwnedRoomId,
    /// The whole event (`type`, `event_id`, `sender`, `origin_server_ts`, `content`, and
    /// `state_key` for state).
    pub(super) event: Value,
}

#[derive(Debug, Default)]
pub(super) struct Inner {
    /// Every event of every room, in order; the sync token is a position in it.
    pub(super) events: Vec<Stored>,
    /// Rooms and their members.
    pub(super) rooms: HashMap<OwnedRoomId, Vec<OwnedUserId>>,
    /// Transaction ids already used (`room|txn` → event id).
    pub(super) txns: HashMap<String, String>,
    /// Paths the fake does not serve that were called (for debugging a test).
    pub(super) unknown: Vec<String>,
    /// The bot's typing notices (`PUT …/typing/{user}`): the room, the stream position (how
    /// many events came before it) and the body, in order.
    pub(super) typing: Vec<(OwnedRoomId, usize, Value)>,
    /// Whether redactions are refused (`M_FORBIDDEN`), to test what the bot does then.
    pub(super) refuse_redactions: bool,
    /// Which sends fail, and how.
    pub(super) faults: Option<Arc<FaultPlan>>,
    /// The rooms whose `/members` fails (`500`).
    pub(super) failing_members: Vec<OwnedRoomId>,
    /// Uploads to the media repository: the `mxc://` URI, content type and size, in order.
    pub(super) uploads: Vec<(String, String, usize)>,
    /// Upload requests, refused ones too.
    pub(super) upload_attempts: usize,
    /// The media repository's files by `mxc://` URI: content type and bytes (uploads, and files
    /// a test put there as a person's).
    pub(super) media: std::collections::HashMap<String, (String, Vec<u8>)>,
    /// How many media downloads were answered, and how many refused for want of the token.
    pub(super) downloads: (usize, usize),
    /// The largest event accepted (`None`: [`MAX_EVENT_BYTES`], as Synapse).
    pub(super) max_event_bytes: Option<usize>,
    /// How many sends were refused as too large (`413 M_TOO_LARGE`).
    pub(super) too_large: usize,
    pub(super) next: u64,
}

#[derive(Debug)]
pub(super) struct Shared {
    pub(super) bot: OwnedUserId,
    pub(super) inner: Mutex<Inner>,
    pub(super) changed: Notify,
}

impl Shared {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A fake Matrix homeserver on loopback, with one bot account (`@frogbot:fake.test`, password
/// [`BOT_PASSWORD`](super::BOT_PASSWORD)). It stops when dropped.
#[derive(Debug)]
pub struct FakeHomeserver {
    pub(super) url: String,
    pub(super) shared: Arc<Shared>,
    pub(super) task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeHomeserver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(super) type St = State<Arc<Shared>>;
