//! The thin client layer: [`MatrixApi`] sends one room event and returns its id; implemented for
//! matrix-sdk's [`Client`](matrix_sdk::Client) (which encrypts in encrypted rooms). No retries or
//! decisions here: matrix-sdk's HTTP layer retries transient failures and honours 429s.

use async_trait::async_trait;
use matrix_sdk::ruma::{OwnedEventId, RoomId};
use serde_json::Value;

use crate::Error;

/// What the question hooks need from Matrix.
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
