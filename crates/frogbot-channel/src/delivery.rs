//! The one delivery loop: a reply or an agent message, already drawn as the platform's messages
//! ("pieces"), posted piece by piece under stable keys, edited in place later, deleted.
//!
//! Every adapter's [`ChannelOutbox`](crate::ChannelOutbox) runs these loops over its platform's
//! half, [`PostPieces`] (post one piece under a key, edit one in place) and [`PostedMessages`]
//! (find the pieces an earlier attempt posted, delete one):
//!
//! - [`post_pieces`] — [`ChannelOutbox::deliver`](crate::ChannelOutbox::deliver) and
//!   [`post_message`](crate::ChannelOutbox::post_message): piece `i` is posted under
//!   [`Delivery::piece_key`]`(i)`, the pieces an earlier attempt posted (where the platform can
//!   tell) are not posted again, and the ids come back in order. A failure stops at its piece: the
//!   pieces after it wait for the engine's retry, which posts only what is missing.
//! - [`edit_pieces`] — [`edit_posted`](crate::ChannelOutbox::edit_posted): each posted message
//!   redrawn in place; a longer drawing posts its extra pieces under `edit:{first id}:{i}` (so a
//!   repeated edit finds them instead of posting them twice), a shorter one deletes the surplus.
//! - [`delete_pieces`] — [`delete_posted`](crate::ChannelOutbox::delete_posted).
//! - [`post_files`] — [`deliver_files`](crate::ChannelOutbox::deliver_files): the files a
//!   message carries ([`OutFile`]), each uploaded as its own message after the message's text,
//!   file `i` under `{key}:file:{i}`, found again like a piece. An edit leaves them as they are.
//!
//! How a platform makes a post idempotent is its own: Matrix sends under a transaction id made
//! from the key, Discord under a nonce, Slack reads the thread's message metadata
//! ([`PostedMessages::already_posted`]), Telegram remembers in-process what it posted.

use std::collections::HashMap;

use async_trait::async_trait;
use frogbot_model::{BoxError, MessageAt, Thread, UiMessage};

use crate::files::OutFile;

/// One reply's durable delivery, as [`ChannelOutbox::deliver`](crate::ChannelOutbox::deliver) sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The same on every attempt, in every process: `deliver:{chat}:{message}:{from}` (at most
    /// 200 bytes of `A-Z a-z 0-9 _ - :`).
    pub key: String,
    /// 0 on the first attempt; from 1 an earlier attempt failed, and may have posted some pieces.
    pub attempt: u32,
    /// Every piece is posted without a notification where the platform can
    /// ([`PieceAt::later`]): what is shown just before a message that notifies (a question's
    /// blocks, posted before its question).
    pub quiet: bool,
}

impl Delivery {
    /// The first attempt of delivery `key`.
    pub fn new(key: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            attempt: 0,
            quiet: false,
        }
    }

    /// This delivery with every piece posted without a notification ([`Delivery::quiet`]).
    pub fn quietly(mut self) -> Self {
        self.quiet = true;
        self
    }

    /// The key of the reply's piece `index` (0-based), stable like [`Delivery::key`].
    pub fn piece_key(&self, index: usize) -> String {
        format!("{}:{index}", self.key)
    }

    /// The key of the message's file `index` (0-based), stable like [`Delivery::key`].
    pub fn file_key(&self, index: usize) -> String {
        format!("{}:file:{index}", self.key)
    }

    /// Whether an earlier attempt may have posted some pieces (look before posting).
    pub fn is_retry(&self) -> bool {
        self.attempt > 0
    }
}

/// Which loop a piece is posted by: its key space (Slack keeps them apart in its metadata's
/// event type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// A durable delivery's piece ([`post_pieces`]): key [`Delivery::piece_key`].
    Delivery,
    /// A piece an edit adds to a message that grew ([`edit_pieces`]): key `edit:{first id}:{i}`.
    Edit,
}

/// Where a piece goes: its thread, and its place in its message.
#[derive(Debug, Clone, Copy)]
pub struct PieceAt<'a> {
    /// The thread the piece is posted in.
    pub thread: &'a Thread,
    /// The piece's stable key: the same on every attempt, in every process.
    pub key: &'a str,
    /// 0-based position of the piece in its message.
    pub index: usize,
    /// Which loop posts it.
    pub keys: Keys,
    /// Its delivery is [`Delivery::quiet`].
    pub quiet: bool,
}

