//! Injected platform faults for the fakes (feature `testing`): each call a fake serves asks a
//! [`FaultPlan`] whether to fail, and how. Seeded, so a failing run can be replayed.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// One injected failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The platform answers 500 without doing anything.
    ServerError,
    /// The platform answers 429 asking to wait this long.
    RateLimited(Duration),
    /// The platform never answers (the fake holds the request until the client gives up).
    Timeout,
    /// The platform carries the request out, then the connection is reset before the answer.
    ResetAfterProcessing,
}

/// Which calls fail: a seeded fraction, spread over the four [`Fault`]s.
#[derive(Debug)]
pub struct FaultPlan {
    rng: Mutex<fastrand::Rng>,
    fraction: f64,
    rate_limit_wait: Duration,
    kinds: Vec<Fault>,
    counts: [AtomicU64; 4],
}

impl FaultPlan {
    /// No faults.
    pub fn none() -> Self {
        Self::new(0, 0.0)
    }

    /// `fraction` (0.0–1.0) of calls fail, each with one of the four faults, drawn from `seed`.
    pub fn new(seed: u64, fraction: f64) -> Self {
        let wait = Duration::from_millis(50);
        Self {
            rng: Mutex::new(fastrand::Rng::with_seed(seed)),
            fraction: fraction.clamp(0.0, 1.0),
            rate_limit_wait: wait,
            kinds: vec![
                Fault::ServerError,
                Fault::RateLimited(wait),
                Fault::Timeout,
                Fault::ResetAfterProcessing,
            ],
            counts: Default::default(),
        }
    }

    /// Only these faults are drawn.
    #[must_use]
    pub fn only(mut self, kinds: &[Fault]) -> Self {
        assert!(
            !kinds.is_empty(),
            "FaultPlan::only needs at least one fault"
        );
        self.kinds = kinds.to_vec();
        self
    }

    /// A 429 asks to wait `wait` (50 ms by default).
    #[must_use]
    pub fn rate_limit_wait(mut self, wait: Duration) -> Self {
        self.rate_limit_wait = wait;
        for kind in &mut self.kinds {
            if let Fault::RateLimited(w) = kind {
                *w = wait;
            }
        }
        self
    }

    /// Whether this call fails, and how.
    pub fn next(&self) -> Option<Fault> {
        if self.fraction <= 0.0 {
            return None;
        }
        let fault = {
            let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
            if rng.f64() >= self.fraction {
                return None;
            }
            self.kinds[rng.usize(..self.kinds.len())]
        };
        self.counts[Self::index(fault)].fetch_add(1, Ordering::Relaxed);
        Some(fault)
    }

    fn index(fault: Fault) -> usize {
        match fault {
            Fault::ServerError => 0,
            Fault::RateLimited(_) => 1,
            Fault::Timeout => 2,
            Fault::ResetAfterProcessing => 3,
        }
    }

    /// How many faults of each kind were injected: (500s, 429s, timeouts, resets).
    pub fn counts(&self) -> (u64, u64, u64, u64) {
        let c = |i: usize| self.counts[i].load(Ordering::Relaxed);
        (c(0), c(1), c(2), c(3))
    }

    /// How many faults were injected in all.
    pub fn injected(&self) -> u64 {
        let (a, b, c, d) = self.counts();
        a + b + c + d
    }
}

impl Default for FaultPlan {
    fn default() -> Self {
        Self::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seeded_fraction_fails() {
        let plan = FaultPlan::new(7, 0.2);
        let failed = (0..10_000).filter(|_| plan.next().is_some()).count();
        assert!((1_700..2_300).contains(&failed), "{failed}");
        assert_eq!(plan.injected(), failed as u64);
        let again = FaultPlan::new(7, 0.2);
        let replay = (0..10_000).filter(|_| again.next().is_some()).count();
        assert_eq!(replay, failed);
        assert_eq!(FaultPlan::none().next(), None);
    }
}
