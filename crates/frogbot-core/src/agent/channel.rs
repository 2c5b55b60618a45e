//! Channels and the question engine: how a channel's participants answer the agent's `question`
//! tool with their platform's own controls.
//!
//! FrogBot keeps the record, decides what is out of date, checks who is answering, records the
//! first answer once, retries a failed update as a durable job, closes the question and continues
//! the agent. The channel's [`ChannelQuestions`] hooks only draw and read platform controls.

use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tracing::{Instrument, debug, error, info_span, warn};

use super::Engine;
use crate::BoxError;
use crate::error::{Error, Result};
use crate::model::{
    Actor, ChannelIdentity, ChannelRef, ChatId, HookArgs, IdentityResolver, Interaction, ParseArgs,
    ParseResult, QuestionCall, QuestionChange, QuestionMessage, QuestionOutcome, QuestionRecord,
    RenderArgs, RequestContext, SupportsArgs, Thread, UiMessage, UserId,
    decode_question_modal_metadata, millis_to_iso, now_millis,
};
use crate::store::{ChatRow, NewJob, QuestionLock, QuestionRow, QuestionUpdate, lock_question};

/// The reason given to an interaction that arrives while the next question is still posting.
pub const STILL_POSTING: &str = "The next question is still posting — try again in a moment.";

/// The durable job that retries `updated`.
pub(crate) const UPDATED_JOB: &str = "question-updated";
/// The durable job that expires a question set at its deadline.
pub(crate) const EXPIRE_JOB: &str = "question-expire";
/// `updated` retries: at most this many runs.
pub const UPDATED_MAX_RUNS: i64 = 10;
/// `updated` retries: the first backoff.
pub const UPDATED_FIRST_BACKOFF_MS: i64 = 5_000;

const LOCK_TTL_MS: i64 = 30_000;
const LOCK_WAIT_MS: i64 = 10_000;

/// The agent's access check: may this user talk to the agent in this chat? (`None`: anonymous.)
#[async_trait]
pub trait AccessCheck: Send + Sync {
    /// `Ok(false)` denies.
    async fn allow(&self, user: Option<&UserId>, chat: &ChatRow) -> Result<bool, BoxError>;
}

/// Lets everyone in.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllowAll;

#[async_trait]
impl AccessCheck for AllowAll {
    async fn allow(&self, _user: Option<&UserId>, _chat: &ChatRow) -> Result<bool, BoxError> {
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
    async fn allow(&self, user: Option<&UserId>, _chat: &ChatRow) -> Result<bool, BoxError> {
        Ok(self.users.is_empty() || user.is_some_and(|u| self.users.contains(u)))
    }
}

/// Where a channel posts the agent's replies (in the same thread).
#[async_trait]
pub trait ChannelOutbox: Send + Sync {
    /// Posts the reply of a turn that ended (or stopped to wait) in `thread`.
    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError>;
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

use crate::model::ChannelQuestions;

/// What the engine did with an interaction.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InteractionOutcome {
    /// It belongs to no question (a thread reply continues as an ordinary message).
    Ignored,
    /// The answer was recorded and the agent continues.
    Answered,
    /// The dismissal was recorded and the turn stops.
    Dismissed,
    /// Progress was saved (`updated` ran or a retry is scheduled).
    Partial,
    /// Refused with a reason shown to the participant.
    Rejected(String),
    /// The participant failed the access check.
    Denied,
    /// Out of date.
    Stale,
}

impl InteractionOutcome {
    /// Whether a thread reply was consumed (anything but `Ignored`).
    pub fn consumed(&self) -> bool {
        *self != InteractionOutcome::Ignored
    }
}

/// The chat id a channel thread's chat is created with: stable, so every process maps a thread to
/// the same chat, and in the channel chats' id space (it starts with
/// [`crate::model::CHANNEL_CHAT_PREFIX`]), which the HTTP API never creates, so no web caller can
/// take it first. Chats are looked up by their channel thread ([`Engine::channel_thread_chat`]),
/// so chats created before this id space existed stay in use.
pub fn channel_chat_id(platform: &str, thread: &str) -> ChatId {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{platform}\u{0}{thread}").as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    let platform: String = platform
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(32)
        .collect();
    ChatId::new(format!(
        "{}{platform}-{hex}",
        crate::model::CHANNEL_CHAT_PREFIX
    ))
    .expect("the prefix, alphanumerics, a dash and hex")
}

fn thread_of(chat: &ChatRow) -> Option<Thread> {
    chat.channel.as_ref().map(|c| Thread {
        id: c.thread.clone(),
        platform: c.platform.clone(),
        chat_id: chat.chat_id.to_string(),
    })
}

fn call_of(q: &QuestionRow) -> QuestionCall {
    QuestionCall {
        tool_call_id: q.tool_call_id.clone(),
        input: q.input.clone(),
    }
}

impl Engine {
    /// The chat of a channel thread, if its channel created one.
    pub async fn channel_thread_chat(
        &self,
        platform: &str,
        thread: &str,
    ) -> Result<Option<ChatRow>> {
        self.inner.store.get_channel_chat(platform, thread).await
    }

