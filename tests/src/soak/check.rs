//! The check of one stored chat (as `GET /api/chats/{id}` returns it) against what the API
//! accepted: losses and duplicates, each naming its chat and message or call.

use std::collections::HashMap;

use serde_json::Value;

use crate::ledger::{Answer, ChatRec, SettleResult};

/// What kind of finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Something accepted is not there.
    Loss,
    /// Something is there twice, or two outcomes of one question.
    Duplicate,
}

/// One loss or duplicate.
#[derive(Debug, Clone)]
pub(crate) struct Finding {
    /// Loss or duplicate.
    pub(crate) kind: Kind,
    /// The chat.
    pub(crate) chat: String,
    /// `message ID` or `call ID`.
    pub(crate) item: String,
    /// What is wrong.
    pub(crate) what: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            Kind::Loss => "LOSS",
            Kind::Duplicate => "DUPLICATE",
        };
        write!(f, "{kind}: chat {} {}: {}", self.chat, self.item, self.what)
    }
}

/// Figures of a checked chat.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Facts {
    /// Stored user messages.
    pub(crate) user: usize,
    /// Stored replies.
    pub(crate) replies: usize,
    /// Replies marked `interrupted` (their turn's process was killed).
    pub(crate) interrupted: usize,
    /// Replies with another error.
    pub(crate) failed: usize,
    /// User messages that joined another's turn (steers).
    pub(crate) joined: usize,
}

