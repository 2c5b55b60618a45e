//! Fixtures shared by this crate's integration tests.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use frogbot_core::model::{
    ChatId, Delivery, MessageMetadata, MessagePart, Millis, QuestionAnswer, QuestionInput,
    QuestionItem, QuestionOption, QuestionOutcome, QuestionOutput, Role, UiMessage, UserId,
};
use frogbot_core::store::{DynStore, LeaseRequest, NewChat, NewQuestion, SendOp, Sent, Store};
use frogbot_postgres::{PostgresStore, StoreOptions};

pub const T0: Millis = 1_800_000_000_000;
pub const TTL: Millis = 60_000;

/// Opens a handle on `url` (a second call opens a second pool, as a second process would).
pub async fn open(url: &str, careful: bool) -> DynStore {
    open_with(url, careful, StoreOptions::default()).await
}

pub async fn open_with(url: &str, careful: bool, options: StoreOptions) -> DynStore {
    let s = PostgresStore::open_with(url, options)
        .await
        .expect("open the PostgreSQL store");
    Arc::new(if careful { s.careful_only() } else { s })
}

pub fn chat(id: &str) -> ChatId {
    ChatId::new(id).unwrap()
}

pub fn user(id: &str) -> UserId {
    UserId::new(id)
}

pub fn user_msg(id: &str, author: Option<&str>, text: &str) -> UiMessage {
    UiMessage {
        id: id.into(),
        role: Role::User,
        parts: vec![MessagePart::text(text)],
        metadata: MessageMetadata {
            author: author.map(user),
            model: Some("demo".into()),
            reasoning: Some("low".into()),
            created_at: frogbot_core::model::millis_to_iso(T0),
            ..Default::default()
        },
    }
}

pub fn assistant_msg(id: &str, text: &str) -> UiMessage {
    UiMessage {
        id: id.into(),
        role: Role::Assistant,
        parts: vec![MessagePart::text(text)],
        metadata: MessageMetadata::default(),
    }
}

pub fn lease_req(holder: &str, driver: Option<&str>, now: Millis) -> LeaseRequest {
    LeaseRequest {
        holder: holder.into(),
        driver: driver.map(user),
        ttl_ms: TTL,
        now,
        interrupted: None,
    }
}

pub fn web_chat(id: &str, owner: Option<&str>) -> NewChat {
    NewChat {
        chat_id: chat(id),
        owner: owner.map(user),
        channel: None,
    }
}

/// Sends `msg` from its author to a web chat owned by `owner`.
pub async fn send(
    s: &dyn Store,
    c: &NewChat,
    msg: &UiMessage,
    delivery: Delivery,
    holder: &str,
    now: Millis,
) -> Sent {
    let req = LeaseRequest {
        holder: holder.into(),
        driver: msg.metadata.author.clone(),
        ttl_ms: TTL,
        now,
        interrupted: None,
    };
    s.send(&SendOp {
        chat: c,
        message: msg,
        delivery,
        lease: &req,
        queue_if_busy: true,
    })
    .await
    .expect("send")
}

pub fn question_input() -> QuestionInput {
    QuestionInput {
        questions: vec![QuestionItem {
            header: "Deploy".into(),
            question: "Ship it?".into(),
            options: vec![
                QuestionOption {
                    label: "yes".into(),
                    description: None,
                },
                QuestionOption {
                    label: "no".into(),
                    description: None,
                },
            ],
            multiple: false,
            custom: false,
            default: None,
            ..Default::default()
        }],
        expires_in_seconds: None,
        from: Vec::new(),
        blocks: Vec::new(),
    }
}

pub fn answer(label: &str) -> QuestionOutcome {
    QuestionOutcome::Answered(QuestionOutput {
        answers: vec![QuestionAnswer {
            header: "Deploy".into(),
            selected: vec![label.into()],
        }],
    })
}

pub fn new_question(c: &ChatId, call: &str, message_id: &str, index: i64) -> NewQuestion {
    NewQuestion {
        tool_call_id: call.into(),
        chat_id: c.clone(),
        message_id: message_id.into(),
        call_index: index,
        input: question_input(),
        answer_deadline: None,
    }
}
