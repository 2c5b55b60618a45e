//! The outbox (feature `engine`): posts the agent's replies in their Slack thread as `mrkdwn`
//! ([`crate::format`]), split with [`frogbot_model::text::split`] below Slack's 40,000-character
//! `text` limit, and marks the person's messages with the acknowledgement reactions.
//!
//! Streamed replies ([`SlackStream`]) use Slack's native streaming (`chat.startStream`,
//! `chat.appendStream`, `chat.stopStream`, Markdown of at most [`STREAM_MAX_CHARS`] per
//! message: a stream that would grow past it is stopped and a new one continues). When the
//! workspace refuses `chat.startStream` (any error: a token type, a plan, an unknown method) the
//! reply falls back to post + edit ([`SlackDrafts`]: `chat.postMessage` / `chat.update` with a
//! `markdown` block and, while streaming, a Stop button `frogbot-stop`).
//! Durable delivery ([`ChannelOutbox::deliver`]): each piece of a reply carries message metadata
//! (`{"event_type": "frogbot_delivery", "event_payload": {"key": <the piece key>}}`); a retried
//! delivery reads the thread first (`conversations.replies`, `include_all_metadata=true`) and
//! skips the pieces an earlier attempt posted. See the crate docs for the guarantee.
//!
//! Files ([`ChannelOutbox::deliver_files`], the `PostPieces<OutFile>` below): each file is
//! uploaded with Slack's external upload (`files.getUploadURLExternal`, the bytes `POST`ed to
//! its `upload_url`, `files.completeUploadExternal` with the text's `channel_id` and
//! `thread_ts`), so Slack shares it as its own message in the thread after the text; an image
//! carries its file name as `alt_txt`, Slack shows it as a picture from its bytes. Its id is
//! `file:{file id}` ([`file_piece_id`]): `files.completeUploadExternal` does not say which
//! message shows the file (Slack shares it asynchronously), and deleting the file
//! (`files.delete`) takes its message with it. A file over [`MAX_FILE_BYTES`] (or an empty one,
//! which Slack refuses) is not uploaded: a text saying so is posted in its place, keyed like a
//! reply's piece. See [`Uploads`] for what a retry does.
//!
//! Asks ([`ChannelOutbox::ask_thread`]): to a channel or a user's DM (`conversations.open`), the
//! first message carries `{"event_type": "frogbot_ask", "event_payload": {"key": <the ask's
//! key>}}`; a retry finds it in the channel's recent history (`conversations.history`).
//!
//! While a turn runs in an assistant thread (learned from `assistant_thread_started`), its
//! status says "is thinking…" (`assistant.threads.setStatus`).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use frogbot_channel::OutFile;
use frogbot_channel::delivery::{Draw, Edited, Keys, Lookup, PieceAt, PostPieces, PostedMessages};
use frogbot_channel::outbox::{AskTo, BoxedReplyStream, History};
use frogbot_channel::{
    AskPlace, ChannelOutbox, DraftMessages, EditStream, FileStream, FirstMessageHold, ReplyStream,
    ShownAcks,
};
use frogbot_model::{
    Ack, BoxError, MessageAt, PlatformFile, PlatformUser, Thread, ThreadMessage, UiMessage,
};
use serde_json::json;
use slack_morphism::prelude::SlackBlock;
use tracing::{debug, info, warn};

use super::{SlackAdapter, locked};
use crate::client::{ASK_EVENT_TYPE, DELIVERY_EVENT_TYPE, SlackApi};

/// The message metadata `event_type` of the messages an edit of an agent message added
/// (`edit:{first message id}:{index}`): how a repeated edit finds them.
pub const EDIT_EVENT_TYPE: &str = "frogbot_edit";
use crate::ids::{check_channel_id, check_user_id, message_id, split_id, thread_id};
use crate::render::AgentPiece;

/// How far back [`ChannelOutbox::ask_thread`] looks for an ask's first message posted by an
/// earlier attempt (seconds): a day.
pub const ASK_WINDOW_SECS: i64 = 24 * 60 * 60;

/// How many of a channel's newest top-level messages [`ChannelOutbox::ask_thread`] reads looking
/// for an ask's first message (one `conversations.history` page).
pub const ASK_HISTORY_LIMIT: u16 = 100;

