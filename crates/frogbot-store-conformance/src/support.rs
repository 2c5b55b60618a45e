//! What the cases share: fixed times, the chats and messages they write, and one-line forms of
//! the store operations they repeat.

use serde_json::json;

use frogbot_core::model::{
    ChannelRef, ChatId, Delivery, MessageMetadata, MessagePart, Millis, QuestionAnswer,
    QuestionInput, QuestionItem, QuestionMessage, QuestionOption, QuestionOutcome, QuestionOutput,
    QuestionRecord, Role, UiMessage, UserId,
};
use frogbot_core::store::*;

pub(crate) const T0: Millis = 1_800_000_000_000;
pub(crate) const TTL: Millis = 60_000;

pub(crate) fn user(id: &str) -> UserId {
    UserId::new(id)
}

/// A web chat to create or open, written by `owner`.
pub(crate) fn web(id: &str, owner: Option<&str>) -> NewChat {
    NewChat {
        chat_id: ChatId::new(id).unwrap(),
        owner: owner.map(user),
        channel: None,
    }
}

pub(crate) fn thread_ref(thread: &str) -> ChannelRef {
    ChannelRef {
        platform: "forum".into(),
        thread: thread.into(),
    }
}

/// A channel chat of a `forum` thread, written by `writer`.
pub(crate) fn in_thread(id: &str, writer: Option<&str>, thread: &str) -> NewChat {
    NewChat {
        chat_id: ChatId::new(id).unwrap(),
        owner: writer.map(user),
        channel: Some(thread_ref(thread)),
    }
}

pub(crate) fn user_msg(id: &str, author: Option<&str>, text: &str) -> UiMessage {
    UiMessage {
        id: id.into(),
        role: Role::User,
        parts: vec![MessagePart::text(text)],
        metadata: MessageMetadata {
            author: author.map(user),
            created_at: frogbot_core::model::millis_to_iso(T0),
            ..Default::default()
        },
    }
}

pub(crate) fn assistant_msg(id: &str, text: &str) -> UiMessage {
    UiMessage {
        id: id.into(),
        role: Role::Assistant,
        parts: vec![MessagePart::text(text)],
        metadata: MessageMetadata::default(),
    }
}

pub(crate) fn lease_req(holder: &str, driver: Option<&str>, now: Millis) -> LeaseRequest {
    LeaseRequest {
        holder: holder.into(),
        driver: driver.map(user),
        ttl_ms: TTL,
        now,
        interrupted: None,
    }
}

/// `send` of `message` by its author, queueing when busy; the lease holder is `holder`.
pub(crate) async fn send_as(
    s: &dyn Store,
    chat: &NewChat,
    message: &UiMessage,
    delivery: Delivery,
    holder: &str,
    now: Millis,
) -> Result<Sent> {
    let req = LeaseRequest {
        holder: holder.into(),
        driver: message.metadata.author.clone(),
        ttl_ms: TTL,
        now,
        interrupted: None,
    };
    s.send(&SendOp {
        chat,
        message: &message.clone(),
        delivery,
        lease: &req,
        queue_if_busy: true,
    })
    .await
}

pub(crate) fn started(sent: Sent) -> (Lease, StoredMessage) {
    match sent {
        Sent::Started { lease, message, .. } => (lease, message),
        other => panic!("expected Started, got {other:?}"),
    }
}

pub(crate) fn queued(sent: Sent) -> (StoredMessage, Delivery) {
    match sent {
        Sent::Queued {
            message, delivery, ..
        } => (message, delivery),
        other => panic!("expected Queued, got {other:?}"),
    }
}

/// Starts a turn with a new user message `id` by `author` (the chat must be idle).
pub(crate) async fn start(
    s: &dyn Store,
    chat: &NewChat,
    id: &str,
    author: Option<&str>,
    now: Millis,
) -> (Lease, StoredMessage) {
    started(
        send_as(
            s,
            chat,
            &user_msg(id, author, "go"),
            Delivery::Queue,
            &format!("turn-{id}"),
            now,
        )
        .await
        .unwrap(),
    )
}

