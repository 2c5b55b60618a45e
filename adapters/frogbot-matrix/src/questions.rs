//! [`MatrixQuestions`]: FrogBot's channel-questions hooks for Matrix, over a thin [`MatrixApi`].
//!
//! Each question of a call gets its own message in the thread (`question` set in the record): a
//! native poll for a choice with options, else a message saying how to answer (see
//! [`crate::render`] for every input kind). The questions come one at a time: `render` posts the
//! first, and each step (`updated`) posts the next one still unanswered, which becomes the call's
//! current message, with its own hint (the engine takes poll responses and reactions only from a
//! call's current message, its last: a set posted all at once could be answered only there).
//!
//! A single-choice poll answers on the first vote. A multiple-choice poll does not: clients send
//! the whole selection at every click, so each response is kept as the question's checked options
//! (`Progress::checked`) and sent by a reply `done` or a ✅ reaction on the poll; such a poll with
//! a selection is not redrawn after a step (an edit would clear what the client shows), its
//! answers read at the revision kept in `Progress::drawn`.
//!
//! Answers come as poll responses (stable or unstable), keycap reactions on the poll, ✅ / ❌
//! reactions on a toggle's or a confirm's message (the bot reacts with them first), or thread
//! replies: a number (`2`, `1 3` for several) picks options, other text is an own answer where the
//! question allows one; a text, a number, yes / no or the confirm label answers the other kinds
//! ([`QuestionItem::choice_in_reply`]: a number out of range or a text too long is refused with
//! the reason; a reply addressed to such an input's message that is no answer is refused saying
//! what is wanted); `-` leaves an optional input empty; `skip` or `/skip` (also on a question that
//! takes an own answer) skips: it dismisses the whole call, and every question's text says so in
//! its last line (polls have no buttons). A reply to one of the question messages targets that
//! question (answering an earlier one again); otherwise the first question still unanswered. Text
//! that is no answer, and every reply once the question is answered, goes to the agent. Progress
//! ([`frogbot_model::Progress`]: answers so far, per question) lives in the record's state; this
//! type keeps no state. While the set has an expiry every message shows "open until …"
//! (`call.expires_at`, read when the message is drawn).
//!
//! Poll answer ids carry the set's revision ([`crate::ids::answer_id`]): after a step, `updated`
//! redraws a poll still open with the new revision's ids (an `m.replace` edit), so a response to
//! the old answers is stale. A reaction carries no revision: a keycap, ✅ or ❌ on a question
//! already answered is stale.

use async_trait::async_trait;
use frogbot_channel::questions::settle_each;
use frogbot_model::InputKind;
use frogbot_model::{
    BoxError, Changed, ChannelQuestions, HookArgs, Interaction, ParseArgs, ParseResult, Progress,
    QuestionCall, QuestionChange, QuestionInput, QuestionItem, QuestionMessage, QuestionRecord,
    RenderArgs, RenderedQuestion, ReplyChoice, Settlement, Thread,
};
use frogbot_model::{Notice, NoticeTo};
use matrix_sdk::ruma::{EventId, OwnedEventId, RoomId, UserId};

use crate::client::MatrixApi;
use crate::ids::{
    POLL_ACTION, REACTION_ACTION, message_id, parse_answer_id, reaction_answer, reaction_option,
    split_message_id,
};
use crate::render::{
    DONE_REPLY, EMPTY_REPLY, PollEvents, card_message, card_replacement, has_poll, mention_notice,
    mention_people, open_line, outcome_text, people_asked, poll_end, poll_replacement, poll_start,
    reactions,
};

/// What a person is told who says done on a multiple-choice poll with nothing picked.
pub const NOTHING_PICKED: &str =
    "pick one or more options in the poll first (or reply with their numbers, e.g. 1 3).";

/// What a participant is told on a denied or an out-of-date interaction (the shared texts).
pub use frogbot_model::{DENIED_TEXT, STALE_TEXT};
/// What a participant is told before the reason of a rejected answer.
pub const REJECTED_TEXT: &str = "That answer was not taken:";

/// FrogBot's channel-questions hooks for Matrix.
#[derive(Debug)]
pub struct MatrixQuestions<A> {
    api: A,
    events: PollEvents,
}

