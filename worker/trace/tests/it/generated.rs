//! Generated decode traces: whatever the number of steps and layers, and in
//! every mode the generator has, the analysis finds the KV-cache cast with
//! the share, calls per step and bytes per call the generator put in, the
//! layers (dense then MoE) and the steps (its own accounting, not the
//! analyzer's).

use kinetoscope_generate::{write_decode_trace, DecodeParams, Mode, Truth, Variant};
use kinetoscope_trace::import::{read_trace, ReadOptions};
use kinetoscope_trace::{analyze, AnalysisOptions, Summary};
use kinetoscope_types::units;

fn run(p: &DecodeParams) -> (Truth, Summary) {
    let mut json = Vec::new();
    let truth = write_decode_trace(p, &mut json).unwrap();
    let t = read_trace(&json[..], &ReadOptions::default()).unwrap();
    assert_eq!(t.counters.events, truth.events);
    (truth, analyze(&t, &AnalysisOptions::default()))
}

/// The mix the founding story's capture has: about 600 events per layer per
/// step (ops, runtime calls, kernels and their flows), no Python frames.
#[test]
fn the_default_trace_has_the_real_mix() {
    let p = DecodeParams {
        steps: 2,
        layers: 10,
        ..Default::default()
    };
    let (truth, s) = run(&p);
    let per = |cat: &str| {
        s.trace
            .categories
            .iter()
            .find(|c| c.category == cat)
            .map_or(0, |c| c.events) as f64
            / 20.0
    };
    assert!(
        (220.0..300.0).contains(&per("cpu_op")),
        "ops per layer-step {}",
        per("cpu_op")
    );
    assert!(
        (80.0..120.0).contains(&per("cuda_runtime")),
        "runtime calls {}",
        per("cuda_runtime")
    );
    assert!(
        (60.0..90.0).contains(&per("kernel")),
        "kernels {}",
        per("kernel")
    );
    assert_eq!(per("python_function"), 0.0);
    assert_eq!(s.trace.kernels, truth.kernels);
    assert!(s.trace.profiler_options.iter().any(|o| o == "with_flops"));
    // About ten copies per layer, every cast to BF16 with one kernel name.
    let copy = s.ops.iter().find(|o| o.name == "aten::copy_").unwrap();
    assert_eq!(copy.calls, truth.copy_calls);
    assert!(
        copy.calls_per_step.unwrap() / 10.0 >= 7.0,
        "{:?}",
        copy.calls_per_step
    );
    let cast = s
        .kernels
        .iter()
        .find(|k| k.groups.iter().any(|g| g.grid == Some(truth.cast_grid)))
        .unwrap();
    assert!(
        cast.calls > truth.cast_calls,
        "the cast shares its kernel name with other casts"
    );
}

