//! What a finished analysis stores: the summary (in the database) and the
//! other artifacts' records (their bytes are in the blob store).

use super::jobs::complete_job;
use super::{now_ms, word, Db, DbResult, Job};
use kinetoscope_types::{ArtifactName, RunStatus};
use sqlx::any::AnyRow;
use sqlx::Row;

/// An artifact as recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct ArtifactRecord {
    /// The rank it belongs to.
    pub rank: i64,
    /// Which output.
    pub name: ArtifactName,
    /// Its blob, or `None` when it is kept in the database.
    pub blob_key: Option<String>,
    /// Stored size.
    pub bytes: i64,
    /// The analyzer version that produced it.
    pub analyzer_version: i64,
}

/// An artifact a finished analysis stores beside its summary.
#[derive(Clone, Debug)]
pub struct NewArtifact {
    /// Which output.
    pub name: ArtifactName,
    /// Its blob (already written).
    pub blob_key: String,
    /// Stored size.
    pub bytes: i64,
}

fn artifact_from_row(row: &AnyRow) -> DbResult<ArtifactRecord> {
    Ok(ArtifactRecord {
        rank: row.try_get("rank")?,
        name: word(row, "name")?,
        blob_key: row.try_get("blob_key")?,
        bytes: row.try_get("bytes")?,
        analyzer_version: row.try_get("analyzer_version")?,
    })
}

impl Db {
    /// Stores a finished analysis (the summary and the other artifacts)
    /// and completes the job, atomically, if the job is still this worker's.
    /// Returns `None` if it was not stored (the job was taken over), else
    /// the blob keys of the artifacts it replaced, for the caller to delete.
    pub async fn finish_analysis(
        &self,
        job: &Job,
        summary: &str,
        version: u32,
        artifacts: &[NewArtifact],
    ) -> DbResult<Option<Vec<String>>> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        if !complete_job(&mut tx, job).await? {
            return Ok(None);
        }
        let mut replaced = Vec::new();
        for r in sqlx::query("SELECT blob_key FROM artifacts WHERE run_id = $1 AND rank = $2 AND blob_key IS NOT NULL")
            .bind(&job.run_id)
            .bind(job.rank)
            .fetch_all(&mut *tx)
            .await?
        {
            let key: String = r.try_get("blob_key")?;
            if !artifacts.iter().any(|a| a.blob_key == key) {
                replaced.push(key);
            }
        }
        sqlx::query("DELETE FROM artifacts WHERE run_id = $1 AND rank = $2")
            .bind(&job.run_id)
            .bind(job.rank)
            .execute(&mut *tx)
            .await?;
        let rows = std::iter::once((ArtifactName::Summary, None, summary.len() as i64)).chain(
            artifacts
                .iter()
                .map(|a| (a.name, Some(a.blob_key.clone()), a.bytes)),
        );
        for (name, key, bytes) in rows {
            sqlx::query(
                "INSERT INTO artifacts (run_id, rank, name, blob_key, bytes, analyzer_version, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&job.run_id)
            .bind(job.rank)
            .bind(name.as_str())
            .bind(key)
            .bind(bytes)
            .bind(version as i64)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "UPDATE traces SET status = $6, error = NULL, summary = $1, analyzer_version = $2, \
             analyses = analyses + 1, analyzed_at = $3, progress_bytes = bytes WHERE run_id = $4 AND rank = $5",
        )
        .bind(summary)
        .bind(version as i64)
        .bind(now)
        .bind(&job.run_id)
        .bind(job.rank)
        .bind(RunStatus::Done.as_str())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(replaced))
    }

    /// One artifact's record.
    pub async fn artifact(
        &self,
        run_id: &str,
        rank: i64,
        name: ArtifactName,
    ) -> DbResult<Option<ArtifactRecord>> {
        let row = sqlx::query(
            "SELECT rank, name, blob_key, bytes, analyzer_version FROM artifacts \
             WHERE run_id = $1 AND rank = $2 AND name = $3",
        )
        .bind(run_id)
        .bind(rank)
        .bind(name.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| artifact_from_row(&r)).transpose()
    }

    /// Every artifact of a run, by rank and name.
    pub async fn artifacts(&self, run_id: &str) -> DbResult<Vec<ArtifactRecord>> {
        let rows = sqlx::query(
            "SELECT rank, name, blob_key, bytes, analyzer_version FROM artifacts WHERE run_id = $1 ORDER BY rank, name",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(artifact_from_row).collect()
    }
}
