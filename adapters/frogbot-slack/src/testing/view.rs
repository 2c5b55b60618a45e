//! What a person sees in Slack's client: the fake's threads and modals read as plain text,
//! and the transcripts and golden files tests compare them with.

use serde_json::Value;

use super::BOT_USER;
use super::api::{FakeSlack, lock, ts_key};
use crate::ids::{message_id, split_id};

/// The name the person view gives the bot.
pub const BOT_NAME: &str = "frogbot";

/// One message of a thread as a person sees it in Slack's client ([`FakeSlack::person_view`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SeenMessage {
    /// `channel:ts`.
    pub id: String,
    /// Who wrote it: [`BOT_NAME`] for the bot, else the person's name when the fake knows it
    /// ([`FakeSlack::set_user_name`]), else their user id.
    pub sender: String,
    /// What it shows after edits, as plain lines: its blocks' texts (a message with blocks
    /// shows them, not its `text`), else its `text`; mentions as `@name`, Slack's `&lt;` `&gt;`
    /// `&amp;` as the characters. Controls are in [`SeenMessage::controls`].
    pub text: String,
    /// Its controls, one line per actions block or accessory, in order: `[label]` a button,
    /// `select "placeholder": a | b — description` a select, `checkboxes: ☐ a | ☑ b`,
    /// `radio: ○ a | ● b`, …
    pub controls: Vec<String>,
    /// Its reactions: each emoji name with who reacted, in order.
    pub reactions: Vec<(String, Vec<String>)>,
    /// Whether its posting notified. On Slack a new message does (`chat.postMessage`, the
    /// message `chat.startStream` opens, a person's message); `chat.update` and
    /// `chat.appendStream` / `chat.stopStream` never do, and an ephemeral message does not.
    /// Slack has no silent post, so each message of a reply split over several (a streamed
    /// message holds 12,000 characters of Markdown) notifies; what the first notification shows
    /// is held back until the text reads as a start (see the outbox's `SlackStream`).
    pub notified: bool,
    /// What the notification showed: the text the message was posted with (`None` when it did
    /// not notify).
    pub notification: Option<String>,
    /// Who its posting notified by name, as Slack does for a mention (`<@U…>` in the text or a
    /// block's `mrkdwn`, a rich text `user` element): their names (as [`SeenMessage::sender`]),
    /// in order. Empty for an ephemeral message, and an edit mentions nobody anew.
    pub mentioned: Vec<String>,
    /// Whether a `chat.update` changed it.
    pub edited: bool,
    /// Whether it is a native stream not stopped yet.
    pub streaming: bool,
    /// For an ephemeral message: the only person who sees it.
    pub only_for: Option<String>,
    /// The files it shares, in order (a file's share message shows one: its name, type, size).
    pub files: Vec<SeenFile>,
}

/// A file a message shows, as a person sees it in Slack's client ([`SeenMessage::files`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenFile {
    /// Its id (`F…`).
    pub id: String,
    /// Its file name.
    pub name: String,
    /// Its title (what the client shows above it).
    pub title: String,
    /// Its media type (`mimetype`).
    pub media_type: String,
    /// Its size in bytes.
    pub size: u64,
}

impl SeenFile {
    fn from_object(f: &Value) -> Self {
        let text = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
        Self {
            id: text("id"),
            name: text("name"),
            title: text("title"),
            media_type: text("mimetype"),
            size: f["size"].as_u64().unwrap_or(0),
        }
    }
}

