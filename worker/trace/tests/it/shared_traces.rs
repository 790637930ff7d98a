//! Every trace in ../shared/traces analyzes without error, and the summary's
//! invariants hold on each.

use kinetoscope_trace::import::{read_trace_file, ReadOptions};
use kinetoscope_trace::{analyze, AnalysisOptions};
use kinetoscope_types::{FindingKind, PeakSource};
use std::path::PathBuf;

fn shared_traces() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 30,
        "expected the shared corpus in {}",
        dir.display()
    );
    files
}

#[test]
fn every_shared_trace_analyzes_and_invariants_hold() {
    for path in shared_traces() {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let t = read_trace_file(&path, &ReadOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let s = analyze(&t, &AnalysisOptions::default());

        // One short name per kernel row: no two rows of the table read the
        // same (issue 45: two `direct_copy_kernel` rows, a 2 s cast and a
        // 3 ms copy, looked alike).
        let mut shorts: Vec<&str> = s.kernels.iter().map(|k| k.short_name.as_str()).collect();
        shorts.sort_unstable();
        let before = shorts.len();
        shorts.dedup();
        assert_eq!(shorts.len(), before, "{name}: kernel short names repeat");

        // Every column of a table, and the launch ids beside it, has the
        // table's length (rows go in whole: `Trace::push_cpu`, `push_gpu`).
        let (c, g, ids) = (&t.cpu, &t.gpu, t.ids());
        let n = c.len();
        assert!(
            [
                c.dur().len(),
                c.name().len(),
                c.track().len(),
                c.kind().len()
            ]
            .iter()
            .chain([&ids.cpu_correlation().len(), &ids.cpu_external_id().len()])
            .all(|&len| len == n),
            "{name}: CPU columns"
        );
        let n = g.len();
        assert!(
            [
                g.dur().len(),
                g.name().len(),
                g.kind().len(),
                g.device().len(),
                g.stream().len(),
                g.bytes().len(),
                g.track().len(),
                ids.gpu_correlation().len(),
            ]
            .iter()
            .all(|&len| len == n),
            "{name}: GPU columns"
        );

        // Kernel totals add up to the GPU-op durations in the trace.
        let raw_total: i64 = (0..t.gpu.len())
            .filter(|&g| t.gpu.kind()[g].is_gpu_op())
            .map(|g| t.gpu.dur().get(g))
            .sum();
        let table_total: f64 = s.kernels.iter().map(|k| k.total_us).sum();
        assert!(
            (table_total - raw_total as f64 / 1e3).abs() < 1e-3 * (1.0 + table_total),
            "{name}: kernel totals"
        );
        let calls: u64 = s.kernels.iter().map(|k| k.calls).sum();
        assert_eq!(calls, s.trace.attribution.gpu_ops, "{name}: kernel calls");

        // Every GPU op is attributed to an op or counted as unattributed.
        let a = &s.trace.attribution;
        let attributed: u64 = s.ops.iter().map(|o| o.gpu_ops).sum();
        assert_eq!(
            attributed + a.without_launch + a.without_op,
            a.gpu_ops,
            "{name}: attribution"
        );
        let self_dev: f64 = s.ops.iter().map(|o| o.self_device_us).sum();
        assert!(
            (self_dev + a.unattributed_us - table_total).abs() < 1e-3 * (1.0 + table_total),
            "{name}: self device {self_dev} + unattributed {} != {table_total}",
            a.unattributed_us
        );

        // Steps have positive durations; shares are percentages.
        for st in &s.steps {
            assert!(st.cpu_us > 0.0, "{name}: step {} has no duration", st.name);
        }
        for o in &s.ops {
            assert!(
                o.self_cpu_us <= o.cpu_total_us + 1e-6,
                "{name}: {} self > total",
                o.name
            );
            assert!(
                o.self_device_us <= o.device_total_us + 1e-6,
                "{name}: {} self device > total",
                o.name
            );
            assert!((0.0..=100.0 + 1e-6).contains(&o.device_pct));
        }
        assert!(
            s.gpu_time.busy_pct <= 100.0 + 1e-6,
            "{name}: busy {}",
            s.gpu_time.busy_pct
        );

        // The device: the table's part for the GPU the file names, unknown
        // for a name the table lacks or an empty one, none without
        // `deviceProperties`.
        let want = expected_device(&name);
        let got = s.device.as_ref().map(|d| (d.name.as_str(), d.source));
        assert_eq!(got, want, "{name}: device");
        if let Some(d) = &s.device {
            let known = d.source == PeakSource::Table;
            assert_eq!(
                d.peak_gbps.is_some(),
                known,
                "{name}: peaks only from the table"
            );
        }
        // Shares of a peak are shares.
        for g in s.ops.iter().flat_map(|o| &o.input_shapes) {
            for v in [g.pct_of_peak_bw, g.pct_of_peak_flops]
                .into_iter()
                .flatten()
            {
                assert!(v.is_finite() && v >= 0.0, "{name}: {v}");
            }
            assert!(
                g.ideal_us.is_none() || s.device.as_ref().is_some_and(|d| d.peak_gbps.is_some())
            );
        }
        // No sentence where it does not apply: the whole-tensor advice only
        // on a copy or cast, no launch geometry on graph replays.
        for f in &s.findings {
            if f.kind == FindingKind::WholeTensor {
                let op = f.name.as_deref().unwrap_or("");
                assert!(
                    kinetoscope_trace::analysis::shapes::is_copy_like(op),
                    "{name}: whole tensor on {op}"
                );
            }
            if f.kind == FindingKind::LaunchGeometry {
                assert_eq!(s.graphs.replays, 0, "{name}: {}", f.text);
            }
        }
        let whole = s
            .findings
            .iter()
            .any(|f| f.kind == FindingKind::WholeTensor);
        assert_eq!(
            whole,
            name.contains("fp8cast") || name.contains("stack-memory"),
            "{name}: whole-tensor finding"
        );

        // The summary survives a JSON round trip unchanged.
        let json = serde_json::to_string(&s).unwrap();
        let back: kinetoscope_trace::Summary = serde_json::from_str(&json).unwrap();
        assert!(
            back == s,
            "{name}: the summary changes in a JSON round trip"
        );

        eprintln!(
            "{name}: {} events, {} kernels, {} ops, {} steps ({}), busy {:.1}%, layers {} {} (period {:?}, {}), top: {}",
            s.trace.events,
            s.trace.kernels,
            s.ops.len(),
            s.steps.len(),
            s.steps_stats.source,
            s.gpu_time.busy_pct,
            s.layers.method,
            s.layers.count,
            s.layers.period,
            s.layers.marker.as_deref().unwrap_or("-"),
            s.findings.first().map(|f| f.text.as_str()).unwrap_or("-")
        );
    }
}

/// The device each shared trace ran on, by its file name and `SOURCES.md`
/// (what the table should make of `deviceProperties[].name`), with the
/// peaks' source.
fn expected_device(file: &str) -> Option<(&'static str, PeakSource)> {
    use PeakSource::{Table, Unknown};
    let rules: &[(&str, Option<(&str, PeakSource)>)] = &[
        // Meta's A100-PG509-200 boards are the 40 GB SXM4 part.
        ("hta-a100-80g", Some(("NVIDIA A100 SXM4 80GB", Table))),
        ("hta-a100", Some(("NVIDIA A100 SXM4 40GB", Table))),
        ("hta-cpu-only", None),
        ("hta-gp100", Some(("NVIDIA Quadro GP100", Table))),
        // ROCm 6.2 names the MI250's die "AMD Radeon Graphics": not a name
        // the table can trust.
        ("hta-mi250", Some(("AMD Radeon Graphics", Unknown))),
        ("hta-mtia", Some(("ARTEMIS", Unknown))),
        ("hta-v100", Some(("NVIDIA V100 SXM2", Table))),
        ("kineto-resnet50-2021", None),
        ("kineto-v100", Some(("NVIDIA V100 SXM2", Table))),
        ("param-dlrm-v100", Some(("NVIDIA V100 SXM2", Table))),
        (
            "param-linear-rtx2080ti",
            Some(("NVIDIA GeForce RTX 2080 Ti", Table)),
        ),
        (
            "param-resnet-rtx2080ti",
            Some(("NVIDIA GeForce RTX 2080 Ti", Table)),
        ),
        ("torch-cpu", None),
        ("torch-h200", Some(("NVIDIA H200", Table))),
        ("tracelens-h100-bert", Some(("NVIDIA H100 SXM", Table))),
        // Their `deviceProperties` come after the events.
        ("tracelens-h100-owlv2", Some(("NVIDIA H100 SXM", Table))),
        ("tracelens-h100-qwen", Some(("NVIDIA H100 SXM", Table))),
        ("tracelens-mi210", Some(("AMD Instinct MI210", Table))),
        // vLLM's graph capture wrote an empty name: unknown, not a guess.
        (
            "tracelens-mi300x-vllm-decode-graph-capture",
            Some(("unknown device", Unknown)),
        ),
        (
            "tracelens-mi300x-vllm-prefilldecode",
            Some(("unknown device", Unknown)),
        ),
        (
            "tracelens-mi300x-qwen",
            Some(("AMD Instinct MI300X", Table)),
        ),
        ("tracelens-mi300x", Some(("AMD Instinct MI300X", Table))),
    ];
    rules
        .iter()
        .find(|(prefix, _)| file.starts_with(prefix))
        .unwrap_or_else(|| panic!("{file}: no expected device"))
        .1
}

/// The evidence behind `links::MAX_OP_DEPTH`: no shared trace nests ops,
/// annotations and runtime calls deeper than 12, so the limit (128) cuts
/// only what no profiler writes (a "staircase" upload).
#[test]
fn op_trees_stay_within_their_depth() {
    use kinetoscope_trace::analysis::links::{link, MAX_OP_DEPTH, NO};
    let mut deepest = 0;
    for p in shared_traces() {
        let t = read_trace_file(&p, &ReadOptions::default()).unwrap();
        let links = link(&t);
        // Parents first is not the table's order: walk each chain, bounded
        // by the limit itself.
        let max = links
            .parent
            .iter()
            .map(|first| {
                let (mut d, mut p) = (1u32, first);
                while p != NO && (d as usize) <= MAX_OP_DEPTH {
                    d += 1;
                    p = links.parent.get(p as usize);
                }
                d
            })
            .max()
            .unwrap_or(0);
        deepest = deepest.max(max);
        assert!(max <= 12, "{}: ops nest {max} deep", p.display());
    }
    assert!(deepest >= 8, "the deepest shared trace nests {deepest}");
}

/// A DDP training loop profiled with stacks and no schedule
/// (`tracelens-mi300x-ddp-resnet18-train`: no ProfilerStep; `nn.Module:
/// ResNet_0` called five times, an `Optimizer.step` after each): each call
/// of the model's own frame starts a step that runs until the next
/// (backward and optimizer included), the last to the trace's end; there
/// were no steps.
#[test]
fn a_training_loop_without_step_marks_has_a_step_per_forward_pass() {
    let path = shared_traces()
        .into_iter()
        .find(|p| p.ends_with("tracelens-mi300x-ddp-resnet18-train.json.gz"))
        .unwrap();
    let t = read_trace_file(&path, &ReadOptions::default()).unwrap();
    let s = analyze(&t, &AnalysisOptions::default());
    assert_eq!(s.steps_stats.source, "forward passes");
    assert_eq!(s.steps.len(), 5);
    assert_eq!(s.layers.passes, 5);
    // Each step holds its iteration's optimizer step: from one forward
    // call to the next, 113-118 ms for the first two.
    for r in &s.steps[..2] {
        assert!(
            (110e3..120e3).contains(&r.cpu_us),
            "{}: {}",
            r.name,
            r.cpu_us
        );
    }
    assert_eq!(s.steps[4].name, "forward pass #5");
}
