//! The `ChannelQuestions` conformance suite: the hook rules every channel adapter keeps, run by
//! each adapter against a fake of its platform (as the store conformance suite runs against every
//! backend).
//!
//! An adapter implements [`Harness`] over its fake platform (the hooks under test talk to the fake
//! through the adapter's real client) and expands
//! [`channel_questions_conformance!`](crate::channel_questions_conformance) in a test
//! file:
//!
//! ```ignore
//! frogbot_model::channel_questions_conformance!(my_adapter::testing::conformance_harness().await);
//! ```
//!
//! The suite plays the question engine's part itself (record, revision, state), so it needs no
//! store and no runtime of its own; the macro expands to `#[tokio::test]`s, so the test crate
//! needs `tokio` (with `macros` and `rt`).
//!
//! The rules:
//! - a question set as large as the platform draws renders, within the platform's limits (the
//!   fake refuses what the platform would), and every call is covered;
//! - one click on a one-choice question answers it with that option's label;
//! - control ids carry the revision: after a step of a multi-question set, a control of the old
//!   revision is stale, while the new revision's controls answer;
//! - a settled view removes the controls from every message of the call;
//! - `rejected`, `denied` and `stale` notices reach the person;
//! - a thread reply answers by option number and by label, custom text answers a `custom`
//!   question, and chatter on a closed-options question is left to the agent;
//! - several options of a `multiple` question answer it together;
//! - a Skip dismisses the call: the settled view says "Skipped by …" and shows no control on any
//!   message of the call, and a Skip control of an older revision is stale.

use async_trait::async_trait;
use serde_json::json;

use crate::{
    Actor, ChannelQuestions, DENIED_TEXT, HookArgs, Interaction, ParseArgs, ParseResult,
    PlatformUser, QuestionCall, QuestionChange, QuestionInput, QuestionMessage, QuestionOutcome,
    QuestionOutput, QuestionRecord, RenderArgs, RequestContext, STALE_TEXT, Thread, UserId,
};

/// How large a question set the platform draws (the suite renders one exactly this large).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Questions in one call.
    pub questions: usize,
    /// Options per question.
    pub options: usize,
    /// Characters of an option label the adapter must fit (cutting is fine).
    pub label: usize,
}

/// An adapter's hooks over a fake of its platform, as the suite drives them.
#[async_trait]
pub trait Harness: Send + Sync {
    /// The hooks under test, talking to the fake platform through the adapter's real client.
    fn hooks(&self) -> &dyn ChannelQuestions;

    /// A new thread on the fake platform, where the bot may post.
    async fn thread(&self) -> Thread;

    /// The largest question set the platform draws.
    fn limits(&self) -> Limits;

    /// What `user` does next, towards choosing `options` (indices) of question `q` of `call`,
    /// with the controls the fake shows now for `record`'s messages: one click for a one-choice
    /// question; for a `multiple` one, the interactions the displayed controls take from here (a
    /// multi-select and a submit; or, where every check redraws the controls, the next check or
    /// the final Done). The suite drives what it gets and asks again with the updated record
    /// until the answer arrives. Built from what the fake displays, never from the adapter's own
    /// codec.
    async fn choose(
        &self,
        thread: &Thread,
        call: &QuestionCall,
        record: &QuestionRecord,
        q: usize,
        options: &[usize],
        user: &PlatformUser,
    ) -> Vec<Interaction>;

    /// A thread reply `text` by `user` in `thread`, as the platform delivers it.
    async fn reply(&self, thread: &Thread, text: &str, user: &PlatformUser) -> Interaction;

    /// The Skip `user` uses now on the call of `record`: a click on the Skip control the fake
    /// shows on the call's current message, built from what the fake displays (never from the
    /// adapter's own codec); on a platform without buttons, the typed reply `skip` in the
    /// question's thread, as the platform delivers it. Panics when the fake shows no Skip.
    async fn skip(
        &self,
        thread: &Thread,
        call: &QuestionCall,
        record: &QuestionRecord,
        user: &PlatformUser,
    ) -> Interaction;

    /// How many controls (answer buttons, Skip, "Other…", menu options, open poll answers) the
    /// fake shows on message `id` now.
    async fn controls(&self, message_id: &str) -> usize;

