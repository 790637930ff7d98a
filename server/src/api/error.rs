//! The one error type of the HTTP API, mapped to status codes with a JSON
//! body `{error, detail}`. Internal causes are logged, never sent.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use kinetoscope_types::ApiError as Body;

/// An API failure.
#[derive(Debug)]
pub enum ApiError {
    /// 400: the request is malformed or the upload is not a trace.
    BadRequest(String),
    /// 401: a token is needed or the one given is not valid.
    Unauthorized(String),
    /// 403: the token is valid but its scope does not allow this.
    Forbidden(String),
    /// 408: the request arrived too slowly.
    RequestTimeout(String),
    /// 404: no such run (or route).
    NotFound(String),
    /// 405: the route exists, not with this method.
    MethodNotAllowed(String),
    /// 409: the request conflicts with the run's state.
    Conflict(String),
    /// 413: the upload exceeds the size limit.
    TooLarge(String),
    /// 414: the request's target is too long.
    UriTooLong(String),
    /// 431: the request's headers are too many or too large.
    HeadersTooLarge(String),
    /// 415: the body's content type cannot be read.
    UnsupportedMedia(String),
    /// 421: the request names a host this server does not answer to (a
    /// DNS-rebound name, say).
    MisdirectedHost(String),
    /// 422: well-formed but unusable (e.g. an unknown engine).
    Unprocessable(String),
    /// 502: an engine the server talked to failed.
    BadGateway(String),
    /// 429: this client is over a limit (concurrent uploads).
    TooManyRequests(String),
    /// 507: the storage is full; nothing of the request was kept.
    InsufficientStorage(String),
    /// 503: a dependency (database, blob store) is unavailable.
    Unavailable(String),
    /// 500: a bug or an unexpected failure; the cause is logged.
    Internal(String),
}

impl ApiError {
    fn parts(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            ApiError::RequestTimeout(_) => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            ApiError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            ApiError::UriTooLong(_) => (StatusCode::URI_TOO_LONG, "uri_too_long"),
            ApiError::HeadersTooLarge(_) => (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "headers_too_large",
            ),
            ApiError::UnsupportedMedia(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            ApiError::MisdirectedHost(_) => (StatusCode::MISDIRECTED_REQUEST, "misdirected_host"),
            ApiError::Unprocessable(_) => (StatusCode::UNPROCESSABLE_ENTITY, "unprocessable"),
            ApiError::TooManyRequests(_) => (StatusCode::TOO_MANY_REQUESTS, "too_many_requests"),
            ApiError::BadGateway(_) => (StatusCode::BAD_GATEWAY, "bad_gateway"),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ApiError::InsufficientStorage(_) => {
                (StatusCode::INSUFFICIENT_STORAGE, "insufficient_storage")
            }
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }

    /// The standard "no such run" error.
    pub fn no_run() -> ApiError {
        ApiError::NotFound("no run with this id".into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.parts();
        // These answer an upload whose body may be left unread, and hyper
        // then closes the connection. Saying so keeps a client from pooling
        // it: a client that reuses it sees its next request cut off
        // (`IncompleteMessage`, once in a clean-clone `make test`).
        let closes = matches!(
            self,
            ApiError::TooLarge(_) | ApiError::RequestTimeout(_) | ApiError::InsufficientStorage(_)
        );
        let detail = match self {
            ApiError::Internal(cause) => {
                tracing::error!(%cause, "internal error");
                "internal error; the cause is in the server's log".to_string()
            }
            ApiError::Unavailable(cause) => {
                tracing::warn!(%cause, "dependency unavailable");
                "a backing service (database or blob store) is unavailable; try again".to_string()
            }
            ApiError::BadRequest(d)
            | ApiError::Unauthorized(d)
            | ApiError::Forbidden(d)
            | ApiError::NotFound(d)
            | ApiError::MethodNotAllowed(d)
            | ApiError::RequestTimeout(d)
            | ApiError::Conflict(d)
            | ApiError::TooLarge(d)
            | ApiError::UnsupportedMedia(d)
            | ApiError::UriTooLong(d)
            | ApiError::HeadersTooLarge(d)
            | ApiError::MisdirectedHost(d)
            | ApiError::Unprocessable(d)
            | ApiError::TooManyRequests(d)
            | ApiError::BadGateway(d)
            | ApiError::InsufficientStorage(d) => d,
        };
        let mut response = (
            status,
            Json(Body {
                error: code.into(),
                detail,
            }),
        )
            .into_response();
        if closes {
            response.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        response
    }
}

impl From<worker::db::DbError> for ApiError {
    fn from(e: worker::db::DbError) -> Self {
        match e {
            ref full if worker::db::is_storage_full(full) => {
                ApiError::InsufficientStorage(full_database(&e))
            }
            worker::db::DbError::PoolTimedOut | worker::db::DbError::Io(_) => {
                ApiError::Unavailable(e.to_string())
            }
            other => ApiError::Internal(format!("database: {other}")),
        }
    }
}

/// The detail of a database that has run out of space (the cause is logged).
fn full_database(e: &worker::db::DbError) -> String {
    tracing::error!(error = %e, "the database is out of space");
    "the server's storage is full: nothing of this request was kept; \
     try again once space is freed"
        .into()
}

impl From<worker::blobs::BlobError> for ApiError {
    fn from(e: worker::blobs::BlobError) -> Self {
        match e {
            worker::blobs::BlobError::NotFound { .. } => {
                ApiError::NotFound("the stored trace is missing".into())
            }
            other => ApiError::Internal(format!("blob store: {other}")),
        }
    }
}

impl From<worker::artifacts::ArtifactError> for ApiError {
    fn from(e: worker::artifacts::ArtifactError) -> Self {
        match e {
            worker::artifacts::ArtifactError::Db(e) => e.into(),
            worker::artifacts::ArtifactError::Blob(e) => e.into(),
        }
    }
}

/// Result of an API handler.
pub type ApiResult<T> = Result<T, ApiError>;
