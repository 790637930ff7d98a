//! The runs API: list, get, edit, delete, summaries, table pages, download,
//! re-analysis. Everything is read from stored summaries.

use super::upload::{clean_name, clean_tags};
use super::{Admin, ApiError, ApiResult, AppState, JsonBody, RunId, Q};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use kinetoscope_types::*;
use serde::Deserialize;
use std::sync::Arc;
use worker::db::{RunFilter, RunPatch, RunRecord, TraceRecord};

/// Rows of the op and kernel tables sent with a run's view; the rest is paged.
pub const VIEW_ROWS: usize = 200;

/// Unix milliseconds as RFC 3339 UTC, to the second.
pub(crate) fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

/// The API form of a stored run.
pub fn run_info(r: &RunRecord, traces: &[TraceRecord]) -> RunInfo {
    let h = r.headline.clone().unwrap_or_default();
    RunInfo {
        id: r.id.clone(),
        url: format!("/runs/{}", r.id),
        name: r.name.clone(),
        tags: r.tags.clone(),
        note: r.note.clone(),
        created_at: rfc3339(r.created_at),
        status: r.status,
        stage: r.stage.clone(),
        error: r.error.clone(),
        progress_bytes: r.progress_bytes.max(0) as u64,
        total_bytes: r.total_bytes.max(0) as u64,
        source: r.source,
        ranks: traces
            .iter()
            .map(|t| RankInfo {
                rank: t.rank,
                file: t.file_name.clone(),
                status: t.status,
                error: t.error.clone(),
                bytes: t.bytes.max(0) as u64,
                progress_bytes: t.progress_bytes.max(0) as u64,
                sha256: t.sha256.clone(),
                encoding: t.encoding,
            })
            .collect(),
        devices: h.devices,
        steps: h.steps,
        mean_step_us: h.mean_step_us,
        top_finding: h.top_finding,
        analyzer_version: traces
            .iter()
            .filter_map(|t| t.analyzer_version)
            .map(|v| v as u32)
            .min(),
        baseline_of: r.baseline_of.clone(),
    }
}

/// Query of the runs list.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct ListQuery {
    /// Q.
    pub q: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Tag.
    pub tag: Option<String>,
    /// Status.
    pub status: Option<String>,
    /// Baselines only: `*` for any, or a baseline's name.
    pub baseline: Option<String>,
    /// Offset.
    pub offset: Option<i64>,
    /// Limit.
    pub limit: Option<i64>,
}

/// `GET /api/runs`.
pub async fn list(
    State(state): State<AppState>,
    _viewer: super::Viewer,
    Q(q): Q<ListQuery>,
) -> ApiResult<Json<RunList>> {
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::BadRequest(
            "limit must be between 1 and 500".into(),
        ));
    }
    let search = q.name.as_deref().or(q.q.as_deref()).unwrap_or("");
    if search.chars().count() > MAX_SEARCH
        || q.tag.as_deref().unwrap_or("").chars().count() > MAX_SEARCH
    {
        return Err(ApiError::BadRequest(format!(
            "a search may be at most {MAX_SEARCH} characters"
        )));
    }
    // No name or tag holds a hidden character (the upload refuses them),
    // so a search for one matches nothing; said at once, the same on both
    // databases (PostgreSQL refused a NUL with a 500, SQLite cut the text
    // at it and matched every run).
    if search
        .chars()
        .chain(q.tag.as_deref().unwrap_or("").chars())
        .any(kinetoscope_types::escape::hidden_char)
    {
        return Err(ApiError::BadRequest(
            "a search may not hold control, bidirectional or invisible characters: \
             no name or tag holds them"
                .into(),
        ));
    }
    let offset = q.offset.unwrap_or(0);
    if offset < 0 {
        return Err(ApiError::BadRequest("offset must not be negative".into()));
    }
    let status = match q.status.as_deref().filter(|s| !s.is_empty()) {
        Some(s) => Some(s.parse::<RunStatus>().map_err(ApiError::BadRequest)?),
        None => None,
    };
    let baseline = q.baseline.filter(|b| !b.is_empty());
    if let Some(b) = baseline.as_deref().filter(|b| *b != "*") {
        check_baseline_name(b).map_err(ApiError::BadRequest)?;
    }
    let filter = RunFilter {
        name: q.name.or(q.q),
        tag: q.tag,
        status,
        baseline,
        offset,
        limit,
    };
    let (runs, total) = state.db.list_runs(&filter).await?;
    Ok(Json(RunList {
        runs: runs.iter().map(|r| run_info(r, &[])).collect(),
        total: total as u64,
        offset: offset as u64,
        limit: limit as u64,
    }))
}

