//! The timeline index: every event accounted for at every resolution, on
//! every shared trace and on generated ones; it survives storage unchanged;
//! details link kernels to their launches and ops.

use kinetoscope_generate::{write_decode_trace, DecodeParams, Truth};
use kinetoscope_trace::timeline::{SliceKind, TimelineIndex};
use kinetoscope_trace::{
    analyze_all, analyze_stored, read_trace, read_trace_file, AnalysisOptions, ReadOptions,
};
use kinetoscope_types::ArtifactName;
use std::path::PathBuf;

/// A generated trace, parsed, with what the generator wrote into it.
fn generated(p: &DecodeParams) -> (kinetoscope_trace::Trace, Truth) {
    let mut json = Vec::new();
    let truth = write_decode_trace(p, &mut json).unwrap();
    (
        read_trace(&json[..], &ReadOptions::default()).unwrap(),
        truth,
    )
}

fn shared_traces() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .collect();
    v.sort();
    assert!(v.len() >= 30, "{}", dir.display());
    v
}

/// Over the whole trace, at any px, the counts of a track add up to its events.
fn check_counts(what: &str, ix: &TimelineIndex) {
    for (k, t) in ix.tracks.iter().enumerate() {
        for px in [1, 7, 640, 1920, 16384] {
            let slices = ix.window(k as u32, ix.start_ns, ix.end_ns, px);
            let n: u64 = slices.iter().map(|s| s.count as u64).sum();
            assert_eq!(n, t.events, "{what}: track {k} ({}) at {px} px", t.label);
            // At most one slice per pixel bucket per row.
            let width = (ix.end_ns - ix.start_ns) as f64 / px as f64;
            let mut seen = std::collections::HashSet::new();
            for s in slices.iter().filter(|s| s.count > 1) {
                let b = ((s.start_ns.max(ix.start_ns) - ix.start_ns) as f64 / width) as i64;
                assert!(
                    seen.insert((s.row, b)),
                    "{what}: two merged slices in one bucket"
                );
                assert!(s.busy_ns <= s.dur_ns * s.count as i64);
            }
        }
    }
}

#[test]
fn every_event_is_accounted_for_on_every_shared_trace() {
    for path in shared_traces() {
        let what = path.file_name().unwrap().to_string_lossy().to_string();
        let t = read_trace_file(&path, &ReadOptions::default()).unwrap();
        let a = analyze_all(&t, &AnalysisOptions::default());
        let ix = &a.timeline;
        let gpu_ops = a.summary.trace.attribution.gpu_ops;
        let on_gpu: u64 = ix.tracks.iter().filter(|t| t.gpu).map(|t| t.events).sum();
        assert_eq!(on_gpu, gpu_ops, "{what}: every GPU op is on a GPU track");
        assert!(
            ix.tracks.iter().all(|t| t.hidden == 0),
            "{what}: a real trace fits its tracks' rows"
        );
        check_counts(&what, ix);
        // Stored and read back, it is the same index.
        let mut bytes = Vec::new();
        ix.write(&mut bytes).unwrap();
        let back = TimelineIndex::read(&bytes[..]).unwrap();
        assert!(back == *ix, "{what}: the stored index differs");
        if ix.events() > 1000 {
            let per = ix.column_bytes() as f64 / ix.events() as f64;
            assert!(per <= 24.0, "{what}: {per:.1} bytes per event");
        }
        same_when_owned(
            &what,
            &a,
            read_trace_file(&path, &ReadOptions::default()).unwrap(),
        );
    }
}

/// The job's path (the trace handed over, columns freed as phases end, the
/// index written as it is built) gives the same artifacts: the stored index
/// reads back as the one built in memory, and decompresses to the bytes
/// `write` writes of it.
fn same_when_owned(what: &str, a: &kinetoscope_trace::Analysis, t: kinetoscope_trace::Trace) {
    let owned = analyze_stored(t, &AnalysisOptions::default()).unwrap();
    let back = TimelineIndex::read(owned.artifact(ArtifactName::Timeline).unwrap()).unwrap();
    assert!(back == a.timeline, "{what}: the index differs");
    let mut written = Vec::new();
    a.timeline.write(&mut written).unwrap();
    assert!(
        zstd::decode_all(owned.artifact(ArtifactName::Timeline).unwrap()).unwrap()
            == zstd::decode_all(&written[..]).unwrap(),
        "{what}: the stored bytes differ"
    );
    assert_eq!(
        serde_json::to_string(&owned.summary).unwrap(),
        serde_json::to_string(&a.summary).unwrap(),
        "{what}: the summary differs"
    );
}

