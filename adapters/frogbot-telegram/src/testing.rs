//! A fake Telegram Bot API for tests (feature `testing`), like matrix-sdk's `MatrixMockServer`:
//! [`FakeBotApi`] is an HTTP server on 127.0.0.1 speaking the Bot API's shapes
//! (`{"ok": true, "result": …}` / `{"ok": false, "error_code", "description"}`) for `getMe`,
//! `getWebhookInfo`, `getUpdates` (a long poll: held until an update is queued or `timeout` passes; `offset`
//! confirms and forgets earlier updates), `setWebhook`, `deleteWebhook`, `sendMessage`,
//! `editMessageText`, `editMessageReplyMarkup`, `answerCallbackQuery`, and for agent messages
//! `sendPhoto` (an http(s) URL; a caption of at most 1,024 characters after entity parsing),
//! and for the files the bot sends `sendPhoto` / `sendDocument` as multipart/form-data uploads
//! (read as they stream; the bytes kept under a `file_id` that `getFile` and the file URL serve,
//! [`FakeBotApi::file_bytes`]; answered with the documented `Message`: `photo`, an array of
//! `PhotoSize` — `file_id`, `file_unique_id`, `width`, `height`, `file_size` —, or `document` —
//! `file_id`, `file_unique_id`, `file_name`, `mime_type`, `file_size`; refused as Telegram does: an
//! upload over 50 MB `413 Request Entity Too Large`, an empty one, a photo over 10 MB
//! (`PHOTO_SAVE_FILE_INVALID`), of width + height over 10,000 or a ratio over 20
//! (`PHOTO_INVALID_DIMENSIONS`) or no picture it can read (`IMAGE_PROCESS_FAILED`; it reads PNG
//! and GIF sizes)),
//! `editMessageMedia` (a photo, also onto a text message), `deleteMessage` ("message to delete
//! not found" once gone), `pinChatMessage` / `unpinChatMessage` ([`FakeBotApi::pinned`]); an
//! `editMessageText` of a photo is refused ("there is no text in the message to edit"). It keeps every message
//! it knows (the bot's, with their current keyboards, and the users' it made), records every call
//! with its arrival time, and refuses what Telegram refuses: texts of 0 or more than 4,096
//! characters (counted after entity parsing with `parse_mode` `HTML`), HTML it cannot parse
//! (unknown or unbalanced tags, `code` / `pre` inside another entity, a bare `<`, `>` or `&`:
//! "Bad Request: can't parse entities: …"), callback data of 0 or more than 64 bytes, more than 100 buttons or 8 in a row,
//! a ForceReply whose `force_reply` is not `true` or whose `input_field_placeholder` is not 1–64
//! characters, an edit whose `reply_markup` is no inline keyboard,
//! notices over 200 characters, an edit that changes nothing, a message that does not exist; a
//! token it was told to refuse gets `401 Unauthorized`. The push side: [`FakeBotApi::push`] queues
//! an update for `getUpdates`, [`post_update`] posts one to a bot's webhook with the secret token.
//!
//! Faults ([`FakeBotApi::inject_faults`]): a [`FaultPlan`](frogbot_model::faults::FaultPlan)
//! decides for each call of the chosen methods whether it fails, as Telegram and the network do:
//! `500` `{"ok": false, "error_code":
//! 500, "description": "Internal Server Error"}` (nothing done); `429` `{"ok": false,
//! "error_code": 429, "description": "Too Many Requests: retry after N", "parameters":
//! {"retry_after": N}}` (whole seconds, at least 1; nothing done); a timeout (the request is held
//! past the client's timeout, then answered `500`; nothing done — see
//! [`FakeBotApi::bot_with_timeout`]); a reset after processing (the call is carried out — a
//! `sendMessage` posts its message — then the answer is cut off: the status line goes out, the
//! body fails and the connection is dropped).
//!
//! What a person sees ([`FakeBotApi::person_view`], [`SeenMessage`], [`transcript`]): the
//! messages of a chat, topic or agent conversation in order after edits and deletions — sender,
//! text as a client renders it, photo, the file uploaded ([`SeenFile`]: name, type, size),
//! inline keyboard rows, the ForceReply field, the people it mentions (a `tg://user?id=` link
//! in the HTML becomes a `text_mention` entity of the user, for a user the fake knows), the bot's
//! reaction, whether its posting notified (every `sendMessage` / `sendPhoto` does unless it
//! carries `disable_notification`, which Telegram documents as "a notification with no sound";
//! edits never notify) and whether it was edited — and a draft (`sendMessageDraft`, private chats)
//! while one shows: the ephemeral preview of a reply being written, which the messages sent at
//! the end replace.
//!
//! Also here: builders of real update shapes ([`user`], [`private_chat`], [`group_chat`],
//! [`text_update`], [`callback_update`]) and [`ConformanceHarness`], the `ChannelQuestions`
//! conformance harness over the fake.
//!
//! The parts: `api` (the Bot API server, its state and routes), `push` (updates for `getUpdates`
//! or a webhook), `updates` (builders of update shapes), `harness` (the conformance harness),
//! `view` (what a person sees, transcripts) and `recording` ([`RecordingTelegram`], a
//! [`TelegramApi`](crate::TelegramApi) without a server, for unit tests).

use std::time::Duration;

mod api;
mod harness;
mod push;
mod recording;
mod updates;
mod view;

pub use api::{Call, FakeBotApi, Webhook};
pub use harness::ConformanceHarness;
pub use push::post_update;
pub use recording::{ApiCall, RecordingTelegram};
pub use updates::{callback_update, group_chat, private_chat, text_update, user};
pub use view::{SeenFile, SeenMessage, transcript};

/// The bot's own user id.
pub const BOT_ID: i64 = 999;
/// The bot's username.
pub const BOT_USERNAME: &str = "frogbot";
/// The token [`FakeBotApi::bot`] uses.
pub const TOKEN: &str = "123456:TEST-token";
/// How long [`FakeBotApi::wait_for`] waits for a condition before failing.
pub const WAIT: Duration = Duration::from_secs(20);
/// The most buttons Telegram accepts in one row of an inline keyboard.
pub const MAX_ROW: usize = 8;
/// What Telegram answers an edit that changes nothing.
pub const NOT_MODIFIED: &str = "Bad Request: message is not modified: specified new message \
    content and reply markup are exactly the same as a current content and reply markup of the message";
