//! The turns part: [`TurnStore`] for [`SqliteStore`] — `send`, the lease, checkpoints, the wait on
//! questions, a turn's end, taking a chat, the queue — and the writes they run on the writer.

use async_trait::async_trait;
use rusqlite::{Connection, params};

use frogbot_core::model::{ChatId, Delivery, Millis, QuestionOutcome, Role, UiMessage, UserId};
use frogbot_core::store::*;
use frogbot_core::store::{Result, StoreError};

use crate::SqliteStore;
use crate::ops::{self, *};

#[async_trait]
impl TurnStore for SqliteStore {
    async fn expired_leases(&self, now: Millis, limit: u32) -> Result<Vec<ChatId>> {
        self.read("expired_leases", move |c| expired_leases(c, now, limit))
            .await
    }

    async fn send(&self, op: &SendOp<'_>) -> Result<Sent> {
        let body = ops::message_body(op.message)?;
        moved!(self.write("send"), op => SendOp {
            r chat, r message, v delivery, r lease, v queue_if_busy
        }, |c, op| send(c, &op, &body))
    }

    async fn checkpoint(&self, op: &CheckpointOp<'_>) -> Result<Checkpointed> {
        let body = ops::message_body(op.reply)?;
        moved!(self.write_relaxed("checkpoint"), op => CheckpointOp {
            r lease, r reply, v position, v join_steers, v now
        }, |c, op| checkpoint(c, &op, &body))
    }

    async fn await_answers(&self, op: &AwaitOp<'_>) -> Result<StoredMessage> {
        let body = ops::message_body(op.reply)?;
        moved!(self.write("await_answers"), op => AwaitOp {
            r lease, r reply, v position, r questions, o job, o delivery, v now
        }, |c, op| await_answers(c, &op, &body))
    }

    async fn end_turn(&self, op: &EndTurnOp<'_>) -> Result<TurnEnded> {
        let body = op.reply.map(|(m, _)| ops::message_body(m)).transpose()?;
        let lease = op.lease.clone();
        let reply = op.reply.map(|(m, p)| (m.clone(), p));
        let job = match op.mode {
            EndMode::Next => None,
            EndMode::Handoff(job) => Some(job.clone()),
        };
        let now = op.now;
        let delivery = op.delivery.cloned();
        self.write("end_turn", move |c| {
            let op = EndTurnOp {
                lease: &lease,
                reply: reply.as_ref().map(|(m, p)| (m, *p)),
                mode: match &job {
                    None => EndMode::Next,
                    Some(job) => EndMode::Handoff(job),
                },
                now,
                delivery: delivery.as_ref(),
            };
            end_turn(c, &op, body.as_deref())
        })
        .await
    }

    async fn take_chat(&self, chat: &ChatId, req: &LeaseRequest) -> Result<Option<Taken>> {
        let (chat, req) = (chat.clone(), req.clone());
        self.write("take_chat", move |c| take_chat(c, &chat, &req))
            .await
    }

    async fn resume_turn(
        &self,
        chat: &ChatId,
        message_id: &str,
        req: &LeaseRequest,
    ) -> Result<Resume> {
        let (chat, id, req) = (chat.clone(), message_id.to_string(), req.clone());
        self.write("resume_turn", move |c| {
            ops::resume_turn(c, &chat, &id, &req)
        })
        .await
    }

    async fn renew_lease(&self, lease: &mut Lease, ttl_ms: Millis, now: Millis) -> Result<()> {
        let held = lease.clone();
        let expires_at = self
            .write("renew_lease", move |c| renew_lease(c, &held, ttl_ms, now))
            .await?;
        lease.expires_at = expires_at;
        Ok(())
    }

    async fn expire_lease(&self, lease: &Lease, now: Millis) -> Result<()> {
        let lease = lease.clone();
        self.write("expire_lease", move |c| expire_lease(c, &lease, now))
            .await
    }