#[test]
fn cast_finding_matches_the_generator_at_any_size() {
    for (steps, layers, with_stack) in [
        (1, 1, false),
        (2, 7, true),
        (3, 32, false),
        (5, 78, false),
        (2, 126, true),
    ] {
        let p = DecodeParams {
            steps,
            layers,
            with_stack,
            ..Default::default()
        };
        let (truth, s) = run(&p);
        let what = format!("{steps} steps x {layers} layers");

        // The op table: the cast is one input signature of aten::copy_,
        // the one with the most device time.
        let copy = s.ops.iter().find(|o| o.name == "aten::copy_").unwrap();
        let cast = &copy.input_shapes[0];
        assert!(
            cast.dtypes.contains("Float8_e4m3fn"),
            "{what}: {:?}",
            copy.input_shapes
        );
        assert_eq!(
            cast.conversion.as_deref(),
            Some("Float8_e4m3fn -> BFloat16")
        );
        assert_eq!(cast.calls, truth.cast_calls, "{what}: cast calls");
        assert_eq!(cast.calls_per_step, Some(layers as f64), "{what}");
        assert_eq!(
            cast.bytes_per_call,
            Some(truth.cast_bytes_per_call as f64),
            "{what}: bytes per call"
        );
        assert!(
            (cast.device_pct - truth.cast_pct()).abs() < 0.2,
            "{what}: share {} vs {}",
            cast.device_pct,
            truth.cast_pct()
        );
        assert!((cast.self_device_us - truth.cast_us).abs() < 1.0, "{what}");
        assert_eq!(
            cast.parents.last().map(String::as_str),
            Some("aten::_to_copy")
        );

        // The first finding leads with the cast: op, conversion, calls per
        // step, bytes per call, its own share (not the op's).
        let f = crate::first_cause_op(&s);
        assert_eq!(
            f.kind,
            kinetoscope_types::FindingKind::TopOp,
            "{what}: {}",
            f.text
        );
        assert_eq!(f.name.as_deref(), Some("aten::copy_"));
        assert!(
            f.text.starts_with("aten::copy_ (Float8_e4m3fn -> BFloat16"),
            "{what}: {}",
            f.text
        );
        assert!(
            f.text.contains(&units::pct(cast.device_pct)),
            "{what}: {}",
            f.text
        );
        assert!(
            f.text
                .contains(&format!("{} per step", units::calls(layers as f64))),
            "{what}: {}",
            f.text
        );
        assert!(
            f.text
                .contains(&units::bytes(truth.cast_bytes_per_call as f64)),
            "{what}: {}",
            f.text
        );
        assert!(
            f.text.contains("aten::to > aten::_to_copy"),
            "{what}: {}",
            f.text
        );
        if with_stack {
            assert!(
                f.text.contains("in vllm/attention/layer.py(252): forward"),
                "{what}: {}",
                f.text
            );
        }

        // Steps, and the cast kernel's own launch geometry.
        assert_eq!(s.steps_stats.count as u32, steps, "{what}");
        let mean = truth.mean_step_us();
        assert!(
            (s.steps_stats.mean_us - mean).abs() < 1e-3 * mean,
            "{what}: mean step"
        );
        let k = &s.kernels[0];
        assert_eq!(k.category.as_str(), "memory");
        let g = &k.groups[0];
        assert_eq!(g.grid, Some(truth.cast_grid), "{what}");
        assert_eq!(g.calls as u32, steps * layers);
        assert_eq!(g.conversion.as_deref(), Some("Float8_e4m3fn -> BFloat16"));
        assert_eq!(g.bytes_per_call, Some(truth.cast_bytes_per_call as f64));
        let chain = &k.launched_by[0].chain;
        assert_eq!(chain.first().map(String::as_str), Some("ProfilerStep#*"));
        assert_eq!(
            &chain[chain.len() - 3..],
            ["aten::to", "aten::_to_copy", "aten::copy_"],
            "{what}"
        );
        if with_stack {
            assert!(k.launched_by[0]
                .python
                .iter()
                .any(|f| f == "vllm/attention/layer.py(252): forward"));
        }

        // Layers: every one of them, the dense ones labelled.
        if layers >= 8 {
            assert_eq!(
                s.layers.count, layers as u64,
                "{what}: {} ({})",
                s.layers.method, s.layers.detail
            );
            let dense = s
                .layers
                .items
                .iter()
                .filter(|l| l.kind.map(|k| k.as_str()) == Some("dense"))
                .count();
            assert_eq!(
                dense as u32, truth.dense_layers,
                "{what}: {}",
                s.layers.detail
            );
            assert!(s.layers.items[..3]
                .iter()
                .all(|l| l.kind.map(|k| k.as_str()) == Some("dense")));
            assert!(s.layers.items[3..]
                .iter()
                .all(|l| l.kind.map(|k| k.as_str()) == Some("moe")));
        }
    }
}

#[test]
fn the_patch_moves_fewer_bytes_per_cast() {
    let p = DecodeParams {
        steps: 2,
        layers: 10,
        variant: Variant::GatherCast,
        ..Default::default()
    };
    let (truth, s) = run(&p);
    let copy = s.ops.iter().find(|o| o.name == "aten::copy_").unwrap();
    let g = copy
        .input_shapes
        .iter()
        .find(|g| g.dtypes.contains("Float8_e4m3fn"))
        .unwrap();
    assert_eq!(g.bytes_per_call, Some(truth.cast_bytes_per_call as f64));
    // The gather of the FP8 cache (the embedding's index_select is another group).
    let gather = s
        .ops
        .iter()
        .find(|o| o.name == "aten::index_select")
        .unwrap();
    let g = gather
        .input_shapes
        .iter()
        .find(|g| g.dtypes.contains("Float8_e4m3fn"))
        .unwrap();
    assert!(
        (g.self_device_us - truth.gather_us).abs() < 0.01,
        "{} vs {}",
        g.self_device_us,
        truth.gather_us
    );
}

