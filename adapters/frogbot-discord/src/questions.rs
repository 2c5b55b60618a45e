//! [`DiscordQuestions`]: the `ChannelQuestions` hooks over a [`DiscordApi`] (serenity's `Http`).
//!
//! A call's questions are asked one message at a time in the thread (channel id = FrogBot thread
//! id). The record's `state` is `frogbot_model::Progress` (older `{"step", "picks"}` states still
//! read); every control id carries the record revision and the question index
//! ([`crate::ids::Control`]), so `parse` answers `stale` for a control drawn for another step.
//!
//! The receiving layer (the `channel` module, or your own gateway handler) must:
//! - answer every component click and modal submission within 3 seconds: with
//!   [`acknowledge`] (a deferred update, [`deferred_update`]) before handing the interaction to the
//!   engine, or — for an "Other…" or "Answer…" click ([`opens_modal`]) — with
//!   [`DiscordQuestions::open_modal`], which opens the modal (a modal must be the first response);
//! - build `Http` with the application id set (followups need it).
//!
//! The input kinds (see [`crate::render`] for how each is drawn): a toggle's buttons answer
//! `"on"`/`"off"`, a confirm's button its label, an optional input's "No answer" nothing. Text and
//! number inputs are answered in a modal holding the step's run of them (up to 5): its submission
//! is read back input by input (the text trimmed; a number with `read_number`, so its range, step
//! and unit apply), and one that does not validate — a number out of range, a text too long, an
//! empty required input — rejects the whole submission with the reason (an ephemeral notice),
//! recording nothing.
//!
//! A reply in the question's thread answers too: an option's label (any case) or number, several
//! separated by commas for a `multiple` question, or — where `custom` is set — any other text; for
//! the other kinds the text, the number, yes/no (a toggle) or the confirm's label
//! (`QuestionItem::choice_in_reply`); a
//! reply older than the current question message (snowflake order) is stale. Every question
//! message has a "Skip" button, and a reply `skip` or `/skip` skips too (also on a `custom`
//! question): either dismisses the whole call. Other text while a
//! question is open, and every reply once it is answered, is not for the question: it reaches
//! the agent.
//!
//! `rejected`, `denied` and `stale` answer a click or submission with an ephemeral followup
//! through the interaction token (`ActionEvent::trigger_id`), and a thread message with a reply.

use std::sync::Arc;

use async_trait::async_trait;
use frogbot_channel::questions::settle_each;
use frogbot_model::NoticeTo;
use frogbot_model::text::truncate;
use frogbot_model::{
    BoxError, Changed, ChannelQuestions, HookArgs, InputKind, Interaction, ParseArgs, ParseResult,
    Progress, QuestionCall, QuestionChange, QuestionItem, QuestionMessage, QuestionModalMetadata,
    RenderArgs, RenderedQuestion, ReplyChoice, Settlement, TOGGLE_OFF, TOGGLE_ON, Thread,
};
use serenity::builder::{
    CreateInteractionResponse, CreateInteractionResponseFollowup, CreateMessage,
};
use serenity::http::Http;
use serenity::model::application::ComponentInteraction;
use serenity::model::id::InteractionId;

use crate::Error;
use crate::client::DiscordApi;
use crate::convert::selected_values;
use crate::ids::{Control, ControlKind, channel_id, message_id, thread_root};
pub use crate::ids::{is_other, opens_modal};
use crate::render::{self, MESSAGE_LIMIT};

/// What a participant is told on a denied or an out-of-date interaction (the shared texts).
pub use frogbot_model::{DENIED_TEXT, STALE_TEXT};

/// The deferred-update response (`DEFERRED_UPDATE_MESSAGE`, type 6): acknowledges a component
/// click or modal submission without changing the message.
pub fn deferred_update() -> CreateInteractionResponse {
    CreateInteractionResponse::Acknowledge
}

/// Sends [`deferred_update`] for an interaction (id and token): do it within 3 seconds.
pub async fn acknowledge<A: DiscordApi + ?Sized>(
    api: &A,
    interaction_id: InteractionId,
    token: &str,
) -> Result<(), Error> {
    api.create_interaction_response(interaction_id, token, &deferred_update())
        .await
}

