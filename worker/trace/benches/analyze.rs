//! The analysis benchmark (`make bench` / `cargo bench -p kinetoscope-trace`).
//!
//! Generates the founding story's trace once (30 steps x 78 layers, ~480 MB
//! of JSON, ~1.4 M events), compresses it with zstd (and gzip, as torch
//! writes it), then measures in separate processes, so each peak RSS is its
//! own:
//!
//! - the floor: zstd decompression, plus a serde `IgnoredAny` scan of the
//!   same bytes (the least any JSON reader must do);
//! - `analyze` end to end on the .json.zst (read, decompress, parse,
//!   correlate, aggregate, serialize the summary);
//! - the same on the .json.gz.
//!
//! Prints wall time, MB/s of JSON, peak RSS and the ratio to the floor.

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

/// Writes the traces if they are not there yet; returns (zst, gz, JSON bytes).
fn ensure_traces() -> (PathBuf, PathBuf, u64) {
    let dir = bench_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let zst = dir.join("decode-v2-30x78.json.zst");
    let gz = dir.join("decode-v2-30x78.json.gz");
    let size_file = dir.join("decode-v2-30x78.json.size");
    if !zst.exists() || !gz.exists() || !size_file.exists() {
        eprintln!(
            "generating the 30 x 78 decode trace (once) in {}",
            dir.display()
        );
        let t = Instant::now();
        let p = kinetoscope_trace::generate::DecodeParams::default();
        let mut enc =
            zstd::stream::write::Encoder::new(std::fs::File::create(&zst).unwrap(), 3).unwrap();
        let truth = kinetoscope_trace::generate::write_decode_trace(&p, &mut enc).unwrap();
        enc.finish().unwrap().flush().unwrap();
        let mut gzenc = kinetoscope_trace::import::input::GzEncoder::new(
            std::io::BufWriter::new(std::fs::File::create(&gz).unwrap()),
            kinetoscope_trace::import::input::GzLevel::new(6),
        );
        kinetoscope_trace::generate::write_decode_trace(&p, &mut gzenc).unwrap();
        gzenc.finish().unwrap().flush().unwrap();
        std::fs::write(&size_file, truth.json_bytes.to_string()).unwrap();
        eprintln!(
            "  {} events, {:.1} MB of JSON, generated in {:.1} s",
            truth.events,
            truth.json_bytes as f64 / 1e6,
            t.elapsed().as_secs_f64()
        );
    }
    let json_bytes = std::fs::read_to_string(&size_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (zst, gz, json_bytes)
}

/// One phase, in this (child) process: prints `wall_s rss_kb`.
fn run_phase(phase: &str, file: &Path) {
    let t = Instant::now();
    match phase {
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
            assert!(json.len() > 1000 && s.trace.events > 1_000_000);
        }
        other => panic!("unknown phase {other}"),
    }
    println!("{} {}", t.elapsed().as_secs_f64(), peak_rss_kb());
}

/// Runs a phase in a child process `RUNS` times; returns (best wall s, max peak RSS KB).
fn measure(phase: &str, file: &Path) -> (f64, u64) {
    let exe = std::env::current_exe().unwrap();
    let mut best = f64::MAX;
    let mut rss = 0;
    for _ in 0..RUNS {
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
        best = best.min(wall);
        rss = rss.max(kb);
    }
    (best, rss)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(k) = args.iter().position(|a| a == "--phase") {
        run_phase(&args[k + 1], Path::new(&args[k + 2]));
        return;
    }
    let (zst, gz, json_bytes) = ensure_traces();
    let mb = json_bytes as f64 / 1e6;
    let size = |p: &Path| std::fs::metadata(p).unwrap().len() as f64 / 1e6;
    println!(
        "trace: {mb:.1} MB of JSON (zstd -3: {:.1} MB, gzip -6: {:.1} MB); best of {RUNS} runs; {} cores",
        size(&zst),
        size(&gz),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let (floor, floor_rss) = measure("floor", &zst);
    let rows = [
        (
            "floor: zstd decompress + serde IgnoredAny",
            floor,
            floor_rss,
        ),
        {
            let (w, r) = measure("analyze", &zst);
            ("analyze .json.zst (end to end)", w, r)
        },
        {
            let (w, r) = measure("analyze", &gz);
            ("analyze .json.gz (end to end)", w, r)
        },
    ];
    println!(
        "{:<44} {:>8} {:>10} {:>12} {:>9}",
        "what", "wall s", "MB/s JSON", "peak RSS MB", "x floor"
    );
    for (what, wall, rss) in rows {
        println!(
            "{:<44} {:>8.3} {:>10.0} {:>12.1} {:>9.2}",
            what,
            wall,
            mb / wall,
            rss as f64 / 1024.0,
            wall / floor
        );
    }
}
