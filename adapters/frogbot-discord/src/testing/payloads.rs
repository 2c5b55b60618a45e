//! Builders of Discord's real payload shapes: users, channels, threads, messages, component
//! clicks and modal submissions (what the gateway dispatches and the HTTP API returns).

use serde_json::{Value, json};

/// A Discord user object.
pub fn user(id: u64, name: &str, bot: bool) -> Value {
    json!({"id": id.to_string(), "username": name, "global_name": name, "discriminator": "0", "avatar": null, "bot": bot})
}

/// A guild text channel object (type 0) as `GET /channels/{id}` returns it.
pub fn text_channel(id: u64, guild: u64, name: &str) -> Value {
    json!({
        "id": id.to_string(), "type": 0, "guild_id": guild.to_string(), "name": name,
        "position": 0, "flags": 0, "parent_id": null, "topic": null, "last_message_id": null,
        "permission_overwrites": [], "rate_limit_per_user": 0, "nsfw": false
    })
}

/// A public thread channel object (type 11) in `parent`, started by `owner`, as Discord returns
/// it when starting a thread and from `GET /channels/{id}`.
pub fn thread_channel(id: &str, guild: u64, parent: &str, owner: u64, name: &Value) -> Value {
    json!({
        "id": id,
        "type": 11,
        "guild_id": guild.to_string(),
        "parent_id": parent,
        "owner_id": owner.to_string(),
        "name": name,
        "last_message_id": null,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "thread_metadata": {"archived": false, "auto_archive_duration": 1440, "archive_timestamp": "2026-01-01T00:00:00.000000+00:00", "locked": false},
        "flags": 0
    })
}

/// A DM channel object (type 1) with `recipient` (a user object), as `POST /users/@me/channels`
/// and `GET /channels/{id}` return it.
pub fn dm_channel(id: &str, recipient: &Value) -> Value {
    json!({
        "id": id, "type": 1, "last_message_id": null, "flags": 0, "name": null,
        "recipients": [recipient]
    })
}

/// A message object (`MESSAGE_CREATE`'s `d`, and what the HTTP API returns). `guild` `None`: a DM.
pub fn message(
    id: u64,
    channel: u64,
    guild: Option<u64>,
    author: &Value,
    content: &str,
    mentions: &[Value],
) -> Value {
    let mut m = json!({
        "id": id.to_string(),
        "channel_id": channel.to_string(),
        "author": author,
        "content": content,
        "timestamp": "2026-01-01T00:00:00.000000+00:00",
        "edited_timestamp": null,
        "tts": false,
        "mention_everyone": false,
        "mentions": mentions,
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": false,
        "type": 0,
        "flags": 0,
        "components": []
    });
    if let Some(guild) = guild {
        m["guild_id"] = json!(guild.to_string());
    }
    m
}

/// An `INTERACTION_CREATE` of type 3 (`MESSAGE_COMPONENT`) as Discord sends it: a click on
/// `custom_id` (component type 2, a button) or, with `values`, a string select (component type 3),
/// on `message_id` in `channel` (a DM-shaped interaction: `user`, no `member`).
#[allow(clippy::too_many_arguments)] // one argument per field of the payload a test varies
pub fn component_interaction(
    id: u64,
    app_id: u64,
    channel: u64,
    message_id: u64,
    clicker: &Value,
    custom_id: &str,
    values: Option<&[&str]>,
    token: &str,
) -> Value {
    let shown = message(
        message_id,
        channel,
        None,
        &user(app_id, "frogbot", true),
        "",
        &[],
    );
    component_on(id, app_id, &shown, None, clicker, custom_id, values, token)
}

