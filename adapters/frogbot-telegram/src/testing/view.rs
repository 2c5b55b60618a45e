//! What a person sees in a Telegram client: the fake's chats, topics and agent conversations
//! read as messages, and their transcripts.

use super::api::{Call, FakeBotApi, shown_text};
use super::{BOT_ID, WAIT};

/// One message of a chat as a person sees it in a Telegram client ([`FakeBotApi::person_view`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenMessage {
    /// Its message id (not in [`transcript`]: ids vary from run to run).
    pub id: i64,
    /// Who sent it: the sender's first and last name (the bot is `FrogBot`).
    pub sender: String,
    /// Its text after edits, as shown (HTML parsed: what a client renders, without the tags); a
    /// photo's caption; a draft's text.
    pub text: String,
    /// The URL of the photo it shows, for a photo sent by URL.
    pub photo: Option<String>,
    /// The file it shows, for a file the bot uploaded (`sendPhoto` / `sendDocument`).
    pub file: Option<SeenFile>,
    /// Its inline keyboard now: each row's button texts.
    pub buttons: Vec<Vec<String>>,
    /// Its ForceReply, when it asks for a reply: the client opens a reply to it with this
    /// placeholder in the input field (`""` without one).
    pub reply_field: Option<String>,
    /// The message it replies to (a client shows it quoted above).
    pub reply_to: Option<i64>,
    /// Its reactions: each emoji with who reacted (the fake knows only the bot's own).
    pub reactions: Vec<(String, Vec<String>)>,
    /// The people its text mentions (`text_mention` entities: the bot's `tg://user?id=` links to
    /// users Telegram knows), by user id: Telegram notifies each of them, even of a silent
    /// message (without sound).
    pub mentions: Vec<i64>,
    /// Whether its posting notified: every `sendMessage` / `sendPhoto` does unless it carries
    /// `disable_notification` ("silent": Telegram then notifies with no sound); edits never
    /// notify; a draft never does.
    pub notified: bool,
    /// Whether it was edited (`editMessageText`, `editMessageMedia`: the client marks it
    /// "edited"; a keyboard-only edit is not marked).
    pub edited: bool,
    /// A message draft (`sendMessageDraft`, private chats only) still showing: the ephemeral
    /// preview of a reply being written, which the message the bot sends next replaces (then it
    /// is gone from the view). Only a draft no message followed is shown.
    pub draft: bool,
}

/// A file the bot uploaded, as a person sees it: a picture, or a document with its name, type
/// and size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenFile {
    /// `photo` (`sendPhoto`: shown as a picture) or `document` (`sendDocument`).
    pub kind: String,
    /// The file name uploaded (Telegram shows it for a document, drops it for a photo).
    pub name: String,
    /// The media type uploaded (the part's `Content-Type`; `""` without one).
    pub media_type: String,
    /// Its size in bytes.
    pub size: u64,
    /// The `file_id` `getFile` resolves (for a photo, its largest size).
    pub file_id: String,
}

