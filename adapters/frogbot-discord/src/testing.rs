//! A fake Discord for tests and benchmarks (feature `testing`), like matrix-sdk's
//! `MatrixMockServer`: the HTTP API routes this adapter uses and a gateway websocket, both on
//! 127.0.0.1, speaking Discord's documented shapes; plus [`DiscordHarness`], the
//! `ChannelQuestions` conformance harness over it.
//!
//! What it is for: pointing serenity's real `Http` (through `HttpBuilder::proxy`, rate limiter
//! disabled: [`FakeDiscord::http`]) and real gateway `Client` at something local.
//! `GET /api/v10/gateway` and `GET /api/v10/gateway/bot` return the fake gateway's `ws://` URL;
//! the gateway sends Hello (op 10), answers Identify (op 2) with a READY dispatch and heartbeats
//! (op 1) with op 11, and then forwards whatever [`FakeDiscord::dispatch`] /
//! [`FakeDiscord::send_raw`] are given (an `INTERACTION_CREATE` dispatched is registered, so its
//! token answers followups).
//!
//! Sharding, as Discord does it: `GET /gateway/bot` recommends [`FakeDiscord::set_shards`] shards
//! (1 by default); a session's Identify `shard: [id, total]` is kept (READY echoes it) and a
//! dispatch with a `guild_id` goes to the sessions with `(guild_id >> 22) % total == id`, one
//! without (a DM) to shard 0's. [`FakeDiscord::live_shards`] lists the connected sessions'
//! shards and [`FakeDiscord::deliveries`] counts, per guild, the sessions its dispatches reached.
//!
//! It keeps the messages the bot posted (components included: [`FakeDiscord::message`]) and
//! refuses, as Discord does (400 `Invalid Form Body`, code 50035), what breaks Discord's limits:
//! content over 2,000 characters, more than 5 action rows, more than 5 buttons a row or a select
//! sharing its row, a select with no or more than 25 options or `max_values` above its option
//! count, a button label over 80 characters, a select option label, value or description over
//! 100, a placeholder over 150, a `custom_id` over 100 or used twice in a message, a button style
//! other than 1–5 or a button without label, a thread name over 100; in a modal (an interaction
//! response of type 9): a title over 45 or empty, no or more than 5 rows, a row that is not an
//! action row holding exactly one text input (type 4), a text input without `custom_id` or with
//! one used twice, a style other than 1 (short) or 2 (paragraph), a label over 45 or empty, a
//! placeholder over 100, `min_length` over 4,000, `max_length` outside 1–4,000 or below
//! `min_length`, a `value` over 4,000 or longer than `max_length`. An edit of an
//! unknown message is 404 (`Unknown Message`, 10008); a followup with an unknown interaction
//! token 404 (`Unknown Webhook`, 10015); a second response to one interaction 400 (40060). Every
//! HTTP call is recorded ([`FakeDiscord::calls`], [`FakeDiscord::wait_for`]). Message edits
//! (`PATCH`) change the kept message; `GET /channels/{id}/messages?before=&limit=` pages a
//! channel's messages newest first ([`FakeDiscord::channel_messages`]); starting a thread on a
//! message in a thread ([`FakeDiscord::mark_thread`], or one the bot started) is 400 (50024), in a
//! DM channel 400 (50003), on a message that has one 400 (160004); a started thread (type 11) has
//! its message's id and is a channel from then on. `GET /channels/{id}` answers the channel
//! object of a text channel ([`FakeDiscord::add_text_channel`]), a thread or a DM channel, else
//! 404 (`Unknown Channel`, 10003); `POST /users/@me/channels` (`recipient_id`) opens the DM
//! channel (type 1, `recipients`) with a user the fake knows ([`FakeDiscord::add_user`]), the same
//! one every time, else 400 (`Invalid Recipient(s)`, 50033). A message posted with a `nonce` and
//! `enforce_nonce: true` that one of the bot's carried within [`NONCE_WINDOW`] is not posted
//! again: the first message is answered. Embeds are kept and checked (at most 10, title 256,
//! description 4,096, 25 fields of name 256 / value 1,024, 6,000 characters across a message's
//! embeds, an `http(s)` image URL). `DELETE /channels/{c}/messages/{m}` deletes (404 `Unknown
//! Message` for one gone); `PUT` / `DELETE /channels/{c}/pins/{m}` (serenity 0.12's route) and
//! `/channels/{c}/messages/pins/{m}` (Discord's newer one) pin and unpin ([`FakeDiscord::pins`],
//! at most 50 a channel).
//!
//! Uploads ("Uploading Files" in Discord's API reference): a create message sent as
//! `multipart/form-data` — the message as the `payload_json` part, each file as a part
//! `files[n]` with a file name (its `attachments` entries name the parts by `id` `n`; one naming
//! no part is refused, 50035) — posts the message with an `attachments` array of attachment
//! objects (`id`, `filename`, `size`, `url` and `proxy_url` on the fake CDN
//! `/attachments/{channel}/{id}/{name}`, `content_type` as the part said, `description` when
//! given), the bytes kept ([`FakeDiscord::uploads`]). A request whose files together pass
//! [`DEFAULT_UPLOAD_LIMIT`] ([`FakeDiscord::set_upload_limit`]) is refused as Discord refuses it:
//! `413` `Request entity too large` (40005). The nonce rule holds for it as for a JSON create: a
//! repeat is answered the first message, nothing uploaded again.
//!
//! What a person sees ([`FakeDiscord::person_view`], [`SeenMessage`], [`transcript`]): the
//! messages of a conversation in order after edits and deletions, with their controls, the bot's
//! reactions, whether posting them notified (a message created does, unless it carries
//! `SUPPRESS_NOTIFICATIONS`; an edit never does) and what only one person was shown (ephemeral
//! responses and followups, modals opened: the fake keeps them for this).
//!
//! What it must not do: be used by a bot. It checks no tokens and no rate limits and keeps
//! everything in memory.
//!
//! The parts: `state` (what the fake keeps, and [`FakeDiscord`]), `api` (the HTTP API server and
//! its routes, Discord's limits), `push` (the gateway websocket and dispatches), `payloads`
//! (builders of payload shapes), `harness` (the conformance harness), `view` (what a person
//! sees, transcripts) and `recording` ([`RecordingDiscord`], a [`DiscordApi`](crate::DiscordApi)
//! without a server, for unit tests).