    async fn edit_queued(&self, op: &QueuedOp<'_>, edit: &QueuedEdit) -> Result<QueuedChange> {
        let edit = edit.clone();
        moved!(self.write("edit_queued"), op => QueuedOp { r chat, r id, o by, v now },
            |c, op| edit_queued(c, &op, &edit))
    }

    async fn delete_queued(&self, op: &QueuedOp<'_>) -> Result<QueuedChange> {
        moved!(self.write("delete_queued"), op => QueuedOp { r chat, r id, o by, v now },
            |c, op| delete_queued(c, &op))
    }
}

pub(crate) fn expired_leases(c: &Connection, now: Millis, limit: u32) -> R<Vec<ChatId>> {
    all(
        c,
        "SELECT chat_id FROM chats \
         WHERE lease_holder IS NOT NULL AND lease_until <= ?1 AND awaiting_message_id IS NULL \
         ORDER BY lease_until, chat_id LIMIT ?2",
        params![now, i64::from(limit)],
        |r| chat_id(r.get(0)?),
    )
}

/// Inserts or replaces a message of a turn at (`position`, `sub`), no longer queued.
#[allow(clippy::too_many_arguments)]
fn put_turn_message(
    c: &Connection,
    chat: &ChatId,
    m: &UiMessage,
    body: &str,
    position: i64,
    sub: i64,
    delivery: Delivery,
    now: Millis,
) -> R<StoredMessage> {
    let version = bump(c, chat)?;
    // The common case — a reply rewritten at its place by the next step — sets only what changed,
    // so the indexes on the other columns are left alone; anything else takes the upsert.
    let rewritten = opt(
        c,
        "UPDATE messages SET body = ?3, updated_at = ?4, version = ?5 \
         WHERE chat_id = ?1 AND id = ?2 AND queued = FALSE AND position = ?6 AND sub = ?7 \
           AND role = ?8 AND author IS ?9 \
         RETURNING seq, delivery",
        params![
            chat.as_str(),
            m.id,
            body,
            now,
            version,
            position,
            sub,
            m.role.as_str(),
            m.metadata.author.as_ref().map(UserId::as_str),
        ],
        |r| {
            Ok((
                r.get::<_, i64>(0)?,
                parse_delivery(&r.get::<_, String>(1)?)?,
            ))
        },
    )?;
    let (seq, delivery) = match rewritten {
        Some(found) => found,
        None => opt(
        c,
        "INSERT INTO messages (chat_id, id, role, author, queued, delivery, position, sub, body, \
                               created_at, updated_at, version) \
         VALUES (?1, ?2, ?3, ?4, FALSE, ?5, ?6, ?7, ?8, ?9, ?9, ?10) \
         ON CONFLICT (chat_id, id) DO UPDATE SET role = excluded.role, author = excluded.author, \
            queued = FALSE, position = excluded.position, sub = excluded.sub, body = excluded.body, \
            updated_at = excluded.updated_at, version = excluded.version \
         RETURNING seq, delivery",
        params![
            chat.as_str(),
            m.id,
            m.role.as_str(),
            m.metadata.author.as_ref().map(UserId::as_str),
            delivery.as_str(),
            position,
            sub,
            body,
            now,
            version
        ],
        |r| Ok((r.get::<_, i64>(0)?, parse_delivery(&r.get::<_, String>(1)?)?)),
    )?
    .ok_or_else(|| E::Core(StoreError::corrupt_msg("upsert returned nothing")))?,
    };
    Ok(stored(
        chat,
        m,
        seq,
        Some(position),
        sub,
        false,
        delivery,
        version,
    ))
}

/// Saves the turn's reply at its slot (`position`, [`REPLY_SUB`]).
fn put_reply(
    c: &Connection,
    chat: &ChatId,
    m: &UiMessage,
    body: &str,
    position: i64,
    now: Millis,
) -> R<StoredMessage> {
    put_turn_message(c, chat, m, body, position, REPLY_SUB, Delivery::Queue, now)
}

