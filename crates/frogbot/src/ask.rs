//! `frogbot ask`, `frogbot wait` and `frogbot cancel`: a client of a running `frogbot serve`
//! (`--server` / `FROGBOT_URL`, `--token` / `FROGBOT_TOKEN`) for scripts that ask a person.
//!
//! Exit codes: **0** answered (or expired with every required input's default), **2** expired
//! without a default or `--timeout` reached, **3** cancelled or skipped; any other failure is
//! **1** with one line on stderr.

use std::time::Duration;

use serde_json::{Value, json};

/// Exit code: answered.
pub const EXIT_ANSWERED: u8 = 0;
/// Exit code: a failure (bad flag, server unreachable, an API error).
pub const EXIT_FAILED: u8 = 1;
/// Exit code: expired without a default, or `--timeout` reached.
pub const EXIT_EXPIRED: u8 = 2;
/// Exit code: cancelled (or skipped by the person).
pub const EXIT_CANCELLED: u8 = 3;

/// How the answer is printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The ask's status as one line of JSON.
    #[default]
    Json,
    /// The answer's value (one per line as `header: value` for several inputs), or the state.
    Text,
}

/// The server to reach.
#[derive(Clone, Debug, clap::Args)]
pub struct ServerArgs {
    /// The running server's URL.
    #[arg(long, env = "FROGBOT_URL", default_value = "http://127.0.0.1:8787")]
    pub server: String,
    /// A `[[users]]` token of the server.
    #[arg(long, env = "FROGBOT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// How to print the result.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
}

/// A client command's arguments: its own (`T`, read through `Deref`), then the server's.
#[derive(Clone, Debug, clap::Args)]
pub struct ClientArgs<T: clap::Args> {
    /// The command's own arguments.
    #[command(flatten)]
    pub args: T,
    /// The server.
    #[command(flatten)]
    pub server: ServerArgs,
}

impl<T: clap::Args> std::ops::Deref for ClientArgs<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.args
    }
}

/// `frogbot ask`.
#[derive(Clone, Debug, clap::Args)]
pub struct AskArgs {
    /// What to ask (Markdown).
    pub text: String,
    /// Where: `web:CHAT_ID` (default: a new web chat), or `slack:CHANNEL`, `slack:@USER`, … .
    #[arg(long)]
    pub to: Option<String>,
    /// A title above the text (also the input's header).
    #[arg(long)]
    pub title: Option<String>,
    /// An option of a choice (repeat for each).
    #[arg(long = "choice", value_name = "LABEL")]
    pub choices: Vec<String>,
    /// Several options may be chosen.
    #[arg(long, requires = "choices")]
    pub multiple: bool,
    /// The person may answer a choice with their own text.
    #[arg(long, requires = "choices")]
    pub custom: bool,
    /// Ask for text.
    #[arg(long = "text")]
    pub text_input: bool,
    /// Several lines of text.
    #[arg(long, requires = "text_input")]
    pub multiline: bool,
    /// The longest text accepted.
    #[arg(long, requires = "text_input")]
    pub max_length: Option<u32>,
    /// Ask for a number.
    #[arg(long)]
    pub number: bool,
    /// The smallest number accepted.
    #[arg(long, requires = "number", allow_negative_numbers = true)]
    pub min: Option<f64>,
    /// The largest number accepted.
    #[arg(long, requires = "number", allow_negative_numbers = true)]
    pub max: Option<f64>,
    /// Accepted numbers are `min` plus a multiple of this.
    #[arg(long, requires = "number")]
    pub step: Option<f64>,
    /// The number's unit.
    #[arg(long, requires = "number")]
    pub unit: Option<String>,
    /// Ask for on/off.
    #[arg(long)]
    pub toggle: bool,
    /// One button with this label (e.g. "Approve").
    #[arg(long, value_name = "LABEL")]
    pub confirm: Option<String>,
    /// The confirm is a destructive action.
    #[arg(long, requires = "confirm")]
    pub danger: bool,
    /// A hint in the empty field (text, number) or the toggle's label.
    #[arg(long)]
    pub placeholder: Option<String>,
    /// The answer used when the ask expires (repeat for several options).
    #[arg(long = "default", value_name = "VALUE")]
    pub defaults: Vec<String>,
    /// The inputs as JSON (`[{"kind": …}, …]` or `{"questions": […]}`) from a file or `-`; display
    /// blocks among them (`{"type": "table" | "code" | "image" …}`) are shown before the inputs.
    #[arg(long, value_name = "FILE|-")]
    pub blocks: Option<String>,
    /// Stop accepting answers after this long (`90s`, `30m`, `2h`, `1d`).
    #[arg(long)]
    pub expires: Option<String>,
    /// Wait for the answer.
    #[arg(long)]
    pub wait: bool,
    /// Stop waiting after this long (exit code 2); the ask stays open.
    #[arg(long, requires = "wait")]
    pub timeout: Option<String>,
    /// Who may answer: a FrogBot user id or a `platform:user` identity (repeat for several;
    /// default: whoever the chat or channel lets answer).
    #[arg(long = "from", value_name = "USER")]
    pub from: Vec<String>,
    /// Ask once per key: the same key returns the same ask.
    #[arg(long)]
    pub idempotency_key: Option<String>,
}

