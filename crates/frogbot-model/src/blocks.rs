//! Blocks: the typed pieces of an agent message beside its Markdown text (the rply messages
//! model). A message carries each block as an AI SDK data part `{"type": "data-block-{type}",
//! "id": BLOCK_ID, "data": {…}}`, so a `useChat` front end draws them and every adapter reads
//! them with [`Block::from_part`] / [`blocks_of`].
//!
//! Types: `table`, `progress`, `image`, `code`, `fields`, and `html` (an app: a pin whose only
//! content is an HTML page). A block of a type this version does not know is kept as it came
//! ([`BlockKind::Unknown`]) and drawn as [`UNKNOWN_BLOCK_TEXT`], so newer agents never break older
//! apps. Any block may carry **event buttons** ([`EventButton`]): a click sends an event (the
//! block id and the button's value) to the agent's inbox any number of times and answers nothing.
//!
//! The input blocks (`choice`, `text_input`, `number_input`, `toggle`, `confirm`) are questions:
//! they go through the question engine (`POST /api/asks`), not here.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::{MessagePart, UiMessage};

/// The prefix of a block part's `type`.
pub const BLOCK_PART_PREFIX: &str = "data-block-";

/// What every app shows for a block of a type it does not know.
pub const UNKNOWN_BLOCK_TEXT: &str =
    "⚠️ This message has content this version cannot show. Update FrogBot to see it.";

/// Most rows a table keeps (the rest are refused: an agent pages its tables).
pub const MAX_TABLE_ROWS: usize = 100;
/// Most columns a table keeps.
pub const MAX_TABLE_COLUMNS: usize = 20;
/// Most key/value pairs a `fields` block keeps.
pub const MAX_FIELDS: usize = 50;
/// Most event buttons one block carries.
pub const MAX_EVENT_BUTTONS: usize = 5;
/// Most blocks one message carries.
pub const MAX_BLOCKS: usize = 20;
/// Longest text in one cell, label, key, value, alt or button (characters).
pub const MAX_CELL_CHARS: usize = 2_000;
/// Longest code or HTML body (bytes).
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// A button on a block that sends an event (not an answer) when clicked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventButton {
    /// What the button says.
    pub label: String,
    /// What the event carries (the label when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl EventButton {
    /// The value an event from this button carries.
    pub fn value(&self) -> &str {
        self.value.as_deref().unwrap_or(&self.label)
    }
}

/// One key/value pair of a `fields` block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    /// The key (shown bold).
    pub key: String,
    /// The value.
    pub value: String,
}

/// What a block shows.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum BlockKind {
    /// `{"type": "table", "columns": [..], "rows": [[..], ..]}`: a header row and rows of cells
    /// (strings; numbers and booleans are written as text).
    Table {
        /// The header.
        columns: Vec<String>,
        /// The rows, each at most `columns.len()` cells (short rows are padded when drawn).
        rows: Vec<Vec<String>>,
    },
    /// `{"type": "progress", "value": 3, "max": 10, "label": "…"}` (`max` 100 by default).
    Progress {
        /// How far.
        value: f64,
        /// Out of.
        max: f64,
        /// What is progressing.
        label: Option<String>,
    },
    /// `{"type": "image", "url": "https://…", "alt": "…"}`.
    Image {
        /// An `http(s)` URL.
        url: String,
        /// The text shown where the image cannot be.
        alt: String,
    },
    /// `{"type": "code", "code": "…", "language": "rust"}`.
    Code {
        /// The code.
        code: String,
        /// Its language, for highlighting.
        language: Option<String>,
    },
    /// `{"type": "fields", "fields": [{"key", "value"}, ..]}`.
    Fields {
        /// The pairs, in order.
        fields: Vec<Field>,
    },
    /// `{"type": "html", "html": "<!doctype html>…", "title": "…"}`: an app. The web chat shows
    /// it in a sandboxed iframe (scripts, no same origin); platforms show a link to it.
    Html {
        /// The page.
        html: String,
        /// A name for the link.
        title: Option<String>,
        /// The app's capability (`link`, 32 hex digits): given by the engine when the message is
        /// posted ([`stamp_app_link`]), it makes the app's web view address
        /// (`{public_url}/apps/{chat}/{message}/{link}`), readable by whoever holds it.
        link: Option<String>,
        /// That address, set only on the copy of a message drawn on a platform when the server
        /// has a `public_url` ([`with_app_urls`]); never stored.
        url: Option<String>,
    },
    /// A type this version does not know, kept as it came (`type`, then its other fields).
    Unknown {
        /// The type it said it was.
        type_name: String,
        /// Everything else it carried.
        data: Map<String, Value>,
    },
}

