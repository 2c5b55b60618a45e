//! What every adapter's receive path and platform client share beyond [`crate::engine`]:
//! platform-neutral rules about calls and deliveries, never a platform type.
//!
//! - [`Recent`]: a bounded memory of recent deliveries (a repeat recognised, what an edit needs
//!   of the message it changes).
//! - [`Pending`]: a bound on the deliveries waiting or running at once (load shedding).

use std::sync::{Arc, Mutex, MutexGuard};

use hashlink::LinkedHashMap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A bounded memory of recently seen keys, each with a value, the oldest forgotten first: a
/// platform's repeated deliveries recognised (Slack's event ids), or what an edit needs of the
/// message it changes (Matrix's thread and author).
#[derive(Debug)]
pub struct Recent<V = ()> {
    cap: usize,
    entries: Mutex<LinkedHashMap<String, V>>,
}

impl<V> Recent<V> {
    /// Remembers up to `cap` (at least 1) keys.
    pub fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(1),
            entries: Mutex::default(),
        }
    }

    fn entries(&self) -> MutexGuard<'_, LinkedHashMap<String, V>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers `value` under `key` (a known key keeps its place); `true` when the key is new.
    pub fn note(&self, key: &str, value: V) -> bool {
        let mut entries = self.entries();
        let new = entries.replace(key.to_owned(), value).is_none();
        while entries.len() > self.cap {
            entries.pop_front();
        }
        new
    }

    /// What `key` was remembered with.
    pub fn get(&self, key: &str) -> Option<V>
    where
        V: Clone,
    {
        self.entries().get(key).cloned()
    }

    /// Forgets `key` (its delivery failed: a retry should be processed).
    pub fn forget(&self, key: &str) {
        self.entries().remove(key);
    }
}

impl Recent {
    /// `true` the first time `key` is seen (it is remembered), `false` for a repeat.
    pub fn first(&self, key: &str) -> bool {
        self.note(key, ())
    }
}

/// How many deliveries wait in the thread queues or run now, bounded: a delivery takes a place
/// (a permit) before it is queued and gives it back when it is done (or its task failed).
#[derive(Debug)]
pub struct Pending {
    max: usize,
    places: Arc<Semaphore>,
}

impl Pending {
    /// At most `max` (at least 1) at once.
    pub fn new(max: usize) -> Self {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            max,
            places: Arc::new(Semaphore::new(max)),
        }
    }

    /// How many there are now.
    pub fn len(&self) -> usize {
        self.max - self.places.available_permits()
    }

    /// Whether none waits or runs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound.
    pub fn max(&self) -> usize {
        self.max
    }

    /// A place for one more (given back when dropped), or `None` when all are taken.
    pub fn take(&self) -> Option<OwnedSemaphorePermit> {
        self.places.clone().try_acquire_owned().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_keys_are_bounded_oldest_first_and_a_forgotten_one_is_new_again() {
        let seen = Recent::new(2);
        assert!(seen.first("a") && seen.first("b"));
        assert!(!seen.first("a"), "a duplicate");
        assert!(seen.first("c"), "a third key pushes out the oldest");
        assert!(seen.first("a"), "a was forgotten");
        seen.forget("c");
        assert!(seen.first("c"), "a failed delivery is processed again");
        let recent = Recent::new(1);
        assert!(recent.note("m", ("thread", "author")));
        assert_eq!(recent.get("m"), Some(("thread", "author")));
    }

    #[test]
    fn pending_places_are_bounded_and_given_back_when_dropped() {
        let pending = Pending::new(2);
        let one = pending.take().unwrap();
        let two = pending.take().unwrap();
        assert!(pending.take().is_none(), "past the bound");
        assert_eq!((pending.len(), pending.max()), (2, 2));
        drop(one);
        assert_eq!(pending.len(), 1);
        let three = pending.take();
        assert!(three.is_some());
        drop((two, three));
        assert!(pending.is_empty());
        assert_eq!(Pending::new(0).max(), 1, "at least one");
    }
}
