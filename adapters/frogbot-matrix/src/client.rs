//! The thin client layer: [`MatrixApi`] sends one room event and returns its id, redacts one,
//! sends typing notices and reads a thread's events and a member's name; implemented for
//! matrix-sdk's [`Client`](matrix_sdk::Client) (which encrypts in encrypted rooms); a recording
//! one for unit tests is `testing::RecordingMatrix` (feature `testing`). No retries or decisions
//! here: matrix-sdk's HTTP layer retries transient failures and honours 429s, bounded by
//! [`request_config`] (the clients the adapter builds use it). A failure still worth retrying
//! after that (`M_LIMIT_EXCEEDED` with its `retry_after_ms`, a `5xx`, a network failure —
//! [`Transient::maybe_done`] once the request may have reached the server) is an
//! [`Error::Unavailable`] carrying a [`Transient`]; the rest is [`Error::Api`].

use std::time::Duration;

use async_trait::async_trait;
use frogbot_channel::files::{Downloads, FileStream, OutFile, UploadAnswer, UploadError};
use frogbot_channel::retry::Failure;
use frogbot_model::{BoxError, Transient};
use matrix_sdk::config::RequestConfig;
use matrix_sdk::ruma::{
    EventId, OwnedEventId, OwnedRoomId, RoomAliasId, RoomId, TransactionId, UserId,
};
use serde_json::Value;

use crate::Error;

