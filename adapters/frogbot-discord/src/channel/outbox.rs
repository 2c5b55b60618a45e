//! The `ChannelOutbox`: the agent's replies posted in the thread, split with
//! `frogbot_model::text::split` at Discord's 2,000 characters; Markdown as the model wrote it
//! ([`crate::format`]), sent with empty `allowed_mentions` so a reply pings no one.
//!
//! Durable delivery ([`ChannelOutbox::deliver`]): each piece is posted with a `nonce` made from
//! its piece key ([`delivery_nonce`]) and `enforce_nonce: true`, so Discord creates it once
//! however often a retry posts it again (within Discord's few minutes of nonce memory).
//!
//! Asks ([`ChannelOutbox::ask_thread`]): to a thread (or a DM channel) as it is; to a text or
//! announcement channel, the ask's text is posted there (`nonce` from the ask's key,
//! `enforce_nonce`) and a public thread is started on it, whose id is the message's; to a person,
//! a conversation of its own in the DM channel Discord opens with them (`POST
//! /users/@me/channels`, the same channel each time): a DM cannot have threads, so the ask's text
//! is posted there as the conversation's root (`nonce` from the key, `enforce_nonce`) and the
//! thread is `{dm}~{root}` ([`crate::ids::agent_thread_id`]) — never the DM channel itself, which
//! stays the person's conversation with the model. Everything posted in such a thread (replies,
//! deliveries, agent messages, streamed replies) goes to the DM as a reply to the root
//! (`message_reference`, `fail_if_not_exists: false`), question cards too. What a channel id is
//! comes from `GET /channels/{id}`.
//!
//! Files ([`OutFile`], a message's files after its text): each its own message, the file
//! uploaded with Discord's own upload (`POST /channels/{c}/messages` as `multipart/form-data`:
//! `payload_json` and the part `files[0]`) in the same place as the text (a reply to the root in
//! an agent conversation), under the nonce of its key with `enforce_nonce` like a text piece, and
//! with `SUPPRESS_NOTIFICATIONS` when a piece of the same message came before it. Discord shows
//! an image inline by itself (no separate photo call), every other file as a download, with its
//! file name. The file part carries the file's own media type and is streamed from
//! [`OutFile::open`] by the guarded client (serenity's attachment takes the file whole), with the
//! bot's token, to Discord or the configured `api_url`. A file larger than the
//! upload limit ([`DEFAULT_MAX_UPLOAD_BYTES`], or the bot's `max_upload_bytes`) is not uploaded:
//! a text naming it is posted in its place ([`OutFile::refused_text`]), and so when Discord
//! refuses an upload as too large (`413`, 40005: a server whose limit is lower than configured).
//!
//! Streamed replies are an [`EditStream`] over [`DiscordDrafts`]: the first text is posted
//! (create message), then the message is edited (`PATCH`) as the model writes, at most once per
//! `stream_interval`, with a Stop button (`custom_id` [`STOP_CUSTOM_ID`]) until the final state,
//! which has no components. Thread context is the thread's channel history
//! (`GET /channels/{thread}/messages?before=…`).

use std::sync::Arc;

use async_trait::async_trait;
use frogbot_channel::delivery::{Draw, Edited, PieceAt, PostPieces, PostedMessages};
use frogbot_channel::files::size_text;
use frogbot_channel::outbox::{AskTo, BoxedReplyStream, History};
use frogbot_channel::{
    AskPlace, ChannelOutbox, DraftMessages, EditStream, FileStream, OutFile, ShownAcks,
};

use frogbot_model::{
    Ack, BoxError, MessageAt, PlatformFile, Thread, ThreadMessage, ThreadMessageMetadata, UiMessage,
};
use serenity::all::ButtonStyle;
use serenity::builder::{CreateActionRow, CreateButton, CreateMessage, CreateThread, EditMessage};
use serenity::model::channel::{ChannelType, MessageFlags, MessageReference};
use serenity::model::id::{ChannelId, MessageId};

use crate::client::DiscordApi;
use crate::format;
use crate::ids::{
    agent_thread_id, ask_nonce, channel_id, delivery_nonce, message_id as message_id_of,
    thread_root, user_id,
};
use crate::render::{AgentPiece, MESSAGE_LIMIT};

