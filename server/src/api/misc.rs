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

/// `GET /metrics`: Prometheus text format. In `tokens` mode it needs a
/// token (any scope), like the run list: job counts say what a server does.
pub async fn metrics(State(state): State<AppState>, _viewer: super::Viewer) -> impl IntoResponse {
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
/// Anyone may send one, so it is rate-limited per client like a write,
/// read under the small-body size cap and deadline, and logged escaped
/// (`Debug`): a report can never write a line of its own, a fake audit
/// line say, or a terminal escape into the log.
pub async fn csp_report(
    State(state): State<AppState>,
    super::limits::ClientIp(client): super::limits::ClientIp,
    super::SmallBody(body): super::SmallBody,
) -> Result<axum::http::StatusCode, ApiError> {
    state.write_rate.check(client)?;
    worker::metrics::csp_violation();
    tracing::warn!(report = %report_text(&body), "content security policy violation");
    Ok(axum::http::StatusCode::NO_CONTENT)
}

/// How much of a CSP report is logged, bytes.
pub const CSP_REPORT_LOGGED: usize = 4096;

/// A report as logged: its first [`CSP_REPORT_LOGGED`] bytes, quoted and
/// escaped, so no line break, quote or control character of it reaches
/// the log as itself.
pub fn report_text(body: &[u8]) -> String {
    let cut = body.len().min(CSP_REPORT_LOGGED);
    format!("{:?}", String::from_utf8_lossy(&body[..cut]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_logged_escaped_and_cut() {
        let forged =
            "x\n2026-12-02T00:00:00Z  INFO kinetoscope::audit: write token=\"admin\"\u{1b}[2J";
        let text = report_text(forged.as_bytes());
        assert!(!text.contains('\n') && !text.contains('\u{1b}'), "{text}");
        assert!(text.starts_with('"') && text.ends_with('"'), "{text}");
        assert!(text.contains("\\n") && text.contains("\\u{1b}"), "{text}");
        let long = report_text(&vec![b'a'; 10 * CSP_REPORT_LOGGED]);
        assert_eq!(long.len(), CSP_REPORT_LOGGED + 2);
    }
}
