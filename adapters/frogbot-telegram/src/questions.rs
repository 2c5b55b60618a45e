//! [`TelegramQuestions`]: FrogBot's channel-questions hooks for Telegram, over a thin
//! [`TelegramApi`].
//!
//! Each question of a call gets its own message (`question` set in the record), drawn by kind as
//! [`crate::render`] says: an inline keyboard for a choice, a confirm and a toggle; a ForceReply
//! prompt for a text or number input (and, before the keyboard of a choice that allows an own
//! answer, for that answer); a reply to a prompt is that question's answer. The questions of a set
//! that is no card come one at a time: `render` posts the first, and each step (`updated`) posts
//! the next one still unanswered, so the message whose buttons count is always the record's last
//! (FrogBot takes clicks only from a call's current message, its last: a set posted all at once
//! could be answered only there). A set of several inputs with a toggle
//! or an optional input ends with a "Send answers" message (`question` unset in the record), whose
//! button answers the set (a required input still unanswered is refused with the reason).
//! A message replying to a question's message answers it by option number or label (or, where
//! `custom`, with its own text; for the other kinds as [`QuestionItem::choice_in_reply`](frogbot_model::QuestionItem::choice_in_reply) reads
//! it: a too long text or a number out of range or step is refused with the reason as a reply,
//! and the prompt stays open); for a one-question set any message in the thread does (a reply
//! that names no option and is no own answer is left to the agent).
//! Every keyboard ends with "Skip", and such a reply `skip` or `/skip` skips too (also on a
//! `custom` question, and on a prompt, which has no keyboard): either dismisses the whole call.
//! Progress (picks, checked options, switched toggles, prompt ids: [`Progress`]) lives in the
//! record's state.

use async_trait::async_trait;
use chrono::SecondsFormat;
use frogbot_channel::questions::{labels_of, settle_each};
use frogbot_model::NoticeTo;
use frogbot_model::text::{capitalised, truncate};
use frogbot_model::{
    BoxError, Changed, ChannelQuestions, HookArgs, InputKind, Interaction, ParseArgs, ParseResult,
    Progress, QuestionChange, QuestionInput, QuestionMessage, QuestionRecord, RenderArgs,
    RenderedQuestion, ReplyChoice, Settlement, TOGGLE_OFF, TOGGLE_ON, Thread, ThreadMessage,
};
use teloxide::types::{ParseMode, ReplyMarkup};

use crate::client::{SendTo, SentMessage, TelegramApi};
use crate::ids::{Pick, Token, message_id, split_message_id, split_thread_id, thread_root};
use crate::render::{
    MAX_NOTICE, MAX_TEXT, approval_page_html, approval_pages, card_keyboard, card_lists,
    card_question_pages, card_text, expiry_line, force_reply, force_reply_for, has_keyboard,
    has_prompt, is_card, is_prompt_kind, keyboard, no_keyboard, prompt_markup, prompt_pages,
    question_pages, settled_card_text, settled_text, toggle_on,
};

/// What a participant is told on a denied or an out-of-date interaction (the shared texts).
pub use frogbot_model::{DENIED_TEXT, STALE_TEXT};
/// The reason given to a reply to a listed choice's prompt that names no option.
pub const LISTED_ONE: &str = "Reply with the number of your choice.";
/// [`LISTED_ONE`] for a choice of several options.
pub const LISTED_MANY: &str = "Reply with the numbers of your choices, separated by commas.";
/// The reason given when Done is pressed with nothing selected.
pub const NOTHING_SELECTED: &str = "Select at least one option first.";
/// The reason given for an empty reply to an own-answer prompt.
pub const EMPTY_ANSWER: &str = "The answer is empty.";

