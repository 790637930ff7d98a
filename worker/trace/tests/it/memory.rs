//! Memory from `[memory]` events: the shared capture made with
//! `profile_memory=True` against an independent reading of its JSON (the
//! peak and its time exactly, the curve at every change near the peak,
//! each op signature's allocations against a brute-force sum), the
//! generator's cast buffer (571 MB made and dropped in every layer) against
//! its truth, and bad inputs.

use kinetoscope_generate::{write_decode_trace, DecodeParams, Variant};
use kinetoscope_trace::import::{read_trace, ReadOptions};
use kinetoscope_trace::{analyze_all, AnalysisOptions};
use kinetoscope_types::{FindingKind, MemoryReport, Summary};
use serde_json::Value;
use std::collections::HashMap;

fn shared(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/traces")
        .join(name)
}

fn analyze_bytes(json: &[u8]) -> (Summary, MemoryReport) {
    let t = read_trace(json, &ReadOptions::default()).unwrap();
    let a = analyze_all(&t, &AnalysisOptions::default());
    (a.summary, a.memory)
}

/// Microseconds as written to the trace's ns (as the parser reads them:
/// the decimal text, not a float product).
fn ns(v: &Value) -> i64 {
    let text = v.to_string();
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let mut frac = frac.to_string();
    frac.truncate(3);
    while frac.len() < 3 {
        frac.push('0');
    }
    int.parse::<i64>().unwrap() * 1000 + frac.parse::<i64>().unwrap()
}

const ALLOCATORS: &[&str] = &[
    "aten::empty",
    "aten::empty_strided",
    "aten::empty_like",
    "aten::new_empty",
    "aten::new_empty_strided",
    "aten::resize_",
    "aten::zeros",
    "aten::zeros_like",
    "aten::ones",
    "aten::full",
];

#[test]
fn the_shared_capture_against_an_independent_reading() {
    let path = shared("torch-cpu-decode-stack-memory.json.gz");
    let bytes = std::fs::read(&path).unwrap();
    let mut json = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut json).unwrap();
    let doc: Value = serde_json::from_slice(&json).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    // The independent reading: the memory events in time order.
    let mut mem: Vec<(i64, i64, i64, i64, i64)> = events
        .iter()
        .filter(|e| e["name"] == "[memory]")
        .map(|e| {
            let a = &e["args"];
            (
                ns(&e["ts"]),
                a["Total Allocated"].as_i64().unwrap(),
                a["Bytes"].as_i64().unwrap(),
                e["tid"].as_i64().unwrap(),
                a["Addr"].as_i64().unwrap(),
            )
        })
        .collect();
    mem.sort_by_key(|m| m.0);
    let (peak_k, peak) =
        mem.iter().enumerate().fold(
            (0, i64::MIN),
            |(k0, p), (k, m)| if m.1 > p { (k, m.1) } else { (k0, p) },
        );
    let (summary, report) = analyze_bytes(&json);
    assert_eq!(report.devices.len(), 1);
    let d = &report.devices[0];
    assert_eq!(d.device, "cpu");
    assert_eq!(d.events, mem.len() as u64);
    assert_eq!(d.peak_bytes, peak);
    assert_eq!(d.peak_ns, mem[peak_k].0);
    // The curve at every change near the peak.
    for m in &mem[peak_k.saturating_sub(200)..(peak_k + 200).min(mem.len())] {
        assert!(
            d.series.iter().any(|p| p[0] == m.0 && p[1] == m.1),
            "the curve lacks {m:?}"
        );
    }
    assert!(d.series.len() <= mem.len());
    // The summary keeps its meaning, and agrees.
    assert_eq!(summary.trace.peak_memory.len(), 1);
    assert_eq!(summary.memory[0].peak_bytes, peak);
    // Each signature's bytes against a brute force: the innermost op (not
    // an allocator) around each allocation on its thread.
    let ops: Vec<(i64, i64, i64, String, String, String)> = events
        .iter()
        .filter(|e| e["ph"] == "X" && (e["cat"] == "cpu_op" || e["cat"] == "user_annotation"))
        .map(|e| {
            let start = ns(&e["ts"]);
            (
                e["tid"].as_i64().unwrap(),
                start,
                start + ns(&e["dur"]),
                e["name"].as_str().unwrap().to_string(),
                e["args"]
                    .get("Input Dims")
                    .map(|v| v.to_string())
                    .unwrap_or_default(),
                e["args"]
                    .get("Input type")
                    .map(|v| v.to_string())
                    .unwrap_or_default(),
            )
        })
        .collect();
    let mut want: HashMap<String, i64> = HashMap::new();
    for m in mem.iter().filter(|m| m.2 > 0) {
        let inner = ops
            .iter()
            .filter(|o| {
                o.0 == m.3 && o.1 <= m.0 && m.0 <= o.2 && !ALLOCATORS.contains(&o.3.as_str())
            })
            .min_by_key(|o| (o.2 - o.1, std::cmp::Reverse(o.1)));
        let name = inner.map_or("(outside any op)".to_string(), |o| o.3.clone());
        *want.entry(name).or_default() += m.2;
    }
    let steps = summary.steps.len().max(1) as f64;
    let mut got: HashMap<String, i64> = HashMap::new();
    for s in &d.by_signature {
        *got.entry(s.op.clone()).or_default() += (s.bytes_per_step * steps).round() as i64;
    }
    assert_eq!(got, want);
    // Steps: each step's peak is the highest total inside it.
    assert_eq!(d.steps.len(), summary.steps.len());
    for st in &d.steps {
        let inside = mem
            .iter()
            .filter(|m| st.start_ns <= m.0 && m.0 <= st.end_ns);
        assert_eq!(st.peak_bytes, inside.map(|m| m.1).max().unwrap());
    }
    // A peak finding names the device and the size.
    let f = summary
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::MemoryPeak)
        .expect("a peak finding");
    assert!(f.text.starts_with("Peak memory on cpu: "), "{}", f.text);
}