/// The most Markdown characters one streamed message takes: Slack's limit on `markdown_text`
/// and on a `markdown` block.
pub const STREAM_MAX_CHARS: usize = 12_000;

/// The `action_id` of the Stop button on a streamed reply.
pub const STOP_ACTION_ID: &str = "frogbot-stop";

/// The assistant thread status shown while a turn runs.
pub const THINKING_STATUS: &str = "is thinking…";

/// How many threads [`ThreadFacts`] remembers before it forgets them all.
const MAX_THREADS: usize = 10_000;

/// The largest file the bot uploads: Slack takes files up to 1 GB. A larger one is not
/// uploaded; the thread gets [`OutFile::refused_text`] instead.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024 * 1024;

/// The most characters of an image's `alt_txt` Slack takes (`alt_txt_too_large` past it).
pub const MAX_ALT_TXT_CHARS: usize = 1000;

/// The id [`ChannelOutbox::deliver_files`] returns for an uploaded file: `file:{file id}`
/// (what `delete_posted` deletes with `files.delete`).
pub fn file_piece_id(file_id: &str) -> String {
    format!("{FILE_ID_PREFIX}{file_id}")
}

/// The prefix of [`file_piece_id`]s.
pub const FILE_ID_PREFIX: &str = "file:";

/// What this process uploaded, by piece key (`{thread}|{key}`): the file id, and whether Slack
/// confirmed the share (`files.completeUploadExternal` answered).
///
/// A file's message carries no message metadata, so a retried delivery cannot find it by its
/// key the way it finds text pieces. Within one process: a file whose share was confirmed is
/// not uploaded again; one whose completion was sent but not confirmed (a timeout, a reset) is
/// looked for in the thread (`conversations.replies`, a message whose `files[].id` is it) and,
/// when not there, deleted (`files.delete`, so a share Slack still carries out later does not
/// show it twice) and uploaded anew. Across processes the memory is gone: a file is posted at
/// least once (a process that dies between the completion and its answer leaves the file
/// shared, and the next process's retry shares it again).
#[derive(Debug, Default)]
pub struct Uploads {
    files: Mutex<HashMap<String, (String, bool)>>,
}

impl Uploads {
    fn get(&self, key: &str) -> Option<(String, bool)> {
        locked(&self.files).get(key).cloned()
    }

    fn set(&self, key: &str, file_id: &str, shared: bool) {
        let mut map = locked(&self.files);
        if map.len() > MAX_THREADS {
            map.clear();
        }
        map.insert(key.to_owned(), (file_id.to_owned(), shared));
    }

    fn forget(&self, key: &str) {
        locked(&self.files).remove(key);
    }
}

/// What the adapter learned about threads from deliveries: which are assistant threads, and who
/// last wrote in each (the recipient a native stream is for).
#[derive(Debug, Default)]
pub struct ThreadFacts {
    assistant: Mutex<HashSet<String>>,
    speakers: Mutex<HashMap<String, (String, String)>>,
}

impl ThreadFacts {
    /// `thread` (`channel:thread_ts`) is an assistant thread.
    pub fn assistant_thread(&self, thread: &str) {
        let mut set = locked(&self.assistant);
        if set.len() > MAX_THREADS {
            set.clear();
        }
        set.insert(thread.to_owned());
    }

    /// Whether `thread` is an assistant thread.
    pub fn is_assistant_thread(&self, thread: &str) -> bool {
        locked(&self.assistant).contains(thread)
    }

    /// `user` of workspace `team` wrote in `thread`.
    pub fn spoke(&self, thread: &str, user: &str, team: &str) {
        let mut map = locked(&self.speakers);
        if map.len() > MAX_THREADS {
            map.clear();
        }
        map.insert(thread.to_owned(), (user.to_owned(), team.to_owned()));
    }

    /// Who last wrote in `thread` (user, team).
    pub fn speaker(&self, thread: &str) -> Option<(String, String)> {
        locked(&self.speakers).get(thread).cloned()
    }
}

/// The blocks of a streamed message: its Markdown in a `markdown` block, and the Stop button
/// while `stop`.
pub fn stream_blocks(markdown: &str, stop: bool) -> Vec<SlackBlock> {
    let mut blocks = vec![json!({"type": "markdown", "text": markdown})];
    if stop {
        blocks.push(
            json!({"type": "actions", "block_id": "frogbot-stop", "elements": [{
                "type": "button", "action_id": STOP_ACTION_ID, "style": "danger",
                "text": {"type": "plain_text", "text": "Stop"}
            }]}),
        );
    }
    serde_json::from_value(json!(blocks)).unwrap_or_default()
}

