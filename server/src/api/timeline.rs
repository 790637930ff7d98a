//! The timeline API: windows, events and searches answered from the stored
//! timeline index (an analysis artifact), loaded on demand into a cache
//! bounded in bytes. No handler reads a trace.

use super::runs::{not_ready, rank_trace};
use super::{ApiError, ApiResult, AppState, RunId, Q};
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::Json;
use kinetoscope_trace::timeline::TimelineIndex;
use kinetoscope_types::*;
use serde::Deserialize;
use std::sync::Arc;

/// Most pixels a window or search may ask for.
pub const MAX_PX: u32 = 16384;

/// Weighs cached indexes by their columns' bytes.
#[derive(Clone)]
pub struct IndexWeight;

impl quick_cache::Weighter<String, Arc<TimelineIndex>> for IndexWeight {
    fn weight(&self, _key: &String, ix: &Arc<TimelineIndex>) -> u64 {
        ix.memory_bytes() as u64 + 4096
    }
}

/// The cache of loaded timeline indexes, bounded in bytes.
pub type IndexCache = quick_cache::sync::Cache<String, Arc<TimelineIndex>, IndexWeight>;

/// A cache of at most `bytes` of indexes.
pub fn index_cache(bytes: u64) -> IndexCache {
    super::one_shard_cache(1024, bytes, IndexWeight)
}

/// Query of the timeline routes.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct TimelineQuery {
    /// The rank (0 by default).
    pub rank: Option<i64>,
    /// The track, for windows.
    pub track: Option<u32>,
    /// Window start, ns (the trace's start by default).
    pub start_ns: Option<i64>,
    /// Window end, ns (the trace's end by default).
    pub end_ns: Option<i64>,
    /// Pixel buckets (1 to 16384).
    pub px: Option<u32>,
    /// Search text.
    pub q: Option<String>,
    /// Windows: `json` (slices with their names, the default) or `columns`
    /// (the same as columns, each name once).
    pub format: Option<String>,
}

/// The timeline index of a run's rank: from the cache, or the blob store.
async fn index(state: &AppState, id: &str, rank: i64) -> ApiResult<Arc<TimelineIndex>> {
    let traces = state.db.traces(id).await?;
    let t = rank_trace(state, id, rank, &traces).await?;
    let key = format!("{id}:{rank}:{}", t.analyses);
    // One load per index: requests that arrive while it loads (the info
    // and every lane's first window, several tabs) wait for that load
    // instead of each reading and decoding the index again.
    state
        .timelines
        .get_or_insert_async(&key, async {
            let Some(bytes) = state
                .artifacts
                .read(id, rank, ArtifactName::Timeline)
                .await?
            else {
                if t.status != RunStatus::Done {
                    let run = state.db.run(id).await?.ok_or_else(ApiError::no_run)?;
                    return Err(not_ready(&run));
                }
                return Err(ApiError::NotFound(
                    "this rank has no timeline index yet: it was analyzed by an older version and is being re-analyzed".into(),
                ));
            };
            let ix = tokio::task::spawn_blocking(move || TimelineIndex::read(&bytes[..]))
                .await
                .map_err(|e| ApiError::Internal(format!("loading the timeline index: {e}")))?
                .map_err(|e| {
                    ApiError::Internal(format!("the stored timeline index does not read: {e}"))
                })?;
            Ok(Arc::new(ix))
        })
        .await
}

/// Loads a rank's timeline index into the cache in the background, when
/// the embedded worker has just stored it: the first view of the timeline
/// then finds it loaded instead of waiting for its read and decode (on the
/// 300-step story, most of the first frame). Rank 0 only: the timeline
/// opens on it, and a run's other ranks would crowd the cache.
pub fn warm(state: &AppState, id: &str, rank: i64) {
    if rank != 0 {
        return;
    }
    let (state, id) = (state.clone(), id.to_string());
    tokio::spawn(async move {
        if let Err(e) = index(&state, &id, rank).await {
            tracing::debug!(run = %id, error = ?e, "could not warm the timeline index");
        }
    });
}

fn px_of(q: &TimelineQuery, default: u32) -> ApiResult<u32> {
    let px = q.px.unwrap_or(default);
    if px == 0 || px > MAX_PX {
        return Err(ApiError::BadRequest(format!(
            "px must be between 1 and {MAX_PX}, not {px}"
        )));
    }
    Ok(px)
}

