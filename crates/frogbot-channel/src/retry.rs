//! One retry policy for every call FrogBot makes to a platform or a model ([`RetryPolicy`], on
//! backon's exponential backoff): the adapters' API clients, the model client, the MCP
//! supervisor's restarts and the engine's delivery retries all take their waits from it.
//!
//! Only a failure carrying a [`Transient`] is tried again (a network failure, a 5xx, a 429). The
//! wait is what the platform asked for (`Retry-After`, Telegram's `retry_after`) when it said —
//! unless that is longer than [`RetryPolicy::max_wait`]: then the call fails with it, and the
//! caller's own, longer-lived retry (a durable delivery job) waits it out — else the next
//! backoff. A call that may have been carried out although no answer came back
//! ([`Transient::may_be_done`]) is tried again only where repeating it is harmless.

use std::future::Future;
use std::sync::LazyLock;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use frogbot_model::Transient;

/// The delays of a [`RetryPolicy`], one per retry (backon's exponential backoff).
pub type Backoff = ExponentialBackoff;

/// How often and how long to wait: exponential backoff from `min_delay` doubling up to
/// `max_delay` (with up to as much again at random when `jitter`), at most `attempts` calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Calls in all, the first included (1: no retry; `u32::MAX`: no bound but the caller's).
    pub attempts: u32,
    /// The first backoff.
    pub min_delay: Duration,
    /// The longest backoff (before jitter).
    pub max_delay: Duration,
    /// The longest wait a platform may ask for that is waited out here.
    pub max_wait: Duration,
    /// Whether each backoff gets up to as much again at random (many clients retrying at once
    /// do not come back together).
    pub jitter: bool,
}

impl Default for RetryPolicy {
    /// Three calls, 250 ms then 500 ms between them, a platform's wait up to 10 s, no jitter.
    fn default() -> Self {
        Self {
            attempts: 3,
            min_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(4),
            max_wait: Duration::from_secs(10),
            jitter: false,
        }
    }
}

impl RetryPolicy {
    /// The backoff delays, one per retry (`attempts - 1` of them).
    pub fn backoff(&self) -> Backoff {
        let builder = ExponentialBuilder::new()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay);
        let builder = if self.jitter {
            builder.with_jitter()
        } else {
            builder
        };
        let builder = if self.attempts == u32::MAX {
            builder.without_max_times()
        } else {
            builder.with_max_times(self.attempts.saturating_sub(1) as usize)
        };
        builder.build()
    }

    /// A fresh budget for one call.
    pub fn start(&self) -> Retry {
        Retry {
            policy: *self,
            backoff: self.backoff(),
            attempts: 1,
        }
    }

    /// Runs `call` until it succeeds or the policy gives up. `transient` finds the [`Transient`]
    /// in an error (none: permanent); `repeatable`: repeating a call that may have been carried
    /// out does no harm; `on_retry` hears of each retry before its wait (for a log line or a
    /// metric).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use frogbot_channel::RetryPolicy;
    /// use frogbot_model::Transient;
    ///
    /// let mut calls = 0;
    /// let answer: Result<&str, Transient> = RetryPolicy::default()
    ///     .run(
    ///         true,
    ///         || {
    ///             calls += 1;
    ///             let fail = calls < 3;
    ///             async move { if fail { Err(Transient::new("503")) } else { Ok("sent") } }
    ///         },
    ///         |e| Some(e),
    ///         |_, _| {},
    ///     )
    ///     .await;
    /// assert_eq!(answer.unwrap(), "sent");
    /// assert_eq!(calls, 3);
    /// # }
    /// ```
    pub async fn run<T, E, F, Fut>(
        &self,
        repeatable: bool,
        mut call: F,
        transient: impl Fn(&E) -> Option<&Transient>,
        mut on_retry: impl FnMut(&E, Duration),
    ) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let mut retry = self.start();
        loop {
            let e = match call().await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let Some(wait) = transient(&e).and_then(|t| retry.next(t, repeatable)) else {
                return Err(e);
            };
            on_retry(&e, wait);
            tokio::time::sleep(wait).await;
        }
    }

    /// [`RetryPolicy::run`] of a call any failure of which is worth trying again (harmless to
    /// repeat, never a platform's wait): a join, a read.
    pub async fn run_any<T, E, F, Fut>(
        &self,
        call: F,
        on_retry: impl FnMut(&E, Duration),
    ) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        static ANY: LazyLock<Transient> = LazyLock::new(|| Transient::new("a failure"));
        self.run(true, call, |_| Some(&*ANY), on_retry).await
    }
}

/// One call's budget under a [`RetryPolicy`].
#[derive(Debug)]
pub struct Retry {
    policy: RetryPolicy,
    backoff: ExponentialBackoff,
    attempts: u32,
}

impl Retry {
    /// After a failure carrying `t`: how long to wait before the next call, or `None` to give up
    /// (the budget is spent, the platform asked for more than `max_wait`, or the call may have
    /// been carried out and is not `repeatable`). Counts the call it allows.
    pub fn next(&mut self, t: &Transient, repeatable: bool) -> Option<Duration> {
        if t.may_be_done() && !repeatable {
            return None;
        }
        if t.wait().is_some_and(|w| w > self.policy.max_wait) {
            return None;
        }
        let delay = self.backoff.next()?;
        self.attempts += 1;
        Some(t.wait().unwrap_or(delay))
    }

