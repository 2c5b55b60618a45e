use serde::{Deserialize, Serialize};
use std::fmt;

use crate::Error;

/// A chat id chosen by the client: 1–128 characters of `A-Z a-z 0-9 _ -`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ChatId(String);

impl ChatId {
    /// Checks and wraps a chat id.
    pub fn new(id: impl Into<String>) -> Result<Self, Error> {
        let id = id.into();
        let ok = (1..=128).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok {
            Ok(Self(id))
        } else {
            Err(Error::InvalidChatId(id))
        }
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the id is in the channel chats' id space: ids starting with
    /// [`CHANNEL_CHAT_PREFIX`] are created only by a channel, never by a web or HTTP caller, so a
    /// caller cannot take a channel thread's chat id before its channel does.
    pub fn is_channel_space(&self) -> bool {
        self.0.starts_with(CHANNEL_CHAT_PREFIX)
    }
}

/// The first character of every channel chat id (see [`ChatId::is_channel_space`]).
pub const CHANNEL_CHAT_PREFIX: char = '_';

impl<'de> Deserialize<'de> for ChatId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ChatId::new(s).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for ChatId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ChatId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A FrogBot user id (the `id` of a `[[users]]` entry, or what a channel's identity hook maps to).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserId(pub String);

impl UserId {
    /// Wraps a user id.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What hooks and access checks see of a chat: its id, its owner and its channel thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatInfo {
    /// The chat.
    pub chat_id: ChatId,
    /// Its owner (the sender of its first message, as the identity hook mapped them).
    pub owner: Option<UserId>,
    /// Its channel thread, for a channel chat.
    pub channel: Option<ChannelRef>,
}

/// The channel conversation a chat belongs to: `{"platform": "slack", "thread": "C123:1712345678.000100"}`.
/// One FrogBot chat per platform thread.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChannelRef {
    /// The adapter's platform name: `slack`, `discord`, `telegram`, `matrix`, …
    pub platform: String,
    /// The adapter's id of the conversation thread, opaque to FrogBot.
    pub thread: String,
}

/// A person (or bot) as a platform knows them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlatformUser {
    /// The platform's user id.
    pub id: String,
    /// A display name when the platform gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether the platform marks this user as a bot.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_bot: bool,
}

/// A participant's identity on a channel: which platform, and who there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelIdentity {
    /// The adapter's platform name.
    pub platform: String,
    /// The platform user.
    pub user: PlatformUser,
}

/// Who acted: the FrogBot user the identity hook resolved (if any) and their channel identity (if
/// the act came through a channel). `actor` of the `settled` hook.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// The FrogBot user, or `None` for an anonymous caller.
    #[serde(default)]
    pub user: Option<UserId>,
    /// The channel identity, when the act came through a channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<ChannelIdentity>,
}

/// The state of a chat's turn, as the pending endpoint reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnState {
    /// No turn runs and no question waits.
    Idle,
    /// A turn holds the chat's lease and is working.
    Running,
    /// The last step asked questions that wait for answers.
    Awaiting,
}

impl TurnState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnState::Idle => "idle",
            TurnState::Running => "running",
            TurnState::Awaiting => "awaiting",
        }
    }
}

/// How a message sent during a turn is delivered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Delivery {
    /// Wait for the current turn to end, then run as the next turn.
    #[default]
    Queue,
    /// Join the running turn at its next step boundary (driving user only).
    Steer,
}

impl Delivery {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Queue => "queue",
            Delivery::Steer => "steer",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_ids_are_checked() {
        assert!(ChatId::new("abc_DEF-123").is_ok());
        assert!(ChatId::new("x".repeat(128)).is_ok());
        assert!(ChatId::new("x".repeat(129)).is_err());
        assert!(ChatId::new("").is_err());
        assert!(ChatId::new("a b").is_err());
        assert!(ChatId::new("é").is_err());
        assert!(serde_json::from_str::<ChatId>("\"a/b\"").is_err());
    }
}
