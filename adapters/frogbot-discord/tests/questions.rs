//! `DiscordQuestions` against the fake Discord (`frogbot_discord::testing`), with serenity's real
//! `Http` pointed at it through its proxy setting (which needs the rate limiter disabled).

use frogbot_core::model::{
    ActionEvent, ChannelQuestions, HookArgs, Interaction, ParseArgs, ParseResult, PlatformUser,
    QuestionAnswer, QuestionCall, QuestionOutcome, QuestionOutput, QuestionRecord, RenderArgs,
    RequestContext, Thread,
};
use frogbot_discord::DiscordQuestions;
use frogbot_discord::testing::{self, FakeDiscord};
use serde_json::{Value, json};
use serenity::model::id::InteractionId;

const APP_ID: u64 = 600000000000000006;
const BOT_ID: u64 = 610000000000000006;
const THREAD: &str = "700000000000000007";

async fn start() -> (FakeDiscord, DiscordQuestions) {
    let fake = FakeDiscord::start(APP_ID, BOT_ID).await;
    let piece = DiscordQuestions::new(fake.http());
    (fake, piece)
}

/// The calls as (method, path, body).
fn calls_of(fake: &FakeDiscord) -> Vec<(String, String, Value)> {
    fake.calls()
        .into_iter()
        .map(|c| (c.method, c.path, c.body))
        .collect()
}

/// Posts a bot message in the thread (so it can be edited); returns its id.
async fn posted(piece: &DiscordQuestions, call: &QuestionCall, step: usize) -> String {
    piece
        .post_question(&thread(), call, 0, step)
        .await
        .unwrap()
        .id
}

/// Registers an interaction with `token` by `user` at the fake (as a gateway delivery would).
fn issue(fake: &FakeDiscord, id: u64, token: &str) {
    fake.register_interaction(
        &testing::component_interaction(
            id,
            APP_ID,
            THREAD.parse().unwrap(),
            910000000000000001,
            &testing::user(300000000000000003, "bob", false),
            "fq:0:0:0",
            None,
            token,
        ),
        false,
    );
}

fn thread() -> Thread {
    Thread {
        id: THREAD.into(),
        platform: "discord".into(),
        chat_id: "chat-1".into(),
    }
}

fn call() -> QuestionCall {
    serde_json::from_value(json!({
        "toolCallId": "call-1",
        "input": {"questions": [
            {"header": "Colour", "question": "Which colour?", "options": [{"label": "red"}, {"label": "green"}]},
            {"header": "Size", "question": "Which size?", "options": [{"label": "S"}, {"label": "M"}, {"label": "L"}], "multiple": true, "custom": true}
        ]}
    }))
    .unwrap()
}

fn click(action_id: &str, message_id: &str, values: &[&str]) -> Interaction {
    Interaction::Action {
        event: ActionEvent {
            action_id: action_id.into(),
            value: values.first().map(|v| v.to_string()),
            message_id: message_id.into(),
            user: PlatformUser {
                id: "300000000000000003".into(),
                name: None,
                is_bot: false,
            },
            trigger_id: Some("tok-click".into()),
            raw: json!({"data": {"custom_id": action_id, "values": values}}),
        },
    }
}

