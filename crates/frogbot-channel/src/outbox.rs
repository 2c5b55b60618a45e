//! What an adapter gives the engine for its platform ([`Channel`]): the question hooks, the identity
//! hook, the agent's [`AccessCheck`] and the [`ChannelOutbox`] that posts replies, with what an
//! outbox draws a streamed reply with ([`ReplyStream`], [`EditStream`] over [`DraftMessages`]) and
//! how it remembers the marks it shows ([`ShownAcks`]). Plain data and traits: it calls nothing.

use async_trait::async_trait;

use crate::delivery::{Deliver, Delivery};
use std::sync::Arc;

use frogbot_model::{
    Ack, BoxError, ChannelQuestions, ChatInfo, IdentityResolver, MessageAt, PlatformFile, Thread,
    ThreadMessage, UiMessage, UserId,
};

/// The agent's access check: may this user talk to the agent in this chat? (`None`: anonymous.)
#[async_trait]
pub trait AccessCheck: Send + Sync {
    /// `Ok(false)` denies.
    async fn allow(&self, user: Option<&UserId>, chat: &ChatInfo) -> Result<bool, BoxError>;
}

/// Lets everyone in.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllowAll;

#[async_trait]
impl AccessCheck for AllowAll {
    async fn allow(&self, _user: Option<&UserId>, _chat: &ChatInfo) -> Result<bool, BoxError> {
        Ok(true)
    }
}

/// An access check from configuration: only the listed FrogBot users may talk to the agent (an
/// empty list lets everyone in; anonymous callers are refused by a non-empty list).
#[derive(Clone, Debug, Default)]
pub struct AllowList {
    /// The FrogBot user ids let in.
    pub users: std::collections::HashSet<UserId>,
}

impl AllowList {
    /// From FrogBot user ids.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(users: I) -> Self {
        Self {
            users: users.into_iter().map(|u| UserId::new(u.into())).collect(),
        }
    }
}

#[async_trait]
impl AccessCheck for AllowList {
    async fn allow(&self, user: Option<&UserId>, _chat: &ChatInfo) -> Result<bool, BoxError> {
        Ok(self.users.is_empty() || user.is_some_and(|u| self.users.contains(u)))
    }
}

/// Where an ask to a platform goes (`POST /api/asks` with a platform target).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AskPlace<'a> {
    /// A thread id as the adapter writes them, or a channel where the adapter starts a thread.
    Thread(&'a str),
    /// A person, in a direct conversation.
    User(&'a str),
}

/// An ask that may start a thread ([`ChannelOutbox::ask_thread`]): where it goes, the text of a
/// first message, and the ask's idempotency key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AskTo<'a> {
    /// Where the ask goes.
    pub place: AskPlace<'a>,
    /// The text a thread the ask starts opens with.
    pub text: &'a str,
    /// The ask's message id: the same for every retry of one `idempotencyKey`.
    pub key: &'a str,
}

impl<'a> AskTo<'a> {
    /// The ask to `place`, opening a thread it starts with `text`, idempotent on `key`.
    pub fn new(place: AskPlace<'a>, text: &'a str, key: &'a str) -> Self {
        Self { place, text, key }
    }
}

/// Which earlier messages of a thread [`ChannelOutbox::thread_history`] reads: those of `thread`
/// before the platform message `before`, at most `limit` of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct History<'a> {
    /// The thread.
    pub thread: &'a Thread,
    /// The platform's id of the message the history ends before (not included).
    pub before: &'a str,
    /// The most messages read (the newest kept).
    pub limit: usize,
}

pub use crate::files::FileStream;

