//! Run metadata, summaries, the job queue and tokens, in SQLite (the embedded
//! default) or PostgreSQL (scale-out), through sqlx's `Any` driver.
//!
//! Both backends run the same SQL text (`$N` placeholders work in both); the
//! one difference is the claim query, which adds `FOR UPDATE SKIP LOCKED` on
//! PostgreSQL so that concurrent workers never claim the same job. On SQLite
//! a claim is a single `UPDATE` statement, which SQLite serializes.
//!
//! Times are Unix milliseconds; JSON values are stored as text.

use kinetoscope_types::{ArtifactName, Encoding, JobKind, RunSource, RunStatus};
use serde::{Deserialize, Serialize};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Executor, Row};
use std::time::{SystemTime, UNIX_EPOCH};

pub use sqlx::Error as DbError;

/// Result of a database call.
pub type DbResult<T> = Result<T, DbError>;

/// Which database is behind the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Sqlite.
    Sqlite,
    /// Postgres.
    Postgres,
}

/// The database handle (cheap to clone).
#[derive(Clone)]
pub struct Db {
    pool: AnyPool,
    backend: Backend,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

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

/// Filters and paging for the runs list.
#[derive(Clone, Debug, Default)]
pub struct RunFilter {
    /// Substring of the name, case-insensitive.
    pub name: Option<String>,
    /// Tag.
    pub tag: Option<String>,
    /// Status.
    pub status: Option<RunStatus>,
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
}

const RUN_COLUMNS: &str = "r.id, r.name, r.tags, r.note, r.created_at, r.status, r.stage, r.error, r.source, \
     r.options, r.capture, r.headline, \
     CAST(COALESCE((SELECT SUM(t.progress_bytes) FROM traces t WHERE t.run_id = r.id), 0) AS BIGINT) AS progress_bytes, \
     CAST(COALESCE((SELECT SUM(t.bytes) FROM traces t WHERE t.run_id = r.id), 0) AS BIGINT) AS total_bytes";
// (PostgreSQL sums BIGINTs into NUMERIC; the casts keep both backends at BIGINT.)

const TRACE_COLUMNS: &str =
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
    })
}

