//! [`TelegramQuestions`]: FrogBot's channel-questions hooks for Telegram, over a thin
//! [`TelegramApi`].
//!
//! Each question of a call gets its own message with an inline keyboard (`question` set in the
//! record); a question that allows an own answer also gets a ForceReply prompt, and a reply to it
//! is that question's answer. A message replying to a question's message answers it by option
//! number or label (or, where `custom`, with its own text); for a one-question set any message in
//! the thread does (a reply that names no option and is no own answer is left to the agent).
//! Every keyboard ends with "Skip", and such a reply `skip` or `/skip` skips too (also on a
//! `custom` question, and on a question with only an own answer, which has no keyboard): either
//! dismisses the whole call.
//! Progress (picks, checked options, prompt ids: [`Progress`]) lives in the record's state.

use async_trait::async_trait;
use chrono::SecondsFormat;
use frogbot_model::Notice;
use frogbot_model::text::truncate;
use frogbot_model::{
    Actor, BoxError, ChannelQuestions, HookArgs, Interaction, ParseArgs, ParseResult, Progress,
    QuestionChange, QuestionInput, QuestionMessage, QuestionOutcome, QuestionRecord, RenderArgs,
    RenderedQuestion, ReplyChoice, Thread, ThreadMessage,
};
use teloxide::types::ReplyMarkup;

use crate::client::{SentMessage, TelegramApi};
use crate::ids::{Pick, Token, message_id, split_message_id, split_thread_id};
use crate::render::{
    MAX_NOTICE, MAX_TEXT, force_reply, keyboard, no_keyboard, prompt_text, question_text,
    settled_text,
};

/// What a participant is told on a denied or an out-of-date interaction (the shared texts).
pub use frogbot_model::{DENIED_TEXT, STALE_TEXT};
/// The reason given when Done is pressed with nothing selected.
pub const NOTHING_SELECTED: &str = "Select at least one option first.";
/// The reason given for an empty reply to an own-answer prompt.
pub const EMPTY_ANSWER: &str = "The answer is empty.";

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
        // The render texts fit one message already; the cut is a guard.
        let text = truncate(text, MAX_TEXT);
        Ok(self
            .api
            .send_message(chat, topic, &text, markup, None)
            .await?)
    }
}

fn posted(m: &SentMessage, question: usize) -> QuestionMessage {
    QuestionMessage {
        id: message_id(m.chat, m.id),
        posted_at: m.date.to_rfc3339_opts(SecondsFormat::Secs, true),
        question: Some(question),
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
                progress.pick(token.question, vec![item.options[o].label.clone()]);
                progress.parse_result(input)
            }
        }
        // Skip dismisses the whole call (an old one is stale above).
        Pick::Skip => ParseResult::Dismiss,
        Pick::Done if item.multiple => {
            let selected: Vec<String> = progress
                .checked(token.question)
                .iter()
                .filter_map(|&o| item.options.get(o).map(|x| x.label.clone()))
                .collect();
            if selected.is_empty() {
                return ParseResult::Rejected {
                    reason: NOTHING_SELECTED.into(),
                };
            }
            progress.pick(token.question, selected);
            progress.parse_result(input)
        }
        _ => ParseResult::Ignore,
    }
}