async fn load_run(state: &AppState, id: &str) -> ApiResult<(RunRecord, Vec<TraceRecord>)> {
    let run = state.db.run(id).await?.ok_or_else(ApiError::no_run)?;
    let traces = state.db.traces(id).await?;
    Ok((run, traces))
}

/// The longest run search (name or tag), characters: longer ones are no
/// name anyone has (names are at most 200), and SQLite refuses very long
/// patterns.
pub const MAX_SEARCH: usize = 500;

/// `GET /api/runs/{id}`.
pub async fn get(State(state): State<AppState>, RunId(id): RunId) -> ApiResult<Json<RunInfo>> {
    let (run, traces) = load_run(&state, &id).await?;
    Ok(Json(run_info(&run, &traces)))
}

/// `PATCH /api/runs/{id}` with `{name?, tags?, note?, baseline_of?}`:
/// `baseline_of` makes the run the current baseline of that name.
pub async fn patch(
    State(state): State<AppState>,
    _admin: Admin,
    RunId(id): RunId,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<RunInfo>> {
    let mut p: RunPatch = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("bad JSON body: {e}")))?;
    if let Some(n) = &p.name {
        let n = clean_name(n)?;
        if n.is_empty() {
            return Err(ApiError::BadRequest("the name must not be empty".into()));
        }
        p.name = Some(n);
    }
    if let Some(t) = &p.tags {
        p.tags = Some(clean_tags(t.iter().map(String::as_str))?);
    }
    if let Some(note) = &p.note {
        super::upload::clean_note(note)?;
    }
    if let Some(b) = &p.baseline_of {
        check_baseline_name(b).map_err(ApiError::BadRequest)?;
    }
    if !state.db.update_run(&id, &p).await? {
        return Err(ApiError::no_run());
    }
    get(State(state), RunId(id)).await
}

/// `DELETE /api/runs/{id}`: the metadata, then the blobs.
pub async fn delete(
    State(state): State<AppState>,
    _admin: Admin,
    RunId(id): RunId,
) -> ApiResult<StatusCode> {
    let keys = state
        .db
        .delete_run(&id)
        .await?
        .ok_or_else(ApiError::no_run)?;
    state.blobs.delete_run_blobs(&id, keys).await;
    Ok(StatusCode::NO_CONTENT)
}

/// Query naming a rank.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct RankQuery {
    /// Rank.
    pub rank: Option<i64>,
}

