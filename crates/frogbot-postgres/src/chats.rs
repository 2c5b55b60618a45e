//! The chats part: [`ChatStore`] for [`PostgresStore`], the reads of chats and messages.

use async_trait::async_trait;
use sqlx::Row;

use frogbot_core::model::{ChatId, UserId};
use frogbot_core::store::Result;
use frogbot_core::store::*;

use crate::PostgresStore;
use crate::ops::*;
use crate::rows::{self, chat_cols, msg_cols};

#[async_trait]
impl ChatStore for PostgresStore {
    async fn get_chat(&self, chat: &ChatId) -> Result<Option<ChatRow>> {
        self.opt(
            sqlx::query(concat!(
                "SELECT ",
                chat_cols!("c"),
                " FROM chats c WHERE c.chat_id = $1"
            ))
            .bind(chat.as_str()),
            rows::chat,
        )
        .await
    }

    async fn get_channel_chat(&self, platform: &str, thread: &str) -> Result<Option<ChatRow>> {
        self.opt(
            sqlx::query(concat!(
                "SELECT ",
                chat_cols!("c"),
                " FROM chats c WHERE c.channel_platform = $1 AND c.channel_thread = $2"
            ))
            .bind(platform)
            .bind(thread),
            rows::chat,
        )
        .await
    }

    async fn list_chats(&self, owner: Option<&UserId>, limit: u32) -> Result<Vec<ChatRow>> {
        self.all(
            sqlx::query(concat!(
                "SELECT ",
                chat_cols!("c"),
                " FROM chats c WHERE c.owner IS NOT DISTINCT FROM $1 \
              ORDER BY c.updated_at DESC, c.chat_id LIMIT $2"
            ))
            .bind(user_str(owner))
            .bind(i64::from(limit)),
            rows::chat,
        )
        .await
    }

    async fn get_message(&self, chat: &ChatId, id: &str) -> Result<Option<StoredMessage>> {
        self.opt(
            sqlx::query(MESSAGE_BY_ID).bind(chat.as_str()).bind(id),
            |r| rows::message(r, ""),
        )
        .await
    }

    async fn list_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
        self.all(
            sqlx::query(concat!(
                "SELECT ",
                msg_cols!("m", ""),
                " FROM messages m WHERE m.chat_id = $1 \
              ORDER BY (m.position IS NULL), m.position, m.sub, m.seq"
            ))
            .bind(chat.as_str()),
            |r| rows::message(r, ""),
        )
        .await
    }

    async fn messages_since(&self, chat: &ChatId, version: i64) -> Result<ChatChanges> {
        // One statement: the chat's version and the messages newer than `version` from the same
        // snapshot, so none written at or below the returned version can be missed later.
        let rows = sqlx::query(concat!(
            "SELECT c.version AS chat_version, ",
            msg_cols!("m", "m_"),
            " FROM chats c LEFT JOIN messages m ON m.chat_id = c.chat_id AND m.version > $2 \
              WHERE c.chat_id = $1 \
              ORDER BY (m.position IS NULL), m.position, m.sub, m.seq"
        ))
        .bind(chat.as_str())
        .bind(version)
        .fetch_all(&self.pool)
        .await
        .db(self)?;
        let Some(first) = rows.first() else {
            return Ok(ChatChanges {
                version: 0,
                messages: vec![],
            });
        };
        Ok(ChatChanges {
            version: first.try_get("chat_version").db(self)?,
            messages: rows
                .iter()
                .map(|r| rows::message_opt(r, "m_"))
                .filter_map(Result::transpose)
                .collect::<Result<_>>()?,
        })
    }

    async fn queued_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
        self.all(
            sqlx::query(concat!(
                "SELECT ",
                msg_cols!("m", ""),
                " FROM messages m WHERE m.chat_id = $1 AND m.queued ORDER BY m.seq"
            ))
            .bind(chat.as_str()),
            |r| rows::message(r, ""),
        )
        .await
    }
}