impl<A: MatrixApi> MatrixQuestions<A> {
    /// Hooks over `api` (matrix-sdk's `Client`, or any other [`MatrixApi`]), sending the poll
    /// events Element renders ([`PollEvents::Unstable`], `org.matrix.msc3381.poll.*`).
    pub fn new(api: A) -> Self {
        Self {
            api,
            events: PollEvents::default(),
        }
    }

    /// Which poll event types to send (responses of both kinds are always read).
    pub fn with_poll_events(mut self, events: PollEvents) -> Self {
        self.events = events;
        self
    }

    /// The client.
    pub fn api(&self) -> &A {
        &self.api
    }

    /// Posts input `q` of `call` in `thread` at `revision` (a poll, or a message saying how to
    /// answer, with the ✅ / ❌ reactions to tap), under a transaction id of the thread, the call,
    /// the input and the revision, so a retried hook posts it once.
    async fn post(
        &self,
        thread: &Thread,
        call: &QuestionCall,
        q: usize,
        revision: u64,
    ) -> Result<QuestionMessage, BoxError> {
        let (room, root) = split_message_id(&thread.id)?;
        let input = &call.input;
        let open = open_line(call.expires_at.as_deref(), chrono::Utc::now());
        let (event_type, content) = if has_poll(&input.questions[q]) {
            poll_start(input, q, &root, self.events, revision, open.as_deref())?
        } else {
            card_message(input, q, open.as_deref(), &root)?
        };
        // The people it is for (an `ask`'s person) are mentioned, so their clients notify them.
        let content = (event_type, mention_people(content, &people_asked(input)));
        let txn: String = format!("frogbot-q-{root}-{}-{q}-r{revision}", call.tool_call_id)
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        // A list too long for one message: its options first, in order.
        for (i, page) in crate::render::list_pages(input, q).iter().enumerate() {
            let (event_type, content) = crate::render::thread_message(page, &root)?;
            self.api
                .send_once(&room, event_type, content, &format!("{txn}-p{i}"))
                .await?;
        }
        let event = self
            .api
            .send_once(&room, content.0, content.1, &txn)
            .await?;
        // The ✅ (and ❌) to tap; a reaction that fails leaves the typed reply, which the message
        // names too.
        for (event_type, content) in reactions(input, q, &event) {
            if let Err(e) = self.api.send(&room, event_type, content).await {
                tracing::warn!(message = %event, error = %e, "could not react on a Matrix question message");
            }
        }
        Ok(QuestionMessage {
            id: message_id(&room, &event),
            posted_at: String::new(),
            question: Some(q),
        })
    }

    /// Redacts the bot's own reactions on `event` (the ✅ / ❌ it placed for people to tap). A
    /// failure is logged: the settled text already says the question is closed.
    async fn take_off_own_reactions(&self, room: &RoomId, event: &EventId) {
        let Some(me) = self.api.own_user() else {
            return;
        };
        let mine = match self.api.annotations(room, event).await {
            Ok(all) => all
                .into_iter()
                .filter(|e| e["sender"] == me.as_str())
                .filter_map(|e| OwnedEventId::try_from(e["event_id"].as_str()?).ok())
                .collect::<Vec<_>>(),
            Err(e) => {
                tracing::debug!(message = %event, error = %e, "reading a settled question's reactions failed");
                return;
            }
        };
        for id in mine {
            if let Err(e) = self.api.redact(room, &id, None).await {
                tracing::debug!(message = %event, error = %e, "taking a reaction off a settled question failed");
            }
        }
    }
}

/// Picks options `chosen` (indices) for question `q`.
fn pick(
    input: &QuestionInput,
    question: &QuestionRecord,
    q: usize,
    chosen: &[usize],
) -> ParseResult {
    let item = &input.questions[q];
    let n = item.options.len();
    if chosen.iter().any(|&o| o >= n) {
        return ParseResult::Rejected {
            reason: format!("pick a number from 1 to {n}."),
        };
    }
    if !item.multiple && chosen.len() > 1 {
        return ParseResult::Rejected {
            reason: "pick only one option.".into(),
        };
    }
    let mut labels: Vec<String> = Vec::new();
    for &o in chosen {
        let l = &item.options[o].label;
        if !labels.contains(l) {
            labels.push(l.clone());
        }
    }
    let mut progress = Progress::of(input, question);
    progress.pick(q, labels);
    progress.parse_result(input)
}