/// `create` posted in `thread`: in an agent conversation (`{dm}~{root}`), as a reply to its root
/// (which may be gone: `fail_if_not_exists` false); elsewhere as it is.
fn in_thread(create: CreateMessage, channel: ChannelId, thread: &str) -> CreateMessage {
    match thread_root(thread) {
        Some(root) => create
            .reference_message(MessageReference::from((channel, root)).fail_if_not_exists(false)),
        None => create,
    }
}

/// The `custom_id` of the Stop button on a streamed reply.
pub const STOP_CUSTOM_ID: &str = "frogbot-stop";

/// The Stop button's row.
pub fn stop_row() -> CreateActionRow {
    CreateActionRow::Buttons(vec![
        CreateButton::new(STOP_CUSTOM_ID)
            .label("Stop")
            .style(ButtonStyle::Danger),
    ])
}

/// `create`, a piece after the first of one reply (`later`), made silent: Discord notifies of
/// every message created, and one reply is one notification (`SUPPRESS_NOTIFICATIONS`, the
/// person still sees the piece at once).
fn silent_after_first(create: CreateMessage, later: bool) -> CreateMessage {
    if later {
        create.flags(MessageFlags::SUPPRESS_NOTIFICATIONS)
    } else {
        create
    }
}

/// The messages a streamed reply is drawn in: posted and edited in the thread's channel. The
/// first message posted notifies; the continuations are posted with `SUPPRESS_NOTIFICATIONS`.
pub struct DiscordDrafts<A: DiscordApi> {
    api: Arc<A>,
    channel: ChannelId,
    /// The FrogBot thread (an agent conversation's messages reply to its root).
    thread: String,
    /// Whether a message of this reply was posted already.
    posted: std::sync::atomic::AtomicBool,
    /// The threads whose streamed reply shows now, with its Stop button (shared with the
    /// outbox: no "typing…" there meanwhile).
    streaming: Streaming,
}

/// The threads whose streamed reply shows now with its Stop button: "typing…" is not sent
/// there. Discord shows a typing sign for 10 seconds or until the typist's next message is
/// created — an edit does not end it — so a sign sent while a reply streams by edits would stay
/// on after the reply's last edit. The visible message and its Stop button show the work.
#[derive(Clone, Debug, Default)]
struct Streaming(Arc<std::sync::Mutex<std::collections::HashMap<String, Vec<String>>>>);

impl Streaming {
    /// Message `id` of a reply in `thread` carries the Stop button now (`stop`), or not.
    fn set(&self, thread: &str, id: &str, stop: bool) {
        let mut threads = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let ids = threads.entry(thread.to_owned()).or_default();
        ids.retain(|i| i != id);
        if stop {
            ids.push(id.to_owned());
        }
        if ids.is_empty() {
            threads.remove(thread);
        }
    }

    /// A new reply in `thread`: nothing of it shows yet.
    fn clear(&self, thread: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(thread);
    }

    /// Whether a message in `thread` carries a streamed reply's Stop button.
    fn on(&self, thread: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(thread)
    }
}

impl<A: DiscordApi> std::fmt::Debug for DiscordDrafts<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordDrafts")
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

/// An edit to `content` (no mention pings), with the Stop button when `stop`, else none.
fn edit_to(content: &str, stop: bool) -> EditMessage {
    EditMessage::new()
        .content(content)
        .allowed_mentions(format::no_mentions())
        .components(if stop { vec![stop_row()] } else { Vec::new() })
}

#[async_trait]
impl<A: DiscordApi> DraftMessages for DiscordDrafts<A> {
    async fn post(&self, text: &str, stop: bool) -> Result<String, BoxError> {
        let later = self.posted.swap(true, std::sync::atomic::Ordering::SeqCst);
        let mut message = silent_after_first(
            in_thread(format::reply_message(text), self.channel, &self.thread),
            later,
        );
        if stop {
            message = message.components(vec![stop_row()]);
        }
        let id = self
            .api
            .send_message(self.channel, &message)
            .await?
            .id
            .to_string();
        self.streaming.set(&self.thread, &id, stop);
        Ok(id)
    }

