//! `frogbot-store-conformance`: the store conformance suite — the one set of tests every
//! [`Store`](frogbot_core::store::Store) implementation runs (`frogbot-sqlite`, `frogbot-postgres`,
//! and any wrapped or third-party store).
//!
//! Each test takes a [`Db`]: a fresh, empty database's store, and a way to open a second handle on
//! the same database (as a second process would). A backend runs the whole suite with
//! [`store_conformance_tests!`] in one of its tests, given an async function that makes a [`Db`]
//! (or `None` to skip, e.g. when a database server is not installed):
//!
//! ```ignore
//! async fn fresh() -> Option<frogbot_store_conformance::Db> { /* a fresh database, or None */ }
//! frogbot_store_conformance::store_conformance_tests!(fresh);
//! ```
//!
//! The factory, not a URL, is the interface, so a wrapped or third-party store runs the suite too.
//! The cases are split by the store's parts, one module each: [`chats`], [`turns`] (send, leases,
//! checkpoint, await, end, take, resume, the queue), [`questions`], [`jobs`], [`operations`],
//! [`roles`], [`agent`] and [`files`] (the trait's parts, `frogbot_core::store::ChatStore` …, bear the same
//! names); [`harness`] holds the [`Db`] and the check of the harness itself.
//!
//! Times are fixed (`T0` onwards) and passed in, as the trait takes them; nothing reads a clock.
//!
//! What it must not do: be used by production code. It is a dev-dependency of the backends' tests
//! only; no library or binary of the workspace depends on it.

#![allow(missing_docs, clippy::missing_panics_doc)]

pub mod agent;
pub mod chats;
pub mod files;
pub mod harness;
pub mod jobs;
pub mod operations;
pub mod questions;
pub mod roles;
mod support;
pub mod turns;

pub use harness::{Db, Reopen};

/// Runs every conformance test against the store that `$fresh().await` makes (an
/// `async fn() -> Option<Db>`; `None` skips the test). The tests keep their names in one module,
/// `store_conformance`, whichever part they test.
#[macro_export]
macro_rules! store_conformance_tests {
    ($fresh:path) => {
        $crate::store_conformance_tests!(@tests $fresh;
            harness::conformance_harness_opens_a_store,
            chats::chat_created_by_first_send_and_owned_by_its_sender,
            chats::chat_list_is_per_owner_newest_first,
            chats::chat_channel_is_kept_and_found_by_thread,
            chats::send_checks_who_writes_a_chat,
            chats::messages_keep_turn_order_with_steers_and_queue,
            chats::messages_since_follows_versions,
            turns::send_duplicate_id_changes_nothing,
            turns::send_without_queueing_is_busy_and_saves_nothing,
            turns::send_steers_only_from_the_driver_while_live,
            turns::send_sixteen_racing_one_starts_the_rest_run_in_order,
            turns::send_racing_end_turn_never_strands_a_queued_message,
            turns::lease_past_expiry_is_taken_over,
            turns::lease_renewal_keeps_the_chat,
            turns::lease_fenced_writes_refused_after_takeover,
            turns::takeover_marks_the_interrupted_turn,
            turns::takeover_keeps_settled_answers_in_the_interrupted_reply,
            turns::takeover_writes_what_the_interrupted_reply_owes,
            turns::expired_leases_and_expire_lease,
            turns::checkpoint_joins_the_drivers_steers_in_order,
            turns::await_answers_saves_questions_and_releases,
            turns::end_turn_next_releases_or_promotes,
            turns::end_turn_handoff_releases_and_schedules,
            turns::take_chat_runs_the_queue_of_an_idle_chat,
            turns::resume_turn_each_answer,
            turns::record_outcome_continues_the_turn_when_asked,
            turns::turn_awaiting_blocks_new_turns_until_resumed,
            turns::queue_is_oldest_first_across_two_handles,
            turns::queue_edit_and_delete_only_by_author_before_promotion,
            questions::question_records_of_a_message_in_call_order,
            questions::mark_rendered_saves_records_and_links,
            questions::question_message_links_outlive_the_message_list,
            questions::record_outcome_first_wins_and_is_fenced,
            questions::question_first_outcome_wins_across_handles,
            questions::advance_question_is_fenced_by_revision,
            questions::update_question_under_lock,
            questions::question_lock_is_exclusive_and_fences_updates,
            questions::question_locked_updates_lose_nothing,
            questions::question_past_ttl_is_gone,
            questions::question_answered_lives_24_hours,
            jobs::earlier_jobs_are_found_by_key_prefix_in_order,
            jobs::a_deferred_job_keeps_its_attempts,
            jobs::job_is_claimed_by_one_worker,
            jobs::job_is_retried_at_its_run_at_time,
            jobs::job_key_reschedules_and_revives,
            jobs::job_survives_reopening_the_store,
            jobs::delivery_job_is_written_with_the_turns_end,
            jobs::dead_jobs_are_listed_and_purged,
            jobs::scheduled_jobs_are_pushed_to_other_handles,
            operations::operators_find_chats_by_state_and_channel,
            operations::operators_list_revive_and_count_jobs,
            operations::operators_count_the_backlog,
            roles::a_role_is_held_once_and_taken_again_once_released,
            roles::group_members_see_each_other_and_the_expired_drop_out,
            agent::agent_chats_bind_once_and_keep_the_writer_rules,
            agent::agent_messages_append_outside_turns_and_dedup,
            agent::agent_message_updates_are_fenced_by_version,
            agent::inbox_is_taken_once_marked_seen_per_agent,
            files::files_are_written_in_chunks_and_read_back_once_finished,
            files::the_same_upload_twice_is_kept_once,
            files::cut_off_uploads_are_purged,
            files::large_files_read_back_and_are_purged_whole,
        );
    };
    (@tests $fresh:path; $($part:ident :: $name:ident),* $(,)?) => {
        mod store_conformance {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(db) = $fresh().await else { return };
                    $crate::$part::$name(db).await;
                }
            )*
        }
    };
}
