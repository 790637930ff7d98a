//! `kinetoscope watch DIR`: uploads each new trace file written into a
//! folder (`*.json`, `*.json.gz`, `*.json.zst`, recursively), as SGLang's
//! and vLLM's profilers write them.
//!
//! A file is uploaded once it is complete: its size and modification time
//! unchanged for `--settle-secs` (2 s), or at once when it was renamed into
//! place, and its JSON read to its end (a writer that paused longer than
//! the settling time has not closed its event list; a file that stays cut
//! off for [`INCOMPLETE_GRACE`] settling times goes up all the same, so
//! its run says why it fails). File events (`notify`) wake the scan; a rescan every few seconds
//! catches what an event queue dropped. Files of one profiling cycle
//! written by several ranks (`…-TP-0…`, `…-TP-1…`, `rank3`) become one
//! run: each is uploaded as its rank of an upload group named after the
//! folder, the file name without its rank and a key of the watcher's own.
//! What was uploaded is kept in `DIR/.kinetoscope-watch.json`, one line
//! appended per file (never written through a link planted there), so a
//! restarted watcher uploads nothing twice. A file is known by its device,
//! inode, size and modification time: one renamed or moved is not
//! uploaded again, one rewritten is. Hidden files and folders (a leading
//! `.`), links, and files with more than one hard link (which may be a
//! file outside the folder) are never uploaded.

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

/// How many settling times a file that does not read to its end waits,
/// unchanged, before it is uploaded anyway (a file cut off for good, whose
/// run then says why it fails): long enough for a writer that pauses
/// between flushes (torch's exporter writes in one go; a copy over a slow
/// disk pauses for seconds), short enough that a broken file is reported
/// within a minute at the default 2 s.
pub const INCOMPLETE_GRACE: u32 = 10;

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
    /// Its device and inode.
    #[serde(skip_serializing_if = "is_zero")]
    pub dev: u64,
    /// Inode.
    #[serde(skip_serializing_if = "is_zero")]
    pub ino: u64,
    /// Its modification time, ns since the epoch.
    #[serde(skip_serializing_if = "is_zero")]
    pub mtime_ns: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// A file's identity: (device, inode, size, modification time in ns).
type Identity = (u64, u64, u64, u64);

impl Seen {
    fn of(meta: &std::fs::Metadata) -> Seen {
        use std::os::unix::fs::MetadataExt;
        Seen {
            bytes: meta.len(),
            dev: meta.dev(),
            ino: meta.ino(),
            mtime_ns: (meta.mtime() as u64).saturating_mul(1_000_000_000)
                + meta.mtime_nsec() as u64,
            ..Seen::default()
        }
    }

    fn identity(&self) -> Identity {
        (self.dev, self.ino, self.bytes, self.mtime_ns)
    }

    /// Whether `meta` is the file this was (the same size and time; a
    /// record from before identities were kept matches by size).
    fn matches(&self, meta: &std::fs::Metadata) -> bool {
        let now = Seen::of(meta);
        if self.mtime_ns == 0 {
            return self.bytes == now.bytes;
        }
        self.identity() == now.identity()
    }
}

/// One line of the state file.
#[derive(Serialize, Deserialize)]
struct Line {
    path: String,
    #[serde(flatten)]
    seen: Seen,
}

/// The files seen, by their path relative to the folder, and by identity.
#[derive(Clone, Debug, Default)]
pub struct State {
    /// Files.
    pub files: BTreeMap<String, Seen>,
    by_identity: HashMap<Identity, String>,
}