/// Where a channel posts the agent's replies (in the same thread), and how it shows a person that
/// their message was taken and is being worked on.
///
/// The engine calls these in order per thread: `ack(Seen)` when a message is stored,
/// `ack(Working)` and `working` when its turn starts (`working` again every
/// [`ChannelOutbox::working_every`] while it runs), `post_reply`, then `ack(Done)` — or
/// `ack(Failed)` when the turn failed. Errors are logged; none stops a turn.
#[async_trait]
pub trait ChannelOutbox: OutboxDelivery + Send + Sync {
    /// The thread an ask to `ask.place` is asked in: by default a [`AskPlace::Thread`] as it is
    /// (an existing thread, or a chat that is a thread already), and no direct conversations. An
    /// adapter that can start a thread in a channel (or a direct conversation) posts `ask.text`
    /// there as its first message and returns the new thread's id.
    ///
    /// `ask.key` is the ask's message id: the same for every retry of one `idempotencyKey`, unique
    /// otherwise. An adapter that posts a first message makes that post idempotent on it (a
    /// platform's nonce, transaction id or message metadata), so that a retry after a lost
    /// response finds the same thread instead of starting a second one.
    async fn ask_thread(&self, ask: AskTo<'_>) -> Result<String, BoxError> {
        match ask.place {
            AskPlace::Thread(t) => Ok(t.to_owned()),
            AskPlace::User(_) => Err("this channel does not open direct conversations".into()),
        }
    }

    /// Opens a file a person posted ([`ThreadMessage::files`]) for the engine to store, with the
    /// platform's own authentication, through the guarded outbound client: its bytes as they
    /// arrive. The engine calls it only for a writer the channel lets in, and stops reading past
    /// its size limit or its time limit. By default the channel takes no files (the person is
    /// told so).
    async fn open_file(&self, _file: &PlatformFile) -> Result<FileStream, BoxError> {
        Err("this channel does not take files".into())
    }

    /// Posts the reply of a turn that ended (or stopped to wait) in `thread`, or a short notice
    /// of the engine's (a queued message's note, a failure, a stop).
    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError>;

