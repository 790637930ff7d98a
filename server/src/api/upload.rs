//! `POST /api/runs`: streaming uploads.
//!
//! The body is the trace itself (`curl --data-binary @trace.json.gz`), or a
//! `multipart/form-data` form whose file fields are the ranks of one run.
//! Bytes stream into the blob store while being hashed and counted; the run
//! becomes visible (and `201` is sent) only once every file is stored, so an
//! interrupted upload leaves no run behind. A form's ranks are analyzed as
//! they arrive: its run exists, hidden, from its first stored file
//! ([`worker::db::Db::open_upload`]).

use super::{new_id, ApiError, ApiResult, AppState, Writer, Q};
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use bytes::Bytes;
use futures::Stream;
use kinetoscope_types::{Created, RunSource, RunStatus};
use serde::Deserialize;
use worker::blobs::StoreError;
use worker::db::{GroupOutcome, NewRun, NewTrace};

/// The upload's query string.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct UploadQuery {
    /// Name.
    pub name: Option<String>,
    /// Comma-separated tags.
    pub tags: Option<String>,
    /// An upload group: the ranks of one profiling cycle, each uploaded on
    /// its own (by the processes of a distributed job, or a watched
    /// folder), gather into one run under this key ([`GROUP_WINDOW_MS`]).
    pub group: Option<String>,
    /// The rank of a grouped upload's trace.
    pub rank: Option<i64>,
    /// The file's name, for a raw (not multipart) body.
    pub file: Option<String>,
}

/// How long an upload group gathers ranks: a key first used longer ago
/// than this starts a new run (a job that reuses its keys on another day
/// gets a new run).
pub const GROUP_WINDOW_MS: i64 = 60 * 60 * 1000;

/// Longest upload group key.
pub const MAX_GROUP: usize = 200;

/// The group a key names for the token that uploads: a group is bound to
/// the token that opened it, so an upload token that learns (or guesses)
/// another's key opens a group of its own rather than adding a rank to,
/// or pre-claiming a rank of, the other's run. On an open server anyone may
/// write anyway, and ranks from several hosts must meet: the key alone.
fn group_of(token: Option<&str>, key: &str) -> String {
    match token {
        Some(name) => format!("{key}@token:{name}"),
        None => key.to_string(),
    }
}

/// Checks an upload group's key and rank.
fn check_group(q: &UploadQuery) -> ApiResult<Option<(String, i64)>> {
    let Some(group) = q.group.as_deref().filter(|g| !g.is_empty()) else {
        if q.rank.is_some() {
            return Err(ApiError::BadRequest(
                "rank goes with group: name the upload group the rank belongs to".into(),
            ));
        }
        return Ok(None);
    };
    if group.len() > MAX_GROUP
        || !group
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'/'))
    {
        return Err(ApiError::BadRequest(format!(
            "an upload group has 1 to {MAX_GROUP} characters of letters, digits, '-', '_', '.', ':' and '/'"
        )));
    }
    let rank = q.rank.ok_or_else(|| {
        ApiError::BadRequest("a grouped upload names its rank (`&rank=N`)".into())
    })?;
    if !(0..MAX_FILES as i64).contains(&rank) {
        return Err(ApiError::BadRequest(format!(
            "rank must be between 0 and {}",
            MAX_FILES - 1
        )));
    }
    Ok(Some((group.to_string(), rank)))
}

/// Longest run name accepted.
pub const MAX_NAME: usize = 200;
/// Most tags and longest tag accepted.
pub const MAX_TAGS: usize = 32;
/// Largest tag.
pub const MAX_TAG: usize = 64;
/// Most files (ranks) in one upload.
pub const MAX_FILES: usize = 1024;

/// Checks and cleans a run name.
pub fn clean_name(name: &str) -> ApiResult<String> {
    let name = name.trim();
    if name.chars().count() > MAX_NAME {
        return Err(ApiError::BadRequest(format!(
            "the name is longer than {MAX_NAME} characters"
        )));
    }
    if name.chars().any(hidden_char) {
        return Err(ApiError::BadRequest(
            "the name contains control, bidirectional-override or zero-width characters".into(),
        ));
    }
    Ok(name.to_string())
}

/// Characters no name, tag or note may hold: the one rule of hidden
/// characters ([`kinetoscope_types::escape::hidden_char`]: controls,
/// bidirectional marks, zero-width and other invisible characters, tag
/// characters). A note may hold line breaks and tabs ([`clean_note`]).
pub fn hidden_char(c: char) -> bool {
    kinetoscope_types::escape::hidden_char(c)
}

