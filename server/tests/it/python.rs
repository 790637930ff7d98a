//! The Python package (`python/`, `kinetoscope.trace_handler`) against real
//! servers: installed with `pip install ./python` into a fresh virtualenv,
//! its unittest file run with a stand-in profiler (torch is not needed:
//! `export_chrome_trace(path)` is the whole interface `on_trace_ready`
//! uses). One open server and one in tokens mode.

use crate::common::*;
use kinetoscope_types::TokenScope;
use std::process::Command;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("start the command");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_trace_handler_against_a_real_server() {
    use server::api::auth::AuthMode;
    let open = TestServer::start(Opts::default()).await;
    let data = tempfile::tempdir().unwrap();
    let db_url = format!("sqlite://{}/kinetoscope.db", data.path().display());
    let private = TestServer::start_in(
        data,
        Opts {
            database_url: Some(db_url.clone()),
            auth: AuthMode::Tokens,
            ..Default::default()
        },
    )
    .await;
    let token = "kst_python-upload-0123456789";
    let db = worker::db::Db::connect(&db_url).await.unwrap();
    db.add_token(
        &server::api::new_id(),
        "python",
        &worker::blobs::sha256_hex(token.as_bytes()),
        TokenScope::Upload,
        None,
    )
    .await
    .unwrap();

    let work = tempfile::tempdir().unwrap();
    let trace = work.path().join("trace.json");
    std::fs::write(&trace, zstd::decode_all(&small_trace(2, 4)[..]).unwrap()).unwrap();
    // A clean virtualenv, the package installed as a user would, from a
    // copy of the folder (pip builds in the tree: the clone stays clean).
    let package = work.path().join("python");
    for rel in ["pyproject.toml", "README.md", "kinetoscope/__init__.py"] {
        let to = package.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(repo().join("python").join(rel), to).unwrap();
    }
    let venv = work.path().join("venv");
    run(Command::new("python3").arg("-m").arg("venv").arg(&venv));
    let python = venv.join("bin/python");
    run(Command::new(&python).args([
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        package.to_str().unwrap(),
    ]));
    // Run from elsewhere, so that the installed package is the one imported.
    let out = run(Command::new(&python)
        .current_dir(work.path())
        .args(["-m", "unittest", "discover", "-v", "-p", "test_*.py", "-s"])
        .arg(repo().join("python/tests"))
        .env("KINETOSCOPE_TEST_SERVER", &open.url)
        .env("KINETOSCOPE_TEST_PRIVATE", &private.url)
        .env("KINETOSCOPE_TEST_TOKEN", token)
        .env("KINETOSCOPE_TEST_TRACE", &trace)
        .env("KINETOSCOPE_TEST_VERSION", env!("CARGO_PKG_VERSION"))
        .env_remove("KINETOSCOPE_SERVER")
        .env_remove("KINETOSCOPE_TOKEN"));
    assert!(out.contains("Ran 8 tests"), "{out}");
    assert!(out.contains("OK"), "{out}");
    assert!(!out.contains("skipped"), "{out}");
    // The three ranks uploaded one by one are one run, analyzed as one: a
    // cross-rank summary over the three.
    let runs: kinetoscope_types::RunList = open.get_json("/api/runs?name=tp3").await;
    let mut grouped = None;
    for r in &runs.runs {
        if open.run(&r.id).await.ranks.len() == 3 {
            grouped = Some(r.id.clone());
        }
    }
    let id = grouped.expect("a run with the three ranks");
    let done = open.wait(&id, std::time::Duration::from_secs(120)).await;
    assert_eq!(done.status.as_str(), "done", "{done:?}");
    let cross: kinetoscope_types::RanksSummary =
        open.get_json(&format!("/api/runs/{id}/ranks")).await;
    assert_eq!(cross.ranks.len(), 3);
    private.stop().await;
    open.stop().await;
}
