//! Counters, latencies and RSS samples, and the lines printed from them.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::check::{Finding, Kind};

/// Everything counted during the run.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Turns: replies stored, counted when a worker's chat comes to rest.
    pub(crate) turns: AtomicU64,
    /// User messages accepted.
    pub(crate) accepted: AtomicU64,
    /// … of which answered 202 `queue` / 202 `steer`.
    pub(crate) queued: AtomicU64,
    /// … 202 `steer`.
    pub(crate) steered: AtomicU64,
    /// Retried sends answered 409 `duplicate-message` (the first request had stored it).
    pub(crate) retried_dups: AtomicU64,
    /// Sends that needed more than one request.
    pub(crate) retried: AtomicU64,
    /// Settles accepted / refused as stale.
    pub(crate) settles_ok: AtomicU64,
    /// Settles answered 409 `stale`.
    pub(crate) settles_stale: AtomicU64,
    /// Races of two settles at once; races with exactly one winner.
    pub(crate) races: AtomicU64,
    /// Races where exactly one settle was accepted.
    pub(crate) races_one_winner: AtomicU64,
    /// SIGKILLs so far.
    pub(crate) kills: AtomicU64,
    /// Event streams open now.
    pub(crate) sse_open: AtomicI64,
    /// Event stream `data:` lines read.
    pub(crate) sse_events: AtomicU64,
    /// Event streams refused (429).
    pub(crate) sse_refused: AtomicU64,
    /// Event streams cut off (a kill).
    pub(crate) sse_broken: AtomicU64,
    /// Chats checked while the run went on (retired at rest).
    pub(crate) live_checked: AtomicU64,
    /// send→reply latencies: (seconds into the run, milliseconds).
    pub(crate) reply_ms: Mutex<Vec<(f64, f64)>>,
    /// settle latencies: (seconds into the run, milliseconds).
    pub(crate) settle_ms: Mutex<Vec<(f64, f64)>>,
    /// Losses and duplicates found so far.
    pub(crate) findings: Mutex<Vec<Finding>>,
    /// Answers the soak did not expect (an unknown status…), first ones kept.
    pub(crate) anomalies: Mutex<Vec<String>>,
    /// Count of anomalies.
    pub(crate) anomaly_count: AtomicU64,
    /// RSS of each process (kB) sampled at each report.
    pub(crate) rss: Mutex<Vec<(f64, Vec<Option<u64>>)>>,
    /// Why the run could not go on (a process that does not start again).
    pub(crate) fatal: Mutex<Option<String>>,
}

/// Increments a counter.
pub(crate) fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Reads a counter.
pub(crate) fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

impl Stats {
    /// Records something unexpected (printed at the end; not a loss).
    pub(crate) fn anomaly(&self, what: String) {
        inc(&self.anomaly_count);
        let mut a = self.anomalies.lock().expect("lock");
        if a.len() < 50 {
            a.push(what);
        }
    }

    /// Adds findings.
    pub(crate) fn found(&self, findings: Vec<Finding>) {
        self.findings.lock().expect("lock").extend(findings);
    }

    /// Losses and duplicates found so far.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let f = self.findings.lock().expect("lock");
        let loss = f.iter().filter(|f| f.kind == Kind::Loss).count();
        (loss, f.len() - loss)
    }
}

/// p50 and p99 (ms) and the count of the samples taken at or after `since` seconds.
pub(crate) fn percentiles(samples: &Mutex<Vec<(f64, f64)>>, since: f64) -> (f64, f64, usize) {
    let mut v: Vec<f64> = samples
        .lock()
        .expect("lock")
        .iter()
        .filter(|(t, _)| *t >= since)
        .map(|(_, ms)| *ms)
        .collect();
    if v.is_empty() {
        return (f64::NAN, f64::NAN, 0);
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.50), at(0.99), v.len())
}

/// `p50 12ms p99 80ms (n=123)`.
pub(crate) fn latency(samples: &Mutex<Vec<(f64, f64)>>, since: f64) -> String {
    let (p50, p99, n) = percentiles(samples, since);
    if n == 0 {
        "n=0".into()
    } else {
        format!("p50 {p50:.0}ms p99 {p99:.0}ms (n={n})")
    }
}

/// `A 41.2MB B -` for a sample.
pub(crate) fn rss_line(sample: &[Option<u64>]) -> String {
    sample
        .iter()
        .enumerate()
        .map(|(i, kb)| match kb {
            Some(kb) => format!(
                "{} {:.1}MB",
                crate::fleet::slot_name(i),
                *kb as f64 / 1024.0
            ),
            None => format!("{} down", crate::fleet::slot_name(i)),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_window() {
        let s = Mutex::new((1..=100).map(|i| (i as f64, i as f64)).collect());
        let (p50, p99, n) = percentiles(&s, 0.0);
        assert_eq!((p50, p99, n), (51.0, 99.0, 100));
        let (p50, _, n) = percentiles(&s, 91.0);
        assert_eq!((p50, n), (96.0, 10));
        assert_eq!(latency(&s, 1000.0), "n=0");
    }
}