/// A block: an optional id (to patch it or to tell its events apart), what it shows, and its
/// event buttons.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Its id within the message (`A-Z a-z 0-9 _ -`, 1–64), for patches and events.
    pub id: Option<String>,
    /// What it shows.
    pub kind: BlockKind,
    /// Buttons that send events.
    pub events: Vec<EventButton>,
}

/// Why a block (or a list of them) was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BlockError(pub String);

fn err(s: impl Into<String>) -> BlockError {
    BlockError(s.into())
}

/// The input block types, which belong to questions.
pub const INPUT_BLOCK_TYPES: [&str; 5] =
    ["choice", "text_input", "number_input", "toggle", "confirm"];

fn cell(v: &Value, what: &str) -> Result<String, BlockError> {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        _ => return Err(err(format!("{what} must be text, a number or a boolean"))),
    };
    if s.chars().count() > MAX_CELL_CHARS {
        return Err(err(format!(
            "{what} is longer than {MAX_CELL_CHARS} characters"
        )));
    }
    Ok(s)
}

fn text_field(o: &Map<String, Value>, key: &str, ty: &str) -> Result<Option<String>, BlockError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::String(_)) => cell(v, &format!("{ty}.{key}")).map(Some),
        Some(_) => Err(err(format!("{ty}.{key} must be a string"))),
    }
}

fn number_field(o: &Map<String, Value>, key: &str, ty: &str) -> Result<Option<f64>, BlockError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|f| f.is_finite())
            .map(Some)
            .ok_or_else(|| err(format!("{ty}.{key} must be a finite number"))),
        Some(_) => Err(err(format!("{ty}.{key} must be a number"))),
    }
}

