//! [`TelegramOutbox`]: the engine's [`ChannelOutbox`] for Telegram. Posts the agent's replies in
//! the thread (forum topic), as a reply to the last message that talked to the bot there, in
//! Telegram's HTML ([`crate::format`], `parse_mode` `HTML`), split with
//! [`frogbot_model::text::split`] at Telegram's 4,096 characters (of the text shown).
//!
//! Streamed replies ([`ChannelOutbox::start_stream`]): in a private chat, the Bot API's message
//! drafts ([`DraftStream`]: `sendMessageDraft` shows the text being written as an ephemeral
//! preview, each finished 4,096-character piece and the final one are sent as messages; a draft
//! carries no button, so there the typed `stop` is the Stop control). Where the bot may not draft
//! (a group, a topic, a refusal) they are drawn by post + edit ([`EditStream`] over
//! [`TelegramDrafts`]): `sendMessage`, then `editMessageText` (both HTML), the last message
//! carrying a Stop button ([`render::stop_keyboard`]) while the model writes, none once the reply
//! is final.
//!
//! Agent messages ([`ChannelOutbox::post_message`]) are drawn by [`render::agent_message`] and
//! posted like a durable delivery's pieces (each once under its [`Delivery::piece_key`](frogbot_channel::Delivery::piece_key), the
//! posted ids remembered in-process so a retry returns them and posts only what is missing);
//! the first piece notifies, the others are silent. [`ChannelOutbox::edit_posted`] edits each
//! piece in place (`editMessageText`, `editMessageMedia`), sends a longer message's extra pieces
//! silently and deletes a shorter one's surplus; a photo that must become text is deleted and the
//! text sent in its place. [`ChannelOutbox::delete_posted`] is `deleteMessage`,
//! [`ChannelOutbox::pin_posted`] `pinChatMessage` with `disable_notification` /
//! `unpinChatMessage`.
//!
//! Agent conversations in a private chat ([`ChannelOutbox::ask_thread`] to a person): a private
//! chat has no threads, so the conversation an agent opens with a person is the thread
//! `{chat}~{root}` ([`crate::ids::agent_thread_id`]), `root` being the agent's first message, which
//! `ask_thread` posts in the private chat. Everything posted in that thread (replies, deliveries,
//! agent messages, question prompts) goes to the private chat as a reply to `root`, so the person
//! sees which conversation it belongs to; the outbox remembers in-process which messages belong to
//! which agent conversation (the last [`MAX_POSTED_PIECES`], [`TelegramOutbox::agent_thread_of`])
//! so that [`super::receive`] can route the person's replies to them. The private chat's own
//! thread (`{chat}`) stays the person's conversation with the model.
//!
//! Files ([`ChannelOutbox::deliver_files`], the shared loop over `PostPieces<OutFile>`): each
//! its own message after the message's text, in the same chat, topic and reply, silent unless
//! it is the message's first: `sendPhoto` for a picture of at most 10 MB, `sendDocument` (name and
//! media type kept) for anything else or a picture Telegram refuses as a photo, uploaded as
//! multipart/form-data with the bytes streamed ([`TelegramApi::send_file`]). A file over
//! [`MAX_UPLOAD`] (the Bot API's 50 MB for bots; [`TelegramOutbox::with_max_upload`] for a local
//! Bot API server) is named in a text instead. Idempotent like the text pieces: in-process only
//! (remembered under `{key}:file:{i}`); a file whose answer was lost, or a retry in another
//! process, is uploaded again (at least once).
//!
//! Telegram gives bots no history of a chat, so [`ChannelOutbox::thread_history`] keeps its
//! default (nothing): the model sees only the messages the bot received.
//!
//! Durable delivery ([`ChannelOutbox::deliver`]): at least once. Each piece is one `sendMessage`,
//! not retried here: a failure worth retrying (a `429` with its `retry_after`, a `5xx`, a network
//! failure) goes back to the engine as a [`Transient`](frogbot_model::Transient) and the engine
//! calls `deliver` again with the same key. The outbox remembers in-process the pieces it posted
//! under each [`Delivery::piece_key`](frogbot_channel::Delivery::piece_key) (the last [`MAX_POSTED_PIECES`]), so a retry posts only the
//! pieces still missing. The Bot API has no idempotency key and no way to look: a piece whose
//! answer was lost (a reset after Telegram posted it) is posted again, and a retry in another
//! process posts the whole reply again.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use frogbot_channel::delivery::{Draw, Keys, Lookup, PieceAt, PostPieces, PostedMessages};
use frogbot_channel::outbox::{AskTo, BoxedReplyStream};
use frogbot_channel::{
    AskPlace, ChannelOutbox, DraftMessages, EditStream, FileStream, OutFile, ReplyStream,
};
use std::time::Duration;

use frogbot_model::{Ack, BoxError, MessageAt, PlatformFile, Thread, UiMessage};
use teloxide::Bot;
use teloxide::types::{ChatId, MessageId, ParseMode, ReplyMarkup, ThreadId};
use tracing::warn;

use crate::client::{
    Edited, MAX_PHOTO, MAX_UPLOAD, SendTo, TelegramApi, Upload, UploadKind, delete_message,
    edit_piece, pin_message, send_html_once, send_piece_once, with_retry,
};
use crate::format;
use crate::ids::{agent_thread_id, split_message_id, split_thread_id, thread_root};
use crate::render::{self, AgentPiece, MAX_TEXT};

