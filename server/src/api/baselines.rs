//! Baselines by name: `GET /api/baselines`, `GET /api/baselines/{name}`,
//! `DELETE /api/baselines/{name}`. A run becomes a name's baseline by
//! `PATCH /api/runs/{id}` with `baseline_of` (admin scope).
//!
//! A baseline names a run, so reading one is listing: the same scope as
//! the runs list (a token in `tokens` mode).

use super::runs::{rfc3339, run_info};
use super::{Admin, ApiError, ApiResult, AppState, Viewer};
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::Json;
use kinetoscope_types::{check_baseline_name, Baseline};

/// A baseline's name from the path, checked.
pub struct BaselineName(pub String);

impl<S: Send + Sync> FromRequestParts<S> for BaselineName {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(name) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::NotFound("no baseline of this name".into()))?;
        check_baseline_name(&name).map_err(ApiError::BadRequest)?;
        Ok(BaselineName(name))
    }
}

/// The most baselines `GET /api/baselines` lists.
pub const MAX_LISTED: i64 = 1000;

async fn answer(state: &AppState, rec: worker::db::BaselineRecord) -> ApiResult<Baseline> {
    let run = state
        .db
        .run(&rec.run_id)
        .await?
        .ok_or_else(ApiError::no_run)?;
    let traces = state.db.traces(&rec.run_id).await?;
    Ok(Baseline {
        name: rec.name,
        set_at: rfc3339(rec.set_at),
        run: run_info(&run, &traces),
    })
}

/// `GET /api/baselines`: every baseline, by name.
pub async fn list(
    State(state): State<AppState>,
    _viewer: Viewer,
) -> ApiResult<Json<Vec<Baseline>>> {
    let mut out = Vec::new();
    for rec in state.db.baselines(MAX_LISTED).await? {
        out.push(answer(&state, rec).await?);
    }
    Ok(Json(out))
}

/// `GET /api/baselines/{name}`: the name's current baseline run.
pub async fn get(
    State(state): State<AppState>,
    _viewer: Viewer,
    BaselineName(name): BaselineName,
) -> ApiResult<Json<Baseline>> {
    let rec = state.db.baseline(&name).await?.ok_or_else(|| {
        ApiError::NotFound(format!(
            "no run is the baseline of {name:?}: mark one with \
             `PATCH /api/runs/{{id}}` and {{\"baseline_of\": \"{name}\"}}, \
             or `kinetoscope upload --baseline-of {name}`"
        ))
    })?;
    Ok(Json(answer(&state, rec).await?))
}

/// `DELETE /api/baselines/{name}`: forgets the name (its run stays).
pub async fn delete(
    State(state): State<AppState>,
    _admin: Admin,
    BaselineName(name): BaselineName,
) -> ApiResult<StatusCode> {
    if state.db.remove_baseline(&name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(format!("no baseline named {name:?}")))
    }
}
