//! Layers and diffs on generated baseline/patch pairs and on shared traces.

use kinetoscope_generate::{write_decode_trace, DecodeParams, Truth, Variant};
use kinetoscope_trace::diff::{diff, Side};
use kinetoscope_trace::import::{read_trace, read_trace_file, ReadOptions};
use kinetoscope_trace::{analyze, AnalysisOptions, Summary};
use std::path::PathBuf;

fn run(p: &DecodeParams, opts: &AnalysisOptions) -> (Truth, Summary) {
    let mut json = Vec::new();
    let truth = write_decode_trace(p, &mut json).unwrap();
    let t = read_trace(&json[..], &ReadOptions::default()).unwrap();
    (truth, analyze(&t, opts))
}

fn pct_change(a: f64, b: f64) -> f64 {
    100.0 * (b - a) / a
}

#[test]
fn diff_reports_what_the_generator_put_in() {
    for (steps, layers, with_stack) in
        [(2, 8, false), (3, 32, false), (2, 78, true), (5, 78, false)]
    {
        let base = DecodeParams {
            steps,
            layers,
            with_stack,
            ..Default::default()
        };
        let patch = DecodeParams {
            variant: Variant::GatherCast,
            ..base.clone()
        };
        let (ta, sa) = run(&base, &AnalysisOptions::default());
        let (tb, sb) = run(&patch, &AnalysisOptions::default());
        let what = format!("{steps} x {layers}, stack {with_stack}");

        // Layers: the count, by the method the trace allows.
        for s in [&sa, &sb] {
            assert_eq!(
                s.layers.count, layers as u64,
                "{what}: {} ({})",
                s.layers.method, s.layers.detail
            );
            assert_eq!(
                s.layers.method.as_str(),
                if with_stack { "module" } else { "repetition" },
                "{what}"
            );
            // The cast is in every layer; little is outside the layers.
            assert!(s.layers.items.iter().all(|l| l
                .by_category
                .get("memory")
                .copied()
                .unwrap_or(0.0)
                > 0.0));
            let inside: f64 = s.layers.items.iter().map(|l| l.device_us).sum();
            assert!(
                s.layers.outside.device_us < 0.05 * inside,
                "{what}: outside {}",
                s.layers.outside.device_us
            );
        }
        if !with_stack {
            // GPU ops per MoE layer after the 3 dense ones.
            assert_eq!(sa.layers.period, Some(78), "{what}: GPU ops per layer");
            assert_eq!(
                sb.layers.period,
                Some(79),
                "{what}: the patch adds the gather"
            );
        }

        let d = diff(
            &Side {
                id: "a",
                name: "baseline",
                summary: &sa,
            },
            &Side {
                id: "b",
                name: "patch",
                summary: &sb,
            },
        );
        assert_eq!(d.basis, kinetoscope_types::DiffBasis::PerStep);
        let step_change = pct_change(ta.mean_step_us(), tb.mean_step_us());
        assert!(
            (d.steps.change_pct - step_change).abs() < 1.0,
            "{what}: step {} vs {step_change}",
            d.steps.change_pct
        );
        let copy = d.ops.iter().find(|r| r.name == "aten::copy_").unwrap();
        // aten::copy_ also runs the other (unchanged) copies: its change per
        // step is the cast's.
        let cast_delta = (tb.cast_us - ta.cast_us) / steps as f64;
        assert!(
            (copy.delta_us - cast_delta).abs() < 0.01 * cast_delta.abs(),
            "{what}: cast {} vs {cast_delta}",
            copy.delta_us
        );
        assert!(
            d.findings[0].text.starts_with("step time -"),
            "{what}: {}",
            d.findings[0].text
        );
        assert!(
            d.findings
                .iter()
                .any(|f| f.text.starts_with("aten::copy_ self device time -9")),
            "{what}: {:?}",
            d.findings
        );
        // The signature that carries the change: the FP8 -> BF16 cast, with
        // its bytes per call before and after.
        let sig = d
            .findings
            .iter()
            .find(|f| {
                f.text
                    .starts_with("aten::copy_ (Float8_e4m3fn -> BFloat16) self device time -9")
            })
            .unwrap_or_else(|| panic!("{what}: {:?}", d.findings));
        assert!(
            sig.text.contains(&format!(
                "{} -> ",
                kinetoscope_types::units::bytes(ta.cast_bytes_per_call as f64)
            )),
            "{}",
            sig.text
        );
        // And its share of the H200's peak bandwidth before and after: the
        // whole pool at 1.03 TB/s, then the gathered part at about 3 TB/s.
        let share = |s: &kinetoscope_trace::Summary| {
            s.ops
                .iter()
                .find(|o| o.name == "aten::copy_")
                .unwrap()
                .input_shapes[0]
                .pct_of_peak_bw
                .unwrap()
        };
        let (pa, pb) = (share(&sa), share(&sb));
        assert!(pb > pa, "{what}: {pa} -> {pb}");
        assert!(
            sig.text.contains(&format!(
                "{} -> {} of the NVIDIA H200's peak bandwidth",
                kinetoscope_types::units::pct(pa),
                kinetoscope_types::units::pct(pb)
            )),
            "{}",
            sig.text
        );
        assert!(
            d.added_kernels
                .iter()
                .any(|k| k.contains("indexSelectLargeIndex")),
            "{what}: the gather is new"
        );
        assert_eq!(d.layers.len(), layers as usize);
        assert!(
            d.layers.iter().all(|l| l.delta_us < 0.0),
            "{what}: every layer got faster"
        );
    }
}

