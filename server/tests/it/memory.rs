//! `GET /api/runs/{id}/memory`: the memory artifact of a run whose trace
//! has `[memory]` events (the generated decode with `memory`: each cast's
//! buffer made and dropped per layer), read as stored; a trace without
//! them answers 404 with `{error, detail}`; the counter tracks
//! (`/counters`) likewise; on both databases.

use crate::common::*;
use kinetoscope_types::{MemoryReport, RunStatus};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_artifact_over_http() {
    let p = kinetoscope_generate::DecodeParams {
        steps: 2,
        layers: 6,
        memory: true,
        counters: true,
        ..Default::default()
    };
    let mut json = Vec::new();
    let truth = kinetoscope_generate::write_decode_trace(&p, &mut json).unwrap();
    let with = zstd::encode_all(&json[..], 3).unwrap();
    let without = br#"{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1, "dur": 5}]}"#.to_vec();
    for backend in BACKENDS {
        let data = tempfile::tempdir().unwrap();
        let db_url = backend.url(data.path()).await;
        let srv = TestServer::start_in(
            data,
            Opts {
                database_url: Some(db_url),
                ..Default::default()
            },
        )
        .await;
        let a = srv.upload(with.clone(), "memory").await;
        let b = srv.upload(without.clone(), "no memory").await;
        for id in [&a.id, &b.id] {
            assert_eq!(
                srv.wait(id, Duration::from_secs(120)).await.status,
                RunStatus::Done
            );
        }
        let m: MemoryReport = srv.get_json(&format!("/api/runs/{}/memory", a.id)).await;
        let d = &m.devices[0];
        assert_eq!(d.device, "cuda:0");
        assert_eq!(d.peak_bytes, truth.peak_allocated);
        assert_eq!(d.by_signature[0].op, "aten::_to_copy");
        assert_eq!(
            d.by_signature[0].bytes_per_call,
            truth.cast_alloc_bytes as f64
        );
        assert!(!d.series.is_empty() && !d.steps.is_empty());
        let artifacts: Vec<kinetoscope_types::ArtifactInfo> =
            srv.get_json(&format!("/api/runs/{}/artifacts", a.id)).await;
        assert!(
            artifacts.iter().any(|x| x.name.as_str() == "memory"),
            "{artifacts:?}"
        );
        // The summary carries the peak per device, as before, and the memory.
        let s: kinetoscope_types::Summary =
            srv.get_json(&format!("/api/runs/{}/summary", a.id)).await;
        assert_eq!(s.memory[0].peak_bytes, truth.peak_allocated);
        assert_eq!(s.trace.peak_memory.len(), 1);
        // The counter tracks, and each kernel group's means in the summary.
        let c: kinetoscope_types::CounterReport =
            srv.get_json(&format!("/api/runs/{}/counters", a.id)).await;
        assert_eq!(c.tracks.len(), 2);
        assert_eq!(c.tracks[0].samples, truth.counter_samples);
        assert!(s
            .kernels
            .iter()
            .flat_map(|k| &k.groups)
            .any(|g| !g.counters.is_empty()));
        let r = srv
            .http
            .get(format!("{}/api/runs/{}/counters", srv.url, b.id))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
        // No memory events: 404 with a reason; a missing rank or run too.
        for (path, code) in [
            (format!("/api/runs/{}/memory", b.id), 404),
            (format!("/api/runs/{}/memory?rank=3", a.id), 404),
            ("/api/runs/AAAAAAAAAAAAAAAAAAAAAA/memory".to_string(), 404),
        ] {
            let r = srv
                .http
                .get(format!("{}{path}", srv.url))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), code, "{path}");
            let e: kinetoscope_types::ApiError = r.json().await.unwrap();
            assert!(!e.detail.is_empty());
        }
        let r = srv
            .http
            .get(format!("{}/api/runs/{}/memory", srv.url, b.id))
            .send()
            .await
            .unwrap();
        let e: kinetoscope_types::ApiError = r.json().await.unwrap();
        assert!(e.detail.contains("profile_memory=True"), "{}", e.detail);
        srv.stop().await;
    }
}
