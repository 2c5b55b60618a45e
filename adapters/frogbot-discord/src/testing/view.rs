//! What a person sees of a conversation in the fake Discord ([`FakeDiscord::person_view`]), and
//! its plain-text [`transcript`] for golden files.
//!
//! Discord's client shows a message's `content` as Markdown (rendered: `**x**` is bold, so it is
//! kept as written here) with `<@id>` mentions as the user's name (written `@name` here); its
//! embeds; its attached files (a picture inline, any other file as a download, each with its name,
//! type and size); its components as controls whose labels, option labels and descriptions are plain text
//! (Markdown there is shown as typed); its reactions. What notifies: a message created notifies
//! (mentions aside, every member of a thread who follows it) unless it carries the
//! `SUPPRESS_NOTIFICATIONS` flag (`1 << 12`); an edit never notifies; an ephemeral interaction
//! response or followup, and a modal, show only to the person who clicked, in place, and notify
//! no one.

use std::collections::HashMap;

use serde_json::Value;

use super::{EPHEMERAL, FakeDiscord, SUPPRESS_NOTIFICATIONS};

/// One message of a conversation as a person sees it ([`FakeDiscord::person_view`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenMessage {
    /// Its message id (snowflake).
    pub id: String,
    /// Who sent it, by name.
    pub sender: String,
    /// What it shows after its edits: its content (mentions as `@name`), then its embeds
    /// (`▌title`, description, `name: value` fields, `image: url`), then its attached files
    /// (`📎 name (media type, size)`, [`SeenFile`]); for a modal, its title.
    pub text: String,
    /// Its attached files, in order.
    pub files: Vec<SeenFile>,
    /// Its controls, one line a row: buttons as `[label]` (`[label ✖]` danger-styled, `[label
    /// (disabled)]`), a select as `▾ placeholder (pick 1–3): a — description | b`; a modal's
    /// text inputs as `✎ label (short|paragraph, required|optional, up to N)`.
    pub controls: Vec<String>,
    /// Its reactions: each emoji with who reacted, in order.
    pub reactions: Vec<(String, Vec<String>)>,
    /// Whether posting it notified (created without `SUPPRESS_NOTIFICATIONS`, not ephemeral).
    pub notified: bool,
    /// The people its mentions pinged when it was posted, by name: each user written `<@ID>` in
    /// it whom its `allowed_mentions` let be pinged (a person's message: everyone it mentions;
    /// what only one person sees: nobody); never the bot.
    pub pinged: Vec<String>,
    /// Whether it was edited (Discord shows "(edited)").
    pub edited: bool,
    /// For what only one person sees (an ephemeral message, a modal opened): their name.
    pub only_for: Option<String>,
    /// Whether it is a modal (a form opened over the conversation).
    pub modal: bool,
}

/// A file attached to a message, as a person sees it (its bytes: [`FakeDiscord::uploads`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenFile {
    /// Its file name.
    pub filename: String,
    /// Its media type (`content_type`), e.g. `image/png`.
    pub media_type: String,
    /// Its size in bytes.
    pub size: u64,
}

impl SeenFile {
    /// How the view writes it: `📎 name (media type, size)`.
    pub fn line(&self) -> String {
        format!(
            "📎 {} ({}, {})",
            self.filename,
            self.media_type,
            frogbot_channel::files::size_text(self.size)
        )
    }
}

impl FakeDiscord {
    /// The names the fake knows, by user id: the bot (`frogbot`), the users it can DM, every
    /// author of a message (global name, else username).
    fn names(&self) -> HashMap<String, String> {
        let mut names = HashMap::new();
        let mut add = |u: &Value| {
            let name = u["global_name"]
                .as_str()
                .or_else(|| u["username"].as_str())
                .unwrap_or_default();
            if let (Some(id), false) = (u["id"].as_str(), name.is_empty()) {
                names.insert(id.to_owned(), name.to_owned());
            }
        };
        for u in self.inner.users.lock().unwrap().values() {
            add(u);
        }
        for m in self.inner.messages.lock().unwrap().values() {
            add(&m["author"]);
            for u in m["mentions"].as_array().into_iter().flatten() {
                add(u);
            }
        }
        names.insert(self.inner.bot_id.to_string(), "frogbot".into());
        names
    }