/// The response to an "Other…" or "Answer…" click ([`opens_modal`]): the modal for the clicked
/// question ("Other…": one text input; "Answer…": the form of the step's text and number inputs,
/// [`render::form_modal`]), its custom id the form locator of the clicked message, so FrogBot
/// routes the submission to the question. (On the HTTP interactions endpoint this is the HTTP
/// response body.)
pub fn other_modal_response(
    interaction: &ComponentInteraction,
    call: &QuestionCall,
) -> Result<CreateInteractionResponse, Error> {
    let custom_id = &interaction.data.custom_id;
    let control = Control::decode(custom_id)
        .filter(|c| matches!(c.kind, ControlKind::Other | ControlKind::Form))
        .ok_or_else(|| Error::NotAControl(custom_id.clone()))?;
    let item = call
        .input
        .questions
        .get(control.question)
        .ok_or_else(|| Error::NotAControl(custom_id.clone()))?;
    let locator = QuestionModalMetadata {
        thread_id: interaction.channel_id.to_string(),
        message_id: interaction.message.id.to_string(),
    };
    let modal = if control.kind == ControlKind::Form {
        render::form_modal(
            &locator,
            &call.input.questions,
            control.revision,
            control.question,
        )?
    } else {
        render::other_modal(&locator, item, control.revision, control.question)?
    };
    Ok(CreateInteractionResponse::Modal(modal))
}

/// [`other_modal_response`], by the name of what it does for both buttons.
pub fn modal_response(
    interaction: &ComponentInteraction,
    call: &QuestionCall,
) -> Result<CreateInteractionResponse, Error> {
    other_modal_response(interaction, call)
}