/// How many times matrix-sdk tries a request in all before its error comes back.
pub const MAX_ATTEMPTS: usize = 3;
/// The longest backoff matrix-sdk waits between two tries of a request (it waits a longer
/// `retry_after_ms` when the server asks for it).
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long one try of a request may take (matrix-sdk adds a sync's long-poll time to it).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The request configuration of the adapter's clients: matrix-sdk's default retries a `429` or
/// a `5xx` for up to 15 minutes (and a network failure not at all); this one tries a request at
/// most [`MAX_ATTEMPTS`] times (network failures included: a send keeps its transaction id, so
/// the homeserver deduplicates), each try at most [`REQUEST_TIMEOUT`].
pub fn request_config() -> RequestConfig {
    RequestConfig::new()
        .retry_limit(MAX_ATTEMPTS)
        .max_retry_time(MAX_BACKOFF)
        .timeout(REQUEST_TIMEOUT)
}

/// The error of call `call`: [`Error::Unavailable`] when worth retrying, else [`Error::Api`].
pub fn call_error(call: &'static str, e: matrix_sdk::Error) -> Error {
    let (status, failure) = match &e {
        matrix_sdk::Error::Http(http) => http_failure(http),
        _ => ("error".into(), None),
    };
    failed(call, &status, failure, e.into())
}

/// Counts a finished call of the homeserver under `status` (`frogbot_platform_api_calls_total`).
fn count(call: &str, status: &str) {
    frogbot_channel::metrics::platform_call("matrix", call, status);
}

/// The call `call` that failed with `e`, counted under `status`: [`Error::Unavailable`] when
/// `failure` is worth retrying (marked as frogbot-channel's [`Failure`] says), else
/// [`Error::Api`].
fn failed(call: &'static str, status: &str, failure: Option<Failure>, e: BoxError) -> Error {
    count(call, status);
    match failure.filter(|f| f.retryable()) {
        Some(f) => Error::Unavailable {
            call,
            source: f.mark(Transient::from_source(e.to_string(), e)),
        },
        None => Error::api(call, e),
    }
}

/// How an HTTP failure went: the status label of the failed call
/// (`frogbot_platform_api_calls_total`: the HTTP status of the homeserver's refusal, `timeout` or
/// `network`, else `error`; matrix-sdk sends the requests, and retries 429s and 5xx itself within
/// [`request_config`], so only the calls that failed in the end are counted), and the failure:
/// a network failure (after sending: maybe done), a `429` / `M_LIMIT_EXCEEDED` (with its wait),
/// the homeserver's status.
fn http_failure(http: &matrix_sdk::HttpError) -> (String, Option<Failure>) {
    use matrix_sdk::HttpError;
    use matrix_sdk::ruma::api::error::{ErrorKind, RetryAfter};
    let api = match http {
        HttpError::Reqwest(e) => {
            let status = if e.is_timeout() { "timeout" } else { "network" };
            let sent = if e.is_connect() {
                Failure::NotSent
            } else {
                Failure::MaybeDone
            };
            return (status.into(), Some(sent));
        }
        HttpError::Cached(inner) => return http_failure(inner),
        HttpError::Api(_) => http.as_client_api_error(),
        _ => None,
    };
    let Some(api) = api else {
        return ("error".into(), None);
    };
    let status = api.status_code.as_u16();
    let failure = match api.error_kind() {
        Some(ErrorKind::LimitExceeded(limit)) => Failure::Refused {
            status: 429,
            wait: match &limit.retry_after {
                Some(RetryAfter::Delay(d)) => Some(*d),
                Some(RetryAfter::DateTime(at)) => {
                    at.duration_since(std::time::SystemTime::now()).ok()
                }
                None => None,
            },
        },
        _ => Failure::status(status),
    };
    (status.to_string(), Some(failure))
}

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

    /// [`MatrixApi::send`] under the transaction id `txn` (`PUT …/send/{type}/{txn}`): the
    /// homeserver answers a repeated transaction id with the event it made the first time, so a
    /// retry posts nothing twice.
    async fn send_once(
        &self,
        room: &RoomId,
        event_type: &str,
        content: Value,
        txn: &str,
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

    /// Whether the bot is joined to `room` (as its client knows: a room it was invited to but has
    /// not joined, left or never saw is not).
    fn joined(&self, room: &RoomId) -> bool;

    /// The room `alias` names (`GET /directory/room/{alias}`).
    async fn resolve_alias(&self, alias: &RoomAliasId) -> Result<OwnedRoomId, Error>;

    /// The bot's direct-message room with `user`: an existing one (in the bot's `m.direct`
    /// account data, the bot joined, `user` joined or invited), else a new one inviting `user`
    /// and recorded in `m.direct`. An unknown user is an error, and no room is made.
    async fn dm_room(&self, user: &UserId) -> Result<OwnedRoomId, Error>;

    /// Uploads `data` of type `mimetype` to the media repository
    /// (`POST /_matrix/media/v3/upload`): its `mxc://` URI, type and size. The outbox fetches an
    /// image block's URL first, with [`fetch_image`].
    async fn upload_media(&self, mimetype: &str, data: Vec<u8>) -> Result<UploadedImage, Error>;

    /// Uploads a file the bot sends in `room` to the media repository through `via`, encrypted
    /// (AES-CTR, its key in the event) when the room is: the content fields that name it,
    /// `{"url": "mxc://…"}` or `{"file": {…}}` (an `EncryptedFile`). A file the homeserver
    /// refuses as too large (`M_TOO_LARGE`) is [`Error::TooLarge`].
    async fn upload_file(
        &self,
        room: &RoomId,
        file: &OutFile,
        via: &Downloads,
    ) -> Result<Value, Error>;

    /// The bytes of the media `source` (a person's `m.image` / `m.file` …: an `mxc://` URI, or
    /// an encrypted file with its key, decrypted), as they arrive, fetched through `via`.
    async fn download_media(
        &self,
        source: &matrix_sdk::ruma::events::room::MediaSource,
        via: &Downloads,
    ) -> Result<FileStream, Error>;

    /// The annotations (`m.reaction`s) on `event` (`/relations/{event}/m.annotation`), newest
    /// first, as JSON.
    async fn annotations(&self, room: &RoomId, event: &EventId) -> Result<Vec<Value>, Error>;

    /// The room's pinned events as the server has them now (`GET …/state/m.room.pinned_events/`;
    /// none when the room has no such state).
    async fn pinned_events(&self, room: &RoomId) -> Result<Vec<OwnedEventId>, Error>;

    /// The bot's own user id, when the client knows it (its reactions are told from people's by
    /// it).
    fn own_user(&self) -> Option<matrix_sdk::ruma::OwnedUserId>;

    /// Replaces the room's `m.room.pinned_events` state with `pinned`.
    async fn set_pinned_events(
        &self,
        room: &RoomId,
        pinned: Vec<OwnedEventId>,
    ) -> Result<(), Error>;
}

/// The largest image the adapter fetches and uploads, in bytes (Synapse's default upload limit
/// is 50 MB; an agent's chart is far smaller).
pub const MAX_IMAGE_BYTES: usize = 8 * 1024 * 1024;
/// How long fetching an image may take.
pub const IMAGE_TIMEOUT: Duration = Duration::from_secs(20);

/// An image in the media repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadedImage {
    /// Its `mxc://` URI.
    pub mxc: String,
    /// Its content type (`image/png`).
    pub mimetype: String,
    /// Its size in bytes.
    pub size: usize,
}

