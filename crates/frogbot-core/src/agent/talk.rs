//! Talking with agents outside FrogBot (the rply messages model): a chat **bound** to an external
//! agent gets no model turns; the agent posts messages of text, a title and blocks
//! ([`AgentMessage`]), edits, deletes and pins them, and reads people's messages and block events
//! from its **inbox** ([`InboxItem`]), acknowledging them Seen (when the inbox returns them),
//! Working or Done. Every change reaches the chat's platform thread through the channel's outbox
//! and the web chat through the chat's messages.
//!
//! `open_agent_chat` binds a web chat (ownerless: the person talks in it by its id) or a platform
//! thread (a channel or a person gets a new thread through `ChannelOutbox::ask_thread`, idempotent
//! on the key) to the calling agent; an ask binds its chat to the asker when the chat holds only
//! asks. People's messages in a bound thread or web chat (`channel_message`, `web_message`) go to
//! the inbox with `post_message`, never to a model; so do block event clicks (`channel_event` from
//! an adapter's `EventClick`, `web_event`). In its chat (`engine.agents()` looks at the binding,
//! `agent_chat`) the agent posts (`post_agent_message`), edits or patches one block
//! (`edit_agent_message`), deletes (a tombstone; `engine.agents().delete` withdraws an ask's open
//! question instead) and pins under a key (the key's earlier pin returns to the thread). Each is a
//! fenced read-modify-write (`update_message`, retried on `Moved`) that writes a `sync-message` job
//! with the change; the chat's show queue then brings the platform copy up to date at once
//! (`sync_message`: `post_message`, `edit_posted` or `delete_posted`, then `pin_posted`, comparing
//! `sync.revision` with `sync.shown`), and any worker does it after the job's delay if this process
//! could not. The inbox (`inbox`, `engine.agents().inbox_wait`: woken by this process's arrivals,
//! the store read every second) marks what it returns Seen and shows it on the platform;
//! `agent_ack` sets Working / Done.

pub use frogbot_channel::EventOutcome;
use serde::{Deserialize, Serialize};
use tracing::{debug, warn};

use super::channel::Channels;
use super::jobs::EngineJob;
use super::registry::{AskPlace, Delivery, thread_of};
use crate::error::{Error, Item, Result};
use crate::model::{
    Ack, Block, BlockEvent, ChannelRef, ChatId, EventClick, MessagePart, Role, SyncState,
    UiMessage, UserId, blocks_of,
};
use crate::store::{
    BindAgentOp, Bound, ChatRow, InboxOp, MessageUpdate, NewChat, PostMessageOp, PostedMessage,
    StoredMessage, UpdateMessageOp,
};

/// Where an agent chat is held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentPlace {
    /// The web chat (and HTTP API) only: a new chat with this id, owned by `owner` (the person
    /// it is for) or else by the agent itself.
    Web {
        /// The chat's id.
        chat: ChatId,
        /// The configured user the chat is for (`None`: the agent's own).
        owner: Option<UserId>,
    },
    /// A platform thread (as the channel's adapter writes thread ids), or a channel or a person
    /// where the adapter starts one ([`super::AskPlace`]).
    Channel {
        /// The platform.
        platform: String,
        /// Where.
        place: ChannelTarget,
    },
}

impl AgentPlace {
    /// What the authorization policy is asked about when an agent opens a chat here.
    pub fn target(&self) -> crate::policy::Target<'_> {
        use crate::policy::Target;
        match self {
            AgentPlace::Web { owner, .. } => Target::Web {
                for_user: owner.as_ref(),
            },
            AgentPlace::Channel { platform, place } => Target::Platform {
                platform,
                id: match place {
                    ChannelTarget::Thread(t) | ChannelTarget::User(t) => t,
                },
            },
        }
    }
}

/// A platform target of an agent chat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelTarget {
    /// A thread, or a channel where a thread is started.
    Thread(String),
    /// A person, in a direct conversation.
    User(String),
}

/// A message an agent posts: a title, Markdown text and blocks (at least one of them), and
/// optionally the pin key it goes under.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentMessage {
    /// The caller's id for the message (its idempotency key: the same id again returns the
    /// message already posted). Generated when absent.
    pub id: Option<String>,
    /// A title.
    pub title: Option<String>,
    /// Markdown text.
    pub text: Option<String>,
    /// Blocks.
    pub blocks: Vec<Block>,
    /// Pin it under this key (replacing the key's pin).
    pub pin: Option<String>,
    /// Files it carries: `file` parts naming files of the chat (uploaded first, `POST
    /// /api/chats/{chat}/files`) or `data:` URLs, sent on a platform as its own uploads after
    /// the message. An edit keeps them.
    pub files: Vec<MessagePart>,
}

/// How an agent changes one of its messages.
#[derive(Clone, Debug, PartialEq)]
pub enum MessageEdit {
    /// New content (the title, text and blocks given replace the old; `None` keeps that part).
    Replace {
        /// A new title.
        title: Option<String>,
        /// New text.
        text: Option<String>,
        /// New blocks.
        blocks: Option<Vec<Block>>,
    },
    /// One block, by id, replaced.
    Patch {
        /// The block's id.
        block_id: String,
        /// Its new content (its id is kept).
        block: Block,
    },
}

