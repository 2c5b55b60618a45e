//! The thin client layer: [`MatrixApi`] sends one room event and returns its id; implemented for
//! matrix-sdk's [`Client`](matrix_sdk::Client) (which encrypts in encrypted rooms) and by
//! [`RecordingMatrix`] (records what would be sent, for unit tests). No retries or decisions here:
//! matrix-sdk's HTTP layer retries transient failures and honours 429s.

use std::sync::Mutex;

use async_trait::async_trait;
use matrix_sdk::ruma::{OwnedEventId, RoomId};
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
}

/// One event a [`RecordingMatrix`] was asked to send.
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

#[async_trait]
impl MatrixApi for RecordingMatrix {
    async fn send(
        &self,
        room: &RoomId,
        event_type: &str,
        content: Value,
    ) -> Result<OwnedEventId, Error> {
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        sent.push(SentEvent {
            room: room.to_string(),
            event_type: event_type.to_owned(),
            content,
        });
        let n = 1 + self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        OwnedEventId::try_from(format!("$sent{n}")).map_err(|e| Error::Event(e.to_string()))
    }
}
