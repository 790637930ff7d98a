//! The analysis benchmark (`make bench` / `cargo bench -p kinetoscope-trace`).
//!
//! Generates the founding story's trace once (30 steps x 78 layers, ~490 MB
//! of JSON, ~1.4 M events), compresses it with zstd (and gzip, as torch
//! writes it), then measures in separate processes, so each peak RSS is its
//! own:
//!
//! - `zstd -d` of the same file (the baseline every ratio is measured to);
//! - the floor: zstd decompression, plus a serde `IgnoredAny` scan of the
//!   same bytes (the least any JSON reader must do);
//! - `analyze` end to end on the .json.zst: the summary only, then every
//!   artifact the job stores (summary JSON and timeline index);
//! - the same on the .json.gz.
//!
//! `-- --file FILE.json.zst...`: the same on given traces (real captures;
//! the .json.zst only).
//!
//! Twice: on the realistic decode trace (no Python frames, about 600 events
//! per layer per step) and on its `--with-stack` variant. The zstd command
//! and the analyses run in interleaved rounds (`ROUNDS`, default 7): each
//! analysis is divided by the command's time in its own round, and the
//! median of those ratios is the number (the machine is shared: its speed
//! drifts within minutes, so best-of times taken minutes apart compare
//! two different machines). Prints best and median wall time, MB/s of
//! JSON, peak RSS and the ratios.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const RUNS: usize = 3;

fn bench_dir() -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("bench")
}

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Writes a trace (zstd, and gzip unless `zstd_only`) if it is not there
/// yet; returns (zst, gz, JSON bytes, events).
fn ensure_trace(
    name: &str,
    p: &kinetoscope_generate::DecodeParams,
    zstd_only: bool,
) -> (PathBuf, PathBuf, u64, u64) {
    let dir = bench_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let zst = dir.join(format!("{name}.json.zst"));
    let gz = dir.join(format!("{name}.json.gz"));
    let size_file = dir.join(format!("{name}.json.size"));
    if !zst.exists() || !(zstd_only || gz.exists()) || !size_file.exists() {
        eprintln!("generating {name} (once) in {}", dir.display());
        let t = Instant::now();
        let mut enc =
            zstd::stream::write::Encoder::new(std::fs::File::create(&zst).unwrap(), 3).unwrap();
        let truth = kinetoscope_generate::write_decode_trace(p, &mut enc).unwrap();
        enc.finish().unwrap().flush().unwrap();
        if !zstd_only {
            let mut gzenc = kinetoscope_trace::import::input::GzEncoder::new(
                std::io::BufWriter::new(std::fs::File::create(&gz).unwrap()),
                kinetoscope_trace::import::input::GzLevel::new(6),
            );
            kinetoscope_generate::write_decode_trace(p, &mut gzenc).unwrap();
            gzenc.finish().unwrap().flush().unwrap();
        }
        std::fs::write(&size_file, format!("{} {}", truth.json_bytes, truth.events)).unwrap();
        eprintln!(
            "  {} events, {:.1} MB of JSON, generated in {:.1} s",
            truth.events,
            truth.json_bytes as f64 / 1e6,
            t.elapsed().as_secs_f64()
        );
    }
    let text = std::fs::read_to_string(&size_file).unwrap();
    let mut it = text.split_whitespace().map(|v| v.parse::<u64>().unwrap());
    (zst, gz, it.next().unwrap(), it.next().unwrap_or(0))
}