fn generated(
    variant: Variant,
    memory: bool,
) -> (kinetoscope_generate::Truth, Summary, MemoryReport) {
    let p = DecodeParams {
        steps: 2,
        variant,
        memory,
        ..Default::default()
    };
    let mut json = Vec::new();
    let truth = write_decode_trace(&p, &mut json).unwrap();
    let (s, r) = analyze_bytes(&json);
    (truth, s, r)
}

#[test]
fn the_cast_buffer_made_and_dropped_in_every_layer() {
    let (truth, s, r) = generated(Variant::Baseline, true);
    assert_eq!(
        truth.cast_alloc_bytes,
        2 * 1_114_112 * 128 * 2,
        "570 MB: the KV pool in BF16"
    );
    let d = &r.devices[0];
    assert_eq!(d.device, "cuda:0");
    assert_eq!(d.peak_bytes, truth.peak_allocated);
    let top = &d.by_signature[0];
    assert_eq!(top.op, "aten::_to_copy");
    assert!(
        top.shapes.starts_with("[[2, 1114112, 1, 128]"),
        "{}",
        top.shapes
    );
    assert_eq!(top.bytes_per_call, truth.cast_alloc_bytes as f64);
    assert_eq!(top.calls, 2 * 78);
    assert_eq!(
        top.churn_bytes_per_step,
        78.0 * truth.cast_alloc_bytes as f64
    );
    let churn: f64 = d.by_signature.iter().map(|s| s.churn_bytes_per_step).sum();
    assert!(
        (churn - truth.churn_bytes_per_step).abs() < 1.0,
        "{churn} vs {}",
        truth.churn_bytes_per_step
    );
    // The finding says it with the truth's numbers.
    let f = s
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::MemoryChurn)
        .expect("a churn finding");
    assert!(
        f.text.starts_with("aten::_to_copy ([2, 1114112, 1, 128] Float8_e4m3fn) allocates 570 MB and frees it 78 times a step on cuda:0: 44.5 GB per step"),
        "{}",
        f.text
    );
    // Live at the peak: a cast's buffer leads, made by the cast.
    assert_eq!(d.live_at_peak[0].bytes as u64, truth.cast_alloc_bytes);
    assert_eq!(d.live_at_peak[0].op, "aten::_to_copy");
    assert_eq!(s.memory[0].steps, 2);
    assert_eq!(s.memory[0].growth_bytes_per_step, None);
    // The patch casts only the rows a step uses: no churn among the first
    // sentences (nor at all).
    let (_, patch, _) = generated(Variant::GatherCast, true);
    assert!(
        patch
            .findings
            .iter()
            .all(|f| f.kind != FindingKind::MemoryChurn),
        "{:?}",
        patch.findings.iter().map(|f| &f.text).collect::<Vec<_>>()
    );
    // The diff's memory rows: the churn before and after.
    use kinetoscope_trace::diff::{diff, Side};
    let d = diff(
        &Side {
            id: "a",
            name: "a",
            summary: &s,
        },
        &Side {
            id: "b",
            name: "b",
            summary: &patch,
        },
    );
    assert_eq!(d.memory.len(), 1);
    let m = &d.memory[0];
    assert_eq!(m.a_churn_bytes_per_step, s.memory[0].churn_bytes_per_step);
    assert!(
        m.b_churn_bytes_per_step.unwrap() < m.a_churn_bytes_per_step.unwrap() / 5.0,
        "{m:?}"
    );
    // Without memory events: no artifact devices beyond what the trace has.
    let (_, s, r) = generated(Variant::Baseline, false);
    assert!(r
        .devices
        .iter()
        .all(|d| d.by_signature.iter().all(|s| s.bytes_per_call < 1e8)));
    assert!(s
        .findings
        .iter()
        .all(|f| f.kind != FindingKind::MemoryChurn));
}

