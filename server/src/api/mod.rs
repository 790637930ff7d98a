//! The HTTP API and the app's static files.
//!
//! Handlers read stored summaries and metadata; they never parse a trace.
//! Every error is an [`ApiError`], which becomes a status code with a JSON
//! body.

pub mod auth;
pub mod baselines;
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
pub use auth::{Admin, Viewer, Writer};
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
    /// Largest decompressed trace, bytes (what analysis accepts, and what a
    /// decompressed download may send).
    pub max_trace_bytes: u64,
    /// How fast an upload body must arrive.
    pub upload_pace: pace::UploadPace,
    /// Concurrent uploads per client.
    pub upload_slots: limits::UploadSlots,
    /// Writes per minute per client.
    pub write_rate: limits::WriteRate,
    /// Engines.
    pub engines: Arc<Vec<Engine>>,
    /// Serialized views and diffs, keyed by what they were computed from,
    /// bounded in bytes.
    pub cache: Arc<AnswerCache>,
    /// Parsed stored summaries, keyed by run, rank and analysis count,
    /// bounded in bytes (of their stored JSON).
    pub summaries: Arc<SummaryCache>,
    /// Every analysis output, wherever it is kept (summaries, timeline indexes).
    pub artifacts: worker::artifacts::Artifacts,
    /// Loaded timeline indexes, bounded in bytes.
    pub timelines: Arc<timeline::IndexCache>,
    /// Who may embed the app (`frame-ancestors` of the CSP).
    pub frame_ancestors: String,
    /// Http.
    pub http: reqwest::Client,
    /// The engines' last probe, reused for a few seconds.
    pub engine_probe: Arc<tokio::sync::Mutex<Option<EngineProbe>>>,
    /// Who may do what: the access mode, private reads, host names.
    pub access: Arc<auth::Access>,
}

/// When the engines were last probed, and what they answered.
pub type EngineProbe = (std::time::Instant, Vec<kinetoscope_types::EngineInfo>);

/// Weighs a cached answer: its bytes (and its key's).
#[derive(Clone, Copy, Debug, Default)]
pub struct AnswerWeight;

impl quick_cache::Weighter<String, axum::body::Bytes> for AnswerWeight {
    fn weight(&self, key: &String, v: &axum::body::Bytes) -> u64 {
        (key.len() + v.len()) as u64 + 64
    }
}

/// Serialized answers (views, diffs), bounded in bytes: a few large runs
/// cannot hold the process's memory.
pub type AnswerCache = quick_cache::sync::Cache<String, axum::body::Bytes, AnswerWeight>;

/// A cache of at most `bytes` of answers.
pub fn answer_cache(bytes: u64) -> AnswerCache {
    one_shard_cache(256, bytes, AnswerWeight)
}

/// A byte-bounded cache in one shard. quick_cache splits its capacity into
/// shards (four per core) and keeps no item heavier than one shard: the
/// 300-step story's timeline index (about 100 MB loaded) was never kept
/// in the 512 MB cache on 2 cores (64 MB shards), nor a 30-step one on 16
/// cores (8 MB shards), so every timeline request read and decoded the
/// index again (400 ms each on 300 steps). Our caches hold few, large
/// items, read far more than written: one lock costs nothing here.
pub fn one_shard_cache<V: Clone, W: quick_cache::Weighter<String, V> + Clone>(
    items: usize,
    bytes: u64,
    weighter: W,
) -> quick_cache::sync::Cache<String, V, W> {
    let options = quick_cache::OptionsBuilder::new()
        .estimated_items_capacity(items)
        .weight_capacity(bytes.max(1 << 20))
        .shards(1)
        .build()
        .expect("a cache's options are all set");
    quick_cache::sync::Cache::with_options(
        options,
        weighter,
        Default::default(),
        Default::default(),
    )
}