/// What an agent's inbox returns: a person's message, or an event from a block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxItem {
    /// The chat it arrived in.
    pub chat_id: ChatId,
    /// The message (a person's text; or an event, whose `data-event` part says which).
    pub message: UiMessage,
    /// The event it carries, for an event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<BlockEvent>,
    /// Who sent it (a FrogBot user, when known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<UserId>,
    /// The speaker's name on the platform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
    /// Its acknowledgement now (Seen once returned).
    pub ack: Ack,
}

/// How soon a worker shows an agent message's change when this process did not (it crashed,
/// or the platform failed): the process that made the change shows it at once.
const SYNC_GRACE_MS: i64 = 30_000;

/// The longest title.
const MAX_TITLE_CHARS: usize = 256;
/// The longest text of an agent message.
const MAX_TEXT_BYTES: usize = 64 * 1024;
/// The longest pin key.
const MAX_PIN_KEY: usize = 64;

/// The agent key stored on a bound chat: the caller's user id, `""` for an anonymous caller.
pub(crate) fn agent_key(agent: Option<&UserId>) -> String {
    agent.map(|u| u.as_str().to_owned()).unwrap_or_default()
}

fn check_title_text(title: Option<&str>, text: Option<&str>) -> Result<()> {
    if title.is_some_and(|t| t.chars().count() > MAX_TITLE_CHARS || t.contains('\n')) {
        return Err(Error::invalid(format!(
            "a title is one line of at most {MAX_TITLE_CHARS} characters"
        )));
    }
    if text.is_some_and(|t| t.len() > MAX_TEXT_BYTES) {
        return Err(Error::invalid(format!(
            "a message's text is at most {MAX_TEXT_BYTES} bytes"
        )));
    }
    Ok(())
}

/// A pin key: 1-64 characters of `A-Z a-z 0-9 _ - .`.
pub fn valid_pin_key(key: &str) -> bool {
    (1..=MAX_PIN_KEY).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
}

fn parts_of(text: Option<&str>, blocks: &[Block]) -> Vec<MessagePart> {
    let mut parts = Vec::new();
    if let Some(t) = text.filter(|t| !t.is_empty()) {
        parts.push(MessagePart::text(t));
    }
    parts.extend(blocks.iter().map(|b| {
        let mut b = b.clone();
        crate::model::stamp_app_link(&mut b, super::turn::fresh_app_link);
        b.to_part()
    }));
    parts
}

/// A live agent message (not deleted): what the agent edits, deletes and pins.
fn is_agent_message(m: &UiMessage) -> bool {
    m.role == Role::Assistant && m.metadata.deleted_at.is_none()
}

/// A message an agent posted (not a turn's reply, not an ask's question): what an agent edits.
pub(crate) fn is_posted_message(m: &UiMessage) -> bool {
    is_agent_message(m)
        && m.metadata.model.is_none()
        && !m.parts.iter().any(|p| matches!(p, MessagePart::Tool(_)))
}

/// A turn's reply (its text is what FrogBot's own agent may edit).
pub(crate) fn is_reply(m: &UiMessage) -> bool {
    is_agent_message(m) && m.metadata.model.is_some()
}

/// A person's message (not an event): what the agent acknowledges.
fn is_persons_message(m: &UiMessage) -> bool {
    m.role == Role::User && !m.parts.iter().any(|p| BlockEvent::from_part(p).is_some())
}

/// A changed message a platform shows is at its next revision (its sync job redraws it).
fn next_revision(m: &mut UiMessage) {
    if let Some(s) = &mut m.metadata.sync {
        s.revision += 1;
    }
}

impl Channels {
    fn now(&self) -> crate::model::Millis {
        self.turns.now()
    }

    /// Checks a message's files: each one of this chat's (or a `data:` URL), within the limits.
    async fn check_files(&self, chat: &ChatId, files: &mut [MessagePart]) -> Result<()> {
        crate::agent::files::check_file_parts(
            &self.turns.store,
            &self.turns.config.files,
            chat,
            files,
        )
        .await
    }

    /// The chat, bound to `agent`; `NotFound` for a chat that is not (an id the caller did not
    /// create reads as absent, so ids are not probed).
    pub(crate) async fn agent_chat(
        &self,
        chat: &ChatId,
        agent: Option<&UserId>,
    ) -> Result<ChatRow> {
        let row = self.turns.store.get_chat(chat).await?;
        match row {
            Some(row) if row.agent.as_deref() == Some(agent_key(agent).as_str()) => Ok(row),
            _ => Err(Error::NotFound {
                item: Item::Chat,
                id: chat.to_string(),
            }),
        }
    }