/// A hand-made trace of `[memory]` events around one op per step.
fn memory_trace(events: &[(f64, i64, i64, i64)], steps: usize) -> Vec<u8> {
    let mut out = String::from("{\"traceEvents\": [\n");
    for k in 0..steps {
        let t0 = 1000.0 * k as f64;
        out += &format!(
            "{{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#{k}\", \"pid\": 1, \"tid\": 1, \"ts\": {t0}, \"dur\": 999}},\n\
             {{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::cat\", \"pid\": 1, \"tid\": 1, \"ts\": {}, \"dur\": 900, \"args\": {{\"Input Dims\": [[4, 8]], \"Input type\": [\"float\"]}}}},\n",
            t0 + 10.0
        );
    }
    for (ts, addr, bytes, total) in events {
        out += &format!(
            "{{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 1, \"ts\": {ts}, \"args\": {{\"Total Reserved\": 0, \"Total Allocated\": {total}, \"Bytes\": {bytes}, \"Addr\": {addr}, \"Device Id\": 0, \"Device Type\": 1}}}},\n"
        );
    }
    out += "{}]}";
    out.into_bytes()
}

#[test]
fn bad_memory_events_give_sensible_answers() {
    // Frees without allocations, negative totals, an address reused before
    // its free: no panic, the peak as written.
    let json = memory_trace(
        &[
            (20.0, 7, -4096, -4096),
            (30.0, 8, 1 << 20, (1 << 20) - 4096),
            (40.0, 8, 2 << 20, (3 << 20) - 4096),
            (50.0, 8, -(2 << 20), (1 << 20) - 4096),
            (60.0, 9, -1, i64::MIN / 2),
        ],
        1,
    );
    let (s, r) = analyze_bytes(&json);
    let d = &r.devices[0];
    assert_eq!(d.peak_bytes, (3 << 20) - 4096);
    assert_eq!(d.peak_ns, 40_000);
    assert_eq!(
        d.live_at_peak.len(),
        1,
        "the reused address holds its latest block"
    );
    assert_eq!(d.live_at_peak[0].bytes, 2 << 20);
    assert_eq!(d.live_at_peak[0].op, "aten::cat");
    assert_eq!(s.memory.len(), 1);

    // Memory that grows from step to step: a growth finding.
    let mut evs = Vec::new();
    for k in 0..10 {
        let ts = 1000.0 * k as f64 + 100.0;
        evs.push((ts, 100 + k as i64, 64 << 20, (k as i64 + 1) * (64 << 20)));
    }
    let (s, _) = analyze_bytes(&memory_trace(&evs, 10));
    assert_eq!(s.memory[0].growth_bytes_per_step, Some((64 << 20) as f64));
    assert!(s
        .findings
        .iter()
        .any(|f| f.kind == FindingKind::MemoryGrowth));

    // Half a million events on one device: the curve stays bounded.
    let evs: Vec<(f64, i64, i64, i64)> = (0..500_000)
        .map(|k| {
            (
                k as f64 * 0.01,
                k as i64 % 1000,
                if k % 2 == 0 { 512 } else { -512 },
                512 * (k as i64 % 2),
            )
        })
        .collect();
    let (_, r) = analyze_bytes(&memory_trace(&evs, 1));
    assert!(
        r.devices[0].series.len() < 10_000,
        "{}",
        r.devices[0].series.len()
    );
}

