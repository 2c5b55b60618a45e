//! One question drawn by each adapter, one click on its second option read back into FrogBot's
//! shared control vocabulary, and the outcome it settles: what a user's app does with the
//! adapters from crates.io (`engine` off), all pure. Prints one line per platform.

use frogbot_model::{ActionEvent, Progress, QuestionCall, QuestionControl};
use serde_json::{Value, json};

fn click(action_id: &str, value: Option<&str>) -> ActionEvent {
    let action_id = action_id.to_owned();
    let value = value.map(str::to_owned);
    let (message_id, user, trigger_id, raw) = ("m".into(), Default::default(), None, Value::Null);
    ActionEvent {
        action_id,
        value,
        message_id,
        user,
        trigger_id,
        raw,
    }
}

fn at(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .expect(pointer)
        .to_owned()
}

fn main() {
    let call: QuestionCall = serde_json::from_value(json!({"toolCallId": "c", "input": {
        "questions": [{"header": "Pond", "question": "Which pond?",
            "options": [{"label": "Lily"}, {"label": "Mill"}]}]}}))
    .expect("a question");
    let input = &call.input;
    let progress = Progress::from_state(input, None);

    let discord = serde_json::to_value(frogbot_discord::render::question_message(&call, 0, 0));
    let id = at(
        &discord.expect("json"),
        "/components/0/components/1/custom_id",
    );
    let discord = frogbot_discord::ids::read_control(&click(&id, None));

    let slack = frogbot_slack::render::question_blocks_for(input, 0, &progress);
    let id = at(
        &serde_json::to_value(slack).expect("json"),
        "/1/elements/1/action_id",
    );
    let slack = frogbot_slack::ids::read_control(&click(&id, Some("1")));

    let keyboard = frogbot_telegram::render::keyboard(input, 0, 0, &progress);
    let data = at(
        &serde_json::to_value(keyboard).expect("json"),
        "/inline_keyboard/1/0/callback_data",
    );
    let telegram = frogbot_telegram::ids::read_control(&click(&data, None));

    let root = matrix_sdk::ruma::EventId::parse("$root").expect("an event id");
    let events = frogbot_matrix::render::PollEvents::Stable;
    let (_, poll) =
        frogbot_matrix::render::poll_start(input, 0, &root, events, 0, None).expect("a poll");
    let answer = at(&poll, "/m.poll/answers/1/m.id");
    let matrix =
        frogbot_matrix::ids::read_control(&click(frogbot_matrix::ids::POLL_ACTION, Some(&answer)));

    for (platform, control) in [
        ("discord", discord),
        ("slack", slack),
        ("telegram", telegram),
        ("matrix", matrix),
    ] {
        let outcome = control
            .as_ref()
            .and_then(|c: &QuestionControl| c.outcome(input, 0));
        println!("{platform}: {control:?} → {outcome:?}");
        assert!(
            outcome.is_some(),
            "{platform}: the click settles the question"
        );
    }
}