fn parse_action(
    input: &QuestionInput,
    question: &QuestionRecord,
    action: &str,
    message: &str,
    value: &str,
) -> ParseResult {
    let Some(target) = question.messages.iter().find(|m| m.id == message) else {
        return ParseResult::Stale;
    };
    let Some((q, item)) = target
        .question
        .and_then(|q| input.questions.get(q).map(|i| (q, i)))
    else {
        return ParseResult::Ignore;
    };
    match action {
        POLL_ACTION if has_poll(item) && item.multiple => select(input, question, q, value),
        POLL_ACTION if has_poll(item) => {
            let ids: Vec<&str> = value.split(',').filter(|s| !s.is_empty()).collect();
            if ids.is_empty() {
                return ParseResult::Ignore; // a vote taken back
            }
            let Some(answers) = ids
                .iter()
                .map(|a| parse_answer_id(a))
                .collect::<Option<Vec<_>>>()
            else {
                return ParseResult::Rejected {
                    reason: "that poll answer is not one of the options.".into(),
                };
            };
            // Answers drawn at another revision of the set: the poll has been redrawn since.
            if answers.iter().any(|a| a.revision != question.revision) {
                return ParseResult::Stale;
            }
            let mut chosen: Vec<usize> = answers.iter().map(|a| a.option).collect();
            if !input.questions[q].multiple {
                chosen.truncate(1); // MSC3381: only the first `max_selections` count
            }
            pick(input, question, q, &chosen)
        }
        // ✅ on a multiple-choice poll sends what is picked in it.
        REACTION_ACTION if has_poll(item) && item.multiple && is_yes(value) => {
            if Progress::of(input, question).picks[q].is_some() {
                return ParseResult::Stale;
            }
            send_selection(input, question, q)
        }
        REACTION_ACTION if has_poll(item) => match reaction_option(value) {
            // A reaction names no revision: on a question answered already, it is out of date.
            Some(_) if Progress::of(input, question).picks[q].is_some() => ParseResult::Stale,
            Some(o) => pick(input, question, q, &[o]),
            None => ParseResult::Ignore,
        },
        // ✅ / ❌ on a toggle's or a confirm's message.
        REACTION_ACTION => {
            let Some(answer) = reaction_answer(item, value) else {
                return ParseResult::Ignore;
            };
            let mut progress = Progress::of(input, question);
            if progress.picks[q].is_some() {
                return ParseResult::Stale;
            }
            progress.pick(q, vec![answer]);
            progress.parse_result(input)
        }
        _ => ParseResult::Ignore,
    }
}

/// Whether a reaction key is a ✅ (or ✔️, ☑️, 👍).
fn is_yes(key: &str) -> bool {
    ["✅", "✔", "☑", "👍"].contains(&key.trim_end_matches('\u{fe0f}'))
}

/// The key under which [`Progress::drawn`] keeps question `q`'s revision.
fn drawn_key(q: usize) -> String {
    q.to_string()
}

/// A poll response on the multiple-choice poll of question `q`: clients send the whole selection
/// at every click (and an empty one when the last pick is taken back), so it is kept as the
/// question's checked options (a partial answer), sent when the person says done
/// ([`send_selection`]). Answers are read at the set's revision or at the one the poll was last
/// drawn at (a poll with a selection is not redrawn, see `updated`).
fn select(input: &QuestionInput, question: &QuestionRecord, q: usize, value: &str) -> ParseResult {
    let item = &input.questions[q];
    let mut progress = Progress::of(input, question);
    let kept = progress.drawn.get(&drawn_key(q)).copied();
    let mut chosen = Vec::new();
    let mut revision = question.revision;
    for id in value.split(',').filter(|s| !s.is_empty()) {
        let Some(a) = parse_answer_id(id) else {
            return ParseResult::Rejected {
                reason: "that poll answer is not one of the options.".into(),
            };
        };
        if a.revision != question.revision && Some(a.revision) != kept {
            return ParseResult::Stale;
        }
        if a.option >= item.options.len() {
            return ParseResult::Rejected {
                reason: format!("pick a number from 1 to {}.", item.options.len()),
            };
        }
        revision = a.revision;
        chosen.push(a.option);
    }
    if progress.picks[q].is_some() {
        return ParseResult::Stale;
    }
    chosen.sort_unstable();
    chosen.dedup();
    if let Some(c) = progress.checked.get_mut(q) {
        *c = chosen;
    }
    progress.drawn.insert(drawn_key(q), revision);
    ParseResult::Partial {
        state: Some(progress.to_state()),
    }
}

