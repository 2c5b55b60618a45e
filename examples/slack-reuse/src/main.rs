//! How to run: `cargo run -p slack-reuse` (no network, no FrogBot engine, no database).
//!
//! Reuses `frogbot-slack`'s pure halves (no `engine` feature: no FrogBot engine, no runtime) in a
//! plain slack-morphism setting (slack-morphism as `frogbot_slack` re-exports it): `render` draws
//! a question as Block Kit blocks ready for `chat.postMessage`, `convert` reads a Slack
//! `block_actions` payload back as a FrogBot interaction, and `ids::read_control` names its
//! control in FrogBot's shared vocabulary (`QuestionControl`: revision, question, action), which
//! settles the question. Swap the canned payload for what your own Slack endpoint receives, and
//! send the blocks with your own `SlackClient`.

use frogbot_model::{Interaction, Progress, QuestionInput};
use frogbot_slack::convert::interaction_from_payload;
use frogbot_slack::ids::read_control;
use frogbot_slack::render::{fallback_text, question_blocks_for};
use frogbot_slack::slack_morphism::prelude::*;
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let input: QuestionInput = serde_json::from_value(json!({"questions": [{
        "header": "Env",
        "question": "Where should I deploy?",
        "options": [{"label": "staging"}, {"label": "prod"}]
    }]}))?;

    // A `chat.postMessage` request body with the question's blocks.
    let blocks = question_blocks_for(&input, 0, &Progress::from_state(&input, None));
    let request = SlackApiChatPostMessageRequest::new(
        SlackChannelId("C0123456789".into()),
        SlackMessageContent::new()
            .with_text(fallback_text(&input))
            .with_blocks(blocks),
    )
    .with_thread_ts(SlackTs("1700000000.000100".into()));
    println!("{}", serde_json::to_string_pretty(&request)?);

    // Someone clicks "prod": Slack sends a block_actions payload.
    let payload = json!({
        "type": "block_actions",
        "user": {"id": "U0123ABCD", "username": "ana", "team_id": "T0123"},
        "api_app_id": "A0123",
        "team": {"id": "T0123", "domain": "frogs"},
        "container": {"type": "message", "message_ts": "1700000100.000200", "channel_id": "C0123456789"},
        "trigger_id": "123.456.abc",
        "channel": {"id": "C0123456789", "name": "ops"},
        "actions": [{"type": "button", "action_id": "fb1:b:0:1:0", "value": "1", "action_ts": "1700000150.000300"}]
    });
    // Read back in FrogBot's shared control vocabulary, and settled as a one-tap answer.
    if let Some(Interaction::Action { event }) = interaction_from_payload(&payload)? {
        let control = read_control(&event);
        let outcome = control.as_ref().and_then(|c| c.outcome(&input, 0));
        println!(
            "{} on message {}: {control:?} → {outcome:?}",
            event.user.id, event.message_id
        );
    }
    Ok(())
}