/// One phase, in this (child) process: prints `wall_s rss_kb [extra]`.
fn run_phase(phase: &str, file: &Path) {
    let mut t = Instant::now();
    let mut extra = String::new();
    match phase {
        "zstd" => {
            // `zstd -d -c FILE > /dev/null`, in process.
            let mut d =
                zstd::stream::read::Decoder::new(std::fs::File::open(file).unwrap()).unwrap();
            std::io::copy(&mut d, &mut std::io::sink()).unwrap();
        }
        "floor" => {
            // zstd decompression to memory, then a serde scan that keeps nothing.
            let mut bytes = Vec::new();
            zstd::stream::read::Decoder::new(std::fs::File::open(file).unwrap())
                .unwrap()
                .read_to_end(&mut bytes)
                .unwrap();
            let _: serde::de::IgnoredAny = serde_json::from_slice(&bytes).unwrap();
        }
        "analyze" => {
            let s = kinetoscope_trace::analyze_file(file, &Default::default(), &Default::default())
                .unwrap();
            let json = serde_json::to_string(&s).unwrap();
            assert!(json.len() > 1000 && s.trace.events > 100_000);
        }
        "analyze-any" => {
            // Any trace, however small (a category's events alone).
            let s = kinetoscope_trace::analyze_file(file, &Default::default(), &Default::default())
                .unwrap();
            serde_json::to_string(&s).unwrap();
        }
        "analyze-all" => {
            // Everything the analysis job stores: the summary JSON and the
            // timeline index, serialized.
            let t = kinetoscope_trace::read_trace_file(file, &Default::default()).unwrap();
            let a = kinetoscope_trace::analyze_stored(t, &Default::default()).unwrap();
            let json = serde_json::to_string(&a.summary).unwrap();
            let index = a
                .artifact(kinetoscope_types::ArtifactName::Timeline)
                .unwrap();
            assert!(json.len() > 1000 && !index.is_empty());
            extra = format!("{} {}", a.summary.trace.events, index.len());
        }
        "read-index" => {
            // What the server does on a run's first timeline request: read
            // the stored index. Only the read is timed.
            let tr = kinetoscope_trace::read_trace_file(file, &Default::default()).unwrap();
            let stored = kinetoscope_trace::analyze_stored(tr, &Default::default()).unwrap();
            let index = stored
                .artifact(kinetoscope_types::ArtifactName::Timeline)
                .unwrap();
            t = Instant::now();
            let back = kinetoscope_trace::timeline::TimelineIndex::read(index).unwrap();
            assert!(back.events() > 0);
        }
        other => panic!("unknown phase {other}"),
    }
    println!("{} {} {extra}", t.elapsed().as_secs_f64(), peak_rss_kb());
}

/// One wall time of `zstd -d -c FILE > /dev/null` (the command), if installed.
fn zstd_cli_once(file: &Path) -> Option<f64> {
    let t = Instant::now();
    let ok = Command::new("zstd")
        .args(["-d", "-q", "-c"])
        .arg(file)
        .stdout(std::process::Stdio::null())
        .status()
        .ok()?
        .success();
    ok.then(|| t.elapsed().as_secs_f64())
}

/// Best wall time of the zstd command over `RUNS` runs, if installed.
fn zstd_cli(file: &Path) -> Option<f64> {
    (0..RUNS)
        .map(|_| zstd_cli_once(file))
        .try_fold(f64::MAX, |best, t| t.map(|t| best.min(t)))
}

/// Runs a phase once in a child process; returns (wall s, peak RSS KB, the
/// extra numbers it printed).
fn measure_once(phase: &str, file: &Path) -> (f64, u64, Vec<f64>) {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(&exe)
        .args(["--phase", phase])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{phase}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    let mut it = line.split_whitespace();
    let wall: f64 = it.next().unwrap().parse().unwrap();
    let kb: u64 = it.next().unwrap().parse().unwrap();
    (wall, kb, it.map(|v| v.parse().unwrap()).collect())
}

/// Runs a phase in a child process `RUNS` times; returns (best wall s, max
/// peak RSS KB, the last run's extra numbers).
fn measure(phase: &str, file: &Path) -> (f64, u64, Vec<f64>) {
    let mut best = f64::MAX;
    let mut rss = 0;
    let mut extra = Vec::new();
    for _ in 0..RUNS {
        let (wall, kb, e) = measure_once(phase, file);
        best = best.min(wall);
        rss = rss.max(kb);
        extra = e;
    }
    (best, rss, extra)
}

