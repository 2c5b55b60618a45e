//! The engine's durable jobs, typed: what each one does is one variant of [`EngineJob`], read in
//! one place ([`EngineJob::from_job`]) and written in one place ([`EngineJob::to_new_job`]).

use serde::{Deserialize, Serialize};

use crate::model::{ChatId, Millis, UserId};
use crate::store::{Job, NewJob};

/// A durable job of the engine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum EngineJob {
    /// Continue the turn whose questions were all answered while a (dead) process still held the
    /// chat: runs at the lease's expiry.
    ResumeChat {
        /// The chat.
        chat: ChatId,
        /// The waiting reply.
        message: String,
        /// Who answered (drives the continued turn).
        driver: Option<UserId>,
    },
    /// Run a chat's queue handed on by a process that stopped.
    RunQueue {
        /// The chat.
        chat: ChatId,
    },
    /// Retry a question's `updated` hook (the next question of a partial answer is not visible
    /// yet).
    QuestionUpdated {
        /// The chat.
        chat: ChatId,
        /// The question.
        call: String,
        /// The revision the retry is for (a retry that finds another does nothing).
        revision: u64,
    },
    /// Expire the overdue questions of a waiting reply.
    QuestionExpire {
        /// The chat.
        chat: ChatId,
        /// The waiting reply.
        message: String,
    },
    /// Post a reply's text (its parts `from..to`) to the chat's channel thread: written with the
    /// reply, removed by the process that posted it; run by a worker when that process did not.
    Deliver {
        /// The chat.
        chat: ChatId,
        /// The reply.
        message: String,
        /// Its first part not posted before.
        from: usize,
        /// Its parts' end when the job was written.
        to: usize,
        /// The turn ran out of steps (the thread is told).
        #[serde(default)]
        max_steps: bool,
    },
    /// Bring a channel's copy of an agent message up to what the chat holds (post it, edit it,
    /// delete it, pin or unpin it): written with every change, removed once shown.
    SyncMessage {
        /// The chat.
        chat: ChatId,
        /// The agent message.
        message: String,
    },
}

impl EngineJob {
    /// The job's kind, as stored.
    pub fn kind(&self) -> &'static str {
        match self {
            EngineJob::ResumeChat { .. } => "resume-chat",
            EngineJob::RunQueue { .. } => "run-queue",
            EngineJob::QuestionUpdated { .. } => "question-updated",
            EngineJob::QuestionExpire { .. } => "question-expire",
            EngineJob::Deliver { .. } => "deliver",
            EngineJob::SyncMessage { .. } => "sync-message",
        }
    }

    /// Its de-duplication key: one job per chat and subject.
    pub fn key(&self) -> String {
        match self {
            EngineJob::ResumeChat { chat, message, .. } => format!("resume-chat:{chat}:{message}"),
            EngineJob::RunQueue { chat } => format!("run-queue:{chat}"),
            EngineJob::QuestionUpdated { chat, call, .. } => {
                format!("question-updated:{chat}:{call}")
            }
            EngineJob::QuestionExpire { chat, message } => {
                format!("question-expire:{chat}:{message}")
            }
            EngineJob::Deliver {
                chat,
                message,
                from,
                ..
            } => format!("deliver:{chat}:{message}:{from}"),
            EngineJob::SyncMessage { chat, message } => format!("sync-message:{chat}:{message}"),
        }
    }

    /// The start of every `deliver` job's key of `chat` (see [`EngineJob::key`]).
    pub fn deliver_prefix(chat: &ChatId) -> String {
        format!("deliver:{chat}:")
    }

    /// The job to store, due at `run_at`.
    pub fn to_new_job(&self, run_at: Millis) -> NewJob {
        let mut payload = serde_json::to_value(self).expect("jobs serialise");
        if let Some(o) = payload.as_object_mut() {
            o.remove("kind");
        }
        NewJob {
            kind: self.kind().into(),
            key: Some(self.key()),
            payload,
            run_at,
        }
    }

    /// Reads a stored job. `None` for a kind this engine does not know, or a malformed payload.
    pub fn from_job(job: &Job) -> Option<Self> {
        let mut payload = job.payload.clone();
        payload
            .as_object_mut()?
            .insert("kind".into(), serde_json::Value::String(job.kind.clone()));
        serde_json::from_value(payload).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_read_back_what_they_wrote() {
        let chat = ChatId::new("c1").unwrap();
        for job in [
            EngineJob::ResumeChat {
                chat: chat.clone(),
                message: "m".into(),
                driver: Some(UserId::new("ada")),
            },
            EngineJob::RunQueue { chat: chat.clone() },
            EngineJob::QuestionUpdated {
                chat: chat.clone(),
                call: "c".into(),
                revision: 3,
            },
            EngineJob::QuestionExpire {
                chat: chat.clone(),
                message: "m".into(),
            },
            EngineJob::Deliver {
                chat: chat.clone(),
                message: "m".into(),
                from: 2,
                to: 5,
                max_steps: true,
            },
            EngineJob::SyncMessage {
                chat: chat.clone(),
                message: "m".into(),
            },
        ] {
            let new = job.to_new_job(5);
            let stored = Job {
                id: 1,
                kind: new.kind.clone(),
                key: new.key.clone(),
                payload: new.payload.clone(),
                run_at: 5,
                attempts: 1,
                claimed_by: None,
                claim_until: None,
                last_error: None,
                dead: false,
                generation: 0,
            };
            assert_eq!(EngineJob::from_job(&stored), Some(job));
        }
        // Payloads of the jobs stored before the jobs were typed read the same.
        let old = Job {
            id: 1,
            kind: "resume-chat".into(),
            key: None,
            payload: serde_json::json!({"chat": "c1", "message": "m", "driver": null}),
            run_at: 0,
            attempts: 0,
            claimed_by: None,
            claim_until: None,
            last_error: None,
            dead: false,
            generation: 0,
        };
        assert!(matches!(
            EngineJob::from_job(&old),
            Some(EngineJob::ResumeChat { .. })
        ));
        let unknown = Job {
            kind: "something-else".into(),
            ..old
        };
        assert_eq!(EngineJob::from_job(&unknown), None);
    }
}