/// "Done" on the multiple-choice poll of question `q`: its checked options become its answer
/// (refused when none is checked).
fn send_selection(input: &QuestionInput, question: &QuestionRecord, q: usize) -> ParseResult {
    let item = &input.questions[q];
    let mut progress = Progress::of(input, question);
    let labels = frogbot_channel::questions::labels_of(item, progress.checked(q));
    if labels.is_empty() {
        return ParseResult::Rejected {
            reason: NOTHING_PICKED.into(),
        };
    }
    progress.pick(q, labels);
    progress.parse_result(input)
}

/// Whether `text` is the reply that sends a multiple-choice poll's selection on `item` (`done`,
/// unless an option is called so).
fn is_done(item: &QuestionItem, text: &str) -> bool {
    let text = text.trim().trim_start_matches('/');
    has_poll(item)
        && item.multiple
        && text.eq_ignore_ascii_case(DONE_REPLY)
        && !item
            .options
            .iter()
            .any(|o| o.label.trim().eq_ignore_ascii_case(DONE_REPLY))
}

/// Why a reply addressed to input `item`'s message is no answer (for the kinds other than a
/// choice): what it wants instead.
fn wanted(item: &QuestionItem, text: &str) -> String {
    match item.kind {
        InputKind::NumberInput => match item.read_number(text) {
            Err(reason) => format!("{reason}."),
            Ok(_) => "enter a number.".into(),
        },
        InputKind::Toggle => "reply yes or no.".into(),
        InputKind::Confirm => format!(
            "reply \"{}\" to confirm, or skip to skip.",
            item.confirm_label()
        ),
        _ => "the answer is empty.".into(),
    }
}

fn parse_message(
    input: &QuestionInput,
    question: &QuestionRecord,
    reply_to: Option<&str>,
    text: &str,
) -> ParseResult {
    let mut progress = Progress::of(input, question);
    let addressed = reply_to
        .and_then(|r| question.messages.iter().find(|m| m.id == r))
        .and_then(|m| m.question)
        .filter(|&q| q < input.questions.len());
    let Some(q) = addressed.or_else(|| progress.step()) else {
        return ParseResult::Ignore;
    };
    let item = &input.questions[q];
    let text = text.trim();
    if item.skip_in_reply(text) {
        return ParseResult::Dismiss;
    }
    if !item.required && text == EMPTY_REPLY {
        progress.pick(q, Vec::new());
        return progress.parse_result(input);
    }
    if is_done(item, text) {
        return send_selection(input, question, q);
    }
    match item.choice_in_reply(text) {
        ReplyChoice::Options(labels) => {
            progress.pick(q, labels);
            return progress.parse_result(input);
        }
        ReplyChoice::Invalid(reason) => return ParseResult::Rejected { reason },
        _ => {}
    }
    if item.kind != InputKind::Choice {
        // No answer: said to the input's message, the person is told what it wants; in the
        // thread, it is the conversation going on.
        return match addressed {
            Some(_) => ParseResult::Rejected {
                reason: wanted(item, text),
            },
            None => ParseResult::Ignore,
        };
    }
    if !item.custom {
        return ParseResult::Ignore;
    }
    if text.is_empty() {
        return ParseResult::Rejected {
            reason: "the answer is empty.".into(),
        };
    }
    progress.pick(q, vec![text.to_owned()]);
    progress.parse_result(input)
}

#[async_trait]
impl<A: MatrixApi> ChannelQuestions for MatrixQuestions<A> {
    /// Posts the message of the set's first input (the others follow, one per step, from
    /// `updated`).
    async fn render(&self, args: RenderArgs<'_>) -> Result<Vec<RenderedQuestion>, BoxError> {
        let mut out = Vec::new();
        for call in args.calls {
            // An approval too long for a poll: its complete arguments first, in order.
            if let [item] = call.input.questions.as_slice()
                && let Some(pages) = crate::render::approval_pages(item)
            {
                let (room, root) = split_message_id(&args.thread.id)?;
                for page in &pages.before {
                    let (event_type, content) = crate::render::markdown_message(page, &root)?;
                    self.api.send(&room, event_type, content).await?;
                }
            }
            let progress = Progress::from_state(&call.input, None);
            let first = self
                .post(args.thread, call, progress.step().unwrap_or(0), 0)
                .await?;
            out.push(RenderedQuestion {
                calls: vec![call.tool_call_id.clone()],
                messages: vec![first],
                state: Some(progress.to_state()),
            });
        }
        Ok(out)
    }

