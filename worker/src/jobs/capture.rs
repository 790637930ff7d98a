//! Capture jobs: ask a running inference engine to profile, collect every
//! rank's trace, and turn them into one multi-rank run.
//!
//! Engines are configured by the operator; a capture names one, never a URL.
//! The worker gives each capture a fresh folder under the engine's
//! `trace_dir` (which the engine and the worker both see), and a rank's file
//! counts only once it decompresses to the end and parses as a trace: the
//! engines write their files non-atomically, and SGLang signals nothing else
//! when a `num_steps` profile is over.
//!
//! - SGLang: `POST /start_profile {output_dir, num_steps, activities,
//!   record_shapes, with_stack, profile_by_stage}` returns at once; the files
//!   `{profile_id}-TP-{rank}[-DP-..][-PP-..][-EP-..].trace.json.gz` appear
//!   after `num_steps` steps. An idle engine runs no steps, so no file ever
//!   appears: after the idle timeout the capture fails and asks the engine to
//!   stop profiling.
//! - vLLM: `POST /start_profile` and `POST /stop_profile` take no body and
//!   write `*.pt.trace.json.gz` into the folder the engine was started with
//!   (`trace_dir` here), plus `profiler_out_{rank}.txt` after each rank's
//!   trace. The worker profiles for `num_steps` x the engine's
//!   `seconds_per_step` (default 0.1 s), then stops and collects the files
//!   that are new since the start.

use super::{JobError, Runner};
use crate::blobs::StoreError;
use crate::db::{Job, NewTrace};
use crate::engines::Engine;
use kinetoscope_trace::import::{read_trace_file, ReadOptions};
use kinetoscope_trace::ranks::{rank_key, RankKey};
use kinetoscope_types::{CaptureRequest, EngineFlavour};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often the capture folder is checked.
const POLL: Duration = Duration::from_millis(250);

fn bad(msg: impl Into<String>) -> JobError {
    JobError::BadInput(msg.into())
}

/// Whether a file name is a trace an engine writes.
fn is_trace_file(name: &str) -> bool {
    name.ends_with(".trace.json.gz")
        || name.ends_with(".trace.json")
        || name.ends_with(".pt.trace.json.gz")
}

/// Tracks the files of a capture folder until they are complete.
struct Collector {
    dir: PathBuf,
    /// Files present before the capture (vLLM writes into a shared folder).
    ignore: HashSet<String>,
    /// Size at the last look, for files not yet complete.
    sizes: HashMap<String, u64>,
    /// Complete files.
    done: BTreeMap<RankKey, PathBuf>,
    /// Files skipped and said so (once each, not every look).
    skipped: HashSet<String>,
}

impl Collector {
    fn new(dir: &Path, ignore: HashSet<String>) -> Collector {
        Collector {
            dir: dir.to_path_buf(),
            ignore,
            sizes: HashMap::new(),
            done: BTreeMap::new(),
            skipped: HashSet::new(),
        }
    }

    /// Looks at the folder; a file whose size did not change since the last
    /// look is read to the end, and counts once it parses as a trace.
    /// Returns how many files exist (complete or not).
    async fn poll(&mut self) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut seen = 0;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if !is_trace_file(&name) || self.ignore.contains(&name) {
                continue;
            }
            // Plain files only: a symlink (or anything else) in the folder
            // could point outside it, at a file the worker may read but the
            // engine's user should not reach through a capture.
            // A hard link is a plain file that may be one outside the folder
            // all the same.
            if !e.file_type().is_ok_and(|t| t.is_file()) || !single_link(&e.path()) {
                if self.skipped.insert(name.clone()) {
                    tracing::warn!(
                        file = %name,
                        "a capture skips what is not a plain file with one link"
                    );
                }
                continue;
            }
            seen += 1;
            let key = rank_key(&name);
            if self.done.contains_key(&key) {
                continue;
            }
            let size = e.metadata().map(|m| m.len()).unwrap_or(0);
            let stable = self.sizes.insert(name.clone(), size) == Some(size) && size > 0;
            if !stable {
                continue;
            }
            let path = e.path();
            let p = path.clone();
            let complete = tokio::task::spawn_blocking(move || {
                read_trace_file(&p, &ReadOptions::default()).is_ok()
            })
            .await
            .unwrap_or(false);
            if complete {
                self.done.insert(key, path);
            }
        }
        seen
    }
}

