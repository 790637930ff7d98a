//! Runs, their traces (one per rank) and their summaries.

use super::jobs::{complete_job, enqueue_analysis};
use super::{now_ms, word, Db, DbResult, Job};
use kinetoscope_types::{Encoding, JobKind, JobState, RunSource, RunStatus};
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::Row;

/// A run as stored.
#[derive(Clone, Debug, Default)]
pub struct RunRecord {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Tags.
    pub tags: Vec<String>,
    /// Note.
    pub note: String,
    /// Created at.
    pub created_at: i64,
    /// Status.
    pub status: RunStatus,
    /// Stage.
    pub stage: String,
    /// Error.
    pub error: Option<String>,
    /// Source.
    pub source: RunSource,
    /// Options.
    pub options: String,
    /// Capture.
    pub capture: Option<String>,
    /// Headline.
    pub headline: Option<Headline>,
    /// Sum over the run's traces.
    pub progress_bytes: i64,
    /// Total, bytes.
    pub total_bytes: i64,
    /// The names this run is the baseline of.
    pub baseline_of: Vec<String>,
}

/// The few numbers the runs list shows, stored when a run completes so the
/// list never reads full summaries.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Headline {
    /// Devices.
    pub devices: Vec<String>,
    /// Steps.
    pub steps: Option<u64>,
    /// Mean step, µs.
    pub mean_step_us: Option<f64>,
    /// Top finding.
    pub top_finding: Option<String>,
}

/// One rank's trace as stored.
#[derive(Clone, Debug, Default)]
pub struct TraceRecord {
    /// Run id.
    pub run_id: String,
    /// Rank.
    pub rank: i64,
    /// File name.
    pub file_name: String,
    /// Blob key.
    pub blob_key: String,
    /// Bytes.
    pub bytes: i64,
    /// Sha256.
    pub sha256: String,
    /// Encoding.
    pub encoding: Encoding,
    /// Status.
    pub status: RunStatus,
    /// Error.
    pub error: Option<String>,
    /// Progress, bytes.
    pub progress_bytes: i64,
    /// Analyzer version.
    pub analyzer_version: Option<i64>,
    /// Analyses.
    pub analyses: i64,
}

/// A run to create.
#[derive(Clone, Debug, Default)]
pub struct NewRun {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Tags.
    pub tags: Vec<String>,
    /// Source.
    pub source: RunSource,
    /// Capture.
    pub capture: Option<String>,
}

/// A stored trace to attach to a new run.
#[derive(Clone, Debug, Default)]
pub struct NewTrace {
    /// Rank.
    pub rank: i64,
    /// File name.
    pub file_name: String,
    /// Blob key.
    pub blob_key: String,
    /// Bytes.
    pub bytes: i64,
    /// Sha256.
    pub sha256: String,
    /// Encoding.
    pub encoding: Encoding,
}

/// Filters and paging for the runs list.
#[derive(Clone, Debug, Default)]
pub struct RunFilter {
    /// Substring of the name, case-insensitive.
    pub name: Option<String>,
    /// Tag.
    pub tag: Option<String>,
    /// Status.
    pub status: Option<RunStatus>,
    /// Baselines only: `*` any baseline, else the baseline of this name.
    pub baseline: Option<String>,
    /// Offset.
    pub offset: i64,
    /// Limit.
    pub limit: i64,
}

/// Changes to a run's descriptive fields.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct RunPatch {
    /// Name.
    pub name: Option<String>,
    /// Tags.
    pub tags: Option<Vec<String>>,
    /// Note.
    pub note: Option<String>,
    /// Make the run the baseline of this name (admin scope; the API checks
    /// the name).
    pub baseline_of: Option<String>,
}

/// Where a grouped upload's trace went ([`Db::create_run_in_group`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupOutcome {
    /// The first of its group: a new run.
    Created(String),
    /// Added to the group's run as one more rank.
    Joined(String),
    /// The group's run already has this rank: nothing was stored.
    RankTaken(String),
}

