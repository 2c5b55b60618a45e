//! Discord's limits, never silent (issue 38), each at the limit and one past it, through
//! `DiscordQuestions` and serenity's real `Http` against the fake Discord (which refuses what
//! Discord refuses) and read back as a person sees it (`FakeDiscord::person_view`):
//! - a settled question (its text and the answer) of 2,000 characters is one message; past that
//!   the outcome goes on in replies to it, posted silently — the whole answer readable;
//! - a select option's label and description of 100 characters show whole; past that the
//!   option is cut with "…" and the message writes the label and description out in full; a
//!   pick answers the full label;
//! - a set of many questions (each with as many controls as a message holds: 24 buttons and
//!   Skip, or selects) is asked one step a message, every message within 5 action rows.
//!
//! (Choices past 25/100 options, button labels past 80, a step past 2,000 characters and forms
//! past 5 inputs are in `tests/questions.rs` and `tests/kinds.rs`.)

use frogbot_core::model::{
    ActionEvent, Actor, ChannelIdentity, ChannelQuestions, HookArgs, Interaction, ParseArgs,
    ParseResult, PlatformUser, QuestionAnswer, QuestionCall, QuestionMessage, QuestionOutcome,
    QuestionOutput, QuestionRecord, RequestContext, Thread,
};
use frogbot_discord::DiscordQuestions;
use frogbot_discord::render::MESSAGE_LIMIT;
use frogbot_discord::testing::{FakeDiscord, SeenMessage};
use serde_json::{Value, json};

const APP_ID: u64 = 600_000_000_000_000_006;
const BOT_ID: u64 = 610_000_000_000_000_006;
const THREAD: &str = "700000000000000007";
const ADA: &str = "300000000000000003";

async fn start() -> (FakeDiscord, DiscordQuestions) {
    let fake = FakeDiscord::start(APP_ID, BOT_ID).await;
    fake.add_user(&frogbot_discord::testing::user(
        ADA.parse().unwrap(),
        "ada",
        false,
    ));
    let piece = DiscordQuestions::new(fake.http());
    (fake, piece)
}

fn thread() -> Thread {
    Thread {
        id: THREAD.into(),
        platform: "discord".into(),
        chat_id: "chat-1".into(),
    }
}

fn ada() -> Actor {
    Actor {
        user: None,
        identity: Some(ChannelIdentity {
            platform: "discord".into(),
            user: PlatformUser {
                id: ADA.into(),
                name: Some("ada".into()),
                is_bot: false,
            },
        }),
    }
}

fn one(item: Value) -> QuestionCall {
    serde_json::from_value(json!({"toolCallId": "call-1", "input": {"questions": [item]}})).unwrap()
}

/// Every call so far was accepted by the fake (Discord would have refused nothing).
fn all_accepted(fake: &FakeDiscord) {
    for c in fake.calls() {
        assert!(
            c.status < 300,
            "refused: {} {} {}",
            c.method,
            c.path,
            c.response
        );
    }
}

/// Posts step 0 of `call`, then settles it as answered `selected` by Ada; what a person sees.
async fn settle(
    fake: &FakeDiscord,
    piece: &DiscordQuestions,
    call: &QuestionCall,
    selected: &str,
) -> Vec<SeenMessage> {
    let message: QuestionMessage = piece.post_question(&thread(), call, 0, 0).await.unwrap();
    let record = QuestionRecord {
        messages: vec![message],
        revision: 0,
        state: None,
    };
    let outcome = QuestionOutcome::Answered(QuestionOutput {
        answers: vec![QuestionAnswer {
            header: call.input.questions[0].header.clone(),
            selected: vec![selected.into()],
        }],
    });
    piece
        .settled(
            HookArgs {
                call,
                question: &record,
                req: &RequestContext::default(),
                thread: &thread(),
            },
            outcome.by(Some(&ada())),
        )
        .await
        .unwrap();
    fake.person_view(THREAD)
}