/// The notification text of a streamed message (`mrkdwn`, within Slack's `text` limit).
fn fallback_text(markdown: &str) -> String {
    frogbot_model::text::truncate(&crate::format::to_mrkdwn(markdown), MAX_REPLY_CHARS)
}

/// The messages a streamed reply is drawn in when native streaming is refused: post + edit.
#[derive(Clone, Debug)]
pub struct SlackDrafts {
    slack: SlackAdapter,
    channel: String,
    thread_ts: String,
}

#[async_trait]
impl DraftMessages for SlackDrafts {
    async fn post(&self, text: &str, stop: bool) -> Result<String, BoxError> {
        let ts = self
            .slack
            .inner
            .api()
            .post_message(
                &self.channel,
                Some(&self.thread_ts),
                stream_blocks(text, stop),
                &fallback_text(text),
            )
            .await?;
        Ok(message_id(&self.channel, &ts))
    }

    async fn edit(&self, id: &str, text: &str, stop: bool) -> Result<(), BoxError> {
        let (channel, ts) = split_id(id)?;
        self.slack
            .inner
            .api()
            .update_message(channel, ts, stream_blocks(text, stop), &fallback_text(text))
            .await?;
        Ok(())
    }

    fn pieces(&self, text: &str) -> Vec<String> {
        stream_pieces(text)
    }
}

/// `text` cut into streamed messages: Markdown of at most [`STREAM_MAX_CHARS`] each, code
/// blocks closed and reopened at a cut.
pub fn stream_pieces(text: &str) -> Vec<String> {
    frogbot_model::text::split(text, STREAM_MAX_CHARS)
}

/// One natively streamed message.
#[derive(Debug)]
struct Native {
    ts: String,
    /// The Markdown it shows.
    sent: String,
    /// Still streaming (not stopped).
    open: bool,
}

/// A streamed reply on Slack: native streaming, or post + edit when the workspace refuses it.
pub struct SlackStream {
    slack: SlackAdapter,
    channel: String,
    thread_ts: String,
    recipient: Option<(String, String)>,
    native: Vec<Native>,
    fallback: Option<EditStream<SlackDrafts>>,
    /// The first message's hold (no message started yet, see [`SlackStream::show`]).
    hold: FirstMessageHold,
}

impl std::fmt::Debug for SlackStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackStream")
            .field("channel", &self.channel)
            .field("thread_ts", &self.thread_ts)
            .field("native", &self.native)
            .field("fallback", &self.fallback.is_some())
            .finish()
    }
}

impl SlackStream {
    /// Stops the streamed message `i` (`chat.stopStream`). It counts as stopped only once Slack
    /// said so: a failed stop leaves it open, so the next `show` / `finish` (or the engine's
    /// retry) stops it again.
    async fn stop(&mut self, i: usize) -> Result<(), BoxError> {
        let api = self.slack.inner.api();
        if self.native[i].open {
            api.stop_stream(&self.channel, &self.native[i].ts).await?;
            self.native[i].open = false;
        }
        Ok(())
    }