const RUN_COLUMNS: &str = "r.id, r.name, r.tags, r.note, r.created_at, r.status, r.stage, r.error, r.source, \
     r.options, r.capture, r.headline, \
     CAST(COALESCE((SELECT SUM(t.progress_bytes) FROM traces t WHERE t.run_id = r.id), 0) AS BIGINT) AS progress_bytes, \
     CAST(COALESCE((SELECT SUM(t.bytes) FROM traces t WHERE t.run_id = r.id), 0) AS BIGINT) AS total_bytes";
// (PostgreSQL sums BIGINTs into NUMERIC; the casts keep both backends at BIGINT.)

pub(super) const TRACE_COLUMNS: &str =
    "run_id, rank, file_name, blob_key, bytes, sha256, encoding, status, error, \
     progress_bytes, analyzer_version, analyses";

fn run_from_row(row: &AnyRow) -> DbResult<RunRecord> {
    let tags: String = row.try_get("tags")?;
    let headline: Option<String> = row.try_get("headline")?;
    Ok(RunRecord {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        note: row.try_get("note")?,
        created_at: row.try_get("created_at")?,
        status: word(row, "status")?,
        stage: row.try_get("stage")?,
        error: row.try_get("error")?,
        source: word(row, "source")?,
        options: row.try_get("options")?,
        capture: row.try_get("capture")?,
        headline: headline.and_then(|h| serde_json::from_str(&h).ok()),
        progress_bytes: row.try_get("progress_bytes")?,
        total_bytes: row.try_get("total_bytes")?,
        baseline_of: Vec::new(),
    })
}

pub(super) fn trace_from_row(row: &AnyRow) -> DbResult<TraceRecord> {
    Ok(TraceRecord {
        run_id: row.try_get("run_id")?,
        rank: row.try_get("rank")?,
        file_name: row.try_get("file_name")?,
        blob_key: row.try_get("blob_key")?,
        bytes: row.try_get("bytes")?,
        sha256: row.try_get("sha256")?,
        encoding: word(row, "encoding")?,
        status: word(row, "status")?,
        error: row.try_get("error")?,
        progress_bytes: row.try_get("progress_bytes")?,
        analyzer_version: row.try_get("analyzer_version")?,
        analyses: row.try_get("analyses")?,
    })
}

