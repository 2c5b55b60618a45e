//! Elicitation: server-everything's `trigger-elicitation-request` (registered only for a client
//! that declares the elicitation capability) sends `elicitation/create` with a schema of every
//! property kind; the call suspends with the question ([`ToolStep::Ask`]) and continues with
//! what became of it ([`Tool::resume`]). The server echoes the result it got (`Raw result: …`),
//! so each test asserts what reached it.

mod common;

use common::*;
use frogbot_core::agent::{Tool, ToolAnswer, ToolStep};
use frogbot_core::model::{InputKind, QuestionAnswer, QuestionInput, QuestionOutput};
use frogbot_mcp::elicit::Form;
use frogbot_mcp::{McpHub, ServerConfig};
use rmcp::model::ElicitationSchema;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const TOOL: &str = "everything__trigger-elicitation-request";

/// The `requestedSchema` of server-everything 2026.8.31's `trigger-elicitation-request`
/// (dist/tools/trigger-elicitation-request.js), as it sends it.
/// Parsed from text, so the properties keep the order the server sends them in.
fn everything_schema() -> ElicitationSchema {
    serde_json::from_str(
        r#"{
        "type": "object",
        "properties": {
            "name": {"title": "String", "type": "string", "description": "Your full, legal name"},
            "check": {"title": "Boolean", "type": "boolean", "description": "Agree to the terms and conditions"},
            "firstLine": {"title": "String with default", "type": "string", "description": "Favorite first line of a story", "default": "It was a dark and stormy night."},
            "email": {"title": "String with email format", "type": "string", "format": "email", "description": "Your email address (will be verified, and never shared with anyone else)"},
            "homepage": {"type": "string", "format": "uri", "title": "String with uri format", "description": "Portfolio / personal website"},
            "birthdate": {"title": "String with date format", "type": "string", "format": "date", "description": "Your date of birth"},
            "integer": {"title": "Integer", "type": "integer", "description": "Your favorite integer (do not give us your phone number, pin, or other sensitive info)", "minimum": 1, "maximum": 100, "default": 42},
            "number": {"title": "Number in range 1-1000", "type": "number", "description": "Favorite number (there are no wrong answers)", "minimum": 0, "maximum": 1000, "default": 3.14},
            "untitledSingleSelectEnum": {"type": "string", "title": "Untitled Single Select Enum", "description": "Choose your favorite friend", "enum": ["Monica", "Rachel", "Joey", "Chandler", "Ross", "Phoebe"], "default": "Monica"},
            "untitledMultipleSelectEnum": {"type": "array", "title": "Untitled Multiple Select Enum", "description": "Choose your favorite instruments", "minItems": 1, "maxItems": 3, "items": {"type": "string", "enum": ["Guitar", "Piano", "Violin", "Drums", "Bass"]}, "default": ["Guitar"]},
            "titledSingleSelectEnum": {"type": "string", "title": "Titled Single Select Enum", "description": "Choose your favorite hero", "oneOf": [{"const": "hero-1", "title": "Superman"}, {"const": "hero-2", "title": "Green Lantern"}, {"const": "hero-3", "title": "Wonder Woman"}], "default": "hero-1"},
            "titledMultipleSelectEnum": {"type": "array", "title": "Titled Multiple Select Enum", "description": "Choose your favorite types of fish", "minItems": 1, "maxItems": 3, "items": {"anyOf": [{"const": "fish-1", "title": "Tuna"}, {"const": "fish-2", "title": "Salmon"}, {"const": "fish-3", "title": "Trout"}]}, "default": ["fish-1"]},
            "legacyTitledEnum": {"type": "string", "title": "Legacy Titled Single Select Enum", "description": "Choose your favorite type of pet", "enum": ["pet-1", "pet-2", "pet-3", "pet-4", "pet-5"], "enumNames": ["Cats", "Dogs", "Birds", "Fish", "Reptiles"], "default": "pet-1"}
        },
        "required": ["name"]
    }"#,
    )
    .unwrap()
}

