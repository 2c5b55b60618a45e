//! The agent part: [`AgentStore`] for [`PostgresStore`] — binding a chat to an agent, messages
//! posted and updated outside turns, the agent's inbox.

use async_trait::async_trait;

use frogbot_core::model::{ChatId, Delivery};
use frogbot_core::store::*;
use frogbot_core::store::{Result, StoreError};

use crate::PostgresStore;
use crate::ops::*;
use crate::rows::{self, chat_cols, msg_cols};

#[async_trait]
impl AgentStore for PostgresStore {
    async fn bind_agent(&self, op: &BindAgentOp<'_>) -> Result<Bound> {
        let r = async {
            let id = &op.chat.chat_id;
            let mut tx = self.begin().await?;
            let Locked { chat, created } = self
                .lock_chat(&mut tx, id, Some((op.chat, op.now)))
                .await?
                .ok_or_else(|| StoreError::corrupt_msg(format!("chat {id} vanished")))?;
            let bound = match bind_decision(&chat, created, op)? {
                Some(bound) => bound,
                None => {
                    let row = sqlx::query(concat!(
                        "UPDATE chats c SET agent = $2, updated_at = $3 WHERE c.chat_id = $1 RETURNING ",
                        chat_cols!("c")
                    ))
                    .bind(id.as_str())
                    .bind(op.agent)
                    .bind(op.now)
                    .fetch_one(&mut *tx)
                    .await
                    .db(self)?;
                    Bound::Bound(rows::chat(&row)?)
                }
            };
            tx.commit().await.db(self)?;
            Ok(bound)
        }
        .await;
        self.announced(&op.chat.chat_id, r)
    }

    async fn post_message(&self, op: &PostMessageOp<'_>) -> Result<PostedMessage> {
        let r = async {
            let mut tx = self.begin().await?;
            self.lock_chat(&mut tx, op.chat, None)
                .await?
                .ok_or_else(|| StoreError::not_found(Item::Chat, op.chat.as_str()))?;
            let (dup, last_position) = self.message_facts(&mut tx, op.chat, &op.message.id).await?;
            if dup {
                let row = sqlx::query(MESSAGE_BY_ID)
                    .bind(op.chat.as_str())
                    .bind(&op.message.id)
                    .fetch_one(&mut *tx)
                    .await
                    .db(self)?;
                return Ok(PostedMessage::Duplicate(rows::message(&row, "")?));
            }
            let chat = self.bump_chat(&mut tx, op.chat, op.now).await?;
            let saved = self
                .put_message(
                    &mut tx,
                    op.chat,
                    op.message,
                    false,
                    Delivery::Queue,
                    Some(last_position + 1),
                    0,
                    op.now,
                    chat.version,
                )
                .await?;
            if op.inbox {
                sqlx::query("UPDATE messages SET inbox = TRUE WHERE chat_id = $1 AND seq = $2")
                    .bind(op.chat.as_str())
                    .bind(saved.seq)
                    .execute(&mut *tx)
                    .await
                    .db(self)?;
            }
            if let Some(job) = op.job {
                self.enqueue_in(&mut tx, job).await?;
            }
            tx.commit().await.db(self)?;
            Ok(PostedMessage::New(saved))
        }
        .await;
        let r = self.jobs_announced(&[op.job.map(|j| j.run_at)], r);
        self.announced(op.chat, r)
    }

    async fn update_message(&self, op: &UpdateMessageOp<'_>) -> Result<MessageUpdate> {
        let r = async {
            let mut tx = self.begin().await?;
            if self.lock_chat(&mut tx, op.chat, None).await?.is_none() {
                return Ok(MessageUpdate::Moved(None));
            }
            let current = sqlx::query(MESSAGE_BY_ID)
                .bind(op.chat.as_str())
                .bind(&op.message.id)
                .fetch_optional(&mut *tx)
                .await
                .db(self)?
                .map(|r| rows::message(&r, ""))
                .transpose()?;
            let Some(current) = current else {
                return Ok(MessageUpdate::Moved(None));
            };
            if current.queued || current.version != op.expected_version {
                return Ok(MessageUpdate::Moved(Some(Box::new(current))));
            }
            let mut message = op.message.clone();
            message.role = current.message.role;
            message.metadata.author = current.message.metadata.author.clone();
            let version = self.bump_chat(&mut tx, op.chat, op.now).await?.version;
            let row = sqlx::query(concat!(
                "UPDATE messages m SET body = $3, updated_at = $4, version = $5 \
                 WHERE m.chat_id = $1 AND m.seq = $2 RETURNING ",
                msg_cols!("m", "")
            ))
            .bind(op.chat.as_str())
            .bind(current.seq)
            .bind(rows::message_body(&message)?)
            .bind(op.now)
            .bind(version)
            .fetch_one(&mut *tx)
            .await
            .db(self)?;
            let saved = rows::message(&row, "")?;
            if let Some(job) = op.job {
                self.enqueue_in(&mut tx, job).await?;
            }
            tx.commit().await.db(self)?;
            Ok(MessageUpdate::Done(Box::new(saved)))
        }
        .await;
        let r = self.jobs_announced(&[op.job.map(|j| j.run_at)], r);
        self.announced(op.chat, r)
    }

    async fn take_inbox(&self, op: &InboxOp<'_>) -> Result<Vec<StoredMessage>> {
        let mut tx = self.begin().await?;
        // Two readers never take the same message: the rows are locked, a locked one skipped.
        let found = sqlx::query(concat!(
            "SELECT ",
            msg_cols!("m", ""),
            " FROM messages m JOIN chats c ON c.chat_id = m.chat_id \
             WHERE m.inbox AND c.agent = $1 AND ($2::text IS NULL OR m.chat_id = $2::text) \
             ORDER BY m.seq LIMIT $3 FOR UPDATE OF m SKIP LOCKED"
        ))
        .bind(op.agent)
        .bind(op.chat.map(ChatId::as_str))
        .bind(i64::from(op.limit))
        .fetch_all(&mut *tx)
        .await
        .db(self)?;
        let mut out = Vec::with_capacity(found.len());
        for row in found {
            let mut m = rows::message(&row, "")?;
            inbox_seen(&mut m.message);
            let version = self.bump_chat(&mut tx, &m.chat_id, op.now).await?.version;
            sqlx::query(
                "UPDATE messages SET inbox = FALSE, body = $2, updated_at = $3, version = $4 \
                 WHERE seq = $1",
            )
            .bind(m.seq)
            .bind(rows::message_body(&m.message)?)
            .bind(op.now)
            .bind(version)
            .execute(&mut *tx)
            .await
            .db(self)?;
            m.version = version;
            out.push(m);
        }
        tx.commit().await.db(self)?;
        Ok(out)
    }
}