/// The view as stable plain text for golden files: one block per message, `[n] sender
/// (notified|silent)(, edited)(, draft)`, `↪ [k]` when it replies to message `k` of the view, the
/// text indented, then a `mentions:` line (the users its text mentions), a `photo:` line (a photo by URL), a `📎 photo:` or `📎 document:` line
/// (an upload: name, type, size), one `buttons:` line per keyboard row, a `reply field:`
/// line and a `reactions:` line. No ids or times.
pub fn transcript(seen: &[SeenMessage]) -> String {
    let mut out = String::new();
    for (n, m) in seen.iter().enumerate() {
        let mut head = format!(
            "[{}] {} ({}",
            n + 1,
            m.sender,
            if m.notified { "notified" } else { "silent" }
        );
        if m.edited {
            head.push_str(", edited");
        }
        if m.draft {
            head.push_str(", draft");
        }
        head.push(')');
        if let Some(r) = m.reply_to {
            match seen.iter().position(|x| x.id == r) {
                Some(k) => head.push_str(&format!(" ↪ [{}]", k + 1)),
                None => head.push_str(" ↪ a message not in view"),
            }
        }
        out.push_str(&head);
        out.push('\n');
        for line in m.text.lines() {
            if line.is_empty() {
                out.push('\n');
            } else {
                out.push_str(&format!("    {line}\n"));
            }
        }
        if !m.mentions.is_empty() {
            let ids: Vec<String> = m.mentions.iter().map(|id| format!("user {id}")).collect();
            out.push_str(&format!("    mentions: {}\n", ids.join(", ")));
        }
        if let Some(url) = &m.photo {
            out.push_str(&format!("    photo: {url}\n"));
        }
        if let Some(f) = &m.file {
            out.push_str(&format!(
                "    📎 {}: {} ({}, {})\n",
                f.kind,
                f.name,
                f.media_type,
                frogbot_channel::files::size_text(f.size)
            ));
        }
        for row in &m.buttons {
            let row: Vec<String> = row.iter().map(|b| format!("[ {b} ]")).collect();
            out.push_str(&format!("    buttons: {}\n", row.join(" ")));
        }
        if let Some(p) = &m.reply_field {
            out.push_str(&format!("    reply field: «{p}»\n"));
        }
        if !m.reactions.is_empty() {
            let r: Vec<String> = m
                .reactions
                .iter()
                .map(|(e, by)| format!("{e} by {}", by.join(", ")))
                .collect();
            out.push_str(&format!("    reactions: {}\n", r.join("; ")));
        }
    }
    out
}

impl FakeBotApi {
    /// What a person sees of the thread `thread_id` in a Telegram client, in order: a chat
    /// (`chat_id`: every message in it), a forum topic (`chat_id:topic`: the messages in the
    /// topic) or an agent conversation (`chat~root`: the root and the messages replying to it).
    /// Each message the fake still shows (deleted ones are gone) after its edits — the person's
    /// and the bot's — with its keyboard, its ForceReply, the bot's reaction, whether its posting
    /// notified and whether it was edited; last, a draft (`sendMessageDraft`) still showing,
    /// when one came after the bot's last message in the chat (a draft is an ephemeral preview
    /// of the reply being written, replaced by the message sent after it: a reply streamed with
    /// drafts shows as its final messages only). Ordered by message id (the fake numbers the
    /// messages it makes in order).
    pub fn person_view(&self, thread_id: &str) -> Vec<SeenMessage> {
        self.person_view_with(thread_id, &self.all_calls())
    }

