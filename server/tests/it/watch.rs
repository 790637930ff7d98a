//! `kinetoscope watch DIR`: files dropped whole, written slowly, renamed
//! into place, several ranks of one cycle, in a sub-folder, a bad file, and
//! a restart: each uploaded exactly once, the ranks as one run, the bad
//! file reported while the watcher keeps going.

use crate::common::*;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Watcher {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Watcher {
    fn start(dir: &Path, server: &str) -> Watcher {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
            .args(["watch", dir.to_str().unwrap(), "--server", server])
            .env_remove("KINETOSCOPE_SERVER")
            .env_remove("KINETOSCOPE_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().unwrap();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(l);
            }
        });
        Watcher { child, lines }
    }

    /// The uploads printed so far: (run link, relative path).
    fn uploads(&self) -> Vec<(String, String)> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| l.split_once('\t'))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<(String, String)> {
        let start = Instant::now();
        loop {
            let u = self.uploads();
            if u.len() >= n {
                return u;
            }
            assert!(
                start.elapsed() < timeout,
                "{} uploads after {timeout:?}: {u:?}",
                u.len()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watched_folder_uploads_each_trace_once() {
    let srv = TestServer::start(Opts::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let trace = small_trace(2, 4);
    // One there before the watcher starts.
    std::fs::write(root.join("before.json.zst"), &trace).unwrap();
    // A link planted where the watcher writes its state: never followed.
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, b"untouched").unwrap();
    std::os::unix::fs::symlink(&victim, root.join(".kinetoscope-watch.json.tmp")).unwrap();
    let w = Watcher::start(root, &srv.url);
    // Whole.
    std::fs::write(root.join("whole.json.zst"), &trace).unwrap();
    // Renamed into place from a hidden name (never uploaded itself).
    std::fs::write(root.join(".partial"), &trace).unwrap();
    std::fs::rename(root.join(".partial"), root.join("renamed.json.zst")).unwrap();
    // Two ranks of one cycle, in a sub-folder.
    std::fs::create_dir(root.join("sglang")).unwrap();
    for r in 0..2 {
        std::fs::write(
            root.join(format!("sglang/1712.5-TP-{r}.trace.json.zst")),
            &trace,
        )
        .unwrap();
    }
    // Not a trace: reported, not retried; the watcher goes on.
    std::fs::write(root.join("notes.json"), b"not json at all").unwrap();
    // A trace cut off half-way: uploaded, its run fails with the reason.
    let json = zstd::decode_all(&trace[..]).unwrap();
    std::fs::write(root.join("broken.json"), &json[..json.len() / 2]).unwrap();
    // Written slowly: a third, a pause longer than a second, the rest.
    let slow = root.join("slow.json.zst");
    {
        let mut f = std::fs::File::create(&slow).unwrap();
        let third = trace.len() / 3;
        f.write_all(&trace[..third]).unwrap();
        f.flush().unwrap();
        tokio::time::sleep(Duration::from_millis(1200)).await;
        f.write_all(&trace[third..2 * third]).unwrap();
        f.flush().unwrap();
        tokio::time::sleep(Duration::from_millis(1200)).await;
        f.write_all(&trace[2 * third..]).unwrap();
    }
    let ups = w.wait_for(7, Duration::from_secs(60)).await;
    let mut paths: Vec<&str> = ups.iter().map(|(_, p)| p.as_str()).collect();
    paths.sort();
    assert_eq!(
        paths,
        vec![
            "before.json.zst",
            "broken.json",
            "renamed.json.zst",
            "sglang/1712.5-TP-0.trace.json.zst",
            "sglang/1712.5-TP-1.trace.json.zst",
            "slow.json.zst",
            "whole.json.zst"
        ]
    );
    // The slow file went up whole: its run analyzes.
    let slow_link = &ups.iter().find(|(_, p)| p == "slow.json.zst").unwrap().0;
    let run = srv
        .wait(
            slow_link.rsplit('/').next().unwrap(),
            Duration::from_secs(120),
        )
        .await;
    assert_eq!(run.status.as_str(), "done", "{run:?}");
    let broken = &ups.iter().find(|(_, p)| p == "broken.json").unwrap().0;
    let run = srv
        .wait(broken.rsplit('/').next().unwrap(), Duration::from_secs(120))
        .await;
    assert_eq!(run.status.as_str(), "failed", "{run:?}");
    assert!(run.error.is_some_and(|e| !e.is_empty()));
    // The two ranks are one run, named after the cycle.
    let rank_links: Vec<&String> = ups
        .iter()
        .filter(|(_, p)| p.starts_with("sglang/"))
        .map(|(l, _)| l)
        .collect();
    assert_eq!(rank_links[0], rank_links[1]);
    let grouped = srv.run(rank_links[0].rsplit('/').next().unwrap()).await;
    assert_eq!(grouped.ranks.len(), 2);
    assert_eq!(grouped.name, "1712.5-TP");
    // The state file records every file, the bad one with its reason, a
    // line each; the planted link's target is untouched.
    let state = std::fs::read_to_string(root.join(".kinetoscope-watch.json")).unwrap();
    let lines: Vec<serde_json::Value> = state
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let notes = lines.iter().find(|l| l["path"] == "notes.json").unwrap();
    assert!(notes["error"].is_string(), "{state}");
    let paths: std::collections::HashSet<&str> =
        lines.iter().map(|l| l["path"].as_str().unwrap()).collect();
    assert_eq!(paths.len(), 8, "{state}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"untouched");

    // A restart uploads nothing twice, then the next new file.
    drop(w);
    let w = Watcher::start(root, &srv.url);
    // Moved: the same file, not uploaded again. A hard link to a file
    // outside the folder: not uploaded.
    std::fs::create_dir(root.join("moved")).unwrap();
    std::fs::rename(
        root.join("whole.json.zst"),
        root.join("moved/whole.json.zst"),
    )
    .unwrap();
    let secret = outside.path().join("secret.json.zst");
    std::fs::write(&secret, &trace).unwrap();
    std::fs::hard_link(&secret, root.join("linked.json.zst")).unwrap();
    std::fs::write(root.join("after.json.zst"), &trace).unwrap();
    let ups = w.wait_for(1, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ups_later = w.uploads();
    assert_eq!(ups_later, ups, "nothing more");
    assert_eq!(ups.len(), 1);
    assert_eq!(ups[0].1, "after.json.zst");
    let list: kinetoscope_types::RunList = srv.get_json("/api/runs").await;
    assert_eq!(list.total, 7, "six single runs and the two-rank one");
    drop(w);
    srv.stop().await;
}
