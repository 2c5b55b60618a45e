//! [`TelegramQuestions`]: FrogBot's channel-questions hooks for Telegram, over a thin
//! [`TelegramApi`].
//!
//! Each question of a call gets its own message with an inline keyboard (`question` set in the
//! record); a question that allows an own answer also gets a ForceReply prompt, and a reply to it
//! is that question's answer. Progress (picks, toggles, prompt ids) lives in the record's state.

use async_trait::async_trait;
use chrono::SecondsFormat;
use frogbot_model::BoxError;
use frogbot_model::{
    Actor, ChannelQuestions, HookArgs, Interaction, ParseArgs, ParseResult, QuestionChange,
    QuestionInput, QuestionMessage, QuestionOutcome, QuestionRecord, RenderArgs, RenderedQuestion,
    Thread,
};
use teloxide::types::ReplyMarkup;

use crate::client::{SentMessage, TelegramApi};
use crate::convert::{MAX_TEXT, message_id, split_message_id, split_text, split_thread_id};
use crate::render::{
    Pick, Progress, Token, force_reply, keyboard, no_keyboard, prompt_text, question_text,
    settled_text,
};

/// What a participant sees for a denied interaction.
pub const DENIED_TEXT: &str = "You can't answer this question.";
/// What a participant sees for an out-of-date interaction.
pub const STALE_TEXT: &str = "This question has changed or was already answered.";
/// The reason given when Done is pressed with nothing selected.
pub const NOTHING_SELECTED: &str = "Select at least one option first.";

/// FrogBot's channel-questions hooks for Telegram.
#[derive(Debug)]
pub struct TelegramQuestions<A> {
    api: A,
}

impl<A: TelegramApi> TelegramQuestions<A> {
    /// Hooks over `api` (teloxide's `Bot`, or any other [`TelegramApi`]).
    pub fn new(api: A) -> Self {
        Self { api }
    }

    /// The client.
    pub fn api(&self) -> &A {
        &self.api
    }

    async fn send(
        &self,
        thread: &Thread,
        text: &str,
        markup: Option<ReplyMarkup>,
    ) -> Result<SentMessage, BoxError> {
        let (chat, topic) = split_thread_id(&thread.id)?;
        let mut parts = split_text(text, MAX_TEXT);
        let last = parts.pop().unwrap_or_default();
        for p in parts {
            self.api.send_message(chat, topic, &p, None, None).await?;
        }
        Ok(self
            .api
            .send_message(chat, topic, &last, markup, None)
            .await?)
    }

    /// Tells the participant `text`: a callback notice for a button, a reply for a message.
    async fn notify(
        &self,
        thread: &Thread,
        interaction: &Interaction,
        text: &str,
    ) -> Result<(), BoxError> {
        match interaction {
            Interaction::Action { event } => {
                if let Some(id) = &event.trigger_id {
                    self.api.answer_callback_query(id, Some(text)).await?;
                }
            }
            Interaction::Message { message } => {
                let (chat, topic) = split_thread_id(&thread.id)?;
                let reply_to = split_message_id(&message.id).ok().map(|(_, id)| id);
                self.api
                    .send_message(chat, topic, text, None, reply_to)
                    .await?;
            }
            _ => {}
        }
        Ok(())
    }
}

fn posted(m: &SentMessage, question: usize) -> QuestionMessage {
    QuestionMessage {
        id: message_id(m.chat, m.id),
        posted_at: m.date.to_rfc3339_opts(SecondsFormat::Secs, true),
        question: Some(question),
    }
}

fn finish_or_partial(input: &QuestionInput, progress: Progress) -> ParseResult {
    match input.output_from_picks(&progress.picks) {
        Some(output) => ParseResult::Answer { output },
        None => ParseResult::Partial {
            state: Some(progress.to_state()),
        },
    }
}

fn parse_action(
    input: &QuestionInput,
    question: &QuestionRecord,
    message: &str,
    token: Token,
) -> ParseResult {
    if !question.messages.iter().any(|m| m.id == message) || token.revision != question.revision {
        return ParseResult::Stale;
    }
    let Some(item) = input.questions.get(token.question) else {
        return ParseResult::Ignore;
    };
    let mut progress = Progress::from_state(input, question.state.as_ref());
    match token.pick {
        Pick::Option(o) if o < item.options.len() => {
            if item.multiple {
                progress.toggle(token.question, o);
                ParseResult::Partial {
                    state: Some(progress.to_state()),
                }
            } else {
                progress.picks[token.question] = Some(vec![item.options[o].label.clone()]);
                finish_or_partial(input, progress)
            }
        }
        Pick::Done if item.multiple => {
            let selected: Vec<String> = progress.toggled[token.question]
                .iter()
                .filter_map(|&o| item.options.get(o).map(|x| x.label.clone()))
                .collect();
            if selected.is_empty() {
                return ParseResult::Rejected {
                    reason: NOTHING_SELECTED.into(),
                };
            }
            progress.picks[token.question] = Some(selected);
            finish_or_partial(input, progress)
        }
        _ => ParseResult::Ignore,
    }
}

