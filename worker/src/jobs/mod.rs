//! The job runner: claims jobs from the database, runs them, stores results.
//!
//! A job is claimed with a lease that a heartbeat extends while it runs; if
//! the worker dies, the lease expires and another worker reclaims the job.
//! Results are stored only if the job is still this worker's (the completion
//! query checks the claim), so a job is completed exactly once.
//!
//! Failures are classified: bad input (not a trace, truncated, too large)
//! fails the run at once with the reason; transient errors (blob store or
//! database unreachable) are retried with exponential backoff.

//!
//! The job kinds live beneath the runner, one module each: [`analyze`] and
//! [`capture`]. They use the runner; the runner only dispatches to them.

pub mod analyze;
pub mod capture;

use crate::blobs::Blobs;
use crate::db::{now_ms, Db, Headline, Job};
use kinetoscope_trace::analysis::ANALYZER_VERSION;
use kinetoscope_trace::import::Limits;
use kinetoscope_types::{JobKind, Summary};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How long a claim lasts without a heartbeat, by default.
pub const LEASE: Duration = Duration::from_secs(30);

/// Settings of a runner.
#[derive(Clone)]
pub struct RunnerConfig {
    /// Identifies this worker in job claims (host, pid and a random suffix).
    pub worker_id: String,
    /// Limits.
    pub limits: Limits,
    /// How long to sleep when no job is queued (a notify wakes it earlier).
    pub poll: Duration,
    /// Inference engines that capture jobs may target.
    pub engines: Vec<crate::engines::Engine>,
    /// How long a capture waits for the engine's files.
    pub capture_timeout: Duration,
    /// How long a capture waits for any step before calling the engine idle.
    pub capture_idle: Duration,
    /// How long a claim lasts without a heartbeat; a job whose worker died
    /// is taken over this long after its last heartbeat.
    pub lease: Duration,
    /// The longest one analysis may take; past it the run fails with the
    /// reason (a trace that would hold the worker for hours holds it this
    /// long at most).
    pub analysis_deadline: Duration,
    /// Fault injection for tests: sleep this long before each analysis, so a
    /// test can kill a worker mid-job. Zero in production.
    pub analysis_delay: Duration,
}

/// What the runner needs: the database, the blobs, and a wake-up signal.
#[derive(Clone)]
pub struct Runner {
    /// Db.
    pub db: Db,
    /// Blobs.
    pub blobs: Blobs,
    /// Config.
    pub config: Arc<RunnerConfig>,
    /// Notified when a job is queued by this process.
    pub wake: Arc<Notify>,
    /// Told of each rank whose analysis is stored (run id, rank): the
    /// embedded server loads the run's timeline index then, so the first
    /// view of the timeline finds it loaded.
    pub on_stored: Option<OnStored>,
}

/// What a runner calls once a rank's analysis is stored.
pub type OnStored = Arc<dyn Fn(&str, i64) + Send + Sync>;

/// Why a job failed.
#[derive(Debug)]
pub enum JobError {
    /// The input is at fault; retrying cannot help.
    BadInput(String),
    /// Something outside the input failed; worth retrying.
    Transient(String),
}

/// How a job ended, as the metrics name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done.
    Done,
    /// Failed for good (bad input, or out of attempts).
    Failed,
    /// Failed for a cause outside its input, retried later: the job loop
    /// backs off.
    Retry,
    /// Failed for a cause outside its input, out of attempts: the run
    /// fails with the reason, and the job loop backs off.
    GaveUp,
}

impl Outcome {
    /// The metrics' word.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::Failed | Outcome::GaveUp => "failed",
            Outcome::Retry => "retry",
        }
    }
}

impl Runner {
    pub(crate) fn lease_ms(&self) -> i64 {
        self.config.lease.as_millis() as i64
    }

