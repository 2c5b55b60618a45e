//! [`TelegramApi`]: the few Bot API calls the question hooks make; their implementation on
//! teloxide's [`Bot`], which waits out `429 Too Many Requests` (`retry_after`) and tries again; and
//! [`RecordingTelegram`], which records the calls and answers with canned ids (for unit tests).

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, Ordering};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use teloxide::payloads::{
    AnswerCallbackQuerySetters, EditMessageReplyMarkupSetters, EditMessageTextSetters,
    SendChatActionSetters, SendMessageSetters, SetMessageReactionSetters,
};
use teloxide::requests::{Request, Requester};
use teloxide::types::{
    CallbackQueryId, ChatAction, ChatId, InlineKeyboardMarkup, MessageId, ParseMode, ReactionType,
    ReplyMarkup, ReplyParameters, Seconds, ThreadId,
};
use teloxide::{ApiError, Bot, RequestError};

use crate::Error;

/// How many times a call is tried in all when Telegram keeps answering `429`.
pub const MAX_ATTEMPTS: u32 = 4;

/// A message the bot posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentMessage {
    /// Its chat.
    pub chat: ChatId,
    /// Its id in the chat.
    pub id: MessageId,
    /// When Telegram posted it.
    pub date: DateTime<Utc>,
}

/// The Bot API calls the question hooks need.
#[async_trait]
pub trait TelegramApi: Send + Sync {
    /// `sendMessage`, in a forum topic when `topic` is set, replying to `reply_to` when set.
    async fn send_message(
        &self,
        chat: ChatId,
        topic: Option<ThreadId>,
        text: &str,
        markup: Option<ReplyMarkup>,
        reply_to: Option<MessageId>,
    ) -> Result<SentMessage, Error>;

    /// `sendMessage` of `html` with `parse_mode` `HTML` (as [`crate::format`] writes it), in a
    /// forum topic when `topic` is set, replying to `reply_to` when set; no keyboard.
    async fn send_html(
        &self,
        chat: ChatId,
        topic: Option<ThreadId>,
        html: &str,
        reply_to: Option<MessageId>,
    ) -> Result<SentMessage, Error>;

    /// `sendMessage` of `html` with `parse_mode` `HTML` and the inline keyboard `keyboard` (a
    /// streamed reply's Stop button), in a forum topic when `topic` is set, replying to
    /// `reply_to` when set.
    async fn send_html_keyboard(
        &self,
        chat: ChatId,
        topic: Option<ThreadId>,
        html: &str,
        keyboard: Option<InlineKeyboardMarkup>,
        reply_to: Option<MessageId>,
    ) -> Result<SentMessage, Error>;

    /// `editMessageText` of `html` with `parse_mode` `HTML`: `keyboard` is the message's inline
    /// keyboard after the edit (`None`: none, as Telegram drops the keyboard of a text edit that
    /// carries no `reply_markup`). "message is not modified" counts as done.
    async fn edit_html(
        &self,
        chat: ChatId,
        id: MessageId,
        html: &str,
        keyboard: Option<InlineKeyboardMarkup>,
    ) -> Result<(), Error>;

    /// `editMessageText`; `markup` replaces the inline keyboard (an empty one removes it).
    async fn edit_message_text(
        &self,
        chat: ChatId,
        id: MessageId,
        text: &str,
        markup: Option<InlineKeyboardMarkup>,
    ) -> Result<(), Error>;

    /// `editMessageReplyMarkup`; `None` removes the keyboard.
    async fn edit_message_reply_markup(
        &self,
        chat: ChatId,
        id: MessageId,
        markup: Option<InlineKeyboardMarkup>,
    ) -> Result<(), Error>;

    /// `answerCallbackQuery`, showing `text` as a notice when set.
    async fn answer_callback_query(&self, id: &str, text: Option<&str>) -> Result<(), Error>;

    /// `setMessageReaction` with the one reaction `emoji` (from Telegram's list), which replaces
    /// the bot's reaction on the message before.
    async fn set_reaction(&self, chat: ChatId, id: MessageId, emoji: &str) -> Result<(), Error>;

    /// `sendChatAction` `typing` (shown 5 seconds), in a forum topic when `topic` is set.
    async fn typing(&self, chat: ChatId, topic: Option<ThreadId>) -> Result<(), Error>;

    /// `sendMessageDraft` (Bot API 9.3): shows `html` (`parse_mode` `HTML`) as the draft
    /// `draft_id` of a reply being written in the private chat `chat` — an ephemeral preview that
    /// the message sent at the end replaces. Refused where the bot may not draft.
    async fn send_draft(
        &self,
        chat: ChatId,
        topic: Option<ThreadId>,
        draft_id: u32,
        html: &str,
    ) -> Result<(), Error>;
}