/// `frogbot wait`.
#[derive(Clone, Debug, clap::Args)]
pub struct WaitArgs {
    /// The ask's id.
    pub id: String,
    /// Stop waiting after this long (exit code 2).
    #[arg(long)]
    pub timeout: Option<String>,
}

/// `frogbot cancel`.
#[derive(Clone, Debug, clap::Args)]
pub struct CancelArgs {
    /// The ask's id.
    pub id: String,
}

/// A failure of the client: printed as one line, exit code 1.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// A flag or an input file is wrong.
    #[error("{0}")]
    Usage(String),
    /// The server could not be reached.
    #[error("cannot reach {server}: {message}")]
    Unreachable {
        /// The server URL.
        server: String,
        /// What failed.
        message: String,
    },
    /// The server answered with an error.
    #[error("{message} ({code})")]
    Api {
        /// The error code.
        code: String,
        /// The server's message.
        message: String,
    },
}

fn duration(flag: &str, s: &str) -> Result<Duration, AskError> {
    humantime::parse_duration(s.trim())
        .map_err(|e| AskError::Usage(format!("--{flag} {s:?}: {e} (e.g. 90s, 30m, 2h, 1d)")))
}

/// `--blocks` items split into the inputs and the display blocks shown with them (an item whose
/// `type` is a display block's: `table`, `code`, `image`…).
pub fn split_display(items: Vec<Value>) -> (Vec<Value>, Vec<Value>) {
    items
        .into_iter()
        .partition(|item| match item.get("type").and_then(Value::as_str) {
            Some(t) => frogbot_core::model::INPUT_BLOCK_TYPES.contains(&t),
            None => true,
        })
}

