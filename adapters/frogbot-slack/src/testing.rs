//! A fake of Slack for tests and benches (feature `testing`), like matrix-sdk's `MatrixMockServer`:
//! one local HTTP server speaking Slack's real shapes.
//!
//! - **Web API** (`POST|GET /api/{method}`; point slack-morphism at [`FakeSlack::api_url`], e.g.
//!   with [`Config::with_api_url`](crate::channel::Config::with_api_url)): `auth.test`,
//!   `apps.connections.open`, `chat.postMessage`, `chat.update`, `chat.delete`, `pins.add`,
//!   `pins.remove`, `pins.list`, `chat.postEphemeral`,
//!   `views.open`, `conversations.replies`, `conversations.history` (top-level messages, newest
//!   first, `oldest` / `latest` / `limit` / `cursor`, message metadata with
//!   `include_all_metadata`), `conversations.open` (`users`: one user's DM, the same `D…` every
//!   time), the external file upload (`files.getUploadURLExternal` handing out an upload URL on
//!   the fake, the bytes `POST`ed there raw or as multipart form data,
//!   `files.completeUploadExternal` sharing them as a bot message in the thread with its
//!   `files`, refused for a file whose bytes never arrived or completed before; `files.delete`;
//!   [`FakeSlack::uploads`]). A token other than [`BOT_TOKEN`] and [`APP_TOKEN`] gets `invalid_auth`, as Slack
//!   answers one it does not know. Every call is recorded ([`FakeSlack::calls`]); the
//!   messages are kept as Slack keeps them (a `chat.update` replaces the blocks), so a test reads
//!   what a person would see ([`FakeSlack::message`]). Slack's documented limits are enforced: a
//!   call that breaks one (more than 50 blocks, more than one `table`, a table over 100 rows or
//!   20 cells a row, more than 10 section fields or one over 2,000 characters, an image without
//!   `alt_text`, a section text over 3,000 characters, a button
//!   text over 75, more than 25 elements in an actions block, an option text over 75, …) is
//!   answered `invalid_blocks` like Slack does, and the breach is kept in
//!   [`FakeSlack::violations`].
//! - **Socket Mode**: `apps.connections.open` hands out the `ws://` URL of the fake's WebSocket
//!   server, which greets with `hello`, sends the envelopes a test gives it and reads the
//!   acknowledgements ([`FakeSlack::socket`], [`SocketConnection`]).
//! - **Events API and interactivity**: the payloads Slack posts (`event_callback`, `block_actions`
//!   built from the blocks the fake shows, `view_submission` built from a modal the app opened,
//!   [`FakeSlack::submit_view`]) and signed requests to an app's endpoints
//!   ([`FakeSlack::post_event`], [`FakeSlack::post_interaction`]).
//! - **Slash commands**: [`FakeSlack::slash_command`] is what Slack sends for a typed
//!   `/frogbot …` (its text escaped, `@name` as `<@U…|name>`), [`FakeSlack::post_command`] posts
//!   it form-encoded and signed to the command's request URL; over Socket Mode it is the
//!   payload of a `slash_commands` envelope ([`SocketConnection::send`]).
//! - **Mentions**: a posted message keeps whom it notified by a mention
//!   ([`Message::mentioned`], [`SeenMessage::mentioned`], [`mentioned_users`]).
//! - **Modals**: `views.open` keeps the view ([`FakeSlack::views`]); [`FakeSlack::submit_view`]
//!   fills it in as a person would and checks it as Slack's client does before it sends the
//!   submission (a required input left empty, a `number_input` out of `min_value`/`max_value` or
//!   with decimals where `is_decimal_allowed` is false, text over `max_length`: refused with the
//!   field errors Slack shows, nothing sent). `state.values` has Slack's shapes:
//!   `{"type": "plain_text_input" | "number_input", "value": "…" | null}`,
//!   `{"type": "checkboxes" | "multi_static_select", "selected_options": [{text, value}]}`,
//!   `{"type": "radio_buttons" | "static_select", "selected_option": {text, value} | null}`.
//! - **Confirmation dialogs**: a button with a `confirm` object is checked against Slack's limits
//!   (title 100, text 300, confirm / deny 30 characters, style `primary` | `danger`);
//!   [`FakeSlack::confirm_dialog`] is the dialog Slack would show before sending the click.
//! - **What a person sees**: [`FakeSlack::person_view`] reads a thread as Slack's client shows
//!   it after edits and deletions ([`SeenMessage`]: sender, text and controls, reactions, whether
//!   it notified and what the notification showed, edited, the files it shares), [`FakeSlack::seen_views`] the modals
//!   opened, and [`transcript`] renders a view as stable plain text for golden files.
//! - **Conformance**: [`FakeSlack::harness`] gives the `ChannelQuestions` conformance
//!   [`Harness`](frogbot_model::conformance::Harness) over the fake, driving the crate's real
//!   [`SlackQuestions`](crate::SlackQuestions) and client.
//!
//! The parts: `api` (the Web API server, its state and routes), `push` (Events API and
//! interactivity payloads, signed deliveries), `socket` (the Socket Mode server and connections,
//! which `api` starts), `harness` (the conformance harness),
//! `view` (what a person sees, transcripts and golden files) and `recording` ([`RecordingSlack`],
//! a [`SlackApi`](crate::SlackApi) without a server, for unit tests).

mod api;
mod harness;
mod push;
mod recording;
mod socket;
mod view;

pub use api::{
    Call, DEFAULT_FAULT_HOLD, Ephemeral, FakeSlack, Message, Upload, WRITE_METHODS, limits,
    mentioned_users,
};
pub use harness::SlackHarness;
pub use push::Signature;
pub use recording::{RecordingSlack, SlackCall};
pub use socket::SocketConnection;
pub use view::{BOT_NAME, SeenFile, SeenMessage, assert_golden, seen_text, seen_view, transcript};

/// The bot user the fake's `auth.test` names.
pub const BOT_USER: &str = "UBOT";
/// The bot id the fake's `auth.test` names.
pub const BOT_ID: &str = "B1";
/// The workspace.
pub const TEAM: &str = "T1";
/// The app.
pub const APP: &str = "A1";
/// The bot token tests use.
pub const BOT_TOKEN: &str = "xoxb-test-token";
/// The app-level token tests use (Socket Mode).
pub const APP_TOKEN: &str = "xapp-test-token";
/// The signing secret the fake signs deliveries with (the one of Slack's documented example).
pub const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