    /// Opens (creates or binds) an agent chat: the web chat `id`, or a platform thread the
    /// channel names (starting one with `text` as its first message where the target is a
    /// channel or a person; `key` makes that idempotent).
    pub(crate) async fn open_agent_chat(
        &self,
        agent: Option<&UserId>,
        place: AgentPlace,
        text: &str,
        key: &str,
    ) -> Result<ChatRow> {
        let new = match place {
            AgentPlace::Web { chat: id, owner } => {
                if id.as_str().starts_with(crate::model::CHANNEL_CHAT_PREFIX) {
                    return Err(Error::invalid(format!(
                        "chat ids starting with {:?} belong to channel threads",
                        crate::model::CHANNEL_CHAT_PREFIX
                    )));
                }
                // Owned by the person it is for (who talks in it), else by the agent: never
                // ownerless, so nobody else lists, reads or writes it. Only the agent posts,
                // edits and reads the inbox.
                NewChat {
                    chat_id: id,
                    owner: owner.or_else(|| agent.cloned()),
                    channel: None,
                }
            }
            AgentPlace::Channel { platform, place } => {
                let outbox = self.outbox(&platform).ok_or_else(|| {
                    Error::invalid(format!("no channel {platform:?} is configured"))
                })?;
                let ask_place = match &place {
                    ChannelTarget::Thread(t) => AskPlace::Thread(t),
                    ChannelTarget::User(u) => AskPlace::User(u),
                };
                let ask = frogbot_channel::outbox::AskTo::new(ask_place, text, key);
                let thread = outbox.ask_thread(ask).await.map_err(|e| Error::Channel {
                    platform: platform.clone(),
                    reason: e.to_string(),
                })?;
                let existing = self
                    .turns
                    .store
                    .get_channel_chat(&platform, &thread)
                    .await?;
                NewChat {
                    chat_id: existing
                        .map(|c| c.chat_id)
                        .unwrap_or_else(|| super::channel::channel_chat_id(&platform, &thread)),
                    owner: None,
                    channel: Some(ChannelRef { platform, thread }),
                }
            }
        };
        let agent_id = agent_key(agent);
        match self
            .turns
            .store
            .bind_agent(&BindAgentOp {
                chat: &new,
                agent: &agent_id,
                existing: false,
                now: self.now(),
            })
            .await?
        {
            Bound::Bound(row) => Ok(row),
            Bound::Other(row) => Err(Error::Forbidden {
                chat_id: row.chat_id,
            }),
        }
    }

    /// Binds an ask's chat to its asker (people's later messages in the ask's thread go to the
    /// asker's inbox). A chat bound to another agent, or one the asker may not bind, is left.
    pub(crate) async fn bind_for_ask(&self, chat: &NewChat, agent: Option<&UserId>) {
        // A thread where people talk with FrogBot's own agent stays with it: only a chat made
        // of asks is bound.
        let Ok(messages) = self.turns.store.list_messages(&chat.chat_id).await else {
            return;
        };
        if messages
            .iter()
            .any(|m| m.message.role == Role::User && super::ask::ask_input(&m.message).is_none())
        {
            return;
        }
        let agent_id = agent_key(agent);
        if let Err(e) = self
            .turns
            .store
            .bind_agent(&BindAgentOp {
                chat,
                agent: &agent_id,
                existing: true,
                now: self.now(),
            })
            .await
        {
            debug!(chat = %chat.chat_id, error = %e, "an ask's chat is not bound to its asker");
        }
    }

    /// Posts `msg` in the chat `row` as `agent`'s (FrogBot's own agent: `None` on an unbound
    /// chat), without looking at the binding: `engine.agents().post` (which looks at it,
    /// [`Channels::agent_chat`]) and the agent's `send_message` / `set_status` tools.
    pub(crate) async fn post_agent_message(
        &self,
        row: &ChatRow,
        agent: Option<&UserId>,
        msg: AgentMessage,
    ) -> Result<UiMessage> {
        let chat = &row.chat_id;
        check_title_text(msg.title.as_deref(), msg.text.as_deref())?;
        if msg.title.is_none()
            && msg.text.as_deref().is_none_or(str::is_empty)
            && msg.blocks.is_empty()
            && msg.files.is_empty()
        {
            return Err(Error::invalid(
                "a message needs a title, text, blocks or files",
            ));
        }
        let mut files = msg.files;
        if files.iter().any(|p| p.as_file().is_none()) {
            return Err(Error::invalid(
                "each of a message's files is a file part: {\"type\": \"file\", \"url\": …}",
            ));
        }
        self.check_files(chat, &mut files).await?;
        if let Some(k) = &msg.pin
            && !valid_pin_key(k)
        {
            return Err(Error::invalid(
                "a pin key is 1-64 characters of A-Z a-z 0-9 _ - .",
            ));
        }
        let id = match msg.id {
            Some(id) => {
                crate::model::ChatId::new(&id).map_err(|_| {
                    Error::invalid("a message id is 1-128 characters of A-Z a-z 0-9 _ -")
                })?;
                id
            }
            None => format!("msg_{}", uuid::Uuid::now_v7().simple()),
        };
        let mut message = UiMessage {
            id: id.clone(),
            role: Role::Assistant,
            parts: parts_of(msg.text.as_deref(), &msg.blocks),
            metadata: Default::default(),
        };
        message.parts.extend(files);
        message.metadata.author = agent.cloned();
        message.metadata.title = msg.title;
        message.metadata.created_at = crate::model::millis_to_iso(self.now());
        message.metadata.sync = row.channel.as_ref().map(|_| SyncState::default());
        let job = row.channel.as_ref().map(|_| {
            EngineJob::SyncMessage {
                chat: chat.clone(),
                message: id.clone(),
            }
            .to_new_job(self.now() + SYNC_GRACE_MS)
        });
        let posted = self
            .turns
            .store
            .post_message(&PostMessageOp {
                chat,
                message: &message,
                inbox: false,
                job: job.as_ref(),
                now: self.now(),
            })
            .await?;
        self.turns.jobs_scheduled([job.as_ref()]);
        let saved = match posted {
            PostedMessage::New(m) => m,
            PostedMessage::Duplicate(m) if m.message.role == Role::Assistant => {
                return Ok(m.message);
            }
            PostedMessage::Duplicate(_) => {
                return Err(Error::DuplicateMessage {
                    chat_id: chat.clone(),
                    message_id: id,
                });
            }
        };
        self.turns.emit_message(chat, &saved.message);
        self.schedule_sync(chat, &id);
        if let Some(key) = msg.pin {
            return self
                .pin_agent_message(chat, &key, Some(&id))
                .await
                .map(|m| m.unwrap_or(saved.message));
        }
        Ok(saved.message)
    }

