//! [`DiscordApi`]: the Discord API calls the question hooks, the receiver and the outbox make,
//! implemented for serenity's [`Http`] (the real client). A recording implementation for unit
//! tests of code that calls Discord is `testing::RecordingDiscord` (feature `testing`).
//!
//! The calls take serenity's builders, so what is sent is what serenity would send.

use async_trait::async_trait;
use serenity::builder::{
    CreateInteractionResponse, CreateInteractionResponseFollowup, CreateMessage, CreateThread,
    EditMessage,
};
use serenity::http::Http;
use serenity::model::channel::{Channel, ChannelType, Message, ReactionType};
use serenity::model::id::{ChannelId, InteractionId, MessageId, UserId};

use frogbot_channel::OutFile;
use frogbot_channel::files::{Downloads, UploadAnswer, UploadError};
use frogbot_channel::retry::Failure;

use crate::Error;

/// `r`, where Discord's "Unknown Message" counts as done (deleting or unpinning a message that
/// is gone).
fn gone_is_done(r: Result<(), Error>) -> Result<(), Error> {
    match r {
        Err(e) if e.discord_code() == Some(UNKNOWN_MESSAGE) => Ok(()),
        other => other,
    }
}

/// Counts one API call of `method` by its answer (`frogbot_platform_api_calls_total`): `2xx` (serenity
/// does not say which success), the HTTP status of a refusal, `timeout` or `network`; a `429` (left
/// to the caller's retry) also counts as a rate-limit wait. The result as the adapter's.
fn counted<T>(method: &'static str, r: Result<T, serenity::Error>) -> Result<T, Error> {
    use serenity::http::HttpError;
    let status = match &r {
        Ok(_) => "2xx".to_owned(),
        Err(serenity::Error::Http(HttpError::UnsuccessfulRequest(e))) => {
            e.status_code.as_u16().to_string()
        }
        Err(serenity::Error::Http(HttpError::Request(e))) if e.is_timeout() => "timeout".to_owned(),
        Err(serenity::Error::Http(HttpError::Request(_)) | serenity::Error::Io(_)) => {
            "network".to_owned()
        }
        Err(_) => "error".to_owned(),
    };
    count(method, &status);
    r.map_err(Error::from)
}

/// Counts one API call of `method` answered with `status` ([`counted`]).
fn count(method: &str, status: &str) {
    frogbot_channel::metrics::platform_call("discord", method, status);
    if status == "429" {
        frogbot_channel::metrics::platform_rate_limit_wait("discord");
    }
}

/// The `payload_json` of a message carrying `file`: `message` as serenity sends it, naming the
/// file in `attachments` as the part `files[0]`.
pub fn file_payload(message: &CreateMessage, file: &OutFile) -> Result<String, Error> {
    let mut payload = serde_json::to_value(message).map_err(|e| Error::Malformed(e.to_string()))?;
    payload["attachments"] = serde_json::json!([{"id": 0, "filename": file.filename}]);
    Ok(payload.to_string())
}

/// Discord's answer to a message post: the message (its `id`, `timestamp`), or why not — a
/// `429` (with its `retry_after`) or a `5xx` is [`Error::Unavailable`] (as [`Failure`] says),
/// any other refusal [`Error::Refused`] with Discord's code.
fn posted(answer: UploadAnswer) -> Result<Posted, Error> {
    let body: serde_json::Value = serde_json::from_str(&answer.body).unwrap_or_default();
    if answer.is_success() {
        let id = body["id"]
            .as_str()
            .and_then(|id| id.parse::<u64>().ok())
            .filter(|id| *id != 0)
            .ok_or_else(|| {
                // Posted, but its answer unread: a retry (the same nonce) gets the message back.
                let why = format!("Discord API: a message without an id: {}", answer.body);
                Error::Unavailable {
                    source: frogbot_model::Transient::new(why).maybe_done(),
                }
            })?;
        return Ok(Posted {
            id: MessageId::new(id),
            timestamp: body["timestamp"].as_str().unwrap_or_default().to_owned(),
        });
    }
    let message = body["message"].as_str().unwrap_or(&answer.body).to_owned();
    let wait = body["retry_after"]
        .as_f64()
        .map(std::time::Duration::from_secs_f64)
        .or(answer.retry_after);
    let why = || frogbot_model::Transient::new(format!("Discord API: {} {message}", answer.status));
    let failure = Failure::Refused {
        status: answer.status,
        wait,
    };
    if let Some(source) = failure.transient(why) {
        return Err(Error::Unavailable { source });
    }
    Err(Error::Refused {
        status: answer.status,
        code: body["code"].as_i64().and_then(|c| isize::try_from(c).ok()),
        message,
    })
}

