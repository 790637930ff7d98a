//! The regression gate, as a CI job runs it: `kinetoscope diff A B
//! --fail-above PCT` on the generated baseline (the whole KV pool cast in
//! every layer) and its gather-then-cast patch, as trace files and as runs
//! stored on a server (compared by their links, the traces never
//! downloaded). Exit 0 within budget, 1 over it, 2 when the two cannot be
//! compared; the markdown is a pull-request comment.

use crate::common::*;
use std::process::{Command, Output};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(120);

fn generated(variant: kinetoscope_generate::Variant) -> Vec<u8> {
    let p = kinetoscope_generate::DecodeParams {
        steps: 4,
        layers: 6,
        variant,
        ..Default::default()
    };
    let mut json = Vec::new();
    kinetoscope_generate::write_decode_trace(&p, &mut json).unwrap();
    zstd::encode_all(&json[..], 3).unwrap()
}

fn diff(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
        .arg("diff")
        .args(args)
        .env_remove("KINETOSCOPE_SERVER")
        .env_remove("KINETOSCOPE_TOKEN")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_on_files_and_on_stored_runs() {
    use kinetoscope_generate::Variant;
    let dir = tempfile::tempdir().unwrap();
    let (base, patch, bad) = (
        dir.path().join("baseline.json.zst"),
        dir.path().join("patch.json.zst"),
        dir.path().join("notes.json"),
    );
    std::fs::write(&base, generated(Variant::Baseline)).unwrap();
    std::fs::write(&patch, generated(Variant::GatherCast)).unwrap();
    std::fs::write(&bad, br#"{"not": "a trace"}"#).unwrap();
    let (base_s, patch_s, bad_s) = (
        base.to_str().unwrap(),
        patch.to_str().unwrap(),
        bad.to_str().unwrap(),
    );

    // The patch is faster: within any budget.
    let out = diff(&[base_s, patch_s, "--fail-above", "5"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).starts_with("kinetoscope diff: PASS"),
        "{}",
        text(&out.stderr)
    );
    // The other way round it is a regression, with its reason on one line.
    let out = diff(&[patch_s, base_s, "--fail-above", "5", "--format", "markdown"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("FAIL: step time (median) +"), "{err}");
    let md = text(&out.stdout);
    assert!(
        md.starts_with("### Kinetoscope: FAIL: step time (median) +"),
        "{md}"
    );
    assert!(
        md.contains("| budget | A | B | change | allowed | |"),
        "{md}"
    );
    assert!(md.contains("| **over** |"), "{md}");
    assert!(
        md.contains("aten::copy_ (Float8_e4m3fn -> BFloat16)"),
        "{md}"
    );
    // An op budget: the cast's op grows far past 10%.
    let out = diff(&[patch_s, base_s, "--fail-op", "aten::copy_=10%"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let out = diff(&[
        base_s,
        patch_s,
        "--fail-op",
        "aten::copy_=10%",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["gate"]["verdict"], "pass");
    assert!(
        json["ops"].is_array(),
        "the diff's own fields stay at the top"
    );
    // Not a trace: cannot compare.
    let out = diff(&[base_s, bad_s, "--fail-above", "5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("cannot compare"),
        "{}",
        text(&out.stderr)
    );
    // Without a budget the diff is only printed.
    let out = diff(&[patch_s, base_s]);
    assert_eq!(out.status.code(), Some(0));

    // Stored runs, by their links: the summaries are fetched.
    let srv = TestServer::start(Opts::default()).await;
    let a = srv.upload(std::fs::read(&patch).unwrap(), "patch").await;
    let b = srv.upload(std::fs::read(&base).unwrap(), "baseline").await;
    for id in [&a.id, &b.id] {
        assert_eq!(
            srv.wait(id, LONG).await.status,
            kinetoscope_types::RunStatus::Done
        );
    }
    let (la, lb) = (
        format!("{}{}", srv.url, a.url),
        format!("{}{}", srv.url, b.url),
    );
    let out = tokio::task::spawn_blocking(move || {
        diff(&[&la, &lb, "--fail-above", "5", "--format", "markdown"])
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let md = text(&out.stdout);
    assert!(
        md.contains(&format!("[diff]({}/diff/{}/{})", srv.url, a.id, b.id)),
        "{md}"
    );
    assert!(
        md.contains(&format!("[baseline]({}/runs/{})", srv.url, a.id)),
        "{md}"
    );
    // By id with --server; an id the server does not have cannot be compared.
    let (url, ida) = (srv.url.clone(), a.id.clone());
    let out = tokio::task::spawn_blocking(move || {
        // Options first, then `--`: a run id may start with `-`
        // (base64url), which would otherwise read as a flag.
        diff(&[
            "--server",
            &url,
            "--fail-above",
            "5",
            "--",
            &ida,
            "AAAAAAAAAAAAAAAAAAAAAA",
        ])
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("404"), "{}", text(&out.stderr));
    srv.stop().await;
}

fn kinetoscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
        .args(args)
        .env_remove("KINETOSCOPE_SERVER")
        .env_remove("KINETOSCOPE_TOKEN")
        .output()
        .unwrap()
}

/// Baselines by name on both databases: marked by `PATCH` (admin scope) and
/// by `upload --baseline-of`, read by `GET /api/baselines/{name}`, shown and
/// filtered in the runs list; then CI's path: `upload --compare-to
/// baseline:NAME --fail-above 5` uploads, waits, prints the run and diff
/// links and exits as the gate does, and a run that fails the gate does not
/// become the baseline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baselines_by_name_and_the_upload_gate() {
    use kinetoscope_generate::Variant;
    use kinetoscope_types::{Baseline, RunInfo, RunList, TokenScope};
    use server::api::auth::AuthMode;
    let dir = tempfile::tempdir().unwrap();
    let (base, patch) = (
        dir.path().join("baseline.json.zst"),
        dir.path().join("patch.json.zst"),
    );
    std::fs::write(&base, generated(Variant::Baseline)).unwrap();
    std::fs::write(&patch, generated(Variant::GatherCast)).unwrap();
    let (base_s, patch_s) = (
        base.to_str().unwrap().to_string(),
        patch.to_str().unwrap().to_string(),
    );
    for backend in BACKENDS {
        let data = tempfile::tempdir().unwrap();
        let db_url = backend.url(data.path()).await;
        let srv = TestServer::start_in(
            data,
            Opts {
                database_url: Some(db_url.clone()),
                auth: AuthMode::Tokens,
                ..Default::default()
            },
        )
        .await;
        let db = worker::db::Db::connect(&db_url).await.unwrap();
        let (admin, upload) = ("kst_gate-admin-0123456789", "kst_gate-upload-0123456789");
        for (name, secret, scope) in [
            ("admin", admin, TokenScope::Admin),
            ("upload", upload, TokenScope::Upload),
        ] {
            db.add_token(
                &server::api::new_id(),
                name,
                &worker::blobs::sha256_hex(secret.as_bytes()),
                scope,
                None,
            )
            .await
            .unwrap();
        }
        let u = srv.url.clone();
        let created: kinetoscope_types::Created = srv
            .http
            .post(format!("{u}/api/runs?name=first"))
            .bearer_auth(admin)
            .body(std::fs::read(&patch).unwrap())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let first = created.id;
        let patch_baseline = |token: &'static str, body: serde_json::Value| {
            srv.http
                .patch(format!("{u}/api/runs/{first}"))
                .bearer_auth(token)
                .json(&body)
                .send()
        };
        // Marking needs the admin scope, and a name that fits a URL.
        let r = patch_baseline(upload, serde_json::json!({"baseline_of": "decode-tp8"}))
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{backend:?}");
        let r = patch_baseline(admin, serde_json::json!({"baseline_of": "no spaces"}))
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{backend:?}");
        let r = patch_baseline(admin, serde_json::json!({"baseline_of": "decode-tp8"}))
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{backend:?}");
        let run: RunInfo = r.json().await.unwrap();
        assert_eq!(run.baseline_of, vec!["decode-tp8".to_string()]);
        let get = |path: String| {
            srv.http
                .get(format!("{u}{path}"))
                .bearer_auth(upload)
                .send()
        };
        let b: Baseline = get("/api/baselines/decode-tp8".into())
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            (b.name.as_str(), b.run.id.as_str()),
            ("decode-tp8", first.as_str())
        );
        assert_eq!(
            get("/api/baselines/other".into()).await.unwrap().status(),
            404
        );
        // Reading a baseline is listing: a token is needed in tokens mode.
        let anon = srv
            .http
            .get(format!("{u}/api/baselines/decode-tp8"))
            .send()
            .await
            .unwrap();
        assert_eq!(anon.status(), 401);

        // CI: the slower trace against the baseline fails the gate (exit 1),
        // prints both links, and does not become the baseline.
        let (url, b_s) = (u.clone(), base_s.clone());
        let out = tokio::task::spawn_blocking(move || {
            kinetoscope(&[
                "upload",
                &b_s,
                "--server",
                &url,
                "--token",
                admin,
                "--compare-to",
                "baseline:decode-tp8",
                "--fail-above",
                "5",
                "--baseline-of",
                "decode-tp8",
                "--format",
                "markdown",
            ])
        })
        .await
        .unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{backend:?}: {}",
            text(&out.stderr)
        );
        let stdout = text(&out.stdout);
        let mut lines = stdout.lines();
        let run_link = lines.next().unwrap().to_string();
        assert!(run_link.starts_with(&format!("{u}/runs/")), "{stdout}");
        let slow = run_link.rsplit('/').next().unwrap().to_string();
        assert_eq!(
            lines.next().unwrap(),
            format!("{u}/diff/{first}/{slow}"),
            "{stdout}"
        );
        assert!(
            stdout.contains("### Kinetoscope: FAIL: step time (median) +"),
            "{stdout}"
        );
        assert!(
            text(&out.stderr).contains("not marked the baseline"),
            "{}",
            text(&out.stderr)
        );
        let b: Baseline = get("/api/baselines/decode-tp8".into())
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            b.run.id, first,
            "a regression does not replace the baseline"
        );
        // The faster one passes (exit 0) and becomes the baseline.
        let (url, p_s) = (u.clone(), patch_s.clone());
        let out = tokio::task::spawn_blocking(move || {
            kinetoscope(&[
                "upload",
                &p_s,
                "--server",
                &url,
                "--token",
                admin,
                "--compare-to",
                "baseline:decode-tp8",
                "--fail-above",
                "5",
                "--baseline-of",
                "decode-tp8",
            ])
        })
        .await
        .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{backend:?}: {}",
            text(&out.stderr)
        );
        let fast = text(&out.stdout)
            .lines()
            .next()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_string();
        let b: Baseline = get("/api/baselines/decode-tp8".into())
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(b.run.id, fast);
        // An unknown baseline cannot be compared: exit 2.
        let (url, p_s) = (u.clone(), patch_s.clone());
        let out = tokio::task::spawn_blocking(move || {
            kinetoscope(&[
                "upload",
                &p_s,
                "--server",
                &url,
                "--token",
                upload,
                "--compare-to",
                "baseline:nobody",
                "--fail-above",
                "5",
            ])
        })
        .await
        .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{backend:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains("cannot compare"),
            "{}",
            text(&out.stderr)
        );

        // The runs list shows and filters baselines.
        let all: RunList = get("/api/runs".into()).await.unwrap().json().await.unwrap();
        assert_eq!(all.total, 4, "{backend:?}");
        let marked: RunList = get("/api/runs?baseline=*".into())
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(marked.total, 1);
        assert_eq!(marked.runs[0].id, fast);
        assert_eq!(marked.runs[0].baseline_of, vec!["decode-tp8".to_string()]);
        let named: RunList = get("/api/runs?baseline=decode-tp8".into())
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(named.total, 1);
        let none: RunList = get("/api/runs?baseline=other".into())
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(none.total, 0);
        let list: Vec<Baseline> = get("/api/baselines".into())
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(list.len(), 1);
        // Forgetting the name keeps the run; deleting a run forgets its names.
        let r = srv
            .http
            .delete(format!("{u}/api/baselines/decode-tp8"))
            .bearer_auth(admin)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204);
        assert_eq!(
            get("/api/baselines/decode-tp8".into())
                .await
                .unwrap()
                .status(),
            404
        );
        patch_baseline(admin, serde_json::json!({"baseline_of": "again"}))
            .await
            .unwrap();
        let r = srv
            .http
            .delete(format!("{u}/api/runs/{first}"))
            .bearer_auth(admin)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204);
        assert_eq!(
            get("/api/baselines/again".into()).await.unwrap().status(),
            404
        );
        srv.stop().await;
    }
}

/// Upload groups: the ranks of one cycle, each uploaded alone (as the
/// Python handler and `watch` do), become one run whose cross-rank summary
/// covers them all; a rank uploaded twice is refused and stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_groups_gather_ranks_into_one_run() {
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
        let u = srv.url.clone();
        let send = |rank: i64| {
            srv.http
                .post(format!(
                    "{u}/api/runs?group=job-7:cycle-1&rank={rank}&name=tp2&file=r{rank}.json.zst"
                ))
                .body(small_trace(2, 4))
                .send()
        };
        // Both ranks at once: they must agree on one run.
        let (r0, r1) = tokio::join!(send(0), send(1));
        let (r0, r1) = (r0.unwrap(), r1.unwrap());
        assert_eq!(
            (r0.status().as_u16(), r1.status().as_u16()),
            (201, 201),
            "{backend:?}"
        );
        let (c0, c1): (kinetoscope_types::Created, kinetoscope_types::Created) =
            (r0.json().await.unwrap(), r1.json().await.unwrap());
        assert_eq!(c0.id, c1.id, "{backend:?}");
        let again = send(1).await.unwrap();
        assert_eq!(again.status(), 409, "{backend:?}");
        let run = srv.wait(&c0.id, LONG).await;
        assert_eq!(run.status.as_str(), "done", "{run:?}");
        let run = srv.run(&c0.id).await;
        assert_eq!(
            run.ranks
                .iter()
                .map(|r| (r.rank, r.file.as_str()))
                .collect::<Vec<_>>(),
            vec![(0, "r0.json.zst"), (1, "r1.json.zst")]
        );
        let cross: kinetoscope_types::RanksSummary =
            srv.get_json(&format!("/api/runs/{}/ranks", c0.id)).await;
        assert_eq!(cross.ranks.len(), 2);
        // A late rank reopens the run and is in its cross-rank summary.
        let late = send(2).await.unwrap();
        assert_eq!(late.status(), 201);
        srv.wait(&c0.id, LONG).await;
        let cross: kinetoscope_types::RanksSummary =
            srv.get_json(&format!("/api/runs/{}/ranks", c0.id)).await;
        assert_eq!(cross.ranks.len(), 3, "{backend:?}");
        // Bad groups and ranks are refused.
        for q in [
            "group=a%20b&rank=0",
            "group=ok&rank=-1",
            "group=ok",
            "rank=3",
        ] {
            let r = srv
                .http
                .post(format!("{u}/api/runs?{q}"))
                .body(small_trace(1, 2))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 400, "{q}");
        }
        srv.stop().await;
    }
}

