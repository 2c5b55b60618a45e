//! What a `tools/call` result becomes for the model.
//!
//! The shape (read from the result's wire JSON, so it follows the MCP schema, not one SDK's types):
//!
//! - a result that is exactly one text block and no `structuredContent` → that text, a JSON string;
//! - anything else → `{"content": [part, …]}`, plus `"structuredContent": …` when the server sent
//!   it. Parts, with annotations and `_meta` dropped:
//!   - `{"type": "text", "text": …}`
//!   - `{"type": "image" | "audio", "mimeType": …, "data": <base64>}`
//!   - `{"type": "resource_link", "uri": …, "name": …, "mimeType"?: …, "description"?: …}`
//!   - `{"type": "resource", "uri": …, "mimeType"?: …, "text": …}` (an embedded text resource) or
//!     `… "blob": <base64>}` (an embedded binary one)
//!   - any other block as the server sent it;
//! - `isError: true` → an error whose message is the result's text blocks joined by newlines (the
//!   whole content as JSON when it has no text).

use serde_json::{Map, Value, json};

/// Turns a `tools/call` result (its wire JSON) into the tool's output, or the error text of a
/// result marked `isError`.
pub fn model_output(result: &Value) -> Result<Value, String> {
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let structured = result.get("structuredContent");
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let text = texts(blocks).collect::<Vec<_>>().join("\n");
        return Err(if text.is_empty() {
            format!("the tool failed: {}", Value::Array(blocks.to_vec()))
        } else {
            text
        });
    }
    if structured.is_none()
        && let [block] = blocks
        && let Some(text) = text_of(block)
    {
        return Ok(Value::String(text.to_owned()));
    }
    let mut out = Map::new();
    out.insert(
        "content".into(),
        Value::Array(blocks.iter().map(part).collect()),
    );
    if let Some(structured) = structured {
        out.insert("structuredContent".into(), structured.clone());
    }
    Ok(Value::Object(out))
}

fn text_of(block: &Value) -> Option<&str> {
    (block.get("type")?.as_str()? == "text")
        .then(|| block.get("text")?.as_str())
        .flatten()
}

fn texts(blocks: &[Value]) -> impl Iterator<Item = &str> {
    blocks.iter().filter_map(text_of)
}

/// Copies `keys` of `from` that are present into a new part of type `kind`.
fn pick(kind: &str, from: &Value, keys: &[&str]) -> Value {
    let mut part = Map::new();
    part.insert("type".into(), json!(kind));
    for key in keys {
        if let Some(value) = from.get(*key) {
            part.insert((*key).into(), value.clone());
        }
    }
    Value::Object(part)
}

fn part(block: &Value) -> Value {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => pick("text", block, &["text"]),
        Some(kind @ ("image" | "audio")) => pick(kind, block, &["mimeType", "data"]),
        Some("resource_link") => pick(
            "resource_link",
            block,
            &["uri", "name", "mimeType", "description"],
        ),
        Some("resource") => pick(
            "resource",
            block.get("resource").unwrap_or(&Value::Null),
            &["uri", "mimeType", "text", "blob"],
        ),
        _ => {
            let mut block = block.clone();
            if let Some(map) = block.as_object_mut() {
                map.remove("annotations");
                map.remove("_meta");
            }
            block
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_text_is_a_string() {
        let r = json!({"content": [{"type": "text", "text": "Echo: hi", "annotations": {"priority": 1}}]});
        assert_eq!(model_output(&r), Ok(json!("Echo: hi")));
    }

    #[test]
    fn mixed_content_and_structured() {
        let r = json!({
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image", "data": "AAA=", "mimeType": "image/png", "_meta": {"x": 1}},
                {"type": "audio", "data": "BBB=", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "test://r/1", "name": "r1", "mimeType": "text/plain"},
                {"type": "resource", "resource": {"uri": "test://r/2", "mimeType": "text/plain", "text": "two"}},
                {"type": "resource", "resource": {"uri": "test://r/3", "blob": "CCC="}}
            ],
            "structuredContent": {"temperature": 21.5}
        });
        assert_eq!(
            model_output(&r),
            Ok(json!({
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "image", "mimeType": "image/png", "data": "AAA="},
                    {"type": "audio", "mimeType": "audio/wav", "data": "BBB="},
                    {"type": "resource_link", "uri": "test://r/1", "name": "r1", "mimeType": "text/plain"},
                    {"type": "resource", "uri": "test://r/2", "mimeType": "text/plain", "text": "two"},
                    {"type": "resource", "uri": "test://r/3", "blob": "CCC="}
                ],
                "structuredContent": {"temperature": 21.5}
            }))
        );
    }

    #[test]
    fn one_text_with_structured_keeps_both() {
        let r = json!({"content": [{"type": "text", "text": "{\"n\":1}"}], "structuredContent": {"n": 1}});
        assert_eq!(
            model_output(&r),
            Ok(
                json!({"content": [{"type": "text", "text": "{\"n\":1}"}], "structuredContent": {"n": 1}})
            )
        );
    }

    #[test]
    fn empty_result() {
        assert_eq!(model_output(&json!({})), Ok(json!({"content": []})));
    }

    #[test]
    fn errors_carry_their_text() {
        let r = json!({"isError": true, "content": [{"type": "text", "text": "no such file"}, {"type": "text", "text": "try again"}]});
        assert_eq!(model_output(&r), Err("no such file\ntry again".into()));
        let r = json!({"isError": true, "content": []});
        assert_eq!(model_output(&r), Err("the tool failed: []".into()));
    }
}
