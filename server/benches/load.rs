//! Service load benchmark (`make bench`): a real server on loopback, 20
//! concurrent uploads, then 200 concurrent summary reads, then the timeline
//! of the founding story's trace (index load, full-screen windows). Prints
//! latencies; asserts only that nothing failed.

use std::sync::Arc;
use std::time::{Duration, Instant};

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p / 100.0).round() as usize]
}

fn report(what: &str, mut lat: Vec<Duration>, wall: Duration) {
    lat.sort();
    println!(
        "{what:<40} n={:<5} p50 {:>7.1} ms  p95 {:>7.1} ms  p99 {:>7.1} ms  max {:>7.1} ms  ({:.0} req/s)",
        lat.len(),
        pct(&lat, 50.0).as_secs_f64() * 1e3,
        pct(&lat, 95.0).as_secs_f64() * 1e3,
        pct(&lat, 99.0).as_secs_f64() * 1e3,
        lat.last().unwrap().as_secs_f64() * 1e3,
        lat.len() as f64 / wall.as_secs_f64()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let data = tempfile::tempdir().unwrap();
    let args = server::config::ServeArgs {
        store: server::config::StoreArgs {
            data: data.path().to_path_buf(),
            database_url: None,
            blobs: None,
            max_trace_bytes: 16 << 30,
            max_depth: 64,
            engines: None,
            capture_timeout_secs: 600,
            capture_idle_secs: 120,
            lease_secs: 30,
            analysis_deadline_secs: 600,
        },
        listen: "127.0.0.1:0".into(),
        workers: 2,
        static_dir: "/nonexistent".into(),
        max_upload_bytes: 8 << 30,
        upload_min_bytes_per_sec: 1024,
        upload_pace_window_secs: 30,
        header_timeout_secs: 30,
        max_uploads_per_client: 4,
        limit_loopback: false,
        writes_per_minute: 120,
        orphan_age_secs: 3600,
        timeline_cache_mb: 512,
        frame_ancestors: "'none'".into(),
        auth: server::api::auth::AuthMode::Open,
        private: false,
        public_host: Vec::new(),
        trusted_proxy: Vec::new(),
        answer_cache_mb: 64,
        summary_cache_mb: 128,
    };
    let running = server::start(args).await.unwrap();
    let url = format!("http://{}", running.addr);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .unwrap();

    // 20 distinct traces (5 steps x 78 layers each, ~1 MB of zstd).
    let traces: Vec<Vec<u8>> = (0..20u64)
        .map(|k| {
            let p = kinetoscope_generate::DecodeParams {
                steps: 5,
                layers: 78,
                with_stack: false,
                seed: k + 1,
                ..Default::default()
            };
            let mut json = Vec::new();
            kinetoscope_generate::write_decode_trace(&p, &mut json).unwrap();
            zstd::encode_all(&json[..], 3).unwrap()
        })
        .collect();
    println!(
        "server on {url} (SQLite, 2 embedded job loops); uploads of {:.1} MB each",
        traces[0].len() as f64 / 1e6
    );

    let t0 = Instant::now();
    let uploads = traces.into_iter().enumerate().map(|(k, body)| {
        let (http, url) = (http.clone(), url.clone());
        tokio::spawn(async move {
            let t = Instant::now();
            let resp = http
                .post(format!("{url}/api/runs?name=load-{k}"))
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 201);
            let c: kinetoscope_types::Created = resp.json().await.unwrap();
            (t.elapsed(), c.id)
        })
    });
    let mut ids = Vec::new();
    let mut lat = Vec::new();
    for u in futures::future::join_all(uploads).await {
        let (d, id) = u.unwrap();
        lat.push(d);
        ids.push(id);
    }
    report("20 concurrent uploads (201 Created)", lat, t0.elapsed());

    // Wait for the analyses.
    let t0 = Instant::now();
    for id in &ids {
        loop {
            let r: kinetoscope_types::RunInfo = http
                .get(format!("{url}/api/runs/{id}"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if r.status == kinetoscope_types::RunStatus::Done {
                break;
            }
            assert_ne!(r.status, kinetoscope_types::RunStatus::Failed);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    println!(
        "all 20 analyzed {:.1} s after the last upload",
        t0.elapsed().as_secs_f64()
    );

    // 200 concurrent readers, 10 reads each, of stored summaries and views.
    for route in ["summary", "view"] {
        let ids = Arc::new(ids.clone());
        let t0 = Instant::now();
        let readers = (0..200usize).map(|r| {
            let (http, url, ids) = (http.clone(), url.clone(), ids.clone());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                for k in 0..10 {
                    let id = &ids[(r + k) % ids.len()];
                    let t = Instant::now();
                    let resp = http
                        .get(format!("{url}/api/runs/{id}/{route}"))
                        .send()
                        .await
                        .unwrap();
                    assert!(resp.status().is_success());
                    resp.bytes().await.unwrap();
                    lat.push(t.elapsed());
                }
                lat
            })
        });
        let lat: Vec<Duration> = futures::future::join_all(readers)
            .await
            .into_iter()
            .flat_map(|r| r.unwrap())
            .collect();
        report(
            &format!("200 concurrent readers: /{route}"),
            lat,
            t0.elapsed(),
        );
    }
    timeline(&http, &url).await;
    running.shutdown().await;
}

/// The timeline on the founding story's trace (30 steps x 78 layers, the
/// realistic mix): loading the index from the blob store, then full-screen
/// windows (every track of the rank at 1920 px) at zoom levels from the
/// whole trace down to one kernel.
async fn timeline(http: &reqwest::Client, url: &str) {
    let p = kinetoscope_generate::DecodeParams::default();
    let mut json = Vec::new();
    kinetoscope_generate::write_decode_trace(&p, &mut json).unwrap();
    let body = zstd::encode_all(&json[..], 3).unwrap();
    drop(json);
    let resp = http
        .post(format!("{url}/api/runs?name=timeline"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let c: kinetoscope_types::Created = resp.json().await.unwrap();
    loop {
        let r: kinetoscope_types::RunInfo = http
            .get(format!("{url}/api/runs/{}", c.id))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if r.status == kinetoscope_types::RunStatus::Done {
            break;
        }
        assert_ne!(
            r.status,
            kinetoscope_types::RunStatus::Failed,
            "{:?}",
            r.error
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The first request loads the index from the blob store.
    let t = Instant::now();
    let info: kinetoscope_types::TimelineInfo = http
        .get(format!("{url}/api/runs/{}/timeline", c.id))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let load = t.elapsed();
    let events: u64 = info.tracks.iter().map(|t| t.events).sum();
    println!(
        "timeline of the 30 x 78 trace: {events} events on {} tracks; first request (index loaded from the blob store): {:.0} ms",
        info.tracks.len(),
        load.as_secs_f64() * 1e3
    );
    // 60 screens from the whole trace down to ~10 µs, each every track at 1920 px.
    let (lo, hi) = (info.start_ns as f64, info.end_ns as f64);
    let mut lat = Vec::new();
    let t0 = Instant::now();
    for k in 0..60 {
        let span = (hi - lo) * 0.8f64.powi(k);
        let center = lo + (hi - lo) * (0.5 + 0.3 * ((k as f64) * 0.7).sin());
        let (s, e) = (
            (center - span / 2.0).max(lo) as i64,
            (center + span / 2.0).min(hi) as i64,
        );
        let t = Instant::now();
        let screens = info.tracks.iter().map(|tr| {
            http.get(format!(
                "{url}/api/runs/{}/timeline/window?track={}&start_ns={s}&end_ns={}&px=1920",
                c.id,
                tr.id,
                e.max(s + 1)
            ))
            .send()
        });
        for r in futures::future::join_all(screens).await {
            let r = r.unwrap();
            assert!(r.status().is_success());
            r.bytes().await.unwrap();
        }
        lat.push(t.elapsed());
    }
    report(
        "full-screen timeline windows (all tracks)",
        lat,
        t0.elapsed(),
    );
}