/// The reason given when "Send answers" is pressed while the required input `header` has no
/// answer.
pub fn answer_first(header: &str) -> String {
    format!("Answer \u{201c}{header}\u{201d} first.")
}

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

    /// Posts a question message: `html` as [`crate::render`] draws it (its shown text fits a
    /// message already), with its keyboard or ForceReply; in an agent conversation
    /// (`{chat}~{root}`), as a reply to its root, so the person sees where it belongs and a click
    /// on it is routed there.
    ///
    /// `silent`: with `disable_notification` — the person is notified once per question (its
    /// prompts, long text and card are one question; see `render`).
    async fn send(
        &self,
        thread: &Thread,
        html: &str,
        markup: Option<ReplyMarkup>,
        silent: bool,
    ) -> Result<SentMessage, BoxError> {
        let (chat, topic) = split_thread_id(&thread.id)?;
        let root = thread_root(&thread.id);
        let to = SendTo::new(chat, topic).replying(root).silent(silent);
        Ok(self
            .api
            .send_message(to, html, Some(ParseMode::Html), markup)
            .await?)
    }

    /// Sends `pages` (a question's messages) in `thread`, the last with `markup`. Each is
    /// silent once a message of the question notified (`notified`), and when `quiet` (a prompt
    /// beside a keyboard, whose message notifies); one that is not quiet is the notification.
    async fn send_pages(
        &self,
        thread: &Thread,
        mut pages: Vec<String>,
        markup: ReplyMarkup,
        notified: &mut bool,
        quiet: bool,
    ) -> Result<SentMessage, BoxError> {
        let last = pages.pop().unwrap_or_default();
        for page in pages {
            self.send(thread, &page, None, *notified || quiet).await?;
            *notified |= !quiet;
        }
        let m = self
            .send(thread, &last, Some(markup), *notified || quiet)
            .await?;
        *notified |= !quiet;
        Ok(m)
    }

    /// Posts question `q` of a set that is no card: a ForceReply prompt for a text or number
    /// input; an inline keyboard for a choice, a confirm and a toggle, after the own-answer prompt
    /// of a choice that allows one. The keyboard's message comes last, as FrogBot counts the
    /// controls of a call's last message only (its current one). The prompt ids join `progress`.
    /// `(q, revision)`: the question and the record revision its keyboard is drawn for;
    /// `notified`: whether a message of the call notified already (see `render`), set once one
    /// does.
    async fn post_question(
        &self,
        thread: &Thread,
        input: &QuestionInput,
        (q, revision): (usize, u64),
        expiry: Option<&str>,
        progress: &mut Progress,
        notified: &mut bool,
    ) -> Result<Vec<QuestionMessage>, BoxError> {
        let Some(item) = input.questions.get(q) else {
            return Ok(Vec::new());
        };
        let mut messages = Vec::new();
        let prompt = if is_prompt_kind(item) {
            Some(force_reply_for(item))
        } else {
            item.custom.then(force_reply)
        };
        if let Some(markup) = prompt {
            // The own-answer prompt of a choice leaves the expiry to the keyboard's message.
            let expiry = expiry.filter(|_| !has_keyboard(item));
            // An own-answer prompt beside a keyboard is silent: the keyboard's message, which
            // shows the question, notifies.
            let beside = has_keyboard(item);
            // A question too long for one message: its beginning first, the prompt last.
            let pages = prompt_pages(input, q, expiry);
            let markup = ReplyMarkup::ForceReply(markup);
            let m = self
                .send_pages(thread, pages, markup, notified, beside)
                .await?;
            let m = posted(&m, q);
            progress.prompts.push(m.id.clone());
            messages.push(m);
        }
        if has_keyboard(item) {
            let kb = ReplyMarkup::InlineKeyboard(keyboard(input, q, revision, progress));
            // A question too long for one message (a long list of options): its beginning
            // first, the keyboard's message last.
            let pages = question_pages(input, q, expiry);
            let m = self.send_pages(thread, pages, kb, notified, false).await?;
            messages.push(posted(&m, q));
        }
        Ok(messages)
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
    let q = token.question;
    match (item.kind, token.pick) {
        // Skip dismisses the whole call (an old one is stale above).
        (_, Pick::Skip) => ParseResult::Dismiss,
        (_, Pick::Send) if is_card(input) => send_answers(input, &progress),
        (InputKind::Choice, Pick::Option(o)) if o < item.options.len() => {
            if item.multiple {
                progress.toggle(q, o);
                ParseResult::Partial {
                    state: Some(progress.to_state()),
                }
            } else {
                progress.pick(q, vec![item.options[o].label.clone()]);
                step(input, &progress)
            }
        }
        (InputKind::Choice, Pick::Done) if item.multiple => {
            let selected = checked_labels(input, q, &progress);
            if selected.is_empty() {
                return ParseResult::Rejected {
                    reason: NOTHING_SELECTED.into(),
                };
            }
            progress.pick(q, selected);
            step(input, &progress)
        }
        (InputKind::Confirm, Pick::Confirm) => {
            progress.pick(q, vec![item.confirm_label().to_owned()]);
            step(input, &progress)
        }
        (InputKind::Toggle, Pick::Set(on)) => {
            progress.pick(q, vec![if on { TOGGLE_ON } else { TOGGLE_OFF }.to_owned()]);
            step(input, &progress)
        }
        (InputKind::Toggle, Pick::Flip) => {
            if progress.picks[q].is_some() {
                // Answered by a typed reply: the switch changes that answer.
                let flipped = if toggle_on(input, q, &progress) {
                    TOGGLE_OFF
                } else {
                    TOGGLE_ON
                };
                progress.pick(q, vec![flipped.to_owned()]);
            } else {
                progress.toggle(q, 0);
            }
            step(input, &progress)
        }
        _ => ParseResult::Ignore,
    }
}

