//! The question engine: how people answer the agent's `question` tool — with a channel's own
//! controls, or through the settle endpoint.
//!
//! FrogBot keeps the record, decides what is out of date, checks who is answering, records the
//! first answer once, retries a failed update as a durable job, closes the question and continues
//! the agent. The channel's [`ChannelQuestions`] hooks only draw and read platform controls.
//!
//! Every outcome — an HTTP settle, a click, a thread reply, an expiry, a withdrawal — takes one
//! path ([`Questions::conclude`]): record it (first wins, one store operation that also takes the
//! lock for closing), call `settled` outside any transaction, save the closed record, and
//! continue the turn. Concurrent interactions are decided optimistically: `parse` reads a record
//! at a revision, and the store records the answer only if the record is still at it (otherwise
//! the record is read and parsed again).
//!
//! Interactions are routed by platform message id, by the form locator, or by the thread's waiting
//! reply (a thread reply is offered only to the open questions of the waiting reply), checked for
//! staleness, parsed on the record as read, identity- and access-checked, and recorded only if the
//! record is still at the revision parsed. A partial answer is one `advance_question`, then the
//! `updated` hook; a failed `updated` schedules a `question-updated` retry
//! ([`UPDATED_FIRST_BACKOFF_MS`] doubling, at most [`UPDATED_MAX_RUNS`] runs). A settle that
//! arrives before a running turn has saved its question waits a moment for it (it reads the chat
//! before the record, so a save landing between the two reads is not missed). `render_pending`
//! draws the calls not drawn yet and saves them with one `mark_rendered`; a failing `render` is
//! [`Drawn::Failed`], so the turn's delivery job stays and draws them again.

pub use frogbot_channel::{FormTarget, InteractionOutcome};

/// What drawing a waiting reply's questions came to ([`Questions::render_pending`]).
#[derive(Debug)]
#[must_use]
pub(crate) enum Drawn {
    /// Drawn, or nothing was left to draw.
    Done,
    /// The hook's `render` failed (logged): they are drawn again later.
    Failed(crate::BoxError),
}
use std::sync::Arc;
use tracing::{Instrument, debug, error, info_span, warn};

use super::registry::{Channel, Registry, thread_of};
use super::turn::{Settle, Settled, Turns};
use crate::error::{Error, Item, Result, StaleReason};
use crate::model::{
    Actor, ChannelIdentity, ChannelQuestions, ChatId, ChatInfo, HookArgs, Interaction, ParseArgs,
    ParseResult, PlatformUser, QuestionCall, QuestionChange, QuestionMessage, QuestionOutcome,
    QuestionRecord, RenderArgs, RequestContext, SupportsArgs, Thread, TurnState,
    decode_question_modal_metadata, is_approval, millis_to_iso,
};
use crate::store::{
    AdvanceOp, Advanced, ChatRow, LockQuestionOp, LockRequest, QuestionLock, QuestionRow,
    QuestionUpdate, RecordOp, Recorded, RenderedCall, RenderedOp, UpdateQuestionOp,
};

use super::jobs::EngineJob;

/// The reason given to an interaction that arrives while the next question is still posting.
pub const STILL_POSTING: &str = "The next question is still posting — try again in a moment.";
/// `updated` retries: at most this many runs.
pub const UPDATED_MAX_RUNS: i64 = 10;
/// `updated` retries: the first backoff.
pub const UPDATED_FIRST_BACKOFF_MS: i64 = 5_000;
/// How long a question's lock is held for closing or posting before another process may take it.
const LOCK_TTL_MS: i64 = 30_000;
/// How long a settle waits for a question record a running turn is about to save.
const QUESTION_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How often an interaction reads and parses a record again when it changed under it.
const RETRIES: usize = 8;

/// Backoff of the `n`-th `updated` retry (n ≥ 1): 5 s, 10 s, 20 s, …
pub fn updated_backoff_ms(n: i64) -> i64 {
    UPDATED_FIRST_BACKOFF_MS.saturating_mul(1_i64 << (n - 1).clamp(0, 20))
}

/// The question engine.
pub(crate) struct Questions {
    pub(crate) turns: Arc<Turns>,
    pub(crate) registry: Arc<Registry>,
}

impl std::fmt::Debug for Questions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Questions").finish_non_exhaustive()
    }
}

fn call_of(q: &QuestionRow) -> QuestionCall {
    QuestionCall {
        tool_call_id: q.tool_call_id.clone(),
        input: q.input.clone(),
        expires_at: q.answer_deadline.map(crate::model::millis_to_iso),
    }
}

fn ha<'a>(
    call: &'a QuestionCall,
    question: &'a QuestionRecord,
    req: &'a RequestContext,
    thread: &'a Thread,
) -> HookArgs<'a> {
    HookArgs {
        call,
        question,
        req,
        thread,
    }
}

/// A record with a hook's change applied (`messages` replace the list; `state` replaces it).
fn apply_change(
    record: &QuestionRecord,
    change: Option<QuestionChange>,
    now: i64,
) -> QuestionRecord {
    let mut out = record.clone();
    if let Some(change) = change {
        if let Some(messages) = change.messages
            && !messages.is_empty()
        {
            out.messages = messages
                .into_iter()
                .map(|m| QuestionMessage {
                    posted_at: if m.posted_at.is_empty() {
                        millis_to_iso(now)
                    } else {
                        m.posted_at
                    },
                    ..m
                })
                .collect();
        }
        if change.state.is_some() {
            out.state = change.state;
        }
    }
    out
}

/// Who closes a recorded outcome: the hooks and thread of its channel, when this process serves it.
struct Closer {
    hooks: Arc<dyn ChannelQuestions>,
    thread: Thread,
}

impl Questions {
    fn store(&self) -> &crate::store::DynStore {
        &self.turns.store
    }

    fn now(&self) -> i64 {
        self.turns.now()
    }