/// The policy images are fetched with by default: public addresses only (see
/// [`frogbot_net::is_forbidden`]), at most [`MAX_IMAGE_BYTES`], within [`IMAGE_TIMEOUT`], no
/// proxy.
pub fn image_policy() -> frogbot_net::FetchPolicy {
    frogbot_net::FetchPolicy {
        max_bytes: MAX_IMAGE_BYTES,
        timeout: IMAGE_TIMEOUT,
        user_agent: concat!("FrogBot/", env!("CARGO_PKG_VERSION"), " (matrix images)").into(),
        ..frogbot_net::FetchPolicy::default()
    }
}

/// Fetches the image at the http(s) `url` with the guarded client `http` (its policy's limits:
/// by default [`image_policy`]): its content type (`image/*`, else refused) and bytes. A
/// private address, a body past the size limit, an answer other than a success: an error.
pub async fn fetch_image(
    http: &frogbot_net::GuardedClient,
    url: &str,
) -> Result<(String, Vec<u8>), Error> {
    let api = |message: String| Error::api("fetch_image", message);
    let mut response = http
        .get(url)
        .await
        .and_then(|r| r.error_for_status())
        .map_err(|e| api(e.to_string()))?;
    let mimetype = response
        .content_type()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if !mimetype.starts_with("image/") {
        return Err(api(format!("{url} is not an image ({mimetype:?})")));
    }
    let body = response
        .read_body(frogbot_net::Oversize::Refuse)
        .await
        .map_err(|e| api(e.to_string()))?;
    Ok((mimetype, body.bytes))
}

/// The client's room `room`, or [`Error::UnknownRoom`] when it knows none of that id.
fn joined_room(client: &matrix_sdk::Client, room: &RoomId) -> Result<matrix_sdk::Room, Error> {
    client
        .get_room(room)
        .ok_or_else(|| Error::UnknownRoom(room.to_string()))
}

/// The events related to `event` by `rel` (matrix-sdk's `Room::relations`, backwards: newest
/// first), at most `limit`, as JSON.
async fn relations(
    joined: &matrix_sdk::Room,
    event: &EventId,
    rel: matrix_sdk::ruma::events::relation::RelationType,
    limit: u64,
) -> Result<Vec<Value>, Error> {
    use matrix_sdk::room::{IncludeRelations, RelationsOptions};
    let opts = RelationsOptions {
        dir: matrix_sdk::ruma::api::Direction::Backward,
        limit: matrix_sdk::ruma::UInt::new(limit),
        include_relations: IncludeRelations::RelationsOfType(rel),
        ..Default::default()
    };
    let related = joined
        .relations(event.to_owned(), opts)
        .await
        .map_err(|e| call_error("relations", e))?;
    Ok(related.chunk.iter().filter_map(event_json).collect())
}