/// What `parse` returns after a step: on a card the progress (the set is answered with Send
/// answers), else the answer once every question has one.
fn step(input: &QuestionInput, progress: &Progress) -> ParseResult {
    if is_card(input) {
        ParseResult::Partial {
            state: Some(progress.to_state()),
        }
    } else {
        progress.parse_result(input)
    }
}

fn checked_labels(input: &QuestionInput, q: usize, progress: &Progress) -> Vec<String> {
    labels_of(&input.questions[q], progress.checked(q))
}

/// "Send answers": the set's answer from what it holds: each input's answer; a toggle as it
/// shows; a `multiple` choice's checked options (Done not pressed); an optional input without
/// one as none. A required input without an answer refuses the send with the reason, and so does
/// an answer [`QuestionInput::check_output`] refuses.
fn send_answers(input: &QuestionInput, progress: &Progress) -> ParseResult {
    let mut picks = progress.picks.clone();
    for (q, item) in input.questions.iter().enumerate() {
        if picks[q].is_some() {
            continue;
        }
        let checked = checked_labels(input, q, progress);
        picks[q] = Some(match item.kind {
            InputKind::Toggle => {
                let on = toggle_on(input, q, progress);
                vec![if on { TOGGLE_ON } else { TOGGLE_OFF }.to_owned()]
            }
            InputKind::Choice if item.multiple && !checked.is_empty() => checked,
            _ if !item.required => Vec::new(),
            _ => {
                return ParseResult::Rejected {
                    reason: answer_first(&item.header),
                };
            }
        });
    }
    let Some(output) = input.output_from_picks(&picks) else {
        return ParseResult::Ignore;
    };
    match input.check_output(&output) {
        Ok(()) => ParseResult::Answer { output },
        Err(reason) => ParseResult::Rejected { reason },
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
        ReplyChoice::Invalid(reason) => {
            return ParseResult::Rejected {
                reason: capitalised(&reason),
            };
        }
        ReplyChoice::Text if item.custom && text.is_empty() => {
            if to_prompt {
                return ParseResult::Rejected {
                    reason: EMPTY_ANSWER.into(),
                };
            }
            return ParseResult::Ignore;
        }
        ReplyChoice::Text if item.custom => vec![text.to_owned()],
        // A reply to a listed choice's prompt that names no option: how to answer, and the
        // prompt stays open.
        ReplyChoice::Text if to_prompt && card_lists(input, q) => {
            return ParseResult::Rejected {
                reason: if item.multiple {
                    LISTED_MANY.into()
                } else {
                    LISTED_ONE.into()
                },
            };
        }
        // A reply to a text or number prompt that is no answer: the reason, and the prompt stays
        // open for another reply.
        ReplyChoice::Text if to_prompt && is_prompt_kind(item) => {
            let reason = if text.is_empty() || item.kind == InputKind::TextInput {
                EMPTY_ANSWER.to_owned()
            } else {
                item.reply_hint().unwrap_or_else(|| EMPTY_ANSWER.to_owned())
            };
            return ParseResult::Rejected { reason };
        }
        _ => return ParseResult::Ignore,
    };
    progress.pick(q, selected);
    step(input, &progress)
}