const MESSAGE: &str = "Please provide inputs for the following fields:";

/// The answers a person gives to server-everything's form, by header (every input answered).
fn everything_answers(question: &QuestionInput) -> QuestionOutput {
    let pick = |header: &str| -> Vec<String> {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect();
        match header {
            "String" => s(&["Ada Lovelace"]),
            "Boolean" => s(&["on"]),
            "String with default" => s(&["Call me Ishmael."]),
            "String with email format" => s(&["ada@example.com"]),
            "String with uri format" => s(&["https://ada.example"]),
            "String with date format" => s(&["1815-12-10"]),
            "Integer" => s(&["7"]),
            "Number in range 1-1000" => s(&["2.5"]),
            "Untitled Single Select Enum" => s(&["Joey"]),
            "Untitled Multiple Select Enum" => s(&["Piano", "Drums"]),
            "Titled Single Select Enum" => s(&["Wonder Woman"]),
            "Titled Multiple Select Enum" => s(&["Tuna", "Trout"]),
            "Legacy Titled Single Select Enum" => s(&["Birds"]),
            other => panic!("unexpected input {other:?}"),
        }
    };
    QuestionOutput {
        answers: question
            .questions
            .iter()
            .map(|q| QuestionAnswer {
                header: q.header.clone(),
                selected: pick(&q.header),
            })
            .collect(),
    }
}

/// The typed content those answers make.
fn everything_content() -> Value {
    json!({
        "name": "Ada Lovelace",
        "check": true,
        "firstLine": "Call me Ishmael.",
        "email": "ada@example.com",
        "homepage": "https://ada.example",
        "birthdate": "1815-12-10",
        "integer": 7,
        "number": 2.5,
        "untitledSingleSelectEnum": "Joey",
        "untitledMultipleSelectEnum": ["Piano", "Drums"],
        "titledSingleSelectEnum": "hero-3",
        "titledMultipleSelectEnum": ["fish-1", "fish-3"],
        "legacyTitledEnum": "pet-3"
    })
}

