//! The outbox (feature `engine`): the agent's replies, posted in the thread as `m.room.message`s
//! with the Markdown as `body` and its HTML as `formatted_body` ([`crate::format`]), split with
//! [`frogbot_model::text::split`] at [`MESSAGE_CHARS`] characters of `body` and
//! [`MAX_TEXT_BYTES`](crate::format::MAX_TEXT_BYTES) of both texts (Matrix has no message-length
//! limit of its own, only the 65,536-byte event limit). Acknowledgements are `m.reaction`
//! annotations on the person's message, each new one replacing (redacting) the one before; progress
//! is the bot's typing notice.
//!
//! Streamed replies ([`ChannelOutbox::start_stream`]) are a [`MatrixStream`] over
//! [`MatrixDrafts`]: each piece is posted as an `m.room.message` in the thread, then replaced by
//! `m.replace` edits (`m.new_content` with the whole new `body` / `formatted_body`, the `* `
//! fallback outside it, as the spec's "Event replacements" section says). An edit carries the
//! text twice, so a streamed message keeps to [`format::EDITABLE_TEXT_BYTES`]: every event is
//! sized before it is sent, a message that would grow past it is frozen at the splitter's clean
//! cut and the reply goes on in continuation messages (a `413 M_TOO_LARGE` that still comes cuts
//! smaller at once). The first message — the one a person is notified of, edits do not notify —
//! is posted once the text has a complete first sentence, a paragraph break or
//! [`FIRST_MESSAGE_CHARS`] characters ([`reads_as_a_start`]), two seconds after the first text, or
//! at the end of the stream, as on every platform ([`FirstMessageHold`]). Matrix
//! messages have no buttons: the Stop control is the typed `stop` in the thread (the engine
//! handles it), so a streamed message shows only the reply's text. The typing notice is sent
//! while a turn runs ([`ChannelOutbox::working`]) and taken off (`typing: false`) when its reply is
//! shown ([`ChannelOutbox::idle`]); asks show none. A thread's earlier messages
//! ([`ChannelOutbox::thread_history`]) are read with the relations API.
//!
//! Durable delivery ([`ChannelOutbox::deliver`]): each piece is sent under a transaction id made
//! from its [`Delivery::piece_key`](frogbot_channel::Delivery::piece_key) ([`txn_id`]), so when the engine retries a delivery (after a
//! [`Transient`](frogbot_model::Transient) failure: `M_LIMIT_EXCEEDED` with its `retry_after_ms`,
//! a `5xx`, a network failure), in this process or another, the homeserver answers the pieces it
//! already has with their first event and posts only the missing ones: exactly once, as long as
//! the homeserver remembers the transaction (the same device: the adapter restores its session).
//!
//! Agent messages ([`ChannelOutbox::post_message`]): each piece of [`render::agent_message`] is
//! sent under the transaction id of its [`Delivery::piece_key`](frogbot_channel::Delivery::piece_key) (an image after its upload), and
//! each event-button reaction under one made from it, so a retry posts nothing twice.
//! [`ChannelOutbox::edit_posted`] sends `m.replace` edits (which do not notify: the default push
//! rule `.m.rule.suppress_edits`) and brings the bot's reactions to the new buttons;
//! [`ChannelOutbox::delete_posted`] redacts; [`ChannelOutbox::pin_posted`] reads the room's
//! `m.room.pinned_events` from the server and writes it back changed.
//!
//! Asks ([`ChannelOutbox::ask_thread`]): a thread (`room|event`) is asked in as it is; a room
//! (`!room:server`, or an alias `#room:server`, resolved) gets the ask's text as a new root
//! message, and the ask goes to that message's thread; a person (`@alice:server`) is asked in the
//! bot's DM room with them (found in `m.direct`, or made with `create_dm`, which invites them),
//! the same way. The root is sent under a transaction id made from the ask's key
//! ([`ask_txn_id`]), so a retried ask finds the same root (and the same DM room) instead of
//! starting another.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use frogbot_channel::OutFile;
use frogbot_channel::delivery::{Draw, Edited, PieceAt, PostPieces, PostedMessages};
use frogbot_channel::outbox::{AskTo, BoxedReplyStream, History};
use frogbot_channel::{
    AskPlace, ChannelOutbox, DraftMessages, FileStream, FirstMessageHold, ReplyStream, ShownAcks,
};
use frogbot_model::{
    Ack, BoxError, MessageAt, PlatformFile, PlatformUser, Thread, ThreadMessage,
    ThreadMessageMetadata, UiMessage, millis_to_iso,
};
use matrix_sdk::ruma::{EventId, OwnedEventId, OwnedRoomId, RoomAliasId, RoomId, UserId};
use serde_json::{Value, json};

use frogbot_net::{FetchPolicy, GuardedClient};

use crate::client::{MatrixApi, UploadedImage, fetch_image, image_policy};
use crate::convert::{parse_user_id, strip_reply_fallback};
use crate::format::{self, Formatted};
use crate::ids::{message_id, split_message_id};
use crate::render::{self, AgentPiece, DrawnPiece, thread_message};

/// The most characters of one reply message; longer replies are split.
pub const MESSAGE_CHARS: usize = 32_000;

/// The transaction id piece `piece_key` of a durable delivery is sent under (the same on every
/// attempt, in every process).
pub fn txn_id(piece_key: &str) -> String {
    format!("frogbot-{piece_key}")
}

/// The transaction id the root message of the ask `key` is sent under (the same on every retry
/// of the ask, in every process).
pub fn ask_txn_id(key: &str) -> String {
    format!("frogbot-ask-{key}")
}

/// Posts the agent's replies in the thread, over any [`MatrixApi`].
#[derive(Debug)]
pub struct MatrixOutbox<A> {
    api: A,
    /// The ack reaction event each message (`room|event`) shows now, until its last (Done or
    /// Failed): the one the next ack redacts.
    shown: ShownAcks<String, OwnedEventId>,
    /// Held while a DM room is looked up or made: two asks to one person at once make one room.
    dm_lock: tokio::sync::Mutex<()>,
    /// What image blocks' URLs are fetched with ([`image_policy`] by default).
    image_policy: FetchPolicy,
    /// The guarded client for image blocks, made at the first one (or why it could not be).
    images: OnceLock<Result<GuardedClient, String>>,
    /// Files to and from the homeserver's media repository ([`homeserver_media`]).
    media: frogbot_channel::files::Downloads,
}

/// How files go to and from the homeserver's media repository: its address is the operator's
/// (often a private one, next to the bot), so private addresses are allowed; the paths are
/// fixed, an event's media id percent-encoded into one segment. Sizes and time as any file
/// ([`FetchPolicy::for_files`]).
pub fn homeserver_media() -> FetchPolicy {
    FetchPolicy {
        allow_private: true,
        ..FetchPolicy::for_files()
    }
}

