//! [`SlackQuestions`]: FrogBot's channel-questions hooks for Slack, over a thin [`SlackApi`]:
//! `render` posts Block Kit ([`crate::render`]), `parse` reads clicks, modal submissions and thread
//! replies (ids from [`crate::ids`]), `updated`/`settled` redraw with `chat.update`, and the
//! `rejected`/`denied`/`stale` notices go to the person as ephemeral messages. The multi-step
//! progress is [`frogbot_model::Progress`] in the record's state.
//!
//! Input kinds: a confirm button's tap answers (or, in a set, is one step of) its input; text,
//! number and toggle inputs are answered in the modal, whose `view_submission` is read into one
//! answer for the whole set ([`output_from_modal`]). A submission that does not validate (Slack's
//! client already refuses required inputs left empty, numbers out of `min`/`max` or with
//! decimals where none are allowed, and text over `max_length`; a `step` is FrogBot's to check)
//! is refused within the acknowledgement: the receiving layer reads the submission against the
//! open question first ([`modal_field_error`]) and answers Slack with `{"response_action":
//! "errors", "errors": {"<block_id>": "<reason>"}}`, so the modal stays open with what was typed
//! and the field at fault says why; nothing is recorded. (Should one still reach `parse`, it is
//! `rejected`: the reason reaches the person as an ephemeral message in the thread, the question
//! staying open.)
//!
//! Typed thread replies answer too, in sets of any size: a reply answers the first question still
//! unanswered, or the question it names by number (`2: blue`); `skip` or `/skip` dismisses the
//! call (see `parse_reply`).

use async_trait::async_trait;
use frogbot_channel::questions::settle_each;
use frogbot_model::BoxError;
use frogbot_model::NoticeTo;
use frogbot_model::{
    Changed, ChannelQuestions, HookArgs, InputKind, Interaction, ParseArgs, ParseResult, Progress,
    QuestionAnswer, QuestionCall, QuestionInput, QuestionItem, QuestionMessage,
    QuestionModalMetadata, QuestionOutput, QuestionRecord, RenderArgs, RenderedQuestion,
    ReplyChoice, Settlement, TOGGLE_OFF, TOGGLE_ON, Thread, iso_to_millis,
};
use serde_json::{Map, Value};

use crate::Error;
use crate::client::SlackApi;
use crate::convert::{state_selections, ts_to_rfc3339};
use crate::ids::{ActionKind, ActionRef, MODAL_CALLBACK_ID, message_id, modal_input_id, split_id};
use crate::render::{
    approval_page_blocks, approval_pages, fallback_text, modal_view, question_card, settled_blocks,
};

/// What a participant is told on a denied or an out-of-date interaction (the shared texts).
pub use frogbot_model::{DENIED_TEXT, STALE_TEXT};

/// Whether an action id is the "Other…" / "Answer…" button, whose modal the receiving layer opens
/// with [`SlackQuestions::open_other`] (`parse` stays free of side effects and ignores it).
pub fn is_open_form_action(action_id: &str) -> bool {
    ActionRef::decode(action_id).is_some_and(|a| a.kind == ActionKind::Other)
}

/// FrogBot's channel-questions hooks for Slack: one Block Kit message per question call.
#[derive(Debug)]
pub struct SlackQuestions<A> {
    api: A,
}

impl<A: SlackApi> SlackQuestions<A> {
    /// Hooks over `api`.
    pub fn new(api: A) -> Self {
        Self { api }
    }

    /// The client.
    pub fn api(&self) -> &A {
        &self.api
    }

    /// Opens the modal for the whole question set (`views.open` with `trigger_id`); its
    /// `private_metadata` is the form locator of the record's current message.
    pub async fn open_other(
        &self,
        thread: &Thread,
        call: &QuestionCall,
        question: &QuestionRecord,
        trigger_id: &str,
    ) -> Result<(), Error> {
        let current = question
            .current()
            .ok_or_else(|| Error::BadId("a question record without messages".into()))?;
        let view = modal_view(
            &call.input,
            &QuestionModalMetadata {
                thread_id: thread.id.clone(),
                message_id: current.id.clone(),
            },
        )?;
        self.api.open_view(trigger_id, view).await
    }
}

