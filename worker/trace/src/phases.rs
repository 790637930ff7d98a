//! Where one analysis spends its wall time, for the benchmarks
//! (BENCHMARKS.md, "where each byte goes"): with `KINETOSCOPE_PHASES` set,
//! each [`mark`] prints to stderr the milliseconds since the one before,
//! and since the first, and the process's CPU milliseconds since the one
//! before (every thread's: CPU over wall says how many cores the phase
//! kept busy, at most 2 here), and the peak resident memory so far (the
//! phase that raises it holds the job's peak) and now. Off (one relaxed load a mark, a dozen marks an
//! analysis) otherwise; nothing the analysis returns depends on it.

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

fn on() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("KINETOSCOPE_PHASES").is_some())
}

/// The first mark's time, the last one's, and the CPU time at the last.
static MARKS: Mutex<Option<(Instant, Instant, f64)>> = Mutex::new(None);

/// The CPU time of every thread of the process so far, ms.
fn cpu_ms() -> f64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

/// The process's peak resident memory so far (`VmHWM`) and now (`VmRSS`),
/// MB, from one read of its status; 0 where it cannot be read.
fn rss_mb() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let mb = |field: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (mb("VmHWM:"), mb("VmRSS:"))
}

/// Ends a phase named `what` (the first mark starts the clock).
pub fn mark(what: &str) {
    if !on() {
        return;
    }
    let (now, cpu) = (Instant::now(), cpu_ms());
    let mut marks = MARKS.lock().unwrap_or_else(|e| e.into_inner());
    let (first, last, last_cpu) = marks.get_or_insert((now, now, cpu));
    let (peak_mb, now_mb) = rss_mb();
    eprintln!(
        "phase {what:<34} {:>8.1} ms {:>8.1} ms in all {:>8.1} ms CPU {:>7.1} MB peak RSS so far {:>7.1} MB now",
        (now - *last).as_secs_f64() * 1e3,
        (now - *first).as_secs_f64() * 1e3,
        cpu - *last_cpu,
        peak_mb,
        now_mb
    );
    (*last, *last_cpu) = (now, cpu);
}