fn insert_queued(
    c: &Connection,
    chat: &ChatId,
    m: &UiMessage,
    body: &str,
    delivery: Delivery,
    now: Millis,
) -> R<StoredMessage> {
    let version = bump(c, chat)?;
    let seq = opt(
        c,
        "INSERT INTO messages (chat_id, id, role, author, queued, delivery, position, sub, body, \
                               created_at, updated_at, version) \
         VALUES (?1, ?2, ?3, ?4, TRUE, ?5, NULL, 0, ?6, ?7, ?7, ?8) RETURNING seq",
        params![
            chat.as_str(),
            m.id,
            m.role.as_str(),
            m.metadata.author.as_ref().map(UserId::as_str),
            delivery.as_str(),
            body,
            now,
            version
        ],
        int,
    )?
    .ok_or_else(|| E::Core(StoreError::corrupt_msg("insert returned nothing")))?;
    Ok(stored(chat, m, seq, None, 0, true, delivery, version))
}

/// Moves a queued message into the turn at `position` with `sub` (0: the turn's user message; its
/// `seq`: a joined steer).
fn unqueue(
    c: &Connection,
    chat: &ChatId,
    seq: i64,
    position: i64,
    steer: bool,
    now: Millis,
) -> R<StoredMessage> {
    let version = bump(c, chat)?;
    opt(
        c,
        concat!(
            "UPDATE messages SET queued = FALSE, position = ?3, \
                    sub = CASE WHEN ?4 THEN seq ELSE 0 END, version = ?5, updated_at = ?6 \
             WHERE chat_id = ?1 AND seq = ?2 RETURNING ",
            msg_cols!()
        ),
        params![chat.as_str(), seq, position, steer, version, now],
        message_row,
    )?
    .ok_or_else(|| {
        E::Core(StoreError::corrupt_msg(format!(
            "queued message {seq} vanished"
        )))
    })
}

fn oldest_queued(c: &Connection, chat: &ChatId) -> R<Option<i64>> {
    opt(
        c,
        "SELECT seq FROM messages WHERE chat_id = ?1 AND queued = TRUE ORDER BY seq LIMIT 1",
        [chat.as_str()],
        int,
    )
}

/// Promotes the oldest queued message to a new turn position. `None` when nothing is queued.
fn promote_next(c: &Connection, chat: &ChatId, now: Millis) -> R<Option<StoredMessage>> {
    let Some(seq) = oldest_queued(c, chat)? else {
        return Ok(None);
    };
    let position = next_position(c, chat)?;
    Ok(Some(unqueue(c, chat, seq, position, false, now)?))
}

/// The recorded outcomes of `message`'s question calls: (tool call id, outcome).
fn recorded_outcomes(
    c: &Connection,
    chat: &ChatId,
    message: &str,
) -> R<Vec<(String, QuestionOutcome)>> {
    all(
        c,
        "SELECT tool_call_id, outcome FROM questions \
         WHERE chat_id = ?1 AND message_id = ?2 AND outcome IS NOT NULL",
        params![chat.as_str(), message],
        |r| {
            let id: String = r.get(0)?;
            let outcome: String = r.get(1)?;
            Ok((
                id,
                from_json::<QuestionOutcome>("question outcome", &outcome)?,
            ))
        },
    )
}

/// Marks the last turn of the chat (its highest position) interrupted: see
/// [`interrupted_reply`], and writes what the reply owes its thread (`req.interrupted`). Called
/// when a lease is taken over, in its transaction.
fn mark_interrupted(c: &Connection, row: &ChatRow, req: &LeaseRequest) -> R<Option<StoredMessage>> {
    let (chat, now) = (&row.chat_id, req.now);
    let turn = all(
        c,
        concat!(
            "SELECT ",
            msg_cols!(),
            " FROM messages WHERE chat_id = ?1 AND queued = FALSE \
               AND position = (SELECT MAX(position) FROM messages WHERE chat_id = ?1) \
             ORDER BY sub, seq"
        ),
        [chat.as_str()],
        message_row,
    )?;
    let Some(position) = turn.first().and_then(|m| m.position) else {
        return Ok(None);
    };
    let new_id = uuid::Uuid::now_v7().to_string();
    let outcomes = match turn.iter().find(|m| m.message.role == Role::Assistant) {
        Some(reply) => recorded_outcomes(c, chat, &reply.message.id)?,
        None => Vec::new(),
    };
    let Some(reply) = interrupted_reply(&turn, &outcomes, &new_id, now) else {
        return Ok(None);
    };
    let body = message_body(&reply)?;
    let saved = put_reply(c, chat, &reply, &body, position, now)?;
    if let Some(job) = req.interrupted.and_then(|d| d.job_for(row, &saved.message)) {
        enqueue_job(c, &job)?;
    }
    Ok(Some(saved))
}