#[async_trait]
impl<A: TelegramApi> ChannelQuestions for TelegramQuestions<A> {
    async fn render(&self, args: RenderArgs<'_>) -> Result<Vec<RenderedQuestion>, BoxError> {
        let now = chrono::Utc::now();
        let mut out = Vec::new();
        for call in args.calls {
            let input = &call.input;
            let expiry = expiry_line(call.expires_at.as_deref(), now);
            let expiry = expiry.as_deref();
            let mut progress = Progress::from_state(input, None);
            // Whether a message of this call notified: one does, the one that shows the
            // question first (an approval's first page of arguments, a long question's first
            // page, the keyboard's message, a set's card; a lone text or number input's prompt);
            // the others are silent.
            let mut notified = false;
            // An approval too long for one message: its complete arguments first, in order.
            if let [item] = input.questions.as_slice()
                && let Some(pages) = approval_pages(item)
            {
                for page in &pages.before {
                    self.send(args.thread, &approval_page_html(page), None, notified)
                        .await?;
                    notified = true;
                }
            }
            let card = is_card(input);
            let mut messages = if card {
                // A card: the prompts of its text and number inputs and own answers, then the
                // card (it shows the expiry once).
                let mut messages = Vec::new();
                // Questions too long for the card: written out in full first (the first page
                // notifies).
                for page in card_question_pages(input) {
                    self.send(args.thread, &page, None, notified).await?;
                    notified = true;
                }
                for q in (0..input.questions.len()).filter(|&q| has_prompt(input, q)) {
                    let markup = prompt_markup(input, q);
                    let mut pages = prompt_pages(input, q, None);
                    let last = pages.pop().unwrap_or_default();
                    // The card, which lists every input, notifies; the prompts are silent.
                    for page in pages {
                        self.send(args.thread, &page, None, true).await?;
                    }
                    {
                        let m = self
                            .send(
                                args.thread,
                                &last,
                                Some(ReplyMarkup::ForceReply(markup)),
                                true,
                            )
                            .await?;
                        let m = posted(&m, q);
                        progress.prompts.push(m.id.clone());
                        messages.push(m);
                    }
                }
                messages
            } else {
                // One question at a time: the first now, each next one by `updated`.
                let q = progress.step().unwrap_or(0);
                self.post_question(
                    args.thread,
                    input,
                    (q, 0),
                    expiry,
                    &mut progress,
                    &mut notified,
                )
                .await?
            };
            if card {
                // Last: FrogBot counts the controls of a call's last message.
                let m = self
                    .send(
                        args.thread,
                        &card_text(input, &progress, expiry),
                        Some(ReplyMarkup::InlineKeyboard(card_keyboard(
                            input, 0, &progress,
                        ))),
                        notified,
                    )
                    .await?;
                messages.push(QuestionMessage {
                    question: None,
                    ..posted(&m, 0)
                });
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

    async fn updated(&self, args: HookArgs<'_>, _interaction: Option<&Interaction>) -> Changed {
        let input = &args.call.input;
        let progress = Progress::from_state(input, args.question.state.as_ref());
        let revision = args.question.revision;
        let card = is_card(input);
        for m in &args.question.messages {
            if progress.prompts.contains(&m.id) {
                continue;
            }
            let (chat, id) = split_message_id(&m.id)?;
            match m.question.filter(|&q| q < input.questions.len()) {
                Some(q) if has_keyboard(&input.questions[q]) && !card => {
                    let kb = keyboard(input, q, revision, &progress);
                    self.api
                        .edit_message_reply_markup(chat, id, Some(kb))
                        .await?;
                }
                None if card => {
                    // The card shows the answers so far: text and keyboard.
                    let expiry = expiry_line(args.call.expires_at.as_deref(), chrono::Utc::now());
                    let text = card_text(input, &progress, expiry.as_deref());
                    let kb = card_keyboard(input, revision, &progress);
                    self.api.edit_html(chat, id, &text, Some(kb)).await?;
                }
                _ => {}
            }
        }
        // One question at a time: once a step is answered, the next one still unanswered is
        // posted and becomes the current message.
        let Some(step) = progress.step().filter(|_| !card) else {
            return Ok(None);
        };
        if args
            .question
            .messages
            .iter()
            .any(|m| m.question == Some(step))
        {
            return Ok(None);
        }
        let expiry = expiry_line(args.call.expires_at.as_deref(), chrono::Utc::now());
        let mut progress = progress;
        let next = self
            .post_question(
                args.thread,
                input,
                (step, revision),
                expiry.as_deref(),
                &mut progress,
                // The next question of the set notifies: it is new to the person.
                &mut false,
            )
            .await?;
        let mut messages = args.question.messages.clone();
        messages.extend(next);
        Ok(Some(QuestionChange {
            messages: Some(messages),
            state: Some(progress.to_state()),
        }))
    }

    async fn settled(&self, args: HookArgs<'_>, how: Settlement<'_>) -> Changed {
        let input = &args.call.input;
        let progress = Progress::from_state(input, args.question.state.as_ref());
        let by = how.actor.and_then(|a| a.identity.as_ref()).map(|i| {
            i.user
                .name
                .clone()
                .filter(|n| !n.trim().is_empty())
                .unwrap_or_else(|| i.user.id.clone())
        });
        let (progress, by) = (&progress, by.as_deref());
        settle_each(crate::PLATFORM, &args.question.messages, |m| async move {
            let prompt = progress.prompts.contains(&m.id);
            let text = match m.question.filter(|&q| q < input.questions.len()) {
                Some(q) => settled_text(input, q, prompt, how.outcome, by),
                None if is_card(input) => settled_card_text(input, how.outcome, by),
                None => settled_text(input, 0, prompt, how.outcome, by),
            };
            let (chat, id) = split_message_id(&m.id)?;
            self.api
                .edit_html(chat, id, &text, Some(no_keyboard()))
                .await
        })
        .await?;
        Ok(None)
    }

    /// Tells the participant the notice (the body of `rejected`, `denied` and `stale`): a callback
    /// notice (cut to [`MAX_NOTICE`]) for a button, a reply in the thread for a message.
    async fn notify(&self, args: HookArgs<'_>, to: NoticeTo<'_>) -> Result<(), BoxError> {
        let text = to.text();
        match to.interaction {
            Interaction::Action { event } => {
                if let Some(id) = &event.trigger_id {
                    let notice = truncate(text, MAX_NOTICE);
                    self.api.answer_callback_query(id, Some(&notice)).await?;
                }
            }
            Interaction::Message { message } => {
                let (chat, topic) = split_thread_id(&args.thread.id)?;
                let reply_to = split_message_id(&message.id).ok().map(|(_, id)| id);
                let to = SendTo::new(chat, topic).replying(reply_to);
                self.api
                    .send_message(to, &truncate(text, MAX_TEXT), None, None)
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
            files: Vec::new(),
            mentions: Vec::new(),
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