    /// Posts `reply` as the durable delivery `delivery` (see [`Delivery`]): the engine calls it
    /// again with the same key after a failure marked [`Transient`](frogbot_model::Transient)
    /// (network, 5xx, 429 — its `retry_after` is waited out), in this process or another.
    ///
    /// A retry must not post again a piece an earlier attempt posted, where the platform makes
    /// that possible: Matrix sends each piece under a transaction id made from
    /// [`Delivery::piece_key`], Discord under a nonce made from it (`enforce_nonce`), Slack looks
    /// in the thread for pieces carrying it in their metadata before posting; Telegram has no
    /// idempotency key, so it delivers at least once. Errors without a `Transient` are permanent.
    ///
    /// Returns the platform ids of the messages the reply is in, in order (those an earlier
    /// attempt posted too), so the agent can edit it later ([`ChannelOutbox::edit_posted`]);
    /// empty when the outbox cannot tell. By default: the shared loop over
    /// [`OutboxDelivery::delivery`] ([`crate::delivery::post_pieces`]), else
    /// [`ChannelOutbox::post_reply`] with no ids.
    async fn deliver(
        &self,
        thread: &Thread,
        reply: &UiMessage,
        delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError> {
        if let Some(d) = self.delivery() {
            return d.deliver_text(thread, reply, delivery).await;
        }
        self.post_reply(thread, reply).await?;
        Ok(Vec::new())
    }

    /// Marks the person's message `message_id` (the platform's id) in `thread` with `ack`,
    /// replacing the mark before it (a reaction by default; nothing when the channel's acks are
    /// off).
    async fn ack(&self, _thread: &Thread, _message_id: &str, _ack: Ack) -> Result<(), BoxError> {
        Ok(())
    }

    /// A turn runs in `thread`: show the platform's progress sign (typing, a status).
    async fn working(&self, _thread: &Thread) -> Result<(), BoxError> {
        Ok(())
    }

    /// The turn in `thread` has ended (its reply complete, failed or stopped): take the
    /// progress sign off where the platform keeps showing it until it times out (Matrix's
    /// typing notice). Nothing by default.
    async fn idle(&self, _thread: &Thread) -> Result<(), BoxError> {
        Ok(())
    }

    /// How often `working` is repeated while a turn runs (the platform's sign fades after a while).
    fn working_every(&self) -> std::time::Duration {
        std::time::Duration::from_secs(4)
    }

    /// Starts showing a reply as the model writes it in `thread` (`Ok(None)`: this outbox does
    /// not stream; the reply is posted whole when its turn ends). The engine then calls
    /// [`ReplyStream::show`] at most once per [`ChannelSettings::stream_interval`] and
    /// [`ReplyStream::finish`] once. Most outboxes return an [`EditStream`] over their
    /// [`DraftMessages`]; Slack its native stream.
    async fn start_stream(&self, _thread: &Thread) -> Result<Option<BoxedReplyStream>, BoxError> {
        Ok(None)
    }

    /// `text` cut into the messages `post_reply` would post (one by default).
    fn pieces(&self, text: &str) -> Vec<String> {
        vec![text.to_owned()]
    }

    /// Replaces the text of the message `at` that a stream posted, with no controls: how a stream
    /// a crash cut off is left with its partial text and a mark.
    async fn edit_message(&self, _at: MessageAt<'_>, _text: &str) -> Result<(), BoxError> {
        Err("this channel does not edit messages".into())
    }

    /// Posts an agent message (its title, Markdown text and blocks — [`frogbot_model::blocks_of`],
    /// with event buttons —) in `thread` as the durable delivery `delivery`, and returns the
    /// platform ids of the messages it was drawn in, in order (an edit, a deletion, a pin and an
    /// event click find it by them). Each block is drawn with the platform's own means within its
    /// limits; a block of an unknown type as [`frogbot_model::blocks::UNKNOWN_BLOCK_TEXT`]. The
    /// retry rules of [`ChannelOutbox::deliver`] apply. By default: the text only, through
    /// `deliver`.
    async fn post_message(
        &self,
        thread: &Thread,
        message: &UiMessage,
        delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError> {
        match self.delivery() {
            Some(d) => d.deliver_drawn(thread, message, delivery).await,
            None => self.deliver(thread, message, delivery).await,
        }
    }

    /// Posts `files` (a message's files) in `thread` after the message's `after` pieces, each as
    /// the platform's own upload in its own message, as the durable delivery `delivery` (the same
    /// retry rules as [`ChannelOutbox::deliver`]); returns their platform ids, in order. A file
    /// the platform cannot take (too large) is a text naming it instead. By default: the shared
    /// loop ([`crate::delivery::post_files`]) over [`OutboxDelivery::delivery`], else an error.
    async fn deliver_files(
        &self,
        thread: &Thread,
        files: &[crate::files::OutFile],
        after: usize,
        delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError> {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        match self.delivery() {
            Some(d) => d.deliver_files(thread, files, after, delivery).await,
            None => Err("this channel does not send files".into()),
        }
    }

    /// Draws `message` again into the platform messages `posted` (what `post_message` returned),
    /// edited in place without a new notification; returns the ids it is drawn in now (a longer
    /// message may post more, a shorter one deletes the surplus). Idempotent: drawing the same
    /// message twice leaves the same result.
    async fn edit_posted(
        &self,
        thread: &Thread,
        posted: &[String],
        message: &UiMessage,
    ) -> Result<Vec<String>, BoxError> {
        match self.delivery() {
            Some(d) => d.redraw(thread, posted, message).await,
            None => Err("this channel does not edit messages".into()),
        }
    }

    /// Deletes the platform messages `posted` (one already gone is not an error).
    async fn delete_posted(&self, thread: &Thread, posted: &[String]) -> Result<(), BoxError> {
        match self.delivery() {
            Some(d) => d.delete_all(thread, posted).await,
            None => Err("this channel does not delete messages".into()),
        }
    }

    /// Pins (`pinned`) or unpins the platform message `at` in its thread's conversation (already
    /// so is not an error).
    async fn pin_posted(&self, _at: MessageAt<'_>, _pinned: bool) -> Result<(), BoxError> {
        Err("this channel does not pin messages".into())
    }

    /// The messages of `history.thread` before `history.before` (the platform's message id),
    /// oldest first, at most `history.limit` of them: read from the platform when the bot is
    /// first mentioned in a thread it has not seen (none by default; Telegram has no history for
    /// bots).
    async fn thread_history(&self, _history: History<'_>) -> Result<Vec<ThreadMessage>, BoxError> {
        Ok(Vec::new())
    }
}

/// An outbox's delivery half, when it draws its messages as pieces the shared delivery loops post
/// ([`crate::delivery`]): then [`ChannelOutbox::deliver`], [`ChannelOutbox::post_message`],
/// [`ChannelOutbox::deliver_files`], [`ChannelOutbox::edit_posted`] and
/// [`ChannelOutbox::delete_posted`] run those loops by default.
///
/// Every outbox that implements [`Draw`](crate::delivery::Draw) has it already (itself, by the
/// blanket implementation): an adapter writes nothing. An outbox that posts otherwise says so
/// with an empty implementation (`impl OutboxDelivery for MyOutbox {}`: none), and the defaults
/// fall back to [`ChannelOutbox::post_reply`].
pub trait OutboxDelivery {
    /// The delivery loops' half of this outbox; none by default.
    fn delivery(&self) -> Option<&dyn Deliver> {
        None
    }
}

impl<T: crate::delivery::Draw> OutboxDelivery for T {
    fn delivery(&self) -> Option<&dyn Deliver> {
        Some(self)
    }
}

/// The acknowledgement each message shows now, for an outbox whose marks replace one another
/// (a reaction added, the previous one taken off): [`ShownAcks::replace`] records the new mark and
/// hands back the one to take off. A message is forgotten at its last mark (Done or Failed); past
/// [`ShownAcks::MAX`] messages (turns that never ended, e.g. a crash) all are forgotten.
#[derive(Debug)]
pub struct ShownAcks<K, V> {
    shown: std::sync::Mutex<std::collections::HashMap<K, V>>,
}

impl<K, V> Default for ShownAcks<K, V> {
    fn default() -> Self {
        Self {
            shown: Default::default(),
        }
    }
}

impl<K: std::hash::Hash + Eq, V> ShownAcks<K, V> {
    /// How many messages are remembered at most.
    pub const MAX: usize = 10_000;

    /// `message` now shows `ack`, drawn as `mark` (the mark's own id where the platform gives
    /// one, else the ack): returns the mark it showed before, which the caller takes off.
    pub fn replace(&self, message: K, ack: Ack, mark: V) -> Option<V> {
        let mut shown = self.shown.lock().unwrap_or_else(|p| p.into_inner());
        let before = match ack {
            Ack::Done | Ack::Failed => shown.remove(&message),
            Ack::Seen | Ack::Working => shown.insert(message, mark),
        };
        if shown.len() > Self::MAX {
            shown.clear();
        }
        before
    }

    /// Whether no message is remembered.
    pub fn is_empty(&self) -> bool {
        self.shown
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }
}

/// A [`ReplyStream`] boxed, as [`ChannelOutbox::start_stream`] returns it.
pub type BoxedReplyStream = Box<dyn ReplyStream>;

/// A reply shown while the model writes it.
#[async_trait]
pub trait ReplyStream: Send {
    /// Shows `text`, the reply's whole text so far (it only grows while streaming), with a Stop
    /// control.
    async fn show(&mut self, text: &str) -> Result<(), BoxError>;

    /// The final state: `text` (the complete reply, which may differ from what was shown: a
    /// notice, a mark) split at the platform's limit, the Stop control gone.
    async fn finish(&mut self, text: &str) -> Result<(), BoxError>;

    /// The platform ids of the messages posted so far (kept with the reply, so a stream a crash
    /// cut off is found again).
    fn message_ids(&self) -> Vec<String>;

    /// Whether the person sees something of the reply yet. A stream that holds its first message
    /// back (until a first sentence) says `false`, and the next text is shown soon (100 ms)
    /// rather than an interval later. By default, once anything was shown.
    fn visible(&self) -> bool {
        true
    }
}

/// The messages a streamed reply is drawn in, for [`EditStream`]: post one, edit one, and how a
/// text is cut into messages.
#[async_trait]
pub trait DraftMessages: Send + Sync {
    /// Posts a message showing `text` (with the Stop control when `stop`) and returns its id.
    async fn post(&self, text: &str, stop: bool) -> Result<String, BoxError>;
    /// Replaces message `id`'s text (Stop control when `stop`).
    async fn edit(&self, id: &str, text: &str, stop: bool) -> Result<(), BoxError>;
    /// `text` cut into messages, the way the outbox's `post_reply` cuts it.
    fn pieces(&self, text: &str) -> Vec<String>;
}

/// A [`ReplyStream`] by post and edit: the text's pieces are shown in messages posted one after
/// the other; a piece that changed is edited, a new one posted. The last message carries the Stop
/// control while streaming. The first message — the one a person is notified of, edits do not
/// notify — is posted once the text [reads as a start](frogbot_model::text::reads_as_a_start)
/// (a first sentence, a paragraph break or 80 characters), [`FIRST_MESSAGE_WAIT`] after the first
/// text at the latest, or at the end of the stream.
pub struct EditStream<D> {
    drafts: D,
    ids: Vec<String>,
    shown: Vec<(String, bool)>,
    hold: FirstMessageHold,
}

/// The longest a streamed reply's first message waits for its text to read as a start: then what
/// there is is posted, so the Stop control shows while a model pauses after a few words.
pub const FIRST_MESSAGE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The rule every streamed reply holds its first message back by: that message is the one a
/// person is notified of (edits and appends do not notify), so it waits until the text
/// [reads as a start](frogbot_model::text::reads_as_a_start) — a first sentence, a paragraph
/// break or 80 characters — or [`FIRST_MESSAGE_WAIT`] after the first text, so a notification
/// never shows a fragment ("got:") and a model pausing after a few words still shows them.
/// (The end of the stream posts whatever there is.)
#[derive(Debug, Default)]
pub struct FirstMessageHold {
    since: Option<tokio::time::Instant>,
}

impl FirstMessageHold {
    /// Whether `text`, the reply so far with nothing posted yet, waits.
    pub fn holds(&mut self, text: &str) -> bool {
        if frogbot_model::text::reads_as_a_start(text) {
            return false;
        }
        let since = *self.since.get_or_insert_with(tokio::time::Instant::now);
        since.elapsed() < FIRST_MESSAGE_WAIT
    }
}

impl<D: DraftMessages> EditStream<D> {
    /// A stream that has posted nothing yet.
    pub fn new(drafts: D) -> Self {
        Self::resume(drafts, Vec::new())
    }

    /// A stream whose messages `ids` were posted before (their texts unknown: each is edited).
    pub fn resume(drafts: D, ids: Vec<String>) -> Self {
        let shown = ids.iter().map(|_| (String::new(), true)).collect();
        Self {
            drafts,
            ids,
            shown,
            hold: FirstMessageHold::default(),
        }
    }

    /// The drafts.
    pub fn drafts(&self) -> &D {
        &self.drafts
    }

    async fn draw(&mut self, text: &str, stop: bool) -> Result<(), BoxError> {
        let pieces = self.drafts.pieces(text);
        let last = pieces.len().saturating_sub(1);
        for (i, piece) in pieces.into_iter().enumerate() {
            let with_stop = stop && i == last;
            match self.shown.get(i) {
                Some((shown, had_stop)) if *shown == piece && *had_stop == with_stop => {}
                Some(_) => {
                    self.drafts.edit(&self.ids[i], &piece, with_stop).await?;
                    self.shown[i] = (piece, with_stop);
                }
                None => {
                    let id = self.drafts.post(&piece, with_stop).await?;
                    self.ids.push(id);
                    self.shown.push((piece, with_stop));
                }
            }
        }
        Ok(())
    }
}

impl<D> std::fmt::Debug for EditStream<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EditStream")
            .field("ids", &self.ids)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl<D: DraftMessages> ReplyStream for EditStream<D> {
    async fn show(&mut self, text: &str) -> Result<(), BoxError> {
        if self.ids.is_empty() && self.hold.holds(text) {
            return Ok(());
        }
        self.draw(text, true).await
    }

    async fn finish(&mut self, text: &str) -> Result<(), BoxError> {
        self.draw(text, false).await
    }

    fn message_ids(&self) -> Vec<String> {
        self.ids.clone()
    }

    fn visible(&self) -> bool {
        !self.ids.is_empty()
    }
}

/// A channel served by this process.
#[derive(Clone)]
pub struct Channel {
    /// Its platform name (`slack`, `discord`, …).
    pub platform: String,
    /// Its question hooks; `None`: the question tool is never offered in its conversations.
    pub questions: Option<Arc<dyn ChannelQuestions>>,
    /// The identity hook.
    pub identity: Arc<dyn IdentityResolver>,
    /// The agent's access check.
    pub access: Arc<dyn AccessCheck>,
    /// Where replies are posted.
    pub outbox: Option<Arc<dyn ChannelOutbox>>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("platform", &self.platform)
            .field("questions", &self.questions.is_some())
            .finish_non_exhaustive()
    }
}

/// How FrogBot treats one platform's chats (`[channels.NAME]`'s shared keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelSettings {
    /// The model its messages are sent with (`None`: the engine's default).
    pub model: Option<String>,
    /// The reasoning option they are sent with.
    pub reasoning: Option<String>,
    /// Whether messages get acknowledgements (Seen, Working, Done, Failed); `false`: none.
    pub acks: bool,
    /// Whether replies are shown as the model writes them (when the outbox can).
    pub stream: bool,
    /// The least time between two updates of a streamed reply.
    pub stream_interval: std::time::Duration,
    /// How many earlier messages of a thread are read when the bot is first mentioned in it.
    pub context_messages: usize,
    /// The most characters of those earlier messages handed to the model (the newest kept).
    pub context_chars: usize,
}

impl Default for ChannelSettings {
    fn default() -> Self {
        Self {
            model: None,
            reasoning: None,
            acks: true,
            stream: true,
            stream_interval: std::time::Duration::from_secs(1),
            context_messages: 50,
            context_chars: 8_000,
        }
    }
}

#[cfg(test)]
mod shown_acks_tests {
    use super::*;

