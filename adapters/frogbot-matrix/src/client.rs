//! The thin client layer: [`MatrixApi`] sends one room event and returns its id, redacts one,
//! sends typing notices and reads a thread's events and a member's name; implemented for
//! matrix-sdk's [`Client`](matrix_sdk::Client) (which encrypts in encrypted rooms) and by
//! [`RecordingMatrix`] (records what would be sent, for unit tests). No retries or decisions here:
//! matrix-sdk's HTTP layer retries transient failures and honours 429s.

use std::sync::Mutex;

use async_trait::async_trait;
use matrix_sdk::ruma::{EventId, OwnedEventId, RoomId, UserId};
use serde_json::Value;

use crate::Error;

/// What the question hooks and the outbox need from Matrix.
#[async_trait]
pub trait MatrixApi: Send + Sync {
    /// Sends a message-like event of `event_type` with `content` to `room`; returns its event id.
    async fn send(
        &self,
        room: &RoomId,
        event_type: &str,
        content: Value,
    ) -> Result<OwnedEventId, Error>;

    /// Redacts the event `event` of `room` (`PUT /rooms/{room}/redact/{event}/{txn}`).
    async fn redact(
        &self,
        room: &RoomId,
        event: &EventId,
        reason: Option<&str>,
    ) -> Result<(), Error>;

    /// The bot's typing notice in `room` (`PUT /rooms/{room}/typing/{bot}`): on for a few
    /// seconds (`true`), or off.
    async fn typing(&self, room: &RoomId, typing: bool) -> Result<(), Error>;

    /// The thread on `root`: the root event, then its newest `limit` thread events
    /// (`/rooms/{room}/relations/{root}/m.thread`), oldest first, as JSON (decrypted where the
    /// client can).
    async fn thread_events(
        &self,
        room: &RoomId,
        root: &EventId,
        limit: usize,
    ) -> Result<Vec<Value>, Error>;

    /// The display name `user` has in `room` (their member event), if any.
    async fn member_name(&self, room: &RoomId, user: &UserId) -> Option<String>;
}

#[async_trait]
impl MatrixApi for matrix_sdk::Client {
    async fn send(
        &self,
        room: &RoomId,
        event_type: &str,
        content: Value,
    ) -> Result<OwnedEventId, Error> {
        let joined = self
            .get_room(room)
            .ok_or_else(|| Error::UnknownRoom(room.to_string()))?;
        let sent = joined
            .send_raw(event_type, content)
            .await
            .map_err(|e| Error::Api {
                call: "send",
                message: e.to_string(),
            })?;
        Ok(sent.response.event_id)
    }

    async fn redact(
        &self,
        room: &RoomId,
        event: &EventId,
        reason: Option<&str>,
    ) -> Result<(), Error> {
        let joined = self
            .get_room(room)
            .ok_or_else(|| Error::UnknownRoom(room.to_string()))?;
        joined
            .redact(event, reason, None)
            .await
            .map_err(|e| Error::Api {
                call: "redact",
                message: e.to_string(),
            })?;
        Ok(())
    }

    /// matrix-sdk's `typing_notice`: a notice of 4 seconds, sent again only once 3 seconds have
    /// passed since the last one.
    async fn typing(&self, room: &RoomId, typing: bool) -> Result<(), Error> {
        let joined = self
            .get_room(room)
            .ok_or_else(|| Error::UnknownRoom(room.to_string()))?;
        joined.typing_notice(typing).await.map_err(|e| Error::Api {
            call: "typing",
            message: e.to_string(),
        })
    }

    /// matrix-sdk's `Room::relations` (type `m.thread`, backwards) and `Room::event` (the root).
    async fn thread_events(
        &self,
        room: &RoomId,
        root: &EventId,
        limit: usize,
    ) -> Result<Vec<Value>, Error> {
        use matrix_sdk::room::{IncludeRelations, RelationsOptions};
        use matrix_sdk::ruma::api::Direction;
        use matrix_sdk::ruma::events::relation::RelationType;

        let joined = self
            .get_room(room)
            .ok_or_else(|| Error::UnknownRoom(room.to_string()))?;
        let api = |call: &'static str| {
            move |e: matrix_sdk::Error| Error::Api {
                call,
                message: e.to_string(),
            }
        };
        let opts = RelationsOptions {
            dir: Direction::Backward,
            limit: matrix_sdk::ruma::UInt::new(limit.min(1_000) as u64),
            include_relations: IncludeRelations::RelationsOfType(RelationType::Thread),
            ..Default::default()
        };
        let related = joined
            .relations(root.to_owned(), opts)
            .await
            .map_err(api("relations"))?;
        let first = joined.event(root, None).await.map_err(api("event"))?;
        let json = |e: &matrix_sdk::deserialized_responses::TimelineEvent| {
            e.raw().deserialize_as::<Value>().ok()
        };
        let mut events: Vec<Value> = related.chunk.iter().rev().filter_map(json).collect();
        if let Some(root) = json(&first) {
            events.insert(0, root);
        }
        Ok(events)
    }

    async fn member_name(&self, room: &RoomId, user: &UserId) -> Option<String> {
        let joined = self.get_room(room)?;
        let member = joined.get_member(user).await.ok()??;
        member.display_name().map(str::to_owned)
    }
}

