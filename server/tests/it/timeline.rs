//! The timeline API over stored analysis artifacts, on SQLite and
//! PostgreSQL: the index is stored with the run, windows account for every
//! event, details link a kernel to its launch and op, search finds what the
//! kernel table counts, bad windows get 400s, and deleting the run removes
//! the artifacts.

use crate::common::*;
use kinetoscope_types::*;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeline_api_on_both_databases() {
    for backend in BACKENDS {
        timeline_api(backend).await;
    }
}

async fn status_of(resp: reqwest::Response) -> (u16, ApiError) {
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or_default())
}

async fn timeline_api(backend: Backend) {
    let data = tempfile::tempdir().unwrap();
    let url = backend.url(data.path()).await;
    let srv = TestServer::start_in(
        data,
        Opts {
            database_url: Some(url),
            ..Default::default()
        },
    )
    .await;
    let api = Api::new(&srv.url);
    let u = &srv.url;
    let created = api.upload(small_trace(2, 8), "timeline").await;
    assert_eq!(
        api.wait(&created.id, LONG).await.status,
        kinetoscope_types::RunStatus::Done
    );
    let id = &created.id;

    // The artifacts: the summary in the database, the index (and the
    // memory of the trace's few `[memory]` events) in the blob store.
    let arts: Vec<ArtifactInfo> = api.get_json(&format!("/api/runs/{id}/artifacts")).await;
    let names: Vec<&str> = arts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["memory", "summary", "timeline"], "{backend:?}");
    assert_eq!(arts[2].stored_in, kinetoscope_types::StoredIn::Blob);

    // Every event of every track, at two resolutions.
    let info: TimelineInfo = api.get_json(&format!("/api/runs/{id}/timeline")).await;
    assert_eq!(info.steps.len(), 2);
    assert_eq!(info.layers.len(), 16);
    assert!(
        info.tracks
            .iter()
            .any(|t| t.kind == kinetoscope_types::TrackKind::Gpu)
            && info
                .tracks
                .iter()
                .any(|t| t.kind == kinetoscope_types::TrackKind::Cpu)
    );
    for t in &info.tracks {
        for px in [1, 1920] {
            let w: TimelineWindow = api
                .get_json(&format!(
                    "/api/runs/{id}/timeline/window?track={}&start_ns={}&end_ns={}&px={px}",
                    t.id, info.start_ns, info.end_ns
                ))
                .await;
            assert_eq!(
                w.slices.iter().map(|s| s.count as u64).sum::<u64>(),
                t.events,
                "{backend:?} track {}",
                t.label
            );
        }
    }

    // The columns form the app reads carries the same slices.
    for t in &info.tracks {
        let c: TimelineColumns = api
            .get_json(&format!(
                "/api/runs/{id}/timeline/window?track={}&px=999&format=columns",
                t.id
            ))
            .await;
        assert_eq!(c.count.iter().map(|&n| n as u64).sum::<u64>(), t.events);
        assert_eq!(c.start_ns.len(), c.name.len());
        assert!(c.name.iter().all(|&n| (n as usize) < c.names.len()));
    }
    let (status, body) = status_of(
        srv.http
            .get(format!(
                "{u}/api/runs/{id}/timeline/window?track=0&format=xml"
            ))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    assert!(body.detail.contains("format"), "{}", body.detail);

    // Search: as many occurrences of the top kernel as the kernel table has calls.
    let s: Summary = api.get_json(&format!("/api/runs/{id}/summary")).await;
    let k = &s.kernels[0];
    let found: TimelineSearch = srv
        .http
        .get(format!("{u}/api/runs/{id}/timeline/search"))
        .query(&[
            ("q", k.short_name.split(' ').next().unwrap()),
            ("px", "200"),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(found.matches >= k.calls, "{} < {}", found.matches, k.calls);
    let exact: TimelineSearch = srv
        .http
        .get(format!("{u}/api/runs/{id}/timeline/search"))
        .query(&[("q", k.name.as_str())])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(exact.matches, k.calls);
    // The first match's details: its launch and the op that made it.
    let first = exact.first.unwrap();
    let e: TimelineEvent = api
        .get_json(&format!("/api/runs/{id}/timeline/event/{}", first.event))
        .await;
    assert_eq!(
        (e.kind.as_str(), e.name.as_str()),
        ("kernel", k.name.as_str())
    );
    assert_eq!(
        e.launch.as_ref().map(|l| l.name.as_str()),
        Some("cudaLaunchKernel")
    );
    assert_eq!(
        e.parents.first().map(|p| p.name.as_str()),
        Some("aten::copy_")
    );
    assert!(e.args.contains_key("grid"), "{:?}", e.args);
    assert!(e.args.contains_key("bandwidth"), "{:?}", e.args);
    // And back down: the op's kernels.
    let op: TimelineEvent = api
        .get_json(&format!(
            "/api/runs/{id}/timeline/event/{}",
            e.parents[0].event
        ))
        .await;
    assert!(op.kernels.iter().any(|x| x.event == first.event));
    assert!(op.args.contains_key("Input Dims"));

    // Bad windows, events and searches.
    let w = |q: &str| format!("{u}/api/runs/{id}/timeline/window?{q}");
    for (what, target, text) in [
        (
            "end before start",
            w("track=0&start_ns=100&end_ns=50"),
            "end_ns",
        ),
        ("px 0", w("track=0&px=0"), "px"),
        ("px too many", w("track=0&px=16385"), "px"),
        ("unknown track", w("track=9999"), "track"),
        ("no track", w(""), "track"),
        ("bad number", w("track=x"), "query"),
        (
            "unknown event",
            format!("{u}/api/runs/{id}/timeline/event/4000000000"),
            "event",
        ),
        (
            "not an event",
            format!("{u}/api/runs/{id}/timeline/event/abc"),
            "event",
        ),
        (
            "empty search",
            format!("{u}/api/runs/{id}/timeline/search?q="),
            "q",
        ),
    ] {
        let (status, body) = status_of(srv.http.get(target).send().await.unwrap()).await;
        assert_eq!(status, 400, "{backend:?} {what}");
        assert!(
            body.detail.to_lowercase().contains(text),
            "{what}: {}",
            body.detail
        );
    }
    let (status, _) = status_of(
        srv.http
            .get(format!("{u}/api/runs/AAAAAAAAAAAAAAAAAAAAAA/timeline"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404);

    // Two runs aligned: by default on each one's median step; any step or
    // layer on request; bad anchors and runs without steps get a 400.
    let patch = api.upload(small_trace(3, 8), "patch").await;
    assert_eq!(
        api.wait(&patch.id, LONG).await.status,
        kinetoscope_types::RunStatus::Done
    );
    let al: DiffAlign = api
        .get_json(&format!("/api/diff/{id}/{}/align", patch.id))
        .await;
    assert_eq!(al.anchor, "median step");
    assert!(info
        .steps
        .iter()
        .any(|s| s.start_ns == al.a.start_ns && s.end_ns == al.a.end_ns));
    let al: DiffAlign = api
        .get_json(&format!("/api/diff/{id}/{}/align?anchor=step:1", patch.id))
        .await;
    assert_eq!(
        (al.a.start_ns, al.a.end_ns),
        (info.steps[1].start_ns, info.steps[1].end_ns)
    );
    let al: DiffAlign = api
        .get_json(&format!("/api/diff/{id}/{}/align?anchor=layer:5", patch.id))
        .await;
    assert!(info
        .layers
        .iter()
        .any(|l| l.index == 5 && l.start_ns == al.a.start_ns));
    let no_steps = api
        .upload_file(&shared_trace("hta-a100-simple-add.json.gz"), "no steps")
        .await;
    assert_eq!(
        api.wait(&no_steps.id, LONG).await.status,
        kinetoscope_types::RunStatus::Done
    );
    for (what, target, text) in [
        (
            "no such step",
            format!("{u}/api/diff/{id}/{}/align?anchor=step:99", patch.id),
            "step 99",
        ),
        (
            "no such layer",
            format!("{u}/api/diff/{id}/{}/align?anchor=layer:999", patch.id),
            "layer 999",
        ),
        (
            "bad anchor",
            format!("{u}/api/diff/{id}/{}/align?anchor=block:1", patch.id),
            "anchor",
        ),
        (
            "no steps",
            format!("{u}/api/diff/{id}/{}/align", no_steps.id),
            "steps",
        ),
    ] {
        let (status, body) = status_of(srv.http.get(target).send().await.unwrap()).await;
        assert_eq!(status, 400, "{backend:?} {what}");
        assert!(body.detail.contains(text), "{what}: {}", body.detail);
    }

    // Deleting the run removes its artifacts.
    let blobs = srv.data.path().join("blobs/artifacts").join(id);
    assert!(blobs.join("0").exists());
    let resp = srv
        .http
        .delete(format!("{u}/api/runs/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 204);
    assert!(!blobs.exists(), "the run's artifacts are gone");
    srv.stop().await;
}