#[test]
fn the_jobs_path_gives_the_same_artifacts_on_generated_traces() {
    use kinetoscope_generate::Mode;
    for (with_stack, mode) in [
        (true, Mode::Eager),
        (true, Mode::Piecewise),
        (false, Mode::Graph),
    ] {
        let p = DecodeParams {
            steps: 2,
            layers: 6,
            with_stack,
            mode,
            ..Default::default()
        };
        let (t, _) = generated(&p);
        let a = analyze_all(&t, &AnalysisOptions::default());
        assert!(a.timeline.events() > 100);
        same_when_owned(&format!("{mode:?} stack={with_stack}"), &a, t);
    }
}

#[test]
fn a_kernel_links_to_its_launch_and_its_op() {
    let p = DecodeParams {
        steps: 2,
        layers: 8,
        ..Default::default()
    };
    let (t, truth) = generated(&p);
    let a = analyze_all(&t, &AnalysisOptions::default());
    let ix = &a.timeline;
    check_counts("generated", ix);
    assert_eq!(ix.steps.len(), 2);
    assert_eq!(
        ix.layers.len(),
        2 * 8,
        "layers band: every layer of every step"
    );
    // Search: the cast kernel's name matches every cast to BF16, and the
    // kernels table counts the same calls.
    let k = &a.summary.kernels[0];
    let found = ix.search(&k.name, 100);
    let (n, tracks, first) = (found.matches, found.tracks, found.first);
    assert_eq!(n, k.calls);
    assert_eq!(
        tracks
            .iter()
            .map(|t| t.density.iter().map(|&x| x as u64).sum::<u64>())
            .sum::<u64>(),
        n
    );
    let event = first.unwrap().event;
    let r = ix.locate(event).unwrap();
    let e = ix.event(r);
    let (kind, name, launch, args) = (e.kind, e.name, e.link, e.args);
    assert_eq!((kind, name), (SliceKind::Kernel, k.name.as_str()));
    assert!(args.is_some());
    // kernel -> launch -> op chain.
    let lr = ix.locate(launch).unwrap();
    let e = ix.event(lr);
    let (kind, name, op) = (e.kind, e.name, e.link);
    assert_eq!(kind, SliceKind::Runtime);
    assert_eq!(name, "cudaLaunchKernel");
    let e = ix.event(ix.locate(op).unwrap());
    let (kind, name) = (e.kind, e.name);
    assert_eq!((kind, name), (SliceKind::Op, "aten::copy_"));
    // launch -> kernels.
    assert_eq!(ix.linked_to(launch), vec![event]);
    assert!(ix.events() as f64 >= 0.5 * truth.events as f64);
}

/// With Python frames (`with_stack`), an event's details reach the model
/// code above its ops; graph replays reach the engine's replay frames.
#[test]
fn details_carry_the_python_stack() {
    for (mode, frame) in [
        (
            kinetoscope_generate::Mode::Eager,
            "nn.Module: DeepseekV2DecoderLayer_0",
        ),
        (
            kinetoscope_generate::Mode::Graph,
            "torch/cuda/graphs.py(86): replay",
        ),
    ] {
        let p = DecodeParams {
            steps: 1,
            layers: 8,
            with_stack: true,
            mode,
            ..Default::default()
        };
        let (t, _) = generated(&p);
        let a = analyze_all(&t, &AnalysisOptions::default());
        let ix = &a.timeline;
        let k = &a.summary.kernels[0];
        let first = ix.search(&k.name, 10).first;
        let stack = ix.python_of(first.unwrap().event);
        assert!(
            stack.iter().any(|f| f.ends_with(frame)),
            "{mode:?}: {stack:?}"
        );
    }
}