#[tokio::test]
async fn render_posts_components_and_steps_through_the_set() {
    let (fake, piece) = start().await;
    let call = call();
    let req = RequestContext::default();
    let thread = thread();
    let rendered = piece
        .render(RenderArgs {
            calls: std::slice::from_ref(&call),
            req: &req,
            thread: &thread,
        })
        .await
        .unwrap();
    assert_eq!(rendered.len(), 1);
    assert_eq!(rendered[0].calls, vec!["call-1"]);
    let first = &rendered[0].messages[0];
    assert_eq!(first.id, "900000000000000000");
    assert_eq!(first.question, Some(0));
    assert!(first.posted_at.starts_with("2026-01-01T00:00:00"));

    let calls = calls_of(&fake);
    assert_eq!(calls.len(), 1);
    let (method, path, body) = &calls[0];
    assert_eq!(method, "POST");
    assert_eq!(path, &format!("/api/v10/channels/{THREAD}/messages"));
    assert_eq!(body["content"], "**Colour** (1/2)\nWhich colour?");
    let buttons = body["components"][0]["components"].as_array().unwrap();
    assert_eq!(buttons.len(), 3, "red, green, Skip");
    assert_eq!(buttons[1]["custom_id"], "fq:0:0:1");
    assert_eq!(buttons[1]["label"], "green");
    assert_eq!(buttons[2]["custom_id"], "fq:0:0:k");
    assert_eq!(buttons[2]["label"], "Skip");

    // A click on "green" advances the set.
    let mut record = QuestionRecord {
        messages: rendered[0].messages.clone(),
        revision: 0,
        state: rendered[0].state.clone(),
    };
    let clicked = click("fq:0:0:1", &first.id, &[]);
    let result = piece.parse(ParseArgs {
        call: &call,
        interaction: &clicked,
        question: &record,
        settled: false,
    });
    let ParseResult::Partial { state } = result else {
        panic!("expected partial, got {result:?}")
    };
    record.revision = 1;
    record.state = state;
    let change = piece
        .updated(
            HookArgs {
                call: &call,
                question: &record,
                req: &req,
                thread: &thread,
            },
            Some(&clicked),
        )
        .await
        .unwrap()
        .unwrap();
    let messages = change.messages.unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1].question, Some(1));
    let (_, _, body) = calls_of(&fake).pop().unwrap();
    let select = &body["components"][0]["components"][0];
    assert_eq!(select["custom_id"], "fq:1:1:s0");
    assert_eq!(select["max_values"], 3);
    assert_eq!(
        body["components"][1]["components"][0]["custom_id"],
        "fq:1:1:o"
    );
    assert_eq!(
        body["components"][1]["components"][1]["custom_id"],
        "fq:1:1:k"
    );
    record.messages = messages;

    // The old button is stale now; the select answers the set.
    let old = piece.parse(ParseArgs {
        call: &call,
        interaction: &clicked,
        question: &record,
        settled: false,
    });
    assert_eq!(old, ParseResult::Stale);
    let select = click("fq:1:1:s0", &record.messages[1].id, &["0", "2"]);
    let result = piece.parse(ParseArgs {
        call: &call,
        interaction: &select,
        question: &record,
        settled: false,
    });
    assert_eq!(
        result,
        ParseResult::Answer {
            output: QuestionOutput {
                answers: vec![
                    QuestionAnswer {
                        header: "Colour".into(),
                        selected: vec!["green".into()]
                    },
                    QuestionAnswer {
                        header: "Size".into(),
                        selected: vec!["S".into(), "L".into()]
                    },
                ]
            }
        }
    );
    // "Other…" is the receiver's side effect: parse ignores it.
    let other = click("fq:1:1:o", &record.messages[1].id, &[]);
    let result = piece.parse(ParseArgs {
        call: &call,
        interaction: &other,
        question: &record,
        settled: false,
    });
    assert_eq!(result, ParseResult::Ignore);
}

#[tokio::test]
async fn settled_edits_every_message_and_removes_components() {
    let (fake, piece) = start().await;
    let call = call();
    let req = RequestContext::default();
    let thread = thread();
    let (m0, m1) = (
        posted(&piece, &call, 0).await,
        posted(&piece, &call, 1).await,
    );
    let from = fake.calls().len();
    // An older state (`{step, picks}`) still reads.
    let record: QuestionRecord = serde_json::from_value(json!({
        "messages": [
            {"id": m0, "postedAt": "", "question": 0},
            {"id": m1, "postedAt": "", "question": 1}
        ],
        "revision": 1,
        "state": {"step": 1, "picks": [["red"]]}
    }))
    .unwrap();
    let outcome = QuestionOutcome::Answered(QuestionOutput {
        answers: vec![
            QuestionAnswer {
                header: "Colour".into(),
                selected: vec!["red".into()],
            },
            QuestionAnswer {
                header: "Size".into(),
                selected: vec!["M".into()],
            },
        ],
    });
    let change = piece
        .settled(
            HookArgs {
                call: &call,
                question: &record,
                req: &req,
                thread: &thread,
            },
            outcome.by(None),
        )
        .await
        .unwrap();
    assert_eq!(change, None);
    let calls: Vec<_> = calls_of(&fake).into_iter().skip(from).collect();
    assert_eq!(calls.len(), 2);
    for ((method, path, body), (id, answer)) in
        calls.iter().zip([(m0.as_str(), "red"), (m1.as_str(), "M")])
    {
        assert_eq!(method, "PATCH");
        assert_eq!(path, &format!("/api/v10/channels/{THREAD}/messages/{id}"));
        assert_eq!(body["components"], json!([]));
        assert!(
            body["content"]
                .as_str()
                .unwrap()
                .ends_with(&format!("✅ Answered: {answer}")),
            "{body}"
        );
    }
}

