//! Scale-out storage for real: a `serve --workers 0` process and a `worker`
//! process sharing PostgreSQL and S3-compatible object storage. The S3 side
//! is moto's server (an S3 protocol emulator from PyPI, installed by
//! `make test`), so object_store speaks the real protocol, multipart uploads
//! included.

use crate::common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(120);

fn moto_server() -> String {
    std::env::var("KINETOSCOPE_MOTO_SERVER").unwrap_or_else(|_| {
        format!(
            "{}/.cache/kinetoscope/moto/bin/moto_server",
            std::env::var("HOME").unwrap_or_default()
        )
    })
}

struct Moto(std::process::Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn start_moto() -> (Moto, String) {
    let bin = moto_server();
    assert!(
        std::path::Path::new(&bin).exists(),
        "{bin} is missing: `make test` installs moto[server] (an S3 emulator) in a virtualenv"
    );
    let port = free_port();
    let child = Command::new(&bin)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    while reqwest::get(format!("{url}/moto-api/")).await.is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "moto did not start"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (Moto(child), url)
}

/// Keys in the bucket under a prefix (ListObjectsV2, unsigned: moto allows it).
async fn keys(s3: &str, bucket: &str, prefix: &str) -> Vec<String> {
    let xml = reqwest::get(format!("{s3}/{bucket}?list-type=2&prefix={prefix}"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    xml.split("<Key>")
        .skip(1)
        .filter_map(|s| s.split("</Key>").next())
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_and_worker_share_postgres_and_s3() {
    let (_moto, s3) = start_moto().await;
    let resp = reqwest::Client::new()
        .put(format!("{s3}/traces"))
        .send()
        .await
        .unwrap();
    assert!(
        resp.status().is_success(),
        "create bucket: {}",
        resp.status()
    );

    let data = tempfile::tempdir().unwrap();
    let db = Backend::Postgres.url(data.path()).await;
    let env: Vec<(&str, String)> = vec![
        ("KINETOSCOPE_DATA", data.path().display().to_string()),
        ("DATABASE_URL", db.clone()),
        ("KINETOSCOPE_BLOBS", "s3://traces/kinetoscope".into()),
        ("AWS_ENDPOINT", s3.clone()),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("KINETOSCOPE_LOG", "warn".into()),
    ];
    let server = Proc::start(&["serve", "--workers", "0"], &env).await;
    let _worker = Proc::start(&["worker"], &env).await;
    let api = Api::new(server.url.as_deref().unwrap());

    // A small upload (one PUT) and a large one (multipart: over 8 MB).
    let small = std::fs::read(shared_trace("hta-a100-nccl-rank0of2.json.gz")).unwrap();
    let p = kinetoscope_generate::DecodeParams {
        steps: 3,
        layers: 40,
        ..Default::default()
    };
    let mut large = Vec::new();
    kinetoscope_generate::write_decode_trace(&p, &mut large).unwrap();
    assert!(large.len() > 16 << 20, "{} bytes", large.len());
    let a = api.upload(small.clone(), "small").await;
    let b = api.upload(large.clone(), "large").await;
    for id in [&a.id, &b.id] {
        let run = api.wait(id, LONG).await;
        assert_eq!(
            run.status,
            kinetoscope_types::RunStatus::Done,
            "{:?}",
            run.error
        );
    }
    // The bytes went to the bucket, under the prefix, and come back intact.
    let stored = keys(&s3, "traces", "kinetoscope/runs/").await;
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert!(stored
        .iter()
        .any(|k| k.contains(&b.id) && k.ends_with(".json")));
    for (id, bytes) in [(&a.id, &small), (&b.id, &large)] {
        let got = api
            .http
            .get(format!("{}/api/runs/{id}/trace", api.url))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(got.len(), bytes.len());
        assert!(
            got.as_ref() == bytes.as_slice(),
            "run {id}: the stored trace differs"
        );
    }
    // Deleting a run deletes its object.
    let del = api
        .http
        .delete(format!("{}/api/runs/{}", api.url, b.id))
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 204);
    assert_eq!(keys(&s3, "traces", "kinetoscope/runs/").await.len(), 1);
}