/// Whether `id` is a usable block id.
pub fn valid_block_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Block {
    /// Reads a block as agents write it: `{"type", "id"?, "events"?, …the type's fields}`.
    /// A known type with bad fields is refused with a reason; an unknown type is kept.
    pub fn from_json(v: &Value) -> Result<Block, BlockError> {
        let o = v
            .as_object()
            .ok_or_else(|| err("a block must be an object"))?;
        let ty = o
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| err("a block needs a string \"type\""))?;
        if INPUT_BLOCK_TYPES.contains(&ty) {
            return Err(err(format!(
                "a {ty} block is an input: ask it with POST /api/asks (frogbot ask), which waits for the answer"
            )));
        }
        let id = match o.get("id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if valid_block_id(s) => Some(s.clone()),
            Some(_) => {
                return Err(err("a block id must be 1-64 characters of A-Z a-z 0-9 _ -"));
            }
        };
        let events = match o.get("events") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => {
                let events: Vec<EventButton> = serde_json::from_value(v.clone())
                    .map_err(|e| err(format!("events must be [{{\"label\", \"value\"?}}]: {e}")))?;
                if events.len() > MAX_EVENT_BUTTONS {
                    return Err(err(format!(
                        "a block carries at most {MAX_EVENT_BUTTONS} event buttons"
                    )));
                }
                for e in &events {
                    if e.label.trim().is_empty() {
                        return Err(err("an event button needs a label"));
                    }
                    cell(&Value::String(e.label.clone()), "an event button's label")?;
                    cell(
                        &Value::String(e.value().to_owned()),
                        "an event button's value",
                    )?;
                }
                if !events.is_empty() && id.is_none() {
                    return Err(err(
                        "a block with event buttons needs an id (the events name it)",
                    ));
                }
                events
            }
        };
        let kind = match ty {
            "table" => {
                let columns = match o.get("columns") {
                    Some(Value::Array(a)) => a
                        .iter()
                        .map(|c| cell(c, "a column"))
                        .collect::<Result<Vec<_>, _>>()?,
                    _ => return Err(err("table.columns must be a list of column names")),
                };
                if columns.is_empty() || columns.len() > MAX_TABLE_COLUMNS {
                    return Err(err(format!("a table has 1-{MAX_TABLE_COLUMNS} columns")));
                }
                let rows = match o.get("rows") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(rows)) => {
                        if rows.len() > MAX_TABLE_ROWS {
                            return Err(err(format!("a table has at most {MAX_TABLE_ROWS} rows")));
                        }
                        rows.iter()
                            .map(|r| match r {
                                Value::Array(cells) if cells.len() <= columns.len() => cells
                                    .iter()
                                    .map(|c| cell(c, "a cell"))
                                    .collect::<Result<Vec<_>, _>>(),
                                Value::Array(_) => {
                                    Err(err("a table row has more cells than columns"))
                                }
                                _ => Err(err("table.rows must be lists of cells")),
                            })
                            .collect::<Result<Vec<_>, _>>()?
                    }
                    Some(_) => return Err(err("table.rows must be a list of rows")),
                };
                BlockKind::Table { columns, rows }
            }
            "progress" => {
                let value = number_field(o, "value", ty)?
                    .ok_or_else(|| err("progress.value is required"))?;
                let max = number_field(o, "max", ty)?.unwrap_or(100.0);
                if max <= 0.0 || value < 0.0 || value > max {
                    return Err(err("progress needs 0 <= value <= max and max > 0"));
                }
                BlockKind::Progress {
                    value,
                    max,
                    label: text_field(o, "label", ty)?,
                }
            }
            "image" => {
                let url = text_field(o, "url", ty)?.ok_or_else(|| err("image.url is required"))?;
                let lower = url.to_ascii_lowercase();
                if !(lower.starts_with("https://") || lower.starts_with("http://"))
                    || url.chars().any(char::is_whitespace)
                {
                    return Err(err("image.url must be an http(s) URL"));
                }
                BlockKind::Image {
                    url,
                    alt: text_field(o, "alt", ty)?.unwrap_or_default(),
                }
            }
            "code" => {
                let code = match o.get("code") {
                    Some(Value::String(s)) if s.len() <= MAX_BODY_BYTES => s.clone(),
                    Some(Value::String(_)) => {
                        return Err(err(format!("code is longer than {MAX_BODY_BYTES} bytes")));
                    }
                    _ => return Err(err("code.code must be a string")),
                };
                let language = text_field(o, "language", ty)?;
                if language.as_deref().is_some_and(|l| {
                    l.len() > 32
                        || !l
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"+-_#.".contains(&b))
                }) {
                    return Err(err("code.language must be a short name such as rust"));
                }
                BlockKind::Code { code, language }
            }
            "fields" => {
                let fields: Vec<Field> = o
                    .get("fields")
                    .cloned()
                    .ok_or_else(|| err("fields.fields is required"))
                    .and_then(|v| {
                        serde_json::from_value(v).map_err(|e| {
                            err(format!(
                                "fields.fields must be [{{\"key\", \"value\"}}]: {e}"
                            ))
                        })
                    })?;
                if fields.is_empty() || fields.len() > MAX_FIELDS {
                    return Err(err(format!("a fields block has 1-{MAX_FIELDS} fields")));
                }
                for f in &fields {
                    cell(&Value::String(f.key.clone()), "a field's key")?;
                    cell(&Value::String(f.value.clone()), "a field's value")?;
                }
                BlockKind::Fields { fields }
            }
            "html" => {
                let html = match o.get("html") {
                    Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= MAX_BODY_BYTES => {
                        s.clone()
                    }
                    _ => {
                        return Err(err(format!(
                            "html.html must be a page of at most {MAX_BODY_BYTES} bytes"
                        )));
                    }
                };
                let link = text_field(o, "link", ty)?;
                if link.as_deref().is_some_and(|l| !is_app_link(l)) {
                    return Err(err(
                        "html.link is 32 hex digits (the engine gives it)".to_owned()
                    ));
                }
                BlockKind::Html {
                    html,
                    title: text_field(o, "title", ty)?,
                    link,
                    url: text_field(o, "url", ty)?,
                }
            }
            other => {
                if other.is_empty()
                    || other.len() > 64
                    || !other
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                {
                    return Err(err("a block type is 1-64 characters of A-Z a-z 0-9 _ -"));
                }
                let mut data = o.clone();
                for k in ["type", "id", "events"] {
                    data.remove(k);
                }
                BlockKind::Unknown {
                    type_name: other.to_owned(),
                    data,
                }
            }
        };
        Ok(Block { id, kind, events })
    }

    /// A list of blocks as agents write them (`--blocks`): every block read, ids unique, at most
    /// [`MAX_BLOCKS`].
    pub fn list_from_json(v: &Value) -> Result<Vec<Block>, BlockError> {
        let a = v
            .as_array()
            .ok_or_else(|| err("blocks must be a list of blocks"))?;
        if a.len() > MAX_BLOCKS {
            return Err(err(format!(
                "a message carries at most {MAX_BLOCKS} blocks"
            )));
        }
        let blocks = a
            .iter()
            .enumerate()
            .map(|(i, b)| Block::from_json(b).map_err(|e| err(format!("block {}: {}", i + 1, e.0))))
            .collect::<Result<Vec<_>, _>>()?;
        let mut seen = std::collections::HashSet::new();
        for b in &blocks {
            if let Some(id) = &b.id
                && !seen.insert(id.as_str())
            {
                return Err(err(format!("two blocks have the id {id:?}")));
            }
        }
        Ok(blocks)
    }

    /// The block's type name.
    pub fn type_name(&self) -> &str {
        match &self.kind {
            BlockKind::Table { .. } => "table",
            BlockKind::Progress { .. } => "progress",
            BlockKind::Image { .. } => "image",
            BlockKind::Code { .. } => "code",
            BlockKind::Fields { .. } => "fields",
            BlockKind::Html { .. } => "html",
            BlockKind::Unknown { type_name, .. } => type_name,
        }
    }

    /// The block as agents write it (the inverse of [`Block::from_json`]).
    pub fn to_json(&self) -> Value {
        let mut o = self.data();
        o.insert("type".into(), self.type_name().into());
        if let Some(id) = &self.id {
            o.insert("id".into(), id.clone().into());
        }
        Value::Object(o)
    }

    fn data(&self) -> Map<String, Value> {
        let mut o = match &self.kind {
            BlockKind::Table { columns, rows } => {
                json!({"columns": columns, "rows": rows})
            }
            BlockKind::Progress { value, max, label } => {
                let mut v = json!({"value": value, "max": max});
                if let Some(l) = label {
                    v["label"] = l.clone().into();
                }
                v
            }
            BlockKind::Image { url, alt } => json!({"url": url, "alt": alt}),
            BlockKind::Code { code, language } => {
                let mut v = json!({"code": code});
                if let Some(l) = language {
                    v["language"] = l.clone().into();
                }
                v
            }
            BlockKind::Fields { fields } => json!({"fields": fields}),
            BlockKind::Html {
                html,
                title,
                link,
                url,
            } => {
                let mut v = json!({"html": html});
                if let Some(t) = title {
                    v["title"] = t.clone().into();
                }
                if let Some(l) = link {
                    v["link"] = l.clone().into();
                }
                if let Some(u) = url {
                    v["url"] = u.clone().into();
                }
                v
            }
            BlockKind::Unknown { data, .. } => Value::Object(data.clone()),
        }
        .as_object()
        .cloned()
        .unwrap_or_default();
        if !self.events.is_empty() {
            o.insert("events".into(), json!(self.events));
        }
        o
    }

    /// The block as a message part: `{"type": "data-block-{type}", "id"?, "data"}`.
    pub fn to_part(&self) -> MessagePart {
        let mut o = Map::new();
        o.insert(
            "type".into(),
            format!("{BLOCK_PART_PREFIX}{}", self.type_name()).into(),
        );
        if let Some(id) = &self.id {
            o.insert("id".into(), id.clone().into());
        }
        o.insert("data".into(), Value::Object(self.data()));
        MessagePart::Other(Value::Object(o))
    }

    /// The block a message part carries (`None` for any other part). A stored block part that
    /// no longer reads (written by a newer version) comes back as [`BlockKind::Unknown`].
    pub fn from_part(part: &MessagePart) -> Option<Block> {
        let MessagePart::Other(v) = part else {
            return None;
        };
        let ty = v.get("type")?.as_str()?.strip_prefix(BLOCK_PART_PREFIX)?;
        let mut o = v
            .get("data")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        o.insert("type".into(), ty.into());
        if let Some(id) = v.get("id") {
            o.insert("id".into(), id.clone());
        }
        let as_json = Value::Object(o.clone());
        Some(Block::from_json(&as_json).unwrap_or_else(|_| {
            let id = v
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| valid_block_id(s))
                .map(str::to_owned);
            for k in ["type", "id", "events"] {
                o.remove(k);
            }
            Block {
                id,
                kind: BlockKind::Unknown {
                    type_name: ty.to_owned(),
                    data: o,
                },
                events: Vec::new(),
            }
        }))
    }

    /// A plain-text rendering (for notifications, logs, a platform's fallback `text`, and the
    /// model's view of the message).
    pub fn plain_text(&self) -> String {
        match &self.kind {
            BlockKind::Table { columns, rows } => {
                let mut s = columns.join(" | ");
                for r in rows {
                    s.push('\n');
                    s.push_str(&r.join(" | "));
                }
                s
            }
            BlockKind::Progress { value, max, label } => {
                let pct = (value / max * 100.0).round();
                match label {
                    Some(l) => format!("{l}: {pct}%"),
                    None => format!("{pct}%"),
                }
            }
            BlockKind::Image { url, alt } if alt.is_empty() => url.clone(),
            BlockKind::Image { url, alt } => format!("{alt} ({url})"),
            BlockKind::Code { code, .. } => code.clone(),
            BlockKind::Fields { fields } => fields
                .iter()
                .map(|f| format!("{}: {}", f.key, f.value))
                .collect::<Vec<_>>()
                .join("\n"),
            BlockKind::Html { title, .. } => {
                format!(
                    "App: {}",
                    title.as_deref().unwrap_or("open it in the web chat")
                )
            }
            BlockKind::Unknown { .. } => UNKNOWN_BLOCK_TEXT.to_owned(),
        }
    }
}

