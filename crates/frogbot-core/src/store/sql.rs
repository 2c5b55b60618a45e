//! The sqlx implementations of [`Store`]. The SQL is written once (placeholders `$N`, `ON CONFLICT`,
//! `RETURNING` and `IS NOT DISTINCT FROM` mean the same in SQLite and PostgreSQL) and instantiated
//! for each dialect by `impl_sql_store!`; what differs (how a write transaction starts, how a job is
//! claimed, the migrations) is spelled out per backend.

use async_trait::async_trait;
use serde_json::Value;

use super::*;
use crate::error::{Error, Result};
use crate::model::{
    ChannelRef, ChatId, Delivery, MessageStatus, Millis, QuestionOutcome, QuestionRecord, Role,
    UiMessage, UserId,
};

/// `sub` of a turn's reply: after the turn's user message (0) and its joined steers (their `seq`).
const REPLY_SUB: i64 = 1 << 52;

macro_rules! chat_cols {
    () => {
        "chat_id, owner, channel_platform, channel_thread, created_at, updated_at, \
         awaiting_message_id, lease_holder, lease_token, lease_until, driver"
    };
}
macro_rules! msg_cols {
    () => {
        "seq, chat_id, id, role, author, queued, delivery, position, body"
    };
}
macro_rules! question_cols {
    () => {
        "chat_id, tool_call_id, message_id, call_index, input, record, rendered, posting, outcome, \
         actor, outcome_at, closed, answer_deadline, created_at, updated_at, expires_at"
    };
}
macro_rules! job_cols {
    () => {
        "id, kind, key, payload, run_at, attempts, claimed_by, claim_until, last_error, dead, generation"
    };
}

/// Takes a chat's free turn lease for a new turn when no question waits ($1 chat, $2 holder,
/// $3 expiry, $4 driver, $5 now).
const START_TURN: &str = "UPDATE chats SET lease_holder = $2, lease_token = lease_token + 1, \
     lease_until = $3, driver = $4, updated_at = $5 \
     WHERE chat_id = $1 AND awaiting_message_id IS NULL AND lease_holder IS NULL \
     RETURNING lease_token";
/// Takes over a lease that ran out without being released (its turn was interrupted); same
/// parameters as [`START_TURN`]. Tried when the free take finds the lease held, so the caller
/// learns which of the two happened from which statement matched.
const TAKE_EXPIRED: &str = "UPDATE chats SET lease_holder = $2, lease_token = lease_token + 1, \
     lease_until = $3, driver = $4, updated_at = $5 \
     WHERE chat_id = $1 AND awaiting_message_id IS NULL \
       AND lease_holder IS NOT NULL AND lease_until <= $5 \
     RETURNING lease_token";

#[cfg(feature = "sqlite")]
const CLAIM_JOB_SQLITE: &str = concat!(
    "UPDATE jobs SET claimed_by = $1, claim_until = $2, attempts = attempts + 1 \
     WHERE id = (SELECT id FROM jobs WHERE NOT dead AND run_at <= $3 \
                 AND (claim_until IS NULL OR claim_until <= $3) ORDER BY run_at, id LIMIT 1) \
       AND NOT dead AND run_at <= $3 AND (claim_until IS NULL OR claim_until <= $3) \
     RETURNING ",
    job_cols!()
);
#[cfg(feature = "postgres")]
const CLAIM_JOB_POSTGRES: &str = concat!(
    "UPDATE jobs SET claimed_by = $1, claim_until = $2, attempts = attempts + 1 \
     WHERE id = (SELECT id FROM jobs WHERE NOT dead AND run_at <= $3 \
                 AND (claim_until IS NULL OR claim_until <= $3) ORDER BY run_at, id LIMIT 1 \
                 FOR UPDATE SKIP LOCKED) \
       AND NOT dead AND run_at <= $3 AND (claim_until IS NULL OR claim_until <= $3) \
     RETURNING ",
    job_cols!()
);

/// Whether the writer of a new message may write to the existing chat `row`: see
/// [`Store::create_chat`]. Shared by every backend, so they decide alike.
pub(crate) fn check_writer(row: &ChatRow, chat: &NewChat) -> Result<()> {
    if row.channel != chat.channel {
        return Err(Error::ChannelChat(match &row.channel {
            Some(_) => format!("chat {} is continued only from its channel", row.chat_id),
            None => format!("chat {} is not a chat of this channel thread", row.chat_id),
        }));
    }
    if row.channel.is_none()
        && let Some(owner) = &row.owner
        && chat.owner.as_ref() != Some(owner)
    {
        return Err(Error::Forbidden(format!(
            "chat {} belongs to another user",
            row.chat_id
        )));
    }
    Ok(())
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String> {
    Ok(serde_json::to_string(v)?)
}

fn from_json<T: serde::de::DeserializeOwned>(what: &str, s: &str) -> Result<T> {
    serde_json::from_str(s).map_err(|e| Error::Corrupt(format!("{what}: {e}")))
}

fn delivery_str(d: Delivery) -> &'static str {
    d.as_str()
}

fn parse_delivery(s: &str) -> Result<Delivery> {
    match s {
        "queue" => Ok(Delivery::Queue),
        "steer" => Ok(Delivery::Steer),
        other => Err(Error::Corrupt(format!("delivery {other:?}"))),
    }
}

/// The body stored for a message: the message without the column-owned `status` and `delivery`.
fn message_body(m: &UiMessage) -> Result<String> {
    let mut m = m.clone();
    m.metadata.status = None;
    m.metadata.delivery = None;
    to_json(&m)
}

fn chat_id(s: String) -> Result<ChatId> {
    ChatId::new(s).map_err(|e| Error::Corrupt(e.to_string()))
}

