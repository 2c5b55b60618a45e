//! Slack's limits are never silent (issue 38): the largest question has a defined rendering,
//! tested at each limit and one past it, through the fake Slack (which refuses what Slack
//! refuses) and read as a person sees it (`FakeSlack::person_view`, `seen_views`).
//!
//! - a choice in the modal: ≤ 100 options a select; 101 every option listed, numbered, and the
//!   number typed in a text field;
//! - option labels and descriptions: ≤ 75 characters in the control; 76 the control shows it cut
//!   and numbered, and the options are written out in full above it (message and modal);
//! - button texts: the same at 75 / 76;
//! - the modal's 100 blocks: a set needing 100 opens its modal; 101 shows how to answer by
//!   typed replies instead of "Answer…" (and a click on an older card's button tells so);
//! - a modal's title is FrogBot's own ("Answer", within 24), whatever the questions.

use frogbot_model::{
    ChannelQuestions, Interaction, ParseArgs, ParseResult, QuestionCall, QuestionInput,
    QuestionMessage, QuestionRecord, RenderArgs, RequestContext, Thread,
};
use frogbot_slack::channel::Connector;
use frogbot_slack::convert::interaction_from_payload;
use frogbot_slack::render::{MAX_MODAL_BLOCKS, TOO_LARGE_FOR_A_FORM, modal_block_count};
use frogbot_slack::testing::{BOT_USER, FakeSlack, limits, transcript};
use frogbot_slack::{SlackQuestions, SlackWebApi};
use serde_json::{Value, json};

const THREAD: &str = "C42:1700000000.000100";

type Questions = SlackQuestions<SlackWebApi<Connector>>;

fn thread() -> Thread {
    Thread {
        id: THREAD.into(),
        platform: "slack".into(),
        chat_id: "chat-1".into(),
    }
}

fn call_of(input: Value) -> QuestionCall {
    let input: QuestionInput = serde_json::from_value(input).unwrap();
    input.validate().unwrap();
    QuestionCall {
        tool_call_id: "call-l".into(),
        input,
        expires_at: None,
    }
}

async fn start() -> (FakeSlack, Questions) {
    let fake = FakeSlack::start().await;
    let q = fake.questions();
    (fake, q)
}

async fn render(q: &Questions, call: &QuestionCall) -> QuestionRecord {
    let out = q
        .render(RenderArgs {
            calls: std::slice::from_ref(call),
            req: &RequestContext::default(),
            thread: &thread(),
        })
        .await
        .unwrap();
    QuestionRecord {
        messages: vec![QuestionMessage {
            id: out[0].messages[0].id.clone(),
            posted_at: out[0].messages[0].posted_at.clone(),
            question: None,
        }],
        revision: 0,
        state: None,
    }
}

/// The card as a person sees it (its transcript).
fn seen_card(fake: &FakeSlack) -> String {
    transcript(&fake.person_view(THREAD))
}