/// How many posted pieces the outbox remembers (their [`Delivery::piece_key`](frogbot_channel::Delivery::piece_key)s, the oldest
/// forgotten first): far more than the deliveries being retried at any time.
pub const MAX_POSTED_PIECES: usize = 10_000;

/// How many threads' "message replies answer" the outbox remembers before it forgets them all.
pub const MAX_REPLY_TO: usize = 10_000;

/// The piece keys posted lately with the message each was posted as (`chat:id`), in order, at
/// most [`MAX_POSTED_PIECES`].
#[derive(Debug, Default)]
struct Posted {
    keys: HashMap<String, String>,
    order: VecDeque<String>,
}

impl Posted {
    fn contains(&self, key: &str) -> bool {
        self.keys.contains_key(key)
    }

    fn get(&self, key: &str) -> Option<String> {
        self.keys.get(key).cloned()
    }

    fn insert(&mut self, key: String, id: String) {
        if self.keys.insert(key.clone(), id).is_some() {
            return;
        }
        self.order.push_back(key);
        while self.order.len() > MAX_POSTED_PIECES {
            if let Some(old) = self.order.pop_front() {
                self.keys.remove(&old);
            }
        }
    }
}

/// Posts the agent's replies to Telegram.
#[derive(Debug)]
pub struct TelegramOutbox {
    api: Bot,
    /// Thread id → the last message addressed to the bot there (a hint for `reply_parameters`).
    reply_to: Mutex<HashMap<String, MessageId>>,
    /// Thread id → the person's message whose turn runs there (its Working ack, until Done or
    /// Failed): the turn's reply quotes it, not a message that came in (queued) meanwhile.
    turn_of: Mutex<HashMap<String, MessageId>>,
    /// The pieces of durable deliveries posted lately.
    posted: Mutex<Posted>,
    /// Message id (`chat:id`) → the agent conversation (`{chat}~{root}`) it belongs to, for the
    /// messages posted or routed there lately.
    members: Mutex<Posted>,
    /// An ask's key → the agent conversation its first message started (lately, in-process).
    asks: Mutex<Posted>,
    /// A durable delivery's key → what its text pieces replied to (a message id, `""` for
    /// nothing), lately, in-process: its files reply to the same.
    replies: Mutex<Posted>,
    /// The largest file uploaded; a larger one is named in a text instead.
    max_upload: u64,
    /// People's files are downloaded through it.
    downloads: frogbot_channel::files::Downloads,
}

impl TelegramOutbox {
    /// An outbox posting with `api`.
    pub fn new(api: Bot) -> Self {
        Self {
            api,
            reply_to: Mutex::default(),
            turn_of: Mutex::default(),
            posted: Mutex::default(),
            members: Mutex::default(),
            asks: Mutex::default(),
            replies: Mutex::default(),
            max_upload: MAX_UPLOAD,
            downloads: frogbot_channel::files::Downloads::default(),
        }
    }

    /// Uploading files of at most `bytes` (default [`MAX_UPLOAD`], the Bot API's 50 MB; a local
    /// Bot API server takes up to 2,000 MB). A larger file is named in a text instead.
    pub fn with_max_upload(mut self, bytes: u64) -> Self {
        self.max_upload = bytes;
        self
    }

    /// Downloading people's files through `downloads` (a policy of its own).
    pub fn with_downloads(mut self, downloads: frogbot_channel::files::Downloads) -> Self {
        self.downloads = downloads;
        self
    }

    /// The agent conversation (`{chat}~{root}`) message `message_id` (`chat:id`) belongs to: its
    /// root, or a message this outbox posted in it or a person's message routed to it, lately (in
    /// this process; the last [`MAX_POSTED_PIECES`]).
    pub fn agent_thread_of(&self, message_id: &str) -> Option<String> {
        self.members.lock().expect("not poisoned").get(message_id)
    }

    /// Remembers that message `message_id` (`chat:id`) belongs to `thread`, when that is an
    /// agent conversation.
    pub(crate) fn note_member(&self, thread: &str, message_id: &str) {
        if thread_root(thread).is_some() {
            self.members
                .lock()
                .expect("not poisoned")
                .insert(message_id.to_owned(), thread.to_owned());
        }
    }

    /// Whether piece `key` of a durable delivery was posted by this outbox (lately).
    pub fn posted(&self, key: &str) -> bool {
        self.posted.lock().expect("not poisoned").contains(key)
    }

    /// Remembers `id` as the message of `thread` replies answer.
    pub(crate) fn remember(&self, thread: &str, id: MessageId) {
        let mut map = self.reply_to.lock().expect("not poisoned");
        if map.len() >= MAX_REPLY_TO && !map.contains_key(thread) {
            // Bounded: past it every thread is forgotten (a reply then quotes nothing).
            map.clear();
        }
        map.insert(thread.to_owned(), id);
    }

    /// What a message posted in `thread` replies to: an agent conversation's root, else the last
    /// message addressed to the bot there.
    fn reply_to(&self, thread: &str) -> Option<MessageId> {
        if let Some(root) = thread_root(thread) {
            return Some(root);
        }
        self.reply_to
            .lock()
            .expect("not poisoned")
            .get(thread)
            .copied()
    }

