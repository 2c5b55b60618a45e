//! Who may do what, over HTTP: a route × principal matrix walked from the router's own table
//! (`frogbot::http::routes`), and a regression test for each way in which a caller took what was
//! not theirs (issue 37).

mod common;

use std::collections::HashMap;

use common::{AGENT, ALICE, BOB, NARROW_AGENT, Resp, Server};
use frogbot_core::policy::Access;
use reqwest::Method;
use serde_json::{Value, json};

/// The callers of the matrix, in its columns' order.
const CALLERS: [(&str, Option<&str>); 5] = [
    ("anonymous", None),
    ("another user", Some(BOB)),
    ("the owner", Some(ALICE)),
    ("an agent", Some(AGENT)),
    ("an agent not allowed the target", Some(NARROW_AGENT)),
];

/// One row: the request made for a route and the status each caller gets.
struct Row {
    path: String,
    body: Option<Value>,
    want: [u16; 5],
}

async fn call(
    s: &Server,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> Resp {
    if path.ends_with("/events") {
        // A live stream: its status and headers only (its body never ends).
        let mut req = s.client.get(format!("{}{path}", s.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let res = req.send().await.expect("request");
        let status = res.status().as_u16();
        if status == 200 {
            return Resp {
                status,
                chat: None,
                content_type: None,
                json: Value::Null,
                text: String::new(),
            };
        }
        let text = res.text().await.expect("body");
        return Resp {
            status,
            chat: None,
            content_type: None,
            json: serde_json::from_str(&text).unwrap_or(Value::Null),
            text,
        };
    }
    s.call(method, path, token, body.map(common::RawBody::Json))
        .await
}

/// What the matrix works on: alice's chat with a question waiting (an ask), and the `deploy`
/// agent's web chat opened for alice with a message holding an event button and one of
/// alice's messages in its inbox.
struct World {
    chat: String,
    ask: String,
    agent_chat: String,
    /// A file alice uploaded to her chat.
    file: String,
}

async fn world(s: &Server) -> World {
    let chat = "alice-chat".to_owned();
    let r = s.send(&chat, Some(ALICE), "hello").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = s
        .post(
            "/api/asks",
            Some(ALICE),
            json!({"to": {"web": chat}, "text": "Ship it?", "inputs": [{"kind": "confirm"}]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let ask = r.json["id"].as_str().unwrap().to_owned();
    let agent_chat = "deploy-for-alice".to_owned();
    let r = s
        .post(
            "/api/agent-chats",
            Some(AGENT),
            json!({"to": {"web": agent_chat, "user": "alice"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    for id in ["m1", "m-del"] {
        let r = s
            .post(
                &format!("/api/chats/{agent_chat}/agent-messages"),
                Some(AGENT),
                json!({"id": id, "text": "deploy?", "blocks": [
                    {"type": "code", "id": "b", "code": "x", "events": [{"label": "Go", "value": "go"}]}
                ]}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let r = s
        .post(
            &format!("/api/chats/{agent_chat}/messages"),
            Some(ALICE),
            json!({"id": "p1", "parts": [{"type": "text", "text": "yes"}]}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    let r = s
        .post(
            &format!("/api/chats/{chat}/files?name=a.json"),
            Some(ALICE),
            json!({"a": 1}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let file = r.json["id"].as_str().unwrap().to_owned();
    World {
        chat,
        ask,
        agent_chat,
        file,
    }
}

/// The matrix's row for a route, or `None` when the test has none (which fails the test).
fn row(w: &World, method: &Method, path: &str) -> Option<Row> {
    let (chat, ask, agent) = (&w.chat, &w.ask, &w.agent_chat);
    let r = |path: String, body: Option<Value>, want: [u16; 5]| Some(Row { path, body, want });
    match (method.as_str(), path) {
        ("GET", "/" | "/healthz" | "/readyz") => r(path.into(), None, [200; 5]),
        // Everyone lists; each sees only their own (asserted in `listing_shows_only_ones_own`).
        ("GET", "/api/chats") => r(path.into(), None, [200; 5]),
        ("GET", "/api/chats/{chat_id}") => r(
            format!("/api/chats/{chat}"),
            None,
            [403, 403, 200, 403, 403],
        ),
        ("POST", "/api/chats/{chat_id}/messages") => r(
            format!("/api/chats/{chat}/messages"),
            Some(json!({"parts": [{"type": "text", "text": "more"}]})),
            // The owner's message queues behind the waiting ask.
            [403, 403, 202, 403, 403],
        ),
        ("PATCH", "/api/chats/{chat_id}/messages/{message_id}") => r(
            format!("/api/chats/{chat}/messages/nope"),
            Some(json!({"parts": [{"type": "text", "text": "x"}]})),
            [403, 403, 404, 403, 403],
        ),
        ("DELETE", "/api/chats/{chat_id}/messages/{message_id}") => r(
            format!("/api/chats/{chat}/messages/nope"),
            None,
            [403, 403, 404, 403, 403],
        ),
        // Who may write the chat uploads to it; who may read it reads its files.
        ("POST", "/api/chats/{chat_id}/files") => r(
            format!("/api/chats/{chat}/files?name=b.json"),
            Some(json!({"b": 2})),
            [403, 403, 201, 403, 403],
        ),
        ("GET", "/api/chats/{chat_id}/files/{file_id}") => r(
            format!("/api/chats/{chat}/files/{}", w.file),
            None,
            [403, 403, 200, 403, 403],
        ),
        ("GET", "/api/chats/{chat_id}/pending") => r(
            format!("/api/chats/{chat}/pending"),
            None,
            [403, 403, 200, 403, 403],
        ),
        ("POST", "/api/chats/{chat_id}/settle") => r(
            format!("/api/chats/{chat}/settle"),
            Some(json!({"toolCallId": "nope", "dismissed": true})),
            [403, 403, 404, 403, 403],
        ),
        ("POST", "/api/chats/{chat_id}/stop") => r(
            format!("/api/chats/{chat}/stop"),
            None,
            [403, 403, 200, 403, 403],
        ),
        ("GET", "/api/chats/{chat_id}/events") => r(
            format!("/api/chats/{chat}/events"),
            None,
            [403, 403, 200, 403, 403],
        ),
        ("POST", "/api/asks") => r(
            path.into(),
            Some(json!({"to": {"web": chat}, "text": "again?", "inputs": [{"kind": "confirm"}]})),
            [403, 403, 201, 403, 403],
        ),
        ("GET", "/api/asks/{id}") => r(format!("/api/asks/{ask}"), None, [403, 403, 200, 403, 403]),
        ("GET", "/api/asks/{id}/wait") => r(
            format!("/api/asks/{ask}/wait?timeout=0"),
            None,
            [403, 403, 200, 403, 403],
        ),
        ("DELETE", "/api/asks/{id}") => {
            r(format!("/api/asks/{ask}"), None, [403, 403, 200, 403, 403])
        }
        // A Telegram person: only an agent allowed Telegram gets past the policy (and then hears
        // that this server runs no Telegram channel).
        ("POST", "/api/agent-chats") => r(
            path.into(),
            Some(json!({"to": {"channel": "telegram", "user": "777"}, "text": "hi"})),
            [401, 403, 403, 400, 403],
        ),
        ("POST", "/api/chats/{chat_id}/agent-messages") => r(
            format!("/api/chats/{agent}/agent-messages"),
            Some(json!({"text": "from the agent"})),
            [401, 403, 403, 201, 404],
        ),
        ("PATCH", "/api/chats/{chat_id}/agent-messages/{message_id}") => r(
            format!("/api/chats/{agent}/agent-messages/m1"),
            Some(json!({"text": "edited"})),
            [401, 403, 403, 200, 404],
        ),
        ("DELETE", "/api/chats/{chat_id}/agent-messages/{message_id}") => r(
            format!("/api/chats/{agent}/agent-messages/m-del"),
            None,
            [401, 403, 403, 204, 404],
        ),
        ("PUT", "/api/chats/{chat_id}/pins/{key}") => r(
            format!("/api/chats/{agent}/pins/status"),
            Some(json!({"messageId": "m1"})),
            [401, 403, 403, 200, 404],
        ),
        // The agent unpins; so does the person the chat is for (the web chat's unpin).
        ("DELETE", "/api/chats/{chat_id}/pins/{key}") => r(
            format!("/api/chats/{agent}/pins/status"),
            None,
            [403, 403, 204, 204, 404],
        ),
        ("POST", "/api/chats/{chat_id}/messages/{message_id}/ack") => r(
            format!("/api/chats/{agent}/messages/p1/ack"),
            Some(json!({"state": "done"})),
            [401, 403, 403, 204, 404],
        ),
        // The person the agent's chat is for clicks its event buttons; nobody else does.
        ("POST", "/api/chats/{chat_id}/block-events") => r(
            format!("/api/chats/{agent}/block-events"),
            Some(json!({"messageId": "m1", "blockId": "b", "value": "go"})),
            [403, 403, 202, 403, 403],
        ),
        ("GET", "/api/inbox") => r(path.into(), None, [401, 403, 403, 200, 200]),
        // An app's web view: public, its address the capability (a wrong one is a 404 for all).
        ("GET", "/apps/{chat_id}/{message_id}/{link}") => r(
            format!("/apps/{agent}/m1/{}", "0".repeat(32)),
            None,
            [404, 404, 404, 404, 404],
        ),
        // The MCP endpoint: agents only; past the policy, the transport's own answers (this
        // plain client accepts no event stream: 406; DELETE needs a session id: 400).
        ("POST", "/mcp") => r(
            path.into(),
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})),
            [401, 403, 403, 406, 406],
        ),
        ("GET", "/mcp") => r(path.into(), None, [401, 403, 403, 406, 406]),
        ("DELETE", "/mcp") => r(path.into(), None, [401, 403, 403, 400, 400]),
        _ => None,
    }
}

/// Every route of the router has a row, and each caller gets the row's status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_each_principal_as_the_policy_table_says() {
    let db = frogbot_testkit::sqlite_db();
    let s = common::start(&db).await;
    let w = world(&s).await;
    let (_, table) = frogbot::http::routes();
    assert_eq!(
        table.len(),
        31,
        "the routes of serve-contract.md, the agent APIs, files and app views"
    );
    let mut failures = Vec::new();
    for route in &table {
        let Some(row) = row(&w, &route.method, route.path) else {
            panic!(
                "{} {} has no row in the authorization matrix: add one (and its policy entry)",
                route.method, route.path
            );
        };
        // The owner (and the allowed agent) last, as what they do changes the world.
        for i in [0, 1, 4, 3, 2] {
            let (who, token) = CALLERS[i];
            let got = call(&s, route.method.clone(), &row.path, token, row.body.clone()).await;
            if got.status != row.want[i] {
                failures.push(format!(
                    "{} {} as {who}: {} (wanted {}): {}",
                    route.method, row.path, got.status, row.want[i], got.text
                ));
            }
            // Past the policy, the MCP transport answers as the MCP specification says.
            let policy_or_api = row.path.starts_with("/api") || matches!(got.status, 401 | 403);
            if got.status >= 400 && policy_or_api {
                assert!(
                    got.json["error"]["code"].is_string(),
                    "the contract's error shape: {}",
                    got.text
                );
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// With users configured and no `anonymous` key, anonymous callers get 401 on every route
/// but the public ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_callers_get_nothing_once_users_exist() {
    let db = frogbot_testkit::sqlite_db();
    let s = common::start_config(common::config_closed(&db.url, "")).await;
    let (_, table) = frogbot::http::routes();
    let mut seen: HashMap<Access, usize> = HashMap::new();
    for route in &table {
        *seen.entry(route.access).or_default() += 1;
        let path = route
            .path
            .replace("{chat_id}", "c1")
            .replace("{message_id}", "m1")
            .replace("{id}", "c1~ask-x")
            .replace("{key}", "status")
            .replace("{link}", &"0".repeat(32));
        let r = call(&s, route.method.clone(), &path, None, Some(json!({}))).await;
        match route.access {
            // An app's web view asks for no token: its address is the capability.
            Access::Public if path.starts_with("/apps/") => r.assert_error(404, "not-found"),
            Access::Public => assert_eq!(r.status, 200, "{} {path}: {}", route.method, r.text),
            _ => r.assert_error(401, "unauthorized"),
        }
    }
    assert_eq!(seen.get(&Access::Public), Some(&4));
    // The user still works.
    assert_eq!(s.send("mine", Some(ALICE), "hi").await.status, 200);
}

/// `GET /api/chats` lists only the caller's own chats: anonymous callers never see what a user
/// or an agent created (an agent's web chat was listed to everyone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_shows_only_ones_own() {
    let db = frogbot_testkit::sqlite_db();
    let s = common::start(&db).await;
    assert_eq!(s.send("shared", None, "hi").await.status, 200);
    assert_eq!(s.send("alices", Some(ALICE), "hi").await.status, 200);
    let r = s
        .post(
            "/api/agent-chats",
            Some(AGENT),
            json!({"to": {"web": "agents-own"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let ids = |r: Resp| -> Vec<String> {
        r.json["chats"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["chatId"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(s.get("/api/chats", None).await), ["shared"]);
    assert_eq!(ids(s.get("/api/chats", Some(ALICE)).await), ["alices"]);
    assert_eq!(ids(s.get("/api/chats", Some(AGENT)).await), ["agents-own"]);
    // Nor can anonymous callers read or write the agent's chat by its id.
    s.chat("agents-own", None)
        .await
        .assert_error(403, "forbidden");
    s.send("agents-own", None, "the db password is hunter2")
        .await
        .assert_error(403, "forbidden");
}

/// An agent never binds a chat it did not create: a person's (or anonymous callers') chat with
/// the model stays theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cannot_bind_someone_elses_chat() {
    let db = frogbot_testkit::sqlite_db();
    let s = common::start(&db).await;
    assert_eq!(s.send("model-chat", None, "hi").await.status, 200);
    assert_eq!(s.send("alices-chat", Some(ALICE), "hi").await.status, 200);
    for chat in ["model-chat", "alices-chat"] {
        let r = s
            .post(
                "/api/agent-chats",
                Some(AGENT),
                json!({"to": {"web": chat}}),
            )
            .await;
        r.assert_error(403, "forbidden");
        // Still answered by the model, not sent to the agent's inbox.
        let token = (chat == "alices-chat").then_some(ALICE);
        let r = s.send(chat, token, "still mine").await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(r.text.contains("You said: still mine"), "{}", r.text);
    }
    let inbox = s.get("/api/inbox", Some(AGENT)).await;
    assert_eq!(inbox.json["items"], json!([]), "{}", inbox.text);
    // A user cannot name a web chat "for" someone who is not a configured user.
    s.post(
        "/api/agent-chats",
        Some(AGENT),
        json!({"to": {"web": "for-ghost", "user": "ghost"}}),
    )
    .await
    .assert_error(400, "invalid-request");
    // An agent allowed only `slack:C0123` cannot open a web chat for alice.
    s.post(
        "/api/agent-chats",
        Some(NARROW_AGENT),
        json!({"to": {"web": "for-alice", "user": "alice"}}),
    )
    .await
    .assert_error(403, "forbidden");
}

/// Asks belong to their asker: keys are the caller's own, another caller's ask is neither read
/// nor awaited nor cancelled, asks go only into the caller's own web chats, and platform asks
/// need an agent allowed the target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_belong_to_their_asker() {
    let db = frogbot_testkit::sqlite_db();
    let s = common::start(&db).await;
    let ask = |token: Option<&'static str>, body: Value| {
        let s = &s;
        async move { s.post("/api/asks", token, body).await }
    };
    let confirm = |key: &str| json!({"text": "Deploy?", "inputs": [{"kind": "confirm"}], "idempotencyKey": key});
    // Bob squats alice's key first and answers his own ask.
    let bobs = ask(Some(BOB), confirm("nightly")).await;
    assert_eq!(bobs.status, 201, "{}", bobs.text);
    let alices = ask(Some(ALICE), confirm("nightly")).await;
    assert_eq!(alices.status, 201, "a fresh ask for alice: {}", alices.text);
    assert_ne!(alices.json["id"], bobs.json["id"]);
    let bob_chat = bobs.json["chatId"].as_str().unwrap();
    let pending = s.pending(bob_chat, Some(BOB)).await;
    let call = pending.json["calls"][0]["toolCallId"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = s
        .settle(
            bob_chat,
            Some(BOB),
            json!({"toolCallId": call, "output": {"answers": [{"header": "Answer", "selected": ["Confirm"]}]}}),
        )
        .await;
    assert!(r.status < 300, "{}", r.text);
    // Alice's ask is untouched and hers; the same key again is the same ask.
    let id = alices.json["id"].as_str().unwrap();
    let again = ask(Some(ALICE), confirm("nightly")).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.json["id"], id);
    let mine = s.get(&format!("/api/asks/{id}"), Some(ALICE)).await;
    assert_eq!(mine.json["state"], "open", "{}", mine.text);
    // Bob and anonymous callers can neither read, wait on nor cancel it.
    for token in [Some(BOB), None] {
        s.get(&format!("/api/asks/{id}"), token)
            .await
            .assert_error(403, "forbidden");
        s.get(&format!("/api/asks/{id}/wait?timeout=0"), token)
            .await
            .assert_error(403, "forbidden");
        s.delete(&format!("/api/asks/{id}"), token)
            .await
            .assert_error(403, "forbidden");
    }
    // `--to web:deploy` into a chat someone else created: refused, nothing posted there.
    assert_eq!(s.send("deploy", Some(ALICE), "my chat").await.status, 200);
    let before = s.chat("deploy", Some(ALICE)).await.json["messages"]
        .as_array()
        .unwrap()
        .len();
    for token in [Some(BOB), None] {
        let mut body = confirm("x");
        body["to"] = json!({"web": "deploy"});
        ask(token, body).await.assert_error(403, "forbidden");
    }
    let after = s.chat("deploy", Some(ALICE)).await.json["messages"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(before, after);
    // A platform target needs an agent allowed it: a person, an anonymous caller, an agent
    // allowed only Slack's C0123 are refused before anything is posted.
    let mut body = confirm("pw");
    body["to"] = json!({"channel": "telegram", "user": "780"});
    body["text"] = json!("type your password");
    ask(None, body.clone())
        .await
        .assert_error(401, "unauthorized");
    ask(Some(ALICE), body.clone())
        .await
        .assert_error(403, "forbidden");
    ask(Some(NARROW_AGENT), body.clone())
        .await
        .assert_error(403, "forbidden");
    // The allowed agent gets past the policy (this server runs no Telegram channel).
    ask(Some(AGENT), body)
        .await
        .assert_error(400, "invalid-request");
}

/// A waiting `GET /api/asks/{id}/wait` per caller is bounded; others still wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_waits_per_caller_are_bounded() {
    let db = frogbot_testkit::sqlite_db();
    let s = common::start(&db).await;
    let r = s
        .post(
            "/api/asks",
            Some(ALICE),
            json!({"text": "Deploy?", "inputs": [{"kind": "confirm"}]}),
        )
        .await;
    let id = r.json["id"].as_str().unwrap().to_owned();
    let url = format!("{}/api/asks/{id}/wait?timeout=30", s.base);
    // 70 waits of one caller: 64 are held, 6 are refused at once.
    let waits: Vec<_> = (0..70)
        .map(|_| {
            let req = s.client.get(&url).bearer_auth(ALICE);
            tokio::spawn(async move { req.send().await.unwrap().status().as_u16() })
        })
        .collect();
    frogbot_testkit::eventually("six waits refused", common::WAIT, async || {
        waits.iter().filter(|h| h.is_finished()).count() >= 6
    })
    .await;
    // Another caller still waits (bob may not read alice's ask: 403, not 429).
    s.get(&format!("/api/asks/{id}/wait?timeout=0"), Some(BOB))
        .await
        .assert_error(403, "forbidden");
    // Cancelling the ask ends every held wait with its status.
    let r = s.delete(&format!("/api/asks/{id}"), Some(ALICE)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let mut statuses = Vec::new();
    for h in waits {
        statuses.push(h.await.unwrap());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        6,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        64,
        "{statuses:?}"
    );
    let done = s
        .get(&format!("/api/asks/{id}/wait?timeout=0"), Some(ALICE))
        .await;
    assert_eq!(done.json["state"], "cancelled", "{}", done.text);
}

/// Only the driver stops a turn: a user cannot stop an anonymous caller's turn in a shared chat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_driver_stops_a_turn() {
    let db = frogbot_testkit::sqlite_db();
    let s = common::start(&db).await;
    let running = common::start_running(&s, "shared-slow", None, "slow 30").await;
    s.post("/api/chats/shared-slow/stop", Some(ALICE), json!({}))
        .await
        .assert_error(403, "forbidden");
    let r = s.post("/api/chats/shared-slow/stop", None, json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["stopping"], true);
    let done = running.await.unwrap();
    assert_eq!(done["state"], "idle", "{done}");
}
