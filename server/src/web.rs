//! The app's static files, with every unknown non-API path answered by
//! `index.html` so deep links (`/runs/{id}`, `/diff/{a}/{b}`) load the app.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;
use std::path::Path;
use tower::ServiceExt;
use tower_http::services::{ServeDir, ServeFile};
use tower_http::set_header::SetResponseHeaderLayer;

const NOT_BUILT: &str = "<!doctype html><title>Kinetoscope</title>\
<p>The app is not built. Run <code>make run</code>, or set <code>KINETOSCOPE_STATIC</code> \
to Trunk's output folder. The API is at <a href=\"/api/runs\">/api/runs</a>.</p>";

/// The Content-Security-Policy of every response: scripts only from this
/// origin or by hash (the inline scripts of the built `index.html`: Trunk's
/// loader and the theme's pre-paint script), WebAssembly compiled from this
/// origin, every fetch to this origin, no embedding except by
/// `frame_ancestors` (`'none'` by default), violations reported to
/// `/api/csp-report`. The Perfetto hand-off opens a window and posts the
/// trace to it, which this policy does not govern; its download is same-origin.
pub fn content_security_policy(dir: &Path, frame_ancestors: &str) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap_or_default();
    let mut hashes = Vec::new();
    let mut rest = html.as_str();
    while let Some(k) = rest.find("<script") {
        rest = &rest[k..];
        let Some(open_end) = rest.find('>') else {
            break;
        };
        let tag = &rest[..open_end];
        let body_start = open_end + 1;
        let Some(close) = rest[body_start..].find("</script>") else {
            break;
        };
        let body = &rest[body_start..body_start + close];
        if !tag.contains(" src=") {
            let digest = sha2::Sha256::digest(body.as_bytes());
            hashes.push(format!(
                "'sha256-{}'",
                base64::engine::general_purpose::STANDARD.encode(digest)
            ));
        }
        rest = &rest[body_start + close..];
    }
    format!(
        "default-src 'self'; script-src 'self' 'wasm-unsafe-eval' {}; style-src 'self' 'unsafe-inline'; \
         img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
         frame-ancestors {frame_ancestors}; report-uri /api/csp-report",
        hashes.join(" ")
    )
}

/// A service for the built app in `dir`.
pub fn app_service(dir: &Path) -> Router {
    let index = dir.join("index.html");
    if !index.exists() {
        tracing::warn!(dir = %dir.display(), "the app is not built; serving a placeholder page");
        let placeholder = Router::new().fallback(get(|uri: axum::http::Uri| async move {
            if is_file_path(uri.path()) && uri.path() != "/index.html" {
                return crate::api::ApiError::NotFound("no such file".into()).into_response();
            }
            (StatusCode::OK, Html(NOT_BUILT)).into_response()
        }));
        return with_cache_control(placeholder);
    }
    // index.html must be re-read on every visit (it names the hashed assets).
    let index_service = tower::ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache"),
        ))
        .service(ServeFile::new(index));
    // Unknown paths: a deep link (no file extension) loads the app; a
    // missing file (an old hashed asset, say) is a 404, not the page.
    let deep_links = {
        let index_service = index_service.clone();
        tower::service_fn(move |req: axum::extract::Request| {
            let index_service = index_service.clone();
            async move {
                if is_file_path(req.uri().path()) {
                    return Ok::<_, std::convert::Infallible>(
                        crate::api::ApiError::NotFound("no such file".into()).into_response(),
                    );
                }
                Ok(index_service.oneshot(req).await.into_response())
            }
        })
    };
    let app = Router::new()
        .route_service("/", index_service.clone())
        .route_service("/index.html", index_service)
        .fallback_service(ServeDir::new(dir).fallback(deep_links));
    with_cache_control(app)
}

/// Whether a path names a file (its last segment has an extension), not a
/// deep link into the app (`/runs/{id}`).
fn is_file_path(path: &str) -> bool {
    path.rsplit('/').next().unwrap_or("").contains('.')
}

/// Every successful answer of the app's files says how long it may be
/// cached: for good for hashed assets, else revalidated on each visit.
fn with_cache_control(app: Router) -> Router {
    app.layer(axum::middleware::map_response_with_state(
        (),
        |req_path: axum::extract::OriginalUri, mut resp: axum::response::Response| async move {
            if resp.status().is_success() && !resp.headers().contains_key(header::CACHE_CONTROL) {
                let value = if hashed_asset(req_path.path()) {
                    "public, max-age=31536000, immutable"
                } else {
                    "no-cache"
                };
                resp.headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static(value));
            }
            resp
        },
    ))
}

/// Whether a path names one of Trunk's hashed assets (`app-<16+ hex>.wasm`,
/// `main-<hex>.css`): its content never changes under that name, so it may
/// be cached for good.
pub fn hashed_asset(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or("");
    let stem = file.split('.').next().unwrap_or("");
    stem.rsplit_once('-').is_some_and(|(_, tail)| {
        // `app-<hash>_bg.wasm`: the hash runs to an underscore.
        let hash = tail.split('_').next().unwrap_or("");
        hash.len() >= 16 && hash.bytes().all(|b| b.is_ascii_hexdigit())
    }) && file.contains('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_assets_are_told_from_other_files() {
        assert!(hashed_asset("/app-1a2b3c4d5e6f7a8b_bg.wasm"));
        assert!(hashed_asset("/app-1a2b3c4d5e6f7a8b.js"));
        assert!(hashed_asset("/main-0123456789abcdef0123.css"));
        assert!(!hashed_asset("/index.html"));
        assert!(!hashed_asset("/favicon.ico"));
        assert!(!hashed_asset("/runs/AAAAAAAAAAAAAAAAAAAAAA"));
        assert!(!hashed_asset("/my-file.js"));
    }
}