    /// Reads an agent's own live message for a change, applies `change` and saves it fenced by
    /// its version (a racing change is read again and applied again).
    async fn change_message(
        &self,
        chat: &ChatId,
        message_id: &str,
        which: fn(&UiMessage) -> bool,
        mut change: impl FnMut(&mut UiMessage) -> Result<bool>,
    ) -> Result<UiMessage> {
        for _ in 0..16 {
            let current = self.message_where(chat, message_id, which).await?;
            let mut m = current.message.clone();
            if !change(&mut m)? {
                return Ok(current.message);
            }
            let job = m.metadata.sync.map(|_| {
                EngineJob::SyncMessage {
                    chat: chat.clone(),
                    message: message_id.to_owned(),
                }
                .to_new_job(self.now() + SYNC_GRACE_MS)
            });
            match self
                .turns
                .store
                .update_message(&UpdateMessageOp {
                    chat,
                    message: &m,
                    expected_version: current.version,
                    job: job.as_ref(),
                    now: self.now(),
                })
                .await?
            {
                MessageUpdate::Done(saved) => {
                    self.turns.emit_message(chat, &saved.message);
                    self.turns.jobs_scheduled([job.as_ref()]);
                    if job.is_some() {
                        self.schedule_sync(chat, message_id);
                    }
                    return Ok(saved.message);
                }
                MessageUpdate::Moved(_) => continue,
            }
        }
        Err(Error::invalid("the message keeps changing; try again"))
    }

    /// The message `message_id` when `which` accepts it; `NotFound` otherwise.
    async fn message_where(
        &self,
        chat: &ChatId,
        message_id: &str,
        which: fn(&UiMessage) -> bool,
    ) -> Result<StoredMessage> {
        match self.turns.store.get_message(chat, message_id).await? {
            Some(m) if which(&m.message) => Ok(m),
            _ => Err(Error::NotFound {
                item: Item::Message,
                id: message_id.to_owned(),
            }),
        }
    }

    /// Edits an agent message (its content, or one block by id).
    /// What a platform draws of an agent message: everything but its files (sent as uploads),
    /// its apps linking to their web views when the server has a `public_url`.
    fn drawn(&self, chat: &ChatId, m: &UiMessage) -> UiMessage {
        let mut drawn = match &self.turns.config.public_url {
            Some(base) => crate::model::with_app_urls(m, chat.as_str(), base),
            None => m.clone(),
        };
        drawn.parts.retain(|p| p.as_file().is_none());
        drawn
    }

    /// Edits the agent message `message_id` of `chat` without looking at the binding:
    /// `engine.agents().edit` (which looks at it, [`Channels::agent_chat`]) and the agent's
    /// `edit_message` / `set_status` tools.
    pub(crate) async fn edit_agent_message(
        &self,
        chat: &ChatId,
        message_id: &str,
        edit: MessageEdit,
    ) -> Result<UiMessage> {
        if let MessageEdit::Replace { title, text, .. } = &edit {
            check_title_text(title.as_deref(), text.as_deref())?;
        }
        let now = crate::model::millis_to_iso(self.now());
        self.change_message(chat, message_id, is_posted_message, |m| {
            match &edit {
                MessageEdit::Replace {
                    title,
                    text,
                    blocks,
                } => {
                    let keep_text = m.text();
                    let keep_blocks = blocks_of(m);
                    let text = text.clone().unwrap_or(keep_text);
                    let blocks = blocks.clone().unwrap_or(keep_blocks);
                    if title.is_some() {
                        m.metadata.title = title.clone().filter(|t| !t.is_empty());
                    }
                    // Its files stay as they are.
                    let files: Vec<MessagePart> = m
                        .parts
                        .iter()
                        .filter(|p| p.as_file().is_some())
                        .cloned()
                        .collect();
                    m.parts = parts_of(Some(&text), &blocks);
                    m.parts.extend(files);
                    if m.parts.is_empty() && m.metadata.title.is_none() {
                        return Err(Error::invalid(
                            "a message needs a title, text, blocks or files",
                        ));
                    }
                }
                MessageEdit::Patch { block_id, block } => {
                    let at = m.parts.iter().position(|p| {
                        Block::from_part(p)
                            .is_some_and(|b| b.id.as_deref() == Some(block_id.as_str()))
                    });
                    let Some(at) = at else {
                        return Err(Error::NotFound {
                            item: Item::Message,
                            id: format!("{message_id}#{block_id}"),
                        });
                    };
                    let mut block = block.clone();
                    block.id = Some(block_id.clone());
                    crate::model::stamp_app_link(&mut block, super::turn::fresh_app_link);
                    m.parts[at] = block.to_part();
                }
            }
            m.metadata.edited_at = Some(now.clone());
            next_revision(m);
            Ok(true)
        })
        .await
    }