/// Runs a request, waiting out `retry_after` on `429` up to [`MAX_ATTEMPTS`] tries in all.
async fn with_retry<T, F, Fut>(method: &'static str, mut call: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, RequestError>>,
{
    let mut attempt = 1;
    loop {
        match call().await {
            Ok(v) => return Ok(v),
            Err(RequestError::RetryAfter(wait)) if attempt < MAX_ATTEMPTS => {
                tracing::warn!(
                    method,
                    seconds = wait.seconds(),
                    "Telegram rate limit, retrying"
                );
                tokio::time::sleep(wait.duration()).await;
                attempt += 1;
            }
            Err(e) => {
                return Err(Error::Api {
                    method,
                    message: e.to_string(),
                });
            }
        }
    }
}

/// Editing a message to what it already shows is not a failure.
fn ignore_not_modified<T>(r: Result<T, Error>) -> Result<(), Error> {
    match r {
        Ok(_) => Ok(()),
        Err(Error::Api { message, .. })
            if message.contains(&ApiError::MessageNotModified.to_string()) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

#[async_trait]
impl TelegramApi for Bot {
    async fn send_message(
        &self,
        chat: ChatId,
        topic: Option<ThreadId>,
        text: &str,
        markup: Option<ReplyMarkup>,
        reply_to: Option<MessageId>,
    ) -> Result<SentMessage, Error> {
        let mut req = Requester::send_message(self, chat, text);
        if let Some(t) = topic {
            req = req.message_thread_id(t);
        }
        if let Some(m) = markup {
            req = req.reply_markup(m);
        }
        if let Some(r) = reply_to {
            req = req.reply_parameters(ReplyParameters::new(r).allow_sending_without_reply());
        }
        let m = with_retry("sendMessage", || req.send_ref()).await?;
        Ok(SentMessage {
            chat: m.chat.id,
            id: m.id,
            date: m.date,
        })
    }

    async fn send_html(
        &self,
        chat: ChatId,
        topic: Option<ThreadId>,
        html: &str,
        reply_to: Option<MessageId>,
    ) -> Result<SentMessage, Error> {
        let mut req = Requester::send_message(self, chat, html).parse_mode(ParseMode::Html);
        if let Some(t) = topic {
            req = req.message_thread_id(t);
        }
        if let Some(r) = reply_to {
            req = req.reply_parameters(ReplyParameters::new(r).allow_sending_without_reply());
        }
        let m = with_retry("sendMessage", || req.send_ref()).await?;
        Ok(SentMessage {
            chat: m.chat.id,
            id: m.id,
            date: m.date,
        })
    }

    async fn send_html_keyboard(
        &self,
        chat: ChatId,
        topic: Option<ThreadId>,
        html: &str,
        keyboard: Option<InlineKeyboardMarkup>,
        reply_to: Option<MessageId>,
    ) -> Result<SentMessage, Error> {
        let mut req = Requester::send_message(self, chat, html).parse_mode(ParseMode::Html);
        if let Some(t) = topic {
            req = req.message_thread_id(t);
        }
        if let Some(k) = keyboard {
            req = req.reply_markup(ReplyMarkup::InlineKeyboard(k));
        }
        if let Some(r) = reply_to {
            req = req.reply_parameters(ReplyParameters::new(r).allow_sending_without_reply());
        }
        let m = with_retry("sendMessage", || req.send_ref()).await?;
        Ok(SentMessage {
            chat: m.chat.id,
            id: m.id,
            date: m.date,
        })
    }

    async fn edit_html(
        &self,
        chat: ChatId,
        id: MessageId,
        html: &str,
        keyboard: Option<InlineKeyboardMarkup>,
    ) -> Result<(), Error> {
        let mut req =
            Requester::edit_message_text(self, chat, id, html).parse_mode(ParseMode::Html);
        if let Some(k) = keyboard {
            req = req.reply_markup(k);
        }
        ignore_not_modified(with_retry("editMessageText", || req.send_ref()).await)
    }

    async fn edit_message_text(
        &self,
        chat: ChatId,
        id: MessageId,
        text: &str,
        markup: Option<InlineKeyboardMarkup>,
    ) -> Result<(), Error> {
        let mut req = Requester::edit_message_text(self, chat, id, text);
        if let Some(m) = markup {
            req = req.reply_markup(m);
        }
        ignore_not_modified(with_retry("editMessageText", || req.send_ref()).await)
    }

    async fn edit_message_reply_markup(
        &self,
        chat: ChatId,
        id: MessageId,
        markup: Option<InlineKeyboardMarkup>,
    ) -> Result<(), Error> {
        let mut req = Requester::edit_message_reply_markup(self, chat, id);
        if let Some(m) = markup {
            req = req.reply_markup(m);
        }
        ignore_not_modified(with_retry("editMessageReplyMarkup", || req.send_ref()).await)
    }

    async fn answer_callback_query(&self, id: &str, text: Option<&str>) -> Result<(), Error> {
        let mut req = Requester::answer_callback_query(self, CallbackQueryId(id.to_owned()));
        if let Some(t) = text {
            req = req.text(t);
        }
        with_retry("answerCallbackQuery", || req.send_ref()).await?;
        Ok(())
    }

    async fn set_reaction(&self, chat: ChatId, id: MessageId, emoji: &str) -> Result<(), Error> {
        let req =
            Requester::set_message_reaction(self, chat, id).reaction(vec![ReactionType::Emoji {
                emoji: emoji.to_owned(),
            }]);
        with_retry("setMessageReaction", || req.send_ref()).await?;
        Ok(())
    }

    async fn typing(&self, chat: ChatId, topic: Option<ThreadId>) -> Result<(), Error> {
        let mut req = Requester::send_chat_action(self, chat, ChatAction::Typing);
        if let Some(t) = topic {
            req = req.message_thread_id(t);
        }
        // Not retried: the next one is due in a few seconds anyway.
        req.send().await.map_err(|e| Error::Api {
            method: "sendChatAction",
            message: e.to_string(),
        })?;
        Ok(())
    }

    /// teloxide 0.17 has no `sendMessageDraft`: the same JSON request teloxide makes, through
    /// the bot's own HTTP client and API URL, its answer read into teloxide's errors so
    /// [`with_retry`] waits out `retry_after` as for every call.
    async fn send_draft(
        &self,
        chat: ChatId,
        topic: Option<ThreadId>,
        draft_id: u32,
        html: &str,
    ) -> Result<(), Error> {
        const METHOD: &str = "sendMessageDraft";
        let mut url = self.api_url();
        url.path_segments_mut()
            .map_err(|()| Error::Api {
                method: METHOD,
                message: "the API URL cannot take a path".into(),
            })?
            .push(&format!("bot{}", self.token()))
            .push(METHOD);
        let mut body = serde_json::json!({
            "chat_id": chat.0, "draft_id": draft_id, "text": html, "parse_mode": "HTML"
        });
        if let Some(t) = topic {
            body["message_thread_id"] = t.0.0.into();
        }
        with_retry(METHOD, || async {
            let answer: serde_json::Value = self
                .client()
                .post(url.clone())
                .json(&body)
                .send()
                .await?
                .json()
                .await?;
            if answer["ok"] == true {
                return Ok(());
            }
            if let Some(seconds) = answer["parameters"]["retry_after"].as_u64() {
                let seconds = u32::try_from(seconds).unwrap_or(u32::MAX);
                return Err(RequestError::RetryAfter(Seconds::from_seconds(seconds)));
            }
            let description = answer["description"].clone();
            Err(RequestError::Api(
                serde_json::from_value(description)
                    .unwrap_or_else(|_| ApiError::Unknown("refused without a description".into())),
            ))
        })
        .await
    }
}

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
        /// `HTML` for a formatted reply ([`TelegramApi::send_html`]), else none (plain text).
        parse_mode: Option<ParseMode>,
    },
    /// `editMessageText`.
    EditMessageText {
        /// The chat.
        chat: ChatId,
        /// The message.
        id: MessageId,
        /// The new text.
        text: String,
        /// The new keyboard.
        markup: Option<InlineKeyboardMarkup>,
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

/// A [`TelegramApi`] that calls nothing: it records every call and answers `sendMessage` with
/// message ids 100, 101, … dated 2026-01-01T00:00:00Z. For unit tests of the hooks; the fake Bot API
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
        chat: ChatId,
        topic: Option<ThreadId>,
        text: &str,
        markup: Option<ReplyMarkup>,
        reply_to: Option<MessageId>,
    ) -> Result<SentMessage, Error> {
        self.record(ApiCall::SendMessage {
            chat,
            topic,
            text: text.to_owned(),
            markup,
            reply_to,
            parse_mode: None,
        });
        Ok(self.sent(chat))
    }

    async fn send_html(
        &self,
        chat: ChatId,
        topic: Option<ThreadId>,
        html: &str,
        reply_to: Option<MessageId>,
    ) -> Result<SentMessage, Error> {
        self.record(ApiCall::SendMessage {
            chat,
            topic,
            text: html.to_owned(),
            markup: None,
            reply_to,
            parse_mode: Some(ParseMode::Html),
        });
        Ok(self.sent(chat))
    }

    async fn send_html_keyboard(
        &self,
        chat: ChatId,
        topic: Option<ThreadId>,
        html: &str,
        keyboard: Option<InlineKeyboardMarkup>,
        reply_to: Option<MessageId>,
    ) -> Result<SentMessage, Error> {
        self.record(ApiCall::SendMessage {
            chat,
            topic,
            text: html.to_owned(),
            markup: keyboard.map(ReplyMarkup::InlineKeyboard),
            reply_to,
            parse_mode: Some(ParseMode::Html),
        });
        Ok(self.sent(chat))
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

    async fn edit_message_text(
        &self,
        chat: ChatId,
        id: MessageId,
        text: &str,
        markup: Option<InlineKeyboardMarkup>,
    ) -> Result<(), Error> {
        self.record(ApiCall::EditMessageText {
            chat,
            id,
            text: text.to_owned(),
            markup,
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
}