/// [`component_interaction`] on the message object `shown` (as the fake keeps it: its
/// components are in the payload, as Discord sends them). In a `guild` the clicker comes as
/// `member` (with `user` inside) and `guild_id` is set, as Discord sends it; else as `user`.
#[allow(clippy::too_many_arguments)] // one argument per field of the payload a test varies
pub fn component_on(
    id: u64,
    app_id: u64,
    shown: &Value,
    guild: Option<u64>,
    clicker: &Value,
    custom_id: &str,
    values: Option<&[&str]>,
    token: &str,
) -> Value {
    let data = match values {
        Some(values) => json!({"custom_id": custom_id, "component_type": 3, "values": values}),
        None => json!({"custom_id": custom_id, "component_type": 2}),
    };
    let channel = shown["channel_id"].clone();
    let mut payload = json!({
        "id": id.to_string(),
        "application_id": app_id.to_string(),
        "type": 3,
        "data": data,
        "channel_id": channel,
        "channel": {"id": channel, "type": if guild.is_some() { 11 } else { 1 }},
        "token": token,
        "version": 1,
        "message": shown,
        "app_permissions": "2248473465835073",
        "locale": "en-US",
        "entitlements": [],
        "attachment_size_limit": 26214400
    });
    match guild {
        Some(guild) => {
            payload["guild_id"] = json!(guild.to_string());
            payload["guild_locale"] = json!("en-US");
            payload["member"] = json!({
                "user": clicker, "roles": [], "joined_at": "2025-01-01T00:00:00.000000+00:00",
                "deaf": false, "mute": false, "flags": 0, "pending": false,
                "permissions": "2248473465835073", "nick": null, "avatar": null
            });
            payload["authorizing_integration_owners"] = json!({"0": guild.to_string()});
            payload["context"] = json!(0);
        }
        None => {
            payload["user"] = clicker.clone();
            payload["authorizing_integration_owners"] = json!({"1": clicker["id"]});
            payload["context"] = json!(1);
        }
    }
    payload
}

/// An `INTERACTION_CREATE` of type 2 (`APPLICATION_COMMAND`, a slash command) as Discord sends
/// it (the shape of a real one recorded by another project): the command `name` (its
/// registered `command_id`) with string `options` (name, value: option type 3), used by `user`
/// in `channel` — a thread of `guild` (the user as `member`), or a DM (`guild` `None`, as
/// `user`).
#[allow(clippy::too_many_arguments)] // one argument per field of the payload a test varies
pub fn command_interaction(
    id: u64,
    app_id: u64,
    command_id: &str,
    channel: u64,
    guild: Option<u64>,
    user: &Value,
    name: &str,
    options: &[(&str, &str)],
    token: &str,
) -> Value {
    let options: Vec<Value> = options
        .iter()
        .map(|(n, v)| json!({"name": n, "type": 3, "value": v}))
        .collect();
    let mut data = json!({"id": command_id, "name": name, "type": 1});
    if !options.is_empty() {
        data["options"] = json!(options);
    }
    let mut payload = json!({
        "id": id.to_string(),
        "application_id": app_id.to_string(),
        "type": 2,
        "data": data,
        "channel_id": channel.to_string(),
        "channel": {"id": channel.to_string(), "type": if guild.is_some() { 11 } else { 1 },
                    "flags": 0},
        "token": token,
        "version": 1,
        "app_permissions": "562949953863680",
        "locale": "en-US",
        "entitlements": [],
        "entitlement_sku_ids": [],
        "attachment_size_limit": 10485760
    });
    match guild {
        Some(guild) => {
            payload["guild_id"] = json!(guild.to_string());
            payload["guild_locale"] = json!("en-US");
            payload["guild"] = json!({"id": guild.to_string(), "locale": "en-US", "features": []});
            payload["channel"]["guild_id"] = json!(guild.to_string());
            payload["member"] = json!({
                "user": user, "roles": [], "joined_at": "2025-02-28T14:56:24.701000+00:00",
                "deaf": false, "mute": false, "flags": 0, "pending": false,
                "permissions": "9007199254740991", "nick": null, "avatar": null
            });
            payload["authorizing_integration_owners"] = json!({"0": guild.to_string()});
            payload["context"] = json!(0);
        }
        None => {
            payload["user"] = user.clone();
            payload["authorizing_integration_owners"] = json!({"1": user["id"]});
            payload["context"] = json!(1);
        }
    }
    payload
}