impl<A: MatrixApi> MatrixOutbox<A> {
    /// An outbox sending through `api` (matrix-sdk's `Client`, or a recording one in tests).
    pub fn new(api: A) -> Self {
        Self {
            api,
            shown: ShownAcks::default(),
            dm_lock: tokio::sync::Mutex::default(),
            image_policy: image_policy(),
            images: OnceLock::new(),
            media: frogbot_channel::files::Downloads::new(homeserver_media()),
        }
    }

    /// The outbox fetching image blocks' URLs under `policy` instead of [`image_policy`]'s
    /// public addresses only (tests whose image host is on loopback allow private ones).
    pub fn with_image_policy(mut self, policy: FetchPolicy) -> Self {
        self.image_policy = policy;
        self.images = OnceLock::new();
        self
    }

    /// Fetches the image at `url` (under the outbox's image policy) and uploads it.
    async fn upload_image(&self, url: &str) -> Result<UploadedImage, BoxError> {
        let client = self
            .images
            .get_or_init(|| {
                GuardedClient::new(self.image_policy.clone()).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| format!("images cannot be fetched: {e}"))?;
        let (mimetype, data) = fetch_image(client, url).await?;
        Ok(self.api.upload_media(&mimetype, data).await?)
    }

    /// The room an ask to `place` starts its thread in, or the thread it is asked in as it is.
    async fn ask_room(&self, place: AskPlace<'_>) -> Result<AskRoom, BoxError> {
        let not_in =
            |room: &str| format!("the bot is not in the Matrix room {room}: invite it there first");
        match place {
            AskPlace::Thread(thread) if thread.contains('|') => {
                let (room, _) = split_message_id(thread)?;
                if !self.api.joined(&room) {
                    return Err(not_in(room.as_str()).into());
                }
                Ok(AskRoom::Thread(thread.to_owned()))
            }
            AskPlace::Thread(name) => {
                let room = if name.starts_with('#') {
                    let alias = RoomAliasId::parse(name)
                        .map_err(|_| format!("not a Matrix room alias (#room:server): {name:?}"))?;
                    self.api.resolve_alias(&alias).await?
                } else {
                    RoomId::parse(name).map_err(|_| {
                        format!(
                            "not a Matrix room (!room:server, #alias:server) or thread \
                             (room|event): {name:?}"
                        )
                    })?
                };
                if !self.api.joined(&room) {
                    return Err(not_in(name).into());
                }
                Ok(AskRoom::New(room))
            }
            AskPlace::User(user) => {
                let user = UserId::parse(user)
                    .map_err(|_| format!("not a Matrix user id (@name:server): {user:?}"))?;
                let _one = self.dm_lock.lock().await;
                Ok(AskRoom::New(self.api.dm_room(&user).await?))
            }
        }
    }

    /// The client.
    pub fn api(&self) -> &A {
        &self.api
    }
}

impl<A: MatrixApi + Clone> MatrixOutbox<A> {
    /// The messages a streamed reply in `thread` is drawn in.
    pub fn drafts(&self, thread: &Thread) -> Result<MatrixDrafts<A>, BoxError> {
        let (room, root) = split_message_id(&thread.id)?;
        Ok(MatrixDrafts {
            api: self.api.clone(),
            room,
            root,
            bodies: Mutex::default(),
        })
    }
}

/// Where an ask goes: a thread as it is, or a room to start one in.
enum AskRoom {
    Thread(String),
    New(OwnedRoomId),
}

#[async_trait]
impl<A: MatrixApi + Clone + 'static> ChannelOutbox for MatrixOutbox<A> {
    /// A person's media (its event's `url`, or `file` in an encrypted room), streamed from the
    /// homeserver and decrypted as it arrives ([`MatrixApi::download_media`]); the size the
    /// event states is checked by the engine first.
    async fn open_file(&self, file: &PlatformFile) -> Result<FileStream, BoxError> {
        let source: matrix_sdk::ruma::events::room::MediaSource =
            serde_json::from_value(file.source.clone())
                .map_err(|e| format!("the media source of {}: {e}", file.id))?;
        Ok(self.api.download_media(&source, &self.media).await?)
    }