/// The pure classification behind [`ChannelQuestions::parse`]. Clicks and modal submissions are
/// classified the same whether or not the question is `settled` (the engine answers a match as
/// stale); a thread reply is for the question only while it is open and only when it answers
/// (an option, or own text where `custom`) or skips (`skip`, `/skip`); a wrong number, or several
/// options for a one-choice question, is rejected; anything else is [`ParseResult::Ignore`]: it
/// goes to the agent. The "Skip" button, and a reply that skips, dismiss the whole call.
pub fn parse(args: ParseArgs<'_>) -> ParseResult {
    let ParseArgs {
        call,
        interaction,
        question,
        settled,
    } = args;
    let progress = Progress::of(&call.input, question);
    let Some(step) = progress.step() else {
        return ParseResult::Ignore;
    };
    let current =
        |control: &Control| control.revision == question.revision && control.question == step;
    let Some(item) = call.input.questions.get(step) else {
        return ParseResult::Ignore;
    };
    match interaction {
        Interaction::Action { event } => {
            let Some(control) = Control::decode(&event.action_id) else {
                return ParseResult::Ignore;
            };
            // Skip dismisses the whole call, from the revision it was drawn at.
            if control.kind == ControlKind::Skip {
                return if control.revision == question.revision {
                    ParseResult::Dismiss
                } else {
                    ParseResult::Stale
                };
            }
            if !current(&control) {
                return ParseResult::Stale;
            }
            match (control.kind, item.kind) {
                (ControlKind::Clear, _) if !item.required => {
                    return advance(call, progress, &[(step, Vec::new())]);
                }
                (ControlKind::Clear, _) => {
                    return ParseResult::Rejected {
                        reason: "This question needs an answer.".into(),
                    };
                }
                (ControlKind::Option(i), InputKind::Toggle) if i < 2 => {
                    let value = [TOGGLE_ON, TOGGLE_OFF][i];
                    return advance(call, progress, &[(step, vec![value.to_owned()])]);
                }
                (ControlKind::Option(0), InputKind::Confirm) => {
                    let label = item.confirm_label().to_owned();
                    return advance(call, progress, &[(step, vec![label])]);
                }
                (ControlKind::Option(_) | ControlKind::Select(_), kind)
                    if kind != InputKind::Choice =>
                {
                    return ParseResult::Rejected {
                        reason: "That option is not available.".into(),
                    };
                }
                _ => {}
            }
            let indices: Vec<String> = match control.kind {
                ControlKind::Option(i) => vec![i.to_string()],
                ControlKind::Select(_) => {
                    let mut values = selected_values(&event.raw);
                    if values.is_empty() {
                        values.extend(event.value.clone());
                    }
                    values
                }
                // Opening the modal is the receiver's side effect (`open_other`).
                _ => return ParseResult::Ignore,
            };
            let mut labels = Vec::new();
            for index in &indices {
                match index
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| item.options.get(i))
                {
                    Some(option) => labels.push(option.label.clone()),
                    None => {
                        return ParseResult::Rejected {
                            reason: "That option is not available.".into(),
                        };
                    }
                }
            }
            if labels.is_empty() {
                return ParseResult::Rejected {
                    reason: "Pick an option.".into(),
                };
            }
            advance(call, progress, &[(step, labels)])
        }
        Interaction::ModalSubmit { event } => {
            let mut inputs: Vec<(Control, String)> = event
                .values
                .iter()
                .filter_map(|(key, value)| {
                    Control::decode(key)
                        .filter(|c| c.kind == ControlKind::Text)
                        .map(|c| (c, value.as_str().unwrap_or_default().trim().to_owned()))
                })
                .collect();
            inputs.sort_by_key(|(c, _)| c.question);
            let Some((first, _)) = inputs.first() else {
                return ParseResult::Ignore;
            };
            // The form of the current step: its first input is the current question, every
            // input one of the step's run, all drawn at the current revision.
            let run = render::form_run(&call.input.questions, step);
            if !current(first)
                || inputs
                    .iter()
                    .any(|(c, _)| c.revision != question.revision || !run.contains(&c.question))
            {
                return ParseResult::Stale;
            }
            let mut picks = Vec::new();
            for (control, text) in inputs {
                let Some(item) = call.input.questions.get(control.question) else {
                    return ParseResult::Stale;
                };
                match form_answer(item, text, run.len() > 1) {
                    Ok(selected) => picks.push((control.question, selected)),
                    Err(reason) => return ParseResult::Rejected { reason },
                }
            }
            advance(call, progress, &picks)
        }
        // After the answer, thread replies are the conversation going on: they reach the agent.
        Interaction::Message { .. } if settled => ParseResult::Ignore,
        Interaction::Message { message } => {
            // A reply older than the current question message answers an earlier question
            // (snowflakes are ordered by time).
            let current = question.current().and_then(|m| m.id.parse::<u64>().ok());
            if let (Some(current), Ok(sent)) = (current, message.id.parse::<u64>())
                && sent < current
            {
                return ParseResult::Stale;
            }
            let text = message.text.trim();
            if item.skip_in_reply(text) {
                return ParseResult::Dismiss;
            }
            match item.choice_in_reply(text) {
                ReplyChoice::Options(labels) => advance(call, progress, &[(step, labels)]),
                ReplyChoice::Invalid(reason) => ParseResult::Rejected { reason },
                ReplyChoice::Text if item.custom && !text.is_empty() => {
                    advance(call, progress, &[(step, vec![text.to_owned()])])
                }
                // Not an answer (chatter while the question is open): for the agent.
                _ => ParseResult::Ignore,
            }
        }
    }
}

/// The answer a modal's text input gives `item` (`text` trimmed): the own text of a `custom`
/// choice ("Other…"), the text of a text input, the number of a number input (`read_number`);
/// an empty optional input answers nothing. Why not, as the notice says it (naming the question
/// when the form held several, `named`).
fn form_answer(item: &QuestionItem, text: String, named: bool) -> Result<Vec<String>, String> {
    let why = |reason: &str| {
        let reason = reason.trim_end_matches('.');
        if named {
            format!("{}: {reason}.", item.header)
        } else {
            format!("{}.", render::capitalised(reason))
        }
    };
    match item.kind {
        InputKind::Choice if item.custom && !text.is_empty() => Ok(vec![text]),
        InputKind::Choice if item.custom => Err(why("type an answer")),
        InputKind::Choice => Err(why("this question takes one of its options")),
        InputKind::TextInput | InputKind::NumberInput if text.is_empty() => {
            if item.required {
                Err(why("type an answer"))
            } else {
                Ok(Vec::new())
            }
        }
        InputKind::TextInput => match item.choice_in_reply(&text) {
            ReplyChoice::Options(v) => Ok(v),
            ReplyChoice::Invalid(reason) => Err(why(&reason)),
            _ => Err(why("type an answer")),
        },
        InputKind::NumberInput => item
            .read_number(&text)
            .map(|n| vec![n])
            .map_err(|r| why(&r)),
        _ => Err(why("this question is not answered in a form")),
    }
}