pub(crate) fn json_response(body: impl Into<axum::body::Bytes>) -> Response {
    let body: axum::body::Bytes = body.into();
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub(crate) fn not_ready(run: &RunRecord) -> ApiError {
    match run.status {
        RunStatus::Failed => ApiError::Conflict(format!(
            "the run failed: {}",
            run.error.as_deref().unwrap_or("no reason recorded")
        )),
        s => ApiError::Conflict(format!("the run is {s}: its analysis is not ready yet")),
    }
}

/// `GET /api/runs/{id}/summary[?rank=N]`: the stored summary, as stored.
pub async fn summary(
    State(state): State<AppState>,
    RunId(id): RunId,
    Q(q): Q<RankQuery>,
) -> ApiResult<Response> {
    let rank = q.rank.unwrap_or(0);
    match state
        .artifacts
        .read(&id, rank, ArtifactName::Summary)
        .await?
    {
        Some(json) => Ok(json_response(json.to_vec())),
        None => {
            let run = state.db.run(&id).await?.ok_or_else(ApiError::no_run)?;
            let traces = state.db.traces(&id).await?;
            if !traces.iter().any(|t| t.rank == rank) && !traces.is_empty() {
                return Err(ApiError::NotFound(format!("the run has no rank {rank}")));
            }
            Err(not_ready(&run))
        }
    }
}

/// `GET /api/runs/{id}/memory[?rank=N]`: the memory artifact (the curve
/// per device, the peak and what is live then, allocations per op
/// signature, per step), as stored; 404 for a trace without `[memory]`
/// events.
pub async fn memory(
    State(state): State<AppState>,
    RunId(id): RunId,
    Q(q): Q<RankQuery>,
) -> ApiResult<Response> {
    optional_artifact(
        &state,
        &id,
        q.rank.unwrap_or(0),
        ArtifactName::Memory,
        "the trace has no memory events: profile with \
         torch.profiler.profile(profile_memory=True) to see what the step allocates",
    )
    .await
}

/// `GET /api/runs/{id}/counters[?rank=N]`: the counter tracks (`ph: "C"`
/// series at a bounded resolution), as stored; 404 for a trace without
/// counter events.
pub async fn counters(
    State(state): State<AppState>,
    RunId(id): RunId,
    Q(q): Q<RankQuery>,
) -> ApiResult<Response> {
    optional_artifact(
        &state,
        &id,
        q.rank.unwrap_or(0),
        ArtifactName::Counters,
        "the trace has no counter events (ph \"C\"): CUPTI PM sampling or a \
         counter of the application's writes them",
    )
    .await
}

/// An artifact only some traces have, as stored: 404 with `absent` when
/// the finished analysis made none, 409 while the run (or its re-analysis
/// by a newer analyzer) is not done, 404 for no run or rank.
async fn optional_artifact(
    state: &AppState,
    id: &str,
    rank: i64,
    name: ArtifactName,
    absent: &str,
) -> ApiResult<Response> {
    if let Some(json) = state.artifacts.read(id, rank, name).await? {
        return Ok(json_response(json.to_vec()));
    }
    let traces = state.db.traces(id).await?;
    let t = rank_trace(state, id, rank, &traces).await?;
    let current = t.analyzer_version == Some(i64::from(kinetoscope_trace::ANALYZER_VERSION));
    if t.status != RunStatus::Done {
        let run = state.db.run(id).await?.ok_or_else(ApiError::no_run)?;
        return Err(not_ready(&run));
    }
    if !current {
        return Err(ApiError::Conflict(format!(
            "the run is being analyzed again by a newer analyzer: its {name} is not ready yet"
        )));
    }
    Err(ApiError::NotFound(absent.to_string()))
}

/// A parsed stored summary, cached by what identifies its content.
pub async fn parsed_summary(state: &AppState, id: &str, rank: i64) -> ApiResult<Arc<Summary>> {
    let traces = state.db.traces(id).await?;
    parsed_summary_of(state, id, rank, &traces).await
}

/// One rank's trace of a run, or why there is none: the run does not exist,
/// it has no trace yet (queued, capturing, failed), or no such rank.
pub(crate) async fn rank_trace<'t>(
    state: &AppState,
    id: &str,
    rank: i64,
    traces: &'t [TraceRecord],
) -> ApiResult<&'t TraceRecord> {
    match traces.iter().find(|t| t.rank == rank) {
        Some(t) => Ok(t),
        None if traces.is_empty() => Err(match state.db.run(id).await? {
            Some(run) => not_ready(&run),
            None => ApiError::no_run(),
        }),
        None => Err(ApiError::NotFound(format!("the run has no rank {rank}"))),
    }
}