    async fn draw(&mut self, text: &str, last: bool) -> Result<(), BoxError> {
        if let Some(f) = &mut self.fallback {
            return if last {
                f.finish(text).await
            } else {
                f.show(text).await
            };
        }
        let pieces = stream_pieces(text);
        let count = pieces.len();
        for (i, piece) in pieces.into_iter().enumerate() {
            let more = i + 1 < count;
            let slack = self.slack.clone();
            let api = slack.inner.api();
            if i < self.native.len() {
                let m = &mut self.native[i];
                if m.open
                    && let Some(delta) = piece.strip_prefix(m.sent.as_str())
                    && !delta.is_empty()
                {
                    api.append_stream(&self.channel, &m.ts, delta).await?;
                    m.sent = piece.clone();
                }
                if more || last {
                    self.stop(i).await?;
                }
                let m = &mut self.native[i];
                if last && !m.open && m.sent != piece {
                    // The cut moved, or the final text is not what was streamed: replace it.
                    api.update_message(
                        &self.channel,
                        &m.ts,
                        stream_blocks(&piece, false),
                        &fallback_text(&piece),
                    )
                    .await?;
                    m.sent = piece;
                }
                continue;
            }
            let recipient = self
                .recipient
                .as_ref()
                .map(|(u, t)| (u.as_str(), t.as_str()));
            match api
                .start_stream(&self.channel, &self.thread_ts, recipient, &piece)
                .await
            {
                Ok(ts) => self.native.push(Native {
                    ts,
                    sent: piece,
                    open: true,
                }),
                Err(e) if self.native.is_empty() => {
                    info!(channel = %self.channel, error = %e, "Slack refused a native stream; posting and editing instead");
                    let drafts = SlackDrafts {
                        slack: self.slack.clone(),
                        channel: self.channel.clone(),
                        thread_ts: self.thread_ts.clone(),
                    };
                    self.fallback = Some(EditStream::new(drafts));
                    return Box::pin(self.draw(text, last)).await;
                }
                Err(e) => return Err(e.into()),
            }
            if more || last {
                self.stop(i).await?;
            }
        }
        if last {
            for i in 0..self.native.len() {
                self.stop(i).await?;
            }
        }
        Ok(())
    }
}

#[async_trait]
impl ReplyStream for SlackStream {
    /// The first message (`chat.startStream`: the one a person is notified of; appends do not
    /// notify) is held by the [`FirstMessageHold`] rule; the post + edit fallback holds its first
    /// message alike ([`EditStream`]).
    async fn show(&mut self, text: &str) -> Result<(), BoxError> {
        if self.fallback.is_none() && self.native.is_empty() && self.hold.holds(text) {
            return Ok(());
        }
        self.draw(text, false).await
    }

    async fn finish(&mut self, text: &str) -> Result<(), BoxError> {
        self.draw(text, true).await
    }

    fn message_ids(&self) -> Vec<String> {
        match &self.fallback {
            Some(f) => f.message_ids(),
            None => self
                .native
                .iter()
                .map(|m| message_id(&self.channel, &m.ts))
                .collect(),
        }
    }

    /// Whether a message shows yet (a held first text does not: the engine redraws soon).
    fn visible(&self) -> bool {
        match &self.fallback {
            Some(f) => f.visible(),
            None => !self.native.is_empty(),
        }
    }
}

/// Slack truncates a message's `text` beyond 40,000 characters; a reply is split into messages of
/// at most this many (a margin for what Slack counts differently, e.g. escaped `&<>`).
pub const MAX_REPLY_CHARS: usize = 39_000;

/// The Slack emoji name (for `reactions.add`, no colons) that shows `ack`: `eyes` 👀,
/// `hourglass_flowing_sand` ⏳, `white_check_mark` ✅, `x` ❌.
pub fn reaction_name(ack: Ack) -> &'static str {
    match ack {
        Ack::Seen => "eyes",
        Ack::Working => "hourglass_flowing_sand",
        Ack::Done => "white_check_mark",
        Ack::Failed => "x",
    }
}

/// The ack reaction each message shows now (`channel:ts` → ack), until its last (Done or
/// Failed), so the next one replaces it.
#[derive(Debug, Default)]
pub struct AckMarks {
    shown: ShownAcks<String, Ack>,
}

impl AckMarks {
    /// Marks the message `message_id` (`channel:ts`) with `ack` over `api`: adds its reaction,
    /// then removes the one it replaces. A failed removal is logged, not returned: the new state
    /// shows either way.
    pub async fn mark<A: SlackApi + ?Sized>(
        &self,
        api: &A,
        message_id: &str,
        ack: Ack,
    ) -> Result<(), BoxError> {
        let (channel, ts) = split_id(message_id)?;
        api.add_reaction(channel, ts, reaction_name(ack)).await?;
        let before = self.shown.replace(message_id.to_owned(), ack, ack);
        if let Some(before) = before.filter(|b| *b != ack)
            && let Err(e) = api
                .remove_reaction(channel, ts, reaction_name(before))
                .await
        {
            tracing::debug!(message = %message_id, error = %e, "removing the previous ack reaction failed");
        }
        Ok(())
    }
}

