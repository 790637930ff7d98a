//! The real-capture family (`worker/trace/tests/captures/`, made by
//! `make captures`: `python/captures/capture.py`, torch 2.15 on this
//! machine's CPU): seven architectures (dense, MoE, interleaved, hybrid,
//! DSA, local/global, unfused MLPs) in five execution modes (eager,
//! `torch.compile` default and `reduce-overhead`, an engine loop marked by
//! `record_function("execute_model")` with a prefill and then decodes, and
//! training), with and without `with_stack` and `profile_memory`, each
//! with torch's `key_averages()` and the model's truth beside it. Torch is
//! not needed here. Three draws of the family: seed 41 at the top, and
//! seeds 7 and 23 in `seed7/` and `seed23/` (`make captures-seeds`),
//! captured after the layer rules had been fitted to seed 41: before the
//! layer changes of 2026-12-05, 6 and 10 of their 35 captures had wrong
//! layers (training steps, `torch.compile`, an interleaved model's last
//! layer); now none.
//!
//! Checked on every capture: the steps (count, and the prefill of an
//! engine loop), the layers and their kinds, the FP8 -> BF16 casts per
//! step, torch's `key_averages()` (calls exactly, self CPU within 2%), and
//! that no finding states a share over 100%. What does not hold yet is
//! listed in [`KNOWN`], each with why; a capture that starts to pass a
//! check listed there fails the test too, so the list stays true.

// Shared by the `it` and `margins` test binaries: each uses a part.
#![allow(dead_code)]

use kinetoscope_trace::import::store::Trace;
use kinetoscope_trace::import::{read_trace_file, ReadOptions};
use kinetoscope_trace::{analyze, AnalysisOptions};
use kinetoscope_types::{StepKind, Summary};
use serde_json::Value;
use std::path::PathBuf;

/// (capture name prefix, check) pairs that do not hold yet:
/// - `layers` of the hybrid under `torch.compile` on the CPU: Inductor
///   inlines its linear mixer (the custom op becomes `sigmoid`, `cumsum`,
///   `tanh` and GEMMs, none with a telling name) and fuses its norms into
///   generated C++ that the profiler does not record, so only the
///   attention layers are told apart: each found layer is four of the
///   model's (three linear, one attention). The dense, MoE, interleaved
///   and DSA compiled captures have their layers: the ops inside
///   `Torch-Compiled Region` are the step's top-level ops
///   (`steps::is_compiled_region`), and one attention op per block
///   (`repeats::mixer_blocks`) cuts them.
///
/// Off the list since 2026-12-06 (thirteenth session), where the check
/// began: `backward`, a training step's layers holding its backward run.
/// None of the 21 training captures did: each layer was its forward run
/// alone. Told by repetition, a backward run's layers had to show a norm,
/// which a norm written out op by op does not (`RsqrtBackward0`:
/// `repeats::Tried::alike_backward`); told by module frames (the five made
/// `with_stack`), the backward runs in autograd's thread, in no module's
/// frame (`layers::backward_of_modules`).
///
/// Off the list since 2026-12-05 (seventh session): `key_averages` of
/// `torch.compile`'s `## Call CompiledFxGraph ##` ranges on five compiled
/// captures, where Inductor's wrapper frame starts inside an open range
/// and outlasts it (`links::pop_outlasted` says how torch's tree takes it).
pub const KNOWN: &[(&str, &str)] = &[
    ("hybrid-compile-", "layers"),
    ("hybrid-compile_ro", "layers"),
];

/// [`KNOWN`] as classes, for a draw it was not written against
/// (`make captures-unseen`): (a part of the capture's name, check). Its
/// entries name captures of the kept draws; these say what they share.
pub const KNOWN_CLASSES: &[(&str, &str)] = &[("hybrid-compile", "layers")];

pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/captures")
}

/// A capture of the family, read once: its name, its truth, its trace.
pub struct Capture {
    pub name: String,
    pub truth: Value,
    pub trace: Trace,
}

/// The family's capture names: seed 41's at the top, and two more seeds'
/// (`make captures-seeds`) in `seed7/` and `seed23/`, which the layer
/// rules were not written against first.
pub fn names() -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for sub in ["", "seed7/", "seed23/"] {
        names.extend(
            names_in(&dir().join(sub))
                .into_iter()
                .map(|n| format!("{sub}{n}")),
        );
    }
    names.sort();
    assert!(names.len() >= 100, "the family: {} captures", names.len());
    names
}

