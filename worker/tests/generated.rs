//! Generated decode traces: whatever the number of steps and layers, the
//! analysis finds the KV-cache cast with the share, calls per step and bytes
//! per call the generator put in (its own accounting, not the analyzer's).

use kinetoscope_types::units;
use worker::generate::{write_decode_trace, DecodeParams, Truth, Variant};
use worker::trace::{read_trace, ReadOptions};
use worker::{analyze, AnalysisOptions, Summary};

fn run(p: &DecodeParams) -> (Truth, Summary) {
    let mut json = Vec::new();
    let truth = write_decode_trace(p, &mut json).unwrap();
    let t = read_trace(&json[..], &ReadOptions::default()).unwrap();
    assert_eq!(t.counters.events, truth.events);
    (truth, analyze(&t, &AnalysisOptions::default()))
}

#[test]
fn cast_finding_matches_the_generator_at_any_size() {
    for (steps, layers, with_stack) in [(1, 1, false), (2, 7, true), (3, 32, false), (5, 78, false), (4, 126, true)] {
        let p = DecodeParams {
            steps,
            layers,
            with_stack,
            ..Default::default()
        };
        let (truth, s) = run(&p);
        let what = format!("{steps} steps x {layers} layers");

        // The op table.
        let copy = s.ops.iter().find(|o| o.name == "aten::copy_").unwrap();
        let share = 100.0 * truth.cast_us / truth.gpu_us;
        assert!((copy.device_pct - share).abs() < 0.5, "{what}: share {} vs {share}", copy.device_pct);
        let cast_group = copy
            .input_shapes
            .iter()
            .find(|g| g.dtypes.contains("Float8_e4m3fn"))
            .unwrap_or_else(|| panic!("{what}: no FP8 shape group"));
        assert_eq!(cast_group.calls, truth.cast_calls, "{what}: cast calls");
        assert_eq!(cast_group.bytes_per_call, Some(truth.cast_bytes_per_call as f64), "{what}: bytes per call");

        // The first finding names the op with its share, calls per step,
        // bytes per call and conversion.
        let f = &s.findings[0];
        assert_eq!(f.kind, "top_op", "{what}: {}", f.text);
        assert_eq!(f.name.as_deref(), Some("aten::copy_"));
        assert!(f.text.contains(&units::pct(copy.device_pct)), "{what}: {}", f.text);
        assert!(f.text.contains(&format!("{layers} calls per step")), "{what}: {}", f.text);
        assert!(f.text.contains(&units::bytes(truth.cast_bytes_per_call as f64)), "{what}: {}", f.text);
        assert!(f.text.contains("Float8_e4m3fn to BFloat16"), "{what}: {}", f.text);

        // Steps and the top kernel's launch chain.
        assert_eq!(s.steps_stats.count as u32, steps, "{what}");
        let mean = truth.mean_step_us();
        assert!((s.steps_stats.mean_us - mean).abs() < 1e-3 * mean, "{what}: mean step");
        let k = &s.kernels[0];
        assert_eq!(k.category, "memory");
        assert_eq!(k.calls as u32, steps * layers);
        let chain = &k.launched_by[0].chain;
        assert_eq!(chain.first().map(String::as_str), Some("ProfilerStep#*"));
        assert_eq!(&chain[chain.len() - 3..], ["aten::to", "aten::_to_copy", "aten::copy_"], "{what}");
    }
}

#[test]
fn the_patch_moves_fewer_bytes_per_cast() {
    let p = DecodeParams {
        steps: 2,
        layers: 10,
        variant: Variant::GatherCast,
        with_stack: false,
        ..Default::default()
    };
    let (truth, s) = run(&p);
    let copy = s.ops.iter().find(|o| o.name == "aten::copy_").unwrap();
    let g = copy.input_shapes.iter().find(|g| g.dtypes.contains("Float8_e4m3fn")).unwrap();
    assert_eq!(g.bytes_per_call, Some(truth.cast_bytes_per_call as f64));
    // The gather of the FP8 cache (the embedding's index_select is another group).
    let gather = s.ops.iter().find(|o| o.name == "aten::index_select").unwrap();
    let g = gather.input_shapes.iter().find(|g| g.dtypes.contains("Float8_e4m3fn")).unwrap();
    assert!((g.self_device_us - truth.gather_us).abs() < 0.01, "{} vs {}", g.self_device_us, truth.gather_us);
}