fn trace_from_row(row: &AnyRow) -> DbResult<TraceRecord> {
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

fn artifact_from_row(row: &AnyRow) -> DbResult<ArtifactRecord> {
    Ok(ArtifactRecord {
        rank: row.try_get("rank")?,
        name: word(row, "name")?,
        blob_key: row.try_get("blob_key")?,
        bytes: row.try_get("bytes")?,
        analyzer_version: row.try_get("analyzer_version")?,
    })
}

/// A column holding one of a fixed set of words, read as its type.
fn word<T: std::str::FromStr<Err = String>>(row: &AnyRow, column: &str) -> DbResult<T> {
    let text: String = row.try_get(column)?;
    text.parse().map_err(|e: String| DbError::Decode(e.into()))
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
    /// Connects (creating a SQLite file and its folder if needed) and runs
    /// the migrations of the backend.
    pub async fn connect(url: &str) -> DbResult<Db> {
        sqlx::any::install_default_drivers();
        let (backend, url) = if let Some(rest) = url.strip_prefix("sqlite:") {
            let path = rest.trim_start_matches("//");
            let path = path.split('?').next().unwrap_or(path);
            if let Some(dir) = std::path::Path::new(path).parent() {
                if !dir.as_os_str().is_empty() {
                    std::fs::create_dir_all(dir).map_err(DbError::Io)?;
                }
            }
            let url = if url.contains("mode=") {
                url.to_string()
            } else if url.contains('?') {
                format!("{url}&mode=rwc")
            } else {
                format!("{url}?mode=rwc")
            };
            (Backend::Sqlite, url)
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            (Backend::Postgres, url.to_string())
        } else {
            return Err(DbError::Configuration(
                format!("unsupported DATABASE_URL scheme in {url:?}: use sqlite:// or postgres://")
                    .into(),
            ));
        };
        let pool = AnyPoolOptions::new()
            .max_connections(if backend == Backend::Sqlite { 8 } else { 16 })
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        // WAL lets readers proceed during writes; the busy
                        // timeout makes writers queue instead of failing.
                        conn.execute("PRAGMA journal_mode = WAL").await?;
                        conn.execute("PRAGMA busy_timeout = 15000").await?;
                        conn.execute("PRAGMA foreign_keys = ON").await?;
                        conn.execute("PRAGMA synchronous = NORMAL").await?;
                    }
                    Ok(())
                })
            })
            // A connection that comes back still inside a transaction is
            // closed, not pooled: closing rolls back and frees its locks.
            // Seen on SQLite with a full disk: a statement fails with
            // SQLITE_FULL, SQLite rolls the transaction back itself, sqlx's
            // ROLLBACK then fails and its depth stays 1, so the next
            // transaction on that connection is a SAVEPOINT whose rollback
            // ("ROLLBACK TO") leaves SQLite's transaction open, holding the
            // WAL write lock while the connection idles (RELIABILITY.md).
            .after_release(|conn, _| {
                Box::pin(async move { Ok(!sqlx::Connection::is_in_transaction(conn)) })
            })
            .before_acquire(|conn, _| {
                Box::pin(async move { Ok(!sqlx::Connection::is_in_transaction(conn)) })
            })
            .connect(&url)
            .await?;
        match backend {
            Backend::Sqlite => sqlx::migrate!("../migrations/sqlite").run(&pool).await?,
            Backend::Postgres => sqlx::migrate!("../migrations/postgres").run(&pool).await?,
        }
        Ok(Db { pool, backend })
    }

    /// Which database this is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> DbResult<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(|_| ())
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.pool.close().await
    }

    // ------------------------------------------------------------ runs

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
                 VALUES ($3, $1, 0, 'queued', $2, 1, $2, $2)",
            )
            .bind(&run.id)
            .bind(now)
            .bind(JobKind::Capture.as_str())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await
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
        row.as_ref().map(run_from_row).transpose()
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
        let mut conds: Vec<String> = Vec::new();
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
        let runs = rows
            .iter()
            .map(run_from_row)
            .collect::<DbResult<Vec<_>>>()?;
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
        sqlx::query("DELETE FROM jobs WHERE run_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
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

    // ------------------------------------------------------------ jobs

    /// Claims the oldest runnable job: a queued one whose time has come, or a
    /// running one whose lease expired (its worker died).
    pub async fn claim(&self, worker: &str, lease_ms: i64) -> DbResult<Option<Job>> {
        let now = now_ms();
        let lock = match self.backend {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        };
        let sql = format!(
            "UPDATE jobs SET state = 'running', worker = $1, lease_until = $2, attempts = attempts + 1, updated_at = $3 \
             WHERE id = (SELECT id FROM jobs \
                         WHERE (state = 'queued' AND run_after <= $3) OR (state = 'running' AND lease_until < $3) \
                         ORDER BY id LIMIT 1{lock}) \
             RETURNING id, kind, run_id, rank, attempts, max_attempts"
        );
        let row = sqlx::query(&sql)
            .bind(worker)
            .bind(now + lease_ms)
            .bind(now)
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
            "UPDATE jobs SET lease_until = $1, updated_at = $2 WHERE id = $3 AND worker = $4 AND state = 'running'",
        )
        .bind(now + lease_ms)
        .bind(now)
        .bind(job.id)
        .bind(&job.worker)
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
        sqlx::query("UPDATE traces SET status = $3, progress_bytes = 0 WHERE run_id = $1 AND rank = $2 AND status <> $4")
            .bind(&job.run_id)
            .bind(job.rank)
            .bind(RunStatus::Analyzing.as_str())
            .bind(RunStatus::Done.as_str())
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
            "SELECT id FROM runs WHERE status = $1 \
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
            "UPDATE runs SET status = $4, stage = '', error = NULL, headline = $1, cross_summary = $2 WHERE id = $3",
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
                sqlx::query(
                    "UPDATE jobs SET state = 'queued', run_after = $1, error = $2, lease_until = NULL, updated_at = $3 \
                     WHERE id = $4 AND worker = $5 AND state = 'running'",
                )
                .bind(now + delay)
                .bind(reason)
                .bind(now)
                .bind(job.id)
                .bind(&job.worker)
                .execute(&mut *tx)
                .await?;
                sqlx::query("UPDATE traces SET status = $4, error = $1 WHERE run_id = $2 AND rank = $3 AND status <> $5")
                    .bind(reason)
                    .bind(&job.run_id)
                    .bind(job.rank)
                    .bind(RunStatus::Queued.as_str())
                    .bind(RunStatus::Done.as_str())
                    .execute(&mut *tx)
                    .await?;
            }
            None => {
                let r = sqlx::query(
                    "UPDATE jobs SET state = 'failed', error = $1, lease_until = NULL, updated_at = $2 \
                     WHERE id = $3 AND worker = $4 AND state = 'running'",
                )
                .bind(reason)
                .bind(now)
                .bind(job.id)
                .bind(&job.worker)
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
    pub async fn job_counts(&self) -> DbResult<Vec<(String, i64)>> {
        let rows = sqlx::query("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("state")?, r.try_get("n")?)))
            .collect()
    }

    // ------------------------------------------------------------ tokens

    /// Stores a token's hash under a name, with its scope and optional
    /// expiry (ms since the epoch). Fails with [`TokenError::NameTaken`]
    /// when a live (unrevoked) token of that name exists: names are how
    /// tokens are revoked.
    pub async fn add_token(
        &self,
        id: &str,
        name: &str,
        hash: &str,
        scope: TokenScope,
        expires_at: Option<i64>,
    ) -> Result<(), TokenError> {
        // One statement, not a read then a write in a transaction: SQLite
        // cannot upgrade a reader to a writer after a concurrent write (a
        // running server's worker), and fails at once instead of waiting.
        let added = sqlx::query(
            "INSERT INTO tokens (id, name, hash, created_at, scope, expires_at) \
             SELECT $1, $2, $3, $4, $5, $6 \
             WHERE NOT EXISTS (SELECT 1 FROM tokens WHERE name = $2 AND revoked_at IS NULL)",
        )
        .bind(id)
        .bind(name)
        .bind(hash)
        .bind(now_ms())
        .bind(scope.as_str())
        .bind(expires_at)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if added == 0 {
            return Err(TokenError::NameTaken(name.to_string()));
        }
        Ok(())
    }

    /// Whether any token was ever created (then writes need one). Expired
    /// and revoked tokens count: a server that had tokens stays protected
    /// when they lapse or are revoked, so revoking only takes access away.
    pub async fn tokens_exist(&self) -> DbResult<bool> {
        Ok(sqlx::query("SELECT id FROM tokens LIMIT 1")
            .fetch_optional(&self.pool)
            .await?
            .is_some())
    }

    /// The token with this hash, if any (revoked ones too: the caller
    /// refuses them), and records that it was used. The use is written at
    /// most once a minute a token: on a private server every read presents
    /// one, and a write per read would queue reads behind SQLite's one
    /// writer.
    pub async fn use_token(&self, hash: &str) -> DbResult<Option<Token>> {
        let row = sqlx::query(
            "SELECT name, hash, scope, created_at, expires_at, last_used_at, revoked_at \
             FROM tokens WHERE hash = $1",
        )
        .bind(hash)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let token = token_of(&row)?;
        let now = now_ms();
        if token.revoked_at.is_none() && token.last_used_at.is_none_or(|t| t < now - 60_000) {
            sqlx::query("UPDATE tokens SET last_used_at = $1 WHERE hash = $2")
                .bind(now)
                .bind(hash)
                .execute(&self.pool)
                .await?;
        }
        Ok(Some(token))
    }

    /// Every token, revoked ones included, oldest first (their hashes
    /// included; callers showing them to people leave the hash out).
    pub async fn list_tokens(&self) -> DbResult<Vec<Token>> {
        let rows = sqlx::query(
            "SELECT name, hash, scope, created_at, expires_at, last_used_at, revoked_at \
             FROM tokens ORDER BY created_at, name",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(token_of).collect()
    }

    /// Marks the live token of this name revoked (its row stays, so the
    /// server stays protected and `token list` shows it); whether there was
    /// one.
    pub async fn revoke_token(&self, name: &str) -> DbResult<bool> {
        Ok(
            sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL")
                .bind(now_ms())
                .bind(name)
                .execute(&self.pool)
                .await?
                .rows_affected()
                > 0,
        )
    }
}

/// What a token may do; each scope may do all that the ones before it may.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TokenScope {
    /// List and search runs (and, on a private server, read them): a viewer.
    Read,
    /// Create runs (uploads) and captures: what a CI job needs.
    Upload,
    /// Everything `Upload` may, plus edit, delete and re-analyze runs.
    Admin,
}

impl TokenScope {
    /// The stored and command-line spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenScope::Read => "read",
            TokenScope::Upload => "upload",
            TokenScope::Admin => "admin",
        }
    }

    /// Parses the stored and command-line spelling.
    pub fn parse(s: &str) -> Option<TokenScope> {
        match s {
            "read" => Some(TokenScope::Read),
            "upload" => Some(TokenScope::Upload),
            "admin" => Some(TokenScope::Admin),
            _ => None,
        }
    }
}

