//! The job queue: claims under a lease, heartbeats, failures and retries.
//! A claim on PostgreSQL is `FOR UPDATE SKIP LOCKED`, so concurrent workers
//! never claim the same job; on SQLite it is one `UPDATE`, which SQLite
//! serializes.

use super::runs::{trace_from_row, TraceRecord, TRACE_COLUMNS};
use super::{now_ms, word, Backend, Db, DbResult};
use kinetoscope_types::{JobKind, JobState, RunStatus};
use sqlx::Row;

/// A claimed job.
#[derive(Clone, Debug)]
pub struct Job {
    /// Id.
    pub id: i64,
    /// Kind.
    pub kind: JobKind,
    /// Run id.
    pub run_id: String,
    /// Rank.
    pub rank: i64,
    /// Attempts.
    pub attempts: i64,
    /// Largest attempts.
    pub max_attempts: i64,
    /// Worker.
    pub worker: String,
}

impl Db {
    /// Queues re-analysis of every analyzed trace whose summary came from
    /// another analyzer version; returns how many were queued.
    pub async fn enqueue_stale(&self, version: u32) -> DbResult<u64> {
        let rows = sqlx::query(
            "SELECT run_id, rank FROM traces WHERE status IN ($2, $3) \
             AND (analyzer_version IS NULL OR analyzer_version <> $1)",
        )
        .bind(version as i64)
        .bind(RunStatus::Done.as_str())
        .bind(RunStatus::Failed.as_str())
        .fetch_all(&self.pool)
        .await?;
        let mut n = 0;
        for r in rows {
            let run_id: String = r.try_get("run_id")?;
            let rank: i64 = r.try_get("rank")?;
            let mut tx = self.pool.begin().await?;
            n += enqueue_analysis(&mut tx, &run_id, rank, now_ms()).await?;
            tx.commit().await?;
        }
        Ok(n)
    }