    #[test]
    fn each_mark_replaces_the_one_before_and_the_last_forgets_the_message() {
        let shown: ShownAcks<&str, u32> = ShownAcks::default();
        assert_eq!(shown.replace("m", Ack::Seen, 1), None);
        assert_eq!(shown.replace("m", Ack::Working, 2), Some(1));
        assert_eq!(shown.replace("m", Ack::Done, 3), Some(2));
        assert!(shown.is_empty());
        // Past the bound, every message is forgotten.
        let many: ShownAcks<usize, ()> = ShownAcks::default();
        for m in 0..=ShownAcks::<usize, ()>::MAX {
            many.replace(m, Ack::Seen, ());
        }
        assert!(many.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drafts that record what they post and edit.
    #[derive(Default)]
    struct Recorded(std::sync::Mutex<Vec<String>>);

    #[async_trait]
    impl DraftMessages for &Recorded {
        async fn post(&self, text: &str, _stop: bool) -> Result<String, BoxError> {
            let mut all = self.0.lock().unwrap();
            all.push(format!("post {text}"));
            Ok(format!("m{}", all.len()))
        }
        async fn edit(&self, id: &str, text: &str, _stop: bool) -> Result<(), BoxError> {
            self.0.lock().unwrap().push(format!("edit {id} {text}"));
            Ok(())
        }
        fn pieces(&self, text: &str) -> Vec<String> {
            frogbot_model::text::split(text, 100)
        }
    }

    #[tokio::test]
    async fn the_first_message_waits_for_a_start_a_notification_can_show() {
        let drafts = Recorded::default();
        let mut s = EditStream::new(&drafts);
        s.show("got:").await.unwrap();
        s.show("got: the").await.unwrap();
        // Nothing posted yet: the notification would show "got:".
        assert!(drafts.0.lock().unwrap().is_empty());
        assert!(!s.visible());
        s.show("got: the first sentence. And").await.unwrap();
        assert!(s.visible());
        s.finish("got: the first sentence. And more.")
            .await
            .unwrap();
        assert_eq!(
            *drafts.0.lock().unwrap(),
            [
                "post got: the first sentence. And",
                "edit m1 got: the first sentence. And more."
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_first_message_is_posted_after_the_wait_for_its_stop_control() {
        let drafts = Recorded::default();
        let mut s = EditStream::new(&drafts);
        s.show("Let me check").await.unwrap();
        tokio::time::advance(FIRST_MESSAGE_WAIT / 2).await;
        s.show("Let me check").await.unwrap();
        assert!(!s.visible());
        tokio::time::advance(FIRST_MESSAGE_WAIT / 2).await;
        s.show("Let me check").await.unwrap();
        assert!(s.visible());
        assert_eq!(*drafts.0.lock().unwrap(), ["post Let me check"]);
    }

    #[tokio::test]
    async fn a_stream_that_never_reads_as_a_start_is_posted_at_its_end() {
        let drafts = Recorded::default();
        let mut s = EditStream::new(&drafts);
        s.show("ok").await.unwrap();
        s.finish("ok").await.unwrap();
        assert_eq!(*drafts.0.lock().unwrap(), ["post ok"]);
        assert_eq!(s.message_ids(), ["m1"]);
    }
}