    /// The channel registered for `platform`.
    pub fn channel(&self, platform: &str) -> Option<&Channel> {
        self.inner.channels.iter().find(|c| c.platform == platform)
    }

    /// Whether the model gets the question tool in this chat for the coming turn: always in
    /// web/HTTP chats; in a channel chat when the channel defines questions and `supports` does not
    /// say no (an error is logged and means no).
    pub(crate) async fn questions_offered(&self, chat: &ChatRow) -> bool {
        let Some(channel) = &chat.channel else {
            return true;
        };
        let Some(hooks) = self
            .channel(&channel.platform)
            .and_then(|c| c.questions.clone())
        else {
            return false;
        };
        let thread = thread_of(chat).expect("channel chat");
        match hooks.supports(SupportsArgs { thread: &thread }).await {
            Ok(ok) => ok,
            Err(e) => {
                error!(chat_id = %chat.chat_id, error = %e, "supports failed: questions not offered this turn");
                false
            }
        }
    }

    /// Posts the reply of a channel chat's turn to its thread (when this process runs the channel).
    pub(crate) async fn deliver_reply(&self, chat: &ChatRow, reply: &UiMessage) {
        let Some(thread) = thread_of(chat) else {
            return;
        };
        let Some(outbox) = self
            .channel(&thread.platform)
            .and_then(|c| c.outbox.clone())
        else {
            return;
        };
        // A failed or interrupted turn says so in the thread instead of leaving it silent.
        let noted;
        let reply = match &reply.metadata.error {
            Some(error) => {
                let mut copy = reply.clone();
                let sep = if copy.text().trim().is_empty() {
                    ""
                } else {
                    "\n\n"
                };
                copy.parts.push(crate::model::MessagePart::text(format!(
                    "{sep}⚠️ {}",
                    error.message
                )));
                noted = copy;
                &noted
            }
            None => reply,
        };
        if let Err(e) = outbox.post_reply(&thread, reply).await {
            error!(chat_id = %chat.chat_id, error = %e, "posting the reply failed");
        }
    }