/// Checks a note: at most 10,000 characters, no hidden characters but line
/// breaks and tabs.
pub fn clean_note(note: &str) -> ApiResult<()> {
    if note.chars().count() > 10_000 {
        return Err(ApiError::BadRequest(
            "the note is longer than 10000 characters".into(),
        ));
    }
    if note
        .chars()
        .any(|c| hidden_char(c) && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err(ApiError::BadRequest(
            "the note contains control, bidirectional-override or zero-width characters".into(),
        ));
    }
    Ok(())
}

/// Checks and cleans tags.
pub fn clean_tags<'a>(tags: impl Iterator<Item = &'a str>) -> ApiResult<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for t in tags.map(str::trim).filter(|t| !t.is_empty()) {
        if t.chars().count() > MAX_TAG || t.chars().any(hidden_char) {
            return Err(ApiError::BadRequest(format!(
                "tags must be at most {MAX_TAG} characters without control, \
                 bidirectional-override or zero-width characters"
            )));
        }
        if !out.iter().any(|o| o == t) {
            out.push(t.to_string());
        }
    }
    if out.len() > MAX_TAGS {
        return Err(ApiError::BadRequest(format!("at most {MAX_TAGS} tags")));
    }
    Ok(out)
}

/// Handles `POST /api/runs`.
pub async fn create(
    State(state): State<AppState>,
    writer: Result<Writer, ApiError>,
    headers: HeaderMap,
    Q(q): Q<UploadQuery>,
    req: Request,
) -> ApiResult<impl IntoResponse> {
    // An unauthorized or over-the-cap upload counts as a rejected one too.
    let client = super::limits::client_ip(req.extensions());
    let result = match writer.and_then(|w| state.upload_slots.acquire(client).map(|s| (w, s))) {
        // The slot is held until the body is stored.
        Ok((Writer(token), _slot)) => {
            create_inner(&state, token.as_deref(), &headers, q, req).await
        }
        Err(e) => {
            super::drain(req.into_body()).await;
            Err(e)
        }
    };
    if result.is_err() {
        worker::metrics::upload_rejected();
    }
    result
}

