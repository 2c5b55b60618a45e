//! [`RecordingTelegram`]: a [`TelegramApi`] for unit tests that records every call ([`ApiCall`])
//! and answers with canned ids, without a server.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, Ordering};

use async_trait::async_trait;
use chrono::DateTime;
use teloxide::types::{ChatId, InlineKeyboardMarkup, MessageId, ParseMode, ReplyMarkup, ThreadId};

use crate::Error;
use crate::client::{SendTo, SentMessage, TelegramApi, Upload, UploadKind};

/// One call [`RecordingTelegram`] recorded.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ApiCall {
    /// `sendMessage`.
    SendMessage {
        /// The chat.
        chat: ChatId,
        /// The forum topic.
        topic: Option<ThreadId>,
        /// The text.
        text: String,
        /// The keyboard or ForceReply.
        markup: Option<ReplyMarkup>,
        /// The message replied to.
        reply_to: Option<MessageId>,
        /// `HTML` for a formatted message, else none (plain text).
        parse_mode: Option<ParseMode>,
    },
    /// `editMessageText` with `parse_mode` `HTML` ([`TelegramApi::edit_html`]).
    EditHtml {
        /// The chat.
        chat: ChatId,
        /// The message.
        id: MessageId,
        /// The new HTML.
        html: String,
        /// The keyboard after the edit.
        keyboard: Option<InlineKeyboardMarkup>,
    },
    /// `editMessageReplyMarkup`.
    EditMessageReplyMarkup {
        /// The chat.
        chat: ChatId,
        /// The message.
        id: MessageId,
        /// The new keyboard.
        markup: Option<InlineKeyboardMarkup>,
    },
    /// `answerCallbackQuery`.
    AnswerCallbackQuery {
        /// The callback query.
        id: String,
        /// The notice.
        text: Option<String>,
    },
    /// `setMessageReaction` with one emoji.
    SetReaction {
        /// The chat.
        chat: ChatId,
        /// The message.
        id: MessageId,
        /// The emoji.
        emoji: String,
    },
    /// `sendChatAction` `typing`.
    Typing {
        /// The chat.
        chat: ChatId,
        /// The forum topic.
        topic: Option<ThreadId>,
    },
    /// `sendPhoto` / `sendDocument` of an upload ([`TelegramApi::send_file`]).
    SendFile {
        /// The chat.
        chat: ChatId,
        /// The forum topic.
        topic: Option<ThreadId>,
        /// As a photo or as a document.
        kind: UploadKind,
        /// The file name.
        filename: String,
        /// The media type.
        media_type: String,
        /// The bytes the upload's stream yielded.
        bytes: Vec<u8>,
        /// The message replied to.
        reply_to: Option<MessageId>,
        /// Sent with `disable_notification`.
        silent: bool,
    },
    /// `sendMessageDraft`.
    SendDraft {
        /// The private chat.
        chat: ChatId,
        /// The draft.
        draft_id: u32,
        /// Its HTML.
        html: String,
    },
}

/// A [`TelegramApi`] that calls nothing: it records every call and answers `sendMessage` (and
/// an upload, whose stream it reads whole) with message ids 100, 101, … dated 2026-01-01T00:00:00Z. For unit tests of the hooks; the fake Bot API
/// (`testing`, feature `testing`) tests them over HTTP through teloxide.
#[derive(Debug)]
pub struct RecordingTelegram {
    calls: Mutex<Vec<ApiCall>>,
    next_id: AtomicI32,
}

impl Default for RecordingTelegram {
    fn default() -> Self {
        Self {
            calls: Mutex::default(),
            next_id: AtomicI32::new(100),
        }
    }
}

impl RecordingTelegram {
    /// A recorder with no calls yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<ApiCall> {
        self.calls.lock().expect("not poisoned").clone()
    }

    fn record(&self, call: ApiCall) {
        self.calls.lock().expect("not poisoned").push(call);
    }

    /// The next message id, dated 2026-01-01T00:00:00Z.
    fn sent(&self, chat: ChatId) -> SentMessage {
        SentMessage {
            chat,
            id: MessageId(self.next_id.fetch_add(1, Ordering::SeqCst)),
            date: DateTime::from_timestamp(1_767_225_600, 0).unwrap_or_default(),
        }
    }
}

#[async_trait]
impl TelegramApi for RecordingTelegram {
    async fn send_message(
        &self,
        to: SendTo,
        text: &str,
        parse_mode: Option<ParseMode>,
        markup: Option<ReplyMarkup>,
    ) -> Result<SentMessage, Error> {
        self.record(ApiCall::SendMessage {
            chat: to.chat,
            topic: to.topic,
            text: text.to_owned(),
            markup,
            reply_to: to.reply_to,
            parse_mode,
        });
        Ok(self.sent(to.chat))
    }

    async fn edit_html(
        &self,
        chat: ChatId,
        id: MessageId,
        html: &str,
        keyboard: Option<InlineKeyboardMarkup>,
    ) -> Result<(), Error> {
        self.record(ApiCall::EditHtml {
            chat,
            id,
            html: html.to_owned(),
            keyboard,
        });
        Ok(())
    }

    async fn edit_message_reply_markup(
        &self,
        chat: ChatId,
        id: MessageId,
        markup: Option<InlineKeyboardMarkup>,
    ) -> Result<(), Error> {
        self.record(ApiCall::EditMessageReplyMarkup { chat, id, markup });
        Ok(())
    }

    async fn answer_callback_query(&self, id: &str, text: Option<&str>) -> Result<(), Error> {
        self.record(ApiCall::AnswerCallbackQuery {
            id: id.to_owned(),
            text: text.map(str::to_owned),
        });
        Ok(())
    }

    async fn set_reaction(&self, chat: ChatId, id: MessageId, emoji: &str) -> Result<(), Error> {
        self.record(ApiCall::SetReaction {
            chat,
            id,
            emoji: emoji.to_owned(),
        });
        Ok(())
    }

    async fn typing(&self, chat: ChatId, topic: Option<ThreadId>) -> Result<(), Error> {
        self.record(ApiCall::Typing { chat, topic });
        Ok(())
    }

    async fn send_draft(
        &self,
        chat: ChatId,
        _topic: Option<ThreadId>,
        draft_id: u32,
        html: &str,
    ) -> Result<(), Error> {
        self.record(ApiCall::SendDraft {
            chat,
            draft_id,
            html: html.to_owned(),
        });
        Ok(())
    }

    async fn send_file(&self, to: SendTo, upload: Upload) -> Result<SentMessage, Error> {
        let SendTo {
            chat,
            topic,
            reply_to,
            silent,
        } = to;
        use futures::StreamExt;
        let method = upload.kind.method();
        let mut bytes = Vec::new();
        let mut stream = upload.bytes;
        while let Some(piece) = stream.next().await {
            let piece = piece.map_err(|e| Error::Api {
                method,
                message: format!("the upload's bytes could not be read: {e}"),
            })?;
            bytes.extend_from_slice(&piece);
        }
        self.record(ApiCall::SendFile {
            chat,
            topic,
            kind: upload.kind,
            filename: upload.filename,
            media_type: upload.media_type,
            bytes,
            reply_to,
            silent,
        });
        Ok(self.sent(chat))
    }
}
