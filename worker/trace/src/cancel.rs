//! Cancelling an analysis from outside: a deleted run, a passed deadline.
//!
//! The caller hands [`run`] a shared flag. Every pass reads it at its
//! checkpoints ([`point`]: once every [`EVERY`] rows of a loop, and at each
//! pass's start), and once it is set the analysis unwinds from wherever it
//! is to [`run`], which answers [`Cancelled`]. The flag travels with the
//! thread (a thread-local), and the analysis' own scoped threads take it
//! from the thread that spawns them ([`spawn`]), so no pass's signature
//! carries it and the pure passes stay pure: without a flag every
//! checkpoint is a no-op.
//!
//! The unwinding is `resume_unwind` with a [`Cancelled`] payload, which
//! runs no panic hook (nothing is printed) and which [`run`] tells apart
//! from a real panic (that one goes on unwinding).

use std::cell::RefCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{Scope, ScopedJoinHandle};

/// How many rows a loop handles between two reads of the flag: a power of
/// two, so the test is a mask. At the analysis' slowest (the op tree of
/// the debug build, about 0.5 µs a row) 65,536 rows are 33 ms, so a set
/// flag is seen well within the second RELIABILITY.md promises; the read
/// is a thread-local and a relaxed load, too rare to show in the timings
/// (BENCHMARKS.md, "Cancellation").
pub const EVERY: usize = 1 << 16;

thread_local! {
    static FLAG: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// The analysis was cancelled: its flag was set while it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the analysis was cancelled")
    }
}

impl std::error::Error for Cancelled {}

/// Runs `f` with `flag` as this thread's cancellation flag: `Err` when the
/// flag was set and a checkpoint saw it. A panic that is not a
/// cancellation goes on unwinding.
pub fn run<T>(flag: &Arc<AtomicBool>, f: impl FnOnce() -> T) -> Result<T, Cancelled> {
    let before = FLAG.with(|c| c.replace(Some(flag.clone())));
    let out = catch_unwind(AssertUnwindSafe(f));
    FLAG.with(|c| *c.borrow_mut() = before);
    match out {
        Ok(v) => Ok(v),
        Err(payload) if payload.is::<Cancelled>() => Err(Cancelled),
        Err(payload) => resume_unwind(payload),
    }
}

/// A checkpoint: unwinds to [`run`] when this thread's flag is set.
pub fn check() {
    let set = FLAG.with(|c| {
        c.borrow()
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
    });
    if set {
        resume_unwind(Box::new(Cancelled));
    }
}

/// A loop's checkpoint: [`check`] once every [`EVERY`] values of `i`.
#[inline]
pub fn point(i: usize) {
    if i & (EVERY - 1) == 0 {
        check();
    }
}

/// `scope.spawn(f)`, with the spawning thread's flag on the new thread.
pub fn spawn<'scope, 'env, T: Send + 'scope>(
    scope: &'scope Scope<'scope, 'env>,
    f: impl FnOnce() -> T + Send + 'scope,
) -> ScopedJoinHandle<'scope, T> {
    let flag = FLAG.with(|c| c.borrow().clone());
    scope.spawn(move || {
        FLAG.with(|c| *c.borrow_mut() = flag);
        f()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_flag_unwinds_to_run_and_other_panics_go_on() {
        let flag = Arc::new(AtomicBool::new(false));
        assert_eq!(run(&flag, || 7), Ok(7));
        flag.store(true, Ordering::Relaxed);
        assert_eq!(
            run(&flag, || {
                for i in 0..10 {
                    point(i);
                }
                7
            }),
            Err(Cancelled)
        );
        // A scoped thread takes the flag along.
        let r = run(&flag, || {
            std::thread::scope(|s| {
                let h = spawn(s, check);
                h.join().unwrap_or_else(|p| resume_unwind(p))
            })
        });
        assert_eq!(r, Err(Cancelled));
        // Outside `run` nothing is checked.
        check();
        let other = catch_unwind(|| run(&flag, || panic!("a bug")));
        assert!(other.is_err());
    }
}