/// A timeline event's JSON (decrypted where the client could), if it reads.
fn event_json(e: &matrix_sdk::deserialized_responses::TimelineEvent) -> Option<Value> {
    e.raw().deserialize_as::<Value>().ok()
}

/// The `authorization` header of the client's access token (none without one), for `bearer`
/// made by [`bearer`].
fn auth_header(bearer: &Option<String>) -> Vec<(&str, &str)> {
    bearer
        .iter()
        .map(|b| ("authorization", b.as_str()))
        .collect()
}

/// `Bearer {token}` of the client's access token, if it has one.
fn bearer(client: &matrix_sdk::Client) -> Option<String> {
    client.access_token().map(|t| format!("Bearer {t}"))
}

#[async_trait]
impl MatrixApi for matrix_sdk::Client {
    async fn send(
        &self,
        room: &RoomId,
        event_type: &str,
        content: Value,
    ) -> Result<OwnedEventId, Error> {
        let txn = TransactionId::new();
        self.send_once(room, event_type, content, txn.as_str())
            .await
    }

    async fn send_once(
        &self,
        room: &RoomId,
        event_type: &str,
        content: Value,
        txn: &str,
    ) -> Result<OwnedEventId, Error> {
        let joined = joined_room(self, room)?;
        let send = joined.send_raw(event_type, content);
        let sent = send.with_transaction_id(txn.into()).await;
        Ok(sent.map_err(|e| call_error("send", e))?.response.event_id)
    }

    async fn redact(
        &self,
        room: &RoomId,
        event: &EventId,
        reason: Option<&str>,
    ) -> Result<(), Error> {
        let joined = joined_room(self, room)?;
        joined
            .redact(event, reason, None)
            .await
            .map_err(|e| call_error("redact", e.into()))?;
        Ok(())
    }

    /// matrix-sdk's `typing_notice`: a notice of 4 seconds, sent again only once 3 seconds have
    /// passed since the last one.
    async fn typing(&self, room: &RoomId, typing: bool) -> Result<(), Error> {
        let joined = joined_room(self, room)?;
        joined
            .typing_notice(typing)
            .await
            .map_err(|e| call_error("typing", e))
    }

    /// matrix-sdk's `Room::relations` (type `m.thread`, backwards) and `Room::event` (the root).
    async fn thread_events(
        &self,
        room: &RoomId,
        root: &EventId,
        limit: usize,
    ) -> Result<Vec<Value>, Error> {
        use matrix_sdk::ruma::events::relation::RelationType;
        let joined = joined_room(self, room)?;
        let limit = limit.min(1_000) as u64;
        let mut events = relations(&joined, root, RelationType::Thread, limit).await?;
        let first = joined
            .event(root, None)
            .await
            .map_err(|e| call_error("event", e))?;
        events.reverse();
        if let Some(root) = event_json(&first) {
            events.insert(0, root);
        }
        Ok(events)
    }

    async fn member_name(&self, room: &RoomId, user: &UserId) -> Option<String> {
        let joined = self.get_room(room)?;
        let member = joined.get_member(user).await.ok()??;
        member.display_name().map(str::to_owned)
    }

    fn joined(&self, room: &RoomId) -> bool {
        self.get_room(room)
            .is_some_and(|r| r.state() == matrix_sdk::RoomState::Joined)
    }

    /// matrix-sdk's `resolve_room_alias`.
    async fn resolve_alias(&self, alias: &RoomAliasId) -> Result<OwnedRoomId, Error> {
        match self.resolve_room_alias(alias).await {
            Ok(found) => Ok(found.room_id),
            Err(e) if not_found(&e) => Err(Error::UnknownRoom(alias.to_string())),
            Err(e) => Err(call_error("resolve_alias", e.into())),
        }
    }

