//! Who may do what: the access mode, tokens as extractors, and the checks
//! that keep other sites out (cross-site writes, DNS rebinding).
//!
//! Two modes ([`AuthMode`]): `open`, a fresh local clone's default, where
//! anyone who reaches the server may write; and `tokens`, where writes and
//! the run list need a token. A server is in `tokens` mode when it is
//! started with `--auth tokens` (or `--private`), or as soon as a token was
//! ever created in its store: revoked tokens keep their rows, so revoking
//! only ever takes access away. A run's own pages stay readable by whoever
//! has its link (its id is 128 random bits) unless the server is
//! `--private`, where every read needs a token too.

use super::{limits, ApiError, AppState};
use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::atomic::{AtomicBool, Ordering};
use worker::db::TokenScope;

/// Whether writes need a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum AuthMode {
    /// Anyone who can reach the server may write (until a token is created).
    #[default]
    Open,
    /// Writes and the run list need a token; a run's link still reads.
    Tokens,
}

/// The server's access settings, shared by every request.
#[derive(Debug, Default)]
pub struct Access {
    /// The mode the server was started in.
    pub mode: AuthMode,
    /// Every read needs a token too (implies `tokens`).
    pub private: bool,
    /// Host names the server answers to besides loopback names and IP
    /// addresses (`--public-host`).
    pub public_hosts: Vec<String>,
    /// Proxies whose `X-Forwarded-For` names the client (`--trusted-proxy`).
    pub proxies: limits::TrustedProxies,
    /// Set once a token is seen in the store: the mode never goes back.
    locked: AtomicBool,
}

impl Access {
    /// Access settings as configured.
    pub fn new(
        mode: AuthMode,
        private: bool,
        public_hosts: Vec<String>,
        proxies: limits::TrustedProxies,
    ) -> Access {
        Access {
            mode,
            private,
            public_hosts: public_hosts
                .into_iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect(),
            proxies,
            locked: AtomicBool::new(false),
        }
    }

    /// Whether the server is in `tokens` mode now.
    pub async fn tokens_mode(&self, state: &AppState) -> Result<bool, ApiError> {
        if self.private || self.mode == AuthMode::Tokens || self.locked.load(Ordering::Relaxed) {
            return Ok(true);
        }
        if state.db.tokens_exist().await? {
            self.locked.store(true, Ordering::Relaxed);
            return Ok(true);
        }
        Ok(false)
    }
}

/// What a request wants to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Need {
    /// Read one run by its link (needs a token only on a private server).
    ReadRun,
    /// List or search runs, list engines, read metrics.
    List,
    /// Create runs and captures.
    Upload,
    /// Edit, delete and re-analyze runs.
    Admin,
}

impl Need {
    /// The least scope that may, when a token is needed at all.
    fn scope(self) -> TokenScope {
        match self {
            Need::ReadRun | Need::List => TokenScope::Read,
            Need::Upload => TokenScope::Upload,
            Need::Admin => TokenScope::Admin,
        }
    }
}

/// Authorization to create runs and captures, as an extractor: a handler
/// that takes a `Writer` cannot run without it. In `tokens` mode the
/// request must carry `Authorization: Bearer <token>` with a valid,
/// unexpired, unrevoked one of `upload` or `admin` scope; in `open` mode
/// anyone may write. Holds the token's name, when there is one.
pub struct Writer(pub Option<String>);

/// Authorization to edit, delete and re-analyze runs: like [`Writer`], but
/// the token's scope must be `admin`.
pub struct Admin(pub Option<String>);

/// Authorization to list and search runs (and engines, and metrics): any
/// valid token in `tokens` mode, nothing in `open` mode.
pub struct Viewer(pub Option<String>);

impl FromRequestParts<AppState> for Writer {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        authorize_write(parts, state, Need::Upload)
            .await
            .map(Writer)
    }
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        authorize_write(parts, state, Need::Admin).await.map(Admin)
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        check(&parts.headers, state, Need::List).await.map(Viewer)
    }
}

/// The check behind [`Writer`] and [`Admin`]: the per-client write rate,
/// the token, and a structured audit line for every write let through
/// (who, what, which path, hence which run).
async fn authorize_write(
    parts: &Parts,
    state: &AppState,
    need: Need,
) -> Result<Option<String>, ApiError> {
    state
        .write_rate
        .check(limits::client_ip(&parts.extensions))?;
    let who = check(&parts.headers, state, need).await?;
    tracing::info!(
        target: "kinetoscope::audit",
        token = who.as_deref().unwrap_or("-"),
        scope = need.scope().as_str(),
        method = %parts.method,
        path = %parts.uri.path(),
        "write"
    );
    Ok(who)
}

