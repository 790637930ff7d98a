//! Real captures of real engines (`../shared/traces/torch-h200-*`, torch
//! 2.11 on an NVIDIA H200, with the model's truth beside each in
//! `torch/`): steps when the GPU lags the CPU, graph replays, and shares.

use crate::family::{shared, window};
use kinetoscope_trace::import::{read_trace_file, ReadOptions};
use kinetoscope_trace::{analyze, AnalysisOptions};
use kinetoscope_types::Summary;
use serde_json::Value;
use std::io::Read;

fn summary_of(path: &std::path::Path) -> Summary {
    let t = read_trace_file(path, &ReadOptions::default()).unwrap();
    analyze(&t, &AnalysisOptions::default())
}

/// A shared trace's events with its step marks taken out, as
/// `model.generate()` profiled without a schedule writes them.
fn unmarked_events(name: &str) -> Vec<Value> {
    events(name)
        .into_iter()
        .filter(|e| {
            !e["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("ProfilerStep"))
        })
        .collect()
}

/// The summary of a trace made of `events`.
pub(crate) fn summary_of_events(events: Vec<Value>) -> Summary {
    let doc = serde_json::json!({ "traceEvents": events });
    let t = kinetoscope_trace::import::read_trace(
        &serde_json::to_vec(&doc).unwrap()[..],
        &ReadOptions::default(),
    )
    .unwrap();
    analyze(&t, &AnalysisOptions::default())
}

/// A shared H200 capture's file name, its model's layers (its truth
/// beside it) and its summary with its step marks.
fn with_truth(capture: &str) -> (String, u64, Summary) {
    let name = format!("{capture}.json.gz");
    let truth: Value = serde_json::from_slice(
        &std::fs::read(shared(&format!("torch/{capture}.truth.json"))).unwrap(),
    )
    .unwrap();
    let marked = summary_of(&shared(&name));
    (name, truth["layers"].as_u64().unwrap(), marked)
}

fn events(name: &str) -> Vec<Value> {
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(shared(name)).unwrap())
        .read_to_end(&mut json)
        .unwrap();
    let v: Value = serde_json::from_slice(&json).unwrap();
    v["traceEvents"].as_array().unwrap().clone()
}

/// A hybrid replayed as one CUDA graph per step: the CPU range of a step
/// is 1.2 ms, its GPU work 16.7 ms. Each step's time is within 10% of its
/// GPU-side span (torch's `gpu_user_annotation` of the step), the graph is
/// one op-table row whatever the step number, and the GPU ops launched
/// before the window are not "eager between the graphs".
#[test]
fn a_graph_replayed_decode_takes_its_gpu_time_per_step() {
    let name = "torch-h200-decode-hybrid-graph-48l.json.gz";
    let s = summary_of(&shared(name));
    let gpu_spans: Vec<f64> = {
        let mut v: Vec<(f64, f64)> = events(name)
            .iter()
            .filter(|e| {
                e["cat"] == "gpu_user_annotation"
                    && e["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("ProfilerStep#"))
            })
            .map(|e| (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap()))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v.into_iter().map(|(_, d)| d).collect()
    };
    assert_eq!(gpu_spans.len(), 6);
    assert_eq!(s.steps.len(), 6);
    for (r, want) in s.steps.iter().zip(&gpu_spans) {
        assert!(
            (r.time() - want).abs() <= 0.1 * want,
            "{}: {} µs against a GPU-side span of {want} µs",
            r.name,
            r.time()
        );
        assert!(r.cpu_us < 0.2 * want, "{}: the CPU range is short", r.name);
        assert!(r.gpu_end_us.is_some());
    }
    let mean = gpu_spans.iter().sum::<f64>() / 6.0;
    assert!((s.steps_stats.mean_us - mean).abs() <= 0.1 * mean);
    // One row for the graph, as torch prints its steps.
    let replays: Vec<&str> = s
        .ops
        .iter()
        .filter(|o| o.name.starts_with("graph replay:"))
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(replays, ["graph replay: ProfilerStep#*"]);
    let row = s.ops.iter().find(|o| o.name == replays[0]).unwrap();
    assert_eq!(row.calls, 6);
    // Launched before the window: neither eager nor a replay's.
    assert!(s.graphs.unlaunched_us > 10_000.0, "{:?}", s.graphs);
    assert!(
        s.graphs.eager_us < 0.05 * s.gpu_time.gpu_op_us,
        "{:?}",
        s.graphs
    );
    assert!(!s
        .findings
        .iter()
        .any(|f| f.text.contains("eagerly between")));
}

/// No finding on any shared trace states a share over 100% ("waits 1416.8%
/// of step time" on the hybrid graph capture before).
#[test]
fn no_finding_states_a_share_over_100_percent() {
    assert_eq!(
        crate::family::shares("a 12.5% share, +140% change, 3x"),
        [12.5]
    );
    let dir = shared("");
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if !p.to_string_lossy().ends_with(".json.gz") {
            continue;
        }
        let s = summary_of(&p);
        for f in &s.findings {
            for v in crate::family::shares(&f.text) {
                assert!(v <= 100.0 + 1e-9, "{}: {}", p.display(), f.text);
            }
            assert!(
                f.impact_pct <= 100.0 + 1e-9,
                "{}: impact {} of {}",
                p.display(),
                f.impact_pct,
                f.text
            );
        }
        if s.steps.len() > 1 {
            crate::expected::step_times_hold(&p.display().to_string(), &s);
        }
    }
}

