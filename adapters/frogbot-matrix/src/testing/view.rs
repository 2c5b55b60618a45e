//! What a person sees of a thread in a Matrix client, its plain-text transcript, and golden
//! files.

use serde_json::Value;

use super::api::{content_text, is_poll_end, is_poll_start, poll_answers};
use super::state::FakeHomeserver;
use crate::ids::split_message_id;

/// One message of a thread as a person sees it ([`FakeHomeserver::person_view`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SeenMessage {
    /// Its event id.
    pub id: String,
    /// Who sent it.
    pub sender: String,
    /// Its `body` after edits: what every client shows of a message, and what a client that
    /// renders no poll shows of a poll (`None`: such a client shows nothing).
    pub fallback: Option<String>,
    /// Its HTML (`formatted_body`) after edits.
    pub html: Option<String>,
    /// Its poll, for a poll start.
    pub poll: Option<SeenPoll>,
    /// Its reactions: each key with who reacted, in order.
    pub reactions: Vec<(String, Vec<String>)>,
    /// Whether its posting notified (not an `m.notice`; edits never notify).
    pub notified: bool,
    /// The people its posting mentions (`m.mentions`' `user_ids`, as a homeserver's
    /// `.m.rule.is_user_mention` push rule reads them): their clients notify them (highlight),
    /// even of an `m.notice`. Edits mention nobody anew.
    pub mentions: Vec<String>,
    /// Whether it was edited.
    pub edited: bool,
}

/// A poll as a client that renders polls shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct SeenPoll {
    /// Its question.
    pub question: String,
    /// Its answers' texts, in order.
    pub answers: Vec<String>,
    /// How many answers one may pick.
    pub max_selections: u64,
    /// The poll end's text, once ended.
    pub ended: Option<String>,
    /// Each person's last selection (answer texts), in the order they first voted.
    pub votes: Vec<(String, Vec<String>)>,
}