/// A text progress bar of `width` cells (`▓▓▓░░░`), the same on every platform without one.
pub fn progress_bar(value: f64, max: f64, width: usize) -> String {
    let filled = if max > 0.0 {
        ((value / max).clamp(0.0, 1.0) * width as f64).round() as usize
    } else {
        0
    };
    format!("{}{}", "▓".repeat(filled), "░".repeat(width - filled))
}

/// Whether `s` is an app's capability: 32 lowercase hex digits.
pub fn is_app_link(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Gives an app block without a capability a fresh one (`fresh()`: 32 random hex digits), and
/// drops any address it came with (only [`with_app_urls`] sets one, on a drawn copy).
pub fn stamp_app_link(block: &mut Block, fresh: impl FnOnce() -> String) {
    if let BlockKind::Html { link, url, .. } = &mut block.kind {
        if link.is_none() {
            *link = Some(fresh());
        }
        *url = None;
    }
}

/// Gives each app among a question's `blocks` (as agents write them, in the question tool's
/// input) a fresh capability, always: a `link` the model or asker wrote is replaced (a model led
/// astray could write a guessable one), and an address dropped, as [`stamp_app_link`] does for a
/// message's. Other blocks, and what is not a block, stay as they came. The web view of such an
/// app is found through the message holding the question's tool call ([`app_page`]).
pub fn stamp_app_links_in(blocks: &mut [Value], fresh: impl Fn() -> String) {
    for v in blocks {
        if let Ok(mut b) = Block::from_json(v)
            && let BlockKind::Html { link, .. } = &mut b.kind
        {
            *link = None;
            stamp_app_link(&mut b, &fresh);
            *v = b.to_json();
        }
    }
}

/// A copy of `message` (of chat `chat`) whose app blocks carry the address of their web view
/// under `base` (the server's `public_url`): `{base}/apps/{chat}/{message}/{link}`.
pub fn with_app_urls(message: &UiMessage, chat: &str, base: &str) -> UiMessage {
    with_app_urls_of(message, chat, &message.id, base)
}

/// [`with_app_urls`] for blocks drawn apart from the message that holds them (a question's,
/// drawn before its inputs): their addresses name `holder`, the message [`app_page`] reads.
pub fn with_app_urls_of(message: &UiMessage, chat: &str, holder: &str, base: &str) -> UiMessage {
    let mut out = message.clone();
    let base = base.trim_end_matches('/');
    for part in &mut out.parts {
        let MessagePart::Other(v) = part else {
            continue;
        };
        if v.get("type").and_then(Value::as_str) != Some(&format!("{BLOCK_PART_PREFIX}html")) {
            continue;
        }
        let Some(data) = v.get_mut("data").and_then(Value::as_object_mut) else {
            continue;
        };
        if let Some(link) = data
            .get("link")
            .and_then(Value::as_str)
            .filter(|l| is_app_link(l))
        {
            let url = format!("{base}/apps/{chat}/{holder}/{link}");
            data.insert("url".into(), url.into());
        }
    }
    out
}

/// The app page of `message` whose capability is `link` (compared in constant time): among its
/// blocks, or among the blocks of a question it asks ([`stamp_app_links_in`]).
pub fn app_page(message: &UiMessage, link: &str) -> Option<(String, Option<String>)> {
    let asked = message.parts.iter().filter_map(|p| match p {
        MessagePart::Tool(t) if t.tool_name == crate::QUESTION_TOOL => t.input.get("blocks"),
        _ => None,
    });
    let asked = asked
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|v| Block::from_json(v).ok());
    blocks_of(message)
        .into_iter()
        .chain(asked)
        .find_map(|b| match b.kind {
            BlockKind::Html {
                html,
                title,
                link: Some(l),
                ..
            } if bool::from(subtle::ConstantTimeEq::ct_eq(l.as_bytes(), link.as_bytes())) => {
                Some((html, title))
            }
            _ => None,
        })
}