/// One CUDA graph replay per step: the kernels belong to the replay, steps
/// come from the model runner's frames, and no finding asks for graphs.
#[test]
fn full_graph_replays() {
    let p = DecodeParams {
        steps: 3,
        layers: 12,
        mode: Mode::Graph,
        ..Default::default()
    };
    let (truth, s) = run(&p);
    assert_eq!(truth.replays, 3);
    assert_eq!(s.trace.attribution.graph_launches, 3);
    assert_eq!(s.steps_stats.count, 3);
    assert!(
        s.steps_stats.source.contains("execute_model"),
        "{}",
        s.steps_stats.source
    );
    let mean = truth.mean_step_us();
    assert!(
        (s.steps_stats.mean_us - mean).abs() < 1e-3 * mean,
        "{} vs {mean}",
        s.steps_stats.mean_us
    );
    assert_eq!(s.graphs.mode.as_str(), "graph");
    assert!((s.graphs.device_us - truth.graph_us).abs() < 1.0);
    // The replay's device time has a row of its own, named by its context.
    let replay = s.ops.iter().find(|o| o.kind.as_str() == "graph").unwrap();
    assert_eq!(
        replay.name,
        "graph replay: vllm/compilation/cuda_graph.py(208): __call__"
    );
    assert!((replay.self_device_us - truth.graph_us).abs() < 1.0);
    assert_eq!(replay.calls, 3);
    assert!(
        s.trace.attribution.unattributed_us < 1.0,
        "{}",
        s.trace.attribution.unattributed_us
    );
    // Layers come from the kernel sequence inside the graph.
    assert_eq!(s.layers.count, 12, "{}", s.layers.detail);
    // The cast kernel's chain is the replay and the code around it.
    let k = &s.kernels[0];
    assert_eq!(k.groups[0].grid, Some(truth.cast_grid));
    assert_eq!(k.launched_by[0].launch, "cudaGraphLaunch");
    assert_eq!(
        k.launched_by[0].python.last().map(String::as_str),
        Some("<built-in method replay of PyCapsule object at 0x7f3a2c1b9f10>")
    );
    for f in &s.findings {
        assert!(
            !f.text.contains("CUDA graphs or fusion would help"),
            "{}",
            f.text
        );
    }
    assert!(s
        .findings
        .iter()
        .any(|f| f.kind == kinetoscope_types::FindingKind::GraphReplay));
}

/// Piecewise graphs with eager attention: the cast runs eagerly between
/// replays and leads the findings; the replays are named and counted.
#[test]
fn piecewise_graph_replays() {
    let p = DecodeParams {
        steps: 2,
        layers: 10,
        mode: Mode::Piecewise,
        ..Default::default()
    };
    let (truth, s) = run(&p);
    assert_eq!(truth.replays, 2 * 11, "one replay per layer, plus one");
    assert_eq!(s.graphs.replays, truth.replays);
    assert_eq!(s.graphs.mode.as_str(), "piecewise");
    assert!((s.graphs.eager_us - (truth.gpu_us - truth.graph_us)).abs() < 1.0);
    let f = crate::first_cause_op(&s);
    assert!(
        f.text.starts_with("aten::copy_ (Float8_e4m3fn -> BFloat16"),
        "{}",
        f.text
    );
    let gf = s
        .findings
        .iter()
        .find(|f| f.kind == kinetoscope_types::FindingKind::GraphReplay)
        .unwrap();
    assert!(
        gf.text.contains("runs eagerly between the graphs"),
        "{}",
        gf.text
    );
    assert!(s
        .findings
        .iter()
        .all(|f| f.kind != kinetoscope_types::FindingKind::LaunchBound));
    assert_eq!(s.layers.count, 10, "{}", s.layers.detail);
}