/// The one token check: `Ok(None)` when this mode needs no token for
/// `need` (whatever the request carries), the token's name when it
/// presents a valid one that may do `need`, else 401 (none, unknown,
/// expired, revoked) or 403 (too narrow).
async fn check(
    headers: &HeaderMap,
    state: &AppState,
    need: Need,
) -> Result<Option<String>, ApiError> {
    let access = &state.access;
    let needed = match need {
        Need::ReadRun => access.private,
        Need::List | Need::Upload | Need::Admin => access.tokens_mode(state).await?,
    };
    // Where no token is needed, none is checked: a stale token sent to an
    // open server, or with a read of a public link, changes nothing.
    if !needed {
        return Ok(None);
    }
    let presented = bearer(headers);
    let Some(secret) = presented else {
        let what = match need {
            Need::ReadRun => "this server is private: every read",
            Need::List => "listing and searching runs",
            Need::Upload | Need::Admin => "this server requires a token for writes: each write",
        };
        return Err(ApiError::Unauthorized(format!(
            "{what} needs a token: send `Authorization: Bearer <token>`"
        )));
    };
    // The lookup is by the secret's sha256, so how long it takes tells a
    // caller about the hash of their guess, never about a stored secret;
    // the comparison that decides is constant-time all the same.
    let hash = worker::blobs::sha256_hex(secret.as_bytes());
    let token = match state.db.use_token(&hash).await? {
        Some(t) if constant_time_eq(t.hash.as_bytes(), hash.as_bytes()) => t,
        _ => return Err(ApiError::Unauthorized("the token is not valid".into())),
    };
    if token.revoked_at.is_some() {
        return Err(ApiError::Unauthorized(format!(
            "the token {:?} was revoked",
            token.name
        )));
    }
    if token.expired(worker::db::now_ms()) {
        return Err(ApiError::Unauthorized(format!(
            "the token {:?} has expired; create a new one",
            token.name
        )));
    }
    if token.scope < need.scope() {
        let may = match token.scope {
            TokenScope::Read => "may only list and read runs",
            TokenScope::Upload => "may only upload runs and start captures",
            TokenScope::Admin => "may do everything",
        };
        let needs = match need {
            Need::Upload => "uploading and capturing need an upload or admin token",
            _ => "editing, deleting and re-analyzing need an admin token",
        };
        return Err(ApiError::Forbidden(format!(
            "the token {:?} {may}; {needs}",
            token.name
        )));
    }
    Ok(Some(token.name))
}

/// The secret of an `Authorization: Bearer <secret>` header (the scheme in
/// any case, as RFC 9110 has it), if there is one.
fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, secret) = value.split_once(char::is_whitespace)?;
    let secret = secret.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !secret.is_empty()).then(|| secret.to_string())
}

/// Compares two byte strings in time that depends only on their lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// On a private server, every read of the API needs a token (any scope);
/// the OpenAPI document stays open. Writes check their own, narrower need.
pub async fn private_reads(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let read = matches!(*req.method(), Method::GET | Method::HEAD);
    // Inside `/api`, whose prefix the nest strips from the path.
    let openapi = req.uri().path() == "/openapi.json";
    if state.access.private && read && !openapi {
        if let Err(e) = check(req.headers(), &state, Need::ReadRun).await {
            return e.into_response();
        }
    }
    next.run(req).await
}

/// Bounds every request's head (414, 431), then keeps other sites out: the server answers only to
/// host names it is configured for (loopback names, IP addresses, and
/// `--public-host` names), so a DNS-rebound name reads nothing; and a
/// write from another origin (by `Sec-Fetch-Site`, or an `Origin` that is
/// not the `Host`) is refused, so a page the user visits cannot create,
/// capture or re-analyze through the user's browser.
pub async fn same_site(
    axum::extract::State(state): axum::extract::State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    // Who the per-client limits count this request against.
    if let Some(peer) = limits::client_ip(req.extensions()) {
        let client = state.access.proxies.client(peer, req.headers());
        req.extensions_mut().insert(limits::Client(client));
    }
    if let Some(e) = head_too_large(&req) {
        return e.into_response();
    }
    let host = request_host(&req);
    if !host_allowed(&host, &state.access.public_hosts) {
        return ApiError::MisdirectedHost(format!(
            "this server does not answer to the host name {:?}; start it with \
             `--public-host {}` to serve that name",
            host,
            host_name(&host)
        ))
        .into_response();
    }
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe {
        if let Some(why) = cross_site(req.headers(), &host) {
            return ApiError::Forbidden(why).into_response();
        }
    }
    next.run(req).await
}