impl PieceAt<'_> {
    /// Whether a piece of the same message was posted before this one: one message is one
    /// notification, so a platform posts this one silently where it can. Every piece an edit
    /// adds is later, and every piece of a quiet delivery.
    pub fn later(&self) -> bool {
        self.index > 0 || self.keys == Keys::Edit || self.quiet
    }
}

/// What [`PostPieces::edit_piece`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edited {
    /// The message shows the new piece.
    Done,
    /// The message could not take it (gone, or a kind the platform cannot turn into the new
    /// one) and was deleted: the piece is posted anew in its place.
    Replaced,
}

/// The pieces [`PostedMessages::already_posted`] looks for.
#[derive(Debug, Clone, Copy)]
pub struct Lookup<'a> {
    /// The thread they would be in.
    pub thread: &'a Thread,
    /// The loop that posts them (its key space).
    pub keys: Keys,
    /// Their keys.
    pub wanted: &'a [String],
    /// Whether an earlier attempt may have posted some (a first delivery attempt has not).
    pub retry: bool,
}

/// A platform's messages as the delivery loops see them, whatever their pieces are.
#[async_trait]
pub trait PostedMessages: Send + Sync {
    /// The pieces of `look.thread` among `look.wanted` that are posted already, by key, with
    /// their platform ids: looked up before posting, so that a piece an earlier attempt posted
    /// (its response lost) is not posted twice. None by default: the platform makes the post
    /// itself idempotent, or cannot.
    async fn already_posted(&self, look: Lookup<'_>) -> Result<HashMap<String, String>, BoxError> {
        let _ = look;
        Ok(HashMap::new())
    }

    /// Deletes the platform message `id` (one already gone is no failure).
    async fn delete_piece(&self, thread: &Thread, id: &str) -> Result<(), BoxError>;
}

/// How a platform posts and edits one piece of kind `P` (a text piece, a drawn agent message).
#[async_trait]
pub trait PostPieces<P: Sync>: PostedMessages {
    /// Posts `piece` in `at.thread` under `at.key` (idempotent on it where the platform allows)
    /// and returns its platform id.
    async fn post_piece(&self, piece: &P, at: PieceAt<'_>) -> Result<String, BoxError>;

    /// Redraws the posted message `at` as `piece`, without a new notification.
    async fn edit_piece(&self, at: MessageAt<'_>, piece: &P) -> Result<Edited, BoxError> {
        let _ = (at, piece);
        Err("this channel does not edit messages".into())
    }
}

/// What an outbox draws a message as — a reply's text pieces, an agent message's pieces — for
/// the delivery loops to post. An outbox that implements it (and [`PostPieces`] for both kinds)
/// is its own [`OutboxDelivery::delivery`](crate::OutboxDelivery::delivery) (a blanket
/// implementation: the adapter writes nothing more), and the engine's deliveries, agent
/// messages, edits and deletions run [`post_pieces`], [`edit_pieces`] and [`delete_pieces`] over
/// it ([`Deliver`], implemented for every `Draw`).
///
/// Files ([`OutFile`]) are posted by the outbox's `PostPieces<OutFile>`: the platform's own
/// upload, one message per file, or a text naming the file where the platform cannot take it
/// (too large): a limit is never silent.
pub trait Draw: PostPieces<Self::Text> + PostPieces<Self::Agent> + PostPieces<OutFile> {
    /// One message of a reply's text.
    type Text: Send + Sync;
    /// One message of a drawn agent message (its title, text, blocks, event buttons).
    type Agent: Send + Sync;

    /// `reply`'s text, to be posted in `thread`, as the platform's messages.
    fn text_pieces(&self, thread: &Thread, reply: &UiMessage) -> Vec<Self::Text>;