/// A message as an answer: to the question whose message it replies to, or (no reply) to the only
/// question of a one-question set. By option number or label, or own text where `custom`; `skip`
/// or `/skip` dismisses the call.
fn parse_message(
    input: &QuestionInput,
    question: &QuestionRecord,
    message: &ThreadMessage,
) -> ParseResult {
    let (q, to_prompt) = match message.reply_to.as_deref() {
        Some(r) => {
            let Some(target) = question.messages.iter().find(|m| m.id == r) else {
                // A reply to something else is the conversation going on.
                return ParseResult::Ignore;
            };
            let Some(q) = target.question.filter(|&q| q < input.questions.len()) else {
                return ParseResult::Ignore;
            };
            let prompts = Progress::of(input, question).prompts;
            (q, prompts.contains(&target.id))
        }
        None if input.questions.len() == 1 => (0, false),
        None => return ParseResult::Ignore,
    };
    let item = &input.questions[q];
    let mut progress = Progress::of(input, question);
    if progress.picks[q].is_some() {
        return ParseResult::Ignore;
    }
    let text = message.text.trim();
    if item.skip_in_reply(text) {
        return ParseResult::Dismiss;
    }
    let selected = match item.choice_in_reply(text) {
        ReplyChoice::Options(labels) => labels,
        ReplyChoice::Invalid(reason) => return ParseResult::Rejected { reason },
        ReplyChoice::Text if item.custom && text.is_empty() => {
            if to_prompt {
                return ParseResult::Rejected {
                    reason: EMPTY_ANSWER.into(),
                };
            }
            return ParseResult::Ignore;
        }
        ReplyChoice::Text if item.custom => vec![text.to_owned()],
        _ => return ParseResult::Ignore,
    };
    progress.pick(q, selected);
    progress.parse_result(input)
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
            Interaction::Message { message } => parse_message(input, args.question, message),
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
        actor: Option<&Actor>,
        outcome: &QuestionOutcome,
    ) -> Result<Option<QuestionChange>, BoxError> {
        let input = &args.call.input;
        let progress = Progress::from_state(input, args.question.state.as_ref());
        let by = actor.and_then(|a| a.identity.as_ref()).map(|i| {
            i.user
                .name
                .clone()
                .filter(|n| !n.trim().is_empty())
                .unwrap_or_else(|| i.user.id.clone())
        });
        let mut first_error = None;
        for m in &args.question.messages {
            let q = m
                .question
                .filter(|&q| q < input.questions.len())
                .unwrap_or(0);
            let prompt = progress.prompts.contains(&m.id);
            let text = settled_text(input, q, prompt, outcome, by.as_deref());
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

    /// Tells the participant the notice (the body of `rejected`, `denied` and `stale`): a callback
    /// notice (cut to [`MAX_NOTICE`]) for a button, a reply in the thread for a message.
    async fn notify(
        &self,
        args: HookArgs<'_>,
        interaction: &Interaction,
        notice: Notice<'_>,
    ) -> Result<(), BoxError> {
        let text = notice.text();
        match interaction {
            Interaction::Action { event } => {
                if let Some(id) = &event.trigger_id {
                    let notice = truncate(text, MAX_NOTICE);
                    self.api.answer_callback_query(id, Some(&notice)).await?;
                }
            }
            Interaction::Message { message } => {
                let (chat, topic) = split_thread_id(&args.thread.id)?;
                let reply_to = split_message_id(&message.id).ok().map(|(_, id)| id);
                self.api
                    .send_message(chat, topic, &truncate(text, MAX_TEXT), None, reply_to)
                    .await?;
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use frogbot_model::{PlatformUser, QuestionCall, ThreadMessageMetadata};
    use serde_json::{Value, json};

    fn input() -> QuestionInput {
        let call: QuestionCall = serde_json::from_value(json!({"toolCallId": "c", "input": {
            "questions": [
                {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]},
                {"header": "Note", "question": "Anything else?", "custom": true}
            ]}}))
        .unwrap();
        call.input
    }

    /// The keyboard message of question 0 (`-5:100`) and the prompt of question 1 (`-5:101`).
    fn record(revision: u64) -> QuestionRecord {
        let message = |id: &str, q| QuestionMessage {
            id: id.into(),
            posted_at: String::new(),
            question: Some(q),
        };
        QuestionRecord {
            messages: vec![message("-5:100", 0), message("-5:101", 1)],
            revision,
            state: Some(json!({"picks": [null, null], "prompts": ["-5:101"]})),
        }
    }

    fn reply(text: &str, reply_to: Option<&str>) -> ThreadMessage {
        ThreadMessage {
            id: "-5:200".into(),
            text: text.into(),
            author: PlatformUser {
                id: "42".into(),
                name: Some("Ada".into()),
                is_bot: false,
            },
            metadata: ThreadMessageMetadata {
                date_sent: "2026-01-01T00:00:00Z".into(),
            },
            reply_to: reply_to.map(str::to_owned),
            raw: Value::Null,
        }
    }

    #[test]
    fn a_skip_button_dismisses_and_an_old_one_is_stale() {
        let skip = |revision| Token {
            revision,
            question: 0,
            pick: Pick::Skip,
        };
        assert_eq!(
            parse_action(&input(), &record(3), "-5:100", skip(3)),
            ParseResult::Dismiss
        );
        assert_eq!(
            parse_action(&input(), &record(3), "-5:100", skip(2)),
            ParseResult::Stale
        );
        assert_eq!(
            parse_action(&input(), &record(3), "-5:999", skip(3)),
            ParseResult::Stale
        );
    }

    #[test]
    fn a_typed_skip_dismisses_the_question_it_replies_to() {
        for text in ["skip", " Skip ", "/skip", "/SKIP"] {
            // To the keyboard message, and to the own-answer prompt (no keyboard there).
            for to in ["-5:100", "-5:101"] {
                assert_eq!(
                    parse_message(&input(), &record(0), &reply(text, Some(to))),
                    ParseResult::Dismiss,
                    "{text:?} to {to}"
                );
            }
        }
        // On the own-answer prompt, other text is the answer.
        assert!(matches!(
            parse_message(&input(), &record(0), &reply("skip it", Some("-5:101"))),
            ParseResult::Partial { .. }
        ));
        // Not addressed to a question of a set of two: left to the agent.
        assert_eq!(
            parse_message(&input(), &record(0), &reply("skip", None)),
            ParseResult::Ignore
        );
        assert_eq!(
            parse_message(&input(), &record(0), &reply("skip", Some("-5:7"))),
            ParseResult::Ignore
        );
    }
}