    /// Whether `actor` may answer `q`: its `from` allows them; and for an approval, `from` names
    /// somebody (an approval asked of nobody — as an older process may have stored one — is
    /// approved by nobody), and an agent principal ([`crate::agent::EngineConfig::agents`])
    /// answers only when named there by its user id: an agent's channel identity, or an empty
    /// list, never lets it approve (the turn's own agent is never named, see `approvers_of`).
    fn may_answer(&self, q: &QuestionRow, actor: Option<&Actor>) -> bool {
        if !q.input.allows(actor) {
            return false;
        }
        if !q.input.questions.iter().any(is_approval) {
            return true;
        }
        if q.input.from.is_empty() {
            return false;
        }
        match actor.and_then(|a| a.user.as_ref()) {
            Some(u) if self.turns.config.agents.contains(u) => {
                q.input.from.iter().any(|f| f == u.as_str())
            }
            _ => true,
        }
    }

    /// Whether the model gets the question tool in a channel chat for the coming turn: when the
    /// channel defines questions and `supports` does not say no (an error is logged and means no).
    pub(crate) async fn offered_in(&self, chat: &ChatRow) -> bool {
        let Some(thread) = thread_of(chat) else {
            return true;
        };
        let Some(hooks) = self.registry.hooks(&thread.platform) else {
            return false;
        };
        match hooks.supports(SupportsArgs { thread: &thread }).await {
            Ok(ok) => ok,
            Err(e) => {
                error!(chat_id = %chat.chat_id, error = %e, "supports failed: questions not offered this turn");
                false
            }
        }
    }

    /// Resolves the participant behind an interaction or message and runs the access check.
    pub(crate) async fn identify(
        &self,
        channel: &Channel,
        chat: &ChatInfo,
        user: &PlatformUser,
    ) -> (Actor, bool) {
        let identity = ChannelIdentity {
            platform: channel.platform.clone(),
            user: user.clone(),
        };
        let resolved = match channel.identity.resolve(&identity).await {
            Ok(u) => u,
            Err(e) => {
                warn!(error = %e, "identity hook failed: treated as denied");
                return (
                    Actor {
                        user: None,
                        identity: Some(identity),
                    },
                    false,
                );
            }
        };
        let allowed = match channel.access.allow(resolved.as_ref(), chat).await {
            Ok(a) => a,
            Err(e) => {
                warn!(error = %e, "access check failed: denied");
                false
            }
        };
        (
            Actor {
                user: resolved,
                identity: Some(identity),
            },
            allowed,
        )
    }

    fn closer_for(&self, chat: &ChatRow) -> Option<Closer> {
        let thread = thread_of(chat)?;
        let hooks = self.registry.hooks(&thread.platform)?;
        Some(Closer { hooks, thread })
    }

    // ---- the one outcome path ------------------------------------------------------------------

    /// Records `outcome` on a question (first wins; fenced by `expected_revision` when given),
    /// closes it with its channel's `settled` (outside any transaction) and continues the turn
    /// once every question of the reply has an outcome. The record's outcome, when another one was
    /// first, comes back as `Err(Settled)`.
    async fn conclude(
        &self,
        chat: &ChatRow,
        q: &QuestionRow,
        outcome: &QuestionOutcome,
        actor: Option<&Actor>,
        expected_revision: Option<u64>,
        req: &RequestContext,
    ) -> Result<Concluded> {
        let closer = q.rendered.then(|| self.closer_for(chat)).flatten();
        let holder = self.turns.holder();
        let driver = actor.and_then(|a| a.user.clone());
        // Without a `settled` hook to call first, the turn continues in the same transaction as
        // the record (one commit per answer).
        let resume = closer
            .is_none()
            .then(|| self.turns.lease_request(driver.clone()));
        let recorded = self
            .store()
            .record_outcome(&RecordOp {
                chat: &q.chat_id,
                tool_call_id: &q.tool_call_id,
                outcome,
                actor,
                expected_revision,
                lock: closer.as_ref().map(|_| LockRequest {
                    holder: &holder,
                    ttl_ms: LOCK_TTL_MS,
                }),
                resume: resume.as_ref(),
                now: self.now(),
            })
            .await?;
        let (question, lock, resumed) = match recorded {
            Recorded::Won {
                question,
                lock,
                resumed,
            } => (question, lock, resumed),
            Recorded::Settled { question } => return Ok(Concluded::Settled(Box::new(question))),
            Recorded::Changed { question } => return Ok(Concluded::Changed(Box::new(question))),
            Recorded::Gone => return Ok(Concluded::Gone),
        };
        crate::metrics::question_concluded(chat, &question, outcome);
        if let (Some(closer), Some(lock), None) = (&closer, &lock, &resumed) {
            // The card shows the outcome before the turn goes on; saving it closed and
            // continuing the turn are two independent writes, made at once (one group commit
            // on SQLite, two connections on PostgreSQL) — an approved call starts sooner.
            let change = self
                .settled_change(closer, &question, actor, outcome, req)
                .await;
            let (_, state) = tokio::join!(
                self.save_closed(closer, lock, &question, change),
                self.after_outcome(chat, &q.message_id, actor)
            );
            return Ok(Concluded::Won(state?));
        }
        if let (Some(closer), Some(lock)) = (&closer, &lock) {
            self.close(closer, lock, &question, actor, outcome, req)
                .await;
        }
        let state = match resumed {
            Some(resumed) => {
                let state = self
                    .turns
                    .resumed(&chat.chat_id, &q.message_id, driver, resumed)
                    .await?;
                if state == TurnState::Awaiting {
                    // A failing render (logged) is drawn again with the next message.
                    let _ = self.render_pending(&chat.chat_id).await?;
                }
                state
            }
            None => self.after_outcome(chat, &q.message_id, actor).await?,
        };
        Ok(Concluded::Won(state))
    }

    /// After an outcome: continue the turn once every question of the reply has one; while some
    /// are open, draw those not drawn yet (a piece may ask a set one call at a time).
    async fn after_outcome(
        &self,
        chat: &ChatRow,
        message_id: &str,
        actor: Option<&Actor>,
    ) -> Result<TurnState> {
        let driver = actor.and_then(|a| a.user.clone());
        let state = self.turns.resume(&chat.chat_id, message_id, driver).await?;
        debug!(?state, "after the outcome");
        if state == TurnState::Awaiting {
            // The next call of a set: a failing render (logged) is drawn again with the next
            // message.
            let _ = self.render_pending(&chat.chat_id).await?;
        }
        Ok(state)
    }