/// Why a control's option is refused.
const NOT_AVAILABLE: &str = "That option is not available.";
/// Why an empty Submit is refused.
const SELECT_FIRST: &str = "Select at least one option, then press Submit.";

fn indices(value: Option<&str>) -> Option<Vec<usize>> {
    match value {
        None | Some("") => Some(Vec::new()),
        Some(v) => v.split(',').map(|s| s.trim().parse().ok()).collect(),
    }
}

/// The options of question `q` the payload's `state.values` shows checked (Slack sends the
/// message's input state with every click), when it has that question's checkbox group.
fn checked_in_state(raw: &Value, q: usize) -> Option<Vec<usize>> {
    state_selections(raw).into_iter().find_map(|(id, values)| {
        let a = ActionRef::decode(&id)?;
        (a.kind == ActionKind::Toggle && a.question == q).then(|| {
            values
                .iter()
                .map(|v| v.parse().ok())
                .collect::<Option<Vec<usize>>>()
        })?
    })
}

fn parse_action(
    input: &QuestionInput,
    question: &QuestionRecord,
    action_id: &str,
    value: Option<&str>,
    raw: &Value,
) -> ParseResult {
    let Some(a) = ActionRef::decode(action_id) else {
        return ParseResult::Ignore;
    };
    if a.kind == ActionKind::Other {
        return ParseResult::Ignore;
    }
    let Some(q) = input.questions.get(a.question) else {
        return ParseResult::Ignore;
    };
    if a.revision != question.revision {
        return ParseResult::Stale;
    }
    let mut progress = Progress::of(input, question);
    let label = |i: usize| q.options.get(i).map(|o| o.label.clone());
    // An option or a control the question does not have.
    let unavailable = || ParseResult::Rejected {
        reason: NOT_AVAILABLE.into(),
    };
    match a.kind {
        ActionKind::Choose | ActionKind::Select => {
            let option = a.option.or_else(|| value.and_then(|v| v.parse().ok()));
            let Some(l) = option.and_then(label) else {
                return unavailable();
            };
            progress.pick(a.question, vec![l]);
            progress.parse_result(input)
        }
        ActionKind::Toggle => {
            let Some(checked) = indices(value).filter(|c| c.iter().all(|i| *i < q.options.len()))
            else {
                return unavailable();
            };
            progress.checked[a.question] = checked;
            ParseResult::Partial {
                state: Some(progress.to_state()),
            }
        }
        ActionKind::Submit => {
            // What the person sees checked when pressing Submit; else what earlier toggles saved.
            let checked = checked_in_state(raw, a.question)
                .unwrap_or_else(|| progress.checked(a.question).to_vec());
            if checked.is_empty() {
                return ParseResult::Rejected {
                    reason: SELECT_FIRST.into(),
                };
            }
            let Some(labels) = checked
                .iter()
                .copied()
                .map(label)
                .collect::<Option<Vec<_>>>()
            else {
                return unavailable();
            };
            progress.checked[a.question] = checked;
            progress.pick(a.question, labels);
            progress.parse_result(input)
        }
        ActionKind::Confirm => {
            if q.kind != InputKind::Confirm {
                return unavailable();
            }
            progress.pick(a.question, vec![q.confirm_label().to_owned()]);
            progress.parse_result(input)
        }
        // Skip dismisses the whole call (an old Skip is stale above: the message is edited in
        // place, so only the revision tells an old one apart).
        ActionKind::Skip => ParseResult::Dismiss,
        ActionKind::Other => ParseResult::Ignore,
    }
}