/// Layers on every real H200 capture match the model's truth: the count,
/// and the kinds where the truth lists them (`dense`, `moe`, `linear` for a
/// hybrid's linear-mixer layers, whatever their MLP). Each capture stands
/// for one way real engines run a model:
/// - eager decodes with named attention (the story's 78 layers, 3 dense
///   then MoE; 12 interleaved with Python frames and memory);
/// - a hybrid replayed as a CUDA graph, whose linear mixers and experts are
///   plain GEMMs and elementwise kernels: cut by its norms
///   (`repeats::Key::NormPairs`);
/// - `torch.compile`, whose fused norms are numbered per site
///   (`names::kernel_family`);
/// - a training step, each layer forward and then backward in reverse
///   (`repeats::Split::backward`).
#[test]
fn layers_match_the_truth_on_every_h200_capture() {
    let captures: Vec<_> = crate::family::H200
        .iter()
        .map(|c| crate::family::read_h200(c))
        .collect();
    let bad = crate::family::h200_wrong(&captures);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// CUDA-graph kernel annotations as torch 2.15 writes them
/// (`export_chrome_trace(..., cuda_graph_annotations=...)`: the annotation's
/// fields spliced into a graphed kernel's args beside its `graph node id`,
/// and `cudaGraphInlineAnnotated` in the envelope), here as torchtitan's
/// module profiler records them (`{"name": "block::layers.N",
/// "module_fqn": "layers.N", ...}`), spliced into the real H200 hybrid
/// graph capture's replayed kernels. Each replay's kernels are cut into 12
/// annotated blocks, which no repetition would find (the model has 48
/// layers): the layers are read from the annotations, and each layer's
/// time is its kernels'.
#[test]
fn graph_kernel_annotations_name_the_layers() {
    let name = "torch-h200-decode-hybrid-graph-48l.json.gz";
    let mut ev = events(name);
    let launches: std::collections::HashSet<i64> = ev
        .iter()
        .filter(|e| e["name"] == "cudaGraphLaunch")
        .filter_map(|e| e["args"]["correlation"].as_i64())
        .collect();
    let mut by_replay: std::collections::BTreeMap<i64, Vec<usize>> = Default::default();
    for (i, e) in ev.iter().enumerate() {
        if e["cat"] == "kernel" {
            if let Some(c) = e["args"]["correlation"]
                .as_i64()
                .filter(|c| launches.contains(c))
            {
                by_replay.entry(c).or_default().push(i);
            }
        }
    }
    assert!(by_replay.len() >= 5, "{} replays", by_replay.len());
    let mut want = [0.0f64; 12];
    for kernels in by_replay.values() {
        for (k, &i) in kernels.iter().enumerate() {
            let layer = k * 12 / kernels.len();
            want[layer] += ev[i]["dur"].as_f64().unwrap();
            let args = ev[i]["args"].as_object_mut().unwrap();
            args.insert("graph node id".into(), (1000 + k).into());
            // An escaped character, as `json.dumps` may write one.
            args.insert("name".into(), format!("block::layers.{layer} \"x\"").into());
            args.insert("module_fqn".into(), format!("layers.{layer}").into());
            args.insert("module_kind".into(), "block".into());
            args.insert("model_part_idx".into(), "0".into());
        }
    }
    let json = serde_json::to_vec(&serde_json::json!({
        "cudaGraphInlineAnnotated": true,
        "traceEvents": ev,
    }))
    .unwrap();
    let t = kinetoscope_trace::import::read_trace(&json[..], &ReadOptions::default()).unwrap();
    let s = analyze(&t, &AnalysisOptions::default());
    let l = &s.layers;
    assert_eq!(
        l.method,
        kinetoscope_types::LayerMethod::Annotation,
        "{}",
        l.detail
    );
    assert_eq!(l.count, 12, "{}", l.detail);
    assert!(l.detail.contains("block::layers."), "{}", l.detail);
    // Inside the graph, each kernel's time is told by the annotation it was
    // recorded under: its launch chains end in it.
    let mut inside = std::collections::BTreeSet::new();
    for k in &s.kernels {
        for c in &k.launched_by {
            if let Some(last) = c.chain.last().filter(|n| n.starts_with("in graph: ")) {
                assert_eq!(c.launch, "cudaGraphLaunch", "{c:?}");
                inside.insert(last.clone());
            }
        }
    }
    assert_eq!(inside.len(), 12, "{inside:?}");
    assert!(
        inside.contains("in graph: block::layers.3 \"x\""),
        "{inside:?}"
    );
    let total: f64 = want.iter().sum();
    let got_total: f64 = l.items.iter().map(|r| r.device_us).sum();
    for (r, w) in l.items.iter().zip(want) {
        let (got, want) = (r.device_us / got_total, w / total);
        assert!(
            (got - want).abs() < 0.01,
            "layer {}: {got:.4} of the time, want {want:.4}",
            r.index
        );
    }
    // Without the annotations, the same capture has its 48 layers.
    assert_eq!(summary_of(&shared(name)).layers.count, 48);
}

/// An SGLang capture whose window is twice its one step (493 ms of GPU
/// work in a 494 ms step, 987 ms profiled): the idle sentence says the idle
/// time lies outside the step, and ranks by the idle time within it; and a
/// training loop whose only repeating outermost annotation is the data
/// loader's wait (no launch inside) has no steps made of it.
#[test]
fn idle_outside_the_steps_and_data_loader_waits_are_said_as_such() {
    let s = summary_of(&shared(
        "tracelens-mi300x-sglang-qwen3-8b-prefilldecode.json.gz",
    ));
    let idle = s
        .findings
        .iter()
        .find(|f| f.kind == kinetoscope_types::FindingKind::GpuIdle)
        .expect("an idle finding");
    assert!(
        idle.text.contains("outside the steps") && idle.text.contains("busy 99.8%"),
        "{}",
        idle.text
    );
    assert!(idle.impact_pct < 1.0, "{}: {}", idle.impact_pct, idle.text);
    let s = summary_of(&shared("param-resnet-rtx2080ti.json.gz"));
    assert!(
        !s.steps_stats.source.contains("DataLoader"),
        "{}",
        s.steps_stats.source
    );
}

/// A softmax is eager attention's scores only where its op says so and a
/// norm runs before it: a classifier's loss (`aten::_log_softmax`) runs
/// the same kernel (`softmax_warp_forward`), once an iteration of PARAM's
/// ResNet training loop (no step marks), which its 30 iterations made 30
/// layers; PARAM's linear model ends in a softmax of its own and runs no
/// norm, and its 40 iterations made 40.
#[test]
fn a_loss_softmax_is_no_attention() {
    for name in ["param-resnet-rtx2080ti", "param-linear-rtx2080ti"] {
        let s = summary_of(&shared(&format!("{name}.json.gz")));
        assert_eq!(s.layers.count, 0, "{name}: {}", s.layers.detail);
    }
}

/// The H200 captures with their step marks taken out (`model.generate()`
/// profiled without a schedule writes no `ProfilerStep`): each forward
/// pass is a step, as many as the marks made, as long on average (within
/// 2%), with the model's layers. The story's capture said 498 layers and
/// no steps: its first GPU ops are the end of a step launched before the
/// window, so its sequence starts inside a pass, and its embedding's
/// kernel gathers the KV cache in every layer too (`layers::anchored`).
/// Opened 15% and 40% into the window (every event before the cut taken
/// out), the whole passes after the cut are the steps, the one cut into
/// none (the compiled capture opened inside a pass said 7 layers of 8).
/// The hybrid replays its graphs 100 ms behind the CPU, so a cut takes out
/// every launch: it is checked whole only.
#[test]
fn traces_without_step_marks_have_their_passes_as_steps() {
    for (capture, cuts) in [
        ("torch-h200-decode-fp8cast-78l-5xpool", &[0.15, 0.4][..]),
        ("torch-h200-decode-gathercast-78l-5xpool", &[0.15, 0.4]),
        ("torch-h200-decode-compiled-8l", &[0.15, 0.4]),
        ("torch-h200-decode-stack-memory-12l", &[0.15, 0.4]),
        ("torch-h200-decode-hybrid-graph-48l", &[]),
    ] {
        let (name, layers, marked) = with_truth(capture);
        let all = unmarked_events(&name);
        let s = summary_of_events(all.clone());
        let what = |s: &Summary| format!("{capture}: {} steps; {}", s.steps.len(), s.layers.detail);
        assert_eq!(s.steps_stats.source, "forward passes", "{}", what(&s));
        assert_eq!(s.steps.len(), marked.steps.len(), "{}", what(&s));
        assert_eq!(s.layers.passes as usize, s.steps.len(), "{}", what(&s));
        assert_eq!(s.layers.count, layers, "{}", what(&s));
        let mean = s.steps_stats.mean_us / marked.steps_stats.mean_us;
        assert!(
            (0.98..=1.02).contains(&mean),
            "{}: mean {mean:.3} of the marked steps'",
            what(&s)
        );
        let ts = |e: &Value| e["ts"].as_f64();
        let (t0, t1) =
            all.iter()
                .filter(|e| e["ph"] == "X")
                .fold((f64::MAX, f64::MIN), |(a, b), e| {
                    let s = ts(e).unwrap_or(a);
                    (a.min(s), b.max(s + e["dur"].as_f64().unwrap_or(0.0)))
                });
        for &at in cuts {
            let cut = t0 + at * (t1 - t0);
            let s = summary_of_events(
                all.iter()
                    .filter(|e| !ts(e).is_some_and(|s| s < cut))
                    .cloned()
                    .collect(),
            );
            let what = format!("opened {at} in: {}", what(&s));
            assert!(s.layers.passes >= 2, "{what}");
            assert!(s.steps.len() < marked.steps.len(), "{what}");
            assert_eq!(s.layers.passes as usize, s.steps.len(), "{what}");
            assert_eq!(s.layers.count, layers, "{what}");
            // No step is a pass the cut took the start of.
            let least = s.steps.iter().map(|r| r.time_us).fold(f64::MAX, f64::min);
            assert!(
                least > 0.8 * marked.steps_stats.mean_us.min(s.steps_stats.mean_us),
                "{what}: a step of {least:.0} µs"
            );
        }
    }
}

/// A profile without step marks opened inside a pass and closed inside
/// the next one, with one whole pass between: that pass is the one step,
/// with the model's layers, as long as a marked step (within 2%: it is
/// one of them). The story said 111 and 157 layers, and 3 layers in 2
/// passes where it closed at its end, the gather-then-cast patch 127, and
/// 3 layers in 2 passes; the 12-layer capture without its frames 23 and
/// 24 (`layers::anchored`'s lone pass, `analysis::anchored_steps`).
#[test]
fn a_window_holding_one_whole_pass_has_that_pass_as_its_step() {
    for (capture, from, to) in [
        ("torch-h200-decode-fp8cast-78l-5xpool", 0.1, 0.4),
        ("torch-h200-decode-fp8cast-78l-5xpool", 0.55, 0.9),
        ("torch-h200-decode-fp8cast-78l-5xpool", 0.6, 1.0),
        ("torch-h200-decode-gathercast-78l-5xpool", 0.1, 0.4),
        ("torch-h200-decode-gathercast-78l-5xpool", 0.3, 0.7),
        ("torch-h200-decode-stack-memory-12l", 0.2, 0.6),
        ("torch-h200-decode-stack-memory-12l", 0.3, 0.8),
    ] {
        let (name, layers, marked) = with_truth(capture);
        let s = summary_of_events(window(&events(&name), from, to));
        let what = format!(
            "{capture} from {from} to {to}: {} steps; {}",
            s.steps.len(),
            s.layers.detail
        );
        assert_eq!(s.steps.len(), 1, "{what}");
        assert_eq!(s.layers.passes, 1, "{what}");
        assert_eq!(s.steps_stats.source, "forward passes", "{what}");
        assert_eq!(s.layers.count, layers, "{what}");
        let step = s.steps[0].time_us;
        assert!(
            marked
                .steps
                .iter()
                .any(|m| (step / m.time_us - 1.0).abs() <= 0.02),
            "{what}: a step of {step:.0} µs"
        );
    }
}

/// A window holding one whole pass between two cut ones: the cast runs 78
/// times in its step, as in the marked trace, though the window holds 112
/// casts in all (the cut passes' are outside the step). The findings said
/// "112 calls per step".
#[test]
fn a_windows_calls_per_step_count_the_calls_inside_its_steps() {
    let capture = "torch-h200-decode-fp8cast-78l-5xpool";
    let (name, _, _) = with_truth(capture);
    let all = events(&name);
    for (from, to) in [(0.1, 0.4), (0.55, 0.9)] {
        let s = summary_of_events(window(&all, from, to));
        let cast = s
            .findings
            .iter()
            .find(|f| f.text.starts_with("aten::copy_"))
            .unwrap_or_else(|| panic!("{capture} from {from} to {to}: no cast finding"));
        assert!(
            cast.text.contains(": 78 calls per step,"),
            "{capture} from {from} to {to}: {}",
            cast.text
        );
    }
}

/// Without its step mark, a trace whose first GPU ops were launched before
/// the profile opened (436 kernels, about 10 layers, of Qwen1.5-0.5B's
/// step before the window) has the layers of the pass it saw whole: its
/// one sequence starts at the first GPU op launched in the profile. It
/// said 34 and 35 layers of 24. The pieces a layer's names cut the one
/// pass into are no passes, though the layers' module names number them
/// (`layers::holds_passes`: it said 24 passes of one layer each).
#[test]
fn gpu_ops_launched_before_the_window_are_not_layers_of_an_unmarked_trace() {
    for name in [
        "tracelens-h100-qwen1.5-0.5b-chat-infer.json.gz",
        "tracelens-mi300x-qwen1.5-0.5b-chat-infer.json.gz",
    ] {
        let marked = summary_of(&shared(name));
        assert_eq!(marked.layers.count, 24, "{name}: {}", marked.layers.detail);
        let events = unmarked_events(name);
        let s = summary_of_events(events);
        assert_eq!(s.layers.passes, 0, "{name}: {}", s.layers.detail);
        assert_eq!(
            s.layers.count,
            24,
            "{name}: {} steps ({}); {}",
            s.steps.len(),
            s.steps_stats.source,
            s.layers.detail
        );
    }
}

/// A shared capture's events with its step marks taken out and new ones
/// put around its passes, as `model.generate()` inside a profiler step
/// writes them ([`crate::captures::regrouped`]).
fn regrouped_events(name: &str, per: Option<usize>, frames: bool) -> Vec<Value> {
    let doc = serde_json::json!({ "traceEvents": events(name) });
    let mut doc = crate::captures::regrouped(&doc, per, frames);
    std::mem::take(doc["traceEvents"].as_array_mut().unwrap())
}

/// Profiler steps around several forward passes each (`generate()`, or a
/// loop of decodes, inside each `ProfilerStep`): where no module frames
/// tell the layers, the passes are the steps, as in a trace without step
/// marks. In one step, the H200 story said 468 layers (six passes of 78),
/// the compiled decode 32 of 8; in two steps of three passes, the story
/// said 234. Where the module frames tell the layers, the marked step
/// stands; a training step, one a mark, stands.
#[test]
fn steps_that_run_the_forward_pass_several_times_have_their_passes_as_steps() {
    for (capture, per) in [
        ("torch-h200-decode-fp8cast-78l-5xpool", None),
        ("torch-h200-decode-fp8cast-78l-5xpool", Some(3)),
        ("torch-h200-decode-compiled-8l", None),
        ("torch-h200-decode-stack-memory-12l", None),
        ("torch-h200-decode-hybrid-graph-48l", None),
        ("torch-h200-decode-hybrid-graph-48l", Some(2)),
    ] {
        let (name, layers, marked) = with_truth(capture);
        let s = summary_of_events(regrouped_events(&name, per, false));
        let what = format!(
            "{capture} ({per:?} a step): {} steps; {}",
            s.steps.len(),
            s.layers.detail
        );
        assert_eq!(s.steps_stats.source, "forward passes", "{what}");
        assert_eq!(s.steps.len(), marked.steps.len(), "{what}");
        assert_eq!(s.layers.passes as usize, s.steps.len(), "{what}");
        assert_eq!(s.layers.count, layers, "{what}");
        let told = match per {
            None => "the trace's one step, ProfilerStep#0, runs".to_string(),
            Some(k) => format!(
                "the trace's {} steps (ProfilerStep#0, ...) run",
                marked.steps.len() / k
            ),
        };
        assert!(s.layers.detail.starts_with(&told), "{what}");
        let mean = s.steps_stats.mean_us / marked.steps_stats.mean_us;
        assert!(
            (0.98..=1.02).contains(&mean),
            "{what}: mean {mean:.3} of the marked steps'"
        );
    }
    let name = "torch-h200-decode-stack-memory-12l.json.gz";
    let s = summary_of_events(regrouped_events(name, None, true));
    assert_eq!(s.steps.len(), 1, "{}", s.layers.detail);
    assert_eq!(s.layers.count, 12, "{}", s.layers.detail);
    assert_eq!(s.layers.passes, 0, "{}", s.layers.detail);
    let name = "torch-h200-train-gpt6.json.gz";
    let s = summary_of_events(regrouped_events(name, Some(1), false));
    assert_eq!(s.steps.len(), 3, "{}", s.layers.detail);
    assert_eq!(s.layers.passes, 0, "{}", s.layers.detail);
    assert_ne!(
        s.steps_stats.source, "forward passes",
        "{}",
        s.layers.detail
    );
}

/// OWLv2's step runs its forward pass five times; each pass runs a vision
/// tower of 24 layers, then a text tower of 12. Without its Python frames
/// (which tell all 36), its vision layers end their MLP with `quick_gelu`,
/// a sigmoid and two multiplies, and no MLP activation name: a sigmoid is
/// a block's part too (`names::Role::Gate`). It said 5 layers (the
/// passes), in one step or without step marks.
#[test]
fn a_step_of_five_owlv2_passes_without_frames_has_the_vision_layers_of_each() {
    let name = "tracelens-h100-owlv2-large-infer.json.gz";
    let marked: Vec<Value> = events(name)
        .into_iter()
        .filter(|e| e["cat"] != "python_function")
        .collect();
    let unmarked: Vec<Value> = unmarked_events(name)
        .into_iter()
        .filter(|e| e["cat"] != "python_function")
        .collect();
    for (what, events) in [("marked", marked), ("unmarked", unmarked)] {
        let s = summary_of_events(events);
        let what = format!("{what}: {} steps; {}", s.steps.len(), s.layers.detail);
        assert_eq!(s.steps_stats.source, "forward passes", "{what}");
        assert_eq!(s.steps.len(), 5, "{what}");
        assert_eq!(s.layers.count, 24, "{what}");
    }
}

/// A diffusion pipeline (xDiT's SD3.5 on an MI300X) runs, in its one
/// marked step, two CLIP towers, its transformer once a denoising step
/// (four calls of one graph `torch.compile` made, 38 blocks each), then
/// its VAE. No name runs once a denoising step outside the graph, so only
/// the graph's calls tell the passes: each call is a step of 38 layers,
/// marked or not. It said 0 layers, one step of 1.2 s. Without the calls'
/// ranges the passes are not told (the rule reads them, not the kernels).
#[test]
fn a_compiled_graph_called_once_a_denoising_step_has_its_calls_as_steps() {
    let name = "tracelens-mi300x-xdit-sd3.5-infer.json.gz";
    let no_calls: Vec<Value> = events(name)
        .into_iter()
        .filter(|e| {
            !e["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("## Call CompiledFxGraph"))
        })
        .collect();
    for (what, events) in [
        ("marked", events(name)),
        ("unmarked", unmarked_events(name)),
    ] {
        let s = summary_of_events(events);
        let what = format!("{what}: {} steps; {}", s.steps.len(), s.layers.detail);
        assert_eq!(s.steps_stats.source, "forward passes", "{what}");
        assert_eq!(s.steps.len(), 4, "{what}");
        assert_eq!(s.layers.count, 38, "{what}");
        for step in &s.steps {
            // Each call's CPU range is 247-249 ms; its GPU work 233-247 ms.
            assert!((200e3..260e3).contains(&step.wall_us), "{what}: {step:?}");
        }
    }
    let s = summary_of_events(no_calls);
    assert_eq!(
        (s.steps.len(), s.layers.count),
        (1, 0),
        "{}",
        s.layers.detail
    );
}