    /// Calls `settled` and saves its change, closing the question and releasing its lock (a failing
    /// `settled` is logged and the question closes without a change).
    async fn close(
        &self,
        closer: &Closer,
        lock: &QuestionLock,
        q: &QuestionRow,
        actor: Option<&Actor>,
        outcome: &QuestionOutcome,
        req: &RequestContext,
    ) {
        let change = self.settled_change(closer, q, actor, outcome, req).await;
        self.save_closed(closer, lock, q, change).await;
    }

    /// The `settled` hook's change to the record (`None` when it failed: logged).
    async fn settled_change(
        &self,
        closer: &Closer,
        q: &QuestionRow,
        actor: Option<&Actor>,
        outcome: &QuestionOutcome,
        req: &RequestContext,
    ) -> Option<QuestionChange> {
        let call = call_of(q);
        match closer
            .hooks
            .settled(ha(&call, &q.record, req, &closer.thread), outcome.by(actor))
            .await
        {
            Ok(c) => c,
            Err(e) => {
                error!(error = %e, "settled failed: the question closes without a change");
                None
            }
        }
    }

    /// Saves the closed question with `change`, releasing its lock.
    async fn save_closed(
        &self,
        closer: &Closer,
        lock: &QuestionLock,
        q: &QuestionRow,
        change: Option<QuestionChange>,
    ) {
        let update = QuestionUpdate {
            record: Some(apply_change(&q.record, change, self.now())),
            closed: Some(true),
            ..Default::default()
        };
        if let Err(e) = self
            .store()
            .update_question(&UpdateQuestionOp {
                lock,
                update: &update,
                link_platform: Some(&closer.thread.platform),
                job: None,
                keep_lock: false,
                now: self.now(),
            })
            .await
        {
            error!(error = %e, "saving the closed question failed");
        }
    }

    /// A question answered but not closed (the process stopped during `settled`) is closed now,
    /// with `actor: null` and the stored outcome.
    async fn close_if_needed(&self, closer: &Closer, q: &QuestionRow) {
        if q.outcome.is_none() || q.closed {
            return;
        }
        let Ok(Some((lock, fresh))) = self
            .store()
            .lock_question(&LockQuestionOp {
                chat: &q.chat_id,
                tool_call_id: &q.tool_call_id,
                lock: LockRequest {
                    holder: &self.turns.holder(),
                    ttl_ms: LOCK_TTL_MS,
                },
                now: self.now(),
            })
            .await
        else {
            return;
        };
        match (fresh.closed, fresh.outcome.clone()) {
            (false, Some(outcome)) => {
                self.close(
                    closer,
                    &lock,
                    &fresh,
                    None,
                    &outcome,
                    &RequestContext::default(),
                )
                .await;
            }
            _ => {
                let _ = self.store().unlock_question(&lock).await;
            }
        }
    }

    /// Calls `settled` for outcomes recorded without a close (by a process that stopped, or one
    /// that does not serve the channel).
    async fn close_outcomes_of(&self, chat: &ChatRow, message_id: &str) {
        let Some(closer) = self.closer_for(chat) else {
            return;
        };
        let Ok(questions) = self
            .store()
            .questions_of_message(&chat.chat_id, message_id, self.now())
            .await
        else {
            return;
        };
        for q in questions.iter().filter(|q| q.rendered) {
            self.close_if_needed(&closer, q).await;
        }
    }

    // ---- HTTP, expiry, withdrawal ----------------------------------------------------------------

    /// Records an answer or a dismissal of a waiting question call (the first one wins), then
    /// continues the turn when the step's last waiting call is answered, or ends it on a dismissal.
    pub(crate) async fn settle(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        settle: Settle,
        actor: Option<Actor>,
        read: Option<ChatRow>,
    ) -> Result<Settled> {
        let Some((q, row)) = self.question_soon(chat, tool_call_id, read).await? else {
            return Err(Error::NotFound {
                item: Item::ToolCall,
                id: tool_call_id.into(),
            });
        };
        let now = self.now();
        if q.outcome.is_some() {
            return Err(Error::Stale {
                tool_call_id: tool_call_id.into(),
                reason: StaleReason::Settled,
            });
        }
        if !self.may_answer(&q, actor.as_ref()) {
            return Err(Error::Forbidden {
                chat_id: chat.clone(),
            });
        }
        let outcome = match settle {
            Settle::Answer(output) => {
                q.input
                    .check_output(&output)
                    .map_err(|reason| Error::InvalidAnswer { reason })?;
                QuestionOutcome::Answered(output)
            }
            Settle::Dismiss => QuestionOutcome::Dismissed,
        };
        if q.answer_deadline.is_some_and(|d| d <= now) {
            self.expire(chat, &q.message_id).await?;
            return Err(Error::Stale {
                tool_call_id: tool_call_id.into(),
                reason: StaleReason::Expired,
            });
        }
        // The row read with the record: the outcome path uses only what never changes (its id,
        // its channel thread).
        let Some(row) = row else {
            return Err(Error::NotFound {
                item: Item::Chat,
                id: chat.to_string(),
            });
        };
        let req = RequestContext {
            user: actor.as_ref().and_then(|a| a.user.clone()),
            identity: None,
        };
        match self
            .conclude(&row, &q, &outcome, actor.as_ref(), None, &req)
            .await?
        {
            Concluded::Won(state) => Ok(Settled { outcome, state }),
            Concluded::Gone => Err(Error::NotFound {
                item: Item::ToolCall,
                id: tool_call_id.into(),
            }),
            Concluded::Settled(_) | Concluded::Changed(_) => Err(Error::Stale {
                tool_call_id: tool_call_id.into(),
                reason: StaleReason::Settled,
            }),
        }
    }