/// An upload group is bound to the token that opened it: another upload
/// token that knows the key neither joins the run (not even one marked as
/// a baseline) nor pre-claims a rank of it; its upload is a run of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_groups_are_bound_to_their_token() {
    use kinetoscope_types::TokenScope;
    for backend in BACKENDS {
        let data = tempfile::tempdir().unwrap();
        let db_url = backend.url(data.path()).await;
        let srv = TestServer::start_in(
            data,
            Opts {
                database_url: Some(db_url.clone()),
                auth: server::api::auth::AuthMode::Tokens,
                ..Default::default()
            },
        )
        .await;
        let db = worker::db::Db::connect(&db_url).await.unwrap();
        let (alice, mallory) = (
            "kst_alice-upload-0123456789",
            "kst_mallory-upload-012345678",
        );
        for (name, secret) in [("alice", alice), ("mallory", mallory)] {
            let hash = worker::blobs::sha256_hex(secret.as_bytes());
            db.add_token(
                &server::api::new_id(),
                name,
                &hash,
                TokenScope::Upload,
                None,
            )
            .await
            .unwrap();
        }
        let u = srv.url.clone();
        let send = |token: &'static str, rank: i64| {
            srv.http
                .post(format!(
                    "{u}/api/runs?group=job-9:cycle-1&rank={rank}&name=tp2"
                ))
                .bearer_auth(token)
                .body(small_trace(2, 4))
                .send()
        };
        // Mallory pre-claims rank 1 of the key before Alice's ranks come.
        let m1 = send(mallory, 1).await.unwrap();
        assert_eq!(m1.status(), 201, "{backend:?}");
        let m1: kinetoscope_types::Created = m1.json().await.unwrap();
        let a0 = send(alice, 0).await.unwrap();
        let a1 = send(alice, 1).await.unwrap();
        assert_eq!(
            (a0.status().as_u16(), a1.status().as_u16()),
            (201, 201),
            "{backend:?}"
        );
        let (a0, a1): (kinetoscope_types::Created, kinetoscope_types::Created) =
            (a0.json().await.unwrap(), a1.json().await.unwrap());
        assert_eq!(a0.id, a1.id, "{backend:?}: Alice's ranks are one run");
        assert_ne!(
            a0.id, m1.id,
            "{backend:?}: Mallory's upload is a run of its own"
        );
        // Mallory's rank 0 joins Mallory's own run, never Alice's.
        let m0: kinetoscope_types::Created = send(mallory, 0).await.unwrap().json().await.unwrap();
        assert_eq!(m0.id, m1.id, "{backend:?}");
        let alices = srv.wait(&a0.id, LONG).await;
        assert_eq!(alices.ranks.len(), 2, "{backend:?}");
        srv.stop().await;
    }
}

