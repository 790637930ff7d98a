//! `kinetoscope watch DIR`: uploads each new trace file written into a
//! folder (`*.json`, `*.json.gz`, `*.json.zst`, recursively), as SGLang's
//! and vLLM's profilers write them.
//!
//! A file is uploaded once it is complete: its size and modification time
//! unchanged for `--settle-secs` (2 s), or at once when it was renamed into
//! place. File events (`notify`) wake the scan; a rescan every few seconds
//! catches what an event queue dropped. Files of one profiling cycle
//! written by several ranks (`…-TP-0…`, `…-TP-1…`, `rank3`) become one
//! run: each is uploaded as its rank of an upload group named after the
//! folder and the file name without its rank. What was uploaded is kept in
//! `DIR/.kinetoscope-watch.json`, so a restarted watcher uploads nothing
//! twice. Hidden files and folders (a leading `.`) are never uploaded.

use anyhow::Context;
use clap::{Args, ValueEnum};
use notify::event::{ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// The state file, in the watched folder.
pub const STATE_FILE: &str = ".kinetoscope-watch.json";

/// Where a run's name comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum NameFrom {
    /// The file's name, without its suffixes (and its rank).
    #[default]
    File,
    /// The folder the file is in.
    Dir,
}

/// Arguments of `watch`.
#[derive(Args, Clone, Debug)]
pub struct WatchArgs {
    /// The folder to watch (recursively).
    pub dir: PathBuf,
    /// The server's base URL.
    #[arg(
        long,
        env = "KINETOSCOPE_SERVER",
        default_value = "http://127.0.0.1:8080"
    )]
    pub server: String,
    /// Where each run's name comes from.
    #[arg(long, value_enum, default_value_t = NameFrom::File)]
    pub name_from: NameFrom,
    /// Comma-separated tags for every run.
    #[arg(long)]
    pub tags: Option<String>,
    /// Upload token, when the server requires one.
    #[arg(long, env = "KINETOSCOPE_TOKEN")]
    pub token: Option<String>,
    /// A file is complete when its size has not changed for this long.
    #[arg(long, default_value_t = 2.0, value_name = "SECS")]
    pub settle_secs: f64,
    /// Mark the trace files already in the folder as seen, without
    /// uploading them.
    #[arg(long)]
    pub skip_existing: bool,
}

/// What the watcher remembers of one file.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Seen {
    /// Its size when uploaded.
    pub bytes: u64,
    /// The run's link, once uploaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Why the server refused it (it is not retried).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The state file's content: files by their path relative to the folder.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct State {
    /// Files.
    pub files: BTreeMap<String, Seen>,
}

impl State {
    fn load(dir: &Path) -> anyhow::Result<State> {
        let path = dir.join(STATE_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("{} is not a watcher's state file", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(e) => Err(e).with_context(|| path.display().to_string()),
        }
    }

    /// Written whole to a temporary file, then renamed over the old one: a
    /// crash leaves the old state or the new, never half of one.
    fn save(&self, dir: &Path) -> anyhow::Result<()> {
        let tmp = dir.join(format!("{STATE_FILE}.tmp"));
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(&tmp, dir.join(STATE_FILE))?;
        Ok(())
    }
}

/// Whether a file name is a trace the watcher uploads.
pub fn is_trace_name(name: &str) -> bool {
    !name.starts_with('.')
        && [".json", ".json.gz", ".json.zst"]
            .iter()
            .any(|s| name.ends_with(s))
}

/// A file seen but not yet complete.
struct Pending {
    bytes: u64,
    modified: Option<SystemTime>,
    since: Instant,
    renamed: bool,
}

/// Every trace file under `dir` (not in hidden folders), relative paths.
fn scan(dir: &Path, out: &mut Vec<(String, PathBuf, std::fs::Metadata)>) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with('.') {
                continue;
            }
            let Ok(meta) = e.metadata() else { continue };
            let path = e.path();
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() && is_trace_name(&name) {
                if let Ok(rel) = path.strip_prefix(dir) {
                    out.push((rel.to_string_lossy().to_string(), path, meta));
                }
            }
        }
    }
}

