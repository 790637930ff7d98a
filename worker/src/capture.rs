//! Capture jobs: ask a running inference engine to profile, collect every
//! rank's trace, and turn them into one multi-rank run.

use crate::jobs::{JobError, Runner};
use crate::db::Job;
use serde::{Deserialize, Serialize};

/// An inference engine the operator configured (`KINETOSCOPE_ENGINES`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Engine {
    pub name: String,
    pub url: String,
    /// `sglang` or `vllm`.
    pub flavour: String,
    /// Folder both the engine and the worker see.
    pub trace_dir: String,
    /// Expected number of rank files.
    pub ranks: u32,
}

/// Runs a capture job.
pub(crate) async fn run_capture(_runner: &Runner, _job: &Job) -> Result<(), JobError> {
    Err(JobError::BadInput("capture is not available yet".into()))
}

/// Whether an engine answers (any HTTP status counts), with a note if not.
pub async fn probe(http: &reqwest::Client, engine: &Engine) -> (bool, Option<String>) {
    let url = format!("{}/health", engine.url.trim_end_matches('/'));
    match http.get(&url).timeout(std::time::Duration::from_secs(2)).send().await {
        Ok(_) => (true, None),
        Err(e) => (false, Some(format!("no answer from the engine: {e}"))),
    }
}
