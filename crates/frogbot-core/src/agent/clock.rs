//! The engine's clock: every time the engine stores or compares (leases, deadlines, expiry) comes
//! from one [`Clock`], so tests drive time instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::model::{Millis, now_millis};
use crate::store::{DynStore, Result as StoreResult, Store};

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

/// This host's clock corrected to the database server's ([`OperationsStore::database_time`](crate::store::OperationsStore::database_time)): what
/// every replica sharing a PostgreSQL database reads, so that a lease one replica writes is read
/// against the same time by the others however far apart their hosts' clocks are.
///
/// [`DatabaseClock::sync`] measures the offset (the smallest round trip of a few reads, its
/// midpoint taken as the instant of the database's reading) and
/// [`DatabaseClock::keep_in_sync`] measures it again every so often; between measurements it is
/// the base clock plus the last offset.
#[derive(Clone, Debug)]
pub struct DatabaseClock {
    base: Arc<dyn Clock>,
    offset: Arc<AtomicI64>,
}

/// How many reads [`DatabaseClock::sync`] takes (the one with the smallest round trip wins).
const SYNC_READS: usize = 3;

impl DatabaseClock {
    /// `base` corrected to `store`'s database clock; `None` when the store has none (SQLite:
    /// only this host's processes share it, and they share its clock).
    pub async fn sync(store: &DynStore, base: Arc<dyn Clock>) -> StoreResult<Option<Self>> {
        let Some(offset) = measure(store.as_ref(), base.as_ref()).await? else {
            return Ok(None);
        };
        if offset.abs() > 1_000 {
            tracing::warn!(
                offset_ms = offset,
                "this host's clock is {:.1} s off the database server's; leases are read on the \
                 database's time",
                offset as f64 / 1000.0
            );
        }
        Ok(Some(Self {
            base,
            offset: Arc::new(AtomicI64::new(offset)),
        }))
    }

    /// The last offset measured: the database's time minus the base clock's, in milliseconds.
    pub fn offset(&self) -> Millis {
        self.offset.load(Ordering::Relaxed)
    }

    /// Measures the offset again every `every` in a task of its own, which ends once this clock
    /// (every clone) or the store is dropped. A failed measurement keeps the last offset.
    pub fn keep_in_sync(&self, store: &DynStore, every: std::time::Duration) {
        let offset = Arc::downgrade(&self.offset);
        let store = Arc::downgrade(store);
        let base = self.base.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let (Some(cell), Some(store)) = (offset.upgrade(), store.upgrade()) else {
                    return;
                };
                match measure(store.as_ref(), base.as_ref()).await {
                    Ok(Some(now)) => cell.store(now, Ordering::Relaxed),
                    Ok(None) => return,
                    Err(e) => tracing::warn!(error = %e, "could not read the database's clock"),
                }
            }
        });
    }
}

impl Clock for DatabaseClock {
    fn now(&self) -> Millis {
        self.base.now().saturating_add(self.offset())
    }
}

/// The database's time minus `base`'s, from the read with the smallest round trip.
async fn measure(store: &dyn Store, base: &dyn Clock) -> StoreResult<Option<Millis>> {
    let mut best: Option<(Millis, Millis)> = None; // (round trip, offset)
    for _ in 0..SYNC_READS {
        let sent = base.now();
        let Some(db) = store.database_time().await? else {
            return Ok(None);
        };
        let back = base.now();
        let trip = back - sent;
        let offset = db - (sent + (trip / 2));
        if best.is_none_or(|(t, _)| trip < t) {
            best = Some((trip, offset));
        }
    }
    Ok(best.map(|(_, offset)| offset))
}