async fn create_inner(
    state: &AppState,
    token: Option<&str>,
    headers: &HeaderMap,
    q: UploadQuery,
    req: Request,
) -> ApiResult<impl IntoResponse> {
    let checked = clean_name(q.name.as_deref().unwrap_or("")).and_then(|name| {
        let tags = clean_tags(q.tags.as_deref().unwrap_or("").split(','))?;
        Ok((name, tags, check_group(&q)?))
    });
    let (mut name, tags, group) = match checked {
        Ok(v) => v,
        Err(e) => {
            // Refused before the body is read: read (and drop) it first, or
            // hyper closes the connection under a client that pooled it
            // (its next request is cut off: a broken pipe, once in CI).
            super::drain(req.into_body()).await;
            return Err(e);
        }
    };
    if let Some(len) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
    {
        if len > state.max_upload_bytes {
            return Err(too_large(state.max_upload_bytes));
        }
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let id = new_id();
    let mut stored: Vec<NewTrace> = Vec::new();
    let multipart = content_type.starts_with("multipart/form-data");
    if multipart && group.is_some() {
        super::drain(req.into_body()).await;
        return Err(ApiError::BadRequest(
            "a grouped upload is one rank's trace as the body, not a form".into(),
        ));
    }
    let raw_name = q.file.as_deref().map(str::trim).filter(|f| !f.is_empty());
    if multipart {
        // Each file is a rank, analyzed as soon as it is stored.
        let opening = Opening { name, tags };
        let outcome = match store_multipart(state, &id, req, &mut stored, &opening).await {
            Ok(()) if stored.is_empty() => {
                Err(ApiError::BadRequest("the form has no file fields".into()))
            }
            Ok(()) => close_upload(state, &id, &stored, &opening).await,
            Err(e) => Err(e),
        };
        if let Err(e) = outcome {
            forget_upload(state, &id, &stored).await;
            return Err(e);
        }
        return Ok(created(state, id, &stored));
    }
    // Any other content type is the raw trace: what it is comes from its
    // bytes (curl --data-binary says x-www-form-urlencoded, for one).
    let budget = state.max_upload_bytes;
    let outcome = store_stream(
        state,
        &id,
        group.as_ref().map_or(0, |g| g.1),
        raw_name.unwrap_or("trace"),
        req.into_body().into_data_stream(),
        budget,
    )
    .await
    .map(|t| stored.push(t));
    if let Err(e) = outcome {
        discard(state, &stored).await;
        return Err(e);
    }
    if name.is_empty() {
        name = default_name(&stored[0].file_name);
    }
    let run = NewRun {
        id: id.clone(),
        name,
        tags,
        source: RunSource::Upload,
        capture: None,
    };
    let id = match &group {
        None => state.db.create_run(&run, &stored).await.map(|()| id),
        Some((key, rank)) => {
            match state
                .db
                .create_run_in_group(&run, &stored[0], &group_of(token, key), GROUP_WINDOW_MS)
                .await
            {
                Ok(GroupOutcome::Created(id)) | Ok(GroupOutcome::Joined(id)) => Ok(id),
                Ok(GroupOutcome::RankTaken(owner)) => {
                    discard(state, &stored).await;
                    return Err(ApiError::Conflict(format!(
                        "rank {rank} of upload group {key:?} is already in run {owner}: \
                         nothing was stored"
                    )));
                }
                Err(e) => Err(e),
            }
        }
    };
    match id {
        Ok(id) => Ok(created(state, id, &stored)),
        Err(e) => {
            discard(state, &stored).await;
            Err(e.into())
        }
    }
}

/// The `201` of a stored upload (its run's analysis queued).
fn created(state: &AppState, id: String, stored: &[NewTrace]) -> impl IntoResponse {
    state.wake.notify_waiters();
    let total: i64 = stored.iter().map(|t| t.bytes).sum();
    worker::metrics::upload_accepted(total as u64);
    tracing::info!(run = %id, files = stored.len(), bytes = total, "upload stored");
    let url = format!("/runs/{id}");
    (
        StatusCode::CREATED,
        [(header::LOCATION, url.clone())],
        Json(Created {
            id,
            url,
            status: RunStatus::Queued,
            run_id: None,
        }),
    )
}

/// What a multipart upload's run is created with, once its first file is
/// stored (an empty name becomes that file's).
struct Opening {
    name: String,
    tags: Vec<String>,
}

/// Adds one stored file of a multipart upload to its run: the first opens
/// the run (hidden until the upload closes), each one queues its rank's
/// analysis at once, so ranks are analyzed while the next ones upload.
async fn add_to_upload(
    state: &AppState,
    id: &str,
    trace: &NewTrace,
    opening: &Opening,
) -> ApiResult<()> {
    let added = if trace.rank == 0 {
        let name = if opening.name.is_empty() {
            default_name(&trace.file_name)
        } else {
            opening.name.clone()
        };
        let run = NewRun {
            id: id.to_string(),
            name,
            tags: opening.tags.clone(),
            source: RunSource::Upload,
            capture: None,
        };
        state.db.open_upload(&run, trace).await
    } else {
        state.db.add_upload(id, trace).await
    };
    added?;
    state.wake.notify_waiters();
    Ok(())
}

/// Closes a multipart upload once every file is stored: ranks follow the
/// rank in the files' names (`rank3`, `-TP-3`), then the names, as files
/// may come in any order (a file picker's, say); a file that changes rank
/// keeps its analysis, or has it queued again under its new rank. Then the run shows, and it is done
/// at once if its ranks were all analyzed during the upload.
async fn close_upload(
    state: &AppState,
    id: &str,
    stored: &[NewTrace],
    opening: &Opening,
) -> ApiResult<()> {
    let mut order: Vec<usize> = (0..stored.len()).collect();
    order.sort_by_key(|&k| kinetoscope_trace::ranks::rank_key(&stored[k].file_name));
    let mut ranks = vec![0i64; stored.len()];
    for (rank, &k) in order.iter().enumerate() {
        ranks[k] = rank as i64;
    }
    // A run named after its file is named after rank 0's, as it was named
    // after the first file stored.
    let name = (opening.name.is_empty() && order[0] != 0)
        .then(|| default_name(&stored[order[0]].file_name));
    state.db.close_upload(id, &ranks, name.as_deref()).await?;
    state.wake.notify_waiters();
    // The cross-rank summary, when the workers finished every rank first
    // (they cannot complete an uploading run).
    let db = state.db.clone();
    let run = id.to_string();
    tokio::spawn(async move {
        if let Err(e) = worker::jobs::finish_run_if_complete(&db, &run).await {
            tracing::warn!(%run, error = %e, "could not finish a run after its upload");
        }
    });
    Ok(())
}

/// Removes what a failed multipart upload stored: its run (jobs, artifacts,
/// traces), if it was opened, and every blob.
async fn forget_upload(state: &AppState, id: &str, stored: &[NewTrace]) {
    if !stored.is_empty() {
        match state.db.delete_run(id).await {
            Ok(keys) => {
                state
                    .blobs
                    .delete_run_blobs(id, keys.unwrap_or_default())
                    .await
            }
            Err(e) => {
                tracing::warn!(run = %id, error = %e, "could not remove a failed upload's run")
            }
        }
    }
    discard(state, stored).await;
}

fn too_large(limit: u64) -> ApiError {
    ApiError::TooLarge(format!(
        "the upload is larger than the limit of {} bytes",
        limit
    ))
}

fn default_name(file: &str) -> String {
    let base = file.rsplit(['/', '\\']).next().unwrap_or(file);
    let base = base
        .trim_end_matches(".zst")
        .trim_end_matches(".gz")
        .trim_end_matches(".json")
        .trim_end_matches(".pt.trace");
    if base.is_empty() || base == "trace" {
        "trace".into()
    } else {
        base.chars().take(MAX_NAME).collect()
    }
}

async fn discard(state: &AppState, stored: &[NewTrace]) {
    for t in stored {
        if let Err(e) = state.blobs.delete(&t.blob_key).await {
            tracing::warn!(key = %t.blob_key, error = %e, "could not remove an abandoned upload");
        }
    }
}

async fn store_multipart(
    state: &AppState,
    id: &str,
    req: Request,
    stored: &mut Vec<NewTrace>,
    opening: &Opening,
) -> ApiResult<()> {
    let mut form = Multipart::from_request(req, &())
        .await
        .map_err(|e| ApiError::BadRequest(format!("bad multipart form: {}", e.body_text())))?;
    let mut budget = state.max_upload_bytes;
    loop {
        let field = match form.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                return Err(ApiError::BadRequest(format!(
                    "bad multipart form: {}",
                    e.body_text()
                )))
            }
        };
        let Some(file_name) = field.file_name().map(str::to_string) else {
            continue; // a plain form field
        };
        if stored.len() >= super::upload::MAX_FILES {
            return Err(ApiError::BadRequest(format!(
                "at most {MAX_FILES} files in one upload"
            )));
        }
        let rank = stored.len() as i64;
        let stream = futures::stream::unfold(field, |mut f| async move {
            match f.chunk().await {
                Ok(Some(c)) => Some((Ok(c), f)),
                Ok(None) => None,
                Err(e) => Some((Err(std::io::Error::other(e.body_text())), f)),
            }
        });
        let t = store_stream(state, id, rank, &file_name, stream, budget).await?;
        budget = budget.saturating_sub(t.bytes as u64);
        stored.push(t);
        add_to_upload(state, id, &stored[stored.len() - 1], opening).await?;
    }
    Ok(())
}