/// The capture request and engine of a job.
async fn load(runner: &Runner, job: &Job) -> Result<(CaptureRequest, Engine), JobError> {
    let run = runner
        .db
        .run(&job.run_id)
        .await
        .map_err(|e| JobError::Transient(e.to_string()))?
        .ok_or_else(|| bad("the run no longer exists"))?;
    let req: CaptureRequest = serde_json::from_str(run.capture.as_deref().unwrap_or("{}"))
        .map_err(|e| bad(format!("the capture request does not parse: {e}")))?;
    let engine = runner
        .config
        .engines
        .iter()
        .find(|e| e.name == req.engine)
        .cloned()
        .ok_or_else(|| {
            bad(format!(
                "no engine named {:?} is configured on this worker",
                req.engine
            ))
        })?;
    Ok((req, engine))
}

async fn stage(runner: &Runner, job: &Job, words: &str) {
    let _ = runner
        .db
        .set_stage(&job.run_id, kinetoscope_types::RunStatus::Capturing, words)
        .await;
    let _ = runner
        .db
        .heartbeat(job, runner.config.lease.as_millis() as i64, None)
        .await;
}

async fn post(
    http: &reqwest::Client,
    url: &str,
    body: Option<serde_json::Value>,
) -> Result<(), JobError> {
    let mut req = http.post(url).timeout(Duration::from_secs(600));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req
        .send()
        .await
        .map_err(|e| bad(format!("the engine did not answer {url}: {e}")))?;
    let status = resp.status();
    if !status.is_success() {
        let text = resp.text().await.unwrap_or_default();
        let text: String = text.chars().take(300).collect();
        return Err(bad(format!(
            "the engine refused {url}: {status} {}",
            text.trim()
        )));
    }
    Ok(())
}

/// Runs a capture job.
pub(super) async fn run(runner: &Runner, job: &Job) -> Result<(), JobError> {
    let (req, engine) = load(runner, job).await?;
    let http = crate::engines::client();
    let base = engine.url.trim_end_matches('/').to_string();
    let expected = engine.ranks.max(1) as usize;
    stage(runner, job, "starting").await;

    let (dir, mut collector) = match engine.flavour {
        EngineFlavour::Sglang => {
            let dir = Path::new(&engine.trace_dir).join(format!("kinetoscope-{}", job.run_id));
            std::fs::create_dir_all(&dir).map_err(|e| {
                bad(format!(
                    "cannot create the capture folder {}: {e}",
                    dir.display()
                ))
            })?;
            let body = serde_json::json!({
                "output_dir": dir.display().to_string(),
                "num_steps": req.num_steps,
                "activities": req.activities.clone().unwrap_or_else(|| vec!["CPU".into(), "GPU".into()]),
                "record_shapes": req.record_shapes.unwrap_or(true),
                "with_stack": req.with_stack.unwrap_or(true),
                "profile_by_stage": false,
            });
            if let Err(e) = post(&http, &format!("{base}/start_profile"), Some(body)).await {
                // The engine refused: no folder is left behind.
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
            let c = Collector::new(&dir, HashSet::new());
            (dir, c)
        }
        EngineFlavour::Vllm => {
            let dir = PathBuf::from(&engine.trace_dir);
            let before: HashSet<String> = std::fs::read_dir(&dir)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().to_string())
                        .collect()
                })
                .unwrap_or_default();
            post(&http, &format!("{base}/start_profile"), None).await?;
            stage(runner, job, "profiling").await;
            let window = Duration::from_secs_f64(
                req.num_steps as f64 * engine.seconds_per_step.unwrap_or(0.1),
            );
            tokio::time::sleep(window).await;
            stage(runner, job, "stopping").await;
            // Returns once every rank has written its trace.
            post(&http, &format!("{base}/stop_profile"), None).await?;
            let c = Collector::new(&dir, before);
            (dir, c)
        }
    };

    // Collect until every rank's file is complete.
    stage(runner, job, "profiling").await;
    let started = Instant::now();
    let mut first_file: Option<Instant> = None;
    let mut last_words = String::new();
    loop {
        let seen = collector.poll().await;
        if seen > 0 && first_file.is_none() {
            first_file = Some(Instant::now());
        }
        let done = collector.done.len();
        if done >= expected {
            break;
        }
        if seen > 0 {
            let words = format!("collecting {done}/{expected} ranks");
            if words != last_words {
                stage(runner, job, &words).await;
                last_words = words;
            } else {
                let _ = runner
                    .db
                    .heartbeat(job, runner.config.lease.as_millis() as i64, None)
                    .await;
            }
        } else {
            let _ = runner
                .db
                .heartbeat(job, runner.config.lease.as_millis() as i64, None)
                .await;
        }
        let idle = runner.config.capture_idle;
        if first_file.is_none() && started.elapsed() >= idle {
            if engine.flavour == EngineFlavour::Sglang {
                // Leave the engine ready for the next capture.
                let _ = post(&http, &format!("{base}/stop_profile"), None).await;
                let _ = std::fs::remove_dir_all(&dir);
            }
            return Err(bad(format!(
                "engine idle: no steps ran in {} s",
                idle.as_secs()
            )));
        }
        if started.elapsed() >= runner.config.capture_timeout {
            return Err(bad(format!(
                "{done} of {expected} ranks written in {} s",
                runner.config.capture_timeout.as_secs()
            )));
        }
        tokio::time::sleep(POLL).await;
    }

    // Store every rank's file as a trace of the run.
    stage(runner, job, &format!("storing {expected} ranks")).await;
    let mut traces = Vec::new();
    for (rank, (_, path)) in collector.done.iter().enumerate() {
        traces.push(store(runner, &job.run_id, rank as i64, path).await?);
    }
    if !runner
        .db
        .attach_captured(job, &traces)
        .await
        .map_err(|e| JobError::Transient(e.to_string()))?
    {
        for t in &traces {
            let _ = runner.blobs.delete(&t.blob_key).await;
        }
        return Ok(());
    }
    runner.wake.notify_waiters();
    if engine.flavour == EngineFlavour::Sglang {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

/// Whether a path is a file with one hard link (not followed: a link is
/// not one). A file with several may be a file outside the trace folder,
/// linked in by whoever can write there.
fn single_link(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.nlink() == 1)
}