/// A settled view of exactly 2,000 characters is the question message alone; of 2,001 it goes
/// on in a reply to it that notifies no one; a 4,000-character answer to a long question is
/// whole across the messages. Before issue 38 the view was cut at 2,000 characters, silently.
#[tokio::test]
async fn a_settled_view_past_the_message_limit_goes_on_in_silent_replies() {
    let question = "Why? ".repeat(300).trim_end().to_owned();
    let call = one(
        json!({"header": "Why", "question": question, "kind": "text_input", "max_length": 4000}),
    );
    let fixed = format!("**Why**\n{question}\n\n✅ Answered by <@{ADA}>: ")
        .chars()
        .count();
    let words = |n: usize| -> String {
        (0..n)
            .map(|i| if i % 10 == 9 { ' ' } else { 'a' })
            .collect::<String>()
            .trim_end()
            .to_owned()
            + "z"
    };
    for (total, messages) in [
        (MESSAGE_LIMIT, 1),
        (MESSAGE_LIMIT + 1, 2),
        (fixed + 4000, 3),
    ] {
        let (fake, piece) = start().await;
        let answer = words(total - fixed - 1);
        assert_eq!(fixed + answer.chars().count(), total);
        let seen = settle(&fake, &piece, &call, &answer).await;
        all_accepted(&fake);
        assert!(
            seen.len() >= messages,
            "{total}: {} messages: {seen:#?}",
            seen.len()
        );
        let settled = &seen[0];
        assert!(settled.edited && settled.controls.is_empty());
        assert!(seen.iter().all(|m| m.text.chars().count() <= MESSAGE_LIMIT));
        // The continuations: replies to the question message, notifying no one.
        for m in &seen[1..] {
            assert!(!m.notified, "{total}: a continuation notifies: {m:#?}");
            let kept = fake.message(&m.id).unwrap();
            assert_eq!(kept["message_reference"]["message_id"], settled.id.as_str());
        }
        if total <= MESSAGE_LIMIT {
            assert_eq!(seen.len(), 1, "{total}: one message");
        } else {
            assert!(seen.len() > 1, "{total}: continued");
        }
        let all: Vec<String> = seen
            .iter()
            .flat_map(|m| m.text.split_whitespace().map(str::to_owned))
            .collect();
        let want: Vec<String> = format!("**Why**\n{question}\n\n✅ Answered by @ada: {answer}")
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        assert_eq!(all, want, "{total}: nothing cut, in order");
        assert!(
            seen.last().unwrap().text.ends_with('z'),
            "the answer's end shows"
        );
    }
}

fn pick(select: &str, message_id: &str, value: &str) -> Interaction {
    Interaction::Action {
        event: ActionEvent {
            action_id: select.into(),
            value: Some(value.into()),
            message_id: message_id.into(),
            user: PlatformUser {
                id: ADA.into(),
                name: None,
                is_bot: false,
            },
            trigger_id: Some("tok".into()),
            raw: json!({"data": {"custom_id": select, "values": [value]}}),
        },
    }
}

/// Select options (a single choice of 30: two selects) with a label and a description of 100
/// characters show them whole; of 101 the option is cut to 100 with "…" and the message writes
/// the label and description out in full; picking the option answers its full label.
#[tokio::test]
async fn select_option_texts_at_100_characters_and_one_past() {
    for len in [100, 101] {
        let (fake, piece) = start().await;
        let label = format!("L{}", "l".repeat(len - 1));
        let description = format!("D{}", "d".repeat(len - 1));
        let mut options: Vec<Value> = (2..=30)
            .map(|i| json!({"label": format!("o{i}")}))
            .collect();
        options.insert(0, json!({"label": label, "description": description}));
        let call = one(json!({"header": "Pick", "question": "Which?", "options": options}));
        let message = piece.post_question(&thread(), &call, 0, 0).await.unwrap();
        all_accepted(&fake);
        let shown = fake.message(&message.id).unwrap();
        let select = &shown["components"][0]["components"][0];
        assert_eq!(select["type"], 3, "a select: {shown:#}");
        let first = &select["options"][0];
        let (l, d) = (
            first["label"].as_str().unwrap(),
            first["description"].as_str().unwrap(),
        );
        let content = shown["content"].as_str().unwrap();
        if len == 100 {
            assert_eq!((l, d), (label.as_str(), description.as_str()));
        } else {
            assert!(l.chars().count() == 100 && l.ends_with('…'), "{l}");
            assert!(d.chars().count() == 100 && d.ends_with('…'), "{d}");
        }
        // The message always says the description (and a cut label) in full.
        assert!(content.contains(&description), "{content}");
        if len > 100 {
            assert!(content.contains(&label), "{content}");
        }
        let record = QuestionRecord {
            messages: vec![message.clone()],
            revision: 0,
            state: None,
        };
        let result = piece.parse(ParseArgs {
            call: &call,
            interaction: &pick(
                select["custom_id"].as_str().unwrap(),
                &message.id,
                first["value"].as_str().unwrap(),
            ),
            question: &record,
            settled: false,
        });
        let ParseResult::Answer { output } = result else {
            panic!("{len}: answered: {result:?}")
        };
        assert_eq!(
            output.answers[0].selected,
            std::slice::from_ref(&label),
            "{len}"
        );
    }
}

