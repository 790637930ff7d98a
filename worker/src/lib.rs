//! Kinetoscope's worker: the service around the pure core
//! ([`kinetoscope_trace`]): storage, the job queue and the jobs.
//!
//! - [`db`]: runs, summaries, the job queue and tokens (SQLite or PostgreSQL).
//! - [`blobs`]: trace files in a local folder or S3-compatible storage.
//! - [`artifacts`]: the outputs of analyses (summary, timeline index),
//!   read through one interface.
//! - [`jobs`]: the runner that claims jobs, with its job kinds beneath it
//!   (analysis, capture from an engine).
//! - [`engines`]: the inference engines captures may target.
//! - [`metrics`]: Prometheus counters of this process.
//!
//! The analysis never does I/O; the job runner reads blobs, calls
//! [`kinetoscope_trace`], and stores what it returns.

pub mod artifacts;
pub mod blobs;
pub mod db;
pub mod engines;
pub mod jobs;
pub mod metrics;
