//! Expected numbers on shared traces, derived independently of the engine:
//! a small reference reads each file with `serde_json::Value` (floats, no
//! columnar store, no op tree) and computes, by brute force,
//!
//! - each kernel's total duration (sum of `dur` by name);
//! - for one op: its self device time (GPU ops whose launch's innermost
//!   enclosing op on the same thread is that op, found by scanning every op
//!   on the thread) and its total device time (GPU ops whose launch lies
//!   inside any event of that op);
//! - the ProfilerStep count and mean duration.
//!
//! The traces cover 2020 (bare array, string tids), 2021 (record_shapes),
//! 2022 (External id = correlation, CUDA graphs), 2023 (CUDA graphs), 2024
//! (3-decimal epoch timestamps), 2025 (H100) and AMD MI300X (hipGraphLaunch).

use kinetoscope_trace::import::{read_trace_file, ReadOptions};
use kinetoscope_trace::{analyze, AnalysisOptions, Summary};
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/traces")
        .join(name)
}

fn load_json(name: &str) -> Vec<Value> {
    let f = std::fs::File::open(path(name)).unwrap();
    let v: Value =
        serde_json::from_reader(std::io::BufReader::new(flate2::read::GzDecoder::new(f))).unwrap();
    match v {
        Value::Array(a) => a,
        Value::Object(mut o) => match o.remove("traceEvents") {
            Some(Value::Array(a)) => a,
            _ => panic!("no traceEvents"),
        },
        _ => panic!("not a trace"),
    }
}

fn summary(name: &str) -> Summary {
    let t = read_trace_file(&path(name), &ReadOptions::default()).unwrap();
    analyze(&t, &AnalysisOptions::default())
}

fn cat(e: &Value) -> &str {
    e.get("cat").and_then(Value::as_str).unwrap_or("")
}