/// A set of seven questions, each with as many controls as one message holds (24 options as
/// buttons with Skip: 5 full rows; 25 and 100 options as selects), is asked one step a message:
/// every message within Discord's 5 action rows, accepted.
#[tokio::test]
async fn a_set_of_many_full_questions_keeps_each_message_within_five_rows() {
    let (fake, piece) = start().await;
    let options =
        |n: usize| -> Vec<Value> { (1..=n).map(|i| json!({"label": format!("o{i}")})).collect() };
    let questions: Vec<Value> = [24, 25, 100, 24, 25, 100, 24]
        .iter()
        .enumerate()
        .map(|(q, &n)| json!({"header": format!("Q{q}"), "question": "Which?", "options": options(n)}))
        .collect();
    let call: QuestionCall =
        serde_json::from_value(json!({"toolCallId": "call-7", "input": {"questions": questions}}))
            .unwrap();
    for step in 0..7 {
        let m = piece
            .post_question(&thread(), &call, 0, step)
            .await
            .unwrap();
        let shown = fake.message(&m.id).unwrap();
        let rows = shown["components"].as_array().unwrap();
        assert!(
            (1..=5).contains(&rows.len()),
            "step {step}: {} rows",
            rows.len()
        );
        let controls: usize = rows
            .iter()
            .flat_map(|r| r["components"].as_array().unwrap())
            .map(|c| c["options"].as_array().map_or(1, Vec::len))
            .sum();
        let n = call.input.questions[step].options.len();
        assert!(
            controls > n,
            "step {step}: every option and Skip: {controls}"
        );
        assert!(
            shown["content"]
                .as_str()
                .unwrap()
                .contains(&format!("({}/7)", step + 1)),
            "step {step} says where it stands"
        );
    }
    all_accepted(&fake);
}

/// A question too long for one message (a step of many long options; an approval with long
/// arguments) is posted over several messages that notify once: the first; the others, the
/// question message included, are silent.
#[tokio::test]
async fn a_question_over_several_messages_notifies_once() {
    let long = |i: usize| json!({"label": format!("option {i} {}", "y".repeat(60))});
    let step = one(
        json!({"header": "Pick", "question": "Which?", "multiple": true,
        "options": (1..=40).map(long).collect::<Vec<_>>()}),
    );
    let approval = QuestionCall {
        tool_call_id: "call-a".into(),
        input: frogbot_core::model::approval_question(
            "shell",
            &json!({"command": format!("echo {}", "a ".repeat(3000))}),
            &[],
            None,
        ),
        expires_at: None,
    };
    for call in [step, approval] {
        let (fake, piece) = start().await;
        piece
            .render(frogbot_core::model::RenderArgs {
                calls: std::slice::from_ref(&call),
                req: &RequestContext::default(),
                thread: &thread(),
            })
            .await
            .unwrap();
        all_accepted(&fake);
        let seen = fake.person_view(THREAD);
        assert!(seen.len() > 1, "several messages: {seen:#?}");
        let notified: Vec<bool> = seen.iter().map(|m| m.notified).collect();
        let mut want = vec![false; seen.len()];
        want[0] = true;
        assert_eq!(notified, want, "{}", call.tool_call_id);
        assert!(
            !seen.last().unwrap().controls.is_empty(),
            "the controls last"
        );
    }
}