    /// After a step: the message of the input now asked is posted (it becomes the current
    /// message), and a poll still open is redrawn (an `m.replace` edit) with answer ids of the new
    /// revision, so responses to the old ones are stale.
    async fn updated(&self, args: HookArgs<'_>, _interaction: Option<&Interaction>) -> Changed {
        let input = &args.call.input;
        let revision = args.question.revision;
        let mut progress = Progress::of(input, args.question);
        let drawn_before = progress.drawn.clone();
        let open = open_line(args.call.expires_at.as_deref(), chrono::Utc::now());
        for m in &args.question.messages {
            let Some(q) = m.question.filter(|&q| {
                input.questions.get(q).is_some_and(has_poll) && progress.picks[q].is_none()
            }) else {
                continue;
            };
            // A multiple-choice poll with a selection stays as drawn: an edit would clear the
            // selection the person's client shows (its answers are read at the revision kept).
            if input.questions[q].multiple
                && !progress.checked(q).is_empty()
                && progress.drawn.contains_key(&drawn_key(q))
            {
                continue;
            }
            progress.drawn.remove(&drawn_key(q));
            let (room, event) = split_message_id(&m.id)?;
            let c = poll_replacement(
                input,
                q,
                &event,
                None,
                self.events,
                revision,
                open.as_deref(),
            )?;
            self.api.send(&room, c.0, c.1).await?;
        }
        let state = (progress.drawn != drawn_before).then(|| progress.to_state());
        let unchanged = || {
            state.clone().map(|state| QuestionChange {
                messages: None,
                state: Some(state),
            })
        };
        let Some(step) = progress.step() else {
            return Ok(unchanged());
        };
        if args
            .question
            .messages
            .iter()
            .any(|m| m.question == Some(step))
        {
            return Ok(unchanged());
        }
        let next = self.post(args.thread, args.call, step, revision).await?;
        let mut messages = args.question.messages.clone();
        messages.push(next);
        Ok(Some(QuestionChange {
            messages: Some(messages),
            state,
        }))
    }

    fn parse(&self, args: ParseArgs<'_>) -> ParseResult {
        let (input, question) = (&args.call.input, args.question);
        match args.interaction {
            Interaction::Action { event } => parse_action(
                input,
                question,
                &event.action_id,
                &event.message_id,
                event.value.as_deref().unwrap_or(""),
            ),
            // After the answer, thread replies are the conversation going on: they reach the
            // agent (poll responses and reactions are classified as before; a match is stale).
            Interaction::Message { .. } if args.settled => ParseResult::Ignore,
            Interaction::Message { message } => {
                parse_message(input, question, message.reply_to.as_deref(), &message.text)
            }
            _ => ParseResult::Ignore,
        }
    }

    async fn settled(&self, args: HookArgs<'_>, how: Settlement<'_>) -> Changed {
        let input = &args.call.input;
        // "Answered by Ada": the member's display name in the room when known, else the id.
        let by_id = how
            .actor
            .and_then(|a| a.identity.as_ref())
            .map(|i| i.user.id.clone());
        let by = match &by_id {
            Some(id) => {
                let name = match (
                    split_message_id(&args.thread.id),
                    UserId::parse(id.as_str()),
                ) {
                    (Ok((room, _)), Ok(user)) => self.api.member_name(&room, &user).await,
                    _ => None,
                };
                Some(
                    name.filter(|n| !n.trim().is_empty())
                        .unwrap_or_else(|| id.clone()),
                )
            }
            None => None,
        };
        let progress = Progress::of(input, args.question);
        let (progress, by) = (&progress, by.as_deref());
        settle_each(crate::PLATFORM, &args.question.messages, |m| async move {
            let q = m
                .question
                .filter(|&q| q < input.questions.len())
                .unwrap_or(0);
            let line = outcome_text(input, q, how.outcome, by);
            let (room, event) = split_message_id(&m.id)?;
            if !has_poll(&input.questions[q]) {
                let c = card_replacement(input, q, &event, &line)?;
                self.api.send(&room, c.0, c.1).await?;
            } else {
                let c = poll_end(&event, &line, self.events)?;
                self.api.send(&room, c.0, c.1).await?;
                // A poll kept as drawn (a multiple choice picked in) keeps its answer ids,
                // so the votes the person's client shows stay counted.
                let revision = progress
                    .drawn
                    .get(&drawn_key(q))
                    .copied()
                    .unwrap_or(args.question.revision);
                let c =
                    poll_replacement(input, q, &event, Some(&line), self.events, revision, None)?;
                self.api.send(&room, c.0, c.1).await?;
            }
            // The ✅ / ❌ the bot placed to tap are controls: a settled question has none
            // (looked up only where the bot placed some).
            if !reactions(input, q, &event).is_empty() {
                self.take_off_own_reactions(&room, &event).await;
            }
            Ok::<(), BoxError>(())
        })
        .await?;
        Ok(None)
    }

