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
        diff(&[
            &ida,
            "AAAAAAAAAAAAAAAAAAAAAA",
            "--server",
            &url,
            "--fail-above",
            "5",
        ])
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("404"), "{}", text(&out.stderr));
    srv.stop().await;
}