    async fn edit(&self, id: &str, text: &str, stop: bool) -> Result<(), BoxError> {
        let message = message_id_of(id)?;
        self.api
            .edit_message(self.channel, message, &edit_to(text, stop))
            .await?;
        self.streaming.set(&self.thread, id, stop);
        Ok(())
    }

    fn pieces(&self, text: &str) -> Vec<String> {
        format::messages(text, MESSAGE_LIMIT)
    }
}

/// Discord's code for "A thread has already been created for this message".
const THREAD_EXISTS: isize = 160_004;

/// The most characters of a thread name.
const THREAD_NAME_LIMIT: usize = 100;

/// The name of the thread an ask starts: the first line of its text that has words, without
/// Markdown's emphasis and heading marks, cut to Discord's 100 characters (`FrogBot ask` when
/// there is none).
pub fn ask_thread_name(text: &str) -> String {
    let marks: &[char] = &['*', '_', '#', '>', '`', '~', '|'];
    let line = text
        .lines()
        .map(|l| l.trim().trim_matches(marks).trim())
        .find(|l| !l.is_empty())
        .unwrap_or("FrogBot ask");
    frogbot_model::text::truncate(line, THREAD_NAME_LIMIT)
}

/// Discord's upload limit for a bot's message in a server without boosts (and in a DM): 10 MiB
/// for all the files of one request ("Uploading Files" in Discord's API reference). A boosted
/// server takes more (its boost tier's limit): raise `max_upload_bytes` in the bot's config.
pub const DEFAULT_MAX_UPLOAD_BYTES: u64 = 10 * 1024 * 1024;

/// Posts the agent's replies, split at Discord's 2,000 characters (nothing for an empty reply).
pub struct DiscordOutbox<A: DiscordApi> {
    api: Arc<A>,
    /// The ack reaction each message shows now, until its last (Done or Failed).
    shown: ShownAcks<MessageId, Ack>,
    /// The threads whose streamed reply shows now with its Stop button.
    streaming: Streaming,
    /// People's attachments are downloaded through it.
    downloads: Arc<frogbot_channel::files::Downloads>,
    /// The largest file uploaded; a larger one is named in a text instead.
    max_upload: u64,
}

impl<A: DiscordApi> DiscordOutbox<A> {
    /// Over `api`.
    pub fn new(api: Arc<A>) -> Self {
        DiscordOutbox {
            api,
            shown: ShownAcks::default(),
            streaming: Streaming::default(),
            downloads: Arc::default(),
            max_upload: DEFAULT_MAX_UPLOAD_BYTES,
        }
    }

    /// Uploads files of at most `bytes` bytes (a boosted server's limit); a larger one is named
    /// in a text instead ([`DEFAULT_MAX_UPLOAD_BYTES`] by default).
    pub fn with_max_upload(mut self, bytes: u64) -> Self {
        self.max_upload = bytes;
        self
    }

    /// Downloads people's attachments through `downloads` (a policy of its own).
    pub fn with_downloads(mut self, downloads: Arc<frogbot_channel::files::Downloads>) -> Self {
        self.downloads = downloads;
        self
    }
}