    /// A question record, with its chat's row as read just before it; when there is none yet but a
    /// turn of the chat runs, waits a moment for it: a client that saw the question streamed may
    /// answer before the turn has saved it.
    async fn question_soon(
        &self,
        chat: &ChatId,
        tool_call_id: &str,
        mut read: Option<ChatRow>,
    ) -> Result<Option<(QuestionRow, Option<ChatRow>)>> {
        let deadline = tokio::time::Instant::now() + QUESTION_WAIT;
        let mut pause = std::time::Duration::from_millis(2);
        loop {
            // The chat first, then the record: the turn saves its questions and releases the chat
            // in one operation, so a turn seen running before the look-up either had saved the
            // record already or is still to — never "not running, and no record" by a race
            // between the two reads. A row the caller read just before counts as the first read.
            let row = match read.take() {
                Some(row) => Some(row),
                None => self.store().get_chat(chat).await?,
            };
            let running = row
                .as_ref()
                .is_some_and(|r| r.live_lease(self.now()).is_some());
            if let Some(q) = self
                .store()
                .get_question(chat, tool_call_id, self.now())
                .await?
            {
                return Ok(Some((q, row)));
            }
            if !running || tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(std::time::Duration::from_millis(50));
        }
    }

    /// Withdraws the questions of a waiting reply (cancelled) and returns the chat to idle (queued
    /// messages then promote). `false` when `message_id` is not the waiting reply, or when every
    /// question of it had its outcome first (an answer or another withdrawal won the race: the
    /// turn is continued all the same, in case the process that recorded it stopped).
    pub(crate) async fn withdraw(&self, chat: &ChatId, message_id: &str) -> Result<bool> {
        let Some(row) = self.store().get_chat(chat).await? else {
            return Ok(false);
        };
        if row.awaiting_message_id.as_deref() != Some(message_id) {
            return Ok(false);
        }
        let req = RequestContext::default();
        let mut concluded = false;
        for q in self
            .store()
            .questions_of_message(chat, message_id, self.now())
            .await?
        {
            if q.outcome.is_none() {
                let c = self
                    .conclude(&row, &q, &QuestionOutcome::Cancelled, None, None, &req)
                    .await?;
                concluded |= matches!(c, Concluded::Won(_));
            }
        }
        if !concluded {
            // Every outcome was recorded already (e.g. by a process that stopped): continue.
            self.close_outcomes_of(&row, message_id).await;
            self.after_outcome(&row, message_id, None).await?;
        }
        Ok(concluded)
    }

    /// Records `expired` (with the question's defaults when it has them) on the waiting calls of
    /// `message_id` whose deadline passed, and continues.
    pub(crate) async fn expire(&self, chat: &ChatId, message_id: &str) -> Result<()> {
        let now = self.now();
        let Some(row) = self.store().get_chat(chat).await? else {
            return Ok(());
        };
        let req = RequestContext::default();
        for q in self
            .store()
            .questions_of_message(chat, message_id, now)
            .await?
        {
            if q.outcome.is_none() && q.answer_deadline.is_some_and(|d| d <= now) {
                let outcome = QuestionOutcome::Expired(q.input.default_output());
                self.conclude(&row, &q, &outcome, None, None, &req).await?;
            }
        }
        Ok(())
    }

    // ---- channel interactions --------------------------------------------------------------------

    /// Finds the questions an interaction may belong to, in call order.
    async fn route(
        &self,
        platform: &str,
        thread: Option<&str>,
        interaction: &Interaction,
    ) -> Result<Vec<QuestionRow>> {
        let store = self.store();
        let now = self.now();
        match interaction {
            Interaction::Action { event } => store
                .questions_by_platform_message(platform, &event.message_id, now)
                .await
                .map_err(Error::from),
            Interaction::ModalSubmit { event } => {
                if let Some(id) = &event.related_message_id {
                    return store
                        .questions_by_platform_message(platform, id, now)
                        .await
                        .map_err(Error::from);
                }
                let Some(loc) = event
                    .private_metadata
                    .as_deref()
                    .and_then(decode_question_modal_metadata)
                else {
                    return Ok(vec![]);
                };
                let found = store
                    .questions_by_platform_message(platform, &loc.message_id, now)
                    .await?;
                // The locator only finds the question: it must be of that conversation.
                let Some(chat) = store.get_channel_chat(platform, &loc.thread_id).await? else {
                    return Ok(vec![]);
                };
                Ok(found
                    .into_iter()
                    .filter(|q| q.chat_id == chat.chat_id)
                    .collect())
            }
            Interaction::Message { .. } => {
                // A thread reply may answer only an open question of the reply that waits: once
                // a question is settled, replies in its thread are the agent's again.
                let Some(thread) = thread else {
                    return Ok(vec![]);
                };
                let Some(row) = store.get_channel_chat(platform, thread).await? else {
                    return Ok(vec![]);
                };
                let Some(message_id) = row.awaiting_message_id else {
                    return Ok(vec![]);
                };
                Ok(store
                    .questions_of_message(&row.chat_id, &message_id, now)
                    .await?
                    .into_iter()
                    .filter(|q| q.rendered && q.outcome.is_none())
                    .collect())
            }
        }
    }

    /// Handles a click, a form submission or a thread reply from `platform` (in `thread`, when the
    /// platform says). For a thread reply, anything but [`InteractionOutcome::Ignored`] means it was
    /// consumed and must not reach the agent as a message.
    pub(crate) async fn handle_interaction(
        &self,
        platform: &str,
        thread: Option<&str>,
        interaction: &Interaction,
    ) -> Result<InteractionOutcome> {
        let span = info_span!(
            "interaction",
            platform,
            kind = interaction.kind(),
            chat_id = tracing::field::Empty,
            question_id = tracing::field::Empty
        );
        self.handle_interaction_inner(platform, thread, interaction, span.clone())
            .instrument(span)
            .await
    }