    /// The text the fake shows on message `id` now (every text of it a person reads).
    async fn shown_text(&self, message_id: &str) -> String;

    /// Every text the fake showed `user` so far: ephemeral messages, direct messages, replies or
    /// mentions addressed to them, alerts on a click.
    async fn notices(&self, user: &PlatformUser) -> Vec<String>;
}

/// The participant the suite acts as.
pub fn participant() -> PlatformUser {
    PlatformUser {
        id: "U0CONFORMANCE".into(),
        name: Some("Ada".into()),
        is_bot: false,
    }
}

/// The participant as the harness should identify them (platforms with structured ids may map
/// [`participant`]'s id to one of theirs; the suite compares only what the harness returns).
fn request(user: &PlatformUser, thread: &Thread) -> RequestContext {
    RequestContext {
        user: Some(UserId(format!("{}:{}", thread.platform, user.id))),
        identity: Some(crate::ChannelIdentity {
            platform: thread.platform.clone(),
            user: user.clone(),
        }),
    }
}

/// A call of `n` questions with `options` options each (`multiple` and `custom` as given).
pub fn call(id: &str, n: usize, options: usize, multiple: bool, custom: bool) -> QuestionCall {
    let input: QuestionInput = serde_json::from_value(json!({
        "questions": (0..n).map(|q| json!({
            "header": format!("Q{}", q + 1),
            "question": format!("Question number {}?", q + 1),
            "options": (0..options).map(|o| json!({
                "label": format!("Option {}-{}", q + 1, o + 1),
                "description": format!("What option {} of question {} means", o + 1, q + 1),
            })).collect::<Vec<_>>(),
            "multiple": multiple,
            "custom": custom,
        })).collect::<Vec<_>>()
    }))
    .expect("a valid question input");
    input.validate().expect("the suite's input is valid");
    QuestionCall {
        tool_call_id: id.into(),
        input,
        expires_at: None,
    }
}

fn label(call: &QuestionCall, q: usize, o: usize) -> String {
    call.input.questions[q].options[o].label.clone()
}

/// Renders `call` in `thread` and returns its record (revision 0).
pub async fn render(h: &dyn Harness, thread: &Thread, call: &QuestionCall) -> QuestionRecord {
    let req = request(&participant(), thread);
    let rendered = h
        .hooks()
        .render(RenderArgs {
            calls: std::slice::from_ref(call),
            req: &req,
            thread,
        })
        .await
        .unwrap_or_else(|e| panic!("render failed: {e}"));
    let entry = rendered
        .into_iter()
        .find(|r| r.calls.contains(&call.tool_call_id))
        .expect("render covers the call");
    assert!(!entry.messages.is_empty(), "render posted no message");
    QuestionRecord {
        messages: entry.messages,
        revision: 0,
        state: entry.state,
    }
}

fn apply(record: &mut QuestionRecord, change: Option<QuestionChange>) {
    if let Some(change) = change {
        if let Some(messages) = change.messages {
            assert!(!messages.is_empty(), "a change must not empty the messages");
            record.messages = messages;
        }
        if change.state.is_some() {
            record.state = change.state;
        }
    }
}

fn parse(
    h: &dyn Harness,
    call: &QuestionCall,
    record: &QuestionRecord,
    interaction: &Interaction,
    settled: bool,
) -> ParseResult {
    h.hooks().parse(ParseArgs {
        call,
        interaction,
        question: record,
        settled,
    })
}

/// A new thread with a [`call`] of these arguments rendered in it (its record at revision 0).
async fn rendered(
    h: &dyn Harness,
    id: &str,
    n: usize,
    options: usize,
    multiple: bool,
    custom: bool,
) -> (Thread, QuestionCall, QuestionRecord) {
    let thread = h.thread().await;
    let c = call(id, n, options, multiple, custom);
    let record = render(h, &thread, &c).await;
    (thread, c, record)
}

