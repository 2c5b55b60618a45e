//! `frogbot send`, `inbox`, `ack`, `edit`, `delete`, `pin` and `unpin`: a whole conversation of
//! an agent outside FrogBot with a person, through a running `frogbot serve` (the endpoints of
//! `http/talk.rs`). A message is named `CHAT.MESSAGE` (what `send` and `inbox` print as `ref`).
//! Exit codes: 0 done (`inbox --wait` with nothing before `--timeout`: 2), 1 any failure with
//! one line on stderr.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::ask::{
    AskError, Client, ClientArgs, EXIT_ANSWERED, EXIT_EXPIRED, ServerArgs, target_of,
};

/// `frogbot send`.
#[derive(Clone, Debug, clap::Args)]
pub struct SendArgs {
    /// The message's Markdown text.
    pub text: Option<String>,
    /// The agent's chat (as `send --to` or `ask` printed it).
    #[arg(long, conflicts_with = "to")]
    pub chat: Option<String>,
    /// Open the chat first: `web:CHAT_ID`, `slack:CHANNEL`, `slack:@USER`, … (see `ask --to`).
    #[arg(long)]
    pub to: Option<String>,
    /// A title.
    #[arg(long)]
    pub title: Option<String>,
    /// Blocks as JSON (`[{"type": "table", …}, …]`) from a file or `-`.
    #[arg(long, value_name = "FILE|-")]
    pub blocks: Option<String>,
    /// Pin it under this key (`status` by convention), replacing the key's pin.
    #[arg(long, value_name = "KEY")]
    pub pin: Option<String>,
    /// The message's id: the same id again posts nothing new.
    #[arg(long)]
    pub id: Option<String>,
}

/// `frogbot inbox`.
#[derive(Clone, Debug, clap::Args)]
pub struct InboxArgs {
    /// Only this chat's messages.
    #[arg(long)]
    pub chat: Option<String>,
    /// Wait until something arrives.
    #[arg(long)]
    pub wait: bool,
    /// Stop waiting after this long (exit code 2).
    #[arg(long, requires = "wait")]
    pub timeout: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
}

/// `frogbot ack`.
#[derive(Clone, Debug, clap::Args)]
pub struct AckArgs {
    /// The person's message: `CHAT.MESSAGE` (an inbox item's `ref`).
    pub message: String,
    /// `working` or `done`.
    pub state: String,
}

/// `frogbot edit`.
#[derive(Clone, Debug, clap::Args)]
pub struct EditArgs {
    /// The agent's message: `CHAT.MESSAGE` (what `send` printed as `ref`).
    pub message: String,
    /// New text.
    #[arg(long)]
    pub text: Option<String>,
    /// New title.
    #[arg(long)]
    pub title: Option<String>,
    /// New blocks (JSON, a file or `-`).
    #[arg(long, value_name = "FILE|-")]
    pub blocks: Option<String>,
    /// Replace one block: `ID=JSON` (the block without its id, e.g.
    /// `bar={"type":"progress","value":3,"max":4}`).
    #[arg(long, value_name = "ID=JSON", conflicts_with_all = ["text", "title", "blocks"])]
    pub block: Option<String>,
}

/// `frogbot delete`.
#[derive(Clone, Debug, clap::Args)]
pub struct DeleteArgs {
    /// The agent's message: `CHAT.MESSAGE`.
    pub message: String,
}

/// `frogbot pin`.
#[derive(Clone, Debug, clap::Args)]
pub struct PinArgs {
    /// The agent's message: `CHAT.MESSAGE`.
    pub message: String,
    /// The pin's key.
    #[arg(long, default_value = "status")]
    pub key: String,
}

/// `frogbot unpin`.
#[derive(Clone, Debug, clap::Args)]
pub struct UnpinArgs {
    /// The agent's chat.
    pub chat: String,
    /// The pin's key.
    #[arg(long, default_value = "status")]
    pub key: String,
}

fn usage(s: impl Into<String>) -> AskError {
    AskError::Usage(s.into())
}

/// `CHAT.MESSAGE` → (chat, message). Chat ids have no dot; a channel message's id may
/// (`slack-C42:1796168059.003000`), so the first dot splits.
pub fn message_ref(raw: &str) -> Result<(String, String), AskError> {
    raw.split_once('.')
        .filter(|(c, m)| !c.is_empty() && !m.is_empty() && !m.contains(['/', '?', '#']))
        .map(|(c, m)| (c.to_owned(), m.to_owned()))
        .ok_or_else(|| usage(format!("{raw:?}: name a message as CHAT.MESSAGE")))
}