impl<A: DiscordApi> DiscordOutbox<A> {
    /// Posts `text` in the text channel `channel` (once per `key`: its nonce, `enforce_nonce`)
    /// and starts a public thread on it; the thread's id (the message's). When the message has
    /// its thread already (an earlier attempt started it, `160004`), that thread.
    async fn start_ask_thread(
        &self,
        channel: ChannelId,
        text: &str,
        key: &str,
    ) -> Result<String, BoxError> {
        let root = format::messages(text, MESSAGE_LIMIT)
            .into_iter()
            .next()
            .unwrap_or_else(|| ask_thread_name(text));
        let posted = self.post_ask_root(channel, root, key).await?;
        let thread = CreateThread::new(ask_thread_name(text));
        match self.api.create_thread(channel, posted.id, &thread).await {
            Ok(thread) => Ok(thread.to_string()),
            Err(e) if e.discord_code() == Some(THREAD_EXISTS) => {
                tracing::info!(message = %posted.id, "discord: the ask's thread was started by an earlier attempt");
                Ok(posted.id.to_string())
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl<A: DiscordApi> DiscordOutbox<A> {
    /// Posts `root`, an ask's first message, in `channel` once per `key` (its nonce, with
    /// `enforce_nonce`: a retry gets the message an earlier attempt created).
    async fn post_ask_root(
        &self,
        channel: ChannelId,
        root: String,
        key: &str,
    ) -> Result<crate::client::Posted, crate::Error> {
        let message = format::reply_message(root)
            .nonce(serenity::model::channel::Nonce::String(ask_nonce(key)))
            .enforce_nonce(true);
        self.api.send_message(channel, &message).await
    }
}

impl<A: DiscordApi> std::fmt::Debug for DiscordOutbox<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordOutbox").finish_non_exhaustive()
    }
}

#[async_trait]
impl<A: DiscordApi> ChannelOutbox for DiscordOutbox<A> {
    /// An attachment's `url` on Discord's CDN (signed; no token needed).
    async fn open_file(&self, file: &PlatformFile) -> Result<FileStream, BoxError> {
        self.downloads.open(&file.url, &[]).await
    }

    /// An ask to a thread (types 10, 11, 12) or a DM channel (1) is asked there; to a text or
    /// announcement channel (0, 5), `ask.text` is posted there (idempotent on `ask.key`: its nonce, with
    /// `enforce_nonce`) and the ask goes to the public thread started on it (its id is the
    /// message's; a retry finds it: `160004`); to a person (a user id), in their DM channel with
    /// the bot, where nothing is posted first (the ask's own message opens it). Any other channel,
    /// an id that is no snowflake, a channel or user Discord does not know: an error, nothing
    /// posted.
    async fn ask_thread(&self, ask: AskTo<'_>) -> Result<String, BoxError> {
        match ask.place {
            AskPlace::Thread(id) => {
                let channel = channel_id(id).map_err(|_| {
                    format!("a Discord channel or thread id is a number (a snowflake), not {id:?}")
                })?;
                let kind = self
                    .api
                    .channel_kind(channel)
                    .await
                    .map_err(|e| format!("the Discord channel {id} cannot be read: {e}"))?;
                match kind {
                    ChannelType::PublicThread
                    | ChannelType::PrivateThread
                    | ChannelType::NewsThread
                    | ChannelType::Private => Ok(id.to_owned()),
                    ChannelType::Text | ChannelType::News => {
                        self.start_ask_thread(channel, ask.text, ask.key).await
                    }
                    other => Err(format!(
                        "the Discord channel {id} is a channel of type {} ({}): asks go to a text or \
                         announcement channel, a thread or a DM",
                        u8::from(other),
                        other.name()
                    )
                    .into()),
                }
            }
            AskPlace::User(u) => {
                let user = user_id(u).map_err(|_| {
                    format!("a Discord user id is a number (a snowflake), not {u:?}")
                })?;
                let dm = self
                    .api
                    .dm_channel(user)
                    .await
                    .map_err(|e| format!("no DM channel with the Discord user {u}: {e}"))?;
                let root = format::messages(ask.text, MESSAGE_LIMIT)
                    .into_iter()
                    .next()
                    .ok_or("an ask to a Discord user needs a text for its first message")?;
                let posted = self.post_ask_root(dm, root, ask.key).await?;
                Ok(agent_thread_id(dm, posted.id))
            }
        }
    }

    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        let channel = channel_id(&thread.id)?;
        for (i, piece) in format::messages(&reply.text(), MESSAGE_LIMIT)
            .into_iter()
            .enumerate()
        {
            let message = silent_after_first(
                in_thread(format::reply_message(piece), channel, &thread.id),
                i > 0,
            );
            self.api.send_message(channel, &message).await?;
        }
        Ok(())
    }

    /// `PUT` / `DELETE /channels/{channel}/pins/{message}` (pinning twice is done; unpinning a
    /// message gone is done).
    async fn pin_posted(&self, at: MessageAt<'_>, pinned: bool) -> Result<(), BoxError> {
        let channel = channel_id(&at.thread.id)?;
        self.api
            .pin_message(channel, message_id_of(at.id)?, pinned)
            .await?;
        Ok(())
    }

    /// Adds `ack`'s emoji as the bot's reaction, then takes the bot's previous ack reaction off
    /// (a failure there is logged: the new state shows either way).
    async fn ack(&self, thread: &Thread, message_id: &str, ack: Ack) -> Result<(), BoxError> {
        let channel = channel_id(&thread.id)?;
        let message = message_id_of(message_id)?;
        self.api.react(channel, message, ack.emoji()).await?;
        let before = self.shown.replace(message, ack, ack);
        if let Some(before) = before.filter(|b| *b != ack)
            && let Err(e) = self.api.unreact(channel, message, before.emoji()).await
        {
            tracing::debug!(message = %message, error = %e, "removing the previous ack reaction failed");
        }
        Ok(())
    }

    /// "Typing…" in the thread, which Discord shows for 10 seconds or until the bot's next
    /// message; none while a streamed reply shows there with its Stop button (an edit does not
    /// end the sign: it would stay on after the reply).
    async fn working(&self, thread: &Thread) -> Result<(), BoxError> {
        if self.streaming.on(&thread.id) {
            return Ok(());
        }
        self.api.typing(channel_id(&thread.id)?).await?;
        Ok(())
    }

    fn working_every(&self) -> std::time::Duration {
        std::time::Duration::from_secs(8)
    }

    async fn start_stream(&self, thread: &Thread) -> Result<Option<BoxedReplyStream>, BoxError> {
        let drafts = DiscordDrafts {
            api: self.api.clone(),
            channel: channel_id(&thread.id)?,
            thread: thread.id.clone(),
            posted: std::sync::atomic::AtomicBool::new(false),
            streaming: self.streaming.clone(),
        };
        // A new reply: nothing of it shows yet.
        self.streaming.clear(&thread.id);
        Ok(Some(Box::new(EditStream::new(drafts))))
    }

    fn pieces(&self, text: &str) -> Vec<String> {
        format::messages(text, MESSAGE_LIMIT)
    }

    /// `PATCH` of the message to `text` (a piece of [`ChannelOutbox::pieces`]), no components.
    async fn edit_message(&self, at: MessageAt<'_>, text: &str) -> Result<(), BoxError> {
        let channel = channel_id(&at.thread.id)?;
        let message = message_id_of(at.id)?;
        self.api
            .edit_message(channel, message, &edit_to(text, false))
            .await?;
        Ok(())
    }

    /// The thread channel's messages before `before` (Discord's newest-first page, reversed),
    /// named by the author's global name, else username.
    async fn thread_history(&self, history: History<'_>) -> Result<Vec<ThreadMessage>, BoxError> {
        let channel = channel_id(&history.thread.id)?;
        let before = message_id_of(history.before)?;
        let limit = u8::try_from(history.limit.clamp(1, 100)).unwrap_or(100);
        let mut page = self.api.messages_before(channel, before, limit).await?;
        page.sort_by_key(|m| m.id);
        Ok(page
            .iter()
            .map(|m| ThreadMessage {
                id: m.id.to_string(),
                text: m.content.clone(),
                author: crate::convert::platform_user(&m.author),
                metadata: ThreadMessageMetadata {
                    date_sent: m.timestamp.to_rfc3339().unwrap_or_default(),
                },
                reply_to: None,
                raw: serde_json::Value::Null,
                files: Vec::new(),
                mentions: Vec::new(),
            })
            .collect())
    }
}

/// A message posted under the nonce of its key, with `enforce_nonce`: Discord creates it once
/// however often a retry posts it again.
fn keyed(create: CreateMessage, at: PieceAt<'_>) -> CreateMessage {
    create
        .nonce(serenity::model::channel::Nonce::String(delivery_nonce(
            at.key,
        )))
        .enforce_nonce(true)
}

/// A reply is drawn as Markdown messages of at most 2,000 characters, an agent message by
/// [`crate::render::agent_message`] (content, embeds, action rows of event buttons). Each piece is
/// posted under the nonce of its key with `enforce_nonce`: a retry within Discord's nonce window
/// gets the messages an earlier attempt created back. Edits are `PATCH`es (they notify no one).
impl<A: DiscordApi> Draw for DiscordOutbox<A> {
    type Text = String;
    type Agent = AgentPiece;

