//! The engine's clock: every time the engine stores or compares (leases, deadlines, expiry) comes
//! from one [`Clock`], so tests drive time instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::model::{Millis, now_millis};

/// Where the engine reads the time, in milliseconds since the epoch.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Now.
    fn now(&self) -> Millis;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        now_millis()
    }
}

/// A clock that moves only when told to (tests).
#[derive(Clone, Debug)]
pub struct ManualClock {
    now: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock at `start`.
    pub fn new(start: Millis) -> Self {
        Self {
            now: Arc::new(AtomicI64::new(start)),
        }
    }

    /// A clock at the system's time now.
    pub fn at_system_time() -> Self {
        Self::new(now_millis())
    }

    /// Moves the clock forward by `ms`.
    pub fn advance(&self, ms: Millis) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock.
    pub fn set(&self, now: Millis) {
        self.now.store(now, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        self.now.load(Ordering::SeqCst)
    }
}