    /// Tells the participant the notice in the thread, mentioning them (replying to their message
    /// when the interaction is one): the one body of the rejected, denied and stale hooks.
    async fn notify(&self, args: HookArgs<'_>, to: NoticeTo<'_>) -> Result<(), BoxError> {
        let text = match to.notice {
            Notice::Rejected(reason) => format!("{REJECTED_TEXT} {reason}"),
            _ => to.text().to_string(),
        };
        let (room, root) = split_message_id(&args.thread.id)?;
        let user = UserId::parse(to.interaction.user().id.as_str())
            .map_err(|e| crate::Error::Event(e.to_string()))?;
        let reply_to: Option<OwnedEventId> = match to.interaction {
            Interaction::Message { message } => split_message_id(&message.id).ok().map(|(_, e)| e),
            _ => None,
        };
        let content = mention_notice(&user, &text, &root, reply_to)?;
        self.api.send(&room, content.0, content.1).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{SKIP_LINE, question_text};
    use frogbot_model::QuestionCall;
    use frogbot_model::QuestionOutcome;
    use serde_json::json;

    fn input() -> QuestionInput {
        let call: QuestionCall = serde_json::from_value(json!({"toolCallId": "c", "input": {
            "questions": [
                {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]},
                {"header": "Note", "question": "Anything else?", "custom": true}
            ]}}))
        .unwrap();
        call.input
    }

    fn record() -> QuestionRecord {
        QuestionRecord {
            messages: (0..2)
                .map(|q| QuestionMessage {
                    id: format!("!r:localhost|$q{q}"),
                    posted_at: String::new(),
                    question: Some(q),
                })
                .collect(),
            revision: 0,
            state: None,
        }
    }

    #[test]
    fn a_typed_skip_dismisses_the_question_it_addresses() {
        for text in ["skip", " Skip ", "/skip", "/SKIP"] {
            // In the thread (the question being asked), and as a reply to either question,
            // also the one that takes an own answer.
            for reply_to in [None, Some("!r:localhost|$q0"), Some("!r:localhost|$q1")] {
                assert_eq!(
                    parse_message(&input(), &record(), reply_to, text),
                    ParseResult::Dismiss,
                    "{text:?} replying to {reply_to:?}"
                );
            }
        }
        // "skip it" is an own answer where one is taken, chatter where not.
        assert!(matches!(
            parse_message(&input(), &record(), Some("!r:localhost|$q1"), "skip it"),
            ParseResult::Partial { .. }
        ));
        assert_eq!(
            parse_message(&input(), &record(), None, "skip it"),
            ParseResult::Ignore
        );
    }

    #[test]
    fn every_question_says_how_to_skip_it_and_the_settled_view_who_did() {
        let mut long = input();
        long.questions[0].question = "why? ".repeat(2000);
        for i in [input(), long] {
            for q in 0..2 {
                let text = question_text(&i, q);
                assert!(text.ends_with(&format!("\n{SKIP_LINE}")), "{text}");
                assert!(text.chars().count() <= crate::render::FALLBACK_CHARS);
            }
        }
        let i = input();
        assert_eq!(
            outcome_text(&i, 0, &QuestionOutcome::Dismissed, Some("@ada:localhost")),
            "⏭️ Skipped by @ada:localhost"
        );
        assert_eq!(
            outcome_text(&i, 0, &QuestionOutcome::Dismissed, None),
            "⏭️ Skipped."
        );
    }
}
