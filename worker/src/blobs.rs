//! Trace blobs, through the `object_store` crate: a local folder by default,
//! S3-compatible storage with `s3://bucket/prefix`.
//!
//! Writes are atomic: object_store stages local writes under a temporary
//! name and renames on completion, and S3 multipart uploads only appear when
//! completed. A process killed mid-write can leave a staging file (local) or
//! an incomplete multipart upload (S3, cleaned by the bucket's lifecycle
//! rules); [`Blobs::sweep_orphans`] removes local staging files and objects of
//! runs that do not exist once they are older than a grace period.

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kinetoscope_trace::import::{head_needs_more, sniff};
use kinetoscope_types::Encoding;
use object_store::buffered::BufWriter;
use object_store::path::Path as StorePath;
use object_store::{GetResultPayload, ObjectStore};
use sha2::{Digest, Sha256};
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

pub use object_store::Error as BlobError;

/// The blob store handle (cheap to clone).
#[derive(Clone)]
pub struct Blobs {
    store: Arc<dyn ObjectStore>,
    /// The folder, for a local store.
    local_root: Option<PathBuf>,
    description: String,
}

/// The key of a run's trace for one rank.
pub fn trace_key(run_id: &str, rank: i64, suffix: &str) -> String {
    format!("runs/{run_id}/{rank}.{suffix}")
}

