//! [`TelegramApi`]: the few Bot API calls the question hooks make, and their implementation on
//! teloxide's [`Bot`]. A recording implementation for unit tests is `testing::RecordingTelegram`
//! (feature `testing`).
//!
//! Every Bot API call goes through [`request`]: teloxide's typed payloads, posted as JSON through
//! the bot's own HTTP client and API URL, the answer read here rather than by teloxide, because
//! teloxide 0.17's `RequestError` keeps neither the HTTP status nor `error_code` (a `500` whose
//! body is no JSON is an `InvalidJson`), and it sleeps 10 seconds before reading any `5xx`. A
//! failure worth retrying is an [`Error::Unavailable`] carrying a [`Transient`]: a `429` (with
//! Telegram's `parameters.retry_after`), a `5xx`, a network failure (marked
//! [`Transient::maybe_done`] when the request may have reached Telegram: a timeout or a reset
//! after it was sent). Anything else Telegram refuses is a permanent [`Error::Api`].
//!
//! The [`TelegramApi`] calls on [`Bot`] retry by themselves ([`with_retry`]): at most
//! [`MAX_ATTEMPTS`] tries, waiting Telegram's `retry_after` (or a short backoff after a `5xx` or a
//! network failure); a `retry_after` over [`MAX_WAIT`] (60 s) is not waited here: the call fails
//! with it, for its caller to schedule. A `sendMessage` whose answer was lost may be repeated:
//! Telegram has no idempotency key, so its messages are delivered at least once. The reply
//! outbox does not retry in-process: [`send_html_once`] hands the `Transient` to the engine's
//! durable delivery, which retries with the same key.
//!
//! Files ([`TelegramApi::send_file`]): `sendPhoto` / `sendDocument` as multipart/form-data, the
//! bytes streamed with their length through the bot's own HTTP client, the answer read as every
//! other call's; at most [`MAX_UPLOAD`] (50 MB), a photo at most [`MAX_PHOTO`] (10 MB).

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use frogbot_model::Transient;
use serde::Serialize;
use serde::de::DeserializeOwned;
use teloxide::Bot;
use teloxide::payloads::{
    AnswerCallbackQuery, EditMessageReplyMarkup, EditMessageText, EditMessageTextSetters,
    SendChatAction, SendMessage, SetMessageReaction, SetMessageReactionSetters,
};
use teloxide::requests::Payload;
use teloxide::types::{
    CallbackQueryId, ChatAction, ChatId, InlineKeyboardMarkup, Message, MessageId, ParseMode,
    ReactionType, ReplyMarkup, ReplyParameters, ThreadId,
};

use crate::Error;
use crate::render::AgentPiece;
use frogbot_channel::RetryPolicy;
use frogbot_channel::retry::Failure;

/// How many times a call the adapter retries by itself is tried in all.
pub const MAX_ATTEMPTS: u32 = 4;
/// The longest `retry_after` a retried call waits in-process; a longer one fails the call with
/// the [`Transient`] carrying it.
pub const MAX_WAIT: Duration = Duration::from_secs(60);
/// The first wait after a `5xx` or a network failure (doubled per attempt) when Telegram gave no
/// `retry_after`.
pub const BACKOFF: Duration = Duration::from_millis(500);

/// The calls the adapter retries by itself, on frogbot-channel's one policy.
pub const RETRY: RetryPolicy = RetryPolicy {
    attempts: MAX_ATTEMPTS,
    min_delay: BACKOFF,
    max_delay: Duration::from_secs(8),
    max_wait: MAX_WAIT,
    jitter: false,
};

/// The largest file a bot may upload through the Bot API, 50 MB (Telegram's "Sending files":
/// "10 MB max size for photos, 50 MB for other files"; a local Bot API server takes up to
/// 2,000 MB, see `TelegramOutbox::with_max_upload`).
pub const MAX_UPLOAD: u64 = 50 * 1024 * 1024;
/// The largest photo `sendPhoto` takes, 10 MB; a larger picture is sent as a document.
pub const MAX_PHOTO: u64 = 10 * 1024 * 1024;