/// A thread reply answers a question of the set: an option's label (any case) or number, several
/// separated by `,` when `multiple`; any other text when `custom`; for the other kinds the text,
/// the number, yes/no or the confirm's label (`QuestionItem::choice_in_reply`). In a set of
/// several questions a reply answers the first question still unanswered, or — starting with its
/// number and a colon, `2: blue` — question 2; each answer is kept (the card shows it) until the
/// last completes the set. `skip` or `/skip` skips (dismisses the whole call, as the Skip button;
/// on a `custom` question too). Anything else is left to the agent. A reply sent before the
/// current message was posted is `stale`; once the question is settled every reply is left to
/// the agent.
fn parse_reply(
    input: &QuestionInput,
    question: &QuestionRecord,
    message: &frogbot_model::ThreadMessage,
) -> ParseResult {
    let text = message.text.trim();
    if text.is_empty() {
        return ParseResult::Ignore;
    }
    let sent = iso_to_millis(&message.metadata.date_sent);
    let posted = question.current().and_then(|m| iso_to_millis(&m.posted_at));
    if let (Some(sent), Some(posted)) = (sent, posted)
        && sent < posted
    {
        return ParseResult::Stale;
    }
    let mut progress = Progress::of(input, question);
    let (index, text) = match addressed(input, text) {
        Some((i, rest)) => (i, rest),
        None => match progress.step() {
            Some(i) => (i, text),
            None => return ParseResult::Ignore,
        },
    };
    let Some(q) = input.questions.get(index) else {
        return ParseResult::Ignore;
    };
    if q.skip_in_reply(text) {
        return ParseResult::Dismiss;
    }
    let selected = match q.choice_in_reply(text) {
        ReplyChoice::Options(labels) => labels,
        ReplyChoice::Invalid(reason) if input.questions.len() > 1 => {
            return ParseResult::Rejected {
                reason: format!("{}: {reason}", q.header),
            };
        }
        ReplyChoice::Invalid(reason) => return ParseResult::Rejected { reason },
        ReplyChoice::Text if q.custom && !text.is_empty() => vec![text.to_string()],
        _ => return ParseResult::Ignore,
    };
    if let Err(reason) = check_alone(q, &selected) {
        return ParseResult::Rejected { reason };
    }
    progress.pick(index, selected);
    match progress.output(input) {
        Some(output) => match input.check_output(&output) {
            Ok(()) => ParseResult::Answer { output },
            Err(reason) => ParseResult::Rejected { reason },
        },
        None => ParseResult::Partial {
            state: Some(progress.to_state()),
        },
    }
}

/// `selected` checked as the answer to `q` alone (its error is about that question).
fn check_alone(q: &QuestionItem, selected: &[String]) -> Result<(), String> {
    let answer = QuestionAnswer {
        header: q.header.clone(),
        selected: selected.to_vec(),
    };
    let one = QuestionInput {
        questions: vec![q.clone()],
        ..QuestionInput::default()
    };
    one.check_output(&QuestionOutput {
        answers: vec![answer],
    })
}

/// The question a reply to a set of several names by its number (`2: blue`, counting from 1, a
/// space after the colon), and the rest of the reply.
fn addressed<'a>(input: &QuestionInput, text: &'a str) -> Option<(usize, &'a str)> {
    if input.questions.len() < 2 {
        return None;
    }
    let (n, rest) = text.split_once(':')?;
    let n: usize = n.trim().parse().ok()?;
    if !(rest.is_empty() || rest.starts_with(char::is_whitespace)) {
        return None;
    }
    (1..=input.questions.len())
        .contains(&n)
        .then(|| (n - 1, rest.trim()))
}

fn value_strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) if !s.trim().is_empty() => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// Reads a modal submission (the values by `action_id`, as
/// [`crate::convert::modal_submit_from_view_submission`] flattens `view.state.values`) into one
/// answer for the whole set, validated against the input: a choice's option values (and own
/// text), a `plain_text_input`'s text, a `number_input`'s number (read with `read_number`, so
/// `step` is checked), a toggle's one checkbox (checked: "on", else "off"), a confirm's one
/// checkbox (checked: its label). `Err` is the reason, naming the question; `parse` gives it
/// back as `rejected` (the person is told it privately, see [`SlackQuestions::notify`]). The
/// receiving layer checks a submission first with [`modal_field_error`], so one that does not
/// validate normally never gets here: the modal stays open with the field's error.
pub fn output_from_modal(
    input: &QuestionInput,
    values: &Map<String, Value>,
) -> Result<QuestionOutput, String> {
    read_modal(input, values).map_err(|(_, reason)| reason)
}

