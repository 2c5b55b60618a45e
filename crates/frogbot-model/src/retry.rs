//! What a failed platform or model call tells its caller about trying again.
//!
//! A channel outbox (or any client) returns its errors boxed; when an error is worth retrying it
//! wraps (or is) a [`Transient`]: the network failed, the platform answered 5xx, or it asked to
//! slow down (429, `retry_after`). The engine finds it anywhere in the error's source chain with
//! [`Transient::find`] and retries with backoff; any other error is permanent.

use std::error::Error as StdError;
use std::time::Duration;

use crate::BoxError;

/// A failure worth retrying: a network error, a 5xx, a rate limit.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Transient {
    message: String,
    retry_after: Option<Duration>,
    maybe_done: bool,
    #[source]
    source: Option<BoxError>,
}

impl Transient {
    /// A retryable failure described by `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retry_after: None,
            maybe_done: false,
            source: None,
        }
    }

    /// A retryable failure caused by `source`.
    pub fn from_source(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self {
            source: Some(source.into()),
            ..Self::new(message)
        }
    }

    /// The platform asked to wait `wait` before the next call (a 429's `Retry-After`,
    /// Telegram's `retry_after`, Matrix's `retry_after_ms`).
    #[must_use]
    pub fn retry_after(mut self, wait: Duration) -> Self {
        self.retry_after = Some(wait);
        self
    }

    /// The request may have been carried out although no answer came back (a timeout or a
    /// reset after the request was sent): a retry may repeat it unless the platform offers an
    /// idempotency key or a way to look.
    #[must_use]
    pub fn maybe_done(mut self) -> Self {
        self.maybe_done = true;
        self
    }

    /// How long the platform asked to wait, if it said.
    pub fn wait(&self) -> Option<Duration> {
        self.retry_after
    }

    /// Whether the failed request may have been carried out.
    pub fn may_be_done(&self) -> bool {
        self.maybe_done
    }

    /// The [`Transient`] in `error`'s source chain (`error` itself first), if any.
    pub fn find<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a Transient> {
        let mut next: Option<&'a (dyn StdError + 'static)> = Some(error);
        while let Some(e) = next {
            if let Some(t) = e.downcast_ref::<Transient>() {
                return Some(t);
            }
            next = e.source();
        }
        None
    }

    /// Whether `error` is worth retrying (a [`Transient`] is in its source chain).
    pub fn is_transient(error: &(dyn StdError + 'static)) -> bool {
        Self::find(error).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] BoxError);

    #[test]
    fn found_through_the_source_chain() {
        let inner = Transient::new("503")
            .retry_after(Duration::from_secs(3))
            .maybe_done();
        let err: BoxError = Box::new(Outer(Box::new(inner)));
        let found = Transient::find(err.as_ref()).expect("transient in the chain");
        assert_eq!(found.wait(), Some(Duration::from_secs(3)));
        assert!(found.may_be_done());
        let permanent: BoxError = "invalid_blocks".into();
        assert!(!Transient::is_transient(permanent.as_ref()));
    }
}