    async fn handle_interaction_inner(
        &self,
        platform: &str,
        thread: Option<&str>,
        interaction: &Interaction,
        span: tracing::Span,
    ) -> Result<InteractionOutcome> {
        let Some(channel) = self.registry.get(platform) else {
            warn!("interaction for a platform this process does not serve; ignored");
            return Ok(InteractionOutcome::Ignored);
        };
        let Some(hooks) = channel.questions.clone() else {
            return Ok(InteractionOutcome::Ignored);
        };
        let mut candidates = self.route(platform, thread, interaction).await?;
        // Open questions first: a reply that fits an open call answers it rather than going stale
        // on an answered call of the same step.
        candidates.sort_by_key(|q| q.outcome.is_some());
        if candidates.is_empty() {
            if matches!(interaction, Interaction::Message { .. }) {
                return Ok(InteractionOutcome::Ignored);
            }
            if let Some(thread) = thread
                && let Some(outcome) = self
                    .still_drawing(platform, thread, interaction, &hooks)
                    .await?
            {
                return Ok(outcome);
            }
            debug!("interaction matches no live question; ignored");
            return Ok(InteractionOutcome::Ignored);
        }
        let no_req = RequestContext::default();
        for q in candidates {
            let Some(chat) = self.store().get_chat(&q.chat_id).await? else {
                continue;
            };
            let Some(thread_v) = thread_of(&chat) else {
                continue;
            };
            // An answer only counts in the conversation the question was posted in.
            if thread_v.platform != platform || thread.is_some_and(|t| t != thread_v.id) {
                debug!(chat_id = %q.chat_id, "interaction from another conversation; ignored for this question");
                continue;
            }
            span.record("chat_id", q.chat_id.as_str());
            span.record("question_id", q.tool_call_id.as_str());
            let closer = Closer {
                hooks: hooks.clone(),
                thread: thread_v.clone(),
            };
            let call = call_of(&q);
            let current = q.record.current().map(|m| m.id.clone());
            // Clicks and forms from a message that is not the current one are stale (checked here,
            // before parse).
            let from_message = match interaction {
                Interaction::Action { event } => Some(event.message_id.clone()),
                Interaction::ModalSubmit { event } => {
                    event.related_message_id.clone().or_else(|| {
                        event
                            .private_metadata
                            .as_deref()
                            .and_then(decode_question_modal_metadata)
                            .map(|l| l.message_id)
                    })
                }
                Interaction::Message { .. } => None,
            };
            if let Some(from) = &from_message
                && current.as_deref() != Some(from.as_str())
            {
                return Ok(self.stale(&closer, &q, interaction, &no_req).await);
            }
            let settled = q.outcome.is_some();
            let first = hooks.parse(ParseArgs {
                call: &call,
                interaction,
                question: &q.record,
                settled,
            });
            if first == ParseResult::Ignore {
                continue;
            }
            if settled || first == ParseResult::Stale {
                return Ok(self.stale(&closer, &q, interaction, &no_req).await);
            }
            // Who is answering? (The channel's check, then the question's own `from` list.)
            let (actor, allowed) = self
                .identify(&channel, &chat.info(), interaction.user())
                .await;
            let allowed = allowed && self.may_answer(&q, Some(&actor));
            let req = RequestContext {
                user: actor.user.clone(),
                identity: actor.identity.clone(),
            };
            if !allowed {
                let _ = hooks
                    .denied(ha(&call, &q.record, &req, &thread_v), interaction)
                    .await
                    .map_err(|e| warn!(error = %e, "denied hook failed"));
                return Ok(InteractionOutcome::Denied);
            }
            return self.act(&closer, &chat, q, interaction, &actor, &req).await;
        }
        Ok(InteractionOutcome::Ignored)
    }

    /// A click or form that matches no recorded question message, in a thread whose waiting
    /// reply has a question being drawn: the platform showed the question (a person can click
    /// it) before the engine recorded where. Told [`STILL_POSTING`] (the `rejected` hook), so the
    /// click is neither lost silently nor taken as stale; the next one finds the record. `None`
    /// when the thread has no question being drawn.
    async fn still_drawing(
        &self,
        platform: &str,
        thread: &str,
        interaction: &Interaction,
        hooks: &Arc<dyn ChannelQuestions>,
    ) -> Result<Option<InteractionOutcome>> {
        let store = self.store();
        let Some(chat) = store.get_channel_chat(platform, thread).await? else {
            return Ok(None);
        };
        let (Some(message), Some(thread_v)) = (&chat.awaiting_message_id, thread_of(&chat)) else {
            return Ok(None);
        };
        let drawing = store
            .questions_of_message(&chat.chat_id, message, self.now())
            .await?
            .into_iter()
            .find(|q| !q.rendered && q.outcome.is_none());
        let Some(q) = drawing else {
            return Ok(None);
        };
        debug!(chat_id = %chat.chat_id, question_id = %q.tool_call_id, "interaction before its question was recorded; told it is still posting");
        let call = call_of(&q);
        let req = RequestContext::default();
        let _ = hooks
            .rejected(
                ha(&call, &q.record, &req, &thread_v),
                interaction,
                STILL_POSTING,
            )
            .await
            .map_err(|e| warn!(error = %e, "rejected hook failed"));
        Ok(Some(InteractionOutcome::Rejected(STILL_POSTING.into())))
    }

    /// Out of date: a question answered but not closed is closed first, then `stale` is called.
    async fn stale(
        &self,
        closer: &Closer,
        q: &QuestionRow,
        interaction: &Interaction,
        req: &RequestContext,
    ) -> InteractionOutcome {
        self.close_if_needed(closer, q).await;
        let fresh = self
            .store()
            .get_question(&q.chat_id, &q.tool_call_id, self.now())
            .await
            .ok()
            .flatten();
        let q = fresh.as_ref().unwrap_or(q);
        let call = call_of(q);
        let _ = closer
            .hooks
            .stale(ha(&call, &q.record, req, &closer.thread), interaction)
            .await
            .map_err(|e| warn!(error = %e, "stale hook failed"));
        InteractionOutcome::Stale
    }

