//! A fake of the platform (feature `testing`): [`FakeHomeserver`], a local HTTP server speaking
//! the client-server API the adapter uses (login, `/sync` as the push side, sending and redacting
//! events, room state read and written (`m.room.pinned_events`), members, `/messages`, single
//! events, relations (threads, annotations; redacted ones left out), media uploads
//! (`POST /_matrix/media/v3/upload` → `mxc://`), and a test image host (`/_test/images/…`)),
//! recording every event, enforcing
//! Matrix's limits (65,536 bytes an event, 1–20 poll answers, known rooms), and able to inject
//! people's events, which the bot then receives through `/sync`. The adapter's real client
//! (matrix-sdk's `Client`) talks to it; [`MatrixHarness`] runs the `ChannelQuestions`
//! conformance suite over it.
//!
//! Faults ([`FakeHomeserver::inject_faults`]): a [`FaultPlan`](frogbot_model::faults::FaultPlan)
//! decides for each `PUT /rooms/{room}/send/{type}/{txn}` whether it fails, as a homeserver and
//! the network do: `500` `{"errcode": "M_UNKNOWN"}` (nothing done); `429` `{"errcode":
//! "M_LIMIT_EXCEEDED", "retry_after_ms": N}` (nothing done); a timeout (the connection is dropped
//! without an answer, nothing done); a reset after processing (the event is stored under its
//! transaction id, then the answer is cut off). Like a real homeserver, a repeated transaction id is answered with the
//! event it made the first time.
//!
//! [`synapse`] is the other platform the tests use: a real Synapse on loopback (slower, started
//! once per test binary), for the end-to-end tests of encryption, gaps and restarts.
//!
//! (matrix-sdk's own `MatrixMockServer` needs matrix-sdk's `testing` feature and the
//! `matrix-sdk-test` crate with wiremock; this fake is a small axum server instead, shaped like the
//! other adapters' fakes, and serving a whole bot — login, sync loop and all — not only a client.)
//!
//! The parts: `state` (what the fake keeps, and [`FakeHomeserver`]), `api` (the client-server API
//! server and its routes), `push` (`/sync` and injected events), `harness` (the conformance
//! harness), `view` (what a person sees, transcripts and golden files), `recording`
//! ([`RecordingMatrix`], a [`MatrixApi`](crate::MatrixApi) without a server, for unit tests) and
//! [`synapse`].

mod api;
mod harness;
mod push;
mod recording;
mod state;
pub mod synapse;
mod view;

pub use api::{MAX_UPLOAD_BYTES, PNG};
pub use harness::{MatrixHarness, conformance_harness, matrix_user};
pub use recording::{RecordingMatrix, SentEvent};
pub use state::FakeHomeserver;
pub use view::{
    SeenMessage, SeenPoll, TRANSCRIPT_HEAD, TRANSCRIPT_TEXT, assert_golden, person_view_of,
    transcript,
};

/// The server name of the fake.
pub const SERVER_NAME: &str = "fake.test";
/// The password the fake's bot account logs in with.
pub const BOT_PASSWORD: &str = "fake-bot-password";
/// The largest event the fake (as Synapse) accepts, in bytes of its JSON.
pub const MAX_EVENT_BYTES: usize = 65_536;
const TOKEN: &str = "fake-access-token";
const DEVICE: &str = "FAKEDEVICE";