/// The `inputs` of an ask built from the flags (one input), or from `--blocks`.
pub fn inputs_of(args: &AskArgs, blocks: Option<&str>) -> Result<Vec<Value>, AskError> {
    if let Some(json) = blocks {
        let v: Value = serde_json::from_str(json)
            .map_err(|e| AskError::Usage(format!("--blocks: not JSON: {e}")))?;
        return match v {
            Value::Array(items) => Ok(items),
            Value::Object(mut o) => match o.remove("questions").or_else(|| o.remove("inputs")) {
                Some(Value::Array(items)) => Ok(items),
                _ => Ok(vec![Value::Object(o)]),
            },
            _ => Err(AskError::Usage(
                "--blocks: give an array of inputs or {\"questions\": [...]}".into(),
            )),
        };
    }
    let kinds = [
        !args.choices.is_empty(),
        args.text_input,
        args.number,
        args.toggle,
        args.confirm.is_some(),
    ];
    let mut input = match kinds.iter().filter(|k| **k).count() {
        0 => json!({"kind": "confirm", "label": "OK"}),
        1 => json!({}),
        _ => {
            return Err(AskError::Usage(
                "give one of --choice, --text, --number, --toggle, --confirm (or --blocks for several inputs)".into(),
            ));
        }
    };
    let num = |x: f64| serde_json::Number::from_f64(x).map(Value::Number);
    if !args.choices.is_empty() {
        input = json!({
            "options": args.choices.iter().map(|c| json!({"label": c})).collect::<Vec<_>>(),
            "multiple": args.multiple,
            "custom": args.custom,
        });
    } else if args.text_input {
        input = json!({"kind": "text_input", "multiline": args.multiline});
        if let Some(n) = args.max_length {
            input["maxLength"] = json!(n);
        }
    } else if args.number {
        input = json!({"kind": "number_input"});
        for (k, v) in [("min", args.min), ("max", args.max), ("step", args.step)] {
            if let Some(n) = v.and_then(num) {
                input[k] = n;
            }
        }
        if let Some(u) = &args.unit {
            input["unit"] = json!(u);
        }
    } else if args.toggle {
        input = json!({"kind": "toggle"});
        if let Some(l) = &args.placeholder {
            input["label"] = json!(l);
        }
    } else if let Some(label) = &args.confirm {
        input = json!({"kind": "confirm", "label": label, "danger": args.danger});
    }
    if let Some(p) = &args.placeholder
        && (args.text_input || args.number)
    {
        input["placeholder"] = json!(p);
    }
    match args.defaults.as_slice() {
        [] => {}
        [one] => input["default"] = json!(one),
        many => input["default"] = json!(many),
    }
    Ok(vec![input])
}

/// The `to` of an ask from `--to`: `web:CHAT` (`web:CHAT@USER`: an agent's web chat for that
/// configured user), `PLATFORM:@USER` (a direct message; Matrix's
/// `matrix:@alice:server` keeps the user id whole) or `PLATFORM:PLACE` (a new thread there).
pub fn target_of(to: &str) -> Result<Value, AskError> {
    let (platform, place) = to
        .split_once(':')
        .filter(|(p, r)| !p.is_empty() && !r.is_empty())
        .ok_or_else(|| {
            AskError::Usage(format!(
                "--to {to:?}: use web:CHAT_ID or PLATFORM:CHANNEL (slack, discord, telegram, matrix)"
            ))
        })?;
    Ok(match (platform, place.strip_prefix('@')) {
        ("web", _) => match place.split_once('@') {
            Some((chat, user)) if !chat.is_empty() && !user.is_empty() => {
                json!({"web": chat, "user": user})
            }
            _ => json!({"web": place}),
        },
        // A Matrix user id keeps its `@` (`matrix:@alice:example.org`).
        ("matrix", Some(_)) => json!({"channel": "matrix", "user": place}),
        (p, Some(user)) => json!({"channel": p, "user": user}),
        (p, None) => json!({"channel": p, "thread": place}),
    })
}

/// The client of one server.
#[derive(Clone, Debug)]
pub struct Client {
    server: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl Client {
    /// A client of `args.server`.
    pub fn new(args: &ServerArgs) -> Result<Client, AskError> {
        frogbot_openai::install_crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| AskError::Usage(e.to_string()))?;
        Ok(Client {
            server: args.server.trim_end_matches('/').to_owned(),
            token: args.token.clone(),
            http,
        })
    }

    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, AskError> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.server))
            .timeout(timeout);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let unreachable = |e: reqwest::Error| AskError::Unreachable {
            server: self.server.clone(),
            message: std::error::Error::source(&e)
                .map(|s| s.to_string())
                .unwrap_or_else(|| e.to_string()),
        };
        let res = req.send().await.map_err(unreachable)?;
        let ok = res.status().is_success();
        let status = res.status();
        let v: Value = res.json().await.unwrap_or(Value::Null);
        if !ok {
            return Err(api_error(status, &v));
        }
        Ok(v)
    }

    /// `POST /api/asks`.
    pub async fn ask(&self, body: Value) -> Result<Value, AskError> {
        self.call(
            reqwest::Method::POST,
            "/api/asks",
            Some(body),
            Duration::from_secs(60),
        )
        .await
    }

    /// Waits for the ask to be over, or for `timeout` (then the status as it stands).
    pub async fn wait(&self, id: &str, timeout: Option<Duration>) -> Result<Value, AskError> {
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        loop {
            let left = deadline.map(|d| d.saturating_duration_since(tokio::time::Instant::now()));
            let this = left
                .unwrap_or(Duration::from_secs(60))
                .min(Duration::from_secs(60));
            let status = self
                .call(
                    reqwest::Method::GET,
                    &format!("/api/asks/{id}/wait?timeout={}", this.as_secs_f64()),
                    None,
                    this + Duration::from_secs(30),
                )
                .await?;
            if is_final(&status) || left.is_some_and(|l| l <= this) {
                return Ok(status);
            }
        }
    }

    /// `DELETE /api/asks/{id}`.
    pub async fn cancel(&self, id: &str) -> Result<Value, AskError> {
        self.call(
            reqwest::Method::DELETE,
            &format!("/api/asks/{id}"),
            None,
            Duration::from_secs(60),
        )
        .await
    }
}