/// Plays the engine's part for a sequence of interactions: a `partial` saves the state with the
/// next revision and runs `updated`. Returns the last result.
pub async fn drive(
    h: &dyn Harness,
    thread: &Thread,
    call: &QuestionCall,
    record: &mut QuestionRecord,
    interactions: &[Interaction],
) -> ParseResult {
    let req = request(&participant(), thread);
    let mut last = ParseResult::Ignore;
    for interaction in interactions {
        last = parse(h, call, record, interaction, false);
        if let ParseResult::Partial { state } = &last {
            if state.is_some() {
                record.state = state.clone();
            }
            record.revision += 1;
            let change = h
                .hooks()
                .updated(
                    HookArgs {
                        call,
                        question: record,
                        req: &req,
                        thread,
                    },
                    Some(interaction),
                )
                .await
                .unwrap_or_else(|e| panic!("updated failed: {e}"));
            apply(record, change);
        }
    }
    last
}

/// Plays the engine's part when the call settles with `outcome` by `user`: runs `settled` and
/// applies its change.
async fn settle(
    h: &dyn Harness,
    thread: &Thread,
    call: &QuestionCall,
    record: &mut QuestionRecord,
    user: &PlatformUser,
    outcome: &QuestionOutcome,
) {
    let req = request(user, thread);
    let actor = Actor {
        user: req.user.clone(),
        identity: req.identity.clone(),
    };
    let change = h
        .hooks()
        .settled(
            HookArgs {
                call,
                question: record,
                req: &req,
                thread,
            },
            outcome.by(Some(&actor)),
        )
        .await
        .unwrap_or_else(|e| panic!("settled failed: {e}"));
    apply(record, change);
}

/// Asserts that message `m` of a settled call shows no control (after `what`).
async fn assert_no_controls(h: &dyn Harness, m: &QuestionMessage, what: &str) {
    assert_eq!(
        h.controls(&m.id).await,
        0,
        "message {} still shows controls after {what}",
        m.id
    );
}

/// Asserts that `result` is a step: the first of two questions answered.
fn stepped(result: &ParseResult) {
    assert!(
        matches!(result, ParseResult::Partial { .. }),
        "the first of two questions is a step, got {result:?}"
    );
}

fn answered(result: &ParseResult) -> &QuestionOutput {
    match result {
        ParseResult::Answer { output } => output,
        other => panic!("expected an answer, got {other:?}"),
    }
}

/// Rule: a set as large as the platform draws renders within its limits and covers the call,
/// and every posted message shows controls.
pub async fn renders_within_limits(h: &dyn Harness) {
    let l = h.limits();
    let mut c = call("call-limits", l.questions, l.options, false, false);
    for q in &mut c.input.questions {
        q.question = "Why? ".repeat(300);
        q.header = format!("{} {}", q.header, "h".repeat(40));
        for (i, o) in q.options.iter_mut().enumerate() {
            o.label = format!("{i} {}", "é".repeat(l.label.saturating_sub(3)));
            o.description = Some("d".repeat(300));
        }
    }
    c.input.validate().expect("still valid");
    let thread = h.thread().await;
    let record = render(h, &thread, &c).await;
    let mut shown = 0;
    for m in &record.messages {
        shown += h.controls(&m.id).await;
    }
    assert!(shown > 0, "no message of the call shows a control");
}

/// Rule: one click on a one-choice question answers it with the option's label.
pub async fn one_click_answers(h: &dyn Harness) {
    let (thread, c, mut record) = rendered(h, "call-click", 1, 3, false, false).await;
    let clicks = h
        .choose(&thread, &c, &record, 0, &[1], &participant())
        .await;
    assert!(
        !clicks.is_empty(),
        "the platform offers a control for option 2"
    );
    let result = drive(h, &thread, &c, &mut record, &clicks).await;
    let output = answered(&result);
    assert_eq!(output.answers.len(), 1);
    assert_eq!(output.answers[0].selected, vec![label(&c, 0, 1)]);
}

/// Rule: control ids carry the revision — after a step, the old revision's control is stale
/// and the new revision's controls answer.
pub async fn an_old_control_is_stale(h: &dyn Harness) {
    let (thread, c, mut record) = rendered(h, "call-stale", 2, 3, false, false).await;
    let first = h
        .choose(&thread, &c, &record, 0, &[0], &participant())
        .await;
    stepped(&drive(h, &thread, &c, &mut record, &first).await);
    assert!(record.revision >= 1);
    let old = first.last().expect("a click");
    assert_eq!(
        parse(h, &c, &record, old, false),
        ParseResult::Stale,
        "a control of revision 0 after the step"
    );
    let second = h
        .choose(&thread, &c, &record, 1, &[2], &participant())
        .await;
    let done = drive(h, &thread, &c, &mut record, &second).await;
    let output = answered(&done);
    assert_eq!(output.answers[0].selected, vec![label(&c, 0, 0)]);
    assert_eq!(output.answers[1].selected, vec![label(&c, 1, 2)]);
}