    /// What a turn's reply in `thread` replies to: an agent conversation's root, else the
    /// person's message whose turn runs (its Working ack), else the last message addressed to the
    /// bot there. A message queued while a turn runs is quoted by its own turn's reply, not by
    /// the running one's.
    fn turn_reply_to(&self, thread: &str) -> Option<MessageId> {
        if let Some(root) = thread_root(thread) {
            return Some(root);
        }
        let turn = self
            .turn_of
            .lock()
            .expect("not poisoned")
            .get(thread)
            .copied();
        turn.or_else(|| self.reply_to(thread))
    }

    /// What `reply` replies to: a notice (a queued message's "Got it", a refusal; core's notices
    /// have ids `notice_…`) the last message addressed to the bot, which it is about; a turn's
    /// reply the turn's message ([`Self::turn_reply_to`]).
    fn reply_target(&self, thread: &str, reply: &UiMessage) -> Option<MessageId> {
        if reply.id.starts_with("notice_") {
            self.reply_to(thread)
        } else {
            self.turn_reply_to(thread)
        }
    }

    /// The messages a streamed reply in `thread` is drawn in.
    pub fn drafts(&self, thread: &Thread) -> Result<TelegramDrafts, BoxError> {
        let (chat, topic) = split_thread_id(&thread.id)?;
        Ok(TelegramDrafts {
            api: self.api.clone(),
            chat,
            topic,
            reply_to: self.turn_reply_to(&thread.id),
            posted: Arc::default(),
        })
    }

    /// Posts a notice (a refusal, a failure) in `thread`; a failure is logged.
    pub(crate) async fn say(&self, thread: &str, text: &str, reply_to: Option<MessageId>) {
        let Ok((chat, topic)) = split_thread_id(thread) else {
            return;
        };
        let to = SendTo::new(chat, topic).replying(reply_to);
        if let Err(e) = TelegramApi::send_message(&self.api, to, text, None, None).await {
            warn!(thread, error = %e, "could not post a notice to Telegram");
        }
    }
}

/// `sendMessage` of `html` (`parse_mode` `HTML`) to `to`, with `markup` when set, retried
/// in-process ([`TelegramApi::send_message`] on the bot).
async fn send_html(
    api: &Bot,
    to: SendTo,
    html: &str,
    markup: Option<ReplyMarkup>,
) -> Result<crate::client::SentMessage, crate::Error> {
    TelegramApi::send_message(api, to, html, Some(ParseMode::Html), markup).await
}

/// The largest file the Bot API lets a bot download (`getFile`: 20 MB).
const BOT_API_DOWNLOAD_MAX: u64 = 20 * 1024 * 1024;

#[async_trait]
impl ChannelOutbox for TelegramOutbox {
    /// A file by its `file_id`: `getFile` gives its path (the Bot API serves files up to 20 MB),
    /// then its bytes come from `<api>/file/bot<token>/<path>`.
    async fn open_file(&self, file: &PlatformFile) -> Result<FileStream, BoxError> {
        let too_large = || -> BoxError {
            frogbot_channel::files::OpenError::TooLarge {
                limit: BOT_API_DOWNLOAD_MAX,
                platform: "Telegram",
            }
            .into()
        };
        // Known too large from the update: told so, not tried (`getFile` would refuse it).
        if file.size.is_some_and(|n| n > BOT_API_DOWNLOAD_MAX) {
            return Err(too_large());
        }
        let found: teloxide::types::File = match crate::client::request(
            &self.api,
            "getFile",
            &serde_json::json!({ "file_id": file.id }),
            None,
        )
        .await
        {
            Ok(found) => found,
            // Of unknown size (a document without `file_size`): the Bot API's own refusal.
            Err(crate::Error::Api { message, .. }) if message.contains("file is too big") => {
                return Err(too_large());
            }
            Err(e) => return Err(e.into()),
        };
        let mut url = self.api.api_url();
        url.path_segments_mut()
            .map_err(|()| "the API URL cannot take a path")?
            .pop_if_empty()
            .push("file")
            .push(&format!("bot{}", self.api.token()))
            .extend(found.path.split('/'));
        self.downloads.open(url.as_str(), &[]).await
    }

