//! An MCP client made with the official TypeScript SDK (`tests/js/mcp-client.mjs`, npm
//! `@modelcontextprotocol/sdk`), driven line by line: the tests of FrogBot's MCP server use it over
//! streamable HTTP (`/mcp` of a running serve) and over stdio (`frogbot mcp`).

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// `crates/frogbot/tests/js`, its npm packages installed (`scripts/install-test-tools.sh` when
/// they are missing).
pub(crate) fn js_dir() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let js = root.join("crates/frogbot/tests/js");
    if !js.join("node_modules/@modelcontextprotocol/sdk").is_dir() {
        let status = std::process::Command::new("bash")
            .arg(root.join("scripts/install-test-tools.sh"))
            .status()
            .expect("run scripts/install-test-tools.sh (needs bash)");
        assert!(
            status.success() && js.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
            "the MCP SDK is missing: run `bash scripts/install-test-tools.sh`"
        );
    }
    js
}

/// One running `mcp-client.mjs`.
pub(crate) struct McpClient {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::UnboundedReceiver<Value>,
    /// Lines read but not yet asked for.
    seen: Vec<Value>,
}

impl McpClient {
    /// Connected to streamable HTTP at `url` with `token` (none: no `Authorization`); the
    /// connection's failure as `Err(line)`.
    pub(crate) async fn http(url: &str, token: Option<&str>) -> Result<McpClient, Value> {
        Self::spawn(&["http", url, token.unwrap_or("")]).await
    }

    /// Connected to `frogbot mcp` (this build's binary) calling `server` with `token`.
    pub(crate) async fn stdio(server: &str, token: &str) -> Result<McpClient, Value> {
        Self::spawn(&["stdio", env!("CARGO_BIN_EXE_frogbot"), server, token]).await
    }

    async fn spawn(args: &[&str]) -> Result<McpClient, Value> {
        let js = js_dir();
        let mut child = Command::new("node")
            .arg(js.join("mcp-client.mjs"))
            .args(args)
            .current_dir(&js)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("run node (Node 20 or later)");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                let v = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("mcp-client printed {line:?}: {e}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut client = McpClient {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        };
        let first = client
            .next(|v| v["op"] == "connected" || v["op"] == "connect-error")
            .await;
        if first["op"] == "connect-error" {
            return Err(first);
        }
        Ok(client)
    }

    async fn send(&mut self, v: Value) {
        let mut line = v.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("write to mcp-client");
        self.stdin.flush().await.expect("flush");
    }

    /// The next line (read before or after this call) that `wanted` accepts.
    pub(crate) async fn next(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.seen.iter().position(&wanted) {
            return self.seen.remove(i);
        }
        let deadline = tokio::time::Instant::now() + super::WAIT;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.recv())
                .await
                .unwrap_or_else(|_| panic!("no such line from mcp-client; seen {:?}", self.seen))
                .unwrap_or_else(|| panic!("mcp-client exited; seen {:?}", self.seen));
            if wanted(&line) {
                return line;
            }
            self.seen.push(line);
        }
    }

    /// The tools `tools/list` gives.
    pub(crate) async fn list(&mut self) -> Vec<Value> {
        self.send(json!({"op": "list"})).await;
        let v = self.next(|v| v["op"] == "list").await;
        v["tools"].as_array().cloned().unwrap_or_default()
    }

    /// Starts the call `id` of tool `name`.
    pub(crate) async fn call(&mut self, id: &str, name: &str, arguments: Value) {
        self.send(json!({"op": "call", "id": id, "name": name, "arguments": arguments}))
            .await;
    }

    /// Aborts the call `id` (the SDK sends `notifications/cancelled`).
    pub(crate) async fn cancel(&mut self, id: &str) {
        self.send(json!({"op": "cancel", "id": id})).await;
    }

    /// The end of call `id`: `{"op": "result", "result"}` or `{"op": "error", "message"}`.
    pub(crate) async fn end_of(&mut self, id: &str) -> Value {
        let id = id.to_owned();
        self.next(move |v| v["id"] == id.as_str() && (v["op"] == "result" || v["op"] == "error"))
            .await
    }

    /// The result of call `id` (panics on a protocol error).
    pub(crate) async fn result_of(&mut self, id: &str) -> Value {
        let end = self.end_of(id).await;
        assert_eq!(end["op"], "result", "call {id} failed: {end}");
        end["result"].clone()
    }

    /// Kills the client's process (and with it a `frogbot mcp` child's stdin).
    pub(crate) async fn kill(mut self) {
        let _ = self.child.kill().await;
    }

    /// Closes the client and waits for it to exit.
    pub(crate) async fn close(mut self) {
        self.send(json!({"op": "close"})).await;
        let _ = tokio::time::timeout(super::WAIT, self.child.wait()).await;
    }
}
