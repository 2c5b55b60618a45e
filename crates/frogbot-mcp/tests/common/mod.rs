//! Shared by the tests: the npm server-everything (found or skipped), ports, processes, events.

#![allow(dead_code, unreachable_pub)]

use frogbot_core::agent::{Tool, ToolContext};
use frogbot_core::model::ChatId;
use frogbot_mcp::{McpHub, ServerStatus};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How long a test waits for an event before failing (a hang guard, not a measurement).
pub const WAIT: Duration = Duration::from_secs(60);

/// Whether the MCP tests must run (`FROGBOT_REQUIRE_MCP=1`): then a missing node or package fails.
pub fn required() -> bool {
    std::env::var("FROGBOT_REQUIRE_MCP").is_ok_and(|v| v == "1")
}

/// `node` and the entry point of the pinned `@modelcontextprotocol/server-everything`
/// (crates/frogbot-mcp/tests/js, installed by scripts/install-test-tools.sh), or `None` with a
/// message on stderr (a panic with `FROGBOT_REQUIRE_MCP=1`).
pub fn everything() -> Option<(String, String)> {
    let entry = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/js/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let node_ok = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let missing = if !node_ok {
        Some("node is not installed".to_owned())
    } else if !entry.exists() {
        Some(format!(
            "{} is missing (run scripts/install-test-tools.sh)",
            entry.display()
        ))
    } else {
        None
    };
    match missing {
        None => Some(("node".into(), entry.display().to_string())),
        Some(why) if required() => panic!("FROGBOT_REQUIRE_MCP=1 but {why}"),
        Some(why) => {
            eprintln!(
                "{why}: the server-everything tests are skipped \
                 (set FROGBOT_REQUIRE_MCP=1 to make this an error)"
            );
            None
        }
    }
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something accepts connections on `port`.
pub async fn wait_listening(port: u16) {
    tokio::time::timeout(WAIT, async {
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the server never listened");
}

/// Whether a process runs (exists and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z"),
        Err(_) => false,
    }
}

/// SIGKILLs a process.
pub fn kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -9 {pid} failed");
}

/// Waits until `check` holds for the hub's status, awaiting `changed()` between looks.
pub async fn wait_status(hub: &McpHub, what: &str, check: impl Fn(&[ServerStatus]) -> bool) {
    let mut changed = hub.changed();
    let ok = tokio::time::timeout(WAIT, async {
        loop {
            if check(&hub.status()) {
                return;
            }
            changed.changed().await.unwrap();
        }
    })
    .await;
    assert!(
        ok.is_ok(),
        "timed out waiting for {what}: {:?}",
        hub.status()
    );
}

/// The hub's tool named `name`.
pub fn tool(hub: &McpHub, name: &str) -> Arc<dyn Tool> {
    hub.tools(None)
        .into_iter()
        .find(|t| t.spec().name == name)
        .unwrap_or_else(|| panic!("no tool {name}: {:?}", names(hub)))
}

/// The hub's tool names, sorted.
pub fn names(hub: &McpHub) -> Vec<String> {
    let mut names: Vec<String> = hub.tools(None).iter().map(|t| t.spec().name).collect();
    names.sort();
    names
}

/// A tool context.
pub fn ctx(call: &str) -> ToolContext {
    ToolContext {
        chat_id: ChatId::new("mcp-test").unwrap(),
        driver: None,
        tool_call_id: call.into(),
        message_id: "msg-test".into(),
    }
}

/// Logs to the test's output (`RUST_LOG` to choose).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "frogbot_mcp=debug".into()),
        )
        .with_test_writer()
        .try_init();
}