    fn text_pieces(&self, _thread: &Thread, reply: &UiMessage) -> Vec<String> {
        format::messages(&reply.text(), MESSAGE_LIMIT)
    }

    fn agent_pieces(&self, message: &UiMessage) -> Vec<AgentPiece> {
        crate::render::agent_message(message)
    }
}

#[async_trait]
impl<A: DiscordApi> PostedMessages for DiscordOutbox<A> {
    async fn delete_piece(&self, thread: &Thread, id: &str) -> Result<(), BoxError> {
        let channel = channel_id(&thread.id)?;
        self.api.delete_message(channel, message_id_of(id)?).await?;
        Ok(())
    }
}

/// A reply's text piece: the ones after the first are posted silently (one reply, one
/// notification).
#[async_trait]
impl<A: DiscordApi> PostPieces<String> for DiscordOutbox<A> {
    async fn post_piece(&self, piece: &String, at: PieceAt<'_>) -> Result<String, BoxError> {
        let channel = channel_id(&at.thread.id)?;
        let create = in_thread(
            format::reply_message(piece.as_str()),
            channel,
            &at.thread.id,
        );
        let create = keyed(silent_after_first(create, at.later()), at);
        Ok(self
            .api
            .send_message(channel, &create)
            .await?
            .id
            .to_string())
    }
}

/// A drawn agent message's piece ([`crate::render::agent_message`]): the ones after the first
/// (and every piece of a quiet delivery, such as a question's blocks) are posted silently.
#[async_trait]
impl<A: DiscordApi> PostPieces<AgentPiece> for DiscordOutbox<A> {
    async fn post_piece(&self, piece: &AgentPiece, at: PieceAt<'_>) -> Result<String, BoxError> {
        let channel = channel_id(&at.thread.id)?;
        let create = in_thread(piece.create(), channel, &at.thread.id);
        let create = keyed(silent_after_first(create, at.later()), at);
        Ok(self
            .api
            .send_message(channel, &create)
            .await?
            .id
            .to_string())
    }