    /// matrix-sdk's `get_dm_rooms` (the `m.direct` the sync brought), then the `m.direct` the
    /// server has now (`GET /user/{bot}/account_data/m.direct`: a room made by an earlier call
    /// whose `m.direct` update no sync has brought yet), else `create_dm` (an encrypted room,
    /// `is_direct`, `user` invited, marked in `m.direct` before it returns) after a profile
    /// lookup (`GET /profile/{user}`: a `404` is an unknown user). `create_dm` only logs a failed
    /// `m.direct` update: it is checked here and done again (so a retry finds the room).
    async fn dm_room(&self, user: &UserId) -> Result<OwnedRoomId, Error> {
        for room in self.get_dm_rooms(user) {
            if dm_usable(&room, user).await {
                return Ok(room.room_id().to_owned());
            }
        }
        for id in server_dm_rooms(self, user).await? {
            if let Some(room) = self.get_room(&id)
                && room.state() == matrix_sdk::RoomState::Joined
                && dm_usable(&room, user).await
            {
                return Ok(id);
            }
        }
        if let Err(e) = self.account().fetch_user_profile_of(user).await {
            if let matrix_sdk::Error::Http(http) = &e
                && not_found(http)
            {
                return Err(Error::UnknownUser(user.to_string()));
            }
            return Err(call_error("profile", e));
        }
        let room = self
            .create_dm(user)
            .await
            .map_err(|e| call_error("create_dm", e))?;
        let id = room.room_id().to_owned();
        if !server_dm_rooms(self, user).await?.contains(&id) {
            self.account()
                .mark_as_dm(&id, &[user.to_owned()])
                .await
                .map_err(|e| call_error("mark_as_dm", e))?;
        }
        Ok(id)
    }

    /// `POST /_matrix/media/v3/upload`.
    async fn upload_media(&self, mimetype: &str, data: Vec<u8>) -> Result<UploadedImage, Error> {
        use matrix_sdk::ruma::api::client::media::create_content;
        let size = data.len();
        let mimetype = mimetype.to_owned();
        let mut request = create_content::v3::Request::new(data);
        request.content_type = Some(mimetype.clone());
        let response = self.send(request).await.map_err(|e| {
            // The homeserver's `M_TOO_LARGE`: an upload past its limit.
            match e.client_api_error_kind() {
                Some(matrix_sdk::ruma::api::error::ErrorKind::TooLarge) => Error::TooLarge,
                _ => call_error("upload", e.into()),
            }
        })?;
        Ok(UploadedImage {
            mxc: response.content_uri.to_string(),
            mimetype,
            size,
        })
    }

