//! The hub against a server nobody here wrote: npm `@modelcontextprotocol/server-everything`
//! (version pinned in tests/js/package.json), over child-process stdio and over streamable HTTP.
//! Skipped with a message when node or the package is missing, unless `FROGBOT_REQUIRE_MCP=1`.
//!
//! Its tool names in 2026.8.31 (dist/tools/index.js): echo, get-annotated-message, get-env,
//! get-resource-links, get-resource-reference, get-structured-content, get-sum, get-tiny-image,
//! gzip-file-as-resource, toggle-simulated-logging, toggle-subscriber-updates,
//! trigger-long-running-operation, and simulate-research-query (registered after `initialize`;
//! the sampling / roots tools are not, as this client declares neither; the elicitation one is,
//! see tests/elicitation.rs).

mod common;

use common::*;
use frogbot_mcp::{McpHub, Restart, ServerConfig};
use serde_json::{Value, json};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const FAST: Restart = Restart {
    min: Duration::from_millis(50),
    max: Duration::from_millis(500),
};

fn stdio_config(node: &str, entry: &str) -> ServerConfig {
    ServerConfig::stdio("everything", node, &[entry, "stdio"])
}

/// `node dist/index.js streamableHttp` on `port` (its `PORT` variable), once it listens.
async fn http_server(node: &str, entry: &str, port: u16) -> tokio::process::Child {
    let child = tokio::process::Command::new(node)
        .args([entry, "streamableHttp"])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_listening(port).await;
    child
}

/// What every transport must do: list, call echo / get-sum / the structured and image tools.
async fn lists_and_calls(hub: &McpHub) {
    hub.wait_ready(WAIT).await.unwrap();
    let names = names(hub);
    for name in [
        "everything__echo",
        "everything__get-sum",
        "everything__get-structured-content",
        "everything__get-tiny-image",
        "everything__trigger-long-running-operation",
    ] {
        assert!(
            names.contains(&name.to_owned()),
            "{name} missing: {names:?}"
        );
    }
    let echo = tool(hub, "everything__echo");
    let spec = echo.spec();
    assert_eq!(spec.description, "Echoes back the input string");
    assert_eq!(spec.input_schema["type"], "object");
    assert_eq!(spec.input_schema["properties"]["message"]["type"], "string");
    assert_eq!(
        echo.call(json!({"message": "hi"}), ctx("c1"))
            .await
            .unwrap(),
        json!("Echo: hi")
    );
    let sum = tool(hub, "everything__get-sum");
    assert_eq!(sum.spec().input_schema["required"], json!(["a", "b"]));
    assert_eq!(
        sum.call(json!({"a": 2, "b": 3}), ctx("c2")).await.unwrap(),
        json!("The sum of 2 and 3 is 5.")
    );
    let weather = tool(hub, "everything__get-structured-content")
        .call(json!({"location": "Chicago"}), ctx("c3"))
        .await
        .unwrap();
    assert_eq!(
        weather["structuredContent"],
        json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82})
    );
    assert_eq!(weather["content"][0]["type"], "text");
    let image = tool(hub, "everything__get-tiny-image")
        .call(json!({}), ctx("c4"))
        .await
        .unwrap();
    let parts = image["content"].as_array().unwrap();
    assert_eq!(parts.len(), 3, "{image}");
    assert_eq!(parts[1]["type"], "image");
    assert_eq!(parts[1]["mimeType"], "image/png");
    assert!(parts[1]["data"].as_str().unwrap().len() > 100);
    // A JSON-RPC error (bad arguments) is the call's error too.
    let bad = sum.call(json!({"a": "two"}), ctx("c5")).await.unwrap_err();
    assert!(!bad.to_string().is_empty());
}

/// A call longer than `timeout_seconds` fails naming the tool and the timeout; the connection
/// stays usable.
async fn times_out(hub: &McpHub) {
    hub.wait_ready(WAIT).await.unwrap();
    let long = tool(hub, "everything__trigger-long-running-operation");
    let err = long
        .call(json!({"duration": 30, "steps": 1}), ctx("t1"))
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "tool everything__trigger-long-running-operation timed out after 1 s (the call was cancelled)"
    );
    let echo = tool(hub, "everything__echo");
    assert_eq!(
        echo.call(json!({"message": "still here"}), ctx("t2"))
            .await
            .unwrap(),
        json!("Echo: still here")
    );
}

#[tokio::test]
async fn stdio_lists_and_calls() {
    init_tracing();
    let Some((node, entry)) = everything() else {
        return;
    };
    let hub = McpHub::start(vec![stdio_config(&node, &entry)], CancellationToken::new());
    lists_and_calls(&hub).await;
    hub.shutdown().await;
}

