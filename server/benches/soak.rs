//! Soak (`make soak`, `SOAK_MINUTES=10 make soak`): real processes for a
//! number of minutes. One `kinetoscope serve --workers 0` and one
//! `kinetoscope worker` on SQLite; the shared traces uploaded continuously
//! (at most 60 runs unsettled; settled runs beyond the newest 30 deleted);
//! 100 concurrent readers; the worker killed with -9 every minute and
//! restarted; once, the data folder (a tmpfs, so it can fill) filled to the
//! last byte for 20 s. At the end: every acknowledged upload is `done` or
//! `failed` with a reason, none is lost or duplicated, full-disk uploads got
//! 507/503 and left no run, no 5xx otherwise, and the server's RSS over
//! time. Prints a report; exits non-zero when an invariant breaks.

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The server's resident memory, MB.
fn rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The shared traces of the mix: every one up to 3 MB (gzip), in a fixed order.
fn mix() -> Vec<(String, Vec<u8>)> {
    let dir = repo().join("../shared/traces");
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() <= 3 << 20))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().to_string(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[derive(Default)]
struct Tally {
    acked: Vec<String>,
    full: u64,
    other: BTreeMap<u16, u64>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let minutes: f64 = std::env::var("SOAK_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(3.0);
    let readers: usize = std::env::var("SOAK_READERS")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(100);
    // SOAK_RETENTION=0 turns the reaper and the back-pressure off: the
    // uploads then fill the disk by themselves (RELIABILITY.md's open finding).
    let retention = std::env::var("SOAK_RETENTION").map_or(true, |v| v != "0");
    let disk_mb: u64 = std::env::var("SOAK_DISK_MB")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(768);
    let data = tempfile::tempdir().unwrap();
    // A tmpfs, so the disk can be filled without filling the machine's.
    let tmpfs = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={disk_mb}m"), "tmpfs"])
        .arg(data.path())
        .status()
        .is_ok_and(|s| s.success());
    struct Unmount(std::path::PathBuf, bool);
    impl Drop for Unmount {
        fn drop(&mut self) {
            if self.1 {
                let _ = std::process::Command::new("umount")
                    .arg("-l")
                    .arg(&self.0)
                    .status();
            }
        }
    }
    let _unmount = Unmount(data.path().to_path_buf(), tmpfs);
    if !tmpfs {
        println!("(no tmpfs: mounting needs root; the full-disk phase is skipped)");
    }
    let db = Backend::Sqlite.url(data.path()).await;
    let env = vec![
        ("KINETOSCOPE_DATA", data.path().display().to_string()),
        ("DATABASE_URL", db.clone()),
        ("KINETOSCOPE_LOG", "warn".into()),
        ("KINETOSCOPE_LEASE_SECS", "5".into()),
    ];
    let server = Proc::start(&["serve", "--workers", "0"], &env).await;
    let pid = server.child.id();
    let url = server.url.clone().unwrap();
    let worker = Arc::new(Mutex::new(Proc::start(&["worker"], &env).await));
    let traces = Arc::new(mix());
    println!(
        "soak: {minutes} min, {} traces in the mix, {readers} readers, worker killed every 60 s",
        traces.len()
    );
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(200)
        .build()
        .unwrap();
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(minutes * 60.0);
    let tally = Arc::new(Mutex::new(Tally::default()));
    let reads = Arc::new(AtomicU64::new(0));
    let read_5xx = Arc::new(AtomicU64::new(0));
    let disk_full = Arc::new(AtomicBool::new(false));

    // Uploads, one after another, through the mix.
    let reaped_n = Arc::new(AtomicU64::new(0));
    let uploader = {
        let (http, url, tally, traces, disk_full, reaped_n) = (
            http.clone(),
            url.clone(),
            tally.clone(),
            traces.clone(),
            disk_full.clone(),
            reaped_n.clone(),
        );
        tokio::spawn(async move {
            let mut n = 0usize;
            while Instant::now() < deadline {
                // Back-pressure: at most 60 runs not yet settled and reaped
                // (uploads go on at the pace the analysis keeps up with).
                // While the disk is full nothing settles: uploads go on, 5 a
                // second, so they meet the full disk.
                let backlog =
                    tally.lock().unwrap().acked.len() - reaped_n.load(Ordering::Relaxed) as usize;
                if disk_full.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                } else if retention && backlog > 60 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                let (name, bytes) = &traces[n % traces.len()];
                n += 1;
                let resp = http
                    .post(format!("{url}/api/runs?name=soak-{n}-{name}"))
                    .body(bytes.clone())
                    .send()
                    .await;
                let Ok(resp) = resp else { continue };
                let status = resp.status().as_u16();
                if status == 201 {
                    let c: kinetoscope_types::Created = resp.json().await.unwrap();
                    tally.lock().unwrap().acked.push(c.id);
                    continue;
                }
                let mut t = tally.lock().unwrap();
                match status {
                    // Without retention the uploads fill the disk themselves.
                    507 | 503 if disk_full.load(Ordering::Relaxed) || !retention => t.full += 1,
                    s => *t.other.entry(s).or_default() += 1,
                }
            }
        })
    };
    // Retention, as an operator would keep: once a run beyond the newest 30
    // has settled (done, or failed with a reason), it is deleted. Keeps the
    // disk from filling on its own, and deletes are writes too.
    let reaper = {
        let (http, url, tally, reaped_n) =
            (http.clone(), url.clone(), tally.clone(), reaped_n.clone());
        tokio::spawn(async move {
            let (mut done, mut failed, mut problems) = (0u64, 0u64, Vec::<String>::new());
            loop {
                let next = {
                    let t = tally.lock().unwrap();
                    let k = reaped_n.load(Ordering::Relaxed) as usize;
                    (retention && t.acked.len() > k + 30).then(|| t.acked[k].clone())
                };
                let Some(id) = next else {
                    if Instant::now() >= deadline {
                        return (done, failed, problems);
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                let Ok(resp) = http.get(format!("{url}/api/runs/{id}")).send().await else {
                    continue;
                };
                let r: kinetoscope_types::RunInfo = match resp.json().await {
                    Ok(r) => r,
                    Err(_) => continue,
                };
                match r.status.as_str() {
                    "done" => done += 1,
                    "failed" if r.error.as_deref().is_some_and(|e| !e.is_empty()) => failed += 1,
                    "failed" => problems.push(format!("run {id} failed with no reason")),
                    _ => {
                        if Instant::now() >= deadline {
                            return (done, failed, problems);
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                }
                match http.delete(format!("{url}/api/runs/{id}")).send().await {
                    Ok(d) if d.status().as_u16() == 204 => {}
                    Ok(d) => problems.push(format!("deleting {id}: {}", d.status())),
                    Err(e) => problems.push(format!("deleting {id}: {e}")),
                }
                reaped_n.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // Readers: the runs list and the view of a run uploaded earlier.
    let mut reader_tasks = Vec::new();
    for r in 0..readers {
        let (http, url, tally, reads, read_5xx) = (
            http.clone(),
            url.clone(),
            tally.clone(),
            reads.clone(),
            read_5xx.clone(),
        );
        reader_tasks.push(tokio::spawn(async move {
            let mut k = r;
            while Instant::now() < deadline {
                k += 7;
                let id = {
                    let t = tally.lock().unwrap();
                    (!t.acked.is_empty()).then(|| t.acked[k % t.acked.len()].clone())
                };
                let target = match (&id, k % 2) {
                    (Some(id), 0) => format!("{url}/api/runs/{id}/view"),
                    _ => format!("{url}/api/runs?limit=20"),
                };
                if let Ok(resp) = http.get(target).send().await {
                    reads.fetch_add(1, Ordering::Relaxed);
                    if resp.status().is_server_error() {
                        read_5xx.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = resp.bytes().await;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }));
    }
    // The worker killed with -9 every minute, and started again.
    let killer = {
        let (worker, env) = (worker.clone(), env.clone());
        tokio::spawn(async move {
            let mut kills = 0u32;
            loop {
                tokio::time::sleep(Duration::from_secs(60)).await;
                if Instant::now() >= deadline {
                    return kills;
                }
                worker.lock().unwrap().kill9();
                let fresh = Proc::start(&["worker"], &env).await;
                *worker.lock().unwrap() = fresh;
                kills += 1;
            }
        })
    };
    // RSS every 5 s, and the disk filled once, at a third of the time.
    let mut rss = Vec::new();
    let fill_at = started + Duration::from_secs_f64(minutes * 20.0);
    let mut filled = false;
    while Instant::now() < deadline {
        rss.push((started.elapsed().as_secs(), rss_mb(pid)));
        if tmpfs && !filled && Instant::now() >= fill_at {
            filled = true;
            disk_full.store(true, Ordering::Relaxed);
            let filler = data.path().join("filler");
            let wrote = tokio::task::spawn_blocking(move || {
                use std::io::Write;
                let mut f = std::fs::File::create(&filler).unwrap();
                let block = vec![0u8; 1 << 20];
                let mut n = 0u64;
                while f.write_all(&block).is_ok() {
                    n += 1;
                }
                let _ = f.sync_all();
                n
            })
            .await
            .unwrap();
            println!(
                "t={:>4}s disk filled ({wrote} MB of filler); holding 20 s",
                started.elapsed().as_secs()
            );
            tokio::time::sleep(Duration::from_secs(20)).await;
            let _ = std::fs::remove_file(data.path().join("filler"));
            disk_full.store(false, Ordering::Relaxed);
            println!("t={:>4}s disk freed", started.elapsed().as_secs());
            continue;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    uploader.await.unwrap();
    for t in reader_tasks {
        t.await.unwrap();
    }
    let kills = killer.await.unwrap();

    let (reaped_done, reaped_failed, mut problems) = reaper.await.unwrap();
    let reaped = reaped_n.load(Ordering::Relaxed) as usize;

    // Every acknowledged upload ends done or failed with a reason: the
    // reaped ones were checked before their deletion, the rest now.
    let api = Api::new(&url);
    let acked = tally.lock().unwrap().acked.clone();
    let settle = Instant::now();
    let (mut done, mut failed) = (reaped_done, reaped_failed);
    for id in &acked[reaped..] {
        let r = api.wait(id, Duration::from_secs(900)).await;
        match r.status.as_str() {
            "done" => done += 1,
            "failed" if r.error.as_deref().is_some_and(|e| !e.is_empty()) => failed += 1,
            other => problems.push(format!("run {id} ended {other} ({:?})", r.error)),
        }
    }
    let settled = settle.elapsed();
    // None lost, none duplicated, none extra.
    let unique: HashSet<&String> = acked.iter().collect();
    if unique.len() != acked.len() {
        problems.push(format!(
            "{} acknowledged ids, {} distinct",
            acked.len(),
            unique.len()
        ));
    }
    let list: kinetoscope_types::RunList = api.get_json("/api/runs?limit=1").await;
    if list.total as usize != acked.len() - reaped {
        problems.push(format!(
            "the server lists {} runs: {} uploads were acknowledged, {reaped} deleted",
            list.total,
            acked.len()
        ));
    }
    let t = tally.lock().unwrap();
    if !t.other.is_empty() {
        problems.push(format!("uploads answered otherwise: {:?}", t.other));
    }
    if tmpfs && t.full == 0 {
        problems.push("no upload met the full disk".into());
    }
    let read_5xx = read_5xx.load(Ordering::Relaxed);
    if read_5xx > 0 {
        problems.push(format!("{read_5xx} reads got a 5xx"));
    }
    println!(
        "soak {minutes} min: {} uploads acknowledged ({done} done, {failed} failed with a reason; \
         {reaped} deleted once settled), \
         {} refused while the disk was full (507/503, no run), {} reads ({read_5xx} 5xx), \
         worker killed {kills} times; all settled {:.0} s after the end",
        acked.len(),
        t.full,
        reads.load(Ordering::Relaxed),
        settled.as_secs_f64()
    );
    let first = rss
        .iter()
        .find(|(s, _)| *s >= 30)
        .or(rss.first())
        .map_or(0.0, |r| r.1);
    let max = rss.iter().map(|r| r.1).fold(0.0, f64::max);
    let last = rss.last().map_or(0.0, |r| r.1);
    println!("server RSS: after 30 s {first:.0} MB, max {max:.0} MB, at the end {last:.0} MB");
    println!(
        "RSS over time (s: MB): {}",
        rss.iter()
            .step_by((rss.len() / 24).max(1))
            .map(|(s, m)| format!("{s}: {m:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    drop(server);
    if problems.is_empty() {
        println!("soak: every invariant held");
    } else {
        for p in &problems {
            println!("SOAK PROBLEM: {p}");
        }
        std::process::exit(1);
    }
}
