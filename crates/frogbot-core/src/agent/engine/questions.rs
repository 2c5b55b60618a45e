//! `engine.questions()`: question records and their outcomes — settling (answers and
//! dismissals), withdrawal, expiry, a chat's open and live records, an ask's status.

use super::*;
use crate::model::{QUESTION_TOOL, Role};

/// The questions: records, answers, withdrawals, expiry, asks' status ([`Engine::questions`]).
#[derive(Clone, Copy, Debug)]
pub struct Questions<'a>(pub(super) &'a Engine);

impl<'a> Questions<'a> {
    /// Records an answer or a dismissal of a waiting question call (the first one wins), then
    /// continues the turn when the step's last waiting call is answered, or ends it on a dismissal.
    pub async fn settle(
        self,
        chat: &ChatId,
        tool_call_id: &str,
        settle: Settle,
        actor: Option<Actor>,
    ) -> Result<Settled> {
        self.0
            .inner
            .questions
            .settle(chat, tool_call_id, settle, actor, None)
            .await
    }

    /// [`Questions::settle`] by a caller that has just read the chat (to decide who may answer):
    /// `read` is that row, which spares the settle reading it again. Read it before calling, never
    /// keep it: the question is looked up after it.
    pub async fn settle_read(
        self,
        read: ChatRow,
        tool_call_id: &str,
        settle: Settle,
        actor: Option<Actor>,
    ) -> Result<Settled> {
        let chat = read.chat_id.clone();
        self.0
            .inner
            .questions
            .settle(&chat, tool_call_id, settle, actor, Some(read))
            .await
    }

    /// Withdraws the questions of a waiting reply (cancelled) and returns the chat to idle.
    /// `false` when `message_id` is not the waiting reply, or when an answer (or another
    /// withdrawal) gave every question its outcome first.
    pub async fn withdraw(self, chat: &ChatId, message_id: &str) -> Result<bool> {
        self.0.inner.questions.withdraw(chat, message_id).await
    }

    /// Records `expired` (with the defaults when a question has them) on the waiting calls of
    /// `message_id` whose deadline passed, and continues.
    pub async fn expire(self, chat: &ChatId, message_id: &str) -> Result<()> {
        self.0.inner.questions.expire(chat, message_id).await
    }

    /// Whether an ask's question waits, from its question record alone (no messages read):
    /// `Some(true)` while it is open, `Some(false)` once it has an outcome, `None` without a
    /// record (the ask is queued, unknown, or its record is gone). What an ask's wait polls.
    pub async fn ask_waits(self, id: &crate::agent::ask::AskId) -> Result<Option<bool>> {
        Ok(self.ask_record(id).await?.map(|q| q.outcome.is_none()))
    }

    /// An ask's question record, while it lives.
    async fn ask_record(self, id: &crate::agent::ask::AskId) -> Result<Option<QuestionRow>> {
        Ok(self
            .0
            .store()
            .get_question(
                &id.chat,
                &crate::agent::ask::ask_call_id(&id.message),
                self.0.now(),
            )
            .await?)
    }

    /// An ask's status (`None`: no such ask in that chat): its question record's outcome while
    /// the record lives, else what the reply's tool part says.
    pub async fn ask_status(
        self,
        id: &crate::agent::ask::AskId,
    ) -> Result<Option<crate::agent::ask::AskStatus>> {
        let messages: Vec<_> = self
            .0
            .chats()
            .messages(&id.chat)
            .await?
            .into_iter()
            .map(|m| m.message)
            .collect();
        let record = self.ask_record(id).await?.map(|q| (q.outcome, q.actor));
        Ok(crate::agent::ask::AskStatus::read(id, &messages, record))
    }

    /// The open question calls of the chat's waiting reply, in call order.
    pub async fn pending(self, chat: &ChatRow) -> Result<Vec<QuestionRow>> {
        let Some(message) = &chat.awaiting_message_id else {
            return Ok(vec![]);
        };
        Ok(self
            .0
            .store()
            .questions_of_message(&chat.chat_id, message, self.0.now())
            .await?
            .into_iter()
            .filter(|q| q.outcome.is_none())
            .collect())
    }

    /// The live question records of a chat's assistant messages that called the question tool,
    /// in message and call order.
    pub async fn of_chat(self, chat: &ChatId) -> Result<Vec<QuestionRow>> {
        let store = self.0.store();
        let now = self.0.now();
        let mut out = Vec::new();
        for m in store.list_messages(chat).await? {
            let asked = m.message.role == Role::Assistant
                && m.message
                    .parts
                    .iter()
                    .any(|p| matches!(p, MessagePart::Tool(t) if t.tool_name == QUESTION_TOOL));
            if asked {
                out.extend(store.questions_of_message(chat, &m.message.id, now).await?);
            }
        }
        Ok(out)
    }
}