/// Escapes `%`, `_` and `\` for a `LIKE ... ESCAPE '\'` pattern.
fn like_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl Db {
    /// Creates a run with its traces and one analysis job per trace, in one
    /// transaction: either all of it is visible or none.
    pub async fn create_run(&self, run: &NewRun, traces: &[NewTrace]) -> DbResult<()> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        let status = match run.source {
            RunSource::Capture => RunStatus::Capturing,
            RunSource::Upload => RunStatus::Queued,
        };
        sqlx::query(
            "INSERT INTO runs (id, name, tags, note, created_at, status, stage, source, options, capture) \
             VALUES ($1, $2, $3, '', $4, $5, '', $6, '{}', $7)",
        )
        .bind(&run.id)
        .bind(&run.name)
        .bind(serde_json::to_string(&run.tags).unwrap_or_else(|_| "[]".into()))
        .bind(now)
        .bind(status.as_str())
        .bind(run.source.as_str())
        .bind(run.capture.clone())
        .execute(&mut *tx)
        .await?;
        for t in traces {
            insert_trace(&mut tx, &run.id, t).await?;
        }
        if run.source == RunSource::Capture {
            sqlx::query(
                "INSERT INTO jobs (kind, run_id, rank, state, run_after, max_attempts, created_at, updated_at) \
                 VALUES ($3, $1, 0, $4, $2, 1, $2, $2)",
            )
            .bind(&run.id)
            .bind(now)
            .bind(JobKind::Capture.as_str())
            .bind(JobState::Queued.as_str())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await
    }

    /// Creates a run for the first trace of an upload group, or adds the
    /// trace to the group's run as one more rank (and queues its analysis;
    /// the run is analyzing again until every rank is). A group's key
    /// older than `window_ms` starts a new run. One transaction, which
    /// begins by claiming the key: two ranks that arrive together agree on
    /// one run.
    pub async fn create_run_in_group(
        &self,
        run: &NewRun,
        trace: &NewTrace,
        group: &str,
        window_ms: i64,
    ) -> DbResult<GroupOutcome> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        let owner: String = sqlx::query(
            "INSERT INTO run_groups (group_key, run_id, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (group_key) DO UPDATE SET \
               run_id = CASE WHEN run_groups.created_at < $4 THEN excluded.run_id ELSE run_groups.run_id END, \
               created_at = CASE WHEN run_groups.created_at < $4 THEN excluded.created_at ELSE run_groups.created_at END \
             RETURNING run_id",
        )
        .bind(group)
        .bind(&run.id)
        .bind(now)
        .bind(now - window_ms)
        .fetch_one(&mut *tx)
        .await?
        .try_get("run_id")?;
        if owner == run.id {
            sqlx::query(
                "INSERT INTO runs (id, name, tags, note, created_at, status, stage, source, options, capture) \
                 VALUES ($1, $2, $3, '', $4, $5, '', $6, '{}', NULL)",
            )
            .bind(&run.id)
            .bind(&run.name)
            .bind(serde_json::to_string(&run.tags).unwrap_or_else(|_| "[]".into()))
            .bind(now)
            .bind(RunStatus::Queued.as_str())
            .bind(run.source.as_str())
            .execute(&mut *tx)
            .await?;
            insert_trace(&mut tx, &run.id, trace).await?;
            tx.commit().await?;
            return Ok(GroupOutcome::Created(owner));
        }
        let taken = sqlx::query("SELECT rank FROM traces WHERE run_id = $1 AND rank = $2")
            .bind(&owner)
            .bind(trace.rank)
            .fetch_optional(&mut *tx)
            .await?
            .is_some();
        if taken {
            return Ok(GroupOutcome::RankTaken(owner));
        }
        insert_trace(&mut tx, &owner, trace).await?;
        // A finished run is analyzing again; a failed one (a rank that
        // failed) stays failed, its reason shown.
        sqlx::query("UPDATE runs SET status = $2 WHERE id = $1 AND status = $3")
            .bind(&owner)
            .bind(RunStatus::Queued.as_str())
            .bind(RunStatus::Done.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(GroupOutcome::Joined(owner))
    }

    /// Attaches the traces a capture collected to its run and queues their
    /// analysis, finishing the capture job, in one transaction.
    pub async fn attach_captured(&self, job: &Job, traces: &[NewTrace]) -> DbResult<bool> {
        let mut tx = self.pool.begin().await?;
        if !complete_job(&mut tx, job).await? {
            return Ok(false);
        }
        for t in traces {
            insert_trace(&mut tx, &job.run_id, t).await?;
        }
        sqlx::query("UPDATE runs SET status = $3, stage = $1 WHERE id = $2")
            .bind(format!("analyzing 0/{} ranks", traces.len()))
            .bind(&job.run_id)
            .bind(RunStatus::Queued.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// One run with its progress.
    pub async fn run(&self, id: &str) -> DbResult<Option<RunRecord>> {
        let row = sqlx::query(&format!("SELECT {RUN_COLUMNS} FROM runs r WHERE r.id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(mut run) = row.as_ref().map(run_from_row).transpose()? else {
            return Ok(None);
        };
        run.baseline_of = self
            .baselines_of(&[id])
            .await?
            .remove(id)
            .unwrap_or_default();
        Ok(Some(run))
    }

    /// The traces (ranks) of a run, by rank.
    pub async fn traces(&self, run_id: &str) -> DbResult<Vec<TraceRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {TRACE_COLUMNS} FROM traces WHERE run_id = $1 ORDER BY rank"
        ))
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(trace_from_row).collect()
    }

    /// A page of runs, newest first, and the number matching the filter.
    pub async fn list_runs(&self, f: &RunFilter) -> DbResult<(Vec<RunRecord>, i64)> {
        // An upload still storing its files is not a run yet.
        let mut conds: Vec<String> = vec!["r.uploading = 0".to_string()];
        let mut binds: Vec<String> = Vec::new();
        if let Some(name) = f.name.as_deref().filter(|s| !s.is_empty()) {
            binds.push(format!("%{}%", like_escape(&name.to_lowercase())));
            conds.push(format!("LOWER(r.name) LIKE ${} ESCAPE '\\'", binds.len()));
        }
        if let Some(tag) = f.tag.as_deref().filter(|s| !s.is_empty()) {
            let quoted = serde_json::to_string(tag).unwrap_or_default();
            binds.push(format!("%{}%", like_escape(&quoted)));
            conds.push(format!("r.tags LIKE ${} ESCAPE '\\'", binds.len()));
        }
        if let Some(status) = f.status {
            binds.push(status.as_str().to_string());
            conds.push(format!("r.status = ${}", binds.len()));
        }
        match f.baseline.as_deref() {
            None | Some("") => {}
            Some("*") => {
                conds.push("EXISTS (SELECT 1 FROM baselines b WHERE b.run_id = r.id)".to_string())
            }
            Some(name) => {
                binds.push(name.to_string());
                conds.push(format!(
                    "EXISTS (SELECT 1 FROM baselines b WHERE b.run_id = r.id AND b.name = ${})",
                    binds.len()
                ));
            }
        }
        let where_ = if conds.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conds.join(" AND "))
        };
        let count_sql = format!("SELECT COUNT(*) AS n FROM runs r {where_}");
        let mut count_q = sqlx::query(&count_sql).persistent(false);
        for b in &binds {
            count_q = count_q.bind(b.clone());
        }
        let total: i64 = count_q.fetch_one(&self.pool).await?.try_get("n")?;
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs r {where_} ORDER BY r.created_at DESC, r.id LIMIT ${} OFFSET ${}",
            binds.len() + 1,
            binds.len() + 2
        );
        let mut q = sqlx::query(&sql).persistent(false);
        for b in &binds {
            q = q.bind(b.clone());
        }
        let rows = q
            .bind(f.limit.clamp(1, 500))
            .bind(f.offset.max(0))
            .fetch_all(&self.pool)
            .await?;
        let mut runs = rows
            .iter()
            .map(run_from_row)
            .collect::<DbResult<Vec<_>>>()?;
        let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
        let mut marks = self.baselines_of(&ids).await?;
        for r in &mut runs {
            r.baseline_of = marks.remove(&r.id).unwrap_or_default();
        }
        Ok((runs, total))
    }

    /// Renames, re-tags or annotates a run; false if there is no such run.
    pub async fn update_run(&self, id: &str, patch: &RunPatch) -> DbResult<bool> {
        let mut tx = self.pool.begin().await?;
        // The existence check writes (a no-op update) so that SQLite takes
        // the write lock first and waits its turn; a transaction that began
        // by reading fails at once after a concurrent write (see delete_run).
        let exists = sqlx::query("UPDATE runs SET name = name WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected()
            > 0;
        if !exists {
            return Ok(false);
        }
        if let Some(name) = &patch.name {
            sqlx::query("UPDATE runs SET name = $1 WHERE id = $2")
                .bind(name)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(tags) = &patch.tags {
            sqlx::query("UPDATE runs SET tags = $1 WHERE id = $2")
                .bind(serde_json::to_string(tags).unwrap_or_else(|_| "[]".into()))
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(note) = &patch.note {
            sqlx::query("UPDATE runs SET note = $1 WHERE id = $2")
                .bind(note)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(name) = &patch.baseline_of {
            sqlx::query(
                "INSERT INTO baselines (name, run_id, set_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (name) DO UPDATE SET run_id = excluded.run_id, set_at = excluded.set_at",
            )
            .bind(name)
            .bind(id)
            .bind(now_ms())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Deletes a run, its traces and jobs; returns the blob keys to delete,
    /// or `None` if there was no such run.
    pub async fn delete_run(&self, id: &str) -> DbResult<Option<Vec<String>>> {
        // Every statement writes (DELETE … RETURNING, not SELECT then
        // DELETE): a SQLite transaction that starts by reading cannot
        // become a writer after a concurrent write (a worker analysing this
        // very run) and fails at once; one that starts by writing waits its
        // turn under the busy timeout.
        let mut tx = self.pool.begin().await?;
        let mut keys: Vec<String> = Vec::new();
        for r in sqlx::query("DELETE FROM artifacts WHERE run_id = $1 RETURNING blob_key")
            .bind(id)
            .fetch_all(&mut *tx)
            .await?
        {
            if let Some(k) = r.try_get::<Option<String>, _>("blob_key")? {
                keys.push(k);
            }
        }
        for table in ["jobs", "baselines", "run_groups"] {
            sqlx::query(&format!("DELETE FROM {table} WHERE run_id = $1"))
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        for r in sqlx::query("DELETE FROM traces WHERE run_id = $1 RETURNING blob_key")
            .bind(id)
            .fetch_all(&mut *tx)
            .await?
        {
            keys.push(r.try_get("blob_key")?);
        }
        let gone = sqlx::query("DELETE FROM runs WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok((gone.rows_affected() == 1).then_some(keys))
    }

    /// Whether a run with this id exists.
    pub async fn run_exists(&self, id: &str) -> DbResult<bool> {
        Ok(sqlx::query("SELECT id FROM runs WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .is_some())
    }

    /// The stored summary JSON of one rank.
    pub async fn summary(&self, run_id: &str, rank: i64) -> DbResult<Option<String>> {
        let row = sqlx::query("SELECT summary FROM traces WHERE run_id = $1 AND rank = $2")
            .bind(run_id)
            .bind(rank)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.and_then(|r| r.try_get::<Option<String>, _>("summary").ok().flatten()))
    }

    /// All stored summaries of a run, by rank.
    pub async fn summaries(&self, run_id: &str) -> DbResult<Vec<(i64, String)>> {
        let rows = sqlx::query(
            "SELECT rank, summary FROM traces WHERE run_id = $1 AND summary IS NOT NULL ORDER BY rank",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("rank")?, r.try_get("summary")?)))
            .collect()
    }

    /// The cross-rank summary JSON of a multi-rank run.
    pub async fn cross_summary(&self, run_id: &str) -> DbResult<Option<String>> {
        let row = sqlx::query("SELECT cross_summary FROM runs WHERE id = $1")
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.and_then(|r| {
            r.try_get::<Option<String>, _>("cross_summary")
                .ok()
                .flatten()
        }))
    }

    /// Sets a run's status words (capture progress).
    pub async fn set_stage(&self, run_id: &str, status: RunStatus, stage: &str) -> DbResult<()> {
        sqlx::query("UPDATE runs SET status = $1, stage = $2 WHERE id = $3")
            .bind(status.as_str())
            .bind(stage)
            .bind(run_id)
            .execute(&self.pool)
            .await
            .map(|_| ())
    }

    /// Stores analysis options for a run and queues its re-analysis.
    pub async fn reanalyze(&self, run_id: &str, options_json: Option<&str>) -> DbResult<bool> {
        let mut tx = self.pool.begin().await?;
        if let Some(opts) = options_json {
            sqlx::query("UPDATE runs SET options = $1 WHERE id = $2")
                .bind(opts)
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
        }
        let ranks: Vec<i64> = sqlx::query("SELECT rank FROM traces WHERE run_id = $1")
            .bind(run_id)
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|r| r.try_get("rank"))
            .collect::<DbResult<_>>()?;
        if ranks.is_empty() {
            return Ok(false);
        }
        let now = now_ms();
        for rank in ranks {
            enqueue_analysis(&mut tx, run_id, rank, now).await?;
        }
        sqlx::query("UPDATE runs SET stage = 're-analyzing' WHERE id = $1 AND status = $2")
            .bind(run_id)
            .bind(RunStatus::Done.as_str())
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE runs SET status = $2, error = NULL WHERE id = $1 AND status = $3")
            .bind(run_id)
            .bind(RunStatus::Queued.as_str())
            .bind(RunStatus::Failed.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Counts of a run's traces: (done, failed, all).
    pub async fn trace_counts(&self, run_id: &str) -> DbResult<(i64, i64, i64)> {
        let row = sqlx::query(
            "SELECT CAST(COALESCE(SUM(CASE WHEN status = $2 THEN 1 ELSE 0 END), 0) AS BIGINT) AS done, \
                    CAST(COALESCE(SUM(CASE WHEN status = $3 THEN 1 ELSE 0 END), 0) AS BIGINT) AS failed, \
                    COUNT(*) AS n FROM traces WHERE run_id = $1",
        )
        .bind(run_id)
        .bind(RunStatus::Done.as_str())
        .bind(RunStatus::Failed.as_str())
        .fetch_one(&self.pool)
        .await?;
        Ok((
            row.try_get("done")?,
            row.try_get("failed")?,
            row.try_get("n")?,
        ))
    }

    /// Runs still marked analyzing whose every trace is analyzed: their
    /// last job stored its result, then could not mark the run done (a full
    /// disk, a lost database). The runner's sweep finishes them.
    pub async fn runs_to_finish(&self) -> DbResult<Vec<String>> {
        let rows = sqlx::query(
            "SELECT id FROM runs WHERE status = $1 AND uploading = 0 \
             AND EXISTS (SELECT 1 FROM traces t WHERE t.run_id = runs.id) \
             AND NOT EXISTS (SELECT 1 FROM traces t WHERE t.run_id = runs.id AND t.status <> $2)",
        )
        .bind(RunStatus::Analyzing.as_str())
        .bind(RunStatus::Done.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| r.try_get("id")).collect()
    }

    /// Marks a run complete with its headline and cross-rank summary.
    pub async fn complete_run(
        &self,
        run_id: &str,
        headline: &Headline,
        cross: Option<&str>,
    ) -> DbResult<()> {
        sqlx::query(
            "UPDATE runs SET status = $4, stage = '', error = NULL, headline = $1, cross_summary = $2 \
             WHERE id = $3 AND uploading = 0",
        )
        .bind(serde_json::to_string(headline).unwrap_or_default())
        .bind(cross.map(str::to_string))
        .bind(run_id)
        .bind(RunStatus::Done.as_str())
        .execute(&self.pool)
        .await
        .map(|_| ())
    }

    /// Sets the "analyzing k/n ranks" words of a multi-rank run.
    pub async fn set_rank_stage(&self, run_id: &str, done: i64, all: i64) -> DbResult<()> {
        sqlx::query("UPDATE runs SET stage = $1 WHERE id = $2 AND status <> $3")
            .bind(format!("analyzing {done}/{all} ranks"))
            .bind(run_id)
            .bind(RunStatus::Done.as_str())
            .execute(&self.pool)
            .await
            .map(|_| ())
    }
}

pub(super) async fn insert_trace(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    run_id: &str,
    t: &NewTrace,
) -> DbResult<()> {
    let now = now_ms();
    sqlx::query(
        "INSERT INTO traces (run_id, rank, file_name, blob_key, bytes, sha256, encoding, status, progress_bytes, analyses) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, 0)",
    )
    .bind(run_id)
    .bind(t.rank)
    .bind(&t.file_name)
    .bind(&t.blob_key)
    .bind(t.bytes)
    .bind(&t.sha256)
    .bind(t.encoding.as_str())
    .bind(RunStatus::Queued.as_str())
    .execute(&mut **tx)
    .await?;
    enqueue_analysis(tx, run_id, t.rank, now).await?;
    Ok(())
}