    /// Renders the waiting calls of the chat's waiting reply that are not posted yet, if every
    /// posted one is answered. A failing `render` is logged; the next message in the conversation
    /// renders again.
    pub(crate) async fn render_pending(&self, chat: &ChatId) -> Result<()> {
        let store = &self.inner.store;
        let Some(row) = store.get_chat(chat).await? else {
            return Ok(());
        };
        let (Some(message_id), Some(thread)) = (row.awaiting_message_id.clone(), thread_of(&row))
        else {
            return Ok(());
        };
        let Some(hooks) = self
            .channel(&thread.platform)
            .and_then(|c| c.questions.clone())
        else {
            return Ok(());
        };
        let now = now_millis();
        let mut questions = store.questions_of_message(chat, &message_id, now).await?;
        if questions.is_empty() {
            // The records expired while the reply still waits: post the questions again.
            questions = self.recreate_records(chat, &message_id).await?;
        }
        if questions.iter().any(|q| q.rendered && q.outcome.is_none()) {
            return Ok(()); // one at a time: the posted ones first
        }
        let pending: Vec<QuestionCall> = questions
            .iter()
            .filter(|q| !q.rendered && q.outcome.is_none())
            .map(call_of)
            .collect();
        if pending.is_empty() {
            return Ok(());
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
                error!(chat_id = %chat, error = %e, "render failed: the questions are posted again with the next message");
                return Ok(());
            }
        };
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
                        millis_to_iso(now_millis())
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
                for m in &messages {
                    store
                        .link_question_message(&thread.platform, &m.id, chat, call_id)
                        .await?;
                }
                let lock = self.lock(chat, call_id).await?;
                let update = QuestionUpdate {
                    record: Some(QuestionRecord {
                        messages: messages.clone(),
                        revision: 0,
                        state: entry.state.clone(),
                    }),
                    rendered: Some(true),
                    ..Default::default()
                };
                let r = store.update_question(&lock, &update, now_millis()).await;
                let _ = store.unlock_question(&lock).await;
                r?;
            }
        }
        Ok(())
    }

    async fn recreate_records(&self, chat: &ChatId, message_id: &str) -> Result<Vec<QuestionRow>> {
        let store = &self.inner.store;
        let Some(stored) = store.get_message(chat, message_id).await? else {
            return Ok(vec![]);
        };
        let rows: Vec<_> = stored
            .message
            .tool_parts()
            .filter(|t| {
                t.tool_name == crate::model::QUESTION_TOOL
                    && t.state == crate::model::ToolState::InputAvailable
            })
            .enumerate()
            .filter_map(|(i, t)| {
                serde_json::from_value(t.input.clone()).ok().map(|input| {
                    crate::store::NewQuestion {
                        tool_call_id: t.tool_call_id.clone(),
                        chat_id: chat.clone(),
                        message_id: message_id.to_string(),
                        call_index: i as i64,
                        input,
                        answer_deadline: None,
                    }
                })
            })
            .collect();
        store.insert_questions(&rows, now_millis()).await?;
        store
            .questions_of_message(chat, message_id, now_millis())
            .await
    }

    async fn lock(&self, chat: &ChatId, call: &str) -> Result<QuestionLock> {
        lock_question(
            &*self.inner.store,
            chat,
            call,
            &self.holder(),
            LOCK_TTL_MS,
            LOCK_WAIT_MS,
        )
        .await
    }

    /// Resolves the participant behind an interaction or message and runs the access check.
    async fn identify(
        &self,
        channel: &Channel,
        chat: &ChatRow,
        user: &crate::model::PlatformUser,
    ) -> Result<(Actor, bool)> {
        let identity = ChannelIdentity {
            platform: channel.platform.clone(),
            user: user.clone(),
        };
        let resolved = match channel.identity.resolve(&identity).await {
            Ok(u) => u,
            Err(e) => {
                warn!(error = %e, "identity hook failed: treated as denied");
                return Ok((
                    Actor {
                        user: None,
                        identity: Some(identity),
                    },
                    false,
                ));
            }
        };
        let allowed = match channel.access.allow(resolved.as_ref(), chat).await {
            Ok(a) => a,
            Err(e) => {
                warn!(error = %e, "access check failed: denied");
                false
            }
        };
        Ok((
            Actor {
                user: resolved,
                identity: Some(identity),
            },
            allowed,
        ))
    }

    /// Finds the questions an interaction may belong to, in call order.
    async fn route(
        &self,
        platform: &str,
        thread: Option<&str>,
        interaction: &Interaction,
    ) -> Result<Vec<QuestionRow>> {
        let store = &self.inner.store;
        let now = now_millis();
        let by_message = |id: String| async move {
            let mut out = Vec::new();
            for (chat, call) in store.find_questions_by_message(platform, &id, now).await? {
                if let Some(q) = store.get_question(&chat, &call, now).await? {
                    out.push(q);
                }
            }
            Ok::<_, Error>(out)
        };
        match interaction {
            Interaction::Action { event } => by_message(event.message_id.clone()).await,
            Interaction::ModalSubmit { event } => {
                if let Some(id) = &event.related_message_id {
                    return by_message(id.clone()).await;
                }
                match event
                    .private_metadata
                    .as_deref()
                    .and_then(decode_question_modal_metadata)
                {
                    Some(loc) => {
                        let found = by_message(loc.message_id).await?;
                        // The locator only finds the question: it must be of that conversation.
                        let Some(chat) = store.get_channel_chat(platform, &loc.thread_id).await?
                        else {
                            return Ok(vec![]);
                        };
                        Ok(found
                            .into_iter()
                            .filter(|q| q.chat_id == chat.chat_id)
                            .collect())
                    }
                    None => Ok(vec![]),
                }
            }
            Interaction::Message { .. } => {
                // A thread reply may answer only an open question of the reply that waits: once a
                // question is settled, replies in its thread are the agent's again.
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
    pub async fn handle_interaction(
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
        let Some(channel) = self.channel(platform).cloned() else {
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
            if matches!(
                interaction,
                Interaction::Action { .. } | Interaction::ModalSubmit { .. }
            ) {
                debug!("interaction matches no live question; ignored");
            }
            return Ok(InteractionOutcome::Ignored);
        }
        let store = &self.inner.store;
        let no_req = RequestContext::default();
        for q in candidates {
            let Some(chat) = store.get_chat(&q.chat_id).await? else {
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
                self.close_if_needed(&hooks, &q, &thread_v, None).await;
                let q = store
                    .get_question(&q.chat_id, &q.tool_call_id, now_millis())
                    .await?
                    .unwrap_or(q);
                let _ = hooks
                    .stale(ha(&call, &q.record, &no_req, &thread_v), interaction)
                    .await
                    .map_err(|e| warn!(error = %e, "stale hook failed"));
                return Ok(InteractionOutcome::Stale);
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
                self.close_if_needed(&hooks, &q, &thread_v, None).await;
                let q = store
                    .get_question(&q.chat_id, &q.tool_call_id, now_millis())
                    .await?
                    .unwrap_or(q);
                let _ = hooks
                    .stale(ha(&call, &q.record, &no_req, &thread_v), interaction)
                    .await
                    .map_err(|e| warn!(error = %e, "stale hook failed"));
                return Ok(InteractionOutcome::Stale);
            }
            // Who is answering?
            let (actor, allowed) = self.identify(&channel, &chat, interaction.user()).await?;
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
            return self
                .act(&hooks, &q, &call, interaction, &actor, &req, &thread_v)
                .await;
        }
        Ok(InteractionOutcome::Ignored)
    }

    /// Under the question's lock: parse again and do what the result says.
    #[allow(clippy::too_many_arguments)]
    async fn act(
        &self,
        hooks: &Arc<dyn ChannelQuestions>,
        q: &QuestionRow,
        call: &QuestionCall,
        interaction: &Interaction,
        actor: &Actor,
        req: &RequestContext,
        thread: &Thread,
    ) -> Result<InteractionOutcome> {
        let store = &self.inner.store;
        let chat = q.chat_id.clone();
        let lock = self.lock(&chat, &q.tool_call_id).await?;
        let result: Result<InteractionOutcome> = async {
            let Some(q) = store
                .get_question(&chat, &q.tool_call_id, now_millis())
                .await?
            else {
                return Ok(InteractionOutcome::Stale);
            };
            let settled = q.outcome.is_some();
            if settled && matches!(interaction, Interaction::Message { .. }) {
                // Answered while this reply was on its way: the reply is the agent's.
                return Ok(InteractionOutcome::Ignored);
            }
            let parsed = hooks.parse(ParseArgs {
                call,
                interaction,
                question: &q.record,
                settled,
            });
            if parsed == ParseResult::Ignore {
                return Ok(InteractionOutcome::Ignored);
            }
            if settled || parsed == ParseResult::Stale {
                let _ = hooks
                    .stale(ha(call, &q.record, req, thread), interaction)
                    .await
                    .map_err(|e| warn!(error = %e, "stale hook failed"));
                return Ok(InteractionOutcome::Stale);
            }
            if q.posting {
                // Nothing is recorded against a question people cannot see yet; retry the update.
                self.schedule_updated(&q, now_millis()).await?;
                let _ = hooks
                    .rejected(ha(call, &q.record, req, thread), interaction, STILL_POSTING)
                    .await
                    .map_err(|e| warn!(error = %e, "rejected hook failed"));
                return Ok(InteractionOutcome::Rejected(STILL_POSTING.into()));
            }
            match parsed {
                ParseResult::Rejected { reason } => {
                    let _ = hooks
                        .rejected(ha(call, &q.record, req, thread), interaction, &reason)
                        .await
                        .map_err(|e| warn!(error = %e, "rejected hook failed"));
                    Ok(InteractionOutcome::Rejected(reason))
                }
                ParseResult::Partial { state } => {
                    let record = QuestionRecord {
                        messages: q.record.messages.clone(),
                        revision: q.record.revision + 1,
                        state: state.or(q.record.state.clone()),
                    };
                    let saved = store
                        .update_question(
                            &lock,
                            &QuestionUpdate {
                                record: Some(record),
                                posting: Some(true),
                                ..Default::default()
                            },
                            now_millis(),
                        )
                        .await?;
                    match hooks
                        .updated(ha(call, &saved.record, req, thread), Some(interaction))
                        .await
                    {
                        Ok(change) => {
                            let record = apply_change(&saved.record, change);
                            store
                                .update_question(
                                    &lock,
                                    &QuestionUpdate {
                                        record: Some(record),
                                        posting: Some(false),
                                        ..Default::default()
                                    },
                                    now_millis(),
                                )
                                .await?;
                            self.relink(&saved, thread).await?;
                        }
                        Err(e) => {
                            error!(error = %e, "updated failed: a retry job will run it again");
                            self.schedule_updated(&saved, now_millis() + UPDATED_FIRST_BACKOFF_MS)
                                .await?;
                        }
                    }
                    Ok(InteractionOutcome::Partial)
                }
                ParseResult::Answer { output } => {
                    if let Err(reason) = q.input.check_output(&output) {
                        let _ = hooks
                            .rejected(ha(call, &q.record, req, thread), interaction, &reason)
                            .await
                            .map_err(|e| warn!(error = %e, "rejected hook failed"));
                        return Ok(InteractionOutcome::Rejected(reason));
                    }
                    if q.answer_deadline.is_some_and(|d| d <= now_millis()) {
                        let _ = hooks
                            .stale(ha(call, &q.record, req, thread), interaction)
                            .await;
                        return Ok(InteractionOutcome::Stale);
                    }
                    let outcome = QuestionOutcome::Answered(output);
                    if !store
                        .record_outcome(&chat, &q.tool_call_id, &outcome, Some(actor), now_millis())
                        .await?
                    {
                        let _ = hooks
                            .stale(ha(call, &q.record, req, thread), interaction)
                            .await;
                        return Ok(InteractionOutcome::Stale);
                    }
                    self.close(hooks, &lock, &q, Some(actor), &outcome, req, thread)
                        .await;
                    Ok(InteractionOutcome::Answered)
                }
                ParseResult::Dismiss => {
                    let outcome = QuestionOutcome::Dismissed;
                    if !store
                        .record_outcome(&chat, &q.tool_call_id, &outcome, Some(actor), now_millis())
                        .await?
                    {
                        let _ = hooks
                            .stale(ha(call, &q.record, req, thread), interaction)
                            .await;
                        return Ok(InteractionOutcome::Stale);
                    }
                    self.close(hooks, &lock, &q, Some(actor), &outcome, req, thread)
                        .await;
                    Ok(InteractionOutcome::Dismissed)
                }
                ParseResult::Ignore | ParseResult::Stale => unreachable!("handled above"),
            }
        }
        .await;
        let _ = store.unlock_question(&lock).await;
        let outcome = result?;
        if matches!(
            outcome,
            InteractionOutcome::Answered | InteractionOutcome::Dismissed
        ) {
            let state = self
                .continue_after_outcome(&chat, &q.message_id, actor.user.clone())
                .await?;
            debug!(?state, "continued after the outcome");
            if state == crate::model::TurnState::Awaiting {
                self.render_pending(&chat).await?;
            }
        }
        Ok(outcome)
    }

    /// Calls `settled` and saves its change, closing the question (a failing `settled` is logged
    /// and the question closes without a change).
    #[allow(clippy::too_many_arguments)]
    async fn close(
        &self,
        hooks: &Arc<dyn ChannelQuestions>,
        lock: &QuestionLock,
        q: &QuestionRow,
        actor: Option<&Actor>,
        outcome: &QuestionOutcome,
        req: &RequestContext,
        thread: &Thread,
    ) {
        let call = call_of(q);
        let args = HookArgs {
            call: &call,
            question: &q.record,
            req,
            thread,
        };
        let change = match hooks.settled(args, actor, outcome).await {
            Ok(c) => c,
            Err(e) => {
                error!(error = %e, "settled failed: the question closes without a change");
                None
            }
        };
        let record = apply_change(&q.record, change);
        let update = QuestionUpdate {
            record: Some(record),
            closed: Some(true),
            ..Default::default()
        };
        if let Err(e) = self
            .inner
            .store
            .update_question(lock, &update, now_millis())
            .await
        {
            error!(error = %e, "saving the closed question failed");
        } else if let Err(e) = self.relink(q, thread).await {
            error!(error = %e, "linking the question's messages failed");
        }
    }

    /// A question answered but not closed (the process stopped during `settled`) is closed now,
    /// with `actor: null` and the stored outcome.
    async fn close_if_needed(
        &self,
        hooks: &Arc<dyn ChannelQuestions>,
        q: &QuestionRow,
        thread: &Thread,
        actor: Option<&Actor>,
    ) {
        if q.outcome.is_none() || q.closed {
            return;
        }
        let Ok(lock) = self.lock(&q.chat_id, &q.tool_call_id).await else {
            return;
        };
        if let Ok(Some(fresh)) = self
            .inner
            .store
            .get_question(&q.chat_id, &q.tool_call_id, now_millis())
            .await
            && !fresh.closed
            && let Some(outcome) = fresh.outcome.clone()
        {
            self.close(
                hooks,
                &lock,
                &fresh,
                actor,
                &outcome,
                &RequestContext::default(),
                thread,
            )
            .await;
        }
        let _ = self.inner.store.unlock_question(&lock).await;
    }

    /// Links every message of the record (after a change) to the call.
    async fn relink(&self, q: &QuestionRow, thread: &Thread) -> Result<()> {
        let store = &self.inner.store;
        if let Some(fresh) = store
            .get_question(&q.chat_id, &q.tool_call_id, now_millis())
            .await?
        {
            for m in &fresh.record.messages {
                store
                    .link_question_message(&thread.platform, &m.id, &q.chat_id, &q.tool_call_id)
                    .await?;
            }
        }
        Ok(())
    }

    async fn schedule_updated(&self, q: &QuestionRow, run_at: i64) -> Result<()> {
        self.inner
            .store
            .enqueue_job(&NewJob {
                kind: UPDATED_JOB.into(),
                key: Some(format!("{UPDATED_JOB}:{}:{}", q.chat_id, q.tool_call_id)),
                payload: json!({"chat": q.chat_id, "call": q.tool_call_id, "revision": q.record.revision}),
                run_at,
            })
            .await?;
        Ok(())
    }

    /// Runs one `updated` retry job. Returns `Ok(true)` when the job is finished (done or nothing to
    /// do), `Ok(false)` when `updated` failed again.
    pub(crate) async fn run_updated_job(&self, payload: &Value) -> Result<bool> {
        let store = &self.inner.store;
        let (Some(chat), Some(call_id)) = (
            payload["chat"].as_str().and_then(|c| ChatId::new(c).ok()),
            payload["call"].as_str(),
        ) else {
            return Ok(true);
        };
        let revision = payload["revision"].as_u64();
        let Some(q) = store.get_question(&chat, call_id, now_millis()).await? else {
            return Ok(true);
        };
        if q.outcome.is_some() || !q.posting || revision.is_some_and(|r| r != q.record.revision) {
            return Ok(true); // answered, or at another revision: nothing to do
        }
        let Some(row) = store.get_chat(&chat).await? else {
            return Ok(true);
        };
        let Some(thread) = thread_of(&row) else {
            return Ok(true);
        };
        let Some(hooks) = self
            .channel(&thread.platform)
            .and_then(|c| c.questions.clone())
        else {
            return Ok(false); // another process serves this channel
        };
        let lock = self.lock(&chat, call_id).await?;
        let result: Result<bool> = async {
            let Some(q) = store.get_question(&chat, call_id, now_millis()).await? else { return Ok(true) };
            if q.outcome.is_some() || !q.posting || revision.is_some_and(|r| r != q.record.revision) {
                return Ok(true);
            }
            let call = call_of(&q);
            let req = RequestContext::default();
            match hooks.updated(HookArgs { call: &call, question: &q.record, req: &req, thread: &thread }, None).await {
                Ok(change) => {
                    let record = apply_change(&q.record, change);
                    store
                        .update_question(&lock, &QuestionUpdate { record: Some(record), posting: Some(false), ..Default::default() }, now_millis())
                        .await?;
                    self.relink(&q, &thread).await?;
                    Ok(true)
                }
                Err(e) => {
                    error!(chat_id = %chat, question_id = call_id, error = %e, "updated retry failed");
                    Ok(false)
                }
            }
        }
        .await;
        let _ = store.unlock_question(&lock).await;
        result
    }

    /// Handles a message in a channel thread: a reply that answers a question is consumed; else,
    /// after the identity and access checks, it starts or continues the thread's chat (queued while
    /// a turn runs or a question waits). Questions whose render failed are posted again first.
    pub async fn channel_message(
        &self,
        platform: &str,
        thread: &str,
        message: crate::model::ThreadMessage,
    ) -> Result<ChannelMessageOutcome> {
        let interaction = Interaction::Message {
            message: message.clone(),
        };
        let handled = self
            .handle_interaction(platform, Some(thread), &interaction)
            .await?;
        if handled.consumed() {
            return Ok(ChannelMessageOutcome::Consumed(handled));
        }
        let Some(channel) = self.channel(platform).cloned() else {
            return Err(Error::InvalidInput(format!(
                "no channel {platform:?} in this process"
            )));
        };
        let channel_ref = ChannelRef {
            platform: platform.into(),
            thread: thread.into(),
        };
        let store = &self.inner.store;
        // The thread's chat is found by its channel, never by an id a web caller could have taken.
        let existing = store.get_channel_chat(platform, thread).await?;
        let chat_id = existing
            .as_ref()
            .map(|c| c.chat_id.clone())
            .unwrap_or_else(|| channel_chat_id(platform, thread));
        // The platform's message id names the stored message, so a delivery the platform repeats
        // (a retry reaching this or another process) is recognised by the store, not run twice.
        let message_id =
            (!message.id.is_empty()).then(|| channel_message_id(platform, &message.id));
        if let (Some(_), Some(id)) = (&existing, &message_id)
            && store.get_message(&chat_id, id).await?.is_some()
        {
            debug!(chat_id = %chat_id, message_id = id, "repeated channel message; already taken");
            return Ok(ChannelMessageOutcome::Duplicate);
        }
        let probe = existing.clone().unwrap_or(ChatRow {
            chat_id: chat_id.clone(),
            owner: None,
            channel: Some(channel_ref.clone()),
            created_at: 0,
            updated_at: 0,
            awaiting_message_id: None,
            lease: None,
        });
        let (actor, allowed) = self.identify(&channel, &probe, &message.author).await?;
        if !allowed {
            return Ok(ChannelMessageOutcome::Denied);
        }
        // Posted again with the next message: questions whose render failed or whose record expired.
        if existing
            .as_ref()
            .is_some_and(|c| c.awaiting_message_id.is_some())
        {
            self.render_pending(&chat_id).await?;
        }
        let sent = self
            .send(super::SendMessage {
                chat_id,
                id: message_id,
                parts: vec![crate::model::MessagePart::text(message.text)],
                author: actor.user,
                delivery: crate::model::Delivery::Queue,
                model: None,
                reasoning: None,
                channel: Some(channel_ref),
            })
            .await?;
        Ok(ChannelMessageOutcome::Sent(sent))
    }

    /// Runs one due job of the question engine; `None` when the kind is not a question job.
    pub(crate) async fn run_question_job(&self, job: &crate::store::Job) -> Option<Result<bool>> {
        match job.kind.as_str() {
            UPDATED_JOB => Some(self.run_updated_job(&job.payload).await),
            EXPIRE_JOB => {
                let chat = job.payload["chat"]
                    .as_str()
                    .and_then(|c| ChatId::new(c).ok());
                let message = job.payload["message"].as_str();
                Some(match (chat, message) {
                    (Some(c), Some(m)) => self.expire(&c, m).await.map(|_| true),
                    _ => Ok(true),
                })
            }
            _ => None,
        }
    }

    /// Calls `settled` for outcomes recorded outside an interaction (HTTP, expiry, withdrawal).
    pub(crate) async fn close_outcomes_of(&self, chat: &ChatId, message_id: &str) {
        let Ok(Some(row)) = self.inner.store.get_chat(chat).await else {
            return;
        };
        let Some(thread) = thread_of(&row) else {
            return;
        };
        let Some(hooks) = self
            .channel(&thread.platform)
            .and_then(|c| c.questions.clone())
        else {
            return;
        };
        let Ok(questions) = self
            .inner
            .store
            .questions_of_message(chat, message_id, now_millis())
            .await
        else {
            return;
        };
        for q in questions.iter().filter(|q| q.rendered) {
            self.close_if_needed(&hooks, q, &thread, q.actor.as_ref())
                .await;
        }
    }
}

/// What happened to a channel message.
#[derive(Debug)]
#[non_exhaustive]
pub enum ChannelMessageOutcome {
    /// It answered (or was otherwise consumed by) a question.
    Consumed(InteractionOutcome),
    /// The participant failed the access check.
    Denied,
    /// It started a turn or was queued.
    Sent(super::Sent),
    /// The same platform message was taken before (a repeated delivery); nothing was done.
    Duplicate,
}

/// The stored id of a channel message: the platform's message id, prefixed with the platform.
pub fn channel_message_id(platform: &str, platform_message_id: &str) -> String {
    format!("{platform}-{platform_message_id}")
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

fn apply_change(record: &QuestionRecord, change: Option<QuestionChange>) -> QuestionRecord {
    let mut out = record.clone();
    if let Some(change) = change {
        if let Some(messages) = change.messages
            && !messages.is_empty()
        {
            out.messages = messages
                .into_iter()
                .map(|m| QuestionMessage {
                    posted_at: if m.posted_at.is_empty() {
                        millis_to_iso(now_millis())
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

/// Backoff of the `n`-th `updated` retry (n ≥ 1): 5 s, 10 s, 20 s, …
pub fn updated_backoff_ms(n: i64) -> i64 {
    UPDATED_FIRST_BACKOFF_MS.saturating_mul(1_i64 << (n - 1).clamp(0, 20))
}

#[allow(dead_code)]
fn _assert_send(_: Duration) {}