/// Regression (found by API fuzzing): a window as wide as the clock,
/// -2^62 to 2^62 ns, overflowed `end - start`. Every event is still counted
/// once, at any px, and windows at the ends of the clock answer too.
#[test]
fn a_window_as_wide_as_the_clock_counts_every_event() {
    let p = DecodeParams {
        steps: 1,
        layers: 4,
        ..Default::default()
    };
    let (t, _) = generated(&p);
    let ix = analyze_all(&t, &AnalysisOptions::default()).timeline;
    for (k, track) in ix.tracks.iter().enumerate() {
        for px in [1, 2, 16384] {
            for (start, end) in [(-(1i64 << 62), 1i64 << 62), (i64::MIN, i64::MAX)] {
                let n: u64 = ix
                    .window(k as u32, start, end, px)
                    .iter()
                    .map(|s| s.count as u64)
                    .sum();
                assert_eq!(n, track.events, "track {k} at {px} px, {start}..{end}");
            }
        }
        assert!(ix.window(k as u32, i64::MIN, i64::MIN + 1, 1).is_empty());
        assert!(ix
            .window(k as u32, i64::MAX - 1, i64::MAX, 16384)
            .is_empty());
    }
}

/// `n` identical kernels on one stream at one `ts`, as JSON.
fn overlapping_kernels(n: usize) -> Vec<u8> {
    let mut json = Vec::new();
    kinetoscope_generate::write_overlapping_kernels(n, &mut json).unwrap();
    json
}

/// The upload that stalled the worker (RELIABILITY.md): 400,000 kernels
/// overlapping at one moment on one stream laid out first-fit by a scan of
/// every row took 35 s (quadratic); laid out from heaps and capped at
/// `MAX_ROWS_PER_TRACK` rows, the rest are counted, not drawn, and every
/// window still accounts for every drawn one.
#[test]
fn overlapping_kernels_are_laid_out_in_bounded_rows() {
    use kinetoscope_trace::timeline::MAX_ROWS_PER_TRACK;
    let n = 400_000;
    let t = read_trace(&overlapping_kernels(n)[..], &ReadOptions::default()).unwrap();
    let a = analyze_all(&t, &AnalysisOptions::default());
    let ix = &a.timeline;
    let gpu: Vec<_> = ix.tracks.iter().filter(|t| t.gpu).collect();
    assert_eq!(gpu.len(), 1);
    assert_eq!(gpu[0].rows as usize, MAX_ROWS_PER_TRACK);
    assert_eq!(gpu[0].events as usize, MAX_ROWS_PER_TRACK);
    assert_eq!(gpu[0].hidden as usize, n - MAX_ROWS_PER_TRACK);
    check_counts("overlap", ix);
    let mut bytes = Vec::new();
    ix.write(&mut bytes).unwrap();
    assert!(TimelineIndex::read(&bytes[..]).unwrap() == *ix);
    // The job's path holds the same cap.
    same_when_owned(
        "overlap",
        &a,
        read_trace(&overlapping_kernels(n)[..], &ReadOptions::default()).unwrap(),
    );
}

/// The reverse-link index answers what a scan of every event's link does:
/// each event's children or GPU ops, in id order; and an event's details
/// list the GPU ops below an op (the walk that once scanned every row per
/// step).
#[test]
fn reverse_links_match_a_scan_of_every_link() {
    let p = DecodeParams {
        steps: 1,
        layers: 4,
        with_stack: true,
        ..Default::default()
    };
    let (t, _) = generated(&p);
    let a = analyze_all(&t, &AnalysisOptions::default());
    let ix = &a.timeline;
    let n = ix.events() as u32;
    let mut scan: Vec<Vec<u32>> = vec![Vec::new(); n as usize];
    for e in 0..n {
        let link = ix.event(ix.locate(e).unwrap()).link;
        if link < n {
            scan[link as usize].push(e);
        }
    }
    for e in 0..n {
        assert_eq!(ix.linked_to(e), scan[e as usize], "event {e}");
    }
    assert!(ix.linked_to(n).is_empty() && ix.linked_to(u32::MAX).is_empty());
    // The cast op's details reach its kernel through its launch.
    let op = (0..n)
        .find(|&e| {
            let c = ix.event(ix.locate(e).unwrap());
            c.kind == SliceKind::Op && c.name == "aten::copy_" && !ix.linked_to(e).is_empty()
        })
        .unwrap();
    let d = ix.details(op).unwrap();
    assert!(!d.kernels.is_empty(), "{d:?}");
    assert!(d.kernels.iter().all(|k| k.kind.is_gpu()));
    assert!(ix.details(n).is_none());
}