/// The blocks of a message, in order.
pub fn blocks_of(message: &UiMessage) -> Vec<Block> {
    message.parts.iter().filter_map(Block::from_part).collect()
}

/// Whether a message carries blocks.
pub fn has_blocks(message: &UiMessage) -> bool {
    message.parts.iter().any(|p| {
        matches!(p, MessagePart::Other(v)
            if v.get("type").and_then(Value::as_str).is_some_and(|t| t.starts_with(BLOCK_PART_PREFIX)))
    })
}

/// An event sent by an event button: the agent reads it from its inbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockEvent {
    /// The agent message the block is in.
    pub message_id: String,
    /// The block's id.
    pub block_id: String,
    /// The button's value.
    pub value: String,
}

/// The part type of an event stored in a chat.
pub const EVENT_PART: &str = "data-event";

impl BlockEvent {
    /// The event as a message part.
    pub fn to_part(&self) -> MessagePart {
        MessagePart::Other(json!({"type": EVENT_PART, "data": self}))
    }

    /// The event a message part carries.
    pub fn from_part(part: &MessagePart) -> Option<BlockEvent> {
        match part {
            MessagePart::Other(v) if v.get("type").and_then(Value::as_str) == Some(EVENT_PART) => {
                serde_json::from_value(v.get("data")?.clone()).ok()
            }
            _ => None,
        }
    }
}