/// Records each pick `(question, selected)`: the next step, or the set's answer (checked with
/// `check_output`, so an answer that does not fit is rejected with the reason).
fn advance(
    call: &QuestionCall,
    mut progress: Progress,
    picks: &[(usize, Vec<String>)],
) -> ParseResult {
    for (q, selected) in picks {
        progress.pick(*q, selected.clone());
    }
    let Some(output) = progress.output(&call.input) else {
        return ParseResult::Partial {
            state: Some(progress.to_state()),
        };
    };
    match call.input.check_output(&output) {
        Ok(()) => ParseResult::Answer { output },
        Err(reason) => ParseResult::Rejected { reason },
    }
}

/// The Discord channel-questions piece, over a [`DiscordApi`] (serenity's `Http` by default).
pub struct DiscordQuestions<A: DiscordApi = Http> {
    api: Arc<A>,
}

impl<A: DiscordApi> Clone for DiscordQuestions<A> {
    fn clone(&self) -> Self {
        DiscordQuestions {
            api: self.api.clone(),
        }
    }
}

impl<A: DiscordApi> std::fmt::Debug for DiscordQuestions<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordQuestions").finish_non_exhaustive()
    }
}

impl<A: DiscordApi> DiscordQuestions<A> {
    /// Over `api` (serenity's `Http` with the application id set, for followups).
    pub fn new(api: Arc<A>) -> Self {
        DiscordQuestions { api }
    }

    /// The API client.
    pub fn api(&self) -> &Arc<A> {
        &self.api
    }

    /// Posts question `step` of `call` at `revision` in `thread` (in an agent conversation in a
    /// DM, `{dm}~{root}`, as a reply to its root).
    pub async fn post_question(
        &self,
        thread: &Thread,
        call: &QuestionCall,
        revision: u64,
        step: usize,
    ) -> Result<QuestionMessage, Error> {
        self.post_step(thread, call, revision, step, false).await
    }

    /// [`Self::post_question`]; `after_first`: a message of this question was posted just
    /// before (an approval's arguments). One question notifies once: a step too long for one
    /// message notifies with its first message, the others (and the question message after
    /// them) are posted with `SUPPRESS_NOTIFICATIONS`.
    async fn post_step(
        &self,
        thread: &Thread,
        call: &QuestionCall,
        revision: u64,
        step: usize,
        after_first: bool,
    ) -> Result<QuestionMessage, Error> {
        let channel = channel_id(&thread.id)?;
        let silent = serenity::model::channel::MessageFlags::SUPPRESS_NOTIFICATIONS;
        let mut later = after_first;
        // A step too long for one message: its beginning first, the controls last.
        for lead in render::step_lead_messages(call, step) {
            let lead = if later { lead.flags(silent) } else { lead };
            self.api.send_message(channel, &lead).await?;
            later = true;
        }
        let mut message = render::question_message(call, revision, step);
        if later {
            message = message.flags(silent);
        }
        if let Some(root) = thread_root(&thread.id) {
            let reference = serenity::model::channel::MessageReference::from((channel, root))
                .fail_if_not_exists(false);
            message = message.reference_message(reference);
        }
        let posted = self.api.send_message(channel, &message).await?;
        Ok(QuestionMessage {
            id: posted.id.to_string(),
            posted_at: posted.timestamp,
            question: Some(step),
        })
    }