/// Rounds of the interleaved comparison (`ROUNDS` overrides).
fn rounds() -> usize {
    std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One measured thing of the interleaved rounds: its wall times, its
/// ratio to the zstd command of the same round, its peak RSS.
#[derive(Default)]
struct Interleaved {
    walls: Vec<f64>,
    ratios: Vec<f64>,
    rss_kb: u64,
    extra: Vec<f64>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(k) = args.iter().position(|a| a == "--phase") {
        run_phase(&args[k + 1], Path::new(&args[k + 2]));
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if args.iter().any(|a| a == "--scale") {
        scale(cores);
        return;
    }
    if let Some(k) = args.iter().position(|a| a == "--file") {
        // (cargo bench adds `--bench` to the arguments.)
        let paths: Vec<String> = args[k + 1..]
            .iter()
            .filter(|a| !a.starts_with("--"))
            .cloned()
            .collect();
        files(&paths, cores);
        return;
    }
    if args.iter().any(|a| a == "--categories") {
        categories();
        return;
    }
    let realistic = kinetoscope_generate::DecodeParams::default();
    let with_stack = kinetoscope_generate::DecodeParams {
        with_stack: true,
        ..Default::default()
    };
    for (name, p) in [
        ("decode-v2-30x78", realistic),
        ("decode-v2-30x78-stack", with_stack),
    ] {
        let (zst, gz, json_bytes, events) = ensure_trace(name, &p, false);
        interleaved(name, &zst, Some(&gz), json_bytes, events, cores);
    }
}

/// `--file FILE.json.zst...`: the same comparison on traces users profile
/// (real captures, `python/captures/concat.py`'s story-sized ones), the
/// .json.zst only.
fn files(paths: &[String], cores: usize) {
    for path in paths {
        let zst = PathBuf::from(path);
        let mut d = zstd::stream::read::Decoder::new(std::fs::File::open(&zst).unwrap()).unwrap();
        let json_bytes = std::io::copy(&mut d, &mut std::io::sink()).unwrap();
        let (_, _, extra) = measure_once("analyze-all", &zst);
        let name = zst.file_name().unwrap().to_string_lossy().to_string();
        interleaved(&name, &zst, None, json_bytes, extra[0] as u64, cores);
    }
}

/// The zstd command and the analyses of one trace in interleaved rounds,
/// printed as a table.
fn interleaved(
    name: &str,
    zst: &Path,
    gz: Option<&Path>,
    json_bytes: u64,
    events: u64,
    cores: usize,
) {
    let mb = json_bytes as f64 / 1e6;
    let size = |p: &Path| std::fs::metadata(p).unwrap().len() as f64 / 1e6;
    println!(
        "\n{name}: {events} events, {mb:.1} MB of JSON (zstd: {:.1} MB{}); {} interleaved rounds (in process and floor: best of {RUNS}); {cores} cores",
        size(zst),
        gz.map(|g| format!(", gzip -6: {:.1} MB", size(g)))
            .unwrap_or_default(),
        rounds(),
    );
    let (zstd_s, zstd_rss, _) = measure("zstd", zst);
    let (floor, floor_rss, _) = measure("floor", zst);
    // The baseline, the zstd command itself (slower than the
    // library in process: it checks the frame's checksum and writes),
    // runs in every round just before the analyses, so that each ratio
    // is of two runs seconds apart: this machine's speed drifts by tens
    // of percent within minutes.
    let mut runs: Vec<(&str, &str, &Path)> = vec![
        ("analyze .json.zst: the summary only", "analyze", zst),
        (
            "analyze .json.zst: every artifact the job stores",
            "analyze-all",
            zst,
        ),
    ];
    if let Some(gz) = gz {
        runs.push((
            "analyze .json.gz: every artifact the job stores",
            "analyze-all",
            gz,
        ));
    }
    let mut cli = Vec::new();
    let mut got: Vec<Interleaved> = runs.iter().map(|_| Interleaved::default()).collect();
    for _ in 0..rounds() {
        // Without the zstd command, ratios are to the library.
        let base = match zstd_cli_once(zst) {
            Some(z) => {
                cli.push(z);
                z
            }
            None => zstd_s,
        };
        for ((_, phase, file), g) in runs.iter().zip(got.iter_mut()) {
            let (wall, kb, extra) = measure_once(phase, file);
            g.walls.push(wall);
            g.ratios.push(wall / base);
            g.rss_kb = g.rss_kb.max(kb);
            g.extra = extra;
        }
    }
    let cli_best = cli.iter().copied().fold(f64::NAN, f64::min);
    println!(
        "{:<52} {:>8} {:>8} {:>10} {:>12} {:>12} {:>12}",
        "what", "best s", "median s", "MB/s JSON", "peak RSS MB", "x zstd cmd", "x in process"
    );
    let fixed = [
        ("zstd -d -c FILE > /dev/null (in process)", zstd_s, zstd_rss),
        (
            "floor: zstd decompress + serde IgnoredAny",
            floor,
            floor_rss,
        ),
    ];
    println!(
        "{:<52} {:>8.3} {:>8.3} {:>10.0} {:>12} {:>12.2} {:>12.2}",
        "zstd -d -c FILE > /dev/null (the command)",
        cli_best,
        median(cli.clone()),
        mb / cli_best,
        "",
        1.0,
        cli_best / zstd_s
    );
    for (what, wall, rss) in fixed {
        println!(
            "{:<52} {:>8.3} {:>8} {:>10.0} {:>12.1} {:>12.2} {:>12.2}",
            what,
            wall,
            "",
            mb / wall,
            rss as f64 / 1024.0,
            wall / cli_best,
            wall / zstd_s
        );
    }
    for ((what, _, _), g) in runs.iter().zip(&got) {
        let best = g.walls.iter().copied().fold(f64::NAN, f64::min);
        println!(
            "{:<52} {:>8.3} {:>8.3} {:>10.0} {:>12.1} {:>12.2} {:>12.2}",
            what,
            best,
            median(g.walls.clone()),
            mb / best,
            g.rss_kb as f64 / 1024.0,
            median(g.ratios.clone()),
            best / zstd_s
        );
    }
    let all = &got[1];
    println!(
        "every artifact, x the zstd command of the same round ({} rounds): median {:.2}, best {:.2}, worst {:.2}",
        all.ratios.len(),
        median(all.ratios.clone()),
        all.ratios.iter().copied().fold(f64::NAN, f64::min),
        all.ratios.iter().copied().fold(f64::NAN, f64::max),
    );
    if let [ix_events, stored] = all.extra[..] {
        let (read, _, _) = measure("read-index", zst);
        println!(
            "timeline index: {ix_events} events, {:.1} MB stored (zstd), read back in {:.0} ms; ingest with the index / without (medians): {:.2}x",
            stored / 1e6,
            read * 1e3,
            median(all.walls.clone()) / median(got[0].walls.clone())
        );
    }
    println!(
        "peak RSS per event (analyze-all): {:.1} bytes",
        all.rss_kb as f64 * 1024.0 / events.max(1) as f64
    );
}

/// `--scale` (`make bench-scale`): the same model at 30, 120 and 300 steps
/// (300: about 4.9 GB of JSON, 14 M events). Prints time and peak RSS of
/// `analyze` with every artifact at each size, the CLI's peak RSS (the
/// summary alone) beside it with the budget both keep (50 MB + 32 bytes per
/// event), the time ratio to 30 steps
/// against the ratio of events, and the growth of peak RSS per event (a
/// least-squares line through the three points: its slope in bytes per
/// event and its intercept, the fixed base). Steps are `SCALE_STEPS`
/// (comma-separated) when set.
fn scale(cores: usize) {
    let steps: Vec<u32> = std::env::var("SCALE_STEPS")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().parse().unwrap()).collect())
        .unwrap_or_else(|| vec![30, 120, 300]);
    println!("scale: the realistic decode trace (78 layers) at {steps:?} steps; {cores} cores");
    println!(
        "{:>6} {:>11} {:>10} {:>11} {:>9} {:>12} {:>9} {:>10} {:>12} {:>10}",
        "steps",
        "events",
        "JSON GB",
        "zstd cmd s",
        "analyze s",
        "peak RSS MB",
        "x zstd",
        "x first",
        "CLI RSS MB",
        "budget MB"
    );
    let mut points: Vec<(f64, f64)> = Vec::new();
    let mut first: Option<(f64, f64)> = None;
    for &n in &steps {
        let p = kinetoscope_generate::DecodeParams {
            steps: n,
            ..Default::default()
        };
        let (zst, _, json_bytes, events) = ensure_trace(&format!("decode-v2-{n}x78"), &p, true);
        let zstd_s = zstd_cli(&zst).unwrap_or_else(|| measure("zstd", &zst).0);
        let (all, rss, _) = measure("analyze-all", &zst);
        // The CLI's `kinetoscope analyze` (the summary alone, the job's
        // schedule): its peak beside the job's, against the job's budget.
        let (_, cli_rss, _) = measure("analyze", &zst);
        let (e0, t0) = *first.get_or_insert((events as f64, all));
        println!(
            "{n:>6} {events:>11} {:>10.2} {zstd_s:>11.3} {all:>9.3} {:>12.1} {:>9.2} {:>5.2} ({:.1}x events) {:>12.1} {:>10.1}",
            json_bytes as f64 / 1e9,
            rss as f64 / 1024.0,
            all / zstd_s,
            all / t0,
            events as f64 / e0,
            cli_rss as f64 / 1024.0,
            50.0 + 32.0 * events as f64 / (1u64 << 20) as f64,
        );
        points.push((events as f64, rss as f64 * 1024.0));
    }
    if points.len() >= 2 {
        let n = points.len() as f64;
        let (sx, sy) = points
            .iter()
            .fold((0.0, 0.0), |(a, b), p| (a + p.0, b + p.1));
        let (mx, my) = (sx / n, sy / n);
        let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let slope = sxy / sxx;
        println!(
            "peak RSS grows by {slope:.1} bytes per event over a base of {:.1} MB",
            (my - slope * mx) / 1e6
        );
    }
}