/// The captures of folder `dir` (each `NAME.truth.json`), sorted.
pub fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().to_string();
            n.strip_suffix(".truth.json").map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// Where capture `name` of `dir` lies: zstd -19 (`capture.py`'s
/// `compress`: 38% smaller than gzip -9, under the captures' 30 MB).
pub fn trace_path(dir: &std::path::Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json.zst"))
}

/// Capture `name` of `dir` as JSON, as torch wrote it.
pub fn json(dir: &std::path::Path, name: &str) -> Value {
    let f = std::fs::File::open(trace_path(dir, name)).unwrap();
    serde_json::from_reader(std::io::BufReader::new(zstd::Decoder::new(f).unwrap())).unwrap()
}

/// Reads a capture and its truth.
pub fn read(name: &str) -> Capture {
    read_from(&dir(), name)
}

/// Reads capture `name` of folder `dir` and its truth.
pub fn read_from(dir: &std::path::Path, name: &str) -> Capture {
    let truth: Value =
        serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.truth.json"))).unwrap())
            .unwrap();
    let trace = read_trace_file(&trace_path(dir, name), &ReadOptions::default()).unwrap();
    Capture {
        name: name.to_string(),
        truth,
        trace,
    }
}

/// Every capture's checks against [`KNOWN`]: what failed that is not
/// known, and each known failure that now holds (so the list stays true).
/// `key_averages` may be left out (no limit moves it).
pub fn wrong(captures: &[Capture], key_averages: bool) -> Vec<String> {
    let mut bad = Vec::new();
    let mut known_seen = vec![false; KNOWN.len()];
    for c in captures {
        let s = analyze(&c.trace, &AnalysisOptions::default());
        let failed = check(
            &c.name,
            &c.truth,
            &s,
            key_averages.then_some(dir().as_path()),
        );
        for (k, (prefix, what)) in KNOWN.iter().enumerate() {
            if c.name.starts_with(prefix) && (key_averages || *what != "key_averages") {
                if failed.iter().any(|f| f.0 == *what) {
                    known_seen[k] = true;
                } else {
                    bad.push(format!("{}: {what} now holds: take it off KNOWN", c.name));
                }
            }
        }
        for (what, why) in failed {
            if !KNOWN
                .iter()
                .any(|(p, w)| c.name.starts_with(p) && *w == what)
            {
                bad.push(format!("{}: {what}: {why}", c.name));
            }
        }
    }
    for (k, seen) in known_seen.iter().enumerate() {
        if !seen && (key_averages || KNOWN[k].1 != "key_averages") {
            bad.push(format!("KNOWN {:?} matches no capture", KNOWN[k]));
        }
    }
    bad
}

/// (capture name prefix, check) pairs of the Hugging Face captures
/// (`tests/captures/hf/`) that do not hold yet: none.
///
/// Held since first captured (2026-12-07, nineteenth session), by the rule
/// it set: `layers` of FLUX (`flux-2d4s-*`, `python/captures/diffusion.py`:
/// two double blocks, then four single ones). The VAE after the last denoising pass ran in
/// that pass (its mid block's attention a block more), so the blocks cut
/// no pass alike, and every other layer norm cut 6 layers, 2 of them
/// called linear (`layers::prologue_passes` now ends the last pass where
/// `after_passes` does).
///
/// Off the list since 2026-12-07 (seventeenth session): `backward` of
/// Wav2Vec2 trained, its layers its forward run alone (with LayerDrop or
/// without). Its front end's three `aten::conv1d` (two over the raw audio,
/// one positional) pass for a Mamba mixer's convolutions: three mixer
/// blocks before the first layer, where a forward run had to hold every
/// block before its end (`repeats::search`: now blocks without attention
/// may come before it).
///
/// GPT-2's `generate()` (a 400-token prefill, two decodes) had two steps,
/// the decodes, till its prefill, which makes cache tensors in every layer
/// and follows 45 ops that check the inputs, was taken for a pass by its
/// layers (`layers::anchored_with_head`).
///
/// On the list since 2026-12-07 (twenty-third session): `backward` of
/// gpt-oss trained under `torch.compile` on the CPU (its forward layers
/// and kinds hold; their check stays). Its compiled backward runs no
/// mixer gradient under a name of its own (its attention is GEMMs), so no
/// one name, nor its every n-th run, cuts the backward run into alike
/// layers (`repeats::backward_key`), as DeepSeek-V3's was not
/// (BENCHMARKS.md, twenty-second session).
///
/// Off the list since 2026-12-08 (twenty-fifth session): `backward` of
/// LFM2 trained under `torch.compile`, whose backward runs each kind of
/// layer's mixer gradient under its own name (`aten::convolution_backward`
/// in the convolution layers, the attention's backward in the others):
/// the runs of either name, in the forward kinds' order reversed, cut it
/// (`repeats::Key::Either`).
///
/// On the list since 2026-12-08 (twenty-fourth session): `backward` of
/// Llama 4 trained under `torch.compile` (its forward layers and kinds
/// hold since `repeats::before_blocks`): no key that `repeats::backward_key`
/// tries cuts its backward run into alike layers. Not studied further.
pub const KNOWN_HF: &[(&str, &str)] = &[
    ("gptoss-4l-compiled-train", "backward"),
    ("llama4-4l-compiled-train", "backward"),
];