    /// Replaces the text of the turn reply `message_id` (FrogBot's own agent's `edit_message`):
    /// its text parts give way to `text`, where the first was; its tool calls stay. On a
    /// platform the reply's messages are edited in place (their ids kept when it was posted); a
    /// reply whose platform messages are not known is refused, as is one a question waits in.
    pub(crate) async fn edit_reply(
        &self,
        row: &ChatRow,
        message_id: &str,
        text: &str,
    ) -> Result<UiMessage> {
        check_title_text(None, Some(text))?;
        if text.trim().is_empty() {
            return Err(Error::invalid("a reply's new text is empty"));
        }
        if row.awaiting_message_id.as_deref() == Some(message_id) {
            return Err(Error::invalid(
                "a question waits in that reply: it cannot be edited until it is answered",
            ));
        }
        let on_platform = row.channel.is_some();
        let now = crate::model::millis_to_iso(self.now());
        self.change_message(&row.chat_id, message_id, is_reply, |m| {
            if on_platform && m.metadata.posted.is_empty() {
                return Err(Error::invalid(
                    "that reply's platform messages are not known (it was not posted whole by this version): it cannot be edited",
                ));
            }
            // Every part before the first text is not text: the new text goes where it was.
            let at = m
                .parts
                .iter()
                .position(|p| matches!(p, MessagePart::Text { .. }))
                .unwrap_or(m.parts.len());
            let mut parts: Vec<MessagePart> = m
                .parts
                .drain(..)
                .filter(|p| !matches!(p, MessagePart::Text { .. }))
                .collect();
            parts.insert(at.min(parts.len()), MessagePart::text(text));
            m.parts = parts;
            m.metadata.edited_at = Some(now.clone());
            if on_platform {
                // Shown as posted so far: the edit is the next revision.
                let sync = m.metadata.sync.get_or_insert(SyncState {
                    revision: 0,
                    shown: Some(0),
                    pinned: false,
                });
                sync.revision += 1;
            }
            Ok(true)
        })
        .await
    }

    /// Deletes an agent message: a tombstone in the chat, removed from its platform.
    pub(crate) async fn agent_delete(
        &self,
        chat: &ChatId,
        agent: Option<&UserId>,
        message_id: &str,
    ) -> Result<()> {
        self.agent_chat(chat, agent).await?;
        let now = crate::model::millis_to_iso(self.now());
        self.change_message(chat, message_id, is_agent_message, |m| {
            m.parts.clear();
            m.metadata.title = None;
            m.metadata.pin = None;
            m.metadata.deleted_at = Some(now.clone());
            next_revision(m);
            Ok(true)
        })
        .await?;
        Ok(())
    }

    /// Pins `message` under `key` (the key's earlier pin returns to the thread), or unpins the
    /// key (`message` `None`), without looking at the binding. Returns the message pinned.
    pub(crate) async fn pin_agent_message(
        &self,
        chat: &ChatId,
        key: &str,
        message: Option<&str>,
    ) -> Result<Option<UiMessage>> {
        if !valid_pin_key(key) {
            return Err(Error::invalid(
                "a pin key is 1-64 characters of A-Z a-z 0-9 _ - .",
            ));
        }
        let pinned = match message {
            Some(id) => Some(
                self.change_message(chat, id, is_agent_message, |m| {
                    if m.metadata.pin.as_deref() == Some(key) {
                        return Ok(false);
                    }
                    m.metadata.pin = Some(key.to_owned());
                    Ok(true)
                })
                .await?,
            ),
            None => None,
        };
        // The key's other messages go back to the thread (after the new pin is saved, so a
        // crash between leaves two pins of the key for a moment, never none).
        let others: Vec<String> = self
            .turns
            .store
            .list_messages(chat)
            .await?
            .into_iter()
            .filter(|m| {
                m.message.metadata.pin.as_deref() == Some(key)
                    && Some(m.message.id.as_str()) != message
            })
            .map(|m| m.message.id)
            .collect();
        for id in others {
            self.change_message(chat, &id, is_agent_message, |m| {
                if m.metadata.pin.as_deref() != Some(key) {
                    return Ok(false);
                }
                m.metadata.pin = None;
                Ok(true)
            })
            .await?;
        }
        if message.is_none() && pinned.is_none() {
            debug!(%chat, key, "unpinned");
        }
        Ok(pinned)
    }

    /// Reads (and marks Seen) the oldest messages and events waiting for `agent`.
    pub(crate) async fn inbox(
        &self,
        agent: Option<&UserId>,
        chat: Option<&ChatId>,
        limit: u32,
    ) -> Result<Vec<InboxItem>> {
        let agent_id = agent_key(agent);
        let taken = self
            .turns
            .store
            .take_inbox(&InboxOp {
                agent: &agent_id,
                chat,
                limit: limit.clamp(1, 1000),
                now: self.now(),
            })
            .await?;
        let mut items = Vec::with_capacity(taken.len());
        for m in taken {
            self.turns.emit_message(&m.chat_id, &m.message);
            let event = m.message.parts.iter().find_map(BlockEvent::from_part);
            if event.is_none() {
                self.platform_ack(&m.chat_id, &m.message.id, Ack::Seen)
                    .await;
            }
            items.push(InboxItem {
                chat_id: m.chat_id.clone(),
                by: m.message.metadata.author.clone(),
                speaker: m.message.metadata.speaker.clone(),
                ack: m.message.metadata.ack.unwrap_or(Ack::Seen),
                event,
                message: m.message,
            });
        }
        Ok(items)
    }