fn messages(chat: &Value) -> &[Value] {
    chat["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The user messages of a chat that have no reply: those after its last reply, and any still
/// queued.
pub(crate) fn unreplied(chat: &Value) -> Vec<String> {
    let ms = messages(chat);
    let last_reply = ms.iter().rposition(|m| m["role"] == "assistant");
    ms.iter()
        .enumerate()
        .filter(|(i, m)| {
            m["role"] == "user"
                && (last_reply.is_none_or(|r| *i > r) || m["metadata"]["status"] == "queued")
        })
        .map(|(_, m)| m["id"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// The text of a message's text parts.
fn text_of(m: &Value) -> String {
    m["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect()
}

/// Checks a chat at rest (`chat`: its `GET` body; `None` when it was not found) against `rec`.
pub(crate) fn check_chat(id: &str, rec: &ChatRec, chat: Option<&Value>) -> (Vec<Finding>, Facts) {
    let mut out = Vec::new();
    let mut facts = Facts::default();
    let finding = |kind, item: String, what: String| Finding {
        kind,
        chat: id.to_string(),
        item,
        what,
    };
    let empty = Value::Null;
    let chat = chat.unwrap_or(&empty);
    let ms = messages(chat);

    // User messages: each accepted one stored exactly once (by id, and by the id its text
    // carries), none stored twice, every one replied to.
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    let mut by_text: HashMap<String, usize> = HashMap::new();
    for m in ms.iter().filter(|m| m["role"] == "user") {
        facts.user += 1;
        *by_id.entry(m["id"].as_str().unwrap_or("?")).or_default() += 1;
        if let Some(token) = text_of(m)
            .split_whitespace()
            .find(|w| w.starts_with("msg="))
            .map(|w| w.trim_start_matches("msg=").to_string())
        {
            *by_text.entry(token).or_default() += 1;
        }
    }
    for sent in &rec.messages {
        let stored = by_id.get(sent.id.as_str()).copied().unwrap_or(0);
        let texts = by_text.get(&sent.id).copied().unwrap_or(0);
        if let Some(how) = &sent.accepted
            && stored == 0
        {
            out.push(finding(
                Kind::Loss,
                format!("message {}", sent.id),
                format!(
                    "accepted ({how}, {} request(s)) but not stored{}",
                    sent.attempts,
                    if chat.is_null() {
                        " (the chat is not found)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        if stored > 1 || texts > 1 {
            out.push(finding(
                Kind::Duplicate,
                format!("message {}", sent.id),
                format!(
                    "stored {} times under its id, {texts} messages carry its text",
                    stored.max(1)
                ),
            ));
        }
    }
    for id in unreplied(chat) {
        let how = rec
            .messages
            .iter()
            .find(|m| m.id == id)
            .and_then(|m| m.accepted.clone())
            .unwrap_or_else(|| "not acknowledged to the client".into());
        out.push(finding(
            Kind::Loss,
            format!("message {id}"),
            format!(
                "stored but without a reply at rest (chat state {}; {how})",
                chat["state"]
            ),
        ));
    }
    // A message that started a turn (200) opens its turn: user messages right before it, with
    // no reply between, had a turn whose reply is missing.
    let mut run: Vec<&str> = Vec::new();
    let mut previous_reply: Option<&str> = None;
    for m in ms {
        if m["role"] == "assistant" {
            // One reply per turn: two in a row answered one turn twice.
            let rid = m["id"].as_str().unwrap_or("?");
            if run.is_empty()
                && let Some(prev) = previous_reply
            {
                out.push(finding(
                    Kind::Duplicate,
                    format!("reply {rid}"),
                    format!(
                        "follows reply {prev} with no user message between (a turn answered twice)"
                    ),
                ));
            }
            previous_reply = Some(rid);
            facts.replies += 1;
            match m["metadata"]["error"]["code"].as_str() {
                Some("interrupted") => facts.interrupted += 1,
                Some(_) => facts.failed += 1,
                None => {}
            }
            facts.joined += run.len().saturating_sub(1);
            run.clear();
            continue;
        }
        previous_reply = None;
        let mid = m["id"].as_str().unwrap_or("?");
        let opened = rec.messages.iter().any(|s| s.id == mid && s.started_turn);
        if opened {
            for before in run.drain(..) {
                out.push(finding(
                    Kind::Loss,
                    format!("message {before}"),
                    format!("its turn has no reply: {mid} started the next turn right after it"),
                ));
            }
        }
        run.push(mid);
    }

    // Questions: at most one accepted outcome each, and it is the recorded one.
    let mut parts: HashMap<&str, Vec<&Value>> = HashMap::new();
    for m in ms.iter().filter(|m| m["role"] == "assistant") {
        for p in m["parts"].as_array().into_iter().flatten() {
            if let Some(call) = p["toolCallId"].as_str()
                && p["type"] == "tool-question"
            {
                parts.entry(call).or_default().push(p);
            }
        }
    }
    let mut calls: Vec<&str> = rec.settles.iter().map(|s| s.call.as_str()).collect();
    calls.sort_unstable();
    calls.dedup();
    for call in calls {
        let accepted: Vec<_> = rec
            .settles
            .iter()
            .filter(|s| s.call == call && s.result == SettleResult::Accepted)
            .collect();
        let item = format!("call {call}");
        if let Some(first) = accepted.first()
            && let Some(other) = accepted.iter().find(|s| s.answer != first.answer)
        {
            out.push(finding(
                Kind::Duplicate,
                item.clone(),
                format!(
                    "two settles accepted: {} ({}) and {} ({})",
                    first.answer, first.via, other.answer, other.via
                ),
            ));
        }
        let stored = parts.get(call).map(Vec::as_slice).unwrap_or(&[]);
        if stored.len() > 1 {
            out.push(finding(
                Kind::Duplicate,
                item.clone(),
                format!("the call is stored {} times", stored.len()),
            ));
        }
        let Some(first) = accepted.first() else {
            continue;
        };
        let Some(part) = stored.first() else {
            out.push(finding(
                Kind::Loss,
                item.clone(),
                format!(
                    "{} accepted ({}) but the call is not stored",
                    first.answer, first.via
                ),
            ));
            continue;
        };
        let recorded = recorded_outcome(part);
        match recorded {
            None => out.push(finding(
                Kind::Loss,
                item,
                format!(
                    "{} accepted ({}) but the call still waits (state {})",
                    first.answer, first.via, part["state"]
                ),
            )),
            Some(r) if r != Recorded::Outcome(first.answer.clone()) => {
                // Another outcome is recorded: was it one that another settle sent?
                let sent_by_other = rec
                    .settles
                    .iter()
                    .any(|s| s.call == call && Recorded::Outcome(s.answer.clone()) == r);
                out.push(finding(
                    if sent_by_other {
                        Kind::Duplicate
                    } else {
                        Kind::Loss
                    },
                    item,
                    format!(
                        "{} accepted ({}) but {r:?} is recorded",
                        first.answer, first.via
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    (out, facts)
}

/// A question part's recorded outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Recorded {
    /// Answered or dismissed.
    Outcome(Answer),
    /// Expired, withdrawn, or an answer that is not one option.
    Other(String),
}

fn recorded_outcome(part: &Value) -> Option<Recorded> {
    match part["state"].as_str() {
        Some("output-available") => {
            let selected = &part["output"]["answers"][0]["selected"];
            Some(match selected.as_array().map(Vec::as_slice) {
                Some([one]) if one.is_string() => {
                    Recorded::Outcome(Answer::Pick(one.as_str().unwrap_or("").to_string()))
                }
                _ => Recorded::Other(part["output"].to_string()),
            })
        }
        Some("output-error") => {
            let text = part["errorText"].as_str().unwrap_or("");
            Some(if text.contains("dismissed") {
                Recorded::Outcome(Answer::Dismiss)
            } else {
                Recorded::Other(text.to_string())
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{MsgRec, SettleRec};
    use serde_json::json;

    fn rec() -> ChatRec {
        ChatRec {
            owner: 0,
            messages: vec![
                MsgRec {
                    id: "m1".into(),
                    accepted: Some("200".into()),
                    attempts: 1,
                    started_turn: true,
                },
                MsgRec {
                    id: "m2".into(),
                    accepted: Some("202".into()),
                    attempts: 1,
                    started_turn: false,
                },
            ],
            settles: vec![],
        }
    }

    fn user(id: &str) -> Value {
        json!({"id": id, "role": "user", "parts": [{"type": "text", "text": format!("soak msg={id}")}], "metadata": {}})
    }

    fn reply(parts: Value) -> Value {
        json!({"id": "r", "role": "assistant", "parts": parts, "metadata": {}})
    }

    #[test]
    fn a_replied_chat_is_clean_and_a_missing_reply_or_message_is_a_loss() {
        let ok = json!({"state": "idle", "messages": [user("m1"), reply(json!([])), user("m2"), reply(json!([]))]});
        assert!(check_chat("c", &rec(), Some(&ok)).0.is_empty());
        let no_reply =
            json!({"state": "idle", "messages": [user("m1"), reply(json!([])), user("m2")]});
        let (f, _) = check_chat("c", &rec(), Some(&no_reply));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].kind, Kind::Loss);
        assert_eq!(f[0].item, "message m2");
        let missing = json!({"state": "idle", "messages": [user("m1"), reply(json!([]))]});
        let (f, _) = check_chat("c", &rec(), Some(&missing));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].what.contains("not stored"), "{}", f[0]);
        // m2's turn lost its reply, m1 started a turn after it.
        let mut r = rec();
        r.messages.swap(0, 1);
        let mid = json!({"state": "idle", "messages": [user("m2"), user("m1"), reply(json!([]))]});
        let (f, _) = check_chat("c", &r, Some(&mid));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].item, "message m2");
    }

    #[test]
    fn two_replies_in_a_row_are_a_duplicate() {
        let twice = json!({"state": "idle", "messages": [user("m1"), reply(json!([])), reply(json!([])), user("m2"), reply(json!([]))]});
        let (f, _) = check_chat("c", &rec(), Some(&twice));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].kind, Kind::Duplicate);
        assert!(f[0].item.starts_with("reply "), "{}", f[0]);
    }

    #[test]
    fn a_message_stored_twice_is_a_duplicate() {
        let twice = json!({"state": "idle", "messages": [user("m1"), reply(json!([])), user("m2"), user("m2"), reply(json!([]))]});
        let (f, _) = check_chat("c", &rec(), Some(&twice));
        assert!(
            f.iter()
                .any(|f| f.kind == Kind::Duplicate && f.item == "message m2"),
            "{f:?}"
        );
    }

    #[test]
    fn settles_are_checked_against_the_recorded_outcome() {
        let settle = |answer: Answer, result| SettleRec {
            call: "k".into(),
            answer,
            result,
            via: "A".into(),
        };
        let part = |state: &str, extra: Value| {
            let mut p = json!({"type": "tool-question", "toolCallId": "k", "state": state});
            p.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            p
        };
        let chat = |p: Value| json!({"state": "idle", "messages": [user("m1"), reply(json!([p])), user("m2"), reply(json!([]))]});
        let red = part(
            "output-available",
            json!({"output": {"answers": [{"header": "Colour", "selected": ["Red"]}]}}),
        );
        let mut r = rec();
        r.settles = vec![
            settle(Answer::Pick("Red".into()), SettleResult::Accepted),
            settle(Answer::Pick("Blue".into()), SettleResult::Stale),
        ];
        assert!(check_chat("c", &r, Some(&chat(red.clone()))).0.is_empty());
        // Two accepted answers: a duplicate.
        r.settles[1].result = SettleResult::Accepted;
        let (f, _) = check_chat("c", &r, Some(&chat(red)));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].kind, Kind::Duplicate);
        // An accepted answer the call does not record: a loss.
        r.settles.truncate(1);
        let waiting = part("input-available", json!({}));
        let (f, _) = check_chat("c", &r, Some(&chat(waiting)));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].kind, Kind::Loss);
        let dismissed = part(
            "output-error",
            json!({"errorText": "The question was dismissed."}),
        );
        let (f, _) = check_chat("c", &r, Some(&chat(dismissed)));
        assert_eq!(f.len(), 1, "{f:?}");
    }
}