/// The checks of the captures of folder `dir` (key_averages included)
/// against `known`: what failed that is not known, and each known failure
/// that now holds.
pub fn wrong_in(
    dir: &std::path::Path,
    captures: &[Capture],
    known: &[(&str, &str)],
) -> Vec<String> {
    let mut bad = Vec::new();
    for c in captures {
        let s = analyze(&c.trace, &AnalysisOptions::default());
        let failed = check(&c.name, &c.truth, &s, Some(dir));
        for (prefix, what) in known {
            if c.name.starts_with(prefix) && !failed.iter().any(|f| f.0 == *what) {
                bad.push(format!(
                    "{}: {what} now holds: take it off the known list",
                    c.name
                ));
            }
        }
        for (what, why) in failed {
            if !known
                .iter()
                .any(|(p, w)| c.name.starts_with(p) && *w == what)
            {
                bad.push(format!("{}: {what}: {why}", c.name));
            }
        }
    }
    bad
}

/// A draw's checks, sorted by [`KNOWN_CLASSES`]: (what failed that is not
/// of a known class, what failed that is).
pub fn unseen_wrong(dir: &std::path::Path, captures: &[Capture]) -> (Vec<String>, Vec<String>) {
    let (mut bad, mut known) = (Vec::new(), Vec::new());
    for c in captures {
        let s = analyze(&c.trace, &AnalysisOptions::default());
        for (what, why) in check(&c.name, &c.truth, &s, Some(dir)) {
            let line = format!("{}: {what}: {why}", c.name);
            if KNOWN_CLASSES
                .iter()
                .any(|(part, w)| c.name.contains(part) && *w == what)
            {
                known.push(line);
            } else {
                bad.push(line);
            }
        }
    }
    (bad, known)
}

