//! The HTTP API and the app's static files.
//!
//! Handlers read stored summaries and metadata; they never parse a trace.
//! Every error is an [`ApiError`], which becomes a status code with a JSON
//! body.

pub mod captures;
pub mod diff;
pub mod error;
pub mod limits;
pub mod misc;
pub mod pace;
pub mod runs;
pub mod timeline;
pub mod upload;

use crate::web;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Path, Query};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use axum::routing::{get, post};
use axum::Router;
pub use error::{ApiError, ApiResult};
use serde::de::DeserializeOwned;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::Notify;
use tower_http::compression::predicate::{NotForContentType, Predicate, SizeAbove};
use tower_http::compression::CompressionLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;
use worker::blobs::Blobs;
use worker::db::Db;
use worker::db::TokenScope;
use worker::engines::Engine;

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    /// Db.
    pub db: Db,
    /// Blobs.
    pub blobs: Blobs,
    /// Wakes this process's embedded worker when a job is queued.
    pub wake: Arc<Notify>,
    /// Largest upload, bytes.
    pub max_upload_bytes: u64,
    /// How fast an upload body must arrive.
    pub upload_pace: pace::UploadPace,
    /// Concurrent uploads per client.
    pub upload_slots: limits::UploadSlots,
    /// Writes per minute per client.
    pub write_rate: limits::WriteRate,
    /// Engines.
    pub engines: Arc<Vec<Engine>>,
    /// Serialized views and diffs, keyed by what they were computed from.
    pub cache: Arc<quick_cache::sync::Cache<String, Arc<Vec<u8>>>>,
    /// Parsed stored summaries, keyed by run, rank and analysis count.
    pub summaries: Arc<quick_cache::sync::Cache<String, Arc<kinetoscope_types::Summary>>>,
    /// Every analysis output, wherever it is kept (summaries, timeline indexes).
    pub artifacts: worker::artifacts::Artifacts,
    /// Loaded timeline indexes, bounded in bytes.
    pub timelines: Arc<timeline::IndexCache>,
    /// Who may embed the app (`frame-ancestors` of the CSP).
    pub frame_ancestors: String,
    /// Http.
    pub http: reqwest::Client,
}

/// Builds the whole router: health, metrics, `/api`, and the app.
pub fn router(state: AppState, static_dir: PathBuf) -> Router {
    let one_run = get(runs::get).patch(runs::patch).delete(runs::delete);
    let api = Router::new()
        .route("/runs", get(runs::list).post(upload::create))
        .route("/runs/{id}", one_run)
        .route("/runs/{id}/summary", get(runs::summary))
        .route("/runs/{id}/view", get(runs::view))
        .route("/runs/{id}/ops", get(runs::ops_page))
        .route("/runs/{id}/kernels", get(runs::kernels_page))
        .route("/runs/{id}/ranks", get(runs::ranks))
        .route("/runs/{id}/trace", get(runs::download))
        .route("/runs/{id}/reanalyze", post(runs::reanalyze))
        .route("/runs/{id}/artifacts", get(runs::artifacts))
        .route("/runs/{id}/timeline", get(timeline::info))
        .route("/runs/{id}/timeline/window", get(timeline::window))
        .route("/runs/{id}/timeline/event/{event}", get(timeline::event))
        .route("/runs/{id}/timeline/search", get(timeline::search))
        .route("/diff/{a}/{b}", get(diff::diff))
        .route("/diff/{a}/{b}/align", get(timeline::align))
        .route("/captures", post(captures::create))
        .route("/engines", get(captures::engines))
        .route("/openapi.json", get(misc::openapi))
        .route("/csp-report", post(misc::csp_report))
        .fallback(|| async { ApiError::NotFound("no such API route".into()) })
        // Uploads stream and enforce their own limit.
        .layer(DefaultBodyLimit::disable())
        // A run's data is for its link's holders: no shared cache keeps it.
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("private, no-store"),
        ));
    let csp = web::content_security_policy(&static_dir, &state.frame_ancestors);
    let csp = HeaderValue::from_str(&csp)
        .unwrap_or_else(|_| HeaderValue::from_static("default-src 'self'"));
    // Stored traces are already compressed; small answers are not worth it.
    let compress = CompressionLayer::new().compress_when(
        SizeAbove::new(1024)
            .and(NotForContentType::const_new("application/octet-stream"))
            .and(NotForContentType::const_new("application/gzip"))
            .and(NotForContentType::const_new("application/zstd"))
            .and(NotForContentType::GRPC)
            .and(NotForContentType::IMAGES)
            .and(NotForContentType::SSE),
    );
    Router::new()
        .route("/healthz", get(misc::healthz))
        .route("/readyz", get(misc::readyz))
        .route("/metrics", get(misc::metrics))
        .nest("/api", api)
        .fallback_service(web::app_service(&static_dir))
        .layer(compress)
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            csp,
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// A query string extractor whose rejection is an [`ApiError`].
pub struct Q<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Q<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| Q(v))
            .map_err(|e| ApiError::BadRequest(format!("bad query string: {}", e.body_text())))
    }
}

/// A run id from the path, validated: anything that is not the shape of an
/// id (22 URL-safe characters) is "not found", so no other text reaches a
/// query or a blob key.
pub struct RunId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for RunId {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::no_run())?;
        if valid_id(&id) {
            Ok(RunId(id))
        } else {
            Err(ApiError::no_run())
        }
    }
}

/// Whether `s` has the shape of a run id.
pub fn valid_id(s: &str) -> bool {
    s.len() == 22
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
}

