//! What the soak sent and what the API answered: the ground truth the final check holds the
//! stored chats to.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// A user message the soak sent (under its own id, kept across retries).
#[derive(Debug, Clone)]
pub(crate) struct MsgRec {
    /// The client-chosen message id.
    pub(crate) id: String,
    /// How the API accepted it (`"202 via B at 12.3s"`), if it did.
    pub(crate) accepted: Option<String>,
    /// Requests made for it.
    pub(crate) attempts: u32,
    /// Whether an answer said it started a turn (200): it is then the first message of its turn.
    pub(crate) started_turn: bool,
}

/// An answer sent to a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// This option picked.
    Pick(String),
    /// Dismissed.
    Dismiss,
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Pick(l) => write!(f, "answer {l:?}"),
            Answer::Dismiss => f.write_str("dismissal"),
        }
    }
}

/// What a settle request got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SettleResult {
    /// 2xx: the answer was accepted.
    Accepted,
    /// 409 `stale`: another outcome was there first.
    Stale,
    /// No answer (a kill), or a 5xx after retries.
    Unknown,
    /// Another status.
    Other(u16),
}

/// One settle request.
#[derive(Debug, Clone)]
pub(crate) struct SettleRec {
    /// The tool call.
    pub(crate) call: String,
    /// What was sent.
    pub(crate) answer: Answer,
    /// What came back.
    pub(crate) result: SettleResult,
    /// Through which process, when.
    pub(crate) via: String,
}

/// One chat of the run.
#[derive(Debug, Clone)]
pub(crate) struct ChatRec {
    /// The user who owns it (index of the run's users).
    pub(crate) owner: usize,
    /// The user messages sent, in the order they were sent.
    pub(crate) messages: Vec<MsgRec>,
    /// The settle requests made.
    pub(crate) settles: Vec<SettleRec>,
}

/// Every chat of the run.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    chats: Mutex<BTreeMap<String, ChatRec>>,
    /// Chats with an accepted message, newest last (listeners pick from the tail).
    live: Mutex<Vec<(String, usize)>>,
}

impl Ledger {
    /// A new chat owned by `owner`.
    pub(crate) fn new_chat(&self, chat: &str, owner: usize) {
        self.chats.lock().expect("lock").insert(
            chat.to_string(),
            ChatRec {
                owner,
                messages: Vec::new(),
                settles: Vec::new(),
            },
        );
    }

    /// A message about to be sent.
    pub(crate) fn sending(&self, chat: &str, id: &str) {
        if let Some(c) = self.chats.lock().expect("lock").get_mut(chat) {
            c.messages.push(MsgRec {
                id: id.to_string(),
                accepted: None,
                attempts: 0,
                started_turn: false,
            });
        }
    }

    /// One more request for a message.
    pub(crate) fn attempt(&self, chat: &str, id: &str) -> u32 {
        let mut chats = self.chats.lock().expect("lock");
        match chats
            .get_mut(chat)
            .and_then(|c| c.messages.iter_mut().find(|m| m.id == id))
        {
            Some(m) => {
                m.attempts += 1;
                m.attempts
            }
            None => 0,
        }
    }

    /// The API accepted a message.
    pub(crate) fn accepted(&self, chat: &str, id: &str, how: String, started_turn: bool) {
        let first_owner = {
            let mut chats = self.chats.lock().expect("lock");
            let Some(c) = chats.get_mut(chat) else { return };
            let first = c.messages.iter().all(|m| m.accepted.is_none());
            if let Some(m) = c.messages.iter_mut().find(|m| m.id == id) {
                m.accepted.get_or_insert(how);
                m.started_turn |= started_turn;
            }
            first.then_some(c.owner)
        };
        if let Some(owner) = first_owner {
            let mut live = self.live.lock().expect("lock");
            live.push((chat.to_string(), owner));
            if live.len() > 64 {
                live.remove(0);
            }
        }
    }

    /// A settle request and its result.
    pub(crate) fn settled(&self, chat: &str, rec: SettleRec) {
        if let Some(c) = self.chats.lock().expect("lock").get_mut(chat) {
            c.settles.push(rec);
        }
    }

    /// One chat as recorded now.
    pub(crate) fn chat(&self, chat: &str) -> Option<ChatRec> {
        self.chats.lock().expect("lock").get(chat).cloned()
    }

    /// Every chat.
    pub(crate) fn all(&self) -> Vec<(String, ChatRec)> {
        self.chats
            .lock()
            .expect("lock")
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// A recent chat that exists (has an accepted message), with its owner: one of the newest
    /// 16 three times in four (mostly chats still in use), else one of the newest 64.
    pub(crate) fn recent(&self, rng: &mut fastrand::Rng) -> Option<(String, usize)> {
        let live = self.live.lock().expect("lock");
        let from = if rng.usize(..4) < 3 {
            live.len().saturating_sub(16)
        } else {
            0
        };
        (from < live.len()).then(|| live[rng.usize(from..live.len())].clone())
    }
}