fn read_json(flag: &str, from: &str) -> Result<Value, AskError> {
    let text = if from == "-" {
        std::io::read_to_string(std::io::stdin()).map_err(|e| usage(format!("--{flag}: {e}")))?
    } else if from.trim_start().starts_with(['[', '{']) {
        from.to_owned()
    } else {
        std::fs::read_to_string(from).map_err(|e| usage(format!("--{flag} {from}: {e}")))?
    };
    serde_json::from_str(&text).map_err(|e| usage(format!("--{flag}: not JSON: {e}")))
}

/// An agent message with `ref` (CHAT.MESSAGE) and `chatId`.
pub(crate) fn with_ref(mut m: Value, chat: &str) -> Value {
    if let Some(id) = m.get("id").and_then(Value::as_str) {
        m["ref"] = json!(format!("{chat}.{id}"));
    }
    m["chatId"] = json!(chat);
    m
}

async fn call(
    client: &Client,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, AskError> {
    client
        .call(method, path, body, Duration::from_secs(60))
        .await
}

/// A command's one request, its client made once the arguments are checked: 0 when it succeeded.
async fn request(
    server: &ServerArgs,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Result<u8, AskError> {
    call(&Client::new(server)?, method, path, body).await?;
    Ok(EXIT_ANSWERED)
}

/// Posts or edits an agent message of `chat` and prints it (with `ref` and `chatId`) as one line
/// of JSON: 0.
async fn print_message(
    client: &Client,
    method: Method,
    path: &str,
    body: Value,
    chat: &str,
) -> Result<u8, AskError> {
    let m = call(client, method, path, Some(body)).await?;
    println!("{}", with_ref(m, chat));
    Ok(EXIT_ANSWERED)
}

/// `frogbot send`: prints the message (with `ref` and `chatId`) as one line of JSON.
pub async fn run_send(args: ClientArgs<SendArgs>) -> Result<u8, AskError> {
    let client = Client::new(&args.server)?;
    let chat = match (&args.chat, &args.to) {
        (Some(c), _) => c.clone(),
        (None, Some(to)) => {
            let mut body = json!({"to": target_of(to)?});
            if let Some(t) = &args.text {
                body["text"] = json!(t);
            }
            if let Some(id) = &args.id {
                body["idempotencyKey"] = json!(id);
            }
            let opened = call(&client, Method::POST, "/api/agent-chats", Some(body)).await?;
            opened["chatId"]
                .as_str()
                .ok_or_else(|| usage("the server answered without a chatId"))?
                .to_owned()
        }
        (None, None) => return Err(usage("give --chat CHAT or --to TARGET")),
    };
    let mut body = json!({});
    for (k, v) in [
        ("text", &args.text),
        ("title", &args.title),
        ("pin", &args.pin),
        ("id", &args.id),
    ] {
        if let Some(v) = v {
            body[k] = json!(v);
        }
    }
    if let Some(b) = &args.blocks {
        body["blocks"] = read_json("blocks", b)?;
    }
    let path = format!("/api/chats/{chat}/agent-messages");
    print_message(&client, Method::POST, &path, body, &chat).await
}

/// `frogbot inbox`: prints each item as one line of JSON (`ref`, `chatId`, `text`, `event`,
/// `by`, `speaker`); with `--wait`, waits for at least one (exit 2 at `--timeout`).
pub async fn run_inbox(args: ClientArgs<InboxArgs>) -> Result<u8, AskError> {
    let client = Client::new(&args.server)?;
    let deadline = match &args.timeout {
        Some(t) => Some(
            tokio::time::Instant::now()
                + humantime::parse_duration(t.trim())
                    .map_err(|e| usage(format!("--timeout {t:?}: {e}")))?,
        ),
        None => None,
    };
    loop {
        let wait = if args.wait {
            deadline
                .map(|d| d.saturating_duration_since(tokio::time::Instant::now()))
                .unwrap_or(Duration::from_secs(60))
                .min(Duration::from_secs(60))
        } else {
            Duration::ZERO
        };
        let mut path = format!("/api/inbox?limit={}&wait={}", args.limit, wait.as_secs());
        if let Some(c) = &args.chat {
            path.push_str(&format!("&chatId={c}"));
        }
        let v = client
            .call(Method::GET, &path, None, wait + Duration::from_secs(30))
            .await?;
        let items = v["items"].as_array().cloned().unwrap_or_default();
        for item in &items {
            println!("{}", inbox_line(item));
        }
        if !items.is_empty() || !args.wait {
            return Ok(EXIT_ANSWERED);
        }
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            return Ok(EXIT_EXPIRED);
        }
    }
}

/// An inbox item as `frogbot inbox` prints it and the MCP tools return it: `ref`
/// (CHAT.MESSAGE), `chatId`, `ack`, and `text` or `event`, with `by` and `speaker` when known.
pub(crate) fn inbox_line(item: &Value) -> Value {
    let chat = item["chatId"].as_str().unwrap_or_default();
    let m = &item["message"];
    let text: String = m["parts"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .filter(|p| p["type"] == "text")
                .filter_map(|p| p["text"].as_str())
                .collect()
        })
        .unwrap_or_default();
    let mut line = json!({
        "ref": format!("{chat}.{}", m["id"].as_str().unwrap_or_default()),
        "chatId": chat,
        "ack": item["ack"],
    });
    if item.get("event").is_some_and(|e| !e.is_null()) {
        line["event"] = item["event"].clone();
    } else {
        line["text"] = json!(text);
    }
    for k in ["by", "speaker"] {
        if let Some(v) = item.get(k).filter(|v| !v.is_null()) {
            line[k] = v.clone();
        }
    }
    line
}