#[async_trait]
impl ChannelOutbox for SlackAdapter {
    /// A file's `url_private_download` with the bot token (Slack's hosts and the configured
    /// API's only: a URL elsewhere is fetched without it); a sign-in page in its place is an
    /// error (the app lacks `files:read`).
    async fn open_file(&self, file: &PlatformFile) -> Result<FileStream, BoxError> {
        if file.url.is_empty() {
            return Err("Slack gave no download link for this file".into());
        }
        let auth = format!("Bearer {}", self.inner.config.bot_token);
        let headers: &[(&str, &str)] =
            if crate::convert::slack_file_host(&file.url, self.inner.config.api_url.as_deref()) {
                &[("authorization", auth.as_str())]
            } else {
                &[]
            };
        self.inner
            .downloads
            .open_expecting(&file.url, headers, Some(&file.media_type))
            .await
    }

    /// Where an ask goes on Slack:
    ///
    /// - a thread (`C123:1700000000.000100`): there, nothing posted;
    /// - a channel (`C…`, `G…`, `D…`): the ask's text is posted at the top of the channel and the
    ///   ask goes to that message's thread (`channel:ts`);
    /// - a user (`U…` / `W…`): their direct message conversation is opened
    ///   (`conversations.open`, `users=U…`: Slack answers with the same `D…` every time, so a
    ///   retry is harmless) and the ask starts a thread there as in a channel (`D…:ts`).
    ///
    /// The first post is idempotent on `ask.key`: it carries the message metadata
    /// `{"event_type": "frogbot_ask", "event_payload": {"key": key}}`, and before posting the
    /// channel's recent history is read (`conversations.history`, `include_all_metadata=true`,
    /// one page: the newest [`ASK_HISTORY_LIMIT`] top-level messages of the last
    /// [`ASK_WINDOW_SECS`] seconds); a root carrying `ask.key` there is the ask's thread, and nothing
    /// is posted. A retry after a lost response thus finds its thread within 24 hours, unless
    /// more than 100 messages came into the channel since. Cost: one extra `conversations.history`
    /// call per ask to a channel or user (Tier 3 for internal and Marketplace apps; Slack limits
    /// commercially distributed non-Marketplace apps to one call a minute and 15 messages), plus
    /// `conversations.open` for a user. The bot needs the history scope of the conversation
    /// (`channels:history`, `groups:history`, `im:history`), as for thread history; a history
    /// read failing for a reason worth retrying fails the ask (retry with the same key), any other
    /// reason is logged and the root posted without the check.
    ///
    /// A target that is not a Slack id (a user id not `U…`/`W…`, a `#name` for a channel) is
    /// refused before any call; an unknown user or channel is refused by Slack
    /// (`user_not_found`, `channel_not_found`), nothing posted.
    async fn ask_thread(&self, ask: AskTo<'_>) -> Result<String, BoxError> {
        let api = self.inner.api();
        let channel = match ask.place {
            AskPlace::Thread(thread) if thread.contains(':') => {
                split_id(thread)?;
                return Ok(thread.to_owned());
            }
            AskPlace::Thread(channel) => {
                check_channel_id(channel)?;
                channel.to_owned()
            }
            AskPlace::User(user) => {
                check_user_id(user)?;
                api.open_dm(user).await?
            }
        };
        let oldest = format!(
            "{}.000000",
            (frogbot_model::now_millis() / 1000 - ASK_WINDOW_SECS).max(0)
        );
        match api
            .find_keyed_root(
                &channel,
                ASK_EVENT_TYPE,
                ask.key,
                &oldest,
                ASK_HISTORY_LIMIT,
            )
            .await
        {
            Ok(Some(ts)) => {
                info!(%channel, key = %ask.key, "Slack ask: its first message is there already");
                return Ok(thread_id(&channel, &ts));
            }
            Ok(None) => {}
            Err(e) if e.transient().is_some() => return Err(e.into()),
            Err(e) => {
                warn!(%channel, error = %e, "Slack ask: the channel's history could not be read; posting without checking for an earlier attempt")
            }
        }
        let root = crate::format::messages(ask.text, MAX_REPLY_CHARS)
            .into_iter()
            .next()
            .unwrap_or_default();
        let ts = api
            .post_root_keyed(&channel, &root, ASK_EVENT_TYPE, ask.key)
            .await?;
        Ok(thread_id(&channel, &ts))
    }

    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        let pieces = crate::format::messages(&reply.text(), MAX_REPLY_CHARS);
        if pieces.is_empty() {
            return Ok(());
        }
        let (channel, thread_ts) = split_id(&thread.id)?;
        let api = self.inner.api();
        for piece in pieces {
            api.post_message(channel, Some(thread_ts), Vec::new(), &piece)
                .await?;
        }
        Ok(())
    }

    /// `pins.add` / `pins.remove` (`already_pinned` / `no_pin` are done).
    async fn pin_posted(&self, at: MessageAt<'_>, pinned: bool) -> Result<(), BoxError> {
        let (channel, ts) = split_id(at.id)?;
        Ok(self.inner.api().pin_message(channel, ts, pinned).await?)
    }

    /// `reactions.add` with the new state's emoji, then `reactions.remove` of the one before
    /// (see [`AckMarks`]).
    async fn ack(&self, _thread: &Thread, message_id: &str, ack: Ack) -> Result<(), BoxError> {
        self.inner
            .acks
            .mark(self.inner.api(), message_id, ack)
            .await
    }

    /// In an assistant thread, its status "is thinking…" (`assistant.threads.setStatus`; Slack
    /// clears it when the reply is posted); elsewhere nothing: the ⏳ reaction shows the turn
    /// running.
    async fn working(&self, thread: &Thread) -> Result<(), BoxError> {
        if !self.inner.threads.is_assistant_thread(&thread.id) {
            return Ok(());
        }
        let (channel, thread_ts) = split_id(&thread.id)?;
        let api = self.inner.api();
        Ok(api.set_status(channel, thread_ts, THINKING_STATUS).await?)
    }

    async fn start_stream(&self, thread: &Thread) -> Result<Option<BoxedReplyStream>, BoxError> {
        let (channel, thread_ts) = split_id(&thread.id)?;
        Ok(Some(Box::new(SlackStream {
            slack: self.clone(),
            channel: channel.to_owned(),
            thread_ts: thread_ts.to_owned(),
            recipient: self.inner.threads.speaker(&thread.id),
            native: Vec::new(),
            fallback: None,
            hold: FirstMessageHold::default(),
        })))
    }

    fn pieces(&self, text: &str) -> Vec<String> {
        stream_pieces(text)
    }

    /// `chat.update` of a streamed message to `text` (Markdown), no Stop button. A native
    /// stream a crash left open is stopped first (`chat.stopStream`: Slack refuses to update a
    /// streaming message); a message that is not streaming answers that it is not, which counts
    /// as stopped. A stop failing for another reason worth retrying is returned (retry later);
    /// any other is logged and the update tried anyway.
    async fn edit_message(&self, at: MessageAt<'_>, text: &str) -> Result<(), BoxError> {
        let (channel, ts) = split_id(at.id)?;
        let api = self.inner.api();
        match api.stop_stream(channel, ts).await {
            Ok(()) => {}
            Err(e) if e.transient().is_some() => return Err(e.into()),
            Err(e) => {
                debug!(message = %at.id, error = %e, "stopping the stream before an edit failed")
            }
        }
        api.update_message(
            channel,
            ts,
            stream_blocks(text, false),
            &fallback_text(text),
        )
        .await?;
        Ok(())
    }

    /// `conversations.replies` of the thread before `before`; names from the messages'
    /// profiles (else the user id).
    async fn thread_history(&self, history: History<'_>) -> Result<Vec<ThreadMessage>, BoxError> {
        let (channel, root) = split_id(&history.thread.id)?;
        let latest = split_id(history.before)
            .map(|(_, ts)| ts)
            .unwrap_or(history.before);
        if !ts_before(root, latest) {
            // The message starts the thread: nothing came before it.
            return Ok(Vec::new());
        }
        let mut messages = self
            .inner
            .api()
            .replies(channel, root, latest, 1000)
            .await?;
        // Slack pages from the oldest; `latest` is exclusive, but a parent may come regardless.
        messages.retain(|m| ts_before(&m.ts, latest));
        let skip = messages.len().saturating_sub(history.limit);
        debug!(thread = %history.thread.id, read = messages.len(), "Slack thread history read");
        Ok(messages
            .into_iter()
            .skip(skip)
            .map(|m| ThreadMessage {
                id: message_id(channel, &m.ts),
                mentions: crate::convert::mentions_in(&m.text, &self.inner.bot.user_id),
                text: m.text,
                author: PlatformUser {
                    id: m.user,
                    name: m.name,
                    is_bot: m.bot,
                },
                metadata: frogbot_model::ThreadMessageMetadata {
                    date_sent: String::new(),
                },
                reply_to: None,
                raw: serde_json::Value::Null,
                files: Vec::new(),
            })
            .collect())
    }
}