/// [`parsed_summary`] for a caller that has already read the run's traces.
pub async fn parsed_summary_of(
    state: &AppState,
    id: &str,
    rank: i64,
    traces: &[TraceRecord],
) -> ApiResult<Arc<Summary>> {
    let t = rank_trace(state, id, rank, traces).await?;
    let key = format!("summary:{id}:{rank}:{}", t.analyses);
    if let Some(s) = state.summaries.get(&key) {
        return Ok(s.summary);
    }
    let Some(json) = state
        .artifacts
        .read(id, rank, ArtifactName::Summary)
        .await?
    else {
        let run = state.db.run(id).await?.ok_or_else(ApiError::no_run)?;
        return Err(not_ready(&run));
    };
    let s: Summary = serde_json::from_slice(&json)
        .map_err(|e| ApiError::Internal(format!("stored summary does not parse: {e}")))?;
    let s = Arc::new(s);
    state.summaries.insert(
        key,
        super::CachedSummary {
            summary: s.clone(),
            json_bytes: json.len() as u64,
        },
    );
    Ok(s)
}

/// `GET /api/runs/{id}/view[?rank=N]`: the summary for the dashboard, with
/// the op and kernel tables cut to their top rows (cached).
pub async fn view(
    State(state): State<AppState>,
    RunId(id): RunId,
    Q(q): Q<RankQuery>,
) -> ApiResult<Response> {
    let rank = q.rank.unwrap_or(0);
    let traces = state.db.traces(&id).await?;
    let version = traces
        .iter()
        .find(|t| t.rank == rank)
        .map(|t| t.analyses)
        .unwrap_or(-1);
    let key = format!("view:{id}:{rank}:{version}");
    if let Some(bytes) = state.cache.get(&key) {
        return Ok(json_response(bytes));
    }
    let s = parsed_summary_of(&state, &id, rank, &traces).await?;
    let cross = match state.db.cross_summary(&id).await? {
        Some(json) => serde_json::from_str(&json).ok(),
        None => None,
    };
    let mut summary = (*s).clone();
    let ops_total = summary.ops.len() as u64;
    let kernels_total = summary.kernels.len() as u64;
    summary.ops.truncate(VIEW_ROWS);
    summary.kernels.truncate(VIEW_ROWS);
    let v = SummaryView {
        summary,
        ops_total,
        kernels_total,
        rank,
        ranks: traces.iter().map(|t| t.rank).collect(),
        cross_rank: cross,
        artifacts: state
            .artifacts
            .list(&id)
            .await?
            .into_iter()
            .filter(|a| a.rank == rank)
            .map(|a| a.name)
            .collect(),
    };
    let bytes: axum::body::Bytes = serde_json::to_vec(&v)
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .into();
    state.cache.insert(key, bytes.clone());
    Ok(json_response(bytes))
}

/// Query of a table page.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct PageQuery {
    /// Rank.
    pub rank: Option<i64>,
    /// Offset.
    pub offset: Option<usize>,
    /// Limit.
    pub limit: Option<usize>,
    /// Column to sort by.
    pub sort: Option<String>,
    /// `asc` or `desc` (default).
    pub dir: Option<String>,
    /// Name substring, case-insensitive.
    pub q: Option<String>,
}

fn page_bounds(q: &PageQuery) -> ApiResult<(usize, usize, bool)> {
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::BadRequest(
            "limit must be between 1 and 1000".into(),
        ));
    }
    let asc = match q.dir.as_deref() {
        None | Some("desc") => false,
        Some("asc") => true,
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "dir must be asc or desc, not {other:?}"
            )))
        }
    };
    Ok((q.offset.unwrap_or(0), limit, asc))
}

fn page<T: Clone>(rows: Vec<&T>, offset: usize, limit: usize) -> Page<T> {
    Page {
        total: rows.len() as u64,
        offset: offset as u64,
        items: rows.into_iter().skip(offset).take(limit).cloned().collect(),
    }
}

