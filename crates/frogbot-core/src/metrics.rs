//! The engine's metrics: their names (one `pub const` each, with its labels), and the helpers the
//! engine, the store wrapper and the adapters record them with.
//!
//! Everything here records through the [`metrics`] facade only: without an installed recorder
//! (a library user who installs none, every test) each call is a no-op. Which exporter collects
//! them is the binary's choice (`frogbot serve` renders them on `GET /metrics` in the Prometheus
//! text format). What this module must NOT do: install a recorder, name a platform, or take a
//! label value that grows without bound (chat, message or user ids): labels are model ids,
//! platforms, API method names, status codes and the fixed words listed below.
//!
//! The adapters' client funnels call `platform_call` and `platform_rate_limit_wait`: Discord wraps
//! each serenity call; Matrix sees only failures (matrix-sdk makes the calls). `metered` times
//! every `Store` method and is installed by serve when metrics are on; neither backend knows of
//! metrics.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};

pub use frogbot_channel::metrics::{
    PLATFORM_API_CALLS, PLATFORM_RATE_LIMIT_WAITS, platform_call, platform_rate_limit_wait,
};

use crate::model::{Millis, QuestionOutcome, UiMessage};
use crate::store::{Backlog, Call, ChatRow, DynStore, QuestionRow, Result, Store, StoreLayer};

/// Turns started, `{model}`: a new turn, or one resumed after its questions (the model id as
/// offered, the default model's when the message named none).
pub const TURNS_STARTED: &str = "frogbot_turns_started_total";
/// Turns that ended, `{model, outcome}`: `outcome` is `done` (a final reply), `awaiting` (it waits
/// on questions; its continuation counts as a new start), `failed` (the reply carries an error,
/// see [`TURNS_FAILED`]), `stopped` (the driving user stopped it), `max_steps`, or `error` (the
/// engine failed: a store failure or a lost lease; `model` is then `unknown`).
pub const TURNS_FINISHED: &str = "frogbot_turns_finished_total";
/// Turns that failed visibly, `{model, reason}`: `reason` is the error code the reply carries
/// (`model-error`, `model-timeout`, `selection-unavailable`, …).
pub const TURNS_FAILED: &str = "frogbot_turns_failed_total";
/// How long a turn ran, from its start (or resumption) to its end, `{model, outcome}` (seconds).
pub const TURN_DURATION: &str = "frogbot_turn_duration_seconds";
/// How long one model step took (the model call and its tool calls), `{model}` (seconds).
pub const STEP_DURATION: &str = "frogbot_step_duration_seconds";
/// Messages queued behind running turns, in the whole store (refreshed on a scrape by
/// [`refresh_backlog`]).
pub const QUEUE_DEPTH: &str = "frogbot_queue_depth";
/// Durable jobs, `{state}`: `due` (may be claimed now), `running` (claimed, the claim live),
/// `dead` (given up on); refreshed on a scrape by [`refresh_backlog`]. A job scheduled later is in
/// none of them.
pub const JOBS: &str = "frogbot_jobs";
/// Questions, `{platform, event}`: `platform` is the chat's channel platform, or `web` for the
/// HTTP API and web chat; `event` is `asked` (a question record created), `answered`,
/// `dismissed`, `expired` or `cancelled` (its first outcome, recorded once).
pub const QUESTIONS: &str = "frogbot_questions_total";
/// From a question's asking to its answer, `{platform}` (seconds; answered questions only).
pub const ANSWER_LATENCY: &str = "frogbot_answer_latency_seconds";
/// How long a store operation took, `{op}`: the [`Store`] method's name (seconds; failed ones
/// too).
pub const STORE_OPERATION: &str = "frogbot_store_operation_seconds";
/// Store operations that failed, `{op}`.
pub const STORE_ERRORS: &str = "frogbot_store_operation_errors_total";

