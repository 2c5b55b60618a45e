//! The chats part: [`ChatStore`] for [`SqliteStore`], and the reads of chats and messages it runs.

use async_trait::async_trait;
use rusqlite::{Connection, params};

use frogbot_core::model::{ChatId, UserId};
use frogbot_core::store::Result;
use frogbot_core::store::*;

use crate::SqliteStore;
use crate::ops::{self, *};

#[async_trait]
impl ChatStore for SqliteStore {
    async fn get_chat(&self, chat: &ChatId) -> Result<Option<ChatRow>> {
        let chat = chat.clone();
        self.read("get_chat", move |c| ops::get_chat(c, &chat))
            .await
    }

    async fn get_channel_chat(&self, platform: &str, thread: &str) -> Result<Option<ChatRow>> {
        let (platform, thread) = (platform.to_string(), thread.to_string());
        self.read("get_channel_chat", move |c| {
            get_channel_chat(c, &platform, &thread)
        })
        .await
    }

    async fn list_chats(&self, owner: Option<&UserId>, limit: u32) -> Result<Vec<ChatRow>> {
        let owner = owner.cloned();
        self.read("list_chats", move |c| list_chats(c, owner.as_ref(), limit))
            .await
    }

    async fn get_message(&self, chat: &ChatId, id: &str) -> Result<Option<StoredMessage>> {
        let (chat, id) = (chat.clone(), id.to_string());
        self.read("get_message", move |c| ops::get_message(c, &chat, &id))
            .await
    }

    async fn list_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
        let chat = chat.clone();
        self.read("list_messages", move |c| list_messages(c, &chat))
            .await
    }

    async fn messages_since(&self, chat: &ChatId, version: i64) -> Result<ChatChanges> {
        let chat = chat.clone();
        self.read("messages_since", move |c| messages_since(c, &chat, version))
            .await
    }

    async fn queued_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
        let chat = chat.clone();
        self.read("queued_messages", move |c| queued_messages(c, &chat))
            .await
    }
}

pub(crate) fn get_channel_chat(c: &Connection, platform: &str, thread: &str) -> R<Option<ChatRow>> {
    opt(
        c,
        concat!(
            "SELECT ",
            chat_cols!(),
            " FROM chats WHERE channel_platform = ?1 AND channel_thread = ?2"
        ),
        [platform, thread],
        chat_row,
    )
}

pub(crate) fn list_chats(c: &Connection, owner: Option<&UserId>, limit: u32) -> R<Vec<ChatRow>> {
    match owner {
        Some(owner) => all(
            c,
            concat!(
                "SELECT ",
                chat_cols!(),
                " FROM chats WHERE owner = ?1 ORDER BY updated_at DESC, chat_id LIMIT ?2"
            ),
            params![owner.as_str(), i64::from(limit)],
            chat_row,
        ),
        None => all(
            c,
            concat!(
                "SELECT ",
                chat_cols!(),
                " FROM chats WHERE owner IS NULL ORDER BY updated_at DESC, chat_id LIMIT ?1"
            ),
            [i64::from(limit)],
            chat_row,
        ),
    }
}

pub(crate) fn list_messages(c: &Connection, chat: &ChatId) -> R<Vec<StoredMessage>> {
    all(
        c,
        concat!(
            "SELECT ",
            msg_cols!(),
            " FROM messages WHERE chat_id = ?1 ORDER BY (position IS NULL), position, sub, seq"
        ),
        [chat.as_str()],
        message_row,
    )
}

pub(crate) fn messages_since(c: &Connection, chat: &ChatId, version: i64) -> R<ChatChanges> {
    // One snapshot for both reads, so the version returned covers exactly the messages returned
    // (on the writer, for an in-memory database, the batch's transaction is that snapshot).
    let tx = if c.is_autocommit() {
        Some(c.unchecked_transaction()?)
    } else {
        None
    };
    let now = opt(
        c,
        "SELECT version FROM chats WHERE chat_id = ?1",
        [chat.as_str()],
        int,
    )?
    .unwrap_or(0);
    let messages = all(
        c,
        concat!(
            "SELECT ",
            msg_cols!(),
            " FROM messages WHERE chat_id = ?1 AND version > ?2 \
             ORDER BY (position IS NULL), position, sub, seq"
        ),
        params![chat.as_str(), version],
        message_row,
    )?;
    if let Some(tx) = tx {
        tx.commit()?;
    }
    Ok(ChatChanges {
        version: now,
        messages,
    })
}

pub(crate) fn queued_messages(c: &Connection, chat: &ChatId) -> R<Vec<StoredMessage>> {
    all(
        c,
        concat!(
            "SELECT ",
            msg_cols!(),
            " FROM messages WHERE chat_id = ?1 AND queued = TRUE ORDER BY seq"
        ),
        [chat.as_str()],
        message_row,
    )
}
