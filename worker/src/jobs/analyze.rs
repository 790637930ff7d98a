//! The analysis job: read one rank's stored trace, analyze it, store the
//! summary, and complete the run when it was the last rank.

use super::{JobError, Runner};
use crate::artifacts::artifact_key;
use crate::db::Job;
use crate::db::NewArtifact;
use kinetoscope_trace::analysis::{analyze_stored, StoredArtifact, ANALYZER_VERSION};
use kinetoscope_trace::import::{read_trace, ReadOptions, TraceError};
use kinetoscope_types::{AnalysisOptions, ArtifactName, Summary};
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Runs one analysis job: the analysis under a heartbeat and a deadline,
/// then its artifacts stored and the run completed when it was the last
/// rank.
pub(super) async fn run(runner: &Runner, job: &Job) -> Result<(), JobError> {
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
    let analyzed = analyze(runner, job, reader, AnalysisOptions::from_stored(&options)).await?;
    let json_bytes = analyzed.summary.trace.json_bytes;
    if !store(runner, job, analyzed).await? {
        return Ok(());
    }
    if let Some(told) = &runner.on_stored {
        told(&job.run_id, job.rank);
    }
    crate::metrics::trace_analyzed(trace.bytes as u64, json_bytes);
    runner
        .finish_run_if_complete(&job.run_id)
        .await
        .map_err(|e| transient(&e))
}

fn transient(e: &dyn std::fmt::Display) -> JobError {
    JobError::Transient(e.to_string())
}

/// The analysis and the summary's JSON, as the job stores them.
struct Analyzed {
    summary: Summary,
    json: String,
    artifacts: Vec<StoredArtifact>,
}

/// Parses and analyzes the stored trace on a blocking thread, while a
/// heartbeat renews the job's lease and publishes progress. When the claim
/// is gone (the run was deleted, which deletes its jobs, or another worker
/// took the job over) or the deadline passes, the analysis is cancelled:
/// its reads fail from then on, so a parse stops at once.
async fn analyze(
    runner: &Runner,
    job: &Job,
    reader: impl Read + Send + 'static,
    opts: AnalysisOptions,
) -> Result<Analyzed, JobError> {
    let progress = Arc::new(AtomicU64::new(0));
    let cancel = Arc::new(AtomicBool::new(false));
    let beat = heartbeat(runner, job, progress.clone(), cancel.clone());
    let read = ReadOptions {
        limits: runner.config.limits.clone(),
        progress: Some(progress),
        cancel: Some(cancel.clone()),
    };
    let delay = runner.config.analysis_delay;
    let reader = Cancellable {
        inner: reader,
        cancel: cancel.clone(),
    };
    let flag = cancel.clone();
    let analysis = tokio::task::spawn_blocking(move || {
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        read_trace(reader, &read).map(|t| -> Result<_, String> {
            // Past the parse, every pass reads the flag at its checkpoints:
            // a deleted run or a passed deadline frees this thread within
            // a fraction of a second (kinetoscope_trace::cancel).
            let a = kinetoscope_trace::cancel::run(&flag, || analyze_stored(t, &opts))
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            let json = String::from_utf8(a.summary_json).map_err(|e| e.to_string())?;
            Ok(Analyzed {
                summary: a.summary,
                json,
                artifacts: a.artifacts,
            })
        })
    });
    let deadline = runner.config.analysis_deadline;
    let outcome = match tokio::time::timeout(deadline, analysis).await {
        Ok(outcome) => outcome,
        Err(_) => {
            // The parse stops at its next read, the passes after it at
            // their next checkpoint: the thread ends within a second.
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
    match outcome {
        Ok(Ok(Ok(analyzed))) => Ok(analyzed),
        Ok(Ok(Err(e))) => Err(JobError::Transient(format!(
            "encoding the analysis failed: {e}"
        ))),
        Ok(Err(TraceError::Io(io))) => Err(JobError::Transient(format!(
            "reading the stored trace failed: {io}"
        ))),
        Ok(Err(bad)) => Err(JobError::BadInput(bad.to_string())),
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
            Err(JobError::BadInput(format!(
                "the analyzer failed on this trace (internal error: {msg})"
            )))
        }
    }
}

/// Renews the job's lease and publishes progress until aborted; sets
/// `cancel` when the claim is gone (completion would be refused).
fn heartbeat(
    runner: &Runner,
    job: &Job,
    progress: Arc<AtomicU64>,
    cancel: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    let db = runner.db.clone();
    let job = job.clone();
    let lease = runner.lease_ms();
    // Progress is shown live, so beat often; the lease allows for several
    // missed beats.
    let every = Duration::from_millis((lease / 5).clamp(200, 1000) as u64);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let p = progress.load(Ordering::Relaxed) as i64;
            match db.heartbeat(&job, lease, Some(p)).await {
                Ok(true) => {}
                Ok(false) => {
                    cancel.store(true, Ordering::Relaxed);
                    return;
                }
                Err(e) => tracing::warn!(error = %e, "heartbeat failed"),
            }
        }
    })
}

/// Stores the analysis: every artifact to the blob store first, then one
/// transaction that stores the summary and records them, so a run never
/// points at a missing blob. False when the job was reclaimed by another
/// worker meanwhile (the result is dropped).
async fn store(runner: &Runner, job: &Job, analyzed: Analyzed) -> Result<bool, JobError> {
    let mut records = Vec::with_capacity(analyzed.artifacts.len());
    for artifact in &analyzed.artifacts {
        let key = artifact_key(
            &job.run_id,
            job.rank,
            artifact.name,
            ANALYZER_VERSION,
            job.id,
            job.attempts,
        );
        if let Err(e) = write_blob(runner, &key, &artifact.bytes).await {
            delete_blobs(runner, &records).await;
            return Err(JobError::Transient(format!(
                "storing the {} failed: {e}",
                artifact_words(artifact.name)
            )));
        }
        records.push(NewArtifact {
            name: artifact.name,
            blob_key: key,
            bytes: artifact.bytes.len() as i64,
        });
    }
    let stored = match runner
        .db
        .finish_analysis(job, &analyzed.json, ANALYZER_VERSION, &records)
        .await
    {
        Ok(s) => s,
        Err(e) => {
            delete_blobs(runner, &records).await;
            return Err(transient(&e));
        }
    };
    let Some(replaced) = stored else {
        tracing::warn!(
            job = job.id,
            "job was reclaimed by another worker; result dropped"
        );
        delete_blobs(runner, &records).await;
        return Ok(false);
    };
    for old in replaced {
        if let Err(e) = runner.blobs.delete(&old).await {
            tracing::warn!(key = %old, error = %e, "could not remove a replaced artifact");
        }
    }
    Ok(true)
}

/// What an artifact is, in an error's words.
fn artifact_words(name: ArtifactName) -> &'static str {
    match name {
        ArtifactName::Timeline => "timeline index",
        other => other.as_str(),
    }
}

/// Writes one blob whole, or aborts it.
async fn write_blob(runner: &Runner, key: &str, bytes: &[u8]) -> Result<(), String> {
    let mut w = runner.blobs.writer(key);
    let written = match w.write(bytes).await {
        Ok(()) => w.finish().await.map(|_| ()),
        Err(e) => {
            w.abort().await;
            Err(e)
        }
    };
    written.map_err(|e| e.to_string())
}

/// Removes the blobs of artifacts no run will point at.
async fn delete_blobs(runner: &Runner, records: &[NewArtifact]) {
    for r in records {
        let _ = runner.blobs.delete(&r.blob_key).await;
    }
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