#[tokio::test]
async fn stale_and_denied_send_ephemeral_followups() {
    let (fake, piece) = start().await;
    let call = call();
    let req = RequestContext::default();
    let thread = thread();
    let record: QuestionRecord = serde_json::from_value(json!({
        "messages": [{"id": "910000000000000001", "postedAt": ""}],
        "revision": 0
    }))
    .unwrap();
    let args = HookArgs {
        call: &call,
        question: &record,
        req: &req,
        thread: &thread,
    };
    issue(&fake, 500000000000000001, "tok-click");
    let clicked = click("fq:0:0:0", "910000000000000001", &[]);
    piece.stale(args, &clicked).await.unwrap();
    piece.denied(args, &clicked).await.unwrap();
    piece
        .rejected(args, &clicked, "Not that one.")
        .await
        .unwrap();
    let calls = calls_of(&fake);
    assert_eq!(calls.len(), 3);
    for ((method, path, body), text) in calls.iter().zip([
        frogbot_discord::questions::STALE_TEXT,
        frogbot_discord::questions::DENIED_TEXT,
        "Not that one.",
    ]) {
        assert_eq!(method, "POST");
        assert_eq!(path, &format!("/api/v10/webhooks/{APP_ID}/tok-click"));
        assert_eq!(body["content"], text);
        assert_eq!(body["flags"], 64, "ephemeral");
    }
}

#[tokio::test]
async fn deferred_ack_and_other_modal_use_the_callback() {
    let (fake, piece) = start().await;
    issue(&fake, 500000000000000005, "tok-ack");
    frogbot_discord::acknowledge(
        piece.api().as_ref(),
        InteractionId::new(500000000000000005),
        "tok-ack",
    )
    .await
    .unwrap();
    let calls = calls_of(&fake);
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0].1,
        "/api/v10/interactions/500000000000000005/tok-ack/callback"
    );
    assert_eq!(calls[0].2["type"], 6, "DEFERRED_UPDATE_MESSAGE");

    // "Other…": open the modal as the first response, its custom id the form locator.
    let payload = json!({
        "id": "500000000000000006",
        "application_id": APP_ID.to_string(),
        "type": 3,
        "data": {"custom_id": "fq:1:1:o", "component_type": 2},
        "channel_id": THREAD,
        "user": {"id": "300000000000000003", "username": "bob", "discriminator": "0", "avatar": null},
        "token": "tok-other",
        "version": 1,
        "message": testing::message(910000000000000002, THREAD.parse().unwrap(), None, &testing::user(APP_ID, "frogbot", true), "", &[]),
        "locale": "en-US",
        "entitlements": [],
        "attachment_size_limit": 26214400
    });
    fake.register_interaction(&payload, false);
    let interaction: serenity::model::application::ComponentInteraction =
        serde_json::from_value(payload).unwrap();
    assert!(frogbot_discord::questions::is_other(
        &interaction.data.custom_id
    ));
    piece.open_other(&interaction, &call()).await.unwrap();
    let (_, path, body) = calls_of(&fake).pop().unwrap();
    assert_eq!(
        path,
        "/api/v10/interactions/500000000000000006/tok-other/callback"
    );
    assert_eq!(body["type"], 9);
    assert_eq!(
        body["data"]["custom_id"],
        format!("fq1:[\"{THREAD}\",\"910000000000000002\"]")
    );
    assert_eq!(
        body["data"]["components"][0]["components"][0]["custom_id"],
        "fq:1:1:t"
    );
}

