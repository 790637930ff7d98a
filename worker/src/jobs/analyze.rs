//! The analysis job: read one rank's stored trace, analyze it, store the
//! summary, and complete the run when it was the last rank.

use super::{JobError, Runner};
use crate::db::Job;
use kinetoscope_trace::analysis::{analyze, ANALYZER_VERSION};
use kinetoscope_trace::import::{read_trace, ReadOptions, TraceError};
use kinetoscope_types::AnalysisOptions;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Runs one analysis job.
pub(super) async fn run(runner: &Runner, job: &Job) -> Result<(), JobError> {
    let transient = |e: &dyn std::fmt::Display| JobError::Transient(e.to_string());
    let Some((trace, options)) = runner.db.job_trace(job).await.map_err(|e| transient(&e))? else {
        return Err(JobError::BadInput(
            "the run or its trace no longer exists".into(),
        ));
    };
    runner
        .db
        .start_analysis(job)
        .await
        .map_err(|e| transient(&e))?;
    let reader = runner
        .blobs
        .reader(&trace.blob_key)
        .await
        .map_err(|e| JobError::Transient(format!("reading the stored trace failed: {e}")))?;

    // Heartbeat: renew the lease and publish progress while parsing.
    let progress = Arc::new(AtomicU64::new(0));
    let beat = {
        let db = runner.db.clone();
        let job = job.clone();
        let progress = progress.clone();
        let lease = runner.lease_ms();
        // Progress is shown live, so beat often; the lease allows for
        // several missed beats.
        let every = Duration::from_millis((lease / 5).clamp(200, 1000) as u64);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let p = progress.load(Ordering::Relaxed) as i64;
                match db.heartbeat(&job, lease, Some(p)).await {
                    Ok(true) => {}
                    Ok(false) => return, // the claim is gone; completion will be refused
                    Err(e) => tracing::warn!(error = %e, "heartbeat failed"),
                }
            }
        })
    };
    let opts = AnalysisOptions::from_stored(&options);
    let read = ReadOptions {
        limits: runner.config.limits.clone(),
        progress: Some(progress.clone()),
    };
    let delay = runner.config.analysis_delay;
    let outcome = tokio::task::spawn_blocking(move || {
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        read_trace(reader, &read).map(|t| {
            let s = analyze(&t, &opts);
            serde_json::to_string(&s).map(|json| (s, json))
        })
    })
    .await;
    beat.abort();
    let (summary, json) = match outcome {
        Ok(Ok(Ok(pair))) => pair,
        Ok(Ok(Err(e))) => {
            return Err(JobError::Transient(format!(
                "encoding the summary failed: {e}"
            )))
        }
        Ok(Err(e)) => {
            return Err(match e {
                TraceError::Io(io) => {
                    JobError::Transient(format!("reading the stored trace failed: {io}"))
                }
                bad => JobError::BadInput(bad.to_string()),
            })
        }
        Err(join) => {
            // A panic in the analyzer is a bug, and deterministic: do not retry.
            let msg = join
                .try_into_panic()
                .ok()
                .and_then(|p| {
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                })
                .unwrap_or_else(|| "cancelled".into());
            tracing::error!(job = job.id, %msg, "analyzer panicked");
            return Err(JobError::BadInput(format!(
                "the analyzer failed on this trace (internal error: {msg})"
            )));
        }
    };
    let stored = runner
        .db
        .finish_analysis(job, &json, ANALYZER_VERSION)
        .await
        .map_err(|e| transient(&e))?;
    if !stored {
        tracing::warn!(
            job = job.id,
            "job was reclaimed by another worker; result dropped"
        );
        return Ok(());
    }
    crate::metrics::trace_analyzed(trace.bytes as u64, summary.trace.json_bytes);
    runner
        .finish_run_if_complete(&job.run_id)
        .await
        .map_err(|e| transient(&e))
}