    /// Streamed through `via` to `POST /_matrix/media/v3/upload` (never held whole: matrix-sdk's
    /// own upload takes a `Vec`), encrypted as it is sent in an encrypted room (matrix-sdk's
    /// `AttachmentEncryptor`, its keys read once the last byte went; the room's state asked of
    /// the server when the client does not know it yet).
    async fn upload_file(
        &self,
        room: &RoomId,
        file: &OutFile,
        via: &Downloads,
    ) -> Result<Value, Error> {
        let joined = joined_room(self, room)?;
        // The homeserver's limit (`/_matrix/client/v1/media/config`, asked once per client), so
        // a file past it is refused here: a homeserver answers `413` before reading the body and
        // closes, and a client still writing then sees a broken pipe, not the refusal. The
        // ciphertext of an encrypted file is as long as the file.
        match self.load_or_fetch_max_upload_size().await {
            Ok(max) if file.size > u64::from(max) => return Err(Error::TooLarge),
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(error = %e, "the homeserver's upload limit is unknown; the upload is tried")
            }
        }
        let encrypted = joined
            .latest_encryption_state()
            .await
            .map_err(|e| call_error("encryption_state", e))?
            .is_encrypted();
        let mut url = media_url(&self.homeserver(), &["_matrix", "media", "v3", "upload"])?;
        let bearer = bearer(self);
        let auth = auth_header(&bearer);
        if !encrypted {
            url.query_pairs_mut()
                .append_pair("filename", &file.filename);
            let mxc = uploaded(via.upload(url.as_str(), &auth, file).await)?;
            return Ok(serde_json::json!({ "url": mxc }));
        }
        let plain = file.open().await.map_err(|e| Error::api("upload", e))?;
        let (cipher, keys) = encrypt_stream(plain);
        // An encrypted file goes as opaque bytes, its name and type only in the event.
        let answer = via
            .upload_stream(
                url.as_str(),
                &auth,
                "application/octet-stream",
                file.size,
                cipher,
            )
            .await;
        let mxc = uploaded(answer)?;
        let keys = keys
            .await
            .map_err(|e| Error::Event(format!("encrypting the file: {e}")))?
            .map_err(|e| Error::Event(format!("encrypting the file: {e}")))?;
        let encrypted = matrix_sdk::ruma::events::room::EncryptedFile::new(
            mxc.as_str().into(),
            keys.encryption_info,
            keys.hashes,
        );
        let file = serde_json::to_value(&encrypted).map_err(|e| Error::Event(e.to_string()))?;
        Ok(serde_json::json!({ "file": file }))
    }

    /// Streamed through `via` from the authenticated media endpoint
    /// (`/_matrix/client/v1/media/download/…`, the older `/_matrix/media/v3/download/…` when the
    /// homeserver has none), the bot's access token sent to the homeserver only; an encrypted
    /// file decrypted as it arrives (matrix-sdk's `AttachmentDecryptor`: a file whose hash does
    /// not match ends in an error). Never held whole (matrix-sdk's `get_media_content` is).
    async fn download_media(
        &self,
        source: &matrix_sdk::ruma::events::room::MediaSource,
        via: &Downloads,
    ) -> Result<FileStream, Error> {
        use matrix_sdk::ruma::api::Metadata;
        use matrix_sdk::ruma::api::client::authenticated_media::get_content;
        use matrix_sdk::ruma::events::room::MediaSource;
        let (uri, key) = match source {
            MediaSource::Plain(uri) => (uri, None),
            MediaSource::Encrypted(file) => (&file.url, Some(file.as_ref().clone().into())),
        };
        let (server, id) = uri
            .parts()
            .map_err(|e| Error::Event(format!("media {uri}: {e}")))?;
        let versions = self
            .supported_versions()
            .await
            .map_err(|e| call_error("versions", e.into()))?;
        let path: &[&str] = if get_content::v1::Request::PATH_BUILDER.is_supported(&versions) {
            &["_matrix", "client", "v1", "media", "download"]
        } else {
            &["_matrix", "media", "v3", "download"]
        };
        let url = media_url(&self.homeserver(), &[path, &[server.as_str(), id]].concat())?;
        let bearer = bearer(self);
        let auth = auth_header(&bearer);
        let body = via
            .open(url.as_str(), &auth)
            .await
            .map_err(|e| transfer_error("download", e))?;
        Ok(match key {
            Some(key) => decrypt_stream(body, key),
            None => body,
        })
    }

    /// matrix-sdk's `Room::relations` of type `m.annotation`.
    async fn annotations(&self, room: &RoomId, event: &EventId) -> Result<Vec<Value>, Error> {
        use matrix_sdk::ruma::events::relation::RelationType;
        let joined = joined_room(self, room)?;
        relations(&joined, event, RelationType::Annotation, 100).await
    }

    fn own_user(&self) -> Option<matrix_sdk::ruma::OwnedUserId> {
        self.user_id().map(ToOwned::to_owned)
    }

    /// matrix-sdk's `Room::load_pinned_events` (from the server, not the synced state).
    async fn pinned_events(&self, room: &RoomId) -> Result<Vec<OwnedEventId>, Error> {
        let joined = joined_room(self, room)?;
        Ok(joined
            .load_pinned_events()
            .await
            .map_err(|e| call_error("pinned_events", e))?
            .unwrap_or_default())
    }

    /// `PUT …/state/m.room.pinned_events/` with `{"pinned": [..]}`.
    async fn set_pinned_events(
        &self,
        room: &RoomId,
        pinned: Vec<OwnedEventId>,
    ) -> Result<(), Error> {
        use matrix_sdk::ruma::events::room::pinned_events::RoomPinnedEventsEventContent;
        let joined = joined_room(self, room)?;
        joined
            .send_state_event(RoomPinnedEventsEventContent::new(pinned))
            .await
            .map_err(|e| call_error("pin", e))?;
        Ok(())
    }
}

