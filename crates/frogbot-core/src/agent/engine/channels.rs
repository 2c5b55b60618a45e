//! `engine.channels()`: what is channel-facing — the registered channels, the typed entries
//! behind [`Engine::receive`] (a thread's message, its change, a click or form, a Stop, an
//! event click, a form's target) and an ask's thread on a platform.

use super::*;

/// The channel-facing entries: registered channels, threads' messages, clicks, forms, stops
/// ([`Engine::channels`]).
#[derive(Clone, Copy, Debug)]
pub struct Channels<'a>(pub(super) &'a Engine);

impl<'a> Channels<'a> {
    /// The channel registered for `platform`.
    pub fn get(self, platform: &str) -> Option<Arc<Channel>> {
        self.0.inner.registry.get(platform)
    }

    /// Whether a channel thread has a chat: the bot takes part in it (a reply there needs no
    /// mention).
    pub async fn thread_known(self, platform: &str, thread: &str) -> Result<bool> {
        self.0.inner.channels.thread_known(platform, thread).await
    }

    /// Handles a click, a form submission or a thread reply from `platform` (in `thread`, when the
    /// platform says). For a thread reply, anything but [`InteractionOutcome::Ignored`] means it
    /// was consumed and must not reach the agent as a message.
    pub async fn interaction(
        self,
        platform: &str,
        thread: Option<&str>,
        interaction: &Interaction,
    ) -> Result<InteractionOutcome> {
        self.0
            .inner
            .questions
            .handle_interaction(platform, thread, interaction)
            .await
    }

    /// Stops the running turn of a channel thread's chat for the platform user `who` (the Stop
    /// control on a streamed reply): `NotDriver` for anyone but the person driving the turn.
    pub async fn stop(
        self,
        platform: &str,
        thread: &str,
        who: &crate::model::PlatformUser,
    ) -> Result<StopOutcome> {
        self.0
            .inner
            .channels
            .channel_stop(platform, thread, who)
            .await
    }

    /// A click on an event button of an agent message in a channel thread (read by the adapter
    /// into an [`EventClick`](crate::model::EventClick)): after the identity and access checks,
    /// the event goes to the bound agent's inbox; it answers nothing and may be sent any number
    /// of times. `Stale` when the message, block or button is gone.
    pub async fn event(
        self,
        platform: &str,
        thread: &str,
        click: crate::model::EventClick,
    ) -> Result<crate::agent::EventOutcome> {
        self.0
            .inner
            .channels
            .channel_event(platform, thread, click)
            .await
    }

    /// Handles a message in a channel thread: a reply that answers a question is consumed; else,
    /// after the identity and access checks, it starts or continues the thread's chat.
    pub async fn message(
        self,
        platform: &str,
        thread: &str,
        message: ThreadMessage,
    ) -> Result<ChannelMessageOutcome> {
        self.0
            .inner
            .channels
            .channel_message(platform, thread, message)
            .await
    }

    /// A person edited their message `message_id` (the platform's id) in `thread` to `text`
    /// (`Some`, a leading mention stripped as for [`Channels::message`]) or it was deleted
    /// (`None`): a message still queued runs with the new text, or never; one that already ran is
    /// left as the agent read it ([`ChangeOutcome`]).
    pub async fn message_changed(
        self,
        platform: &str,
        thread: &str,
        message_id: &str,
        text: Option<String>,
    ) -> Result<ChangeOutcome> {
        self.0
            .inner
            .channels
            .channel_message_changed(platform, thread, message_id, text)
            .await
    }

    /// The question a click on the platform message `message_id` may open a form for ("Other…"):
    /// `None` unless that message is the current message of an open question.
    pub async fn form_target(self, platform: &str, message_id: &str) -> Result<Option<FormTarget>> {
        self.0
            .inner
            .questions
            .form_target(platform, message_id)
            .await
    }

    /// The channel thread an ask to `place` on `platform` goes to (the adapter may start one,
    /// posting `text`, idempotent on `key`, the ask's message id — see
    /// [`ChannelOutbox::ask_thread`](crate::agent::ChannelOutbox::ask_thread)):
    /// [`Error::InvalidInput`] when this process serves no such channel, [`Error::Channel`] when
    /// the platform fails.
    pub async fn ask_thread(
        self,
        platform: &str,
        place: crate::agent::AskPlace<'_>,
        text: &str,
        key: &str,
    ) -> Result<crate::model::ChannelRef> {
        let outbox = self
            .0
            .inner
            .registry
            .get(platform)
            .and_then(|c| c.outbox.clone())
            .ok_or_else(|| Error::InvalidInput {
                reason: format!("no {platform} channel is configured"),
            })?;
        let thread = outbox
            .ask_thread(frogbot_channel::outbox::AskTo { place, text, key })
            .await
            .map_err(|e| Error::Channel {
                platform: platform.to_owned(),
                reason: e.to_string(),
            })?;
        Ok(crate::model::ChannelRef {
            platform: platform.to_owned(),
            thread,
        })
    }
}
