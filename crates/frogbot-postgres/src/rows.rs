//! Decoding rows into the store's types, and encoding what goes into JSON columns.
//!
//! A statement that returns two kinds of rows side by side (a chat and a message, a message and a
//! question) names the second kind's columns with a prefix (`m_seq`, `q_record`, …); the decoders
//! take that prefix.

use frogbot_core::model::{
    ChannelRef, ChatId, Delivery, MessageStatus, QuestionOutcome, UiMessage, UserId,
};
use frogbot_core::store::{ChatRow, Job, LeaseInfo, QuestionRow, StoredMessage};
use frogbot_core::store::{Result, StoreError};
use serde_json::Value;
use sqlx::Row;
use sqlx::postgres::PgRow;

/// The chat columns, as `SELECT` lists them (unprefixed).
macro_rules! chat_cols {
    ($t:literal) => {
        concat!(
            $t,
            ".chat_id, ",
            $t,
            ".owner, ",
            $t,
            ".channel_platform, ",
            $t,
            ".channel_thread, ",
            $t,
            ".created_at, ",
            $t,
            ".updated_at, ",
            $t,
            ".awaiting_message_id, ",
            $t,
            ".lease_holder, ",
            $t,
            ".lease_token, ",
            $t,
            ".lease_until, ",
            $t,
            ".driver, ",
            $t,
            ".version, ",
            $t,
            ".agent"
        )
    };
}

/// The message columns of table alias `$t`, each renamed with prefix `$p`.
macro_rules! msg_cols {
    ($t:literal, $p:literal) => {
        concat!(
            $t,
            ".seq AS ",
            $p,
            "seq, ",
            $t,
            ".chat_id AS ",
            $p,
            "chat_id, ",
            $t,
            ".id AS ",
            $p,
            "id, ",
            $t,
            ".queued AS ",
            $p,
            "queued, ",
            $t,
            ".delivery AS ",
            $p,
            "delivery, ",
            $t,
            ".position AS ",
            $p,
            "position, ",
            $t,
            ".sub AS ",
            $p,
            "sub, ",
            $t,
            ".body AS ",
            $p,
            "body, ",
            $t,
            ".version AS ",
            $p,
            "version"
        )
    };
}

/// The question columns of table alias `$t`, each renamed with prefix `$p`.
macro_rules! question_cols {
    ($t:literal, $p:literal) => {
        concat!(
            $t,
            ".chat_id AS ",
            $p,
            "chat_id, ",
            $t,
            ".tool_call_id AS ",
            $p,
            "tool_call_id, ",
            $t,
            ".message_id AS ",
            $p,
            "message_id, ",
            $t,
            ".call_index AS ",
            $p,
            "call_index, ",
            $t,
            ".input AS ",
            $p,
            "input, ",
            $t,
            ".record AS ",
            $p,
            "record, ",
            $t,
            ".rendered AS ",
            $p,
            "rendered, ",
            $t,
            ".posting AS ",
            $p,
            "posting, ",
            $t,
            ".outcome AS ",
            $p,
            "outcome, ",
            $t,
            ".actor AS ",
            $p,
            "actor, ",
            $t,
            ".outcome_at AS ",
            $p,
            "outcome_at, ",
            $t,
            ".closed AS ",
            $p,
            "closed, ",
            $t,
            ".answer_deadline AS ",
            $p,
            "answer_deadline, ",
            $t,
            ".created_at AS ",
            $p,
            "created_at, ",
            $t,
            ".updated_at AS ",
            $p,
            "updated_at, ",
            $t,
            ".expires_at AS ",
            $p,
            "expires_at, ",
            $t,
            ".lock_holder AS ",
            $p,
            "lock_holder, ",
            $t,
            ".lock_token AS ",
            $p,
            "lock_token, ",
            $t,
            ".lock_until AS ",
            $p,
            "lock_until"
        )
    };
}

/// The job columns.
macro_rules! job_cols {
    () => {
        "id, kind, key, payload, run_at, attempts, claimed_by, claim_until, last_error, dead, \
         generation"
    };
}

pub(crate) use {chat_cols, job_cols, msg_cols, question_cols};

pub(crate) fn to_json<T: serde::Serialize + ?Sized>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| StoreError::corrupt("a value does not encode as JSON", e))
}

pub(crate) fn from_json<T: serde::de::DeserializeOwned>(what: &str, s: &str) -> Result<T> {
    serde_json::from_str(s).map_err(|e| StoreError::corrupt_msg(format!("{what}: {e}")))
}

/// A column read, with decoding failures reported as corrupt data.
fn get<'r, T>(r: &'r PgRow, col: &str) -> Result<T>
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    r.try_get(col).map_err(|e| match e {
        sqlx::Error::ColumnNotFound(c) => {
            StoreError::unavailable_msg(format!("internal: no column {c}"))
        }
        e => StoreError::corrupt_msg(format!("column {col}: {e}")),
    })
}

fn chat_id(s: String) -> Result<ChatId> {
    ChatId::new(s).map_err(|e| StoreError::corrupt_msg(e.to_string()))
}

pub(crate) fn delivery(s: &str) -> Result<Delivery> {
    match s {
        "queue" => Ok(Delivery::Queue),
        "steer" => Ok(Delivery::Steer),
        other => Err(StoreError::corrupt_msg(format!("delivery {other:?}"))),
    }
}