fn num(e: &Value, k: &str) -> f64 {
    e.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

/// pid/tid as a string: 2020-21 files mix `"25738"` and `25738`.
fn key(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn is_gpu_op(e: &Value) -> bool {
    matches!(
        cat(e),
        "kernel" | "Kernel" | "gpu_memcpy" | "Memcpy" | "gpu_memset" | "Memset"
    ) && e["ph"] == "X"
}

fn is_op(e: &Value) -> bool {
    matches!(cat(e), "cpu_op" | "Operator" | "user_annotation") && e["ph"] == "X"
}

fn is_runtime(e: &Value) -> bool {
    matches!(cat(e), "cuda_runtime" | "Runtime" | "cuda_driver") && e["ph"] == "X"
}

/// Reference: total duration per kernel name.
fn kernel_totals(events: &[Value]) -> HashMap<String, f64> {
    let mut m = HashMap::new();
    for e in events.iter().filter(|e| is_gpu_op(e)) {
        *m.entry(e["name"].as_str().unwrap().to_string())
            .or_insert(0.0) += num(e, "dur");
    }
    m
}

/// Reference: (self device, total device) of op `name`. For each launch,
/// the ops around it come from a sweep over the thread's ops in start order
/// with a multiset of open ops keyed by end (not the engine's stack).
fn op_device(events: &[Value], name: &str) -> (f64, f64) {
    use std::collections::BTreeMap;
    let mut by_thread: HashMap<(String, String), Vec<&Value>> = HashMap::new();
    for o in events.iter().filter(|e| is_op(e)) {
        by_thread
            .entry((key(o.get("pid")), key(o.get("tid"))))
            .or_default()
            .push(o);
    }
    let runtime: HashMap<i64, &Value> = events
        .iter()
        .filter(|e| is_runtime(e))
        .filter_map(|e| {
            e["args"]
                .get("correlation")
                .and_then(Value::as_i64)
                .map(|c| (c, e))
        })
        .collect();
    // Device time launched by each runtime event.
    let mut launched: HashMap<*const Value, f64> = HashMap::new();
    for k in events.iter().filter(|e| is_gpu_op(e)) {
        if let Some(r) = k["args"]
            .get("correlation")
            .and_then(Value::as_i64)
            .and_then(|c| runtime.get(&c))
        {
            *launched.entry(*r as *const Value).or_default() += num(k, "dur");
        }
    }
    let mut launches_by_thread: HashMap<(String, String), Vec<(&Value, f64)>> = HashMap::new();
    for r in runtime.values() {
        if let Some(d) = launched.get(&(*r as *const Value)) {
            launches_by_thread
                .entry((key(r.get("pid")), key(r.get("tid"))))
                .or_default()
                .push((r, *d));
        }
    }
    let (mut self_dev, mut total_dev) = (0.0, 0.0);
    for (thread, mut launches) in launches_by_thread {
        let mut ops = by_thread.remove(&thread).unwrap_or_default();
        ops.sort_by(|a, b| num(a, "ts").total_cmp(&num(b, "ts")));
        launches.sort_by(|a, b| num(a.0, "ts").total_cmp(&num(b.0, "ts")));
        // open ops: end time (as ordered bits) -> ops ending then
        let mut open: BTreeMap<(u64, usize), &Value> = BTreeMap::new();
        let mut next = 0;
        for (seq, (r, dur)) in launches.iter().enumerate() {
            let ts = num(r, "ts");
            while next < ops.len() && num(ops[next], "ts") <= ts {
                let end = num(ops[next], "ts") + num(ops[next], "dur");
                open.insert((end.to_bits(), next), ops[next]);
                next += 1;
            }
            // Drop ops that ended at or before the launch.
            let done: Vec<(u64, usize)> = open
                .range(..(ts.to_bits() + 1, 0))
                .map(|(k, _)| *k)
                .collect();
            for k in done {
                open.remove(&k);
            }
            let _ = seq;
            let around: Vec<&Value> = open.values().copied().collect();
            for o in &around {
                if o["name"] == name {
                    total_dev += dur;
                }
            }
            // The innermost: the latest start, then the shortest.
            // A graph replay's GPU ops have a row of their own (`graph
            // replay: <context>`): they count in the total of the ops
            // around the launch, never in their self time.
            let replay = r["name"]
                .as_str()
                .is_some_and(|n| n.contains("GraphLaunch"));
            if let Some(inner) = around.iter().max_by(|a, b| {
                num(a, "ts")
                    .total_cmp(&num(b, "ts"))
                    .then(num(b, "dur").total_cmp(&num(a, "dur")))
            }) {
                if inner["name"] == name && !replay {
                    self_dev += dur;
                }
            }
        }
    }
    (self_dev, total_dev)
}

/// Reference: step count and mean duration, from `ProfilerStep#N`, else
/// the serving frameworks' step annotations.
fn steps(events: &[Value]) -> (usize, f64) {
    let pick = |prefix: &str| -> Vec<f64> {
        events
            .iter()
            .filter(|e| is_op(e) && e["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
            .map(|e| num(e, "dur"))
            .collect()
    };
    let mut d = pick("ProfilerStep#");
    for p in ["step[", "execute_"] {
        if d.is_empty() {
            d = pick(p);
        }
    }
    (d.len(), d.iter().sum::<f64>() / d.len().max(1) as f64)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.01 + 1e-6 * a.abs().max(b.abs())
}

/// Checks a trace against the reference for the top kernels and one op.
fn check(name: &str, op: &str) {
    let events = load_json(name);
    let s = summary(name);

    let totals = kernel_totals(&events);
    for k in s.kernels.iter().take(5) {
        let want = totals[&k.name];
        assert!(
            close(k.total_us, want),
            "{name}: kernel {} total {} != reference {want}",
            k.short_name,
            k.total_us
        );
    }
    let mut ranked: Vec<(&String, &f64)> = totals.iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
    assert_eq!(&s.kernels[0].name, ranked[0].0, "{name}: top kernel");

    let (self_dev, total_dev) = op_device(&events, op);
    let row = s
        .ops
        .iter()
        .find(|o| o.name == op)
        .unwrap_or_else(|| panic!("{name}: no op {op}"));
    assert!(
        close(row.self_device_us, self_dev),
        "{name}: {op} self device {} != reference {self_dev}",
        row.self_device_us
    );
    assert!(
        close(row.device_total_us, total_dev),
        "{name}: {op} device total {} != reference {total_dev}",
        row.device_total_us
    );
    assert!(
        self_dev > 0.0 || total_dev > 0.0,
        "{name}: pick an op with device time"
    );

    let (n, mean) = steps(&events);
    assert_eq!(s.steps_stats.count as usize, n, "{name}: steps");
    if n > 0 {
        // The reference reads the steps' CPU ranges; the step time (the
        // statistics) is the later of the CPU and GPU sides, checked by its
        // invariants.
        let cpu_mean = s.steps.iter().map(|r| r.cpu_us).sum::<f64>() / n as f64;
        assert!(
            close(cpu_mean, mean),
            "{name}: mean CPU range of a step {cpu_mean} != {mean}"
        );
        step_times_hold(name, &s);
    }
}

/// The step times' invariants: no step is shorter than... nothing, each
/// ends no earlier than its CPU range would say of a step that ran alone
/// (a step's time is at least its CPU range or its GPU side, unless it
/// overlapped the step before), and together they span no more than the
/// trace's window.
pub(crate) fn step_times_hold(name: &str, s: &kinetoscope_types::Summary) {
    let total: f64 = s.steps.iter().map(|r| r.time()).sum();
    assert!(
        total <= s.trace.span_us * 1.000_001 + 1.0,
        "{name}: the steps' times add up to {total} µs, past the {} µs window",
        s.trace.span_us
    );
    for r in &s.steps {
        assert!(r.time() > 0.0, "{name}: {} has no time", r.name);
        assert!(
            r.wall_us + 1e-6 >= r.cpu_us,
            "{name}: {} wall {} < CPU {}",
            r.name,
            r.wall_us,
            r.cpu_us
        );
        assert!(
            r.time() <= r.wall_us + 1e-6 || r.wall_us == 0.0,
            "{name}: {} time {} > wall {}",
            r.name,
            r.time(),
            r.wall_us
        );
    }
}

#[test]
fn bare_array_2020() {
    check(
        "kineto-resnet50-2021-toplevel-list.json.gz",
        "aten::cudnn_convolution",
    );
}

#[test]
fn record_shapes_2021() {
    check(
        "kineto-v100-resnet50-2021-record-shapes.json.gz",
        "aten::add_",
    );
}

#[test]
fn external_id_is_correlation_2022() {
    // Regime A: a join on External id would match wrong ops here.
    check("hta-a100-train-rank3of8-2022.json.gz", "aten::mm");
}

#[test]
fn cuda_graphs_2022() {
    // 12 cudaGraphLaunch calls run 5,046 GPU ops; all belong to the op
    // around each launch.
    check(
        "hta-v100-train-rank1of2-2022.json.gz",
        "CompiledFunctionBackward",
    );
    let s = summary("hta-v100-train-rank1of2-2022.json.gz");
    assert_eq!(s.trace.attribution.graph_launches, 12);
    assert_eq!(s.trace.attribution.graph_gpu_ops, 5046);
}

#[test]
fn cuda_graphs_2023() {
    check(
        "hta-a100-80g-cudagraph-rank0of16.json.gz",
        "CompiledFunctionBackward",
    );
    let s = summary("hta-a100-80g-cudagraph-rank0of16.json.gz");
    assert_eq!(s.trace.attribution.graph_launches, 70);
    assert_eq!(s.trace.attribution.graph_gpu_ops, 345);
    // GPU ops launched before the window have no launch (FORMAT.md §6).
    assert_eq!(s.trace.attribution.without_launch, 872);
}

#[test]
fn nanosecond_epoch_timestamps_2024() {
    check(
        "hta-v100-resnet-ns-resolution-rank0.json.gz",
        "aten::convolution_backward",
    );
}

#[test]
fn h100_2025() {
    check("tracelens-h100-qwen1.5-0.5b-chat-infer.json.gz", "aten::mm");
}

#[test]
fn amd_mi300x_hip_graph_replay() {
    // hipGraphLaunch and its 361 kernels carry no External id: only time
    // nesting links them to their op.
    check("tracelens-mi300x-vllm-prefilldecode-graph-replay.json.gz", "execute_8192_context_9(sq8155sk8430sqsq7475785sqsk7671310)_generation_37(sq37sk34489sqsq37sqsk34489)");
    let s = summary("tracelens-mi300x-vllm-prefilldecode-graph-replay.json.gz");
    assert_eq!(s.trace.attribution.graph_launches, 25);
    assert_eq!(s.trace.attribution.graph_gpu_ops, 361);
}

#[test]
fn amd_mi300x_eager() {
    check(
        "tracelens-mi300x-qwen1.5-0.5b-chat-infer.json.gz",
        "aten::mm",
    );
}

/// Exact values read off the file by hand (FORMAT.md and SOURCES.md give
/// the counts): the triton example has one kernel, one step, and its kernel
/// is launched by cuLaunchKernel inside the Triton op.
#[test]
fn triton_example_by_hand() {
    let s = summary("hta-a100-triton-example.json.gz");
    assert_eq!(s.trace.kernels, 1);
    assert_eq!(s.steps_stats.count, 1);
    assert_eq!(s.kernels[0].name, "triton_poi_fused_add_cos_sin_0");
    let chain = &s.kernels[0].launched_by[0];
    assert_eq!(chain.launch, "cuLaunchKernel");
    assert_eq!(
        chain.chain.last().map(String::as_str),
        Some("triton_poi_fused_add_cos_sin_0")
    );
}

/// Reference for graph replays: (launches that ran GPU ops, their GPU ops,
/// device time in µs), by joining GPU ops to `*GraphLaunch*` runtime calls
/// on `args.correlation`.
fn graph_reference(events: &[Value]) -> (usize, usize, f64) {
    let graph_launches: HashMap<i64, &Value> = events
        .iter()
        .filter(|e| {
            is_runtime(e)
                && e["name"]
                    .as_str()
                    .is_some_and(|n| n.contains("GraphLaunch"))
        })
        .filter_map(|e| {
            e["args"]
                .get("correlation")
                .and_then(Value::as_i64)
                .map(|c| (c, e))
        })
        .collect();
    let mut used = std::collections::HashSet::new();
    let (mut ops, mut us) = (0, 0.0);
    for k in events.iter().filter(|e| is_gpu_op(e)) {
        if let Some(c) = k["args"].get("correlation").and_then(Value::as_i64) {
            if graph_launches.contains_key(&c) {
                used.insert(c);
                ops += 1;
                us += num(k, "dur");
            }
        }
    }
    (used.len(), ops, us)
}

/// Graph replays are first-class on every shared graph trace: counted as
/// the reference counts them, their device time in `graph replay: <context>`
/// rows (apart from the ops), and no finding asks for CUDA graphs.
#[test]
fn graph_replays_on_shared_traces() {
    for (name, replays, gpu_ops, mode, rows) in [
        (
            "hta-a100-80g-cudagraph-rank0of16.json.gz",
            70,
            345,
            "piecewise",
            &["graph replay: CompiledFunctionBackward", "graph replay: CompiledFunction"][..],
        ),
        (
            "hta-v100-train-rank1of2-2022.json.gz",
            12,
            5046,
            "piecewise",
            &["graph replay: CompiledFunctionBackward", "graph replay: CompiledFunction"][..],
        ),
        (
            "tracelens-mi300x-vllm-prefilldecode-graph-replay.json.gz",
            25,
            361,
            "graph",
            &["graph replay: execute_8192_context_9(sq8155sk8430sqsq7475785sqsk7671310)_generation_37(sq37sk34489sqsq37sqsk34489)"][..],
        ),
    ] {
        let events = load_json(name);
        let (ref_replays, ref_ops, ref_us) = graph_reference(&events);
        assert_eq!((ref_replays, ref_ops), (replays, gpu_ops), "{name}: the reference");
        let s = summary(name);
        let g = &s.graphs;
        assert_eq!((g.replays as usize, g.gpu_ops as usize, g.mode.as_str()), (replays, gpu_ops, mode), "{name}");
        assert!(close(g.device_us, ref_us), "{name}: {} vs {ref_us}", g.device_us);
        // Every replay here has a context (an op or annotation around it).
        let replay_rows: Vec<&kinetoscope_types::OpRow> = s.ops.iter().filter(|o| o.kind.as_str() == "graph").collect();
        let names: Vec<&str> = replay_rows.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, rows, "{name}");
        let in_rows: f64 = replay_rows.iter().map(|o| o.self_device_us).sum();
        assert!(close(in_rows, ref_us), "{name}: rows {in_rows} vs {ref_us}");
        assert_eq!(replay_rows.iter().map(|o| o.calls).sum::<u64>() as usize, replays, "{name}");
        assert!(close(s.trace.attribution.graph_replay_us, ref_us), "{name}");
        for f in &s.findings {
            assert!(!f.text.contains("CUDA graphs or fusion would help"), "{name}: {}", f.text);
            assert_ne!(f.kind, kinetoscope_types::FindingKind::LaunchBound, "{name}");
        }
        let gf = s.findings.iter().find(|f| f.kind == kinetoscope_types::FindingKind::GraphReplay).unwrap_or_else(|| panic!("{name}: no replay finding"));
        assert!(gf.text.starts_with(&format!("{replays} graph replays run ")), "{name}: {}", gf.text);
        // Kernels replayed by a graph name the launch in their chain.
        let replayed = s.kernels.iter().flat_map(|k| &k.launched_by).filter(|c| c.launch.contains("GraphLaunch")).count();
        assert!(replayed > 0, "{name}");
    }
}

/// The vLLM trace: one mixed step (its `execute_` annotation counts 9
/// prefill and 37 decode requests); the SGLang trace: one prefill step
/// (`step[EXTEND ...]`); no annotation is ever called an op.
#[test]
fn serving_steps_have_kinds_and_annotations_are_not_ops() {
    let s = summary("tracelens-mi300x-vllm-prefilldecode-graph-replay.json.gz");
    assert_eq!(s.steps.len(), 1);
    assert_eq!(s.steps[0].kind.map(|k| k.as_str()), Some("mixed"));
    assert_eq!(s.steps_stats.by_kind.len(), 1);
    let s = summary("tracelens-mi300x-sglang-qwen3-8b-prefilldecode.json.gz");
    assert_eq!(s.steps[0].kind.map(|k| k.as_str()), Some("prefill"));
    for name in [
        "tracelens-mi300x-vllm-prefilldecode-graph-replay.json.gz",
        "tracelens-mi300x-sglang-qwen3-8b-prefilldecode.json.gz",
    ] {
        let s = summary(name);
        for f in s
            .findings
            .iter()
            .filter(|f| f.kind == kinetoscope_types::FindingKind::TopOp)
        {
            let op = s
                .ops
                .iter()
                .find(|o| Some(&o.name) == f.name.as_ref())
                .unwrap();
            assert_eq!(op.kind.as_str(), "op", "{name}: {}", f.text);
        }
        let l = s
            .findings
            .iter()
            .find(|f| f.kind == kinetoscope_types::FindingKind::Layers)
            .unwrap();
        assert!(
            !l.text.contains("its top op is step["),
            "{name}: {}",
            l.text
        );
        assert!(
            !l.text.contains("its top op is execute_"),
            "{name}: {}",
            l.text
        );
    }
    // Python frames above the ops reach the model code.
    let s = summary("tracelens-mi300x-sglang-qwen3-8b-prefilldecode.json.gz");
    let mm = s
        .kernels
        .iter()
        .flat_map(|k| &k.launched_by)
        .find(|c| c.chain.last().map(String::as_str) == Some("aten::mm"))
        .unwrap();
    assert!(
        mm.python.iter().any(|f| f.contains("sglang/srt/models/")),
        "{:?}",
        mm.python
    );
}

/// torch's own `key_averages()` (calls, self CPU, CPU total per op name),
/// written beside each real torch capture in `shared/traces/torch/`: the
/// op table must agree within 1% on every name torch lists, the
/// same-name single-child rule (`_remove_dup_nodes`) included.
#[test]
fn the_op_table_matches_torchs_key_averages() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    let mut checked = 0;
    for capture in [
        "torch-cpu-decode-fp8cast-3dense-moe",
        "torch-cpu-decode-gathercast-3dense-moe",
        "torch-cpu-decode-stack-memory",
    ] {
        let s = summary(&format!("{capture}.json.gz"));
        let want: Vec<Value> = serde_json::from_reader(
            std::fs::File::open(dir.join(format!("torch/{capture}.key_averages.json"))).unwrap(),
        )
        .unwrap();
        let mut bad = Vec::new();
        for w in &want {
            let name = w["name"].as_str().unwrap();
            // torch folds every `ProfilerStep#N` into one key.
            let rows: Vec<_> = if name == "ProfilerStep*" {
                s.ops
                    .iter()
                    .filter(|o| o.name.starts_with("ProfilerStep#"))
                    .collect()
            } else {
                s.ops.iter().filter(|o| o.name == name).collect()
            };
            let calls: u64 = rows.iter().map(|o| o.calls).sum();
            let self_cpu: f64 = rows.iter().map(|o| o.self_cpu_us).sum();
            let total: f64 = rows.iter().map(|o| o.cpu_total_us).sum();
            let close = |a: f64, b: f64| (a - b).abs() <= 0.01 * b.abs().max(1.0);
            let (wc, ws, wt) = (
                w["calls"].as_u64().unwrap(),
                w["self_cpu_us"].as_f64().unwrap(),
                w["cpu_us"].as_f64().unwrap(),
            );
            if calls != wc || !close(self_cpu, ws) || !close(total, wt) {
                bad.push(format!(
                    "{name}: calls {calls} vs {wc}, self {self_cpu:.1} vs {ws:.1}, total {total:.1} vs {wt:.1}"
                ));
            }
            checked += 1;
        }
        // And by input shapes (`key_averages(group_by_input_shape=True)`),
        // summed over dtypes (torch keys by shapes alone), on every op whose
        // signatures all fit in the table (it keeps the largest 8).
        let by_shape: Vec<Value> = serde_json::from_reader(
            std::fs::File::open(dir.join(format!("torch/{capture}.by_shape.json"))).unwrap(),
        )
        .unwrap();
        for w in &by_shape {
            let (name, shapes) = (w["name"].as_str().unwrap(), w["shapes"].as_str().unwrap());
            let Some(op) = s
                .ops
                .iter()
                .find(|o| o.name == name && o.input_shapes.len() < 8)
            else {
                continue;
            };
            let groups: Vec<_> = op
                .input_shapes
                .iter()
                .filter(|g| g.shapes == shapes)
                .collect();
            if groups.is_empty() {
                continue;
            }
            let calls: u64 = groups.iter().map(|g| g.calls).sum();
            let self_cpu: f64 = groups.iter().map(|g| g.self_cpu_us).sum();
            let (wc, ws) = (
                w["calls"].as_u64().unwrap(),
                w["self_cpu_us"].as_f64().unwrap(),
            );
            if calls != wc || (self_cpu - ws).abs() > 0.01 * ws.max(1.0) {
                bad.push(format!(
                    "{name} {shapes}: calls {calls} vs {wc}, self {self_cpu:.1} vs {ws:.1}"
                ));
            }
            checked += 1;
        }
        assert!(bad.is_empty(), "{capture}:\n{}", bad.join("\n"));
    }
    assert!(checked > 150, "{checked}");
}

/// On a CPU-only capture the findings rank by self CPU time: the shared
/// FP8 capture's first finding is the FP8 -> BF16 cast of the KV cache,
/// once per layer per step (its truth: 12 layers, 6 steps), with its shape
/// and share of CPU time; its signature leads `aten::copy_`'s list.
#[test]
fn a_cpu_capture_finds_the_cast_by_cpu_time() {
    let s = summary("torch-cpu-decode-fp8cast-3dense-moe.json.gz");
    let first = crate::first_cause_op(&s);
    println!("{}", first.text);
    assert!(
        first
            .text
            .starts_with("aten::copy_ (Float8_e4m3fn -> BFloat16"),
        "{}",
        first.text
    );
    assert!(first.text.contains("12 calls per step"), "{}", first.text);
    assert!(first.text.contains("of CPU time"), "{}", first.text);
    assert!(first.impact_pct > 50.0, "{}", first.impact_pct);
    let copy = s.ops.iter().find(|o| o.name == "aten::copy_").unwrap();
    let g = &copy.input_shapes[0];
    assert_eq!(g.conversion.as_deref(), Some("Float8_e4m3fn -> BFloat16"));
    // The op row's bytes are that signature's, not an average.
    assert_eq!(copy.bytes_per_call, g.bytes_per_call);
}

/// The diff of the two shared CPU captures (the FP8 cast, then gather-then-
/// cast) ranks ops and signatures by self CPU time: `aten::copy_` and its
/// Float8_e4m3fn -> BFloat16 signature lead.
#[test]
fn the_diff_of_cpu_captures_ranks_by_cpu_time() {
    use kinetoscope_trace::diff::{diff, Side};
    let a = summary("torch-cpu-decode-fp8cast-3dense-moe.json.gz");
    let b = summary("torch-cpu-decode-gathercast-3dense-moe.json.gz");
    let d = diff(
        &Side {
            id: "a",
            name: "fp8 cast",
            summary: &a,
        },
        &Side {
            id: "b",
            name: "gather then cast",
            summary: &b,
        },
    );
    assert_eq!(d.op_time, kinetoscope_types::TimeBasis::Cpu);
    assert!(d.steps.change_pct < -50.0, "{}", d.steps.change_pct);
    assert_eq!(
        d.ops[0].name,
        "aten::copy_",
        "{:?}",
        d.ops.iter().map(|r| &r.name).collect::<Vec<_>>()
    );
    let texts: Vec<&str> = d.findings.iter().map(|f| f.text.as_str()).collect();
    println!("{texts:#?}");
    assert!(texts[1].starts_with("aten::copy_"), "{texts:?}");
    assert!(
        texts
            .iter()
            .any(|t| t.contains("Float8_e4m3fn -> BFloat16") && t.contains("self CPU time")),
        "{texts:?}"
    );
}

/// Layers on CPU captures: from `nn.Module: Block_N` frames where the
/// capture has them (`with_modules`), else from the repetition of the
/// top-level ops; the count and the dense/MoE kinds match each capture's
/// truth (`torch/*.truth.json`), and the numbers are CPU time.
#[test]
fn cpu_captures_have_their_layers() {
    for (capture, method) in [
        ("torch-cpu-decode-fp8cast-3dense-moe", "repetition"),
        ("torch-cpu-decode-gathercast-3dense-moe", "repetition"),
        ("torch-cpu-decode-stack-memory", "module"),
    ] {
        let truth: Value = serde_json::from_slice(
            &std::fs::read(path(&format!("torch/{capture}.truth.json"))).unwrap(),
        )
        .unwrap();
        let s = summary(&format!("{capture}.json.gz"));
        let l = &s.layers;
        assert_eq!(
            (l.method.as_str(), l.count),
            (method, truth["layers"].as_u64().unwrap()),
            "{capture}: {}",
            l.detail
        );
        assert_eq!(l.basis, kinetoscope_types::TimeBasis::Cpu);
        let dense = truth["dense_prefix"].as_u64().unwrap() as usize;
        let kinds: Vec<&str> = l
            .items
            .iter()
            .map(|r| r.kind.map_or("-", |k| k.as_str()))
            .collect();
        let want: Vec<&str> = (0..l.items.len())
            .map(|i| if i < dense { "dense" } else { "moe" })
            .collect();
        assert_eq!(kinds, want, "{capture}: {}", l.detail);
        // Most of a step's CPU time is in its layers.
        let inside: f64 = l.items.iter().map(|r| r.device_us).sum();
        assert!(
            inside > 0.5 * s.steps_stats.mean_us,
            "{capture}: {inside} of {}",
            s.steps_stats.mean_us
        );
    }
}

/// The shared CPU captures of the FP8 decoder: the cast converts the whole
/// `[2, 20000, 4, 64]` KV pool on every call while the attention inputs
/// grow with the sequence (`[201..206, 4, 64]`), so the whole-tensor
/// finding fires, and the first finding carries its advice; after the
/// gather-then-cast patch the cast follows the sequence and nothing fires.
/// A CPU-only capture names no GPU: no device, no peaks.
#[test]
fn the_whole_kv_pool_cast_on_cpu_captures() {
    use kinetoscope_types::FindingKind;
    let s = summary("torch-cpu-decode-fp8cast-3dense-moe.json.gz");
    assert_eq!(s.device, None);
    let copy = s.ops.iter().find(|o| o.name == "aten::copy_").unwrap();
    let g = &copy.input_shapes[0];
    let used = g.partly_used.as_ref().expect("the whole pool");
    // The model's truth: a 20000-entry pool, 6 steps after a 200-token
    // prompt, so the last step reads 206 entries.
    assert_eq!((used.dim, used.rows, used.used_rows), (1, 20000, 206));
    assert_eq!(g.pct_of_peak_bw, None);
    let whole = s
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::WholeTensor)
        .expect("whole-tensor finding");
    assert!(
        whole.text.contains("in every layer of every step"),
        "{}",
        whole.text
    );
    assert!(
        whole.text.contains("206 of its 20000 rows"),
        "{}",
        whole.text
    );
    assert!(
        crate::first_cause_op(&s).text.contains("gather, then cast"),
        "{}",
        crate::first_cause_op(&s).text
    );

    let patched = summary("torch-cpu-decode-gathercast-3dense-moe.json.gz");
    assert!(patched
        .ops
        .iter()
        .flat_map(|o| &o.input_shapes)
        .all(|g| g.partly_used.is_none()));
    assert!(patched
        .findings
        .iter()
        .all(|f| f.kind != FindingKind::WholeTensor && !f.text.contains("gather, then cast")));
}

/// torch's `key_averages()` of the real H200 captures (torch 2.11): every
/// CPU-side row (its GPU-side rows, kernels and GPU annotations, are the
/// kernel table's) has its calls exactly, and its self CPU and self device
/// time within 2% (or within 0.1% of the capture's total, for rows of a
/// few microseconds). Kineto's `overhead` events count as torch counts
/// them: `Command Buffer Full` is a child of the launch that blocked.
/// Two rows are known to differ, each for a reason of its own:
/// - the stack-and-memory capture's `ProfilerStep*`: torch 2.11's tree
///   leaves the step's Python frame out of its children (3.7 ms of self
///   time a step where the frame leaves 0.1 ms), while torch 2.15's CPU
///   captures count it as the analysis does (`the_op_table_matches_torchs_key_averages`);
/// - `Activity Buffer Request`: the profiler's own buffer requests, which
///   torch times from its own clock (twice the overhead event's length).
#[test]
fn the_op_table_matches_key_averages_on_h200_captures() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    let known = [
        ("torch-h200-decode-stack-memory-12l", "ProfilerStep*"),
        (
            "torch-h200-decode-gathercast-78l-5xpool",
            "Activity Buffer Request",
        ),
        (
            "torch-h200-decode-fp8cast-78l-5xpool",
            "Activity Buffer Request",
        ),
    ];
    let mut checked = 0;
    for capture in [
        "torch-h200-train-gpt6",
        "torch-h200-decode-hybrid-graph-48l",
        "torch-h200-decode-compiled-8l",
        "torch-h200-decode-stack-memory-12l",
        "torch-h200-decode-fp8cast-78l-5xpool",
        "torch-h200-decode-gathercast-78l-5xpool",
    ] {
        let s = summary(&format!("{capture}.json.gz"));
        let want: Vec<Value> = serde_json::from_reader(
            std::fs::File::open(dir.join(format!("torch/{capture}.key_averages.json"))).unwrap(),
        )
        .unwrap();
        let f = |w: &Value, k: &str| w[k].as_f64().unwrap_or(0.0);
        let cpu_rows: Vec<&Value> = want
            .iter()
            .filter(|w| {
                !(f(w, "self_cpu_us") == 0.0 && f(w, "cpu_us") == 0.0 && f(w, "device_us") > 0.0)
            })
            .collect();
        let total_cpu: f64 = cpu_rows.iter().map(|w| f(w, "self_cpu_us")).sum();
        let total_dev: f64 = want.iter().map(|w| f(w, "self_device_us")).sum();
        let mut bad = Vec::new();
        for w in cpu_rows {
            let name = w["name"].as_str().unwrap();
            let rows: Vec<_> = if name == "ProfilerStep*" {
                s.ops
                    .iter()
                    .filter(|o| o.name.starts_with("ProfilerStep#"))
                    .collect()
            } else {
                s.ops.iter().filter(|o| o.name == name).collect()
            };
            let calls: u64 = rows.iter().map(|o| o.calls).sum();
            let self_cpu: f64 = rows.iter().map(|o| o.self_cpu_us).sum();
            let self_dev: f64 = rows.iter().map(|o| o.self_device_us).sum();
            let (wc, ws, wd) = (
                w["calls"].as_u64().unwrap(),
                f(w, "self_cpu_us"),
                f(w, "self_device_us"),
            );
            let ok = calls == wc
                && (self_cpu - ws).abs() <= (0.02 * ws).max(0.001 * total_cpu)
                && (self_dev - wd).abs() <= (0.02 * wd).max(0.001 * total_dev);
            checked += 1;
            if ok {
                continue;
            }
            if known.contains(&(capture, name)) {
                eprintln!("{capture}: {name} differs, as documented above");
                continue;
            }
            bad.push(format!(
                "{name}: calls {calls} vs {wc}, self CPU {self_cpu:.1} vs {ws:.1}, self device {self_dev:.1} vs {wd:.1}"
            ));
        }
        assert!(bad.is_empty(), "{capture}:\n{}", bad.join("\n"));
    }
    assert!(checked > 300, "{checked}");
}