/// Which event button of an agent message a platform control stands for: the block's index among
/// the message's blocks and the button's index on it — the one vocabulary every adapter writes
/// into its control ids (after a prefix of its own that no question control or Stop button
/// starts with) and reads back without any state, after a restart or an edit alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventControl {
    /// The block's index among the message's blocks.
    pub block: usize,
    /// The button's index on the block.
    pub button: usize,
}

impl EventControl {
    /// The control of button `button` on block `block`.
    pub fn new(block: usize, button: usize) -> Self {
        Self { block, button }
    }

    /// `{prefix}{block}{sep}{button}`, e.g. `fe:6:4` with prefix `fe:` and `:`.
    pub fn write(self, prefix: &str, sep: char) -> String {
        format!("{prefix}{}{sep}{}", self.block, self.button)
    }

    /// Reads what [`EventControl::write`] wrote with the same `prefix` and `sep`: two runs of
    /// ASCII digits and nothing else (no sign, no third part); `None` for any other id.
    pub fn read(id: &str, prefix: &str, sep: char) -> Option<Self> {
        let (block, button) = id.strip_prefix(prefix)?.split_once(sep)?;
        let index = |s: &str| {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse::<usize>().ok())
                .flatten()
        };
        Some(Self::new(index(block)?, index(button)?))
    }

    /// The click on this control of the platform message `message_id` by `user`.
    pub fn clicked(self, message_id: String, user: crate::PlatformUser) -> EventClick {
        EventClick {
            message_id,
            block: self.block,
            button: self.button,
            user,
        }
    }
}

