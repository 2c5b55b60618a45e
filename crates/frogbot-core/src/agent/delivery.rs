//! What a channel thread is owed of a reply, and how its delivery is retried.
//!
//! A channel chat's turn that ends (or stops to wait on questions) writes a `deliver` job in the
//! same store operation that saves its reply ([`owed`]). The turn's process posts the reply in
//! the chat's show queue, retrying what the outbox marks [`Transient`] for half of
//! [`EngineConfig::delivery_grace`](super::EngineConfig::delivery_grace), then removes the job.
//! When the process dies or gives up first, any process's worker posts it once the grace is over
//! (the job's run-at), [`DELIVERY_MAX_ATTEMPTS`] times at most, then buries it (an error log and a
//! dead job operators see). Every attempt carries the same key, so platforms that can tell a
//! repeat (Matrix, Discord, Slack) post each piece once.
//!
//! The job's key is `deliver:{chat}:{reply}:{from}`, due after `delivery_grace`; each piece of a
//! split reply derives its own key (`Delivery::piece_key`). A worker's attempt carries
//! `Delivery::attempt ≥ 1`, so the outbox looks before posting where it can; failures marked
//! `Transient` wait at least the platform's `retry_after`, with backoff and jitter. The job is
//! announced when written (`Change::Job`), so a worker wakes at its run-at time, not at a poll.
//! Housekeeping reports dead jobs and purges expired question records and dead jobs older than
//! `dead_job_retention`. Each adapter's guarantee for a repeated attempt (exactly once on Matrix,
//! Discord and Slack; at least once on Telegram) is in `adapters/README.md`.
//!
//! A reply waiting on questions always has a job (even with no text before them): it is removed
//! only once the questions are drawn, and a worker that runs it posts the text and then draws them.
//! A take-over that marks a reply interrupted writes its job in the same transaction
//! (`LeaseRequest::interrupted`: the engine's rule, `InterruptedDelivery`, which the backend
//! calls).
//!
//! A thread's replies arrive in the order of their turns. In the chat's show queue, before posting,
//! the process asks the store for an earlier live `deliver` job of the chat
//! (`JobStore::earlier_job`, by key prefix and id): a reply owed before this one and not posted
//! makes this one wait (it is left to its own job, and a stream does not start). A worker that
//! claims a job with an earlier one pending defers it behind that one (`JobStore::defer_job`: the
//! claim is not counted as an attempt). A non-waiting reply's job is removed inside the show queue,
//! right after its post, so the next reply does not see it.
//!
//! Receiving is at least once too: Telegram's `getUpdates` offset (and its webhook's 200) is
//! confirmed only after the update was handed to the engine; Slack's HTTP mode answers 503 past
//! `max_pending` deliveries (Slack sends it again) instead of missing its 3-second ack; Discord's
//! unhandled gateway events are logged. The store's platform-message-id dedup makes a repeat
//! harmless.
//!
//! Not durable, by decision: acknowledgements, progress signs and the "queued" note (they describe
//! the moment; a lost one is replaced by the next), and engine notices (retried). A streamed
//! reply's final edit is retried like a post. A stream a crash cut off is found again by the drafts
//! noted on its reply (noted at each partial checkpoint, at the first text after a new message, and
//! with the turn's end or wait). Drafts belong to the reply's latest segment: a continuation after
//! answers starts with none, and a job for an earlier segment never draws over them. A recovery
//! edit that fails transiently fails the attempt (retried); a draft that cannot be edited for good
//! has the rest posted anew. A draft posted after the last note is not known: a kill then leaves it
//! with part of its text beside the reply posted again.

use std::time::Duration;

use super::jobs::EngineJob;
use crate::model::{BoxError, MessagePart, Millis, QUESTION_TOOL, ToolState, Transient, UiMessage};
use crate::store::{ChatRow, NewJob};

/// Why a turn ended, for what a channel tells the person.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EndWhy {
    /// A final answer, a failure (the reply carries the error) or a wait on questions.
    Reply,
    /// `max_steps` model steps ran without a final answer.
    MaxSteps,
    /// The driving user stopped it.
    Stopped,
}

