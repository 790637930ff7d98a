//! Captures from inference engines, against a fake engine.
//!
//! The fake engine stands in for a GPU inference engine (no GPU is
//! available to these tests). It implements the HTTP contract written in
//! issue #7 ("Capture from a running inference engine"), exactly:
//!
//! - SGLang: `POST /start_profile` with JSON `{output_dir, num_steps,
//!   activities, record_shapes, with_stack, profile_by_stage}` answers 200
//!   `Start profiling.` at once; with `num_steps` nothing else signals
//!   completion: `{profile_id}-TP-{rank}.trace.json.gz` files appear in
//!   `output_dir`, written non-atomically, after `num_steps` steps; without
//!   `num_steps`, `POST /stop_profile` answers 200 after every rank has
//!   written. Starting while a profile runs, and stopping when none runs,
//!   answer 500. An idle engine never advances steps.
//! - vLLM: `POST /start_profile` and `POST /stop_profile` take no body and
//!   answer 200; stop answers after the files are written: a
//!   `*.pt.trace.json.gz` per worker, and `profiler_out_{rank}.txt` after
//!   each rank's trace.
//!
//! The traces it writes are real: the 8-rank DLRM job from ../shared/traces.

use crate::common::*;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use kinetoscope_types::{Created, EngineInfo, RanksSummary};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(120);

#[derive(Default)]
struct EngineState {
    profiling: bool,
    /// Bumped by every start, so a finished profile writes once.
    generation: u64,
    output_dir: Option<PathBuf>,
    starts: u32,
    stops: u32,
}

#[derive(Clone)]
struct Fake {
    flavour: &'static str,
    ranks: usize,
    /// Whether requests are being served, so steps advance.
    busy: bool,
    step: Duration,
    /// vLLM writes here (the folder it was started with).
    trace_dir: PathBuf,
    /// Pause in the middle of writing each rank's file.
    pause: Duration,
    /// Pause before the second half of the last rank (half-written test).
    last_rank_pause: Duration,
    state: Arc<Mutex<EngineState>>,
}

fn source(rank: usize) -> PathBuf {
    shared_trace(&format!("param-dlrm-v100-8rank-rank{}.json.gz", rank % 8))
}

impl Fake {
    /// Writes every rank's trace the way engines do: not atomically.
    async fn write_ranks(&self, dir: &Path, profile_id: u64) {
        for r in 0..self.ranks {
            let bytes = std::fs::read(source(r)).unwrap();
            let name = match self.flavour {
                "sglang" => format!("{profile_id}-TP-{r}.trace.json.gz"),
                _ => format!("worker_{r}.{profile_id}.pt.trace.json.gz"),
            };
            let path = dir.join(name);
            let half = bytes.len() / 2;
            std::fs::write(&path, &bytes[..half]).unwrap();
            let pause = if r + 1 == self.ranks && !self.last_rank_pause.is_zero() {
                self.last_rank_pause
            } else {
                self.pause
            };
            tokio::time::sleep(pause).await;
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            f.write_all(&bytes[half..]).unwrap();
            drop(f);
            if self.flavour == "vllm" {
                std::fs::write(
                    dir.join(format!("profiler_out_{r}.txt")),
                    "profile summary\n",
                )
                .unwrap();
            }
        }
    }
}

async fn health() -> &'static str {
    "ok"
}

async fn sglang_start(State(f): State<Fake>, body: axum::body::Bytes) -> (StatusCode, String) {
    let req: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()),
    };
    let (generation, dir) = {
        let mut s = f.state.lock().unwrap();
        if s.profiling {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                "Profiling is already in progress. Call /stop_profile first.".into(),
            );
        }
        s.profiling = true;
        s.generation += 1;
        s.starts += 1;
        let dir = PathBuf::from(req["output_dir"].as_str().unwrap_or("/tmp"));
        s.output_dir = Some(dir.clone());
        (s.generation, dir)
    };
    if let Some(steps) = req["num_steps"].as_u64() {
        let f2 = f.clone();
        tokio::spawn(async move {
            if !f2.busy {
                return; // an idle engine never advances steps
            }
            tokio::time::sleep(f2.step * steps as u32).await;
            let mine = {
                let s = f2.state.lock().unwrap();
                s.profiling && s.generation == generation
            };
            if mine {
                f2.write_ranks(&dir, generation).await;
                f2.state.lock().unwrap().profiling = false;
            }
        });
    }
    (StatusCode::OK, "Start profiling.".into())
}

