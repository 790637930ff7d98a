//! Kinetoscope's worker: everything between trace bytes and stored results.
//!
//! - [`trace`]: import (decompression, streaming JSON parser, columnar store).
//! - [`analysis`]: pure functions from a parsed trace to a [`Summary`].
//! - [`ranks`]: the cross-rank summary of a multi-rank run (pure).
//! - [`db`]: runs, summaries, the job queue and tokens (SQLite or PostgreSQL).
//! - [`blobs`]: trace files in a local folder or S3-compatible storage.
//! - [`jobs`]: the runner that claims jobs and runs analyses and captures.
//! - [`capture`]: profiling a running inference engine.
//! - [`metrics`]: Prometheus counters of this process.
//!
//! The analysis never does I/O; the job runner reads blobs, calls it, and
//! stores what it returns.

pub mod analysis;
pub mod blobs;
pub mod capture;
pub mod db;
pub mod diff;
pub mod generate;
pub mod jobs;
pub mod metrics;
pub mod ranks;
pub mod trace;

pub use analysis::{analyze, AnalysisOptions, ANALYZER_VERSION};
pub use kinetoscope_types::Summary;

/// Reads and analyzes a trace file from disk.
pub fn analyze_file(
    path: &std::path::Path,
    read: &trace::ReadOptions,
    opts: &AnalysisOptions,
) -> Result<Summary, trace::TraceError> {
    let t = trace::read_trace_file(path, read)?;
    Ok(analyze(&t, opts))
}