/// Fences the operation with `lease`: touches the chat, or fails with `LeaseLost`.
/// Checks that `lease` still holds its chat. A read: the writer's transaction holds the database's
/// write lock, so nothing can take the chat between this check and the operation's writes (and the
/// chat's `updated_at` is left to the writes that mean something to a reader: start, end, release).
fn fence(c: &Connection, lease: &Lease, _now: Millis) -> R<()> {
    let held = opt(
        c,
        "SELECT 1 FROM chats WHERE chat_id = ?1 AND lease_holder = ?2 AND lease_token = ?3",
        params![lease.chat_id.as_str(), lease.holder, lease.token],
        int,
    )?;
    if held.is_some() {
        Ok(())
    } else {
        Err(lease_lost(lease))
    }
}

fn release(c: &Connection, chat: &ChatId, now: Millis) -> R<()> {
    exec(
        c,
        "UPDATE chats SET lease_holder = NULL, lease_until = 0, driver = NULL, updated_at = ?2 \
         WHERE chat_id = ?1",
        params![chat.as_str(), now],
    )?;
    Ok(())
}

fn set_driver(c: &Connection, chat: &ChatId, driver: Option<&UserId>) -> R<()> {
    exec(
        c,
        "UPDATE chats SET driver = ?2 WHERE chat_id = ?1",
        params![chat.as_str(), driver.map(UserId::as_str)],
    )?;
    Ok(())
}

pub(crate) fn renew_lease(c: &Connection, lease: &Lease, ttl_ms: Millis, now: Millis) -> R<Millis> {
    let expires_at = now + ttl_ms;
    let n = exec(
        c,
        "UPDATE chats SET lease_until = ?4 \
         WHERE chat_id = ?1 AND lease_holder = ?2 AND lease_token = ?3",
        params![
            lease.chat_id.as_str(),
            lease.holder,
            lease.token,
            expires_at
        ],
    )?;
    if n == 1 {
        Ok(expires_at)
    } else {
        Err(lease_lost(lease))
    }
}

pub(crate) fn expire_lease(c: &Connection, lease: &Lease, now: Millis) -> R<()> {
    let n = exec(
        c,
        "UPDATE chats SET lease_until = ?4 \
         WHERE chat_id = ?1 AND lease_holder = ?2 AND lease_token = ?3",
        params![lease.chat_id.as_str(), lease.holder, lease.token, now],
    )?;
    if n == 1 {
        Ok(())
    } else {
        Err(lease_lost(lease))
    }
}