/// The name of a trace file without its suffixes.
fn stem(name: &str) -> &str {
    let mut s = name;
    for suffix in [".zst", ".gz", ".json", ".trace", ".pt"] {
        s = s.strip_suffix(suffix).unwrap_or(s);
    }
    s
}

/// The query of one file's upload: name, tags, and its upload group and
/// rank when its name gives a rank.
fn upload_query(root: &Path, rel: &str, args: &WatchArgs) -> Vec<(&'static str, String)> {
    let rel_path = Path::new(rel);
    let file = rel_path
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_default();
    let ranked = kinetoscope_trace::ranks::rank_in_name(&file);
    let name = match args.name_from {
        NameFrom::Dir => rel_path
            .parent()
            .and_then(|p| p.file_name())
            .or_else(|| root.file_name())
            .map(|f| f.to_string_lossy().to_string())
            .unwrap_or_else(|| "trace".into()),
        NameFrom::File => match &ranked {
            Some((_, pattern)) => stem(pattern)
                .trim_end_matches(['-', '_', '.', '*'])
                .to_string(),
            None => stem(&file).to_string(),
        },
    };
    let mut q = vec![("name", name)];
    if let Some(t) = &args.tags {
        q.push(("tags", t.clone()));
    }
    if let Some((rank, pattern)) = ranked {
        use sha2::Digest;
        let parent = rel_path.parent().unwrap_or(Path::new(""));
        let mut h = sha2::Sha256::new();
        h.update(root.to_string_lossy().as_bytes());
        h.update([0]);
        h.update(parent.join(&pattern).to_string_lossy().as_bytes());
        let hex: String = h.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        q.push(("group", format!("watch:{hex}")));
        q.push(("rank", rank.to_string()));
    }
    q
}

/// Runs `watch` until interrupted.
pub fn run(args: WatchArgs, rt: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    let root = args
        .dir
        .canonicalize()
        .with_context(|| format!("cannot watch {}", args.dir.display()))?;
    anyhow::ensure!(root.is_dir(), "{} is not a folder", root.display());
    let mut state = State::load(&root)?;
    let server = args.server.trim_end_matches('/').to_string();
    let settle = Duration::from_secs_f64(args.settle_secs.clamp(0.0, 3600.0));
    let (tx, rx) = std::sync::mpsc::channel::<notify::Result<notify::Event>>();
    let mut watcher = notify::recommended_watcher(move |ev| {
        let _ = tx.send(ev);
    })
    .context("cannot start watching files")?;
    watcher
        .watch(&root, RecursiveMode::Recursive)
        .with_context(|| format!("cannot watch {}", root.display()))?;
    if args.skip_existing {
        let mut found = Vec::new();
        scan(&root, &mut found);
        for (rel, _, meta) in found {
            state.files.entry(rel).or_insert(Seen {
                bytes: meta.len(),
                run: None,
                error: Some("there before the watcher started (--skip-existing)".into()),
            });
        }
        state.save(&root)?;
    }
    eprintln!(
        "watching {} for traces; uploading to {server}",
        root.display()
    );
    let client = reqwest::Client::new();
    let mut pending: HashMap<String, Pending> = HashMap::new();
    // Files the server could not be reached for: retried after this.
    let mut retry_at: HashMap<String, Instant> = HashMap::new();
    loop {
        // Wait for an event, or the rescan's tick (sooner while files are
        // settling).
        let tick = if pending.is_empty() {
            Duration::from_secs(5)
        } else {
            Duration::from_millis(250)
        };
        let mut renamed: HashSet<PathBuf> = HashSet::new();
        let mut take = |ev: notify::Result<notify::Event>| {
            if let Ok(ev) = ev {
                match ev.kind {
                    EventKind::Modify(ModifyKind::Name(RenameMode::To)) => {
                        renamed.extend(ev.paths);
                    }
                    EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {
                        renamed.extend(ev.paths.into_iter().skip(1));
                    }
                    _ => {}
                }
            }
        };
        match rx.recv_timeout(tick) {
            Ok(ev) => take(ev),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                anyhow::bail!("the file watcher stopped")
            }
        }
        while let Ok(ev) = rx.try_recv() {
            take(ev);
        }
        let mut found = Vec::new();
        scan(&root, &mut found);
        let now = Instant::now();
        let mut ready: Vec<(String, PathBuf)> = Vec::new();
        for (rel, path, meta) in found {
            if state.files.contains_key(&rel) || retry_at.get(&rel).is_some_and(|t| *t > now) {
                continue;
            }
            let (bytes, modified) = (meta.len(), meta.modified().ok());
            let was_renamed = renamed.contains(&path);
            let p = pending.entry(rel.clone()).or_insert(Pending {
                bytes,
                modified,
                since: now,
                renamed: false,
            });
            if p.bytes != bytes || p.modified != modified {
                (p.bytes, p.modified, p.since) = (bytes, modified, now);
            }
            p.renamed |= was_renamed;
            if bytes > 0 && (p.renamed || now.duration_since(p.since) >= settle) {
                ready.push((rel, path));
            }
        }
        for (rel, path) in ready {
            pending.remove(&rel);
            let query = upload_query(&root, &rel, &args);
            let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            let sent = rt.block_on(super::upload::send(
                &client,
                &server,
                args.token.as_deref(),
                std::slice::from_ref(&path),
                &query,
                &indicatif::ProgressBar::hidden(),
            ));
            match sent {
                Ok(created) => {
                    let link = format!("{server}{}", created.url);
                    println!("{link}\t{rel}");
                    state.files.insert(
                        rel,
                        Seen {
                            bytes,
                            run: Some(link),
                            error: None,
                        },
                    );
                }
                Err(e) if refused(&e) => {
                    eprintln!("{rel}: not uploaded: {e:#}");
                    state.files.insert(
                        rel,
                        Seen {
                            bytes,
                            run: None,
                            error: Some(format!("{e:#}")),
                        },
                    );
                }
                Err(e) => {
                    // The server is down or the network failed: try again
                    // in a while, the file still unseen.
                    eprintln!("{rel}: upload failed, retrying in 10 s: {e:#}");
                    retry_at.insert(rel, now + Duration::from_secs(10));
                    continue;
                }
            }
            state.save(&root)?;
        }
    }
}

