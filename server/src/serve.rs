//! The HTTP accept loop: hyper-util's connection builder (HTTP/1.1 and
//! HTTP/2) with a timer, so a client that trickles its request headers is
//! dropped after `--header-timeout-secs`, which `axum::serve` cannot do (it
//! gives hyper no timer). Each connection's address goes into the request's
//! extensions as axum's `ConnectInfo` (the per-client limits read it), and
//! shutdown is graceful: stop accepting, let requests in flight finish.

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// How long a graceful shutdown waits for requests in flight.
const DRAIN: Duration = Duration::from_secs(30);

/// Serves `app` on `listener` until `stop` is cancelled.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    header_timeout: Duration,
    stop: CancellationToken,
) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        // Above `api::auth::MAX_HEADERS`, so that check answers first,
        // as JSON with the security headers.
        .max_headers(2 * crate::api::auth::MAX_HEADERS);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(header_timeout));
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors, say: wait instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let builder = builder.clone();
        let graceful = graceful.watcher();
        let stop = stop.clone();
        tokio::spawn(async move {
            // The auto builder reads the first bytes to tell HTTP/1 from
            // HTTP/2 with no timer of its own: a connection that never
            // speaks is closed here.
            let mut first_byte = [0u8; 1];
            tokio::select! {
                first = tokio::time::timeout(header_timeout, stream.peek(&mut first_byte)) => {
                    if !matches!(first, Ok(Ok(n)) if n > 0) {
                        tracing::debug!(%remote, "no request within the header timeout, or closed");
                        return;
                    }
                }
                _ = stop.cancelled() => return,
            }
            let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo(remote));
                app.clone().oneshot(req)
            });
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            if let Err(e) = graceful.watch(conn).await {
                tracing::debug!(error = %e, %remote, "connection ended");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("requests still in flight after {DRAIN:?}: closing anyway");
    }
}