#[async_trait]
impl<A: TelegramApi> ChannelQuestions for TelegramQuestions<A> {
    async fn render(&self, args: RenderArgs<'_>) -> Result<Vec<RenderedQuestion>, BoxError> {
        let mut out = Vec::new();
        for call in args.calls {
            let input = &call.input;
            let mut progress = Progress::from_state(input, None);
            let mut messages = Vec::new();
            for (q, item) in input.questions.iter().enumerate() {
                if !item.options.is_empty() {
                    let kb = keyboard(input, q, 0, &progress);
                    let m = self
                        .send(
                            args.thread,
                            &question_text(input, q),
                            Some(ReplyMarkup::InlineKeyboard(kb)),
                        )
                        .await?;
                    messages.push(posted(&m, q));
                }
                if item.custom {
                    let m = self
                        .send(
                            args.thread,
                            &prompt_text(input, q),
                            Some(ReplyMarkup::ForceReply(force_reply())),
                        )
                        .await?;
                    let m = posted(&m, q);
                    progress.prompts.push(m.id.clone());
                    messages.push(m);
                }
            }
            out.push(RenderedQuestion {
                calls: vec![call.tool_call_id.clone()],
                messages,
                state: Some(progress.to_state()),
            });
        }
        Ok(out)
    }

    fn parse(&self, args: ParseArgs<'_>) -> ParseResult {
        let input = &args.call.input;
        match args.interaction {
            Interaction::Action { event } => {
                match Token::from_action(&event.action_id, event.value.as_deref()) {
                    Some(token) => parse_action(input, args.question, &event.message_id, token),
                    None => ParseResult::Ignore,
                }
            }
            // After the answer, replies (even to the own-text prompt) are the conversation
            // going on: they reach the agent. Clicks are classified as before (a match is stale).
            Interaction::Message { .. } if args.settled => ParseResult::Ignore,
            Interaction::Message { message } => {
                let Some(target) = message
                    .reply_to
                    .as_deref()
                    .and_then(|r| args.question.messages.iter().find(|m| m.id == r))
                else {
                    return ParseResult::Ignore;
                };
                let Some(q) = target
                    .question
                    .filter(|&q| input.questions.get(q).is_some_and(|item| item.custom))
                else {
                    return ParseResult::Ignore;
                };
                let text = message.text.trim();
                if text.is_empty() {
                    return ParseResult::Rejected {
                        reason: "The answer is empty.".into(),
                    };
                }
                let mut progress = Progress::from_state(input, args.question.state.as_ref());
                progress.picks[q] = Some(vec![text.to_owned()]);
                finish_or_partial(input, progress)
            }
            _ => ParseResult::Ignore,
        }
    }

    async fn updated(
        &self,
        args: HookArgs<'_>,
        _interaction: Option<&Interaction>,
    ) -> Result<Option<QuestionChange>, BoxError> {
        let input = &args.call.input;
        let progress = Progress::from_state(input, args.question.state.as_ref());
        for m in &args.question.messages {
            let Some(q) = m.question.filter(|&q| q < input.questions.len()) else {
                continue;
            };
            if progress.prompts.contains(&m.id) || input.questions[q].options.is_empty() {
                continue;
            }
            let (chat, id) = split_message_id(&m.id)?;
            let kb = keyboard(input, q, args.question.revision, &progress);
            self.api
                .edit_message_reply_markup(chat, id, Some(kb))
                .await?;
        }
        Ok(None)
    }

    async fn settled(
        &self,
        args: HookArgs<'_>,
        _actor: Option<&Actor>,
        outcome: &QuestionOutcome,
    ) -> Result<Option<QuestionChange>, BoxError> {
        let input = &args.call.input;
        let progress = Progress::from_state(input, args.question.state.as_ref());
        let mut first_error = None;
        for m in &args.question.messages {
            let q = m
                .question
                .filter(|&q| q < input.questions.len())
                .unwrap_or(0);
            let text = settled_text(input, q, progress.prompts.contains(&m.id), outcome);
            let result = match split_message_id(&m.id) {
                Ok((chat, id)) => {
                    self.api
                        .edit_message_text(chat, id, &text, Some(no_keyboard()))
                        .await
                }
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                tracing::warn!(message = %m.id, error = %e, "could not settle a Telegram question message");
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(None),
        }
    }

    async fn rejected(
        &self,
        args: HookArgs<'_>,
        interaction: &Interaction,
        reason: &str,
    ) -> Result<(), BoxError> {
        self.notify(args.thread, interaction, reason).await
    }

    async fn denied(&self, args: HookArgs<'_>, interaction: &Interaction) -> Result<(), BoxError> {
        self.notify(args.thread, interaction, DENIED_TEXT).await
    }

    async fn stale(&self, args: HookArgs<'_>, interaction: &Interaction) -> Result<(), BoxError> {
        self.notify(args.thread, interaction, STALE_TEXT).await
    }
}