/// Whether the Slack `ts` `a` is earlier than `b` (`seconds.micros`).
fn ts_before(a: &str, b: &str) -> bool {
    let key = |t: &str| {
        let (s, f) = t.split_once('.').unwrap_or((t, "0"));
        (s.parse::<u64>().unwrap_or(0), f.parse::<u64>().unwrap_or(0))
    };
    key(a) < key(b)
}

/// The metadata event type of a key space: a delivery's pieces, an edit's extra pieces.
fn event_type(keys: Keys) -> &'static str {
    match keys {
        Keys::Delivery => DELIVERY_EVENT_TYPE,
        Keys::Edit => EDIT_EVENT_TYPE,
    }
}

/// A reply is drawn as `mrkdwn` messages, an agent message by [`crate::render::agent_message`]
/// (Block Kit: header, `mrkdwn` sections, `table`, `image`, `rich_text`, section `fields`,
/// `actions` of event buttons). Each piece carries its key in its message metadata; a retry reads
/// the thread's keys first and skips the pieces already there. Edits are `chat.update` (Slack
/// does not notify of them), deletions `chat.delete`. Files are Slack uploads
/// (`PostPieces<OutFile>`), deleted with `files.delete`.
impl Draw for SlackAdapter {
    type Text = String;
    type Agent = AgentPiece;