/// Checks the question drawn for server-everything's schema: one form, every property kind
/// mapped, in the server's order, with defaults.
fn assert_everything_question(q: &QuestionInput) {
    let kinds: Vec<(&str, InputKind, bool)> = q
        .questions
        .iter()
        .map(|i| (i.header.as_str(), i.kind, i.multiple))
        .collect();
    assert_eq!(
        kinds,
        [
            ("String", InputKind::TextInput, false),
            ("Boolean", InputKind::Toggle, false),
            ("String with default", InputKind::TextInput, false),
            ("String with email format", InputKind::TextInput, false),
            ("String with uri format", InputKind::TextInput, false),
            ("String with date format", InputKind::TextInput, false),
            ("Integer", InputKind::NumberInput, false),
            ("Number in range 1-1000", InputKind::NumberInput, false),
            ("Untitled Single Select Enum", InputKind::Choice, false),
            ("Untitled Multiple Select Enum", InputKind::Choice, true),
            ("Titled Single Select Enum", InputKind::Choice, false),
            ("Titled Multiple Select Enum", InputKind::Choice, true),
            ("Legacy Titled Single Select Enum", InputKind::Choice, false),
        ]
    );
    let item = |h: &str| q.questions.iter().find(|i| i.header == h).unwrap();
    let first = &q.questions[0];
    assert_eq!(
        first.question,
        format!("{MESSAGE}\n\nYour full, legal name")
    );
    assert!(first.required, "`name` is required");
    assert!(q.questions[1..].iter().all(|i| !i.required));
    assert_eq!(
        item("String with default").default.as_deref(),
        Some(&["It was a dark and stormy night.".to_string()][..])
    );
    assert_eq!(
        item("String with email format").placeholder.as_deref(),
        Some("name@example.com")
    );
    assert_eq!(
        item("String with uri format").placeholder.as_deref(),
        Some("https://…")
    );
    assert_eq!(
        item("String with date format").placeholder.as_deref(),
        Some("YYYY-MM-DD")
    );
    let int = item("Integer");
    assert_eq!(
        (
            int.min.clone(),
            int.max.clone(),
            int.step.clone(),
            int.default.clone()
        ),
        (
            Some(1.into()),
            Some(100.into()),
            Some(1.into()),
            Some(vec!["42".to_string()])
        )
    );
    let num = item("Number in range 1-1000");
    assert_eq!(num.min.as_ref().and_then(|n| n.as_f64()), Some(0.0));
    assert_eq!(num.max.as_ref().and_then(|n| n.as_f64()), Some(1000.0));
    assert_eq!(num.step, None);
    assert_eq!(num.default.as_deref(), Some(&["3.14".to_string()][..]));
    assert_eq!(item("Boolean").label.as_deref(), Some("Boolean"));
    let labels =
        |h: &str| -> Vec<String> { item(h).options.iter().map(|o| o.label.clone()).collect() };
    assert_eq!(
        labels("Titled Single Select Enum"),
        ["Superman", "Green Lantern", "Wonder Woman"]
    );
    assert_eq!(
        labels("Legacy Titled Single Select Enum"),
        ["Cats", "Dogs", "Birds", "Fish", "Reptiles"]
    );
    assert_eq!(
        item("Titled Multiple Select Enum").default.as_deref(),
        Some(&["Tuna".to_string()][..])
    );
    assert_eq!(
        item("Untitled Single Select Enum").default.as_deref(),
        Some(&["Monica".to_string()][..])
    );
    assert!(q.from.is_empty(), "the engine names who may answer");
}

#[test]
fn every_property_kind_of_server_everything_maps_to_an_input() {
    let schema = everything_schema();
    let form = Form::new(MESSAGE, &schema, Some(120)).unwrap();
    assert_everything_question(form.question());
    assert_eq!(form.question().expires_in_seconds, Some(120));
    let answers = everything_answers(form.question());
    assert_eq!(form.content(&answers).unwrap(), everything_content());
    // Optional inputs left empty are left out; the required one is there.
    let only_name = QuestionOutput {
        answers: form
            .question()
            .questions
            .iter()
            .map(|q| QuestionAnswer {
                header: q.header.clone(),
                selected: if q.header == "String" {
                    vec!["Ada".into()]
                } else {
                    vec![]
                },
            })
            .collect(),
    };
    assert_eq!(form.content(&only_name).unwrap(), json!({"name": "Ada"}));
    // An answer that does not fit (a number out of range) is refused.
    let mut bad = answers.clone();
    bad.answers[6].selected = vec!["101".into()];
    assert!(form.content(&bad).is_err());
}

#[test]
fn integers_stay_integers_and_numbers_numbers() {
    let schema: ElicitationSchema = serde_json::from_str(
        r#"{
            "type": "object",
            "properties": {
                "count": {"type": "integer"},
                "ratio": {"type": "number"},
                "ok": {"type": "boolean", "default": false}
            },
            "required": ["count", "ratio", "ok"]
        }"#,
    )
    .unwrap();
    let form = Form::new("How many?", &schema, None).unwrap();
    let q = form.question();
    assert_eq!(
        q.questions[0].header, "count",
        "the key when there is no title"
    );
    assert_eq!(
        q.questions[2].default.as_deref(),
        Some(&["off".to_string()][..])
    );
    let out = QuestionOutput {
        answers: ["count", "ratio", "ok"]
            .iter()
            .zip([["12"], ["3"], ["off"]])
            .map(|(h, s)| QuestionAnswer {
                header: h.to_string(),
                selected: s.iter().map(|x| x.to_string()).collect(),
            })
            .collect(),
    };
    let content = form.content(&out).unwrap();
    assert_eq!(content, json!({"count": 12, "ratio": 3.0, "ok": false}));
    assert!(content["count"].is_i64());
    assert!(content["ratio"].is_f64());
}

