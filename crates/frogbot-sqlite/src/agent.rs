//! The agent part: [`AgentStore`] for [`SqliteStore`] — binding a chat to an agent, messages posted
//! and updated outside turns, the agent's inbox.

use async_trait::async_trait;
use rusqlite::{Connection, params};

use frogbot_core::model::{ChatId, Delivery, UserId};
use frogbot_core::store::*;
use frogbot_core::store::{Result, StoreError};

use crate::SqliteStore;
use crate::ops::{self, *};

#[async_trait]
impl AgentStore for SqliteStore {
    async fn bind_agent(&self, op: &BindAgentOp<'_>) -> Result<Bound> {
        moved!(self.write("bind_agent"), op => BindAgentOp {
            r chat, r agent, v existing, v now
        }, |c, op| bind_agent(c, &op))
    }

    async fn post_message(&self, op: &PostMessageOp<'_>) -> Result<PostedMessage> {
        let body = ops::message_body(op.message)?;
        moved!(self.write("post_message"), op => PostMessageOp {
            r chat, r message, v inbox, o job, v now
        }, |c, op| post_message(c, &op, &body))
    }

    async fn update_message(&self, op: &UpdateMessageOp<'_>) -> Result<MessageUpdate> {
        let body = ops::message_body(op.message)?;
        moved!(self.write("update_message"), op => UpdateMessageOp {
            r chat, r message, v expected_version, o job, v now
        }, |c, op| update_message(c, &op, &body))
    }

    async fn take_inbox(&self, op: &InboxOp<'_>) -> Result<Vec<StoredMessage>> {
        moved!(self.write("take_inbox"), op => InboxOp {
            r agent, o chat, v limit, v now
        }, |c, op| take_inbox(c, &op))
    }
}

pub(crate) fn bind_agent(c: &Connection, op: &BindAgentOp<'_>) -> R<Bound> {
    let id = &op.chat.chat_id;
    let created = exec(
        c,
        "INSERT INTO chats (chat_id, owner, channel_platform, channel_thread, created_at, updated_at, agent) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6) ON CONFLICT DO NOTHING",
        params![
            id.as_str(),
            op.chat.owner.as_ref().map(UserId::as_str),
            op.chat.channel.as_ref().map(|ch| ch.platform.as_str()),
            op.chat.channel.as_ref().map(|ch| ch.thread.as_str()),
            op.now,
            op.agent,
        ],
    )? == 1;
    let Some(chat) = get_chat(c, id)? else {
        return Err(E::Core(StoreError::ChannelChat {
            chat_id: id.clone(),
            reason: "is not its channel thread's chat: the thread has a chat of another id",
        }));
    };
    if created {
        return Ok(Bound::Bound(chat));
    }
    match bind_decision(&chat, created, op)? {
        Some(bound) => Ok(bound),
        None => {
            exec(
                c,
                "UPDATE chats SET agent = ?2, updated_at = ?3 WHERE chat_id = ?1",
                params![id.as_str(), op.agent, op.now],
            )?;
            Ok(Bound::Bound(chat_after(c, id)?))
        }
    }
}

pub(crate) fn post_message(c: &Connection, op: &PostMessageOp<'_>, body: &str) -> R<PostedMessage> {
    if let Some(m) = get_message(c, op.chat, &op.message.id)? {
        return Ok(PostedMessage::Duplicate(m));
    }
    let position = next_position(c, op.chat)?;
    let version = bump(c, op.chat)?;
    let seq = opt(
        c,
        "INSERT INTO messages (chat_id, id, role, author, queued, delivery, position, sub, body, \
                               created_at, updated_at, version, inbox) \
         VALUES (?1, ?2, ?3, ?4, FALSE, 'queue', ?5, 0, ?6, ?7, ?7, ?8, ?9) RETURNING seq",
        params![
            op.chat.as_str(),
            op.message.id,
            op.message.role.as_str(),
            op.message.metadata.author.as_ref().map(UserId::as_str),
            position,
            body,
            op.now,
            version,
            op.inbox,
        ],
        int,
    )?
    .ok_or_else(|| E::Core(StoreError::corrupt_msg("insert returned nothing")))?;
    touch(c, op.chat, op.now)?;
    if let Some(job) = op.job {
        enqueue_job(c, job)?;
    }
    Ok(PostedMessage::New(stored(
        op.chat,
        op.message,
        seq,
        Some(position),
        0,
        false,
        Delivery::Queue,
        version,
    )))
}

pub(crate) fn update_message(
    c: &Connection,
    op: &UpdateMessageOp<'_>,
    body: &str,
) -> R<MessageUpdate> {
    let Some(current) = get_message(c, op.chat, &op.message.id)? else {
        return Ok(MessageUpdate::Moved(None));
    };
    if current.queued || current.version != op.expected_version {
        return Ok(MessageUpdate::Moved(Some(Box::new(current))));
    }
    let version = bump(c, op.chat)?;
    exec(
        c,
        "UPDATE messages SET body = ?3, updated_at = ?4, version = ?5 WHERE chat_id = ?1 AND seq = ?2",
        params![op.chat.as_str(), current.seq, body, op.now, version],
    )?;
    if let Some(job) = op.job {
        enqueue_job(c, job)?;
    }
    let mut message = op.message.clone();
    message.role = current.message.role;
    message.metadata.author = current.message.metadata.author.clone();
    Ok(MessageUpdate::Done(Box::new(stored(
        op.chat,
        &message,
        current.seq,
        current.position,
        current.sub,
        false,
        current.delivery,
        version,
    ))))
}

pub(crate) fn take_inbox(c: &Connection, op: &InboxOp<'_>) -> R<Vec<StoredMessage>> {
    let found = all(
        c,
        "SELECT m.seq, m.chat_id, m.id, m.role, m.author, m.queued, m.delivery, m.position, m.sub, \
                m.body, m.version \
         FROM messages m JOIN chats c ON c.chat_id = m.chat_id \
         WHERE m.inbox = TRUE AND c.agent = ?1 AND (?2 IS NULL OR m.chat_id = ?2) \
         ORDER BY m.seq LIMIT ?3",
        params![op.agent, op.chat.map(ChatId::as_str), i64::from(op.limit)],
        message_row,
    )?;
    let mut out = Vec::with_capacity(found.len());
    for mut m in found {
        inbox_seen(&mut m.message);
        let body = message_body(&m.message).map_err(E::Core)?;
        let version = bump(c, &m.chat_id)?;
        exec(
            c,
            "UPDATE messages SET inbox = FALSE, body = ?2, updated_at = ?3, version = ?4 WHERE seq = ?1",
            params![m.seq, body, op.now, version],
        )?;
        m.version = version;
        out.push(m);
    }
    Ok(out)
}
