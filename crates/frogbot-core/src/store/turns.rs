//! The store's turns part, [`TurnStore`]: a message arriving (`send`), the turn lease, a turn's
//! steps, its wait on questions and its end, and the queue.

use async_trait::async_trait;

use super::*;
use crate::model::{ChatId, Millis};

/// The turns part of [`Store`]: messages arriving, turns, their leases, and the queue.
#[async_trait]
pub trait TurnStore: Send + Sync {
    /// Chats whose turn lease ran out without being released (a turn whose process stopped) and
    /// that wait on no question: at most `limit`, the longest expired first.
    async fn expired_leases(&self, now: Millis, limit: u32) -> Result<Vec<ChatId>>;

    /// A user message arrives: creates the chat or opens it for writing, then starts a turn with
    /// the message when the chat is idle, or saves it queued (a steer from the driving user while a
    /// turn runs). See [`SendOp`] and [`Sent`] for the rules; one transaction.
    async fn send(&self, op: &SendOp<'_>) -> Result<Sent>;

    /// Saves a step of the turn that holds `op.lease` (fenced), and joins the queued steers of the
    /// turn's driving user to the turn when `op.join_steers`.
    ///
    /// The one operation that may commit without waiting for the disk: a step checkpoint must
    /// survive the FrogBot process dying (what it is for), while a power loss may take the last
    /// steps of a running turn with it — the next operation that waits for the disk (the turn's
    /// end) makes them durable. Every other write method is durable when it returns.
    async fn checkpoint(&self, op: &CheckpointOp<'_>) -> Result<Checkpointed>;

    /// The turn stops to wait on questions: saves the reply as the chat's waiting message, creates
    /// the question records (and `op.job`, e.g. the expiry), and releases the lease.
    async fn await_answers(&self, op: &AwaitOp<'_>) -> Result<StoredMessage>;

    /// Ends the turn that holds `op.lease`: saves its last reply (when given), then releases the
    /// chat, or promotes the oldest queued message to start the next turn under the same lease
    /// driven by its sender, or — when handing on — releases it whatever is queued and schedules
    /// `op.mode`'s job if something is.
    async fn end_turn(&self, op: &EndTurnOp<'_>) -> Result<TurnEnded>;

    /// Takes an idle chat (its lease free, or expired: the turn it ended is marked interrupted)
    /// to run its queue: promotes the oldest queued message under the new lease, or releases the
    /// chat again when nothing is queued. `None` when a live turn holds it or a question waits.
    async fn take_chat(&self, chat: &ChatId, req: &LeaseRequest) -> Result<Option<Taken>>;

    /// Continues the turn whose reply `message_id` waits on questions, once every one of them has
    /// an outcome: takes the lease (free or expired) and clears the wait. See [`Resume`].
    async fn resume_turn(
        &self,
        chat: &ChatId,
        message_id: &str,
        req: &LeaseRequest,
    ) -> Result<Resume>;

    /// Extends a lease. [`StoreError::LeaseLost`] when it was taken over.
    async fn renew_lease(&self, lease: &mut Lease, ttl_ms: Millis, now: Millis) -> Result<()>;

    /// Ends a held lease now without releasing it (fenced), so the next taker treats its turn as
    /// interrupted: a process that stops with a turn still running hands the chat on at once.
    async fn expire_lease(&self, lease: &Lease, now: Millis) -> Result<()>;

    /// Changes a queued message's parts and/or delivery, for its author only.
    async fn edit_queued(&self, op: &QueuedOp<'_>, edit: &QueuedEdit) -> Result<QueuedChange>;

    /// Removes a queued message, for its author only.
    async fn delete_queued(&self, op: &QueuedOp<'_>) -> Result<QueuedChange>;
}
