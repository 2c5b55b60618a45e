//! The store conformance suite: one set of tests every [`Store`] backend must pass.
//!
//! Each test takes a [`Db`]: a fresh, empty database's store, and a way to open a second handle on
//! the same database (as a second process would). A backend runs the whole suite with
//! [`crate::store_conformance_tests!`], given an async function that makes a [`Db`] (or `None` to
//! skip, e.g. when a database server is not installed):
//!
//! ```ignore
//! async fn fresh() -> Option<frogbot_core::store::conformance::Db> { … }
//! frogbot_core::store_conformance_tests!(fresh);
//! ```
//!
//! The factory, not a URL, is the interface, so a wrapped or third-party store runs the suite too.
//!
//! Times are fixed (`T0` onwards) and passed in, as the trait takes them; nothing reads a clock.

#![allow(missing_docs, clippy::missing_panics_doc)]

use std::any::Any;
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::model::{
    Ack, Actor, ChannelRef, ChatId, Delivery, ErrorInfo, MessageMetadata, MessagePart,
    MessageStatus, QUESTION_TOOL, QuestionAnswer, QuestionInput, QuestionItem, QuestionMessage,
    QuestionOption, QuestionOutcome, QuestionOutput, QuestionRecord, Role, ToolPart, ToolState,
    TurnState, UiMessage, UserId,
};
use crate::store::StoreError;

/// Opens another handle on the same database.
pub type Reopen = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = DynStore> + Send>> + Send + Sync>;

/// A fresh database for one test.
pub struct Db {
    /// The first handle.
    pub store: DynStore,
    reopen: Reopen,
    _guard: Box<dyn Any + Send + Sync>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("store", &self.store).finish()
    }
}

impl Db {
    /// A database: its first handle, how to open another, and whatever keeps it alive.
    pub fn new(store: DynStore, reopen: Reopen, guard: impl Any + Send + Sync) -> Self {
        Self {
            store,
            reopen,
            _guard: Box::new(guard),
        }
    }

    /// Another handle on the same database (another process).
    pub async fn second_handle(&self) -> DynStore {
        (self.reopen)().await
    }
}

/// Runs every conformance test against the store that `$fresh().await` makes (an
/// `async fn() -> Option<Db>`; `None` skips the test).
#[macro_export]
macro_rules! store_conformance_tests {
    ($fresh:path) => {
        $crate::store_conformance_tests!(@tests $fresh;
            conformance_harness_opens_a_store,
            // chats and who writes them
            chat_created_by_first_send_and_owned_by_its_sender,
            chat_list_is_per_owner_newest_first,
            chat_channel_is_kept_and_found_by_thread,
            send_checks_who_writes_a_chat,
            send_duplicate_id_changes_nothing,
            send_without_queueing_is_busy_and_saves_nothing,
            send_steers_only_from_the_driver_while_live,
            send_sixteen_racing_one_starts_the_rest_run_in_order,
            send_racing_end_turn_never_strands_a_queued_message,
            // leases
            lease_past_expiry_is_taken_over,
            lease_renewal_keeps_the_chat,
            lease_fenced_writes_refused_after_takeover,
            takeover_marks_the_interrupted_turn,
            takeover_keeps_settled_answers_in_the_interrupted_reply,
            takeover_writes_what_the_interrupted_reply_owes,
            earlier_jobs_are_found_by_key_prefix_in_order,
            a_deferred_job_keeps_its_attempts,
            expired_leases_and_expire_lease,
            // turns
            checkpoint_joins_the_drivers_steers_in_order,
            await_answers_saves_questions_and_releases,
            end_turn_next_releases_or_promotes,
            end_turn_handoff_releases_and_schedules,
            take_chat_runs_the_queue_of_an_idle_chat,
            resume_turn_each_answer,
            record_outcome_continues_the_turn_when_asked,
            turn_awaiting_blocks_new_turns_until_resumed,
            // messages and the queue
            queue_is_oldest_first_across_two_handles,
            queue_edit_and_delete_only_by_author_before_promotion,
            messages_keep_turn_order_with_steers_and_queue,
            messages_since_follows_versions,
            // questions
            question_records_of_a_message_in_call_order,
            mark_rendered_saves_records_and_links,
            question_message_links_outlive_the_message_list,
            record_outcome_first_wins_and_is_fenced,
            question_first_outcome_wins_across_handles,
            advance_question_is_fenced_by_revision,
            update_question_under_lock,
            question_lock_is_exclusive_and_fences_updates,
            question_locked_updates_lose_nothing,
            question_past_ttl_is_gone,
            question_answered_lives_24_hours,
            // jobs
            job_is_claimed_by_one_worker,
            job_is_retried_at_its_run_at_time,
            job_key_reschedules_and_revives,
            job_survives_reopening_the_store,
            delivery_job_is_written_with_the_turns_end,
            dead_jobs_are_listed_and_purged,
            // operators
            operators_find_chats_by_state_and_channel,
            operators_list_revive_and_count_jobs,
            operators_count_the_backlog,
            // agent chats
            agent_chats_bind_once_and_keep_the_writer_rules,
            agent_messages_append_outside_turns_and_dedup,
            agent_message_updates_are_fenced_by_version,
            inbox_is_taken_once_marked_seen_per_agent,
        );
    };
    (@tests $fresh:path; $($name:ident),* $(,)?) => {
        mod store_conformance {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(db) = $fresh().await else { return };
                    $crate::store::conformance::$name(db).await;
                }
            )*
        }
    };
}

/// The harness itself: a fresh store answers, and a second handle sees the same database.
pub async fn conformance_harness_opens_a_store(db: Db) {
    db.store.ping().await.expect("ping");
    let other = db.second_handle().await;
    other.ping().await.expect("ping the second handle");
    let c = web("harness", None);
    start(&*db.store, &c, "u1", None, T0).await;
    assert!(
        other.get_chat(&c.chat_id).await.unwrap().is_some(),
        "the second handle reads what the first wrote"
    );
}

// ---- helpers -------------------------------------------------------------------------------------

const T0: Millis = 1_800_000_000_000;
const TTL: Millis = 60_000;

fn user(id: &str) -> UserId {
    UserId::new(id)
}

/// A web chat to create or open, written by `owner`.
fn web(id: &str, owner: Option<&str>) -> NewChat {
    NewChat {
        chat_id: ChatId::new(id).unwrap(),
        owner: owner.map(user),
        channel: None,
    }
}

fn thread_ref(thread: &str) -> ChannelRef {
    ChannelRef {
        platform: "forum".into(),
        thread: thread.into(),
    }
}

/// A channel chat of a `forum` thread, written by `writer`.
fn in_thread(id: &str, writer: Option<&str>, thread: &str) -> NewChat {
    NewChat {
        chat_id: ChatId::new(id).unwrap(),
        owner: writer.map(user),
        channel: Some(thread_ref(thread)),
    }
}

fn user_msg(id: &str, author: Option<&str>, text: &str) -> UiMessage {
    UiMessage {
        id: id.into(),
        role: Role::User,
        parts: vec![MessagePart::text(text)],
        metadata: MessageMetadata {
            author: author.map(user),
            created_at: crate::model::millis_to_iso(T0),
            ..Default::default()
        },
    }
}

fn assistant_msg(id: &str, text: &str) -> UiMessage {
    UiMessage {
        id: id.into(),
        role: Role::Assistant,
        parts: vec![MessagePart::text(text)],
        metadata: MessageMetadata::default(),
    }
}

fn lease_req(holder: &str, driver: Option<&str>, now: Millis) -> LeaseRequest {
    LeaseRequest {
        holder: holder.into(),
        driver: driver.map(user),
        ttl_ms: TTL,
        now,
        interrupted: None,
    }
}

