//! When to try a failed request again, and how long to wait first.
//!
//! Only failures that carry a [`Transient`] are retried (429, 5xx, connection refused / reset /
//! timed out, a stream that broke off before its first event), at most `max_retries` times. The
//! wait is the server's `Retry-After` when it sent one (60 s at most: a longer one is not waited,
//! the request fails at once so a fallback model can answer), else an exponential backoff with
//! jitter (0.5 s, 1 s, 2 s, … up to 8 s, each plus up to as much again at random).

use std::time::Duration;

use frogbot_channel::RetryPolicy;
/// The wait a response asks for (one parser for every client: `frogbot_net::retry_after`).
pub(crate) use frogbot_net::retry_after;

use crate::error::Error;

/// The longest `Retry-After` the client waits; a longer one fails the request instead.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The first backoff delay.
const MIN_DELAY: Duration = Duration::from_millis(500);
/// The longest backoff delay (before jitter).
const MAX_DELAY: Duration = Duration::from_secs(8);

/// What to do after a failed attempt.
#[derive(Debug, PartialEq)]
pub(crate) enum Next {
    /// Wait this long, then try again.
    Wait(Duration),
    /// Give up (the failure is permanent, the retries are used up, or the server asked to wait
    /// too long).
    GiveUp,
}

/// The retry budget of one model call (its opening and, until the first event, its stream), on
/// frogbot-channel's one [`RetryPolicy`].
#[derive(Debug)]
pub(crate) struct Retry {
    budget: frogbot_channel::Retry,
}

impl Retry {
    /// A budget of `max_retries` retries after the first attempt.
    pub(crate) fn new(max_retries: u32) -> Self {
        let policy = RetryPolicy {
            attempts: max_retries.saturating_add(1),
            min_delay: MIN_DELAY,
            max_delay: MAX_DELAY,
            max_wait: MAX_RETRY_AFTER,
            jitter: true,
        };
        Self {
            budget: policy.start(),
        }
    }

    /// Requests made so far.
    pub(crate) fn attempts(&self) -> u32 {
        self.budget.attempts()
    }

    /// Decides after `error`, counting the retry it allows.
    pub(crate) fn next(&mut self, error: &Error) -> Next {
        // A model request is repeatable: a retried one answers anew.
        match error.transient().and_then(|t| self.budget.next(t, true)) {
            Some(wait) => Next::Wait(wait),
            None => Next::GiveUp,
        }
    }

    /// The error to report once retrying is over: `error` itself after one attempt, else wrapped
    /// to say how many were made, or that the server asked to wait too long.
    pub(crate) fn final_error(&self, error: Error) -> Error {
        let wait = error.transient().and_then(|t| t.wait());
        if let Some(wait) = wait.filter(|wait| *wait > MAX_RETRY_AFTER) {
            let seconds = wait
                .as_secs()
                .saturating_add(u64::from(wait.subsec_nanos() > 0));
            return Error::WaitTooLong {
                seconds,
                last: Box::new(error),
            };
        }
        if self.attempts() > 1 && error.transient().is_some() {
            return Error::GaveUp {
                attempts: self.attempts(),
                last: Box::new(error),
            };
        }
        error
    }

