//! Pure conversion: serenity (Discord) events → FrogBot interactions and thread messages, the
//! bot's own messages and mentions, and the verification of HTTP interactions-endpoint requests.
//!
//! Nothing here does I/O. The FrogBot thread id of a Discord conversation is the thread's channel
//! id; an action's `messageId` is the message the component sits on; `triggerId` is the
//! interaction token (what followups and modal responses need).
//!
//! The HTTP interactions endpoint: Discord can deliver interactions by POST to an "Interactions
//! Endpoint URL" instead of the gateway. Every request carries `X-Signature-Ed25519` and
//! `X-Signature-Timestamp`; a request whose signature does not verify against the application's
//! public key must be answered 401 ([`EndpointVerifier`]). The signature covers the timestamp, so
//! a request is also refused (401) when its timestamp is more than [`MAX_SKEW_SECS`] from now: a
//! captured request cannot be replayed later. A PING (type 1) is answered `{"type": 1}`
//! ([`PONG`]); anything else is an interaction to convert and acknowledge in the HTTP response
//! (e.g. `{"type": 6}`, the deferred update) within 3 seconds.

use frogbot_model::{
    ActionEvent, Interaction, Mention, ModalSubmitEvent, PlatformUser, ThreadMessage,
    ThreadMessageMetadata,
};
use serde::Deserialize;
use serde_json::{Map, Value};
use serenity::interactions_endpoint::Verifier;
use serenity::model::application::{
    ActionRowComponent, ComponentInteraction, ComponentInteractionDataKind, ComponentType,
    Interaction as DiscordInteraction, ModalInteraction,
};
use serenity::model::channel::Message;
use serenity::model::id::{MessageId, UserId};
use serenity::model::user::User;

use crate::Error;

/// A Discord user as a FrogBot platform user (`name`: the display name, else the username).
pub fn platform_user(user: &User) -> PlatformUser {
    PlatformUser {
        id: user.id.to_string(),
        name: Some(
            user.global_name
                .clone()
                .unwrap_or_else(|| user.name.clone()),
        ),
        is_bot: user.bot,
    }
}

/// The JSON of a serenity value (`Value::Null` if it does not serialise, which serenity's models
/// always do).
fn raw_of<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// The click on an agent message's event button a component interaction is (a button whose
/// `custom_id` is [`crate::ids::event_id`]): the message, the block and button indexes,
/// and who; `None` for any other component (a question's control, the Stop button).
pub fn event_click(interaction: &ComponentInteraction) -> Option<frogbot_model::EventClick> {
    if !matches!(interaction.data.kind, ComponentInteractionDataKind::Button) {
        return None;
    }
    crate::ids::read_event(&interaction.data.custom_id).map(|c| {
        c.clicked(
            interaction.message.id.to_string(),
            platform_user(&interaction.user),
        )
    })
}

/// A button or select click → `Interaction::Action`.
///
/// `actionId` is the component's `custom_id`. `value` is the first selected value of a select
/// (all of them stay in `raw.data.values`), or for a button the last `:`-separated segment of its
/// custom id (buttons carry no value on Discord, so the adapter encodes it there), or nothing.
pub fn action(interaction: &ComponentInteraction) -> Interaction {
    let custom_id = interaction.data.custom_id.clone();
    let raw = raw_of(interaction);
    let value = match &interaction.data.kind {
        ComponentInteractionDataKind::Button => {
            custom_id.rsplit_once(':').map(|(_, last)| last.to_owned())
        }
        // Any select's values, as serenity writes them in `raw` (ids as strings).
        _ => selected_values(&raw).into_iter().next(),
    };
    Interaction::Action {
        event: ActionEvent {
            action_id: custom_id,
            value,
            message_id: interaction.message.id.to_string(),
            user: platform_user(&interaction.user),
            trigger_id: Some(interaction.token.clone()),
            raw,
        },
    }
}