/// Rule: a settled view removes the controls from every message of the call.
pub async fn a_settled_view_removes_the_controls(h: &dyn Harness) {
    let (thread, c, mut record) = rendered(h, "call-settle", 1, 2, false, false).await;
    let clicks = h
        .choose(&thread, &c, &record, 0, &[0], &participant())
        .await;
    let result = drive(h, &thread, &c, &mut record, &clicks).await;
    let output = answered(&result).clone();
    let outcome = QuestionOutcome::Answered(output);
    settle(h, &thread, &c, &mut record, &participant(), &outcome).await;
    for m in &record.messages {
        assert_no_controls(h, m, "settling").await;
    }
    // A click arriving after the answer is classified the same (the engine answers it stale).
    let late = parse(h, &c, &record, clicks.last().expect("a click"), true);
    assert!(
        matches!(late, ParseResult::Answer { .. } | ParseResult::Stale),
        "a late click is an answer (stale for the engine) or stale, got {late:?}"
    );
}

/// Rule: `rejected`, `denied` and `stale` notices reach the person — each about its own click,
/// as the engine sends at most one notice per interaction.
pub async fn notices_reach_the_person(h: &dyn Harness) {
    let (thread, c, record) = rendered(h, "call-notices", 1, 2, false, false).await;
    let user = participant();
    let req = request(&user, &thread);
    let args = HookArgs {
        call: &c,
        question: &record,
        req: &req,
        thread: &thread,
    };
    let click = || async {
        let clicks = h.choose(&thread, &c, &record, 0, &[0], &user).await;
        clicks.last().cloned().expect("a click")
    };

    let before = h.notices(&user).await.len();
    h.hooks()
        .rejected(args, &click().await, "pick one of the listed options")
        .await
        .unwrap_or_else(|e| panic!("rejected failed: {e}"));
    let after = h.notices(&user).await;
    assert!(
        after.len() > before
            && after[before..]
                .iter()
                .any(|t| t.contains("pick one of the listed options")),
        "the rejection reason reached the person: {after:?}"
    );

    let before = after.len();
    h.hooks()
        .denied(args, &click().await)
        .await
        .unwrap_or_else(|e| panic!("denied failed: {e}"));
    let after = h.notices(&user).await;
    assert!(
        after[before..].iter().any(|t| t.contains(DENIED_TEXT)),
        "a denial reached the person: {after:?}"
    );

    let before = after.len();
    let stale_req = RequestContext::default();
    h.hooks()
        .stale(
            HookArgs {
                req: &stale_req,
                ..args
            },
            &click().await,
        )
        .await
        .unwrap_or_else(|e| panic!("stale failed: {e}"));
    let after = h.notices(&user).await;
    assert!(
        after[before..].iter().any(|t| t.contains(STALE_TEXT)),
        "a stale notice reached the person: {after:?}"
    );
}

/// Rule: a thread reply answers by option number and by label; chatter is left to the agent.
pub async fn thread_replies_by_number_and_label(h: &dyn Harness) {
    let user = participant();
    let (thread, c, mut record) = rendered(h, "call-reply-number", 1, 3, false, false).await;
    let reply = h.reply(&thread, "2", &user).await;
    let result = drive(h, &thread, &c, &mut record, &[reply]).await;
    assert_eq!(answered(&result).answers[0].selected, vec![label(&c, 0, 1)]);

    let (thread, c, mut record) = rendered(h, "call-reply-label", 1, 3, false, false).await;
    let reply = h.reply(&thread, &label(&c, 0, 2), &user).await;
    let result = drive(h, &thread, &c, &mut record, &[reply]).await;
    assert_eq!(answered(&result).answers[0].selected, vec![label(&c, 0, 2)]);

    let chatter = h
        .reply(&thread, "by the way, what is the weather like?", &user)
        .await;
    assert_eq!(
        parse(h, &c, &record, &chatter, false),
        ParseResult::Ignore,
        "chatter on a question without own answers goes to the agent"
    );
}