/// Streams one file into the blob store ([`worker::blobs::Blobs::store_trace`]).
async fn store_stream<S, E>(
    state: &AppState,
    id: &str,
    rank: i64,
    file_name: &str,
    stream: S,
    budget: u64,
) -> ApiResult<NewTrace>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: std::fmt::Display,
{
    let (stream, too_slow) = state.upload_pace.guard(stream);
    let t = state
        .blobs
        .store_trace(id, rank, stream, budget)
        .await
        .map_err(|e| match e {
            _ if too_slow.load(std::sync::atomic::Ordering::Relaxed) => state.upload_pace.error(),
            StoreError::NotATrace(why) => ApiError::BadRequest(format!(
                "{file_name}: {why}; upload a Kineto trace as .json, .json.gz or .json.zst"
            )),
            StoreError::TooLarge => too_large(state.max_upload_bytes),
            StoreError::Read(e) => ApiError::BadRequest(format!("the upload was interrupted: {e}")),
            StoreError::Write(e) => ApiError::Internal(format!("writing the blob failed: {e}")),
            StoreError::Full(e) => {
                tracing::error!(error = %e, "the blob store is full");
                ApiError::InsufficientStorage(
                    "the server's storage is full: nothing of this upload was kept; \
                     try again once space is freed (an operator must delete runs or grow the disk)"
                        .into(),
                )
            }
        })?;
    // A file name is shown (and may become the run's name): its hidden
    // characters become spaces.
    let file_name = if file_name == "trace" || file_name.is_empty() {
        format!("trace.{}", t.encoding.suffix())
    } else {
        file_name
            .chars()
            .take(255)
            .map(|c| if hidden_char(c) { ' ' } else { c })
            .collect::<String>()
            .trim()
            .to_string()
    };
    Ok(NewTrace {
        rank,
        file_name,
        blob_key: t.key,
        bytes: t.bytes as i64,
        sha256: t.sha256,
        encoding: t.encoding,
    })
}