    /// An ask goes to a chat (`-100123`, `-100123:7` for a forum topic, `777~12` for an agent
    /// conversation) as it is. To a person, it starts a conversation of its own in their private
    /// chat with the bot (its id is the user's id; Telegram delivers only once they have started
    /// the bot): the first piece of `ask.text` is posted there as its root and the thread is
    /// `{chat}~{root}` — never the private chat's own thread `{chat}`, where the person talks
    /// with the model.
    ///
    /// Idempotent on `ask.key` within this process only (the Bot API has no idempotency key and no
    /// way to look for an earlier post): a retry here returns the conversation started before; a
    /// retry in another process, or after the answer of `sendMessage` was lost, starts another.
    async fn ask_thread(&self, ask: AskTo<'_>) -> Result<String, BoxError> {
        match ask.place {
            AskPlace::Thread(t) => {
                split_thread_id(t)?;
                Ok(t.to_owned())
            }
            AskPlace::User(u) => {
                let id: i64 =
                    u.parse().ok().filter(|id| *id > 0).ok_or_else(|| {
                        format!("a Telegram user id is a positive number, not {u:?}")
                    })?;
                if let Some(thread) = self.asks.lock().expect("not poisoned").get(ask.key) {
                    return Ok(thread);
                }
                let root = format::messages(ask.text, MAX_TEXT)
                    .into_iter()
                    .next()
                    .ok_or("an ask to a Telegram user needs a text for its first message")?;
                let to = SendTo::new(ChatId(id), None);
                let sent = send_html(&self.api, to, &root, None).await?;
                let thread = agent_thread_id(sent.chat, sent.id);
                self.note_member(&thread, &crate::ids::message_id(sent.chat, sent.id));
                self.asks
                    .lock()
                    .expect("not poisoned")
                    .insert(ask.key.to_owned(), thread.clone());
                Ok(thread)
            }
        }
    }

    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        let parts = format::messages(&reply.text(), MAX_TEXT);
        if parts.is_empty() {
            return Ok(());
        }
        let (chat, topic) = split_thread_id(&thread.id)?;
        let reply_to = self.reply_target(&thread.id, reply);
        // The reply of a stream the engine could not finish (its messages edited, the rest
        // posted here).
        let continued = !reply.metadata.drafts.is_empty();
        for (i, part) in parts.iter().enumerate() {
            // One notification per reply: the first piece's (none when the reply continues its
            // stream's messages).
            let silent = i > 0 || continued;
            let to = SendTo::new(chat, topic).replying(reply_to).silent(silent);
            let sent = send_html(&self.api, to, part, None).await?;
            self.note_member(&thread.id, &crate::ids::message_id(sent.chat, sent.id));
        }
        Ok(())
    }

    /// `setMessageReaction`: a bot sets one reaction per message, so the call replaces the one
    /// before. Telegram takes only its own list of reaction emojis: see [`reaction`].
    async fn ack(&self, thread: &Thread, message_id: &str, ack: Ack) -> Result<(), BoxError> {
        let (chat, id) = split_message_id(message_id)?;
        {
            let mut turns = self.turn_of.lock().expect("not poisoned");
            match ack {
                Ack::Working => {
                    if turns.len() >= MAX_REPLY_TO && !turns.contains_key(&thread.id) {
                        turns.clear();
                    }
                    turns.insert(thread.id.clone(), id);
                }
                Ack::Done | Ack::Failed if turns.get(&thread.id) == Some(&id) => {
                    turns.remove(&thread.id);
                }
                _ => {}
            }
        }
        TelegramApi::set_reaction(&self.api, chat, id, reaction(ack)).await?;
        Ok(())
    }

    /// `sendChatAction` typing (in the forum topic), which Telegram shows for 5 seconds.
    async fn working(&self, thread: &Thread) -> Result<(), BoxError> {
        let (chat, topic) = split_thread_id(&thread.id)?;
        TelegramApi::typing(&self.api, chat, topic).await?;
        Ok(())
    }

    fn working_every(&self) -> Duration {
        Duration::from_secs(4)
    }

    /// Message drafts in a private chat ([`DraftStream`]), else post + edit
    /// ([`TelegramDrafts`]) with a Stop button while the model writes.
    async fn start_stream(&self, thread: &Thread) -> Result<Option<BoxedReplyStream>, BoxError> {
        let drafts = self.drafts(thread)?;
        // Private chats have the user's (positive) id; groups and channels negative ones. A draft
        // replies to nothing, so an agent conversation's replies are posted and edited.
        if drafts.chat.0 > 0 && drafts.topic.is_none() && thread_root(&thread.id).is_none() {
            return Ok(Some(Box::new(DraftStream::new(drafts))));
        }
        Ok(Some(Box::new(EditStream::new(drafts))))
    }

    /// The Markdown pieces `post_reply` posts one message each ([`format::pieces`]).
    fn pieces(&self, text: &str) -> Vec<String> {
        format::pieces(text, MAX_TEXT)
    }

    /// `pinChatMessage` (with `disable_notification`) or `unpinChatMessage`.
    async fn pin_posted(&self, at: MessageAt<'_>, pinned: bool) -> Result<(), BoxError> {
        let (chat, id) = split_message_id(at.id)?;
        pin_message(&self.api, chat, id, pinned).await?;
        Ok(())
    }

    /// `editMessageText` (HTML, no keyboard) of message `chat:id`.
    async fn edit_message(&self, at: MessageAt<'_>, text: &str) -> Result<(), BoxError> {
        self.drafts(at.thread)?.edit(at.id, text, false).await
    }
}

/// A reply's HTML text piece, with what the reply answers and whether it continues messages its
/// stream posted (which notified already).
#[derive(Debug)]
pub struct ReplyPiece {
    html: String,
    reply_to: Option<MessageId>,
    continued: bool,
}

impl TelegramOutbox {
    /// Remembers what the text piece `at` of a durable delivery replies to, for its files.
    fn note_reply(&self, at: PieceAt<'_>, reply_to: Option<MessageId>) {
        if at.keys != Keys::Delivery {
            return;
        }
        if let Some((delivery, _)) = at.key.rsplit_once(':') {
            let target = reply_to.map(|r| r.0.to_string()).unwrap_or_default();
            self.replies
                .lock()
                .expect("not poisoned")
                .insert(delivery.to_owned(), target);
        }
    }