    /// Waits until `ready` holds over what a person sees of `thread_id`
    /// ([`Self::person_view`]) and the calls so far (failing after [`WAIT`]); returns the view.
    pub async fn wait_view(
        &self,
        thread_id: &str,
        what: &str,
        ready: impl Fn(&[SeenMessage], &[Call]) -> bool,
    ) -> Vec<SeenMessage> {
        let mut rx = self.inner.recorded.subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let calls = self.all_calls();
            let seen = self.person_view_with(thread_id, &calls);
            if ready(&seen, &calls) {
                return seen;
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                panic!(
                    "timed out waiting for {what}; the person sees:\n{}",
                    transcript(&seen)
                );
            }
        }
    }

    fn person_view_with(&self, thread_id: &str, calls: &[Call]) -> Vec<SeenMessage> {
        let Ok((chat, topic)) = crate::ids::split_thread_id(thread_id) else {
            return Vec::new();
        };
        let root = crate::ids::thread_root(thread_id).map(|r| i64::from(r.0));
        let messages = self.inner.messages.lock().expect("not poisoned").clone();
        let mut ids: Vec<i64> = messages
            .iter()
            .filter(|(id, m)| {
                m["chat"]["id"] == chat.0
                    && topic.is_none_or(|t| m["message_thread_id"] == t.0.0)
                    && root.is_none_or(|r| **id == r || m["reply_to_message"]["message_id"] == r)
            })
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        // Read under the messages' lock's order (messages, then these), as the fake writes them.
        let silent = self.inner.silent.lock().expect("not poisoned").clone();
        let edited_ids = self.inner.edited.lock().expect("not poisoned").clone();
        let uploads = self.inner.uploads.lock().expect("not poisoned").clone();
        let mut seen: Vec<SeenMessage> = ids
            .into_iter()
            .map(|id| {
                let m = &messages[&id];
                let from = &m["from"];
                let sender = [from["first_name"].as_str(), from["last_name"].as_str()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(" ");
                let is_bot = from["id"] == BOT_ID;
                let notified = !silent.contains(&id);
                let edited = edited_ids.contains(&id);
                let buttons = m["reply_markup"]["inline_keyboard"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|row| {
                        row.as_array()
                            .into_iter()
                            .flatten()
                            .map(|b| b["text"].as_str().unwrap_or_default().to_owned())
                            .collect()
                    })
                    .collect();
                let reply_field = (m["reply_markup"]["force_reply"] == true).then(|| {
                    m["reply_markup"]["input_field_placeholder"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                });
                let file = uploads.get(&id).map(|u| SeenFile {
                    kind: u["kind"].as_str().unwrap_or_default().to_owned(),
                    name: u["name"].as_str().unwrap_or_default().to_owned(),
                    media_type: u["media_type"].as_str().unwrap_or_default().to_owned(),
                    size: u["size"].as_u64().unwrap_or_default(),
                    file_id: u["file_id"].as_str().unwrap_or_default().to_owned(),
                });
                let photo = m["photo"][0]["file_id"]
                    .as_str()
                    .filter(|_| file.is_none())
                    .map(|f| {
                        f.strip_prefix("photo:")
                            .and_then(|f| f.strip_suffix(":s"))
                            .unwrap_or(f)
                            .to_owned()
                    });
                let text = m["text"]
                    .as_str()
                    .or_else(|| m["caption"].as_str())
                    .unwrap_or_default()
                    .to_owned();
                let mentions = m["entities"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|e| e["type"] == "text_mention")
                    .filter_map(|e| e["user"]["id"].as_i64())
                    .collect();
                let reactions = m["bot_reactions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r["emoji"].as_str())
                    .map(|e| (e.to_owned(), vec!["FrogBot".to_owned()]))
                    .collect();
                SeenMessage {
                    id,
                    sender: if is_bot { "FrogBot".to_owned() } else { sender },
                    text,
                    photo,
                    file,
                    buttons,
                    reply_field,
                    reply_to: m["reply_to_message"]["message_id"].as_i64(),
                    reactions,
                    mentions,
                    notified,
                    edited,
                    draft: false,
                }
            })
            .collect();
        // A draft still showing: the chat's last draft, after the bot's last message there.
        let in_chat: Vec<&Call> = calls
            .iter()
            .filter(|c| c.result.is_some() && c.body["chat_id"] == chat.0)
            .collect();
        let last_draft = in_chat.iter().rposition(|c| c.method == "sendmessagedraft");
        let last_message = in_chat.iter().rposition(|c| {
            matches!(
                c.method.as_str(),
                "sendmessage" | "sendphoto" | "senddocument"
            )
        });
        if root.is_none()
            && topic.is_none()
            && let Some(d) = last_draft
            && last_message.is_none_or(|m| m < d)
        {
            let c = in_chat[d];
            seen.push(SeenMessage {
                id: i64::MAX,
                sender: "FrogBot".to_owned(),
                text: shown_text(&c.body).unwrap_or_default(),
                photo: None,
                file: None,
                buttons: Vec::new(),
                reply_field: None,
                reply_to: None,
                reactions: Vec::new(),
                mentions: Vec::new(),
                notified: false,
                edited: false,
                draft: true,
            });
        }
        seen
    }
}
