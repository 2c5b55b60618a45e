//! Pure rendering: a FrogBot question → an MSC3381 poll start (disclosed, `max_selections` from
//! `multiple`, answer ids carrying the revision, see [`crate::ids::answer_id`]) whose plain-text
//! fallback lists numbered options, or a plain prompt for a question with only an own answer; the
//! edit that redraws an open poll at a new revision, the settled view (poll end + an `m.replace`
//! edit) and the notices (rejected / denied / stale) that mention the person. Contents are returned
//! as `(event type, JSON content)` so the client layer can send them raw (and encrypted).
//!
//! Matrix sets no limit on a poll's texts, only on the whole event (65,536 bytes); texts are cut
//! ([`frogbot_model::text::truncate`]) so that even an edit, which carries the poll twice, stays
//! well under it: an answer at [`ANSWER_CHARS`], the poll's question at [`QUESTION_CHARS`], the
//! fallback text at [`FALLBACK_CHARS`]. At most [`MAX_ANSWERS`] options (MSC3381).

use frogbot_model::{QuestionInput, QuestionOutcome, skipped_text};
use matrix_sdk::ruma::events::Mentions;
use matrix_sdk::ruma::events::message::TextContentBlock;
use matrix_sdk::ruma::events::poll::end::PollEndEventContent;
use matrix_sdk::ruma::events::poll::start::{
    PollAnswer, PollAnswers, PollContentBlock, PollKind, PollStartEventContent,
    PollStartEventContentWithoutRelation,
};
use matrix_sdk::ruma::events::poll::unstable_end::UnstablePollEndEventContent;
use matrix_sdk::ruma::events::poll::unstable_start::{
    NewUnstablePollStartEventContent, ReplacementUnstablePollStartEventContent, UnstablePollAnswer,
    UnstablePollAnswers, UnstablePollStartContentBlock,
};
use matrix_sdk::ruma::events::relation::{Replacement, Thread};
use matrix_sdk::ruma::events::room::message::{
    ReplacementMetadata, RoomMessageEventContent, RoomMessageEventContentWithoutRelation,
};
use matrix_sdk::ruma::{EventId, OwnedEventId, UInt, UserId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Error;
use crate::ids::answer_id;
use frogbot_model::text::truncate;

/// Characters of a poll answer's text (an option label is cut there; answers are told apart by id).
pub const ANSWER_CHARS: usize = 100;
/// Characters of a poll's question (`header: question`).
pub const QUESTION_CHARS: usize = 500;
/// Characters of the plain-text fallback (question, numbered options, how to answer).
pub const FALLBACK_CHARS: usize = 4_000;
/// The most answers one poll may have (MSC3381).
pub const MAX_ANSWERS: usize = 20;

/// Which poll event types to send. Responses of both kinds are always read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum PollEvents {
    /// `m.poll.start` / `m.poll.end` (MSC3381's stable names).
    #[default]
    Stable,
    /// `org.matrix.msc3381.poll.start` / `…poll.end` (what most clients render today).
    Unstable,
}

