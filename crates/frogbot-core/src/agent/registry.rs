//! The channels this process serves: for each platform its question hooks, its identity hook, the
//! agent's access check and the outbox for replies. Plain data that every layer reads; it calls
//! nothing.

use async_trait::async_trait;
use std::sync::{Arc, RwLock};

use crate::BoxError;
use crate::model::{Ack, ChannelQuestions, ChatInfo, IdentityResolver, Thread, UiMessage, UserId};
use crate::store::ChatRow;

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

/// Where a channel posts the agent's replies (in the same thread), and how it shows a person that
/// their message was taken and is being worked on.
///
/// The engine calls these in order per thread: `ack(Seen)` when a message is stored,
/// `ack(Working)` and `working` when its turn starts (`working` again every
/// [`ChannelOutbox::working_every`] while it runs), `post_reply`, then `ack(Done)` — or
/// `ack(Failed)` when the turn failed. Errors are logged; none stops a turn.
#[async_trait]
pub trait ChannelOutbox: Send + Sync {
    /// Posts the reply of a turn that ended (or stopped to wait) in `thread`, or a short notice
    /// of the engine's (a queued message's note, a failure, a stop).
    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError>;

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

    /// How often `working` is repeated while a turn runs (the platform's sign fades after a while).
    fn working_every(&self) -> std::time::Duration {
        std::time::Duration::from_secs(4)
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
}

impl Default for ChannelSettings {
    fn default() -> Self {
        Self {
            model: None,
            reasoning: None,
            acks: true,
        }
    }
}

/// The channels of this process, by platform.
#[derive(Default)]
pub(crate) struct Registry {
    channels: RwLock<Vec<Arc<Channel>>>,
    /// Per platform: its settings (absent: the defaults).
    settings: RwLock<std::collections::HashMap<String, ChannelSettings>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("channels", &self.channels.read().expect("registry").len())
            .finish()
    }
}

impl Registry {
    pub(crate) fn add(&self, channel: Channel) {
        let mut all = self.channels.write().expect("registry");
        all.retain(|c| c.platform != channel.platform);
        all.push(Arc::new(channel));
    }

    pub(crate) fn set(&self, platform: &str, settings: ChannelSettings) {
        self.settings
            .write()
            .expect("registry")
            .insert(platform.to_owned(), settings);
    }

    /// `platform`'s settings.
    pub(crate) fn settings(&self, platform: &str) -> ChannelSettings {
        self.settings
            .read()
            .expect("registry")
            .get(platform)
            .cloned()
            .unwrap_or_default()
    }

    pub(crate) fn get(&self, platform: &str) -> Option<Arc<Channel>> {
        self.channels
            .read()
            .expect("registry")
            .iter()
            .find(|c| c.platform == platform)
            .cloned()
    }

    /// The question hooks of `platform`, when this process serves it with questions.
    pub(crate) fn hooks(&self, platform: &str) -> Option<Arc<dyn ChannelQuestions>> {
        self.get(platform).and_then(|c| c.questions.clone())
    }
}

/// The channel thread of a chat, as hooks see it.
pub(crate) fn thread_of(chat: &ChatRow) -> Option<Thread> {
    chat.channel.as_ref().map(|c| Thread {
        id: c.thread.clone(),
        platform: c.platform.clone(),
        chat_id: chat.chat_id.to_string(),
    })
}