    /// Does what `parse` says with the record as read; when the store finds the record changed
    /// under it, reads and parses again.
    async fn act(
        &self,
        closer: &Closer,
        chat: &ChatRow,
        mut q: QuestionRow,
        interaction: &Interaction,
        actor: &Actor,
        req: &RequestContext,
    ) -> Result<InteractionOutcome> {
        let hooks = &closer.hooks;
        let thread = &closer.thread;
        for _ in 0..RETRIES {
            let call = call_of(&q);
            let settled = q.outcome.is_some();
            if settled && matches!(interaction, Interaction::Message { .. }) {
                // Answered while this reply was on its way: the reply is the agent's.
                return Ok(InteractionOutcome::Ignored);
            }
            let parsed = hooks.parse(ParseArgs {
                call: &call,
                interaction,
                question: &q.record,
                settled,
            });
            if parsed == ParseResult::Ignore {
                return Ok(InteractionOutcome::Ignored);
            }
            if settled || parsed == ParseResult::Stale {
                return Ok(self.stale(closer, &q, interaction, req).await);
            }
            if q.posting {
                // Nothing is recorded against a question people cannot see yet; retry the update.
                self.schedule_updated(&q, self.now()).await?;
                let _ = hooks
                    .rejected(
                        ha(&call, &q.record, req, thread),
                        interaction,
                        STILL_POSTING,
                    )
                    .await
                    .map_err(|e| warn!(error = %e, "rejected hook failed"));
                return Ok(InteractionOutcome::Rejected(STILL_POSTING.into()));
            }
            let outcome = match parsed {
                ParseResult::Rejected { reason } => {
                    let _ = hooks
                        .rejected(ha(&call, &q.record, req, thread), interaction, &reason)
                        .await
                        .map_err(|e| warn!(error = %e, "rejected hook failed"));
                    return Ok(InteractionOutcome::Rejected(reason));
                }
                ParseResult::Partial { state } => {
                    match self.partial(closer, &q, state, interaction, req).await? {
                        Some(done) => return Ok(done),
                        None => {
                            q = match self.reread(&q).await? {
                                Some(q) => q,
                                None => return Ok(self.stale(closer, &q, interaction, req).await),
                            };
                            continue;
                        }
                    }
                }
                ParseResult::Answer { output } => {
                    if let Err(reason) = q.input.check_output(&output) {
                        let _ = hooks
                            .rejected(ha(&call, &q.record, req, thread), interaction, &reason)
                            .await
                            .map_err(|e| warn!(error = %e, "rejected hook failed"));
                        return Ok(InteractionOutcome::Rejected(reason));
                    }
                    if q.answer_deadline.is_some_and(|d| d <= self.now()) {
                        return Ok(self.stale(closer, &q, interaction, req).await);
                    }
                    QuestionOutcome::Answered(output)
                }
                ParseResult::Dismiss => QuestionOutcome::Dismissed,
                ParseResult::Ignore | ParseResult::Stale => unreachable!("handled above"),
            };
            let done = if matches!(outcome, QuestionOutcome::Dismissed) {
                InteractionOutcome::Dismissed
            } else {
                InteractionOutcome::Answered
            };
            match self
                .conclude(
                    chat,
                    &q,
                    &outcome,
                    Some(actor),
                    Some(q.record.revision),
                    req,
                )
                .await?
            {
                Concluded::Won(_) => return Ok(done),
                Concluded::Gone => return Ok(self.stale(closer, &q, interaction, req).await),
                Concluded::Settled(fresh) | Concluded::Changed(fresh) => {
                    q = *fresh;
                    if q.locked(self.now()) && q.outcome.is_none() && !q.posting {
                        // Another interaction holds it for a moment: let it finish.
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        q = self.reread(&q).await?.unwrap_or(q);
                    }
                }
            }
        }
        warn!("a question kept changing under this interaction; given up");
        let call = call_of(&q);
        let reason = "This question is busy — try again in a moment.".to_string();
        let _ = hooks
            .rejected(ha(&call, &q.record, req, thread), interaction, &reason)
            .await;
        Ok(InteractionOutcome::Rejected(reason))
    }

    async fn reread(&self, q: &QuestionRow) -> Result<Option<QuestionRow>> {
        self.store()
            .get_question(&q.chat_id, &q.tool_call_id, self.now())
            .await
            .map_err(Error::from)
    }

    /// A partial answer: saves the state with the next revision (fenced by the revision parsed),
    /// then calls `updated`. `None` when the record changed under it (read and parse again).
    async fn partial(
        &self,
        closer: &Closer,
        q: &QuestionRow,
        state: Option<serde_json::Value>,
        interaction: &Interaction,
        req: &RequestContext,
    ) -> Result<Option<InteractionOutcome>> {
        let holder = self.turns.holder();
        let advanced = self
            .store()
            .advance_question(&AdvanceOp {
                chat: &q.chat_id,
                tool_call_id: &q.tool_call_id,
                expected_revision: q.record.revision,
                state: state.as_ref(),
                lock: LockRequest {
                    holder: &holder,
                    ttl_ms: LOCK_TTL_MS,
                },
                now: self.now(),
            })
            .await?;
        let (saved, lock) = match advanced {
            Advanced::Done { question, lock } => (question, lock),
            Advanced::Changed { .. } => return Ok(None),
            Advanced::Gone => return Ok(Some(InteractionOutcome::Stale)),
        };
        let call = call_of(&saved);
        match closer
            .hooks
            .updated(
                ha(&call, &saved.record, req, &closer.thread),
                Some(interaction),
            )
            .await
        {
            Ok(change) => {
                self.save_updated(&lock, &saved.record, change, &closer.thread.platform)
                    .await?;
            }
            Err(e) => {
                error!(error = %e, "updated failed: a retry job will run it again");
                let job = self
                    .updated_job(&saved)
                    .to_new_job(self.now() + UPDATED_FIRST_BACKOFF_MS);
                self.store()
                    .update_question(&UpdateQuestionOp {
                        lock: &lock,
                        update: &QuestionUpdate::default(),
                        link_platform: None,
                        job: Some(&job),
                        keep_lock: false,
                        now: self.now(),
                    })
                    .await?;
                self.turns.job_scheduled(job.run_at);
            }
        }
        Ok(Some(InteractionOutcome::Partial))
    }