impl State {
    /// Reads the state file: one JSON line per file (the last line of a
    /// path wins), or the whole-object form earlier watchers wrote. Then
    /// writes it compacted, once.
    fn load(dir: &Path) -> anyhow::Result<State> {
        let path = dir.join(STATE_FILE);
        let bytes = match std::fs::symlink_metadata(&path) {
            Ok(m) if !m.is_file() => anyhow::bail!(
                "{} is not a plain file (a link?): remove it to start afresh",
                path.display()
            ),
            Ok(_) => std::fs::read(&path).with_context(|| path.display().to_string())?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e).with_context(|| path.display().to_string()),
        };
        let mut state = State::default();
        #[derive(Deserialize)]
        struct Whole {
            files: BTreeMap<String, Seen>,
        }
        if let Ok(w) = serde_json::from_slice::<Whole>(&bytes) {
            for (p, s) in w.files {
                state.note(p, s);
            }
        } else {
            for (k, line) in bytes.split(|&b| b == b'\n').enumerate() {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let l: Line = serde_json::from_slice(line).with_context(|| {
                    format!("{} line {} is not a watcher's state", path.display(), k + 1)
                })?;
                state.note(l.path, l.seen);
            }
        }
        state.rewrite(dir)?;
        Ok(state)
    }

    fn note(&mut self, path: String, seen: Seen) {
        if seen.mtime_ns != 0 {
            self.by_identity.insert(seen.identity(), path.clone());
        }
        self.files.insert(path, seen);
    }

    /// Records one file: in memory, and one line appended to the state
    /// file (O(1) per file; the whole file is written only at start).
    fn record(&mut self, dir: &Path, path: String, seen: Seen) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(&Line {
            path: path.clone(),
            seen: seen.clone(),
        })?;
        line.push(b'\n');
        let mut f = open_no_follow(&dir.join(STATE_FILE), false)?;
        std::io::Write::write_all(&mut f, &line)?;
        self.note(path, seen);
        Ok(())
    }

    /// Writes every line to a new file, then renames it over the old one:
    /// a crash leaves the old state or the new, never half of one. The new
    /// file is created afresh (a link planted at its name is removed, not
    /// followed).
    fn rewrite(&self, dir: &Path) -> anyhow::Result<()> {
        let tmp = dir.join(format!("{STATE_FILE}.tmp"));
        let mut out = Vec::new();
        for (path, seen) in &self.files {
            serde_json::to_writer(
                &mut out,
                &Line {
                    path: path.clone(),
                    seen: seen.clone(),
                },
            )?;
            out.push(b'\n');
        }
        let mut f = open_no_follow(&tmp, true)?;
        std::io::Write::write_all(&mut f, &out)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(STATE_FILE))?;
        Ok(())
    }
}

/// Opens a state file for writing without following a link at its name:
/// `fresh` removes whatever is there and creates it anew (exclusively),
/// else it appends (and refuses a link, `O_NOFOLLOW`).
fn open_no_follow(path: &Path, fresh: bool) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).custom_flags(libc::O_NOFOLLOW).mode(0o600);
    if fresh {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| path.display().to_string()),
        }
        o.create_new(true);
    } else {
        o.append(true).create(true);
    }
    o.open(path)
        .with_context(|| format!("{}: cannot write the watcher's state", path.display()))
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
    /// Whether the file read to its end at this size and time (checked
    /// once per change).
    whole: Option<bool>,
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
fn upload_query(
    root: &Path,
    rel: &str,
    args: &WatchArgs,
    secret: &[u8],
) -> Vec<(&'static str, String)> {
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
        h.update(secret);
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

/// Trace text (a file's path) as the terminal shows it.
fn v(s: &str) -> std::borrow::Cow<'_, str> {
    kinetoscope_types::escape::visible(s)
}