/// An API error answer (`{"error": {"code", "message"}}`) as an [`AskError`], the status for
/// what it leaves out.
pub(crate) fn api_error(status: reqwest::StatusCode, v: &Value) -> AskError {
    AskError::Api {
        code: v["error"]["code"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| status.as_u16().to_string()),
        message: v["error"]["message"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| format!("HTTP {status}")),
    }
}

pub(crate) fn is_final(status: &Value) -> bool {
    !matches!(status["state"].as_str(), Some("open" | "queued") | None)
}

/// The exit code of an ask's status: 0 answered (or defaults), 2 expired without an answer or
/// still open (the wait timed out), 3 cancelled or skipped.
pub fn exit_code(status: &Value) -> u8 {
    match status["state"].as_str() {
        Some("answered") => EXIT_ANSWERED,
        Some("expired") if status.get("answers").is_some_and(|a| !a.is_null()) => EXIT_ANSWERED,
        Some("cancelled" | "dismissed") => EXIT_CANCELLED,
        _ => EXIT_EXPIRED,
    }
}

/// The status as `--format` prints it.
pub fn render(status: &Value, format: Format) -> String {
    match format {
        Format::Json => status.to_string(),
        Format::Text => {
            let text = |v: &Value| match v {
                Value::String(s) => s.clone(),
                Value::Array(a) => a
                    .iter()
                    .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(", "),
                other => other.to_string(),
            };
            // A person's answer may hold terminal control sequences.
            let text = match status.get("values").and_then(Value::as_object) {
                Some(values) if values.len() == 1 => {
                    text(values.values().next().expect("one value"))
                }
                Some(values) => values
                    .iter()
                    .map(|(k, v)| format!("{k}: {}", text(v)))
                    .collect::<Vec<_>>()
                    .join("\n"),
                None => status["state"].as_str().unwrap_or("unknown").to_owned(),
            };
            crate::term::escape_controls(&text).into_owned()
        }
    }
}

fn read_blocks(arg: &str) -> Result<String, AskError> {
    if arg == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| AskError::Usage(format!("--blocks -: {e}")))?;
        Ok(s)
    } else {
        std::fs::read_to_string(arg).map_err(|e| AskError::Usage(format!("--blocks {arg}: {e}")))
    }
}

