//! Analysis artifacts: the named outputs of an analysis job, read by the
//! handlers through one interface whatever their storage. The summary is
//! kept in the database (read far more than written, served as stored
//! text); every other artifact (the timeline index, and the next ones) is
//! a blob under one key scheme, recorded in the `artifacts` table.

use crate::blobs::{BlobError, Blobs};
use crate::db::{Db, DbError};
use bytes::Bytes;
use kinetoscope_types::{ArtifactInfo, ArtifactName, StoredIn};

/// The one key scheme of artifact blobs: `artifacts/{run}/{rank}/...`,
/// beside the run's traces under `runs/{run}/` (the orphan sweep knows
/// both), by rank, name and analyzer version; the job and attempt make each write's key its own, so a worker
/// whose job was taken over can remove what it wrote without touching the
/// winner's.
pub fn artifact_key(
    run_id: &str,
    rank: i64,
    name: ArtifactName,
    version: u32,
    job: i64,
    attempt: i64,
) -> String {
    format!("artifacts/{run_id}/{rank}/{name}.v{version}.{job}-{attempt}.bin.zst")
}

/// Why an artifact could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// The database failed.
    #[error("database: {0}")]
    Db(#[from] DbError),
    /// The blob store failed.
    #[error("blob store: {0}")]
    Blob(#[from] BlobError),
}

/// Reads a run's artifacts, wherever they are kept.
#[derive(Clone)]
pub struct Artifacts {
    db: Db,
    blobs: Blobs,
}

impl Artifacts {
    /// Over a database and a blob store.
    pub fn new(db: Db, blobs: Blobs) -> Self {
        Artifacts { db, blobs }
    }

    /// One artifact's bytes (the summary as its JSON text), or `None` when
    /// the run, the rank or the artifact does not exist (yet).
    pub async fn read(
        &self,
        run_id: &str,
        rank: i64,
        name: ArtifactName,
    ) -> Result<Option<Bytes>, ArtifactError> {
        match name {
            ArtifactName::Summary => Ok(self.db.summary(run_id, rank).await?.map(Bytes::from)),
            _ => {
                let Some(rec) = self.db.artifact(run_id, rank, name).await? else {
                    return Ok(None);
                };
                let Some(key) = rec.blob_key else {
                    return Ok(None);
                };
                match self.blobs.get(&key).await {
                    Ok(b) => Ok(Some(b)),
                    Err(BlobError::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Every artifact of a run, by rank and name.
    pub async fn list(&self, run_id: &str) -> Result<Vec<ArtifactInfo>, ArtifactError> {
        Ok(self
            .db
            .artifacts(run_id)
            .await?
            .into_iter()
            .map(|a| ArtifactInfo {
                rank: a.rank,
                name: a.name,
                bytes: a.bytes.max(0) as u64,
                analyzer_version: a.analyzer_version as u32,
                stored_in: if a.blob_key.is_some() {
                    StoredIn::Blob
                } else {
                    StoredIn::Database
                },
            })
            .collect())
    }
}