/// A message Discord created: its id and creation time (RFC 3339).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Posted {
    /// The message id.
    pub id: MessageId,
    /// When it was posted (RFC 3339), as Discord reports it.
    pub timestamp: String,
}

/// The Discord API calls this adapter makes.
#[async_trait]
pub trait DiscordApi: Send + Sync + 'static {
    /// `POST /channels/{channel}/messages`.
    async fn send_message(
        &self,
        channel: ChannelId,
        message: &CreateMessage,
    ) -> Result<Posted, Error>;

    /// `POST /channels/{channel}/messages` as `multipart/form-data` (Discord's "Uploading
    /// Files"): `message` as the `payload_json` part, naming `file` in its `attachments`
    /// (`{"id": 0, "filename"}`), and the file's bytes as the part `files[0]`, streamed from
    /// [`OutFile::open`] through `via` (never held whole: serenity's `CreateAttachment` takes a
    /// `Vec`). Discord takes at most its upload limit (10 MiB by default, more in a boosted
    /// server); past it, `413 Request entity too large` (40005).
    async fn send_file(
        &self,
        channel: ChannelId,
        message: &CreateMessage,
        file: &OutFile,
        via: &Downloads,
    ) -> Result<Posted, Error>;

    /// `PATCH /channels/{channel}/messages/{message}`.
    async fn edit_message(
        &self,
        channel: ChannelId,
        message: MessageId,
        edit: &EditMessage,
    ) -> Result<(), Error>;

    /// `DELETE /channels/{channel}/messages/{message}`: the message goes. A message already
    /// gone (404 `Unknown Message`, 10008) counts as done.
    async fn delete_message(&self, channel: ChannelId, message: MessageId) -> Result<(), Error>;

    /// `PUT` (`pinned`) or `DELETE /channels/{channel}/pins/{message}` (the route serenity 0.12
    /// calls; Discord's newer one is `/channels/{channel}/messages/pins/{message}`). Unpinning a
    /// message already gone (10008) counts as done.
    async fn pin_message(
        &self,
        channel: ChannelId,
        message: MessageId,
        pinned: bool,
    ) -> Result<(), Error>;

    /// `POST /interactions/{id}/{token}/callback`: the interaction's (one) response.
    async fn create_interaction_response(
        &self,
        interaction: InteractionId,
        token: &str,
        response: &CreateInteractionResponse,
    ) -> Result<(), Error>;

    /// `POST /webhooks/{application}/{token}`: a followup message of an answered interaction.
    async fn create_followup(
        &self,
        token: &str,
        followup: &CreateInteractionResponseFollowup,
    ) -> Result<(), Error>;

    /// `POST /channels/{channel}/messages/{message}/threads`: a thread on a message; its id.
    async fn create_thread(
        &self,
        channel: ChannelId,
        message: MessageId,
        thread: &CreateThread<'_>,
    ) -> Result<ChannelId, Error>;

    /// `GET /users/@me`: the bot's own user id.
    async fn current_user(&self) -> Result<UserId, Error>;

    /// `GET /channels/{channel}`: the channel's type (`0` text, `1` DM, `5` announcement, `11`
    /// public thread, …).
    async fn channel_kind(&self, channel: ChannelId) -> Result<ChannelType, Error>;

    /// `POST /users/@me/channels` with `recipient_id`: the DM channel with `user` (Discord
    /// answers the same channel every time).
    async fn dm_channel(&self, user: UserId) -> Result<ChannelId, Error>;

    /// `PUT /channels/{channel}/messages/{message}/reactions/{emoji}/@me`: the bot reacts.
    async fn react(&self, channel: ChannelId, message: MessageId, emoji: &str)
    -> Result<(), Error>;

    /// `DELETE /channels/{channel}/messages/{message}/reactions/{emoji}/@me`: the bot's reaction
    /// goes.
    async fn unreact(
        &self,
        channel: ChannelId,
        message: MessageId,
        emoji: &str,
    ) -> Result<(), Error>;

    /// `POST /channels/{channel}/typing`: "typing…" for 10 seconds.
    async fn typing(&self, channel: ChannelId) -> Result<(), Error>;

    /// `GET /channels/{channel}/messages?before={before}&limit={limit}`: the channel's messages
    /// before `before`, newest first (as Discord returns them), at most `limit` (1–100).
    async fn messages_before(
        &self,
        channel: ChannelId,
        before: MessageId,
        limit: u8,
    ) -> Result<Vec<Message>, Error>;
}

