//! A multipart upload's run while its files arrive: created with its first
//! stored file, one more rank (and its analysis job) with each next one, so
//! a worker analyzes rank 0 while rank 7 still uploads. Until the upload
//! closes the run is `uploading`: out of the runs list, never completed
//! (`complete_run` and the sweep skip it, so the cross-rank summary waits
//! for every rank), and deleted whole when the upload fails.

use super::jobs::enqueue_analysis;
use super::runs::insert_trace;
use super::{now_ms, Db, DbResult, NewRun, NewTrace};
use kinetoscope_types::{JobState, RunStatus};
use sqlx::Row;

impl Db {
    /// Creates an upload's run, hidden while it uploads, with its first
    /// trace and that trace's analysis job.
    pub async fn open_upload(&self, run: &NewRun, first: &NewTrace) -> DbResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO runs (id, name, tags, note, created_at, status, stage, source, options, capture, uploading) \
             VALUES ($1, $2, $3, '', $4, $5, '', $6, '{}', NULL, 1)",
        )
        .bind(&run.id)
        .bind(&run.name)
        .bind(serde_json::to_string(&run.tags).unwrap_or_else(|_| "[]".into()))
        .bind(now_ms())
        .bind(RunStatus::Queued.as_str())
        .bind(run.source.as_str())
        .execute(&mut *tx)
        .await?;
        insert_trace(&mut tx, &run.id, first).await?;
        tx.commit().await
    }

    /// Adds one more stored file to an uploading run, queueing its analysis.
    pub async fn add_upload(&self, run_id: &str, trace: &NewTrace) -> DbResult<()> {
        let mut tx = self.pool.begin().await?;
        insert_trace(&mut tx, run_id, trace).await?;
        tx.commit().await
    }

    /// Closes an upload: each trace takes its final rank (`ranks[k]` is the
    /// final rank of the file stored as rank `k`), the run becomes visible
    /// (renamed to `name` when given), and it may complete. A trace keeps what it has under its new rank: its
    /// summary, its artifacts, its finished and failed jobs (an analysis
    /// does not depend on the rank it is stored under). One whose analysis
    /// is queued or running is queued again under its new rank: its live job
    /// goes, so a running one loses its claim and its result is dropped.
    /// One transaction; the run's row is written last, as a starting
    /// analysis writes the trace's row then the run's (PostgreSQL would
    /// otherwise deadlock the two).
    pub async fn close_upload(
        &self,
        run_id: &str,
        ranks: &[i64],
        name: Option<&str>,
    ) -> DbResult<()> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        let moved: Vec<(i64, i64)> = ranks
            .iter()
            .enumerate()
            .map(|(old, &new)| (old as i64, new))
            .filter(|(old, new)| old != new)
            .collect();
        for &(old, new) in &moved {
            // Every statement writes (SQLite: a reading transaction cannot
            // become a writer beside a worker's write).
            sqlx::query("DELETE FROM jobs WHERE run_id = $1 AND rank = $2 AND state IN ($3, $4)")
                .bind(run_id)
                .bind(old)
                .bind(JobState::Queued.as_str())
                .bind(JobState::Running.as_str())
                .execute(&mut *tx)
                .await?;
            // Through a negative rank: no two rows share a rank midway.
            for table in ["jobs", "artifacts", "traces"] {
                sqlx::query(&format!(
                    "UPDATE {table} SET rank = $3 WHERE run_id = $1 AND rank = $2"
                ))
                .bind(run_id)
                .bind(old)
                .bind(-1 - new)
                .execute(&mut *tx)
                .await?;
            }
        }
        if !moved.is_empty() {
            for table in ["jobs", "artifacts"] {
                sqlx::query(&format!(
                    "UPDATE {table} SET rank = -1 - rank WHERE run_id = $1 AND rank < 0"
                ))
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
            }
            // A trace whose analysis was queued or running is queued again.
            sqlx::query(
                "UPDATE traces SET rank = -1 - rank, \
                 status = CASE WHEN status IN ($2, $3) THEN $2 ELSE status END \
                 WHERE run_id = $1 AND rank < 0",
            )
            .bind(run_id)
            .bind(RunStatus::Queued.as_str())
            .bind(RunStatus::Analyzing.as_str())
            .execute(&mut *tx)
            .await?;
            for &(_, new) in &moved {
                let queued =
                    sqlx::query("SELECT status FROM traces WHERE run_id = $1 AND rank = $2")
                        .bind(run_id)
                        .bind(new)
                        .fetch_one(&mut *tx)
                        .await?
                        .try_get::<String, _>("status")?
                        == RunStatus::Queued.as_str();
                if queued {
                    enqueue_analysis(&mut tx, run_id, new, now).await?;
                }
            }
        }
        sqlx::query("UPDATE runs SET uploading = 0, name = COALESCE($2, name) WHERE id = $1")
            .bind(run_id)
            .bind(name.map(str::to_string))
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }

    /// Uploads that never closed: the process storing them stopped (a
    /// crash, a restart) before the last file. Their runs are deleted by
    /// the worker's sweep ([`Db::delete_run`]).
    pub async fn abandoned_uploads(&self, created_before_ms: i64) -> DbResult<Vec<String>> {
        let rows = sqlx::query("SELECT id FROM runs WHERE uploading = 1 AND created_at < $1")
            .bind(created_before_ms)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| r.try_get("id")).collect()
    }
}