impl FakeSlack {
    /// What a person sees of the thread `channel:thread_ts`, in order: its root and replies
    /// after edits (deleted messages gone), with their reactions and whether each notified, and
    /// the ephemeral messages shown in it (each marked with the one person who sees it).
    pub fn person_view(&self, thread: &str) -> Vec<SeenMessage> {
        let Ok((channel, root)) = split_id(thread) else {
            return Vec::new();
        };
        let store = lock(&self.shared);
        let name = |user: &str| -> String {
            if user == BOT_USER {
                BOT_NAME.to_owned()
            } else {
                store
                    .names
                    .get(user)
                    .cloned()
                    .unwrap_or_else(|| user.to_owned())
            }
        };
        let mut out: Vec<(String, SeenMessage)> = Vec::new();
        for m in store.messages.iter().filter(|m| {
            m.channel == channel && (m.ts == root || m.thread_ts.as_deref() == Some(root))
        }) {
            let (text, controls) = match m.blocks.as_array().filter(|b| !b.is_empty()) {
                Some(blocks) => seen_blocks(blocks, &name),
                None => (seen_text(&m.text, &name), Vec::new()),
            };
            let mut reactions: Vec<(String, Vec<String>)> = Vec::new();
            for (emoji, user) in &m.reactions {
                match reactions.iter_mut().find(|(e, _)| e == emoji) {
                    Some((_, by)) => by.push(name(user)),
                    None => reactions.push((emoji.clone(), vec![name(user)])),
                }
            }
            out.push((
                m.ts.clone(),
                SeenMessage {
                    id: m.id(),
                    sender: if m.bot {
                        BOT_NAME.to_owned()
                    } else {
                        name(&m.user)
                    },
                    text,
                    controls,
                    reactions,
                    notified: true,
                    notification: Some(seen_text(&m.first_text, &name)),
                    mentioned: m.mentioned.iter().map(|u| name(u)).collect(),
                    edited: m.edited,
                    streaming: m.streaming,
                    only_for: None,
                    files: m.files.iter().map(SeenFile::from_object).collect(),
                },
            ));
        }
        for e in store
            .ephemerals
            .iter()
            .filter(|e| e.channel == channel && e.thread_ts.as_deref() == Some(root))
        {
            out.push((
                e.ts.clone(),
                SeenMessage {
                    id: message_id(&e.channel, &e.ts),
                    sender: BOT_NAME.to_owned(),
                    text: seen_text(&e.text, &name),
                    controls: Vec::new(),
                    reactions: Vec::new(),
                    notified: false,
                    notification: None,
                    mentioned: Vec::new(),
                    edited: false,
                    streaming: false,
                    only_for: Some(name(&e.user)),
                    files: Vec::new(),
                },
            ));
        }
        out.sort_by_key(|(ts, _)| ts_key(ts));
        out.into_iter().map(|(_, m)| m).collect()
    }

    /// The modals opened so far as a person sees them, each as plain lines ([`seen_view`]).
    pub fn seen_views(&self) -> Vec<String> {
        let names = lock(&self.shared).names.clone();
        let name = |user: &str| names.get(user).cloned().unwrap_or_else(|| user.to_owned());
        self.views().iter().map(|v| seen_view(v, &name)).collect()
    }
}

/// A modal as a person sees it: its title, each block's text and controls (an input block as
/// its label, `(optional)` where it is, its control and hint), then its submit and close
/// buttons.
pub fn seen_view(view: &Value, name: &dyn Fn(&str) -> String) -> String {
    let mut lines = vec![format!("modal \"{}\"", plain_of(&view["title"]))];
    if let Some(blocks) = view["blocks"].as_array() {
        for b in blocks {
            let (text, controls) = seen_blocks(std::slice::from_ref(b), name);
            lines.extend(
                text.lines()
                    .filter(|l| !l.is_empty())
                    .map(|l| format!("  {l}")),
            );
            lines.extend(controls.iter().map(|c| format!("  > {c}")));
        }
    }
    let mut buttons = Vec::new();
    for key in ["submit", "close"] {
        if view[key].is_object() {
            buttons.push(format!("[{}]", plain_of(&view[key])));
        }
    }
    if !buttons.is_empty() {
        lines.push(format!("  > {}", buttons.join(" ")));
    }
    lines.join("\n")
}