#[async_trait]
impl DiscordApi for Http {
    async fn send_message(
        &self,
        channel: ChannelId,
        message: &CreateMessage,
    ) -> Result<Posted, Error> {
        let sent = Http::send_message(self, channel, vec![], message).await;
        let message = counted("create_message", sent)?;
        Ok(Posted {
            id: message.id,
            timestamp: message.timestamp.to_rfc3339().unwrap_or_default(),
        })
    }

    /// Not through serenity (whose attachment is a `Vec`): the same request, its file part
    /// streamed by the guarded client, to Discord or `proxy`, with the bot's token. serenity's
    /// rate limiter does not see it: a `429` comes back as [`Error::Unavailable`] with Discord's
    /// `retry_after`.
    async fn send_file(
        &self,
        channel: ChannelId,
        message: &CreateMessage,
        file: &OutFile,
        via: &Downloads,
    ) -> Result<Posted, Error> {
        let payload = file_payload(message, file)?;
        let base = self.proxy.as_deref().unwrap_or("https://discord.com");
        // serenity's routes are `https://discord.com/api/v10/…`, the proxy replacing the origin.
        let url = format!(
            "{}/api/v10/channels/{channel}/messages",
            base.trim_end_matches('/')
        );
        let texts = [("payload_json", "application/json", payload.as_str())];
        let auth = [("authorization", self.token())];
        let answer = via.upload_form(&url, &auth, &texts, "files[0]", file).await;
        let answer = answer.map_err(|e| {
            let failure = match &e {
                UploadError::Source(_) => Failure::NotSent,
                _ => Failure::MaybeDone,
            };
            let t = frogbot_model::Transient::new(format!("Discord API: {e}"));
            Error::Unavailable {
                source: failure.mark(t),
            }
        });
        count(
            "create_message",
            &match &answer {
                Ok(a) if a.is_success() => "2xx".to_owned(),
                Ok(a) => a.status.to_string(),
                Err(_) => "network".to_owned(),
            },
        );
        posted(answer?)
    }

    async fn edit_message(
        &self,
        channel: ChannelId,
        message: MessageId,
        edit: &EditMessage,
    ) -> Result<(), Error> {
        let edited = Http::edit_message(self, channel, message, edit, vec![]).await;
        counted("edit_message", edited).map(drop)
    }

    async fn delete_message(&self, channel: ChannelId, message: MessageId) -> Result<(), Error> {
        let deleted = Http::delete_message(self, channel, message, None).await;
        gone_is_done(counted("delete_message", deleted))
    }

    async fn pin_message(
        &self,
        channel: ChannelId,
        message: MessageId,
        pinned: bool,
    ) -> Result<(), Error> {
        if pinned {
            let r = Http::pin_message(self, channel, message, None).await;
            counted("pin_message", r)
        } else {
            let r = Http::unpin_message(self, channel, message, None).await;
            gone_is_done(counted("unpin_message", r))
        }
    }

    async fn create_interaction_response(
        &self,
        interaction: InteractionId,
        token: &str,
        response: &CreateInteractionResponse,
    ) -> Result<(), Error> {
        let r = Http::create_interaction_response(self, interaction, token, response, vec![]);
        counted("create_interaction_response", r.await)
    }

    async fn create_followup(
        &self,
        token: &str,
        followup: &CreateInteractionResponseFollowup,
    ) -> Result<(), Error> {
        let sent = Http::create_followup_message(self, token, followup, vec![]).await;
        counted("create_followup_message", sent).map(drop)
    }