    /// What file `at` (key `{delivery}:file:{i}`) replies to: what its message's text replied
    /// to, when this process posted it; else an agent conversation's root or the turn's message
    /// ([`Self::turn_reply_to`]).
    fn file_reply_to(&self, at: PieceAt<'_>) -> Option<MessageId> {
        let remembered = at
            .key
            .rsplit_once(":file:")
            .and_then(|(delivery, _)| self.replies.lock().expect("not poisoned").get(delivery));
        match remembered {
            Some(target) => target.parse().ok().map(MessageId),
            None => self.turn_reply_to(&at.thread.id),
        }
    }

    /// `sent`, piece `key` of `thread`: remembered (a retry finds it), and as the thread's.
    fn posted_as(&self, thread: &Thread, key: &str, sent: crate::client::SentMessage) -> String {
        let id = crate::ids::message_id(sent.chat, sent.id);
        self.note_member(&thread.id, &id);
        self.posted
            .lock()
            .expect("not poisoned")
            .insert(key.to_owned(), id.clone());
        id
    }
}

/// A reply is drawn as HTML messages (replying to the person's message, or an agent
/// conversation's root), an agent message by [`render::agent_message`] (`sendMessage` for text,
/// `sendPhoto` for an image, event buttons as inline keyboards). Each piece is sent once under
/// its key, not retried here: the engine retries with the same key, and this process sends only
/// the pieces still missing (at least once: see the module). Edits are `editMessageText` /
/// `editMessageMedia` (never notifying); a photo that must become text or a message someone
/// deleted is sent anew, silently, in its place.
impl Draw for TelegramOutbox {
    type Text = ReplyPiece;
    type Agent = AgentPiece;

    fn text_pieces(&self, thread: &Thread, reply: &UiMessage) -> Vec<ReplyPiece> {
        let reply_to = self.reply_target(&thread.id, reply);
        // The reply of a stream the engine could not finish (its messages edited, the rest
        // posted here).
        let continued = !reply.metadata.drafts.is_empty();
        format::messages(&reply.text(), MAX_TEXT)
            .into_iter()
            .map(|html| ReplyPiece {
                html,
                reply_to,
                continued,
            })
            .collect()
    }

    fn agent_pieces(&self, message: &UiMessage) -> Vec<AgentPiece> {
        render::agent_message(message)
    }
}

#[async_trait]
impl PostedMessages for TelegramOutbox {
    /// Telegram has no idempotency key: the pieces this process posted lately (whatever the
    /// attempt), remembered by their keys.
    async fn already_posted(&self, look: Lookup<'_>) -> Result<HashMap<String, String>, BoxError> {
        let posted = self.posted.lock().expect("not poisoned");
        Ok(look
            .wanted
            .iter()
            .filter_map(|key| Some((key.clone(), posted.get(key)?)))
            .collect())
    }

    async fn delete_piece(&self, _thread: &Thread, id: &str) -> Result<(), BoxError> {
        let (chat, id) = split_message_id(id)?;
        delete_message(&self.api, chat, id).await?;
        Ok(())
    }
}

/// One `sendMessage` (not retried here: the engine retries the delivery). One notification per
/// reply: the first piece's — none when the reply continues messages its stream posted.
#[async_trait]
impl PostPieces<ReplyPiece> for TelegramOutbox {
    async fn post_piece(&self, piece: &ReplyPiece, at: PieceAt<'_>) -> Result<String, BoxError> {
        let (chat, topic) = split_thread_id(&at.thread.id)?;
        let silent = at.later() || piece.continued;
        self.note_reply(at, piece.reply_to);
        let to = SendTo::new(chat, topic).replying(piece.reply_to);
        let sent = send_html_once(&self.api, to.silent(silent), &piece.html).await?;
        Ok(self.posted_as(at.thread, at.key, sent))
    }
}

/// A drawn agent message's piece: sent once for a delivery (the engine retries it), retried
/// in-process when an edit adds it (an edit's pieces are all silent).
#[async_trait]
impl PostPieces<AgentPiece> for TelegramOutbox {
    async fn post_piece(&self, piece: &AgentPiece, at: PieceAt<'_>) -> Result<String, BoxError> {
        let (chat, topic) = split_thread_id(&at.thread.id)?;
        let root = thread_root(&at.thread.id);
        self.note_reply(at, root);
        let to = SendTo::new(chat, topic).replying(root).silent(at.later());
        let send = || send_piece_once(&self.api, to, piece);
        let sent = match at.keys {
            Keys::Delivery => send().await?,
            Keys::Edit => with_retry("send", send).await?,
        };
        Ok(self.posted_as(at.thread, at.key, sent))
    }

    /// A message that cannot show the piece (a photo cannot become text) or is gone is
    /// deleted, and the piece sent anew in its place.
    async fn edit_piece(
        &self,
        at: MessageAt<'_>,
        piece: &AgentPiece,
    ) -> Result<frogbot_channel::delivery::Edited, BoxError> {
        let (chat, id) = split_message_id(at.id)?;
        match edit_piece(&self.api, chat, id, piece).await? {
            Edited::Done => Ok(frogbot_channel::delivery::Edited::Done),
            Edited::Replace => {
                delete_message(&self.api, chat, id).await?;
                Ok(frogbot_channel::delivery::Edited::Replaced)
            }
        }
    }
}