/// Whether a request failed with `404` / `M_NOT_FOUND`.
fn not_found(e: &matrix_sdk::HttpError) -> bool {
    use matrix_sdk::ruma::api::error::ErrorKind;
    e.client_api_error_kind() == Some(&ErrorKind::NotFound)
        || e.as_client_api_error()
            .is_some_and(|api| api.status_code.as_u16() == 404)
}

/// The rooms the bot's `m.direct` on the server lists for `user`.
async fn server_dm_rooms(
    client: &matrix_sdk::Client,
    user: &UserId,
) -> Result<Vec<OwnedRoomId>, Error> {
    use matrix_sdk::ruma::events::direct::{DirectEventContent, DirectUserIdentifier};
    let raw = client
        .account()
        .fetch_account_data_static::<DirectEventContent>()
        .await
        .map_err(|e| call_error("m.direct", e))?;
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    let direct = raw
        .deserialize()
        .map_err(|e| Error::Event(format!("m.direct: {e}")))?;
    Ok(direct
        .get(<&DirectUserIdentifier>::from(user))
        .cloned()
        .unwrap_or_default())
}

/// Whether a DM room with `user` still reaches them: `user` has not left it nor been banned (an
/// unknown membership counts: the room may be new).
async fn dm_usable(room: &matrix_sdk::Room, user: &UserId) -> bool {
    use matrix_sdk::ruma::events::room::member::MembershipState;
    match room.get_member_no_sync(user).await {
        Ok(Some(m)) => !matches!(
            m.membership(),
            MembershipState::Leave | MembershipState::Ban
        ),
        _ => true,
    }
}

/// The homeserver's URL `homeserver` with the path `segments` (each percent-encoded: a media id
/// from an event cannot reach another path).
fn media_url(homeserver: &url::Url, segments: &[&str]) -> Result<url::Url, Error> {
    let mut url = homeserver.clone();
    url.path_segments_mut()
        .map_err(|()| Error::Event(format!("{homeserver} cannot be a base URL")))?
        .pop_if_empty()
        .extend(segments);
    Ok(url)
}

/// A failed transfer as this crate's error: the homeserver's `M_TOO_LARGE` (or a 413) is
/// [`Error::TooLarge`]; a 429, a 5xx, a network failure or a timeout [`Error::Unavailable`]
/// (maybe done: the bytes may have arrived); the rest [`Error::Api`].
fn transfer_error(call: &'static str, e: BoxError) -> Error {
    use frogbot_net::FetchError;
    let fetch = e
        .downcast_ref::<FetchError>()
        .or_else(|| match e.downcast_ref::<UploadError>() {
            Some(UploadError::Fetch(f)) => Some(f),
            _ => None,
        });
    let maybe_done = Some(Failure::MaybeDone);
    let status = match fetch {
        Some(FetchError::Status { status, .. }) => *status,
        Some(FetchError::Http { .. }) => return failed(call, "network", maybe_done, e),
        Some(FetchError::Timeout { .. }) => return failed(call, "timeout", maybe_done, e),
        _ => return failed(call, "error", None, e),
    };
    if status == 413 {
        count(call, "413");
        return Error::TooLarge;
    }
    let retry = Failure::status(status).retryable();
    failed(call, &status.to_string(), maybe_done.filter(|_| retry), e)
}

