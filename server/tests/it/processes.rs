//! Real `kinetoscope` processes: crashes, scale-out, and the command-line
//! tools. Processes are killed with SIGKILL: nothing gets to clean up.

use crate::common::*;
use kinetoscope_types::RunList;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(120);

fn data_env(data: &std::path::Path, db: &str) -> Vec<(&'static str, String)> {
    vec![
        ("KINETOSCOPE_DATA", data.display().to_string()),
        ("DATABASE_URL", db.to_string()),
        ("KINETOSCOPE_LOG", "warn".into()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_job_is_taken_over() {
    let data = tempfile::tempdir().unwrap();
    let db = Backend::Sqlite.url(data.path()).await;
    let env = data_env(data.path(), &db);
    let server = Proc::start(&["serve", "--workers", "0"], &env).await;
    let api = Api::new(server.url.as_deref().unwrap());
    let run = api.upload(small_trace(2, 8), "crash").await;

    // A worker that stalls inside the analysis, then dies.
    let mut slow = env.clone();
    slow.push(("KINETOSCOPE_FAULT_ANALYSIS_DELAY_MS", "600000".into()));
    slow.push(("KINETOSCOPE_LEASE_SECS", "2".into()));
    let mut doomed = Proc::start(&["worker"], &slow).await;
    let start = Instant::now();
    while api.run(&run.id).await.status != kinetoscope_types::RunStatus::Analyzing {
        assert!(start.elapsed() < LONG, "the job was never claimed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    doomed.kill9();
    let pool = raw_db(&db).await;
    assert_eq!(
        scalar(&pool, "SELECT COUNT(*) FROM jobs WHERE state = 'running'").await,
        1,
        "the job died mid-flight"
    );
    assert_eq!(scalar(&pool, "SELECT analyses FROM traces").await, 0);

    // A new worker takes the job over once the dead one's lease expires.
    let mut fresh = env.clone();
    fresh.push(("KINETOSCOPE_LEASE_SECS", "2".into()));
    let _worker = Proc::start(&["worker"], &fresh).await;
    let done = api.wait(&run.id, LONG).await;
    assert_eq!(
        done.status,
        kinetoscope_types::RunStatus::Done,
        "{:?}",
        done.error
    );
    assert_eq!(
        scalar(&pool, "SELECT analyses FROM traces").await,
        1,
        "exactly one summary"
    );
    assert_eq!(scalar(&pool, "SELECT attempts FROM jobs").await, 2);
    assert_eq!(
        scalar(
            &pool,
            "SELECT COUNT(*) FROM traces WHERE summary IS NOT NULL"
        )
        .await,
        1
    );
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_upload_leaves_no_run_and_no_blob() {
    let data = tempfile::tempdir().unwrap();
    let db = Backend::Sqlite.url(data.path()).await;
    let env = data_env(data.path(), &db);
    let mut server = Proc::start(&["serve"], &env).await;
    let url = server.url.clone().unwrap();

    // Stream 24 MB of a trace, then stall: the blob store stages it on disk.
    let (tx, body) = streaming_body();
    let upload = tokio::spawn({
        let url = url.clone();
        async move {
            reqwest::Client::new()
                .post(format!("{url}/api/runs?name=doomed"))
                .body(body)
                .send()
                .await
        }
    });
    tx.send(Ok(bytes::Bytes::from_static(b"{\"traceEvents\": [")))
        .await
        .unwrap();
    for _ in 0..24 {
        tx.send(Ok(bytes::Bytes::from(vec![b' '; 1 << 20])))
            .await
            .unwrap();
    }
    let runs_dir = data.path().join("blobs/runs");
    let staged = || -> usize {
        std::fs::read_dir(&runs_dir)
            .map(|d| {
                d.flatten()
                    .map(|r| std::fs::read_dir(r.path()).map(|f| f.count()).unwrap_or(0))
                    .sum()
            })
            .unwrap_or(0)
    };
    let start = Instant::now();
    while staged() == 0 {
        assert!(start.elapsed() < LONG, "the upload never reached the disk");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.kill9();
    let _ = upload.await;
    assert!(staged() > 0, "a staging file is left behind by the kill");

    // On restart the sweep removes what the dead upload left.
    let mut env2 = env.clone();
    env2.push(("KINETOSCOPE_ORPHAN_AGE_SECS", "0".into()));
    let server = Proc::start(&["serve"], &env2).await;
    let api = Api::new(server.url.as_deref().unwrap());
    let list: RunList = api
        .http
        .get(format!("{}/api/runs", api.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list.total, 0, "no run became visible");
    let start = Instant::now();
    while staged() > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "orphaned blobs are still there"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // And it still works.
    let run = api.upload(small_trace(1, 4), "after").await;
    assert_eq!(
        api.wait(&run.id, LONG).await.status,
        kinetoscope_types::RunStatus::Done
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_form_leaves_no_run_once_restarted() {
    let data = tempfile::tempdir().unwrap();
    let db = Backend::Sqlite.url(data.path()).await;
    let env = data_env(data.path(), &db);
    let mut server = Proc::start(&["serve"], &env).await;
    let url = server.url.clone().unwrap();
    let pool = raw_db(&db).await;

    // A form whose first rank is stored (and queued for analysis) while its
    // second is still on its way, then the server dies.
    let (tx, upload) = post_form(
        reqwest::Client::new(),
        format!("{url}/api/runs?name=doomed"),
    );
    tx.send(Ok(form_part(
        "rank0.json.zst",
        &small_trace(2, 4),
        true,
        false,
    )))
    .await
    .unwrap();
    wait_scalar(&pool, "SELECT COUNT(*) FROM traces", 1, LONG).await;
    server.kill9();
    let _ = upload.await;
    assert_eq!(
        scalar(&pool, "SELECT COUNT(*) FROM runs WHERE uploading = 1").await,
        1
    );

    // On restart the sweep deletes the upload that never ended, with its
    // blobs.
    let mut env2 = env.clone();
    env2.push(("KINETOSCOPE_ORPHAN_AGE_SECS", "0".into()));
    let server = Proc::start(&["serve"], &env2).await;
    wait_scalar(&pool, "SELECT COUNT(*) FROM runs", 0, LONG).await;
    let blobs = |dir: &str| -> usize { walk(&data.path().join("blobs").join(dir)) };
    let start = Instant::now();
    while blobs("runs") + blobs("artifacts") > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the dead upload's blobs are still there"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let api = Api::new(server.url.as_deref().unwrap());
    let run = api.upload(small_trace(1, 4), "after").await;
    assert_eq!(
        api.wait(&run.id, LONG).await.status,
        kinetoscope_types::RunStatus::Done
    );
    pool.close().await;
}

/// Files under `dir`, at any depth (0 when it does not exist).
fn walk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| {
                    if e.path().is_dir() {
                        walk(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_on_postgres_process_each_job_once() {
    let data = tempfile::tempdir().unwrap();
    let db = Backend::Postgres.url(data.path()).await;
    let env = data_env(data.path(), &db);
    let server = Proc::start(&["serve", "--workers", "0"], &env).await;
    let api = Api::new(server.url.as_deref().unwrap());
    let mut ids = Vec::new();
    for k in 0..20u32 {
        ids.push(
            api.upload(small_trace(1 + k % 3, 4 + k % 5), &format!("trace {k}"))
                .await
                .id,
        );
    }
    let _w1 = Proc::start(&["worker", "--workers", "2"], &env).await;
    let _w2 = Proc::start(&["worker", "--workers", "2"], &env).await;
    for id in &ids {
        assert_eq!(
            api.wait(id, LONG).await.status,
            kinetoscope_types::RunStatus::Done
        );
    }
    let pool = raw_db(&db).await;
    assert_eq!(scalar(&pool, "SELECT COUNT(*) FROM jobs").await, 20);
    assert_eq!(
        scalar(
            &pool,
            "SELECT COUNT(*) FROM jobs WHERE state = 'done' AND attempts = 1"
        )
        .await,
        20,
        "each job claimed once"
    );
    assert_eq!(
        scalar(&pool, "SELECT COUNT(*) FROM traces WHERE analyses = 1").await,
        20,
        "each trace analyzed once"
    );
    let workers = scalar(&pool, "SELECT COUNT(DISTINCT worker) FROM jobs").await;
    println!("20 jobs were run by {workers} job loops in 2 worker processes");
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_upload_compresses_json_and_prints_the_link() {
    let srv = TestServer::start(Opts::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("decode.pt.trace.json");
    let p = kinetoscope_generate::DecodeParams {
        steps: 1,
        layers: 4,
        with_stack: false,
        ..Default::default()
    };
    kinetoscope_generate::write_decode_trace(&p, std::fs::File::create(&json).unwrap()).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
        .args([
            "upload",
            json.to_str().unwrap(),
            "--server",
            &srv.url,
            "--name",
            "from-cli",
            "--tags",
            "cli,test",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let link = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(link.starts_with(&format!("{}/runs/", srv.url)), "{link}");
    let id = link.rsplit('/').next().unwrap();
    let run = srv.wait(id, LONG).await;
    assert_eq!(
        (run.status.as_str(), run.name.as_str()),
        ("done", "from-cli")
    );
    assert_eq!(run.tags, ["cli", "test"]);
    assert_eq!(
        run.ranks[0].encoding,
        kinetoscope_types::Encoding::Zstd,
        "plain JSON is compressed on the way"
    );
    assert!(run.ranks[0].bytes < std::fs::metadata(&json).unwrap().len() / 5);

    // Several files are the ranks of one run.
    let r0 = shared_trace("param-dlrm-v100-8rank-rank0.json.gz");
    let r1 = shared_trace("param-dlrm-v100-8rank-rank1.json.gz");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
        .args([
            "upload",
            r0.to_str().unwrap(),
            r1.to_str().unwrap(),
            "--server",
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
    let run = srv
        .wait(link.trim().rsplit('/').next().unwrap(), LONG)
        .await;
    assert_eq!(run.ranks.len(), 2);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_token_create_turns_on_write_protection() {
    let data = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
        .args([
            "token",
            "create",
            "ci",
            "--data",
            data.path().to_str().unwrap(),
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(token.starts_with("kst_") && token.len() > 40);
    let srv = TestServer::start_in(data, Opts::default()).await;
    let denied = srv
        .http
        .post(format!("{}/api/runs", srv.url))
        .body(small_trace(1, 4))
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 401);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
        .args([
            "upload",
            shared_trace("hta-a100-simple-add.json.gz")
                .to_str()
                .unwrap(),
            "--server",
            &srv.url,
            "--token",
            &token,
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Only the hash is stored.
    let pool = raw_db(&format!(
        "sqlite://{}",
        srv.data.path().join("kinetoscope.db").display()
    ))
    .await;
    let hash: String = sqlx::query_scalar("SELECT hash FROM tokens")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_ne!(hash, token);
    assert_eq!(hash, worker::blobs::sha256_hex(token.as_bytes()));
    pool.close().await;
    // The lifecycle: an upload-only token with an expiry, listed without
    // its secret, then revoked; the name is reusable afterwards.
    let cli = |args: &[&str]| {
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        all.push("--data".into());
        all.push(srv.data.path().to_str().unwrap().into());
        std::process::Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
            .args(all)
            .output()
            .unwrap()
    };
    let made = cli(&[
        "token",
        "create",
        "nightly",
        "--scope",
        "upload",
        "--expires-in",
        "30d",
    ]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let nightly = String::from_utf8(made.stdout).unwrap().trim().to_string();
    let again = cli(&["token", "create", "nightly"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists already"));
    let bad = cli(&["token", "create", "x", "--expires-in", "soon"]);
    assert!(!bad.status.success());
    let listed = cli(&["token", "list"]);
    assert!(listed.status.success());
    let table = String::from_utf8(listed.stdout).unwrap();
    let line = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} not in {table}"))
            .to_string()
    };
    assert!(line("ci").contains("admin"), "{table}");
    assert!(!line("ci").contains("never   "), "ci was used: {table}");
    assert!(line("nightly").contains("upload"), "{table}");
    assert!(!line("nightly").ends_with("never"), "it expires: {table}");
    assert!(
        !table.contains(&nightly) && !table.contains(&hash),
        "{table}"
    );
    let revoked = cli(&["token", "revoke", "nightly"]);
    assert!(revoked.status.success());
    let revoked = cli(&["token", "revoke", "nightly"]);
    assert!(!revoked.status.success());
    let table = String::from_utf8(cli(&["token", "list"]).stdout).unwrap();
    assert!(line_of(&table, "nightly").contains("revoked"), "{table}");
    // Revoking the last token keeps the server protected: its upload and
    // an upload with no token are both refused.
    let last = cli(&["token", "revoke", "ci"]);
    assert!(last.status.success());
    let said = String::from_utf8(last.stderr).unwrap();
    assert!(said.contains("stays in tokens mode"), "{said}");
    let upload = |token: Option<&str>| {
        let mut r = reqwest::Client::new()
            .post(format!("{}/api/runs", srv.url))
            .body(small_trace(1, 4));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send()
    };
    assert_eq!(upload(Some(&token)).await.unwrap().status(), 401);
    assert_eq!(upload(None).await.unwrap().status(), 401);
    let table = String::from_utf8(cli(&["token", "list"]).stdout).unwrap();
    assert!(line_of(&table, "ci").contains("revoked"), "{table}");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn analyze_and_diff_commands_print_tables_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json.zst");
    let b = dir.path().join("b.json.zst");
    for (path, variant) in [(&a, "baseline"), (&b, "gather-cast")] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
            .args([
                "generate",
                "--steps",
                "2",
                "--layers",
                "6",
                "--no-stack",
                "--variant",
                variant,
                "-o",
                path.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(out.status.success());
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
        .args(["analyze", a.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for want in [
        "Self CPU",
        "Self device",
        "Device total",
        "aten::copy_",
        "Top kernels",
        "Findings",
        "Float8_e4m3fn -> BFloat16",
    ] {
        assert!(
            text.contains(want),
            "analyze output lacks {want:?}:\n{text}"
        );
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
        .args(["analyze", a.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let s: kinetoscope_types::Summary = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s.ops[0].name, "aten::copy_");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
        .args(["diff", a.to_str().unwrap(), b.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("step time -") && text.contains("aten::copy_ self device time -9"),
        "{text}"
    );
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
        .args(["analyze", "/etc/hostname"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a trace"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_an_in_flight_upload_finish() {
    let data = tempfile::tempdir().unwrap();
    let db = Backend::Sqlite.url(data.path()).await;
    let env = data_env(data.path(), &db);
    let server = Proc::start(&["serve"], &env).await;
    let url = server.url.clone().unwrap();
    let trace = small_trace(1, 4);

    // Start an upload, send half of it, then ask the server to stop.
    let (tx, body) = streaming_body();
    let upload = tokio::spawn({
        let url = url.clone();
        async move {
            reqwest::Client::new()
                .post(format!("{url}/api/runs?name=in-flight"))
                .body(body)
                .send()
                .await
        }
    });
    let half = trace.len() / 2;
    tx.send(Ok(bytes::Bytes::copy_from_slice(&trace[..half])))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = server.child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    // New connections are refused while the old one finishes.
    assert!(
        reqwest::get(format!("{url}/healthz")).await.is_err(),
        "still accepting after SIGTERM"
    );
    tx.send(Ok(bytes::Bytes::copy_from_slice(&trace[half..])))
        .await
        .unwrap();
    drop(tx);
    let resp = upload
        .await
        .unwrap()
        .expect("the in-flight upload completes");
    assert_eq!(resp.status(), 201);
    let created: kinetoscope_types::Created = resp.json().await.unwrap();
    drop(server);

    // After a restart the run is there, with all its bytes.
    let server = Proc::start(&["serve"], &env).await;
    let api = Api::new(server.url.as_deref().unwrap());
    let run = api.wait(&created.id, LONG).await;
    assert_eq!(
        run.status,
        kinetoscope_types::RunStatus::Done,
        "{:?}",
        run.error
    );
    assert_eq!(run.ranks[0].sha256, worker::blobs::sha256_hex(&trace));
}

/// The line of `table` that starts with `name`.
fn line_of(table: &str, name: &str) -> String {
    table
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name} not in {table}"))
        .to_string()
}

/// A server that answers every request with `answer`, after reading the
/// request's headers and body; what it was sent, request by request.
async fn answering(
    answer: &'static str,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 65536];
                // Read until the body has come (Content-Length) or the
                // client stops sending for a moment.
                loop {
                    let r =
                        tokio::time::timeout(Duration::from_millis(500), s.read(&mut chunk)).await;
                    match r {
                        Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                        _ => break,
                    }
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if body.len() >= len {
                            break;
                        }
                    }
                }
                let head = String::from_utf8_lossy(&buf)
                    .split("\r\n\r\n")
                    .next()
                    .unwrap_or("")
                    .to_string();
                log.lock().unwrap().push(head);
                let _ = s.write_all(answer.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    (url, seen)
}

/// The CLI follows no redirect on an upload (it would turn the POST into a
/// GET and take the token along), and a 2xx that is not a created run is
/// a failure, not an empty link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_upload_refuses_redirects_and_answers_without_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.json.zst");
    std::fs::write(&file, small_trace(1, 2)).unwrap();
    let (target, target_seen) = answering(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
    )
    .await;
    let redirect: &'static str = Box::leak(
        format!(
            "HTTP/1.1 302 Found\r\nLocation: {target}/api/runs\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .into_boxed_str(),
    );
    let (redirecting, _) = answering(redirect).await;
    for (server, why) in [(&redirecting, "redirect"), (&target, "without a run id")] {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
            .args([
                "upload",
                file.to_str().unwrap(),
                "--server",
                server,
                "--token",
                "kst_secret",
            ])
            .output()
            .await
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(err.contains(why), "{err}");
    }
    // The redirect's target saw only the direct upload, never a redirected
    // one.
    let seen = target_seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].starts_with("POST "), "{seen:?}");
}

/// CPU time (user and system) a process has used, from `/proc/PID/stat`,
/// in clock ticks (100 a second on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name (which is in parentheses).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 here.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// An analysis past its deadline stops working, not only reporting: a real
/// `kinetoscope serve` whose worker was analyzing an upload that needs far
/// more than its 1 s deadline uses no more than 0.2 s of CPU in the two
/// seconds after 2 s past the failure (issue 43: a cancelled analysis went
/// on in its thread until it ended by itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cpu_is_idle_soon_after_an_analysis_passes_its_deadline() {
    let data = tempfile::tempdir().unwrap();
    let db = Backend::Sqlite.url(data.path()).await;
    let mut env = data_env(data.path(), &db);
    env.push(("KINETOSCOPE_ANALYSIS_DEADLINE_SECS", "1".into()));
    let server = Proc::start(&["serve"], &env).await;
    let pid = server.child.id();
    let api = Api::new(server.url.as_deref().unwrap());
    // 20 M overlapping kernels: many seconds of analysis on this machine.
    let mut z = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    kinetoscope_generate::write_overlapping_kernels(20_000_000, &mut z).unwrap();
    let run = api.upload(z.finish().unwrap(), "slow").await;
    let failed = api.wait(&run.id, LONG).await;
    assert_eq!(failed.status, kinetoscope_types::RunStatus::Failed);
    assert!(
        failed.error.as_deref().unwrap_or("").contains("deadline"),
        "{:?}",
        failed.error
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = cpu_ticks(pid) - before;
    assert!(
        used <= 20,
        "the server used {used} ticks of CPU in the 2 s after its analysis was cancelled"
    );
}