macro_rules! impl_sql_store {
    ($store:ident, $db:ty, $row:ty, $claim_sql:expr) => {
        impl $store {
            fn chat_from_row(r: &$row) -> Result<ChatRow> {
                use sqlx::Row;
                let platform: Option<String> = r.try_get("channel_platform")?;
                let thread: Option<String> = r.try_get("channel_thread")?;
                let holder: Option<String> = r.try_get("lease_holder")?;
                Ok(ChatRow {
                    chat_id: chat_id(r.try_get("chat_id")?)?,
                    owner: r.try_get::<Option<String>, _>("owner")?.map(UserId),
                    channel: match (platform, thread) {
                        (Some(platform), Some(thread)) => Some(ChannelRef { platform, thread }),
                        _ => None,
                    },
                    created_at: r.try_get("created_at")?,
                    updated_at: r.try_get("updated_at")?,
                    awaiting_message_id: r.try_get("awaiting_message_id")?,
                    lease: match holder {
                        Some(holder) => Some(LeaseInfo {
                            holder,
                            token: r.try_get("lease_token")?,
                            expires_at: r.try_get("lease_until")?,
                            driver: r.try_get::<Option<String>, _>("driver")?.map(UserId),
                        }),
                        None => None,
                    },
                })
            }

            fn message_from_row(r: &$row) -> Result<StoredMessage> {
                use sqlx::Row;
                let body: String = r.try_get("body")?;
                let mut message: UiMessage = from_json("message body", &body)?;
                let queued: bool = r.try_get("queued")?;
                let delivery = parse_delivery(&r.try_get::<String, _>("delivery")?)?;
                if queued {
                    message.metadata.status = Some(MessageStatus::Queued);
                    message.metadata.delivery = Some(delivery);
                }
                let role: String = r.try_get("role")?;
                debug_assert_eq!(role, message.role.as_str());
                Ok(StoredMessage {
                    chat_id: chat_id(r.try_get("chat_id")?)?,
                    message,
                    seq: r.try_get("seq")?,
                    position: r.try_get("position")?,
                    queued,
                    delivery,
                })
            }

            fn question_from_row(r: &$row) -> Result<QuestionRow> {
                use sqlx::Row;
                let outcome: Option<String> = r.try_get("outcome")?;
                let actor: Option<String> = r.try_get("actor")?;
                Ok(QuestionRow {
                    chat_id: chat_id(r.try_get("chat_id")?)?,
                    tool_call_id: r.try_get("tool_call_id")?,
                    message_id: r.try_get("message_id")?,
                    call_index: r.try_get("call_index")?,
                    input: from_json("question input", &r.try_get::<String, _>("input")?)?,
                    record: from_json("question record", &r.try_get::<String, _>("record")?)?,
                    rendered: r.try_get("rendered")?,
                    posting: r.try_get("posting")?,
                    outcome: outcome
                        .map(|o| from_json::<QuestionOutcome>("question outcome", &o))
                        .transpose()?,
                    actor: actor.map(|a| from_json("question actor", &a)).transpose()?,
                    outcome_at: r.try_get("outcome_at")?,
                    closed: r.try_get("closed")?,
                    answer_deadline: r.try_get("answer_deadline")?,
                    created_at: r.try_get("created_at")?,
                    updated_at: r.try_get("updated_at")?,
                    expires_at: r.try_get("expires_at")?,
                })
            }

            fn job_from_row(r: &$row) -> Result<Job> {
                use sqlx::Row;
                Ok(Job {
                    id: r.try_get("id")?,
                    kind: r.try_get("kind")?,
                    key: r.try_get("key")?,
                    payload: from_json::<Value>("job payload", &r.try_get::<String, _>("payload")?)?,
                    run_at: r.try_get("run_at")?,
                    attempts: r.try_get("attempts")?,
                    claimed_by: r.try_get("claimed_by")?,
                    claim_until: r.try_get("claim_until")?,
                    last_error: r.try_get("last_error")?,
                    dead: r.try_get("dead")?,
                    generation: r.try_get("generation")?,
                })
            }

            /// Fences a write transaction with a turn lease: touches the chat, or fails with
            /// `LeaseLost`. In PostgreSQL this also locks the chat row until the transaction ends.
            async fn fence(
                tx: &mut sqlx::Transaction<'static, $db>,
                lease: &Lease,
                now: Millis,
            ) -> Result<()> {
                let done = sqlx::query(
                    "UPDATE chats SET updated_at = $4 \
                     WHERE chat_id = $1 AND lease_holder = $2 AND lease_token = $3",
                )
                .bind(lease.chat_id.as_str())
                .bind(&lease.holder)
                .bind(lease.token)
                .bind(now)
                .execute(&mut **tx)
                .await?;
                if done.rows_affected() == 1 {
                    Ok(())
                } else {
                    Err(Error::LeaseLost {
                        chat_id: lease.chat_id.to_string(),
                    })
                }
            }

            async fn next_position(
                tx: &mut sqlx::Transaction<'static, $db>,
                chat: &ChatId,
            ) -> Result<i64> {
                use sqlx::Row;
                let row = sqlx::query(
                    "SELECT COALESCE(MAX(position), 0) + 1 AS next FROM messages WHERE chat_id = $1",
                )
                .bind(chat.as_str())
                .fetch_one(&mut **tx)
                .await?;
                Ok(row.try_get::<i64, _>("next")?)
            }

            /// Inserts or replaces a message of a turn at (`position`, `sub`), no longer queued.
            async fn put_turn_message(
                tx: &mut sqlx::Transaction<'static, $db>,
                chat: &ChatId,
                message: &UiMessage,
                position: i64,
                sub: i64,
                now: Millis,
            ) -> Result<StoredMessage> {
                let row = sqlx::query(concat!(
                    "INSERT INTO messages (chat_id, id, role, author, queued, delivery, position, sub, body, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, FALSE, 'queue', $5, $6, $7, $8, $8) \
                     ON CONFLICT (chat_id, id) DO UPDATE SET role = excluded.role, author = excluded.author, \
                        queued = FALSE, position = excluded.position, sub = excluded.sub, body = excluded.body, \
                        updated_at = excluded.updated_at \
                     RETURNING ", msg_cols!()
                ))
                .bind(chat.as_str())
                .bind(&message.id)
                .bind(message.role.as_str())
                .bind(message.metadata.author.as_ref().map(UserId::as_str))
                .bind(position)
                .bind(sub)
                .bind(message_body(message)?)
                .bind(now)
                .fetch_one(&mut **tx)
                .await?;
                Self::message_from_row(&row)
            }

            async fn take_lease(
                &self,
                sql: &'static str,
                chat: &ChatId,
                awaiting: Option<&str>,
                req: &LeaseRequest,
            ) -> Result<Option<Lease>> {
                use sqlx::Row;
                let expires_at = req.now + req.ttl_ms;
                let query = sqlx::query(sql)
                    .bind(chat.as_str())
                    .bind(&req.holder)
                    .bind(expires_at)
                    .bind(req.driver.as_ref().map(UserId::as_str))
                    .bind(req.now);
                let query = match awaiting {
                    Some(message_id) => query.bind(message_id),
                    None => query,
                };
                let row = query.fetch_optional(self.writer()).await?;
                Ok(match row {
                    Some(r) => Some(Lease {
                        chat_id: chat.clone(),
                        holder: req.holder.clone(),
                        token: r.try_get("lease_token")?,
                        expires_at,
                        driver: req.driver.clone(),
                        taken_over: sql == TAKE_EXPIRED,
                    }),
                    None => None,
                })
            }
        }

        #[async_trait]
        impl Store for $store {
            fn backend(&self) -> Backend {
                Self::BACKEND
            }

            async fn ping(&self) -> Result<()> {
                sqlx::query("SELECT 1").execute(self.reader()).await?;
                Ok(())
            }

            async fn create_chat(&self, chat: &NewChat, now: Millis) -> Result<(ChatRow, bool)> {
                let inserted = sqlx::query(concat!(
                    "INSERT INTO chats (chat_id, owner, channel_platform, channel_thread, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (chat_id) DO NOTHING RETURNING ",
                    chat_cols!()
                ))
                .bind(chat.chat_id.as_str())
                .bind(chat.owner.as_ref().map(UserId::as_str))
                .bind(chat.channel.as_ref().map(|c| c.platform.as_str()))
                .bind(chat.channel.as_ref().map(|c| c.thread.as_str()))
                .bind(now)
                .fetch_optional(self.writer())
                .await?;
                if let Some(row) = inserted {
                    return Ok((Self::chat_from_row(&row)?, true));
                }
                let row = self
                    .get_chat(&chat.chat_id)
                    .await?
                    .ok_or_else(|| Error::Corrupt("chat vanished after insert".into()))?;
                check_writer(&row, chat)?;
                Ok((row, false))
            }

            async fn get_channel_chat(&self, platform: &str, thread: &str) -> Result<Option<ChatRow>> {
                let row = sqlx::query(concat!(
                    "SELECT ", chat_cols!(),
                    " FROM chats WHERE channel_platform = $1 AND channel_thread = $2"
                ))
                .bind(platform)
                .bind(thread)
                .fetch_optional(self.reader())
                .await?;
                row.as_ref().map(Self::chat_from_row).transpose()
            }

            async fn get_chat(&self, chat: &ChatId) -> Result<Option<ChatRow>> {
                let row = sqlx::query(concat!("SELECT ", chat_cols!(), " FROM chats WHERE chat_id = $1"))
                    .bind(chat.as_str())
                    .fetch_optional(self.reader())
                    .await?;
                row.as_ref().map(Self::chat_from_row).transpose()
            }

            async fn list_chats(&self, owner: Option<&UserId>, limit: u32) -> Result<Vec<ChatRow>> {
                let rows = match owner {
                    Some(owner) => {
                        sqlx::query(concat!(
                            "SELECT ", chat_cols!(),
                            " FROM chats WHERE owner = $1 ORDER BY updated_at DESC, chat_id LIMIT $2"
                        ))
                        .bind(owner.as_str())
                        .bind(i64::from(limit))
                        .fetch_all(self.reader())
                        .await?
                    }
                    None => {
                        sqlx::query(concat!(
                            "SELECT ", chat_cols!(),
                            " FROM chats WHERE owner IS NULL ORDER BY updated_at DESC, chat_id LIMIT $1"
                        ))
                        .bind(i64::from(limit))
                        .fetch_all(self.reader())
                        .await?
                    }
                };
                rows.iter().map(Self::chat_from_row).collect()
            }

            async fn get_message(&self, chat: &ChatId, id: &str) -> Result<Option<StoredMessage>> {
                let row = sqlx::query(concat!(
                    "SELECT ", msg_cols!(), " FROM messages WHERE chat_id = $1 AND id = $2"
                ))
                .bind(chat.as_str())
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
                row.as_ref().map(Self::message_from_row).transpose()
            }

            async fn list_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
                let rows = sqlx::query(concat!(
                    "SELECT ", msg_cols!(),
                    " FROM messages WHERE chat_id = $1 ORDER BY (position IS NULL), position, sub, seq"
                ))
                .bind(chat.as_str())
                .fetch_all(self.reader())
                .await?;
                rows.iter().map(Self::message_from_row).collect()
            }

            async fn messages_since(&self, chat: &ChatId, since: Millis) -> Result<Vec<StoredMessage>> {
                let rows = sqlx::query(concat!(
                    "SELECT ", msg_cols!(),
                    " FROM messages WHERE chat_id = $1 AND updated_at >= $2 \
                     ORDER BY (position IS NULL), position, sub, seq"
                ))
                .bind(chat.as_str())
                .bind(since)
                .fetch_all(self.reader())
                .await?;
                rows.iter().map(Self::message_from_row).collect()
            }

            async fn enqueue_message(
                &self,
                chat: &ChatId,
                message: &UiMessage,
                delivery: Delivery,
                now: Millis,
            ) -> Result<StoredMessage> {
                let mut tx = self.begin_write().await?;
                let row = sqlx::query(concat!(
                    "INSERT INTO messages (chat_id, id, role, author, queued, delivery, position, sub, body, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, TRUE, $5, NULL, 0, $6, $7, $7) \
                     ON CONFLICT (chat_id, id) DO NOTHING RETURNING ", msg_cols!()
                ))
                .bind(chat.as_str())
                .bind(&message.id)
                .bind(message.role.as_str())
                .bind(message.metadata.author.as_ref().map(UserId::as_str))
                .bind(delivery_str(delivery))
                .bind(message_body(message)?)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(row) = row else {
                    return Err(Error::InvalidInput(format!(
                        "chat {chat} already has a message {:?}",
                        message.id
                    )));
                };
                sqlx::query("UPDATE chats SET updated_at = $2 WHERE chat_id = $1")
                    .bind(chat.as_str())
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                let stored = Self::message_from_row(&row)?;
                tx.commit().await?;
                Ok(stored)
            }

            async fn queued_messages(&self, chat: &ChatId) -> Result<Vec<StoredMessage>> {
                let rows = sqlx::query(concat!(
                    "SELECT ", msg_cols!(),
                    " FROM messages WHERE chat_id = $1 AND queued = TRUE ORDER BY seq"
                ))
                .bind(chat.as_str())
                .fetch_all(self.reader())
                .await?;
                rows.iter().map(Self::message_from_row).collect()
            }

            async fn edit_queued(
                &self,
                chat: &ChatId,
                id: &str,
                by: Option<&UserId>,
                edit: &QueuedEdit,
                now: Millis,
            ) -> Result<QueuedChange> {
                let mut tx = self.begin_write().await?;
                let row = sqlx::query(concat!(
                    "SELECT ", msg_cols!(), " FROM messages WHERE chat_id = $1 AND id = $2"
                ))
                .bind(chat.as_str())
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(row) = row else { return Ok(QueuedChange::NotFound) };
                let current = Self::message_from_row(&row)?;
                if current.message.role != Role::User || current.author() != by {
                    return Ok(if current.queued { QueuedChange::Forbidden } else { QueuedChange::NotQueued });
                }
                if !current.queued {
                    return Ok(QueuedChange::NotQueued);
                }
                let mut message = current.message.clone();
                if let Some(parts) = &edit.parts {
                    message.parts = parts.clone();
                }
                let delivery = edit.delivery.unwrap_or(current.delivery);
                let row = sqlx::query(concat!(
                    "UPDATE messages SET body = $3, delivery = $4, updated_at = $5 \
                     WHERE chat_id = $1 AND seq = $2 AND queued = TRUE RETURNING ", msg_cols!()
                ))
                .bind(chat.as_str())
                .bind(current.seq)
                .bind(message_body(&message)?)
                .bind(delivery_str(delivery))
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(row) = row else { return Ok(QueuedChange::NotQueued) };
                let stored = Self::message_from_row(&row)?;
                tx.commit().await?;
                Ok(QueuedChange::Done(Some(Box::new(stored))))
            }

            async fn delete_queued(
                &self,
                chat: &ChatId,
                id: &str,
                by: Option<&UserId>,
            ) -> Result<QueuedChange> {
                let mut tx = self.begin_write().await?;
                let row = sqlx::query(concat!(
                    "SELECT ", msg_cols!(), " FROM messages WHERE chat_id = $1 AND id = $2"
                ))
                .bind(chat.as_str())
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(row) = row else { return Ok(QueuedChange::NotFound) };
                let current = Self::message_from_row(&row)?;
                if current.message.role != Role::User || current.author() != by {
                    return Ok(if current.queued { QueuedChange::Forbidden } else { QueuedChange::NotQueued });
                }
                let done = sqlx::query("DELETE FROM messages WHERE chat_id = $1 AND seq = $2 AND queued = TRUE")
                    .bind(chat.as_str())
                    .bind(current.seq)
                    .execute(&mut *tx)
                    .await?;
                if done.rows_affected() == 0 {
                    return Ok(QueuedChange::NotQueued);
                }
                tx.commit().await?;
                Ok(QueuedChange::Done(None))
            }

            async fn try_start_turn(&self, chat: &ChatId, req: &LeaseRequest) -> Result<Option<Lease>> {
                if let Some(lease) = self.take_lease(START_TURN, chat, None, req).await? {
                    return Ok(Some(lease));
                }
                self.take_lease(TAKE_EXPIRED, chat, None, req).await
            }

            async fn expired_leases(&self, now: Millis, limit: u32) -> Result<Vec<ChatId>> {
                use sqlx::Row;
                let rows = sqlx::query(
                    "SELECT chat_id FROM chats \
                     WHERE lease_holder IS NOT NULL AND lease_until <= $1 AND awaiting_message_id IS NULL \
                     ORDER BY lease_until LIMIT $2",
                )
                .bind(now)
                .bind(i64::from(limit))
                .fetch_all(self.reader())
                .await?;
                rows.iter()
                    .map(|r| chat_id(r.try_get::<String, _>("chat_id")?))
                    .collect()
            }

            async fn expire_lease(&self, lease: &Lease, now: Millis) -> Result<()> {
                let done = sqlx::query(
                    "UPDATE chats SET lease_until = $4 \
                     WHERE chat_id = $1 AND lease_holder = $2 AND lease_token = $3",
                )
                .bind(lease.chat_id.as_str())
                .bind(&lease.holder)
                .bind(lease.token)
                .bind(now)
                .execute(self.writer())
                .await?;
                if done.rows_affected() == 1 {
                    Ok(())
                } else {
                    Err(Error::LeaseLost { chat_id: lease.chat_id.to_string() })
                }
            }

            async fn try_resume_turn(
                &self,
                chat: &ChatId,
                awaiting_message_id: &str,
                req: &LeaseRequest,
            ) -> Result<Option<Lease>> {
                self.take_lease(
                    "UPDATE chats SET lease_holder = $2, lease_token = lease_token + 1, lease_until = $3, \
                            driver = $4, updated_at = $5, awaiting_message_id = NULL \
                     WHERE chat_id = $1 AND awaiting_message_id = $6 \
                       AND (lease_holder IS NULL OR lease_until <= $5) \
                     RETURNING lease_token",
                    chat,
                    Some(awaiting_message_id),
                    req,
                )
                .await
            }

            async fn clear_awaiting(
                &self,
                chat: &ChatId,
                awaiting_message_id: &str,
                now: Millis,
            ) -> Result<bool> {
                let done = sqlx::query(
                    "UPDATE chats SET awaiting_message_id = NULL, updated_at = $3 \
                     WHERE chat_id = $1 AND awaiting_message_id = $2 \
                       AND (lease_holder IS NULL OR lease_until <= $3)",
                )
                .bind(chat.as_str())
                .bind(awaiting_message_id)
                .bind(now)
                .execute(self.writer())
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn renew_lease(&self, lease: &mut Lease, ttl_ms: Millis, now: Millis) -> Result<()> {
                let expires_at = now + ttl_ms;
                let done = sqlx::query(
                    "UPDATE chats SET lease_until = $4 \
                     WHERE chat_id = $1 AND lease_holder = $2 AND lease_token = $3",
                )
                .bind(lease.chat_id.as_str())
                .bind(&lease.holder)
                .bind(lease.token)
                .bind(expires_at)
                .execute(self.writer())
                .await?;
                if done.rows_affected() == 1 {
                    lease.expires_at = expires_at;
                    Ok(())
                } else {
                    Err(Error::LeaseLost { chat_id: lease.chat_id.to_string() })
                }
            }

            async fn set_driver(&self, lease: &mut Lease, driver: Option<&UserId>) -> Result<()> {
                let done = sqlx::query(
                    "UPDATE chats SET driver = $4 \
                     WHERE chat_id = $1 AND lease_holder = $2 AND lease_token = $3",
                )
                .bind(lease.chat_id.as_str())
                .bind(&lease.holder)
                .bind(lease.token)
                .bind(driver.map(UserId::as_str))
                .execute(self.writer())
                .await?;
                if done.rows_affected() == 1 {
                    lease.driver = driver.cloned();
                    Ok(())
                } else {
                    Err(Error::LeaseLost { chat_id: lease.chat_id.to_string() })
                }
            }

            async fn save_turn_message(
                &self,
                lease: &Lease,
                message: &UiMessage,
                slot: Slot,
                awaiting: Option<&str>,
                now: Millis,
            ) -> Result<StoredMessage> {
                let mut tx = self.begin_write().await?;
                // The fence and the waiting mark in one statement.
                let done = sqlx::query(
                    "UPDATE chats SET updated_at = $4, awaiting_message_id = $5 \
                     WHERE chat_id = $1 AND lease_holder = $2 AND lease_token = $3",
                )
                .bind(lease.chat_id.as_str())
                .bind(&lease.holder)
                .bind(lease.token)
                .bind(now)
                .bind(awaiting)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() != 1 {
                    return Err(Error::LeaseLost {
                        chat_id: lease.chat_id.to_string(),
                    });
                }
                let (position, sub) = match slot {
                    Slot::TurnStart => (Self::next_position(&mut tx, &lease.chat_id).await?, 0),
                    Slot::Reply { position } => (position, REPLY_SUB),
                };
                let stored = Self::put_turn_message(&mut tx, &lease.chat_id, message, position, sub, now).await?;
                tx.commit().await?;
                Ok(stored)
            }

            async fn start_turn_with(
                &self,
                chat: &ChatId,
                req: &LeaseRequest,
                message: &UiMessage,
            ) -> Result<Option<(Lease, StoredMessage)>> {
                use sqlx::Row;
                let mut tx = self.begin_write().await?;
                let expires_at = req.now + req.ttl_ms;
                let mut taken = None;
                for sql in [START_TURN, TAKE_EXPIRED] {
                    let row = sqlx::query(sql)
                        .bind(chat.as_str())
                        .bind(&req.holder)
                        .bind(expires_at)
                        .bind(req.driver.as_ref().map(UserId::as_str))
                        .bind(req.now)
                        .fetch_optional(&mut *tx)
                        .await?;
                    if let Some(row) = row {
                        taken = Some((row.try_get::<i64, _>("lease_token")?, sql == TAKE_EXPIRED));
                        break;
                    }
                }
                let Some((token, taken_over)) = taken else { return Ok(None) };
                let lease = Lease {
                    chat_id: chat.clone(),
                    holder: req.holder.clone(),
                    token,
                    expires_at,
                    driver: req.driver.clone(),
                    taken_over,
                };
                let position = Self::next_position(&mut tx, chat).await?;
                let stored = Self::put_turn_message(&mut tx, chat, message, position, 0, req.now).await?;
                tx.commit().await?;
                Ok(Some((lease, stored)))
            }

            async fn promote_next(&self, lease: &Lease, now: Millis) -> Result<Option<StoredMessage>> {
                use sqlx::Row;
                let mut tx = self.begin_write().await?;
                Self::fence(&mut tx, lease, now).await?;
                loop {
                    let next = sqlx::query(
                        "SELECT seq FROM messages WHERE chat_id = $1 AND queued = TRUE ORDER BY seq LIMIT 1",
                    )
                    .bind(lease.chat_id.as_str())
                    .fetch_optional(&mut *tx)
                    .await?;
                    let Some(next) = next else {
                        tx.commit().await?;
                        return Ok(None);
                    };
                    let seq: i64 = next.try_get("seq")?;
                    let position = Self::next_position(&mut tx, &lease.chat_id).await?;
                    let row = sqlx::query(concat!(
                        "UPDATE messages SET queued = FALSE, position = $3, sub = 0, updated_at = $4 \
                         WHERE chat_id = $1 AND seq = $2 AND queued = TRUE RETURNING ", msg_cols!()
                    ))
                    .bind(lease.chat_id.as_str())
                    .bind(seq)
                    .bind(position)
                    .bind(now)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if let Some(row) = row {
                        let stored = Self::message_from_row(&row)?;
                        tx.commit().await?;
                        return Ok(Some(stored));
                    }
                    // Deleted by its author in between: take the next one.
                }
            }

            async fn take_steers(
                &self,
                lease: &Lease,
                driver: Option<&UserId>,
                position: i64,
                now: Millis,
            ) -> Result<Vec<StoredMessage>> {
                // Most step boundaries have no steer: a read answers that without a write lock.
                let any = sqlx::query(
                    "SELECT 1 FROM messages WHERE chat_id = $1 AND queued = TRUE AND delivery = 'steer' LIMIT 1",
                )
                .bind(lease.chat_id.as_str())
                .fetch_optional(self.reader())
                .await?;
                if any.is_none() {
                    return Ok(Vec::new());
                }
                let mut tx = self.begin_write().await?;
                Self::fence(&mut tx, lease, now).await?;
                let rows = sqlx::query(concat!(
                    "UPDATE messages SET queued = FALSE, position = $3, sub = seq, updated_at = $4 \
                     WHERE chat_id = $1 AND queued = TRUE AND delivery = 'steer' AND role = 'user' \
                       AND author IS NOT DISTINCT FROM $2 \
                     RETURNING ", msg_cols!()
                ))
                .bind(lease.chat_id.as_str())
                .bind(driver.map(UserId::as_str))
                .bind(position)
                .bind(now)
                .fetch_all(&mut *tx)
                .await?;
                let mut steers = rows.iter().map(Self::message_from_row).collect::<Result<Vec<_>>>()?;
                steers.sort_by_key(|m| m.seq);
                tx.commit().await?;
                Ok(steers)
            }

            async fn end_turn(&self, lease: &Lease, end: TurnEnd<'_>, now: Millis) -> Result<EndTurn> {
                let done = match end {
                    TurnEnd::Handoff => sqlx::query(
                        "UPDATE chats SET lease_holder = NULL, lease_until = 0, driver = NULL, updated_at = $4 \
                         WHERE chat_id = $1 AND lease_holder = $2 AND lease_token = $3",
                    )
                    .bind(lease.chat_id.as_str())
                    .bind(&lease.holder)
                    .bind(lease.token)
                    .bind(now)
                    .execute(self.writer())
                    .await?,
                    TurnEnd::Idle => sqlx::query(
                        "UPDATE chats SET lease_holder = NULL, lease_until = 0, driver = NULL, updated_at = $4 \
                         WHERE chat_id = $1 AND lease_holder = $2 AND lease_token = $3 \
                           AND NOT EXISTS (SELECT 1 FROM messages WHERE chat_id = $1 AND queued = TRUE)",
                    )
                    .bind(lease.chat_id.as_str())
                    .bind(&lease.holder)
                    .bind(lease.token)
                    .bind(now)
                    .execute(self.writer())
                    .await?,
                    TurnEnd::Awaiting(message_id) => sqlx::query(
                        "UPDATE chats SET lease_holder = NULL, lease_until = 0, driver = NULL, updated_at = $4, \
                                awaiting_message_id = $5 \
                         WHERE chat_id = $1 AND lease_holder = $2 AND lease_token = $3",
                    )
                    .bind(lease.chat_id.as_str())
                    .bind(&lease.holder)
                    .bind(lease.token)
                    .bind(now)
                    .bind(message_id)
                    .execute(self.writer())
                    .await?,
                };
                if done.rows_affected() == 1 {
                    return Ok(EndTurn::Released);
                }
                let still_ours = self
                    .get_chat(&lease.chat_id)
                    .await?
                    .and_then(|c| c.lease)
                    .is_some_and(|l| l.holder == lease.holder && l.token == lease.token);
                if still_ours && end == TurnEnd::Idle {
                    Ok(EndTurn::QueuedPending)
                } else {
                    Err(Error::LeaseLost { chat_id: lease.chat_id.to_string() })
                }
            }

            async fn insert_questions(&self, rows: &[NewQuestion], now: Millis) -> Result<()> {
                let empty = to_json(&QuestionRecord { messages: vec![], revision: 0, state: None })?;
                let mut tx = self.begin_write().await?;
                for q in rows {
                    sqlx::query(
                        "INSERT INTO questions (chat_id, tool_call_id, message_id, call_index, input, record, \
                                answer_deadline, created_at, updated_at, expires_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9) \
                         ON CONFLICT (chat_id, tool_call_id) DO NOTHING",
                    )
                    .bind(q.chat_id.as_str())
                    .bind(&q.tool_call_id)
                    .bind(&q.message_id)
                    .bind(q.call_index)
                    .bind(to_json(&q.input)?)
                    .bind(&empty)
                    .bind(q.answer_deadline)
                    .bind(now)
                    .bind(now + QUESTION_TTL_MS)
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Ok(())
            }

            async fn get_question(
                &self,
                chat: &ChatId,
                tool_call_id: &str,
                now: Millis,
            ) -> Result<Option<QuestionRow>> {
                let row = sqlx::query(concat!(
                    "SELECT ", question_cols!(),
                    " FROM questions WHERE chat_id = $1 AND tool_call_id = $2 AND expires_at > $3"
                ))
                .bind(chat.as_str())
                .bind(tool_call_id)
                .bind(now)
                .fetch_optional(self.reader())
                .await?;
                row.as_ref().map(Self::question_from_row).transpose()
            }

            async fn questions_of_message(
                &self,
                chat: &ChatId,
                message_id: &str,
                now: Millis,
            ) -> Result<Vec<QuestionRow>> {
                let rows = sqlx::query(concat!(
                    "SELECT ", question_cols!(),
                    " FROM questions WHERE chat_id = $1 AND message_id = $2 AND expires_at > $3 \
                      ORDER BY call_index, tool_call_id"
                ))
                .bind(chat.as_str())
                .bind(message_id)
                .bind(now)
                .fetch_all(self.reader())
                .await?;
                rows.iter().map(Self::question_from_row).collect()
            }

            async fn try_lock_question(
                &self,
                chat: &ChatId,
                tool_call_id: &str,
                holder: &str,
                ttl_ms: Millis,
                now: Millis,
            ) -> Result<Option<QuestionLock>> {
                use sqlx::Row;
                let row = sqlx::query(
                    "UPDATE questions SET lock_holder = $3, lock_token = lock_token + 1, lock_until = $4 \
                     WHERE chat_id = $1 AND tool_call_id = $2 AND expires_at > $5 \
                       AND (lock_holder IS NULL OR lock_until <= $5) \
                     RETURNING lock_token",
                )
                .bind(chat.as_str())
                .bind(tool_call_id)
                .bind(holder)
                .bind(now + ttl_ms)
                .bind(now)
                .fetch_optional(self.writer())
                .await?;
                Ok(match row {
                    Some(r) => Some(QuestionLock {
                        chat_id: chat.clone(),
                        tool_call_id: tool_call_id.to_string(),
                        holder: holder.to_string(),
                        token: r.try_get("lock_token")?,
                    }),
                    None => None,
                })
            }

            async fn unlock_question(&self, lock: &QuestionLock) -> Result<()> {
                sqlx::query(
                    "UPDATE questions SET lock_holder = NULL, lock_until = 0 \
                     WHERE chat_id = $1 AND tool_call_id = $2 AND lock_holder = $3 AND lock_token = $4",
                )
                .bind(lock.chat_id.as_str())
                .bind(&lock.tool_call_id)
                .bind(&lock.holder)
                .bind(lock.token)
                .execute(self.writer())
                .await?;
                Ok(())
            }

            async fn update_question(
                &self,
                lock: &QuestionLock,
                update: &QuestionUpdate,
                now: Millis,
            ) -> Result<QuestionRow> {
                if let Some(record) = &update.record
                    && record.messages.is_empty()
                    && update.rendered != Some(false)
                {
                    return Err(Error::InvalidInput("a question record's messages are never empty".into()));
                }
                let record = update.record.as_ref().map(to_json).transpose()?;
                let row = sqlx::query(concat!(
                    "UPDATE questions SET record = COALESCE($5, record), rendered = COALESCE($6, rendered), \
                            posting = COALESCE($7, posting), closed = COALESCE($8, closed), updated_at = $9, \
                            expires_at = CASE WHEN outcome IS NULL THEN $10 ELSE expires_at END \
                     WHERE chat_id = $1 AND tool_call_id = $2 AND lock_holder = $3 AND lock_token = $4 \
                     RETURNING ", question_cols!()
                ))
                .bind(lock.chat_id.as_str())
                .bind(&lock.tool_call_id)
                .bind(&lock.holder)
                .bind(lock.token)
                .bind(record)
                .bind(update.rendered)
                .bind(update.posting)
                .bind(update.closed)
                .bind(now)
                .bind(now + QUESTION_TTL_MS)
                .fetch_optional(self.writer())
                .await?;
                match row {
                    Some(r) => Self::question_from_row(&r),
                    None => Err(Error::Locked(lock.tool_call_id.clone())),
                }
            }

            async fn record_outcome(
                &self,
                chat: &ChatId,
                tool_call_id: &str,
                outcome: &QuestionOutcome,
                actor: Option<&Actor>,
                now: Millis,
            ) -> Result<bool> {
                let done = sqlx::query(
                    "UPDATE questions SET outcome = $3, actor = $4, outcome_at = $5, updated_at = $5, \
                            expires_at = $6 \
                     WHERE chat_id = $1 AND tool_call_id = $2 AND outcome IS NULL AND expires_at > $5",
                )
                .bind(chat.as_str())
                .bind(tool_call_id)
                .bind(to_json(outcome)?)
                .bind(actor.map(to_json).transpose()?)
                .bind(now)
                .bind(now + ANSWERED_TTL_MS)
                .execute(self.writer())
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn link_question_message(
                &self,
                platform: &str,
                message_id: &str,
                chat: &ChatId,
                tool_call_id: &str,
            ) -> Result<()> {
                sqlx::query(
                    "INSERT INTO question_links (platform, message_id, chat_id, tool_call_id) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                )
                .bind(platform)
                .bind(message_id)
                .bind(chat.as_str())
                .bind(tool_call_id)
                .execute(self.writer())
                .await?;
                Ok(())
            }

            async fn find_questions_by_message(
                &self,
                platform: &str,
                message_id: &str,
                now: Millis,
            ) -> Result<Vec<(ChatId, String)>> {
                use sqlx::Row;
                let rows = sqlx::query(
                    "SELECT l.chat_id, l.tool_call_id FROM question_links l \
                     JOIN questions q ON q.chat_id = l.chat_id AND q.tool_call_id = l.tool_call_id \
                     WHERE l.platform = $1 AND l.message_id = $2 AND q.expires_at > $3 \
                     ORDER BY q.call_index, q.tool_call_id",
                )
                .bind(platform)
                .bind(message_id)
                .bind(now)
                .fetch_all(self.reader())
                .await?;
                rows.iter()
                    .map(|r| Ok((chat_id(r.try_get("chat_id")?)?, r.try_get("tool_call_id")?)))
                    .collect()
            }

            async fn purge_expired(&self, now: Millis) -> Result<u64> {
                let mut tx = self.begin_write().await?;
                sqlx::query(
                    "DELETE FROM question_links WHERE (chat_id, tool_call_id) IN \
                     (SELECT chat_id, tool_call_id FROM questions WHERE expires_at <= $1)",
                )
                .bind(now)
                .execute(&mut *tx)
                .await?;
                let done = sqlx::query("DELETE FROM questions WHERE expires_at <= $1")
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(done.rows_affected())
            }

            async fn enqueue_job(&self, job: &NewJob) -> Result<i64> {
                use sqlx::Row;
                let row = sqlx::query(
                    "INSERT INTO jobs (kind, key, payload, run_at, created_at) VALUES ($1, $2, $3, $4, $4) \
                     ON CONFLICT (key) DO UPDATE SET \
                        run_at = CASE WHEN jobs.dead OR excluded.run_at < jobs.run_at \
                                      THEN excluded.run_at ELSE jobs.run_at END, \
                        attempts = CASE WHEN jobs.dead THEN 0 ELSE jobs.attempts END, \
                        dead = FALSE, kind = excluded.kind, payload = excluded.payload, \
                        generation = jobs.generation + 1 \
                     RETURNING id",
                )
                .bind(&job.kind)
                .bind(job.key.as_deref())
                .bind(to_json(&job.payload)?)
                .bind(job.run_at)
                .fetch_one(self.writer())
                .await?;
                Ok(row.try_get("id")?)
            }

            async fn claim_job(&self, worker: &str, claim_ms: Millis, now: Millis) -> Result<Option<Job>> {
                let row = sqlx::query($claim_sql)
                    .bind(worker)
                    .bind(now + claim_ms)
                    .bind(now)
                    .fetch_optional(self.writer())
                    .await?;
                row.as_ref().map(Self::job_from_row).transpose()
            }

            async fn complete_job(&self, job: &Job) -> Result<bool> {
                let done = sqlx::query(
                    "DELETE FROM jobs WHERE id = $1 AND claimed_by = $2 AND attempts = $3 AND generation = $4",
                )
                .bind(job.id)
                .bind(job.claimed_by.as_deref())
                .bind(job.attempts)
                .bind(job.generation)
                .execute(self.writer())
                .await?;
                if done.rows_affected() == 1 {
                    return Ok(true);
                }
                // Re-enqueued while it ran: keep it, scheduled, and release the claim.
                let done = sqlx::query(
                    "UPDATE jobs SET claimed_by = NULL, claim_until = NULL \
                     WHERE id = $1 AND claimed_by = $2 AND attempts = $3",
                )
                .bind(job.id)
                .bind(job.claimed_by.as_deref())
                .bind(job.attempts)
                .execute(self.writer())
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn retry_job(&self, job: &Job, run_at: Millis, error: &str) -> Result<bool> {
                let done = sqlx::query(
                    "UPDATE jobs SET claimed_by = NULL, claim_until = NULL, last_error = $5, \
                            run_at = CASE WHEN generation <> $4 AND run_at < $6 THEN run_at ELSE $6 END \
                     WHERE id = $1 AND claimed_by = $2 AND attempts = $3",
                )
                .bind(job.id)
                .bind(job.claimed_by.as_deref())
                .bind(job.attempts)
                .bind(job.generation)
                .bind(error)
                .bind(run_at)
                .execute(self.writer())
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn bury_job(&self, job: &Job, error: &str) -> Result<bool> {
                let done = sqlx::query(
                    "UPDATE jobs SET claimed_by = NULL, claim_until = NULL, last_error = $5, \
                            dead = (generation = $4) \
                     WHERE id = $1 AND claimed_by = $2 AND attempts = $3",
                )
                .bind(job.id)
                .bind(job.claimed_by.as_deref())
                .bind(job.attempts)
                .bind(job.generation)
                .bind(error)
                .execute(self.writer())
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn get_job(&self, id: i64) -> Result<Option<Job>> {
                let row = sqlx::query(concat!("SELECT ", job_cols!(), " FROM jobs WHERE id = $1"))
                    .bind(id)
                    .fetch_optional(self.reader())
                    .await?;
                row.as_ref().map(Self::job_from_row).transpose()
            }
        }
    };
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use sqlx::sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
        SqliteSynchronous,
    };
    use std::str::FromStr;
    use std::time::Duration;

    /// The SQLite store: one database file in WAL mode, write transactions opened with
    /// `BEGIN IMMEDIATE`, a 5-second busy timeout.
    #[derive(Clone, Debug)]
    pub struct SqliteStore {
        /// The one writer connection: writers queue here, in process, instead of sleeping in
        /// SQLite's busy handler.
        pool: SqlitePool,
        /// Readers (WAL lets them run beside the writer); `None` for an in-memory database.
        readers: Option<SqlitePool>,
    }

    impl SqliteStore {
        const BACKEND: Backend = Backend::Sqlite;

        /// Opens (creating when missing) `sqlite://PATH` or `sqlite::memory:` and applies migrations.
        pub async fn open(url: &str) -> Result<Self> {
            let memory = url.contains(":memory:") || url.contains("mode=memory");
            let options = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(if memory {
                    SqliteJournalMode::Memory
                } else {
                    SqliteJournalMode::Wal
                })
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(5))
                .foreign_keys(true);
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options.clone())
                .await?;
            sqlx::migrate!("migrations/sqlite").run(&pool).await?;
            let readers = if memory {
                // An in-memory database lives in its one connection.
                None
            } else {
                Some(
                    SqlitePoolOptions::new()
                        .max_connections(8)
                        .idle_timeout(Some(Duration::from_secs(600)))
                        .connect_with(options.read_only(true))
                        .await?,
                )
            };
            Ok(Self { pool, readers })
        }

        /// Opens a SQLite file by path.
        pub async fn open_path(path: impl AsRef<std::path::Path>) -> Result<Self> {
            Self::open(&format!("sqlite://{}", path.as_ref().display())).await
        }

        /// The connection pool.
        pub fn pool(&self) -> &SqlitePool {
            self.reader()
        }

        async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
            Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
        }

        fn writer(&self) -> &SqlitePool {
            &self.pool
        }

        fn reader(&self) -> &SqlitePool {
            self.readers.as_ref().unwrap_or(&self.pool)
        }
    }

    impl_sql_store!(SqliteStore, sqlx::Sqlite, SqliteRow, CLAIM_JOB_SQLITE);
}
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
    use std::time::Duration;

    /// The PostgreSQL store: many processes on many machines share one database.
    #[derive(Clone, Debug)]
    pub struct PostgresStore {
        pool: PgPool,
    }

    impl PostgresStore {
        const BACKEND: Backend = Backend::Postgres;

        /// Connects to `postgres://…` and applies migrations.
        pub async fn open(url: &str) -> Result<Self> {
            let pool = PgPoolOptions::new()
                .max_connections(16)
                .acquire_timeout(Duration::from_secs(10))
                .connect(url)
                .await?;
            sqlx::migrate!("migrations/postgres").run(&pool).await?;
            Ok(Self { pool })
        }

        /// The connection pool.
        pub fn pool(&self) -> &PgPool {
            self.reader()
        }

        async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
            Ok(self.pool.begin().await?)
        }

        fn writer(&self) -> &PgPool {
            &self.pool
        }

        fn reader(&self) -> &PgPool {
            &self.pool
        }
    }

    impl_sql_store!(PostgresStore, sqlx::Postgres, PgRow, CLAIM_JOB_POSTGRES);
}
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