#[test]
fn a_schema_frogbot_cannot_draw_is_refused_with_a_reason() {
    // Nested objects do not even parse as an elicitation schema (rmcp refuses the request).
    assert!(
        serde_json::from_value::<ElicitationSchema>(json!({
            "type": "object",
            "properties": {"address": {"type": "object", "properties": {"street": {"type": "string"}}}}
        }))
        .is_err()
    );
    // An enum without options cannot be drawn.
    let schema: ElicitationSchema = serde_json::from_value(json!({
        "type": "object",
        "properties": {"pick": {"type": "string", "enum": []}}
    }))
    .unwrap();
    let e = Form::new("m", &schema, None).unwrap_err();
    assert!(e.contains("pick"), "{e}");
}

fn stdio(node: &str, entry: &str) -> ServerConfig {
    ServerConfig {
        elicitation_expires_seconds: Some(300),
        ..ServerConfig::stdio("everything", node, &[entry, "stdio"])
    }
}

/// Calls the tool; it must ask the everything form.
async fn ask(tool: &Arc<dyn Tool>, call: &str) -> QuestionInput {
    match tool.call_or_ask(json!({}), ctx(call)).await.unwrap() {
        ToolStep::Ask(q) => q,
        other => panic!("expected a question, got {other:?}"),
    }
}