/// The characters of a text object (`{"type", "text"}`) or a string.
fn plain_of(v: &Value) -> String {
    v["text"]
        .as_str()
        .or_else(|| v.as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Slack's message text as the client shows it: `<@U1>` / `<@U1|name>` as `@name`, `<url|label>`
/// as `label (url)`, `<url>` as the url, and `&lt;` `&gt;` `&amp;` as the characters. Markdown
/// marks stay as they are (so raw `**x**` is seen).
pub fn seen_text(text: &str, name: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find('<') {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find('>') else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let inner = &rest[start + 1..start + end];
        let (target, label) = match inner.split_once('|') {
            Some((t, l)) => (t, Some(l)),
            None => (inner, None),
        };
        if let Some(user) = target.strip_prefix('@') {
            out.push('@');
            out.push_str(&name(user));
        } else if let Some(special) = target.strip_prefix('!') {
            out.push('@');
            out.push_str(label.unwrap_or(special));
        } else {
            match label {
                Some(l) => out.push_str(&format!("{l} ({target})")),
                None => out.push_str(target),
            }
        }
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// An option (`{text, description}`) as `label — description`.
fn seen_option(o: &Value) -> String {
    let label = plain_of(&o["text"]);
    match o["description"]["text"].as_str() {
        Some(d) => format!("{label} — {d}"),
        None => label,
    }
}

/// One interactive element as a line (`None` for what is no control).
fn seen_control(e: &Value) -> Option<String> {
    let t = e["type"].as_str().unwrap_or_default();
    let options = |key: &str| -> Vec<Value> { e[key].as_array().cloned().unwrap_or_default() };
    let initial: Vec<Value> = match (&e["initial_options"], &e["initial_option"]) {
        (Value::Array(a), _) => a.clone(),
        (_, o) if o.is_object() => vec![o.clone()],
        _ => Vec::new(),
    };
    let picked = |o: &Value| initial.iter().any(|i| i["value"] == o["value"]);
    let placeholder = e["placeholder"]["text"]
        .as_str()
        .map(|p| format!(" \"{p}\""))
        .unwrap_or_default();
    let listed = |marks: (&str, &str)| -> String {
        options("options")
            .iter()
            .map(|o| {
                format!(
                    "{} {}",
                    if picked(o) { marks.1 } else { marks.0 },
                    seen_option(o)
                )
            })
            .collect::<Vec<_>>()
            .join(" | ")
    };
    let line = match t {
        "button" => {
            let mut b = format!("[{}]", plain_of(&e["text"]));
            if let Some(style) = e["style"].as_str() {
                b.push_str(&format!("({style})"));
            }
            if e["confirm"].is_object() {
                b.push_str(&format!(
                    " (asks \"{}\": \"{}\" [{}] [{}])",
                    plain_of(&e["confirm"]["title"]),
                    plain_of(&e["confirm"]["text"]),
                    plain_of(&e["confirm"]["confirm"]),
                    plain_of(&e["confirm"]["deny"]),
                ));
            }
            b
        }
        "static_select" | "multi_static_select" | "overflow" => {
            let kind = match t {
                "static_select" => "select",
                "multi_static_select" => "multi-select",
                _ => "overflow",
            };
            let shown: Vec<String> = options("options")
                .iter()
                .map(|o| {
                    if picked(o) {
                        format!("{} (selected)", seen_option(o))
                    } else {
                        seen_option(o)
                    }
                })
                .collect();
            format!("{kind}{placeholder}: {}", shown.join(" | "))
        }
        "checkboxes" => format!("checkboxes: {}", listed(("☐", "☑"))),
        "radio_buttons" => format!("radio: {}", listed(("○", "●"))),
        "plain_text_input" => {
            let mut l = format!("text field{placeholder}");
            if let Some(v) = e["initial_value"].as_str() {
                l.push_str(&format!(" = \"{v}\""));
            }
            if let Some(n) = e["max_length"].as_u64() {
                l.push_str(&format!(" (at most {n} characters)"));
            }
            l
        }
        "number_input" => {
            let mut l = format!("number field{placeholder}");
            if let Some(v) = e["initial_value"].as_str() {
                l.push_str(&format!(" = {v}"));
            }
            l
        }
        "" => return None,
        other => format!("[{other}]"),
    };
    Some(line)
}

/// A list of blocks as plain text lines and control lines.
fn seen_blocks(blocks: &[Value], name: &dyn Fn(&str) -> String) -> (String, Vec<String>) {
    let mut text: Vec<String> = Vec::new();
    let mut controls = Vec::new();
    let mrk = |v: &Value| seen_text(&plain_of(v), name);
    for b in blocks {
        match b["type"].as_str().unwrap_or_default() {
            "section" => {
                if b["text"].is_object() {
                    text.push(mrk(&b["text"]));
                }
                for f in b["fields"].as_array().into_iter().flatten() {
                    text.push(mrk(f));
                }
                if let Some(c) = b.get("accessory").and_then(seen_control) {
                    controls.push(c);
                }
            }
            "header" | "markdown" => text.push(mrk(&b["text"])),
            "context" => text.push(
                b["elements"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|e| match e["type"].as_str() {
                        Some("image") => format!("[image: {}]", plain_of(&e["alt_text"])),
                        _ => mrk(e),
                    })
                    .collect::<Vec<_>>()
                    .join("  "),
            ),
            "divider" => text.push("────".into()),
            "image" => text.push(format!("[image: {}]", plain_of(&b["alt_text"]))),
            "actions" => {
                let line: Vec<String> = b["elements"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(seen_control)
                    .collect();
                controls.push(line.join(" "));
            }
            "input" => {
                let mut label = plain_of(&b["label"]);
                if b["optional"] == true {
                    label.push_str(" (optional)");
                }
                text.push(label);
                if let Some(c) = seen_control(&b["element"]) {
                    controls.push(c);
                }
                if b["hint"].is_object() {
                    text.push(format!("hint: {}", plain_of(&b["hint"])));
                }
            }
            "table" => {
                for row in b["rows"].as_array().into_iter().flatten() {
                    let cells: Vec<String> = row
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|c| {
                            c["text"]
                                .as_str()
                                .map(str::to_owned)
                                .unwrap_or_else(|| rich_text(c))
                        })
                        .collect();
                    text.push(cells.join(" | "));
                }
            }
            "rich_text" => text.push(rich_text(b)),
            other => text.push(format!("[{other} block]")),
        }
    }
    (text.join("\n"), controls)
}

/// The characters of a `rich_text` value, depth first.
fn rich_text(v: &Value) -> String {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(t)) = o.get("text") {
                return t.clone();
            }
            o.get("elements").map(rich_text).unwrap_or_default()
        }
        Value::Array(a) => a.iter().map(rich_text).collect(),
        _ => String::new(),
    }
}

/// The person view as stable plain text for golden files: one block per message, `[n] sender
/// (notified|silent)(, edited)(, streaming)(, only for NAME)`, the notification's first line
/// where it notified, whom a bot message's posting mentioned (`mentions: @bob`), the text
/// indented, then `controls:` and `reactions:` lines.
pub fn transcript(seen: &[SeenMessage]) -> String {
    let mut out = String::new();
    for (i, m) in seen.iter().enumerate() {
        let mut head = format!(
            "[{}] {} ({}",
            i + 1,
            m.sender,
            if m.notified { "notified" } else { "silent" }
        );
        if m.edited {
            head.push_str(", edited");
        }
        if m.streaming {
            head.push_str(", streaming");
        }
        if let Some(who) = &m.only_for {
            head.push_str(&format!(", only for {who}"));
        }
        head.push(')');
        out.push_str(&head);
        out.push('\n');
        if let Some(n) = &m.notification
            && m.sender == BOT_NAME
        {
            let first = n.lines().next().unwrap_or_default();
            let cut: String = first.chars().take(100).collect();
            let more = if cut.len() < n.len() { "…" } else { "" };
            out.push_str(&format!("    notification: \"{cut}{more}\"\n"));
        }
        if !m.mentioned.is_empty() && m.sender == BOT_NAME {
            let who: Vec<String> = m.mentioned.iter().map(|n| format!("@{n}")).collect();
            out.push_str(&format!("    mentions: {}\n", who.join(" ")));
        }
        for line in m.text.lines() {
            if line.is_empty() {
                out.push('\n');
            } else {
                out.push_str(&format!("    {line}\n"));
            }
        }
        for c in &m.controls {
            out.push_str(&format!("    controls: {c}\n"));
        }
        for f in &m.files {
            out.push_str(&format!(
                "    file: {} \"{}\" ({}, {} bytes)\n",
                f.name, f.title, f.media_type, f.size
            ));
        }
        if !m.reactions.is_empty() {
            let r: Vec<String> = m
                .reactions
                .iter()
                .map(|(e, by)| format!(":{e}: {}", by.join(", ")))
                .collect();
            out.push_str(&format!("    reactions: {}\n", r.join(" · ")));
        }
    }
    out
}

/// Compares `actual` with the golden file `path` (`UPDATE_GOLDEN=1` writes it instead); on a
/// difference, panics with the lines that differ (`-` expected, `+` actual).
pub fn assert_golden(path: &std::path::Path, actual: &str) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("golden dir");
        }
        std::fs::write(path, actual).expect("golden written");
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    if expected == actual {
        return;
    }
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let mut diff = String::new();
    for i in 0..e.len().max(a.len()) {
        match (e.get(i), a.get(i)) {
            (Some(x), Some(y)) if x == y => diff.push_str(&format!("  {x}\n")),
            (x, y) => {
                if let Some(x) = x {
                    diff.push_str(&format!("- {x}\n"));
                }
                if let Some(y) = y {
                    diff.push_str(&format!("+ {y}\n"));
                }
            }
        }
    }
    panic!(
        "{} differs (UPDATE_GOLDEN=1 rewrites it):\n{diff}",
        path.display()
    );
}