    /// Posts `pages`, the rest of a settled view, as replies to the question message `id` in
    /// `channel`, in order: silent (`SUPPRESS_NOTIFICATIONS`, no mention pings), each under the
    /// nonce of `settled:{id}:{n}` with `enforce_nonce`.
    async fn post_continuations(
        &self,
        channel: serenity::model::id::ChannelId,
        id: serenity::model::id::MessageId,
        pages: &[String],
    ) -> Result<(), Error> {
        for (n, page) in pages.iter().enumerate() {
            let nonce = crate::ids::delivery_nonce(&format!("settled:{id}:{n}"));
            let message = CreateMessage::new()
                .content(page)
                .allowed_mentions(crate::format::no_mentions())
                .flags(serenity::model::channel::MessageFlags::SUPPRESS_NOTIFICATIONS)
                .reference_message(
                    serenity::model::channel::MessageReference::from((channel, id))
                        .fail_if_not_exists(false),
                )
                .nonce(serenity::model::channel::Nonce::String(nonce))
                .enforce_nonce(true);
            self.api.send_message(channel, &message).await?;
        }
        Ok(())
    }

    /// Answers an "Other…" or "Answer…" click by opening the modal for the clicked question (the
    /// interaction's first response; don't acknowledge it before), see [`other_modal_response`].
    pub async fn open_modal(
        &self,
        interaction: &ComponentInteraction,
        call: &QuestionCall,
    ) -> Result<(), Error> {
        self.open_other(interaction, call).await
    }

    /// [`Self::open_modal`] (its older name).
    pub async fn open_other(
        &self,
        interaction: &ComponentInteraction,
        call: &QuestionCall,
    ) -> Result<(), Error> {
        let response = other_modal_response(interaction, call)?;
        self.api
            .create_interaction_response(interaction.id, &interaction.token, &response)
            .await
    }
}

#[async_trait]
impl<A: DiscordApi> ChannelQuestions for DiscordQuestions<A> {
    async fn render(&self, args: RenderArgs<'_>) -> Result<Vec<RenderedQuestion>, BoxError> {
        let mut rendered = Vec::new();
        for call in args.calls {
            // An approval too long for the card: its complete arguments first, in order.
            let pages = render::approval_lead_messages(call);
            if !pages.is_empty() {
                let channel = channel_id(&args.thread.id)?;
                for page in &pages {
                    self.api.send_message(channel, page).await?;
                }
            }
            let message = self
                .post_step(args.thread, call, 0, 0, !pages.is_empty())
                .await?;
            rendered.push(RenderedQuestion {
                calls: vec![call.tool_call_id.clone()],
                messages: vec![message],
                state: Some(Progress::from_state(&call.input, None).to_state()),
            });
        }
        Ok(rendered)
    }

    fn parse(&self, args: ParseArgs<'_>) -> ParseResult {
        parse(args)
    }

    async fn updated(&self, args: HookArgs<'_>, _interaction: Option<&Interaction>) -> Changed {
        let Some(step) = Progress::of(&args.call.input, args.question).step() else {
            return Ok(None);
        };
        // A retry after the message was posted finds it already current: nothing to do.
        let current = args.question.current();
        if current.is_some_and(|m| m.question == Some(step)) && step > 0 {
            return Ok(None);
        }
        let message = self
            .post_question(args.thread, args.call, args.question.revision, step)
            .await?;
        let mut messages = args.question.messages.clone();
        messages.push(message);
        Ok(Some(QuestionChange {
            messages: Some(messages),
            state: None,
        }))
    }

    async fn settled(&self, args: HookArgs<'_>, how: Settlement<'_>) -> Changed {
        let channel = channel_id(&args.thread.id)?;
        settle_each(
            crate::PLATFORM,
            &args.question.messages,
            |message| async move {
                let pages = render::settled_pages(args.call, message, how.outcome, how.actor);
                let edit = serenity::builder::EditMessage::new()
                    .content(pages.first().cloned().unwrap_or_default())
                    .components(vec![]);
                let id = message_id(&message.id)?;
                self.api.edit_message(channel, id, &edit).await?;
                // A settled view longer than one message goes on in replies to it (silent, each
                // under a nonce of its own: a retry posts none twice).
                self.post_continuations(channel, id, &pages[1..]).await
            },
        )
        .await?;
        Ok(None)
    }

