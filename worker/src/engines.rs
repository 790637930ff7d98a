//! The inference engines the operator configured (`KINETOSCOPE_ENGINES`):
//! what captures may target, and whether each one answers. Captures name an
//! engine, never a URL.

use kinetoscope_types::EngineFlavour;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// An inference engine the operator configured.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Engine {
    /// The name captures use.
    pub name: String,
    /// Base URL of the engine's HTTP server.
    pub url: String,
    /// Which engine it is (its profiling API differs).
    pub flavour: EngineFlavour,
    /// Folder both the engine and the worker see.
    pub trace_dir: String,
    /// Expected number of rank files.
    pub ranks: u32,
    /// vLLM only: how long one step takes, to profile about `num_steps`.
    #[serde(default)]
    pub seconds_per_step: Option<f64>,
}

/// The HTTP client for engines: it never follows a redirect, so a
/// configured engine (or whoever took its address) cannot send the worker,
/// and the `output_dir` it posts, to another host.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
}

/// Whether an engine answers (any HTTP status but a redirect counts: the
/// client follows none, so an engine that only redirects cannot be
/// captured), with a note if not.
pub async fn probe(http: &reqwest::Client, engine: &Engine) -> (bool, Option<String>) {
    let url = format!("{}/health", engine.url.trim_end_matches('/'));
    match http.get(&url).timeout(Duration::from_secs(2)).send().await {
        Ok(r) if r.status().is_redirection() => (
            false,
            Some(format!(
                "the engine answers {} (a redirect): captures follow none; configure its final address",
                r.status()
            )),
        ),
        Ok(_) => (true, None),
        Err(e) => (false, Some(format!("no answer from the engine: {e}"))),
    }
}