    /// A thread (`room|event`, the bot in the room) as it is. A room (`!room:server`, an alias
    /// `#room:server` resolved with `GET /directory/room/{alias}`; the bot joined) or a person
    /// (`@alice:server`: the bot's DM room with them, found in `m.direct` or made with
    /// `create_dm`, which invites them) gets `ask.text` (its first [`MESSAGE_CHARS`], Markdown
    /// `body` and HTML) as a new root message, sent under [`ask_txn_id`]`(ask.key)`: a retry of the
    /// same ask finds the same DM room and Synapse answers the repeated transaction with the first
    /// root. The thread is `room|root`.
    async fn ask_thread(&self, ask: AskTo<'_>) -> Result<String, BoxError> {
        let root = format::messages(ask.text, MESSAGE_CHARS).into_iter().next();
        if root.is_none() && !matches!(ask.place, AskPlace::Thread(t) if t.contains('|')) {
            return Err(
                "an ask that starts a Matrix thread needs a text for its first message".into(),
            );
        }
        let room = match self.ask_room(ask.place).await? {
            AskRoom::Thread(thread) => return Ok(thread),
            AskRoom::New(room) => room,
        };
        let root = root.ok_or("an ask with no text")?;
        let event = ("m.room.message", text_content(&root));
        self.post_once(&room, event, &ask_txn_id(ask.key)).await
    }

    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        let parts = format::messages(&reply.text(), MESSAGE_CHARS);
        if parts.is_empty() {
            return Ok(());
        }
        let (room, root) = split_message_id(&thread.id)?;
        for part in parts {
            let (event_type, content) = text_in_thread(&part, &root)?;
            self.api.send(&room, event_type, content).await?;
        }
        Ok(())
    }

    /// An `m.reaction` annotation on the message with `ack`'s emoji as its key, then the
    /// redaction of the bot's previous ack reaction there (a failed redaction is logged: the new
    /// state shows either way).
    async fn ack(&self, _thread: &Thread, message_id: &str, ack: Ack) -> Result<(), BoxError> {
        let (room, event) = split_message_id(message_id)?;
        let (event_type, content) = render::reaction(&event, ack.emoji());
        let reaction = self.api.send(&room, event_type, content).await?;
        let before = self.shown.replace(message_id.to_owned(), ack, reaction);
        if let Some(before) = before
            && let Err(e) = self.api.redact(&room, &before, None).await
        {
            tracing::debug!(message = %message_id, error = %e, "redacting the previous ack reaction failed");
        }
        Ok(())
    }

    /// The bot's typing notice in the room (4 seconds long, renewed every 3).
    async fn working(&self, thread: &Thread) -> Result<(), BoxError> {
        self.typing(thread, true).await
    }

    /// 3 seconds: matrix-sdk's typing notice lasts 4 and is sent again once 3 have passed.
    fn working_every(&self) -> Duration {
        Duration::from_secs(3)
    }

    /// Post + `m.replace` edits ([`MatrixStream`]: messages frozen at a clean cut before their
    /// edits could outgrow the event limit, the first posted once it reads as a start).
    async fn start_stream(&self, thread: &Thread) -> Result<Option<BoxedReplyStream>, BoxError> {
        Ok(Some(Box::new(MatrixStream::new(self.drafts(thread)?))))
    }

    /// The typing notice off (`typing: false`): the turn's reply is complete, failed or
    /// stopped.
    async fn idle(&self, thread: &Thread) -> Result<(), BoxError> {
        self.typing(thread, false).await
    }

    /// The Markdown pieces `post_reply` posts, one message each.
    fn pieces(&self, text: &str) -> Vec<String> {
        format::messages(text, MESSAGE_CHARS)
            .into_iter()
            .map(|f| f.body)
            .collect()
    }

    /// Read-modify-write of the room's `m.room.pinned_events`: the server's list now, with the
    /// event added (at the end) or taken out; nothing is written when it is so already.
    async fn pin_posted(&self, at: MessageAt<'_>, pinned: bool) -> Result<(), BoxError> {
        let (room, event) = split_message_id(at.id)?;
        let mut list = self.api.pinned_events(&room).await?;
        if list.contains(&event) == pinned {
            return Ok(());
        }
        if pinned {
            list.push(event);
        } else {
            list.retain(|e| *e != event);
        }
        self.api
            .set_pinned_events(&room, list)
            .await
            .map_err(|e| match e {
                crate::Error::Api { message, .. } if message.contains("M_FORBIDDEN") => format!(
                    "the bot may not pin in this room ({message}): give it the power level \
                         that m.room.pinned_events needs (a moderator's, 50, by default)"
                )
                .into(),
                e => BoxError::from(e),
            })?;
        Ok(())
    }

    /// An `m.replace` edit of the message.
    async fn edit_message(&self, at: MessageAt<'_>, text: &str) -> Result<(), BoxError> {
        self.drafts(at.thread)?.edit(at.id, text, false).await
    }

    /// The thread's root and thread events before `before` (matrix-sdk's relations API), oldest
    /// first, at most `limit`: their text (`body`, less a reply fallback; edits and other events
    /// left out) and the sender's display name in the room (their user id when they have none).
    async fn thread_history(&self, history: History<'_>) -> Result<Vec<ThreadMessage>, BoxError> {
        let (room, root) = split_message_id(&history.thread.id)?;
        let before = split_message_id(history.before).ok().map(|(_, e)| e);
        let limit = history.limit;
        // The newest events come first from the server: the one mentioning the bot and a few
        // after it may be among them.
        let events = self.api.thread_events(&room, &root, limit + 10).await?;
        let mut out = Vec::new();
        for e in events {
            if before.as_ref().is_some_and(|b| e["event_id"] == b.as_str()) {
                break;
            }
            if let Some(m) = self.history_message(&room, &e).await {
                out.push(m);
            }
        }
        let skip = out.len().saturating_sub(limit);
        out.drain(..skip);
        Ok(out)
    }
}

/// A reply is drawn as `m.text` messages with HTML, an agent message by
/// [`render::agent_message`] (an image fetched and uploaded to the media repository as an
/// `m.image`, or a link saying it could not be shown; event buttons as the bot's reactions). Each
/// piece is sent under the transaction id of its key ([`txn_id`]): a retry, in this process or
/// another, posts nothing twice and gets the same event ids back. Edits are `m.replace` events
/// (homeservers' default push rule `.m.rule.suppress_edits` keeps them from notifying), deletions
/// redactions.
impl<A: MatrixApi> Draw for MatrixOutbox<A> {
    type Text = Formatted;
    type Agent = DrawnPiece;

    fn text_pieces(&self, _thread: &Thread, reply: &UiMessage) -> Vec<Formatted> {
        format::messages(&reply.text(), MESSAGE_CHARS)
    }

    fn agent_pieces(&self, message: &UiMessage) -> Vec<DrawnPiece> {
        render::agent_message(message)
    }
}

#[async_trait]
impl<A: MatrixApi> PostedMessages for MatrixOutbox<A> {
    /// A redaction (the homeserver accepts one of an event redacted already).
    async fn delete_piece(&self, _thread: &Thread, id: &str) -> Result<(), BoxError> {
        let (room, event) = split_message_id(id)?;
        self.api.redact(&room, &event, None).await?;
        Ok(())
    }
}

/// A reply's text piece: an `m.text` in the thread with its HTML, sent under the transaction id
/// of its key.
#[async_trait]
impl<A: MatrixApi> PostPieces<Formatted> for MatrixOutbox<A> {
    async fn post_piece(&self, piece: &Formatted, at: PieceAt<'_>) -> Result<String, BoxError> {
        let (room, root) = split_message_id(&at.thread.id)?;
        let event = text_in_thread(piece, &root)?;
        self.post_once(&room, event, &txn_id(at.key)).await
    }
}

/// A drawn agent message's piece, with the bot's reactions for its event buttons; a quiet
/// delivery's text is an `m.notice`.
#[async_trait]
impl<A: MatrixApi> PostPieces<DrawnPiece> for MatrixOutbox<A> {
    /// The piece under the transaction id of its key, then each reaction under a transaction id
    /// of its own (`{key}:r{k}`): a retry gets the same events back.
    async fn post_piece(&self, drawn: &DrawnPiece, at: PieceAt<'_>) -> Result<String, BoxError> {
        let (room, root) = split_message_id(&at.thread.id)?;
        let mut content = self.piece_content(&root, &drawn.piece).await?;
        // A quiet delivery (a question's blocks: the question drawn next is what notifies) is
        // an `m.notice`, which the default push rules (`.m.rule.suppress_notices`) keep silent.
        if at.quiet && content["msgtype"] == "m.text" {
            content["msgtype"] = "m.notice".into();
        }
        let event = self
            .api
            .send_once(&room, "m.room.message", content, &txn_id(at.key))
            .await?;
        for (k, reaction_key) in drawn.keys.iter().enumerate() {
            let (t, content) = render::reaction(&event, reaction_key);
            let txn = txn_id(&format!("{}:r{k}", at.key));
            self.api.send_once(&room, t, content, &txn).await?;
        }
        Ok(message_id(&room, &event))
    }

    /// An `m.replace` of the event, and its reactions brought to the new keys.
    async fn edit_piece(&self, at: MessageAt<'_>, drawn: &DrawnPiece) -> Result<Edited, BoxError> {
        let (_, root) = split_message_id(&at.thread.id)?;
        let (room, event) = split_message_id(at.id)?;
        let new = self.piece_content(&root, &drawn.piece).await?;
        let content = replacement_of(event.as_str(), new);
        self.api.send(&room, "m.room.message", content).await?;
        self.sync_reactions(&room, &event, &drawn.keys).await?;
        Ok(Edited::Done)
    }
}

