//! The layer, step and cast rules hold over a family of models, not one
//! shape: hundreds of random architectures drawn from seeds (plain dense
//! models of 2 to 128 layers, dense prefixes before MoE with fused or
//! unfused MLPs, MoE interleaved with dense layers, hybrids whose every K-th
//! layer has attention, local and global attention), each checked against
//! the truth the generator wrote. A failure prints every seed that failed
//! with what it found, so a seed can be rerun alone (`KINETOSCOPE_SEED=N`)
//! or written out (`kinetoscope generate --random-architecture N`);
//! `KINETOSCOPE_SEEDS=N` checks the first N seeds instead of 200.

use kinetoscope_generate::{write_decode_trace, DecodeParams, Mode};
use kinetoscope_trace::import::{read_trace, ReadOptions};
use kinetoscope_trace::{analyze, AnalysisOptions};

/// Whether each layer has its truth's kind; a model whose layers are all
/// alike may leave them unlabelled.
fn kinds_hold(s: &kinetoscope_types::Summary, truth: &kinetoscope_generate::Truth) -> bool {
    let mixed = truth.layer_kinds.iter().any(|k| *k != truth.layer_kinds[0]);
    s.layers
        .items
        .iter()
        .zip(&truth.layer_kinds)
        .all(|(r, k)| r.kind == Some(*k) || (!mixed && r.kind.is_none()))
}

/// Seeds checked in `make test`.
const SEEDS: u64 = 200;

/// What one seed's analysis got wrong, if anything.
fn check(seed: u64) -> Result<(), String> {
    let p = DecodeParams::random_architecture(seed);
    let mut json = Vec::new();
    let truth = write_decode_trace(&p, &mut json).map_err(|e| e.to_string())?;
    let t = read_trace(&json[..], &ReadOptions::default()).map_err(|e| e.to_string())?;
    let s = analyze(&t, &AnalysisOptions::default());
    let mut wrong = Vec::new();
    if s.layers.count != truth.layers as u64 {
        wrong.push(format!(
            "{} layers, not {} ({})",
            s.layers.count, truth.layers, s.layers.detail
        ));
    } else {
        // Kinds are checked where the truth has more than one: a model whose
        // layers are all alike may leave them unlabelled.
        let mixed = truth.layer_kinds.iter().any(|k| *k != truth.layer_kinds[0]);
        for (i, (row, want)) in s.layers.items.iter().zip(&truth.layer_kinds).enumerate() {
            if row.kind != Some(*want) && (mixed || row.kind.is_some()) {
                wrong.push(format!(
                    "layer {i} is {:?}, not {}",
                    row.kind.map(|k| k.as_str()),
                    want.as_str()
                ));
                break;
            }
        }
    }
    if s.steps_stats.count != truth.step_us.len() as u64 {
        wrong.push(format!(
            "{} steps, not {}",
            s.steps_stats.count,
            truth.step_us.len()
        ));
    }
    let cast = s
        .ops
        .iter()
        .find(|o| o.name == "aten::copy_")
        .and_then(|o| {
            o.input_shapes
                .iter()
                .find(|g| g.conversion.as_deref() == Some("Float8_e4m3fn -> BFloat16"))
        })
        .and_then(|g| g.calls_per_step);
    if cast != Some(truth.casts_per_step as f64) {
        wrong.push(format!(
            "{cast:?} casts per step, not {}",
            truth.casts_per_step
        ));
    }
    // The cast converts the whole pool while the steps read a growing
    // part of it: found on every model with at least three steps and two
    // attention layers (the rule needs a pattern, not one call a step).
    let whole = s
        .ops
        .iter()
        .filter(|o| o.name == "aten::copy_")
        .flat_map(|o| &o.input_shapes)
        .find(|g| g.conversion.as_deref() == Some("Float8_e4m3fn -> BFloat16"))
        .and_then(|g| g.partly_used.as_ref());
    if truth.step_us.len() >= 3 && truth.casts_per_step >= 2 && whole.is_none() {
        wrong.push("the cast of the whole pool is not marked".to_string());
    }
    if s.device.as_ref().and_then(|d| d.peak_gbps) != Some(4800.0) {
        wrong.push(format!("device {:?}", s.device));
    }
    // Where the cast dominates (every model but the sparsest hybrids), the
    // first finding names it with its calls per step.
    let first = if s.findings.is_empty() {
        ""
    } else {
        crate::first_cause_op(&s).text.as_str()
    };
    let names_cast = first.starts_with("aten::copy_ (Float8_e4m3fn -> BFloat16")
        && first.contains(&format!(
            "{} per step",
            kinetoscope_types::units::calls(truth.casts_per_step as f64)
        ));
    if truth.cast_pct() >= 40.0 && !names_cast {
        wrong.push(format!(
            "first finding: {first} (cast {:.1}%; then {:?})",
            truth.cast_pct(),
            s.findings
                .iter()
                .skip(1)
                .take(3)
                .map(|f| f.text.as_str())
                .collect::<Vec<_>>()
        ));
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "seed {seed} ({} layers: moe every {}, {} dense first, attention every {}, global every {}, unfused {}, compiled norms {}, {:?}, {:?}): {}",
            p.layers,
            p.moe_every,
            p.dense_layers,
            p.attention_every,
            p.global_every,
            p.unfused_mlp,
            p.compiled_norms,
            p.attention,
            p.linear_mixer,
            wrong.join("; ")
        ))
    }
}