    async fn edit_piece(&self, at: MessageAt<'_>, piece: &AgentPiece) -> Result<Edited, BoxError> {
        let channel = channel_id(&at.thread.id)?;
        self.api
            .edit_message(channel, message_id_of(at.id)?, &piece.edit())
            .await?;
        Ok(Edited::Done)
    }
}

/// A message's file ([`OutFile`]): uploaded as the attachment of a message of its own (no text),
/// in the thread's place, under the nonce of its key with `enforce_nonce`, silent after the
/// message's first piece; a file past the upload limit is a text naming it instead. The id is the
/// message's (deleting it deletes the file).
#[async_trait]
impl<A: DiscordApi> PostPieces<OutFile> for DiscordOutbox<A> {
    async fn post_piece(&self, file: &OutFile, at: PieceAt<'_>) -> Result<String, BoxError> {
        let channel = channel_id(&at.thread.id)?;
        if file.size > self.max_upload {
            let why = format!(
                "larger than Discord's {} limit for bots",
                size_text(self.max_upload)
            );
            return self.post_refused(file, &why, at).await;
        }
        let create = CreateMessage::new().allowed_mentions(format::no_mentions());
        let create = keyed(
            silent_after_first(in_thread(create, channel, &at.thread.id), at.later()),
            at,
        );
        match self
            .api
            .send_file(channel, &create, file, &self.downloads)
            .await
        {
            Ok(posted) => Ok(posted.id.to_string()),
            Err(e)
                if e.discord_code() == Some(crate::client::ENTITY_TOO_LARGE)
                    || e.http_status() == Some(413) =>
            {
                tracing::info!(thread = %at.thread.id, file = %file.id, size = file.size, error = %e,
                    "discord: the upload was refused as too large; naming the file instead");
                let why = "larger than this Discord server's upload limit for bots";
                self.post_refused(file, why, at).await
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl<A: DiscordApi> DiscordOutbox<A> {
    /// The text naming `file` that could not be uploaded (`why`), posted in its place under its
    /// key.
    async fn post_refused(
        &self,
        file: &OutFile,
        why: &str,
        at: PieceAt<'_>,
    ) -> Result<String, BoxError> {
        let channel = channel_id(&at.thread.id)?;
        let text = format::reply_message(file.refused_text(why));
        let create = keyed(
            silent_after_first(in_thread(text, channel, &at.thread.id), at.later()),
            at,
        );
        Ok(self
            .api
            .send_message(channel, &create)
            .await?
            .id
            .to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::RecordingDiscord;

    #[tokio::test]
    async fn long_replies_are_split_and_empty_ones_post_nothing() {
        let api = Arc::new(RecordingDiscord::new());
        let outbox = DiscordOutbox::new(api.clone());
        let thread = Thread {
            id: "700000000000000007".into(),
            platform: "discord".into(),
            chat_id: "c".into(),
        };
        let reply: UiMessage = serde_json::from_value(serde_json::json!({
            "id": "m", "role": "assistant", "parts": [{"type": "text", "text": "frog ".repeat(900)}]
        }))
        .unwrap();
        outbox.post_reply(&thread, &reply).await.unwrap();
        let calls = api.calls();
        assert_eq!(calls.len(), 3);
        assert!(calls.iter().all(|c| c.method == "send_message"
            && c.body["content"].as_str().unwrap().chars().count() <= 2000
            && c.body["allowed_mentions"]["parse"] == serde_json::json!([])));
        let empty: UiMessage = serde_json::from_value(serde_json::json!({
            "id": "m", "role": "assistant", "parts": [{"type": "text", "text": "  "}]
        }))
        .unwrap();
        outbox.post_reply(&thread, &empty).await.unwrap();
        assert_eq!(api.calls().len(), 3);
    }

    /// A file is one upload under the nonce of its key (silent after the text); one past the
    /// limit is a text naming it, nothing uploaded.
    #[tokio::test]
    async fn a_file_is_one_upload_and_one_past_the_limit_a_text() {
        let api = Arc::new(RecordingDiscord::new());
        let outbox = DiscordOutbox::new(api.clone()).with_max_upload(10);
        let thread = Thread {
            id: "700000000000000007".into(),
            platform: "discord".into(),
            chat_id: "c".into(),
        };
        let files = [
            OutFile::from_bytes("f1", "text/plain", "a.txt", b"hello".to_vec()),
            OutFile::from_bytes("f2", "text/plain", "b.txt", vec![0; 11]),
        ];
        let delivery = frogbot_channel::Delivery::new("k");
        let ids = ChannelOutbox::deliver_files(&outbox, &thread, &files, 1, &delivery)
            .await
            .unwrap();
        assert_eq!(ids.len(), 2);
        let calls = api.calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].method, "send_file");
        assert_eq!(calls[0].files, [("a.txt".to_owned(), b"hello".to_vec())]);
        assert_eq!(calls[0].body["nonce"], delivery_nonce("k:file:0"));
        assert_eq!(calls[0].body["enforce_nonce"], true);
        assert_eq!(calls[0].body["flags"], 1 << 12);
        assert_eq!(calls[1].method, "send_message");
        assert_eq!(
            calls[1].body["content"],
            "📎 b.txt (11 bytes) could not be sent here: larger than Discord's 10 bytes limit \
             for bots."
        );
        assert_eq!(calls[1].body["nonce"], delivery_nonce("k:file:1"));
    }

    /// While a streamed reply shows with its Stop button, no "typing…" (Discord ends the sign
    /// at the bot's next message, not at an edit: it would stay on after the reply); before its
    /// first message and once it is finished, typing as before.
    #[tokio::test]
    async fn no_typing_while_a_streamed_reply_shows() {
        let fake = crate::testing::FakeDiscord::start(1, 2).await;
        let outbox = DiscordOutbox::new(fake.http());
        let thread = Thread {
            id: fake.new_id().to_string(),
            platform: "discord".into(),
            chat_id: "c".into(),
        };
        let typings = || {
            fake.calls()
                .iter()
                .filter(|c| c.path.ends_with("/typing"))
                .count()
        };
        let mut stream = outbox.start_stream(&thread).await.unwrap().unwrap();
        outbox.working(&thread).await.unwrap();
        assert_eq!(typings(), 1, "before anything shows");
        stream
            .show("Here is the first sentence of it. And more")
            .await
            .unwrap();
        assert!(stream.visible(), "the reply shows");
        outbox.working(&thread).await.unwrap();
        assert_eq!(typings(), 1, "none while the reply streams");
        stream
            .finish("Here is the first sentence of it. And more.")
            .await
            .unwrap();
        outbox.working(&thread).await.unwrap();
        assert_eq!(typings(), 2, "typing again once it is finished");
    }

    /// Over serenity's HTTP client and the fake Discord: one ack reaction at a time.
    #[tokio::test]
    async fn acks_replace_each_other_as_one_reaction_and_working_types() {
        let fake = crate::testing::FakeDiscord::start(1, 2).await;
        let outbox = DiscordOutbox::new(fake.http());
        let channel = fake.new_id();
        let thread = Thread {
            id: channel.to_string(),
            platform: "discord".into(),
            chat_id: "c".into(),
        };
        let alice = crate::testing::user(fake.new_id(), "alice", false);
        let said = fake.user_message(channel, None, &alice, "hi");
        let id = said["id"].as_str().unwrap().to_owned();
        for ack in [Ack::Seen, Ack::Working, Ack::Done] {
            outbox.ack(&thread, &id, ack).await.unwrap();
            assert_eq!(fake.own_reactions(&id), [ack.emoji()], "{ack:?}");
        }
        outbox.working(&thread).await.unwrap();
        let calls: Vec<(String, String)> = fake
            .calls()
            .into_iter()
            .map(|c| (c.method, c.path))
            .collect();
        let on = format!("/api/v10/channels/{channel}/messages/{id}/reactions");
        let call = |m: &str, emoji: &str| (m.to_owned(), format!("{on}/{emoji}/@me"));
        assert_eq!(
            calls,
            [
                call("PUT", "%F0%9F%91%80"),
                call("PUT", "%E2%8F%B3"),
                call("DELETE", "%F0%9F%91%80"),
                call("PUT", "%E2%9C%85"),
                call("DELETE", "%E2%8F%B3"),
                (
                    "POST".to_owned(),
                    format!("/api/v10/channels/{channel}/typing")
                ),
            ]
        );
        assert_eq!(outbox.working_every(), std::time::Duration::from_secs(8));

        // A failed turn; a refused removal does not fail the ack (the old reaction stays).
        let other = fake.user_message(channel, None, &alice, "again");
        let other = other["id"].as_str().unwrap().to_owned();
        outbox.ack(&thread, &other, Ack::Seen).await.unwrap();
        fake.refuse_reaction_removals(true);
        outbox.ack(&thread, &other, Ack::Working).await.unwrap();
        assert_eq!(fake.own_reactions(&other), ["👀", "⏳"]);
        fake.refuse_reaction_removals(false);
        outbox.ack(&thread, &other, Ack::Failed).await.unwrap();
        assert_eq!(fake.own_reactions(&other), ["👀", "❌"]);
        // A message Discord does not know: the ack fails (the engine logs it).
        assert!(
            outbox
                .ack(&thread, "700000000000000099", Ack::Seen)
                .await
                .is_err()
        );
    }

    /// Over serenity's HTTP client and the fake Discord: what is sent is what Discord gets.
    #[tokio::test]
    async fn replies_go_out_with_empty_allowed_mentions() {
        let fake = crate::testing::FakeDiscord::start(1, 2).await;
        let outbox = DiscordOutbox::new(fake.http());
        let thread = Thread {
            id: "700000000000000007".into(),
            platform: "discord".into(),
            chat_id: "c".into(),
        };
        let text = "@everyone look: <@&42> and <@7>\n\n| a | b |\n|---|---|\n| 1 | 2 |";
        let reply: UiMessage = serde_json::from_value(serde_json::json!({
            "id": "m", "role": "assistant", "parts": [{"type": "text", "text": text}]
        }))
        .unwrap();
        outbox.post_reply(&thread, &reply).await.unwrap();
        let posts: Vec<_> = fake
            .calls()
            .into_iter()
            .filter(|c| {
                c.method == "POST" && c.path.ends_with("/channels/700000000000000007/messages")
            })
            .collect();
        assert_eq!(posts.len(), 1);
        assert_eq!(posts[0].status, 200);
        assert_eq!(
            posts[0].body["allowed_mentions"],
            serde_json::json!({"parse": [], "users": [], "roles": []})
        );
        assert_eq!(
            posts[0].body["content"],
            "@everyone look: <@&42> and <@7>\n\n```\na | b\n--+--\n1 | 2\n```"
        );
    }
}