/// The longest request target answered, bytes: a longer one gets 414
/// (JSON, with the security headers) before hyper's own, larger limit.
pub const MAX_URI_BYTES: usize = 16 << 10;
/// The most header bytes, and headers, a request may carry: past them 431
/// (JSON), before hyper's own limits.
pub const MAX_HEADER_BYTES: usize = 64 << 10;
/// See [`MAX_HEADER_BYTES`].
pub const MAX_HEADERS: usize = 100;

/// The request head's bounds, answered as `{error, detail}` with the
/// security headers (hyper's own answers past its limits are bare).
fn head_too_large(req: &Request) -> Option<ApiError> {
    let target = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if target > MAX_URI_BYTES {
        return Some(ApiError::UriTooLong(format!(
            "the request's target is {target} bytes; at most {MAX_URI_BYTES} are read"
        )));
    }
    let headers = req.headers();
    let bytes: usize = headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    if headers.len() > MAX_HEADERS || bytes > MAX_HEADER_BYTES {
        return Some(ApiError::HeadersTooLarge(format!(
            "the request has {} headers in {bytes} bytes; at most {MAX_HEADERS} in \
             {MAX_HEADER_BYTES} bytes are read",
            headers.len()
        )));
    }
    None
}

/// The request's `host[:port]`, lower case: the `Host` header, or the
/// authority of an HTTP/2 request.
fn request_host(req: &Request) -> String {
    req.headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.as_str().to_string()))
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// The name part of `host[:port]` (IPv6 literals keep their brackets).
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |e| &host[..=e]);
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

/// Whether the server answers to `host`: an IP address (no name to rebind),
/// `localhost` or a name under it, or a configured public host. An empty
/// Host (HTTP/1.0) is let through: no browser sends one.
pub fn host_allowed(host: &str, public_hosts: &[String]) -> bool {
    let name = host_name(host);
    if name.is_empty() {
        return true;
    }
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<std::net::IpAddr>().is_ok()
        || name == "localhost"
        || name.ends_with(".localhost")
        || public_hosts.iter().any(|p| p == name || p == host)
}

/// Why a write is cross-site, if it is: a browser's `Sec-Fetch-Site` says
/// so, or its `Origin` names another host than the one addressed. Tools
/// (curl, the CLI) send neither and pass.
fn cross_site(headers: &HeaderMap, host: &str) -> Option<String> {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        if !matches!(site, "same-origin" | "none") {
            return Some(format!(
                "a write from another site ({site}) is refused: use the dashboard on this \
                 server, the CLI or curl"
            ));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("").trim().to_ascii_lowercase();
        let origin_host = origin.split_once("://").map_or("", |(_, rest)| rest);
        if origin_host != host {
            return Some(format!(
                "a write from another origin ({origin}) is refused: use the dashboard on this \
                 server, the CLI or curl"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        let mut h = HeaderMap::new();
        for v in ["Bearer kst_a", "bearer kst_a", "BEARER   kst_a "] {
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            assert_eq!(bearer(&h).as_deref(), Some("kst_a"), "{v}");
        }
        for v in ["Basic kst_a", "Bearer", "Bearer  ", "kst_a"] {
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            assert_eq!(bearer(&h), None, "{v}");
        }
    }

    #[test]
    fn hosts_are_loopback_ips_or_configured() {
        let public = vec!["kinetoscope.example.com".to_string()];
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "localhost",
            "[::1]:8080",
            "10.1.2.3",
            "app.localhost:1",
            "kinetoscope.example.com",
            "kinetoscope.example.com:443",
            "",
        ] {
            assert!(host_allowed(ok, &public), "{ok}");
        }
        for bad in ["evil.example:8080", "localhost.evil.example", "example.com"] {
            assert!(!host_allowed(bad, &public), "{bad}");
        }
    }

    #[test]
    fn cross_site_writes_are_told_apart() {
        let mut h = HeaderMap::new();
        assert_eq!(cross_site(&h, "127.0.0.1:8080"), None);
        h.insert(header::ORIGIN, "http://127.0.0.1:8080".parse().unwrap());
        assert_eq!(cross_site(&h, "127.0.0.1:8080"), None);
        h.insert("sec-fetch-site", "same-origin".parse().unwrap());
        assert_eq!(cross_site(&h, "127.0.0.1:8080"), None);
        h.insert(header::ORIGIN, "http://evil.example".parse().unwrap());
        assert!(cross_site(&h, "127.0.0.1:8080").is_some());
        h.remove(header::ORIGIN);
        h.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert!(cross_site(&h, "127.0.0.1:8080").is_some());
        h.insert("sec-fetch-site", "same-site".parse().unwrap());
        assert!(cross_site(&h, "127.0.0.1:8080").is_some());
    }

    #[test]
    fn constant_time_eq_compares_bytes() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(constant_time_eq(b"", b""));
    }
}