#[test]
fn layers_kinds_steps_and_casts_hold_over_random_architectures() {
    let only: Option<u64> = std::env::var("KINETOSCOPE_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    // KINETOSCOPE_SEEDS=N checks N seeds (more than make test's 200).
    let many: u64 = std::env::var("KINETOSCOPE_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEEDS);
    let seeds: Vec<u64> = match only {
        Some(s) => vec![s],
        None => (0..many).collect(),
    };
    // Two threads: the test machines have two cores.
    let failures: Vec<String> = std::thread::scope(|scope| {
        let halves: Vec<_> = [0, 1]
            .map(|h| {
                let seeds = &seeds;
                scope.spawn(move || {
                    seeds
                        .iter()
                        .skip(h)
                        .step_by(2)
                        .filter_map(|&s| check(s).err())
                        .collect::<Vec<_>>()
                })
            })
            .into_iter()
            .collect();
        halves
            .into_iter()
            .flat_map(|h| h.join().expect("a checking thread panicked"))
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} of {} architectures failed:\n{}",
        failures.len(),
        seeds.len(),
        failures.join("\n")
    );
}

/// The same family captured other ways: CUDA graph replays (the layers are
/// read from the device side, with no ops to name the kernels), piecewise
/// graphs with Python frames (`nn.Module` layer frames win), and layer
/// annotations: layers, kinds and steps hold in every one.
#[test]
fn layers_hold_in_every_capture_mode() {
    let mut failures = Vec::new();
    for seed in 0..40u64 {
        for (mode, with_stack, layer_annotations) in [
            (Mode::Graph, false, false),
            (Mode::Piecewise, true, false),
            (Mode::Eager, false, true),
        ] {
            let p = DecodeParams {
                mode,
                with_stack,
                layer_annotations,
                ..DecodeParams::random_architecture(seed)
            };
            let mut json = Vec::new();
            let truth = write_decode_trace(&p, &mut json).unwrap();
            let t = read_trace(&json[..], &ReadOptions::default()).unwrap();
            let s = analyze(&t, &AnalysisOptions::default());
            let kinds_hold = kinds_hold(&s, &truth);
            if s.layers.count != truth.layers as u64
                || !kinds_hold
                || s.steps_stats.count != truth.step_us.len() as u64
            {
                failures.push(format!(
                    "seed {seed} {mode:?} stack {with_stack} annotations {layer_annotations}: {} layers of {} (kinds hold: {kinds_hold}), {} steps of {}: {}",
                    s.layers.count,
                    truth.layers,
                    s.steps_stats.count,
                    truth.step_us.len(),
                    s.layers.detail
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_family_spans_the_architectures_people_serve() {
    use kinetoscope_generate::Mixer;
    let plans: Vec<DecodeParams> = (0..SEEDS).map(DecodeParams::random_architecture).collect();
    let has = |f: &dyn Fn(&DecodeParams) -> bool| plans.iter().filter(|p| f(p)).count();
    assert!(has(&|p| p.moe_every == 0 && p.attention_every == 1 && p.global_every <= 1) >= 20);
    assert!(has(&|p| p.moe_every == 1 && p.dense_layers > 0 && p.unfused_mlp) >= 10);
    assert!(has(&|p| p.moe_every == 2) >= 20);
    assert!(has(&|p| p.plan().iter().any(|l| l.mixer == Mixer::Linear)) >= 20);
    assert!(has(&|p| p.plan().iter().any(|l| l.mixer == Mixer::Local)) >= 20);
    assert!(has(&|p| p.layers == 2) + has(&|p| p.layers >= 100) >= 2);
    assert!(has(&|p| p.compiled_norms) >= 20);
}

/// The random family again, profiled without step marks (every
/// `ProfilerStep` taken out, as `model.generate()` profiled without a
/// schedule writes it): the trace is one sequence of the steps' forward
/// passes, and the layers are still the model's, not its layers times its
/// passes (`layers::Passes`; before, a 12-layer story of 4 steps was 48
/// layers), and each pass is a step, within 5% of the step's time on
/// average. Kinds are checked as above.
#[test]
fn layers_hold_over_random_architectures_without_step_marks() {
    let mut failed = Vec::new();
    for seed in 0..40u64 {
        let p = DecodeParams::random_architecture(seed);
        let mut json = Vec::new();
        let truth = write_decode_trace(&p, &mut json).unwrap();
        let (mut doc, t) = unmarked(&json);
        let s = analyze(&t, &AnalysisOptions::default());
        let kinds_ok = kinds_hold(&s, &truth);
        let passes = format!("runs its forward pass {} times", truth.step_us.len());
        if s.layers.count != truth.layers as u64 || !kinds_ok || !s.layers.detail.contains(&passes)
        {
            failed.push(format!(
                "seed {seed}: {} layers of {}: {}",
                s.layers.count, truth.layers, s.layers.detail
            ));
        }
        // Each pass is a step, about as long as the step it was.
        let mean = s.steps_stats.mean_us / truth.mean_step_us();
        if s.steps.len() != truth.step_us.len() || !(0.95..=1.05).contains(&mean) {
            failed.push(format!(
                "seed {seed}: {} steps of {} ({}), mean {:.0} µs against {:.0}",
                s.steps.len(),
                truth.step_us.len(),
                s.steps_stats.source,
                s.steps_stats.mean_us,
                truth.mean_step_us()
            ));
        }
        // The profile opened 15% into the first pass: what comes before the
        // first layer is a layer's tail, no prologue (it made 1 layer a
        // pass). Where two whole passes or more follow, they are the steps
        // (`layers::PassesFrom::Anchor`; it said 43 layers of an 8-layer
        // model); where one does, no passes are claimed.
        let x = |e: &serde_json::Value| e["ph"] == "X";
        let events = doc["traceEvents"].as_array_mut().unwrap();
        let (t0, t1) = events
            .iter()
            .filter(|e| x(e))
            .fold((f64::MAX, f64::MIN), |(a, b), e| {
                let ts = e["ts"].as_f64().unwrap_or(0.0);
                (a.min(ts), b.max(ts + e["dur"].as_f64().unwrap_or(0.0)))
            });
        let cut = t0 + 0.15 * (t1 - t0);
        events.retain(|e| !e["ts"].as_f64().is_some_and(|ts| ts < cut));
        let t = read_trace(
            &serde_json::to_vec(&doc).unwrap()[..],
            &ReadOptions::default(),
        )
        .unwrap();
        let s = analyze(&t, &AnalysisOptions::default());
        let whole = truth.step_us.len() - 1;
        let rest = &truth.step_us[1..];
        let mean = s.steps_stats.mean_us * rest.len() as f64 / rest.iter().sum::<f64>();
        let passes_hold = s.layers.passes == whole as u64
            && s.steps.len() == whole
            && kinds_hold(&s, &truth)
            && (0.95..=1.05).contains(&mean);
        if (whole >= 2 && !passes_hold)
            || (s.layers.passes != 0 && s.layers.count != truth.layers as u64)
        {
            failed.push(format!(
                "seed {seed}, opened inside a pass: {} steps of {whole}, mean {mean:.3} of the truth's: {}",
                s.steps.len(),
                s.layers.detail
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// One `ProfilerStep` around every pass of a random architecture
/// (`generate()` inside one profiler step): where no names tell the
/// layers, the passes are the steps and each holds the model's layers,
/// as without step marks; where names do, the one step stands. It said
/// the passes' layers together (8 passes of 6 layers: 48).
#[test]
fn layers_hold_over_random_architectures_in_one_step() {
    let mut failed = Vec::new();
    for seed in 0..40u64 {
        let p = DecodeParams::random_architecture(seed);
        let mut json = Vec::new();
        let truth = write_decode_trace(&p, &mut json).unwrap();
        let (mut doc, _) = unmarked(&json);
        let events = doc["traceEvents"].as_array_mut().unwrap();
        let cpu = |e: &serde_json::Value| e["ph"] == "X" && e["cat"] == "cpu_op";
        let (t0, t1) = events
            .iter()
            .filter(|e| cpu(e))
            .fold((f64::MAX, f64::MIN), |(a, b), e| {
                let ts = e["ts"].as_f64().unwrap_or(0.0);
                (a.min(ts), b.max(ts + e["dur"].as_f64().unwrap_or(0.0)))
            });
        let first = events.iter().find(|e| cpu(e)).unwrap().clone();
        events.push(serde_json::json!({
            "ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0",
            "pid": first["pid"], "tid": first["tid"], "ts": t0 - 1.0, "dur": t1 - t0 + 2.0,
        }));
        let t = read_trace(
            &serde_json::to_vec(&doc).unwrap()[..],
            &ReadOptions::default(),
        )
        .unwrap();
        let s = analyze(&t, &AnalysisOptions::default());
        let passes = s.steps_stats.source == "forward passes"
            && s.steps.len() == truth.step_us.len()
            && s.layers.passes as usize == truth.step_us.len()
            && s.layers
                .detail
                .starts_with("the trace's one step, ProfilerStep#0, runs");
        let step_stands =
            s.steps.len() == 1 && s.layers.method != kinetoscope_types::LayerMethod::Repetition;
        if s.layers.count != truth.layers as u64
            || !kinds_hold(&s, &truth)
            || !(passes || step_stands)
        {
            failed.push(format!(
                "seed {seed}: {} layers of {}, {} steps ({}): {}",
                s.layers.count,
                truth.layers,
                s.steps.len(),
                s.steps_stats.source,
                s.layers.detail
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// A generated trace with every `ProfilerStep` taken out: its document
/// (for further cuts) and the trace read from it.
fn unmarked(json: &[u8]) -> (serde_json::Value, kinetoscope_trace::import::store::Trace) {
    let mut doc: serde_json::Value = serde_json::from_slice(json).unwrap();
    let events = doc["traceEvents"].as_array_mut().unwrap();
    events.retain(|e| {
        !e["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("ProfilerStep"))
    });
    let t = read_trace(
        &serde_json::to_vec(&doc).unwrap()[..],
        &ReadOptions::default(),
    )
    .unwrap();
    (doc, t)
}

/// A long generation without step marks: 8 dense layers run in 130
/// passes, 1,040 runs of each layer's names, more than a step's layers are
/// searched for (`repeats::MAX_LAYERS`), so the one sequence splits at the
/// embedding, once a pass; the passes are where the sequence's first ops
/// run again (`layers::PassesFrom::Restarts`), each holding the model's
/// layers: 130 steps of 8 layers, where it said 130 layers and no steps.
#[test]
fn a_long_generation_without_step_marks_is_cut_into_its_passes() {
    let p = DecodeParams {
        steps: 130,
        layers: 8,
        dense_layers: 8,
        ..DecodeParams::default()
    };
    let mut json = Vec::new();
    let truth = write_decode_trace(&p, &mut json).unwrap();
    let (_, t) = unmarked(&json);
    let s = analyze(&t, &AnalysisOptions::default());
    assert_eq!(s.layers.count, 8, "{}", s.layers.detail);
    assert_eq!(s.layers.passes, 130, "{}", s.layers.detail);
    assert_eq!(s.steps.len(), 130);
    assert_eq!(s.steps_stats.source, "forward passes");
    let mean = s.steps_stats.mean_us / truth.mean_step_us();
    assert!((0.95..=1.05).contains(&mean), "{mean}");
}

/// A tensor-parallel decode replayed from a CUDA graph, profiled without
/// step marks (every `ProfilerStep`, Python frame and `execute_model`
/// taken out): the thread waits in each step's `nccl:all_gather`, a
/// repeating outermost annotation that holds most of its time, but a
/// collective is part of a step, not one. The steps are the forward passes
/// (the replays' kernels run the same prologue each pass), each about the
/// step it was, with the model's layers; it said 6 all-gathers were the
/// steps, and 0 layers (no replay was launched inside them).
#[test]
fn graph_replays_without_step_marks_are_not_stepped_by_their_collective() {
    for mode in [Mode::Graph, Mode::Piecewise] {
        let p = DecodeParams {
            steps: 6,
            layers: 12,
            mode,
            with_stack: false,
            ..DecodeParams::default()
        };
        let mut json = Vec::new();
        let truth = write_decode_trace(&p, &mut json).unwrap();
        let mut doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
        doc["traceEvents"].as_array_mut().unwrap().retain(|e| {
            let name = e["name"].as_str().unwrap_or("");
            !name.starts_with("ProfilerStep")
                && !name.contains("execute_model")
                && e["cat"] != "python_function"
        });
        let t = read_trace(
            &serde_json::to_vec(&doc).unwrap()[..],
            &ReadOptions::default(),
        )
        .unwrap();
        let s = analyze(&t, &AnalysisOptions::default());
        assert_eq!(s.steps_stats.source, "forward passes", "{mode:?}");
        assert_eq!(s.steps.len(), 6, "{mode:?}");
        assert_eq!(s.layers.count, 12, "{mode:?}: {}", s.layers.detail);
        let mean = s.steps_stats.mean_us / truth.mean_step_us();
        assert!((0.95..=1.05).contains(&mean), "{mode:?}: {mean}");
    }
}

/// Long generations without step marks over the random family: each
/// seed's model run for enough passes that every layer key runs more than
/// 1,024 times (`repeats::MAX_LAYERS`), its `ProfilerStep`s taken out.
/// The passes are found where the sequence's first ops run again
/// (`layers::PassesFrom::Restarts`), and each is a step with the model's
/// layers. Before, 6 of the first 24 seeds had no layers or a layer per
/// key run (888 "layers" of a 10-layer model: a GEMM of 8 of its layers,
/// run 888 times, cut the sequence); all 24 hold now, and six of them are
/// checked here (each trace is about 200 k events): four that failed, two
/// that did not.
#[test]
fn long_generations_without_step_marks_hold_over_random_architectures() {
    let mut bad = Vec::new();
    for seed in [0u64, 1, 2, 9, 10, 12] {
        let mut p = DecodeParams::random_architecture(seed);
        p.steps = (1100 / p.layers.max(1) + 1).clamp(6, 400);
        let mut json = Vec::new();
        let truth = write_decode_trace(&p, &mut json).unwrap();
        let (_, t) = unmarked(&json);
        let s = analyze(&t, &AnalysisOptions::default());
        if s.layers.count != truth.layers as u64
            || s.steps.len() != truth.step_us.len()
            || !kinds_hold(&s, &truth)
        {
            bad.push(format!(
                "seed {seed}: {} layers x {} passes: {} layers, {} steps: {}",
                truth.layers,
                truth.step_us.len(),
                s.layers.count,
                s.steps.len(),
                s.layers.detail
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