#[tokio::test]
async fn settled_tries_every_message_even_when_one_edit_fails() {
    let (fake, piece) = start().await;
    let call = call();
    let req = RequestContext::default();
    let thread = thread();
    // The first message is unknown to Discord (deleted): its edit fails with a 404.
    let m1 = posted(&piece, &call, 1).await;
    let from = fake.calls().len();
    let record: QuestionRecord = serde_json::from_value(json!({
        "messages": [
            {"id": "404", "postedAt": "", "question": 0},
            {"id": m1, "postedAt": "", "question": 1}
        ],
        "revision": 1
    }))
    .unwrap();
    let args = HookArgs {
        call: &call,
        question: &record,
        req: &req,
        thread: &thread,
    };
    let result = piece
        .settled(args, QuestionOutcome::Dismissed.by(None))
        .await;
    assert!(result.is_err());
    let calls: Vec<_> = calls_of(&fake).into_iter().skip(from).collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[0].1,
        format!("/api/v10/channels/{THREAD}/messages/404")
    );
    assert_eq!(fake.calls()[from].status, 404);
    assert_eq!(
        calls[1].1,
        format!("/api/v10/channels/{THREAD}/messages/{m1}")
    );
    assert_eq!(calls[1].2["components"], json!([]));
}

#[tokio::test]
async fn a_thread_message_is_answered_with_a_reply() {
    let (fake, piece) = start().await;
    let call = call();
    let req = RequestContext::default();
    let thread = thread();
    let record = QuestionRecord {
        messages: vec![],
        revision: 0,
        state: None,
    };
    let args = HookArgs {
        call: &call,
        question: &record,
        req: &req,
        thread: &thread,
    };
    let reply: Interaction = serde_json::from_value(json!({
        "type": "message",
        "message": {"id": "920000000000000001", "text": "maybe", "author": {"id": "3"}, "metadata": {"dateSent": "2026-01-01T00:00:00Z"}}
    }))
    .unwrap();
    piece
        .rejected(args, &reply, "Pick a button.")
        .await
        .unwrap();
    let (method, path, body) = calls_of(&fake).pop().unwrap();
    assert_eq!(method, "POST");
    assert_eq!(path, format!("/api/v10/channels/{THREAD}/messages"));
    assert_eq!(body["content"], "Pick a button.");
    assert_eq!(
        body["message_reference"]["message_id"],
        "920000000000000001"
    );
}

#[tokio::test]
async fn the_fake_refuses_what_discord_refuses() {
    use frogbot_discord::DiscordApi;
    use serenity::builder::{
        CreateActionRow, CreateButton, CreateInteractionResponseFollowup, CreateMessage,
        CreateSelectMenu, CreateSelectMenuKind, CreateSelectMenuOption,
    };
    use serenity::model::id::ChannelId;
    let (fake, piece) = start().await;
    let api: &dyn DiscordApi = piece.api().as_ref();
    let channel = ChannelId::new(THREAD.parse().unwrap());
    let status = |fake: &FakeDiscord| fake.calls().last().unwrap().status;
    let buttons = |n: usize, prefix: &str| {
        CreateActionRow::Buttons(
            (0..n)
                .map(|i| CreateButton::new(format!("{prefix}{i}")).label("b"))
                .collect(),
        )
    };
    // Content over 2,000 characters.
    let long = CreateMessage::new().content("x".repeat(2001));
    assert!(api.send_message(channel, &long).await.is_err());
    assert_eq!(status(&fake), 400);
    // Six action rows; six buttons in a row; a button label over 80; a custom id over 100.
    let rows = CreateMessage::new()
        .content("q")
        .components((0..6).map(|r| buttons(1, &format!("r{r}-"))).collect());
    assert!(api.send_message(channel, &rows).await.is_err());
    let wide = CreateMessage::new()
        .content("q")
        .components(vec![buttons(6, "w")]);
    assert!(api.send_message(channel, &wide).await.is_err());
    let label = CreateMessage::new()
        .content("q")
        .components(vec![CreateActionRow::Buttons(vec![
            CreateButton::new("l").label("x".repeat(81)),
        ])]);
    assert!(api.send_message(channel, &label).await.is_err());
    let id = CreateMessage::new()
        .content("q")
        .components(vec![CreateActionRow::Buttons(vec![
            CreateButton::new("i".repeat(101)).label("b"),
        ])]);
    assert!(api.send_message(channel, &id).await.is_err());
    // A select of 26 options.
    let options = (0..26)
        .map(|i| CreateSelectMenuOption::new(format!("o{i}"), i.to_string()))
        .collect();
    let select = CreateMessage::new()
        .content("q")
        .components(vec![CreateActionRow::SelectMenu(CreateSelectMenu::new(
            "s",
            CreateSelectMenuKind::String { options },
        ))]);
    assert!(api.send_message(channel, &select).await.is_err());
    assert_eq!(status(&fake), 400);
    // Within the limits: accepted and kept, components numbered as Discord numbers them.
    let fine = CreateMessage::new()
        .content("q")
        .components(vec![buttons(5, "ok")]);
    let posted = api.send_message(channel, &fine).await.unwrap();
    let kept = fake.message(&posted.id.to_string()).unwrap();
    assert_eq!(kept["components"][0]["components"][4]["custom_id"], "ok4");
    assert!(kept["components"][0]["id"].is_u64());
    // A followup with a token Discord never issued; a second response to one interaction.
    let followup = CreateInteractionResponseFollowup::new().content("hi");
    assert!(
        api.create_followup("never-issued", &followup)
            .await
            .is_err()
    );
    assert_eq!(status(&fake), 404);
    issue(&fake, 500000000000000042, "tok-twice");
    let ack =
        || frogbot_discord::acknowledge(api, InteractionId::new(500000000000000042), "tok-twice");
    ack().await.unwrap();
    assert!(ack().await.is_err(), "one response per interaction");
    assert_eq!(fake.calls().last().unwrap().response["code"], 40060);
}

