//! What an operator does to a database while servers run on it (`frogbot chats`, `show`, `jobs`,
//! `jobs retry`, `purge`): reads, reviving a dead job and the housekeeping purge, each one store
//! operation, through the engine like every other caller (nothing outside this crate reaches the
//! store).

use super::engine::Engine;
use crate::error::{Error, Result};
use crate::model::{ChatId, MessagePart, Millis, QUESTION_TOOL, Role};
use crate::store::{ChatFilter, ChatRow, Job, Purgeable, QuestionRow};

/// What [`Engine::revive_job`] did.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Revival {
    /// The dead job is live again, due now.
    Revived(Job),
    /// The job is live (due, or running): left as it is.
    Live(Job),
    /// No job has that id.
    Unknown,
}

impl Engine {
    /// Every owner's chats that `filter` lets through, state as of now, newest first.
    pub async fn find_chats(&self, filter: &ChatFilter) -> Result<Vec<ChatRow>> {
        self.store()
            .find_chats(filter, self.now())
            .await
            .map_err(Error::from)
    }

    /// The live jobs (soonest due first), or with `dead` the dead ones (oldest first).
    pub async fn jobs(&self, dead: bool, limit: u32) -> Result<Vec<Job>> {
        let store = self.store();
        if dead {
            store.dead_jobs(limit).await
        } else {
            store.live_jobs(limit).await
        }
        .map_err(Error::from)
    }

    /// Makes the dead job `id` live again, due now, its attempts reset (one store operation; a
    /// live or unknown id is then only read, to say which it is).
    pub async fn revive_job(&self, id: i64) -> Result<Revival> {
        let store = self.store();
        if let Some(job) = store.revive_job(id, self.now()).await? {
            self.job_scheduled(job.run_at);
            return Ok(Revival::Revived(job));
        }
        Ok(match store.get_job(id).await? {
            Some(job) => Revival::Live(job),
            None => Revival::Unknown,
        })
    }

    /// What [`Engine::housekeep`] would remove now, counted: expired question records and dead
    /// jobs older than the retention.
    pub async fn purgeable(&self) -> Result<Purgeable> {
        let now = self.now();
        self.store()
            .purgeable(now, now.saturating_sub(self.dead_job_retention_ms()))
            .await
            .map_err(Error::from)
    }

    /// The live question records of a chat's assistant messages that called the question tool,
    /// in message and call order.
    pub async fn chat_questions(&self, chat: &ChatId) -> Result<Vec<QuestionRow>> {
        let store = self.store();
        let now = self.now();
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

    /// How long a dead job is kept, in milliseconds.
    pub(crate) fn dead_job_retention_ms(&self) -> Millis {
        Millis::try_from(self.config().dead_job_retention.as_millis()).unwrap_or(Millis::MAX)
    }
}