    /// What a person sees of the conversation `thread` (a channel or thread id; for an agent's
    /// conversation `{dm}~{root}`, the DM channel), in order (snowflake order, which is Discord's):
    /// the message the thread was started on (its id is the thread's), every message of the
    /// channel now (deleted ones are gone, edits applied), and what only one person was shown
    /// there (ephemeral responses and followups, modals opened). Reactions are the bot's (the
    /// fake keeps no one else's).
    pub fn person_view(&self, thread: &str) -> Vec<SeenMessage> {
        let channel = thread.split('~').next().unwrap_or(thread);
        let names = self.names();
        let mut list: Vec<Value> = self
            .inner
            .messages
            .lock()
            .unwrap()
            .values()
            .filter(|m| m["channel_id"] == channel || m["id"] == channel)
            .cloned()
            .collect();
        list.extend(
            self.inner
                .ephemerals
                .lock()
                .unwrap()
                .iter()
                .filter(|m| m["channel_id"] == channel)
                .cloned(),
        );
        list.sort_by_key(|m| m["id"].as_str().and_then(|i| i.parse::<u64>().ok()));
        let bot = self.inner.bot_id.to_string();
        list.iter()
            .map(|m| seen_by(m, &names, Some(&bot)))
            .collect()
    }
}

/// What a person sees of the message object `m` (as the fake keeps it), names by user id.
pub fn seen(m: &Value, names: &HashMap<String, String>) -> SeenMessage {
    seen_by(m, names, None)
}

/// [`seen`], `bot` (the bot's user id) never among the people pinged.
fn seen_by(m: &Value, names: &HashMap<String, String>, bot: Option<&str>) -> SeenMessage {
    let name_of = |id: &str| names.get(id).cloned().unwrap_or_else(|| format!("<@{id}>"));
    let author = &m["author"];
    let sender = author["id"]
        .as_str()
        .map(name_of)
        .unwrap_or_else(|| "someone".into());
    let flags = m["flags"].as_u64().unwrap_or(0);
    let only_for = m["only_for"].as_str().map(name_of);
    let modal = m.get("modal").filter(|v| !v.is_null());
    let files: Vec<SeenFile> = m["attachments"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| SeenFile {
            filename: a["filename"].as_str().unwrap_or_default().to_owned(),
            media_type: a["content_type"]
                .as_str()
                .unwrap_or("application/octet-stream")
                .to_owned(),
            size: a["size"].as_u64().unwrap_or(0),
        })
        .collect();
    let (text, controls) = match modal {
        Some(data) => (
            format!("form “{}”", data["title"].as_str().unwrap_or_default()),
            modal_controls(data),
        ),
        None => {
            let mut text = with_names(m["content"].as_str().unwrap_or_default(), names);
            for e in m["embeds"].as_array().into_iter().flatten() {
                text.push_str(&embed_text(e, names));
            }
            for f in &files {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&f.line());
            }
            (text, component_lines(&m["components"]))
        }
    };
    // The fake keeps only the bot's own reactions.
    let reactions = m["me_reactions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|e| (e.to_owned(), vec!["frogbot".to_owned()]))
        .collect();
    // What the fake computed when the bot posted it; a person's message pings whom it mentions;
    // what only one person sees pings nobody.
    let pinged = match m["pinged"].as_array() {
        _ if only_for.is_some() || flags & EPHEMERAL != 0 => Vec::new(),
        Some(ids) => ids
            .iter()
            .filter_map(|i| i.as_str().map(str::to_owned))
            .collect(),
        None => super::api::pinged(&m["content"], None),
    }
    .into_iter()
    .filter(|id| Some(id.as_str()) != bot)
    .map(|id| name_of(&id))
    .collect();
    SeenMessage {
        id: m["id"].as_str().unwrap_or_default().to_owned(),
        sender,
        text,
        files,
        controls,
        reactions,
        notified: only_for.is_none()
            && flags & SUPPRESS_NOTIFICATIONS == 0
            && flags & EPHEMERAL == 0,
        pinged,
        edited: !m["edited_timestamp"].is_null(),
        only_for,
        modal: modal.is_some(),
    }
}