/// Runs `watch` until interrupted.
pub fn run(args: WatchArgs, rt: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    let root = args
        .dir
        .canonicalize()
        .with_context(|| format!("cannot watch {}", args.dir.display()))?;
    anyhow::ensure!(root.is_dir(), "{} is not a folder", root.display());
    let mut state = State::load(&root)?;
    // This watcher's own part of its upload groups' keys: another client
    // that knows the folder and the file names cannot compute them.
    let mut group_secret = [0u8; 16];
    getrandom::fill(&mut group_secret).context("the OS random source failed")?;
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
            if !state.files.contains_key(&rel) {
                let seen = Seen {
                    error: Some("there before the watcher started (--skip-existing)".into()),
                    ..Seen::of(&meta)
                };
                state.record(&root, rel, seen)?;
            }
        }
    }
    eprintln!(
        "watching {} for traces; uploading to {server}",
        root.display()
    );
    let client = super::client();
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
            if state.files.get(&rel).is_some_and(|s| s.matches(&meta))
                || retry_at.get(&rel).is_some_and(|t| *t > now)
            {
                continue;
            }
            let seen = Seen::of(&meta);
            // Moved or renamed from a file already uploaded: the same file.
            if let Some(was) = state.by_identity.get(&seen.identity()).cloned() {
                if was != rel {
                    let old = state.files.get(&was).cloned().unwrap_or_default();
                    state.record(&root, rel, Seen { ..old })?;
                    continue;
                }
            }
            {
                use std::os::unix::fs::MetadataExt;
                if meta.nlink() > 1 {
                    eprintln!(
                        "{}: not uploaded: it has {} hard links",
                        v(&rel),
                        meta.nlink()
                    );
                    let error = format!(
                        "not uploaded: a file with {} hard links may be a file outside the folder",
                        meta.nlink()
                    );
                    state.record(
                        &root,
                        rel,
                        Seen {
                            error: Some(error),
                            ..seen
                        },
                    )?;
                    continue;
                }
            }
            let (bytes, modified) = (meta.len(), meta.modified().ok());
            let was_renamed = renamed.contains(&path);
            let p = pending.entry(rel.clone()).or_insert(Pending {
                bytes,
                modified,
                since: now,
                renamed: false,
                whole: None,
            });
            if p.bytes != bytes || p.modified != modified {
                (p.bytes, p.modified, p.since, p.whole) = (bytes, modified, now, None);
            }
            p.renamed |= was_renamed;
            if bytes == 0 || !(p.renamed || now.duration_since(p.since) >= settle) {
                continue;
            }
            // Settled: read it to its end once, and wait while it is cut
            // off (up to the grace).
            let whole = *p.whole.get_or_insert_with(|| {
                std::fs::File::open(&path)
                    .and_then(kinetoscope_trace::import::written_whole)
                    .unwrap_or(false)
            });
            if whole || now.duration_since(p.since) >= settle * INCOMPLETE_GRACE {
                ready.push((rel, path));
            }
        }
        for (rel, path) in ready {
            pending.remove(&rel);
            // What is uploaded is the file as it is now.
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let seen = Seen::of(&meta);
            let query = upload_query(&root, &rel, &args, &group_secret);
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
                    println!("{link}\t{}", v(&rel));
                    let seen = Seen {
                        run: Some(link),
                        ..seen
                    };
                    state.record(&root, rel, seen)?;
                }
                Err(e) if refused(&e) => {
                    eprintln!("{}: not uploaded: {}", v(&rel), v(&format!("{e:#}")));
                    let seen = Seen {
                        error: Some(format!("{e:#}")),
                        ..seen
                    };
                    state.record(&root, rel, seen)?;
                }
                Err(e) => {
                    // The server is down or the network failed: try again
                    // in a while, the file still unseen.
                    eprintln!(
                        "{}: upload failed, retrying in 10 s: {}",
                        v(&rel),
                        v(&format!("{e:#}"))
                    );
                    retry_at.insert(rel, now + Duration::from_secs(10));
                }
            }
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
        let a = upload_query(root, "c/1712-TP-0.trace.json.gz", &args, b"k");
        let b = upload_query(root, "c/1712-TP-1.trace.json.gz", &args, b"k");
        let solo = upload_query(root, "c/host_12.1712.pt.trace.json.gz", &args, b"k");
        let other = upload_query(root, "c/1712-TP-0.trace.json.gz", &args, b"l");
        let get =
            |q: &[(&str, String)], k: &str| q.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        assert_eq!(get(&a, "group"), get(&b, "group"));
        assert_ne!(
            get(&a, "group"),
            get(&other, "group"),
            "another watcher's key"
        );
        assert!(get(&a, "group").is_some());
        assert_eq!(get(&a, "rank").as_deref(), Some("0"));
        assert_eq!(get(&b, "rank").as_deref(), Some("1"));
        assert_eq!(get(&a, "name").as_deref(), Some("1712-TP"));
        assert_eq!(get(&solo, "group"), None);
        assert_eq!(get(&solo, "name").as_deref(), Some("host_12.1712"));
    }
}
