//! Run metadata, summaries, the job queue and tokens, in SQLite (the embedded
//! default) or PostgreSQL (scale-out), through sqlx's `Any` driver.
//!
//! Both backends run the same SQL text (`$N` placeholders work in both); the
//! one difference is the claim query, which adds `FOR UPDATE SKIP LOCKED` on
//! PostgreSQL so that concurrent workers never claim the same job. On SQLite
//! a claim is a single `UPDATE` statement, which SQLite serializes.
//!
//! Times are Unix milliseconds; JSON values are stored as text.
//!
//! One module a resource, each adding its methods to [`Db`]: `runs` (runs,
//! their traces and summaries), `jobs` (the queue: claims, leases,
//! failures), `uploads` (a multipart upload's run while its files arrive),
//! `artifacts` (what a finished analysis stores), `baselines` (a run
//! by name, for the regression gate) and `tokens`.

mod artifacts;
mod baselines;
mod jobs;
mod runs;
mod tokens;
mod uploads;

pub use artifacts::{ArtifactRecord, NewArtifact};
pub use baselines::BaselineRecord;
pub use jobs::Job;
pub use kinetoscope_types::TokenScope;
pub use runs::{
    GroupOutcome, Headline, NewRun, NewTrace, RunFilter, RunPatch, RunRecord, TraceRecord,
};
pub use tokens::{Token, TokenError};

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

/// A column holding one of a fixed set of words, read as its type.
fn word<T: std::str::FromStr<Err = String>>(row: &AnyRow, column: &str) -> DbResult<T> {
    let text: String = row.try_get(column)?;
    text.parse().map_err(|e: String| DbError::Decode(e.into()))
}

/// Whether a database error says the storage is full: the disk under
/// SQLite (an I/O error of `ENOSPC`, or `SQLITE_FULL`, 13) or PostgreSQL's
/// `disk_full` (53100). The one place that knows each backend's codes; the
/// blob store's rule is [`crate::blobs::is_storage_full`].
pub fn is_storage_full(e: &DbError) -> bool {
    match e {
        DbError::Io(io) => crate::blobs::is_storage_full(io),
        DbError::Database(d) => matches!(d.code().as_deref(), Some("13") | Some("53100")),
        _ => false,
    }
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
}
