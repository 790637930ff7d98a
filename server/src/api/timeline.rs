//! The timeline API: windows, events and searches answered from the stored
//! timeline index (an analysis artifact), loaded on demand into a cache
//! bounded in bytes. No handler reads a trace.

use super::runs::{not_ready, rank_trace};
use super::{ApiError, ApiResult, AppState, RunId, Q};
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::Json;
use kinetoscope_trace::analysis::shapes;
use kinetoscope_trace::timeline::{Args, SliceKind, TimelineIndex, NONE};
use kinetoscope_types::units::{bytes, rate_gbps};
use kinetoscope_types::*;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Most pixels a window or search may ask for.
pub const MAX_PX: u32 = 16384;
/// Most related events listed in an event's details.
const MAX_RELATED: usize = 200;

/// Weighs cached indexes by their columns' bytes.
#[derive(Clone)]
pub struct IndexWeight;

impl quick_cache::Weighter<String, Arc<TimelineIndex>> for IndexWeight {
    fn weight(&self, _key: &String, ix: &Arc<TimelineIndex>) -> u64 {
        ix.column_bytes() as u64 + 4096
    }
}

/// The cache of loaded timeline indexes, bounded in bytes.
pub type IndexCache = quick_cache::sync::Cache<String, Arc<TimelineIndex>, IndexWeight>;

/// A cache of at most `bytes` of indexes.
pub fn index_cache(bytes: u64) -> IndexCache {
    quick_cache::sync::Cache::with_weighter(1024, bytes.max(1 << 20), IndexWeight)
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
    if let Some(ix) = state.timelines.get(&key) {
        return Ok(ix);
    }
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
        .map_err(|e| ApiError::Internal(format!("the stored timeline index does not read: {e}")))?;
    let ix = Arc::new(ix);
    state.timelines.insert(key, ix.clone());
    Ok(ix)
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

fn reference(ix: &TimelineIndex, event: u32) -> Option<TimelineRef> {
    let r = ix.locate(event)?;
    let (kind, name, start, ..) = ix.event(r);
    Some(TimelineRef {
        event,
        name: name.to_string(),
        kind,
        track: r.track,
        start_ns: start,
    })
}

/// `GET /api/runs/{id}/timeline/event/{event}`: an event's details and its
/// chain in both directions.
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
    let r = ix
        .locate(event)
        .ok_or_else(|| ApiError::BadRequest(format!("no event {event} in this timeline")))?;
    let (kind, name, start, dur, link, args) = ix.event(r);
    let mut out = TimelineEvent {
        event,
        name: name.to_string(),
        kind,
        start_ns: start,
        dur_ns: dur,
        track: r.track,
        row: r.row,
        track_label: ix.tracks[r.track as usize].label.clone(),
        ..Default::default()
    };
    let mut inputs: Option<(String, String)> = None;
    if let Some(a) = args {
        describe_args(&ix, a, &mut out.args, &mut inputs);
    }
    // Upward: a GPU op's launch, then the ops around it.
    let mut up = link;
    if kind.is_gpu() && link != NONE {
        out.launch = reference(&ix, link);
        up = ix.locate(link).map_or(NONE, |lr| ix.event(lr).4);
    }
    while up != NONE && out.parents.len() < MAX_RELATED {
        let Some(pr) = ix.locate(up) else { break };
        out.parents.push(reference(&ix, up).unwrap_or_default());
        up = ix.event(pr).4;
    }
    // Bytes and bandwidth of a copy or cast: the op's inputs, over the
    // GPU op's duration (or the op's own, on the CPU side).
    let copy_op = if kind.is_gpu() {
        out.parents.first().cloned()
    } else {
        Some(reference(&ix, event).unwrap_or_default())
    };
    if let Some(op) = copy_op {
        let (shapes_text, dtypes_text) = match (&inputs, kind.is_gpu()) {
            (Some(i), false) => i.clone(),
            _ => ix
                .locate(op.event)
                .and_then(|r| ix.event(r).5.cloned())
                .map(|a| {
                    let mut m = BTreeMap::new();
                    let mut i = None;
                    describe_args(&ix, &a, &mut m, &mut i);
                    i.unwrap_or_default()
                })
                .unwrap_or_default(),
        };
        if let Some(b) = shapes::copy_bytes(&op.name, &shapes_text, &dtypes_text) {
            out.args.insert("bytes moved".into(), bytes(b as f64));
            if kind.is_gpu() && dur > 0 {
                out.args
                    .insert("bandwidth".into(), rate_gbps(b as f64 / dur as f64));
            }
            if let Some((from, to)) = shapes::conversion(&op.name, &dtypes_text) {
                out.args
                    .insert("conversion".into(), format!("{from} -> {to}"));
            }
        }
    }
    // Downward: a launch's GPU ops; an op's launches' GPU ops.
    let mut below: Vec<u32> = Vec::new();
    match kind {
        SliceKind::Runtime => below = ix.linked_to(event),
        SliceKind::Op | SliceKind::Annotation => {
            let mut stack = ix.linked_to(event);
            while let Some(e) = stack.pop() {
                if below.len() >= MAX_RELATED {
                    break;
                }
                let Some(er) = ix.locate(e) else { continue };
                let k = ix.event(er).0;
                let children = ix.linked_to(e);
                if k.is_gpu() {
                    below.push(e);
                } else {
                    stack.extend(children);
                }
            }
            below.sort_unstable();
        }
        _ => {}
    }
    out.python = ix
        .python_of(event)
        .into_iter()
        .map(|f| kinetoscope_trace::analysis::python::short_frame(f).to_string())
        .collect();
    out.kernels = below
        .into_iter()
        .take(MAX_RELATED)
        .filter_map(|e| reference(&ix, e))
        .collect();
    Ok(Json(out))
}

fn describe_args(
    ix: &TimelineIndex,
    a: &Args,
    out: &mut BTreeMap<String, String>,
    inputs: &mut Option<(String, String)>,
) {
    match a {
        Args::Inputs { shapes, dtypes, .. } => {
            let (s, d) = (ix.name(*shapes).to_string(), ix.name(*dtypes).to_string());
            if !s.is_empty() {
                out.insert("Input Dims".into(), s.clone());
            }
            if !d.is_empty() {
                out.insert("Input type".into(), d.clone());
            }
            *inputs = Some((s, d));
        }
        Args::Launch {
            grid,
            block,
            bytes: b,
        } => {
            if *grid != [0; 3] || *block != [0; 3] {
                out.insert("grid".into(), format!("{grid:?}"));
                out.insert("block".into(), format!("{block:?}"));
            }
            if *b > 0 {
                out.insert("bytes".into(), bytes(*b as f64));
            }
        }
    }
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
    let (matches, tracks, first) = tokio::task::spawn_blocking(move || ix2.search(&needle, px))
        .await
        .map_err(|e| ApiError::Internal(format!("search: {e}")))?;
    Ok(Json(TimelineSearch {
        matches,
        tracks: tracks
            .into_iter()
            .map(|(id, density)| TimelineDensity { id, density })
            .collect(),
        first: first.map(|(event, start_ns)| TimelineFirst { event, start_ns }),
    }))
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
    let (anchor, sa, sb) = kinetoscope_trace::timeline::align(&ia, &ib, q.anchor.as_deref())
        .map_err(ApiError::BadRequest)?;
    Ok(Json(DiffAlign {
        anchor,
        a: AlignSpan {
            start_ns: sa.0,
            end_ns: sa.1,
        },
        b: AlignSpan {
            start_ns: sb.0,
            end_ns: sb.1,
        },
    }))
}