/// One capture's checks: the names of those that failed, with why.
/// `key_averages`: the folder of torch's key_averages beside the capture,
/// or `None` to leave them out.
fn check(
    name: &str,
    truth: &Value,
    s: &Summary,
    key_averages: Option<&std::path::Path>,
) -> Vec<(&'static str, String)> {
    let mut failed = Vec::new();
    // Steps, and the engine loop's prefill.
    let steps = truth["steps"].as_u64().unwrap();
    if s.steps_stats.count != steps {
        failed.push(("steps", format!("{} steps of {steps}", s.steps_stats.count)));
    }
    let kinds: Vec<&str> = truth["step_kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    let got: Vec<Option<StepKind>> = s.steps.iter().map(|r| r.kind).collect();
    if kinds.contains(&"prefill") {
        let want: Vec<Option<StepKind>> = kinds
            .iter()
            .map(|k| {
                Some(if *k == "prefill" {
                    StepKind::Prefill
                } else {
                    StepKind::Decode
                })
            })
            .collect();
        if got != want {
            failed.push(("step kinds", format!("{got:?}")));
        }
    } else if truth["profiler_step"] == false
        && kinds.iter().all(|k| *k == "decode")
        && got.iter().any(|k| *k != Some(StepKind::Decode))
    {
        // Forward passes that each decode (an encoder-decoder's
        // generation) say so: one token a pass tells them.
        failed.push(("step kinds", format!("passes that decode: {got:?}")));
    } else if !kinds.contains(&"decode") && got.iter().any(Option::is_some) {
        // Training steps and a diffusion model's denoising passes neither
        // prefill nor decode (FLUX's passes were called decodes).
        failed.push(("step kinds", format!("steps that do not decode: {got:?}")));
    } else if got.contains(&Some(StepKind::Prefill)) {
        failed.push(("step kinds", format!("a prefill among like steps: {got:?}")));
    }
    // Layers and their kinds.
    let layers = truth["layers"].as_u64().unwrap();
    let want_kinds: Vec<&str> = truth["layer_kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    let got_kinds: Vec<&str> = s
        .layers
        .items
        .iter()
        .map(|r| r.kind.map_or("dense", |k| k.as_str()))
        .collect();
    if s.layers.count != layers || got_kinds != want_kinds {
        failed.push((
            "layers",
            format!(
                "{} layers {got_kinds:?}: {}",
                s.layers.count, s.layers.detail
            ),
        ));
    }
    // A training step's layers hold their backward run too (the detail
    // says so): the forward alone is a third of the step's work.
    if truth["mode"] == "train" && s.layers.count > 0 && !s.layers.detail.contains("then backward")
    {
        failed.push((
            "backward",
            format!("forward layers alone: {}", s.layers.detail),
        ));
    }
    // The story's cast, once per attention layer per step (where it is an
    // op of its own).
    if let Some(casts) = truth["casts_per_step"].as_f64() {
        let per_step: f64 = s
            .ops
            .iter()
            .flat_map(|o| &o.input_shapes)
            .filter(|g| {
                g.conversion
                    .as_deref()
                    .is_some_and(|c| c.starts_with("Float8_e4m3fn -> BFloat16"))
            })
            .filter_map(|g| g.calls_per_step)
            .sum();
        if per_step != casts {
            failed.push(("casts", format!("{per_step} per step of {casts}")));
        }
    }
    // torch's key_averages: calls exactly, self CPU within 2% (1 µs for
    // the smallest rows).
    let want: Vec<Value> = match key_averages {
        None => Vec::new(),
        Some(dir) => serde_json::from_slice(
            &std::fs::read(dir.join(format!("{name}.key_averages.json"))).unwrap(),
        )
        .unwrap(),
    };
    for w in &want {
        let n = w["name"].as_str().unwrap();
        let rows: Vec<_> = if n == "ProfilerStep*" {
            s.ops
                .iter()
                .filter(|o| o.name.starts_with("ProfilerStep#"))
                .collect()
        } else {
            s.ops.iter().filter(|o| o.name == n).collect()
        };
        let calls: u64 = rows.iter().map(|o| o.calls).sum();
        let self_cpu: f64 = rows.iter().map(|o| o.self_cpu_us).sum();
        let (wc, ws) = (
            w["calls"].as_u64().unwrap(),
            w["self_cpu_us"].as_f64().unwrap(),
        );
        if calls != wc || (self_cpu - ws).abs() > (0.02 * ws).max(1.0) {
            failed.push((
                "key_averages",
                format!("{n}: calls {calls} vs {wc}, self CPU {self_cpu:.1} vs {ws:.1}"),
            ));
        }
    }
    // No share over 100%, and no count that says nothing: calls outside
    // every step are said as such (`hf/t5-6e6d-generate`'s encoder said
    // "0 calls per step"), and one is "1 call".
    for f in &s.findings {
        if shares(&f.text).iter().any(|&v| v > 100.0) || f.impact_pct > 100.0 {
            failed.push(("shares", f.text.clone()));
        }
        let said = [
            " 0 calls per step",
            " 0 other ",
            " 1 calls",
            " (0 per step)",
        ];
        if said.iter().any(|w| f.text.contains(w)) {
            failed.push(("counts", f.text.clone()));
        }
    }
    failed
}

/// The shares a sentence states: each number directly before `%` that is
/// not a change (`+12%`, `-3.0%`, `->`).
pub fn shares(text: &str) -> Vec<f64> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    for (i, _) in text.match_indices('%') {
        let mut j = i;
        while j > 0 && (b[j - 1].is_ascii_digit() || b[j - 1] == b'.') {
            j -= 1;
        }
        if j == i || (j > 0 && matches!(b[j - 1], b'+' | b'-')) {
            continue;
        }
        if let Ok(v) = text[j..i].parse::<f64>() {
            out.push(v);
        }
    }
    out
}

/// The shared real H200 captures (`../shared/traces/torch-h200-*`), each
/// with the model's truth: the story (5x pool) and its patch, Python
/// stacks with memory, a hybrid replayed as a CUDA graph,
/// `torch.compile`, and a training step.
pub const H200: [&str; 6] = [
    "torch-h200-decode-fp8cast-78l-5xpool",
    "torch-h200-decode-gathercast-78l-5xpool",
    "torch-h200-decode-stack-memory-12l",
    "torch-h200-decode-hybrid-graph-48l",
    "torch-h200-decode-compiled-8l",
    "torch-h200-train-gpt6",
];

/// A file of `../shared/traces`.
pub fn shared(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/traces")
        .join(name)
}

/// Reads a shared H200 capture and its truth.
pub fn read_h200(capture: &str) -> Capture {
    let truth: Value = serde_json::from_slice(
        &std::fs::read(shared(&format!("torch/{capture}.truth.json"))).unwrap(),
    )
    .unwrap();
    let trace = read_trace_file(
        &shared(&format!("{capture}.json.gz")),
        &ReadOptions::default(),
    )
    .unwrap();
    Capture {
        name: capture.to_string(),
        truth,
        trace,
    }
}

/// The H200 captures whose layers or layer kinds are not their truth's.
pub fn h200_wrong(captures: &[Capture]) -> Vec<String> {
    let mut bad = Vec::new();
    for c in captures {
        let s = analyze(&c.trace, &AnalysisOptions::default());
        let l = &s.layers;
        let want = c.truth["layers"].as_u64().unwrap();
        if l.count != want {
            bad.push(format!(
                "{}: {} layers of {want} ({})",
                c.name, l.count, l.detail
            ));
            continue;
        }
        if let Some(kinds) = c.truth["layer_kinds"].as_array() {
            let want: Vec<&str> = kinds.iter().map(|k| k.as_str().unwrap()).collect();
            let got: Vec<&str> = l
                .items
                .iter()
                .map(|r| r.kind.map_or("-", |k| k.as_str()))
                .collect();
            if got != want {
                bad.push(format!("{}: kinds {got:?}, want {want:?}", c.name));
            }
        }
    }
    bad
}

/// The shared third-party traces and CPU captures (`../shared/traces`,
/// every `.json.gz` but the H200 captures, which [`h200_wrong`] checks
/// against their truth, and but one rank of the 8-rank job): real traces
/// of other models, engines and GPUs, with no truth of their own.
pub fn third_party() -> Vec<Capture> {
    let mut names: Vec<String> = std::fs::read_dir(shared(""))
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().to_string();
            let skip = n.starts_with("torch-h200-")
                || (n.starts_with("param-dlrm-") && !n.contains("rank0"));
            (n.ends_with(".json.gz") && !skip).then_some(n)
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| Capture {
            trace: read_trace_file(&shared(&n), &ReadOptions::default()).unwrap(),
            name: n,
            truth: Value::Null,
        })
        .collect()
}