#[tokio::test]
async fn stdio_times_out() {
    init_tracing();
    let Some((node, entry)) = everything() else {
        return;
    };
    let config = ServerConfig {
        timeout_seconds: 1,
        ..stdio_config(&node, &entry)
    };
    let hub = McpHub::start(vec![config], CancellationToken::new());
    times_out(&hub).await;
    hub.shutdown().await;
}

/// The child killed during a call: that call fails, the hub starts a new child, later calls work;
/// shutdown leaves no child running.
#[tokio::test]
async fn stdio_child_killed_mid_call_is_restarted() {
    init_tracing();
    let Some((node, entry)) = everything() else {
        return;
    };
    let cancel = CancellationToken::new();
    let hub = McpHub::start_with(vec![stdio_config(&node, &entry)], cancel.clone(), FAST);
    hub.wait_ready(WAIT).await.unwrap();
    let first = hub.status()[0].pid.expect("a stdio server has a pid");
    assert!(alive(first));

    let long = tool(&hub, "everything__trigger-long-running-operation");
    let call = tokio::spawn(async move {
        long.call(json!({"duration": 60, "steps": 1}), ctx("k1"))
            .await
    });
    // Let the request reach the child; the call fails the same way if it has not yet.
    tokio::time::sleep(Duration::from_millis(300)).await;
    kill(first);
    let err = call.await.unwrap().unwrap_err().to_string();
    assert!(
        err == "tool everything__trigger-long-running-operation failed: the connection to mcp \
                server everything was lost (it is being restarted)"
            || err.starts_with("mcp server everything is not connected"),
        "{err}"
    );

    wait_status(&hub, "the restart", |s| {
        s[0].connected && s[0].connects >= 2
    })
    .await;
    let second = hub.status()[0].pid.unwrap();
    assert_ne!(first, second);
    assert_eq!(
        tool(&hub, "everything__echo")
            .call(json!({"message": "again"}), ctx("k2"))
            .await
            .unwrap(),
        json!("Echo: again")
    );

    cancel.cancel();
    hub.shutdown().await;
    assert!(!alive(second), "the child outlived the hub's shutdown");
    assert!(hub.tools(None).is_empty());
    assert!(!hub.status()[0].connected);
}

/// While the server is down its tools are absent and a held tool says it is not connected.
#[tokio::test]
async fn stdio_down_server_offers_no_tools() {
    init_tracing();
    let Some((node, entry)) = everything() else {
        return;
    };
    // A restart delay far beyond the test: once killed, the server stays down.
    let slow = Restart {
        min: Duration::from_secs(3600),
        max: Duration::from_secs(3600),
    };
    let hub = McpHub::start_with(
        vec![stdio_config(&node, &entry)],
        CancellationToken::new(),
        slow,
    );
    hub.wait_ready(WAIT).await.unwrap();
    let echo = tool(&hub, "everything__echo");
    kill(hub.status()[0].pid.unwrap());
    wait_status(&hub, "the server to be down", |s| !s[0].connected).await;
    assert!(hub.tools(None).is_empty());
    let err = echo
        .call(json!({"message": "x"}), ctx("d1"))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("mcp server everything is not connected"),
        "{err}"
    );
    hub.shutdown().await;
}