#[test]
fn layer_annotations_win_and_overrides_apply() {
    let p = DecodeParams {
        steps: 2,
        layers: 6,
        with_stack: true,
        layer_annotations: true,
        ..Default::default()
    };
    let (_, s) = run(&p, &AnalysisOptions::default());
    assert_eq!(
        (s.layers.method.as_str(), s.layers.count),
        ("annotation", 6)
    );

    // A marker: the rotary kernel starts a "layer" (shifted, same count).
    let (_, s) = run(
        &DecodeParams {
            layer_annotations: false,
            with_stack: false,
            ..p.clone()
        },
        &AnalysisOptions {
            layer_marker: Some("vllm::rotary_embedding_kernel".into()),
            layer_period: None,
            ..Default::default()
        },
    );
    assert_eq!((s.layers.method.as_str(), s.layers.count), ("override", 6));
    // An op higher up the launch chain marks the same layers.
    let (_, s) = run(
        &DecodeParams {
            layer_annotations: false,
            with_stack: false,
            ..p.clone()
        },
        &AnalysisOptions {
            layer_marker: Some("_C::rotary_embedding".into()),
            layer_period: None,
            ..Default::default()
        },
    );
    assert_eq!((s.layers.method.as_str(), s.layers.count), ("override", 6));
    // A period of half an MoE layer doubles the count (all dense: 0 MoE).
    let (_, s) = run(
        &DecodeParams {
            layer_annotations: false,
            with_stack: false,
            dense_layers: 0,
            ..p
        },
        &AnalysisOptions {
            layer_marker: None,
            layer_period: Some(39),
            ..Default::default()
        },
    );
    assert_eq!(s.layers.method.as_str(), "override");
    assert_eq!(s.layers.count, 12);
}

fn shared(name: &str) -> Summary {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/traces")
        .join(name);
    analyze(
        &read_trace_file(&p, &ReadOptions::default()).unwrap(),
        &AnalysisOptions::default(),
    )
}

#[test]
fn shared_llm_traces_have_plausible_layers() {
    for (name, layers, method) in [
        (
            "tracelens-h100-qwen1.5-0.5b-chat-infer.json.gz",
            24,
            "module",
        ),
        (
            "tracelens-mi300x-qwen1.5-0.5b-chat-infer.json.gz",
            24,
            "module",
        ),
        (
            "tracelens-mi300x-sglang-qwen3-8b-prefilldecode.json.gz",
            36,
            "module",
        ),
        (
            "tracelens-mi300x-vllm-prefilldecode-graph-replay.json.gz",
            24,
            "repetition",
        ),
        // Its `BertLayer` frames (a `LayerNorm` class, with more
        // instances, is no layer class).
        ("tracelens-h100-bert-small-infer.json.gz", 4, "module"),
        // OWLv2: 24 vision and 12 text `Owlv2EncoderLayer`s; its one
        // `ProfilerStep` runs the model five times, which the layers
        // were once taken to be.
        ("tracelens-h100-owlv2-large-infer.json.gz", 36, "module"),
    ] {
        let s = shared(name);
        assert_eq!(
            (s.layers.method.as_str(), s.layers.count),
            (method, layers),
            "{name}: {}",
            s.layers.detail
        );
        assert!(s.layers.confidence > 0.5);
    }
}

#[test]
fn unrelated_traces_diff_with_sensible_lists() {
    let a = shared("tracelens-h100-qwen1.5-0.5b-chat-infer.json.gz");
    let b = shared("tracelens-mi300x-qwen1.5-0.5b-chat-infer.json.gz");
    let d = diff(
        &Side {
            id: "a",
            name: "h100",
            summary: &a,
        },
        &Side {
            id: "b",
            name: "mi300x",
            summary: &b,
        },
    );
    // Same model: the ops match by name; different vendors: the kernels do not.
    assert!(d
        .ops
        .iter()
        .any(|r| r.name == "aten::mm" && r.matched_by == kinetoscope_types::MatchedBy::Name));
    assert!(
        d.added_kernels.iter().any(|k| k.starts_with("Cijk_")),
        "AMD GEMMs are new"
    );
    assert!(
        d.removed_kernels.iter().any(|k| k.starts_with("sm90_")),
        "NVIDIA GEMMs are gone"
    );
    for k in &d.added_kernels {
        assert!(!a.kernels.iter().any(|x| &x.name == k));
    }
    let c = shared("hta-cpu-only-rank34of300.json.gz");
    let d = diff(
        &Side {
            id: "a",
            name: "gpu",
            summary: &a,
        },
        &Side {
            id: "c",
            name: "cpu",
            summary: &c,
        },
    );
    assert!(d.kernels.is_empty() && d.added_kernels.is_empty());
    assert_eq!(d.removed_kernels.len(), a.kernels.len());
}