/// The histogram buckets of the turn durations (seconds): a scripted turn takes milliseconds, a
/// model's many steps minutes.
pub const TURN_BUCKETS: &[f64] = &[
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];
/// The histogram buckets of one model step (seconds).
pub const STEP_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];
/// The histogram buckets of a person's answer (seconds: a click within seconds, a reply within
/// hours).
pub const ANSWER_BUCKETS: &[f64] = &[
    1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 3_600.0, 14_400.0, 86_400.0,
];
/// The histogram buckets of a store operation (seconds: a read takes microseconds, a commit
/// milliseconds).
pub const STORE_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// Describes every metric of this module to the installed recorder (its `# HELP` and unit).
pub fn describe() {
    describe_counter!(TURNS_STARTED, "Turns started (new or resumed), by model.");
    describe_counter!(TURNS_FINISHED, "Turns that ended, by model and outcome.");
    describe_counter!(
        TURNS_FAILED,
        "Turns that failed visibly, by model and error code."
    );
    describe_histogram!(TURN_DURATION, Unit::Seconds, "How long a turn ran.");
    describe_histogram!(
        STEP_DURATION,
        Unit::Seconds,
        "How long one model step took."
    );
    describe_gauge!(QUEUE_DEPTH, "Messages queued behind running turns.");
    describe_gauge!(JOBS, "Durable jobs by state (due, running, dead).");
    describe_counter!(
        QUESTIONS,
        "Questions asked and their outcomes, by platform."
    );
    describe_histogram!(
        ANSWER_LATENCY,
        Unit::Seconds,
        "From a question's asking to its answer."
    );
    describe_histogram!(
        STORE_OPERATION,
        Unit::Seconds,
        "How long a store operation took."
    );
    describe_counter!(STORE_ERRORS, "Store operations that failed.");
    describe_counter!(
        PLATFORM_API_CALLS,
        "Platform API calls, by method and status."
    );
    describe_counter!(
        PLATFORM_RATE_LIMIT_WAITS,
        "Waits after a platform limited the rate."
    );
}

/// The model label of a reply: the model it names, else the default model.
fn model_of<'a>(reply: &'a UiMessage, default_model: &'a str) -> String {
    reply
        .metadata
        .model
        .as_deref()
        .unwrap_or(default_model)
        .to_owned()
}

/// A turn started (or resumed) with `model`.
pub(crate) fn turn_started(model: &str) {
    counter!(TURNS_STARTED, "model" => model.to_owned()).increment(1);
}

/// Times one turn of a run (from its start or resumption), for [`TURN_DURATION`].
#[derive(Debug)]
pub(crate) struct TurnClock<'a> {
    default_model: &'a str,
    started: Instant,
}

impl<'a> TurnClock<'a> {
    /// Starts timing a turn; `default_model` labels a reply that names no model.
    pub(crate) fn start(default_model: &'a str) -> Self {
        Self {
            default_model,
            started: Instant::now(),
        }
    }

    /// The turn ended with `reply`; `why` is the engine's reason as its `Debug` (`Reply`,
    /// `MaxSteps`, `Stopped`), or `Awaiting`.
    pub(crate) fn finished(&self, reply: &UiMessage, why: &str) {
        let outcome = match why {
            _ if reply.metadata.error.is_some() => "failed",
            "Awaiting" => "awaiting",
            "MaxSteps" => "max_steps",
            "Stopped" => "stopped",
            _ => "done",
        };
        let model = model_of(reply, self.default_model);
        counter!(TURNS_FINISHED, "model" => model.clone(), "outcome" => outcome).increment(1);
        histogram!(TURN_DURATION, "model" => model, "outcome" => outcome)
            .record(self.started.elapsed().as_secs_f64());
    }
}

/// A turn failed visibly with the error `code` (its reply carries it).
pub(crate) fn turn_failed(reply: &UiMessage, default_model: &str, code: &str) {
    let model = model_of(reply, default_model);
    counter!(TURNS_FAILED, "model" => model, "reason" => code.to_owned()).increment(1);
}