    async fn create_thread(
        &self,
        channel: ChannelId,
        message: MessageId,
        thread: &CreateThread<'_>,
    ) -> Result<ChannelId, Error> {
        let reason = Some("FrogBot conversation");
        let created = Http::create_thread_from_message(self, channel, message, thread, reason);
        Ok(counted("create_thread", created.await)?.id)
    }

    async fn current_user(&self) -> Result<UserId, Error> {
        Ok(self.get_current_user().await?.id)
    }

    async fn channel_kind(&self, channel: ChannelId) -> Result<ChannelType, Error> {
        Ok(
            match counted("get_channel", Http::get_channel(self, channel).await)? {
                Channel::Guild(c) => c.kind,
                Channel::Private(c) => c.kind,
                _ => ChannelType::Unknown(u8::MAX),
            },
        )
    }

    async fn dm_channel(&self, user: UserId) -> Result<ChannelId, Error> {
        let body = serde_json::json!({ "recipient_id": user });
        Ok(counted("create_dm", Http::create_private_channel(self, &body).await)?.id)
    }

    async fn react(
        &self,
        channel: ChannelId,
        message: MessageId,
        emoji: &str,
    ) -> Result<(), Error> {
        let emoji = ReactionType::Unicode(emoji.to_owned());
        let reacted = Http::create_reaction(self, channel, message, &emoji).await;
        counted("create_reaction", reacted)
    }

    async fn unreact(
        &self,
        channel: ChannelId,
        message: MessageId,
        emoji: &str,
    ) -> Result<(), Error> {
        let emoji = ReactionType::Unicode(emoji.to_owned());
        let deleted = Http::delete_reaction_me(self, channel, message, &emoji).await;
        counted("delete_reaction", deleted)
    }

    async fn typing(&self, channel: ChannelId) -> Result<(), Error> {
        let typing = Http::broadcast_typing(self, channel).await;
        counted("trigger_typing", typing)
    }

    async fn messages_before(
        &self,
        channel: ChannelId,
        before: MessageId,
        limit: u8,
    ) -> Result<Vec<Message>, Error> {
        let page = Some(serenity::http::MessagePagination::Before(before));
        let got = Http::get_messages(self, channel, page, Some(limit.clamp(1, 100))).await;
        counted("get_messages", got)
    }
}

/// Discord's error code for a message that does not exist (any more).
pub const UNKNOWN_MESSAGE: isize = 10_008;

/// Discord's error code for a request past the upload limit (`413 Request entity too large`).
pub const ENTITY_TOO_LARGE: isize = 40_005;

#[cfg(test)]
mod answer_tests {
    use super::*;

    fn answer(status: u16, body: &str) -> UploadAnswer {
        UploadAnswer {
            status,
            retry_after: None,
            body: body.to_owned(),
        }
    }

    #[test]
    fn discords_answers_to_a_file_post_read_as_the_adapter_needs() {
        let ok = posted(answer(
            200,
            r#"{"id": "1234", "timestamp": "2026-12-07T00:00:00Z"}"#,
        ));
        assert_eq!(ok.unwrap().id, MessageId::new(1234));
        // Done, but the answer did not say what: worth a retry, which the nonce makes safe.
        let e = posted(answer(200, "<html>")).unwrap_err();
        assert!(e.transient().is_some_and(|t| t.may_be_done()), "{e}");
        let e = posted(answer(
            429,
            r#"{"message": "You are being rate limited.", "retry_after": 1.5, "global": false}"#,
        ))
        .unwrap_err();
        let t = e.transient().expect("a 429 is worth retrying");
        assert_eq!(t.wait(), Some(std::time::Duration::from_millis(1500)));
        assert!(!t.may_be_done());
        let e = posted(answer(
            413,
            r#"{"message": "Request entity too large", "code": 40005}"#,
        ))
        .unwrap_err();
        assert_eq!(
            (e.http_status(), e.discord_code()),
            (Some(413), Some(40005))
        );
        assert!(e.transient().is_none());
        let e = posted(answer(502, "bad gateway")).unwrap_err();
        assert!(e.transient().is_some_and(|t| t.may_be_done()), "{e}");
    }
}