/// The `content_uri` of an upload's answer, or why there is none ([`transfer_error`]'s reading
/// of a failed request; the homeserver's own refusal by its status and `errcode`).
fn uploaded(answer: Result<UploadAnswer, UploadError>) -> Result<String, Error> {
    let answer = answer.map_err(|e| transfer_error("upload", Box::new(e)))?;
    let body: Value = serde_json::from_str(&answer.body).unwrap_or(Value::Null);
    if answer.is_success()
        && let Some(uri) = body["content_uri"].as_str()
    {
        count("upload", "200");
        return Ok(uri.to_owned());
    }
    let status = answer.status.to_string();
    let errcode = body["errcode"].as_str().unwrap_or_default();
    if errcode == "M_TOO_LARGE" || answer.status == 413 {
        count("upload", &status);
        return Err(Error::TooLarge);
    }
    let failure = Failure::Refused {
        status: if errcode == "M_LIMIT_EXCEEDED" {
            429
        } else {
            answer.status
        },
        wait: body["retry_after_ms"]
            .as_u64()
            .map(Duration::from_millis)
            .or(answer.retry_after),
    };
    let message = format!("the homeserver answered {status}: {}", answer.body);
    Err(failed("upload", &status, Some(failure), message.into()))
}

/// How much of a file is encrypted or decrypted at a time.
const PIECE: usize = 64 * 1024;

/// A file's bytes read in a blocking task through `step` (matrix-sdk's attachment encryptor or
/// decryptor, which read a `std::io::Read`) and handed on as they come out: two pieces in flight
/// at most. What `step` makes of the reader when done (the encryption keys) is the task's result.
fn through_blocking<T, F>(
    body: FileStream,
    step: F,
) -> (FileStream, tokio::task::JoinHandle<std::io::Result<T>>)
where
    T: Send + 'static,
    F: FnOnce(&mut dyn std::io::Read, &mut dyn FnMut(Vec<u8>) -> bool) -> std::io::Result<T>
        + Send
        + 'static,
{
    use futures::StreamExt;
    let reader = tokio_util::io::StreamReader::new(body.map(|piece| {
        piece
            .map(std::io::Cursor::new)
            .map_err(std::io::Error::other)
    }));
    let mut reader = tokio_util::io::SyncIoBridge::new(reader);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, BoxError>>(2);
    let task = tokio::task::spawn_blocking(move || {
        let failed = tx.clone();
        let mut send = |piece: Vec<u8>| tx.blocking_send(Ok(piece)).is_ok();
        let done = step(&mut reader, &mut send);
        if let Err(e) = &done {
            let _ = failed.blocking_send(Err(e.to_string().into()));
        }
        done
    });
    let out = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|piece| (piece, rx))
    });
    (out.boxed(), task)
}

/// Reads `reader` to its end in [`PIECE`]s, each handed to `send` (false: no one reads on).
fn pump(
    reader: &mut dyn std::io::Read,
    send: &mut dyn FnMut(Vec<u8>) -> bool,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; PIECE];
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 || !send(buf[..n].to_vec()) {
            return Ok(());
        }
    }
}

/// `plain` encrypted as it is read (AES-CTR: as long as the plain text); the keys and hash
/// once all of it went through.
fn encrypt_stream(
    plain: FileStream,
) -> (
    FileStream,
    tokio::task::JoinHandle<std::io::Result<matrix_sdk::encryption::MediaEncryptionInfo>>,
) {
    through_blocking(plain, |reader, send| {
        let mut encryptor = matrix_sdk_crypto::AttachmentEncryptor::new(reader);
        pump(&mut encryptor, send)?;
        Ok(encryptor.finish())
    })
}

/// `cipher` decrypted with `key` as it is read; a hash that does not match ends it in an error.
fn decrypt_stream(
    cipher: FileStream,
    key: matrix_sdk::encryption::MediaEncryptionInfo,
) -> FileStream {
    through_blocking(cipher, move |mut reader, send| {
        let mut decryptor = matrix_sdk_crypto::AttachmentDecryptor::new(&mut reader, key)
            .map_err(std::io::Error::other)?;
        pump(&mut decryptor, send)
    })
    .0
}