/// A file the bot sends: uploaded to the media repository (encrypted in an encrypted room,
/// [`MatrixApi::upload_file`]), then an `m.image` / `m.video` / `m.audio` / `m.file` in the thread
/// under the transaction id of its key. The event is idempotent (a retry gets the same event
/// back); the upload is not (a retry may leave an unused copy in the media repository). A file
/// the homeserver refuses as too large is a text naming it.
#[async_trait]
impl<A: MatrixApi> PostPieces<OutFile> for MatrixOutbox<A> {
    async fn post_piece(&self, file: &OutFile, at: PieceAt<'_>) -> Result<String, BoxError> {
        let (room, root) = split_message_id(&at.thread.id)?;
        let (event_type, mut content) = thread_message(&file.filename, &root)?;
        match self.api.upload_file(&room, file, &self.media).await {
            Ok(Value::Object(source)) => {
                content["msgtype"] = render::file_msgtype(&file.media_type).into();
                content["filename"] = file.filename.clone().into();
                content["info"] = json!({"mimetype": file.media_type, "size": file.size});
                for (k, v) in source {
                    content[k] = v;
                }
            }
            Ok(other) => {
                return Err(format!("the upload named the file oddly: {other}").into());
            }
            Err(crate::Error::TooLarge) => {
                let why = file.refused_text("larger than the homeserver's upload limit");
                content = thread_message(&why, &root)?.1;
            }
            Err(e) => return Err(e.into()),
        }
        self.post_once(&room, (event_type, content), &txn_id(at.key))
            .await
    }
}

/// The `m.text` message `f` (Markdown `body`, HTML `formatted_body`) without a relation.
fn text_content(f: &Formatted) -> Value {
    let mut content = json!({"msgtype": "m.text", "body": f.body});
    f.add_to(&mut content);
    content
}

/// The `m.text` message `f` (Markdown `body`, HTML `formatted_body`) in the thread on `root`.
fn text_in_thread(f: &Formatted, root: &EventId) -> Result<render::Content, BoxError> {
    let (event_type, mut content) = thread_message(&f.body, root)?;
    f.add_to(&mut content);
    Ok((event_type, content))
}

impl<A: MatrixApi> MatrixOutbox<A> {
    /// Posts the event `(event_type, content)` in `room` under the transaction id `txn`
    /// ([`MatrixApi::send_once`]): its message id (`room|event`).
    async fn post_once(
        &self,
        room: &RoomId,
        (event_type, content): render::Content,
        txn: &str,
    ) -> Result<String, BoxError> {
        let event = self.api.send_once(room, event_type, content, txn).await?;
        Ok(message_id(room, &event))
    }

    /// The bot's typing notice in `thread`'s room, on or off.
    async fn typing(&self, thread: &Thread, on: bool) -> Result<(), BoxError> {
        let (room, _) = split_message_id(&thread.id)?;
        self.api.typing(&room, on).await?;
        Ok(())
    }

    /// The content of a piece in the thread on `root`: an `m.text` with its HTML, or an image
    /// uploaded to the media repository as an `m.image` (a link saying so when it cannot be).
    async fn piece_content(&self, root: &EventId, piece: &AgentPiece) -> Result<Value, BoxError> {
        let text = |f: &Formatted| Ok(text_in_thread(f, root)?.1);
        match piece {
            AgentPiece::Text(f) => text(f),
            AgentPiece::Image { url, alt } => match self.upload_image(url).await {
                Ok(up) => {
                    let name = if alt.is_empty() {
                        "image"
                    } else {
                        alt.as_str()
                    };
                    let (_, mut content) = thread_message(name, root)?;
                    content["msgtype"] = "m.image".into();
                    content["url"] = up.mxc.into();
                    content["info"] = json!({"mimetype": up.mimetype, "size": up.size});
                    Ok(content)
                }
                Err(e) => {
                    tracing::warn!(url = %url, error = %e, "an image could not be uploaded to Matrix; posting a link");
                    text(&render::image_link(url, alt, true))
                }
            },
        }
    }

    /// Brings the bot's event-button reactions on `event` to `keys`: redacts its reactions with
    /// an event-button key not in `keys`, places the keys it lacks.
    async fn sync_reactions(
        &self,
        room: &RoomId,
        event: &EventId,
        keys: &[String],
    ) -> Result<(), BoxError> {
        let me = self.api.own_user();
        let have: Vec<(String, String)> = self
            .api
            .annotations(room, event)
            .await?
            .into_iter()
            .filter(|e| me.as_ref().is_some_and(|me| e["sender"] == me.as_str()))
            .filter_map(|e| {
                let key = e["content"]["m.relates_to"]["key"].as_str()?.to_owned();
                crate::ids::read_event(&key)?;
                Some((e["event_id"].as_str()?.to_owned(), key))
            })
            .collect();
        for (id, key) in &have {
            if !keys.contains(key)
                && let Ok(id) = EventId::parse(id)
            {
                self.api.redact(room, &id, None).await?;
            }
        }
        for key in keys {
            if !have.iter().any(|(_, k)| k == key) {
                let (t, content) = render::reaction(event, key);
                self.api.send(room, t, content).await?;
            }
        }
        Ok(())
    }

    /// A thread event as a [`ThreadMessage`]: `m.room.message`s with a text body, not edits.
    async fn history_message(&self, room: &OwnedRoomId, e: &Value) -> Option<ThreadMessage> {
        if e["type"] != "m.room.message" || e["content"]["m.relates_to"]["rel_type"] == "m.replace"
        {
            return None;
        }
        let body = e["content"]["body"].as_str()?;
        let event = e["event_id"].as_str()?;
        let event = matrix_sdk::ruma::EventId::parse(event).ok()?;
        let sender = parse_user_id(e["sender"].as_str()?)?;
        let name = self.api.member_name(room, &sender).await;
        Some(ThreadMessage {
            id: message_id(room, &event),
            text: strip_reply_fallback(body),
            author: PlatformUser {
                id: sender.to_string(),
                name: Some(name.unwrap_or_else(|| sender.to_string())),
                is_bot: false,
            },
            metadata: ThreadMessageMetadata {
                date_sent: millis_to_iso(e["origin_server_ts"].as_i64().unwrap_or_default()),
            },
            reply_to: None,
            raw: e.clone(),
            files: Vec::new(),
            mentions: Vec::new(),
        })
    }
}

/// The messages of one streamed reply in a thread: [`DraftMessages`] for [`MatrixStream`] (and `EditStream`). Ids are
/// `room|event`, as everywhere in this adapter; `stop` draws nothing (Matrix has no buttons: the
/// typed `stop` is the control).
#[derive(Debug)]
pub struct MatrixDrafts<A> {
    api: A,
    room: OwnedRoomId,
    root: OwnedEventId,
    /// Each message's text as last sent: an edit to the same text (only the Stop control, which
    /// Matrix does not draw, changed) sends nothing.
    bodies: Mutex<HashMap<String, String>>,
}

