//! Kinetoscope's worker: everything between trace bytes and stored results.
//!
//! - [`trace`]: import (decompression, streaming JSON parser, columnar store).
//! - [`analysis`]: pure functions from a parsed trace to a [`Summary`].
//!
//! The analysis never does I/O; the job runner reads blobs, calls it, and
//! stores what it returns.

pub mod analysis;
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