/// A file the bot sends: its own message after the message's text, in the same chat, topic
/// and reply as the text, silent unless it is the message's first. A picture
/// ([`OutFile::is_image`]) of at most [`MAX_PHOTO`] is a `sendPhoto`, anything else a
/// `sendDocument` (name and media type kept); a picture Telegram refuses as a photo (its
/// dimensions, a format it cannot process: "PHOTO_…", "IMAGE_…") is sent again as a document.
/// A file larger than the outbox's limit ([`MAX_UPLOAD`], [`TelegramOutbox::with_max_upload`])
/// is not uploaded: a text names it ([`OutFile::refused_text`]). Sent once per attempt, not
/// retried here (a `Transient` goes back to the engine); idempotent only in-process, like the
/// text pieces (see the module).
#[async_trait]
impl PostPieces<OutFile> for TelegramOutbox {
    async fn post_piece(&self, file: &OutFile, at: PieceAt<'_>) -> Result<String, BoxError> {
        let (chat, topic) = split_thread_id(&at.thread.id)?;
        let to = SendTo::new(chat, topic)
            .replying(self.file_reply_to(at))
            .silent(at.later());
        if file.size > self.max_upload {
            let why = format!(
                "larger than Telegram's {} limit for bots",
                frogbot_channel::files::size_text(self.max_upload)
            );
            let html = format::escape(&file.refused_text(&why));
            let sent = send_html_once(&self.api, to, &html).await?;
            return Ok(self.posted_as(at.thread, at.key, sent));
        }
        let upload = |kind: UploadKind| async move {
            Ok::<_, BoxError>(Upload {
                kind,
                filename: file.filename.clone(),
                media_type: file.media_type.clone(),
                size: file.size,
                bytes: file.open().await?,
            })
        };
        let photo = file.is_image() && file.size <= MAX_PHOTO;
        let kind = if photo {
            UploadKind::Photo
        } else {
            UploadKind::Document
        };
        let first = upload(kind).await?;
        let sent = match TelegramApi::send_file(&self.api, to, first).await {
            Err(crate::Error::Api { message, .. }) if photo && refused_as_photo(&message) => {
                tracing::debug!(file = %file.id, %message, "refused as a photo; sent as a document");
                let again = upload(UploadKind::Document).await?;
                TelegramApi::send_file(&self.api, to, again).await?
            }
            sent => sent?,
        };
        Ok(self.posted_as(at.thread, at.key, sent))
    }
}

/// Whether Telegram refused an upload as a photo for what the picture is (its dimensions,
/// size or format: `PHOTO_INVALID_DIMENSIONS`, `PHOTO_SAVE_FILE_INVALID`, `IMAGE_PROCESS_FAILED`
/// …), which a document does not mind.
fn refused_as_photo(description: &str) -> bool {
    let upper = description.to_ascii_uppercase();
    upper.contains("PHOTO_") || upper.contains("IMAGE_PROCESS")
}

/// The messages of one streamed reply in a chat (forum topic): [`DraftMessages`] for
/// [`EditStream`]. Ids are `chat:message_id`, as everywhere in this adapter.
#[derive(Clone, Debug)]
pub struct TelegramDrafts {
    api: Bot,
    chat: ChatId,
    topic: Option<ThreadId>,
    reply_to: Option<MessageId>,
    /// Whether a message of this reply was posted (it notified: the ones after it are silent).
    /// Shared by the clones a [`DraftStream`] hands its fallback.
    posted: Arc<AtomicBool>,
}

fn keyboard(stop: bool) -> Option<teloxide::types::InlineKeyboardMarkup> {
    stop.then(render::stop_keyboard)
}

#[async_trait]
impl DraftMessages for TelegramDrafts {
    /// `sendMessage` of the piece's HTML (replying to the person's message), with the Stop button
    /// when `stop`. The reply's first message notifies; the ones after it (a reply longer than
    /// 4,096 characters) are sent with `disable_notification`: one notification per reply.
    async fn post(&self, text: &str, stop: bool) -> Result<String, BoxError> {
        let html = format::to_html(text);
        let silent = self.posted.load(Ordering::SeqCst);
        let to = SendTo::new(self.chat, self.topic)
            .replying(self.reply_to)
            .silent(silent);
        let stop = keyboard(stop).map(ReplyMarkup::InlineKeyboard);
        let sent = send_html(&self.api, to, &html, stop).await?;
        self.posted.store(true, Ordering::SeqCst);
        Ok(crate::ids::message_id(sent.chat, sent.id))
    }

    /// `editMessageText` of the piece's HTML; the Stop button stays only when `stop` ("message is
    /// not modified" is no failure).
    async fn edit(&self, id: &str, text: &str, stop: bool) -> Result<(), BoxError> {
        let (chat, id) = split_message_id(id)?;
        let html = format::to_html(text);
        TelegramApi::edit_html(&self.api, chat, id, &html, keyboard(stop)).await?;
        Ok(())
    }

    fn pieces(&self, text: &str) -> Vec<String> {
        format::pieces(text, MAX_TEXT)
    }
}

/// A reply streamed in a private chat with the Bot API's message drafts: the piece being written
/// is the draft `draft_id` (`sendMessageDraft`, an ephemeral preview), each finished piece and the
/// last one at the end are sent as messages (which replace the preview). A refused draft (the
/// bot may not draft here) turns the rest of the reply into post + edit ([`EditStream`]).
#[derive(Debug)]
pub struct DraftStream {
    drafts: TelegramDrafts,
    draft_id: u32,
    /// The messages sent so far (finished pieces).
    sent: Vec<String>,
    /// Post + edit, once a draft was refused.
    fallback: Option<EditStream<TelegramDrafts>>,
}