/// `GET /api/runs/{id}/timeline`: tracks, steps and layers of one rank.
pub async fn info(
    State(state): State<AppState>,
    RunId(id): RunId,
    Q(q): Q<TimelineQuery>,
) -> ApiResult<Json<TimelineInfo>> {
    let rank = q.rank.unwrap_or(0);
    let ix = index(&state, &id, rank).await?;
    let ranks = state.db.traces(&id).await?.iter().map(|t| t.rank).collect();
    Ok(Json(TimelineInfo {
        start_ns: ix.start_ns,
        end_ns: ix.end_ns,
        tracks: ix
            .tracks
            .iter()
            .enumerate()
            .map(|(k, t)| TimelineTrack {
                id: k as u32,
                kind: if t.gpu {
                    TrackKind::Gpu
                } else {
                    TrackKind::Cpu
                },
                label: t.label.clone(),
                pid: t.pid.clone(),
                tid: t.tid.clone(),
                device: t.device,
                stream: t.stream,
                rows: t.rows,
                events: t.events,
                hidden: t.hidden,
            })
            .collect(),
        steps: ix
            .steps
            .iter()
            .map(|s| TimelineStep {
                name: s.name.clone(),
                start_ns: s.start_ns,
                end_ns: s.end_ns,
            })
            .collect(),
        layers: ix
            .layers
            .iter()
            .map(|l| TimelineLayer {
                index: l.index,
                start_ns: l.start_ns,
                end_ns: l.end_ns,
            })
            .collect(),
        rank,
        ranks,
    }))
}

/// `GET /api/runs/{id}/timeline/window`: one track between two times, at
/// most one slice per pixel bucket per row.
pub async fn window(
    State(state): State<AppState>,
    RunId(id): RunId,
    Q(q): Q<TimelineQuery>,
) -> ApiResult<axum::response::Response> {
    let px = px_of(&q, 1920)?;
    let columns = match q.format.as_deref() {
        None | Some("") | Some("json") => false,
        Some("columns") => true,
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "format must be json or columns, not {other:?}"
            )))
        }
    };
    let ix = index(&state, &id, q.rank.unwrap_or(0)).await?;
    let Some(track) = q.track else {
        return Err(ApiError::BadRequest("track is required".into()));
    };
    if track as usize >= ix.tracks.len() {
        return Err(ApiError::BadRequest(format!(
            "no track {track}: the timeline has {}",
            ix.tracks.len()
        )));
    }
    let start = q.start_ns.unwrap_or(ix.start_ns);
    let end = q.end_ns.unwrap_or(ix.end_ns);
    if end <= start {
        return Err(ApiError::BadRequest(format!(
            "end_ns ({end}) must be after start_ns ({start})"
        )));
    }
    let mut slices = ix.window(track, start, end, px);
    // Slices come row by row: a cut keeps whole first rows.
    let truncated = slices.len() > MAX_WINDOW_SLICES;
    slices.truncate(MAX_WINDOW_SLICES);
    if columns {
        let mut out = TimelineColumns {
            track,
            truncated,
            ..Default::default()
        };
        let mut ids: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
        let mut budget = NameBudget::default();
        for s in slices {
            let next = out.names.len() as u32;
            let n = *ids.entry(s.name).or_insert_with(|| {
                out.names.push(budget.name(ix.name(s.name)));
                next
            });
            out.start_ns.push(s.start_ns);
            out.dur_ns.push(s.dur_ns);
            out.row.push(s.row);
            out.name.push(n);
            out.count.push(s.count);
            out.busy_ns.push(s.busy_ns);
            out.event.push(s.event);
        }
        return Ok(Json(out).into_response());
    }
    let mut budget = NameBudget::default();
    let slices = slices
        .into_iter()
        .map(|s| TimelineSlice {
            start_ns: s.start_ns,
            dur_ns: s.dur_ns,
            row: s.row,
            name: budget.name(ix.name(s.name)),
            count: s.count,
            busy_ns: s.busy_ns,
            event: s.event,
        })
        .collect();
    Ok(Json(TimelineWindow {
        track,
        slices,
        truncated,
    })
    .into_response())
}