/// A stored token (its secret is never stored, only its sha256).
#[derive(Clone, Debug)]
pub struct Token {
    /// The name it was created under; unique.
    pub name: String,
    /// sha256 hex of the secret.
    pub hash: String,
    /// What it may do.
    pub scope: TokenScope,
    /// Creation time, ms since the epoch.
    pub created_at: i64,
    /// When it stops being accepted, ms since the epoch.
    pub expires_at: Option<i64>,
    /// When a request last presented it, ms since the epoch.
    pub last_used_at: Option<i64>,
    /// When it was revoked, ms since the epoch: a revoked token is never
    /// accepted again.
    pub revoked_at: Option<i64>,
}

impl Token {
    /// Whether it is past its expiry at `now_ms`.
    pub fn expired(&self, now_ms: i64) -> bool {
        self.expires_at.is_some_and(|t| t <= now_ms)
    }
}

/// Why a token could not be created.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// A token of this name exists already.
    #[error("a token named {0:?} exists already (revoke it first)")]
    NameTaken(String),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
}

fn token_of(row: &AnyRow) -> DbResult<Token> {
    let scope: String = row.try_get("scope")?;
    Ok(Token {
        name: row.try_get("name")?,
        hash: row.try_get("hash")?,
        scope: TokenScope::parse(&scope)
            .ok_or_else(|| DbError::Decode(format!("unknown token scope {scope:?}").into()))?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
        last_used_at: row.try_get("last_used_at")?,
        revoked_at: row.try_get("revoked_at")?,
    })
}