/// Why a modal submission does not answer the set, as Slack shows it under the field at fault:
/// the `block_id` of the question's input block (`q{i}`, or `q{i}t` for a choice drawn as its
/// own-text input alone) and the reason. `None` when the submission answers the set. The
/// receiving layer sends it as the acknowledgement's body, `{"response_action": "errors",
/// "errors": {block_id: reason}}`, so the modal stays open with what was typed.
pub fn modal_field_error(
    input: &QuestionInput,
    values: &Map<String, Value>,
) -> Option<(String, String)> {
    let (i, reason) = read_modal(input, values).err()?;
    let q = input.questions.get(i)?;
    let block = if q.kind == InputKind::Choice && q.options.is_empty() {
        format!("q{i}t")
    } else {
        format!("q{i}")
    };
    // The field names its question already: the reason alone, as a sentence.
    let prefix = format!("{:?}: ", q.header);
    let reason = reason.strip_prefix(&prefix).unwrap_or(&reason).trim();
    let mut chars = reason.trim_end_matches('.').chars();
    let reason = chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect::<String>() + ".")
        .unwrap_or_else(|| "Check this answer.".into());
    Some((block, reason))
}

/// A choice's picks with the answer typed beside them, where the question takes one (`custom`):
/// added to the picks of a multiple choice, in place of the pick of a single one.
fn with_typed(mut selected: Vec<String>, q: &QuestionItem, typed: Option<&str>) -> Vec<String> {
    if q.custom
        && let Some(text) = typed
    {
        if q.multiple {
            selected.push(text.to_owned());
        } else {
            selected = vec![text.to_owned()];
        }
    }
    selected
}

/// [`output_from_modal`], the error naming the index of the question at fault.
fn read_modal(
    input: &QuestionInput,
    values: &Map<String, Value>,
) -> Result<QuestionOutput, (usize, String)> {
    let mut answers = Vec::new();
    for (i, q) in input.questions.iter().enumerate() {
        let picked = value_strings(values.get(&modal_input_id(i, false)));
        let typed = value_strings(values.get(&modal_input_id(i, true)));
        let typed = typed.first().map(|t| t.trim()).filter(|t| !t.is_empty());
        let selected = match q.kind {
            InputKind::TextInput => typed.map(|t| vec![t.to_owned()]).unwrap_or_default(),
            InputKind::NumberInput => match typed {
                Some(t) => vec![
                    q.read_number(t)
                        .map_err(|reason| (i, format!("{:?}: {reason}.", q.header)))?,
                ],
                None => Vec::new(),
            },
            InputKind::Toggle => {
                vec![
                    if picked.is_empty() {
                        TOGGLE_OFF
                    } else {
                        TOGGLE_ON
                    }
                    .to_owned(),
                ]
            }
            InputKind::Confirm if picked.is_empty() => Vec::new(),
            InputKind::Confirm => vec![q.confirm_label().to_owned()],
            _ if q.options.len() > crate::render::MAX_SELECT_OPTIONS => {
                // Past a select's 100 options the modal lists them numbered and the person
                // types the number(s) (see `render::listed_modal_blocks`).
                let mut selected = Vec::new();
                for part in picked
                    .iter()
                    .flat_map(|t| t.split([',', ' ']))
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                {
                    let label = part
                        .trim_end_matches('.')
                        .parse::<usize>()
                        .ok()
                        .and_then(|n| n.checked_sub(1))
                        .and_then(|o| q.options.get(o))
                        .map(|o| o.label.clone())
                        .ok_or_else(|| {
                            (
                                i,
                                format!(
                                    "{:?}: {part:?} is no number from the list (1 to {})",
                                    q.header,
                                    q.options.len()
                                ),
                            )
                        })?;
                    if !selected.contains(&label) {
                        selected.push(label);
                    }
                }
                with_typed(selected, q, typed)
            }
            _ => {
                let mut selected = Vec::new();
                for v in picked {
                    let label = v
                        .parse::<usize>()
                        .ok()
                        .and_then(|o| q.options.get(o))
                        .map(|o| o.label.clone())
                        .ok_or_else(|| {
                            (i, format!("{:?}: that option is not available", q.header))
                        })?;
                    selected.push(label);
                }
                with_typed(selected, q, typed)
            }
        };
        // Each answer checked against its own question, so the error names its field.
        check_alone(q, &selected).map_err(|reason| (i, reason))?;
        answers.push(QuestionAnswer {
            header: q.header.clone(),
            selected,
        });
    }
    let output = QuestionOutput { answers };
    input.check_output(&output).map_err(|reason| (0, reason))?;
    Ok(output)
}

