//! Where one analysis spends its wall time, for the benchmarks
//! (BENCHMARKS.md, "where each byte goes"): with `KINETOSCOPE_PHASES` set,
//! each [`mark`] prints to stderr the milliseconds since the one before,
//! and since the first. Off (one relaxed load a mark, a dozen marks an
//! analysis) otherwise; nothing the analysis returns depends on it.

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

fn on() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("KINETOSCOPE_PHASES").is_some())
}

/// The first mark's time and the last one's.
static MARKS: Mutex<Option<(Instant, Instant)>> = Mutex::new(None);

/// Ends a phase named `what` (the first mark starts the clock).
pub fn mark(what: &str) {
    if !on() {
        return;
    }
    let now = Instant::now();
    let mut marks = MARKS.lock().unwrap_or_else(|e| e.into_inner());
    let (first, last) = marks.get_or_insert((now, now));
    eprintln!(
        "phase {what:<34} {:>8.1} ms {:>8.1} ms in all",
        (now - *last).as_secs_f64() * 1e3,
        (now - *first).as_secs_f64() * 1e3
    );
    *last = now;
}