impl DraftStream {
    /// A stream with a fresh draft id.
    pub fn new(drafts: TelegramDrafts) -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let draft_id = NEXT
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .max(1);
        Self {
            drafts,
            draft_id,
            sent: Vec::new(),
            fallback: None,
        }
    }

    /// Sends the pieces of `pieces[..upto]` not sent yet as messages.
    async fn send_finished(&mut self, pieces: &[String], upto: usize) -> Result<(), BoxError> {
        while self.sent.len() < upto {
            let id = self.drafts.post(&pieces[self.sent.len()], false).await?;
            self.sent.push(id);
        }
        Ok(())
    }
}

#[async_trait]
impl ReplyStream for DraftStream {
    async fn show(&mut self, text: &str) -> Result<(), BoxError> {
        if let Some(f) = &mut self.fallback {
            return f.show(text).await;
        }
        let pieces = self.drafts.pieces(text);
        let Some(last) = pieces.last() else {
            return Ok(());
        };
        self.send_finished(&pieces, pieces.len() - 1).await?;
        let html = format::to_html(last);
        let d = &self.drafts;
        match TelegramApi::send_draft(&d.api, d.chat, d.topic, self.draft_id, &html).await {
            Ok(()) => Ok(()),
            Err(e) => {
                tracing::debug!(error = %e, "message drafts refused; the reply is posted and edited");
                let mut f = EditStream::resume(self.drafts.clone(), self.sent.clone());
                let shown = f.show(text).await;
                self.fallback = Some(f);
                shown
            }
        }
    }

    async fn finish(&mut self, text: &str) -> Result<(), BoxError> {
        if let Some(f) = &mut self.fallback {
            return f.finish(text).await;
        }
        let pieces = self.drafts.pieces(text);
        self.send_finished(&pieces, pieces.len()).await
    }

    fn message_ids(&self) -> Vec<String> {
        match &self.fallback {
            Some(f) => f.message_ids(),
            None => self.sent.clone(),
        }
    }
}

/// The reaction that shows `ack` on Telegram, from the emojis bots may use: 👀 seen, ✍ working,
/// 👌 done, 😢 failed (⏳, ✅ and ❌ are not on Telegram's list).
pub fn reaction(ack: Ack) -> &'static str {
    match ack {
        Ack::Seen => "👀",
        Ack::Working => "✍",
        Ack::Done => "👌",
        Ack::Failed => "😢",
    }
}

#[cfg(test)]
mod tests {
    use teloxide::types::ChatId;

    use super::*;
    use crate::testing::FakeBotApi;
    use frogbot_channel::Delivery;

    fn reply(text: &str) -> UiMessage {
        serde_json::from_value(serde_json::json!({
            "id": "m1", "role": "assistant", "parts": [{"type": "text", "text": text}]
        }))
        .unwrap()
    }

    fn thread() -> Thread {
        Thread {
            id: "42".into(),
            platform: "telegram".into(),
            chat_id: "telegram-42".into(),
        }
    }

    #[test]
    fn posted_pieces_are_bounded() {
        let mut posted = Posted::default();
        for i in 0..MAX_POSTED_PIECES + 5 {
            posted.insert(format!("k:{i}"), format!("1:{i}"));
        }
        posted.insert("k:9".into(), "1:9".into()); // again: no second entry
        assert_eq!(posted.order.len(), MAX_POSTED_PIECES);
        assert_eq!(posted.keys.len(), MAX_POSTED_PIECES);
        assert!(!posted.contains("k:0") && !posted.contains("k:4"));
        assert!(posted.contains("k:5") && posted.contains(&format!("k:{}", MAX_POSTED_PIECES + 4)));
    }

    /// One notification per reply: a reply's first piece notifies, the others are silent, and
    /// none notifies when the reply continues the messages its stream posted (`drafts`: the
    /// engine edits those and delivers the rest, which the person was notified of already).
    #[tokio::test]
    async fn a_reply_notifies_once() {
        let fake = FakeBotApi::start().await;
        let outbox = TelegramOutbox::new(fake.bot());
        let long = "word ".repeat(1_500);
        let loud = |from: usize| -> Vec<bool> {
            fake.calls("sendmessage")[from..]
                .iter()
                .map(|c| c["disable_notification"] != true)
                .collect()
        };
        outbox
            .deliver(&thread(), &reply(&long), &Delivery::new("k1"))
            .await
            .unwrap();
        assert_eq!(loud(0), [true, false]);
        let mut rest = reply(&long);
        rest.metadata.drafts = vec!["42:100".into()];
        outbox
            .deliver(&thread(), &rest, &Delivery::new("k2"))
            .await
            .unwrap();
        assert_eq!(loud(2), [false, false]);
        outbox.post_reply(&thread(), &reply(&long)).await.unwrap();
        assert_eq!(loud(4), [true, false]);
    }