/// Marks a job done if this worker still holds it (its lease was not taken
/// over). This check, in the transaction that stores the job's result, is
/// what makes a job complete at most once.
async fn complete_job(tx: &mut sqlx::Transaction<'_, sqlx::Any>, job: &Job) -> DbResult<bool> {
    let done = sqlx::query(
        "UPDATE jobs SET state = 'done', lease_until = NULL, error = NULL, updated_at = $1 \
         WHERE id = $2 AND worker = $3 AND state = 'running'",
    )
    .bind(now_ms())
    .bind(job.id)
    .bind(&job.worker)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

async fn insert_trace(
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

/// Queues an analysis unless one is already queued or running.
async fn enqueue_analysis(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    run_id: &str,
    rank: i64,
    now: i64,
) -> DbResult<u64> {
    let r = sqlx::query(
        "INSERT INTO jobs (kind, run_id, rank, state, run_after, max_attempts, created_at, updated_at) \
         VALUES ($4, $1, $2, 'queued', $3, 5, $3, $3) \
         ON CONFLICT (kind, run_id, rank) WHERE state IN ('queued', 'running') DO NOTHING",
    )
    .bind(run_id)
    .bind(rank)
    .bind(now)
    .bind(JobKind::Analyze.as_str())
    .execute(&mut **tx)
    .await?;
    Ok(r.rows_affected())
}