/// A parsed summary as cached, with the size of the JSON it came from.
#[derive(Clone, Debug)]
pub struct CachedSummary {
    /// The summary.
    pub summary: Arc<kinetoscope_types::Summary>,
    /// Bytes of its stored JSON (its parsed form takes about as much).
    pub json_bytes: u64,
}

/// Weighs a cached summary: twice its JSON, about what the parsed form
/// holds with its allocations.
#[derive(Clone, Copy, Debug, Default)]
pub struct SummaryWeight;

impl quick_cache::Weighter<String, CachedSummary> for SummaryWeight {
    fn weight(&self, key: &String, v: &CachedSummary) -> u64 {
        key.len() as u64 + 2 * v.json_bytes + 256
    }
}

/// Parsed summaries, bounded in bytes.
pub type SummaryCache = quick_cache::sync::Cache<String, CachedSummary, SummaryWeight>;

/// A cache of at most `bytes` of parsed summaries.
pub fn summary_cache(bytes: u64) -> SummaryCache {
    one_shard_cache(32, bytes, SummaryWeight)
}

/// Builds the whole router: health, metrics, `/api`, and the app.
pub fn router(state: AppState, static_dir: PathBuf) -> Router {
    let one_run = get(runs::get).patch(runs::patch).delete(runs::delete);
    let one_baseline = get(baselines::get).delete(baselines::delete);
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
        .route("/runs/{id}/memory", get(runs::memory))
        .route("/runs/{id}/counters", get(runs::counters))
        .route("/runs/{id}/timeline", get(timeline::info))
        .route("/runs/{id}/timeline/window", get(timeline::window))
        .route("/runs/{id}/timeline/event/{event}", get(timeline::event))
        .route("/runs/{id}/timeline/search", get(timeline::search))
        .route("/baselines", get(baselines::list))
        .route("/baselines/{name}", one_baseline)
        .route("/diff/{a}/{b}", get(diff::diff))
        .route("/diff/{a}/{b}/align", get(timeline::align))
        .route("/captures", post(captures::create))
        .route("/engines", get(captures::engines))
        .route("/openapi.json", get(misc::openapi))
        .route("/csp-report", post(misc::csp_report))
        .fallback(|| async { ApiError::NotFound("no such API route".into()) })
        .method_not_allowed_fallback(|| async {
            ApiError::MethodNotAllowed("this route does not take this method".into())
        })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::private_reads,
        ))
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
        .layer(axum::middleware::from_fn(close_if_body_unread))
        // Inside the header layers: its refusals carry them too.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::same_site,
        ))
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

/// A new unguessable id: 128 random bits, base64url without padding, drawn
/// again while it starts with `-` (one draw in 64), so that no command line
/// reads an id as a flag (`kinetoscope diff -Y…` did). What is left is
/// uniform over the other ids: 127.98 bits.
pub fn new_id() -> String {
    use base64::Engine as _;
    loop {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).expect("the OS random source failed");
        let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        if !id.starts_with('-') {
            return id;
        }
    }
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

/// How long a small body may take to arrive, whole: past it the answer is
/// 408, so a client trickling a byte every few seconds cannot hold a
/// connection (and its task) open.
pub const SMALL_BODY_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

impl<S: Send + Sync> axum::extract::FromRequest<S> for SmallBody {
    type Rejection = ApiError;
    async fn from_request(req: axum::extract::Request, _: &S) -> Result<Self, Self::Rejection> {
        use http_body_util::BodyExt;
        let mut body = req.into_body();
        let mut kept = Vec::new();
        let mut seen = 0usize;
        let read = async {
            while let Some(frame) = body.frame().await {
                let frame = frame
                    .map_err(|e| ApiError::BadRequest(format!("reading the body failed: {e}")))?;
                if let Ok(data) = frame.into_data() {
                    seen += data.len();
                    if seen > MAX_SMALL_BODY {
                        return Ok(true);
                    }
                    kept.extend_from_slice(&data);
                }
            }
            Ok::<bool, ApiError>(false)
        };
        let too_large = match tokio::time::timeout(SMALL_BODY_DEADLINE, read).await {
            Ok(r) => r?,
            Err(_) => {
                return Err(ApiError::RequestTimeout(format!(
                    "the request's body did not arrive within {} s",
                    SMALL_BODY_DEADLINE.as_secs()
                )))
            }
        };
        if too_large {
            drain(body).await;
            return Err(ApiError::TooLarge(format!(
                "this request's body may be at most {MAX_SMALL_BODY} bytes"
            )));
        }
        Ok(SmallBody(kept.into()))
    }
}