/// A new unguessable id: 128 random bits, base64url without padding.
pub fn new_id() -> String {
    use base64::Engine as _;
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source failed");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The largest request body other than an upload (JSON edits, options,
/// capture requests, CSP reports).
pub const MAX_SMALL_BODY: usize = 1 << 20;
/// How much of a body an early error answer reads (and drops) first.
const DRAIN_SMALL_BODY: usize = 16 << 20;

/// Reads and drops what is left of a request body (at most
/// [`DRAIN_SMALL_BODY`] bytes, for at most 5 s) before an early error answer:
/// a server that answers and closes while the client is still sending makes
/// the client's TCP stack see a reset and lose the answer.
pub async fn drain(mut body: axum::body::Body) {
    use http_body_util::BodyExt;
    let read = async {
        let mut seen = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            seen += frame.data_ref().map_or(0, |d| d.len());
            if seen > DRAIN_SMALL_BODY {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), read).await;
}

/// A small request body, read whole up to [`MAX_SMALL_BODY`] bytes; longer
/// gets 413 with `{error, detail}`. Uploads stream instead, under their own
/// limit, which is why the router's default body limit is off.
pub struct SmallBody(pub axum::body::Bytes);

impl<S: Send + Sync> axum::extract::FromRequest<S> for SmallBody {
    type Rejection = ApiError;
    async fn from_request(req: axum::extract::Request, _: &S) -> Result<Self, Self::Rejection> {
        use http_body_util::BodyExt;
        let mut body = req.into_body();
        let mut kept = Vec::new();
        let mut seen = 0usize;
        while let Some(frame) = body.frame().await {
            let frame =
                frame.map_err(|e| ApiError::BadRequest(format!("reading the body failed: {e}")))?;
            if let Ok(data) = frame.into_data() {
                seen += data.len();
                if seen > MAX_SMALL_BODY {
                    drain(body).await;
                    break;
                }
                kept.extend_from_slice(&data);
            }
        }
        if seen > MAX_SMALL_BODY {
            return Err(ApiError::TooLarge(format!(
                "this request's body may be at most {MAX_SMALL_BODY} bytes"
            )));
        }
        Ok(SmallBody(kept.into()))
    }
}

/// Authorization to create runs and captures, as an extractor: a handler
/// that takes a `Writer` cannot run without it. When tokens are configured,
/// the request must carry `Authorization: Bearer <token>` with a valid,
/// unexpired one of any scope; with none configured (the embedded default),
/// anyone may write. Holds the token's name, when there is one.
pub struct Writer(pub Option<String>);

/// Authorization to edit, delete and re-analyze runs: like [`Writer`], but
/// the token's scope must be `admin`.
pub struct Admin(pub Option<String>);

impl FromRequestParts<AppState> for Writer {
    type Rejection = ApiError;
    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        authorize(parts, state, TokenScope::Upload)
            .await
            .map(Writer)
    }
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;
    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        authorize(parts, state, TokenScope::Admin).await.map(Admin)
    }
}

/// The one check behind [`Writer`] and [`Admin`]: the token's name when the
/// request may do what `need` allows, and a structured audit line for every
/// write let through (who, what, which path, hence which run).
async fn authorize(
    parts: &Parts,
    state: &AppState,
    need: TokenScope,
) -> Result<Option<String>, ApiError> {
    state
        .write_rate
        .check(limits::client_ip(&parts.extensions))?;
    let who = check_token(parts, state, need).await?;
    tracing::info!(
        target: "kinetoscope::audit",
        token = who.as_deref().unwrap_or("-"),
        scope = need.as_str(),
        method = %parts.method,
        path = %parts.uri.path(),
        "write"
    );
    Ok(who)
}

async fn check_token(
    parts: &Parts,
    state: &AppState,
    need: TokenScope,
) -> Result<Option<String>, ApiError> {
    if !state.db.tokens_exist().await? {
        return Ok(None);
    }
    let Some(value) = parts.headers.get(axum::http::header::AUTHORIZATION) else {
        return Err(ApiError::Unauthorized(
            "this server requires a token for writes: send `Authorization: Bearer <token>`".into(),
        ));
    };
    let secret = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .unwrap_or("");
    if secret.is_empty() {
        return Err(ApiError::Unauthorized("the token is not valid".into()));
    }
    // The lookup is by the secret's sha256, so how long it takes tells a
    // caller about the hash of their guess, never about a stored secret;
    // the comparison that decides is constant-time all the same.
    let hash = worker::blobs::sha256_hex(secret.as_bytes());
    let token = match state.db.use_token(&hash).await? {
        Some(t) if constant_time_eq(t.hash.as_bytes(), hash.as_bytes()) => t,
        _ => return Err(ApiError::Unauthorized("the token is not valid".into())),
    };
    if token.expired(worker::db::now_ms()) {
        return Err(ApiError::Unauthorized(format!(
            "the token {:?} has expired; create a new one",
            token.name
        )));
    }
    if need == TokenScope::Admin && token.scope != TokenScope::Admin {
        return Err(ApiError::Forbidden(format!(
            "the token {:?} may only upload runs and start captures; editing, deleting and \
             re-analyzing need an admin token",
            token.name
        )));
    }
    Ok(Some(token.name))
}

/// Compares two byte strings in time that depends only on their lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_128_bit_url_safe() {
        let a = new_id();
        let b = new_id();
        assert_ne!(a, b);
        assert!(valid_id(&a), "{a}");
        assert!(!valid_id("../../etc/passwd"));
        assert!(!valid_id("short"));
        assert!(!valid_id("aaaaaaaaaaaaaaaaaaaa/."));
    }

    #[test]
    fn constant_time_eq_compares_bytes() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(constant_time_eq(b"", b""));
    }
}
