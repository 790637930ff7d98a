//! Kinetoscope's server: the `kinetoscope` binary's commands, the HTTP API
//! and the app's static files.
//!
//! - [`config`]: flags and environment variables.
//! - [`api`]: axum handlers, one error type, the router.
//! - [`web`]: the built Leptos app, with deep links.
//! - [`cli`]: `analyze`, `diff`, `upload`, `capture`, `token`, `generate`.

pub mod api;
pub mod cli;
pub mod config;
pub mod serve;
pub mod web;

use anyhow::Context;
use config::{ServeArgs, StoreArgs, WorkerArgs};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use worker::blobs::Blobs;
use worker::db::Db;
use worker::jobs::{Runner, RunnerConfig};

/// Opens the database (running migrations) and the blob store.
pub async fn open_store(store: &StoreArgs) -> anyhow::Result<(Db, Blobs)> {
    let url = store.database_url();
    let db = Db::connect(&url)
        .await
        .with_context(|| format!("opening the database {}", redact(&url)))?;
    let blobs = Blobs::open(&store.blobs())
        .with_context(|| format!("opening the blob store {}", store.blobs()))?;
    Ok((db, blobs))
}

/// The URL without a password, for logs.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://***{}", &url[..s], &url[at..]),
        _ => url.to_string(),
    }
}

fn worker_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    format!(
        "{}:{}:{}",
        host.trim(),
        std::process::id(),
        &api::new_id()[..6]
    )
}

fn runner(
    db: Db,
    blobs: Blobs,
    store: &StoreArgs,
    wake: Arc<Notify>,
    on_stored: Option<worker::jobs::OnStored>,
) -> anyhow::Result<Runner> {
    Ok(Runner {
        db,
        blobs,
        config: Arc::new(RunnerConfig {
            worker_id: worker_id(),
            limits: store.limits(),
            poll: Duration::from_millis(1000),
            engines: store.engines()?,
            capture_timeout: Duration::from_secs(store.capture_timeout_secs),
            capture_idle: Duration::from_secs(store.capture_idle_secs),
            lease: Duration::from_secs(store.lease_secs.max(1)),
            analysis_deadline: Duration::from_secs(store.analysis_deadline_secs.max(1)),
            // Test-only fault injection (see worker::jobs::RunnerConfig).
            analysis_delay: Duration::from_millis(
                std::env::var("KINETOSCOPE_FAULT_ANALYSIS_DELAY_MS")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
            ),
        }),
        wake,
        on_stored,
    })
}

/// A server started by [`start`].
pub struct Running {
    /// The address it listens on.
    pub addr: SocketAddr,
    stop: CancellationToken,
    done: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops accepting connections, lets in-flight requests and jobs
    /// finish, and waits.
    pub async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.done.await;
    }

    /// Waits until the server stops (it stops on [`Running::shutdown`] or a signal).
    pub async fn wait(self) {
        let _ = self.done.await;
    }
}

