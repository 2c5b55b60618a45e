//! [`RecordingMatrix`]: a [`MatrixApi`] for unit tests that records every event it is asked to
//! send ([`SentEvent`]) and answers with made-up ids, without a server.

use std::sync::Mutex;

use async_trait::async_trait;
use frogbot_channel::files::{Downloads, FileStream, OutFile};
use matrix_sdk::ruma::events::room::MediaSource;
use matrix_sdk::ruma::{
    EventId, OwnedEventId, OwnedRoomId, OwnedUserId, RoomAliasId, RoomId, UserId,
};
use serde_json::Value;

use crate::Error;
use crate::client::{MatrixApi, UploadedImage};

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

    /// Every room but `!elsewhere:localhost`.
    fn joined(&self, room: &RoomId) -> bool {
        room.as_str() != "!elsewhere:localhost"
    }

    /// `#name:server` → `!name:server`; `#unknown:…` is unknown.
    async fn resolve_alias(&self, alias: &RoomAliasId) -> Result<OwnedRoomId, Error> {
        if alias.alias() == "unknown" {
            return Err(Error::UnknownRoom(alias.to_string()));
        }
        OwnedRoomId::try_from(format!("!{}:{}", alias.alias(), alias.server_name()))
            .map_err(|e| Error::Event(e.to_string()))
    }

    /// `!dm-{localpart}:localhost` (the same every time); `@unknown:…` is unknown.
    async fn dm_room(&self, user: &UserId) -> Result<OwnedRoomId, Error> {
        if user.localpart() == "unknown" {
            return Err(Error::UnknownUser(user.to_string()));
        }
        OwnedRoomId::try_from(format!("!dm-{}:localhost", user.localpart()))
            .map_err(|e| Error::Event(e.to_string()))
    }
    async fn send_once(
        &self,
        room: &RoomId,
        event_type: &str,
        content: Value,
        _txn: &str,
    ) -> Result<OwnedEventId, Error> {
        self.send(room, event_type, content).await
    }

    /// Refused (the outbox shows an image as a link).
    async fn upload_media(&self, mimetype: &str, _data: Vec<u8>) -> Result<UploadedImage, Error> {
        Err(Error::api(
            "upload",
            format!("this client uploads no media ({mimetype})"),
        ))
    }

    /// Read whole and uploaded plain with [`MatrixApi::upload_media`] (so refused).
    async fn upload_file(
        &self,
        _room: &RoomId,
        file: &OutFile,
        _via: &Downloads,
    ) -> Result<Value, Error> {
        let data = file.bytes().await.map_err(|e| Error::api("upload", e))?;
        let up = self.upload_media(&file.media_type, data).await?;
        Ok(serde_json::json!({ "url": up.mxc }))
    }

    /// Refused.
    async fn download_media(
        &self,
        _source: &MediaSource,
        _via: &Downloads,
    ) -> Result<FileStream, Error> {
        Err(Error::api("download", "this client downloads no media"))
    }

    /// None.
    async fn annotations(&self, _room: &RoomId, _event: &EventId) -> Result<Vec<Value>, Error> {
        Ok(Vec::new())
    }

    /// None.
    async fn pinned_events(&self, _room: &RoomId) -> Result<Vec<OwnedEventId>, Error> {
        Ok(Vec::new())
    }

    /// Not known.
    fn own_user(&self) -> Option<OwnedUserId> {
        None
    }

    /// Refused.
    async fn set_pinned_events(
        &self,
        _room: &RoomId,
        _pinned: Vec<OwnedEventId>,
    ) -> Result<(), Error> {
        Err(Error::api("pin", "this client pins nothing"))
    }
}

/// Unit tests keep an `Arc` of the recorder to read what an outbox or hooks holding a clone sent.
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

    async fn send_once(
        &self,
        room: &RoomId,
        event_type: &str,
        content: Value,
        txn: &str,
    ) -> Result<OwnedEventId, Error> {
        (**self).send_once(room, event_type, content, txn).await
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

    fn joined(&self, room: &RoomId) -> bool {
        (**self).joined(room)
    }

    async fn resolve_alias(&self, alias: &RoomAliasId) -> Result<OwnedRoomId, Error> {
        (**self).resolve_alias(alias).await
    }

    async fn dm_room(&self, user: &UserId) -> Result<OwnedRoomId, Error> {
        (**self).dm_room(user).await
    }

    async fn upload_media(&self, mimetype: &str, data: Vec<u8>) -> Result<UploadedImage, Error> {
        (**self).upload_media(mimetype, data).await
    }

    async fn download_media(
        &self,
        source: &matrix_sdk::ruma::events::room::MediaSource,
        via: &Downloads,
    ) -> Result<FileStream, Error> {
        (**self).download_media(source, via).await
    }

    async fn upload_file(
        &self,
        room: &RoomId,
        file: &OutFile,
        via: &Downloads,
    ) -> Result<Value, Error> {
        (**self).upload_file(room, file, via).await
    }

    async fn annotations(&self, room: &RoomId, event: &EventId) -> Result<Vec<Value>, Error> {
        (**self).annotations(room, event).await
    }

    async fn pinned_events(&self, room: &RoomId) -> Result<Vec<OwnedEventId>, Error> {
        (**self).pinned_events(room).await
    }

    fn own_user(&self) -> Option<matrix_sdk::ruma::OwnedUserId> {
        (**self).own_user()
    }

    async fn set_pinned_events(
        &self,
        room: &RoomId,
        pinned: Vec<OwnedEventId>,
    ) -> Result<(), Error> {
        (**self).set_pinned_events(room, pinned).await
    }
}
