//! Captures: `POST /api/captures` asks the worker to profile a configured
//! engine; `GET /api/engines` lists the engines and whether they answer.
//! Requests name an engine, never a URL: only what the operator configured
//! can be reached.

use super::{new_id, upload::clean_name, ApiError, ApiResult, AppState, JsonBody, Writer};
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
    JsonBody(body): JsonBody,
) -> ApiResult<(StatusCode, Json<Created>)> {
    let req: CaptureRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("bad JSON body: {e}")))?;
    if let Some(acts) = &req.activities {
        // What reaches the engine is what the engines' profilers take, each
        // once; anything else would go to the engine unchecked.
        let mut seen = std::collections::HashSet::new();
        if acts.is_empty()
            || !acts
                .iter()
                .all(|a| matches!(a.as_str(), "CPU" | "GPU") && seen.insert(a.as_str()))
        {
            return Err(ApiError::BadRequest(
                "activities must be \"CPU\", \"GPU\" or both, each once".into(),
            ));
        }
    }
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

/// How long the engines' probe answers are reused: the list is cheap to
/// ask for, and each probe is a request to every engine.
const PROBE_FOR: std::time::Duration = std::time::Duration::from_secs(10);

/// `GET /api/engines`: each configured engine and whether it answered a
/// probe (never following a redirect) in the last [`PROBE_FOR`].
pub async fn engines(
    State(state): State<AppState>,
    _viewer: super::Viewer,
) -> ApiResult<Json<Vec<EngineInfo>>> {
    // One probe at a time: callers waiting on the lock get its answer.
    let mut last = state.engine_probe.lock().await;
    if let Some((at, infos)) = &*last {
        if at.elapsed() < PROBE_FOR {
            return Ok(Json(infos.clone()));
        }
    }
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
    let infos = futures::future::join_all(checks).await;
    *last = Some((std::time::Instant::now(), infos.clone()));
    Ok(Json(infos))
}