/// Whether an upload's error is the file's fault (not a trace, refused
/// by the server with a 4xx other than 401, 408 and 429: a bad trace, a
/// taken rank), which trying again would not change; the network, the
/// server's own errors and a missing token are retried.
fn refused(e: &anyhow::Error) -> bool {
    if e.chain()
        .any(|c| c.downcast_ref::<reqwest::Error>().is_some())
    {
        return false;
    }
    match e
        .to_string()
        .strip_prefix("the server answered ")
        .and_then(|t| t.get(..3))
        .and_then(|code| code.parse::<u16>().ok())
    {
        Some(c) => (400..500).contains(&c) && !matches!(c, 401 | 408 | 429),
        // Read here, before sending: not a trace.
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_files_are_traces() {
        assert!(is_trace_name("a.json"));
        assert!(is_trace_name("1712-TP-0.trace.json.gz"));
        assert!(is_trace_name("x.pt.trace.json.zst"));
        assert!(!is_trace_name(".kinetoscope-watch.json"));
        assert!(!is_trace_name("a.json.gz.tmp"));
        assert!(!is_trace_name("notes.txt"));
    }

    #[test]
    fn ranks_of_one_cycle_share_a_group() {
        let args = WatchArgs {
            dir: PathBuf::from("/t"),
            server: String::new(),
            name_from: NameFrom::File,
            tags: None,
            token: None,
            settle_secs: 2.0,
            skip_existing: false,
        };
        let root = Path::new("/t");
        let a = upload_query(root, "c/1712-TP-0.trace.json.gz", &args);
        let b = upload_query(root, "c/1712-TP-1.trace.json.gz", &args);
        let solo = upload_query(root, "c/host_12.1712.pt.trace.json.gz", &args);
        let get =
            |q: &[(&str, String)], k: &str| q.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        assert_eq!(get(&a, "group"), get(&b, "group"));
        assert!(get(&a, "group").is_some());
        assert_eq!(get(&a, "rank").as_deref(), Some("0"));
        assert_eq!(get(&b, "rank").as_deref(), Some("1"));
        assert_eq!(get(&a, "name").as_deref(), Some("1712-TP"));
        assert_eq!(get(&solo, "group"), None);
        assert_eq!(get(&solo, "name").as_deref(), Some("host_12.1712"));
    }
}