#[async_trait]
impl<A: SlackApi> ChannelQuestions for SlackQuestions<A> {
    async fn render(&self, args: RenderArgs<'_>) -> Result<Vec<RenderedQuestion>, BoxError> {
        let (channel, thread_ts) = split_id(&args.thread.id)?;
        let mut out = Vec::new();
        for call in args.calls {
            // An approval too long for the card: its complete arguments first, in order.
            if let [item] = call.input.questions.as_slice()
                && let Some(pages) = approval_pages(item)
            {
                for page in &pages.before {
                    self.api
                        .post_message(channel, Some(thread_ts), approval_page_blocks(page), page)
                        .await?;
                }
            }
            let blocks = question_card(
                &call.input,
                0,
                &Progress::from_state(&call.input, None),
                call.expires_at.as_deref(),
                chrono::Utc::now(),
            );
            let ts = self
                .api
                .post_message(
                    channel,
                    Some(thread_ts),
                    blocks,
                    &fallback_text(&call.input),
                )
                .await?;
            out.push(RenderedQuestion {
                calls: vec![call.tool_call_id.clone()],
                messages: vec![QuestionMessage {
                    id: message_id(channel, &ts),
                    posted_at: ts_to_rfc3339(&ts).unwrap_or_default(),
                    question: None,
                }],
                state: None,
            });
        }
        Ok(out)
    }

    fn parse(&self, args: ParseArgs<'_>) -> ParseResult {
        let input = &args.call.input;
        match args.interaction {
            Interaction::Action { event } => parse_action(
                input,
                args.question,
                &event.action_id,
                event.value.as_deref(),
                &event.raw,
            ),
            Interaction::ModalSubmit { event } => {
                let ours = event
                    .raw
                    .pointer("/view/callback_id")
                    .and_then(Value::as_str)
                    .is_none_or(|c| c == MODAL_CALLBACK_ID);
                if !ours {
                    return ParseResult::Ignore;
                }
                match output_from_modal(input, &event.values) {
                    Ok(output) => ParseResult::Answer { output },
                    Err(reason) => ParseResult::Rejected { reason },
                }
            }
            // Free text after the answer is the conversation going on, not a late answer.
            Interaction::Message { .. } if args.settled => ParseResult::Ignore,
            Interaction::Message { message } => parse_reply(input, args.question, message),
        }
    }

    async fn updated(&self, args: HookArgs<'_>, _interaction: Option<&Interaction>) -> Changed {
        let input = &args.call.input;
        let progress = Progress::of(input, args.question);
        let blocks = question_card(
            input,
            args.question.revision,
            &progress,
            args.call.expires_at.as_deref(),
            chrono::Utc::now(),
        );
        let current = args
            .question
            .current()
            .ok_or_else(|| Error::BadId("a question record without messages".into()))?;
        let (channel, ts) = split_id(&current.id)?;
        self.api
            .update_message(channel, ts, blocks, &fallback_text(input))
            .await?;
        Ok(None)
    }

    async fn settled(&self, args: HookArgs<'_>, how: Settlement<'_>) -> Changed {
        let input = &args.call.input;
        let text = crate::render::outcome_text(input, how.outcome, how.actor);
        let text = &text;
        settle_each(crate::PLATFORM, &args.question.messages, |m| async move {
            let blocks = settled_blocks(input, how.outcome, how.actor);
            let (channel, ts) = split_id(&m.id)?;
            self.api.update_message(channel, ts, blocks, text).await
        })
        .await?;
        Ok(None)
    }