/// `send` of `message` by its author, queueing when busy; the lease holder is `holder`.
async fn send_as(
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

fn started(sent: Sent) -> (Lease, StoredMessage) {
    match sent {
        Sent::Started { lease, message, .. } => (lease, message),
        other => panic!("expected Started, got {other:?}"),
    }
}

fn queued(sent: Sent) -> (StoredMessage, Delivery) {
    match sent {
        Sent::Queued {
            message, delivery, ..
        } => (message, delivery),
        other => panic!("expected Queued, got {other:?}"),
    }
}

/// Starts a turn with a new user message `id` by `author` (the chat must be idle).
async fn start(
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
async fn enqueue(
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

async fn checkpoint(
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

async fn end_next(s: &dyn Store, lease: &Lease, now: Millis) -> Result<TurnEnded> {
    s.end_turn(&EndTurnOp {
        lease,
        reply: None,
        mode: EndMode::Next,
        now,
        delivery: None,
    })
    .await
}

async fn chat_row(s: &dyn Store, chat: &NewChat) -> ChatRow {
    s.get_chat(&chat.chat_id).await.unwrap().expect("chat")
}

fn ids(messages: &[StoredMessage]) -> Vec<String> {
    messages.iter().map(|m| m.message.id.clone()).collect()
}

fn lost<T: std::fmt::Debug>(r: Result<T>) -> bool {
    matches!(r, Err(StoreError::LeaseLost { .. }))
}

fn question_input() -> QuestionInput {
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
    }
}

fn answer(label: &str) -> QuestionOutcome {
    QuestionOutcome::Answered(QuestionOutput {
        answers: vec![QuestionAnswer {
            header: "Deploy".into(),
            selected: vec![label.into()],
        }],
    })
}

fn new_question(chat: &ChatId, call: &str, message_id: &str, index: i64) -> NewQuestion {
    NewQuestion {
        tool_call_id: call.into(),
        chat_id: chat.clone(),
        message_id: message_id.into(),
        call_index: index,
        input: question_input(),
        answer_deadline: None,
    }
}

async fn add_question(s: &dyn Store, chat: &ChatId, call: &str, now: Millis) {
    s.insert_questions(&[new_question(chat, call, "a1", 0)], now)
        .await
        .unwrap();
}

fn record(messages: &[&str], revision: u64) -> QuestionRecord {
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

fn job(kind: &str, key: Option<&str>, run_at: Millis) -> NewJob {
    NewJob {
        kind: kind.into(),
        key: key.map(Into::into),
        payload: json!({"kind": kind}),
        run_at,
    }
}

async fn record_op(
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

async fn update(
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

async fn lock(
    s: &dyn Store,
    chat: &ChatId,
    call: &str,
    holder: &str,
    ttl: Millis,
    now: Millis,
) -> Option<QuestionLock> {
    s.lock_question(chat, call, holder, ttl, now)
        .await
        .unwrap()
        .map(|(l, _)| l)
}

// ---- chats and who writes them -------------------------------------------------------------------

pub async fn chat_created_by_first_send_and_owned_by_its_sender(db: Db) {
    let s = &*db.store;
    let c = web("owned", Some("alice"));
    assert!(s.get_chat(&c.chat_id).await.unwrap().is_none());
    let sent = send_as(
        s,
        &c,
        &user_msg("u1", Some("alice"), "hi"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await
    .unwrap();
    let Sent::Started {
        chat,
        created,
        prior_version,
        lease,
        message,
        interrupted,
    } = sent
    else {
        panic!("the first message starts a turn: {sent:?}")
    };
    assert!(created);
    assert_eq!(prior_version, 0);
    assert_eq!(chat.owner, Some(user("alice")));
    assert_eq!(chat.created_at, T0);
    assert_eq!(chat.state(T0), TurnState::Running);
    assert_eq!(lease.driver, Some(user("alice")));
    assert!(!lease.taken_over);
    assert!(interrupted.is_none());
    assert_eq!(message.position, Some(1));
    assert_eq!(message.sub, 0);
    assert!(!message.queued);
    assert_eq!(message.message.metadata.status, None);
    // Sending again does not create it again, and keeps its owner.
    let (m, _) = enqueue(s, &c, "u2", Some("alice"), Delivery::Queue, T0 + 1).await;
    assert!(m.queued);
    let row = chat_row(s, &c).await;
    assert_eq!(row.owner, Some(user("alice")));
    assert_eq!(row.created_at, T0);
    assert!(
        s.get_chat(&ChatId::new("missing").unwrap())
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn chat_list_is_per_owner_newest_first(db: Db) {
    let s = &*db.store;
    let a = web("a", Some("alice"));
    start(s, &a, "a1", Some("alice"), T0).await;
    start(s, &web("b", Some("alice")), "b1", Some("alice"), T0 + 1).await;
    start(s, &web("anon", None), "n1", None, T0 + 2).await;
    start(s, &web("bobs", Some("bob")), "o1", Some("bob"), T0 + 3).await;
    // A message for `a` makes it the newest.
    enqueue(s, &a, "a2", Some("alice"), Delivery::Queue, T0 + 10).await;
    let names = |rows: Vec<ChatRow>| -> Vec<String> {
        rows.into_iter().map(|c| c.chat_id.to_string()).collect()
    };
    assert_eq!(
        names(s.list_chats(Some(&user("alice")), 100).await.unwrap()),
        ["a", "b"]
    );
    assert_eq!(
        names(s.list_chats(Some(&user("alice")), 1).await.unwrap()),
        ["a"]
    );
    assert_eq!(names(s.list_chats(None, 100).await.unwrap()), ["anon"]);
}

pub async fn chat_channel_is_kept_and_found_by_thread(db: Db) {
    let s = &*db.store;
    let c = in_thread("_slack-thread", Some("alice"), "C1:1.2");
    start(s, &c, "u1", Some("alice"), T0).await;
    let row = chat_row(s, &c).await;
    assert_eq!(row.channel, Some(thread_ref("C1:1.2")));
    assert_eq!(
        s.get_channel_chat("forum", "C1:1.2")
            .await
            .unwrap()
            .map(|r| r.chat_id),
        Some(c.chat_id.clone())
    );
    assert!(
        s.get_channel_chat("forum", "C1:9.9")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        s.get_channel_chat("other", "C1:1.2")
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn send_checks_who_writes_a_chat(db: Db) {
    let s = &*db.store;
    let msg = |id: &str, author: &str| user_msg(id, Some(author), "x");
    // An owned web chat: its owner only.
    let owned = web("owned", Some("alice"));
    start(s, &owned, "o1", Some("alice"), T0).await;
    let r = send_as(
        s,
        &web("owned", Some("bob")),
        &msg("o2", "bob"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await;
    assert!(matches!(r, Err(StoreError::Forbidden { .. })), "{r:?}");
    let r = send_as(
        s,
        &web("owned", None),
        &user_msg("o3", None, "x"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await;
    assert!(
        matches!(r, Err(StoreError::Forbidden { .. })),
        "an anonymous writer: {r:?}"
    );
    // A web chat written from a channel, and the other way round, and another thread.
    let r = send_as(
        s,
        &in_thread("owned", Some("alice"), "t1"),
        &msg("o4", "alice"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await;
    assert!(matches!(r, Err(StoreError::ChannelChat { .. })), "{r:?}");
    let chan = in_thread("_chan", Some("alice"), "t1");
    start(s, &chan, "c1", Some("alice"), T0).await;
    let r = send_as(
        s,
        &web("_chan", Some("alice")),
        &msg("c2", "alice"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await;
    assert!(matches!(r, Err(StoreError::ChannelChat { .. })), "{r:?}");
    let r = send_as(
        s,
        &in_thread("_chan", Some("alice"), "t2"),
        &msg("c3", "alice"),
        Delivery::Queue,
        "p",
        T0,
    )
    .await;
    assert!(matches!(r, Err(StoreError::ChannelChat { .. })), "{r:?}");
    // Refused sends saved nothing.
    for (chat, id) in [
        (&owned, "o2"),
        (&owned, "o3"),
        (&owned, "o4"),
        (&chan, "c2"),
        (&chan, "c3"),
    ] {
        assert!(
            s.get_message(&chat.chat_id, id).await.unwrap().is_none(),
            "{id} was saved"
        );
    }
    assert_eq!(s.list_messages(&owned.chat_id).await.unwrap().len(), 1);
    // A channel chat is written by everyone in its thread.
    let (m, _) = enqueue(
        s,
        &in_thread("_chan", Some("bob"), "t1"),
        "c4",
        Some("bob"),
        Delivery::Queue,
        T0,
    )
    .await;
    assert_eq!(m.author(), Some(&user("bob")));
    assert_eq!(chat_row(s, &chan).await.owner, Some(user("alice")));
    // An ownerless web chat by anyone.
    let anon = web("anon", None);
    start(s, &anon, "n1", None, T0).await;
    enqueue(
        s,
        &web("anon", Some("bob")),
        "n2",
        Some("bob"),
        Delivery::Queue,
        T0,
    )
    .await;
    enqueue(
        s,
        &web("anon", Some("carol")),
        "n3",
        Some("carol"),
        Delivery::Queue,
        T0,
    )
    .await;
    assert_eq!(s.queued_messages(&anon.chat_id).await.unwrap().len(), 2);
    assert_eq!(chat_row(s, &anon).await.owner, None);
}

pub async fn send_duplicate_id_changes_nothing(db: Db) {
    let s = &*db.store;
    let c = web("dup", None);
    start(s, &c, "u1", None, T0).await;
    enqueue(s, &c, "m", None, Delivery::Queue, T0 + 1).await;
    let before = chat_row(s, &c).await;
    for (id, text) in [("m", "again"), ("u1", "again")] {
        let sent = send_as(
            s,
            &c,
            &user_msg(id, None, text),
            Delivery::Queue,
            "p",
            T0 + 2,
        )
        .await
        .unwrap();
        assert!(matches!(sent, Sent::Duplicate { .. }), "{sent:?}");
    }
    assert_eq!(
        s.queued_messages(&c.chat_id).await.unwrap()[0]
            .message
            .text(),
        "m"
    );
    assert_eq!(
        s.get_message(&c.chat_id, "u1")
            .await
            .unwrap()
            .unwrap()
            .message
            .text(),
        "go"
    );
    assert_eq!(
        chat_row(s, &c).await.version,
        before.version,
        "a duplicate writes nothing"
    );
    // A repeated first message of an idle chat is a duplicate too, not a new turn.
    end_next(s, &started_lease(s, &c).await, T0 + 3)
        .await
        .unwrap();
    let sent = send_as(
        s,
        &c,
        &user_msg("u1", None, "x"),
        Delivery::Queue,
        "p",
        T0 + 4,
    )
    .await
    .unwrap();
    assert!(matches!(sent, Sent::Duplicate { .. }), "{sent:?}");
}

/// The lease the chat holds now, as its holder would have it.
async fn started_lease(s: &dyn Store, chat: &NewChat) -> Lease {
    let info = chat_row(s, chat).await.lease.expect("a lease");
    Lease {
        chat_id: chat.chat_id.clone(),
        holder: info.holder,
        token: info.token,
        expires_at: info.expires_at,
        driver: info.driver,
        taken_over: false,
    }
}

pub async fn send_without_queueing_is_busy_and_saves_nothing(db: Db) {
    let s = &*db.store;
    let c = web("busy", None);
    let (lease, first) = start(s, &c, "u1", None, T0).await;
    let req = lease_req("q", None, T0 + 1);
    let m2 = user_msg("u2", None, "no");
    let sent = s
        .send(&SendOp {
            chat: &c,
            message: &m2,
            delivery: Delivery::Steer,
            lease: &req,
            queue_if_busy: false,
        })
        .await
        .unwrap();
    assert!(matches!(sent, Sent::Busy { .. }), "{sent:?}");
    assert!(
        s.get_message(&c.chat_id, "u2").await.unwrap().is_none(),
        "Busy saves nothing"
    );
    assert!(matches!(
        end_next(s, &lease, T0 + 2).await.unwrap(),
        TurnEnded::Released { .. }
    ));
    let req = lease_req("r", None, T0 + 3);
    let m3 = user_msg("u3", None, "again");
    let sent = s
        .send(&SendOp {
            chat: &c,
            message: &m3,
            delivery: Delivery::Queue,
            lease: &req,
            queue_if_busy: false,
        })
        .await
        .unwrap();
    let (_, second) = started(sent);
    assert_eq!(first.position, Some(1));
    assert_eq!(second.position, Some(2), "each turn gets the next position");
}

pub async fn send_steers_only_from_the_driver_while_live(db: Db) {
    let s = &*db.store;
    let c = in_thread("_steer", Some("alice"), "t");
    let (lease, _) = start(s, &c, "u1", Some("alice"), T0).await;
    let (m, d) = enqueue(s, &c, "s1", Some("alice"), Delivery::Steer, T0 + 1).await;
    assert_eq!(d, Delivery::Steer, "the driver steers the live turn");
    assert_eq!(m.delivery, Delivery::Steer);
    assert_eq!(m.message.metadata.status, Some(MessageStatus::Queued));
    assert_eq!(m.message.metadata.delivery, Some(Delivery::Steer));
    let (m, d) = enqueue(s, &c, "s2", Some("bob"), Delivery::Steer, T0 + 1).await;
    assert_eq!(d, Delivery::Queue, "another user's steer is queued");
    assert_eq!(m.message.metadata.delivery, Some(Delivery::Queue));
    let (_, d) = enqueue(s, &c, "q1", Some("alice"), Delivery::Queue, T0 + 1).await;
    assert_eq!(d, Delivery::Queue);
    // No live lease (the chat waits on a question): a steer is queued.
    s.await_answers(&AwaitOp {
        lease: &lease,
        reply: &assistant_msg("a1", "?"),
        position: 1,
        questions: &[new_question(&c.chat_id, "call-1", "a1", 0)],
        job: None,
        now: T0 + 2,
        delivery: None,
    })
    .await
    .unwrap();
    let (_, d) = enqueue(s, &c, "s3", Some("alice"), Delivery::Steer, T0 + 3).await;
    assert_eq!(d, Delivery::Queue, "no turn runs to steer");
}

pub async fn send_sixteen_racing_one_starts_the_rest_run_in_order(db: Db) {
    let c = in_thread("_race", None, "t");
    let mut tasks = Vec::new();
    for i in 0..16 {
        let s = Arc::clone(&db.store);
        let c = in_thread("_race", Some(&format!("u{i}")), "t");
        tasks.push(tokio::spawn(async move {
            let m = user_msg(&format!("m{i}"), Some(&format!("u{i}")), "x");
            send_as(&*s, &c, &m, Delivery::Queue, &format!("p{i}"), T0)
                .await
                .unwrap()
        }));
    }
    let mut lease = None;
    let mut first = String::new();
    let (mut created, mut queued_count) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            Sent::Started {
                lease: l,
                message,
                created: cr,
                ..
            } => {
                assert!(lease.is_none(), "two sends started a turn");
                lease = Some(l);
                first = message.message.id;
                created += usize::from(cr);
            }
            Sent::Queued { created: cr, .. } => {
                queued_count += 1;
                created += usize::from(cr);
            }
            other => panic!("{other:?}"),
        }
    }
    let mut lease = lease.expect("one send started the turn");
    assert_eq!(queued_count, 15);
    assert_eq!(created, 1, "one send created the chat");
    let s = &*db.store;
    let waiting = ids(&s.queued_messages(&c.chat_id).await.unwrap());
    assert_eq!(waiting.len(), 15);
    let mut ran = vec![first];
    let mut position = 1;
    for step in 0.. {
        match end_next(s, &lease, T0 + 1 + step).await.unwrap() {
            TurnEnded::Promoted { lease: l, next, .. } => {
                assert_eq!(
                    l.driver.as_ref(),
                    next.author(),
                    "the promoted sender drives"
                );
                assert!(next.position.unwrap() > position);
                position = next.position.unwrap();
                ran.push(next.message.id);
                lease = l;
            }
            TurnEnded::Released { .. } => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(ran[1..], waiting[..], "queued messages run oldest first");
    let all: HashSet<_> = ran.iter().cloned().collect();
    assert_eq!(all.len(), 16, "every message ran once");
    assert_eq!(chat_row(s, &c).await.state(T0 + 100), TurnState::Idle);
}

pub async fn send_racing_end_turn_never_strands_a_queued_message(db: Db) {
    let a = Arc::clone(&db.store);
    let b = db.second_handle().await;
    let c = web("strand", None);
    let mut now = T0;
    let (mut lease, _) = start(&*a, &c, "t0", None, now).await;
    for i in 0..40 {
        now += 10;
        let (s1, s2, c1, l2) = (Arc::clone(&a), Arc::clone(&b), c.clone(), lease.clone());
        let send = tokio::spawn(async move {
            let m = user_msg(&format!("m{i}"), None, "x");
            send_as(&*s1, &c1, &m, Delivery::Queue, &format!("h{i}"), now)
                .await
                .unwrap()
        });
        let end = tokio::spawn(async move { end_next(&*s2, &l2, now).await.unwrap() });
        let (sent, ended) = (send.await.unwrap(), end.await.unwrap());
        let row = chat_row(&*a, &c).await;
        let waiting = a.queued_messages(&c.chat_id).await.unwrap();
        assert!(
            row.lease.is_some() || waiting.is_empty(),
            "round {i}: {} queued with the lease released ({sent:?} / {ended:?})",
            waiting.len()
        );
        lease = match (sent, ended) {
            // The send came first: the end promoted it.
            (Sent::Queued { message, .. }, TurnEnded::Promoted { lease, next, .. }) => {
                assert_eq!(next.message.id, message.message.id);
                lease
            }
            // The end came first: the send found the chat idle.
            (Sent::Started { lease, .. }, TurnEnded::Released { .. }) => lease,
            other => panic!("round {i}: {other:?}"),
        };
    }
    assert!(matches!(
        end_next(&*a, &lease, now + 1).await.unwrap(),
        TurnEnded::Released { .. }
    ));
    assert!(a.queued_messages(&c.chat_id).await.unwrap().is_empty());
    assert_eq!(a.list_messages(&c.chat_id).await.unwrap().len(), 41);
}

// ---- leases --------------------------------------------------------------------------------------

pub async fn lease_past_expiry_is_taken_over(db: Db) {
    let s = &*db.store;
    let c = web("expiry", None);
    let (first, _) = start(s, &c, "u1", Some("alice"), T0).await;
    let (_, d) = enqueue(s, &c, "u2", Some("bob"), Delivery::Queue, T0 + TTL - 1).await;
    assert_eq!(d, Delivery::Queue, "a live lease blocks a second turn");
    assert!(
        s.take_chat(&c.chat_id, &lease_req("new", None, T0 + TTL - 1))
            .await
            .unwrap()
            .is_none()
    );
    let row = chat_row(s, &c).await;
    assert_eq!(row.state(T0 + TTL - 1), TurnState::Running);
    assert_eq!(
        row.state(T0 + TTL),
        TurnState::Idle,
        "an expired lease frees the chat"
    );
    let sent = send_as(
        s,
        &c,
        &user_msg("u3", Some("carol"), "x"),
        Delivery::Queue,
        "new",
        T0 + TTL,
    )
    .await
    .unwrap();
    let (second, m) = started(sent);
    assert!(second.taken_over, "the lease was taken over");
    assert!(
        second.token > first.token,
        "every take raises the fencing token"
    );
    assert_eq!(second.driver, Some(user("carol")));
    assert_eq!(second.expires_at, T0 + 2 * TTL);
    assert_eq!(m.position, Some(2));
    let info = chat_row(s, &c).await.lease.unwrap();
    assert_eq!((info.holder.as_str(), info.token), ("new", second.token));
}

pub async fn lease_renewal_keeps_the_chat(db: Db) {
    let s = &*db.store;
    let c = web("renew", None);
    let (mut l, _) = start(s, &c, "u1", None, T0).await;
    s.renew_lease(&mut l, TTL, T0 + TTL - 10).await.unwrap();
    assert_eq!(l.expires_at, T0 + 2 * TTL - 10);
    assert_eq!(
        chat_row(s, &c).await.lease.unwrap().expires_at,
        l.expires_at
    );
    assert!(
        s.take_chat(&c.chat_id, &lease_req("q", None, T0 + TTL + 5))
            .await
            .unwrap()
            .is_none(),
        "a renewed lease is still live past the first expiry"
    );
    let (_, d) = enqueue(s, &c, "u2", None, Delivery::Queue, T0 + TTL + 5).await;
    assert_eq!(d, Delivery::Queue);
    assert!(matches!(
        end_next(s, &l, T0 + TTL + 6).await.unwrap(),
        TurnEnded::Promoted { .. }
    ));
}

pub async fn lease_fenced_writes_refused_after_takeover(db: Db) {
    let s = &*db.store;
    let c = web("fence", None);
    let (mut old, start_msg) = start(s, &c, "u1", None, T0).await;
    let position = start_msg.position.unwrap();
    let (new, _) = started(
        send_as(
            s,
            &c,
            &user_msg("u2", None, "x"),
            Delivery::Queue,
            "new",
            T0 + TTL,
        )
        .await
        .unwrap(),
    );
    let version = chat_row(s, &c).await.version;
    let late = T0 + TTL + 1;
    assert!(lost(
        checkpoint(s, &old, &assistant_msg("a1", "late"), position, true, late).await
    ));
    assert!(lost(s.renew_lease(&mut old, TTL, late).await));
    assert_eq!(
        old.expires_at,
        T0 + TTL,
        "a refused renewal leaves the lease as it was"
    );
    assert!(lost(s.expire_lease(&old, late).await));
    assert!(lost(end_next(s, &old, late).await));
    assert!(lost(
        s.end_turn(&EndTurnOp {
            lease: &old,
            reply: Some((&assistant_msg("a1", "late"), position)),
            mode: EndMode::Handoff(&job("run-queue", None, late)),
            now: late,
            delivery: Some(&job("deliver", Some("deliver:late-end"), late)),
        })
        .await
    ));
    assert!(lost(
        s.await_answers(&AwaitOp {
            lease: &old,
            reply: &assistant_msg("a1", "late"),
            position,
            questions: &[new_question(&c.chat_id, "call-1", "a1", 0)],
            job: Some(&job("expire", None, late)),
            now: late,
            delivery: Some(&job("deliver", Some("deliver:late-await"), late)),
        })
        .await
    ));
    assert!(
        s.get_message(&c.chat_id, "a1").await.unwrap().is_none(),
        "the fenced writes changed nothing"
    );
    assert!(
        s.get_question(&c.chat_id, "call-1", late)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        s.claim_job("w", 1_000, late + 1_000)
            .await
            .unwrap()
            .is_none()
    );
    let row = chat_row(s, &c).await;
    assert_eq!(row.version, version);
    assert_eq!(row.awaiting_message_id, None);
    assert_eq!(row.lease.unwrap().holder, "new");
    // The new holder writes fine.
    let done = checkpoint(s, &new, &assistant_msg("a2", "ok"), 2, false, late)
        .await
        .unwrap();
    assert_eq!(done.reply.position, Some(2));
}

pub async fn takeover_marks_the_interrupted_turn(db: Db) {
    let s = &*db.store;
    // A turn that saved a reply: the reply gets the error.
    let c = web("saved", None);
    let (l, _) = start(s, &c, "u1", Some("alice"), T0).await;
    checkpoint(s, &l, &assistant_msg("a1", "partial"), 1, false, T0 + 1)
        .await
        .unwrap();
    let sent = send_as(
        s,
        &c,
        &user_msg("u2", Some("alice"), "x"),
        Delivery::Queue,
        "new",
        T0 + TTL,
    )
    .await
    .unwrap();
    let Sent::Started {
        interrupted: Some(reply),
        lease,
        message,
        ..
    } = sent
    else {
        panic!("a take-over reports the interrupted reply: {sent:?}")
    };
    assert!(lease.taken_over);
    assert_eq!(reply.message.id, "a1");
    assert_eq!(
        reply.message.text(),
        "partial",
        "the saved reply keeps its parts"
    );
    assert_eq!(
        reply.message.metadata.error.as_ref().unwrap().code,
        INTERRUPTED
    );
    assert_eq!((reply.position, reply.sub), (Some(1), REPLY_SUB));
    assert_eq!(
        s.get_message(&c.chat_id, "a1")
            .await
            .unwrap()
            .unwrap()
            .message
            .metadata
            .error,
        reply.message.metadata.error,
        "saved in the same transaction"
    );
    assert_eq!(message.position, Some(2));

    // A turn that saved nothing: an empty reply with the error is created.
    let c = web("unsaved", None);
    let mut user = user_msg("u1", Some("alice"), "x");
    user.metadata.model = Some("model-a".into());
    started(
        send_as(s, &c, &user, Delivery::Queue, "old", T0)
            .await
            .unwrap(),
    );
    let taken = s
        .take_chat(&c.chat_id, &lease_req("sweeper", None, T0 + TTL))
        .await
        .unwrap()
        .expect("an expired lease is taken");
    let reply = taken.interrupted.expect("an empty reply is created");
    assert_eq!(reply.message.role, Role::Assistant);
    assert!(reply.message.parts.is_empty());
    assert_ne!(reply.message.id, "u1");
    assert_eq!(reply.message.metadata.model.as_deref(), Some("model-a"));
    assert_eq!(
        reply.message.metadata.error.as_ref().unwrap().code,
        INTERRUPTED
    );
    assert_eq!((reply.position, reply.sub), (Some(1), REPLY_SUB));
    assert_eq!(
        ids(&s.list_messages(&c.chat_id).await.unwrap()),
        ["u1".to_string(), reply.message.id.clone()]
    );

    // A turn whose reply already says it failed is left alone.
    let c = web("failed", None);
    let (l, _) = start(s, &c, "u1", None, T0).await;
    let mut failed = assistant_msg("a1", "boom");
    failed.metadata.error = Some(ErrorInfo {
        code: "model-error".into(),
        message: "the model failed".into(),
    });
    checkpoint(s, &l, &failed, 1, false, T0 + 1).await.unwrap();
    let version = chat_row(s, &c).await.version;
    let sent = send_as(
        s,
        &c,
        &user_msg("u2", None, "x"),
        Delivery::Queue,
        "new",
        T0 + TTL,
    )
    .await
    .unwrap();
    let Sent::Started {
        interrupted,
        lease,
        chat,
        ..
    } = sent
    else {
        panic!("{sent:?}")
    };
    assert!(lease.taken_over);
    assert!(interrupted.is_none(), "a failed reply is not marked again");
    assert_eq!(
        chat.version,
        version + 1,
        "only the new message was written"
    );
    assert_eq!(
        s.get_message(&c.chat_id, "a1")
            .await
            .unwrap()
            .unwrap()
            .message
            .metadata
            .error
            .unwrap()
            .code,
        "model-error"
    );
}

pub async fn expired_leases_and_expire_lease(db: Db) {
    let s = &*db.store;
    let (a, b, c, d) = (
        web("a", None),
        web("b", None),
        web("c", None),
        web("d", None),
    );
    start(s, &a, "a1", None, T0).await;
    start(s, &b, "b1", None, T0 + 10).await;
    let (lc, _) = start(s, &c, "c1", None, T0 + 20).await;
    let (ld, _) = start(s, &d, "d1", None, T0).await;
    s.await_answers(&AwaitOp {
        lease: &ld,
        reply: &assistant_msg("d2", "?"),
        position: 1,
        questions: &[new_question(&d.chat_id, "call-d", "d2", 0)],
        job: None,
        now: T0 + 1,
        delivery: None,
    })
    .await
    .unwrap();
    let names = |v: Vec<ChatId>| -> Vec<String> { v.into_iter().map(|c| c.to_string()).collect() };
    assert!(s.expired_leases(T0 + TTL - 1, 10).await.unwrap().is_empty());
    assert_eq!(
        names(s.expired_leases(T0 + TTL + 15, 10).await.unwrap()),
        ["a", "b"]
    );
    assert_eq!(
        names(s.expired_leases(T0 + TTL + 15, 1).await.unwrap()),
        ["a"]
    );
    // A process that stops ends its lease now: the chat is swept first.
    s.expire_lease(&lc, T0 + 30).await.unwrap();
    assert_eq!(chat_row(s, &c).await.state(T0 + 30), TurnState::Idle);
    assert_eq!(names(s.expired_leases(T0 + 30, 10).await.unwrap()), ["c"]);
    assert_eq!(
        names(s.expired_leases(T0 + TTL + 15, 10).await.unwrap()),
        ["c", "a", "b"]
    );
    let stale = Lease {
        token: lc.token + 1,
        ..lc.clone()
    };
    assert!(lost(s.expire_lease(&stale, T0 + 31).await));
    // The next taker treats the turn as interrupted.
    let sent = send_as(
        s,
        &c,
        &user_msg("c2", None, "x"),
        Delivery::Queue,
        "next",
        T0 + 31,
    )
    .await
    .unwrap();
    let Sent::Started {
        lease, interrupted, ..
    } = sent
    else {
        panic!("{sent:?}")
    };
    assert!(lease.taken_over);
    assert!(interrupted.is_some());
    assert_eq!(
        names(s.expired_leases(T0 + 40, 10).await.unwrap()),
        Vec::<String>::new()
    );
}

// ---- turns ---------------------------------------------------------------------------------------

pub async fn checkpoint_joins_the_drivers_steers_in_order(db: Db) {
    let s = &*db.store;
    let c = in_thread("_join", Some("alice"), "t");
    let (l, u1) = start(s, &c, "u1", Some("alice"), T0).await;
    let p = u1.position.unwrap();
    enqueue(s, &c, "s1", Some("alice"), Delivery::Steer, T0 + 1).await;
    enqueue(s, &c, "s2", Some("bob"), Delivery::Steer, T0 + 2).await;
    enqueue(s, &c, "s3", Some("alice"), Delivery::Steer, T0 + 3).await;
    enqueue(s, &c, "q1", Some("alice"), Delivery::Queue, T0 + 4).await;
    // Without joining, the steers wait.
    let done = checkpoint(s, &l, &assistant_msg("a1", "step 1"), p, false, T0 + 5)
        .await
        .unwrap();
    assert!(done.steers.is_empty());
    assert_eq!((done.reply.position, done.reply.sub), (Some(p), REPLY_SUB));
    assert_eq!(s.queued_messages(&c.chat_id).await.unwrap().len(), 4);
    let done = checkpoint(s, &l, &assistant_msg("a1", "step 2"), p, true, T0 + 6)
        .await
        .unwrap();
    assert_eq!(
        ids(&done.steers),
        ["s1", "s3"],
        "the driver's steers, oldest first"
    );
    for m in &done.steers {
        assert!(!m.queued);
        assert_eq!(m.position, Some(p));
        assert_eq!(m.sub, m.seq);
        assert_eq!(m.message.metadata.status, None);
    }
    assert_eq!(done.reply.message.text(), "step 2");
    assert_eq!(
        ids(&s.list_messages(&c.chat_id).await.unwrap()),
        ["u1", "s1", "s3", "a1", "s2", "q1"],
        "joined steers stand between the user message and the reply; queued ones come last"
    );
    assert_eq!(
        ids(&s.queued_messages(&c.chat_id).await.unwrap()),
        ["s2", "q1"]
    );
}

pub async fn await_answers_saves_questions_and_releases(db: Db) {
    let s = &*db.store;
    let c = web("await", None);
    let (l, u1) = start(s, &c, "u1", Some("alice"), T0).await;
    let p = u1.position.unwrap();
    let questions = [
        new_question(&c.chat_id, "call-1", "a1", 0),
        new_question(&c.chat_id, "call-2", "a1", 1),
    ];
    let reply = s
        .await_answers(&AwaitOp {
            lease: &l,
            reply: &assistant_msg("a1", "questions"),
            position: p,
            questions: &questions,
            job: Some(&job("expire", Some("expire:a1"), T0 + 500)),
            now: T0 + 1,
            delivery: None,
        })
        .await
        .unwrap();
    assert_eq!((reply.position, reply.sub), (Some(p), REPLY_SUB));
    let row = chat_row(s, &c).await;
    assert_eq!(row.awaiting_message_id.as_deref(), Some("a1"));
    assert!(row.lease.is_none(), "the lease is released");
    assert_eq!(row.state(T0 + 1), TurnState::Awaiting);
    let got = s
        .questions_of_message(&c.chat_id, "a1", T0 + 1)
        .await
        .unwrap();
    assert_eq!(
        got.iter()
            .map(|q| q.tool_call_id.as_str())
            .collect::<Vec<_>>(),
        ["call-1", "call-2"]
    );
    assert!(
        got.iter()
            .all(|q| q.outcome.is_none() && !q.rendered && q.record.revision == 0)
    );
    assert!(s.claim_job("w", 1_000, T0 + 499).await.unwrap().is_none());
    let j = s
        .claim_job("w", 1_000, T0 + 500)
        .await
        .unwrap()
        .expect("the job is scheduled");
    assert_eq!(j.kind, "expire");
    assert_eq!(j.key.as_deref(), Some("expire:a1"));
    // The turn is over for its lease, and a new message waits.
    assert!(lost(
        checkpoint(s, &l, &assistant_msg("a1", "x"), p, false, T0 + 2).await
    ));
    let (_, d) = enqueue(s, &c, "u2", Some("alice"), Delivery::Steer, T0 + 2).await;
    assert_eq!(d, Delivery::Queue);
    assert!(
        s.take_chat(&c.chat_id, &lease_req("sweeper", None, T0 + 3))
            .await
            .unwrap()
            .is_none(),
        "a waiting question keeps the chat"
    );
}

pub async fn end_turn_next_releases_or_promotes(db: Db) {
    let s = &*db.store;
    let c = in_thread("_next", Some("alice"), "t");
    let (l, u1) = start(s, &c, "u1", Some("alice"), T0).await;
    let ended = s
        .end_turn(&EndTurnOp {
            lease: &l,
            reply: Some((&assistant_msg("a1", "done"), u1.position.unwrap())),
            mode: EndMode::Next,
            now: T0 + 1,
            delivery: None,
        })
        .await
        .unwrap();
    let TurnEnded::Released { reply: Some(reply) } = ended else {
        panic!("{ended:?}")
    };
    assert_eq!((reply.message.id.as_str(), reply.sub), ("a1", REPLY_SUB));
    let row = chat_row(s, &c).await;
    assert!(row.lease.is_none());
    assert_eq!(row.state(T0 + 1), TurnState::Idle);
    assert!(
        lost(end_next(s, &l, T0 + 2).await),
        "a released lease fences nothing more"
    );

    let (l, u2) = start(s, &c, "u2", Some("alice"), T0 + 3).await;
    enqueue(s, &c, "q1", Some("bob"), Delivery::Queue, T0 + 4).await;
    enqueue(s, &c, "q2", Some("carol"), Delivery::Queue, T0 + 5).await;
    let TurnEnded::Promoted { reply, lease, next } = end_next(s, &l, T0 + 6).await.unwrap() else {
        panic!("something is queued")
    };
    assert!(reply.is_none());
    assert_eq!(next.message.id, "q1");
    assert!(!next.queued);
    assert_eq!(next.message.metadata.status, None);
    assert_eq!(next.position, Some(u2.position.unwrap() + 1));
    assert_eq!(next.sub, 0);
    assert_eq!(
        (lease.holder.as_str(), lease.token),
        (l.holder.as_str(), l.token)
    );
    assert_eq!(lease.driver, Some(user("bob")));
    let info = chat_row(s, &c).await.lease.unwrap();
    assert_eq!((info.token, info.driver), (l.token, Some(user("bob"))));
    let TurnEnded::Promoted { lease, next, .. } = end_next(s, &lease, T0 + 7).await.unwrap() else {
        panic!("q2 waits")
    };
    assert_eq!(
        (next.message.id.as_str(), lease.driver.clone()),
        ("q2", Some(user("carol")))
    );
    assert!(matches!(
        end_next(s, &lease, T0 + 8).await.unwrap(),
        TurnEnded::Released { reply: None }
    ));
    assert!(chat_row(s, &c).await.lease.is_none());
}

pub async fn end_turn_handoff_releases_and_schedules(db: Db) {
    let s = &*db.store;
    let c = web("handoff", None);
    let run_queue = job("run-queue", Some("queue:handoff"), T0 + 10);
    let (l, _) = start(s, &c, "u1", None, T0).await;
    let ended = s
        .end_turn(&EndTurnOp {
            lease: &l,
            reply: None,
            mode: EndMode::Handoff(&run_queue),
            now: T0 + 1,
            delivery: None,
        })
        .await
        .unwrap();
    assert_eq!(
        ended,
        TurnEnded::HandedOn {
            reply: None,
            queued: false
        }
    );
    assert!(chat_row(s, &c).await.lease.is_none());
    assert!(
        s.claim_job("w", 1_000, T0 + 1_000).await.unwrap().is_none(),
        "nothing queued, no job"
    );

    let (l, u2) = start(s, &c, "u2", None, T0 + 2).await;
    enqueue(s, &c, "q1", None, Delivery::Queue, T0 + 3).await;
    let ended = s
        .end_turn(&EndTurnOp {
            lease: &l,
            reply: Some((&assistant_msg("a2", "bye"), u2.position.unwrap())),
            mode: EndMode::Handoff(&run_queue),
            now: T0 + 4,
            delivery: None,
        })
        .await
        .unwrap();
    let TurnEnded::HandedOn {
        reply: Some(reply),
        queued: true,
    } = ended
    else {
        panic!("{ended:?}")
    };
    assert_eq!(reply.message.id, "a2");
    let row = chat_row(s, &c).await;
    assert!(row.lease.is_none(), "released whatever is queued");
    assert_eq!(ids(&s.queued_messages(&c.chat_id).await.unwrap()), ["q1"]);
    let j = s
        .claim_job("w", 1_000, T0 + 10)
        .await
        .unwrap()
        .expect("the queue's job is scheduled");
    assert_eq!(j.kind, "run-queue");
    assert_eq!(j.payload, json!({"kind": "run-queue"}));
}

pub async fn take_chat_runs_the_queue_of_an_idle_chat(db: Db) {
    let s = &*db.store;
    let req = |now| lease_req("sweeper", None, now);
    assert!(
        s.take_chat(&ChatId::new("none").unwrap(), &req(T0))
            .await
            .unwrap()
            .is_none()
    );
    // Free, nothing queued: taken and left free.
    let c = web("take", None);
    let (l, _) = start(s, &c, "u1", None, T0).await;
    assert!(
        s.take_chat(&c.chat_id, &req(T0 + 1))
            .await
            .unwrap()
            .is_none(),
        "a live turn holds it"
    );
    end_next(s, &l, T0 + 2).await.unwrap();
    let version = chat_row(s, &c).await.version;
    assert_eq!(
        s.take_chat(&c.chat_id, &req(T0 + 3)).await.unwrap(),
        Some(Taken {
            interrupted: None,
            next: None
        })
    );
    let row = chat_row(s, &c).await;
    assert!(row.lease.is_none());
    assert_eq!(row.version, version);
    // Free with a queue (handed on): promotes under a new lease driven by the sender.
    let (l, _) = start(s, &c, "u2", None, T0 + 4).await;
    enqueue(s, &c, "q1", Some("bob"), Delivery::Queue, T0 + 5).await;
    s.end_turn(&EndTurnOp {
        lease: &l,
        reply: None,
        mode: EndMode::Handoff(&job("run", None, T0)),
        now: T0 + 6,
        delivery: None,
    })
    .await
    .unwrap();
    let taken = s
        .take_chat(&c.chat_id, &req(T0 + 7))
        .await
        .unwrap()
        .unwrap();
    assert!(taken.interrupted.is_none());
    let (lease, next) = taken.next.expect("q1 is promoted");
    assert!(!lease.taken_over);
    assert!(lease.token > l.token);
    assert_eq!(lease.holder, "sweeper");
    assert_eq!(lease.driver, Some(user("bob")));
    assert_eq!((next.message.id.as_str(), next.queued), ("q1", false));
    assert_eq!(
        chat_row(s, &c).await.lease.unwrap().driver,
        Some(user("bob"))
    );
    // Expired with a queue: the turn is marked interrupted, the queue runs on.
    enqueue(s, &c, "q2", Some("carol"), Delivery::Queue, T0 + 8).await;
    let taken = s
        .take_chat(&c.chat_id, &req(T0 + 7 + TTL))
        .await
        .unwrap()
        .unwrap();
    let interrupted = taken.interrupted.expect("the stopped turn is marked");
    assert_eq!(interrupted.position, next.position);
    let (lease, next2) = taken.next.unwrap();
    assert!(lease.taken_over);
    assert_eq!(
        (next2.message.id.as_str(), lease.driver),
        ("q2", Some(user("carol")))
    );
    assert!(next2.position > next.position);
    // Expired, nothing queued: marked, and released.
    let taken = s
        .take_chat(&c.chat_id, &req(T0 + 7 + 2 * TTL))
        .await
        .unwrap()
        .unwrap();
    assert!(taken.interrupted.is_some());
    assert!(taken.next.is_none());
    let row = chat_row(s, &c).await;
    assert!(row.lease.is_none(), "released again when nothing is queued");
    assert!(
        s.expired_leases(T0 + 10 * TTL, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // A waiting question keeps it.
    let (l, u3) = start(s, &c, "u3", None, T0 + 3 * TTL).await;
    s.await_answers(&AwaitOp {
        lease: &l,
        reply: &assistant_msg("a3", "?"),
        position: u3.position.unwrap(),
        questions: &[],
        job: None,
        now: T0 + 3 * TTL,
        delivery: None,
    })
    .await
    .unwrap();
    enqueue(s, &c, "q3", None, Delivery::Queue, T0 + 3 * TTL + 1).await;
    assert!(
        s.take_chat(&c.chat_id, &req(T0 + 5 * TTL))
            .await
            .unwrap()
            .is_none()
    );
}

/// Alice's message (model `model-a`, reasoning `high`) starts a turn whose reply `a1` waits on
/// two questions, `call-1` and `call-2`; the chat is released. Returns the turn's lease.
async fn waiting_on_two_questions(s: &dyn Store, c: &NewChat) -> Lease {
    let mut u1 = user_msg("u1", Some("alice"), "ask");
    u1.metadata.model = Some("model-a".into());
    u1.metadata.reasoning = Some("high".into());
    let (l, _) = started(send_as(s, c, &u1, Delivery::Queue, "p", T0).await.unwrap());
    s.await_answers(&AwaitOp {
        lease: &l,
        reply: &assistant_msg("a1", "?"),
        position: 1,
        questions: &[
            new_question(&c.chat_id, "call-1", "a1", 0),
            new_question(&c.chat_id, "call-2", "a1", 1),
        ],
        job: None,
        now: T0 + 1,
        delivery: None,
    })
    .await
    .unwrap();
    l
}

pub async fn resume_turn_each_answer(db: Db) {
    let s = &*db.store;
    let c = web("resume", None);
    let l = waiting_on_two_questions(s, &c).await;
    let req = |now| lease_req("resumer", Some("bob"), now);
    assert_eq!(
        s.resume_turn(&c.chat_id, "a1", &req(T0 + 2)).await.unwrap(),
        Resume::Open
    );
    record_op(s, &c.chat_id, "call-1", &answer("yes"), None, None, T0 + 2).await;
    assert_eq!(
        s.resume_turn(&c.chat_id, "a1", &req(T0 + 3)).await.unwrap(),
        Resume::Open
    );
    record_op(
        s,
        &c.chat_id,
        "call-2",
        &QuestionOutcome::Dismissed,
        None,
        None,
        T0 + 3,
    )
    .await;
    assert_eq!(
        s.resume_turn(&c.chat_id, "other", &req(T0 + 4))
            .await
            .unwrap(),
        Resume::NotWaiting
    );
    let Resume::Taken {
        lease,
        reply,
        questions,
        model,
        reasoning,
    } = s.resume_turn(&c.chat_id, "a1", &req(T0 + 4)).await.unwrap()
    else {
        panic!("every question has an outcome")
    };
    assert_eq!(
        lease.driver,
        Some(user("bob")),
        "the request's driver drives"
    );
    assert_eq!(lease.holder, "resumer");
    assert!(lease.token > l.token);
    assert_eq!(lease.expires_at, T0 + 4 + TTL);
    assert_eq!(reply.message.id, "a1");
    assert_eq!(
        questions
            .iter()
            .map(|q| (q.tool_call_id.as_str(), q.outcome.clone()))
            .collect::<Vec<_>>(),
        [
            ("call-1", Some(answer("yes"))),
            ("call-2", Some(QuestionOutcome::Dismissed))
        ]
    );
    assert_eq!(
        (model.as_deref(), reasoning.as_deref()),
        (Some("model-a"), Some("high"))
    );
    let row = chat_row(s, &c).await;
    assert_eq!(row.awaiting_message_id, None);
    assert_eq!(row.state(T0 + 4), TurnState::Running);
    assert_eq!(row.lease.unwrap().driver, Some(user("bob")));
    assert_eq!(
        s.resume_turn(&c.chat_id, "a1", &req(T0 + 5)).await.unwrap(),
        Resume::Busy {
            until: lease.expires_at
        },
        "a live lease holds the chat"
    );
    end_next(s, &lease, T0 + 6).await.unwrap();
    assert_eq!(
        s.resume_turn(&c.chat_id, "a1", &req(T0 + 7)).await.unwrap(),
        Resume::NotWaiting,
        "continued already"
    );
    assert_eq!(
        s.resume_turn(&ChatId::new("none").unwrap(), "a1", &req(T0 + 7))
            .await
            .unwrap(),
        Resume::NotWaiting
    );
}

/// `record_outcome` with `resume`: the winning outcome continues the turn in the same operation,
/// exactly as `resume_turn` would (open while a question waits, taken once all have outcomes); an
/// outcome that does not win continues nothing.
pub async fn record_outcome_continues_the_turn_when_asked(db: Db) {
    let s = &*db.store;
    let c = web("rec-resume", None);
    let l = waiting_on_two_questions(s, &c).await;
    let req = |now| lease_req("resumer", Some("bob"), now);
    let chat = &c.chat_id;
    let record = |call: &'static str, outcome: QuestionOutcome, now: Millis| {
        let r = req(now);
        async move {
            s.record_outcome(&RecordOp {
                chat,
                tool_call_id: call,
                outcome: &outcome,
                actor: None,
                expected_revision: None,
                lock: None,
                resume: Some(&r),
                now,
            })
            .await
            .unwrap()
        }
    };
    // The first of two: recorded, the turn still waits.
    let Recorded::Won { resumed, .. } = record("call-1", answer("yes"), T0 + 2).await else {
        panic!("the first outcome wins")
    };
    assert_eq!(resumed, Some(Resume::Open));
    assert_eq!(
        chat_row(s, &c).await.awaiting_message_id.as_deref(),
        Some("a1")
    );
    // The same call again: not won, nothing continued.
    assert!(matches!(
        record("call-1", answer("no"), T0 + 3).await,
        Recorded::Settled { .. }
    ));
    assert_eq!(chat_row(s, &c).await.state(T0 + 3), TurnState::Awaiting);
    // The last: recorded and the turn taken, in one operation.
    let Recorded::Won {
        question, resumed, ..
    } = record("call-2", QuestionOutcome::Dismissed, T0 + 4).await
    else {
        panic!("the second outcome wins")
    };
    assert_eq!(question.outcome, Some(QuestionOutcome::Dismissed));
    let Some(Resume::Taken {
        lease,
        reply,
        questions,
        model,
        ..
    }) = resumed
    else {
        panic!("every question has an outcome: {resumed:?}")
    };
    assert_eq!(
        (lease.holder.as_str(), lease.driver.clone()),
        ("resumer", Some(user("bob")))
    );
    assert!(lease.token > l.token);
    assert_eq!(reply.message.id, "a1");
    assert_eq!(questions.len(), 2);
    assert!(questions.iter().all(|q| q.outcome.is_some()));
    assert_eq!(model.as_deref(), Some("model-a"));
    let row = chat_row(s, &c).await;
    assert_eq!(row.awaiting_message_id, None);
    assert_eq!(row.state(T0 + 4), TurnState::Running);
    assert_eq!(
        s.resume_turn(&c.chat_id, "a1", &req(T0 + 5)).await.unwrap(),
        Resume::Busy {
            until: lease.expires_at
        },
        "the lease the record took holds the chat"
    );
}

pub async fn turn_awaiting_blocks_new_turns_until_resumed(db: Db) {
    let a = Arc::clone(&db.store);
    let b = db.second_handle().await;
    let c = web("await2", None);
    let (l, _) = start(&*a, &c, "u1", Some("alice"), T0).await;
    a.await_answers(&AwaitOp {
        lease: &l,
        reply: &assistant_msg("a1", "?"),
        position: 1,
        questions: &[new_question(&c.chat_id, "call-1", "a1", 0)],
        job: None,
        now: T0,
        delivery: None,
    })
    .await
    .unwrap();
    // Another process sees the wait: messages queue, the sweeper leaves it.
    let (_, d) = enqueue(&*b, &c, "u2", Some("alice"), Delivery::Queue, T0 + TTL).await;
    assert_eq!(d, Delivery::Queue);
    assert_eq!(chat_row(&*b, &c).await.state(T0 + TTL), TurnState::Awaiting);
    assert!(
        b.take_chat(&c.chat_id, &lease_req("q", None, T0 + TTL))
            .await
            .unwrap()
            .is_none()
    );
    record_op(
        &*b,
        &c.chat_id,
        "call-1",
        &answer("no"),
        Some(0),
        None,
        T0 + TTL,
    )
    .await;
    let Resume::Taken { lease, .. } = b
        .resume_turn(&c.chat_id, "a1", &lease_req("r", Some("alice"), T0 + TTL))
        .await
        .unwrap()
    else {
        panic!("resumable")
    };
    // The resumed turn ends by running the queue.
    let TurnEnded::Promoted { next, .. } = end_next(&*a, &lease, T0 + TTL + 1).await.unwrap()
    else {
        panic!("u2 waits")
    };
    assert_eq!(next.message.id, "u2");
    assert!(next.position.unwrap() > 1);
}

// ---- messages and the queue ----------------------------------------------------------------------

pub async fn queue_is_oldest_first_across_two_handles(db: Db) {
    let a = Arc::clone(&db.store);
    let b = db.second_handle().await;
    let c = web("queue", None);
    let (mut l, _) = start(&*a, &c, "u0", None, T0).await;
    for i in 0..10 {
        let s = if i % 2 == 0 { &a } else { &b };
        enqueue(&**s, &c, &format!("q{i}"), None, Delivery::Queue, T0 + i).await;
    }
    let expected: Vec<String> = (0..10).map(|i| format!("q{i}")).collect();
    for s in [&a, &b] {
        assert_eq!(ids(&s.queued_messages(&c.chat_id).await.unwrap()), expected);
    }
    // Promotion through either handle takes them oldest first.
    for (i, id) in expected.iter().enumerate() {
        let s = if i % 2 == 0 { &b } else { &a };
        let TurnEnded::Promoted { lease, next, .. } = end_next(&**s, &l, T0 + 100).await.unwrap()
        else {
            panic!("{id} waits")
        };
        assert_eq!(&next.message.id, id);
        assert!(!next.queued);
        assert_eq!(next.message.metadata.status, None);
        assert_eq!(next.position, Some(i as i64 + 2));
        l = lease;
    }
    assert!(matches!(
        end_next(&*a, &l, T0 + 100).await.unwrap(),
        TurnEnded::Released { .. }
    ));
}

pub async fn queue_edit_and_delete_only_by_author_before_promotion(db: Db) {
    let s = &*db.store;
    let c = in_thread("_edit", Some("alice"), "t");
    let (l, _) = start(s, &c, "u0", Some("alice"), T0).await;
    let (m, _) = enqueue(s, &c, "m1", Some("alice"), Delivery::Queue, T0).await;
    assert_eq!(m.message.metadata.status, Some(MessageStatus::Queued));
    enqueue(s, &c, "m2", Some("alice"), Delivery::Queue, T0).await;
    let edit = QueuedEdit {
        parts: Some(vec![MessagePart::text("edited")]),
        delivery: Some(Delivery::Steer),
    };
    let id = &c.chat_id;
    assert_eq!(
        s.edit_queued(id, "m1", Some(&user("bob")), &edit, T0)
            .await
            .unwrap(),
        QueuedChange::Forbidden
    );
    assert_eq!(
        s.edit_queued(id, "m1", None, &edit, T0).await.unwrap(),
        QueuedChange::Forbidden
    );
    assert_eq!(
        s.edit_queued(id, "nope", Some(&user("alice")), &edit, T0)
            .await
            .unwrap(),
        QueuedChange::NotFound
    );
    assert_eq!(
        s.get_message(id, "m1")
            .await
            .unwrap()
            .unwrap()
            .message
            .text(),
        "m1",
        "refused edits change nothing"
    );
    let QueuedChange::Done(Some(edited)) = s
        .edit_queued(id, "m1", Some(&user("alice")), &edit, T0 + 1)
        .await
        .unwrap()
    else {
        panic!("the author may edit")
    };
    assert_eq!(edited.message.text(), "edited");
    assert_eq!(edited.delivery, Delivery::Steer);
    assert_eq!(edited.message.metadata.delivery, Some(Delivery::Steer));
    assert!(edited.queued);
    let stored = s.get_message(id, "m1").await.unwrap().unwrap();
    assert_eq!(stored, *edited, "the edit is stored as returned");
    // Only the parts: the delivery stays.
    let parts_only = QueuedEdit {
        parts: Some(vec![MessagePart::text("again")]),
        delivery: None,
    };
    let QueuedChange::Done(Some(edited)) = s
        .edit_queued(id, "m1", Some(&user("alice")), &parts_only, T0 + 2)
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (edited.message.text().as_str(), edited.delivery),
        ("again", Delivery::Steer)
    );
    assert_eq!(
        s.delete_queued(id, "m2", Some(&user("bob")), T0)
            .await
            .unwrap(),
        QueuedChange::Forbidden
    );
    assert_eq!(
        s.delete_queued(id, "m9", Some(&user("alice")), T0)
            .await
            .unwrap(),
        QueuedChange::NotFound
    );
    assert!(s.get_message(id, "m2").await.unwrap().is_some());
    assert_eq!(
        s.delete_queued(id, "m2", Some(&user("alice")), T0)
            .await
            .unwrap(),
        QueuedChange::Done(None)
    );
    assert!(s.get_message(id, "m2").await.unwrap().is_none());
    // Once promoted, neither.
    let TurnEnded::Promoted { next, .. } = end_next(s, &l, T0 + 3).await.unwrap() else {
        panic!()
    };
    assert_eq!(next.message.id, "m1");
    assert_eq!(next.message.text(), "again");
    assert_eq!(
        s.edit_queued(id, "m1", Some(&user("alice")), &edit, T0)
            .await
            .unwrap(),
        QueuedChange::NotQueued
    );
    assert_eq!(
        s.delete_queued(id, "m1", Some(&user("alice")), T0)
            .await
            .unwrap(),
        QueuedChange::NotQueued
    );
    assert_eq!(
        s.edit_queued(id, "u0", Some(&user("alice")), &edit, T0)
            .await
            .unwrap(),
        QueuedChange::NotQueued
    );
}

pub async fn messages_keep_turn_order_with_steers_and_queue(db: Db) {
    let s = &*db.store;
    let c = in_thread("_order", Some("alice"), "t");
    let (l, u1) = start(s, &c, "u1", Some("alice"), T0).await;
    let p1 = u1.position.unwrap();
    checkpoint(s, &l, &assistant_msg("a1", "step 1"), p1, false, T0)
        .await
        .unwrap();
    // Arriving during the turn: a steer from the driver, a steer from someone else, a queued one.
    enqueue(s, &c, "s1", Some("alice"), Delivery::Steer, T0 + 1).await;
    enqueue(s, &c, "s2", Some("bob"), Delivery::Steer, T0 + 2).await;
    enqueue(s, &c, "q1", Some("alice"), Delivery::Queue, T0 + 3).await;
    let done = checkpoint(s, &l, &assistant_msg("a1", "step 2"), p1, true, T0 + 4)
        .await
        .unwrap();
    assert_eq!(ids(&done.steers), ["s1"], "only the driver's steers join");
    let listed: Vec<_> = s
        .list_messages(&c.chat_id)
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.message.id, m.queued))
        .collect();
    assert_eq!(
        listed,
        [
            ("u1".to_string(), false),
            ("s1".to_string(), false),
            ("a1".to_string(), false),
            ("s2".to_string(), true),
            ("q1".to_string(), true),
        ],
        "a joined steer stands just before the reply; queued messages come last"
    );
    assert_eq!(
        s.get_message(&c.chat_id, "a1")
            .await
            .unwrap()
            .unwrap()
            .message
            .text(),
        "step 2"
    );
    let TurnEnded::Promoted { next, .. } = end_next(s, &l, T0 + 6).await.unwrap() else {
        panic!("messages are queued")
    };
    assert_eq!(
        next.message.id, "s2",
        "a steer that did not join runs as an ordinary queued message"
    );
    assert!(next.position.unwrap() > p1);
    let sorted = {
        let mut v = s.list_messages(&c.chat_id).await.unwrap();
        v.sort_by_key(StoredMessage::order_key);
        ids(&v)
    };
    assert_eq!(
        ids(&s.list_messages(&c.chat_id).await.unwrap()),
        sorted,
        "listed in order_key order"
    );
}

pub async fn messages_since_follows_versions(db: Db) {
    let s = &*db.store;
    let c = web("since", None);
    let empty = s.messages_since(&c.chat_id, 0).await.unwrap();
    assert_eq!(
        (empty.version, empty.messages.len()),
        (0, 0),
        "no chat: version 0"
    );
    let sent = send_as(s, &c, &user_msg("u1", None, "x"), Delivery::Queue, "p", T0)
        .await
        .unwrap();
    let Sent::Started {
        chat,
        prior_version,
        lease,
        message,
        ..
    } = sent
    else {
        panic!()
    };
    assert_eq!(prior_version, 0);
    assert!(chat.version > 0);
    assert_eq!(
        message.version, chat.version,
        "a message keeps the version of its write"
    );
    let v1 = chat.version;
    let all = s.messages_since(&c.chat_id, 0).await.unwrap();
    assert_eq!(
        (all.version, ids(&all.messages)),
        (v1, vec!["u1".to_string()])
    );
    assert!(
        s.messages_since(&c.chat_id, v1)
            .await
            .unwrap()
            .messages
            .is_empty()
    );
    // A checkpoint: only the reply is new.
    let done = checkpoint(s, &lease, &assistant_msg("a1", "one"), 1, false, T0 + 1)
        .await
        .unwrap();
    let ch = s.messages_since(&c.chat_id, v1).await.unwrap();
    assert!(ch.version > v1);
    assert_eq!(ids(&ch.messages), ["a1"]);
    assert_eq!(done.reply.version, ch.version);
    let v2 = ch.version;
    // Rewriting the reply moves it past the version again.
    checkpoint(s, &lease, &assistant_msg("a1", "two"), 1, false, T0 + 2)
        .await
        .unwrap();
    let ch = s.messages_since(&c.chat_id, v2).await.unwrap();
    assert_eq!(
        (ids(&ch.messages), ch.messages[0].message.text()),
        (vec!["a1".to_string()], "two".to_string())
    );
    let v3 = ch.version;
    // Queued, edited, deleted.
    let (q1, _) = enqueue(s, &c, "q1", None, Delivery::Queue, T0 + 3).await;
    assert!(q1.version > v3);
    let ch = s.messages_since(&c.chat_id, v3).await.unwrap();
    assert_eq!(ids(&ch.messages), ["q1"]);
    assert!(ch.messages[0].queued);
    let v4 = ch.version;
    s.edit_queued(
        &c.chat_id,
        "q1",
        None,
        &QueuedEdit {
            parts: Some(vec![MessagePart::text("e")]),
            delivery: None,
        },
        T0 + 4,
    )
    .await
    .unwrap();
    let ch = s.messages_since(&c.chat_id, v4).await.unwrap();
    assert_eq!(ids(&ch.messages), ["q1"]);
    assert_eq!(ch.messages[0].message.text(), "e");
    let v5 = ch.version;
    enqueue(s, &c, "q2", None, Delivery::Queue, T0 + 5).await;
    let v6 = s.messages_since(&c.chat_id, v5).await.unwrap().version;
    assert_eq!(
        s.delete_queued(&c.chat_id, "q2", None, T0 + 6)
            .await
            .unwrap(),
        QueuedChange::Done(None)
    );
    let ch = s.messages_since(&c.chat_id, v6).await.unwrap();
    assert!(ch.version > v6, "a delete raises the chat's version");
    assert!(ch.messages.is_empty());
    let v7 = ch.version;
    // A promotion and a steer join are writes too.
    let TurnEnded::Promoted { lease, next, .. } = end_next(s, &lease, T0 + 7).await.unwrap() else {
        panic!()
    };
    let ch = s.messages_since(&c.chat_id, v7).await.unwrap();
    assert_eq!(ids(&ch.messages), ["q1"]);
    assert!(!ch.messages[0].queued);
    assert_eq!(ch.messages[0].version, ch.version);
    let v8 = ch.version;
    enqueue(s, &c, "s1", None, Delivery::Steer, T0 + 8).await;
    let done = checkpoint(
        s,
        &lease,
        &assistant_msg("a2", "x"),
        next.position.unwrap(),
        true,
        T0 + 9,
    )
    .await
    .unwrap();
    assert_eq!(ids(&done.steers), ["s1"]);
    let ch = s.messages_since(&c.chat_id, v8).await.unwrap();
    assert_eq!(
        ids(&ch.messages),
        ["s1", "a2"],
        "the joined steer and the reply, in stored order"
    );
    assert_eq!(chat_row(s, &c).await.version, ch.version);
    // Versions are per chat.
    start(s, &web("other", None), "o1", None, T0).await;
    assert_eq!(
        s.messages_since(&c.chat_id, ch.version)
            .await
            .unwrap()
            .messages
            .len(),
        0
    );
}

// ---- questions -----------------------------------------------------------------------------------

pub async fn question_records_of_a_message_in_call_order(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("qorder").unwrap();
    let rows: Vec<_> = (0..3)
        .rev()
        .map(|i| NewQuestion {
            answer_deadline: Some(T0 + 10),
            ..new_question(&c, &format!("call-{i}"), "a1", i)
        })
        .collect();
    s.insert_questions(&rows, T0).await.unwrap();
    // Existing ids are left alone.
    let again = vec![NewQuestion {
        message_id: "other".into(),
        ..rows[0].clone()
    }];
    s.insert_questions(&again, T0 + 1).await.unwrap();
    let got = s.questions_of_message(&c, "a1", T0).await.unwrap();
    assert_eq!(
        got.iter()
            .map(|q| q.tool_call_id.as_str())
            .collect::<Vec<_>>(),
        ["call-0", "call-1", "call-2"]
    );
    assert_eq!(got[0].input, question_input());
    assert_eq!(got[0].answer_deadline, Some(T0 + 10));
    assert_eq!(
        (got[0].created_at, got[0].expires_at),
        (T0, T0 + QUESTION_TTL_MS)
    );
    assert!(!got[0].rendered && !got[0].posting && !got[0].closed && got[0].outcome.is_none());
    assert!(got[0].record.messages.is_empty());
    assert_eq!(got[0].lock_holder, None);
    assert!(
        s.questions_of_message(&c, "other", T0)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn mark_rendered_saves_records_and_links(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("rendered").unwrap();
    add_question(s, &c, "call-1", T0).await;
    s.insert_questions(&[new_question(&c, "call-2", "a1", 1)], T0)
        .await
        .unwrap();
    let mut r1 = record(&["m1", "m2"], 0);
    r1.state = Some(json!({"page": 1}));
    let calls = [
        RenderedCall {
            tool_call_id: "call-1".into(),
            record: r1.clone(),
        },
        RenderedCall {
            tool_call_id: "call-2".into(),
            record: record(&["m2"], 0),
        },
    ];
    let now = T0 + 1_000;
    s.mark_rendered(&RenderedOp {
        chat: &c,
        platform: "forum",
        calls: &calls,
        now,
    })
    .await
    .unwrap();
    let q = s.get_question(&c, "call-1", now).await.unwrap().unwrap();
    assert!(q.rendered);
    assert_eq!(q.record, r1);
    assert_eq!(q.updated_at, now);
    let calls_of =
        |v: Vec<QuestionRow>| -> Vec<String> { v.into_iter().map(|q| q.tool_call_id).collect() };
    assert_eq!(
        calls_of(
            s.questions_by_platform_message("forum", "m1", now)
                .await
                .unwrap()
        ),
        ["call-1"]
    );
    assert_eq!(
        calls_of(
            s.questions_by_platform_message("forum", "m2", now)
                .await
                .unwrap()
        ),
        ["call-1", "call-2"]
    );
    assert!(
        s.questions_by_platform_message("other", "m1", now)
            .await
            .unwrap()
            .is_empty()
    );
    // An empty record, or a missing call, is refused and changes nothing (not even the calls
    // before it).
    let bad = [RenderedCall {
        tool_call_id: "call-1".into(),
        record: record(&[], 0),
    }];
    let r = s
        .mark_rendered(&RenderedOp {
            chat: &c,
            platform: "forum",
            calls: &bad,
            now,
        })
        .await;
    assert!(matches!(r, Err(StoreError::InvalidInput { .. })), "{r:?}");
    let partial = [
        RenderedCall {
            tool_call_id: "call-1".into(),
            record: record(&["m7"], 0),
        },
        RenderedCall {
            tool_call_id: "call-9".into(),
            record: record(&["m8"], 0),
        },
    ];
    let r = s
        .mark_rendered(&RenderedOp {
            chat: &c,
            platform: "forum",
            calls: &partial,
            now,
        })
        .await;
    assert!(r.is_err(), "a missing call fails the operation");
    assert_eq!(
        s.get_question(&c, "call-1", now)
            .await
            .unwrap()
            .unwrap()
            .record,
        r1
    );
    assert!(
        s.questions_by_platform_message("forum", "m7", now)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn question_message_links_outlive_the_message_list(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("qlink").unwrap();
    add_question(s, &c, "call-1", T0).await;
    s.insert_questions(&[new_question(&c, "call-2", "a1", 1)], T0)
        .await
        .unwrap();
    let calls = [
        RenderedCall {
            tool_call_id: "call-1".into(),
            record: record(&["m1", "m2"], 0),
        },
        RenderedCall {
            tool_call_id: "call-2".into(),
            record: record(&["m2"], 0),
        },
    ];
    s.mark_rendered(&RenderedOp {
        chat: &c,
        platform: "forum",
        calls: &calls,
        now: T0,
    })
    .await
    .unwrap();
    let changed = T0 + 1_000;
    let l = lock(s, &c, "call-1", "w", 1_000, changed).await.unwrap();
    // m1 leaves the record's messages, m3 joins them (linked by the update).
    let row = s
        .update_question(&UpdateQuestionOp {
            lock: &l,
            update: &QuestionUpdate {
                record: Some(record(&["m2", "m3"], 1)),
                ..Default::default()
            },
            link_platform: Some("forum"),
            job: None,
            keep_lock: false,
            now: changed,
        })
        .await
        .unwrap();
    assert_eq!(row.record.revision, 1);
    let calls_of =
        |v: Vec<QuestionRow>| -> Vec<String> { v.into_iter().map(|q| q.tool_call_id).collect() };
    assert_eq!(
        calls_of(
            s.questions_by_platform_message("forum", "m1", changed)
                .await
                .unwrap()
        ),
        ["call-1"],
        "m1 left `messages` but still leads to its call"
    );
    assert_eq!(
        calls_of(
            s.questions_by_platform_message("forum", "m3", changed)
                .await
                .unwrap()
        ),
        ["call-1"]
    );
    assert_eq!(
        s.questions_by_platform_message("forum", "m2", changed)
            .await
            .unwrap()
            .len(),
        2
    );
    // call-2 expires first (no change since T0); call-1 30 days after its change.
    let first = T0 + QUESTION_TTL_MS;
    assert_eq!(
        s.questions_by_platform_message("forum", "m2", first)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(s.purge_expired(first).await.unwrap(), 1);
    assert!(
        s.get_question(&c, "call-2", T0).await.unwrap().is_none(),
        "purged"
    );
    assert_eq!(
        s.questions_by_platform_message("forum", "m1", first)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        s.questions_by_platform_message("forum", "m1", changed + QUESTION_TTL_MS)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(s.purge_expired(changed + QUESTION_TTL_MS).await.unwrap(), 1);
    assert_eq!(s.purge_expired(changed + QUESTION_TTL_MS).await.unwrap(), 0);
}

pub async fn record_outcome_first_wins_and_is_fenced(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("record").unwrap();
    add_question(s, &c, "call-1", T0).await;
    let q = |r: &Recorded| match r {
        Recorded::Won { question, .. }
        | Recorded::Settled { question }
        | Recorded::Changed { question } => question.clone(),
        Recorded::Gone => panic!("gone"),
    };
    // Another revision.
    let r = record_op(s, &c, "call-1", &answer("yes"), Some(1), None, T0 + 1).await;
    assert!(matches!(r, Recorded::Changed { .. }), "{r:?}");
    assert!(q(&r).outcome.is_none());
    // Posting the next question of a partial answer (revision 1, locked by `poster`).
    let Advanced::Done { lock: poster, .. } = s
        .advance_question(&AdvanceOp {
            chat: &c,
            tool_call_id: "call-1",
            expected_revision: 0,
            state: Some(&json!({"step": 1})),
            lock: LockRequest {
                holder: "poster",
                ttl_ms: 1_000,
            },
            now: T0 + 2,
        })
        .await
        .unwrap()
    else {
        panic!("advance")
    };
    let r = record_op(s, &c, "call-1", &answer("yes"), Some(1), None, T0 + 3).await;
    assert!(matches!(r, Recorded::Changed { .. }), "posting: {r:?}");
    // Posted, but still locked by the poster.
    update(
        s,
        &poster,
        &QuestionUpdate {
            posting: Some(false),
            ..Default::default()
        },
        T0 + 4,
    )
    .await
    .unwrap();
    let l = lock(s, &c, "call-1", "other", 1_000, T0 + 5).await.unwrap();
    let r = record_op(s, &c, "call-1", &answer("yes"), Some(1), None, T0 + 6).await;
    assert!(
        matches!(r, Recorded::Changed { .. }),
        "a foreign lock: {r:?}"
    );
    assert_eq!(q(&r).lock_holder.as_deref(), Some("other"));
    // Its time ran out: the lock no longer counts. The outcome is recorded with a lock for
    // closing.
    let at = T0 + 5 + 1_000;
    let r = record_op(
        s,
        &c,
        "call-1",
        &answer("yes"),
        Some(1),
        Some(LockRequest {
            holder: "closer",
            ttl_ms: 5_000,
        }),
        at,
    )
    .await;
    let Recorded::Won {
        question,
        lock: Some(closer),
        ..
    } = r
    else {
        panic!("{r:?}")
    };
    assert_eq!(question.outcome, Some(answer("yes")));
    assert_eq!(question.outcome_at, Some(at));
    assert_eq!(question.expires_at, at + ANSWERED_TTL_MS);
    assert_eq!(question.lock_holder.as_deref(), Some("closer"));
    assert_eq!(question.lock_until, at + 5_000);
    assert!(closer.token > l.token);
    assert!(matches!(
        update(s, &l, &QuestionUpdate::default(), at).await,
        Err(StoreError::Locked { .. })
    ));
    let closed = update(
        s,
        &closer,
        &QuestionUpdate {
            closed: Some(true),
            ..Default::default()
        },
        at + 1,
    )
    .await
    .unwrap();
    assert!(closed.closed);
    // The first outcome stays.
    let r = record_op(
        s,
        &c,
        "call-1",
        &QuestionOutcome::Dismissed,
        None,
        None,
        at + 2,
    )
    .await;
    let Recorded::Settled { question } = r else {
        panic!("{r:?}")
    };
    assert_eq!(question.outcome, Some(answer("yes")));
    assert_eq!(
        record_op(
            s,
            &c,
            "missing",
            &QuestionOutcome::Cancelled,
            None,
            None,
            at
        )
        .await,
        Recorded::Gone
    );
    // Without an expected revision (withdrawal, expiry), any revision and a foreign lock do.
    add_question(s, &c, "call-2", T0).await;
    let l2 = lock(s, &c, "call-2", "busy", 60_000, T0 + 1).await.unwrap();
    let r = record_op(
        s,
        &c,
        "call-2",
        &QuestionOutcome::Cancelled,
        None,
        None,
        T0 + 2,
    )
    .await;
    let Recorded::Won {
        question,
        lock: None,
        ..
    } = r
    else {
        panic!("{r:?}")
    };
    assert_eq!(question.outcome, Some(QuestionOutcome::Cancelled));
    assert_eq!(
        question.lock_holder.as_deref(),
        Some("busy"),
        "no lock asked: the holder keeps it"
    );
    update(
        s,
        &l2,
        &QuestionUpdate {
            closed: Some(true),
            ..Default::default()
        },
        T0 + 3,
    )
    .await
    .unwrap();
}

pub async fn question_first_outcome_wins_across_handles(db: Db) {
    let a = Arc::clone(&db.store);
    let b = db.second_handle().await;
    let c = ChatId::new("qfirst").unwrap();
    add_question(&*a, &c, "call-1", T0).await;
    let mut tasks = Vec::new();
    for i in 0..32 {
        let s = if i % 2 == 0 {
            Arc::clone(&a)
        } else {
            Arc::clone(&b)
        };
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let outcome = match i % 3 {
                0 => answer("yes"),
                1 => answer("no"),
                _ => QuestionOutcome::Dismissed,
            };
            let expected = (i % 2 == 0).then_some(0);
            let holder = format!("h{i}");
            let r = record_op(
                &*s,
                &c,
                "call-1",
                &outcome,
                expected,
                Some(LockRequest {
                    holder: &holder,
                    ttl_ms: 10_000,
                }),
                T0 + 1,
            )
            .await;
            (outcome, r)
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            (outcome, Recorded::Won { lock, .. }) => winners.push((outcome, lock)),
            (_, Recorded::Settled { .. } | Recorded::Changed { .. }) => {}
            (_, Recorded::Gone) => panic!("the question is there"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one outcome is recorded");
    let q = b.get_question(&c, "call-1", T0 + 2).await.unwrap().unwrap();
    assert_eq!(q.outcome.as_ref(), Some(&winners[0].0));
    assert_eq!(
        q.lock_holder,
        winners[0].1.as_ref().map(|l| l.holder.clone())
    );
}

pub async fn advance_question_is_fenced_by_revision(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("advance").unwrap();
    add_question(s, &c, "call-1", T0).await;
    let op = |expected, state, now| AdvanceOp {
        chat: &c,
        tool_call_id: "call-1",
        expected_revision: expected,
        state,
        lock: LockRequest {
            holder: "w",
            ttl_ms: 1_000,
        },
        now,
    };
    let step1 = json!({"step": 1});
    let Advanced::Done { question, lock: l } = s
        .advance_question(&op(0, Some(&step1), T0 + 1))
        .await
        .unwrap()
    else {
        panic!("at revision 0")
    };
    assert_eq!(question.record.revision, 1);
    assert_eq!(question.record.state, Some(step1.clone()));
    assert!(question.posting);
    assert!(question.locked(T0 + 1));
    assert_eq!(question.lock_holder.as_deref(), Some("w"));
    assert_eq!(question.expires_at, T0 + 1 + QUESTION_TTL_MS);
    // Posting and locked: nobody advances it.
    assert!(matches!(
        s.advance_question(&op(1, None, T0 + 2)).await.unwrap(),
        Advanced::Changed { .. }
    ));
    update(
        s,
        &l,
        &QuestionUpdate {
            posting: Some(false),
            ..Default::default()
        },
        T0 + 3,
    )
    .await
    .unwrap();
    let r = s.advance_question(&op(0, None, T0 + 4)).await.unwrap();
    let Advanced::Changed { question } = r else {
        panic!("a stale revision: {r:?}")
    };
    assert_eq!(question.record.revision, 1);
    let Advanced::Done { question, .. } = s.advance_question(&op(1, None, T0 + 5)).await.unwrap()
    else {
        panic!("at revision 1")
    };
    assert_eq!(question.record.revision, 2);
    assert_eq!(
        question.record.state,
        Some(step1.clone()),
        "no new state keeps the state"
    );
    // The revision fences answers too.
    assert!(matches!(
        record_op(s, &c, "call-1", &answer("yes"), Some(1), None, T0 + 5_000).await,
        Recorded::Changed { .. }
    ));
    // Answered: never advanced.
    add_question(s, &c, "call-2", T0).await;
    record_op(s, &c, "call-2", &answer("yes"), Some(0), None, T0 + 1).await;
    let op2 = AdvanceOp {
        tool_call_id: "call-2",
        ..op(0, None, T0 + 2)
    };
    assert!(matches!(
        s.advance_question(&op2).await.unwrap(),
        Advanced::Changed { .. }
    ));
    let op3 = AdvanceOp {
        tool_call_id: "missing",
        ..op(0, None, T0 + 2)
    };
    assert_eq!(s.advance_question(&op3).await.unwrap(), Advanced::Gone);
}

pub async fn update_question_under_lock(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("update").unwrap();
    add_question(s, &c, "call-1", T0).await;
    let (a, row) = s
        .lock_question(&c, "call-1", "a", 1_000, T0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.lock_holder.as_deref(), Some("a"));
    assert_eq!(row.lock_until, T0 + 1_000);
    assert!(
        s.lock_question(&c, "call-1", "b", 1_000, T0 + 1)
            .await
            .unwrap()
            .is_none()
    );
    // Keep the lock, link the messages, schedule a retry: one transaction.
    let retry = job("updated", Some("updated:call-1"), T0 + 50);
    let row = s
        .update_question(&UpdateQuestionOp {
            lock: &a,
            update: &QuestionUpdate {
                record: Some(record(&["m1"], 0)),
                rendered: Some(true),
                ..Default::default()
            },
            link_platform: Some("forum"),
            job: Some(&retry),
            keep_lock: true,
            now: T0 + 10,
        })
        .await
        .unwrap();
    assert!(row.rendered);
    assert_eq!(row.lock_holder.as_deref(), Some("a"), "kept");
    assert_eq!(row.expires_at, T0 + 10 + QUESTION_TTL_MS);
    assert_eq!(
        s.questions_by_platform_message("forum", "m1", T0 + 10)
            .await
            .unwrap()
            .len(),
        1
    );
    let j = s
        .claim_job("w", 1_000, T0 + 50)
        .await
        .unwrap()
        .expect("the job is scheduled");
    assert_eq!(j.key.as_deref(), Some("updated:call-1"));
    // Without keep_lock the update releases it.
    let row = update(
        s,
        &a,
        &QuestionUpdate {
            posting: Some(false),
            ..Default::default()
        },
        T0 + 11,
    )
    .await
    .unwrap();
    assert_eq!(row.lock_holder, None);
    assert!(!row.locked(T0 + 11));
    assert!(matches!(
        update(s, &a, &QuestionUpdate::default(), T0 + 12).await,
        Err(StoreError::Locked { .. })
    ));
    // A lock taken over after its time ran out fences the old holder.
    let old = lock(s, &c, "call-1", "old", 10, T0 + 20).await.unwrap();
    let new = lock(s, &c, "call-1", "new", 1_000, T0 + 30)
        .await
        .expect("expired lock taken over");
    let r = s
        .update_question(&UpdateQuestionOp {
            lock: &old,
            update: &QuestionUpdate {
                closed: Some(true),
                ..Default::default()
            },
            link_platform: Some("forum"),
            job: Some(&job("late", None, T0)),
            keep_lock: false,
            now: T0 + 31,
        })
        .await;
    assert!(matches!(r, Err(StoreError::Locked { .. })), "{r:?}");
    assert!(
        s.claim_job("w", 1_000, T0 + 1_000).await.unwrap().is_none(),
        "the refused update scheduled nothing"
    );
    assert!(
        !s.get_question(&c, "call-1", T0 + 31)
            .await
            .unwrap()
            .unwrap()
            .closed
    );
    // An empty record is refused.
    let r = update(
        s,
        &new,
        &QuestionUpdate {
            record: Some(record(&[], 1)),
            ..Default::default()
        },
        T0 + 32,
    )
    .await;
    assert!(matches!(r, Err(StoreError::InvalidInput { .. })), "{r:?}");
    assert!(
        update(
            s,
            &new,
            &QuestionUpdate {
                closed: Some(true),
                ..Default::default()
            },
            T0 + 33
        )
        .await
        .unwrap()
        .closed
    );
}

pub async fn question_lock_is_exclusive_and_fences_updates(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("qfence").unwrap();
    add_question(s, &c, "call-1", T0).await;
    let a = lock(s, &c, "call-1", "a", 1_000, T0).await.unwrap();
    assert!(lock(s, &c, "call-1", "b", 1_000, T0 + 999).await.is_none());
    let b = lock(s, &c, "call-1", "b", 1_000, T0 + 1_000)
        .await
        .expect("a lock whose holder ran out of time can be taken");
    assert!(b.token > a.token);
    let upd = QuestionUpdate {
        posting: Some(true),
        ..Default::default()
    };
    let keep = |lock| UpdateQuestionOp {
        lock,
        update: &upd,
        link_platform: None,
        job: None,
        keep_lock: true,
        now: T0 + 1_001,
    };
    assert!(matches!(
        s.update_question(&keep(&a)).await,
        Err(StoreError::Locked { .. })
    ));
    assert!(s.update_question(&keep(&b)).await.unwrap().posting);
    s.unlock_question(&a).await.unwrap(); // the old holder's unlock is a no-op
    assert!(
        lock(s, &c, "call-1", "c", 1_000, T0 + 1_002)
            .await
            .is_none()
    );
    s.unlock_question(&b).await.unwrap();
    assert!(
        lock(s, &c, "call-1", "c", 1_000, T0 + 1_002)
            .await
            .is_some()
    );
}

pub async fn question_locked_updates_lose_nothing(db: Db) {
    let a = Arc::clone(&db.store);
    let b = db.second_handle().await;
    let c = ChatId::new("qlock").unwrap();
    add_question(&*a, &c, "call-1", T0).await;
    let mut tasks = Vec::new();
    for i in 0..32 {
        let s = if i % 2 == 0 {
            Arc::clone(&a)
        } else {
            Arc::clone(&b)
        };
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let holder = format!("w{i}");
            let (l, q) = loop {
                if let Some(got) = s
                    .lock_question(&c, "call-1", &holder, 60_000, T0 + 1)
                    .await
                    .unwrap()
                {
                    break got;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            };
            let mut seen = q.record.state.clone().unwrap_or(json!([]));
            seen.as_array_mut().unwrap().push(json!(i));
            // Give the other tasks every chance to interleave between the read and the write.
            tokio::task::yield_now().await;
            let mut next = record(&[&format!("m{i}")], q.record.revision + 1);
            next.state = Some(seen);
            update(
                &*s,
                &l,
                &QuestionUpdate {
                    record: Some(next),
                    ..Default::default()
                },
                T0 + 2,
            )
            .await
            .unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let q = a.get_question(&c, "call-1", T0 + 3).await.unwrap().unwrap();
    assert_eq!(q.record.revision, 32, "the revision counts every update");
    let seen: HashSet<i64> = q
        .record
        .state
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(seen, (0..32).collect::<HashSet<_>>(), "no update was lost");
    assert_eq!(q.lock_holder, None);
    // The stored revision fences like the record's: the next answer must name revision 32.
    assert!(matches!(
        record_op(&*a, &c, "call-1", &answer("no"), Some(31), None, T0 + 4).await,
        Recorded::Changed { .. }
    ));
    assert!(matches!(
        record_op(&*b, &c, "call-1", &answer("no"), Some(32), None, T0 + 4).await,
        Recorded::Won { .. }
    ));
}

pub async fn question_past_ttl_is_gone(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("qttl").unwrap();
    add_question(s, &c, "call-1", T0).await;
    let q = s.get_question(&c, "call-1", T0).await.unwrap().unwrap();
    assert_eq!(q.expires_at, T0 + QUESTION_TTL_MS);
    assert_eq!(q.record.revision, 0);
    // A change pushes the expiry to 30 days after it.
    let later = T0 + QUESTION_TTL_MS / 2;
    let l = lock(s, &c, "call-1", "w", 1_000, later).await.unwrap();
    update(
        s,
        &l,
        &QuestionUpdate {
            posting: Some(false),
            ..Default::default()
        },
        later,
    )
    .await
    .unwrap();
    assert!(
        s.get_question(&c, "call-1", T0 + QUESTION_TTL_MS)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        s.get_question(&c, "call-1", later + QUESTION_TTL_MS - 1)
            .await
            .unwrap()
            .is_some()
    );
    let gone = later + QUESTION_TTL_MS;
    assert!(
        s.get_question(&c, "call-1", gone).await.unwrap().is_none(),
        "past its TTL a record is gone"
    );
    assert!(
        s.questions_of_message(&c, "a1", gone)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(lock(s, &c, "call-1", "w", 1_000, gone).await.is_none());
    assert_eq!(
        record_op(s, &c, "call-1", &answer("yes"), None, None, gone).await,
        Recorded::Gone
    );
    let adv = AdvanceOp {
        chat: &c,
        tool_call_id: "call-1",
        expected_revision: 0,
        state: None,
        lock: LockRequest {
            holder: "w",
            ttl_ms: 1,
        },
        now: gone,
    };
    assert_eq!(s.advance_question(&adv).await.unwrap(), Advanced::Gone);
    assert_eq!(s.purge_expired(gone - 1).await.unwrap(), 0);
    assert_eq!(s.purge_expired(gone).await.unwrap(), 1);
    assert!(
        s.get_question(&c, "call-1", T0).await.unwrap().is_none(),
        "purged for good"
    );
}

pub async fn question_answered_lives_24_hours(db: Db) {
    let s = &*db.store;
    let c = ChatId::new("qans").unwrap();
    add_question(s, &c, "call-1", T0).await;
    let at = T0 + 5_000;
    let actor = Actor {
        user: Some(user("alice")),
        identity: None,
    };
    let r = s
        .record_outcome(&RecordOp {
            chat: &c,
            tool_call_id: "call-1",
            outcome: &answer("yes"),
            actor: Some(&actor),
            expected_revision: Some(0),
            lock: None,
            resume: None,
            now: at,
        })
        .await
        .unwrap();
    assert!(matches!(r, Recorded::Won { lock: None, .. }), "{r:?}");
    let q = s.get_question(&c, "call-1", at).await.unwrap().unwrap();
    assert_eq!(q.outcome, Some(answer("yes")));
    assert_eq!(q.actor, Some(actor));
    assert_eq!(q.outcome_at, Some(at));
    assert!(!q.closed);
    // A later change (settled's) does not extend the 24 hours.
    let l = lock(s, &c, "call-1", "w", 1_000, at + 1).await.unwrap();
    update(
        s,
        &l,
        &QuestionUpdate {
            closed: Some(true),
            ..Default::default()
        },
        at + 1,
    )
    .await
    .unwrap();
    assert!(
        s.get_question(&c, "call-1", at + ANSWERED_TTL_MS - 1)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        s.get_question(&c, "call-1", at + ANSWERED_TTL_MS)
            .await
            .unwrap()
            .is_none()
    );
}

// ---- durable jobs --------------------------------------------------------------------------------

pub async fn job_is_claimed_by_one_worker(db: Db) {
    let a = Arc::clone(&db.store);
    let b = db.second_handle().await;
    let id = a.enqueue_job(&job("updated", None, T0)).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..16 {
        let s = if i % 2 == 0 {
            Arc::clone(&a)
        } else {
            Arc::clone(&b)
        };
        tasks.push(tokio::spawn(async move {
            s.claim_job(&format!("w{i}"), 10_000, T0).await.unwrap()
        }));
    }
    let mut claimed = Vec::new();
    for t in tasks {
        if let Some(j) = t.await.unwrap() {
            claimed.push(j);
        }
    }
    assert_eq!(claimed.len(), 1, "one worker claims the job");
    assert_eq!(claimed[0].id, id);
    assert_eq!(claimed[0].attempts, 1);
    assert_eq!(claimed[0].claim_until, Some(T0 + 10_000));
    assert_eq!(claimed[0].payload, json!({"kind": "updated"}));
    assert!(
        a.claim_job("late", 10_000, T0 + 9_999)
            .await
            .unwrap()
            .is_none()
    );
    let again = a
        .claim_job("late", 10_000, T0 + 10_000)
        .await
        .unwrap()
        .expect("a claim that ran out can be taken again");
    assert_eq!(again.attempts, 2, "the claim count is the fencing token");
    assert!(
        !a.complete_job(&claimed[0]).await.unwrap(),
        "the first claim was lost"
    );
    assert!(!a.retry_job(&claimed[0], T0, "x").await.unwrap());
    assert!(!a.bury_job(&claimed[0], "x").await.unwrap());
    assert!(a.complete_job(&again).await.unwrap());
    assert!(a.get_job(id).await.unwrap().is_none());
}

pub async fn job_is_retried_at_its_run_at_time(db: Db) {
    let s = &*db.store;
    assert!(s.claim_job("w", 1_000, T0).await.unwrap().is_none());
    let id = s
        .enqueue_job(&job("updated", None, T0 + 100))
        .await
        .unwrap();
    assert!(
        s.claim_job("w", 1_000, T0 + 99).await.unwrap().is_none(),
        "not before its run-at time"
    );
    let j = s.claim_job("w", 1_000, T0 + 100).await.unwrap().unwrap();
    assert!(s.retry_job(&j, T0 + 5_100, "boom").await.unwrap());
    let stored = s.get_job(id).await.unwrap().unwrap();
    assert_eq!((stored.claimed_by, stored.run_at), (None, T0 + 5_100));
    assert!(s.claim_job("w", 1_000, T0 + 5_099).await.unwrap().is_none());
    let j = s.claim_job("w", 1_000, T0 + 5_100).await.unwrap().unwrap();
    assert_eq!(j.attempts, 2);
    assert_eq!(j.last_error.as_deref(), Some("boom"));
    assert!(s.bury_job(&j, "gave up").await.unwrap());
    assert!(
        s.claim_job("w", 1_000, T0 + 1_000_000)
            .await
            .unwrap()
            .is_none(),
        "a dead job never runs"
    );
    let dead = s.get_job(id).await.unwrap().unwrap();
    assert!(dead.dead);
    assert_eq!(dead.last_error.as_deref(), Some("gave up"));
    // Due jobs are claimed earliest first.
    let late = s.enqueue_job(&job("b", None, T0 + 20)).await.unwrap();
    let early = s.enqueue_job(&job("a", None, T0 + 10)).await.unwrap();
    assert_eq!(
        s.claim_job("w", 1_000, T0 + 30).await.unwrap().unwrap().id,
        early
    );
    assert_eq!(
        s.claim_job("w", 1_000, T0 + 30).await.unwrap().unwrap().id,
        late
    );
}

pub async fn job_key_reschedules_and_revives(db: Db) {
    let s = &*db.store;
    let id = s
        .enqueue_job(&job("updated", Some("q:1"), T0 + 500))
        .await
        .unwrap();
    let same = s
        .enqueue_job(&job("updated", Some("q:1"), T0 + 100))
        .await
        .unwrap();
    assert_eq!(id, same, "one job per key");
    assert_eq!(
        s.get_job(id).await.unwrap().unwrap().run_at,
        T0 + 100,
        "the earlier time wins"
    );
    s.enqueue_job(&job("updated", Some("q:1"), T0 + 900))
        .await
        .unwrap();
    let j = s.get_job(id).await.unwrap().unwrap();
    assert_eq!(j.run_at, T0 + 100);
    assert_eq!(j.generation, 2);
    // Re-enqueued while running: completing that run keeps the job scheduled.
    let j = s.claim_job("w", 1_000, T0 + 100).await.unwrap().unwrap();
    s.enqueue_job(&job("updated", Some("q:1"), T0 + 200))
        .await
        .unwrap();
    assert!(s.complete_job(&j).await.unwrap());
    let kept = s.get_job(id).await.unwrap().expect("kept");
    assert_eq!(kept.claimed_by, None);
    let j = s
        .claim_job("w", 1_000, T0 + 200)
        .await
        .unwrap()
        .expect("still scheduled");
    assert!(s.bury_job(&j, "out of retries").await.unwrap());
    assert!(s.get_job(id).await.unwrap().unwrap().dead);
    // Enqueued again by key, a dead job comes back with its attempts reset, at the new time.
    s.enqueue_job(&job("updated", Some("q:1"), T0 + 300))
        .await
        .unwrap();
    let j = s
        .claim_job("w", 1_000, T0 + 300)
        .await
        .unwrap()
        .expect("revived");
    assert_eq!(j.id, id);
    assert_eq!(j.attempts, 1);
    assert!(!j.dead);
    // Jobs without a key are never merged.
    let x = s.enqueue_job(&job("x", None, T0)).await.unwrap();
    let y = s.enqueue_job(&job("x", None, T0)).await.unwrap();
    assert_ne!(x, y);
}

pub async fn job_survives_reopening_the_store(db: Db) {
    let id = {
        let s = db.second_handle().await;
        let id = s
            .enqueue_job(&job("updated", Some("k"), T0 + 5_000))
            .await
            .unwrap();
        let j = s.claim_job("w", 1_000, T0 + 5_000).await.unwrap().unwrap();
        s.retry_job(&j, T0 + 10_000, "later").await.unwrap();
        id
    };
    let s = db.second_handle().await;
    let j = s
        .get_job(id)
        .await
        .unwrap()
        .expect("the job survives reopening");
    assert_eq!(j.run_at, T0 + 10_000);
    assert!(s.claim_job("w", 1_000, T0 + 9_999).await.unwrap().is_none());
    let j = s.claim_job("w", 1_000, T0 + 10_000).await.unwrap().unwrap();
    assert_eq!(j.attempts, 2);
}

pub async fn delivery_job_is_written_with_the_turns_end(db: Db) {
    let s = &*db.store;
    let c = web("delivery", None);
    let (l, u1) = start(s, &c, "u1", None, T0).await;
    let d1 = job("deliver", Some("deliver:a1"), T0 + 100);
    s.end_turn(&EndTurnOp {
        lease: &l,
        reply: Some((&assistant_msg("a1", "hi"), u1.position.unwrap())),
        mode: EndMode::Next,
        now: T0 + 1,
        delivery: Some(&d1),
    })
    .await
    .unwrap();
    assert!(
        s.claim_job("w", 1_000, T0 + 99).await.unwrap().is_none(),
        "due at its run-at time"
    );
    let j = s
        .claim_job("w", 1_000, T0 + 100)
        .await
        .unwrap()
        .expect("the delivery is scheduled with the reply");
    assert_eq!(
        (j.kind.as_str(), j.key.as_deref()),
        ("deliver", Some("deliver:a1"))
    );
    // Removed by key whoever holds it (the posting process finished first).
    assert!(s.delete_job("deliver:a1").await.unwrap());
    assert!(!s.delete_job("deliver:a1").await.unwrap());
    assert!(
        !s.complete_job(&j).await.unwrap(),
        "the claim is gone with it"
    );

    // Waiting on questions: the text before them is owed too.
    let (l, u2) = start(s, &c, "u2", None, T0 + 200).await;
    s.await_answers(&AwaitOp {
        lease: &l,
        reply: &assistant_msg("a2", "let me ask"),
        position: u2.position.unwrap(),
        questions: &[new_question(&c.chat_id, "call-d", "a2", 0)],
        job: None,
        now: T0 + 201,
        delivery: Some(&job("deliver", Some("deliver:a2"), T0 + 300)),
    })
    .await
    .unwrap();
    let j = s
        .claim_job("w", 1_000, T0 + 300)
        .await
        .unwrap()
        .expect("scheduled with the waiting reply");
    assert_eq!(j.key.as_deref(), Some("deliver:a2"));
    assert!(s.complete_job(&j).await.unwrap());
}

pub async fn dead_jobs_are_listed_and_purged(db: Db) {
    let s = &*db.store;
    assert!(s.dead_jobs(10).await.unwrap().is_empty());
    s.enqueue_job(&job("deliver", Some("deliver:x"), T0))
        .await
        .unwrap();
    s.enqueue_job(&job("deliver", Some("deliver:y"), T0 + 10))
        .await
        .unwrap();
    let x = s.claim_job("w", 1_000, T0).await.unwrap().unwrap();
    assert!(s.bury_job(&x, "channel_not_found").await.unwrap());
    let dead = s.dead_jobs(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].key.as_deref(), Some("deliver:x"));
    assert_eq!(dead[0].last_error.as_deref(), Some("channel_not_found"));
    assert!(dead[0].dead);
    // Not yet past the retention: kept. The live job is never purged.
    assert_eq!(s.purge_dead_jobs(T0).await.unwrap(), 0);
    assert_eq!(s.purge_dead_jobs(T0 + 1_000).await.unwrap(), 1);
    assert!(s.dead_jobs(10).await.unwrap().is_empty());
    let y = s.claim_job("w", 1_000, T0 + 10).await.unwrap();
    assert_eq!(y.unwrap().key.as_deref(), Some("deliver:y"));
}

/// An answer settled just before the continued turn's process died (it had taken the lease,
/// not yet saved a step) is kept in the interrupted reply, not only in its record (issue 18: the
/// soak lost such answers).
pub async fn takeover_keeps_settled_answers_in_the_interrupted_reply(db: Db) {
    let s = &*db.store;
    let c = web("settled-then-died", None);
    let u1 = user_msg("u1", Some("alice"), "ask");
    let (l, _) = started(send_as(s, &c, &u1, Delivery::Queue, "p", T0).await.unwrap());
    let mut reply = assistant_msg("a1", "Let me ask. ");
    // The text before the questions was streamed into two messages.
    reply.metadata.drafts = vec!["m-1".into(), "m-2".into()];
    for call in ["call-1", "call-2"] {
        reply.parts.push(MessagePart::Tool(ToolPart {
            tool_name: QUESTION_TOOL.into(),
            tool_call_id: call.into(),
            state: ToolState::InputAvailable,
            input: json!({}),
            output: None,
            error_text: None,
            expires_at: None,
            approval: None,
        }));
    }
    s.await_answers(&AwaitOp {
        lease: &l,
        reply: &reply,
        position: 1,
        questions: &[
            new_question(&c.chat_id, "call-1", "a1", 0),
            new_question(&c.chat_id, "call-2", "a1", 1),
        ],
        job: None,
        now: T0 + 1,
        delivery: None,
    })
    .await
    .unwrap();
    let yes = answer("yes");
    record_op(s, &c.chat_id, "call-1", &yes, None, None, T0 + 2).await;
    record_op(
        s,
        &c.chat_id,
        "call-2",
        &QuestionOutcome::Expired(None),
        None,
        None,
        T0 + 2,
    )
    .await;
    // The continued turn's process takes the chat, then dies before its first checkpoint.
    let resumed = s
        .resume_turn(&c.chat_id, "a1", &lease_req("resumer", None, T0 + 3))
        .await
        .unwrap();
    assert!(matches!(resumed, Resume::Taken { .. }), "{resumed:?}");
    let taken = s
        .take_chat(&c.chat_id, &lease_req("sweeper", None, T0 + 3 + TTL))
        .await
        .unwrap()
        .expect("the expired lease is taken over");
    let marked = taken.interrupted.expect("the reply is marked interrupted");
    let stored = s.get_message(&c.chat_id, "a1").await.unwrap().unwrap();
    for m in [&marked.message, &stored.message] {
        let tools: Vec<&ToolPart> = m
            .parts
            .iter()
            .filter_map(|p| match p {
                MessagePart::Tool(t) => Some(t),
                _ => None,
            })
            .collect();
        assert_eq!(tools.len(), 2);
        assert_eq!(tools[0].state, ToolState::OutputAvailable, "{m:?}");
        assert_eq!(
            tools[0].output,
            Some(serde_json::to_value(yes.output().unwrap()).unwrap())
        );
        assert_eq!(tools[1].state, ToolState::OutputError);
        assert_eq!(m.metadata.error.as_ref().unwrap().code, INTERRUPTED);
        // Those messages show the text before the questions: the continuation's is never
        // drawn over them (the crash suite lost first segments so).
        assert!(m.metadata.drafts.is_empty(), "{:?}", m.metadata.drafts);
    }
}

/// The job `InterruptedDelivery` asks for in the conformance test: one per reply.
fn owed_test_job(chat: &ChatRow, reply: &UiMessage) -> Option<NewJob> {
    Some(NewJob {
        kind: "owed".into(),
        key: Some(format!("owed:{}:{}", chat.chat_id, reply.id)),
        payload: json!({"error": reply.metadata.error.as_ref().map(|e| e.code.clone())}),
        run_at: 0,
    })
}

/// A take-over that marks a reply interrupted writes what it owes in the same transaction (a
/// process killed right after it lost the notice when the engine wrote the job after), on both
/// ways in: a new message (`send`) and the queue sweep (`take_chat`); a take-over that
/// interrupts nothing writes none.
pub async fn takeover_writes_what_the_interrupted_reply_owes(db: Db) {
    let s = &*db.store;
    let owed = |run_at| {
        Some(InterruptedDelivery {
            job: owed_test_job,
            run_at,
        })
    };
    // By send.
    let c = web("owed-by-send", None);
    let (l, _) = start(s, &c, "u1", Some("alice"), T0).await;
    checkpoint(s, &l, &assistant_msg("a1", "partial"), 1, false, T0 + 1)
        .await
        .unwrap();
    let req = LeaseRequest {
        interrupted: owed(T0 + TTL + 500),
        ..lease_req("new", Some("alice"), T0 + TTL)
    };
    let sent = s
        .send(&SendOp {
            chat: &c,
            message: &user_msg("u2", Some("alice"), "x"),
            delivery: Delivery::Queue,
            lease: &req,
            queue_if_busy: true,
        })
        .await
        .unwrap();
    assert!(
        matches!(
            sent,
            Sent::Started {
                interrupted: Some(_),
                ..
            }
        ),
        "{sent:?}"
    );
    assert!(
        s.claim_job("w", 1_000, T0 + TTL + 499)
            .await
            .unwrap()
            .is_none(),
        "due at the run_at asked for"
    );
    let job = s
        .claim_job("w", 1_000, T0 + TTL + 500)
        .await
        .unwrap()
        .expect("the job is written with the take-over");
    assert_eq!(job.key.as_deref(), Some("owed:owed-by-send:a1"));
    assert_eq!(job.payload["error"], INTERRUPTED);
    s.complete_job(&job).await.unwrap();
    // By the queue sweep, on a turn that saved nothing yet: its new reply is owed.
    let c = web("owed-by-sweep", None);
    start(s, &c, "u1", Some("alice"), T0).await;
    let req = LeaseRequest {
        interrupted: owed(T0 + TTL),
        ..lease_req("sweeper", None, T0 + TTL)
    };
    let taken = s.take_chat(&c.chat_id, &req).await.unwrap().unwrap();
    let reply = taken.interrupted.expect("marked");
    let job = s
        .claim_job("w", 1_000, T0 + TTL)
        .await
        .unwrap()
        .expect("the job is written with the take-over");
    assert_eq!(
        job.key,
        Some(format!("owed:owed-by-sweep:{}", reply.message.id))
    );
    s.complete_job(&job).await.unwrap();
    // Nothing interrupted: no job.
    let c = web("owed-nothing", None);
    let req = LeaseRequest {
        interrupted: owed(T0),
        ..lease_req("first", Some("alice"), T0)
    };
    s.send(&SendOp {
        chat: &c,
        message: &user_msg("u1", Some("alice"), "x"),
        delivery: Delivery::Queue,
        lease: &req,
        queue_if_busy: true,
    })
    .await
    .unwrap();
    assert!(
        s.claim_job("w", 1_000, T0 + TTL * 10)
            .await
            .unwrap()
            .is_none()
    );
}

fn keyed_job(key: &str, run_at: Millis) -> NewJob {
    NewJob {
        kind: "deliver".into(),
        key: Some(key.into()),
        payload: json!({}),
        run_at,
    }
}

/// `earlier_job`: the oldest live job of a key prefix enqueued before a key (the engine keeps a
/// thread's replies in order with it); other prefixes, later jobs and dead jobs do not count,
/// and the prefix is literal (`_` and `%` are no wildcards).
pub async fn earlier_jobs_are_found_by_key_prefix_in_order(db: Db) {
    let s = &*db.store;
    for key in ["d:a_1:m1", "d:a%1:m1", "d:ab1:m1", "d:a_1:m2", "d:a_1:m3"] {
        s.enqueue_job(&keyed_job(key, T0)).await.unwrap();
    }
    let earlier = |key: &'static str| async move {
        s.earlier_job("d:a_1:", key)
            .await
            .unwrap()
            .and_then(|j| j.key)
    };
    assert_eq!(earlier("d:a_1:m1").await, None, "the first has none");
    assert_eq!(earlier("d:a_1:m2").await.as_deref(), Some("d:a_1:m1"));
    assert_eq!(earlier("d:a_1:m3").await.as_deref(), Some("d:a_1:m1"));
    // A key without a job: any job of the prefix but itself.
    assert_eq!(earlier("d:a_1:zz").await.as_deref(), Some("d:a_1:m1"));
    // The first done (removed): the second is the earliest.
    s.delete_job("d:a_1:m1").await.unwrap();
    assert_eq!(earlier("d:a_1:m3").await.as_deref(), Some("d:a_1:m2"));
    assert_eq!(earlier("d:a_1:m2").await, None);
    // A dead job is given up on: it holds nothing back.
    for other in ["d:a%1:m1", "d:ab1:m1"] {
        let job = s.claim_job("w", 1_000, T0).await.unwrap().unwrap();
        assert_eq!(job.key.as_deref(), Some(other), "claimed in order");
        s.complete_job(&job).await.unwrap();
    }
    let job2 = s.claim_job("w", 1_000, T0).await.unwrap().unwrap();
    assert_eq!(job2.key.as_deref(), Some("d:a_1:m2"));
    s.bury_job(&job2, "gone").await.unwrap();
    assert_eq!(earlier("d:a_1:m3").await, None);
}

/// `defer_job`: the claim is released and the job runs again at the time asked for, its
/// attempts as before the claim; a lost claim defers nothing.
pub async fn a_deferred_job_keeps_its_attempts(db: Db) {
    let s = &*db.store;
    s.enqueue_job(&keyed_job("d:x:1", T0)).await.unwrap();
    let job = s.claim_job("w", 1_000, T0).await.unwrap().unwrap();
    assert_eq!(job.attempts, 1);
    assert!(s.defer_job(&job, T0 + 5_000).await.unwrap());
    assert!(s.claim_job("w", 1_000, T0 + 4_999).await.unwrap().is_none());
    let again = s.claim_job("w2", 1_000, T0 + 5_000).await.unwrap().unwrap();
    assert_eq!(again.attempts, 1, "the deferred claim is not counted");
    assert!(
        !s.defer_job(&job, T0 + 9_000).await.unwrap(),
        "another worker's old claim defers nothing"
    );
    assert!(s.retry_job(&again, T0 + 6_000, "failed").await.unwrap());
    let third = s.claim_job("w", 1_000, T0 + 6_000).await.unwrap().unwrap();
    assert_eq!(third.attempts, 2, "a failed attempt counts");
}

// ---- operators -----------------------------------------------------------------------------------

/// `find_chats` sees every owner's chats, newest first, filtered by the state derived at `now`
/// (running while a live lease, awaiting while a question waits, else idle) and by platform.
pub async fn operators_find_chats_by_state_and_channel(db: Db) {
    let s = &*db.store;
    // idle: a finished turn (alice's web chat).
    let idle = web("ops-idle", Some("alice"));
    let (l, _) = start(s, &idle, "u1", Some("alice"), T0).await;
    assert!(matches!(
        end_next(s, &l, T0 + 1).await.unwrap(),
        TurnEnded::Released { .. }
    ));
    // running: a live lease (an anonymous web chat).
    let running = web("ops-running", None);
    start(s, &running, "u2", None, T0 + 10).await;
    // awaiting: a channel chat waiting on a question.
    let awaiting = in_thread("_forum-ops", Some("bob"), "T1");
    let (l, u3) = start(s, &awaiting, "u3", Some("bob"), T0 + 20).await;
    s.await_answers(&AwaitOp {
        lease: &l,
        reply: &assistant_msg("a3", "questions"),
        position: u3.position.unwrap(),
        questions: &[new_question(&awaiting.chat_id, "call-ops", "a3", 0)],
        job: None,
        now: T0 + 21,
        delivery: None,
    })
    .await
    .unwrap();
    let find = |state: Option<TurnState>, platform: Option<&str>, now: Millis| {
        let filter = ChatFilter {
            state,
            platform: platform.map(Into::into),
            limit: 10,
        };
        async move {
            s.find_chats(&filter, now)
                .await
                .unwrap()
                .into_iter()
                .map(|c| c.chat_id.to_string())
                .collect::<Vec<_>>()
        }
    };
    let now = T0 + 100;
    assert_eq!(
        find(None, None, now).await,
        ["_forum-ops", "ops-running", "ops-idle"],
        "every owner's chats, newest first"
    );
    assert_eq!(
        find(Some(TurnState::Running), None, now).await,
        ["ops-running"]
    );
    assert_eq!(
        find(Some(TurnState::Awaiting), None, now).await,
        ["_forum-ops"]
    );
    assert_eq!(find(Some(TurnState::Idle), None, now).await, ["ops-idle"]);
    assert_eq!(find(None, Some("forum"), now).await, ["_forum-ops"]);
    assert!(
        find(Some(TurnState::Idle), Some("forum"), now)
            .await
            .is_empty()
    );
    assert!(find(None, Some("slack"), now).await.is_empty());
    // Past the lease's expiry the running chat counts as idle (no question waits there).
    let later = T0 + 10 + TTL + 1;
    assert!(find(Some(TurnState::Running), None, later).await.is_empty());
    assert_eq!(
        find(Some(TurnState::Idle), None, later).await,
        ["ops-running", "ops-idle"]
    );
    let one = ChatFilter {
        limit: 1,
        ..ChatFilter::default()
    };
    assert_eq!(s.find_chats(&one, now).await.unwrap().len(), 1);
}

/// `backlog` counts the queued messages of every chat, and the jobs due (unclaimed or their claim
/// ended), running (the claim live) and dead at the time given; a job scheduled later is in none.
pub async fn operators_count_the_backlog(db: Db) {
    let s = &*db.store;
    assert_eq!(s.backlog(T0).await.unwrap(), Backlog::default());
    let a = web("backlog-a", Some("alice"));
    let b = web("backlog-b", Some("bob"));
    start(s, &a, "a1", Some("alice"), T0).await;
    enqueue(s, &a, "a2", Some("alice"), Delivery::Queue, T0).await;
    enqueue(s, &a, "a3", Some("alice"), Delivery::Queue, T0).await;
    start(s, &b, "b1", Some("bob"), T0).await;
    enqueue(s, &b, "b2", Some("bob"), Delivery::Queue, T0).await;
    for (key, run_at) in [
        ("backlog:dead", T0 - 10),
        ("backlog:running", T0 - 5),
        ("backlog:due", T0),
        ("backlog:later", T0 + 10_000),
    ] {
        s.enqueue_job(&job("deliver", Some(key), run_at))
            .await
            .unwrap();
    }
    let doomed = s.claim_job("w", 1_000, T0).await.unwrap().unwrap();
    assert_eq!(doomed.key.as_deref(), Some("backlog:dead"));
    assert!(s.bury_job(&doomed, "gone").await.unwrap());
    let running = s.claim_job("w", 1_000, T0).await.unwrap().unwrap();
    assert_eq!(running.key.as_deref(), Some("backlog:running"));
    assert_eq!(
        s.backlog(T0).await.unwrap(),
        Backlog {
            queued: 3,
            jobs_due: 1,
            jobs_running: 1,
            jobs_dead: 1,
        }
    );
    // Once the claim has ended, the claimed job is due again; the later one is not due yet.
    assert_eq!(
        s.backlog(T0 + 2_000).await.unwrap(),
        Backlog {
            queued: 3,
            jobs_due: 2,
            jobs_running: 0,
            jobs_dead: 1,
        }
    );
}

/// `live_jobs` lists what is not dead, soonest due first; `revive_job` makes a dead job due now
/// with its attempts reset (and nothing else); `purgeable` counts what the purges would remove and
/// removes nothing.
pub async fn operators_list_revive_and_count_jobs(db: Db) {
    let s = &*db.store;
    let later = s
        .enqueue_job(&job("deliver", Some("deliver:later"), T0 + 500))
        .await
        .unwrap();
    let soon = s
        .enqueue_job(&job("deliver", Some("deliver:soon"), T0 + 5))
        .await
        .unwrap();
    let doomed = s
        .enqueue_job(&job("deliver", Some("deliver:doomed"), T0))
        .await
        .unwrap();
    let j = s.claim_job("w", 1_000, T0).await.unwrap().unwrap();
    assert_eq!(j.id, doomed);
    assert!(s.bury_job(&j, "channel_not_found").await.unwrap());
    let live: Vec<i64> = s
        .live_jobs(10)
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(
        live,
        [soon, later],
        "soonest due first, the dead one left out"
    );
    assert_eq!(s.live_jobs(1).await.unwrap().len(), 1);

    // Counting removes nothing: an expired question record and the dead job.
    add_question(s, &ChatId::new("ops-q").unwrap(), "call-old", T0).await;
    let expired_at = T0 + QUESTION_TTL_MS;
    let counted = s.purgeable(expired_at, T0 + 1).await.unwrap();
    assert_eq!(
        counted,
        Purgeable {
            questions: 1,
            dead_jobs: 1
        }
    );
    assert_eq!(
        s.purgeable(expired_at - 1, T0).await.unwrap(),
        Purgeable::default(),
        "nothing expired yet, the dead job within the retention"
    );
    assert_eq!(s.purgeable(expired_at, T0 + 1).await.unwrap(), counted);
    assert_eq!(s.dead_jobs(10).await.unwrap().len(), 1);

    // A live job and an unknown id are not revived, and left as they were.
    assert!(s.revive_job(soon, T0 + 50).await.unwrap().is_none());
    assert_eq!(s.get_job(soon).await.unwrap().unwrap().run_at, T0 + 5);
    assert!(s.revive_job(999_999, T0 + 50).await.unwrap().is_none());

    let revived = s
        .revive_job(doomed, T0 + 50)
        .await
        .unwrap()
        .expect("revived");
    assert_eq!(revived.id, doomed);
    assert!(!revived.dead);
    assert_eq!((revived.attempts, revived.run_at), (0, T0 + 50));
    assert!(revived.claimed_by.is_none());
    assert_eq!(revived.last_error.as_deref(), Some("channel_not_found"));
    assert!(s.dead_jobs(10).await.unwrap().is_empty());
    assert!(
        s.revive_job(doomed, T0 + 60).await.unwrap().is_none(),
        "live again: a second revival does nothing"
    );
    // It runs again: due now, claimed like any job (after `soon`, due before it).
    let first = s.claim_job("w2", 1_000, T0 + 50).await.unwrap().unwrap();
    assert_eq!(first.id, soon);
    assert!(s.complete_job(&first).await.unwrap());
    let again = s.claim_job("w2", 1_000, T0 + 50).await.unwrap().unwrap();
    assert_eq!((again.id, again.attempts), (doomed, 1));
    assert!(s.complete_job(&again).await.unwrap());
}

// ---- agent chats ---------------------------------------------------------------------------------

/// A chat is bound to one agent: created bound, bound later, never taken by another agent; the
/// writer rules of `send` hold (a channel chat only from its thread, an owned chat by its owner).
pub async fn agent_chats_bind_once_and_keep_the_writer_rules(db: Db) {
    let s = &*db.store;
    let c = web("agent-1", Some("alice"));
    let bind_op = |chat: &NewChat, agent: &str, existing, now| {
        let chat = chat.clone();
        let agent = agent.to_owned();
        async move {
            s.bind_agent(&BindAgentOp {
                chat: &chat,
                agent: &agent,
                existing,
                now,
            })
            .await
        }
    };
    let bind = |chat: &NewChat, agent: &str, now| bind_op(chat, agent, true, now);
    let Bound::Bound(row) = bind(&c, "alice", T0).await.unwrap() else {
        panic!("a new chat is bound")
    };
    assert_eq!(row.agent.as_deref(), Some("alice"));
    assert_eq!(row.owner.as_ref().map(UserId::as_str), Some("alice"));
    assert!(matches!(
        bind(&c, "alice", T0 + 1).await.unwrap(),
        Bound::Bound(_)
    ));
    // bob may not write alice's chat at all.
    let as_bob = web("agent-1", Some("bob"));
    assert!(matches!(
        bind(&as_bob, "bob", T0 + 2).await,
        Err(StoreError::Forbidden { .. })
    ));
    // A chat that had turns is bound later; another agent then finds it taken.
    let t = in_thread("_p-agent", None, "T-agent");
    start(s, &t, "u1", None, T0).await;
    assert_eq!(chat_row(s, &t).await.agent, None);
    // An agent opening a conversation never binds a person's existing chat (`existing: false`).
    assert!(
        matches!(bind_op(&t, "mallory", false, T0 + 3).await.unwrap(), Bound::Other(r) if r.agent.is_none())
    );
    assert_eq!(chat_row(s, &t).await.agent, None);
    // A chat it creates, or one bound to it already, it does.
    let fresh = web("agent-fresh", Some("dora"));
    assert!(matches!(
        bind_op(&fresh, "dora", false, T0 + 3).await.unwrap(),
        Bound::Bound(_)
    ));
    assert!(matches!(
        bind_op(&fresh, "dora", false, T0 + 3).await.unwrap(),
        Bound::Bound(_)
    ));
    assert!(
        matches!(bind(&t, "", T0 + 3).await.unwrap(), Bound::Bound(r) if r.agent.as_deref() == Some(""))
    );
    assert!(
        matches!(bind(&t, "carol", T0 + 4).await.unwrap(), Bound::Other(r) if r.agent.as_deref() == Some(""))
    );
    // The thread's chat under another id is refused.
    let wrong = in_thread("_p-agent-2", None, "T-agent");
    assert!(matches!(
        bind(&wrong, "", T0 + 5).await,
        Err(StoreError::ChannelChat { .. })
    ));
    assert_eq!(s.get_chat(&wrong.chat_id).await.unwrap(), None);
}

/// Posted messages go at the chat's end whatever the turn state, raise the version, carry their
/// job, and a repeated id changes nothing.
pub async fn agent_messages_append_outside_turns_and_dedup(db: Db) {
    let s = &*db.store;
    let c = web("agent-post", Some("alice"));
    // A running turn (its lease held) is left alone.
    let (lease, _) = start(s, &c, "u1", Some("alice"), T0).await;
    let before = chat_row(s, &c).await;
    let msg = assistant_msg("a-post", "hello from outside");
    let job = job("sync", Some("sync:agent-post:a-post"), T0 + 1_000);
    let op = PostMessageOp {
        chat: &c.chat_id,
        message: &msg,
        inbox: false,
        job: Some(&job),
        now: T0 + 1,
    };
    let PostedMessage::New(saved) = s.post_message(&op).await.unwrap() else {
        panic!("new")
    };
    assert!(saved.version > before.version);
    assert_eq!(saved.message.text(), "hello from outside");
    let after = chat_row(s, &c).await;
    assert_eq!(
        after.lease.as_ref().map(|l| l.token),
        before.lease.as_ref().map(|l| l.token)
    );
    assert!(matches!(
        s.post_message(&op).await.unwrap(),
        PostedMessage::Duplicate(m) if m.seq == saved.seq
    ));
    assert_eq!(
        s.live_jobs(10).await.unwrap().len(),
        1,
        "one job, written once"
    );
    // The turn still ends, and its reply stays before the posted message.
    let (_, u1) = (0, s.get_message(&c.chat_id, "u1").await.unwrap().unwrap());
    checkpoint(
        s,
        &lease,
        &assistant_msg("r1", "reply"),
        u1.position.unwrap(),
        false,
        T0 + 2,
    )
    .await
    .unwrap();
    end_next(s, &lease, T0 + 3).await.unwrap();
    let all = s.list_messages(&c.chat_id).await.unwrap();
    assert_eq!(ids(&all), ["u1", "r1", "a-post"]);
    // No chat: not found, nothing written.
    let ghost = ChatId::new("agent-ghost").unwrap();
    let op = PostMessageOp {
        chat: &ghost,
        message: &msg,
        inbox: false,
        job: None,
        now: T0,
    };
    assert!(matches!(
        s.post_message(&op).await,
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(s.get_chat(&ghost).await.unwrap(), None);
}

/// An update lands only on the version read; the loser is told what is there now.
pub async fn agent_message_updates_are_fenced_by_version(db: Db) {
    let s = &*db.store;
    let c = web("agent-edit", Some("alice"));
    s.bind_agent(&BindAgentOp {
        chat: &c,
        agent: "alice",
        existing: false,
        now: T0,
    })
    .await
    .unwrap();
    let msg = assistant_msg("a1", "v1");
    let PostedMessage::New(v1) = s
        .post_message(&PostMessageOp {
            chat: &c.chat_id,
            message: &msg,
            inbox: false,
            job: None,
            now: T0,
        })
        .await
        .unwrap()
    else {
        panic!("new")
    };
    let edit = |text: &str| assistant_msg("a1", text);
    let (e2, e3) = (edit("v2"), edit("v3"));
    let op2 = UpdateMessageOp {
        chat: &c.chat_id,
        message: &e2,
        expected_version: v1.version,
        job: None,
        now: T0 + 1,
    };
    let op3 = UpdateMessageOp {
        message: &e3,
        ..op2.clone()
    };
    let (a, b) = tokio::join!(s.update_message(&op2), s.update_message(&op3));
    let (a, b) = (a.unwrap(), b.unwrap());
    let won: Vec<_> = [&a, &b]
        .into_iter()
        .filter_map(|r| match r {
            MessageUpdate::Done(m) => Some(m.message.text()),
            MessageUpdate::Moved(_) => None,
        })
        .collect();
    assert_eq!(
        won.len(),
        1,
        "exactly one of two racing edits lands: {a:?} {b:?}"
    );
    let now = s.get_message(&c.chat_id, "a1").await.unwrap().unwrap();
    assert_eq!(now.message.text(), won[0]);
    assert!(now.version > v1.version);
    // The loser sees the message as it is now.
    let lost_one = if matches!(a, MessageUpdate::Moved(_)) {
        a
    } else {
        b
    };
    assert!(matches!(lost_one, MessageUpdate::Moved(Some(m)) if m.version == now.version));
    // A message that is not there: moved, nothing written.
    let ghost = assistant_msg("nope", "x");
    assert!(matches!(
        s.update_message(&UpdateMessageOp {
            chat: &c.chat_id,
            message: &ghost,
            expected_version: now.version,
            job: None,
            now: T0 + 2,
        })
        .await
        .unwrap(),
        MessageUpdate::Moved(None)
    ));
    assert!(s.get_message(&c.chat_id, "nope").await.unwrap().is_none());
}

/// The inbox holds a bound chat's inbox messages for its agent only; taking them marks them
/// Seen, raises the chat's version, and two racing readers never both get one.
pub async fn inbox_is_taken_once_marked_seen_per_agent(db: Db) {
    let s = &*db.store;
    let mut chats = Vec::new();
    for (id, agent) in [
        ("agent-in-a", "alice"),
        ("agent-in-b", "alice"),
        ("agent-in-c", "bob"),
    ] {
        let c = web(id, Some(agent));
        s.bind_agent(&BindAgentOp {
            chat: &c,
            agent,
            existing: false,
            now: T0,
        })
        .await
        .unwrap();
        chats.push(c);
    }
    let mut n = 0;
    for round in 0..5 {
        for c in &chats {
            n += 1;
            let m = user_msg(&format!("p{n}"), None, &format!("hi {round}"));
            s.post_message(&PostMessageOp {
                chat: &c.chat_id,
                message: &m,
                inbox: true,
                job: None,
                now: T0 + n,
            })
            .await
            .unwrap();
        }
    }
    // The agent's own messages are not in its inbox.
    s.post_message(&PostMessageOp {
        chat: &chats[0].chat_id,
        message: &assistant_msg("mine", "x"),
        inbox: false,
        job: None,
        now: T0 + 100,
    })
    .await
    .unwrap();
    let version_before = chat_row(s, &chats[0]).await.version;
    let take = |agent: &'static str, chat: Option<ChatId>, limit: u32| async move {
        s.take_inbox(&InboxOp {
            agent,
            chat: chat.as_ref(),
            limit,
            now: T0 + 200,
        })
        .await
        .unwrap()
    };
    let only_b = take("alice", Some(chats[1].chat_id.clone()), 2).await;
    assert_eq!(
        ids(&only_b),
        ["p2", "p5"],
        "oldest first, one chat, the limit"
    );
    assert!(
        only_b
            .iter()
            .all(|m| m.message.metadata.ack == Some(Ack::Seen))
    );
    let other = db.second_handle().await;
    let (x, y) = tokio::join!(
        other.take_inbox(&InboxOp {
            agent: "alice",
            chat: None,
            limit: 100,
            now: T0 + 201
        }),
        take("alice", None, 100)
    );
    let mut got: Vec<String> = ids(&x.unwrap());
    got.extend(ids(&y));
    got.sort();
    let mut want: Vec<String> = (1..=15)
        .filter(|i| i % 3 != 0 && ![2, 5].contains(i))
        .map(|i| format!("p{i}"))
        .collect();
    want.sort();
    assert_eq!(
        got, want,
        "alice's messages, each taken once, none of bob's"
    );
    assert!(take("alice", None, 100).await.is_empty());
    assert_eq!(take("bob", None, 100).await.len(), 5);
    let stored = s
        .get_message(&chats[0].chat_id, "p1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.message.metadata.ack,
        Some(Ack::Seen),
        "Seen is stored"
    );
    assert!(chat_row(s, &chats[0]).await.version > version_before);
}