    #[tokio::test]
    async fn each_ack_replaces_the_one_reaction_and_working_types() {
        let fake = FakeBotApi::start().await;
        let outbox = TelegramOutbox::new(fake.bot());
        let chat = crate::testing::private_chat(42, "Ada");
        let said = fake.user_message(chat.clone(), crate::testing::user(42, "Ada"), "hi", None);
        let n = said["message"]["message_id"].as_i64().unwrap();
        let id = format!("42:{n}");
        for ack in [Ack::Seen, Ack::Working, Ack::Done] {
            outbox.ack(&thread(), &id, ack).await.unwrap();
            assert_eq!(fake.bot_reactions(n), [reaction(ack)], "{ack:?}");
        }
        let calls = fake.calls("setmessagereaction");
        assert_eq!(calls.len(), 3, "one call each: {calls:?}");
        assert_eq!(calls[0]["chat_id"], 42);
        assert_eq!(calls[0]["message_id"], n);
        assert_eq!(
            calls[0]["reaction"],
            serde_json::json!([{"type": "emoji", "emoji": "👀"}])
        );
        // A failed turn.
        let other = fake.user_message(chat, crate::testing::user(42, "Ada"), "again", None);
        let m = other["message"]["message_id"].as_i64().unwrap();
        for ack in [Ack::Seen, Ack::Working, Ack::Failed] {
            outbox
                .ack(&thread(), &format!("42:{m}"), ack)
                .await
                .unwrap();
        }
        assert_eq!(fake.bot_reactions(m), ["😢"]);
        // Every emoji is one Telegram lets bots use (the fake refuses others).
        for ack in Ack::ALL {
            outbox.ack(&thread(), &id, ack).await.unwrap();
        }
        // A message Telegram does not know: the ack fails (the engine logs it).
        assert!(outbox.ack(&thread(), "42:99999", Ack::Seen).await.is_err());

        outbox.working(&thread()).await.unwrap();
        let typing = fake.calls("sendchataction");
        assert_eq!(typing.len(), 1);
        assert_eq!(typing[0]["chat_id"], 42);
        assert_eq!(typing[0]["action"], "typing");
        assert_eq!(outbox.working_every(), Duration::from_secs(4));
    }

    #[tokio::test]
    async fn the_fake_refuses_html_telegram_cannot_parse() {
        let fake = FakeBotApi::start().await;
        let bot = fake.bot();
        for bad in [
            "<b>open",
            "<b>crossed</i>",
            "closed</b>",
            "<foo>unknown</foo>",
            "a < b",
            "a > b",
            "fish & chips",
            "&nbsp;",
            "<b><code>code in bold</code></b>",
            "<blockquote><blockquote>nested</blockquote></blockquote>",
            "<pre><b>bold in pre</b></pre>",
            "<a>no href</a>",
        ] {
            let err = send_html(&bot, SendTo::new(ChatId(42), None), bad, None)
                .await
                .expect_err(bad);
            assert!(
                err.to_string().contains("can't parse entities"),
                "{bad}: {err}"
            );
        }
        let ok = "<b>bold <i>both</i></b> &lt;&gt;&amp;&quot;&#128056; \
                  <a href=\"https://x.io/?a=1&amp;b=2\">link</a> <code>x</code> \
                  <pre><code class=\"language-rust\">fn</code></pre> <blockquote>q</blockquote>";
        let sent = send_html(&bot, SendTo::new(ChatId(42), None), ok, None)
            .await
            .unwrap();
        // Telegram returns the text left after entity parsing.
        assert_eq!(
            fake.message(i64::from(sent.id.0)).unwrap()["text"],
            "bold both <>&\"🐸 link x fn q"
        );
        // Without parse_mode the same characters are plain text.
        TelegramApi::send_message(&bot, SendTo::new(ChatId(42), None), "a < b & c", None, None)
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_long_formatted_reply_is_accepted_piece_by_piece_within_the_limit() {
        let fake = FakeBotApi::start().await;
        let outbox = TelegramOutbox::new(fake.bot());
        let prose = "Some **words** about _frogs_ & <toads>, see [docs](https://x.io). ".repeat(60);
        let code: String = (0..300)
            .map(|i| format!("let x{i} = \"<{i}>\"; // & more\n"))
            .collect();
        let text = format!("# Frogs\n\n{prose}\n\n```rust\n{code}```\n\n- one\n- two\n\n{prose}");
        assert!(text.chars().count() >= 10_000);
        outbox.post_reply(&thread(), &reply(&text)).await.unwrap();
        let calls = fake.all_calls();
        let sent: Vec<_> = calls.iter().filter(|c| c.method == "sendmessage").collect();
        assert!(sent.len() >= 4, "{} messages", sent.len());
        for c in &sent {
            assert_eq!(c.body["parse_mode"], "HTML");
            let result = c.result.as_ref().expect("accepted by the fake");
            let shown = result["text"].as_str().unwrap();
            assert!(shown.chars().count() <= MAX_TEXT);
            let html = c.body["text"].as_str().unwrap();
            assert_eq!(
                html.matches("<pre>").count(),
                html.matches("</pre>").count()
            );
        }
        let code_lines: usize = sent
            .iter()
            .map(|c| {
                let shown = c.result.as_ref().unwrap()["text"].as_str().unwrap();
                shown.lines().filter(|l| l.starts_with("let x")).count()
            })
            .sum();
        assert_eq!(code_lines, 300);
        // Blank replies post nothing.
        outbox.post_reply(&thread(), &reply(" \n ")).await.unwrap();
        assert_eq!(fake.all_calls().len(), calls.len());
    }
}
