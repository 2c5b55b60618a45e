//! Time and peak memory of one bench case (the adapters' files benches): the process's peak
//! resident set (`VmHWM`) grown over the resident set when the case began, after
//! `/proc/self/clear_refs` reset the peak.

use std::sync::Mutex;
use std::time::Instant;

/// Every case's peak so far: (case, size, MiB).
static SEEN: Mutex<Vec<(String, usize, f64)>> = Mutex::new(Vec::new());

fn rss_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with(field));
    line.and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// A case under way: when it began and the resident set then.
#[derive(Debug)]
pub struct Case(u64, Instant);

/// Resets the peak resident set to the current one and starts timing a case.
pub fn reset_peak() -> Case {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    Case(rss_kb("VmRSS:"), Instant::now())
}

/// Prints `platform case size time peak` for a case of `size` bytes.
pub fn line(platform: &str, case: &str, size: usize, Case(before, t): Case) {
    const MB: usize = 1024 * 1024;
    let peak = rss_kb("VmHWM:").saturating_sub(before) as f64 / 1024.0;
    let (mb, ms) = (size / MB, t.elapsed().as_secs_f64() * 1e3);
    println!("{platform:<8} {case:<9} {mb:>3} MB {ms:>9.1} ms   peak +{peak:.1} MiB");
    SEEN.lock()
        .expect("peaks")
        .push((case.to_owned(), size, peak));
}

/// How much more a file's bytes may make the adapter hold at the largest size than at the
/// smallest: a fixed buffer's worth, not the file (issue 40: streamed both ways).
pub const STREAMED_GROWTH_MIB: f64 = 2.0;

/// Prints, from the cases [`line()`] printed, what `case` held beyond `baseline` (the fake's own
/// cost of the same transfer; `None`: nothing to take off) at the smallest and the largest size,
/// and whether the file was streamed: that share grew by at most [`STREAMED_GROWTH_MIB`].
/// Returns whether it was.
pub fn streamed(platform: &str, case: &str, baseline: Option<&str>) -> bool {
    let seen = SEEN.lock().expect("peaks");
    let peak = |c: &str, size: usize| {
        seen.iter()
            .find(|(k, s, _)| k == c && *s == size)
            .map(|(_, _, p)| *p)
    };
    let sizes: Vec<usize> = seen
        .iter()
        .filter(|(k, _, _)| k == case)
        .map(|(_, s, _)| *s)
        .collect();
    let (Some(&small), Some(&large)) = (sizes.iter().min(), sizes.iter().max()) else {
        println!("{platform:<8} {case:<9} no cases to judge");
        return false;
    };
    let share = |size: usize| {
        let own = peak(case, size).unwrap_or(0.0);
        own - baseline.and_then(|b| peak(b, size)).unwrap_or(0.0)
    };
    let (at_small, at_large) = (share(small), share(large));
    let ok = at_large - at_small <= STREAMED_GROWTH_MIB;
    const MB: usize = 1024 * 1024;
    println!(
        "{platform:<8} {case:<9} beyond {}: {at_small:+.1} MiB at {} MB, {at_large:+.1} MiB at {} \
         MB; target (streamed: grows <= {STREAMED_GROWTH_MIB} MiB): {}",
        baseline.unwrap_or("nothing"),
        small / MB,
        large / MB,
        if ok { "met" } else { "MISSED" }
    );
    ok
}

/// glibc raises its mmap threshold as large buffers are freed: later ones come from the heap,
/// whose freed pages stay resident, and later cases look cheaper. Runs the bench again with it
/// fixed (call first in `main`).
pub fn fixed_mmap_threshold() {
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        let me = std::process::Command::new(std::env::current_exe().unwrap())
            .env("MALLOC_MMAP_THRESHOLD_", "65536")
            .status();
        std::process::exit(me.map_or(1, |s| s.code().unwrap_or(1)));
    }
}
