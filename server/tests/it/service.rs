//! The runs API, tokens, re-analysis and operations, each on a real SQLite
//! file and on a real PostgreSQL database (the same queries, the same tests).

use crate::common::*;
use kinetoscope_types::*;
use reqwest::StatusCode;
use std::time::Duration;
use worker::db::TokenScope;

const LONG: Duration = Duration::from_secs(120);

async fn server(backend: Backend) -> (TestServer, String) {
    let data = tempfile::tempdir().unwrap();
    let url = backend.url(data.path()).await;
    let srv = TestServer::start_in(
        data,
        Opts {
            database_url: Some(url.clone()),
            ..Default::default()
        },
    )
    .await;
    (srv, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_api_on_both_databases() {
    for backend in BACKENDS {
        runs_api(backend).await;
    }
}

async fn runs_api(backend: Backend) {
    let (srv, db_url) = server(backend).await;
    let http = &srv.http;
    let u = &srv.url;

    // A two-rank run from a multipart form, and a single-rank raw upload.
    let r0 = std::fs::read(shared_trace("param-dlrm-v100-8rank-rank0.json.gz")).unwrap();
    let r1 = std::fs::read(shared_trace("param-dlrm-v100-8rank-rank1.json.gz")).unwrap();
    // Out of order on purpose: ranks follow the names, not the order.
    let form = reqwest::multipart::Form::new()
        .part(
            "file",
            reqwest::multipart::Part::bytes(r1).file_name("rank1.json.gz"),
        )
        .part(
            "file",
            reqwest::multipart::Part::bytes(r0.clone()).file_name("rank0.json.gz"),
        );
    let resp = http
        .post(format!("{u}/api/runs?name=dlrm&tags=dlrm,v100"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED, "{backend:?}");
    assert!(resp.headers().get("location").is_some());
    let multi: Created = resp.json().await.unwrap();
    let single = srv.upload(small_trace(2, 4), "generated").await;
    assert_eq!(
        srv.wait(&multi.id, LONG).await.status,
        kinetoscope_types::RunStatus::Done,
        "{backend:?}"
    );
    assert_eq!(
        srv.wait(&single.id, LONG).await.status,
        kinetoscope_types::RunStatus::Done,
        "{backend:?}"
    );

    // Get: ranks with their files and hashes.
    let run = srv.run(&multi.id).await;
    assert_eq!(run.ranks.len(), 2);
    assert_eq!(run.ranks[0].file, "rank0.json.gz");
    assert_eq!(run.ranks[0].sha256, worker::blobs::sha256_hex(&r0));
    assert_eq!(run.ranks[0].encoding, kinetoscope_types::Encoding::Gzip);
    assert_eq!(run.tags, ["dlrm", "v100"]);
    assert_eq!(run.source, kinetoscope_types::RunSource::Upload);
    assert!(run.mean_step_us.is_some());

    // The cross-rank summary exists for the two-rank run only.
    let cross: RanksSummary = srv.get_json(&format!("/api/runs/{}/ranks", multi.id)).await;
    assert_eq!(cross.ranks.len(), 2);
    assert!(cross.slowest_rank.is_some());
    let resp = http
        .get(format!("{u}/api/runs/{}/ranks", single.id))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let s1: Summary = srv
        .get_json(&format!("/api/runs/{}/summary?rank=1", multi.id))
        .await;
    assert_eq!(s1.trace.rank, Some(1));

    // List: paging and filters.
    let all: RunList = srv.get_json("/api/runs").await;
    assert_eq!(all.total, 2);
    assert_eq!(all.runs[0].id, single.id, "newest first");
    let page: RunList = srv.get_json("/api/runs?limit=1&offset=1").await;
    assert_eq!(
        (page.runs.len(), page.runs[0].id.as_str()),
        (1, multi.id.as_str())
    );
    let by_tag: RunList = srv.get_json("/api/runs?tag=v100").await;
    assert_eq!(by_tag.total, 1);
    let by_name: RunList = srv.get_json("/api/runs?q=GENER").await;
    assert_eq!(by_name.runs[0].id, single.id);
    let by_status: RunList = srv.get_json("/api/runs?status=failed").await;
    assert_eq!(by_status.total, 0);

    // Rename, re-tag, annotate.
    let patched: RunInfo = http
        .patch(format!("{u}/api/runs/{}", single.id))
        .json(&serde_json::json!({"name": "baseline", "tags": ["fp8", "fp8", "tp8"], "note": "before the patch"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (patched.name.as_str(), patched.note.as_str()),
        ("baseline", "before the patch")
    );
    assert_eq!(patched.tags, ["fp8", "tp8"]);

    // Download: the stored bytes, streamed.
    let got = http
        .get(format!("{u}/api/runs/{}/trace?rank=0", multi.id))
        .send()
        .await
        .unwrap();
    assert_eq!(got.headers()["content-type"], "application/gzip");
    assert_eq!(got.bytes().await.unwrap().as_ref(), r0.as_slice());

    // For Perfetto, a zstd trace comes out as JSON.
    let p = http
        .get(format!("{u}/api/runs/{}/trace?for=perfetto", single.id))
        .send()
        .await
        .unwrap();
    assert_eq!(p.headers()["content-type"], "application/json");
    let v: serde_json::Value = serde_json::from_slice(&p.bytes().await.unwrap()).unwrap();
    assert!(v["traceEvents"].as_array().is_some_and(|e| !e.is_empty()));

    // Pages of the full tables, sorted and filtered.
    let ops: Page<OpRow> = srv
        .get_json(&format!(
            "/api/runs/{}/ops?sort=calls&dir=desc&limit=5",
            multi.id
        ))
        .await;
    assert_eq!(ops.items.len(), 5);
    assert!(ops.items.windows(2).all(|w| w[0].calls >= w[1].calls));
    let ks: Page<KernelRow> = srv
        .get_json(&format!("/api/runs/{}/kernels?q=nccl", multi.id))
        .await;
    assert!(
        ks.total > 0
            && ks
                .items
                .iter()
                .all(|k| k.name.to_lowercase().contains("nccl"))
    );
    let view: SummaryView = srv.get_json(&format!("/api/runs/{}/view", multi.id)).await;
    assert_eq!(view.ranks, [0, 1]);
    assert!(view.cross_rank.is_some());

    // Re-analysis replaces the summary; the run stays readable meanwhile.
    let resp = http
        .post(format!(
            "{u}/api/runs/{}/reanalyze?layer_period=16",
            single.id
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    srv.wait(&single.id, LONG).await;
    let pool = raw_db(&db_url).await;
    wait_analyses(&pool, &single.id, 2).await;
    let s: Summary = srv
        .get_json(&format!("/api/runs/{}/summary", single.id))
        .await;
    assert_eq!(s.layers.method, kinetoscope_types::LayerMethod::Override);
    assert_eq!(s.layers.period, Some(16));

    // The device's peaks, given on re-analysis: the summary says so.
    let resp = http
        .post(format!("{u}/api/runs/{}/reanalyze", single.id))
        .json(&serde_json::json!({"peak_gbps": 1800.0, "peak_tflops": 500.0}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    wait_analyses(&pool, &single.id, 3).await;
    srv.wait(&single.id, LONG).await;
    let s: Summary = srv
        .get_json(&format!("/api/runs/{}/summary", single.id))
        .await;
    let d = s.device.expect("a device with the given peaks");
    assert_eq!(
        (d.source, d.peak_gbps, d.peak_tflops_bf16),
        (
            kinetoscope_types::PeakSource::Override,
            Some(1800.0),
            Some(500.0)
        )
    );

    // Delete: metadata and blobs.
    let blobs = srv.data.path().join("blobs/runs").join(&multi.id);
    assert!(blobs.exists());
    let resp = http
        .delete(format!("{u}/api/runs/{}", multi.id))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        http.get(format!("{u}/api/runs/{}", multi.id))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert!(!blobs.exists() || std::fs::read_dir(&blobs).unwrap().next().is_none());
    assert_eq!(
        scalar(
            &pool,
            &format!("SELECT COUNT(*) FROM jobs WHERE run_id = '{}'", multi.id)
        )
        .await,
        0
    );
    pool.close().await;
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forms_ranks_are_analyzed_as_they_arrive_on_both_databases() {
    for backend in BACKENDS {
        ranks_as_they_arrive(backend).await;
    }
}

/// A form's first file is analyzed while the form still uploads; the run
/// stays out of the list until the last file is stored; a file that comes
/// before a lower rank's keeps its analysis under its final rank.
async fn ranks_as_they_arrive(backend: Backend) {
    let (srv, db_url) = server(backend).await;
    let pool = raw_db(&db_url).await;
    let r0 = std::fs::read(shared_trace("param-dlrm-v100-8rank-rank0.json.gz")).unwrap();
    let r1 = std::fs::read(shared_trace("param-dlrm-v100-8rank-rank1.json.gz")).unwrap();
    let (tx, upload) = post_form(srv.http.clone(), format!("{}/api/runs", srv.url));
    // Rank 1's file first: stored and analyzed as the form's first file.
    tx.send(Ok(form_part("rank1.json.gz", &r1, true, false)))
        .await
        .unwrap();
    wait_scalar(
        &pool,
        "SELECT COUNT(*) FROM traces WHERE status = 'done' AND summary IS NOT NULL",
        1,
        LONG,
    )
    .await;
    let list: RunList = srv.get_json("/api/runs").await;
    assert_eq!(
        list.total, 0,
        "{backend:?}: an upload is not a run until it ends"
    );
    assert_eq!(
        scalar(&pool, "SELECT COUNT(*) FROM runs WHERE status = 'done'").await,
        0
    );

    tx.send(Ok(form_part("rank0.json.gz", &r0, false, true)))
        .await
        .unwrap();
    drop(tx);
    let resp = upload.await.unwrap().unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED, "{backend:?}");
    let created: Created = resp.json().await.unwrap();
    let run = srv.wait(&created.id, LONG).await;
    assert_eq!(run.status, RunStatus::Done, "{backend:?}");
    let files: Vec<&str> = run.ranks.iter().map(|r| r.file.as_str()).collect();
    assert_eq!(files, ["rank0.json.gz", "rank1.json.gz"], "{backend:?}");
    // Named after rank 0's file, not the first file stored.
    assert_eq!(run.name, "rank0", "{backend:?}");
    for rank in 0..2 {
        let s: Summary = srv
            .get_json(&format!("/api/runs/{}/summary?rank={rank}", created.id))
            .await;
        assert_eq!(
            s.trace.rank,
            Some(rank),
            "{backend:?}: rank {rank}'s own trace"
        );
        let names = scalar(
            &pool,
            &format!("SELECT COUNT(*) FROM artifacts WHERE rank = {rank}"),
        )
        .await;
        assert!(names >= 2, "{backend:?}: rank {rank} has its artifacts");
    }
    assert_eq!(
        scalar(&pool, "SELECT COUNT(*) FROM artifacts").await,
        2 * scalar(&pool, "SELECT COUNT(*) FROM artifacts WHERE rank = 0").await,
        "{backend:?}: no artifact left under a rank it no longer has"
    );
    // The file analyzed first kept its analysis: one analysis each.
    assert_eq!(
        scalar(&pool, "SELECT CAST(SUM(analyses) AS BIGINT) FROM traces").await,
        2
    );
    let cross: RanksSummary = srv
        .get_json(&format!("/api/runs/{}/ranks", created.id))
        .await;
    assert_eq!(cross.ranks.len(), 2, "{backend:?}");
    let list: RunList = srv.get_json("/api/runs").await;
    assert_eq!(list.total, 1, "{backend:?}");
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_guard_writes_on_both_databases() {
    for backend in BACKENDS {
        let (srv, db_url) = server(backend).await;
        let open = srv.upload(small_trace(1, 4), "open").await;
        // Create tokens the way `kinetoscope token create` does: an admin
        // one, an upload-only one (what CI gets) and an expired one.
        let token = "kst_test-token-0123456789";
        let ci = "kst_test-ci-upload-only-0123";
        let old = "kst_test-expired-0123456789";
        let db = worker::db::Db::connect(&db_url).await.unwrap();
        let add = |name: &'static str, secret: &str, scope, expires| {
            let hash = worker::blobs::sha256_hex(secret.as_bytes());
            let db = &db;
            async move {
                db.add_token(&server::api::new_id(), name, &hash, scope, expires)
                    .await
            }
        };
        add("admin", token, TokenScope::Admin, None).await.unwrap();
        add(
            "ci",
            ci,
            TokenScope::Upload,
            Some(worker::db::now_ms() + 3_600_000),
        )
        .await
        .unwrap();
        add(
            "old",
            old,
            TokenScope::Admin,
            Some(worker::db::now_ms() - 1),
        )
        .await
        .unwrap();
        // Names are unique: they are what `token revoke` takes.
        assert!(matches!(
            add("ci", "kst_other", TokenScope::Upload, None).await,
            Err(worker::db::TokenError::NameTaken(_))
        ));
        let u = &srv.url;
        let post = |t: Option<&str>| {
            let mut r = srv
                .http
                .post(format!("{u}/api/runs"))
                .body(small_trace(1, 4));
            if let Some(t) = t {
                r = r.bearer_auth(t);
            }
            r.send()
        };
        let delete = |t: Option<&str>| {
            let mut r = srv.http.delete(format!("{u}/api/runs/{}", open.id));
            if let Some(t) = t {
                r = r.bearer_auth(t);
            }
            r.send()
        };
        assert_eq!(post(None).await.unwrap().status(), 401, "{backend:?}");
        assert_eq!(post(Some("kst_wrong")).await.unwrap().status(), 401);
        let expired = post(Some(old)).await.unwrap();
        assert_eq!(expired.status(), 401);
        let body: ApiError = expired.json().await.unwrap();
        assert!(body.detail.contains("expired"), "{}", body.detail);
        assert_eq!(post(Some(token)).await.unwrap().status(), 201);
        // An upload token creates runs but may not edit or delete them.
        assert_eq!(post(Some(ci)).await.unwrap().status(), 201);
        let del = delete(None).await.unwrap();
        assert_eq!(del.status(), 401);
        let body: ApiError = del.json().await.unwrap();
        assert_eq!(body.error, "unauthorized");
        let del = delete(Some(ci)).await.unwrap();
        assert_eq!(del.status(), 403);
        let body: ApiError = del.json().await.unwrap();
        assert_eq!(body.error, "forbidden");
        assert!(body.detail.contains("admin"), "{}", body.detail);
        let patch = srv
            .http
            .patch(format!("{u}/api/runs/{}", open.id))
            .bearer_auth(ci)
            .body(r#"{"name":"x"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(patch.status(), 403);
        let reanalyze = srv
            .http
            .post(format!("{u}/api/runs/{}/reanalyze", open.id))
            .bearer_auth(ci)
            .send()
            .await
            .unwrap();
        assert_eq!(reanalyze.status(), 403);
        // Use is recorded; secrets and hashes never leave the database.
        let tokens = db.list_tokens().await.unwrap();
        let names: Vec<_> = tokens.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names.len(), 3);
        for t in &tokens {
            assert!(t.last_used_at.is_some(), "{} was used", t.name);
        }
        // In tokens mode the run list and search need a token (any scope):
        // a run id is a read capability, and the list would hand them all out.
        let list = |t: Option<&str>| {
            let mut r = srv.http.get(format!("{u}/api/runs?q=open"));
            if let Some(t) = t {
                r = r.bearer_auth(t);
            }
            r.send()
        };
        let anonymous = list(None).await.unwrap();
        assert_eq!(anonymous.status(), 401, "{backend:?}");
        let body: ApiError = anonymous.json().await.unwrap();
        assert_eq!(body.error, "unauthorized");
        assert_eq!(list(Some(ci)).await.unwrap().status(), 200);
        assert_eq!(list(Some("kst_wrong")).await.unwrap().status(), 401);
        // A read token lists, and may not write.
        let viewer = "kst_test-viewer-0123456789";
        add("viewer", viewer, TokenScope::Read, None).await.unwrap();
        let listed: RunList = list(Some(viewer)).await.unwrap().json().await.unwrap();
        assert!(listed.runs.iter().any(|r| r.id == open.id));
        let refused = post(Some(viewer)).await.unwrap();
        assert_eq!(refused.status(), 403);
        // The scheme is case-insensitive (RFC 9110).
        let lower = srv
            .http
            .get(format!("{u}/api/runs"))
            .header("authorization", format!("bearer {viewer}"))
            .send()
            .await
            .unwrap();
        assert_eq!(lower.status(), 200);
        // Revoked: refused at once; the admin token still deletes.
        assert!(db.revoke_token("ci").await.unwrap());
        assert!(!db.revoke_token("ci").await.unwrap());
        let gone = post(Some(ci)).await.unwrap();
        assert_eq!(gone.status(), 401);
        let body: ApiError = gone.json().await.unwrap();
        assert!(body.detail.contains("revoked"), "{}", body.detail);
        // Reads stay open to whoever has the link.
        let read = || srv.http.get(format!("{u}/api/runs/{}", open.id)).send();
        assert_eq!(read().await.unwrap().status(), 200);
        // Revoking every token never reopens the server: the revoked token
        // and no token at all are both refused, and the list shows them.
        for name in ["admin", "old", "viewer"] {
            assert!(db.revoke_token(name).await.unwrap(), "{name}");
        }
        assert_eq!(post(None).await.unwrap().status(), 401, "{backend:?}");
        assert_eq!(post(Some(token)).await.unwrap().status(), 401);
        assert_eq!(delete(Some(token)).await.unwrap().status(), 401);
        assert_eq!(list(None).await.unwrap().status(), 401);
        let tokens = db.list_tokens().await.unwrap();
        assert_eq!(tokens.len(), 4);
        assert!(tokens.iter().all(|t| t.revoked_at.is_some()));
        // A new token may take a revoked one's name, and writes again.
        let fresh = "kst_test-admin-again-0123456";
        add("admin", fresh, TokenScope::Admin, None).await.unwrap();
        assert_eq!(delete(Some(fresh)).await.unwrap().status(), 204);
        assert_eq!(read().await.unwrap().status(), 404);
        db.close().await;
        srv.stop().await;
    }
}

/// `--auth tokens` protects a fresh server before any token exists, and
/// `--private` makes every read need a token (a `read` token reads).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_mode_and_private_reads_on_both_databases() {
    use server::api::auth::AuthMode;
    for backend in BACKENDS {
        for private in [false, true] {
            let data = tempfile::tempdir().unwrap();
            let db_url = backend.url(data.path()).await;
            let srv = TestServer::start_in(
                data,
                Opts {
                    database_url: Some(db_url.clone()),
                    auth: AuthMode::Tokens,
                    private,
                    ..Default::default()
                },
            )
            .await;
            let u = &srv.url;
            let up = srv
                .http
                .post(format!("{u}/api/runs"))
                .body(small_trace(1, 4))
                .send()
                .await
                .unwrap();
            assert_eq!(up.status(), 401, "{backend:?} private={private}");
            let db = worker::db::Db::connect(&db_url).await.unwrap();
            let (admin, viewer) = ("kst_test-admin-0123456789", "kst_test-read-0123456789");
            for (name, secret, scope) in [
                ("admin", admin, TokenScope::Admin),
                ("viewer", viewer, TokenScope::Read),
            ] {
                let hash = worker::blobs::sha256_hex(secret.as_bytes());
                db.add_token(&server::api::new_id(), name, &hash, scope, None)
                    .await
                    .unwrap();
            }
            let created: Created = srv
                .http
                .post(format!("{u}/api/runs?name=private"))
                .bearer_auth(admin)
                .body(small_trace(1, 4))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let get = |path: String, t: Option<&'static str>| {
                let mut r = srv.http.get(format!("{u}{path}"));
                if let Some(t) = t {
                    r = r.bearer_auth(t);
                }
                r.send()
            };
            let run = format!("/api/runs/{}", created.id);
            let anonymous = get(run.clone(), None).await.unwrap().status();
            assert_eq!(anonymous, if private { 401 } else { 200 }, "{backend:?}");
            assert_eq!(get(run.clone(), Some(viewer)).await.unwrap().status(), 200);
            assert_eq!(get("/api/runs".into(), None).await.unwrap().status(), 401);
            assert_eq!(
                get("/api/runs".into(), Some(viewer))
                    .await
                    .unwrap()
                    .status(),
                200
            );
            assert_eq!(get("/metrics".into(), None).await.unwrap().status(), 401);
            // The API's description stays readable; so does the app.
            assert_eq!(
                get("/api/openapi.json".into(), None)
                    .await
                    .unwrap()
                    .status(),
                200
            );
            db.close().await;
            srv.stop().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summaries_of_an_older_analyzer_are_redone_on_both_databases() {
    for backend in BACKENDS {
        let (srv, db_url) = server(backend).await;
        let run = srv.upload(small_trace(1, 4), "old").await;
        srv.wait(&run.id, LONG).await;
        let pool = raw_db(&db_url).await;
        let timeline_key = |pool: sqlx::AnyPool| async move {
            sqlx::query_scalar::<_, String>(
                "SELECT blob_key FROM artifacts WHERE name = 'timeline'",
            )
            .fetch_one(&pool)
            .await
            .unwrap()
        };
        let old_key = timeline_key(pool.clone()).await;
        sqlx::query("UPDATE traces SET analyzer_version = 0")
            .execute(&pool)
            .await
            .unwrap();
        let data = srv.stop().await;
        // A restart finds the stale summary and analyzes the trace again.
        let srv = TestServer::start_in(
            data,
            Opts {
                database_url: Some(db_url.clone()),
                ..Default::default()
            },
        )
        .await;
        let start = std::time::Instant::now();
        loop {
            let v = scalar(&pool, "SELECT analyzer_version FROM traces").await;
            if v == kinetoscope_trace::ANALYZER_VERSION as i64 {
                break;
            }
            assert!(start.elapsed() < LONG, "{backend:?}: not re-analyzed");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(scalar(&pool, "SELECT analyses FROM traces").await, 2);
        // Every artifact was made again: a new timeline index, the old one
        // removed from the blob store.
        let new_key = timeline_key(pool.clone()).await;
        assert_ne!(new_key, old_key, "{backend:?}");
        let blobs = srv.data.path().join("blobs");
        assert!(blobs.join(&new_key).exists(), "{backend:?}: {new_key}");
        // The old blobs go after the new rows commit, so the worker may
        // still be removing them when the version changes: wait for it.
        let start = std::time::Instant::now();
        while blobs.join(&old_key).exists() {
            assert!(start.elapsed() < LONG, "{backend:?}: {old_key} is left");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // (The generated trace has a few `[memory]` events: a memory
        // artifact too.)
        assert_eq!(
            scalar(&pool, "SELECT COUNT(*) FROM artifacts").await,
            3,
            "{backend:?}: summary, timeline and memory"
        );
        pool.close().await;
        srv.stop().await;
    }
}

/// A run whose every trace is analyzed but whose row still says
/// `analyzing` (its last job stored the result, then the disk filled before
/// the run was marked done) is finished when the worker starts again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_left_analyzing_is_finished_on_both_databases() {
    for backend in BACKENDS {
        let (srv, db_url) = server(backend).await;
        let run = srv.upload(small_trace(1, 4), "stuck").await;
        srv.wait(&run.id, LONG).await;
        let pool = raw_db(&db_url).await;
        sqlx::query("UPDATE runs SET status = 'analyzing', headline = NULL")
            .execute(&pool)
            .await
            .unwrap();
        let data = srv.stop().await;
        let srv = TestServer::start_in(
            data,
            Opts {
                database_url: Some(db_url.clone()),
                ..Default::default()
            },
        )
        .await;
        let done = srv.wait(&run.id, LONG).await;
        assert_eq!(done.status, RunStatus::Done, "{backend:?}");
        assert!(
            done.top_finding.is_some() || done.steps.is_some(),
            "{backend:?}: headline"
        );
        pool.close().await;
        srv.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_metrics_and_openapi() {
    let srv = TestServer::start(Opts::default()).await;
    let run = srv.upload(small_trace(1, 4), "m").await;
    srv.wait(&run.id, LONG).await;
    let get = |p: &str| srv.http.get(format!("{}{p}", srv.url)).send();
    assert_eq!(get("/healthz").await.unwrap().text().await.unwrap(), "ok");
    assert_eq!(get("/readyz").await.unwrap().text().await.unwrap(), "ready");
    let m = get("/metrics").await.unwrap().text().await.unwrap();
    for name in [
        "kinetoscope_uploads_total",
        "kinetoscope_upload_bytes_total",
        "kinetoscope_jobs_in_queue",
        "kinetoscope_job_duration_seconds",
        "kinetoscope_jobs_total",
    ] {
        assert!(m.contains(name), "metrics lack {name}:\n{m}");
    }
    assert!(m.contains("state=\"done\""));
    // Every route is in the OpenAPI document, and nothing else.
    let doc: serde_json::Value = get("/api/openapi.json")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let paths: Vec<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let source = include_str!("../../src/api/mod.rs");
    let mut routes: Vec<String> = source
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".route(\""))
        .map(|l| l.split('"').next().unwrap().to_string())
        .map(|r| {
            if ["/healthz", "/readyz", "/metrics"].contains(&r.as_str()) {
                r
            } else {
                format!("/api{r}")
            }
        })
        .collect();
    routes.sort();
    let mut documented: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
    documented.sort();
    assert_eq!(routes, documented);
    // Unknown API routes answer JSON, not the app.
    let resp = get("/api/nope").await.unwrap();
    assert_eq!(resp.status(), 404);
    let e: ApiError = resp.json().await.unwrap();
    assert_eq!(e.error, "not_found");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_and_deleting_a_run_during_its_analysis_succeed_on_both_databases() {
    // Regression: on SQLite an edit or delete whose transaction began by
    // reading failed with "database is locked" (a 500) when the worker
    // wrote meanwhile.
    for backend in BACKENDS {
        let (srv, _db_url) = server(backend).await;
        for i in 0..6 {
            let run = srv.upload(small_trace(2, 8), &format!("r{i}")).await;
            if i % 2 == 1 {
                tokio::time::sleep(Duration::from_millis(20 * i)).await;
            }
            let patch = srv
                .http
                .patch(format!("{}/api/runs/{}", srv.url, run.id))
                .body(r#"{"note":"during analysis"}"#)
                .send()
                .await
                .unwrap();
            assert_eq!(
                patch.status(),
                200,
                "{backend:?} {i}: {}",
                patch.text().await.unwrap()
            );
            let del = srv
                .http
                .delete(format!("{}/api/runs/{}", srv.url, run.id))
                .send()
                .await
                .unwrap();
            assert_eq!(
                del.status(),
                204,
                "{backend:?} {i}: {}",
                del.text().await.unwrap()
            );
            let gone = srv
                .http
                .get(format!("{}/api/runs/{}", srv.url, run.id))
                .send()
                .await
                .unwrap();
            assert_eq!(gone.status(), 404);
        }
        srv.stop().await;
    }
}

/// Waits until the trace of run `id` has been analyzed `n` times.
async fn wait_analyses(pool: &sqlx::AnyPool, id: &str, n: i64) {
    let start = std::time::Instant::now();
    let q = format!("SELECT analyses FROM traces WHERE run_id = '{id}'");
    while scalar(pool, &q).await < n {
        assert!(start.elapsed() < LONG, "run {id} not analyzed {n} times");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
