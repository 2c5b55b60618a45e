//! What one MCP tool call costs through the hub: `echo` of npm
//! `@modelcontextprotocol/server-everything` (crates/frogbot-mcp/tests/js, installed by
//! scripts/install-test-tools.sh) called through the hub's `Tool`, one call after the other,
//! over child-process stdio and over streamable HTTP on loopback; beside it, the same calls of
//! an in-process `tool_fn` echo (the floor every tool pays).
//!
//! ```text
//! cargo bench -p frogbot-mcp --bench mcp_calls                 # 1,000 calls each
//! cargo bench -p frogbot-mcp --bench mcp_calls -- --calls=5000
//! ```
//!
//! Prints p50 / p99 / mean per call, then one JSON line with every figure. Exits 0 with a
//! message when node or the package is missing.

use frogbot_core::agent::{Tool, ToolContext, tool_fn};
use frogbot_core::model::ChatId;
use frogbot_mcp::{McpHub, ServerConfig};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const WARMUP: usize = 50;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Echo {
    message: String,
}

fn ctx(i: usize) -> ToolContext {
    ToolContext {
        chat_id: ChatId::new("bench").unwrap(),
        driver: None,
        tool_call_id: format!("call-{i}"),
        message_id: "msg-bench".into(),
    }
}

/// p50, p99 and mean of `calls` sequential calls (after a warm-up), in microseconds.
async fn measure(tool: &Arc<dyn Tool>, calls: usize) -> Value {
    for i in 0..WARMUP {
        tool.call(json!({"message": "warm"}), ctx(i)).await.unwrap();
    }
    let mut took = Vec::with_capacity(calls);
    for i in 0..calls {
        let start = Instant::now();
        let out = tool
            .call(json!({"message": format!("m{i}")}), ctx(i))
            .await
            .unwrap();
        took.push(start.elapsed());
        assert!(out.as_str().is_some_and(|s| s.ends_with(&format!("m{i}"))));
    }
    took.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean = took.iter().map(|d| us(*d)).sum::<f64>() / calls as f64;
    json!({
        "p50_us": us(took[calls / 2]).round(),
        "p99_us": us(took[calls * 99 / 100]).round(),
        "mean_us": mean.round(),
    })
}

fn print(name: &str, figures: &Value) {
    println!(
        "{name:<24} p50 {:>8} µs   p99 {:>8} µs   mean {:>8} µs",
        figures["p50_us"], figures["p99_us"], figures["mean_us"]
    );
}

#[tokio::main]
async fn main() {
    let calls = std::env::args()
        .find_map(|a| a.strip_prefix("--calls=").map(|n| n.parse().unwrap()))
        .unwrap_or(1000usize);
    let entry = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/js/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !entry.exists() {
        eprintln!(
            "{} is missing (run scripts/install-test-tools.sh): nothing measured",
            entry.display()
        );
        return;
    }
    let entry = entry.display().to_string();
    println!("{calls} sequential echo calls each (after {WARMUP} unmeasured)");
    let mut all = serde_json::Map::new();

    let baseline = tool_fn("echo", "Echoes", |i: Echo, _ctx| async move {
        Ok::<_, frogbot_core::BoxError>(json!(format!("Echo: {}", i.message)))
    });
    let figures = measure(&baseline, calls).await;
    print("in-process tool_fn", &figures);
    all.insert("tool_fn".into(), figures);

    let hub = McpHub::start(
        vec![ServerConfig::stdio(
            "everything",
            "node",
            &[&entry, "stdio"],
        )],
        CancellationToken::new(),
    );
    hub.wait_ready(Duration::from_secs(60)).await.unwrap();
    let echo = echo_of(&hub);
    let figures = measure(&echo, calls).await;
    print("mcp stdio (node)", &figures);
    all.insert("mcp_stdio".into(), figures);
    hub.shutdown().await;

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = tokio::process::Command::new("node")
        .args([entry.as_str(), "streamableHttp"])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let hub = McpHub::start(
        vec![ServerConfig::http(
            "everything",
            &format!("http://127.0.0.1:{port}/mcp"),
        )],
        CancellationToken::new(),
    );
    hub.wait_ready(Duration::from_secs(60)).await.unwrap();
    let echo = echo_of(&hub);
    let figures = measure(&echo, calls).await;
    print("mcp streamable HTTP", &figures);
    all.insert("mcp_http".into(), figures);
    hub.shutdown().await;
    let _ = server.kill().await;

    println!("{}", Value::Object(all));
}

fn echo_of(hub: &McpHub) -> Arc<dyn Tool> {
    hub.tools(None)
        .into_iter()
        .find(|t| t.spec().name == "everything__echo")
        .expect("everything__echo")
}