    /// Claims the oldest runnable job: a queued one whose time has come, or a
    /// running one whose lease expired (its worker died).
    pub async fn claim(&self, worker: &str, lease_ms: i64) -> DbResult<Option<Job>> {
        let now = now_ms();
        let lock = match self.backend {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        };
        let sql = format!(
            "UPDATE jobs SET state = $4, worker = $1, lease_until = $2, attempts = attempts + 1, updated_at = $3 \
             WHERE id = (SELECT id FROM jobs \
                         WHERE (state = $5 AND run_after <= $3) OR (state = $4 AND lease_until < $3) \
                         ORDER BY id LIMIT 1{lock}) \
             RETURNING id, kind, run_id, rank, attempts, max_attempts"
        );
        let row = sqlx::query(&sql)
            .bind(worker)
            .bind(now + lease_ms)
            .bind(now)
            .bind(JobState::Running.as_str())
            .bind(JobState::Queued.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            Ok(Job {
                id: r.try_get("id")?,
                kind: word(&r, "kind")?,
                run_id: r.try_get("run_id")?,
                rank: r.try_get("rank")?,
                attempts: r.try_get("attempts")?,
                max_attempts: r.try_get("max_attempts")?,
                worker: worker.to_string(),
            })
        })
        .transpose()
    }

    /// Extends a job's lease and records progress; false if the job is no
    /// longer this worker's (its lease expired and another took it).
    pub async fn heartbeat(
        &self,
        job: &Job,
        lease_ms: i64,
        progress: Option<i64>,
    ) -> DbResult<bool> {
        let now = now_ms();
        let r = sqlx::query(
            "UPDATE jobs SET lease_until = $1, updated_at = $2 WHERE id = $3 AND worker = $4 AND state = $5",
        )
        .bind(now + lease_ms)
        .bind(now)
        .bind(job.id)
        .bind(&job.worker)
        .bind(JobState::Running.as_str())
        .execute(&self.pool)
        .await?;
        if let Some(p) = progress {
            sqlx::query("UPDATE traces SET progress_bytes = $1 WHERE run_id = $2 AND rank = $3")
                .bind(p)
                .bind(&job.run_id)
                .bind(job.rank)
                .execute(&self.pool)
                .await?;
        }
        Ok(r.rows_affected() == 1)
    }

    /// Marks a claimed analysis as started.
    pub async fn start_analysis(&self, job: &Job) -> DbResult<()> {
        let mut tx = self.pool.begin().await?;
        // Only while the job is still this worker's (a re-ranked upload's
        // trace lost its job, and another trace holds its old rank).
        sqlx::query(
            "UPDATE traces SET status = $3, progress_bytes = 0 WHERE run_id = $1 AND rank = $2 AND status <> $4 \
             AND EXISTS (SELECT 1 FROM jobs WHERE id = $5 AND worker = $6 AND state = $7)",
        )
        .bind(&job.run_id)
        .bind(job.rank)
        .bind(RunStatus::Analyzing.as_str())
        .bind(RunStatus::Done.as_str())
        .bind(job.id)
        .bind(&job.worker)
        .bind(JobState::Running.as_str())
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE runs SET status = $2 WHERE id = $1 AND status IN ($3, $4)")
            .bind(&job.run_id)
            .bind(RunStatus::Analyzing.as_str())
            .bind(RunStatus::Queued.as_str())
            .bind(RunStatus::Failed.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }

    /// The trace a job works on, with the run's analysis options.
    pub async fn job_trace(&self, job: &Job) -> DbResult<Option<(TraceRecord, String)>> {
        let row = sqlx::query(&format!(
            "SELECT {TRACE_COLUMNS}, (SELECT options FROM runs WHERE id = run_id) AS options \
             FROM traces WHERE run_id = $1 AND rank = $2"
        ))
        .bind(&job.run_id)
        .bind(job.rank)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok((
                trace_from_row(&r)?,
                r.try_get::<Option<String>, _>("options")?
                    .unwrap_or_default(),
            ))
        })
        .transpose()
    }

    /// Fails a job. With `retry_after_ms` (a transient error, attempts left)
    /// it is queued again after that delay; otherwise it fails for good and
    /// so do its trace and run, with the reason.
    pub async fn fail_job(
        &self,
        job: &Job,
        reason: &str,
        retry_after_ms: Option<i64>,
    ) -> DbResult<()> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        match retry_after_ms {
            Some(delay) => {
                let r = sqlx::query(
                    "UPDATE jobs SET state = $6, run_after = $1, error = $2, lease_until = NULL, updated_at = $3 \
                     WHERE id = $4 AND worker = $5 AND state = $7",
                )
                .bind(now + delay)
                .bind(reason)
                .bind(now)
                .bind(job.id)
                .bind(&job.worker)
                .bind(JobState::Queued.as_str())
                .bind(JobState::Running.as_str())
                .execute(&mut *tx)
                .await?;
                // Only while this worker still holds the job: a job taken
                // over, or deleted (its run deleted, its trace re-ranked by
                // its upload), no longer speaks for the trace at its rank.
                if r.rows_affected() == 1 {
                    sqlx::query("UPDATE traces SET status = $4, error = $1 WHERE run_id = $2 AND rank = $3 AND status <> $5")
                        .bind(reason)
                        .bind(&job.run_id)
                        .bind(job.rank)
                        .bind(RunStatus::Queued.as_str())
                        .bind(RunStatus::Done.as_str())
                        .execute(&mut *tx)
                        .await?;
                }
            }
            None => {
                let r = sqlx::query(
                    "UPDATE jobs SET state = $5, error = $1, lease_until = NULL, updated_at = $2 \
                     WHERE id = $3 AND worker = $4 AND state = $6",
                )
                .bind(reason)
                .bind(now)
                .bind(job.id)
                .bind(&job.worker)
                .bind(JobState::Failed.as_str())
                .bind(JobState::Running.as_str())
                .execute(&mut *tx)
                .await?;
                if r.rows_affected() == 1 {
                    if job.kind == JobKind::Analyze {
                        sqlx::query("UPDATE traces SET status = $4, error = $1 WHERE run_id = $2 AND rank = $3")
                            .bind(reason)
                            .bind(&job.run_id)
                            .bind(job.rank)
                            .bind(RunStatus::Failed.as_str())
                            .execute(&mut *tx)
                            .await?;
                    }
                    sqlx::query(
                        "UPDATE runs SET status = $3, stage = '', error = $1 WHERE id = $2",
                    )
                    .bind(reason)
                    .bind(&job.run_id)
                    .bind(RunStatus::Failed.as_str())
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        tx.commit().await
    }

    /// Jobs by state, for metrics.
    pub async fn job_counts(&self) -> DbResult<Vec<(JobState, i64)>> {
        let rows = sqlx::query("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((word(r, "state")?, r.try_get("n")?)))
            .collect()
    }
}

/// Marks a job done if this worker still holds it (its lease was not taken
/// over). This check, in the transaction that stores the job's result, is
/// what makes a job complete at most once.
pub(super) async fn complete_job(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    job: &Job,
) -> DbResult<bool> {
    let done = sqlx::query(
        "UPDATE jobs SET state = $4, lease_until = NULL, error = NULL, updated_at = $1 \
         WHERE id = $2 AND worker = $3 AND state = $5",
    )
    .bind(now_ms())
    .bind(job.id)
    .bind(&job.worker)
    .bind(JobState::Done.as_str())
    .bind(JobState::Running.as_str())
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Queues an analysis unless one is already queued or running.
pub(super) async fn enqueue_analysis(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    run_id: &str,
    rank: i64,
    now: i64,
) -> DbResult<u64> {
    let r = sqlx::query(
        "INSERT INTO jobs (kind, run_id, rank, state, run_after, max_attempts, created_at, updated_at) \
         VALUES ($4, $1, $2, $5, $3, 5, $3, $3) \
         ON CONFLICT (kind, run_id, rank) WHERE state IN ('queued', 'running') DO NOTHING",
        // The conflict's predicate is written out, not bound: PostgreSQL
        // infers the partial unique index (migrations) from its text.
    )
    .bind(run_id)
    .bind(rank)
    .bind(now)
    .bind(JobKind::Analyze.as_str())
    .bind(JobState::Queued.as_str())
    .execute(&mut **tx)
    .await?;
    Ok(r.rows_affected())
}