/// Clicks "Answer…" and opens the modal as the receiving layer does; its id.
async fn open_modal(
    fake: &FakeSlack,
    q: &Questions,
    call: &QuestionCall,
    rec: &QuestionRecord,
) -> String {
    let id = &rec.current().unwrap().id;
    let payload = fake
        .click("U123", id, "Answer…")
        .expect("an Answer… button");
    let Interaction::Action { event } = interaction_from_payload(&payload).unwrap().unwrap() else {
        panic!("a click")
    };
    q.open_other(&thread(), call, rec, event.trigger_id.as_deref().unwrap())
        .await
        .unwrap();
    fake.views().pop().expect("a modal")["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn submit(
    fake: &FakeSlack,
    q: &Questions,
    call: &QuestionCall,
    rec: &QuestionRecord,
    view: &str,
    fill: &[(&str, Value)],
) -> ParseResult {
    let payload = fake
        .submit_view("U123", view, fill)
        .expect("Slack sends it");
    let i = interaction_from_payload(&payload).unwrap().unwrap();
    q.parse(ParseArgs {
        call,
        interaction: &i,
        question: rec,
        settled: false,
    })
}

fn answered(call: &QuestionCall, selected: &[&[&str]]) -> ParseResult {
    ParseResult::Answer {
        output: frogbot_model::QuestionOutput {
            answers: call
                .input
                .questions
                .iter()
                .zip(selected)
                .map(|(q, s)| frogbot_model::QuestionAnswer {
                    header: q.header.clone(),
                    selected: s.iter().map(|x| x.to_string()).collect(),
                })
                .collect(),
        },
    }
}

fn options(n: usize) -> Vec<Value> {
    (1..=n).map(|i| json!({"label": format!("o{i}")})).collect()
}

/// A set holding a text input (so its card is a form card and the choice is answered in the
/// modal) and a choice of `n` options.
fn form_with_choice(n: usize, multiple: bool) -> Value {
    json!({"questions": [
        {"header": "Why", "question": "Reason?", "kind": "text_input", "required": false},
        {"header": "Pick", "question": "Which?", "multiple": multiple, "options": options(n)}
    ]})
}

#[tokio::test]
async fn a_modal_choice_is_a_select_up_to_100_options_then_a_numbered_list_answered_by_number() {
    for (n, multiple) in [(100, false), (101, false), (100, true), (101, true)] {
        let (fake, q) = start().await;
        let call = call_of(form_with_choice(n, multiple));
        let rec = render(&q, &call).await;
        let view_id = open_modal(&fake, &q, &call, &rec).await;
        let view = fake.views().pop().unwrap();
        let seen = fake.seen_views().pop().unwrap();
        let pick = "fb1:m:1:pick";
        if n <= limits::SELECT_OPTIONS {
            // One select holding every option.
            let select = view["blocks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["block_id"] == "q1")
                .unwrap();
            assert_eq!(
                select["element"]["options"].as_array().unwrap().len(),
                n,
                "{n}"
            );
            let picked = if multiple {
                json!(["0", "99"])
            } else {
                json!("99")
            };
            let want: &[&str] = if multiple { &["o1", "o100"] } else { &["o100"] };
            assert_eq!(
                submit(&fake, &q, &call, &rec, &view_id, &[(pick, picked)]),
                answered(&call, &[&[], want]),
                "{n}"
            );
        } else {
            // Every option listed, numbered, and a text field for the number(s).
            for i in 1..=n {
                assert!(
                    seen.contains(&format!("{i}. o{i}\n")) || seen.contains(&format!("{i}. o{i}")),
                    "{n}: option {i} in {seen}"
                );
            }
            assert!(!seen.contains("select"), "{seen}");
            assert!(seen.contains("> text field \"e.g."), "{seen}");
            let (typed, want): (&str, &[&str]) = if multiple {
                ("2, 101", &["o2", "o101"])
            } else {
                ("101", &["o101"])
            };
            assert_eq!(
                submit(&fake, &q, &call, &rec, &view_id, &[(pick, json!(typed))]),
                answered(&call, &[&[], want]),
                "{n}"
            );
            // A number off the list is answered under its field; the modal keeps what was typed.
            let payload = fake
                .submit_view("U123", &view_id, &[(pick, json!("102"))])
                .unwrap();
            let Some(Interaction::ModalSubmit { event }) =
                interaction_from_payload(&payload).unwrap()
            else {
                panic!("a submission")
            };
            let values = event.values;
            let (block, reason) = frogbot_slack::questions::modal_field_error(&call.input, &values)
                .expect("an error");
            assert_eq!(block, "q1");
            assert!(
                reason.contains("\"102\" is no number from the list (1 to 101)"),
                "{reason}"
            );
        }
        assert!(fake.violations().is_empty(), "{n}: {:?}", fake.violations());
    }
}

#[tokio::test]
async fn option_texts_past_75_characters_are_written_out_in_full_and_numbered() {
    for len in [75, 76] {
        let label = "l".repeat(len - 1) + "L";
        let description = "d".repeat(len - 1) + "D";
        // Buttons (≤ 5 options), a select (6 options), checkboxes (multiple) and the modal.
        for (count, multiple) in [(2, false), (6, false), (3, true)] {
            let (fake, q) = start().await;
            let mut opts = options(count);
            opts[0] = json!({"label": label, "description": description});
            let call = call_of(
                json!({"questions": [{"header": "Pick", "question": "Which?",
                "multiple": multiple, "options": opts}]}),
            );
            render(&q, &call).await;
            let seen = seen_card(&fake);
            assert!(fake.violations().is_empty(), "{:?}", fake.violations());
            if len <= limits::OPTION_TEXT {
                if count > 2 || multiple {
                    // The select / checkbox shows it whole, its description too; no list.
                    assert!(seen.contains(&format!("{label} — {description}")), "{seen}");
                    assert!(!seen.contains("1. l"), "{len}: {seen}");
                } else {
                    // The button shows the label whole; a button has no description, so the
                    // options are listed with theirs.
                    assert!(seen.contains(&format!("[{label}]")), "{len}: {seen}");
                    assert!(
                        seen.contains(&format!("1. {label} — {description}")),
                        "{seen}"
                    );
                }
            } else {
                // Written out in full, numbered, and the control shows it cut with its number.
                assert!(
                    seen.contains(&format!("1. {label} — {description}")),
                    "{len}: {seen}"
                );
                let cut = format!("1. {}…", &label[..limits::OPTION_TEXT - 4]);
                assert!(seen.contains(&cut), "{len}: {cut} in {seen}");
            }
        }
        // In the modal (a set with a text input).
        let (fake, q) = start().await;
        let mut opts = options(3);
        opts[0] = json!({"label": label, "description": description});
        let call = call_of(json!({"questions": [
            {"header": "Why", "question": "Reason?", "kind": "text_input"},
            {"header": "Pick", "question": "Which?", "options": opts}]}));
        let rec = render(&q, &call).await;
        open_modal(&fake, &q, &call, &rec).await;
        let seen = fake.seen_views().pop().unwrap();
        assert!(fake.violations().is_empty(), "{:?}", fake.violations());
        if len <= limits::OPTION_TEXT {
            assert!(
                seen.contains(&format!("○ {label} — {description}")),
                "{seen}"
            );
        } else {
            assert!(
                seen.contains(&format!("1. {label} — {description}")),
                "{seen}"
            );
            assert!(
                seen.contains(&format!("○ 1. {}…", &label[..limits::OPTION_TEXT - 4])),
                "{seen}"
            );
        }
        // The modal's title is FrogBot's own, within Slack's 24 characters.
        assert!(seen.starts_with("modal \"Answer\""), "{seen}");
    }
}

#[tokio::test]
async fn a_set_needing_more_than_100_modal_blocks_is_answered_by_typed_replies() {
    for n in [MAX_MODAL_BLOCKS, MAX_MODAL_BLOCKS + 1] {
        let (fake, q) = start().await;
        let questions: Vec<Value> = (1..=n)
            .map(|i| json!({"header": format!("H{i}"), "question": format!("q{i}?"), "kind": "text_input"}))
            .collect();
        let call = call_of(json!({"questions": questions}));
        assert_eq!(modal_block_count(&call.input), n);
        let rec = render(&q, &call).await;
        let seen = seen_card(&fake);
        assert!(fake.violations().is_empty(), "{n}: {:?}", fake.violations());
        let id = rec.current().unwrap().id.clone();
        if n <= MAX_MODAL_BLOCKS {
            assert!(fake.element(&id, "Answer…").is_some(), "{n}");
            open_modal(&fake, &q, &call, &rec).await;
            assert!(fake.violations().is_empty(), "{:?}", fake.violations());
        } else {
            // No "Answer…" that would open nothing: the card says how to answer, every
            // question numbered for it.
            assert!(fake.element(&id, "Answer…").is_none(), "{n}");
            assert!(fake.element(&id, "Skip").is_some(), "{n}");
            assert!(seen.contains(TOO_LARGE_FOR_A_FORM), "{seen}");
            assert!(seen.contains(&format!("{n}. *H{n}* q{n}?")), "{seen}");
            // A typed reply answers its question by number.
            let (channel, root) = THREAD.split_once(':').unwrap();
            let m = fake.user_message(channel, Some(root), "U123", &format!("{n}: because"));
            let body = fake.event_callback(fake.message_event(&m, "channel"));
            let incoming = frogbot_slack::convert::message_from_push_json(&body, BOT_USER)
                .unwrap()
                .unwrap();
            let reply = Interaction::Message {
                message: incoming.message,
            };
            let out = q.parse(ParseArgs {
                call: &call,
                interaction: &reply,
                question: &rec,
                settled: false,
            });
            assert!(matches!(out, ParseResult::Partial { .. }), "{out:?}");
        }
    }
}

#[tokio::test]
async fn a_set_past_a_messages_blocks_is_a_summary_whose_modal_holds_every_question() {
    // 12 choices: 24 blocks and Skip, FrogBot's 25 (Slack allows 50); 13: the compact card.
    for n in [12, 13] {
        let (fake, q) = start().await;
        let questions: Vec<Value> = (1..=n)
            .map(|i| {
                json!({"header": format!("H{i}"), "question": format!("q{i}?"),
                       "options": [{"label": format!("a{i}")}, {"label": format!("b{i}")}]})
            })
            .collect();
        let call = call_of(json!({"questions": questions}));
        let rec = render(&q, &call).await;
        let id = rec.current().unwrap().id.clone();
        let blocks = fake.message(&id).unwrap().blocks.as_array().unwrap().len();
        assert!(blocks <= 25, "{n}: {blocks} blocks");
        assert!(fake.violations().is_empty(), "{:?}", fake.violations());
        let seen = seen_card(&fake);
        if n == 12 {
            assert_eq!(blocks, 25);
            for i in 1..=n {
                assert!(seen.contains(&format!("[a{i}] [b{i}]")), "{i}: {seen}");
            }
        } else {
            // Every question in the summary; the modal holds every one with its options.
            for i in 1..=n {
                assert!(seen.contains(&format!("{i}. *H{i}* q{i}?")), "{i}: {seen}");
            }
            open_modal(&fake, &q, &call, &rec).await;
            let modal = fake.seen_views().pop().unwrap();
            for i in 1..=n {
                assert!(
                    modal.contains(&format!("radio: ○ a{i} | ○ b{i}")),
                    "{i}: {modal}"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_listed_choice_says_how_to_answer_it_by_number() {
    // Alone: the number; in a set of several: the question's number first.
    for several in [false, true] {
        let (fake, q) = start().await;
        let mut questions =
            vec![json!({"header": "Pick", "question": "Which?", "options": options(101)})];
        if several {
            questions.insert(
                0,
                json!({"header": "Colour", "question": "Which?",
                "options": [{"label": "red"}, {"label": "green"}]}),
            );
        }
        render(&q, &call_of(json!({"questions": questions}))).await;
        let seen = seen_card(&fake);
        if several {
            assert!(
                seen.contains("Reply in this thread with the number of your choice, starting with the question's number: \"2: …\"."),
                "{seen}"
            );
        } else {
            assert!(
                seen.contains("Reply in this thread with the number of your choice.\n"),
                "{seen}"
            );
        }
    }
}