/// How many times a worker tries a delivery before burying it (with [`job_backoff_ms`]: about
/// 25 minutes after the grace).
pub(crate) const DELIVERY_MAX_ATTEMPTS: i64 = 12;

/// The part index from which `reply`'s text is not posted yet: what follows its last answered
/// question, decided approval or answered elicitation (the text before one was posted when the
/// turn stopped to wait for it).
pub(crate) fn unposted_from(reply: &UiMessage) -> usize {
    reply
        .parts
        .iter()
        .rposition(|p| {
            matches!(p, MessagePart::Tool(t)
                if (t.tool_name == QUESTION_TOOL && t.state != ToolState::InputAvailable)
                    || (t.approval.is_some() && t.state != ToolState::ApprovalRequested)
                    || reply
                        .metadata
                        .elicitations
                        .get(&t.tool_call_id)
                        .is_some_and(|e| !e.waiting()))
        })
        .map_or(0, |i| i + 1)
}

/// The text of `reply`'s parts `from..to` (clamped to the parts it has).
pub(crate) fn text_of(reply: &UiMessage, from: usize, to: usize) -> String {
    let to = to.min(reply.parts.len());
    let from = from.min(to);
    reply.parts[from..to]
        .iter()
        .filter_map(|p| match p {
            MessagePart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The `file` parts among `reply`'s parts `from..to`, in order.
pub(crate) fn files_of(reply: &UiMessage, from: usize, to: usize) -> Vec<MessagePart> {
    let to = to.min(reply.parts.len());
    let from = from.min(to);
    reply.parts[from..to]
        .iter()
        .filter(|p| p.as_file().is_some())
        .cloned()
        .collect()
}

/// The delivery job a channel chat's turn end owes its thread (`None`: not a channel chat, or
/// nothing to post). A reply `waiting` on questions always owes one: its job also sees the
/// questions drawn (a process that died before drawing them leaves them to the job).
pub(crate) fn owed(
    chat: &ChatRow,
    reply: &UiMessage,
    why: EndWhy,
    waiting: bool,
) -> Option<EngineJob> {
    chat.channel.as_ref()?;
    let from = unposted_from(reply);
    let to = reply.parts.len();
    let max_steps = why == EndWhy::MaxSteps;
    let something = waiting
        || !text_of(reply, from, to).trim().is_empty()
        || !files_of(reply, from, to).is_empty()
        || reply.metadata.error.is_some()
        || max_steps
        || !reply.metadata.drafts.is_empty();
    something.then(|| EngineJob::Deliver {
        chat: chat.chat_id.clone(),
        message: reply.id.clone(),
        from,
        to,
        max_steps,
    })
}

/// What a reply marked interrupted owes its channel thread (the notice, and any text not
/// posted): the store writes it with the take-over ([`crate::store::InterruptedDelivery`]).
pub(crate) fn interrupted_job(chat: &ChatRow, reply: &UiMessage) -> Option<NewJob> {
    owed(chat, reply, EndWhy::Reply, false).map(|job| job.to_new_job(0))
}

/// The wait before retry `attempt` (1-based) of a worker's delivery: 10 s doubling, at most
/// 5 minutes.
pub(crate) fn job_backoff_ms(attempt: i64) -> Millis {
    let exp = u32::try_from(attempt.saturating_sub(1).clamp(0, 10)).unwrap_or(10);
    (10_000_i64 << exp).min(300_000)
}

/// How long to wait after `error` before trying again, or `None` when it is permanent: the
/// platform's own wait when it gave one, else `backoff`'s next step.
fn retry_wait(error: &BoxError, backoff: Duration) -> Option<Duration> {
    let transient = Transient::find(error.as_ref())?;
    Some(transient.wait().map_or(backoff, |w| w.max(backoff)))
}

/// What to do after an in-process attempt failed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Sleep this long, then try again.
    After(Duration),
    /// Worth retrying, but the budget is spent.
    OutOfTime,
    /// Not worth retrying.
    Permanent,
}

/// In-process retries within a time budget: backoff of 250 ms doubling to 10 s with jitter, at
/// least the platform's wait, only for [`Transient`] failures.
#[derive(Debug)]
pub(crate) struct Retries {
    started: tokio::time::Instant,
    budget: Duration,
    backoff: frogbot_channel::retry::Backoff,
}

impl Retries {
    /// Retries for at most `budget` from now.
    pub(crate) fn within(budget: Duration) -> Self {
        let backoff = frogbot_channel::RetryPolicy {
            attempts: u32::MAX,
            min_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(10),
            max_wait: Duration::from_secs(10),
            jitter: true,
        }
        .backoff();
        Self {
            started: tokio::time::Instant::now(),
            budget,
            backoff,
        }
    }

    /// What is left of the budget (an attempt may not run longer).
    pub(crate) fn left(&self) -> Duration {
        self.budget.saturating_sub(self.started.elapsed())
    }

    /// After `error`: wait and retry, or stop.
    pub(crate) fn next(&mut self, error: &BoxError) -> Next {
        let step = self.backoff.next().unwrap_or(Duration::from_secs(10));
        match retry_wait(error, step) {
            Some(wait) if self.started.elapsed() + wait < self.budget => Next::After(wait),
            Some(_) => Next::OutOfTime,
            None => Next::Permanent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Role, ToolPart};

    fn question(state: ToolState) -> MessagePart {
        MessagePart::Tool(ToolPart {
            tool_name: QUESTION_TOOL.into(),
            tool_call_id: "q1".into(),
            state,
            input: serde_json::json!({}),
            output: None,
            error_text: None,
            expires_at: None,
            approval: None,
        })
    }

    /// The text before a question was posted when the turn stopped to wait for it: once the
    /// question is answered, only what follows is posted (it was posted twice before).
    #[test]
    fn only_the_text_after_the_last_answered_question_is_owed() {
        let mut reply = UiMessage {
            id: "r".into(),
            role: Role::Assistant,
            parts: vec![
                MessagePart::text("Let me ask. "),
                question(ToolState::InputAvailable),
            ],
            metadata: Default::default(),
        };
        let from = unposted_from(&reply);
        assert_eq!(text_of(&reply, from, reply.parts.len()), "Let me ask. ");
        reply.parts[1] = question(ToolState::OutputAvailable);
        reply.parts.push(MessagePart::text("You chose green."));
        let from = unposted_from(&reply);
        assert_eq!(from, 2);
        assert_eq!(text_of(&reply, from, reply.parts.len()), "You chose green.");
        // Out-of-range indexes (a job for a reply that changed) read nothing, never panic.
        assert_eq!(text_of(&reply, 9, 20), "");
        assert_eq!(text_of(&reply, 3, 1), "");
    }

    #[test]
    fn worker_backoff_grows_and_is_bounded() {
        assert_eq!(job_backoff_ms(1), 10_000);
        assert_eq!(job_backoff_ms(2), 20_000);
        assert_eq!(job_backoff_ms(50), 300_000);
        assert_eq!(job_backoff_ms(-3), 10_000);
        let total: Millis = (1..DELIVERY_MAX_ATTEMPTS).map(job_backoff_ms).sum();
        assert!(total > 20 * 60_000 && total < 40 * 60_000, "{total}");
    }

    #[test]
    fn only_transient_errors_are_retried_and_their_wait_is_kept() {
        let b = Duration::from_millis(100);
        let permanent: BoxError = "channel_not_found".into();
        assert_eq!(retry_wait(&permanent, b), None);
        let t: BoxError = Box::new(Transient::new("429").retry_after(Duration::from_secs(2)));
        assert_eq!(retry_wait(&t, b), Some(Duration::from_secs(2)));
        let t: BoxError = Box::new(Transient::new("500"));
        assert_eq!(retry_wait(&t, b), Some(b));
    }
}