async fn sglang_stop(State(f): State<Fake>) -> (StatusCode, String) {
    let (generation, dir) = {
        let mut s = f.state.lock().unwrap();
        if !s.profiling {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                "Profiling is not in progress. Call /start_profile first.".into(),
            );
        }
        s.profiling = false;
        s.stops += 1;
        (s.generation, s.output_dir.clone().unwrap())
    };
    f.write_ranks(&dir, generation).await;
    (
        StatusCode::OK,
        "Stop profiling. This will take some time.".into(),
    )
}

async fn vllm_start(State(f): State<Fake>) -> StatusCode {
    let mut s = f.state.lock().unwrap();
    s.profiling = true;
    s.generation += 1;
    s.starts += 1;
    StatusCode::OK
}

async fn vllm_stop(State(f): State<Fake>) -> StatusCode {
    let generation = {
        let mut s = f.state.lock().unwrap();
        s.profiling = false;
        s.stops += 1;
        s.generation
    };
    f.write_ranks(&f.trace_dir.clone(), generation).await;
    StatusCode::OK
}

/// Starts a fake engine; returns its URL.
async fn start_fake(f: Fake) -> String {
    let app = match f.flavour {
        "sglang" => Router::new()
            .route("/start_profile", post(sglang_start))
            .route("/stop_profile", post(sglang_stop)),
        _ => Router::new()
            .route("/start_profile", post(vllm_start))
            .route("/stop_profile", post(vllm_stop)),
    }
    .route("/health", get(health))
    .with_state(f);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn fake(flavour: &'static str, ranks: usize, trace_dir: &Path) -> Fake {
    Fake {
        flavour,
        ranks,
        busy: true,
        step: Duration::from_millis(20),
        trace_dir: trace_dir.to_path_buf(),
        pause: Duration::from_millis(150),
        last_rank_pause: Duration::ZERO,
        state: Arc::new(Mutex::new(EngineState::default())),
    }
}

async fn server_for(engines: serde_json::Value) -> TestServer {
    TestServer::start(Opts {
        engines: Some(engines.to_string()),
        capture_idle_secs: 2,
        capture_timeout_secs: 60,
        workers: 4,
        ..Default::default()
    })
    .await
}

async fn capture(srv: &TestServer, engine: &str, steps: u32) -> reqwest::Response {
    srv.http
        .post(format!("{}/api/captures", srv.url))
        .json(&serde_json::json!({"engine": engine, "num_steps": steps, "name": "captured"}))
        .send()
        .await
        .unwrap()
}

/// Polls the run, recording every (status, stage) seen, until it ends.
async fn follow(srv: &TestServer, id: &str) -> (kinetoscope_types::RunInfo, Vec<String>) {
    let mut seen: Vec<String> = Vec::new();
    let start = Instant::now();
    loop {
        let r = srv.run(id).await;
        let now = format!("{}: {}", r.status, r.stage);
        if seen.last() != Some(&now) {
            seen.push(now);
        }
        if matches!(r.status.as_str(), "done" | "failed") && r.stage.is_empty() {
            return (r, seen);
        }
        assert!(
            start.elapsed() < LONG,
            "run {id} still {} ({})",
            r.status,
            r.stage
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_8_rank_sglang_capture_becomes_one_run() {
    let traces = tempfile::tempdir().unwrap();
    let f = fake("sglang", 8, traces.path());
    let state = f.state.clone();
    let url = start_fake(f).await;
    let srv = server_for(serde_json::json!([
        {"name": "glm5-tp8", "url": url, "flavour": "sglang", "trace_dir": traces.path(), "ranks": 8}
    ]))
    .await;
    let resp = capture(&srv, "glm5-tp8", 5).await;
    assert_eq!(resp.status(), 201);
    let created: Created = resp.json().await.unwrap();
    assert_eq!(created.run_id.as_deref(), Some(created.id.as_str()));
    let (run, seen) = follow(&srv, &created.id).await;
    assert_eq!(
        run.status,
        kinetoscope_types::RunStatus::Done,
        "{:?} {seen:?}",
        run.error
    );
    assert!(
        seen.iter().any(|s| s.starts_with("capturing: collecting")),
        "{seen:?}"
    );
    assert!(seen.iter().any(|s| s.contains("analyzing")), "{seen:?}");

    // Eight ranks, each stored complete, in rank order.
    assert_eq!(run.ranks.len(), 8);
    for (r, rank) in run.ranks.iter().enumerate() {
        assert_eq!(rank.rank, r as i64);
        assert!(
            rank.file.ends_with(&format!("-TP-{r}.trace.json.gz")),
            "{}",
            rank.file
        );
        assert_eq!(
            rank.sha256,
            worker::blobs::sha256_hex(&std::fs::read(source(r)).unwrap()),
            "rank {r}"
        );
        assert_eq!(rank.status, kinetoscope_types::RunStatus::Done);
    }
    let cross: RanksSummary = srv
        .get_json(&format!("/api/runs/{}/ranks", created.id))
        .await;
    assert_eq!(cross.ranks.len(), 8);
    assert!(cross.slowest_rank.is_some());
    assert!(
        cross.ranks.iter().all(|r| r.collective_us > 0.0),
        "nccl time per rank"
    );
    assert!(!cross.top_ops.is_empty() && cross.top_ops[0].pct.len() == 8);
    // The capture folder is cleaned up; the engine was started once.
    assert_eq!(std::fs::read_dir(traces.path()).unwrap().count(), 0);
    assert_eq!(state.lock().unwrap().starts, 1);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_engine_fails_the_capture_with_the_reason() {
    let traces = tempfile::tempdir().unwrap();
    let mut f = fake("sglang", 8, traces.path());
    f.busy = false;
    let state = f.state.clone();
    let url = start_fake(f).await;
    let srv = server_for(serde_json::json!([
        {"name": "idle", "url": url, "flavour": "sglang", "trace_dir": traces.path(), "ranks": 8}
    ]))
    .await;
    let created: Created = capture(&srv, "idle", 5).await.json().await.unwrap();
    let (run, _) = follow(&srv, &created.id).await;
    assert_eq!(run.status, kinetoscope_types::RunStatus::Failed);
    assert_eq!(
        run.error.as_deref(),
        Some("engine idle: no steps ran in 2 s")
    );
    // The worker stopped the profile so the next capture can start.
    let seen = {
        let s = state.lock().unwrap();
        (s.starts, s.stops, s.profiling)
    };
    assert_eq!(seen, (1, 1, false));
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_written_rank_is_not_ingested_early() {
    let traces = tempfile::tempdir().unwrap();
    let mut f = fake("sglang", 8, traces.path());
    f.pause = Duration::from_millis(10);
    f.last_rank_pause = Duration::from_secs(3);
    let url = start_fake(f).await;
    let srv = server_for(serde_json::json!([
        {"name": "slow-writer", "url": url, "flavour": "sglang", "trace_dir": traces.path(), "ranks": 8}
    ]))
    .await;
    let created: Created = capture(&srv, "slow-writer", 2).await.json().await.unwrap();
    // While rank 7's file is half written, 7 of 8 ranks count.
    let start = Instant::now();
    loop {
        let r = srv.run(&created.id).await;
        if r.stage == "collecting 7/8 ranks" {
            break;
        }
        assert_ne!(r.stage, "collecting 8/8 ranks");
        assert!(
            start.elapsed() < LONG,
            "never saw 7 of 8: {} {}",
            r.status,
            r.stage
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let r = srv.run(&created.id).await;
    assert_eq!(
        (r.status.as_str(), r.stage.as_str()),
        ("capturing", "collecting 7/8 ranks"),
        "the partial file waits"
    );
    let (run, _) = follow(&srv, &created.id).await;
    assert_eq!(run.status, kinetoscope_types::RunStatus::Done);
    assert_eq!(
        run.ranks[7].sha256,
        worker::blobs::sha256_hex(&std::fs::read(source(7)).unwrap()),
        "rank 7 stored complete"
    );
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vllm_capture_collects_the_new_files() {
    let traces = tempfile::tempdir().unwrap();
    // A file from an earlier profile is in the shared folder: not ours.
    std::fs::copy(source(0), traces.path().join("old.1.pt.trace.json.gz")).unwrap();
    let url = start_fake(fake("vllm", 4, traces.path())).await;
    let srv = server_for(serde_json::json!([
        {"name": "vllm-tp4", "url": url, "flavour": "vllm", "trace_dir": traces.path(), "ranks": 4, "seconds_per_step": 0.01}
    ]))
    .await;
    let created: Created = capture(&srv, "vllm-tp4", 10).await.json().await.unwrap();
    let (run, seen) = follow(&srv, &created.id).await;
    assert_eq!(
        run.status,
        kinetoscope_types::RunStatus::Done,
        "{:?} {seen:?}",
        run.error
    );
    assert_eq!(run.ranks.len(), 4);
    assert!(
        run.ranks.iter().all(|r| r.file.starts_with("worker_")),
        "{:?}",
        run.ranks
    );
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_refuses_fails_the_capture_and_unknown_engines_are_refused() {
    let traces = tempfile::tempdir().unwrap();
    let f = fake("sglang", 2, traces.path());
    f.state.lock().unwrap().profiling = true; // someone else is profiling
    let url = start_fake(f).await;
    let srv = server_for(serde_json::json!([
        {"name": "busy", "url": url, "flavour": "sglang", "trace_dir": traces.path(), "ranks": 2},
        {"name": "down", "url": "http://127.0.0.1:9", "flavour": "vllm", "trace_dir": traces.path(), "ranks": 1}
    ]))
    .await;
    let created: Created = capture(&srv, "busy", 3).await.json().await.unwrap();
    let (run, _) = follow(&srv, &created.id).await;
    assert_eq!(run.status, kinetoscope_types::RunStatus::Failed);
    let reason = run.error.unwrap();
    assert!(
        reason.contains("500") && reason.contains("already in progress"),
        "{reason}"
    );

    // Only configured engines, by name.
    for engine in [
        "nope",
        "http://127.0.0.1:22/",
        "127.0.0.1:30000/start_profile",
    ] {
        let resp = capture(&srv, engine, 3).await;
        assert_eq!(resp.status(), 422, "{engine}");
    }
    let engines: Vec<EngineInfo> = srv.get_json("/api/engines").await;
    let by_name = |n: &str| engines.iter().find(|e| e.name == n).unwrap().clone();
    assert!(by_name("busy").reachable);
    assert!(!by_name("down").reachable && by_name("down").detail.is_some());
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_capture_command_follows_the_run() {
    let traces = tempfile::tempdir().unwrap();
    let url = start_fake(fake("sglang", 2, traces.path())).await;
    let srv = server_for(serde_json::json!([
        {"name": "tp2", "url": url, "flavour": "sglang", "trace_dir": traces.path(), "ranks": 2}
    ]))
    .await;
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
        .args([
            "capture", "--engine", "tp2", "--steps", "3", "--name", "baseline", "--server",
            &srv.url,
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let link = String::from_utf8(out.stdout).unwrap();
    let run = srv.run(link.trim().rsplit('/').next().unwrap()).await;
    assert_eq!(
        (run.status.as_str(), run.name.as_str(), run.ranks.len()),
        ("done", "baseline", 2)
    );
    // It printed the run's progress as it went, ending with done.
    let progress = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(progress.lines().last(), Some("done"), "{progress}");
    srv.stop().await;
}

/// An engine that answers `start_profile` with a redirect (to another host
/// and port, here a real engine) is not followed: the capture fails with
/// the engine's answer, and the engine it pointed at is never started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirecting_engine_is_not_followed() {
    let traces = tempfile::tempdir().unwrap();
    let f = fake("sglang", 1, traces.path());
    let state = f.state.clone();
    let target = start_fake(f).await;
    let to = format!("{target}/start_profile");
    let app = Router::new()
        .route(
            "/start_profile",
            post(move || {
                let to = to.clone();
                async move { axum::response::Redirect::temporary(&to) }
            }),
        )
        .route("/health", get(health));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    // An engine that answers every request with a redirect, health too.
    let only = Router::new()
        .fallback(|| async { axum::response::Redirect::temporary("http://127.0.0.1:9/health") });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let only_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, only).await });
    let srv = server_for(serde_json::json!([
        {"name": "redirects", "url": url, "flavour": "sglang", "trace_dir": traces.path(), "ranks": 1},
        {"name": "only-redirects", "url": only_url, "flavour": "vllm", "trace_dir": traces.path(), "ranks": 1}
    ]))
    .await;
    let created: Created = capture(&srv, "redirects", 2).await.json().await.unwrap();
    let (run, _) = follow(&srv, &created.id).await;
    assert_eq!(run.status, kinetoscope_types::RunStatus::Failed);
    let error = run.error.unwrap_or_default();
    assert!(error.contains("307"), "{error}");
    assert_eq!(state.lock().unwrap().starts, 0, "the redirect was followed");
    // The refused capture left no folder behind.
    let left: Vec<_> = std::fs::read_dir(traces.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("kinetoscope-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // An engine that only redirects is not reachable.
    let engines: Vec<EngineInfo> = srv.get_json("/api/engines").await;
    let only = engines.iter().find(|e| e.name == "only-redirects").unwrap();
    assert!(!only.reachable, "{only:?}");
    assert!(
        only.detail
            .as_deref()
            .is_some_and(|d| d.contains("redirect")),
        "{only:?}"
    );
    srv.stop().await;
}