/// A turn's run ended with an engine error (a store failure, a lost lease).
pub(crate) fn turn_errored() {
    counter!(TURNS_FINISHED, "model" => "unknown", "outcome" => "error").increment(1);
    counter!(TURNS_FAILED, "model" => "unknown", "reason" => "error").increment(1);
}

/// Records a model step's duration when dropped (whatever way the step ends).
#[derive(Debug)]
pub(crate) struct StepTimer {
    model: String,
    started: Instant,
}

impl Drop for StepTimer {
    fn drop(&mut self) {
        histogram!(STEP_DURATION, "model" => std::mem::take(&mut self.model))
            .record(self.started.elapsed().as_secs_f64());
    }
}

/// Times one model step of `model` until the returned guard is dropped.
pub(crate) fn step_timer(model: &str) -> StepTimer {
    StepTimer {
        model: model.to_owned(),
        started: Instant::now(),
    }
}

/// The platform label of a chat: its channel's platform, or `web`.
fn platform_of(chat: &ChatRow) -> String {
    chat.channel
        .as_ref()
        .map_or_else(|| "web".to_owned(), |c| c.platform.clone())
}

/// `n` questions were asked in `chat`.
pub(crate) fn questions_asked(chat: &ChatRow, n: usize) {
    counter!(QUESTIONS, "platform" => platform_of(chat), "event" => "asked").increment(n as u64);
}

/// A question's first outcome was recorded (`question` as it was stored with it).
pub(crate) fn question_concluded(
    chat: &ChatRow,
    question: &QuestionRow,
    outcome: &QuestionOutcome,
) {
    let platform = platform_of(chat);
    let event = match outcome {
        QuestionOutcome::Answered(_) => "answered",
        QuestionOutcome::Dismissed => "dismissed",
        QuestionOutcome::Expired(_) => "expired",
        QuestionOutcome::Cancelled => "cancelled",
        _ => "other",
    };
    if event == "answered" {
        let at = question.outcome_at.unwrap_or(question.updated_at);
        let seconds = (at - question.created_at).max(0) as f64 / 1000.0;
        histogram!(ANSWER_LATENCY, "platform" => platform.clone()).record(seconds);
    }
    counter!(QUESTIONS, "platform" => platform, "event" => event).increment(1);
}

/// Reads the store's backlog at `now` and sets [`QUEUE_DEPTH`] and [`JOBS`] (a scrape calls it:
/// one cheap read).
pub async fn refresh_backlog(store: &dyn Store, now: Millis) -> Result<Backlog> {
    let b = store.backlog(now).await?;
    gauge!(QUEUE_DEPTH).set(b.queued as f64);
    gauge!(JOBS, "state" => "due").set(b.jobs_due as f64);
    gauge!(JOBS, "state" => "running").set(b.jobs_running as f64);
    gauge!(JOBS, "state" => "dead").set(b.jobs_dead as f64);
    Ok(b)
}

// ---- the store wrapper ---------------------------------------------------------------------------

/// `store`, with every operation timed into [`STORE_OPERATION`] (and its failures counted in
/// [`STORE_ERRORS`]) under the method's name: one wrapper for every backend, so neither backend's
/// code knows of metrics.
pub fn metered(store: DynStore) -> DynStore {
    Arc::new(Metered { inner: store })
}

/// A [`Store`] that forwards every method to `inner`, timing it (see [`metered`]).
#[derive(Debug)]
struct Metered {
    inner: DynStore,
}

/// Records an operation's time (and failure) under `op`.
fn store_operation(op: &'static str, started: Instant, ok: bool) {
    histogram!(STORE_OPERATION, "op" => op).record(started.elapsed().as_secs_f64());
    if !ok {
        counter!(STORE_ERRORS, "op" => op).increment(1);
    }
}

#[async_trait]
impl StoreLayer for Metered {
    fn inner(&self) -> &dyn Store {
        self.inner.as_ref()
    }

    async fn around<T: Send + 'static>(&self, op: &'static str, call: Call<'_, T>) -> Result<T> {
        let started = Instant::now();
        let r = call.await;
        store_operation(op, started, r.is_ok());
        r
    }
}