/// Rule: own text answers a `custom` question.
pub async fn custom_text_answers(h: &dyn Harness) {
    let user = participant();
    let (thread, c, mut record) = rendered(h, "call-custom", 1, 2, false, true).await;
    let reply = h.reply(&thread, "something else entirely", &user).await;
    let result = drive(h, &thread, &c, &mut record, &[reply]).await;
    assert_eq!(
        answered(&result).answers[0].selected,
        vec!["something else entirely".to_owned()]
    );
}

/// Rule: several options of a `multiple` question answer it together, each step read off the
/// controls the platform shows after the one before.
pub async fn multiple_choice_answers(h: &dyn Harness) {
    let (thread, c, mut record) = rendered(h, "call-multiple", 1, 4, true, false).await;
    let chosen = [0, 2];
    // A check and its submit per option, and one more: a widget that needs more is broken.
    let mut rounds = 2 * chosen.len() + 1;
    let result = loop {
        let clicks = h
            .choose(&thread, &c, &record, 0, &chosen, &participant())
            .await;
        assert!(
            !clicks.is_empty(),
            "the platform offers controls for several options"
        );
        let result = drive(h, &thread, &c, &mut record, &clicks).await;
        match result {
            ParseResult::Answer { .. } => break result,
            ParseResult::Partial { .. } if rounds > 0 => rounds -= 1,
            other => panic!("choosing several options went nowhere: {other:?}"),
        }
    };
    let mut selected = answered(&result).answers[0].selected.clone();
    selected.sort();
    assert_eq!(selected, vec![label(&c, 0, 0), label(&c, 0, 2)]);
}

/// Rule: a Skip dismisses the call. After a step, the Skip drawn before it is stale (a control
/// carries its revision; a typed reply carries none), while the Skip shown now parses as
/// [`ParseResult::Dismiss`]; the settled view of the dismissal reads "Skipped by …" and shows no
/// control on any message of the call.
pub async fn skip_dismisses(h: &dyn Harness) {
    let user = participant();
    let (thread, c, mut record) = rendered(h, "call-skip", 2, 3, false, false).await;
    let old = h.skip(&thread, &c, &record, &user).await;
    assert_eq!(
        parse(h, &c, &record, &old, false),
        ParseResult::Dismiss,
        "a Skip dismisses the call"
    );
    let first = h.choose(&thread, &c, &record, 0, &[0], &user).await;
    stepped(&drive(h, &thread, &c, &mut record, &first).await);
    if matches!(old, Interaction::Action { .. }) {
        assert_eq!(
            parse(h, &c, &record, &old, false),
            ParseResult::Stale,
            "a Skip of revision 0 after the step"
        );
    }
    let skip = h.skip(&thread, &c, &record, &user).await;
    assert_eq!(
        parse(h, &c, &record, &skip, false),
        ParseResult::Dismiss,
        "the Skip shown after the step dismisses the call"
    );
    // The engine records the dismissal and closes the question.
    settle(
        h,
        &thread,
        &c,
        &mut record,
        &user,
        &QuestionOutcome::Dismissed,
    )
    .await;
    for m in &record.messages {
        assert_no_controls(h, m, "the Skip").await;
        let text = h.shown_text(&m.id).await;
        assert!(
            text.contains("Skipped by"),
            "message {} says who skipped: {text:?}",
            m.id
        );
    }
}

/// Expands to one `#[tokio::test]` per rule of the suite. `$harness` is an expression (it may
/// `.await`) giving a fresh [`Harness`]; each test builds its own.
#[macro_export]
macro_rules! channel_questions_conformance {
    ($harness:expr) => {
        $crate::channel_questions_conformance!(@rules $harness;
            renders_within_limits,
            one_click_answers,
            an_old_control_is_stale,
            a_settled_view_removes_the_controls,
            notices_reach_the_person,
            thread_replies_by_number_and_label,
            custom_text_answers,
            multiple_choice_answers,
            skip_dismisses
        );
    };
    (@rules $harness:expr; $($rule:ident),+) => {
        $(
            #[tokio::test]
            async fn $rule() {
                let harness = $harness;
                $crate::conformance::$rule(&harness).await;
            }
        )+
    };
}