/// `GET /api/runs/{id}/ops`: a sorted, filtered page of the op table
/// (the filter and sort the app applies: [`kinetoscope_types::table`]).
pub async fn ops_page(
    State(state): State<AppState>,
    RunId(id): RunId,
    Q(q): Q<PageQuery>,
) -> ApiResult<Json<Page<OpRow>>> {
    let (offset, limit, asc) = page_bounds(&q)?;
    let s = parsed_summary(&state, &id, q.rank.unwrap_or(0)).await?;
    let rows = table::filter_sort(&s.ops, q.q.as_deref().unwrap_or(""), q.sort.as_deref(), asc)
        .map_err(ApiError::BadRequest)?;
    Ok(Json(page(rows, offset, limit)))
}

/// `GET /api/runs/{id}/kernels`: a sorted, filtered page of the kernel table.
pub async fn kernels_page(
    State(state): State<AppState>,
    RunId(id): RunId,
    Q(q): Q<PageQuery>,
) -> ApiResult<Json<Page<KernelRow>>> {
    let (offset, limit, asc) = page_bounds(&q)?;
    let s = parsed_summary(&state, &id, q.rank.unwrap_or(0)).await?;
    let rows = table::filter_sort(
        &s.kernels,
        q.q.as_deref().unwrap_or(""),
        q.sort.as_deref(),
        asc,
    )
    .map_err(ApiError::BadRequest)?;
    Ok(Json(page(rows, offset, limit)))
}

/// `GET /api/runs/{id}/artifacts`: the stored outputs of the run's analysis.
pub async fn artifacts(
    State(state): State<AppState>,
    RunId(id): RunId,
) -> ApiResult<Json<Vec<ArtifactInfo>>> {
    if !state.db.run_exists(&id).await? {
        return Err(ApiError::no_run());
    }
    Ok(Json(state.artifacts.list(&id).await?))
}

/// `GET /api/runs/{id}/ranks`: the cross-rank summary of a multi-rank run.
pub async fn ranks(State(state): State<AppState>, RunId(id): RunId) -> ApiResult<Response> {
    match state.db.cross_summary(&id).await? {
        Some(json) => Ok(json_response(json.into_bytes())),
        None => {
            let run = state.db.run(&id).await?.ok_or_else(ApiError::no_run)?;
            let n = state.db.traces(&id).await?.len();
            if n <= 1 && run.status == RunStatus::Done {
                Err(ApiError::NotFound(
                    "the run has a single rank: there is no cross-rank summary".into(),
                ))
            } else {
                Err(not_ready(&run))
            }
        }
    }
}

/// Query of a download.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct DownloadQuery {
    /// Rank.
    pub rank: Option<i64>,
    /// `perfetto`: a form Perfetto's UI can open (zstd is decompressed to
    /// JSON on the fly; gzip and JSON are sent as stored).
    #[serde(rename = "for")]
    pub purpose: Option<String>,
}

