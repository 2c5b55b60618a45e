//! [`RecordingDiscord`]: a [`DiscordApi`] for unit tests that records every call ([`Recorded`])
//! and answers with made-up ids, without a server.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use serenity::builder::{
    CreateInteractionResponse, CreateInteractionResponseFollowup, CreateMessage, CreateThread,
    EditMessage,
};
use serenity::model::channel::{ChannelType, Message};
use serenity::model::id::{ChannelId, InteractionId, MessageId, UserId};

use crate::Error;
use crate::client::{DiscordApi, Posted};

/// One call [`RecordingDiscord`] received.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    /// The method: `send_message`, `send_file`, `edit_message`, `delete_message`, `pin_message`,
    /// `create_interaction_response`,
    /// `create_followup`, `create_thread`, `current_user`, `channel_kind`, `dm_channel`, `react`,
    /// `unreact`, `typing` or `messages_before`.
    pub method: &'static str,
    /// The ids the call named (channel, message, interaction id, token…), as strings.
    pub target: Vec<String>,
    /// The builder as the JSON serenity sends (for `send_file`, its `payload_json`).
    pub body: Value,
    /// The files of a `send_file` call: (file name, bytes), in order.
    pub files: Vec<(String, Vec<u8>)>,
}

/// A [`DiscordApi`] that records every call and answers with ids counting up from
/// 900000000000000001 (messages and threads) and the bot user [`RecordingDiscord::BOT`].
#[derive(Debug, Default)]
pub struct RecordingDiscord {
    calls: Mutex<Vec<Recorded>>,
    next: AtomicU64,
    fail_edits_of: Mutex<Vec<MessageId>>,
}

impl RecordingDiscord {
    /// The bot user id `current_user` answers.
    pub const BOT: u64 = 610_000_000_000_000_006;

    /// A new recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Recorded> {
        self.calls.lock().expect("calls").clone()
    }

    /// Makes `edit_message` of `message` fail (as for a deleted message).
    pub fn fail_edits_of(&self, message: MessageId) {
        self.fail_edits_of.lock().expect("fail").push(message);
    }

    fn record(&self, method: &'static str, target: Vec<String>, body: &impl Serialize) {
        self.calls.lock().expect("calls").push(Recorded {
            method,
            target,
            body: serde_json::to_value(body).unwrap_or(Value::Null),
            files: Vec::new(),
        });
    }

    fn next_id(&self) -> u64 {
        900_000_000_000_000_001 + self.next.fetch_add(1, Ordering::SeqCst)
    }
}

#[async_trait]
impl DiscordApi for RecordingDiscord {
    async fn send_message(
        &self,
        channel: ChannelId,
        message: &CreateMessage,
    ) -> Result<Posted, Error> {
        self.record("send_message", vec![channel.to_string()], message);
        Ok(Posted {
            id: MessageId::new(self.next_id()),
            timestamp: "2026-01-01T00:00:00.000Z".into(),
        })
    }

    async fn send_file(
        &self,
        channel: ChannelId,
        message: &CreateMessage,
        file: &frogbot_channel::OutFile,
        via: &frogbot_channel::files::Downloads,
    ) -> Result<Posted, Error> {
        let _ = via;
        let bytes = file
            .bytes()
            .await
            .map_err(|e| Error::Malformed(e.to_string()))?;
        self.record("send_file", vec![channel.to_string()], message);
        if let Some(call) = self.calls.lock().expect("calls").last_mut() {
            let payload = crate::client::file_payload(message, file)?;
            call.body = serde_json::from_str(&payload).unwrap_or_default();
            call.files = vec![(file.filename.clone(), bytes)];
        }
        Ok(Posted {
            id: MessageId::new(self.next_id()),
            timestamp: "2026-01-01T00:00:00.000Z".into(),
        })
    }

    async fn edit_message(
        &self,
        channel: ChannelId,
        message: MessageId,
        edit: &EditMessage,
    ) -> Result<(), Error> {
        self.record(
            "edit_message",
            vec![channel.to_string(), message.to_string()],
            edit,
        );
        if self.fail_edits_of.lock().expect("fail").contains(&message) {
            return Err(Error::Malformed(format!("Unknown Message {message}")));
        }
        Ok(())
    }

    async fn delete_message(&self, channel: ChannelId, message: MessageId) -> Result<(), Error> {
        self.record(
            "delete_message",
            vec![channel.to_string(), message.to_string()],
            &Value::Null,
        );
        Ok(())
    }

    async fn pin_message(
        &self,
        channel: ChannelId,
        message: MessageId,
        pinned: bool,
    ) -> Result<(), Error> {
        self.record(
            "pin_message",
            vec![channel.to_string(), message.to_string()],
            &pinned,
        );
        Ok(())
    }

    async fn create_interaction_response(
        &self,
        interaction: InteractionId,
        token: &str,
        response: &CreateInteractionResponse,
    ) -> Result<(), Error> {
        self.record(
            "create_interaction_response",
            vec![interaction.to_string(), token.to_owned()],
            response,
        );
        Ok(())
    }

    async fn create_followup(
        &self,
        token: &str,
        followup: &CreateInteractionResponseFollowup,
    ) -> Result<(), Error> {
        self.record("create_followup", vec![token.to_owned()], followup);
        Ok(())
    }

    async fn create_thread(
        &self,
        channel: ChannelId,
        message: MessageId,
        thread: &CreateThread<'_>,
    ) -> Result<ChannelId, Error> {
        self.record(
            "create_thread",
            vec![channel.to_string(), message.to_string()],
            thread,
        );
        Ok(ChannelId::new(self.next_id()))
    }

    async fn current_user(&self) -> Result<UserId, Error> {
        self.record("current_user", vec![], &Value::Null);
        Ok(UserId::new(Self::BOT))
    }

    /// Every channel is a text channel.
    async fn channel_kind(&self, channel: ChannelId) -> Result<ChannelType, Error> {
        self.record("channel_kind", vec![channel.to_string()], &Value::Null);
        Ok(ChannelType::Text)
    }

    async fn dm_channel(&self, user: UserId) -> Result<ChannelId, Error> {
        self.record("dm_channel", vec![user.to_string()], &Value::Null);
        Ok(ChannelId::new(self.next_id()))
    }

    async fn react(
        &self,
        channel: ChannelId,
        message: MessageId,
        emoji: &str,
    ) -> Result<(), Error> {
        self.record(
            "react",
            vec![channel.to_string(), message.to_string(), emoji.to_owned()],
            &Value::Null,
        );
        Ok(())
    }

    async fn unreact(
        &self,
        channel: ChannelId,
        message: MessageId,
        emoji: &str,
    ) -> Result<(), Error> {
        self.record(
            "unreact",
            vec![channel.to_string(), message.to_string(), emoji.to_owned()],
            &Value::Null,
        );
        Ok(())
    }

    async fn typing(&self, channel: ChannelId) -> Result<(), Error> {
        self.record("typing", vec![channel.to_string()], &Value::Null);
        Ok(())
    }

    async fn messages_before(
        &self,
        channel: ChannelId,
        before: MessageId,
        limit: u8,
    ) -> Result<Vec<Message>, Error> {
        self.record(
            "messages_before",
            vec![channel.to_string(), before.to_string()],
            &limit,
        );
        Ok(Vec::new())
    }
}