impl Blobs {
    /// Opens `s3://bucket[/prefix]` (credentials and endpoint from the usual
    /// `AWS_*` environment variables) or a local folder (created if needed).
    pub fn open(spec: &str) -> Result<Blobs, BlobError> {
        if let Some(rest) = spec.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let s3 = object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .build()?;
            let store: Arc<dyn ObjectStore> = if prefix.trim_matches('/').is_empty() {
                Arc::new(s3)
            } else {
                Arc::new(object_store::prefix::PrefixStore::new(
                    s3,
                    prefix.trim_matches('/'),
                ))
            };
            return Ok(Blobs {
                store,
                local_root: None,
                description: spec.to_string(),
            });
        }
        let root = PathBuf::from(spec.strip_prefix("file://").unwrap_or(spec));
        std::fs::create_dir_all(&root).map_err(|e| BlobError::Generic {
            store: "local",
            source: Box::new(e),
        })?;
        let root = root.canonicalize().map_err(|e| BlobError::Generic {
            store: "local",
            source: Box::new(e),
        })?;
        let store = object_store::local::LocalFileSystem::new_with_prefix(&root)?;
        Ok(Blobs {
            store: Arc::new(store),
            description: root.display().to_string(),
            local_root: Some(root),
        })
    }

    /// Where the blobs live, for logs.
    pub fn describe(&self) -> &str {
        &self.description
    }

    /// Starts an atomic streaming write of `key`, hashing as it goes.
    pub fn writer(&self, key: &str) -> BlobWriter {
        BlobWriter {
            inner: BufWriter::with_capacity(self.store.clone(), StorePath::from(key), 8 << 20),
            hasher: Sha256::new(),
            bytes: 0,
            local_path: self.local_root.as_ref().map(|r| r.join(key)),
        }
    }

    /// Opens a blob for blocking, sequential reading (the analysis runs on a
    /// blocking thread). Local files are read directly; remote objects are
    /// streamed through a bounded channel.
    pub async fn reader(&self, key: &str) -> Result<Box<dyn Read + Send>, BlobError> {
        let got = self.store.get(&StorePath::from(key)).await?;
        match got.payload {
            GetResultPayload::File(file, _) => Ok(Box::new(file)),
            GetResultPayload::Stream(stream) => {
                let (tx, rx) = std::sync::mpsc::sync_channel::<io::Result<Bytes>>(8);
                tokio::spawn(async move {
                    let mut stream = stream;
                    while let Some(item) = stream.next().await {
                        let item = item.map_err(io::Error::other);
                        let stop = item.is_err();
                        if tx.send(item).is_err() || stop {
                            break;
                        }
                    }
                });
                Ok(Box::new(ChannelReader {
                    rx,
                    current: Bytes::new(),
                }))
            }
        }
    }

    /// The blob's size and its bytes as a stream (downloads).
    pub async fn stream(
        &self,
        key: &str,
    ) -> Result<(u64, BoxStream<'static, Result<Bytes, BlobError>>), BlobError> {
        let got = self.store.get(&StorePath::from(key)).await?;
        let size = got.meta.size as u64;
        Ok((size, got.into_stream()))
    }

    /// Deletes a blob; a missing blob is not an error.
    pub async fn delete(&self, key: &str) -> Result<(), BlobError> {
        match self.store.delete(&StorePath::from(key)).await {
            Ok(()) | Err(BlobError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Reads a whole blob into memory (artifacts: tens of MB at most).
    pub async fn get(&self, key: &str) -> Result<Bytes, BlobError> {
        self.store.get(&StorePath::from(key)).await?.bytes().await
    }

    /// Writes a whole blob from memory (artifacts, tests).
    pub async fn put(&self, key: &str, data: Bytes) -> Result<(), BlobError> {
        self.store
            .put(&StorePath::from(key), data.into())
            .await
            .map(|_| ())
    }

    /// Deletes the blobs of a run whose rows are deleted (the keys
    /// [`crate::db::Db::delete_run`] returns), then its empty folders. A
    /// blob that cannot be deleted is logged; the orphan sweep removes it.
    pub async fn delete_run_blobs(&self, run_id: &str, keys: Vec<String>) {
        for key in keys {
            if let Err(e) = self.delete(&key).await {
                tracing::warn!(%key, error = %e, "could not delete a blob");
            }
        }
        self.remove_empty_run_folders(run_id);
    }

    /// Removes the empty folders a deleted run leaves in a local store
    /// (object stores have no folders; nothing to do there).
    pub fn remove_empty_run_folders(&self, run_id: &str) {
        fn prune(dir: &std::path::Path) -> bool {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return false;
            };
            let mut empty = true;
            for e in entries.flatten() {
                let p = e.path();
                if !(p.is_dir() && prune(&p)) {
                    empty = false;
                }
            }
            empty && std::fs::remove_dir(dir).is_ok()
        }
        if let Some(root) = &self.local_root {
            prune(&root.join("runs").join(run_id));
            prune(&root.join("artifacts").join(run_id));
        }
    }

    /// Deletes blobs of runs for which `run_exists` says no, and local staging
    /// files left by interrupted writes, when older than `min_age`. Returns
    /// how many were removed.
    pub async fn sweep_orphans<F, Fut>(
        &self,
        min_age: Duration,
        run_exists: F,
    ) -> Result<usize, BlobError>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let cutoff = chrono::Utc::now() - chrono::Duration::from_std(min_age).unwrap_or_default();
        let mut removed = 0;
        let mut doomed = Vec::new();
        // Traces live under runs/{run}/, analysis artifacts under artifacts/{run}/.
        for prefix in ["runs", "artifacts"] {
            let mut listing = self.store.list(Some(&StorePath::from(prefix)));
            while let Some(meta) = listing.next().await {
                let meta = meta?;
                let key = meta.location.to_string();
                let Some(run_id) = key
                    .strip_prefix(prefix)
                    .and_then(|r| r.strip_prefix('/'))
                    .and_then(|r| r.split('/').next())
                else {
                    continue;
                };
                if meta.last_modified <= cutoff && !run_exists(run_id.to_string()).await {
                    doomed.push(meta.location.clone());
                }
            }
        }
        for path in doomed {
            self.store.delete(&path).await?;
            removed += 1;
        }
        if let Some(root) = &self.local_root {
            removed += sweep_local_staging(&root.join("runs"), min_age);
        }
        Ok(removed)
    }
}

