//! Every trace in ../shared/traces analyzes without error, and the summary's
//! invariants hold on each.

use kinetoscope_trace::import::{read_trace_file, ReadOptions};
use kinetoscope_trace::{analyze, AnalysisOptions};
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