    /// Tells the participant the notice (the body of `rejected`, `denied` and `stale`): an ephemeral
    /// followup for a click or submission, a reply in the thread for a message.
    async fn notify(&self, args: HookArgs<'_>, to: NoticeTo<'_>) -> Result<(), BoxError> {
        let text = truncate(to.text(), MESSAGE_LIMIT);
        let token = match to.interaction {
            Interaction::Action { event } => event.trigger_id.as_deref(),
            Interaction::ModalSubmit { event } => event.trigger_id.as_deref(),
            Interaction::Message { .. } => None,
        };
        if let Some(token) = token {
            let followup = CreateInteractionResponseFollowup::new()
                .ephemeral(true)
                .content(text);
            return Ok(self.api.create_followup(token, &followup).await?);
        }
        let channel = channel_id(&args.thread.id)?;
        let mut reply = CreateMessage::new().content(text);
        if let Interaction::Message { message } = to.interaction
            && let Ok(id) = message_id(&message.id)
        {
            reply = reply.reference_message((channel, id));
        }
        self.api.send_message(channel, &reply).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use frogbot_model::QuestionOutcome;
    use frogbot_model::{
        ModalSubmitEvent, PlatformUser, QuestionAnswer, QuestionOutput, QuestionRecord,
    };
    use serde_json::{Map, Value, json};

    fn call() -> QuestionCall {
        serde_json::from_value(json!({
            "toolCallId": "c1",
            "input": {"questions": [
                {"header": "Name", "question": "What name?", "options": [{"label": "Frog"}], "custom": true}
            ]}
        }))
        .unwrap()
    }

    /// `parse` of an open question.
    fn open(
        call: &QuestionCall,
        interaction: &Interaction,
        question: &QuestionRecord,
    ) -> ParseResult {
        parse(ParseArgs {
            call,
            interaction,
            question,
            settled: false,
        })
    }

    fn record(revision: u64) -> QuestionRecord {
        QuestionRecord {
            messages: vec![QuestionMessage {
                id: "9".into(),
                posted_at: String::new(),
                question: Some(0),
            }],
            revision,
            state: None,
        }
    }

    fn submit(key: &str, text: &str) -> Interaction {
        let mut values = Map::new();
        values.insert(key.into(), json!(text));
        Interaction::ModalSubmit {
            event: ModalSubmitEvent {
                values,
                private_metadata: Some("fq1:[\"1\",\"9\"]".into()),
                related_message_id: None,
                user: PlatformUser {
                    id: "3".into(),
                    name: None,
                    is_bot: false,
                },
                trigger_id: Some("tok".into()),
                raw: Value::Null,
            },
        }
    }

    #[test]
    fn modal_submit_is_a_custom_answer() {
        let result = open(&call(), &submit("fq:0:0:t", "  Kermit "), &record(0));
        assert_eq!(
            result,
            ParseResult::Answer {
                output: QuestionOutput {
                    answers: vec![QuestionAnswer {
                        header: "Name".into(),
                        selected: vec!["Kermit".into()]
                    }]
                }
            }
        );
        assert!(matches!(
            open(&call(), &submit("fq:0:0:t", "   "), &record(0)),
            ParseResult::Rejected { .. }
        ));
        assert_eq!(
            open(&call(), &submit("fq:0:0:t", "Kermit"), &record(1)),
            ParseResult::Stale
        );
        assert_eq!(
            open(&call(), &submit("other", "Kermit"), &record(0)),
            ParseResult::Ignore
        );
    }

    #[test]
    fn thread_replies_answer_by_label_number_or_own_text() {
        let answer = |label: &str| ParseResult::Answer {
            output: QuestionOutput {
                answers: vec![QuestionAnswer {
                    header: "Name".into(),
                    selected: vec![label.into()],
                }],
            },
        };
        assert_eq!(
            open(&call(), &reply("10", " frog "), &record(0)),
            answer("Frog")
        );
        assert_eq!(open(&call(), &reply("10", "1"), &record(0)), answer("Frog"));
        assert_eq!(
            open(&call(), &reply("10", "Kermit"), &record(0)),
            answer("Kermit")
        );
        // Older than the question message ("9"): it answered something earlier.
        assert_eq!(
            open(&call(), &reply("8", "Frog"), &record(0)),
            ParseResult::Stale
        );
    }

    fn reply(id: &str, text: &str) -> Interaction {
        serde_json::from_value(json!({
            "type": "message",
            "message": {"id": id, "text": text, "author": {"id": "3"},
                        "metadata": {"dateSent": "2026-01-01T00:00:00Z"}}
        }))
        .unwrap()
    }

    /// A question without own answers: options only.
    fn options_only() -> QuestionCall {
        serde_json::from_value(json!({
            "toolCallId": "c1",
            "input": {"questions": [
                {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]}
            ]}
        }))
        .unwrap()
    }

