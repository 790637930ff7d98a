//! `GET /api/diff/{a}/{b}`: run a against run b, from stored summaries.

use super::runs::{parsed_summary_of, RankQuery};
use super::{valid_id, ApiError, ApiResult, AppState, Q};
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use kinetoscope_trace::diff::{diff as compute, rank_deltas, Side};
use kinetoscope_types::RanksSummary;

/// Handles the diff of two runs (rank 0 of each, or `?rank=N`).
pub async fn diff(
    State(state): State<AppState>,
    Path((a, b)): Path<(String, String)>,
    Q(q): Q<RankQuery>,
) -> ApiResult<Response> {
    if !valid_id(&a) || !valid_id(&b) {
        return Err(ApiError::no_run());
    }
    let rank = q.rank.unwrap_or(0);
    let run_a = state
        .db
        .run(&a)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no run {a}")))?;
    let run_b = state
        .db
        .run(&b)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no run {b}")))?;
    let (ta, tb) = (state.db.traces(&a).await?, state.db.traces(&b).await?);
    let sa = parsed_summary_of(&state, &a, rank, &ta).await?;
    let sb = parsed_summary_of(&state, &b, rank, &tb).await?;
    let analyses =
        |traces: &[worker::db::TraceRecord]| traces.iter().map(|t| t.analyses).sum::<i64>();
    let key = format!(
        "diff:{a}:{b}:{rank}:{}:{}:{}:{}",
        analyses(&ta),
        analyses(&tb),
        run_a.name,
        run_b.name
    );
    if let Some(bytes) = state.cache.get(&key) {
        return Ok(([(header::CONTENT_TYPE, "application/json")], bytes).into_response());
    }
    let mut d = compute(
        &Side {
            id: &a,
            name: &run_a.name,
            summary: &sa,
        },
        &Side {
            id: &b,
            name: &run_b.name,
            summary: &sb,
        },
    );
    if let (Some(ca), Some(cb)) = (
        state.db.cross_summary(&a).await?,
        state.db.cross_summary(&b).await?,
    ) {
        if let (Ok(ca), Ok(cb)) = (
            serde_json::from_str::<RanksSummary>(&ca),
            serde_json::from_str::<RanksSummary>(&cb),
        ) {
            d.ranks = rank_deltas(&ca, &cb);
            d.findings
                .extend(kinetoscope_trace::diff::rank_findings(&ca, &cb, &d.ranks));
        }
    }
    let bytes: axum::body::Bytes = serde_json::to_vec(&d)
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .into();
    state.cache.insert(key, bytes.clone());
    Ok(([(header::CONTENT_TYPE, "application/json")], bytes).into_response())
}