/// The content of an `m.replace` edit of `event` to the message content `new` (as
/// [`replacement`], for any `msgtype`): `m.new_content` is `new` without its relation, the outer
/// content the `* ` fallback.
pub fn replacement_of(event: &str, new: Value) -> Value {
    let mut inner = new;
    if let Some(o) = inner.as_object_mut() {
        o.remove("m.relates_to");
        o.remove("m.mentions");
    }
    let mut outer = inner.clone();
    if let Some(body) = inner["body"].as_str() {
        outer["body"] = format!("* {body}").into();
    }
    if let Some(html) = inner["formatted_body"].as_str() {
        outer["formatted_body"] = format!("* {html}").into();
    }
    outer["m.new_content"] = inner;
    outer["m.relates_to"] = json!({"rel_type": "m.replace", "event_id": event});
    fit_fallback(outer)
}

/// The characters of the short `* ` fallback an edit too large for its full fallback keeps.
pub const SHORT_FALLBACK_CHARS: usize = 200;

/// An edit's content within [`format::MAX_CONTENT_BYTES`]: when the full `* ` fallback (the
/// whole text a second time, for clients without edits) would take it over, the fallback is
/// cut to its first [`SHORT_FALLBACK_CHARS`] characters of `body` and loses its HTML
/// (`m.new_content`, what clients show, is whole).
fn fit_fallback(mut content: Value) -> Value {
    if content_bytes(&content) <= format::MAX_CONTENT_BYTES {
        return content;
    }
    let body = content["m.new_content"]["body"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    content["body"] = format!(
        "* {}",
        frogbot_model::text::truncate(&body, SHORT_FALLBACK_CHARS)
    )
    .into();
    if let Some(o) = content.as_object_mut() {
        o.remove("formatted_body");
        o.remove("format");
    }
    content
}

/// The bytes of `content` as JSON.
pub fn content_bytes(content: &Value) -> usize {
    serde_json::to_vec(content).map_or(usize::MAX, |v| v.len())
}

/// Refuses (before sending) a content over [`format::MAX_CONTENT_BYTES`], the way the
/// homeserver would (`M_TOO_LARGE`), so the caller splits it.
fn check_size(content: &Value) -> Result<(), BoxError> {
    let bytes = content_bytes(content);
    if bytes > format::MAX_CONTENT_BYTES {
        return Err(format!(
            "M_TOO_LARGE: a content of {bytes} bytes, more than the {} sent at most",
            format::MAX_CONTENT_BYTES
        )
        .into());
    }
    Ok(())
}

/// Whether `e` is the homeserver's (or `check_size`'s) refusal of an event as too large
/// (`413 M_TOO_LARGE`).
pub fn is_too_large(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut at: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(e) = at {
        let s = e.to_string();
        if s.contains("M_TOO_LARGE") || s.contains("413") {
            return true;
        }
        at = e.source();
    }
    false
}

/// The content of an `m.replace` edit of `event` to `new`: `m.new_content` the whole new
/// message, the outer `body` / `formatted_body` the `* ` fallback for clients without edits.
pub fn replacement(event: &str, new: &Formatted) -> Value {
    replacement_of(event, text_content(new))
}

impl<A> MatrixDrafts<A> {
    /// The messages' texts as last sent.
    fn bodies(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.bodies.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl<A: MatrixApi> DraftMessages for MatrixDrafts<A> {
    /// An `m.room.message` in the thread (Markdown `body`, HTML `formatted_body`).
    async fn post(&self, text: &str, _stop: bool) -> Result<String, BoxError> {
        let (event_type, content) = text_in_thread(&Formatted::new(text), &self.root)?;
        check_size(&content)?;
        let id = self.api.send(&self.room, event_type, content).await?;
        let id = message_id(&self.room, &id);
        self.bodies().insert(id.clone(), text.to_owned());
        Ok(id)
    }

    /// An `m.replace` edit with the piece's whole text.
    async fn edit(&self, id: &str, text: &str, _stop: bool) -> Result<(), BoxError> {
        if self.bodies().get(id).is_some_and(|b| b == text) {
            return Ok(());
        }
        let (room, event) = split_message_id(id)?;
        let content = replacement(event.as_str(), &Formatted::new(text));
        check_size(&content)?;
        self.api.send(&room, "m.room.message", content).await?;
        self.bodies().insert(id.to_owned(), text.to_owned());
        Ok(())
    }

    /// Pieces whose edits fit: [`format::EDITABLE_TEXT_BYTES`] each.
    fn pieces(&self, text: &str) -> Vec<String> {
        stream_pieces(text, MESSAGE_CHARS)
    }
}

/// `text` cut into streamed messages of at most `max_chars` characters, each small enough for its
/// `m.replace` edits ([`format::EDITABLE_TEXT_BYTES`]).
pub fn stream_pieces(text: &str, max_chars: usize) -> Vec<String> {
    format::messages_within(text, max_chars, format::EDITABLE_TEXT_BYTES)
        .into_iter()
        .map(|f| f.body)
        .collect()
}

pub use frogbot_model::text::{FIRST_MESSAGE_CHARS, reads_as_a_start};

/// The smallest messages a stream cuts to after refusals as too large.
const MIN_STREAM_CHARS: usize = 500;

/// A streamed reply in Matrix: [`MatrixDrafts`]' messages, each posted and then replaced with
/// `m.replace` edits while the text grows.
///
/// - Sized before sending: a message keeps to [`stream_pieces`] (its edits, which carry the
///   text twice, stay within [`format::MAX_CONTENT_BYTES`], encrypted rooms included). When the
///   text outgrows it, the message is frozen at the clean cut [`frogbot_model::text::split`]
///   chose (never edited again while the text grows) and the rest goes on in continuation
///   messages, so the whole text is visible as it is written.
/// - A refusal as too large (`413 M_TOO_LARGE`, or the size check before sending) halves the
///   message size and draws the rest again, at once: it never waits for the delivery grace.
/// - The first message (the one a person is notified of) is held by the [`FirstMessageHold`]
///   rule: posted once the text [`reads_as_a_start`], [`FIRST_MESSAGE_WAIT`](frogbot_channel::FIRST_MESSAGE_WAIT) after the first
///   text, or at the end of the stream.
/// - The final text ([`ReplyStream::finish`]) continues the frozen messages when it starts with
///   their text (a notice appended); otherwise every message is drawn again from the whole text
///   (surplus messages redacted).
#[derive(Debug)]
pub struct MatrixStream<A> {
    drafts: MatrixDrafts<A>,
    /// The messages posted, in order: id and the text each shows.
    msgs: Vec<(String, String)>,
    /// How many of `msgs` are frozen.
    frozen: usize,
    /// The reply's text the frozen messages show (up to the cut), as the engine sent it.
    before_cut: String,
    /// The fence line (with its newline) the rest reopens with when the cut is inside a code
    /// block.
    reopen: String,
    /// The most characters of one message.
    max_chars: usize,
    /// Where the frozen messages end is not known: each draw cuts the whole text again.
    whole: bool,
    /// The first message's hold.
    hold: FirstMessageHold,
}

impl<A: MatrixApi> MatrixStream<A> {
    /// A stream that has posted nothing yet.
    pub fn new(drafts: MatrixDrafts<A>) -> Self {
        Self {
            drafts,
            msgs: Vec::new(),
            frozen: 0,
            before_cut: String::new(),
            reopen: String::new(),
            max_chars: MESSAGE_CHARS,
            whole: false,
            hold: FirstMessageHold::default(),
        }
    }

    async fn draw(&mut self, text: &str, live: bool) -> Result<(), BoxError> {
        loop {
            match self.try_draw(text, live).await {
                Err(e) if is_too_large(e.as_ref()) && self.max_chars > MIN_STREAM_CHARS => {
                    let largest = self
                        .max_chars
                        .min(format::EDITABLE_TEXT_BYTES * 9 / 20)
                        .min(text.chars().count());
                    let smaller = (largest / 2).max(MIN_STREAM_CHARS);
                    tracing::debug!(error = %e, chars = smaller, "a streamed message was too large; cutting smaller");
                    self.max_chars = smaller;
                }
                r => return r,
            }
        }
    }

    /// Shows `piece` in message `index`: an edit when it is posted and shows something else, a
    /// new message when it is not posted yet.
    async fn put(&mut self, index: usize, piece: &str) -> Result<(), BoxError> {
        match self.msgs.get(index) {
            Some((_, shown)) if shown == piece => {}
            Some((id, _)) => {
                let id = id.clone();
                self.drafts.edit(&id, piece, false).await?;
                self.msgs[index].1 = piece.to_owned();
            }
            None => {
                let id = self.drafts.post(piece, false).await?;
                self.msgs.push((id, piece.to_owned()));
            }
        }
        Ok(())
    }

    async fn try_draw(&mut self, text: &str, live: bool) -> Result<(), BoxError> {
        if self.whole || !text.starts_with(&self.before_cut) {
            return self.redraw(text, live).await;
        }
        // The rest opens where the frozen messages end, past the whitespace at the cut (as
        // `text::split` trims a piece at a cut): a continuation drawn alone (it fits, so it is not
        // cut again) must not open with the paragraph break before it — a body starting with
        // blank lines, in the notification too. Inside a reopened code block it is code.
        let mut base = self.before_cut.len();
        if self.reopen.is_empty() {
            let rest = &text[base..];
            base += rest.len() - rest.trim_start().len();
        }
        let rest = &text[base..];
        let pieces = stream_pieces(&format!("{}{rest}", self.reopen), self.max_chars);
        if pieces.is_empty()
            || (live && self.msgs.is_empty() && pieces.len() == 1 && self.hold.holds(text))
        {
            return Ok(());
        }
        let (mut used, mut open) = (0, self.reopen.clone());
        for (i, piece) in pieces.iter().enumerate() {
            self.put(self.frozen, piece).await?;
            let Some(next) = pieces.get(i + 1) else {
                break;
            };
            // Frozen: the rest is cut from where this piece ends in the text.
            match locate(&rest[used..], piece, &open, next) {
                Some((n, reopen)) => {
                    used += n;
                    open = reopen;
                    self.frozen += 1;
                    self.before_cut = text[..base + used].to_owned();
                    self.reopen = open.clone();
                }
                None => {
                    // The piece is not found in the text: from now on the whole text is cut.
                    self.whole = true;
                    return self.redraw(text, live).await;
                }
            }
        }
        Ok(())
    }

    /// Draws the whole `text` again over the messages: each piece in its message (edited when
    /// it changed), new ones posted, surplus ones redacted at the end.
    async fn redraw(&mut self, text: &str, live: bool) -> Result<(), BoxError> {
        let pieces = stream_pieces(text, self.max_chars);
        if live && self.msgs.is_empty() && pieces.len() <= 1 && self.hold.holds(text) {
            return Ok(());
        }
        for (i, piece) in pieces.iter().enumerate() {
            self.put(i, piece).await?;
        }
        if !live {
            for (id, _) in self.msgs.drain(pieces.len()..) {
                let (room, event) = split_message_id(&id)?;
                self.drafts.api.redact(&room, &event, None).await?;
            }
        }
        self.frozen = 0;
        self.before_cut.clear();
        self.reopen.clear();
        Ok(())
    }
}

/// Where the piece `piece` (cut from `open` followed by `src`, `open` the fence line it was
/// reopened with, if any) ends in `src`: the bytes of `src` it takes, and the fence line the next
/// piece `next` reopens with when the cut is inside a code block (the splitter closed this piece
/// and reopens the block in the next). `None` when the piece is not found.
fn locate(src: &str, piece: &str, open: &str, next: &str) -> Option<(usize, String)> {
    let body = if open.is_empty() {
        piece
    } else {
        piece.strip_prefix(open).unwrap_or(piece)
    }
    .trim_start();
    let lead = src.len() - src.trim_start().len();
    let s = &src[lead..];
    if s.starts_with(body) {
        return Some((lead + body.len(), String::new()));
    }
    // Cut inside a code block: the piece ends with the closing fence the splitter added.
    let (kept, _close) = body.rsplit_once('\n')?;
    if !s.starts_with(kept) {
        return None;
    }
    let first = next.lines().next().unwrap_or_default();
    let fence = first.trim_start();
    let reopen = if fence.starts_with("```") || fence.starts_with("~~~") {
        format!("{first}\n")
    } else {
        String::new()
    };
    Some((lead + kept.len(), reopen))
}

#[async_trait]
impl<A: MatrixApi> ReplyStream for MatrixStream<A> {
    async fn show(&mut self, text: &str) -> Result<(), BoxError> {
        self.draw(text, true).await
    }

    async fn finish(&mut self, text: &str) -> Result<(), BoxError> {
        self.draw(text, false).await
    }

    fn message_ids(&self) -> Vec<String> {
        self.msgs.iter().map(|(id, _)| id.clone()).collect()
    }

    /// Nothing is visible until the first message is posted (it waits for a first sentence).
    fn visible(&self) -> bool {
        !self.msgs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::RecordingMatrix;

    fn thread() -> Thread {
        Thread {
            id: "!r:localhost|$root".into(),
            platform: "matrix".into(),
            chat_id: "matrix-x".into(),
        }
    }

    fn reply(text: &str) -> UiMessage {
        serde_json::from_value(serde_json::json!({
            "id": "m1", "role": "assistant", "parts": [{"type": "text", "text": text}]
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn each_ack_reacts_and_redacts_the_reaction_before() {
        let outbox = MatrixOutbox::new(std::sync::Arc::new(RecordingMatrix::new()));
        let said = "!r:localhost|$said";
        for ack in [Ack::Seen, Ack::Working, Ack::Done] {
            outbox.ack(&thread(), said, ack).await.unwrap();
        }
        let sent: Vec<(String, serde_json::Value)> = outbox
            .api()
            .sent()
            .into_iter()
            .map(|s| {
                assert_eq!(s.room, "!r:localhost");
                (s.event_type, s.content)
            })
            .collect();
        let react = |key: &str| {
            (
                "m.reaction".to_owned(),
                serde_json::json!({"m.relates_to": {
                    "rel_type": "m.annotation", "event_id": "$said", "key": key}}),
            )
        };
        let redact = |id: &str| {
            (
                "m.room.redaction".to_owned(),
                serde_json::json!({"redacts": id}),
            )
        };
        assert_eq!(
            sent,
            [
                react("👀"),
                react("⏳"),
                redact("$sent1"),
                react("✅"),
                redact("$sent2"),
            ]
        );
        assert!(outbox.shown.is_empty(), "forgotten at Done");
        outbox.working(&thread()).await.unwrap();
        let last = outbox.api().sent().pop().unwrap();
        assert_eq!(
            (last.event_type.as_str(), last.content),
            ("m.typing", serde_json::json!({"typing": true}))
        );
        assert_eq!(outbox.working_every(), Duration::from_secs(3));
        assert!(outbox.ack(&thread(), "no-bar", Ack::Seen).await.is_err());
    }

    #[tokio::test]
    async fn asks_start_a_thread_in_a_room_an_alias_or_a_dm_and_bad_places_post_nothing() {
        let outbox = MatrixOutbox::new(std::sync::Arc::new(RecordingMatrix::new()));
        let ask = |place| {
            let text = "**Deploy** where?";
            outbox.ask_thread(AskTo {
                place,
                text,
                key: "k1",
            })
        };
        // A thread as it is, nothing posted.
        let thread = "!r:localhost|$root";
        assert_eq!(ask(AskPlace::Thread(thread)).await.unwrap(), thread);
        assert!(outbox.api().sent().is_empty());
        // A room, an alias (resolved), a person (their DM room): a root message each.
        assert_eq!(
            ask(AskPlace::Thread("!r:localhost")).await.unwrap(),
            "!r:localhost|$sent1"
        );
        assert_eq!(
            ask(AskPlace::Thread("#ops:localhost")).await.unwrap(),
            "!ops:localhost|$sent2"
        );
        assert_eq!(
            ask(AskPlace::User("@alice:localhost")).await.unwrap(),
            "!dm-alice:localhost|$sent3"
        );
        let sent = outbox.api().sent();
        let rooms: Vec<&str> = sent.iter().map(|s| s.room.as_str()).collect();
        assert_eq!(
            rooms,
            ["!r:localhost", "!ops:localhost", "!dm-alice:localhost"]
        );
        for s in &sent {
            assert_eq!(s.event_type, "m.room.message");
            assert_eq!(s.content["body"], "**Deploy** where?");
            assert_eq!(
                s.content["formatted_body"],
                "<p><strong>Deploy</strong> where?</p>"
            );
            assert!(s.content.get("m.relates_to").is_none(), "a root: {s:?}");
        }
        assert_eq!(ask_txn_id("k1"), "frogbot-ask-k1");
        // Bad places: an error naming the reason, nothing posted.
        for (place, reason) in [
            (AskPlace::User("alice"), "not a Matrix user id"),
            (AskPlace::User("@unknown:localhost"), "unknown Matrix user"),
            (AskPlace::Thread("general"), "not a Matrix room"),
            (
                AskPlace::Thread("#unknown:localhost"),
                "unknown Matrix room",
            ),
            (
                AskPlace::Thread("!elsewhere:localhost"),
                "the bot is not in",
            ),
            (
                AskPlace::Thread("!elsewhere:localhost|$e"),
                "the bot is not in",
            ),
            (
                AskPlace::Thread("!r:localhost|nope"),
                "not a Matrix message or thread id",
            ),
        ] {
            let e = ask(place).await.unwrap_err().to_string();
            assert!(e.contains(reason), "{place:?}: {e}");
        }
        let place = AskPlace::Thread("!r:localhost");
        let blank = outbox.ask_thread(AskTo {
            place,
            text: " ",
            key: "k2",
        });
        assert!(
            blank
                .await
                .unwrap_err()
                .to_string()
                .contains("needs a text")
        );
        assert_eq!(outbox.api().sent().len(), 3, "nothing more posted");
    }

    /// The texts a recorded stream shows: each message's latest text, in order.
    fn shown(sent: &[crate::testing::SentEvent]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (i, s) in sent.iter().enumerate() {
            let c = &s.content;
            if c["m.relates_to"]["rel_type"] == "m.replace" {
                let id = c["m.relates_to"]["event_id"].as_str().unwrap();
                let m = out
                    .iter_mut()
                    .find(|(e, _)| e == id)
                    .expect("an edited message");
                m.1 = c["m.new_content"]["body"].as_str().unwrap().to_owned();
            } else if s.event_type == "m.room.message" {
                out.push((
                    format!("$sent{}", i + 1),
                    c["body"].as_str().unwrap().to_owned(),
                ));
            }
        }
        out
    }

    /// A model that pauses after a few words: they show after the wait, as on every platform
    /// (held only while they do not read as a start, at most `FIRST_MESSAGE_WAIT`).
    #[tokio::test(start_paused = true)]
    async fn a_held_first_message_is_posted_after_the_wait() {
        let outbox = MatrixOutbox::new(std::sync::Arc::new(RecordingMatrix::new()));
        let mut stream = MatrixStream::new(outbox.drafts(&thread()).unwrap());
        stream.show("Let me check").await.unwrap();
        tokio::time::advance(frogbot_channel::FIRST_MESSAGE_WAIT / 2).await;
        stream.show("Let me check").await.unwrap();
        assert!(outbox.api().sent().is_empty());
        assert!(!stream.visible());
        tokio::time::advance(frogbot_channel::FIRST_MESSAGE_WAIT / 2).await;
        stream.show("Let me check").await.unwrap();
        assert!(stream.visible());
        assert_eq!(
            shown(&outbox.api().sent()),
            [("$sent1".to_owned(), "Let me check".to_owned())]
        );
    }

    #[tokio::test]
    async fn a_growing_stream_freezes_its_messages_at_clean_cuts_and_every_event_fits() {
        let outbox = MatrixOutbox::new(std::sync::Arc::new(RecordingMatrix::new()));
        let mut stream = MatrixStream::new(outbox.drafts(&thread()).unwrap());
        // A fragment is not posted (the notification would show it); a sentence is.
        stream.show("got:").await.unwrap();
        assert!(outbox.api().sent().is_empty());
        let mut text = String::from("got: the first sentence. ");
        stream.show(&text).await.unwrap();
        assert_eq!(outbox.api().sent().len(), 1);
        // Grows to 60,000 characters, with a code block across a cut.
        let mut i = 0;
        while text.len() < 60_000 {
            text.push_str(&format!("Line {i} has some words in it. "));
            if i % 50 == 49 {
                text.push_str("\n\n```rust\n");
                for j in 0..60 {
                    text.push_str(&format!("let x{j} = {j};\n"));
                }
                text.push_str("```\n\n");
            }
            i += 1;
            if i % 40 == 0 {
                stream.show(&text).await.unwrap();
            }
        }
        stream.finish(&text).await.unwrap();
        let sent = outbox.api().sent();
        for s in &sent {
            assert!(
                content_bytes(&s.content) <= format::MAX_CONTENT_BYTES,
                "{} bytes",
                content_bytes(&s.content)
            );
        }
        let shown = shown(&sent);
        assert!(shown.len() >= 4, "{} messages", shown.len());
        assert_eq!(stream.message_ids().len(), shown.len());
        let words = |s: &str| -> Vec<String> {
            s.split_whitespace()
                .filter(|w| !w.starts_with("```"))
                .map(str::to_owned)
                .collect()
        };
        let all: Vec<String> = shown.iter().flat_map(|(_, t)| words(t)).collect();
        assert_eq!(all, words(&text));
        // Frozen: once a later message exists, an earlier one is edited no more.
        for (k, (id, _)) in shown.iter().enumerate().skip(1) {
            let posted_at: usize = id["$sent".len()..].parse().unwrap();
            let earlier = &shown[k - 1].0;
            assert!(
                !sent[posted_at..].iter().any(|s| {
                    s.content["m.relates_to"]["rel_type"] == "m.replace"
                        && s.content["m.relates_to"]["event_id"] == earlier.as_str()
                }),
                "{earlier} edited after {id} was posted"
            );
        }
        // Each message renders its code as code: fences balanced.
        for (_, t) in &shown {
            assert_eq!(t.matches("```").count() % 2, 0, "{t}");
        }
    }

    /// Regression (a loaded run of the 40,000-character delivery test): a stream frozen at a
    /// paragraph break and then drawn with a rest that fits in one message edited that message to
    /// open with the blank lines of the break. Drawn after every sentence, as a slow consumer
    /// would, no message ever shows text opening with whitespace.
    #[tokio::test]
    async fn a_continuation_never_opens_with_the_blank_lines_at_its_cut() {
        let outbox = MatrixOutbox::new(std::sync::Arc::new(RecordingMatrix::new()));
        let mut stream = MatrixStream::new(outbox.drafts(&thread()).unwrap());
        let mut text = String::from("got: ");
        let mut i = 0;
        while text.chars().count() < 30_000 {
            text.push_str(&format!(
                "Sentence {i} of the long reply has a few plain words."
            ));
            text.push_str(if i % 8 == 7 { "\n\n" } else { " " });
            stream.show(&text).await.unwrap();
            i += 1;
        }
        let text = text.trim_end().to_owned();
        stream.finish(&text).await.unwrap();
        let sent = outbox.api().sent();
        for s in &sent {
            let body = s.content["m.new_content"]["body"]
                .as_str()
                .or(s.content["body"].as_str())
                .unwrap_or_default();
            assert_eq!(body, body.trim_start(), "a message opens with whitespace");
        }
        let shown = shown(&sent);
        assert!(shown.len() >= 3, "{} messages", shown.len());
        let words: Vec<&str> = shown
            .iter()
            .flat_map(|(_, t)| t.split_whitespace())
            .collect();
        assert_eq!(words, text.split_whitespace().collect::<Vec<_>>());
    }

    #[test]
    fn an_edit_too_large_for_its_full_fallback_gets_a_short_one() {
        let small = replacement("$e", &Formatted::new("hi"));
        assert_eq!(small["body"], "* hi");
        assert_eq!(small["formatted_body"], "* <p>hi</p>");
        let long = "word ".repeat(3_900);
        let big = replacement("$e", &Formatted::new(&long));
        assert!(content_bytes(&big) <= format::MAX_CONTENT_BYTES);
        assert_eq!(big["m.new_content"]["body"], long);
        assert!(big["body"].as_str().unwrap().chars().count() <= SHORT_FALLBACK_CHARS + 2);
        assert!(big.get("formatted_body").is_none());
        let of = replacement_of("$e", json!({"msgtype": "m.text", "body": long}));
        assert!(content_bytes(&of) <= format::MAX_CONTENT_BYTES);
        assert!(is_too_large(
            check_size(&json!({"body": "x".repeat(50_000)}))
                .unwrap_err()
                .as_ref()
        ));
    }

    #[tokio::test]
    async fn long_replies_are_split_in_the_thread_and_blank_ones_send_nothing() {
        let outbox = MatrixOutbox::new(std::sync::Arc::new(RecordingMatrix::new()));
        outbox.post_reply(&thread(), &reply("  \n ")).await.unwrap();
        assert!(outbox.api().sent().is_empty());
        let long = "word ".repeat(MESSAGE_CHARS / 5 * 2 + 10);
        outbox.post_reply(&thread(), &reply(&long)).await.unwrap();
        let sent = outbox.api().sent();
        // 64,050 characters: 4 parts of at most 18,000 (body and HTML keep the event's bytes).
        assert_eq!(sent.len(), 4, "{} chars in 4 parts", long.len());
        for s in &sent {
            assert_eq!(s.event_type, "m.room.message");
            assert_eq!(s.content["m.relates_to"]["rel_type"], "m.thread");
            assert_eq!(s.content["m.relates_to"]["event_id"], "$root");
            assert!(s.content["body"].as_str().unwrap().chars().count() <= MESSAGE_CHARS);
            assert!(serde_json::to_string(&s.content).unwrap().len() < 45_000);
        }
    }

    #[tokio::test]
    async fn replies_carry_the_markdown_as_body_and_its_html_as_formatted_body() {
        let outbox = MatrixOutbox::new(std::sync::Arc::new(RecordingMatrix::new()));
        let text = "**Hi** <b>there</b> & [docs](https://x.io)\n\n```sh\nls\n```";
        outbox.post_reply(&thread(), &reply(text)).await.unwrap();
        let sent = outbox.api().sent();
        assert_eq!(sent.len(), 1);
        let c = &sent[0].content;
        assert_eq!(c["msgtype"], "m.text");
        assert_eq!(c["body"], text);
        assert_eq!(c["format"], "org.matrix.custom.html");
        assert_eq!(
            c["formatted_body"],
            "<p><strong>Hi</strong> &lt;b&gt;there&lt;/b&gt; &amp; \
             <a href=\"https://x.io\">docs</a></p>\n\
             <pre><code class=\"language-sh\">ls\n</code></pre>"
        );
        assert_eq!(c["m.relates_to"]["rel_type"], "m.thread");
    }
}