    fn text_pieces(&self, _thread: &Thread, reply: &UiMessage) -> Vec<String> {
        crate::format::messages(&reply.text(), MAX_REPLY_CHARS)
    }

    fn agent_pieces(&self, message: &UiMessage) -> Vec<AgentPiece> {
        crate::render::agent_message(message)
    }
}

#[async_trait]
impl PostedMessages for SlackAdapter {
    /// The thread's messages carrying a key of `keys`' event type in their metadata
    /// (`conversations.replies`, `include_all_metadata=true`); read only when an earlier attempt
    /// may have posted some.
    async fn already_posted(&self, look: Lookup<'_>) -> Result<HashMap<String, String>, BoxError> {
        if !look.retry {
            return Ok(HashMap::new());
        }
        let (channel, thread_ts) = split_id(&look.thread.id)?;
        let api = self.inner.api();
        Ok(api
            .thread_keyed(channel, thread_ts, event_type(look.keys))
            .await?
            .into_iter()
            .filter(|(key, _)| look.wanted.contains(key))
            .map(|(key, ts)| (key, message_id(channel, &ts)))
            .collect())
    }

    /// `chat.delete` of a message (`channel:ts`), `files.delete` of an uploaded file
    /// (`file:F…`, [`file_piece_id`]: its message goes with it); one already gone is done.
    async fn delete_piece(&self, _thread: &Thread, id: &str) -> Result<(), BoxError> {
        if let Some(file_id) = id.strip_prefix(FILE_ID_PREFIX) {
            return Ok(self.inner.api().delete_file(file_id).await?);
        }
        let (channel, ts) = split_id(id)?;
        Ok(self.inner.api().delete_message(channel, ts).await?)
    }
}

/// A reply's `mrkdwn` text piece.
#[async_trait]
impl PostPieces<String> for SlackAdapter {
    async fn post_piece(&self, piece: &String, at: PieceAt<'_>) -> Result<String, BoxError> {
        let (channel, thread_ts) = split_id(&at.thread.id)?;
        let ts = self
            .inner
            .api()
            .post_keyed(channel, thread_ts, piece, event_type(at.keys), at.key)
            .await?;
        Ok(message_id(channel, &ts))
    }
}