    /// Shows `ack` on a person's platform message (a channel chat's message ids are
    /// `platform-<the platform's id>`).
    async fn platform_ack(&self, chat: &ChatId, message_id: &str, ack: Ack) {
        let Ok(Some(row)) = self.turns.store.get_chat(chat).await else {
            return;
        };
        let Some(thread) = thread_of(&row) else {
            return;
        };
        let Some(outbox) = self.outbox(&thread.platform) else {
            return;
        };
        if !self.registry.settings(&thread.platform).acks {
            return;
        }
        let prefix = format!("{}-", thread.platform);
        let Some(platform_id) = message_id.strip_prefix(&prefix).map(str::to_owned) else {
            return;
        };
        self.show(chat, async move {
            Channels::ack(outbox.as_ref(), &thread, &platform_id, ack).await;
        });
    }

    /// The agent says how far it is with a person's message in its chat (the caller has looked
    /// at the binding, [`Channels::agent_chat`]): Working or Done (Seen is set by the inbox).
    pub(crate) async fn agent_ack(&self, chat: &ChatId, message_id: &str, ack: Ack) -> Result<()> {
        if !matches!(ack, Ack::Working | Ack::Done) {
            return Err(Error::invalid(
                "an agent acknowledges a message as working or done",
            ));
        }
        self.change_message(chat, message_id, is_persons_message, |m| {
            m.metadata.ack = Some(ack);
            Ok(true)
        })
        .await?;
        self.platform_ack(chat, message_id, ack).await;
        Ok(())
    }

    /// A person's message in a bound chat's thread: saved for the agent's inbox.
    pub(crate) async fn to_inbox(&self, chat: &ChatRow, message: UiMessage) -> Result<bool> {
        let saved = self
            .turns
            .store
            .post_message(&PostMessageOp {
                chat: &chat.chat_id,
                message: &message,
                inbox: true,
                job: None,
                now: self.now(),
            })
            .await?;
        let PostedMessage::New(saved) = saved else {
            return Ok(false);
        };
        self.turns.emit_message(&chat.chat_id, &saved.message);
        self.inbox_arrived.notify_waiters();
        Ok(true)
    }

    /// A person's message in a bound web chat (over HTTP): saved for the agent's inbox.
    /// `Ok(None)` when the id was taken before (a repeated request).
    pub(crate) async fn web_message(
        &self,
        chat: &ChatId,
        by: Option<&UserId>,
        id: Option<String>,
        text: &str,
        mut files: Vec<MessagePart>,
    ) -> Result<Option<UiMessage>> {
        let Some(row) = self.turns.store.get_chat(chat).await? else {
            return Err(Error::NotFound {
                item: Item::Chat,
                id: chat.to_string(),
            });
        };
        if row.agent.is_none() {
            return Err(Error::invalid("this chat is not an agent's"));
        }
        if (text.trim().is_empty() && files.is_empty()) || text.len() > MAX_TEXT_BYTES {
            return Err(Error::invalid(format!(
                "a message is 1 to {MAX_TEXT_BYTES} bytes of text, or files"
            )));
        }
        self.check_files(chat, &mut files).await?;
        if let Some(id) = &id {
            ChatId::new(id).map_err(|_| {
                Error::invalid("a message id is 1-128 characters of A-Z a-z 0-9 _ -")
            })?;
        }
        let mut m = UiMessage {
            id: id.unwrap_or_else(|| format!("in_{}", uuid::Uuid::now_v7().simple())),
            role: Role::User,
            parts: files,
            metadata: Default::default(),
        };
        if !text.trim().is_empty() {
            m.parts.push(MessagePart::text(text));
        }
        m.metadata.author = by.cloned();
        m.metadata.created_at = crate::model::millis_to_iso(self.now());
        Ok(self.to_inbox(&row, m.clone()).await?.then_some(m))
    }

    /// An event from block `block_id` of agent message `message_id` with `value`, by `by`.
    async fn event(
        &self,
        chat: &ChatRow,
        message_id: &str,
        block_id: &str,
        value: &str,
        by: Option<&UserId>,
        speaker: Option<String>,
    ) -> Result<()> {
        let mut m = UiMessage {
            id: format!("event_{}", uuid::Uuid::now_v7().simple()),
            role: Role::User,
            parts: vec![
                BlockEvent {
                    message_id: message_id.to_owned(),
                    block_id: block_id.to_owned(),
                    value: value.to_owned(),
                }
                .to_part(),
            ],
            metadata: Default::default(),
        };
        m.metadata.author = by.cloned();
        m.metadata.speaker = speaker;
        m.metadata.created_at = crate::model::millis_to_iso(self.now());
        self.to_inbox(chat, m).await?;
        Ok(())
    }