// ---- issue 38: no silent limits ----------------------------------------------------------------

/// A one-question call of `n` options labelled `o1`…`on`.
fn choice_call(n: usize, multiple: bool, label: impl Fn(usize) -> String) -> QuestionCall {
    serde_json::from_value(json!({
        "toolCallId": "call-big",
        "input": {"questions": [{
            "header": "Pick", "question": "Which?", "multiple": multiple,
            "options": (1..=n).map(|i| json!({"label": label(i)})).collect::<Vec<_>>()
        }]}
    }))
    .unwrap()
}

/// Posts step 0 of `call` on the fake: the message bodies posted, in order (the question message
/// last) and its id.
async fn post_all(
    fake: &FakeDiscord,
    piece: &DiscordQuestions,
    call: &QuestionCall,
) -> (Vec<Value>, String) {
    let before = fake.calls().len();
    let id = posted(piece, call, 0).await;
    let bodies = calls_of(fake)[before..]
        .iter()
        .filter(|(m, p, _)| m == "POST" && p.ends_with("/messages"))
        .map(|(_, _, b)| b.clone())
        .collect();
    (bodies, id)
}

/// The select options a message body shows: (select custom_id, option value, label).
fn select_options(body: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for row in body["components"].as_array().into_iter().flatten() {
        for c in row["components"].as_array().into_iter().flatten() {
            for o in c["options"].as_array().into_iter().flatten() {
                out.push((
                    c["custom_id"].as_str().unwrap().to_owned(),
                    o["value"].as_str().unwrap().to_owned(),
                    o["label"].as_str().unwrap().to_owned(),
                ));
            }
        }
    }
    out
}

fn reply_to(id: &str, text: &str) -> Interaction {
    serde_json::from_value(json!({
        "type": "message",
        "message": {"id": id, "text": text, "author": {"id": "3"},
                    "metadata": {"dateSent": "2026-01-01T00:00:00Z"}}
    }))
    .unwrap()
}

fn parse_one(
    piece: &DiscordQuestions,
    call: &QuestionCall,
    message: &str,
    i: &Interaction,
) -> ParseResult {
    let record = QuestionRecord {
        messages: vec![frogbot_core::model::QuestionMessage {
            id: message.into(),
            posted_at: "2026-01-01T00:00:00Z".into(),
            question: Some(0),
        }],
        revision: 0,
        state: None,
    };
    piece.parse(ParseArgs {
        call,
        interaction: i,
        question: &record,
        settled: false,
    })
}

fn answered(labels: &[&str]) -> ParseResult {
    ParseResult::Answer {
        output: QuestionOutput {
            answers: vec![QuestionAnswer {
                header: "Pick".into(),
                selected: labels.iter().map(|s| s.to_string()).collect(),
            }],
        },
    }
}