    #[test]
    fn chatter_while_a_question_is_open_reaches_the_agent() {
        let call = options_only();
        // Not an answer: ignored (the engine sends it to the agent), not rejected.
        for text in ["what do you mean?", "Kermit", "", "prod please"] {
            assert_eq!(
                open(&call, &reply("10", text), &record(0)),
                ParseResult::Ignore,
                "{text:?}"
            );
        }
        // A real answer still answers; a wrong number or two options are still rejected.
        assert!(matches!(
            open(&call, &reply("10", "PROD"), &record(0)),
            ParseResult::Answer { output } if output.answers[0].selected == ["prod"]
        ));
        assert!(matches!(
            open(&call, &reply("10", "2"), &record(0)),
            ParseResult::Answer { output } if output.answers[0].selected == ["prod"]
        ));
        assert!(matches!(
            open(&call, &reply("10", "7"), &record(0)),
            ParseResult::Rejected { reason } if reason.contains("1 to 2")
        ));
        assert!(matches!(
            open(&call, &reply("10", "1, 2"), &record(0)),
            ParseResult::Rejected { reason } if reason.contains("only one")
        ));
    }

    #[test]
    fn replies_after_the_answer_reach_the_agent() {
        let settled = |call: &QuestionCall, interaction: &Interaction| {
            parse(ParseArgs {
                call,
                interaction,
                question: &record(0),
                settled: true,
            })
        };
        // Replies that would answer (a label, a number, own text) are the conversation now.
        for text in ["prod", "1", "thanks!", "7"] {
            assert_eq!(
                settled(&options_only(), &reply("10", text)),
                ParseResult::Ignore,
                "{text:?}"
            );
        }
        assert_eq!(
            settled(&call(), &reply("10", "Kermit")),
            ParseResult::Ignore
        );
        // Clicks and forms are classified as before: the engine answers a match as stale.
        assert!(matches!(
            settled(&call(), &submit("fq:0:0:t", "Kermit")),
            ParseResult::Answer { .. }
        ));
    }

    #[test]
    fn skip_clicks_and_typed_skips_dismiss() {
        let click = |id: &str| Interaction::Action {
            event: frogbot_model::ActionEvent {
                action_id: id.into(),
                value: None,
                message_id: "9".into(),
                user: PlatformUser {
                    id: "3".into(),
                    name: None,
                    is_bot: false,
                },
                trigger_id: None,
                raw: Value::Null,
            },
        };
        let skip = |revision| {
            Control {
                revision,
                question: 0,
                kind: ControlKind::Skip,
            }
            .encode()
        };
        assert_eq!(
            open(&call(), &click(&skip(2)), &record(2)),
            ParseResult::Dismiss
        );
        // A Skip drawn at another revision is stale.
        assert_eq!(
            open(&call(), &click(&skip(1)), &record(2)),
            ParseResult::Stale
        );
        // Typed: on a `custom` question the word alone skips, it is no own answer.
        for text in ["skip", " Skip ", "/skip", "/SKIP"] {
            assert_eq!(
                open(&call(), &reply("10", text), &record(0)),
                ParseResult::Dismiss,
                "{text:?}"
            );
            assert_eq!(
                open(&options_only(), &reply("10", text), &record(0)),
                ParseResult::Dismiss,
                "{text:?}"
            );
        }
        assert!(matches!(
            open(&call(), &reply("10", "skip it"), &record(0)),
            ParseResult::Answer { output } if output.answers[0].selected == ["skip it"]
        ));
        // Older than the question message, or after the answer: not a skip of this question.
        assert_eq!(
            open(&call(), &reply("8", "skip"), &record(0)),
            ParseResult::Stale
        );
        assert_eq!(
            parse(ParseArgs {
                call: &call(),
                interaction: &reply("10", "skip"),
                question: &record(0),
                settled: true,
            }),
            ParseResult::Ignore
        );
    }