/// `GET /api/runs/{id}/trace[?rank=N][&for=perfetto]`: the stored trace,
/// streamed as stored.
pub async fn download(
    State(state): State<AppState>,
    RunId(id): RunId,
    Q(q): Q<DownloadQuery>,
) -> ApiResult<Response> {
    let rank = q.rank.unwrap_or(0);
    let traces = state.db.traces(&id).await?;
    let Some(t) = traces.iter().find(|t| t.rank == rank) else {
        return Err(if state.db.run_exists(&id).await? {
            ApiError::NotFound(format!("the run has no rank {rank}"))
        } else {
            ApiError::no_run()
        });
    };
    if q.purpose.as_deref() == Some("perfetto") && t.encoding.compression() == Compression::Zstd {
        // Decompressed no further than the analysis read it: a trace the
        // analysis refused (a stored bomb) or has not read yet is not
        // decompressed at all, and an analyzed one stops at the JSON size
        // its analysis counted.
        if t.status != RunStatus::Done {
            return Err(ApiError::Conflict(format!(
                "the trace is {}: only an analyzed trace is decompressed for Perfetto;                  download it as stored (without ?for=perfetto)",
                t.status
            )));
        }
        let s = parsed_summary_of(&state, &id, rank, &traces).await?;
        let limit = state.max_trace_bytes.min(s.trace.json_bytes);
        let file = format!("{id}-rank{rank}.json");
        return decompressed(&state, &t.blob_key, &file, limit).await;
    }
    let (size, stream) = state.blobs.stream(&t.blob_key).await?;
    let content_type = match t.encoding.as_str() {
        "gzip" => "application/gzip",
        "zstd" => "application/zstd",
        _ => "application/json",
    };
    let suffix = match t.encoding.as_str() {
        "gzip" => "json.gz",
        "zstd" => "json.zst",
        _ => "json",
    };
    let file = format!("{id}-rank{rank}.{suffix}");
    Ok((
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (header::CONTENT_LENGTH, size.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{file}\""),
            ),
        ],
        axum::body::Body::from_stream(stream),
    )
        .into_response())
}

/// A zstd blob decompressed to JSON as it streams out.
async fn decompressed(state: &AppState, key: &str, file: &str, limit: u64) -> ApiResult<Response> {
    use std::io::Read;
    let reader = state.blobs.reader(key).await?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(4);
    tokio::task::spawn_blocking(move || {
        let mut sent = 0u64;
        let mut dec = match zstd::stream::read::Decoder::new(reader) {
            Ok(d) => d,
            Err(e) => {
                let _ = tx.blocking_send(Err(e));
                return;
            }
        };
        loop {
            let mut buf = vec![0u8; 1 << 20];
            match dec.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    sent += n as u64;
                    if sent > limit {
                        let _ = tx.blocking_send(Err(std::io::Error::other(format!(
                            "the trace decompresses to more than the limit of {limit} bytes"
                        ))));
                        return;
                    }
                    buf.truncate(n);
                    if tx.blocking_send(Ok(Bytes::from(buf))).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            }
        }
    });
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    Ok((
        [
            (header::CONTENT_TYPE, "application/json".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{file}\""),
            ),
        ],
        axum::body::Body::from_stream(stream),
    )
        .into_response())
}

/// `POST /api/runs/{id}/reanalyze`, optionally with analysis options
/// ([`AnalysisOptions`]: layer marker and period, step marker), as query
/// parameters (`?layer_marker=…&layer_period=…&step_marker=…`) or a JSON body.
pub async fn reanalyze(
    State(state): State<AppState>,
    _admin: Admin,
    RunId(id): RunId,
    Q(query): Q<AnalysisOptions>,
    JsonBody(body): JsonBody,
) -> ApiResult<(StatusCode, Json<RunInfo>)> {
    let opts: Option<AnalysisOptions> = if !body.iter().all(|b| b.is_ascii_whitespace()) {
        Some(
            serde_json::from_slice(&body)
                .map_err(|e| ApiError::BadRequest(format!("bad JSON body: {e}")))?,
        )
    } else if !query.is_empty() {
        Some(query)
    } else {
        None
    };
    if let Some(o) = &opts {
        o.validate().map_err(ApiError::BadRequest)?;
    }
    let run = state.db.run(&id).await?.ok_or_else(ApiError::no_run)?;
    if run.status == RunStatus::Capturing {
        return Err(ApiError::Conflict("the run is still capturing".into()));
    }
    let opts_json = opts.map(|o| serde_json::to_string(&o.normalized()).unwrap_or_default());
    if !state.db.reanalyze(&id, opts_json.as_deref()).await? {
        return Err(ApiError::Conflict(
            "the run has no stored trace to analyze".into(),
        ));
    }
    state.wake.notify_waiters();
    let (run, traces) = load_run(&state, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(run_info(&run, &traces))))
}