/// A real CPU capture of the family (a host-bound decode) with every time
/// stretched by `factor`: the same work on a host that runs uniformly
/// slower (another machine, its clock, contention).
fn stretched_capture(factor: f64) -> Vec<u8> {
    use std::io::Read;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../worker/trace/tests/captures/dense-eager-6l.json.zst");
    let mut json = String::new();
    zstd::Decoder::new(std::fs::File::open(path).unwrap())
        .unwrap()
        .read_to_string(&mut json)
        .unwrap();
    let mut t: serde_json::Value = serde_json::from_str(&json).unwrap();
    let events = t["traceEvents"].as_array_mut().unwrap();
    let t0 = events
        .iter()
        .filter_map(|e| e["ts"].as_f64())
        .fold(f64::INFINITY, f64::min);
    for e in events.iter_mut() {
        if let Some(ts) = e["ts"].as_f64() {
            e["ts"] = serde_json::json!(t0 + (ts - t0) * factor);
        }
        if let Some(d) = e["dur"].as_f64() {
            e["dur"] = serde_json::json!(d * factor);
        }
    }
    serde_json::to_vec(&t).unwrap()
}

/// The CLI's gate on a host-bound pair: B is A on a host 1.3x slower in
/// every op. The step-time rise is not the patch's, so the gate cannot
/// compare them (exit 2) and says why; `--strict` judges it anyway (exit
/// 1).
#[test]
fn a_uniformly_slower_host_is_not_comparable_at_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    std::fs::write(&a, stretched_capture(1.0)).unwrap();
    std::fs::write(&b, stretched_capture(1.3)).unwrap();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = diff(&[a, b, "--fail-above", "5"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}\n{}", text(&out.stdout));
    assert!(err.contains("ran uniformly slower"), "{err}");
    let out = diff(&[a, b, "--fail-above", "5", "--strict"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    // The same trace against itself passes.
    let out = diff(&[a, a, "--fail-above", "5"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}