/// A file of a message: uploaded into the thread with Slack's external upload (see the module
/// docs and [`Uploads`]); too large or empty, a text saying so instead (keyed like a text
/// piece, so a retry finds it). Slack has no silent post: `at.later()` changes nothing (each
/// message in a thread notifies as Slack's client decides, like a reply's later pieces).
#[async_trait]
impl PostPieces<OutFile> for SlackAdapter {
    async fn post_piece(&self, file: &OutFile, at: PieceAt<'_>) -> Result<String, BoxError> {
        let (channel, thread_ts) = split_id(&at.thread.id)?;
        let api = self.inner.api();
        let refused = if file.size > MAX_FILE_BYTES {
            Some(format!(
                "larger than Slack's {} MB limit for bots",
                MAX_FILE_BYTES / (1024 * 1024)
            ))
        } else if file.size == 0 {
            Some("Slack takes no empty files".to_owned())
        } else {
            None
        };
        if let Some(why) = refused {
            let text = file.refused_text(&why);
            let ts = api
                .post_keyed(channel, thread_ts, &text, event_type(at.keys), at.key)
                .await?;
            return Ok(message_id(channel, &ts));
        }
        let memory = format!("{}|{}", at.thread.id, at.key);
        if let Some((file_id, shared)) = self.inner.uploads.get(&memory) {
            if shared {
                debug!(thread = %at.thread.id, key = %at.key, %file_id, "file uploaded already; skipped");
                return Ok(file_piece_id(&file_id));
            }
            if api
                .find_file_message(channel, thread_ts, &file_id)
                .await?
                .is_some()
            {
                info!(thread = %at.thread.id, key = %at.key, %file_id, "an earlier attempt shared the file; not uploading it again");
                self.inner.uploads.set(&memory, &file_id, true);
                return Ok(file_piece_id(&file_id));
            }
            // Not in the thread: its completion failed, or Slack shares it late. Delete it so
            // it never shows twice, then upload anew.
            api.delete_file(&file_id).await?;
            self.inner.uploads.forget(&memory);
        }
        let alt: Option<String> = file
            .is_image()
            .then(|| file.filename.chars().take(MAX_ALT_TXT_CHARS).collect());
        let file_id = api.upload_file(file, alt.as_deref()).await?;
        self.inner.uploads.set(&memory, &file_id, false);
        api.complete_upload(channel, thread_ts, &file_id, &file.filename)
            .await?;
        self.inner.uploads.set(&memory, &file_id, true);
        Ok(file_piece_id(&file_id))
    }
}

/// A drawn agent message's piece ([`crate::render::agent_message`]).
#[async_trait]
impl PostPieces<AgentPiece> for SlackAdapter {
    async fn post_piece(&self, piece: &AgentPiece, at: PieceAt<'_>) -> Result<String, BoxError> {
        let (channel, thread_ts) = split_id(&at.thread.id)?;
        let blocks = piece.blocks.clone();
        let ts = self
            .inner
            .api()
            .post_blocks_keyed(
                channel,
                thread_ts,
                blocks,
                &piece.text,
                event_type(at.keys),
                at.key,
            )
            .await?;
        Ok(message_id(channel, &ts))
    }

    async fn edit_piece(&self, at: MessageAt<'_>, piece: &AgentPiece) -> Result<Edited, BoxError> {
        let (channel, ts) = split_id(at.id)?;
        self.inner
            .api()
            .update_message(channel, ts, piece.blocks.clone(), &piece.text)
            .await?;
        Ok(Edited::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{RecordingSlack, SlackCall};

    fn reactions(calls: &[SlackCall]) -> Vec<(bool, String)> {
        calls
            .iter()
            .filter_map(|c| match c {
                SlackCall::AddReaction { channel, ts, name } => {
                    assert_eq!((channel.as_str(), ts.as_str()), ("C1", "1.5"));
                    Some((true, name.clone()))
                }
                SlackCall::RemoveReaction { channel, ts, name } => {
                    assert_eq!((channel.as_str(), ts.as_str()), ("C1", "1.5"));
                    Some((false, name.clone()))
                }
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn each_ack_adds_its_reaction_and_removes_the_one_before() {
        let api = RecordingSlack::new();
        let marks = AckMarks::default();
        for ack in [Ack::Seen, Ack::Working, Ack::Failed] {
            marks.mark(&api, "C1:1.5", ack).await.unwrap();
        }
        let r = |add: bool, name: &str| (add, name.to_owned());
        assert_eq!(
            reactions(&api.calls()),
            [
                r(true, "eyes"),
                r(true, "hourglass_flowing_sand"),
                r(false, "eyes"),
                r(true, "x"),
                r(false, "hourglass_flowing_sand"),
            ]
        );
        // Its last ack forgets the message.
        assert!(marks.shown.is_empty());
        assert!(marks.mark(&api, "no-colon", Ack::Seen).await.is_err());
    }
}