    /// Saves what `updated` changed on `record` (now drawn: no longer posting) and releases
    /// the lock.
    async fn save_updated(
        &self,
        lock: &QuestionLock,
        record: &QuestionRecord,
        change: Option<QuestionChange>,
        platform: &str,
    ) -> Result<()> {
        let update = QuestionUpdate {
            record: Some(apply_change(record, change, self.now())),
            posting: Some(false),
            ..Default::default()
        };
        self.store()
            .update_question(&UpdateQuestionOp {
                lock,
                update: &update,
                link_platform: Some(platform),
                job: None,
                keep_lock: false,
                now: self.now(),
            })
            .await?;
        Ok(())
    }

    fn updated_job(&self, q: &QuestionRow) -> EngineJob {
        EngineJob::QuestionUpdated {
            chat: q.chat_id.clone(),
            call: q.tool_call_id.clone(),
            revision: q.record.revision,
        }
    }

    async fn schedule_updated(&self, q: &QuestionRow, run_at: i64) -> Result<()> {
        self.store()
            .enqueue_job(&self.updated_job(q).to_new_job(run_at))
            .await?;
        self.turns.job_scheduled(run_at);
        Ok(())
    }

    /// Runs one `updated` retry. `Ok(true)`: finished (done, or nothing to do); `Ok(false)`:
    /// `updated` failed again, or another process serves the channel.
    pub(crate) async fn run_updated_job(
        &self,
        chat: &ChatId,
        call_id: &str,
        revision: u64,
    ) -> Result<bool> {
        let Some(q) = self.store().get_question(chat, call_id, self.now()).await? else {
            return Ok(true);
        };
        if q.outcome.is_some() || !q.posting || q.record.revision != revision {
            return Ok(true); // answered, or at another revision: nothing to do
        }
        let Some(row) = self.store().get_chat(chat).await? else {
            return Ok(true);
        };
        let Some(thread) = thread_of(&row) else {
            return Ok(true);
        };
        let Some(hooks) = self.registry.hooks(&thread.platform) else {
            return Ok(false); // another process serves this channel
        };
        let Some((lock, q)) = self
            .store()
            .lock_question(&LockQuestionOp {
                chat,
                tool_call_id: call_id,
                lock: LockRequest {
                    holder: &self.turns.holder(),
                    ttl_ms: LOCK_TTL_MS,
                },
                now: self.now(),
            })
            .await?
        else {
            return Ok(false);
        };
        if q.outcome.is_some() || !q.posting || q.record.revision != revision {
            self.store().unlock_question(&lock).await?;
            return Ok(true);
        }
        let call = call_of(&q);
        let req = RequestContext::default();
        match hooks
            .updated(ha(&call, &q.record, &req, &thread), None)
            .await
        {
            Ok(change) => {
                self.save_updated(&lock, &q.record, change, &thread.platform)
                    .await?;
                Ok(true)
            }
            Err(e) => {
                error!(chat_id = %chat, question_id = call_id, error = %e, "updated retry failed");
                self.store().unlock_question(&lock).await?;
                Ok(false)
            }
        }
    }

    // ---- drawing questions -----------------------------------------------------------------------

    /// Renders the waiting calls of the chat's waiting reply that are not posted yet, if every
    /// posted one is answered. A failing `render` is logged and returned as [`Drawn::Failed`]:
    /// the turn's delivery job then stays and its next attempt draws again (with its backoff), and
    /// the next message in the conversation draws again as well.
    pub(crate) async fn render_pending(&self, chat: &ChatId) -> Result<Drawn> {
        let Some(row) = self.store().get_chat(chat).await? else {
            return Ok(Drawn::Done);
        };
        let (Some(message_id), Some(thread)) = (row.awaiting_message_id.clone(), thread_of(&row))
        else {
            return Ok(Drawn::Done);
        };
        let Some(hooks) = self.registry.hooks(&thread.platform) else {
            return Ok(Drawn::Done);
        };
        let now = self.now();
        let mut questions = self
            .store()
            .questions_of_message(chat, &message_id, now)
            .await?;
        if questions.is_empty() {
            // The records expired while the reply still waits: post the questions again.
            questions = self.recreate_records(chat, &message_id).await?;
        }
        if questions.iter().any(|q| q.rendered && q.outcome.is_none()) {
            debug!(chat_id = %chat, reply = %message_id, "questions already shown");
            return Ok(Drawn::Done); // one at a time: the posted ones first
        }
        let pending: Vec<QuestionCall> = questions
            .iter()
            .filter(|q| !q.rendered && q.outcome.is_none())
            .map(call_of)
            .collect();
        if pending.is_empty() {
            return Ok(Drawn::Done);
        }
        if let Err(e) = self
            .post_question_blocks(chat, &message_id, &thread, &pending)
            .await
        {
            error!(chat_id = %chat, error = %e, "posting a question's blocks failed: the delivery job (or the next message) draws the questions again");
            return Ok(Drawn::Failed(e));
        }
        let req = RequestContext::default();
        let rendered = match hooks
            .render(RenderArgs {
                calls: &pending,
                req: &req,
                thread: &thread,
            })
            .await
        {
            Ok(r) => r,
            Err(e) => {
                error!(chat_id = %chat, error = %e, "render failed: the delivery job (or the next message) draws the questions again");
                return Ok(Drawn::Failed(e));
            }
        };
        let now = self.now();
        let mut calls = Vec::new();
        for entry in rendered {
            if entry.messages.is_empty() {
                warn!(chat_id = %chat, "render returned an entry without messages; ignored");
                continue;
            }
            let messages: Vec<QuestionMessage> = entry
                .messages
                .iter()
                .map(|m| QuestionMessage {
                    posted_at: if m.posted_at.is_empty() {
                        millis_to_iso(now)
                    } else {
                        m.posted_at.clone()
                    },
                    ..m.clone()
                })
                .collect();
            for call_id in &entry.calls {
                if !pending.iter().any(|c| &c.tool_call_id == call_id) {
                    warn!(chat_id = %chat, tool_call_id = %call_id, "render covered a call that was not asked");
                    continue;
                }
                calls.push(RenderedCall {
                    tool_call_id: call_id.clone(),
                    record: QuestionRecord {
                        messages: messages.clone(),
                        revision: 0,
                        state: entry.state.clone(),
                    },
                });
            }
        }
        if !calls.is_empty() {
            self.store()
                .mark_rendered(&RenderedOp {
                    chat,
                    platform: &thread.platform,
                    calls: &calls,
                    now,
                })
                .await?;
        }
        Ok(Drawn::Done)
    }