/// The most slices one window answer carries (about 100 bytes each as
/// JSON, less as columns): a 4 KB upload could otherwise ask for tens of
/// megabytes per window.
pub const MAX_WINDOW_SLICES: usize = 100_000;

/// Bytes of names one window answer carries whole; past them, each name
/// is cut to [`WINDOW_NAME_CHARS`] (the event's details,
/// `/timeline/event/{event}`, give the whole name). Real windows stay far
/// below it, so highlights match whole names; a bomb of long names cannot
/// make an answer of gigabytes.
pub const WINDOW_NAME_BYTES: usize = 8 << 20;

/// The most characters of a name a window carries once its names passed
/// [`WINDOW_NAME_BYTES`].
pub const WINDOW_NAME_CHARS: usize = 512;

/// The names of one window answer, counted against [`WINDOW_NAME_BYTES`].
#[derive(Default)]
struct NameBudget {
    used: usize,
}

impl NameBudget {
    /// `name` whole while the budget lasts, then cut and marked.
    fn name(&mut self, name: &str) -> String {
        let out = if self.used + name.len() <= WINDOW_NAME_BYTES {
            name.to_string()
        } else {
            match name.char_indices().nth(WINDOW_NAME_CHARS) {
                None => name.to_string(),
                Some((end, _)) => format!("{}…", &name[..end]),
            }
        };
        self.used += out.len();
        out
    }
}

/// `GET /api/runs/{id}/timeline/event/{event}`: an event's details and its
/// chain in both directions ([`TimelineIndex::details`]).
pub async fn event(
    State(state): State<AppState>,
    Path((id, event)): Path<(String, String)>,
    Q(q): Q<TimelineQuery>,
) -> ApiResult<Json<TimelineEvent>> {
    if !super::valid_id(&id) {
        return Err(ApiError::no_run());
    }
    let event: u32 = event
        .parse()
        .map_err(|_| ApiError::BadRequest(format!("{event:?} is not an event id")))?;
    let ix = index(&state, &id, q.rank.unwrap_or(0)).await?;
    ix.details(event)
        .map(Json)
        .ok_or_else(|| ApiError::BadRequest(format!("no event {event} in this timeline")))
}

/// `GET /api/runs/{id}/timeline/search`: where events whose name contains
/// `q` lie.
pub async fn search(
    State(state): State<AppState>,
    RunId(id): RunId,
    Q(q): Q<TimelineQuery>,
) -> ApiResult<Json<TimelineSearch>> {
    let px = px_of(&q, 1920)?;
    let text = q.q.as_deref().map(str::trim).unwrap_or("");
    if text.is_empty() {
        return Err(ApiError::BadRequest(
            "q (the text to search for) is required".into(),
        ));
    }
    if text.len() > 4096 {
        return Err(ApiError::BadRequest("q is too long".into()));
    }
    let ix = index(&state, &id, q.rank.unwrap_or(0)).await?;
    let ix2 = ix.clone();
    let needle = text.to_string();
    let found = tokio::task::spawn_blocking(move || ix2.search(&needle, px))
        .await
        .map_err(|e| ApiError::Internal(format!("search: {e}")))?;
    Ok(Json(found))
}

/// Query of the align route.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct AlignQuery {
    /// `step:N` or `layer:L` (in each run's median step); the median step by
    /// default.
    pub anchor: Option<String>,
    /// The rank of both runs (0 by default).
    pub rank: Option<i64>,
}

/// `GET /api/diff/{a}/{b}/align`: where an anchor lies in each run, from
/// their timeline indexes.
pub async fn align(
    State(state): State<AppState>,
    Path((a, b)): Path<(String, String)>,
    Q(q): Q<AlignQuery>,
) -> ApiResult<Json<DiffAlign>> {
    if !super::valid_id(&a) || !super::valid_id(&b) {
        return Err(ApiError::no_run());
    }
    let rank = q.rank.unwrap_or(0);
    let (ia, ib) = (
        index(&state, &a, rank).await?,
        index(&state, &b, rank).await?,
    );
    kinetoscope_trace::diff::align(&ia, &ib, q.anchor.as_deref())
        .map(Json)
        .map_err(ApiError::BadRequest)
}