/// Dropping the last clone of the hub stops the child too.
#[tokio::test]
async fn stdio_dropping_the_hub_stops_the_child() {
    init_tracing();
    let Some((node, entry)) = everything() else {
        return;
    };
    let hub = McpHub::start(vec![stdio_config(&node, &entry)], CancellationToken::new());
    hub.wait_ready(WAIT).await.unwrap();
    let pid = hub.status()[0].pid.unwrap();
    drop(hub);
    tokio::time::timeout(WAIT, async {
        while alive(pid) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the child outlived the hub");
}

#[tokio::test]
async fn http_lists_and_calls() {
    init_tracing();
    let Some((node, entry)) = everything() else {
        return;
    };
    let port = free_port();
    let mut server = http_server(&node, &entry, port).await;
    let hub = McpHub::start(
        vec![ServerConfig::http(
            "everything",
            &format!("http://127.0.0.1:{port}/mcp"),
        )],
        CancellationToken::new(),
    );
    lists_and_calls(&hub).await;
    assert_eq!(hub.status()[0].pid, None);
    hub.shutdown().await;
    server.kill().await.unwrap();
}

#[tokio::test]
async fn http_times_out() {
    init_tracing();
    let Some((node, entry)) = everything() else {
        return;
    };
    let port = free_port();
    let mut server = http_server(&node, &entry, port).await;
    let config = ServerConfig {
        timeout_seconds: 1,
        ..ServerConfig::http("everything", &format!("http://127.0.0.1:{port}/mcp"))
    };
    let hub = McpHub::start(vec![config], CancellationToken::new());
    times_out(&hub).await;
    hub.shutdown().await;
    server.kill().await.unwrap();
}

/// The HTTP server killed during a call: that call fails; once a server listens again the hub
/// reconnects and later calls work.
#[tokio::test]
async fn http_server_killed_mid_call_reconnects() {
    init_tracing();
    let Some((node, entry)) = everything() else {
        return;
    };
    let port = free_port();
    let mut server = http_server(&node, &entry, port).await;
    let hub = McpHub::start_with(
        vec![ServerConfig::http(
            "everything",
            &format!("http://127.0.0.1:{port}/mcp"),
        )],
        CancellationToken::new(),
        FAST,
    );
    hub.wait_ready(WAIT).await.unwrap();
    let long = tool(&hub, "everything__trigger-long-running-operation");
    let call = tokio::spawn(async move {
        long.call(json!({"duration": 60, "steps": 1}), ctx("h1"))
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.kill().await.unwrap();
    let err = call.await.unwrap().unwrap_err().to_string();
    assert!(
        err == "tool everything__trigger-long-running-operation failed: the connection to mcp \
                server everything was lost (it is being restarted)"
            || err.starts_with("mcp server everything is not connected"),
        "{err}"
    );

    let mut server = http_server(&node, &entry, port).await;
    wait_status(&hub, "the reconnect", |s| {
        s[0].connected && s[0].connects >= 2
    })
    .await;
    let out: Value = tool(&hub, "everything__echo")
        .call(json!({"message": "back"}), ctx("h2"))
        .await
        .unwrap();
    assert_eq!(out, json!("Echo: back"));
    hub.shutdown().await;
    server.kill().await.unwrap();
}

/// The children of `ppid`, from /proc.
fn children_of(ppid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if parent == Some(ppid) {
            found.push(pid);
        }
    }
    found
}

/// A launcher that runs the server as its own child (as `npx` does): shutdown stops both, as the
/// hub signals the whole process group.
#[tokio::test]
async fn stdio_shutdown_stops_the_servers_own_children() {
    init_tracing();
    let Some((node, entry)) = everything() else {
        return;
    };
    // `; exit $?` keeps sh from exec-ing node: node is sh's child.
    let script = format!("'{node}' '{entry}' stdio; exit $?");
    let hub = McpHub::start(
        vec![ServerConfig::stdio("everything", "sh", &["-c", &script])],
        CancellationToken::new(),
    );
    hub.wait_ready(WAIT).await.unwrap();
    let sh = hub.status()[0].pid.unwrap();
    let grandchildren = children_of(sh);
    assert_eq!(grandchildren.len(), 1, "node under sh: {grandchildren:?}");
    assert_eq!(
        tool(&hub, "everything__echo")
            .call(json!({"message": "via sh"}), ctx("g1"))
            .await
            .unwrap(),
        json!("Echo: via sh")
    );
    hub.shutdown().await;
    assert!(!alive(sh), "the launcher outlived shutdown");
    assert!(!alive(grandchildren[0]), "the server outlived shutdown");
}

/// A stdio server sees its `env` and a few basics (PATH, HOME…), not the rest of FrogBot's
/// environment (`get-env` returns the server's `process.env`).
#[tokio::test]
async fn stdio_server_gets_only_its_env() {
    init_tracing();
    let Some((node, entry)) = everything() else {
        return;
    };
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let mut config = stdio_config(&node, &entry);
    config
        .env
        .insert("FROGBOT_MCP_TEST_VAR".into(), "from-config".into());
    let hub = McpHub::start(vec![config], CancellationToken::new());
    hub.wait_ready(WAIT).await.unwrap();
    let out = tool(&hub, "everything__get-env")
        .call(json!({}), ctx("e1"))
        .await
        .unwrap();
    let env: Value = serde_json::from_str(out.as_str().unwrap()).unwrap();
    assert_eq!(env["FROGBOT_MCP_TEST_VAR"], "from-config");
    assert_eq!(env["PATH"].as_str(), std::env::var("PATH").ok().as_deref());
    assert!(env.get("CARGO_MANIFEST_DIR").is_none(), "{env}");
    hub.shutdown().await;
}