/// How a file is uploaded: the Bot API method and the field that carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UploadKind {
    /// `sendPhoto` (field `photo`): shown as a picture (Telegram re-encodes it and keeps no
    /// file name).
    Photo,
    /// `sendDocument` (field `document`): a file with its name and media type.
    Document,
}

impl UploadKind {
    /// The Bot API method.
    pub fn method(self) -> &'static str {
        match self {
            UploadKind::Photo => "sendPhoto",
            UploadKind::Document => "sendDocument",
        }
    }

    /// The multipart field that carries the file.
    pub fn field(self) -> &'static str {
        match self {
            UploadKind::Photo => "photo",
            UploadKind::Document => "document",
        }
    }
}

/// A file to upload ([`TelegramApi::send_file`]): its bytes as they are read, their count, its
/// name and media type.
pub struct Upload {
    /// As a photo or as a document.
    pub kind: UploadKind,
    /// The file name Telegram keeps for a document.
    pub filename: String,
    /// The media type (the part's `Content-Type`), e.g. `image/png`.
    pub media_type: String,
    /// How many bytes `bytes` yields.
    pub size: u64,
    /// The bytes, streamed into the request's body.
    pub bytes: frogbot_channel::FileStream,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload")
            .field("kind", &self.kind)
            .field("filename", &self.filename)
            .field("media_type", &self.media_type)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

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

impl From<Message> for SentMessage {
    fn from(m: Message) -> Self {
        SentMessage {
            chat: m.chat.id,
            id: m.id,
            date: m.date,
        }
    }
}

/// Where a message is sent and how: its chat, its forum topic (when set), the message it replies
/// to (when set, `allow_sending_without_reply`) and whether it goes with `disable_notification`
/// (silent: every message of a reply or a question after its first — a person is notified once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendTo {
    /// The chat.
    pub chat: ChatId,
    /// The forum topic.
    pub topic: Option<ThreadId>,
    /// The message replied to.
    pub reply_to: Option<MessageId>,
    /// Sent with `disable_notification`.
    pub silent: bool,
}

impl SendTo {
    /// A message in `chat` (in the forum topic `topic` when set), replying to nothing, notifying.
    pub fn new(chat: ChatId, topic: Option<ThreadId>) -> Self {
        Self {
            chat,
            topic,
            reply_to: None,
            silent: false,
        }
    }

    /// Replying to `reply_to` (when set).
    pub fn replying(self, reply_to: Option<MessageId>) -> Self {
        Self { reply_to, ..self }
    }

    /// With `disable_notification` when `silent`.
    pub fn silent(self, silent: bool) -> Self {
        Self { silent, ..self }
    }

    /// The parameters every kind of message takes (`chat_id`, `message_thread_id`,
    /// `disable_notification`, `reply_parameters`), each as its JSON value; those left unset
    /// are not sent.
    fn params(&self) -> Vec<(&'static str, serde_json::Value)> {
        let mut params = vec![("chat_id", self.chat.0.into())];
        if let Some(t) = self.topic {
            params.push(("message_thread_id", t.0.0.into()));
        }
        if self.silent {
            params.push(("disable_notification", true.into()));
        }
        if let Some(r) = self.reply_to {
            params.push((
                "reply_parameters",
                serde_json::json!({"message_id": r.0, "allow_sending_without_reply": true}),
            ));
        }
        params
    }

    /// `body` (a JSON object) with [`SendTo::params`].
    fn into_body(self, mut body: serde_json::Value) -> serde_json::Value {
        for (name, value) in self.params() {
            body[name] = value;
        }
        body
    }
}