/// Removes `name#N` staging files of interrupted local writes and empty run
/// folders.
fn sweep_local_staging(dir: &std::path::Path, min_age: Duration) -> usize {
    let mut removed = 0;
    let Ok(runs) = std::fs::read_dir(dir) else {
        return 0;
    };
    for run in runs.flatten() {
        let Ok(files) = std::fs::read_dir(run.path()) else {
            continue;
        };
        for f in files.flatten() {
            let name = f.file_name().to_string_lossy().to_string();
            let old = f
                .metadata()
                .and_then(|m| m.modified())
                .map(|t| t.elapsed().unwrap_or_default() >= min_age)
                .unwrap_or(false);
            if name.contains('#') && old && std::fs::remove_file(f.path()).is_ok() {
                removed += 1;
            }
        }
        // Only succeeds when empty.
        let _ = std::fs::remove_dir(run.path());
    }
    removed
}

/// An in-progress blob write; nothing is visible until [`BlobWriter::finish`].
pub struct BlobWriter {
    inner: BufWriter,
    hasher: Sha256,
    bytes: u64,
    /// The final file of a local write, to flush to disk on completion.
    local_path: Option<PathBuf>,
}

impl BlobWriter {
    /// Appends bytes.
    pub async fn write(&mut self, chunk: &[u8]) -> io::Result<()> {
        self.hasher.update(chunk);
        self.bytes += chunk.len() as u64;
        self.inner.write_all(chunk).await
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Completes the write (durable and visible from now on); returns the
    /// size and the sha256 in hex.
    pub async fn finish(mut self) -> io::Result<(u64, String)> {
        if let Err(e) = self.inner.shutdown().await {
            // A failed final write (a full disk, say): object_store has
            // removed its staged file (abort would panic after shutdown);
            // the run's folder goes too.
            remove_if_empty(self.folder()).await;
            return Err(e);
        }
        if let Some(path) = self.local_path.take() {
            // object_store renames the staged file into place but does not
            // fsync; do it (file, then folder) so "stored" means durable.
            tokio::task::spawn_blocking(move || -> io::Result<()> {
                std::fs::File::open(&path)?.sync_all()?;
                if let Some(dir) = path.parent() {
                    std::fs::File::open(dir)?.sync_all()?;
                }
                Ok(())
            })
            .await
            .map_err(io::Error::other)??;
        }
        Ok((self.bytes, hex(&self.hasher.finalize())))
    }

    /// Abandons the write, removing staged data.
    pub async fn abort(mut self) {
        let _ = self.inner.abort().await;
        remove_if_empty(self.folder()).await;
    }

    /// A local write also made its run's folder: it is to be removed when
    /// nothing else is in it.
    fn folder(&self) -> Option<PathBuf> {
        self.local_path
            .as_ref()
            .and_then(|p| p.parent())
            .map(std::path::Path::to_path_buf)
    }
}

/// Removes a folder if it is empty (remove_dir fails on one that is not).
/// An aborted write's staged file may still be going when `abort` returns
/// (object_store removes it from a blocking task; seen as an empty run
/// folder left behind by a failed upload on a full disk): a folder that is
/// not empty yet is tried again for up to a fifth of a second.
async fn remove_if_empty(folder: Option<PathBuf>) {
    let Some(f) = folder else { return };
    for _ in 0..20 {
        match tokio::fs::remove_dir(&f).await {
            Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            _ => return,
        }
    }
}

/// A trace stored in the blob store.
#[derive(Clone, Debug)]
pub struct StoredTrace {
    /// Its key ([`trace_key`]).
    pub key: String,
    /// Bytes stored (as received, compressed or not).
    pub bytes: u64,
    /// Sha256 of those bytes, in hex.
    pub sha256: String,
    /// How it is compressed, from its first bytes.
    pub encoding: Encoding,
}

/// Why a trace was not stored (nothing is left behind in any case).
#[derive(Debug)]
pub enum StoreError {
    /// The first bytes are not a trace in any format we read.
    NotATrace(String),
    /// More bytes than the budget.
    TooLarge,
    /// Reading the input failed (a client went away, a file vanished).
    Read(String),
    /// Writing to the blob store failed.
    Write(String),
    /// The blob store is out of space (or quota); nothing was kept.
    Full(String),
}

/// Whether a write failed because the storage is full: `ENOSPC` or `EDQUOT`
/// anywhere in the error's chain (object_store wraps the file system's
/// error), or an error that says so in words.
pub fn is_storage_full(e: &io::Error) -> bool {
    fn full(e: &io::Error) -> bool {
        matches!(
            e.kind(),
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
        ) || matches!(e.raw_os_error(), Some(28) | Some(122))
    }
    if full(e) {
        return true;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = e.get_ref().map(|r| r as _);
    while let Some(s) = source {
        if s.downcast_ref::<io::Error>().is_some_and(full) {
            return true;
        }
        source = s.source();
    }
    let text = e.to_string();
    text.contains("No space left on device") || text.contains("Disk quota exceeded")
}

impl StoreError {
    /// A failed write, told apart when the storage is full.
    fn write(e: io::Error) -> StoreError {
        if is_storage_full(&e) {
            StoreError::Full(e.to_string())
        } else {
            StoreError::Write(e.to_string())
        }
    }
}

impl Blobs {
    /// Streams one trace into the blob store as run `run_id`'s rank `rank`:
    /// reads its head by the one rule ([`head_needs_more`]), detects its
    /// encoding, then writes every byte while hashing and counting them, up
    /// to `budget` bytes. The one way traces enter the store: uploads and
    /// captures both call it.
    pub async fn store_trace<S, E>(
        &self,
        run_id: &str,
        rank: i64,
        stream: S,
        budget: u64,
    ) -> Result<StoredTrace, StoreError>
    where
        S: Stream<Item = Result<Bytes, E>>,
        E: std::fmt::Display,
    {
        let mut stream = std::pin::pin!(stream);
        let mut head: Vec<u8> = Vec::new();
        let mut ended = false;
        while head_needs_more(&head) {
            match stream.next().await {
                Some(Ok(chunk)) => head.extend_from_slice(&chunk),
                Some(Err(e)) => return Err(StoreError::Read(e.to_string())),
                None => {
                    ended = true;
                    break;
                }
            }
        }
        let encoding = sniff(&head).map_err(StoreError::NotATrace)?;
        if head.len() as u64 > budget {
            return Err(StoreError::TooLarge);
        }
        let key = trace_key(run_id, rank, encoding.suffix());
        let mut writer = self.writer(&key);
        let mut failure = writer.write(&head).await.err().map(StoreError::write);
        while failure.is_none() && !ended {
            match stream.next().await {
                Some(Ok(chunk)) => {
                    if writer.bytes() + chunk.len() as u64 > budget {
                        failure = Some(StoreError::TooLarge);
                    } else if let Err(e) = writer.write(&chunk).await {
                        failure = Some(StoreError::write(e));
                    }
                }
                Some(Err(e)) => failure = Some(StoreError::Read(e.to_string())),
                None => ended = true,
            }
        }
        if let Some(e) = failure {
            writer.abort().await;
            return Err(e);
        }
        let (bytes, sha256) = writer.finish().await.map_err(StoreError::write)?;
        Ok(StoredTrace {
            key,
            bytes,
            sha256,
            encoding,
        })
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Sha256 of bytes, in hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A blocking reader over chunks sent by an async task.
struct ChannelReader {
    rx: std::sync::mpsc::Receiver<io::Result<Bytes>>,
    current: Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.recv() {
                Ok(chunk) => self.current = chunk?,
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current = self.current.slice(n..);
        Ok(n)
    }
}