/// Queues a message `id` by `author` (the chat must be busy).
pub(crate) async fn enqueue(
    s: &dyn Store,
    chat: &NewChat,
    id: &str,
    author: Option<&str>,
    delivery: Delivery,
    now: Millis,
) -> (StoredMessage, Delivery) {
    queued(
        send_as(s, chat, &user_msg(id, author, id), delivery, "unused", now)
            .await
            .unwrap(),
    )
}

pub(crate) async fn checkpoint(
    s: &dyn Store,
    lease: &Lease,
    reply: &UiMessage,
    position: i64,
    join_steers: bool,
    now: Millis,
) -> Result<Checkpointed> {
    s.checkpoint(&CheckpointOp {
        lease,
        reply,
        position,
        join_steers,
        now,
    })
    .await
}

pub(crate) async fn end_next(s: &dyn Store, lease: &Lease, now: Millis) -> Result<TurnEnded> {
    s.end_turn(&EndTurnOp {
        lease,
        reply: None,
        mode: EndMode::Next,
        now,
        delivery: None,
    })
    .await
}

pub(crate) async fn chat_row(s: &dyn Store, chat: &NewChat) -> ChatRow {
    s.get_chat(&chat.chat_id).await.unwrap().expect("chat")
}

pub(crate) fn ids(messages: &[StoredMessage]) -> Vec<String> {
    messages.iter().map(|m| m.message.id.clone()).collect()
}

pub(crate) fn lost<T: std::fmt::Debug>(r: Result<T>) -> bool {
    matches!(r, Err(StoreError::LeaseLost { .. }))
}

pub(crate) fn question_input() -> QuestionInput {
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

pub(crate) fn answer(label: &str) -> QuestionOutcome {
    QuestionOutcome::Answered(QuestionOutput {
        answers: vec![QuestionAnswer {
            header: "Deploy".into(),
            selected: vec![label.into()],
        }],
    })
}

pub(crate) fn new_question(chat: &ChatId, call: &str, message_id: &str, index: i64) -> NewQuestion {
    NewQuestion {
        tool_call_id: call.into(),
        chat_id: chat.clone(),
        message_id: message_id.into(),
        call_index: index,
        input: question_input(),
        answer_deadline: None,
    }
}

pub(crate) async fn add_question(s: &dyn Store, chat: &ChatId, call: &str, now: Millis) {
    s.insert_questions(&[new_question(chat, call, "a1", 0)], now)
        .await
        .unwrap();
}

pub(crate) fn record(messages: &[&str], revision: u64) -> QuestionRecord {
    QuestionRecord {
        messages: messages
            .iter()
            .map(|id| QuestionMessage {
                id: (*id).into(),
                posted_at: String::new(),
                question: None,
            })
            .collect(),
        revision,
        state: None,
    }
}

pub(crate) fn job(kind: &str, key: Option<&str>, run_at: Millis) -> NewJob {
    NewJob {
        kind: kind.into(),
        key: key.map(Into::into),
        payload: json!({"kind": kind}),
        run_at,
    }
}

pub(crate) async fn record_op(
    s: &dyn Store,
    chat: &ChatId,
    call: &str,
    outcome: &QuestionOutcome,
    expected_revision: Option<u64>,
    lock: Option<LockRequest<'_>>,
    now: Millis,
) -> Recorded {
    s.record_outcome(&RecordOp {
        chat,
        tool_call_id: call,
        outcome,
        actor: None,
        expected_revision,
        lock,
        resume: None,
        now,
    })
    .await
    .unwrap()
}

pub(crate) async fn update(
    s: &dyn Store,
    lock: &QuestionLock,
    update: &QuestionUpdate,
    now: Millis,
) -> Result<QuestionRow> {
    s.update_question(&UpdateQuestionOp {
        lock,
        update,
        link_platform: None,
        job: None,
        keep_lock: false,
        now,
    })
    .await
}

pub(crate) async fn lock(
    s: &dyn Store,
    chat: &ChatId,
    call: &str,
    holder: &str,
    ttl: Millis,
    now: Millis,
) -> Option<QuestionLock> {
    s.lock_question(&LockQuestionOp {
        chat,
        tool_call_id: call,
        lock: LockRequest {
            holder,
            ttl_ms: ttl,
        },
        now,
    })
    .await
    .unwrap()
    .map(|(l, _)| l)
}