/// The Bot API calls the question hooks need.
#[async_trait]
pub trait TelegramApi: Send + Sync {
    /// `sendMessage` of `text` to `to`: Telegram's HTML when `parse_mode` is `HTML` (as
    /// [`crate::format`] writes it), else plain text; with `markup` when set (a question's inline
    /// keyboard, a prompt's ForceReply, a streamed reply's Stop button).
    async fn send_message(
        &self,
        to: SendTo,
        text: &str,
        parse_mode: Option<ParseMode>,
        markup: Option<ReplyMarkup>,
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

    /// `sendPhoto` or `sendDocument` of `upload` as multipart/form-data, to `to`.
    /// Not retried (its bytes are read once): a failure worth retrying is a [`Transient`] for
    /// the caller, who opens the file again.
    async fn send_file(&self, to: SendTo, upload: Upload) -> Result<SentMessage, Error>;
}

/// One Bot API call: `POST {api_url}bot{token}/{method}` with `body` as JSON (as teloxide sends
/// it), through the bot's HTTP client (`timeout`: this request's own, e.g. a long poll's), its
/// `result` read as `T`. Failures are classified as the module says.
pub async fn request<T: DeserializeOwned>(
    bot: &Bot,
    method: &'static str,
    body: &(impl Serialize + ?Sized),
    timeout: Option<Duration>,
) -> Result<T, Error> {
    let mut req = bot.client().post(method_url(bot, method)?).json(body);
    if let Some(t) = timeout {
        req = req.timeout(t);
    }
    answer(method, req).await
}

/// `{api_url}bot{token}/{method}`.
fn method_url(bot: &Bot, method: &'static str) -> Result<reqwest012::Url, Error> {
    let mut url = bot.api_url();
    url.path_segments_mut()
        .map_err(|()| Error::Api {
            method,
            message: "the API URL cannot take a path".into(),
        })?
        .pop_if_empty()
        .push(&format!("bot{}", bot.token()))
        .push(method);
    Ok(url)
}

/// Sends `req` (a call of `method`) and reads Telegram's answer as `T`, failures classified as
/// the module says.
async fn answer<T: DeserializeOwned>(
    method: &'static str,
    req: reqwest012::RequestBuilder,
) -> Result<T, Error> {
    let api = |message: String| Error::Api { method, message };
    let unavailable = |source: Transient| Error::Unavailable { method, source };
    let response = req.send().await.map_err(|e| {
        frogbot_channel::metrics::platform_call(
            "telegram",
            method,
            if e.is_timeout() { "timeout" } else { "network" },
        );
        // Refused before anything was sent (no connection): not done. Anything later (a timeout,
        // a reset while waiting for the answer) may have reached Telegram.
        let (failure, why) = if e.is_connect() {
            (Failure::NotSent, "could not connect to the Bot API")
        } else {
            (Failure::MaybeDone, "no answer from the Bot API")
        };
        unavailable(failure.mark(Transient::from_source(why, e)))
    })?;
    let status = response.status().as_u16();
    frogbot_channel::metrics::platform_call("telegram", method, &status.to_string());
    let text = response.text().await.map_err(|e| {
        let cut = Transient::from_source("the Bot API's answer was cut off", e);
        unavailable(Failure::MaybeDone.mark(cut))
    })?;
    // An answer of the Bot API (`{"ok": true, "result": …}` or `{"ok": false, "error_code",
    // "description", "parameters": {"retry_after"}}`) with its HTTP status.
    let answer: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        // A proxy's HTML error page, say.
        Err(e) => {
            let why = || Transient::new(format!("the Bot API answered {status}"));
            return Err(match Failure::status(status).transient(why) {
                Some(t) => unavailable(t),
                None => api(format!("unreadable answer ({status}): {e}")),
            });
        }
    };
    if answer["ok"] == true {
        return serde_json::from_value(answer["result"].clone())
            .map_err(|e| api(format!("unreadable result: {e}")));
    }
    let code = answer["error_code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(status);
    let description = answer["description"]
        .as_str()
        .map_or_else(|| format!("refused with {code}"), str::to_owned);
    let wait = answer["parameters"]["retry_after"]
        .as_u64()
        .map(Duration::from_secs);
    // Worth retrying by Telegram's `error_code` or by the HTTP status.
    let failure = [code, status]
        .map(|status| Failure::Refused { status, wait })
        .into_iter()
        .find(|f| f.retryable());
    Err(match failure {
        Some(f) => unavailable(f.mark(Transient::new(description))),
        None => api(description),
    })
}

/// One typed call (`P::NAME` with the payload as its JSON body).
async fn call<P>(bot: &Bot, payload: &P) -> Result<P::Output, Error>
where
    P: Payload + Serialize,
    P::Output: DeserializeOwned,
{
    request(bot, P::NAME, payload, None).await
}

impl Error {
    /// The [`Transient`] this error carries (a call worth retrying), if any.
    pub fn transient(&self) -> Option<&Transient> {
        match self {
            Error::Unavailable { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Runs a call, trying again after a failure worth retrying up to [`MAX_ATTEMPTS`] tries in all:
/// waiting Telegram's `retry_after` (a longer one than [`MAX_WAIT`] is not waited: the call fails
/// with it), else [`BACKOFF`] doubled per attempt.
pub async fn with_retry<T, F, Fut>(method: &'static str, call: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    RETRY
        .run(true, call, Error::transient, |e, wait| {
            tracing::warn!(method, ?wait, error = %e, "Telegram call failed; retrying");
            if e.transient().is_some_and(|t| t.wait().is_some()) {
                // Telegram sends `retry_after` only with a 429.
                frogbot_channel::metrics::platform_rate_limit_wait("telegram");
            }
        })
        .await
}

/// `r`, a refusal whose description contains one of `harmless` counting as done (editing a
/// message to what it shows, deleting one already gone, pinning one pinned).
fn done_unless_refused<T>(r: Result<T, Error>, harmless: &[&str]) -> Result<(), Error> {
    match r {
        Ok(_) => Ok(()),
        Err(e) if refused_with(&e, harmless) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether `e` is Telegram refusing the call with a description containing one of `phrases`.
fn refused_with(e: &Error, phrases: &[&str]) -> bool {
    matches!(e, Error::Api { message, .. } if phrases.iter().any(|p| message.contains(p)))
}

/// "message is not modified": an edit to what the message shows already.
const NOT_MODIFIED: &str = "message is not modified";

/// One call of `method` with the JSON `body`, retried in-process ([`with_retry`]).
async fn call_json(
    bot: &Bot,
    method: &'static str,
    body: &serde_json::Value,
) -> Result<serde_json::Value, Error> {
    with_retry(method, || request(bot, method, body, None)).await
}

/// The `sendMessage` of `text` to `to`, in `parse_mode` when set, with `markup` when set.
fn message_request(
    to: SendTo,
    text: &str,
    parse_mode: Option<ParseMode>,
    markup: Option<ReplyMarkup>,
) -> SendMessage {
    let mut req = SendMessage::new(to.chat, text);
    req.parse_mode = parse_mode;
    req.message_thread_id = to.topic;
    req.reply_parameters = to
        .reply_to
        .map(|r| ReplyParameters::new(r).allow_sending_without_reply());
    req.disable_notification = to.silent.then_some(true);
    req.reply_markup = markup;
    req
}

/// One `sendMessage` of `html` (`parse_mode` `HTML`) to `to`, not retried: what the reply outbox
/// posts each piece with (its failure goes back to the engine's durable delivery).
pub async fn send_html_once(bot: &Bot, to: SendTo, html: &str) -> Result<SentMessage, Error> {
    let req = message_request(to, html, Some(ParseMode::Html), None);
    Ok(call(bot, &req).await?.into())
}

/// The request of a piece of an agent message, as a new message (`edit`: false) or as the edit of
/// one: `sendMessage` / `editMessageText` (`parse_mode` `HTML`) of a text piece; `sendPhoto` (the
/// URL, for Telegram to fetch; the alt as the caption) / `editMessageMedia` with an
/// `InputMediaPhoto` (which also turns a text message into a photo) of an image; the piece's
/// keyboard as `reply_markup` (in an edit, none: the buttons go). The method and the JSON body,
/// without where it goes.
fn piece_request(piece: &AgentPiece, edit: bool) -> (&'static str, serde_json::Value) {
    let (method, mut body) = match piece {
        AgentPiece::Text { html, .. } => (
            if edit {
                "editMessageText"
            } else {
                "sendMessage"
            },
            serde_json::json!({"text": html, "parse_mode": "HTML"}),
        ),
        AgentPiece::Photo { url, caption, .. } => {
            let mut photo = match edit {
                true => serde_json::json!({"type": "photo", "media": url}),
                false => serde_json::json!({"photo": url}),
            };
            if !caption.is_empty() {
                photo["caption"] = caption.clone().into();
                photo["parse_mode"] = "HTML".into();
            }
            match edit {
                true => ("editMessageMedia", serde_json::json!({"media": photo})),
                false => ("sendPhoto", photo),
            }
        }
    };
    if let Some(k) = piece.keyboard() {
        body["reply_markup"] = serde_json::to_value(k).unwrap_or_default();
    }
    (method, body)
}

/// Sends one piece of an agent message to `to` (`piece_request`), not retried here: a failure
/// goes back to the engine's durable delivery.
pub async fn send_piece_once(
    bot: &Bot,
    to: SendTo,
    piece: &AgentPiece,
) -> Result<SentMessage, Error> {
    let (method, body) = piece_request(piece, false);
    let m: Message = request(bot, method, &to.into_body(body), None).await?;
    Ok(m.into())
}

/// What an edit of a piece came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edited {
    /// Message is drawn as the piece now (or was already: "message is not modified").
    Done,
    /// The message cannot show the piece (a photo cannot become text: "there is no text in the
    /// message to edit") or is gone ("message to edit not found"): post it anew.
    Replace,
}

/// Redraws message `id` as `piece` (`piece_request`), retried in-process like the question
/// calls (an edit is idempotent). Edits never notify.
pub async fn edit_piece(
    bot: &Bot,
    chat: ChatId,
    id: MessageId,
    piece: &AgentPiece,
) -> Result<Edited, Error> {
    const CANNOT_SHOW: &[&str] = &[
        "there is no text in the message to edit",
        "message to edit not found",
    ];
    let (method, mut body) = piece_request(piece, true);
    body["chat_id"] = chat.0.into();
    body["message_id"] = id.0.into();
    match call_json(bot, method, &body).await {
        Err(e) if refused_with(&e, CANNOT_SHOW) => Ok(Edited::Replace),
        r => done_unless_refused(r, &[NOT_MODIFIED]).map(|()| Edited::Done),
    }
}

/// `deleteMessage`; a message already gone ("message to delete not found") is no failure.
pub async fn delete_message(bot: &Bot, chat: ChatId, id: MessageId) -> Result<(), Error> {
    let body = serde_json::json!({"chat_id": chat.0, "message_id": id.0});
    let r = call_json(bot, "deleteMessage", &body).await;
    done_unless_refused(r, &["message to delete not found"])
}

/// `pinChatMessage` with `disable_notification` (no "pinned a message" notice to everyone) or
/// `unpinChatMessage` of that message; already so ("not modified") is no failure.
pub async fn pin_message(
    bot: &Bot,
    chat: ChatId,
    id: MessageId,
    pinned: bool,
) -> Result<(), Error> {
    let mut body = serde_json::json!({"chat_id": chat.0, "message_id": id.0});
    let method = if pinned {
        body["disable_notification"] = true.into();
        "pinChatMessage"
    } else {
        "unpinChatMessage"
    };
    let r = call_json(bot, method, &body).await;
    done_unless_refused(r, &["not modified", "NOT_MODIFIED"])
}

/// How long one upload may take in all: the transfer limit of every file
/// ([`FetchPolicy::for_files`](frogbot_channel::files::FetchPolicy::for_files)'s), not the bot
/// client's timeout for an API call.
pub const UPLOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// The multipart form of an upload: the parameters as text fields, as teloxide writes them
/// (numbers and booleans as text, objects as JSON), the file as a part with its file name and
/// `Content-Type`, its body streamed with its length.
fn upload_form(to: SendTo, upload: Upload) -> reqwest012::multipart::Form {
    use reqwest012::multipart::{Form, Part};
    let mut form = Form::new();
    for (name, value) in to.params() {
        form = match value {
            serde_json::Value::String(text) => form.text(name, text),
            value => form.text(name, value.to_string()),
        };
    }
    // A media type reqwest cannot read goes without one (Telegram then guesses from the name).
    let typed = Part::text("").mime_str(&upload.media_type).is_ok();
    let body = reqwest012::Body::wrap_stream(upload.bytes);
    let mut part = Part::stream_with_length(body, upload.size).file_name(upload.filename);
    if typed {
        part = part
            .mime_str(&upload.media_type)
            .expect("a media type reqwest read just now");
    }
    form.part(upload.kind.field(), part)
}

#[async_trait]
impl TelegramApi for Bot {
    async fn send_message(
        &self,
        to: SendTo,
        text: &str,
        parse_mode: Option<ParseMode>,
        markup: Option<ReplyMarkup>,
    ) -> Result<SentMessage, Error> {
        let req = message_request(to, text, parse_mode, markup);
        let m = with_retry("sendMessage", || call(self, &req)).await?;
        Ok(m.into())
    }

    async fn edit_html(
        &self,
        chat: ChatId,
        id: MessageId,
        html: &str,
        keyboard: Option<InlineKeyboardMarkup>,
    ) -> Result<(), Error> {
        let mut req = EditMessageText::new(chat, id, html).parse_mode(ParseMode::Html);
        req.reply_markup = keyboard;
        let r = with_retry("editMessageText", || call(self, &req)).await;
        done_unless_refused(r, &[NOT_MODIFIED])
    }

    async fn edit_message_reply_markup(
        &self,
        chat: ChatId,
        id: MessageId,
        markup: Option<InlineKeyboardMarkup>,
    ) -> Result<(), Error> {
        let mut req = EditMessageReplyMarkup::new(chat, id);
        req.reply_markup = markup;
        let r = with_retry("editMessageReplyMarkup", || call(self, &req)).await;
        done_unless_refused(r, &[NOT_MODIFIED])
    }

    async fn answer_callback_query(&self, id: &str, text: Option<&str>) -> Result<(), Error> {
        let mut req = AnswerCallbackQuery::new(CallbackQueryId(id.to_owned()));
        req.text = text.map(str::to_owned);
        with_retry("answerCallbackQuery", || call(self, &req)).await?;
        Ok(())
    }

    async fn set_reaction(&self, chat: ChatId, id: MessageId, emoji: &str) -> Result<(), Error> {
        let req = SetMessageReaction::new(chat, id).reaction(vec![ReactionType::Emoji {
            emoji: emoji.to_owned(),
        }]);
        with_retry("setMessageReaction", || call(self, &req)).await?;
        Ok(())
    }

    async fn typing(&self, chat: ChatId, topic: Option<ThreadId>) -> Result<(), Error> {
        let mut req = SendChatAction::new(chat, ChatAction::Typing);
        req.message_thread_id = topic;
        // Not retried: the next one is due in a few seconds anyway.
        call(self, &req).await?;
        Ok(())
    }

    /// teloxide 0.17 has no `sendMessageDraft`: the same JSON request, through [`request`].
    async fn send_draft(
        &self,
        chat: ChatId,
        topic: Option<ThreadId>,
        draft_id: u32,
        html: &str,
    ) -> Result<(), Error> {
        let body = SendTo::new(chat, topic).into_body(serde_json::json!({
            "draft_id": draft_id, "text": html, "parse_mode": "HTML"
        }));
        call_json(self, "sendMessageDraft", &body).await?;
        Ok(())
    }

    /// The upload through the bot's own HTTP client (teloxide's reqwest, its API URL and
    /// token), its answer read like every other call's ([`request`]): teloxide's multipart send
    /// would keep no status and sleep 10 seconds before reading a `5xx`.
    async fn send_file(&self, to: SendTo, upload: Upload) -> Result<SentMessage, Error> {
        let method = upload.kind.method();
        let form = upload_form(to, upload);
        // A file takes as long as its size needs: not the client's timeout for an API call
        // (teloxide's default is 17 seconds), the transfer limit every file has.
        let req = self
            .client()
            .post(method_url(self, method)?)
            .timeout(UPLOAD_TIMEOUT)
            .multipart(form);
        let m: Message = answer(method, req).await?;
        Ok(m.into())
    }
}
