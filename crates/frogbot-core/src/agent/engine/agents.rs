//! `engine.agents()`: running agents — the models offered and a selection's check, a user
//! message sent to a chat (a turn, queued, or steering), a turn generated, kicked or stopped; and
//! the API of agents outside FrogBot: their chats, messages (posted, edited, deleted, pinned),
//! acknowledgements and inbox.

use super::*;

/// Running agents: turns, steering, models; external agents' chats, messages and inbox
/// ([`Engine::agents`]).
#[derive(Clone, Copy, Debug)]
pub struct Agents<'a>(pub(super) &'a Engine);

impl<'a> Agents<'a> {
    /// The models offered.
    pub fn offers(self) -> &'a [ModelOffer] {
        &self.0.inner.turns.offers
    }

    /// Checks a model/reasoning choice against the offers; returns the resolved model id.
    pub fn check_selection(self, model: Option<&str>, reasoning: Option<&str>) -> Result<String> {
        self.0.inner.turns.check_selection(model, reasoning)
    }

    /// Sends a user message: starts a turn when the chat is idle, otherwise saves it as queued
    /// (or as a steer for the running turn, from its driving user). Who may write the chat is
    /// decided in the same store operation ([`Error::Forbidden`], [`Error::ChannelChat`]); a
    /// message id the chat has already is [`Error::DuplicateMessage`].
    pub async fn send(self, mut req: SendMessage) -> Result<Sent> {
        // Its files: each one of this chat's (or a `data:` URL), within the limits.
        crate::agent::files::check_file_parts(
            self.0.store(),
            &self.0.config().files,
            &req.chat_id,
            &mut req.parts,
        )
        .await?;
        let chat = req.chat_id.clone();
        let id = req.id.clone();
        match self.0.inner.turns.send(req, true).await? {
            SendResult::Started(h) => Ok(Sent::Started(h)),
            SendResult::Queued {
                message_id,
                delivery,
            } => Ok(Sent::Queued {
                message_id,
                delivery,
            }),
            SendResult::Duplicate => Err(Error::DuplicateMessage {
                chat_id: chat,
                message_id: id.unwrap_or_default(),
            }),
        }
    }

    /// Runs a turn on the chat's latest messages without queueing: rejects with
    /// [`Error::TurnInProgress`] while a turn runs or a question waits.
    pub async fn generate(
        self,
        chat_id: &ChatId,
        parts: Vec<MessagePart>,
        author: Option<UserId>,
    ) -> Result<TurnHandle> {
        let req = SendMessage {
            chat_id: chat_id.clone(),
            id: None,
            parts,
            author,
            delivery: crate::model::Delivery::Queue,
            model: None,
            reasoning: None,
            channel: None,
            speaker: None,
            context: None,
        };
        match self.0.inner.turns.send(req, false).await? {
            SendResult::Started(h) => Ok(h),
            _ => Err(Error::TurnInProgress {
                chat_id: chat_id.clone(),
            }),
        }
    }

    /// If the chat is idle (its lease free or run out) and has queued messages, promotes the
    /// oldest and runs it (in the background). Returns whether a turn was started.
    pub async fn kick(self, chat_id: &ChatId) -> Result<bool> {
        self.0.inner.turns.run_queue(chat_id).await
    }

    /// Stops the running turn of `chat` when `by` is the user driving it (a turn without a
    /// driver — an anonymous caller's — only by an anonymous caller): it stops at the next step
    /// boundary, a streaming model answer is cut off, and what it produced is kept with a
    /// [`STOPPED_TEXT`] mark. Only a turn running in this process can be stopped. The caller checks
    /// that `by` may write `chat`.
    ///
    /// [`STOPPED_TEXT`]: crate::agent::STOPPED_TEXT
    pub fn stop(self, chat: &ChatId, by: Option<&UserId>) -> StopOutcome {
        self.0.inner.turns.stop(chat, by, true)
    }

    /// Opens a chat for an external agent (`agent`: its FrogBot user, `None` for an anonymous
    /// caller): a web chat of the given id, or a platform thread — for a channel or a person the
    /// channel starts one with `text` as its first message, idempotent on `key`. People's
    /// messages there then reach the agent's inbox instead of a model. A chat bound to another
    /// agent is `Forbidden`.
    pub async fn open_chat(
        self,
        agent: Option<&UserId>,
        place: crate::agent::AgentPlace,
        text: &str,
        key: &str,
    ) -> Result<ChatRow> {
        self.0
            .authorize(agent, crate::policy::Action::OpenAgentChat(place.target()))?;
        self.0
            .inner
            .channels
            .open_agent_chat(agent, place, text, key)
            .await
    }

    /// Binds an ask's chat to its asker, so people's later messages in the ask's thread reach
    /// the asker's inbox (a chat bound to someone else is left as it is).
    pub async fn bind_ask_chat(self, chat: &crate::store::NewChat, asker: Option<&UserId>) {
        self.0.inner.channels.bind_for_ask(chat, asker).await
    }

    /// The chat `chat`, once `agent` may write it ([`ChatAct::AgentWrite`]) and it is bound to
    /// `agent` (`NotFound` for a chat that is not), with the channels that change its messages.
    async fn writable(
        self,
        chat: &ChatId,
        agent: Option<&UserId>,
    ) -> Result<(&'a Arc<Channels>, ChatRow)> {
        self.0
            .authorize_chat(agent, chat, ChatAct::AgentWrite)
            .await?;
        let channels = &self.0.inner.channels;
        Ok((channels, channels.agent_chat(chat, agent).await?))
    }

    /// Posts an agent message (title, text, blocks; optionally pinned) in the agent's chat; the
    /// same message id again returns the message already posted. Shown on the chat's platform
    /// at once (a worker retries what fails).
    pub async fn post(
        self,
        chat: &ChatId,
        agent: Option<&UserId>,
        message: crate::agent::AgentMessage,
    ) -> Result<crate::model::UiMessage> {
        let (channels, row) = self.writable(chat, agent).await?;
        channels.post_agent_message(&row, agent, message).await
    }

    /// Edits one of the agent's messages (its content, or one block by id), in place on the
    /// platform.
    pub async fn edit(
        self,
        chat: &ChatId,
        agent: Option<&UserId>,
        message_id: &str,
        edit: crate::agent::MessageEdit,
    ) -> Result<crate::model::UiMessage> {
        let (channels, _) = self.writable(chat, agent).await?;
        channels.edit_agent_message(chat, message_id, edit).await
    }

    /// Deletes one of the agent's messages: removed on the platform and from every view (a
    /// tombstone stays). Deleting an ask's message whose question waits withdraws it.
    pub async fn delete(
        self,
        chat: &ChatId,
        agent: Option<&UserId>,
        message_id: &str,
    ) -> Result<()> {
        let (channels, row) = self.writable(chat, agent).await?;
        if row.awaiting_message_id.as_deref() == Some(message_id) {
            self.0.questions().withdraw(chat, message_id).await?;
            return Ok(());
        }
        channels.agent_delete(chat, agent, message_id).await
    }

    /// Pins the agent's message `message` under `key` (replacing the key's pin), or unpins
    /// `key` (`None`).
    pub async fn pin(
        self,
        chat: &ChatId,
        agent: Option<&UserId>,
        key: &str,
        message: Option<&str>,
    ) -> Result<Option<crate::model::UiMessage>> {
        let (channels, _) = self.writable(chat, agent).await?;
        channels.pin_agent_message(chat, key, message).await
    }

    /// The oldest messages and events waiting in `agent`'s inbox (of one chat, or all its
    /// chats), at most `limit`; each is marked Seen (on its platform too) and never returned
    /// again.
    pub async fn inbox(
        self,
        agent: Option<&UserId>,
        chat: Option<&ChatId>,
        limit: u32,
    ) -> Result<Vec<crate::agent::InboxItem>> {
        self.0.authorize(agent, crate::policy::Action::ReadInbox)?;
        self.0.inner.channels.inbox(agent, chat, limit).await
    }

    /// [`Agents::inbox`], waiting up to `wait` for something to arrive (woken by this process's
    /// arrivals, and looking at the store every second for other processes').
    pub async fn inbox_wait(
        self,
        agent: Option<&UserId>,
        chat: Option<&ChatId>,
        limit: u32,
        wait: Duration,
    ) -> Result<Vec<crate::agent::InboxItem>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.0.inner.channels.inbox_arrived.notified();
            let items = self.inbox(agent, chat, limit).await?;
            if !items.is_empty() || tokio::time::Instant::now() >= deadline {
                return Ok(items);
            }
            let next = (tokio::time::Instant::now() + Duration::from_secs(1)).min(deadline);
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(next) => {}
            }
        }
    }

    /// The agent acknowledges a person's message in its chat: Working or Done.
    pub async fn ack(
        self,
        chat: &ChatId,
        agent: Option<&UserId>,
        message_id: &str,
        ack: crate::model::Ack,
    ) -> Result<()> {
        let (channels, _) = self.writable(chat, agent).await?;
        channels.agent_ack(chat, message_id, ack).await
    }
}
