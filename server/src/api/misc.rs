//! Health, readiness, metrics and the OpenAPI document.

use super::{ApiError, ApiResult, AppState};
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

/// `GET /healthz`: the process is up.
pub async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: the database answers.
pub async fn readyz(State(state): State<AppState>) -> ApiResult<&'static str> {
    state
        .db
        .ping()
        .await
        .map_err(|e| ApiError::Unavailable(format!("database: {e}")))?;
    Ok("ready")
}

/// `GET /metrics`: Prometheus text format.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    if let Ok(counts) = state.db.job_counts().await {
        worker::metrics::set_jobs_by_state(&counts);
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        worker::metrics::render(),
    )
}

/// The OpenAPI document, written by hand next to the routes it describes
/// (a test checks that every route is in it).
pub const OPENAPI: &str = include_str!("openapi.json");

/// `GET /api/openapi.json`.
pub async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI)
}

/// `POST /api/csp-report`: a browser reports a Content-Security-Policy
/// violation; it is counted (`kinetoscope_csp_violations_total`) and logged.
pub async fn csp_report(super::SmallBody(body): super::SmallBody) -> axum::http::StatusCode {
    worker::metrics::csp_violation();
    let text = String::from_utf8_lossy(&body[..body.len().min(4096)]).to_string();
    tracing::warn!(report = %text, "content security policy violation");
    axum::http::StatusCode::NO_CONTENT
}
