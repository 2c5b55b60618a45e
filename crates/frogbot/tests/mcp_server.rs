//! FrogBot as an MCP server, driven by the official TypeScript SDK's client
//! (`tests/js/mcp-client.mjs`): over streamable HTTP at serve's `/mcp` and over stdio through
//! `frogbot mcp`. An agent asks a person and gets the typed answer; a cancelled call withdraws
//! its question; tokens that are not an agent's are refused; messages, the inbox and waiting for
//! an event work as over the HTTP API. The platforms' clicks are in the channel tests
//! (`channel_slack.rs` … `mcp_*`).

mod common;

use std::time::Duration;

use common::mcp::McpClient;
use common::{AGENT, ALICE, NARROW_AGENT, Server};
use serde_json::{Value, json};

async fn server() -> (Server, frogbot_testkit::TestDb) {
    let db = frogbot_testkit::sqlite_db();
    let s = common::start_config(common::config_closed(&db.url, "")).await;
    (s, db)
}

/// The chat's open question call, once there is one (read as `token`).
async fn open_call(s: &Server, chat: &str, token: &str) -> Value {
    let deadline = tokio::time::Instant::now() + common::WAIT;
    loop {
        let p = s
            .get(&format!("/api/chats/{chat}/pending"), Some(token))
            .await;
        if let Some(call) = p.json["calls"].get(0) {
            return call.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no open call in {chat}: {}",
            p.text
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

fn release_inputs() -> Value {
    json!([
        {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod"}]},
        {"header": "Pods", "question": "How many?", "kind": "number_input", "min": 1, "max": 10},
        {"header": "Notify", "question": "Tell the team?", "kind": "toggle"}
    ])
}

/// An ask over `client` into the agent's own web chat, answered there through the web chat's
/// settle endpoint (the agent's web front end holds its token; an ask goes into a web chat of the
/// caller's own, as the HTTP API decides): the result carries the typed values.
async fn ask_answered_in_the_web_chat(s: &Server, client: &mut McpClient, chat: &str) {
    client
        .call(
            "ask",
            "ask_person",
            json!({"to": format!("web:{chat}"), "text": "Release v1.4?", "title": "Release",
                   "inputs": release_inputs(), "expiresInSeconds": 3600}),
        )
        .await;
    let ended = tokio::time::timeout(Duration::from_secs(2), client.end_of("ask")).await;
    assert!(ended.is_err(), "the call ended before an answer: {ended:?}");
    let call = open_call(s, chat, AGENT).await;
    assert_eq!(call["input"]["questions"][1]["kind"], "number_input");
    let settled = s
        .post(
            &format!("/api/chats/{chat}/settle"),
            Some(AGENT),
            json!({"toolCallId": call["toolCallId"], "output": {"answers": [
                {"header": "Env", "selected": ["prod"]},
                {"header": "Pods", "selected": ["4"]},
                {"header": "Notify", "selected": ["on"]}
            ]}}),
        )
        .await;
    assert_eq!(settled.status, 200, "{}", settled.text);
    let result = client.result_of("ask").await;
    assert_ne!(result["isError"], true, "{result}");
    let status = &result["structuredContent"];
    assert_eq!(status["state"], "answered", "{result}");
    // Typed: a number is a number, a toggle a boolean.
    assert_eq!(
        status["values"],
        json!({"Env": "prod", "Pods": 4, "Notify": true})
    );
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("answered"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_the_tools_are_listed_and_an_ask_returns_the_persons_typed_answer() {
    let (s, _db) = server().await;
    let mut client = McpClient::http(&format!("{}/mcp", s.base), Some(AGENT))
        .await
        .expect("connects with an agent token");
    let tools = client.list().await;
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        names,
        ["ask_person", "send_message", "read_inbox", "wait_for_event"]
    );
    let ask = &tools[0];
    assert_eq!(ask["inputSchema"]["required"], json!(["text"]));
    assert_eq!(
        ask["inputSchema"]["properties"]["inputs"]["items"]["properties"]["kind"]["enum"],
        json!(["choice", "text_input", "number_input", "toggle", "confirm"])
    );
    assert_eq!(ask["outputSchema"]["required"], json!(["id", "state"]));
    ask_answered_in_the_web_chat(&s, &mut client, "mcp-http").await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_frogbot_mcp_asks_through_a_running_server() {
    let (s, _db) = server().await;
    let mut client = McpClient::stdio(&s.base, AGENT)
        .await
        .expect("frogbot mcp starts");
    assert_eq!(client.list().await.len(), 4);
    ask_answered_in_the_web_chat(&s, &mut client, "mcp-stdio").await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_withdraws_its_question_and_progress_is_reported_meanwhile() {
    let (s, _db) = server().await;
    let mut client = McpClient::http(&format!("{}/mcp", s.base), Some(AGENT))
        .await
        .unwrap();
    client
        .call(
            "ask",
            "ask_person",
            json!({"to": "web:mcp-cancel", "text": "Deploy?",
                   "inputs": [{"header": "Go", "question": "Deploy?", "kind": "confirm", "label": "Deploy"}]}),
        )
        .await;
    let call = open_call(&s, "mcp-cancel", AGENT).await;
    let progress = client
        .next(|v| v["op"] == "progress" && v["id"] == "ask")
        .await;
    assert!(
        progress["message"]
            .as_str()
            .unwrap()
            .contains("waiting for the person's answer"),
        "{progress}"
    );
    client.cancel("ask").await;
    let end = client.end_of("ask").await;
    assert_eq!(end["op"], "error", "the SDK rejects an aborted call: {end}");
    // The question is withdrawn: nothing waits in the chat, and a late answer is stale.
    let deadline = tokio::time::Instant::now() + common::WAIT;
    loop {
        let p = s.get("/api/chats/mcp-cancel/pending", Some(AGENT)).await;
        if p.json["calls"].as_array().is_some_and(Vec::is_empty) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still pending: {}",
            p.text
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let late = s
        .post(
            "/api/chats/mcp-cancel/settle",
            Some(AGENT),
            json!({"toolCallId": call["toolCallId"], "output": {"answers": [{"header": "Go", "selected": ["Deploy"]}]}}),
        )
        .await;
    assert_eq!(late.status, 409, "{}", late.text);
    let asks = s.get("/api/chats/mcp-cancel", Some(AGENT)).await;
    assert!(
        asks.text.contains("withdrawn") || asks.text.contains("cancelled"),
        "{}",
        asks.text
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_that_are_not_an_agents_are_refused_and_an_agent_reaches_only_its_targets() {
    let (s, _db) = server().await;
    let url = format!("{}/mcp", s.base);
    // No token, an unknown one, a user's: the endpoint refuses before any MCP session.
    for (token, why) in [
        (None, "agent's token"),
        (Some("not-a-token"), "unknown bearer token"),
        (Some(ALICE), "agent's token"),
    ] {
        let refused = McpClient::http(&url, token).await.err().expect("refused");
        let code = if token == Some(ALICE) { 403 } else { 401 };
        assert_eq!(refused["code"], code, "{refused}");
        assert!(
            refused["message"].as_str().unwrap().contains(why),
            "{refused}"
        );
    }
    // The same over stdio: the tool's call is refused by the server's API.
    let mut stdio = McpClient::stdio(&s.base, "not-a-token").await.unwrap();
    stdio
        .call("a", "ask_person", json!({"text": "hi", "to": "web:x"}))
        .await;
    let r = stdio.result_of("a").await;
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("unauthorized"),
        "{r}"
    );
    stdio.close().await;
    // An agent allowed only Slack's C0123 cannot ask on Telegram or in a web chat.
    let mut narrow = McpClient::http(&url, Some(NARROW_AGENT)).await.unwrap();
    narrow
        .call(
            "t",
            "ask_person",
            json!({"text": "hi", "to": "telegram:@42"}),
        )
        .await;
    let r = narrow.result_of("t").await;
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("forbidden"),
        "{r}"
    );
    // Bad arguments: a clear error, nothing asked.
    narrow.call("b", "ask_person", json!({"to": "web:x"})).await;
    let r = narrow.result_of("b").await;
    assert_eq!(r["isError"], true);
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("`text` is required"),
        "{r}"
    );
    narrow.call("u", "no_such_tool", json!({})).await;
    let end = narrow.end_of("u").await;
    assert!(end.to_string().contains("unknown tool"), "{end}");
    narrow.close().await;
    // A page on another origin cannot drive the endpoint with a browser.
    let r = s
        .client
        .post(&url)
        .bearer_auth(AGENT)
        .header("origin", "https://evil.example")
        .header("content-type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_and_the_persons_reply_read_from_the_inbox_and_waited_for() {
    let (s, _db) = server().await;
    let mut client = McpClient::http(&format!("{}/mcp", s.base), Some(AGENT))
        .await
        .unwrap();
    client
        .call(
            "send",
            "send_message",
            json!({"to": "web:mcp-talk@alice", "title": "Build", "text": "Build 42 started",
                   "blocks": [{"type": "progress", "id": "bar", "value": 1, "max": 4}]}),
        )
        .await;
    let sent = client.result_of("send").await;
    assert_ne!(sent["isError"], true, "{sent}");
    let chat = sent["structuredContent"]["chatId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(chat, "mcp-talk");
    // Nothing yet; then waiting, while alice writes.
    client.call("empty", "read_inbox", json!({})).await;
    let empty = client.result_of("empty").await;
    assert_eq!(empty["structuredContent"]["items"], json!([]));
    client
        .call(
            "wait",
            "wait_for_event",
            json!({"chatId": chat, "timeoutSeconds": 30}),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let posted = s
        .post(
            &format!("/api/chats/{chat}/messages"),
            Some(ALICE),
            common::msg("looks good, ship it"),
        )
        .await;
    assert!(posted.status < 300, "{}", posted.text);
    let got = client.result_of("wait").await;
    let items = got["structuredContent"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{got}");
    assert_eq!(items[0]["text"], "looks good, ship it");
    assert_eq!(items[0]["chatId"], chat.as_str());
    // Each item once: the inbox is empty again.
    client
        .call("again", "read_inbox", json!({"chatId": chat}))
        .await;
    assert_eq!(
        client.result_of("again").await["structuredContent"]["items"],
        json!([])
    );
    // A wait that times out returns nothing, saying so.
    client
        .call("short", "wait_for_event", json!({"timeoutSeconds": 1}))
        .await;
    let short = client.result_of("short").await;
    assert_eq!(short["structuredContent"]["items"], json!([]));
    assert!(
        short["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("nothing arrived")
    );
    client.close().await;
}

/// A client that goes away while its ask waits (its process killed): the question is withdrawn,
/// over streamable HTTP and over stdio, so nobody answers into the void.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_call_withdraws_its_question() {
    let (s, _db) = server().await;
    for (i, stdio) in [false, true].into_iter().enumerate() {
        let chat = format!("mcp-gone-{i}");
        let mut client = if stdio {
            McpClient::stdio(&s.base, AGENT).await.unwrap()
        } else {
            McpClient::http(&format!("{}/mcp", s.base), Some(AGENT))
                .await
                .unwrap()
        };
        client
            .call(
                "ask",
                "ask_person",
                json!({"to": format!("web:{chat}"), "text": "Still there?"}),
            )
            .await;
        open_call(&s, &chat, AGENT).await;
        client.kill().await;
        let deadline = tokio::time::Instant::now() + common::WAIT;
        loop {
            let p = s
                .get(&format!("/api/chats/{chat}/pending"), Some(AGENT))
                .await;
            if p.json["calls"].as_array().is_some_and(Vec::is_empty) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "stdio {stdio}: still pending after the client died: {}",
                p.text
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