/// The selected values of a select click, read back from an action's `raw` payload (empty for a
/// button or anything else).
pub fn selected_values(raw: &Value) -> Vec<String> {
    raw.pointer("/data/values")
        .and_then(Value::as_array)
        .map(|values| {
            values
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Discord's component type of a Label (a modal's title-and-description wrapper around one
/// child: a text input or a select), which serenity 0.12 does not model.
pub const LABEL: u64 = 18;

/// The values of a modal submission's `data.components` (raw JSON), by child `custom_id`: a text
/// input's `value` as a string, a select's `values` as an array of strings. Children are read
/// inside action rows (type 1, the older shape) and inside Labels (type 18, `component`: the
/// shape Discord documents now).
pub fn modal_values(components: &Value) -> Map<String, Value> {
    let mut values = Map::new();
    let mut read = |child: &Value| {
        let Some(id) = child.get("custom_id").and_then(Value::as_str) else {
            return;
        };
        if let Some(text) = child.get("value").and_then(Value::as_str) {
            values.insert(id.to_owned(), Value::String(text.to_owned()));
        } else if let Some(chosen) = child.get("values").and_then(Value::as_array) {
            let chosen = chosen
                .iter()
                .filter_map(|v| v.as_str().map(|v| Value::String(v.to_owned())))
                .collect();
            values.insert(id.to_owned(), Value::Array(chosen));
        }
    };
    for top in components.as_array().into_iter().flatten() {
        match top.get("type").and_then(Value::as_u64) {
            Some(1) => top
                .get("components")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .for_each(&mut read),
            Some(LABEL) => {
                if let Some(child) = top.get("component") {
                    read(child);
                }
            }
            _ => read(top),
        }
    }
    values
}

/// Whether serenity's view of a modal submission lost components: a top-level component that is
/// not an action row (a Label, type 18), whose child serenity 0.12 drops. Its values can only be
/// read from the raw JSON ([`modal_submit_json`]).
pub fn modal_lost_components(interaction: &ModalInteraction) -> bool {
    interaction
        .data
        .components
        .iter()
        .any(|row| row.kind != ComponentType::ActionRow)
}

/// A modal submission → `Interaction::ModalSubmit`: `values` by text input `custom_id`,
/// `privateMetadata` = the modal's `custom_id` (where the form locator lives), the message the modal
/// was opened from as `relatedMessageId` when Discord reports it.
///
/// serenity 0.12 reads only text inputs inside action rows: a Label's child and a select's
/// values are lost in its types. Where the JSON of the interaction is at hand (the interactions
/// endpoint, [`interaction_from_gateway`]), use [`modal_submit_json`].
pub fn modal_submit(interaction: &ModalInteraction) -> Interaction {
    let mut values = Map::new();
    for row in &interaction.data.components {
        for component in &row.components {
            if let ActionRowComponent::InputText(input) = component {
                let value = input.value.clone().unwrap_or_default();
                values.insert(input.custom_id.clone(), Value::String(value));
            }
        }
    }
    modal_event(interaction, values, raw_of(interaction))
}

/// [`modal_submit`] with the values read from `raw`, the interaction's JSON as Discord sent it
/// ([`modal_values`] of `data.components`: text inputs and selects, in action rows or Labels);
/// `raw` is kept as the event's platform payload.
pub fn modal_submit_json(interaction: &ModalInteraction, raw: &Value) -> Interaction {
    let values = modal_values(raw.pointer("/data/components").unwrap_or(&Value::Null));
    modal_event(interaction, values, raw.clone())
}

fn modal_event(
    interaction: &ModalInteraction,
    values: Map<String, Value>,
    raw: Value,
) -> Interaction {
    Interaction::ModalSubmit {
        event: ModalSubmitEvent {
            values,
            private_metadata: Some(interaction.data.custom_id.clone()),
            related_message_id: interaction.message.as_ref().map(|m| m.id.to_string()),
            user: platform_user(&interaction.user),
            trigger_id: Some(interaction.token.clone()),
            raw,
        },
    }
}

/// Whether `user` is someone: serenity fills an interaction's `user` with a default (id 1, no
/// name) when the JSON had neither `user` nor `member.user`, and such an interaction must not be
/// credited to anybody.
pub fn is_someone(user: &User) -> bool {
    !(user.id == UserId::default() && user.name.is_empty())
}

/// A serenity interaction → a FrogBot interaction (components and modal submissions only); an
/// interaction without a user ([`is_someone`]) is refused.
pub fn interaction(interaction: &DiscordInteraction) -> Result<Interaction, Error> {
    let (converted, user) = match interaction {
        DiscordInteraction::Component(c) => (action(c), &c.user),
        DiscordInteraction::Modal(m) => (modal_submit(m), &m.user),
        other => {
            let kind = format!("interaction type {:?}", other.kind());
            return Err(Error::Unsupported(kind));
        }
    };
    if !is_someone(user) {
        return Err(Error::Malformed("an interaction without a user".into()));
    }
    Ok(converted)
}

/// Parses an `INTERACTION_CREATE` gateway dispatch (`{"op":0,"t":"INTERACTION_CREATE","d":{…}}`)
/// or a bare interaction object (`d`, also the body of an interactions-endpoint POST) into
/// serenity's type, with the interaction object's JSON (what serenity's types do not keep, such
/// as a modal's Label components, is still in it). Malformed JSON or another dispatch is an
/// error, never a panic.
pub fn parse_interaction_json(json: &str) -> Result<(DiscordInteraction, Value), Error> {
    let value: Value = serde_json::from_str(json).map_err(|e| Error::Malformed(e.to_string()))?;
    let data = match value.get("t") {
        Some(t) if t.as_str() == Some("INTERACTION_CREATE") => value
            .get("d")
            .cloned()
            .ok_or_else(|| Error::Malformed("dispatch without `d`".into()))?,
        Some(t) => return Err(Error::Unsupported(format!("dispatch {t}"))),
        None => value,
    };
    let mut interaction =
        DiscordInteraction::deserialize(&data).map_err(|e| Error::Malformed(e.to_string()))?;
    who_acted(&mut interaction, &data)?;
    Ok((interaction, data))
}

/// Makes sure a click or a submission names who did it: `user` (in a DM) or `member.user` (in a
/// guild). serenity takes `member.user` only when `guild_id` is there too and otherwise leaves a
/// default user (id 1): the member's user is taken here, and an interaction naming nobody is
/// refused rather than credited to user 1.
fn who_acted(interaction: &mut DiscordInteraction, data: &Value) -> Result<(), Error> {
    let (user, member) = match interaction {
        DiscordInteraction::Component(c) => (&mut c.user, c.member.as_ref()),
        DiscordInteraction::Modal(m) => (&mut m.user, m.member.as_ref()),
        _ => return Ok(()),
    };
    let has = |pointer: &str| data.pointer(pointer).is_some_and(|v| !v.is_null());
    if !has("/user/id") {
        match member {
            Some(m) if has("/member/user/id") => *user = m.user.clone(),
            _ => {
                return Err(Error::Malformed(
                    "an interaction without a user or member".into(),
                ));
            }
        }
    }
    if is_someone(user) {
        Ok(())
    } else {
        Err(Error::Malformed("an interaction without a user".into()))
    }
}

/// [`parse_interaction_json`] then [`interaction`] (a modal submission with
/// [`modal_submit_json`], so values inside Labels are read).
pub fn interaction_from_gateway(json: &str) -> Result<Interaction, Error> {
    match parse_interaction_json(json)? {
        (DiscordInteraction::Modal(m), raw) => Ok(modal_submit_json(&m, &raw)),
        (other, _) => interaction(&other),
    }
}

/// A guild or thread message → a FrogBot thread message: `text` (the content), `author`,
/// `metadata.dateSent` from the message id's snowflake timestamp, `id`, and `replyTo` (the message
/// it replies to). `mentions` stays empty: the bot's own id is needed to leave it out
/// ([`thread_message_for`]).
pub fn thread_message(message: &Message) -> ThreadMessage {
    let reply_to = replied_to(message).map(|id| id.to_string());
    ThreadMessage {
        id: message.id.to_string(),
        text: message.content.clone(),
        author: platform_user(&message.author),
        metadata: ThreadMessageMetadata {
            date_sent: message.id.created_at().to_string(),
        },
        reply_to,
        raw: raw_of(message),
        files: message.attachments.iter().map(attachment_file).collect(),
        mentions: Vec::new(),
    }
}

/// The message `message` replies to (its `message_reference`, else its `referenced_message`).
pub fn replied_to(message: &Message) -> Option<MessageId> {
    message
        .message_reference
        .as_ref()
        .and_then(|r| r.message_id)
        .or_else(|| message.referenced_message.as_ref().map(|m| m.id))
}

/// [`thread_message`] as the bot `bot` receives it: the text without its mentions of the bot
/// ([`strip_mention`]), and the people the text names ([`mentions_in`], on that text).
pub fn thread_message_for(message: &Message, bot: UserId) -> ThreadMessage {
    let mut incoming = thread_message(message);
    incoming.text = strip_mention(&incoming.text, bot);
    incoming.mentions = mentions_in(&incoming.text, &message.mentions, bot);
    incoming
}

/// The people `text` names, in text order: each `<@ID>` or `<@!ID>` (Discord's user mention;
/// the `!` form is the deprecated nickname one) whose user is among `users` (the message's
/// `mentions`, the user objects Discord resolved), with its byte range in `text`; never `bot`.
/// A mention Discord did not resolve (inside a code block, of nobody it knows) names no one.
pub fn mentions_in(text: &str, users: &[User], bot: UserId) -> Vec<Mention> {
    let mention = |(at, _): (usize, &str)| {
        let tail = &text[at + 2..];
        let digits = tail.strip_prefix('!').unwrap_or(tail);
        let n = digits.bytes().take_while(u8::is_ascii_digit).count();
        let id: u64 = digits[..n].parse().ok()?;
        let user = users.iter().find(|u| u.id.get() == id && u.id != bot)?;
        digits[n..].starts_with('>').then(|| Mention {
            user: platform_user(user),
            start: at,
            end: text.len() - digits.len() + n + 1,
        })
    };
    text.match_indices("<@").filter_map(mention).collect()
}

/// An attachment as a file the engine downloads (its CDN `url`).
fn attachment_file(a: &serenity::all::Attachment) -> frogbot_model::PlatformFile {
    frogbot_model::PlatformFile {
        id: a.id.to_string(),
        url: a.url.clone(),
        media_type: a
            .content_type
            .clone()
            .unwrap_or_else(|| "application/octet-stream".into()),
        filename: a.filename.clone(),
        size: Some(u64::from(a.size)),
        source: serde_json::Value::Null,
    }
}

/// [`thread_message`] as an `Interaction::Message`.
pub fn message_interaction(message: &Message) -> Interaction {
    Interaction::Message {
        message: thread_message(message),
    }
}

/// The FrogBot thread id of a message: its channel id (the thread's channel id inside a thread).
pub fn thread_id(message: &Message) -> String {
    message.channel_id.to_string()
}

/// Whether the bot itself wrote the message (ignore it, or the bot answers itself).
pub fn is_own_message(message: &Message, bot: UserId) -> bool {
    message.author.id == bot
}

/// Whether the message mentions the bot (resolved mentions, or a raw `<@id>` / `<@!id>` in the
/// text).
pub fn mentions(message: &Message, bot: UserId) -> bool {
    message.mentions.iter().any(|u| u.id == bot) || text_mentions(&message.content, bot)
}

/// Whether `text` holds a `<@id>` or `<@!id>` mention of `user`.
pub fn text_mentions(text: &str, user: UserId) -> bool {
    text.contains(&format!("<@{user}>")) || text.contains(&format!("<@!{user}>"))
}

/// `text` without mentions of `user`, trimmed: a leading mention (`<@id>` or `<@!id>`, as
/// Discord's client writes it) goes with the separator a person puts after it — `:` or `,`
/// (`<@id>: stop`, `<@id>, skip`), or a dash `-`, `–`, `—` followed by a space (`<@id> — stop`) —
/// so commands (`stop`, `skip`) are read and the model gets the text without it; a mention
/// elsewhere is removed alone.
pub fn strip_mention(text: &str, user: UserId) -> String {
    let forms = [format!("<@{user}>"), format!("<@!{user}>")];
    let t = text.trim_start();
    let rest = forms
        .iter()
        .find_map(|f| t.strip_prefix(f.as_str()))
        .map(|rest| {
            let rest = rest.trim_start();
            let after_colon = rest.strip_prefix([':', ',']);
            let after_dash = rest
                .strip_prefix(['-', '–', '—'])
                .filter(|r| r.is_empty() || r.starts_with(char::is_whitespace));
            after_colon.or(after_dash).unwrap_or(rest)
        })
        .unwrap_or(text);
    forms
        .iter()
        .fold(rest.to_owned(), |acc, f| acc.replace(f.as_str(), ""))
        .trim()
        .to_owned()
}

// ---- The HTTP interactions endpoint ----

/// The body answering a PING.
pub const PONG: &str = r#"{"type":1}"#;

/// How far `X-Signature-Timestamp` may be from now, in seconds (either way).
pub const MAX_SKEW_SECS: i64 = 5 * 60;

/// Checks that `timestamp` (Unix seconds, the raw header value) is within [`MAX_SKEW_SECS`] of
/// `now_secs`; checked arithmetic, so no timestamp can wrap around into the window.
pub fn check_fresh(timestamp: &str, now_secs: i64) -> Result<(), Error> {
    let ts: Option<i64> = timestamp.trim().parse().ok();
    let skew = ts.and_then(|ts| now_secs.checked_sub(ts)?.checked_abs());
    match skew {
        Some(skew) if skew <= MAX_SKEW_SECS => Ok(()),
        _ => Err(Error::StaleTimestamp),
    }
}

/// What a verified endpoint request is.
#[derive(Debug)]
#[non_exhaustive]
pub enum EndpointRequest {
    /// Discord checks the endpoint: answer [`PONG`].
    Ping,
    /// An interaction.
    Interaction {
        /// In serenity's types (boxed: they are large).
        interaction: Box<DiscordInteraction>,
        /// The interaction object as Discord sent it (what serenity drops, e.g. a modal's Label
        /// components, is still here: see [`modal_submit_json`]).
        raw: serde_json::Value,
    },
}

/// Verifies interactions-endpoint requests with the application's public key.
#[derive(Clone)]
pub struct EndpointVerifier {
    verifier: Verifier,
}

impl std::fmt::Debug for EndpointVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointVerifier").finish_non_exhaustive()
    }
}

fn parse_hex_key(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let byte = |i: usize| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok();
    let key: Vec<u8> = (0..32).map(byte).collect::<Option<_>>()?;
    key.try_into().ok()
}

impl EndpointVerifier {
    /// From the application's public key (64 hex digits, as the developer portal shows it).
    pub fn new(public_key_hex: &str) -> Result<Self, Error> {
        let key = parse_hex_key(public_key_hex)
            .ok_or_else(|| Error::Malformed("public key must be 64 hex digits".into()))?;
        let verifier =
            Verifier::try_new(key).map_err(|e| Error::Malformed(format!("public key: {e}")))?;
        Ok(EndpointVerifier { verifier })
    }

    /// Checks the `X-Signature-Ed25519` / `X-Signature-Timestamp` headers against the raw body.
    pub fn verify(&self, signature: &str, timestamp: &str, body: &[u8]) -> Result<(), Error> {
        self.verifier
            .verify(signature, timestamp, body)
            .map_err(|()| Error::BadSignature)
    }

    /// Verifies a request (signature, then the timestamp's freshness against the clock) and
    /// parses its body: [`EndpointRequest::Ping`] or an interaction.
    pub fn receive(
        &self,
        signature: &str,
        timestamp: &str,
        body: &[u8],
    ) -> Result<EndpointRequest, Error> {
        let now_secs = frogbot_model::now_millis() / 1000;
        self.receive_at(signature, timestamp, body, now_secs)
    }

    /// [`Self::receive`] at `now_secs` (Unix seconds).
    pub fn receive_at(
        &self,
        signature: &str,
        timestamp: &str,
        body: &[u8],
        now_secs: i64,
    ) -> Result<EndpointRequest, Error> {
        self.verify(signature, timestamp, body)?;
        check_fresh(timestamp, now_secs)?;
        let text = std::str::from_utf8(body).map_err(|e| Error::Malformed(e.to_string()))?;
        match parse_interaction_json(text)? {
            (DiscordInteraction::Ping(_), _) => Ok(EndpointRequest::Ping),
            (other, raw) => Ok(EndpointRequest::Interaction {
                interaction: Box::new(other),
                raw,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message_json(id: &str, channel: &str, content: &str, author: &str) -> Value {
        json!({
            "id": id,
            "channel_id": channel,
            "guild_id": "1000000000000000001",
            "author": {"id": author, "username": "alice", "global_name": "Alice", "discriminator": "0", "avatar": null},
            "content": content,
            "timestamp": "2026-01-01T00:00:00.000000+00:00",
            "edited_timestamp": null,
            "tts": false,
            "mention_everyone": false,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": false,
            "type": 0,
            "components": []
        })
    }

    fn user_json() -> Value {
        json!({"id": "300000000000000003", "username": "bob", "global_name": "Bob", "discriminator": "0", "avatar": null})
    }

    fn dispatch(d: Value) -> String {
        json!({"op": 0, "s": 42, "t": "INTERACTION_CREATE", "d": d}).to_string()
    }

    fn component_payload(data: Value) -> Value {
        json!({
            "id": "500000000000000005",
            "application_id": "600000000000000006",
            "type": 3,
            "data": data,
            "guild_id": "1000000000000000001",
            "channel_id": "700000000000000007",
            "member": {"user": user_json(), "roles": [], "joined_at": "2025-01-01T00:00:00.000000+00:00", "deaf": false, "mute": false, "flags": 0},
            "user": user_json(),
            "token": "tok-abc",
            "version": 1,
            "message": message_json("800000000000000008", "700000000000000007", "Pick one", "600000000000000006"),
            "locale": "en-US",
            "guild_locale": "en-US",
            "app_permissions": "0",
            "entitlements": [],
            "authorizing_integration_owners": {"0": "1000000000000000001"},
            "context": 0,
            "attachment_size_limit": 26214400
        })
    }

    #[test]
    fn button_dispatch_becomes_an_action() {
        let payload = dispatch(component_payload(
            json!({"custom_id": "fq:0:0:2", "component_type": 2}),
        ));
        let Interaction::Action { event } = interaction_from_gateway(&payload).unwrap() else {
            panic!("not an action")
        };
        assert_eq!(event.action_id, "fq:0:0:2");
        assert_eq!(event.value.as_deref(), Some("2"));
        assert_eq!(event.message_id, "800000000000000008");
        assert_eq!(event.user.id, "300000000000000003");
        assert_eq!(event.user.name.as_deref(), Some("Bob"));
        assert_eq!(event.trigger_id.as_deref(), Some("tok-abc"));
        assert_eq!(event.raw["data"]["custom_id"], "fq:0:0:2");
    }

    #[test]
    fn string_select_dispatch_keeps_every_value() {
        let payload = dispatch(component_payload(
            json!({"custom_id": "fq:1:0:s", "component_type": 3, "values": ["0", "2"]}),
        ));
        let Interaction::Action { event } = interaction_from_gateway(&payload).unwrap() else {
            panic!("not an action")
        };
        assert_eq!(event.value.as_deref(), Some("0"));
        assert_eq!(selected_values(&event.raw), vec!["0", "2"]);
    }

    #[test]
    fn modal_submit_dispatch_becomes_a_modal_submit() {
        let payload = dispatch(json!({
            "id": "500000000000000009",
            "application_id": "600000000000000006",
            "type": 5,
            "data": {
                "custom_id": "fq1:[\"700000000000000007\",\"800000000000000008\"]",
                "components": [{"type": 1, "components": [
                    {"type": 4, "custom_id": "fq:0:0:t", "value": "my own answer"}
                ]}]
            },
            "guild_id": "1000000000000000001",
            "channel_id": "700000000000000007",
            "member": {"user": user_json(), "roles": [], "joined_at": "2025-01-01T00:00:00.000000+00:00", "deaf": false, "mute": false, "flags": 0},
            "user": user_json(),
            "token": "tok-modal",
            "version": 1,
            "locale": "en-US",
            "entitlements": [],
            "attachment_size_limit": 26214400
        }));
        let Interaction::ModalSubmit { event } = interaction_from_gateway(&payload).unwrap() else {
            panic!("not a modal submit")
        };
        assert_eq!(event.values["fq:0:0:t"], "my own answer");
        assert_eq!(
            event.private_metadata.as_deref(),
            Some("fq1:[\"700000000000000007\",\"800000000000000008\"]")
        );
        let locator = frogbot_model::decode_question_modal_metadata(
            event.private_metadata.as_deref().unwrap(),
        )
        .unwrap();
        assert_eq!(locator.thread_id, "700000000000000007");
        assert_eq!(event.trigger_id.as_deref(), Some("tok-modal"));
    }

    fn modal_payload(components: Value) -> Value {
        json!({
            "id": "500000000000000009",
            "application_id": "600000000000000006",
            "type": 5,
            "data": {"custom_id": "fq1:[\"700000000000000007\",\"800000000000000008\"]", "components": components},
            "channel_id": "700000000000000007",
            "user": user_json(),
            "token": "tok-modal",
            "version": 1,
            "locale": "en-US",
            "entitlements": [],
            "attachment_size_limit": 26214400
        })
    }

    #[test]
    fn modal_submit_reads_labels_as_well_as_action_rows() {
        // The shape Discord documents now: each child in a Label (type 18).
        let labels = modal_payload(json!([
            {"type": 18, "id": 1, "component": {"type": 4, "id": 2, "custom_id": "fq:0:0:t", "value": "typed in a label"}},
            {"type": 18, "id": 3, "component": {"type": 3, "id": 4, "custom_id": "fq:0:0:s", "values": ["0", "2"]}},
            {"type": 10, "id": 5}
        ]));
        // serenity 0.12 reads the interaction, but keeps none of the Labels' children.
        let (parsed, _) = parse_interaction_json(&dispatch(labels.clone())).unwrap();
        let DiscordInteraction::Modal(typed) = &parsed else {
            panic!("a modal")
        };
        assert!(modal_lost_components(typed));
        let Interaction::ModalSubmit { event } = modal_submit(typed) else {
            panic!()
        };
        assert!(event.values.is_empty());
        // From the JSON: both children.
        for json in [dispatch(labels.clone()), labels.to_string()] {
            let Interaction::ModalSubmit { event } = interaction_from_gateway(&json).unwrap()
            else {
                panic!("not a modal submit")
            };
            assert_eq!(event.values["fq:0:0:t"], "typed in a label");
            assert_eq!(event.values["fq:0:0:s"], json!(["0", "2"]));
            assert_eq!(event.trigger_id.as_deref(), Some("tok-modal"));
            assert_eq!(event.raw["data"]["components"][0]["type"], 18);
        }
        // The older shape (action rows) reads the same, typed or from the JSON.
        let rows = modal_payload(json!([
            {"type": 1, "components": [{"type": 4, "custom_id": "fq:0:0:t", "value": "typed in a row"}]}
        ]));
        let Interaction::ModalSubmit { event } =
            interaction_from_gateway(&rows.to_string()).unwrap()
        else {
            panic!()
        };
        assert_eq!(event.values["fq:0:0:t"], "typed in a row");
        let (DiscordInteraction::Modal(typed), _) =
            parse_interaction_json(&rows.to_string()).unwrap()
        else {
            panic!()
        };
        assert!(!modal_lost_components(&typed));
        let Interaction::ModalSubmit { event } = modal_submit(&typed) else {
            panic!()
        };
        assert_eq!(event.values["fq:0:0:t"], "typed in a row");
        assert!(modal_values(&json!("not components")).is_empty());
    }

    #[test]
    fn malformed_dispatches_are_errors() {
        assert!(matches!(
            interaction_from_gateway("{not json"),
            Err(Error::Malformed(_))
        ));
        assert!(matches!(
            interaction_from_gateway(&dispatch(json!({"type": 3, "id": "x"}))),
            Err(Error::Malformed(_))
        ));
        assert!(matches!(
            interaction_from_gateway(r#"{"op":0,"t":"INTERACTION_CREATE"}"#),
            Err(Error::Malformed(_))
        ));
        assert!(matches!(
            interaction_from_gateway(r#"{"op":0,"t":"MESSAGE_CREATE","d":{}}"#),
            Err(Error::Unsupported(_))
        ));
        // A ping converts to nothing FrogBot handles.
        let ping = json!({"id": "1", "application_id": "2", "type": 1, "token": "t", "version": 1});
        assert!(interaction_from_gateway(&ping.to_string()).is_err());
    }

    #[test]
    fn an_interaction_without_a_user_is_refused() {
        // Found by fuzzing: serenity's default user (id 1) got the click.
        let mut payload = component_payload(json!({"custom_id": "fq:0:0:2", "component_type": 2}));
        payload.as_object_mut().unwrap().remove("user");
        payload.as_object_mut().unwrap().remove("member");
        for json in [payload.to_string(), dispatch(payload.clone())] {
            assert!(
                matches!(interaction_from_gateway(&json), Err(Error::Malformed(_))),
                "{json}"
            );
        }
        // A member without `guild_id` (serenity copies `member.user` only with it): the member.
        let mut payload = component_payload(json!({"custom_id": "fq:0:0:2", "component_type": 2}));
        payload.as_object_mut().unwrap().remove("user");
        payload.as_object_mut().unwrap().remove("guild_id");
        let Interaction::Action { event } = interaction_from_gateway(&payload.to_string()).unwrap()
        else {
            panic!("not an action")
        };
        assert_eq!(event.user.id, "300000000000000003");
    }

    #[test]
    fn thread_messages_carry_the_snowflake_time_and_reply() {
        let mut m = message_json(
            "1318349183424823306",
            "700000000000000007",
            "hello <@600000000000000006>",
            "300000000000000003",
        );
        m["message_reference"] =
            json!({"message_id": "800000000000000008", "channel_id": "700000000000000007"});
        let message: Message = serde_json::from_value(m).unwrap();
        let t = thread_message(&message);
        assert_eq!(t.id, "1318349183424823306");
        assert_eq!(t.text, "hello <@600000000000000006>");
        assert_eq!(t.author.id, "300000000000000003");
        assert_eq!(t.reply_to.as_deref(), Some("800000000000000008"));
        // (1318349183424823306 >> 22) + 1420070400000 ms = 2024-12-16T…
        assert!(
            t.metadata.date_sent.starts_with("2024-12-16T"),
            "{}",
            t.metadata.date_sent
        );
        assert_eq!(thread_id(&message), "700000000000000007");
        let bot = UserId::new(600000000000000006);
        assert!(mentions(&message, bot));
        assert!(!is_own_message(&message, bot));
        assert!(is_own_message(&message, UserId::new(300000000000000003)));
        assert_eq!(strip_mention(&message.content, bot), "hello");
    }

    /// A `mentions` entry of a guild `MESSAGE_CREATE`: a user object with a partial `member`.
    fn mentioned(id: &str, username: &str, global_name: Option<&str>, bot: bool) -> Value {
        json!({"id": id, "username": username, "global_name": global_name, "discriminator": "0",
               "avatar": null, "bot": bot, "public_flags": 0,
               "member": {"roles": [], "joined_at": "2025-01-01T00:00:00.000000+00:00",
                          "deaf": false, "mute": false, "flags": 0}})
    }

    #[test]
    fn mentions_are_named_with_their_ranges_in_the_final_text() {
        let bot = UserId::new(600000000000000006);
        let bob = "300000000000000004";
        // A person names the bot first, then asks bob (the legacy `<@!id>` form).
        let mut m = message_json(
            "1318349183424823306",
            "700000000000000007",
            &format!("<@600000000000000006> /ask <@!{bob}>: Ship today? | yes | no"),
            "300000000000000003",
        );
        m["mentions"] = json!([
            mentioned("600000000000000006", "frogbot", None, true),
            mentioned(bob, "bob", Some("Bob"), false)
        ]);
        let message: Message = serde_json::from_value(m).unwrap();
        let t = thread_message_for(&message, bot);
        assert_eq!(t.text, format!("/ask <@!{bob}>: Ship today? | yes | no"));
        assert_eq!(t.mentions.len(), 1, "never the bot: {:?}", t.mentions);
        let named = &t.mentions[0];
        assert_eq!(&t.text[named.start..named.end], format!("<@!{bob}>"));
        assert_eq!(named.user.id, bob);
        assert_eq!(named.user.name.as_deref(), Some("Bob"));
        assert!(!named.user.is_bot);
        // The engine reads the person asked at the start of the command's arguments.
        let (who, rest) = t.named_first(&t.text[5..]).unwrap();
        assert_eq!(who.id, bob);
        assert_eq!(rest, ": Ship today? | yes | no");

        // In text order, each time written, with byte ranges past multi-byte text; a mention
        // Discord did not resolve (no user object) names nobody; another bot is named as a bot.
        let text = format!("¿Qué? <@{bob}> and <@77> and <@555> then <@{bob}> <@x> <@");
        let users = [
            serde_json::from_value::<User>(mentioned(bob, "bob", None, false)).unwrap(),
            serde_json::from_value::<User>(mentioned("555", "helper", None, true)).unwrap(),
        ];
        let found = mentions_in(&text, &users, bot);
        let spans: Vec<(&str, &str)> = found
            .iter()
            .map(|m| (m.user.id.as_str(), &text[m.start..m.end]))
            .collect();
        let bob_written = format!("<@{bob}>");
        assert_eq!(
            spans,
            [
                (bob, bob_written.as_str()),
                ("555", "<@555>"),
                (bob, bob_written.as_str())
            ]
        );
        assert_eq!(
            found[0].user.name.as_deref(),
            Some("bob"),
            "no global name: the username"
        );
        assert!(found[1].user.is_bot);
        assert!(mentions_in("no one here", &users, bot).is_empty());
    }

    #[test]
    fn a_leading_mention_goes_with_its_separator() {
        let bot = UserId::new(123);
        for (text, want) in [
            ("<@123>: stop", "stop"),
            ("<@!123> stop", "stop"),
            ("<@123>, skip", "skip"),
            ("<@123>,skip", "skip"),
            ("  <@123> : stop", "stop"),
            ("<@123> — stop", "stop"),
            ("<@123> – stop", "stop"),
            ("<@123> - stop", "stop"),
            ("<@!123>:", ""),
            ("<@123>", ""),
            // A dash that starts a word is the text's, not a separator.
            ("<@123> -5 degrees", "-5 degrees"),
            // Elsewhere a mention goes alone; another user's stays.
            ("ask <@123>: why", "ask : why"),
            ("<@456>: stop", "<@456>: stop"),
            ("stop", "stop"),
        ] {
            assert_eq!(strip_mention(text, bot), want, "{text:?}");
        }
    }

    // ---- The interactions endpoint ----

    use ed25519_dalek::{Signer, SigningKey};

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn signed(key: &SigningKey, timestamp: &str, body: &str) -> String {
        hex(&key
            .sign(&[timestamp.as_bytes(), body.as_bytes()].concat())
            .to_bytes())
    }

    #[test]
    fn verifies_signatures_and_answers_pings() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let verifier = EndpointVerifier::new(&hex(key.verifying_key().as_bytes())).unwrap();
        let ping = json!({"id": "1", "application_id": "2", "type": 1, "token": "t", "version": 1})
            .to_string();
        let signature = signed(&key, "1700000000", &ping);
        let now = 1_700_000_010;
        assert!(matches!(
            verifier.receive_at(&signature, "1700000000", ping.as_bytes(), now),
            Ok(EndpointRequest::Ping)
        ));
        // Another timestamp, a changed body, a foreign key or garbage: 401.
        assert!(matches!(
            verifier.receive_at(&signature, "1700000001", ping.as_bytes(), now),
            Err(Error::BadSignature)
        ));
        assert!(matches!(
            verifier.verify(&signature, "1700000000", b"{}"),
            Err(Error::BadSignature)
        ));
        let other = SigningKey::from_bytes(&[9; 32]);
        assert!(matches!(
            verifier.verify(&signed(&other, "1", &ping), "1", ping.as_bytes()),
            Err(Error::BadSignature)
        ));
        assert!(matches!(
            verifier.verify("zz", "1", ping.as_bytes()),
            Err(Error::BadSignature)
        ));
        assert!(EndpointVerifier::new("abc").is_err());
        // A signed but malformed body is an error, not a panic.
        let bad = r#"{"type": 3}"#;
        assert!(matches!(
            verifier.receive_at(&signed(&key, "1", bad), "1", bad.as_bytes(), 1),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn old_or_future_timestamps_are_refused_even_when_signed() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let verifier = EndpointVerifier::new(&hex(key.verifying_key().as_bytes())).unwrap();
        let ping = json!({"id": "1", "application_id": "2", "type": 1, "token": "t", "version": 1})
            .to_string();
        let now: i64 = 1_700_000_000;
        let at = |ts: i64| {
            let ts = ts.to_string();
            verifier.receive_at(&signed(&key, &ts, &ping), &ts, ping.as_bytes(), now)
        };
        assert!(matches!(at(now - 300), Ok(EndpointRequest::Ping)));
        assert!(matches!(at(now + 300), Ok(EndpointRequest::Ping)));
        for ts in [now - 301, now + 301, 0, now + i64::MIN, i64::MIN, i64::MAX] {
            assert!(matches!(at(ts), Err(Error::StaleTimestamp)), "{ts}");
        }
        // Not a number (but signed): refused as well.
        assert!(matches!(
            verifier.receive_at(&signed(&key, "soon", &ping), "soon", ping.as_bytes(), now),
            Err(Error::StaleTimestamp)
        ));
        // The clock-reading `receive` refuses the long-past 1700000000.
        let ts = now.to_string();
        assert!(matches!(
            verifier.receive(&signed(&key, &ts, &ping), &ts, ping.as_bytes()),
            Err(Error::StaleTimestamp)
        ));
    }
}