    /// A click on an event button in a channel thread.
    pub(crate) async fn channel_event(
        &self,
        platform: &str,
        thread: &str,
        click: EventClick,
    ) -> Result<EventOutcome> {
        let Some(chat) = self.turns.store.get_channel_chat(platform, thread).await? else {
            return Ok(EventOutcome::Stale);
        };
        if chat.agent.is_none() {
            return Ok(EventOutcome::Stale);
        }
        let Some(channel) = self.registry.get(platform) else {
            return Ok(EventOutcome::Stale);
        };
        let (actor, allowed) = self
            .questions
            .identify(
                &channel,
                &chat.info(),
                &crate::model::PlatformUser {
                    id: click.user.id.clone(),
                    name: click.user.name.clone(),
                    is_bot: click.user.is_bot,
                },
            )
            .await;
        if !allowed {
            return Ok(EventOutcome::Denied);
        }
        let messages = self.turns.store.list_messages(&chat.chat_id).await?;
        let found = messages.iter().rev().find(|m| {
            is_agent_message(&m.message)
                && m.message
                    .metadata
                    .posted
                    .iter()
                    .any(|p| p == &click.message_id)
        });
        let Some(found) = found else {
            return Ok(EventOutcome::Stale);
        };
        let blocks = blocks_of(&found.message);
        let Some((block_id, value)) = blocks.get(click.block).and_then(|b| {
            Some((
                b.id.clone()?,
                b.events.get(click.button)?.value().to_owned(),
            ))
        }) else {
            return Ok(EventOutcome::Stale);
        };
        let speaker = click
            .user
            .name
            .clone()
            .or_else(|| Some(click.user.id.clone()));
        self.event(
            &chat,
            &found.message.id,
            &block_id,
            &value,
            actor.user.as_ref(),
            speaker,
        )
        .await?;
        Ok(EventOutcome::Sent)
    }

    /// A click on an event button in the web chat (or over HTTP) by `by`, who may write `chat`.
    pub(crate) async fn web_event(
        &self,
        chat: &ChatId,
        by: Option<&UserId>,
        message_id: &str,
        block_id: &str,
        value: &str,
    ) -> Result<EventOutcome> {
        let Some(row) = self.turns.store.get_chat(chat).await? else {
            return Err(Error::NotFound {
                item: Item::Chat,
                id: chat.to_string(),
            });
        };
        if row.agent.is_none() {
            return Ok(EventOutcome::Stale);
        }
        if row.channel.is_none() && row.owner.is_some() && row.owner.as_ref() != by {
            return Err(Error::Forbidden {
                chat_id: chat.clone(),
            });
        }
        let Some(m) = self.turns.store.get_message(chat, message_id).await? else {
            return Ok(EventOutcome::Stale);
        };
        let ok = is_agent_message(&m.message)
            && blocks_of(&m.message).iter().any(|b| {
                b.id.as_deref() == Some(block_id) && b.events.iter().any(|e| e.value() == value)
            });
        if !ok {
            return Ok(EventOutcome::Stale);
        }
        self.event(
            &row,
            message_id,
            block_id,
            value,
            by,
            by.map(|u| u.as_str().to_owned()),
        )
        .await?;
        Ok(EventOutcome::Sent)
    }

    /// Shows an agent message's change on its platform now, in the chat's show queue.
    fn schedule_sync(&self, chat: &ChatId, message: &str) {
        let Some(me) = self.me.get().and_then(std::sync::Weak::upgrade) else {
            return;
        };
        let (chat2, message) = (chat.clone(), message.to_owned());
        self.show(chat, async move {
            match me.sync_message(&chat2, &message).await {
                Ok(true) => {}
                Ok(false) => debug!(chat = %chat2, message, "an agent message is left to its job"),
                Err(e) => warn!(chat = %chat2, message, error = %e, "showing an agent message failed; its job retries"),
            }
        });
    }