/// `--categories` (also run by `make bench`): events per second by
/// category. The realistic trace and its `--with-stack` variant at 10 steps
/// are cut into one trace per category (each event's bytes as generated,
/// the header kept), written to `target/bench/cat-*.json.zst` (callgrind can
/// count instructions per event on them, see BENCHMARKS.md), and each is
/// analyzed (the summary: parse and analysis) in its own process.
fn categories() {
    let dir = bench_dir();
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "\nevents per second by category (10 steps x 78 layers, each category's events alone; best of {RUNS})"
    );
    println!(
        "{:<12} {:<20} {:>9} {:>10} {:>12} {:>10} {:>12}",
        "trace", "category", "events", "MB JSON", "analyze s", "M events/s", "ns per event"
    );
    for (variant, with_stack) in [("realistic", false), ("with-stack", true)] {
        let p = kinetoscope_generate::DecodeParams {
            steps: 10,
            with_stack,
            ..Default::default()
        };
        let mut json = Vec::new();
        kinetoscope_generate::write_decode_trace(&p, &mut json).unwrap();
        // Categories of a handful of events measure process start-up only.
        for (cat, doc, events) in split_by_category(&json).into_iter().filter(|c| c.2 >= 1000) {
            let file = dir.join(format!("cat-{variant}-{cat}.json.zst"));
            std::fs::write(&file, zstd::encode_all(&doc[..], 3).unwrap()).unwrap();
            let (wall, _, _) = measure("analyze-any", &file);
            println!(
                "{variant:<12} {cat:<20} {events:>9} {:>10.1} {wall:>12.3} {:>10.2} {:>12.0}",
                doc.len() as f64 / 1e6,
                events as f64 / wall / 1e6,
                wall * 1e9 / events as f64
            );
        }
    }
}