/// A request body that notes when it was read to its end.
struct Tracked {
    inner: axum::body::Body,
    ended: Arc<std::sync::atomic::AtomicBool>,
}

impl hyper::body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        if let std::task::Poll::Ready(None) = polled {
            self.ended.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// An answer given before its request's body was read to the end says
/// `Connection: close`: hyper closes such a connection, and a client that
/// pooled it would see its next request cut off (a broken pipe, twice in
/// CI). One rule for every route and every early refusal (a token, a
/// name, a size, a rate).
pub async fn close_if_body_unread(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use hyper::body::Body as _;
    let (parts, body) = req.into_parts();
    if body.is_end_stream() {
        return next
            .run(axum::extract::Request::from_parts(parts, body))
            .await;
    }
    let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let body = axum::body::Body::new(Tracked {
        inner: body,
        ended: ended.clone(),
    });
    let mut resp = next
        .run(axum::extract::Request::from_parts(parts, body))
        .await;
    if !ended.load(std::sync::atomic::Ordering::Relaxed) {
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// A small JSON body: like [`SmallBody`], but a `Content-Type`, when there
/// is one, must be `application/json` (tools such as curl may send none). A
/// page on another site can send `text/plain` or a form without asking the
/// user's browser first; it cannot send `application/json` cross-site
/// without a preflight, which this server never grants. (A browser's
/// cross-site request also carries an `Origin`, which `auth::same_site`
/// refuses on writes; this check holds even where a proxy drops it.)
pub struct JsonBody(pub axum::body::Bytes);

impl<S: Send + Sync> axum::extract::FromRequest<S> for JsonBody {
    type Rejection = ApiError;
    async fn from_request(req: axum::extract::Request, s: &S) -> Result<Self, Self::Rejection> {
        let kind = req
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap_or("").to_string());
        let json = kind.as_deref().is_some_and(|k| {
            k.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
        let SmallBody(body) = SmallBody::from_request(req, s).await?;
        if !json && kind.is_some() {
            return Err(ApiError::UnsupportedMedia(format!(
                "send this body as `Content-Type: application/json` (it came as {})",
                kind.as_deref().unwrap_or("no content type")
            )));
        }
        Ok(JsonBody(body))
    }
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
    fn no_id_starts_with_a_hyphen() {
        // One draw in 64 starts with `-`: 20,000 draws would give about 312.
        let ids: Vec<String> = (0..20_000).map(|_| new_id()).collect();
        assert!(ids.iter().all(|id| !id.starts_with('-')));
        // Every other first character still comes, `_` included.
        let firsts: std::collections::HashSet<u8> = ids.iter().map(|id| id.as_bytes()[0]).collect();
        assert_eq!(firsts.len(), 63, "{} first characters", firsts.len());
    }

    #[test]
    fn a_cache_keeps_an_item_of_a_fifth_of_its_bytes() {
        // As a 300-step timeline index (about 100 MB) in the default 512 MB:
        // sharded four ways a core, no shard could hold it.
        let cache = answer_cache(500 << 20);
        let big = axum::body::Bytes::from(vec![0u8; 100 << 20]);
        cache.insert("big".to_string(), big);
        assert!(cache.get("big").is_some(), "{} shards", cache.num_shards());
        let summaries = summary_cache(64 << 20);
        assert_eq!(summaries.num_shards(), 1);
        assert_eq!(super::timeline::index_cache(512 << 20).num_shards(), 1);
    }
}