    /// Posts the display blocks of `calls` (a table, a diff, an image… beside the inputs) in
    /// `thread` before their questions are drawn: as the agent's message, without a notification
    /// (the question is what notifies), each set under a delivery key of its own question, so a
    /// repeated draw posts them once where the platform can tell ([`ChannelOutbox::deliver`](crate::agent::ChannelOutbox::deliver)).
    async fn post_question_blocks(
        &self,
        chat: &ChatId,
        reply: &str,
        thread: &Thread,
        calls: &[QuestionCall],
    ) -> std::result::Result<(), crate::BoxError> {
        use sha2::Digest as _;
        let Some(outbox) = self
            .registry
            .get(&thread.platform)
            .and_then(|c| c.outbox.clone())
        else {
            return Ok(());
        };
        for call in calls.iter().filter(|c| !c.input.blocks.is_empty()) {
            let parts: Vec<crate::model::MessagePart> = call
                .input
                .blocks
                .iter()
                .filter_map(|b| crate::model::Block::from_json(b).ok())
                .map(|b| b.to_part())
                .collect();
            let digest = sha2::Sha256::digest(format!("{chat}\n{}", call.tool_call_id));
            let key: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
            let mut message = crate::model::UiMessage {
                id: format!("qblocks_{key}"),
                role: crate::model::Role::Assistant,
                parts,
                metadata: Default::default(),
            };
            // Its apps link to their web views, read through the reply that asks.
            if let Some(base) = &self.turns.config.public_url {
                message = crate::model::with_app_urls_of(&message, chat.as_str(), reply, base);
            }
            // Quiet: the question drawn next is what notifies (one question, one notification).
            let delivery = crate::agent::Delivery::new(format!("qblocks:{key}")).quietly();
            outbox.post_message(thread, &message, &delivery).await?;
        }
        Ok(())
    }

    async fn recreate_records(&self, chat: &ChatId, message_id: &str) -> Result<Vec<QuestionRow>> {
        let Some(stored) = self.store().get_message(chat, message_id).await? else {
            return Ok(vec![]);
        };
        let elicitations = &stored.message.metadata.elicitations;
        let rows: Vec<_> = stored
            .message
            .tool_parts()
            .filter_map(|t| {
                let elicited = elicitations.get(&t.tool_call_id).filter(|e| e.waiting());
                if let Some(e) = elicited
                    && t.state == crate::model::ToolState::InputAvailable
                {
                    // A call waiting for input: its record is keyed by the elicitation's id.
                    e.question().map(|input| (e.id.clone(), t, input))
                } else if t.tool_name == crate::model::QUESTION_TOOL
                    && t.state == crate::model::ToolState::InputAvailable
                {
                    serde_json::from_value(t.input.clone())
                        .ok()
                        .map(|input| (t.tool_call_id.clone(), t, input))
                } else if t.state == crate::model::ToolState::ApprovalRequested {
                    t.approval
                        .as_ref()
                        .and_then(|a| a.question())
                        .map(|input| (t.tool_call_id.clone(), t, input))
                } else {
                    None
                }
            })
            .enumerate()
            .map(|(i, (id, t, input))| crate::store::NewQuestion {
                tool_call_id: id,
                chat_id: chat.clone(),
                message_id: message_id.to_string(),
                call_index: i as i64,
                input,
                // The deadline the call was asked with (the tool part keeps it): a record
                // re-created after its row expired still expires when the set does.
                answer_deadline: t
                    .expires_at
                    .as_deref()
                    .and_then(crate::model::iso_to_millis),
            })
            .collect();
        self.store().insert_questions(&rows, self.now()).await?;
        if rows
            .iter()
            .any(|r| r.answer_deadline.is_some_and(|d| d <= self.now()))
        {
            // Past its deadline already: expired (its defaults used), not asked again.
            // (Boxed: expiring continues the reply, which renders what is pending.)
            Box::pin(self.expire(chat, message_id)).await?;
        }
        self.store()
            .questions_of_message(chat, message_id, self.now())
            .await
            .map_err(Error::from)
    }

    /// The question a click on `message_id` would open a form for: its current message, still
    /// open, in a conversation this process serves.
    pub(crate) async fn form_target(
        &self,
        platform: &str,
        message_id: &str,
    ) -> Result<Option<FormTarget>> {
        let now = self.now();
        for q in self
            .store()
            .questions_by_platform_message(platform, message_id, now)
            .await?
        {
            if q.outcome.is_some() || q.record.current().map(|m| m.id.as_str()) != Some(message_id)
            {
                continue;
            }
            let Some(chat) = self.store().get_chat(&q.chat_id).await? else {
                continue;
            };
            let Some(thread) = thread_of(&chat) else {
                continue;
            };
            if thread.platform != platform {
                continue;
            }
            return Ok(Some(FormTarget {
                chat_id: q.chat_id.clone(),
                call: call_of(&q),
                record: q.record,
                thread,
            }));
        }
        Ok(None)
    }
}

/// What [`Questions::conclude`] did.
enum Concluded {
    /// Recorded (first): the chat's state after.
    Won(TurnState),
    /// Another outcome was first.
    Settled(Box<QuestionRow>),
    /// The record moved on since it was read.
    Changed(Box<QuestionRow>),
    /// No live record.
    Gone,
}