/// Cuts a generated trace into one document per `cat`: the text before the
/// event array, that category's events (their bytes unchanged), and the
/// text after. Returns (category, document, events), most events first.
fn split_by_category(json: &[u8]) -> Vec<(String, Vec<u8>, usize)> {
    let text = std::str::from_utf8(json).unwrap();
    let open = text.find("\"traceEvents\": [").unwrap() + "\"traceEvents\": [".len();
    let close = text.rfind(']').unwrap();
    let (head, body, tail) = (&text[..open], &text[open..close], &text[close..]);
    let mut by_cat: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    // The generator writes one event per `{ ... }` block at two spaces of
    // indentation: split between blocks.
    let pieces: Vec<&str> = body.split("\n  },\n  {").collect();
    let n = pieces.len();
    for (k, ev) in pieces.into_iter().enumerate() {
        // The separator took each event's braces but the first's `{` and
        // the last's `}`.
        let mut ev = ev.trim();
        if k == 0 {
            ev = ev.strip_prefix('{').unwrap_or(ev);
        }
        if k + 1 == n {
            ev = ev.strip_suffix('}').unwrap_or(ev);
        }
        let cat = ev
            .split("\"cat\": \"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("(none)");
        by_cat.entry(cat.to_string()).or_default().push(ev);
    }
    let mut out: Vec<(String, Vec<u8>, usize)> = by_cat
        .into_iter()
        .map(|(cat, evs)| {
            let mut doc = String::from(head);
            for (k, ev) in evs.iter().enumerate() {
                if k > 0 {
                    doc.push(',');
                }
                doc.push_str("\n  {\n");
                doc.push_str(ev);
                doc.push_str("\n  }");
            }
            doc.push('\n');
            doc.push_str(tail);
            (cat, doc.into_bytes(), evs.len())
        })
        .collect();
    out.sort_by_key(|(_, _, n)| std::cmp::Reverse(*n));
    out
}