/// What the pattern rules decided on a trace: its steps and their kinds,
/// its layers and their kinds.
pub fn decided(c: &Capture) -> String {
    let s = analyze(&c.trace, &AnalysisOptions::default());
    let steps: Vec<&str> = s
        .steps
        .iter()
        .map(|r| r.kind.map_or("-", |k| k.as_str()))
        .collect();
    let layers: Vec<&str> = s
        .layers
        .items
        .iter()
        .map(|r| r.kind.map_or("-", |k| k.as_str()))
        .collect();
    format!(
        "{} steps {steps:?} ({}), {} layers {layers:?}",
        s.steps_stats.count, s.steps_stats.source, s.layers.count
    )
}

/// A trace's events inside a window of its CPU ops' span, from `from` to
/// `to` (fractions), with its step marks and Python frames taken out: a
/// profile opened and closed inside passes writes no event that began
/// before it opened or ended after it closed.
pub fn window(events: &[Value], from: f64, to: f64) -> Vec<Value> {
    let (ts, dur) = (
        |e: &Value| e["ts"].as_f64(),
        |e: &Value| e["dur"].as_f64().unwrap_or(0.0),
    );
    let kept: Vec<&Value> = events
        .iter()
        .filter(|e| {
            !e["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("ProfilerStep"))
                && e["cat"] != "python_function"
        })
        .collect();
    let (t0, t1) = kept
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "cpu_op")
        .fold((f64::MAX, f64::MIN), |(a, b), e| {
            let s = ts(e).unwrap_or(a);
            (a.min(s), b.max(s + dur(e)))
        });
    let (lo, hi) = (t0 + from * (t1 - t0), t0 + to * (t1 - t0));
    kept.into_iter()
        .filter(|e| e["ph"] == "M" || ts(e).is_none_or(|s| s >= lo && s + dur(e) <= hi))
        .cloned()
        .collect()
}