pub(crate) fn send(c: &Connection, op: &SendOp<'_>, body: &str) -> R<Sent> {
    let now = op.lease.now;
    let id = &op.chat.chat_id;
    let created = exec(
        c,
        "INSERT INTO chats (chat_id, owner, channel_platform, channel_thread, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?5) ON CONFLICT DO NOTHING",
        params![
            id.as_str(),
            op.chat.owner.as_ref().map(UserId::as_str),
            op.chat.channel.as_ref().map(|ch| ch.platform.as_str()),
            op.chat.channel.as_ref().map(|ch| ch.thread.as_str()),
            now
        ],
    )? == 1;
    let Some(chat) = get_chat(c, id)? else {
        // The insert met the channel-thread index: the thread has a chat under another id.
        return Err(E::Core(StoreError::ChannelChat {
            chat_id: id.clone(),
            reason: "is not its channel thread's chat: the thread has a chat of another id",
        }));
    };
    if !created {
        check_sender(&chat, op.chat, op.message)?;
    }
    if opt(
        c,
        "SELECT 1 FROM messages WHERE chat_id = ?1 AND id = ?2",
        [id.as_str(), op.message.id.as_str()],
        int,
    )?
    .is_some()
    {
        return Ok(Sent::Duplicate { chat });
    }
    let idle = chat.awaiting_message_id.is_none() && chat.live_lease(now).is_none();
    if idle {
        let taken_over = chat.lease.is_some();
        let lease = take_lease(c, id, op.lease, taken_over)?;
        let interrupted = if taken_over {
            mark_interrupted(c, &chat, op.lease)?
        } else {
            None
        };
        let position = next_position(c, id)?;
        let message = put_turn_message(c, id, op.message, body, position, 0, op.delivery, now)?;
        return Ok(Sent::Started {
            chat: chat_after(c, id)?,
            created,
            prior_version: chat.version,
            lease,
            message,
            interrupted,
        });
    }
    if !op.queue_if_busy {
        return Ok(Sent::Busy { chat });
    }
    let delivery = steer_or_queue(op.delivery, &chat, op.message.metadata.author.as_ref(), now);
    let message = insert_queued(c, id, op.message, body, delivery, now)?;
    touch(c, id, now)?;
    Ok(Sent::Queued {
        chat: chat_after(c, id)?,
        created,
        message,
        delivery,
    })
}

pub(crate) fn checkpoint(c: &Connection, op: &CheckpointOp<'_>, body: &str) -> R<Checkpointed> {
    let chat = &op.lease.chat_id;
    fence(c, op.lease, op.now)?;
    let mut steers = Vec::new();
    if op.join_steers {
        let seqs = all(
            c,
            "SELECT seq FROM messages WHERE chat_id = ?1 AND queued = TRUE AND delivery = 'steer' \
               AND role = 'user' AND author IS ?2 ORDER BY seq",
            params![chat.as_str(), op.lease.driver.as_ref().map(UserId::as_str)],
            int,
        )?;
        for seq in seqs {
            steers.push(unqueue(c, chat, seq, op.position, true, op.now)?);
        }
    }
    let reply = put_reply(c, chat, op.reply, body, op.position, op.now)?;
    Ok(Checkpointed { reply, steers })
}

pub(crate) fn await_answers(c: &Connection, op: &AwaitOp<'_>, body: &str) -> R<StoredMessage> {
    let lease = op.lease;
    let n = exec(
        c,
        "UPDATE chats SET lease_holder = NULL, lease_until = 0, driver = NULL, \
                awaiting_message_id = ?4, updated_at = ?5 \
         WHERE chat_id = ?1 AND lease_holder = ?2 AND lease_token = ?3",
        params![
            lease.chat_id.as_str(),
            lease.holder,
            lease.token,
            op.reply.id,
            op.now
        ],
    )?;
    if n != 1 {
        return Err(lease_lost(lease));
    }
    let reply = put_reply(c, &lease.chat_id, op.reply, body, op.position, op.now)?;
    insert_questions(c, op.questions, op.now)?;
    if let Some(job) = op.job {
        enqueue_job(c, job)?;
    }
    if let Some(job) = op.delivery {
        enqueue_job(c, job)?;
    }
    Ok(reply)
}

pub(crate) fn end_turn(c: &Connection, op: &EndTurnOp<'_>, body: Option<&str>) -> R<TurnEnded> {
    let chat = &op.lease.chat_id;
    fence(c, op.lease, op.now)?;
    let reply = match (op.reply, body) {
        (Some((m, position)), Some(body)) => Some(put_reply(c, chat, m, body, position, op.now)?),
        _ => None,
    };
    if let Some(job) = op.delivery {
        enqueue_job(c, job)?;
    }
    match op.mode {
        EndMode::Next => match promote_next(c, chat, op.now)? {
            None => {
                release(c, chat, op.now)?;
                Ok(TurnEnded::Released { reply })
            }
            Some(next) => {
                let driver = next.author().cloned();
                set_driver(c, chat, driver.as_ref())?;
                Ok(TurnEnded::Promoted {
                    reply,
                    lease: Lease {
                        driver,
                        taken_over: false,
                        ..op.lease.clone()
                    },
                    next,
                })
            }
        },
        EndMode::Handoff(job) => {
            release(c, chat, op.now)?;
            let queued = oldest_queued(c, chat)?.is_some();
            if queued {
                enqueue_job(c, job)?;
            }
            Ok(TurnEnded::HandedOn { reply, queued })
        }
    }
}

