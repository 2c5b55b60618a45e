//! Time and peak memory of one bench case (the adapters' files benches): the process's peak
//! resident set (`VmHWM`) grown over the resident set when the case began, after
//! `/proc/self/clear_refs` reset the peak.

use std::time::Instant;

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