#[async_trait]
impl<A: MatrixApi + ?Sized> MatrixApi for std::sync::Arc<A> {
    async fn send(
        &self,
        room: &RoomId,
        event_type: &str,
        content: Value,
    ) -> Result<OwnedEventId, Error> {
        (**self).send(room, event_type, content).await
    }

    async fn redact(
        &self,
        room: &RoomId,
        event: &EventId,
        reason: Option<&str>,
    ) -> Result<(), Error> {
        (**self).redact(room, event, reason).await
    }

    async fn typing(&self, room: &RoomId, typing: bool) -> Result<(), Error> {
        (**self).typing(room, typing).await
    }

    async fn thread_events(
        &self,
        room: &RoomId,
        root: &EventId,
        limit: usize,
    ) -> Result<Vec<Value>, Error> {
        (**self).thread_events(room, root, limit).await
    }

    async fn member_name(&self, room: &RoomId, user: &UserId) -> Option<String> {
        (**self).member_name(room, user).await
    }
}

/// One event a [`RecordingMatrix`] was asked to send (a redaction: `m.room.redaction` with
/// `{"redacts": id}`; a typing notice: `m.typing` with `{"typing": bool}`).
#[derive(Clone, Debug, PartialEq)]
pub struct SentEvent {
    /// The room.
    pub room: String,
    /// The event type.
    pub event_type: String,
    /// The content.
    pub content: Value,
}

/// A [`MatrixApi`] that sends nothing: it records every event and answers with the ids `$sent1`,
/// `$sent2`, … (for unit tests of the hooks; the fake homeserver in `testing` is the whole
/// platform).
#[derive(Debug, Default)]
pub struct RecordingMatrix {
    sent: Mutex<Vec<SentEvent>>,
    count: std::sync::atomic::AtomicUsize,
}

impl RecordingMatrix {
    /// A recorder with nothing sent.
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything sent so far, in order.
    pub fn sent(&self) -> Vec<SentEvent> {
        self.sent.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Forgets what was sent (the ids keep counting).
    pub fn clear(&self) {
        self.sent.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

impl RecordingMatrix {
    fn record(&self, room: &RoomId, event_type: &str, content: Value) -> usize {
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        sent.push(SentEvent {
            room: room.to_string(),
            event_type: event_type.to_owned(),
            content,
        });
        1 + self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait]
impl MatrixApi for RecordingMatrix {
    async fn send(
        &self,
        room: &RoomId,
        event_type: &str,
        content: Value,
    ) -> Result<OwnedEventId, Error> {
        let n = self.record(room, event_type, content);
        OwnedEventId::try_from(format!("$sent{n}")).map_err(|e| Error::Event(e.to_string()))
    }

    async fn redact(
        &self,
        room: &RoomId,
        event: &EventId,
        reason: Option<&str>,
    ) -> Result<(), Error> {
        let mut content = serde_json::json!({"redacts": event});
        if let Some(r) = reason {
            content["reason"] = r.into();
        }
        self.record(room, "m.room.redaction", content);
        Ok(())
    }

    async fn typing(&self, room: &RoomId, typing: bool) -> Result<(), Error> {
        self.record(room, "m.typing", serde_json::json!({"typing": typing}));
        Ok(())
    }

    /// None: a recorder has no room history to read.
    async fn thread_events(
        &self,
        _room: &RoomId,
        _root: &EventId,
        _limit: usize,
    ) -> Result<Vec<Value>, Error> {
        Ok(Vec::new())
    }

    async fn member_name(&self, _room: &RoomId, _user: &UserId) -> Option<String> {
        None
    }
}