    /// Calls made or allowed so far (1 before any retry).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }
}

/// How a call to a platform failed, as far as trying it again goes: the one classification the
/// adapters' clients read their platform's failures into ([`Failure::transient`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The platform refused with the HTTP status `status`, asking to wait `wait` when it said
    /// (a 429's `Retry-After`, Telegram's `retry_after`, Matrix's `retry_after_ms`).
    Refused {
        /// The HTTP status (or the platform's own error code in its place).
        status: u16,
        /// The wait the platform asked for.
        wait: Option<Duration>,
    },
    /// Nothing reached the platform (no connection was made, the request's body could not be
    /// read): not done.
    NotSent,
    /// The request went out and no whole answer came back (a timeout, a reset, an answer cut
    /// off), or the platform said it failed part-way: it may have been carried out.
    MaybeDone,
}

impl Failure {
    /// A refusal with `status`, no wait asked for.
    pub fn status(status: u16) -> Self {
        Failure::Refused { status, wait: None }
    }

    /// Whether trying again may succeed: a 429, a 5xx, a refusal that asked to wait, anything
    /// without an answer. Any other refusal (a 4xx: too large, forbidden, malformed) is
    /// permanent.
    pub fn retryable(self) -> bool {
        match self {
            Failure::Refused { status, wait } => {
                wait.is_some() || status == 429 || (500..=599).contains(&status)
            }
            Failure::NotSent | Failure::MaybeDone => true,
        }
    }

    /// Whether the call may have been carried out: no answer after the request went out, or a
    /// gateway's `502` / `504` (it gave up waiting on a server that may have done the call).
    /// Such a call is repeated only where that is harmless ([`Retry::next`]), else looked up
    /// first.
    pub fn may_be_done(self) -> bool {
        match self {
            Failure::Refused { status, .. } => matches!(status, 502 | 504),
            Failure::NotSent => false,
            Failure::MaybeDone => true,
        }
    }

    /// `t` marked as the failure says: with the platform's wait, [`Transient::maybe_done`] when
    /// the call may have been carried out.
    pub fn mark(self, t: Transient) -> Transient {
        let t = match self {
            Failure::Refused { wait: Some(w), .. } => t.retry_after(w),
            _ => t,
        };
        if self.may_be_done() {
            t.maybe_done()
        } else {
            t
        }
    }

    /// The [`Transient`] `why` makes, [marked](Failure::mark); `None` (and `why` not called) when
    /// the failure is not worth retrying.
    pub fn transient(self, why: impl FnOnce() -> Transient) -> Option<Transient> {
        self.retryable().then(|| self.mark(why()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_the_attempts_and_a_platforms_wait_comes_first() {
        let policy = RetryPolicy {
            attempts: 4,
            ..RetryPolicy::default()
        };
        let mut r = policy.start();
        let t = Transient::new("503");
        assert_eq!(r.next(&t, true), Some(Duration::from_millis(250)));
        let asked = Transient::new("429").retry_after(Duration::from_secs(3));
        assert_eq!(r.next(&asked, true), Some(Duration::from_secs(3)));
        assert_eq!(r.next(&t, true), Some(Duration::from_secs(1)));
        assert_eq!(r.attempts(), 4);
        assert_eq!(r.next(&t, true), None, "four calls in all");
    }

    #[test]
    fn a_wait_too_long_or_a_call_maybe_done_is_not_retried_here() {
        let mut r = RetryPolicy::default().start();
        let long = Transient::new("429").retry_after(Duration::from_secs(11));
        assert_eq!(r.next(&long, true), None);
        let maybe = Transient::new("timeout").maybe_done();
        assert_eq!(r.next(&maybe, false), None);
        assert!(r.next(&maybe, true).is_some());
    }

    #[test]
    fn without_a_bound_the_backoff_goes_on_at_its_longest() {
        let policy = RetryPolicy {
            attempts: u32::MAX,
            max_delay: Duration::from_secs(1),
            ..RetryPolicy::default()
        };
        let last = policy.backoff().take(50).last();
        assert_eq!(last, Some(Duration::from_secs(1)));
    }

    #[test]
    fn a_failure_is_worth_retrying_with_its_wait_and_maybe_done_as_it_says() {
        let t = |f: Failure| f.transient(|| Transient::new("x"));
        let wait = Some(Duration::from_secs(2));
        let limited = t(Failure::Refused { status: 429, wait }).expect("a 429");
        assert_eq!((limited.wait(), limited.may_be_done()), (wait, false));
        assert!(t(Failure::status(503)).is_some_and(|t| !t.may_be_done()));
        for gateway in [502, 504] {
            assert!(t(Failure::status(gateway)).is_some_and(|t| t.may_be_done()));
        }
        assert!(t(Failure::status(413)).is_none(), "too large: permanent");
        assert!(t(Failure::status(400)).is_none());
        assert!(t(Failure::NotSent).is_some_and(|t| !t.may_be_done()));
        assert!(t(Failure::MaybeDone).is_some_and(|t| t.may_be_done()));
    }
}
