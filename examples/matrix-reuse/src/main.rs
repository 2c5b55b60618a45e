//! matrix-reuse: frogbot-matrix's pure `render`, `convert` and `ids` inside a plain matrix-sdk
//! client — no FrogBot engine, no database.
//!
//! Run it (see README.md):
//!
//! ```sh
//! MATRIX_HOMESERVER=https://matrix.example.org MATRIX_USER_ID=@frogbot:example.org \
//! MATRIX_PASSWORD=… cargo run -p matrix-reuse
//! ```
//!
//! Invite the bot to an unencrypted room or DM and send "ask" (mention the bot in a room with
//! others): it posts a native poll in a thread on your message. A vote is converted to the FrogBot
//! `Interaction` FrogBot's engine would get and printed; the bot reads the option from the answer
//! id, then ends the poll and edits it to show the answer — the same rendering FrogBot's question
//! engine uses.

// matrix-sdk's sync futures are deep: proving them `Send` needs a higher limit.
#![recursion_limit = "256"]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use frogbot_matrix::convert::{Incoming, classify, parse_user_id};
use frogbot_matrix::ids::{POLL_ACTION, message_id, parse_answer_id, split_message_id};
use frogbot_matrix::render::{PollEvents, outcome_text, poll_end, poll_replacement, poll_start};
use frogbot_model::{Interaction, QuestionAnswer, QuestionCall, QuestionOutcome, QuestionOutput};
use matrix_sdk::config::SyncSettings;
use matrix_sdk::ruma::events::AnySyncTimelineEvent;
use matrix_sdk::ruma::events::room::member::{MembershipState, StrippedRoomMemberEvent};
use matrix_sdk::ruma::serde::Raw;
use matrix_sdk::ruma::{OwnedUserId, RoomId};
use matrix_sdk::{Client, Room};

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn demo_call() -> QuestionCall {
    serde_json::from_value(serde_json::json!({
        "toolCallId": "demo",
        "input": {"questions": [{
            "header": "Pond",
            "question": "Which pond should the frog visit?",
            "options": [{"label": "Lily pond"}, {"label": "Mill pond"}, {"label": "Garden pond"}]
        }]}
    }))
    .expect("a valid question")
}

/// The polls this bot posted and not yet closed: `room|event` of the poll.
type Open = Arc<Mutex<HashMap<String, QuestionCall>>>;

async fn send(room: &Room, content: (&'static str, serde_json::Value)) {
    if let Err(e) = room.send_raw(content.0, content.1).await {
        eprintln!("could not send {}: {e}", content.0);
    }
}

/// A message talking to the bot: "ask" posts the question as a poll in a thread on it.
async fn on_message(room: &Room, thread: &str, text: &str, open: &Open) {
    if !text.to_lowercase().contains("ask") {
        return;
    }
    let Ok((_, root)) = split_message_id(thread) else {
        return;
    };
    let call = demo_call();
    let content = poll_start(&call.input, 0, &root, PollEvents::Stable, 0, None).expect("a poll");
    match room.send_raw(content.0, content.1).await {
        Ok(sent) => {
            let id = message_id(room.room_id(), &sent.response.event_id);
            println!("asked: poll {id}");
            open.lock().unwrap().insert(id, call);
        }
        Err(e) => eprintln!("could not post the poll: {e}"),
    }
}

/// A poll response: read the option from its answer id, end the poll and show the answer.
async fn on_action(room: &Room, interaction: Interaction, open: &Open) {
    let Interaction::Action { event } = &interaction else {
        return;
    };
    if event.action_id != POLL_ACTION {
        return;
    }
    let Some(call) = open.lock().unwrap().get(&event.message_id).cloned() else {
        return;
    };
    println!("FrogBot interaction: {interaction:?}");
    let question = &call.input.questions[0];
    let picked = event
        .value
        .as_deref()
        .unwrap_or("")
        .split(',')
        .filter_map(parse_answer_id)
        .find_map(|a| question.options.get(a.option));
    let Some(option) = picked else {
        println!("a vote taken back, or not one of the options");
        return;
    };
    open.lock().unwrap().remove(&event.message_id);
    let outcome = QuestionOutcome::Answered(QuestionOutput {
        answers: vec![QuestionAnswer {
            header: question.header.clone(),
            selected: vec![option.label.clone()],
        }],
    });
    let line = outcome_text(&call.input, 0, &outcome, Some(&event.user.id));
    println!("{line}");
    let Ok((_, poll)) = split_message_id(&event.message_id) else {
        return;
    };
    let end = poll_end(&poll, &line, PollEvents::Stable).expect("a poll end");
    send(room, end).await;
    let edit = poll_replacement(
        &call.input,
        0,
        &poll,
        Some(&line),
        PollEvents::Stable,
        0,
        None,
    )
    .expect("an edit");
    send(room, edit).await;
}

async fn on_event(raw: Raw<AnySyncTimelineEvent>, room: Room, me: OwnedUserId, open: Open) {
    let room_id: &RoomId = room.room_id();
    match classify(&raw, room_id, &me) {
        Ok(Some(Incoming::Message(m))) => {
            let members = room.joined_members_count();
            if m.mentions_bot || members <= 2 {
                on_message(&room, &m.thread, &m.message.text, &open).await;
            }
        }
        Ok(Some(Incoming::Action(interaction))) => on_action(&room, interaction, &open).await,
        Ok(_) => {}
        Err(e) => eprintln!("unreadable event: {e}"),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let homeserver = var("MATRIX_HOMESERVER").ok_or("set MATRIX_HOMESERVER")?;
    let me = var("MATRIX_USER_ID")
        .and_then(|u| parse_user_id(&u))
        .ok_or("set MATRIX_USER_ID to the bot's user id (@name:server)")?;
    let password = var("MATRIX_PASSWORD").ok_or("set MATRIX_PASSWORD")?;

    let client = Client::builder().homeserver_url(homeserver).build().await?;
    client
        .matrix_auth()
        .login_username(&me, &password)
        .initial_device_display_name("matrix-reuse")
        .await?;
    // Skip history: handle only what arrives from now on.
    let first = client.sync_once(SyncSettings::default()).await?;
    println!("logged in as {me}; invite me and send \"ask\" (Ctrl-C stops)");

    let bot = me.clone();
    client.add_event_handler(move |ev: StrippedRoomMemberEvent, room: Room| {
        let bot = bot.clone();
        async move {
            if ev.state_key == bot && ev.content.membership == MembershipState::Invite {
                match room.join().await {
                    Ok(()) => println!("joined {}", room.room_id()),
                    Err(e) => eprintln!("could not join {}: {e}", room.room_id()),
                }
            }
        }
    });
    let open: Open = Arc::default();
    client.add_event_handler(move |raw: Raw<AnySyncTimelineEvent>, room: Room| {
        on_event(raw, room, me.clone(), open.clone())
    });
    client
        .sync(SyncSettings::default().token(first.next_batch))
        .await?;
    Ok(())
}