/// Copies one rank's file into the blob store (the same path uploads take).
async fn store(
    runner: &Runner,
    run_id: &str,
    rank: i64,
    path: &Path,
) -> Result<NewTrace, JobError> {
    // Checked again where it is read: the file may have been replaced by a
    // link since the folder was looked at.
    let plain = tokio::fs::symlink_metadata(path)
        .await
        .is_ok_and(|m| m.file_type().is_file());
    if !plain || !single_link(path) {
        return Err(bad(format!(
            "{} is not a plain file with one link in the engine's trace folder",
            path.display()
        )));
    }
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| JobError::Transient(format!("reading {}: {e}", path.display())))?;
    let stream = tokio_util::io::ReaderStream::with_capacity(file, 1 << 20);
    let t = runner
        .blobs
        .store_trace(run_id, rank, stream, u64::MAX)
        .await
        .map_err(|e| match e {
            StoreError::NotATrace(why) => bad(format!("{}: {why}", path.display())),
            StoreError::TooLarge => bad(format!("{}: too large", path.display())),
            StoreError::Read(e) => JobError::Transient(format!("reading {}: {e}", path.display())),
            StoreError::Write(e) | StoreError::Full(e) => {
                JobError::Transient(format!("storing {}: {e}", path.display()))
            }
        })?;
    Ok(NewTrace {
        rank,
        file_name: path
            .file_name()
            .map(|f| f.to_string_lossy().to_string())
            .unwrap_or_default(),
        blob_key: t.key,
        bytes: t.bytes as i64,
        sha256: t.sha256,
        encoding: t.encoding,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_files() {
        assert!(is_trace_file("x-TP-0.trace.json.gz"));
        assert!(!is_trace_file("profiler_out_0.txt"));
    }

    /// A link in the engine's folder, to a trace outside it, is never read,
    /// nor a hard link to one: a capture takes plain files with one link
    /// only, and says so once per file.
    #[cfg(unix)]
    #[tokio::test]
    async fn links_out_of_the_trace_folder_are_not_collected() {
        let base = std::env::temp_dir().join(format!("kinetoscope-links-{}", std::process::id()));
        let (dir, outside) = (base.join("traces"), base.join("secret"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let trace = br#"{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1}]}"#;
        std::fs::write(outside.join("x-TP-0.trace.json"), trace).unwrap();
        std::os::unix::fs::symlink(
            outside.join("x-TP-0.trace.json"),
            dir.join("x-TP-0.trace.json"),
        )
        .unwrap();
        std::fs::write(dir.join("x-TP-1.trace.json"), trace).unwrap();
        std::fs::write(outside.join("x-TP-2.trace.json"), trace).unwrap();
        std::fs::hard_link(
            outside.join("x-TP-2.trace.json"),
            dir.join("x-TP-2.trace.json"),
        )
        .unwrap();
        let mut c = Collector::new(&dir, HashSet::new());
        // Twice: a file counts once its size held still between looks.
        c.poll().await;
        let seen = c.poll().await;
        assert_eq!(seen, 1, "only the plain file is seen");
        assert_eq!(c.done.len(), 1);
        assert!(c.done.values().all(|p| p.ends_with("x-TP-1.trace.json")));
        assert_eq!(c.skipped.len(), 2, "each skipped file said once");
        assert!(!single_link(&dir.join("x-TP-2.trace.json")));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
