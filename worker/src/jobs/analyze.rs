//! The analysis job: read one rank's stored trace, analyze it, store the
//! summary, and complete the run when it was the last rank.

use super::{JobError, Runner};
use crate::artifacts::artifact_key;
use crate::db::Job;
use crate::db::NewArtifact;
use kinetoscope_trace::analysis::{analyze_stored, ANALYZER_VERSION};
use kinetoscope_trace::import::{read_trace, ReadOptions, TraceError};
use kinetoscope_types::AnalysisOptions;
use kinetoscope_types::ArtifactName;
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

    // Heartbeat: renew the lease and publish progress while parsing. When
    // the claim is gone (the run was deleted, which deletes its jobs, or
    // another worker took the job over) the analysis is cancelled: its
    // reads fail from then on, so a parse stops at once.
    let progress = Arc::new(AtomicU64::new(0));
    let cancel = Arc::new(AtomicBool::new(false));
    let beat = {
        let db = runner.db.clone();
        let job = job.clone();
        let progress = progress.clone();
        let cancel = cancel.clone();
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
                    Ok(false) => {
                        // The claim is gone; completion would be refused.
                        cancel.store(true, Ordering::Relaxed);
                        return;
                    }
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
    let reader = Cancellable {
        inner: reader,
        cancel: cancel.clone(),
    };
    let analysis = tokio::task::spawn_blocking(move || {
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        read_trace(reader, &read).map(|t| -> Result<_, String> {
            let a = analyze_stored(t, &opts).map_err(|e| e.to_string())?;
            let json = serde_json::to_string(&a.summary).map_err(|e| e.to_string())?;
            Ok((a.summary, json, a.timeline))
        })
    });
    let deadline = runner.config.analysis_deadline;
    let outcome = match tokio::time::timeout(deadline, analysis).await {
        Ok(outcome) => outcome,
        Err(_) => {
            // The parse stops at its next read; analysis past the parse is
            // O(n log n) in the events read, so the thread ends soon after.
            cancel.store(true, Ordering::Relaxed);
            beat.abort();
            return Err(JobError::BadInput(format!(
                "the analysis took longer than its deadline ({} s); the trace is too large or \
                 unusual for this server (KINETOSCOPE_ANALYSIS_DEADLINE_SECS sets the deadline)",
                deadline.as_secs()
            )));
        }
    };
    beat.abort();
    if cancel.load(Ordering::Relaxed) {
        return Err(JobError::Transient(
            "the analysis was cancelled: its run was deleted or its job taken over".into(),
        ));
    }
    let (summary, json, timeline) = match outcome {
        Ok(Ok(Ok(pair))) => pair,
        Ok(Ok(Err(e))) => {
            return Err(JobError::Transient(format!(
                "encoding the analysis failed: {e}"
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
    // The artifacts go to the blob store first; the transaction that stores
    // the summary records them, so a run never points at a missing blob.
    let key = artifact_key(
        &job.run_id,
        job.rank,
        ArtifactName::Timeline,
        ANALYZER_VERSION,
        job.id,
        job.attempts,
    );
    let artifact = NewArtifact {
        name: ArtifactName::Timeline,
        blob_key: key.clone(),
        bytes: timeline.len() as i64,
    };
    let mut w = runner.blobs.writer(&key);
    let written = match w.write(&timeline).await {
        Ok(()) => w.finish().await.map(|_| ()),
        Err(e) => {
            w.abort().await;
            Err(e)
        }
    };
    written.map_err(|e| JobError::Transient(format!("storing the timeline index failed: {e}")))?;
    let stored = match runner
        .db
        .finish_analysis(job, &json, ANALYZER_VERSION, &[artifact])
        .await
    {
        Ok(s) => s,
        Err(e) => {
            let _ = runner.blobs.delete(&key).await;
            return Err(transient(&e));
        }
    };
    let Some(replaced) = stored else {
        tracing::warn!(
            job = job.id,
            "job was reclaimed by another worker; result dropped"
        );
        let _ = runner.blobs.delete(&key).await;
        return Ok(());
    };
    for old in replaced {
        if let Err(e) = runner.blobs.delete(&old).await {
            tracing::warn!(key = %old, error = %e, "could not remove a replaced artifact");
        }
    }
    crate::metrics::trace_analyzed(trace.bytes as u64, summary.trace.json_bytes);
    runner
        .finish_run_if_complete(&job.run_id)
        .await
        .map_err(|e| transient(&e))
}

/// A reader that fails once `cancel` is set: how an analysis is cancelled
/// (a deleted run, a passed deadline) while it parses.
struct Cancellable<R> {
    inner: R,
    cancel: Arc<AtomicBool>,
}

impl<R: Read> Read for Cancellable<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.cancel.load(Ordering::Relaxed) {
            // Not `Interrupted`: readers retry that.
            return Err(std::io::Error::other("the analysis was cancelled"));
        }
        self.inner.read(buf)
    }
}
