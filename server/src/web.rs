//! The app's static files, with every unknown non-API path answered by
//! `index.html` so deep links (`/runs/{id}`, `/diff/{a}/{b}`) load the app.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;
use std::path::Path;
use tower_http::services::{ServeDir, ServeFile};
use tower_http::set_header::SetResponseHeaderLayer;

const NOT_BUILT: &str = "<!doctype html><title>Kinetoscope</title>\
<p>The app is not built. Run <code>make run</code>, or set <code>KINETOSCOPE_STATIC</code> \
to Trunk's output folder. The API is at <a href=\"/api/runs\">/api/runs</a>.</p>";

/// A service for the built app in `dir`.
pub fn app_service(dir: &Path) -> Router {
    let index = dir.join("index.html");
    if !index.exists() {
        tracing::warn!(dir = %dir.display(), "the app is not built; serving a placeholder page");
        return Router::new().fallback(get(|| async {
            (StatusCode::OK, Html(NOT_BUILT)).into_response()
        }));
    }
    // index.html must be re-read on every visit (it names the hashed assets).
    let index_service = tower::ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache"),
        ))
        .service(ServeFile::new(index));
    Router::new().fallback_service(ServeDir::new(dir).fallback(index_service))
}