    /// Tells the person behind `interaction` the notice, privately in the thread
    /// (`chat.postEphemeral`): the body of the `rejected`, `denied` and `stale` hooks.
    async fn notify(&self, args: HookArgs<'_>, to: NoticeTo<'_>) -> Result<(), BoxError> {
        let text = to.text();
        let (channel, thread_ts) = split_id(&args.thread.id)?;
        self.api
            .post_ephemeral(channel, &to.interaction.user().id, Some(thread_ts), text)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use frogbot_model::{PlatformUser, ThreadMessageMetadata};
    use serde_json::json;

    fn input(questions: Value) -> QuestionInput {
        serde_json::from_value(json!({ "questions": questions })).unwrap()
    }

    fn one(custom: bool) -> QuestionInput {
        input(json!([{"header": "Env", "question": "Where?",
                      "options": [{"label": "staging"}, {"label": "prod"}], "custom": custom}]))
    }

    fn record(revision: u64) -> QuestionRecord {
        QuestionRecord {
            messages: vec![QuestionMessage {
                id: "C1:1700000000.000200".into(),
                posted_at: "2023-11-14T22:13:20.000Z".into(),
                question: None,
            }],
            revision,
            state: None,
        }
    }

    fn reply(text: &str, sent: &str) -> frogbot_model::ThreadMessage {
        frogbot_model::ThreadMessage {
            id: "C1:1700000001.000000".into(),
            text: text.into(),
            author: PlatformUser {
                id: "U1".into(),
                name: None,
                is_bot: false,
            },
            metadata: ThreadMessageMetadata {
                date_sent: sent.into(),
            },
            reply_to: None,
            raw: Value::Null,
            files: Vec::new(),
            mentions: Vec::new(),
        }
    }

    #[test]
    fn a_skip_click_dismisses_and_an_old_one_is_stale() {
        let i = one(false);
        let skip = |revision| {
            ActionRef {
                kind: ActionKind::Skip,
                question: 0,
                option: None,
                revision,
            }
            .encode()
        };
        assert_eq!(
            parse_action(&i, &record(2), &skip(2), None, &Value::Null),
            ParseResult::Dismiss
        );
        assert_eq!(
            parse_action(&i, &record(2), &skip(1), None, &Value::Null),
            ParseResult::Stale
        );
        assert!(!is_open_form_action(&skip(0)));
    }

    #[test]
    fn a_typed_skip_dismisses_a_question_it_addresses() {
        let later = "2023-11-14T22:13:21.000Z";
        for custom in [false, true] {
            for text in ["skip", " SKIP ", "/skip", "/Skip"] {
                assert_eq!(
                    parse_reply(&one(custom), &record(0), &reply(text, later)),
                    ParseResult::Dismiss,
                    "{text:?} (custom: {custom})"
                );
            }
        }
        // Other words are no skip; "skip it" is an own answer of a `custom` question.
        assert_eq!(
            parse_reply(&one(false), &record(0), &reply("skip it", later)),
            ParseResult::Ignore
        );
        assert!(matches!(
            parse_reply(&one(true), &record(0), &reply("skip it", later)),
            ParseResult::Answer { output } if output.answers[0].selected == ["skip it"]
        ));
        // Sent before the question was posted: stale, like any answer.
        assert_eq!(
            parse_reply(
                &one(false),
                &record(0),
                &reply("skip", "2023-11-14T22:13:19.000Z")
            ),
            ParseResult::Stale
        );
        // A set of several questions takes typed replies too (issue 38): `skip` skips it, as
        // its Skip button does; other chatter is still the agent's.
        let two = input(json!([
            {"header": "A", "question": "A?", "options": [{"label": "x"}]},
            {"header": "B", "question": "B?", "options": [{"label": "y"}]}
        ]));
        assert_eq!(
            parse_reply(&two, &record(0), &reply("skip", later)),
            ParseResult::Dismiss
        );
        assert_eq!(
            parse_reply(&two, &record(0), &reply("what about z?", later)),
            ParseResult::Ignore
        );
    }
}