/// Runs `frogbot ask`: prints the status (after the answer with `--wait`) and returns the exit
/// code.
pub async fn run_ask(args: ClientArgs<AskArgs>) -> Result<u8, AskError> {
    let blocks = args.blocks.as_deref().map(read_blocks).transpose()?;
    let (inputs, shown) = split_display(inputs_of(&args, blocks.as_deref())?);
    let mut body = json!({"text": args.text, "inputs": inputs});
    if !shown.is_empty() {
        body["blocks"] = Value::Array(shown);
    }
    if let Some(to) = &args.to {
        body["to"] = target_of(to)?;
    }
    if let Some(t) = &args.title {
        body["title"] = json!(t);
    }
    if let Some(e) = &args.expires {
        body["expiresInSeconds"] = json!(duration("expires", e)?.as_secs().max(1));
    }
    if !args.from.is_empty() {
        body["from"] = json!(args.from);
    }
    if let Some(k) = &args.idempotency_key {
        body["idempotencyKey"] = json!(k);
    }
    let timeout = args
        .timeout
        .as_deref()
        .map(|t| duration("timeout", t))
        .transpose()?;
    let client = Client::new(&args.server)?;
    let created = client.ask(body).await?;
    if !args.wait {
        println!("{}", render(&created, Format::Json));
        return Ok(EXIT_ANSWERED);
    }
    let id = created["id"].as_str().unwrap_or_default().to_owned();
    let status = if is_final(&created) {
        created
    } else {
        client.wait(&id, timeout).await?
    };
    println!("{}", render(&status, args.server.format));
    Ok(exit_code(&status))
}

/// Runs `frogbot wait`.
pub async fn run_wait(args: ClientArgs<WaitArgs>) -> Result<u8, AskError> {
    let timeout = args
        .timeout
        .as_deref()
        .map(|t| duration("timeout", t))
        .transpose()?;
    let status = Client::new(&args.server)?.wait(&args.id, timeout).await?;
    println!("{}", render(&status, args.server.format));
    Ok(exit_code(&status))
}

/// Runs `frogbot cancel`: 0 once cancelled.
pub async fn run_cancel(args: ClientArgs<CancelArgs>) -> Result<u8, AskError> {
    let status = Client::new(&args.server)?.cancel(&args.id).await?;
    println!("{}", render(&status, args.server.format));
    Ok(EXIT_ANSWERED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_exit_codes() {
        assert_eq!(target_of("web:c1").unwrap(), json!({"web": "c1"}));
        assert_eq!(
            target_of("web:c1@alice").unwrap(),
            json!({"web": "c1", "user": "alice"})
        );
        assert_eq!(
            target_of("slack:C0123").unwrap(),
            json!({"channel": "slack", "thread": "C0123"})
        );
        assert_eq!(
            target_of("discord:@42").unwrap(),
            json!({"channel": "discord", "user": "42"})
        );
        assert_eq!(
            target_of("matrix:@alice:example.org").unwrap(),
            json!({"channel": "matrix", "user": "@alice:example.org"})
        );
        assert_eq!(
            target_of("matrix:!room:example.org").unwrap(),
            json!({"channel": "matrix", "thread": "!room:example.org"})
        );
        assert!(target_of("slack").is_err() && target_of(":x").is_err());
        assert_eq!(exit_code(&json!({"state": "answered"})), 0);
        assert_eq!(
            exit_code(&json!({"state": "expired", "answers": {"answers": []}})),
            0
        );
        assert_eq!(exit_code(&json!({"state": "expired"})), 2);
        assert_eq!(exit_code(&json!({"state": "open"})), 2);
        assert_eq!(exit_code(&json!({"state": "cancelled"})), 3);
        assert_eq!(
            render(
                &json!({"state": "answered", "values": {"A": ["x", "y"]}}),
                Format::Text
            ),
            "x, y"
        );
        assert_eq!(
            render(&json!({"state": "expired"}), Format::Text),
            "expired"
        );
    }

    #[test]
    fn text_answers_come_out_with_their_control_characters_escaped() {
        // A person's answer that would write the clipboard and clear the screen.
        let status = json!({"state": "answered", "values": {
            "Note": "\u{1b}]52;c;cm0gLXJmIH4=\u{7}",
            "Other": "\u{1b}[2Jgone",
        }});
        let text = render(&status, Format::Text);
        assert_eq!(
            text,
            "Note: \\u{1b}]52;c;cm0gLXJmIH4=\\u{7}\nOther: \\u{1b}[2Jgone"
        );
        assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'));
        // JSON escapes them itself.
        assert!(!render(&status, Format::Json).contains('\u{1b}'));
    }
}