/// What a person sees of the thread on `root` given the room's `events` in order (as the fake
/// stores them, or as a second client saw them on a real homeserver): see
/// [`FakeHomeserver::person_view`].
pub fn person_view_of(events: &[Value], root: &str) -> Vec<SeenMessage> {
    let rel = |e: &Value| {
        e["content"]["m.relates_to"]["rel_type"]
            .as_str()
            .map(str::to_owned)
    };
    let target = |e: &Value| {
        e["content"]["m.relates_to"]["event_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let redacted = |id: &str| {
        events
            .iter()
            .any(|r| r["type"] == "m.room.redaction" && r["redacts"] == id)
    };
    let mut out = Vec::new();
    for e in events {
        let id = e["event_id"].as_str().unwrap_or_default();
        let t = e["type"].as_str().unwrap_or_default();
        let in_thread = id == root || (rel(e).as_deref() == Some("m.thread") && target(e) == root);
        if !in_thread || !(t == "m.room.message" || is_poll_start(t)) || redacted(id) {
            continue;
        }
        let edit = events.iter().rev().find(|x| {
            x["sender"] == e["sender"] && rel(x).as_deref() == Some("m.replace") && target(x) == id
        });
        let content = edit.map_or(&e["content"], |x| &x["content"]["m.new_content"]);
        let poll = is_poll_start(t).then(|| {
            let block = if content["m.poll"].is_object() {
                &content["m.poll"]
            } else {
                &content["org.matrix.msc3381.poll.start"]
            };
            let question = block["question"]["m.text"][0]["body"]
                .as_str()
                .or_else(|| block["question"]["org.matrix.msc1767.text"].as_str())
                .unwrap_or_default()
                .to_owned();
            let answers = poll_answers(content);
            let end = events.iter().find(|x| {
                is_poll_end(x["type"].as_str().unwrap_or_default())
                    && rel(x).as_deref() == Some("m.reference")
                    && target(x) == id
            });
            let mut votes: Vec<(String, Vec<String>)> = Vec::new();
            for r in events.iter().filter(|x| {
                matches!(
                    x["type"].as_str(),
                    Some("m.poll.response" | "org.matrix.msc3381.poll.response")
                ) && target(x) == id
            }) {
                let picked = r["content"]["m.selections"]
                    .as_array()
                    .or_else(|| {
                        r["content"]["org.matrix.msc3381.poll.response"]["answers"].as_array()
                    })
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str())
                            .filter_map(|v| answers.iter().find(|(i, _)| i == v))
                            .map(|(_, text)| text.clone())
                            .collect()
                    })
                    .unwrap_or_default();
                let who = r["sender"].as_str().unwrap_or_default().to_owned();
                votes.retain(|(w, _)| *w != who);
                votes.push((who, picked));
            }
            SeenPoll {
                question,
                answers: answers.into_iter().map(|(_, text)| text).collect(),
                max_selections: block["max_selections"].as_u64().unwrap_or(1),
                ended: end.map(|x| content_text(&x["content"])),
                votes,
            }
        });
        let mut reactions: Vec<(String, Vec<String>)> = Vec::new();
        for r in events.iter().filter(|x| {
            x["type"] == "m.reaction"
                && target(x) == id
                && !redacted(x["event_id"].as_str().unwrap_or_default())
        }) {
            let key = r["content"]["m.relates_to"]["key"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let who = r["sender"].as_str().unwrap_or_default().to_owned();
            match reactions.iter_mut().find(|(k, _)| *k == key) {
                Some((_, by)) => by.push(who),
                None => reactions.push((key, vec![who])),
            }
        }
        out.push(SeenMessage {
            id: id.to_owned(),
            sender: e["sender"].as_str().unwrap_or_default().to_owned(),
            fallback: content["body"].as_str().map(str::to_owned),
            html: content["formatted_body"].as_str().map(str::to_owned),
            poll,
            reactions,
            notified: e["content"]["msgtype"] != "m.notice",
            mentions: e["content"]["m.mentions"]["user_ids"]
                .as_array()
                .map(|ids| {
                    ids.iter()
                        .filter_map(|u| u.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            edited: edit.is_some(),
        });
    }
    out
}

/// The longest text a [`transcript`] writes out whole; a longer one is its first
/// [`TRANSCRIPT_HEAD`] characters and its length.
pub const TRANSCRIPT_TEXT: usize = 600;
/// See [`TRANSCRIPT_TEXT`].
pub const TRANSCRIPT_HEAD: usize = 120;

/// `view` ([`FakeHomeserver::person_view`]) as stable plain text for golden files: one block
/// per message — `[n] who (notified|silent)(, edited)`, then its text (a client's `body`)
/// indented, whom the bot's message mentions (`m.mentions`, when anyone), its poll, and its
/// reactions. `bot` is written for the bot's id and `@name` for a
/// person's; event ids are left out.
pub fn transcript(view: &[SeenMessage], bot: &str) -> String {
    use std::fmt::Write as _;
    let who = |id: &str| {
        if id == bot {
            "bot".to_owned()
        } else {
            id.split(':').next().unwrap_or(id).to_owned()
        }
    };
    let text = |t: &str| {
        let n = t.chars().count();
        if n <= TRANSCRIPT_TEXT {
            t.to_owned()
        } else {
            let head: String = t.chars().take(TRANSCRIPT_HEAD).collect();
            format!("{head}… ({n} characters)")
        }
    };
    let mut out = String::new();
    for (i, m) in view.iter().enumerate() {
        let _ = writeln!(
            out,
            "[{}] {} ({}{})",
            i + 1,
            who(&m.sender),
            if m.notified { "notified" } else { "silent" },
            if m.edited { ", edited" } else { "" }
        );
        match &m.fallback {
            Some(body) => {
                for line in text(body).lines() {
                    let _ = writeln!(out, "    {line}");
                }
            }
            None => {
                let _ = writeln!(out, "    (no body: a client without polls shows nothing)");
            }
        }
        if m.sender == bot && !m.mentions.is_empty() {
            let people: Vec<String> = m.mentions.iter().map(|u| who(u)).collect();
            let _ = writeln!(out, "  mentions {}", people.join(", "));
        }
        if let Some(p) = &m.poll {
            let _ = writeln!(
                out,
                "  poll (pick up to {}): {}",
                p.max_selections,
                p.question.replace('\n', "\n      ")
            );
            for (n, a) in p.answers.iter().enumerate() {
                let _ = writeln!(out, "    ({}) {a}", n + 1);
            }
            for (voter, picked) in &p.votes {
                let _ = writeln!(out, "  vote {}: {}", who(voter), picked.join(", "));
            }
            if let Some(end) = &p.ended {
                let _ = writeln!(out, "  ended: {}", end.replace('\n', " / "));
            }
        }
        for (key, by) in &m.reactions {
            let by: Vec<String> = by.iter().map(|b| who(b)).collect();
            let _ = writeln!(out, "  reaction {key} by {}", by.join(", "));
        }
    }
    out
}

/// Compares `actual` with the golden file `path` (`UPDATE_GOLDEN=1` writes it instead), showing
/// both on a difference.
pub fn assert_golden(path: &std::path::Path, actual: &str) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("golden dir");
        }
        std::fs::write(path, actual).expect("golden written");
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert!(
        expected == actual,
        "{} differs (UPDATE_GOLDEN=1 rewrites it)\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

impl FakeHomeserver {
    /// What a person sees of the thread `thread_id` (`room|root`) in a client, in order: the
    /// root and every message in the thread (not edits, reactions, poll responses or ends, which
    /// change what a message shows), each after its latest edit by its sender (`m.replace`
    /// applied), with its reactions (not redacted), its poll (question, answers, whether ended,
    /// each person's last selection) and whether it notified (a new message does, unless it is
    /// an `m.notice`; an edit does not). `fallback` is what a client that renders no poll shows:
    /// the `body`.
    pub fn person_view(&self, thread_id: &str) -> Vec<SeenMessage> {
        let Ok((room, root)) = split_message_id(thread_id) else {
            return Vec::new();
        };
        person_view_of(&self.events(&room), root.as_str())
    }
}