/// An event to send: its type and content.
pub type Content = (&'static str, Value);

fn json<T: Serialize>(v: &T) -> Result<Value, Error> {
    serde_json::to_value(v).map_err(|e| Error::Render(e.to_string()))
}

/// The last line of every question's text: polls have no buttons, so a reply `skip` in the thread
/// skips (dismisses the call).
pub const SKIP_LINE: &str = "Reply skip to skip this question.";

/// The plain text of question `q`: header, question, numbered options, how to answer, and last
/// how to skip it ([`SKIP_LINE`], kept when the rest is cut).
pub fn question_text(input: &QuestionInput, q: usize) -> String {
    let item = &input.questions[q];
    let mut s = format!("{}: {}", item.header, item.question);
    for (i, o) in item.options.iter().enumerate() {
        s.push_str(&format!("\n{}. {}", i + 1, o.label));
        if let Some(d) = &o.description {
            s.push_str(&format!(" — {d}"));
        }
    }
    if item.options.is_empty() {
        s.push_str("\nReply in this thread with your answer.");
    } else if item.multiple {
        s.push_str("\nVote in the poll, or reply in this thread with the numbers (e.g. `1 3`)");
        if item.custom {
            s.push_str(" or your own answer");
        }
        s.push('.');
    } else {
        s.push_str("\nVote in the poll, react with the number, or reply in this thread with it");
        if item.custom {
            s.push_str(" or with your own answer");
        }
        s.push('.');
    }
    let room = FALLBACK_CHARS - SKIP_LINE.chars().count() - 1;
    format!("{}\n{SKIP_LINE}", truncate(&s, room))
}

fn poll_question(input: &QuestionInput, q: usize) -> String {
    let item = &input.questions[q];
    truncate(
        &format!("{}: {}", item.header, item.question),
        QUESTION_CHARS,
    )
}

fn answer_text(label: &str) -> String {
    truncate(label, ANSWER_CHARS)
}

fn thread(root: &EventId) -> Thread {
    Thread::plain(root.to_owned(), root.to_owned())
}

fn check_answers(input: &QuestionInput, q: usize) -> Result<(), Error> {
    let n = input.questions[q].options.len();
    if n > MAX_ANSWERS {
        return Err(Error::Render(format!(
            "a poll has at most {MAX_ANSWERS} answers, question {} has {n} options",
            q + 1
        )));
    }
    Ok(())
}

fn poll_block(input: &QuestionInput, q: usize, revision: u64) -> Result<PollContentBlock, Error> {
    check_answers(input, q)?;
    let item = &input.questions[q];
    let answers: Vec<PollAnswer> = item
        .options
        .iter()
        .enumerate()
        .map(|(i, o)| {
            PollAnswer::new(
                answer_id(revision, i),
                TextContentBlock::plain(answer_text(&o.label)),
            )
        })
        .collect();
    let answers = PollAnswers::try_from(answers).map_err(|e| Error::Render(e.to_string()))?;
    let mut block =
        PollContentBlock::new(TextContentBlock::plain(poll_question(input, q)), answers);
    block.kind = PollKind::Disclosed;
    block.max_selections = max_selections(input, q);
    Ok(block)
}

fn max_selections(input: &QuestionInput, q: usize) -> UInt {
    let item = &input.questions[q];
    let n = if item.multiple { item.options.len() } else { 1 };
    UInt::try_from(n.max(1)).unwrap_or(UInt::MIN)
}

fn unstable_block(
    input: &QuestionInput,
    q: usize,
    revision: u64,
) -> Result<UnstablePollStartContentBlock, Error> {
    check_answers(input, q)?;
    let item = &input.questions[q];
    let answers: Vec<UnstablePollAnswer> = item
        .options
        .iter()
        .enumerate()
        .map(|(i, o)| UnstablePollAnswer::new(answer_id(revision, i), answer_text(&o.label)))
        .collect();
    let answers =
        UnstablePollAnswers::try_from(answers).map_err(|e| Error::Render(e.to_string()))?;
    let mut block = UnstablePollStartContentBlock::new(poll_question(input, q), answers);
    block.kind = PollKind::Disclosed;
    block.max_selections = max_selections(input, q);
    Ok(block)
}

/// The poll start of question `q` (which must have options) in the thread on `root`, its answer
/// ids drawn at `revision` of the question set.
pub fn poll_start(
    input: &QuestionInput,
    q: usize,
    root: &EventId,
    events: PollEvents,
    revision: u64,
) -> Result<Content, Error> {
    let text = question_text(input, q);
    match events {
        PollEvents::Stable => {
            let mut c =
                PollStartEventContent::with_plain_text(text, poll_block(input, q, revision)?);
            c.relates_to = Some(matrix_sdk::ruma::events::room::message::Relation::Thread(
                thread(root),
            ));
            Ok(("m.poll.start", json(&c)?))
        }
        PollEvents::Unstable => {
            let mut c = NewUnstablePollStartEventContent::plain_text(
                text,
                unstable_block(input, q, revision)?,
            );
            c.relates_to = Some(
                matrix_sdk::ruma::events::room::message::RelationWithoutReplacement::Thread(
                    thread(root),
                ),
            );
            Ok(("org.matrix.msc3381.poll.start", json(&c)?))
        }
    }
}

/// A plain message in the thread on `root` (the prompt of a question with only an own answer).
pub fn thread_message(text: &str, root: &EventId) -> Result<Content, Error> {
    let mut c = RoomMessageEventContent::text_plain(text);
    c.relates_to = Some(matrix_sdk::ruma::events::room::message::Relation::Thread(
        thread(root),
    ));
    Ok(("m.room.message", json(&c)?))
}

/// A notice in the thread on `root` that mentions `user` (and replies to `reply_to` if given).
pub fn mention_notice(
    user: &UserId,
    text: &str,
    root: &EventId,
    reply_to: Option<OwnedEventId>,
) -> Result<Content, Error> {
    let mut c =
        RoomMessageEventContent::notice_plain(truncate(&format!("{user}: {text}"), FALLBACK_CHARS))
            .add_mentions(Mentions::with_user_ids([user.to_owned()]));
    let mut t = thread(root);
    if let Some(r) = reply_to {
        t = Thread::reply(root.to_owned(), r);
    }
    c.relates_to = Some(matrix_sdk::ruma::events::room::message::Relation::Thread(t));
    Ok(("m.room.message", json(&c)?))
}

/// The outcome line shown on a settled question ("⏭ Skipped by @user:server" for a dismissal).
pub fn outcome_text(
    input: &QuestionInput,
    q: usize,
    outcome: &QuestionOutcome,
    by: Option<&str>,
) -> String {
    let item = &input.questions[q];
    let skipped = skipped_text(by);
    let by = by.map(|u| format!(" by {u}")).unwrap_or_default();
    match outcome {
        QuestionOutcome::Answered(o) | QuestionOutcome::Expired(Some(o)) => {
            let picked = o
                .answers
                .iter()
                .find(|a| a.header == item.header)
                .or_else(|| o.answers.get(q))
                .map(|a| a.selected.join(", "))
                .unwrap_or_default();
            if matches!(outcome, QuestionOutcome::Expired(_)) {
                format!("⌛ Expired; default: {picked}")
            } else {
                format!("✅ Answered{by}: {picked}")
            }
        }
        QuestionOutcome::Dismissed => format!("⏭ {skipped}"),
        QuestionOutcome::Expired(None) => "⌛ Expired".into(),
        QuestionOutcome::Cancelled => "✖ Cancelled".into(),
        _ => "Closed".into(),
    }
}

/// Ends the poll `poll` with `text`.
pub fn poll_end(poll: &EventId, text: &str, events: PollEvents) -> Result<Content, Error> {
    match events {
        PollEvents::Stable => Ok((
            "m.poll.end",
            json(&PollEndEventContent::with_plain_text(text, poll.to_owned()))?,
        )),
        PollEvents::Unstable => Ok((
            "org.matrix.msc3381.poll.end",
            json(&UnstablePollEndEventContent::new(text, poll.to_owned()))?,
        )),
    }
}

/// An edit (`m.replace`) of the poll start `poll` of question `q`, its answer ids drawn at
/// `revision`: redrawn after a step of the set (`outcome_line` `None`), or showing the outcome.
pub fn poll_replacement(
    input: &QuestionInput,
    q: usize,
    poll: &EventId,
    outcome_line: Option<&str>,
    events: PollEvents,
    revision: u64,
) -> Result<Content, Error> {
    let text = match outcome_line {
        Some(line) => format!("{}\n{line}", question_text(input, q)),
        None => question_text(input, q),
    };
    match events {
        PollEvents::Stable => {
            let new =
                PollStartEventContentWithoutRelation::from(PollStartEventContent::with_plain_text(
                    text.clone(),
                    poll_block(input, q, revision)?,
                ));
            let mut c = PollStartEventContent::with_plain_text(
                format!("* {text}"),
                poll_block(input, q, revision)?,
            );
            c.relates_to = Some(
                matrix_sdk::ruma::events::room::message::Relation::Replacement(Replacement::new(
                    poll.to_owned(),
                    new,
                )),
            );
            Ok(("m.poll.start", json(&c)?))
        }
        PollEvents::Unstable => {
            let c = ReplacementUnstablePollStartEventContent::plain_text(
                text,
                unstable_block(input, q, revision)?,
                poll.to_owned(),
            );
            Ok(("org.matrix.msc3381.poll.start", json(&c)?))
        }
    }
}

/// An edit (`m.replace`) of the plain message `message` to `text`.
pub fn message_replacement(message: &EventId, text: &str) -> Result<Content, Error> {
    let c = RoomMessageEventContentWithoutRelation::text_plain(text)
        .make_replacement(ReplacementMetadata::new(message.to_owned(), None));
    Ok(("m.room.message", json(&c)?))
}
