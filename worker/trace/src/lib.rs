//! Kinetoscope's pure core: everything between trace bytes and results,
//! with no I/O of its own (it reads what it is handed), no clock, no async
//! runtime, no database or network client.
//!
//! - [`import`]: decompression, the streaming JSON parser, the columnar
//!   store ([`Trace`]).
//! - [`analysis`]: pure functions from a parsed trace to a [`Summary`].
//! - [`diff`]: the before/after comparison of two summaries.
//! - [`ranks`]: rank order of files and the cross-rank summary.
//! - [`timeline`]: the timeline index (an analysis artifact) and its
//!   window, event and search queries.
//!
//! The generator of test traces (`kinetoscope-generate`) is a crate of its
//! own, only a dev-dependency here: the oracle the tests check this crate
//! against cannot share its code.
//!
//! The service (`worker`: jobs, database, blobs, capture) calls into this
//! crate; this crate knows nothing of it. The compiler keeps it so: its
//! dependency tree has no sqlx, tokio, object_store, reqwest or axum.

pub mod analysis;
pub mod budget;
pub mod cancel;
pub mod devices;
pub mod diff;
pub mod gate;
pub mod host;
pub mod import;
pub mod phases;
pub mod ranks;
pub mod timeline;

pub use analysis::{
    analyze, analyze_all, analyze_owned, analyze_stored, Analysis, AnalysisOptions, StoredAnalysis,
    StoredArtifact, ANALYZER_VERSION,
};
pub use import::{read_trace, read_trace_file, sniff, Encoding, ReadOptions, Trace, TraceError};
pub use kinetoscope_types::Summary;

/// Reads and analyzes a trace file from disk.
pub fn analyze_file(
    path: &std::path::Path,
    read: &ReadOptions,
    opts: &AnalysisOptions,
) -> Result<Summary, TraceError> {
    let t = read_trace_file(path, read)?;
    Ok(analyze_owned(t, opts))
}