/// Starts the server (and its embedded worker) in this process.
pub async fn start(args: ServeArgs) -> anyhow::Result<Running> {
    let (db, blobs) = open_store(&args.store).await?;
    let engines = args.store.engines()?;
    let wake = Arc::new(Notify::new());
    let stop = CancellationToken::new();

    // Remove interrupted uploads and the blobs of deleted runs, in the background.
    {
        let (db, blobs) = (db.clone(), blobs.clone());
        let age = Duration::from_secs(args.orphan_age_secs);
        tokio::spawn(async move {
            // An upload a stopped process left open is deleted first, so
            // its blobs go too.
            worker::jobs::delete_abandoned_uploads(&db, &blobs, age).await;
            let exists = |id: String| {
                let db = db.clone();
                async move { db.run_exists(&id).await.unwrap_or(true) }
            };
            match blobs.sweep_orphans(age, exists).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(removed = n, "removed orphaned blobs"),
                Err(e) => tracing::warn!(error = %e, "orphan sweep failed"),
            }
        });
    }

    let state = api::AppState {
        db: db.clone(),
        blobs: blobs.clone(),
        wake: wake.clone(),
        max_upload_bytes: args.max_upload_bytes,
        max_trace_bytes: args.store.max_trace_bytes,
        write_rate: api::limits::WriteRate::new(args.writes_per_minute, args.limit_loopback),
        upload_slots: api::limits::UploadSlots::new(
            args.max_uploads_per_client,
            args.limit_loopback,
        ),
        upload_pace: api::pace::UploadPace {
            window: std::time::Duration::from_secs(args.upload_pace_window_secs.max(1)),
            min_bytes_per_sec: args.upload_min_bytes_per_sec,
        },
        engines: Arc::new(engines),
        cache: Arc::new(api::answer_cache(args.answer_cache_mb << 20)),
        summaries: Arc::new(api::summary_cache(args.summary_cache_mb << 20)),
        artifacts: worker::artifacts::Artifacts::new(db.clone(), blobs.clone()),
        timelines: Arc::new(api::timeline::index_cache(args.timeline_cache_mb << 20)),
        frame_ancestors: args.frame_ancestors.clone(),
        http: worker::engines::client(),
        engine_probe: Arc::new(tokio::sync::Mutex::new(None)),
        access: Arc::new(api::auth::Access::new(
            args.auth,
            args.private,
            // A name the server was told to listen on is one it answers to.
            args.public_host
                .iter()
                .cloned()
                .chain(
                    args.listen
                        .rsplit_once(':')
                        .map(|(h, _)| h.to_string())
                        .filter(|h| h.parse::<std::net::IpAddr>().is_err() && !h.starts_with('[')),
                )
                .collect(),
            api::limits::TrustedProxies::parse(&args.trusted_proxy)
                .map_err(|e| anyhow::anyhow!("--trusted-proxy: {e}"))?,
        )),
    };
    // The embedded worker's analyses warm this process's timeline cache.
    let warm = {
        let state = state.clone();
        Arc::new(move |run: &str, rank: i64| api::timeline::warm(&state, run, rank))
            as worker::jobs::OnStored
    };
    let app = api::router(state, args.static_dir.clone());
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr()?;

    let jobs = if args.workers > 0 {
        let r = runner(
            db.clone(),
            blobs.clone(),
            &args.store,
            wake.clone(),
            Some(warm),
        )?;
        let stop = stop.clone();
        let n = args.workers;
        Some(tokio::spawn(async move { r.run(n, stop).await }))
    } else {
        None
    };
    let shutdown = stop.clone();
    let header_timeout = std::time::Duration::from_secs(args.header_timeout_secs.max(1));
    let done = tokio::spawn(async move {
        serve::serve(listener, app, header_timeout, shutdown).await;
        if let Some(j) = jobs {
            let _ = j.await;
        }
        db.close().await;
    });
    Ok(Running { addr, stop, done })
}

/// Waits for Ctrl-C or SIGTERM, then cancels `stop`.
pub fn stop_on_signal(stop: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        let term = async {
            if let Ok(mut s) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            {
                s.recv().await;
            }
        };
        #[cfg(not(unix))]
        let term = std::future::pending::<()>();
        tokio::select! {
            _ = ctrl_c => {}
            _ = term => {}
        }
        tracing::info!("shutting down: finishing in-flight requests and jobs");
        stop.cancel();
    });
}

/// `kinetoscope serve`.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let running = start(args.clone()).await?;
    let data = args.store.data.display().to_string();
    println!("Kinetoscope is listening on http://{}", running.addr);
    println!(
        "  database: {}   blobs: {}   embedded workers: {}",
        redact(&args.store.database_url()),
        args.store.blobs(),
        args.workers
    );
    println!(
        "  upload:   curl -sS --data-binary @trace.json.gz 'http://{}/api/runs?name=baseline'",
        running.addr
    );
    tracing::info!(addr = %running.addr, data = %data, "listening");
    stop_on_signal(running.stop.clone());
    running.wait().await;
    Ok(())
}

/// `kinetoscope worker`: runs jobs only, until a signal.
pub async fn run_worker(args: WorkerArgs) -> anyhow::Result<()> {
    let (db, blobs) = open_store(&args.store).await?;
    let stop = CancellationToken::new();
    stop_on_signal(stop.clone());
    let r = runner(
        db.clone(),
        blobs,
        &args.store,
        Arc::new(Notify::new()),
        None,
    )?;
    tracing::info!(workers = args.workers, "worker started");
    eprintln!(
        "Kinetoscope worker running {} job loop(s)",
        args.workers.max(1)
    );
    r.run(args.workers.max(1), stop).await;
    db.close().await;
    Ok(())
}