/// Windows of the real captures of a model run without step marks
/// (`tests/captures/unmarked/`), each holding whole passes between two
/// the profile cut (opened inside one, closed inside another:
/// [`window`]), with how many whole passes each holds: (capture, from,
/// to, passes). The whole passes are the steps, with the model's layers
/// and kinds. Before `analysis::anchored_steps`, the layers were alike
/// across the cut passes: the dense generation said 15, 9, 11, 11 and
/// 14 layers of 6, the MoE one 11, 9 and 6 of 4. Some windows open or
/// close inside an op, whose children are then top-level ops of their
/// own (`layers::without_cut_parents`), or open on the last items of a
/// pass (`layers::stray_before`). From 25% to 60%, a
/// LayerDrop rule that did not ask a short step to start and end as the
/// full ones (`Limit::LayerDropEnds`) took the cut passes for short steps.
pub const UNMARKED_WINDOWS: [(&str, f64, f64, usize); 8] = [
    ("generate-dense-6l", 0.5, 0.95, 1),
    ("generate-dense-6l", 0.1, 0.6, 1),
    ("generate-dense-6l", 0.35, 0.7, 1),
    ("generate-dense-6l", 0.25, 0.6, 1),
    ("generate-dense-6l", 0.45, 0.9, 2),
    ("generate-moe-4l", 0.35, 0.7, 1),
    ("generate-moe-4l", 0.1, 0.6, 1),
    ("generate-moe-4l", 0.55, 0.85, 1),
];

/// A window of [`UNMARKED_WINDOWS`], read once.
pub struct Windowed {
    pub what: String,
    pub passes: usize,
    pub truth: Value,
    pub trace: Trace,
}

/// Each of [`UNMARKED_WINDOWS`], its events parsed as a trace.
pub fn unmarked_windows() -> Vec<Windowed> {
    let dir = dir().join("unmarked");
    UNMARKED_WINDOWS
        .iter()
        .map(|&(name, from, to, passes)| {
            let truth: Value = serde_json::from_slice(
                &std::fs::read(dir.join(format!("{name}.truth.json"))).unwrap(),
            )
            .unwrap();
            let doc = json(&dir, name);
            let events = window(doc["traceEvents"].as_array().unwrap(), from, to);
            let bytes = serde_json::to_vec(&serde_json::json!({ "traceEvents": events })).unwrap();
            Windowed {
                what: format!("unmarked/{name} from {from} to {to}"),
                passes,
                truth,
                trace: kinetoscope_trace::import::read_trace(&bytes[..], &ReadOptions::default())
                    .unwrap(),
            }
        })
        .collect()
}

/// What a window of [`unmarked_windows`] gets wrong: its whole passes are
/// its steps, with the model's layers and their kinds.
pub fn windows_wrong(windows: &[Windowed]) -> Vec<String> {
    let mut bad = Vec::new();
    for w in windows {
        let s = analyze(&w.trace, &AnalysisOptions::default());
        let l = &s.layers;
        let kinds: Vec<&str> = l
            .items
            .iter()
            .map(|r| r.kind.map_or("", |k| k.as_str()))
            .collect();
        let want: Vec<&str> = w.truth["layer_kinds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        if (s.steps.len(), l.passes) != (w.passes, w.passes as u64)
            || l.count != w.truth["layers"].as_u64().unwrap()
            || kinds != want
        {
            bad.push(format!(
                "{}: {} steps, {} passes of {}; {} layers {kinds:?}; {}",
                w.what,
                s.steps.len(),
                l.passes,
                w.passes,
                l.count,
                l.detail
            ));
        }
    }
    bad
}
