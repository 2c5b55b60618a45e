//! The channels this process serves, by platform ([`Channel`]s as the adapters registered them,
//! and each platform's [`ChannelSettings`]). Plain data that every layer reads; it calls nothing.

use std::sync::{Arc, RwLock};

use crate::model::{ChannelQuestions, Thread};
use crate::store::ChatRow;
pub use frogbot_channel::{
    AccessCheck, AllowAll, AllowList, AskPlace, Channel, ChannelOutbox, ChannelSettings, Delivery,
    DraftMessages, EditStream, FIRST_MESSAGE_WAIT, FileStream, OutFile, OutboxDelivery,
    ReplyStream, ShownAcks,
};

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