    /// Brings the platform copy of an agent message up to the chat's: post, edit, delete, pin.
    /// `Ok(true)` when it is up to date (its job removed), `Ok(false)` when it should be tried
    /// again.
    pub(crate) async fn sync_message(&self, chat: &ChatId, message_id: &str) -> Result<bool> {
        let store = &self.turns.store;
        let key = EngineJob::SyncMessage {
            chat: chat.clone(),
            message: message_id.to_owned(),
        }
        .key();
        for _ in 0..8 {
            let Some(row) = store.get_chat(chat).await? else {
                store.delete_job(&key).await?;
                return Ok(true);
            };
            let (Some(thread), Some(current)) =
                (thread_of(&row), store.get_message(chat, message_id).await?)
            else {
                store.delete_job(&key).await?;
                return Ok(true);
            };
            let Some(outbox) = self.outbox(&thread.platform) else {
                return Ok(false);
            };
            let mut m = current.message.clone();
            let Some(mut sync) = m.metadata.sync else {
                store.delete_job(&key).await?;
                return Ok(true);
            };
            let deleted = m.metadata.deleted_at.is_some();
            let want_pin = m.metadata.pin.is_some() && !deleted;
            let up_to_date = sync.shown == Some(sync.revision) && sync.pinned == want_pin;
            if up_to_date || (deleted && m.metadata.posted.is_empty()) {
                store.delete_job(&key).await?;
                return Ok(true);
            }
            let result: std::result::Result<(), crate::BoxError> = async {
                if deleted {
                    if sync.pinned
                        && let Some(first) = m.metadata.posted.first()
                    {
                        outbox.pin_posted(thread.message(first), false).await?;
                    }
                    outbox.delete_posted(&thread, &m.metadata.posted).await?;
                    m.metadata.posted.clear();
                    sync.pinned = false;
                    sync.shown = Some(sync.revision);
                    return Ok(());
                }
                // The message's files follow its drawn messages, each its own upload; an edit
                // redraws the rest and leaves them (they do not change).
                let file_parts: Vec<MessagePart> = m
                    .parts
                    .iter()
                    .filter(|p| p.as_file().is_some())
                    .cloned()
                    .collect();
                if sync.shown.is_none() {
                    let delivery = Delivery::new(format!("{key}:{}", sync.revision));
                    let files = crate::agent::files::out_files(store, chat, &file_parts).await?;
                    let drawn = self.drawn(chat, &m);
                    let mut posted = if drawn.parts.is_empty() && drawn.metadata.title.is_none() {
                        Vec::new()
                    } else {
                        outbox.post_message(&thread, &drawn, &delivery).await?
                    };
                    let after = posted.len();
                    posted.extend(
                        outbox
                            .deliver_files(&thread, &files, after, &delivery)
                            .await?,
                    );
                    m.metadata.posted = posted;
                    sync.shown = Some(sync.revision);
                } else if sync.shown != Some(sync.revision) {
                    let keep = m.metadata.posted.len().saturating_sub(file_parts.len());
                    let (drawn_ids, file_ids) = m.metadata.posted.split_at(keep);
                    let file_ids = file_ids.to_vec();
                    let drawn = self.drawn(chat, &m);
                    let has_drawn = !drawn.parts.is_empty() || drawn.metadata.title.is_some();
                    let mut posted = match (drawn_ids.is_empty(), has_drawn) {
                        // Files alone until now: the text is a message of its own (after them).
                        (true, true) => {
                            let delivery = Delivery::new(format!("{key}:{}", sync.revision));
                            outbox.post_message(&thread, &drawn, &delivery).await?
                        }
                        (true, false) => Vec::new(),
                        (false, _) => outbox.edit_posted(&thread, drawn_ids, &drawn).await?,
                    };
                    posted.extend(file_ids);
                    m.metadata.posted = posted;
                    sync.shown = Some(sync.revision);
                }
                if sync.pinned != want_pin
                    && let Some(first) = m.metadata.posted.first()
                {
                    outbox.pin_posted(thread.message(first), want_pin).await?;
                    sync.pinned = want_pin;
                }
                Ok(())
            }
            .await;
            m.metadata.sync = Some(sync);
            let failed = result.as_ref().err().map(|e| e.to_string());
            // What was shown is saved even when a later step failed (a post's ids above all).
            match store
                .update_message(&UpdateMessageOp {
                    chat,
                    message: &m,
                    expected_version: current.version,
                    job: None,
                    now: self.now(),
                })
                .await?
            {
                MessageUpdate::Done(saved) => {
                    self.turns.emit_message(chat, &saved.message);
                    if let Some(e) = failed {
                        warn!(%chat, message = message_id, error = %e, "a platform refused an agent message's change");
                        return Ok(false);
                    }
                    store.delete_job(&key).await?;
                    return Ok(true);
                }
                // Changed meanwhile: look again with what was shown kept.
                MessageUpdate::Moved(Some(now)) => {
                    let mut again = now.message.clone();
                    if let Some(s) = &mut again.metadata.sync {
                        s.shown = sync.shown;
                        s.pinned = sync.pinned;
                    }
                    again.metadata.posted = m.metadata.posted.clone();
                    let _ = store
                        .update_message(&UpdateMessageOp {
                            chat,
                            message: &again,
                            expected_version: now.version,
                            job: None,
                            now: self.now(),
                        })
                        .await?;
                    if failed.is_some() {
                        return Ok(false);
                    }
                }
                MessageUpdate::Moved(None) => return Ok(true),
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ToolPart, ToolState};

    fn assistant(parts: Vec<MessagePart>) -> UiMessage {
        UiMessage {
            id: "m".into(),
            role: Role::Assistant,
            parts,
            metadata: Default::default(),
        }
    }

    /// What an agent may edit: its posted messages — never a turn's reply (it has a model), an
    /// ask's question (a tool part) or a deleted message.
    #[test]
    fn only_posted_messages_are_edited() {
        let posted = assistant(vec![MessagePart::text("hi")]);
        assert!(is_posted_message(&posted));
        let mut reply = posted.clone();
        reply.metadata.model = Some("main".into());
        assert!(!is_posted_message(&reply));
        let ask = assistant(vec![MessagePart::Tool(ToolPart {
            tool_name: "question".into(),
            tool_call_id: "c".into(),
            state: ToolState::InputAvailable,
            input: serde_json::json!({}),
            output: None,
            error_text: None,
            expires_at: None,
            approval: None,
        })]);
        assert!(!is_posted_message(&ask));
        let mut gone = posted.clone();
        gone.metadata.deleted_at = Some("2026-12-02T00:00:00Z".into());
        assert!(!is_posted_message(&gone));
        let mut person = posted;
        person.role = Role::User;
        assert!(!is_posted_message(&person));
    }
}