    #[test]
    fn clicks_are_checked_against_revision_and_options() {
        let click = |id: &str| Interaction::Action {
            event: frogbot_model::ActionEvent {
                action_id: id.into(),
                value: None,
                message_id: "9".into(),
                user: PlatformUser {
                    id: "3".into(),
                    name: None,
                    is_bot: false,
                },
                trigger_id: None,
                raw: Value::Null,
            },
        };
        assert!(matches!(
            open(&call(), &click("fq:2:0:0"), &record(2)),
            ParseResult::Answer { .. }
        ));
        assert_eq!(
            open(&call(), &click("fq:1:0:0"), &record(2)),
            ParseResult::Stale
        );
        assert!(matches!(
            open(&call(), &click("fq:2:0:7"), &record(2)),
            ParseResult::Rejected { .. }
        ));
        assert_eq!(
            open(&call(), &click("fq:2:0:o"), &record(2)),
            ParseResult::Ignore
        );
        assert_eq!(
            open(&call(), &click("hello"), &record(2)),
            ParseResult::Ignore
        );
        assert_eq!(serde_json::to_value(deferred_update()).unwrap()["type"], 6);
    }

    #[tokio::test]
    async fn hooks_through_the_recording_client() {
        use crate::testing::RecordingDiscord;
        use frogbot_model::{RequestContext, Thread};
        let api = Arc::new(RecordingDiscord::new());
        let piece = DiscordQuestions::new(api.clone());
        let call: QuestionCall = serde_json::from_value(json!({
            "toolCallId": "c1",
            "input": {"questions": [
                {"header": "A", "question": "First?", "options": [{"label": "x"}, {"label": "y"}]},
                {"header": "B", "question": "Second?", "options": [{"label": "z"}]}
            ]}
        }))
        .unwrap();
        let thread = Thread {
            id: "700000000000000007".into(),
            platform: "discord".into(),
            chat_id: "discord:700000000000000007".into(),
        };
        let req = RequestContext::default();
        let rendered = piece
            .render(RenderArgs {
                calls: std::slice::from_ref(&call),
                req: &req,
                thread: &thread,
            })
            .await
            .unwrap();
        let mut record = QuestionRecord {
            messages: rendered[0].messages.clone(),
            revision: 0,
            state: rendered[0].state.clone(),
        };
        // A click on "y" is a step; `updated` posts the second question at the new revision.
        let click = Interaction::Action {
            event: frogbot_model::ActionEvent {
                action_id: "fq:0:0:1".into(),
                value: None,
                message_id: record.messages[0].id.clone(),
                user: PlatformUser {
                    id: "3".into(),
                    name: None,
                    is_bot: false,
                },
                trigger_id: Some("tok".into()),
                raw: Value::Null,
            },
        };
        let ParseResult::Partial { state } = piece.parse(ParseArgs {
            call: &call,
            interaction: &click,
            question: &record,
            settled: false,
        }) else {
            panic!("a step")
        };
        record.state = state;
        record.revision = 1;
        let args = HookArgs {
            call: &call,
            question: &record,
            req: &req,
            thread: &thread,
        };
        let change = piece.updated(args, Some(&click)).await.unwrap().unwrap();
        let messages = change.messages.unwrap();
        assert_eq!(messages.len(), 2);
        piece.stale(args, &click).await.unwrap();
        let calls = api.calls();
        let methods: Vec<&str> = calls.iter().map(|c| c.method).collect();
        assert_eq!(methods, ["send_message", "send_message", "create_followup"]);
        assert_eq!(
            calls[1].body["components"][0]["components"][0]["custom_id"],
            "fq:1:1:0"
        );
        assert_eq!(calls[2].target, ["tok"]);
        assert_eq!(calls[2].body["content"], STALE_TEXT);
        // Settling edits every message of the call, even when one edit fails.
        api.fail_edits_of(crate::ids::message_id(&messages[0].id).unwrap());
        let both = QuestionRecord {
            messages,
            ..record.clone()
        };
        let args = HookArgs {
            question: &both,
            ..args
        };
        let settled = piece
            .settled(args, QuestionOutcome::Dismissed.by(None))
            .await;
        assert!(settled.is_err());
        let edits = api
            .calls()
            .iter()
            .filter(|c| c.method == "edit_message")
            .count();
        assert_eq!(edits, 2);
    }
}
