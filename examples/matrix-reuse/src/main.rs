//! matrix-reuse: frogbot-matrix's pure `render`, `convert` and `ids` in a plain matrix-sdk client
//! (no FrogBot engine; see README.md). Talk to the bot in an unencrypted room (a DM, or mention
//! it): it posts a native poll in a thread on your message. A vote is printed as the FrogBot
//! `Interaction` it converts to, read back with `ids::read_control`, and the poll ended and edited.

use frogbot_matrix::convert::{Incoming, classify, parse_user_id};
use frogbot_matrix::ids::{POLL_ACTION, read_control, split_message_id};
use frogbot_matrix::render::{self, PollEvents::Stable, outcome_text, poll_end, poll_replacement};
use frogbot_model::{Interaction::Action, QuestionCall};
use matrix_sdk::ruma::events::room::member::{MembershipState::Invite, StrippedRoomMemberEvent};
use matrix_sdk::ruma::{events::AnySyncTimelineEvent, serde::Raw};
use matrix_sdk::{Client, Room, config::SyncSettings};

type Error = Box<dyn std::error::Error + Send + Sync>;
const CALL: &str = r#"{"toolCallId": "demo", "input": {"questions": [{"header": "Pond",
    "question": "Which pond should the frog visit?",
    "options": [{"label": "Lily pond"}, {"label": "Mill pond"}, {"label": "Garden pond"}]}]}}"#;

async fn on_event(raw: Raw<AnySyncTimelineEvent>, room: Room) -> Result<(), Error> {
    let QuestionCall { input: i, .. } = serde_json::from_str(CALL)?;
    let send = |(kind, json): render::Content| room.send_raw(kind, json);
    match classify(&raw, room.room_id(), room.own_user_id())? {
        Some(Incoming::Message(m)) if m.mentions_bot || room.joined_members_count() <= 2 => {
            let (_, root) = split_message_id(&m.thread)?;
            send(render::poll_start(&i, 0, &root, Stable, 0, None)?).await?;
        }
        Some(Incoming::Action(Action { event })) if event.action_id == POLL_ACTION => {
            println!("FrogBot interaction: {event:?}");
            if let Some(outcome) = read_control(&event).and_then(|c| c.outcome(&i, 0)) {
                let line = outcome_text(&i, 0, &outcome, Some(&event.user.id));
                let (_, poll) = split_message_id(&event.message_id)?;
                send(poll_end(&poll, &line, Stable)?).await?;
                let edit = poll_replacement(&i, 0, &poll, Some(&line), Stable, 0, None)?;
                send(edit).await?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tracing_subscriber::fmt::init(); // shows what a handler fails with
    let var = |name| std::env::var(name).map_err(|_| format!("set {name}"));
    let me = parse_user_id(&var("MATRIX_USER_ID")?).ok_or("MATRIX_USER_ID: @name:server")?;
    let builder = Client::builder().homeserver_url(var("MATRIX_HOMESERVER")?);
    let (client, password) = (builder.build().await?, var("MATRIX_PASSWORD")?);
    client.matrix_auth().login_username(&me, &password).await?;
    client.sync_once(SyncSettings::default()).await?; // history: not handled
    client.add_event_handler(|ev: StrippedRoomMemberEvent, room: Room| async move {
        if ev.state_key == room.own_user_id() && ev.content.membership == Invite {
            let _ = room.join().await; // join when invited
        }
    });
    client.add_event_handler(on_event);
    println!("logged in as {me}; invite me and send \"ask\" (Ctrl-C stops)");
    Ok(client.sync(SyncSettings::default()).await?)
}