/// The body stored for a message: the message without the column-owned `status` and `delivery`.
pub(crate) fn message_body(m: &UiMessage) -> Result<String> {
    let mut m = m.clone();
    m.metadata.status = None;
    m.metadata.delivery = None;
    to_json(&m)
}

pub(crate) fn chat(r: &PgRow) -> Result<ChatRow> {
    let platform: Option<String> = get(r, "channel_platform")?;
    let thread: Option<String> = get(r, "channel_thread")?;
    let holder: Option<String> = get(r, "lease_holder")?;
    Ok(ChatRow {
        chat_id: chat_id(get(r, "chat_id")?)?,
        owner: get::<Option<String>>(r, "owner")?.map(UserId),
        channel: match (platform, thread) {
            (Some(platform), Some(thread)) => Some(ChannelRef { platform, thread }),
            _ => None,
        },
        created_at: get(r, "created_at")?,
        updated_at: get(r, "updated_at")?,
        awaiting_message_id: get(r, "awaiting_message_id")?,
        lease: match holder {
            Some(holder) => Some(LeaseInfo {
                holder,
                token: get(r, "lease_token")?,
                expires_at: get(r, "lease_until")?,
                driver: get::<Option<String>>(r, "driver")?.map(UserId),
            }),
            None => None,
        },
        version: get(r, "version")?,
        agent: get(r, "agent")?,
    })
}

/// A message whose columns carry prefix `p`; `None` when the row has none (an outer join).
pub(crate) fn message_opt(r: &PgRow, p: &str) -> Result<Option<StoredMessage>> {
    joined::<i64, _>(r, p, "seq", message)
}

/// What `decode` reads from the columns with prefix `p`; `None` when the row has none (an outer
/// join: its `key` column, of type `K`, is NULL).
fn joined<K, T>(
    r: &PgRow,
    p: &str,
    key: &str,
    decode: fn(&PgRow, &str) -> Result<T>,
) -> Result<Option<T>>
where
    K: for<'a> sqlx::Decode<'a, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    match get::<Option<K>>(r, &format!("{p}{key}"))? {
        Some(_) => decode(r, p).map(Some),
        None => Ok(None),
    }
}

pub(crate) fn message(r: &PgRow, p: &str) -> Result<StoredMessage> {
    let col = |c: &str| format!("{p}{c}");
    let body: String = get(r, &col("body"))?;
    let mut message: UiMessage = from_json("message body", &body)?;
    let queued: bool = get(r, &col("queued"))?;
    let delivery = delivery(&get::<String>(r, &col("delivery"))?)?;
    if queued {
        message.metadata.status = Some(MessageStatus::Queued);
        message.metadata.delivery = Some(delivery);
    }
    Ok(StoredMessage {
        chat_id: chat_id(get(r, &col("chat_id"))?)?,
        message,
        seq: get(r, &col("seq"))?,
        position: get(r, &col("position"))?,
        sub: get(r, &col("sub"))?,
        queued,
        delivery,
        version: get(r, &col("version"))?,
    })
}

/// A question whose columns carry prefix `p`; `None` when the row has none (an outer join).
pub(crate) fn question_opt(r: &PgRow, p: &str) -> Result<Option<QuestionRow>> {
    joined::<String, _>(r, p, "tool_call_id", question)
}

pub(crate) fn question(r: &PgRow, p: &str) -> Result<QuestionRow> {
    let col = |c: &str| format!("{p}{c}");
    let outcome: Option<String> = get(r, &col("outcome"))?;
    let actor: Option<String> = get(r, &col("actor"))?;
    Ok(QuestionRow {
        chat_id: chat_id(get(r, &col("chat_id"))?)?,
        tool_call_id: get(r, &col("tool_call_id"))?,
        message_id: get(r, &col("message_id"))?,
        call_index: get(r, &col("call_index"))?,
        input: from_json("question input", &get::<String>(r, &col("input"))?)?,
        record: from_json("question record", &get::<String>(r, &col("record"))?)?,
        rendered: get(r, &col("rendered"))?,
        posting: get(r, &col("posting"))?,
        outcome: outcome
            .map(|o| from_json::<QuestionOutcome>("question outcome", &o))
            .transpose()?,
        actor: actor.map(|a| from_json("question actor", &a)).transpose()?,
        outcome_at: get(r, &col("outcome_at"))?,
        closed: get(r, &col("closed"))?,
        answer_deadline: get(r, &col("answer_deadline"))?,
        created_at: get(r, &col("created_at"))?,
        updated_at: get(r, &col("updated_at"))?,
        expires_at: get(r, &col("expires_at"))?,
        lock_holder: get(r, &col("lock_holder"))?,
        lock_until: get(r, &col("lock_until"))?,
    })
}

pub(crate) fn job(r: &PgRow) -> Result<Job> {
    Ok(Job {
        id: get(r, "id")?,
        kind: get(r, "kind")?,
        key: get(r, "key")?,
        payload: from_json::<Value>("job payload", &get::<String>(r, "payload")?)?,
        run_at: get(r, "run_at")?,
        attempts: get(r, "attempts")?,
        claimed_by: get(r, "claimed_by")?,
        claim_until: get(r, "claim_until")?,
        last_error: get(r, "last_error")?,
        dead: get(r, "dead")?,
        generation: get(r, "generation")?,
    })
}