use std::time::Duration;

mod api;
mod harness;
mod payloads;
mod push;
mod recording;
mod state;
mod view;

pub use harness::{DiscordHarness, conformance_harness};
pub use payloads::{
    command_interaction, component_interaction, component_on, dm_channel, message,
    modal_submit_in_labels, modal_submit_interaction, text_channel, thread_channel, user,
    with_user_option,
};
pub use recording::{Recorded, RecordingDiscord};
pub use state::{Call, FakeDiscord};
pub use view::{SeenFile, SeenMessage, seen, transcript};

/// The `EPHEMERAL` message flag (`1 << 6`): only the interaction's user sees the message.
pub const EPHEMERAL: u64 = 1 << 6;

/// The `SUPPRESS_NOTIFICATIONS` message flag (`1 << 12`): the message notifies no one.
pub const SUPPRESS_NOTIFICATIONS: u64 = 1 << 12;

/// Discord's upload limit for all the files of one create-message request in a server without
/// boosts (10 MiB); [`FakeDiscord::set_upload_limit`] changes it (a boosted server).
pub const DEFAULT_UPLOAD_LIMIT: u64 = 10 * 1024 * 1024;

/// How long Discord remembers a message nonce for `enforce_nonce` ("the past few minutes").
pub const NONCE_WINDOW: Duration = Duration::from_secs(5 * 60);

/// How long a [`Fault::Timeout`](frogbot_model::faults::Fault::Timeout) holds its request by
/// default before answering `500` (having done nothing): longer than a test's client timeout.
pub const DEFAULT_FAULT_HOLD: Duration = Duration::from_secs(2);

/// The guild the harness's threads are in.
const GUILD: u64 = 100_000_000_000_000_001;