/// Against the hardware: the generated trace names an H200, so the cast is
/// measured against the H200's 4.8 TB/s: its share of the peak and the
/// time its bytes take at the peak, worked out here from the generator's
/// own numbers; the first finding carries both and the whole-tensor advice
/// (the cast converts the whole KV pool while the steps read a growing
/// part of it). The gather-then-cast variant casts what the step reads and
/// gets no such advice. An override replaces the table's peak.
#[test]
fn the_cast_against_the_h200() {
    use kinetoscope_types::{FindingKind, PeakSource};
    let p = DecodeParams {
        steps: 4,
        layers: 6,
        ..Default::default()
    };
    let (truth, s) = run(&p);
    let d = s.device.as_ref().expect("the trace names its GPU");
    assert_eq!(
        (d.name.as_str(), d.source, d.peak_gbps, d.sms),
        ("NVIDIA H200", PeakSource::Table, Some(4800.0), Some(132))
    );
    let copy = s.ops.iter().find(|o| o.name == "aten::copy_").unwrap();
    let cast = &copy.input_shapes[0];
    let calls = (p.steps * p.layers) as f64;
    let bytes = truth.cast_bytes_per_call as f64;
    let per_call_s = truth.cast_us / calls / 1e6;
    let want_pct = 100.0 * (bytes / per_call_s) / 4.8e12;
    let want_ideal_us = bytes / 4.8e12 * 1e6;
    let pct = cast.pct_of_peak_bw.unwrap();
    let ideal = cast.ideal_us.unwrap();
    assert!((pct - want_pct).abs() < 0.1, "{pct} vs {want_pct}");
    assert!(
        (ideal - want_ideal_us).abs() < 0.01,
        "{ideal} vs {want_ideal_us}"
    );
    // The H200's 4.8 TB/s moves the 856 MB in 178 µs; the cast takes 828.
    assert!((ideal - 178.3).abs() < 0.5, "{ideal}");
    let used = cast
        .partly_used
        .as_ref()
        .expect("the whole pool, every layer");
    assert_eq!((used.rows, used.dim), (1_114_112, 1));
    assert!(used.used_rows < used.rows / 2, "{used:?}");
    // The kernel's geometry group carries the same shares.
    let k = &s.kernels[0];
    let kg = &k.groups[0];
    assert!((kg.pct_of_peak_bw.unwrap() - want_pct).abs() < 0.1);
    assert!((kg.ideal_us.unwrap() - want_ideal_us).abs() < 0.01);

    let first = crate::first_cause_op(&s);
    assert_eq!(first.kind, FindingKind::TopOp, "{}", first.text);
    for want in [
        format!("= {} of the NVIDIA H200's 4.80 TB/s", units::pct(pct)),
        format!("at peak {}", units::time_us(ideal)),
        "converts the same [2, 1114112, 1, 128] tensor in every layer of every step".to_string(),
        "gather, then cast".to_string(),
    ] {
        assert!(first.text.contains(&want), "{want:?} not in {}", first.text);
    }
    assert!(s
        .findings
        .iter()
        .any(|f| f.kind == FindingKind::WholeTensor));

    let (_, patched) = run(&DecodeParams {
        variant: Variant::GatherCast,
        ..p.clone()
    });
    assert!(
        patched
            .findings
            .iter()
            .all(|f| f.kind != FindingKind::WholeTensor && !f.text.contains("gather, then cast")),
        "{:?}",
        patched.findings
    );

    // The user's peak wins, and says so.
    let mut json = Vec::new();
    write_decode_trace(&p, &mut json).unwrap();
    let t = read_trace(&json[..], &ReadOptions::default()).unwrap();
    let opts = AnalysisOptions {
        peak_gbps: Some(1800.0),
        ..Default::default()
    };
    let o = analyze(&t, &opts);
    let d = o.device.as_ref().unwrap();
    assert_eq!(
        (d.source, d.peak_gbps),
        (PeakSource::Override, Some(1800.0))
    );
    let g = &o
        .ops
        .iter()
        .find(|o| o.name == "aten::copy_")
        .unwrap()
        .input_shapes[0];
    assert!((g.pct_of_peak_bw.unwrap() - want_pct * 4800.0 / 1800.0).abs() < 0.2);
}