/// The story's cast without a tensor that grows beside it (a faithful
/// trace of a pool read whole by a kernel whose inputs are not recorded):
/// converting the same tensor several times in every step is still named,
/// as loop-invariant work; a small scalar conversion repeated as often is
/// not.
#[test]
fn a_repeated_cast_of_one_tensor_is_loop_invariant_work() {
    let mut ev: Vec<String> = Vec::new();
    for step in 0..4u64 {
        let t0 = 10_000 * step;
        ev.push(format!(r#"{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{step}","pid":1,"tid":1,"ts":{t0},"dur":9000}}"#));
        for layer in 0..6u64 {
            let ts = t0 + 100 + 1000 * layer;
            ev.push(format!(r#"{{"ph":"X","cat":"cpu_op","name":"aten::copy_","pid":1,"tid":1,"ts":{ts},"dur":600,"args":{{"Input Dims":[[2,4096,4,64],[2,4096,4,64],[]],"Input type":["c10::BFloat16","c10::Float8_e4m3fn","Scalar"]}}}}"#));
            ev.push(format!(r#"{{"ph":"X","cat":"cpu_op","name":"aten::copy_","pid":1,"tid":1,"ts":{},"dur":20,"args":{{"Input Dims":[[8],[8],[]],"Input type":["c10::BFloat16","float","Scalar"]}}}}"#, ts + 700));
        }
    }
    let json = format!(r#"{{"traceEvents":[{}]}}"#, ev.join(","));
    let t = kinetoscope_trace::read_trace(json.as_bytes(), &ReadOptions::default()).unwrap();
    let s = kinetoscope_trace::analyze(&t, &AnalysisOptions::default());
    let copy = s.ops.iter().find(|o| o.name == "aten::copy_").unwrap();
    let big = copy
        .input_shapes
        .iter()
        .find(|g| g.shapes.starts_with("[[2, 4096"))
        .unwrap();
    let small = copy
        .input_shapes
        .iter()
        .find(|g| g.shapes.starts_with("[[8]"))
        .unwrap();
    assert!(big.loop_invariant && big.partly_used.is_none());
    assert!(!small.loop_invariant);
    let first = &s.findings[0].text;
    assert!(first.contains("loop-invariant work"), "{first}");
    assert!(first.contains("[2, 4096, 4, 64]"), "{first}");
}