/// `command` (a [`command_interaction`]) with a user option `name` (option type 6, `USER`)
/// naming `person` (a user object) first among its options, as Discord sends one: the option's
/// `value` is the user's id, and the user object is in `data.resolved.users` under that id (in a
/// guild, their partial member in `data.resolved.members` too) — "Resolved Data Structure" in
/// Discord's receiving-and-responding reference.
pub fn with_user_option(mut command: Value, name: &str, person: &Value) -> Value {
    let id = person["id"].clone();
    let key = id.as_str().unwrap_or_default().to_owned();
    let data = &mut command["data"];
    let mut options = data["options"].as_array().cloned().unwrap_or_default();
    options.insert(0, json!({"name": name, "type": 6, "value": id}));
    data["options"] = Value::Array(options);
    data["resolved"]["users"][&key] = person.clone();
    if command.get("guild_id").is_some() {
        command["data"]["resolved"]["members"][&key] = json!({
            "roles": [], "joined_at": "2025-02-28T14:56:24.701000+00:00", "flags": 0,
            "pending": false, "permissions": "9007199254740991", "nick": null, "avatar": null,
            "premium_since": null, "communication_disabled_until": null
        });
    }
    command
}

/// An `INTERACTION_CREATE` of type 5 (`MODAL_SUBMIT`): text inputs `values` (custom id, text) in
/// action rows, one a row, in a modal whose custom id is `custom_id`. As Discord sends it, each
/// component carries its numeric `id` and a text input its `type` (4), `custom_id` and `value`
/// (`""` for an optional input left empty) and nothing else of what the modal set.
pub fn modal_submit_interaction(
    id: u64,
    app_id: u64,
    channel: u64,
    submitter: &Value,
    custom_id: &str,
    values: &[(&str, &str)],
    token: &str,
) -> Value {
    let rows: Vec<Value> = values
        .iter()
        .enumerate()
        .map(|(n, (id, text))| {
            let n = 2 * n as u64;
            json!({"type": 1, "id": n + 1, "components":
                [{"type": 4, "id": n + 2, "custom_id": id, "value": text}]})
        })
        .collect();
    json!({
        "id": id.to_string(),
        "application_id": app_id.to_string(),
        "type": 5,
        "data": {"custom_id": custom_id, "components": rows},
        "channel_id": channel.to_string(),
        "user": submitter,
        "token": token,
        "version": 1,
        "locale": "en-US",
        "entitlements": [],
        "attachment_size_limit": 26214400
    })
}

/// [`modal_submit_interaction`] in the shape of a modal built from Labels (component type 18,
/// each wrapping one child): text inputs `values` (custom id, text) and string selects `selects`
/// (custom id, chosen values).
#[allow(clippy::too_many_arguments)] // one argument per field of the payload a test varies
pub fn modal_submit_in_labels(
    id: u64,
    app_id: u64,
    channel: u64,
    submitter: &Value,
    custom_id: &str,
    values: &[(&str, &str)],
    selects: &[(&str, &[&str])],
    token: &str,
) -> Value {
    let mut n = 0;
    let mut next = || {
        n += 1;
        n
    };
    let mut labels: Vec<Value> = Vec::new();
    for (child, text) in values {
        labels.push(json!({"type": 18, "id": next(), "component":
            {"type": 4, "id": next(), "custom_id": child, "value": text}}));
    }
    for (child, chosen) in selects {
        labels.push(json!({"type": 18, "id": next(), "component":
            {"type": 3, "id": next(), "custom_id": child, "values": chosen}}));
    }
    let mut submit =
        modal_submit_interaction(id, app_id, channel, submitter, custom_id, &[], token);
    submit["data"]["components"] = Value::Array(labels);
    submit
}