/// `frogbot ack CHAT.MESSAGE working|done`.
pub async fn run_ack(args: ClientArgs<AckArgs>) -> Result<u8, AskError> {
    let (chat, message) = message_ref(&args.message)?;
    let path = format!("/api/chats/{chat}/messages/{message}/ack");
    request(
        &args.server,
        Method::POST,
        &path,
        Some(json!({"state": args.state})),
    )
    .await
}

/// `frogbot edit CHAT.MESSAGE …`: prints the message as it is now.
pub async fn run_edit(args: ClientArgs<EditArgs>) -> Result<u8, AskError> {
    let (chat, message) = message_ref(&args.message)?;
    let mut body = json!({});
    if let Some(b) = &args.block {
        let (id, raw) = b.split_once('=').ok_or_else(|| {
            usage("--block ID=JSON (e.g. bar={\"type\":\"progress\",\"value\":3})")
        })?;
        let mut block = read_json("block", raw)?;
        block["id"] = json!(id);
        body["block"] = block;
    } else {
        for (k, v) in [("text", &args.text), ("title", &args.title)] {
            if let Some(v) = v {
                body[k] = json!(v);
            }
        }
        if let Some(b) = &args.blocks {
            body["blocks"] = read_json("blocks", b)?;
        }
        if body.as_object().is_some_and(|o| o.is_empty()) {
            return Err(usage("give --text, --title, --blocks or --block ID=JSON"));
        }
    }
    let client = Client::new(&args.server)?;
    let path = format!("/api/chats/{chat}/agent-messages/{message}");
    print_message(&client, Method::PATCH, &path, body, &chat).await
}

/// `frogbot delete CHAT.MESSAGE`.
pub async fn run_delete(args: ClientArgs<DeleteArgs>) -> Result<u8, AskError> {
    let (chat, message) = message_ref(&args.message)?;
    let path = format!("/api/chats/{chat}/agent-messages/{message}");
    request(&args.server, Method::DELETE, &path, None).await
}

/// `frogbot pin CHAT.MESSAGE [--key status]`.
pub async fn run_pin(args: ClientArgs<PinArgs>) -> Result<u8, AskError> {
    let (chat, message) = message_ref(&args.message)?;
    let path = format!("/api/chats/{chat}/pins/{}", args.key);
    request(
        &args.server,
        Method::PUT,
        &path,
        Some(json!({"messageId": message})),
    )
    .await
}

/// `frogbot unpin CHAT [--key status]`.
pub async fn run_unpin(args: ClientArgs<UnpinArgs>) -> Result<u8, AskError> {
    let path = format!("/api/chats/{}/pins/{}", args.chat, args.key);
    request(&args.server, Method::DELETE, &path, None).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_refs_name_a_chat_and_a_message() {
        assert_eq!(message_ref("c1.m1").unwrap(), ("c1".into(), "m1".into()));
        assert_eq!(
            message_ref("_slack-x.slack-C42:1796168059.003000").unwrap(),
            ("_slack-x".into(), "slack-C42:1796168059.003000".into())
        );
        for bad in ["", "c1", ".m", "c.", "c.m/../x", "c.m?x"] {
            assert!(message_ref(bad).is_err(), "{bad}");
        }
    }
}