/// `text` with every `<@id>` / `<@!id>` mention written `@name` (an unknown id stays as it is).
fn with_names(text: &str, names: &HashMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("<@") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 2..];
        let digits = tail.strip_prefix('!').unwrap_or(tail);
        let bang = tail.len() - digits.len();
        let n = digits.chars().take_while(char::is_ascii_digit).count();
        match (n > 0, digits[n..].starts_with('>')) {
            (true, true) if names.contains_key(&digits[..n]) => {
                out.push('@');
                out.push_str(&names[&digits[..n]]);
                rest = &tail[bang + n + 1..];
            }
            _ => {
                out.push_str("<@");
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

fn embed_text(e: &Value, names: &HashMap<String, String>) -> String {
    let mut out = String::new();
    let mut line = |s: String| {
        out.push('\n');
        out.push_str(&s);
    };
    if let Some(t) = e["author"]["name"].as_str() {
        line(format!("▌{t}"));
    }
    if let Some(t) = e["title"].as_str() {
        line(format!("▌{}", with_names(t, names)));
    }
    if let Some(t) = e["description"].as_str() {
        line(with_names(t, names));
    }
    for f in e["fields"].as_array().into_iter().flatten() {
        line(format!(
            "{}: {}",
            f["name"].as_str().unwrap_or_default(),
            with_names(f["value"].as_str().unwrap_or_default(), names)
        ));
    }
    if let Some(url) = e["image"]["url"].as_str() {
        line(format!("image: {url}"));
    }
    if let Some(t) = e["footer"]["text"].as_str() {
        line(format!("— {t}"));
    }
    out
}

/// One line a row: buttons `[label]`, a select with its options.
fn component_lines(rows: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    for row in rows.as_array().into_iter().flatten() {
        let mut parts = Vec::new();
        for c in row["components"].as_array().into_iter().flatten() {
            match c["type"].as_u64() {
                Some(2) => {
                    let emoji = c["emoji"]["name"].as_str().unwrap_or_default();
                    let label = c["label"].as_str().unwrap_or_default();
                    let mut text = [emoji, label]
                        .iter()
                        .filter(|s| !s.is_empty())
                        .copied()
                        .collect::<Vec<_>>()
                        .join(" ");
                    if c["style"] == 4 {
                        text.push_str(" ✖");
                    }
                    if c["style"] == 5 {
                        text.push_str(&format!(" ↗ {}", c["url"].as_str().unwrap_or_default()));
                    }
                    if c["disabled"] == true {
                        text.push_str(" (disabled)");
                    }
                    parts.push(format!("[{text}]"));
                }
                Some(3) => {
                    let options: Vec<String> = c["options"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|o| {
                            let label = o["label"].as_str().unwrap_or_default();
                            match o["description"].as_str() {
                                Some(d) => format!("{label} — {d}"),
                                None => label.to_owned(),
                            }
                        })
                        .collect();
                    let min = c["min_values"].as_u64().unwrap_or(1);
                    let max = c["max_values"].as_u64().unwrap_or(1);
                    let pick = if min == max {
                        format!("pick {min}")
                    } else {
                        format!("pick {min}–{max}")
                    };
                    parts.push(format!(
                        "▾ {} ({pick}): {}",
                        c["placeholder"].as_str().unwrap_or("Make a selection"),
                        options.join(" | ")
                    ));
                }
                other => parts.push(format!("(component type {other:?})")),
            }
        }
        lines.push(parts.join(" "));
    }
    lines
}

/// A modal's inputs, one a line (action rows of text inputs, or Labels of type 18 wrapping a
/// text input or a select).
fn modal_controls(data: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    for row in data["components"].as_array().into_iter().flatten() {
        let (label, children) = match row["type"].as_u64() {
            Some(18) => (
                row["label"].as_str().map(str::to_owned),
                vec![row["component"].clone()],
            ),
            _ => (
                None,
                row["components"].as_array().cloned().unwrap_or_default(),
            ),
        };
        for c in children {
            match c["type"].as_u64() {
                Some(4) => {
                    let label = c["label"]
                        .as_str()
                        .map(str::to_owned)
                        .or(label.clone())
                        .unwrap_or_default();
                    let style = if c["style"] == 2 {
                        "paragraph"
                    } else {
                        "short"
                    };
                    let required = if c["required"] == false {
                        "optional"
                    } else {
                        "required"
                    };
                    let mut line = format!("✎ {label} ({style}, {required}");
                    if let Some(n) = c["max_length"].as_u64() {
                        line.push_str(&format!(", up to {n}"));
                    }
                    line.push(')');
                    if let Some(p) = c["placeholder"].as_str() {
                        line.push_str(&format!(" “{p}”"));
                    }
                    if let Some(v) = c["value"].as_str() {
                        line.push_str(&format!(" = {v}"));
                    }
                    lines.push(line);
                }
                _ => lines.extend(component_lines(&Value::Array(vec![
                    serde_json::json!({"type": 1, "components": [c]}),
                ]))),
            }
        }
    }
    lines
}

/// The view as stable plain text for golden files: one block per message, `[n] sender
/// (notified|silent)(, pings @a, @b)(, edited)` (`→ only NAME sees` for an ephemeral message or
/// modal; `pings`: [`SeenMessage::pinged`]), its text
/// indented by four spaces, then its controls (`    ⌨ …`) and reactions (`    reactions: ✅
/// frogbot`). Nothing in it varies between runs (no ids, no times) as long as the texts do not.
pub fn transcript(seen: &[SeenMessage]) -> String {
    let mut out = String::new();
    for (n, m) in seen.iter().enumerate() {
        let mut head = format!("[{}] {}", n + 1, m.sender);
        if let Some(who) = &m.only_for {
            head.push_str(&format!(" → only {who} sees"));
        }
        head.push_str(if m.notified { " (notified" } else { " (silent" });
        if !m.pinged.is_empty() {
            let who: Vec<String> = m.pinged.iter().map(|p| format!("@{p}")).collect();
            head.push_str(&format!(", pings {}", who.join(", ")));
        }
        if m.edited {
            head.push_str(", edited");
        }
        head.push(')');
        out.push_str(&head);
        out.push('\n');
        for line in m.text.lines() {
            if line.is_empty() {
                out.push('\n');
            } else {
                out.push_str(&format!("    {line}\n"));
            }
        }
        for line in &m.controls {
            out.push_str(&format!("    ⌨ {line}\n"));
        }
        if !m.reactions.is_empty() {
            let r: Vec<String> = m
                .reactions
                .iter()
                .map(|(e, who)| format!("{e} {}", who.join(", ")))
                .collect();
            out.push_str(&format!("    reactions: {}\n", r.join(" · ")));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_read_as_names_and_unknown_ids_stay() {
        let names: HashMap<String, String> = [("12".to_owned(), "ada".to_owned())].into();
        assert_eq!(with_names("<@12>: hi <@!12>", &names), "@ada: hi @ada");
        assert_eq!(with_names("<@99> <@x> <@", &names), "<@99> <@x> <@");
    }

    #[test]
    fn a_transcript_block_per_message() {
        let m = SeenMessage {
            id: "1".into(),
            sender: "frogbot".into(),
            text: "**Env**\nWhere?".into(),
            files: Vec::new(),
            controls: vec!["[a] [Skip]".into()],
            reactions: vec![("✅".into(), vec!["frogbot".into()])],
            notified: false,
            pinged: Vec::new(),
            edited: true,
            only_for: None,
            modal: false,
        };
        assert_eq!(
            transcript(std::slice::from_ref(&m)),
            "[1] frogbot (silent, edited)\n    **Env**\n    Where?\n    ⌨ [a] [Skip]\n    reactions: ✅ frogbot\n\n"
        );
        let asking = SeenMessage {
            notified: true,
            pinged: vec!["bob".into()],
            edited: false,
            reactions: Vec::new(),
            ..m
        };
        assert!(transcript(&[asking]).starts_with("[1] frogbot (notified, pings @bob)\n"));
    }

    #[test]
    fn pings_follow_allowed_mentions() {
        use super::super::api::pinged;
        let content = serde_json::json!("<@1> and <@!2>, <@1> again, <@&3> <@x>");
        assert_eq!(
            pinged(&content, None),
            ["1", "2"],
            "the default: every user"
        );
        let none = serde_json::json!({"parse": [], "users": [], "roles": []});
        assert!(pinged(&content, Some(&none)).is_empty());
        let only = serde_json::json!({"parse": [], "users": ["2", "9"], "roles": []});
        assert_eq!(pinged(&content, Some(&only)), ["2"], "listed and written");
        let users = serde_json::json!({"parse": ["users"]});
        assert_eq!(pinged(&content, Some(&users)), ["1", "2"]);
    }
}