    /// After a failed attempt: waits and returns `Ok` when another attempt is due, else the error
    /// to report.
    pub(crate) async fn wait_or_fail(&mut self, error: Error) -> Result<(), Error> {
        match self.next(&error) {
            Next::Wait(wait) => {
                tracing::warn!(
                    attempt = self.attempts(),
                    wait_ms = wait.as_millis() as u64,
                    %error,
                    "model request failed, trying again"
                );
                tokio::time::sleep(wait).await;
                Ok(())
            }
            Next::GiveUp => Err(self.final_error(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use frogbot_core::model::Transient;
    use reqwest::header::{HeaderMap, HeaderValue};

    use super::*;

    fn status(code: u16, transient: Option<Transient>) -> Error {
        Error::Status {
            status: code,
            message: "x".into(),
            transient,
        }
    }

    fn server_error() -> Error {
        status(500, Some(Transient::new("HTTP 500")))
    }

    #[test]
    fn retries_a_transient_failure_max_retries_times_then_gives_up() {
        let mut retry = Retry::new(2);
        assert!(matches!(retry.next(&server_error()), Next::Wait(_)));
        assert!(matches!(retry.next(&server_error()), Next::Wait(_)));
        assert_eq!(retry.next(&server_error()), Next::GiveUp);
        assert_eq!(retry.attempts(), 3);
        let error = retry.final_error(server_error());
        assert!(
            matches!(error, Error::GaveUp { attempts: 3, .. }),
            "{error:?}"
        );
        assert!(error.transient().is_some(), "still transient: {error:?}");
        assert!(error.to_string().contains("after 3 attempts"), "{error}");
    }

    #[test]
    fn zero_retries_means_one_attempt_and_the_plain_error() {
        let mut retry = Retry::new(0);
        assert_eq!(retry.next(&server_error()), Next::GiveUp);
        let error = retry.final_error(server_error());
        assert!(
            matches!(error, Error::Status { status: 500, .. }),
            "{error:?}"
        );
        assert!(error.transient().is_some());
    }

    #[test]
    fn a_permanent_failure_is_not_retried() {
        let mut retry = Retry::new(5);
        assert_eq!(retry.next(&status(400, None)), Next::GiveUp);
        assert_eq!(retry.attempts(), 1);
        let error = retry.final_error(status(401, None));
        assert!(matches!(error, Error::Status { status: 401, .. }));
        assert!(error.transient().is_none());
    }

    #[test]
    fn the_servers_retry_after_is_waited_instead_of_the_backoff() {
        let mut retry = Retry::new(3);
        let asked = |secs| status(429, Some(Transient::new("429").retry_after(secs)));
        assert_eq!(
            retry.next(&asked(Duration::from_secs(7))),
            Next::Wait(Duration::from_secs(7))
        );
        assert_eq!(
            retry.next(&asked(Duration::ZERO)),
            Next::Wait(Duration::ZERO)
        );
        assert_eq!(
            retry.next(&asked(MAX_RETRY_AFTER)),
            Next::Wait(MAX_RETRY_AFTER)
        );
    }

    #[test]
    fn a_retry_after_over_60_seconds_is_not_waited() {
        let mut retry = Retry::new(3);
        let error = status(
            429,
            Some(Transient::new("429").retry_after(Duration::from_millis(60_500))),
        );
        assert_eq!(retry.next(&error), Next::GiveUp);
        assert_eq!(retry.attempts(), 1);
        let error = retry.final_error(error);
        assert!(
            matches!(error, Error::WaitTooLong { seconds: 61, .. }),
            "{error:?}"
        );
        let transient = error.transient().expect("still transient");
        assert_eq!(transient.wait(), Some(Duration::from_millis(60_500)));
        assert!(error.to_string().contains("61 s"), "{error}");
        let forever = status(429, Some(Transient::new("429").retry_after(Duration::MAX)));
        assert!(matches!(
            Retry::new(1).final_error(forever),
            Error::WaitTooLong {
                seconds: u64::MAX,
                ..
            }
        ));
    }

    #[test]
    fn the_backoff_grows_with_jitter_and_is_capped() {
        let mut retry = Retry::new(10);
        let waits: Vec<Duration> = (0..10)
            .map(|_| match retry.next(&server_error()) {
                Next::Wait(wait) => wait,
                Next::GiveUp => panic!("gave up early"),
            })
            .collect();
        let mut base = MIN_DELAY;
        for wait in waits {
            assert!(
                wait >= base && wait <= base * 2,
                "{wait:?} for base {base:?}"
            );
            base = (base * 2).min(MAX_DELAY);
        }
        assert_eq!(retry.next(&server_error()), Next::GiveUp);
    }

    #[test]
    fn retry_after_is_read_as_seconds_milliseconds_or_a_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let read = |pairs: &[(&'static str, &str)]| {
            let mut headers = HeaderMap::new();
            for (name, value) in pairs {
                headers.insert(*name, HeaderValue::from_str(value).unwrap());
            }
            retry_after(&headers, now)
        };
        assert_eq!(read(&[]), None);
        assert_eq!(read(&[("retry-after", "3")]), Some(Duration::from_secs(3)));
        assert_eq!(
            read(&[("retry-after", " 1.5 ")]),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            read(&[("retry-after-ms", "250"), ("retry-after", "3")]),
            Some(Duration::from_millis(250))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(10));
        assert_eq!(
            read(&[("retry-after", &later)]),
            Some(Duration::from_secs(10))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(10));
        assert_eq!(read(&[("retry-after", &earlier)]), Some(Duration::ZERO));
        assert_eq!(read(&[("retry-after", "soon")]), None);
        assert_eq!(read(&[("retry-after", "-1")]), None);
        assert_eq!(read(&[("retry-after", "NaN")]), None);
        assert_eq!(
            read(&[("retry-after", "1e400")]),
            Some(Duration::MAX),
            "too long to hold is forever"
        );
    }
}