    /// Runs `concurrency` job loops until `stop` is cancelled (in-flight jobs
    /// finish first). Also re-queues summaries from older analyzer versions
    /// at start and every few minutes.
    pub async fn run(self, concurrency: usize, stop: CancellationToken) {
        match self.db.enqueue_stale(ANALYZER_VERSION).await {
            Ok(n) if n > 0 => tracing::info!(
                queued = n,
                "re-analyzing traces from older analyzer versions"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "could not queue stale analyses"),
        }
        let mut loops = Vec::new();
        for k in 0..concurrency.max(1) {
            let me = self.clone();
            let stop = stop.clone();
            loops.push(tokio::spawn(async move { me.job_loop(k, stop).await }));
        }
        let maintenance = {
            let me = self.clone();
            tokio::spawn(async move {
                for round in 1u64.. {
                    me.finish_stuck_runs().await;
                    me.delete_abandoned_uploads().await;
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    if round % 5 == 0 {
                        if let Err(e) = me.db.enqueue_stale(ANALYZER_VERSION).await {
                            tracing::warn!(error = %e, "could not queue stale analyses");
                        }
                    }
                }
            })
        };
        for l in loops {
            let _ = l.await;
        }
        maintenance.abort();
    }

    async fn job_loop(&self, k: usize, stop: CancellationToken) {
        let worker = format!("{}/{k}", self.config.worker_id);
        // Jobs in a row that failed for a cause outside their input (a full
        // disk, an unreachable store): the loop waits longer after each, so
        // a broken dependency is retried slowly rather than in a spin.
        let mut failing = 0u32;
        loop {
            // A claim is never cancelled half-way: it may already be committed.
            if stop.is_cancelled() {
                return;
            }
            match self.db.claim(&worker, self.lease_ms()).await {
                Ok(Some(job)) => {
                    if matches!(self.handle(job).await, Outcome::Retry | Outcome::GaveUp) {
                        failing = failing.saturating_add(1);
                        let wait = Duration::from_millis(100 << failing.min(8))
                            .min(Duration::from_secs(20));
                        tokio::select! {
                            _ = stop.cancelled() => return,
                            _ = tokio::time::sleep(wait) => {}
                        }
                    } else {
                        failing = 0;
                    }
                }
                Ok(None) => {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = self.wake.notified() => {}
                        _ = tokio::time::sleep(self.config.poll) => {}
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "claiming a job failed");
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                    }
                }
            }
        }
    }

    /// Runs one claimed job to completion or failure.
    pub async fn handle(&self, job: Job) -> Outcome {
        let started = std::time::Instant::now();
        if job.attempts > job.max_attempts {
            let reason = format!(
                "gave up after {} attempts (the workers running it stopped or kept failing)",
                job.max_attempts
            );
            let _ = self.db.fail_job(&job, &reason, None).await;
            return Outcome::Failed;
        }
        tracing::info!(job = job.id, kind = %job.kind, run = %job.run_id, rank = job.rank, attempt = job.attempts, "job started");
        let result = match job.kind {
            JobKind::Analyze => analyze::run(self, &job).await,
            JobKind::Capture => capture::run(self, &job).await,
        };
        let outcome = match result {
            Ok(()) => Outcome::Done,
            Err(JobError::BadInput(reason)) => {
                tracing::info!(job = job.id, %reason, "job failed: bad input");
                if let Err(e) = self.db.fail_job(&job, &reason, None).await {
                    tracing::error!(error = %e, "recording a job failure failed");
                }
                Outcome::Failed
            }
            Err(JobError::Transient(reason)) => {
                let retry = job.attempts < job.max_attempts;
                let delay = 1000 * (1i64 << job.attempts.clamp(0, 6));
                tracing::warn!(job = job.id, %reason, retry, "job failed: transient");
                let reason = if retry {
                    reason
                } else {
                    format!("{reason} (gave up after {} attempts)", job.attempts)
                };
                if let Err(e) = self
                    .db
                    .fail_job(&job, &reason, retry.then_some(delay))
                    .await
                {
                    tracing::error!(error = %e, "recording a job failure failed");
                }
                // Retried later, or failed for a cause outside the input:
                // either way the loop backs off.
                if retry {
                    Outcome::Retry
                } else {
                    Outcome::GaveUp
                }
            }
        };
        crate::metrics::job_finished(job.kind.as_str(), outcome.as_str(), started.elapsed());
        outcome
    }

    /// Marks done the runs whose traces are all analyzed but whose last job
    /// could not say so (the job's result is stored in one transaction,
    /// the run's completion after it): at start and every minute, so no run
    /// stays `analyzing` once its store works again.
    pub async fn finish_stuck_runs(&self) {
        let runs = match self.db.runs_to_finish().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "could not look for runs to finish");
                return;
            }
        };
        for run in runs {
            match self.finish_run_if_complete(&run).await {
                Ok(()) => tracing::info!(%run, "finished a run its last job left analyzing"),
                Err(e) => tracing::warn!(%run, error = %e, "could not finish a run"),
            }
        }
    }

    /// When every trace of a run is analyzed: stores the headline (and the
    /// cross-rank summary of a multi-rank run) and marks the run done.
    pub async fn finish_run_if_complete(&self, run_id: &str) -> Result<(), crate::db::DbError> {
        finish_run_if_complete(&self.db, run_id).await
    }

    /// Deletes the runs of uploads that never closed a day after they
    /// began, far past any upload the pace guard lets live: what the
    /// start-up sweep (after the orphan age) missed, in a process that runs
    /// for days.
    pub async fn delete_abandoned_uploads(&self) {
        delete_abandoned_uploads(&self.db, &self.blobs, Duration::from_secs(24 * 60 * 60)).await;
    }
}