/// A click on an event button, as an adapter reads it from the platform: which platform message,
/// which block (its index among the message's blocks) and which button (its index on the block),
/// and who. The engine finds the agent message by the platform id it was posted under and sends
/// the event to the agent's inbox ([`BlockEvent`]); a click on a message, block or button that no
/// longer exists is stale.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventClick {
    /// The platform id of the message the button is on.
    pub message_id: String,
    /// The block's index among the message's blocks.
    pub block: usize,
    /// The button's index on the block.
    pub button: usize,
    /// Who clicked.
    pub user: crate::PlatformUser,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_controls_round_trip_and_read_nothing_else() {
        let c = EventControl::new(6, 4);
        assert_eq!(c.write("fe:", ':'), "fe:6:4");
        assert_eq!(EventControl::read("fe:6:4", "fe:", ':'), Some(c));
        assert_eq!(EventControl::read(" #6.4", " #", '.'), Some(c));
        let worst = EventControl::new(usize::MAX, usize::MAX);
        assert_eq!(
            EventControl::read(&worst.write("e", ':'), "e", ':'),
            Some(worst)
        );
        for bad in [
            "",
            "fe:",
            "fe:1",
            "fe:1:",
            "fe::1",
            "fe:x:1",
            "fe:1:2:3",
            "fe:-1:2",
            "fe:+1:2",
            "fe:1: 2",
            "fq:1:2",
            "fe:99999999999999999999999:1",
        ] {
            assert_eq!(EventControl::read(bad, "fe:", ':'), None, "{bad:?}");
        }
    }

    fn every_type() -> Value {
        json!([
            {"type": "table", "id": "t", "columns": ["Job", "State"], "rows": [["build", "ok"], ["test", 3]]},
            {"type": "progress", "value": 3, "max": 4, "label": "Deploy"},
            {"type": "image", "url": "https://example.com/a.png", "alt": "chart"},
            {"type": "code", "code": "fn main() {}", "language": "rust"},
            {"type": "fields", "id": "f", "fields": [{"key": "Branch", "value": "main"}],
             "events": [{"label": "Retry", "value": "retry"}, {"label": "Show logs"}]},
            {"type": "html", "html": "<p>hi</p>", "title": "Dashboard"},
            {"type": "sparkline", "id": "s", "points": [1, 2]}
        ])
    }

    #[test]
    fn every_type_round_trips_through_parts_and_json() {
        let blocks = Block::list_from_json(&every_type()).unwrap();
        assert_eq!(blocks.len(), 7);
        for b in &blocks {
            assert_eq!(Block::from_part(&b.to_part()).as_ref(), Some(b));
            assert_eq!(Block::from_json(&b.to_json()).as_ref(), Ok(b));
        }
        assert!(
            matches!(&blocks[6].kind, BlockKind::Unknown { type_name, .. } if type_name == "sparkline")
        );
        assert_eq!(blocks[6].plain_text(), UNKNOWN_BLOCK_TEXT);
        assert_eq!(blocks[0].rows_cells(), 2);
        assert_eq!(blocks[4].events[1].value(), "Show logs");
        let part = serde_json::to_value(blocks[0].to_part()).unwrap();
        assert_eq!(part["type"], "data-block-table");
        assert_eq!(part["id"], "t");
        assert_eq!(part["data"]["rows"][1][1], "3");
    }

    #[test]
    fn bad_blocks_are_refused_with_a_reason() {
        for (bad, says) in [
            (json!({"type": "table", "columns": []}), "columns"),
            (
                json!({"type": "table", "columns": ["a"], "rows": [["1", "2"]]}),
                "more cells",
            ),
            (
                json!({"type": "progress", "value": 5, "max": 4}),
                "value <= max",
            ),
            (
                json!({"type": "image", "url": "javascript:alert(1)"}),
                "http(s)",
            ),
            (json!({"type": "code", "code": 5}), "string"),
            (json!({"type": "fields", "fields": [{"k": 1}]}), "key"),
            (json!({"type": "choice"}), "POST /api/asks"),
            (
                json!({"type": "code", "code": "x", "events": [{"label": "Go"}]}),
                "needs an id",
            ),
            (
                json!({"type": "code", "id": "a b", "code": "x"}),
                "block id",
            ),
            (json!({"type": "../x"}), "block type"),
            (json!("table"), "object"),
        ] {
            let e = Block::from_json(&bad).unwrap_err();
            assert!(e.0.contains(says), "{bad}: {e}");
        }
        let e = Block::list_from_json(&json!([
            {"type": "code", "id": "a", "code": "1"}, {"type": "code", "id": "a", "code": "2"}
        ]))
        .unwrap_err();
        assert!(e.0.contains("two blocks"), "{e}");
        let many = Value::Array(vec![json!({"type": "code", "code": "x"}); MAX_BLOCKS + 1]);
        assert!(Block::list_from_json(&many).is_err());
    }

    #[test]
    fn a_stored_block_that_no_longer_reads_is_shown_as_unknown() {
        let part: MessagePart = serde_json::from_value(
            json!({"type": "data-block-table", "id": "t", "data": {"columns": "nope"}}),
        )
        .unwrap();
        let b = Block::from_part(&part).unwrap();
        assert!(matches!(b.kind, BlockKind::Unknown { .. }));
        assert_eq!(b.id.as_deref(), Some("t"));
        let other: MessagePart =
            serde_json::from_value(json!({"type": "data-ask", "data": {}})).unwrap();
        assert_eq!(Block::from_part(&other), None);
    }

    #[test]
    fn progress_bars_fill_by_ratio() {
        assert_eq!(progress_bar(0.0, 10.0, 4), "░░░░");
        assert_eq!(progress_bar(5.0, 10.0, 4), "▓▓░░");
        assert_eq!(progress_bar(10.0, 10.0, 4), "▓▓▓▓");
    }

    impl Block {
        fn rows_cells(&self) -> usize {
            match &self.kind {
                BlockKind::Table { rows, .. } => rows.len(),
                _ => 0,
            }
        }
    }
}