    /// The agent message `message` as the platform's messages.
    fn agent_pieces(&self, message: &UiMessage) -> Vec<Self::Agent>;
}

/// The delivery half of an outbox, whole: what the engine's
/// [`ChannelOutbox::deliver`](crate::ChannelOutbox::deliver),
/// [`post_message`](crate::ChannelOutbox::post_message),
/// [`edit_posted`](crate::ChannelOutbox::edit_posted) and
/// [`delete_posted`](crate::ChannelOutbox::delete_posted) run by default. Every [`Draw`] is one.
#[async_trait]
pub trait Deliver: Send + Sync {
    /// A reply's text pieces, posted as the durable delivery `delivery` ([`post_pieces`]).
    async fn deliver_text(
        &self,
        thread: &Thread,
        reply: &UiMessage,
        delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError>;

    /// An agent message's pieces, posted as the durable delivery `delivery` ([`post_pieces`]).
    async fn deliver_drawn(
        &self,
        thread: &Thread,
        message: &UiMessage,
        delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError>;

    /// The messages `posted` redrawn as `message` ([`edit_pieces`]).
    async fn redraw(
        &self,
        thread: &Thread,
        posted: &[String],
        message: &UiMessage,
    ) -> Result<Vec<String>, BoxError>;

    /// The messages `posted` deleted ([`delete_pieces`]).
    async fn delete_all(&self, thread: &Thread, posted: &[String]) -> Result<(), BoxError>;

    /// A message's files, posted after its `after` pieces as the durable delivery `delivery`
    /// ([`post_files`]).
    async fn deliver_files(
        &self,
        thread: &Thread,
        files: &[OutFile],
        after: usize,
        delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError>;
}

#[async_trait]
impl<T: Draw> Deliver for T {
    async fn deliver_text(
        &self,
        thread: &Thread,
        reply: &UiMessage,
        delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError> {
        let pieces = self.text_pieces(thread, reply);
        post_pieces::<T::Text, T>(self, thread, &pieces, delivery).await
    }

    async fn deliver_drawn(
        &self,
        thread: &Thread,
        message: &UiMessage,
        delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError> {
        let pieces = self.agent_pieces(message);
        post_pieces::<T::Agent, T>(self, thread, &pieces, delivery).await
    }

    async fn redraw(
        &self,
        thread: &Thread,
        posted: &[String],
        message: &UiMessage,
    ) -> Result<Vec<String>, BoxError> {
        let pieces = self.agent_pieces(message);
        edit_pieces::<T::Agent, T>(self, thread, posted, &pieces).await
    }

    async fn delete_all(&self, thread: &Thread, posted: &[String]) -> Result<(), BoxError> {
        delete_pieces(self, thread, posted).await
    }

    async fn deliver_files(
        &self,
        thread: &Thread,
        files: &[OutFile],
        after: usize,
        delivery: &Delivery,
    ) -> Result<Vec<String>, BoxError> {
        post_files(self, thread, files, after, delivery).await
    }
}

/// Posts `pieces` in `thread` as the durable delivery `delivery` and returns their platform ids,
/// in order (those an earlier attempt posted too). See the module.
pub async fn post_pieces<P: Sync, O: PostPieces<P> + ?Sized>(
    outbox: &O,
    thread: &Thread,
    pieces: &[P],
    delivery: &Delivery,
) -> Result<Vec<String>, BoxError> {
    let keys: Vec<String> = (0..pieces.len()).map(|i| delivery.piece_key(i)).collect();
    post_keyed(outbox, thread, pieces, &keys, 0, delivery).await
}

/// Posts `files` in `thread` after the `after` pieces of their message's text, as the durable
/// delivery `delivery`: file `i` under [`Delivery::file_key`]`(i)`, those an earlier attempt
/// posted (where the platform can tell) not again. Returns their platform ids, in order.
pub async fn post_files<O: PostPieces<OutFile> + ?Sized>(
    outbox: &O,
    thread: &Thread,
    files: &[OutFile],
    after: usize,
    delivery: &Delivery,
) -> Result<Vec<String>, BoxError> {
    let keys: Vec<String> = (0..files.len()).map(|i| delivery.file_key(i)).collect();
    post_keyed(outbox, thread, files, &keys, after, delivery).await
}

/// The one loop of [`post_pieces`] and [`post_files`]: piece `i` under `keys[i]` at position
/// `after + i`, skipping those an earlier attempt posted.
async fn post_keyed<P: Sync, O: PostPieces<P> + ?Sized>(
    outbox: &O,
    thread: &Thread,
    pieces: &[P],
    keys: &[String],
    after: usize,
    delivery: &Delivery,
) -> Result<Vec<String>, BoxError> {
    if pieces.is_empty() {
        return Ok(Vec::new());
    }
    let look = Lookup {
        thread,
        keys: Keys::Delivery,
        wanted: keys,
        retry: delivery.is_retry(),
    };
    let present = outbox.already_posted(look).await?;
    let mut ids = Vec::with_capacity(pieces.len());
    for (i, (piece, key)) in pieces.iter().zip(keys).enumerate() {
        let id = match present.get(key) {
            Some(id) => {
                tracing::debug!(thread = %thread.id, %key, "piece already posted; skipped");
                id.clone()
            }
            None => {
                let at = PieceAt {
                    thread,
                    key,
                    index: after + i,
                    keys: Keys::Delivery,
                    quiet: delivery.quiet,
                };
                outbox.post_piece(piece, at).await?
            }
        };
        ids.push(id);
    }
    Ok(ids)
}

/// Redraws the messages `posted` (what [`post_pieces`] returned) as `pieces` and returns the ids
/// the message is drawn in now. See the module. Idempotent: the same edit twice leaves the same
/// messages.
pub async fn edit_pieces<P: Sync, O: PostPieces<P> + ?Sized>(
    outbox: &O,
    thread: &Thread,
    posted: &[String],
    pieces: &[P],
) -> Result<Vec<String>, BoxError> {
    let base = posted.first().unwrap_or(&thread.id);
    let key = |i: usize| format!("edit:{base}:{i}");
    let extra: Vec<String> = (posted.len()..pieces.len()).map(key).collect();
    let present = if extra.is_empty() {
        HashMap::new()
    } else {
        let look = Lookup {
            thread,
            keys: Keys::Edit,
            wanted: &extra,
            retry: true,
        };
        outbox.already_posted(look).await?
    };
    let mut ids = Vec::with_capacity(pieces.len());
    for (index, piece) in pieces.iter().enumerate() {
        let key = key(index);
        if let Some(id) = posted.get(index).or_else(|| present.get(&key)) {
            match outbox.edit_piece(thread.message(id), piece).await? {
                Edited::Done => {
                    ids.push(id.clone());
                    continue;
                }
                Edited::Replaced => {}
            }
        }
        let at = PieceAt {
            thread,
            key: &key,
            index,
            keys: Keys::Edit,
            quiet: false,
        };
        ids.push(outbox.post_piece(piece, at).await?);
    }
    delete_pieces(outbox, thread, posted.get(ids.len()..).unwrap_or_default()).await?;
    Ok(ids)
}

/// Deletes the platform messages `posted`, in order (one already gone is no failure).
pub async fn delete_pieces<O: PostedMessages + ?Sized>(
    outbox: &O,
    thread: &Thread,
    posted: &[String],
) -> Result<(), BoxError> {
    for id in posted {
        outbox.delete_piece(thread, id).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A platform whose messages live in a list; it may fail a post once, after posting
    /// (a lost response), and remembers keys like Slack's metadata.
    #[derive(Default)]
    struct Board {
        messages: Mutex<Vec<(String, String, String)>>, // (id, key, text)
        lose_response_at: Mutex<Option<usize>>,
        next_id: std::sync::atomic::AtomicUsize,
    }

    #[async_trait]
    impl PostedMessages for Board {
        async fn already_posted(
            &self,
            look: Lookup<'_>,
        ) -> Result<HashMap<String, String>, BoxError> {
            if !look.retry {
                return Ok(HashMap::new());
            }
            let messages = self.messages.lock().unwrap();
            Ok(messages
                .iter()
                .filter(|(_, k, _)| look.wanted.contains(k))
                .map(|(id, k, _)| (k.clone(), id.clone()))
                .collect())
        }

        async fn delete_piece(&self, _thread: &Thread, id: &str) -> Result<(), BoxError> {
            self.messages.lock().unwrap().retain(|(i, _, _)| i != id);
            Ok(())
        }
    }

    #[async_trait]
    impl PostPieces<String> for Board {
        async fn post_piece(&self, piece: &String, at: PieceAt<'_>) -> Result<String, BoxError> {
            let mut messages = self.messages.lock().unwrap();
            let n = self
                .next_id
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let id = format!("m{n}");
            messages.push((id.clone(), at.key.to_owned(), piece.clone()));
            if *self.lose_response_at.lock().unwrap() == Some(at.index) {
                *self.lose_response_at.lock().unwrap() = None;
                return Err("connection reset".into());
            }
            Ok(id)
        }

        async fn edit_piece(&self, at: MessageAt<'_>, piece: &String) -> Result<Edited, BoxError> {
            let mut messages = self.messages.lock().unwrap();
            match messages.iter_mut().find(|(i, _, _)| i == at.id) {
                Some(m) => {
                    m.2 = piece.clone();
                    Ok(Edited::Done)
                }
                None => Ok(Edited::Replaced),
            }
        }
    }

    #[async_trait]
    impl PostPieces<OutFile> for Board {
        async fn post_piece(&self, piece: &OutFile, at: PieceAt<'_>) -> Result<String, BoxError> {
            let text = format!("[{}, later: {}]", piece.filename, at.later());
            PostPieces::<String>::post_piece(self, &text, at).await
        }
    }

    fn texts(board: &Board) -> Vec<String> {
        board
            .messages
            .lock()
            .unwrap()
            .iter()
            .map(|m| m.2.clone())
            .collect()
    }

    fn thread() -> Thread {
        Thread {
            id: "t1".into(),
            platform: "board".into(),
            chat_id: "c1".into(),
        }
    }

    fn pieces(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|t| (*t).to_owned()).collect()
    }

    #[tokio::test]
    async fn a_retry_after_a_lost_response_posts_only_the_missing_pieces() {
        let board = Board::default();
        *board.lose_response_at.lock().unwrap() = Some(1);
        let mut delivery = Delivery::new("deliver:c:m:0");
        let reply = pieces(&["one", "two", "three"]);
        assert!(
            post_pieces(&board, &thread(), &reply, &delivery)
                .await
                .is_err()
        );
        assert_eq!(
            texts(&board),
            ["one", "two"],
            "the second was posted, its answer lost"
        );
        delivery.attempt = 1;
        let ids = post_pieces(&board, &thread(), &reply, &delivery)
            .await
            .unwrap();
        assert_eq!(
            texts(&board),
            ["one", "two", "three"],
            "nothing posted twice"
        );
        assert_eq!(ids, ["m0", "m1", "m2"]);
    }

    #[tokio::test]
    async fn an_edit_redraws_in_place_adds_the_extra_pieces_once_and_deletes_the_surplus() {
        let board = Board::default();
        let delivery = Delivery::new("deliver:c:m:0");
        let posted = post_pieces(&board, &thread(), &pieces(&["a", "b"]), &delivery)
            .await
            .unwrap();
        let longer = pieces(&["A", "B", "C"]);
        let grown = edit_pieces(&board, &thread(), &posted, &longer)
            .await
            .unwrap();
        assert_eq!(texts(&board), ["A", "B", "C"]);
        // The same edit again (a retry): the extra piece is found by its key, not posted again.
        let again = edit_pieces(&board, &thread(), &posted, &longer)
            .await
            .unwrap();
        assert_eq!(texts(&board), ["A", "B", "C"]);
        assert_eq!(again, grown);
        let shorter = edit_pieces(&board, &thread(), &grown, &pieces(&["x"]))
            .await
            .unwrap();
        assert_eq!(shorter, [grown[0].clone()]);
        assert_eq!(texts(&board), ["x"], "the surplus is deleted");
    }

    #[tokio::test]
    async fn a_message_that_cannot_be_edited_is_posted_anew_in_its_place() {
        let board = Board::default();
        let posted = vec!["gone".to_owned()];
        let ids = edit_pieces(&board, &thread(), &posted, &pieces(&["new"]))
            .await
            .unwrap();
        assert_eq!(texts(&board), ["new"]);
        assert_ne!(ids, posted);
        assert_eq!(
            board.messages.lock().unwrap()[0].1,
            "edit:gone:0",
            "posted under the edit's key"
        );
    }

    #[tokio::test]
    async fn files_follow_the_text_under_their_own_keys_and_are_not_posted_twice() {
        let board = Board::default();
        let files = [
            OutFile::from_bytes("f1", "image/png", "a.png", vec![1]),
            OutFile::from_bytes("f2", "text/plain", "b.txt", vec![2]),
        ];
        *board.lose_response_at.lock().unwrap() = Some(2);
        let mut delivery = Delivery::new("deliver:c:m:0");
        post_pieces(&board, &thread(), &pieces(&["text"]), &delivery)
            .await
            .unwrap();
        assert!(
            post_files(&board, &thread(), &files, 1, &delivery)
                .await
                .is_err()
        );
        delivery.attempt = 1;
        let ids = post_files(&board, &thread(), &files, 1, &delivery)
            .await
            .unwrap();
        assert_eq!(
            texts(&board),
            ["text", "[a.png, later: true]", "[b.txt, later: true]"]
        );
        assert_eq!(ids, ["m1", "m2"]);
        let keys: Vec<String> = board
            .messages
            .lock()
            .unwrap()
            .iter()
            .map(|m| m.1.clone())
            .collect();
        assert_eq!(keys[1..], ["deliver:c:m:0:file:0", "deliver:c:m:0:file:1"]);
        // A message of files alone: its first file is its first message.
        let board = Board::default();
        post_files(&board, &thread(), &files[..1], 0, &Delivery::new("k"))
            .await
            .unwrap();
        assert_eq!(texts(&board), ["[a.png, later: false]"]);
    }

    #[tokio::test]
    async fn an_empty_message_posts_nothing() {
        let board = Board::default();
        let ids = post_pieces(&board, &thread(), &[] as &[String], &Delivery::new("k"))
            .await
            .unwrap();
        assert!(ids.is_empty());
        assert!(texts(&board).is_empty());
    }
}