/// The `Raw result` the server echoes.
fn raw_result(output: &Value) -> Value {
    let texts: Vec<&str> = match output {
        Value::String(s) => vec![s.as_str()],
        other => other["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect(),
    };
    let raw = texts
        .iter()
        .find_map(|t| t.trim_start().strip_prefix("Raw result: "))
        .unwrap_or_else(|| panic!("no raw result in {output}"));
    serde_json::from_str(raw).unwrap()
}

fn done(step: ToolStep) -> Value {
    match step {
        ToolStep::Done(v) => v,
        other => panic!("expected the result, got {other:?}"),
    }
}

async fn answered_declined_cancelled(hub: &McpHub) {
    hub.wait_ready(WAIT).await.unwrap();
    assert!(
        names(hub).contains(&TOOL.to_owned()),
        "the elicitation tool is registered for a client with the capability"
    );
    let t = tool(hub, TOOL);

    // Answered: `accept` with the typed content.
    let q = ask(&t, "e1").await;
    assert_everything_question(&q);
    assert_eq!(q.expires_in_seconds, Some(300));
    let out = done(
        t.resume(ToolAnswer::Answered(everything_answers(&q)), ctx("e1"))
            .await
            .unwrap(),
    );
    assert_eq!(
        raw_result(&out),
        json!({"action": "accept", "content": everything_content()})
    );

    // Declined.
    ask(&t, "e2").await;
    let out = done(
        t.resume(ToolAnswer::Declined { reason: None }, ctx("e2"))
            .await
            .unwrap(),
    );
    assert_eq!(raw_result(&out), json!({"action": "decline"}));

    // Cancelled (expired, withdrawn).
    ask(&t, "e3").await;
    let out = done(
        t.resume(
            ToolAnswer::Cancelled {
                reason: "nobody answered in time".into(),
            },
            ctx("e3"),
        )
        .await
        .unwrap(),
    );
    assert_eq!(raw_result(&out), json!({"action": "cancel"}));

    // Declined by FrogBot (nobody may answer): the model is told why.
    ask(&t, "e4").await;
    let out = done(
        t.resume(
            ToolAnswer::Declined {
                reason: Some("an agent drives this turn".into()),
            },
            ctx("e4"),
        )
        .await
        .unwrap(),
    );
    assert_eq!(raw_result(&out), json!({"action": "decline"}));
    assert!(
        out.to_string().contains("an agent drives this turn"),
        "{out}"
    );

    // A plain call cannot ask: the request is declined, never hung.
    let out = t.call(json!({}), ctx("e5")).await.unwrap();
    assert_eq!(raw_result(&out), json!({"action": "decline"}));
    assert!(out.to_string().contains("nobody can be asked"), "{out}");

    // A call this process does not hold cannot continue.
    let gone = t
        .resume(ToolAnswer::Declined { reason: None }, ctx("nope"))
        .await
        .unwrap_err()
        .to_string();
    assert!(gone.contains("no longer running here"), "{gone}");

    // The other tools still work.
    assert_eq!(
        tool(hub, "everything__echo")
            .call(json!({"message": "hi"}), ctx("e6"))
            .await
            .unwrap(),
        json!("Echo: hi")
    );
}

#[tokio::test]
async fn stdio_elicitation_is_asked_answered_declined_and_cancelled() {
    init_tracing();
    let Some((node, entry)) = everything() else {
        return;
    };
    let hub = McpHub::start(vec![stdio(&node, &entry)], CancellationToken::new());
    answered_declined_cancelled(&hub).await;
    hub.shutdown().await;
}

#[tokio::test]
async fn http_elicitation_is_asked_answered_declined_and_cancelled() {
    init_tracing();
    let Some((node, entry)) = everything() else {
        return;
    };
    let port = free_port();
    let mut server = tokio::process::Command::new(&node)
        .args([entry.as_str(), "streamableHttp"])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_listening(port).await;
    let config = ServerConfig {
        elicitation_expires_seconds: Some(300),
        ..ServerConfig::http("everything", &format!("http://127.0.0.1:{port}/mcp"))
    };
    let hub = McpHub::start(vec![config], CancellationToken::new());
    answered_declined_cancelled(&hub).await;
    hub.shutdown().await;
    server.kill().await.unwrap();
}

/// The call's timeout does not run while the person answers: it counts again after the answer.
#[tokio::test]
async fn the_timeout_pauses_while_a_person_answers() {
    init_tracing();
    let Some((node, entry)) = everything() else {
        return;
    };
    let config = ServerConfig {
        timeout_seconds: 1,
        ..stdio(&node, &entry)
    };
    let hub = McpHub::start(vec![config], CancellationToken::new());
    hub.wait_ready(WAIT).await.unwrap();
    let t = tool(&hub, TOOL);
    let q = ask(&t, "p1").await;
    // Longer than the timeout, on the server's clock (it waits up to 10 minutes).
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let out = done(
        t.resume(ToolAnswer::Answered(everything_answers(&q)), ctx("p1"))
            .await
            .unwrap(),
    );
    assert_eq!(raw_result(&out)["action"], "accept");
    hub.shutdown().await;
}

/// While two calls of the server run, a request for input cannot be told to one of them: it is
/// declined at once (never hung), and both calls finish.
#[tokio::test]
async fn a_request_while_several_calls_run_is_declined() {
    init_tracing();
    let Some((node, entry)) = everything() else {
        return;
    };
    let hub = McpHub::start(vec![stdio(&node, &entry)], CancellationToken::new());
    hub.wait_ready(WAIT).await.unwrap();
    let long = tool(&hub, "everything__trigger-long-running-operation");
    let running = tokio::spawn(async move {
        long.call(json!({"duration": 2, "steps": 1}), ctx("l1"))
            .await
    });
    // On this test's one thread the long call's task is polled (and its call registered) as soon
    // as the elicitation call waits: long before the server's request for input comes back.
    let t = tool(&hub, TOOL);
    let out = done(t.call_or_ask(json!({}), ctx("s1")).await.unwrap());
    assert_eq!(raw_result(&out), json!({"action": "decline"}));
    running.await.unwrap().unwrap();
    hub.shutdown().await;
}
