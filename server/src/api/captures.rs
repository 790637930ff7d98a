//! Captures: `POST /api/captures` asks the worker to profile a configured
//! engine; `GET /api/engines` lists the engines and whether they answer.
//! Requests name an engine, never a URL: only what the operator configured
//! can be reached.

use super::{new_id, upload::clean_name, ApiError, ApiResult, AppState, SmallBody, Writer};
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use kinetoscope_types::{CaptureRequest, Created, EngineInfo, RunSource, RunStatus};
use worker::db::NewRun;

/// Most steps a capture may ask for.
pub const MAX_STEPS: u32 = 10_000;

/// `POST /api/captures`.
pub async fn create(
    State(state): State<AppState>,
    _writer: Writer,
    SmallBody(body): SmallBody,
) -> ApiResult<(StatusCode, Json<Created>)> {
    let req: CaptureRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("bad JSON body: {e}")))?;
    if req.engine.contains("://") || req.engine.contains('/') {
        return Err(ApiError::Unprocessable(
            "name a configured engine (see GET /api/engines), not a URL".into(),
        ));
    }
    let Some(engine) = state.engines.iter().find(|e| e.name == req.engine) else {
        return Err(ApiError::Unprocessable(format!(
            "no engine named {:?} is configured (see GET /api/engines)",
            req.engine
        )));
    };
    if req.num_steps == 0 || req.num_steps > MAX_STEPS {
        return Err(ApiError::BadRequest(format!(
            "num_steps must be between 1 and {MAX_STEPS}"
        )));
    }
    let mut name = clean_name(&req.name)?;
    if name.is_empty() {
        name = format!("{} capture", engine.name);
    }
    let id = new_id();
    let run = NewRun {
        id: id.clone(),
        name,
        tags: vec![format!("engine:{}", engine.name)],
        source: RunSource::Capture,
        capture: Some(serde_json::to_string(&req).unwrap_or_default()),
    };
    state.db.create_run(&run, &[]).await?;
    state
        .db
        .set_stage(&id, RunStatus::Capturing, "starting")
        .await?;
    state.wake.notify_waiters();
    let url = format!("/runs/{id}");
    Ok((
        StatusCode::CREATED,
        Json(Created {
            id: id.clone(),
            url,
            status: RunStatus::Capturing,
            run_id: Some(id),
        }),
    ))
}

/// `GET /api/engines`.
pub async fn engines(State(state): State<AppState>) -> ApiResult<Json<Vec<EngineInfo>>> {
    let checks = state.engines.iter().map(|e| {
        let http = state.http.clone();
        async move {
            let (reachable, detail) = worker::engines::probe(&http, e).await;
            EngineInfo {
                name: e.name.clone(),
                flavour: e.flavour,
                ranks: e.ranks,
                reachable,
                detail,
            }
        }
    });
    Ok(Json(futures::future::join_all(checks).await))
}