/// Counter tracks as Kineto writes CUPTI PM sampling (a `GPU 0 Counters`
/// process of `ph: "C"` events): every series kept with its device and
/// unit, values at known times, and each kernel's mean over its runs.
#[test]
fn pm_sampling_counters_become_tracks_and_kernel_means() {
    use kinetoscope_generate::{PM_BUSY, PM_CAST, PM_PERIOD_US};
    let p = DecodeParams {
        steps: 2,
        layers: 4,
        counters: true,
        ..Default::default()
    };
    let mut json = Vec::new();
    let truth = write_decode_trace(&p, &mut json).unwrap();
    let t = read_trace(&json[..], &ReadOptions::default()).unwrap();
    let a = analyze_all(&t, &AnalysisOptions::default());
    let tracks = &a.counters.tracks;
    let labels: Vec<&str> = tracks.iter().map(|t| t.label.as_str()).collect();
    assert_eq!(labels, ["DRAM Throughput", "SM Active"]);
    for tr in tracks {
        assert_eq!(tr.process, "GPU 0 Counters");
        assert_eq!(tr.device, Some(0));
        assert_eq!(tr.unit.as_deref(), Some("%"));
        assert_eq!(tr.samples, truth.counter_samples);
        // Every sample is on the period's grid: the points are samples.
        let period = (PM_PERIOD_US * 1000.0) as i64;
        assert!(tr.points.iter().all(|(t, _)| t % period == 0));
    }
    // The cast's runs (its kernel group: the cast's grid) read the cast's
    // values; another kernel's, its own.
    let groups: Vec<&kinetoscope_types::KernelGroup> = a
        .summary
        .kernels
        .iter()
        .flat_map(|k| k.groups.iter())
        .collect();
    let mean = |g: &kinetoscope_types::KernelGroup, c: &str| {
        g.counters.iter().find(|m| m.counter == c).map(|m| m.mean)
    };
    let cast = groups
        .iter()
        .find(|g| g.grid == Some(truth.cast_grid))
        .expect("the cast's group");
    assert_eq!(mean(cast, "DRAM Throughput"), Some(PM_CAST.0));
    assert_eq!(mean(cast, "SM Active"), Some(PM_CAST.1));
    let other = groups
        .iter()
        .find(|g| g.grid != Some(truth.cast_grid) && g.counters.iter().any(|m| m.samples > 5))
        .expect("another sampled kernel group");
    assert_eq!(mean(other, "DRAM Throughput"), Some(PM_BUSY.0));
    assert_eq!(mean(other, "SM Active"), Some(PM_BUSY.1));
}