pub(crate) fn take_chat(c: &Connection, id: &ChatId, req: &LeaseRequest) -> R<Option<Taken>> {
    let Some(chat) = get_chat(c, id)? else {
        return Ok(None);
    };
    if chat.awaiting_message_id.is_some() || chat.live_lease(req.now).is_some() {
        return Ok(None);
    }
    let taken_over = chat.lease.is_some();
    if !taken_over && oldest_queued(c, id)?.is_none() {
        // Free and nothing to run: nothing to change.
        return Ok(Some(Taken {
            interrupted: None,
            next: None,
        }));
    }
    let lease = take_lease(c, id, req, taken_over)?;
    let interrupted = if taken_over {
        mark_interrupted(c, &chat, req)?
    } else {
        None
    };
    match promote_next(c, id, req.now)? {
        Some(next) => {
            let driver = next.author().cloned();
            set_driver(c, id, driver.as_ref())?;
            Ok(Some(Taken {
                interrupted,
                next: Some((Lease { driver, ..lease }, next)),
            }))
        }
        None => {
            release(c, id, req.now)?;
            Ok(Some(Taken {
                interrupted,
                next: None,
            }))
        }
    }
}

/// The queued message `id` that `by` may change, or why not: [`QueuedChange::NotFound`], or the
/// refusal [`queued_refusal`] gives.
fn changeable_queued(
    c: &Connection,
    op: &QueuedOp<'_>,
) -> R<std::result::Result<StoredMessage, QueuedChange>> {
    let Some(current) = get_message(c, op.chat, op.id)? else {
        return Ok(Err(QueuedChange::NotFound));
    };
    let refused = queued_refusal(
        current.message.role.as_str(),
        current.author().map(UserId::as_str),
        current.queued,
        op.by,
    );
    Ok(refused.map_or(Ok(current), Err))
}

pub(crate) fn edit_queued(c: &Connection, op: &QueuedOp<'_>, edit: &QueuedEdit) -> R<QueuedChange> {
    let (chat, now) = (op.chat, op.now);
    let current = match changeable_queued(c, op)? {
        Ok(current) => current,
        Err(refused) => return Ok(refused),
    };
    let mut message = current.message.clone();
    if let Some(parts) = &edit.parts {
        message.parts = parts.clone();
    }
    let delivery = edit.delivery.unwrap_or(current.delivery);
    let version = bump(c, chat)?;
    exec(
        c,
        "UPDATE messages SET body = ?3, delivery = ?4, version = ?5, updated_at = ?6 \
         WHERE chat_id = ?1 AND seq = ?2",
        params![
            chat.as_str(),
            current.seq,
            message_body(&message)?,
            delivery.as_str(),
            version,
            now
        ],
    )?;
    touch(c, chat, now)?;
    Ok(QueuedChange::Done(Some(Box::new(stored(
        chat,
        &message,
        current.seq,
        None,
        current.sub,
        true,
        delivery,
        version,
    )))))
}

pub(crate) fn delete_queued(c: &Connection, op: &QueuedOp<'_>) -> R<QueuedChange> {
    let (chat, now) = (op.chat, op.now);
    let current = match changeable_queued(c, op)? {
        Ok(current) => current,
        Err(refused) => return Ok(refused),
    };
    bump(c, chat)?;
    exec(
        c,
        "DELETE FROM messages WHERE chat_id = ?1 AND seq = ?2",
        params![chat.as_str(), current.seq],
    )?;
    touch(c, chat, now)?;
    Ok(QueuedChange::Done(None))
}