/// At each select limit and one past it, every option can be chosen: up to the limit in the
/// selects (25 for `multiple`, 100 for a single choice), past it by reply from a numbered list
/// that names every option — never some options silently missing.
#[tokio::test]
async fn every_option_can_be_chosen_at_the_select_limits_and_past_them() {
    let (fake, piece) = start().await;
    let o = |i: usize| format!("o{i}");
    let later = "999999999999999999";
    for (n, multiple) in [
        (25, true),
        (26, true),
        (30, true),
        (100, false),
        (101, false),
    ] {
        let call = choice_call(n, multiple, o);
        let (bodies, id) = post_all(&fake, &piece, &call).await;
        let question = bodies.last().unwrap();
        let shown = select_options(question);
        let listed = !(n <= 25 || (!multiple && n <= 100));
        if listed {
            assert!(shown.is_empty(), "{n}: no select showing only some options");
            let text: String = bodies
                .iter()
                .map(|b| b["content"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
                .join("\n");
            for i in 1..=n {
                assert!(
                    text.contains(&format!("\n{i}. o{i}")),
                    "{n}: option {i} listed"
                );
            }
            assert!(
                text.contains("Reply in this thread with the number"),
                "{text}"
            );
            let picks = if multiple {
                format!("1, {n}")
            } else {
                n.to_string()
            };
            let want: Vec<String> = if multiple {
                vec![o(1), o(n)]
            } else {
                vec![o(n)]
            };
            let want: Vec<&str> = want.iter().map(String::as_str).collect();
            assert_eq!(
                parse_one(&piece, &call, &id, &reply_to(later, &picks)),
                answered(&want),
                "{n}: answered by reply"
            );
        } else {
            assert_eq!(shown.len(), n, "{n}: every option in the selects");
            for (select, value, label) in [shown.first().unwrap(), shown.last().unwrap()] {
                assert_eq!(
                    parse_one(&piece, &call, &id, &click(select, &id, &[value])),
                    answered(&[label]),
                    "{n}: {label} chosen in its select"
                );
            }
        }
    }
}

/// A label at a button's limit (80) shows whole; one longer is cut on the button, written out in
/// full in the message, and a click answers the full label.
#[tokio::test]
async fn a_label_past_the_button_limit_is_written_out_and_answers_in_full() {
    let (fake, piece) = start().await;
    for len in [80, 81] {
        let long = |i: usize| format!("{i}{}", "x".repeat(len - 1));
        let call = choice_call(2, false, long);
        let (bodies, id) = post_all(&fake, &piece, &call).await;
        let question = bodies.last().unwrap();
        let button = &question["components"][0]["components"][0];
        let label = button["label"].as_str().unwrap();
        let content = question["content"].as_str().unwrap();
        if len == 80 {
            assert_eq!(label, long(1));
        } else {
            assert!(
                label.chars().count() <= 80 && label.ends_with('…'),
                "{label}"
            );
            assert!(content.contains(&long(1)), "written out: {content}");
        }
        let custom_id = button["custom_id"].as_str().unwrap();
        assert_eq!(
            parse_one(&piece, &call, &id, &click(custom_id, &id, &[])),
            answered(&[&long(1)])
        );
    }
}

/// A step too long for one message (many long options) is not cut: its beginning is posted
/// before the question message, each within 2,000 characters, and every option is there.
#[tokio::test]
async fn a_list_longer_than_a_message_continues_in_messages_before_it() {
    let (fake, piece) = start().await;
    let long = |i: usize| format!("option {i} {}", "y".repeat(60));
    let call = choice_call(40, true, long);
    let (bodies, id) = post_all(&fake, &piece, &call).await;
    assert!(bodies.len() > 1, "several messages");
    let texts: Vec<&str> = bodies
        .iter()
        .map(|b| b["content"].as_str().unwrap())
        .collect();
    assert!(texts.iter().all(|t| t.chars().count() <= 2000));
    let all = texts.join("\n");
    for i in 1..=40 {
        assert!(all.contains(&long(i)), "option {i} shown");
    }
    assert!(
        bodies.last().unwrap()["components"].is_array(),
        "controls on the last"
    );
    assert_eq!(
        parse_one(&piece, &call, &id, &reply_to("999999999999999999", "40")),
        answered(&[&long(40)])
    );
}