/// Deletes, with their blobs, the runs of uploads that began longer than
/// `age` ago and never closed: the process storing them stopped (a crash,
/// a restart) before their last file.
pub async fn delete_abandoned_uploads(db: &Db, blobs: &Blobs, age: Duration) {
    let before = now_ms() - age.as_millis() as i64;
    let runs = match db.abandoned_uploads(before).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "could not look for abandoned uploads");
            return;
        }
    };
    for run in runs {
        match db.delete_run(&run).await {
            Ok(keys) => {
                blobs.delete_run_blobs(&run, keys.unwrap_or_default()).await;
                tracing::info!(%run, "deleted an upload that never finished");
            }
            Err(e) => tracing::warn!(%run, error = %e, "could not delete an abandoned upload"),
        }
    }
}

/// When every trace of a run is analyzed (and its upload has closed):
/// stores the headline (and the cross-rank summary of a multi-rank run) and
/// marks the run done. Called by the job that analyzed a run's last rank,
/// by the sweep, and by the upload that closes after its ranks were
/// analyzed.
pub async fn finish_run_if_complete(
    db: &crate::db::Db,
    run_id: &str,
) -> Result<(), crate::db::DbError> {
    let (done, _failed, all) = db.trace_counts(run_id).await?;
    if done < all {
        if all > 1 {
            db.set_rank_stage(run_id, done, all).await?;
        }
        return Ok(());
    }
    let summaries = db.summaries(run_id).await?;
    let parsed: Vec<(i64, Summary)> = summaries
        .iter()
        .filter_map(|(rank, json)| serde_json::from_str(json).ok().map(|s| (*rank, s)))
        .collect();
    let cross = (parsed.len() > 1).then(|| kinetoscope_trace::ranks::cross_rank(&parsed));
    let headline = headline(parsed.first().map(|p| &p.1), cross.as_ref());
    let cross_json = cross.map(|c| serde_json::to_string(&c).unwrap_or_default());
    db.complete_run(run_id, &headline, cross_json.as_deref())
        .await
}

fn headline(first: Option<&Summary>, cross: Option<&kinetoscope_types::RanksSummary>) -> Headline {
    let Some(s) = first else {
        return Headline::default();
    };
    let top = cross
        .and_then(|c| c.findings.first())
        .or_else(|| s.findings.first())
        .map(|f| f.text.clone());
    Headline {
        devices: s.trace.devices.iter().take(1).cloned().collect(),
        steps: Some(s.steps_stats.count),
        mean_step_us: (s.steps_stats.count > 0).then_some(s.steps_stats.mean_us),
        top_finding: top,
    }
}
