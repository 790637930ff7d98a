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

use kinetoscope_trace::import::{read_trace_file, ReadOptions};
use kinetoscope_trace::{analyze, AnalysisOptions};
use kinetoscope_types::StepKind;
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
///   (`repeats::mixer_blocks`) cuts them;
/// - `key_averages` of `torch.compile`'s `## Call CompiledFxGraph ##`
///   ranges where Inductor's Python wrapper frame starts inside the range
///   and ends after it: torch's tree takes the C++ kernels' frames below it
///   as the range's children (41 µs of self CPU), the op tree leaves a
///   frame that outlasts what is open out, with what is inside it (2 ms).
const KNOWN: &[(&str, &str)] = &[
    ("dense-compile-6l", "key_averages"),
    ("interleaved-compile-6l", "key_averages"),
    ("hybrid-compile_ro-12l", "key_averages"),
    ("seed7/moe-compile-6l", "key_averages"),
    ("seed23/moe-compile-8l", "key_averages"),
    ("hybrid-compile-", "layers"),
    ("hybrid-compile_ro", "layers"),
];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/captures")
}

/// One capture's checks: the names of those that failed, with why.
fn check(name: &str, truth: &Value) -> Vec<(&'static str, String)> {
    let path = dir().join(format!("{name}.json.gz"));
    let t = read_trace_file(&path, &ReadOptions::default()).unwrap();
    let s = analyze(&t, &AnalysisOptions::default());
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
    let want: Vec<Value> = serde_json::from_slice(
        &std::fs::read(dir().join(format!("{name}.key_averages.json"))).unwrap(),
    )
    .unwrap();
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
    // No share over 100%.
    for f in &s.findings {
        if crate::real_captures::shares(&f.text)
            .iter()
            .any(|&v| v > 100.0)
            || f.impact_pct > 100.0
        {
            failed.push(("shares", f.text.clone()));
        }
    }
    failed
}

#[test]
fn the_real_capture_family_holds() {
    // The family of seed 41 (`make captures`) at the top, and two more
    // seeds' (`make captures-seeds`) in `seed7/` and `seed23/`, which the
    // layer rules were not written against first.
    let mut names: Vec<String> = Vec::new();
    for sub in ["", "seed7/", "seed23/"] {
        names.extend(std::fs::read_dir(dir().join(sub)).unwrap().filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().to_string();
            n.strip_suffix(".truth.json").map(|n| format!("{sub}{n}"))
        }));
    }
    names.sort();
    assert!(names.len() >= 100, "the family: {} captures", names.len());
    let mut bad = Vec::new();
    let mut known_seen = vec![false; KNOWN.len()];
    for name in &names {
        let truth: Value = serde_json::from_slice(
            &std::fs::read(dir().join(format!("{name}.truth.json"))).unwrap(),
        )
        .unwrap();
        let failed = check(name, &truth);
        for (k, (prefix, what)) in KNOWN.iter().enumerate() {
            if name.starts_with(prefix) {
                if failed.iter().any(|f| f.0 == *what) {
                    known_seen[k] = true;
                } else {
                    bad.push(format!("{name}: {what} now holds: take it off KNOWN"));
                }
            }
        }
        for (what, why) in failed {
            if !KNOWN.iter().any(|(p, w)| name.starts_with(p) && *w == what) {
                bad.push(format!("{name}: {what}: {why}"));
            }
        }
    }
    for (k, seen) in known_seen.iter().enumerate() {
        assert!(*seen, "KNOWN {:?} matches no capture", KNOWN[k]);
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// A real capture whose steps recompile (`python/captures/recompile.py`:
/// torch 2.15, a new input length every step, automatic dynamic shapes
/// off): the first finding says how many steps were compiling and for how
/// long, with what to do, instead of listing the compiler's phases; no
/// finding says so of the family's compiled captures, which compiled
/// before their profile.
#[test]
fn steps_that_compile_are_said_to() {
    let dir = dir().join("compiling");
    let truth: Value =
        serde_json::from_slice(&std::fs::read(dir.join("recompile.truth.json")).unwrap()).unwrap();
    let t = read_trace_file(&dir.join("recompile.json.gz"), &ReadOptions::default()).unwrap();
    let s = analyze(&t, &AnalysisOptions::default());
    let n = truth["compiling_steps"].as_u64().unwrap();
    let first = &s.findings[0];
    assert_eq!(
        first.kind,
        kinetoscope_types::FindingKind::Compiling,
        "{}",
        first.text
    );
    assert!(
        first
            .text
            .starts_with(&format!("{n} of the {n} steps were compiling")),
        "{}",
        first.text
    );
    assert!(first.text.contains("mark_dynamic"), "{}", first.text);
    for r in &s.steps {
        assert!(
            r.compile_us > 0.5 * r.time() && r.compile_us <= r.time() * 1.001,
            "{r:?}"
        );
    }
    for e in std::fs::read_dir(super::captures::dir()).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if !(name.contains("compile") && name.ends_with(".json.gz")) {
            continue;
        }
        let t = read_trace_file(&p, &ReadOptions::default()).unwrap();
        let s = analyze(&t, &AnalysisOptions::default());
        assert!(
            !s.findings
                .iter()
                .any(|f| f.kind == kinetoscope_types::FindingKind::Compiling),
            "{name}"
        );
    }
}