#[test]
fn a_million_counter_samples_are_fine() {
    let mut out = String::from("{\"traceEvents\": [\n{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 7, \"args\": {\"name\": \"Host\"}},\n");
    for k in 0..1_000_000u64 {
        out += &format!(
            "{{\"ph\": \"C\", \"name\": \"queue\", \"pid\": 7, \"tid\": 1, \"ts\": {k}, \"args\": {{\"length\": {}, \"bad\": \"x\"}}}},\n",
            k % 13
        );
    }
    out += "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::add\", \"pid\": 7, \"tid\": 1, \"ts\": 1, \"dur\": 5}]}";
    let t = read_trace(out.as_bytes(), &ReadOptions::default()).unwrap();
    let a = analyze_all(&t, &AnalysisOptions::default());
    assert_eq!(a.counters.tracks.len(), 1, "a non-numeric key is no series");
    let tr = &a.counters.tracks[0];
    assert_eq!(
        (tr.label.as_str(), tr.process.as_str(), tr.device),
        ("queue", "Host", None)
    );
    assert_eq!(tr.samples, 1_000_000);
    assert_eq!((tr.min, tr.max), (0.0, 12.0));
    assert!(tr.points.len() <= 4100, "{}", tr.points.len());
}

/// Past `memory::MAX_LIVE` (2^20) allocations live at once, the replay
/// follows no more: those made past it are still in their signature's
/// bytes and calls, the largest live at the peak come from those followed,
/// and the trace's notes say how many were not followed. The ones followed
/// are still matched to their frees.
#[test]
fn past_the_live_bound_allocations_are_counted_not_followed() {
    const MAX_LIVE: u64 = 1 << 20;
    let past = 1000u64;
    let n = MAX_LIVE + past;
    let event = |ts: u64, bytes: i64, total: u64, addr: u64| {
        format!(
            "{{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"s\":\"t\",\"name\":\"[memory]\",\"pid\":1,\"tid\":1,\"ts\":{ts},\"args\":{{\"Total Allocated\":{total},\"Bytes\":{bytes},\"Addr\":{addr},\"Device Type\":1,\"Device Id\":0}}}},\n"
        )
    };
    let mut out = String::with_capacity(160 * (n as usize + 20));
    out += "{\"traceEvents\": [\n";
    // The first allocation is the largest: it is listed first at the peak.
    for k in 0..n {
        let bytes = if k == 0 { 4096 } else { 512 };
        out += &event(1000 + k, bytes, 4096 + 512 * k, (1 << 40) + k);
    }
    // The peak is the last allocation; then the first ten are freed.
    let peak = 4096 + 512 * (n - 1);
    for k in 0..10 {
        let freed = if k == 0 { 4096 } else { 512 };
        out += &event(1000 + n + k, -freed, peak - 512 * (k + 1), (1 << 40) + k);
    }
    out += "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::empty\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 5}]}";
    let (s, report) = analyze_bytes(out.as_bytes());
    let note = format!(
        "More than {MAX_LIVE} allocations live at once on cuda:0: the {past} made past that"
    );
    assert!(
        s.trace.notes.iter().any(|n| n.starts_with(&note)),
        "{:?}",
        s.trace.notes
    );
    let m = &s.memory[0];
    assert_eq!(m.peak_bytes, peak as i64);
    assert_eq!(m.live_at_peak[0].bytes, 4096);
    assert!(m
        .live_at_peak
        .iter()
        .all(|l| l.t_ns < (1000 + MAX_LIVE as i64) * 1000));
    let device = &report.devices[0];
    assert_eq!(device.events, n + 10);
    let calls: u64 = device.by_signature.iter().map(|r| r.calls).sum();
    let allocated: f64 = device
        .by_signature
        .iter()
        .map(|r| r.bytes_per_call * r.calls as f64)
        .sum();
    assert_eq!(calls, n, "every allocation is counted");
    assert!(
        (allocated - (4096.0 + 512.0 * (n - 1) as f64)).abs() < 1.0,
        "{allocated}"
    );
}
